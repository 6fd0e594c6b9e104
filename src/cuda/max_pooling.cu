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

/* After the project's headers: its `half` type would shadow their parameters. */
#include <cuda_fp16.h>

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
/* The same comparison with the GPU's exact binary16 -> FLOAT32 conversion
 * (every binary16 value, NaN included, is a FLOAT32 value: the order is the
 * same), for the fast paths. */
struct f16_cvt_type : f16_type {
    static __device__ bool greater(T v, T best) {
        return dml_nan_aware_greater(dml_cuda_widen(v), dml_cuda_widen(best));
    }
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

/* The order in which a kernel's threads visit the elements of a 5-D view:
 * dims[0] the slowest, dims[4] the fastest, by the strides of the tensor
 * the kernel writes (largest first, ties in logical order), so that
 * neighbouring threads write neighbouring elements: a channels-last tensor
 * gets its channels across threads (coalesced) rather than C apart. */
struct visit_order {
    uint32_t dims[5];
};

visit_order visit_order_of(const dml_pool_view& written) {
    visit_order order = {{0, 1, 2, 3, 4}};
    for (int i = 1; i < 5; i++)
        for (int j = i; j > 0 && written.strides[order.dims[j - 1]] < written.strides[order.dims[j]]; j--) {
            uint32_t dim = order.dims[j];
            order.dims[j] = order.dims[j - 1];
            order.dims[j - 1] = dim;
        }
    return order;
}

/* Logical coordinates {n, c, d, h, w} of the index-th element of a 5-D view
 * in the visit order. */
__device__ void coords_5d(const dml_pool_view& view, const visit_order& order, uint32_t index, uint32_t coords[5]) {
    for (int i = 4; i > 0; i--) {
        uint32_t dim = order.dims[i];
        coords[dim] = index % view.sizes[dim];
        index /= view.sizes[dim];
    }
    coords[order.dims[0]] = index;
}

/* The inverse: the index in the visit order of the element at `coords`. */
__device__ uint64_t index_5d(const dml_pool_view& view, const visit_order& order, const uint64_t coords[5]) {
    uint64_t index = 0;
    for (int i = 0; i < 5; i++)
        index = index * view.sizes[order.dims[i]] + coords[order.dims[i]];
    return index;
}

__device__ uint64_t grid_start() { return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ uint64_t grid_step() { return (uint64_t)gridDim.x * blockDim.x; }

/* ---- Forward ---- */

struct forward_problem {
    dml_pooling_params params;
    dml_pool_view in, out, idx;
    visit_order order; /* of the outputs */
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
        coords_5d(f.out, f.order, (uint32_t)i, o);
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
    visit_order windows, elements; /* of the InputGradient (and argmax) and OutputGradient elements */
    const void* input;
    const void* input_gradient;
    void* output_gradient;
    uint32_t* argmax;      /* per window, in the windows' visit order; all ones: all padding */
    uint64_t window_count; /* InputGradient elements */
    uint64_t count;        /* OutputGradient elements */
};

template <class V> __global__ void max_pooling_argmax(const grad_problem g) {
    typedef typename V::T T;
    for (uint64_t i = grid_start(); i < g.window_count; i += grid_step()) {
        uint32_t o[5];
        coords_5d(g.grad_in, g.windows, (uint32_t)i, o);
        const T* plane = (const T*)g.input + o[0] * g.in.strides[0] + o[1] * g.in.strides[1];
        dml_pool_taps r[3];
        for (int dim = 0; dim < 3; dim++)
            r[dim] = dml_pool_window_taps(&g.params, (uint32_t)dim, o[2 + dim], g.in.sizes[2 + dim]);
        window_max m = scan_window<V>(plane, g.in, r, g.params);
        g.argmax[i] = m.found ? m.position : ~(uint32_t)0;
    }
}

/* The gradient sums' conversions, by the GPU's instructions: binary16 ->
 * FLOAT32 is exact, FLOAT32 -> binary16 is dml_cuda_narrow (the CPU's bits). */
__device__ float to_float(float v) { return v; }
__device__ float to_float(uint16_t v) { return dml_cuda_widen(v); }
template <class T> __device__ T from_float(float v) { return dml_cuda_narrow(v, T()); }

template <class V> __global__ void max_pooling_gather(const grad_problem g) {
    typedef typename V::T T;
    const dml_pool_view& gi = g.grad_in;
    for (uint64_t i = grid_start(); i < g.count; i += grid_step()) {
        uint32_t x[5];
        coords_5d(g.in, g.elements, (uint32_t)i, x);
        uint32_t position = (x[2] * g.in.sizes[3] + x[3]) * g.in.sizes[4] + x[4];
        const T* dy = (const T*)g.input_gradient + x[0] * gi.strides[0] + x[1] * gi.strides[1];
        const dml_pooling_params* p = &g.params;
        dml_pool_cover cd = dml_pool_covering_windows(p, 0, x[2], gi.sizes[2]);
        dml_pool_cover ch = dml_pool_covering_windows(p, 1, x[3], gi.sizes[3]);
        dml_pool_cover cw = dml_pool_covering_windows(p, 2, x[4], gi.sizes[4]);
        /* FLOAT32 sum in increasing output order, as the CPU's scatter adds. */
        float sum = 0.0f;
        for (uint32_t od = cd.first; od < cd.end; od++) {
            if (!dml_pool_window_contains(p, 0, x[2], od)) continue;
            for (uint32_t oh = ch.first; oh < ch.end; oh++) {
                if (!dml_pool_window_contains(p, 1, x[3], oh)) continue;
                for (uint32_t ow = cw.first; ow < cw.end; ow++) {
                    if (!dml_pool_window_contains(p, 2, x[4], ow)) continue;
                    const uint64_t window[5] = {x[0], x[1], od, oh, ow};
                    if (g.argmax[index_5d(gi, g.windows, window)] != position) continue;
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
    f.order = visit_order_of(f.out);
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
    g.windows = visit_order_of(g.grad_in);
    g.elements = visit_order_of(g.grad_out);
    g.argmax = (uint32_t*)args->temporary;
    bool half = op->inputs[DML_POOL_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16;
    return half ? launch_grad<f16_type>(args, g) : launch_grad<f32_type>(args, g);
}

/* ---- Packed NCHW fast paths (4-D, FLOAT32 and FLOAT16) ----
 *
 * The same scan order, comparisons and FLOAT32 gradient sums as the strided
 * kernels above, so the same bits; what changes is the work per element:
 * 32-bit index math from a plan made at compile time, 16-byte (FLOAT16: 8-byte)
 * loads where windows tile the input 2x2, and a gradient in one pass:
 * - windows that tile the input exactly (window == stride, no padding,
 *   dilation 1): one thread per window finds its argmax and writes every
 *   element of the window (the gradient at the argmax, zero elsewhere);
 * - any other windows (overlapping, gaps, padding, dilation): one block per
 *   band of input rows of one plane puts the argmax of every window that
 *   covers the band into shared memory, then each thread gathers its
 *   elements' sums from it. */

struct nchw_plan {
    dml_pooling_params params;
    uint32_t planes, height, width, out_height, out_width; /* planes: N * C */
    uint32_t type;                                         /* DML_TENSOR_DATA_TYPE of the values */
    uint32_t index_bytes;                                  /* 0 (no indices), 4 or 8 */
    bool tiles_2x2;                    /* window 2x2 == stride, no padding, dilation 1, even sizes, W % 4 == 0 */
    bool tiles_exact;                  /* window == stride, no padding, dilation 1, windows cover the input */
    uint32_t tile_windows;             /* forward with tiles_2x2: windows per thread (2, or FLOAT16's 4) */
    uint32_t band_rows, band_windows;  /* gather form: input rows per block, window rows it needs */
    bool whole_planes;                 /* one block per plane, staged in shared memory (plane_layout_of) */
    bool window_3x3;                   /* 3x3 windows, dilation 1: the whole-plane kernels' unrolled scan */
    bool window_3x3_stride_2;          /* also strides 2, start padding 1, even H and W (argmax_3x3_stride_2) */
    bool rows_3x3s2;                   /* also at most 32 window columns and column pairs: the row kernels */
    uint32_t row_streams, row_threads; /* the row kernels' streams (FLOAT16: half warps) and threads a block */
    uint32_t group_rows;               /* their window rows (gradient: row pairs) per stream */
    uint64_t count;                    /* threads' work items of the kernel that runs */
    unsigned blocks;
};

/* Windows along one dimension that never overlap and cover the input. */
bool tiles_dimension(const dml_pooling_params& p, int dim, uint32_t in, uint32_t out) {
    return p.window[dim] == p.strides[dim] && p.dilations[dim] == 1 && p.start_padding[dim] == 0 &&
           p.end_padding[dim] == 0 && (uint64_t)out * p.window[dim] == in;
}

/* Whether window and input positions of 4-D tensors, padding included, fit
 * int32 (the fast paths' 32-bit coordinates). */
bool positions_fit_int32(const dml_tensor& input, const dml_tensor& pooled, const dml_pooling_params& p) {
    for (int dim = 1; dim < 3; dim++) {
        uint64_t window = (uint64_t)p.window[dim] * p.dilations[dim] + p.start_padding[dim] + p.strides[dim];
        if ((uint64_t)pooled.sizes[1 + dim] * p.strides[dim] + window > INT32_MAX ||
            (uint64_t)input.sizes[1 + dim] + window > INT32_MAX)
            return false;
    }
    return true;
}

/* The common plan of both directions: packed 4-D FLOAT32/FLOAT16 tensors whose
 * coordinates fit 32-bit arithmetic; NULL (declined) otherwise. */
nchw_plan* plan_nchw(const dml_tensor& input, const dml_tensor& pooled, const dml_pooling_params& p, dml_plan* plan,
                     bool* declined) {
    *declined = true;
    if (input.type != DML_TENSOR_DATA_TYPE_FLOAT32 && input.type != DML_TENSOR_DATA_TYPE_FLOAT16) return nullptr;
    if (!dml_cuda_packed_nchw(input) || !dml_cuda_packed_nchw(pooled) || input.element_count > INT32_MAX ||
        !positions_fit_int32(input, pooled, p))
        return nullptr;
    *declined = false;
    nchw_plan* n = (nchw_plan*)dml_plan_state(plan, sizeof(nchw_plan));
    if (n == nullptr) return nullptr;
    n->params = p;
    n->planes = input.sizes[0] * input.sizes[1];
    n->height = input.sizes[2];
    n->width = input.sizes[3];
    n->out_height = pooled.sizes[2];
    n->out_width = pooled.sizes[3];
    n->type = input.type;
    n->tiles_exact = tiles_dimension(p, 1, n->height, n->out_height) && tiles_dimension(p, 2, n->width, n->out_width);
    n->whole_planes = false;
    n->rows_3x3s2 = false;
    n->window_3x3 = p.window[1] == 3 && p.window[2] == 3 && p.dilations[1] == 1 && p.dilations[2] == 1;
    n->window_3x3_stride_2 = n->window_3x3 && p.strides[1] == 2 && p.strides[2] == 2 && p.start_padding[1] == 1 &&
                             p.start_padding[2] == 1 && n->height % 2 == 0 && n->width % 2 == 0;
    n->tiles_2x2 = n->tiles_exact && p.window[1] == 2 && p.window[2] == 2 && n->width % 4 == 0;
    return n;
}

unsigned grid_blocks(const DMLDevice* device, uint64_t count) {
    uint64_t needed = (count + kThreads - 1) / kThreads;
    uint64_t enough = (uint64_t)dml_cuda_state(device)->multiprocessors * 32;
    return (unsigned)(needed < enough ? (needed ? needed : 1) : enough);
}

template <class T> struct alignas(2 * sizeof(T)) pair_of { T v[2]; };
template <class T> struct alignas(4 * sizeof(T)) quad_of { T v[4]; };

bool aligned_to(const void* p, size_t bytes) { return (uintptr_t)p % bytes == 0; }

/* The first maximal tap (scan order and comparison of scan_window) of the
 * window whose top-left tap is (h0, w0); position h * W + w, or all ones
 * when no tap is inside the input. K > 0: the window is K x K with dilation
 * 1, known at compile time (the loops unroll); K == 0: any window. */
template <class V, unsigned K = 0>
__device__ uint32_t argmax_2d(const typename V::T* plane, const nchw_plan& n, int32_t h0, int32_t w0) {
    const dml_pooling_params& p = n.params;
    const uint32_t window_h = K ? K : p.window[1], window_w = K ? K : p.window[2];
    const uint32_t dilation_h = K ? 1 : p.dilations[1], dilation_w = K ? 1 : p.dilations[2];
    uint32_t position = ~0u;
    typename V::T best = 0;
#pragma unroll
    for (uint32_t kh = 0; kh < window_h; kh++) {
        int32_t h = h0 + (int32_t)(kh * dilation_h);
        if (h < 0 || h >= (int32_t)n.height) continue;
#pragma unroll
        for (uint32_t kw = 0; kw < window_w; kw++) {
            int32_t w = w0 + (int32_t)(kw * dilation_w);
            if (w < 0 || w >= (int32_t)n.width) continue;
            uint32_t at = (uint32_t)h * n.width + (uint32_t)w;
            typename V::T v = plane[at];
            if (position == ~0u || V::greater(v, best)) {
                best = v;
                position = at;
            }
        }
    }
    return position;
}

/* The first maximal tap and its value, as argmax_2d<V, 3> finds them (the
 * same scan and comparisons), of window (a, b) with strides 2 and start
 * padding 1 on a plane of even width: per row, the taps of columns 2b and
 * 2b + 1 are one aligned pair load. Position all ones (value -inf) when no
 * tap is inside the input. */
template <class V> struct tap_max {
    typedef typename V::T T;
    uint32_t position;
    T value;
    __device__ void visit(T v, uint32_t at) {
        if (position == ~0u || V::greater(v, value)) position = at, value = v;
    }
    /* The taps of one input row (starting at position `row`) of window
     * column b, as argmax_3x3_stride_2 scans them: column 2b - 1 (`left`),
     * then 2b and 2b + 1 (`pair`). */
    __device__ __forceinline__ void visit_row(uint32_t row, uint32_t b, uint32_t width, T left, pair_of<T> pair) {
        uint32_t right = 2 * b;
        if (right - 1 < width) visit(left, row + right - 1); /* right - 1 wraps to all ones for b = 0 */
        if (right < width) {                                 /* then right + 1 < W too: W is even */
            visit(pair.v[0], row + right);
            visit(pair.v[1], row + right + 1);
        }
    }
};

template <class V>
__device__ __forceinline__ tap_max<V> argmax_3x3_stride_2(const typename V::T* plane, const nchw_plan& n, uint32_t a,
                                                          uint32_t b) {
    typedef typename V::T T;
    tap_max<V> best = {~0u, V::lowest()};
    uint32_t left = 2 * b - 1, right = 2 * b; /* columns; left wraps to all ones for b = 0 */
#pragma unroll
    for (int32_t kh = 0; kh < 3; kh++) {
        int32_t h = 2 * (int32_t)a - 1 + kh;
        if (h < 0 || h >= (int32_t)n.height) continue;
        uint32_t row = (uint32_t)h * n.width;
        if (left < n.width) best.visit(plane[row + left], row + left);
        if (right < n.width) { /* then right + 1 < W too: W is even */
            pair_of<T> pair = *(const pair_of<T>*)(plane + row + right);
            best.visit(pair.v[0], row + right);
            best.visit(pair.v[1], row + right + 1);
        }
    }
    return best;
}

/* The whole-tensor index (§5.1) of plane position `position`; all ones for
 * an all-padding window (position all ones). */
template <class I> __device__ I index_of(uint64_t plane_base, uint32_t position) {
    return (I)(position == ~0u ? ~(uint64_t)0 : plane_base + position);
}

template <class I> __device__ void store_index(void* indices, uint64_t at, uint64_t plane_base, uint32_t position) {
    ((I*)indices)[at] = index_of<I>(plane_base, position);
}

/* Window (output element) i of the packed {planes, OH, OW} windows: its
 * row, column and the offset of its input plane. */
struct window_at {
    uint32_t oh, ow;
    uint64_t plane_base;
};

__device__ window_at window_of(const nchw_plan& n, uint32_t i) {
    uint32_t rest = i / n.out_width;
    window_at at = {rest % n.out_height, i % n.out_width, (uint64_t)(rest / n.out_height) * n.height * n.width};
    return at;
}

/* One thread per output element. */
template <class V, class I>
__global__ void __launch_bounds__(kThreads)
    max_pooling_forward_nchw(const nchw_plan n, const void* input, void* output, void* indices) {
    typedef typename V::T T;
    const dml_pooling_params& p = n.params;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n.count; i += gridDim.x * blockDim.x) {
        window_at at = window_of(n, i);
        uint32_t oh = at.oh, ow = at.ow;
        uint64_t plane_base = at.plane_base;
        const T* in = (const T*)input + plane_base;
        uint32_t position = argmax_2d<V>(in, n, (int32_t)(oh * p.strides[1]) - (int32_t)p.start_padding[1],
                                         (int32_t)(ow * p.strides[2]) - (int32_t)p.start_padding[2]);
        ((T*)output)[i] = position == ~0u ? V::lowest() : in[position];
        if (sizeof(I) > 1) store_index<I>(indices, i, plane_base, position);
    }
}

/* dml_pool_covering_windows and dml_pool_window_contains in 32-bit
 * arithmetic (the plan keeps window positions under 2^31): the windows [first, end) along dimension dim whose
 * taps may include x; with dilation 1 every one of them does. */
struct window_span {
    uint32_t first, end;
    uint32_t t, stride, dilation; /* t = x + start padding */
    __device__ bool on_tap(uint32_t o) const { return dilation == 1 || (t - o * stride) % dilation == 0; }
};

__device__ window_span covering_span(const dml_pooling_params& p, int dim, uint32_t x, uint32_t out_size) {
    window_span s;
    s.stride = p.strides[dim];
    s.dilation = p.dilations[dim];
    s.t = x + p.start_padding[dim];
    uint32_t reach = (p.window[dim] - 1) * s.dilation;
    s.first = reach >= s.t ? 0 : (s.t - reach + s.stride - 1) / s.stride;
    uint32_t last = s.t / s.stride;
    s.end = last < out_size ? last + 1 : out_size;
    if (s.first > s.end) s.first = s.end;
    return s;
}

/* The elements of a row-major range `width` wide, visited blockDim.x apart
 * from threadIdx.x: (row, column) advanced without divisions. */
struct row_walker {
    uint32_t row, column, row_step, column_step, width;
    __device__ explicit row_walker(uint32_t columns)
        : row(threadIdx.x / columns), column(threadIdx.x % columns), row_step(blockDim.x / columns),
          column_step(blockDim.x % columns), width(columns) {}
    __device__ void next() {
        row += row_step;
        column += column_step;
        if (column >= width) {
            column -= width;
            row++;
        }
    }
};

/* Windows 2x2, stride 2: one thread per W neighbouring windows of a row,
 * reading two rows of 2W elements (16 bytes for FLOAT16's W = 4, 8 bytes
 * for W = 2), each element widened once. The first maximal of {a, b, c, d}
 * in scan order (a b on the first row, c d on the second). */
template <class V> __device__ int first_max4(const typename V::T q[4]) {
    int best = 0;
#pragma unroll
    for (int k = 1; k < 4; k++)
        if (V::greater(q[k], q[best])) best = k;
    return best;
}

template <class T, unsigned N> struct alignas(N * sizeof(T)) vector_of { T v[N]; };

template <class V, class I, unsigned W>
__global__ void __launch_bounds__(kThreads)
    max_pooling_forward_2x2(const nchw_plan n, const void* input, void* output, void* indices) {
    typedef typename V::T T;
    uint32_t groups_per_row = n.out_width / W;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n.count; i += gridDim.x * blockDim.x) {
        uint32_t group = i % groups_per_row, row = i / groups_per_row; /* row: plane * OH + oh */
        uint32_t plane = row / n.out_height, oh = row % n.out_height;
        uint64_t plane_base = (uint64_t)plane * n.height * n.width;
        uint32_t top = (2 * oh) * n.width + 2 * W * group;
        const T* in = (const T*)input + plane_base;
        vector_of<T, 2 * W> r0 = *(const vector_of<T, 2 * W>*)(in + top);
        vector_of<T, 2 * W> r1 = *(const vector_of<T, 2 * W>*)(in + top + n.width);
        vector_of<T, W> values;
        uint32_t positions[W];
#pragma unroll
        for (unsigned k = 0; k < W; k++) {
            const T q[4] = {r0.v[2 * k], r0.v[2 * k + 1], r1.v[2 * k], r1.v[2 * k + 1]};
            const float widened[4] = {to_float(q[0]), to_float(q[1]), to_float(q[2]), to_float(q[3])};
            int best = first_max4<f32_type>(widened); /* FLOAT16 widened exactly keeps its order */
            values.v[k] = best == 0 ? q[0] : best == 1 ? q[1] : best == 2 ? q[2] : q[3]; /* no local array */
            positions[k] = top + 2 * k + (best & 1) + (best >> 1) * n.width;
        }
        uint64_t out = (uint64_t)row * n.out_width + W * group;
        *(vector_of<T, W>*)((T*)output + out) = values;
        if (sizeof(I) > 1)
#pragma unroll
            for (unsigned k = 0; k < W; k += 2) {
                pair_of<I> index = {{(I)(plane_base + positions[k]), (I)(plane_base + positions[k + 1])}};
                *(pair_of<I>*)((I*)indices + out + k) = index;
            }
    }
}

/* ---- Whole planes in shared memory (overlapping windows, small planes) ----
 * One block per plane: the plane is copied into shared memory with 16-byte
 * loads where alignment allows (every input element is read from memory
 * once, however many windows overlap it), then the windows are scanned there
 * by argmax_2d as everywhere else: the same bits. */

/* Shared memory of the plane staging: the input plane, and for the gradient
 * the plane's output gradient, argmaxes and covering spans. Each part starts
 * 16-byte aligned. */
struct plane_layout {
    size_t gradient, argmax, column_spans, row_spans, total; /* byte offsets; the input plane at 0 */
};

__host__ __device__ size_t round_up_16(size_t bytes) { return (bytes + 15) & ~(size_t)15; }

__host__ __device__ plane_layout plane_layout_of(const nchw_plan& n, size_t element, bool gradient) {
    plane_layout l;
    size_t windows = (size_t)n.out_height * n.out_width;
    l.gradient = round_up_16((size_t)n.height * n.width * element);
    l.argmax = l.gradient + (gradient ? round_up_16(windows * element) : 0);
    /* The argmax of every window, or with other 3x3 windows which windows chose each element (below). */
    size_t selections = n.window_3x3 && !n.window_3x3_stride_2 ? (size_t)n.height * n.width : windows;
    l.column_spans = l.argmax + (gradient ? round_up_16(selections * sizeof(uint32_t)) : 0);
    l.row_spans = l.column_spans + (gradient ? round_up_16(n.width * sizeof(window_span)) : 0);
    l.total = l.row_spans + (gradient ? n.height * sizeof(window_span) : 0);
    return l;
}

/* Copies `count` elements of one plane into shared memory, 16 bytes at a
 * time when `vector` (both ends 16-byte aligned). */
template <class T> __device__ void stage_plane(T* shared, const T* plane, uint32_t count, bool vector) {
    if (vector) {
        for (uint32_t i = threadIdx.x; i < count * sizeof(T) / 16; i += blockDim.x)
            ((uint4*)shared)[i] = __ldg((const uint4*)plane + i);
    } else {
        for (uint32_t i = threadIdx.x; i < count; i += blockDim.x)
            shared[i] = plane[i];
    }
}

template <class V, class I, unsigned K>
__global__ void __launch_bounds__(kThreads)
    max_pooling_forward_planes(const nchw_plan n, const void* input, void* output, void* indices, bool vector) {
    typedef typename V::T T;
    extern __shared__ uint4 staged[];
    T* values = (T*)staged;
    const dml_pooling_params& p = n.params;
    const uint32_t plane_size = n.height * n.width, windows = n.out_height * n.out_width;
    const uint32_t plane = blockIdx.x;
    const uint64_t plane_base = (uint64_t)plane * plane_size;
    stage_plane(values, (const T*)input + plane_base, plane_size, vector);
    __syncthreads();
    for (row_walker w(n.out_width); w.row < n.out_height; w.next()) {
        tap_max<V> best;
        if (K == 3 && n.window_3x3_stride_2) {
            best = argmax_3x3_stride_2<V>(values, n, w.row, w.column);
        } else {
            best.position = argmax_2d<V, K>(values, n, (int32_t)(w.row * p.strides[1]) - (int32_t)p.start_padding[1],
                                            (int32_t)(w.column * p.strides[2]) - (int32_t)p.start_padding[2]);
            best.value = best.position == ~0u ? V::lowest() : values[best.position];
        }
        uint64_t out = (uint64_t)plane * windows + w.row * n.out_width + w.column;
        ((T*)output)[out] = best.value;
        if (sizeof(I) > 1) store_index<I>(indices, out, plane_base, best.position);
    }
}

/* ---- 3x3 windows, strides 2, start padding 1, planes at most 64 wide ----
 * One block per plane, each stream of lanes (FLOAT32: a warp; FLOAT16: half
 * a warp, on pairs below) a group of `group_rows` consecutive window rows
 * (forward) or input row pairs (gradient). FLOAT32: lane b the window column b:
 * each input row is one pair load of columns 2b, 2b + 1 per lane, column
 * 2b - 1 comes from lane b - 1, and the row two consecutive window rows share
 * stays in registers; the loads of the next rows are issued before the
 * current ones are used. No shared memory and no block barrier; the scan,
 * comparisons and gradient sums are those of the whole-plane kernels. */
constexpr unsigned kRowWarps = 4;

/* The most window columns (or column pairs) one warp covers. */
constexpr uint32_t kRowLanes = 32;

/* FLOAT16: window column pairs per stream (half a warp), the same planes. */
constexpr uint32_t kPairLanes = 16;

/* One FLOAT32 input row as lane b sees it: columns 2b, 2b + 1, and 2b - 1
 * once `take_left` has run (all lanes of the warp together). */
struct lane_row {
    pair_of<float> pair;
    float left;
    uint32_t row; /* position of the row's first element; all ones outside the input */
    __device__ void take_left() {
        float from_left = __shfl_up_sync(~0u, pair.v[1], 1);
        left = threadIdx.x % kRowLanes == 0 ? absent() : from_left;
    }
    /* The value of a tap outside the input: NaN, which fmaxf skips and which
     * equals nothing (argmax_lane_rows). */
    static __device__ float absent() { return __int_as_float(0x7FFFFFFF); }
};

__device__ __forceinline__ lane_row load_lane_row(const float* plane, const nchw_plan& n, int32_t h) {
    lane_row r = {{{lane_row::absent(), lane_row::absent()}}, lane_row::absent(), ~0u};
    if (h >= 0 && h < (int32_t)n.height) r.row = (uint32_t)h * n.width;
    uint32_t b = threadIdx.x % kRowLanes;
    if (r.row != ~0u && 2 * b < n.width) r.pair = *(const pair_of<float>*)(plane + r.row + 2 * b);
    return r;
}

/* A window's first maximal tap: its position (all ones when no tap is
 * inside the input) and the maximum, in FLOAT32. */
struct lane_max {
    uint32_t position;
    float maximum;
};

/* The first maximal tap of the window over rows top, middle, bottom, by the
 * rule of tap_max::visit in fewer instructions: m, the fmaxf of the taps
 * (which skips NaN, absent taps included), then the first tap equal to m —
 * a NaN never wins over a number and equal values (+0 and -0 too) go to the
 * first; when m is NaN (every tap NaN), the first tap inside the input. */
__device__ __forceinline__ lane_max argmax_lane_rows(const lane_row& top, const lane_row& middle,
                                                     const lane_row& bottom, uint32_t width) {
    const uint32_t b = threadIdx.x % kRowLanes;
    const lane_row* rows[3] = {&top, &middle, &bottom};
    float m = lane_row::absent();
#pragma unroll
    for (int r = 0; r < 3; r++)
        m = fmaxf(m, fmaxf(rows[r]->left, fmaxf(rows[r]->pair.v[0], rows[r]->pair.v[1])));
    const uint32_t first_row = top.row != ~0u ? top.row : middle.row != ~0u ? middle.row : bottom.row;
    const uint32_t first_column = b > 0 && 2 * b - 1 < width ? 2 * b - 1 : 2 * b < width ? 2 * b : ~0u;
    lane_max best = {first_row == ~0u || first_column == ~0u ? ~0u : first_row + first_column, m};
#pragma unroll
    for (int r = 2; r >= 0; r--) { /* backwards: the first equal tap is assigned last */
        const uint32_t right = rows[r]->row + 2 * b;
        if (rows[r]->pair.v[1] == m) best.position = right + 1;
        if (rows[r]->pair.v[0] == m) best.position = right;
        if (rows[r]->left == m) best.position = right - 1;
    }
    return best;
}

/* The chosen input value: the maximum unless it is a zero or NaN, whose
 * bits the maximum may not carry: those are read again. */
__device__ float chosen_value(const float* plane, const lane_max& best) {
    float m = best.maximum;
    if (m == m && m != 0.0f) return m;
    return best.position == ~0u ? f32_type::lowest() : plane[best.position];
}

/* Whether the row kernels take the plan's problem (FLOAT32: a stream of
 * window rows per warp; FLOAT16: per half warp, on pairs), and the streams
 * of a block. The forward takes kRowWarps warps (more, shorter streams hide
 * its loads' latency); the gradient, issue-bound, whole warps that leave the
 * fewest rows idle (ties: more streams), since an idle stream's lanes issue
 * their warp's instructions too. H100, 32x256x56x56 FLOAT16, same run:
 * gradient 4 streams of 7 row pairs 0.055 ms vs 8 of 4 (one idle) 0.061;
 * forward 4 streams of 7 rows 0.046 vs 8 of 4 0.041. Loading two or three
 * row pairs ahead instead of one was no faster (FLOAT32). */
void plan_rows_3x3s2(nchw_plan* n, uint32_t rows, bool gradient) {
    uint32_t columns = n->out_width > n->width / 2 ? n->out_width : n->width / 2;
    n->rows_3x3s2 = n->window_3x3_stride_2 && columns <= kRowLanes;
    const uint32_t per_warp = n->type == DML_TENSOR_DATA_TYPE_FLOAT16 ? 32 / kPairLanes : 1;
    uint32_t idle = UINT32_MAX;
    for (uint32_t warps = kRowWarps; warps >= (gradient ? 1 : kRowWarps); warps--) {
        uint32_t streams = warps * per_warp, group = (rows + streams - 1) / streams;
        if (streams * group - rows < idle)
            idle = streams * group - rows, n->row_streams = streams, n->group_rows = group;
    }
    n->row_threads = n->row_streams * (32 / per_warp);
}

template <class V, class I>
__global__ void __launch_bounds__(kRowWarps * 32)
    max_pooling_forward_3x3s2_rows(const nchw_plan n, const void* input, void* output, void* indices) {
    typedef typename V::T T;
    const uint32_t b = threadIdx.x % kRowLanes, first = threadIdx.x / kRowLanes * n.group_rows;
    const uint32_t end = first + n.group_rows < n.out_height ? first + n.group_rows : n.out_height;
    const uint64_t plane_base = (uint64_t)blockIdx.x * n.height * n.width;
    const T* in = (const T*)input + plane_base;
    if (first >= end) return;
    lane_row top = load_lane_row(in, n, 2 * (int32_t)first - 1);
    lane_row middle = load_lane_row(in, n, 2 * (int32_t)first), bottom = load_lane_row(in, n, 2 * (int32_t)first + 1);
    top.take_left();
    for (uint32_t a = first; a < end; a++) {
        lane_row next_middle = {}, next_bottom = {};
        if (a + 1 < end) {
            next_middle = load_lane_row(in, n, 2 * (int32_t)a + 2);
            next_bottom = load_lane_row(in, n, 2 * (int32_t)a + 3);
        }
        middle.take_left();
        bottom.take_left();
        lane_max best = argmax_lane_rows(top, middle, bottom, n.width);
        if (b < n.out_width) {
            uint64_t out = ((uint64_t)blockIdx.x * n.out_height + a) * n.out_width + b;
            ((T*)output)[out] = chosen_value(in, best);
            if (sizeof(I) > 1) store_index<I>(indices, out, plane_base, best.position);
        }
        top = bottom, middle = next_middle, bottom = next_bottom;
    }
}

/* A window's argmax and output gradient as lane b holds them (position all
 * ones, gradient 0 where the window is not there). */
struct lane_window {
    uint32_t position;
    float gradient;
    __device__ lane_window from_next_lane() const {
        return {__shfl_down_sync(~0u, position, 1), __shfl_down_sync(~0u, gradient, 1)};
    }
};

/* Gradient: warp rows are input row pairs a (rows 2a, 2a + 1), each lane the
 * quad at columns 2b, 2b + 1 of its pair; only windows (a, b), (a, b + 1),
 * (a + 1, b), (a + 1, b + 1) cover the quad, visited in that order
 * (increasing (oh, ow)) as in max_pooling_grad_3x3s2. */
template <class V>
__global__ void __launch_bounds__(kRowWarps * 32)
    max_pooling_grad_3x3s2_rows(const nchw_plan n, const void* input, const void* input_gradient,
                                void* output_gradient) {
    typedef typename V::T T;
    const uint32_t b = threadIdx.x % kRowLanes, first = threadIdx.x / kRowLanes * n.group_rows;
    const uint32_t pairs = n.height / 2, end = first + n.group_rows < pairs ? first + n.group_rows : pairs;
    const uint64_t plane_base = (uint64_t)blockIdx.x * n.height * n.width;
    const T* in = (const T*)input + plane_base;
    const T* dy = (const T*)input_gradient + (uint64_t)blockIdx.x * n.out_height * n.out_width;
    T* dx = (T*)output_gradient + plane_base;
    auto load_gradient = [&](uint32_t oh) {
        return oh < n.out_height && b < n.out_width ? to_float(dy[oh * n.out_width + b]) : 0.0f;
    };
    auto window = [&](uint32_t oh, const lane_row& top, const lane_row& middle, const lane_row& bottom,
                      float gradient) {
        lane_window w = {~0u, gradient};
        if (oh < n.out_height && b < n.out_width) w.position = argmax_lane_rows(top, middle, bottom, n.width).position;
        return w;
    };
    if (first >= end) return;
    /* Window row `first`; then for pair a, window row a + 1 from the row it
     * shares with window row a and two rows loaded one pair ahead. */
    lane_row top = load_lane_row(in, n, 2 * (int32_t)first - 1);
    lane_row middle = load_lane_row(in, n, 2 * (int32_t)first), bottom = load_lane_row(in, n, 2 * (int32_t)first + 1);
    float gradient = load_gradient(first);
    lane_row next_middle = load_lane_row(in, n, 2 * (int32_t)first + 2);
    lane_row next_bottom = load_lane_row(in, n, 2 * (int32_t)first + 3);
    float next_gradient = load_gradient(first + 1);
    top.take_left(), middle.take_left(), bottom.take_left();
    lane_window current = window(first, top, middle, bottom, gradient);
    for (uint32_t a = first; a < end; a++) {
        lane_row ahead_middle = {}, ahead_bottom = {};
        float ahead_gradient = 0.0f;
        if (a + 1 < end) {
            ahead_middle = load_lane_row(in, n, 2 * (int32_t)a + 4);
            ahead_bottom = load_lane_row(in, n, 2 * (int32_t)a + 5);
            ahead_gradient = load_gradient(a + 2);
        }
        next_middle.take_left(), next_bottom.take_left();
        lane_window next = window(a + 1, bottom, next_middle, next_bottom, next_gradient);
        const lane_window covering[4] = {current, current.from_next_lane(), next, next.from_next_lane()};
        const uint32_t top_left = 2 * a * n.width + 2 * b;
        float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* the quad in row-major order */
#pragma unroll
        for (uint32_t k = 0; k < 4; k++) {
            if (b + k % 2 >= n.out_width) continue;            /* lane 31's next lane is itself */
            uint32_t chosen = covering[k].position - top_left; /* huge unless inside the quad's rows (~0u too) */
            if (chosen == 0)
                sums[0] += covering[k].gradient;
            else if (chosen == 1)
                sums[1] += covering[k].gradient;
            else if (chosen == n.width)
                sums[2] += covering[k].gradient;
            else if (chosen == n.width + 1)
                sums[3] += covering[k].gradient;
        }
        if (2 * b < n.width) {
            *(pair_of<T>*)(dx + top_left) = {{from_float<T>(sums[0]), from_float<T>(sums[1])}};
            *(pair_of<T>*)(dx + top_left + n.width) = {{from_float<T>(sums[2]), from_float<T>(sums[3])}};
        }
        current = next, bottom = next_bottom;
        next_middle = ahead_middle, next_bottom = ahead_bottom, next_gradient = ahead_gradient;
    }
}

/* ---- FLOAT16 3x3/2 rows on packed pairs ----
 * The row kernels' scheme in binary16 arithmetic on __half2 pairs, so that
 * each max, compare and select serves two windows: lane c of a stream of
 * kPairLanes lanes (half a warp) holds window columns 2c (low halves) and
 * 2c + 1 (high halves), that is input columns 4c - 1 .. 4c + 3: columns
 * 4c .. 4c + 3 are its own loads, column 4c - 1 comes from lane c - 1. The
 * window maximum is __hmax2 over the nine taps, which returns the other
 * operand when one is NaN (CUDA's documented rule; __hmax2_nan would return
 * NaN instead): NaN taps never win over a number, as decision MP-3 wants,
 * and absent taps are NaN. Then the first tap equal to it in scan order
 * (ties, and -0 == +0, to the first); with no number in the window (every
 * tap NaN), the first tap inside the input. The value is the maximum's own
 * bits unless it is a zero or NaN, whose bits the maximum may not carry
 * (+0 wins over -0, NaN is made canonical): those are read again. So the
 * choices and values of tap_max::visit, the CPU's. */
constexpr uint32_t kAbsentPair = 0x7FFF7FFFu; /* two binary16 NaN */

__device__ __forceinline__ __half2 as_half2(uint32_t bits) {
    __half2 h;
    memcpy(&h, &bits, sizeof h);
    return h;
}

/* One input row as lane c loaded it: columns 4c, 4c + 1 (`low`) and
 * 4c + 2, 4c + 3 (`high`), two binary16 each, NaN where absent. */
struct pair_row {
    uint32_t low, high;
};

/* Row h of the plane at element `plane_base` of `tensor`, addressed by a
 * 32-bit offset from the tensor's start (the plan takes at most INT32_MAX
 * elements): one wide multiply-add per address. Quad: W % 4 == 0 and the
 * input 8-byte aligned, one 8-byte load per row; else two 4-byte loads. Rows
 * of inactive streams are absent. */
template <bool Quad>
__device__ __forceinline__ pair_row load_pair_row(const uint16_t* tensor, uint32_t plane_base, const nchw_plan& n,
                                                  int32_t h, bool active) {
    pair_row r = {kAbsentPair, kAbsentPair};
    const uint32_t column = 4 * (threadIdx.x % kPairLanes);
    if (!active || h < 0 || h >= (int32_t)n.height || column >= n.width) return r;
    const uint32_t at = plane_base + (uint32_t)h * n.width + column;
    if (Quad) {
        uint2 quad = *(const uint2*)(tensor + at);
        r.low = quad.x, r.high = quad.y;
    } else {
        r.low = *(const uint32_t*)(tensor + at);
        if (column + 2 < n.width) r.high = *(const uint32_t*)(tensor + (at + 2)); /* W is even */
    }
    return r;
}

/* The taps of one row for windows 2c (low halves) and 2c + 1 (high), in
 * scan order: columns (4c - 1, 4c + 1), (4c, 4c + 2), (4c + 1, 4c + 3).
 * All lanes of the warp together (a shuffle). */
struct pair_taps {
    uint32_t tap[3];
};

__device__ __forceinline__ pair_taps taps_of(const pair_row& r) {
    uint32_t from_left = __shfl_up_sync(~0u, r.high, 1, kPairLanes);
    if (threadIdx.x % kPairLanes == 0) from_left = kAbsentPair;
    return {{__byte_perm(from_left, r.low, 0x7632), __byte_perm(r.low, r.high, 0x5410),
             __byte_perm(r.low, r.high, 0x7632)}};
}

/* The first tap inside the input of window (a, b) (3x3, strides 2, start
 * padding 1): what a window whose taps are all NaN chooses; all ones when
 * none is inside (MP-2). */
__device__ __forceinline__ uint32_t first_tap_inside(const nchw_plan& n, uint32_t a, uint32_t b) {
    const uint32_t row = a > 0 ? 2 * a - 1 : 0, column = b > 0 ? 2 * b - 1 : 0;
    return row < n.height && column < n.width ? row * n.width + column : ~0u;
}

/* Windows (a, 2c) and (a, 2c + 1) over the rows top, middle, bottom: the
 * first maximal taps' positions (meaningful where the window is inside the
 * output, and, until settle, where the maximum is a number) and the maximum,
 * two binary16. */
struct pair_max {
    uint32_t position[2];
    uint32_t maximum;
    __device__ uint16_t half(uint32_t j) const { return (uint16_t)(maximum >> (16 * j)); }
    /* Whether half j of the maximum is NaN: no tap of its window is a number. */
    __device__ bool nan(uint32_t j) const { return (half(j) & 0x7FFFu) > 0x7C00u; }
    /* Whether half j is the chosen tap's value: a nonzero number, whose
     * encoding is unique (__hmax2 may turn -0 into +0, and makes NaN
     * canonical): else the value is read again. */
    __device__ bool is_value(uint32_t j) const { return (uint32_t)(half(j) & 0x7FFFu) - 1u < 0x7C00u; }
    /* Both halves are values: one comparison of their magnitudes (NaN and zero fail). */
    __device__ bool are_values() const { return __hbgt2(__habs2(as_half2(maximum)), as_half2(0)); }
    /* The position of an all-NaN window of half j too. */
    __device__ void settle(const nchw_plan& n, uint32_t a, uint32_t j) {
        if (nan(j)) position[j] = first_tap_inside(n, a, 2 * (threadIdx.x % kPairLanes) + j);
    }
};

__device__ __forceinline__ pair_max argmax_pair_rows(const pair_taps& top, const pair_taps& middle,
                                                     const pair_taps& bottom, uint32_t a, const nchw_plan& n) {
    const pair_taps* rows[3] = {&top, &middle, &bottom};
    __half2 m = as_half2(kAbsentPair);
#pragma unroll
    for (int r = 0; r < 3; r++)
#pragma unroll
        for (int k = 0; k < 3; k++)
            m = __hmax2(m, as_half2(rows[r]->tap[k]));
    /* Tap (r, k) equal to the maximum: bit 11 - 4r - k (low window), 27 -
     * 4r - k (high window), so that the first equal tap in scan order is the
     * window's highest bit: one bit scan, no bit reversal, and the high
     * window's without masking. */
    uint32_t equal = 0;
#pragma unroll
    for (int r = 0; r < 3; r++)
#pragma unroll
        for (int k = 0; k < 3; k++)
            equal |= __heq2_mask(as_half2(rows[r]->tap[k]), m) & (0x00010001u << (11 - 4 * r - k));
    pair_max best;
    memcpy(&best.maximum, &m, sizeof m);
    const uint32_t c = threadIdx.x % kPairLanes;
    const uint32_t highest[2] = {31u - __clz(equal & 0xFFFu), 31u - __clz(equal)};
#pragma unroll
    for (uint32_t j = 0; j < 2; j++) {
        /* Bit h = 16j + 4(2 - r) + 3 - k: tap (r, k) in row 2a - 1 + r, column
         * 4c + 2j - 1 + k (wrapping for a = 0, c = j = 0: no tap there is
         * equal); no bit (every tap NaN): settle. */
        const uint32_t h = highest[j];
        best.position[j] = (2 * a + 1 + 4 * j) * n.width + 4 * c + 2 * j + 2 - (h >> 2) * n.width - (h & 3);
    }
    return best;
}

/* Lane c of a stream and its first row: the stream takes rows (forward:
 * window rows; gradient: row pairs) [first, first + group_rows), the same
 * count for both streams of a warp (their shuffles run together); rows past
 * the plane's are inactive. */
struct pair_stream {
    uint32_t c, first;
    __device__ explicit pair_stream(const nchw_plan& n)
        : c(threadIdx.x % kPairLanes), first(threadIdx.x / kPairLanes * n.group_rows) {}
};

template <class I, bool Quad>
__global__ void __launch_bounds__(kRowWarps * 32)
    max_pooling_forward_3x3s2_pairs(const nchw_plan n, const void* input, void* output, void* indices,
                                    bool pair_stores) {
    const pair_stream s(n);
    const uint32_t plane_base = blockIdx.x * n.height * n.width; /* 32-bit offsets (load_pair_row) */
    const uint16_t* in = (const uint16_t*)input + plane_base;
    const int32_t first = (int32_t)s.first;
    const uint32_t ow = 2 * s.c;
    uint32_t out = (blockIdx.x * n.out_height + s.first) * n.out_width + ow;
    pair_taps top =
        taps_of(load_pair_row<Quad>((const uint16_t*)input, plane_base, n, 2 * first - 1, s.first < n.out_height));
    pair_row middle = load_pair_row<Quad>((const uint16_t*)input, plane_base, n, 2 * first, s.first < n.out_height);
    pair_row bottom = load_pair_row<Quad>((const uint16_t*)input, plane_base, n, 2 * first + 1, s.first < n.out_height);
    for (uint32_t a = s.first; a < s.first + n.group_rows; a++, out += n.out_width) {
        const bool next_active = a + 1 < n.out_height && a + 1 < s.first + n.group_rows;
        pair_row next_middle =
            load_pair_row<Quad>((const uint16_t*)input, plane_base, n, 2 * (int32_t)a + 2, next_active);
        pair_row next_bottom =
            load_pair_row<Quad>((const uint16_t*)input, plane_base, n, 2 * (int32_t)a + 3, next_active);
        const pair_taps middle_taps = taps_of(middle), bottom_taps = taps_of(bottom);
        pair_max best = argmax_pair_rows(top, middle_taps, bottom_taps, a, n);
        if (a < n.out_height && ow < n.out_width) {
            const bool both = ow + 1 < n.out_width; /* window 2c + 1 is there too (always with pair_stores) */
            uint16_t value[2] = {best.half(0), best.half(1)};
            I index[2] = {(I)(plane_base + best.position[0]), (I)(plane_base + best.position[1])};
            if (both ? !best.are_values() : !best.is_value(0)) {
#pragma unroll
                for (uint32_t j = 0; j < 2; j++)
                    if ((j == 0 || both) && !best.is_value(j)) {
                        best.settle(n, a, j);
                        value[j] = best.position[j] == ~0u ? f16_type::lowest() : in[best.position[j]];
                        index[j] = index_of<I>(plane_base, best.position[j]);
                    }
            }
            if (pair_stores) {
                *(pair_of<uint16_t>*)((uint16_t*)output + out) = {{value[0], value[1]}};
                if (sizeof(I) > 1) *(pair_of<I>*)((I*)indices + out) = {{index[0], index[1]}};
            } else {
                ((uint16_t*)output)[out] = value[0];
                if (sizeof(I) > 1) ((I*)indices)[out] = index[0];
                if (both) {
                    ((uint16_t*)output)[out + 1] = value[1];
                    if (sizeof(I) > 1) ((I*)indices)[out + 1] = index[1];
                }
            }
        }
        top = bottom_taps, middle = next_middle, bottom = next_bottom;
    }
}

/* Gradient: stream rows are input row pairs a (rows 2a, 2a + 1), lane c the
 * two quads at columns 4c .. 4c + 3. Windows (a, 2c), (a, 2c + 1), (a, 2c + 2),
 * then (a + 1, ...) the same, cover them, visited in that order (increasing
 * (oh, ow)) as in max_pooling_grad_3x3s2; window 2c + 2 is lane c + 1's low
 * window. Window (a, x) reaches both rows of the pair, (a + 1, x) the second. */
struct pair_windows {
    uint32_t position[2]; /* all ones where the window is not there */
    uint32_t gradient;    /* two binary16: the windows' output gradients */
};

/* The sums of the 2 x 4 elements at top_left (row-major, in FLOAT32) plus
 * gradient g of a window that chose `position`, for the columns
 * [First, Last] that the window reaches and, unless Both, the second row only. */
template <uint32_t First, uint32_t Last, bool Both>
__device__ __forceinline__ void add_chosen(float sums[8], uint32_t position, uint32_t top_left, uint32_t width,
                                           float g) {
    const uint32_t d = position - top_left; /* huge unless inside the pair's rows (all ones too) */
#pragma unroll
    for (uint32_t r = Both ? 0 : 1; r < 2; r++)
#pragma unroll
        for (uint32_t k = First; k <= Last; k++)
            if (d == r * width + k) sums[4 * r + k] += g;
}

__device__ __forceinline__ float low_half(uint32_t bits) { return dml_cuda_widen((uint16_t)bits); }
__device__ __forceinline__ float high_half(uint32_t bits) { return dml_cuda_widen((uint16_t)(bits >> 16)); }

template <bool Quad>
__global__ void __launch_bounds__(kRowWarps * 32)
    max_pooling_grad_3x3s2_pairs(const nchw_plan n, const void* input, const void* input_gradient,
                                 void* output_gradient, bool pair_gradients) {
    const pair_stream s(n);
    const uint32_t pairs = n.height / 2;
    const uint32_t plane_base = blockIdx.x * n.height * n.width; /* 32-bit offsets (load_pair_row) */
    const uint16_t* dy = (const uint16_t*)input_gradient + (uint64_t)blockIdx.x * n.out_height * n.out_width;
    uint16_t* dx = (uint16_t*)output_gradient + plane_base;
    const uint32_t ow = 2 * s.c;
    auto load_gradients = [&](uint32_t oh) {
        if (oh >= n.out_height || ow >= n.out_width) return 0u;
        const uint16_t* at = dy + oh * n.out_width + ow;
        if (pair_gradients) return *(const uint32_t*)at; /* OW even */
        return (uint32_t)at[0] | (ow + 1 < n.out_width ? (uint32_t)at[1] << 16 : 0u);
    };
    auto windows = [&](uint32_t oh, const pair_taps& top, const pair_taps& middle, const pair_taps& bottom,
                       uint32_t gradients) {
        pair_windows w = {{~0u, ~0u}, gradients};
        if (oh < n.out_height) {
            pair_max best = argmax_pair_rows(top, middle, bottom, oh, n);
            best.settle(n, oh, 0), best.settle(n, oh, 1);
            if (ow < n.out_width) w.position[0] = best.position[0];
            if (ow + 1 < n.out_width) w.position[1] = best.position[1];
        }
        return w;
    };
    const bool active = s.first < pairs;
    const int32_t first = (int32_t)s.first;
    /* Window row `first`; then for pair a, window row a + 1 from the row it
     * shares with window row a and two rows loaded one pair ahead. */
    const pair_taps top = taps_of(load_pair_row<Quad>((const uint16_t*)input, plane_base, n, 2 * first - 1, active));
    const pair_taps middle = taps_of(load_pair_row<Quad>((const uint16_t*)input, plane_base, n, 2 * first, active));
    pair_taps bottom = taps_of(load_pair_row<Quad>((const uint16_t*)input, plane_base, n, 2 * first + 1, active));
    pair_windows current = windows(active ? s.first : ~0u, top, middle, bottom, load_gradients(s.first));
    pair_row next_middle = load_pair_row<Quad>((const uint16_t*)input, plane_base, n, 2 * first + 2, active);
    pair_row next_bottom = load_pair_row<Quad>((const uint16_t*)input, plane_base, n, 2 * first + 3, active);
    uint32_t next_gradients = load_gradients(s.first + 1);
    for (uint32_t a = s.first; a < s.first + n.group_rows; a++) {
        const bool ahead = a + 1 < pairs && a + 1 < s.first + n.group_rows;
        pair_row ahead_middle = load_pair_row<Quad>((const uint16_t*)input, plane_base, n, 2 * (int32_t)a + 4, ahead);
        pair_row ahead_bottom = load_pair_row<Quad>((const uint16_t*)input, plane_base, n, 2 * (int32_t)a + 5, ahead);
        uint32_t ahead_gradients = ahead ? load_gradients(a + 2) : 0u;
        const pair_taps next_middle_taps = taps_of(next_middle), next_bottom_taps = taps_of(next_bottom);
        const pair_windows next =
            windows(a < pairs ? a + 1 : ~0u, bottom, next_middle_taps, next_bottom_taps, next_gradients);
        /* Lane c + 1's low windows (the last lane has none: 2c + 2 >= 32 >= OW). */
        uint32_t right[2] = {__shfl_down_sync(~0u, current.position[0], 1, kPairLanes),
                             __shfl_down_sync(~0u, next.position[0], 1, kPairLanes)};
        const uint32_t right_gradients[2] = {__shfl_down_sync(~0u, current.gradient, 1, kPairLanes),
                                             __shfl_down_sync(~0u, next.gradient, 1, kPairLanes)};
        if (s.c + 1 == kPairLanes) right[0] = right[1] = ~0u;
        const uint32_t top_left = 2 * a * n.width + 4 * s.c;
        float sums[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        add_chosen<0, 1, true>(sums, current.position[0], top_left, n.width, low_half(current.gradient));
        add_chosen<1, 3, true>(sums, current.position[1], top_left, n.width, high_half(current.gradient));
        add_chosen<3, 3, true>(sums, right[0], top_left, n.width, low_half(right_gradients[0]));
        add_chosen<0, 1, false>(sums, next.position[0], top_left, n.width, low_half(next.gradient));
        add_chosen<1, 3, false>(sums, next.position[1], top_left, n.width, high_half(next.gradient));
        add_chosen<3, 3, false>(sums, right[1], top_left, n.width, low_half(right_gradients[1]));
        if (a < pairs && 4 * s.c < n.width) {
#pragma unroll
            for (uint32_t r = 0; r < 2; r++) {
                uint16_t* at = dx + top_left + r * n.width;
                const pair_of<uint16_t> left = {
                    {from_float<uint16_t>(sums[4 * r]), from_float<uint16_t>(sums[4 * r + 1])}};
                const pair_of<uint16_t> right_pair = {
                    {from_float<uint16_t>(sums[4 * r + 2]), from_float<uint16_t>(sums[4 * r + 3])}};
                if (Quad) {
                    *(quad_of<uint16_t>*)at = {{left.v[0], left.v[1], right_pair.v[0], right_pair.v[1]}};
                } else {
                    *(pair_of<uint16_t>*)at = left;
                    if (4 * s.c + 2 < n.width) *(pair_of<uint16_t>*)(at + 2) = right_pair;
                }
            }
        }
        current = next, bottom = next_bottom_taps;
        next_middle = ahead_middle, next_bottom = ahead_bottom, next_gradients = ahead_gradients;
    }
}

template <class V, class I> HRESULT launch_forward_nchw(const dml_kernel_args* args, const nchw_plan& n) {
    const void* input = args->inputs[DML_POOL_INPUT];
    void* output = args->outputs[DML_POOL_OUTPUT];
    void* indices = n.index_bytes ? args->outputs[DML_POOL_OUTPUT_INDICES] : nullptr;
    cudaStream_t stream = dml_cuda_stream(args);
    /* Bindings need only element alignment: the vector form wants more. */
    const size_t element = sizeof(typename V::T);
    if (n.tiles_2x2 && aligned_to(input, 2 * n.tile_windows * element) &&
        aligned_to(output, n.tile_windows * element) && (!indices || aligned_to(indices, 2 * sizeof(I)))) {
        if constexpr (sizeof(typename V::T) == 2)
            if (n.tile_windows == 4) {
                max_pooling_forward_2x2<V, I, 4><<<n.blocks, kThreads, 0, stream>>>(n, input, output, indices);
                return dml_cuda_check_launch("max_pooling_forward_2x2");
            }
        max_pooling_forward_2x2<V, I, 2><<<n.blocks, kThreads, 0, stream>>>(n, input, output, indices);
        return dml_cuda_check_launch("max_pooling_forward_2x2");
    }
    if constexpr (sizeof(typename V::T) == 2)
        if (n.rows_3x3s2 && aligned_to(input, 4)) {
            bool pair_stores =
                n.out_width % 2 == 0 && aligned_to(output, 4) && (!indices || aligned_to(indices, 2 * sizeof(I)));
            if (n.width % 4 == 0 && aligned_to(input, 8))
                max_pooling_forward_3x3s2_pairs<I, true>
                    <<<n.planes, n.row_threads, 0, stream>>>(n, input, output, indices, pair_stores);
            else
                max_pooling_forward_3x3s2_pairs<I, false>
                    <<<n.planes, n.row_threads, 0, stream>>>(n, input, output, indices, pair_stores);
            return dml_cuda_check_launch("max_pooling_forward_3x3s2_pairs");
        }
    if constexpr (sizeof(typename V::T) == 4)
        if (n.rows_3x3s2 && aligned_to(input, 8)) {
            max_pooling_forward_3x3s2_rows<V, I><<<n.planes, n.row_threads, 0, stream>>>(n, input, output, indices);
            return dml_cuda_check_launch("max_pooling_forward_3x3s2_rows");
        }
    if (n.whole_planes) {
        bool vector = aligned_to(input, 16) && (size_t)n.height * n.width * sizeof(typename V::T) % 16 == 0;
        size_t shared_bytes = plane_layout_of(n, sizeof(typename V::T), false).total;
        if (n.window_3x3)
            max_pooling_forward_planes<V, I, 3>
                <<<n.planes, kThreads, shared_bytes, stream>>>(n, input, output, indices, vector);
        else
            max_pooling_forward_planes<V, I, 0>
                <<<n.planes, kThreads, shared_bytes, stream>>>(n, input, output, indices, vector);
        return dml_cuda_check_launch("max_pooling_forward_planes");
    }
    nchw_plan scalar = n;
    scalar.count = (uint64_t)n.planes * n.out_height * n.out_width;
    scalar.blocks = grid_blocks(args->device, scalar.count);
    max_pooling_forward_nchw<V, I><<<scalar.blocks, kThreads, 0, stream>>>(scalar, input, output, indices);
    return dml_cuda_check_launch("max_pooling_forward_nchw");
}

template <class V> HRESULT dispatch_forward_nchw(const dml_kernel_args* args, const nchw_plan& n) {
    switch (n.index_bytes) {
    case 4: return launch_forward_nchw<V, uint32_t>(args, n);
    case 8: return launch_forward_nchw<V, uint64_t>(args, n);
    default: return launch_forward_nchw<V, uint8_t>(args, n); /* no indices */
    }
}

/* Whether whole planes fit the shared memory of a block (a quarter of a
 * multiprocessor's at most, so that several blocks overlap their loads) and
 * overlap enough to gain from staging (windows not tiling the input). */
bool fits_whole_planes(const nchw_plan& n, bool gradient) {
    size_t element = n.type == DML_TENSOR_DATA_TYPE_FLOAT16 ? 2 : 4;
    return !n.tiles_exact && n.planes <= INT32_MAX && plane_layout_of(n, element, gradient).total <= 32 * 1024;
}

HRESULT plan_forward_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    const dml_tensor& output = op->outputs[DML_POOL_OUTPUT].tensor;
    const dml_tensor* indices =
        op->output_count > DML_POOL_OUTPUT_INDICES ? &op->outputs[DML_POOL_OUTPUT_INDICES].tensor : nullptr;
    if (indices && indices->present && !dml_cuda_packed_nchw(*indices)) return S_FALSE;
    bool declined;
    nchw_plan* n =
        plan_nchw(op->inputs[DML_POOL_INPUT].tensor, output, *(const dml_pooling_params*)op->params, plan, &declined);
    if (n == nullptr) return declined ? S_FALSE : E_OUTOFMEMORY;
    n->index_bytes = indices && indices->present ? dmlDataTypeSize(indices->type) : 0;
    uint64_t outputs = (uint64_t)n->planes * n->out_height * n->out_width;
    /* FLOAT16 rows of whole 16-byte vectors: 4 windows per thread. */
    bool half = n->type == DML_TENSOR_DATA_TYPE_FLOAT16;
    n->tile_windows = half && n->width % 8 == 0 ? 4 : 2;
    n->count = n->tiles_2x2 ? outputs / n->tile_windows : outputs;
    n->blocks = grid_blocks(device, n->count);
    n->whole_planes = !n->tiles_2x2 && fits_whole_planes(*n, false);
    plan_rows_3x3s2(n, n->out_height, false);
    return S_OK;
}

HRESULT run_forward_nchw(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const nchw_plan& n = *DML_PLAN_STATE(args, nchw_plan);
    return n.type == DML_TENSOR_DATA_TYPE_FLOAT16 ? dispatch_forward_nchw<f16_cvt_type>(args, n)
                                                  : dispatch_forward_nchw<f32_type>(args, n);
}

/* Gradient, windows tiling the input: one thread per window. The gradient of
 * its argmax is 0 + dy in FLOAT32 (as the strided gather sums, so -0 becomes
 * +0), every other element of the window 0. */
template <class V>
__global__ void __launch_bounds__(kThreads)
    max_pooling_grad_tiles(const nchw_plan n, const void* input, const void* input_gradient, void* output_gradient) {
    typedef typename V::T T;
    const dml_pooling_params& p = n.params;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n.count; i += gridDim.x * blockDim.x) {
        window_at at = window_of(n, i);
        uint32_t oh = at.oh, ow = at.ow;
        uint64_t plane_base = at.plane_base;
        const T* in = (const T*)input + plane_base;
        T* dx = (T*)output_gradient + plane_base;
        uint32_t h0 = oh * p.window[1], w0 = ow * p.window[2];
        uint32_t position = argmax_2d<V>(in, n, (int32_t)h0, (int32_t)w0);
        T gradient = from_float<T>(0.0f + to_float(((const T*)input_gradient)[i])), zero = from_float<T>(0.0f);
        for (uint32_t h = h0; h < h0 + p.window[1]; h++)
            for (uint32_t w = w0; w < w0 + p.window[2]; w++)
                dx[h * n.width + w] = h * n.width + w == position ? gradient : zero;
    }
}

/* The same for 2x2 windows, two neighbouring windows per thread, 4-element rows. */
template <class V>
__global__ void __launch_bounds__(kThreads)
    max_pooling_grad_2x2(const nchw_plan n, const void* input, const void* input_gradient, void* output_gradient) {
    typedef typename V::T T;
    uint32_t pairs_per_row = n.out_width / 2;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n.count; i += gridDim.x * blockDim.x) {
        uint32_t pair = i % pairs_per_row, row = i / pairs_per_row;
        uint32_t plane = row / n.out_height, oh = row % n.out_height;
        uint64_t top = (uint64_t)plane * n.height * n.width + (2 * oh) * n.width + 4 * pair;
        const T* in = (const T*)input + top;
        quad_of<T> r0 = *(const quad_of<T>*)in, r1 = *(const quad_of<T>*)(in + n.width);
        pair_of<T> dy = *(const pair_of<T>*)((const T*)input_gradient + (uint64_t)row * n.out_width + 2 * pair);
        quad_of<T> d0, d1;
        T zero = from_float<T>(0.0f);
        for (int k = 0; k < 2; k++) {
            T q[4] = {r0.v[2 * k], r0.v[2 * k + 1], r1.v[2 * k], r1.v[2 * k + 1]};
            int best = first_max4<V>(q);
            T gradient = from_float<T>(0.0f + to_float(dy.v[k]));
            d0.v[2 * k] = best == 0 ? gradient : zero;
            d0.v[2 * k + 1] = best == 1 ? gradient : zero;
            d1.v[2 * k] = best == 2 ? gradient : zero;
            d1.v[2 * k + 1] = best == 3 ? gradient : zero;
        }
        T* dx = (T*)output_gradient + top;
        *(quad_of<T>*)dx = d0;
        *(quad_of<T>*)(dx + n.width) = d1;
    }
}

/* The gradient at input `position`: the sum, in increasing (oh, ow), of the
 * output gradients of the windows within spans sh, sw whose argmax it is
 * (argmax[window - first_window]), in FLOAT32 from +0 as the strided gather. */
template <class T>
__device__ float gather_sum(const window_span& sh, const window_span& sw, const uint32_t* argmax, uint32_t first_window,
                            uint32_t out_width, const T* dy, uint32_t position) {
    float sum = 0.0f;
    for (uint32_t oh = sh.first; oh < sh.end; oh++) {
        if (!sh.on_tap(oh)) continue;
        for (uint32_t ow = sw.first; ow < sw.end; ow++) {
            if (!sw.on_tap(ow)) continue;
            uint32_t window = oh * out_width + ow;
            if (argmax[window - first_window] == position) sum += to_float(dy[window]);
        }
    }
    return sum;
}

/* Gradient, gather form: block b handles input rows [band * band_rows, ...)
 * of plane b / bands. The windows that cover the band are rows
 * [first, last] of the plane's windows; their argmaxes go to shared memory,
 * then each element sums, in increasing (oh, ow), the gradient of the windows
 * whose argmax it is: the strided gather's order and precision. The covering
 * windows of every column, and of the band's rows, are computed once into
 * shared memory too. */
template <class V>
__global__ void __launch_bounds__(kThreads)
    max_pooling_grad_bands(const nchw_plan n, const void* input, const void* input_gradient, void* output_gradient) {
    typedef typename V::T T;
    extern __shared__ window_span spans[]; /* [width] columns, [band_rows] rows, then the argmaxes */
    window_span* row_spans = spans + n.width;
    uint32_t* argmax = (uint32_t*)(row_spans + n.band_rows); /* [band_windows][out_width] */
    const dml_pooling_params& p = n.params;
    for (uint32_t x = threadIdx.x; x < n.width; x += blockDim.x)
        spans[x] = covering_span(p, 2, x, n.out_width);
    uint32_t bands = (n.height + n.band_rows - 1) / n.band_rows;
    for (uint32_t b = blockIdx.x; b < n.count; b += gridDim.x) {
        uint32_t plane = b / bands, y0 = (b % bands) * n.band_rows;
        uint32_t y1 = y0 + n.band_rows < n.height ? y0 + n.band_rows : n.height;
        uint64_t plane_base = (uint64_t)plane * n.height * n.width;
        const T* in = (const T*)input + plane_base;
        const T* dy = (const T*)input_gradient + (uint64_t)plane * n.out_height * n.out_width;
        window_span top = covering_span(p, 1, y0, n.out_height), bottom = covering_span(p, 1, y1 - 1, n.out_height);
        uint32_t first = top.first, rows = bottom.end > top.first ? bottom.end - top.first : 0;
        __syncthreads(); /* the previous band is done with argmax and row_spans */
        for (uint32_t y = y0 + threadIdx.x; y < y1; y += blockDim.x)
            row_spans[y - y0] = covering_span(p, 1, y, n.out_height);
        for (row_walker w(n.out_width); w.row < rows; w.next())
            argmax[w.row * n.out_width + w.column] =
                argmax_2d<V>(in, n, (int32_t)((first + w.row) * p.strides[1]) - (int32_t)p.start_padding[1],
                             (int32_t)(w.column * p.strides[2]) - (int32_t)p.start_padding[2]);
        __syncthreads();
        for (row_walker w(n.width); w.row < y1 - y0; w.next()) {
            uint32_t position = (y0 + w.row) * n.width + w.column;
            float sum =
                gather_sum(row_spans[w.row], spans[w.column], argmax, first * n.out_width, n.out_width, dy, position);
            ((T*)output_gradient)[plane_base + position] = from_float<T>(sum);
        }
    }
}

/* Gradient, whole planes (see max_pooling_forward_planes): the plane's
 * input and output gradient staged in shared memory, the argmax of every
 * window from there, then the gather of max_pooling_grad_bands over the whole
 * plane: the same sums in the same order. With K x K windows (K > 0) each
 * window instead sets its bit in a mask of the element it chose, bit
 * (oh - first) * K + (ow - first) of the windows covering the element, and
 * each element adds the gradients of its set bits in increasing order: the
 * same windows in the same (oh, ow) order, without scanning the others. */
template <class V, unsigned K>
__global__ void __launch_bounds__(kThreads)
    max_pooling_grad_planes(const nchw_plan n, const void* input, const void* input_gradient, void* output_gradient,
                            bool vector_input, bool vector_gradient) {
    typedef typename V::T T;
    extern __shared__ uint4 staged[];
    const plane_layout l = plane_layout_of(n, sizeof(T), true);
    T* values = (T*)staged;
    T* dy = (T*)((char*)staged + l.gradient);
    uint32_t* argmax = (uint32_t*)((char*)staged + l.argmax); /* K > 0: [H * W] masks */
    window_span* column_spans = (window_span*)((char*)staged + l.column_spans);
    window_span* row_spans = (window_span*)((char*)staged + l.row_spans);
    const dml_pooling_params& p = n.params;
    const uint32_t plane_size = n.height * n.width, windows = n.out_height * n.out_width;
    const uint32_t plane = blockIdx.x;
    const uint64_t plane_base = (uint64_t)plane * plane_size;
    stage_plane(values, (const T*)input + plane_base, plane_size, vector_input);
    stage_plane(dy, (const T*)input_gradient + (uint64_t)plane * windows, windows, vector_gradient);
    for (uint32_t x = threadIdx.x; x < n.width; x += blockDim.x)
        column_spans[x] = covering_span(p, 2, x, n.out_width);
    for (uint32_t y = threadIdx.x; y < n.height; y += blockDim.x)
        row_spans[y] = covering_span(p, 1, y, n.out_height);
    if constexpr (K > 0)
        for (uint32_t i = threadIdx.x; i < plane_size; i += blockDim.x)
            argmax[i] = 0;
    __syncthreads();
    for (row_walker w(n.out_width); w.row < n.out_height; w.next()) {
        uint32_t position = argmax_2d<V, K>(values, n, (int32_t)(w.row * p.strides[1]) - (int32_t)p.start_padding[1],
                                            (int32_t)(w.column * p.strides[2]) - (int32_t)p.start_padding[2]);
        if constexpr (K == 0) {
            argmax[w.row * n.out_width + w.column] = position;
        } else if (position != ~0u) {
            uint32_t h = position / n.width, x = position - h * n.width;
            atomicOr(&argmax[position], 1u << ((w.row - row_spans[h].first) * K + (w.column - column_spans[x].first)));
        }
    }
    __syncthreads();
    if constexpr (K > 0) {
        for (row_walker w(n.width); w.row < n.height; w.next()) {
            uint32_t position = w.row * n.width + w.column;
            float sum = 0.0f;
            for (uint32_t mask = argmax[position]; mask != 0; mask &= mask - 1) {
                uint32_t bit = __ffs(mask) - 1;
                sum += to_float(
                    dy[(row_spans[w.row].first + bit / K) * n.out_width + column_spans[w.column].first + bit % K]);
            }
            ((T*)output_gradient)[plane_base + position] = from_float<T>(sum);
        }
    } else {
        for (row_walker w(n.width); w.row < n.height; w.next()) {
            uint32_t position = w.row * n.width + w.column;
            float sum = gather_sum(row_spans[w.row], column_spans[w.column], argmax, 0, n.out_width, dy, position);
            ((T*)output_gradient)[plane_base + position] = from_float<T>(sum);
        }
    }
}

/* Gradient of 3x3 windows with strides 2 and start padding 1 over planes of
 * even H and W, whole planes (see max_pooling_grad_planes): thread (a, b)
 * finds the argmax of window (a, b), then sums the gradients of the input
 * quad at rows 2a, 2a + 1 and columns 2b, 2b + 1. Only windows a, a + 1
 * (rows) and b, b + 1 (columns) cover the quad; visited in increasing
 * (oh, ow), each adds its gradient to the element it chose: the sums and the
 * order of max_pooling_grad_planes, without its masks, atomics and divisions,
 * and the quad stored as two pairs (`pair_stores`: OutputGradient aligned to
 * two elements; else four elements). */
template <class V>
__global__ void __launch_bounds__(kThreads)
    max_pooling_grad_3x3s2(const nchw_plan n, const void* input, const void* input_gradient, void* output_gradient,
                           bool vector_input, bool vector_gradient, bool pair_stores) {
    typedef typename V::T T;
    extern __shared__ uint4 staged[];
    const plane_layout l = plane_layout_of(n, sizeof(T), true);
    T* values = (T*)staged;
    T* dy = (T*)((char*)staged + l.gradient);
    uint32_t* argmax = (uint32_t*)((char*)staged + l.argmax); /* [OH * OW] */
    const uint32_t plane_size = n.height * n.width, windows = n.out_height * n.out_width;
    const uint64_t plane_base = (uint64_t)blockIdx.x * plane_size;
    stage_plane(values, (const T*)input + plane_base, plane_size, vector_input);
    stage_plane(dy, (const T*)input_gradient + (uint64_t)blockIdx.x * windows, windows, vector_gradient);
    __syncthreads();
    for (row_walker w(n.out_width); w.row < n.out_height; w.next())
        argmax[w.row * n.out_width + w.column] = argmax_3x3_stride_2<V>(values, n, w.row, w.column).position;
    __syncthreads();
    T* dx = (T*)output_gradient + plane_base;
    for (row_walker q(n.width / 2); q.row < n.height / 2; q.next()) {
        uint32_t top_left = 2 * q.row * n.width + 2 * q.column;
        float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* the quad in row-major order */
#pragma unroll
        for (uint32_t k = 0; k < 4; k++) {
            uint32_t oh = q.row + k / 2, ow = q.column + k % 2;
            if (oh >= n.out_height || ow >= n.out_width) continue;
            uint32_t window = oh * n.out_width + ow;
            uint32_t chosen = argmax[window] - top_left; /* huge unless inside the quad's rows (~0u too) */
            float gradient = to_float(dy[window]);
            if (chosen == 0)
                sums[0] += gradient;
            else if (chosen == 1)
                sums[1] += gradient;
            else if (chosen == n.width)
                sums[2] += gradient;
            else if (chosen == n.width + 1)
                sums[3] += gradient;
        }
        pair_of<T> top = {{from_float<T>(sums[0]), from_float<T>(sums[1])}};
        pair_of<T> bottom = {{from_float<T>(sums[2]), from_float<T>(sums[3])}};
        if (pair_stores) {
            *(pair_of<T>*)(dx + top_left) = top;
            *(pair_of<T>*)(dx + top_left + n.width) = bottom;
        } else {
            dx[top_left] = top.v[0], dx[top_left + 1] = top.v[1];
            dx[top_left + n.width] = bottom.v[0], dx[top_left + n.width + 1] = bottom.v[1];
        }
    }
}

/* Shared memory of max_pooling_grad_bands. */
size_t bands_shared_bytes(const nchw_plan& n) {
    return ((size_t)n.width + n.band_rows) * sizeof(window_span) +
           (size_t)n.band_windows * n.out_width * sizeof(uint32_t);
}

HRESULT plan_grad_nchw(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    const dml_tensor& input = op->inputs[DML_POOL_INPUT].tensor;
    const dml_tensor& dy = op->inputs[DML_POOL_INPUT_GRADIENT].tensor;
    if (!dml_cuda_packed_nchw(op->outputs[DML_POOL_OUTPUT].tensor)) return S_FALSE;
    const dml_pooling_params& p = *(const dml_pooling_params*)op->params;
    bool declined;
    nchw_plan* n = plan_nchw(input, dy, p, plan, &declined);
    if (n == nullptr) return declined ? S_FALSE : E_OUTOFMEMORY;
    uint64_t windows = (uint64_t)n->planes * n->out_height * n->out_width;
    if (n->tiles_exact) {
        n->count = n->tiles_2x2 ? windows / 2 : windows;
        n->blocks = grid_blocks(device, n->count);
        return S_OK;
    }
    n->whole_planes = fits_whole_planes(*n, true);
    plan_rows_3x3s2(n, n->height / 2, true);
    if (n->whole_planes) return S_OK;
    /* Bands of about 16 elements per thread and at most 256 rows; the window
     * rows that can cover `band_rows` input rows: those o with o * stride in
     * a span of band_rows - 1 + reach. */
    uint32_t rows = (16 * kThreads) / n->width;
    n->band_rows = rows < 1 ? 1 : rows > 256 ? 256 : rows;
    if (n->band_rows > n->height) n->band_rows = n->height;
    uint64_t reach = (uint64_t)(p.window[1] - 1) * p.dilations[1];
    uint64_t band_windows = (n->band_rows - 1 + reach) / p.strides[1] + 1;
    n->band_windows = (uint32_t)(band_windows < n->out_height ? band_windows : n->out_height);
    if (n->width > 4096 || bands_shared_bytes(*n) > 48 * 1024) return S_FALSE; /* the default shared memory limit */
    n->count = (uint64_t)n->planes * ((n->height + n->band_rows - 1) / n->band_rows);
    uint64_t enough = (uint64_t)dml_cuda_state(device)->multiprocessors * 16;
    n->blocks = (unsigned)(n->count < enough ? n->count : enough);
    if (n->count > UINT32_MAX) return S_FALSE;
    return S_OK;
}

template <class V> HRESULT launch_grad_nchw(const dml_kernel_args* args, const nchw_plan& n) {
    typedef typename V::T T;
    const void* input = args->inputs[DML_POOL_INPUT];
    const void* dy = args->inputs[DML_POOL_INPUT_GRADIENT];
    void* dx = args->outputs[DML_POOL_OUTPUT];
    cudaStream_t stream = dml_cuda_stream(args);
    if constexpr (sizeof(T) == 2)
        if (n.rows_3x3s2 && aligned_to(input, 4) && aligned_to(dx, 4)) {
            bool pair_gradients = n.out_width % 2 == 0 && aligned_to(dy, 4);
            if (n.width % 4 == 0 && aligned_to(input, 8) && aligned_to(dx, 8))
                max_pooling_grad_3x3s2_pairs<true>
                    <<<n.planes, n.row_threads, 0, stream>>>(n, input, dy, dx, pair_gradients);
            else
                max_pooling_grad_3x3s2_pairs<false>
                    <<<n.planes, n.row_threads, 0, stream>>>(n, input, dy, dx, pair_gradients);
            return dml_cuda_check_launch("max_pooling_grad_3x3s2_pairs");
        }
    if constexpr (sizeof(T) == 4)
        if (n.rows_3x3s2 && aligned_to(input, 8) && aligned_to(dx, 8)) {
            max_pooling_grad_3x3s2_rows<V><<<n.planes, n.row_threads, 0, stream>>>(n, input, dy, dx);
            return dml_cuda_check_launch("max_pooling_grad_3x3s2_rows");
        }
    if (n.whole_planes) {
        const size_t plane_bytes = (size_t)n.height * n.width * sizeof(T);
        const size_t gradient_bytes = (size_t)n.out_height * n.out_width * sizeof(T);
        bool vector_input = aligned_to(input, 16) && plane_bytes % 16 == 0;
        bool vector_gradient = aligned_to(dy, 16) && gradient_bytes % 16 == 0;
        size_t shared_bytes = plane_layout_of(n, sizeof(T), true).total;
        if (n.window_3x3_stride_2) {
            max_pooling_grad_3x3s2<V><<<n.planes, kThreads, shared_bytes, stream>>>(
                n, input, dy, dx, vector_input, vector_gradient, aligned_to(dx, 2 * sizeof(T)));
            return dml_cuda_check_launch("max_pooling_grad_3x3s2");
        }
        if (n.window_3x3)
            max_pooling_grad_planes<V, 3>
                <<<n.planes, kThreads, shared_bytes, stream>>>(n, input, dy, dx, vector_input, vector_gradient);
        else
            max_pooling_grad_planes<V, 0>
                <<<n.planes, kThreads, shared_bytes, stream>>>(n, input, dy, dx, vector_input, vector_gradient);
        return dml_cuda_check_launch("max_pooling_grad_planes");
    }
    if (!n.tiles_exact) {
        max_pooling_grad_bands<V><<<n.blocks, kThreads, bands_shared_bytes(n), stream>>>(n, input, dy, dx);
        return dml_cuda_check_launch("max_pooling_grad_bands");
    }
    if (n.tiles_2x2 && aligned_to(input, 4 * sizeof(T)) && aligned_to(dx, 4 * sizeof(T)) &&
        aligned_to(dy, 2 * sizeof(T))) {
        max_pooling_grad_2x2<V><<<n.blocks, kThreads, 0, stream>>>(n, input, dy, dx);
        return dml_cuda_check_launch("max_pooling_grad_2x2");
    }
    nchw_plan scalar = n;
    scalar.count = (uint64_t)n.planes * n.out_height * n.out_width;
    scalar.blocks = grid_blocks(args->device, scalar.count);
    max_pooling_grad_tiles<V><<<scalar.blocks, kThreads, 0, stream>>>(scalar, input, dy, dx);
    return dml_cuda_check_launch("max_pooling_grad_tiles");
}

HRESULT run_grad_nchw(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const nchw_plan& n = *DML_PLAN_STATE(args, nchw_plan);
    return n.type == DML_TENSOR_DATA_TYPE_FLOAT16 ? launch_grad_nchw<f16_cvt_type>(args, n)
                                                  : launch_grad_nchw<f32_type>(args, n);
}

/* ---- Packed channels-last (NHWC) fast paths (4-D, FLOAT32 and FLOAT16) ----
 * One thread per pixel and group of L channels (16 bytes of them when the
 * channel count allows, else one): neighbouring threads read and write
 * neighbouring channels, every access a vector. The forward scans the window
 * as scan_window does; the gradient is a gather in one launch, without a
 * temporary: each input pixel finds the windows that contain it
 * (covering_span, the CPU's rule in 32-bit arithmetic), recomputes their argmax for
 * its channels and adds, in increasing (oh, ow), the output gradients of
 * those that chose it, in FLOAT32 from +0: the CPU's sums in the CPU's order. */

struct nhwc_plan {
    dml_pooling_params params;
    uint32_t batch, channels, height, width, out_height, out_width;
    uint32_t type;        /* DML_TENSOR_DATA_TYPE of the values */
    uint32_t index_bytes; /* 0 (no indices), 4 or 8 */
    uint32_t lanes;       /* channels per thread: 16 bytes of them, or 1 */
    uint64_t count;       /* threads' work items: pixels * channels / lanes */
    unsigned blocks;
};

/* The common plan of both directions: packed channels-last 4-D FLOAT32 or
 * FLOAT16 tensors of at most INT32_MAX elements whose positions fit int32
 * (32-bit offsets); NULL (declined) otherwise. */
nhwc_plan* plan_nhwc(const DMLDevice* device, const dml_tensor& input, const dml_tensor& pooled,
                     const dml_pooling_params& p, dml_plan* plan, bool* declined, uint64_t pixels) {
    *declined = true;
    if (input.type != DML_TENSOR_DATA_TYPE_FLOAT32 && input.type != DML_TENSOR_DATA_TYPE_FLOAT16) return nullptr;
    if (!dml_cuda_packed_nhwc(input) || !dml_cuda_packed_nhwc(pooled) || input.element_count > INT32_MAX ||
        pooled.element_count > INT32_MAX || !positions_fit_int32(input, pooled, p))
        return nullptr;
    *declined = false;
    nhwc_plan* n = (nhwc_plan*)dml_plan_state(plan, sizeof(nhwc_plan));
    if (n == nullptr) return nullptr;
    n->params = p;
    n->batch = input.sizes[0];
    n->channels = input.sizes[1];
    n->height = input.sizes[2];
    n->width = input.sizes[3];
    n->out_height = pooled.sizes[2];
    n->out_width = pooled.sizes[3];
    n->type = input.type;
    n->index_bytes = 0;
    uint32_t vector = input.type == DML_TENSOR_DATA_TYPE_FLOAT16 ? 8 : 4;
    n->lanes = n->channels % vector == 0 ? vector : 1;
    n->count = pixels * n->channels / n->lanes;
    n->blocks = grid_blocks(device, n->count);
    return n;
}

/* The first maximal tap of window (oh, ow) for each of L channels (the scan
 * order and comparisons of scan_window; FLOAT16 widened exactly keeps its
 * order): plane positions h * W + w (all ones when no tap is inside the
 * input) and the chosen values' bits. `image` points at the channels of
 * pixel (0, 0). */
template <class V, unsigned L> struct channels_max {
    typedef typename V::T T;
    uint32_t position[L];
    vector_of<T, L> value;

    __device__ channels_max(const T* image, const nhwc_plan& n, uint32_t oh, uint32_t ow) {
        const dml_pooling_params& p = n.params;
        const int32_t h0 = (int32_t)(oh * p.strides[1]) - (int32_t)p.start_padding[1];
        const int32_t w0 = (int32_t)(ow * p.strides[2]) - (int32_t)p.start_padding[2];
        float best[L];
#pragma unroll
        for (unsigned k = 0; k < L; k++) {
            position[k] = ~0u;
            best[k] = 0.0f;
            value.v[k] = V::lowest();
        }
        for (uint32_t kh = 0; kh < p.window[1]; kh++) {
            int32_t h = h0 + (int32_t)(kh * p.dilations[1]);
            if (h < 0 || h >= (int32_t)n.height) continue;
            for (uint32_t kw = 0; kw < p.window[2]; kw++) {
                int32_t w = w0 + (int32_t)(kw * p.dilations[2]);
                if (w < 0 || w >= (int32_t)n.width) continue;
                uint32_t at = (uint32_t)h * n.width + (uint32_t)w;
                vector_of<T, L> v = *(const vector_of<T, L>*)(image + at * n.channels);
#pragma unroll
                for (unsigned k = 0; k < L; k++) {
                    float x = to_float(v.v[k]);
                    if (position[k] == ~0u || f32_type::greater(x, best[k])) {
                        best[k] = x;
                        position[k] = at;
                        value.v[k] = v.v[k];
                    }
                }
            }
        }
    }
};

/* Work item i: channels [c, c + L) of pixel (b, y, x) of a {B, Y, X, C} image. */
struct nhwc_item {
    uint32_t b, y, x, c;
};

__device__ nhwc_item nhwc_item_of(uint32_t i, uint32_t groups, uint32_t lanes, uint32_t rows, uint32_t columns) {
    nhwc_item it;
    uint32_t pixel = i / groups;
    it.c = (i - pixel * groups) * lanes;
    it.x = pixel % columns;
    uint32_t rest = pixel / columns;
    it.y = rest % rows;
    it.b = rest / rows;
    return it;
}

template <class V, class I, unsigned L>
__global__ void __launch_bounds__(kThreads)
    max_pooling_forward_nhwc(const nhwc_plan n, const void* input, void* output, void* indices) {
    typedef typename V::T T;
    const uint32_t groups = n.channels / L, plane_size = n.height * n.width;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n.count; i += gridDim.x * blockDim.x) {
        nhwc_item it = nhwc_item_of(i, groups, L, n.out_height, n.out_width);
        const T* image = (const T*)input + (uint64_t)it.b * plane_size * n.channels + it.c;
        channels_max<V, L> m(image, n, it.y, it.x);
        uint32_t out = ((it.b * n.out_height + it.y) * n.out_width + it.x) * n.channels + it.c;
        *(vector_of<T, L>*)((T*)output + out) = m.value;
        if (sizeof(I) > 1) {
            vector_of<I, L> index;
            uint64_t plane_base = ((uint64_t)it.b * n.channels + it.c) * plane_size;
#pragma unroll
            for (unsigned k = 0; k < L; k++)
                index.v[k] = m.position[k] == ~0u ? (I) ~(uint64_t)0 : (I)(plane_base + k * plane_size + m.position[k]);
            *(vector_of<I, L>*)((I*)indices + out) = index;
        }
    }
}

template <class V, unsigned L>
__global__ void __launch_bounds__(kThreads)
    max_pooling_grad_nhwc(const nhwc_plan n, const void* input, const void* input_gradient, void* output_gradient) {
    typedef typename V::T T;
    const dml_pooling_params* p = &n.params;
    const uint32_t groups = n.channels / L;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n.count; i += gridDim.x * blockDim.x) {
        nhwc_item it = nhwc_item_of(i, groups, L, n.height, n.width);
        const T* image = (const T*)input + (uint64_t)it.b * n.height * n.width * n.channels + it.c;
        const T* dy = (const T*)input_gradient + (uint64_t)it.b * n.out_height * n.out_width * n.channels + it.c;
        const uint32_t position = it.y * n.width + it.x;
        const window_span ch = covering_span(*p, 1, it.y, n.out_height);
        const window_span cw = covering_span(*p, 2, it.x, n.out_width);
        float sum[L];
#pragma unroll
        for (unsigned k = 0; k < L; k++)
            sum[k] = 0.0f;
        for (uint32_t oh = ch.first; oh < ch.end; oh++) {
            if (!ch.on_tap(oh)) continue;
            for (uint32_t ow = cw.first; ow < cw.end; ow++) {
                if (!cw.on_tap(ow)) continue;
                channels_max<V, L> m(image, n, oh, ow);
                vector_of<T, L> gradient = *(const vector_of<T, L>*)(dy + (oh * n.out_width + ow) * n.channels);
#pragma unroll
                for (unsigned k = 0; k < L; k++)
                    if (m.position[k] == position) sum[k] += to_float(gradient.v[k]);
            }
        }
        vector_of<T, L> dx;
#pragma unroll
        for (unsigned k = 0; k < L; k++)
            dx.v[k] = from_float<T>(sum[k]);
        *(vector_of<T, L>*)((T*)output_gradient + ((it.b * n.height + it.y) * n.width + it.x) * n.channels + it.c) = dx;
    }
}

HRESULT plan_forward_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    const dml_tensor& output = op->outputs[DML_POOL_OUTPUT].tensor;
    const dml_tensor* indices =
        op->output_count > DML_POOL_OUTPUT_INDICES ? &op->outputs[DML_POOL_OUTPUT_INDICES].tensor : nullptr;
    bool has_indices = indices && indices->present;
    if (has_indices && !dml_cuda_packed_nhwc(*indices)) return S_FALSE;
    bool declined;
    uint64_t pixels = (uint64_t)output.sizes[0] * output.sizes[2] * output.sizes[3];
    nhwc_plan* n = plan_nhwc(device, op->inputs[DML_POOL_INPUT].tensor, output, *(const dml_pooling_params*)op->params,
                             plan, &declined, pixels);
    if (n == nullptr) return declined ? S_FALSE : E_OUTOFMEMORY;
    n->index_bytes = has_indices ? dmlDataTypeSize(indices->type) : 0;
    return S_OK;
}

/* The plan with one channel per thread: vectors of L channels need every
 * base aligned to L elements (the channel count is a multiple of L). */
nhwc_plan one_lane(const DMLDevice* device, const nhwc_plan& n) {
    nhwc_plan scalar = n;
    scalar.count = n.count * n.lanes;
    scalar.lanes = 1;
    scalar.blocks = grid_blocks(device, scalar.count);
    return scalar;
}

template <class V, class I> HRESULT launch_forward_nhwc(const dml_kernel_args* args, const nhwc_plan& n) {
    typedef typename V::T T;
    constexpr unsigned L = 16 / sizeof(T);
    const void* input = args->inputs[DML_POOL_INPUT];
    void* output = args->outputs[DML_POOL_OUTPUT];
    void* indices = n.index_bytes ? args->outputs[DML_POOL_OUTPUT_INDICES] : nullptr;
    cudaStream_t stream = dml_cuda_stream(args);
    if (n.lanes == L && aligned_to(input, 16) && aligned_to(output, 16) &&
        (!indices || aligned_to(indices, L * sizeof(I))))
        max_pooling_forward_nhwc<V, I, L><<<n.blocks, kThreads, 0, stream>>>(n, input, output, indices);
    else {
        const nhwc_plan scalar = one_lane(args->device, n);
        max_pooling_forward_nhwc<V, I, 1><<<scalar.blocks, kThreads, 0, stream>>>(scalar, input, output, indices);
    }
    return dml_cuda_check_launch("max_pooling_forward_nhwc");
}

HRESULT run_forward_nhwc(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const nhwc_plan& n = *DML_PLAN_STATE(args, nhwc_plan);
    bool half = n.type == DML_TENSOR_DATA_TYPE_FLOAT16;
    switch (n.index_bytes) {
    case 4:
        return half ? launch_forward_nhwc<f16_type, uint32_t>(args, n)
                    : launch_forward_nhwc<f32_type, uint32_t>(args, n);
    case 8:
        return half ? launch_forward_nhwc<f16_type, uint64_t>(args, n)
                    : launch_forward_nhwc<f32_type, uint64_t>(args, n);
    default:
        return half ? launch_forward_nhwc<f16_type, uint8_t>(args, n) : launch_forward_nhwc<f32_type, uint8_t>(args, n);
    }
}

HRESULT plan_grad_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    const dml_tensor& input = op->inputs[DML_POOL_INPUT].tensor;
    const dml_tensor& dx = op->outputs[DML_POOL_OUTPUT].tensor;
    if (!dml_cuda_packed_nhwc(dx)) return S_FALSE;
    bool declined;
    uint64_t pixels = (uint64_t)input.sizes[0] * input.sizes[2] * input.sizes[3];
    nhwc_plan* n = plan_nhwc(device, input, op->inputs[DML_POOL_INPUT_GRADIENT].tensor,
                             *(const dml_pooling_params*)op->params, plan, &declined, pixels);
    if (n == nullptr) return declined ? S_FALSE : E_OUTOFMEMORY;
    return S_OK;
}

template <class V> HRESULT launch_grad_nhwc(const dml_kernel_args* args, const nhwc_plan& n) {
    typedef typename V::T T;
    constexpr unsigned L = 16 / sizeof(T);
    const void* input = args->inputs[DML_POOL_INPUT];
    const void* dy = args->inputs[DML_POOL_INPUT_GRADIENT];
    void* dx = args->outputs[DML_POOL_OUTPUT];
    cudaStream_t stream = dml_cuda_stream(args);
    if (n.lanes == L && aligned_to(input, 16) && aligned_to(dy, 16) && aligned_to(dx, 16))
        max_pooling_grad_nhwc<V, L><<<n.blocks, kThreads, 0, stream>>>(n, input, dy, dx);
    else {
        const nhwc_plan scalar = one_lane(args->device, n);
        max_pooling_grad_nhwc<V, 1><<<scalar.blocks, kThreads, 0, stream>>>(scalar, input, dy, dx);
    }
    return dml_cuda_check_launch("max_pooling_grad_nhwc");
}

HRESULT run_grad_nhwc(const dml_kernel_args* args) {
    dml_cuda_device_guard guard(args->device);
    if (guard.status() != cudaSuccess) return dml_cuda_kernel_error(guard.status(), "cudaSetDevice");
    const nhwc_plan& n = *DML_PLAN_STATE(args, nhwc_plan);
    return n.type == DML_TENSOR_DATA_TYPE_FLOAT16 ? launch_grad_nhwc<f16_type>(args, n)
                                                  : launch_grad_nhwc<f32_type>(args, n);
}

} // namespace

const dml_impl dml_cuda_max_pooling_generic = {"max_pooling/cuda/strided", DML_ISA_GENERIC, nullptr, run_forward};
const dml_impl dml_cuda_max_pooling_grad_generic = {"max_pooling_grad/cuda/strided", DML_ISA_GENERIC, plan_grad,
                                                    run_grad};
const dml_impl dml_cuda_max_pooling_nchw = {"max_pooling/cuda/nchw", DML_ISA_GENERIC, plan_forward_nchw,
                                            run_forward_nchw};
const dml_impl dml_cuda_max_pooling_grad_nchw = {"max_pooling_grad/cuda/nchw", DML_ISA_GENERIC, plan_grad_nchw,
                                                 run_grad_nchw};
const dml_impl dml_cuda_max_pooling_nhwc = {"max_pooling/cuda/nhwc", DML_ISA_GENERIC, plan_forward_nhwc,
                                            run_forward_nhwc};
const dml_impl dml_cuda_max_pooling_grad_nhwc = {"max_pooling_grad/cuda/nhwc", DML_ISA_GENERIC, plan_grad_nhwc,
                                                 run_grad_nhwc};
