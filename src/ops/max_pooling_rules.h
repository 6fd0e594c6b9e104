/* The max pooling rules both backends apply (spec max_pooling.md §5):
 * where each window's taps fall, and which of two values wins. */
#ifndef DML_OPS_MAX_POOLING_RULES_H
#define DML_OPS_MAX_POOLING_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/elements.h"
#include "../core/tensor.h"
#include "max_pooling.h"

/* A pooling tensor seen as 5-D {N, C, D, H, W}: a 4-D one gets a unit D. */
typedef struct dml_pool_view {
    uint32_t sizes[5];
    uint64_t strides[5]; /* elements */
} dml_pool_view;

DML_HOST_DEVICE dml_pool_view dml_pool_view_5d(const dml_tensor* tensor) {
    dml_pool_view view;
    uint32_t skip = tensor->rank == 4 ? 1 : 0;
    for (uint32_t i = 0, j = 0; i < 5; i++) {
        if (skip && i == 2) {
            view.sizes[i] = 1;
            view.strides[i] = 0;
            continue;
        }
        view.sizes[i] = tensor->sizes[j];
        view.strides[i] = tensor->strides[j];
        j++;
    }
    return view;
}

/* The taps of output coordinate `out` along spatial dimension `dim` (0 = D)
 * that land inside the input: tap k in [begin, end) reads position
 * start + k * dilation. Padding is never a candidate. */
typedef struct dml_pool_taps {
    int64_t start;
    uint32_t begin, end;
} dml_pool_taps;

DML_HOST_DEVICE dml_pool_taps dml_pool_window_taps(const dml_pooling_params* p, uint32_t dim, uint32_t out,
                                                   uint32_t in_size) {
    dml_pool_taps r = {0, 0, 0};
    int64_t dilation = p->dilations[dim], window = p->window[dim];
    /* out * stride < 2^64 always, but may not fit int64: a window starting
     * past the input's end has no taps. */
    uint64_t offset = (uint64_t)out * p->strides[dim];
    if (offset >= (uint64_t)p->start_padding[dim] + in_size) return r;
    r.start = (int64_t)offset - (int64_t)p->start_padding[dim];
    int64_t last = (int64_t)in_size - r.start; /* > 0: taps need pos < in_size */
    int64_t first, end;
    if (dilation == 1) { /* the common case, without divisions */
        first = r.start >= 0 ? 0 : -r.start;
        end = last;
    } else {
        first = r.start >= 0 ? 0 : (-r.start + dilation - 1) / dilation; /* first k with pos >= 0 */
        end = (last + dilation - 1) / dilation;
    }
    if (end > window) end = window;
    if (first > end) first = end;
    r.begin = (uint32_t)first;
    r.end = (uint32_t)end;
    return r;
}

/* The outputs along spatial dimension `dim` whose windows contain input
 * coordinate x are among [first, end), increasing: those o with
 * o * stride == x + start_padding - k * dilation for some tap k < window;
 * dml_pool_window_contains says which (a dilated window skips coordinates).
 * The gradient's gather form visits them in this order on every backend. */
typedef struct dml_pool_cover {
    uint32_t first, end;
} dml_pool_cover;

DML_HOST_DEVICE dml_pool_cover dml_pool_covering_windows(const dml_pooling_params* p, uint32_t dim, uint32_t x,
                                                         uint32_t out_size) {
    uint64_t stride = p->strides[dim];
    uint64_t reach = (uint64_t)(p->window[dim] - 1) * p->dilations[dim]; /* < 2^64 */
    uint64_t padded = (uint64_t)x + p->start_padding[dim];               /* < 2^33 */
    uint64_t first = reach >= padded ? 0 : (padded - reach + stride - 1) / stride;
    uint64_t end = padded / stride + 1;
    dml_pool_cover c;
    c.end = end < out_size ? (uint32_t)end : out_size;
    c.first = first < c.end ? (uint32_t)first : c.end;
    return c;
}

DML_HOST_DEVICE bool dml_pool_window_contains(const dml_pooling_params* p, uint32_t dim, uint32_t x, uint32_t out) {
    if (p->dilations[dim] == 1) return true;
    int64_t distance = (int64_t)x + p->start_padding[dim] - (int64_t)out * p->strides[dim];
    return distance % p->dilations[dim] == 0;
}

/* greater(v, best) of floating-point windows is dml_nan_aware_greater
 * (decision MP-3; FLOAT16 compared exactly as FLOAT32); integers: plain >. */
DML_HOST_DEVICE bool dml_pool_greater_f16(uint16_t v, uint16_t best) {
    return dml_nan_aware_greater(dml_half_to_float(v), dml_half_to_float(best));
}

#endif
