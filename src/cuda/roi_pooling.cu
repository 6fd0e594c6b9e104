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

} // namespace

const dml_impl dml_cuda_roi_pooling_generic = {"roi_pooling/cuda/strided", DML_ISA_GENERIC, nullptr, run_roi_pooling};
