/* Float64 references for ROI pooling and ROI align, transcribed from the
 * spec's pseudo-code (roi_pooling.md §3, roi_align.md §4.1-4.4, §7). */
#include "roi_reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- ROI pooling ---- */

/* roundHalfAwayFromZero, then the project's clamp to +-2^61 (libdml's
 * documented limit for huge or infinite coordinates). */
static __int128 pooling_round(double value) {
    double rounded = round(value);
    const double limit = 2305843009213693952.0;
    if (rounded > limit) rounded = limit;
    if (rounded < -limit) rounded = -limit;
    return (__int128)rounded;
}

static __int128 floor_div(__int128 a, __int128 b) { /* b > 0 */
    __int128 q = a / b;
    if ((a % b != 0) && (a < 0)) q--;
    return q;
}

static __int128 clamp128(__int128 v, __int128 lo, __int128 hi) { return v < lo ? lo : v > hi ? hi : v; }

void ref_roi_pooling(const double* input, uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                     const double* rois, uint32_t roi_count, float spatial_scale, uint32_t pooled_height,
                     uint32_t pooled_width, double* output) {
    const __int128 H = height, W = width, PH = pooled_height, PW = pooled_width;
    for (uint32_t r = 0; r < roi_count; r++) {
        const double* roi = rois + (size_t)r * 5;
        /* Coordinates are multiplied by SpatialScale in FLOAT32. */
        double scaled[4];
        bool has_nan = false;
        for (int k = 0; k < 4; k++) {
            scaled[k] = (double)((float)roi[k + 1] * spatial_scale);
            has_nan |= isnan(scaled[k]);
        }
        double b_trunc = trunc(roi[0]);
        bool valid = !isnan(roi[0]) && !has_nan && b_trunc >= 0 && b_trunc < batch; /* RP-5, RP-6 */
        __int128 b = valid ? (__int128)b_trunc : 0;
        __int128 x1 = 0, y1 = 0, x2 = 0, y2 = 0;
        if (valid) {
            x1 = pooling_round(scaled[0]);
            y1 = pooling_round(scaled[1]);
            x2 = pooling_round(scaled[2]);
            y2 = pooling_round(scaled[3]);
        }
        __int128 RH = y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1;
        __int128 RW = x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1;
        for (uint32_t c = 0; c < channels; c++)
            for (__int128 ph = 0; ph < PH; ph++)
                for (__int128 pw = 0; pw < PW; pw++) {
                    double* out =
                        &output[(((size_t)r * channels + c) * pooled_height + (size_t)ph) * pooled_width + (size_t)pw];
                    if (!valid) {
                        *out = 0.0;
                        continue;
                    }
                    __int128 hStart = floor_div(ph * RH, PH) + y1;
                    __int128 hEnd = floor_div((ph + 1) * RH + PH - 1, PH) + y1;
                    __int128 wStart = floor_div(pw * RW, PW) + x1;
                    __int128 wEnd = floor_div((pw + 1) * RW + PW - 1, PW) + x1;
                    hStart = clamp128(hStart, 0, H);
                    hEnd = clamp128(hEnd, 0, H);
                    wStart = clamp128(wStart, 0, W);
                    wEnd = clamp128(wEnd, 0, W);
                    if (hEnd <= hStart || wEnd <= wStart) {
                        *out = 0.0;
                        continue;
                    }
                    double best = 0;
                    bool first = true;
                    for (__int128 y = hStart; y < hEnd; y++)
                        for (__int128 x = wStart; x < wEnd; x++) {
                            double v = input[(((size_t)b * channels + c) * height + (size_t)y) * width + (size_t)x];
                            /* strict >, NaN never beats a number */
                            if (first || v > best || (isnan(best) && !isnan(v))) best = v;
                            first = false;
                        }
                    *out = best;
                }
    }
}

/* ---- ROI align ---- */

/* FLOAT32 rounding of one operation's result when the problem asks for it. */
static double F(const ref_roi_align* p, double v) { return p->float32 ? (double)(float)v : v; }

typedef struct ref_axis {
    double start, size;  /* x1s, sizeX */
    uint64_t per_output; /* sX */
    uint64_t count;      /* nX */
    double scale;
    uint32_t extent; /* W */
} ref_axis;

/* §4.1 */
static ref_axis make_axis(const ref_roi_align* p, double c1, double c2, double scale, uint32_t outputs,
                          uint32_t extent) {
    ref_axis a;
    a.start = F(p, c1 * scale);
    a.size = F(p, F(p, c2 * scale) - a.start);
    double wanted = ceil(F(p, fabs(a.size) / outputs));
    if (!(wanted > p->min_samples)) wanted = p->min_samples; /* NaN: Min (libdml's choice) */
    if (wanted > p->max_samples) wanted = p->max_samples;
    a.per_output = (uint64_t)wanted;
    a.count = (uint64_t)outputs * a.per_output;
    a.scale = scale;
    a.extent = extent;
    return a;
}

/* §4.2 sampleX(t) */
static double sample(const ref_roi_align* p, const ref_axis* a, uint64_t t) {
    double tf = F(p, (double)t);
    if (!p->align_corners)
        return F(p, F(p, a->start + F(p, F(p, tf - p->output_pixel_offset) * F(p, a->size / F(p, (double)a->count)))) -
                        p->input_pixel_offset);
    if (a->count > 1)
        return F(p, F(p, a->start + F(p, tf * F(p, a->size / F(p, (double)(a->count - 1))))) - p->input_pixel_offset);
    return F(p, F(p, a->start + F(p, 0.5 * a->size)) - p->input_pixel_offset);
}

static bool out_of_bounds(double c, uint32_t size) { return !(c >= -1 && c <= size); } /* NaN: out */

/* §4.3 axis(c, size) */
static void axis_taps(const ref_roi_align* p, double c, uint32_t size, uint32_t* a, uint32_t* b, double* f) {
    if (c <= 0) c = 0;
    double i0 = floor(c);
    if (i0 >= (double)size - 1) {
        *a = *b = size - 1;
        *f = 0;
        return;
    }
    *a = (uint32_t)i0;
    *b = (uint32_t)i0 + 1;
    *f = F(p, c - i0);
}

static uint32_t nearest(const ref_roi_align* p, double c, uint32_t size) {
    double i = ceil(F(p, c - 0.5));
    if (i < 0) i = 0;
    if (i > (double)size - 1) i = (double)size - 1;
    return (uint32_t)i;
}

static double pixel(const ref_roi_align* p, uint64_t b, uint32_t c, uint32_t y, uint32_t x) {
    return p->input[(((size_t)b * p->channels + c) * p->height + y) * p->width + x];
}

/* §4.3 interpolate(P, cx, cy), for in-bounds samples. */
static double interpolate(const ref_roi_align* p, uint64_t b, uint32_t c, double cx, double cy) {
    if (!p->linear) return pixel(p, b, c, nearest(p, cy, p->height), nearest(p, cx, p->width));
    uint32_t xa, xb, ya, yb;
    double fx, fy;
    axis_taps(p, cx, p->width, &xa, &xb, &fx);
    axis_taps(p, cy, p->height, &ya, &yb, &fy);
    double top = F(p, F(p, F(p, 1 - fx) * pixel(p, b, c, ya, xa)) + F(p, fx * pixel(p, b, c, ya, xb)));
    double bottom = F(p, F(p, F(p, 1 - fx) * pixel(p, b, c, yb, xa)) + F(p, fx * pixel(p, b, c, yb, xb)));
    return F(p, F(p, F(p, 1 - fy) * top) + F(p, fy * bottom));
}

/* The samples of one output element in §4.4 order (X outer, Y inner). */
typedef struct ref_sample {
    uint64_t tx, ty;
    double cx, cy;
    bool outside;
} ref_sample;

static size_t output_samples(const ref_roi_align* p, const ref_axis* ax, const ref_axis* ay, uint32_t oy, uint32_t ox,
                             ref_sample* samples) {
    size_t n = 0;
    for (uint64_t tx = ox * ax->per_output; tx < ox * ax->per_output + ax->per_output; tx++)
        for (uint64_t ty = oy * ay->per_output; ty < oy * ay->per_output + ay->per_output; ty++) {
            ref_sample s = {tx, ty, sample(p, ax, tx), sample(p, ay, ty), false};
            s.outside = out_of_bounds(s.cx, p->width) || out_of_bounds(s.cy, p->height);
            samples[n++] = s;
        }
    return n;
}

static void region(const ref_roi_align* p, uint32_t r, ref_axis* ax, ref_axis* ay) {
    const double* roi = p->rois + (size_t)r * 4;
    *ax = make_axis(p, roi[0], roi[2], p->spatial_scale_x, p->out_width, p->width);
    *ay = make_axis(p, roi[1], roi[3], p->spatial_scale_y, p->out_height, p->height);
}

static ref_sample* sample_buffer(const ref_axis* ax, const ref_axis* ay) {
    return malloc((size_t)(ax->per_output * ay->per_output) * sizeof(ref_sample));
}

static bool greater(double v, double best) { return v > best || (isnan(best) && !isnan(v)); }

void ref_roi_align_forward(const ref_roi_align* p, double* output, double* magnitude) {
    for (uint32_t r = 0; r < p->roi_count; r++) {
        ref_axis ax, ay;
        region(p, r, &ax, &ay);
        uint64_t b = p->batch_indices[r];
        for (uint32_t c = 0; c < p->channels; c++)
            for (uint32_t oy = 0; oy < p->out_height; oy++)
                for (uint32_t ox = 0; ox < p->out_width; ox++) {
                    size_t index = (((size_t)r * p->channels + c) * p->out_height + oy) * p->out_width + ox;
                    if (b >= p->batch) { /* RA-12 */
                        output[index] = p->out_of_bounds_value;
                        if (magnitude) magnitude[index] = fabs(p->out_of_bounds_value);
                        continue;
                    }
                    /* §4.4 order, sample by sample (no buffer: S may be 2^24 and more). */
                    uint64_t n = ax.per_output * ay.per_output;
                    double sum = 0, abs_sum = 0, best = 0;
                    bool first = true;
                    for (uint64_t tx = ox * ax.per_output; tx < (ox + 1) * ax.per_output; tx++) {
                        double cx = sample(p, &ax, tx);
                        for (uint64_t ty = oy * ay.per_output; ty < (oy + 1) * ay.per_output; ty++) {
                            double cy = sample(p, &ay, ty);
                            bool outside = out_of_bounds(cx, p->width) || out_of_bounds(cy, p->height);
                            double v = outside ? p->out_of_bounds_value : interpolate(p, b, c, cx, cy);
                            sum += v;
                            abs_sum += fabs(v);
                            if (first || greater(v, best)) best = v;
                            first = false;
                        }
                    }
                    output[index] = p->reduction_max ? best : sum / (double)n;
                    if (magnitude) magnitude[index] = p->reduction_max ? fabs(best) : abs_sum / (double)n;
                }
    }
}

/* §7.1: the weight of each sample of one output element. */
static void sample_weights(const ref_roi_align* p, uint64_t b, uint32_t c, const ref_sample* samples, size_t n,
                           double* weights) {
    if (!p->reduction_max) {
        for (size_t i = 0; i < n; i++)
            weights[i] = F(p, 1.0 / F(p, (double)n));
        return;
    }
    size_t chosen = 0;
    double best = 0;
    for (size_t i = 0; i < n; i++) {
        double v = samples[i].outside ? 0.0 : interpolate(p, b, c, samples[i].cx, samples[i].cy); /* RA-8 */
        if (i == 0 || greater(v, best)) {
            best = v;
            chosen = i;
        }
    }
    for (size_t i = 0; i < n; i++)
        weights[i] = i == chosen ? 1.0 : 0.0;
}

/* §7.3: d(sample coordinate)/d(first corner), d/d(second corner). */
static void coord_derivatives(const ref_roi_align* p, const ref_axis* a, uint64_t t, double* d1, double* d2) {
    double u;
    if (!p->align_corners)
        u = F(p, F(p, F(p, (double)t) - p->output_pixel_offset) / F(p, (double)a->count));
    else if (a->count > 1)
        u = F(p, F(p, (double)t) / F(p, (double)(a->count - 1)));
    else
        u = 0.5;
    *d1 = F(p, a->scale * F(p, 1 - u));
    *d2 = F(p, a->scale * u);
}

void ref_roi_align_grad(const ref_roi_align* p, const double* input_gradient, double* output_gradient,
                        double* output_gradient_magnitude, double* roi_gradient, double* roi_gradient_magnitude) {
    size_t image_size = (size_t)p->batch * p->channels * p->height * p->width;
    if (output_gradient) memset(output_gradient, 0, image_size * sizeof(double));
    if (output_gradient_magnitude) memset(output_gradient_magnitude, 0, image_size * sizeof(double));
    if (roi_gradient) memset(roi_gradient, 0, (size_t)p->roi_count * 4 * sizeof(double));
    if (roi_gradient_magnitude) memset(roi_gradient_magnitude, 0, (size_t)p->roi_count * 4 * sizeof(double));
    for (uint32_t r = 0; r < p->roi_count; r++) {
        uint64_t b = p->batch_indices[r];
        if (b >= p->batch) continue; /* RA-12: no gradient */
        ref_axis ax, ay;
        region(p, r, &ax, &ay);
        ref_sample* samples = sample_buffer(&ax, &ay);
        double* weights = malloc((size_t)(ax.per_output * ay.per_output) * sizeof(double));
        for (uint32_t c = 0; c < p->channels; c++)
            for (uint32_t oy = 0; oy < p->out_height; oy++)
                for (uint32_t ox = 0; ox < p->out_width; ox++) {
                    double g = input_gradient[(((size_t)r * p->channels + c) * p->out_height + oy) * p->out_width + ox];
                    size_t n = output_samples(p, &ax, &ay, oy, ox, samples);
                    sample_weights(p, b, c, samples, n, weights);
                    for (size_t i = 0; i < n; i++) {
                        double w = weights[i];
                        const ref_sample* s = &samples[i];
                        if (w == 0 || s->outside) continue;
                        size_t plane = ((size_t)b * p->channels + c) * p->height;
                        /* §7.2 */
                        if (output_gradient) {
                            if (!p->linear) {
                                size_t at =
                                    (plane + nearest(p, s->cy, p->height)) * p->width + nearest(p, s->cx, p->width);
                                output_gradient[at] += g * w;
                                if (output_gradient_magnitude) output_gradient_magnitude[at] += fabs(g * w);
                            } else {
                                uint32_t xa, xb, ya, yb;
                                double fx, fy;
                                axis_taps(p, s->cx, p->width, &xa, &xb, &fx);
                                axis_taps(p, s->cy, p->height, &ya, &yb, &fy);
                                const uint32_t ys[4] = {ya, ya, yb, yb}, xs[4] = {xa, xb, xa, xb};
                                const double tap[4] = {(1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx};
                                for (int k = 0; k < 4; k++) {
                                    size_t at = (plane + ys[k]) * p->width + xs[k];
                                    output_gradient[at] += g * w * tap[k];
                                    if (output_gradient_magnitude)
                                        output_gradient_magnitude[at] += fabs(g * w * tap[k]);
                                }
                            }
                        }
                        /* §7.3 */
                        if (roi_gradient) {
                            double dx1, dx2, dy1, dy2;
                            coord_derivatives(p, &ax, s->tx, &dx1, &dx2);
                            coord_derivatives(p, &ay, s->ty, &dy1, &dy2);
                            double cxc = fmin(fmax(s->cx, 0), (double)p->width - 1);
                            double cyc = fmin(fmax(s->cy, 0), (double)p->height - 1);
                            double L = floor(cxc), R = ceil(cxc), T = floor(cyc), B = ceil(cyc);
                            double xl = F(p, cxc - L), yl = F(p, cyc - T);
                            double TL = pixel(p, b, c, (uint32_t)T, (uint32_t)L);
                            double TR = pixel(p, b, c, (uint32_t)T, (uint32_t)R);
                            double BL = pixel(p, b, c, (uint32_t)B, (uint32_t)L);
                            double BR = pixel(p, b, c, (uint32_t)B, (uint32_t)R);
                            double gradX = (1 - yl) * (TR - TL) + yl * (BR - BL);
                            double gradY = (1 - xl) * (BL - TL) + xl * (BR - TR);
                            double terms[4] = {g * w * gradX * dx1, g * w * gradY * dy1, g * w * gradX * dx2,
                                               g * w * gradY * dy2};
                            for (int k = 0; k < 4; k++) {
                                roi_gradient[(size_t)r * 4 + k] += terms[k];
                                if (roi_gradient_magnitude) roi_gradient_magnitude[(size_t)r * 4 + k] += fabs(terms[k]);
                            }
                        }
                    }
                }
        free(weights);
        free(samples);
    }
}

double ref_roi_align_min_max_gap(const ref_roi_align* p) {
    double gap = INFINITY;
    for (uint32_t r = 0; r < p->roi_count; r++) {
        uint64_t b = p->batch_indices[r];
        if (b >= p->batch) continue;
        ref_axis ax, ay;
        region(p, r, &ax, &ay);
        ref_sample* samples = sample_buffer(&ax, &ay);
        for (uint32_t c = 0; c < p->channels; c++)
            for (uint32_t oy = 0; oy < p->out_height; oy++)
                for (uint32_t ox = 0; ox < p->out_width; ox++) {
                    size_t n = output_samples(p, &ax, &ay, oy, ox, samples);
                    if (n < 2) continue;
                    double first = -INFINITY, second = -INFINITY;
                    for (size_t i = 0; i < n; i++) {
                        double v = samples[i].outside ? p->out_of_bounds_value
                                                      : interpolate(p, b, c, samples[i].cx, samples[i].cy);
                        if (v > first) {
                            second = first;
                            first = v;
                        } else if (v > second) {
                            second = v;
                        }
                    }
                    if (first - second < gap) gap = first - second;
                }
        free(samples);
    }
    return gap;
}
