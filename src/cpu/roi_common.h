/* What the CPU's ROI kernels share (generic and fast paths alike): element
 * loads and stores of FLOAT32/FLOAT16 tensors, the ROI rows and batch
 * indices of ROI align, one region resolved, and the valid ROIs sorted by
 * image (the order of the feature gradient's accumulation). */
#ifndef DML_CPU_ROI_COMMON_H
#define DML_CPU_ROI_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "../core/checked.h"
#include "../core/half.h"
#include "../ops/roi.h"
#include "../ops/roi_align_math.h"
#include "cpu.h"

static inline float roi_load(const void* base, uint64_t offset, bool half) {
    return half ? dml_half_to_float(((const uint16_t*)base)[offset]) : ((const float*)base)[offset];
}

/* FLOAT16 results are rounded once, here (RA-13). */
static inline void roi_store(void* base, uint64_t offset, bool half, float value) {
    if (half)
        ((uint16_t*)base)[offset] = dml_float_to_half(value);
    else
        ((float*)base)[offset] = value;
}

static inline void roi_copy_strides(uint64_t dst[4], const dml_tensor* tensor) {
    for (int i = 0; i < 4; i++)
        dst[i] = tensor->strides[i];
}

/* The ROI rows and batch indices, whatever their allowed rank: the last two
 * ROI dimensions are {R, 4}, the last batch-index dimension is R, and every
 * leading dimension is 1 (validated). */
typedef struct roi_source {
    const void* rois;
    uint64_t row_stride, column_stride;
    const void* batch_indices;
    uint64_t batch_stride;
    bool batch_64;
    bool half;
} roi_source;

static inline roi_source roi_source_make(const dml_tensor* rois, const void* roi_data, const dml_tensor* batch_indices,
                                         const void* batch_data) {
    roi_source source = {
        .rois = roi_data,
        .row_stride = rois->strides[rois->rank - 2],
        .column_stride = rois->strides[rois->rank - 1],
        .batch_indices = batch_data,
        .batch_stride = batch_indices->strides[batch_indices->rank - 1],
        .batch_64 = batch_indices->type == DML_TENSOR_DATA_TYPE_UINT64,
        .half = rois->type == DML_TENSOR_DATA_TYPE_FLOAT16,
    };
    return source;
}

static inline uint64_t roi_batch_index(const roi_source* source, uint32_t r) {
    uint64_t offset = r * source->batch_stride;
    return source->batch_64 ? ((const uint64_t*)source->batch_indices)[offset]
                            : ((const uint32_t*)source->batch_indices)[offset];
}

/* The parameters, ROI source and sizes of a ROI align dispatch, shared by
 * every implementation: the image {N, C, H, W}, the outputs OH x OW, R. */
typedef struct roi_align_dims {
    const dml_roi_align_params* params;
    roi_source source; /* zero when made without data */
    uint32_t batch, channels, height, width, out_height, out_width, roi_count;
} roi_align_dims;

/* ROI_ALIGN and ROI_ALIGN1. */
static inline roi_align_dims roi_align_forward_dims(const dml_kernel_args* args) {
    const DMLOperator* op = args->op;
    const dml_tensor* input = &op->inputs[DML_ROI_ALIGN_INPUT].tensor;
    const dml_tensor* output = &op->outputs[DML_ROI_ALIGN_OUTPUT].tensor;
    roi_align_dims d = {
        .params = op->params,
        .source =
            roi_source_make(&op->inputs[DML_ROI_ALIGN_ROI].tensor, args->inputs[DML_ROI_ALIGN_ROI],
                            &op->inputs[DML_ROI_ALIGN_BATCH_INDICES].tensor, args->inputs[DML_ROI_ALIGN_BATCH_INDICES]),
        .batch = input->sizes[0],
        .channels = input->sizes[1],
        .height = input->sizes[2],
        .width = input->sizes[3],
        .out_height = output->sizes[2],
        .out_width = output->sizes[3],
        .roi_count = output->sizes[0],
    };
    return d;
}

/* ROI_ALIGN_GRAD's tensors (`present` says which were given) and the
 * strides of the ROI gradient's rows [x1, y1, x2, y2], whatever its rank. */
typedef struct roi_align_grad_tensors {
    const dml_tensor *input, *input_gradient, *output_gradient, *roi_gradient;
    uint64_t roi_gradient_row_stride, roi_gradient_column_stride;
} roi_align_grad_tensors;

static inline roi_align_grad_tensors roi_align_grad_tensors_of(const DMLOperator* op) {
    roi_align_grad_tensors t = {
        .input = &op->inputs[DML_ROI_ALIGN_GRAD_INPUT].tensor,
        .input_gradient = &op->inputs[DML_ROI_ALIGN_GRAD_INPUT_GRADIENT].tensor,
        .output_gradient = &op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_GRADIENT].tensor,
        .roi_gradient = &op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_ROI_GRADIENT].tensor,
    };
    if (t.roi_gradient->present) {
        t.roi_gradient_row_stride = t.roi_gradient->strides[t.roi_gradient->rank - 2];
        t.roi_gradient_column_stride = t.roi_gradient->strides[t.roi_gradient->rank - 1];
    }
    return t;
}

/* ROI_ALIGN_GRAD; with args NULL (at compile time) the shapes alone. N, H, W
 * come from InputTensor when present, else from OutputGradientTensor (§3). */
static inline roi_align_dims roi_align_grad_dims(const DMLOperator* op, const dml_kernel_args* args) {
    const dml_tensor* input = &op->inputs[DML_ROI_ALIGN_GRAD_INPUT].tensor;
    const dml_tensor* input_gradient = &op->inputs[DML_ROI_ALIGN_GRAD_INPUT_GRADIENT].tensor;
    const dml_tensor* image = input->present ? input : &op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_GRADIENT].tensor;
    roi_align_dims d = {
        .params = op->params,
        .batch = image->sizes[0],
        .channels = input_gradient->sizes[1],
        .height = image->sizes[2],
        .width = image->sizes[3],
        .out_height = input_gradient->sizes[2],
        .out_width = input_gradient->sizes[3],
        .roi_count = input_gradient->sizes[0],
    };
    if (args)
        d.source = roi_source_make(&op->inputs[DML_ROI_ALIGN_GRAD_ROI].tensor, args->inputs[DML_ROI_ALIGN_GRAD_ROI],
                                   &op->inputs[DML_ROI_ALIGN_GRAD_BATCH_INDICES].tensor,
                                   args->inputs[DML_ROI_ALIGN_GRAD_BATCH_INDICES]);
    return d;
}

/* One region, resolved for an input of H x W and an output of OH x OW (§4.1). */
typedef struct roi_region {
    uint64_t batch; /* as given; >= N means no image (RA-12) */
    dml_roi_axis x, y;
} roi_region;

static inline roi_region roi_region_make(const roi_source* source, uint32_t r, const dml_roi_align_params* p,
                                         uint32_t out_height, uint32_t out_width, uint32_t height, uint32_t width) {
    roi_region region;
    uint64_t row = r * source->row_stride;
    float corners[4];
    for (uint32_t k = 0; k < 4; k++)
        corners[k] = roi_load(source->rois, row + k * source->column_stride, source->half);
    region.batch = roi_batch_index(source, r);
    /* Rows are [x1, y1, x2, y2]. */
    region.x = dml_roi_axis_make(corners[0], corners[2], p->spatial_scale_x, out_width, width, p);
    region.y = dml_roi_axis_make(corners[1], corners[3], p->spatial_scale_y, out_height, height, p);
    return region;
}

/* A valid ROI and its image, for sorting by (image, roi). */
typedef struct roi_of_image {
    uint32_t batch, roi;
} roi_of_image;

static inline int roi_compare_by_image(const void* a, const void* b) {
    const roi_of_image *x = a, *y = b;
    if (x->batch != y->batch) return x->batch < y->batch ? -1 : 1;
    return x->roi < y->roi ? -1 : x->roi > y->roi;
}

/* The ROIs whose image exists, sorted by (image, roi) into sorted[0..count)
 * (room for roi_count entries): each plane of the feature gradient visits its
 * own in increasing r. Returns the count. */
static inline uint32_t roi_sort_by_image(const roi_source* source, uint32_t roi_count, uint32_t batch,
                                         roi_of_image* sorted) {
    uint32_t count = 0;
    for (uint32_t r = 0; r < roi_count; r++) {
        uint64_t image = roi_batch_index(source, r);
        if (image < batch) sorted[count++] = (roi_of_image){(uint32_t)image, r};
    }
    qsort(sorted, count, sizeof *sorted, roi_compare_by_image);
    return count;
}

/* Every ROI ordered by (image, roi), those without an image (>= batch)
 * last, into order[0..roi_count): the order in which a fast path visits the
 * ROIs of one block of planes, so that one image's planes stay in cache. */
static inline void roi_order_by_image(const roi_source* source, uint32_t roi_count, uint32_t batch,
                                      roi_of_image* order) {
    for (uint32_t r = 0; r < roi_count; r++) {
        uint64_t image = roi_batch_index(source, r);
        order[r] = (roi_of_image){image < batch ? (uint32_t)image : batch, r};
    }
    qsort(order, roi_count, sizeof *order, roi_compare_by_image);
}

/* The first entry of sorted[0..count) whose image is >= batch. */
static inline uint32_t roi_first_of_image(const roi_of_image* sorted, uint32_t count, uint32_t batch) {
    uint32_t low = 0, high = count;
    while (low < high) {
        uint32_t middle = low + (high - low) / 2;
        if (sorted[middle].batch < batch)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

/* How many tasks a thread takes at a time from a dynamic schedule of
 * `tasks` tasks of uneven cost: about 64 chunks a thread to balance them,
 * at most 64 tasks a chunk. Taking them one at a time cost a third of ROI
 * pooling's time (16384 tasks, 2 threads, A/B in one process). The
 * schedule never changes a result: every output is computed by one task. */
static inline int roi_task_chunk(int64_t tasks, int threads) {
    int64_t chunk = tasks / ((int64_t)threads * 64);
    return chunk < 1 ? 1 : chunk > 64 ? 64 : (int)chunk;
}

static inline uint64_t roi_align64(uint64_t bytes) { return dml_round_up_u64(bytes, 64); }

/* How the feature gradient's planes (of `lanes` channels each) are split
 * into bands of rows so that there are at least two tasks per thread;
 * banding never changes a result (each pixel's additions keep their order). */
typedef struct roi_banding {
    uint64_t bands, band_rows;
    int64_t tasks;
    int threads;
} roi_banding;

static inline roi_banding roi_banding_make(uint64_t planes, uint32_t height, int threads) {
    roi_banding b;
    b.bands = 1;
    if (planes < 2 * (uint64_t)threads) b.bands = (2 * (uint64_t)threads + planes - 1) / planes;
    if (b.bands > height) b.bands = height;
    b.band_rows = (height + b.bands - 1) / b.bands;
    b.tasks = (int64_t)(planes * b.bands);
    b.threads = b.tasks < threads ? (int)b.tasks : threads;
    return b;
}

#endif
