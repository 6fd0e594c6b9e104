/* Fused activations (spec batch_normalization.md §8): the deep-copied form
 * an operator keeps, and the element-wise math every backend shares.
 *
 * The math is computed in FLOAT32 on the FLOAT32 pre-activation value
 * (§8.2). Where a formula says max/min, fmaxf/fminf are used (IEEE maxNum: a
 * NaN operand yields the other one); comparisons are written as the formula
 * states them. This header has no dependency on the rest of libdml so that
 * the CUDA backend can include it in device code. */
#ifndef DML_OPS_ACTIVATION_H
#define DML_OPS_ACTIVATION_H

#include <math.h>
#include <stdint.h>

#include "../core/portable.h"

/* Activation types by their DML_OPERATOR_TYPE value; NONE: no fused activation. */
enum {
    DML_ACTIVATION_NONE = 0,
    DML_ACTIVATION_ELU = 35,
    DML_ACTIVATION_HARD_SIGMOID = 37,
    DML_ACTIVATION_IDENTITY = 38,
    DML_ACTIVATION_LEAKY_RELU = 39,
    DML_ACTIVATION_LINEAR = 40,
    DML_ACTIVATION_PARAMETRIC_SOFTPLUS = 43,
    DML_ACTIVATION_RELU = 44,
    DML_ACTIVATION_SCALED_ELU = 45,
    DML_ACTIVATION_SCALED_TANH = 46,
    DML_ACTIVATION_SIGMOID = 47,
    DML_ACTIVATION_SOFTPLUS = 49,
    DML_ACTIVATION_SOFTSIGN = 50,
    DML_ACTIVATION_TANH = 51,
    DML_ACTIVATION_THRESHOLDED_RELU = 52,
    DML_ACTIVATION_SHRINK = 90,
    DML_ACTIVATION_CELU = 128,
    DML_ACTIVATION_GELU = 157
};

/* A validated fused activation, copied by value (no pointers). The two
 * parameters are the struct's FLOAT fields in declaration order:
 * LINEAR, HARD_SIGMOID, SCALED_TANH, PARAMETRIC_SOFTPLUS {Alpha, Beta};
 * SCALED_ELU {Alpha, Gamma}; SHRINK {Bias, Threshold}; LEAKY_RELU,
 * THRESHOLDED_RELU, ELU, CELU {Alpha}; SOFTPLUS {Steepness}; others none. */
typedef struct dml_activation {
    uint32_t type;
    float param0;
    float param1;
} dml_activation;

/* ln(1 + exp(z)) without overflow: max(z, 0) + log1p(exp(-|z|)). */
DML_HOST_DEVICE float dml_softplus_f32(float z) { return fmaxf(z, 0.0f) + log1pf(expf(-fabsf(z))); }

DML_HOST_DEVICE float dml_activation_elu(float x, float alpha) { return x >= 0.0f ? x : alpha * expm1f(x); }

DML_HOST_DEVICE float dml_activation_celu(float x, float alpha) {
    return fmaxf(0.0f, x) + fminf(0.0f, alpha * expm1f(x / alpha));
}

DML_HOST_DEVICE float dml_activation_hard_sigmoid(float x, float alpha, float beta) {
    return fmaxf(0.0f, fminf(alpha * x + beta, 1.0f));
}

DML_HOST_DEVICE float dml_activation_leaky_relu(float x, float alpha) { return x >= 0.0f ? x : alpha * x; }

DML_HOST_DEVICE float dml_activation_linear(float x, float alpha, float beta) { return alpha * x + beta; }

DML_HOST_DEVICE float dml_activation_parametric_softplus(float x, float alpha, float beta) {
    return alpha * dml_softplus_f32(beta * x);
}

DML_HOST_DEVICE float dml_activation_relu(float x) { return fmaxf(0.0f, x); }

/* Gamma * (Alpha * exp(x) - Alpha) for x <= 0, written with expm1. */
DML_HOST_DEVICE float dml_activation_scaled_elu(float x, float alpha, float gamma) {
    return x > 0.0f ? gamma * x : gamma * (alpha * expm1f(x));
}

DML_HOST_DEVICE float dml_activation_scaled_tanh(float x, float alpha, float beta) { return alpha * tanhf(beta * x); }

DML_HOST_DEVICE float dml_activation_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* Steepness >= 1 (validated, decision BN-7). */
DML_HOST_DEVICE float dml_activation_softplus(float x, float steepness) {
    return dml_softplus_f32(steepness * x) / steepness;
}

DML_HOST_DEVICE float dml_activation_softsign(float x) { return x / (1.0f + fabsf(x)); }

DML_HOST_DEVICE float dml_activation_thresholded_relu(float x, float alpha) { return x > alpha ? x : 0.0f; }

DML_HOST_DEVICE float dml_activation_shrink(float x, float bias, float threshold) {
    if (x > threshold) return x - bias;
    if (x < -threshold) return x + bias;
    return 0.0f;
}

DML_HOST_DEVICE float dml_activation_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

/* f(x) for any activation type (NONE and IDENTITY: x). */
DML_HOST_DEVICE float dml_activation_apply(const dml_activation* a, float x) {
    switch (a->type) {
    case DML_ACTIVATION_ELU: return dml_activation_elu(x, a->param0);
    case DML_ACTIVATION_CELU: return dml_activation_celu(x, a->param0);
    case DML_ACTIVATION_HARD_SIGMOID: return dml_activation_hard_sigmoid(x, a->param0, a->param1);
    case DML_ACTIVATION_LEAKY_RELU: return dml_activation_leaky_relu(x, a->param0);
    case DML_ACTIVATION_LINEAR: return dml_activation_linear(x, a->param0, a->param1);
    case DML_ACTIVATION_PARAMETRIC_SOFTPLUS: return dml_activation_parametric_softplus(x, a->param0, a->param1);
    case DML_ACTIVATION_RELU: return dml_activation_relu(x);
    case DML_ACTIVATION_SCALED_ELU: return dml_activation_scaled_elu(x, a->param0, a->param1);
    case DML_ACTIVATION_SCALED_TANH: return dml_activation_scaled_tanh(x, a->param0, a->param1);
    case DML_ACTIVATION_SIGMOID: return dml_activation_sigmoid(x);
    case DML_ACTIVATION_SOFTPLUS: return dml_activation_softplus(x, a->param0);
    case DML_ACTIVATION_SOFTSIGN: return dml_activation_softsign(x);
    case DML_ACTIVATION_TANH: return tanhf(x);
    case DML_ACTIVATION_THRESHOLDED_RELU: return dml_activation_thresholded_relu(x, a->param0);
    case DML_ACTIVATION_SHRINK: return dml_activation_shrink(x, a->param0, a->param1);
    case DML_ACTIVATION_GELU: return dml_activation_gelu(x);
    default: return x; /* NONE, IDENTITY */
    }
}

#endif
