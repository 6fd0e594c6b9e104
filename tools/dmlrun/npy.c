/* NumPy .npy files: the format is a magic string, a version, a header that
 * is a Python dict literal ({'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), }) padded with spaces to a 64-byte boundary, then the
 * raw elements. */
#include "npy.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct npy_dtype {
    char kind;
    unsigned size;
    DML_TENSOR_DATA_TYPE type;
} npy_dtype;

static const npy_dtype npy_dtypes[] = {
    {'f', 2, DML_TENSOR_DATA_TYPE_FLOAT16}, {'f', 4, DML_TENSOR_DATA_TYPE_FLOAT32},
    {'f', 8, DML_TENSOR_DATA_TYPE_FLOAT64}, {'i', 1, DML_TENSOR_DATA_TYPE_INT8},
    {'i', 2, DML_TENSOR_DATA_TYPE_INT16},   {'i', 4, DML_TENSOR_DATA_TYPE_INT32},
    {'i', 8, DML_TENSOR_DATA_TYPE_INT64},   {'u', 1, DML_TENSOR_DATA_TYPE_UINT8},
    {'u', 2, DML_TENSOR_DATA_TYPE_UINT16},  {'u', 4, DML_TENSOR_DATA_TYPE_UINT32},
    {'u', 8, DML_TENSOR_DATA_TYPE_UINT64},  {'b', 1, DML_TENSOR_DATA_TYPE_UINT8}, /* bool: 0/1 bytes */
};

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

static bool report(char* error, size_t error_size, const char* format, ...) __attribute__((format(printf, 3, 4)));
static bool report(char* error, size_t error_size, const char* format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error, error_size, format, args);
    va_end(args);
    return false;
}

static bool host_is_little_endian(void) {
    const uint16_t one = 1;
    uint8_t first;
    memcpy(&first, &one, 1);
    return first == 1;
}

static void swap_elements(uint8_t* data, uint64_t count, unsigned size) {
    for (uint64_t i = 0; i < count; i++) {
        uint8_t* element = data + i * size;
        for (unsigned a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = element[a];
            element[a] = element[b];
            element[b] = t;
        }
    }
}

/* ---- The header dict ---- */

typedef struct header_reader {
    const char* text;
    size_t length, position;
    char* error;
    size_t error_size;
} header_reader;

static void skip_spaces(header_reader* r) {
    while (r->position < r->length && isspace((unsigned char)r->text[r->position]))
        r->position++;
}

static bool peek_is(header_reader* r, char c) { return r->position < r->length && r->text[r->position] == c; }

static bool expect_char(header_reader* r, char c) {
    skip_spaces(r);
    if (!peek_is(r, c))
        return report(r->error, r->error_size, "malformed header: expected '%c' at header byte %zu", c, r->position);
    r->position++;
    return true;
}

static bool read_quoted(header_reader* r, char* out, size_t capacity, const char* what) {
    skip_spaces(r);
    if (!peek_is(r, '\'') && !peek_is(r, '"'))
        return report(r->error, r->error_size, "malformed header: %s must be a quoted string", what);
    char quote = r->text[r->position++];
    size_t n = 0;
    while (r->position < r->length && r->text[r->position] != quote) {
        if (n + 1 >= capacity) return report(r->error, r->error_size, "malformed header: %s is too long", what);
        out[n++] = r->text[r->position++];
    }
    if (r->position >= r->length) return report(r->error, r->error_size, "malformed header: unterminated string");
    r->position++;
    out[n] = '\0';
    return true;
}

static bool read_word(header_reader* r, const char* word) {
    size_t n = strlen(word);
    if (r->length - r->position >= n && memcmp(r->text + r->position, word, n) == 0) {
        r->position += n;
        return true;
    }
    return false;
}

static bool read_shape(header_reader* r, dmlrun_npy_array* array) {
    if (!expect_char(r, '(')) return false;
    array->rank = 0;
    for (;;) {
        skip_spaces(r);
        if (peek_is(r, ')')) {
            r->position++;
            return true;
        }
        if (r->position >= r->length || !isdigit((unsigned char)r->text[r->position]))
            return report(r->error, r->error_size, "malformed header: shape must be a tuple of non-negative integers");
        uint64_t dimension = 0;
        while (r->position < r->length && isdigit((unsigned char)r->text[r->position])) {
            unsigned digit = (unsigned)(r->text[r->position++] - '0');
            if (dimension > (UINT64_MAX - digit) / 10)
                return report(r->error, r->error_size, "shape has a dimension too large for 64 bits");
            dimension = dimension * 10 + digit;
        }
        if (peek_is(r, 'L')) r->position++; /* Python 2 long literals */
        if (array->rank >= DMLRUN_NPY_MAX_RANK)
            return report(r->error, r->error_size, "shape has more than %d dimensions", DMLRUN_NPY_MAX_RANK);
        array->shape[array->rank++] = dimension;
        skip_spaces(r);
        if (peek_is(r, ','))
            r->position++;
        else if (!peek_is(r, ')'))
            return report(r->error, r->error_size, "malformed header: expected ',' or ')' in shape");
    }
}

static bool parse_descr(const char* descr, const npy_dtype** dtype, bool* big_endian, char* error, size_t error_size) {
    char order = descr[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return report(error, error_size, "descr '%s' is not a simple dtype such as '<f4'", descr);
    char kind = descr[1];
    char* end = NULL;
    unsigned long size = kind ? strtoul(descr + 2, &end, 10) : 0;
    if (kind == '\0' || end == descr + 2 || *end != '\0')
        return report(error, error_size, "descr '%s' is not a simple dtype such as '<f4'", descr);
    for (size_t i = 0; i < sizeof npy_dtypes / sizeof npy_dtypes[0]; i++) {
        if (npy_dtypes[i].kind == kind && npy_dtypes[i].size == size) {
            if (order == '|' && size > 1)
                return report(error, error_size, "descr '%s': byte order '|' is only for 1-byte types", descr);
            *dtype = &npy_dtypes[i];
            *big_endian = order == '>' || (order == '=' && !host_is_little_endian());
            return true;
        }
    }
    return report(error, error_size, "dtype '%s' is not supported (supported: f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1)",
                  descr);
}

bool dmlrun_npy_parse(uint8_t* bytes, size_t size, dmlrun_npy_array* array, char* error, size_t error_size) {
    memset(array, 0, sizeof *array);
    if (size < 10 || memcmp(bytes, npy_magic, sizeof npy_magic) != 0)
        return report(error, error_size, "not a .npy file (no \\x93NUMPY magic string)");
    unsigned major = bytes[6], minor = bytes[7];
    size_t header_start, header_length;
    if (major == 1) {
        header_start = 10;
        header_length = (size_t)bytes[8] | (size_t)bytes[9] << 8;
    } else if (major == 2 || major == 3) {
        if (size < 12) return report(error, error_size, "truncated .npy header");
        header_start = 12;
        header_length = (size_t)bytes[8] | (size_t)bytes[9] << 8 | (size_t)bytes[10] << 16 | (size_t)bytes[11] << 24;
    } else {
        return report(error, error_size, ".npy format version %u.%u is not supported (1.0, 2.0 and 3.0 are)", major,
                      minor);
    }
    if (header_length > size - header_start)
        return report(error, error_size, "truncated .npy header (%zu bytes announced, %zu present)", header_length,
                      size - header_start);

    header_reader r = {(const char*)bytes + header_start, header_length, 0, error, error_size};
    const npy_dtype* dtype = NULL;
    bool big_endian = false, fortran_order = false, have_descr = false, have_order = false, have_shape = false;
    if (!expect_char(&r, '{')) return false;
    for (;;) {
        skip_spaces(&r);
        if (peek_is(&r, '}')) {
            r.position++;
            break;
        }
        char key[32], descr[32];
        if (!read_quoted(&r, key, sizeof key, "a key")) return false;
        if (!expect_char(&r, ':')) return false;
        skip_spaces(&r);
        if (strcmp(key, "descr") == 0 && !have_descr) {
            if (!read_quoted(&r, descr, sizeof descr, "descr")) return false;
            if (!parse_descr(descr, &dtype, &big_endian, error, error_size)) return false;
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if (read_word(&r, "True"))
                fortran_order = true;
            else if (read_word(&r, "False"))
                fortran_order = false;
            else
                return report(error, error_size, "malformed header: fortran_order must be True or False");
            have_order = true;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if (!read_shape(&r, array)) return false;
            have_shape = true;
        } else {
            return report(error, error_size, "malformed header: unexpected or repeated key '%s'", key);
        }
        skip_spaces(&r);
        if (peek_is(&r, ','))
            r.position++;
        else if (!peek_is(&r, '}'))
            return report(error, error_size, "malformed header: expected ',' or '}'");
    }
    skip_spaces(&r);
    if (r.position != r.length) return report(error, error_size, "malformed header: text after the closing '}'");
    if (!have_descr || !have_order || !have_shape)
        return report(error, error_size, "malformed header: 'descr', 'fortran_order' and 'shape' are required");

    uint64_t count = 1;
    unsigned long_dimensions = 0;
    for (uint32_t i = 0; i < array->rank; i++) {
        if (array->shape[i] != 0 && count > UINT64_MAX / array->shape[i])
            return report(error, error_size, "shape's element count overflows 64 bits");
        count *= array->shape[i];
        if (array->shape[i] > 1) long_dimensions++;
    }
    /* Fortran order is column-major; with at most one dimension larger than
     * 1 it is the same layout as C order. */
    if (fortran_order && long_dimensions > 1)
        return report(error, error_size,
                      "fortran_order True is not supported for this shape (save the array in C "
                      "order, e.g. with numpy.ascontiguousarray)");
    if (count > UINT64_MAX / dtype->size) return report(error, error_size, "data size overflows 64 bits");
    uint64_t data_bytes = count * dtype->size;
    size_t data_start = header_start + header_length;
    uint64_t present = size - data_start;
    if (present < data_bytes)
        return report(error, error_size, "truncated data: the header announces %llu bytes, the file has %llu",
                      (unsigned long long)data_bytes, (unsigned long long)present);
    if (present > data_bytes)
        return report(error, error_size, "%llu unexpected bytes after the data",
                      (unsigned long long)(present - data_bytes));
    array->type = dtype->type;
    array->element_count = count;
    array->data = bytes + data_start;
    array->data_bytes = data_bytes;
    if (big_endian == host_is_little_endian() && dtype->size > 1) swap_elements(array->data, count, dtype->size);
    return true;
}

bool dmlrun_npy_write(DML_TENSOR_DATA_TYPE type, uint32_t rank, const uint64_t* shape, const void* data,
                      uint64_t data_bytes, uint8_t** out, size_t* out_size, char* error, size_t error_size) {
    *out = NULL;
    *out_size = 0;
    const npy_dtype* dtype = NULL;
    for (size_t i = 0; i < sizeof npy_dtypes / sizeof npy_dtypes[0] && dtype == NULL; i++)
        if (npy_dtypes[i].type == type && npy_dtypes[i].kind != 'b') dtype = &npy_dtypes[i];
    if (dtype == NULL) return report(error, error_size, "data type %d has no .npy dtype", (int)type);
    if (rank > DMLRUN_NPY_MAX_RANK) return report(error, error_size, "more than %d dimensions", DMLRUN_NPY_MAX_RANK);
    uint64_t count = 1;
    for (uint32_t i = 0; i < rank; i++) {
        if (shape[i] != 0 && count > UINT64_MAX / shape[i]) return report(error, error_size, "shape overflows");
        count *= shape[i];
    }
    if (count > UINT64_MAX / dtype->size || count * dtype->size != data_bytes)
        return report(error, error_size, "shape has %llu elements but the data holds %llu bytes of %u-byte elements",
                      (unsigned long long)count, (unsigned long long)data_bytes, dtype->size);

    /* The dict: at most ~22 characters per dimension plus the fixed text. */
    size_t dict_capacity = 96 + (size_t)rank * 24;
    char* dict = malloc(dict_capacity);
    if (dict == NULL) return report(error, error_size, "out of memory");
    size_t n = (size_t)snprintf(dict, dict_capacity, "{'descr': '%c%c%u', 'fortran_order': False, 'shape': (",
                                dtype->size == 1 ? '|' : '<', dtype->kind, dtype->size);
    for (uint32_t i = 0; i < rank; i++)
        n += (size_t)snprintf(dict + n, dict_capacity - n, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
    n += (size_t)snprintf(dict + n, dict_capacity - n, "%s), }", rank == 1 ? "," : "");

    /* Pad with spaces and end with '\n' so that the data starts on a 64-byte
     * boundary. With at most 64 dimensions the header stays far below the
     * 65535 bytes of format 1.0. */
    const size_t prefix = 10;
    size_t header_length = (prefix + n + 1 + 63) / 64 * 64 - prefix;
    if (data_bytes > SIZE_MAX - prefix - header_length) {
        free(dict);
        return report(error, error_size, "data too large");
    }
    size_t total = prefix + header_length + (size_t)data_bytes;
    uint8_t* file = malloc(total);
    if (file == NULL) {
        free(dict);
        return report(error, error_size, "out of memory");
    }
    memcpy(file, npy_magic, sizeof npy_magic);
    file[6] = 1;
    file[7] = 0;
    file[8] = (uint8_t)header_length;
    file[9] = (uint8_t)(header_length >> 8);
    memcpy(file + prefix, dict, n);
    memset(file + prefix + n, ' ', header_length - n - 1);
    file[prefix + header_length - 1] = '\n';
    if (data_bytes) memcpy(file + prefix + header_length, data, (size_t)data_bytes);
    if (!host_is_little_endian() && dtype->size > 1) swap_elements(file + prefix + header_length, count, dtype->size);
    free(dict);
    *out = file;
    *out_size = total;
    return true;
}
