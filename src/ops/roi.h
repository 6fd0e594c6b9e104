/* The normalized ROI pooling and ROI align problems (spec roi_pooling.md,
 * roi_align.md): slot positions and parameter structs shared by the
 * validation in src/ops/ and every backend. Plain C, no pointers, usable
 * from CUDA. */
#ifndef DML_OPS_ROI_H
#define DML_OPS_ROI_H

#include <stdint.h>

/* ---- ROI_POOLING: inputs {Input, ROI}, outputs {Output} (tensors.md §6.1) ---- */
enum { DML_ROI_POOLING_INPUT = 0, DML_ROI_POOLING_ROI = 1 };
enum { DML_ROI_POOLING_OUTPUT = 0 };

typedef struct dml_roi_pooling_params {
    float spatial_scale;
    uint32_t pooled_height; /* == Output.Sizes[2] */
    uint32_t pooled_width;  /* == Output.Sizes[3] */
} dml_roi_pooling_params;

/* ---- ROI_ALIGN / ROI_ALIGN1: inputs {Input, ROI, BatchIndices}, outputs {Output} ---- */
enum { DML_ROI_ALIGN_INPUT = 0, DML_ROI_ALIGN_ROI = 1, DML_ROI_ALIGN_BATCH_INDICES = 2 };
enum { DML_ROI_ALIGN_OUTPUT = 0 };

/* ---- ROI_ALIGN_GRAD: inputs {Input (opt), InputGradient, ROI, BatchIndices},
 * outputs {OutputGradient (opt), OutputROIGradient (opt)} ---- */
enum {
    DML_ROI_ALIGN_GRAD_INPUT = 0,
    DML_ROI_ALIGN_GRAD_INPUT_GRADIENT = 1,
    DML_ROI_ALIGN_GRAD_ROI = 2,
    DML_ROI_ALIGN_GRAD_BATCH_INDICES = 3
};
enum { DML_ROI_ALIGN_GRAD_OUTPUT_GRADIENT = 0, DML_ROI_ALIGN_GRAD_OUTPUT_ROI_GRADIENT = 1 };

/* ROI_ALIGN1's fields; ROI_ALIGN is mapped onto them (InputPixelOffset 0.5,
 * OutputPixelOffset -0.5, AlignRegionsToCorners FALSE) and ROI_ALIGN_GRAD
 * has no OutOfBoundsInputValue (0 here, unused). */
typedef struct dml_roi_align_params {
    uint32_t reduction_max;        /* 1: DML_REDUCE_FUNCTION_MAX, 0: AVERAGE */
    uint32_t interpolation_linear; /* 1: LINEAR, 0: NEAREST_NEIGHBOR */
    float spatial_scale_x;
    float spatial_scale_y;
    float input_pixel_offset;
    float output_pixel_offset;
    float out_of_bounds_value;
    uint32_t min_samples;   /* 1 <= min_samples <= max_samples */
    uint32_t max_samples;   /* MaximumSamplesPerOutput clamped to the device's limit (RA-16) */
    uint32_t align_corners; /* AlignRegionsToCorners != FALSE */
} dml_roi_align_params;

#endif
