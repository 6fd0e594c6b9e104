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
    uint64_t out_strides[4];
    tensor_view input;
    channel_lanes output;
} pooling_problem;

/* Every bin of ROI r in 8 channels, reading `in` (strides[2], strides[3])
 * from `plane`, the offset of (batch, c0, 0, 0). */
static void pool_bins(const pooling_problem* f, const dml_pooled_region* region, uint32_t r, uint32_t c0,
                      uint32_t lanes, const tensor_view* in, uint64_t plane) {
    const dml_roi_pooling_params* p = f->params;
    uint64_t out = r * f->out_strides[0] + c0 * f->out_strides[1];
    for (uint32_t ph = 0; ph < p->pooled_height; ph++) {
        dml_pooled_bin rows = {0, 0};
        if (region->valid) rows = dml_roi_pooled_bin(region->y1, region->height, ph, p->pooled_height, f->height);
        for (uint32_t pw = 0; pw < p->pooled_width; pw++) {
            dml_pooled_bin columns = {0, 0};
            if (region->valid) columns = dml_roi_pooled_bin(region->x1, region->width, pw, p->pooled_width, f->width);
            /* +0.0 for an empty bin or an invalid ROI (RP-3, RP-5). */
            __m256i best_bits = _mm256_setzero_si256();
            if (rows.start < rows.end && columns.start < columns.end) {
                __m256 best = _mm256_setzero_ps();
                bool first = true;
                for (uint32_t y = rows.start; y < rows.end; y++) {
                    for (uint32_t x = columns.start; x < columns.end; x++) {
                        __m256i bits =
                            lanes_load_bits(&in->lanes, plane + y * in->strides[2] + x * in->strides[3], lanes);
                        __m256 value = lanes_bits_to_float(&in->lanes, bits);
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

static void pool_task(const pooling_problem* f, uint32_t r, uint32_t c0, uint32_t lanes, float* tile,
                      uint64_t tile_floats) {
    const dml_roi_pooling_params* p = f->params;
    float values[5];
    for (uint32_t k = 0; k < 5; k++)
        values[k] = roi_load(f->rois, r * f->roi_row_stride + k * f->roi_column_stride, f->half);
    dml_pooled_region region = dml_roi_pooled_region(values, f->batch, p->spatial_scale);
    uint64_t plane = view_offset(&f->input, region.batch, c0, 0, 0);
    if (region.valid && lanes == ROI_LANES && tile_floats > 0) {
        /* NCHW FLOAT32: the region's pixels transposed into a channels-last
         * tile (the bins' bounds grow with the bin index), copied bit for bit. */
        dml_pooled_bin first_rows = dml_roi_pooled_bin(region.y1, region.height, 0, p->pooled_height, f->height);
        dml_pooled_bin last_rows =
            dml_roi_pooled_bin(region.y1, region.height, p->pooled_height - 1, p->pooled_height, f->height);
        dml_pooled_bin first_columns = dml_roi_pooled_bin(region.x1, region.width, 0, p->pooled_width, f->width);
        dml_pooled_bin last_columns =
            dml_roi_pooled_bin(region.x1, region.width, p->pooled_width - 1, p->pooled_width, f->width);
        pixel_box box = {first_columns.start, last_columns.end, first_rows.start, last_rows.end};
        uint64_t pixels = box.x1 > box.x0 && box.y1 > box.y0 ? (uint64_t)(box.x1 - box.x0) * (box.y1 - box.y0) : 0;
        if (pixels > 0 && pixels * ROI_LANES <= tile_floats) {
            transpose_to_tile(&f->input, plane, box, tile);
            uint64_t width = box.x1 - box.x0;
            tensor_view tiled = {{0, 1, width * ROI_LANES, ROI_LANES}, channel_lanes_make(tile, 1, false)};
            /* Offsets wrap around 2^64 to the box's origin: tile + 0 is (x0, y0). */
            pool_bins(f, &region, r, c0, lanes, &tiled, 0 - (box.y0 * tiled.strides[2] + box.x0 * tiled.strides[3]));
            return;
        }
    }
    pool_bins(f, &region, r, c0, lanes, &f->input, plane);
}

typedef struct pooling_plan {
    uint64_t tile_floats; /* NCHW FLOAT32: a tile of the whole image per thread (0: none) */
} pooling_plan;

/* Tiles beyond this per thread are not worth it: the bins are gathered. */
#define ROI_POOLING_TILE_LIMIT ((uint64_t)16 << 20)

static HRESULT plan_pooling(const DMLOperator* op, const DMLDevice* device, dml_plan* result, bool channels_last) {
    const dml_tensor* input = &op->inputs[DML_ROI_POOLING_INPUT].tensor;
    const dml_tensor* output = &op->outputs[DML_ROI_POOLING_OUTPUT].tensor;
    if (!roi_lanes_fit(input->strides[1]) || !roi_lanes_fit(output->strides[1])) return S_FALSE;
    if ((input->strides[1] == 1) != channels_last) return S_FALSE;
    pooling_plan* plan = dml_plan_state(result, sizeof *plan);
    if (plan == NULL) return E_OUTOFMEMORY;
    /* FLOAT16 keeps its raw bits through gathers; a FLOAT32 tile copies bits exactly. */
    if (!channels_last && input->type == DML_TENSOR_DATA_TYPE_FLOAT32)
        plan->tile_floats =
            roi_align64((uint64_t)input->sizes[2] * input->sizes[3] * ROI_LANES * sizeof(float)) / sizeof(float);
    if (plan->tile_floats * sizeof(float) > ROI_POOLING_TILE_LIMIT) plan->tile_floats = 0;
    result->temporary_size = (uint64_t)device->threads * plan->tile_floats * sizeof(float);
    return S_OK;
}

static HRESULT plan_pooling_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                                 dml_plan* result) {
    (void)flags;
    return plan_pooling(op, device, result, false);
}

static HRESULT plan_pooling_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                                 dml_plan* result) {
    (void)flags;
    return plan_pooling(op, device, result, true);
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
        .input = tensor_view_make(input, args->inputs[DML_ROI_POOLING_INPUT]),
        .output = channel_lanes_make(args->outputs[DML_ROI_POOLING_OUTPUT], output->strides[1], half),
    };
    roi_copy_strides(f.out_strides, output);
    const pooling_plan* plan = DML_PLAN_STATE(args, pooling_plan);
    uint32_t blocks = (f.channels + ROI_LANES - 1) / ROI_LANES;
    int64_t tasks = (int64_t)rois->sizes[2] * blocks;
    /* Bins differ in size: dynamic scheduling balances them; every output
     * is computed by one thread alone. */
#pragma omp parallel num_threads(dml_cpu_threads_for(dml_cpu_threads(args), (uint64_t)tasks, 1))
    {
        /* No temporary resource (NULL) without a tile. */
        float* tile =
            plan->tile_floats ? (float*)args->temporary + (size_t)dml_cpu_thread_index() * plan->tile_floats : NULL;
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < tasks; task++) {
            roi_task t = roi_task_at(task, rois->sizes[2], blocks, f.input.lanes.contiguous);
            pool_task(&f, t.roi, t.c0, f.channels - t.c0 < ROI_LANES ? f.channels - t.c0 : ROI_LANES, tile,
                      plan->tile_floats);
        }
    }
    return S_OK;
}

const dml_impl dml_cpu_roi_pooling_avx2_nchw = {"roi_pooling/avx2/nchw", DML_ISA_AVX2, plan_pooling_nchw, run_pooling};
const dml_impl dml_cpu_roi_pooling_avx2_nhwc = {"roi_pooling/avx2/nhwc", DML_ISA_AVX2, plan_pooling_nhwc, run_pooling};
