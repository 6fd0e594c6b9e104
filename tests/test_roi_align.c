/* ROI_ALIGN, ROI_ALIGN1 and ROI_ALIGN_GRAD (spec roi_align.md): golden
 * vectors RA-1..RA-9, randomized comparisons with the float64 reference
 * (every ROI and batch-index shape, strided/permuted/broadcast layouts,
 * FLOAT16, UINT64 batch indices, boxes inside, crossing and outside the
 * image, tiny, huge and flipped boxes), finite-difference checks of both
 * gradients, determinism across thread counts, guard bytes, and every
 * validation rule and feature level of §2-§3. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference/roi_reference.h"

/* RA-1: ROI_ALIGN1 nearest neighbour, 1.5x width / 0.5x height, four 2x2 crops (documented) */
static const double RA1_Input[] = {1.0, 2.0,  3.0,  4.0,  5.0,  6.0,  7.0,  8.0,
                                   9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0};
static const double RA1_ROI[] = {0.0, 0.0, 2.0, 2.0, 2.0, 0.0, 4.0, 2.0, 0.0, 2.0, 2.0, 4.0, 2.0, 2.0, 4.0, 4.0};
static const double RA1_BatchIndices[] = {0.0, 0.0, 0.0, 0.0};
static const double RA1_Output[] = {1.0, 1.0, 2.0, 3.0, 3.0, 4.0, 9.0, 9.0, 10.0, 11.0, 11.0, 12.0};
/* RA-2: ROI_ALIGN_GRAD for RA-1 (OutputGradientTensor only) (documented) */
static const double RA2_InputGradient[] = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0};
static const double RA2_ROI[] = {0.0, 0.0, 2.0, 2.0, 2.0, 0.0, 4.0, 2.0, 0.0, 2.0, 2.0, 4.0, 2.0, 2.0, 4.0, 4.0};
static const double RA2_BatchIndices[] = {0.0, 0.0, 0.0, 0.0};
static const double RA2_OutputGradient[] = {3.0,  3.0, 9.0,  6.0,  0.0, 0.0, 0.0, 0.0,
                                            15.0, 9.0, 21.0, 12.0, 0.0, 0.0, 0.0, 0.0};
/* RA-3: Bilinear, pixel-centre model, 2x2 region -> 4x4 output (third-party-test) */
static const double RA3_Input[] = {
    0.0,  1.0,  2.0,  3.0,  4.0,  5.0,  6.0,  7.0,  8.0,  9.0,  10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0,
    17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0,
    34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 49.0, 50.0,
    51.0, 52.0, 53.0, 54.0, 55.0, 56.0, 57.0, 58.0, 59.0, 60.0, 61.0, 62.0, 63.0, 64.0, 65.0, 66.0, 67.0,
    68.0, 69.0, 70.0, 71.0, 72.0, 73.0, 74.0, 75.0, 76.0, 77.0, 78.0, 79.0, 80.0, 81.0, 82.0, 83.0, 84.0,
    85.0, 86.0, 87.0, 88.0, 89.0, 90.0, 91.0, 92.0, 93.0, 94.0, 95.0, 96.0, 97.0, 98.0, 99.0};
static const double RA3_ROI[] = {1.0, 1.0, 3.0, 3.0};
static const double RA3_BatchIndices[] = {0.0};
static const double RA3_Output[] = {8.25,  8.75,  9.25,  9.75,  13.25, 13.75, 14.25, 14.75,
                                    18.25, 18.75, 19.25, 19.75, 23.25, 23.75, 24.25, 24.75};
/* RA-4: ONNX backend test test_roialign_aligned_true (half_pixel) mapped to ROI_ALIGN1 (third-party-test) */
static const double RA4_Input[] = {
    0.2764, 0.715,  0.1958, 0.3416, 0.4638, 0.0259, 0.2963, 0.6518, 0.4856, 0.725,  0.9637, 0.0895, 0.2919,
    0.6753, 0.0234, 0.6132, 0.8085, 0.5324, 0.8992, 0.4467, 0.3265, 0.8479, 0.9698, 0.2471, 0.9336, 0.1878,
    0.4766, 0.4308, 0.34,   0.2162, 0.0206, 0.172,  0.2155, 0.4394, 0.0653, 0.3406, 0.7724, 0.3921, 0.2541,
    0.5799, 0.4062, 0.2194, 0.4473, 0.4687, 0.7109, 0.9327, 0.9815, 0.632,  0.1728, 0.6119, 0.3097, 0.1283,
    0.4984, 0.5068, 0.4279, 0.0173, 0.4388, 0.043,  0.4671, 0.7119, 0.1011, 0.8477, 0.4726, 0.1777, 0.9923,
    0.4042, 0.1869, 0.7795, 0.9946, 0.9689, 0.1366, 0.3671, 0.7011, 0.6234, 0.9867, 0.5585, 0.6985, 0.5609,
    0.8788, 0.9928, 0.5697, 0.8511, 0.6711, 0.9406, 0.8751, 0.7496, 0.165,  0.1049, 0.1559, 0.2514, 0.7012,
    0.4056, 0.7879, 0.3461, 0.0415, 0.2998, 0.5094, 0.3727, 0.5482, 0.0502};
static const double RA4_ROI[] = {0.0, 0.0, 9.0, 9.0, 0.0, 5.0, 4.0, 9.0, 5.0, 5.0, 9.0, 9.0};
static const double RA4_BatchIndices[] = {0.0, 0.0, 0.0};
static const double RA4_Output[] = {
    0.5178, 0.3434, 0.3229, 0.4474, 0.6344, 0.4031, 0.5366, 0.4428, 0.4861, 0.4023, 0.2512, 0.4002, 0.5155,
    0.6954, 0.3465, 0.335,  0.4601, 0.5881, 0.3439, 0.6849, 0.4932, 0.7141, 0.8217, 0.4719, 0.4039, 0.307,
    0.2187, 0.3337, 0.488,  0.487,  0.1871, 0.4914, 0.5561, 0.4192, 0.3686, 0.1433, 0.4608, 0.5971, 0.531,
    0.4982, 0.2788, 0.4386, 0.6022, 0.7,    0.7524, 0.5774, 0.7024, 0.7251, 0.7338, 0.8163, 0.2393, 0.4075,
    0.3379, 0.2525, 0.4743, 0.3671, 0.2702, 0.4105, 0.6419, 0.8308, 0.5556, 0.4543, 0.5564, 0.7502, 0.93,
    0.6626, 0.5617, 0.4813, 0.4954, 0.6663, 0.6636, 0.3721, 0.2056, 0.1928, 0.2478};
/* RA-5: ONNX backend test test_roialign_aligned_false (output_half_pixel) mapped to ROI_ALIGN1 (third-party-test) */
static const double RA5_Input[] = {
    0.2764, 0.715,  0.1958, 0.3416, 0.4638, 0.0259, 0.2963, 0.6518, 0.4856, 0.725,  0.9637, 0.0895, 0.2919,
    0.6753, 0.0234, 0.6132, 0.8085, 0.5324, 0.8992, 0.4467, 0.3265, 0.8479, 0.9698, 0.2471, 0.9336, 0.1878,
    0.4766, 0.4308, 0.34,   0.2162, 0.0206, 0.172,  0.2155, 0.4394, 0.0653, 0.3406, 0.7724, 0.3921, 0.2541,
    0.5799, 0.4062, 0.2194, 0.4473, 0.4687, 0.7109, 0.9327, 0.9815, 0.632,  0.1728, 0.6119, 0.3097, 0.1283,
    0.4984, 0.5068, 0.4279, 0.0173, 0.4388, 0.043,  0.4671, 0.7119, 0.1011, 0.8477, 0.4726, 0.1777, 0.9923,
    0.4042, 0.1869, 0.7795, 0.9946, 0.9689, 0.1366, 0.3671, 0.7011, 0.6234, 0.9867, 0.5585, 0.6985, 0.5609,
    0.8788, 0.9928, 0.5697, 0.8511, 0.6711, 0.9406, 0.8751, 0.7496, 0.165,  0.1049, 0.1559, 0.2514, 0.7012,
    0.4056, 0.7879, 0.3461, 0.0415, 0.2998, 0.5094, 0.3727, 0.5482, 0.0502};
static const double RA5_ROI[] = {0.0, 0.0, 9.0, 9.0, 0.0, 5.0, 4.0, 9.0, 5.0, 5.0, 9.0, 9.0};
static const double RA5_BatchIndices[] = {0.0, 0.0, 0.0};
static const double RA5_Output[] = {
    0.4664, 0.4466, 0.3405, 0.5688, 0.6068, 0.3714, 0.4296, 0.3835, 0.5562, 0.351,  0.2768, 0.4883, 0.5222,
    0.5528, 0.4171, 0.4713, 0.4844, 0.6904, 0.492,  0.8774, 0.6239, 0.7125, 0.6289, 0.3355, 0.3495, 0.3022,
    0.4305, 0.4696, 0.3978, 0.5423, 0.3656, 0.705,  0.5165, 0.3172, 0.7015, 0.2912, 0.5059, 0.6476, 0.6235,
    0.8299, 0.5916, 0.7389, 0.7048, 0.8372, 0.8893, 0.6227, 0.6153, 0.7097, 0.6154, 0.4585, 0.2384, 0.3379,
    0.3717, 0.61,   0.7601, 0.3767, 0.3785, 0.7147, 0.9243, 0.9727, 0.5749, 0.5826, 0.5709, 0.7619, 0.877,
    0.5355, 0.2566, 0.2141, 0.2796, 0.36,   0.4365, 0.3504, 0.2887, 0.3661, 0.2349};
/* RA-6: Zero-size (point) ROIs incl. coordinates inside the one-pixel margin, AVERAGE (third-party-test) */
static const double RA6_Input[] = {
    0.0,  1.0,  2.0,  3.0,  4.0,  5.0,  6.0,  7.0,  8.0,  9.0,  10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0,
    19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0,
    38.0, 39.0, 40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 49.0, 50.0, 51.0, 52.0, 53.0, 54.0, 55.0, 56.0,
    57.0, 58.0, 59.0, 60.0, 61.0, 62.0, 63.0, 64.0, 65.0, 66.0, 67.0, 68.0, 69.0, 70.0, 71.0, 72.0, 73.0, 74.0};
static const double RA6_ROI[] = {7.0,   5.0,  7.0,  5.0, -15.0, -15.0, -15.0, -15.0, -10.0, 21.0,
                                 -10.0, 21.0, 13.0, 8.0, 13.0,  8.0,   -14.0, 19.0,  -14.0, 19.0};
static const double RA6_BatchIndices[] = {0.0, 0.0, 0.0, 0.0, 0.0};
static const double RA6_Output[] = {
    2.0,     2.0,     2.0,     2.0,     2.0,     2.0,     2.0,     2.0,     2.0,     2.0,     2.0,     2.0,     27.0,
    27.0,    27.0,    27.0,    27.0,    27.0,    27.0,    27.0,    27.0,    27.0,    27.0,    27.0,    52.0,    52.0,
    52.0,    52.0,    52.0,    52.0,    52.0,    52.0,    52.0,    52.0,    52.0,    52.0,    0.0,     0.0,     0.0,
    0.0,     0.0,     0.0,     0.0,     0.0,     0.0,     0.0,     0.0,     0.0,     25.0,    25.0,    25.0,    25.0,
    25.0,    25.0,    25.0,    25.0,    25.0,    25.0,    25.0,    25.0,    50.0,    50.0,    50.0,    50.0,    50.0,
    50.0,    50.0,    50.0,    50.0,    50.0,    50.0,    50.0,    6.5625,  6.5625,  6.5625,  6.5625,  6.5625,  6.5625,
    6.5625,  6.5625,  6.5625,  6.5625,  6.5625,  6.5625,  31.5625, 31.5625, 31.5625, 31.5625, 31.5625, 31.5625, 31.5625,
    31.5625, 31.5625, 31.5625, 31.5625, 31.5625, 56.5625, 56.5625, 56.5625, 56.5625, 56.5625, 56.5625, 56.5625, 56.5625,
    56.5625, 56.5625, 56.5625, 56.5625, 3.3125,  3.3125,  3.3125,  3.3125,  3.3125,  3.3125,  3.3125,  3.3125,  3.3125,
    3.3125,  3.3125,  3.3125,  28.3125, 28.3125, 28.3125, 28.3125, 28.3125, 28.3125, 28.3125, 28.3125, 28.3125, 28.3125,
    28.3125, 28.3125, 53.3125, 53.3125, 53.3125, 53.3125, 53.3125, 53.3125, 53.3125, 53.3125, 53.3125, 53.3125, 53.3125,
    53.3125, 5.9375,  5.9375,  5.9375,  5.9375,  5.9375,  5.9375,  5.9375,  5.9375,  5.9375,  5.9375,  5.9375,  5.9375,
    30.9375, 30.9375, 30.9375, 30.9375, 30.9375, 30.9375, 30.9375, 30.9375, 30.9375, 30.9375, 30.9375, 30.9375, 55.9375,
    55.9375, 55.9375, 55.9375, 55.9375, 55.9375, 55.9375, 55.9375, 55.9375, 55.9375, 55.9375, 55.9375};
/* RA-7 (MAX) has exactly RA-6's (AVERAGE) inputs and outputs: a point ROI's
 * samples all read one value, so both reductions agree. */
/* RA-8: Adaptive sampling, MAX vs AVERAGE, out-of-bounds samples and the one-pixel margin (derived) */
static const double RA8_Input[] = {0.0, 1.0, 2.0,  3.0,  4.0,  5.0,  6.0,  7.0,
                                   8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0};
static const double RA8_ROI[] = {0.0, 0.0, 4.0, 4.0, -3.0, -3.0, -1.0, -1.0, -1.0, -1.0, 0.0, 0.0};
static const double RA8_BatchIndices[] = {0.0, 0.0, 0.0};
static const double RA8_OutputMAX[] = {13.0, 15.0, -7.0, -7.0, -7.0, 0.0};
static const double RA8_OutputAVERAGE[] = {6.5, 8.5, -7.0, -7.0, -7.0, 0.0};
/* RA-9: Forward, input gradient and ROI gradient (bilinear, AVERAGE, 2x1 samples) (derived) */
static const double RA9_Input[] = {0.0, 1.0, 4.0,  9.0,  3.0, 4.0,  7.0,  12.0,
                                   6.0, 7.0, 10.0, 15.0, 9.0, 10.0, 13.0, 18.0};
static const double RA9_ROI[] = {0.3, 0.6, 2.9, 2.2};
static const double RA9_BatchIndices[] = {0.0};
static const double RA9_InputGradient[] = {1.0, -2.0, 0.5, 3.0};
static const double RA9_Outputforward[] = {1.95, 4.825, 4.35, 7.225};
static const double RA9_OutputGradient[] = {0.275,  -0.0625, -0.675, -0.0375, 0.4675, 0.69875, 0.7425, 0.04125,
                                            0.0825, 0.32625, 0.6075, 0.03375, 0.0,    0.0,     0.0,    0.0};
static const double RA9_OutputROIGradient[] = {2.0, 0.375, 3.5, 7.125};

/* ---- Running the operators ---- */

/* The tensors of the family, in one index space. */
enum { T_INPUT, T_ROI, T_BATCH, T_OUTPUT, T_INPUT_GRADIENT, T_OUTPUT_GRADIENT, T_ROI_GRADIENT, T_COUNT };
static const char* const tensor_names[T_COUNT] = {"InputTensor",
                                                  "ROITensor",
                                                  "BatchIndicesTensor",
                                                  "OutputTensor",
                                                  "InputGradientTensor",
                                                  "OutputGradientTensor",
                                                  "OutputROIGradientTensor"};

typedef struct align_problem {
    DML_OPERATOR_TYPE forward_type; /* ROI_ALIGN or ROI_ALIGN1 */
    DML_TENSOR_DATA_TYPE type, index_type;
    uint32_t batch, channels, height, width, roi_count, out_height, out_width;
    uint32_t roi_rank, batch_rank; /* 2..4, 1..4 */
    DML_REDUCE_FUNCTION reduction;
    DML_INTERPOLATION_MODE interpolation;
    float scale_x, scale_y, input_pixel_offset, output_pixel_offset, out_of_bounds_value;
    uint32_t min_samples, max_samples;
    bool align_corners;
    /* Logical data: {N,C,H,W}, {R,4}, {R}, {R,C,OH,OW}. */
    const double *input, *rois, *batch_indices, *input_gradient;
    test_layout layouts[T_COUNT];
} align_problem;

/* What a run produced, in logical order, and the inputs as stored (broadcast
 * layouts alias elements and FLOAT16 rounds: the reference takes these). */
typedef struct align_run {
    HRESULT status;
    double *output, *output_gradient, *roi_gradient;
    uint64_t *output_bits, *output_gradient_bits, *roi_gradient_bits;
    double *input, *rois, *input_gradient;
    uint64_t* batch_indices;
} align_run;

static void align_run_free(align_run* run) {
    free(run->output);
    free(run->output_gradient);
    free(run->roi_gradient);
    free(run->output_bits);
    free(run->output_gradient_bits);
    free(run->roi_gradient_bits);
    free(run->input);
    free(run->rois);
    free(run->input_gradient);
    free(run->batch_indices);
}

static uint32_t tensor_shape(const align_problem* p, int which, uint32_t sizes[4]) {
    uint32_t rank = 4;
    switch (which) {
    case T_INPUT:
    case T_OUTPUT_GRADIENT:
        sizes[0] = p->batch, sizes[1] = p->channels, sizes[2] = p->height, sizes[3] = p->width;
        break;
    case T_OUTPUT:
    case T_INPUT_GRADIENT:
        sizes[0] = p->roi_count, sizes[1] = p->channels, sizes[2] = p->out_height, sizes[3] = p->out_width;
        break;
    case T_ROI:
    case T_ROI_GRADIENT:
        rank = p->roi_rank;
        for (uint32_t i = 0; i < rank; i++)
            sizes[i] = 1;
        sizes[rank - 2] = p->roi_count;
        sizes[rank - 1] = 4;
        break;
    default: /* T_BATCH */
        rank = p->batch_rank;
        for (uint32_t i = 0; i < rank; i++)
            sizes[i] = 1;
        sizes[rank - 1] = p->roi_count;
        break;
    }
    return rank;
}

/* A tensor of the problem with its layout and a guarded buffer; filled when
 * values is non-NULL, poisoned otherwise. */
typedef struct bound_tensor {
    test_tensor tensor;
    test_buffer buffer;
} bound_tensor;

static void bind_tensor(bound_tensor* b, const align_problem* p, int which, const double* values) {
    uint32_t sizes[4];
    uint32_t rank = tensor_shape(p, which, sizes);
    DML_TENSOR_DATA_TYPE type = which == T_BATCH ? p->index_type : p->type;
    test_tensor_init(&b->tensor, type, rank, sizes, p->layouts[which]);
    test_buffer_alloc(&b->buffer, b->tensor.buffer.TotalTensorSizeInBytes);
    if (values) test_fill_values(&b->buffer, &b->tensor, values);
}

static double* read_back(const bound_tensor* b) {
    double* values = malloc(b->tensor.element_count * sizeof *values);
    for (uint64_t i = 0; i < b->tensor.element_count; i++)
        values[i] = test_load(b->tensor.buffer.DataType, b->buffer.data, test_tensor_offset(&b->tensor, i));
    return values;
}

static uint64_t* read_bits(const bound_tensor* b) {
    uint64_t* bits = malloc(b->tensor.element_count * sizeof *bits);
    for (uint64_t i = 0; i < b->tensor.element_count; i++)
        bits[i] = test_load_bits(b->tensor.buffer.DataType, b->buffer.data, test_tensor_offset(&b->tensor, i));
    return bits;
}

/* Checks guards (every tensor) and untouched padding (outputs), then frees. */
static void release_tensor(bound_tensor* b, bool output, int which) {
    test_buffer_check_guards(&b->buffer, tensor_names[which]);
    if (output) test_buffer_check_unaddressed(&b->buffer, &b->tensor, tensor_names[which]);
    test_buffer_free(&b->buffer);
}

static void read_inputs(align_run* run, const bound_tensor* input, const bound_tensor* rois,
                        const bound_tensor* batch_indices) {
    if (input) run->input = read_back(input);
    run->rois = read_back(rois);
    run->batch_indices = read_bits(batch_indices);
}

static align_run run_forward(DMLDevice* device, const align_problem* p) {
    bound_tensor input, rois, batch_indices, output;
    bind_tensor(&input, p, T_INPUT, p->input);
    bind_tensor(&rois, p, T_ROI, p->rois);
    bind_tensor(&batch_indices, p, T_BATCH, p->batch_indices);
    bind_tensor(&output, p, T_OUTPUT, NULL);
    DML_ROI_ALIGN_OPERATOR_DESC align = {&input.tensor.desc,  &rois.tensor.desc, &batch_indices.tensor.desc,
                                         &output.tensor.desc, p->reduction,      p->interpolation,
                                         p->scale_x,          p->scale_y,        p->out_of_bounds_value,
                                         p->min_samples,      p->max_samples};
    DML_ROI_ALIGN1_OPERATOR_DESC align1 = {&input.tensor.desc,
                                           &rois.tensor.desc,
                                           &batch_indices.tensor.desc,
                                           &output.tensor.desc,
                                           p->reduction,
                                           p->interpolation,
                                           p->scale_x,
                                           p->scale_y,
                                           p->input_pixel_offset,
                                           p->output_pixel_offset,
                                           p->out_of_bounds_value,
                                           p->min_samples,
                                           p->max_samples,
                                           p->align_corners};
    DML_OPERATOR_DESC op = {p->forward_type,
                            p->forward_type == DML_OPERATOR_ROI_ALIGN ? (const void*)&align : (const void*)&align1};
    test_buffer* inputs[3] = {&input.buffer, &rois.buffer, &batch_indices.buffer};
    test_buffer* outputs[1] = {&output.buffer};
    align_run run = {0};
    run.status = test_run(device, &op, 3, inputs, 1, outputs);
    run.output = read_back(&output);
    run.output_bits = read_bits(&output);
    read_inputs(&run, &input, &rois, &batch_indices);
    release_tensor(&input, false, T_INPUT);
    release_tensor(&rois, false, T_ROI);
    release_tensor(&batch_indices, false, T_BATCH);
    release_tensor(&output, true, T_OUTPUT);
    return run;
}

/* ROI_ALIGN_GRAD with InputTensor when with_input, and the requested outputs. */
static align_run run_grad(DMLDevice* device, const align_problem* p, bool with_input, bool want_output_gradient,
                          bool want_roi_gradient) {
    bound_tensor input, input_gradient, rois, batch_indices, output_gradient, roi_gradient;
    if (with_input) bind_tensor(&input, p, T_INPUT, p->input);
    bind_tensor(&input_gradient, p, T_INPUT_GRADIENT, p->input_gradient);
    bind_tensor(&rois, p, T_ROI, p->rois);
    bind_tensor(&batch_indices, p, T_BATCH, p->batch_indices);
    if (want_output_gradient) bind_tensor(&output_gradient, p, T_OUTPUT_GRADIENT, NULL);
    if (want_roi_gradient) bind_tensor(&roi_gradient, p, T_ROI_GRADIENT, NULL);
    DML_ROI_ALIGN_GRAD_OPERATOR_DESC grad = {with_input ? &input.tensor.desc : NULL,
                                             &input_gradient.tensor.desc,
                                             &rois.tensor.desc,
                                             &batch_indices.tensor.desc,
                                             want_output_gradient ? &output_gradient.tensor.desc : NULL,
                                             want_roi_gradient ? &roi_gradient.tensor.desc : NULL,
                                             p->reduction,
                                             p->interpolation,
                                             p->scale_x,
                                             p->scale_y,
                                             p->input_pixel_offset,
                                             p->output_pixel_offset,
                                             p->min_samples,
                                             p->max_samples,
                                             p->align_corners};
    DML_OPERATOR_DESC op = {DML_OPERATOR_ROI_ALIGN_GRAD, &grad};
    /* Absent optional tensors keep their slots, bound NONE. */
    test_buffer* inputs[4] = {with_input ? &input.buffer : NULL, &input_gradient.buffer, &rois.buffer,
                              &batch_indices.buffer};
    test_buffer* outputs[2] = {want_output_gradient ? &output_gradient.buffer : NULL,
                               want_roi_gradient ? &roi_gradient.buffer : NULL};
    align_run run = {0};
    run.status = test_run(device, &op, 4, inputs, 2, outputs);
    read_inputs(&run, with_input ? &input : NULL, &rois, &batch_indices);
    run.input_gradient = read_back(&input_gradient);
    if (with_input) release_tensor(&input, false, T_INPUT);
    release_tensor(&input_gradient, false, T_INPUT_GRADIENT);
    release_tensor(&rois, false, T_ROI);
    release_tensor(&batch_indices, false, T_BATCH);
    if (want_output_gradient) {
        run.output_gradient = read_back(&output_gradient);
        run.output_gradient_bits = read_bits(&output_gradient);
        release_tensor(&output_gradient, true, T_OUTPUT_GRADIENT);
    }
    if (want_roi_gradient) {
        run.roi_gradient = read_back(&roi_gradient);
        run.roi_gradient_bits = read_bits(&roi_gradient);
        release_tensor(&roi_gradient, true, T_ROI_GRADIENT);
    }
    return run;
}

/* The reference problem for p on the inputs a run actually stored. */
static ref_roi_align reference_problem(const align_problem* p, const align_run* run, bool float32) {
    bool v0 = p->forward_type == DML_OPERATOR_ROI_ALIGN;
    ref_roi_align r = {
        .batch = p->batch,
        .channels = p->channels,
        .height = p->height,
        .width = p->width,
        .roi_count = p->roi_count,
        .out_height = p->out_height,
        .out_width = p->out_width,
        .input = run->input,
        .rois = run->rois,
        .batch_indices = run->batch_indices,
        .reduction_max = p->reduction == DML_REDUCE_FUNCTION_MAX,
        .linear = p->interpolation == DML_INTERPOLATION_MODE_LINEAR,
        .align_corners = v0 ? false : p->align_corners,
        .spatial_scale_x = p->scale_x,
        .spatial_scale_y = p->scale_y,
        .input_pixel_offset = v0 ? 0.5 : p->input_pixel_offset,
        .output_pixel_offset = v0 ? -0.5 : p->output_pixel_offset,
        .out_of_bounds_value = p->out_of_bounds_value,
        .min_samples = p->min_samples,
        .max_samples = p->max_samples,
        .float32 = float32,
    };
    return r;
}

/* |got - expected| <= abs + rel |expected| + magnitude_rel * magnitude. */
typedef struct tolerance {
    double abs, rel, magnitude_rel;
} tolerance;

static tolerance tolerance_for(DML_TENSOR_DATA_TYPE type) {
    /* FLOAT32: rounding of FLOAT32 sums relative to the size of their terms;
     * FLOAT16: RA-13 (1e-3 relative + 1e-3 absolute) on top. */
    tolerance t = {1e-6, 1e-6, 1e-5};
    if (type == DML_TENSOR_DATA_TYPE_FLOAT16) t = (tolerance){1e-3, 1e-3, 1e-5};
    return t;
}

static bool compare_values(const double* got, const double* expected, const double* magnitude, uint64_t count,
                           tolerance t, const char* what) {
    for (uint64_t i = 0; i < count; i++) {
        double limit = t.abs + t.rel * fabs(expected[i]) + (magnitude ? t.magnitude_rel * magnitude[i] : 0.0);
        bool ok = (isnan(got[i]) && isnan(expected[i])) || got[i] == expected[i] || fabs(got[i] - expected[i]) <= limit;
        if (!ok) {
            EXPECT(false, "%s: element %llu is %.9g but expected %.9g (tolerance %.3g)", what, (unsigned long long)i,
                   got[i], expected[i], limit);
            return false;
        }
    }
    return true;
}

static uint64_t output_count(const align_problem* p) {
    return (uint64_t)p->roi_count * p->channels * p->out_height * p->out_width;
}

static uint64_t image_count(const align_problem* p) { return (uint64_t)p->batch * p->channels * p->height * p->width; }

static const char* describe(const align_problem* p, char* text, size_t size, const char* what) {
    snprintf(text, size,
             "%s: %s %s idx %s N%u C%u H%u W%u R%u OH%u OW%u roi rank %u batch rank %u %s %s scale %g/%g "
             "offsets %g/%g align %d samples %u..%u layouts %s/%s/%s/%s",
             what, dmlOperatorTypeName(p->forward_type), dmlDataTypeName(p->type), dmlDataTypeName(p->index_type),
             p->batch, p->channels, p->height, p->width, p->roi_count, p->out_height, p->out_width, p->roi_rank,
             p->batch_rank, p->reduction == DML_REDUCE_FUNCTION_MAX ? "MAX" : "AVERAGE",
             p->interpolation == DML_INTERPOLATION_MODE_LINEAR ? "LINEAR" : "NEAREST", p->scale_x, p->scale_y,
             p->input_pixel_offset, p->output_pixel_offset, p->align_corners, p->min_samples, p->max_samples,
             test_layout_name(p->layouts[T_INPUT]), test_layout_name(p->layouts[T_ROI]),
             test_layout_name(p->layouts[T_BATCH]), test_layout_name(p->layouts[T_OUTPUT]));
    return text;
}

/* Forward run compared with the reference (FLOAT32 coordinates, as the spec prescribes). */
static void check_forward(DMLDevice* device, const align_problem* p, const char* what) {
    align_run run = run_forward(device, p);
    char text[512];
    EXPECT_STATUS(run.status, S_OK, NULL);
    if (SUCCEEDED(run.status)) {
        uint64_t count = output_count(p);
        double* expected = malloc(count * sizeof *expected);
        double* magnitude = malloc(count * sizeof *magnitude);
        ref_roi_align r = reference_problem(p, &run, true);
        ref_roi_align_forward(&r, expected, magnitude);
        compare_values(run.output, expected, magnitude, count, tolerance_for(p->type),
                       describe(p, text, sizeof text, what));
        free(expected);
        free(magnitude);
    }
    align_run_free(&run);
}

/* Gradient run (both outputs) compared with the reference's §7 formulas. */
static void check_grad(DMLDevice* device, const align_problem* p, bool with_input, bool want_output_gradient,
                       bool want_roi_gradient, const char* what) {
    align_run run = run_grad(device, p, with_input, want_output_gradient, want_roi_gradient);
    char text[512];
    EXPECT_STATUS(run.status, S_OK, NULL);
    if (SUCCEEDED(run.status)) {
        uint64_t dx_count = image_count(p), droi_count = (uint64_t)p->roi_count * 4;
        double* dx = malloc(dx_count * sizeof *dx);
        double* dx_magnitude = malloc(dx_count * sizeof *dx_magnitude);
        double* droi = malloc(droi_count * sizeof *droi);
        double* droi_magnitude = malloc(droi_count * sizeof *droi_magnitude);
        ref_roi_align r = reference_problem(p, &run, true);
        ref_roi_align_grad(&r, run.input_gradient, dx, dx_magnitude, want_roi_gradient ? droi : NULL, droi_magnitude);
        char label[560];
        describe(p, text, sizeof text, what);
        if (want_output_gradient) {
            snprintf(label, sizeof label, "%s OutputGradientTensor", text);
            compare_values(run.output_gradient, dx, dx_magnitude, dx_count, tolerance_for(p->type), label);
        }
        if (want_roi_gradient) {
            snprintf(label, sizeof label, "%s OutputROIGradientTensor", text);
            compare_values(run.roi_gradient, droi, droi_magnitude, droi_count, tolerance_for(p->type), label);
        }
        free(dx);
        free(dx_magnitude);
        free(droi);
        free(droi_magnitude);
    }
    align_run_free(&run);
}

static void packed_layouts(align_problem* p) {
    for (int i = 0; i < T_COUNT; i++)
        p->layouts[i] = TEST_LAYOUT_PACKED;
}

static void random_layouts(align_problem* p, bool allow_broadcast) {
    for (int i = 0; i < T_COUNT; i++) {
        bool is_output = i == T_OUTPUT || i == T_OUTPUT_GRADIENT || i == T_ROI_GRADIENT;
        p->layouts[i] = test_random_layout(allow_broadcast && !is_output);
    }
}

/* ---- Golden vectors (examples.md RA-1..RA-9) ---- */

typedef struct align_vector {
    const char* id;
    DML_OPERATOR_TYPE type; /* the forward operator, or ROI_ALIGN_GRAD for a gradient-only vector */
    DML_REDUCE_FUNCTION reduction;
    DML_INTERPOLATION_MODE interpolation;
    float scale_x, scale_y, input_pixel_offset, output_pixel_offset, out_of_bounds_value;
    uint32_t min_samples, max_samples;
    bool align_corners;
    uint32_t batch, channels, height, width, roi_count, out_height, out_width;
    const double *input, *rois, *batch_indices, *input_gradient;
    const double *output, *output_gradient, *roi_gradient; /* NULL: not listed */
    double abs, rel;
} align_vector;

#define AVG DML_REDUCE_FUNCTION_AVERAGE
#define MAX DML_REDUCE_FUNCTION_MAX
#define NEAREST DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR
#define LINEAR DML_INTERPOLATION_MODE_LINEAR

/* clang-format off */
static const align_vector align_vectors[] = {
    {"RA-1", DML_OPERATOR_ROI_ALIGN1, AVG, NEAREST, 1, 1, 0.5f, -0.5f, 0, 1, 1, false, 1, 1, 4, 4, 4, 1, 3,
     RA1_Input, RA1_ROI, RA1_BatchIndices, NULL, RA1_Output, NULL, NULL, 0, 0},
    {"RA-2", DML_OPERATOR_ROI_ALIGN_GRAD, AVG, NEAREST, 1, 1, 0.5f, -0.5f, 0, 1, 1, false, 1, 1, 4, 4, 4, 1, 3, NULL,
     RA2_ROI, RA2_BatchIndices, RA2_InputGradient, NULL, RA2_OutputGradient, NULL, 0, 0},
    {"RA-3", DML_OPERATOR_ROI_ALIGN, AVG, LINEAR, 1, 1, 0.5f, -0.5f, 0, 1, 4294967295u, false, 1, 1, 10, 10, 1, 4,
     4, RA3_Input, RA3_ROI, RA3_BatchIndices, NULL, RA3_Output, NULL, NULL, 1e-6, 0},
    {"RA-4", DML_OPERATOR_ROI_ALIGN1, AVG, LINEAR, 1, 1, 0.5f, -0.5f, 0, 2, 2, false, 1, 1, 10, 10, 3, 5, 5,
     RA4_Input, RA4_ROI, RA4_BatchIndices, NULL, RA4_Output, NULL, NULL, 1e-4, 0},
    {"RA-5", DML_OPERATOR_ROI_ALIGN1, AVG, LINEAR, 1, 1, 0.0f, -0.5f, 0, 2, 2, false, 1, 1, 10, 10, 3, 5, 5,
     RA5_Input, RA5_ROI, RA5_BatchIndices, NULL, RA5_Output, NULL, NULL, 1e-4, 0},
    {"RA-6", DML_OPERATOR_ROI_ALIGN1, AVG, LINEAR, 0.0625f, 0.0625f, 0.0f, -0.5f, 0, 2, 2, false, 1, 3, 5, 5, 5, 3,
     4, RA6_Input, RA6_ROI, RA6_BatchIndices, NULL, RA6_Output, NULL, NULL, 1e-5, 0},
    {"RA-7", DML_OPERATOR_ROI_ALIGN1, MAX, LINEAR, 0.0625f, 0.0625f, 0.0f, -0.5f, 0, 2, 2, false, 1, 3, 5, 5, 5, 3,
     4, RA6_Input, RA6_ROI, RA6_BatchIndices, NULL, RA6_Output, NULL, NULL, 1e-5, 0},
    {"RA-8 (MAX)", DML_OPERATOR_ROI_ALIGN1, MAX, LINEAR, 1, 1, 0.5f, -0.5f, -7.0f, 1, 8, false, 1, 1, 4, 4, 3, 1, 2,
     RA8_Input, RA8_ROI, RA8_BatchIndices, NULL, RA8_OutputMAX, NULL, NULL, 1e-6, 0},
    {"RA-8 (AVERAGE)", DML_OPERATOR_ROI_ALIGN1, AVG, LINEAR, 1, 1, 0.5f, -0.5f, -7.0f, 1, 8, false, 1, 1, 4, 4, 3, 1,
     2, RA8_Input, RA8_ROI, RA8_BatchIndices, NULL, RA8_OutputAVERAGE, NULL, NULL, 1e-6, 0},
    {"RA-9", DML_OPERATOR_ROI_ALIGN1, AVG, LINEAR, 1, 1, 0.5f, -0.5f, 0, 1, 4, false, 1, 1, 4, 4, 1, 2, 2, RA9_Input,
     RA9_ROI, RA9_BatchIndices, RA9_InputGradient, RA9_Outputforward, RA9_OutputGradient, RA9_OutputROIGradient, 1e-5,
     1e-5},
};
/* clang-format on */

static align_problem vector_problem(const align_vector* v, DML_TENSOR_DATA_TYPE type) {
    align_problem p = {
        .forward_type = v->type == DML_OPERATOR_ROI_ALIGN ? DML_OPERATOR_ROI_ALIGN : DML_OPERATOR_ROI_ALIGN1,
        .type = type,
        .index_type = DML_TENSOR_DATA_TYPE_UINT32,
        .batch = v->batch,
        .channels = v->channels,
        .height = v->height,
        .width = v->width,
        .roi_count = v->roi_count,
        .out_height = v->out_height,
        .out_width = v->out_width,
        .roi_rank = 2,
        .batch_rank = 1,
        .reduction = v->reduction,
        .interpolation = v->interpolation,
        .scale_x = v->scale_x,
        .scale_y = v->scale_y,
        .input_pixel_offset = v->input_pixel_offset,
        .output_pixel_offset = v->output_pixel_offset,
        .out_of_bounds_value = v->out_of_bounds_value,
        .min_samples = v->min_samples,
        .max_samples = v->max_samples,
        .align_corners = v->align_corners,
        .input = v->input,
        .rois = v->rois,
        .batch_indices = v->batch_indices,
        .input_gradient = v->input_gradient,
    };
    packed_layouts(&p);
    return p;
}

static tolerance vector_tolerance(const align_vector* v, DML_TENSOR_DATA_TYPE type) {
    tolerance t = {v->abs, v->rel, 0};
    if (type == DML_TENSOR_DATA_TYPE_FLOAT16) { /* RA-13, on top of the vector's own */
        t.abs += 1e-3;
        t.rel += 1e-3;
    }
    return t;
}

static void run_vector(DMLDevice* device, const align_vector* v, const align_problem* p) {
    char what[96];
    tolerance t = vector_tolerance(v, p->type);
    if (v->output) {
        align_run run = run_forward(device, p);
        EXPECT_STATUS(run.status, S_OK, NULL);
        snprintf(what, sizeof what, "%s %s forward", v->id, dmlDataTypeName(p->type));
        if (SUCCEEDED(run.status)) compare_values(run.output, v->output, NULL, output_count(p), t, what);
        align_run_free(&run);
    }
    if (v->output_gradient || v->roi_gradient) {
        /* Each listed gradient alone, then both together. */
        for (int which = 0; which < 3; which++) {
            bool want_dx = v->output_gradient && which != 1, want_droi = v->roi_gradient && which != 0;
            if (!want_dx && !want_droi) continue;
            if (which == 2 && !(want_dx && want_droi)) continue;
            align_run run = run_grad(device, p, v->input != NULL, want_dx, want_droi);
            EXPECT_STATUS(run.status, S_OK, NULL);
            if (SUCCEEDED(run.status)) {
                snprintf(what, sizeof what, "%s %s OutputGradientTensor", v->id, dmlDataTypeName(p->type));
                if (want_dx) compare_values(run.output_gradient, v->output_gradient, NULL, image_count(p), t, what);
                snprintf(what, sizeof what, "%s %s OutputROIGradientTensor", v->id, dmlDataTypeName(p->type));
                if (want_droi)
                    compare_values(run.roi_gradient, v->roi_gradient, NULL, (uint64_t)p->roi_count * 4, t, what);
            }
            align_run_free(&run);
        }
    }
}

TEST_CASE(golden_vectors) {
    DMLDevice* device = test_device(0);
    const DML_TENSOR_DATA_TYPE types[2] = {DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_FLOAT16};
    for (size_t i = 0; i < sizeof align_vectors / sizeof align_vectors[0]; i++) {
        for (int t = 0; t < 2; t++) {
            align_problem p = vector_problem(&align_vectors[i], types[t]);
            run_vector(device, &align_vectors[i], &p);
            /* Again with random ROI / batch-index shapes and layouts (no broadcast). */
            p.roi_rank = test_rand_range(2, 4);
            p.batch_rank = test_rand_range(1, 4);
            p.index_type = test_rand_bool() ? DML_TENSOR_DATA_TYPE_UINT64 : DML_TENSOR_DATA_TYPE_UINT32;
            if (align_vectors[i].output_gradient || align_vectors[i].roi_gradient)
                p.index_type = DML_TENSOR_DATA_TYPE_UINT32; /* the gradient takes UINT32 only */
            random_layouts(&p, false);
            run_vector(device, &align_vectors[i], &p);
        }
    }
    dmlReleaseDevice(device);
}

/* The exact RA-1 / RA-2 numbers (the documented seed example) bit for bit. */
TEST_CASE(seed_example_exact) {
    DMLDevice* device = test_device(0);
    align_problem forward = vector_problem(&align_vectors[0], DML_TENSOR_DATA_TYPE_FLOAT32);
    align_run run = run_forward(device, &forward);
    EXPECT_STATUS(run.status, S_OK, NULL);
    for (int i = 0; i < 12 && SUCCEEDED(run.status); i++)
        EXPECT(run.output[i] == RA1_Output[i], "RA-1 element %d is %g, expected %g", i, run.output[i], RA1_Output[i]);
    align_run_free(&run);
    align_problem grad = vector_problem(&align_vectors[1], DML_TENSOR_DATA_TYPE_FLOAT32);
    run = run_grad(device, &grad, false, true, false);
    EXPECT_STATUS(run.status, S_OK, NULL);
    for (int i = 0; i < 16 && SUCCEEDED(run.status); i++)
        EXPECT(run.output_gradient[i] == RA2_OutputGradient[i], "RA-2 element %d is %g, expected %g", i,
               run.output_gradient[i], RA2_OutputGradient[i]);
    align_run_free(&run);
    dmlReleaseDevice(device);
}

/* The reference (the oracle of the randomized tests) reproduces the vectors. */
TEST_CASE(reference_matches_golden_vectors) {
    for (size_t i = 0; i < sizeof align_vectors / sizeof align_vectors[0]; i++) {
        const align_vector* v = &align_vectors[i];
        align_problem p = vector_problem(v, DML_TENSOR_DATA_TYPE_FLOAT32);
        uint64_t batch_indices[8];
        for (uint32_t r = 0; r < v->roi_count; r++)
            batch_indices[r] = (uint64_t)v->batch_indices[r];
        align_run stored = {.input = (double*)v->input, .rois = (double*)v->rois, .batch_indices = batch_indices};
        tolerance t = {v->abs + 1e-7, v->rel, 0};
        for (int float32 = 0; float32 < 2; float32++) {
            ref_roi_align r = reference_problem(&p, &stored, float32);
            char what[64];
            snprintf(what, sizeof what, "reference %s (float32 %d)", v->id, float32);
            double output[256], dx[256], droi[32];
            if (v->output) {
                ref_roi_align_forward(&r, output, NULL);
                compare_values(output, v->output, NULL, output_count(&p), t, what);
            }
            if (v->output_gradient || v->roi_gradient) {
                ref_roi_align_grad(&r, v->input_gradient, dx, NULL, v->roi_gradient ? droi : NULL, NULL);
                if (v->output_gradient) compare_values(dx, v->output_gradient, NULL, image_count(&p), t, what);
                if (v->roi_gradient) compare_values(droi, v->roi_gradient, NULL, (uint64_t)p.roi_count * 4, t, what);
            }
        }
    }
}

/* ---- Randomized problems ---- */

/* A corner coordinate (before SpatialScale) along an axis of `extent` pixels. */
static double random_corner(uint32_t extent, float scale, bool allow_huge) {
    double unscaled = extent / scale;
    switch (test_rand_range(0, 15)) {
    case 0: return test_rand_double(-3.0 * unscaled, -1.2 * unscaled); /* entirely before the image */
    case 1: return test_rand_double(1.2 * unscaled, 3.0 * unscaled);   /* entirely after it */
    case 2: return allow_huge ? test_rand_double(-1e5, 1e5) : test_rand_double(-unscaled, 2 * unscaled);
    case 3: return round(test_rand_double(0, unscaled) * 2) / 2; /* on pixel centres and edges */
    default: return test_rand_double(-0.3 * unscaled, 1.3 * unscaled);
    }
}

typedef struct align_data {
    double *input, *rois, *batch_indices, *input_gradient;
} align_data;

static void align_data_free(align_data* d) {
    free(d->input);
    free(d->rois);
    free(d->batch_indices);
    free(d->input_gradient);
}

/* A random problem; for_gradient keeps the gradient's constraints (UINT32
 * indices, no OutOfBoundsInputValue). */
typedef enum problem_size {
    PROBLEM_SMALL,
    /* 8 to 27 channels, larger images and regions, so that the fast paths
     * that vectorize across 8 channels run full vectors and tails. */
    PROBLEM_WIDE,
    /* Wide, with an output of 8 MiB or more in either type (1500 ROIs of 24
     * to 27 channels x 9 x 13), which the fast paths stream. */
    PROBLEM_STREAMED,
} problem_size;

static void random_problem_sized(align_problem* p, align_data* d, bool for_gradient, problem_size size) {
    bool wide = size != PROBLEM_SMALL, streamed = size == PROBLEM_STREAMED;
    static const float scales[] = {1.0f, 0.5f, 0.25f, 0.0625f, 2.0f, 0.3f};
    static const float offsets[] = {0.5f, -0.5f, 0.0f, 0.25f, -0.75f};
    static const uint32_t sample_bounds[][2] = {{1, 1}, {2, 2}, {1, 4}, {3, 3}, {1, 8}, {2, 5}, {1, 4294967295u}};
    memset(p, 0, sizeof *p);
    /* The gradient has ROI_ALIGN1's fields. */
    p->forward_type = !for_gradient && test_rand_bool() ? DML_OPERATOR_ROI_ALIGN : DML_OPERATOR_ROI_ALIGN1;
    p->type = test_rand_bool() ? DML_TENSOR_DATA_TYPE_FLOAT32 : DML_TENSOR_DATA_TYPE_FLOAT16;
    p->index_type = !for_gradient && test_rand_bool() ? DML_TENSOR_DATA_TYPE_UINT64 : DML_TENSOR_DATA_TYPE_UINT32;
    p->batch = test_rand_range(1, 3);
    p->channels = streamed ? test_rand_range(24, 27) : wide ? test_rand_range(8, 27) : test_rand_range(1, 3);
    p->height = test_rand_range(1, wide ? 16 : 8);
    p->width = test_rand_range(1, wide ? 16 : 8);
    p->roi_count = streamed ? 1500 : test_rand_range(1, wide ? 9 : 6);
    p->out_height = streamed ? 9 : test_rand_range(1, wide ? 5 : 4);
    p->out_width = streamed ? 13 : test_rand_range(1, wide ? 5 : 4);
    p->roi_rank = test_rand_range(2, 4);
    p->batch_rank = test_rand_range(1, 4);
    p->reduction = test_rand_bool() ? DML_REDUCE_FUNCTION_MAX : DML_REDUCE_FUNCTION_AVERAGE;
    p->interpolation = test_rand_bool() ? DML_INTERPOLATION_MODE_LINEAR : DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR;
    p->scale_x = scales[test_rand_range(0, 5)];
    p->scale_y = test_rand_bool() ? p->scale_x : scales[test_rand_range(0, 5)];
    if (p->forward_type == DML_OPERATOR_ROI_ALIGN && !for_gradient) {
        p->input_pixel_offset = 0.5f;
        p->output_pixel_offset = -0.5f;
    } else {
        p->input_pixel_offset = offsets[test_rand_range(0, 4)];
        p->output_pixel_offset = offsets[test_rand_range(0, 4)];
        p->align_corners = test_rand_range(0, 3) == 0;
    }
    p->out_of_bounds_value = for_gradient ? 0.0f : (float)round(test_rand_double(-20, 20)) / 4;
    const uint32_t* bounds = sample_bounds[test_rand_range(0, 6)];
    p->min_samples = bounds[0];
    p->max_samples = bounds[1];
    bool adaptive_unbounded = p->max_samples > 8; /* keep huge boxes to bounded sample counts */
    random_layouts(p, true);

    size_t image = image_count(p), outputs = output_count(p);
    d->input = malloc(image * sizeof *d->input);
    d->rois = malloc((size_t)p->roi_count * 4 * sizeof *d->rois);
    d->batch_indices = malloc(p->roi_count * sizeof *d->batch_indices);
    d->input_gradient = malloc(outputs * sizeof *d->input_gradient);
    for (size_t i = 0; i < image; i++)
        d->input[i] = test_rand_double(-4, 4);
    for (size_t i = 0; i < outputs; i++)
        d->input_gradient[i] = test_rand_double(-2, 2);
    for (uint32_t r = 0; r < p->roi_count; r++) {
        double* roi = d->rois + (size_t)r * 4;
        roi[0] = random_corner(p->width, p->scale_x, !adaptive_unbounded);
        roi[1] = random_corner(p->height, p->scale_y, !adaptive_unbounded);
        roi[2] = random_corner(p->width, p->scale_x, !adaptive_unbounded);
        roi[3] = random_corner(p->height, p->scale_y, !adaptive_unbounded);
        uint32_t shape = test_rand_range(0, 9);
        if (shape < 6) { /* ordered corners; otherwise flipped along one or both axes */
            if (roi[2] < roi[0]) {
                double t = roi[0];
                roi[0] = roi[2];
                roi[2] = t;
            }
            if (roi[3] < roi[1]) {
                double t = roi[1];
                roi[1] = roi[3];
                roi[3] = t;
            }
        } else if (shape == 6) { /* empty region: a point */
            roi[2] = roi[0];
            roi[3] = roi[1];
        } else if (shape == 7) { /* tiny */
            roi[2] = roi[0] + 1e-3;
        }
        uint32_t index_kind = test_rand_range(0, 11);
        d->batch_indices[r] = index_kind == 0   ? p->batch /* RA-12 */
                              : index_kind == 1 ? 4294967295.0
                              : index_kind == 2 && p->index_type == DML_TENSOR_DATA_TYPE_UINT64
                                  ? 1099511627776.0
                                  : test_rand_range(0, p->batch - 1);
    }
    p->input = d->input;
    p->rois = d->rois;
    p->batch_indices = d->batch_indices;
    p->input_gradient = d->input_gradient;
}

static void random_problem(align_problem* p, align_data* d, bool for_gradient) {
    random_problem_sized(p, d, for_gradient, PROBLEM_SMALL);
}

TEST_CASE(random_forward_against_reference) {
    DMLDevice* device = test_device(0);
    for (int iteration = 0; iteration < 250 && !test_case_failed(); iteration++) {
        align_problem p;
        align_data d;
        random_problem(&p, &d, false);
        check_forward(device, &p, "random forward");
        align_data_free(&d);
    }
    dmlReleaseDevice(device);
}

TEST_CASE(random_grad_against_reference) {
    DMLDevice* device = test_device(0);
    for (int iteration = 0; iteration < 200 && !test_case_failed(); iteration++) {
        align_problem p;
        align_data d;
        random_problem(&p, &d, true);
        /* Each output alone and both; InputTensor also given for AVERAGE sometimes (RA-14). */
        uint32_t outputs = test_rand_range(1, 3);
        bool want_dx = outputs & 1, want_droi = outputs & 2;
        bool with_input = want_droi || p.reduction == DML_REDUCE_FUNCTION_MAX || test_rand_bool();
        check_grad(device, &p, with_input, want_dx, want_droi, "random gradient");
        align_data_free(&d);
    }
    dmlReleaseDevice(device);
}

/* A device that runs only the generic kernels: the reference of the fast paths. */
static DMLDevice* generic_device(void) {
    DML_DEVICE_DESC desc = {.Backend = DML_BACKEND_CPU, .MaxCpuIsa = DML_CPU_ISA_GENERIC};
    DMLDevice* device = NULL;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), S_OK, NULL);
    return device;
}

static void expect_same_bits(const uint64_t* fast, const uint64_t* generic, uint64_t count, const char* what) {
    for (uint64_t i = 0; i < count; i++)
        if (fast[i] != generic[i]) {
            EXPECT(false, "%s: element %llu has bits 0x%llx but the generic kernel gives 0x%llx", what,
                   (unsigned long long)i, (unsigned long long)fast[i], (unsigned long long)generic[i]);
            return;
        }
}

/* The forward of `device` gives the bits of the generic kernel's. */
static void expect_forward_of_generic(DMLDevice* device, DMLDevice* generic, const align_problem* p, const char* what) {
    uint64_t position = test_rand_position(); /* both runs draw the same layouts */
    align_run fast = run_forward(device, p);
    test_rand_seek(position);
    align_run slow = run_forward(generic, p);
    if (SUCCEEDED(fast.status) && SUCCEEDED(slow.status))
        expect_same_bits(fast.output_bits, slow.output_bits, output_count(p), what);
    align_run_free(&fast);
    align_run_free(&slow);
}

/* Every implementation of this ISA level gives the generic kernel's bits
 * (the determinism contract), and the reference's values, on problems wide
 * enough for full 8-channel vectors and their tails. */
TEST_CASE(wide_random_bit_identical_to_generic) {
    if (test_backend_is_cuda()) return; /* a CPU comparison */
    DMLDevice *device = test_device(0), *generic = generic_device();
    for (int iteration = 0; iteration < 160 && !test_case_failed(); iteration++) {
        align_problem p;
        align_data d;
        bool gradient = iteration % 2 == 1;
        random_problem_sized(&p, &d, gradient, PROBLEM_WIDE);
        char text[512];
        describe(&p, text, sizeof text, gradient ? "wide gradient" : "wide forward");
        if (!gradient) {
            check_forward(device, &p, "wide forward");
            expect_forward_of_generic(device, generic, &p, text);
        } else {
            uint32_t outputs = test_rand_range(1, 3);
            bool want_dx = outputs & 1, want_droi = outputs & 2;
            bool with_input = want_droi || p.reduction == DML_REDUCE_FUNCTION_MAX || test_rand_bool();
            check_grad(device, &p, with_input, want_dx, want_droi, "wide gradient");
            uint64_t position = test_rand_position(); /* both runs draw the same layouts */
            align_run fast = run_grad(device, &p, with_input, want_dx, want_droi);
            test_rand_seek(position);
            align_run slow = run_grad(generic, &p, with_input, want_dx, want_droi);
            char label[560];
            snprintf(label, sizeof label, "%s OutputGradientTensor", text);
            if (SUCCEEDED(fast.status) && SUCCEEDED(slow.status) && want_dx)
                expect_same_bits(fast.output_gradient_bits, slow.output_gradient_bits, image_count(&p), label);
            snprintf(label, sizeof label, "%s OutputROIGradientTensor", text);
            if (SUCCEEDED(fast.status) && SUCCEEDED(slow.status) && want_droi)
                expect_same_bits(fast.roi_gradient_bits, slow.roi_gradient_bits, (uint64_t)p.roi_count * 4, label);
            align_run_free(&fast);
            align_run_free(&slow);
        }
        align_data_free(&d);
    }
    dmlReleaseDevice(device);
    dmlReleaseDevice(generic);
}

/* Forward outputs of 8 MiB or more in packed NCHW, which the fast paths
 * write with non-temporal stores a block of 8 channels at a time (full
 * blocks and a partial one, 117 outputs a channel so that blocks start and
 * end inside cache lines): the generic kernel's bits and the reference's
 * values, in both types. */
TEST_CASE(streamed_forward_bit_identical_to_generic) {
    if (test_backend_is_cuda()) return; /* a CPU comparison */
    DMLDevice *device = test_device(0), *generic = generic_device();
    for (int t = 0; t < 2 && !test_case_failed(); t++) {
        align_problem p;
        align_data d;
        random_problem_sized(&p, &d, false, PROBLEM_STREAMED);
        p.type = t ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        p.min_samples = p.max_samples = 2; /* bounded work */
        for (int i = 0; i < T_COUNT; i++)
            p.layouts[i] = TEST_LAYOUT_PACKED;
        char text[512];
        describe(&p, text, sizeof text, "streamed forward");
        check_forward(device, &p, text);
        expect_forward_of_generic(device, generic, &p, text);
        align_data_free(&d);
    }
    dmlReleaseDevice(device);
    dmlReleaseDevice(generic);
}

/* ROI_ALIGN is ROI_ALIGN1 with offsets 0.5 / -0.5 and no corner alignment. */
TEST_CASE(roi_align_equals_roi_align1_with_pixel_centres) {
    DMLDevice* device = test_device(0);
    for (int iteration = 0; iteration < 30 && !test_case_failed(); iteration++) {
        align_problem p;
        align_data d;
        random_problem(&p, &d, false);
        p.forward_type = DML_OPERATOR_ROI_ALIGN;
        p.input_pixel_offset = 0.5f;
        p.output_pixel_offset = -0.5f;
        p.align_corners = false;
        packed_layouts(&p);
        align_run v0 = run_forward(device, &p);
        p.forward_type = DML_OPERATOR_ROI_ALIGN1;
        align_run v1 = run_forward(device, &p);
        EXPECT(SUCCEEDED(v0.status) && SUCCEEDED(v1.status), "both run");
        EXPECT(memcmp(v0.output_bits, v1.output_bits, output_count(&p) * sizeof(uint64_t)) == 0,
               "ROI_ALIGN and ROI_ALIGN1 differ");
        align_run_free(&v0);
        align_run_free(&v1);
        align_data_free(&d);
    }
    dmlReleaseDevice(device);
}

/* ---- Specific behaviours ---- */

/* RA-12: a batch index outside [0, N) gives OutOfBoundsInputValue forward and
 * no gradient; nothing outside the tensors is read or written. */
TEST_CASE(batch_index_out_of_range) {
    DMLDevice* device = test_device(0);
    double input[2 * 1 * 3 * 3], input_gradient[3 * 1 * 2 * 2];
    for (int i = 0; i < 18; i++)
        input[i] = i + 1;
    for (int i = 0; i < 12; i++)
        input_gradient[i] = 1;
    const double rois[12] = {0, 0, 3, 3, 0, 0, 3, 3, 0.5, 0.5, 2.5, 2.5};
    const double indices[3] = {2, 4294967295.0, 1099511627776.0};
    align_problem p = {.forward_type = DML_OPERATOR_ROI_ALIGN1,
                       .type = DML_TENSOR_DATA_TYPE_FLOAT32,
                       .index_type = DML_TENSOR_DATA_TYPE_UINT64,
                       .batch = 2,
                       .channels = 1,
                       .height = 3,
                       .width = 3,
                       .roi_count = 3,
                       .out_height = 2,
                       .out_width = 2,
                       .roi_rank = 2,
                       .batch_rank = 1,
                       .reduction = DML_REDUCE_FUNCTION_AVERAGE,
                       .interpolation = DML_INTERPOLATION_MODE_LINEAR,
                       .scale_x = 1,
                       .scale_y = 1,
                       .input_pixel_offset = 0.5f,
                       .output_pixel_offset = -0.5f,
                       .out_of_bounds_value = -3.5f,
                       .min_samples = 2,
                       .max_samples = 2,
                       .input = input,
                       .rois = rois,
                       .batch_indices = indices,
                       .input_gradient = input_gradient};
    packed_layouts(&p);
    for (int t = 0; t < 2; t++) {
        p.type = t ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        p.index_type = DML_TENSOR_DATA_TYPE_UINT64;
        align_run run = run_forward(device, &p);
        EXPECT_STATUS(run.status, S_OK, NULL);
        for (int i = 0; i < 12 && SUCCEEDED(run.status); i++)
            EXPECT(run.output[i] == -3.5, "forward element %d is %g, expected -3.5", i, run.output[i]);
        align_run_free(&run);
        p.index_type = DML_TENSOR_DATA_TYPE_UINT32;
        const double gradient_indices[3] = {2, 4294967295.0, 7};
        p.batch_indices = gradient_indices;
        run = run_grad(device, &p, true, true, true);
        EXPECT_STATUS(run.status, S_OK, NULL);
        for (int i = 0; i < 18 && SUCCEEDED(run.status); i++)
            EXPECT(run.output_gradient[i] == 0.0, "OutputGradient element %d is %g, expected 0", i,
                   run.output_gradient[i]);
        for (int i = 0; i < 12 && SUCCEEDED(run.status); i++)
            EXPECT(run.roi_gradient[i] == 0.0, "OutputROIGradient element %d is %g, expected 0", i,
                   run.roi_gradient[i]);
        align_run_free(&run);
        p.batch_indices = indices;
    }
    dmlReleaseDevice(device);
}

/* An inverted region samples the same points in mirrored order: swapping x1
 * and x2 mirrors each output row. */
TEST_CASE(flipped_region_mirrors_output) {
    DMLDevice* device = test_device(0);
    double input[1 * 2 * 6 * 7];
    for (int i = 0; i < 84; i++)
        input[i] = test_rand_double(-3, 3);
    const double rois[8] = {0.7, 1.2, 5.1, 4.4, 5.1, 1.2, 0.7, 4.4};
    const double indices[2] = {0, 0};
    align_problem p = {.forward_type = DML_OPERATOR_ROI_ALIGN1,
                       .type = DML_TENSOR_DATA_TYPE_FLOAT32,
                       .index_type = DML_TENSOR_DATA_TYPE_UINT32,
                       .batch = 1,
                       .channels = 2,
                       .height = 6,
                       .width = 7,
                       .roi_count = 2,
                       .out_height = 3,
                       .out_width = 4,
                       .roi_rank = 2,
                       .batch_rank = 1,
                       .reduction = DML_REDUCE_FUNCTION_AVERAGE,
                       .interpolation = DML_INTERPOLATION_MODE_LINEAR,
                       .scale_x = 1,
                       .scale_y = 1,
                       .input_pixel_offset = 0.5f,
                       .output_pixel_offset = -0.5f,
                       .min_samples = 1,
                       .max_samples = 4,
                       .input = input,
                       .rois = rois,
                       .batch_indices = indices};
    packed_layouts(&p);
    for (int reduction = 0; reduction < 2; reduction++) {
        p.reduction = reduction ? DML_REDUCE_FUNCTION_MAX : DML_REDUCE_FUNCTION_AVERAGE;
        align_run run = run_forward(device, &p);
        EXPECT_STATUS(run.status, S_OK, NULL);
        for (uint32_t c = 0; c < 2 && SUCCEEDED(run.status); c++)
            for (uint32_t oy = 0; oy < 3; oy++)
                for (uint32_t ox = 0; ox < 4; ox++) {
                    double straight = run.output[((0 * 2 + c) * 3 + oy) * 4 + ox];
                    double mirrored = run.output[((1 * 2 + c) * 3 + oy) * 4 + (3 - ox)];
                    EXPECT(fabs(straight - mirrored) <= 1e-5, "c%u oy%u ox%u: %g vs mirrored %g", c, oy, ox, straight,
                           mirrored);
                }
        align_run_free(&run);
    }
    dmlReleaseDevice(device);
}

/* Every allowed ROI and batch-index shape, with both index types, gives the
 * same result (RA-4's data). */
TEST_CASE(every_roi_and_batch_index_shape) {
    DMLDevice* device = test_device(0);
    const align_vector* v = &align_vectors[3];
    for (uint32_t roi_rank = 2; roi_rank <= 4; roi_rank++)
        for (uint32_t batch_rank = 1; batch_rank <= 4; batch_rank++)
            for (int index64 = 0; index64 < 2; index64++) {
                align_problem p = vector_problem(v, DML_TENSOR_DATA_TYPE_FLOAT32);
                p.roi_rank = roi_rank;
                p.batch_rank = batch_rank;
                p.index_type = index64 ? DML_TENSOR_DATA_TYPE_UINT64 : DML_TENSOR_DATA_TYPE_UINT32;
                run_vector(device, v, &p);
                /* The gradient (UINT32 indices) with the same shapes, ROI gradient included. */
                if (!index64) {
                    double input_gradient[75];
                    for (int i = 0; i < 75; i++)
                        input_gradient[i] = (i % 7) - 3;
                    p.input_gradient = input_gradient;
                    check_grad(device, &p, true, true, true, "gradient shapes");
                }
            }
    dmlReleaseDevice(device);
}

/* AlignRegionsToCorners: first and last samples on the corners; with one
 * sample the midpoint (RA-6). TensorFlow crop_and_resize style: offsets 0,
 * one sample, corners aligned. */
TEST_CASE(align_regions_to_corners) {
    DMLDevice* device = test_device(0);
    double input[5 * 5];
    for (int i = 0; i < 25; i++)
        input[i] = i; /* value = 5y + x: bilinear reproduces it exactly */
    const double rois[8] = {1, 0, 3, 4, 0.5, 1.5, 2.5, 3.5};
    const double indices[2] = {0, 0};
    align_problem p = {.forward_type = DML_OPERATOR_ROI_ALIGN1,
                       .type = DML_TENSOR_DATA_TYPE_FLOAT32,
                       .index_type = DML_TENSOR_DATA_TYPE_UINT32,
                       .batch = 1,
                       .channels = 1,
                       .height = 5,
                       .width = 5,
                       .roi_count = 2,
                       .out_height = 3,
                       .out_width = 1,
                       .roi_rank = 2,
                       .batch_rank = 1,
                       .reduction = DML_REDUCE_FUNCTION_AVERAGE,
                       .interpolation = DML_INTERPOLATION_MODE_LINEAR,
                       .scale_x = 1,
                       .scale_y = 1,
                       .input_pixel_offset = 0,
                       .output_pixel_offset = 0,
                       .min_samples = 1,
                       .max_samples = 1,
                       .align_corners = true,
                       .input = input,
                       .rois = rois,
                       .batch_indices = indices};
    packed_layouts(&p);
    align_run run = run_forward(device, &p);
    EXPECT_STATUS(run.status, S_OK, NULL);
    /* ROI 0: x midpoint 2 (one column), y at 0, 2, 4. ROI 1: x 1.5, y 1.5, 2.5, 3.5. */
    const double expected[6] = {2, 12, 22, 9, 14, 19};
    if (SUCCEEDED(run.status)) compare_values(run.output, expected, NULL, 6, (tolerance){1e-6, 0, 0}, "corners");
    align_run_free(&run);
    dmlReleaseDevice(device);
}

/* Nearest neighbour rounds exact halves down (RA-1): a sample at x = 1.5
 * reads column 1, at 2.5 column 2. */
TEST_CASE(nearest_halves_round_down) {
    DMLDevice* device = test_device(0);
    double input[4 * 4];
    for (int i = 0; i < 16; i++)
        input[i] = i;
    /* Point regions at (1.5, 2.5) and (2.5, 0.5) with offsets 0: the sample is the point. */
    const double rois[8] = {1.5, 2.5, 1.5, 2.5, 2.5, 0.5, 2.5, 0.5};
    const double indices[2] = {0, 0};
    align_problem p = {.forward_type = DML_OPERATOR_ROI_ALIGN1,
                       .type = DML_TENSOR_DATA_TYPE_FLOAT32,
                       .index_type = DML_TENSOR_DATA_TYPE_UINT32,
                       .batch = 1,
                       .channels = 1,
                       .height = 4,
                       .width = 4,
                       .roi_count = 2,
                       .out_height = 1,
                       .out_width = 1,
                       .roi_rank = 2,
                       .batch_rank = 1,
                       .reduction = DML_REDUCE_FUNCTION_AVERAGE,
                       .interpolation = DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR,
                       .scale_x = 1,
                       .scale_y = 1,
                       .min_samples = 1,
                       .max_samples = 1,
                       .input = input,
                       .rois = rois,
                       .batch_indices = indices};
    packed_layouts(&p);
    align_run run = run_forward(device, &p);
    EXPECT_STATUS(run.status, S_OK, NULL);
    const double expected[2] = {2 * 4 + 1, 0 * 4 + 2};
    if (SUCCEEDED(run.status)) compare_values(run.output, expected, NULL, 2, (tolerance){0, 0, 0}, "nearest ties");
    align_run_free(&run);
    dmlReleaseDevice(device);
}

/* Adaptive sampling with a huge region, and NaN / infinite coordinates: the
 * results follow the reference and nothing is read out of bounds. */
TEST_CASE(huge_nan_and_infinite_regions) {
    DMLDevice* device = test_device(0);
    double input[2 * 4 * 5];
    for (int i = 0; i < 40; i++)
        input[i] = i % 7;
    /* clang-format off */
    const double rois[20] = {
        -1e30, -1e30, 1e30, 1e30,               /* huge: Max samples, all far apart */
        NAN, 0, 2, 2,                           /* NaN corner: every sample out of bounds */
        0, 0, INFINITY, 2,                      /* infinite width */
        -INFINITY, -INFINITY, INFINITY, INFINITY,
        1e6, -1e6, -1e6, 1e6,                   /* huge and flipped in X */
    };
    /* clang-format on */
    const double indices[5] = {0, 1, 0, 1, 0};
    align_problem p = {.forward_type = DML_OPERATOR_ROI_ALIGN1,
                       .type = DML_TENSOR_DATA_TYPE_FLOAT32,
                       .index_type = DML_TENSOR_DATA_TYPE_UINT32,
                       .batch = 2,
                       .channels = 1,
                       .height = 4,
                       .width = 5,
                       .roi_count = 5,
                       .out_height = 2,
                       .out_width = 2,
                       .roi_rank = 2,
                       .batch_rank = 1,
                       .reduction = DML_REDUCE_FUNCTION_AVERAGE,
                       .interpolation = DML_INTERPOLATION_MODE_LINEAR,
                       .scale_x = 1,
                       .scale_y = 1,
                       .input_pixel_offset = 0.5f,
                       .output_pixel_offset = -0.5f,
                       .out_of_bounds_value = 9,
                       .min_samples = 1,
                       .max_samples = 3,
                       .input = input,
                       .rois = rois,
                       .batch_indices = indices};
    packed_layouts(&p);
    for (int mode = 0; mode < 4; mode++) {
        p.reduction = mode & 1 ? DML_REDUCE_FUNCTION_MAX : DML_REDUCE_FUNCTION_AVERAGE;
        p.interpolation = mode & 2 ? DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR : DML_INTERPOLATION_MODE_LINEAR;
        check_forward(device, &p, "huge/NaN/inf regions");
        double input_gradient[5 * 4];
        for (int i = 0; i < 20; i++)
            input_gradient[i] = 1 + i % 3;
        p.input_gradient = input_gradient;
        check_grad(device, &p, true, true, true, "huge/NaN/inf regions gradient");
    }
    dmlReleaseDevice(device);
}

/* ---- Finite differences (LINEAR) ---- */

/* The scalar sum(g * forward) in float64, for finite differences. */
static double weighted_forward(const ref_roi_align* r, const double* g, double* scratch) {
    ref_roi_align_forward(r, scratch, NULL);
    double sum = 0;
    for (uint64_t i = 0; i < (uint64_t)r->roi_count * r->channels * r->out_height * r->out_width; i++)
        sum += g[i] * scratch[i];
    return sum;
}

/* Whether every sample coordinate (float64) stays at least `margin` from an
 * integer (kinks of linear interpolation, the clamps at 0 and size-1, the
 * out-of-bounds limits -1 and size) and inside the image, and every sample
 * count is away from a change of ceil(|size| / outputs). */
static bool smooth_region(const align_problem* p, const double* roi, double margin) {
    const double corners[2][2] = {{roi[0] * p->scale_x, roi[2] * p->scale_x},
                                  {roi[1] * p->scale_y, roi[3] * p->scale_y}};
    const uint32_t outputs[2] = {p->out_width, p->out_height}, extent[2] = {p->width, p->height};
    for (int axis = 0; axis < 2; axis++) {
        double size = corners[axis][1] - corners[axis][0];
        double ratio = fabs(size) / outputs[axis];
        if (p->min_samples != p->max_samples && fabs(ratio - round(ratio)) < margin) return false;
        double wanted = ceil(ratio);
        uint64_t per = wanted < p->min_samples ? p->min_samples : wanted > p->max_samples ? p->max_samples : wanted;
        uint64_t n = per * outputs[axis];
        /* Samples of one output well apart, so that MAX has clear winners. */
        double spacing = fabs(size) / (double)(p->align_corners && n > 1 ? n - 1 : n);
        if (per > 1 && spacing < 0.15) return false;
        for (uint64_t t = 0; t < n; t++) {
            double c;
            if (!p->align_corners)
                c = corners[axis][0] + (t - p->output_pixel_offset) * (size / n) - p->input_pixel_offset;
            else if (n > 1)
                c = corners[axis][0] + t * (size / (n - 1)) - p->input_pixel_offset;
            else
                c = corners[axis][0] + 0.5 * size - p->input_pixel_offset;
            if (c < margin || c > extent[axis] - 1 - margin) return false;
            if (fabs(c - round(c)) < margin) return false;
        }
    }
    return true;
}

static void finite_difference_case(DMLDevice* device, DML_REDUCE_FUNCTION reduction, int iteration) {
    align_problem p = {.forward_type = DML_OPERATOR_ROI_ALIGN1,
                       .type = DML_TENSOR_DATA_TYPE_FLOAT32,
                       .index_type = DML_TENSOR_DATA_TYPE_UINT32,
                       .batch = 2,
                       .channels = 2,
                       .height = 6,
                       .width = 7,
                       .roi_count = 3,
                       .out_height = 2,
                       .out_width = 3,
                       .roi_rank = 2,
                       .batch_rank = 1,
                       .reduction = reduction,
                       .interpolation = DML_INTERPOLATION_MODE_LINEAR};
    static const float offsets[] = {0.5f, -0.5f, 0.0f, 0.25f};
    p.scale_x = test_rand_bool() ? 1.0f : 0.5f;
    p.scale_y = test_rand_bool() ? 1.0f : 2.0f;
    p.input_pixel_offset = offsets[test_rand_range(0, 3)];
    p.output_pixel_offset = offsets[test_rand_range(0, 3)];
    p.align_corners = test_rand_range(0, 2) == 0;
    p.min_samples = test_rand_range(1, 2);
    p.max_samples = p.min_samples + test_rand_range(0, 2);
    packed_layouts(&p);
    double input[2 * 2 * 6 * 7], rois[12], indices[3], input_gradient[3 * 2 * 2 * 3];
    for (int i = 0; i < 3; i++)
        indices[i] = i % 2;
    for (int i = 0; i < 36; i++)
        input_gradient[i] = test_rand_double(-1, 1);
    /* Regions whose samples all sit well inside cells (flipped ones included). */
    for (uint32_t r = 0; r < 3; r++) {
        bool smooth = false;
        for (int attempt = 0; attempt < 1000 && !smooth; attempt++) {
            double* roi = rois + r * 4;
            roi[0] = test_rand_double(0, p.width) / p.scale_x;
            roi[2] = test_rand_double(0, p.width) / p.scale_x;
            roi[1] = test_rand_double(0, p.height) / p.scale_y;
            roi[3] = test_rand_double(0, p.height) / p.scale_y;
            for (int k = 0; k < 4; k++)
                roi[k] = (double)(float)roi[k]; /* what the FLOAT32 tensor holds */
            smooth = smooth_region(&p, roi, 0.02);
        }
        EXPECT(smooth, "finite differences %d: no smooth region found for ROI %u", iteration, r);
    }
    /* MAX needs a clear winner in every output, or the derivative jumps: the
     * steps below move a sample value by less than 1e-3, so a gap of 2e-3
     * keeps every choice. */
    ref_roi_align r;
    align_run stored = {.rois = rois};
    uint64_t batch_indices[3] = {0, 1, 0};
    stored.batch_indices = batch_indices;
    bool clear_winners = false;
    for (int attempt = 0; attempt < 100 && !clear_winners; attempt++) {
        for (int i = 0; i < 168; i++)
            input[i] = (double)(float)test_rand_double(-2, 2);
        stored.input = input;
        r = reference_problem(&p, &stored, false);
        clear_winners = reduction != DML_REDUCE_FUNCTION_MAX || ref_roi_align_min_max_gap(&r) > 2e-3;
    }
    EXPECT(clear_winners, "finite differences %d: no input with clear MAX winners found", iteration);
    p.input = input;
    p.rois = rois;
    p.batch_indices = indices;
    p.input_gradient = input_gradient;

    align_run run = run_grad(device, &p, true, true, true);
    EXPECT_STATUS(run.status, S_OK, NULL);
    if (FAILED(run.status)) {
        align_run_free(&run);
        return;
    }
    double scratch[36];
    char what[96];
    /* d/dInput: the forward is linear in the input. */
    double work[168];
    memcpy(work, input, sizeof work);
    stored.input = work;
    r = reference_problem(&p, &stored, false);
    double fd_input[168];
    for (int i = 0; i < 168; i++) {
        const double h = 1e-4;
        work[i] = input[i] + h;
        double plus = weighted_forward(&r, input_gradient, scratch);
        work[i] = input[i] - h;
        double minus = weighted_forward(&r, input_gradient, scratch);
        work[i] = input[i];
        fd_input[i] = (plus - minus) / (2 * h);
    }
    snprintf(what, sizeof what, "finite differences %d (%s) OutputGradientTensor", iteration,
             reduction == DML_REDUCE_FUNCTION_MAX ? "MAX" : "AVERAGE");
    compare_values(run.output_gradient, fd_input, NULL, 168, (tolerance){2e-5, 1e-4, 0}, what);
    /* d/dROI: piecewise bilinear in the coordinates, smooth away from integers. */
    double work_rois[12];
    memcpy(work_rois, rois, sizeof work_rois);
    stored.input = input;
    stored.rois = work_rois;
    r = reference_problem(&p, &stored, false);
    double fd_rois[12];
    for (int k = 0; k < 12; k++) {
        const double h = 1e-4;
        work_rois[k] = rois[k] + h;
        double plus = weighted_forward(&r, input_gradient, scratch);
        work_rois[k] = rois[k] - h;
        double minus = weighted_forward(&r, input_gradient, scratch);
        work_rois[k] = rois[k];
        fd_rois[k] = (plus - minus) / (2 * h);
    }
    snprintf(what, sizeof what, "finite differences %d (%s) OutputROIGradientTensor", iteration,
             reduction == DML_REDUCE_FUNCTION_MAX ? "MAX" : "AVERAGE");
    compare_values(run.roi_gradient, fd_rois, NULL, 12, (tolerance){1e-4, 1e-4, 0}, what);
    align_run_free(&run);
}

TEST_CASE(gradients_match_finite_differences) {
    DMLDevice* device = test_device(0);
    for (int iteration = 0; iteration < 12 && !test_case_failed(); iteration++)
        finite_difference_case(device, iteration % 2 ? DML_REDUCE_FUNCTION_MAX : DML_REDUCE_FUNCTION_AVERAGE,
                               iteration);
    dmlReleaseDevice(device);
}

/* RA-9's gradients also agree with finite differences of the library's own
 * forward pass (FLOAT32, step 1e-2 on coordinates away from integers). */
TEST_CASE(ra9_roi_gradient_matches_library_forward) {
    DMLDevice* device = test_device(0);
    align_problem p = vector_problem(&align_vectors[9], DML_TENSOR_DATA_TYPE_FLOAT32);
    double rois[4];
    for (int k = 0; k < 4; k++) {
        const double h = 1e-2;
        double value[2];
        for (int side = 0; side < 2; side++) {
            memcpy(rois, RA9_ROI, sizeof rois);
            rois[k] += side ? -h : h;
            p.rois = rois;
            align_run run = run_forward(device, &p);
            value[side] = 0;
            for (int i = 0; i < 4; i++)
                value[side] += RA9_InputGradient[i] * run.output[i];
            align_run_free(&run);
        }
        double fd = (value[0] - value[1]) / (2 * h);
        EXPECT(fabs(fd - RA9_OutputROIGradient[k]) <= 1e-3 * (1 + fabs(fd)), "coordinate %d: %g vs %g", k, fd,
               RA9_OutputROIGradient[k]);
    }
    dmlReleaseDevice(device);
}

/* ---- Determinism ---- */

/* Same bits with 1, 2, 3, 7 and all threads and on repeated runs, for many
 * overlapping ROIs: the feature gradient's per-pixel summation order never
 * depends on the thread count or the banding of planes. */
TEST_CASE(deterministic_across_threads) {
    DMLDevice* devices[5] = {test_device(1), test_device(2), test_device(3), test_device(7), test_device(0)};
    /* On CUDA the five devices are CUDA devices (thread counts do not apply):
     * the case then checks identical bits across runs and devices. */
    if (test_backend_is_cuda())
        printf("note: CUDA backend: thread counts do not apply; checking identical bits across runs and devices\n");
    for (int iteration = 0; iteration < 4 && !test_case_failed(); iteration++) {
        align_problem p = {.forward_type = DML_OPERATOR_ROI_ALIGN1,
                           .type = DML_TENSOR_DATA_TYPE_FLOAT32,
                           .index_type = DML_TENSOR_DATA_TYPE_UINT32,
                           .roi_rank = 2,
                           .batch_rank = 1,
                           .reduction = iteration & 1 ? DML_REDUCE_FUNCTION_MAX : DML_REDUCE_FUNCTION_AVERAGE,
                           .interpolation =
                               iteration & 2 ? DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR : DML_INTERPOLATION_MODE_LINEAR,
                           .scale_x = 1,
                           .scale_y = 1,
                           .input_pixel_offset = 0.5f,
                           .output_pixel_offset = -0.5f,
                           .min_samples = 1,
                           .max_samples = 3};
        /* Few planes (banding kicks in) on even iterations, many on odd ones. */
        p.batch = iteration % 2 ? 2 : 1;
        p.channels = iteration % 2 ? 5 : 1;
        p.height = 17;
        p.width = 13;
        p.roi_count = 40;
        p.out_height = 4;
        p.out_width = 3;
        p.type = iteration == 3 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        packed_layouts(&p);
        size_t image = image_count(&p), outputs = output_count(&p);
        double* input = malloc(image * sizeof *input);
        double* input_gradient = malloc(outputs * sizeof *input_gradient);
        double rois[40 * 4], indices[40];
        for (size_t i = 0; i < image; i++)
            input[i] = test_rand_double(-1, 1);
        for (size_t i = 0; i < outputs; i++)
            input_gradient[i] = test_rand_double(-1, 1);
        for (int r = 0; r < 40; r++) {
            rois[r * 4 + 0] = test_rand_double(-2, 8);
            rois[r * 4 + 1] = test_rand_double(-2, 10);
            rois[r * 4 + 2] = rois[r * 4 + 0] + test_rand_double(0, 8);
            rois[r * 4 + 3] = rois[r * 4 + 1] + test_rand_double(0, 9);
            indices[r] = test_rand_range(0, p.batch - 1);
        }
        p.input = input;
        p.rois = rois;
        p.batch_indices = indices;
        p.input_gradient = input_gradient;
        align_run first_forward = run_forward(devices[0], &p);
        align_run first_grad = run_grad(devices[0], &p, true, true, true);
        for (int d = 0; d < 6; d++) {
            align_run forward = run_forward(devices[d % 5], &p);
            align_run grad = run_grad(devices[d % 5], &p, true, true, true);
            EXPECT(memcmp(forward.output_bits, first_forward.output_bits, outputs * sizeof(uint64_t)) == 0,
                   "forward differs on device %d", d % 5);
            EXPECT(memcmp(grad.output_gradient_bits, first_grad.output_gradient_bits, image * sizeof(uint64_t)) == 0,
                   "OutputGradientTensor differs on device %d (iteration %d)", d % 5, iteration);
            EXPECT(memcmp(grad.roi_gradient_bits, first_grad.roi_gradient_bits, 40 * 4 * sizeof(uint64_t)) == 0,
                   "OutputROIGradientTensor differs on device %d (iteration %d)", d % 5, iteration);
            align_run_free(&forward);
            align_run_free(&grad);
        }
        check_grad(devices[4], &p, true, true, true, "determinism problem");
        align_run_free(&first_forward);
        align_run_free(&first_grad);
        free(input);
        free(input_gradient);
    }
    for (int d = 0; d < 5; d++)
        dmlReleaseDevice(devices[d]);
}

/* ---- Validation (spec §2, §3) and feature levels ---- */

/* A description of any of the three operators, valid by default: input
 * {2, 3, 6, 5}, 4 ROIs {4, 4}, batch indices {4}, output {4, 3, 2, 3}. */
typedef struct align_descs {
    uint32_t sizes[T_COUNT][5];
    uint32_t rank[T_COUNT];
    DML_TENSOR_DATA_TYPE type[T_COUNT];
    bool present[T_COUNT];
    DML_BUFFER_TENSOR_DESC buffer[T_COUNT];
    DML_TENSOR_DESC desc[T_COUNT];
    DML_OPERATOR_TYPE op_type;
    DML_REDUCE_FUNCTION reduction;
    DML_INTERPOLATION_MODE interpolation;
    uint32_t min_samples, max_samples;
    DML_ROI_ALIGN_OPERATOR_DESC align;
    DML_ROI_ALIGN1_OPERATOR_DESC align1;
    DML_ROI_ALIGN_GRAD_OPERATOR_DESC grad;
    DML_OPERATOR_DESC op;
} align_descs;

static void set_shape(align_descs* d, int which, uint32_t rank, uint32_t s0, uint32_t s1, uint32_t s2, uint32_t s3) {
    const uint32_t sizes[4] = {s0, s1, s2, s3};
    d->rank[which] = rank;
    memcpy(d->sizes[which], sizes, sizeof sizes);
}

static void valid_descs(align_descs* d, DML_OPERATOR_TYPE type) {
    memset(d, 0, sizeof *d);
    d->op_type = type;
    set_shape(d, T_INPUT, 4, 2, 3, 6, 5);
    set_shape(d, T_ROI, 2, 4, 4, 0, 0);
    set_shape(d, T_BATCH, 1, 4, 0, 0, 0);
    set_shape(d, T_OUTPUT, 4, 4, 3, 2, 3);
    set_shape(d, T_INPUT_GRADIENT, 4, 4, 3, 2, 3);
    set_shape(d, T_OUTPUT_GRADIENT, 4, 2, 3, 6, 5);
    set_shape(d, T_ROI_GRADIENT, 2, 4, 4, 0, 0);
    for (int i = 0; i < T_COUNT; i++) {
        d->type[i] = i == T_BATCH ? DML_TENSOR_DATA_TYPE_UINT32 : DML_TENSOR_DATA_TYPE_FLOAT32;
        bool grad_tensor = i == T_INPUT_GRADIENT || i == T_OUTPUT_GRADIENT || i == T_ROI_GRADIENT;
        d->present[i] = type == DML_OPERATOR_ROI_ALIGN_GRAD ? i != T_OUTPUT : !grad_tensor;
    }
    d->reduction = DML_REDUCE_FUNCTION_AVERAGE;
    d->interpolation = DML_INTERPOLATION_MODE_LINEAR;
    d->min_samples = 1;
    d->max_samples = 2;
}

static HRESULT create_descs(DMLDevice* device, align_descs* d) {
    const DML_TENSOR_DESC* t[T_COUNT];
    for (int i = 0; i < T_COUNT; i++) {
        d->buffer[i] =
            (DML_BUFFER_TENSOR_DESC){d->type[i], DML_TENSOR_FLAG_NONE,
                                     d->rank[i], d->sizes[i],
                                     NULL,       DMLCalcBufferTensorSize(d->type[i], d->rank[i], d->sizes[i], NULL),
                                     0};
        d->desc[i] = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, &d->buffer[i]};
        t[i] = d->present[i] ? &d->desc[i] : NULL;
    }
    d->align =
        (DML_ROI_ALIGN_OPERATOR_DESC){t[T_INPUT], t[T_ROI], t[T_BATCH], t[T_OUTPUT],    d->reduction,  d->interpolation,
                                      1,          1,        0,          d->min_samples, d->max_samples};
    d->align1 = (DML_ROI_ALIGN1_OPERATOR_DESC){
        t[T_INPUT], t[T_ROI], t[T_BATCH], t[T_OUTPUT], d->reduction,   d->interpolation, 1,
        1,          0.5f,     -0.5f,      0,           d->min_samples, d->max_samples,   0};
    d->grad = (DML_ROI_ALIGN_GRAD_OPERATOR_DESC){t[T_INPUT],
                                                 t[T_INPUT_GRADIENT],
                                                 t[T_ROI],
                                                 t[T_BATCH],
                                                 t[T_OUTPUT_GRADIENT],
                                                 t[T_ROI_GRADIENT],
                                                 d->reduction,
                                                 d->interpolation,
                                                 1,
                                                 1,
                                                 0.5f,
                                                 -0.5f,
                                                 d->min_samples,
                                                 d->max_samples,
                                                 0};
    const void* desc = d->op_type == DML_OPERATOR_ROI_ALIGN    ? (const void*)&d->align
                       : d->op_type == DML_OPERATOR_ROI_ALIGN1 ? (const void*)&d->align1
                                                               : (const void*)&d->grad;
    d->op = (DML_OPERATOR_DESC){d->op_type, desc};
    DMLOperator* op = NULL;
    HRESULT status = dmlCreateOperator(device, &d->op, &op);
    dmlReleaseOperator(op);
    return status;
}

static DMLDevice* device_at(DML_FEATURE_LEVEL level) {
    DML_DEVICE_DESC desc = {.FeatureLevel = level};
    DMLDevice* device = NULL;
    if (FAILED(dmlCreateDevice(&desc, &device))) EXPECT(false, "device at level 0x%x", (unsigned)level);
    return device;
}

#define EXPECT_INVALID(device, d, ...) EXPECT_STATUS(create_descs(device, d), E_INVALIDARG, __VA_ARGS__)

/* Rules 1-4, shared by the three operators. */
static void check_common_rules(DMLDevice* device, DML_OPERATOR_TYPE type, const char* name) {
    align_descs d;
    bool grad = type == DML_OPERATOR_ROI_ALIGN_GRAD;
    int values = grad ? T_INPUT_GRADIENT : T_INPUT; /* the tensor that sets the DataType */
    int output = grad ? T_OUTPUT_GRADIENT : T_OUTPUT;

    valid_descs(&d, type);
    EXPECT_STATUS(create_descs(device, &d), S_OK, NULL);
    for (int i = 0; i < T_COUNT; i++)
        if (d.present[i] && i != T_BATCH) d.type[i] = DML_TENSOR_DATA_TYPE_FLOAT16;
    EXPECT_STATUS(create_descs(device, &d), S_OK, NULL);

    /* Rule 1: required tensors, ranks, types. */
    const int required[3] = {grad ? T_INPUT_GRADIENT : T_INPUT, T_ROI, T_BATCH};
    for (int i = 0; i < 3; i++) {
        valid_descs(&d, type);
        d.present[required[i]] = false;
        EXPECT_INVALID(device, &d, name, tensor_names[required[i]], "required");
    }
    if (!grad) {
        valid_descs(&d, type);
        d.present[T_OUTPUT] = false;
        EXPECT_INVALID(device, &d, name, "OutputTensor", "required");
    }
    valid_descs(&d, type);
    set_shape(&d, values, 3, 4, 3, 2, 0);
    EXPECT_INVALID(device, &d, name, grad ? "InputGradientTensor.DimensionCount" : "InputTensor.DimensionCount");
    valid_descs(&d, type);
    set_shape(&d, output, 5, 2, 3, 6, 5);
    d.sizes[output][4] = 1;
    EXPECT_INVALID(device, &d, name, grad ? "OutputGradientTensor.DimensionCount" : "OutputTensor.DimensionCount");
    valid_descs(&d, type);
    set_shape(&d, T_ROI, 1, 16, 0, 0, 0);
    EXPECT_INVALID(device, &d, name, "ROITensor.DimensionCount");
    valid_descs(&d, type);
    set_shape(&d, T_ROI, 5, 1, 1, 1, 4);
    d.sizes[T_ROI][4] = 4;
    EXPECT_INVALID(device, &d, name, "ROITensor.DimensionCount");
    valid_descs(&d, type);
    set_shape(&d, T_BATCH, 5, 1, 1, 1, 1);
    d.sizes[T_BATCH][4] = 4;
    EXPECT_INVALID(device, &d, name, "BatchIndicesTensor.DimensionCount");

    valid_descs(&d, type);
    d.type[values] = DML_TENSOR_DATA_TYPE_UINT32;
    EXPECT_INVALID(device, &d, name, grad ? "InputGradientTensor.DataType" : "InputTensor.DataType", "FLOAT16");
    valid_descs(&d, type);
    d.type[values] = DML_TENSOR_DATA_TYPE_FLOAT64;
    EXPECT_INVALID(device, &d, name, grad ? "InputGradientTensor.DataType" : "InputTensor.DataType");
    valid_descs(&d, type);
    d.type[T_ROI] = DML_TENSOR_DATA_TYPE_FLOAT16;
    EXPECT_INVALID(device, &d, name, "ROITensor.DataType");
    valid_descs(&d, type);
    d.type[output] = DML_TENSOR_DATA_TYPE_FLOAT16;
    EXPECT_INVALID(device, &d, name, grad ? "OutputGradientTensor.DataType" : "OutputTensor.DataType");
    valid_descs(&d, type);
    d.type[T_BATCH] = DML_TENSOR_DATA_TYPE_FLOAT32;
    EXPECT_INVALID(device, &d, name, "BatchIndicesTensor.DataType", "UINT32");
    valid_descs(&d, type);
    d.type[T_BATCH] = DML_TENSOR_DATA_TYPE_INT32;
    EXPECT_INVALID(device, &d, name, "BatchIndicesTensor.DataType");

    /* Rule 2: one R, C from the input, leading dimensions 1, rows of 4. */
    valid_descs(&d, type);
    set_shape(&d, T_ROI, 3, 2, 4, 4, 0);
    EXPECT_INVALID(device, &d, name, "ROITensor.Sizes[0]", "1");
    valid_descs(&d, type);
    set_shape(&d, T_ROI, 4, 1, 3, 4, 4);
    EXPECT_INVALID(device, &d, name, "ROITensor.Sizes[1]", "1");
    valid_descs(&d, type);
    set_shape(&d, T_ROI, 2, 4, 5, 0, 0);
    EXPECT_INVALID(device, &d, name, "ROITensor.Sizes[1]", "4");
    valid_descs(&d, type);
    set_shape(&d, T_BATCH, 1, 3, 0, 0, 0);
    EXPECT_INVALID(device, &d, name, "BatchIndicesTensor.Sizes[0]", "ROI count");
    valid_descs(&d, type);
    set_shape(&d, T_BATCH, 2, 2, 4, 0, 0);
    EXPECT_INVALID(device, &d, name, "BatchIndicesTensor.Sizes[0]", "1");
    valid_descs(&d, type);
    set_shape(&d, T_BATCH, 4, 1, 1, 1, 5);
    EXPECT_INVALID(device, &d, name, "BatchIndicesTensor.Sizes[3]", "ROI count");
    valid_descs(&d, type);
    d.sizes[grad ? T_INPUT_GRADIENT : T_OUTPUT][0] = 5;
    EXPECT_INVALID(device, &d, name, grad ? "InputGradientTensor.Sizes[0]" : "OutputTensor.Sizes[0]", "ROI count");
    valid_descs(&d, type);
    d.sizes[output][1] = 2;
    EXPECT_INVALID(device, &d, name, grad ? "OutputGradientTensor.Sizes[1]" : "OutputTensor.Sizes[1]",
                   grad ? "InputTensor" : "channel");

    /* Rule 3: enums. */
    valid_descs(&d, type);
    d.reduction = DML_REDUCE_FUNCTION_SUM;
    EXPECT_INVALID(device, &d, name, "ReductionFunction", "AVERAGE");
    d.reduction = (DML_REDUCE_FUNCTION)99;
    EXPECT_INVALID(device, &d, name, "ReductionFunction");
    valid_descs(&d, type);
    d.interpolation = (DML_INTERPOLATION_MODE)2;
    EXPECT_INVALID(device, &d, name, "InterpolationMode");

    /* Rule 4 (RA-7): 1 <= Min <= Max. */
    valid_descs(&d, type);
    d.min_samples = 0;
    EXPECT_INVALID(device, &d, name, "MinimumSamplesPerOutput is 0", ">= 1");
    valid_descs(&d, type);
    d.min_samples = 3;
    d.max_samples = 2;
    EXPECT_INVALID(device, &d, name, "MinimumSamplesPerOutput is 3", "MaximumSamplesPerOutput");
    /* RA-16: Min up to the device's limit (default 4096 per axis); a larger
     * Max (ONNX's adaptive UINT_MAX) is clamped, not an error. */
    valid_descs(&d, type);
    d.min_samples = d.max_samples = DML_ROI_ALIGN_DEFAULT_SAMPLES_PER_AXIS;
    EXPECT_STATUS(create_descs(device, &d), S_OK, NULL);
    d.min_samples = d.max_samples = DML_ROI_ALIGN_DEFAULT_SAMPLES_PER_AXIS + 1;
    EXPECT_INVALID(device, &d, name, "MinimumSamplesPerOutput is 4097", "<= 4096",
                   "DML_DEVICE_DESC.RoiAlignMaxSamplesPerAxis");
    d.min_samples = d.max_samples = 4294967295u;
    EXPECT_INVALID(device, &d, name, "MinimumSamplesPerOutput is 4294967295", "RoiAlignMaxSamplesPerAxis");
    d.min_samples = 1;
    EXPECT_STATUS(create_descs(device, &d), S_OK, NULL);

    /* Every allowed ROI / batch-index shape is accepted. */
    for (uint32_t roi_rank = 2; roi_rank <= 4; roi_rank++)
        for (uint32_t batch_rank = 1; batch_rank <= 4; batch_rank++) {
            valid_descs(&d, type);
            d.rank[T_ROI] = d.rank[T_ROI_GRADIENT] = roi_rank;
            for (uint32_t i = 0; i < roi_rank; i++)
                d.sizes[T_ROI][i] = d.sizes[T_ROI_GRADIENT][i] = 1;
            d.sizes[T_ROI][roi_rank - 2] = d.sizes[T_ROI_GRADIENT][roi_rank - 2] = 4;
            d.sizes[T_ROI][roi_rank - 1] = d.sizes[T_ROI_GRADIENT][roi_rank - 1] = 4;
            d.rank[T_BATCH] = batch_rank;
            for (uint32_t i = 0; i < batch_rank; i++)
                d.sizes[T_BATCH][i] = 1;
            d.sizes[T_BATCH][batch_rank - 1] = 4;
            EXPECT_STATUS(create_descs(device, &d), S_OK, NULL);
        }
}

TEST_CASE(validation_forward) {
    DMLDevice* device = test_device(0);
    check_common_rules(device, DML_OPERATOR_ROI_ALIGN1, "ROI_ALIGN1");
    check_common_rules(device, DML_OPERATOR_ROI_ALIGN, "ROI_ALIGN");
    /* Slots: inputs {Input, ROI, BatchIndices}, outputs {Output}. */
    align_descs d;
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN1);
    create_descs(device, &d);
    DMLOperator* op = NULL;
    EXPECT_STATUS(dmlCreateOperator(device, &d.op, &op), S_OK, NULL);
    UINT inputs = 0, outputs = 0;
    dmlGetOperatorSlotCounts(op, &inputs, &outputs);
    EXPECT(inputs == 3 && outputs == 1, "ROI_ALIGN1 slots %u/%u, expected 3/1", inputs, outputs);
    dmlReleaseOperator(op);
    dmlReleaseDevice(device);
}

TEST_CASE(validation_gradient) {
    DMLDevice* device = test_device(0);
    check_common_rules(device, DML_OPERATOR_ROI_ALIGN_GRAD, "ROI_ALIGN_GRAD");
    align_descs d;
    const char* name = "ROI_ALIGN_GRAD";

    /* Rule 5: at least one output. */
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    d.present[T_OUTPUT_GRADIENT] = d.present[T_ROI_GRADIENT] = false;
    EXPECT_INVALID(device, &d, name, "OutputGradientTensor", "OutputROIGradientTensor", "at least one");
    /* Each alone is fine. */
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    d.present[T_ROI_GRADIENT] = false;
    EXPECT_STATUS(create_descs(device, &d), S_OK, NULL);
    d.present[T_INPUT] = false; /* AVERAGE, feature gradient only: InputTensor optional */
    EXPECT_STATUS(create_descs(device, &d), S_OK, NULL);
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    d.present[T_OUTPUT_GRADIENT] = false;
    EXPECT_STATUS(create_descs(device, &d), S_OK, NULL);

    /* Rule 6: InputTensor for the ROI gradient and for MAX. */
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    d.present[T_INPUT] = false;
    EXPECT_INVALID(device, &d, name, "InputTensor is NULL", "OutputROIGradientTensor");
    d.present[T_ROI_GRADIENT] = false;
    d.reduction = DML_REDUCE_FUNCTION_MAX;
    EXPECT_INVALID(device, &d, name, "InputTensor is NULL", "MAX");

    /* Rule 7: InputTensor and OutputGradientTensor agree; C from InputGradientTensor. */
    for (int dim = 0; dim < 4; dim++) {
        valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
        d.sizes[T_OUTPUT_GRADIENT][dim] += 1;
        char field[48];
        snprintf(field, sizeof field, "OutputGradientTensor.Sizes[%d]", dim);
        EXPECT_INVALID(device, &d, name, field);
    }
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    d.present[T_INPUT] = false;
    d.sizes[T_OUTPUT_GRADIENT][1] = 4;
    d.present[T_ROI_GRADIENT] = false;
    EXPECT_INVALID(device, &d, name, "OutputGradientTensor.Sizes[1]", "channel");
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    d.present[T_OUTPUT_GRADIENT] = false;
    d.sizes[T_INPUT][1] = 4;
    EXPECT_INVALID(device, &d, name, "InputTensor.Sizes[1]", "channel");
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    set_shape(&d, T_INPUT, 3, 2, 3, 30, 0);
    EXPECT_INVALID(device, &d, name, "InputTensor.DimensionCount");

    /* Rule 8: OutputROIGradientTensor has ROITensor's sizes. */
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    set_shape(&d, T_ROI_GRADIENT, 3, 1, 4, 4, 0);
    EXPECT_INVALID(device, &d, name, "OutputROIGradientTensor.DimensionCount", "ROITensor");
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    set_shape(&d, T_ROI_GRADIENT, 2, 3, 4, 0, 0);
    EXPECT_INVALID(device, &d, name, "OutputROIGradientTensor.Sizes[0]", "ROITensor");

    /* Rule 9: one DataType. */
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    d.type[T_INPUT] = DML_TENSOR_DATA_TYPE_FLOAT16;
    EXPECT_INVALID(device, &d, name, "InputTensor.DataType", "InputGradientTensor");
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    d.type[T_ROI_GRADIENT] = DML_TENSOR_DATA_TYPE_FLOAT16;
    EXPECT_INVALID(device, &d, name, "OutputROIGradientTensor.DataType");

    /* UINT64 batch indices are for the forward operators only. */
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    d.type[T_BATCH] = DML_TENSOR_DATA_TYPE_UINT64;
    EXPECT_INVALID(device, &d, name, "BatchIndicesTensor.DataType", "UINT32");

    /* Slots: inputs {Input (opt), InputGradient, ROI, BatchIndices}, outputs {OutputGradient, OutputROIGradient}. */
    valid_descs(&d, DML_OPERATOR_ROI_ALIGN_GRAD);
    d.present[T_INPUT] = false;
    d.present[T_ROI_GRADIENT] = false;
    create_descs(device, &d);
    DMLOperator* op = NULL;
    EXPECT_STATUS(dmlCreateOperator(device, &d.op, &op), S_OK, NULL);
    UINT inputs = 0, outputs = 0;
    dmlGetOperatorSlotCounts(op, &inputs, &outputs);
    EXPECT(inputs == 4 && outputs == 2, "ROI_ALIGN_GRAD slots %u/%u, expected 4/2", inputs, outputs);
    dmlReleaseOperator(op);
    dmlReleaseDevice(device);
}

/* ROI_ALIGN 3.0, ROI_ALIGN1 4.0, ROI_ALIGN_GRAD 4.1; UINT64 batch indices 5.0. */
TEST_CASE(feature_levels) {
    static const struct {
        DML_OPERATOR_TYPE type;
        const char* name;
        DML_FEATURE_LEVEL below, introduced;
    } levels[] = {
        {DML_OPERATOR_ROI_ALIGN, "ROI_ALIGN", DML_FEATURE_LEVEL_2_1, DML_FEATURE_LEVEL_3_0},
        {DML_OPERATOR_ROI_ALIGN1, "ROI_ALIGN1", DML_FEATURE_LEVEL_3_1, DML_FEATURE_LEVEL_4_0},
        {DML_OPERATOR_ROI_ALIGN_GRAD, "ROI_ALIGN_GRAD", DML_FEATURE_LEVEL_4_0, DML_FEATURE_LEVEL_4_1},
    };
    align_descs d;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        DMLDevice* below = device_at(levels[i].below);
        DMLDevice* at = device_at(levels[i].introduced);
        valid_descs(&d, levels[i].type);
        EXPECT_STATUS(create_descs(below, &d), E_INVALIDARG, levels[i].name, "feature level");
        EXPECT_STATUS(create_descs(at, &d), S_OK, NULL);
        if (levels[i].type != DML_OPERATOR_ROI_ALIGN_GRAD) {
            d.type[T_BATCH] = DML_TENSOR_DATA_TYPE_UINT64;
            EXPECT_STATUS(create_descs(at, &d), E_INVALIDARG, levels[i].name, "BatchIndicesTensor.DataType");
            DMLDevice* level_5 = device_at(DML_FEATURE_LEVEL_5_0);
            EXPECT_STATUS(create_descs(level_5, &d), S_OK, NULL);
            dmlReleaseDevice(level_5);
        }
        dmlReleaseDevice(below);
        dmlReleaseDevice(at);
    }
}

/* ---- Cost and precision bound (RA-16) ---- */

/* A CPU device whose limit of samples per axis is `limit` (0: the default). */
static DMLDevice* device_with_sample_limit(UINT limit) {
    DML_DEVICE_DESC desc = {.RoiAlignMaxSamplesPerAxis = limit};
    DMLDevice* device = NULL;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), S_OK, NULL);
    return device;
}

TEST_CASE(sample_limit_of_the_device) {
    DMLDevice* device = NULL;
    DML_DEVICE_DESC desc = {.RoiAlignMaxSamplesPerAxis = DML_ROI_ALIGN_MAX_SAMPLES_PER_AXIS + 1};
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), E_INVALIDARG, "dmlCreateDevice",
                  "RoiAlignMaxSamplesPerAxis is 65537", "<= 65536");
    EXPECT(device == NULL, "no device on failure");
    /* A raised limit admits what the default rejects, up to itself. */
    device = device_with_sample_limit(DML_ROI_ALIGN_MAX_SAMPLES_PER_AXIS);
    align_descs d;
    const DML_OPERATOR_TYPE types[3] = {DML_OPERATOR_ROI_ALIGN, DML_OPERATOR_ROI_ALIGN1, DML_OPERATOR_ROI_ALIGN_GRAD};
    for (int i = 0; device && i < 3; i++) {
        valid_descs(&d, types[i]);
        d.min_samples = d.max_samples = DML_ROI_ALIGN_MAX_SAMPLES_PER_AXIS;
        EXPECT_STATUS(create_descs(device, &d), S_OK, NULL);
        d.min_samples = d.max_samples = DML_ROI_ALIGN_MAX_SAMPLES_PER_AXIS + 1;
        EXPECT_INVALID(device, &d, "MinimumSamplesPerOutput is 65537", "<= 65536", "RoiAlignMaxSamplesPerAxis");
    }
    dmlReleaseDevice(device);
}

/* One ROI of image 0 over a 1-channel FLOAT32 image of height x width,
 * ROI_ALIGN1 with packed tensors, one output row of out_width elements and
 * scales 1; callers set the rest. */
static align_problem one_roi_problem(uint32_t height, uint32_t width, uint32_t out_width, const double* roi) {
    static const double batch_index = 0;
    align_problem p = {.forward_type = DML_OPERATOR_ROI_ALIGN1,
                       .type = DML_TENSOR_DATA_TYPE_FLOAT32,
                       .index_type = DML_TENSOR_DATA_TYPE_UINT32,
                       .batch = 1,
                       .channels = 1,
                       .height = height,
                       .width = width,
                       .roi_count = 1,
                       .out_height = 1,
                       .out_width = out_width,
                       .roi_rank = 2,
                       .batch_rank = 1,
                       .scale_x = 1,
                       .scale_y = 1,
                       .rois = roi,
                       .batch_indices = &batch_index};
    packed_layouts(&p);
    return p;
}

/* A box wider than the limit: X samples clamped to the limit (data-driven
 * counts never fail). MAX over a ramp reads the last in-bounds sample, whose
 * position depends on the sample count, so the result tells the count. */
static void check_clamped_count(DMLDevice* device, uint32_t limit) {
    static const double ramp[4] = {0, 10, 20, 30};
    static const double roi[4] = {-4998.0, 0.25, 2.0, 0.75};
    align_problem p = one_roi_problem(1, 4, 1, roi);
    p.reduction = DML_REDUCE_FUNCTION_MAX;
    p.interpolation = DML_INTERPOLATION_MODE_LINEAR;
    p.output_pixel_offset = -0.5f;
    p.out_of_bounds_value = -1;
    p.min_samples = 1;
    p.max_samples = 4294967295u;
    p.input = ramp;
    align_run run = run_forward(device, &p);
    EXPECT_STATUS(run.status, S_OK, NULL);
    if (SUCCEEDED(run.status)) {
        double clamped, unclamped;
        ref_roi_align r = reference_problem(&p, &run, true);
        r.max_samples = limit;
        ref_roi_align_forward(&r, &clamped, NULL);
        r.max_samples = 5000; /* ceil(|sizeX| / OW): what no limit would take */
        ref_roi_align_forward(&r, &unclamped, NULL);
        EXPECT(clamped != unclamped, "the case must tell %u samples from 5000", limit);
        EXPECT(run.output[0] == clamped, "limit %u: output %.9g but expected %.9g (%u samples; 5000 give %.9g)", limit,
               run.output[0], clamped, limit, unclamped);
    }
    align_run_free(&run);
}

TEST_CASE(data_driven_sample_counts_are_clamped) {
    DMLDevice* device = test_device(0);
    check_clamped_count(device, DML_ROI_ALIGN_DEFAULT_SAMPLES_PER_AXIS);
    dmlReleaseDevice(device);
    if (!test_backend_is_cuda()) {
        device = device_with_sample_limit(4500);
        if (device) check_clamped_count(device, 4500);
        dmlReleaseDevice(device);
    }
}

/* The average of 2^24 samples (4096 x 4096, the default limit) of a 3x3 box:
 * a FLOAT32 running sum stalls far from it (RA-16), the FLOAT64 one does not. */
TEST_CASE(average_at_the_sample_limit) {
    DMLDevice* device = test_device(0);
    static const double roi[4] = {0.4, 0.3, 3.4, 3.3};
    double input[16];
    for (int i = 0; i < 16; i++)
        input[i] = test_rand_double(1, 10);
    for (int type = 0; type < 2; type++) {
        align_problem p = one_roi_problem(4, 4, 1, roi);
        p.type = type ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        p.reduction = DML_REDUCE_FUNCTION_AVERAGE;
        p.interpolation = DML_INTERPOLATION_MODE_LINEAR;
        p.input_pixel_offset = 0.5f;
        p.output_pixel_offset = -0.5f;
        p.min_samples = p.max_samples = DML_ROI_ALIGN_DEFAULT_SAMPLES_PER_AXIS;
        p.input = input;
        check_forward(device, &p, "2^24 samples per output");
    }
    dmlReleaseDevice(device);
}

/* The feature gradient of one pixel that receives 2^25 contributions (a 1x1
 * image, two outputs of 2^24 samples each, all reading it): §7.1 gives
 * every sample w = 1/S, so the pixel's gradient is g0 + g1. A FLOAT32
 * accumulator stalls at about g0 + 2^-24 * 2^24 ulp; FLOAT64 does not. */
TEST_CASE(feature_gradient_past_2_24_contributions) {
    DMLDevice* device = test_device(0);
    static const double roi[4] = {-0.5, -0.5, 0.5, 0.5};
    double input_gradient[2] = {test_rand_double(0.5, 1.5), test_rand_double(0.5, 1.5)};
    align_problem p = one_roi_problem(1, 1, 2, roi);
    p.reduction = DML_REDUCE_FUNCTION_AVERAGE;
    p.interpolation = DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR;
    p.output_pixel_offset = -0.5f;
    p.min_samples = p.max_samples = DML_ROI_ALIGN_DEFAULT_SAMPLES_PER_AXIS;
    p.input_gradient = input_gradient;
    align_run run = run_grad(device, &p, false, true, false);
    EXPECT_STATUS(run.status, S_OK, NULL);
    if (SUCCEEDED(run.status)) {
        /* Every sample lies in (-0.5, 0.5): in bounds, nearest pixel 0. */
        double expected = run.input_gradient[0] + run.input_gradient[1];
        EXPECT(fabs(run.output_gradient[0] - expected) <= 1e-6 * expected,
               "OutputGradientTensor[0] is %.9g but expected %.9g (2^25 contributions)", run.output_gradient[0],
               expected);
    }
    align_run_free(&run);
    dmlReleaseDevice(device);
}
