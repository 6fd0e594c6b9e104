/* Max pooling and its gradient with AVX2 + F16C, FLOAT32 and FLOAT16, for
 * rows that are contiguous along W ("nchw": packed NCHW / NCDHW and any
 * layout whose W stride is 1), 4-D and 5-D, W strides 1 and 2, any window,
 * padding and dilation. Everything else declines to the generic kernel.
 *
 * Eight output columns of one output row are one vector. Each tap of the
 * window, visited in the generic kernel's order (d, h, w increasing), loads
 * the eight input values it covers: one load for W stride 1; for W stride 2
 * two loads whose even lanes a shuffle gathers — in the lane order
 * {0, 1, 4, 5, 2, 3, 6, 7}, undone once at the store. A lane takes the tap
 * when it is its first valid tap or the value wins by the rules of
 * src/ops/max_pooling_rules.h (strict >, NaN never wins over a number), so
 * values, indices, ties and the all-padding sentinel are the generic ones
 * bit for bit. Blocks that reach past a row's ends (padding, the last
 * columns) load through a bounds-checked copy instead of reading outside.
 *
 * The gradient computes each output row's argmax positions the same way and
 * adds InputGradient in increasing output order into a FLOAT32 plane in the
 * temporary resource, exactly as the generic kernel, then writes the plane. */
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../core/half.h"
#include "../ops/max_pooling_rules.h"
#include "cpu.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* The geometry of one (n, c) plane's windows, shared by both directions. */
typedef struct nchw_geometry {
    dml_pool_view in;
    uint32_t out_depth, out_height, out_width;
    uint32_t stride_w, window_w, dilation_w, padding_w;
    uint32_t reach; /* input columns one block's loads span: (window - 1) * dilation + 8 or 15 */
    bool half;
    bool track_position; /* false: a FLOAT32 forward pass without indices needs only values */
} nchw_geometry;

/* The most input columns an edge block copies per input row; wider
 * windows decline to the generic kernel. */
enum { EDGE_SEGMENT = 64 };

/* What one vector of eight output columns found: per lane (block lane
 * order) the winning value, its plane-relative position (d * H + h) * W + w
 * and whether any tap was valid. */
typedef struct block_max {
    __m256 value;
    __m256i position;
    __m256i found;
} block_max;

/* Lane j of a W-stride-2 block holds output column ow0 + stride2_lane[j]. */
static const int32_t stride2_lane[8] = {0, 1, 4, 5, 2, 3, 6, 7};

/* The eight values of one tap from input columns at `from` (an element
 * pointer): stride 1, columns 0..7; stride 2, columns 0, 2, .. 14 from two
 * loads at 0 and 7 (so nothing past column 14 is read), in block lane order. */
static ALWAYS_INLINE __m256 load_tap(const void* from, int stride, bool half) {
    if (half) {
        const uint16_t* at = from;
        if (stride == 1) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)at));
        return _mm256_shuffle_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)at)),
                                 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(at + 7))), _MM_SHUFFLE(3, 1, 2, 0));
    }
    const float* at = from;
    if (stride == 1) return _mm256_loadu_ps(at);
    return _mm256_shuffle_ps(_mm256_loadu_ps(at), _mm256_loadu_ps(at + 7), _MM_SHUFFLE(3, 1, 2, 0));
}

/* The window maxima of the eight output columns of one block of output row
 * (od, oh): `base` is the first input column the block reads, `columns` the
 * first input column of each lane's window, `lane_ok` the lanes < OutW. An
 * edge block (reading before column 0 or past W) first copies each input
 * row's segment [base, base + reach) with the outside left zero, and takes
 * a tap only in lanes whose column is inside. */
static ALWAYS_INLINE block_max block_window_max(const nchw_geometry* g, const dml_pooling_params* p, const char* plane,
                                                const dml_pool_taps* rd, const dml_pool_taps* rh, int64_t base,
                                                __m256i columns, __m256i lane_ok, int stride, bool half, bool edge) {
    block_max m = {_mm256_setzero_ps(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    const size_t element = half ? 2 : 4;
    const int64_t width = g->in.sizes[4];
    const __m256i minus_one = _mm256_set1_epi32(-1), width_vector = _mm256_set1_epi32((int32_t)width);
    const __m256i dilation = _mm256_set1_epi32((int32_t)g->dilation_w);
    for (uint32_t kd = rd->begin; kd < rd->end; kd++) {
        int64_t d = rd->start + (int64_t)kd * p->dilations[0];
        for (uint32_t kh = rh->begin; kh < rh->end; kh++) {
            int64_t h = rh->start + (int64_t)kh * p->dilations[1];
            const char* row = plane + (d * (int64_t)g->in.strides[2] + h * (int64_t)g->in.strides[3]) * element;
            __m256i row_columns =
                _mm256_add_epi32(columns, _mm256_set1_epi32((int32_t)((d * g->in.sizes[3] + h) * width)));
            _Alignas(32) union {
                float f32[EDGE_SEGMENT];
                uint16_t f16[EDGE_SEGMENT];
            } segment;
            const char* from = row + base * (int64_t)element;
            if (edge) {
                for (uint32_t j = 0; j < g->reach; j++) {
                    int64_t column = base + j;
                    bool inside = column >= 0 && column < width;
                    if (half)
                        segment.f16[j] = inside ? ((const uint16_t*)row)[column] : 0;
                    else
                        segment.f32[j] = inside ? ((const float*)row)[column] : 0;
                }
                from = (const char*)&segment;
            }
            /* An interior block reduces each input row on its own (independent
             * chains), then merges the row into the block: the first maximum of a
             * sequence is that of its parts merged in order, a later part winning
             * only when strictly better. */
            block_max r = m;
            if (!edge) {
                r.value = load_tap(from, stride, half);
                r.position = row_columns;
            }
            __m256i column = _mm256_sub_epi32(columns, dilation), position = _mm256_sub_epi32(row_columns, dilation);
            for (uint32_t kw = edge ? 0 : 1; kw < g->window_w; kw++) {
                __m256i offset = _mm256_set1_epi32((int32_t)(kw * g->dilation_w));
                __m256 value = load_tap(from + kw * g->dilation_w * element, stride, half);
                /* Wins: !(value <= best) and value is a number: NaN never wins, a number beats a NaN best. */
                __m256 take =
                    _mm256_and_ps(_mm256_cmp_ps(value, r.value, _CMP_NLE_UQ), _mm256_cmp_ps(value, value, _CMP_ORD_Q));
                if (edge) { /* or it is the lane's first valid tap; never outside the input */
                    column = _mm256_add_epi32(columns, offset);
                    __m256i valid = _mm256_and_si256(_mm256_and_si256(lane_ok, _mm256_cmpgt_epi32(column, minus_one)),
                                                     _mm256_cmpgt_epi32(width_vector, column));
                    take = _mm256_or_ps(take, _mm256_castsi256_ps(_mm256_xor_si256(r.found, minus_one)));
                    take = _mm256_and_ps(take, _mm256_castsi256_ps(valid));
                    r.found = _mm256_or_si256(r.found, valid);
                }
                r.value = _mm256_blendv_ps(r.value, value, take);
                if (g->track_position) {
                    position = _mm256_add_epi32(row_columns, offset);
                    r.position = _mm256_castps_si256(
                        _mm256_blendv_ps(_mm256_castsi256_ps(r.position), _mm256_castsi256_ps(position), take));
                }
            }
            (void)column;
            if (edge) {
                m = r; /* the edge path updated the block in place */
            } else if (kd == rd->begin && kh == rh->begin) {
                m = (block_max){r.value, r.position, minus_one};
            } else {
                __m256 take = _mm256_and_ps(_mm256_cmp_ps(r.value, m.value, _CMP_NLE_UQ),
                                            _mm256_cmp_ps(r.value, r.value, _CMP_ORD_Q));
                m.value = _mm256_blendv_ps(m.value, r.value, take);
                if (g->track_position)
                    m.position = _mm256_castps_si256(
                        _mm256_blendv_ps(_mm256_castsi256_ps(m.position), _mm256_castsi256_ps(r.position), take));
            }
        }
    }
    return m;
}

/* block_window_max specialized for the loop-invariant choices. */
static block_max block_window_max_any(const nchw_geometry* g, const dml_pooling_params* p, const char* plane,
                                      const dml_pool_taps* rd, const dml_pool_taps* rh, int64_t base, __m256i columns,
                                      __m256i lane_ok, bool edge) {
    int variant = (g->stride_w == 2) * 4 + g->half * 2 + edge;
    switch (variant) {
    case 0: return block_window_max(g, p, plane, rd, rh, base, columns, lane_ok, 1, false, false);
    case 1: return block_window_max(g, p, plane, rd, rh, base, columns, lane_ok, 1, false, true);
    case 2: return block_window_max(g, p, plane, rd, rh, base, columns, lane_ok, 1, true, false);
    case 3: return block_window_max(g, p, plane, rd, rh, base, columns, lane_ok, 1, true, true);
    case 4: return block_window_max(g, p, plane, rd, rh, base, columns, lane_ok, 2, false, false);
    case 5: return block_window_max(g, p, plane, rd, rh, base, columns, lane_ok, 2, false, true);
    case 6: return block_window_max(g, p, plane, rd, rh, base, columns, lane_ok, 2, true, false);
    default: return block_window_max(g, p, plane, rd, rh, base, columns, lane_ok, 2, true, true);
    }
}

/* Puts a stride-2 block's lanes back in column order. */
static ALWAYS_INLINE __m256i natural_order(__m256i lanes, int stride) {
    return stride == 2 ? _mm256_permute4x64_epi64(lanes, _MM_SHUFFLE(3, 1, 2, 0)) : lanes;
}

/* One block of an output row: columns ow0 .. ow0 + 7 (those < OutW), of
 * which lanes from `first_lane` on are new (the last block of a row of at
 * least eight columns ends at OutW and overlaps the one before). */
typedef struct row_block {
    uint32_t ow0, first_lane, count;
} row_block;

/* The window maxima of one block of output row (od, oh), in column order. */
static block_max row_block_max(const nchw_geometry* g, const dml_pooling_params* p, const char* plane,
                               const dml_pool_taps* rd, const dml_pool_taps* rh, row_block b) {
    int64_t base = (int64_t)b.ow0 * g->stride_w - (int64_t)g->padding_w;
    bool edge = b.count < 8 || base < 0 || base + g->reach > (int64_t)g->in.sizes[4];
    __m256i lane =
        g->stride_w == 1 ? _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7) : _mm256_loadu_si256((const __m256i*)stride2_lane);
    __m256i columns =
        _mm256_add_epi32(g->stride_w == 1 ? lane : _mm256_add_epi32(lane, lane), _mm256_set1_epi32((int32_t)base));
    __m256i lane_ok = _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)b.count), lane);
    block_max m = block_window_max_any(g, p, plane, rd, rh, base, columns, lane_ok, edge);
    if (g->stride_w == 2) {
        m.value = _mm256_castsi256_ps(natural_order(_mm256_castps_si256(m.value), 2));
        m.position = natural_order(m.position, 2);
        m.found = natural_order(m.found, 2);
    }
    return m;
}

/* The blocks of an output row of `width` columns, in increasing order. */
static ALWAYS_INLINE row_block next_block(uint32_t width, uint32_t done) {
    if (done + 8 <= width || width < 8) return (row_block){done, 0, width - done < 8 ? width - done : 8};
    return (row_block){width - 8, 8 - (width - done), 8};
}

/* Whether the problem is one this file handles: FLOAT32 or FLOAT16, the
 * given tensors contiguous along W, W stride 1 or 2, and every position and
 * column fitting int32 lanes. */
static bool nchw_geometry_init(nchw_geometry* g, const DMLOperator* op, const dml_pool_view* contiguous_w,
                               int contiguous_count) {
    const dml_tensor* input = &op->inputs[DML_POOL_INPUT].tensor;
    if (input->type != DML_TENSOR_DATA_TYPE_FLOAT32 && input->type != DML_TENSOR_DATA_TYPE_FLOAT16) return false;
    for (int i = 0; i < contiguous_count; i++)
        if (contiguous_w[i].strides[4] != 1) return false;
    const dml_pooling_params* p = op->params;
    g->in = dml_pool_view_5d(input);
    g->half = input->type == DML_TENSOR_DATA_TYPE_FLOAT16;
    g->stride_w = p->strides[2];
    g->window_w = p->window[2];
    g->dilation_w = p->dilations[2];
    g->padding_w = p->start_padding[2];
    if (g->in.strides[4] != 1 || (g->stride_w != 1 && g->stride_w != 2)) return false;
    uint64_t reach = (uint64_t)(g->window_w - 1) * g->dilation_w + (g->stride_w == 1 ? 8 : 15);
    if (reach > EDGE_SEGMENT) return false;
    g->reach = (uint32_t)reach;
    const uint64_t limit = (uint64_t)1 << 28;
    uint64_t plane = (uint64_t)g->in.sizes[2] * g->in.sizes[3] * g->in.sizes[4];
    g->track_position = true;
    return plane < limit && g->padding_w < limit;
}

/* ---- Forward ---- */

typedef struct forward_plan {
    nchw_geometry g;
    dml_pool_view out, idx;
    bool has_indices, indices_64;
    int64_t rows; /* N * C * OD * OH */
    int threads;
} forward_plan;

static HRESULT plan_forward(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    forward_plan f;
    memset(&f, 0, sizeof f);
    f.out = dml_pool_view_5d(&op->outputs[DML_POOL_OUTPUT].tensor);
    const dml_tensor* indices =
        op->output_count > DML_POOL_OUTPUT_INDICES ? &op->outputs[DML_POOL_OUTPUT_INDICES].tensor : NULL;
    f.has_indices = indices && indices->present;
    if (f.has_indices) {
        f.idx = dml_pool_view_5d(indices);
        f.indices_64 = indices->type == DML_TENSOR_DATA_TYPE_UINT64;
    }
    dml_pool_view contiguous[2] = {f.out, f.idx};
    if (!nchw_geometry_init(&f.g, op, contiguous, f.has_indices ? 2 : 1)) return S_FALSE;
    /* FLOAT16 values are written from FLOAT32 lanes, but a NaN's own bits are re-read at its position. */
    f.g.track_position = f.has_indices || f.g.half;
    f.g.out_depth = f.out.sizes[2];
    f.g.out_height = f.out.sizes[3];
    f.g.out_width = f.out.sizes[4];
    f.rows = (int64_t)f.out.sizes[0] * f.out.sizes[1] * f.out.sizes[2] * f.out.sizes[3];
    const dml_pooling_params* p = op->params;
    uint64_t row_cost = (uint64_t)f.out.sizes[4] * p->window[0] * p->window[1] * p->window[2];
    f.threads = dml_cpu_threads_for((int)device->threads, (uint64_t)f.rows,
                                    dml_cpu_items_per_thread(row_cost, DML_CPU_MIN_WORK_PER_THREAD));
    forward_plan* state = dml_plan_state(plan, sizeof *state);
    if (state == NULL) return E_OUTOFMEMORY;
    *state = f;
    return S_OK;
}

typedef struct forward_row_args {
    const forward_plan* plan;
    const char* plane;
    void* output;         /* the output row's first element */
    uint32_t* indices32;  /* the indices row, or NULL */
    uint64_t* indices64;  /* the indices row, or NULL */
    uint64_t plane_index; /* logical index of the plane's first element: (n * C + c) * D * H * W */
} forward_row_args;

/* A FLOAT16 NaN's own bits (FLOAT32 lanes keep its payload but not whether
 * it was signaling): re-read from the input at the plane position. */
static uint16_t half_at_position(const nchw_geometry* g, const char* plane, uint32_t position) {
    uint32_t w = position % g->in.sizes[4], h = position / g->in.sizes[4] % g->in.sizes[3];
    uint32_t d = position / g->in.sizes[4] / g->in.sizes[3];
    return ((const uint16_t*)plane)[d * g->in.strides[2] + h * g->in.strides[3] + w];
}

/* Writes one block: the window maxima, or -inf and an all-ones index where
 * no tap was valid (decision MP-2). */
static void store_forward_block(const forward_row_args* a, row_block b, block_max m) {
    const nchw_geometry* g = &a->plan->g;
    __m256 value = _mm256_blendv_ps(_mm256_set1_ps(-__builtin_inff()), m.value, _mm256_castsi256_ps(m.found));
    if (g->half) {
        uint16_t lanes[8];
        _mm_storeu_si128((__m128i*)lanes, _mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT)); /* exact */
        int nan_lanes = _mm256_movemask_ps(_mm256_cmp_ps(value, value, _CMP_UNORD_Q));
        if (nan_lanes) {
            int32_t position[8];
            _mm256_storeu_si256((__m256i*)position, m.position);
            for (int lane = 0; lane < 8; lane++)
                if (nan_lanes >> lane & 1) lanes[lane] = half_at_position(g, a->plane, (uint32_t)position[lane]);
        }
        memcpy((uint16_t*)a->output + b.ow0, lanes, b.count * sizeof *lanes);
    } else if (b.count == 8) {
        _mm256_storeu_ps((float*)a->output + b.ow0, value);
    } else {
        __m256i mask =
            _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)b.count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps((float*)a->output + b.ow0, mask, value);
    }
    if (a->indices32) {
        __m256i index = _mm256_add_epi32(m.position, _mm256_set1_epi32((int32_t)(uint32_t)a->plane_index));
        index = _mm256_or_si256(index, _mm256_xor_si256(m.found, _mm256_set1_epi32(-1)));
        if (b.count == 8) {
            _mm256_storeu_si256((__m256i*)(a->indices32 + b.ow0), index);
        } else {
            __m256i mask =
                _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)b.count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            _mm256_maskstore_epi32((int*)(a->indices32 + b.ow0), mask, index);
        }
    } else if (a->indices64) {
        __m256i base = _mm256_set1_epi64x((long long)a->plane_index), all_ones = _mm256_set1_epi64x(-1);
        for (uint32_t quarter = 0; quarter < 2; quarter++) {
            __m128i position = quarter ? _mm256_extracti128_si256(m.position, 1) : _mm256_castsi256_si128(m.position);
            __m128i found = quarter ? _mm256_extracti128_si256(m.found, 1) : _mm256_castsi256_si128(m.found);
            __m256i index = _mm256_add_epi64(_mm256_cvtepu32_epi64(position), base);
            index = _mm256_blendv_epi8(all_ones, index, _mm256_cvtepi32_epi64(found));
            uint32_t first = quarter * 4;
            if (b.count <= first) break;
            __m256i mask = _mm256_cmpgt_epi64(_mm256_set1_epi64x(b.count - first), _mm256_setr_epi64x(0, 1, 2, 3));
            _mm256_maskstore_epi64((long long*)(a->indices64 + b.ow0 + first), mask, index);
        }
    }
}

static HRESULT run_forward(const dml_kernel_args* args) {
    const forward_plan* plan = DML_PLAN_STATE(args, forward_plan);
    const nchw_geometry* g = &plan->g;
    const dml_pooling_params* p = args->op->params;
    const char* input = args->inputs[DML_POOL_INPUT];
    char* output = args->outputs[DML_POOL_OUTPUT];
    char* indices = plan->has_indices ? args->outputs[DML_POOL_OUTPUT_INDICES] : NULL;
    size_t element = g->half ? 2 : 4, index_element = plan->indices_64 ? 8 : 4;
#pragma omp parallel for num_threads(plan->threads) schedule(static)
    for (int64_t row = 0; row < plan->rows; row++) {
        uint32_t oh = (uint32_t)((uint64_t)row % g->out_height);
        uint64_t rest = (uint64_t)row / g->out_height;
        uint32_t od = (uint32_t)(rest % g->out_depth);
        rest /= g->out_depth;
        uint32_t c = (uint32_t)(rest % plan->out.sizes[1]);
        uint32_t n = (uint32_t)(rest / plan->out.sizes[1]);
        const dml_pool_view* o = &plan->out;
        const dml_pool_view* x = &plan->idx;
        forward_row_args a = {
            .plan = plan,
            .plane = input + (n * g->in.strides[0] + c * g->in.strides[1]) * element,
            .output =
                output + (n * o->strides[0] + c * o->strides[1] + od * o->strides[2] + oh * o->strides[3]) * element,
            .plane_index = ((uint64_t)n * g->in.sizes[1] + c) * g->in.sizes[2] * g->in.sizes[3] * g->in.sizes[4],
        };
        if (indices) {
            char* at = indices + (n * x->strides[0] + c * x->strides[1] + od * x->strides[2] + oh * x->strides[3]) *
                                     index_element;
            if (plan->indices_64)
                a.indices64 = (uint64_t*)at;
            else
                a.indices32 = (uint32_t*)at;
        }
        dml_pool_taps rd = dml_pool_window_taps(p, 0, od, g->in.sizes[2]);
        dml_pool_taps rh = dml_pool_window_taps(p, 1, oh, g->in.sizes[3]);
        for (uint32_t done = 0; done < g->out_width; done += 8) {
            row_block b = next_block(g->out_width, done);
            store_forward_block(&a, b, row_block_max(g, p, a.plane, &rd, &rh, b)); /* overlap: same values again */
            done = b.ow0;
        }
    }
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_avx2_nchw = {"max_pooling/avx2/nchw", DML_ISA_AVX2, plan_forward, run_forward};

/* ---- Gradient ---- */

typedef struct grad_plan {
    nchw_geometry g;
    dml_pool_view grad_in, grad_out;
    int64_t planes;
    uint64_t plane_size; /* D * H * W: floats of one accumulator plane */
    int threads;
} grad_plan;

static HRESULT plan_grad(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    grad_plan gp;
    memset(&gp, 0, sizeof gp);
    if (!nchw_geometry_init(&gp.g, op, NULL, 0)) return S_FALSE;
    gp.grad_in = dml_pool_view_5d(&op->inputs[DML_POOL_INPUT_GRADIENT].tensor);
    gp.grad_out = dml_pool_view_5d(&op->outputs[DML_POOL_OUTPUT].tensor);
    gp.g.out_depth = gp.grad_in.sizes[2];
    gp.g.out_height = gp.grad_in.sizes[3];
    gp.g.out_width = gp.grad_in.sizes[4];
    gp.planes = (int64_t)gp.g.in.sizes[0] * gp.g.in.sizes[1];
    gp.plane_size = (uint64_t)gp.g.in.sizes[2] * gp.g.in.sizes[3] * gp.g.in.sizes[4];
    const dml_pooling_params* p = op->params;
    uint64_t plane_cost = gp.plane_size + (uint64_t)gp.g.out_depth * gp.g.out_height * gp.g.out_width * p->window[0] *
                                              p->window[1] * p->window[2];
    gp.threads = dml_cpu_threads_for((int)device->threads, (uint64_t)gp.planes,
                                     dml_cpu_items_per_thread(plane_cost, DML_CPU_MIN_WORK_PER_THREAD));
    grad_plan* state = dml_plan_state(plan, sizeof *state);
    if (state == NULL) return E_OUTOFMEMORY;
    *state = gp;
    plan->temporary_size = (uint64_t)gp.threads * gp.plane_size * sizeof(float);
    return S_OK;
}

/* Adds one block's InputGradient to its argmax positions, column by column
 * (increasing output order, as the generic kernel); lanes before
 * b.first_lane were added by the block before. */
static void add_grad_block(float* acc, const char* dy_row, uint64_t dy_stride, bool half, row_block b, block_max m) {
    int32_t position[8], found[8];
    _mm256_storeu_si256((__m256i*)position, m.position);
    _mm256_storeu_si256((__m256i*)found, m.found);
    for (uint32_t lane = b.first_lane; lane < b.count; lane++) {
        if (!found[lane]) continue; /* an all-padding window: no gradient */
        uint64_t at = (b.ow0 + lane) * dy_stride;
        float dy = half ? _cvtsh_ss(((const uint16_t*)dy_row)[at]) : ((const float*)dy_row)[at];
        acc[position[lane]] += dy;
    }
}

/* Writes the accumulator plane into OutputGradient's plane. */
static void write_grad_plane(const grad_plan* gp, const float* acc, char* dx) {
    const dml_pool_view* o = &gp->grad_out;
    uint32_t width = gp->g.in.sizes[4];
    for (uint32_t d = 0; d < gp->g.in.sizes[2]; d++)
        for (uint32_t h = 0; h < gp->g.in.sizes[3]; h++, acc += width) {
            uint64_t row = d * o->strides[2] + h * o->strides[3];
            if (!gp->g.half) {
                float* out = (float*)dx + row;
                if (o->strides[4] == 1)
                    memcpy(out, acc, width * sizeof *acc);
                else
                    for (uint32_t w = 0; w < width; w++)
                        out[w * o->strides[4]] = acc[w];
                continue;
            }
            uint16_t* out = (uint16_t*)dx + row;
            uint32_t w = 0;
            if (o->strides[4] == 1)
                for (; w + 8 <= width; w += 8)
                    _mm_storeu_si128((__m128i*)(out + w),
                                     _mm256_cvtps_ph(_mm256_loadu_ps(acc + w), _MM_FROUND_TO_NEAREST_INT));
            for (; w < width; w++)
                out[w * o->strides[4]] = dml_float_to_half(acc[w]);
        }
}

static HRESULT run_grad(const dml_kernel_args* args) {
    const grad_plan* gp = DML_PLAN_STATE(args, grad_plan);
    const nchw_geometry* g = &gp->g;
    const dml_pooling_params* p = args->op->params;
    const char* input = args->inputs[DML_POOL_INPUT];
    const char* input_gradient = args->inputs[DML_POOL_INPUT_GRADIENT];
    char* output_gradient = args->outputs[DML_POOL_OUTPUT];
    size_t element = g->half ? 2 : 4;
    float* scratch = args->temporary;
#pragma omp parallel num_threads(gp->threads)
    {
        int thread = 0;
#ifdef _OPENMP
        thread = omp_get_thread_num();
#endif
        float* acc = scratch + (size_t)thread * gp->plane_size;
#pragma omp for schedule(static)
        for (int64_t plane_index = 0; plane_index < gp->planes; plane_index++) {
            uint32_t c = (uint32_t)((uint64_t)plane_index % g->in.sizes[1]);
            uint32_t n = (uint32_t)((uint64_t)plane_index / g->in.sizes[1]);
            const char* plane = input + (n * g->in.strides[0] + c * g->in.strides[1]) * element;
            const dml_pool_view* dy = &gp->grad_in;
            memset(acc, 0, gp->plane_size * sizeof *acc);
            for (uint32_t od = 0; od < g->out_depth; od++)
                for (uint32_t oh = 0; oh < g->out_height; oh++) {
                    const char* dy_row =
                        input_gradient +
                        (n * dy->strides[0] + c * dy->strides[1] + od * dy->strides[2] + oh * dy->strides[3]) * element;
                    dml_pool_taps rd = dml_pool_window_taps(p, 0, od, g->in.sizes[2]);
                    dml_pool_taps rh = dml_pool_window_taps(p, 1, oh, g->in.sizes[3]);
                    for (uint32_t done = 0; done < g->out_width; done += 8) {
                        row_block b = next_block(g->out_width, done);
                        add_grad_block(acc, dy_row, dy->strides[4], g->half, b,
                                       row_block_max(g, p, plane, &rd, &rh, b));
                        done = b.ow0;
                    }
                }
            const dml_pool_view* o = &gp->grad_out;
            write_grad_plane(gp, acc, output_gradient + (n * o->strides[0] + c * o->strides[1]) * element);
        }
    }
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_grad_avx2_nchw = {"max_pooling_grad/avx2/nchw", DML_ISA_AVX2, plan_grad, run_grad};
