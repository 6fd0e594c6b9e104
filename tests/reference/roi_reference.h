/* Float64 references of ROI pooling (spec roi_pooling.md §3) and ROI align
 * with its gradient (spec roi_align.md §4, §7), written from the spec's
 * pseudo-code, independent of the library.
 *
 * Tensors are plain row-major double arrays in logical order. */
#ifndef DML_TESTS_ROI_REFERENCE_H
#define DML_TESTS_ROI_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>

/* ROI pooling: input {N, C, H, W}, rois {R, 5} rows [batch, x1, y1, x2, y2],
 * output {R, C, PH, PW}. */
void ref_roi_pooling(const double* input, uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                     const double* rois, uint32_t roi_count, float spatial_scale, uint32_t pooled_height,
                     uint32_t pooled_width, double* output);

typedef struct ref_roi_align {
    uint32_t batch, channels, height, width; /* the image {N, C, H, W} */
    uint32_t roi_count, out_height, out_width;
    const double* input;           /* {N, C, H, W}; may be NULL for an AVERAGE gradient */
    const double* rois;            /* {R, 4}: [x1, y1, x2, y2] */
    const uint64_t* batch_indices; /* {R} */
    bool reduction_max, linear, align_corners;
    double spatial_scale_x, spatial_scale_y;
    double input_pixel_offset, output_pixel_offset, out_of_bounds_value;
    uint32_t min_samples, max_samples;
    /* true: coordinates, weights and sample values are rounded to FLOAT32
     * after every operation, as the spec prescribes; sums stay in float64.
     * false: everything in float64 (for finite differences). */
    bool float32;
} ref_roi_align;

/* output {R, C, OH, OW}; magnitude (optional): the size of the terms that
 * were summed per element, to scale a tolerance. */
void ref_roi_align_forward(const ref_roi_align* p, double* output, double* magnitude);

/* input_gradient {R, C, OH, OW}. output_gradient {N, C, H, W} and
 * roi_gradient {R, 4} are filled when non-NULL, with the summed magnitudes
 * of their terms when the magnitude arrays are non-NULL. */
void ref_roi_align_grad(const ref_roi_align* p, const double* input_gradient, double* output_gradient,
                        double* output_gradient_magnitude, double* roi_gradient, double* roi_gradient_magnitude);

/* The smallest gap between the largest and the second-largest sample value
 * of any MAX output (ties give 0; +inf when no output has two samples). */
double ref_roi_align_min_max_gap(const ref_roi_align* p);

#endif
