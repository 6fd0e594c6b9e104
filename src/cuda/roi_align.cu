/* ROI align and its gradient on CUDA (spec roi_align.md §4, §7), with the
 * CPU backend's results to the bit (src/cpu/roi_align.c).
 *
 * Bit-identity comes from three things:
 * - The per-sample math is src/ops/roi_align_math.h, the same functions the
 *   CPU runs, in the same FLOAT32 evaluation order.
 * - This file is compiled with -fmad=false (cmake/cuda.cmake): nvcc would
 *   otherwise contract a*b+c into one FMA (one rounding instead of two), which
 *   the CPU never does (C11 mode, -ffp-contract=off). Division and sqrt are
 *   IEEE-rounded by default (no fast math).
 * - Every sum adds the same terms in the same order as the CPU.
 *
 * Forward: one thread per output element (ox fastest), its samples in §4.4
 * order (X outer, Y inner), summed (in FLOAT64, RA-16) or maximised.
 *
 * Gradient, deterministic without atomics:
 * - prepare_rois: per ROI its region, and per axis the samples that are in
 *   bounds and the pixel rows/columns their taps can reach (a bounding box).
 *   Sample coordinates are monotonic in the sample index (each FLOAT32 step of
 *   §4.2 is monotonic), so the samples whose taps reach one pixel row form one
 *   run, found by binary search.
 * - select_max (MAX only): per output element the first maximal sample (§7.1,
 *   RA-8), as the CPU selects it.
 * - gather_output_gradient (OutputGradientTensor): one block per (image, tile
 *   of 16x16 pixels, 8 channels); each thread owns one pixel and accumulates
 *   its 8 channels in FLOAT64 registers (RA-16). The block walks the ROIs of its image
 *   in increasing r, keeps those whose bounding box meets the tile, finds for
 *   each tile row and column the run of samples that reach it, and each thread
 *   then adds, in the order oy, ox, tx, ty, tap, the contributions that land on
 *   its pixel: the CPU's order restricted to that pixel, so the same bits.
 * - roi_channel_sums / roi_gradient_combine (OutputROIGradientTensor): one
 *   thread per (roi, channel) sums that channel's terms in FLOAT64 in §4.4
 *   order; one thread per ROI coordinate then adds the channel sums in the
 *   fixed group shape of roi_align_math.h, as the CPU does.
 * The temporaries (per-ROI geometry, the MAX selections, the channel sums)
 * live in the TemporaryResource the plan sizes (grad_scratch_layout). */
#include "../core/half.h"
#include "../ops/roi.h"
#include "../ops/roi_align_math.h"
#include "cuda.h"
/* After half.h: it brings CUDA's own `half` type, which half.h's parameter names would shadow. */
#include <cooperative_groups.h>

namespace {

constexpr unsigned kThreads = 256;

/* Helpers and per-element bodies are host and device functions: the kernels
 * are thin loops around them, and tests/test_cuda_roi_replay.cu replays
 * them on the host against the CPU backend (CI has no GPU). */
#define DML_CUDA_FN __host__ __device__

__device__ uint64_t grid_start() { return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ uint64_t grid_step() { return (uint64_t)gridDim.x * blockDim.x; }

/* ---- Elements: T is float or uint16_t (binary16 bits) ---- */

DML_CUDA_FN float load_value(const float* base, uint64_t offset) { return base[offset]; }
DML_CUDA_FN float load_value(const uint16_t* base, uint64_t offset) { return dml_half_to_float(base[offset]); }
/* FLOAT16 results are rounded once, here (RA-13). */
DML_CUDA_FN void store_value(float* base, uint64_t offset, float value) { base[offset] = value; }
DML_CUDA_FN void store_value(uint16_t* base, uint64_t offset, float value) { base[offset] = dml_float_to_half(value); }

/* ---- Regions (§4.1) ---- */

/* The ROI rows and batch indices, whatever their allowed rank: the last two
 * ROI dimensions are {R, 4}, the last batch-index dimension is R (validated). */
struct roi_source {
    const void* rois;
    uint64_t row_stride, column_stride;
    const void* batch_indices;
    uint64_t batch_stride;
    bool batch_64;
};

roi_source roi_source_make(const dml_tensor* rois, const void* roi_data, const dml_tensor* batch_indices,
                           const void* batch_data) {
    roi_source source;
    source.rois = roi_data;
    source.row_stride = rois->strides[rois->rank - 2];
    source.column_stride = rois->strides[rois->rank - 1];
    source.batch_indices = batch_data;
    source.batch_stride = batch_indices->strides[batch_indices->rank - 1];
    source.batch_64 = batch_indices->type == DML_TENSOR_DATA_TYPE_UINT64;
    return source;
}

/* The sizes every kernel of the family needs: the image {N, C, H, W} and the
 * output {R, C, OH, OW}. */
struct align_shape {
    uint32_t batch, channels, height, width;
    uint32_t roi_count, out_height, out_width;
};

/* Coordinates {r, c, oy, ox} of output element i (row-major over {R, C, OH, OW}). */
struct output_coords {
    uint32_t r, c, oy, ox;
};

DML_CUDA_FN output_coords output_coords_of(const align_shape& s, uint64_t i) {
    output_coords o;
    o.ox = (uint32_t)(i % s.out_width);
    uint64_t rest = i / s.out_width;
    o.oy = (uint32_t)(rest % s.out_height);
    rest /= s.out_height;
    o.c = (uint32_t)(rest % s.channels);
    o.r = (uint32_t)(rest / s.channels);
    return o;
}

struct roi_region {
    uint64_t batch; /* as given; >= N means no image (RA-12) */
    dml_roi_axis x, y;
};

template <class T>
DML_CUDA_FN roi_region region_make(const roi_source& source, uint32_t r, const dml_roi_align_params& p,
                                   const align_shape& s) {
    const T* rois = (const T*)source.rois;
    uint64_t row = r * source.row_stride;
    float corners[4];
    for (uint32_t k = 0; k < 4; k++)
        corners[k] = load_value(rois, row + k * source.column_stride);
    uint64_t batch_offset = r * source.batch_stride;
    roi_region region;
    region.batch = source.batch_64 ? ((const uint64_t*)source.batch_indices)[batch_offset]
                                   : ((const uint32_t*)source.batch_indices)[batch_offset];
    /* Rows are [x1, y1, x2, y2]. */
    region.x = dml_roi_axis_make(corners[0], corners[2], p.spatial_scale_x, s.out_width, s.width, &p);
    region.y = dml_roi_axis_make(corners[1], corners[3], p.spatial_scale_y, s.out_height, s.height, &p);
    return region;
}

/* One (image, channel) plane of a {N, C, H, W} tensor. */
template <class T> struct plane_view {
    const T* base;
    uint64_t row_stride, column_stride;
    DML_CUDA_FN float at(uint32_t y, uint32_t x) const { return load_value(base, y * row_stride + x * column_stride); }
};

template <class T>
DML_CUDA_FN plane_view<T> plane_make(const void* base, const uint64_t strides[4], uint64_t n, uint32_t c) {
    plane_view<T> view = {(const T*)base + n * strides[0] + c * strides[1], strides[2], strides[3]};
    return view;
}

/* A channel's plane of a packed NCHW image or (ChannelsLast) of a packed
 * channels-last one, pixels `channels` elements apart (fewer than 2^32
 * elements): 32-bit indices, and binary16 widened by the GPU's exact
 * conversion. */
template <class T, bool ChannelsLast> struct packed_plane {
    const T* base;
    uint32_t width, channels;
    DML_CUDA_FN float at(uint32_t y, uint32_t x) const {
        uint32_t i = y * width + x;
        if constexpr (ChannelsLast) i *= channels;
#ifdef __CUDA_ARCH__
        return dml_cuda_widen(base[i]);
#else
        return load_value(base, i); /* the same numbers (the host replay) */
#endif
    }
};

/* The value of an in-bounds sample (§4.3) from its X and Y taps; Plane:
 * plane_view or packed_plane. */
template <class Plane>
DML_CUDA_FN float sample_value(const Plane& plane, const dml_roi_axis_sample& sx, const dml_roi_axis_sample& sy,
                               bool linear) {
    if (!linear) return plane.at(sy.first, sx.first);
    return dml_roi_bilinear(plane.at(sy.first, sx.first), plane.at(sy.first, sx.second), plane.at(sy.second, sx.first),
                            plane.at(sy.second, sx.second), sx.fraction, sy.fraction);
}

void copy_strides(uint64_t dst[4], const dml_tensor* tensor) {
    for (int i = 0; i < 4; i++)
        dst[i] = tensor->strides[i];
}

/* ---- Forward (§4) ---- */

struct forward_problem {
    dml_roi_align_params params;
    align_shape shape;
    roi_source source;
    const void* input;
    uint64_t in_strides[4];
    void* output;
    uint64_t out_strides[4];
    uint64_t count; /* output elements */
};

/* 2^-k for count = 2^k (k < 64), exactly. */
DML_CUDA_FN double power_of_two_inverse(uint64_t count) {
#ifdef __CUDA_ARCH__
    const uint64_t k = (uint64_t)(__ffsll((long long)count) - 1);
    return __longlong_as_double((long long)((1023 - k) << 52));
#else
    return ldexp(1.0, -__builtin_ctzll(count));
#endif
}

/* dml_roi_average of an output's FLOAT64 sums over its `count` samples. For
 * S = 2^k the product by 2^-k is that quotient exactly (the same real number,
 * rounded once), without the FLOAT64 division. */
struct sample_divisor {
    uint64_t count;
    bool power_of_two;
    double inverse; /* 2^-k */
    DML_CUDA_FN float average(double sum) const {
        return power_of_two ? (float)(sum * inverse) : (float)(sum / (double)count);
    }
};

DML_CUDA_FN sample_divisor sample_divisor_make(uint64_t count) {
    const bool power_of_two = (count & (count - 1)) == 0;
    return {count, power_of_two, power_of_two ? power_of_two_inverse(count) : 0.0};
}

/* The values of output (oy, ox) of an imaged region in K planes at once
 * (their loads are independent, so a thread keeps 4 K in flight): each
 * plane's samples in §4.4 order (X outer, Y inner) summed in FLOAT64 or
 * maximised. sample_x(tx) and sample_y(ty) give the samples of each axis
 * (computed, or precomputed); Plane: plane_view or packed_plane. */
template <unsigned K, class Plane, class SampleX, class SampleY>
DML_CUDA_FN __forceinline__ void reduce_outputs(const dml_roi_align_params& p, const roi_region& region,
                                                const Plane planes[K], uint32_t oy, uint32_t ox, SampleX sample_x,
                                                SampleY sample_y, float results[K]) {
    uint64_t per_x = region.x.per_output, per_y = region.y.per_output;
    double sum[K];
    float best[K];
    DML_UNROLL
    for (unsigned j = 0; j < K; j++) {
        sum[j] = 0.0;
        best[j] = 0.0f;
    }
    bool first = true;
    for (uint64_t tx = ox * per_x; tx < ox * per_x + per_x; tx++) {
        dml_roi_axis_sample sx = sample_x(tx);
        for (uint64_t ty = oy * per_y; ty < oy * per_y + per_y; ty++) {
            dml_roi_axis_sample sy = sample_y(ty);
            bool outside = sx.outside || sy.outside;
            DML_UNROLL
            for (unsigned j = 0; j < K; j++) {
                /* Out-of-bounds samples take part with OutOfBoundsInputValue (§4.4). */
                float value = outside ? p.out_of_bounds_value : sample_value(planes[j], sx, sy, p.interpolation_linear);
                if (p.reduction_max) {
                    bool take = first || dml_nan_aware_greater(value, best[j]);
                    best[j] = take ? value : best[j];
                } else {
                    sum[j] += value;
                }
            }
            first = false;
        }
    }
    /* sample_divisor, spelled out: calling it here gave the packed FLOAT16
     * channels-last kernel 73 registers instead of 64 and 0.175 ms instead of
     * 0.131 on an H100 (round 8). */
    const uint64_t count = (uint64_t)per_x * per_y;
    const bool power_of_two = (count & (count - 1)) == 0;
    const double inverse = power_of_two ? power_of_two_inverse(count) : 0.0;
    DML_UNROLL
    for (unsigned j = 0; j < K; j++) {
        float average = power_of_two ? (float)(sum[j] * inverse) : dml_roi_average(sum[j], &region.x, &region.y);
        results[j] = p.reduction_max ? best[j] : average;
    }
}

template <class T> DML_CUDA_FN void forward_element(const forward_problem& f, uint64_t i) {
    const dml_roi_align_params& p = f.params;
    const align_shape& s = f.shape;
    const output_coords o = output_coords_of(s, i);
    const uint32_t r = o.r, c = o.c, oy = o.oy, ox = o.ox;
    uint64_t out = r * f.out_strides[0] + c * f.out_strides[1] + oy * f.out_strides[2] + ox * f.out_strides[3];
    roi_region region = region_make<T>(f.source, r, p, s);
    if (region.batch >= s.batch) { /* RA-12: no image to read */
        store_value((T*)f.output, out, p.out_of_bounds_value);
        return;
    }
    plane_view<T> plane[1] = {plane_make<T>(f.input, f.in_strides, region.batch, c)};
    auto sample_x = [&](uint64_t tx) { return dml_roi_axis_sample_at(&region.x, tx, &p); };
    auto sample_y = [&](uint64_t ty) { return dml_roi_axis_sample_at(&region.y, ty, &p); };
    float value[1];
    reduce_outputs<1>(p, region, plane, oy, ox, sample_x, sample_y, value);
    store_value((T*)f.output, out, value[0]);
}

template <class T> __global__ void roi_align_forward(const forward_problem f) {
    for (uint64_t i = grid_start(); i < f.count; i += grid_step())
        forward_element<T>(f, i);
}

/* ---- Gradient (§7) ---- */

/* Where the samples of one axis of a region reach (see the file comment).
 * Positions s run over the samples in the order of increasing coordinate:
 * t = s, or t = count - 1 - s when the coordinates decrease (mirrored
 * regions, RA-3). */
struct axis_reach {
    bool decreasing;
    uint64_t inside_begin, inside_end; /* positions of the in-bounds samples */
    uint32_t low, high;                /* the pixels their taps reach; low > high: none */
};

/* A ROI of the gradient: its region and reach, and whether it has an image. */
struct gradient_roi {
    roi_region region;
    axis_reach x, y;
    bool has_image; /* batch < N (else no gradient, RA-12) and some sample in bounds */
};

/* What the tile scan reads of every ROI: its image and the pixels its taps reach. */
struct roi_box {
    uint32_t batch; /* UINT32_MAX: contributes nowhere */
    uint32_t row_low, row_high, column_low, column_high;
};

DML_CUDA_FN uint64_t sample_index(const dml_roi_axis& axis, bool decreasing, uint64_t position) {
    return decreasing ? axis.count - 1 - position : position;
}

/* -1: the sample lies before pixel `pixel` along the axis (out of bounds low,
 * NaN, or taps below it); 0: a tap of the sample is that pixel; 1: after it.
 * Non-decreasing in the position. */
DML_CUDA_FN int reach_rank(const dml_roi_axis& axis, bool decreasing, uint64_t position, uint32_t pixel,
                           const dml_roi_align_params& p) {
    dml_roi_axis_sample sample = dml_roi_axis_sample_at(&axis, sample_index(axis, decreasing, position), &p);
    if (sample.outside) return (double)sample.coord >= -1.0 ? 1 : -1;
    if (sample.second < pixel) return -1;
    if (sample.first > pixel) return 1;
    return 0;
}

/* -1 / 0 / 1: out of bounds low (or NaN), in bounds, out of bounds high. */
DML_CUDA_FN int inside_rank(const dml_roi_axis& axis, bool decreasing, uint64_t position,
                            const dml_roi_align_params& p) {
    dml_roi_axis_sample sample = dml_roi_axis_sample_at(&axis, sample_index(axis, decreasing, position), &p);
    if (!sample.outside) return 0;
    return (double)sample.coord >= -1.0 ? 1 : -1;
}

/* The first position in [begin, end) whose rank exceeds `above` (end if none). */
template <class Rank> DML_CUDA_FN uint64_t first_above(uint64_t begin, uint64_t end, int above, Rank rank) {
    while (begin < end) {
        uint64_t middle = begin + (end - begin) / 2;
        if (rank(middle) > above)
            end = middle;
        else
            begin = middle + 1;
    }
    return begin;
}

DML_CUDA_FN axis_reach reach_make(const dml_roi_axis& axis, const dml_roi_align_params& p) {
    axis_reach reach;
    float first = dml_roi_sample_coord(&axis, 0, &p), last = dml_roi_sample_coord(&axis, axis.count - 1, &p);
    reach.decreasing = last < first;
    auto rank = [&](uint64_t position) { return inside_rank(axis, reach.decreasing, position, p); };
    reach.inside_begin = first_above(0, axis.count, -1, rank);
    reach.inside_end = first_above(reach.inside_begin, axis.count, 0, rank);
    reach.low = 1;
    reach.high = 0;
    if (reach.inside_begin < reach.inside_end) {
        reach.low = dml_roi_axis_sample_at(&axis, sample_index(axis, reach.decreasing, reach.inside_begin), &p).first;
        reach.high =
            dml_roi_axis_sample_at(&axis, sample_index(axis, reach.decreasing, reach.inside_end - 1), &p).second;
    }
    return reach;
}

/* The samples [begin, end) (sample indices) whose taps include `pixel`. */
struct sample_run {
    uint64_t begin, end;
};

DML_CUDA_FN sample_run reach_of_pixel(const dml_roi_axis& axis, const axis_reach& reach, uint32_t pixel,
                                      const dml_roi_align_params& p) {
    sample_run run = {0, 0};
    if (pixel < reach.low || pixel > reach.high) return run;
    auto rank = [&](uint64_t position) { return reach_rank(axis, reach.decreasing, position, pixel, p); };
    uint64_t begin = first_above(reach.inside_begin, reach.inside_end, -1, rank);
    uint64_t end = first_above(begin, reach.inside_end, 0, rank);
    if (begin >= end) return run;
    if (reach.decreasing) {
        run.begin = axis.count - end;
        run.end = axis.count - begin;
    } else {
        run.begin = begin;
        run.end = end;
    }
    return run;
}

struct grad_problem {
    dml_roi_align_params params;
    align_shape shape;
    roi_source source;
    const void* input; /* NULL when InputTensor is absent */
    uint64_t in_strides[4];
    const void* input_gradient;
    uint64_t dy_strides[4];
    void* output_gradient; /* NULL when absent */
    uint64_t dx_strides[4];
    void* roi_gradient; /* NULL when absent */
    uint64_t roi_gradient_row_stride, roi_gradient_column_stride;
    /* Temporaries */
    gradient_roi* rois;   /* [R] */
    roi_box* boxes;       /* [R] */
    uint64_t* selected;   /* MAX: [R, C, OH, OW] the selected sample (local index) */
    double* channel_sums; /* [R, C, 4] */
    uint32_t tiles_y, tiles_x, chunks;
    uint64_t tasks;
};

template <class T> DML_CUDA_FN void prepare_roi(const grad_problem& g, uint64_t r) {
    gradient_roi info;
    info.region = region_make<T>(g.source, (uint32_t)r, g.params, g.shape);
    info.x = reach_make(info.region.x, g.params);
    info.y = reach_make(info.region.y, g.params);
    info.has_image = info.region.batch < g.shape.batch && info.x.low <= info.x.high && info.y.low <= info.y.high;
    g.rois[r] = info;
    roi_box box = {info.has_image ? (uint32_t)info.region.batch : UINT32_MAX, info.y.low, info.y.high, info.x.low,
                   info.x.high};
    g.boxes[r] = box;
}

template <class T> __global__ void prepare_rois(const grad_problem g) {
    for (uint64_t r = grid_start(); r < g.shape.roi_count; r += grid_step())
        prepare_roi<T>(g, r);
}

/* MAX (§7.1, RA-8): the first sample, in §4.4 order, whose value is the
 * maximum; out-of-bounds samples compare as 0. Stored as (tx - ox sX) sY +
 * (ty - oy sY). */
template <class T> DML_CUDA_FN void select_max_element(const grad_problem& g, uint64_t i) {
    const align_shape& s = g.shape;
    const dml_roi_align_params& p = g.params;
    const output_coords o = output_coords_of(s, i);
    const uint32_t r = o.r, c = o.c, oy = o.oy, ox = o.ox;
    const gradient_roi& info = g.rois[r];
    if (!info.has_image) return; /* never read */
    const roi_region& region = info.region;
    plane_view<T> plane = plane_make<T>(g.input, g.in_strides, region.batch, c);
    uint64_t per_x = region.x.per_output, per_y = region.y.per_output;
    float best = 0.0f;
    bool first = true;
    uint64_t best_index = 0;
    for (uint64_t tx = ox * per_x; tx < ox * per_x + per_x; tx++) {
        dml_roi_axis_sample sx = dml_roi_axis_sample_at(&region.x, tx, &p);
        for (uint64_t ty = oy * per_y; ty < oy * per_y + per_y; ty++) {
            dml_roi_axis_sample sy = dml_roi_axis_sample_at(&region.y, ty, &p);
            float value = sx.outside || sy.outside ? 0.0f : sample_value(plane, sx, sy, p.interpolation_linear);
            if (first || dml_nan_aware_greater(value, best)) {
                best = value;
                best_index = (tx - ox * per_x) * per_y + (ty - oy * per_y);
            }
            first = false;
        }
    }
    g.selected[i] = best_index;
}

template <class T> __global__ void select_max(const grad_problem g) {
    const align_shape& s = g.shape;
    uint64_t count = (uint64_t)s.roi_count * s.channels * s.out_height * s.out_width;
    for (uint64_t i = grid_start(); i < count; i += grid_step())
        select_max_element<T>(g, i);
}

/* ---- OutputGradientTensor (§7.2) ---- */

constexpr unsigned kTile = 16;                         /* pixels per tile side: kTile * kTile == kThreads */
constexpr unsigned kChunk = 8;                         /* channels per block */
constexpr unsigned kRunBatch = kThreads / (2 * kTile); /* ROIs whose runs are found at once */
static_assert(kTile * kTile == kThreads, "one thread per pixel of a tile");

/* Adds the contributions of ROI r to pixel (y, x) of image n, channels
 * [c0, c0 + kChunk), in the CPU's order: oy, ox, tx, ty, then the taps
 * top-left, top-right, bottom-left, bottom-right (coinciding taps add twice).
 * rows/columns: the samples whose taps reach y / x. */
template <class T>
DML_CUDA_FN __forceinline__ void gather_roi(const grad_problem& g, uint32_t r, sample_run rows, sample_run columns,
                                            uint32_t y, uint32_t x, uint32_t c0, double acc[kChunk]) {
    const dml_roi_align_params& p = g.params;
    const align_shape& s = g.shape;
    const roi_region region = g.rois[r].region;
    uint64_t per_x = region.x.per_output, per_y = region.y.per_output;
    float average_weight = dml_roi_average_weight(&region.x, &region.y);
    const T* dy = (const T*)g.input_gradient + r * g.dy_strides[0];
    uint64_t selected_base = (uint64_t)r * s.channels;
    for (uint64_t oy = rows.begin / per_y; oy <= (rows.end - 1) / per_y; oy++) {
        uint64_t ty_begin = oy * per_y > rows.begin ? oy * per_y : rows.begin;
        uint64_t ty_end = oy * per_y + per_y < rows.end ? oy * per_y + per_y : rows.end;
        for (uint64_t ox = columns.begin / per_x; ox <= (columns.end - 1) / per_x; ox++) {
            uint64_t tx_begin = ox * per_x > columns.begin ? ox * per_x : columns.begin;
            uint64_t tx_end = ox * per_x + per_x < columns.end ? ox * per_x + per_x : columns.end;
            /* g * w per channel (MAX: w = 1 for the selected sample only). */
            float weighted[kChunk];
            uint64_t selected[kChunk];
            DML_UNROLL
            for (unsigned j = 0; j < kChunk; j++) {
                weighted[j] = 0.0f;
                selected[j] = ~(uint64_t)0;
                uint64_t c = (uint64_t)c0 + j;
                if (c >= s.channels) continue;
                float gradient = load_value(dy, c * g.dy_strides[1] + oy * g.dy_strides[2] + ox * g.dy_strides[3]);
                if (p.reduction_max) {
                    weighted[j] = gradient;
                    selected[j] = g.selected[((selected_base + c) * s.out_height + oy) * s.out_width + ox];
                } else {
                    weighted[j] = gradient * average_weight;
                    selected[j] = 0;
                }
            }
            for (uint64_t tx = tx_begin; tx < tx_end; tx++) {
                dml_roi_axis_sample sx = dml_roi_axis_sample_at(&region.x, tx, &p);
                if (sx.outside) continue; /* no gradient (§7.2) */
                bool x_first = sx.first == x, x_second = p.interpolation_linear && sx.second == x;
                if (!x_first && !x_second) continue;
                for (uint64_t ty = ty_begin; ty < ty_end; ty++) {
                    dml_roi_axis_sample sy = dml_roi_axis_sample_at(&region.y, ty, &p);
                    if (sy.outside) continue;
                    bool y_first = sy.first == y, y_second = p.interpolation_linear && sy.second == y;
                    if (!y_first && !y_second) continue;
                    uint64_t local = p.reduction_max ? (tx - ox * per_x) * per_y + (ty - oy * per_y) : 0;
                    if (!p.interpolation_linear) { /* the pixel it read, weight 1 */
                        DML_UNROLL
                        for (unsigned j = 0; j < kChunk; j++)
                            if (selected[j] == local) acc[j] += weighted[j];
                        continue;
                    }
                    float weights[4];
                    dml_roi_bilinear_weights(sx.fraction, sy.fraction, weights);
                    DML_UNROLL
                    for (unsigned j = 0; j < kChunk; j++) {
                        if (selected[j] != local) continue;
                        if (y_first && x_first) acc[j] += weighted[j] * weights[0];
                        if (y_first && x_second) acc[j] += weighted[j] * weights[1];
                        if (y_second && x_first) acc[j] += weighted[j] * weights[2];
                        if (y_second && x_second) acc[j] += weighted[j] * weights[3];
                    }
                }
            }
        }
    }
}

/* One block task: image n, the tile whose first pixel is (y0, x0), channels
 * [c0, c0 + kChunk). Channel chunks vary fastest: the blocks of one tile run
 * together and share its ROIs in cache. */
struct tile_task {
    uint32_t n, y0, x0, c0;
};

DML_CUDA_FN tile_task tile_task_at(const grad_problem& g, uint64_t task) {
    tile_task t;
    t.c0 = (uint32_t)(task % g.chunks) * kChunk;
    uint64_t rest = task / g.chunks;
    t.x0 = (uint32_t)(rest % g.tiles_x) * kTile;
    rest /= g.tiles_x;
    t.y0 = (uint32_t)(rest % g.tiles_y) * kTile;
    t.n = (uint32_t)(rest / g.tiles_y);
    return t;
}

/* Whether ROI box can reach a pixel of the tile (its image, rows and columns). */
DML_CUDA_FN bool box_meets_tile(const roi_box& box, const tile_task& t) {
    return box.batch == t.n && box.row_low < (uint64_t)t.y0 + kTile && box.row_high >= t.y0 &&
           box.column_low < (uint64_t)t.x0 + kTile && box.column_high >= t.x0;
}

/* Slot [0, kTile): the Y samples that reach tile row y0 + slot; slot
 * [kTile, 2 kTile): the X samples that reach column x0 + slot - kTile. */
DML_CUDA_FN sample_run tile_run(const grad_problem& g, const gradient_roi& info, const tile_task& t, uint32_t slot) {
    sample_run run = {0, 0};
    if (slot < kTile) {
        if ((uint64_t)t.y0 + slot < g.shape.height) run = reach_of_pixel(info.region.y, info.y, t.y0 + slot, g.params);
    } else if ((uint64_t)t.x0 + slot - kTile < g.shape.width) {
        run = reach_of_pixel(info.region.x, info.x, t.x0 + slot - kTile, g.params);
    }
    return run;
}

/* The FLOAT64 sums of one pixel, rounded to FLOAT32 (then FLOAT16) as the
 * CPU rounds them; channels past C are not stored. */
template <class T>
DML_CUDA_FN void store_pixel(const grad_problem& g, const tile_task& t, uint32_t y, uint32_t x,
                             const double acc[kChunk]) {
    uint64_t pixel = (uint64_t)t.n * g.dx_strides[0] + y * g.dx_strides[2] + x * g.dx_strides[3];
    for (unsigned j = 0; j < kChunk; j++)
        if ((uint64_t)t.c0 + j < g.shape.channels)
            store_value((T*)g.output_gradient, pixel + (t.c0 + j) * g.dx_strides[1], (float)acc[j]);
}

template <class T> __global__ void __launch_bounds__(kThreads, 2) gather_output_gradient(const grad_problem g) {
    __shared__ uint32_t touching[kThreads]; /* ROIs of the image that meet the tile, increasing r */
    __shared__ uint32_t warp_counts[kThreads / 32];
    __shared__ sample_run runs[kRunBatch][2 * kTile]; /* per ROI: kTile rows, then kTile columns */
    const align_shape& s = g.shape;
    const unsigned thread = threadIdx.x, warp = thread / 32, lane = thread % 32;
    for (uint64_t task = blockIdx.x; task < g.tasks; task += gridDim.x) {
        tile_task t = tile_task_at(g, task);
        uint64_t y = (uint64_t)t.y0 + thread / kTile, x = (uint64_t)t.x0 + thread % kTile;
        bool in_plane = y < s.height && x < s.width;
        double acc[kChunk];
#pragma unroll
        for (unsigned j = 0; j < kChunk; j++)
            acc[j] = 0.0;

        for (uint32_t base = 0; base < s.roi_count; base += kThreads) {
            /* The ROIs [base, base + kThreads) that meet the tile, compacted in increasing r. */
            uint32_t r = base + thread;
            bool hit = r < s.roi_count && box_meets_tile(g.boxes[r], t);
            unsigned ballot = __ballot_sync(0xFFFFFFFFu, hit);
            if (lane == 0) warp_counts[warp] = __popc(ballot);
            __syncthreads();
            uint32_t offset = 0, total = 0;
            for (unsigned w = 0; w < kThreads / 32; w++) {
                offset += w < warp ? warp_counts[w] : 0;
                total += warp_counts[w];
            }
            if (hit) touching[offset + __popc(ballot & ((1u << lane) - 1u))] = r;
            __syncthreads();

            for (uint32_t batch = 0; batch < total; batch += kRunBatch) {
                /* One thread per (ROI, tile row or column): its run of samples. */
                uint32_t k = batch + thread / (2 * kTile), slot = thread % (2 * kTile);
                if (k < total) runs[thread / (2 * kTile)][slot] = tile_run(g, g.rois[touching[k]], t, slot);
                __syncthreads();
                /* Each thread adds what the batch's ROIs give its pixel, in increasing r. */
                uint32_t batch_end = total - batch < kRunBatch ? total : batch + kRunBatch;
                for (uint32_t next = batch; next < batch_end; next++) {
                    sample_run rows = runs[next - batch][thread / kTile];
                    sample_run columns = runs[next - batch][kTile + thread % kTile];
                    if (in_plane && rows.begin < rows.end && columns.begin < columns.end)
                        gather_roi<T>(g, touching[next], rows, columns, (uint32_t)y, (uint32_t)x, t.c0, acc);
                }
                __syncthreads();
            }
        }
        if (in_plane) store_pixel<T>(g, t, (uint32_t)y, (uint32_t)x, acc);
    }
}

/* ---- OutputROIGradientTensor (§7.3) ---- */

/* One sample's four terms into the channel's FLOAT64 sums (the image gradient
 * in the floor/ceil form of §7.3). */
template <class T>
DML_CUDA_FN void add_box_terms(const plane_view<T>& plane, const roi_region& region, uint64_t tx, uint64_t ty,
                               const dml_roi_axis_sample& sx, const dml_roi_axis_sample& sy, float weighted_gradient,
                               const dml_roi_align_params& p, double sums[4]) {
    dml_roi_gradient_taps taps_x = dml_roi_gradient_taps_at(sx.coord, region.x.extent);
    dml_roi_gradient_taps taps_y = dml_roi_gradient_taps_at(sy.coord, region.y.extent);
    float grad_x, grad_y;
    dml_roi_image_gradient(plane.at(taps_y.low, taps_x.low), plane.at(taps_y.low, taps_x.high),
                           plane.at(taps_y.high, taps_x.low), plane.at(taps_y.high, taps_x.high), taps_x.fraction,
                           taps_y.fraction, &grad_x, &grad_y);
    float terms[4];
    dml_roi_box_terms(&region.x, &region.y, tx, ty, &p, weighted_gradient, grad_x, grad_y, terms);
    for (int k = 0; k < 4; k++)
        sums[k] += terms[k];
}

/* One thread per (roi, channel): that channel's sums from zero, over oy, ox
 * and the weighted in-bounds samples in §4.4 order (the CPU's visit order). */
template <class T> DML_CUDA_FN void channel_sums_element(const grad_problem& g, uint64_t i) {
    const align_shape& s = g.shape;
    const dml_roi_align_params& p = g.params;
    uint32_t c = (uint32_t)(i % s.channels);
    uint32_t r = (uint32_t)(i / s.channels);
    double sums[4] = {0.0, 0.0, 0.0, 0.0};
    const gradient_roi& info = g.rois[r];
    /* No image: no gradient (RA-12). Nothing in bounds: no term either. */
    if (info.has_image) {
        const roi_region& region = info.region;
        plane_view<T> plane = plane_make<T>(g.input, g.in_strides, region.batch, c);
        const T* dy = (const T*)g.input_gradient + r * g.dy_strides[0] + c * g.dy_strides[1];
        uint64_t per_x = region.x.per_output, per_y = region.y.per_output;
        float average_weight = dml_roi_average_weight(&region.x, &region.y);
        for (uint32_t oy = 0; oy < s.out_height; oy++) {
            for (uint32_t ox = 0; ox < s.out_width; ox++) {
                float gradient = load_value(dy, oy * g.dy_strides[2] + ox * g.dy_strides[3]);
                if (p.reduction_max) { /* the selected sample alone, w = 1 */
                    uint64_t local = g.selected[(i * s.out_height + oy) * s.out_width + ox];
                    uint64_t tx = ox * per_x + local / per_y, ty = oy * per_y + local % per_y;
                    dml_roi_axis_sample sx = dml_roi_axis_sample_at(&region.x, tx, &p);
                    dml_roi_axis_sample sy = dml_roi_axis_sample_at(&region.y, ty, &p);
                    if (!sx.outside && !sy.outside) add_box_terms(plane, region, tx, ty, sx, sy, gradient, p, sums);
                    continue;
                }
                float weighted_gradient = gradient * average_weight;
                for (uint64_t tx = ox * per_x; tx < ox * per_x + per_x; tx++) {
                    dml_roi_axis_sample sx = dml_roi_axis_sample_at(&region.x, tx, &p);
                    if (sx.outside) continue;
                    for (uint64_t ty = oy * per_y; ty < oy * per_y + per_y; ty++) {
                        dml_roi_axis_sample sy = dml_roi_axis_sample_at(&region.y, ty, &p);
                        if (!sy.outside) add_box_terms(plane, region, tx, ty, sx, sy, weighted_gradient, p, sums);
                    }
                }
            }
        }
    }
    for (int k = 0; k < 4; k++)
        g.channel_sums[i * 4 + k] = sums[k];
}

template <class T> __global__ void roi_channel_sums(const grad_problem g) {
    uint64_t count = (uint64_t)g.shape.roi_count * g.shape.channels;
    for (uint64_t i = grid_start(); i < count; i += grid_step())
        channel_sums_element<T>(g, i);
}

/* One thread per (roi, coordinate): the channel sums added in the fixed group
 * shape of roi_align_math.h, rounded once to FLOAT32 (then FLOAT16). */
template <class T> DML_CUDA_FN void combine_element(const grad_problem& g, uint64_t i) {
    const align_shape& s = g.shape;
    uint32_t groups = dml_roi_gradient_groups(s.channels);
    uint32_t k = (uint32_t)(i % 4), r = (uint32_t)(i / 4);
    double total = 0.0;
    for (uint32_t group = 0; group < groups; group++) {
        double group_sum = 0.0;
        uint32_t c_end = dml_roi_gradient_group_begin(group + 1, groups, s.channels);
        for (uint32_t c = dml_roi_gradient_group_begin(group, groups, s.channels); c < c_end; c++)
            group_sum += g.channel_sums[((uint64_t)r * s.channels + c) * 4 + k];
        total += group_sum;
    }
    store_value((T*)g.roi_gradient, r * g.roi_gradient_row_stride + k * g.roi_gradient_column_stride, (float)total);
}

template <class T> __global__ void roi_gradient_combine(const grad_problem g) {
    for (uint64_t i = grid_start(); i < (uint64_t)g.shape.roi_count * 4; i += grid_step())
        combine_element<T>(g, i);
}

/* ---- Launches ---- */

template <class T> HRESULT launch_forward(const dml_kernel_args* args, const forward_problem& f) {
    roi_align_forward<T><<<dml_cuda_blocks(args, f.count, kThreads), kThreads, 0, dml_cuda_stream(args)>>>(f);
    return dml_cuda_check_launch("roi_align_forward");
}

template <class T> HRESULT launch_grad(const dml_kernel_args* args, const grad_problem& g) {
    cudaStream_t stream = dml_cuda_stream(args);
    const align_shape& s = g.shape;
    prepare_rois<T><<<dml_cuda_blocks(args, s.roi_count, kThreads), kThreads, 0, stream>>>(g);
    DML_TRY(dml_cuda_check_launch("prepare_rois"));
    uint64_t outputs = (uint64_t)s.roi_count * s.channels * s.out_height * s.out_width;
    if (g.params.reduction_max) {
        select_max<T><<<dml_cuda_blocks(args, outputs, kThreads), kThreads, 0, stream>>>(g);
        DML_TRY(dml_cuda_check_launch("select_max"));
    }
    if (g.output_gradient) {
        gather_output_gradient<T><<<dml_cuda_blocks(args, g.tasks * kThreads, kThreads), kThreads, 0, stream>>>(g);
        DML_TRY(dml_cuda_check_launch("gather_output_gradient"));
    }
    if (g.roi_gradient) {
        uint64_t pairs = (uint64_t)s.roi_count * s.channels;
        roi_channel_sums<T><<<dml_cuda_blocks(args, pairs, kThreads), kThreads, 0, stream>>>(g);
        DML_TRY(dml_cuda_check_launch("roi_channel_sums"));
        roi_gradient_combine<T><<<dml_cuda_blocks(args, (uint64_t)s.roi_count * 4, kThreads), kThreads, 0, stream>>>(g);
        DML_TRY(dml_cuda_check_launch("roi_gradient_combine"));
    }
    return S_OK;
}

uint64_t align_up(uint64_t bytes) { return (bytes + 255) & ~(uint64_t)255; }

/* ---- Problems from the validated operator ---- */

forward_problem forward_problem_make(const dml_kernel_args* args) {
    const DMLOperator* op = args->op;
    const dml_tensor* input = &op->inputs[DML_ROI_ALIGN_INPUT].tensor;
    const dml_tensor* output = &op->outputs[DML_ROI_ALIGN_OUTPUT].tensor;
    forward_problem f = {};
    f.params = *(const dml_roi_align_params*)op->params;
    f.shape = {input->sizes[0],  input->sizes[1],  input->sizes[2], input->sizes[3],
               output->sizes[0], output->sizes[2], output->sizes[3]};
    f.source =
        roi_source_make(&op->inputs[DML_ROI_ALIGN_ROI].tensor, args->inputs[DML_ROI_ALIGN_ROI],
                        &op->inputs[DML_ROI_ALIGN_BATCH_INDICES].tensor, args->inputs[DML_ROI_ALIGN_BATCH_INDICES]);
    f.input = args->inputs[DML_ROI_ALIGN_INPUT];
    f.output = args->outputs[DML_ROI_ALIGN_OUTPUT];
    copy_strides(f.in_strides, input);
    copy_strides(f.out_strides, output);
    f.count = (uint64_t)output->sizes[0] * output->sizes[1] * output->sizes[2] * output->sizes[3];
    return f;
}

/* Everything but the temporaries (grad_scratch_layout). */
grad_problem grad_problem_make(const dml_kernel_args* args) {
    const DMLOperator* op = args->op;
    const dml_tensor* input = &op->inputs[DML_ROI_ALIGN_GRAD_INPUT].tensor;
    const dml_tensor* input_gradient = &op->inputs[DML_ROI_ALIGN_GRAD_INPUT_GRADIENT].tensor;
    const dml_tensor* output_gradient = &op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_GRADIENT].tensor;
    const dml_tensor* roi_gradient = &op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_ROI_GRADIENT].tensor;
    /* N, H, W from InputTensor when present, else from OutputGradientTensor (§3). */
    const dml_tensor* image = input->present ? input : output_gradient;
    grad_problem g = {};
    g.params = *(const dml_roi_align_params*)op->params;
    g.shape = {image->sizes[0],          input_gradient->sizes[1], image->sizes[2],         image->sizes[3],
               input_gradient->sizes[0], input_gradient->sizes[2], input_gradient->sizes[3]};
    g.source = roi_source_make(&op->inputs[DML_ROI_ALIGN_GRAD_ROI].tensor, args->inputs[DML_ROI_ALIGN_GRAD_ROI],
                               &op->inputs[DML_ROI_ALIGN_GRAD_BATCH_INDICES].tensor,
                               args->inputs[DML_ROI_ALIGN_GRAD_BATCH_INDICES]);
    g.input = input->present ? args->inputs[DML_ROI_ALIGN_GRAD_INPUT] : NULL;
    if (input->present) copy_strides(g.in_strides, input);
    g.input_gradient = args->inputs[DML_ROI_ALIGN_GRAD_INPUT_GRADIENT];
    copy_strides(g.dy_strides, input_gradient);
    if (output_gradient->present) {
        g.output_gradient = args->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_GRADIENT];
        copy_strides(g.dx_strides, output_gradient);
    }
    if (roi_gradient->present) {
        g.roi_gradient = args->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_ROI_GRADIENT];
        g.roi_gradient_row_stride = roi_gradient->strides[roi_gradient->rank - 2];
        g.roi_gradient_column_stride = roi_gradient->strides[roi_gradient->rank - 1];
    }
    const align_shape& s = g.shape;
    g.tiles_y = (s.height + kTile - 1) / kTile;
    g.tiles_x = (s.width + kTile - 1) / kTile;
    g.chunks = (s.channels + kChunk - 1) / kChunk;
    g.tasks = (uint64_t)s.batch * g.tiles_y * g.tiles_x * g.chunks;
    return g;
}

/* The temporaries of g in one block at `scratch` (NULL: only the size), and
 * its size in bytes; box_gradient: OutputROIGradientTensor is present.
 * Sizes < 2^64: R * C * OH * OW < 2^32 elements. */
uint64_t grad_scratch_layout(grad_problem& g, bool box_gradient, char* scratch) {
    const align_shape& s = g.shape;
    uint64_t outputs = (uint64_t)s.roi_count * s.channels * s.out_height * s.out_width;
    uint64_t rois_bytes = align_up((uint64_t)s.roi_count * sizeof(gradient_roi));
    uint64_t boxes_bytes = align_up((uint64_t)s.roi_count * sizeof(roi_box));
    uint64_t selected_bytes = g.params.reduction_max ? align_up(outputs * sizeof(uint64_t)) : 0;
    uint64_t sums_bytes = box_gradient ? align_up((uint64_t)s.roi_count * s.channels * 4 * sizeof(double)) : 0;
    if (scratch != NULL) {
        g.rois = (gradient_roi*)scratch;
        g.boxes = (roi_box*)(scratch + rois_bytes);
        g.selected = selected_bytes ? (uint64_t*)(scratch + rois_bytes + boxes_bytes) : NULL;
        g.channel_sums = sums_bytes ? (double*)(scratch + rois_bytes + boxes_bytes + selected_bytes) : NULL;
    }
    return rois_bytes + boxes_bytes + selected_bytes + sums_bytes;
}

HRESULT run_forward(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    forward_problem f = forward_problem_make(args);
    return args->op->inputs[DML_ROI_ALIGN_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16
               ? launch_forward<uint16_t>(args, f)
               : launch_forward<float>(args, f);
}

bool has_box_gradient(const DMLOperator* op) {
    return op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_ROI_GRADIENT].tensor.present;
}

/* The gradient's workspace (grad_scratch_layout), sized from the shapes alone. */
HRESULT plan_grad(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    dml_kernel_args shapes_only = {};
    shapes_only.op = op;
    shapes_only.device = device;
    grad_problem g = grad_problem_make(&shapes_only);
    plan->temporary_size = grad_scratch_layout(g, has_box_gradient(op), NULL);
    return S_OK;
}

HRESULT run_grad(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    grad_problem g = grad_problem_make(args);
    grad_scratch_layout(g, has_box_gradient(args->op), (char*)args->temporary);
    bool is_half = args->op->inputs[DML_ROI_ALIGN_GRAD_INPUT_GRADIENT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16;
    return is_half ? launch_grad<uint16_t>(args, g) : launch_grad<float>(args, g);
}

/* ---- Forward, packed input and output: "roi_align/cuda/nchw", "/nhwc" ----
 * Block tasks are (chunk of channels, ROI), ROIs fastest: the blocks running
 * together read the same planes, which then come from L2 rather than DRAM.
 * A task computes the region and every X and Y sample of its ROI (at most
 * MaximumSamplesPerOutput per output along each axis) once into shared
 * memory; then each thread takes one (oy, ox), ox fastest, of
 * kForwardChannels channels (c, c + groups, ...: a warp's stores stay
 * contiguous) and reduces their samples together as forward_element does,
 * so that each sample's geometry is read once for all of them and their
 * loads are in flight together. Channels-last (input and output), the
 * channel c is the fastest across threads, then ox, then oy: a warp's loads
 * of a tap and its stores are contiguous channels. */

constexpr unsigned kForwardChannels = 4;

struct forward_packed_plan {
    bool channels_last;
    uint32_t groups;        /* threads per (oy, ox) of a task */
    uint32_t chunk, chunks; /* channels per task (<= groups * kForwardChannels), tasks per ROI */
    unsigned blocks;
    size_t shared_bytes; /* (OW + OH) * MaximumSamplesPerOutput samples */
};

/* One thread's outputs: (oy, ox) of channels c, c + groups, ... (those up to
 * c_last) of ROI r, whose region and samples (xs, then ys) are computed. */
template <class T, bool ChannelsLast>
DML_CUDA_FN void forward_packed_outputs(const forward_problem& f, const forward_packed_plan& n,
                                        const roi_region& region, const dml_roi_axis_sample* xs,
                                        const dml_roi_axis_sample* ys, uint32_t r, uint32_t c, uint32_t c_last,
                                        uint32_t oy, uint32_t ox) {
    const dml_roi_align_params& p = f.params;
    const align_shape& s = f.shape;
    const uint32_t outputs = s.out_height * s.out_width, position = oy * s.out_width + ox;
    const uint64_t plane_size = (uint64_t)s.height * s.width;
    /* Elements from one channel to the next, in the output and in the image. */
    const uint64_t out_step = ChannelsLast ? 1 : outputs, in_step = ChannelsLast ? 1 : plane_size;
    T* out = (T*)f.output + ((uint64_t)r * s.channels) * outputs +
             (ChannelsLast ? (uint64_t)position * s.channels : position);
    float values[kForwardChannels];
    if (region.batch >= s.batch) { /* RA-12 */
        for (unsigned j = 0; j < kForwardChannels; j++)
            values[j] = p.out_of_bounds_value;
    } else {
        const T* image = (const T*)f.input + region.batch * s.channels * plane_size;
        packed_plane<T, ChannelsLast> planes[kForwardChannels];
        DML_UNROLL
        for (unsigned j = 0; j < kForwardChannels; j++) { /* past c_last: read, not stored */
            uint32_t channel = c + j * n.groups;
            planes[j] = {image + (channel < c_last ? channel : c_last) * in_step, s.width, s.channels};
        }
        auto sample_x = [&](uint64_t tx) { return xs[tx]; };
        auto sample_y = [&](uint64_t ty) { return ys[ty]; };
        reduce_outputs<kForwardChannels>(p, region, planes, oy, ox, sample_x, sample_y, values);
    }
    DML_UNROLL
    for (unsigned j = 0; j < kForwardChannels; j++) {
        uint32_t channel = c + j * n.groups;
        if (channel <= c_last) store_value(out, channel * out_step, values[j]);
    }
}

/* The samples of a region: X, then Y, those of index first, first + step, .... */
DML_CUDA_FN void region_samples(const roi_region& region, const dml_roi_align_params& p, uint32_t first, uint32_t step,
                                dml_roi_axis_sample* samples) {
    const uint32_t count_x = (uint32_t)region.x.count, count_y = (uint32_t)region.y.count;
    for (uint32_t t = first; t < count_x + count_y; t += step)
        samples[t] =
            t < count_x ? dml_roi_axis_sample_at(&region.x, t, &p) : dml_roi_axis_sample_at(&region.y, t - count_x, &p);
}

template <class T, bool ChannelsLast>
__global__ void __launch_bounds__(kThreads)
    roi_align_forward_packed(const forward_problem f, const forward_packed_plan n) {
    extern __shared__ dml_roi_axis_sample samples[]; /* X samples, then Y samples */
    __shared__ roi_region region;
    const dml_roi_align_params& p = f.params;
    const align_shape& s = f.shape;
    for (uint64_t task = blockIdx.x; task < (uint64_t)s.roi_count * n.chunks; task += gridDim.x) {
        const uint32_t r = (uint32_t)(task % s.roi_count), c0 = (uint32_t)(task / s.roi_count) * n.chunk;
        const uint32_t c_last = (c0 + n.chunk < s.channels ? c0 + n.chunk : s.channels) - 1;
        __syncthreads(); /* the previous task is done with the samples */
        if (threadIdx.x == 0) region = region_make<T>(f.source, r, p, s);
        __syncthreads();
        region_samples(region, p, threadIdx.x, blockDim.x, samples);
        __syncthreads();
        const dml_roi_axis_sample* ys = samples + region.x.count;
        if constexpr (ChannelsLast) { /* inner: the channel group, middle: ox, outer: oy */
            for (dml_cuda_block_walker w(n.groups, s.out_width); w.outer < s.out_height; w.next())
                forward_packed_outputs<T, true>(f, n, region, samples, ys, r, c0 + w.inner, c_last, w.outer, w.middle);
        } else { /* inner: ox, middle: oy, outer: the channel group */
            for (dml_cuda_block_walker w(s.out_width, s.out_height); w.outer < n.groups; w.next())
                forward_packed_outputs<T, false>(f, n, region, samples, ys, r, c0 + w.outer, c_last, w.middle, w.inner);
        }
    }
}

/* The plan from the shapes alone (blocks, from the device, aside): also what the host replay runs. */
HRESULT forward_packed_plan_make(const DMLOperator* op, bool channels_last, forward_packed_plan* n) {
    const dml_tensor& input = op->inputs[DML_ROI_ALIGN_INPUT].tensor;
    const dml_tensor& output = op->outputs[DML_ROI_ALIGN_OUTPUT].tensor;
    const dml_roi_align_params& p = *(const dml_roi_align_params*)op->params;
    bool (*packed)(const dml_tensor&) = channels_last ? dml_cuda_packed_nhwc : dml_cuda_packed_nchw;
    if (!packed(input) || !packed(output)) return S_FALSE;
    const uint64_t plane_elements = (uint64_t)input.sizes[2] * input.sizes[3] * (channels_last ? input.sizes[1] : 1);
    if (plane_elements > UINT32_MAX) return S_FALSE; /* packed_plane's indices */
    n->channels_last = channels_last;
    n->shared_bytes = ((size_t)output.sizes[2] + output.sizes[3]) * p.max_samples * sizeof(dml_roi_axis_sample);
    if (n->shared_bytes > 24576) return S_FALSE;
    uint32_t outputs = output.sizes[2] * output.sizes[3]; /* <= 2^32 - 1 elements (spec T-1) */
    const uint32_t channels = input.sizes[1];
    if (channels_last) { /* threads across the channels: up to a block's */
        const uint32_t spans = (channels + kForwardChannels - 1) / kForwardChannels;
        n->groups = spans < kThreads ? spans : kThreads;
    } else {
        n->groups = outputs >= kThreads ? 1 : kThreads / outputs;
    }
    n->chunk = n->groups * kForwardChannels < channels ? n->groups * kForwardChannels : channels;
    n->chunks = (channels + n->chunk - 1) / n->chunk;
    n->blocks = 0;
    return S_OK;
}

HRESULT plan_forward_packed(const DMLOperator* op, const DMLDevice* device, bool channels_last, dml_plan* plan) {
    forward_packed_plan shape;
    HRESULT status = forward_packed_plan_make(op, channels_last, &shape);
    if (status != S_OK) return status;
    forward_packed_plan* n = (forward_packed_plan*)dml_plan_state(plan, sizeof(forward_packed_plan));
    if (n == nullptr) return E_OUTOFMEMORY;
    *n = shape;
    /* Enough blocks to fill the GPU; more would only add task prologues. */
    const uint64_t tasks = (uint64_t)op->outputs[DML_ROI_ALIGN_OUTPUT].tensor.sizes[0] * n->chunks;
    const uint64_t enough = (uint64_t)dml_cuda_state(device)->multiprocessors * 32;
    n->blocks = (unsigned)(tasks < enough ? tasks : enough);
    return S_OK;
}

HRESULT plan_forward_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_forward_packed(op, device, false, plan);
}

HRESULT plan_forward_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_forward_packed(op, device, true, plan);
}

template <class T>
void launch_forward_packed(const forward_problem& f, const forward_packed_plan& n, cudaStream_t stream) {
    if (n.channels_last)
        roi_align_forward_packed<T, true><<<n.blocks, kThreads, n.shared_bytes, stream>>>(f, n);
    else
        roi_align_forward_packed<T, false><<<n.blocks, kThreads, n.shared_bytes, stream>>>(f, n);
}

HRESULT run_forward_packed(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const forward_packed_plan& n = *DML_PLAN_STATE(args, forward_packed_plan);
    forward_problem f = forward_problem_make(args);
    cudaStream_t stream = dml_cuda_stream(args);
    if (args->op->inputs[DML_ROI_ALIGN_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16)
        launch_forward_packed<uint16_t>(f, n, stream);
    else
        launch_forward_packed<float>(f, n, stream);
    return dml_cuda_check_launch("roi_align_forward_packed");
}

/* ---- Forward, an image's channels staged in shared memory: "roi_align/cuda/staged_nchw" ----
 * For LINEAR and AVERAGE, input and output packed NCHW. The packed kernels
 * re-read each output's 16 taps from L2 (about 12 times the input's bytes on
 * a detection workload); here a block task (range of an image's ROIs, image
 * b, chunk of K channels) copies the chunk's K planes once into shared
 * memory, a pixel's K channels together ([y][x][k], rows of W | 1 pixels: an
 * odd row length puts the same column of nearby rows in different banks),
 * and samples every ROI of its range from there: a tap is one shared load of
 * K channels.
 * - The task lists its image's ROIs in increasing r (a block-wide ordered
 *   compaction of the batch indices; the ROIs of no image (RA-12) join
 *   image 0's list, marked, and take OutOfBoundsInputValue) and takes the
 *   range's share of the list.
 * - Where the (image, chunk) tasks take several waves of blocks, a task
 *   stages a group of chunks in turn (as many as keeps the waves' chunks a
 *   block), and a range of ROIs whose samples fit the shared memory beside
 *   the chunk (kept_rois: 288 ROIs of 7 x 7 outputs and 2 x 2 samples at
 *   128 x 128 FLOAT32) has them computed once, during the group's first
 *   staging, for all its chunks (staged_kept); a longer range takes the
 *   rounds below for each chunk.
 * - Rounds of `round_rois` ROIs: the block computes their X and Y axes
 *   (roi_align_math.h), then their samples as tap offsets into the staged
 *   chunk and fractions (structure of arrays), then each thread reduces one
 *   output (ROI, oy, ox), ox fastest, for the K channels: the samples in §4.4
 *   order, each value dml_roi_bilinear's, summed in FLOAT64 and averaged as
 *   sample_divisor does: the packed kernels' bits. The rounds overlap (a
 *   round's axes, the round before's samples and the outputs of the one
 *   before that between two barriers), and an output of 2 x 2 in-bounds
 *   samples loads its 16 taps before it computes (staged_sums_2x2).
 * The plan picks the largest K of 4, 2, 1 whose staging fits a block's
 * shared memory (with the list and the rounds' samples), and declines when
 * even K = 1 does not. Channels-last is left to roi_align/cuda/nhwc: staged
 * (a pixel's K channels C elements from the next pixel's, 8 or 16 bytes of
 * each 32-byte sector) it took 0.170 / 0.173 ms (f32 / f16) on an H100
 * against that kernel's 0.123 / 0.131 (docs/cuda.md, round 8). */

constexpr uint32_t kStagedMaxRois = 8192;       /* the list: 2 bytes an entry */
constexpr uint32_t kStagedNoImage = 0x8000u;    /* list entry flag: a ROI of no image (RA-12) */
constexpr uint32_t kStagedOutside = UINT32_MAX; /* a sample record's first tap: out of bounds */
constexpr size_t kStagedGeometryBytes = 49152;  /* the rounds' axes (3 sets) and samples (2 sets) */
#ifndef DML_ROI_ALIGN_STAGED_PIXEL_BYTES
#define DML_ROI_ALIGN_STAGED_PIXEL_BYTES 16 /* the most bytes of a pixel's K channels (a 16-byte shared load) */
#endif

struct staged_plan {
    uint32_t k;           /* channels staged per task: 1, 2 or 4 */
    uint32_t pixel_bytes; /* a staged pixel: k elements */
    uint32_t row;         /* staged pixels per row: W | 1 */
    uint32_t chunks;      /* ceil(C / k) */
    uint32_t group;       /* chunks a task stages in turn */
    uint32_t ranges;      /* tasks per (image, group of chunks) */
    uint32_t round_rois;  /* ROIs whose samples a round computes */
    uint32_t kept_rois;   /* ROIs whose samples the geometry holds at once (staged_kept) */
    uint32_t x_slots;     /* per ROI: OW * MaximumSamplesPerOutput X samples */
    uint32_t y_slots;     /* and OH * MaximumSamplesPerOutput Y samples */
    uint32_t staging_bytes, list_bytes, shared_bytes;
    unsigned threads, blocks;
};

/* Round i's axes and samples in shared memory (structure of arrays: a
 * warp's records are consecutive words). Offsets are in bytes of the
 * staged chunk (a tap's address is one three-way add): X taps x *
 * pixel_bytes, Y taps y * row * pixel_bytes. Rounds rotate through
 * three sets of axes and two of samples: round i + 2's axes and round
 * i + 1's samples are computed while round i's outputs read theirs. */
struct staged_samples {
    dml_roi_axis* axes;   /* [round_rois][2]: X, Y */
    uint32_t* per_output; /* [round_rois][2]: sX, sY; sX = 0: no image (RA-12) */
    uint32_t *x_first, *x_second, *y_first, *y_second;
    float *x_fraction, *y_fraction;
};

DML_CUDA_FN size_t staged_axes_bytes(uint32_t round_rois) {
    return (size_t)round_rois * (2 * sizeof(dml_roi_axis) + 2 * sizeof(uint32_t));
}

DML_CUDA_FN size_t staged_records_bytes(uint32_t round_rois, uint32_t x_slots, uint32_t y_slots) {
    return (size_t)round_rois * (x_slots + y_slots) * 12;
}

/* The three sets of axes, then the two of samples. */
DML_CUDA_FN size_t staged_geometry_bytes(uint32_t round_rois, uint32_t x_slots, uint32_t y_slots) {
    return 3 * staged_axes_bytes(round_rois) + 2 * staged_records_bytes(round_rois, x_slots, y_slots);
}

/* The six record arrays from x_first on: xs X records, then ys Y records. */
DML_CUDA_FN void staged_records_from(staged_samples* g, uint32_t* x_first, uint32_t xs, uint32_t ys) {
    g->x_first = x_first;
    g->x_second = g->x_first + xs;
    g->x_fraction = (float*)(g->x_second + xs);
    g->y_first = (uint32_t*)(g->x_fraction + xs);
    g->y_second = g->y_first + ys;
    g->y_fraction = (float*)(g->y_second + ys);
}

DML_CUDA_FN staged_samples staged_samples_at(void* base, const staged_plan& n, uint32_t round) {
    const uint32_t xs = n.round_rois * n.x_slots, ys = n.round_rois * n.y_slots;
    unsigned char* bytes = (unsigned char*)base;
    staged_samples g;
    g.axes = (dml_roi_axis*)(bytes + round % 3 * staged_axes_bytes(n.round_rois));
    g.per_output = (uint32_t*)(g.axes + 2 * n.round_rois);
    staged_records_from(&g,
                        (uint32_t*)(bytes + 3 * staged_axes_bytes(n.round_rois) +
                                    round % 2 * staged_records_bytes(n.round_rois, n.x_slots, n.y_slots)),
                        xs, ys);
    return g;
}

/* The samples of up to kept_rois ROIs, computed once for every chunk of a
 * task's group (a range of no more ROIs skips the rounds): their samples per
 * output, then their records in staged_samples' arrays (axes unused). */
DML_CUDA_FN size_t staged_kept_bytes(uint32_t rois, uint32_t x_slots, uint32_t y_slots) {
    return (size_t)rois * (2 * sizeof(uint32_t) + (x_slots + y_slots) * 12);
}

DML_CUDA_FN staged_samples staged_kept(void* base, const staged_plan& n) {
    staged_samples g;
    g.axes = nullptr;
    g.per_output = (uint32_t*)base;
    staged_records_from(&g, g.per_output + 2 * n.kept_rois, n.kept_rois * n.x_slots, n.kept_rois * n.y_slots);
    return g;
}

/* Whether ROI r belongs to image b's list, and its entry (r, flagged when it has no image). */
DML_CUDA_FN bool staged_list_entry(const forward_problem& f, uint32_t b, uint32_t r, uint16_t* entry) {
    const uint64_t offset = r * f.source.batch_stride;
    const uint64_t batch = f.source.batch_64 ? ((const uint64_t*)f.source.batch_indices)[offset]
                                             : ((const uint32_t*)f.source.batch_indices)[offset];
    const bool no_image = batch >= f.shape.batch;
    *entry = (uint16_t)(r | (no_image ? kStagedNoImage : 0));
    return no_image ? b == 0 : batch == b;
}

/* Where the planes of channels c0 .. of image b start. */
template <class T> DML_CUDA_FN const T* staging_source(const forward_problem& f, uint32_t b, uint32_t c0) {
    const align_shape& s = f.shape;
    return (const T*)f.input + ((uint64_t)b * s.channels + c0) * (s.height * s.width);
}

/* Pixel i (y W + x) of channel c0 + k from staging_source(f, b, c0); a
 * channel past C reads as zero (never stored). */
template <class T>
DML_CUDA_FN T staging_value(const forward_problem& f, const T* source, uint32_t c0, uint32_t i, unsigned k) {
    const uint32_t plane = f.shape.height * f.shape.width; /* < 2^32: the staging fits shared memory */
    return c0 + k < f.shape.channels ? source[(uint64_t)k * plane + i] : T(0);
}

/* Pixel i's K values into the staged chunk, at [y][x][k]. */
template <class T, unsigned K>
DML_CUDA_FN void staging_store(const forward_problem& f, const staged_plan& n, T* staged, uint32_t i,
                               const T values[K]) {
    const uint32_t y = i / f.shape.width, x = i - y * f.shape.width;
    DML_UNROLL
    for (unsigned k = 0; k < K; k++)
        staged[(y * n.row + x) * K + k] = values[k];
}

/* Axis `along_y` of list entry `entry` (§4.1). */
template <class T> DML_CUDA_FN dml_roi_axis staged_axis_of(const forward_problem& f, uint32_t entry, bool along_y) {
    const dml_roi_align_params& p = f.params;
    const align_shape& s = f.shape;
    const uint32_t r = entry & ~kStagedNoImage;
    const T* rois = (const T*)f.source.rois;
    const uint64_t row = r * f.source.row_stride;
    /* Rows are [x1, y1, x2, y2]. */
    const float corner1 = load_value(rois, row + (along_y ? 1 : 0) * f.source.column_stride);
    const float corner2 = load_value(rois, row + (along_y ? 3 : 2) * f.source.column_stride);
    return along_y ? dml_roi_axis_make(corner1, corner2, p.spatial_scale_y, s.out_height, s.height, &p)
                   : dml_roi_axis_make(corner1, corner2, p.spatial_scale_x, s.out_width, s.width, &p);
}

/* Samples per output along one axis of ROI g, list entry `entry`; 0 along X: no image (RA-12). */
DML_CUDA_FN void staged_per_output(const staged_samples& g, uint32_t slot_g, uint32_t entry, bool along_y,
                                   const dml_roi_axis& axis) {
    g.per_output[slot_g * 2 + along_y] = !along_y && (entry & kStagedNoImage) ? 0 : axis.per_output;
}

/* Axis `along_y` of round ROI g, list entry `entry`, and its samples per output. */
template <class T>
DML_CUDA_FN void staged_axis(const forward_problem& f, const staged_samples& g, uint32_t slot_g, uint32_t entry,
                             bool along_y) {
    const dml_roi_axis axis = staged_axis_of<T>(f, entry, along_y);
    g.axes[slot_g * 2 + along_y] = axis;
    staged_per_output(g, slot_g, entry, along_y, axis);
}

/* Sample record `slot` (< x_slots + y_slots: X, then Y) of ROI g from its axis along the slot's direction. */
DML_CUDA_FN void staged_record(const forward_problem& f, const staged_plan& n, const staged_samples& g, uint32_t slot_g,
                               uint32_t slot, const dml_roi_axis& axis) {
    const bool along_x = slot < n.x_slots;
    const uint32_t t = along_x ? slot : slot - n.x_slots;
    if (t >= axis.count) return;
    const dml_roi_axis_sample sample = dml_roi_axis_sample_at(&axis, t, &f.params);
    const uint32_t unit = along_x ? n.pixel_bytes : n.row * n.pixel_bytes;
    const uint32_t first = sample.outside ? kStagedOutside : sample.first * unit, second = sample.second * unit;
    const uint32_t at = slot_g * (along_x ? n.x_slots : n.y_slots) + t;
    (along_x ? g.x_first : g.y_first)[at] = first;
    (along_x ? g.x_second : g.y_second)[at] = second;
    (along_x ? g.x_fraction : g.y_fraction)[at] = sample.fraction;
}

/* Sample record `slot` of round ROI g, from the round's axes. */
DML_CUDA_FN void staged_sample(const forward_problem& f, const staged_plan& n, const staged_samples& g, uint32_t slot_g,
                               uint32_t slot) {
    staged_record(f, n, g, slot_g, slot, g.axes[slot_g * 2 + (slot < n.x_slots ? 0 : 1)]);
}

/* Records part, part + parts, ... along axis `along_y` of kept ROI g, list
 * entry `entry`, from its axis (computed by each part: no barrier between
 * axes and records; once per record, the axes took a sixth of the
 * FLOAT16 kernel's instructions); part 0 also stores the samples per output. */
template <class T>
DML_CUDA_FN void staged_kept_records(const forward_problem& f, const staged_plan& n, const staged_samples& g,
                                     uint32_t slot_g, uint32_t entry, bool along_y, uint32_t part, uint32_t parts) {
    const dml_roi_axis axis = staged_axis_of<T>(f, entry, along_y);
    if (part == 0) staged_per_output(g, slot_g, entry, along_y, axis);
    const uint32_t first = along_y ? n.x_slots : 0;
    for (uint32_t t = part; t < axis.count; t += parts)
        staged_record(f, n, g, slot_g, first + t, axis);
}

/* K staged channels of the pixel at byte offsets row + column as FLOAT32: one shared load. */
template <unsigned Bytes> struct staged_vector;
template <> struct staged_vector<2> { using type = uint16_t; };
template <> struct staged_vector<4> { using type = uint32_t; };
template <> struct staged_vector<8> { using type = uint2; };
template <> struct staged_vector<16> { using type = uint4; };

DML_CUDA_FN float widen(float value) { return value; }
DML_CUDA_FN float widen(uint16_t half) {
#ifdef __CUDA_ARCH__
    return dml_cuda_widen(half);
#else
    return dml_half_to_float(half);
#endif
}

template <class T, unsigned K>
DML_CUDA_FN void load_staged(const T* staged, uint32_t row, uint32_t column, float values[K]) {
    const T* at = (const T*)((const unsigned char*)staged + row + column); /* byte offsets */
    T elements[K];
#ifdef __CUDA_ARCH__
    using vector = typename staged_vector<K * sizeof(T)>::type;
    const vector raw = *(const vector*)at;
    memcpy(elements, &raw, sizeof raw);
#else
    memcpy(elements, at, sizeof elements); /* the host replay: no type punning */
#endif
    DML_UNROLL
    for (unsigned k = 0; k < K; k++)
        values[k] = widen(elements[k]);
}

/* The sums of an output of 2 x 2 samples (the detection models' sampling
 * ratio) whose samples all lie in bounds, with every record and tap loaded
 * before the first value is computed (16 shared loads in flight); the
 * samples' values and their order are staged_output's. False (nothing
 * summed) when a sample is out of bounds. */
template <class T, unsigned K>
DML_CUDA_FN bool staged_sums_2x2(const T* staged, const staged_samples& g, uint32_t x0, uint32_t y0, double sum[K]) {
    uint32_t left[2], right[2], top[2], bottom[2];
    float fx[2], fy[2];
    DML_UNROLL
    for (unsigned i = 0; i < 2; i++) {
        left[i] = g.x_first[x0 + i];
        right[i] = g.x_second[x0 + i];
        fx[i] = g.x_fraction[x0 + i];
        top[i] = g.y_first[y0 + i];
        bottom[i] = g.y_second[y0 + i];
        fy[i] = g.y_fraction[y0 + i];
    }
    if (left[0] == kStagedOutside || left[1] == kStagedOutside || top[0] == kStagedOutside || top[1] == kStagedOutside)
        return false;
    float taps[2][2][4][K]; /* [X sample][Y sample][top left, top right, bottom left, bottom right] */
    DML_UNROLL
    for (unsigned i = 0; i < 2; i++) {
        DML_UNROLL
        for (unsigned j = 0; j < 2; j++) {
            load_staged<T, K>(staged, top[j], left[i], taps[i][j][0]);
            load_staged<T, K>(staged, top[j], right[i], taps[i][j][1]);
            load_staged<T, K>(staged, bottom[j], left[i], taps[i][j][2]);
            load_staged<T, K>(staged, bottom[j], right[i], taps[i][j][3]);
        }
    }
    DML_UNROLL
    for (unsigned k = 0; k < K; k++)
        sum[k] = 0.0;
    DML_UNROLL
    for (unsigned i = 0; i < 2; i++) { /* §4.4: X outer, Y inner */
        DML_UNROLL
        for (unsigned j = 0; j < 2; j++) {
            DML_UNROLL
            for (unsigned k = 0; k < K; k++)
                sum[k] += dml_roi_bilinear(taps[i][j][0][k], taps[i][j][1][k], taps[i][j][2][k], taps[i][j][3][k],
                                           fx[i], fy[j]);
        }
    }
    return true;
}

/* Output (oy, ox) of round ROI g, list entry `entry`, channels c0 ..: stored. */
template <class T, unsigned K>
DML_CUDA_FN void staged_output(const forward_problem& f, const staged_plan& n, const T* staged, const staged_samples& g,
                               uint32_t entry, uint32_t slot_g, uint32_t oy, uint32_t ox, uint32_t c0) {
    const dml_roi_align_params& p = f.params;
    const align_shape& s = f.shape;
    const uint32_t per_x = g.per_output[slot_g * 2], per_y = g.per_output[slot_g * 2 + 1];
    float results[K];
    if (per_x == 0) { /* RA-12 */
        DML_UNROLL
        for (unsigned k = 0; k < K; k++)
            results[k] = p.out_of_bounds_value;
    } else {
        double sum[K];
        const uint32_t x0 = slot_g * n.x_slots + ox * per_x, y0 = slot_g * n.y_slots + oy * per_y;
        if (per_x == 2 && per_y == 2 && staged_sums_2x2<T, K>(staged, g, x0, y0, sum)) {
            DML_UNROLL
            for (unsigned k = 0; k < K; k++)
                results[k] = (float)(sum[k] * 0.25); /* sample_divisor's product for S = 4 */
        } else {
            DML_UNROLL
            for (unsigned k = 0; k < K; k++)
                sum[k] = 0.0;
            for (uint32_t tx = x0; tx < x0 + per_x; tx++) { /* §4.4: X outer, Y inner */
                const uint32_t left = g.x_first[tx], right = g.x_second[tx];
                const float fx = g.x_fraction[tx];
                for (uint32_t ty = y0; ty < y0 + per_y; ty++) {
                    const uint32_t top = g.y_first[ty], bottom = g.y_second[ty];
                    const float fy = g.y_fraction[ty];
                    float values[K];
                    if (left == kStagedOutside || top == kStagedOutside) {
                        DML_UNROLL
                        for (unsigned k = 0; k < K; k++)
                            values[k] = p.out_of_bounds_value;
                    } else {
                        float top_left[K], top_right[K], bottom_left[K], bottom_right[K];
                        load_staged<T, K>(staged, top, left, top_left);
                        load_staged<T, K>(staged, top, right, top_right);
                        load_staged<T, K>(staged, bottom, left, bottom_left);
                        load_staged<T, K>(staged, bottom, right, bottom_right);
                        DML_UNROLL
                        for (unsigned k = 0; k < K; k++)
                            values[k] =
                                dml_roi_bilinear(top_left[k], top_right[k], bottom_left[k], bottom_right[k], fx, fy);
                    }
                    DML_UNROLL
                    for (unsigned k = 0; k < K; k++)
                        sum[k] += values[k];
                }
            }
            const sample_divisor divisor = sample_divisor_make((uint64_t)per_x * per_y);
            DML_UNROLL
            for (unsigned k = 0; k < K; k++)
                results[k] = divisor.average(sum[k]);
        }
    }
    const uint32_t outputs = s.out_height * s.out_width;
    T* out = (T*)f.output + ((uint64_t)(entry & ~kStagedNoImage) * s.channels + c0) * outputs + oy * s.out_width + ox;
    DML_UNROLL
    for (unsigned k = 0; k < K; k++, out += outputs)
        if (c0 + k < s.channels) *out = dml_cuda_narrow(results[k], T());
}

/* Task `task` = (range, image, group of chunks), group fastest: its image,
 * first channel and range. */
struct staged_task {
    uint32_t b, c0, range;
};

DML_CUDA_FN uint32_t staged_groups(const staged_plan& n) { return (n.chunks + n.group - 1) / n.group; }

DML_CUDA_FN staged_task staged_task_of(const staged_plan& n, const align_shape& s, uint64_t task) {
    staged_task t;
    t.c0 = (uint32_t)(task % staged_groups(n)) * n.group * n.k;
    const uint64_t rest = task / staged_groups(n);
    t.b = (uint32_t)(rest % s.batch);
    t.range = (uint32_t)(rest / s.batch);
    return t;
}

DML_CUDA_FN uint64_t staged_tasks(const staged_plan& n, uint32_t batch) {
    return (uint64_t)n.ranges * batch * staged_groups(n);
}

/* Chunk j of task t's group: its first channel, or C past the group's last chunk. */
DML_CUDA_FN uint32_t staged_chunk_channel(const staged_plan& n, const align_shape& s, const staged_task& t,
                                          uint32_t j) {
    const uint32_t c0 = t.c0 + j * n.k;
    return j < n.group && c0 < s.channels ? c0 : s.channels;
}

/* Image b's list entries in increasing r into `list`; returns their count. Every thread calls it. */
__device__ uint32_t list_image_rois(const forward_problem& f, uint32_t b, uint16_t* list, uint32_t* warp_counts) {
    const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    uint32_t listed = 0;
    for (uint32_t base = 0; base < f.shape.roi_count; base += blockDim.x) {
        const uint32_t r = base + threadIdx.x;
        uint16_t entry = 0;
        const bool match = r < f.shape.roi_count && staged_list_entry(f, b, r, &entry);
        const uint32_t ballot = __ballot_sync(0xFFFFFFFFu, match);
        if (lane == 0) warp_counts[warp] = __popc(ballot);
        __syncthreads();
        uint32_t before = 0, total = 0;
        for (uint32_t w = 0; w < warps; w++) {
            before += w < warp ? warp_counts[w] : 0;
            total += warp_counts[w];
        }
        if (match) list[listed + before + __popc(ballot & ((1u << lane) - 1))] = entry;
        listed += total;
        __syncthreads(); /* warp_counts reused */
    }
    return listed;
}

/* Channels c0 .. c0 + K - 1 of image b into the staged chunk. Each thread
 * loads kStageBatch pixels before it stores any: 8 times the loads in
 * flight of a load-store loop (0.105 -> 0.098 ms FLOAT32 on an H100). */
template <class T, unsigned K>
__device__ void stage_chunk(const forward_problem& f, const staged_plan& n, T* staged, uint32_t b, uint32_t c0) {
    constexpr unsigned kStageBatch = 8;
    const uint32_t plane = f.shape.height * f.shape.width;
    const T* source = staging_source<T>(f, b, c0);
    for (uint32_t base = threadIdx.x; base < plane; base += kStageBatch * blockDim.x) {
        T values[kStageBatch][K];
        DML_UNROLL
        for (unsigned j = 0; j < kStageBatch; j++) {
            DML_UNROLL
            for (unsigned k = 0; k < K; k++)
                values[j][k] =
                    base + j * blockDim.x < plane ? staging_value<T>(f, source, c0, base + j * blockDim.x, k) : T(0);
        }
        DML_UNROLL
        for (unsigned j = 0; j < kStageBatch; j++) {
            if (base + j * blockDim.x >= plane) break;
            staging_store<T, K>(f, n, staged, base + j * blockDim.x, values[j]);
        }
    }
}

/* ROIs begin .. end of the list sampled from the staged channels c0 ..,
 * in rounds. Round i: ROIs begin + i round_rois .. of the list. Phase i
 * computes round i's axes, round i - 1's samples and round i - 2's outputs,
 * one barrier a phase (the axes' global loads and the samples' arithmetic
 * overlap the outputs' shared loads). The first phase reads no staged
 * value: it needs no barrier after the staging. */
template <class T, unsigned K>
__device__ void staged_rounds(const forward_problem& f, const staged_plan& n, const T* staged, const uint16_t* list,
                              unsigned char* geometry, uint32_t begin, uint32_t end, uint32_t c0) {
    const align_shape& s = f.shape;
    const uint32_t rounds = (end - begin + n.round_rois - 1) / n.round_rois;
    auto round_count = [&](uint32_t i) {
        const uint32_t first = begin + i * n.round_rois;
        return end - first < n.round_rois ? end - first : n.round_rois;
    };
    for (uint32_t i = 0; i < rounds + 2; i++) {
        if (i > 0) __syncthreads(); /* the phase before is done (and the chunk staged) */
        if (i < rounds) {
            const staged_samples g = staged_samples_at(geometry, n, i);
            const uint32_t first = begin + i * n.round_rois;
            for (uint32_t a = threadIdx.x; a < 2 * round_count(i); a += blockDim.x)
                staged_axis<T>(f, g, a / 2, list[first + a / 2], a % 2);
        }
        /* (inner, middle): (slot, ROI) and (ox, oy): no divisions per item. */
        if (i >= 1 && i - 1 < rounds) {
            const staged_samples g = staged_samples_at(geometry, n, i - 1);
            for (dml_cuda_block_walker w(n.x_slots + n.y_slots, round_count(i - 1)); w.outer == 0; w.next())
                staged_sample(f, n, g, w.middle, w.inner);
        }
        if (i >= 2) {
            const staged_samples g = staged_samples_at(geometry, n, i - 2);
            const uint32_t first = begin + (i - 2) * n.round_rois, count = round_count(i - 2);
            for (dml_cuda_block_walker w(s.out_width, s.out_height); w.outer < count; w.next())
                staged_output<T, K>(f, n, staged, g, list[first + w.outer], w.outer, w.middle, w.inner, c0);
        }
    }
}

template <class T, unsigned K>
__global__ void __launch_bounds__(1024) roi_align_forward_staged(const forward_problem f, const staged_plan n) {
    extern __shared__ __align__(16) unsigned char shared[];
    __shared__ uint32_t warp_counts[32];
    T* staged = (T*)shared;
    uint16_t* list = (uint16_t*)(shared + n.staging_bytes);
    unsigned char* geometry = shared + n.staging_bytes + n.list_bytes;
    const align_shape& s = f.shape;
    for (uint64_t task = blockIdx.x; task < staged_tasks(n, s.batch); task += gridDim.x) {
        const staged_task t = staged_task_of(n, s, task);
        __syncthreads(); /* the previous task is done with the shared memory */
        const uint32_t listed = list_image_rois(f, t.b, list, warp_counts);
        const uint32_t begin = (uint32_t)((uint64_t)listed * t.range / n.ranges);
        const uint32_t end = (uint32_t)((uint64_t)listed * (t.range + 1) / n.ranges);
        if (begin == end) continue;
        /* A range of at most kept_rois ROIs has its samples computed once,
         * during the first chunk's staging; a longer one, in rounds for each chunk. */
        const bool kept = end - begin <= n.kept_rois;
        const staged_samples g = staged_kept(geometry, n);
        for (uint32_t j = 0, c0; (c0 = staged_chunk_channel(n, s, t, j)) < s.channels; j++) {
            if (j > 0) __syncthreads(); /* the chunk before is done */
            stage_chunk<T, K>(f, n, staged, t.b, c0);
            if (!kept) {
                staged_rounds<T, K>(f, n, staged, list, geometry, begin, end, c0);
                continue;
            }
            if (j == 0) {
                /* Items (ROI, axis, part): each computes its axis once and
                 * every parts-th of its records, as many items as threads. */
                const uint32_t axes = 2 * (end - begin), slots = max(n.x_slots, n.y_slots);
                const uint32_t parts = min(max(blockDim.x / axes, 1u), slots);
                for (dml_cuda_block_walker w(parts, axes); w.outer == 0; w.next())
                    staged_kept_records<T>(f, n, g, w.middle / 2, list[begin + w.middle / 2], w.middle % 2, w.inner,
                                           parts);
            }
            __syncthreads(); /* the chunk staged (and the samples computed) */
            for (dml_cuda_block_walker w(s.out_width, s.out_height); w.outer < end - begin; w.next())
                staged_output<T, K>(f, n, staged, g, list[begin + w.outer], w.outer, w.middle, w.inner, c0);
        }
    }
}

/* The kernel of a plan's type and K. */
template <class T> const void* staged_kernel(uint32_t k) {
    return k == 4   ? (const void*)roi_align_forward_staged<T, 4>
           : k == 2 ? (const void*)roi_align_forward_staged<T, 2>
                    : (const void*)roi_align_forward_staged<T, 1>;
}

/* The ROIs whose samples fit at once in a geometry that takes the block's
 * shared memory to `shared_bytes` (never less than the rounds'). */
void staged_plan_keep(staged_plan* n, size_t shared_bytes) {
    const size_t rounds = n->shared_bytes - n->staging_bytes - n->list_bytes;
    const size_t geometry = shared_bytes > n->shared_bytes ? shared_bytes - n->staging_bytes - n->list_bytes : rounds;
    const size_t kept = geometry / staged_kept_bytes(1, n->x_slots, n->y_slots);
    n->kept_rois = (uint32_t)(kept < kStagedMaxRois ? kept : kStagedMaxRois);
    n->shared_bytes = n->staging_bytes + n->list_bytes + (uint32_t)geometry;
}

/* The plan from the shapes and a block's shared memory limit (blocks,
 * threads and ranges, from the device, aside): also what the host replay runs. */
HRESULT staged_plan_make(const DMLOperator* op, size_t shared_limit, staged_plan* n) {
    const dml_tensor& input = op->inputs[DML_ROI_ALIGN_INPUT].tensor;
    const dml_tensor& output = op->outputs[DML_ROI_ALIGN_OUTPUT].tensor;
    const dml_roi_align_params& p = *(const dml_roi_align_params*)op->params;
    if (p.reduction_max || !p.interpolation_linear) return S_FALSE;
    if (!dml_cuda_packed_nchw(input) || !dml_cuda_packed_nchw(output)) return S_FALSE;
    const uint32_t rois = output.sizes[0], channels = input.sizes[1], height = input.sizes[2], width = input.sizes[3];
    if (rois > kStagedMaxRois || p.max_samples > 1024) return S_FALSE;
    const uint64_t x_slots = (uint64_t)output.sizes[3] * p.max_samples;
    const uint64_t y_slots = (uint64_t)output.sizes[2] * p.max_samples;
    const uint64_t per_roi = staged_geometry_bytes(1, 0, 0) + 2 * (x_slots + y_slots) * 12;
    if (per_roi > kStagedGeometryBytes) return S_FALSE;
    n->x_slots = (uint32_t)x_slots;
    n->y_slots = (uint32_t)y_slots;
    n->round_rois = (uint32_t)(kStagedGeometryBytes / per_roi);
    n->row = width | 1;
    n->list_bytes = (uint32_t)((rois * sizeof(uint16_t) + 15) & ~(size_t)15);
    const size_t rest = n->list_bytes + staged_geometry_bytes(n->round_rois, n->x_slots, n->y_slots);
    const size_t element = input.type == DML_TENSOR_DATA_TYPE_FLOAT16 ? 2 : 4;
    n->k = 0;
    for (uint32_t k = 4; k >= 1 && n->k == 0; k /= 2) {
        const uint64_t staging = ((uint64_t)height * n->row * k * element + 15) & ~(uint64_t)15;
        if (k * element <= DML_ROI_ALIGN_STAGED_PIXEL_BYTES && staging + rest <= shared_limit) {
            n->k = k;
            n->pixel_bytes = (uint32_t)(k * element);
            n->staging_bytes = (uint32_t)staging;
        }
    }
    if (n->k == 0) return S_FALSE;
    n->shared_bytes = n->staging_bytes + (uint32_t)rest;
    staged_plan_keep(n, n->shared_bytes);
    n->chunks = (channels + n->k - 1) / n->k;
    n->group = 1;
    n->ranges = 1;
    n->threads = 1024;
    n->blocks = 0;
    return S_OK;
}

HRESULT plan_forward_staged(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    const size_t optin = dml_cuda_shared_optin(device);
    if (optin == 0) return S_FALSE;
    staged_plan shape;
    /* Less what the kernel declares itself (warp_counts). */
    HRESULT status = staged_plan_make(op, optin - 128, &shape);
    if (status != S_OK) return status;
    const bool is_half = op->inputs[DML_ROI_ALIGN_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16;
    const void* kernel = is_half ? staged_kernel<uint16_t>(shape.k) : staged_kernel<float>(shape.k);
    const size_t dynamic_shared = dml_cuda_allow_dynamic_shared(device, kernel);
    if (shape.shared_bytes > dynamic_shared) return S_FALSE;
    /* Two blocks of 512 threads where the shared memory takes two, else one
     * of 1024 (on an H100, K = 1 in two blocks was slower than K = 2 in one:
     * 0.151 against 0.105 ms FLOAT32). */
    shape.threads = dml_cuda_resident_blocks(device, kernel, 512, shape.shared_bytes) >=
                            2u * (unsigned)dml_cuda_state(device)->multiprocessors
                        ? 512
                        : 1024;
    const unsigned resident = dml_cuda_resident_blocks(device, kernel, shape.threads, shape.shared_bytes);
    if (resident == 0) return S_FALSE;
    /* Rounds of whole passes of the block over their outputs, where one fits. */
    const dml_tensor& output = op->outputs[DML_ROI_ALIGN_OUTPUT].tensor;
    const uint32_t outputs = output.sizes[2] * output.sizes[3];
    const uint64_t passes = (uint64_t)shape.round_rois * outputs / shape.threads;
    if (passes * shape.threads >= outputs) shape.round_rois = (uint32_t)(passes * shape.threads / outputs);
    /* A block alone on its multiprocessor keeps the samples of as many ROIs
     * as the rest of the shared memory holds. */
    if (resident <= (unsigned)dml_cuda_state(device)->multiprocessors) {
        staged_plan grown = shape;
        staged_plan_keep(&grown, dynamic_shared);
        if (dml_cuda_resident_blocks(device, kernel, grown.threads, grown.shared_bytes) == resident) shape = grown;
    }
    /* Split the image's ROIs only when the (image, chunk) tasks cannot fill
     * the GPU. Where they take several waves, a task stages a group of as
     * many chunks in turn as keeps the waves' chunks a block (the samples
     * are computed once a group). */
    const uint32_t batch = op->inputs[DML_ROI_ALIGN_INPUT].tensor.sizes[0];
    const uint64_t pairs = (uint64_t)batch * shape.chunks;
    shape.ranges = pairs >= resident ? 1 : (uint32_t)(resident / pairs);
    if (shape.ranges > output.sizes[0]) shape.ranges = output.sizes[0];
    const uint64_t waves = (pairs + resident - 1) / resident;
    for (shape.group = (uint32_t)(waves < shape.chunks ? waves : shape.chunks); shape.group > 1; shape.group--) {
        const uint64_t tasks = staged_tasks(shape, batch);
        if ((tasks + resident - 1) / resident * shape.group <= waves) break;
    }
    const uint64_t tasks = staged_tasks(shape, batch);
    shape.blocks = (unsigned)(tasks < resident ? tasks : resident);
    staged_plan* n = (staged_plan*)dml_plan_state(plan, sizeof(staged_plan));
    if (n == nullptr) return E_OUTOFMEMORY;
    *n = shape;
    return S_OK;
}

HRESULT run_forward_staged(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const staged_plan& n = *DML_PLAN_STATE(args, staged_plan);
    const forward_problem f = forward_problem_make(args);
    const bool is_half = args->op->inputs[DML_ROI_ALIGN_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16;
    const void* kernel = is_half ? staged_kernel<uint16_t>(n.k) : staged_kernel<float>(n.k);
    void* kernel_args[] = {(void*)&f, (void*)&n};
    cudaError_t error =
        cudaLaunchKernel(kernel, n.blocks, n.threads, kernel_args, n.shared_bytes, dml_cuda_stream(args));
    if (error != cudaSuccess) return dml_cuda_kernel_error(error, "CUDA kernel roi_align_forward_staged");
    return dml_cuda_check_launch("roi_align_forward_staged");
}

/* ---- OutputGradientTensor in one launch: "roi_align_grad/cuda/nchw", "/nhwc" ----
 *
 * For AVERAGE with a fixed sample count (MinimumSamplesPerOutput ==
 * MaximumSamplesPerOutput), no OutputROIGradientTensor, both gradients
 * packed NCHW or both packed channels-last. A pixel's contributions are channel-independent: (ROI r,
 * output oy, ox, sample, tap) gives dx[n, c, y, x] += (dy[r, c, oy, ox] * w)
 * * tap_weight for every c. So the geometry is computed once for all
 * channels, as a list of contributions per pixel sorted in the CPU's order
 * (r, oy, ox, tx, ty, tap: the key below), then every (pixel, channel) sums
 * its list in FLOAT64: the strided gather's terms in its order, the same bits.
 * One cooperative launch, phases separated by grid-wide barriers:
 *   1. count the contributions per pixel;        2. exclusive scan: offsets;
 *   3. place the contributions (any order within a pixel);
 *   4. sort each pixel's list by key;
 *   5. per pixel, a warp sums the list for 128 channels (lanes across the
 *      channels: each term's loads are one coalesced row of the output
 *      gradient as {R, OH OW, C}); NCHW: a block stores 32 pixels' results
 *      through shared memory as rows of 32 contiguous elements; channels-last:
 *      the warp stores the pixel's channels, contiguous, directly.
 * NCHW: phases 1, 3 and 4 also transpose a third each of the output gradient
 * to {R, OH OW, C} in the workspace, as FLOAT32 products dy * w (the first
 * rounding of every term, done once instead of once a term), in rows padded
 * to a multiple of 4 channels: phase 5 loads a lane's 4 channels as one
 * 16-byte vector, for FLOAT16 too. A channels-last output gradient is
 * {R, OH OW, C} already: read in place, a channel a load, times w.
 * Deterministic: counts and offsets are exact, and the sorted lists do not
 * depend on the order atomics placed them in. */

/* 16-byte aligned: the place phase stores one, and the sort loads one, as a
 * single vector (4-byte aligned, each took four 4-byte accesses: place 32 us
 * against 13 on an H100). */
struct alignas(16) contribution {
    uint32_t key;      /* ((((r OH + oy) OW + ox) sX + lx) sY + ly) taps + tap: the CPU's order */
    uint32_t pixel;    /* n H W + y W + x */
    uint32_t position; /* (r OH + oy) OW + ox: the row of the transposed output gradient */
    float weight;      /* the tap's weight (1 for NEAREST_NEIGHBOR) */
};

/* A sorted list entry: what phase 5 reads of a contribution, one 8-byte load. */
struct alignas(8) listed_term {
    uint32_t position;
    float weight;
};

constexpr unsigned kGatherPixels = 32; /* pixels per phase-5 task: a warp's row of stores (a lane each) */
/* Channels per lane in phase 5: 4 leaves room for 3 blocks a multiprocessor
 * (80 registers); 8 (2 blocks) and 2 were slower on an H100. NCHW: channels
 * c0 + 4 lane + j (one vector a term); channels-last: c0 + lane + 32 j. */
constexpr unsigned kLaneChannels = 4;
constexpr unsigned kGatherChannels = 32 * kLaneChannels;
constexpr unsigned kGatherBatch = 4;    /* terms whose loads are in flight together */
constexpr unsigned kTransposeTile = 32; /* positions per transpose task (of kGatherChannels channels) */

struct listed_problem {
    dml_roi_align_params params;
    align_shape shape;
    roi_source source;
    const void* input_gradient;
    void* output_gradient;
    uint32_t per_x, per_y, taps; /* samples per output element along X and Y; taps per sample */
    float average_weight;
    uint64_t samples;     /* R OH OW sX sY */
    uint32_t pixels;      /* N H W */
    uint32_t* offsets;    /* [pixels + 1]: counts, their exclusive scan, then the lists' ends (list_begin) */
    uint32_t* block_sums; /* [grid] */
    contribution* placed; /* [samples * taps] */
    listed_term* sorted;  /* [samples * taps] */
    float* transposed;    /* NCHW: dy * average_weight as [R OH OW, row_pitch], in the workspace */
    uint32_t row_pitch;   /* C rounded up to kLaneChannels (NCHW); C (channels-last: dy's rows) */
    uint32_t pixel_tiles, channel_groups; /* phase 5's tasks */
};

/* A sample's contributions, in the key order: keys key + t, t < count. */
struct sample_contributions {
    uint32_t count; /* 0 (no image, or outside), 1 (NEAREST_NEIGHBOR) or 4 */
    uint32_t key, position;
    uint32_t pixel[4];
    float weight[4];
};

template <class T> __device__ sample_contributions contributions_of(const listed_problem& g, uint64_t s) {
    const align_shape& shape = g.shape;
    const dml_roi_align_params& p = g.params;
    sample_contributions c;
    c.count = 0;
    uint32_t ly = (uint32_t)(s % g.per_y);
    uint64_t rest = s / g.per_y;
    uint32_t lx = (uint32_t)(rest % g.per_x);
    rest /= g.per_x;
    uint32_t ox = (uint32_t)(rest % shape.out_width);
    rest /= shape.out_width;
    uint32_t oy = (uint32_t)(rest % shape.out_height);
    uint32_t r = (uint32_t)(rest / shape.out_height);
    roi_region region = region_make<T>(g.source, r, p, shape);
    if (region.batch >= shape.batch) return c; /* RA-12 */
    dml_roi_axis_sample sx = dml_roi_axis_sample_at(&region.x, (uint64_t)ox * g.per_x + lx, &p);
    if (sx.outside) return c;
    dml_roi_axis_sample sy = dml_roi_axis_sample_at(&region.y, (uint64_t)oy * g.per_y + ly, &p);
    if (sy.outside) return c;
    c.key = (uint32_t)(s * g.taps);
    c.position = (uint32_t)(((uint64_t)r * shape.out_height + oy) * shape.out_width + ox);
    const uint32_t image = (uint32_t)region.batch * shape.height * shape.width;
    const uint32_t first_row = image + sy.first * shape.width;
    if (!p.interpolation_linear) {
        c.count = 1;
        c.pixel[0] = first_row + sx.first;
        c.weight[0] = 1.0f;
        return c;
    }
    const uint32_t second_row = image + sy.second * shape.width;
    c.count = 4;
    dml_roi_bilinear_weights(sx.fraction, sy.fraction, c.weight);
    c.pixel[0] = first_row + sx.first;
    c.pixel[1] = first_row + sx.second;
    c.pixel[2] = second_row + sx.first;
    c.pixel[3] = second_row + sx.second;
    return c;
}

/* The exclusive prefix sum of `value` over the block's threads (warp
 * shuffles, then the warps' sums); *total: the block's sum. */
__device__ uint32_t block_exclusive_sum(uint32_t value, uint32_t* total) {
    __shared__ uint32_t warp_sums[kThreads / 32];
    const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    uint32_t inclusive = value;
    DML_UNROLL
    for (unsigned distance = 1; distance < 32; distance *= 2) {
        uint32_t below = __shfl_up_sync(0xFFFFFFFFu, inclusive, distance);
        if (lane >= distance) inclusive += below;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    uint32_t before = 0, all = 0;
    for (unsigned w = 0; w < blockDim.x / 32; w++) {
        uint32_t sum = warp_sums[w];
        before += w < warp ? sum : 0;
        all += sum;
    }
    __syncthreads(); /* warp_sums free for the next call */
    *total = all;
    return before + inclusive - value;
}

/* Phase 2: offsets[0..pixels] = exclusive scan of the counts. Each block
 * scans one chunk (a run of counts a thread, the runs' sums by
 * block_exclusive_sum) and adds the totals of the blocks before it, which
 * its threads sum together (one thread's serial sums took 12 us on an H100).
 * Integer sums: exact in any order. */
__device__ void scan_offsets(const listed_problem& g, cooperative_groups::grid_group& grid) {
    uint64_t total = (uint64_t)g.pixels + 1;
    uint64_t chunk = (total + gridDim.x - 1) / gridDim.x, per_thread = (chunk + blockDim.x - 1) / blockDim.x;
    uint64_t begin = blockIdx.x * chunk + threadIdx.x * per_thread;
    uint64_t end = begin + per_thread, chunk_end = (uint64_t)(blockIdx.x + 1) * chunk;
    if (end > chunk_end) end = chunk_end;
    if (end > total) end = total;
    uint32_t sum = 0;
    for (uint64_t i = begin; i < end; i++)
        sum += g.offsets[i];
    uint32_t block_total;
    uint32_t running = block_exclusive_sum(sum, &block_total);
    if (threadIdx.x == 0) g.block_sums[blockIdx.x] = block_total;
    grid.sync();
    uint32_t earlier = 0, block_offset;
    for (unsigned b = threadIdx.x; b < blockIdx.x; b += blockDim.x)
        earlier += g.block_sums[b];
    block_exclusive_sum(earlier, &block_offset);
    running += block_offset;
    for (uint64_t i = begin; i < end; i++) {
        uint32_t count = g.offsets[i];
        g.offsets[i] = running;
        running += count;
    }
}

/* The number of transpose tasks: (ROI, kGatherChannels channels,
 * kTransposeTile positions). */
__device__ uint64_t transpose_tasks(const listed_problem& g) {
    const align_shape& s = g.shape;
    const uint32_t positions = s.out_height * s.out_width;
    return (uint64_t)s.roi_count * ((s.channels + kGatherChannels - 1) / kGatherChannels) *
           ((positions + kTransposeTile - 1) / kTransposeTile);
}

/* The output gradient {R, C, OH OW} as FLOAT32 dy * average_weight in
 * {R, OH OW, row_pitch}: transpose tasks [first, end), the block's in turn,
 * through shared memory (staging). A thread loads all its elements of a task
 * before it stores any (16 loads in flight; 32 x 32 tiles of one load each
 * took 58 of 240 us on an H100); reads go in rows of 32 positions, writes in
 * rows of 128 channels, the padding channels written as zeros. */
template <class T>
__device__ void transpose_output_gradient(const listed_problem& g, float* staging, uint64_t first, uint64_t end) {
    constexpr unsigned kRows = kThreads / kTransposeTile, kRowsPerThread = kGatherChannels / kRows;
    float* tile = staging; /* [channel][position], rows padded by one */
    const align_shape& s = g.shape;
    const uint32_t positions = s.out_height * s.out_width;
    const uint32_t position_tiles = (positions + kTransposeTile - 1) / kTransposeTile;
    const uint32_t channel_tiles = (s.channels + kGatherChannels - 1) / kGatherChannels;
    const uint32_t column = threadIdx.x % kTransposeTile, first_row = threadIdx.x / kTransposeTile;
    const uint32_t channel = threadIdx.x % kGatherChannels, first_position = threadIdx.x / kGatherChannels;
    for (uint64_t task = first + blockIdx.x; task < end; task += gridDim.x) {
        const uint32_t p0 = (uint32_t)(task % position_tiles) * kTransposeTile;
        const uint64_t rest = task / position_tiles;
        const uint32_t c0 = (uint32_t)(rest % channel_tiles) * kGatherChannels, r = (uint32_t)(rest / channel_tiles);
        const T* source = (const T*)g.input_gradient + (uint64_t)r * s.channels * positions;
        float* target = g.transposed + (uint64_t)r * positions * g.row_pitch;
        T values[kRowsPerThread]; /* rows: channels first_row + kRows k */
        const bool column_in = p0 + column < positions;
        DML_UNROLL
        for (unsigned k = 0; k < kRowsPerThread; k++) {
            const uint32_t c = c0 + first_row + kRows * k;
            values[k] = c < s.channels && column_in ? source[(uint64_t)c * positions + p0 + column] : T();
        }
        DML_UNROLL
        for (unsigned k = 0; k < kRowsPerThread; k++)
            tile[(first_row + kRows * k) * (kTransposeTile + 1) + column] =
                dml_cuda_widen(values[k]) * g.average_weight;
        __syncthreads();
        if (c0 + channel < g.row_pitch)
            for (uint32_t row = first_position; row < kTransposeTile && p0 + row < positions;
                 row += kThreads / kGatherChannels) /* row: a position */
                target[(uint64_t)(p0 + row) * g.row_pitch + c0 + channel] =
                    c0 + channel < s.channels ? tile[channel * (kTransposeTile + 1) + row] : 0.0f;
        __syncthreads();
    }
}

/* Phase 5's stores, FLOAT16 by dml_cuda_narrow (the software conversion took
 * 20 instructions an element here). */
template <class T> __device__ void store_result(T* base, uint64_t offset, float value) {
    base[offset] = dml_cuda_narrow(value, T());
}

/* After phase 3, offsets[p] is the end of pixel p's list (the place phase
 * counts it up from the list's start), which the next pixel's list begins at. */
__device__ uint32_t list_begin(const listed_problem& g, uint32_t pixel) { return pixel ? g.offsets[pixel - 1] : 0; }

/* Lane `lane`'s entry of the up to 32 list entries from `base` (a list ending
 * at `end`): lanes past the list hold entry `base`; none when base == end. */
__device__ listed_term terms_at(const listed_problem& g, uint32_t base, uint32_t end, uint32_t lane) {
    if (base >= end) return listed_term{0, 0.0f};
    return g.sorted[base + (lane < end - base ? lane : 0)];
}

/* Phase 5. Task: kGatherPixels consecutive pixels (n H W + y W + x) and
 * kGatherChannels channels from c0. Each warp takes pixels of the task in
 * turn; its lanes sum the pixel's sorted list, kLaneChannels channels a
 * lane, in FLOAT64 (the strided gather's terms in its order, each
 * (dy * w) * tap weight rounded to FLOAT32: the same bits). The lanes load
 * 32 list entries at once and pass them round by shuffles, and the terms'
 * loads go kGatherBatch at a time. Latency-bound, so the dependent loads are
 * hoisted: the task's list bounds are one load (a lane a pixel), and a
 * warp's next pixel's first 32 entries load while it sums the current one. */
template <class T, bool ChannelsLast> __device__ void gather_listed(const listed_problem& g, float* staging) {
    const align_shape& s = g.shape;
    const uint32_t plane = s.height * s.width, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const uint32_t warps = blockDim.x / 32;

    for (uint64_t task = blockIdx.x; task < (uint64_t)g.pixel_tiles * g.channel_groups; task += gridDim.x) {
        const uint32_t p0 = (uint32_t)(task % g.pixel_tiles) * kGatherPixels;
        const uint32_t c0 = (uint32_t)(task / g.pixel_tiles) * kGatherChannels;
        /* NCHW: the lane's vector of the padded row, those past it clamped;
         * channels-last: its channels, those past C clamped (loaded, not stored). */
        const uint32_t last_vector = g.row_pitch / kLaneChannels - 1;
        const uint32_t vector = c0 / kLaneChannels + lane < last_vector ? c0 / kLaneChannels + lane : last_vector;
        uint32_t channel[kLaneChannels];
        DML_UNROLL
        for (unsigned j = 0; j < kLaneChannels; j++) {
            uint32_t c = c0 + lane + 32 * j;
            channel[j] = c < s.channels ? c : s.channels - 1;
        }
        /* Lane k: pixel p0 + k's list [first, last), empty past the pixels. */
        const uint32_t own = p0 + lane;
        const uint32_t first = own < g.pixels ? list_begin(g, own) : 0;
        const uint32_t last = own < g.pixels ? g.offsets[own] : 0;
        uint32_t next_begin = __shfl_sync(0xFFFFFFFFu, first, warp), next_end = __shfl_sync(0xFFFFFFFFu, last, warp);
        listed_term next = terms_at(g, next_begin, next_end, lane);
        for (uint32_t i = warp; i < kGatherPixels; i += warps) {
            const uint32_t begin = next_begin, end = next_end;
            listed_term mine = next;
            if (i + warps < kGatherPixels) { /* warp-uniform */
                next_begin = __shfl_sync(0xFFFFFFFFu, first, i + warps);
                next_end = __shfl_sync(0xFFFFFFFFu, last, i + warps);
                next = terms_at(g, next_begin, next_end, lane);
            }
            double acc[kLaneChannels];
            DML_UNROLL
            for (unsigned j = 0; j < kLaneChannels; j++)
                acc[j] = 0.0;
            for (uint32_t base = begin; base < end; base += 32) {
                const uint32_t count = end - base < 32 ? end - base : 32;
                if (base != begin) mine = terms_at(g, base, end, lane);
                for (uint32_t k = 0; k < count; k += kGatherBatch) {
                    float values[kGatherBatch][kLaneChannels], weights[kGatherBatch];
                    DML_UNROLL
                    for (unsigned u = 0; u < kGatherBatch; u++) {
                        /* k + u <= 31; past `count`, lanes hold entry `base` (loaded, not added). */
                        uint32_t position = __shfl_sync(0xFFFFFFFFu, mine.position, k + u);
                        weights[u] = __shfl_sync(0xFFFFFFFFu, mine.weight, k + u);
                        if constexpr (ChannelsLast) { /* dy's row, times w */
                            const T* row = (const T*)g.input_gradient + (uint64_t)position * g.row_pitch;
                            DML_UNROLL
                            for (unsigned j = 0; j < kLaneChannels; j++)
                                values[u][j] = dml_cuda_widen(row[channel[j]]) * g.average_weight;
                        } else { /* dy * w already */
                            const float4 v = ((const float4*)(g.transposed + (uint64_t)position * g.row_pitch))[vector];
                            values[u][0] = v.x, values[u][1] = v.y, values[u][2] = v.z, values[u][3] = v.w;
                        }
                    }
                    DML_UNROLL
                    for (unsigned u = 0; u < kGatherBatch; u++) {
                        if (k + u >= count) break;
                        DML_UNROLL
                        for (unsigned j = 0; j < kLaneChannels; j++)
                            acc[j] += values[u][j] * weights[u];
                    }
                }
            }
            const uint32_t pixel = p0 + i;
            /* Rounded to FLOAT32 as the CPU rounds. */
            if constexpr (ChannelsLast) { /* the pixel's channels are contiguous: stored from here */
                if (pixel < g.pixels) {
                    T* row = (T*)g.output_gradient + (uint64_t)pixel * s.channels;
                    DML_UNROLL
                    for (unsigned j = 0; j < kLaneChannels; j++)
                        if (c0 + lane + 32 * j < s.channels) store_result(row, c0 + lane + 32 * j, (float)acc[j]);
                }
            } else {
                DML_UNROLL
                for (unsigned j = 0; j < kLaneChannels; j++)
                    staging[(kLaneChannels * lane + j) * (kGatherPixels + 1) + i] = (float)acc[j];
            }
        }
        if constexpr (!ChannelsLast) {
            __syncthreads();
            /* A warp stores a row: one channel, the task's pixels (kGatherPixels == 32). */
            const uint32_t pixel = p0 + lane;
            if (pixel < g.pixels) {
                T* image = (T*)g.output_gradient + (uint64_t)(pixel / plane) * s.channels * plane + pixel % plane;
                for (uint32_t row = warp; row < kGatherChannels && c0 + row < s.channels; row += warps)
                    store_result(image, (uint64_t)(c0 + row) * plane, staging[row * (kGatherPixels + 1) + lane]);
            }
            __syncthreads();
        }
    }
}

/* ChannelsLast: both gradients packed channels-last (a template parameter,
 * not a flag: the NCHW kernel keeps its 80 registers, 3 blocks per SM).
 * At most 80 registers (3 blocks) for every instantiation: unbounded, the
 * channels-last FLOAT32 one took 92 (2 blocks). */
template <class T, bool ChannelsLast>
__global__ void __launch_bounds__(kThreads, 3) roi_align_grad_listed(const listed_problem g) {
    __shared__ float staging[kGatherChannels * (kGatherPixels + 1)]; /* the transpose and phase 5 */
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    const uint64_t start = grid_start(), step = grid_step();
    for (uint64_t i = start; i <= g.pixels; i += step)
        g.offsets[i] = 0;
    grid.sync();
    /* NCHW: the transpose in thirds beside phases 1, 3 and 4, which leave
     * the GPU mostly idle (latency-bound) and use no shared memory. */
    const uint64_t transposes = ChannelsLast ? 0 : transpose_tasks(g);
    for (uint64_t s = start; s < g.samples; s += step) {
        const sample_contributions c = contributions_of<T>(g, s);
        DML_UNROLL
        for (unsigned t = 0; t < 4; t++)
            if (t < c.count) atomicAdd(&g.offsets[c.pixel[t]], 1u);
    }
    if (transposes) transpose_output_gradient<T>(g, staging, 0, transposes / 3);
    grid.sync();
    scan_offsets(g, grid);
    grid.sync();
    for (uint64_t s = start; s < g.samples; s += step) {
        /* The sample's atomics issued together, then its stores (on an H100
         * no faster than one tap at a time: the atomics' latency is not what
         * this phase waited for, its 4-byte stores were). The offsets are
         * the cursors: each pixel's ends at its list's end (list_begin). */
        const sample_contributions c = contributions_of<T>(g, s);
        uint32_t slot[4];
        DML_UNROLL
        for (unsigned t = 0; t < 4; t++)
            if (t < c.count) slot[t] = atomicAdd(&g.offsets[c.pixel[t]], 1u);
        DML_UNROLL
        for (unsigned t = 0; t < 4; t++)
            if (t < c.count) g.placed[slot[t]] = {c.key + t, c.pixel[t], c.position, c.weight[t]};
    }
    if (transposes) transpose_output_gradient<T>(g, staging, transposes / 3, transposes * 2 / 3);
    grid.sync();
    /* Each contribution's rank among its pixel's (keys are distinct). A warp
     * per pixel ranking by shuffles was slower (channels-last on an H100: 39
     * against 13 us). */
    uint32_t listed = g.offsets[g.pixels];
    for (uint64_t i = start; i < listed; i += step) {
        contribution c = g.placed[i];
        uint32_t begin = list_begin(g, c.pixel), end = g.offsets[c.pixel], rank = 0;
        for (uint32_t j = begin; j < end; j++)
            rank += g.placed[j].key < c.key;
        g.sorted[begin + rank] = {c.position, c.weight};
    }
    if (transposes) transpose_output_gradient<T>(g, staging, transposes * 2 / 3, transposes);
    grid.sync();
    gather_listed<T, ChannelsLast>(g, staging);
}

/* What the plan fixes: the launch and the temporary's layout. */
struct listed_plan {
    listed_problem shape_only; /* pointers unset */
    const void* kernel;        /* roi_align_grad_listed<T, channels_last> */
    bool channels_last;
    unsigned blocks;
    uint64_t offsets_bytes, sums_bytes, placed_bytes, sorted_bytes, transposed_bytes;
};

/* Both gradients packed NCHW, or (channels_last) both packed channels-last. */
HRESULT plan_grad_listed_layout(const DMLOperator* op, const DMLDevice* device, bool channels_last, dml_plan* plan) {
    const dml_roi_align_params& p = *(const dml_roi_align_params*)op->params;
    const dml_tensor& dy = op->inputs[DML_ROI_ALIGN_GRAD_INPUT_GRADIENT].tensor;
    const dml_tensor& dx = op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_GRADIENT].tensor;
    if (p.reduction_max || p.min_samples != p.max_samples || has_box_gradient(op) || !dx.present) return S_FALSE;
    bool (*packed)(const dml_tensor&) = channels_last ? dml_cuda_packed_nhwc : dml_cuda_packed_nchw;
    if (!packed(dy) || !packed(dx)) return S_FALSE;
    dml_kernel_args shapes_only = {};
    shapes_only.op = op;
    shapes_only.device = device;
    grad_problem base = grad_problem_make(&shapes_only);
    const align_shape& s = base.shape;
    uint64_t pixels = (uint64_t)s.batch * s.height * s.width;
    uint64_t samples = (uint64_t)s.roi_count * s.out_height * s.out_width * p.min_samples * p.min_samples;
    uint32_t taps = p.interpolation_linear ? 4 : 1;
    /* 32-bit pixels and offsets. Sorting a pixel's list costs its length
     * squared, and every contribution may land on one pixel: at most 2^20
     * contributions keep that worst case to about 10^12 steps (a detection
     * workload of 512 ROIs, 7x7 outputs, 2x2 samples has 2^18.6); larger
     * problems take the strided kernels. */
    if (pixels >= UINT32_MAX / 2 || samples * taps > ((uint64_t)1 << 20)) return S_FALSE;

    const bool is_half = dy.type == DML_TENSOR_DATA_TYPE_FLOAT16;
    const void* kernel = channels_last ? (is_half ? (const void*)roi_align_grad_listed<uint16_t, true>
                                                  : (const void*)roi_align_grad_listed<float, true>)
                                       : (is_half ? (const void*)roi_align_grad_listed<uint16_t, false>
                                                  : (const void*)roi_align_grad_listed<float, false>);
    unsigned resident = dml_cuda_resident_blocks(device, kernel, kThreads, 0, true);
    if (resident == 0) return S_FALSE; /* the strided kernels then */

    listed_plan* lp = (listed_plan*)dml_plan_state(plan, sizeof(listed_plan));
    if (lp == nullptr) return E_OUTOFMEMORY;
    listed_problem& g = lp->shape_only;
    g.params = p;
    g.shape = s;
    g.per_x = g.per_y = p.min_samples;
    g.taps = taps;
    dml_roi_axis x = {}, y = {};
    x.per_output = y.per_output = p.min_samples;
    g.average_weight = dml_roi_average_weight(&x, &y);
    g.samples = samples;
    g.pixels = (uint32_t)pixels;
    g.pixel_tiles = (uint32_t)((pixels + kGatherPixels - 1) / kGatherPixels);
    g.channel_groups = (s.channels + kGatherChannels - 1) / kGatherChannels;
    g.row_pitch = channels_last ? s.channels : (s.channels + kLaneChannels - 1) / kLaneChannels * kLaneChannels;
    lp->kernel = kernel;
    lp->channels_last = channels_last;
    lp->blocks = resident;
    lp->offsets_bytes = align_up((pixels + 1) * sizeof(uint32_t));
    lp->sums_bytes = align_up((uint64_t)lp->blocks * sizeof(uint32_t));
    lp->placed_bytes = align_up(samples * taps * sizeof(contribution));
    lp->sorted_bytes = align_up(samples * taps * sizeof(listed_term));
    lp->transposed_bytes =
        channels_last ? 0 : align_up((uint64_t)s.roi_count * s.out_height * s.out_width * g.row_pitch * sizeof(float));
    plan->temporary_size =
        lp->offsets_bytes + lp->sums_bytes + lp->placed_bytes + lp->sorted_bytes + lp->transposed_bytes;
    return S_OK;
}

HRESULT plan_grad_listed_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_grad_listed_layout(op, device, false, plan);
}

HRESULT plan_grad_listed_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_grad_listed_layout(op, device, true, plan);
}

HRESULT run_grad_listed(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const listed_plan& lp = *DML_PLAN_STATE(args, listed_plan);
    listed_problem g = lp.shape_only;
    const DMLOperator* op = args->op;
    g.source = roi_source_make(&op->inputs[DML_ROI_ALIGN_GRAD_ROI].tensor, args->inputs[DML_ROI_ALIGN_GRAD_ROI],
                               &op->inputs[DML_ROI_ALIGN_GRAD_BATCH_INDICES].tensor,
                               args->inputs[DML_ROI_ALIGN_GRAD_BATCH_INDICES]);
    g.input_gradient = args->inputs[DML_ROI_ALIGN_GRAD_INPUT_GRADIENT];
    g.output_gradient = args->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_GRADIENT];
    char* scratch = (char*)args->temporary;
    g.offsets = (uint32_t*)scratch;
    g.block_sums = (uint32_t*)(scratch + lp.offsets_bytes);
    g.placed = (contribution*)(scratch + lp.offsets_bytes + lp.sums_bytes);
    g.sorted = (listed_term*)((char*)g.placed + lp.placed_bytes);
    g.transposed = lp.transposed_bytes ? (float*)((char*)g.sorted + lp.sorted_bytes) : nullptr;
    void* kernel_args[] = {&g};
    cudaError_t error =
        cudaLaunchCooperativeKernel(lp.kernel, lp.blocks, kThreads, kernel_args, 0, dml_cuda_stream(args));
    if (error != cudaSuccess) return dml_cuda_kernel_error(error, "CUDA kernel roi_align_grad_listed");
    return dml_cuda_check_launch("roi_align_grad_listed");
}

} // namespace

const dml_impl dml_cuda_roi_align_generic = {"roi_align/cuda/strided", DML_ISA_GENERIC, nullptr, run_forward};
const dml_impl dml_cuda_roi_align_grad_generic = {"roi_align_grad/cuda/strided", DML_ISA_GENERIC, plan_grad, run_grad};
const dml_impl dml_cuda_roi_align_grad_nchw = {"roi_align_grad/cuda/nchw", DML_ISA_GENERIC, plan_grad_listed_nchw,
                                               run_grad_listed};
const dml_impl dml_cuda_roi_align_grad_nhwc = {"roi_align_grad/cuda/nhwc", DML_ISA_GENERIC, plan_grad_listed_nhwc,
                                               run_grad_listed};
const dml_impl dml_cuda_roi_align_nchw = {"roi_align/cuda/nchw", DML_ISA_GENERIC, plan_forward_nchw,
                                          run_forward_packed};
const dml_impl dml_cuda_roi_align_nhwc = {"roi_align/cuda/nhwc", DML_ISA_GENERIC, plan_forward_nhwc,
                                          run_forward_packed};
const dml_impl dml_cuda_roi_align_staged_nchw = {"roi_align/cuda/staged_nchw", DML_ISA_GENERIC, plan_forward_staged,
                                                 run_forward_staged};
