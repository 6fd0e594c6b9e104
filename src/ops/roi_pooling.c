/* Validation of ROI_POOLING (spec roi_pooling.md §1, §2; decisions RP-1,
 * RP-7). SpatialScale and the ROI values are not validated (RP-6). */
#include "roi.h"

#include "ops.h"

#define FLOAT_TYPES (DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_FLOAT32) | DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_FLOAT16))

HRESULT dml_create_roi_pooling(DMLOperator* op, const void* desc) {
    const DML_ROI_POOLING_OPERATOR_DESC* d = desc;
    DML_TRY(dml_op_add_input(op, "InputTensor", d->InputTensor, false));
    DML_TRY(dml_op_add_input(op, "ROITensor", d->ROITensor, false));
    DML_TRY(dml_op_add_output(op, "OutputTensor", d->OutputTensor, false));
    const dml_slot* input = &op->inputs[DML_ROI_POOLING_INPUT];
    const dml_slot* roi = &op->inputs[DML_ROI_POOLING_ROI];
    const dml_slot* output = &op->outputs[DML_ROI_POOLING_OUTPUT];

    DML_TRY(dml_check_rank(op, input, 4, 4));
    DML_TRY(dml_check_rank(op, roi, 4, 4)); /* only {1, 1, R, 5} (RP-7) */
    DML_TRY(dml_check_rank(op, output, 4, 4));
    DML_TRY(dml_check_type(op, input, FLOAT_TYPES));
    DML_TRY(dml_check_same_type(op, roi, input));
    DML_TRY(dml_check_same_type(op, output, input));

    DML_TRY(dml_check_size(op, roi, 0, 1, "ROITensor is {1, 1, NumROIs, 5}"));
    DML_TRY(dml_check_size(op, roi, 1, 1, "ROITensor is {1, 1, NumROIs, 5}"));
    DML_TRY(dml_check_size(op, roi, 3, 5, "each ROI row is [BatchID, x1, y1, x2, y2]"));

    if (d->PooledSize.Width == 0) return dml_fail(E_INVALIDARG, "%s: PooledSize.Width is 0 but must be >= 1", op->name);
    if (d->PooledSize.Height == 0)
        return dml_fail(E_INVALIDARG, "%s: PooledSize.Height is 0 but must be >= 1", op->name);
    DML_TRY(dml_check_size(op, output, 0, roi->tensor.sizes[2], "the ROI count NumROIs = ROITensor.Sizes[2]"));
    DML_TRY(dml_check_size(op, output, 1, input->tensor.sizes[1], "the channel count C of InputTensor"));
    /* By field name (RP-1): Height <-> Sizes[2], Width <-> Sizes[3]. */
    if (output->tensor.sizes[2] != d->PooledSize.Height)
        return dml_fail(E_INVALIDARG, "%s: PooledSize.Height is %u but must equal OutputTensor.Sizes[2] (%u)", op->name,
                        d->PooledSize.Height, output->tensor.sizes[2]);
    if (output->tensor.sizes[3] != d->PooledSize.Width)
        return dml_fail(E_INVALIDARG, "%s: PooledSize.Width is %u but must equal OutputTensor.Sizes[3] (%u)", op->name,
                        d->PooledSize.Width, output->tensor.sizes[3]);

    dml_roi_pooling_params params = {
        .spatial_scale = d->SpatialScale,
        .pooled_height = d->PooledSize.Height,
        .pooled_width = d->PooledSize.Width,
    };
    op->kernel = DML_KERNEL_ROI_POOLING;
    return dml_op_set_params(op, &params, sizeof params);
}
