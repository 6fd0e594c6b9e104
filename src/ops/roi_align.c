/* Validation of ROI_ALIGN, ROI_ALIGN1 and ROI_ALIGN_GRAD (spec roi_align.md
 * §1-§3). ROI_ALIGN is ROI_ALIGN1 with InputPixelOffset 0.5,
 * OutputPixelOffset -0.5 and AlignRegionsToCorners FALSE; all three share one
 * parameter struct (roi.h). */
#include "roi.h"

#include "ops.h"

#define FLOAT_TYPES (DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_FLOAT32) | DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_FLOAT16))

/* The scalar fields of the three descriptions, in ROI_ALIGN1's terms. */
typedef struct roi_align_fields {
    DML_REDUCE_FUNCTION reduction;
    DML_INTERPOLATION_MODE interpolation;
    FLOAT spatial_scale_x, spatial_scale_y;
    FLOAT input_pixel_offset, output_pixel_offset;
    FLOAT out_of_bounds_value;
    UINT min_samples, max_samples;
    BOOL align_corners;
} roi_align_fields;

/* Rules 3 and 4 (and RA-7), the device's sample limit (RA-16), then the
 * normalized parameters. */
static HRESULT read_params(const DMLOperator* op, const roi_align_fields* f, dml_roi_align_params* params) {
    if (f->reduction != DML_REDUCE_FUNCTION_AVERAGE && f->reduction != DML_REDUCE_FUNCTION_MAX)
        return dml_fail(E_INVALIDARG,
                        "%s: ReductionFunction is %u but must be DML_REDUCE_FUNCTION_AVERAGE (2) or "
                        "DML_REDUCE_FUNCTION_MAX (7)",
                        op->name, (unsigned)f->reduction);
    if (f->interpolation != DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR &&
        f->interpolation != DML_INTERPOLATION_MODE_LINEAR)
        return dml_fail(E_INVALIDARG,
                        "%s: InterpolationMode is %u but must be "
                        "DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR (0) or DML_INTERPOLATION_MODE_LINEAR (1)",
                        op->name, (unsigned)f->interpolation);
    if (f->min_samples == 0)
        return dml_fail(E_INVALIDARG, "%s: MinimumSamplesPerOutput is 0 but must be >= 1", op->name);
    if (f->min_samples > f->max_samples)
        return dml_fail(E_INVALIDARG, "%s: MinimumSamplesPerOutput is %u but must be <= MaximumSamplesPerOutput (%u)",
                        op->name, f->min_samples, f->max_samples);
    /* RA-16: a description may not demand more samples per axis than the
     * device allows; larger data-driven counts are clamped to the limit. */
    uint32_t limit = op->device->roi_align_samples_per_axis;
    if (f->min_samples > limit)
        return dml_fail(E_INVALIDARG,
                        "%s: MinimumSamplesPerOutput is %u but must be <= %u, the device's limit of samples per "
                        "output element along each axis (DML_DEVICE_DESC.RoiAlignMaxSamplesPerAxis)",
                        op->name, f->min_samples, limit);
    *params = (dml_roi_align_params){
        .reduction_max = f->reduction == DML_REDUCE_FUNCTION_MAX,
        .interpolation_linear = f->interpolation == DML_INTERPOLATION_MODE_LINEAR,
        .spatial_scale_x = f->spatial_scale_x,
        .spatial_scale_y = f->spatial_scale_y,
        .input_pixel_offset = f->input_pixel_offset,
        .output_pixel_offset = f->output_pixel_offset,
        .out_of_bounds_value = f->out_of_bounds_value,
        .min_samples = f->min_samples,
        .max_samples = f->max_samples < limit ? f->max_samples : limit,
        .align_corners = f->align_corners != 0,
    };
    return S_OK;
}

/* ROITensor is {R,4}, {1,R,4} or {1,1,R,4}; returns R (rule 2). */
static HRESULT check_roi_shape(const DMLOperator* op, const dml_slot* roi, uint32_t* roi_count) {
    DML_TRY(dml_check_rank(op, roi, 2, 4));
    uint32_t rank = roi->tensor.rank;
    for (uint32_t i = 0; i + 2 < rank; i++)
        DML_TRY(dml_check_size(op, roi, i, 1, "ROITensor is {R,4}, {1,R,4} or {1,1,R,4}"));
    DML_TRY(dml_check_size(op, roi, rank - 1, 4, "each ROI row is [x1, y1, x2, y2]"));
    *roi_count = roi->tensor.sizes[rank - 2];
    return S_OK;
}

/* BatchIndicesTensor is {R}, {1,R}, {1,1,R} or {1,1,1,R} (rules 1, 2). */
static HRESULT check_batch_indices(const DMLOperator* op, const dml_slot* batch_indices, uint32_t roi_count,
                                   uint32_t allowed_types) {
    DML_TRY(dml_check_rank(op, batch_indices, 1, 4));
    DML_TRY(dml_check_type(op, batch_indices, allowed_types));
    uint32_t rank = batch_indices->tensor.rank;
    for (uint32_t i = 0; i + 1 < rank; i++)
        DML_TRY(dml_check_size(op, batch_indices, i, 1, "BatchIndicesTensor is {R}, {1,R}, {1,1,R} or {1,1,1,R}"));
    return dml_check_size(op, batch_indices, rank - 1, roi_count, "the ROI count R of ROITensor");
}

HRESULT dml_create_roi_align(DMLOperator* op, const void* desc) {
    const DML_TENSOR_DESC *input_desc, *roi_desc, *batch_desc, *output_desc;
    roi_align_fields f;
    if (op->type == DML_OPERATOR_ROI_ALIGN) {
        const DML_ROI_ALIGN_OPERATOR_DESC* d = desc;
        input_desc = d->InputTensor;
        roi_desc = d->ROITensor;
        batch_desc = d->BatchIndicesTensor;
        output_desc = d->OutputTensor;
        /* The pixel-centre model of ROI_ALIGN (spec §1). */
        f = (roi_align_fields){.reduction = d->ReductionFunction,
                               .interpolation = d->InterpolationMode,
                               .spatial_scale_x = d->SpatialScaleX,
                               .spatial_scale_y = d->SpatialScaleY,
                               .input_pixel_offset = 0.5f,
                               .output_pixel_offset = -0.5f,
                               .out_of_bounds_value = d->OutOfBoundsInputValue,
                               .min_samples = d->MinimumSamplesPerOutput,
                               .max_samples = d->MaximumSamplesPerOutput,
                               .align_corners = 0};
    } else {
        const DML_ROI_ALIGN1_OPERATOR_DESC* d = desc;
        input_desc = d->InputTensor;
        roi_desc = d->ROITensor;
        batch_desc = d->BatchIndicesTensor;
        output_desc = d->OutputTensor;
        f = (roi_align_fields){.reduction = d->ReductionFunction,
                               .interpolation = d->InterpolationMode,
                               .spatial_scale_x = d->SpatialScaleX,
                               .spatial_scale_y = d->SpatialScaleY,
                               .input_pixel_offset = d->InputPixelOffset,
                               .output_pixel_offset = d->OutputPixelOffset,
                               .out_of_bounds_value = d->OutOfBoundsInputValue,
                               .min_samples = d->MinimumSamplesPerOutput,
                               .max_samples = d->MaximumSamplesPerOutput,
                               .align_corners = d->AlignRegionsToCorners};
    }
    DML_TRY(dml_op_add_input(op, "InputTensor", input_desc, false));
    DML_TRY(dml_op_add_input(op, "ROITensor", roi_desc, false));
    DML_TRY(dml_op_add_input(op, "BatchIndicesTensor", batch_desc, false));
    DML_TRY(dml_op_add_output(op, "OutputTensor", output_desc, false));
    const dml_slot* input = &op->inputs[DML_ROI_ALIGN_INPUT];
    const dml_slot* roi = &op->inputs[DML_ROI_ALIGN_ROI];
    const dml_slot* batch_indices = &op->inputs[DML_ROI_ALIGN_BATCH_INDICES];
    const dml_slot* output = &op->outputs[DML_ROI_ALIGN_OUTPUT];

    /* Rule 1: shapes and types at the device's feature level. */
    DML_TRY(dml_check_rank(op, input, 4, 4));
    DML_TRY(dml_check_type(op, input, FLOAT_TYPES));
    DML_TRY(dml_check_same_type(op, roi, input));
    DML_TRY(dml_check_rank(op, output, 4, 4));
    DML_TRY(dml_check_same_type(op, output, input));
    uint32_t index_types = DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_UINT32);
    if (dml_op_level_at_least(op, DML_FEATURE_LEVEL_5_0)) index_types |= DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_UINT64);

    /* Rule 2: one R everywhere, C from the input. */
    uint32_t roi_count = 0;
    DML_TRY(check_roi_shape(op, roi, &roi_count));
    DML_TRY(check_batch_indices(op, batch_indices, roi_count, index_types));
    DML_TRY(dml_check_size(op, output, 0, roi_count, "the ROI count R of ROITensor"));
    DML_TRY(dml_check_size(op, output, 1, input->tensor.sizes[1], "the channel count C of InputTensor"));

    dml_roi_align_params params;
    DML_TRY(read_params(op, &f, &params));
    op->kernel = DML_KERNEL_ROI_ALIGN;
    return dml_op_set_params(op, &params, sizeof params);
}

HRESULT dml_create_roi_align_grad(DMLOperator* op, const void* desc) {
    const DML_ROI_ALIGN_GRAD_OPERATOR_DESC* d = desc;
    DML_TRY(dml_op_add_input(op, "InputTensor", d->InputTensor, true));
    DML_TRY(dml_op_add_input(op, "InputGradientTensor", d->InputGradientTensor, false));
    DML_TRY(dml_op_add_input(op, "ROITensor", d->ROITensor, false));
    DML_TRY(dml_op_add_input(op, "BatchIndicesTensor", d->BatchIndicesTensor, false));
    DML_TRY(dml_op_add_output(op, "OutputGradientTensor", d->OutputGradientTensor, true));
    DML_TRY(dml_op_add_output(op, "OutputROIGradientTensor", d->OutputROIGradientTensor, true));
    const dml_slot* input = &op->inputs[DML_ROI_ALIGN_GRAD_INPUT];
    const dml_slot* input_gradient = &op->inputs[DML_ROI_ALIGN_GRAD_INPUT_GRADIENT];
    const dml_slot* roi = &op->inputs[DML_ROI_ALIGN_GRAD_ROI];
    const dml_slot* batch_indices = &op->inputs[DML_ROI_ALIGN_GRAD_BATCH_INDICES];
    const dml_slot* output_gradient = &op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_GRADIENT];
    const dml_slot* roi_gradient = &op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_ROI_GRADIENT];
    bool has_input = input->tensor.present, has_output_gradient = output_gradient->tensor.present;
    bool has_roi_gradient = roi_gradient->tensor.present;

    /* Rules 5 and 6: what must be present. */
    if (!has_output_gradient && !has_roi_gradient)
        return dml_fail(E_INVALIDARG,
                        "%s: OutputGradientTensor and OutputROIGradientTensor are both NULL but at "
                        "least one is required",
                        op->name);
    if (!has_input && has_roi_gradient)
        return dml_fail(E_INVALIDARG,
                        "%s: InputTensor is NULL but is required when OutputROIGradientTensor is "
                        "present",
                        op->name);
    if (!has_input && d->ReductionFunction == DML_REDUCE_FUNCTION_MAX)
        return dml_fail(E_INVALIDARG,
                        "%s: InputTensor is NULL but is required when ReductionFunction is "
                        "DML_REDUCE_FUNCTION_MAX",
                        op->name);

    /* Rules 1 and 9: shapes and one DataType (that of InputGradientTensor). */
    DML_TRY(dml_check_rank(op, input_gradient, 4, 4));
    DML_TRY(dml_check_type(op, input_gradient, FLOAT_TYPES));
    DML_TRY(dml_check_same_type(op, roi, input_gradient));
    uint32_t channels = input_gradient->tensor.sizes[1];
    if (has_input) {
        DML_TRY(dml_check_rank(op, input, 4, 4));
        DML_TRY(dml_check_same_type(op, input, input_gradient));
        DML_TRY(dml_check_size(op, input, 1, channels, "the channel count C of InputGradientTensor"));
    }
    if (has_output_gradient) {
        DML_TRY(dml_check_rank(op, output_gradient, 4, 4));
        DML_TRY(dml_check_same_type(op, output_gradient, input_gradient));
        /* Rule 7. */
        if (has_input) DML_TRY(dml_check_same_sizes(op, output_gradient, input));
        DML_TRY(dml_check_size(op, output_gradient, 1, channels, "the channel count C of InputGradientTensor"));
    }

    /* Rule 2: one R everywhere; the gradient's batch indices are UINT32 only. */
    uint32_t roi_count = 0;
    DML_TRY(check_roi_shape(op, roi, &roi_count));
    DML_TRY(check_batch_indices(op, batch_indices, roi_count, DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_UINT32)));
    DML_TRY(dml_check_size(op, input_gradient, 0, roi_count, "the ROI count R of ROITensor"));
    if (has_roi_gradient) {
        /* Rule 8. */
        DML_TRY(dml_check_same_type(op, roi_gradient, input_gradient));
        DML_TRY(dml_check_same_sizes(op, roi_gradient, roi));
    }

    /* No OutOfBoundsInputValue: a constant has no gradient. */
    roi_align_fields f = {.reduction = d->ReductionFunction,
                          .interpolation = d->InterpolationMode,
                          .spatial_scale_x = d->SpatialScaleX,
                          .spatial_scale_y = d->SpatialScaleY,
                          .input_pixel_offset = d->InputPixelOffset,
                          .output_pixel_offset = d->OutputPixelOffset,
                          .min_samples = d->MinimumSamplesPerOutput,
                          .max_samples = d->MaximumSamplesPerOutput,
                          .align_corners = d->AlignRegionsToCorners};
    dml_roi_align_params params;
    DML_TRY(read_params(op, &f, &params));
    op->kernel = DML_KERNEL_ROI_ALIGN_GRAD;
    return dml_op_set_params(op, &params, sizeof params);
}
