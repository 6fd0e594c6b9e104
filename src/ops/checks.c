/* Slot building and the checks every family shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static HRESULT add_slot(DMLOperator* op, dml_slot* slots, uint32_t* count, dml_tensor_role role, const char* field,
                        const DML_TENSOR_DESC* desc, bool optional) {
    if (*count >= DML_MAX_SLOTS) return dml_fail(E_FAIL, "%s: internal error: too many slots", op->name);
    dml_slot* slot = &slots[(*count)++];
    slot->field = field;
    memset(&slot->tensor, 0, sizeof slot->tensor);
    if (desc == NULL) {
        if (optional) return S_OK;
        return dml_fail(E_INVALIDARG, "%s: %s is NULL but is required", op->name, field);
    }
    return dml_tensor_from_desc(&slot->tensor, desc, role, op->name, field);
}

HRESULT dml_op_add_input(DMLOperator* op, const char* field, const DML_TENSOR_DESC* desc, bool optional) {
    return add_slot(op, op->inputs, &op->input_count, DML_TENSOR_INPUT, field, desc, optional);
}

HRESULT dml_op_add_output(DMLOperator* op, const char* field, const DML_TENSOR_DESC* desc, bool optional) {
    return add_slot(op, op->outputs, &op->output_count, DML_TENSOR_OUTPUT, field, desc, optional);
}

HRESULT dml_check_array(const DMLOperator* op, const char* field, const void* array, uint32_t count) {
    if (array == NULL && count > 0)
        return dml_fail(E_INVALIDARG, "%s: %s is NULL but must hold %u entries", op->name, field, count);
    return S_OK;
}

HRESULT dml_check_rank(const DMLOperator* op, const dml_slot* slot, uint32_t min_rank, uint32_t max_rank) {
    uint32_t rank = slot->tensor.rank;
    if (rank >= min_rank && rank <= max_rank) return S_OK;
    if (min_rank == max_rank)
        return dml_fail(E_INVALIDARG, "%s: %s.DimensionCount is %u but must be %u", op->name, slot->field, rank,
                        min_rank);
    return dml_fail(E_INVALIDARG, "%s: %s.DimensionCount is %u but must be %u..%u", op->name, slot->field, rank,
                    min_rank, max_rank);
}

HRESULT dml_check_type(const DMLOperator* op, const dml_slot* slot, uint32_t allowed) {
    if (allowed & DML_TYPE_BIT(slot->tensor.type)) return S_OK;
    char list[256] = "";
    size_t used = 0;
    for (unsigned type = 1; type < 32; type++) {
        if (!(allowed & (1u << type)) || dmlDataTypeName((DML_TENSOR_DATA_TYPE)type) == NULL) continue;
        int n = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                         dmlDataTypeName((DML_TENSOR_DATA_TYPE)type));
        if (n < 0 || (size_t)n >= sizeof list - used) break;
        used += (size_t)n;
    }
    const char* name = dmlDataTypeName(slot->tensor.type);
    return dml_fail(E_INVALIDARG, "%s: %s.DataType is %s but must be one of {%s} at feature level " DML_LEVEL_FORMAT,
                    op->name, slot->field, name ? name : "?", list, DML_LEVEL_ARGS(op->device->feature_level));
}

HRESULT dml_check_same_type(const DMLOperator* op, const dml_slot* slot, const dml_slot* reference) {
    if (slot->tensor.type == reference->tensor.type) return S_OK;
    return dml_fail(E_INVALIDARG, "%s: %s.DataType is %s but must equal %s.DataType (%s)", op->name, slot->field,
                    dmlDataTypeName(slot->tensor.type), reference->field, dmlDataTypeName(reference->tensor.type));
}

HRESULT dml_check_same_rank(const DMLOperator* op, const dml_slot* slot, const dml_slot* reference) {
    if (slot->tensor.rank == reference->tensor.rank) return S_OK;
    return dml_fail(E_INVALIDARG, "%s: %s.DimensionCount is %u but must equal %s.DimensionCount (%u)", op->name,
                    slot->field, slot->tensor.rank, reference->field, reference->tensor.rank);
}

HRESULT dml_check_same_sizes(const DMLOperator* op, const dml_slot* slot, const dml_slot* reference) {
    DML_TRY(dml_check_same_rank(op, slot, reference));
    for (uint32_t i = 0; i < slot->tensor.rank; i++)
        if (slot->tensor.sizes[i] != reference->tensor.sizes[i])
            return dml_fail(E_INVALIDARG, "%s: %s.Sizes[%u] is %u but must equal %s.Sizes[%u] (%u)", op->name,
                            slot->field, i, slot->tensor.sizes[i], reference->field, i, reference->tensor.sizes[i]);
    return S_OK;
}

HRESULT dml_check_size(const DMLOperator* op, const dml_slot* slot, uint32_t dim, uint64_t expected, const char* why) {
    if (slot->tensor.sizes[dim] == expected) return S_OK;
    return dml_fail(E_INVALIDARG, "%s: %s.Sizes[%u] is %u but must be %llu (%s)", op->name, slot->field, dim,
                    slot->tensor.sizes[dim], (unsigned long long)expected, why);
}
