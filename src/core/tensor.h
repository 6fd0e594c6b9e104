/* Tensor descriptions: validation of a DML_TENSOR_DESC (spec tensors.md §3,
 * §4) and the normalized form every backend reads. */
#ifndef DML_CORE_TENSOR_H
#define DML_CORE_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "dml/dml.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DML_MAX_RANK DML_TENSOR_DIMENSION_COUNT_MAX1

/* A validated, deep-copied tensor description. Strides are in elements and
 * always filled (packed strides when the description had none). */
typedef struct dml_tensor {
    bool present; /* false for an absent optional tensor */
    DML_TENSOR_DATA_TYPE type;
    uint32_t flags;
    uint32_t rank;
    uint32_t sizes[DML_MAX_RANK];
    uint64_t strides[DML_MAX_RANK];
    uint64_t element_count; /* product of sizes */
    uint64_t total_bytes;   /* TotalTensorSizeInBytes */
    uint32_t alignment;     /* effective base-offset alignment in bytes */
} dml_tensor;

typedef enum dml_tensor_role { DML_TENSOR_INPUT, DML_TENSOR_OUTPUT } dml_tensor_role;

/* Validates desc per tensors.md §3 (type, flags, rank 1..8, sizes >= 1,
 * element limits, size formula, TotalTensorSizeInBytes, alignment, output
 * strides) and fills *tensor. Messages name "<op_name>: <field>". */
HRESULT dml_tensor_from_desc(dml_tensor* tensor, const DML_TENSOR_DESC* desc, dml_tensor_role role, const char* op_name,
                             const char* field);

static inline uint32_t dml_tensor_element_size(const dml_tensor* tensor) { return dmlDataTypeSize(tensor->type); }

/* Bit of a data type in a set of allowed types. */
#define DML_TYPE_BIT(type) (1u << (unsigned)(type))

#ifdef __cplusplus
}
#endif

#endif
