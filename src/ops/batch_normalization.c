/* Validation of the batch normalization family (spec batch_normalization.md
 * §2 rules 1-6, §4 Spatial, §8.2 fused activation). No arithmetic on data:
 * the result is the slots and a dml_batch_norm_params. */
#include "batch_normalization.h"

#include <string.h>

#include "ops.h"

static uint32_t float_types(void) {
    return DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_FLOAT32) | DML_TYPE_BIT(DML_TENSOR_DATA_TYPE_FLOAT16);
}

/* Rule 1 (type and rank of every tensor equal the input's) and rule 6 (the
 * input's rank at the feature level; its type FLOAT32 or FLOAT16). */
static HRESULT check_types_and_ranks(const DMLOperator* op, const dml_slot* input) {
    /* BATCH_NORMALIZATION is 4-D only below FL 3.1; every other member exists from 3.1 on with 1-8. */
    bool four_d_only =
        op->type == DML_OPERATOR_BATCH_NORMALIZATION && !dml_op_level_at_least(op, DML_FEATURE_LEVEL_3_1);
    DML_TRY(dml_check_rank(op, input, four_d_only ? 4 : 1, four_d_only ? 4 : DML_MAX_RANK));
    DML_TRY(dml_check_type(op, input, float_types()));
    for (uint32_t i = 0; i < op->input_count; i++) {
        const dml_slot* slot = &op->inputs[i];
        if (!slot->tensor.present || slot == input) continue;
        DML_TRY(dml_check_same_type(op, slot, input));
        DML_TRY(dml_check_same_rank(op, slot, input));
    }
    for (uint32_t i = 0; i < op->output_count; i++) {
        DML_TRY(dml_check_same_type(op, &op->outputs[i], input));
        DML_TRY(dml_check_same_rank(op, &op->outputs[i], input));
    }
    return S_OK;
}

/* Rule 3: every dimension of a parameter tensor is 1 (broadcast) or X[i]. */
static HRESULT check_parameter_sizes(const DMLOperator* op, const dml_slot* parameter, const dml_slot* input) {
    for (uint32_t i = 0; i < input->tensor.rank; i++) {
        uint32_t size = parameter->tensor.sizes[i], input_size = input->tensor.sizes[i];
        if (size != 1 && size != input_size)
            return dml_fail(E_INVALIDARG, "%s: %s.Sizes[%u] is %u but must be 1 or %s.Sizes[%u] (%u)", op->name,
                            parameter->field, i, size, input->field, i, input_size);
    }
    return S_OK;
}

/* Spec §3: the reduced axes are those where the parameter size is 1; fills
 * the group geometry (J parameter elements, M inputs per group). */
static void set_groups(dml_batch_norm_params* params, const dml_slot* parameter, const dml_slot* input) {
    params->reduced_axes = 0;
    params->group_count = 1;
    params->group_size = 1;
    for (uint32_t i = 0; i < input->tensor.rank; i++) {
        if (parameter->tensor.sizes[i] == 1) {
            params->reduced_axes |= 1u << i;
            params->group_size *= input->tensor.sizes[i]; /* <= the input's element count < 2^32 */
        } else {
            params->group_count *= parameter->tensor.sizes[i];
        }
    }
}

static HRESULT finish(DMLOperator* op, dml_kernel_id kernel, const dml_batch_norm_params* params) {
    op->kernel = kernel;
    return dml_op_set_params(op, params, sizeof *params);
}

HRESULT dml_create_batch_normalization(DMLOperator* op, const void* desc_ptr) {
    const DML_BATCH_NORMALIZATION_OPERATOR_DESC* desc = desc_ptr;
    DML_TRY(dml_op_add_input(op, "InputTensor", desc->InputTensor, false));
    DML_TRY(dml_op_add_input(op, "MeanTensor", desc->MeanTensor, false));
    DML_TRY(dml_op_add_input(op, "VarianceTensor", desc->VarianceTensor, false));
    DML_TRY(dml_op_add_input(op, "ScaleTensor", desc->ScaleTensor, false));
    DML_TRY(dml_op_add_input(op, "BiasTensor", desc->BiasTensor, false));
    DML_TRY(dml_op_add_output(op, "OutputTensor", desc->OutputTensor, false));
    const dml_slot* input = &op->inputs[DML_BN_INPUT];

    DML_TRY(check_types_and_ranks(op, input));
    DML_TRY(dml_check_same_sizes(op, &op->outputs[DML_BN_OUTPUT], input));
    /* Spec §4, decision BN-5: Mean, Variance, Scale and Bias broadcast independently. */
    for (uint32_t i = DML_BN_MEAN; i <= DML_BN_BIAS; i++)
        DML_TRY(check_parameter_sizes(op, &op->inputs[i], input));
    /* Spec §4, decision BN-2: below FL 4.0, Spatial == FALSE forbids broadcasting
     * Mean and Variance along the last two dimensions. */
    if (!desc->Spatial && !dml_op_level_at_least(op, DML_FEATURE_LEVEL_4_0)) {
        uint32_t rank = input->tensor.rank;
        for (uint32_t s = DML_BN_MEAN; s <= DML_BN_VARIANCE; s++) {
            const dml_slot* slot = &op->inputs[s];
            for (uint32_t i = rank >= 2 ? rank - 2 : 0; i < rank; i++)
                if (slot->tensor.sizes[i] != input->tensor.sizes[i])
                    return dml_fail(E_INVALIDARG,
                                    "%s: %s.Sizes[%u] is %u but must equal %s.Sizes[%u] (%u) when Spatial is FALSE "
                                    "below feature level 4.0 (no broadcasting along the last two dimensions)",
                                    op->name, slot->field, i, slot->tensor.sizes[i], input->field, i,
                                    input->tensor.sizes[i]);
        }
    }
    dml_batch_norm_params params;
    memset(&params, 0, sizeof params);
    params.epsilon = desc->Epsilon; /* any value, decision BN-6 */
    DML_TRY(dml_check_fused_activation(op, "FusedActivation", desc->FusedActivation, &params.activation));
    params.group_count = input->tensor.element_count;
    params.group_size = 1;
    return finish(op, DML_KERNEL_BATCH_NORMALIZATION, &params);
}

HRESULT dml_create_batch_normalization_training(DMLOperator* op, const void* desc_ptr) {
    const DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC* desc = desc_ptr;
    DML_TRY(dml_op_add_input(op, "InputTensor", desc->InputTensor, false));
    DML_TRY(dml_op_add_input(op, "ScaleTensor", desc->ScaleTensor, false));
    DML_TRY(dml_op_add_input(op, "BiasTensor", desc->BiasTensor, false));
    DML_TRY(dml_op_add_input(op, "FusedAddTensor", desc->FusedAddTensor, true));
    DML_TRY(dml_op_add_output(op, "OutputTensor", desc->OutputTensor, false));
    DML_TRY(dml_op_add_output(op, "OutputMeanTensor", desc->OutputMeanTensor, false));
    DML_TRY(dml_op_add_output(op, "OutputVarianceTensor", desc->OutputVarianceTensor, false));
    const dml_slot* input = &op->inputs[DML_BN_TRAINING_INPUT];
    const dml_slot* scale = &op->inputs[DML_BN_TRAINING_SCALE];

    DML_TRY(check_types_and_ranks(op, input));
    /* Rule 2; decision BN-8: FusedAdd has the input's sizes (no size-1 broadcasting). */
    const dml_slot* fused_add = &op->inputs[DML_BN_TRAINING_FUSED_ADD];
    if (fused_add->tensor.present) DML_TRY(dml_check_same_sizes(op, fused_add, input));
    DML_TRY(dml_check_same_sizes(op, &op->outputs[DML_BN_TRAINING_OUTPUT], input));
    /* Rules 3 and 4: Scale, Bias, OutputMean, OutputVariance all have sizes P. */
    DML_TRY(check_parameter_sizes(op, scale, input));
    DML_TRY(dml_check_same_sizes(op, &op->inputs[DML_BN_TRAINING_BIAS], scale));
    DML_TRY(dml_check_same_sizes(op, &op->outputs[DML_BN_TRAINING_OUTPUT_MEAN], scale));
    DML_TRY(dml_check_same_sizes(op, &op->outputs[DML_BN_TRAINING_OUTPUT_VARIANCE], scale));

    dml_batch_norm_params params;
    memset(&params, 0, sizeof params);
    params.epsilon = desc->Epsilon;
    DML_TRY(dml_check_fused_activation(op, "FusedActivation", desc->FusedActivation, &params.activation));
    set_groups(&params, scale, input);
    return finish(op, DML_KERNEL_BATCH_NORMALIZATION_TRAINING, &params);
}

/* BATCH_NORMALIZATION_GRAD and _TRAINING_GRAD share their field list (spec
 * §1) in two struct types; each is read through its own type. */
static DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC grad_fields(DML_OPERATOR_TYPE type, const void* desc) {
    if (type == DML_OPERATOR_BATCH_NORMALIZATION_GRAD) return *(const DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC*)desc;
    const DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC* d = desc;
    return (DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC){d->InputTensor,
                                                        d->InputGradientTensor,
                                                        d->MeanTensor,
                                                        d->VarianceTensor,
                                                        d->ScaleTensor,
                                                        d->OutputGradientTensor,
                                                        d->OutputScaleGradientTensor,
                                                        d->OutputBiasGradientTensor,
                                                        d->Epsilon};
}

HRESULT dml_create_batch_normalization_grad(DMLOperator* op, const void* desc_ptr) {
    DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC fields = grad_fields(op->type, desc_ptr);
    const DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC* desc = &fields;
    DML_TRY(dml_op_add_input(op, "InputTensor", desc->InputTensor, false));
    DML_TRY(dml_op_add_input(op, "InputGradientTensor", desc->InputGradientTensor, false));
    DML_TRY(dml_op_add_input(op, "MeanTensor", desc->MeanTensor, false));
    DML_TRY(dml_op_add_input(op, "VarianceTensor", desc->VarianceTensor, false));
    DML_TRY(dml_op_add_input(op, "ScaleTensor", desc->ScaleTensor, false));
    DML_TRY(dml_op_add_output(op, "OutputGradientTensor", desc->OutputGradientTensor, false));
    DML_TRY(dml_op_add_output(op, "OutputScaleGradientTensor", desc->OutputScaleGradientTensor, false));
    DML_TRY(dml_op_add_output(op, "OutputBiasGradientTensor", desc->OutputBiasGradientTensor, false));
    const dml_slot* input = &op->inputs[DML_BN_GRAD_INPUT];
    const dml_slot* mean = &op->inputs[DML_BN_GRAD_MEAN];

    DML_TRY(check_types_and_ranks(op, input));
    DML_TRY(dml_check_same_sizes(op, &op->inputs[DML_BN_GRAD_INPUT_GRADIENT], input));
    DML_TRY(dml_check_same_sizes(op, &op->outputs[DML_BN_GRAD_OUTPUT_GRADIENT], input));
    DML_TRY(check_parameter_sizes(op, mean, input));
    DML_TRY(dml_check_same_sizes(op, &op->inputs[DML_BN_GRAD_VARIANCE], mean));
    DML_TRY(dml_check_same_sizes(op, &op->inputs[DML_BN_GRAD_SCALE], mean));
    DML_TRY(dml_check_same_sizes(op, &op->outputs[DML_BN_GRAD_OUTPUT_SCALE_GRADIENT], mean));
    DML_TRY(dml_check_same_sizes(op, &op->outputs[DML_BN_GRAD_OUTPUT_BIAS_GRADIENT], mean));

    dml_batch_norm_params params;
    memset(&params, 0, sizeof params);
    params.epsilon = desc->Epsilon;
    set_groups(&params, mean, input);
    bool training = op->type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD;
    return finish(op, training ? DML_KERNEL_BATCH_NORMALIZATION_TRAINING_GRAD : DML_KERNEL_BATCH_NORMALIZATION_GRAD,
                  &params);
}
