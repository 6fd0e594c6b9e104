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
 * At W stride 2 with windows of two or three columns (3x3/2, 2x2/2), whole
 * output rows go through a leaner path: each input row is reduced once per
 * block, rows shared by consecutive output rows are reduced once, and the
 * left padding column joins the first block (interior_row_maxima).
 *
 * The gradient computes each output row's argmax positions the same way and
 * adds InputGradient in increasing output order into a FLOAT32 plane in the
 * temporary resource, exactly as the generic kernel, then writes the plane.
 * Where windows are disjoint (2x2/2), every element of OutputGradient is
 * written once straight from its window's argmax instead (write_once_plane;
 * channels-last: nhwc_write_once), with no accumulator. Overlapping windows
 * of 2-D planes on the whole-row path (3x3/2) accumulate with vector adds
 * in a band of input rows, each row written once complete (band_plane).
 * Outputs far larger than the caches are streamed (DML_CPU_STREAM_BYTES; NCHW
 * only: streaming measured twice as slow for channels-last, see
 * max_pooling_nhwc_avx512.c). */
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#include "../core/half.h"
#include "max_pooling_cpu.h"
#include "max_pooling_nhwc.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* The geometry of one (n, c) plane's windows, shared by both directions. */
typedef struct nchw_geometry {
    dml_pool_view in;
    uint32_t out_depth, out_height, out_width;
    uint32_t stride_w, window_w, dilation_w, padding_w;
    uint32_t reach;                        /* input columns one block's loads span: (window - 1) * dilation + 8 or 15 */
    uint32_t interior_begin, interior_end; /* the output columns whose blocks read inside the row */
    bool half;
    bool track_position;  /* false: a FLOAT32 forward pass without indices needs only values */
    uint32_t row_blocks;  /* > 0: whole rows go through interior_row_maxima, with this many interior blocks */
    bool left_edge_block; /* the first of them starts at output column 0 (reduce_row's left edge) */
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

/* The lanes where `value` wins over `best` by the rules of
 * src/ops/max_pooling_rules.h: !(value <= best) and value is a number, so a
 * NaN never wins and a number beats a NaN best. */
static ALWAYS_INLINE __m256 lanes_win(__m256 value, __m256 best) {
    return _mm256_and_ps(_mm256_cmp_ps(value, best, _CMP_NLE_UQ), _mm256_cmp_ps(value, value, _CMP_ORD_Q));
}

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

/* The first two taps of a W-stride-2 block at `from` (columns 0, 2, .. 14
 * and 1, 3, .. 15, block lane order) from two loads of columns 0 .. 15:
 * one conversion per input column for FLOAT16. */
static ALWAYS_INLINE void load_tap_pair(const void* from, bool half, __m256* first, __m256* second) {
    __m256 low, high;
    if (half) {
        low = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)from));
        high = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)((const uint16_t*)from + 8)));
    } else {
        low = _mm256_loadu_ps((const float*)from);
        high = _mm256_loadu_ps((const float*)from + 8);
    }
    *first = _mm256_shuffle_ps(low, high, _MM_SHUFFLE(2, 0, 2, 0));
    *second = _mm256_shuffle_ps(low, high, _MM_SHUFFLE(3, 1, 3, 1));
}

/* Eight channels (the first `count` of them real) as FLOAT32 lanes. */
static ALWAYS_INLINE __m256 load_channels(const char* at, bool half, uint32_t count) {
    if (count == 8)
        return half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)at)) : _mm256_loadu_ps((const float*)at);
    uint16_t lanes16[8] = {0};
    float lanes32[8] = {0};
    if (half) {
        memcpy(lanes16, at, count * sizeof *lanes16);
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)lanes16));
    }
    memcpy(lanes32, at, count * sizeof *lanes32);
    return _mm256_loadu_ps(lanes32);
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
                __m256 take = lanes_win(value, r.value);
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
                __m256 take = lanes_win(r.value, m.value);
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

/* One block of an output row: columns ow0 .. ow0 + count - 1, of which
 * lanes from `first_lane` on are new (the last interior block ends at the
 * interior's end and overlaps the one before); `single`: one column whose
 * window reaches past a row's end, computed on its own. */
typedef struct row_block {
    uint32_t ow0, first_lane, count;
    bool single;
} row_block;

/* The blocks of an output row in increasing column order, from column
 * `done` on: single columns outside [interior_begin, interior_end), whose
 * windows read outside the row; eight-column blocks inside. A row whose
 * interior is narrower than eight columns is all edge blocks. */
static row_block next_block(const nchw_geometry* g, uint32_t done) {
    uint32_t width = g->out_width;
    if (g->interior_end < g->interior_begin + 8)
        return (row_block){done, 0, width - done < 8 ? width - done : 8, false};
    if (done < g->interior_begin || done >= g->interior_end) return (row_block){done, 0, 1, true};
    if (done + 8 <= g->interior_end) return (row_block){done, 0, 8, false};
    return (row_block){g->interior_end - 8, 8 - (g->interior_end - done), 8, false};
}

/* The window maximum of one output column on its own, in lane 0 (the
 * rules of src/ops/max_pooling_rules.h, taps in increasing order). */
static block_max single_column_max(const nchw_geometry* g, const dml_pooling_params* p, const char* plane,
                                   const dml_pool_taps* rd, const dml_pool_taps* rh, uint32_t ow) {
    dml_pool_taps rw = dml_pool_window_taps(p, 2, ow, g->in.sizes[4]);
    bool found = false;
    float best = 0;
    int32_t best_position = 0;
    for (uint32_t kd = rd->begin; kd < rd->end; kd++) {
        int64_t d = rd->start + (int64_t)kd * p->dilations[0];
        for (uint32_t kh = rh->begin; kh < rh->end; kh++) {
            int64_t h = rh->start + (int64_t)kh * p->dilations[1];
            int64_t row = d * (int64_t)g->in.strides[2] + h * (int64_t)g->in.strides[3];
            for (uint32_t kw = rw.begin; kw < rw.end; kw++) {
                int64_t w = rw.start + (int64_t)kw * g->dilation_w;
                float value = g->half ? _cvtsh_ss(((const uint16_t*)plane)[row + w]) : ((const float*)plane)[row + w];
                if (!found || dml_nan_aware_greater(value, best)) {
                    found = true;
                    best = value;
                    best_position = (int32_t)((d * g->in.sizes[3] + h) * g->in.sizes[4] + w);
                }
            }
        }
    }
    return (block_max){_mm256_setr_ps(best, 0, 0, 0, 0, 0, 0, 0), _mm256_setr_epi32(best_position, 0, 0, 0, 0, 0, 0, 0),
                       _mm256_setr_epi32(found ? -1 : 0, 0, 0, 0, 0, 0, 0, 0)};
}

/* The window maxima of one block of output row (od, oh), in column order. */
static block_max row_block_max(const nchw_geometry* g, const dml_pooling_params* p, const char* plane,
                               const dml_pool_taps* rd, const dml_pool_taps* rh, row_block b) {
    if (b.single) return single_column_max(g, p, plane, rd, rh, b.ow0);
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

/* The interior of the output rows (next_block): from the first column
 * whose window starts inside the row to the end of the last block whose
 * loads end inside it. */
static void nchw_geometry_set_output(nchw_geometry* g, const dml_pool_view* out) {
    g->out_depth = out->sizes[2];
    g->out_height = out->sizes[3];
    g->out_width = out->sizes[4];
    uint64_t begin = ((uint64_t)g->padding_w + g->stride_w - 1) / g->stride_w;
    uint64_t readable = (uint64_t)g->in.sizes[4] + g->padding_w;
    uint64_t end = readable >= g->reach ? (readable - g->reach) / g->stride_w + 8 : 0;
    g->interior_begin = (uint32_t)(begin < g->out_width ? begin : g->out_width);
    g->interior_end = (uint32_t)(end < g->out_width ? end : g->out_width);
    if (g->interior_end < g->interior_begin) g->interior_end = g->interior_begin;
}

/* ---- Whole output rows at W stride 2 (3x3/2, 2x2/2, ...) ----
 *
 * Every window of an output row reads the same input rows. Each input row is
 * reduced over the window's horizontal taps for all eight columns of a block
 * at once, and the rows are merged in window order: the generic kernel's
 * order, so the first maximum is the same one. When the last input row of
 * one output row's windows is the first of the next one's (3x3 windows at H
 * stride 2), its reductions are kept per block instead of recomputed. Only
 * the interior blocks take this path; the columns whose windows reach past
 * a row's ends are single columns (next_block), padding never a tap. */

enum {
    ROW_BLOCKS = 64,      /* interior blocks of an output row this path keeps, 512 columns */
    ROW_EDGE_COLUMNS = 8, /* single columns at the ends of an output row */
    ROW_PIECES = ROW_BLOCKS + ROW_EDGE_COLUMNS,
};

/* One thread's kept reductions: those of input row `row` (NULL: none). */
typedef struct row_cache {
    const char* row;
    __m256 value[ROW_BLOCKS];
    __m256i position[ROW_BLOCKS];
} row_cache;

/* The first interior block's column and how many blocks the interior has:
 * block j starts at min(interior_begin + 8 j, interior_end - 8). */
static ALWAYS_INLINE uint32_t row_block_start(const nchw_geometry* g, uint32_t j) {
    uint32_t ow0 = g->interior_begin + 8 * j;
    return ow0 + 8 <= g->interior_end ? ow0 : g->interior_end - 8;
}

/* One input row reduced over the horizontal taps of a block whose lanes'
 * windows start at input columns `columns` (block lane order), `from`
 * pointing at the first of them; positions are `row_position` + column.
 * A left edge block (3 taps, padding 1, output column 0 in lane 0) never
 * reads column -1: its first tap is the third shifted by one column, and
 * lane 0 starts at its first valid tap, the second. */
static ALWAYS_INLINE void reduce_row(const char* from, __m256i columns, int32_t row_position, int window_w, bool half,
                                     bool track, bool left_edge, __m256* value, __m256i* position) {
    const size_t element = half ? 2 : 4;
    __m256i at = _mm256_add_epi32(columns, _mm256_set1_epi32(row_position)), best_at = at;
    __m256 best, second;
    if (left_edge) {
        /* Block lane l holds column stride2_lane[l]; the lane holding the column before it: */
        const __m256i previous_column = _mm256_setr_epi32(0, 0, 5, 2, 1, 4, 3, 6);
        const __m256 lane0 = _mm256_castsi256_ps(_mm256_setr_epi32(-1, 0, 0, 0, 0, 0, 0, 0));
        second = load_tap(from + element, 2, half);
        best = _mm256_blendv_ps(_mm256_permutevar8x32_ps(load_tap(from + 2 * element, 2, half), previous_column),
                                second, lane0);
        best_at = _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(at), _mm256_castsi256_ps(_mm256_add_epi32(at, _mm256_set1_epi32(1))), lane0));
    } else {
        load_tap_pair(from, half, &best, &second);
    }
    for (int kw = 1; kw < window_w; kw++) {
        __m256 candidate = kw == 1 ? second : load_tap(from + kw * element, 2, half);
        __m256 take = lanes_win(candidate, best);
        best = _mm256_blendv_ps(best, candidate, take);
        if (track) {
            at = _mm256_add_epi32(at, _mm256_set1_epi32(1));
            best_at =
                _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(best_at), _mm256_castsi256_ps(at), take));
        }
    }
    *value = best;
    *position = best_at;
}

/* The window maxima of every interior block of one output row (column
 * order, as row_block_max), from window rows w (count >= 1). */
static ALWAYS_INLINE void interior_row_maxima(const nchw_geometry* g, const window_rows* w, row_cache* cache,
                                              block_max* blocks, int window_w, bool half, bool track) {
    const size_t element = half ? 2 : 4;
    const __m256i lane_columns = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i*)stride2_lane), 1);
    bool kept = cache->row != NULL && cache->row == w->row[0];
    for (uint32_t j = 0; j < g->row_blocks; j++) {
        bool left_edge = j == 0 && g->left_edge_block;
        int64_t base = (int64_t)row_block_start(g, j) * 2 - (int64_t)g->padding_w;
        __m256i columns = _mm256_add_epi32(lane_columns, _mm256_set1_epi32((int32_t)base));
        __m256 best, value;
        __m256i best_at, at;
        if (kept) {
            best = cache->value[j];
            best_at = cache->position[j];
        } else {
            reduce_row(w->row[0] + base * (int64_t)element, columns, w->position[0], window_w, half, track, left_edge,
                       &best, &best_at);
        }
        value = best;
        at = best_at;
        for (uint32_t r = 1; r < w->count; r++) {
            reduce_row(w->row[r] + base * (int64_t)element, columns, w->position[r], window_w, half, track, left_edge,
                       &value, &at);
            __m256 take = lanes_win(value, best);
            best = _mm256_blendv_ps(best, value, take);
            if (track)
                best_at =
                    _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(best_at), _mm256_castsi256_ps(at), take));
        }
        cache->value[j] = value; /* the last row's reductions */
        cache->position[j] = at;
        blocks[j] = (block_max){_mm256_castsi256_ps(natural_order(_mm256_castps_si256(best), 2)),
                                natural_order(best_at, 2), _mm256_set1_epi32(-1)};
    }
    cache->row = w->row[w->count - 1];
}

/* interior_row_maxima specialized for the loop-invariant choices. */
static void interior_row_maxima_any(const nchw_geometry* g, const window_rows* w, row_cache* cache, block_max* blocks) {
    switch ((g->window_w == 3) * 4 + g->half * 2 + g->track_position) {
    case 0: interior_row_maxima(g, w, cache, blocks, 2, false, false); break;
    case 1: interior_row_maxima(g, w, cache, blocks, 2, false, true); break;
    case 2: interior_row_maxima(g, w, cache, blocks, 2, true, false); break;
    case 3: interior_row_maxima(g, w, cache, blocks, 2, true, true); break;
    case 4: interior_row_maxima(g, w, cache, blocks, 3, false, false); break;
    case 5: interior_row_maxima(g, w, cache, blocks, 3, false, true); break;
    case 6: interior_row_maxima(g, w, cache, blocks, 3, true, false); break;
    default: interior_row_maxima(g, w, cache, blocks, 3, true, true); break;
    }
}

/* Whether whole rows go through interior_row_maxima: W stride 2 windows of
 * two or three undilated columns, an interior of at least one block and at
 * most ROW_BLOCKS, and at most MAX_WINDOW_ROWS input rows per window. */
static void nchw_geometry_set_row_blocks(nchw_geometry* g, const dml_pooling_params* p) {
    g->row_blocks = 0;
    g->left_edge_block = false;
    if (g->stride_w == 2 && g->window_w == 3 && g->dilation_w == 1 && g->padding_w == 1 && g->interior_begin == 1 &&
        g->interior_end >= 8) {
        g->interior_begin = 0; /* column 0 joins the first block */
        g->left_edge_block = true;
    }
    uint32_t interior = g->interior_end - g->interior_begin;
    if (g->stride_w != 2 || g->dilation_w != 1 || (g->window_w != 2 && g->window_w != 3) || interior < 8) return;
    if ((uint64_t)p->window[0] * p->window[1] > MAX_WINDOW_ROWS || (interior + 7) / 8 > ROW_BLOCKS) return;
    if (g->interior_begin + (g->out_width - g->interior_end) > ROW_EDGE_COLUMNS) return;
    g->row_blocks = (interior + 7) / 8;
}

/* The window maxima of one whole output row (od, oh) into blocks[] (at
 * most ROW_PIECES): the left edge columns, the interior blocks, the right
 * edge columns, each with its row_block; returns how many. */
static uint32_t whole_row_maxima(const nchw_geometry* g, const dml_pooling_params* p, const char* plane,
                                 const dml_pool_taps* rd, const dml_pool_taps* rh, row_cache* cache, row_block* layout,
                                 block_max* blocks) {
    uint32_t count = 0;
    for (uint32_t ow = 0; ow < g->interior_begin; ow++, count++) {
        layout[count] = (row_block){ow, 0, 1, true};
        blocks[count] = single_column_max(g, p, plane, rd, rh, ow);
    }
    window_rows w;
    window_rows_at(&g->in, g->half ? 2 : 4, p, plane, rd, rh, &w);
    for (uint32_t j = 0; j < g->row_blocks; j++) {
        uint32_t ow0 = row_block_start(g, j);
        layout[count + j] = (row_block){ow0, g->interior_begin + 8 * j - ow0, 8, false};
    }
    if (w.count == 0) { /* every window of the row is padding */
        for (uint32_t j = 0; j < g->row_blocks; j++)
            blocks[count + j] = (block_max){_mm256_setzero_ps(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    } else {
        interior_row_maxima_any(g, &w, cache, blocks + count);
    }
    count += g->row_blocks;
    for (uint32_t ow = g->interior_end; ow < g->out_width; ow++, count++) {
        layout[count] = (row_block){ow, 0, 1, true};
        blocks[count] = single_column_max(g, p, plane, rd, rh, ow);
    }
    return count;
}

/* ---- Forward ---- */

typedef struct forward_plan {
    nchw_geometry g;
    nchw_outputs o;
    bool stream; /* outputs far larger than the caches, rows of whole blocks: streamed (store_block_streaming) */
    int threads;
    int chunk_rows; /* of the dynamic schedule: whole planes (nchw_forward_chunk_rows) */
} forward_plan;

static HRESULT plan_forward(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    forward_plan f;
    memset(&f, 0, sizeof f);
    f.o = nchw_outputs_of(op);
    dml_pool_view contiguous[2] = {f.o.out, f.o.idx};
    if (!nchw_geometry_init(&f.g, op, contiguous, f.o.has_indices ? 2 : 1)) return S_FALSE;
    /* FLOAT16 values are written from FLOAT32 lanes, but a NaN's own bits are re-read at its position. */
    f.g.track_position = f.o.has_indices || f.g.half;
    nchw_geometry_set_output(&f.g, &f.o.out);
    nchw_geometry_set_row_blocks(&f.g, op->params);
    f.threads = nchw_forward_threads(&f.o, op->params, device);
    f.chunk_rows = nchw_forward_chunk_rows(&f.o, f.threads);
    uint64_t out_bytes = (uint64_t)f.o.rows * f.o.out.sizes[4] * (f.g.half ? 2 : 4) * (f.o.has_indices ? 2 : 1);
    /* Rows of whole blocks only (partial lines of streamed rows, 28 columns, cost more than they save),
     * and no single columns: a line both streamed and stored through the cache is slow. */
    f.stream = out_bytes >= DML_CPU_STREAM_BYTES && f.o.out.sizes[4] % 8 == 0 && f.g.interior_begin == 0 &&
               f.g.interior_end == f.o.out.sizes[4];
    forward_plan* state = dml_plan_state(plan, sizeof *state);
    if (state == NULL) return E_OUTOFMEMORY;
    *state = f;
    return S_OK;
}

/* Stores a full block of 32-bit lanes at `at`, streamed where aligned. */
static ALWAYS_INLINE void store_block_streaming(void* at, __m256 lanes) {
    if (((uintptr_t)at & 31) == 0)
        _mm256_stream_ps((float*)at, lanes);
    else
        _mm256_storeu_ps((float*)at, lanes);
}

/* Writes one block: the window maxima, or -inf and an all-ones index where
 * no tap was valid (decision MP-2). */
static ALWAYS_INLINE void store_forward_block(const forward_plan* plan, const nchw_output_row* a, row_block b,
                                              block_max m) {
    const nchw_geometry* g = &plan->g;
    __m256 value = _mm256_blendv_ps(_mm256_set1_ps(-__builtin_inff()), m.value, _mm256_castsi256_ps(m.found));
    if (g->half) {
        uint16_t lanes[8];
        _mm_storeu_si128((__m128i*)lanes, _mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT)); /* exact */
        int nan_lanes = _mm256_movemask_ps(_mm256_cmp_ps(value, value, _CMP_UNORD_Q));
        if (nan_lanes) {
            int32_t position[8];
            _mm256_storeu_si256((__m256i*)position, m.position);
            for (int lane = 0; lane < 8; lane++)
                if (nan_lanes >> lane & 1) lanes[lane] = half_at_position(&g->in, a->plane, (uint32_t)position[lane]);
        }
        if (b.count == 8) /* a whole block: one store (memcpy of a variable size is a call) */
            _mm_storeu_si128((__m128i*)((uint16_t*)a->output + b.ow0), _mm_loadu_si128((const __m128i*)lanes));
        else
            memcpy((uint16_t*)a->output + b.ow0, lanes, b.count * sizeof *lanes);
    } else if (b.count == 8 && plan->stream) {
        store_block_streaming((float*)a->output + b.ow0, value);
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
        if (b.count == 8 && plan->stream) {
            store_block_streaming(a->indices32 + b.ow0, _mm256_castsi256_ps(index));
        } else if (b.count == 8) {
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
    char* indices = plan->o.has_indices ? args->outputs[DML_POOL_OUTPUT_INDICES] : NULL;
#pragma omp parallel num_threads(plan->threads)
    {
        row_cache cache; /* a chunk's rows are consecutive: row pairs share */
        cache.row = NULL;
        nchw_row_cursor cursor = {.row = -1};
        nchw_output_row a = {0}; /* set by the first nchw_output_row_next (cursor row -1) */
#pragma omp for schedule(dynamic, plan->chunk_rows)
        for (int64_t row = 0; row < plan->o.rows; row++) {
            nchw_output_row_next(&plan->o, &g->in, g->half ? 2 : 4, input, output, indices, &cursor, row, &a);
            dml_pool_taps rd = dml_pool_window_taps(p, 0, a.od, g->in.sizes[2]);
            dml_pool_taps rh = dml_pool_window_taps(p, 1, a.oh, g->in.sizes[3]);
            if (g->row_blocks) {
                row_block layout[ROW_PIECES];
                block_max blocks[ROW_PIECES];
                uint32_t pieces = whole_row_maxima(g, p, a.plane, &rd, &rh, &cache, layout, blocks);
                for (uint32_t i = 0; i < pieces; i++)
                    store_forward_block(plan, &a, layout[i], blocks[i]);
                continue;
            }
            for (uint32_t done = 0; done < g->out_width;) {
                row_block b = next_block(g, done);
                store_forward_block(plan, &a, b,
                                    row_block_max(g, p, a.plane, &rd, &rh, b)); /* overlap: same values again */
                done = b.ow0 + b.count;
            }
        }
        _mm_sfence(); /* the streamed stores are visible before the dispatch returns */
    }
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_avx2_nchw = {"max_pooling/avx2/nchw", DML_ISA_AVX2, plan_forward, run_forward};

/* ---- Gradient ---- */

/* Columns of a grad_row (band_plane, quad_plane): whole-row outputs, + a block of slack. */
enum { GRAD_ROW_COLUMNS = ROW_BLOCKS * 8 + ROW_EDGE_COLUMNS + 8 };

typedef struct grad_plan {
    nchw_geometry g;
    dml_pool_view grad_in, grad_out;
    bool write_once;   /* disjoint windows: write_once_plane, no accumulator */
    bool zero_columns; /* write_once: some input columns lie in no window */
    bool stream;       /* FLOAT32 OutputGradient far larger than the caches: streamed where aligned */
    int64_t planes;
    uint64_t plane_size; /* D * H * W: floats of one accumulator plane */
    uint32_t band_rows;  /* > 0: 2-D planes through band_plane, with this many accumulator rows */
    uint32_t band_width; /* floats of a band row: its even and odd columns (8 per block each) and 16 of slack */
    bool quads;          /* band_rows > 0, 3x3 windows, strides 2, start padding 1: quad_plane, no band */
    int threads;
} grad_plan;

static bool write_once_applies(const grad_plan* gp, const dml_pooling_params* p) {
    if (gp->g.row_blocks == 0 || gp->g.window_w != 2) return false;
    if (gp->grad_in.strides[4] != 1 || gp->grad_out.strides[4] != 1) return false;
    return disjoint_windows(p);
}

/* The band of each thread starts on a cache line of its own: threads
 * writing the same line would pass it back and forth (false sharing). */
enum { BAND_ALIGNMENT = 64 };

/* How many eight-column blocks band_add_row visits: one past the last
 * output column, so that its window's third column (the next window's
 * first) is added too. */
static uint32_t band_blocks(uint32_t out_width) { return (out_width + 1 + 7) / 8; }

/* Whether the band applies: a 2-D plane whose rows take the whole-row path,
 * InputGradient and OutputGradient contiguous along W, and a band no larger
 * than the plane (the temporary resource's bound). */
static void grad_plan_set_band(grad_plan* gp, const dml_pooling_params* p) {
    const nchw_geometry* g = &gp->g;
    gp->band_rows = 0;
    if (g->row_blocks == 0 || g->in.sizes[2] != 1 || g->out_depth != 1 || gp->grad_in.strides[4] != 1 ||
        gp->grad_out.strides[4] != 1)
        return;
    uint64_t rows = (uint64_t)(p->window[1] - 1) * p->dilations[1] + 1;
    if (rows > g->in.sizes[3]) rows = g->in.sizes[3];
    uint64_t width = 16 * (uint64_t)band_blocks(g->out_width) + 16; /* 64-byte lines: no false sharing */
    if (2 * rows * width > gp->plane_size) return; /* room for BAND_ALIGNMENT within the plane's bound */
    gp->band_rows = (uint32_t)rows;
    gp->band_width = (uint32_t)width;
}

static HRESULT plan_grad(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    grad_plan gp;
    memset(&gp, 0, sizeof gp);
    if (!nchw_geometry_init(&gp.g, op, NULL, 0)) return S_FALSE;
    gp.grad_in = dml_pool_view_5d(&op->inputs[DML_POOL_INPUT_GRADIENT].tensor);
    gp.grad_out = dml_pool_view_5d(&op->outputs[DML_POOL_OUTPUT].tensor);
    nchw_geometry_set_output(&gp.g, &gp.grad_in);
    nchw_geometry_set_row_blocks(&gp.g, op->params);
    gp.planes = (int64_t)gp.g.in.sizes[0] * gp.g.in.sizes[1];
    gp.plane_size = (uint64_t)gp.g.in.sizes[2] * gp.g.in.sizes[3] * gp.g.in.sizes[4];
    const dml_pooling_params* p = op->params;
    uint64_t plane_cost = gp.plane_size + (uint64_t)gp.g.out_depth * gp.g.out_height * gp.g.out_width * p->window[0] *
                                              p->window[1] * p->window[2];
    gp.threads = dml_cpu_threads_for((int)device->threads, (uint64_t)gp.planes,
                                     dml_cpu_items_per_thread(plane_cost, DML_CPU_MIN_WORK_PER_THREAD));
    grad_plan* state = dml_plan_state(plan, sizeof *state);
    if (state == NULL) return E_OUTOFMEMORY;
    gp.write_once = write_once_applies(&gp, p);
    if (gp.write_once) gp.zero_columns = some_coordinate_in_no_window(p, 2, gp.g.in.sizes[4], gp.g.out_width);
    if (!gp.write_once) grad_plan_set_band(&gp, p);
    gp.quads = gp.band_rows > 0 && p->window[1] == 3 && p->window[2] == 3 && p->strides[1] == 2 && p->strides[2] == 2 &&
               p->start_padding[1] == 1 && p->start_padding[2] == 1 && p->dilations[1] == 1 && p->dilations[2] == 1 &&
               8 * ((gp.g.in.sizes[4] + 15) / 16) + 8 <= GRAD_ROW_COLUMNS; /* quad_add's reach */
    /* Lines are never both streamed and stored through the cache (slow): no single columns, or
     * columns in no window (zeroed first), in the disjoint-window path; quad_plane's rows go through the cache. */
    gp.stream =
        !gp.g.half && !gp.quads && gp.planes * gp.plane_size * sizeof(float) >= DML_CPU_STREAM_BYTES &&
        (!gp.write_once || (!gp.zero_columns && gp.g.interior_begin == 0 && gp.g.interior_end == gp.g.out_width));
    *state = gp;
    uint64_t per_thread = gp.band_rows ? (uint64_t)gp.band_rows * gp.band_width : gp.plane_size;
    plan->temporary_size = gp.write_once || gp.quads ? 0 : (uint64_t)gp.threads * per_thread * sizeof(float);
    if (gp.band_rows && !gp.quads) plan->temporary_size += BAND_ALIGNMENT;
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

/* Stores eight FLOAT32 lanes (the first `count`) at `at` as the plane's type. */
static ALWAYS_INLINE void store_lanes(char* at, __m256 lanes, bool half, uint32_t count) {
    if (half) {
        __m128i halves = _mm256_cvtps_ph(lanes, _MM_FROUND_TO_NEAREST_INT);
        if (count == 8) {
            _mm_storeu_si128((__m128i*)at, halves);
        } else {
            uint16_t copy[8];
            _mm_storeu_si128((__m128i*)copy, halves);
            memcpy(at, copy, count * sizeof *copy);
        }
    } else if (count == 8) {
        _mm256_storeu_ps((float*)at, lanes);
    } else {
        __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps((float*)at, mask, lanes);
    }
}

/* Sixteen consecutive input columns from eight W-stride-2 windows' lanes:
 * lane l's `even` value at column 2 l, its `odd` value at 2 l + 1. */
static ALWAYS_INLINE void interleave_columns(__m256 even, __m256 odd, __m256* low, __m256* high) {
    __m256 a = _mm256_unpacklo_ps(even, odd), b = _mm256_unpackhi_ps(even, odd);
    *low = _mm256_permute2f128_ps(a, b, 0x20);
    *high = _mm256_permute2f128_ps(a, b, 0x31);
}

/* OutputGradient of one plane when windows are disjoint: for each output
 * row, each input row of its windows is written from the argmaxes, +0 + dy
 * at a window's argmax (the generic sum of one term) and +0 elsewhere;
 * input rows in no window are zero. Each element is written once (columns
 * in no window: twice, zeroed first, while the row is in the cache). */
static void write_once_plane(const grad_plan* gp, const dml_pooling_params* p, const char* plane, const char* dy_plane,
                             char* dx_plane, row_cache* cache) {
    const nchw_geometry* g = &gp->g;
    const dml_pool_view* dy = &gp->grad_in;
    const dml_pool_view* o = &gp->grad_out;
    const size_t element = g->half ? 2 : 4;
    const uint32_t width = g->in.sizes[4];
    for (uint32_t d = 0; d < g->in.sizes[2]; d++)
        for (uint32_t h = 0; h < g->in.sizes[3]; h++)
            if (!in_a_window(p, 0, d, g->out_depth) || !in_a_window(p, 1, h, g->out_height))
                memset(dx_plane + (d * o->strides[2] + h * o->strides[3]) * element, 0, width * element);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (uint32_t od = 0; od < g->out_depth; od++)
        for (uint32_t oh = 0; oh < g->out_height; oh++) {
            dml_pool_taps rd = dml_pool_window_taps(p, 0, od, g->in.sizes[2]);
            dml_pool_taps rh = dml_pool_window_taps(p, 1, oh, g->in.sizes[3]);
            window_rows w;
            window_rows_at(&g->in, g->half ? 2 : 4, p, plane, &rd, &rh, &w);
            if (w.count == 0) continue; /* windows of padding only: their rows are in no window */
            row_block layout[ROW_PIECES];
            block_max blocks[ROW_PIECES];
            uint32_t pieces = whole_row_maxima(g, p, plane, &rd, &rh, cache, layout, blocks);
            const char* dy_row = dy_plane + (od * dy->strides[2] + oh * dy->strides[3]) * element;
            for (uint32_t r = 0; r < w.count; r++) {
                char* dx_row = dx_plane + (w.d[r] * o->strides[2] + w.h[r] * o->strides[3]) * element;
                if (gp->zero_columns) memset(dx_row, 0, width * element);
                for (uint32_t i = 0; i < pieces; i++) {
                    row_block b = layout[i];
                    block_max m = blocks[i];
                    __m256 gradient =
                        _mm256_add_ps(_mm256_setzero_ps(), load_channels(dy_row + b.ow0 * element, g->half, b.count));
                    gradient = _mm256_and_ps(gradient, _mm256_castsi256_ps(m.found));
                    /* Lane l's window starts at column first + 2 l (position: + the row's position). */
                    int64_t first = (int64_t)b.ow0 * 2 - (int64_t)g->padding_w;
                    __m256i column = _mm256_add_epi32(_mm256_set1_epi32((int32_t)first), _mm256_add_epi32(lane, lane));
                    __m256i position = _mm256_add_epi32(column, _mm256_set1_epi32(w.position[r]));
                    __m256 even =
                        _mm256_and_ps(gradient, _mm256_castsi256_ps(_mm256_cmpeq_epi32(m.position, position)));
                    __m256 odd =
                        _mm256_and_ps(gradient, _mm256_castsi256_ps(_mm256_cmpeq_epi32(
                                                    m.position, _mm256_add_epi32(position, _mm256_set1_epi32(1)))));
                    if (!b.single) { /* an interior block: columns first .. first + 15, inside the row */
                        __m256 low, high;
                        interleave_columns(even, odd, &low, &high);
                        if (gp->stream) {
                            store_block_streaming((float*)dx_row + first, low);
                            store_block_streaming((float*)dx_row + first + 8, high);
                        } else {
                            store_lanes(dx_row + first * (int64_t)element, low, g->half, 8);
                            store_lanes(dx_row + (first + 8) * (int64_t)element, high, g->half, 8);
                        }
                        continue;
                    }
                    /* A single column (lane 0): its window's columns inside the row. */
                    float values[2] = {_mm256_cvtss_f32(even), _mm256_cvtss_f32(odd)};
                    for (int k = 0; k < 2; k++) {
                        int64_t at = first + k;
                        if (at < 0 || at >= (int64_t)width) continue;
                        if (g->half)
                            ((uint16_t*)dx_row)[at] = dml_float_to_half(values[k]);
                        else
                            ((float*)dx_row)[at] = values[k];
                    }
                }
            }
        }
}

/* ---- Overlapping windows of 2-D planes: a band of accumulator rows ----
 *
 * A 2-D plane (D = 1, one output depth) whose rows take the whole-row path
 * (3x3/2: windows share a column with each neighbour and a row with the next
 * output row) accumulates in a ring of band_rows input rows instead of a
 * whole plane. For each output row, each argmax's offset from its window's
 * first element and the InputGradient values go into column-ordered arrays
 * (grad_row); then for each input row of the windows, eight output columns
 * at a time compare the offsets with those of their window's columns in
 * that row and add the values that hit, +0 elsewhere (band_add_row). A band
 * row keeps a W-stride-2 window's first columns (the "even" ones, 2 ow -
 * padding) apart from its second columns ("odd"), so that lanes add to
 * lanes; band_write_row interleaves them. The order per element is the
 * generic kernel's (increasing output index): an even column shared by
 * outputs ow - 1 (its third column) and ow gets ow - 1's value first.
 * Adding +0 changes nothing: a sum starting from +0 is never -0, and a NaN
 * stays the same NaN. (Where two different NaNs meet in one sum, which one
 * x86 keeps follows the operand order the compiler chose, here as in the
 * generic kernel: gcc and clang differ.) Input rows no later output row reaches are written to
 * OutputGradient at once and their band row zeroed. */

/* One output row: per column its argmax's plane position minus that of its
 * window's first element (row 0 of the window, column 2 ow - padding), and
 * its InputGradient value (0 where no tap was valid); columns past the
 * row's end hold offset -1 and value 0, so they never hit. */
typedef struct grad_row {
    _Alignas(32) int32_t offset[GRAD_ROW_COLUMNS];
    _Alignas(32) float dy[GRAD_ROW_COLUMNS];
} grad_row;

/* Fills r's columns of output row rh (window rows w, at least one) from its
 * whole-row maxima and its InputGradient row at dy_row. */
static ALWAYS_INLINE void grad_row_fill(const nchw_geometry* g, const dml_pooling_params* p, const char* plane,
                                        const char* dy_row, const dml_pool_taps* rd, const dml_pool_taps* rh,
                                        const window_rows* w, row_cache* cache, grad_row* r, bool half) {
    const size_t element = half ? 2 : 4;
    row_block layout[ROW_PIECES];
    block_max blocks_max[ROW_PIECES];
    uint32_t pieces = whole_row_maxima(g, p, plane, rd, rh, cache, layout, blocks_max);
    /* Lane l's window starts at plane position first + 2 (ow0 + l). */
    const int32_t first = w->position[0] - (int32_t)g->padding_w;
    const __m256i lane_first = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    for (uint32_t i = 0; i < pieces; i++) {
        row_block b = layout[i];
        block_max m = blocks_max[i];
        __m256 value =
            _mm256_and_ps(load_channels(dy_row + b.ow0 * element, half, b.count), _mm256_castsi256_ps(m.found));
        __m256i offset =
            _mm256_sub_epi32(m.position, _mm256_add_epi32(lane_first, _mm256_set1_epi32(first + 2 * (int32_t)b.ow0)));
        if (b.count == 8) {
            _mm256_storeu_si256((__m256i*)(r->offset + b.ow0), offset);
            _mm256_storeu_ps(r->dy + b.ow0, value);
        } else { /* a single column */
            r->offset[b.ow0] = _mm256_cvtsi256_si32(offset);
            r->dy[b.ow0] = _mm256_cvtss_f32(value);
        }
    }
}

/* Adds one output row's values into band row `acc` for the input row whose
 * plane position is `row_offset` past that of the windows' first row. */
static ALWAYS_INLINE void band_add_row(float* acc, const grad_row* r, uint32_t blocks, int32_t row_offset,
                                       int window_w) {
    const __m256i rotate = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
    const __m256i first = _mm256_set1_epi32(row_offset), second = _mm256_set1_epi32(row_offset + 1);
    const __m256i third = _mm256_set1_epi32(row_offset + 2);
    float *even = acc, *odd = acc + 8 * blocks;
    __m256 previous_third = _mm256_setzero_ps(); /* rotated: the last lane's third-column value in lane 0 */
    for (uint32_t j = 0; j < 8 * blocks; j += 8) {
        __m256i offset = _mm256_load_si256((const __m256i*)(r->offset + j));
        __m256 dy = _mm256_load_ps(r->dy + j);
        __m256 at_first = _mm256_and_ps(dy, _mm256_castsi256_ps(_mm256_cmpeq_epi32(offset, first)));
        __m256 at_second = _mm256_and_ps(dy, _mm256_castsi256_ps(_mm256_cmpeq_epi32(offset, second)));
        _mm256_storeu_ps(odd + j, _mm256_add_ps(_mm256_loadu_ps(odd + j), at_second));
        if (window_w == 2) {
            _mm256_storeu_ps(even + j, _mm256_add_ps(_mm256_loadu_ps(even + j), at_first));
            continue;
        }
        /* The third column of lane l is the first of lane l + 1: lane l - 1's value comes first. */
        __m256 at_third = _mm256_and_ps(dy, _mm256_castsi256_ps(_mm256_cmpeq_epi32(offset, third)));
        __m256 rotated = _mm256_permutevar8x32_ps(at_third, rotate);
        __m256 from_previous = _mm256_blend_ps(rotated, previous_third, 0x01);
        previous_third = rotated;
        _mm256_storeu_ps(even + j, _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(even + j), from_previous), at_first));
    }
}

/* Writes band row `acc` as an OutputGradient row, interleaving its even and
 * odd columns, and zeroes it for the input row that takes its place. */
static ALWAYS_INLINE void band_write_row(const grad_plan* gp, float* acc, char* dx_row, bool half) {
    const uint32_t width = gp->g.in.sizes[4], padding = gp->g.padding_w;
    const size_t element = half ? 2 : 4;
    const float *even = acc, *odd = acc + 8 * band_blocks(gp->g.out_width);
    /* Input column c is band column c + padding: of the even ones when that is even. */
    const float* at_even_column = padding % 2 ? odd + (padding - 1) / 2 : even + padding / 2;
    const float* at_odd_column = padding % 2 ? even + (padding + 1) / 2 : odd + padding / 2;
    uint32_t w = 0;
    for (; w + 16 <= width; w += 16) {
        __m256 low, high;
        interleave_columns(_mm256_loadu_ps(at_even_column + w / 2), _mm256_loadu_ps(at_odd_column + w / 2), &low,
                           &high);
        if (half) {
            _mm_storeu_si128((__m128i*)((uint16_t*)dx_row + w), _mm256_cvtps_ph(low, _MM_FROUND_TO_NEAREST_INT));
            _mm_storeu_si128((__m128i*)((uint16_t*)dx_row + w + 8), _mm256_cvtps_ph(high, _MM_FROUND_TO_NEAREST_INT));
        } else if (gp->stream) {
            store_block_streaming((float*)dx_row + w, low);
            store_block_streaming((float*)dx_row + w + 8, high);
        } else {
            _mm256_storeu_ps((float*)dx_row + w, low);
            _mm256_storeu_ps((float*)dx_row + w + 8, high);
        }
    }
    if (w < width) { /* the last 1 to 15 columns */
        __m256 low, high;
        interleave_columns(_mm256_loadu_ps(at_even_column + w / 2), _mm256_loadu_ps(at_odd_column + w / 2), &low,
                           &high);
        for (uint32_t column = w; column < width; column += 8, low = high) {
            uint32_t count = width - column < 8 ? width - column : 8;
            if (!half && gp->stream && count == 8) /* lines are never both streamed and cached */
                store_block_streaming((float*)dx_row + column, low);
            else
                store_lanes(dx_row + column * element, low, half, count);
        }
    }
    memset(acc, 0, gp->band_width * sizeof *acc);
}

/* The gradient of one 2-D plane through the band (see above). */
static ALWAYS_INLINE void band_plane(const grad_plan* gp, const dml_pooling_params* p, const char* plane,
                                     const char* dy_plane, char* dx_plane, float* band, grad_row* r, row_cache* cache,
                                     int window_w, bool half) {
    const nchw_geometry* g = &gp->g;
    const dml_pool_view* dy = &gp->grad_in;
    const dml_pool_view* o = &gp->grad_out;
    const size_t element = half ? 2 : 4;
    const uint32_t height = g->in.sizes[3], blocks = band_blocks(g->out_width);
    const dml_pool_taps rd = dml_pool_window_taps(p, 0, 0, 1);
    uint32_t written = 0; /* input rows before it are in OutputGradient */
    for (uint32_t oh = 0; oh < g->out_height; oh++) {
        dml_pool_taps rh = dml_pool_window_taps(p, 1, oh, height);
        window_rows w;
        window_rows_at(&g->in, g->half ? 2 : 4, p, plane, &rd, &rh, &w);
        if (w.count > 0) {
            grad_row_fill(g, p, plane, dy_plane + oh * dy->strides[3] * element, &rd, &rh, &w, cache, r, half);
            for (uint32_t k = 0; k < w.count; k++)
                band_add_row(band + (size_t)(w.h[k] % gp->band_rows) * gp->band_width, r, blocks,
                             w.position[k] - w.position[0], window_w);
        }
        for (uint32_t complete = rows_complete_after(p, oh, g->out_height, height); written < complete; written++)
            band_write_row(gp, band + (size_t)(written % gp->band_rows) * gp->band_width,
                           dx_plane + written * o->strides[3] * element, half);
    }
}

/* ---- 3x3 windows, strides 2, start padding 1: no band ----
 *
 * As in max_pooling_avx512.c's quad_plane: input row 2 oh lies in output
 * row oh's windows alone (their middle row), row 2 oh - 1 in those of
 * oh - 1 (their last row), then of oh (their first); column 2 ow is window
 * ow's middle column, 2 ow + 1 the last of ow, then the first of ow + 1. So
 * each OutputGradient row is summed straight from one or two output rows'
 * grad_rows, its terms in the generic kernel's order from +0 (+0 where a tap
 * did not win): the band's sums without its adds, ring and zeroing. */

/* Adds the terms of one output row's windows (r) to input row `row_offset`
 * (its plane position minus that of the windows' first row) for columns
 * 16 j .. 16 j + 15: `even` (2 ow) and `odd` (2 ow + 1). */
static ALWAYS_INLINE void quad_add(const grad_row* r, int32_t row_offset, uint32_t j, __m256* even, __m256* odd) {
    const uint32_t ow0 = 8 * j;
    __m256i offset = _mm256_load_si256((const __m256i*)(r->offset + ow0));
    __m256 dy = _mm256_load_ps(r->dy + ow0);
    /* Window ow + 1's first column: the next lane's (the row's columns past its end never hit). */
    __m256i next_offset = _mm256_loadu_si256((const __m256i*)(r->offset + ow0 + 1));
    __m256 next_dy = _mm256_loadu_ps(r->dy + ow0 + 1);
    __m256 middle =
        _mm256_and_ps(dy, _mm256_castsi256_ps(_mm256_cmpeq_epi32(offset, _mm256_set1_epi32(row_offset + 1))));
    __m256 last = _mm256_and_ps(dy, _mm256_castsi256_ps(_mm256_cmpeq_epi32(offset, _mm256_set1_epi32(row_offset + 2))));
    __m256 next_first =
        _mm256_and_ps(next_dy, _mm256_castsi256_ps(_mm256_cmpeq_epi32(next_offset, _mm256_set1_epi32(row_offset))));
    *even = _mm256_add_ps(*even, middle);
    *odd = _mm256_add_ps(_mm256_add_ps(*odd, last), next_first);
}

/* Writes OutputGradient row `row` of the plane from the windows of output
 * rows `above` then `below` (either NULL: none), whose first rows are at
 * plane positions above_first and below_first. */
static ALWAYS_INLINE void quad_write_row(const grad_plan* gp, uint32_t row, const grad_row* above, int32_t above_first,
                                         const grad_row* below, int32_t below_first, char* dx_plane, bool half) {
    const uint32_t width = gp->g.in.sizes[4];
    const size_t element = half ? 2 : 4;
    const int32_t position = (int32_t)(row * width);
    char* dx_row = dx_plane + row * gp->grad_out.strides[3] * element;
    for (uint32_t j = 0; 16 * j < width; j++) {
        __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
        if (above) quad_add(above, position - above_first, j, &even, &odd);
        if (below) quad_add(below, position - below_first, j, &even, &odd);
        __m256 low, high;
        interleave_columns(even, odd, &low, &high);
        uint32_t w = 16 * j, rest = width - w;
        store_lanes(dx_row + w * element, low, half, rest < 8 ? rest : 8);
        if (rest > 8) store_lanes(dx_row + (w + 8) * element, high, half, rest - 8 < 8 ? rest - 8 : 8);
    }
}

/* The gradient of one 2-D plane (see above): two grad_rows, the current
 * output row's and the one before. */
static ALWAYS_INLINE void quad_plane(const grad_plan* gp, const dml_pooling_params* p, const char* plane,
                                     const char* dy_plane, char* dx_plane, grad_row rows[2], row_cache* cache,
                                     bool half) {
    const nchw_geometry* g = &gp->g;
    const size_t element = half ? 2 : 4;
    const uint32_t height = g->in.sizes[3];
    const dml_pool_taps rd = dml_pool_window_taps(p, 0, 0, 1);
    const grad_row* above = NULL; /* output row oh - 1's windows, if any tap was valid */
    int32_t above_first = 0;
    for (uint32_t oh = 0; oh < g->out_height; oh++) {
        dml_pool_taps rh = dml_pool_window_taps(p, 1, oh, height);
        window_rows w;
        window_rows_at(&g->in, element, p, plane, &rd, &rh, &w);
        grad_row* current = NULL;
        int32_t current_first = w.count > 0 ? w.position[0] : 0;
        if (w.count > 0) {
            current = &rows[oh % 2];
            grad_row_fill(g, p, plane, dy_plane + oh * gp->grad_in.strides[3] * element, &rd, &rh, &w, cache, current,
                          half);
        }
        if (oh > 0 && 2 * oh - 1 < height)
            quad_write_row(gp, 2 * oh - 1, above, above_first, current, current_first, dx_plane, half);
        if (2 * oh < height) quad_write_row(gp, 2 * oh, current, current_first, NULL, 0, dx_plane, half);
        above = current;
        above_first = current_first;
    }
    /* The last output row's last window row; then rows no window reaches. */
    for (uint32_t row = 2 * g->out_height - 1; row < height; row++)
        quad_write_row(gp, row, row == 2 * g->out_height - 1 ? above : NULL, above_first, NULL, 0, dx_plane, half);
}

/* quad_plane or band_plane, specialized for the window's width and the type. */
static void grad_plane_any(const grad_plan* gp, const dml_pooling_params* p, const char* plane, const char* dy_plane,
                           char* dx_plane, float* band, grad_row r[2], row_cache* cache) {
    if (gp->quads) {
        if (gp->g.half)
            quad_plane(gp, p, plane, dy_plane, dx_plane, r, cache, true);
        else
            quad_plane(gp, p, plane, dy_plane, dx_plane, r, cache, false);
        return;
    }
    switch ((gp->g.window_w == 3) * 2 + gp->g.half) {
    case 0: band_plane(gp, p, plane, dy_plane, dx_plane, band, r, cache, 2, false); break;
    case 1: band_plane(gp, p, plane, dy_plane, dx_plane, band, r, cache, 2, true); break;
    case 2: band_plane(gp, p, plane, dy_plane, dx_plane, band, r, cache, 3, false); break;
    default: band_plane(gp, p, plane, dy_plane, dx_plane, band, r, cache, 3, true); break;
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
        int thread = dml_cpu_thread_index();
        float* acc = NULL;               /* the thread's plane or band; none for write_once_plane and quad_plane */
        if (gp->band_rows && !gp->quads) /* each thread's band on its own cache lines, wherever the resource starts */
            acc = (float*)(((uintptr_t)scratch + BAND_ALIGNMENT - 1) & ~(uintptr_t)(BAND_ALIGNMENT - 1)) +
                  (size_t)thread * gp->band_rows * gp->band_width;
        else if (!gp->write_once && !gp->quads)
            acc = scratch + (size_t)thread * gp->plane_size;
        row_cache cache;
        cache.row = NULL;
        grad_row band_rows[2]; /* band_plane's output row, or quad_plane's two: the columns past its end never hit */
        if (gp->band_rows) {
            for (uint32_t k = 0; k < 2; k++)
                for (uint32_t i = 0; i < GRAD_ROW_COLUMNS; i++) {
                    band_rows[k].offset[i] = -1;
                    band_rows[k].dy[i] = 0;
                }
            if (acc) memset(acc, 0, (size_t)gp->band_rows * gp->band_width * sizeof *acc);
        }
#pragma omp for schedule(dynamic, dml_cpu_chunk((uint64_t)gp->planes, gp->threads))
        for (int64_t plane_index = 0; plane_index < gp->planes; plane_index++) {
            uint32_t c = (uint32_t)((uint64_t)plane_index % g->in.sizes[1]);
            uint32_t n = (uint32_t)((uint64_t)plane_index / g->in.sizes[1]);
            const char* plane = input + (n * g->in.strides[0] + c * g->in.strides[1]) * element;
            const dml_pool_view* dy = &gp->grad_in;
            if (gp->write_once) {
                const dml_pool_view* o = &gp->grad_out;
                write_once_plane(gp, p, plane, input_gradient + (n * dy->strides[0] + c * dy->strides[1]) * element,
                                 output_gradient + (n * o->strides[0] + c * o->strides[1]) * element, &cache);
                continue;
            }
            if (gp->band_rows) {
                const dml_pool_view* o = &gp->grad_out;
                grad_plane_any(gp, p, plane, input_gradient + (n * dy->strides[0] + c * dy->strides[1]) * element,
                               output_gradient + (n * o->strides[0] + c * o->strides[1]) * element, acc, band_rows,
                               &cache);
                continue;
            }
            memset(acc, 0, gp->plane_size * sizeof *acc);
            for (uint32_t od = 0; od < g->out_depth; od++)
                for (uint32_t oh = 0; oh < g->out_height; oh++) {
                    const char* dy_row =
                        input_gradient +
                        (n * dy->strides[0] + c * dy->strides[1] + od * dy->strides[2] + oh * dy->strides[3]) * element;
                    dml_pool_taps rd = dml_pool_window_taps(p, 0, od, g->in.sizes[2]);
                    dml_pool_taps rh = dml_pool_window_taps(p, 1, oh, g->in.sizes[3]);
                    if (g->row_blocks) {
                        row_block layout[ROW_PIECES];
                        block_max blocks[ROW_PIECES];
                        uint32_t pieces = whole_row_maxima(g, p, plane, &rd, &rh, &cache, layout, blocks);
                        for (uint32_t i = 0; i < pieces; i++)
                            add_grad_block(acc, dy_row, dy->strides[4], g->half, layout[i], blocks[i]);
                        continue;
                    }
                    for (uint32_t done = 0; done < g->out_width;) {
                        row_block b = next_block(g, done);
                        add_grad_block(acc, dy_row, dy->strides[4], g->half, b,
                                       row_block_max(g, p, plane, &rd, &rh, b));
                        done = b.ow0 + b.count;
                    }
                }
            const dml_pool_view* o = &gp->grad_out;
            write_grad_plane(gp, acc, output_gradient + (n * o->strides[0] + c * o->strides[1]) * element);
        }
        _mm_sfence(); /* the streamed stores are visible before the dispatch returns */
    }
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_grad_avx2_nchw = {"max_pooling_grad/avx2/nchw", DML_ISA_AVX2, plan_grad, run_grad};

/* ---- Channels-last: eight channels per vector ----
 *
 * Tensors whose C stride is 1 (NHWC, NDHWC). Every lane of a vector shares
 * the window's taps, so a tap is one load of eight channels and needs no
 * per-lane validity; lanes track the winning tap's plane position. Channel
 * tails (C not a multiple of 8) load and store through a small copy. The
 * geometry, plans and loops are max_pooling_nhwc.h's. */

/* Channels per pass over a window's taps: four vectors, whose independent
 * compare-and-blend chains hide each other's latency and share the tap
 * loop's address arithmetic. */
enum { NHWC_CHUNK_VECTORS = 4, NHWC_CHUNK = 8 * NHWC_CHUNK_VECTORS };

/* Channels per sum of the band gradient's gather step (eight vectors, kept
 * in registers). */
enum { NHWC_GATHER = 64 };

/* The window maxima over window w of `vectors` vectors of eight channels at
 * `image` (the image's first element plus the channel offset, in bytes),
 * the last holding `last_count` channels. Every lane takes the window's
 * first tap, then a later tap where it wins (lanes_win): the generic order. */
static ALWAYS_INLINE void nhwc_chunk_max(const nhwc_geometry* g, const dml_pooling_params* p, const char* image,
                                         const nhwc_window* w, int vectors, uint32_t last_count, block_max* m) {
    const size_t element = g->half ? 2 : 4;
    bool first = true;
#define NHWC_TAP(tap_offset, tap_position)                                                                             \
    do {                                                                                                               \
        const char* at_ = image + (tap_offset) * (int64_t)element;                                                     \
        for (int line_ = 0; line_ < vectors * 8 * (int)element; line_ += 64)                                           \
            _mm_prefetch(at_ + line_ + NHWC_PREFETCH_AHEAD, _MM_HINT_T0);                                              \
        __m256i position_ = _mm256_set1_epi32(tap_position);                                                           \
        for (int v_ = 0; v_ < vectors; v_++) {                                                                         \
            __m256 value_ = load_channels(at_ + v_ * 8 * element, g->half, v_ == vectors - 1 ? last_count : 8);        \
            if (first) {                                                                                               \
                m[v_] = (block_max){value_, position_, _mm256_set1_epi32(-1)};                                         \
                continue;                                                                                              \
            }                                                                                                          \
            __m256 take_ = lanes_win(value_, m[v_].value);                                                             \
            m[v_].value = _mm256_blendv_ps(m[v_].value, value_, take_);                                                \
            m[v_].position = _mm256_castps_si256(                                                                      \
                _mm256_blendv_ps(_mm256_castsi256_ps(m[v_].position), _mm256_castsi256_ps(position_), take_));         \
        }                                                                                                              \
        first = false;                                                                                                 \
    } while (0)
    FOR_EACH_NHWC_TAP(g, p, *w, NHWC_TAP);
#undef NHWC_TAP
}

/* nhwc_chunk_max of one vector. */
static ALWAYS_INLINE block_max nhwc_block_max(const nhwc_geometry* g, const dml_pooling_params* p, const char* image,
                                              const nhwc_window* w, uint32_t count) {
    block_max m = {_mm256_setzero_ps(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    nhwc_chunk_max(g, p, image, w, 1, count, &m);
    return m;
}

/* Writes eight channels' maxima (the first `count`): -inf and an all-ones
 * index for a window without taps. A FLOAT16 NaN is re-read for its bits. */
static void store_nhwc_block(const nhwc_forward_plan* f, const char* image, char* out, char* indices, uint32_t c,
                             uint32_t n, uint32_t count, const block_max* m, bool found) {
    const nhwc_geometry* g = &f->g;
    __m256 value = found ? m->value : _mm256_set1_ps(-__builtin_inff());
    if (g->half) {
        uint16_t lanes[8];
        _mm_storeu_si128((__m128i*)lanes, _mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT)); /* exact */
        int nan_lanes = _mm256_movemask_ps(_mm256_cmp_ps(value, value, _CMP_UNORD_Q));
        if (nan_lanes) {
            int32_t position[8];
            _mm256_storeu_si256((__m256i*)position, m->position);
            for (uint32_t lane = 0; lane < count; lane++) {
                if (!(nan_lanes >> lane & 1)) continue;
                lanes[lane] = nhwc_half_at_position(g, image, (uint32_t)position[lane], c + lane);
            }
        }
        memcpy((uint16_t*)out + c, lanes, count * sizeof *lanes);
    } else if (count == 8) {
        _mm256_storeu_ps((float*)out + c, value);
    } else {
        float lanes[8];
        _mm256_storeu_ps(lanes, value);
        memcpy((float*)out + c, lanes, count * sizeof *lanes);
    }
    if (indices == NULL) return;
    uint64_t plane = (uint64_t)g->in.sizes[2] * g->in.sizes[3] * g->in.sizes[4];
    uint64_t first = ((uint64_t)n * g->channels + c) * plane; /* lane l: + l * plane */
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), all_ones = _mm256_set1_epi32(-1);
    if (!f->indices_64) { /* modulo 2^32, as the generic kernel's truncation */
        __m256i index = _mm256_add_epi32(
            _mm256_set1_epi32((int32_t)(uint32_t)first),
            _mm256_add_epi32(_mm256_mullo_epi32(lane, _mm256_set1_epi32((int32_t)plane)), m->position));
        if (!found) index = all_ones;
        if (count == 8) {
            _mm256_storeu_si256((__m256i*)((uint32_t*)indices + c), index);
        } else {
            _mm256_maskstore_epi32((int*)((uint32_t*)indices + c),
                                   _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)count), lane), index);
        }
        return;
    }
    int32_t position[8];
    _mm256_storeu_si256((__m256i*)position, m->position);
    for (uint32_t l = 0; l < count; l++)
        ((uint64_t*)indices)[c + l] = found ? first + l * plane + (uint32_t)position[l] : UINT64_MAX;
}

/* One output position's channels: whole chunks of four vectors, then single vectors. */
static void forward_position_nhwc(const nhwc_forward_plan* f, const dml_pooling_params* p, const char* image, char* out,
                                  char* idx, uint32_t n, const nhwc_window* w) {
    const nhwc_geometry* g = &f->g;
    size_t element = g->half ? 2 : 4;
    uint32_t c = 0;
    if (w->taps > 0)
        for (; c + NHWC_CHUNK <= g->channels; c += NHWC_CHUNK) {
            block_max m[NHWC_CHUNK_VECTORS];
            nhwc_chunk_max(g, p, image + c * element, w, NHWC_CHUNK_VECTORS, 8, m);
            for (int v = 0; v < NHWC_CHUNK_VECTORS; v++)
                store_nhwc_block(f, image, out, idx, c + 8 * v, n, 8, &m[v], true);
        }
    for (; c < g->channels; c += 8) {
        uint32_t count = g->channels - c < 8 ? g->channels - c : 8;
        block_max m = nhwc_block_max(g, p, image + c * element, w, count);
        store_nhwc_block(f, image, out, idx, c, n, count, &m, w->taps > 0);
    }
}

static HRESULT run_forward_nhwc(const dml_kernel_args* args) {
    nhwc_run_forward(args, forward_position_nhwc);
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_avx2_nhwc = {"max_pooling/avx2/nhwc", DML_ISA_AVX2, nhwc_plan_forward,
                                                run_forward_nhwc};

/* Disjoint windows, channels-last: each window's taps are written once,
 * per channel +0 + dy at the argmax (the generic one-term sum) and +0 at
 * the others. */
static ALWAYS_INLINE void write_once_chunk_nhwc(const nhwc_geometry* g, const dml_pooling_params* p, const char* image,
                                                const char* dy, char* dx_image, const nhwc_window* w, uint32_t c,
                                                int vectors, uint32_t last_count) {
    const size_t element = g->half ? 2 : 4;
    block_max m[NHWC_CHUNK_VECTORS];
    memset(m, 0, sizeof m); /* set by the window's first tap: gcc cannot see that there is one */
    __m256 gradient[NHWC_CHUNK_VECTORS];
    nhwc_chunk_max(g, p, image + c * element, w, vectors, last_count, m);
    for (int v = 0; v < vectors; v++)
        gradient[v] = _mm256_add_ps(
            _mm256_setzero_ps(), load_channels(dy + (c + 8 * v) * element, g->half, v == vectors - 1 ? last_count : 8));
#define WRITE_TAP(tap_offset, tap_position)                                                                            \
    do {                                                                                                               \
        __m256i position_ = _mm256_set1_epi32(tap_position);                                                           \
        char* tap_ = dx_image + ((tap_offset) + c) * (int64_t)element;                                                 \
        for (int line_ = 0; line_ < vectors * 8 * (int)element; line_ += 64) /* see max_pooling_nhwc_avx512.c */       \
            _mm_prefetch(tap_ + line_ + NHWC_PREFETCH_AHEAD, _MM_HINT_T0);                                             \
        for (int v_ = 0; v_ < vectors; v_++)                                                                           \
            store_lanes(                                                                                               \
                dx_image + ((tap_offset) + c + 8 * v_) * (int64_t)element,                                             \
                _mm256_and_ps(gradient[v_], _mm256_castsi256_ps(_mm256_cmpeq_epi32(m[v_].position, position_))),       \
                g->half, v_ == vectors - 1 ? last_count : 8);                                                          \
    } while (0)
    FOR_EACH_NHWC_TAP(g, p, *w, WRITE_TAP);
#undef WRITE_TAP
}

static void write_once_window_nhwc(const nhwc_grad_plan* gp, const dml_pooling_params* p, const char* image,
                                   const char* dy, char* dx_image, const nhwc_window* w) {
    const nhwc_geometry* g = &gp->g;
    uint32_t c = 0;
    for (; c + NHWC_CHUNK <= g->channels; c += NHWC_CHUNK)
        write_once_chunk_nhwc(g, p, image, dy, dx_image, w, c, NHWC_CHUNK_VECTORS, 8);
    for (; c < g->channels; c += 8)
        write_once_chunk_nhwc(g, p, image, dy, dx_image, w, c, 1, g->channels - c < 8 ? g->channels - c : 8);
}

/* nhwc_argmax_row_fn: chunks of four vectors, then single vectors (whole
 * eight-lane stores: the band's pitch is a multiple of 8). */
static void nhwc_argmax_row(const nhwc_grad_plan* gp, const dml_pooling_params* p, const char* chunk_image,
                            uint32_t width, uint32_t od, uint32_t oh, int32_t* row) {
    const nhwc_geometry* g = &gp->g;
    const size_t element = g->half ? 2 : 4;
    for (uint32_t ow = 0; ow < g->out.sizes[4]; ow++) {
        nhwc_window w = nhwc_window_at(g, p, od, oh, ow);
        if (w.taps == 0) continue; /* contains no input element: never read */
        uint32_t c = 0;
        for (; c + NHWC_CHUNK <= width; c += NHWC_CHUNK) {
            block_max m[NHWC_CHUNK_VECTORS];
            memset(m, 0, sizeof m); /* set by the window's first tap: gcc cannot see that there is one */
            nhwc_chunk_max(g, p, chunk_image + c * element, &w, NHWC_CHUNK_VECTORS, 8, m);
            for (int v = 0; v < NHWC_CHUNK_VECTORS; v++)
                _mm256_storeu_si256((__m256i*)(row + (uint64_t)ow * gp->pitch + c + 8 * v), m[v].position);
        }
        for (; c < width; c += 8) {
            block_max m = nhwc_block_max(g, p, chunk_image + c * element, &w, width - c < 8 ? width - c : 8);
            _mm256_storeu_si256((__m256i*)(row + (uint64_t)ow * gp->pitch + c), m.position);
        }
    }
}

/* nhwc_gather_fn's work over `vectors` vectors of eight channels, the last
 * holding last_count (sums in registers for constant counts). */
static ALWAYS_INLINE void nhwc_gather_vectors(const nhwc_grad_plan* gp, const dml_pooling_params* p,
                                              const char* dy_chunk, const int32_t* const* band_rows, uint32_t c,
                                              dml_pool_cover sd, dml_pool_cover sh, uint32_t d, uint32_t h, uint32_t w,
                                              int vectors, uint32_t last_count, char* dx) {
    const nhwc_geometry* g = &gp->g;
    const size_t element = g->half ? 2 : 4;
    __m256i position = _mm256_set1_epi32((int32_t)((d * g->in.sizes[3] + h) * g->in.sizes[4] + w));
    __m256 sum[NHWC_GATHER / 8];
    for (int v = 0; v < vectors; v++)
        sum[v] = _mm256_setzero_ps();
#define ADD_CHOSEN(argmax, dy)                                                                                         \
    for (int v_ = 0; v_ < vectors; v_++) {                                                                             \
        __m256 chosen_ = _mm256_castsi256_ps(                                                                          \
            _mm256_cmpeq_epi32(_mm256_loadu_si256((const __m256i*)((argmax) + 8 * v_)), position));                    \
        __m256 gradient_ = load_channels((dy) + 8 * v_ * element, g->half, v_ == vectors - 1 ? last_count : 8);        \
        sum[v_] = _mm256_add_ps(sum[v_], _mm256_and_ps(gradient_, chosen_));                                           \
    }
    FOR_EACH_CONTAINING_WINDOW(gp, p, band_rows, sd, sh, d, h, w, c, dy_chunk, ADD_CHOSEN);
#undef ADD_CHOSEN
    for (int v = 0; v < vectors; v++)
        store_lanes(dx + 8 * v * element, sum[v], g->half, v == vectors - 1 ? last_count : 8);
}

static ALWAYS_INLINE void nhwc_gather(const nhwc_grad_plan* gp, const dml_pooling_params* p, const char* dy_chunk,
                                      const int32_t* const* band_rows, uint32_t c, dml_pool_cover sd, dml_pool_cover sh,
                                      uint32_t d, uint32_t h, uint32_t w, uint32_t count, char* dx) {
    if (count == NHWC_GATHER) /* the common case, with constant counts */
        nhwc_gather_vectors(gp, p, dy_chunk, band_rows, c, sd, sh, d, h, w, NHWC_GATHER / 8, 8, dx);
    else
        nhwc_gather_vectors(gp, p, dy_chunk, band_rows, c, sd, sh, d, h, w, (int)(count + 7) / 8,
                            count % 8 ? count % 8 : 8, dx);
}

static void band_task_nhwc(const nhwc_grad_plan* gp, const dml_pooling_params* p, const dml_kernel_args* args,
                           int64_t task, char* band) {
    nhwc_band_task(gp, p, args, task, band, nhwc_argmax_row, nhwc_gather, NHWC_GATHER);
}

static HRESULT plan_grad_nhwc(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                              dml_plan* plan) {
    (void)flags;
    nhwc_grad_plan gp;
    if (!nhwc_grad_plan_of(op, device, &gp)) return S_FALSE;
    return nhwc_grad_plan_store(&gp, plan);
}

static HRESULT run_grad_nhwc(const dml_kernel_args* args) {
    const nhwc_grad_plan* gp = DML_PLAN_STATE(args, nhwc_grad_plan);
    if (gp->write_once)
        nhwc_write_once(gp, args->op->params, args, write_once_window_nhwc);
    else
        nhwc_run_band(gp, args, band_task_nhwc);
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_grad_avx2_nhwc = {"max_pooling_grad/avx2/nhwc", DML_ISA_AVX2, plan_grad_nhwc,
                                                     run_grad_nhwc};
