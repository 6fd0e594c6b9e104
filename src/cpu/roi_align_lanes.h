/* ROI align and its gradient (AVERAGE), eight channels per vector (spec
 * roi_align.md §4, §7): the kernels of roi_align_avx2.c (AVX2 + F16C) and
 * roi_align_avx512.c (the same, with the FLOAT64 sums of 8 channels in one
 * AVX-512 vector, lanes_f64), included by each; they add only their
 * implementations' names.
 *
 * Bit-identical to the generic kernel (roi_align.c) and so to CUDA: each lane
 * is one channel and does, in the same order, the FLOAT32 operations the
 * generic kernel does for it, with the same shared functions of
 * roi_align_math.h; no FMA (the library builds with -ffp-contract=off). What
 * changes is the bookkeeping: a region's samples along X and along Y are
 * resolved once per region (axis tables in the workspace) and reused for
 * every output, sample and 8 channels; the per-sample math is a few loads
 * and multiplies. NCHW inputs are read through channels-last tiles: of each
 * image once per block of 8 channels when the ROIs cover it
 * (visit_by_image_tiles), else of each ROI's box.
 *
 * - Forward: one task per (roi, block of 8 channels).
 * - OutputGradientTensor: one task per (image, block of 8 channels) — or a
 *   band of its rows — accumulating into FLOAT64 planes of its own, pixel by
 *   pixel in the generic order (r, oy, ox, sample, tap): no atomics.
 * - OutputROIGradientTensor: one task per (roi, block of 8 channels) gives
 *   each channel's FLOAT64 sums; they are then combined per ROI in the fixed
 *   shape of roi_align_math.h (channels in order within each group, groups
 *   in order).
 * MAX gradients are left to the generic kernel (its plan declines them). */
#ifndef DML_CPU_ROI_ALIGN_LANES_H
#define DML_CPU_ROI_ALIGN_LANES_H

#include <string.h>

#include "roi_lanes_avx2.h"

/* One sample index along one axis of a region, resolved (§4.3, §7.3). */
typedef struct axis_sample {
    uint32_t first, second; /* LINEAR taps (NEAREST_NEIGHBOR: first == second) */
    float fraction;         /* weight of the second tap */
    float remainder;        /* 1 - fraction, the weight of the first */
    bool outside;
    uint64_t first_at, second_at; /* the taps times the stride along the axis (forward: axis_offsets) */
    uint32_t low, high;           /* the ROI gradient's taps: floor and ceil of the clamped coordinate */
    float low_fraction;
    float d_first, d_second; /* d(coordinate) / d(raw corner 1), / d(raw corner 2) */
} axis_sample;

static void axis_table(const dml_roi_axis* axis, const dml_roi_align_params* p, bool box, axis_sample* table) {
    for (uint64_t t = 0; t < axis->count; t++) {
        dml_roi_axis_sample s = dml_roi_axis_sample_at(axis, t, p);
        axis_sample* e = &table[t];
        e->first = s.first;
        e->second = s.second;
        e->fraction = s.fraction;
        e->remainder = 1.0f - s.fraction;
        e->outside = s.outside;
        if (!box) continue;
        dml_roi_gradient_taps taps = dml_roi_gradient_taps_at(s.coord, axis->extent);
        e->low = taps.low;
        e->high = taps.high;
        e->low_fraction = taps.fraction;
        dml_roi_coord_derivatives(axis, t, p, &e->d_first, &e->d_second);
    }
}

/* The taps' offsets along an axis whose stride is `stride`. */
static void axis_offsets(axis_sample* table, uint64_t count, uint64_t stride) {
    for (uint64_t t = 0; t < count; t++) {
        table[t].first_at = table[t].first * stride;
        table[t].second_at = table[t].second * stride;
    }
}

/* The most samples an axis of `outputs` outputs can have (per_output <= max_samples). */
static uint64_t axis_capacity(uint32_t outputs, const dml_roi_align_params* p) {
    return (uint64_t)outputs * p->max_samples;
}

/* Workspace beyond this is not worth it: the generic kernel takes the problem. */
#define ROI_ALIGN_WORKSPACE_LIMIT ((uint64_t)256 << 20)

/* Whether the plan may take a tensor: it can be gathered, and its layout
 * class (channels-last: channel stride 1) is the implementation's. */
static bool layout_fits(const dml_tensor* tensor, bool channels_last) {
    return !tensor->present || (roi_lanes_fit(tensor->strides[1]) && (tensor->strides[1] == 1) == channels_last);
}

/* The interpolated value of one in-bounds sample in 8 channels (§4.3):
 * dml_roi_bilinear lane by lane. `at` is the offset of (n, c0, 0, 0); the
 * tables' offsets are those of `in` (axis_offsets). */
static inline __attribute__((always_inline)) __m256 sample_lanes(const tensor_view* in, uint64_t at,
                                                                 const axis_sample* sx, const axis_sample* sy,
                                                                 bool linear, uint32_t lanes, load_mode mode) {
    uint64_t top = at + sy->first_at, left = sx->first_at;
    if (!linear) return lanes_load_as(&in->lanes, top + left, lanes, mode);
    uint64_t bottom = at + sy->second_at, right = sx->second_at;
    __m256 top_left = lanes_load_as(&in->lanes, top + left, lanes, mode);
    __m256 top_right = lanes_load_as(&in->lanes, top + right, lanes, mode);
    __m256 bottom_left = lanes_load_as(&in->lanes, bottom + left, lanes, mode);
    __m256 bottom_right = lanes_load_as(&in->lanes, bottom + right, lanes, mode);
    __m256 fx = _mm256_set1_ps(sx->fraction), fy = _mm256_set1_ps(sy->fraction);
    __m256 one_fx = _mm256_set1_ps(sx->remainder), one_fy = _mm256_set1_ps(sy->remainder);
    __m256 upper = _mm256_add_ps(_mm256_mul_ps(one_fx, top_left), _mm256_mul_ps(fx, top_right));
    __m256 lower = _mm256_add_ps(_mm256_mul_ps(one_fx, bottom_left), _mm256_mul_ps(fx, bottom_right));
    return _mm256_add_ps(_mm256_mul_ps(one_fy, upper), _mm256_mul_ps(fy, lower));
}

/* [begin, end): the pixels the in-bounds samples of a table read, through
 * their interpolation taps or (gradient_taps) the ROI gradient's taps. */
static void axis_span(const axis_sample* table, uint64_t count, bool gradient_taps, uint32_t* begin, uint32_t* end) {
    *begin = UINT32_MAX;
    *end = 0;
    for (uint64_t t = 0; t < count; t++) {
        if (table[t].outside) continue;
        uint32_t a = gradient_taps ? table[t].low : table[t].first, b = gradient_taps ? table[t].high : table[t].second;
        uint32_t low = a < b ? a : b, high = a < b ? b : a;
        *begin = low < *begin ? low : *begin;
        *end = high + 1 > *end ? high + 1 : *end;
    }
}

/* NCHW: gathers are slow, so the pixels the samples read are first
 * transposed into a channels-last FLOAT32 tile, a view of which replaces `in`
 * (at `origin`), when that is dense enough to pay: transposing a pixel costs
 * about 5 instructions, gathering a sample's four taps about 80 cycles
 * (perf), so up to 16 pixels a sample. False: keep reading `in`. */
static bool tile_view(const tensor_view* in, uint64_t at, const axis_sample* xs, uint64_t nx, const axis_sample* ys,
                      uint64_t ny, bool gradient_taps, float* tile, uint64_t tile_floats, tensor_view* tiled,
                      uint64_t* origin) {
    pixel_box box;
    axis_span(xs, nx, gradient_taps, &box.x0, &box.x1);
    axis_span(ys, ny, gradient_taps, &box.y0, &box.y1);
    uint64_t pixels = box.x1 > box.x0 && box.y1 > box.y0 ? (uint64_t)(box.x1 - box.x0) * (box.y1 - box.y0) : 0;
    if (pixels == 0 || pixels * ROI_LANES > tile_floats || pixels > 16 * nx * ny) return false;
    transpose_to_tile(in, at, box, tile);
    uint64_t width = box.x1 - box.x0;
    *tiled = (tensor_view){{0, 1, width * ROI_LANES, ROI_LANES}, channel_lanes_make(tile, 1, false)};
    /* Offsets wrap around 2^64 to the box's origin: tile + 0 is (x0, y0). */
    *origin = 0 - (box.y0 * tiled->strides[2] + box.x0 * tiled->strides[3]);
    return true;
}

/* Row y of image n's planes [c0, c0 + lanes) into tile[y][W][8] as FLOAT32
 * (exact), missing channels 0. */
static void pack_row(const tensor_view* in, uint32_t width, uint32_t n, uint32_t c0, uint32_t lanes, uint32_t y,
                     float* tile) {
    float* row = tile + (uint64_t)y * width * ROI_LANES;
    uint64_t at = view_offset(in, n, c0, y, 0);
    if (lanes == ROI_LANES && !in->lanes.contiguous) {
        transpose_to_tile(in, view_offset(in, n, c0, 0, 0), (pixel_box){0, width, y, y + 1}, row);
    } else if (lanes == ROI_LANES && in->lanes.half) {
        for (uint32_t x = 0; x < width; x++)
            _mm256_storeu_ps(row + (uint64_t)x * ROI_LANES,
                             lanes_load_as(&in->lanes, at + x * in->strides[3], lanes, LOAD_F16));
    } else if (lanes == ROI_LANES) {
        for (uint32_t x = 0; x < width; x++)
            _mm256_storeu_ps(row + (uint64_t)x * ROI_LANES,
                             lanes_load_as(&in->lanes, at + x * in->strides[3], lanes, LOAD_F32));
    } else {
        for (uint32_t x = 0; x < width; x++)
            _mm256_storeu_ps(row + (uint64_t)x * ROI_LANES, lanes_load(&in->lanes, at + x * in->strides[3], lanes));
    }
}

/* At most the pixels a region's samples read along an axis: its size and
 * the two pixels of interpolation beyond it, within the image. */
static uint64_t axis_pixels(const dml_roi_axis* axis) {
    float pixels = fabsf(axis->size) + 2.0f;
    return pixels < (float)axis->extent ? (uint64_t)pixels : axis->extent; /* NaN: the whole axis */
}

/* Whether packing each image's planes once per block of channels costs less
 * than packing (or gathering) each ROI's own box: when the boxes of the ROIs
 * of order[0..valid) add up to at least the images they read. */
static bool image_tiles_pay(const roi_align_dims* d, const roi_of_image* order, uint32_t valid) {
    uint64_t boxes = 0, images = 0;
    for (uint32_t i = 0; i < valid; i++) {
        images += i == 0 || order[i].batch != order[i - 1].batch;
        roi_region region =
            roi_region_make(&d->source, order[i].roi, d->params, d->out_height, d->out_width, d->height, d->width);
        boxes += axis_pixels(&region.x) * axis_pixels(&region.y);
    }
    return boxes >= images * d->height * d->width;
}

/* Whether image tiles may pay for an input (perf, 2x256x128x128): NCHW,
 * where they replace a transpose per ROI, and channels-last FLOAT32, where
 * they keep a block's pixels in cache across the image's ROIs; channels-last
 * FLOAT16 reads its half-size pixels directly, cheaper than packing them. */
static bool image_tiles_fit(const dml_tensor* input) {
    return input->strides[1] != 1 || input->type == DML_TENSOR_DATA_TYPE_FLOAT32;
}

/* What a fast path does with ROI `roi` in channels [c0, c0 + lanes), its
 * image's planes packed in image_tile (NULL: the ROI has no image). */
typedef void (*image_tile_visit)(void* context, uint32_t roi, uint32_t c0, uint32_t lanes, const float* image_tile);

/* Visits every ROI in every block of 8 channels, reading image tiles: the
 * ROIs of order[0..valid) (by image) in units of (block, image, chunk of its
 * ROIs), those without an image (order[valid..R)) in units of their own.
 * The thread that takes a unit packs the image's 8 channels into its tile
 * (thread t's at tiles + t * tile_stride bytes) unless the tile holds them
 * from its previous unit, then visits the unit's ROIs. Units are dynamically
 * scheduled in (block, image) order, with no barrier between them; there
 * are enough chunks for 4 units a thread. Every visit's outputs are its own. */
static void visit_by_image_tiles(const tensor_view* in, const roi_align_dims* d, const roi_of_image* order,
                                 uint32_t valid, char* tiles, size_t tile_stride, int threads, image_tile_visit visit,
                                 void* context) {
    uint32_t blocks = (d->channels + ROI_LANES - 1) / ROI_LANES, images = 0;
    for (uint32_t i = 0; i < valid; i++)
        images += i == 0 || order[i].batch != order[i - 1].batch;
    uint64_t pairs = (uint64_t)blocks * (images > 0 ? images : 1);
    uint64_t chunks = pairs >= 4 * (uint64_t)threads ? 1 : (4 * (uint64_t)threads + pairs - 1) / pairs;
    /* Image d->batch stands for the ROIs without an image. */
    int64_t units = (int64_t)blocks * (d->batch + 1) * chunks;
#pragma omp parallel num_threads(threads)
    {
        float* tile = (float*)(tiles + (size_t)dml_cpu_thread_index() * tile_stride);
        int64_t packed = -1; /* the (block, image) in tile */
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t unit = 0; unit < units; unit++) {
            uint64_t pair = (uint64_t)unit / chunks, chunk = (uint64_t)unit % chunks;
            uint32_t c0 = (uint32_t)(pair / (d->batch + 1)) * ROI_LANES, image = (uint32_t)(pair % (d->batch + 1));
            uint32_t lanes = d->channels - c0 < ROI_LANES ? d->channels - c0 : ROI_LANES;
            uint32_t begin = image < d->batch ? roi_first_of_image(order, valid, image) : valid;
            uint32_t end = image < d->batch ? roi_first_of_image(order, valid, image + 1) : d->roi_count;
            uint32_t first = begin + (uint32_t)((end - begin) * chunk / chunks);
            uint32_t last = begin + (uint32_t)((end - begin) * (chunk + 1) / chunks);
            if (first == last) continue;
            if (image < d->batch && packed != (int64_t)pair) {
                for (uint32_t y = 0; y < d->height; y++)
                    pack_row(in, d->width, image, c0, lanes, y, tile);
                packed = (int64_t)pair;
            }
            for (uint32_t i = first; i < last; i++)
                visit(context, order[i].roi, c0, lanes, image < d->batch ? tile : NULL);
        }
        _mm_sfence(); /* streamed outputs visible before the dispatch returns */
    }
}

/* ---- Forward (§4) ---- */

typedef struct forward_plan {
    uint64_t order_bytes;   /* the ROIs ordered by image, at the start of the workspace */
    uint64_t table_entries; /* axis-table entries per thread: X then Y */
    uint64_t result_bytes;  /* per thread, NCHW output: a ROI's outputs in 8 channels (0: none) */
    uint64_t staging_bytes; /* per thread, after them: their staging copy for a streamed output (0: none) */
    uint64_t tile_floats;   /* NCHW tile per thread (0: none) */
    int threads;
} forward_plan;

typedef struct forward_problem {
    roi_align_dims dims;
    tensor_view input, output;
    uint64_t result_bytes; /* the staging copy of a streamed output follows a thread's results (0: not streamed) */
} forward_problem;

/* Every output of ROI r in channels [c0, c0 + lanes), reading `in` at `at`,
 * into results[bin][8] (bits for lanes_write_bins) or, when NULL, straight
 * to the output. The reduction, the interpolation and the load are
 * compile-time constants in each instance (forward_outputs_of). */
static inline __attribute__((always_inline)) void forward_outputs(const forward_problem* f, uint32_t r, uint32_t c0,
                                                                  uint32_t lanes, const roi_region* region,
                                                                  axis_sample* xs, axis_sample* ys,
                                                                  const tensor_view* in, uint64_t at, load_mode mode,
                                                                  bool max, bool linear, uint32_t* results) {
    const dml_roi_align_params* p = f->dims.params;
    axis_offsets(xs, region->x.count, in->strides[3]);
    axis_offsets(ys, region->y.count, in->strides[2]);
    __m256 out_of_bounds = _mm256_set1_ps(p->out_of_bounds_value);
    uint64_t per_x = region->x.per_output, per_y = region->y.per_output;
    double count = (double)((uint64_t)region->x.per_output * region->y.per_output);
    for (uint32_t oy = 0; oy < f->dims.out_height; oy++) {
        for (uint32_t ox = 0; ox < f->dims.out_width; ox++) {
            lanes_f64 sum = lanes_f64_zero();
            __m256 best = _mm256_setzero_ps();
            bool first = true;
            /* §4.4 order: X outer, Y inner. */
            for (uint64_t tx = ox * per_x; tx < ox * per_x + per_x; tx++) {
                for (uint64_t ty = oy * per_y; ty < oy * per_y + per_y; ty++) {
                    __m256 value = xs[tx].outside || ys[ty].outside
                                       ? out_of_bounds
                                       : sample_lanes(in, at, &xs[tx], &ys[ty], linear, lanes, mode);
                    if (max) {
                        best = first ? value : _mm256_blendv_ps(best, value, lanes_greater(value, best));
                        first = false;
                    } else {
                        sum = lanes_f64_add(sum, value);
                    }
                }
            }
            /* AVERAGE: dml_roi_average, (float)(sum / S). */
            __m256 result = max ? best : lanes_f64_quotient(sum, count);
            if (results)
                _mm256_storeu_si256((__m256i*)(results + ((uint64_t)oy * f->dims.out_width + ox) * ROI_LANES),
                                    lanes_value_bits(&f->output.lanes, result));
            else
                lanes_store(&f->output.lanes, view_offset(&f->output, r, c0, oy, ox), lanes, result);
        }
    }
    if (results && f->result_bytes > 0 && lanes == ROI_LANES)
        lanes_stream_bins(&f->output.lanes, view_offset(&f->output, r, c0, 0, 0),
                          f->dims.out_height * f->dims.out_width, results, (char*)results + f->result_bytes);
    else if (results)
        lanes_write_bins(&f->output.lanes, view_offset(&f->output, r, c0, 0, 0), f->output.strides, f->dims.out_height,
                         f->dims.out_width, lanes, results);
}

/* forward_outputs with the reduction and interpolation as constants. */
static inline __attribute__((always_inline)) void forward_outputs_of(const forward_problem* f, uint32_t r, uint32_t c0,
                                                                     uint32_t lanes, const roi_region* region,
                                                                     axis_sample* xs, axis_sample* ys,
                                                                     const tensor_view* in, uint64_t at, load_mode mode,
                                                                     uint32_t* results) {
    const dml_roi_align_params* p = f->dims.params;
    if (p->reduction_max && p->interpolation_linear)
        forward_outputs(f, r, c0, lanes, region, xs, ys, in, at, mode, true, true, results);
    else if (p->reduction_max)
        forward_outputs(f, r, c0, lanes, region, xs, ys, in, at, mode, true, false, results);
    else if (p->interpolation_linear)
        forward_outputs(f, r, c0, lanes, region, xs, ys, in, at, mode, false, true, results);
    else
        forward_outputs(f, r, c0, lanes, region, xs, ys, in, at, mode, false, false, results);
}

/* ROI r, channels [c0, c0 + lanes), reading its image's planes packed into
 * image_tile ([H][W][8] FLOAT32) when not NULL, else the input; results:
 * room for its outputs in 8 channels (NULL: stored one by one). */
static void forward_task(const forward_problem* f, uint32_t r, uint32_t c0, uint32_t lanes, axis_sample* tables,
                         uint32_t* results, const float* image_tile, float* tile, uint64_t tile_floats) {
    const dml_roi_align_params* p = f->dims.params;
    roi_region region =
        roi_region_make(&f->dims.source, r, p, f->dims.out_height, f->dims.out_width, f->dims.height, f->dims.width);
    if (region.batch >= f->dims.batch) { /* RA-12: no image to read */
        __m256 out_of_bounds = _mm256_set1_ps(p->out_of_bounds_value);
        for (uint32_t oy = 0; oy < f->dims.out_height; oy++)
            for (uint32_t ox = 0; ox < f->dims.out_width; ox++)
                lanes_store(&f->output.lanes, view_offset(&f->output, r, c0, oy, ox), lanes, out_of_bounds);
        return;
    }
    if (results && f->result_bytes == 0) /* streamed lines are never read (a prefetch would fetch them) */
        lanes_prefetch_bins(&f->output.lanes, view_offset(&f->output, r, c0, 0, 0), f->output.strides,
                            f->dims.out_height, f->dims.out_width, lanes);
    axis_sample *xs = tables, *ys = tables + region.x.count;
    axis_table(&region.x, p, false, xs);
    axis_table(&region.y, p, false, ys);
    if (image_tile) {
        tensor_view tiled = {{0, 1, (uint64_t)f->dims.width * ROI_LANES, ROI_LANES},
                             channel_lanes_make(image_tile, 1, false)};
        forward_outputs_of(f, r, c0, lanes, &region, xs, ys, &tiled, 0, LOAD_F32, results);
        return;
    }
    const tensor_view* in = &f->input;
    uint64_t at = view_offset(in, region.batch, c0, 0, 0);
    bool full = lanes == ROI_LANES;
    if (full && in->lanes.contiguous) {
        if (in->lanes.half)
            forward_outputs_of(f, r, c0, lanes, &region, xs, ys, in, at, LOAD_F16, results);
        else
            forward_outputs_of(f, r, c0, lanes, &region, xs, ys, in, at, LOAD_F32, results);
        return;
    }
    tensor_view tiled;
    uint64_t origin;
    if (full && tile_view(in, at, xs, region.x.count, ys, region.y.count, false, tile, tile_floats, &tiled, &origin)) {
        forward_outputs_of(f, r, c0, lanes, &region, xs, ys, &tiled, origin, LOAD_F32, results);
        return;
    }
    forward_outputs_of(f, r, c0, lanes, &region, xs, ys, in, at, LOAD_GENERAL, results);
}

static HRESULT plan_forward(const DMLOperator* op, const DMLDevice* device, dml_plan* result, bool channels_last) {
    const dml_roi_align_params* p = op->params;
    const dml_tensor* input = &op->inputs[DML_ROI_ALIGN_INPUT].tensor;
    const dml_tensor* output = &op->outputs[DML_ROI_ALIGN_OUTPUT].tensor;
    if (!layout_fits(input, channels_last) || !roi_lanes_fit(output->strides[1])) return S_FALSE;
    uint64_t entries = axis_capacity(output->sizes[3], p) + axis_capacity(output->sizes[2], p);
    /* A tile of the whole image per thread: in NCHW it bounds every
     * region's box; it holds one image's 8 channels for image tiles. */
    uint64_t tile_floats = image_tiles_fit(input) ? (uint64_t)input->sizes[2] * input->sizes[3] * ROI_LANES : 0;
    if (tile_floats * sizeof(float) > ROI_ALIGN_WORKSPACE_LIMIT / 4) tile_floats = 0; /* then gathers */
    /* A channels-last output is stored as computed. */
    uint64_t result_bytes =
        output->strides[1] == 1
            ? 0
            : roi_align64((uint64_t)output->sizes[2] * output->sizes[3] * ROI_LANES * sizeof(uint32_t));
    /* A large packed NCHW output is streamed (lanes_stream_bins), through a staging copy of the results. */
    uint64_t bins = (uint64_t)output->sizes[2] * output->sizes[3];
    uint64_t staging_bytes = lanes_bins_contiguous(output->strides, output->sizes[2], output->sizes[3], ROI_LANES) &&
                                     roi_output_streams(output)
                                 ? roi_align64(lanes_staging_bytes(bins))
                                 : 0;
    uint64_t per_thread = roi_align64(entries * sizeof(axis_sample)) + result_bytes + staging_bytes +
                          roi_align64(tile_floats * sizeof(float));
    uint64_t order_bytes = roi_align64((uint64_t)output->sizes[0] * sizeof(roi_of_image));
    uint64_t workspace = order_bytes + (uint64_t)device->threads * per_thread;
    if (workspace > ROI_ALIGN_WORKSPACE_LIMIT) return S_FALSE;
    forward_plan* plan = dml_plan_state(result, sizeof *plan);
    if (plan == NULL) return E_OUTOFMEMORY;
    plan->order_bytes = order_bytes;
    plan->table_entries = roi_align64(entries * sizeof(axis_sample)) / sizeof(axis_sample);
    plan->result_bytes = result_bytes;
    plan->staging_bytes = staging_bytes;
    plan->tile_floats = roi_align64(tile_floats * sizeof(float)) / sizeof(float);
    plan->threads = (int)device->threads;
    result->temporary_size = workspace;
    return S_OK;
}

static HRESULT plan_forward_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                                 dml_plan* result) {
    (void)flags;
    return plan_forward(op, device, result, false);
}

static HRESULT plan_forward_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                                 dml_plan* result) {
    (void)flags;
    return plan_forward(op, device, result, true);
}

typedef struct forward_visit_context {
    const forward_problem* f;
    const forward_plan* plan;
    char* scratch; /* each thread's axis tables and results */
    size_t scratch_bytes;
} forward_visit_context;

static void forward_visit(void* context, uint32_t roi, uint32_t c0, uint32_t lanes, const float* image_tile) {
    const forward_visit_context* v = context;
    axis_sample* tables = (axis_sample*)(v->scratch + (size_t)dml_cpu_thread_index() * v->scratch_bytes);
    uint32_t* results = v->plan->result_bytes ? (uint32_t*)(tables + v->plan->table_entries) : NULL;
    forward_task(v->f, roi, c0, lanes, tables, results, image_tile, NULL, 0);
}

static HRESULT run_forward(const dml_kernel_args* args) {
    const forward_plan* plan = DML_PLAN_STATE(args, forward_plan);
    const DMLOperator* op = args->op;
    const dml_tensor* input = &op->inputs[DML_ROI_ALIGN_INPUT].tensor;
    const dml_tensor* output = &op->outputs[DML_ROI_ALIGN_OUTPUT].tensor;
    forward_problem f = {
        .dims = roi_align_forward_dims(args),
        .input = tensor_view_make(input, args->inputs[DML_ROI_ALIGN_INPUT]),
        .output = tensor_view_make(output, args->outputs[DML_ROI_ALIGN_OUTPUT]),
        .result_bytes = plan->staging_bytes > 0 ? plan->result_bytes : 0,
    };
    uint32_t rois = f.dims.roi_count, blocks = (f.dims.channels + ROI_LANES - 1) / ROI_LANES;
    /* Workspace: the ROIs by image, each thread's axis tables and results,
     * each thread's tile. */
    roi_of_image* order = (roi_of_image*)args->temporary;
    roi_order_by_image(&f.dims.source, rois, f.dims.batch, order);
    uint32_t valid = roi_first_of_image(order, rois, f.dims.batch);
    char* scratch = (char*)args->temporary + plan->order_bytes;
    size_t scratch_bytes = plan->table_entries * sizeof(axis_sample) + plan->result_bytes + plan->staging_bytes;
    float* tiles = (float*)(scratch + (size_t)plan->threads * scratch_bytes);
    if (plan->tile_floats > 0 && image_tiles_pay(&f.dims, order, valid)) {
        /* Each image's 8 channels packed once per block (and thread) and
         * read there by its ROIs (in cache, without a transpose per ROI). */
        forward_visit_context context = {&f, plan, scratch, scratch_bytes};
        visit_by_image_tiles(&f.input, &f.dims, order, valid, (char*)tiles, plan->tile_floats * sizeof(float),
                             plan->threads, forward_visit, &context);
        return S_OK;
    }
    int64_t tasks = (int64_t)rois * blocks;
    /* Regions differ in sample count: dynamic scheduling balances them
     * (roi_task_chunk); every output is computed by one thread alone. */
    int threads = dml_cpu_threads_for(plan->threads, (uint64_t)tasks, 1);
#pragma omp parallel num_threads(threads)
    {
        int thread = dml_cpu_thread_index();
        axis_sample* own_tables = (axis_sample*)(scratch + (size_t)thread * scratch_bytes);
        uint32_t* results = plan->result_bytes ? (uint32_t*)(own_tables + plan->table_entries) : NULL;
        float* tile = tiles + (size_t)thread * plan->tile_floats;
#pragma omp for schedule(dynamic, roi_task_chunk(tasks, threads)) nowait
        for (int64_t task = 0; task < tasks; task++) {
            roi_task t = roi_task_at(task, rois, blocks, f.input.lanes.contiguous);
            uint32_t lanes = f.dims.channels - t.c0 < ROI_LANES ? f.dims.channels - t.c0 : ROI_LANES;
            forward_task(&f, order[t.roi].roi, t.c0, lanes, own_tables, results, NULL, tile, plan->tile_floats);
        }
        _mm_sfence(); /* streamed outputs visible before the dispatch returns */
    }
    return S_OK;
}

/* ---- Gradient (§7), AVERAGE ---- */

typedef struct grad_plan {
    roi_banding banding;
    int threads;
    uint64_t table_entries;                                                               /* per thread */
    uint64_t sorted_offset, accumulator_offset, sums_offset, order_offset, tables_offset; /* bytes into the workspace */
    uint64_t accumulator_doubles;                                                         /* per thread */
    /* Bytes per thread at tables_offset: axis tables, a gradient block, and
     * (NCHW box gradient) a tile of input_tile_floats. */
    uint64_t thread_scratch, gradient_block_bytes, input_tile_floats;
} grad_plan;

typedef struct grad_problem {
    roi_align_dims dims;
    tensor_view input, input_gradient, output_gradient;
    void* roi_gradient;
    uint64_t roi_gradient_row_stride, roi_gradient_column_stride;
} grad_problem;

/* acc[0..8) += (double)term, lane by lane. */
static inline void accumulate(double* acc, __m256 term) {
    lanes_f64_store(acc, lanes_f64_add(lanes_f64_load(acc), term));
}

/* Where a thread's axis tables and gradient block lie in the workspace. */
static axis_sample* thread_tables(const grad_plan* plan, char* workspace) {
    return (axis_sample*)(workspace + plan->tables_offset + (size_t)dml_cpu_thread_index() * plan->thread_scratch);
}

static float* thread_gradient_block(const grad_plan* plan, axis_sample* tables) {
    return (float*)(tables + plan->table_entries);
}

static float* thread_input_tile(const grad_plan* plan, axis_sample* tables) {
    return (float*)((char*)thread_gradient_block(plan, tables) + plan->gradient_block_bytes);
}

/* The input gradient of ROI r in 8 channels as block[oy][ox][8]: in NCHW one
 * 8x8-transposed copy per ROI instead of a gather per output (perf: those
 * gathers took 60% of the feature gradient). NULL where loads stay direct
 * (channels-last, or a partial block). */
static const float* gradient_block(const grad_problem* g, uint32_t r, uint32_t c0, uint32_t lanes, float* block) {
    const tensor_view* in = &g->input_gradient;
    if (lanes != ROI_LANES || in->lanes.contiguous) return NULL;
    uint64_t at = view_offset(in, r, c0, 0, 0);
    if (in->strides[3] == 1 && in->strides[2] == g->dims.out_width) {
        /* Packed rows: each channel's outputs are one row, transposed 8 at a time. */
        tensor_view row = {{in->strides[0], in->strides[1], 0, 1}, in->lanes};
        transpose_to_tile(&row, at, (pixel_box){0, g->dims.out_height * g->dims.out_width, 0, 1}, block);
    } else {
        transpose_to_tile(in, at, (pixel_box){0, g->dims.out_width, 0, g->dims.out_height}, block);
    }
    return block;
}

static inline __m256 gradient_at(const grad_problem* g, const float* block, uint32_t r, uint32_t c0, uint32_t lanes,
                                 uint32_t oy, uint32_t ox) {
    if (block) return _mm256_loadu_ps(block + ((uint64_t)oy * g->dims.out_width + ox) * ROI_LANES);
    return lanes_load(&g->input_gradient.lanes, view_offset(&g->input_gradient, r, c0, oy, ox), lanes);
}

/* ---- OutputGradientTensor (§7.2) ---- */

/* Image n, channels [c0, c0 + lanes), rows [row_begin, row_end): acc holds
 * 8 FLOAT64 lanes per pixel of those rows. */
static void feature_task(const grad_problem* g, const roi_of_image* sorted, uint32_t sorted_count, uint32_t n,
                         uint32_t c0, uint32_t lanes, uint32_t row_begin, uint32_t row_end, double* acc,
                         axis_sample* tables, float* block) {
    const dml_roi_align_params* p = g->dims.params;
    uint64_t row_doubles = (uint64_t)g->dims.width * ROI_LANES;
    memset(acc, 0, (size_t)(row_end - row_begin) * row_doubles * sizeof *acc);
    bool linear = p->interpolation_linear;
    for (uint32_t i = roi_first_of_image(sorted, sorted_count, n); i < sorted_count && sorted[i].batch == n; i++) {
        uint32_t r = sorted[i].roi;
        roi_region region = roi_region_make(&g->dims.source, r, p, g->dims.out_height, g->dims.out_width,
                                            g->dims.height, g->dims.width);
        axis_sample *xs = tables, *ys = tables + region.x.count;
        axis_table(&region.y, p, false, ys);
        /* Skip ROIs none of whose samples reach these rows (other bands'). */
        bool reaches = false;
        for (uint64_t ty = 0; ty < region.y.count && !reaches; ty++)
            reaches = !ys[ty].outside && ys[ty].second >= row_begin && ys[ty].first < row_end;
        if (!reaches) continue;
        axis_table(&region.x, p, false, xs);
        uint64_t per_x = region.x.per_output, per_y = region.y.per_output;
        __m256 weight = _mm256_set1_ps(dml_roi_average_weight(&region.x, &region.y));
        const float* gradients = gradient_block(g, r, c0, lanes, block);
        for (uint32_t oy = 0; oy < g->dims.out_height; oy++) {
            /* Skip output rows none of whose samples reach these rows. */
            bool touches = false;
            for (uint64_t ty = oy * per_y; ty < oy * per_y + per_y && !touches; ty++)
                touches = !ys[ty].outside && ys[ty].second >= row_begin && ys[ty].first < row_end;
            if (!touches) continue;
            for (uint32_t ox = 0; ox < g->dims.out_width; ox++) {
                __m256 gradient = gradient_at(g, gradients, r, c0, lanes, oy, ox);
                __m256 weighted = _mm256_mul_ps(gradient, weight); /* g * w, w = 1 / S (§7.1) */
                for (uint64_t tx = ox * per_x; tx < ox * per_x + per_x; tx++) {
                    const axis_sample* sx = &xs[tx];
                    if (sx->outside) continue;
                    for (uint64_t ty = oy * per_y; ty < oy * per_y + per_y; ty++) {
                        const axis_sample* sy = &ys[ty];
                        if (sy->outside) continue;
                        bool top_in = sy->first >= row_begin && sy->first < row_end;
                        double* top = acc + (uint64_t)(sy->first - row_begin) * row_doubles;
                        if (!linear) { /* the pixel it read, weight 1 */
                            if (top_in) accumulate(top + (uint64_t)sx->first * ROI_LANES, weighted);
                            continue;
                        }
                        float weights[4];
                        dml_roi_bilinear_weights(sx->fraction, sy->fraction, weights);
                        /* Taps top-left, top-right, bottom-left, bottom-right, as the generic kernel. */
                        if (top_in) {
                            accumulate(top + (uint64_t)sx->first * ROI_LANES,
                                       _mm256_mul_ps(weighted, _mm256_set1_ps(weights[0])));
                            accumulate(top + (uint64_t)sx->second * ROI_LANES,
                                       _mm256_mul_ps(weighted, _mm256_set1_ps(weights[1])));
                        }
                        if (sy->second >= row_begin && sy->second < row_end) {
                            double* bottom = acc + (uint64_t)(sy->second - row_begin) * row_doubles;
                            accumulate(bottom + (uint64_t)sx->first * ROI_LANES,
                                       _mm256_mul_ps(weighted, _mm256_set1_ps(weights[2])));
                            accumulate(bottom + (uint64_t)sx->second * ROI_LANES,
                                       _mm256_mul_ps(weighted, _mm256_set1_ps(weights[3])));
                        }
                    }
                }
            }
        }
    }
    const tensor_view* out = &g->output_gradient;
    for (uint32_t y = row_begin; y < row_end; y++) {
        double* row = acc + (uint64_t)(y - row_begin) * row_doubles;
        if (out->lanes.contiguous) {
            for (uint32_t x = 0; x < g->dims.width; x++)
                lanes_store(&out->lanes, view_offset(out, n, c0, y, x), lanes,
                            lanes_f64_to_float(lanes_f64_load(row + (uint64_t)x * ROI_LANES)));
            continue;
        }
        /* NCHW: the row's results in place of its sums (pixel x's 8 results
         * end where its sums begin), then written transposed. */
        uint32_t* results = (uint32_t*)row;
        for (uint32_t x = 0; x < g->dims.width; x++) {
            __m256 value = lanes_f64_to_float(lanes_f64_load(row + (uint64_t)x * ROI_LANES));
            _mm256_storeu_si256((__m256i*)(results + (uint64_t)x * ROI_LANES), lanes_value_bits(&out->lanes, value));
        }
        lanes_write_bins(&out->lanes, view_offset(out, n, c0, y, 0), out->strides, 1, g->dims.width, lanes, results);
    }
}

static void compute_feature_gradient(const grad_problem* g, const grad_plan* plan, char* workspace) {
    roi_of_image* sorted = (roi_of_image*)(workspace + plan->sorted_offset);
    uint32_t sorted_count = roi_sort_by_image(&g->dims.source, g->dims.roi_count, g->dims.batch, sorted);
    uint32_t blocks = (g->dims.channels + ROI_LANES - 1) / ROI_LANES;
    uint64_t bands = plan->banding.bands;
#pragma omp parallel num_threads(plan->threads)
    {
        int thread = dml_cpu_thread_index();
        double* acc = (double*)(workspace + plan->accumulator_offset) + (size_t)thread * plan->accumulator_doubles;
        axis_sample* tables = thread_tables(plan, workspace);
        float* block = thread_gradient_block(plan, tables);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < plan->banding.tasks; task++) {
            uint64_t band = (uint64_t)task % bands, plane = (uint64_t)task / bands;
            uint32_t c0 = (uint32_t)(plane % blocks) * ROI_LANES;
            uint32_t lanes = g->dims.channels - c0 < ROI_LANES ? g->dims.channels - c0 : ROI_LANES;
            feature_task(g, sorted, sorted_count, (uint32_t)(plane / blocks), c0, lanes,
                         (uint32_t)(band * g->dims.height / bands), (uint32_t)((band + 1) * g->dims.height / bands),
                         acc, tables, block);
        }
    }
}

/* ---- OutputROIGradientTensor (§7.3) ---- */

/* Adds the terms of every weighted, in-bounds sample of ROI r to the sums
 * sums[k] (8 channels), each in §4.4 order, reading `in` at `at`. */
static inline __attribute__((always_inline)) void box_sums(const grad_problem* g, const roi_region* region,
                                                           const axis_sample* xs, const axis_sample* ys,
                                                           const float* gradients, uint32_t r, uint32_t c0,
                                                           uint32_t lanes, const tensor_view* in, uint64_t at,
                                                           load_mode mode, lanes_f64 sums[4]) {
    uint64_t per_x = region->x.per_output, per_y = region->y.per_output;
    __m256 weight = _mm256_set1_ps(dml_roi_average_weight(&region->x, &region->y));
    for (uint32_t oy = 0; oy < g->dims.out_height; oy++)
        for (uint32_t ox = 0; ox < g->dims.out_width; ox++) {
            __m256 weighted = _mm256_mul_ps(gradient_at(g, gradients, r, c0, lanes, oy, ox), weight);
            for (uint64_t tx = ox * per_x; tx < ox * per_x + per_x; tx++) {
                const axis_sample* sx = &xs[tx];
                if (sx->outside) continue;
                uint64_t left = sx->low * in->strides[3], right = sx->high * in->strides[3];
                __m256 xl = _mm256_set1_ps(sx->low_fraction), one_xl = _mm256_set1_ps(1.0f - sx->low_fraction);
                for (uint64_t ty = oy * per_y; ty < oy * per_y + per_y; ty++) {
                    const axis_sample* sy = &ys[ty];
                    if (sy->outside) continue;
                    uint64_t top = at + sy->low * in->strides[2], bottom = at + sy->high * in->strides[2];
                    __m256 top_left = lanes_load_as(&in->lanes, top + left, lanes, mode);
                    __m256 top_right = lanes_load_as(&in->lanes, top + right, lanes, mode);
                    __m256 bottom_left = lanes_load_as(&in->lanes, bottom + left, lanes, mode);
                    __m256 bottom_right = lanes_load_as(&in->lanes, bottom + right, lanes, mode);
                    /* dml_roi_image_gradient, then dml_roi_box_terms, lane by lane. */
                    __m256 yl = _mm256_set1_ps(sy->low_fraction), one_yl = _mm256_set1_ps(1.0f - sy->low_fraction);
                    __m256 grad_x = _mm256_add_ps(_mm256_mul_ps(one_yl, _mm256_sub_ps(top_right, top_left)),
                                                  _mm256_mul_ps(yl, _mm256_sub_ps(bottom_right, bottom_left)));
                    __m256 grad_y = _mm256_add_ps(_mm256_mul_ps(one_xl, _mm256_sub_ps(bottom_left, top_left)),
                                                  _mm256_mul_ps(xl, _mm256_sub_ps(bottom_right, top_right)));
                    __m256 along_x = _mm256_mul_ps(weighted, grad_x), along_y = _mm256_mul_ps(weighted, grad_y);
                    sums[0] = lanes_f64_add(sums[0], _mm256_mul_ps(along_x, _mm256_set1_ps(sx->d_first)));
                    sums[1] = lanes_f64_add(sums[1], _mm256_mul_ps(along_y, _mm256_set1_ps(sy->d_first)));
                    sums[2] = lanes_f64_add(sums[2], _mm256_mul_ps(along_x, _mm256_set1_ps(sx->d_second)));
                    sums[3] = lanes_f64_add(sums[3], _mm256_mul_ps(along_y, _mm256_set1_ps(sy->d_second)));
                }
            }
        }
}

/* The FLOAT64 sums d/dx1, d/dy1, d/dx2, d/dy2 of ROI r for each channel of
 * [c0, c0 + lanes), each from zero in §4.4 order, into sums[c][4]. */
static void box_task(const grad_problem* g, const grad_plan* plan, uint32_t r, uint32_t c0, uint32_t lanes,
                     double (*sums)[4], axis_sample* tables, const float* image_tile) {
    const dml_roi_align_params* p = g->dims.params;
    roi_region region =
        roi_region_make(&g->dims.source, r, p, g->dims.out_height, g->dims.out_width, g->dims.height, g->dims.width);
    lanes_f64 lane_sums[4];
    for (int k = 0; k < 4; k++)
        lane_sums[k] = lanes_f64_zero();
    if (region.batch < g->dims.batch) { /* else no gradient (RA-12) */
        axis_sample *xs = tables, *ys = tables + region.x.count;
        axis_table(&region.x, p, true, xs);
        axis_table(&region.y, p, true, ys);
        const float* gradients = gradient_block(g, r, c0, lanes, thread_gradient_block(plan, tables));
        const tensor_view* in = &g->input;
        uint64_t at = view_offset(in, region.batch, c0, 0, 0);
        tensor_view tiled;
        uint64_t origin;
        if (image_tile) {
            tiled = (tensor_view){{0, 1, (uint64_t)g->dims.width * ROI_LANES, ROI_LANES},
                                  channel_lanes_make(image_tile, 1, false)};
            box_sums(g, &region, xs, ys, gradients, r, c0, lanes, &tiled, 0, LOAD_F32, lane_sums);
        } else if (lanes == ROI_LANES && in->lanes.contiguous && in->lanes.half)
            box_sums(g, &region, xs, ys, gradients, r, c0, lanes, in, at, LOAD_F16, lane_sums);
        else if (lanes == ROI_LANES && in->lanes.contiguous)
            box_sums(g, &region, xs, ys, gradients, r, c0, lanes, in, at, LOAD_F32, lane_sums);
        else if (lanes == ROI_LANES &&
                 tile_view(in, at, xs, region.x.count, ys, region.y.count, true, thread_input_tile(plan, tables),
                           plan->input_tile_floats, &tiled, &origin))
            box_sums(g, &region, xs, ys, gradients, r, c0, lanes, &tiled, origin, LOAD_F32, lane_sums);
        else
            box_sums(g, &region, xs, ys, gradients, r, c0, lanes, in, at, LOAD_GENERAL, lane_sums);
    }
    for (int k = 0; k < 4; k++) {
        double values[ROI_LANES];
        lanes_f64_store(values, lane_sums[k]);
        for (uint32_t i = 0; i < lanes; i++)
            sums[c0 + i][k] = values[i];
    }
}

typedef struct box_visit_context {
    const grad_problem* g;
    const grad_plan* plan;
    char* workspace;
    double (*sums)[4];
} box_visit_context;

static void box_visit(void* context, uint32_t roi, uint32_t c0, uint32_t lanes, const float* image_tile) {
    const box_visit_context* v = context;
    box_task(v->g, v->plan, roi, c0, lanes, v->sums + (uint64_t)roi * v->g->dims.channels,
             thread_tables(v->plan, v->workspace), image_tile);
}

static void compute_box_gradient(const grad_problem* g, const grad_plan* plan, char* workspace) {
    double(*sums)[4] = (double(*)[4])(workspace + plan->sums_offset);
    roi_of_image* order = (roi_of_image*)(workspace + plan->order_offset);
    roi_order_by_image(&g->dims.source, g->dims.roi_count, g->dims.batch, order);
    uint32_t valid = roi_first_of_image(order, g->dims.roi_count, g->dims.batch);
    if (plan->input_tile_floats > 0 && image_tiles_pay(&g->dims, order, valid)) {
        /* Each image's 8 channels packed once per block (and thread) and
         * read there by its ROIs. */
        box_visit_context context = {g, plan, workspace, sums};
        float* tile = thread_input_tile(plan, (axis_sample*)(workspace + plan->tables_offset));
        visit_by_image_tiles(&g->input, &g->dims, order, valid, (char*)tile, plan->thread_scratch, plan->threads,
                             box_visit, &context);
    } else {
        uint32_t blocks = (g->dims.channels + ROI_LANES - 1) / ROI_LANES;
        int64_t tasks = (int64_t)g->dims.roi_count * blocks;
        int threads = dml_cpu_threads_for(plan->threads, (uint64_t)tasks, 1);
#pragma omp parallel num_threads(threads)
        {
            axis_sample* tables = thread_tables(plan, workspace);
#pragma omp for schedule(dynamic, roi_task_chunk(tasks, threads))
            for (int64_t task = 0; task < tasks; task++) {
                roi_task t = roi_task_at(task, g->dims.roi_count, blocks, g->input.lanes.contiguous);
                uint32_t lanes = g->dims.channels - t.c0 < ROI_LANES ? g->dims.channels - t.c0 : ROI_LANES;
                uint32_t r = order[t.roi].roi;
                box_task(g, plan, r, t.c0, lanes, sums + (uint64_t)r * g->dims.channels, tables, NULL);
            }
        }
    }
    /* The fixed shape of roi_align_math.h: channels in order within each
     * group (from zero), the groups in order. */
    uint32_t groups = dml_roi_gradient_groups(g->dims.channels);
    for (uint32_t r = 0; r < g->dims.roi_count; r++) {
        const double(*channel)[4] = (const double(*)[4])(sums + (uint64_t)r * g->dims.channels);
        double total[4] = {0, 0, 0, 0};
        for (uint32_t group = 0; group < groups; group++) {
            double partial[4] = {0, 0, 0, 0};
            uint32_t end = dml_roi_gradient_group_begin(group + 1, groups, g->dims.channels);
            for (uint32_t c = dml_roi_gradient_group_begin(group, groups, g->dims.channels); c < end; c++)
                for (int k = 0; k < 4; k++)
                    partial[k] += channel[c][k];
            for (int k = 0; k < 4; k++)
                total[k] += partial[k];
        }
        for (uint32_t k = 0; k < 4; k++)
            roi_store(g->roi_gradient, r * g->roi_gradient_row_stride + k * g->roi_gradient_column_stride,
                      g->input_gradient.lanes.half, (float)total[k]);
    }
}

static HRESULT plan_grad(const DMLOperator* op, const DMLDevice* device, dml_plan* result, bool channels_last) {
    const dml_roi_align_params* p = op->params;
    const dml_tensor* input = &op->inputs[DML_ROI_ALIGN_GRAD_INPUT].tensor;
    const dml_tensor* input_gradient = &op->inputs[DML_ROI_ALIGN_GRAD_INPUT_GRADIENT].tensor;
    const dml_tensor* output_gradient = &op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_GRADIENT].tensor;
    bool boxes = op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_ROI_GRADIENT].tensor.present;
    if (p->reduction_max) return S_FALSE;
    /* The feature gradient's output takes the layout class; the others need only be gatherable. */
    const dml_tensor* layout = output_gradient->present ? output_gradient : input;
    if (!layout_fits(layout, channels_last) || !roi_lanes_fit(input_gradient->strides[1]) ||
        (boxes && !roi_lanes_fit(input->strides[1])))
        return S_FALSE;
    roi_align_dims dims = roi_align_grad_dims(op, NULL);
    uint32_t channels = dims.channels, roi_count = dims.roi_count, height = dims.height, width = dims.width;
    grad_plan plan = {.threads = (int)device->threads};
    uint64_t entries = axis_capacity(dims.out_width, p) + axis_capacity(dims.out_height, p);
    plan.table_entries = roi_align64(entries * sizeof(axis_sample)) / sizeof(axis_sample);
    uint64_t workspace = 0;
    if (output_gradient->present) {
        uint64_t planes = (uint64_t)dims.batch * ((channels + ROI_LANES - 1) / ROI_LANES);
        plan.banding = roi_banding_make(planes, height, plan.threads);
        plan.sorted_offset = workspace;
        workspace += roi_align64(((uint64_t)roi_count + 1) * sizeof(roi_of_image));
        plan.accumulator_doubles = plan.banding.band_rows * width * ROI_LANES;
        plan.accumulator_offset = workspace;
        workspace += (uint64_t)plan.threads * plan.accumulator_doubles * sizeof(double);
    }
    if (boxes) {
        plan.sums_offset = workspace;
        workspace += roi_align64((uint64_t)roi_count * channels * 4 * sizeof(double));
        plan.order_offset = workspace;
        workspace += roi_align64((uint64_t)roi_count * sizeof(roi_of_image));
    }
    plan.tables_offset = workspace;
    plan.gradient_block_bytes = roi_align64((uint64_t)dims.out_height * dims.out_width * ROI_LANES * sizeof(float));
    if (boxes && image_tiles_fit(input)) plan.input_tile_floats = (uint64_t)height * width * ROI_LANES;
    if (plan.input_tile_floats * sizeof(float) > ROI_ALIGN_WORKSPACE_LIMIT / 4) plan.input_tile_floats = 0;
    plan.thread_scratch = plan.table_entries * sizeof(axis_sample) + plan.gradient_block_bytes +
                          roi_align64(plan.input_tile_floats * sizeof(float));
    workspace += (uint64_t)plan.threads * plan.thread_scratch;
    if (workspace > ROI_ALIGN_WORKSPACE_LIMIT) return S_FALSE;
    grad_plan* state = dml_plan_state(result, sizeof *state);
    if (state == NULL) return E_OUTOFMEMORY;
    *state = plan;
    result->temporary_size = workspace;
    return S_OK;
}

static HRESULT plan_grad_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                              dml_plan* result) {
    (void)flags;
    return plan_grad(op, device, result, false);
}

static HRESULT plan_grad_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                              dml_plan* result) {
    (void)flags;
    return plan_grad(op, device, result, true);
}

static HRESULT run_grad(const dml_kernel_args* args) {
    const grad_plan* plan = DML_PLAN_STATE(args, grad_plan);
    roi_align_grad_tensors t = roi_align_grad_tensors_of(args->op);
    grad_problem g = {
        .dims = roi_align_grad_dims(args->op, args),
        .input_gradient = tensor_view_make(t.input_gradient, args->inputs[DML_ROI_ALIGN_GRAD_INPUT_GRADIENT]),
        .roi_gradient_row_stride = t.roi_gradient_row_stride,
        .roi_gradient_column_stride = t.roi_gradient_column_stride,
    };
    if (t.input->present) g.input = tensor_view_make(t.input, args->inputs[DML_ROI_ALIGN_GRAD_INPUT]);
    if (t.output_gradient->present) {
        g.output_gradient = tensor_view_make(t.output_gradient, args->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_GRADIENT]);
        compute_feature_gradient(&g, plan, args->temporary);
    }
    if (t.roi_gradient->present) {
        g.roi_gradient = args->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_ROI_GRADIENT];
        compute_box_gradient(&g, plan, args->temporary);
    }
    return S_OK;
}

#endif
