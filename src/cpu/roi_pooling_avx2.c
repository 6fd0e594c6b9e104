/* ROI pooling with AVX2 + F16C, eight channels per vector (spec
 * roi_pooling.md §3).
 *
 * A bin's maximum is taken with vmaxps: max(value, best) keeps best on a tie
 * and when value is NaN, so from -inf it yields the first maximum of the
 * bin's numbers, which is the element the generic kernel keeps, bits
 * included. Two results need the generic kernel's exact scan and are
 * re-scanned with its rule (rare: the benchmark's data never has them):
 * -inf (the bin is all NaN, whose first NaN is the result, or its maximum is
 * -inf) and a zero (NCHW reduces columns before rows, and -0.0 ties +0.0).
 *
 * One task per (roi, block of 8 channels); the ROI's bins are resolved once
 * per task (roi_pooling_math.h).
 * - NCHW, rows contiguous along W: for each bin row, each plane's column
 *   maxima over the bin's rows with contiguous loads across the region, an
 *   8x8 transpose of those to channels-last, then every bin of the row over
 *   its columns for 8 channels at once: one vmaxps per 8 input elements and
 *   one transpose per 8 columns of a bin row, instead of a transpose per
 *   8 pixels.
 *   An output of DML_CPU_STREAM_BYTES or more is written with
 *   non-temporal stores, each task's 8 channels in one piece
 *   (lanes_stream_bins).
 * - Channels-last (channel stride 1): each element of a bin is a contiguous
 *   load of 8 channels.
 * Tasks are taken in chunks (roi_task_chunk). */
#include <string.h>

#include "../ops/roi_pooling_math.h"
#include "roi_lanes_avx2.h"

typedef struct pooling_problem {
    const dml_roi_pooling_params* params;
    uint32_t batch, channels, height, width;
    const void* rois;
    uint64_t roi_row_stride, roi_column_stride;
    bool half;
    uint64_t input_end; /* one past the input's last element */
    uint64_t out_strides[4];
    tensor_view input;
    channel_lanes output;
} pooling_problem;

/* One ROI resolved for a task: its region, the bins of its columns and the
 * columns any of them reads, [x_begin, x_end). */
typedef struct pooled_roi {
    uint32_t r;
    dml_pooled_region region;
    const dml_pooled_bin* columns;
    uint32_t x_begin, x_end;
} pooled_roi;

/* The generic kernel's scan of one bin of one channel (the plane at `plane`):
 * the winning element's raw bits. */
static uint32_t bin_bits_scanned(const pooling_problem* f, uint64_t plane, dml_pooled_bin rows,
                                 dml_pooled_bin columns) {
    const tensor_view* in = &f->input;
    bool found = false;
    float best = 0.0f;
    uint64_t best_offset = 0;
    for (uint32_t y = rows.start; y < rows.end; y++)
        for (uint32_t x = columns.start; x < columns.end; x++) {
            uint64_t offset = plane + y * in->strides[2] + x * in->strides[3];
            float value = roi_load(in->lanes.base, offset, f->half);
            if (!found || dml_nan_aware_greater(value, best)) {
                found = true;
                best = value;
                best_offset = offset;
            }
        }
    return f->half ? ((const uint16_t*)in->lanes.base)[best_offset] : ((const uint32_t*)in->lanes.base)[best_offset];
}

/* The raw bits of bin (ph, pw) of 8 channels from their vmaxps maxima
 * `best` (-inf upwards), re-scanned where they may differ from the generic
 * kernel's. */
static inline __m256i bin_bits(const pooling_problem* f, const pooled_roi* roi, uint32_t c0, uint32_t lanes,
                               uint32_t pw, dml_pooled_bin rows, __m256 best) {
    __m256i bits = lanes_value_bits(&f->output, best); /* FLOAT16 maxima are halves: converted exactly */
    __m256 suspect = _mm256_or_ps(_mm256_cmp_ps(best, _mm256_setzero_ps(), _CMP_EQ_OQ),
                                  _mm256_cmp_ps(best, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
    int rescan = _mm256_movemask_ps(suspect) & ((1 << lanes) - 1);
    if (__builtin_expect(rescan == 0, 1)) return bits;
    uint32_t lane_bits[ROI_LANES];
    _mm256_storeu_si256((__m256i*)lane_bits, bits);
    uint64_t plane = view_offset(&f->input, roi->region.batch, c0, 0, 0);
    for (uint32_t i = 0; i < lanes; i++)
        if (rescan >> i & 1)
            lane_bits[i] = bin_bits_scanned(f, plane + i * f->input.strides[1], rows, roi->columns[pw]);
    return _mm256_loadu_si256((const __m256i*)lane_bits);
}

static uint64_t output_offset(const pooling_problem* f, uint32_t r, uint32_t c, uint32_t ph, uint32_t pw) {
    return r * f->out_strides[0] + c * f->out_strides[1] + ph * f->out_strides[2] + pw * f->out_strides[3];
}

/* Channels-last: every bin, each element a load of 8 channels, stored as
 * computed. */
static inline __attribute__((always_inline)) void pool_channels_last(const pooling_problem* f, const pooled_roi* roi,
                                                                     uint32_t c0, uint32_t lanes, load_mode mode) {
    const dml_roi_pooling_params* p = f->params;
    const tensor_view* in = &f->input;
    uint64_t plane = view_offset(in, roi->region.batch, c0, 0, 0);
    for (uint32_t ph = 0; ph < p->pooled_height; ph++) {
        dml_pooled_bin rows = dml_roi_pooled_bin(roi->region.y1, roi->region.height, ph, p->pooled_height, f->height);
        for (uint32_t pw = 0; pw < p->pooled_width; pw++) {
            dml_pooled_bin columns = roi->columns[pw];
            __m256i bits = _mm256_setzero_si256(); /* +0.0 for an empty bin (RP-3) */
            if (rows.start < rows.end && columns.start < columns.end) {
                __m256 best = _mm256_set1_ps(-INFINITY);
                for (uint32_t y = rows.start; y < rows.end; y++)
                    for (uint32_t x = columns.start; x < columns.end; x++)
                        best = _mm256_max_ps(
                            lanes_load_as(&in->lanes, plane + y * in->strides[2] + x * in->strides[3], lanes, mode),
                            best);
                bits = bin_bits(f, roi, c0, lanes, pw, rows, best);
            }
            lanes_store_bits(&f->output, output_offset(f, roi->r, c0, ph, pw), lanes, bits);
        }
    }
}

/* Column maxima over `rows` rows of `lanes` planes, 8 columns from `at`
 * (the first plane's first row), transposed: maxima[j] is column j's 8
 * channels. The vector may read columns past the region (never used) but
 * never past the tensor; missing planes give -inf. */
static inline __attribute__((always_inline)) void column_maxima(const pooling_problem* f, uint64_t at, uint32_t lanes,
                                                                uint32_t rows, bool half, __m256 maxima[ROI_LANES]) {
    const tensor_view* in = &f->input;
    for (int i = 0; i < ROI_LANES; i++)
        maxima[i] = _mm256_set1_ps(-INFINITY);
    uint64_t last = at + (lanes - 1) * in->strides[1] + (rows - 1) * in->strides[2];
    if (last + ROI_LANES <= f->input_end) {
        /* One row of every plane per step: 8 independent maxima. */
        for (uint32_t y = 0; y < rows; y++, at += in->strides[2])
            for (uint32_t i = 0; i < lanes; i++) {
                uint64_t offset = at + i * in->strides[1];
                __m256 value =
                    half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)((const uint16_t*)in->lanes.base + offset)))
                         : _mm256_loadu_ps((const float*)in->lanes.base + offset);
                maxima[i] = _mm256_max_ps(value, maxima[i]);
            }
    } else { /* the tensor's last vector: element by element */
        for (uint32_t y = 0; y < rows; y++, at += in->strides[2])
            for (uint32_t i = 0; i < lanes; i++) {
                uint64_t offset = at + i * in->strides[1];
                float values[ROI_LANES] = {0};
                for (uint64_t k = 0; k < ROI_LANES && offset + k < f->input_end; k++)
                    values[k] = roi_load(in->lanes.base, offset + k, half);
                maxima[i] = _mm256_max_ps(_mm256_loadu_ps(values), maxima[i]);
            }
    }
    transpose_8x8(maxima);
}

/* NCHW: every bin into results[ph * PW + pw][8] (raw bits), through the
 * transposed column maxima of each bin row (`pitch` x 8 channels, `pitch`
 * >= the region's width rounded up to 8). */
static void pool_planes(const pooling_problem* f, const pooled_roi* roi, uint32_t c0, uint32_t lanes, float* transposed,
                        uint32_t* results) {
    const dml_roi_pooling_params* p = f->params;
    const tensor_view* in = &f->input;
    uint64_t plane = view_offset(in, roi->region.batch, c0, 0, 0);
    uint32_t vectors = (roi->x_end - roi->x_begin + ROI_LANES - 1) / ROI_LANES;
    for (uint32_t ph = 0; ph < p->pooled_height; ph++) {
        uint32_t* row_results = results + (uint64_t)ph * p->pooled_width * ROI_LANES;
        dml_pooled_bin rows = dml_roi_pooled_bin(roi->region.y1, roi->region.height, ph, p->pooled_height, f->height);
        if (rows.start == rows.end || vectors == 0) { /* every bin empty: +0.0 (RP-3) */
            memset(row_results, 0, (size_t)p->pooled_width * ROI_LANES * sizeof *row_results);
            continue;
        }
        for (uint32_t v = 0; v < vectors; v++) {
            uint64_t at = plane + rows.start * in->strides[2] + roi->x_begin + v * ROI_LANES;
            __m256 maxima[ROI_LANES];
            /* Specialized: the common full block, and the type. */
            if (lanes == ROI_LANES && f->half)
                column_maxima(f, at, ROI_LANES, rows.end - rows.start, true, maxima);
            else if (lanes == ROI_LANES)
                column_maxima(f, at, ROI_LANES, rows.end - rows.start, false, maxima);
            else
                column_maxima(f, at, lanes, rows.end - rows.start, f->half, maxima);
            for (int j = 0; j < ROI_LANES; j++)
                _mm256_storeu_ps(transposed + (v * ROI_LANES + j) * ROI_LANES, maxima[j]);
        }
        for (uint32_t pw = 0; pw < p->pooled_width; pw++) {
            dml_pooled_bin columns = roi->columns[pw];
            __m256i bits = _mm256_setzero_si256(); /* +0.0 for an empty bin */
            if (columns.start < columns.end) {
                __m256 best = _mm256_set1_ps(-INFINITY);
                for (uint32_t x = columns.start; x < columns.end; x++)
                    best = _mm256_max_ps(_mm256_loadu_ps(transposed + (uint64_t)(x - roi->x_begin) * ROI_LANES), best);
                bits = bin_bits(f, roi, c0, lanes, pw, rows, best);
            }
            _mm256_storeu_si256((__m256i*)(row_results + pw * ROI_LANES), bits);
        }
    }
}

typedef struct pooling_plan {
    uint64_t column_bins;  /* bins per thread for the columns of a ROI */
    uint64_t pitch;        /* NCHW: columns of transposed maxima (0: channels-last) */
    uint64_t result_bytes; /* NCHW: a ROI's results in 8 channels */
    bool stream;           /* NCHW: full blocks of the output streamed (lanes_stream_bins) */
    uint64_t thread_bytes;
} pooling_plan;

static void pool_task(const pooling_problem* f, const pooling_plan* plan, uint32_t r, uint32_t c0, uint32_t lanes,
                      char* scratch) {
    const dml_roi_pooling_params* p = f->params;
    float values[5];
    for (uint32_t k = 0; k < 5; k++)
        values[k] = roi_load(f->rois, r * f->roi_row_stride + k * f->roi_column_stride, f->half);
    dml_pooled_bin* columns = (dml_pooled_bin*)scratch;
    pooled_roi roi = {r, dml_roi_pooled_region(values, f->batch, p->spatial_scale), columns, 0, 0};
    if (roi.region.valid) {
        for (uint32_t pw = 0; pw < p->pooled_width; pw++)
            columns[pw] = dml_roi_pooled_bin(roi.region.x1, roi.region.width, pw, p->pooled_width, f->width);
        /* Bin bounds grow with the bin index. */
        roi.x_begin = columns[0].start;
        roi.x_end = columns[p->pooled_width - 1].end;
    }
    if (plan->pitch > 0) { /* NCHW */
        if (!plan->stream) /* streamed lines are never read (a prefetch would fetch them) */
            lanes_prefetch_bins(&f->output, output_offset(f, r, c0, 0, 0), f->out_strides, p->pooled_height,
                                p->pooled_width, lanes);
        float* transposed = (float*)(columns + plan->column_bins);
        uint32_t* results = (uint32_t*)(transposed + plan->pitch * ROI_LANES);
        if (roi.region.valid)
            pool_planes(f, &roi, c0, lanes, transposed, results);
        else /* +0.0 everywhere (RP-5) */
            memset(results, 0, (size_t)p->pooled_height * p->pooled_width * ROI_LANES * sizeof *results);
        if (plan->stream && lanes == ROI_LANES)
            lanes_stream_bins(&f->output, output_offset(f, r, c0, 0, 0), p->pooled_height * p->pooled_width, results,
                              (char*)results + plan->result_bytes);
        else
            lanes_write_bins(&f->output, output_offset(f, r, c0, 0, 0), f->out_strides, p->pooled_height,
                             p->pooled_width, lanes, results);
    } else if (!roi.region.valid) {
        for (uint32_t ph = 0; ph < p->pooled_height; ph++)
            for (uint32_t pw = 0; pw < p->pooled_width; pw++)
                lanes_store_bits(&f->output, output_offset(f, r, c0, ph, pw), lanes, _mm256_setzero_si256());
    } else if (lanes == ROI_LANES && f->half) {
        pool_channels_last(f, &roi, c0, lanes, LOAD_F16);
    } else if (lanes == ROI_LANES) {
        pool_channels_last(f, &roi, c0, lanes, LOAD_F32);
    } else {
        pool_channels_last(f, &roi, c0, lanes, LOAD_GENERAL);
    }
}

/* Scratch beyond this per thread is not worth it: the generic kernel takes the problem. */
#define ROI_POOLING_SCRATCH_LIMIT ((uint64_t)4 << 20)

static HRESULT plan_pooling(const DMLOperator* op, const DMLDevice* device, dml_plan* result, bool channels_last) {
    const dml_tensor* input = &op->inputs[DML_ROI_POOLING_INPUT].tensor;
    const dml_roi_pooling_params* p = op->params;
    if ((input->strides[1] == 1) != channels_last) return S_FALSE;
    if (!channels_last && input->strides[3] != 1) return S_FALSE; /* rows must be contiguous */
    pooling_plan plan = {.column_bins =
                             roi_align64((uint64_t)p->pooled_width * sizeof(dml_pooled_bin)) / sizeof(dml_pooled_bin)};
    plan.thread_bytes = plan.column_bins * sizeof(dml_pooled_bin);
    if (!channels_last) {
        /* The transposed column maxima of a bin row: the region's columns
         * in whole vectors, at most W rounded up to 8; the results of every
         * bin, padded to 8 bins; for a streamed output, their staging copy. */
        plan.pitch = dml_round_up_u64(input->sizes[3], ROI_LANES);
        uint64_t bins = (uint64_t)p->pooled_height * p->pooled_width;
        plan.result_bytes = dml_round_up_u64(bins, ROI_LANES) * ROI_LANES * sizeof(float);
        plan.thread_bytes += plan.pitch * ROI_LANES * sizeof(float) + plan.result_bytes;
        const dml_tensor* output = &op->outputs[DML_ROI_POOLING_OUTPUT].tensor;
        plan.stream = lanes_bins_contiguous(output->strides, p->pooled_height, p->pooled_width, ROI_LANES) &&
                      roi_output_streams(output);
        if (plan.stream) plan.thread_bytes += roi_align64(lanes_staging_bytes(bins));
    }
    if (plan.thread_bytes > ROI_POOLING_SCRATCH_LIMIT) return S_FALSE;
    pooling_plan* state = dml_plan_state(result, sizeof *state);
    if (state == NULL) return E_OUTOFMEMORY;
    *state = plan;
    result->temporary_size = (uint64_t)device->threads * plan.thread_bytes;
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
        .input_end = 1,
        .input = tensor_view_make(input, args->inputs[DML_ROI_POOLING_INPUT]),
        .output = channel_lanes_make(args->outputs[DML_ROI_POOLING_OUTPUT], output->strides[1], half),
    };
    for (int i = 0; i < 4; i++)
        f.input_end += (uint64_t)(input->sizes[i] - 1) * input->strides[i];
    roi_copy_strides(f.out_strides, output);
    const pooling_plan* plan = DML_PLAN_STATE(args, pooling_plan);
    uint32_t blocks = (f.channels + ROI_LANES - 1) / ROI_LANES;
    int64_t tasks = (int64_t)rois->sizes[2] * blocks;
    /* Bins differ in size: dynamic scheduling balances them (roi_task_chunk);
     * every output is computed by one thread alone. */
    int threads = dml_cpu_threads_for(dml_cpu_threads(args), (uint64_t)tasks, 1);
#pragma omp parallel num_threads(threads)
    {
        char* scratch = (char*)args->temporary + (size_t)dml_cpu_thread_index() * plan->thread_bytes;
#pragma omp for schedule(dynamic, roi_task_chunk(tasks, threads)) nowait
        for (int64_t task = 0; task < tasks; task++) {
            roi_task t = roi_task_at(task, rois->sizes[2], blocks, f.input.lanes.contiguous);
            pool_task(&f, plan, t.roi, t.c0, f.channels - t.c0 < ROI_LANES ? f.channels - t.c0 : ROI_LANES, scratch);
        }
        _mm_sfence(); /* the streamed outputs visible before the dispatch returns */
    }
    return S_OK;
}

const dml_impl dml_cpu_roi_pooling_avx2_nchw = {"roi_pooling/avx2/nchw", DML_ISA_AVX2, plan_pooling_nchw, run_pooling};
const dml_impl dml_cpu_roi_pooling_avx2_nhwc = {"roi_pooling/avx2/nhwc", DML_ISA_AVX2, plan_pooling_nhwc, run_pooling};
