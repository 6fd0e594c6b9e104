/* The batch normalization family on the CPU (spec batch_normalization.md
 * §4-§9).
 *
 * Two engines serve the four operators, both generic over rank (1-8),
 * strides (any, including 0 on inputs) and FLOAT32/FLOAT16:
 *
 * - The grouped reduction (TRAINING statistics; sdy and sdyxc of both
 *   GRADs). The input dimensions are split into kept ones (they index the
 *   parameter element, the group j) and reduced ones (they index an element
 *   m inside the group). Work is cut into tiles: a block of consecutive groups
 *   times a chunk of consecutive m. Tile sizes depend only on the problem, so
 *   every group is reduced chunk by chunk, each chunk in a fixed order, and the
 *   chunk partials are combined in chunk order: the bits never depend on the
 *   thread count, and a single group of millions of elements still spreads
 *   over every thread. Sums are FLOAT64 (§9). Statistics use a two-pass
 *   algorithm inside each chunk (mean, then the centered sum of squares) and
 *   Chan's merge of the chunks: no E[x^2] - E[x]^2 cancellation (§5).
 *
 * - The element-wise pass (the normalized output; the input gradient). The
 *   dimensions are ordered by the output's strides and merged where every
 *   operand allows, then cut into fixed blocks of contiguous runs.
 *
 * The forward output computes the pre-activation value in FLOAT64, rounds it
 * to FLOAT32, applies the fused activation in FLOAT32 and rounds once to the
 * output type (§8.2). Every other output is rounded once from FLOAT64. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "../core/checked.h"
#include "../core/elements.h"
#include "batch_normalization_cpu.h"

enum {
    BN_MAX_RANK = 8,
    TILE_ELEMENTS = 8192,     /* input elements per reduction tile */
    MAX_GROUP_BLOCK = 64,     /* groups per tile when groups are the inner loop */
    MIN_GROUPS_INNER = 8,     /* fewer interleaved groups: one group at a time, strided */
    SHORT_RUN = 16,           /* an innermost dimension this short is not the run dimension */
    BLOCK_ELEMENTS = 16384,   /* elements per block of the element-wise pass */
    PIECE = 512,              /* pre-activation values buffered before the activation */
    GROUPS_PER_THREAD = 1024, /* per-group work (merging chunks) below which fewer threads run */
    EW_MAX_OPERANDS = 6
};

/* ---- Element access ---- */

/* Hot loops are written once as always-inline functions and instantiated by
 * the dispatchers below with constant `half` and unit steps, so that each
 * instance is specialized (and vectorized where the compiler can). */
#define HOT static inline __attribute__((always_inline))

HOT double load(bool half, const void* base, uint64_t index) {
    if (half) return (double)dml_half_to_float(((const uint16_t*)base)[index]);
    return (double)((const float*)base)[index];
}

HOT void store_float(bool half, void* base, uint64_t index, float value) {
    if (half)
        ((uint16_t*)base)[index] = dml_float_to_half(value);
    else
        ((float*)base)[index] = value;
}

HOT void store_double(bool half, void* base, uint64_t index, double value) {
    if (half)
        ((uint16_t*)base)[index] = dml_double_to_half(value);
    else
        ((float*)base)[index] = (float)value;
}

/* Element offset of the row-major index `index` of a tensor. */
static uint64_t row_major_offset(const dml_tensor* tensor, uint64_t index) {
    uint64_t offset = 0;
    for (uint32_t i = tensor->rank; i-- > 0;) {
        offset += (index % tensor->sizes[i]) * tensor->strides[i];
        index /= tensor->sizes[i];
    }
    return offset;
}

static bool is_half(const dml_tensor* tensor) { return tensor->type == DML_TENSOR_DATA_TYPE_FLOAT16; }

/* ---- Walking a row-major index range in runs along the innermost dimension ---- */

typedef struct run_cursor {
    uint32_t rank;
    const uint32_t* sizes;
    uint32_t coords[BN_MAX_RANK];
    uint64_t left;
} run_cursor;

static void cursor_start(run_cursor* c, uint32_t rank, const uint32_t* sizes, uint64_t begin, uint64_t end) {
    c->rank = rank;
    c->sizes = sizes;
    c->left = end - begin;
    for (uint32_t i = rank; i-- > 0;) {
        c->coords[i] = (uint32_t)(begin % sizes[i]);
        begin /= sizes[i];
    }
}

/* Length of the run at the cursor; 0 when the range is done. */
static uint64_t cursor_run(const run_cursor* c) {
    uint64_t to_end_of_row = c->sizes[c->rank - 1] - c->coords[c->rank - 1];
    return c->left < to_end_of_row ? c->left : to_end_of_row;
}

static uint64_t cursor_offset(const run_cursor* c, const uint64_t* strides) {
    uint64_t offset = 0;
    for (uint32_t i = 0; i < c->rank; i++)
        offset += (uint64_t)c->coords[i] * strides[i];
    return offset;
}

static void cursor_advance(run_cursor* c, uint64_t length) {
    c->left -= length;
    uint32_t d = c->rank - 1;
    c->coords[d] += (uint32_t)length;
    while (d > 0 && c->coords[d] == c->sizes[d]) {
        c->coords[d] = 0;
        c->coords[--d]++;
    }
}

#define FOR_EACH_RUN(cursor, length)                                                                                   \
    for (uint64_t length; ((length) = cursor_run(&(cursor))) > 0; cursor_advance(&(cursor), (length)))

/* ---- Dimension lists: drop size-1 dimensions, merge neighbours ---- */

/* A list of dimensions (outermost first) with one stride per operand. */
typedef struct dim_list {
    uint32_t rank;
    uint32_t operands;
    uint32_t sizes[BN_MAX_RANK];
    uint64_t strides[EW_MAX_OPERANDS][BN_MAX_RANK];
} dim_list;

/* Removes size-1 dimensions and merges an outer dimension into the next inner
 * one wherever every operand steps through both as through one; keeps at
 * least one dimension. Row-major order of the elements is unchanged. */
static void dims_simplify(dim_list* list) {
    uint32_t rank = 0;
    for (uint32_t i = 0; i < list->rank; i++) {
        if (list->sizes[i] == 1) continue;
        if (rank > 0) {
            bool mergeable = true;
            for (uint32_t k = 0; k < list->operands; k++)
                mergeable &= list->strides[k][rank - 1] == list->strides[k][i] * list->sizes[i];
            if (mergeable) { /* product <= an element count < 2^32 */
                list->sizes[rank - 1] *= list->sizes[i];
                for (uint32_t k = 0; k < list->operands; k++)
                    list->strides[k][rank - 1] = list->strides[k][i];
                continue;
            }
        }
        list->sizes[rank] = list->sizes[i];
        for (uint32_t k = 0; k < list->operands; k++)
            list->strides[k][rank] = list->strides[k][i];
        rank++;
    }
    if (rank == 0) {
        list->sizes[0] = 1;
        for (uint32_t k = 0; k < list->operands; k++)
            list->strides[k][0] = 0;
        rank = 1;
    }
    list->rank = rank;
}

/* Strides of a packed row-major array over the tensor's sizes, 0 where the
 * size is 1 (broadcast along that input dimension). */
static void packed_broadcast_strides(const dml_tensor* tensor, uint64_t* strides) {
    uint64_t stride = 1;
    for (uint32_t i = tensor->rank; i-- > 0;) {
        strides[i] = tensor->sizes[i] == 1 ? 0 : stride;
        stride *= tensor->sizes[i];
    }
}

/* A tensor's own strides, 0 where its size is 1. */
static void broadcast_strides(const dml_tensor* tensor, uint64_t* strides) {
    for (uint32_t i = 0; i < tensor->rank; i++)
        strides[i] = tensor->sizes[i] == 1 ? 0 : tensor->strides[i];
}

/* ---- Element-wise pass ---- */

/* Processes `length` elements; operand k starts at element offsets[k] and
 * steps by steps[k]. Operand 0 is always the output. */
typedef void (*ew_run_fn)(const void* problem, const uint64_t* offsets, const uint64_t* steps, uint64_t length);

static void swap_dims(dim_list* list, uint32_t a, uint32_t b) {
    uint32_t size = list->sizes[a];
    list->sizes[a] = list->sizes[b];
    list->sizes[b] = size;
    for (uint32_t k = 0; k < list->operands; k++) {
        uint64_t stride = list->strides[k][a];
        list->strides[k][a] = list->strides[k][b];
        list->strides[k][b] = stride;
    }
}

/* Orders dims by the output's strides (outermost = largest, stable), then
 * simplifies, so that runs follow the output's memory. */
static void ew_order(dim_list* list) {
    for (uint32_t i = 1; i < list->rank; i++)
        for (uint32_t j = i; j > 0 && list->strides[0][j - 1] < list->strides[0][j]; j--)
            swap_dims(list, j - 1, j);
    dims_simplify(list);
    /* Runs along a very short innermost dimension (NHWC with C = 2) cost more
     * in bookkeeping than in work: run along the next dimension instead. */
    uint32_t last = list->rank - 1;
    if (list->rank >= 2 && list->sizes[last] < SHORT_RUN && list->sizes[last - 1] > list->sizes[last])
        swap_dims(list, last - 1, last);
}

static void ew_run(const dim_list* list, uint64_t element_count, ew_run_fn run, const void* problem, int threads) {
    int64_t blocks = (int64_t)((element_count + BLOCK_ELEMENTS - 1) / BLOCK_ELEMENTS);
    uint64_t steps[EW_MAX_OPERANDS];
    for (uint32_t k = 0; k < list->operands; k++)
        steps[k] = list->strides[k][list->rank - 1];
#pragma omp parallel for num_threads(dml_cpu_threads_for(threads, (uint64_t)blocks, 1)) schedule(static)
    for (int64_t block = 0; block < blocks; block++) {
        uint64_t begin = (uint64_t)block * BLOCK_ELEMENTS;
        uint64_t end = begin + BLOCK_ELEMENTS < element_count ? begin + BLOCK_ELEMENTS : element_count;
        run_cursor cursor;
        cursor_start(&cursor, list->rank, list->sizes, begin, end);
        FOR_EACH_RUN(cursor, length) {
            uint64_t offsets[EW_MAX_OPERANDS];
            for (uint32_t k = 0; k < list->operands; k++)
                offsets[k] = cursor_offset(&cursor, list->strides[k]);
            run(problem, offsets, steps, length);
        }
    }
}

/* The fused activation over a buffer of FLOAT32 pre-activation values, the
 * type switch hoisted out of the loop. */
#define ACTIVATION_LOOP(expression)                                                                                    \
    for (size_t i = 0; i < count; i++) {                                                                               \
        float x = values[i];                                                                                           \
        values[i] = (expression);                                                                                      \
    }                                                                                                                  \
    break

void dml_cpu_bn_apply_activation(const dml_activation* a, float* values, size_t count) {
    float p0 = a->param0, p1 = a->param1;
    switch (a->type) {
    case DML_ACTIVATION_ELU: ACTIVATION_LOOP(dml_activation_elu(x, p0));
    case DML_ACTIVATION_CELU: ACTIVATION_LOOP(dml_activation_celu(x, p0));
    case DML_ACTIVATION_HARD_SIGMOID: ACTIVATION_LOOP(dml_activation_hard_sigmoid(x, p0, p1));
    case DML_ACTIVATION_LEAKY_RELU: ACTIVATION_LOOP(dml_activation_leaky_relu(x, p0));
    case DML_ACTIVATION_LINEAR: ACTIVATION_LOOP(dml_activation_linear(x, p0, p1));
    case DML_ACTIVATION_PARAMETRIC_SOFTPLUS: ACTIVATION_LOOP(dml_activation_parametric_softplus(x, p0, p1));
    case DML_ACTIVATION_RELU: ACTIVATION_LOOP(dml_activation_relu(x));
    case DML_ACTIVATION_SCALED_ELU: ACTIVATION_LOOP(dml_activation_scaled_elu(x, p0, p1));
    case DML_ACTIVATION_SCALED_TANH: ACTIVATION_LOOP(dml_activation_scaled_tanh(x, p0, p1));
    case DML_ACTIVATION_SIGMOID: ACTIVATION_LOOP(dml_activation_sigmoid(x));
    case DML_ACTIVATION_SOFTPLUS: ACTIVATION_LOOP(dml_activation_softplus(x, p0));
    case DML_ACTIVATION_SOFTSIGN: ACTIVATION_LOOP(dml_activation_softsign(x));
    case DML_ACTIVATION_TANH: ACTIVATION_LOOP(tanhf(x));
    case DML_ACTIVATION_THRESHOLDED_RELU: ACTIVATION_LOOP(dml_activation_thresholded_relu(x, p0));
    case DML_ACTIVATION_SHRINK: ACTIVATION_LOOP(dml_activation_shrink(x, p0, p1));
    case DML_ACTIVATION_GELU: ACTIVATION_LOOP(dml_activation_gelu(x));
    default: break; /* none, IDENTITY */
    }
}

/* Calls IMPL(half, unit, ...) with both arguments constant. */
#define DISPATCH(half, unit, IMPL, ...)                                                                                \
    do {                                                                                                               \
        if (half) {                                                                                                    \
            if (unit)                                                                                                  \
                IMPL(true, true, __VA_ARGS__);                                                                         \
            else                                                                                                       \
                IMPL(true, false, __VA_ARGS__);                                                                        \
        } else {                                                                                                       \
            if (unit)                                                                                                  \
                IMPL(false, true, __VA_ARGS__);                                                                        \
            else                                                                                                       \
                IMPL(false, false, __VA_ARGS__);                                                                       \
        }                                                                                                              \
    } while (0)

/* -- Forward output: act((x - mean) * factor + bias [+ fused add]) -- */

enum { FWD_OUTPUT, FWD_INPUT, FWD_FUSED_ADD, FWD_GROUP };                    /* grouped operands */
enum { INF_OUTPUT, INF_INPUT, INF_MEAN, INF_VARIANCE, INF_SCALE, INF_BIAS }; /* per-element inference operands */

/* Per-group values of the element-wise passes (FLOAT64), one array each so
 * that loops over consecutive groups vectorize. Forward: {mean, factor =
 * Scale / sqrt(variance + Epsilon), Bias}. Gradient: {Mean, k, u, w} with
 * dx = k * (dy - u - (x - Mean) * w). */
typedef struct group_values {
    double* v[4];
} group_values;

/* The four arrays of `count` groups, one after the other from block. */
static group_values group_values_at(void* block, uint64_t count) {
    group_values g;
    for (int k = 0; k < 4; k++)
        g.v[k] = (double*)block + (uint64_t)k * count;
    return g;
}

typedef struct forward_problem {
    bool half;
    const void* input;
    const void* fused_add; /* TRAINING only; NULL when absent */
    void* output;
    group_values groups; /* grouped form */
    const void* mean;    /* per-element inference: the tensors themselves */
    const void* variance;
    const void* scale;
    const void* bias;
    double epsilon;
    dml_activation activation;
} forward_problem;

/* Applies the activation to a piece of FLOAT32 pre-activation values and
 * stores them, rounded once to the output type, with the output's step. */
HOT void finish_piece(bool half, bool unit, const forward_problem* p, float* pre, size_t count, uint64_t out_offset,
                      uint64_t out_step) {
    dml_cpu_bn_apply_activation(&p->activation, pre, count);
    if (unit) out_step = 1;
    for (size_t t = 0; t < count; t++)
        store_float(half, p->output, out_offset + t * out_step, pre[t]);
}

/* unit: input and output step 1 along the run. */
HOT void grouped_run_impl(bool half, bool unit, const forward_problem* p, const uint64_t* offsets,
                          const uint64_t* steps, uint64_t length) {
    float pre[PIECE];
    uint64_t xs = unit ? 1 : steps[FWD_INPUT], gs = steps[FWD_GROUP], as = steps[FWD_FUSED_ADD];
    for (uint64_t done = 0; done < length; done += PIECE) {
        size_t count = (size_t)(length - done < PIECE ? length - done : PIECE);
        uint64_t x0 = offsets[FWD_INPUT] + done * xs;
        uint64_t g0 = offsets[FWD_GROUP] + done * gs;
        const double* mean = p->groups.v[0] + g0;
        const double* factor = p->groups.v[1] + g0;
        const double* bias = p->groups.v[2] + g0;
        if (p->fused_add) {
            /* Spec §5: the fused add follows Bias, in FLOAT64 before the FLOAT32 rounding. */
            uint64_t a0 = offsets[FWD_FUSED_ADD] + done * as;
            for (size_t t = 0; t < count; t++)
                pre[t] = (float)((load(half, p->input, x0 + t * xs) - mean[t * gs]) * factor[t * gs] + bias[t * gs] +
                                 load(half, p->fused_add, a0 + t * as));
        } else if (gs == 0) { /* one group along the run (NCHW rows): hoist its values */
            double m = mean[0], f = factor[0], b = bias[0];
            for (size_t t = 0; t < count; t++)
                pre[t] = (float)((load(half, p->input, x0 + t * xs) - m) * f + b);
        } else if (unit && gs == 1) { /* consecutive groups (NHWC rows) */
            for (size_t t = 0; t < count; t++)
                pre[t] = (float)((load(half, p->input, x0 + t) - mean[t]) * factor[t] + bias[t]);
        } else {
            for (size_t t = 0; t < count; t++)
                pre[t] = (float)((load(half, p->input, x0 + t * xs) - mean[t * gs]) * factor[t * gs] + bias[t * gs]);
        }
        finish_piece(half, unit, p, pre, count, offsets[FWD_OUTPUT] + done * steps[FWD_OUTPUT], steps[FWD_OUTPUT]);
    }
}

static void grouped_run(const void* problem, const uint64_t* offsets, const uint64_t* steps, uint64_t length) {
    const forward_problem* p = problem;
    bool unit = steps[FWD_INPUT] == 1 && steps[FWD_OUTPUT] == 1;
    DISPATCH(p->half, unit, grouped_run_impl, p, offsets, steps, length);
}

/* Inference with parameters (nearly) per element, read in place. */
HOT void inference_run_impl(bool half, bool unit, const forward_problem* p, const uint64_t* offsets,
                            const uint64_t* steps, uint64_t length) {
    float pre[PIECE];
    uint64_t xs = unit ? 1 : steps[INF_INPUT], ms = steps[INF_MEAN], vs = steps[INF_VARIANCE];
    uint64_t ss = steps[INF_SCALE], bs = steps[INF_BIAS];
    for (uint64_t done = 0; done < length; done += PIECE) {
        size_t count = (size_t)(length - done < PIECE ? length - done : PIECE);
        uint64_t x0 = offsets[INF_INPUT] + done * xs, m0 = offsets[INF_MEAN] + done * ms;
        uint64_t v0 = offsets[INF_VARIANCE] + done * vs, s0 = offsets[INF_SCALE] + done * ss;
        uint64_t b0 = offsets[INF_BIAS] + done * bs;
        for (size_t t = 0; t < count; t++) {
            double factor = load(half, p->scale, s0 + t * ss) / sqrt(load(half, p->variance, v0 + t * vs) + p->epsilon);
            pre[t] = (float)((load(half, p->input, x0 + t * xs) - load(half, p->mean, m0 + t * ms)) * factor +
                             load(half, p->bias, b0 + t * bs));
        }
        finish_piece(half, unit, p, pre, count, offsets[INF_OUTPUT] + done * steps[INF_OUTPUT], steps[INF_OUTPUT]);
    }
}

static void inference_run(const void* problem, const uint64_t* offsets, const uint64_t* steps, uint64_t length) {
    const forward_problem* p = problem;
    bool unit = steps[INF_INPUT] == 1 && steps[INF_OUTPUT] == 1;
    DISPATCH(p->half, unit, inference_run_impl, p, offsets, steps, length);
}

/* -- Input gradient: dx = k * (dy - u - (x - Mean) * w) -- */

enum { BWD_OUTPUT_GRADIENT, BWD_INPUT, BWD_INPUT_GRADIENT, BWD_GROUP };

typedef struct backward_problem {
    bool half;
    bool uses_input; /* TRAINING_GRAD; GRAD has u = w = 0 and never reads x */
    const void* input;
    const void* input_gradient;
    void* output_gradient;
    group_values groups;
} backward_problem;

/* unit: input gradient and output gradient step 1 along the run. */
HOT void backward_run_impl(bool half, bool unit, const backward_problem* p, const uint64_t* offsets,
                           const uint64_t* steps, uint64_t length) {
    uint64_t ys = unit ? 1 : steps[BWD_INPUT_GRADIENT], os = unit ? 1 : steps[BWD_OUTPUT_GRADIENT];
    uint64_t xs = steps[BWD_INPUT], gs = steps[BWD_GROUP];
    uint64_t y0 = offsets[BWD_INPUT_GRADIENT], o0 = offsets[BWD_OUTPUT_GRADIENT], x0 = offsets[BWD_INPUT];
    uint64_t g0 = offsets[BWD_GROUP];
    const double* mean = p->groups.v[0] + g0;
    const double* k = p->groups.v[1] + g0;
    const double* u = p->groups.v[2] + g0;
    const double* w = p->groups.v[3] + g0;
    if (!p->uses_input) {
        if (gs == 0) {
            double k0 = k[0];
            for (uint64_t t = 0; t < length; t++)
                store_double(half, p->output_gradient, o0 + t * os, k0 * load(half, p->input_gradient, y0 + t * ys));
        } else {
            for (uint64_t t = 0; t < length; t++)
                store_double(half, p->output_gradient, o0 + t * os,
                             k[t * gs] * load(half, p->input_gradient, y0 + t * ys));
        }
        return;
    }
    if (gs == 0) {
        double m0 = mean[0], k0 = k[0], u0 = u[0], w0 = w[0];
        for (uint64_t t = 0; t < length; t++) {
            double value =
                k0 * (load(half, p->input_gradient, y0 + t * ys) - u0 - (load(half, p->input, x0 + t * xs) - m0) * w0);
            store_double(half, p->output_gradient, o0 + t * os, value);
        }
        return;
    }
    for (uint64_t t = 0; t < length; t++) {
        uint64_t j = t * gs;
        double value = k[j] * (load(half, p->input_gradient, y0 + t * ys) - u[j] -
                               (load(half, p->input, x0 + t * xs) - mean[j]) * w[j]);
        store_double(half, p->output_gradient, o0 + t * os, value);
    }
}

static void backward_run(const void* problem, const uint64_t* offsets, const uint64_t* steps, uint64_t length) {
    const backward_problem* p = problem;
    bool unit = steps[BWD_INPUT_GRADIENT] == 1 && steps[BWD_OUTPUT_GRADIENT] == 1;
    DISPATCH(p->half, unit, backward_run_impl, p, offsets, steps, length);
}

/* ---- Grouped reduction ---- */

typedef struct reduce_plan {
    dim_list kept;    /* operands: 0 input, 1 input gradient */
    dim_list reduced; /* same operands */
    uint64_t group_count, group_size;
    uint64_t inner_groups; /* size of the innermost kept dimension */
    uint64_t rows;         /* group_count / inner_groups */
    uint64_t block, blocks_per_row;
    uint64_t chunk, chunks; /* reduced elements per tile; chunks per group */
    bool groups_inner;      /* loop order inside a tile */
} reduce_plan;

/* Splits the input's dimensions (through the operands' tensors) into kept and
 * reduced ones and chooses the tile shape from the problem alone. */
static void plan_reduction(reduce_plan* plan, const dml_batch_norm_params* params, const dml_tensor* const* operands,
                           uint32_t operand_count) {
    memset(plan, 0, sizeof *plan);
    const dml_tensor* input = operands[0];
    plan->kept.operands = plan->reduced.operands = operand_count;
    for (uint32_t i = 0; i < input->rank; i++) {
        dim_list* list = (params->reduced_axes >> i) & 1u ? &plan->reduced : &plan->kept;
        list->sizes[list->rank] = input->sizes[i];
        for (uint32_t k = 0; k < operand_count; k++)
            list->strides[k][list->rank] = operands[k]->strides[i];
        list->rank++;
    }
    dims_simplify(&plan->kept);
    dims_simplify(&plan->reduced);
    plan->group_count = params->group_count;
    plan->group_size = params->group_size;
    plan->inner_groups = plan->kept.sizes[plan->kept.rank - 1];
    plan->rows = plan->group_count / plan->inner_groups;
    /* Groups inner when the input steps less between neighbouring groups than
     * between neighbouring elements of a group (NHWC-like layouts). */
    uint64_t group_step = plan->kept.strides[0][plan->kept.rank - 1];
    uint64_t element_step = plan->reduced.strides[0][plan->reduced.rank - 1];
    bool interleaved = plan->inner_groups > 1 && plan->group_size > 1 && group_step < element_step;
    plan->groups_inner = interleaved && plan->inner_groups >= MIN_GROUPS_INNER;
    if (plan->groups_inner) {
        plan->block = plan->inner_groups < MAX_GROUP_BLOCK ? plan->inner_groups : MAX_GROUP_BLOCK;
        plan->chunk = TILE_ELEMENTS / plan->block;
    } else if (interleaved) { /* a few interleaved groups (NHWC, small C): all in one tile, sharing its cache lines */
        plan->block = plan->inner_groups;
        plan->chunk = TILE_ELEMENTS / plan->block;
    } else {
        plan->chunk = TILE_ELEMENTS;
        plan->block = 1;
    }
    if (plan->chunk > plan->group_size) plan->chunk = plan->group_size;
    if (!interleaved) { /* small groups: several whole groups per tile */
        uint64_t block = TILE_ELEMENTS / plan->chunk;
        plan->block = block < plan->inner_groups ? block : plan->inner_groups;
    }
    plan->chunks = (plan->group_size + plan->chunk - 1) / plan->chunk;
    plan->blocks_per_row = (plan->inner_groups + plan->block - 1) / plan->block;
}

static uint64_t plan_tiles(const reduce_plan* plan) { return plan->rows * plan->blocks_per_row * plan->chunks; }

/* The tile's first group, its group count, chunk, element range and the
 * element offset of its first group for each operand. */
typedef struct tile {
    uint64_t first_group, groups, chunk, begin, end;
    uint64_t base[2];
} tile;

static tile tile_at(const reduce_plan* plan, uint64_t index) {
    tile t;
    t.chunk = index % plan->chunks;
    uint64_t row_block = index / plan->chunks;
    uint64_t block = row_block % plan->blocks_per_row, row = row_block / plan->blocks_per_row;
    uint64_t first_inner = block * plan->block;
    t.first_group = row * plan->inner_groups + first_inner;
    t.groups = plan->inner_groups - first_inner < plan->block ? plan->inner_groups - first_inner : plan->block;
    t.begin = t.chunk * plan->chunk;
    t.end = t.begin + plan->chunk < plan->group_size ? t.begin + plan->chunk : plan->group_size;
    const dim_list* kept = &plan->kept;
    for (uint32_t k = 0; k < kept->operands; k++) {
        uint64_t rest = row, offset = first_inner * kept->strides[k][kept->rank - 1];
        for (uint32_t i = kept->rank - 1; i-- > 0;) {
            offset += (rest % kept->sizes[i]) * kept->strides[k][i];
            rest /= kept->sizes[i];
        }
        t.base[k] = offset;
    }
    return t;
}

/* -- Sums along one run of a group (groups handled one at a time) -- */

/* Sum of `length` elements at stride `step`, in four interleaved FLOAT64
 * lanes combined in a fixed order (the same for every thread count). */
HOT double run_sum_impl(bool half, bool unit, const void* base, uint64_t offset, uint64_t step, uint64_t length) {
    if (unit) step = 1;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    uint64_t t = 0;
    for (; t + 4 <= length; t += 4) {
        s0 += load(half, base, offset + t * step);
        s1 += load(half, base, offset + (t + 1) * step);
        s2 += load(half, base, offset + (t + 2) * step);
        s3 += load(half, base, offset + (t + 3) * step);
    }
    for (; t < length; t++)
        s0 += load(half, base, offset + t * step);
    return (s0 + s1) + (s2 + s3);
}

/* Sum of (element - center)^2, lanes as above. */
HOT double run_squares_impl(bool half, bool unit, const void* base, uint64_t offset, uint64_t step, uint64_t length,
                            double center) {
    if (unit) step = 1;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    uint64_t t = 0;
    for (; t + 4 <= length; t += 4) {
        double d0 = load(half, base, offset + t * step) - center;
        double d1 = load(half, base, offset + (t + 1) * step) - center;
        double d2 = load(half, base, offset + (t + 2) * step) - center;
        double d3 = load(half, base, offset + (t + 3) * step) - center;
        s0 += d0 * d0;
        s1 += d1 * d1;
        s2 += d2 * d2;
        s3 += d3 * d3;
    }
    for (; t < length; t++) {
        double d = load(half, base, offset + t * step) - center;
        s0 += d * d;
    }
    return (s0 + s1) + (s2 + s3);
}

/* sdy += sum dy and sdyxc += sum dy * (x - mean), two lanes each. */
HOT void run_gradient_sums_impl(bool half, bool unit, const void* x, uint64_t x_offset, uint64_t x_step, const void* dy,
                                uint64_t dy_offset, uint64_t dy_step, uint64_t length, double mean, double* sdy,
                                double* sdyxc) {
    if (unit) x_step = dy_step = 1;
    double s0 = 0, s1 = 0, c0 = 0, c1 = 0;
    uint64_t t = 0;
    for (; t + 2 <= length; t += 2) {
        double dy0 = load(half, dy, dy_offset + t * dy_step), dy1 = load(half, dy, dy_offset + (t + 1) * dy_step);
        s0 += dy0;
        s1 += dy1;
        c0 += dy0 * (load(half, x, x_offset + t * x_step) - mean);
        c1 += dy1 * (load(half, x, x_offset + (t + 1) * x_step) - mean);
    }
    for (; t < length; t++) {
        double dy0 = load(half, dy, dy_offset + t * dy_step);
        s0 += dy0;
        c0 += dy0 * (load(half, x, x_offset + t * x_step) - mean);
    }
    *sdy += s0 + s1;
    *sdyxc += c0 + c1;
}

#define RUN_SUM(half, unit, result, ...) (result) = run_sum_impl(half, unit, __VA_ARGS__)
#define RUN_SQUARES(half, unit, result, ...) (result) = run_squares_impl(half, unit, __VA_ARGS__)
#define RUN_GRADIENT_SUMS(half, unit, ...) run_gradient_sums_impl(half, unit, __VA_ARGS__)

static double run_sum(bool half, const void* base, uint64_t offset, uint64_t step, uint64_t length) {
    double result;
    DISPATCH(half, step == 1, RUN_SUM, result, base, offset, step, length);
    return result;
}

static double run_squares(bool half, const void* base, uint64_t offset, uint64_t step, uint64_t length, double center) {
    double result;
    DISPATCH(half, step == 1, RUN_SQUARES, result, base, offset, step, length, center);
    return result;
}

static void run_gradient_sums(bool half, const void* x, uint64_t x_offset, uint64_t x_step, const void* dy,
                              uint64_t dy_offset, uint64_t dy_step, uint64_t length, double mean, double* sdy,
                              double* sdyxc) {
    DISPATCH(half, x_step == 1 && dy_step == 1, RUN_GRADIENT_SUMS, x, x_offset, x_step, dy, dy_offset, dy_step, length,
             mean, sdy, sdyxc);
}

/* -- Sums of one run position across a block of groups (groups inner) -- */

/* sums[g] += element (g) for each of `groups` groups at stride group_step,
 * for every element of a run; each group's order stays the run's order. */
HOT void block_sums_impl(bool half, bool unit, const void* base, uint64_t offset, uint64_t element_step,
                         uint64_t length, uint64_t group_step, uint64_t groups, double* sums) {
    if (unit) group_step = 1;
    for (uint64_t e = 0; e < length; e++)
        for (uint64_t g = 0; g < groups; g++)
            sums[g] += load(half, base, offset + e * element_step + g * group_step);
}

HOT void block_squares_impl(bool half, bool unit, const void* base, uint64_t offset, uint64_t element_step,
                            uint64_t length, uint64_t group_step, uint64_t groups, const double* centers,
                            double* squares) {
    if (unit) group_step = 1;
    for (uint64_t e = 0; e < length; e++)
        for (uint64_t g = 0; g < groups; g++) {
            double d = load(half, base, offset + e * element_step + g * group_step) - centers[g];
            squares[g] += d * d;
        }
}

HOT void block_gradient_sums_impl(bool half, bool unit, const void* x, uint64_t x_offset, uint64_t x_step,
                                  uint64_t x_group_step, const void* dy, uint64_t dy_offset, uint64_t dy_step,
                                  uint64_t dy_group_step, uint64_t length, uint64_t groups, const double* means,
                                  double* sdy, double* sdyxc) {
    if (unit) x_group_step = dy_group_step = 1;
    for (uint64_t e = 0; e < length; e++)
        for (uint64_t g = 0; g < groups; g++) {
            double dyv = load(half, dy, dy_offset + e * dy_step + g * dy_group_step);
            sdy[g] += dyv;
            sdyxc[g] += dyv * (load(half, x, x_offset + e * x_step + g * x_group_step) - means[g]);
        }
}

#define BLOCK_SUMS(half, unit, ...) block_sums_impl(half, unit, __VA_ARGS__)
#define BLOCK_SQUARES(half, unit, ...) block_squares_impl(half, unit, __VA_ARGS__)
#define BLOCK_GRADIENT_SUMS(half, unit, ...) block_gradient_sums_impl(half, unit, __VA_ARGS__)

/* -- Tiles -- */

/* TRAINING: a tile's chunk statistics, two passes over the tile (it stays in
 * cache): the chunk mean, then the sum of squares around it. */
static void stats_tile(bool half, const reduce_plan* plan, const void* input, uint64_t index, dml_bn_stats* partials) {
    tile t = tile_at(plan, index);
    const dim_list* red = &plan->reduced;
    uint64_t element_step = red->strides[0][red->rank - 1];
    uint64_t group_step = plan->kept.strides[0][plan->kept.rank - 1];
    double count = (double)(t.end - t.begin);
    run_cursor cursor;
    if (!plan->groups_inner) {
        for (uint64_t g = 0; g < t.groups; g++) {
            uint64_t base = t.base[0] + g * group_step;
            double sum = 0, m2 = 0;
            cursor_start(&cursor, red->rank, red->sizes, t.begin, t.end);
            FOR_EACH_RUN(cursor, length) {
                sum += run_sum(half, input, base + cursor_offset(&cursor, red->strides[0]), element_step, length);
            }
            double mean = sum / count;
            cursor_start(&cursor, red->rank, red->sizes, t.begin, t.end);
            FOR_EACH_RUN(cursor, length) {
                m2 += run_squares(half, input, base + cursor_offset(&cursor, red->strides[0]), element_step, length,
                                  mean);
            }
            partials[(t.first_group + g) * plan->chunks + t.chunk] = (dml_bn_stats){count, mean, m2};
        }
        return;
    }
    double sum[MAX_GROUP_BLOCK] = {0}, m2[MAX_GROUP_BLOCK] = {0};
    cursor_start(&cursor, red->rank, red->sizes, t.begin, t.end);
    FOR_EACH_RUN(cursor, length) {
        uint64_t offset = t.base[0] + cursor_offset(&cursor, red->strides[0]);
        DISPATCH(half, group_step == 1, BLOCK_SUMS, input, offset, element_step, length, group_step, t.groups, sum);
    }
    for (uint64_t g = 0; g < t.groups; g++)
        sum[g] /= count; /* now the chunk means */
    cursor_start(&cursor, red->rank, red->sizes, t.begin, t.end);
    FOR_EACH_RUN(cursor, length) {
        uint64_t offset = t.base[0] + cursor_offset(&cursor, red->strides[0]);
        DISPATCH(half, group_step == 1, BLOCK_SQUARES, input, offset, element_step, length, group_step, t.groups, sum,
                 m2);
    }
    for (uint64_t g = 0; g < t.groups; g++)
        partials[(t.first_group + g) * plan->chunks + t.chunk] = (dml_bn_stats){count, sum[g], m2[g]};
}

/* One chunk of one group's gradient sums: sdy = sum dy, sdyxc = sum dy * (x - Mean). */
typedef struct grad_partial {
    double sdy, sdyxc;
} grad_partial;

static void grad_tile(bool half, const reduce_plan* plan, const void* input, const void* input_gradient,
                      const double* group_means, uint64_t index, grad_partial* partials) {
    tile t = tile_at(plan, index);
    const dim_list* red = &plan->reduced;
    uint64_t x_step = red->strides[0][red->rank - 1], dy_step = red->strides[1][red->rank - 1];
    uint64_t x_group_step = plan->kept.strides[0][plan->kept.rank - 1];
    uint64_t dy_group_step = plan->kept.strides[1][plan->kept.rank - 1];
    run_cursor cursor;
    if (!plan->groups_inner) {
        for (uint64_t g = 0; g < t.groups; g++) {
            uint64_t x_base = t.base[0] + g * x_group_step, dy_base = t.base[1] + g * dy_group_step;
            double mean = group_means[t.first_group + g], sdy = 0, sdyxc = 0;
            cursor_start(&cursor, red->rank, red->sizes, t.begin, t.end);
            FOR_EACH_RUN(cursor, length) {
                run_gradient_sums(half, input, x_base + cursor_offset(&cursor, red->strides[0]), x_step, input_gradient,
                                  dy_base + cursor_offset(&cursor, red->strides[1]), dy_step, length, mean, &sdy,
                                  &sdyxc);
            }
            partials[(t.first_group + g) * plan->chunks + t.chunk] = (grad_partial){sdy, sdyxc};
        }
        return;
    }
    double mean[MAX_GROUP_BLOCK], sdy[MAX_GROUP_BLOCK] = {0}, sdyxc[MAX_GROUP_BLOCK] = {0};
    for (uint64_t g = 0; g < t.groups; g++)
        mean[g] = group_means[t.first_group + g];
    bool unit = x_group_step == 1 && dy_group_step == 1;
    cursor_start(&cursor, red->rank, red->sizes, t.begin, t.end);
    FOR_EACH_RUN(cursor, length) {
        uint64_t x_offset = t.base[0] + cursor_offset(&cursor, red->strides[0]);
        uint64_t dy_offset = t.base[1] + cursor_offset(&cursor, red->strides[1]);
        DISPATCH(half, unit, BLOCK_GRADIENT_SUMS, input, x_offset, x_step, x_group_step, input_gradient, dy_offset,
                 dy_step, dy_group_step, length, t.groups, mean, sdy, sdyxc);
    }
    for (uint64_t g = 0; g < t.groups; g++)
        partials[(t.first_group + g) * plan->chunks + t.chunk] = (grad_partial){sdy[g], sdyxc[g]};
}

/* ---- Operators ---- */

/* Element offset, in a parameter tensor broadcast over `sizes`, of the
 * row-major index `index` over `sizes`. */
static uint64_t broadcast_offset(const dml_tensor* tensor, const uint32_t* sizes, uint32_t rank, uint64_t index) {
    uint64_t offset = 0;
    for (uint32_t i = rank; i-- > 0;) {
        if (tensor->sizes[i] != 1) offset += (index % sizes[i]) * tensor->strides[i];
        index /= sizes[i];
    }
    return offset;
}

/* ---- Per-group bookkeeping shared with the fast paths (batch_normalization_cpu.h) ---- */

double dml_cpu_bn_load_parameter(const dml_tensor* tensor, const void* data, uint64_t index) {
    return load(is_half(tensor), data, row_major_offset(tensor, index));
}

void dml_cpu_bn_store_parameter(const dml_tensor* tensor, void* data, uint64_t index, double value) {
    store_double(is_half(tensor), data, row_major_offset(tensor, index), value);
}

void dml_cpu_bn_finish_statistics(const dml_kernel_args* args, uint64_t j, dml_bn_stats stats, double values[3]) {
    const DMLOperator* op = args->op;
    const dml_batch_norm_params* params = op->params;
    double variance = stats.m2 / (double)params->group_size;
    dml_cpu_bn_store_parameter(&op->outputs[DML_BN_TRAINING_OUTPUT_MEAN].tensor,
                               args->outputs[DML_BN_TRAINING_OUTPUT_MEAN], j, stats.mean);
    dml_cpu_bn_store_parameter(&op->outputs[DML_BN_TRAINING_OUTPUT_VARIANCE].tensor,
                               args->outputs[DML_BN_TRAINING_OUTPUT_VARIANCE], j, variance);
    double scale =
        dml_cpu_bn_load_parameter(&op->inputs[DML_BN_TRAINING_SCALE].tensor, args->inputs[DML_BN_TRAINING_SCALE], j);
    values[0] = stats.mean;
    values[1] = scale / sqrt(variance + (double)params->epsilon);
    values[2] =
        dml_cpu_bn_load_parameter(&op->inputs[DML_BN_TRAINING_BIAS].tensor, args->inputs[DML_BN_TRAINING_BIAS], j);
}

void dml_cpu_bn_finish_gradient(const dml_kernel_args* args, uint64_t j, double sdy, double sdyxc, bool training,
                                double values[3]) {
    const DMLOperator* op = args->op;
    const dml_batch_norm_params* params = op->params;
    double variance_plus_epsilon =
        dml_cpu_bn_load_parameter(&op->inputs[DML_BN_GRAD_VARIANCE].tensor, args->inputs[DML_BN_GRAD_VARIANCE], j) +
        (double)params->epsilon;
    double inv = 1.0 / sqrt(variance_plus_epsilon);
    double scale = dml_cpu_bn_load_parameter(&op->inputs[DML_BN_GRAD_SCALE].tensor, args->inputs[DML_BN_GRAD_SCALE], j);
    double group_size = (double)params->group_size;
    dml_cpu_bn_store_parameter(&op->outputs[DML_BN_GRAD_OUTPUT_BIAS_GRADIENT].tensor,
                               args->outputs[DML_BN_GRAD_OUTPUT_BIAS_GRADIENT], j, sdy);
    dml_cpu_bn_store_parameter(&op->outputs[DML_BN_GRAD_OUTPUT_SCALE_GRADIENT].tensor,
                               args->outputs[DML_BN_GRAD_OUTPUT_SCALE_GRADIENT], j, sdyxc * inv);
    values[0] = scale * inv;
    values[1] = training ? sdy / group_size : 0.0;
    values[2] = training ? sdyxc / group_size / variance_plus_epsilon : 0.0;
}

/* ---- Plans: everything but the data, decided at compile time ---- */

/* Each operator's workspace (the temporary resource): the chunk partials of
 * the reduction, then the per-group values of the element-wise pass. Both
 * are a few FLOAT64 per group, so at most 7 doubles (56 bytes) per element
 * when no axis is reduced, and a few bytes per group otherwise. */
typedef struct bn_plan {
    reduce_plan reduce;      /* TRAINING and the gradients */
    uint64_t partials_bytes; /* start of the group values in the workspace (64-aligned) */
    uint64_t group_count;    /* entries of each group_values array */
    dim_list elementwise;    /* the element-wise pass's operands, ordered (ew_order) */
    uint64_t element_count;
    int threads;
    /* BATCH_NORMALIZATION: whether {mean, factor, bias} are precomputed per
     * combination of U, the union of the parameters' shapes (spec §4, BN-5). */
    bool grouped;
    uint32_t union_sizes[BN_MAX_RANK];
} bn_plan;

static uint64_t align64(uint64_t bytes) { return dml_round_up_u64(bytes, 64); }

/* Sizes the workspace: `partial_size` bytes per tile chunk, then the groups. */
static void plan_workspace(bn_plan* plan, dml_plan* result, size_t partial_size) {
    plan->partials_bytes = align64(plan->reduce.group_count * plan->reduce.chunks * partial_size);
    plan->group_count = plan->reduce.group_count;
    result->temporary_size = plan->partials_bytes + plan->group_count * 4 * sizeof(double);
}

static bn_plan* plan_begin(const DMLDevice* device, dml_plan* result, const dml_tensor* output, uint32_t operands) {
    bn_plan* plan = dml_plan_state(result, sizeof *plan);
    if (plan == NULL) return NULL;
    plan->threads = (int)device->threads;
    plan->element_count = output->element_count;
    plan->elementwise.rank = output->rank;
    plan->elementwise.operands = operands;
    memcpy(plan->elementwise.sizes, output->sizes, sizeof plan->elementwise.sizes);
    return plan;
}

static HRESULT plan_inference(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                              dml_plan* result) {
    (void)flags;
    const dml_tensor* input = &op->inputs[DML_BN_INPUT].tensor;
    const dml_tensor* output = &op->outputs[DML_BN_OUTPUT].tensor;
    uint64_t union_count = 1;
    uint32_t union_sizes[BN_MAX_RANK];
    for (uint32_t i = 0; i < output->rank; i++) {
        union_sizes[i] = 1;
        for (uint32_t k = 0; k < 4; k++)
            if (op->inputs[DML_BN_MEAN + k].tensor.sizes[i] > union_sizes[i])
                union_sizes[i] = op->inputs[DML_BN_MEAN + k].tensor.sizes[i];
        union_count *= union_sizes[i];
    }
    /* Few combinations: precompute them; else read the parameters in place. */
    bool grouped = union_count * 8 <= output->element_count;
    bn_plan* plan = plan_begin(device, result, output, grouped ? 4 : 6);
    if (plan == NULL) return E_OUTOFMEMORY;
    dim_list* dims = &plan->elementwise;
    memcpy(dims->strides[FWD_OUTPUT], output->strides, sizeof dims->strides[0]);
    memcpy(dims->strides[FWD_INPUT], input->strides, sizeof dims->strides[0]);
    plan->grouped = grouped;
    if (grouped) {
        memcpy(plan->union_sizes, union_sizes, sizeof union_sizes);
        plan->group_count = union_count;
        result->temporary_size = union_count * 4 * sizeof(double);
        uint64_t stride = 1; /* packed over U, 0 where U is 1 */
        for (uint32_t i = output->rank; i-- > 0;) {
            dims->strides[FWD_GROUP][i] = union_sizes[i] == 1 ? 0 : stride;
            stride *= union_sizes[i];
        }
    } else {
        for (uint32_t k = 0; k < 4; k++)
            broadcast_strides(&op->inputs[DML_BN_MEAN + k].tensor, dims->strides[INF_MEAN + k]);
    }
    ew_order(dims);
    return S_OK;
}

static HRESULT run_inference(const dml_kernel_args* args) {
    const DMLOperator* op = args->op;
    const bn_plan* plan = DML_PLAN_STATE(args, bn_plan);
    const dml_batch_norm_params* params = op->params;
    const dml_tensor* output = &op->outputs[DML_BN_OUTPUT].tensor;
    bool half = is_half(output);
    forward_problem problem = {
        .half = half,
        .input = args->inputs[DML_BN_INPUT],
        .output = args->outputs[DML_BN_OUTPUT],
        .mean = args->inputs[DML_BN_MEAN],
        .variance = args->inputs[DML_BN_VARIANCE],
        .scale = args->inputs[DML_BN_SCALE],
        .bias = args->inputs[DML_BN_BIAS],
        .epsilon = params->epsilon,
        .activation = params->activation,
    };
    if (!plan->grouped) {
        ew_run(&plan->elementwise, plan->element_count, inference_run, &problem, plan->threads);
        return S_OK;
    }
    group_values groups = group_values_at(args->temporary, plan->group_count);
    const void* data[4] = {problem.mean, problem.variance, problem.scale, problem.bias};
    double epsilon = params->epsilon;
    int64_t count = (int64_t)plan->group_count;
#pragma omp parallel for num_threads(dml_cpu_threads_for(plan->threads, plan->group_count, GROUPS_PER_THREAD))         \
    schedule(static)
    for (int64_t u = 0; u < count; u++) {
        double value[4];
        for (uint32_t k = 0; k < 4; k++)
            value[k] = load(
                half, data[k],
                broadcast_offset(&op->inputs[DML_BN_MEAN + k].tensor, plan->union_sizes, output->rank, (uint64_t)u));
        groups.v[0][u] = value[0];
        groups.v[1][u] = value[2] / sqrt(value[1] + epsilon);
        groups.v[2][u] = value[3];
    }
    problem.groups = groups;
    ew_run(&plan->elementwise, plan->element_count, grouped_run, &problem, plan->threads);
    return S_OK;
}

static HRESULT plan_training(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                             dml_plan* result) {
    (void)flags;
    const dml_tensor* input = &op->inputs[DML_BN_TRAINING_INPUT].tensor;
    const dml_tensor* fused_add = &op->inputs[DML_BN_TRAINING_FUSED_ADD].tensor;
    const dml_tensor* output = &op->outputs[DML_BN_TRAINING_OUTPUT].tensor;
    bn_plan* plan = plan_begin(device, result, output, 4);
    if (plan == NULL) return E_OUTOFMEMORY;
    const dml_tensor* operands[1] = {input};
    plan_reduction(&plan->reduce, op->params, operands, 1);
    plan_workspace(plan, result, sizeof(dml_bn_stats));
    dim_list* dims = &plan->elementwise;
    memcpy(dims->strides[FWD_OUTPUT], output->strides, sizeof dims->strides[0]);
    memcpy(dims->strides[FWD_INPUT], input->strides, sizeof dims->strides[0]);
    if (fused_add->present) memcpy(dims->strides[FWD_FUSED_ADD], fused_add->strides, sizeof dims->strides[0]);
    /* group j is row-major over P */
    packed_broadcast_strides(&op->inputs[DML_BN_TRAINING_SCALE].tensor, dims->strides[FWD_GROUP]);
    ew_order(dims);
    return S_OK;
}

static HRESULT run_training(const dml_kernel_args* args) {
    const DMLOperator* op = args->op;
    const bn_plan* plan = DML_PLAN_STATE(args, bn_plan);
    const reduce_plan* reduce = &plan->reduce;
    const dml_batch_norm_params* params = op->params;
    const dml_tensor* input = &op->inputs[DML_BN_TRAINING_INPUT].tensor;
    const dml_tensor* fused_add = &op->inputs[DML_BN_TRAINING_FUSED_ADD].tensor;
    bool half = is_half(input);
    int threads = plan->threads;
    dml_bn_stats* partials = args->temporary;
    group_values groups = group_values_at((char*)args->temporary + plan->partials_bytes, plan->group_count);

    /* 1. Chunk statistics, in parallel over every tile. */
    const void* x = args->inputs[DML_BN_TRAINING_INPUT];
    int64_t tiles = (int64_t)plan_tiles(reduce);
#pragma omp parallel for num_threads(dml_cpu_threads_for(threads, (uint64_t)tiles, 1)) schedule(static)
    for (int64_t index = 0; index < tiles; index++) {
        stats_tile(half, reduce, x, (uint64_t)index, partials);
    }

    /* 2. Per group: Chan's merge of the chunks in chunk order, the biased
     * variance (divisor M, decision BN-1), OutputMean/OutputVariance and the
     * values of the element-wise pass. */
    int64_t group_count = (int64_t)reduce->group_count;
#pragma omp parallel for num_threads(dml_cpu_threads_for(threads, reduce->group_count, GROUPS_PER_THREAD))             \
    schedule(static)
    for (int64_t j = 0; j < group_count; j++) {
        const dml_bn_stats* chunk = partials + (uint64_t)j * reduce->chunks;
        dml_bn_stats stats = {0, 0, 0};
        for (uint64_t c = 0; c < reduce->chunks; c++)
            dml_bn_stats_merge(&stats, chunk[c]);
        double values[3];
        dml_cpu_bn_finish_statistics(args, (uint64_t)j, stats, values);
        for (int k = 0; k < 3; k++)
            groups.v[k][j] = values[k];
    }

    /* 3. The normalized output, element-wise. */
    forward_problem problem = {
        .half = half,
        .input = x,
        .fused_add = fused_add->present ? args->inputs[DML_BN_TRAINING_FUSED_ADD] : NULL,
        .output = args->outputs[DML_BN_TRAINING_OUTPUT],
        .groups = groups,
        .activation = params->activation,
    };
    ew_run(&plan->elementwise, plan->element_count, grouped_run, &problem, threads);
    return S_OK;
}

/* BATCH_NORMALIZATION_GRAD (Mean/Variance constants, spec §6) and
 * BATCH_NORMALIZATION_TRAINING_GRAD (through the batch statistics, §7). */
static HRESULT plan_gradient(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                             dml_plan* result) {
    (void)flags;
    const dml_tensor* input = &op->inputs[DML_BN_GRAD_INPUT].tensor;
    const dml_tensor* input_gradient = &op->inputs[DML_BN_GRAD_INPUT_GRADIENT].tensor;
    const dml_tensor* output_gradient = &op->outputs[DML_BN_GRAD_OUTPUT_GRADIENT].tensor;
    bn_plan* plan = plan_begin(device, result, output_gradient, 4);
    if (plan == NULL) return E_OUTOFMEMORY;
    const dml_tensor* operands[2] = {input, input_gradient};
    plan_reduction(&plan->reduce, op->params, operands, 2);
    plan_workspace(plan, result, sizeof(grad_partial));
    dim_list* dims = &plan->elementwise;
    memcpy(dims->strides[BWD_OUTPUT_GRADIENT], output_gradient->strides, sizeof dims->strides[0]);
    memcpy(dims->strides[BWD_INPUT], input->strides, sizeof dims->strides[0]);
    memcpy(dims->strides[BWD_INPUT_GRADIENT], input_gradient->strides, sizeof dims->strides[0]);
    packed_broadcast_strides(&op->inputs[DML_BN_GRAD_MEAN].tensor, dims->strides[BWD_GROUP]);
    ew_order(dims);
    return S_OK;
}

static HRESULT run_gradient(const dml_kernel_args* args, bool training) {
    const DMLOperator* op = args->op;
    const bn_plan* plan = DML_PLAN_STATE(args, bn_plan);
    const reduce_plan* reduce = &plan->reduce;
    const dml_tensor* input = &op->inputs[DML_BN_GRAD_INPUT].tensor;
    const dml_tensor* mean = &op->inputs[DML_BN_GRAD_MEAN].tensor;
    bool half = is_half(input);
    int threads = plan->threads;
    grad_partial* partials = args->temporary;
    group_values groups = group_values_at((char*)args->temporary + plan->partials_bytes, plan->group_count);
    int64_t group_count = (int64_t)reduce->group_count;
    const void* mean_data = args->inputs[DML_BN_GRAD_MEAN];
#pragma omp parallel for num_threads(dml_cpu_threads_for(threads, reduce->group_count, GROUPS_PER_THREAD))             \
    schedule(static)
    for (int64_t j = 0; j < group_count; j++)
        groups.v[0][j] = dml_cpu_bn_load_parameter(mean, mean_data, (uint64_t)j);

    /* 1. Chunk sums of dy and dy * (x - Mean), in parallel over every tile. */
    const void* x = args->inputs[DML_BN_GRAD_INPUT];
    const void* dy = args->inputs[DML_BN_GRAD_INPUT_GRADIENT];
    int64_t tiles = (int64_t)plan_tiles(reduce);
#pragma omp parallel for num_threads(dml_cpu_threads_for(threads, (uint64_t)tiles, 1)) schedule(static)
    for (int64_t index = 0; index < tiles; index++) {
        grad_tile(half, reduce, x, dy, groups.v[0], (uint64_t)index, partials);
    }

    /* 2. Per group: the sums in chunk order, the parameter gradients and the
     * values of the element-wise pass. */
#pragma omp parallel for num_threads(dml_cpu_threads_for(threads, reduce->group_count, GROUPS_PER_THREAD))             \
    schedule(static)
    for (int64_t j = 0; j < group_count; j++) {
        const grad_partial* chunk = partials + (uint64_t)j * reduce->chunks;
        double sdy = 0, sdyxc = 0;
        for (uint64_t c = 0; c < reduce->chunks; c++) {
            sdy += chunk[c].sdy;
            sdyxc += chunk[c].sdyxc;
        }
        double values[3];
        dml_cpu_bn_finish_gradient(args, (uint64_t)j, sdy, sdyxc, training, values);
        for (int k = 0; k < 3; k++)
            groups.v[k + 1][j] = values[k];
    }

    /* 3. The input gradient, element-wise. */
    backward_problem problem = {
        .half = half,
        .input = x,
        .input_gradient = dy,
        .output_gradient = args->outputs[DML_BN_GRAD_OUTPUT_GRADIENT],
        .groups = groups,
        .uses_input = training,
    };
    ew_run(&plan->elementwise, plan->element_count, backward_run, &problem, threads);
    return S_OK;
}

static HRESULT run_gradient_constant_statistics(const dml_kernel_args* args) { return run_gradient(args, false); }

static HRESULT run_gradient_batch_statistics(const dml_kernel_args* args) { return run_gradient(args, true); }

const dml_impl dml_cpu_batch_normalization_generic = {"batch_normalization/generic/strided", DML_ISA_GENERIC,
                                                      plan_inference, run_inference};
const dml_impl dml_cpu_batch_normalization_training_generic = {"batch_normalization_training/generic/strided",
                                                               DML_ISA_GENERIC, plan_training, run_training};
const dml_impl dml_cpu_batch_normalization_grad_generic = {"batch_normalization_grad/generic/strided", DML_ISA_GENERIC,
                                                           plan_gradient, run_gradient_constant_statistics};
const dml_impl dml_cpu_batch_normalization_training_grad_generic = {
    "batch_normalization_training_grad/generic/strided", DML_ISA_GENERIC, plan_gradient, run_gradient_batch_statistics};
