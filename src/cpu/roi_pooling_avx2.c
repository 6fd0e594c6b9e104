/* ROI pooling with AVX2 + F16C, eight channels per vector (spec
 * roi_pooling.md §3).
 *
 * One task per (roi, block of 8 channels): the region and its bins are
 * resolved once (roi_pooling_math.h) for all eight channels, and each lane
 * scans its bin in the generic kernel's (y, x) order with the same max rule,
 * keeping the winning element's raw bits: the output is the same bit-exact
 * copy (or +0.0) as the generic kernel's, whatever the thread count. */
#include "../ops/roi_pooling_math.h"
#include "roi_lanes_avx2.h"

typedef struct pooling_problem {
    const dml_roi_pooling_params* params;
    uint32_t batch, channels, height, width;
    const void* rois;
    uint64_t roi_row_stride, roi_column_stride;
    bool half;
    uint64_t in_strides[4], out_strides[4];
    channel_lanes input, output;
} pooling_problem;

static void pool_task(const pooling_problem* f, uint32_t r, uint32_t c0, uint32_t lanes) {
    const dml_roi_pooling_params* p = f->params;
    float values[5];
    for (uint32_t k = 0; k < 5; k++)
        values[k] = roi_load(f->rois, r * f->roi_row_stride + k * f->roi_column_stride, f->half);
    dml_pooled_region region = dml_roi_pooled_region(values, f->batch, p->spatial_scale);
    uint64_t plane = region.batch * f->in_strides[0] + c0 * f->in_strides[1];
    uint64_t out = r * f->out_strides[0] + c0 * f->out_strides[1];
    for (uint32_t ph = 0; ph < p->pooled_height; ph++) {
        dml_pooled_bin rows = {0, 0};
        if (region.valid) rows = dml_roi_pooled_bin(region.y1, region.height, ph, p->pooled_height, f->height);
        for (uint32_t pw = 0; pw < p->pooled_width; pw++) {
            dml_pooled_bin columns = {0, 0};
            if (region.valid) columns = dml_roi_pooled_bin(region.x1, region.width, pw, p->pooled_width, f->width);
            /* +0.0 for an empty bin or an invalid ROI (RP-3, RP-5). */
            __m256i best_bits = _mm256_setzero_si256();
            if (rows.start < rows.end && columns.start < columns.end) {
                __m256 best = _mm256_setzero_ps();
                bool first = true;
                for (uint32_t y = rows.start; y < rows.end; y++) {
                    for (uint32_t x = columns.start; x < columns.end; x++) {
                        __m256i bits =
                            lanes_load_bits(&f->input, plane + y * f->in_strides[2] + x * f->in_strides[3], lanes);
                        __m256 value = lanes_bits_to_float(&f->input, bits);
                        __m256 take = first ? _mm256_castsi256_ps(_mm256_set1_epi32(-1)) : lanes_greater(value, best);
                        best = _mm256_blendv_ps(best, value, take);
                        best_bits = _mm256_castps_si256(
                            _mm256_blendv_ps(_mm256_castsi256_ps(best_bits), _mm256_castsi256_ps(bits), take));
                        first = false;
                    }
                }
            }
            lanes_store_bits(&f->output, out + ph * f->out_strides[2] + pw * f->out_strides[3], lanes, best_bits);
        }
    }
}

static HRESULT plan_pooling(const DMLOperator* op, dml_plan* result, bool channels_last) {
    (void)result;
    const dml_tensor* input = &op->inputs[DML_ROI_POOLING_INPUT].tensor;
    const dml_tensor* output = &op->outputs[DML_ROI_POOLING_OUTPUT].tensor;
    if (!roi_lanes_fit(input->strides[1]) || !roi_lanes_fit(output->strides[1])) return S_FALSE;
    return (input->strides[1] == 1) == channels_last ? S_OK : S_FALSE;
}

static HRESULT plan_pooling_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                                 dml_plan* result) {
    (void)device;
    (void)flags;
    return plan_pooling(op, result, false);
}

static HRESULT plan_pooling_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                                 dml_plan* result) {
    (void)device;
    (void)flags;
    return plan_pooling(op, result, true);
}

static HRESULT run_pooling(const dml_kernel_args* args) {
    const DMLOperator* op = args->op;
    const dml_tensor* input = &op->inputs[DML_ROI_POOLING_INPUT].tensor;
    const dml_tensor* rois = &op->inputs[DML_ROI_POOLING_ROI].tensor;
    const dml_tensor* output = &op->outputs[DML_ROI_POOLING_OUTPUT].tensor;
    bool half = input->type == DML_TENSOR_DATA_TYPE_FLOAT16;
    pooling_problem f = {
        .params = op->params,
        .batch = input->sizes[0],
        .channels = input->sizes[1],
        .height = input->sizes[2],
        .width = input->sizes[3],
        .rois = args->inputs[DML_ROI_POOLING_ROI],
        .roi_row_stride = rois->strides[2],
        .roi_column_stride = rois->strides[3],
        .half = half,
        .input = channel_lanes_make(args->inputs[DML_ROI_POOLING_INPUT], input->strides[1], half),
        .output = channel_lanes_make(args->outputs[DML_ROI_POOLING_OUTPUT], output->strides[1], half),
    };
    roi_copy_strides(f.in_strides, input);
    roi_copy_strides(f.out_strides, output);
    uint32_t blocks = (f.channels + ROI_LANES - 1) / ROI_LANES;
    int64_t tasks = (int64_t)rois->sizes[2] * blocks;
    /* Bins differ in size: dynamic scheduling balances them; every output
     * is computed by one thread alone. */
#pragma omp parallel for num_threads(dml_cpu_threads_for(dml_cpu_threads(args), (uint64_t)tasks, 1))                   \
    schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; task++) {
        roi_task t = roi_task_at(task, rois->sizes[2], blocks, f.input.contiguous);
        pool_task(&f, t.roi, t.c0, f.channels - t.c0 < ROI_LANES ? f.channels - t.c0 : ROI_LANES);
    }
    return S_OK;
}

const dml_impl dml_cpu_roi_pooling_avx2_nchw = {"roi_pooling/avx2/nchw", DML_ISA_AVX2, plan_pooling_nchw, run_pooling};
const dml_impl dml_cpu_roi_pooling_avx2_nhwc = {"roi_pooling/avx2/nhwc", DML_ISA_AVX2, plan_pooling_nhwc, run_pooling};
