/* ROI align and its gradient on the CPU (spec roi_align.md §4, §7).
 *
 * The per-sample math (sample positions, rounding, clamping, weights) is in
 * src/ops/roi_align_math.h, shared with the other backends.
 *
 * Forward: parallel over output rows (roi, channel, oy); each element sums
 * (in FLOAT64, RA-16) or maximises its samples in the spec's order (X outer,
 * Y inner).
 *
 * Gradient, deterministic without atomics:
 * - OutputGradientTensor: one task per (image, channel) plane, or per band of
 *   rows of it when there are fewer planes than threads. A task accumulates,
 *   into a FLOAT64 plane of its own (RA-16), every contribution that lands in its rows,
 *   in the fixed order r (ROIs of that image, increasing), oy, ox, sample,
 *   tap. Each pixel therefore sees the same sequence of additions whatever the
 *   thread count or banding.
 * - OutputROIGradientTensor: one task per (roi, channel group), with groups
 *   fixed by C alone; FLOAT64 sums per channel, added in increasing channel
 *   order per group, the groups combined per ROI in increasing group order
 *   (the fixed shape of roi_align_math.h, which the CUDA backend follows to
 *   the bit). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/status.h"
#include "roi_common.h"

/* One (image, channel) plane of a {N, C, H, W} tensor. */
typedef struct plane_view {
    const void* base;
    uint64_t origin; /* element offset of (n, c, 0, 0) */
    uint64_t row_stride, column_stride;
    uint32_t height, width;
    bool half;
} plane_view;

static plane_view plane_make(const void* base, const uint64_t strides[4], uint64_t n, uint32_t c, uint32_t height,
                             uint32_t width, bool half) {
    plane_view view = {base, n * strides[0] + c * strides[1], strides[2], strides[3], height, width, half};
    return view;
}

static inline float plane_at(const plane_view* view, uint32_t y, uint32_t x) {
    return roi_load(view->base, view->origin + y * view->row_stride + x * view->column_stride, view->half);
}

/* The value of an in-bounds sample (§4.3) from its X and Y taps. */
static inline float sample_value(const plane_view* view, const dml_roi_axis_sample* sx, const dml_roi_axis_sample* sy,
                                 bool linear) {
    if (!linear) return plane_at(view, sy->first, sx->first);
    return dml_roi_bilinear(plane_at(view, sy->first, sx->first), plane_at(view, sy->first, sx->second),
                            plane_at(view, sy->second, sx->first), plane_at(view, sy->second, sx->second), sx->fraction,
                            sy->fraction);
}

/* ---- Forward (§4) ---- */

typedef struct forward_problem {
    roi_align_dims dims;
    bool half;
    const void* input;
    uint64_t in_strides[4];
    void* output;
    uint64_t out_strides[4];
} forward_problem;

/* Output row (r, c, oy): every ox. Inlined into one copy per element type
 * (half is a constant there). */
static inline __attribute__((always_inline)) void forward_row_typed(const forward_problem* f, uint64_t row, bool half) {
    const dml_roi_align_params* p = f->dims.params;
    uint32_t oy = (uint32_t)(row % f->dims.out_height);
    uint64_t rest = row / f->dims.out_height;
    uint32_t c = (uint32_t)(rest % f->dims.channels);
    uint32_t r = (uint32_t)(rest / f->dims.channels);
    uint64_t out_row = r * f->out_strides[0] + c * f->out_strides[1] + oy * f->out_strides[2];
    roi_region region =
        roi_region_make(&f->dims.source, r, p, f->dims.out_height, f->dims.out_width, f->dims.height, f->dims.width);
    if (region.batch >= f->dims.batch) { /* RA-12: no image to read */
        for (uint32_t ox = 0; ox < f->dims.out_width; ox++)
            roi_store(f->output, out_row + ox * f->out_strides[3], half, p->out_of_bounds_value);
        return;
    }
    plane_view plane = plane_make(f->input, f->in_strides, region.batch, c, f->dims.height, f->dims.width, half);
    uint64_t per_x = region.x.per_output, per_y = region.y.per_output;
    uint64_t y_begin = oy * per_y;
    /* The Y samples are the same for every ox and tx of the row: computed
     * once when they fit. */
    enum { Y_CACHE = 64 };
    dml_roi_axis_sample y_cache[Y_CACHE];
    bool y_cached = per_y <= Y_CACHE;
    for (uint64_t j = 0; y_cached && j < per_y; j++)
        y_cache[j] = dml_roi_axis_sample_at(&region.y, y_begin + j, p);
    bool linear = p->interpolation_linear;
    for (uint32_t ox = 0; ox < f->dims.out_width; ox++) {
        double sum = 0.0;
        float best = 0.0f;
        bool first = true;
        for (uint64_t tx = ox * per_x; tx < ox * per_x + per_x; tx++) {
            dml_roi_axis_sample sx = dml_roi_axis_sample_at(&region.x, tx, p);
            for (uint64_t j = 0; j < per_y; j++) {
                dml_roi_axis_sample sy = y_cached ? y_cache[j] : dml_roi_axis_sample_at(&region.y, y_begin + j, p);
                /* Out-of-bounds samples take part with OutOfBoundsInputValue (§4.4). */
                float value =
                    sx.outside || sy.outside ? p->out_of_bounds_value : sample_value(&plane, &sx, &sy, linear);
                if (p->reduction_max) {
                    bool take = first || dml_nan_aware_greater(value, best);
                    best = take ? value : best;
                    first = false;
                } else {
                    sum += value;
                }
            }
        }
        roi_store(f->output, out_row + ox * f->out_strides[3], half,
                  p->reduction_max ? best : dml_roi_average(sum, &region.x, &region.y));
    }
}

static void forward_row_f32(const forward_problem* f, uint64_t row) { forward_row_typed(f, row, false); }
static void forward_row_f16(const forward_problem* f, uint64_t row) { forward_row_typed(f, row, true); }

static HRESULT run_roi_align(const dml_kernel_args* args) {
    const DMLOperator* op = args->op;
    const dml_tensor* input = &op->inputs[DML_ROI_ALIGN_INPUT].tensor;
    const dml_tensor* output = &op->outputs[DML_ROI_ALIGN_OUTPUT].tensor;
    forward_problem f = {
        .dims = roi_align_forward_dims(args),
        .half = input->type == DML_TENSOR_DATA_TYPE_FLOAT16,
        .input = args->inputs[DML_ROI_ALIGN_INPUT],
        .output = args->outputs[DML_ROI_ALIGN_OUTPUT],
    };
    roi_copy_strides(f.in_strides, input);
    roi_copy_strides(f.out_strides, output);
    int64_t rows = (int64_t)output->sizes[0] * f.dims.channels * f.dims.out_height;
    /* Regions differ in sample count: dynamic chunks balance them; every
     * element is computed by one thread alone. */
    int threads = dml_cpu_threads_for(dml_cpu_threads(args), (uint64_t)rows,
                                      dml_cpu_items_per_thread(f.dims.out_width, DML_CPU_MIN_WORK_PER_THREAD / 32));
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
    for (int64_t row = 0; row < rows; row++) {
        if (f.half)
            forward_row_f16(&f, (uint64_t)row);
        else
            forward_row_f32(&f, (uint64_t)row);
    }
    return S_OK;
}

/* ---- Gradient (§7) ---- */

typedef struct grad_problem {
    roi_align_dims dims;
    bool half;
    const void* input; /* NULL when InputTensor is absent */
    uint64_t in_strides[4];
    const void* input_gradient;
    uint64_t dy_strides[4];
    void* output_gradient; /* NULL when absent */
    uint64_t dx_strides[4];
    void* roi_gradient; /* NULL when absent */
    uint64_t roi_gradient_row_stride, roi_gradient_column_stride;
} grad_problem;

/* Receives one in-bounds sample that gets gradient: its indices, where it
 * reads along each axis, and g * w. */
typedef void (*sample_fn)(void* context, const roi_region* region, uint64_t tx, uint64_t ty,
                          const dml_roi_axis_sample* sx, const dml_roi_axis_sample* sy, float weighted_gradient);

/* MAX (§7.1, RA-8): the first sample, in §4.4 order, whose value is the
 * maximum; out-of-bounds samples compare as 0. */
static void select_max_sample(const grad_problem* g, const plane_view* input_plane, const roi_region* region,
                              uint32_t oy, uint32_t ox, uint64_t* best_tx, uint64_t* best_ty) {
    const dml_roi_align_params* p = g->dims.params;
    uint64_t per_x = region->x.per_output, per_y = region->y.per_output;
    float best = 0.0f;
    bool first = true;
    for (uint64_t tx = ox * per_x; tx < ox * per_x + per_x; tx++) {
        dml_roi_axis_sample sx = dml_roi_axis_sample_at(&region->x, tx, p);
        for (uint64_t ty = oy * per_y; ty < oy * per_y + per_y; ty++) {
            dml_roi_axis_sample sy = dml_roi_axis_sample_at(&region->y, ty, p);
            float value =
                sx.outside || sy.outside ? 0.0f : sample_value(input_plane, &sx, &sy, p->interpolation_linear);
            if (first || dml_nan_aware_greater(value, best)) {
                best = value;
                *best_tx = tx;
                *best_ty = ty;
            }
            first = false;
        }
    }
}

/* Calls visit for every in-bounds sample of output (oy, ox) with a non-zero
 * weight (§7.1), in §4.4 order. Out-of-bounds samples get no gradient (§7.2). */
static void for_each_weighted_sample(const grad_problem* g, const plane_view* input_plane, const roi_region* region,
                                     uint32_t oy, uint32_t ox, float gradient, sample_fn visit, void* context) {
    const dml_roi_align_params* p = g->dims.params;
    uint64_t per_x = region->x.per_output, per_y = region->y.per_output;
    if (p->reduction_max) {
        uint64_t tx = 0, ty = 0;
        select_max_sample(g, input_plane, region, oy, ox, &tx, &ty);
        dml_roi_axis_sample sx = dml_roi_axis_sample_at(&region->x, tx, p);
        dml_roi_axis_sample sy = dml_roi_axis_sample_at(&region->y, ty, p);
        if (!sx.outside && !sy.outside) visit(context, region, tx, ty, &sx, &sy, gradient); /* w = 1 */
        return;
    }
    float weighted_gradient = gradient * dml_roi_average_weight(&region->x, &region->y);
    for (uint64_t tx = ox * per_x; tx < ox * per_x + per_x; tx++) {
        dml_roi_axis_sample sx = dml_roi_axis_sample_at(&region->x, tx, p);
        if (sx.outside) continue;
        for (uint64_t ty = oy * per_y; ty < oy * per_y + per_y; ty++) {
            dml_roi_axis_sample sy = dml_roi_axis_sample_at(&region->y, ty, p);
            if (!sy.outside) visit(context, region, tx, ty, &sx, &sy, weighted_gradient);
        }
    }
}

/* ---- OutputGradientTensor (§7.2) ---- */

/* Rows [row_begin, row_end) of one plane, accumulated in FLOAT64 (RA-16). */
typedef struct gradient_band {
    double* acc;
    uint32_t row_begin, row_end, width, height;
    bool linear;
} gradient_band;

static void scatter_sample(void* context, const roi_region* region, uint64_t tx, uint64_t ty,
                           const dml_roi_axis_sample* sx, const dml_roi_axis_sample* sy, float weighted_gradient) {
    (void)region;
    (void)tx;
    (void)ty;
    gradient_band* band = context;
    if (!band->linear) { /* the pixel it read, weight 1 */
        if (sy->first >= band->row_begin && sy->first < band->row_end)
            band->acc[(uint64_t)(sy->first - band->row_begin) * band->width + sx->first] += weighted_gradient;
        return;
    }
    float weights[4];
    dml_roi_bilinear_weights(sx->fraction, sy->fraction, weights);
    /* Taps in the order top-left, top-right, bottom-left, bottom-right;
     * coinciding taps (clamped edges) simply add up. */
    if (sy->first >= band->row_begin && sy->first < band->row_end) {
        double* row = band->acc + (uint64_t)(sy->first - band->row_begin) * band->width;
        row[sx->first] += weighted_gradient * weights[0];
        row[sx->second] += weighted_gradient * weights[1];
    }
    if (sy->second >= band->row_begin && sy->second < band->row_end) {
        double* row = band->acc + (uint64_t)(sy->second - band->row_begin) * band->width;
        row[sx->first] += weighted_gradient * weights[2];
        row[sx->second] += weighted_gradient * weights[3];
    }
}

/* Whether any in-bounds sample of output row oy touches rows [begin, end). */
static bool output_row_touches(const grad_problem* g, const roi_region* region, uint32_t oy, uint32_t begin,
                               uint32_t end) {
    uint64_t per_y = region->y.per_output;
    for (uint64_t ty = oy * per_y; ty < oy * per_y + per_y; ty++) {
        dml_roi_axis_sample sy = dml_roi_axis_sample_at(&region->y, ty, g->dims.params);
        if (!sy.outside && sy.second >= begin && sy.first < end) return true;
    }
    return false;
}

/* One task: plane (n, c), rows [row_begin, row_end). */
static void gradient_band_task(const grad_problem* g, const roi_of_image* sorted, uint32_t sorted_count, uint32_t n,
                               uint32_t c, uint32_t row_begin, uint32_t row_end, bool banded, double* acc) {
    const dml_roi_align_params* p = g->dims.params;
    gradient_band band = {acc, row_begin, row_end, g->dims.width, g->dims.height, p->interpolation_linear};
    memset(acc, 0, (size_t)(row_end - row_begin) * g->dims.width * sizeof *acc);
    plane_view input_plane = {0};
    if (g->input) input_plane = plane_make(g->input, g->in_strides, n, c, g->dims.height, g->dims.width, g->half);
    for (uint32_t i = roi_first_of_image(sorted, sorted_count, n); i < sorted_count && sorted[i].batch == n; i++) {
        uint32_t r = sorted[i].roi;
        roi_region region = roi_region_make(&g->dims.source, r, p, g->dims.out_height, g->dims.out_width,
                                            g->dims.height, g->dims.width);
        uint64_t dy_plane = r * g->dy_strides[0] + c * g->dy_strides[1];
        for (uint32_t oy = 0; oy < g->dims.out_height; oy++) {
            if (banded && !output_row_touches(g, &region, oy, row_begin, row_end)) continue;
            for (uint32_t ox = 0; ox < g->dims.out_width; ox++) {
                float gradient =
                    roi_load(g->input_gradient, dy_plane + oy * g->dy_strides[2] + ox * g->dy_strides[3], g->half);
                for_each_weighted_sample(g, &input_plane, &region, oy, ox, gradient, scatter_sample, &band);
            }
        }
    }
    uint64_t dx_plane = (uint64_t)n * g->dx_strides[0] + (uint64_t)c * g->dx_strides[1];
    for (uint32_t y = row_begin; y < row_end; y++) {
        const double* row = acc + (uint64_t)(y - row_begin) * g->dims.width;
        for (uint32_t x = 0; x < g->dims.width; x++)
            roi_store(g->output_gradient, dx_plane + y * g->dx_strides[2] + x * g->dx_strides[3], g->half,
                      (float)row[x]);
    }
}

/* What the gradient decides at compile time: the banding of the feature
 * gradient's planes, its threads, and where its scratch lies in the
 * workspace (the temporary resource). */
typedef struct grad_plan {
    roi_banding banding;
    int threads;
    uint64_t sorted_offset, accumulator_offset, partial_offset; /* bytes into the workspace */
} grad_plan;

static void compute_output_gradient(const grad_problem* g, const grad_plan* plan, char* workspace) {
    /* The valid ROIs sorted by (image, roi): each plane visits its own in increasing r. */
    roi_of_image* sorted = (roi_of_image*)(workspace + plan->sorted_offset);
    uint32_t sorted_count = roi_sort_by_image(&g->dims.source, g->dims.roi_count, g->dims.batch, sorted);
    double* accumulators = (double*)(workspace + plan->accumulator_offset);
    uint64_t bands = plan->banding.bands;
#pragma omp parallel num_threads(plan->threads)
    {
        double* acc = accumulators + (size_t)dml_cpu_thread_index() * plan->banding.band_rows * g->dims.width;
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < plan->banding.tasks; task++) {
            uint64_t band = (uint64_t)task % bands, plane = (uint64_t)task / bands;
            uint32_t row_begin = (uint32_t)(band * g->dims.height / bands);
            uint32_t row_end = (uint32_t)((band + 1) * g->dims.height / bands);
            gradient_band_task(g, sorted, sorted_count, (uint32_t)(plane / g->dims.channels),
                               (uint32_t)(plane % g->dims.channels), row_begin, row_end, bands > 1, acc);
        }
    }
}

/* ---- OutputROIGradientTensor (§7.3) ---- */

typedef struct roi_gradient_sums {
    const grad_problem* problem;
    plane_view input_plane;
    double sums[4]; /* d/dx1, d/dy1, d/dx2, d/dy2 */
} roi_gradient_sums;

static void roi_gradient_sample(void* context, const roi_region* region, uint64_t tx, uint64_t ty,
                                const dml_roi_axis_sample* sx, const dml_roi_axis_sample* sy, float weighted_gradient) {
    roi_gradient_sums* s = context;
    const plane_view* P = &s->input_plane;
    dml_roi_gradient_taps taps_x = dml_roi_gradient_taps_at(sx->coord, P->width);
    dml_roi_gradient_taps taps_y = dml_roi_gradient_taps_at(sy->coord, P->height);
    float grad_x, grad_y;
    dml_roi_image_gradient(plane_at(P, taps_y.low, taps_x.low), plane_at(P, taps_y.low, taps_x.high),
                           plane_at(P, taps_y.high, taps_x.low), plane_at(P, taps_y.high, taps_x.high), taps_x.fraction,
                           taps_y.fraction, &grad_x, &grad_y);
    float terms[4];
    dml_roi_box_terms(&region->x, &region->y, tx, ty, s->problem->dims.params, weighted_gradient, grad_x, grad_y,
                      terms);
    /* Each term g * w * grad * dc in FLOAT32, summed in FLOAT64. */
    for (int k = 0; k < 4; k++)
        s->sums[k] += terms[k];
}

/* Sums of ROI r over channels [c_begin, c_end), all positions and samples:
 * each channel from zero, the channel sums added in increasing c (the shape
 * of roi_align_math.h that every backend follows). */
static void roi_gradient_task(const grad_problem* g, uint32_t r, uint32_t c_begin, uint32_t c_end, double out[4]) {
    const dml_roi_align_params* p = g->dims.params;
    roi_gradient_sums s = {.problem = g};
    roi_region region =
        roi_region_make(&g->dims.source, r, p, g->dims.out_height, g->dims.out_width, g->dims.height, g->dims.width);
    for (int k = 0; k < 4; k++)
        out[k] = 0.0;
    if (region.batch < g->dims.batch) { /* else no gradient (RA-12) */
        for (uint32_t c = c_begin; c < c_end; c++) {
            memset(s.sums, 0, sizeof s.sums);
            s.input_plane =
                plane_make(g->input, g->in_strides, region.batch, c, g->dims.height, g->dims.width, g->half);
            uint64_t dy_plane = r * g->dy_strides[0] + c * g->dy_strides[1];
            for (uint32_t oy = 0; oy < g->dims.out_height; oy++)
                for (uint32_t ox = 0; ox < g->dims.out_width; ox++) {
                    float gradient =
                        roi_load(g->input_gradient, dy_plane + oy * g->dy_strides[2] + ox * g->dy_strides[3], g->half);
                    for_each_weighted_sample(g, &s.input_plane, &region, oy, ox, gradient, roi_gradient_sample, &s);
                }
            for (int k = 0; k < 4; k++)
                out[k] += s.sums[k];
        }
    }
}

static void compute_roi_gradient(const grad_problem* g, const grad_plan* plan, char* workspace) {
    /* Channel groups fixed by C alone: the order never depends on the thread count. */
    uint32_t groups = dml_roi_gradient_groups(g->dims.channels);
    int64_t tasks = (int64_t)g->dims.roi_count * groups;
    double(*partial)[4] = (double(*)[4])(workspace + plan->partial_offset);
#pragma omp parallel for num_threads(dml_cpu_threads_for(plan->threads, (uint64_t)tasks, 1)) schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; task++) {
        uint32_t r = (uint32_t)(task / groups), group = (uint32_t)(task % groups);
        uint32_t c_begin = dml_roi_gradient_group_begin(group, groups, g->dims.channels);
        uint32_t c_end = dml_roi_gradient_group_begin(group + 1, groups, g->dims.channels);
        roi_gradient_task(g, r, c_begin, c_end, partial[task]);
    }
    for (uint32_t r = 0; r < g->dims.roi_count; r++) {
        double total[4] = {0, 0, 0, 0};
        for (uint32_t group = 0; group < groups; group++)
            for (int k = 0; k < 4; k++)
                total[k] += partial[(uint64_t)r * groups + group][k];
        for (uint32_t k = 0; k < 4; k++)
            roi_store(g->roi_gradient, r * g->roi_gradient_row_stride + k * g->roi_gradient_column_stride, g->half,
                      (float)total[k]);
    }
}

/* The problem of a dispatch (args) or, with args NULL, its shapes alone. */
static grad_problem grad_problem_make(const DMLOperator* op, const dml_kernel_args* args) {
    roi_align_grad_tensors t = roi_align_grad_tensors_of(op);
    grad_problem g = {
        .dims = roi_align_grad_dims(op, args),
        .half = t.input_gradient->type == DML_TENSOR_DATA_TYPE_FLOAT16,
        .roi_gradient_row_stride = t.roi_gradient_row_stride,
        .roi_gradient_column_stride = t.roi_gradient_column_stride,
    };
    if (t.input->present) roi_copy_strides(g.in_strides, t.input);
    roi_copy_strides(g.dy_strides, t.input_gradient);
    if (t.output_gradient->present) roi_copy_strides(g.dx_strides, t.output_gradient);
    if (args == NULL) return g;
    g.input = t.input->present ? args->inputs[DML_ROI_ALIGN_GRAD_INPUT] : NULL;
    g.input_gradient = args->inputs[DML_ROI_ALIGN_GRAD_INPUT_GRADIENT];
    g.output_gradient = t.output_gradient->present ? args->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_GRADIENT] : NULL;
    g.roi_gradient = t.roi_gradient->present ? args->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_ROI_GRADIENT] : NULL;
    return g;
}

static HRESULT plan_roi_align_grad(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                                   dml_plan* result) {
    (void)flags;
    grad_plan* plan = dml_plan_state(result, sizeof *plan);
    if (plan == NULL) return E_OUTOFMEMORY;
    grad_problem g = grad_problem_make(op, NULL);
    int threads = (int)device->threads;
    uint64_t workspace = 0;
    if (op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_GRADIENT].tensor.present) {
        /* Fewer planes than threads: split planes into bands of rows. Banding
         * never changes a result (each pixel's additions keep their order). */
        plan->banding = roi_banding_make((uint64_t)g.dims.batch * g.dims.channels, g.dims.height, threads);
        plan->threads = plan->banding.threads;
        plan->sorted_offset = workspace;
        workspace += roi_align64(((uint64_t)g.dims.roi_count + 1) * sizeof(roi_of_image));
        plan->accumulator_offset = workspace;
        workspace += roi_align64((uint64_t)plan->threads * plan->banding.band_rows * g.dims.width * sizeof(double));
    } else {
        plan->threads = threads;
    }
    if (op->outputs[DML_ROI_ALIGN_GRAD_OUTPUT_ROI_GRADIENT].tensor.present) {
        plan->partial_offset = workspace;
        workspace += (uint64_t)g.dims.roi_count * dml_roi_gradient_groups(g.dims.channels) * 4 * sizeof(double);
    }
    result->temporary_size = workspace;
    return S_OK;
}

static HRESULT run_roi_align_grad(const dml_kernel_args* args) {
    const grad_plan* plan = DML_PLAN_STATE(args, grad_plan);
    grad_problem g = grad_problem_make(args->op, args);
    if (g.output_gradient) compute_output_gradient(&g, plan, args->temporary);
    if (g.roi_gradient) compute_roi_gradient(&g, plan, args->temporary);
    return S_OK;
}

const dml_impl dml_cpu_roi_align_generic = {"roi_align/generic/strided", DML_ISA_GENERIC, NULL, run_roi_align};

const dml_impl dml_cpu_roi_align_grad_generic = {"roi_align_grad/generic/strided", DML_ISA_GENERIC, plan_roi_align_grad,
                                                 run_roi_align_grad};
