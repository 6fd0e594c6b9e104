/* The per-sample math of ROI align (spec roi_align.md §4, §7), shared by the
 * forward pass and the gradient of every backend, so that they sample,
 * round, clamp and weight identically.
 *
 * Everything is FLOAT32 as the spec prescribes (§4, RA-13), but for the sums
 * whose term count can pass 2^24 (RA-16): the average over an output's
 * samples and the feature gradient per element add their FLOAT32 terms in
 * FLOAT64, in a fixed order, on every backend. Expressions keep the spec's
 * evaluation order, so a backend that does not contract a*b+c into an FMA
 * reproduces the CPU bits. Every function is total: NaN or infinite
 * coordinates never produce an index outside the image. */
#ifndef DML_OPS_ROI_ALIGN_MATH_H
#define DML_OPS_ROI_ALIGN_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "../core/elements.h"
#include "roi.h"

/* One axis (X or Y) of one region (§4.1): where its samples lie. */
typedef struct dml_roi_axis {
    float start;         /* x1s: the first corner times SpatialScale */
    float size;          /* sizeX = x2s - x1s; 0 (empty) or negative (mirrored) allowed */
    float step;          /* sizeX / nX, or sizeX / (nX - 1) when aligned to corners */
    float scale;         /* SpatialScaleX: d(x1s)/d(x1) */
    uint32_t per_output; /* sX: samples per output element */
    uint64_t count;      /* nX = OW * sX (< 2^64) */
    uint32_t extent;     /* W: the input size along this axis (>= 1) */
} dml_roi_axis;

/* sX = clamp(ceil(|size| / outputs), Min, Max) in FLOAT32 (§4.1, RA-3). A NaN
 * size takes Min (its samples are all out of bounds anyway). */
DML_HOST_DEVICE uint32_t dml_roi_samples_per_output(float size, uint32_t outputs, uint32_t min_samples,
                                                    uint32_t max_samples) {
    float wanted = ceilf(fabsf(size) / (float)outputs);
    if (!((double)wanted > (double)min_samples)) return min_samples;
    if ((double)wanted >= (double)max_samples) return max_samples;
    return (uint32_t)wanted;
}

/* The axis of a region whose raw corners are corner1 (x1) and corner2 (x2). */
DML_HOST_DEVICE dml_roi_axis dml_roi_axis_make(float corner1, float corner2, float scale, uint32_t outputs,
                                               uint32_t extent, const dml_roi_align_params* p) {
    dml_roi_axis axis;
    axis.start = corner1 * scale;
    axis.size = corner2 * scale - axis.start;
    axis.scale = scale;
    axis.per_output = dml_roi_samples_per_output(axis.size, outputs, p->min_samples, p->max_samples);
    axis.count = (uint64_t)outputs * axis.per_output;
    axis.extent = extent;
    if (!p->align_corners)
        axis.step = axis.size / (float)axis.count;
    else if (axis.count > 1)
        axis.step = axis.size / (float)(axis.count - 1);
    else
        axis.step = 0.0f; /* unused: the single sample sits at the midpoint (RA-6) */
    return axis;
}

/* The input coordinate of sample t (0 <= t < count), in pixel-index space (§4.2). */
DML_HOST_DEVICE float dml_roi_sample_coord(const dml_roi_axis* axis, uint64_t t, const dml_roi_align_params* p) {
    if (!p->align_corners)
        return axis->start + ((float)t - p->output_pixel_offset) * axis->step - p->input_pixel_offset;
    if (axis->count > 1) return axis->start + (float)t * axis->step - p->input_pixel_offset;
    return axis->start + 0.5f * axis->size - p->input_pixel_offset;
}

/* A coordinate more than one pixel outside [0, extent - 1], or NaN, is out of
 * bounds (§4.3, RA-2); the whole sample then takes OutOfBoundsInputValue. */
DML_HOST_DEVICE bool dml_roi_out_of_bounds(float coord, uint32_t extent) {
    return !((double)coord >= -1.0 && (double)coord <= (double)extent);
}

/* NEAREST_NEIGHBOR: clamp(ceil(c - 0.5), 0, extent - 1); exact halves go down (RA-1). */
DML_HOST_DEVICE uint32_t dml_roi_nearest(float coord, uint32_t extent) {
    float rounded = ceilf(coord - 0.5f);
    if (!(rounded > 0.0f)) return 0;
    if ((double)rounded >= (double)extent - 1.0) return extent - 1;
    return (uint32_t)rounded;
}

/* LINEAR along one axis (§4.3 axis()): the two taps and the weight of the second. */
typedef struct dml_roi_linear_taps {
    uint32_t first, second;
    float fraction;
} dml_roi_linear_taps;

DML_HOST_DEVICE dml_roi_linear_taps dml_roi_linear(float coord, uint32_t extent) {
    dml_roi_linear_taps taps;
    if (!(coord > 0.0f)) coord = 0.0f; /* c <= 0: c = 0 (edge replication inside the margin) */
    float first = floorf(coord);
    if ((double)first >= (double)extent - 1.0) {
        taps.first = taps.second = extent - 1;
        taps.fraction = 0.0f;
        return taps;
    }
    taps.first = (uint32_t)first;
    taps.second = taps.first + 1;
    taps.fraction = coord - first;
    return taps;
}

/* Where one sample coordinate reads along its axis (§4.3): out of bounds, or
 * its taps (NEAREST_NEIGHBOR: first == second, fraction 0). Computed once per
 * sample index and combined for X and Y. */
typedef struct dml_roi_axis_sample {
    float coord; /* the sample coordinate (§4.2) */
    bool outside;
    uint32_t first, second;
    float fraction;
} dml_roi_axis_sample;

DML_HOST_DEVICE dml_roi_axis_sample dml_roi_axis_sample_at(const dml_roi_axis* axis, uint64_t t,
                                                           const dml_roi_align_params* p) {
    float coord = dml_roi_sample_coord(axis, t, p);
    dml_roi_axis_sample sample;
    sample.coord = coord;
    sample.outside = dml_roi_out_of_bounds(coord, axis->extent);
    if (p->interpolation_linear) {
        dml_roi_linear_taps taps = dml_roi_linear(coord, axis->extent);
        sample.first = taps.first;
        sample.second = taps.second;
        sample.fraction = taps.fraction;
    } else {
        sample.first = sample.second = dml_roi_nearest(coord, axis->extent);
        sample.fraction = 0.0f;
    }
    return sample;
}

/* S = sX * sY, the samples of one output element, as FLOAT32: the divisor
 * of AVERAGE (§4.4). */
DML_HOST_DEVICE float dml_roi_sample_count(const dml_roi_axis* x, const dml_roi_axis* y) {
    return (float)((uint64_t)x->per_output * y->per_output);
}

/* AVERAGE (§4.4): the FLOAT64 sum of an output's S samples divided by S,
 * rounded once to FLOAT32. S <= 2^32 (the device limit squared): the sum's
 * relative error stays below S * 2^-53 <= 2^-21 of the sum of magnitudes. */
DML_HOST_DEVICE float dml_roi_average(double sum, const dml_roi_axis* x, const dml_roi_axis* y) {
    return (float)(sum / (double)((uint64_t)x->per_output * y->per_output));
}

/* The interpolated value from the four taps (top = first Y tap, left = first X tap). */
DML_HOST_DEVICE float dml_roi_bilinear(float top_left, float top_right, float bottom_left, float bottom_right, float fx,
                                       float fy) {
    return (1.0f - fy) * ((1.0f - fx) * top_left + fx * top_right) +
           fy * ((1.0f - fx) * bottom_left + fx * bottom_right);
}

/* The four tap weights of the gradient (§7.2), in the order top-left,
 * top-right, bottom-left, bottom-right. */
DML_HOST_DEVICE void dml_roi_bilinear_weights(float fx, float fy, float weights[4]) {
    weights[0] = (1.0f - fy) * (1.0f - fx);
    weights[1] = (1.0f - fy) * fx;
    weights[2] = fy * (1.0f - fx);
    weights[3] = fy * fx;
}

/* AVERAGE: the weight w = 1 / S of every sample (§7.1). */
DML_HOST_DEVICE float dml_roi_average_weight(const dml_roi_axis* x, const dml_roi_axis* y) {
    return 1.0f / dml_roi_sample_count(x, y);
}

/* ---- ROI gradient (§7.3) ---- */

/* d(coordinate of sample t) / d(raw first corner) and / d(raw second corner). */
DML_HOST_DEVICE void dml_roi_coord_derivatives(const dml_roi_axis* axis, uint64_t t, const dml_roi_align_params* p,
                                               float* d_first, float* d_second) {
    float u;
    if (!p->align_corners)
        u = ((float)t - p->output_pixel_offset) / (float)axis->count;
    else if (axis->count > 1)
        u = (float)t / (float)(axis->count - 1);
    else
        u = 0.5f;
    *d_first = axis->scale * (1.0f - u);
    *d_second = axis->scale * u;
}

/* floor and ceil of the coordinate clamped into [0, extent - 1], and its
 * distance from the floor: the taps of the image gradient. At integer (or
 * clamped) coordinates low == high, so the gradient along the axis is 0 (RA-11). */
typedef struct dml_roi_gradient_taps {
    uint32_t low, high;
    float fraction;
} dml_roi_gradient_taps;

DML_HOST_DEVICE dml_roi_gradient_taps dml_roi_gradient_taps_at(float coord, uint32_t extent) {
    dml_roi_gradient_taps taps;
    if (!(coord > 0.0f)) {
        taps.low = taps.high = 0;
        taps.fraction = 0.0f;
    } else if ((double)coord >= (double)extent - 1.0) {
        taps.low = taps.high = extent - 1;
        taps.fraction = 0.0f;
    } else {
        float low = floorf(coord);
        taps.low = (uint32_t)low;
        taps.high = (uint32_t)ceilf(coord); /* <= extent - 1: coord < extent - 1, an integer */
        taps.fraction = coord - low;
    }
    return taps;
}

/* gradX = (1 - yl)(TR - TL) + yl (BR - BL); gradY = (1 - xl)(BL - TL) + xl (BR - TR). */
DML_HOST_DEVICE void dml_roi_image_gradient(float top_left, float top_right, float bottom_left, float bottom_right,
                                            float xl, float yl, float* grad_x, float* grad_y) {
    *grad_x = (1.0f - yl) * (top_right - top_left) + yl * (bottom_right - bottom_left);
    *grad_y = (1.0f - xl) * (bottom_left - top_left) + xl * (bottom_right - top_right);
}

/* The four terms g * w * grad * dc of one sample (§7.3), each in FLOAT32, in
 * the order d/dx1, d/dy1, d/dx2, d/dy2 (the columns of OutputROIGradient). */
DML_HOST_DEVICE void dml_roi_box_terms(const dml_roi_axis* x, const dml_roi_axis* y, uint64_t tx, uint64_t ty,
                                       const dml_roi_align_params* p, float weighted_gradient, float grad_x,
                                       float grad_y, float terms[4]) {
    float dx1, dx2, dy1, dy2;
    dml_roi_coord_derivatives(x, tx, p, &dx1, &dx2);
    dml_roi_coord_derivatives(y, ty, p, &dy1, &dy2);
    terms[0] = weighted_gradient * grad_x * dx1;
    terms[1] = weighted_gradient * grad_y * dy1;
    terms[2] = weighted_gradient * grad_x * dx2;
    terms[3] = weighted_gradient * grad_y * dy2;
}

/* The ROI gradient's fixed summation shape: each channel's terms are summed
 * in FLOAT64 from zero in §4.4 order; the channel sums are added in
 * increasing channel order within each of min(C, 16) channel groups (fixed by
 * C alone), and the group sums in increasing group order. Every backend
 * follows it, so the results are the same bits whatever the parallel plan. */
#define DML_ROI_GRADIENT_CHANNEL_GROUPS 16u

DML_HOST_DEVICE uint32_t dml_roi_gradient_groups(uint32_t channels) {
    return channels < DML_ROI_GRADIENT_CHANNEL_GROUPS ? channels : DML_ROI_GRADIENT_CHANNEL_GROUPS;
}

/* The first channel of group `group` (group == groups: C). */
DML_HOST_DEVICE uint32_t dml_roi_gradient_group_begin(uint32_t group, uint32_t groups, uint32_t channels) {
    return (uint32_t)((uint64_t)group * channels / groups);
}

#endif
