/* Element rules both backends share (compiled as C for the CPU and by nvcc
 * for CUDA): FLOAT32/FLOAT16 loads and stores, rounding a FLOAT64 result to
 * FLOAT16 once, and the NaN-aware maximum. */
#ifndef DML_CORE_ELEMENTS_H
#define DML_CORE_ELEMENTS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "half.h"

/* Element `offset` of a FLOAT16 (half) or FLOAT32 tensor, as FLOAT32. */
DML_HOST_DEVICE float dml_load_float(const void* base, uint64_t offset, bool half) {
    return half ? dml_half_to_float(((const uint16_t*)base)[offset]) : ((const float*)base)[offset];
}

/* Stores a FLOAT32 value into a FLOAT16 (rounded once) or FLOAT32 tensor. */
DML_HOST_DEVICE void dml_store_float(void* base, uint64_t offset, bool half, float value) {
    if (half)
        ((uint16_t*)base)[offset] = dml_float_to_half(value);
    else
        ((float*)base)[offset] = value;
}

/* Rounds a FLOAT64 value to FLOAT16 once: to FLOAT32 toward zero with a
 * sticky last bit (round to odd), which the FLOAT16 rounding then resolves as
 * a direct FLOAT64 -> FLOAT16 rounding would. */
DML_HOST_DEVICE uint16_t dml_double_to_half(double value) {
    float rounded = (float)value;
    if ((double)rounded != value && isfinite(rounded) && !isnan(value)) {
        if (fabs((double)rounded) > fabs(value)) rounded = nextafterf(rounded, 0.0f);
        rounded = dml_bits_to_float(dml_float_to_bits(rounded) | 1u);
    }
    return dml_float_to_half(rounded);
}

/* Whether `value` replaces `best` as the maximum (max pooling's decision
 * MP-3, ROI pooling's and ROI align's MAX alike): strictly greater, and NaN
 * never wins over a number, while a number wins over NaN. */
DML_HOST_DEVICE bool dml_nan_aware_greater(float value, float best) {
    return value > best || (best != best && value == value);
}

#endif
