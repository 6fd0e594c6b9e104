/* The normalized batch normalization problem shared by BATCH_NORMALIZATION,
 * BATCH_NORMALIZATION_TRAINING, BATCH_NORMALIZATION_GRAD and
 * BATCH_NORMALIZATION_TRAINING_GRAD (spec batch_normalization.md). */
#ifndef DML_OPS_BATCH_NORMALIZATION_H
#define DML_OPS_BATCH_NORMALIZATION_H

#include <stdint.h>

#include "activation.h"

/* Slots, in DirectML's binding order (spec §1). */
enum { /* BATCH_NORMALIZATION inputs; its only output is DML_BN_OUTPUT */
       DML_BN_INPUT = 0,
       DML_BN_MEAN = 1,
       DML_BN_VARIANCE = 2,
       DML_BN_SCALE = 3,
       DML_BN_BIAS = 4
};
enum { DML_BN_OUTPUT = 0 };

enum { /* BATCH_NORMALIZATION_TRAINING */
       DML_BN_TRAINING_INPUT = 0,
       DML_BN_TRAINING_SCALE = 1,
       DML_BN_TRAINING_BIAS = 2,
       DML_BN_TRAINING_FUSED_ADD = 3 /* absent: NONE binding */
};
enum { DML_BN_TRAINING_OUTPUT = 0, DML_BN_TRAINING_OUTPUT_MEAN = 1, DML_BN_TRAINING_OUTPUT_VARIANCE = 2 };

enum { /* BATCH_NORMALIZATION_GRAD and BATCH_NORMALIZATION_TRAINING_GRAD */
       DML_BN_GRAD_INPUT = 0,
       DML_BN_GRAD_INPUT_GRADIENT = 1,
       DML_BN_GRAD_MEAN = 2,
       DML_BN_GRAD_VARIANCE = 3,
       DML_BN_GRAD_SCALE = 4
};
enum { DML_BN_GRAD_OUTPUT_GRADIENT = 0, DML_BN_GRAD_OUTPUT_SCALE_GRADIENT = 1, DML_BN_GRAD_OUTPUT_BIAS_GRADIENT = 2 };

/* Everything a kernel needs beyond the slots' tensors. Input sizes X are
 * the InputTensor's; the parameter tensors keep their own sizes in their
 * slots (inference: each may broadcast differently, spec §4). */
typedef struct dml_batch_norm_params {
    float epsilon;
    dml_activation activation; /* type DML_ACTIVATION_NONE when absent; never for the GRADs */
    /* TRAINING and both GRADs (spec §3): bit i set when axis i is reduced
     * (the parameter size is 1 there); 0 for inference, which reduces nothing. */
    uint32_t reduced_axes;
    uint64_t group_count; /* J: parameter elements (inference: input elements) */
    uint64_t group_size;  /* M = prod of X[i] over reduced axes (inference: 1) */
} dml_batch_norm_params;

#endif
