/* IEEE-754 binary16 <-> binary32 conversion (round to nearest even), used by
 * every backend that stores FLOAT16 and computes in FLOAT32. */
#ifndef DML_CORE_HALF_H
#define DML_CORE_HALF_H

#include <stdint.h>
#include <string.h>

#include "portable.h"

DML_HOST_DEVICE float dml_bits_to_float(uint32_t bits) {
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

DML_HOST_DEVICE uint32_t dml_float_to_bits(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

DML_HOST_DEVICE float dml_half_to_float(uint16_t half) {
    uint32_t sign = (uint32_t)(half & 0x8000u) << 16;
    uint32_t exponent = (half >> 10) & 0x1Fu;
    uint32_t mantissa = half & 0x3FFu;
    if (exponent == 0x1F) return dml_bits_to_float(sign | 0x7F800000u | (mantissa << 13)); /* inf, NaN */
    if (exponent != 0) return dml_bits_to_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
    /* Subnormal or zero: mantissa * 2^-24, exact in binary32. */
    float magnitude = (float)mantissa * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
}

DML_HOST_DEVICE uint16_t dml_float_to_half(float value) {
    uint32_t bits = dml_float_to_bits(value);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs_bits = bits & 0x7FFFFFFFu;
    if (abs_bits > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((abs_bits >> 13) & 0x3FFu)); /* NaN stays NaN */
    if (abs_bits >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds to >= 65520: inf */
    if (abs_bits < 0x38800000u) {
        /* Result is subnormal (or zero): round abs * 2^24 to an integer, ties to even. */
        if (abs_bits < 0x33000000u) return sign; /* below half the smallest subnormal */
        uint32_t exponent = abs_bits >> 23;
        uint32_t mantissa = (abs_bits & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126 - exponent; /* 14..24 */
        uint32_t result = mantissa >> shift;
        uint32_t remainder = mantissa & ((1u << shift) - 1);
        uint32_t halfway = 1u << (shift - 1);
        if (remainder > halfway || (remainder == halfway && (result & 1u))) result++;
        return (uint16_t)(sign | result);
    }
    /* Normal: rebias the exponent, round the low 13 mantissa bits to nearest even. */
    uint32_t rounded = abs_bits + 0xFFFu + ((abs_bits >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

#endif
