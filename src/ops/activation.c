/* Validation of a fused activation (spec batch_normalization.md §8.2,
 * tensors.md §5): a fusable type at the device's feature level, a non-NULL
 * Desc whose InputTensor and OutputTensor are NULL, SOFTPLUS Steepness >= 1
 * (decision BN-7). The description is deep-copied into a dml_activation. */
#include "activation.h"

#include <string.h>

#include "ops.h"

/* One fusable type: its name and the feature level that introduced it. */
typedef struct fusable_activation {
    uint32_t type;
    const char* name;
    DML_FEATURE_LEVEL introduced;
} fusable_activation;

/* The official list of activations fusable into batch normalization (§8.1). */
static const fusable_activation fusable[] = {
    {DML_ACTIVATION_LINEAR, "ACTIVATION_LINEAR", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_SIGMOID, "ACTIVATION_SIGMOID", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_HARD_SIGMOID, "ACTIVATION_HARD_SIGMOID", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_TANH, "ACTIVATION_TANH", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_SCALED_TANH, "ACTIVATION_SCALED_TANH", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_RELU, "ACTIVATION_RELU", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_LEAKY_RELU, "ACTIVATION_LEAKY_RELU", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_THRESHOLDED_RELU, "ACTIVATION_THRESHOLDED_RELU", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_ELU, "ACTIVATION_ELU", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_CELU, "ACTIVATION_CELU", DML_FEATURE_LEVEL_3_0},
    {DML_ACTIVATION_SCALED_ELU, "ACTIVATION_SCALED_ELU", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_SOFTPLUS, "ACTIVATION_SOFTPLUS", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_PARAMETRIC_SOFTPLUS, "ACTIVATION_PARAMETRIC_SOFTPLUS", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_SOFTSIGN, "ACTIVATION_SOFTSIGN", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_IDENTITY, "ACTIVATION_IDENTITY", DML_FEATURE_LEVEL_1_0},
    {DML_ACTIVATION_SHRINK, "ACTIVATION_SHRINK", DML_FEATURE_LEVEL_2_0},
    {DML_ACTIVATION_GELU, "ACTIVATION_GELU", DML_FEATURE_LEVEL_5_1},
};

/* Every activation struct begins with these two fields (dml_types.h). */
typedef struct activation_tensors {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* OutputTensor;
} activation_tensors;

static const fusable_activation* find_fusable(uint32_t type) {
    for (size_t i = 0; i < sizeof fusable / sizeof fusable[0]; i++)
        if (fusable[i].type == type) return &fusable[i];
    return NULL;
}

/* The FLOAT fields, read through the struct type of each activation. */
static void read_floats(uint32_t type, const void* desc, float* param0, float* param1) {
    *param0 = *param1 = 0.0f;
    switch (type) {
    case DML_ACTIVATION_LINEAR: {
        const DML_ACTIVATION_LINEAR_OPERATOR_DESC* d = desc;
        *param0 = d->Alpha, *param1 = d->Beta;
        break;
    }
    case DML_ACTIVATION_HARD_SIGMOID: {
        const DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC* d = desc;
        *param0 = d->Alpha, *param1 = d->Beta;
        break;
    }
    case DML_ACTIVATION_SCALED_TANH: {
        const DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC* d = desc;
        *param0 = d->Alpha, *param1 = d->Beta;
        break;
    }
    case DML_ACTIVATION_PARAMETRIC_SOFTPLUS: {
        const DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC* d = desc;
        *param0 = d->Alpha, *param1 = d->Beta;
        break;
    }
    case DML_ACTIVATION_SCALED_ELU: {
        const DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC* d = desc;
        *param0 = d->Alpha, *param1 = d->Gamma;
        break;
    }
    case DML_ACTIVATION_SHRINK: {
        const DML_ACTIVATION_SHRINK_OPERATOR_DESC* d = desc;
        *param0 = d->Bias, *param1 = d->Threshold;
        break;
    }
    case DML_ACTIVATION_LEAKY_RELU: *param0 = ((const DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC*)desc)->Alpha; break;
    case DML_ACTIVATION_THRESHOLDED_RELU:
        *param0 = ((const DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC*)desc)->Alpha;
        break;
    case DML_ACTIVATION_ELU: *param0 = ((const DML_ACTIVATION_ELU_OPERATOR_DESC*)desc)->Alpha; break;
    case DML_ACTIVATION_CELU: *param0 = ((const DML_ACTIVATION_CELU_OPERATOR_DESC*)desc)->Alpha; break;
    case DML_ACTIVATION_SOFTPLUS: *param0 = ((const DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC*)desc)->Steepness; break;
    default: break; /* no FLOAT fields */
    }
}

HRESULT dml_check_fused_activation(const DMLOperator* op, const char* field, const DML_OPERATOR_DESC* desc,
                                   dml_activation* activation) {
    memset(activation, 0, sizeof *activation);
    if (desc == NULL) return S_OK; /* optional: no activation */
    const fusable_activation* entry = find_fusable((uint32_t)desc->Type);
    if (entry == NULL)
        return dml_fail(E_INVALIDARG,
                        "%s: %s->Type %u is not a fusable activation (fusable: LINEAR, SIGMOID, HARD_SIGMOID, TANH, "
                        "SCALED_TANH, RELU, LEAKY_RELU, THRESHOLDED_RELU, ELU, CELU, SCALED_ELU, SOFTPLUS, "
                        "PARAMETRIC_SOFTPLUS, SOFTSIGN, IDENTITY, SHRINK, GELU)",
                        op->name, field, (unsigned)desc->Type);
    if (!dml_op_level_at_least(op, entry->introduced))
        return dml_fail(
            E_INVALIDARG,
            "%s: %s->Type %s needs feature level " DML_LEVEL_FORMAT " but the device was created at " DML_LEVEL_FORMAT,
            op->name, field, entry->name, DML_LEVEL_ARGS(entry->introduced), DML_LEVEL_ARGS(op->device->feature_level));
    if (desc->Desc == NULL)
        return dml_fail(E_INVALIDARG, "%s: %s->Desc is NULL but must point to a DML_%s_OPERATOR_DESC", op->name, field,
                        entry->name);
    const activation_tensors* tensors = desc->Desc;
    if (tensors->InputTensor != NULL)
        return dml_fail(E_INVALIDARG, "%s: %s->Desc->InputTensor is set but must be NULL for a fused activation",
                        op->name, field);
    if (tensors->OutputTensor != NULL)
        return dml_fail(E_INVALIDARG, "%s: %s->Desc->OutputTensor is set but must be NULL for a fused activation",
                        op->name, field);
    activation->type = entry->type;
    read_floats(entry->type, desc->Desc, &activation->param0, &activation->param1);
    /* Decision BN-7: Steepness < 1 or NaN is rejected (!(s >= 1) catches NaN). */
    if (entry->type == DML_ACTIVATION_SOFTPLUS && !(activation->param0 >= 1.0f))
        return dml_fail(E_INVALIDARG, "%s: %s->Desc->Steepness is %g but must be >= 1 (and not NaN)", op->name, field,
                        (double)activation->param0);
    return S_OK;
}
