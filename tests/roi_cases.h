/* Random ROI problems run twice, on the CPU backend and by the CUDA code (on
 * a GPU in test_cuda_backend, replayed on the host in test_cuda_roi_replay),
 * and the comparison of the two results. */
#ifndef DML_TESTS_ROI_CASES_H
#define DML_TESTS_ROI_CASES_H

#include <stdbool.h>
#include <stdint.h>

#include "harness.h"

/* One tensor of a comparison: its description and one guarded buffer per
 * side, with the same bytes before the runs. */
typedef struct twin_buffer {
    bool present;
    test_tensor tensor;
    test_buffer cpu, cuda;
} twin_buffer;

void twin_init(twin_buffer* w, DML_TENSOR_DATA_TYPE type, uint32_t rank, const uint32_t* sizes, test_layout layout);
/* Writes values[logical index] into both buffers. */
void twin_fill(twin_buffer* w, const double* values);
void twin_free(twin_buffer* w);
/* Restrides a packed 4-D tensor channels-last (N, H, W, C in memory): the
 * same bytes. Before twin_fill. */
void twin_make_channels_last(twin_buffer* w);
/* NULL for an absent tensor. */
const DML_TENSOR_DESC* twin_desc(const twin_buffer* w);
test_buffer* twin_side(twin_buffer* w, bool cuda);

/* Every element of the CUDA side has the CPU's bits, except that a NaN
 * matches any NaN (x86 propagates an operand's NaN payload, CUDA arithmetic
 * gives its canonical NaN, and compilers may swap the operands of a sum);
 * guards and unaddressed bytes of the CUDA side are untouched. */
bool expect_same_values(const twin_buffer* w, const char* what, const char* context);

/* A ROI coordinate (unscaled) around an image of `extent` pixels: mostly
 * inside or near it, at times on integers, far outside, huge, infinite or NaN
 * (with specials). */
double random_roi_coordinate(uint32_t extent, double scale, bool specials);
float random_roi_scale(void);
/* Image values: random, with repeats and signed zeros; NaN and infinities at
 * times with specials. Free with free(). */
double* random_image(uint64_t count, bool specials);

/* ---- ROI align ---- */

/* One ROI align problem, run as ROI_ALIGN/ROI_ALIGN1 and as ROI_ALIGN_GRAD. */
enum { L_INPUT, L_ROI, L_BATCH, L_OUTPUT, L_INPUT_GRADIENT, L_OUTPUT_GRADIENT, L_ROI_GRADIENT, L_COUNT };
typedef struct roi_align_case {
    DML_OPERATOR_TYPE forward_type;
    DML_TENSOR_DATA_TYPE type, index_type; /* index_type: forward only; the gradient's is UINT32 */
    uint32_t batch, channels, height, width, roi_count, out_height, out_width;
    uint32_t roi_rank, batch_rank;
    DML_REDUCE_FUNCTION reduction;
    DML_INTERPOLATION_MODE interpolation;
    float scale_x, scale_y, input_pixel_offset, output_pixel_offset, out_of_bounds_value;
    uint32_t min_samples, max_samples;
    BOOL align_corners;
    bool specials; /* NaN/infinite values and coordinates */
    /* Packed channels-last instead of packed (the case's `layouts` for them):
     * the forward's input and output, the gradient's two gradients. */
    bool channels_last;
    double *image, *rois, *batch_indices, *input_gradient;
    test_layout layouts[L_COUNT];
    char context[400];
} roi_align_case;

/* Small random problems over every option, shape, layout and type. */
void random_roi_align_case(roi_align_case* c);
/* Many overlapping ROIs on few images (variant 0..3: AVERAGE/MAX, LINEAR/
 * NEAREST, FLOAT32/FLOAT16, aligned corners, NHWC input). */
void large_roi_align_case(roi_align_case* c, int variant);
/* Case `iteration` of PACKED_ROI_ALIGN_CASES with packed NCHW or
 * (channels_last) packed channels-last input and output (the CUDA fast
 * paths'): random ones (every eighth with 129..1300 channels: several
 * channel groups, the last partial), then the large variants. */
#define PACKED_ROI_ALIGN_CASES 304
void packed_roi_align_case(roi_align_case* c, int iteration, bool channels_last);
/* Case `iteration` of STAGED_ROI_ALIGN_CASES for the staged forward kernel
 * (LINEAR, AVERAGE, packed NCHW): random options on images
 * that stage 4, 2 or 1 channels a task (up to 20x20, 64x64, 128x128,
 * 180x180: FLOAT32 K = 4, 4, 2, 1; FLOAT16 4, 4, 4, 2), 1..41 channels, up to 1500 ROIs of mixed images; every eighth
 * image too large to stage one channel (the plan declines); two in eight
 * 128x128 with 270..700 channels (groups of chunks a task), one of them
 * with 700..900 ROIs on one image (more than a block keeps the samples of). */
#define STAGED_ROI_ALIGN_CASES 48
void staged_roi_align_case(roi_align_case* c, int iteration);
bool staged_roi_align_case_declines(int iteration);
/* A staged case of FLOAT32, 8 channels, extent x extent pixels (AVERAGE, LINEAR). */
void staged_roi_align_case_sized(roi_align_case* c, uint32_t extent);
/* Case `iteration` of LISTED_ROI_ALIGN_GRAD_CASES for the feature gradient's
 * one-launch forms: AVERAGE, a fixed sample count, both gradients packed NCHW
 * or (channels_last) both packed channels-last. Random ones (wide ones as
 * packed_roi_align_case's), then the large AVERAGE variants, the last with
 * 2x2 samples (2^19 contributions). */
#define LISTED_ROI_ALIGN_GRAD_CASES 304
void listed_roi_align_grad_case(roi_align_case* c, int iteration, bool channels_last);
/* Sets c->context from the fields. */
void roi_align_case_describe(roi_align_case* c);
void roi_align_case_free(roi_align_case* c);

/* The tensors and description of one run of a case. */
typedef struct roi_align_run {
    twin_buffer input, rois, indices, output;                  /* forward */
    twin_buffer input_gradient, output_gradient, roi_gradient; /* gradient */
    DML_ROI_ALIGN_OPERATOR_DESC align;
    DML_ROI_ALIGN1_OPERATOR_DESC align1;
    DML_ROI_ALIGN_GRAD_OPERATOR_DESC grad;
    DML_OPERATOR_DESC op;
    uint32_t input_count, output_count;
    char context[480];
} roi_align_run;

void roi_align_forward_setup(roi_align_run* run, const roi_align_case* c);
/* InputTensor bound when with_input; the outputs as requested. */
void roi_align_grad_setup(roi_align_run* run, const roi_align_case* c, bool with_input, bool want_output_gradient,
                          bool want_roi_gradient);
/* The buffers of one side in slot order (NULL for absent tensors). */
void roi_align_run_buffers(roi_align_run* run, bool cuda, test_buffer* inputs[4], test_buffer* outputs[2]);
/* Expects every output of the CUDA side equal to the CPU's (expect_same_values). */
void roi_align_run_compare(roi_align_run* run, const char* label);
void roi_align_run_free(roi_align_run* run);

#endif
