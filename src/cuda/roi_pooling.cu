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
#include <string.h>

#include "../core/half.h"
#include "../ops/roi.h"
#include "../ops/roi_pooling_math.h"
#include "cuda.h"

#include <cooperative_groups.h>
#include <cuda_fp16.h> /* after the headers above: its type `half` would shadow their parameters */

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

/* An element or ROI value as FLOAT32: binary16 by the GPU's exact
 * conversion on the device, by the software one on the host (same numbers;
 * a NaN stays a NaN, which the comparisons and the ROI math only test for). */
__host__ __device__ inline float widen(float value) { return value; }
__host__ __device__ inline float widen(uint16_t bits) {
#ifdef __CUDA_ARCH__
    return dml_cuda_widen(bits);
#else
    return dml_half_to_float(bits);
#endif
}

/* ROI r's row [BatchID, x1, y1, x2, y2] as FLOAT32. */
template <class T> __host__ __device__ void roi_row(const roi_pooling_problem& f, uint32_t r, float values[5]) {
    for (uint32_t k = 0; k < 5; k++)
        values[k] = widen(((const T*)f.rois)[r * f.roi_row_stride + k * f.roi_column_stride]);
}

/* ROI r's region. */
template <class T> __host__ __device__ dml_pooled_region roi_region(const roi_pooling_problem& f, uint32_t r) {
    float values[5];
    roi_row<T>(f, r, values);
    return dml_roi_pooled_region(values, f.batch, f.params.spatial_scale);
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
    uint32_t pw = (uint32_t)(i % p.pooled_width);
    uint64_t rest = i / p.pooled_width;
    uint32_t ph = (uint32_t)(rest % p.pooled_height);
    rest /= p.pooled_height;
    uint32_t c = (uint32_t)(rest % f.channels);
    uint32_t r = (uint32_t)(rest / f.channels);

    const dml_pooled_region region = roi_region<T>(f, r);
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

/* A problem (its shapes) with a dispatch's tensors. */
roi_pooling_problem bound_problem(roi_pooling_problem f, const dml_kernel_args* args) {
    f.input = args->inputs[DML_ROI_POOLING_INPUT];
    f.rois = args->inputs[DML_ROI_POOLING_ROI];
    f.output = args->outputs[DML_ROI_POOLING_OUTPUT];
    return f;
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
    f.roi_row_stride = rois->strides[2];
    f.roi_column_stride = rois->strides[3];
    for (int i = 0; i < 4; i++) {
        f.in_strides[i] = input->strides[i];
        f.out_strides[i] = output->strides[i];
    }
    f.count = (uint64_t)output->sizes[0] * output->sizes[1] * output->sizes[2] * output->sizes[3];
    return bound_problem(f, args);
}

HRESULT run_roi_pooling(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    roi_pooling_problem f = roi_pooling_problem_make(args);
    return args->op->inputs[DML_ROI_POOLING_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16
               ? launch<uint16_t>(args, f)
               : launch<float>(args, f);
}

/* ---- "roi_pooling/cuda/nchw", "/nhwc": packed input and output ----
 * A persistent grid; block tasks are (ROI, chunk of channels). The ROI's
 * bins (the divisions of roi_pooling_math.h) are computed once per task into
 * shared memory, one task ahead: warp 0 computes the next task's bins while
 * the other warps pool the current one. Each thread then takes one (ph, pw)
 * of kChannelsPerThread channels, c, c + groups, c + 2 groups, ... of the
 * chunk, so that a warp's stores are contiguous and a thread has that many
 * independent loads in flight. The bin's maximum is one FMNMX per element:
 * nonzero numbers have a single encoding, so it is the bits of the CPU's
 * first maximal element; a zero or NaN maximum (or an empty bin) takes the
 * exact scan of bin_max instead (pooled_value). Channels-last (input and
 * output), the channel is the fastest across threads, then pw, then ph: a
 * warp's loads and stores are contiguous channels. */

constexpr unsigned kChannelsPerThread = 4;

struct packed_plan {
    roi_pooling_problem shape_only; /* pointers unset */
    bool channels_last;
    uint32_t rois;
    uint32_t groups; /* threads per (ph, pw) of a task; a task has groups * kChannelsPerThread channels */
    uint32_t chunks; /* tasks per ROI */
    unsigned blocks;
};

/* Bin i of a region: row bin i (i < PH), else column bin i - PH; empty for
 * an invalid ROI. */
__host__ __device__ inline dml_pooled_bin region_bin(const roi_pooling_problem& f, const dml_pooled_region& region,
                                                     uint32_t i) {
    const uint32_t PH = f.params.pooled_height, PW = f.params.pooled_width;
    dml_pooled_bin bin = {0, 0};
    if (region.valid)
        bin = i < PH ? dml_roi_pooled_bin(region.y1, region.height, i, PH, f.height)
                     : dml_roi_pooled_bin(region.x1, region.width, i - PH, PW, f.width);
    return bin;
}

/* The bins of ROI r into bins[0, PH + PW) (rows, then columns), those of
 * index first, first + step, ...; its image into *batch (first == 0). */
template <class T>
__host__ __device__ void roi_bins(const roi_pooling_problem& f, uint32_t r, uint32_t first, uint32_t step,
                                  dml_pooled_bin* bins, uint32_t* batch) {
    const uint32_t PH = f.params.pooled_height, PW = f.params.pooled_width;
    const dml_pooled_region region = roi_region<T>(f, r);
    for (uint32_t i = first; i < PH + PW; i += step)
        bins[i] = region_bin(f, region, i);
    if (first == 0) *batch = region.batch; /* 0 for an invalid ROI: its bins are empty */
}

/* The offset of (y, x) in a channel's plane: y W + x (NCHW), C times that
 * (channels-last); fewer than 2^32 elements. */
template <bool ChannelsLast> struct plane_index {
    uint32_t width, channels;
    __host__ __device__ uint32_t operator()(uint32_t y, uint32_t x) const {
        const uint32_t i = y * width + x;
        return ChannelsLast ? i * channels : i;
    }
};

/* fmaxf's identity: a NaN operand yields the other one. */
__host__ __device__ inline float no_maximum() { return __builtin_nanf(""); }

/* The FMNMX of a bin's elements in K planes; NaN where they are all NaN or
 * there are none. */
template <unsigned K, class T, class Index>
__host__ __device__ __forceinline__ void bin_maxima(const T* const planes[K], Index at, dml_pooled_bin rows,
                                                    dml_pooled_bin columns, float maxima[K]) {
    DML_UNROLL
    for (unsigned j = 0; j < K; j++)
        maxima[j] = no_maximum();
    for (uint32_t y = rows.start; y < rows.end; y++) {
        for (uint32_t x = columns.start; x < columns.end; x++) {
            const uint32_t offset = at(y, x);
            T values[K];
            DML_UNROLL
            for (unsigned j = 0; j < K; j++)
                values[j] = planes[j][offset];
            DML_UNROLL
            for (unsigned j = 0; j < K; j++)
                maxima[j] = fmaxf(maxima[j], widen(values[j]));
        }
    }
}

/* The output of a bin whose elements' FMNMX is `maximum` (a bit-exact copy
 * of the first maximal element, as pool_element gives). */
template <class T, class Index>
__host__ __device__ T pooled_value(float maximum, const T* plane, Index at, dml_pooled_bin rows,
                                   dml_pooled_bin columns) {
    /* A nonzero number is exactly a T value: dml_cuda_narrow gives its bits
     * (never a NaN here, so never its software path). */
    if (maximum != 0.0f && maximum == maximum) return dml_cuda_narrow(maximum, T());
    return bin_max<T>(rows, columns, [&](uint32_t y, uint32_t x) { return plane[at(y, x)]; });
}

/* One thread's outputs: bin (ph, pw) of channels c, c + groups, ... (those
 * up to c_last) of the task's ROI; image: its batch's first element, out:
 * the ROI's. */
template <class T, bool ChannelsLast>
__host__ __device__ __forceinline__ void
pool_bin_outputs(const roi_pooling_problem& f, const packed_plan& n, const T* image, T* out, dml_pooled_bin rows,
                 dml_pooled_bin columns, uint32_t c, uint32_t c_last, uint32_t ph, uint32_t pw) {
    const uint32_t PW = f.params.pooled_width, per_channel = f.params.pooled_height * PW;
    const plane_index<ChannelsLast> at = {f.width, f.channels};
    /* Elements from one channel to the next, in the image and in the output. */
    const uint64_t in_step = ChannelsLast ? 1 : (uint64_t)f.height * f.width, out_step = ChannelsLast ? 1 : per_channel;
    const uint32_t bin = ph * PW + pw;
    out += ChannelsLast ? (uint64_t)bin * f.channels : bin;
    const T* plane[kChannelsPerThread];
    DML_UNROLL
    for (unsigned j = 0; j < kChannelsPerThread; j++) {
        uint32_t channel = c + j * n.groups;
        plane[j] = image + (channel < c_last ? channel : c_last) * in_step; /* past C: read, not stored */
    }
    float maxima[kChannelsPerThread];
    bin_maxima<kChannelsPerThread>(plane, at, rows, columns, maxima);
    DML_UNROLL
    for (unsigned j = 0; j < kChannelsPerThread; j++) {
        uint32_t channel = c + j * n.groups;
        if (channel <= c_last) out[channel * out_step] = pooled_value(maxima[j], plane[j], at, rows, columns);
    }
}

template <class T, bool ChannelsLast>
__global__ void __launch_bounds__(kThreads) roi_pooling_packed(const roi_pooling_problem f, const packed_plan n) {
    extern __shared__ dml_pooled_bin bins[]; /* two buffers of PH + PW bins */
    __shared__ uint32_t batch[2];
    const uint32_t PH = f.params.pooled_height, PW = f.params.pooled_width;
    const uint32_t per_channel = PH * PW, chunk = n.groups * kChannelsPerThread;
    const uint64_t tasks = (uint64_t)n.rois * n.chunks;
    const uint32_t plane_size = f.height * f.width, lane = threadIdx.x % 32;
    if (blockIdx.x < tasks && threadIdx.x < 32)
        roi_bins<T>(f, (uint32_t)(blockIdx.x / n.chunks), lane, 32, bins, &batch[0]);
    __syncthreads();
    unsigned buffer = 0;
    for (uint64_t task = blockIdx.x; task < tasks; task += gridDim.x, buffer ^= 1) {
        const dml_pooled_bin* current = bins + buffer * (PH + PW);
        const uint64_t next = task + gridDim.x;
        if (next < tasks && threadIdx.x < 32)
            roi_bins<T>(f, (uint32_t)(next / n.chunks), lane, 32, bins + (buffer ^ 1) * (PH + PW), &batch[buffer ^ 1]);
        const uint32_t r = (uint32_t)(task / n.chunks), c0 = (uint32_t)(task % n.chunks) * chunk;
        const uint32_t c_last = (c0 + chunk < f.channels ? c0 + chunk : f.channels) - 1;
        const T* image = (const T*)f.input + (uint64_t)batch[buffer] * f.channels * plane_size;
        T* out = (T*)f.output + (uint64_t)r * f.channels * per_channel;
        if constexpr (ChannelsLast) { /* inner: the channel group, middle: pw, outer: ph */
            for (dml_cuda_block_walker w(n.groups, PW); w.outer < PH; w.next())
                pool_bin_outputs<T, true>(f, n, image, out, current[w.outer], current[PH + w.middle], c0 + w.inner,
                                          c_last, w.outer, w.middle);
        } else { /* inner: pw, middle: ph, outer: the channel group */
            for (dml_cuda_block_walker w(PW, PH); w.outer < n.groups; w.next())
                pool_bin_outputs<T, false>(f, n, image, out, current[w.middle], current[PH + w.inner], c0 + w.outer,
                                           c_last, w.middle, w.inner);
        }
        __syncthreads(); /* the next task's bins are in; this task's buffer is free */
    }
}

size_t packed_shared_bytes(const roi_pooling_problem& f) {
    return 2 * ((size_t)f.params.pooled_height + f.params.pooled_width) * sizeof(dml_pooled_bin);
}

/* The plan from the shapes alone (blocks unset): also what the host replay runs. */
HRESULT packed_plan_make(const DMLOperator* op, bool channels_last, packed_plan* n) {
    const dml_tensor& input = op->inputs[DML_ROI_POOLING_INPUT].tensor;
    const dml_tensor& output = op->outputs[DML_ROI_POOLING_OUTPUT].tensor;
    bool (*packed)(const dml_tensor&) = channels_last ? dml_cuda_packed_nhwc : dml_cuda_packed_nchw;
    if (!packed(input) || !packed(output)) return S_FALSE;
    const dml_roi_pooling_params& p = *(const dml_roi_pooling_params*)op->params;
    const uint64_t plane_elements = (uint64_t)input.sizes[2] * input.sizes[3] * (channels_last ? input.sizes[1] : 1);
    if (plane_elements > UINT32_MAX) return S_FALSE; /* plane_index's 32-bit offsets */
    n->channels_last = channels_last;
    if (2 * ((uint64_t)p.pooled_height + p.pooled_width) * sizeof(dml_pooled_bin) > 32768) return S_FALSE;
    dml_kernel_args shapes_only = {};
    shapes_only.op = op;
    n->shape_only = roi_pooling_problem_make(&shapes_only);
    const uint32_t channels = input.sizes[1];
    const uint64_t per_channel = (uint64_t)p.pooled_height * p.pooled_width;
    /* NCHW: as many (ph, pw, group) threads as fit one pass of the block;
     * channels-last: up to a block's threads across the channels. No more
     * groups than the channels need. */
    uint32_t groups = channels_last ? kThreads : per_channel >= kThreads ? 1 : (uint32_t)(kThreads / per_channel);
    uint32_t needed = (channels + kChannelsPerThread - 1) / kChannelsPerThread;
    n->groups = groups < needed ? groups : needed;
    uint32_t chunk = n->groups * kChannelsPerThread;
    n->rois = output.sizes[0];
    n->chunks = (channels + chunk - 1) / chunk;
    n->blocks = 0;
    return S_OK;
}

/* roi_pooling_packed<T, channels_last>. */
template <class T> const void* packed_kernel(bool channels_last) {
    return channels_last ? (const void*)roi_pooling_packed<T, true> : (const void*)roi_pooling_packed<T, false>;
}

HRESULT plan_packed(const DMLOperator* op, const DMLDevice* device, bool channels_last, dml_plan* plan) {
    packed_plan shape;
    HRESULT status = packed_plan_make(op, channels_last, &shape);
    if (status != S_OK) return status;
    const size_t shared_bytes = packed_shared_bytes(shape.shape_only);
    const bool is_half = op->inputs[DML_ROI_POOLING_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16;
    const void* kernel = is_half ? packed_kernel<uint16_t>(channels_last) : packed_kernel<float>(channels_last);
    uint64_t resident = dml_cuda_resident_blocks(device, kernel, kThreads, shared_bytes);
    if (resident == 0) return S_FALSE; /* the strided kernel then */
    packed_plan* n = (packed_plan*)dml_plan_state(plan, sizeof(packed_plan));
    if (n == nullptr) return E_OUTOFMEMORY;
    *n = shape;
    const uint64_t tasks = (uint64_t)n->rois * n->chunks;
    n->blocks = (unsigned)(tasks < resident ? tasks : resident);
    return S_OK;
}

HRESULT plan_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_packed(op, device, false, plan);
}

HRESULT plan_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_packed(op, device, true, plan);
}

template <class T>
void launch_packed(const roi_pooling_problem& f, const packed_plan& n, size_t shared_bytes, cudaStream_t stream) {
    if (n.channels_last)
        roi_pooling_packed<T, true><<<n.blocks, kThreads, shared_bytes, stream>>>(f, n);
    else
        roi_pooling_packed<T, false><<<n.blocks, kThreads, shared_bytes, stream>>>(f, n);
}

HRESULT run_packed(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const packed_plan& n = *DML_PLAN_STATE(args, packed_plan);
    const roi_pooling_problem f = bound_problem(n.shape_only, args);
    cudaStream_t stream = dml_cuda_stream(args);
    const size_t shared_bytes = packed_shared_bytes(f);
    if (args->op->inputs[DML_ROI_POOLING_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16)
        launch_packed<uint16_t>(f, n, shared_bytes, stream);
    else
        launch_packed<float>(f, n, shared_bytes, stream);
    return dml_cuda_check_launch("roi_pooling_packed");
}

/* ---- "roi_pooling/cuda/staged_nchw", "/staged_nhwc": an image's channels in shared memory ----
 * The kernels above re-read every ROI's region from L2 (in the benchmark
 * about 300 MB for 8.4 MB of input, one load round per element). Here a
 * block task is (share, image, chunk of K channels): the block copies the
 * image's K channels into shared memory once, interleaved per pixel
 * ([y][x][k]: one 16-byte load gives 4 FLOAT32 or 8 FLOAT16 channels), then
 * pools from it the image's ROIs of its share: those whose rank among the
 * image's ROIs (in list order; an invalid ROI counts as image 0's, with empty
 * bins) is the share modulo the shares, so that the shares of an image hold
 * the same number of ROIs whatever the list's order. The block scans the
 * list in rounds of a ROI a thread (ballots give the ranks) and keeps the
 * regions of its share's first `kept` ROIs, then computes their bins (16-bit
 * bounds) into shared memory and pools them all in one pass; a share of more
 * ROIs takes another scan for each next `kept` (the benchmark keeps its
 * whole share: one scan of two rounds, two barriers and one tail for all
 * its ROIs). A thread takes one (ROI, ph, pw) bin for the K channels: one
 * FMNMX per element and channel (FLOAT16: one HMNMX2 per pair, which keeps
 * the bits: both skip NaN, and a nonzero number has one encoding), and as
 * above the exact scan (here of the staged copy) only for a zero or NaN
 * maximum or an empty bin. The chunk is staged during the first round,
 * while the ROI rows load. Where the shares are an even number, a cluster
 * of two blocks takes two consecutive shares of one chunk and stages it
 * once: each block loads half the pixels and stores them into both blocks'
 * shared memory (distributed shared memory), then a cluster barrier. */

constexpr uint32_t kStageBytes = 64 * 1024; /* the preferred staged chunk: 3 blocks per H100 multiprocessor */
constexpr uint32_t kWarps = kThreads / 32;
constexpr uint32_t kStageWords = 16;    /* words a thread loads before it stores them */
constexpr uint32_t kMinKept = 64;       /* ROIs a block keeps at least */
constexpr uint32_t kMaxBinsPerRoi = 64; /* PH + PW */

struct staged_plan {
    roi_pooling_problem shape_only; /* pointers unset */
    bool channels_last;
    uint32_t words;          /* 32-bit words per staged pixel: 1, 2, 4 or 8 */
    uint32_t channels;       /* K per pixel: words * 4 / element size */
    uint32_t pitch;          /* staged pixels per row: W rounded up to odd (rows start in other banks) */
    uint32_t chunks;         /* chunks of K channels */
    uint32_t rois;           /* R */
    uint32_t shares;         /* tasks: shares * N * chunks; cluster shares of a chunk, then chunks, then images */
    uint32_t cluster;        /* blocks a cluster (1 or 2): consecutive shares of one chunk, staged once */
    uint32_t row_magic;      /* pixel / W = pixel * row_magic >> 32 where W is even (the pitch W + 1), else 0 */
    uint32_t kept;           /* ROIs whose regions and bins a block holds */
    uint32_t regions_offset; /* bytes: staged pixels, regions, bins (start | end << 16), ROI indices */
    uint32_t bins_offset, indices_offset, shared_bytes;
    unsigned blocks;
};

/* Pixel words as 16-, 8- or 4-byte accesses (on the host as memcpy). */
template <unsigned Words> __host__ __device__ __forceinline__ void copy_words(uint32_t* to, const uint32_t* from) {
#ifdef __CUDA_ARCH__
    if constexpr (Words % 4 == 0) {
        DML_UNROLL
        for (unsigned i = 0; i < Words / 4; i++)
            ((uint4*)to)[i] = ((const uint4*)from)[i];
    } else if constexpr (Words == 2) {
        *(uint2*)to = *(const uint2*)from;
    } else {
        *to = *from;
    }
#else
    memcpy(to, from, Words * sizeof(uint32_t));
#endif
}

/* fmaxf's identity as a word: NaN (two binary16 NaN). */
__host__ __device__ constexpr uint32_t no_maximum_word(float) { return 0x7FC00000u; }
__host__ __device__ constexpr uint32_t no_maximum_word(uint16_t) { return 0x7E007E00u; }

/* The NaN-skipping maximum of the word's FLOAT32 or of its binary16 pair
 * (__hmax2: NaN only where both are NaN). */
__host__ __device__ inline uint32_t word_max(uint32_t a, uint32_t b, float) {
    float x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    x = fmaxf(x, y);
    memcpy(&a, &x, sizeof a);
    return a;
}
__host__ __device__ inline uint32_t word_max(uint32_t a, uint32_t b, uint16_t) {
#ifdef __CUDA_ARCH__
    __half2 x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    x = __hmax2(x, y);
    memcpy(&a, &x, sizeof a);
    return a;
#else
    uint32_t result = 0;
    for (unsigned shift = 0; shift < 32; shift += 16) {
        uint16_t p = (uint16_t)(a >> shift), q = (uint16_t)(b >> shift);
        float x = dml_half_to_float(p), y = dml_half_to_float(q);
        result |= (uint32_t)(x != x || y > x ? q : p) << shift;
    }
    return result;
#endif
}

/* Whether a maximum is the bits of the CPU's first maximal element: a
 * nonzero number (not NaN, which stands for none). */
__host__ __device__ inline bool is_nonzero_number(float value) { return value != 0.0f && value == value; }
__host__ __device__ inline bool is_nonzero_number(uint16_t bits) {
    const uint32_t magnitude = bits & 0x7FFFu;
    return magnitude != 0 && magnitude <= 0x7C00u;
}

/* Whether every element of the maxima words is a nonzero number (the same
 * test). On the device an ordered comparison with zero, false for a zero and
 * for NaN: one instruction a word (FLOAT16 both halves at once; 8 integer
 * ones a word before). */
template <unsigned Words> __host__ __device__ inline bool all_nonzero_numbers(const uint32_t words[Words], float) {
    bool all = true;
    DML_UNROLL
    for (unsigned w = 0; w < Words; w++) {
#ifdef __CUDA_ARCH__
        all &= fabsf(__uint_as_float(words[w])) > 0.0f;
#else
        all &= (words[w] & 0x7FFFFFFFu) - 1u < 0x7F800000u;
#endif
    }
    return all;
}
template <unsigned Words> __host__ __device__ inline bool all_nonzero_numbers(const uint32_t words[Words], uint16_t) {
#ifdef __CUDA_ARCH__
    uint32_t all = ~0u;
    DML_UNROLL
    for (unsigned w = 0; w < Words; w++) {
        uint32_t nonzero; /* set.ne: ordered, per half 0xFFFF or 0 */
        asm("set.ne.u32.f16x2 %0, %1, %2;" : "=r"(nonzero) : "r"(words[w]), "r"(0u));
        all &= nonzero;
    }
    return all == ~0u;
#else
    bool all = true;
    for (unsigned w = 0; w < Words; w++)
        all &= (words[w] & 0x7FFFu) - 1u < 0x7C00u && (words[w] >> 16 & 0x7FFFu) - 1u < 0x7C00u;
    return all;
#endif
}

/* An element's bits in the low bits of a word, and back. */
__host__ __device__ inline uint32_t element_bits(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}
__host__ __device__ inline uint32_t element_bits(uint16_t value) { return value; }
template <class T> __host__ __device__ inline T element_of(uint32_t bits) {
    T value;
    if constexpr (sizeof(T) == sizeof(bits)) {
        memcpy(&value, &bits, sizeof value);
    } else {
        value = (T)bits;
    }
    return value;
}

/* Element `index` of the staged copy (a T array). */
template <class T> __host__ __device__ inline T staged_element(const uint32_t* stage, uint32_t index) {
    T value;
    memcpy(&value, (const char*)stage + (size_t)index * sizeof(T), sizeof value);
    return value;
}

/* Pixel `pixel` of the image's channels c0 .. c0 + K - 1 as staged words
 * (channels past C repeat the last one: read, never stored). `whole`:
 * channels-last with C a multiple of K and the tensors aligned to the
 * pixel's vectors (run_staged), so that the K channels are one load. */
template <class T, unsigned Words, bool ChannelsLast>
__host__ __device__ __forceinline__ void load_pixel(const roi_pooling_problem& f, const T* image, uint32_t c0,
                                                    uint32_t pixel, bool whole, uint32_t words[Words]) {
    constexpr unsigned K = Words * sizeof(uint32_t) / sizeof(T);
    if (ChannelsLast && whole) {
        copy_words<Words>(words, (const uint32_t*)(image + (uint64_t)pixel * f.channels + c0));
        return;
    }
    const uint64_t plane = (uint64_t)f.height * f.width;
    DML_UNROLL
    for (unsigned w = 0; w < Words; w++)
        words[w] = 0;
    DML_UNROLL
    for (unsigned k = 0; k < K; k++) {
        const uint32_t c = c0 + k < f.channels ? c0 + k : f.channels - 1;
        const T value = image[ChannelsLast ? (uint64_t)pixel * f.channels + c : c * plane + pixel];
        words[k * sizeof(T) / 4] |= element_bits(value) << (k * sizeof(T) % 4 * 8);
    }
}

/* Where pixel `pixel` (y W + x) is staged: its first word, at y pitch + x,
 * which is the pixel itself where W is odd (the pitch) and pixel + y where W
 * is even (pitch W + 1). y by a multiplication: m = floor(2^32 / W) + 1
 * makes pixel m / 2^32 exceed pixel / W by less than 1 / W where pixel W <
 * 2^32 (both are below 2^16: staged_plan_make), so its floor is y; a
 * division took about 20 instructions a pixel. */
template <unsigned Words>
__host__ __device__ inline uint32_t staged_offset(const roi_pooling_problem&, const staged_plan& n, uint32_t pixel) {
    return (pixel + (uint32_t)((uint64_t)pixel * n.row_magic >> 32)) * Words;
}

__host__ __device__ inline uint32_t pack_bin(dml_pooled_bin bin) { return bin.start | bin.end << 16; }
__host__ __device__ inline dml_pooled_bin unpack_bin(uint32_t bin) { return {bin & 0xFFFFu, bin >> 16}; }

/* The outputs of bin (ph, pw) of ROI r, channels c0 .. c0 + K - 1 (those
 * below C), from the staged copy. */
template <class T, unsigned Words, bool ChannelsLast>
__host__ __device__ __forceinline__ void
pool_staged_bin(const roi_pooling_problem& f, const staged_plan& n, const uint32_t* stage, dml_pooled_bin rows,
                dml_pooled_bin columns, uint32_t r, uint32_t c0, uint32_t ph, uint32_t pw, bool whole) {
    constexpr unsigned K = Words * sizeof(uint32_t) / sizeof(T);
    uint32_t maxima[Words];
    DML_UNROLL
    for (unsigned w = 0; w < Words; w++)
        maxima[w] = no_maximum_word(T());
    for (uint32_t y = rows.start; y < rows.end; y++) {
        const uint32_t* row = stage + (size_t)y * n.pitch * Words;
        if constexpr (ChannelsLast && Words <= 4) {
            /* Quads of columns, those past the bin's end not loaded (NaN,
             * which the maximum skips): a row's loads issued together, and
             * no branches for the remainder that lanes take apart. Faster
             * channels-last (the NCHW kernels: as fast at FLOAT16, slower at
             * FLOAT32; round 12). */
            for (uint32_t x = columns.start; x < columns.end; x += 4) {
                uint32_t values[4][Words];
                DML_UNROLL
                for (unsigned i = 0; i < 4; i++) {
                    if (i == 0 || x + i < columns.end) {
                        copy_words<Words>(values[i], row + (x + i) * Words);
                    } else {
                        DML_UNROLL
                        for (unsigned w = 0; w < Words; w++)
                            values[i][w] = no_maximum_word(T());
                    }
                }
                DML_UNROLL
                for (unsigned i = 0; i < 4; i++) {
                    DML_UNROLL
                    for (unsigned w = 0; w < Words; w++)
                        maxima[w] = word_max(maxima[w], values[i][w], T());
                }
            }
        } else {
            for (uint32_t x = columns.start; x < columns.end; x++) {
                uint32_t values[Words];
                copy_words<Words>(values, row + x * Words);
                DML_UNROLL
                for (unsigned w = 0; w < Words; w++)
                    maxima[w] = word_max(maxima[w], values[w], T());
            }
        }
    }
    const uint32_t PW = f.params.pooled_width, per_channel = f.params.pooled_height * PW, bin = ph * PW + pw;
    T* out = (T*)f.output + (ChannelsLast ? ((uint64_t)r * per_channel + bin) * f.channels + c0
                                          : ((uint64_t)r * f.channels + c0) * per_channel + bin);
    const uint32_t step = ChannelsLast ? 1 : per_channel;
    /* The common case, K channels of C whose maxima are all nonzero numbers:
     * the maxima are the outputs, with no test per channel. */
    if (c0 + K <= f.channels && all_nonzero_numbers<Words>(maxima, T())) {
        if (ChannelsLast && whole) {
            copy_words<Words>((uint32_t*)out, maxima);
        } else {
            DML_UNROLL
            for (unsigned k = 0; k < K; k++)
                out[k * step] = element_of<T>(maxima[k * sizeof(T) / 4] >> (k * sizeof(T) % 4 * 8));
        }
        return;
    }
    uint32_t words[Words] = {};
    DML_UNROLL
    for (unsigned k = 0; k < K; k++) {
        const unsigned word = k * sizeof(T) / 4, shift = k * sizeof(T) % 4 * 8;
        T best = element_of<T>(maxima[word] >> shift);
        if (!is_nonzero_number(best) && c0 + k < f.channels)
            best = bin_max<T>(rows, columns, [&](uint32_t y, uint32_t x) {
                return staged_element<T>(stage, (y * n.pitch + x) * K + k);
            });
        if (ChannelsLast && whole)
            words[word] |= element_bits(best) << shift;
        else if (c0 + k < f.channels)
            out[k * step] = best;
    }
    if (ChannelsLast && whole) copy_words<Words>((uint32_t*)out, words);
}

/* A task's image b, first channel c0 and share. */
struct staged_task {
    uint32_t b, c0, share;
};

__host__ __device__ inline staged_task staged_task_of(const roi_pooling_problem& f, const staged_plan& n,
                                                      uint64_t task) {
    const uint64_t group = task / n.cluster, rest = group / n.chunks;
    return {(uint32_t)(rest % f.batch), (uint32_t)(group % n.chunks) * n.channels,
            (uint32_t)(rest / f.batch * n.cluster + task % n.cluster)};
}

/* How many of the ranks [0, rank) are the share's (rank % shares == share). */
__host__ __device__ inline uint32_t share_ranks_below(uint32_t rank, uint32_t share, uint32_t shares) {
    return (uint32_t)(((uint64_t)rank + shares - 1 - share) / shares);
}

/* Whether a region is image b's (an invalid ROI counts as image 0's: its
 * bins are empty). */
__host__ __device__ inline bool region_of_image(const dml_pooled_region& region, uint32_t b) {
    return (region.valid ? region.batch : 0) == b;
}

/* A kept ROI's region: what its bins need, width 0 for an invalid ROI. */
struct kept_region {
    int64_t x1, y1, width, height;
};

__host__ __device__ inline kept_region kept_region_of(const dml_pooled_region& region) {
    return {region.x1, region.y1, region.valid ? region.width : 0, region.height};
}

/* Bin i of a kept region as region_bin gives it, as start | end << 16; the
 * divisions in 32 bits where they fit (the same quotients). */
__host__ __device__ inline uint32_t staged_bin(const roi_pooling_problem& f, const kept_region& region, uint32_t i) {
    const uint32_t PH = f.params.pooled_height, PW = f.params.pooled_width;
    const bool row = i < PH;
    const int64_t first = row ? region.y1 : region.x1, length = row ? region.height : region.width;
    const uint32_t index = row ? i : i - PH, count = row ? PH : PW, extent = row ? f.height : f.width;
    if (region.width == 0) return 0; /* an invalid ROI: empty bins */
    if (length > UINT16_MAX) return pack_bin(dml_roi_pooled_bin(first, length, index, count, extent));
    /* index < count <= 64, length < 2^16: (index + 1) length + count - 1 < 2^32. */
    const int64_t start = first + (int64_t)(index * (uint32_t)length / count);
    const int64_t end = first + (int64_t)(((index + 1) * (uint32_t)length + count - 1) / count);
    return pack_bin({start < 0        ? 0u
                     : start > extent ? extent
                                      : (uint32_t)start,
                     end < 0        ? 0u
                     : end > extent ? extent
                                    : (uint32_t)end});
}

/* `stage` in the shared memory of the cluster's block `rank`: a 32-bit
 * address of the shared::cluster window. */
__device__ __forceinline__ uint32_t cluster_address(const uint32_t* stage, uint32_t rank) {
    uint32_t address;
    asm("mapa.shared::cluster.u32 %0, %1, %2;"
        : "=r"(address)
        : "r"((uint32_t)__cvta_generic_to_shared(stage)), "r"(rank));
    return address;
}

/* A staged pixel's words into the block's copy of the chunk (word `offset`)
 * and, in a cluster (of two), into the partner's (`partner`: its copy's
 * cluster_address). */
template <unsigned Words>
__device__ __forceinline__ void store_staged(const staged_plan& n, uint32_t* stage, uint32_t partner, uint32_t offset,
                                             const uint32_t* words) {
    copy_words<Words>(stage + offset, words);
    if (n.cluster == 1) return;
    const uint32_t to = partner + offset * (uint32_t)sizeof(uint32_t);
    if constexpr (Words % 4 == 0) {
        DML_UNROLL
        for (unsigned i = 0; i < Words; i += 4)
            asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(to + i * 4), "r"(words[i]),
                         "r"(words[i + 1]), "r"(words[i + 2]), "r"(words[i + 3])
                         : "memory");
    } else if constexpr (Words == 2) {
        asm volatile("st.shared::cluster.v2.u32 [%0], {%1, %2};" ::"r"(to), "r"(words[0]), "r"(words[1]) : "memory");
    } else {
        asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(to), "r"(words[0]) : "memory");
    }
}

/* Pixel `pixel` of the chunk's K planes (NCHW) as staged words. */
template <class T, unsigned Words>
__device__ __forceinline__ void pack_pixel(const T* const planes[], uint32_t pixel, uint32_t words[Words]) {
    constexpr unsigned K = Words * sizeof(uint32_t) / sizeof(T);
    DML_UNROLL
    for (unsigned w = 0; w < Words; w++)
        words[w] = 0;
    DML_UNROLL
    for (unsigned k = 0; k < K; k++)
        words[k * sizeof(T) / 4] |= element_bits(planes[k][pixel]) << (k * sizeof(T) % 4 * 8);
}

/* The block copies its part of the image's chunk of K channels from c0 into
 * `stage`: all of it, or in a cluster its range of the pixels, into every
 * block's copy (two blocks: half the loads from L2 each). A thread copies
 * kStageWords words at a time, their loads all in flight before the
 * first store. Up to 4 words a pixel, whole rounds of kStagePixels pixels
 * have no test between their loads (a test per pixel had the compiler wait
 * for each pixel's loads before it issued the next one's), then a pixel at
 * a time; NCHW reads the K planes through a pointer each (a load per channel
 * and pixel at an immediate offset). 8 words a pixel: a test per pixel (the
 * other way spilled registers). The partner's address is computed once (a
 * remainder and a loop a pixel before). */
template <class T, unsigned Words, bool ChannelsLast>
__device__ __forceinline__ void stage_chunk(const roi_pooling_problem& f, const staged_plan& n, const T* image,
                                            uint32_t c0, bool whole, uint32_t* stage) {
    constexpr unsigned K = Words * sizeof(uint32_t) / sizeof(T);
    constexpr uint32_t kStagePixels = kStageWords / Words;
    const uint32_t pixels = f.height * f.width, rank = blockIdx.x % n.cluster; /* the block's rank in the cluster */
    const uint32_t end = (uint32_t)((uint64_t)pixels * (rank + 1) / n.cluster);
    uint32_t first = (uint32_t)((uint64_t)pixels * rank / n.cluster) + threadIdx.x;
    /* Clusters are of two blocks (plan_staged): the partner is the other rank. */
    const uint32_t partner = n.cluster > 1 ? cluster_address(stage, rank ^ 1) : 0;
    if constexpr (Words > 4) {
        for (; first < end; first += kStagePixels * kThreads) {
            uint32_t words[kStagePixels][Words];
            DML_UNROLL
            for (uint32_t u = 0; u < kStagePixels; u++)
                if (first + u * kThreads < end)
                    load_pixel<T, Words, ChannelsLast>(f, image, c0, first + u * kThreads, whole, words[u]);
            DML_UNROLL
            for (uint32_t u = 0; u < kStagePixels; u++)
                if (first + u * kThreads < end)
                    store_staged<Words>(n, stage, partner, staged_offset<Words>(f, n, first + u * kThreads), words[u]);
        }
    } else {
        const T* planes[K]; /* NCHW; channels past C repeat the last one (read, never stored) */
        DML_UNROLL
        for (unsigned k = 0; k < K; k++)
            planes[k] = image + (uint64_t)(c0 + k < f.channels ? c0 + k : f.channels - 1) * pixels;
        for (; first + (kStagePixels - 1) * kThreads < end; first += kStagePixels * kThreads) {
            uint32_t words[kStagePixels][Words];
            const T* at[K]; /* the planes at `first` */
            DML_UNROLL
            for (unsigned k = 0; k < K; k++)
                at[k] = planes[k] + first;
            DML_UNROLL
            for (uint32_t u = 0; u < kStagePixels; u++) {
                if constexpr (ChannelsLast)
                    load_pixel<T, Words, true>(f, image, c0, first + u * kThreads, whole, words[u]);
                else
                    pack_pixel<T, Words>(at, u * kThreads, words[u]);
            }
            DML_UNROLL
            for (uint32_t u = 0; u < kStagePixels; u++)
                store_staged<Words>(n, stage, partner, staged_offset<Words>(f, n, first + u * kThreads), words[u]);
        }
        for (; first < end; first += kThreads) {
            uint32_t words[Words];
            if constexpr (ChannelsLast)
                load_pixel<T, Words, true>(f, image, c0, first, whole, words);
            else
                pack_pixel<T, Words>(planes, first, words);
            store_staged<Words>(n, stage, partner, staged_offset<Words>(f, n, first), words);
        }
    }
}

/* The bins of the `count` kept ROIs, then their outputs (a barrier before
 * each, and after: the kept ROIs' memory is free again). */
template <class T, unsigned Words, bool ChannelsLast>
__device__ __forceinline__ void pool_kept(const roi_pooling_problem& f, const staged_plan& n, const uint32_t* stage,
                                          const kept_region* regions, uint32_t* bins, const uint32_t* indices,
                                          uint32_t count, uint32_t c0, bool whole) {
    const uint32_t PH = f.params.pooled_height, PW = f.params.pooled_width, per_roi = PH + PW;
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < count * per_roi; i += blockDim.x)
        bins[i] = staged_bin(f, regions[i / per_roi], i % per_roi);
    __syncthreads();
    for (dml_cuda_block_walker w(PW, PH); w.outer < count; w.next()) {
        const uint32_t* roi_bins = bins + w.outer * per_roi;
        pool_staged_bin<T, Words, ChannelsLast>(f, n, stage, unpack_bin(roi_bins[w.middle]),
                                                unpack_bin(roi_bins[PH + w.inner]), indices[w.outer], c0, w.middle,
                                                w.inner, whole);
    }
    __syncthreads();
}

template <class T, unsigned Words, bool ChannelsLast>
__global__ void __launch_bounds__(kThreads, 3)
    roi_pooling_staged(const roi_pooling_problem f, const staged_plan n, bool whole) {
    extern __shared__ uint4 shared[];
    /* By round parity: a round's counts are still read after the next
     * round's barrier, not after the one after. */
    __shared__ uint32_t warp_counts[2][kWarps];
    uint32_t* stage = (uint32_t*)shared;
    kept_region* regions = (kept_region*)((char*)shared + n.regions_offset);
    uint32_t* bins = (uint32_t*)((char*)shared + n.bins_offset);
    uint32_t* indices = (uint32_t*)((char*)shared + n.indices_offset);
    const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const uint64_t tasks = (uint64_t)n.shares * f.batch * n.chunks;
    /* Every block of the cluster runs before any stores into another's shared memory. */
    if (n.cluster > 1) cooperative_groups::this_cluster().sync();
    unsigned parity = 0;
    for (uint64_t t = blockIdx.x; t < tasks; t += gridDim.x) {
        const staged_task task = staged_task_of(f, n, t);
        const T* image = (const T*)f.input + (uint64_t)task.b * f.channels * f.height * f.width;
        /* Scans of the list: each keeps the share's next `kept` ROIs, then pools them. */
        uint32_t pooled = 0, share_rois = 0; /* the share's ROIs before this scan's; all of them */
        do {
            uint32_t ranked = 0; /* the image's ROIs before this round */
            for (uint32_t round = 0; round < n.rois; round += blockDim.x, parity ^= 1) {
                const uint32_t r = round + threadIdx.x;
                float row[5] = {};
                if (r < n.rois) roi_row<T>(f, r, row);
                /* The first scan stages the chunk while the ROI rows load. */
                if (pooled == 0 && round == 0) {
                    stage_chunk<T, Words, ChannelsLast>(f, n, image, task.c0, whole, stage);
                    if (n.cluster > 1) cooperative_groups::this_cluster().sync(); /* the other blocks' pixels are in */
                }
                const dml_pooled_region region = dml_roi_pooled_region(row, f.batch, f.params.spatial_scale);
                const bool of_image = r < n.rois && region_of_image(region, task.b);
                const uint32_t ballot = __ballot_sync(0xFFFFFFFFu, of_image);
                if (lane == 0) warp_counts[parity][warp] = __popc(ballot);
                __syncthreads();
                uint32_t rank = ranked + __popc(ballot & ((1u << lane) - 1));
                for (uint32_t w = 0; w < kWarps; w++) {
                    const uint32_t count = warp_counts[parity][w];
                    rank += w < warp ? count : 0;
                    ranked += count;
                }
                /* The ROI's number among the share's ROIs of this scan (those before wrap around). */
                const uint32_t number = share_ranks_below(rank, task.share, n.shares) - pooled;
                if (of_image && rank % n.shares == task.share && number < n.kept) {
                    regions[number] = kept_region_of(region);
                    indices[number] = r;
                }
            }
            share_rois = share_ranks_below(ranked, task.share, n.shares);
            const uint32_t left = share_rois > pooled ? share_rois - pooled : 0;
            /* Its barriers also free the staged chunk for the next task. */
            if (left > 0)
                pool_kept<T, Words, ChannelsLast>(f, n, stage, regions, bins, indices, left < n.kept ? left : n.kept,
                                                  task.c0, whole);
            pooled += n.kept;
        } while (pooled < share_rois); /* uniform */
        /* The cluster's next chunk once every block is done with this one (uniform in the cluster). */
        if (n.cluster > 1 && t + gridDim.x < tasks) cooperative_groups::this_cluster().sync();
    }
}

/* The shared memory of blocks that keep `kept` ROIs, after the staged pixels. */
inline void staged_plan_keep(staged_plan* n, uint32_t kept) {
    const uint32_t per_roi = n->shape_only.params.pooled_height + n->shape_only.params.pooled_width;
    n->kept = kept;
    n->bins_offset = n->regions_offset + kept * (uint32_t)sizeof(kept_region);
    n->indices_offset = n->bins_offset + kept * per_roi * (uint32_t)sizeof(uint32_t);
    n->shared_bytes = n->indices_offset + kept * (uint32_t)sizeof(uint32_t);
}

/* The plan from the shapes alone, for `resident` blocks that keep `kept`
 * ROIs each (what the host replay runs with any). */
HRESULT staged_plan_make(const DMLOperator* op, bool channels_last, uint64_t resident, uint32_t kept, staged_plan* n) {
    const dml_tensor& input = op->inputs[DML_ROI_POOLING_INPUT].tensor;
    const dml_tensor& output = op->outputs[DML_ROI_POOLING_OUTPUT].tensor;
    bool (*packed)(const dml_tensor&) = channels_last ? dml_cuda_packed_nhwc : dml_cuda_packed_nchw;
    if (!packed(input) || !packed(output)) return S_FALSE;
    const dml_roi_pooling_params& p = *(const dml_roi_pooling_params*)op->params;
    const uint32_t channels = input.sizes[1], height = input.sizes[2], width = input.sizes[3];
    /* Bins are two 16-bit bounds; staged_offset's pixels are below 2^16
     * (which every chunk that fits a block's shared memory is). */
    if (height > UINT16_MAX || width > UINT16_MAX || (uint64_t)height * width > UINT16_MAX) return S_FALSE;
    if ((uint64_t)p.pooled_height + p.pooled_width > kMaxBinsPerRoi) return S_FALSE;
    const uint32_t element = input.type == DML_TENSOR_DATA_TYPE_FLOAT16 ? 2 : 4;
    const uint64_t pitch = width | 1, pixels = pitch * height;
    /* The widest pixel whose chunk (unpadded) fits kStageBytes, but no
     * wider than the channels need; one word where even that does not fit
     * (fewer blocks per multiprocessor, or none: the plan declines). */
    uint32_t words = 8;
    while (words > 1 && ((uint64_t)height * width * words * sizeof(uint32_t) > kStageBytes ||
                         (words / 2) * sizeof(uint32_t) >= (uint64_t)channels * element))
        words /= 2;
    const uint64_t stage_bytes = (pixels * words * sizeof(uint32_t) + 15) / 16 * 16;
    if (stage_bytes > UINT32_MAX / 2) return S_FALSE;
    dml_kernel_args shapes_only = {};
    shapes_only.op = op;
    n->shape_only = roi_pooling_problem_make(&shapes_only);
    n->channels_last = channels_last;
    n->words = words;
    n->channels = words * (uint32_t)sizeof(uint32_t) / element;
    n->pitch = (uint32_t)pitch;
    n->row_magic = pitch == width ? 0 : (uint32_t)((1ull << 32) / width + 1);
    n->chunks = (channels + n->channels - 1) / n->channels;
    n->rois = output.sizes[0];
    /* As many shares as keep every resident block busy in one wave (each
     * stages once); more tasks than blocks: one share. */
    const uint64_t per_share = (uint64_t)input.sizes[0] * n->chunks;
    uint64_t shares = resident / per_share;
    n->shares = (uint32_t)(shares < 1 ? 1 : shares > n->rois ? n->rois : shares);
    n->cluster = 1;
    n->regions_offset = (uint32_t)stage_bytes;
    staged_plan_keep(n, kept);
    n->blocks = 0;
    return S_OK;
}

/* roi_pooling_staged<T, words, channels_last>. */
template <class T, bool ChannelsLast> const void* staged_kernel(uint32_t words) {
    switch (words) {
    case 8: return (const void*)roi_pooling_staged<T, 8, ChannelsLast>;
    case 4: return (const void*)roi_pooling_staged<T, 4, ChannelsLast>;
    case 2: return (const void*)roi_pooling_staged<T, 2, ChannelsLast>;
    default: return (const void*)roi_pooling_staged<T, 1, ChannelsLast>;
    }
}

const void* staged_kernel(const staged_plan& n, bool is_half) {
    if (is_half)
        return n.channels_last ? staged_kernel<uint16_t, true>(n.words) : staged_kernel<uint16_t, false>(n.words);
    return n.channels_last ? staged_kernel<float, true>(n.words) : staged_kernel<float, false>(n.words);
}

/* The ROIs a block keeps: kMinKept, or more, up to what a share of ROIs
 * spread evenly over the images needs (and an eighth for the spread), where
 * the resident blocks stay as many. */
uint32_t staged_kept(const DMLDevice* device, const void* kernel, const staged_plan& n, uint64_t resident,
                     size_t allowed) {
    const uint64_t share =
        (n.rois + (uint64_t)n.shape_only.batch * n.shares - 1) / ((uint64_t)n.shape_only.batch * n.shares);
    uint64_t wanted = share + share / 8 + 8;
    wanted = wanted > n.rois ? n.rois : wanted;
    for (uint64_t kept = wanted; kept > kMinKept; kept -= kept - kMinKept < 16 ? kept - kMinKept : 16) {
        staged_plan larger = n;
        staged_plan_keep(&larger, (uint32_t)kept);
        if (larger.shared_bytes <= allowed &&
            dml_cuda_resident_blocks(device, kernel, kThreads, larger.shared_bytes) == resident)
            return (uint32_t)kept;
    }
    return kMinKept;
}

/* The launch of a staged plan: clusters of n.cluster blocks where more than one. */
cudaLaunchConfig_t staged_launch(const staged_plan& n, cudaLaunchAttribute* cluster, cudaStream_t stream) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(n.blocks);
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = n.shared_bytes;
    config.stream = stream;
    *cluster = {};
    cluster->id = cudaLaunchAttributeClusterDimension;
    cluster->val.clusterDim.x = n.cluster;
    cluster->val.clusterDim.y = 1;
    cluster->val.clusterDim.z = 1;
    config.attrs = cluster;
    config.numAttrs = n.cluster > 1 ? 1 : 0;
    return config;
}

/* The clusters of `size` blocks of the plan that the device holds at once (0 if the query fails). */
uint64_t staged_resident_clusters(const DMLDevice* device, const void* kernel, staged_plan n, uint32_t size) {
    dml_cuda_device_guard guard(device);
    n.cluster = size;
    n.blocks = size;
    cudaLaunchAttribute cluster;
    const cudaLaunchConfig_t config = staged_launch(n, &cluster, nullptr);
    int clusters = 0;
    if (guard.status() != cudaSuccess || cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (uint64_t)clusters;
}

HRESULT plan_staged(const DMLOperator* op, const DMLDevice* device, bool channels_last, dml_plan* plan) {
    staged_plan shape;
    HRESULT status = staged_plan_make(op, channels_last, 1, kMinKept, &shape);
    if (status != S_OK) return status;
    const bool is_half = op->inputs[DML_ROI_POOLING_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16;
    const void* kernel = staged_kernel(shape, is_half);
    const size_t allowed = dml_cuda_allow_dynamic_shared(device, kernel);
    if (shape.shared_bytes > allowed) return S_FALSE;
    const uint64_t resident = dml_cuda_resident_blocks(device, kernel, kThreads, shape.shared_bytes);
    if (resident == 0) return S_FALSE; /* the kernels above then */
    staged_plan_make(op, channels_last, resident, kMinKept, &shape);
    const uint32_t kept = staged_kept(device, kernel, shape, resident, allowed);
    staged_plan* n = (staged_plan*)dml_plan_state(plan, sizeof(staged_plan));
    if (n == nullptr) return E_OUTOFMEMORY;
    *n = shape;
    staged_plan_keep(n, kept);
    const uint64_t tasks = (uint64_t)n->shares * n->shape_only.batch * n->chunks;
    n->blocks = (unsigned)(tasks < resident ? tasks : resident);
    /* Pairs of shares in clusters of two blocks where the clusters still
     * hold every resident block (clusters of three held fewer: 372 of 396
     * blocks on the H100). */
    if (n->shares % 2 == 0 && staged_resident_clusters(device, kernel, *n, 2) * 2 >= n->blocks) {
        n->cluster = 2;
        n->blocks -= n->blocks % 2; /* whole clusters (the tasks are an even number) */
    }
    return S_OK;
}

HRESULT plan_staged_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_staged(op, device, false, plan);
}

HRESULT plan_staged_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS, dml_plan* plan) {
    return plan_staged(op, device, true, plan);
}

HRESULT run_staged(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const staged_plan& n = *DML_PLAN_STATE(args, staged_plan);
    const roi_pooling_problem f = bound_problem(n.shape_only, args);
    const bool is_half = args->op->inputs[DML_ROI_POOLING_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16;
    /* Channels-last pixels as whole vectors: K divides C, and both tensors
     * are aligned to the vectors (16 bytes at most). */
    const uintptr_t alignment = n.words >= 4 ? 16 : n.words * 4;
    bool whole = n.channels_last && f.channels % n.channels == 0 && (uintptr_t)f.input % alignment == 0 &&
                 (uintptr_t)f.output % alignment == 0;
    void* parameters[] = {(void*)&f, (void*)&n, &whole};
    cudaLaunchAttribute cluster;
    const cudaLaunchConfig_t config = staged_launch(n, &cluster, dml_cuda_stream(args));
    cudaError_t error = cudaLaunchKernelExC(&config, staged_kernel(n, is_half), parameters);
    (void)error; /* reported by dml_cuda_check_launch */
    return dml_cuda_check_launch("roi_pooling_staged");
}

} // namespace

const dml_impl dml_cuda_roi_pooling_generic = {"roi_pooling/cuda/strided", DML_ISA_GENERIC, nullptr, run_roi_pooling};
const dml_impl dml_cuda_roi_pooling_nchw = {"roi_pooling/cuda/nchw", DML_ISA_GENERIC, plan_nchw, run_packed};
const dml_impl dml_cuda_roi_pooling_nhwc = {"roi_pooling/cuda/nhwc", DML_ISA_GENERIC, plan_nhwc, run_packed};
const dml_impl dml_cuda_roi_pooling_staged_nchw = {"roi_pooling/cuda/staged_nchw", DML_ISA_GENERIC, plan_staged_nchw,
                                                   run_staged};
const dml_impl dml_cuda_roi_pooling_staged_nhwc = {"roi_pooling/cuda/staged_nhwc", DML_ISA_GENERIC, plan_staged_nhwc,
                                                   run_staged};
