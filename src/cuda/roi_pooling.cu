/* ROI pooling on CUDA (spec roi_pooling.md §3), with exactly the CPU
 * backend's results (src/cpu/roi_pooling.c): the region and bin math is the
 * shared src/ops/roi_pooling_math.h, and each output element is a bit-exact
 * copy of the first maximal element of its bin in increasing (y, x) order (or
 * +0.0 for an empty bin or an invalid ROI).
 *
 * One thread per output element, pw fastest, so neighbouring threads read
 * neighbouring bins of one input plane. Compiled with -fmad=false like every
 * ROI file (cmake/cuda.cmake), although the only arithmetic here, one FLOAT32
 * product per corner, cannot contract anyway. */
#include "../core/half.h"
#include "../ops/roi.h"
#include "../ops/roi_pooling_math.h"
#include "cuda.h"

namespace {

constexpr unsigned kThreads = 256;

struct roi_pooling_problem {
    dml_roi_pooling_params params;
    uint32_t batch, channels, height, width;
    const void* input;
    uint64_t in_strides[4];
    const void* rois;
    uint64_t roi_row_stride, roi_column_stride;
    void* output;
    uint64_t out_strides[4];
    uint64_t count; /* output elements */
};

__host__ __device__ float load_value(const float* base, uint64_t offset) { return base[offset]; }
__host__ __device__ float load_value(const uint16_t* base, uint64_t offset) { return dml_half_to_float(base[offset]); }

/* Output element i; T: float or uint16_t (binary16 bits). A host and device
 * function: the kernel is a loop around it, and a host build can replay it
 * (tests/test_cuda_roi_replay.cu). */
template <class T> __host__ __device__ void pool_element(const roi_pooling_problem& f, uint64_t i) {
    const dml_roi_pooling_params& p = f.params;
    const T* input = (const T*)f.input;
    const T* rois = (const T*)f.rois;
    uint32_t pw = (uint32_t)(i % p.pooled_width);
    uint64_t rest = i / p.pooled_width;
    uint32_t ph = (uint32_t)(rest % p.pooled_height);
    rest /= p.pooled_height;
    uint32_t c = (uint32_t)(rest % f.channels);
    uint32_t r = (uint32_t)(rest / f.channels);

    float values[5];
    for (uint32_t k = 0; k < 5; k++)
        values[k] = load_value(rois, r * f.roi_row_stride + k * f.roi_column_stride);
    dml_pooled_region region = dml_roi_pooled_region(values, f.batch, p.spatial_scale);
    dml_pooled_bin rows = {0, 0}, columns = {0, 0};
    if (region.valid) {
        rows = dml_roi_pooled_bin(region.y1, region.height, ph, p.pooled_height, f.height);
        columns = dml_roi_pooled_bin(region.x1, region.width, pw, p.pooled_width, f.width);
    }
    uint64_t plane = region.batch * f.in_strides[0] + c * f.in_strides[1];
    bool found = false;
    float best = 0.0f;
    uint64_t best_offset = 0;
    for (uint32_t y = rows.start; y < rows.end; y++) {
        for (uint32_t x = columns.start; x < columns.end; x++) {
            uint64_t offset = plane + y * f.in_strides[2] + x * f.in_strides[3];
            float value = load_value(input, offset);
            if (!found || dml_nan_aware_greater(value, best)) {
                found = true;
                best = value;
                best_offset = offset;
            }
        }
    }
    uint64_t out = r * f.out_strides[0] + c * f.out_strides[1] + ph * f.out_strides[2] + pw * f.out_strides[3];
    /* A copy of the winning element's bits; +0.0 for an empty bin or an invalid ROI (RP-3, RP-5). */
    ((T*)f.output)[out] = found ? input[best_offset] : T(0);
}

template <class T> __global__ void roi_pooling_kernel(const roi_pooling_problem f) {
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < f.count;
         i += (uint64_t)gridDim.x * blockDim.x)
        pool_element<T>(f, i);
}

template <class T> HRESULT launch(const dml_kernel_args* args, const roi_pooling_problem& f) {
    roi_pooling_kernel<T><<<dml_cuda_blocks(args, f.count, kThreads), kThreads, 0, dml_cuda_stream(args)>>>(f);
    return dml_cuda_check_launch("roi_pooling_kernel");
}

roi_pooling_problem roi_pooling_problem_make(const dml_kernel_args* args) {
    const DMLOperator* op = args->op;
    const dml_tensor* input = &op->inputs[DML_ROI_POOLING_INPUT].tensor;
    const dml_tensor* rois = &op->inputs[DML_ROI_POOLING_ROI].tensor;
    const dml_tensor* output = &op->outputs[DML_ROI_POOLING_OUTPUT].tensor;
    roi_pooling_problem f = {};
    f.params = *(const dml_roi_pooling_params*)op->params;
    f.batch = input->sizes[0];
    f.channels = input->sizes[1];
    f.height = input->sizes[2];
    f.width = input->sizes[3];
    f.input = args->inputs[DML_ROI_POOLING_INPUT];
    f.rois = args->inputs[DML_ROI_POOLING_ROI];
    f.roi_row_stride = rois->strides[2];
    f.roi_column_stride = rois->strides[3];
    f.output = args->outputs[DML_ROI_POOLING_OUTPUT];
    for (int i = 0; i < 4; i++) {
        f.in_strides[i] = input->strides[i];
        f.out_strides[i] = output->strides[i];
    }
    f.count = (uint64_t)output->sizes[0] * output->sizes[1] * output->sizes[2] * output->sizes[3];
    return f;
}

HRESULT run_roi_pooling(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    roi_pooling_problem f = roi_pooling_problem_make(args);
    return args->op->inputs[DML_ROI_POOLING_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16
               ? launch<uint16_t>(args, f)
               : launch<float>(args, f);
}

/* ---- "roi_pooling/cuda/nchw": packed NCHW input and output ----
 * One block per (ROI, chunk of channels). The ROI's region and bins (the
 * divisions of roi_pooling_math.h) are computed once into shared memory.
 * The max over a bin is then taken in two passes through shared memory:
 * (1) for each row of the ROI's box and each column bin, the first maximal
 * element of the row's columns (threads along the rows: neighbouring threads
 * read neighbouring input); (2) for each output, the first maximal of those
 * over the bin's rows (threads along the outputs: coalesced writes). The
 * first maximum over rows of each row's first maximum is the first maximum
 * in increasing (y, x) order, as dml_nan_aware_greater is a strict weak order
 * (NaN below every number): the same bits as pool_element. */

struct nchw_plan {
    roi_pooling_problem shape_only; /* pointers unset */
    dml_cuda_roi_tasks tasks;
    uint32_t bins_bytes;          /* pooled_height + pooled_width bins, 16-byte aligned */
    uint32_t row_maxima_capacity; /* elements; holds at least one channel's height * pooled_width */
};

template <class T>
__global__ void __launch_bounds__(kThreads) roi_pooling_nchw(const roi_pooling_problem f, const nchw_plan n) {
    extern __shared__ __align__(16) unsigned char shared[];
    dml_pooled_bin* bins = (dml_pooled_bin*)shared; /* rows [0, PH), then columns [PH, PH + PW) */
    T* row_maxima = (T*)(shared + n.bins_bytes);    /* [channel][box row][column bin] */
    __shared__ uint32_t region_batch;
    const uint32_t PH = f.params.pooled_height, PW = f.params.pooled_width;
    const uint32_t bins_per_channel = PH * PW;
    const dml_cuda_roi_tasks& t = n.tasks;
    const uint64_t tasks = (uint64_t)(f.count / ((uint64_t)f.channels * bins_per_channel)) * t.chunks;
    const uint64_t plane_size = (uint64_t)f.height * f.width;
    for (uint64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
        uint32_t r = (uint32_t)(task / t.chunks), c0 = (uint32_t)(task % t.chunks) * t.channel_chunk;
        __syncthreads(); /* the previous task is done with bins and row_maxima */
        if (threadIdx.x < PH + PW) {
            float values[5];
            for (uint32_t k = 0; k < 5; k++)
                values[k] = load_value((const T*)f.rois, r * f.roi_row_stride + k * f.roi_column_stride);
            dml_pooled_region region = dml_roi_pooled_region(values, f.batch, f.params.spatial_scale);
            for (uint32_t i = threadIdx.x; i < PH + PW; i += blockDim.x) {
                dml_pooled_bin bin = {0, 0};
                if (region.valid)
                    bin = i < PH ? dml_roi_pooled_bin(region.y1, region.height, i, PH, f.height)
                                 : dml_roi_pooled_bin(region.x1, region.width, i - PH, PW, f.width);
                bins[i] = bin;
            }
            if (threadIdx.x == 0) region_batch = region.batch;
        }
        __syncthreads();
        /* Bin bounds never decrease with the bin index: the box of rows is
         * [first bin's start, last bin's end), at most the input's height. */
        const uint32_t box_top = bins[0].start, box_rows = bins[PH - 1].end - box_top;
        const uint32_t per_channel = box_rows * PW;
        const uint32_t c_end = c0 + t.channel_chunk < f.channels ? c0 + t.channel_chunk : f.channels;
        /* Channels at a time: as many as row_maxima holds, in equal parts. */
        const uint32_t fit = per_channel == 0 ? c_end - c0 : n.row_maxima_capacity / per_channel;
        const uint32_t parts = (c_end - c0 + fit - 1) / fit, step = (c_end - c0 + parts - 1) / parts;
        for (uint32_t c_first = c0; c_first < c_end; c_first += step) {
            const uint32_t count = c_first + step < c_end ? step : c_end - c_first;
            const T* planes = (const T*)f.input + ((uint64_t)region_batch * f.channels + c_first) * plane_size;
            if (c_first != c0) __syncthreads(); /* pass 2 of the previous channels is done with row_maxima */
            for (dml_cuda_block_walker w(PW, box_rows ? box_rows : 1); per_channel != 0 && w.outer < count; w.next()) {
                dml_pooled_bin columns = bins[PH + w.inner];
                const T* row = planes + w.outer * plane_size + (uint64_t)(box_top + w.middle) * f.width;
                T best = T(0);
                for (uint32_t x = columns.start; x < columns.end; x++) {
                    T value = row[x];
                    if (x == columns.start || dml_nan_aware_greater(dml_cuda_widen(value), dml_cuda_widen(best)))
                        best = value;
                }
                row_maxima[(w.outer * box_rows + w.middle) * PW + w.inner] = best;
            }
            __syncthreads();
            T* out = (T*)f.output + ((uint64_t)r * f.channels + c_first) * bins_per_channel;
            for (dml_cuda_block_walker w(PW, PH); w.outer < count; w.next()) {
                dml_pooled_bin rows = bins[w.middle], columns = bins[PH + w.inner];
                /* +0.0 for an empty bin or an invalid ROI (RP-3, RP-5). */
                T best = T(0);
                if (columns.start < columns.end) {
                    const uint32_t first_row = w.outer * box_rows - box_top; /* + y: the row in row_maxima */
                    for (uint32_t y = rows.start; y < rows.end; y++) {
                        T value = row_maxima[(first_row + y) * PW + w.inner];
                        if (y == rows.start || dml_nan_aware_greater(dml_cuda_widen(value), dml_cuda_widen(best)))
                            best = value;
                    }
                }
                out[(w.outer * PH + w.middle) * PW + w.inner] = best;
            }
        }
    }
}

HRESULT plan_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    const dml_tensor& input = op->inputs[DML_ROI_POOLING_INPUT].tensor;
    const dml_tensor& output = op->outputs[DML_ROI_POOLING_OUTPUT].tensor;
    if (!dml_cuda_packed_nchw(input) || !dml_cuda_packed_nchw(output)) return S_FALSE;
    const dml_roi_pooling_params& p = *(const dml_roi_pooling_params*)op->params;
    const size_t element = input.type == DML_TENSOR_DATA_TYPE_FLOAT16 ? 2 : 4;
    const size_t bins_bytes = (((size_t)p.pooled_height + p.pooled_width) * sizeof(dml_pooled_bin) + 15) & ~(size_t)15;
    /* Room for the row maxima of several channels, at least of one whole-height box. */
    const size_t one_channel = (size_t)input.sizes[2] * p.pooled_width * element;
    const size_t row_maxima_bytes = one_channel > 24576 ? one_channel : 24576;
    if (bins_bytes + row_maxima_bytes > 48 * 1024 || (uint64_t)input.sizes[2] * input.sizes[3] > UINT32_MAX)
        return S_FALSE;
    nchw_plan* n = (nchw_plan*)dml_plan_state(plan, sizeof(nchw_plan));
    if (n == nullptr) return E_OUTOFMEMORY;
    dml_kernel_args shapes_only = {};
    shapes_only.op = op;
    shapes_only.device = device;
    n->shape_only = roi_pooling_problem_make(&shapes_only);
    n->tasks = dml_cuda_plan_roi_tasks(device, output.sizes[0], input.sizes[1], p.pooled_height * p.pooled_width, 2048);
    n->bins_bytes = (uint32_t)bins_bytes;
    n->row_maxima_capacity = (uint32_t)(row_maxima_bytes / element);
    return S_OK;
}

HRESULT run_nchw(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const nchw_plan& n = *DML_PLAN_STATE(args, nchw_plan);
    roi_pooling_problem f = n.shape_only;
    f.input = args->inputs[DML_ROI_POOLING_INPUT];
    f.rois = args->inputs[DML_ROI_POOLING_ROI];
    f.output = args->outputs[DML_ROI_POOLING_OUTPUT];
    cudaStream_t stream = dml_cuda_stream(args);
    const bool half = args->op->inputs[DML_ROI_POOLING_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16;
    const size_t shared_bytes = n.bins_bytes + (size_t)n.row_maxima_capacity * (half ? 2 : 4);
    if (half)
        roi_pooling_nchw<uint16_t><<<n.tasks.blocks, kThreads, shared_bytes, stream>>>(f, n);
    else
        roi_pooling_nchw<float><<<n.tasks.blocks, kThreads, shared_bytes, stream>>>(f, n);
    return dml_cuda_check_launch("roi_pooling_nchw");
}

} // namespace

const dml_impl dml_cuda_roi_pooling_generic = {"roi_pooling/cuda/strided", DML_ISA_GENERIC, nullptr, run_roi_pooling};
const dml_impl dml_cuda_roi_pooling_nchw = {"roi_pooling/cuda/nchw", DML_ISA_GENERIC, plan_nchw, run_nchw};
