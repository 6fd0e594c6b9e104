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

typedef HRESULT (*dml_op_create_fn)(DMLOperator* op, const void* desc);

typedef struct dml_op_info {
    DML_OPERATOR_TYPE type;
    const char* name;             /* without the DML_OPERATOR_ prefix */
    DML_FEATURE_LEVEL introduced; /* the first feature level that has it */
    dml_op_create_fn create;      /* NULL: known to libdml, not implemented yet */
} dml_op_info;

/* The registry entry of an operator type, or NULL. */
const dml_op_info* dml_op_info_find(DML_OPERATOR_TYPE type);

/* Family create functions (one file per family in src/ops/). */
HRESULT dml_create_max_pooling(DMLOperator* op, const void* desc);
HRESULT dml_create_max_pooling_grad(DMLOperator* op, const void* desc);
HRESULT dml_create_batch_normalization(DMLOperator* op, const void* desc);
HRESULT dml_create_batch_normalization_training(DMLOperator* op, const void* desc);
HRESULT dml_create_batch_normalization_grad(DMLOperator* op, const void* desc); /* GRAD and TRAINING_GRAD */
HRESULT dml_create_roi_pooling(DMLOperator* op, const void* desc);
HRESULT dml_create_roi_align(DMLOperator* op, const void* desc); /* ROI_ALIGN and ROI_ALIGN1 */
HRESULT dml_create_roi_align_grad(DMLOperator* op, const void* desc);

/* ---- Building slots ---- */
/* Validates desc (NULL allowed when optional) and appends the next input or
 * output slot, present or absent. */
HRESULT dml_op_add_input(DMLOperator* op, const char* field, const DML_TENSOR_DESC* desc, bool optional);
HRESULT dml_op_add_output(DMLOperator* op, const char* field, const DML_TENSOR_DESC* desc, bool optional);
/* Copies the family's parameter struct into the operator. */
HRESULT dml_op_set_params(DMLOperator* op, const void* params, size_t size);

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
