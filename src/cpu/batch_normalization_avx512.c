/* BATCH_NORMALIZATION_TRAINING with AVX-512 for packed FLOAT32 tensors in
 * the runs class (packed NCHW-like, batch_normalization_avx2.c classifies
 * the layout; FLOAT16 and the channels class are left to the AVX2
 * implementations).
 *
 * Work as in the AVX2 runs: one group at a time on one thread, first its
 * statistics chunk by chunk (dml_bn_group_stats: each chunk read from
 * memory once, then again from L1), then the element-wise pass, which finds
 * the group's data still in L2.
 *
 * Fewer instructions per element than the AVX2 path (on Zen 4 a 512-bit
 * operation costs two 256-bit ones, so the gain is in the front end and in
 * the conversions avoided, not in wider units). Statistics of a chunk:
 * pass 1 adds the FLOAT32 inputs in FLOAT32 spans (DML_BN_SPAN vectors per
 * lane, then FLOAT64), only to find a center c, the chunk's mean rounded to
 * FLOAT32; pass 2 adds d = x - c and d * d in FLOAT32 spans into FLOAT64
 * lanes, and mean = c + S1 / n, m2 = S2 - S1^2 / n in FLOAT64. The error of
 * d is at most 2^-24 |x - c| (relative to the deviation, whatever the
 * offset of the data) and a span's sums are off by at most DML_BN_SPAN *
 * 2^-24 of their terms: the mean within about 5e-7 standard deviations, the
 * variance within about 1e-6 relative while the data's mean is below 10^5
 * standard deviations (c is then far closer to the mean than one standard
 * deviation), inside the spec's tolerances (§9: 1e-4 relative for
 * reductions, 1e-5 + 1e-6 for the outputs). The element-wise pass is the
 * AVX2 one's formula in FLOAT64 lanes (one FMA), rounded once to FLOAT32.
 * Work items are groups, each computed in a fixed order: the bits never
 * depend on the thread count. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "batch_normalization_cpu.h"

#define HOT static inline __attribute__((always_inline))

enum { LANES = 16 }; /* FLOAT32 lanes of a vector */

/* Lanes below `count` (0..16). */
HOT __mmask16 lanes_below(uint64_t count) { return (__mmask16)((1u << count) - 1u); }

/* The 16 FLOAT32 lanes of `value` added to two vectors of FLOAT64 lanes. */
HOT void add_wide(__m512 value, __m512d* low, __m512d* high) {
    *low = _mm512_add_pd(*low, _mm512_cvtps_pd(_mm512_castps512_ps256(value)));
    *high = _mm512_add_pd(*high, _mm512_cvtps_pd(_mm512_extractf32x8_ps(value, 1)));
}

HOT double sum_wide(__m512d low, __m512d high) { return _mm512_reduce_add_pd(_mm512_add_pd(low, high)); }

/* Pass 1: the sum of `runs` runs of `count` elements, `stride` apart, in
 * FLOAT32 spans (the lanes past a run's end are 0). */
HOT double chunk_sum(const float* x, uint64_t index, uint64_t count, uint64_t runs, uint64_t stride, uint64_t ahead) {
    __m512d low = _mm512_setzero_pd(), high = low;
    for (uint64_t r = 0, base = index; r < runs; r++, base += stride)
        for (uint64_t t = 0; t < count;) {
            __m512 a = _mm512_setzero_ps(), b = a;
            for (int n = 0; n < DML_BN_SPAN && t + 2 * LANES <= count; n++, t += 2 * LANES) {
                if (ahead > 0) { /* the two lines of this step, one chunk further */
                    _mm_prefetch((const char*)(x + base + t + ahead), _MM_HINT_T0);
                    _mm_prefetch((const char*)(x + base + t + ahead + LANES), _MM_HINT_T0);
                }
                a = _mm512_add_ps(a, _mm512_loadu_ps(x + base + t));
                b = _mm512_add_ps(b, _mm512_loadu_ps(x + base + t + LANES));
            }
            if (t + 2 * LANES > count) /* the run's last 0..31 elements */
                for (; t < count; t += LANES) {
                    uint64_t lanes = count - t < LANES ? count - t : LANES;
                    a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(lanes_below(lanes), x + base + t));
                }
            add_wide(_mm512_add_ps(a, b), &low, &high);
        }
    return sum_wide(low, high);
}

/* Pass 2: sums of d = x - center and d * d in FLOAT32 spans (d is 0 in the
 * lanes past a run's end). */
HOT void chunk_deviations(const float* x, uint64_t index, uint64_t count, uint64_t runs, uint64_t stride, float center,
                          double* sum, double* squares) {
    __m512d s_low = _mm512_setzero_pd(), s_high = s_low, q_low = s_low, q_high = s_low;
    __m512 c = _mm512_set1_ps(center);
    for (uint64_t r = 0, base = index; r < runs; r++, base += stride)
        for (uint64_t t = 0; t < count;) {
            __m512 s0 = _mm512_setzero_ps(), s1 = s0, q0 = s0, q1 = s0;
            for (int n = 0; n < DML_BN_SPAN && t + 2 * LANES <= count; n++, t += 2 * LANES) {
                __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + base + t), c);
                __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(x + base + t + LANES), c);
                s0 = _mm512_add_ps(s0, d0), s1 = _mm512_add_ps(s1, d1);
                q0 = _mm512_fmadd_ps(d0, d0, q0), q1 = _mm512_fmadd_ps(d1, d1, q1);
            }
            if (t + 2 * LANES > count)
                for (; t < count; t += LANES) {
                    __mmask16 valid = lanes_below(count - t < LANES ? count - t : LANES);
                    __m512 d = _mm512_maskz_sub_ps(valid, _mm512_maskz_loadu_ps(valid, x + base + t), c);
                    s0 = _mm512_add_ps(s0, d);
                    q0 = _mm512_fmadd_ps(d, d, q0);
                }
            add_wide(_mm512_add_ps(s0, s1), &s_low, &s_high);
            add_wide(_mm512_add_ps(q0, q1), &q_low, &q_high);
        }
    *sum = sum_wide(s_low, s_high);
    *squares = sum_wide(q_low, q_high);
}

static dml_bn_stats chunk_stats(const void* x, uint64_t index, uint64_t count, uint64_t runs, uint64_t stride,
                                uint64_t ahead) {
    double elements = (double)(count * runs), total = chunk_sum(x, index, count, runs, stride, ahead);
    float center = (float)(total / elements);
    double sum, squares;
    chunk_deviations(x, index, count, runs, stride, center, &sum, &squares);
    double offset = sum / elements; /* mean - center */
    double m2 = squares - sum * offset;
    /* Infinite inputs: the mean of the plain sum (inf - inf deviations are NaN) */
    double mean = isfinite(center) ? center + offset : total / elements;
    return (dml_bn_stats){elements, mean, m2 < 0 ? 0 : m2}; /* NaN stays NaN */
}

/* ---- The element-wise pass ---- */

typedef struct forward_values {
    __m512d mean, factor, bias;
} forward_values;

/* act((x - mean) * factor + bias [+ fused add]) of the `valid` lanes at
 * `index` (the others 0), in FLOAT64 lanes rounded once to FLOAT32 (spec
 * §5, §8.2), as the AVX2 pass. */
HOT __m512 forward16(const dml_bn_forward_args* a, uint64_t index, __mmask16 valid, const forward_values* v) {
    __m512 x = _mm512_maskz_loadu_ps(valid, (const float*)a->x + index);
    __m512d low = _mm512_cvtps_pd(_mm512_castps512_ps256(x)), high = _mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1));
    low = _mm512_fmadd_pd(_mm512_sub_pd(low, v->mean), v->factor, v->bias);
    high = _mm512_fmadd_pd(_mm512_sub_pd(high, v->mean), v->factor, v->bias);
    if (a->fused_add != NULL) { /* after Bias, before the rounding (spec §5) */
        __m512 add = _mm512_maskz_loadu_ps(valid, (const float*)a->fused_add + index);
        low = _mm512_add_pd(low, _mm512_cvtps_pd(_mm512_castps512_ps256(add)));
        high = _mm512_add_pd(high, _mm512_cvtps_pd(_mm512_extractf32x8_ps(add, 1)));
    }
    __m512 pre = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(low)), _mm512_cvtpd_ps(high), 1);
    switch (a->activation.type) {
    case DML_ACTIVATION_NONE:
    case DML_ACTIVATION_IDENTITY: return pre;
    case DML_ACTIVATION_RELU: /* fmaxf(0, x): maxps returns its second operand for a NaN, as fmaxf returns 0 */
        return _mm512_max_ps(pre, _mm512_setzero_ps());
    default: {
        float values[LANES];
        _mm512_storeu_ps(values, pre);
        dml_cpu_bn_apply_activation(&a->activation, values, LANES);
        return _mm512_loadu_ps(values);
    }
    }
}

/* `length` consecutive elements of one group. Non-temporal stores need
 * 64-byte alignment: the lines before the first aligned one and after the
 * last whole vector are stored plainly (masked). */
HOT void forward_run(const dml_bn_forward_args* a, uint64_t index, uint64_t length, const forward_values* v) {
    float* y = (float*)a->y + index;
    uint64_t t = 0;
    if (a->stream) {
        uint64_t misaligned = (uintptr_t)y % 64 / sizeof(float);
        uint64_t head = misaligned == 0 ? 0 : LANES - misaligned;
        if (head > length) head = length;
        if (head > 0) _mm512_mask_storeu_ps(y, lanes_below(head), forward16(a, index, lanes_below(head), v));
        for (t = head; t + LANES <= length; t += LANES)
            _mm512_stream_ps(y + t, forward16(a, index + t, 0xFFFF, v));
    } else {
        for (; t + LANES <= length; t += LANES)
            _mm512_storeu_ps(y + t, forward16(a, index + t, 0xFFFF, v));
    }
    if (t < length) {
        __mmask16 valid = lanes_below(length - t);
        _mm512_mask_storeu_ps(y + t, valid, forward16(a, index + t, valid, v));
    }
}

/* One group: its statistics, its outputs, then the element-wise pass over
 * its runs (in L2 by then). */
HOT void training_group(const bn_fast_plan* p, const dml_kernel_args* args, const dml_bn_forward_args* a, uint64_t g) {
    dml_bn_stats stats = dml_bn_group_stats(p, a->x, g, chunk_stats);
    double values[3];
    dml_cpu_bn_finish_statistics(args, g, stats, values);
    forward_values v = {_mm512_set1_pd(values[0]), _mm512_set1_pd(values[1]), _mm512_set1_pd(values[2])};
    for (uint64_t o = 0; o < p->outer; o++)
        forward_run(a, (o * p->groups + g) * p->inner, p->inner, &v);
}

static HRESULT plan_training_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                                  dml_plan* result) {
    (void)flags;
    HRESULT status = dml_cpu_bn_plan_training_runs(op, device, result);
    if (status != S_OK) return status;
    return ((const bn_fast_plan*)result->state)->half ? S_FALSE : S_OK;
}

static HRESULT run_training(const dml_kernel_args* args) {
    const bn_fast_plan* p = DML_PLAN_STATE(args, bn_fast_plan);
    dml_bn_forward_args a = dml_bn_training_forward_args(args, p->stream);
    PARALLEL_ITEMS(p, p->groups, p->outer * p->inner, training_group(p, args, &a, (uint64_t)item));
    return S_OK;
}

const dml_impl dml_cpu_batch_normalization_training_avx512_nchw = {"batch_normalization_training/avx512/nchw",
                                                                   DML_ISA_AVX512, plan_training_nchw, run_training};
