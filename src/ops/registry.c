/* Every operator type libdml knows, with the feature level that introduced
 * it (spec tensors.md §1.3) and the family that validates it. */
#include "operators.h"
#include "ops.h"

static const dml_op_info registry[] = {
#define DML_REGISTRY_ENTRY(TYPE, LEVEL, family)                                                                        \
    {DML_OPERATOR_##TYPE, #TYPE, DML_FEATURE_LEVEL_##LEVEL, dml_create_##family},
    DML_OPERATOR_LIST(DML_REGISTRY_ENTRY)
#undef DML_REGISTRY_ENTRY
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
