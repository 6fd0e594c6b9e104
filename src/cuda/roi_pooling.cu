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

/* An element as FLOAT32 for the comparison: binary16 by the GPU's exact
 * conversion on the device, by the software one on the host (same numbers). */
__host__ __device__ inline float widen(float value) { return value; }
__host__ __device__ inline float widen(uint16_t half) {
#ifdef __CUDA_ARCH__
    return dml_cuda_widen(half);
#else
    return dml_half_to_float(half);
#endif
}

/* The first maximal element of a bin in increasing (y, x) order, or +0.0 for
 * an empty bin (RP-3): a copy of its bits. at(y, x) returns the element. */
template <class T, class At>
__host__ __device__ __forceinline__ T bin_max(dml_pooled_bin rows, dml_pooled_bin columns, At at) {
    T best = T(0);
    float best_value = 0.0f;
    bool first = true;
    for (uint32_t y = rows.start; y < rows.end; y++) {
        for (uint32_t x = columns.start; x < columns.end; x++) {
            T value = at(y, x);
            if (first || dml_nan_aware_greater(widen(value), best_value)) {
                best = value;
                best_value = widen(value);
            }
            first = false;
        }
    }
    return best;
}

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
    const T* plane = input + region.batch * f.in_strides[0] + c * f.in_strides[1];
    T best = bin_max<T>(rows, columns,
                        [&](uint32_t y, uint32_t x) { return plane[y * f.in_strides[2] + x * f.in_strides[3]]; });
    uint64_t out = r * f.out_strides[0] + c * f.out_strides[1] + ph * f.out_strides[2] + pw * f.out_strides[3];
    /* A copy of the winning element's bits; +0.0 for an empty bin or an invalid ROI (RP-3, RP-5). */
    ((T*)f.output)[out] = best;
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
 * A persistent grid; block tasks are (chunk of channels, ROI), ROIs fastest
 * (the tasks running together read the same planes, from L2). Warp 0 puts
 * the task's bins in shared memory; then each warp takes one row of bins ph of
 * kWarpChannels channels at a time, its lanes across that row: lane
 * pw * L + k reads columns start + k, start + k + L, ... of bin pw, so that a
 * load of the warp is a stretch of one image row (a few sectors), not 32
 * scattered elements. Each lane takes the FMNMX of its columns over the bin's
 * rows, and the L lanes of a bin combine theirs by shuffles. Nonzero numbers
 * have a single encoding, so that maximum is the bits of the CPU's first
 * maximal element; a zero or NaN maximum (or an empty bin) takes the exact
 * scan of bin_max instead (pooled_value). */

constexpr unsigned kWarpChannels = 4; /* channels per warp step: independent loads in flight */
constexpr unsigned kTaskChannels = 32;

struct nchw_plan {
    roi_pooling_problem shape_only; /* pointers unset */
    uint32_t rois;
    uint32_t chunk, chunks; /* channels per task (a multiple of kWarpChannels), tasks per ROI */
    uint32_t lane_shift;    /* lanes per bin L = 1 << lane_shift, PW * L <= 32 */
    unsigned blocks;
};

/* The bins of ROI r into bins[0, PH + PW) (rows, then columns), those of
 * index first, first + step, ...; its image into *batch (first == 0). */
template <class T>
__host__ __device__ void roi_bins(const roi_pooling_problem& f, uint32_t r, uint32_t first, uint32_t step,
                                  dml_pooled_bin* bins, uint32_t* batch) {
    const uint32_t PH = f.params.pooled_height, PW = f.params.pooled_width;
    float values[5];
    for (uint32_t k = 0; k < 5; k++)
        values[k] = load_value((const T*)f.rois, r * f.roi_row_stride + k * f.roi_column_stride);
    dml_pooled_region region = dml_roi_pooled_region(values, f.batch, f.params.spatial_scale);
    for (uint32_t i = first; i < PH + PW; i += step) {
        dml_pooled_bin bin = {0, 0};
        if (region.valid)
            bin = i < PH ? dml_roi_pooled_bin(region.y1, region.height, i, PH, f.height)
                         : dml_roi_pooled_bin(region.x1, region.width, i - PH, PW, f.width);
        bins[i] = bin;
    }
    if (first == 0) *batch = region.batch; /* 0 for an invalid ROI: its bins are empty */
}

/* The FLOAT32 value a NaN-free maximum came from, as T (exact: it is one). */
__host__ __device__ inline float narrow(float value, float) { return value; }
__host__ __device__ inline uint16_t narrow(float value, uint16_t) {
#ifdef __CUDA_ARCH__
    uint16_t half;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(half) : "f"(value));
    return half;
#else
    return dml_float_to_half(value);
#endif
}

/* fmaxf's identity: a NaN operand yields the other one. */
__host__ __device__ inline float no_maximum() { return __builtin_nanf(""); }

/* One lane's part of a row of bins in K planes: the FMNMX of columns
 * x_begin, x_begin + step, ... < x_end over the rows; NaN where they are
 * all NaN or there are none. */
template <unsigned K, class T>
__host__ __device__ __forceinline__ void lane_maxima(const T* const planes[K], uint32_t width, dml_pooled_bin rows,
                                                     uint32_t x_begin, uint32_t x_end, uint32_t step, float maxima[K]) {
    DML_UNROLL
    for (unsigned j = 0; j < K; j++)
        maxima[j] = no_maximum();
    for (uint32_t y = rows.start; y < rows.end; y++) {
        const uint32_t row = y * width;
        for (uint32_t x = x_begin; x < x_end; x += step) {
            T values[K];
            DML_UNROLL
            for (unsigned j = 0; j < K; j++)
                values[j] = planes[j][row + x];
            DML_UNROLL
            for (unsigned j = 0; j < K; j++)
                maxima[j] = fmaxf(maxima[j], widen(values[j]));
        }
    }
}

/* The output of a bin whose elements' FMNMX is `maximum` (a bit-exact copy
 * of the first maximal element, as pool_element gives). */
template <class T>
__host__ __device__ T pooled_value(float maximum, const T* plane, uint32_t width, dml_pooled_bin rows,
                                   dml_pooled_bin columns) {
    if (maximum != 0.0f && maximum == maximum) return narrow(maximum, T());
    return bin_max<T>(rows, columns, [&](uint32_t y, uint32_t x) { return plane[y * width + x]; });
}

template <class T>
__global__ void __launch_bounds__(kThreads) roi_pooling_nchw(const roi_pooling_problem f, const nchw_plan n) {
    extern __shared__ dml_pooled_bin bins[]; /* PH rows, then PW columns */
    __shared__ uint32_t batch;
    const uint32_t PH = f.params.pooled_height, PW = f.params.pooled_width;
    const uint32_t plane_size = f.height * f.width;
    const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const uint32_t pw = lane >> n.lane_shift, k = lane & ((1u << n.lane_shift) - 1);
    const uint32_t items = PH * (n.chunk / kWarpChannels); /* (ph, channel group) per task */
    const uint64_t tasks = (uint64_t)n.rois * n.chunks;
    for (uint64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
        const uint32_t r = (uint32_t)(task % n.rois), c0 = (uint32_t)(task / n.rois) * n.chunk;
        const uint32_t c_last = (c0 + n.chunk < f.channels ? c0 + n.chunk : f.channels) - 1;
        __syncthreads(); /* the previous task is done with the bins */
        if (warp == 0) roi_bins<T>(f, r, lane, 32, bins, &batch);
        __syncthreads();
        const dml_pooled_bin columns = pw < PW ? bins[PH + pw] : dml_pooled_bin{0, 0};
        const T* image = (const T*)f.input + (uint64_t)batch * f.channels * plane_size;
        T* out = (T*)f.output + (uint64_t)r * f.channels * PH * PW;
        for (uint32_t item = warp; item < items; item += warps) {
            const uint32_t ph = item % PH, c = c0 + item / PH * kWarpChannels;
            const dml_pooled_bin rows = bins[ph];
            const T* planes[kWarpChannels];
            DML_UNROLL
            for (unsigned j = 0; j < kWarpChannels; j++) /* past the chunk: read, not stored */
                planes[j] = image + (uint64_t)(c + j < c_last ? c + j : c_last) * plane_size;
            float maxima[kWarpChannels];
            lane_maxima<kWarpChannels>(planes, f.width, rows, columns.start + k, columns.end, 1u << n.lane_shift,
                                       maxima);
            for (uint32_t offset = 1; offset < (1u << n.lane_shift); offset <<= 1) {
                DML_UNROLL
                for (unsigned j = 0; j < kWarpChannels; j++)
                    maxima[j] = fmaxf(maxima[j], __shfl_xor_sync(0xffffffffu, maxima[j], offset));
            }
            if (k == 0 && pw < PW) {
                DML_UNROLL
                for (unsigned j = 0; j < kWarpChannels; j++)
                    if (c + j <= c_last)
                        out[(uint64_t)(c + j) * PH * PW + ph * PW + pw] =
                            pooled_value(maxima[j], planes[j], f.width, rows, columns);
            }
        }
    }
}

size_t nchw_shared_bytes(const roi_pooling_problem& f) {
    return ((size_t)f.params.pooled_height + f.params.pooled_width) * sizeof(dml_pooled_bin);
}

/* The plan from the shapes alone (blocks unset): also what the host replay runs. */
HRESULT nchw_plan_make(const DMLOperator* op, nchw_plan* n) {
    const dml_tensor& input = op->inputs[DML_ROI_POOLING_INPUT].tensor;
    const dml_tensor& output = op->outputs[DML_ROI_POOLING_OUTPUT].tensor;
    if (!dml_cuda_packed_nchw(input) || !dml_cuda_packed_nchw(output)) return S_FALSE;
    const dml_roi_pooling_params& p = *(const dml_roi_pooling_params*)op->params;
    if ((uint64_t)input.sizes[2] * input.sizes[3] > UINT32_MAX) return S_FALSE; /* 32-bit offsets in a plane */
    if (p.pooled_width > 32) return S_FALSE;                                    /* a row of bins per warp */
    if (((uint64_t)p.pooled_height + p.pooled_width) * sizeof(dml_pooled_bin) > 32768) return S_FALSE;
    dml_kernel_args shapes_only = {};
    shapes_only.op = op;
    n->shape_only = roi_pooling_problem_make(&shapes_only);
    n->lane_shift = 0;
    while ((p.pooled_width << (n->lane_shift + 1)) <= 32)
        n->lane_shift++;
    const uint32_t channels = input.sizes[1];
    const uint32_t rounded = (channels + kWarpChannels - 1) / kWarpChannels * kWarpChannels;
    n->chunk = rounded < kTaskChannels ? rounded : kTaskChannels;
    n->rois = output.sizes[0];
    n->chunks = (channels + n->chunk - 1) / n->chunk;
    n->blocks = 0;
    return S_OK;
}

HRESULT plan_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    nchw_plan shape;
    HRESULT status = nchw_plan_make(op, &shape);
    if (status != S_OK) return status;
    const size_t shared_bytes = nchw_shared_bytes(shape.shape_only);
    uint64_t resident = op->inputs[DML_ROI_POOLING_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16
                            ? dml_cuda_resident_blocks(device, roi_pooling_nchw<uint16_t>, kThreads, shared_bytes)
                            : dml_cuda_resident_blocks(device, roi_pooling_nchw<float>, kThreads, shared_bytes);
    if (resident == 0) return S_FALSE; /* the strided kernel then */
    nchw_plan* n = (nchw_plan*)dml_plan_state(plan, sizeof(nchw_plan));
    if (n == nullptr) return E_OUTOFMEMORY;
    *n = shape;
    const uint64_t tasks = (uint64_t)n->rois * n->chunks;
    n->blocks = (unsigned)(tasks < resident ? tasks : resident);
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
    const size_t shared_bytes = nchw_shared_bytes(f);
    if (args->op->inputs[DML_ROI_POOLING_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16)
        roi_pooling_nchw<uint16_t><<<n.blocks, kThreads, shared_bytes, stream>>>(f, n);
    else
        roi_pooling_nchw<float><<<n.blocks, kThreads, shared_bytes, stream>>>(f, n);
    return dml_cuda_check_launch("roi_pooling_nchw");
}

} // namespace

const dml_impl dml_cuda_roi_pooling_generic = {"roi_pooling/cuda/strided", DML_ISA_GENERIC, nullptr, run_roi_pooling};
const dml_impl dml_cuda_roi_pooling_nchw = {"roi_pooling/cuda/nchw", DML_ISA_GENERIC, plan_nchw, run_nchw};
