/* Overflow-checked size arithmetic: every product of sizes and strides goes
 * through these, so no description can wrap a size computation. */
#ifndef DML_CORE_CHECKED_H
#define DML_CORE_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

/* *result = a * b; false on overflow. */
static inline bool dml_mul_u64(uint64_t a, uint64_t b, uint64_t* result) {
    return !__builtin_mul_overflow(a, b, result);
}

/* *result = a + b; false on overflow. */
static inline bool dml_add_u64(uint64_t a, uint64_t b, uint64_t* result) {
    return !__builtin_add_overflow(a, b, result);
}

static inline uint64_t dml_round_up_u64(uint64_t value, uint64_t multiple) {
    return (value + multiple - 1) / multiple * multiple;
}

#endif
