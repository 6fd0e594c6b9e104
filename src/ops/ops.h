/* What an operator family provides, and the checks families share.
 *
 * A family's create function validates one DML_*_OPERATOR_DESC against the
 * spec and fills the DMLOperator: its slots in DirectML's binding order, its
 * kernel and its normalized parameters. It does no arithmetic on data. Every
 * failure returns E_INVALIDARG with a message "<OP>: <field>: <rule>". */
#ifndef DML_OPS_OPS_H
#define DML_OPS_OPS_H

#include <stdbool.h>

#include "../core/operator.h"
#include "../core/status.h"
#include "operators.h"

/* Family create functions (one file per family in src/ops/), one per entry
 * of DML_OPERATOR_LIST. */
#define DML_CREATE_FUNCTION(TYPE, LEVEL, family) HRESULT dml_create_##family(DMLOperator* op, const void* desc);
DML_OPERATOR_LIST(DML_CREATE_FUNCTION)
#undef DML_CREATE_FUNCTION

/* ---- Building slots ---- */
/* Validates desc (NULL allowed when optional) and appends the next input or
 * output slot, present or absent. */
HRESULT dml_op_add_input(DMLOperator* op, const char* field, const DML_TENSOR_DESC* desc, bool optional);
HRESULT dml_op_add_output(DMLOperator* op, const char* field, const DML_TENSOR_DESC* desc, bool optional);

static inline bool dml_op_level_at_least(const DMLOperator* op, DML_FEATURE_LEVEL level) {
    return op->device->feature_level >= level;
}

/* ---- Fused activations (activation.c, spec batch_normalization.md §8.2) ---- */
/* Validates desc (NULL: no activation) at the device's feature level and
 * deep-copies it into *activation; field names the description's field. */
struct dml_activation;
HRESULT dml_check_fused_activation(const DMLOperator* op, const char* field, const DML_OPERATOR_DESC* desc,
                                   struct dml_activation* activation);

/* ---- Shared checks; each names the operator, the field and the rule ---- */
HRESULT dml_check_array(const DMLOperator* op, const char* field, const void* array, uint32_t count);
HRESULT dml_check_rank(const DMLOperator* op, const dml_slot* slot, uint32_t min_rank, uint32_t max_rank);
/* allowed is a set of DML_TYPE_BIT()s; the message lists them. */
HRESULT dml_check_type(const DMLOperator* op, const dml_slot* slot, uint32_t allowed);
HRESULT dml_check_same_type(const DMLOperator* op, const dml_slot* slot, const dml_slot* reference);
HRESULT dml_check_same_rank(const DMLOperator* op, const dml_slot* slot, const dml_slot* reference);
HRESULT dml_check_same_sizes(const DMLOperator* op, const dml_slot* slot, const dml_slot* reference);
/* slot.Sizes[dim] == expected; why explains where expected comes from. */
HRESULT dml_check_size(const DMLOperator* op, const dml_slot* slot, uint32_t dim, uint64_t expected, const char* why);

#endif
