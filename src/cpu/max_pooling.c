/* Max pooling and its gradient on the CPU (spec max_pooling.md §5, §6).
 *
 * Every problem is seen as 5-D {N, C, D, H, W} (a 4-D one has D = 1). The
 * forward pass is parallel over output rows; each output element scans its
 * window in increasing logical order, so ties go to the lowest index. The
 * gradient is parallel over (n, c) planes; each plane accumulates its windows
 * in increasing output order, so results never depend on the thread count. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "../core/half.h"
#include "../ops/max_pooling_rules.h"
#include "cpu.h"

/* The argmax of one window within its (n, c) plane: the plane-relative
 * logical position (d * H + h) * W + w and the element offset, or found = false. */
typedef struct window_max {
    bool found;
    uint64_t position;
    uint64_t offset;
} window_max;

/* Comparison rules per type (spec §5, in src/ops/max_pooling_rules.h). */
#define GREATER_INT(v, best) ((v) > (best))
#define GREATER_FLOAT(v, best) dml_nan_aware_greater(v, best)
#define GREATER_HALF(v, best) dml_pool_greater_f16(v, best)

/* Scans one window of the plane at `plane` (element pointer) in increasing
 * logical order and returns the first maximal element. Pointers step by
 * dilation * stride; the position is computed once, for the winner. */
#define DEFINE_WINDOW_MAX(SUFFIX, T, GREATER)                                                                          \
    static window_max window_max_##SUFFIX(const T* plane, const dml_pool_view* in, const dml_pool_taps r[3],           \
                                          const dml_pooling_params* p) {                                               \
        window_max result = {false, 0, 0};                                                                             \
        if (r[0].begin >= r[0].end || r[1].begin >= r[1].end || r[2].begin >= r[2].end) return result;                 \
        uint64_t first[3], step[3];                                                                                    \
        for (int i = 0; i < 3; i++) {                                                                                  \
            first[i] = (uint64_t)(r[i].start + (int64_t)r[i].begin * p->dilations[i]);                                 \
            step[i] = (uint64_t)p->dilations[i] * in->strides[2 + i];                                                  \
        }                                                                                                              \
        const T* start = plane + first[0] * in->strides[2] + first[1] * in->strides[3] + first[2] * in->strides[4];    \
        T best = *start;                                                                                               \
        uint32_t best_k[3] = {r[0].begin, r[1].begin, r[2].begin};                                                     \
        const T* at_d = start;                                                                                         \
        for (uint32_t kd = r[0].begin; kd < r[0].end; kd++, at_d += step[0]) {                                         \
            const T* at_h = at_d;                                                                                      \
            for (uint32_t kh = r[1].begin; kh < r[1].end; kh++, at_h += step[1]) {                                     \
                const T* at_w = at_h;                                                                                  \
                for (uint32_t kw = r[2].begin; kw < r[2].end; kw++, at_w += step[2]) {                                 \
                    T v = *at_w;                                                                                       \
                    if (GREATER(v, best)) {                                                                            \
                        best = v;                                                                                      \
                        best_k[0] = kd;                                                                                \
                        best_k[1] = kh;                                                                                \
                        best_k[2] = kw;                                                                                \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        uint64_t d = (uint64_t)(r[0].start + (int64_t)best_k[0] * p->dilations[0]);                                    \
        uint64_t h = (uint64_t)(r[1].start + (int64_t)best_k[1] * p->dilations[1]);                                    \
        uint64_t w = (uint64_t)(r[2].start + (int64_t)best_k[2] * p->dilations[2]);                                    \
        result.found = true;                                                                                           \
        result.offset = d * in->strides[2] + h * in->strides[3] + w * in->strides[4];                                  \
        result.position = (d * in->sizes[3] + h) * in->sizes[4] + w;                                                   \
        return result;                                                                                                 \
    }

DEFINE_WINDOW_MAX(f32, float, GREATER_FLOAT)
DEFINE_WINDOW_MAX(f16, uint16_t, GREATER_HALF)
DEFINE_WINDOW_MAX(i8, int8_t, GREATER_INT)
DEFINE_WINDOW_MAX(u8, uint8_t, GREATER_INT)
DEFINE_WINDOW_MAX(i16, int16_t, GREATER_INT)
DEFINE_WINDOW_MAX(u16, uint16_t, GREATER_INT)
DEFINE_WINDOW_MAX(i32, int32_t, GREATER_INT)
DEFINE_WINDOW_MAX(u32, uint32_t, GREATER_INT)
DEFINE_WINDOW_MAX(i64, int64_t, GREATER_INT)
DEFINE_WINDOW_MAX(u64, uint64_t, GREATER_INT)

/* ---- Forward ---- */

typedef struct forward_problem {
    const dml_pooling_params* params;
    dml_pool_view in, out, idx;
    const void* input;
    void* output;
    void* indices; /* NULL when OutputIndicesTensor is absent */
    bool indices_64;
} forward_problem;

static void write_index(const forward_problem* f, uint64_t offset, uint64_t value) {
    if (f->indices_64)
        ((uint64_t*)f->indices)[offset] = value;
    else
        ((uint32_t*)f->indices)[offset] = (uint32_t)value; /* < 2^32 elements (spec T-1) */
}

/* One output row (n, c, od, oh, all ow). LOWEST is the all-padding value. */
#define DEFINE_FORWARD_ROW(SUFFIX, T, LOWEST)                                                                          \
    static void forward_row_##SUFFIX(const forward_problem* f, uint64_t row) {                                         \
        const dml_pooling_params* p = f->params;                                                                       \
        uint32_t oh = (uint32_t)(row % f->out.sizes[3]);                                                               \
        uint64_t rest = row / f->out.sizes[3];                                                                         \
        uint32_t od = (uint32_t)(rest % f->out.sizes[2]);                                                              \
        rest /= f->out.sizes[2];                                                                                       \
        uint32_t c = (uint32_t)(rest % f->out.sizes[1]);                                                               \
        uint32_t n = (uint32_t)(rest / f->out.sizes[1]);                                                               \
        const T* plane = (const T*)f->input + n * f->in.strides[0] + c * f->in.strides[1];                             \
        uint64_t plane_base = ((uint64_t)n * f->in.sizes[1] + c) * f->in.sizes[2] * f->in.sizes[3] * f->in.sizes[4];   \
        uint64_t out_row =                                                                                             \
            n * f->out.strides[0] + c * f->out.strides[1] + od * f->out.strides[2] + oh * f->out.strides[3];           \
        uint64_t idx_row =                                                                                             \
            n * f->idx.strides[0] + c * f->idx.strides[1] + od * f->idx.strides[2] + oh * f->idx.strides[3];           \
        dml_pool_taps r[3];                                                                                            \
        r[0] = dml_pool_window_taps(p, 0, od, f->in.sizes[2]);                                                         \
        r[1] = dml_pool_window_taps(p, 1, oh, f->in.sizes[3]);                                                         \
        for (uint32_t ow = 0; ow < f->out.sizes[4]; ow++) {                                                            \
            r[2] = dml_pool_window_taps(p, 2, ow, f->in.sizes[4]);                                                     \
            window_max m = window_max_##SUFFIX(plane, &f->in, r, p);                                                   \
            T* out = (T*)f->output + out_row + ow * f->out.strides[4];                                                 \
            *out = m.found ? plane[m.offset] : (LOWEST);                                                               \
            if (f->indices)                                                                                            \
                write_index(f, idx_row + ow * f->idx.strides[4], m.found ? plane_base + m.position : UINT64_MAX);      \
        }                                                                                                              \
    }

DEFINE_FORWARD_ROW(f32, float, -INFINITY)
DEFINE_FORWARD_ROW(f16, uint16_t, 0xFC00u) /* -inf */
DEFINE_FORWARD_ROW(i8, int8_t, INT8_MIN)
DEFINE_FORWARD_ROW(u8, uint8_t, 0)
DEFINE_FORWARD_ROW(i16, int16_t, INT16_MIN)
DEFINE_FORWARD_ROW(u16, uint16_t, 0)
DEFINE_FORWARD_ROW(i32, int32_t, INT32_MIN)
DEFINE_FORWARD_ROW(u32, uint32_t, 0)
DEFINE_FORWARD_ROW(i64, int64_t, INT64_MIN)
DEFINE_FORWARD_ROW(u64, uint64_t, 0)

typedef void (*forward_row_fn)(const forward_problem* f, uint64_t row);

static forward_row_fn forward_row_for(DML_TENSOR_DATA_TYPE type) {
    switch (type) {
    case DML_TENSOR_DATA_TYPE_FLOAT32: return forward_row_f32;
    case DML_TENSOR_DATA_TYPE_FLOAT16: return forward_row_f16;
    case DML_TENSOR_DATA_TYPE_INT8: return forward_row_i8;
    case DML_TENSOR_DATA_TYPE_UINT8: return forward_row_u8;
    case DML_TENSOR_DATA_TYPE_INT16: return forward_row_i16;
    case DML_TENSOR_DATA_TYPE_UINT16: return forward_row_u16;
    case DML_TENSOR_DATA_TYPE_INT32: return forward_row_i32;
    case DML_TENSOR_DATA_TYPE_UINT32: return forward_row_u32;
    case DML_TENSOR_DATA_TYPE_INT64: return forward_row_i64;
    case DML_TENSOR_DATA_TYPE_UINT64: return forward_row_u64;
    default: return NULL;
    }
}

/* What the forward pass precomputes at compile time. */
typedef struct forward_plan {
    dml_pool_view in, out, idx;
    bool has_indices, indices_64;
    forward_row_fn row_fn;
    int64_t rows; /* N * C * OD * OH */
    int threads;
} forward_plan;

static HRESULT plan_forward(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    forward_plan* f = dml_plan_state(plan, sizeof *f);
    if (f == NULL) return E_OUTOFMEMORY;
    f->in = dml_pool_view_5d(&op->inputs[DML_POOL_INPUT].tensor);
    f->out = dml_pool_view_5d(&op->outputs[DML_POOL_OUTPUT].tensor);
    const dml_tensor* indices =
        op->output_count > DML_POOL_OUTPUT_INDICES ? &op->outputs[DML_POOL_OUTPUT_INDICES].tensor : NULL;
    if (indices && indices->present) {
        f->has_indices = true;
        f->idx = dml_pool_view_5d(indices);
        f->indices_64 = indices->type == DML_TENSOR_DATA_TYPE_UINT64;
    }
    f->row_fn = forward_row_for(op->inputs[DML_POOL_INPUT].tensor.type);
    f->rows = (int64_t)f->out.sizes[0] * f->out.sizes[1] * f->out.sizes[2] * f->out.sizes[3];
    const dml_pooling_params* p = op->params;
    uint64_t row_cost = (uint64_t)f->out.sizes[4] * p->window[0] * p->window[1] * p->window[2];
    f->threads = dml_cpu_threads_for((int)device->threads, (uint64_t)f->rows,
                                     dml_cpu_items_per_thread(row_cost, DML_CPU_MIN_WORK_PER_THREAD));
    return S_OK;
}

static HRESULT run_forward(const dml_kernel_args* args) {
    const forward_plan* plan = DML_PLAN_STATE(args, forward_plan);
    forward_problem f = {
        .params = args->op->params,
        .in = plan->in,
        .out = plan->out,
        .idx = plan->idx,
        .input = args->inputs[DML_POOL_INPUT],
        .output = args->outputs[DML_POOL_OUTPUT],
        .indices = plan->has_indices ? args->outputs[DML_POOL_OUTPUT_INDICES] : NULL,
        .indices_64 = plan->indices_64,
    };
#pragma omp parallel for num_threads(plan->threads) schedule(static)
    for (int64_t row = 0; row < plan->rows; row++)
        plan->row_fn(&f, (uint64_t)row);
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_generic = {"max_pooling/generic/strided", DML_ISA_GENERIC, plan_forward,
                                              run_forward};

/* ---- Gradient ---- */

typedef struct grad_problem {
    const dml_pooling_params* params;
    dml_pool_view in, grad_in, grad_out;
    const void* input;
    const void* input_gradient;
    void* output_gradient;
} grad_problem;

/* One task: rows [h_begin, h_end) of every depth slice of one (n, c) plane.
 * Its windows are visited in increasing output order and each adds its
 * InputGradient to its argmax when that lies in the band, into acc
 * (D * band rows * W floats: FLOAT32 for both FLOAT16 and FLOAT32, spec §6).
 * Every position thus sums its windows in the same order whatever the
 * banding, so results never depend on the number of bands or threads. */
typedef struct grad_band {
    uint64_t plane;
    uint32_t h_begin, h_end;
} grad_band;

#define DEFINE_GRAD_BAND(SUFFIX, T, TO_FLOAT, FROM_FLOAT)                                                              \
    static void grad_band_##SUFFIX(const grad_problem* g, grad_band band, float* acc) {                                \
        const dml_pooling_params* p = g->params;                                                                       \
        uint32_t c = (uint32_t)(band.plane % g->in.sizes[1]);                                                          \
        uint32_t n = (uint32_t)(band.plane / g->in.sizes[1]);                                                          \
        uint32_t depth = g->in.sizes[2], height = g->in.sizes[3], width = g->in.sizes[4];                              \
        uint32_t rows = band.h_end - band.h_begin;                                                                     \
        memset(acc, 0, (size_t)depth* rows* width * sizeof *acc);                                                      \
        const T* plane = (const T*)g->input + n * g->in.strides[0] + c * g->in.strides[1];                             \
        const T* dy = (const T*)g->input_gradient + n * g->grad_in.strides[0] + c * g->grad_in.strides[1];             \
        dml_pool_taps r[3];                                                                                            \
        for (uint32_t od = 0; od < g->grad_in.sizes[2]; od++) {                                                        \
            r[0] = dml_pool_window_taps(p, 0, od, depth);                                                              \
            for (uint32_t oh = 0; oh < g->grad_in.sizes[3]; oh++) {                                                    \
                r[1] = dml_pool_window_taps(p, 1, oh, height);                                                         \
                if (r[1].begin >= r[1].end) continue;                                                                  \
                int64_t first_row = r[1].start + (int64_t)r[1].begin * p->dilations[1];                                \
                int64_t last_row = r[1].start + (int64_t)(r[1].end - 1) * p->dilations[1];                             \
                if (last_row < band.h_begin || first_row >= band.h_end) continue; /* argmax cannot be here */          \
                for (uint32_t ow = 0; ow < g->grad_in.sizes[4]; ow++) {                                                \
                    r[2] = dml_pool_window_taps(p, 2, ow, width);                                                      \
                    window_max m = window_max_##SUFFIX(plane, &g->in, r, p);                                           \
                    if (!m.found) continue; /* all-padding window: no gradient */                                      \
                    uint32_t w = (uint32_t)(m.position % width);                                                       \
                    uint32_t h = (uint32_t)(m.position / width % height);                                              \
                    uint32_t d = (uint32_t)(m.position / width / height);                                              \
                    if (h < band.h_begin || h >= band.h_end) continue;                                                 \
                    acc[((uint64_t)d * rows + (h - band.h_begin)) * width + w] += TO_FLOAT(                            \
                        dy[od * g->grad_in.strides[2] + oh * g->grad_in.strides[3] + ow * g->grad_in.strides[4]]);     \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        T* dx = (T*)g->output_gradient + n * g->grad_out.strides[0] + c * g->grad_out.strides[1];                      \
        uint64_t position = 0;                                                                                         \
        for (uint32_t d = 0; d < depth; d++)                                                                           \
            for (uint32_t h = band.h_begin; h < band.h_end; h++)                                                       \
                for (uint32_t w = 0; w < width; w++)                                                                   \
                    dx[d * g->grad_out.strides[2] + h * g->grad_out.strides[3] + w * g->grad_out.strides[4]] =         \
                        FROM_FLOAT(acc[position++]);                                                                   \
    }

#define FLOAT_IDENTITY(x) (x)
DEFINE_GRAD_BAND(f32, float, FLOAT_IDENTITY, FLOAT_IDENTITY)
DEFINE_GRAD_BAND(f16, uint16_t, dml_half_to_float, dml_float_to_half)

/* What the gradient precomputes at compile time: the banding of planes into
 * tasks, the thread team, and one accumulator band per thread in the
 * temporary resource. */
typedef struct grad_plan {
    dml_pool_view in, grad_in, grad_out;
    bool half;
    uint32_t bands, band_rows;
    int64_t tasks;
    int threads;
    uint64_t band_size; /* floats per accumulator band */
} grad_plan;

static HRESULT plan_grad(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    grad_plan* g = dml_plan_state(plan, sizeof *g);
    if (g == NULL) return E_OUTOFMEMORY;
    g->in = dml_pool_view_5d(&op->inputs[DML_POOL_INPUT].tensor);
    g->grad_in = dml_pool_view_5d(&op->inputs[DML_POOL_INPUT_GRADIENT].tensor);
    g->grad_out = dml_pool_view_5d(&op->outputs[DML_POOL_OUTPUT].tensor);
    g->half = op->inputs[DML_POOL_INPUT].tensor.type == DML_TENSOR_DATA_TYPE_FLOAT16;
    uint64_t plane_size = (uint64_t)g->in.sizes[2] * g->in.sizes[3] * g->in.sizes[4];
    uint64_t planes = (uint64_t)g->in.sizes[0] * g->in.sizes[1];
    const dml_pooling_params* p = op->params;
    uint64_t plane_cost = plane_size + (uint64_t)g->grad_in.sizes[2] * g->grad_in.sizes[3] * g->grad_in.sizes[4] *
                                           p->window[0] * p->window[1] * p->window[2];
    int threads = (int)device->threads;
    /* Fewer planes than threads: split each plane into bands of rows. */
    uint32_t bands = planes >= (uint64_t)threads ? 1 : (uint32_t)(((uint64_t)threads + planes - 1) / planes);
    if (bands > g->in.sizes[3]) bands = g->in.sizes[3];
    g->band_rows = (g->in.sizes[3] + bands - 1) / bands;
    g->bands = (g->in.sizes[3] + g->band_rows - 1) / g->band_rows;
    g->tasks = (int64_t)(planes * g->bands);
    g->threads = dml_cpu_threads_for(threads, (uint64_t)g->tasks,
                                     dml_cpu_items_per_thread(plane_cost / g->bands, DML_CPU_MIN_WORK_PER_THREAD));
    g->band_size = (uint64_t)g->in.sizes[2] * g->band_rows * g->in.sizes[4];
    plan->temporary_size = (uint64_t)g->threads * g->band_size * sizeof(float);
    return S_OK;
}

static HRESULT run_grad(const dml_kernel_args* args) {
    const grad_plan* plan = DML_PLAN_STATE(args, grad_plan);
    grad_problem g = {
        .params = args->op->params,
        .in = plan->in,
        .grad_in = plan->grad_in,
        .grad_out = plan->grad_out,
        .input = args->inputs[DML_POOL_INPUT],
        .input_gradient = args->inputs[DML_POOL_INPUT_GRADIENT],
        .output_gradient = args->outputs[DML_POOL_OUTPUT],
    };
    float* scratch = args->temporary;
#pragma omp parallel num_threads(plan->threads)
    {
        int thread = dml_cpu_thread_index();
        float* acc = scratch + (size_t)thread * plan->band_size;
#pragma omp for schedule(static)
        for (int64_t task = 0; task < plan->tasks; task++) {
            uint32_t band_index = (uint32_t)((uint64_t)task % plan->bands);
            grad_band band = {(uint64_t)task / plan->bands, band_index * plan->band_rows,
                              band_index * plan->band_rows + plan->band_rows};
            if (band.h_end > g.in.sizes[3]) band.h_end = g.in.sizes[3];
            if (plan->half)
                grad_band_f16(&g, band, acc);
            else
                grad_band_f32(&g, band, acc);
        }
    }
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_grad_generic = {"max_pooling_grad/generic/strided", DML_ISA_GENERIC, plan_grad,
                                                   run_grad};
