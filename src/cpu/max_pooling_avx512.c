/* Max pooling with AVX-512, FLOAT32 and FLOAT16, rows contiguous along W
 * ("nchw"), 4-D and 5-D, for the shapes where it beats AVX2: W stride 2 with
 * windows of two or three undilated columns (3x3/2, 2x2/2), any padding,
 * any depth and height windows of at most MAX_WINDOW_ROWS rows, output rows
 * of at most 512 columns, at most MAX_PLAN_ROWS output rows per plane (their
 * window rows are computed once, in the plan). Everything else declines to
 * the AVX2 entry.
 *
 * Sixteen output columns of one output row are one vector. Each input row
 * of the windows is loaded once per block (32 or 33 columns, masked at the
 * row's ends: nothing outside the row is read), converted once for FLOAT16,
 * and split into the window's taps by permutes: even columns, odd columns,
 * and the even ones shifted by a lane (the third tap of 3x3). A tap wins
 * where !(value <= best) and the value is a number (src/ops/max_pooling_rules.h:
 * strict >, a NaN never wins, a number beats a NaN best): one compare into a
 * mask register under the value's "ordered" mask, then masked moves of value
 * and position. Rows are reduced on their own and merged in window order
 * (the first maximum of a sequence is that of its parts merged in order, a
 * later part winning only when strictly better), so values, indices, ties
 * and the all-padding sentinel are the generic kernel's bit for bit. At H
 * stride 2 with 3 rows the last row of an output row's windows is the first
 * of the next one's: its reductions are kept per block (row_cache).
 *
 * Blocks whose windows lie inside the row take that lean path; so does the
 * first block of padding 1 (lane 0's first tap is column -1: it starts at
 * its second). Other blocks at the row's ends check each tap's column
 * (edge_block_max), in the generic order of taps. */
#include <immintrin.h>
#include <string.h>

#include "../core/half.h"
#include "max_pooling_cpu.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* How far ahead of each block's loads the input is fetched: a few input
 * rows of the same plane. The hardware's prefetchers leave this path
 * waiting for memory where every input row is new (2x2/2: 70 ms on one
 * thread without, 22 with; 3x3/2: 8.7 -> 8.1 ms); 3.5 to 14 KiB ahead
 * measured the same. A prefetch never faults, past a tensor's end included. */
enum { PREFETCH_AHEAD = 4096 };

enum {
    LANES = 16,
    MAX_BLOCKS = 32, /* blocks of an output row: 512 columns */
};

/* How a block's windows meet the row's ends. */
typedef enum block_kind {
    BLOCK_INSIDE,    /* every real lane's window lies inside the row */
    BLOCK_LEFT_EDGE, /* inside but for lane 0's first tap (column -1) */
    BLOCK_EDGE,      /* anything else: each tap's column checked */
} block_kind;

/* One block of an output row: columns ow0 .. ow0 + count - 1, whose lane
 * l's window starts at input column base + 2 l; the lanes of its three
 * loads (row_taps) that lie inside the row. */
typedef struct row_block {
    int32_t base;
    uint32_t ow0, count;
    uint32_t first_lane; /* the lanes before it were written by the block before (the last block) */
    __mmask16 low, high;
    bool last;    /* column base + 32 lies inside the row */
    uint8_t kind; /* block_kind */
} row_block;

typedef struct forward_plan {
    nchw_outputs o;
    dml_pool_view in;
    bool half;
    bool track_position; /* false: a FLOAT32 pass without indices needs only values */
    bool stream;         /* outputs far larger than the caches: streamed where aligned */
    uint32_t window_w, padding_w;
    uint32_t blocks; /* per output row (row_block_at) */
    row_block block[MAX_BLOCKS];
    int threads;
    uint32_t out_rows;              /* OD * OH */
    plan_window_rows window_rows[]; /* per output row (od * OH + oh) */
} forward_plan;

/* The lanes where `value` wins over `best` (see the top of the file). */
static ALWAYS_INLINE __mmask16 lanes_win(__m512 value, __m512 best) {
    return _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(value, value, _CMP_ORD_Q), value, best, _CMP_NLE_UQ);
}

/* The lanes j of 16 whose column first + j lies in [0, width). */
static ALWAYS_INLINE __mmask16 column_mask(int64_t first, int64_t width) {
    int64_t begin = first < 0 ? -first : 0, end = width - first;
    if (end > LANES) end = LANES;
    if (end <= begin) return 0;
    return (__mmask16)((((uint32_t)1 << end) - 1) & ~(((uint32_t)1 << begin) - 1));
}

/* Sixteen columns of `row` from column `first` on (the lanes of `mask`,
 * zero elsewhere: nothing outside them is read) as FLOAT32. */
static ALWAYS_INLINE __m512 load_columns(const char* row, int64_t first, __mmask16 mask, bool half) {
    /* Integer arithmetic: `first` may be before the row (its lanes masked off). */
    uintptr_t at = (uintptr_t)row + (uintptr_t)(first * (int64_t)(half ? 2 : 4));
    if (mask == 0xffff)
        return half ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)at)) : _mm512_loadu_ps((const void*)at);
    if (half) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, (const void*)at));
    return _mm512_maskz_loadu_ps(mask, (const void*)at);
}

/* The taps of one input row for a block whose lane l's window starts at
 * column base + 2 l: tap[k] holds column base + 2 l + k. Masked loads are
 * slow on this CPU (Zen 4), so whole vectors are loaded where the block
 * allows: a left edge block (base -1) loads from column 0 and takes its
 * first taps from the second ones shifted by a lane (lane 0's is never
 * used), and the third tap's last column is one broadcast element. */
static ALWAYS_INLINE void row_taps(const char* row, const row_block* b, int window_w, bool half, bool left_edge,
                                   __m512 tap[3]) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    int64_t first = left_edge ? b->base + 1 : b->base;
    const char* ahead = row + first * (half ? 2 : 4) + PREFETCH_AHEAD;
    _mm_prefetch(ahead, _MM_HINT_T0);
    _mm_prefetch(ahead + 64, _MM_HINT_T0);
    __m512 low = load_columns(row, first, b->low, half);
    __m512 high = load_columns(row, first + 16, b->high, half);
    __m512 first_columns = _mm512_permutex2var_ps(low, even, high);
    __m512 second_columns = _mm512_permutex2var_ps(low, odd, high);
    if (left_edge) {
        __m512i shifted = _mm512_castps_si512(second_columns);
        tap[0] = _mm512_castsi512_ps(_mm512_alignr_epi32(shifted, shifted, 15));
        tap[1] = first_columns;
        tap[2] = second_columns;
        return;
    }
    tap[0] = first_columns;
    tap[1] = second_columns;
    if (window_w == 3) { /* lane l's third tap is lane l + 1's first; the last lane's is column base + 32 */
        __m512 last = _mm512_setzero_ps();
        if (b->last && half) last = _mm512_set1_ps(_cvtsh_ss(((const uint16_t*)row)[b->base + 32]));
        if (b->last && !half) last = _mm512_set1_ps(((const float*)row)[b->base + 32]);
        tap[2] = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(last), _mm512_castps_si512(tap[0]), 1));
    }
}

/* The window maxima of one block, per lane: value, plane position, and
 * whether any tap was valid. */
typedef struct block_max {
    __m512 value;
    __m512i position;
    __mmask16 found;
} block_max;

/* One input row reduced over a block's horizontal taps (BLOCK_INSIDE or
 * BLOCK_LEFT_EDGE); `at` holds each lane's first column's plane position. */
static ALWAYS_INLINE void reduce_row(const char* row, const row_block* b, __m512i at, int window_w, bool half,
                                     bool track, bool left_edge, __m512* value, __m512i* position) {
    __m512 tap[3];
    row_taps(row, b, window_w, half, left_edge, tap);
    __m512 best = tap[0];
    __m512i best_at = at;
    if (left_edge) { /* lane 0 starts at its second tap */
        best = _mm512_mask_mov_ps(best, 1, tap[1]);
        best_at = _mm512_mask_add_epi32(best_at, 1, at, _mm512_set1_epi32(1));
    }
    for (int k = 1; k < window_w; k++) {
        __mmask16 take = lanes_win(tap[k], best);
        best = _mm512_mask_mov_ps(best, take, tap[k]);
        if (track) best_at = _mm512_mask_add_epi32(best_at, take, at, _mm512_set1_epi32(k));
    }
    *value = best;
    *position = best_at;
}

/* A block at the row's ends: every tap of every row in the generic order,
 * a lane taking it when it is the lane's first valid tap or wins. */
static ALWAYS_INLINE block_max edge_block_max(const forward_plan* f, const window_rows* w, const row_block* b,
                                              __m512i columns, int window_w, bool half, bool track) {
    const int64_t width = f->in.sizes[4];
    __mmask16 valid[3];
    for (int k = 0; k < window_w; k++) {
        __m512i column = _mm512_add_epi32(columns, _mm512_set1_epi32(k));
        valid[k] = _mm512_cmpge_epi32_mask(column, _mm512_setzero_si512()) &
                   _mm512_cmplt_epi32_mask(column, _mm512_set1_epi32((int32_t)width)) &
                   (__mmask16)(((uint32_t)1 << b->count) - 1);
    }
    block_max m = {_mm512_setzero_ps(), _mm512_setzero_si512(), 0};
    for (uint32_t r = 0; r < w->count; r++) {
        __m512 tap[3];
        row_taps(w->row[r], b, window_w, half, false, tap);
        __m512i at = _mm512_add_epi32(columns, _mm512_set1_epi32(w->position[r]));
        for (int k = 0; k < window_w; k++) {
            __mmask16 take = (lanes_win(tap[k], m.value) | (__mmask16)~m.found) & valid[k];
            m.found |= valid[k];
            m.value = _mm512_mask_mov_ps(m.value, take, tap[k]);
            if (track) m.position = _mm512_mask_add_epi32(m.position, take, at, _mm512_set1_epi32(k));
        }
    }
    return m;
}

/* One thread's kept reductions: those of the input row at `row` with plane
 * position `position` (row NULL: none). */
typedef struct row_cache {
    const char* row;
    int32_t position;
    __m512 value[MAX_BLOCKS];
    __m512i position_of[MAX_BLOCKS];
} row_cache;

/* Stores 16 32-bit lanes (the first `count`) at `at`; streamed, whole
 * 32-byte halves from lane `first_lane` on go around the caches where
 * aligned (count and first_lane are then multiples of 8: forward_plan.stream;
 * a line streamed twice in parts, as an overlapping block would, is slow). */
static ALWAYS_INLINE void store_lanes32(void* at, __m512 lanes, uint32_t count, uint32_t first_lane, bool stream) {
    if (!stream && count == LANES) {
        _mm512_storeu_ps(at, lanes);
        return;
    }
    if (!stream) {
        _mm512_mask_storeu_ps(at, (__mmask16)(((uint32_t)1 << count) - 1), lanes);
        return;
    }
    for (uint32_t half = first_lane / 8; half < count / 8; half++) {
        __m256 part = half ? _mm512_extractf32x8_ps(lanes, 1) : _mm512_castps512_ps256(lanes);
        float* to = (float*)at + 8 * half;
        if (((uintptr_t)to & 31) == 0)
            _mm256_stream_ps(to, part);
        else
            _mm256_storeu_ps(to, part);
    }
}

/* Writes one block of output columns ow0 .. ow0 + count - 1: the window
 * maxima, or -inf and an all-ones index where no tap was valid (decision
 * MP-2). */
static ALWAYS_INLINE void store_block(const forward_plan* f, const nchw_output_row* r, const row_block* b, block_max m,
                                      bool half) {
    const uint32_t ow0 = b->ow0, count = b->count;
    __m512 value = _mm512_mask_mov_ps(_mm512_set1_ps(-__builtin_inff()), m.found, m.value);
    __mmask16 lanes = (__mmask16)(((uint32_t)1 << count) - 1);
    if (half) {
        __m256i halves = _mm512_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT); /* exact */
        __mmask16 nan_lanes = _mm512_cmp_ps_mask(value, value, _CMP_UNORD_Q) & lanes;
        if (nan_lanes) {
            _Alignas(64) uint16_t bits[LANES];
            _Alignas(64) int32_t position[LANES];
            _mm256_store_si256((__m256i*)bits, halves);
            _mm512_store_si512(position, m.position);
            for (uint32_t lane = 0; lane < count; lane++)
                if (nan_lanes >> lane & 1) bits[lane] = half_at_position(&f->in, r->plane, (uint32_t)position[lane]);
            halves = _mm256_load_si256((const __m256i*)bits);
        }
        if (count == LANES) /* a whole block: a plain store (masked ones are slow) */
            _mm256_storeu_si256((__m256i*)((uint16_t*)r->output + ow0), halves);
        else
            _mm256_mask_storeu_epi16((uint16_t*)r->output + ow0, lanes, halves);
    } else {
        store_lanes32((float*)r->output + ow0, value, count, b->first_lane, f->stream);
    }
    if (r->indices32) {
        __m512i index = _mm512_add_epi32(m.position, _mm512_set1_epi32((int32_t)(uint32_t)r->plane_index));
        index = _mm512_mask_mov_epi32(_mm512_set1_epi32(-1), m.found, index);
        store_lanes32(r->indices32 + ow0, _mm512_castsi512_ps(index), count, b->first_lane, f->stream);
    } else if (r->indices64) {
        const __m512i base = _mm512_set1_epi64((long long)r->plane_index), all_ones = _mm512_set1_epi64(-1);
        for (uint32_t eighth = 0; eighth < 2; eighth++) {
            __m256i position = eighth ? _mm512_extracti64x4_epi64(m.position, 1) : _mm512_castsi512_si256(m.position);
            __m512i index = _mm512_add_epi64(_mm512_cvtepu32_epi64(position), base);
            index = _mm512_mask_mov_epi64(all_ones, (__mmask8)(m.found >> (8 * eighth)), index);
            if (count == LANES)
                _mm512_storeu_si512(r->indices64 + ow0 + 8 * eighth, index);
            else
                _mm512_mask_storeu_epi64(r->indices64 + ow0 + 8 * eighth, (__mmask8)(lanes >> (8 * eighth)), index);
        }
    }
}

/* One output row: every block's window maxima, stored. */
static ALWAYS_INLINE void forward_row(const forward_plan* f, const nchw_output_row* r, row_cache* cache, int window_w,
                                      bool half, bool track) {
    const __m512i lane_columns = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const plan_window_rows* rows = &f->window_rows[(size_t)r->od * f->o.out.sizes[3] + r->oh];
    window_rows w;
    window_rows_in_plane(rows, r->plane, half ? 2 : 4, &w);
    bool kept = w.count > 0 && cache->row == w.row[0] && cache->position == w.position[0];
    for (uint32_t j = 0; j < f->blocks; j++) {
        const row_block* b = &f->block[j];
        __m512i columns = _mm512_add_epi32(lane_columns, _mm512_set1_epi32(b->base));
        block_max m = {_mm512_setzero_ps(), _mm512_setzero_si512(), 0}; /* no rows: all padding */
        if (w.count > 0 && b->kind == BLOCK_EDGE) {
            m = edge_block_max(f, &w, b, columns, window_w, half, track);
        } else if (w.count > 0) {
            bool left_edge = b->kind == BLOCK_LEFT_EDGE;
            __m512 value;
            __m512i at;
            if (kept) {
                value = cache->value[j];
                at = cache->position_of[j];
            } else {
                reduce_row(w.row[0], b, _mm512_add_epi32(columns, _mm512_set1_epi32(w.position[0])), window_w, half,
                           track, left_edge, &value, &at);
            }
            m = (block_max){value, at, 0xffff};
            for (uint32_t k = 1; k < w.count; k++) {
                reduce_row(w.row[k], b, _mm512_add_epi32(columns, _mm512_set1_epi32(w.position[k])), window_w, half,
                           track, left_edge, &value, &at);
                __mmask16 take = lanes_win(value, m.value);
                m.value = _mm512_mask_mov_ps(m.value, take, value);
                if (track) m.position = _mm512_mask_mov_epi32(m.position, take, at);
            }
            cache->value[j] = value; /* the last row's reductions */
            cache->position_of[j] = at;
        }
        store_block(f, r, b, m, half);
    }
    cache->row = w.count > 0 ? w.row[w.count - 1] : NULL;
    cache->position = w.count > 0 ? w.position[w.count - 1] : 0;
}

/* forward_row specialized for the loop-invariant choices. */
static void forward_row_any(const forward_plan* f, const nchw_output_row* r, row_cache* cache) {
    switch ((f->window_w == 3) * 4 + f->half * 2 + f->track_position) {
    case 0: forward_row(f, r, cache, 2, false, false); break;
    case 1: forward_row(f, r, cache, 2, false, true); break;
    case 2: forward_row(f, r, cache, 2, true, false); break;
    case 3: forward_row(f, r, cache, 2, true, true); break;
    case 4: forward_row(f, r, cache, 3, false, false); break;
    case 5: forward_row(f, r, cache, 3, false, true); break;
    case 6: forward_row(f, r, cache, 3, true, false); break;
    default: forward_row(f, r, cache, 3, true, true); break;
    }
}

/* Block j of an output row of `out_width` columns: columns 16 j .. 16 j +
 * 15, the last block ending at the row's end and overlapping the one before
 * (its columns computed again, the same values: whole vectors, no masked
 * stores, which are slow); a row narrower than 16 columns is one block of
 * `count` columns. */
static row_block row_block_at(const forward_plan* f, uint32_t j, uint32_t out_width) {
    uint32_t ow0 = out_width < LANES ? 0 : LANES * j < out_width - LANES ? LANES * j : out_width - LANES;
    row_block b = {.base = 2 * (int32_t)ow0 - (int32_t)f->padding_w,
                   .ow0 = ow0,
                   .count = out_width < LANES ? out_width : LANES,
                   .first_lane = LANES * j - ow0};
    int64_t width = f->in.sizes[4];
    bool ends_inside = b.base + 2 * (int64_t)(b.count - 1) + f->window_w <= width;
    b.kind = b.base >= 0 && ends_inside ? BLOCK_INSIDE : b.base == -1 && ends_inside ? BLOCK_LEFT_EDGE : BLOCK_EDGE;
    int64_t first = b.kind == BLOCK_LEFT_EDGE ? b.base + 1 : b.base; /* row_taps */
    b.low = column_mask(first, width);
    b.high = column_mask(first + 16, width);
    b.last = b.kind != BLOCK_LEFT_EDGE && b.base + 32 >= 0 && b.base + 32 < width;
    return b;
}

static HRESULT plan_forward(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    const dml_tensor* input = &op->inputs[DML_POOL_INPUT].tensor;
    const dml_pooling_params* p = op->params;
    if (input->type != DML_TENSOR_DATA_TYPE_FLOAT32 && input->type != DML_TENSOR_DATA_TYPE_FLOAT16) return S_FALSE;
    forward_plan f;
    memset(&f, 0, sizeof f);
    f.o = nchw_outputs_of(op);
    f.in = dml_pool_view_5d(input);
    f.half = input->type == DML_TENSOR_DATA_TYPE_FLOAT16;
    f.window_w = p->window[2];
    f.padding_w = p->start_padding[2];
    if (f.in.strides[4] != 1 || f.o.out.strides[4] != 1 || (f.o.has_indices && f.o.idx.strides[4] != 1)) return S_FALSE;
    if (p->strides[2] != 2 || p->dilations[2] != 1 || (f.window_w != 2 && f.window_w != 3)) return S_FALSE;
    if ((uint64_t)p->window[0] * p->window[1] > MAX_WINDOW_ROWS) return S_FALSE;
    uint32_t out_width = f.o.out.sizes[4];
    const uint64_t limit = (uint64_t)1 << 28; /* positions and columns in int32 lanes */
    uint64_t plane = (uint64_t)f.in.sizes[2] * f.in.sizes[3] * f.in.sizes[4];
    if (out_width > LANES * MAX_BLOCKS || plane >= limit || f.padding_w >= limit) return S_FALSE;
    f.blocks = (out_width + LANES - 1) / LANES;
    for (uint32_t j = 0; j < f.blocks; j++)
        f.block[j] = row_block_at(&f, j, out_width);
    /* FLOAT16 values are written from FLOAT32 lanes, but a NaN's own bits are re-read at its position. */
    f.track_position = f.o.has_indices || f.half;
    f.threads = nchw_forward_threads(&f.o, p, device);
    uint64_t out_bytes = (uint64_t)f.o.rows * out_width * (f.half ? 2 : 4) * (f.o.has_indices ? 2 : 1);
    /* FLOAT32 rows of whole 32-byte halves (partial lines of streamed rows cost more than they save). */
    f.stream = !f.half && out_bytes >= DML_CPU_STREAM_BYTES && out_width % 8 == 0;
    f.out_rows = f.o.out.sizes[2] * f.o.out.sizes[3];
    if (f.out_rows > MAX_PLAN_ROWS) return S_FALSE;
    forward_plan* state = dml_plan_state(plan, sizeof *state + f.out_rows * sizeof(plan_window_rows));
    if (state == NULL) return E_OUTOFMEMORY;
    *state = f;
    plan_window_rows_fill(p, &f.in, &f.o.out, state->window_rows);
    return S_OK;
}

static HRESULT run_forward(const dml_kernel_args* args) {
    const forward_plan* f = DML_PLAN_STATE(args, forward_plan);
    char* indices = f->o.has_indices ? args->outputs[DML_POOL_OUTPUT_INDICES] : NULL;
#pragma omp parallel num_threads(f->threads)
    {
        row_cache cache; /* each thread's rows are consecutive (schedule static): row pairs share */
        cache.row = NULL;
        cache.position = 0;
        nchw_row_cursor cursor = {.row = -1};
#pragma omp for schedule(static)
        for (int64_t row = 0; row < f->o.rows; row++) {
            nchw_row_step(&f->o.out, &cursor, row);
            nchw_output_row r = nchw_output_row_at(&f->o, &f->in, f->half ? 2 : 4, args->inputs[DML_POOL_INPUT],
                                                   args->outputs[DML_POOL_OUTPUT], indices, &cursor);
            forward_row_any(f, &r, &cache);
        }
        _mm_sfence(); /* the streamed stores are visible before the dispatch returns */
    }
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_avx512_nchw = {"max_pooling/avx512/nchw", DML_ISA_AVX512, plan_forward, run_forward};
