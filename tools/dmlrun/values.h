/*
 * values.h — elements of every tensor data type: from JSON and doubles, to
 * doubles and text, FLOAT16 conversion, and sequence steps.
 */
#ifndef DMLRUN_VALUES_H
#define DMLRUN_VALUES_H

#include "dmlrun.h"

/* Bytes per element; 0 for UNKNOWN and the sub-byte types. */
size_t dmlrun_value_size(DML_TENSOR_DATA_TYPE type);
bool dmlrun_value_is_float(DML_TENSOR_DATA_TYPE type);
bool dmlrun_value_is_signed(DML_TENSOR_DATA_TYPE type);

/* IEEE binary16 <-> double, round to nearest even. */
uint16_t dmlrun_half_from_double(double value);
double dmlrun_half_to_double(uint16_t bits);

/* One JSON element (number, or "nan"/"inf"/"-inf" for floating types) stored
 * as `type` at dst. Integers must be integral and in the type's range.
 * FLOAT16 goes through FLOAT32 first, as DxDispatch does. */
bool dmlrun_value_from_json(DML_TENSOR_DATA_TYPE type, const cJSON* json, const char* place, void* dst);

/* value converted to `type` (floating: round to nearest; integers: round to
 * nearest, then clamp to the type's range; NaN -> 0). */
void dmlrun_value_from_double(DML_TENSOR_DATA_TYPE type, double value, void* dst);

/* The element as a double (64-bit integers beyond 2^53 round). */
double dmlrun_value_to_double(DML_TENSOR_DATA_TYPE type, const void* src);

/* The element's bits, zero-extended (for verbose print). */
uint64_t dmlrun_value_bits(DML_TENSOR_DATA_TYPE type, const void* src);

/* Text of the element as DxDispatch prints it: floating values like C++
 * streams (%g, 6 significant digits; "nan", "inf", "-inf"), integers in
 * decimal (also 8-bit ones, which DxDispatch's streams print as characters). */
void dmlrun_value_format(DML_TENSOR_DATA_TYPE type, const void* src, char* text, size_t capacity);

/* acc += delta in the element type, as DxDispatch's sequence initializer
 * accumulates (floating: rounded each step; integers: wrap around). */
void dmlrun_value_add(DML_TENSOR_DATA_TYPE type, void* acc, const void* delta);

/* Distance in units in the last place between two values of a floating
 * type (0 for equal values, UINT64_MAX when one is NaN); the absolute
 * difference for integer types. */
uint64_t dmlrun_value_ulp_distance(DML_TENSOR_DATA_TYPE type, const void* a, const void* b);

#endif /* DMLRUN_VALUES_H */
