/* A float64 reference of the batch normalization family, written straight
 * from spec batch_normalization.md §3-§8 (no chunks, no layouts, no tricks):
 * every tensor is a packed row-major array of doubles in logical order. It
 * shares no code with the library. */
#ifndef DML_TESTS_BATCH_NORMALIZATION_REFERENCE_H
#define DML_TESTS_BATCH_NORMALIZATION_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>

/* A fused activation: type is the DML_OPERATOR_ACTIVATION_* value (0: none);
 * p0, p1 its FLOAT fields in struct order (spec §8.1). */
typedef struct bn_ref_activation {
    int type;
    double p0, p1;
} bn_ref_activation;

/* f(x) per the formula of spec §8.1, in float64. */
double bn_ref_activate(const bn_ref_activation* activation, double x);

/* True when x lies within `band` of a point where f jumps (THRESHOLDED_RELU
 * at Alpha, SHRINK at +-Threshold): there one rounding of x may flip the result. */
bool bn_ref_near_jump(const bn_ref_activation* activation, double x, double band);

/* The shape of a problem: the input sizes X and, for the reducing operators,
 * the parameter sizes P (P[i] == 1 or X[i]). */
typedef struct bn_ref_shape {
    uint32_t rank;
    uint32_t input_sizes[8];
    uint32_t parameter_sizes[8];
} bn_ref_shape;

uint64_t bn_ref_count(uint32_t rank, const uint32_t* sizes);

/* BATCH_NORMALIZATION (§4). Each parameter array has its own sizes
 * (broadcast where 1). pre (optional) receives the pre-activation value
 * rounded to FLOAT32, output = f(pre) (§8.2). activation NULL: the exact
 * float64 map without activation or rounding (for finite differences). */
void bn_ref_inference(uint32_t rank, const uint32_t* input_sizes, const double* input, const uint32_t* mean_sizes,
                      const double* mean, const uint32_t* variance_sizes, const double* variance,
                      const uint32_t* scale_sizes, const double* scale, const uint32_t* bias_sizes, const double* bias,
                      double epsilon, const bn_ref_activation* activation, double* pre, double* output);

/* BATCH_NORMALIZATION_TRAINING (§5): biased variance. fused_add may be NULL;
 * pre and activation as for inference (may be NULL). */
void bn_ref_training(const bn_ref_shape* shape, const double* input, const double* scale, const double* bias,
                     const double* fused_add, double epsilon, const bn_ref_activation* activation, double* pre,
                     double* output, double* output_mean, double* output_variance);

/* BATCH_NORMALIZATION_GRAD (§6, training == false) and
 * BATCH_NORMALIZATION_TRAINING_GRAD (§7, training == true). */
void bn_ref_gradient(bool training, const bn_ref_shape* shape, const double* input, const double* input_gradient,
                     const double* mean, const double* variance, const double* scale, double epsilon,
                     double* output_gradient, double* output_scale_gradient, double* output_bias_gradient);

#endif
