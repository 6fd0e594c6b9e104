/* The batch normalization family with AVX2, FMA and F16C (spec
 * batch_normalization.md §4-§9), for packed FLOAT32 and FLOAT16 tensors.
 *
 * Layout class. The plan orders the input's dimensions by stride and
 * accepts the problem when every element-wise operand is packed in that one
 * order and the kept (parameter) axes form one block between reduced ones:
 * x[o][g][i], O outer rows, G groups, I inner elements. Packed NCHW with
 * per-channel parameters is O = N, G = C, I = H*W ("runs": contiguous runs
 * of one group, vectorized along the run); channels-last (NHWC) is
 * O = N*H*W, G = C, I = 1 ("channels": vectorized across 16 neighbouring
 * groups). Anything else is declined and the generic kernel runs.
 *
 * Memory traffic. Runs: TRAINING and both GRADs work on one group at a
 * time, on one thread: first its statistics or gradient sums, then its
 * element-wise pass, which finds the group's data still in the cache (a
 * 32x256x56x56 FLOAT32 channel is 400 KB; the core's L2 holds 1 MB), so the
 * input is read from memory once. Inference streams items of STREAM_ITEM
 * contiguous elements, prefetching ahead inside the item. Channels: every
 * group spans all rows (a 16-channel block of 32x256x56x56 is 6.4 MB, more
 * than L2), so the reduction works on fixed chunks of rows (partials in
 * the TemporaryResource, merged per group in chunk order), STEP_ROWS rows at
 * a time: down each block's column with the sums in registers while the
 * next step's lines are prefetched in memory order. The element-wise pass
 * reads the input again, in memory order with each block's lanes made once
 * per chunk. (Strips of 16-64 channels, each reduced and then normalized
 * while its rows stay in the L3, were measured and lost: walks of 64-256
 * bytes per 1 KB row ran both passes 2-3x slower than these memory-order
 * walks, even with the tensor in the cache; docs/operators/
 * batch_normalization.md.) Outputs far larger than the caches are
 * written with non-temporal stores.
 *
 * Numerics. Statistics: per chunk (runs: up to DML_BN_CHUNK elements, a
 * piece of a long run or several short runs of the group; channels: up to
 * CHUNK_ROWS rows), the sum and then the squared deviations from the chunk
 * mean in FLOAT64 lanes, chunks merged by Chan's formula in a fixed order
 * (spec §5, §9). Gradient sums: FLOAT64 lanes. FLOAT16 tensors add
 * FLOAT32 spans of at most DML_BN_SPAN values per lane into those FLOAT64
 * lanes (runs and channels: compute-bound without); the
 * FLOAT32 runs of TRAINING and the GRADs do the same where AVX-512 runs them
 * (batch_normalization_avx512.c). The
 * element-wise passes: FLOAT32 tensors in FLOAT64 (forward with one FMA),
 * rounded to FLOAT32; FLOAT16 tensors in FLOAT32 (exact inputs, 2^-24
 * roundings, far inside FLOAT16's precision). The fused
 * activation runs in FLOAT32 (RELU vectorized, free; the others through the
 * shared scalar code), and the result is rounded once to the output type.
 * Work items are cut from the problem alone and each computes its own
 * outputs in a fixed order, so the bits never depend on the thread count or
 * on which thread runs an item. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../core/elements.h"
#include "batch_normalization_cpu.h"

enum {
    CHUNK_ROWS = 256,       /* at most this many rows per chunk (channels) */
    CHUNK_ELEMENTS = 65536, /* and about this many elements: a chunk stays in L2 between its two passes */
    BLOCK = 16,             /* groups per block (channels): one 64-byte line of FLOAT32 */
    TILE = 256,             /* groups per tile of the element-wise pass (channels), whole blocks */
    STEP_ROWS = 16,         /* rows per step of a reduction's walk down each block (channels) */
    MIN_GROUPS = 8,         /* fewer groups than this cannot keep the threads busy: generic */
    MIN_RUN = 8,            /* shorter runs (but > 1) are declined: generic */
    STREAM_ITEM = 65536,    /* elements per work item of inference (runs) */
    PREFETCH_BYTES = 2048   /* how far ahead a pass that streams from memory asks for lines */
};

/* ---- Plans ---- */

/* Fills O, G, I when every operand is packed in the first one's dimension
 * order and the kept axes (bits not in reduced_axes) form one block, in
 * their logical order, between reduced ones: then the physical group index
 * is the row-major parameter index j. */
static bool classify(const dml_tensor* const* operands, uint32_t operand_count, uint32_t reduced_axes,
                     bn_fast_plan* plan) {
    const dml_tensor* x = operands[0];
    uint32_t order[DML_MAX_RANK], count = 0;
    for (uint32_t i = 0; i < x->rank; i++)
        if (x->sizes[i] > 1) order[count++] = i;
    for (uint32_t a = 1; a < count; a++) /* outermost (largest stride) first, stable */
        for (uint32_t b = a; b > 0 && x->strides[order[b - 1]] < x->strides[order[b]]; b--) {
            uint32_t swap = order[b - 1];
            order[b - 1] = order[b];
            order[b] = swap;
        }
    uint64_t packed = 1;
    for (uint32_t k = count; k-- > 0;) {
        uint32_t axis = order[k];
        if (x->strides[axis] != packed) return false;
        for (uint32_t t = 1; t < operand_count; t++)
            if (operands[t]->present && operands[t]->strides[axis] != packed) return false;
        packed *= x->sizes[axis];
    }
    uint64_t segment[3] = {1, 1, 1}; /* reduced outer, kept, reduced inner */
    int part = 0;
    bool any_kept = false;
    uint32_t last_kept = 0;
    for (uint32_t k = 0; k < count; k++) {
        uint32_t axis = order[k];
        bool reduced = (reduced_axes >> axis) & 1u;
        if (reduced && part == 1) part = 2;
        if (!reduced) {
            if (part == 2 || (any_kept && axis < last_kept)) return false;
            part = 1;
            any_kept = true;
            last_kept = axis;
        }
        segment[part] *= x->sizes[axis];
    }
    if (segment[1] == 1) { /* one group: all of it one run */
        segment[2] *= segment[0];
        segment[0] = 1;
    }
    plan->outer = segment[0];
    plan->groups = segment[1];
    plan->inner = segment[2];
    plan->channels = plan->inner == 1;
    plan->half = x->type == DML_TENSOR_DATA_TYPE_FLOAT16;
    return plan->channels || plan->inner >= MIN_RUN;
}

/* Channels: the workspace holds four per-group arrays and two per-chunk,
 * per-group arrays of FLOAT64, each padded to whole blocks (128 bytes) and
 * starting on a cache line: threads that add to neighbouring chunks' partials
 * in every row never share a line (a shared line cost 16 threads most of
 * their time). The bound resource is only 16-byte aligned: WORKSPACE_ALIGNMENT
 * bytes more make room to align it (inference, without partials, needs
 * none). */
enum { WORKSPACE_ALIGNMENT = 64 };

static uint64_t padded_groups(const bn_fast_plan* p) { return (p->groups + BLOCK - 1) / BLOCK * BLOCK; }

static uint64_t channel_workspace_bytes(const bn_fast_plan* p) {
    if (!p->reduces) return 4 * padded_groups(p) * sizeof(double);
    return (4 + 2 * p->chunks) * padded_groups(p) * sizeof(double) + WORKSPACE_ALIGNMENT;
}

/* Takes the problem when its layout class is the implementation's. */
static HRESULT plan_accept(const bn_fast_plan* candidate, bool channels, const DMLDevice* device,
                           const dml_tensor* output, dml_plan* result) {
    if (candidate->channels != channels) return S_FALSE;
    bn_fast_plan* plan = dml_plan_state(result, sizeof *plan);
    if (plan == NULL) return E_OUTOFMEMORY;
    *plan = *candidate;
    plan->threads = (int)device->threads;
    plan->stream = output->element_count * dml_tensor_element_size(output) >= DML_CPU_STREAM_BYTES;
    if (plan->channels) {
        plan->chunk_rows = CHUNK_ELEMENTS / plan->groups;
        if (plan->chunk_rows > CHUNK_ROWS) plan->chunk_rows = CHUNK_ROWS;
        if (plan->chunk_rows == 0) plan->chunk_rows = 1;
        plan->chunks = (plan->outer + plan->chunk_rows - 1) / plan->chunk_rows;
    }
    /* Channels keep per-group values (and partials) there; inference's runs
     * too. Problems too small for the documented bounds of the temporary
     * resource (docs/tensors-and-bindings.md: 4 E bytes for inference,
     * 56 E + 64 for the others) are left to the generic kernel. */
    if (plan->channels || !plan->reduces) result->temporary_size = channel_workspace_bytes(plan);
    uint64_t elements = output->element_count;
    if (result->temporary_size > (plan->reduces ? 56 * elements + 64 : 4 * elements)) return S_FALSE;
    return S_OK;
}

static HRESULT plan_inference(const DMLOperator* op, const DMLDevice* device, bool channels, dml_plan* result) {
    const dml_tensor* mean = &op->inputs[DML_BN_MEAN].tensor;
    uint32_t reduced_axes = 0; /* here: the axes the parameters broadcast along */
    for (uint32_t i = 0; i < mean->rank; i++) {
        for (uint32_t k = 1; k < 4; k++)
            if (op->inputs[DML_BN_MEAN + k].tensor.sizes[i] != mean->sizes[i]) return S_FALSE; /* mixed (BN-5) */
        if (mean->sizes[i] == 1) reduced_axes |= 1u << i;
    }
    const dml_tensor* operands[2] = {&op->inputs[DML_BN_INPUT].tensor, &op->outputs[DML_BN_OUTPUT].tensor};
    bn_fast_plan plan = {.reduces = false};
    if (!classify(operands, 2, reduced_axes, &plan)) return S_FALSE;
    return plan_accept(&plan, channels, device, operands[1], result);
}

/* TRAINING and the GRADs: runs need enough groups to share among the threads. */
static HRESULT plan_grouped(const DMLOperator* op, const DMLDevice* device, bool channels,
                            const dml_tensor* const* operands, uint32_t operand_count, dml_plan* result) {
    const dml_batch_norm_params* params = op->params;
    bn_fast_plan plan = {.reduces = true};
    if (!classify(operands, operand_count, params->reduced_axes, &plan)) return S_FALSE;
    if (plan.groups < MIN_GROUPS) return S_FALSE;
    return plan_accept(&plan, channels, device, operands[1], result);
}

static HRESULT plan_training(const DMLOperator* op, const DMLDevice* device, bool channels, dml_plan* result) {
    const dml_tensor* operands[3] = {&op->inputs[DML_BN_TRAINING_INPUT].tensor,
                                     &op->outputs[DML_BN_TRAINING_OUTPUT].tensor,
                                     &op->inputs[DML_BN_TRAINING_FUSED_ADD].tensor};
    return plan_grouped(op, device, channels, operands, 3, result);
}

static HRESULT plan_gradient(const DMLOperator* op, const DMLDevice* device, bool channels, dml_plan* result) {
    const dml_tensor* operands[3] = {&op->inputs[DML_BN_GRAD_INPUT].tensor,
                                     &op->outputs[DML_BN_GRAD_OUTPUT_GRADIENT].tensor,
                                     &op->inputs[DML_BN_GRAD_INPUT_GRADIENT].tensor};
    return plan_grouped(op, device, channels, operands, 3, result);
}

/* Each kernel has two entries: "nchw" takes the runs class, "nhwc" the
 * channels class. */
#define LAYOUT_PLANS(plan)                                                                                             \
    static HRESULT plan##_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,              \
                               dml_plan* result) {                                                                     \
        (void)flags;                                                                                                   \
        return plan(op, device, false, result);                                                                        \
    }                                                                                                                  \
    static HRESULT plan##_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,              \
                               dml_plan* result) {                                                                     \
        (void)flags;                                                                                                   \
        return plan(op, device, true, result);                                                                         \
    }
LAYOUT_PLANS(plan_inference)
LAYOUT_PLANS(plan_training)
LAYOUT_PLANS(plan_gradient)

HRESULT dml_cpu_bn_plan_training_runs(const DMLOperator* op, const DMLDevice* device, dml_plan* result) {
    return plan_training(op, device, false, result);
}

HRESULT dml_cpu_bn_plan_gradient_runs(const DMLOperator* op, const DMLDevice* device, dml_plan* result) {
    return plan_gradient(op, device, false, result);
}

/* ---- Vectors: eight elements as FLOAT32 lanes, or as two FLOAT64 halves ---- */

/* Hot code is written once with `half` as a parameter and instantiated with
 * it constant (always inline), as in the generic kernel. */
#define HOT static inline __attribute__((always_inline))

/* Eight lanes of FLOAT64. */
typedef struct lanes8 {
    __m256d lo, hi;
} lanes8;

/* Asks for the line `ahead` elements further on (0: none), the same place
 * in the next chunk: each run of a group is a separate short stream that
 * the hardware prefetcher would only catch up with late. */
HOT void prefetch_ahead(bool half, const void* base, uint64_t index, uint64_t ahead) {
    if (ahead > 0) _mm_prefetch((const char*)base + (index + ahead) * (half ? 2u : 4u), _MM_HINT_T0);
}

/* Lanes below `count` (0..8) all ones. */
HOT __m256i tail_mask(uint64_t count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* `count` (0..8) elements from `index`; the other lanes are 0. */
HOT __m256 load_n(bool half, const void* base, uint64_t index, uint64_t count) {
    if (count == 8) {
        if (half) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)((const uint16_t*)base + index)));
        return _mm256_loadu_ps((const float*)base + index);
    }
    if (count == 0) return _mm256_setzero_ps();
    if (!half) return _mm256_maskload_ps((const float*)base + index, tail_mask(count)); /* no access past count */
    float lanes[8] = {0};
    for (uint64_t t = 0; t < count; t++)
        lanes[t] = dml_load_float(base, index + t, half);
    return _mm256_loadu_ps(lanes);
}

/* Stores `count` (0..8) lanes at `index`, rounded once to the type (F16C:
 * to nearest even, as dml_float_to_half). `stream` needs an aligned address. */
HOT void store_n(bool half, bool stream, void* base, uint64_t index, uint64_t count, __m256 value) {
    if (count == 8) {
        if (half) {
            __m128i bits = _mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            __m128i* address = (__m128i*)((uint16_t*)base + index);
            if (stream)
                _mm_stream_si128(address, bits);
            else
                _mm_storeu_si128(address, bits);
        } else if (stream) {
            _mm256_stream_ps((float*)base + index, value);
        } else {
            _mm256_storeu_ps((float*)base + index, value);
        }
        return;
    }
    if (!half) {
        if (count > 0) _mm256_maskstore_ps((float*)base + index, tail_mask(count), value);
        return;
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, value);
    for (uint64_t t = 0; t < count; t++)
        dml_store_float(base, index + t, half, lanes[t]);
}

/* Whether a vector store at `index` can be non-temporal: 32 bytes apart
 * along a run, so aligned at its start means aligned throughout. */
HOT bool stream_at(bool half, bool stream, const void* base, uint64_t index) {
    uintptr_t address = (uintptr_t)base + index * (half ? 2u : 4u);
    return stream && address % (half ? 16u : 32u) == 0;
}

HOT lanes8 widen(__m256 value) {
    return (lanes8){_mm256_cvtps_pd(_mm256_castps256_ps128(value)), _mm256_cvtps_pd(_mm256_extractf128_ps(value, 1))};
}

HOT __m256 narrow(lanes8 value) { return _mm256_set_m128(_mm256_cvtpd_ps(value.hi), _mm256_cvtpd_ps(value.lo)); }

HOT lanes8 broadcast8(double value) { return (lanes8){_mm256_set1_pd(value), _mm256_set1_pd(value)}; }

HOT lanes8 lanes_at(const double* values) { return (lanes8){_mm256_loadu_pd(values), _mm256_loadu_pd(values + 4)}; }

/* Lanes below `count` all ones, the others 0. */
HOT lanes8 lane_mask(uint64_t count) {
    __m256d limit = _mm256_set1_pd((double)count);
    return (lanes8){_mm256_cmp_pd(_mm256_setr_pd(0, 1, 2, 3), limit, _CMP_LT_OQ),
                    _mm256_cmp_pd(_mm256_setr_pd(4, 5, 6, 7), limit, _CMP_LT_OQ)};
}

HOT double sum_lanes(__m256d value) {
    double lanes[4];
    _mm256_storeu_pd(lanes, value);
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

/* ---- The element-wise passes ---- */

/* Per-group values of an element-wise pass for eight lanes (runs: one
 * group's, broadcast): forward {mean, factor, bias}, backward {Mean, k, u,
 * w}; FLOAT64 for FLOAT32 tensors, rounded to FLOAT32 (`single`) for
 * FLOAT16 tensors. */
typedef struct group_lanes {
    lanes8 v[4];
    __m256 single[4];
} group_lanes;
enum { FWD_MEAN, FWD_FACTOR, FWD_BIAS };
enum { BWD_MEAN, BWD_K, BWD_U, BWD_W };

HOT group_lanes group_broadcast(const double values[4]) {
    group_lanes lanes;
    for (int k = 0; k < 4; k++) {
        lanes.v[k] = broadcast8(values[k]);
        lanes.single[k] = _mm256_set1_ps((float)values[k]);
    }
    return lanes;
}

/* act((x - mean) * factor + bias [+ fused add]) of eight lanes (spec §5,
 * §8.2). FLOAT32 tensors: in FLOAT64 (one FMA after the subtraction, so
 * that an infinite factor gives the generic kernel's infinities and NaNs),
 * rounded to FLOAT32, activated. FLOAT16 tensors: in FLOAT32 (exact inputs; the
 * subtraction, the fused multiply-add and the fused add round at 2^-24,
 * far below FLOAT16's 2^-11), which keeps the pass memory-bound. */

/* The fused activation's class. The channels' element-wise pass is
 * instantiated per class with it constant: testing the activation for
 * every vector (and reloading it, since the stores may alias it) made the
 * channels-last FLOAT16 passes instruction-bound. */
typedef enum activation_class {
    ACTIVATION_CLASS_NONE,
    ACTIVATION_CLASS_RELU,
    ACTIVATION_CLASS_SCALAR
} activation_class;

HOT activation_class activation_class_of(const dml_activation* activation) {
    if (activation->type == DML_ACTIVATION_NONE || activation->type == DML_ACTIVATION_IDENTITY)
        return ACTIVATION_CLASS_NONE;
    return activation->type == DML_ACTIVATION_RELU ? ACTIVATION_CLASS_RELU : ACTIVATION_CLASS_SCALAR;
}

HOT __m256 activate_class(activation_class kind, const dml_activation* activation, __m256 pre) {
    if (kind == ACTIVATION_CLASS_NONE) return pre;
    /* fmaxf(0, x): the second operand of maxps is returned for a NaN, as fmaxf returns 0 */
    if (kind == ACTIVATION_CLASS_RELU) return _mm256_max_ps(pre, _mm256_setzero_ps());
    float values[8];
    _mm256_storeu_ps(values, pre);
    dml_cpu_bn_apply_activation(activation, values, 8);
    return _mm256_loadu_ps(values);
}

HOT __m256 activate(const dml_activation* activation, __m256 pre) {
    return activate_class(activation_class_of(activation), activation, pre);
}

HOT __m256 forward8(bool half, const void* x, const void* fused_add, uint64_t index, uint64_t count,
                    const group_lanes* v) {
    if (half) {
        __m256 centered = _mm256_sub_ps(load_n(half, x, index, count), v->single[FWD_MEAN]);
        __m256 result = _mm256_fmadd_ps(centered, v->single[FWD_FACTOR], v->single[FWD_BIAS]);
        return fused_add != NULL ? _mm256_add_ps(result, load_n(half, fused_add, index, count)) : result;
    }
    const lanes8 *mean = &v->v[FWD_MEAN], *factor = &v->v[FWD_FACTOR], *bias = &v->v[FWD_BIAS];
    lanes8 value = widen(load_n(half, x, index, count));
    value.lo = _mm256_fmadd_pd(_mm256_sub_pd(value.lo, mean->lo), factor->lo, bias->lo);
    value.hi = _mm256_fmadd_pd(_mm256_sub_pd(value.hi, mean->hi), factor->hi, bias->hi);
    if (fused_add != NULL) { /* after Bias, before the rounding (spec §5) */
        lanes8 add = widen(load_n(half, fused_add, index, count));
        value.lo = _mm256_add_pd(value.lo, add.lo);
        value.hi = _mm256_add_pd(value.hi, add.hi);
    }
    return narrow(value);
}

typedef dml_bn_forward_args forward_args;

/* A pass that streams from memory asks for the line PREFETCH_BYTES ahead
 * of `index` while it is inside its work item (before the element index
 * `end`; 0: no prefetch): at each new item the hardware prefetcher would
 * find the stream only after a few misses. NULL: no operand. */
HOT void prefetch_stream(bool half, const void* base, uint64_t index, uint64_t end) {
    uint64_t size = half ? 2u : 4u, ahead = PREFETCH_BYTES / size;
    if (base != NULL && index + ahead < end) _mm_prefetch((const char*)base + (index + ahead) * size, _MM_HINT_T0);
}

/* `length` consecutive elements of one group, prefetching up to `end`. */
HOT void forward_run(bool half, const forward_args* a, uint64_t index, uint64_t length, uint64_t end,
                     const group_lanes* v) {
    bool stream = stream_at(half, a->stream, a->y, index);
    uint64_t t = 0;
    if (half && stream && (uintptr_t)((uint16_t*)a->y + index) % 32 == 0) /* 16 halves per 32-byte store */
        for (; t + 16 <= length; t += 16) {
            prefetch_stream(half, a->x, index + t, end);
            prefetch_stream(half, a->fused_add, index + t, end);
            __m128i low = _mm256_cvtps_ph(activate(&a->activation, forward8(half, a->x, a->fused_add, index + t, 8, v)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            __m128i high =
                _mm256_cvtps_ph(activate(&a->activation, forward8(half, a->x, a->fused_add, index + t + 8, 8, v)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm256_stream_si256((__m256i*)((uint16_t*)a->y + index + t), _mm256_set_m128i(high, low));
        }
    for (; t + 8 <= length; t += 8) {
        if (t % 16 == 0) {
            prefetch_stream(half, a->x, index + t, end);
            prefetch_stream(half, a->fused_add, index + t, end);
        }
        store_n(half, stream, a->y, index + t, 8,
                activate(&a->activation, forward8(half, a->x, a->fused_add, index + t, 8, v)));
    }
    if (t < length)
        store_n(half, false, a->y, index + t, length - t,
                activate(&a->activation, forward8(half, a->x, a->fused_add, index + t, length - t, v)));
}

/* Stores one row of a block, `count` (1..16) results in two halves of
 * eight lanes; `stream`: a whole block at a 32-byte aligned address, stored
 * non-temporally. FLOAT16 blocks streamed whole take one 32-byte store (two
 * 16-byte streaming stores per block had made the channels-last FLOAT16
 * passes store-bound: 2.3x the NCHW time on the 16-core Xeon). */
HOT void store_block(bool half, bool stream, void* base, uint64_t index, uint64_t count, __m256 low, __m256 high) {
    if (half && stream) {
        __m128i low_bits = _mm256_cvtps_ph(low, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m128i high_bits = _mm256_cvtps_ph(high, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_stream_si256((__m256i*)((uint16_t*)base + index), _mm256_set_m128i(high_bits, low_bits));
        return;
    }
    store_n(half, stream, base, index, count < 8 ? count : 8, low);
    store_n(half, stream, base, index + 8, count > 8 ? count - 8 : 0, high);
}

/* One row of a block of `count` neighbouring groups (channels), prefetching
 * up to `end`; `stream` as store_block. */
HOT void forward_row(bool half, activation_class kind, const forward_args* a, uint64_t index, uint64_t count,
                     uint64_t end, bool stream, const group_lanes* v) {
    prefetch_stream(half, a->x, index, end);
    prefetch_stream(half, a->fused_add, index, end);
    __m256 low = forward8(half, a->x, a->fused_add, index, count < 8 ? count : 8, &v[0]);
    __m256 high = forward8(half, a->x, a->fused_add, index + 8, count > 8 ? count - 8 : 0, &v[1]);
    store_block(half, stream, a->y, index, count, activate_class(kind, &a->activation, low),
                activate_class(kind, &a->activation, high));
}

/* dx = k * (dy - u - (x - Mean) * w), or k * dy for the constant-statistics GRAD (spec §6, §7). */

typedef dml_bn_backward_args backward_args;

HOT __m256d backward4(bool training, __m256d x, __m256d dy, __m256d mean, __m256d k, __m256d u, __m256d w) {
    if (!training) return _mm256_mul_pd(k, dy);
    return _mm256_mul_pd(k, _mm256_sub_pd(_mm256_sub_pd(dy, u), _mm256_mul_pd(_mm256_sub_pd(x, mean), w)));
}

/* FLOAT16 tensors: in FLOAT32, as forward8. */
HOT __m256 backward8_single(const backward_args* a, uint64_t index, uint64_t count, const group_lanes* v) {
    const __m256* s = v->single;
    __m256 dy = load_n(true, a->dy, index, count);
    if (!a->training) return _mm256_mul_ps(s[BWD_K], dy);
    __m256 centered = _mm256_sub_ps(load_n(true, a->x, index, count), s[BWD_MEAN]);
    return _mm256_mul_ps(s[BWD_K], _mm256_fnmadd_ps(centered, s[BWD_W], _mm256_sub_ps(dy, s[BWD_U])));
}

HOT __m256 backward8(bool half, const backward_args* a, uint64_t index, uint64_t count, const group_lanes* v) {
    if (half) return backward8_single(a, index, count, v);
    lanes8 dy = widen(load_n(half, a->dy, index, count));
    lanes8 x = a->training ? widen(load_n(half, a->x, index, count)) : dy;
    const lanes8 *mean = &v->v[BWD_MEAN], *k = &v->v[BWD_K], *u = &v->v[BWD_U], *w = &v->v[BWD_W];
    return narrow((lanes8){backward4(a->training, x.lo, dy.lo, mean->lo, k->lo, u->lo, w->lo),
                           backward4(a->training, x.hi, dy.hi, mean->hi, k->hi, u->hi, w->hi)});
}

HOT void backward_run(bool half, const backward_args* a, uint64_t index, uint64_t length, const group_lanes* v) {
    bool stream = stream_at(half, a->stream, a->dx, index);
    uint64_t t = 0;
    for (; t + 8 <= length; t += 8)
        store_n(half, stream, a->dx, index + t, 8, backward8(half, a, index + t, 8, v));
    if (t < length) store_n(half, false, a->dx, index + t, length - t, backward8(half, a, index + t, length - t, v));
}

HOT void backward_row(bool half, const backward_args* a, uint64_t index, uint64_t count, uint64_t end, bool stream,
                      const group_lanes* v) {
    prefetch_stream(half, a->dy, index, end);
    prefetch_stream(half, a->training ? a->x : NULL, index, end);
    __m256 low = backward8(half, a, index, count < 8 ? count : 8, &v[0]);
    __m256 high = backward8(half, a, index + 8, count > 8 ? count - 8 : 0, &v[1]);
    store_block(half, stream, a->dx, index, count, low, high);
}

/* ---- Reductions ---- */

/* FLOAT16 sums run in FLOAT32 spans (DML_BN_SPAN, batch_normalization_cpu.h):
 * the inputs are exact in FLOAT32, and a span's error is far below FLOAT16's
 * precision. */
HOT void add_span(__m256 span, __m256d* lo, __m256d* hi) {
    lanes8 wide = widen(span);
    *lo = _mm256_add_pd(*lo, wide.lo);
    *hi = _mm256_add_pd(*hi, wide.hi);
}

/* Statistics of `runs` runs of `count` consecutive elements, `stride`
 * apart (short runs share a chunk): the sum, then the squared deviations
 * from the chunk mean (the chunk is in L1 by then). FLOAT16 deviations are
 * taken in FLOAT32 from the mean rounded to FLOAT32, and the sum of squares
 * corrected for that shift in FLOAT64. */
HOT dml_bn_stats chunk_stats(bool half, const void* x, uint64_t index, uint64_t count, uint64_t runs, uint64_t stride,
                             uint64_t ahead) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    for (uint64_t r = 0, base = index; r < runs; r++, base += stride) {
        uint64_t t = 0;
        while (half && t + 16 <= count) {
            __m256 a = _mm256_setzero_ps(), b = a;
            for (int n = 0; n < DML_BN_SPAN && t + 16 <= count; n++, t += 16) {
                prefetch_ahead(half, x, base + t, ahead);
                a = _mm256_add_ps(a, load_n(half, x, base + t, 8));
                b = _mm256_add_ps(b, load_n(half, x, base + t + 8, 8));
            }
            add_span(a, &s0, &s1);
            add_span(b, &s2, &s3);
        }
        for (; t + 16 <= count; t += 16) {
            prefetch_ahead(half, x, base + t, ahead);
            lanes8 a = widen(load_n(half, x, base + t, 8)), b = widen(load_n(half, x, base + t + 8, 8));
            s0 = _mm256_add_pd(s0, a.lo), s1 = _mm256_add_pd(s1, a.hi);
            s2 = _mm256_add_pd(s2, b.lo), s3 = _mm256_add_pd(s3, b.hi);
        }
        for (; t < count; t += 8) { /* zeros in the lanes past the end add nothing */
            lanes8 a = widen(load_n(half, x, base + t, count - t < 8 ? count - t : 8));
            s0 = _mm256_add_pd(s0, a.lo), s1 = _mm256_add_pd(s1, a.hi);
        }
    }
    double elements = (double)(count * runs);
    double mean = sum_lanes(_mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3))) / elements;
    double shift = half ? (double)(float)mean : mean;
    __m256d center = _mm256_set1_pd(shift);
    __m256 center_single = _mm256_set1_ps((float)shift);
    __m256d q0 = _mm256_setzero_pd(), q1 = q0, q2 = q0, q3 = q0;
    for (uint64_t r = 0, base = index; r < runs; r++, base += stride) {
        uint64_t t = 0;
        while (half && t + 16 <= count) {
            __m256 a = _mm256_setzero_ps(), b = a;
            for (int n = 0; n < DML_BN_SPAN && t + 16 <= count; n++, t += 16) {
                __m256 d0 = _mm256_sub_ps(load_n(half, x, base + t, 8), center_single);
                __m256 d1 = _mm256_sub_ps(load_n(half, x, base + t + 8, 8), center_single);
                a = _mm256_fmadd_ps(d0, d0, a);
                b = _mm256_fmadd_ps(d1, d1, b);
            }
            add_span(a, &q0, &q1);
            add_span(b, &q2, &q3);
        }
        for (; t + 16 <= count; t += 16) {
            lanes8 a = widen(load_n(half, x, base + t, 8)), b = widen(load_n(half, x, base + t + 8, 8));
            __m256d d0 = _mm256_sub_pd(a.lo, center), d1 = _mm256_sub_pd(a.hi, center);
            __m256d d2 = _mm256_sub_pd(b.lo, center), d3 = _mm256_sub_pd(b.hi, center);
            q0 = _mm256_fmadd_pd(d0, d0, q0), q1 = _mm256_fmadd_pd(d1, d1, q1);
            q2 = _mm256_fmadd_pd(d2, d2, q2), q3 = _mm256_fmadd_pd(d3, d3, q3);
        }
        for (; t < count; t += 8) {
            uint64_t lanes = count - t < 8 ? count - t : 8;
            lanes8 a = widen(load_n(half, x, base + t, lanes)), valid = lane_mask(lanes);
            __m256d d0 = _mm256_and_pd(_mm256_sub_pd(a.lo, center), valid.lo);
            __m256d d1 = _mm256_and_pd(_mm256_sub_pd(a.hi, center), valid.hi);
            q0 = _mm256_fmadd_pd(d0, d0, q0), q1 = _mm256_fmadd_pd(d1, d1, q1);
        }
    }
    /* sum (x - shift)^2 = m2 + elements * (mean - shift)^2 */
    double m2 = sum_lanes(_mm256_add_pd(_mm256_add_pd(q0, q1), _mm256_add_pd(q2, q3))) -
                elements * (mean - shift) * (mean - shift);
    return (dml_bn_stats){elements, mean, m2 < 0 ? 0 : m2}; /* NaN stays NaN */
}

/* sdy and sdy * (x - center) of `count` consecutive elements, added to the
 * lanes (FLOAT16: in FLOAT32 spans, `center` a FLOAT32 value). */
HOT void gradient_sums(bool half, const void* x, const void* dy, uint64_t index, uint64_t count, double center,
                       uint64_t ahead, __m256d sums[4]) {
    uint64_t t = 0;
    __m256 center_single = _mm256_set1_ps((float)center);
    while (half && t + 8 <= count) {
        __m256 sdy = _mm256_setzero_ps(), sdyxc = sdy;
        for (int n = 0; n < DML_BN_SPAN && t + 8 <= count; n++, t += 8) {
            if (t % 16 == 0) {
                prefetch_ahead(half, x, index + t, ahead);
                prefetch_ahead(half, dy, index + t, ahead);
            }
            __m256 dyv = load_n(half, dy, index + t, 8);
            sdy = _mm256_add_ps(sdy, dyv);
            sdyxc = _mm256_fmadd_ps(dyv, _mm256_sub_ps(load_n(half, x, index + t, 8), center_single), sdyxc);
        }
        add_span(sdy, &sums[0], &sums[1]);
        add_span(sdyxc, &sums[2], &sums[3]);
    }
    __m256d mean = _mm256_set1_pd(center);
    for (; t < count; t += 8) { /* zero dy lanes past the end add nothing */
        uint64_t lanes = count - t < 8 ? count - t : 8;
        if (t % 16 == 0) {
            prefetch_ahead(half, x, index + t, ahead);
            prefetch_ahead(half, dy, index + t, ahead);
        }
        lanes8 dyv = widen(load_n(half, dy, index + t, lanes)), xv = widen(load_n(half, x, index + t, lanes));
        sums[0] = _mm256_add_pd(sums[0], dyv.lo), sums[1] = _mm256_add_pd(sums[1], dyv.hi);
        sums[2] = _mm256_fmadd_pd(dyv.lo, _mm256_sub_pd(xv.lo, mean), sums[2]);
        sums[3] = _mm256_fmadd_pd(dyv.hi, _mm256_sub_pd(xv.hi, mean), sums[3]);
    }
}

/* ---- Runs (packed NCHW-like): one group at a time ---- */

static dml_bn_stats chunk_stats_single(const void* x, uint64_t index, uint64_t count, uint64_t runs, uint64_t stride,
                                       uint64_t ahead) {
    return chunk_stats(false, x, index, count, runs, stride, ahead);
}

static dml_bn_stats chunk_stats_half(const void* x, uint64_t index, uint64_t count, uint64_t runs, uint64_t stride,
                                     uint64_t ahead) {
    return chunk_stats(true, x, index, count, runs, stride, ahead);
}

HOT void training_group(bool half, const bn_fast_plan* p, const dml_kernel_args* args, const forward_args* a,
                        uint64_t g) {
    dml_bn_stats stats = dml_bn_group_stats(p, a->x, g, half ? chunk_stats_half : chunk_stats_single);
    double values[4] = {0};
    dml_cpu_bn_finish_statistics(args, g, stats, values);
    group_lanes v = group_broadcast(values);
    for (uint64_t o = 0; o < p->outer; o++)
        forward_run(half, a, (o * p->groups + g) * p->inner, p->inner, 0, &v); /* in L2: no prefetch */
}

HOT void gradient_group(bool half, const bn_fast_plan* p, const dml_kernel_args* args, const backward_args* a,
                        uint64_t g) {
    const DMLOperator* op = args->op;
    double mean = dml_cpu_bn_load_parameter(&op->inputs[DML_BN_GRAD_MEAN].tensor, args->inputs[DML_BN_GRAD_MEAN], g);
    __m256d sums[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    uint64_t stride = p->groups * p->inner;
    double center = half ? (double)(float)mean : mean;
    for (uint64_t o = 0; o < p->outer; o++) /* prefetching the group's next run */
        gradient_sums(half, a->x, a->dy, (o * p->groups + g) * p->inner, p->inner, center,
                      o + 1 < p->outer ? stride : 0, sums);
    /* sum dy * (x - mean) = sum dy * (x - center) + (center - mean) * sum dy */
    double sdy = sum_lanes(_mm256_add_pd(sums[0], sums[1]));
    double sdyxc = sum_lanes(_mm256_add_pd(sums[2], sums[3])) + (center - mean) * sdy;
    double values[4] = {mean};
    dml_cpu_bn_finish_gradient(args, g, sdy, sdyxc, a->training, values + 1);
    group_lanes v = group_broadcast(values);
    for (uint64_t o = 0; o < p->outer; o++)
        backward_run(half, a, (o * p->groups + g) * p->inner, p->inner, &v);
}

/* ---- Channels (NHWC-like): rows in memory order, 16 groups per vector block ---- */

/* The workspace (TemporaryResource): four per-group arrays of the
 * element-wise pass, then two per-chunk, per-group arrays of partial
 * results; each array padded to whole blocks. */
typedef struct channel_workspace {
    double* values[4];
    double* partial[2]; /* [chunk * padded_groups + g] */
} channel_workspace;

static channel_workspace channel_workspace_at(const bn_fast_plan* p, void* temporary) {
    uintptr_t address = (uintptr_t)temporary, alignment = p->reduces ? WORKSPACE_ALIGNMENT : 1;
    double* base = (double*)((address + alignment - 1) & ~(alignment - 1));
    uint64_t padded = padded_groups(p);
    channel_workspace w;
    for (int k = 0; k < 4; k++)
        w.values[k] = base + k * padded;
    for (int k = 0; k < 2; k++)
        w.partial[k] = p->reduces ? base + (4 + k * p->chunks) * padded : NULL;
    /* The lanes past the last group are computed and dropped: keep them defined. */
    memset(base, 0, 4 * padded * sizeof *base);
    return w;
}

static uint64_t chunk_begin(const bn_fast_plan* p, uint64_t chunk) { return chunk * p->chunk_rows; }
static uint64_t chunk_end(const bn_fast_plan* p, uint64_t chunk) {
    uint64_t end = (chunk + 1) * p->chunk_rows;
    return end < p->outer ? end : p->outer;
}

/* Groups of block b that exist (the last block may be partial). */
static uint64_t block_count(const bn_fast_plan* p, uint64_t block) {
    uint64_t first = block * BLOCK;
    return p->groups - first < BLOCK ? p->groups - first : BLOCK;
}

/* The `count` groups of a block at `index` as four vectors of FLOAT64 (0
 * past the last group). */
HOT void load_block(bool half, const void* base, uint64_t index, uint64_t count, __m256d out[4]) {
    lanes8 low = widen(load_n(half, base, index, count < 8 ? count : 8));
    lanes8 high = widen(load_n(half, base, index + 8, count > 8 ? count - 8 : 0));
    out[0] = low.lo, out[1] = low.hi, out[2] = high.lo, out[3] = high.hi;
}

/* The reductions of a chunk of rows, per group: TRAINING's sum of x and
 * its squared deviations from the chunk mean, the GRADs' sdy and
 * sdy * (x - Mean). */
typedef enum channel_reduction { SUM, SQUARES, GRADIENT } channel_reduction;

/* The operands of a reduction: per group, the sums it stores (sums[0]: the
 * sum of x or sdy; sums[1]: the squares or sdyxc) and `center` (the chunk
 * mean for SQUARES, Mean for GRADIENT). */
typedef struct reduction_args {
    const void *x, *dy;
    double* sums[2];
    const double* center;
} reduction_args;

/* Asks for the `line`-th cache line from the element `first` on, if it is
 * before the element `end` (NULL: no operand). */
HOT void prefetch_line(bool half, const void* base, uint64_t first, uint64_t end, uint64_t line) {
    uint64_t size = half ? 2u : 4u;
    if (base != NULL && first * size + line * 64 < end * size)
        _mm_prefetch((const char*)base + first * size + line * 64, _MM_HINT_T0);
}

/* FLOAT32 rows [r, r + rows) of a block into the FLOAT64 sums of
 * reduce_block, one row at a time. */
HOT void reduce_rows(channel_reduction kind, const bn_fast_plan* p, const reduction_args* a, uint64_t r, uint64_t rows,
                     uint64_t g, uint64_t count, uint64_t ahead, uint64_t end, uint64_t line, const __m256d center[4],
                     __m256d first[4], __m256d second[4]) {
    for (uint64_t i = 0; i < rows; i++, line++) {
        uint64_t index = (r + i) * p->groups + g;
        __m256d x[4], dy[4];
        prefetch_line(false, a->x, ahead, end, line);
        prefetch_line(false, a->dy, ahead, end, line);
        load_block(false, a->x, index, count, x);
        if (kind == GRADIENT) load_block(false, a->dy, index, count, dy);
        for (int k = 0; k < 4; k++) {
            if (kind == SUM) {
                first[k] = _mm256_add_pd(first[k], x[k]);
            } else if (kind == SQUARES) {
                __m256d d = _mm256_sub_pd(x[k], center[k]);
                second[k] = _mm256_fmadd_pd(d, d, second[k]);
            } else {
                first[k] = _mm256_add_pd(first[k], dy[k]);
                second[k] = _mm256_fmadd_pd(dy[k], _mm256_sub_pd(x[k], center[k]), second[k]);
            }
        }
    }
}

/* The same for FLOAT16 rows, each lane's rows added in FLOAT32 spans of
 * DML_BN_SPAN rows (the inputs are exact in FLOAT32), each span then to the
 * FLOAT64 sums, as the runs do: converted to FLOAT64 one by one instead,
 * these reductions were compute-bound (channels-last FLOAT16 TRAINING took
 * 0.8x the FLOAT32 time for half the bytes). Deviations are taken from the
 * center rounded to FLOAT32 (SQUARES: channel_stats_chunk takes that shift
 * out of the sum; GRADIENT: Mean is a FLOAT16 value, exact). `blocks` (1 or
 * 2) neighbouring blocks at once, `count` groups of them. */
HOT void reduce_rows_half(channel_reduction kind, const bn_fast_plan* p, const reduction_args* a, uint64_t r,
                          uint64_t rows, uint64_t g, int blocks, uint64_t count, uint64_t ahead, uint64_t end,
                          uint64_t line, const __m256d center[8], __m256d first[8], __m256d second[8]) {
    __m256 centers[4];
    for (int h = 0; h < 2 * blocks; h++)
        centers[h] = narrow((lanes8){center[2 * h], center[2 * h + 1]});
    for (uint64_t i = 0; i < rows;) {
        __m256 span_first[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        __m256 span_second[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int n = 0; n < DML_BN_SPAN && i < rows; n++, i++, line++) {
            uint64_t index = (r + i) * p->groups + g;
            prefetch_line(true, a->x, ahead, end, line);
            prefetch_line(true, a->dy, ahead, end, line);
            for (int h = 0; h < 2 * blocks; h++) {
                uint64_t lanes = count <= 8u * h ? 0 : count - 8u * h < 8 ? count - 8u * h : 8;
                __m256 x = load_n(true, a->x, index + 8 * h, lanes);
                if (kind == SUM) {
                    span_first[h] = _mm256_add_ps(span_first[h], x);
                } else if (kind == SQUARES) {
                    __m256 d = _mm256_sub_ps(x, centers[h]);
                    span_second[h] = _mm256_fmadd_ps(d, d, span_second[h]);
                } else {
                    __m256 dy = load_n(true, a->dy, index + 8 * h, lanes);
                    span_first[h] = _mm256_add_ps(span_first[h], dy);
                    span_second[h] = _mm256_fmadd_ps(dy, _mm256_sub_ps(x, centers[h]), span_second[h]);
                }
            }
        }
        for (int h = 0; h < 2 * blocks; h++) {
            if (kind != SQUARES) add_span(span_first[h], &first[2 * h], &first[2 * h + 1]);
            if (kind != SUM) add_span(span_second[h], &second[2 * h], &second[2 * h + 1]);
        }
    }
}

/* One block's sums over the rows [r, r + rows), added to the stored ones:
 * the accumulators stay in registers while the walk goes down the block's
 * column, each lane adding its rows in order (the old row walk's order).
 * That walk added into memory in every row, a store to the partials
 * between every two loads of x, and on the 16-core Xeon its passes took 3-4
 * ms where the element-wise pass over the same bytes takes 1.5 (suspected:
 * loads that match a pending store in their low 12 address bits wait for
 * it on Intel, which serializes the misses of x). Meanwhile the `line`-th
 * lines from `ahead` on are asked for (the next step's rows, in memory
 * order). FLOAT16 walks take `blocks` (1 or 2) blocks at once, `count`
 * groups of them: two blocks of FLOAT16 are one cache line per row, and
 * one block per row (32 bytes) had made these walks instruction-bound. */
HOT void reduce_block(channel_reduction kind, bool half, const bn_fast_plan* p, const reduction_args* a, uint64_t r,
                      uint64_t rows, uint64_t g, int blocks, uint64_t count, uint64_t ahead, uint64_t end,
                      uint64_t line) {
    __m256d first[8], second[8], center[8];
    for (int k = 0; k < 4 * blocks; k++) {
        first[k] = kind == SQUARES ? _mm256_setzero_pd() : _mm256_load_pd(a->sums[0] + g + 4 * k);
        second[k] = kind == SUM ? _mm256_setzero_pd() : _mm256_load_pd(a->sums[1] + g + 4 * k);
        center[k] = kind == SUM ? _mm256_setzero_pd() : _mm256_load_pd(a->center + g + 4 * k);
    }
    if (half)
        reduce_rows_half(kind, p, a, r, rows, g, blocks, count, ahead, end, line, center, first, second);
    else
        reduce_rows(kind, p, a, r, rows, g, count, ahead, end, line, center, first, second);
    for (int k = 0; k < 4 * blocks; k++) {
        if (kind != SQUARES) _mm256_store_pd(a->sums[0] + g + 4 * k, first[k]);
        if (kind != SUM) _mm256_store_pd(a->sums[1] + g + 4 * k, second[k]);
    }
}

/* One reduction over a chunk's rows, STEP_ROWS rows at a time (in L1 by
 * then), block by block; the sums (zero at the start, 32-byte aligned as
 * the workspace is) are stored once per block and step. Each step asks for
 * the next step's lines, and the first step's are asked for up front. */
HOT void reduce_chunk(channel_reduction kind, bool half, const bn_fast_plan* p, const reduction_args* a,
                      uint64_t chunk) {
    uint64_t begin = chunk_begin(p, chunk), end = chunk_end(p, chunk), last = end * p->groups;
    for (uint64_t line = 0; line * 64 < STEP_ROWS * p->groups * (half ? 2u : 4u); line++) {
        prefetch_line(half, a->x, begin * p->groups, last, line);
        prefetch_line(half, a->dy, begin * p->groups, last, line);
    }
    for (uint64_t r = begin; r < end; r += STEP_ROWS) {
        uint64_t rows = end - r < STEP_ROWS ? end - r : STEP_ROWS, ahead = (r + STEP_ROWS) * p->groups;
        uint64_t g = 0, line = 0;
        if (half && kind != GRADIENT) /* pairs of whole blocks (GRADIENT: too few registers) */
            for (; g + 2 * BLOCK <= p->groups; g += 2 * BLOCK, line += rows) {
                if (rows == STEP_ROWS)
                    reduce_block(kind, half, p, a, r, STEP_ROWS, g, 2, 2 * BLOCK, ahead, last, line);
                else
                    reduce_block(kind, half, p, a, r, rows, g, 2, 2 * BLOCK, ahead, last, line);
            }
        for (; g < p->groups; g += BLOCK, line += rows) {
            uint64_t count = block_count(p, g / BLOCK);
            if (count == BLOCK && rows == STEP_ROWS) /* the common case, with constant counts */
                reduce_block(kind, half, p, a, r, STEP_ROWS, g, 1, BLOCK, ahead, last, line);
            else
                reduce_block(kind, half, p, a, r, rows, g, 1, count, ahead, last, line);
        }
    }
}

/* TRAINING, pass 1 over one chunk of rows (it stays in L2): per group, the
 * chunk's sum, then its squared deviations from the chunk mean (FLOAT16:
 * from the mean rounded to FLOAT32, the shift taken out in FLOAT64 as the
 * runs do). */
HOT void channel_stats_chunk(bool half, const bn_fast_plan* p, const void* x, const channel_workspace* w,
                             uint64_t chunk) {
    uint64_t padded = padded_groups(p);
    double* mean = w->partial[0] + chunk * padded;
    double* m2 = w->partial[1] + chunk * padded;
    memset(mean, 0, padded * sizeof *mean);
    memset(m2, 0, padded * sizeof *m2);
    reduction_args sum = {.x = x, .sums = {mean, NULL}};
    reduce_chunk(SUM, half, p, &sum, chunk);
    double rows = (double)(chunk_end(p, chunk) - chunk_begin(p, chunk));
    for (uint64_t g = 0; g < padded; g++)
        mean[g] /= rows;
    reduction_args squares = {.x = x, .sums = {NULL, m2}, .center = mean};
    reduce_chunk(SQUARES, half, p, &squares, chunk);
    if (half) /* sum (x - shift)^2 = m2 + rows * (mean - shift)^2 */
        for (uint64_t g = 0; g < padded; g++) {
            double shift = (double)(float)mean[g];
            m2[g] -= rows * (mean[g] - shift) * (mean[g] - shift);
            if (m2[g] < 0) m2[g] = 0; /* NaN stays NaN */
        }
}

/* TRAINING, per block: Chan's merge of the chunks in chunk order, lane by
 * lane as dml_bn_stats_merge, then the group's outputs and values. */
static void channel_stats_finish(const bn_fast_plan* p, const dml_kernel_args* args, const channel_workspace* w,
                                 uint64_t block) {
    uint64_t padded = padded_groups(p), first = block * BLOCK;
    __m256d mean[4], m2[4];
    for (int k = 0; k < 4; k++) {
        mean[k] = _mm256_loadu_pd(w->partial[0] + first + 4 * k);
        m2[k] = _mm256_loadu_pd(w->partial[1] + first + 4 * k);
    }
    double total = (double)(chunk_end(p, 0) - chunk_begin(p, 0));
    for (uint64_t c = 1; c < p->chunks; c++) {
        double rows = (double)(chunk_end(p, c) - chunk_begin(p, c)), merged = total + rows;
        __m256d weight = _mm256_set1_pd(rows / merged), cross = _mm256_set1_pd(total * rows / merged);
        for (int k = 0; k < 4; k++) {
            __m256d delta = _mm256_sub_pd(_mm256_loadu_pd(w->partial[0] + c * padded + first + 4 * k), mean[k]);
            mean[k] = _mm256_add_pd(mean[k], _mm256_mul_pd(delta, weight));
            m2[k] = _mm256_add_pd(m2[k], _mm256_add_pd(_mm256_loadu_pd(w->partial[1] + c * padded + first + 4 * k),
                                                       _mm256_mul_pd(_mm256_mul_pd(delta, delta), cross)));
        }
        total = merged;
    }
    double means[BLOCK], m2s[BLOCK];
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_pd(means + 4 * k, mean[k]);
        _mm256_storeu_pd(m2s + 4 * k, m2[k]);
    }
    for (uint64_t g = 0; g < block_count(p, block); g++) {
        double values[3];
        dml_cpu_bn_finish_statistics(args, first + g, (dml_bn_stats){total, means[g], m2s[g]}, values);
        for (int k = 0; k < 3; k++)
            w->values[k][first + g] = values[k];
    }
}

/* Rows [begin, end) of the groups [first, last) (whole blocks from a
 * multiple of TILE), with the kind of activation constant. The operands are
 * copied into locals: read through `pass`, every row reloaded them, since
 * the stores may alias them. A row's blocks are streamed when its first one
 * is 32-byte aligned: the blocks are 32 (FLOAT16) or 64 bytes apart. */
HOT void channel_elementwise_rows(bool half, bool backward, activation_class kind, const bn_fast_plan* p,
                                  const void* pass, uint64_t begin, uint64_t end, uint64_t first, uint64_t last,
                                  const group_lanes (*lanes)[2]) {
    forward_args forward = {0};
    backward_args back = {0};
    if (backward)
        back = *(const backward_args*)pass;
    else
        forward = *(const forward_args*)pass;
    void* out = backward ? back.dx : forward.y;
    bool stream = backward ? back.stream : forward.stream;
    uint64_t stop = end * p->groups; /* the chunk's rows are contiguous */
    for (uint64_t r = begin; r < end; r++) {
        uint64_t index = r * p->groups + first;
        bool row_stream = stream && ((uintptr_t)out + index * (half ? 2u : 4u)) % 32 == 0;
        for (uint64_t g = first; g < last; g += BLOCK, index += BLOCK) {
            uint64_t count = last - g < BLOCK ? last - g : BLOCK;
            const group_lanes* v = lanes[(g - first) / BLOCK];
            if (count == BLOCK && backward) /* the common case, with every count a constant */
                backward_row(half, &back, index, BLOCK, stop, row_stream, v);
            else if (count == BLOCK)
                forward_row(half, kind, &forward, index, BLOCK, stop, row_stream, v);
            else if (backward)
                backward_row(half, &back, index, count, stop, false, v);
            else
                forward_row(half, kind, &forward, index, count, stop, false, v);
        }
    }
}

/* The element-wise pass (forward or backward) over one chunk of rows, TILE
 * groups at a time: each block's lanes are made once per chunk (FLOAT16
 * tensors: rounded to FLOAT32), not in every row. */
HOT void channel_elementwise_chunk(bool half, bool backward, const bn_fast_plan* p, const void* pass,
                                   const channel_workspace* w, uint64_t chunk) {
    activation_class kind =
        backward ? ACTIVATION_CLASS_NONE : activation_class_of(&((const forward_args*)pass)->activation);
    uint64_t begin = chunk_begin(p, chunk), end = chunk_end(p, chunk);
    for (uint64_t first = 0; first < p->groups; first += TILE) {
        uint64_t last = p->groups - first < TILE ? p->groups : first + TILE;
        group_lanes lanes[TILE / BLOCK][2];
        for (uint64_t g = first; g < last; g += BLOCK) /* whole blocks: the values are padded with zeros */
            for (int h = 0; h < 2; h++)
                for (int k = 0; k < 4; k++) {
                    lanes8 values = lanes_at(w->values[k] + g + 8 * h);
                    if (half)
                        lanes[(g - first) / BLOCK][h].single[k] = narrow(values);
                    else
                        lanes[(g - first) / BLOCK][h].v[k] = values;
                }
        if (backward || kind == ACTIVATION_CLASS_NONE)
            channel_elementwise_rows(half, backward, ACTIVATION_CLASS_NONE, p, pass, begin, end, first, last, lanes);
        else if (kind == ACTIVATION_CLASS_RELU)
            channel_elementwise_rows(half, false, ACTIVATION_CLASS_RELU, p, pass, begin, end, first, last, lanes);
        else
            channel_elementwise_rows(half, false, ACTIVATION_CLASS_SCALAR, p, pass, begin, end, first, last, lanes);
    }
}

/* GRADs, pass 1 over one chunk of rows: per group, sdy and sdyxc. */
HOT void channel_gradient_chunk(bool half, const bn_fast_plan* p, const backward_args* a, const channel_workspace* w,
                                uint64_t chunk) {
    uint64_t padded = padded_groups(p);
    memset(w->partial[0] + chunk * padded, 0, padded * sizeof(double));
    memset(w->partial[1] + chunk * padded, 0, padded * sizeof(double));
    reduction_args sums = {.x = a->x,
                           .dy = a->dy,
                           .sums = {w->partial[0] + chunk * padded, w->partial[1] + chunk * padded},
                           .center = w->values[0]};
    reduce_chunk(GRADIENT, half, p, &sums, chunk);
}

/* GRADs, per block: the chunk sums in chunk order, the parameter gradients
 * and {k, u, w} (values[1..3]; values[0] holds Mean). */
static void channel_gradient_finish(const bn_fast_plan* p, const dml_kernel_args* args, const channel_workspace* w,
                                    bool training, uint64_t block) {
    uint64_t padded = padded_groups(p), first = block * BLOCK;
    for (uint64_t g = first; g < first + block_count(p, block); g++) {
        double sdy = 0, sdyxc = 0, values[3];
        for (uint64_t c = 0; c < p->chunks; c++) {
            sdy += w->partial[0][c * padded + g];
            sdyxc += w->partial[1][c * padded + g];
        }
        dml_cpu_bn_finish_gradient(args, g, sdy, sdyxc, training, values);
        for (int k = 0; k < 3; k++)
            w->values[k + 1][g] = values[k];
    }
}

/* ---- Run steps ---- */

/* The same with `half` constant in each instance of body. */
#define PARALLEL_ITEMS_TYPED(plan, items, item_cost, HALF_BODY)                                                        \
    do {                                                                                                               \
        if ((plan)->half)                                                                                              \
            PARALLEL_ITEMS(plan, items, item_cost, HALF_BODY(true));                                                   \
        else                                                                                                           \
            PARALLEL_ITEMS(plan, items, item_cost, HALF_BODY(false));                                                  \
    } while (0)

static uint64_t blocks_of(const bn_fast_plan* p) { return (p->groups + BLOCK - 1) / BLOCK; }
static uint64_t chunk_cost(const bn_fast_plan* p) { return p->chunk_rows * p->groups; }

/* The work items of the run steps, as HALF_BODY of PARALLEL_ITEMS_TYPED. */
#define TRAINING_GROUP(half) training_group(half, p, args, &a, (uint64_t)item)
#define STATS_CHUNK(half) channel_stats_chunk(half, p, a.x, &w, (uint64_t)item)
#define FORWARD_CHUNK(half) channel_elementwise_chunk(half, false, p, &a, &w, (uint64_t)item)
#define GRADIENT_GROUP(half) gradient_group(half, p, args, &a, (uint64_t)item)
#define GRADIENT_CHUNK(half) channel_gradient_chunk(half, p, &a, &w, (uint64_t)item)
#define BACKWARD_CHUNK(half) channel_elementwise_chunk(half, true, p, &a, &w, (uint64_t)item)
#define INFERENCE_ITEM(half) inference_item(half, p, &a, &w, (uint64_t)item)

static HRESULT run_training(const dml_kernel_args* args) {
    const bn_fast_plan* p = DML_PLAN_STATE(args, bn_fast_plan);
    forward_args a = dml_bn_training_forward_args(args, p->stream);
    if (!p->channels) {
        PARALLEL_ITEMS_TYPED(p, p->groups, p->outer * p->inner, TRAINING_GROUP);
        return S_OK;
    }
    channel_workspace w = channel_workspace_at(p, args->temporary);
    PARALLEL_ITEMS_TYPED(p, p->chunks, chunk_cost(p), STATS_CHUNK);
    PARALLEL_ITEMS(p, blocks_of(p), p->chunks * BLOCK, channel_stats_finish(p, args, &w, (uint64_t)item));
    PARALLEL_ITEMS_TYPED(p, p->chunks, chunk_cost(p), FORWARD_CHUNK);
    return S_OK;
}

static HRESULT run_gradient(const dml_kernel_args* args, bool training) {
    const bn_fast_plan* p = DML_PLAN_STATE(args, bn_fast_plan);
    backward_args a = dml_bn_backward_args_of(args, training, p->stream);
    if (!p->channels) {
        PARALLEL_ITEMS_TYPED(p, p->groups, p->outer * p->inner, GRADIENT_GROUP);
        return S_OK;
    }
    channel_workspace w = channel_workspace_at(p, args->temporary);
    const dml_tensor* mean = &args->op->inputs[DML_BN_GRAD_MEAN].tensor;
    for (uint64_t g = 0; g < p->groups; g++)
        w.values[0][g] = dml_cpu_bn_load_parameter(mean, args->inputs[DML_BN_GRAD_MEAN], g);
    PARALLEL_ITEMS_TYPED(p, p->chunks, chunk_cost(p), GRADIENT_CHUNK);
    PARALLEL_ITEMS(p, blocks_of(p), p->chunks * BLOCK, channel_gradient_finish(p, args, &w, training, (uint64_t)item));
    PARALLEL_ITEMS_TYPED(p, p->chunks, chunk_cost(p), BACKWARD_CHUNK);
    return S_OK;
}

static HRESULT run_gradient_constant_statistics(const dml_kernel_args* args) { return run_gradient(args, false); }

static HRESULT run_gradient_batch_statistics(const dml_kernel_args* args) { return run_gradient(args, true); }

/* Inference: group j's {mean, factor = Scale / sqrt(Variance + Epsilon),
 * Bias} (spec §4), kept in the workspace. No reduction, so the work items
 * are pieces of runs (runs) or chunks of rows (channels), whatever the group
 * count. */
static void inference_group(const dml_kernel_args* args, uint64_t j, double values[3]) {
    const DMLOperator* op = args->op;
    const dml_batch_norm_params* params = op->params;
    double parameter[4];
    for (int k = 0; k < 4; k++)
        parameter[k] = dml_cpu_bn_load_parameter(&op->inputs[DML_BN_MEAN + k].tensor, args->inputs[DML_BN_MEAN + k], j);
    values[0] = parameter[0];
    values[1] = parameter[2] / sqrt(parameter[1] + (double)params->epsilon);
    values[2] = parameter[3];
}

/* Runs: an item is a piece of one long run, or several consecutive short
 * runs (each with its group's values), about STREAM_ITEM elements either
 * way, contiguous in memory. */
static uint64_t inference_runs_per_item(const bn_fast_plan* p) {
    return p->inner >= STREAM_ITEM ? 1 : STREAM_ITEM / p->inner;
}
static uint64_t inference_pieces_per_run(const bn_fast_plan* p) { return (p->inner + STREAM_ITEM - 1) / STREAM_ITEM; }

HOT void inference_item(bool half, const bn_fast_plan* p, const forward_args* a, const channel_workspace* w,
                        uint64_t item) {
    uint64_t pieces = inference_pieces_per_run(p), runs = p->outer * p->groups;
    uint64_t begin = item % pieces * STREAM_ITEM;
    uint64_t length = p->inner - begin < STREAM_ITEM ? p->inner - begin : STREAM_ITEM;
    uint64_t first = item / pieces * inference_runs_per_item(p), last = first + inference_runs_per_item(p);
    if (last > runs) last = runs;
    uint64_t end = (last - 1) * p->inner + begin + length;
    for (uint64_t run = first; run < last; run++) {
        uint64_t g = run % p->groups;
        double values[4] = {w->values[0][g], w->values[1][g], w->values[2][g], 0};
        group_lanes v = group_broadcast(values);
        forward_run(half, a, run * p->inner + begin, length, end, &v);
    }
}

static HRESULT run_inference(const dml_kernel_args* args) {
    const bn_fast_plan* p = DML_PLAN_STATE(args, bn_fast_plan);
    const dml_batch_norm_params* params = args->op->params;
    forward_args a = {
        .x = args->inputs[DML_BN_INPUT],
        .fused_add = NULL,
        .y = args->outputs[DML_BN_OUTPUT],
        .activation = params->activation,
        .stream = p->stream,
    };
    channel_workspace w = channel_workspace_at(p, args->temporary);
    for (uint64_t g = 0; g < p->groups; g++) {
        double values[3];
        inference_group(args, g, values);
        for (int k = 0; k < 3; k++)
            w.values[k][g] = values[k];
    }
    if (p->channels) {
        PARALLEL_ITEMS_TYPED(p, p->chunks, chunk_cost(p), FORWARD_CHUNK);
    } else {
        uint64_t runs = p->outer * p->groups, per_item = inference_runs_per_item(p);
        uint64_t items = (runs + per_item - 1) / per_item * inference_pieces_per_run(p);
        PARALLEL_ITEMS_TYPED(p, items, STREAM_ITEM, INFERENCE_ITEM);
    }
    return S_OK;
}

#define AVX2_IMPLS(kernel, plan, run)                                                                                  \
    const dml_impl dml_cpu_##kernel##_avx2_nchw = {#kernel "/avx2/nchw", DML_ISA_AVX2, plan##_nchw, run};              \
    const dml_impl dml_cpu_##kernel##_avx2_nhwc = {#kernel "/avx2/nhwc", DML_ISA_AVX2, plan##_nhwc, run};
AVX2_IMPLS(batch_normalization, plan_inference, run_inference)
AVX2_IMPLS(batch_normalization_training, plan_training, run_training)
AVX2_IMPLS(batch_normalization_grad, plan_gradient, run_gradient_constant_statistics)
AVX2_IMPLS(batch_normalization_training_grad, plan_gradient, run_gradient_batch_statistics)
