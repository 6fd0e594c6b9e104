/* The batch normalization family on CUDA (spec batch_normalization.md §4-§9),
 * with the CPU backend's semantics (src/cpu/batch_normalization.c): ranks
 * 1-8, any reduction axes, parameters broadcast by size, any strides
 * (0-stride inputs too), FLOAT32 and FLOAT16, FusedAdd and every fused
 * activation (src/ops/activation.h, shared with the CPU).
 *
 * Reductions (TRAINING statistics; sdy and sdyxc of both GRADs), without
 * atomics and bit-identical from run to run:
 *
 * 1. Partials. The input is cut into tiles that depend on the problem alone
 *    (never on the GPU): gx consecutive groups (parameter elements j) times a
 *    chunk of gy * kItems consecutive elements m of each group, one block of
 *    gx * gy = 256 threads per tile. Thread (tx, ty) reads elements
 *    m = begin + ty + i * gy of group j = first + tx, sums them in FLOAT64 in
 *    a fixed order, and a fixed shared-memory tree over ty combines the
 *    threads of each group. TRAINING is two-pass inside the chunk (its values
 *    stay in registers): the chunk mean, then the sum of squares around it,
 *    so no E[x^2] - E[x]^2 cancellation (§5). Groups are the fast thread
 *    index when they are the faster-moving dimension in memory (NHWC), the
 *    elements otherwise (NCHW), so that loads are coalesced; a single group
 *    of millions of elements spreads over thousands of blocks.
 * 2. Finalize. Per group, gy threads each combine a fixed, strided subset of
 *    the chunk partials in chunk order (Chan's merge for the statistics) and
 *    a fixed tree combines the threads; then the group's outputs
 *    (OutputMean/OutputVariance, OutputScaleGradient/OutputBiasGradient) and
 *    the FLOAT64 values of the element-wise pass, as on the CPU.
 * 3. The element-wise pass (the normalized output, the input gradient): one
 *    thread per element, in the order of the output's memory.
 *
 * Arithmetic follows the CPU's: FLOAT64 sums (§9 allows FLOAT32 or wider);
 * the forward pre-activation value (x - mean) * factor + bias [+ FusedAdd] in
 * FLOAT64 without fused multiply-adds, rounded to FLOAT32, the activation in
 * FLOAT32, one rounding to the output type (§8.2); every other output rounded
 * once from FLOAT64.
 *
 * Temporaries (chunk partials and per-group values) live in the
 * TemporaryResource the plan sizes (temporaries_size). */
#include <math.h>
#include <stdio.h>

#include "../core/elements.h"
#include "../ops/batch_normalization.h"
#include "cuda.h"

/* After the project's headers: its `half` type would shadow their parameters. */
#include <cooperative_groups.h>
#include <cuda_fp16.h>

namespace {

constexpr unsigned kThreads = 256; /* every block; gx * gy == kThreads */
constexpr int kItems = 16;         /* elements per thread and chunk of a reduction tile */
constexpr int kMaxRank = 8;

/* ---- Index arithmetic ---- */

/* Division by a fixed divisor d (1 <= d < 2^32) with a multiply-high
 * (Granlund and Montgomery's round-up method): exact for every 32-bit
 * dividend. Element offsets and counts fit in 32 bits (spec tensors.md T-1). */
struct fast_divider {
    uint32_t divisor, magic, shift;
};

fast_divider make_divider(uint32_t divisor) {
    fast_divider f;
    f.divisor = divisor;
    f.shift = 0;
    while (f.shift < 32 && ((uint64_t)1 << f.shift) < divisor)
        f.shift++;
    /* < 2^63: (2^shift - divisor) < divisor <= 2^32 */
    uint64_t magic = (((uint64_t)1 << 32) * (((uint64_t)1 << f.shift) - divisor)) / divisor + 1;
    f.magic = (uint32_t)magic; /* <= 2^32 - 1 for every divisor */
    return f;
}

__device__ __forceinline__ uint32_t divide(const fast_divider& f, uint32_t n) {
    uint32_t high = __umulhi(n, f.magic);
    return (uint32_t)(((uint64_t)high + n) >> f.shift);
}

/* Dimensions (outermost first) with one stride per operand, host side. */
template <int Ops> struct dim_list {
    uint32_t rank;
    uint32_t sizes[kMaxRank];
    uint64_t strides[Ops][kMaxRank];
};

/* Drops size-1 dimensions and merges a dimension into the next inner one
 * wherever every operand steps through both as through one; row-major order
 * is unchanged. At least one dimension remains. */
template <int Ops> void simplify(dim_list<Ops>& list) {
    uint32_t rank = 0;
    for (uint32_t i = 0; i < list.rank; i++) {
        if (list.sizes[i] == 1) continue;
        if (rank > 0) {
            bool mergeable = true;
            for (int k = 0; k < Ops; k++)
                mergeable = mergeable && list.strides[k][rank - 1] == list.strides[k][i] * list.sizes[i];
            if (mergeable) { /* the product stays below an element count < 2^32 */
                list.sizes[rank - 1] *= list.sizes[i];
                for (int k = 0; k < Ops; k++)
                    list.strides[k][rank - 1] = list.strides[k][i];
                continue;
            }
        }
        list.sizes[rank] = list.sizes[i];
        for (int k = 0; k < Ops; k++)
            list.strides[k][rank] = list.strides[k][i];
        rank++;
    }
    if (rank == 0) {
        list.sizes[0] = 1;
        for (int k = 0; k < Ops; k++)
            list.strides[k][0] = 0;
        rank = 1;
    }
    list.rank = rank;
}

/* The device form of a dim_list: dividers instead of sizes, 32-bit strides
 * (a dimension of size >= 2 has a stride below 2^32, T-1). */
template <int Ops> struct dim_view {
    uint32_t rank;
    fast_divider sizes[kMaxRank];
    uint32_t strides[Ops][kMaxRank];
};

template <int Ops> dim_view<Ops> make_view(const dim_list<Ops>& list) {
    dim_view<Ops> view = {};
    view.rank = list.rank;
    for (uint32_t i = 0; i < kMaxRank; i++) {
        bool used = i < list.rank && list.sizes[i] > 1;
        view.sizes[i] = make_divider(i < list.rank ? list.sizes[i] : 1);
        for (int k = 0; k < Ops; k++)
            view.strides[k][i] = used ? (uint32_t)list.strides[k][i] : 0;
    }
    return view;
}

/* Element offsets, for each operand, of the row-major index `index`. The
 * loop is unrolled so that the view's arrays are indexed by constants. */
template <int Ops>
__device__ __forceinline__ void view_offsets(const dim_view<Ops>& view, uint32_t index, uint32_t offsets[Ops]) {
#pragma unroll
    for (int k = 0; k < Ops; k++)
        offsets[k] = 0;
#pragma unroll
    for (int i = kMaxRank - 1; i >= 0; i--) {
        if (i < (int)view.rank) {
            uint32_t coordinate = index;
            if (i > 0) {
                uint32_t quotient = divide(view.sizes[i], index);
                coordinate = index - quotient * view.sizes[i].divisor;
                index = quotient;
            }
#pragma unroll
            for (int k = 0; k < Ops; k++)
                offsets[k] += coordinate * view.strides[k][i];
        }
    }
}

/* ---- Element access ---- */

/* Element types: T the stored element, converted to and from FLOAT32 (or
 * rounded once from FLOAT64). */
struct f32_type {
    typedef float T;
    static __device__ __forceinline__ float to_float(float value) { return value; }
    static __device__ __forceinline__ float from_float(float value) { return value; }
    static __device__ __forceinline__ float from_double(double value) { return (float)value; }
};

/* The GPU's conversion instructions: the IEEE conversions of src/core/half.h
 * (exact widening, one round-to-nearest-even narrowing, also from FLOAT64)
 * at a fraction of their cost. */
struct f16_type {
    typedef uint16_t T; /* binary16 bits */
    static __device__ __forceinline__ float to_float(uint16_t value) { return __half2float(__ushort_as_half(value)); }
    static __device__ __forceinline__ uint16_t from_float(float value) {
        return __half_as_ushort(__float2half_rn(value));
    }
    static __device__ __forceinline__ uint16_t from_double(double value) {
        return __half_as_ushort(__double2half(value));
    }
};

template <class V> __device__ __forceinline__ float load(const void* base, uint32_t offset) {
    return V::to_float(((const typename V::T*)base)[offset]);
}

template <class V> __device__ __forceinline__ void store_float(void* base, uint32_t offset, float value) {
    ((typename V::T*)base)[offset] = V::from_float(value);
}

template <class V> __device__ __forceinline__ void store_double(void* base, uint32_t offset, double value) {
    ((typename V::T*)base)[offset] = V::from_double(value);
}

__host__ __device__ __forceinline__ uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* ---- Tiles and block trees ---- */

/* How a block's 256 threads split into gx groups times gy threads per group
 * (both powers of two, given as log2). */
struct block_shape {
    uint32_t gx_log2, gy_log2;
};

__device__ __forceinline__ uint32_t thread_x(const block_shape& s) { return threadIdx.x & ((1u << s.gx_log2) - 1); }
__device__ __forceinline__ uint32_t thread_y(const block_shape& s) { return threadIdx.x >> s.gx_log2; }

/* The sum over ty of every thread's value, in a fixed tree (pairs
 * (ty, ty + half), halving): every thread of column tx receives it. */
__device__ double column_sum(double value, double* shared, const block_shape& s) {
    uint32_t ty = thread_y(s), gx = 1u << s.gx_log2;
    shared[threadIdx.x] = value;
    __syncthreads();
    for (uint32_t half = (1u << s.gy_log2) >> 1; half > 0; half >>= 1) {
        if (ty < half) shared[threadIdx.x] += shared[threadIdx.x + half * gx];
        __syncthreads();
    }
    double result = shared[thread_x(s)];
    __syncthreads(); /* before shared is written again */
    return result;
}

/* Chunk statistics (count, mean, centered sum of squares) and Chan's merge. */
struct stats {
    double count, mean, m2;
};

__device__ __forceinline__ stats merge(const stats& a, const stats& b) {
    if (b.count == 0) return a;
    if (a.count == 0) return b;
    double count = a.count + b.count;
    double delta = b.mean - a.mean;
    stats merged;
    merged.count = count;
    merged.mean = a.mean + delta * (b.count / count);
    merged.m2 = a.m2 + b.m2 + delta * delta * (a.count * b.count / count);
    return merged;
}

/* ---- The reduction plan ---- */

/* The input's dimensions split into kept ones (they index the group j,
 * row-major over the parameter sizes P) and reduced ones (they index m inside
 * the group); operands 0 input, 1 input gradient. */
struct reduction {
    dim_view<2> kept, reduced;
    uint32_t group_count, group_size; /* J, M */
    block_shape tile;                 /* partial kernels */
    uint32_t chunk, chunks;           /* elements per chunk (gy * kItems), chunks per group */
    uint32_t group_blocks;            /* ceil(J / gx) */
    block_shape combine;              /* finalize kernels */
    uint32_t finalize_blocks;
};

uint32_t log2_ceil(uint64_t value) {
    uint32_t log2 = 0;
    while (((uint64_t)1 << log2) < value)
        log2++;
    return log2;
}

/* Splits the dimensions and chooses the tile shape from the problem alone. */
reduction plan_reduction(const dml_batch_norm_params* params, const dml_tensor* input,
                         const dml_tensor* input_gradient) {
    dim_list<2> kept = {}, reduced = {};
    for (uint32_t i = 0; i < input->rank; i++) {
        dim_list<2>& list = (params->reduced_axes >> i) & 1u ? reduced : kept;
        list.sizes[list.rank] = input->sizes[i];
        list.strides[0][list.rank] = input->strides[i];
        list.strides[1][list.rank] = input_gradient ? input_gradient->strides[i] : 0;
        list.rank++;
    }
    simplify(kept);
    simplify(reduced);
    reduction r = {};
    r.kept = make_view(kept);
    r.reduced = make_view(reduced);
    r.group_count = (uint32_t)params->group_count;
    r.group_size = (uint32_t)params->group_size;
    const uint32_t threads_log2 = 8; /* kThreads */
    /* Groups are the fast thread index when neighbouring groups are closer in
     * memory than neighbouring elements of a group (NHWC-like layouts). */
    uint32_t inner_groups = kept.sizes[kept.rank - 1];
    bool interleaved =
        inner_groups > 1 && r.group_size > 1 && kept.strides[0][kept.rank - 1] < reduced.strides[0][reduced.rank - 1];
    uint32_t gy_log2 = interleaved ? threads_log2 - min_u32(5, log2_ceil(inner_groups)) : threads_log2;
    gy_log2 = min_u32(gy_log2, log2_ceil(r.group_size)); /* no more threads per group than elements */
    r.tile = {threads_log2 - gy_log2, gy_log2};
    r.chunk = (1u << gy_log2) * kItems;
    r.chunks = (uint32_t)(((uint64_t)r.group_size + r.chunk - 1) / r.chunk);
    r.group_blocks = (uint32_t)(((uint64_t)r.group_count + (1u << r.tile.gx_log2) - 1) >> r.tile.gx_log2);
    uint32_t combine_log2 = min_u32(threads_log2, log2_ceil(r.chunks));
    r.combine = {threads_log2 - combine_log2, combine_log2};
    r.finalize_blocks = (uint32_t)(((uint64_t)r.group_count + (1u << r.combine.gx_log2) - 1) >> r.combine.gx_log2);
    return r;
}

/* Parameter tensors (all of sizes P) indexed by the group j. */
template <int Ops> dim_view<Ops> parameter_view(const dml_tensor* const tensors[Ops]) {
    dim_list<Ops> list = {};
    list.rank = tensors[0]->rank;
    for (uint32_t i = 0; i < list.rank; i++) {
        list.sizes[i] = tensors[0]->sizes[i];
        for (int k = 0; k < Ops; k++)
            list.strides[k][i] = tensors[k]->strides[i];
    }
    simplify(list);
    return make_view(list);
}

/* ---- 1. Partials ---- */

struct partials_problem {
    reduction r;
    const void* input;
    const void* input_gradient; /* GRADs */
    const void* mean;           /* GRADs: MeanTensor, through mean_view */
    dim_view<1> mean_view;
    double2* partials; /* [j * chunks + chunk]: (mean, m2) or (sdy, sdyxc) */
};

/* The tile of this block: group j of this thread, its chunk of `length`
 * elements from m = begin. */
struct tile_position {
    uint32_t j, chunk, begin, length;
    bool has_group;
};

__device__ __forceinline__ tile_position tile_of_block(const reduction& r) {
    tile_position t;
    t.chunk = blockIdx.x % r.chunks;
    uint64_t group_block = blockIdx.x / r.chunks;
    uint64_t j = (group_block << r.tile.gx_log2) + thread_x(r.tile);
    t.has_group = j < r.group_count;
    t.j = (uint32_t)j;
    t.begin = t.chunk * r.chunk;
    t.length = min_u32(r.chunk, r.group_size - t.begin);
    return t;
}

/* TRAINING: per tile, the chunk mean and the sum of squares around it. */
template <class V> __global__ void __launch_bounds__(kThreads) bn_statistics_partials(const partials_problem p) {
    __shared__ double shared[kThreads];
    const reduction& r = p.r;
    tile_position t = tile_of_block(r);
    uint32_t ty = thread_y(r.tile), gy = 1u << r.tile.gy_log2;
    uint32_t base[2] = {0, 0};
    if (t.has_group) view_offsets(r.kept, t.j, base);
    float values[kItems]; /* this thread's elements ty, ty + gy, ... of the chunk */
    double sum = 0;
#pragma unroll
    for (int i = 0; i < kItems; i++) {
        uint32_t local = ty + (uint32_t)i * gy;
        values[i] = 0.0f;
        if (t.has_group && local < t.length) {
            uint32_t offsets[2];
            view_offsets(r.reduced, t.begin + local, offsets);
            values[i] = load<V>(p.input, base[0] + offsets[0]);
        }
    }
#pragma unroll
    for (int i = 0; i < kItems; i++)
        sum += (double)values[i]; /* absent elements add 0 */
    double mean = column_sum(sum, shared, r.tile) / (double)t.length;
    double m2 = 0;
#pragma unroll
    for (int i = 0; i < kItems; i++) {
        uint32_t local = ty + (uint32_t)i * gy;
        if (t.has_group && local < t.length) {
            double deviation = (double)values[i] - mean;
            m2 += deviation * deviation;
        }
    }
    m2 = column_sum(m2, shared, r.tile);
    if (ty == 0 && t.has_group) p.partials[(uint64_t)t.j * r.chunks + t.chunk] = make_double2(mean, m2);
}

/* Both GRADs: per tile, sum dy and sum dy * (x - Mean). */
template <class V> __global__ void __launch_bounds__(kThreads) bn_gradient_partials(const partials_problem p) {
    __shared__ double shared[kThreads];
    const reduction& r = p.r;
    tile_position t = tile_of_block(r);
    uint32_t ty = thread_y(r.tile), gy = 1u << r.tile.gy_log2;
    uint32_t base[2] = {0, 0};
    double mean = 0;
    if (t.has_group) {
        view_offsets(r.kept, t.j, base);
        uint32_t mean_offset[1];
        view_offsets(p.mean_view, t.j, mean_offset);
        mean = (double)load<V>(p.mean, mean_offset[0]);
    }
    double sdy = 0, sdyxc = 0;
#pragma unroll
    for (int i = 0; i < kItems; i++) {
        uint32_t local = ty + (uint32_t)i * gy;
        if (t.has_group && local < t.length) {
            uint32_t offsets[2];
            view_offsets(r.reduced, t.begin + local, offsets);
            double dy = (double)load<V>(p.input_gradient, base[1] + offsets[1]);
            double x = (double)load<V>(p.input, base[0] + offsets[0]);
            sdy += dy;
            sdyxc += dy * (x - mean);
        }
    }
    sdy = column_sum(sdy, shared, r.tile);
    sdyxc = column_sum(sdyxc, shared, r.tile);
    if (ty == 0 && t.has_group) p.partials[(uint64_t)t.j * r.chunks + t.chunk] = make_double2(sdy, sdyxc);
}

/* ---- Per-group values and per-element math (every path) ---- */

/* TRAINING: group j's values of the element-wise pass {mean, factor =
 * Scale / sqrt(variance + Epsilon), Bias}; with `outputs`, also writes
 * OutputMean and OutputVariance. parameters: Scale, Bias, OutputMean,
 * OutputVariance; in: Scale, Bias; out: OutputMean, OutputVariance. */
template <class V>
__device__ void forward_group_values(const dim_view<5>& parameters, const void* const* in, void* const* out,
                                     double epsilon, uint32_t j, double mean, double variance, bool outputs,
                                     double values[3]) {
    uint32_t offsets[5];
    view_offsets(parameters, j, offsets);
    if (outputs) {
        store_double<V>(out[0], offsets[2], mean);
        store_double<V>(out[1], offsets[3], variance);
    }
    values[0] = mean;
    values[1] = (double)load<V>(in[0], offsets[0]) / sqrt(variance + epsilon);
    values[2] = (double)load<V>(in[1], offsets[1]);
}

/* The GRADs: group j's {Mean, k, u, w} with dx = k * (dy - u - (x - Mean) *
 * w), u = w = 0 for GRAD (§6, §7); with `outputs`, also writes
 * OutputScaleGradient and OutputBiasGradient. parameters: Mean, Variance,
 * Scale, OutputScaleGradient, OutputBiasGradient; in: Mean, Variance, Scale. */
template <class V>
__device__ void backward_group_values(const dim_view<5>& parameters, const void* const* in, void* const* out,
                                      double epsilon, bool training, uint32_t j, double sdy, double sdyxc,
                                      double group_size, bool outputs, double values[4]) {
    uint32_t offsets[5];
    view_offsets(parameters, j, offsets);
    double variance_plus_epsilon = (double)load<V>(in[1], offsets[1]) + epsilon;
    double inv = 1.0 / sqrt(variance_plus_epsilon);
    if (outputs) {
        store_double<V>(out[0], offsets[3], sdyxc * inv); /* OutputScaleGradient */
        store_double<V>(out[1], offsets[4], sdy);         /* OutputBiasGradient */
    }
    values[0] = (double)load<V>(in[0], offsets[0]);
    values[1] = (double)load<V>(in[2], offsets[2]) * inv;
    values[2] = training ? sdy / group_size : 0.0;
    values[3] = training ? sdyxc / group_size / variance_plus_epsilon : 0.0;
}

/* BATCH_NORMALIZATION: channel c's {Mean, Scale / sqrt(Variance + Epsilon),
 * Bias}, each parameter through its own sizes (decision BN-5), as
 * bn_forward_elementwise computes them. in: Mean, Variance, Scale, Bias. */
template <class V>
__device__ void inference_group_values(const dim_view<5>& parameters, const void* const* in, double epsilon, uint32_t c,
                                       double values[3]) {
    uint32_t offsets[5];
    view_offsets(parameters, c, offsets);
    double variance = (double)load<V>(in[1], offsets[1]);
    values[0] = (double)load<V>(in[0], offsets[0]);
    values[1] = (double)load<V>(in[2], offsets[2]) / sqrt(__dadd_rn(variance, epsilon));
    values[2] = (double)load<V>(in[3], offsets[3]);
}

/* The forward output before rounding to the output type: (x - mean) * factor
 * + bias [+ FusedAdd, after Bias and before the activation (§5)] in FLOAT64
 * as on the CPU, with round-to-nearest intrinsics so that no multiply-add is
 * fused, rounded to FLOAT32, then the activation in FLOAT32 (§8.2). */
/* The fused activations a kernel is compiled for: the fast paths take the
 * common ones without dml_activation_apply's switch on every element. */
enum activation_kind { kNoActivation /* NONE, IDENTITY */, kRelu, kAnyActivation };

activation_kind kind_of(const dml_activation& activation) {
    if (activation.type == DML_ACTIVATION_NONE || activation.type == DML_ACTIVATION_IDENTITY) return kNoActivation;
    return activation.type == DML_ACTIVATION_RELU ? kRelu : kAnyActivation;
}

template <int Act> __device__ __forceinline__ float activate(const dml_activation& activation, float value) {
    if constexpr (Act == kNoActivation)
        return value;
    else if constexpr (Act == kRelu)
        return dml_activation_relu(value);
    else
        return dml_activation_apply(&activation, value);
}

template <int Act = kAnyActivation>
__device__ __forceinline__ float forward_element(double x, double mean, double factor, double bias, bool has_add,
                                                 double add, const dml_activation& activation) {
    double value = __dadd_rn(__dmul_rn(__dsub_rn(x, mean), factor), bias);
    if (has_add) value = __dadd_rn(value, add);
    return activate<Act>(activation, (float)value);
}

/* The input gradient from the group's {Mean, k, u, w}; GRAD reads no x. */
__device__ __forceinline__ double backward_element(double x, double dy, const double values[4], bool training) {
    if (!training) return __dmul_rn(values[1], dy);
    double centered = __dmul_rn(__dsub_rn(x, values[0]), values[3]);
    return __dmul_rn(values[1], __dsub_rn(__dsub_rn(dy, values[2]), centered));
}

/* ---- 2. Finalize ---- */

/* Per-group FLOAT64 values of the element-wise pass, four arrays of J:
 * forward {mean, factor = Scale / sqrt(variance + Epsilon), Bias}; gradient
 * {Mean, k, u, w} with dx = k * (dy - u - (x - Mean) * w). */
struct finalize_problem {
    reduction r;
    const double2* partials;
    double* groups;
    dim_view<5> parameters; /* TRAINING: Scale, Bias, OutputMean, OutputVariance; GRADs: Mean, Variance, Scale,
                               OutputScaleGradient, OutputBiasGradient */
    const void* in[3];
    void* out[2];
    double epsilon;
    bool training; /* TRAINING_GRAD (u and w), otherwise GRAD (u = w = 0) */
};

/* This thread's group and its first chunk; threads of a group take chunks
 * ty, ty + gy, ... */
struct combine_position {
    uint32_t j, ty, gy;
    bool has_group;
};

__device__ __forceinline__ combine_position combine_of_thread(const reduction& r) {
    combine_position c;
    c.ty = thread_y(r.combine);
    c.gy = 1u << r.combine.gy_log2;
    uint64_t j = ((uint64_t)blockIdx.x << r.combine.gx_log2) + thread_x(r.combine);
    c.has_group = j < r.group_count;
    c.j = (uint32_t)j;
    return c;
}

template <class V> __global__ void __launch_bounds__(kThreads) bn_statistics_finalize(const finalize_problem f) {
    __shared__ double count[kThreads], mean[kThreads], m2[kThreads];
    const reduction& r = f.r;
    combine_position c = combine_of_thread(r);
    stats s = {0, 0, 0};
    if (c.has_group)
        for (uint32_t chunk = c.ty; chunk < r.chunks; chunk += c.gy) {
            double2 partial = f.partials[(uint64_t)c.j * r.chunks + chunk];
            uint32_t begin = chunk * r.chunk;
            stats next = {(double)min_u32(r.chunk, r.group_size - begin), partial.x, partial.y};
            s = merge(s, next);
        }
    /* Chan's merge of the threads of each group in a fixed tree. */
    count[threadIdx.x] = s.count, mean[threadIdx.x] = s.mean, m2[threadIdx.x] = s.m2;
    __syncthreads();
    uint32_t gx = 1u << r.combine.gx_log2;
    for (uint32_t half = c.gy >> 1; half > 0; half >>= 1) {
        if (c.ty < half) {
            uint32_t other = threadIdx.x + half * gx;
            stats a = {count[threadIdx.x], mean[threadIdx.x], m2[threadIdx.x]};
            stats b = {count[other], mean[other], m2[other]};
            stats merged = merge(a, b);
            count[threadIdx.x] = merged.count, mean[threadIdx.x] = merged.mean, m2[threadIdx.x] = merged.m2;
        }
        __syncthreads();
    }
    if (c.ty != 0 || !c.has_group) return;
    double variance = m2[threadIdx.x] / (double)r.group_size; /* biased: divisor M (decision BN-1) */
    double values[3];
    forward_group_values<V>(f.parameters, f.in, f.out, f.epsilon, c.j, mean[threadIdx.x], variance, true, values);
    for (uint64_t k = 0; k < 3; k++)
        f.groups[k * r.group_count + c.j] = values[k];
}

template <class V> __global__ void __launch_bounds__(kThreads) bn_gradient_finalize(const finalize_problem f) {
    __shared__ double sums[2][kThreads];
    const reduction& r = f.r;
    combine_position c = combine_of_thread(r);
    double sdy = 0, sdyxc = 0;
    if (c.has_group)
        for (uint32_t chunk = c.ty; chunk < r.chunks; chunk += c.gy) {
            double2 partial = f.partials[(uint64_t)c.j * r.chunks + chunk];
            sdy += partial.x;
            sdyxc += partial.y;
        }
    sums[0][threadIdx.x] = sdy, sums[1][threadIdx.x] = sdyxc;
    __syncthreads();
    uint32_t gx = 1u << r.combine.gx_log2;
    for (uint32_t half = c.gy >> 1; half > 0; half >>= 1) {
        if (c.ty < half) {
            uint32_t other = threadIdx.x + half * gx;
            sums[0][threadIdx.x] += sums[0][other];
            sums[1][threadIdx.x] += sums[1][other];
        }
        __syncthreads();
    }
    if (c.ty != 0 || !c.has_group) return;
    sdy = sums[0][threadIdx.x];
    sdyxc = sums[1][threadIdx.x];
    double values[4];
    backward_group_values<V>(f.parameters, f.in, f.out, f.epsilon, f.training, c.j, sdy, sdyxc, (double)r.group_size,
                             true, values);
    for (uint64_t k = 0; k < 4; k++)
        f.groups[k * r.group_count + c.j] = values[k];
}

/* ---- 3. The element-wise pass ---- */

enum ew_mode { EW_FORWARD, EW_INFERENCE, EW_GRADIENT, EW_TRAINING_GRADIENT };
/* Operands: 0 the output, 1 the input, then FORWARD: 2 FusedAdd, 3 the group;
 * INFERENCE: 2 Mean, 3 Variance, 4 Scale, 5 Bias; GRADIENTs: 2 InputGradient,
 * 3 the group. */
enum { EW_OPERANDS = 6 };

struct ew_problem {
    dim_view<EW_OPERANDS> dims;
    uint32_t count;
    void* output;
    const void* in[5]; /* operands 1..5; FusedAdd NULL when absent */
    const double* groups;
    uint32_t group_count;
    double epsilon;
    dml_activation activation;
};

template <class V>
__global__ void __launch_bounds__(kThreads) bn_forward_elementwise(const ew_problem p, bool inference) {
    for (uint64_t i = (uint64_t)blockIdx.x * kThreads + threadIdx.x; i < p.count; i += (uint64_t)gridDim.x * kThreads) {
        uint32_t offsets[EW_OPERANDS];
        view_offsets(p.dims, (uint32_t)i, offsets);
        double x = (double)load<V>(p.in[0], offsets[1]);
        double mean, factor, bias;
        if (inference) { /* each parameter through its own sizes (decision BN-5) */
            mean = (double)load<V>(p.in[1], offsets[2]);
            double variance = (double)load<V>(p.in[2], offsets[3]);
            factor = (double)load<V>(p.in[3], offsets[4]) / sqrt(__dadd_rn(variance, p.epsilon));
            bias = (double)load<V>(p.in[4], offsets[5]);
        } else {
            uint32_t g = offsets[3];
            mean = p.groups[g];
            factor = p.groups[p.group_count + g];
            bias = p.groups[2 * (uint64_t)p.group_count + g];
        }
        bool has_add = !inference && p.in[1] != NULL;
        double add = has_add ? (double)load<V>(p.in[1], offsets[2]) : 0.0;
        store_float<V>(p.output, offsets[0], forward_element(x, mean, factor, bias, has_add, add, p.activation));
    }
}

template <class V>
__global__ void __launch_bounds__(kThreads) bn_backward_elementwise(const ew_problem p, bool training) {
    uint64_t groups = p.group_count;
    for (uint64_t i = (uint64_t)blockIdx.x * kThreads + threadIdx.x; i < p.count; i += (uint64_t)gridDim.x * kThreads) {
        uint32_t offsets[EW_OPERANDS];
        view_offsets(p.dims, (uint32_t)i, offsets);
        uint32_t g = offsets[3];
        double values[4];
        for (uint64_t k = 0; k < 4; k++)
            values[k] = training || k == 1 ? p.groups[k * groups + g] : 0.0;
        double x = training ? (double)load<V>(p.in[0], offsets[1]) : 0.0;
        double dy = (double)load<V>(p.in[1], offsets[2]);
        store_double<V>(p.output, offsets[0], backward_element(x, dy, values, training));
    }
}

/* ---- Host side ---- */

void swap_dims(dim_list<EW_OPERANDS>& list, uint32_t a, uint32_t b) {
    uint32_t size = list.sizes[a];
    list.sizes[a] = list.sizes[b];
    list.sizes[b] = size;
    for (int k = 0; k < EW_OPERANDS; k++) {
        uint64_t stride = list.strides[k][a];
        list.strides[k][a] = list.strides[k][b];
        list.strides[k][b] = stride;
    }
}

/* The element-wise dimensions ordered by the output's strides (outermost =
 * largest, stable), then simplified: neighbouring threads write neighbouring
 * output elements. Operands without a tensor keep stride 0. */
dim_view<EW_OPERANDS> elementwise_view(dim_list<EW_OPERANDS>& list) {
    for (uint32_t i = 1; i < list.rank; i++)
        for (uint32_t j = i; j > 0 && list.strides[0][j - 1] < list.strides[0][j]; j--)
            swap_dims(list, j - 1, j);
    simplify(list);
    return make_view(list);
}

/* Strides of the group index j (row-major over P), 0 where P is 1. */
void packed_group_strides(const dml_tensor* parameter, uint64_t* strides) {
    uint64_t stride = 1;
    for (uint32_t i = parameter->rank; i-- > 0;) {
        strides[i] = parameter->sizes[i] == 1 ? 0 : stride;
        stride *= parameter->sizes[i];
    }
}

/* A tensor's own strides, 0 where its size is 1 (broadcast by size). */
void broadcast_strides(const dml_tensor* tensor, uint64_t* strides) {
    for (uint32_t i = 0; i < tensor->rank; i++)
        strides[i] = tensor->sizes[i] == 1 ? 0 : tensor->strides[i];
}

dim_list<EW_OPERANDS> elementwise_list(const dml_tensor* output) {
    dim_list<EW_OPERANDS> list = {};
    list.rank = output->rank;
    for (uint32_t i = 0; i < output->rank; i++) {
        list.sizes[i] = output->sizes[i];
        list.strides[0][i] = output->strides[i];
    }
    return list;
}

bool is_half(const dml_tensor* tensor) { return tensor->type == DML_TENSOR_DATA_TYPE_FLOAT16; }

/* The temporary resource of one dispatch: chunk partials, then
 * `group_values` FLOAT64 values per group. */
struct temporaries {
    double2* partials = nullptr;
    double* groups = nullptr;
};

uint64_t partials_bytes(const reduction& r) {
    uint64_t bytes = (uint64_t)r.group_count * r.chunks * sizeof(double2); /* < 2^64: both < 2^32 */
    return (bytes + 255) / 256 * 256;
}

uint64_t temporaries_size(const reduction& r, uint32_t group_values) {
    return partials_bytes(r) + (uint64_t)r.group_count * group_values * sizeof(double);
}

temporaries temporaries_at(void* block, const reduction& r) {
    temporaries t;
    t.partials = (double2*)block;
    t.groups = (double*)((char*)block + partials_bytes(r));
    return t;
}

/* The reduction's shape is the plan of TRAINING and the gradients. */
HRESULT plan_statistics(const DMLOperator* op, const dml_tensor* input, const dml_tensor* input_gradient,
                        uint32_t group_values, dml_plan* plan) {
    reduction* r = (reduction*)dml_plan_state(plan, sizeof(reduction));
    if (r == nullptr) return E_OUTOFMEMORY;
    *r = plan_reduction((const dml_batch_norm_params*)op->params, input, input_gradient);
    plan->temporary_size = temporaries_size(*r, group_values);
    return S_OK;
}

template <class V>
HRESULT launch_training(const dml_kernel_args* args, const reduction& r, partials_problem& partials,
                        finalize_problem& finalize, const ew_problem& ew) {
    cudaStream_t stream = dml_cuda_stream(args);
    bn_statistics_partials<V><<<r.group_blocks * r.chunks, kThreads, 0, stream>>>(partials);
    DML_TRY(dml_cuda_check_launch("bn_statistics_partials"));
    bn_statistics_finalize<V><<<r.finalize_blocks, kThreads, 0, stream>>>(finalize);
    DML_TRY(dml_cuda_check_launch("bn_statistics_finalize"));
    bn_forward_elementwise<V><<<dml_cuda_blocks(args, ew.count, kThreads), kThreads, 0, stream>>>(ew, false);
    return dml_cuda_check_launch("bn_forward_elementwise");
}

template <class V>
HRESULT launch_gradient(const dml_kernel_args* args, const reduction& r, partials_problem& partials,
                        finalize_problem& finalize, const ew_problem& ew) {
    cudaStream_t stream = dml_cuda_stream(args);
    bn_gradient_partials<V><<<r.group_blocks * r.chunks, kThreads, 0, stream>>>(partials);
    DML_TRY(dml_cuda_check_launch("bn_gradient_partials"));
    bn_gradient_finalize<V><<<r.finalize_blocks, kThreads, 0, stream>>>(finalize);
    DML_TRY(dml_cuda_check_launch("bn_gradient_finalize"));
    bn_backward_elementwise<V>
        <<<dml_cuda_blocks(args, ew.count, kThreads), kThreads, 0, stream>>>(ew, finalize.training);
    return dml_cuda_check_launch("bn_backward_elementwise");
}

/* BATCH_NORMALIZATION_GRAD (Mean and Variance constants, spec §6) and
 * BATCH_NORMALIZATION_TRAINING_GRAD (through the batch statistics, §7). */
HRESULT batch_normalization_gradient(const dml_kernel_args* args, bool training) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const DMLOperator* op = args->op;
    const dml_batch_norm_params* params = (const dml_batch_norm_params*)op->params;
    const dml_tensor* input = &op->inputs[DML_BN_GRAD_INPUT].tensor;
    const dml_tensor* input_gradient = &op->inputs[DML_BN_GRAD_INPUT_GRADIENT].tensor;
    const dml_tensor* mean = &op->inputs[DML_BN_GRAD_MEAN].tensor;
    const dml_tensor* output_gradient = &op->outputs[DML_BN_GRAD_OUTPUT_GRADIENT].tensor;

    const reduction& r = *DML_PLAN_STATE(args, reduction);
    partials_problem partials = {};
    partials.r = r;
    partials.input = args->inputs[DML_BN_GRAD_INPUT];
    partials.input_gradient = args->inputs[DML_BN_GRAD_INPUT_GRADIENT];
    partials.mean = args->inputs[DML_BN_GRAD_MEAN];
    const dml_tensor* mean_only[1] = {mean};
    partials.mean_view = parameter_view<1>(mean_only);

    finalize_problem finalize = {};
    finalize.r = r;
    const dml_tensor* parameters[5] = {
        mean, &op->inputs[DML_BN_GRAD_VARIANCE].tensor, &op->inputs[DML_BN_GRAD_SCALE].tensor,
        &op->outputs[DML_BN_GRAD_OUTPUT_SCALE_GRADIENT].tensor, &op->outputs[DML_BN_GRAD_OUTPUT_BIAS_GRADIENT].tensor};
    finalize.parameters = parameter_view<5>(parameters);
    finalize.in[0] = args->inputs[DML_BN_GRAD_MEAN];
    finalize.in[1] = args->inputs[DML_BN_GRAD_VARIANCE];
    finalize.in[2] = args->inputs[DML_BN_GRAD_SCALE];
    finalize.out[0] = args->outputs[DML_BN_GRAD_OUTPUT_SCALE_GRADIENT];
    finalize.out[1] = args->outputs[DML_BN_GRAD_OUTPUT_BIAS_GRADIENT];
    finalize.epsilon = params->epsilon;
    finalize.training = training;

    ew_problem ew = {};
    dim_list<EW_OPERANDS> list = elementwise_list(output_gradient);
    for (uint32_t i = 0; i < list.rank; i++) {
        list.strides[1][i] = input->strides[i];
        list.strides[2][i] = input_gradient->strides[i];
    }
    packed_group_strides(mean, list.strides[3]);
    ew.dims = elementwise_view(list);
    ew.count = (uint32_t)output_gradient->element_count;
    ew.output = args->outputs[DML_BN_GRAD_OUTPUT_GRADIENT];
    ew.in[0] = args->inputs[DML_BN_GRAD_INPUT];
    ew.in[1] = args->inputs[DML_BN_GRAD_INPUT_GRADIENT];
    ew.group_count = r.group_count;

    temporaries t = temporaries_at(args->temporary, r);
    partials.partials = t.partials;
    finalize.partials = t.partials;
    finalize.groups = t.groups;
    ew.groups = t.groups;
    return is_half(input) ? launch_gradient<f16_type>(args, r, partials, finalize, ew)
                          : launch_gradient<f32_type>(args, r, partials, finalize, ew);
}

HRESULT plan_gradient(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)device, (void)flags;
    return plan_statistics(op, &op->inputs[DML_BN_GRAD_INPUT].tensor, &op->inputs[DML_BN_GRAD_INPUT_GRADIENT].tensor, 4,
                           plan);
}

HRESULT run_inference(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const DMLOperator* op = args->op;
    const dml_batch_norm_params* params = (const dml_batch_norm_params*)op->params;
    const dml_tensor* input = &op->inputs[DML_BN_INPUT].tensor;
    const dml_tensor* output = &op->outputs[DML_BN_OUTPUT].tensor;
    ew_problem ew = {};
    dim_list<EW_OPERANDS> list = elementwise_list(output);
    for (uint32_t i = 0; i < list.rank; i++)
        list.strides[1][i] = input->strides[i];
    /* Spec §4, decision BN-5: Mean, Variance, Scale, Bias each through its own sizes. */
    for (uint32_t k = 0; k < 4; k++)
        broadcast_strides(&op->inputs[DML_BN_MEAN + k].tensor, list.strides[2 + k]);
    ew.dims = elementwise_view(list);
    ew.count = (uint32_t)output->element_count;
    ew.output = args->outputs[DML_BN_OUTPUT];
    for (uint32_t k = 0; k < 5; k++)
        ew.in[k] = args->inputs[DML_BN_INPUT + k];
    ew.epsilon = params->epsilon;
    ew.activation = params->activation;
    cudaStream_t stream = dml_cuda_stream(args);
    unsigned blocks = dml_cuda_blocks(args, ew.count, kThreads);
    if (is_half(input))
        bn_forward_elementwise<f16_type><<<blocks, kThreads, 0, stream>>>(ew, true);
    else
        bn_forward_elementwise<f32_type><<<blocks, kThreads, 0, stream>>>(ew, true);
    return dml_cuda_check_launch("bn_forward_elementwise");
}

HRESULT run_training(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const DMLOperator* op = args->op;
    const dml_batch_norm_params* params = (const dml_batch_norm_params*)op->params;
    const dml_tensor* input = &op->inputs[DML_BN_TRAINING_INPUT].tensor;
    const dml_tensor* scale = &op->inputs[DML_BN_TRAINING_SCALE].tensor;
    const dml_tensor* fused_add = &op->inputs[DML_BN_TRAINING_FUSED_ADD].tensor;
    const dml_tensor* output = &op->outputs[DML_BN_TRAINING_OUTPUT].tensor;

    const reduction& r = *DML_PLAN_STATE(args, reduction);
    partials_problem partials = {};
    partials.r = r;
    partials.input = args->inputs[DML_BN_TRAINING_INPUT];

    finalize_problem finalize = {};
    finalize.r = r;
    const dml_tensor* parameters[5] = {scale, &op->inputs[DML_BN_TRAINING_BIAS].tensor,
                                       &op->outputs[DML_BN_TRAINING_OUTPUT_MEAN].tensor,
                                       &op->outputs[DML_BN_TRAINING_OUTPUT_VARIANCE].tensor, scale};
    finalize.parameters = parameter_view<5>(parameters);
    finalize.in[0] = args->inputs[DML_BN_TRAINING_SCALE];
    finalize.in[1] = args->inputs[DML_BN_TRAINING_BIAS];
    finalize.out[0] = args->outputs[DML_BN_TRAINING_OUTPUT_MEAN];
    finalize.out[1] = args->outputs[DML_BN_TRAINING_OUTPUT_VARIANCE];
    finalize.epsilon = params->epsilon;

    ew_problem ew = {};
    dim_list<EW_OPERANDS> list = elementwise_list(output);
    for (uint32_t i = 0; i < list.rank; i++) {
        list.strides[1][i] = input->strides[i];
        list.strides[2][i] = fused_add->present ? fused_add->strides[i] : 0;
    }
    packed_group_strides(scale, list.strides[3]); /* group j is row-major over P */
    ew.dims = elementwise_view(list);
    ew.count = (uint32_t)output->element_count;
    ew.output = args->outputs[DML_BN_TRAINING_OUTPUT];
    ew.in[0] = args->inputs[DML_BN_TRAINING_INPUT];
    ew.in[1] = fused_add->present ? args->inputs[DML_BN_TRAINING_FUSED_ADD] : NULL;
    ew.group_count = r.group_count;
    ew.activation = params->activation;

    temporaries t = temporaries_at(args->temporary, r);
    partials.partials = t.partials;
    finalize.partials = t.partials;
    finalize.groups = t.groups;
    ew.groups = t.groups;
    return is_half(input) ? launch_training<f16_type>(args, r, partials, finalize, ew)
                          : launch_training<f32_type>(args, r, partials, finalize, ew);
}

HRESULT plan_training(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)device, (void)flags;
    return plan_statistics(op, &op->inputs[DML_BN_TRAINING_INPUT].tensor, nullptr, 3, plan);
}

HRESULT run_gradient_constant_statistics(const dml_kernel_args* args) {
    return batch_normalization_gradient(args, false);
}

HRESULT run_gradient_batch_statistics(const dml_kernel_args* args) { return batch_normalization_gradient(args, true); }

/* ---- Packed NCHW fast paths ("/cuda/nchw") ----
 *
 * TRAINING, GRAD and TRAINING_GRAD of a rank-4 input stored packed in NCHW
 * order and reduced over N, H and W (one group per channel), in one
 * cooperative launch (bn_nchw_fused) of as many blocks as the GPU holds at
 * once, so that a grid-wide barrier can separate its two phases (one launch:
 * half the host time of two):
 *
 * 1. Partials, in one read: tasks of kThreads * chunk_items consecutive elements
 *    m = n * HW + hw of one channel (the chunks depend on the problem alone,
 *    never on the grid), taken by the blocks in turn, loaded 16 bytes at a
 *    time where HW and the bindings allow it (else one element). TRAINING
 *    keeps the chunk's values in registers for the two-pass (mean, M2)
 *    partial; the GRADs sum dy and dy * (x - Mean). FLOAT64 sums in a fixed
 *    order, then a fixed block tree.
 * 2. Apply, after the barrier: tasks of a few whole planes of one channel, in
 *    the reverse order of the partials' chunks, so that the planes read last
 *    (still in L2) are read again first; the output is stored and the input
 *    read with the evict-first hint, so that they do not push the rest of the
 *    partials' data out of L2. The task's first warp merges the channel's
 *    chunk partials in a fixed order (lanes take chunks in turn, then a fixed
 *    shuffle tree), so that every task of a channel derives the same values
 *    with no atomic; the task that starts at image 0 writes the per-channel
 *    outputs. Then the element-wise pass with the generic kernels'
 *    arithmetic, vectorized, the first loads issued before the merge so that
 *    its latency hides.
 *
 * BATCH_NORMALIZATION (inference, parameters per channel or scalar) is the
 * apply pass alone (bn_nchw_inference, a block per task), its values from
 * the parameters. TemporaryResource: the chunk partials, 16 bytes per chunk
 * of each channel. */

constexpr unsigned kVectorBytes = 16;      /* per vector load and store */
constexpr int kBatch = 4;                  /* vectors in flight per thread in the apply pass */
constexpr uint32_t kApplyElements = 32768; /* per apply task: few merges of the partials per block */

/* What the per-group values and the element math need, from the description. */
struct group_rules {
    dim_view<5> parameters; /* as finalize_problem.parameters; inference: Mean, Variance, Scale, Bias */
    double epsilon;
    dml_activation activation;
    bool training;  /* TRAINING_GRAD (else GRAD) */
    bool inference; /* BATCH_NORMALIZATION: values from the parameters, no reduction */
    bool forward;   /* BATCH_NORMALIZATION or TRAINING (else the GRADs) */
};

struct nchw_plan {
    uint32_t channels, images, plane;        /* C, N, HW */
    fast_divider plane_divider;              /* HW */
    bool vectorizable;                       /* HW a multiple of the elements in kVectorBytes */
    uint32_t chunk, chunks;                  /* elements per partial chunk, chunks per channel */
    uint32_t images_per_block, image_blocks; /* apply tasks: image_blocks per channel */
    uint32_t fused_blocks[2];                /* bn_nchw_fused's grid: [0] element loads, [1] vector loads */
    group_rules rules;
};

struct bn_bindings {
    const void* input;
    const void* second; /* TRAINING: FusedAdd (NULL when absent); GRADs: InputGradient */
    const void* in[4]; /* TRAINING: Scale, Bias; GRADs: Mean, Variance, Scale; inference: Mean, Variance, Scale, Bias */
    void* out[2];      /* TRAINING: OutputMean, OutputVariance; GRADs: scale and bias gradients */
    void* output;      /* Output / OutputGradient */
    double2* partials; /* per channel and chunk (NCHW) or row range (NHWC) */
    double* groups;    /* NHWC: per channel, the values of the element-wise pass */
};

template <class T, int W> struct alignas(W * sizeof(T)) vector_of { T v[W]; };

/* W consecutive elements from `offset` (a multiple of W when W > 1), as stored. */
template <class V, int W>
__device__ __forceinline__ vector_of<typename V::T, W> load_stored(const void* base, uint32_t offset) {
    return ((const vector_of<typename V::T, W>*)base)[offset / W];
}

/* The same, converted. */
template <class V, int W> __device__ __forceinline__ void load_vector(const void* base, uint32_t offset, float* out) {
    vector_of<typename V::T, W> v = load_stored<V, W>(base, offset);
#pragma unroll
    for (int i = 0; i < W; i++)
        out[i] = V::to_float(v.v[i]);
}

template <class V, int W>
__device__ __forceinline__ void store_vector(void* base, uint32_t offset, const typename V::T* values) {
    vector_of<typename V::T, W> v;
#pragma unroll
    for (int i = 0; i < W; i++)
        v.v[i] = values[i];
    ((vector_of<typename V::T, W>*)base)[offset / W] = v;
}

/* W consecutive elements from `offset` as stored (converted when used:
 * half the registers for FLOAT16), and W elements stored, with the
 * evict-first cache hint (data used once: its lines leave L2 before others). */
template <class V, int W>
__device__ __forceinline__ vector_of<typename V::T, W> load_stored_once(const void* base, uint32_t offset) {
    typedef vector_of<typename V::T, W> vector;
    vector v;
    if constexpr (sizeof(vector) == 16) {
        uint4 bits = __ldcs((const uint4*)base + offset / W);
        memcpy(&v, &bits, sizeof v);
    } else if constexpr (W == 1) {
        v.v[0] = __ldcs((const typename V::T*)base + offset);
    } else {
        v = ((const vector*)base)[offset / W];
    }
    return v;
}

template <class V, int W>
__device__ __forceinline__ void store_vector_once(void* base, uint32_t offset, const typename V::T* values) {
    typedef vector_of<typename V::T, W> vector;
    vector v;
#pragma unroll
    for (int i = 0; i < W; i++)
        v.v[i] = values[i];
    if constexpr (sizeof(vector) == 16) {
        uint4 bits;
        memcpy(&bits, &v, sizeof bits);
        __stcs((uint4*)base + offset / W, bits);
    } else if constexpr (W == 1) {
        __stcs((typename V::T*)base + offset, values[0]);
    } else {
        ((vector*)base)[offset / W] = v;
    }
}

/* The offset of element m = n * HW + hw of channel c. */
__device__ __forceinline__ uint32_t nchw_offset(const nchw_plan& n, uint32_t c, uint32_t m) {
    uint32_t image = divide(n.plane_divider, m);
    return (image * n.channels + c) * n.plane + (m - image * n.plane);
}

/* The sum of every thread's value in a fixed tree (warp shuffles, then the
 * warps in order); every thread receives it. */
__device__ double block_sum(double value, double* warp_sums) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        value += __shfl_down_sync(0xffffffffu, value, offset);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = value;
    __syncthreads();
    double total = 0;
#pragma unroll
    for (unsigned w = 0; w < kThreads / 32; w++)
        total += warp_sums[w];
    __syncthreads(); /* before warp_sums is written again */
    return total;
}

/* A partials task: channel c, elements [begin, begin + length). */
struct nchw_chunk {
    uint32_t c, chunk, begin, length;
};

__device__ __forceinline__ nchw_chunk chunk_of_task(const nchw_plan& n, uint32_t task) {
    nchw_chunk k;
    k.c = task / n.chunks;
    k.chunk = task % n.chunks;
    k.begin = k.chunk * n.chunk;
    k.length = min_u32(n.chunk, n.images * n.plane - k.begin);
    return k;
}

/* Elements per thread and partials chunk: four 16-byte vectors of the type
 * (loaded before any is used: 64 bytes in flight per thread, FLOAT16 too),
 * whatever the loads' width, so that the chunks (and the sums) do not depend
 * on the bindings' alignment. */
template <class V> __host__ __device__ constexpr int chunk_items() { return 4 * kVectorBytes / sizeof(typename V::T); }

/* TRAINING's partial of one task; warp_sums: kThreads / 32 in shared memory. */
template <class V, int W>
__device__ void statistics_partial(const nchw_plan& n, const bn_bindings& p, uint32_t task, double* warp_sums) {
    constexpr int kLoads = chunk_items<V>() / W;
    nchw_chunk k = chunk_of_task(n, task);
    /* Elements (threadIdx.x + i * kThreads) * W + e of the chunk as stored
     * (converted when used: as many registers for FLOAT16 as for FLOAT32); absent ones 0. */
    vector_of<typename V::T, W> stored[kLoads];
    double sum = 0;
#pragma unroll
    for (int i = 0; i < kLoads; i++) {
        uint32_t local = (threadIdx.x + (uint32_t)i * kThreads) * W; /* the chunk and HW are multiples of W */
        stored[i] = local < k.length ? load_stored<V, W>(p.input, nchw_offset(n, k.c, k.begin + local))
                                     : vector_of<typename V::T, W>{};
    }
#pragma unroll
    for (int i = 0; i < kLoads; i++)
#pragma unroll
        for (int e = 0; e < W; e++)
            sum += (double)V::to_float(stored[i].v[e]); /* absent elements add 0 */
    double mean = block_sum(sum, warp_sums) / (double)k.length;
    double m2 = 0;
#pragma unroll
    for (int i = 0; i < kLoads; i++) {
        if ((threadIdx.x + (uint32_t)i * kThreads) * W < k.length)
#pragma unroll
            for (int e = 0; e < W; e++) {
                double deviation = (double)V::to_float(stored[i].v[e]) - mean;
                m2 += deviation * deviation;
            }
    }
    m2 = block_sum(m2, warp_sums);
    if (threadIdx.x == 0) p.partials[(uint64_t)k.c * n.chunks + k.chunk] = make_double2(mean, m2);
}

/* The GRADs' partial of one task, likewise. */
template <class V, int W>
__device__ void gradient_partial(const nchw_plan& n, const bn_bindings& p, uint32_t task, double* warp_sums) {
    nchw_chunk k = chunk_of_task(n, task);
    uint32_t parameter_offsets[5];
    view_offsets(n.rules.parameters, k.c, parameter_offsets);
    double mean = (double)load<V>(p.in[0], parameter_offsets[0]);
    double sdy = 0, sdyxc = 0;
#pragma unroll
    for (int i = 0; i < chunk_items<V>() / W; i++) {
        uint32_t local = (threadIdx.x + (uint32_t)i * kThreads) * W;
        if (local < k.length) {
            uint32_t offset = nchw_offset(n, k.c, k.begin + local);
            float x[W], dy[W];
            load_vector<V, W>(p.input, offset, x);
            load_vector<V, W>(p.second, offset, dy);
#pragma unroll
            for (int e = 0; e < W; e++) {
                sdy += (double)dy[e];
                sdyxc += (double)dy[e] * ((double)x[e] - mean);
            }
        }
    }
    sdy = block_sum(sdy, warp_sums);
    sdyxc = block_sum(sdyxc, warp_sums);
    if (threadIdx.x == 0) p.partials[(uint64_t)k.c * n.chunks + k.chunk] = make_double2(sdy, sdyxc);
}

/* An apply task: channel c and its planes. */
struct nchw_planes {
    uint32_t c, first_image, vectors; /* vectors: W-element vectors of the task's planes */
};

template <int W>
__device__ __forceinline__ nchw_planes planes_of(const nchw_plan& n, uint32_t c, uint32_t image_block) {
    nchw_planes b;
    b.c = c;
    b.first_image = image_block * n.images_per_block;
    b.vectors = min_u32(n.images_per_block, n.images - b.first_image) * (n.plane / W);
    return b;
}

/* The sum of the warp's values in a fixed tree; every lane receives lane 0's. */
__device__ __forceinline__ double warp_sum(double value) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        value += __shfl_down_sync(0xffffffffu, value, offset);
    return __shfl_sync(0xffffffffu, value, 0);
}

/* Chunk k's element count. */
__device__ __forceinline__ double chunk_count(const nchw_plan& n, uint32_t k) {
    return (double)min_u32(n.chunk, n.images * n.plane - k * n.chunk);
}

/* Called by one whole warp: the channel's statistics from its chunk partials
 * (mean_k, M2_k), lane l taking chunks l, l + 32, ... in order: the mean
 * from the sums count_k mean_k, then M2 = sum of M2_k + count_k (mean_k -
 * mean)^2 around it (the parallel form of Chan's merge, with one division
 * where a tree of merges takes one per step). */
__device__ stats merge_channel_statistics(const nchw_plan& n, const double2* partials, uint32_t c) {
    const double2* chunks = partials + (uint64_t)c * n.chunks;
    double sum = 0, m2 = 0;
    for (uint32_t k = threadIdx.x % 32; k < n.chunks; k += 32)
        sum += chunk_count(n, k) * chunks[k].x;
    double count = (double)(n.images * n.plane);
    double mean = warp_sum(sum) / count;
    for (uint32_t k = threadIdx.x % 32; k < n.chunks; k += 32) {
        double deviation = chunks[k].x - mean;
        m2 += chunks[k].y + chunk_count(n, k) * deviation * deviation;
    }
    stats s = {count, mean, warp_sum(m2)};
    return s;
}

/* Called by one whole warp: the channel's sums (sdy, sdyxc), likewise. */
__device__ double2 merge_channel_sums(const nchw_plan& n, const double2* partials, uint32_t c) {
    const double2* chunks = partials + (uint64_t)c * n.chunks;
    double sdy = 0, sdyxc = 0;
    for (uint32_t k = threadIdx.x % 32; k < n.chunks; k += 32)
        sdy += chunks[k].x, sdyxc += chunks[k].y;
    return make_double2(warp_sum(sdy), warp_sum(sdyxc));
}

/* The apply loop over the block's vectors, kBatch per thread at a time:
 * `load(i, offset)` fetches vector i of a batch, `finish(i, offset)` computes
 * and stores it. The first batch is loaded before `prologue()` (the merge of
 * the channel's partials) and the barrier after it, so that the merge's
 * latency hides behind the loads. Every thread passes the barrier. */
template <int W, class Prologue, class Load, class Finish>
__device__ __forceinline__ void apply_in_batches(const nchw_plan& n, const nchw_planes& b, Prologue prologue, Load load,
                                                 Finish finish) {
    uint32_t plane_vectors = n.plane / W;
    uint32_t first = threadIdx.x;
    bool prologue_done = false;
    do {
        uint32_t offsets[kBatch];
#pragma unroll
        for (int i = 0; i < kBatch; i++) {
            uint32_t q = first + (uint32_t)i * kThreads;
            uint32_t image = q / plane_vectors;
            offsets[i] = ((b.first_image + image) * n.channels + b.c) * n.plane + (q - image * plane_vectors) * W;
            if (q < b.vectors) load(i, offsets[i]);
        }
        if (!prologue_done) {
            prologue();
            __syncthreads();
            prologue_done = true;
        }
#pragma unroll
        for (int i = 0; i < kBatch; i++)
            if (first + (uint32_t)i * kThreads < b.vectors) finish(i, offsets[i]);
        first += kThreads * kBatch;
    } while (first < b.vectors);
}

/* The forward apply of one task; channel: 3 doubles in shared memory (mean,
 * factor, bias). */
template <class V, int W, int Act>
__device__ void forward_apply(const nchw_plan& n, const bn_bindings& p, const nchw_planes& b, double* channel) {
    vector_of<typename V::T, W> x[kBatch], add[kBatch];
    auto prologue = [&]() {
        if (threadIdx.x >= 32) return;
        if (n.rules.inference) {
            if (threadIdx.x == 0) inference_group_values<V>(n.rules.parameters, p.in, n.rules.epsilon, b.c, channel);
            return;
        }
        stats s = merge_channel_statistics(n, p.partials, b.c);
        if (threadIdx.x != 0) return;
        /* Biased variance: divisor M (decision BN-1). */
        forward_group_values<V>(n.rules.parameters, p.in, p.out, n.rules.epsilon, b.c, s.mean, s.m2 / s.count,
                                b.first_image == 0, channel);
    };
    auto load_batch = [&](int i, uint32_t offset) {
        x[i] = load_stored_once<V, W>(p.input, offset);
        if (p.second != NULL) add[i] = load_stored_once<V, W>(p.second, offset);
    };
    auto finish = [&](int i, uint32_t offset) {
        typename V::T y[W];
#pragma unroll
        for (int e = 0; e < W; e++)
            y[e] = V::from_float(forward_element<Act>(
                (double)V::to_float(x[i].v[e]), channel[0], channel[1], channel[2], p.second != NULL,
                p.second != NULL ? (double)V::to_float(add[i].v[e]) : 0.0, n.rules.activation));
        store_vector_once<V, W>(p.output, offset, y);
    };
    apply_in_batches<W>(n, b, prologue, load_batch, finish);
}

/* The backward apply of one task; channel: 4 doubles in shared memory
 * (Mean, k, u, w as in bn_gradient_finalize). */
template <class V, int W>
__device__ void backward_apply(const nchw_plan& n, const bn_bindings& p, const nchw_planes& b, double* channel) {
    vector_of<typename V::T, W> x[kBatch], dy[kBatch];
    auto prologue = [&]() {
        if (threadIdx.x >= 32) return;
        double2 sums = merge_channel_sums(n, p.partials, b.c);
        if (threadIdx.x != 0) return;
        backward_group_values<V>(n.rules.parameters, p.in, p.out, n.rules.epsilon, n.rules.training, b.c, sums.x,
                                 sums.y, (double)(n.images * n.plane), b.first_image == 0, channel);
    };
    auto load_batch = [&](int i, uint32_t offset) {
        if (n.rules.training) x[i] = load_stored_once<V, W>(p.input, offset);
        dy[i] = load_stored_once<V, W>(p.second, offset);
    };
    auto finish = [&](int i, uint32_t offset) {
        typename V::T dx[W];
#pragma unroll
        for (int e = 0; e < W; e++)
            dx[e] = V::from_double(backward_element(n.rules.training ? (double)V::to_float(x[i].v[e]) : 0.0,
                                                    (double)V::to_float(dy[i].v[e]), channel, n.rules.training));
        store_vector_once<V, W>(p.output, offset, dx);
    };
    apply_in_batches<W>(n, b, prologue, load_batch, finish);
}

template <class V, int W, int Act>
__global__ void __launch_bounds__(kThreads) bn_nchw_inference(const nchw_plan n, const bn_bindings p) {
    __shared__ double channel[3];
    /* Neighbouring blocks: neighbouring planes in memory. */
    forward_apply<V, W, Act>(n, p, planes_of<W>(n, blockIdx.x % n.channels, blockIdx.x / n.channels), channel);
}

/* TRAINING (Forward, with activation kind Act) or the GRADs; launched
 * cooperatively, every block resident. */
template <class V, int W, bool Forward, int Act>
__global__ void __launch_bounds__(kThreads, 4) bn_nchw_fused(const nchw_plan n, const bn_bindings p) {
    __shared__ double shared[kThreads / 32]; /* the partials' warp sums, then the apply's channel values */
    for (uint32_t task = blockIdx.x; task < n.channels * n.chunks; task += gridDim.x) {
        if (Forward)
            statistics_partial<V, W>(n, p, task, shared);
        else
            gradient_partial<V, W>(n, p, task, shared);
    }
    cooperative_groups::this_grid().sync(); /* every partial written and visible */
    uint32_t tasks = n.channels * n.image_blocks;
    for (uint32_t task = blockIdx.x; task < tasks; task += gridDim.x) {
        uint32_t reversed = tasks - 1 - task; /* channel-major, as the partials' chunks */
        nchw_planes b = planes_of<W>(n, reversed / n.image_blocks, reversed % n.image_blocks);
        if (Forward)
            forward_apply<V, W, Act>(n, p, b, shared);
        else
            backward_apply<V, W>(n, p, b, shared);
        __syncthreads(); /* the next task's merge rewrites shared */
    }
}

/* ---- Packed NHWC fast paths ("/cuda/nhwc") ----
 *
 * The same operators on rank-4 tensors stored channels-last (rows of C
 * channels, R = N * H * W rows), reduced over N, H and W, in three phases of
 * one cooperative launch (bn_nhwc_fused, a grid of the blocks the GPU holds
 * at once, each looping over the phase's blocks; grid-wide barriers between
 * the phases):
 *
 * 1. Partials, in one read: blocks of gx vector columns (kNhwcVector
 *    neighbouring channels each, or one channel) times gy rows; the phase's
 *    blocks are the column blocks times row ranges whose size depends on R
 *    alone (never on the GPU: the sums' order is fixed). Thread
 *    (tx, ty) runs over rows ty, ty + gy, ... of its range with FLOAT64 sums
 *    in order, then a fixed tree over ty (column_sum). TRAINING sums d = x - K
 *    and d^2 with K the channel's first element: shifted sums, so no
 *    E[x^2] - E[x]^2 cancellation while K lies within the data (§5).
 * 2. Finalize: a warp per channel sums the row ranges' partials in a fixed
 *    order (warp_sum) and writes the per-channel outputs and the values of
 *    the element-wise pass.
 * 3. Apply: the partials' blocks, in reverse order; each thread keeps its
 *    channels' values in registers and runs over its rows kBatch at a time.
 *
 * BATCH_NORMALIZATION (inference) is the apply alone (bn_nhwc_inference). */

constexpr uint32_t kRowRanges = 1024; /* row ranges of a large problem: every SM busy */
/* Channels per vector load (16 bytes of FLOAT32, 8 of FLOAT16): a thread
 * keeps 3 or 4 FLOAT64 values per channel, so more channels per thread
 * would cost occupancy. */
constexpr int kNhwcVector = 4;
constexpr uint32_t kWarps = kThreads / 32;

/* A block shape for one vector width: gx columns (log2) and the column blocks. */
struct nhwc_shape {
    block_shape block;
    uint32_t column_blocks;
};

struct nhwc_plan {
    uint32_t rows, channels;     /* R, C */
    uint32_t range_rows, ranges; /* rows per range, ranges */
    bool vectorizable;           /* C a multiple of the elements in kVectorBytes */
    nhwc_shape shapes[2];        /* [0] element loads, [1] vector loads */
    uint32_t fused_blocks[2];    /* bn_nhwc_fused's grid, likewise */
    uint64_t partials_bytes;     /* the groups' values follow the partials */
    group_rules rules;
};

/* This thread's first channel and row range. */
struct nhwc_position {
    uint32_t c0, ty, gy, begin, end;
    bool active;
};

/* This thread's channels and rows in `block` of the partials' (and the apply's) grid. */
template <int W> __device__ __forceinline__ nhwc_position nhwc_position_of_thread(const nhwc_plan& n, uint32_t block) {
    const nhwc_shape& s = n.shapes[W > 1];
    nhwc_position q;
    uint32_t column_block = block % s.column_blocks, range = block / s.column_blocks;
    q.c0 = ((column_block << s.block.gx_log2) + thread_x(s.block)) * W;
    q.active = q.c0 < n.channels;
    q.ty = thread_y(s.block);
    q.gy = 1u << s.block.gy_log2;
    q.begin = range * n.range_rows;
    q.end = min_u32(q.begin + n.range_rows, n.rows);
    return q;
}

/* Phase 1 for one block of the grid; shared: kThreads doubles. Every thread of the block calls it. */
template <class V, int W>
__device__ void nhwc_partials(const nhwc_plan& n, const bn_bindings& p, bool statistics, uint32_t block,
                              double* shared) {
    const block_shape& shape = n.shapes[W > 1].block;
    nhwc_position q = nhwc_position_of_thread<W>(n, block);
    double center[W], first[W] = {}, second[W] = {};
    if (q.active) {
        if (statistics) { /* K: the channel's first element */
            float k[W];
            load_vector<V, W>(p.input, q.c0, k);
            for (int e = 0; e < W; e++)
                center[e] = (double)k[e];
        } else { /* Mean */
            for (int e = 0; e < W; e++) {
                uint32_t offsets[5];
                view_offsets(n.rules.parameters, q.c0 + e, offsets);
                center[e] = (double)load<V>(p.in[0], offsets[0]);
            }
        }
        /* Rows ty, ty + gy, ... in order, kBatch rows loaded before any is used. */
        for (uint32_t row = q.begin + q.ty; row < q.end; row += q.gy * kBatch) {
            float x[kBatch][W], dy[kBatch][W];
#pragma unroll
            for (int i = 0; i < kBatch; i++) {
                uint32_t r = row + i * q.gy;
                if (r >= q.end) continue;
                load_vector<V, W>(p.input, r * n.channels + q.c0, x[i]);
                if (!statistics) load_vector<V, W>(p.second, r * n.channels + q.c0, dy[i]);
            }
#pragma unroll
            for (int i = 0; i < kBatch; i++) {
                if (row + i * q.gy >= q.end) continue;
#pragma unroll
                for (int e = 0; e < W; e++) {
                    double d = (double)x[i][e] - center[e];
                    if (statistics) {
                        first[e] += d;
                        second[e] += d * d;
                    } else {
                        first[e] += (double)dy[i][e];
                        second[e] += (double)dy[i][e] * d;
                    }
                }
            }
        }
    }
    uint32_t range = block / n.shapes[W > 1].column_blocks;
#pragma unroll
    for (int e = 0; e < W; e++) {
        double a = column_sum(first[e], shared, shape), b = column_sum(second[e], shared, shape);
        if (q.active && q.ty == 0) p.partials[(uint64_t)(q.c0 + e) * n.ranges + range] = make_double2(a, b);
    }
}

/* Phase 2, by one whole warp: channel c's sums of its ranges' partials (read
 * from L2: written by other blocks before the grid-wide barrier), then its
 * outputs and values. */
template <class V>
__device__ void nhwc_finalize(const nhwc_plan& n, const bn_bindings& p, bool statistics, uint32_t c) {
    const double2* ranges = p.partials + (uint64_t)c * n.ranges;
    double a = 0, b = 0;
#pragma unroll 8 /* loads in flight */
    for (uint32_t k = threadIdx.x % 32; k < n.ranges; k += 32) {
        double2 partial = __ldcg(ranges + k);
        a += partial.x, b += partial.y;
    }
    a = warp_sum(a);
    b = warp_sum(b);
    if (threadIdx.x % 32 != 0) return;
    double count = (double)n.rows;
    if (statistics) {
        double shift = (double)load<V>(p.input, c);      /* K */
        double variance = (b - a * (a / count)) / count; /* biased: divisor M (decision BN-1) */
        if (variance < 0) variance = 0;                  /* rounding; NaN stays */
        forward_group_values<V>(n.rules.parameters, p.in, p.out, n.rules.epsilon, c, shift + a / count, variance, true,
                                p.groups + 4 * (uint64_t)c);
    } else {
        backward_group_values<V>(n.rules.parameters, p.in, p.out, n.rules.epsilon, n.rules.training, c, a, b, count,
                                 true, p.groups + 4 * (uint64_t)c);
    }
}

/* Phase 3 (or inference's only pass) for one block of the grid. */
template <class V, int W, int Act>
__device__ void nhwc_apply(const nhwc_plan& n, const bn_bindings& p, bool forward, uint32_t block) {
    nhwc_position q = nhwc_position_of_thread<W>(n, block);
    if (!q.active) return;
    double values[W][4] = {}; /* forward: 3 of them */
#pragma unroll
    for (int e = 0; e < W; e++)
        if (n.rules.inference)
            inference_group_values<V>(n.rules.parameters, p.in, n.rules.epsilon, q.c0 + e, values[e]);
        else
            for (int k = 0; k < (forward ? 3 : 4); k++)
                values[e][k] = __ldcg(p.groups + 4 * (uint64_t)(q.c0 + e) + k); /* from L2, as the partials */
    bool has_add = forward && p.second != NULL, reads_x = forward || n.rules.training;
    for (uint32_t row = q.begin + q.ty; row < q.end; row += q.gy * kBatch) {
        float x[kBatch][W], second[kBatch][W];
#pragma unroll
        for (int i = 0; i < kBatch; i++) {
            uint32_t r = row + i * q.gy;
            if (r >= q.end) continue;
            if (reads_x) load_vector<V, W>(p.input, r * n.channels + q.c0, x[i]);
            if (!forward || has_add) load_vector<V, W>(p.second, r * n.channels + q.c0, second[i]);
        }
#pragma unroll
        for (int i = 0; i < kBatch; i++) {
            uint32_t r = row + i * q.gy;
            if (r >= q.end) continue;
            typename V::T y[W];
#pragma unroll
            for (int e = 0; e < W; e++) {
                double xe = reads_x ? (double)x[i][e] : 0.0;
                if (forward)
                    y[e] =
                        V::from_float(forward_element<Act>(xe, values[e][0], values[e][1], values[e][2], has_add,
                                                           has_add ? (double)second[i][e] : 0.0, n.rules.activation));
                else
                    y[e] = V::from_double(backward_element(xe, (double)second[i][e], values[e], n.rules.training));
            }
            store_vector<V, W>(p.output, r * n.channels + q.c0, y);
        }
    }
}

/* TRAINING (Forward, activation kind Act) or the GRADs in one cooperative
 * launch: the three phases over a grid of resident blocks, separated by
 * grid-wide barriers; the apply visits the blocks in reverse, so that the
 * rows read last by phase 1 are re-read from L2. At most 80 registers: 3
 * blocks per SM (96 without the bound: 2; 64: many spills). */
template <class V, int W, bool Forward, int Act>
__global__ void __launch_bounds__(kThreads, 3) bn_nhwc_fused(const nhwc_plan n, const bn_bindings p) {
    __shared__ double shared[kThreads];
    uint32_t blocks = n.shapes[W > 1].column_blocks * n.ranges;
    for (uint32_t block = blockIdx.x; block < blocks; block += gridDim.x)
        nhwc_partials<V, W>(n, p, Forward, block, shared);
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    grid.sync(); /* every partial written and visible */
    for (uint32_t c = blockIdx.x * kWarps + threadIdx.x / 32; c < n.channels; c += gridDim.x * kWarps)
        nhwc_finalize<V>(n, p, Forward, c);
    grid.sync(); /* every channel's values written and visible */
    for (uint32_t block = blockIdx.x; block < blocks; block += gridDim.x)
        nhwc_apply<V, W, Act>(n, p, Forward, blocks - 1 - block);
}

template <class V, int W, int Act>
__global__ void __launch_bounds__(kThreads) bn_nhwc_inference(const nhwc_plan n, const bn_bindings p) {
    nhwc_apply<V, W, Act>(n, p, true, blockIdx.x);
}

/* ---- Host side of the fast paths ---- */

group_rules make_group_rules(const dml_batch_norm_params* params, const dml_tensor* const parameters[5], bool forward,
                             bool training) {
    group_rules rules;
    rules.parameters = parameter_view<5>(parameters);
    rules.epsilon = params->epsilon;
    rules.activation = params->activation;
    rules.training = training;
    rules.inference = false;
    rules.forward = forward;
    return rules;
}

/* Whether the input is reduced over N, H and W and not C (axes of size 1 either way, BN-4). */
bool reduced_over_nhw(const dml_batch_norm_params* params, const dml_tensor& input) {
    for (uint32_t i = 0; i < 4; i++) {
        bool reduced = (params->reduced_axes >> i) & 1u;
        if (input.sizes[i] > 1 && reduced != (i != 1)) return false;
    }
    return true;
}

/* A 4-D tensor stored packed channels-last (N, H, W, C in memory). */
bool packed_nhwc(const dml_tensor& t) {
    return t.rank == 4 && t.strides[1] == 1 && t.strides[3] == t.sizes[1] &&
           t.strides[2] == (uint64_t)t.sizes[3] * t.sizes[1] && t.strides[0] == (uint64_t)t.sizes[2] * t.strides[2];
}

/* Whether the input and the present tensors of `same_layout` (of its sizes)
 * are all stored packed in the layout `packed` tests. */
bool in_layout(const dml_tensor& input, const dml_tensor* const same_layout[2], bool (*packed)(const dml_tensor&)) {
    if (!packed(input)) return false;
    for (int k = 0; k < 2; k++) {
        const dml_tensor& t = *same_layout[k];
        if (!t.present) continue;
        if (!packed(t)) return false;
        for (uint32_t i = 0; i < 4; i++)
            if (t.sizes[i] != input.sizes[i]) return false;
    }
    return true;
}

/* The kernels of a layout for (V, W): the fused TRAINING (with the
 * activation's kind) or GRADs, and inference's apply. */
struct nchw_kernels {
    typedef nchw_plan plan;
    template <class V> static constexpr int vector() { return kVectorBytes / sizeof(typename V::T); }
    template <class V, int W, bool Forward, int Act> static const void* fused() {
        return (const void*)bn_nchw_fused<V, W, Forward, Act>;
    }
    template <class V, int W, int Act> static const void* inference() {
        return (const void*)bn_nchw_inference<V, W, Act>;
    }
};

struct nhwc_kernels {
    typedef nhwc_plan plan;
    template <class V> static constexpr int vector() { return kNhwcVector; }
    template <class V, int W, bool Forward, int Act> static const void* fused() {
        return (const void*)bn_nhwc_fused<V, W, Forward, Act>;
    }
    template <class V, int W, int Act> static const void* inference() {
        return (const void*)bn_nhwc_inference<V, W, Act>;
    }
};

template <class Kernels, class V, int W, int Act> const void* kernel_for(const group_rules& rules) {
    if (rules.inference) return Kernels::template inference<V, W, Act>();
    return rules.forward ? Kernels::template fused<V, W, true, Act>()
                         : Kernels::template fused<V, W, false, kNoActivation>(); /* the GRADs: no activation */
}

/* The kernel that runs a plan's rules with element (W = 1) or vector loads. */
template <class Kernels, class V, int W> const void* kernel_for(const group_rules& rules) {
    switch (kind_of(rules.activation)) {
    case kNoActivation: return kernel_for<Kernels, V, W, kNoActivation>(rules);
    case kRelu: return kernel_for<Kernels, V, W, kRelu>(rules);
    default: return kernel_for<Kernels, V, W, kAnyActivation>(rules);
    }
}

/* The fused kernel's grids for element and vector loads: as many blocks as
 * the GPU holds at once (the grid-wide barrier needs every block resident),
 * no more than `tasks` (the largest phase's); 0 when the GPU cannot launch it
 * cooperatively. */
template <class Kernels, class V>
void plan_fused_grids(const DMLDevice* device, const group_rules& rules, uint64_t tasks, uint32_t blocks[2]) {
    constexpr int vector = Kernels::template vector<V>();
    const void* kernels[2] = {kernel_for<Kernels, V, 1>(rules), kernel_for<Kernels, V, vector>(rules)};
    for (int k = 0; k < 2; k++) {
        uint64_t resident = dml_cuda_resident_blocks(device, kernels[k], kThreads, 0, true);
        blocks[k] = (uint32_t)(resident < tasks ? resident : tasks);
    }
}

template <class Kernels>
void plan_fused_grids(const DMLDevice* device, const dml_tensor& input, const group_rules& rules, uint64_t tasks,
                      uint32_t blocks[2]) {
    if (is_half(&input))
        plan_fused_grids<Kernels, f16_type>(device, rules, tasks, blocks);
    else
        plan_fused_grids<Kernels, f32_type>(device, rules, tasks, blocks);
}

/* The packed NCHW plan when the input and every tensor of `same_layout`
 * (absent ones skipped) are packed NCHW (the callers check the reduction or
 * the parameters' shapes); S_FALSE declines. */
HRESULT plan_nchw(const DMLDevice* device, const dml_tensor& input, const dml_tensor* const same_layout[2],
                  const group_rules& rules, dml_plan* plan) {
    if (!in_layout(input, same_layout, dml_cuda_packed_nchw)) return S_FALSE;
    nchw_plan* n = (nchw_plan*)dml_plan_state(plan, sizeof(nchw_plan));
    if (n == nullptr) return E_OUTOFMEMORY;
    *n = {};
    n->images = input.sizes[0];
    n->channels = input.sizes[1];
    n->plane = input.sizes[2] * input.sizes[3]; /* < 2^32: T-1 */
    n->plane_divider = make_divider(n->plane);
    uint32_t vector = kVectorBytes / (is_half(&input) ? 2 : 4);
    n->vectorizable = n->plane % vector == 0;
    n->chunk = kThreads * (is_half(&input) ? chunk_items<f16_type>() : chunk_items<f32_type>());
    n->chunks = (uint32_t)(((uint64_t)n->images * n->plane + n->chunk - 1) / n->chunk);
    /* Whole planes, about kApplyElements per block (even shares): few enough
     * blocks that each one's merge of the partials is a small part of its
     * work, enough to fill the GPU (C blocks at least). */
    uint64_t elements = (uint64_t)n->images * n->plane;
    n->image_blocks = (uint32_t)min_u32(n->images, (uint32_t)((elements + kApplyElements - 1) / kApplyElements));
    n->images_per_block = (n->images + n->image_blocks - 1) / n->image_blocks;
    n->image_blocks = (n->images + n->images_per_block - 1) / n->images_per_block;
    n->rules = rules;
    plan->temporary_size = rules.inference ? 0 : (uint64_t)n->channels * n->chunks * sizeof(double2);
    if (rules.inference) return S_OK;
    uint64_t tasks = (uint64_t)n->channels * (n->chunks > n->image_blocks ? n->chunks : n->image_blocks);
    plan_fused_grids<nchw_kernels>(device, input, rules, tasks, n->fused_blocks);
    return n->fused_blocks[0] > 0 && n->fused_blocks[1] > 0 ? S_OK : S_FALSE;
}

nhwc_shape make_nhwc_shape(uint32_t columns) {
    uint32_t gx_log2 = min_u32(6, log2_ceil(columns)); /* at most 64 columns: several rows per block */
    nhwc_shape s;
    s.block = {gx_log2, 8 - gx_log2};
    s.column_blocks = (columns + (1u << gx_log2) - 1) >> gx_log2;
    return s;
}

/* As plan_nchw, for packed NHWC tensors. */
HRESULT plan_nhwc(const DMLDevice* device, const dml_tensor& input, const dml_tensor* const same_layout[2],
                  const group_rules& rules, dml_plan* plan) {
    if (!in_layout(input, same_layout, packed_nhwc)) return S_FALSE;
    nhwc_plan* n = (nhwc_plan*)dml_plan_state(plan, sizeof(nhwc_plan));
    if (n == nullptr) return E_OUTOFMEMORY;
    *n = {};
    n->channels = input.sizes[1];
    n->rows = input.sizes[0] * input.sizes[2] * input.sizes[3]; /* < 2^32: T-1 */
    n->range_rows = (n->rows + kRowRanges - 1) / kRowRanges;
    n->ranges = (n->rows + n->range_rows - 1) / n->range_rows;
    n->vectorizable = n->channels % kNhwcVector == 0;
    n->shapes[0] = make_nhwc_shape(n->channels);
    n->shapes[1] = make_nhwc_shape(n->channels / kNhwcVector);
    n->partials_bytes = (uint64_t)n->channels * n->ranges * sizeof(double2);
    n->rules = rules;
    plan->temporary_size = rules.inference ? 0 : n->partials_bytes + (uint64_t)n->channels * 4 * sizeof(double);
    if (rules.inference) return S_OK;
    uint32_t blocks = n->shapes[0].column_blocks * n->ranges, warp_blocks = (n->channels + kWarps - 1) / kWarps;
    plan_fused_grids<nhwc_kernels>(device, input, rules, blocks > warp_blocks ? blocks : warp_blocks, n->fused_blocks);
    return n->fused_blocks[0] > 0 && n->fused_blocks[1] > 0 ? S_OK : S_FALSE;
}

bool aligned_to(const void* pointer, size_t bytes) { return (uintptr_t)pointer % bytes == 0; }

/* Vector loads where the plan's sizes and the bindings allow them (bindings
 * need only element alignment). */
bool use_vectors(bool vectorizable, const bn_bindings& p, size_t vector_bytes) {
    return vectorizable && aligned_to(p.input, vector_bytes) && aligned_to(p.second, vector_bytes) &&
           aligned_to(p.output, vector_bytes);
}

/* The grid of inference's apply: a block per task. */
unsigned inference_blocks(const nchw_plan& n, int) { return n.channels * n.image_blocks; }
unsigned inference_blocks(const nhwc_plan& n, int vectors) { return n.shapes[vectors].column_blocks * n.ranges; }

/* One launch: inference's apply, or the fused kernel (cooperative). */
template <class Kernels, class V, int W> HRESULT launch(const dml_kernel_args* args, const bn_bindings& p) {
    typedef typename Kernels::plan plan_type;
    const plan_type& n = *DML_PLAN_STATE(args, plan_type);
    void* kernel_args[2] = {const_cast<plan_type*>(&n), const_cast<bn_bindings*>(&p)};
    const void* kernel = kernel_for<Kernels, V, W>(n.rules);
    cudaStream_t stream = dml_cuda_stream(args);
    cudaError_t error =
        n.rules.inference
            ? cudaLaunchKernel(kernel, inference_blocks(n, W > 1), kThreads, kernel_args, 0, stream)
            : cudaLaunchCooperativeKernel(kernel, n.fused_blocks[W > 1], kThreads, kernel_args, 0, stream);
    return error == cudaSuccess ? S_OK : dml_cuda_kernel_error(error, "CUDA kernel (batch normalization fast path)");
}

template <class Kernels, class V> HRESULT launch_typed(const dml_kernel_args* args, const bn_bindings& p) {
    constexpr int vector = Kernels::template vector<V>();
    bool vectorizable = DML_PLAN_STATE(args, typename Kernels::plan)->vectorizable;
    return use_vectors(vectorizable, p, vector * sizeof(typename V::T)) ? launch<Kernels, V, vector>(args, p)
                                                                        : launch<Kernels, V, 1>(args, p);
}

HRESULT launch_fast_path(const dml_kernel_args* args, const bn_bindings& p, bool nhwc) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    bool half = is_half(&args->op->inputs[0].tensor);
    if (nhwc)
        return half ? launch_typed<nhwc_kernels, f16_type>(args, p) : launch_typed<nhwc_kernels, f32_type>(args, p);
    return half ? launch_typed<nchw_kernels, f16_type>(args, p) : launch_typed<nchw_kernels, f32_type>(args, p);
}

/* plan_nchw or plan_nhwc. */
typedef HRESULT (*layout_planner)(const DMLDevice* device, const dml_tensor& input,
                                  const dml_tensor* const same_layout[2], const group_rules& rules, dml_plan* plan);

HRESULT plan_training_as(const DMLOperator* op, const DMLDevice* device, layout_planner planner, dml_plan* plan) {
    const dml_tensor* scale = &op->inputs[DML_BN_TRAINING_SCALE].tensor;
    const dml_tensor* same_layout[2] = {&op->inputs[DML_BN_TRAINING_FUSED_ADD].tensor,
                                        &op->outputs[DML_BN_TRAINING_OUTPUT].tensor};
    const dml_tensor* parameters[5] = {scale, &op->inputs[DML_BN_TRAINING_BIAS].tensor,
                                       &op->outputs[DML_BN_TRAINING_OUTPUT_MEAN].tensor,
                                       &op->outputs[DML_BN_TRAINING_OUTPUT_VARIANCE].tensor, scale};
    const dml_batch_norm_params* params = (const dml_batch_norm_params*)op->params;
    const dml_tensor& input = op->inputs[DML_BN_TRAINING_INPUT].tensor;
    if (!reduced_over_nhw(params, input)) return S_FALSE;
    return planner(device, input, same_layout, make_group_rules(params, parameters, true, false), plan);
}

HRESULT plan_gradient_as(const DMLOperator* op, const DMLDevice* device, bool training, layout_planner planner,
                         dml_plan* plan) {
    const dml_tensor* same_layout[2] = {&op->inputs[DML_BN_GRAD_INPUT_GRADIENT].tensor,
                                        &op->outputs[DML_BN_GRAD_OUTPUT_GRADIENT].tensor};
    const dml_tensor* parameters[5] = {&op->inputs[DML_BN_GRAD_MEAN].tensor, &op->inputs[DML_BN_GRAD_VARIANCE].tensor,
                                       &op->inputs[DML_BN_GRAD_SCALE].tensor,
                                       &op->outputs[DML_BN_GRAD_OUTPUT_SCALE_GRADIENT].tensor,
                                       &op->outputs[DML_BN_GRAD_OUTPUT_BIAS_GRADIENT].tensor};
    const dml_batch_norm_params* params = (const dml_batch_norm_params*)op->params;
    const dml_tensor& input = op->inputs[DML_BN_GRAD_INPUT].tensor;
    if (!reduced_over_nhw(params, input)) return S_FALSE;
    return planner(device, input, same_layout, make_group_rules(params, parameters, false, training), plan);
}

/* BATCH_NORMALIZATION with every parameter per channel or a scalar. */
HRESULT plan_inference_as(const DMLOperator* op, const DMLDevice* device, layout_planner planner, dml_plan* plan) {
    const dml_batch_norm_params* params = (const dml_batch_norm_params*)op->params;
    const dml_tensor& input = op->inputs[DML_BN_INPUT].tensor;
    if (input.rank != 4) return S_FALSE;
    dim_list<5> list = {};
    list.rank = 4;
    for (uint32_t i = 0; i < 4; i++)
        list.sizes[i] = i == 1 ? input.sizes[1] : 1;
    for (int k = 0; k < 4; k++) {
        const dml_tensor& parameter = op->inputs[DML_BN_MEAN + k].tensor;
        for (uint32_t i = 0; i < 4; i++)
            if (parameter.sizes[i] != 1 && (i != 1 || parameter.sizes[i] != input.sizes[1])) return S_FALSE;
        broadcast_strides(&parameter, list.strides[k]);
    }
    simplify(list);
    group_rules rules = {};
    rules.parameters = make_view(list);
    rules.epsilon = params->epsilon;
    rules.activation = params->activation;
    rules.inference = true;
    rules.forward = true;
    const dml_tensor* same_layout[2] = {&op->outputs[DML_BN_OUTPUT].tensor, &op->outputs[DML_BN_OUTPUT].tensor};
    return planner(device, input, same_layout, rules, plan);
}

/* The bindings of a dispatch; the NHWC values of the element-wise pass
 * follow the partials in the temporary resource. */
bn_bindings training_bindings(const dml_kernel_args* args, uint64_t partials_bytes) {
    bn_bindings p = {};
    p.input = args->inputs[DML_BN_TRAINING_INPUT];
    p.second =
        args->op->inputs[DML_BN_TRAINING_FUSED_ADD].tensor.present ? args->inputs[DML_BN_TRAINING_FUSED_ADD] : NULL;
    p.in[0] = args->inputs[DML_BN_TRAINING_SCALE];
    p.in[1] = args->inputs[DML_BN_TRAINING_BIAS];
    p.out[0] = args->outputs[DML_BN_TRAINING_OUTPUT_MEAN];
    p.out[1] = args->outputs[DML_BN_TRAINING_OUTPUT_VARIANCE];
    p.output = args->outputs[DML_BN_TRAINING_OUTPUT];
    p.partials = (double2*)args->temporary;
    p.groups = (double*)((char*)args->temporary + partials_bytes);
    return p;
}

bn_bindings gradient_bindings(const dml_kernel_args* args, uint64_t partials_bytes) {
    bn_bindings p = {};
    p.input = args->inputs[DML_BN_GRAD_INPUT];
    p.second = args->inputs[DML_BN_GRAD_INPUT_GRADIENT];
    for (int k = 0; k < 3; k++)
        p.in[k] = args->inputs[DML_BN_GRAD_MEAN + k];
    p.out[0] = args->outputs[DML_BN_GRAD_OUTPUT_SCALE_GRADIENT];
    p.out[1] = args->outputs[DML_BN_GRAD_OUTPUT_BIAS_GRADIENT];
    p.output = args->outputs[DML_BN_GRAD_OUTPUT_GRADIENT];
    p.partials = (double2*)args->temporary;
    p.groups = (double*)((char*)args->temporary + partials_bytes);
    return p;
}

bn_bindings inference_bindings(const dml_kernel_args* args) {
    bn_bindings p = {};
    p.input = args->inputs[DML_BN_INPUT];
    for (int k = 0; k < 4; k++)
        p.in[k] = args->inputs[DML_BN_MEAN + k];
    p.output = args->outputs[DML_BN_OUTPUT];
    return p;
}

HRESULT plan_inference_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_inference_as(op, device, plan_nchw, plan);
}
HRESULT plan_inference_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_inference_as(op, device, plan_nhwc, plan);
}
HRESULT run_inference_nchw(const dml_kernel_args* args) {
    return launch_fast_path(args, inference_bindings(args), false);
}
HRESULT run_inference_nhwc(const dml_kernel_args* args) {
    return launch_fast_path(args, inference_bindings(args), true);
}

HRESULT plan_training_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_training_as(op, device, plan_nchw, plan);
}
HRESULT plan_training_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_training_as(op, device, plan_nhwc, plan);
}
HRESULT plan_grad_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_gradient_as(op, device, false, plan_nchw, plan);
}
HRESULT plan_grad_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_gradient_as(op, device, false, plan_nhwc, plan);
}
HRESULT plan_training_grad_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_gradient_as(op, device, true, plan_nchw, plan);
}
HRESULT plan_training_grad_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_gradient_as(op, device, true, plan_nhwc, plan);
}

HRESULT run_training_nchw(const dml_kernel_args* args) {
    return launch_fast_path(args, training_bindings(args, 0), false);
}
HRESULT run_training_nhwc(const dml_kernel_args* args) {
    uint64_t partials_bytes = DML_PLAN_STATE(args, nhwc_plan)->partials_bytes;
    return launch_fast_path(args, training_bindings(args, partials_bytes), true);
}
HRESULT run_gradient_nchw(const dml_kernel_args* args) {
    return launch_fast_path(args, gradient_bindings(args, 0), false);
}
HRESULT run_gradient_nhwc(const dml_kernel_args* args) {
    uint64_t partials_bytes = DML_PLAN_STATE(args, nhwc_plan)->partials_bytes;
    return launch_fast_path(args, gradient_bindings(args, partials_bytes), true);
}

} // namespace

const dml_impl dml_cuda_batch_normalization_generic = {"batch_normalization/cuda/strided", DML_ISA_GENERIC, nullptr,
                                                       run_inference};
const dml_impl dml_cuda_batch_normalization_training_generic = {"batch_normalization_training/cuda/strided",
                                                                DML_ISA_GENERIC, plan_training, run_training};
const dml_impl dml_cuda_batch_normalization_grad_generic = {"batch_normalization_grad/cuda/strided", DML_ISA_GENERIC,
                                                            plan_gradient, run_gradient_constant_statistics};
const dml_impl dml_cuda_batch_normalization_training_grad_generic = {
    "batch_normalization_training_grad/cuda/strided", DML_ISA_GENERIC, plan_gradient, run_gradient_batch_statistics};
const dml_impl dml_cuda_batch_normalization_nchw = {"batch_normalization/cuda/nchw", DML_ISA_GENERIC,
                                                    plan_inference_nchw, run_inference_nchw};
const dml_impl dml_cuda_batch_normalization_nhwc = {"batch_normalization/cuda/nhwc", DML_ISA_GENERIC,
                                                    plan_inference_nhwc, run_inference_nhwc};
const dml_impl dml_cuda_batch_normalization_training_nchw = {"batch_normalization_training/cuda/nchw", DML_ISA_GENERIC,
                                                             plan_training_nchw, run_training_nchw};
const dml_impl dml_cuda_batch_normalization_training_nhwc = {"batch_normalization_training/cuda/nhwc", DML_ISA_GENERIC,
                                                             plan_training_nhwc, run_training_nhwc};
const dml_impl dml_cuda_batch_normalization_grad_nchw = {"batch_normalization_grad/cuda/nchw", DML_ISA_GENERIC,
                                                         plan_grad_nchw, run_gradient_nchw};
const dml_impl dml_cuda_batch_normalization_grad_nhwc = {"batch_normalization_grad/cuda/nhwc", DML_ISA_GENERIC,
                                                         plan_grad_nhwc, run_gradient_nhwc};
const dml_impl dml_cuda_batch_normalization_training_grad_nchw = {
    "batch_normalization_training_grad/cuda/nchw", DML_ISA_GENERIC, plan_training_grad_nchw, run_gradient_nchw};
const dml_impl dml_cuda_batch_normalization_training_grad_nhwc = {
    "batch_normalization_training_grad/cuda/nhwc", DML_ISA_GENERIC, plan_training_grad_nhwc, run_gradient_nhwc};
