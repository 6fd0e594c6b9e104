/* Float64 reference of spec batch_normalization.md; see the header. */
#include "batch_normalization_reference.h"

#include <dml/dml.h>
#include <math.h>
#include <stdlib.h>

double bn_ref_activate(const bn_ref_activation* a, double x) {
    double alpha = a->p0, beta = a->p1;
    switch (a->type) {
    case DML_OPERATOR_ACTIVATION_LINEAR: return alpha * x + beta;
    case DML_OPERATOR_ACTIVATION_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case DML_OPERATOR_ACTIVATION_HARD_SIGMOID: return fmax(0.0, fmin(alpha * x + beta, 1.0));
    case DML_OPERATOR_ACTIVATION_TANH: return tanh(x);
    case DML_OPERATOR_ACTIVATION_SCALED_TANH: return alpha * tanh(beta * x);
    case DML_OPERATOR_ACTIVATION_RELU: return fmax(0.0, x);
    case DML_OPERATOR_ACTIVATION_LEAKY_RELU: return x >= 0 ? x : alpha * x;
    case DML_OPERATOR_ACTIVATION_THRESHOLDED_RELU: return x > alpha ? x : 0.0;
    case DML_OPERATOR_ACTIVATION_ELU: return x >= 0 ? x : alpha * (exp(x) - 1.0);
    case DML_OPERATOR_ACTIVATION_CELU: return fmax(0.0, x) + fmin(0.0, alpha * (exp(x / alpha) - 1.0));
    case DML_OPERATOR_ACTIVATION_SCALED_ELU: /* Alpha, Gamma */
        return x > 0 ? beta * x : beta * (alpha * exp(x) - alpha);
    case DML_OPERATOR_ACTIVATION_SOFTPLUS: return log(1.0 + exp(alpha * x)) / alpha; /* Steepness */
    case DML_OPERATOR_ACTIVATION_PARAMETRIC_SOFTPLUS: return alpha * log(1.0 + exp(beta * x));
    case DML_OPERATOR_ACTIVATION_SOFTSIGN: return x / (1.0 + fabs(x));
    case DML_OPERATOR_ACTIVATION_SHRINK: /* Bias, Threshold */
        if (x > beta) return x - alpha;
        if (x < -beta) return x + alpha;
        return 0.0;
    case DML_OPERATOR_ACTIVATION_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    default: return x; /* none, IDENTITY */
    }
}

bool bn_ref_near_jump(const bn_ref_activation* a, double x, double band) {
    switch (a->type) {
    case DML_OPERATOR_ACTIVATION_THRESHOLDED_RELU: return fabs(x - a->p0) <= band;
    case DML_OPERATOR_ACTIVATION_SHRINK: return fabs(x - a->p1) <= band || fabs(x + a->p1) <= band;
    default: return false;
    }
}

uint64_t bn_ref_count(uint32_t rank, const uint32_t* sizes) {
    uint64_t count = 1;
    for (uint32_t i = 0; i < rank; i++)
        count *= sizes[i];
    return count;
}

/* Index into a parameter array of sizes `sizes` for the input element with
 * coordinates coords: broadcast (coordinate 0) where the size is 1 (§3). */
static uint64_t parameter_index(uint32_t rank, const uint32_t* sizes, const uint32_t* coords) {
    uint64_t index = 0;
    for (uint32_t i = 0; i < rank; i++)
        index = index * sizes[i] + (sizes[i] == 1 ? 0 : coords[i]);
    return index;
}

static void coordinates(uint32_t rank, const uint32_t* sizes, uint64_t index, uint32_t* coords) {
    for (uint32_t i = rank; i-- > 0;) {
        coords[i] = (uint32_t)(index % sizes[i]);
        index /= sizes[i];
    }
}

/* The pre-activation value is FLOAT32 (§8.2): round, then activate. */
static double activate_rounded(const bn_ref_activation* activation, double value, double* pre) {
    if (activation == NULL) return value; /* the exact map */
    double rounded = (double)(float)value;
    if (pre) *pre = rounded;
    return bn_ref_activate(activation, rounded);
}

void bn_ref_inference(uint32_t rank, const uint32_t* input_sizes, const double* input, const uint32_t* mean_sizes,
                      const double* mean, const uint32_t* variance_sizes, const double* variance,
                      const uint32_t* scale_sizes, const double* scale, const uint32_t* bias_sizes, const double* bias,
                      double epsilon, const bn_ref_activation* activation, double* pre, double* output) {
    uint64_t count = bn_ref_count(rank, input_sizes);
    for (uint64_t e = 0; e < count; e++) {
        uint32_t c[8];
        coordinates(rank, input_sizes, e, c);
        double m = mean[parameter_index(rank, mean_sizes, c)];
        double v = variance[parameter_index(rank, variance_sizes, c)];
        double s = scale[parameter_index(rank, scale_sizes, c)];
        double b = bias[parameter_index(rank, bias_sizes, c)];
        double value = s * (input[e] - m) / sqrt(v + epsilon) + b;
        output[e] = activate_rounded(activation, value, pre ? &pre[e] : NULL);
    }
}

/* M = product of X[i] over the reduced axes (P[i] == 1). */
static uint64_t group_size(const bn_ref_shape* shape) {
    uint64_t m = 1;
    for (uint32_t i = 0; i < shape->rank; i++)
        if (shape->parameter_sizes[i] == 1) m *= shape->input_sizes[i];
    return m;
}

/* The group (parameter element) of each input element. */
static uint64_t* group_of_each_element(const bn_ref_shape* shape, uint64_t count) {
    uint64_t* group = malloc(count * sizeof *group);
    for (uint64_t e = 0; e < count; e++) {
        uint32_t c[8];
        coordinates(shape->rank, shape->input_sizes, e, c);
        group[e] = parameter_index(shape->rank, shape->parameter_sizes, c);
    }
    return group;
}

void bn_ref_training(const bn_ref_shape* shape, const double* input, const double* scale, const double* bias,
                     const double* fused_add, double epsilon, const bn_ref_activation* activation, double* pre,
                     double* output, double* output_mean, double* output_variance) {
    uint64_t count = bn_ref_count(shape->rank, shape->input_sizes);
    uint64_t groups = bn_ref_count(shape->rank, shape->parameter_sizes);
    double m = (double)group_size(shape);
    uint64_t* group = group_of_each_element(shape, count);
    long double* sum = calloc(groups, sizeof *sum);
    long double* squares = calloc(groups, sizeof *squares);
    /* Two passes: the mean, then the centered sum of squares; divisor M (BN-1). */
    for (uint64_t e = 0; e < count; e++)
        sum[group[e]] += input[e];
    for (uint64_t j = 0; j < groups; j++)
        output_mean[j] = (double)(sum[j] / m);
    for (uint64_t e = 0; e < count; e++) {
        long double d = (long double)input[e] - output_mean[group[e]];
        squares[group[e]] += d * d;
    }
    for (uint64_t j = 0; j < groups; j++)
        output_variance[j] = (double)(squares[j] / m);
    for (uint64_t e = 0; e < count; e++) {
        uint64_t j = group[e];
        double value = scale[j] * (input[e] - output_mean[j]) / sqrt(output_variance[j] + epsilon) + bias[j];
        if (fused_add) value += fused_add[e];
        output[e] = activate_rounded(activation, value, pre ? &pre[e] : NULL);
    }
    free(group);
    free(sum);
    free(squares);
}

void bn_ref_gradient(bool training, const bn_ref_shape* shape, const double* input, const double* input_gradient,
                     const double* mean, const double* variance, const double* scale, double epsilon,
                     double* output_gradient, double* output_scale_gradient, double* output_bias_gradient) {
    uint64_t count = bn_ref_count(shape->rank, shape->input_sizes);
    uint64_t groups = bn_ref_count(shape->rank, shape->parameter_sizes);
    double m = (double)group_size(shape);
    uint64_t* group = group_of_each_element(shape, count);
    long double* sdy = calloc(groups, sizeof *sdy);
    long double* sdyxc = calloc(groups, sizeof *sdyxc);
    for (uint64_t e = 0; e < count; e++) {
        uint64_t j = group[e];
        sdy[j] += input_gradient[e];
        sdyxc[j] += (long double)input_gradient[e] * (input[e] - mean[j]);
    }
    for (uint64_t j = 0; j < groups; j++) {
        double inv = 1.0 / sqrt(variance[j] + epsilon);
        output_bias_gradient[j] = (double)sdy[j];
        output_scale_gradient[j] = (double)sdyxc[j] * inv;
    }
    for (uint64_t e = 0; e < count; e++) {
        uint64_t j = group[e];
        double inv = 1.0 / sqrt(variance[j] + epsilon);
        if (!training) { /* §6: Mean and Variance are constants */
            output_gradient[e] = input_gradient[e] * scale[j] * inv;
            continue;
        }
        /* §7 */
        output_gradient[e] = scale[j] * inv *
                             (input_gradient[e] - (double)sdy[j] / m -
                              (input[e] - mean[j]) * ((double)sdyxc[j] / m) / (variance[j] + epsilon));
    }
    free(group);
    free(sdy);
    free(sdyxc);
}
