/* BATCH_NORMALIZATION_TRAINING, _GRAD and _TRAINING_GRAD with AVX-512 for
 * packed FLOAT32 tensors in the runs class (packed NCHW-like;
 * batch_normalization_avx2.c classifies the layout; FLOAT16 and the
 * channels class are left to the AVX2 implementations).
 *
 * Work as in the AVX2 runs: one group at a time on one thread, first its
 * statistics (chunk by chunk, dml_bn_group_stats: each chunk read from
 * memory once, then again from L1) or gradient sums, then the element-wise
 * pass, which finds the group's data still in L2.
 *
 * Fewer instructions per element than the AVX2 path (on Zen 4 a 512-bit
 * operation costs two 256-bit ones, so the gain is in the front end and in
 * the conversions avoided, not in wider units). Statistics of a chunk:
 * pass 1 adds the inputs in FLOAT32 spans (DML_BN_SPAN vectors per lane,
 * then FLOAT64), only to find a center c, the chunk's mean rounded to
 * FLOAT32; pass 2 adds d = x - c and d * d in FLOAT32 spans into FLOAT64
 * lanes, and mean = c + S1 / n, m2 = S2 - S1^2 / n in FLOAT64. The error of
 * d is at most 2^-24 |x - c| (relative to the deviation, whatever the
 * offset of the data) and a span's sums are off by at most DML_BN_SPAN *
 * 2^-24 of their terms: the mean within about 5e-7 standard deviations, the
 * variance within about 1e-6 relative while the data's mean is below 10^5
 * standard deviations (c is then far closer to the mean than one standard
 * deviation), inside the spec's tolerances (§9: 1e-4 relative for
 * reductions, 1e-5 + 1e-6 for the outputs). The gradient sums cancel (their
 * result can be far below their terms), so they add exact terms in FLOAT64
 * lanes. The element-wise passes compute the AVX2 ones' formulas in FLOAT64
 * lanes, expanded into FMAs where the coefficients are finite, rounded once
 * to FLOAT32. Work items are
 * groups, each computed in a fixed order: the bits never depend on the
 * thread count. */
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

/* ---- The element-wise passes ---- */

/* FLOAT32 lanes <-> FLOAT64 lanes. A load of 8 lanes widened is one
 * instruction (the load folded into the conversion); 16 lanes loaded at once
 * would need an extract for the high half. */
HOT __m512d load_wide(const float* p, __mmask8 valid) { return _mm512_cvtps_pd(_mm256_maskz_loadu_ps(valid, p)); }
HOT __m512 narrow(__m512d low, __m512d high) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(low)), _mm512_cvtpd_ps(high), 1);
}

/* A pass's lanes at element `t` of a run, the `valid` ones (the others 0). */
typedef __m512 (*run_lanes)(const void* pass, uint64_t t, __mmask16 valid);

/* Stores `length` results of `lanes` at y. Non-temporal stores need 64-byte
 * alignment: the lines before the first aligned one and after the last whole
 * vector are stored plainly (masked). */
HOT void store_run(float* y, uint64_t length, bool stream, run_lanes lanes, const void* pass) {
    uint64_t t = 0;
    if (stream) {
        uint64_t misaligned = (uintptr_t)y % 64 / sizeof(float);
        uint64_t head = misaligned == 0 ? 0 : LANES - misaligned;
        if (head > length) head = length;
        if (head > 0) _mm512_mask_storeu_ps(y, lanes_below(head), lanes(pass, 0, lanes_below(head)));
        for (t = head; t + LANES <= length; t += LANES)
            _mm512_stream_ps(y + t, lanes(pass, t, 0xFFFF));
    } else {
        for (; t + LANES <= length; t += LANES)
            _mm512_storeu_ps(y + t, lanes(pass, t, 0xFFFF));
    }
    if (t < length) _mm512_mask_storeu_ps(y + t, lanes_below(length - t), lanes(pass, t, lanes_below(length - t)));
}

/* TRAINING: one run of the forward pass. */
typedef struct forward_run {
    const float *x, *fused_add; /* at the run's start; fused_add NULL when absent */
    const dml_activation* activation;
    __m512d mean, factor, bias, offset; /* offset = bias - mean * factor */
} forward_run;

/* (x - mean) * factor + bias [+ fused add] in FLOAT64 lanes, for 8 lanes.
 * Expanded, x * factor + offset: one FMA a lane where the AVX2 pass has a
 * subtraction too. The expansion moves the FLOAT64 roundings by 2^-53 of
 * the terms, invisible in the FLOAT32 result unless they cancel to 2^-28 of
 * themselves (the spec allows 1e-5 relative + 1e-6 absolute); it is taken
 * only where factor and offset are finite, since an infinite factor
 * (Variance + Epsilon = 0) would turn the direct form's ±inf into inf - inf. */
HOT __m512d forward8(const forward_run* f, uint64_t t, __mmask8 valid, bool expanded) {
    __m512d x = load_wide(f->x + t, valid);
    __m512d value = expanded ? _mm512_fmadd_pd(x, f->factor, f->offset)
                             : _mm512_fmadd_pd(_mm512_sub_pd(x, f->mean), f->factor, f->bias);
    /* FusedAdd: after Bias, before the rounding (spec §5) */
    return f->fused_add != NULL ? _mm512_add_pd(value, load_wide(f->fused_add + t, valid)) : value;
}

/* act(...) rounded once to FLOAT32 (spec §5, §8.2). */
HOT __m512 forward16(const forward_run* f, uint64_t t, __mmask16 valid, bool expanded) {
    __m512d low = forward8(f, t, (__mmask8)valid, expanded);
    __m512d high = forward8(f, t + 8, (__mmask8)(valid >> 8), expanded);
    __m512 pre = narrow(low, high);
    switch (f->activation->type) {
    case DML_ACTIVATION_NONE:
    case DML_ACTIVATION_IDENTITY: return pre;
    case DML_ACTIVATION_RELU: /* fmaxf(0, x): maxps returns its second operand for a NaN, as fmaxf returns 0 */
        return _mm512_max_ps(pre, _mm512_setzero_ps());
    default: {
        float values[LANES];
        _mm512_storeu_ps(values, pre);
        dml_cpu_bn_apply_activation(f->activation, values, LANES);
        return _mm512_loadu_ps(values);
    }
    }
}

static inline __m512 forward16_expanded(const void* pass, uint64_t t, __mmask16 valid) {
    return forward16(pass, t, valid, true);
}

static inline __m512 forward16_direct(const void* pass, uint64_t t, __mmask16 valid) {
    return forward16(pass, t, valid, false);
}

/* One group: its statistics, its outputs, then the element-wise pass over
 * its runs, the last read first (those are still in L2). */
static void training_group(const bn_fast_plan* p, const dml_kernel_args* args, const dml_bn_forward_args* a,
                           uint64_t g) {
    dml_bn_stats stats = dml_bn_group_stats(p, a->x, g, chunk_stats);
    double values[3];
    dml_cpu_bn_finish_statistics(args, g, stats, values);
    double offset = values[2] - values[0] * values[1];
    bool expanded = isfinite(values[1]) && isfinite(offset);
    forward_run f = {.activation = &a->activation,
                     .mean = _mm512_set1_pd(values[0]),
                     .factor = _mm512_set1_pd(values[1]),
                     .bias = _mm512_set1_pd(values[2]),
                     .offset = _mm512_set1_pd(offset)};
    for (uint64_t o = p->outer; o-- > 0;) {
        uint64_t index = (o * p->groups + g) * p->inner;
        f.x = (const float*)a->x + index;
        f.fused_add = a->fused_add != NULL ? (const float*)a->fused_add + index : NULL;
        if (expanded)
            store_run((float*)a->y + index, p->inner, a->stream, forward16_expanded, &f);
        else
            store_run((float*)a->y + index, p->inner, a->stream, forward16_direct, &f);
    }
}

/* ---- Both GRADs ---- */

/* Group g's sums sdy and sdy * (x - mean) in FLOAT64 lanes, each term exact
 * (FLOAT32 values widened; x - mean exact in FLOAT64), prefetching each
 * run's successor. Unlike the statistics, these sums cancel: a FLOAT32
 * partial sum's rounding, small against the terms, can exceed the spec's
 * 1e-4 of a sum that came out near 0 (spec §9: FLOAT64 on the CPU). */
HOT void add_gradient_terms(const float* x, const float* dy, __mmask8 valid, __m512d mean, __m512d* s, __m512d* c) {
    __m512d dy_wide = load_wide(dy, valid);
    *s = _mm512_add_pd(*s, dy_wide);
    *c = _mm512_fmadd_pd(dy_wide, _mm512_sub_pd(load_wide(x, valid), mean), *c);
}

static void gradient_sums(const bn_fast_plan* p, const dml_bn_backward_args* a, uint64_t g, double mean, double* sdy,
                          double* sdyxc) {
    __m512d s_low = _mm512_setzero_pd(), s_high = s_low, c_low = s_low, c_high = s_low;
    __m512d m = _mm512_set1_pd(mean);
    uint64_t count = p->inner, stride = p->groups * p->inner;
    for (uint64_t o = 0; o < p->outer; o++) {
        const float* x = (const float*)a->x + (o * p->groups + g) * p->inner;
        const float* dy = (const float*)a->dy + (o * p->groups + g) * p->inner;
        uint64_t ahead = o + 1 < p->outer ? stride : 0;
        uint64_t t = 0;
        for (; t + LANES <= count; t += LANES) {
            if (ahead > 0) {
                _mm_prefetch((const char*)(x + t + ahead), _MM_HINT_T0);
                _mm_prefetch((const char*)(dy + t + ahead), _MM_HINT_T0);
            }
            add_gradient_terms(x + t, dy + t, 0xFF, m, &s_low, &c_low);
            add_gradient_terms(x + t + 8, dy + t + 8, 0xFF, m, &s_high, &c_high);
        }
        if (t < count) { /* the run's last 1..15 elements; dy is 0 past them */
            __mmask16 valid = lanes_below(count - t);
            add_gradient_terms(x + t, dy + t, (__mmask8)valid, m, &s_low, &c_low);
            add_gradient_terms(x + t + 8, dy + t + 8, (__mmask8)(valid >> 8), m, &s_high, &c_high);
        }
    }
    *sdy = sum_wide(s_low, s_high);
    *sdyxc = sum_wide(c_low, c_high);
}

/* One run of the backward pass: dx = k * (dy - u - (x - Mean) * w), or
 * k * dy for the constant-statistics GRAD (spec §6, §7), in FLOAT64 lanes
 * rounded once to FLOAT32. Expanded, dx = dy * k + (x * xk + offset) with
 * xk = -k * w and offset = k * (Mean * w - u): two FMAs a lane instead of
 * three subtractions and two products (the FLOAT64 arithmetic was about 1
 * ms of TRAINING_GRAD's 10.7 on the 2-core EPYC; docs/operators/
 * batch_normalization.md, round 12). As in the forward pass, the expansion
 * moves the FLOAT64 roundings by 2^-53 of the terms, and it is taken only
 * where k, xk and offset are finite. */
typedef struct backward_run {
    const float *x, *dy;
    bool training;
    __m512d mean, k, u, w, xk, offset;
} backward_run;

HOT __m512d backward8(const backward_run* b, uint64_t t, __mmask8 valid, bool expanded) {
    __m512d dy = load_wide(b->dy + t, valid);
    if (!b->training) return _mm512_mul_pd(b->k, dy);
    __m512d x = load_wide(b->x + t, valid);
    if (expanded) return _mm512_fmadd_pd(dy, b->k, _mm512_fmadd_pd(x, b->xk, b->offset));
    return _mm512_mul_pd(b->k, _mm512_sub_pd(_mm512_sub_pd(dy, b->u), _mm512_mul_pd(_mm512_sub_pd(x, b->mean), b->w)));
}

static inline __m512 backward16_expanded(const void* pass, uint64_t t, __mmask16 valid) {
    return narrow(backward8(pass, t, (__mmask8)valid, true), backward8(pass, t + 8, (__mmask8)(valid >> 8), true));
}

static inline __m512 backward16_direct(const void* pass, uint64_t t, __mmask16 valid) {
    return narrow(backward8(pass, t, (__mmask8)valid, false), backward8(pass, t + 8, (__mmask8)(valid >> 8), false));
}

/* One group: its sums, its two parameter gradients, then the element-wise
 * pass over its runs, the last read first (those are still in L2). */
static void gradient_group(const bn_fast_plan* p, const dml_kernel_args* args, const dml_bn_backward_args* a,
                           uint64_t g) {
    const DMLOperator* op = args->op;
    double mean = dml_cpu_bn_load_parameter(&op->inputs[DML_BN_GRAD_MEAN].tensor, args->inputs[DML_BN_GRAD_MEAN], g);
    double sdy, sdyxc, values[3];
    gradient_sums(p, a, g, mean, &sdy, &sdyxc);
    dml_cpu_bn_finish_gradient(args, g, sdy, sdyxc, a->training, values);
    double k = values[0], u = values[1], w = values[2], xk = -k * w, offset = k * (mean * w - u);
    bool expanded = isfinite(k) && isfinite(xk) && isfinite(offset);
    backward_run b = {.training = a->training,
                      .mean = _mm512_set1_pd(mean),
                      .k = _mm512_set1_pd(k),
                      .u = _mm512_set1_pd(u),
                      .w = _mm512_set1_pd(w),
                      .xk = _mm512_set1_pd(xk),
                      .offset = _mm512_set1_pd(offset)};
    for (uint64_t o = p->outer; o-- > 0;) {
        uint64_t index = (o * p->groups + g) * p->inner;
        b.x = (const float*)a->x + index;
        b.dy = (const float*)a->dy + index;
        if (expanded)
            store_run((float*)a->dx + index, p->inner, a->stream, backward16_expanded, &b);
        else
            store_run((float*)a->dx + index, p->inner, a->stream, backward16_direct, &b);
    }
}

/* ---- Plans and run steps ---- */

/* The runs-class plan of the AVX2 file, for FLOAT32 tensors only. */
static HRESULT single_precision(HRESULT status, const dml_plan* result) {
    if (status != S_OK) return status;
    return ((const bn_fast_plan*)result->state)->half ? S_FALSE : S_OK;
}

static HRESULT plan_training_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                                  dml_plan* result) {
    (void)flags;
    return single_precision(dml_cpu_bn_plan_training_runs(op, device, result), result);
}

static HRESULT plan_gradient_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                                  dml_plan* result) {
    (void)flags;
    return single_precision(dml_cpu_bn_plan_gradient_runs(op, device, result), result);
}

static HRESULT run_training(const dml_kernel_args* args) {
    const bn_fast_plan* p = DML_PLAN_STATE(args, bn_fast_plan);
    dml_bn_forward_args a = dml_bn_training_forward_args(args, p->stream);
    PARALLEL_ITEMS(p, p->groups, p->outer * p->inner, training_group(p, args, &a, (uint64_t)item));
    return S_OK;
}

static HRESULT run_gradient(const dml_kernel_args* args, bool training) {
    const bn_fast_plan* p = DML_PLAN_STATE(args, bn_fast_plan);
    dml_bn_backward_args a = dml_bn_backward_args_of(args, training, p->stream);
    PARALLEL_ITEMS(p, p->groups, p->outer * p->inner, gradient_group(p, args, &a, (uint64_t)item));
    return S_OK;
}

static HRESULT run_gradient_constant_statistics(const dml_kernel_args* args) { return run_gradient(args, false); }

static HRESULT run_gradient_batch_statistics(const dml_kernel_args* args) { return run_gradient(args, true); }

const dml_impl dml_cpu_batch_normalization_grad_avx512_nchw = {"batch_normalization_grad/avx512/nchw", DML_ISA_AVX512,
                                                               plan_gradient_nchw, run_gradient_constant_statistics};
const dml_impl dml_cpu_batch_normalization_training_grad_avx512_nchw = {
    "batch_normalization_training_grad/avx512/nchw", DML_ISA_AVX512, plan_gradient_nchw, run_gradient_batch_statistics};
const dml_impl dml_cpu_batch_normalization_training_avx512_nchw = {"batch_normalization_training/avx512/nchw",
                                                                   DML_ISA_AVX512, plan_training_nchw, run_training};
