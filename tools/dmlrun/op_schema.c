/* One schema per operator: its description struct's fields in struct order,
 * each with its kind and offset. The description builder (op_desc.c) and
 * the binding order (input tensor fields, then output tensor fields, in
 * struct order: spec tensors.md §6.1) both come from these tables. */
#include <stddef.h>
#include <string.h>

#include "op_schema.h"

/* ---- Enumerations ---- */

#define NAME_VALUE(prefix, name)                                                                                       \
    { #name, prefix##name }

static const dmlrun_name_value data_type_values[] = {
    NAME_VALUE(DML_TENSOR_DATA_TYPE_, UNKNOWN), NAME_VALUE(DML_TENSOR_DATA_TYPE_, FLOAT32),
    NAME_VALUE(DML_TENSOR_DATA_TYPE_, FLOAT16), NAME_VALUE(DML_TENSOR_DATA_TYPE_, UINT32),
    NAME_VALUE(DML_TENSOR_DATA_TYPE_, UINT16),  NAME_VALUE(DML_TENSOR_DATA_TYPE_, UINT8),
    NAME_VALUE(DML_TENSOR_DATA_TYPE_, INT32),   NAME_VALUE(DML_TENSOR_DATA_TYPE_, INT16),
    NAME_VALUE(DML_TENSOR_DATA_TYPE_, INT8),    NAME_VALUE(DML_TENSOR_DATA_TYPE_, FLOAT64),
    NAME_VALUE(DML_TENSOR_DATA_TYPE_, UINT64),  NAME_VALUE(DML_TENSOR_DATA_TYPE_, INT64),
    NAME_VALUE(DML_TENSOR_DATA_TYPE_, UINT4),   NAME_VALUE(DML_TENSOR_DATA_TYPE_, INT4),
};
const dmlrun_enum dmlrun_data_type_enum = {"DML_TENSOR_DATA_TYPE", "DML_TENSOR_DATA_TYPE_", data_type_values,
                                           sizeof data_type_values / sizeof data_type_values[0]};

static const dmlrun_name_value tensor_flag_values[] = {
    NAME_VALUE(DML_TENSOR_FLAG_, NONE),
    NAME_VALUE(DML_TENSOR_FLAG_, OWNED_BY_DML),
};
const dmlrun_enum dmlrun_tensor_flags_enum = {"DML_TENSOR_FLAGS", "DML_TENSOR_FLAG_", tensor_flag_values,
                                              sizeof tensor_flag_values / sizeof tensor_flag_values[0]};

static const dmlrun_name_value execution_flag_values[] = {
    NAME_VALUE(DML_EXECUTION_FLAG_, NONE),
    NAME_VALUE(DML_EXECUTION_FLAG_, ALLOW_HALF_PRECISION_COMPUTATION),
    NAME_VALUE(DML_EXECUTION_FLAG_, DISABLE_META_COMMANDS),
    NAME_VALUE(DML_EXECUTION_FLAG_, DESCRIPTORS_VOLATILE),
};
const dmlrun_enum dmlrun_execution_flags_enum = {"DML_EXECUTION_FLAGS", "DML_EXECUTION_FLAG_", execution_flag_values,
                                                 sizeof execution_flag_values / sizeof execution_flag_values[0]};

static const dmlrun_name_value reduce_function_values[] = {
    NAME_VALUE(DML_REDUCE_FUNCTION_, ARGMAX),      NAME_VALUE(DML_REDUCE_FUNCTION_, ARGMIN),
    NAME_VALUE(DML_REDUCE_FUNCTION_, AVERAGE),     NAME_VALUE(DML_REDUCE_FUNCTION_, L1),
    NAME_VALUE(DML_REDUCE_FUNCTION_, L2),          NAME_VALUE(DML_REDUCE_FUNCTION_, LOG_SUM),
    NAME_VALUE(DML_REDUCE_FUNCTION_, LOG_SUM_EXP), NAME_VALUE(DML_REDUCE_FUNCTION_, MAX),
    NAME_VALUE(DML_REDUCE_FUNCTION_, MIN),         NAME_VALUE(DML_REDUCE_FUNCTION_, MULTIPLY),
    NAME_VALUE(DML_REDUCE_FUNCTION_, SUM),         NAME_VALUE(DML_REDUCE_FUNCTION_, SUM_SQUARE),
};
static const dmlrun_enum reduce_function_enum = {"DML_REDUCE_FUNCTION", "DML_REDUCE_FUNCTION_", reduce_function_values,
                                                 sizeof reduce_function_values / sizeof reduce_function_values[0]};

static const dmlrun_name_value interpolation_mode_values[] = {
    NAME_VALUE(DML_INTERPOLATION_MODE_, NEAREST_NEIGHBOR),
    NAME_VALUE(DML_INTERPOLATION_MODE_, LINEAR),
};
static const dmlrun_enum interpolation_mode_enum = {
    "DML_INTERPOLATION_MODE", "DML_INTERPOLATION_MODE_", interpolation_mode_values,
    sizeof interpolation_mode_values / sizeof interpolation_mode_values[0]};

/* ---- Field rows ---- */

#define INPUT(S, F)                                                                                                    \
    { #F, DMLRUN_FIELD_INPUT_TENSOR, offsetof(S, F), NULL, NULL }
#define OPTIONAL_INPUT(S, F)                                                                                           \
    { #F, DMLRUN_FIELD_OPTIONAL_INPUT_TENSOR, offsetof(S, F), NULL, NULL }
#define OUTPUT(S, F)                                                                                                   \
    { #F, DMLRUN_FIELD_OUTPUT_TENSOR, offsetof(S, F), NULL, NULL }
#define OPTIONAL_OUTPUT(S, F)                                                                                          \
    { #F, DMLRUN_FIELD_OPTIONAL_OUTPUT_TENSOR, offsetof(S, F), NULL, NULL }
#define UINT_FIELD(S, F)                                                                                               \
    { #F, DMLRUN_FIELD_UINT, offsetof(S, F), NULL, NULL }
#define FLOAT_FIELD(S, F)                                                                                              \
    { #F, DMLRUN_FIELD_FLOAT, offsetof(S, F), NULL, NULL }
#define BOOL_FIELD(S, F)                                                                                               \
    { #F, DMLRUN_FIELD_BOOL, offsetof(S, F), NULL, NULL }
#define ENUM_FIELD(S, F, E)                                                                                            \
    { #F, DMLRUN_FIELD_ENUM, offsetof(S, F), &E, NULL }
#define COUNT_FIELD(S, F)                                                                                              \
    { #F, DMLRUN_FIELD_COUNT, offsetof(S, F), NULL, NULL }
#define UINT_ARRAY(S, F, COUNT)                                                                                        \
    { #F, DMLRUN_FIELD_UINT_ARRAY, offsetof(S, F), NULL, #COUNT }
#define SIZE_2D_FIELD(S, F)                                                                                            \
    { #F, DMLRUN_FIELD_SIZE_2D, offsetof(S, F), NULL, NULL }
#define FUSED_ACTIVATION(S, F)                                                                                         \
    { #F, DMLRUN_FIELD_FUSED_ACTIVATION, offsetof(S, F), NULL, NULL }

/* ---- Max pooling family (spec max_pooling.md) ---- */

#define S DML_MAX_POOLING_OPERATOR_DESC
static const dmlrun_field max_pooling_fields[] = {
    INPUT(S, InputTensor),
    OUTPUT(S, OutputTensor),
    COUNT_FIELD(S, DimensionCount),
    UINT_ARRAY(S, Strides, DimensionCount),
    UINT_ARRAY(S, WindowSize, DimensionCount),
    UINT_ARRAY(S, StartPadding, DimensionCount),
    UINT_ARRAY(S, EndPadding, DimensionCount),
};
#undef S
#define S DML_MAX_POOLING1_OPERATOR_DESC
static const dmlrun_field max_pooling1_fields[] = {
    INPUT(S, InputTensor),
    OUTPUT(S, OutputTensor),
    OPTIONAL_OUTPUT(S, OutputIndicesTensor),
    COUNT_FIELD(S, DimensionCount),
    UINT_ARRAY(S, Strides, DimensionCount),
    UINT_ARRAY(S, WindowSize, DimensionCount),
    UINT_ARRAY(S, StartPadding, DimensionCount),
    UINT_ARRAY(S, EndPadding, DimensionCount),
};
#undef S
#define S DML_MAX_POOLING2_OPERATOR_DESC
static const dmlrun_field max_pooling2_fields[] = {
    INPUT(S, InputTensor),
    OUTPUT(S, OutputTensor),
    OPTIONAL_OUTPUT(S, OutputIndicesTensor),
    COUNT_FIELD(S, DimensionCount),
    UINT_ARRAY(S, Strides, DimensionCount),
    UINT_ARRAY(S, WindowSize, DimensionCount),
    UINT_ARRAY(S, StartPadding, DimensionCount),
    UINT_ARRAY(S, EndPadding, DimensionCount),
    UINT_ARRAY(S, Dilations, DimensionCount),
};
#undef S
#define S DML_MAX_POOLING_GRAD_OPERATOR_DESC
static const dmlrun_field max_pooling_grad_fields[] = {
    INPUT(S, InputTensor),
    INPUT(S, InputGradientTensor),
    OUTPUT(S, OutputGradientTensor),
    COUNT_FIELD(S, DimensionCount),
    UINT_ARRAY(S, Strides, DimensionCount),
    UINT_ARRAY(S, WindowSize, DimensionCount),
    UINT_ARRAY(S, StartPadding, DimensionCount),
    UINT_ARRAY(S, EndPadding, DimensionCount),
    UINT_ARRAY(S, Dilations, DimensionCount),
};
#undef S

/* ---- ROI pooling (spec roi_pooling.md) ---- */

#define S DML_ROI_POOLING_OPERATOR_DESC
static const dmlrun_field roi_pooling_fields[] = {
    INPUT(S, InputTensor),        INPUT(S, ROITensor),          OUTPUT(S, OutputTensor),
    FLOAT_FIELD(S, SpatialScale), SIZE_2D_FIELD(S, PooledSize),
};
#undef S

/* ---- ROI align family (spec roi_align.md) ---- */

#define S DML_ROI_ALIGN_OPERATOR_DESC
static const dmlrun_field roi_align_fields[] = {
    INPUT(S, InputTensor),
    INPUT(S, ROITensor),
    INPUT(S, BatchIndicesTensor),
    OUTPUT(S, OutputTensor),
    ENUM_FIELD(S, ReductionFunction, reduce_function_enum),
    ENUM_FIELD(S, InterpolationMode, interpolation_mode_enum),
    FLOAT_FIELD(S, SpatialScaleX),
    FLOAT_FIELD(S, SpatialScaleY),
    FLOAT_FIELD(S, OutOfBoundsInputValue),
    UINT_FIELD(S, MinimumSamplesPerOutput),
    UINT_FIELD(S, MaximumSamplesPerOutput),
};
#undef S
#define S DML_ROI_ALIGN1_OPERATOR_DESC
static const dmlrun_field roi_align1_fields[] = {
    INPUT(S, InputTensor),
    INPUT(S, ROITensor),
    INPUT(S, BatchIndicesTensor),
    OUTPUT(S, OutputTensor),
    ENUM_FIELD(S, ReductionFunction, reduce_function_enum),
    ENUM_FIELD(S, InterpolationMode, interpolation_mode_enum),
    FLOAT_FIELD(S, SpatialScaleX),
    FLOAT_FIELD(S, SpatialScaleY),
    FLOAT_FIELD(S, InputPixelOffset),
    FLOAT_FIELD(S, OutputPixelOffset),
    FLOAT_FIELD(S, OutOfBoundsInputValue),
    UINT_FIELD(S, MinimumSamplesPerOutput),
    UINT_FIELD(S, MaximumSamplesPerOutput),
    BOOL_FIELD(S, AlignRegionsToCorners),
};
#undef S
#define S DML_ROI_ALIGN_GRAD_OPERATOR_DESC
static const dmlrun_field roi_align_grad_fields[] = {
    OPTIONAL_INPUT(S, InputTensor),
    INPUT(S, InputGradientTensor),
    INPUT(S, ROITensor),
    INPUT(S, BatchIndicesTensor),
    OPTIONAL_OUTPUT(S, OutputGradientTensor),
    OPTIONAL_OUTPUT(S, OutputROIGradientTensor),
    ENUM_FIELD(S, ReductionFunction, reduce_function_enum),
    ENUM_FIELD(S, InterpolationMode, interpolation_mode_enum),
    FLOAT_FIELD(S, SpatialScaleX),
    FLOAT_FIELD(S, SpatialScaleY),
    FLOAT_FIELD(S, InputPixelOffset),
    FLOAT_FIELD(S, OutputPixelOffset),
    UINT_FIELD(S, MinimumSamplesPerOutput),
    UINT_FIELD(S, MaximumSamplesPerOutput),
    BOOL_FIELD(S, AlignRegionsToCorners),
};
#undef S

/* ---- Batch normalization family (spec batch_normalization.md) ---- */

#define S DML_BATCH_NORMALIZATION_OPERATOR_DESC
static const dmlrun_field batch_normalization_fields[] = {
    INPUT(S, InputTensor),  INPUT(S, MeanTensor),    INPUT(S, VarianceTensor),
    INPUT(S, ScaleTensor),  INPUT(S, BiasTensor),    OUTPUT(S, OutputTensor),
    BOOL_FIELD(S, Spatial), FLOAT_FIELD(S, Epsilon), FUSED_ACTIVATION(S, FusedActivation),
};
#undef S
#define S DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC
static const dmlrun_field batch_normalization_training_fields[] = {
    INPUT(S, InputTensor),
    INPUT(S, ScaleTensor),
    INPUT(S, BiasTensor),
    OPTIONAL_INPUT(S, FusedAddTensor),
    OUTPUT(S, OutputTensor),
    OUTPUT(S, OutputMeanTensor),
    OUTPUT(S, OutputVarianceTensor),
    FLOAT_FIELD(S, Epsilon),
    FUSED_ACTIVATION(S, FusedActivation),
};
#undef S
#define S DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC
static const dmlrun_field batch_normalization_grad_fields[] = {
    INPUT(S, InputTensor),
    INPUT(S, InputGradientTensor),
    INPUT(S, MeanTensor),
    INPUT(S, VarianceTensor),
    INPUT(S, ScaleTensor),
    OUTPUT(S, OutputGradientTensor),
    OUTPUT(S, OutputScaleGradientTensor),
    OUTPUT(S, OutputBiasGradientTensor),
    FLOAT_FIELD(S, Epsilon),
};
#undef S
#define S DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC
static const dmlrun_field batch_normalization_training_grad_fields[] = {
    INPUT(S, InputTensor),
    INPUT(S, InputGradientTensor),
    INPUT(S, MeanTensor),
    INPUT(S, VarianceTensor),
    INPUT(S, ScaleTensor),
    OUTPUT(S, OutputGradientTensor),
    OUTPUT(S, OutputScaleGradientTensor),
    OUTPUT(S, OutputBiasGradientTensor),
    FLOAT_FIELD(S, Epsilon),
};
#undef S

/* ---- Fusable activations (spec batch_normalization.md §8) ---- */

#define ACTIVATION_TENSORS(S) INPUT(S, InputTensor), OUTPUT(S, OutputTensor)
#define ACTIVATION_NO_PARAMETERS(NAME)                                                                                 \
    static const dmlrun_field activation_##NAME##_fields[] = {ACTIVATION_TENSORS(DML_ACTIVATION_##NAME##_OPERATOR_DESC)}
#define ACTIVATION_1(NAME, A)                                                                                          \
    static const dmlrun_field activation_##NAME##_fields[] = {                                                         \
        ACTIVATION_TENSORS(DML_ACTIVATION_##NAME##_OPERATOR_DESC),                                                     \
        FLOAT_FIELD(DML_ACTIVATION_##NAME##_OPERATOR_DESC, A)}
#define ACTIVATION_2(NAME, A, B)                                                                                       \
    static const dmlrun_field activation_##NAME##_fields[] = {                                                         \
        ACTIVATION_TENSORS(DML_ACTIVATION_##NAME##_OPERATOR_DESC),                                                     \
        FLOAT_FIELD(DML_ACTIVATION_##NAME##_OPERATOR_DESC, A), FLOAT_FIELD(DML_ACTIVATION_##NAME##_OPERATOR_DESC, B)}

ACTIVATION_2(LINEAR, Alpha, Beta);
ACTIVATION_NO_PARAMETERS(SIGMOID);
ACTIVATION_2(HARD_SIGMOID, Alpha, Beta);
ACTIVATION_NO_PARAMETERS(TANH);
ACTIVATION_2(SCALED_TANH, Alpha, Beta);
ACTIVATION_NO_PARAMETERS(RELU);
ACTIVATION_1(LEAKY_RELU, Alpha);
ACTIVATION_1(THRESHOLDED_RELU, Alpha);
ACTIVATION_1(ELU, Alpha);
ACTIVATION_1(CELU, Alpha);
ACTIVATION_2(SCALED_ELU, Alpha, Gamma);
ACTIVATION_1(SOFTPLUS, Steepness);
ACTIVATION_2(PARAMETRIC_SOFTPLUS, Alpha, Beta);
ACTIVATION_NO_PARAMETERS(SOFTSIGN);
ACTIVATION_NO_PARAMETERS(IDENTITY);
ACTIVATION_2(SHRINK, Bias, Threshold);
ACTIVATION_NO_PARAMETERS(GELU);

/* ---- The table ---- */

#define COUNT_OF(array) (sizeof array / sizeof array[0])
#define OPERATOR(NAME, fields)                                                                                         \
    { DML_OPERATOR_##NAME, #NAME, sizeof(DML_##NAME##_OPERATOR_DESC), fields, COUNT_OF(fields), false }
#define ACTIVATION(NAME)                                                                                               \
    {                                                                                                                  \
        DML_OPERATOR_ACTIVATION_##NAME, "ACTIVATION_" #NAME, sizeof(DML_ACTIVATION_##NAME##_OPERATOR_DESC),            \
            activation_##NAME##_fields, COUNT_OF(activation_##NAME##_fields), true                                     \
    }

static const dmlrun_op_schema schemas[] = {
    OPERATOR(MAX_POOLING, max_pooling_fields),
    OPERATOR(MAX_POOLING1, max_pooling1_fields),
    OPERATOR(MAX_POOLING2, max_pooling2_fields),
    OPERATOR(MAX_POOLING_GRAD, max_pooling_grad_fields),
    OPERATOR(ROI_POOLING, roi_pooling_fields),
    OPERATOR(ROI_ALIGN, roi_align_fields),
    OPERATOR(ROI_ALIGN1, roi_align1_fields),
    OPERATOR(ROI_ALIGN_GRAD, roi_align_grad_fields),
    OPERATOR(BATCH_NORMALIZATION, batch_normalization_fields),
    OPERATOR(BATCH_NORMALIZATION_TRAINING, batch_normalization_training_fields),
    OPERATOR(BATCH_NORMALIZATION_GRAD, batch_normalization_grad_fields),
    OPERATOR(BATCH_NORMALIZATION_TRAINING_GRAD, batch_normalization_training_grad_fields),
    ACTIVATION(LINEAR),
    ACTIVATION(SIGMOID),
    ACTIVATION(HARD_SIGMOID),
    ACTIVATION(TANH),
    ACTIVATION(SCALED_TANH),
    ACTIVATION(RELU),
    ACTIVATION(LEAKY_RELU),
    ACTIVATION(THRESHOLDED_RELU),
    ACTIVATION(ELU),
    ACTIVATION(CELU),
    ACTIVATION(SCALED_ELU),
    ACTIVATION(SOFTPLUS),
    ACTIVATION(PARAMETRIC_SOFTPLUS),
    ACTIVATION(SOFTSIGN),
    ACTIVATION(IDENTITY),
    ACTIVATION(SHRINK),
    ACTIVATION(GELU),
};

const dmlrun_op_schema* dmlrun_find_op_schema(const char* name) {
    static const char prefix[] = "DML_OPERATOR_";
    if (strncmp(name, prefix, sizeof prefix - 1) == 0) name += sizeof prefix - 1;
    for (size_t i = 0; i < COUNT_OF(schemas); i++)
        if (strcmp(schemas[i].name, name) == 0) return &schemas[i];
    return NULL;
}

size_t dmlrun_op_schema_count(void) { return COUNT_OF(schemas); }

const dmlrun_op_schema* dmlrun_op_schema_at(size_t index) { return index < COUNT_OF(schemas) ? &schemas[index] : NULL; }

bool dmlrun_field_is_tensor(dmlrun_field_kind kind) {
    return kind == DMLRUN_FIELD_INPUT_TENSOR || kind == DMLRUN_FIELD_OPTIONAL_INPUT_TENSOR ||
           kind == DMLRUN_FIELD_OUTPUT_TENSOR || kind == DMLRUN_FIELD_OPTIONAL_OUTPUT_TENSOR;
}

bool dmlrun_field_is_input(dmlrun_field_kind kind) {
    return kind == DMLRUN_FIELD_INPUT_TENSOR || kind == DMLRUN_FIELD_OPTIONAL_INPUT_TENSOR;
}

bool dmlrun_field_is_optional(dmlrun_field_kind kind) {
    return kind == DMLRUN_FIELD_OPTIONAL_INPUT_TENSOR || kind == DMLRUN_FIELD_OPTIONAL_OUTPUT_TENSOR ||
           kind == DMLRUN_FIELD_FUSED_ACTIVATION;
}
