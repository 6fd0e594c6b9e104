/*
 * op_schema.h — the operator schemas: one table per operator description
 * struct, its fields in struct order with their kind and offset, and the
 * enumerations the fields use. dmlrun builds descriptions from JSON with
 * them (op_desc.c); the fuzzers (fuzz/) build them from fuzzed bytes. Only
 * libdml's types are needed: the library dmlrun_schema has no other
 * dependency.
 */
#ifndef DMLRUN_OP_SCHEMA_H
#define DMLRUN_OP_SCHEMA_H

#include <dml/dml_types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum dmlrun_field_kind {
    DMLRUN_FIELD_INPUT_TENSOR,
    DMLRUN_FIELD_OPTIONAL_INPUT_TENSOR,
    DMLRUN_FIELD_OUTPUT_TENSOR,
    DMLRUN_FIELD_OPTIONAL_OUTPUT_TENSOR,
    DMLRUN_FIELD_UINT,
    DMLRUN_FIELD_FLOAT,
    DMLRUN_FIELD_BOOL,
    DMLRUN_FIELD_ENUM,
    DMLRUN_FIELD_UINT_ARRAY,      /* const UINT*, its length in a COUNT field */
    DMLRUN_FIELD_COUNT,           /* the UINT length of one or more arrays (DimensionCount) */
    DMLRUN_FIELD_SIZE_2D,         /* DML_SIZE_2D */
    DMLRUN_FIELD_FUSED_ACTIVATION /* const DML_OPERATOR_DESC*, optional */
} dmlrun_field_kind;

typedef struct dmlrun_name_value {
    const char* name;
    int64_t value;
} dmlrun_name_value;

/* An enumeration or a set of flags: names with or without the prefix. */
typedef struct dmlrun_enum {
    const char* type_name; /* "DML_REDUCE_FUNCTION" */
    const char* prefix;    /* "DML_REDUCE_FUNCTION_" */
    const dmlrun_name_value* values;
    size_t count;
} dmlrun_enum;

typedef struct dmlrun_field {
    const char* name; /* spelled exactly as the struct field */
    dmlrun_field_kind kind;
    size_t offset;                  /* offsetof in the description struct */
    const dmlrun_enum* enumeration; /* DMLRUN_FIELD_ENUM */
    const char* count_field;        /* DMLRUN_FIELD_UINT_ARRAY: the COUNT field holding its length */
} dmlrun_field;

typedef struct dmlrun_op_schema {
    DML_OPERATOR_TYPE type;
    const char* name; /* without the DML_OPERATOR_ prefix */
    size_t desc_size;
    const dmlrun_field* fields; /* in struct order */
    size_t field_count;
    bool fusable; /* an activation that may be a FusedActivation */
} dmlrun_op_schema;

/* The schema of an operator type name, with or without "DML_OPERATOR_". */
const dmlrun_op_schema* dmlrun_find_op_schema(const char* name);
size_t dmlrun_op_schema_count(void);
const dmlrun_op_schema* dmlrun_op_schema_at(size_t index);
bool dmlrun_field_is_tensor(dmlrun_field_kind kind);
bool dmlrun_field_is_input(dmlrun_field_kind kind);
bool dmlrun_field_is_optional(dmlrun_field_kind kind);

/* Enumerations the models use (op_schema.c). */
extern const dmlrun_enum dmlrun_data_type_enum;
extern const dmlrun_enum dmlrun_tensor_flags_enum;
extern const dmlrun_enum dmlrun_execution_flags_enum;

#endif /* DMLRUN_OP_SCHEMA_H */
