/* Every operator type libdml knows, with the feature level that introduced
 * it (spec tensors.md §1.3) and the family that validates it. */
#include "ops.h"

static const dml_op_info registry[] = {
    {DML_OPERATOR_MAX_POOLING, "MAX_POOLING", DML_FEATURE_LEVEL_1_0, dml_create_max_pooling},
    {DML_OPERATOR_MAX_POOLING1, "MAX_POOLING1", DML_FEATURE_LEVEL_2_0, dml_create_max_pooling},
    {DML_OPERATOR_MAX_POOLING2, "MAX_POOLING2", DML_FEATURE_LEVEL_2_1, dml_create_max_pooling},
    {DML_OPERATOR_MAX_POOLING_GRAD, "MAX_POOLING_GRAD", DML_FEATURE_LEVEL_3_0, dml_create_max_pooling_grad},
    {DML_OPERATOR_ROI_POOLING, "ROI_POOLING", DML_FEATURE_LEVEL_1_0, dml_create_roi_pooling},
    {DML_OPERATOR_ROI_ALIGN, "ROI_ALIGN", DML_FEATURE_LEVEL_3_0, dml_create_roi_align},
    {DML_OPERATOR_ROI_ALIGN1, "ROI_ALIGN1", DML_FEATURE_LEVEL_4_0, dml_create_roi_align},
    {DML_OPERATOR_ROI_ALIGN_GRAD, "ROI_ALIGN_GRAD", DML_FEATURE_LEVEL_4_1, dml_create_roi_align_grad},
    {DML_OPERATOR_BATCH_NORMALIZATION, "BATCH_NORMALIZATION", DML_FEATURE_LEVEL_1_0, dml_create_batch_normalization},
    {DML_OPERATOR_BATCH_NORMALIZATION_GRAD, "BATCH_NORMALIZATION_GRAD", DML_FEATURE_LEVEL_3_1,
     dml_create_batch_normalization_grad},
    {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, "BATCH_NORMALIZATION_TRAINING", DML_FEATURE_LEVEL_4_1,
     dml_create_batch_normalization_training},
    {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, "BATCH_NORMALIZATION_TRAINING_GRAD", DML_FEATURE_LEVEL_4_1,
     dml_create_batch_normalization_grad},
};

const dml_op_info* dml_op_info_find(DML_OPERATOR_TYPE type) {
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (registry[i].type == type) return &registry[i];
    return NULL;
}

const char* dmlOperatorTypeName(DML_OPERATOR_TYPE type) {
    const dml_op_info* info = dml_op_info_find(type);
    return info ? info->name : NULL;
}
