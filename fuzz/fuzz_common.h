/*
 * fuzz_common.h — what libdml's fuzz targets share (fuzz/README.md):
 *
 *   - fuzz_input: the fuzzer's bytes as a stream of decisions; reading past
 *     the end gives zeros, so every input is complete.
 *   - fuzz_output: the same stream written back (the seed generator).
 *   - fuzz_arena: every block a description points to, with a checksum of
 *     their contents (libdml must not change a description) and a release
 *     that poisons them first (libdml must not keep pointers into one).
 *   - the description codec: a DML_OPERATOR_DESC of any type decoded from
 *     the stream, driven by dmlrun's operator schemas (op_schema.h), and its
 *     inverse, which encodes a description so that decoding rebuilds it.
 *
 * Codec convention: each decision reads a mode byte whose value 0 is the
 * plain encoding of a value (what the encoder writes); the other modes give
 * the fuzzer NULL pointers, interesting values, inconsistent counts and
 * unknown enumerations. Every array the decoder builds holds at least as
 * many entries as its count field says (a count above FUZZ_MAX_ARRAY comes
 * with a NULL array): libdml may read `count` entries of a caller's array.
 */
#ifndef DML_FUZZ_COMMON_H
#define DML_FUZZ_COMMON_H

#include <dml/dml.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "op_schema.h"

/* A violated invariant: the report names it and abort() makes libFuzzer
 * save the input. */
#define FUZZ_CHECK(condition, ...)                                                                                     \
    do {                                                                                                               \
        if (!(condition)) fuzz_fail(__FILE__, __LINE__, #condition, __VA_ARGS__);                                      \
    } while (0)
_Noreturn void fuzz_fail(const char* file, int line, const char* condition, const char* format, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- Reading decisions ---- */
typedef struct fuzz_input {
    const uint8_t* data;
    size_t size;
    size_t position;
} fuzz_input;

uint8_t fuzz_u8(fuzz_input* in);
uint32_t fuzz_u32(fuzz_input* in); /* little-endian */
uint64_t fuzz_u64(fuzz_input* in);
/* A UINT field: a mode byte, then the plain value (mode 0), a small value,
 * or a boundary value (0, 1, 2^31, 2^32 - 1, ...). */
uint32_t fuzz_uint(fuzz_input* in);
/* A FLOAT field: plain bits (mode 0) or an interesting value (NaN, +-inf,
 * +-0, denormals, huge, 0.5, ...). */
float fuzz_float(fuzz_input* in);

/* ---- Writing decisions (the inverse, for seeds) ---- */
typedef struct fuzz_output {
    uint8_t* data;
    size_t size, capacity;
} fuzz_output;

void fuzz_put_u8(fuzz_output* out, uint8_t value);
void fuzz_put_u32(fuzz_output* out, uint32_t value);
void fuzz_put_u64(fuzz_output* out, uint64_t value);
void fuzz_put_uint(fuzz_output* out, uint32_t value);
void fuzz_put_float(fuzz_output* out, float value);
void fuzz_output_free(fuzz_output* out);

/* ---- The arena of one description ---- */
typedef struct fuzz_block fuzz_block;
typedef struct fuzz_arena {
    fuzz_block* blocks;
} fuzz_arena;

/* Zeroed memory until fuzz_arena_release; never NULL (aborts when out of memory). */
void* fuzz_alloc(fuzz_arena* arena, size_t size);
/* A hash of the contents of every block. */
uint64_t fuzz_arena_checksum(const fuzz_arena* arena);
/* Overwrites every block with a pattern, then frees it. */
void fuzz_arena_release(fuzz_arena* arena);

/* ---- The description codec ---- */
enum {
    FUZZ_MAX_ARRAY = 4096,        /* the longest array the decoder allocates */
    FUZZ_UNKNOWN_DESC_BYTES = 256 /* the zeroed Desc of a type without a schema */
};

/* The schema of an operator type, or NULL. */
const dmlrun_op_schema* fuzz_schema_of_type(uint32_t type);

/* Decodes a DML_OPERATOR_DESC (NULL, or of any type, known or not), all of
 * it in arena. *schema is the schema of its type, or NULL. */
const DML_OPERATOR_DESC* fuzz_decode_operator(fuzz_input* in, fuzz_arena* arena, const dmlrun_op_schema** schema);
/* Writes what fuzz_decode_operator reads back as desc (a described type). */
void fuzz_encode_operator(fuzz_output* out, const DML_OPERATOR_DESC* desc);

/* A deep copy of desc (a described type) in arena. */
DML_OPERATOR_DESC* fuzz_copy_operator(fuzz_arena* arena, const DML_OPERATOR_DESC* desc);

/* The address of field in the description struct desc. */
static inline void* fuzz_field_at(const void* desc, const dmlrun_field* field) { return (char*)desc + field->offset; }
/* The tensor of a tensor field, or NULL. */
const DML_TENSOR_DESC* fuzz_tensor_field(const void* desc, const dmlrun_field* field);
/* The value of an array field's count field (DimensionCount) in desc. */
uint32_t fuzz_array_count(const dmlrun_op_schema* schema, const void* desc, const dmlrun_field* array);
/* Unaligned-safe loads and stores of struct fields. */
uint32_t fuzz_load_u32(const void* slot);
void fuzz_store_u32(void* slot, uint32_t value);
const void* fuzz_load_pointer(const void* slot);
void fuzz_store_pointer(void* slot, const void* pointer);

/* Prints desc (a described type) to stderr, one field a line: what an input
 * decodes to, for reproducing a finding (DML_FUZZ_VERBOSE=1). */
void fuzz_print_operator(const DML_OPERATOR_DESC* desc);
/* Whether DML_FUZZ_VERBOSE is set (to anything but 0). */
bool fuzz_verbose(void);

/* The next number of a splitmix64 stream (seeded random data). */
uint64_t fuzz_splitmix64(uint64_t* state);

/* ---- Devices ---- */
/* A feature level: a mode byte; 0 gives 0 (the highest). */
DML_FEATURE_LEVEL fuzz_feature_level(fuzz_input* in);
void fuzz_put_feature_level(fuzz_output* out, DML_FEATURE_LEVEL level);

#endif
