/* The normalized max pooling problem shared by MAX_POOLING, MAX_POOLING1,
 * MAX_POOLING2 and MAX_POOLING_GRAD (spec max_pooling.md). */
#ifndef DML_OPS_MAX_POOLING_H
#define DML_OPS_MAX_POOLING_H

#include <stdint.h>

#define DML_POOLING_MAX_SPATIAL 3

/* Slots: forward inputs {Input}, outputs {Output, OutputIndices (may be
 * absent)}; gradient inputs {Input, InputGradient}, outputs {OutputGradient}. */
enum { DML_POOL_INPUT = 0, DML_POOL_INPUT_GRADIENT = 1 };
enum { DML_POOL_OUTPUT = 0, DML_POOL_OUTPUT_INDICES = 1 };

/* Spatial parameters in {D, H, W} order, always three: a 4-D problem is the
 * 5-D one with D = 1, window 1, stride 1, dilation 1, no padding. */
typedef struct dml_pooling_params {
    uint32_t spatial_rank; /* 2 or 3, as given */
    uint32_t strides[DML_POOLING_MAX_SPATIAL];
    uint32_t window[DML_POOLING_MAX_SPATIAL];
    uint32_t start_padding[DML_POOLING_MAX_SPATIAL];
    uint32_t end_padding[DML_POOLING_MAX_SPATIAL];
    uint32_t dilations[DML_POOLING_MAX_SPATIAL];
} dml_pooling_params;

#endif
