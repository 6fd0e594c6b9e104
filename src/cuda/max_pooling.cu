/* Max pooling and its gradient on CUDA (spec max_pooling.md §5, §6), with
 * exactly the CPU backend's results (src/cpu/max_pooling.c).
 *
 * Every problem is seen as 5-D {N, C, D, H, W} (a 4-D one has D = 1).
 * Forward: one thread per output element scans its window in increasing
 * logical order, so ties go to the lowest index.
 * Gradient, deterministic without atomics: first the argmax of every window
 * into a temporary, then one thread per OutputGradient element gathers the
 * InputGradient of every window whose argmax it is, in increasing output
 * order, accumulating in FLOAT32 — the order and precision of the CPU's
 * per-plane scatter, so both backends give bit-identical results. */
#include "../core/half.h"
#include "../ops/max_pooling_rules.h"
#include "cuda.h"

namespace {

constexpr unsigned kThreads = 256;

/* ---- Value types: storage, comparison (§5) and the all-padding value (MP-2) ---- */

/* Floats: strict >, and NaN never wins over a number (decision MP-3). */
struct f32_type {
    typedef float T;
    static __device__ bool greater(T v, T best) { return dml_nan_aware_greater(v, best); }
    static __device__ T lowest() { return __int_as_float((int)0xFF800000u); } /* -inf */
};
struct f16_type {
    typedef uint16_t T; /* binary16 bits */
    static __device__ bool greater(T v, T best) { return dml_pool_greater_f16(v, best); }
    static __device__ T lowest() { return 0xFC00u; } /* -inf */
};
template <class Int, Int Lowest> struct int_type {
    typedef Int T;
    static __device__ bool greater(T v, T best) { return v > best; }
    static __device__ T lowest() { return Lowest; }
};
typedef int_type<int8_t, INT8_MIN> i8_type;
typedef int_type<uint8_t, 0> u8_type;
typedef int_type<int16_t, INT16_MIN> i16_type;
typedef int_type<uint16_t, 0> u16_type;
typedef int_type<int32_t, INT32_MIN> i32_type;
typedef int_type<uint32_t, 0> u32_type;
typedef int_type<int64_t, INT64_MIN> i64_type;
typedef int_type<uint64_t, 0> u64_type;

/* The first maximal element of one window within its (n, c) plane: its
 * plane-relative logical position (d * H + h) * W + w and element offset. */
struct window_max {
    bool found;
    uint32_t position; /* < D*H*W <= 2^32 - 1 (spec T-1) */
    uint64_t offset;
};

/* Visits the window in increasing logical order (D, then H, then W), so a
 * later equal value never replaces the first (ties -> lowest index). */
template <class V>
__device__ window_max scan_window(const typename V::T* plane, const dml_pool_view& in, const dml_pool_taps r[3],
                                  const dml_pooling_params& p) {
    window_max result = {false, 0, 0};
    typename V::T best = 0;
    for (uint32_t kd = r[0].begin; kd < r[0].end; kd++) {
        uint64_t d = (uint64_t)(r[0].start + (int64_t)kd * p.dilations[0]);
        for (uint32_t kh = r[1].begin; kh < r[1].end; kh++) {
            uint64_t h = (uint64_t)(r[1].start + (int64_t)kh * p.dilations[1]);
            for (uint32_t kw = r[2].begin; kw < r[2].end; kw++) {
                uint64_t w = (uint64_t)(r[2].start + (int64_t)kw * p.dilations[2]);
                uint64_t offset = d * in.strides[2] + h * in.strides[3] + w * in.strides[4];
                typename V::T v = plane[offset];
                if (!result.found || V::greater(v, best)) {
                    best = v;
                    result.found = true;
                    result.offset = offset;
                    result.position = (uint32_t)((d * in.sizes[3] + h) * in.sizes[4] + w);
                }
            }
        }
    }
    return result;
}

/* Logical coordinates {n, c, d, h, w} of element `index` of a 5-D view. */
__device__ void coords_5d(const dml_pool_view& view, uint32_t index, uint32_t coords[5]) {
    for (int i = 4; i > 0; i--) {
        coords[i] = index % view.sizes[i];
        index /= view.sizes[i];
    }
    coords[0] = index;
}

__device__ uint64_t grid_start() { return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ uint64_t grid_step() { return (uint64_t)gridDim.x * blockDim.x; }

/* ---- Forward ---- */

struct forward_problem {
    dml_pooling_params params;
    dml_pool_view in, out, idx;
    const void* input;
    void* output;
    void* indices; /* NULL when OutputIndicesTensor is absent */
    bool indices_64;
    uint64_t count; /* output elements */
};

template <class V> __global__ void max_pooling_forward(const forward_problem f) {
    typedef typename V::T T;
    for (uint64_t i = grid_start(); i < f.count; i += grid_step()) {
        uint32_t o[5];
        coords_5d(f.out, (uint32_t)i, o);
        const T* plane = (const T*)f.input + o[0] * f.in.strides[0] + o[1] * f.in.strides[1];
        dml_pool_taps r[3];
        for (int dim = 0; dim < 3; dim++)
            r[dim] = dml_pool_window_taps(&f.params, (uint32_t)dim, o[2 + dim], f.in.sizes[2 + dim]);
        window_max m = scan_window<V>(plane, f.in, r, f.params);
        uint64_t out_offset = 0, idx_offset = 0;
        for (int dim = 0; dim < 5; dim++) {
            out_offset += o[dim] * f.out.strides[dim];
            idx_offset += o[dim] * f.idx.strides[dim];
        }
        ((T*)f.output)[out_offset] = m.found ? plane[m.offset] : V::lowest();
        if (f.indices == NULL) continue;
        /* Whole-tensor logical index (§5.1); all ones for an all-padding window. */
        uint64_t plane_base = ((uint64_t)o[0] * f.in.sizes[1] + o[1]) * f.in.sizes[2] * f.in.sizes[3] * f.in.sizes[4];
        uint64_t index = m.found ? plane_base + m.position : ~(uint64_t)0;
        if (f.indices_64)
            ((uint64_t*)f.indices)[idx_offset] = index;
        else
            ((uint32_t*)f.indices)[idx_offset] = (uint32_t)index; /* < 2^32 elements (spec T-1) */
    }
}

template <class V> HRESULT launch_forward(const dml_kernel_args* args, const forward_problem& f) {
    max_pooling_forward<V><<<dml_cuda_blocks(args, f.count, kThreads), kThreads, 0, dml_cuda_stream(args)>>>(f);
    return dml_cuda_check_launch("max_pooling_forward");
}

/* ---- Gradient ---- */

struct grad_problem {
    dml_pooling_params params;
    dml_pool_view in, grad_in, grad_out;
    const void* input;
    const void* input_gradient;
    void* output_gradient;
    uint32_t* argmax;      /* per window, packed over grad_in's sizes; all ones: all padding */
    uint64_t window_count; /* InputGradient elements */
    uint64_t count;        /* OutputGradient elements */
};

template <class V> __global__ void max_pooling_argmax(const grad_problem g) {
    typedef typename V::T T;
    for (uint64_t i = grid_start(); i < g.window_count; i += grid_step()) {
        uint32_t o[5];
        coords_5d(g.grad_in, (uint32_t)i, o);
        const T* plane = (const T*)g.input + o[0] * g.in.strides[0] + o[1] * g.in.strides[1];
        dml_pool_taps r[3];
        for (int dim = 0; dim < 3; dim++)
            r[dim] = dml_pool_window_taps(&g.params, (uint32_t)dim, o[2 + dim], g.in.sizes[2 + dim]);
        window_max m = scan_window<V>(plane, g.in, r, g.params);
        g.argmax[i] = m.found ? m.position : ~(uint32_t)0;
    }
}

/* The outputs o of dimension dim whose window has a tap on input position x:
 * o * stride - start_padding + k * dilation == x for some k < window. They
 * lie in [first, last]; those with (x + start_padding - o * stride) a
 * multiple of the dilation are the ones. */
struct cover_range {
    int64_t first, last;
};

__device__ cover_range covering_outputs(const dml_pooling_params& p, int dim, uint32_t x, uint32_t out_size) {
    uint64_t stride = p.strides[dim];
    uint64_t reach = (uint64_t)(p.window[dim] - 1) * p.dilations[dim]; /* < 2^64 */
    uint64_t t = (uint64_t)x + p.start_padding[dim];                   /* o * stride = t - k * dilation, < 2^33 */
    cover_range c;
    c.first = reach >= t ? 0 : (int64_t)((t - reach + stride - 1) / stride);
    c.last = (int64_t)(t / stride);
    if (c.last > (int64_t)out_size - 1) c.last = (int64_t)out_size - 1;
    return c;
}

__device__ bool on_tap(const dml_pooling_params& p, int dim, uint32_t x, int64_t o) {
    int64_t distance = (int64_t)x + p.start_padding[dim] - o * p.strides[dim];
    return distance % p.dilations[dim] == 0;
}

__device__ float to_float(float v) { return v; }
__device__ float to_float(uint16_t v) { return dml_half_to_float(v); }
template <class T> __device__ T from_float(float v);
template <> __device__ float from_float<float>(float v) { return v; }
template <> __device__ uint16_t from_float<uint16_t>(float v) { return dml_float_to_half(v); }

template <class V> __global__ void max_pooling_gather(const grad_problem g) {
    typedef typename V::T T;
    const dml_pool_view& gi = g.grad_in;
    for (uint64_t i = grid_start(); i < g.count; i += grid_step()) {
        uint32_t x[5];
        coords_5d(g.in, (uint32_t)i, x);
        uint32_t position = (x[2] * g.in.sizes[3] + x[3]) * g.in.sizes[4] + x[4];
        uint64_t plane = (uint64_t)x[0] * gi.sizes[1] + x[1];
        const T* dy = (const T*)g.input_gradient + x[0] * gi.strides[0] + x[1] * gi.strides[1];
        cover_range cd = covering_outputs(g.params, 0, x[2], gi.sizes[2]);
        cover_range ch = covering_outputs(g.params, 1, x[3], gi.sizes[3]);
        cover_range cw = covering_outputs(g.params, 2, x[4], gi.sizes[4]);
        /* FLOAT32 sum in increasing output order, as the CPU's scatter adds. */
        float sum = 0.0f;
        for (int64_t od = cd.first; od <= cd.last; od++) {
            if (!on_tap(g.params, 0, x[2], od)) continue;
            for (int64_t oh = ch.first; oh <= ch.last; oh++) {
                if (!on_tap(g.params, 1, x[3], oh)) continue;
                uint64_t row = (plane * gi.sizes[2] + (uint64_t)od) * gi.sizes[3] + (uint64_t)oh;
                for (int64_t ow = cw.first; ow <= cw.last; ow++) {
                    if (!on_tap(g.params, 2, x[4], ow)) continue;
                    if (g.argmax[row * gi.sizes[4] + (uint64_t)ow] != position) continue;
                    sum += to_float(dy[od * gi.strides[2] + oh * gi.strides[3] + ow * gi.strides[4]]);
                }
            }
        }
        uint64_t offset = 0;
        for (int dim = 0; dim < 5; dim++)
            offset += x[dim] * g.grad_out.strides[dim];
        ((T*)g.output_gradient)[offset] = from_float<T>(sum);
    }
}

template <class V> HRESULT launch_grad(const dml_kernel_args* args, const grad_problem& g) {
    cudaStream_t stream = dml_cuda_stream(args);
    max_pooling_argmax<V><<<dml_cuda_blocks(args, g.window_count, kThreads), kThreads, 0, stream>>>(g);
    DML_TRY(dml_cuda_check_launch("max_pooling_argmax"));
    max_pooling_gather<V><<<dml_cuda_blocks(args, g.count, kThreads), kThreads, 0, stream>>>(g);
    return dml_cuda_check_launch("max_pooling_gather");
}

uint64_t element_count(const dml_pool_view& view) {
    uint64_t count = 1;
    for (int i = 0; i < 5; i++)
        count *= view.sizes[i];
    return count;
}

HRESULT run_forward(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const DMLOperator* op = args->op;
    const dml_tensor* indices =
        op->output_count > DML_POOL_OUTPUT_INDICES ? &op->outputs[DML_POOL_OUTPUT_INDICES].tensor : NULL;
    forward_problem f = {};
    f.params = *(const dml_pooling_params*)op->params;
    f.in = dml_pool_view_5d(&op->inputs[DML_POOL_INPUT].tensor);
    f.out = dml_pool_view_5d(&op->outputs[DML_POOL_OUTPUT].tensor);
    f.idx = f.out;
    f.input = args->inputs[DML_POOL_INPUT];
    f.output = args->outputs[DML_POOL_OUTPUT];
    if (indices && indices->present) {
        f.idx = dml_pool_view_5d(indices);
        f.indices = args->outputs[DML_POOL_OUTPUT_INDICES];
        f.indices_64 = indices->type == DML_TENSOR_DATA_TYPE_UINT64;
    }
    f.count = element_count(f.out);
    switch (op->inputs[DML_POOL_INPUT].tensor.type) {
    case DML_TENSOR_DATA_TYPE_FLOAT32: return launch_forward<f32_type>(args, f);
    case DML_TENSOR_DATA_TYPE_FLOAT16: return launch_forward<f16_type>(args, f);
    case DML_TENSOR_DATA_TYPE_INT8: return launch_forward<i8_type>(args, f);
    case DML_TENSOR_DATA_TYPE_UINT8: return launch_forward<u8_type>(args, f);
    case DML_TENSOR_DATA_TYPE_INT16: return launch_forward<i16_type>(args, f);
    case DML_TENSOR_DATA_TYPE_UINT16: return launch_forward<u16_type>(args, f);
    case DML_TENSOR_DATA_TYPE_INT32: return launch_forward<i32_type>(args, f);
    case DML_TENSOR_DATA_TYPE_UINT32: return launch_forward<u32_type>(args, f);
    case DML_TENSOR_DATA_TYPE_INT64: return launch_forward<i64_type>(args, f);
    case DML_TENSOR_DATA_TYPE_UINT64: return launch_forward<u64_type>(args, f);
    default:
        return dml_fail(E_NOTIMPL, "%s: data type %u is not implemented on CUDA", op->name,
                        (unsigned)op->inputs[DML_POOL_INPUT].tensor.type);
    }
}

/* The gradient's workspace: one argmax per window. */
HRESULT plan_grad(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)device, (void)flags;
    plan->temporary_size =
        element_count(dml_pool_view_5d(&op->inputs[DML_POOL_INPUT_GRADIENT].tensor)) * sizeof(uint32_t);
    return S_OK;
}

HRESULT run_grad(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const DMLOperator* op = args->op;
    grad_problem g = {};
    g.params = *(const dml_pooling_params*)op->params;
    g.in = dml_pool_view_5d(&op->inputs[DML_POOL_INPUT].tensor);
    g.grad_in = dml_pool_view_5d(&op->inputs[DML_POOL_INPUT_GRADIENT].tensor);
    g.grad_out = dml_pool_view_5d(&op->outputs[DML_POOL_OUTPUT].tensor);
    g.input = args->inputs[DML_POOL_INPUT];
    g.input_gradient = args->inputs[DML_POOL_INPUT_GRADIENT];
    g.output_gradient = args->outputs[DML_POOL_OUTPUT];
    g.window_count = element_count(g.grad_in);
    g.count = element_count(g.in);
    g.argmax = (uint32_t*)args->temporary;
    bool half = op->inputs[DML_POOL_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16;
    return half ? launch_grad<f16_type>(args, g) : launch_grad<f32_type>(args, g);
}

} // namespace

const dml_impl dml_cuda_max_pooling_generic = {"max_pooling/cuda/strided", DML_ISA_GENERIC, nullptr, run_forward};
const dml_impl dml_cuda_max_pooling_grad_generic = {"max_pooling_grad/cuda/strided", DML_ISA_GENERIC, plan_grad,
                                                    run_grad};
