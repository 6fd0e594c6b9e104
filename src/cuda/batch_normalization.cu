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

struct f32_type {
    typedef float T;
    static __device__ __forceinline__ float load(const void* base, uint32_t offset) {
        return ((const float*)base)[offset];
    }
    static __device__ __forceinline__ void store_float(void* base, uint32_t offset, float value) {
        ((float*)base)[offset] = value;
    }
    static __device__ __forceinline__ void store_double(void* base, uint32_t offset, double value) {
        ((float*)base)[offset] = (float)value;
    }
};

struct f16_type {
    typedef uint16_t T; /* binary16 bits */
    static __device__ __forceinline__ float load(const void* base, uint32_t offset) {
        return dml_half_to_float(((const uint16_t*)base)[offset]);
    }
    static __device__ __forceinline__ void store_float(void* base, uint32_t offset, float value) {
        ((uint16_t*)base)[offset] = dml_float_to_half(value);
    }
    static __device__ __forceinline__ void store_double(void* base, uint32_t offset, double value) {
        ((uint16_t*)base)[offset] = dml_double_to_half(value);
    }
};

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
            values[i] = V::load(p.input, base[0] + offsets[0]);
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
        mean = (double)V::load(p.mean, mean_offset[0]);
    }
    double sdy = 0, sdyxc = 0;
#pragma unroll
    for (int i = 0; i < kItems; i++) {
        uint32_t local = ty + (uint32_t)i * gy;
        if (t.has_group && local < t.length) {
            uint32_t offsets[2];
            view_offsets(r.reduced, t.begin + local, offsets);
            double dy = (double)V::load(p.input_gradient, base[1] + offsets[1]);
            double x = (double)V::load(p.input, base[0] + offsets[0]);
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
    V::store_double(f.out[0], offsets[2], group_mean);
    V::store_double(f.out[1], offsets[3], variance);
    double scale = (double)V::load(f.in[0], offsets[0]);
    double bias = (double)V::load(f.in[1], offsets[1]);
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
    double mean = (double)V::load(f.in[0], offsets[0]);
    double variance_plus_epsilon = (double)V::load(f.in[1], offsets[1]) + f.epsilon;
    double inv = 1.0 / sqrt(variance_plus_epsilon);
    double scale = (double)V::load(f.in[2], offsets[2]);
    V::store_double(f.out[0], offsets[3], sdyxc * inv); /* OutputScaleGradient (§6, §7) */
    V::store_double(f.out[1], offsets[4], sdy);         /* OutputBiasGradient */
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
        double x = (double)V::load(p.in[0], offsets[1]);
        double mean, factor, bias;
        if (inference) { /* each parameter through its own sizes (decision BN-5) */
            mean = (double)V::load(p.in[1], offsets[2]);
            double variance = (double)V::load(p.in[2], offsets[3]);
            factor = (double)V::load(p.in[3], offsets[4]) / sqrt(__dadd_rn(variance, p.epsilon));
            bias = (double)V::load(p.in[4], offsets[5]);
        } else {
            uint32_t g = offsets[3];
            mean = p.groups[g];
            factor = p.groups[p.group_count + g];
            bias = p.groups[2 * (uint64_t)p.group_count + g];
        }
        double value = __dadd_rn(__dmul_rn(__dsub_rn(x, mean), factor), bias);
        if (!inference && p.in[1] != NULL) /* FusedAdd after Bias, before the activation (§5) */
            value = __dadd_rn(value, (double)V::load(p.in[1], offsets[2]));
        float pre = (float)value;
        V::store_float(p.output, offsets[0], dml_activation_apply(&p.activation, pre));
    }
}

template <class V>
__global__ void __launch_bounds__(kThreads) bn_backward_elementwise(const ew_problem p, bool training) {
    uint64_t groups = p.group_count;
    for (uint64_t i = (uint64_t)blockIdx.x * kThreads + threadIdx.x; i < p.count; i += (uint64_t)gridDim.x * kThreads) {
        uint32_t offsets[EW_OPERANDS];
        view_offsets(p.dims, (uint32_t)i, offsets);
        uint32_t g = offsets[3];
        double dy = (double)V::load(p.in[1], offsets[2]);
        double k = p.groups[groups + g];
        double value;
        if (training) {
            double x = (double)V::load(p.in[0], offsets[1]);
            double centered = __dmul_rn(__dsub_rn(x, p.groups[g]), p.groups[3 * groups + g]);
            value = __dmul_rn(k, __dsub_rn(__dsub_rn(dy, p.groups[2 * groups + g]), centered));
        } else {
            value = __dmul_rn(k, dy);
        }
        V::store_double(p.output, offsets[0], value);
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

} // namespace

const dml_impl dml_cuda_batch_normalization_generic = {"batch_normalization/cuda/strided", DML_ISA_GENERIC, nullptr,
                                                       run_inference};
const dml_impl dml_cuda_batch_normalization_training_generic = {"batch_normalization_training/cuda/strided",
                                                                DML_ISA_GENERIC, plan_training, run_training};
const dml_impl dml_cuda_batch_normalization_grad_generic = {"batch_normalization_grad/cuda/strided", DML_ISA_GENERIC,
                                                            plan_gradient, run_gradient_constant_statistics};
const dml_impl dml_cuda_batch_normalization_training_grad_generic = {
    "batch_normalization_training_grad/cuda/strided", DML_ISA_GENERIC, plan_gradient, run_gradient_batch_statistics};
