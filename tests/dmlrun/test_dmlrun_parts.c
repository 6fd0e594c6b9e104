/* dmlrun's parts on their own: .npy reading and writing, element values
 * (FLOAT16, text, sequences, ulps), the reproducible random generator, and
 * the operator schemas against the spec's binding-slot table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"
#include "npy.h"
#include "random.h"
#include "values.h"

/* ---- .npy ---- */

typedef struct npy_case {
    const char* descr;
    DML_TENSOR_DATA_TYPE type;
    unsigned size;
} npy_case;

static const npy_case npy_cases[] = {
    {"<f2", DML_TENSOR_DATA_TYPE_FLOAT16, 2}, {"<f4", DML_TENSOR_DATA_TYPE_FLOAT32, 4},
    {"<f8", DML_TENSOR_DATA_TYPE_FLOAT64, 8}, {"|i1", DML_TENSOR_DATA_TYPE_INT8, 1},
    {"|u1", DML_TENSOR_DATA_TYPE_UINT8, 1},   {"<i2", DML_TENSOR_DATA_TYPE_INT16, 2},
    {"<u2", DML_TENSOR_DATA_TYPE_UINT16, 2},  {"<i4", DML_TENSOR_DATA_TYPE_INT32, 4},
    {"<u4", DML_TENSOR_DATA_TYPE_UINT32, 4},  {"<i8", DML_TENSOR_DATA_TYPE_INT64, 8},
    {"<u8", DML_TENSOR_DATA_TYPE_UINT64, 8},  {"|b1", DML_TENSOR_DATA_TYPE_UINT8, 1},
};

/* A .npy file written by hand, as NumPy lays it out: magic, version, header
 * length (2 bytes for 1.0, 4 for 2.0), the dict padded with spaces to a
 * 64-byte boundary and ended by '\n', then data_bytes bytes of data. */
static uint8_t* make_npy(unsigned major, const char* dict, const void* data, size_t data_bytes, size_t* size) {
    size_t prefix = major == 1 ? 10 : 12;
    size_t dict_length = strlen(dict);
    size_t header_length = (prefix + dict_length + 1 + 63) / 64 * 64 - prefix;
    *size = prefix + header_length + data_bytes;
    uint8_t* file = malloc(*size);
    memcpy(file, "\x93NUMPY", 6);
    file[6] = (uint8_t)major;
    file[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++)
        file[8 + i] = (uint8_t)(header_length >> (8 * i));
    memcpy(file + prefix, dict, dict_length);
    memset(file + prefix + dict_length, ' ', header_length - dict_length - 1);
    file[prefix + header_length - 1] = '\n';
    memcpy(file + prefix + header_length, data, data_bytes);
    return file;
}

TEST_CASE(npy_every_dtype_in_versions_1_and_2) {
    uint8_t data[6 * 8];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)test_rand();
    for (size_t c = 0; c < sizeof npy_cases / sizeof npy_cases[0]; c++) {
        for (unsigned major = 1; major <= 2; major++) {
            char dict[128];
            snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2, 3), }",
                     npy_cases[c].descr);
            size_t size;
            uint8_t* file = make_npy(major, dict, data, 6 * npy_cases[c].size, &size);
            dmlrun_npy_array array;
            char error[256] = "";
            bool ok = dmlrun_npy_parse(file, size, &array, error, sizeof error);
            EXPECT(ok, "%s version %u: %s", npy_cases[c].descr, major, error);
            if (ok) {
                EXPECT(array.type == npy_cases[c].type, "%s: type %d", npy_cases[c].descr, (int)array.type);
                EXPECT(array.rank == 2 && array.shape[0] == 2 && array.shape[1] == 3, "%s: shape", npy_cases[c].descr);
                EXPECT(array.element_count == 6 && array.data_bytes == 6 * npy_cases[c].size, "%s: count",
                       npy_cases[c].descr);
                EXPECT(memcmp(array.data, data, 6 * npy_cases[c].size) == 0, "%s: data", npy_cases[c].descr);
            }
            free(file);
        }
    }
}

TEST_CASE(npy_write_then_read_every_type) {
    const DML_TENSOR_DATA_TYPE types[] = {
        DML_TENSOR_DATA_TYPE_FLOAT16, DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_FLOAT64,
        DML_TENSOR_DATA_TYPE_INT8,    DML_TENSOR_DATA_TYPE_UINT8,   DML_TENSOR_DATA_TYPE_INT16,
        DML_TENSOR_DATA_TYPE_UINT16,  DML_TENSOR_DATA_TYPE_INT32,   DML_TENSOR_DATA_TYPE_UINT32,
        DML_TENSOR_DATA_TYPE_INT64,   DML_TENSOR_DATA_TYPE_UINT64};
    const uint64_t shapes[][3] = {{5, 0, 0}, {2, 3, 0}, {1, 4, 2}, {0, 0, 0}};
    const uint32_t ranks[] = {1, 2, 3, 0};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        for (size_t s = 0; s < 4; s++) {
            uint64_t count = 1;
            for (uint32_t d = 0; d < ranks[s]; d++)
                count *= shapes[s][d];
            size_t bytes = (size_t)count * dmlDataTypeSize(types[t]);
            uint8_t data[64];
            for (size_t i = 0; i < bytes; i++)
                data[i] = (uint8_t)test_rand();
            uint8_t* file;
            size_t size;
            char error[256] = "";
            EXPECT(dmlrun_npy_write(types[t], ranks[s], shapes[s], data, bytes, &file, &size, error, sizeof error),
                   "write: %s", error);
            if (test_case_failed()) return;
            EXPECT(memcmp(file, "\x93NUMPY\x01\x00", 8) == 0, "magic and version 1.0");
            size_t header_length = (size_t)file[8] | (size_t)file[9] << 8;
            EXPECT((10 + header_length) % 64 == 0, "data starts on a 64-byte boundary (%zu)", 10 + header_length);
            EXPECT(file[10 + header_length - 1] == '\n', "header ends with a newline");
            dmlrun_npy_array array;
            EXPECT(dmlrun_npy_parse(file, size, &array, error, sizeof error), "read back: %s", error);
            EXPECT(array.type == types[t] && array.rank == ranks[s] && array.element_count == count, "type %d rank %u",
                   (int)types[t], ranks[s]);
            for (uint32_t d = 0; d < ranks[s] && d < array.rank; d++)
                EXPECT(array.shape[d] == shapes[s][d], "shape[%u]", d);
            EXPECT(bytes == 0 || memcmp(array.data, data, bytes) == 0, "data of type %d", (int)types[t]);
            free(file);
        }
    }
}

TEST_CASE(npy_one_dimensional_header_is_numpys) {
    float values[3] = {1, 2, 3};
    uint64_t shape[1] = {3};
    uint8_t* file;
    size_t size;
    char error[256];
    EXPECT(dmlrun_npy_write(DML_TENSOR_DATA_TYPE_FLOAT32, 1, shape, values, sizeof values, &file, &size, error,
                            sizeof error),
           "%s", error);
    const char expected[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
    EXPECT(memcmp(file + 10, expected, sizeof expected - 1) == 0, "header %.60s", (const char*)file + 10);
    free(file);
}

/* Big-endian files are byte-swapped to the machine's order (decision: swap
 * rather than reject, so that files saved with dtype '>f4' load). */
TEST_CASE(npy_big_endian_is_swapped) {
    const uint8_t f4[] = {0x3F, 0x80, 0x00, 0x00, 0xC0, 0x00, 0x00, 0x00}; /* 1.0f, -2.0f */
    const uint8_t i2[] = {0x01, 0x02, 0xFF, 0xFE};                         /* 258, -2 */
    const uint8_t u8[] = {0, 0, 0, 0, 0, 0, 0x01, 0x00};                   /* 256 */
    size_t size;
    dmlrun_npy_array array;
    char error[256] = "";
    uint8_t* file = make_npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f4, sizeof f4, &size);
    EXPECT(dmlrun_npy_parse(file, size, &array, error, sizeof error), "%s", error);
    float floats[2];
    memcpy(floats, array.data, sizeof floats);
    EXPECT(floats[0] == 1.0f && floats[1] == -2.0f, ">f4 gave %g %g", floats[0], floats[1]);
    free(file);
    file = make_npy(1, "{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", i2, sizeof i2, &size);
    EXPECT(dmlrun_npy_parse(file, size, &array, error, sizeof error), "%s", error);
    int16_t shorts[2];
    memcpy(shorts, array.data, sizeof shorts);
    EXPECT(shorts[0] == 258 && shorts[1] == -2, ">i2 gave %d %d", shorts[0], shorts[1]);
    free(file);
    file = make_npy(1, "{'descr': '>u8', 'fortran_order': False, 'shape': (1,), }", u8, sizeof u8, &size);
    EXPECT(dmlrun_npy_parse(file, size, &array, error, sizeof error), "%s", error);
    uint64_t big;
    memcpy(&big, array.data, sizeof big);
    EXPECT(big == 256, ">u8 gave %llu", (unsigned long long)big);
    free(file);
}

/* Fortran order is column-major: rejected unless it is the same layout. */
TEST_CASE(npy_fortran_order) {
    float data[6] = {0};
    size_t size;
    dmlrun_npy_array array;
    char error[256] = "";
    uint8_t* file = make_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data, sizeof data, &size);
    EXPECT(!dmlrun_npy_parse(file, size, &array, error, sizeof error), "2x3 Fortran order must be rejected");
    EXPECT(strstr(error, "fortran_order") != NULL, "message: %s", error);
    free(file);
    file = make_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 6, 1), }", data, sizeof data, &size);
    EXPECT(dmlrun_npy_parse(file, size, &array, error, sizeof error), "1x6x1 Fortran order is C order: %s", error);
    free(file);
}

TEST_CASE(npy_scalar_python2_and_key_order) {
    int32_t value = -7;
    size_t size;
    dmlrun_npy_array array;
    char error[256] = "";
    uint8_t* file = make_npy(1, "{'shape': (), 'fortran_order': False, 'descr': '<i4'}", &value, 4, &size);
    EXPECT(dmlrun_npy_parse(file, size, &array, error, sizeof error), "scalar: %s", error);
    EXPECT(array.rank == 0 && array.element_count == 1, "a scalar holds one element");
    free(file);
    int32_t pair[2] = {1, 2};
    file = make_npy(1, "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2L,)}", pair, 8, &size);
    EXPECT(dmlrun_npy_parse(file, size, &array, error, sizeof error), "2L and double quotes: %s", error);
    free(file);
}

TEST_CASE(npy_malformed_files_are_rejected) {
    struct {
        const char* dict;
        size_t data_bytes;
        const char* needle;
    } cases[] = {
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 8, "not supported"},
        {"{'descr': '<f3', 'fortran_order': False, 'shape': (1,), }", 3, "not supported"},
        {"{'descr': '|f4', 'fortran_order': False, 'shape': (1,), }", 4, "byte order"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4, "descr"},
        {"{'descr': '<f4', 'fortran_order': False, }", 4, "required"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", 4, "unexpected"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4, "repeated"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", 4, "fortran_order"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 4, "shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 4, "truncated"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 8, "unexpected bytes"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 4, "overflow"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 4, "too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,) } trailing", 4, "after"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,", 4, "shape"},
        {"{'descr': '<f4", 4, "descr"},
    };
    uint8_t zeros[16] = {0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t size;
        dmlrun_npy_array array;
        char error[256] = "";
        uint8_t* file = make_npy(1, cases[c].dict, zeros, cases[c].data_bytes, &size);
        EXPECT(!dmlrun_npy_parse(file, size, &array, error, sizeof error), "case %zu must fail: %s", c, cases[c].dict);
        EXPECT(strstr(error, cases[c].needle) != NULL, "case %zu: message '%s' lacks '%s'", c, error, cases[c].needle);
        free(file);
    }
    /* Broken prefixes: no magic, unknown version, header longer than the file, too short. */
    size_t size;
    char error[256];
    dmlrun_npy_array array;
    uint8_t* file = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", zeros, 4, &size);
    file[1] = 'X';
    EXPECT(!dmlrun_npy_parse(file, size, &array, error, sizeof error) && strstr(error, "magic"), "magic: %s", error);
    file[1] = 'N';
    file[6] = 4;
    EXPECT(!dmlrun_npy_parse(file, size, &array, error, sizeof error) && strstr(error, "version"), "version: %s",
           error);
    file[6] = 1;
    file[9] = 0x7F;
    EXPECT(!dmlrun_npy_parse(file, size, &array, error, sizeof error) && strstr(error, "truncated"), "%s", error);
    EXPECT(!dmlrun_npy_parse(file, 9, &array, error, sizeof error), "9 bytes");
    file[6] = 2;
    EXPECT(!dmlrun_npy_parse(file, 11, &array, error, sizeof error), "11 bytes of a version 2.0 file");
    free(file);
}

/* Random bytes after a valid prefix never crash the parser. */
TEST_CASE(npy_fuzzed_headers_never_crash) {
    const char* dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
    float data[4] = {0};
    for (int round = 0; round < 2000; round++) {
        size_t size;
        uint8_t* file = make_npy(1 + (unsigned)(round % 2), dict, data, sizeof data, &size);
        size_t flips = test_rand_range(1, 4);
        for (size_t f = 0; f < flips; f++)
            file[test_rand_range(6, (uint32_t)size - 1)] = (uint8_t)test_rand();
        size_t cut = test_rand_bool() ? size : test_rand_range(0, (uint32_t)size);
        dmlrun_npy_array array;
        char error[256];
        if (dmlrun_npy_parse(file, cut, &array, error, sizeof error))
            EXPECT(array.data + array.data_bytes <= file + cut, "data within the file");
        free(file);
    }
}

/* ---- Values ---- */

/* Every finite FLOAT16 survives the round trip; rounding agrees with the
 * harness's independent conversion on random doubles of every magnitude. */
TEST_CASE(half_conversion) {
    for (uint32_t bits = 0; bits < 0x10000; bits++) {
        if ((bits & 0x7C00) == 0x7C00 && (bits & 0x3FF)) continue; /* NaN */
        double value = dmlrun_half_to_double((uint16_t)bits);
        EXPECT(dmlrun_half_from_double(value) == bits, "0x%04x -> %g -> 0x%04x", bits, value,
               dmlrun_half_from_double(value));
        EXPECT(value == test_half_to_double((uint16_t)bits), "0x%04x decodes differently from the harness", bits);
        if (test_case_failed()) return;
    }
    for (int i = 0; i < 100000; i++) {
        double value = ldexp(test_rand_double(-1, 1), (int)test_rand_range(0, 50) - 30);
        EXPECT(dmlrun_half_from_double(value) == test_double_to_half(value), "%.17g: 0x%04x but the harness 0x%04x",
               value, dmlrun_half_from_double(value), test_double_to_half(value));
        if (test_case_failed()) return;
    }
    EXPECT(dmlrun_half_from_double(1.0 + 0x1p-11) == 0x3C00, "a tie rounds to even (down)");
    EXPECT(dmlrun_half_from_double(1.0 + 3 * 0x1p-11) == 0x3C02, "a tie rounds to even (up)");
    EXPECT(dmlrun_half_from_double(65519.0) == 0x7BFF, "65519 -> 65504");
    EXPECT(dmlrun_half_from_double(65520.0) == 0x7C00, "65520 -> inf");
    EXPECT(dmlrun_half_from_double(0x1p-25) == 0x0000, "2^-25 ties to 0");
    EXPECT(dmlrun_half_from_double(3 * 0x1p-26) == 0x0001, "3*2^-26 -> 2^-24");
    EXPECT(dmlrun_half_from_double(-0.0) == 0x8000, "-0");
    EXPECT((dmlrun_half_from_double(NAN) & 0x7FFF) > 0x7C00, "NaN");
}

static void expect_format(DML_TENSOR_DATA_TYPE type, const void* value, const char* expected) {
    char text[64];
    dmlrun_value_format(type, value, text, sizeof text);
    EXPECT(strcmp(text, expected) == 0, "type %d formats as '%s', expected '%s'", (int)type, text, expected);
}

/* Floating values print like C++ streams' default (%g, 6 significant
 * digits): what DxDispatch's print shows. */
TEST_CASE(value_text_is_dxdispatchs) {
    float f[] = {0.1f, 1e-5f, 123456789.0f, -2.5f, 1.21267811f, 0.0f, NAN, -INFINITY, INFINITY};
    const char* texts[] = {"0.1", "1e-05", "1.23457e+08", "-2.5", "1.21268", "0", "nan", "-inf", "inf"};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        expect_format(DML_TENSOR_DATA_TYPE_FLOAT32, &f[i], texts[i]);
    double d = 1.0 / 3;
    expect_format(DML_TENSOR_DATA_TYPE_FLOAT64, &d, "0.333333");
    uint16_t h = 0x3555; /* 0.333251953125 */
    expect_format(DML_TENSOR_DATA_TYPE_FLOAT16, &h, "0.333252");
    int8_t i8 = -5;
    expect_format(DML_TENSOR_DATA_TYPE_INT8, &i8, "-5");
    uint8_t u8 = 200;
    expect_format(DML_TENSOR_DATA_TYPE_UINT8, &u8, "200");
    int16_t i16 = -32768;
    expect_format(DML_TENSOR_DATA_TYPE_INT16, &i16, "-32768");
    uint32_t u32 = 4294967295u;
    expect_format(DML_TENSOR_DATA_TYPE_UINT32, &u32, "4294967295");
    int64_t i64 = INT64_MIN;
    expect_format(DML_TENSOR_DATA_TYPE_INT64, &i64, "-9223372036854775808");
    uint64_t u64 = UINT64_MAX;
    expect_format(DML_TENSOR_DATA_TYPE_UINT64, &u64, "18446744073709551615");
}

TEST_CASE(value_from_json_checks_ranges) {
    struct {
        DML_TENSOR_DATA_TYPE type;
        const char* json;
        bool ok;
        double value;
    } cases[] = {
        {DML_TENSOR_DATA_TYPE_INT8, "-128", true, -128},
        {DML_TENSOR_DATA_TYPE_INT8, "128", false, 0},
        {DML_TENSOR_DATA_TYPE_UINT8, "255", true, 255},
        {DML_TENSOR_DATA_TYPE_UINT8, "-1", false, 0},
        {DML_TENSOR_DATA_TYPE_INT32, "2.5", false, 0},
        {DML_TENSOR_DATA_TYPE_INT32, "\"nan\"", false, 0},
        {DML_TENSOR_DATA_TYPE_UINT32, "4294967296", false, 0},
        {DML_TENSOR_DATA_TYPE_INT64, "\"-9223372036854775808\"", true, -9223372036854775808.0},
        {DML_TENSOR_DATA_TYPE_UINT64, "\"18446744073709551615\"", true, 18446744073709551615.0},
        {DML_TENSOR_DATA_TYPE_UINT64, "18446744073709551615", false, 0}, /* not exact as a JSON number */
        {DML_TENSOR_DATA_TYPE_UINT64, "9007199254740993", false, 0},     /* reads as ...992: not exact */
        {DML_TENSOR_DATA_TYPE_UINT64, "9007199254740992", false, 0},     /* may be a rounded ...993 */
        {DML_TENSOR_DATA_TYPE_UINT64, "9007199254740991", true, 9007199254740991.0},
        {DML_TENSOR_DATA_TYPE_UINT64, "\"9007199254740993\"", true, 9007199254740993.0},
        {DML_TENSOR_DATA_TYPE_INT64, "-9007199254740993", false, 0},
        {DML_TENSOR_DATA_TYPE_FLOAT32, "1e39", false, 0},
        {DML_TENSOR_DATA_TYPE_FLOAT32, "\"-Inf\"", true, -INFINITY},
        {DML_TENSOR_DATA_TYPE_FLOAT32, "0.1", true, 0.1f},
        {DML_TENSOR_DATA_TYPE_FLOAT16, "65504", true, 65504},
        {DML_TENSOR_DATA_TYPE_FLOAT16, "65519", true, 65504}, /* below the midpoint: rounds to the largest */
        {DML_TENSOR_DATA_TYPE_FLOAT16, "65520", false, 0},    /* overflow is an error, as for FLOAT32 */
        {DML_TENSOR_DATA_TYPE_FLOAT16, "-1e6", false, 0},
        {DML_TENSOR_DATA_TYPE_FLOAT16, "1e39", false, 0},
        {DML_TENSOR_DATA_TYPE_FLOAT16, "\"inf\"", true, INFINITY},
        {DML_TENSOR_DATA_TYPE_FLOAT64, "\"text\"", false, 0},
        {DML_TENSOR_DATA_TYPE_FLOAT64, "true", false, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cJSON* json = cJSON_Parse(cases[c].json);
        uint8_t stored[8] = {0};
        bool ok = dmlrun_value_from_json(cases[c].type, json, "test", stored);
        EXPECT(ok == cases[c].ok, "%s as type %d: %s", cases[c].json, (int)cases[c].type, ok ? "accepted" : "rejected");
        if (ok && cases[c].ok)
            EXPECT(dmlrun_value_to_double(cases[c].type, stored) == cases[c].value, "%s stored as %.17g", cases[c].json,
                   dmlrun_value_to_double(cases[c].type, stored));
        cJSON_Delete(json);
    }
    cJSON* nan_json = cJSON_Parse("\"NaN\"");
    float stored;
    EXPECT(dmlrun_value_from_json(DML_TENSOR_DATA_TYPE_FLOAT32, nan_json, "test", &stored) && isnan(stored), "NaN");
    cJSON_Delete(nan_json);
}

/* Sequences accumulate in the element type (DxDispatch's value += delta). */
TEST_CASE(sequence_steps_in_the_element_type) {
    float acc = 0.0f, delta = 0.1f, reference = 0.0f;
    for (int i = 0; i < 100; i++) {
        dmlrun_value_add(DML_TENSOR_DATA_TYPE_FLOAT32, &acc, &delta);
        reference += 0.1f;
    }
    EXPECT(acc == reference, "float accumulation %.9g vs %.9g", acc, reference);
    uint8_t u = 250, step = 3;
    dmlrun_value_add(DML_TENSOR_DATA_TYPE_UINT8, &u, &step);
    EXPECT(u == 253, "uint8 step");
    dmlrun_value_add(DML_TENSOR_DATA_TYPE_UINT8, &u, &step);
    EXPECT(u == 0, "uint8 wraps around (%u)", u);
    uint16_t h = 0x3C00, hd = 0x1400; /* 1 + 2^-10 */
    dmlrun_value_add(DML_TENSOR_DATA_TYPE_FLOAT16, &h, &hd);
    EXPECT(h == 0x3C01, "half 1 + 2^-10 = 0x%04x", h);
}

TEST_CASE(ulp_distances) {
    float one = 1.0f, next = nextafterf(1.0f, 2.0f), minus = -1.0f, pz = 0.0f, nz = -0.0f;
    float tiny = nextafterf(0.0f, 1.0f), minus_tiny = -tiny;
    EXPECT(dmlrun_value_ulp_distance(DML_TENSOR_DATA_TYPE_FLOAT32, &one, &next) == 1, "1 ulp");
    EXPECT(dmlrun_value_ulp_distance(DML_TENSOR_DATA_TYPE_FLOAT32, &pz, &nz) == 0, "+0 and -0");
    EXPECT(dmlrun_value_ulp_distance(DML_TENSOR_DATA_TYPE_FLOAT32, &tiny, &minus_tiny) == 2, "across zero");
    EXPECT(dmlrun_value_ulp_distance(DML_TENSOR_DATA_TYPE_FLOAT32, &one, &minus) == 2u * 0x3F800000u, "1 and -1");
    double a = 1.0, b = nextafter(nextafter(1.0, 0), 0);
    EXPECT(dmlrun_value_ulp_distance(DML_TENSOR_DATA_TYPE_FLOAT64, &a, &b) == 2, "double 2 ulps");
    float nan = NAN;
    EXPECT(dmlrun_value_ulp_distance(DML_TENSOR_DATA_TYPE_FLOAT32, &one, &nan) == UINT64_MAX, "NaN is far");
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    EXPECT(dmlrun_value_ulp_distance(DML_TENSOR_DATA_TYPE_INT64, &lo, &hi) == UINT64_MAX, "int64 extremes");
}

/* ---- Random ---- */

TEST_CASE(random_building_blocks_match_libm) {
    for (int i = 0; i < 100000; i++) {
        double x = i < 50000 ? 1.0 - test_rand_double(0, 1)
                             : ldexp(test_rand_double(0.5, 1), (int)test_rand_range(0, 2000) - 1000);
        if (x <= 0) continue;
        double mine = dmlrun_log(x), reference = log(x);
        EXPECT(fabs(mine - reference) <= 4e-16 * fmax(1, fabs(reference)), "log(%.17g) = %.17g, libm %.17g", x, mine,
               reference);
        double turns = test_rand_double(0, 1), c, s;
        dmlrun_cos_sin_turns(turns, &c, &s);
        EXPECT(fabs(c - cos(6.283185307179586476925 * turns)) <= 2e-15 &&
                   fabs(s - sin(6.283185307179586476925 * turns)) <= 2e-15,
               "cos/sin of %.17g turns: %.17g %.17g", turns, c, s);
        if (test_case_failed()) return;
    }
    EXPECT(dmlrun_log(1.0) == 0.0, "log 1 = 0");
}

TEST_CASE(random_is_reproducible_and_distributed) {
    dmlrun_random a, b, c;
    dmlrun_random_seed(&a, 42);
    dmlrun_random_seed(&b, 42);
    dmlrun_random_seed(&c, 43);
    bool differs = false;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = dmlrun_random_next(&a), y = dmlrun_random_next(&b), z = dmlrun_random_next(&c);
        EXPECT(x == y, "same seed, same sequence (step %d)", i);
        differs = differs || x != z;
    }
    EXPECT(differs, "another seed, another sequence");
    const int n = 200000;
    double sum = 0, sum_squares = 0, normal_sum = 0, normal_squares = 0;
    dmlrun_random_seed(&a, test_rand());
    for (int i = 0; i < n; i++) {
        double u = dmlrun_random_uniform(&a);
        EXPECT(u >= 0 && u < 1, "uniform in [0, 1): %g", u);
        sum += u;
        sum_squares += u * u;
        double z = dmlrun_random_normal(&a);
        EXPECT(isfinite(z), "normal is finite");
        normal_sum += z;
        normal_squares += z * z;
        if (test_case_failed()) return;
    }
    double mean = sum / n, variance = sum_squares / n - mean * mean;
    EXPECT(fabs(mean - 0.5) < 0.01 && fabs(variance - 1.0 / 12) < 0.01, "uniform mean %g variance %g", mean, variance);
    double normal_mean = normal_sum / n, normal_variance = normal_squares / n - normal_mean * normal_mean;
    EXPECT(fabs(normal_mean) < 0.02 && fabs(normal_variance - 1) < 0.02, "normal mean %g variance %g", normal_mean,
           normal_variance);
}

/* ---- Schemas ---- */

/* The binding slots of spec tensors.md §6.1, field by field. */
static const struct {
    const char* op;
    const char* inputs;
    const char* outputs;
} slot_table[] = {
    {"MAX_POOLING", "InputTensor", "OutputTensor"},
    {"MAX_POOLING1", "InputTensor", "OutputTensor OutputIndicesTensor?"},
    {"MAX_POOLING2", "InputTensor", "OutputTensor OutputIndicesTensor?"},
    {"MAX_POOLING_GRAD", "InputTensor InputGradientTensor", "OutputGradientTensor"},
    {"ROI_POOLING", "InputTensor ROITensor", "OutputTensor"},
    {"ROI_ALIGN", "InputTensor ROITensor BatchIndicesTensor", "OutputTensor"},
    {"ROI_ALIGN1", "InputTensor ROITensor BatchIndicesTensor", "OutputTensor"},
    {"ROI_ALIGN_GRAD", "InputTensor? InputGradientTensor ROITensor BatchIndicesTensor",
     "OutputGradientTensor? OutputROIGradientTensor?"},
    {"BATCH_NORMALIZATION", "InputTensor MeanTensor VarianceTensor ScaleTensor BiasTensor", "OutputTensor"},
    {"BATCH_NORMALIZATION_TRAINING", "InputTensor ScaleTensor BiasTensor FusedAddTensor?",
     "OutputTensor OutputMeanTensor OutputVarianceTensor"},
    {"BATCH_NORMALIZATION_GRAD", "InputTensor InputGradientTensor MeanTensor VarianceTensor ScaleTensor",
     "OutputGradientTensor OutputScaleGradientTensor OutputBiasGradientTensor"},
    {"BATCH_NORMALIZATION_TRAINING_GRAD", "InputTensor InputGradientTensor MeanTensor VarianceTensor ScaleTensor",
     "OutputGradientTensor OutputScaleGradientTensor OutputBiasGradientTensor"},
};

/* "A B? C": the schema's tensor fields of one direction, '?' for optional. */
static void tensor_fields(const dmlrun_op_schema* schema, bool outputs, char* text, size_t capacity) {
    size_t used = 0;
    text[0] = '\0';
    for (size_t i = 0; i < schema->field_count; i++) {
        const dmlrun_field* field = &schema->fields[i];
        if (!dmlrun_field_is_tensor(field->kind) || dmlrun_field_is_input(field->kind) == outputs) continue;
        used += (size_t)snprintf(text + used, capacity - used, "%s%s%s", used ? " " : "", field->name,
                                 dmlrun_field_is_optional(field->kind) ? "?" : "");
    }
}

TEST_CASE(schemas_follow_the_spec_slot_table) {
    for (size_t i = 0; i < sizeof slot_table / sizeof slot_table[0]; i++) {
        const dmlrun_op_schema* schema = dmlrun_find_op_schema(slot_table[i].op);
        char prefixed[96];
        snprintf(prefixed, sizeof prefixed, "DML_OPERATOR_%s", slot_table[i].op);
        EXPECT(schema != NULL && schema == dmlrun_find_op_schema(prefixed), "%s has a schema", slot_table[i].op);
        if (schema == NULL) continue;
        char inputs[256], outputs[256];
        tensor_fields(schema, false, inputs, sizeof inputs);
        tensor_fields(schema, true, outputs, sizeof outputs);
        EXPECT(strcmp(inputs, slot_table[i].inputs) == 0, "%s inputs '%s'", slot_table[i].op, inputs);
        EXPECT(strcmp(outputs, slot_table[i].outputs) == 0, "%s outputs '%s'", slot_table[i].op, outputs);
    }
    const char* activations[] = {"LINEAR",     "SIGMOID",    "HARD_SIGMOID",        "TANH",     "SCALED_TANH",
                                 "RELU",       "LEAKY_RELU", "THRESHOLDED_RELU",    "ELU",      "CELU",
                                 "SCALED_ELU", "SOFTPLUS",   "PARAMETRIC_SOFTPLUS", "SOFTSIGN", "IDENTITY",
                                 "SHRINK",     "GELU"};
    for (size_t i = 0; i < sizeof activations / sizeof activations[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "ACTIVATION_%s", activations[i]);
        const dmlrun_op_schema* schema = dmlrun_find_op_schema(name);
        EXPECT(schema != NULL && schema->fusable, "%s is a fusable activation", name);
    }
    EXPECT(dmlrun_op_schema_count() == 12 + 17, "12 operators and 17 activations, not %zu", dmlrun_op_schema_count());
}

/* Fields in struct order, inside the struct, counts referenced by arrays. */
TEST_CASE(schemas_are_well_formed) {
    for (size_t s = 0; s < dmlrun_op_schema_count(); s++) {
        const dmlrun_op_schema* schema = dmlrun_op_schema_at(s);
        for (size_t i = 0; i < schema->field_count; i++) {
            const dmlrun_field* field = &schema->fields[i];
            size_t size = field->kind == DMLRUN_FIELD_SIZE_2D ? sizeof(DML_SIZE_2D)
                          : (dmlrun_field_is_tensor(field->kind) || field->kind == DMLRUN_FIELD_UINT_ARRAY ||
                             field->kind == DMLRUN_FIELD_FUSED_ACTIVATION)
                              ? sizeof(void*)
                              : 4;
            EXPECT(field->offset + size <= schema->desc_size, "%s.%s lies inside the struct", schema->name,
                   field->name);
            if (i > 0)
                EXPECT(field->offset > schema->fields[i - 1].offset, "%s.%s in struct order", schema->name,
                       field->name);
            EXPECT(field->kind != DMLRUN_FIELD_ENUM || field->enumeration != NULL, "%s.%s has its names", schema->name,
                   field->name);
            if (field->kind == DMLRUN_FIELD_UINT_ARRAY) {
                bool found = false;
                for (size_t j = 0; j < schema->field_count; j++)
                    found = found || (schema->fields[j].kind == DMLRUN_FIELD_COUNT &&
                                      strcmp(schema->fields[j].name, field->count_field) == 0);
                EXPECT(found, "%s.%s's count field %s exists", schema->name, field->name, field->count_field);
            }
        }
        if (schema->fusable)
            EXPECT(schema->field_count >= 2 && strcmp(schema->fields[0].name, "InputTensor") == 0 &&
                       strcmp(schema->fields[1].name, "OutputTensor") == 0,
                   "%s starts with InputTensor, OutputTensor", schema->name);
    }
}
