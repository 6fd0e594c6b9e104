/* Reading the model's JSON: syntax errors with line and column, typed
 * getters that name the place in the model, diagnostics, the arena. */
#include "json.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- Diagnostics ---- */

static void report(const char* kind, const char* place, const char* format, va_list args) {
    fprintf(stderr, "dmlrun: %s: ", kind);
    if (place != NULL && place[0] != '\0') fprintf(stderr, "%s: ", place);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
}

bool dmlrun_fail(const char* place, const char* format, ...) {
    va_list args;
    va_start(args, format);
    report("error", place, format, args);
    va_end(args);
    return false;
}

void dmlrun_warning(const char* place, const char* format, ...) {
    va_list args;
    va_start(args, format);
    report("warning", place, format, args);
    va_end(args);
}

void dmlrun_note(const char* format, ...) {
    va_list args;
    va_start(args, format);
    fputs("dmlrun: note: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
}

void dmlrun_place_member(char* out, const char* parent, const char* key) {
    if (parent == NULL || parent[0] == '\0')
        snprintf(out, DMLRUN_PLACE_CAPACITY, "%s", key);
    else
        snprintf(out, DMLRUN_PLACE_CAPACITY, "%s.%s", parent, key);
}

void dmlrun_place_index(char* out, const char* parent, size_t index) {
    snprintf(out, DMLRUN_PLACE_CAPACITY, "%s[%zu]", parent, index);
}

/* ---- Arena ---- */

struct dmlrun_arena_block {
    dmlrun_arena_block* next;
    max_align_t data[];
};

void* dmlrun_arena_alloc(dmlrun_arena* arena, size_t size) {
    if (size > SIZE_MAX - sizeof(dmlrun_arena_block)) return NULL;
    dmlrun_arena_block* block = calloc(1, sizeof(dmlrun_arena_block) + (size ? size : 1));
    if (block == NULL) return NULL;
    block->next = arena->blocks;
    arena->blocks = block;
    return block->data;
}

void dmlrun_arena_free(dmlrun_arena* arena) {
    while (arena->blocks != NULL) {
        dmlrun_arena_block* next = arena->blocks->next;
        free(arena->blocks);
        arena->blocks = next;
    }
}

/* ---- Parsing ---- */

void dmlrun_json_line_column(const char* text, size_t offset, unsigned* line, unsigned* column) {
    unsigned current_line = 1, current_column = 1;
    for (size_t i = 0; i < offset; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n' || (c == '\r' && text[i + 1] != '\n')) {
            current_line++;
            current_column = 1;
        } else if (c != '\r' && (c & 0xC0) != 0x80) { /* count characters, not UTF-8 continuation bytes */
            current_column++;
        }
    }
    *line = current_line;
    *column = current_column;
}

/* DxDispatch reads models with comments and trailing commas allowed; cJSON
 * does not, so they are replaced by spaces (newlines kept, so that every
 * offset keeps its line and column). An unterminated comment is left alone
 * for cJSON to report. */
static void blank_comments_and_trailing_commas(char* text, size_t length) {
    bool in_string = false;
    for (size_t i = 0; i < length; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '/' && i + 1 < length && text[i + 1] == '/') {
            while (i < length && text[i] != '\n')
                text[i++] = ' ';
        } else if (c == '/' && i + 1 < length && text[i + 1] == '*') {
            size_t end = i + 2;
            while (end + 1 < length && !(text[end] == '*' && text[end + 1] == '/'))
                end++;
            if (end + 1 >= length) return; /* unterminated */
            for (size_t j = i; j <= end + 1; j++)
                if (text[j] != '\n' && text[j] != '\r') text[j] = ' ';
            i = end + 1;
        }
    }
    in_string = false;
    for (size_t i = 0; i < length; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == ',') {
            size_t next = i + 1;
            while (next < length && isspace((unsigned char)text[next]))
                next++;
            if (next < length && (text[next] == ']' || text[next] == '}')) text[i] = ' ';
        }
    }
}

static int compare_member_names(const void* a, const void* b) {
    return strcmp((*(const cJSON* const*)a)->string, (*(const cJSON* const*)b)->string);
}

/* Fails when an object of value (at place, extended in place while
 * descending) has two members of one name: JSON leaves that undefined and
 * cJSON's lookups would silently take the first. Sorting keeps objects of
 * 100k members (resources) fast. */
static bool find_duplicate_member(const cJSON* value, char place[DMLRUN_PLACE_CAPACITY], const char* source) {
    size_t count = 0, place_length = strlen(place);
    for (const cJSON* child = value->child; child != NULL; child = child->next, count++) {
        if (cJSON_IsArray(value))
            snprintf(place + place_length, DMLRUN_PLACE_CAPACITY - place_length, "[%zu]", count);
        else
            snprintf(place + place_length, DMLRUN_PLACE_CAPACITY - place_length, "%s%s", place_length ? "." : "",
                     child->string);
        if (!find_duplicate_member(child, place, source)) return false;
    }
    place[place_length] = '\0';
    if (!cJSON_IsObject(value) || count < 2) return true;
    const cJSON** members = malloc(count * sizeof *members);
    if (members == NULL) return dmlrun_fail(NULL, "%s: out of memory checking the JSON's member names", source);
    size_t i = 0;
    for (const cJSON* child = value->child; child != NULL; child = child->next)
        members[i++] = child;
    qsort(members, count, sizeof *members, compare_member_names);
    bool unique = true;
    for (i = 1; i < count && unique; i++)
        if (strcmp(members[i - 1]->string, members[i]->string) == 0) {
            char member_place[DMLRUN_PLACE_CAPACITY];
            dmlrun_place_member(member_place, place, members[i]->string);
            unique = dmlrun_fail(member_place, "'%s' appears twice in %s", members[i]->string,
                                 place[0] ? "this object" : "the model");
        }
    free(members);
    return unique;
}

/* cJSON allocates through these, so that a parse that failed for want of
 * memory is reported as that and not as a syntax error. */
static bool json_allocation_failed;

static void* json_malloc(size_t size) {
    void* memory = malloc(size);
    if (memory == NULL) json_allocation_failed = true;
    return memory;
}

cJSON* dmlrun_json_parse(char* text, size_t length, const char* source) {
    cJSON_Hooks hooks = {json_malloc, free};
    cJSON_InitHooks(&hooks);
    json_allocation_failed = false;
    unsigned line, column;
    const char* nul = memchr(text, '\0', length);
    if (nul != NULL) {
        dmlrun_json_line_column(text, (size_t)(nul - text), &line, &column);
        dmlrun_fail(NULL, "%s:%u:%u: JSON syntax error: a NUL byte in the text", source, line, column);
        return NULL;
    }
    blank_comments_and_trailing_commas(text, length);
    const char* end = NULL;
    /* The length includes the terminating NUL: cJSON then rejects trailing garbage. */
    cJSON* root = cJSON_ParseWithLengthOpts(text, length + 1, &end, 1);
    if (root != NULL) {
        char place[DMLRUN_PLACE_CAPACITY] = "";
        if (find_duplicate_member(root, place, source)) return root;
        cJSON_Delete(root);
        return NULL;
    }

    size_t offset = (end != NULL && end >= text && end <= text + length) ? (size_t)(end - text) : length;
    dmlrun_json_line_column(text, offset, &line, &column);
    if (json_allocation_failed) {
        dmlrun_fail(NULL, "%s:%u:%u: out of memory while parsing the JSON (%zu bytes of text)", source, line, column,
                    length);
        return NULL;
    }
    size_t rest = offset;
    while (rest < length && isspace((unsigned char)text[rest]))
        rest++;
    if (rest >= length) {
        dmlrun_fail(NULL, "%s:%u:%u: JSON syntax error: unexpected end of the text (truncated JSON?)", source, line,
                    column);
        return NULL;
    }
    char snippet[32];
    size_t n = 0;
    for (size_t i = offset; i < length && n < 24; i++) {
        unsigned char c = (unsigned char)text[i];
        snippet[n++] = (c < 0x20 || c == 0x7F) ? ' ' : (char)c;
    }
    snippet[n] = '\0';
    dmlrun_fail(NULL, "%s:%u:%u: JSON syntax error near '%s'", source, line, column, snippet);
    return NULL;
}

/* ---- Members ---- */

const char* dmlrun_json_kind(const cJSON* value) {
    if (value == NULL) return "nothing";
    if (cJSON_IsNull(value)) return "null";
    if (cJSON_IsBool(value)) return "a boolean";
    if (cJSON_IsNumber(value)) return "a number";
    if (cJSON_IsString(value)) return "a string";
    if (cJSON_IsArray(value)) return "an array";
    if (cJSON_IsObject(value)) return "an object";
    return "an invalid value";
}

const cJSON* dmlrun_json_member(const cJSON* object, const char* name) {
    return cJSON_GetObjectItemCaseSensitive(object, name);
}

bool dmlrun_json_object(const cJSON* value, const char* place) {
    if (!cJSON_IsObject(value)) return dmlrun_fail(place, "must be an object, not %s", dmlrun_json_kind(value));
    return true;
}

bool dmlrun_json_check_object(const cJSON* object, const char* place, const char* const* known, size_t known_count,
                              const char* what) {
    if (!cJSON_IsObject(object))
        return dmlrun_fail(place, "%s must be an object, not %s", what, dmlrun_json_kind(object));
    for (const cJSON* member = object->child; member != NULL; member = member->next) {
        const char* name = member->string ? member->string : "";
        char member_place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_member(member_place, place, name);
        bool is_known = false;
        const char* same_but_case = NULL;
        for (size_t i = 0; i < known_count && !is_known; i++) {
            if (strcmp(known[i], name) == 0)
                is_known = true;
            else if (strcasecmp(known[i], name) == 0)
                same_but_case = known[i];
        }
        if (is_known) continue;
        /* As DxDispatch does, a field dmlrun does not know is ignored: with a
         * warning, since a misspelt optional field would go unnoticed. */
        if (same_but_case != NULL) {
            dmlrun_warning(member_place,
                           "unknown field '%s' in %s, ignored (field names are case-sensitive: did you mean "
                           "'%s'?)",
                           name, what, same_but_case);
            continue;
        }
        char list[1024];
        size_t used = 0;
        list[0] = '\0';
        for (size_t i = 0; i < known_count && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", known[i]);
        dmlrun_warning(member_place, "unknown field '%s' in %s, ignored (its fields: %s)", name, what,
                       known_count ? list : "none");
    }
    return true;
}

/* ---- Scalars ---- */

bool dmlrun_json_string(const cJSON* value, const char* place, const char** out) {
    if (!cJSON_IsString(value) || value->valuestring == NULL)
        return dmlrun_fail(place, "must be a string, not %s", dmlrun_json_kind(value));
    *out = value->valuestring;
    return true;
}

bool dmlrun_json_bool(const cJSON* value, const char* place, bool* out) {
    if (cJSON_IsBool(value)) {
        *out = cJSON_IsTrue(value);
        return true;
    }
    if (cJSON_IsNumber(value) && (value->valuedouble == 0 || value->valuedouble == 1)) {
        *out = value->valuedouble == 1;
        return true;
    }
    if (cJSON_IsNumber(value))
        return dmlrun_fail(place, "is %.17g but a boolean must be true, false, 0 or 1", value->valuedouble);
    return dmlrun_fail(place, "must be a boolean (true, false, 0 or 1), not %s", dmlrun_json_kind(value));
}

/* An integral JSON number within [min, max]. From 2^53 on, a JSON number may
 * already have been rounded (9007199254740993 reads as ...992): such values
 * must be written as decimal strings. */
static bool integral_number(const cJSON* value, const char* place, double min, double max, const char* type,
                            double* out) {
    double number = value->valuedouble;
    if (!isfinite(number) || number != floor(number))
        return dmlrun_fail(place, "is %.17g but must be an integer (%s)", number, type);
    if (number < min) return dmlrun_fail(place, "is %.17g but must be >= %.17g (%s)", number, min, type);
    if (number > max) return dmlrun_fail(place, "is %.17g but must be <= %.17g (%s)", number, max, type);
    if (fabs(number) >= 9007199254740992.0)
        return dmlrun_fail(place, "is 2^53 or beyond, where JSON numbers are not exact: write it as a decimal string");
    *out = number;
    return true;
}

bool dmlrun_json_uint32(const cJSON* value, const char* place, uint32_t* out) {
    if (!cJSON_IsNumber(value))
        return dmlrun_fail(place, "must be an unsigned integer, not %s", dmlrun_json_kind(value));
    double number = 0;
    if (!integral_number(value, place, 0, 4294967295.0, "UINT", &number)) return false;
    *out = (uint32_t)number;
    return true;
}

/* A decimal integer string (for 64-bit values beyond 2^53). */
static bool decimal_string(const char* text, const char* place, bool is_signed, uint64_t* magnitude, bool* negative) {
    const char* digits = text;
    *negative = false;
    if (is_signed && *digits == '-') {
        *negative = true;
        digits++;
    }
    if (*digits == '\0') return dmlrun_fail(place, "'%s' is not a decimal integer", text);
    for (const char* c = digits; *c; c++)
        if (!isdigit((unsigned char)*c)) return dmlrun_fail(place, "'%s' is not a decimal integer", text);
    errno = 0;
    unsigned long long parsed = strtoull(digits, NULL, 10);
    if (errno == ERANGE) return dmlrun_fail(place, "'%s' does not fit in 64 bits", text);
    *magnitude = parsed;
    return true;
}

bool dmlrun_json_uint64(const cJSON* value, const char* place, uint64_t* out) {
    if (cJSON_IsString(value) && value->valuestring) {
        bool negative;
        return decimal_string(value->valuestring, place, false, out, &negative);
    }
    if (!cJSON_IsNumber(value))
        return dmlrun_fail(place, "must be an unsigned integer, not %s", dmlrun_json_kind(value));
    double number = 0;
    if (!integral_number(value, place, 0, 18446744073709551615.0, "UINT64", &number)) return false;
    *out = (uint64_t)number;
    return true;
}

bool dmlrun_json_int64(const cJSON* value, const char* place, int64_t* out) {
    if (cJSON_IsString(value) && value->valuestring) {
        bool negative;
        uint64_t magnitude;
        if (!decimal_string(value->valuestring, place, true, &magnitude, &negative)) return false;
        if (magnitude > (negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
            return dmlrun_fail(place, "'%s' does not fit in INT64", value->valuestring);
        *out = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
        return true;
    }
    if (!cJSON_IsNumber(value)) return dmlrun_fail(place, "must be an integer, not %s", dmlrun_json_kind(value));
    double number = 0;
    if (!integral_number(value, place, -9223372036854775808.0, 9223372036854775807.0, "INT64", &number)) return false;
    *out = (int64_t)number;
    return true;
}

bool dmlrun_json_double(const cJSON* value, const char* place, double* out) {
    if (cJSON_IsNumber(value)) {
        *out = value->valuedouble;
        return true;
    }
    if (cJSON_IsString(value) && value->valuestring) {
        const char* text = value->valuestring;
        if (strcasecmp(text, "nan") == 0)
            *out = NAN;
        else if (strcasecmp(text, "inf") == 0 || strcasecmp(text, "+inf") == 0)
            *out = INFINITY;
        else if (strcasecmp(text, "-inf") == 0)
            *out = -INFINITY;
        else
            return dmlrun_fail(place, "'%s' is not a number (the strings allowed are \"nan\", \"inf\" and \"-inf\")",
                               text);
        return true;
    }
    return dmlrun_fail(place, "must be a number (or \"nan\", \"inf\", \"-inf\"), not %s", dmlrun_json_kind(value));
}

bool dmlrun_json_float(const cJSON* value, const char* place, float* out) {
    double number = 0;
    if (!dmlrun_json_double(value, place, &number)) return false;
    /* Values up to the midpoint above FLT_MAX round to FLT_MAX; beyond is an error. */
    if (isfinite(number) && fabs(number) >= 0x1.ffffffp+127)
        return dmlrun_fail(place, "%.17g is out of the FLOAT32 range", number);
    *out = isfinite(number) && fabs(number) > FLT_MAX ? (float)copysign(FLT_MAX, number) : (float)number;
    return true;
}

/* ---- Enumerations and flags ---- */

const char* dmlrun_enum_name(const dmlrun_enum* enumeration, int64_t value) {
    for (size_t i = 0; i < enumeration->count; i++)
        if (enumeration->values[i].value == value) return enumeration->values[i].name;
    return NULL;
}

static bool enum_by_name(const char* text, const char* place, const dmlrun_enum* enumeration, int64_t* out) {
    size_t prefix_length = strlen(enumeration->prefix);
    const char* short_name = strncmp(text, enumeration->prefix, prefix_length) == 0 ? text + prefix_length : text;
    for (size_t i = 0; i < enumeration->count; i++) {
        if (strcmp(short_name, enumeration->values[i].name) == 0) {
            *out = enumeration->values[i].value;
            return true;
        }
    }
    const char* same_but_case = NULL;
    char list[1024];
    size_t used = 0;
    list[0] = '\0';
    for (size_t i = 0; i < enumeration->count; i++) {
        if (strcasecmp(short_name, enumeration->values[i].name) == 0) same_but_case = enumeration->values[i].name;
        if (used < sizeof list)
            used +=
                (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", enumeration->values[i].name);
    }
    if (same_but_case != NULL)
        return dmlrun_fail(place, "'%s' is not a %s value (names are case-sensitive: did you mean '%s'?)", text,
                           enumeration->type_name, same_but_case);
    return dmlrun_fail(place, "'%s' is not a %s value (one of: %s; the prefix %s is optional)", text,
                       enumeration->type_name, list, enumeration->prefix);
}

bool dmlrun_json_enum(const cJSON* value, const char* place, const dmlrun_enum* enumeration, int64_t* out) {
    if (cJSON_IsString(value) && value->valuestring) return enum_by_name(value->valuestring, place, enumeration, out);
    if (cJSON_IsNumber(value)) {
        double number = 0;
        if (!integral_number(value, place, 0, 2147483647.0, enumeration->type_name, &number)) return false;
        *out = (int64_t)number;
        return true;
    }
    return dmlrun_fail(place, "must be a %s name or an integer, not %s", enumeration->type_name,
                       dmlrun_json_kind(value));
}

bool dmlrun_json_flags(const cJSON* value, const char* place, const dmlrun_enum* enumeration, uint32_t* out) {
    int64_t flag;
    if (cJSON_IsArray(value)) {
        uint32_t flags = 0;
        size_t index = 0;
        for (const cJSON* element = value->child; element != NULL; element = element->next, index++) {
            char element_place[DMLRUN_PLACE_CAPACITY];
            dmlrun_place_index(element_place, place, index);
            if (!cJSON_IsString(element))
                return dmlrun_fail(element_place, "must be a %s name, not %s", enumeration->type_name,
                                   dmlrun_json_kind(element));
            if (!enum_by_name(element->valuestring, element_place, enumeration, &flag)) return false;
            flags |= (uint32_t)flag;
        }
        *out = flags;
        return true;
    }
    if (cJSON_IsString(value) && value->valuestring) {
        if (!enum_by_name(value->valuestring, place, enumeration, &flag)) return false;
        *out = (uint32_t)flag;
        return true;
    }
    if (cJSON_IsNumber(value)) return dmlrun_json_uint32(value, place, out);
    return dmlrun_fail(place, "must be a %s name, an array of names or an integer, not %s", enumeration->type_name,
                       dmlrun_json_kind(value));
}
