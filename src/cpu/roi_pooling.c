/* ROI pooling on the CPU (spec roi_pooling.md §3).
 *
 * Parallel over output rows (roi, channel, ph); each output element scans its
 * bin in increasing (y, x) order with the max-pooling comparison rule, so the
 * result is a bit-exact copy of one input element (or +0.0 for an empty bin)
 * whatever the thread count. The region and bin math is in
 * src/ops/roi_pooling_math.h, shared with the CUDA backend. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "../ops/roi_pooling_math.h"
#include "roi_common.h"

typedef struct roi_pooling_problem {
    const dml_roi_pooling_params* params;
    bool half;
    uint32_t batch, channels, height, width, roi_count;
    const void* input;
    uint64_t in_strides[4];
    const void* rois;
    uint64_t roi_row_stride, roi_column_stride;
    void* output;
    uint64_t out_strides[4];
} roi_pooling_problem;

/* The region of ROI r (roi_pooling_math.h). */
static dml_pooled_region resolve_region(const roi_pooling_problem* f, uint32_t r) {
    float values[5];
    for (uint32_t k = 0; k < 5; k++)
        values[k] = roi_load(f->rois, r * f->roi_row_stride + k * f->roi_column_stride, f->half);
    return dml_roi_pooled_region(values, f->batch, f->params->spatial_scale);
}

/* Output row (r, c, ph): every pw. */
static void pool_row(const roi_pooling_problem* f, uint64_t row) {
    const dml_roi_pooling_params* p = f->params;
    uint32_t ph = (uint32_t)(row % p->pooled_height);
    uint64_t rest = row / p->pooled_height;
    uint32_t c = (uint32_t)(rest % f->channels);
    uint32_t r = (uint32_t)(rest / f->channels);
    uint64_t out_row = r * f->out_strides[0] + c * f->out_strides[1] + ph * f->out_strides[2];
    dml_pooled_region region = resolve_region(f, r);
    dml_pooled_bin rows = {0, 0};
    if (region.valid) rows = dml_roi_pooled_bin(region.y1, region.height, ph, p->pooled_height, f->height);
    uint64_t plane = region.batch * f->in_strides[0] + c * f->in_strides[1];

    for (uint32_t pw = 0; pw < p->pooled_width; pw++) {
        uint64_t out = out_row + pw * f->out_strides[3];
        dml_pooled_bin columns = {0, 0};
        if (region.valid) columns = dml_roi_pooled_bin(region.x1, region.width, pw, p->pooled_width, f->width);
        bool found = false;
        float best = 0.0f;
        uint64_t best_offset = 0;
        for (uint32_t y = rows.start; y < rows.end; y++) {
            for (uint32_t x = columns.start; x < columns.end; x++) {
                uint64_t offset = plane + y * f->in_strides[2] + x * f->in_strides[3];
                float value = roi_load(f->input, offset, f->half);
                if (!found || dml_nan_aware_greater(value, best)) {
                    found = true;
                    best = value;
                    best_offset = offset;
                }
            }
        }
        /* A copy of the winning element's bits; +0.0 for an empty bin or an invalid ROI (RP-3, RP-5). */
        if (f->half)
            ((uint16_t*)f->output)[out] = found ? ((const uint16_t*)f->input)[best_offset] : 0;
        else
            ((float*)f->output)[out] = found ? ((const float*)f->input)[best_offset] : 0.0f;
    }
}

static HRESULT run_roi_pooling(const dml_kernel_args* args) {
    const DMLOperator* op = args->op;
    const dml_tensor* input = &op->inputs[DML_ROI_POOLING_INPUT].tensor;
    const dml_tensor* rois = &op->inputs[DML_ROI_POOLING_ROI].tensor;
    const dml_tensor* output = &op->outputs[DML_ROI_POOLING_OUTPUT].tensor;
    roi_pooling_problem f = {
        .params = op->params,
        .half = input->type == DML_TENSOR_DATA_TYPE_FLOAT16,
        .batch = input->sizes[0],
        .channels = input->sizes[1],
        .height = input->sizes[2],
        .width = input->sizes[3],
        .roi_count = rois->sizes[2],
        .input = args->inputs[DML_ROI_POOLING_INPUT],
        .rois = args->inputs[DML_ROI_POOLING_ROI],
        .roi_row_stride = rois->strides[2],
        .roi_column_stride = rois->strides[3],
        .output = args->outputs[DML_ROI_POOLING_OUTPUT],
    };
    for (int i = 0; i < 4; i++) {
        f.in_strides[i] = input->strides[i];
        f.out_strides[i] = output->strides[i];
    }
    int64_t rows = (int64_t)f.roi_count * f.channels * f.params->pooled_height;
    /* Bins differ in size: dynamic chunks balance them; every element is
     * computed by one thread alone, so the schedule never changes a bit. */
    int threads =
        dml_cpu_threads_for(dml_cpu_threads(args), (uint64_t)rows,
                            dml_cpu_items_per_thread(f.params->pooled_width, DML_CPU_MIN_WORK_PER_THREAD / 8));
#pragma omp parallel for num_threads(threads) schedule(dynamic, 16)
    for (int64_t row = 0; row < rows; row++)
        pool_row(&f, (uint64_t)row);
    return S_OK;
}

const dml_impl dml_cpu_roi_pooling_generic = {"roi_pooling/generic/strided", DML_ISA_GENERIC, NULL, run_roi_pooling};
