/* The per-region math of ROI pooling (spec roi_pooling.md §3), shared by
 * every backend so that they resolve regions and bins identically: the batch
 * id and corner rounding of one ROI row, and the integer bin bounds.
 *
 * Only exact operations: one FLOAT32 product per corner, rounding, and
 * integer arithmetic in 128 bits. */
#ifndef DML_OPS_ROI_POOLING_MATH_H
#define DML_OPS_ROI_POOLING_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "roi_align_math.h" /* DML_HOST_DEVICE, dml_nan_aware_greater */

/* Rounded coordinates are clamped to +-2^61: the bin arithmetic below is then
 * exact in 128 bits, and results are exact for every |coordinate| < 2^61
 * (larger values, infinities included, behave as +-2^61). */
#define DML_ROI_POOLING_COORDINATE_LIMIT 2305843009213693952.0 /* 2^61 */

/* One ROI, resolved: its batch image and rounded, inclusive corners. */
typedef struct dml_pooled_region {
    bool valid; /* false: batch id out of [0, N) or NaN, or a NaN coordinate (RP-5, RP-6) */
    uint32_t batch;
    int64_t x1, y1;
    int64_t width, height; /* RW, RH >= 1 */
} dml_pooled_region;

/* roundHalfAwayFromZero(value * SpatialScale), the product in FLOAT32 (RP-2). */
DML_HOST_DEVICE int64_t dml_roi_pooling_coordinate(float value, float scale) {
    double rounded = roundf(value * scale);
    if (rounded > DML_ROI_POOLING_COORDINATE_LIMIT) rounded = DML_ROI_POOLING_COORDINATE_LIMIT;
    if (rounded < -DML_ROI_POOLING_COORDINATE_LIMIT) rounded = -DML_ROI_POOLING_COORDINATE_LIMIT;
    return (int64_t)rounded;
}

/* The region of one ROI row [BatchID, x1, y1, x2, y2] (values as FLOAT32)
 * over an input of `batch` images. */
DML_HOST_DEVICE dml_pooled_region dml_roi_pooled_region(const float values[5], uint32_t batch, float scale) {
    dml_pooled_region region = {false, 0, 0, 0, 0, 0};
    /* The batch id truncates toward zero: valid iff -1 < id < N (NaN fails). */
    if (!((double)values[0] > -1.0 && (double)values[0] < (double)batch)) return region;
    for (uint32_t k = 1; k < 5; k++)
        if (isnan(values[k] * scale)) return region;
    region.valid = true;
    region.batch = values[0] > 0.0f ? (uint32_t)values[0] : 0;
    region.x1 = dml_roi_pooling_coordinate(values[1], scale);
    region.y1 = dml_roi_pooling_coordinate(values[2], scale);
    int64_t x2 = dml_roi_pooling_coordinate(values[3], scale), y2 = dml_roi_pooling_coordinate(values[4], scale);
    /* Inclusive corners; degenerate or inverted regions are one pixel (RP-4). */
    region.width = x2 - region.x1 + 1 > 1 ? x2 - region.x1 + 1 : 1;
    region.height = y2 - region.y1 + 1 > 1 ? y2 - region.y1 + 1 : 1;
    return region;
}

/* Bin `index` of `count` over a region of `length` pixels starting at
 * `first`: [floor(index*length/count), ceil((index+1)*length/count)) + first,
 * clamped to [0, extent]. */
typedef struct dml_pooled_bin {
    uint32_t start, end;
} dml_pooled_bin;

DML_HOST_DEVICE uint32_t dml_roi_pooling_clamp(__int128 value, uint32_t extent) {
    if (value < 0) return 0;
    if (value > extent) return extent;
    return (uint32_t)value;
}

DML_HOST_DEVICE dml_pooled_bin dml_roi_pooled_bin(int64_t first, int64_t length, uint32_t index, uint32_t count,
                                                  uint32_t extent) {
    if (length <= INT32_MAX) { /* the common case, exact in 64 bits (and cheaper on a GPU) */
        uint64_t start = (uint64_t)index * (uint64_t)length / count;
        uint64_t end = (((uint64_t)index + 1) * (uint64_t)length + count - 1) / count;
        dml_pooled_bin bin = {dml_roi_pooling_clamp((__int128)start + first, extent),
                              dml_roi_pooling_clamp((__int128)end + first, extent)};
        return bin;
    }
    __int128 start = (__int128)index * length / count + first;
    __int128 end = (((__int128)index + 1) * length + count - 1) / count + first;
    dml_pooled_bin bin = {dml_roi_pooling_clamp(start, extent), dml_roi_pooling_clamp(end, extent)};
    return bin;
}

#endif
