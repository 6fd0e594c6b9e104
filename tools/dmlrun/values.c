/* Elements of every tensor data type. */
#include "values.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json.h"

size_t dmlrun_value_size(DML_TENSOR_DATA_TYPE type) { return dmlDataTypeSize(type); }

bool dmlrun_value_is_float(DML_TENSOR_DATA_TYPE type) {
    return type == DML_TENSOR_DATA_TYPE_FLOAT16 || type == DML_TENSOR_DATA_TYPE_FLOAT32 ||
           type == DML_TENSOR_DATA_TYPE_FLOAT64;
}

bool dmlrun_value_is_signed(DML_TENSOR_DATA_TYPE type) {
    return type == DML_TENSOR_DATA_TYPE_INT8 || type == DML_TENSOR_DATA_TYPE_INT16 ||
           type == DML_TENSOR_DATA_TYPE_INT32 || type == DML_TENSOR_DATA_TYPE_INT64;
}

/* ---- FLOAT16 ---- */

uint16_t dmlrun_half_from_double(double value) {
    uint16_t sign = signbit(value) ? 0x8000 : 0;
    double magnitude = fabs(value);
    if (isnan(value)) return sign | 0x7E00;
    if (magnitude >= 65520.0) return sign | 0x7C00; /* 65520 is the midpoint above 65504: ties go to infinity */
    if (magnitude < 0x1p-14) {
        /* Subnormal: a multiple of 2^-24, rounded to nearest even (1024 becomes the smallest normal). */
        return sign | (uint16_t)nearbyint(magnitude * 0x1p24);
    }
    int exponent;
    double fraction = frexp(magnitude, &exponent);    /* magnitude = fraction * 2^exponent, fraction in [0.5, 1) */
    double mantissa = nearbyint(ldexp(fraction, 11)); /* in [1024, 2048], rounded to nearest even */
    int biased = exponent - 1 + 15;
    if (mantissa == 2048.0) {
        mantissa = 1024.0;
        biased++;
    }
    if (biased >= 31) return sign | 0x7C00;
    return sign | (uint16_t)(biased << 10) | (uint16_t)((uint16_t)mantissa - 1024);
}

double dmlrun_half_to_double(uint16_t bits) {
    double sign = (bits & 0x8000) ? -1.0 : 1.0;
    unsigned exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
    if (exponent == 0) return sign * ldexp(mantissa, -24);
    if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
    return sign * ldexp(mantissa + 1024, (int)exponent - 25);
}

/* ---- From JSON and doubles ---- */

static bool integer_range(DML_TENSOR_DATA_TYPE type, int64_t* min, uint64_t* max) {
    switch (type) {
    case DML_TENSOR_DATA_TYPE_INT8: *min = INT8_MIN, *max = INT8_MAX; return true;
    case DML_TENSOR_DATA_TYPE_INT16: *min = INT16_MIN, *max = INT16_MAX; return true;
    case DML_TENSOR_DATA_TYPE_INT32: *min = INT32_MIN, *max = INT32_MAX; return true;
    case DML_TENSOR_DATA_TYPE_INT64: *min = INT64_MIN, *max = INT64_MAX; return true;
    case DML_TENSOR_DATA_TYPE_UINT8: *min = 0, *max = UINT8_MAX; return true;
    case DML_TENSOR_DATA_TYPE_UINT16: *min = 0, *max = UINT16_MAX; return true;
    case DML_TENSOR_DATA_TYPE_UINT32: *min = 0, *max = UINT32_MAX; return true;
    case DML_TENSOR_DATA_TYPE_UINT64: *min = 0, *max = UINT64_MAX; return true;
    default: return false;
    }
}

/* Stores the integer (already known to be in range) little-endian-natively. */
static void store_integer(DML_TENSOR_DATA_TYPE type, uint64_t bits, void* dst) {
    size_t size = dmlrun_value_size(type);
    uint8_t u8 = (uint8_t)bits;
    uint16_t u16 = (uint16_t)bits;
    uint32_t u32 = (uint32_t)bits;
    if (size == 1)
        memcpy(dst, &u8, 1);
    else if (size == 2)
        memcpy(dst, &u16, 2);
    else if (size == 4)
        memcpy(dst, &u32, 4);
    else
        memcpy(dst, &bits, 8);
}

static void store_float32(double value, void* dst) {
    float single;
    if (isfinite(value) && fabs(value) >= 0x1.ffffffp+127)
        single = value > 0 ? INFINITY : -INFINITY;
    else if (isfinite(value) && fabs(value) > FLT_MAX)
        single = value > 0 ? FLT_MAX : -FLT_MAX;
    else
        single = (float)value;
    memcpy(dst, &single, sizeof single);
}

bool dmlrun_value_from_json(DML_TENSOR_DATA_TYPE type, const cJSON* json, const char* place, void* dst) {
    const char* name = dmlDataTypeName(type) ? dmlDataTypeName(type) : "?";
    if (dmlrun_value_is_float(type)) {
        double value;
        if (type == DML_TENSOR_DATA_TYPE_FLOAT64) {
            if (!dmlrun_json_double(json, place, &value)) return false;
            memcpy(dst, &value, sizeof value);
            return true;
        }
        if (!dmlrun_json_double(json, place, &value)) return false;
        /* Values up to the midpoint above the largest finite value round to
         * it; beyond is an error, as for FLOAT32 (infinity is written "inf"). */
        double midpoint = type == DML_TENSOR_DATA_TYPE_FLOAT32 ? 0x1.ffffffp+127 : 65520.0;
        if (isfinite(value) && fabs(value) >= midpoint)
            return dmlrun_fail(place, "%.17g is out of the %s range (+-%s)", value, name,
                               type == DML_TENSOR_DATA_TYPE_FLOAT32 ? "3.4028235e38" : "65504");
        dmlrun_value_from_double(type, value, dst);
        return true;
    }
    int64_t min;
    uint64_t max;
    if (!integer_range(type, &min, &max)) return dmlrun_fail(place, "data type %s has no element values", name);
    if (cJSON_IsNumber(json) && json->valuedouble != floor(json->valuedouble))
        return dmlrun_fail(place, "is %.17g but must be an integer (%s)", json->valuedouble, name);
    if (dmlrun_value_is_signed(type)) {
        int64_t value;
        if (!dmlrun_json_int64(json, place, &value)) return false;
        if (value < min || (value > 0 && (uint64_t)value > max))
            return dmlrun_fail(place, "%" PRId64 " is out of the %s range [%" PRId64 ", %" PRIu64 "]", value, name, min,
                               max);
        store_integer(type, (uint64_t)value, dst);
    } else {
        uint64_t value;
        if (cJSON_IsNumber(json) && json->valuedouble < 0)
            return dmlrun_fail(place, "%.17g is out of the %s range [0, %" PRIu64 "]", json->valuedouble, name, max);
        if (!dmlrun_json_uint64(json, place, &value)) return false;
        if (value > max)
            return dmlrun_fail(place, "%" PRIu64 " is out of the %s range [0, %" PRIu64 "]", value, name, max);
        store_integer(type, value, dst);
    }
    return true;
}

void dmlrun_value_from_double(DML_TENSOR_DATA_TYPE type, double value, void* dst) {
    if (type == DML_TENSOR_DATA_TYPE_FLOAT64) {
        memcpy(dst, &value, sizeof value);
        return;
    }
    if (type == DML_TENSOR_DATA_TYPE_FLOAT32) {
        store_float32(value, dst);
        return;
    }
    if (type == DML_TENSOR_DATA_TYPE_FLOAT16) {
        uint16_t half = dmlrun_half_from_double(value);
        memcpy(dst, &half, sizeof half);
        return;
    }
    int64_t min;
    uint64_t max;
    if (!integer_range(type, &min, &max)) return;
    double rounded = isnan(value) ? 0.0 : nearbyint(value);
    if (dmlrun_value_is_signed(type)) {
        int64_t integer;
        if (rounded <= (double)min)
            integer = min;
        else if (rounded >= (double)max)
            integer = (int64_t)max; /* 2^63 as a double: clamp before converting */
        else
            integer = (int64_t)rounded;
        store_integer(type, (uint64_t)integer, dst);
    } else {
        uint64_t integer;
        if (rounded <= 0)
            integer = 0;
        else if (rounded >= (double)max)
            integer = max;
        else
            integer = (uint64_t)rounded;
        store_integer(type, integer, dst);
    }
}

/* ---- To doubles, bits and text ---- */

double dmlrun_value_to_double(DML_TENSOR_DATA_TYPE type, const void* src) {
    switch (type) {
    case DML_TENSOR_DATA_TYPE_FLOAT16: {
        uint16_t v;
        memcpy(&v, src, 2);
        return dmlrun_half_to_double(v);
    }
    case DML_TENSOR_DATA_TYPE_FLOAT32: {
        float v;
        memcpy(&v, src, 4);
        return v;
    }
    case DML_TENSOR_DATA_TYPE_FLOAT64: {
        double v;
        memcpy(&v, src, 8);
        return v;
    }
    case DML_TENSOR_DATA_TYPE_UINT8: {
        uint8_t v;
        memcpy(&v, src, 1);
        return v;
    }
    case DML_TENSOR_DATA_TYPE_UINT16: {
        uint16_t v;
        memcpy(&v, src, 2);
        return v;
    }
    case DML_TENSOR_DATA_TYPE_UINT32: {
        uint32_t v;
        memcpy(&v, src, 4);
        return v;
    }
    case DML_TENSOR_DATA_TYPE_UINT64: {
        uint64_t v;
        memcpy(&v, src, 8);
        return (double)v;
    }
    case DML_TENSOR_DATA_TYPE_INT8: {
        int8_t v;
        memcpy(&v, src, 1);
        return v;
    }
    case DML_TENSOR_DATA_TYPE_INT16: {
        int16_t v;
        memcpy(&v, src, 2);
        return v;
    }
    case DML_TENSOR_DATA_TYPE_INT32: {
        int32_t v;
        memcpy(&v, src, 4);
        return v;
    }
    case DML_TENSOR_DATA_TYPE_INT64: {
        int64_t v;
        memcpy(&v, src, 8);
        return (double)v;
    }
    default: return 0;
    }
}

uint64_t dmlrun_value_bits(DML_TENSOR_DATA_TYPE type, const void* src) {
    uint64_t bits = 0;
    size_t size = dmlrun_value_size(type);
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    if (size == 1) {
        memcpy(&u8, src, 1);
        bits = u8;
    } else if (size == 2) {
        memcpy(&u16, src, 2);
        bits = u16;
    } else if (size == 4) {
        memcpy(&u32, src, 4);
        bits = u32;
    } else if (size == 8)
        memcpy(&bits, src, 8);
    return bits;
}

void dmlrun_value_format(DML_TENSOR_DATA_TYPE type, const void* src, char* text, size_t capacity) {
    if (dmlrun_value_is_float(type)) {
        double value = dmlrun_value_to_double(type, src);
        if (isnan(value))
            snprintf(text, capacity, "nan");
        else if (isinf(value))
            snprintf(text, capacity, value > 0 ? "inf" : "-inf");
        else
            snprintf(text, capacity, "%g", value);
        return;
    }
    if (dmlrun_value_is_signed(type)) {
        int64_t value;
        uint64_t bits = dmlrun_value_bits(type, src);
        size_t size = dmlrun_value_size(type);
        if (size < 8 && (bits >> (size * 8 - 1)) & 1) bits |= ~(uint64_t)0 << (size * 8); /* sign-extend */
        memcpy(&value, &bits, sizeof value);
        snprintf(text, capacity, "%" PRId64, value);
        return;
    }
    snprintf(text, capacity, "%" PRIu64, dmlrun_value_bits(type, src));
}

void dmlrun_value_add(DML_TENSOR_DATA_TYPE type, void* acc, const void* delta) {
    if (type == DML_TENSOR_DATA_TYPE_FLOAT32) {
        float a, d;
        memcpy(&a, acc, 4);
        memcpy(&d, delta, 4);
        a += d;
        memcpy(acc, &a, 4);
    } else if (type == DML_TENSOR_DATA_TYPE_FLOAT64) {
        double a, d;
        memcpy(&a, acc, 8);
        memcpy(&d, delta, 8);
        a += d;
        memcpy(acc, &a, 8);
    } else if (type == DML_TENSOR_DATA_TYPE_FLOAT16) {
        /* The sum of two halves is exact in a double: one rounding to half. */
        double sum = dmlrun_value_to_double(type, acc) + dmlrun_value_to_double(type, delta);
        uint16_t half = dmlrun_half_from_double(sum);
        memcpy(acc, &half, 2);
    } else {
        store_integer(type, dmlrun_value_bits(type, acc) + dmlrun_value_bits(type, delta), acc);
    }
}

/* Sign-magnitude bits -> magnitude and sign, for ulp distances. */
static uint64_t ulp_between(uint64_t a, uint64_t b, unsigned width) {
    uint64_t sign = (uint64_t)1 << (width - 1);
    uint64_t magnitude_a = a & (sign - 1), magnitude_b = b & (sign - 1);
    if ((a & sign) == (b & sign))
        return magnitude_a > magnitude_b ? magnitude_a - magnitude_b : magnitude_b - magnitude_a;
    return magnitude_a + magnitude_b; /* across zero (+0 and -0 are 0 apart) */
}

uint64_t dmlrun_value_ulp_distance(DML_TENSOR_DATA_TYPE type, const void* a, const void* b) {
    if (dmlrun_value_is_float(type)) {
        double value_a = dmlrun_value_to_double(type, a), value_b = dmlrun_value_to_double(type, b);
        if (isnan(value_a) || isnan(value_b)) return isnan(value_a) && isnan(value_b) ? 0 : UINT64_MAX;
        return ulp_between(dmlrun_value_bits(type, a), dmlrun_value_bits(type, b),
                           (unsigned)dmlrun_value_size(type) * 8);
    }
    if (dmlrun_value_is_signed(type)) {
        double value_a = dmlrun_value_to_double(type, a), value_b = dmlrun_value_to_double(type, b);
        if (type != DML_TENSOR_DATA_TYPE_INT64) return (uint64_t)fabs(value_a - value_b);
        int64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        return x > y ? (uint64_t)x - (uint64_t)y : (uint64_t)y - (uint64_t)x;
    }
    uint64_t x = dmlrun_value_bits(type, a), y = dmlrun_value_bits(type, b);
    return x > y ? x - y : y - x;
}
