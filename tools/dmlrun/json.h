/*
 * json.h — reading the model's JSON through cJSON, and typed getters that
 * report the place in the model and the rule on a wrong value.
 *
 * Every getter takes the JSON value and its place ("resources.A.sizeInBytes"),
 * returns false after reporting the error, and never reads out of bounds.
 */
#ifndef DMLRUN_JSON_H
#define DMLRUN_JSON_H

#include "dmlrun.h"

/* Parses model text (modified in place: comments and trailing commas, which
 * DxDispatch accepts, are blanked out so that offsets keep their line and
 * column). Syntax errors are reported as SOURCE:LINE:COLUMN. */
cJSON* dmlrun_json_parse(char* text, size_t length, const char* source);

/* Line and column (1-based) of a byte offset in text. */
void dmlrun_json_line_column(const char* text, size_t offset, unsigned* line, unsigned* column);

/* "a number", "a string", ... for messages. */
const char* dmlrun_json_kind(const cJSON* value);

/* The member named exactly `name` (cJSON's own lookup ignores case). */
const cJSON* dmlrun_json_member(const cJSON* object, const char* name);

/* Checks that object is an object whose members are all in known[] (an
 * unknown or repeated member is an error naming it, with a suggestion when
 * only its case differs). */
bool dmlrun_json_check_object(const cJSON* object, const char* place, const char* const* known, size_t known_count,
                              const char* what);

bool dmlrun_json_object(const cJSON* value, const char* place);
bool dmlrun_json_string(const cJSON* value, const char* place, const char** out);
bool dmlrun_json_bool(const cJSON* value, const char* place, bool* out);
bool dmlrun_json_uint32(const cJSON* value, const char* place, uint32_t* out);
/* Integers beyond 2^53 are not exact in JSON numbers: they may be written as
 * decimal strings. */
bool dmlrun_json_uint64(const cJSON* value, const char* place, uint64_t* out);
bool dmlrun_json_int64(const cJSON* value, const char* place, int64_t* out);
/* Numbers, or the strings "nan", "inf", "-inf" (any case). */
bool dmlrun_json_double(const cJSON* value, const char* place, double* out);
/* As dmlrun_json_double, and finite values must fit in FLOAT32. */
bool dmlrun_json_float(const cJSON* value, const char* place, float* out);

/* An enumeration value: a name with or without the prefix, or an integer. */
bool dmlrun_json_enum(const cJSON* value, const char* place, const dmlrun_enum* enumeration, int64_t* out);
/* Flags: one name, an array of names, or an integer; OR'ed together. */
bool dmlrun_json_flags(const cJSON* value, const char* place, const dmlrun_enum* enumeration, uint32_t* out);
/* The name of an enumeration value ("FLOAT32"), or NULL. */
const char* dmlrun_enum_name(const dmlrun_enum* enumeration, int64_t value);

#endif /* DMLRUN_JSON_H */
