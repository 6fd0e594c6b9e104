/* Random ROI problems for the CPU-vs-CUDA comparisons (roi_cases.h). */
#include "roi_cases.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void twin_init(twin_buffer* w, DML_TENSOR_DATA_TYPE type, uint32_t rank, const uint32_t* sizes, test_layout layout) {
    w->present = true;
    test_tensor_init(&w->tensor, type, rank, sizes, layout);
    test_buffer_alloc(&w->cpu, w->tensor.buffer.TotalTensorSizeInBytes);
    test_buffer_alloc(&w->cuda, w->tensor.buffer.TotalTensorSizeInBytes);
}

void twin_fill(twin_buffer* w, const double* values) {
    test_fill_values(&w->cpu, &w->tensor, values);
    memcpy(w->cuda.block, w->cpu.block, (size_t)w->cpu.size + 2 * TEST_GUARD_BYTES);
}

void twin_free(twin_buffer* w) {
    if (!w->present) return;
    test_buffer_free(&w->cpu);
    test_buffer_free(&w->cuda);
    w->present = false;
}

const DML_TENSOR_DESC* twin_desc(const twin_buffer* w) { return w->present ? &w->tensor.desc : NULL; }

test_buffer* twin_side(twin_buffer* w, bool cuda) {
    if (!w->present) return NULL;
    return cuda ? &w->cuda : &w->cpu;
}

bool expect_same_values(const twin_buffer* w, const char* what, const char* context) {
    test_buffer_check_guards(&w->cuda, what);
    test_buffer_check_unaddressed(&w->cuda, &w->tensor, what);
    DML_TENSOR_DATA_TYPE type = w->tensor.buffer.DataType;
    for (uint64_t i = 0; i < w->tensor.element_count; i++) {
        uint64_t offset = test_tensor_offset(&w->tensor, i);
        uint64_t cpu_bits = test_load_bits(type, w->cpu.data, offset);
        uint64_t cuda_bits = test_load_bits(type, w->cuda.data, offset);
        double cpu_value = test_load(type, w->cpu.data, offset), cuda_value = test_load(type, w->cuda.data, offset);
        if (cpu_bits == cuda_bits || (isnan(cpu_value) && isnan(cuda_value))) continue;
        EXPECT(false, "%s: element %" PRIu64 " differs: CPU %.9g (0x%" PRIx64 "), CUDA %.9g (0x%" PRIx64 "); %s", what,
               i, cpu_value, cpu_bits, cuda_value, cuda_bits, context);
        return false;
    }
    return true;
}

double random_roi_coordinate(uint32_t extent, double scale, bool specials) {
    uint32_t kind = test_rand_range(0, 39);
    if (specials && kind == 0) return NAN;
    if (specials && kind == 1) return test_rand_bool() ? INFINITY : -INFINITY;
    if (specials && kind == 2) return test_rand_double(-1e30, 1e30);
    if (kind < 8) return round(test_rand_double(-3.0, extent + 3.0)) / scale; /* integer pixels */
    return test_rand_double(-3.0, extent + 3.0) / scale;
}

float random_roi_scale(void) {
    static const float scales[] = {1.0f, 0.5f, 0.25f, 0.0625f, 2.0f, 0.3f};
    return test_rand_range(0, 3) == 0 ? (float)test_rand_double(0.1, 3) : scales[test_rand_range(0, 5)];
}

double* random_image(uint64_t count, bool specials) {
    double* values = malloc(count * sizeof *values);
    for (uint64_t i = 0; i < count; i++) {
        uint32_t kind = test_rand_range(0, 49);
        values[i] = specials && kind == 0   ? NAN
                    : specials && kind == 1 ? (test_rand_bool() ? INFINITY : -INFINITY)
                    : kind < 4              ? (test_rand_bool() ? 0.0 : -0.0)
                    : kind < 10             ? round(test_rand_double(-4, 4))
                                            : test_rand_double(-10, 10);
    }
    return values;
}

/* ---- ROI align ---- */

static void random_boxes(roi_align_case* c);
static void random_input_gradient(roi_align_case* c);

/* Random case `iteration` of a fast path's list: every eighth with
 * 129..1300 channels (the boxes stay; the image and the gradient are drawn
 * again for them). */
static void random_packed_case(roi_align_case* c, int iteration) {
    random_roi_align_case(c);
    if (iteration % 8 != 7) return;
    c->channels = test_rand_range(129, 1300);
    free(c->image);
    free(c->input_gradient);
    c->image = random_image((uint64_t)c->batch * c->channels * c->height * c->width, c->specials);
    random_input_gradient(c);
}

void packed_roi_align_case(roi_align_case* c, int iteration, bool channels_last) {
    if (iteration < PACKED_ROI_ALIGN_CASES - 4)
        random_packed_case(c, iteration);
    else
        large_roi_align_case(c, iteration - (PACKED_ROI_ALIGN_CASES - 4));
    c->layouts[L_INPUT] = c->layouts[L_OUTPUT] = TEST_LAYOUT_PACKED;
    c->channels_last = channels_last;
    roi_align_case_describe(c);
}

bool staged_roi_align_case_declines(int iteration) { return iteration % 8 == 5; }

/* Packed layouts, then the data for the case's sizes. */
static void staged_case_finish(roi_align_case* c) {
    c->layouts[L_INPUT] = c->layouts[L_OUTPUT] = TEST_LAYOUT_PACKED;
    roi_align_case_free(c);
    c->image = random_image((uint64_t)c->batch * c->channels * c->height * c->width, c->specials);
    random_boxes(c);
    random_input_gradient(c);
    roi_align_case_describe(c);
}

void staged_roi_align_case(roi_align_case* c, int iteration) {
    random_roi_align_case(c);
    static const uint32_t extents[8] = {0, 64, 128, 180, 20, 0, 128, 128};
    const int variant = iteration % 8;
    c->reduction = DML_REDUCE_FUNCTION_AVERAGE;
    c->interpolation = DML_INTERPOLATION_MODE_LINEAR;
    if (variant != 0) {
        c->height = c->width = extents[variant] - test_rand_range(0, 3);
        c->channels = test_rand_range(1, 41);
        c->roi_count = test_rand_range(1, 300);
        c->max_samples = c->min_samples + test_rand_range(0, 3); /* the CPU's time */
        /* The detection models' 2 x 2 samples (the kernel's unrolled path; a
         * ROI partly outside the image takes the general one). */
        if (test_rand_bool()) c->min_samples = c->max_samples = 2;
    }
    if (variant == 4) { /* lists of several block-wide scans */
        c->channels = test_rand_range(1, 5);
        c->roi_count = test_rand_range(1030, 1500);
    } else if (variant == 5) { /* K = 1 would need more than 227 KB */
        c->height = c->width = c->type == DML_TENSOR_DATA_TYPE_FLOAT16 ? 400 : 300;
        c->channels = test_rand_range(1, 3);
        c->roi_count = test_rand_range(1, 20);
    } else if (variant >= 6) {
        /* A whole 128 x 128 chunk a block (227 KB): more chunk tasks than an
         * H100's 132 blocks (each task stages several chunks in turn), and
         * either an image's samples kept for all its chunks (2 images) or
         * more ROIs on one image than the samples a block keeps (rounds for
         * each chunk). */
        c->height = c->width = 128;
        c->channels = c->type == DML_TENSOR_DATA_TYPE_FLOAT16 ? test_rand_range(540, 600) : test_rand_range(270, 300);
        c->batch = variant == 6 ? 2 : 1;
        c->roi_count = variant == 6 ? test_rand_range(20, 200) : test_rand_range(700, 800);
        if (variant == 7) c->min_samples = c->max_samples = 2; /* 344 bytes of samples a ROI (7 x 7) */
    }
    if (variant == 7 || test_rand_bool()) c->out_height = c->out_width = 7;
    staged_case_finish(c);
}

void staged_roi_align_case_sized(roi_align_case* c, uint32_t extent) {
    random_roi_align_case(c);
    c->type = DML_TENSOR_DATA_TYPE_FLOAT32;
    c->reduction = DML_REDUCE_FUNCTION_AVERAGE;
    c->interpolation = DML_INTERPOLATION_MODE_LINEAR;
    c->height = c->width = extent;
    c->channels = 8;
    c->roi_count = test_rand_range(1, 50);
    c->max_samples = c->min_samples + test_rand_range(0, 3);
    staged_case_finish(c);
}

void listed_roi_align_grad_case(roi_align_case* c, int iteration, bool channels_last) {
    int large = iteration - (LISTED_ROI_ALIGN_GRAD_CASES - 4);
    if (large < 0) {
        random_packed_case(c, iteration);
    } else {
        large_roi_align_case(c, large == 0 ? 0 : large == 1 ? 2 : 3);
        if (large == 3) c->max_samples = c->min_samples = 2; /* 2^19 contributions */
    }
    c->reduction = DML_REDUCE_FUNCTION_AVERAGE;
    c->max_samples = c->min_samples;
    c->layouts[L_INPUT_GRADIENT] = c->layouts[L_OUTPUT_GRADIENT] = TEST_LAYOUT_PACKED;
    c->channels_last = channels_last;
    roi_align_case_describe(c);
}

void roi_align_case_describe(roi_align_case* c) {
    snprintf(c->context, sizeof c->context,
             "%s %s idx %s in [%u %u %u %u] R %u out %ux%u ranks %u/%u %s %s scale %g,%g offsets %g,%g oob %g "
             "samples %u..%u corners %d layouts %s/%s/%s/%s%s",
             dmlOperatorTypeName(c->forward_type), dmlDataTypeName(c->type), dmlDataTypeName(c->index_type), c->batch,
             c->channels, c->height, c->width, c->roi_count, c->out_height, c->out_width, c->roi_rank, c->batch_rank,
             c->reduction == DML_REDUCE_FUNCTION_MAX ? "MAX" : "AVERAGE",
             c->interpolation == DML_INTERPOLATION_MODE_LINEAR ? "LINEAR" : "NEAREST", c->scale_x, c->scale_y,
             c->input_pixel_offset, c->output_pixel_offset, c->out_of_bounds_value, c->min_samples, c->max_samples,
             (int)c->align_corners, test_layout_name(c->layouts[L_INPUT]), test_layout_name(c->layouts[L_ROI]),
             test_layout_name(c->layouts[L_BATCH]), test_layout_name(c->layouts[L_OUTPUT]),
             c->channels_last ? ", channels-last" : "");
}

void roi_align_case_free(roi_align_case* c) {
    free(c->image);
    free(c->rois);
    free(c->batch_indices);
    free(c->input_gradient);
}

static float random_offset(void) {
    static const float offsets[] = {0.0f, 0.5f, -0.5f};
    return test_rand_range(0, 3) == 3 ? (float)test_rand_double(-1, 1) : offsets[test_rand_range(0, 2)];
}

/* Boxes: x1 around the image, x2 = x1 + a size that is at times 0 or negative
 * (mirrored); NaN, infinite and huge corners with specials. Batch indices
 * mostly valid; out of range (RA-12) at times. */
static void random_boxes(roi_align_case* c) {
    c->rois = malloc((size_t)c->roi_count * 4 * sizeof *c->rois);
    c->batch_indices = malloc((size_t)c->roi_count * sizeof *c->batch_indices);
    for (uint32_t r = 0; r < c->roi_count; r++) {
        double* box = c->rois + (size_t)r * 4;
        for (int axis = 0; axis < 2; axis++) {
            uint32_t extent = axis ? c->height : c->width;
            double scale = axis ? c->scale_y : c->scale_x;
            box[axis] = random_roi_coordinate(extent, scale, c->specials);
            uint32_t kind = test_rand_range(0, 9);
            double size = kind == 0   ? 0.0
                          : kind == 1 ? -test_rand_double(0, extent)
                                      : test_rand_double(0, extent + 2.0);
            box[axis + 2] = box[axis] + size / scale;
        }
        uint32_t kind = test_rand_range(0, 19);
        double huge = c->index_type == DML_TENSOR_DATA_TYPE_UINT64 ? 1099511627776.0 : 4294967295.0;
        c->batch_indices[r] = kind == 0   ? c->batch + test_rand_range(0, 2)
                              : kind == 1 ? huge
                                          : test_rand_range(0, c->batch - 1);
    }
}

static void random_input_gradient(roi_align_case* c) {
    uint64_t outputs = (uint64_t)c->roi_count * c->channels * c->out_height * c->out_width;
    c->input_gradient = malloc(outputs * sizeof *c->input_gradient);
    for (uint64_t i = 0; i < outputs; i++)
        c->input_gradient[i] = test_rand_double(-1, 1); /* non-integers: the summation order shows */
}

void random_roi_align_case(roi_align_case* c) {
    memset(c, 0, sizeof *c);
    c->forward_type = test_rand_bool() ? DML_OPERATOR_ROI_ALIGN : DML_OPERATOR_ROI_ALIGN1;
    c->type = test_rand_bool() ? DML_TENSOR_DATA_TYPE_FLOAT32 : DML_TENSOR_DATA_TYPE_FLOAT16;
    c->index_type = test_rand_bool() ? DML_TENSOR_DATA_TYPE_UINT64 : DML_TENSOR_DATA_TYPE_UINT32;
    c->batch = test_rand_range(1, 3);
    c->channels = test_rand_range(1, 11);
    c->height = test_rand_range(1, 20);
    c->width = test_rand_range(1, 20);
    c->roi_count = test_rand_range(1, 12);
    c->out_height = test_rand_range(1, 4);
    c->out_width = test_rand_range(1, 4);
    c->roi_rank = test_rand_range(2, 4);
    c->batch_rank = test_rand_range(1, 4);
    c->reduction = test_rand_bool() ? DML_REDUCE_FUNCTION_MAX : DML_REDUCE_FUNCTION_AVERAGE;
    c->interpolation = test_rand_bool() ? DML_INTERPOLATION_MODE_LINEAR : DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR;
    c->scale_x = random_roi_scale();
    c->scale_y = test_rand_bool() ? c->scale_x : random_roi_scale();
    c->input_pixel_offset = c->forward_type == DML_OPERATOR_ROI_ALIGN ? 0.5f : random_offset();
    c->output_pixel_offset = c->forward_type == DML_OPERATOR_ROI_ALIGN ? -0.5f : random_offset();
    c->out_of_bounds_value = test_rand_bool() ? 0.0f : (float)round(test_rand_double(-20, 20));
    c->min_samples = test_rand_range(1, 3);
    c->max_samples = c->min_samples + (test_rand_range(0, 4) == 0 ? 40 : test_rand_range(0, 3));
    c->align_corners = c->forward_type == DML_OPERATOR_ROI_ALIGN1 && test_rand_range(0, 3) == 0;
    c->specials = test_rand_range(0, 3) == 0;
    for (int i = 0; i < L_COUNT; i++) {
        bool is_input = i == L_INPUT || i == L_ROI || i == L_BATCH || i == L_INPUT_GRADIENT;
        c->layouts[i] = test_random_layout(is_input); /* broadcast strides for inputs only */
    }
    c->image = random_image((uint64_t)c->batch * c->channels * c->height * c->width, c->specials);
    random_boxes(c);
    random_input_gradient(c);
    roi_align_case_describe(c);
}

void large_roi_align_case(roi_align_case* c, int variant) {
    memset(c, 0, sizeof *c);
    c->forward_type = DML_OPERATOR_ROI_ALIGN1;
    c->type = variant == 3 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
    c->index_type = DML_TENSOR_DATA_TYPE_UINT32;
    c->batch = 5;
    c->channels = variant < 2 ? 256 : 19;
    c->height = variant < 2 ? 64 : 150;
    c->width = variant < 2 ? 64 : 97;
    c->roi_count = 700;
    c->out_height = 7;
    c->out_width = variant == 1 ? 5 : 7;
    c->roi_rank = 2;
    c->batch_rank = 1;
    c->reduction = variant == 1 ? DML_REDUCE_FUNCTION_MAX : DML_REDUCE_FUNCTION_AVERAGE;
    c->interpolation = variant == 2 ? DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR : DML_INTERPOLATION_MODE_LINEAR;
    c->scale_x = c->scale_y = variant == 2 ? 0.25f : 1.0f;
    c->input_pixel_offset = 0.5f;
    c->output_pixel_offset = -0.5f;
    c->min_samples = 1;
    c->max_samples = variant == 3 ? 5 : 2;
    c->align_corners = variant == 3;
    for (int i = 0; i < L_COUNT; i++)
        c->layouts[i] = TEST_LAYOUT_PACKED;
    if (variant == 1) c->layouts[L_INPUT] = TEST_LAYOUT_PERMUTED; /* NHWC among them */
    c->image = random_image((uint64_t)c->batch * c->channels * c->height * c->width, false);
    c->rois = malloc((size_t)c->roi_count * 4 * sizeof *c->rois);
    c->batch_indices = malloc((size_t)c->roi_count * sizeof *c->batch_indices);
    for (uint32_t r = 0; r < c->roi_count; r++) {
        /* Most ROIs on images 0 and 1, in six clusters: heavy overlap. */
        double* box = c->rois + (size_t)r * 4;
        double cx = (r % 3) * c->width / 3.0 / c->scale_x, cy = (r % 2) * c->height / 2.0 / c->scale_y;
        box[0] = cx + test_rand_double(-4, 20) / c->scale_x;
        box[1] = cy + test_rand_double(-4, 20) / c->scale_y;
        box[2] = box[0] + test_rand_double(1, 40) / c->scale_x;
        box[3] = box[1] + test_rand_double(1, 40) / c->scale_y;
        c->batch_indices[r] = r % 7 == 6 ? test_rand_range(2, 5) : r % 2; /* 5: out of range */
    }
    random_input_gradient(c);
    roi_align_case_describe(c);
}

void twin_make_channels_last(twin_buffer* w) {
    test_tensor* t = &w->tensor;
    uint32_t pixel = t->sizes[1], row = t->sizes[3] * pixel;
    const uint32_t strides[4] = {t->sizes[2] * row, 1, row, pixel};
    memcpy(t->strides, strides, sizeof strides);
    t->buffer.Strides = t->strides;
}

static void roi_shapes(const roi_align_case* c, uint32_t roi_sizes[4], uint32_t batch_sizes[4]) {
    for (int i = 0; i < 4; i++)
        roi_sizes[i] = batch_sizes[i] = 1;
    roi_sizes[c->roi_rank - 2] = c->roi_count;
    roi_sizes[c->roi_rank - 1] = 4;
    batch_sizes[c->batch_rank - 1] = c->roi_count;
}

void roi_align_forward_setup(roi_align_run* run, const roi_align_case* c) {
    memset(run, 0, sizeof *run);
    uint32_t in_sizes[4] = {c->batch, c->channels, c->height, c->width};
    uint32_t out_sizes[4] = {c->roi_count, c->channels, c->out_height, c->out_width};
    uint32_t roi_sizes[4], batch_sizes[4];
    roi_shapes(c, roi_sizes, batch_sizes);
    twin_init(&run->input, c->type, 4, in_sizes, c->layouts[L_INPUT]);
    if (c->channels_last) twin_make_channels_last(&run->input);
    twin_fill(&run->input, c->image);
    twin_init(&run->rois, c->type, c->roi_rank, roi_sizes, c->layouts[L_ROI]);
    twin_fill(&run->rois, c->rois);
    twin_init(&run->indices, c->index_type, c->batch_rank, batch_sizes, c->layouts[L_BATCH]);
    twin_fill(&run->indices, c->batch_indices);
    twin_init(&run->output, c->type, 4, out_sizes, c->layouts[L_OUTPUT]);
    if (c->channels_last) twin_make_channels_last(&run->output);
    run->align = (DML_ROI_ALIGN_OPERATOR_DESC){twin_desc(&run->input),
                                               twin_desc(&run->rois),
                                               twin_desc(&run->indices),
                                               twin_desc(&run->output),
                                               c->reduction,
                                               c->interpolation,
                                               c->scale_x,
                                               c->scale_y,
                                               c->out_of_bounds_value,
                                               c->min_samples,
                                               c->max_samples};
    run->align1 = (DML_ROI_ALIGN1_OPERATOR_DESC){twin_desc(&run->input),
                                                 twin_desc(&run->rois),
                                                 twin_desc(&run->indices),
                                                 twin_desc(&run->output),
                                                 c->reduction,
                                                 c->interpolation,
                                                 c->scale_x,
                                                 c->scale_y,
                                                 c->input_pixel_offset,
                                                 c->output_pixel_offset,
                                                 c->out_of_bounds_value,
                                                 c->min_samples,
                                                 c->max_samples,
                                                 c->align_corners};
    bool v0 = c->forward_type == DML_OPERATOR_ROI_ALIGN;
    run->op = (DML_OPERATOR_DESC){c->forward_type, v0 ? (const void*)&run->align : (const void*)&run->align1};
    run->input_count = 3;
    run->output_count = 1;
    snprintf(run->context, sizeof run->context, "%s", c->context);
}

void roi_align_grad_setup(roi_align_run* run, const roi_align_case* c, bool with_input, bool want_output_gradient,
                          bool want_roi_gradient) {
    memset(run, 0, sizeof *run);
    uint32_t in_sizes[4] = {c->batch, c->channels, c->height, c->width};
    uint32_t dy_sizes[4] = {c->roi_count, c->channels, c->out_height, c->out_width};
    uint32_t roi_sizes[4], batch_sizes[4];
    roi_shapes(c, roi_sizes, batch_sizes);
    if (with_input) {
        twin_init(&run->input, c->type, 4, in_sizes, c->layouts[L_INPUT]);
        twin_fill(&run->input, c->image);
    }
    twin_init(&run->input_gradient, c->type, 4, dy_sizes, c->layouts[L_INPUT_GRADIENT]);
    if (c->channels_last) twin_make_channels_last(&run->input_gradient);
    twin_fill(&run->input_gradient, c->input_gradient);
    twin_init(&run->rois, c->type, c->roi_rank, roi_sizes, c->layouts[L_ROI]);
    twin_fill(&run->rois, c->rois);
    /* The gradient's batch indices are UINT32 (§2); UINT32_MAX stays out of range. */
    twin_init(&run->indices, DML_TENSOR_DATA_TYPE_UINT32, c->batch_rank, batch_sizes, c->layouts[L_BATCH]);
    double* indices = malloc(c->roi_count * sizeof *indices);
    for (uint32_t r = 0; r < c->roi_count; r++)
        indices[r] = fmin(c->batch_indices[r], 4294967295.0);
    twin_fill(&run->indices, indices);
    free(indices);
    if (want_output_gradient) {
        twin_init(&run->output_gradient, c->type, 4, in_sizes, c->layouts[L_OUTPUT_GRADIENT]);
        if (c->channels_last) twin_make_channels_last(&run->output_gradient);
    }
    if (want_roi_gradient) twin_init(&run->roi_gradient, c->type, c->roi_rank, roi_sizes, c->layouts[L_ROI_GRADIENT]);
    run->grad = (DML_ROI_ALIGN_GRAD_OPERATOR_DESC){twin_desc(&run->input),
                                                   twin_desc(&run->input_gradient),
                                                   twin_desc(&run->rois),
                                                   twin_desc(&run->indices),
                                                   twin_desc(&run->output_gradient),
                                                   twin_desc(&run->roi_gradient),
                                                   c->reduction,
                                                   c->interpolation,
                                                   c->scale_x,
                                                   c->scale_y,
                                                   c->input_pixel_offset,
                                                   c->output_pixel_offset,
                                                   c->min_samples,
                                                   c->max_samples,
                                                   c->align_corners};
    run->op = (DML_OPERATOR_DESC){DML_OPERATOR_ROI_ALIGN_GRAD, &run->grad};
    run->input_count = 4;
    run->output_count = 2;
    snprintf(run->context, sizeof run->context, "ROI_ALIGN_GRAD input %d outputs %d/%d; %s", (int)with_input,
             (int)want_output_gradient, (int)want_roi_gradient, c->context);
}

void roi_align_run_buffers(roi_align_run* run, bool cuda, test_buffer* inputs[4], test_buffer* outputs[2]) {
    if (run->op.Type == DML_OPERATOR_ROI_ALIGN_GRAD) {
        inputs[0] = twin_side(&run->input, cuda);
        inputs[1] = twin_side(&run->input_gradient, cuda);
        inputs[2] = twin_side(&run->rois, cuda);
        inputs[3] = twin_side(&run->indices, cuda);
        outputs[0] = twin_side(&run->output_gradient, cuda);
        outputs[1] = twin_side(&run->roi_gradient, cuda);
    } else {
        inputs[0] = twin_side(&run->input, cuda);
        inputs[1] = twin_side(&run->rois, cuda);
        inputs[2] = twin_side(&run->indices, cuda);
        inputs[3] = NULL;
        outputs[0] = twin_side(&run->output, cuda);
        outputs[1] = NULL;
    }
}

void roi_align_run_compare(roi_align_run* run, const char* label) {
    char what[96];
    const twin_buffer* outputs[3] = {&run->output, &run->output_gradient, &run->roi_gradient};
    const char* names[3] = {"OutputTensor", "OutputGradientTensor", "OutputROIGradientTensor"};
    for (int i = 0; i < 3; i++) {
        if (!outputs[i]->present) continue;
        snprintf(what, sizeof what, "%s (%s)", names[i], label);
        expect_same_values(outputs[i], what, run->context);
    }
}

void roi_align_run_free(roi_align_run* run) {
    twin_buffer* all[7] = {&run->input,           &run->rois,        &run->indices, &run->output, &run->input_gradient,
                           &run->output_gradient, &run->roi_gradient};
    for (int i = 0; i < 7; i++)
        twin_free(all[i]);
}
