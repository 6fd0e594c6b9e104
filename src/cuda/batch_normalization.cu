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

struct f16_type {
    typedef uint16_t T; /* binary16 bits */
    static __device__ __forceinline__ float to_float(uint16_t value) { return dml_half_to_float(value); }
    static __device__ __forceinline__ uint16_t from_float(float value) { return dml_float_to_half(value); }
    static __device__ __forceinline__ uint16_t from_double(double value) { return dml_double_to_half(value); }
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
    double group_mean = mean[threadIdx.x];
    double variance = m2[threadIdx.x] / (double)r.group_size; /* biased: divisor M (decision BN-1) */
    uint32_t offsets[5];
    view_offsets(f.parameters, c.j, offsets);
    store_double<V>(f.out[0], offsets[2], group_mean);
    store_double<V>(f.out[1], offsets[3], variance);
    double scale = (double)load<V>(f.in[0], offsets[0]);
    double bias = (double)load<V>(f.in[1], offsets[1]);
    uint32_t groups = r.group_count;
    f.groups[c.j] = group_mean;
    f.groups[groups + c.j] = scale / sqrt(variance + f.epsilon);
    f.groups[2 * (uint64_t)groups + c.j] = bias;
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
    uint32_t offsets[5];
    view_offsets(f.parameters, c.j, offsets);
    double mean = (double)load<V>(f.in[0], offsets[0]);
    double variance_plus_epsilon = (double)load<V>(f.in[1], offsets[1]) + f.epsilon;
    double inv = 1.0 / sqrt(variance_plus_epsilon);
    double scale = (double)load<V>(f.in[2], offsets[2]);
    store_double<V>(f.out[0], offsets[3], sdyxc * inv); /* OutputScaleGradient (§6, §7) */
    store_double<V>(f.out[1], offsets[4], sdy);         /* OutputBiasGradient */
    double group_size = (double)r.group_size;
    uint64_t groups = r.group_count;
    f.groups[c.j] = mean;
    f.groups[groups + c.j] = scale * inv;
    f.groups[2 * groups + c.j] = f.training ? sdy / group_size : 0.0;
    f.groups[3 * groups + c.j] = f.training ? sdyxc / group_size / variance_plus_epsilon : 0.0;
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

/* The output value before the activation, in FLOAT64 as on the CPU; written
 * with round-to-nearest intrinsics so that no multiply-add is fused. */
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
        double value = __dadd_rn(__dmul_rn(__dsub_rn(x, mean), factor), bias);
        if (!inference && p.in[1] != NULL) /* FusedAdd after Bias, before the activation (§5) */
            value = __dadd_rn(value, (double)load<V>(p.in[1], offsets[2]));
        float pre = (float)value;
        store_float<V>(p.output, offsets[0], dml_activation_apply(&p.activation, pre));
    }
}

template <class V>
__global__ void __launch_bounds__(kThreads) bn_backward_elementwise(const ew_problem p, bool training) {
    uint64_t groups = p.group_count;
    for (uint64_t i = (uint64_t)blockIdx.x * kThreads + threadIdx.x; i < p.count; i += (uint64_t)gridDim.x * kThreads) {
        uint32_t offsets[EW_OPERANDS];
        view_offsets(p.dims, (uint32_t)i, offsets);
        uint32_t g = offsets[3];
        double dy = (double)load<V>(p.in[1], offsets[2]);
        double k = p.groups[groups + g];
        double value;
        if (training) {
            double x = (double)load<V>(p.in[0], offsets[1]);
            double centered = __dmul_rn(__dsub_rn(x, p.groups[g]), p.groups[3 * groups + g]);
            value = __dmul_rn(k, __dsub_rn(__dsub_rn(dy, p.groups[2 * groups + g]), centered));
        } else {
            value = __dmul_rn(k, dy);
        }
        store_double<V>(p.output, offsets[0], value);
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
 * order and reduced over N, H and W (one group per channel), in two launches:
 *
 * 1. Partials, in one read: a block per chunk of kThreads * kItems
 *    consecutive elements m = n * HW + hw of one channel, loaded kVector at a
 *    time (16 bytes for FLOAT32) where HW and the bindings allow it. TRAINING
 *    keeps the chunk's values in registers for the two-pass (mean, M2)
 *    partial; the GRADs sum dy and dy * (x - Mean). FLOAT64 sums in a fixed
 *    order, then a fixed block tree.
 * 2. Apply: a block per run of whole planes of one channel. Its first warp
 *    merges the channel's chunk partials in a fixed order (lane k takes
 *    chunks k, k + 32, ... in turn, then a fixed shuffle tree), so that every
 *    block of a channel derives the same statistics and no third launch or
 *    atomic is needed; the block that starts at image 0 writes the
 *    per-channel outputs. Then the element-wise pass of the generic kernels,
 *    same arithmetic, vectorized.
 *
 * The chunk partials are the generic kernels' (temporaries_size with no
 * per-group values). */

constexpr int kVector = 4; /* elements per vector load and store */
constexpr int kBatch = 4;  /* vectors in flight per thread in the apply pass */

struct nchw_plan {
    uint32_t channels, images, plane; /* C, N, HW */
    fast_divider plane_divider;       /* HW */
    bool vectorizable;                /* HW % kVector == 0 */
    uint32_t chunk, chunks;           /* elements per partial chunk, chunks per channel */
    uint32_t images_per_block, image_blocks;
    dim_view<5> parameters; /* as finalize_problem.parameters */
    double epsilon;
    dml_activation activation;
    bool training; /* TRAINING_GRAD (else GRAD) */
};

struct nchw_problem {
    const void* input;
    const void* second; /* TRAINING: FusedAdd (NULL when absent); GRADs: InputGradient */
    const void* in[3];  /* TRAINING: Scale, Bias; GRADs: Mean, Variance, Scale */
    void* out[2];       /* TRAINING: OutputMean, OutputVariance; GRADs: scale and bias gradients */
    void* output;       /* Output / OutputGradient */
    double2* partials;  /* [c * chunks + chunk] */
};

template <class T, int W> struct alignas(W * sizeof(T)) vector_of { T v[W]; };

/* W consecutive elements from `offset` (a multiple of W when W > 1). */
template <class V, int W> __device__ __forceinline__ void load_vector(const void* base, uint32_t offset, float* out) {
    vector_of<typename V::T, W> v = ((const vector_of<typename V::T, W>*)base)[offset / W];
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

/* This block's chunk: channel c, elements [begin, begin + length). */
struct nchw_chunk {
    uint32_t c, chunk, begin, length;
};

__device__ __forceinline__ nchw_chunk chunk_of_block(const nchw_plan& n) {
    nchw_chunk k;
    k.c = blockIdx.x / n.chunks;
    k.chunk = blockIdx.x % n.chunks;
    k.begin = k.chunk * n.chunk;
    k.length = min_u32(n.chunk, n.images * n.plane - k.begin);
    return k;
}

template <class V, int W>
__global__ void __launch_bounds__(kThreads) bn_nchw_statistics_partials(const nchw_plan n, const nchw_problem p) {
    __shared__ double warp_sums[kThreads / 32];
    nchw_chunk k = chunk_of_block(n);
    float values[kItems]; /* elements (threadIdx.x + i * kThreads) * W + e of the chunk */
    double sum = 0;
#pragma unroll
    for (int i = 0; i < kItems / W; i++) {
        uint32_t local = (threadIdx.x + (uint32_t)i * kThreads) * W; /* the chunk and HW are multiples of W */
        if (local < k.length)
            load_vector<V, W>(p.input, nchw_offset(n, k.c, k.begin + local), &values[i * W]);
        else
#pragma unroll
            for (int e = 0; e < W; e++)
                values[i * W + e] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kItems; i++)
        sum += (double)values[i]; /* absent elements add 0 */
    double mean = block_sum(sum, warp_sums) / (double)k.length;
    double m2 = 0;
#pragma unroll
    for (int i = 0; i < kItems / W; i++) {
        if ((threadIdx.x + (uint32_t)i * kThreads) * W < k.length)
#pragma unroll
            for (int e = 0; e < W; e++) {
                double deviation = (double)values[i * W + e] - mean;
                m2 += deviation * deviation;
            }
    }
    m2 = block_sum(m2, warp_sums);
    if (threadIdx.x == 0) p.partials[(uint64_t)k.c * n.chunks + k.chunk] = make_double2(mean, m2);
}

template <class V, int W>
__global__ void __launch_bounds__(kThreads) bn_nchw_gradient_partials(const nchw_plan n, const nchw_problem p) {
    __shared__ double warp_sums[kThreads / 32];
    nchw_chunk k = chunk_of_block(n);
    uint32_t parameter_offsets[5];
    view_offsets(n.parameters, k.c, parameter_offsets);
    double mean = (double)load<V>(p.in[0], parameter_offsets[0]);
    double sdy = 0, sdyxc = 0;
#pragma unroll
    for (int i = 0; i < kItems / W; i++) {
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

/* The apply block's channel and planes, and its per-channel values. */
struct nchw_planes {
    uint32_t c, first_image, vectors; /* vectors: W-element vectors of the block's planes */
};

template <int W> __device__ __forceinline__ nchw_planes planes_of_block(const nchw_plan& n) {
    nchw_planes b;
    b.c = blockIdx.x % n.channels; /* neighbouring blocks: neighbouring planes in memory */
    b.first_image = blockIdx.x / n.channels * n.images_per_block;
    b.vectors = min_u32(n.images_per_block, n.images - b.first_image) * (n.plane / W);
    return b;
}

/* Lane 0 of the calling warp receives the merge, in a fixed order, of the
 * channel's chunk partials: Chan's merge for the statistics, else sums. */
template <bool Statistics> __device__ stats merge_channel(const nchw_plan& n, const double2* partials, uint32_t c) {
    uint32_t lane = threadIdx.x % 32;
    stats s = {0, 0, 0};
    for (uint32_t chunk = lane; chunk < n.chunks; chunk += 32) {
        double2 partial = partials[(uint64_t)c * n.chunks + chunk];
        if (Statistics) {
            stats next = {(double)min_u32(n.chunk, n.images * n.plane - chunk * n.chunk), partial.x, partial.y};
            s = merge(s, next);
        } else {
            s.mean += partial.x;
            s.m2 += partial.y;
        }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        stats other = {__shfl_down_sync(0xffffffffu, s.count, offset), __shfl_down_sync(0xffffffffu, s.mean, offset),
                       __shfl_down_sync(0xffffffffu, s.m2, offset)};
        if (Statistics)
            s = merge(s, other);
        else
            s.mean += other.mean, s.m2 += other.m2;
    }
    return s;
}

/* The apply loop: kBatch vectors of the block's planes in flight per thread;
 * `apply(offset)` handles the vector at element offset `offset`. */
template <int W, class Apply>
__device__ __forceinline__ void for_each_vector(const nchw_plan& n, const nchw_planes& b, Apply apply) {
    uint32_t plane_vectors = n.plane / W;
    for (uint32_t first = threadIdx.x; first < b.vectors; first += kThreads * kBatch) {
#pragma unroll
        for (int i = 0; i < kBatch; i++) {
            uint32_t q = first + (uint32_t)i * kThreads;
            if (q < b.vectors) {
                uint32_t image = q / plane_vectors;
                apply(((b.first_image + image) * n.channels + b.c) * n.plane + (q - image * plane_vectors) * W);
            }
        }
    }
}

template <class V, int W>
__global__ void __launch_bounds__(kThreads) bn_nchw_forward_apply(const nchw_plan n, const nchw_problem p) {
    __shared__ double channel[3]; /* mean, factor, bias */
    nchw_planes b = planes_of_block<W>(n);
    if (threadIdx.x < 32) {
        stats s = merge_channel<true>(n, p.partials, b.c);
        if (threadIdx.x == 0) {
            double variance = s.m2 / (double)(n.images * n.plane); /* biased: divisor M (decision BN-1) */
            uint32_t offsets[5];
            view_offsets(n.parameters, b.c, offsets);
            if (b.first_image == 0) {
                store_double<V>(p.out[0], offsets[2], s.mean);
                store_double<V>(p.out[1], offsets[3], variance);
            }
            channel[0] = s.mean;
            channel[1] = (double)load<V>(p.in[0], offsets[0]) / sqrt(variance + n.epsilon);
            channel[2] = (double)load<V>(p.in[1], offsets[1]);
        }
    }
    __syncthreads();
    double mean = channel[0], factor = channel[1], bias = channel[2];
    for_each_vector<W>(n, b, [&](uint32_t offset) {
        float x[W], add[W];
        load_vector<V, W>(p.input, offset, x);
        if (p.second != NULL) load_vector<V, W>(p.second, offset, add);
        typename V::T y[W];
#pragma unroll
        for (int e = 0; e < W; e++) {
            double value = __dadd_rn(__dmul_rn(__dsub_rn((double)x[e], mean), factor), bias);
            if (p.second != NULL) value = __dadd_rn(value, (double)add[e]); /* FusedAdd (§5) */
            y[e] = V::from_float(dml_activation_apply(&n.activation, (float)value));
        }
        store_vector<V, W>(p.output, offset, y);
    });
}

template <class V, int W>
__global__ void __launch_bounds__(kThreads) bn_nchw_backward_apply(const nchw_plan n, const nchw_problem p) {
    __shared__ double channel[4]; /* Mean, k, u, w as in bn_gradient_finalize */
    nchw_planes b = planes_of_block<W>(n);
    if (threadIdx.x < 32) {
        stats s = merge_channel<false>(n, p.partials, b.c);
        if (threadIdx.x == 0) {
            double sdy = s.mean, sdyxc = s.m2;
            uint32_t offsets[5];
            view_offsets(n.parameters, b.c, offsets);
            double variance_plus_epsilon = (double)load<V>(p.in[1], offsets[1]) + n.epsilon;
            double inv = 1.0 / sqrt(variance_plus_epsilon);
            if (b.first_image == 0) {
                store_double<V>(p.out[0], offsets[3], sdyxc * inv); /* OutputScaleGradient (§6, §7) */
                store_double<V>(p.out[1], offsets[4], sdy);         /* OutputBiasGradient */
            }
            double group_size = (double)(n.images * n.plane);
            channel[0] = (double)load<V>(p.in[0], offsets[0]);
            channel[1] = (double)load<V>(p.in[2], offsets[2]) * inv;
            channel[2] = n.training ? sdy / group_size : 0.0;
            channel[3] = n.training ? sdyxc / group_size / variance_plus_epsilon : 0.0;
        }
    }
    __syncthreads();
    double mean = channel[0], k = channel[1], u = channel[2], w = channel[3];
    for_each_vector<W>(n, b, [&](uint32_t offset) {
        float x[W], dy[W];
        if (n.training) load_vector<V, W>(p.input, offset, x);
        load_vector<V, W>(p.second, offset, dy);
        typename V::T dx[W];
#pragma unroll
        for (int e = 0; e < W; e++) {
            double value = __dmul_rn(k, (double)dy[e]); /* GRAD: the constant statistics' dx */
            if (n.training) {
                double centered = __dmul_rn(__dsub_rn((double)x[e], mean), w);
                value = __dmul_rn(k, __dsub_rn(__dsub_rn((double)dy[e], u), centered));
            }
            dx[e] = V::from_double(value);
        }
        store_vector<V, W>(p.output, offset, dx);
    });
}

/* Whether the input is reduced over N, H and W and not C (axes of size 1 either way, BN-4). */
bool reduced_over_nhw(const dml_batch_norm_params* params, const dml_tensor& input) {
    for (uint32_t i = 0; i < 4; i++) {
        bool reduced = (params->reduced_axes >> i) & 1u;
        if (input.sizes[i] > 1 && reduced != (i != 1)) return false;
    }
    return true;
}

/* The packed NCHW plan when the input and every tensor of `same_layout`
 * (absent ones skipped) are packed NCHW and the reduction is over N, H, W;
 * S_FALSE declines. */
HRESULT plan_nchw(const DMLOperator* op, const dml_tensor& input, const dml_tensor* const same_layout[2],
                  const dml_tensor* const parameters[5], bool training, dml_plan* plan) {
    const dml_batch_norm_params* params = (const dml_batch_norm_params*)op->params;
    if (!dml_cuda_packed_nchw(input) || !reduced_over_nhw(params, input)) return S_FALSE;
    for (int k = 0; k < 2; k++) {
        const dml_tensor& t = *same_layout[k];
        if (!t.present) continue;
        if (!dml_cuda_packed_nchw(t)) return S_FALSE;
        for (uint32_t i = 0; i < 4; i++)
            if (t.sizes[i] != input.sizes[i]) return S_FALSE;
    }
    nchw_plan* n = (nchw_plan*)dml_plan_state(plan, sizeof(nchw_plan));
    if (n == nullptr) return E_OUTOFMEMORY;
    *n = {};
    n->images = input.sizes[0];
    n->channels = input.sizes[1];
    n->plane = input.sizes[2] * input.sizes[3]; /* < 2^32: T-1 */
    n->plane_divider = make_divider(n->plane);
    n->vectorizable = n->plane % kVector == 0;
    n->chunk = kThreads * kItems;
    n->chunks = (uint32_t)((params->group_size + n->chunk - 1) / n->chunk);
    n->images_per_block = min_u32(n->images, (kThreads * kBatch * kVector + n->plane - 1) / n->plane);
    n->image_blocks = (n->images + n->images_per_block - 1) / n->images_per_block;
    n->parameters = parameter_view<5>(parameters);
    n->epsilon = params->epsilon;
    n->activation = params->activation;
    n->training = training;
    plan->temporary_size = (uint64_t)n->channels * n->chunks * sizeof(double2);
    return S_OK;
}

bool aligned_to(const void* pointer, size_t bytes) { return (uintptr_t)pointer % bytes == 0; }

template <class V, int W> HRESULT launch_nchw(const dml_kernel_args* args, const nchw_problem& p, bool forward) {
    const nchw_plan& n = *DML_PLAN_STATE(args, nchw_plan);
    cudaStream_t stream = dml_cuda_stream(args);
    unsigned partial_blocks = n.channels * n.chunks, apply_blocks = n.channels * n.image_blocks;
    if (forward) {
        bn_nchw_statistics_partials<V, W><<<partial_blocks, kThreads, 0, stream>>>(n, p);
        DML_TRY(dml_cuda_check_launch("bn_nchw_statistics_partials"));
        bn_nchw_forward_apply<V, W><<<apply_blocks, kThreads, 0, stream>>>(n, p);
        return dml_cuda_check_launch("bn_nchw_forward_apply");
    }
    bn_nchw_gradient_partials<V, W><<<partial_blocks, kThreads, 0, stream>>>(n, p);
    DML_TRY(dml_cuda_check_launch("bn_nchw_gradient_partials"));
    bn_nchw_backward_apply<V, W><<<apply_blocks, kThreads, 0, stream>>>(n, p);
    return dml_cuda_check_launch("bn_nchw_backward_apply");
}

/* Vector loads where HW and the bindings allow them (bindings need only
 * element alignment). */
template <class V> HRESULT launch_nchw_typed(const dml_kernel_args* args, const nchw_problem& p, bool forward) {
    size_t bytes = kVector * sizeof(typename V::T);
    bool vectors = DML_PLAN_STATE(args, nchw_plan)->vectorizable && aligned_to(p.input, bytes) &&
                   aligned_to(p.second, bytes) && aligned_to(p.output, bytes);
    return vectors ? launch_nchw<V, kVector>(args, p, forward) : launch_nchw<V, 1>(args, p, forward);
}

HRESULT launch_nchw_any(const dml_kernel_args* args, const dml_tensor& input, const nchw_problem& p, bool forward) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    return is_half(&input) ? launch_nchw_typed<f16_type>(args, p, forward)
                           : launch_nchw_typed<f32_type>(args, p, forward);
}

HRESULT plan_training_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)device, (void)flags;
    const dml_tensor* scale = &op->inputs[DML_BN_TRAINING_SCALE].tensor;
    const dml_tensor* same_layout[2] = {&op->inputs[DML_BN_TRAINING_FUSED_ADD].tensor,
                                        &op->outputs[DML_BN_TRAINING_OUTPUT].tensor};
    const dml_tensor* parameters[5] = {scale, &op->inputs[DML_BN_TRAINING_BIAS].tensor,
                                       &op->outputs[DML_BN_TRAINING_OUTPUT_MEAN].tensor,
                                       &op->outputs[DML_BN_TRAINING_OUTPUT_VARIANCE].tensor, scale};
    return plan_nchw(op, op->inputs[DML_BN_TRAINING_INPUT].tensor, same_layout, parameters, false, plan);
}

HRESULT run_training_nchw(const dml_kernel_args* args) {
    const DMLOperator* op = args->op;
    nchw_problem p = {};
    p.input = args->inputs[DML_BN_TRAINING_INPUT];
    p.second = op->inputs[DML_BN_TRAINING_FUSED_ADD].tensor.present ? args->inputs[DML_BN_TRAINING_FUSED_ADD] : NULL;
    p.in[0] = args->inputs[DML_BN_TRAINING_SCALE];
    p.in[1] = args->inputs[DML_BN_TRAINING_BIAS];
    p.out[0] = args->outputs[DML_BN_TRAINING_OUTPUT_MEAN];
    p.out[1] = args->outputs[DML_BN_TRAINING_OUTPUT_VARIANCE];
    p.output = args->outputs[DML_BN_TRAINING_OUTPUT];
    p.partials = (double2*)args->temporary;
    return launch_nchw_any(args, op->inputs[DML_BN_TRAINING_INPUT].tensor, p, true);
}

HRESULT plan_gradient_nchw(const DMLOperator* op, bool training, dml_plan* plan) {
    const dml_tensor* same_layout[2] = {&op->inputs[DML_BN_GRAD_INPUT_GRADIENT].tensor,
                                        &op->outputs[DML_BN_GRAD_OUTPUT_GRADIENT].tensor};
    const dml_tensor* parameters[5] = {&op->inputs[DML_BN_GRAD_MEAN].tensor, &op->inputs[DML_BN_GRAD_VARIANCE].tensor,
                                       &op->inputs[DML_BN_GRAD_SCALE].tensor,
                                       &op->outputs[DML_BN_GRAD_OUTPUT_SCALE_GRADIENT].tensor,
                                       &op->outputs[DML_BN_GRAD_OUTPUT_BIAS_GRADIENT].tensor};
    return plan_nchw(op, op->inputs[DML_BN_GRAD_INPUT].tensor, same_layout, parameters, training, plan);
}

HRESULT plan_gradient_constant_statistics_nchw(const DMLOperator* op, const DMLDevice* device,
                                               DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)device, (void)flags;
    return plan_gradient_nchw(op, false, plan);
}

HRESULT plan_gradient_batch_statistics_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                                            dml_plan* plan) {
    (void)device, (void)flags;
    return plan_gradient_nchw(op, true, plan);
}

HRESULT run_gradient_nchw(const dml_kernel_args* args) {
    nchw_problem p = {};
    p.input = args->inputs[DML_BN_GRAD_INPUT];
    p.second = args->inputs[DML_BN_GRAD_INPUT_GRADIENT];
    for (int k = 0; k < 3; k++)
        p.in[k] = args->inputs[DML_BN_GRAD_MEAN + k];
    p.out[0] = args->outputs[DML_BN_GRAD_OUTPUT_SCALE_GRADIENT];
    p.out[1] = args->outputs[DML_BN_GRAD_OUTPUT_BIAS_GRADIENT];
    p.output = args->outputs[DML_BN_GRAD_OUTPUT_GRADIENT];
    p.partials = (double2*)args->temporary;
    return launch_nchw_any(args, args->op->inputs[DML_BN_GRAD_INPUT].tensor, p, false);
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
const dml_impl dml_cuda_batch_normalization_training_nchw = {"batch_normalization_training/cuda/nchw", DML_ISA_GENERIC,
                                                             plan_training_nchw, run_training_nchw};
const dml_impl dml_cuda_batch_normalization_grad_nchw = {"batch_normalization_grad/cuda/nchw", DML_ISA_GENERIC,
                                                         plan_gradient_constant_statistics_nchw, run_gradient_nchw};
const dml_impl dml_cuda_batch_normalization_training_grad_nchw = {"batch_normalization_training_grad/cuda/nchw",
                                                                  DML_ISA_GENERIC, plan_gradient_batch_statistics_nchw,
                                                                  run_gradient_nchw};
