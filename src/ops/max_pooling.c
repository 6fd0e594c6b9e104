/* Validation of the max pooling family (spec max_pooling.md §2, §3). */
#include "max_pooling.h"

#include <string.h>

#include "ops.h"

/* The four descriptions mapped onto MAX_POOLING2's fields. */
typedef struct pooling_desc {
    const DML_TENSOR_DESC* input;
    const DML_TENSOR_DESC* second_input; /* GRAD: InputGradientTensor */
    const DML_TENSOR_DESC* output;
    const DML_TENSOR_DESC* indices;
    UINT dimension_count;
    const UINT* strides;
    const UINT* window;
    const UINT* start_padding;
    const UINT* end_padding;
    const UINT* dilations; /* NULL: all 1 */
} pooling_desc;

static pooling_desc normalize_desc(DML_OPERATOR_TYPE type, const void* desc) {
    pooling_desc d = {0};
    switch (type) {
    case DML_OPERATOR_MAX_POOLING: {
        const DML_MAX_POOLING_OPERATOR_DESC* p = desc;
        d = (pooling_desc){p->InputTensor, NULL,          p->OutputTensor, NULL,          p->DimensionCount,
                           p->Strides,     p->WindowSize, p->StartPadding, p->EndPadding, NULL};
        break;
    }
    case DML_OPERATOR_MAX_POOLING1: {
        const DML_MAX_POOLING1_OPERATOR_DESC* p = desc;
        d = (pooling_desc){p->InputTensor, NULL,          p->OutputTensor, p->OutputIndicesTensor, p->DimensionCount,
                           p->Strides,     p->WindowSize, p->StartPadding, p->EndPadding,          NULL};
        break;
    }
    case DML_OPERATOR_MAX_POOLING2: {
        const DML_MAX_POOLING2_OPERATOR_DESC* p = desc;
        d = (pooling_desc){p->InputTensor, NULL,          p->OutputTensor, p->OutputIndicesTensor, p->DimensionCount,
                           p->Strides,     p->WindowSize, p->StartPadding, p->EndPadding,          p->Dilations};
        break;
    }
    default: { /* DML_OPERATOR_MAX_POOLING_GRAD */
        const DML_MAX_POOLING_GRAD_OPERATOR_DESC* p = desc;
        d = (pooling_desc){
            p->InputTensor, p->InputGradientTensor, p->OutputGradientTensor, NULL,          p->DimensionCount,
            p->Strides,     p->WindowSize,          p->StartPadding,         p->EndPadding, p->Dilations};
        break;
    }
    }
    return d;
}

/* Value types at the device's feature level (spec §2 table). */
static uint32_t value_types(const DMLOperator* op) {
    uint32_t types = DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_FLOAT32) | DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_FLOAT16);
    if (op->type == DML_OPERATOR_MAX_POOLING_GRAD) return types;
    if (dml_op_level_at_least(op, DML_FEATURE_LEVEL_3_0))
        types |= DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_INT8) | DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_UINT8);
    if (dml_op_level_at_least(op, DML_FEATURE_LEVEL_5_0))
        types |= DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_INT64) | DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_INT32) |
                 DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_INT16) | DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_UINT64) |
                 DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_UINT32) | DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_UINT16);
    return types;
}

static uint32_t index_types(const DMLOperator* op) {
    uint32_t types = DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_UINT32);
    if (dml_op_level_at_least(op, DML_FEATURE_LEVEL_5_0)) types |= DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_UINT64);
    return types;
}

/* Checks the per-dimension arrays and copies them in {D, H, W} order. */
static HRESULT read_spatial_params(const DMLOperator* op, const pooling_desc* d, dml_pooling_params* params) {
    uint32_t k = d->dimension_count;
    DML_TRY(dml_check_array(op, "Strides", d->strides, k));
    DML_TRY(dml_check_array(op, "WindowSize", d->window, k));
    DML_TRY(dml_check_array(op, "StartPadding", d->start_padding, k));
    DML_TRY(dml_check_array(op, "EndPadding", d->end_padding, k));
    if (op->type == DML_OPERATOR_MAX_POOLING2 || op->type == DML_OPERATOR_MAX_POOLING_GRAD)
        DML_TRY(dml_check_array(op, "Dilations", d->dilations, k));

    memset(params, 0, sizeof *params);
    params->spatial_rank = k;
    uint32_t skip = DML_POOLING_MAX_SPATIAL - k; /* leading unit dimensions of a 2-D problem */
    for (uint32_t i = 0; i < DML_POOLING_MAX_SPATIAL; i++) {
        params->strides[i] = params->window[i] = params->dilations[i] = 1;
    }
    for (uint32_t i = 0; i < k; i++) {
        uint32_t dilation = d->dilations ? d->dilations[i] : 1;
        if (d->strides[i] == 0) return dml_fail(E_INVALIDARG, "%s: Strides[%u] is 0 but must be >= 1", op->name, i);
        if (d->window[i] == 0) return dml_fail(E_INVALIDARG, "%s: WindowSize[%u] is 0 but must be >= 1", op->name, i);
        if (dilation == 0) return dml_fail(E_INVALIDARG, "%s: Dilations[%u] is 0 but must be >= 1", op->name, i);
        params->strides[skip + i] = d->strides[i];
        params->window[skip + i] = d->window[i];
        params->start_padding[skip + i] = d->start_padding[i];
        params->end_padding[skip + i] = d->end_padding[i];
        params->dilations[skip + i] = dilation;
    }
    return S_OK;
}

/* Input rank 4 or 5 (GRAD below FL 4.0: 4 only), and DimensionCount = rank - 2. */
static HRESULT check_ranks(const DMLOperator* op, const dml_slot* input, uint32_t dimension_count) {
    bool grad_4d_only = op->type == DML_OPERATOR_MAX_POOLING_GRAD && !dml_op_level_at_least(op, DML_FEATURE_LEVEL_4_0);
    DML_TRY(dml_check_rank(op, input, 4, grad_4d_only ? 4 : 5));
    if (dimension_count != input->tensor.rank - 2)
        return dml_fail(E_INVALIDARG, "%s: DimensionCount is %u but must be %s.DimensionCount - 2 (%u)", op->name,
                        dimension_count, input->field, input->tensor.rank - 2);
    return S_OK;
}

static HRESULT finish(DMLOperator* op, dml_kernel_id kernel, const dml_pooling_params* params) {
    op->kernel = kernel;
    return dml_op_set_params(op, params, sizeof *params);
}

HRESULT dml_create_max_pooling(DMLOperator* op, const void* desc) {
    pooling_desc d = normalize_desc(op->type, desc);
    DML_TRY(dml_op_add_input(op, "InputTensor", d.input, false));
    DML_TRY(dml_op_add_output(op, "OutputTensor", d.output, false));
    if (op->type != DML_OPERATOR_MAX_POOLING) DML_TRY(dml_op_add_output(op, "OutputIndicesTensor", d.indices, true));
    const dml_slot* input = &op->inputs[DML_POOL_INPUT];
    const dml_slot* output = &op->outputs[DML_POOL_OUTPUT];

    DML_TRY(check_ranks(op, input, d.dimension_count));
    DML_TRY(dml_check_same_rank(op, output, input));
    DML_TRY(dml_check_type(op, input, value_types(op)));
    DML_TRY(dml_check_same_type(op, output, input));
    DML_TRY(dml_check_size(op, output, 0, input->tensor.sizes[0], "the batch size N of InputTensor"));
    DML_TRY(dml_check_size(op, output, 1, input->tensor.sizes[1], "the channel count C of InputTensor"));
    if (op->output_count > DML_POOL_OUTPUT_INDICES && op->outputs[DML_POOL_OUTPUT_INDICES].tensor.present) {
        const dml_slot* indices = &op->outputs[DML_POOL_OUTPUT_INDICES];
        DML_TRY(dml_check_type(op, indices, index_types(op)));
        DML_TRY(dml_check_same_sizes(op, indices, output));
    }
    dml_pooling_params params;
    DML_TRY(read_spatial_params(op, &d, &params));
    return finish(op, DML_KERNEL_MAX_POOLING, &params);
}

HRESULT dml_create_max_pooling_grad(DMLOperator* op, const void* desc) {
    pooling_desc d = normalize_desc(op->type, desc);
    DML_TRY(dml_op_add_input(op, "InputTensor", d.input, false));
    DML_TRY(dml_op_add_input(op, "InputGradientTensor", d.second_input, false));
    DML_TRY(dml_op_add_output(op, "OutputGradientTensor", d.output, false));
    const dml_slot* input = &op->inputs[DML_POOL_INPUT];
    const dml_slot* input_gradient = &op->inputs[DML_POOL_INPUT_GRADIENT];
    const dml_slot* output_gradient = &op->outputs[DML_POOL_OUTPUT];

    DML_TRY(check_ranks(op, input, d.dimension_count));
    DML_TRY(dml_check_type(op, input, value_types(op)));
    DML_TRY(dml_check_same_type(op, input_gradient, input));
    DML_TRY(dml_check_same_type(op, output_gradient, input));
    DML_TRY(dml_check_same_rank(op, input_gradient, input));
    DML_TRY(dml_check_same_sizes(op, output_gradient, input));
    DML_TRY(dml_check_size(op, input_gradient, 0, input->tensor.sizes[0], "the batch size N of InputTensor"));
    DML_TRY(dml_check_size(op, input_gradient, 1, input->tensor.sizes[1], "the channel count C of InputTensor"));
    dml_pooling_params params;
    DML_TRY(read_spatial_params(op, &d, &params));
    return finish(op, DML_KERNEL_MAX_POOLING_GRAD, &params);
}
