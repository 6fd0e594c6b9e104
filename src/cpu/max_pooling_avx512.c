/* Max pooling with AVX-512, FLOAT32 and FLOAT16, rows contiguous along W
 * ("nchw"), 4-D and 5-D, for the shapes where it beats AVX2: W stride 2 with
 * windows of two or three undilated columns (3x3/2, 2x2/2), and W stride 1
 * with such windows (3x3/1: "Stride 1" below), any
 * padding, any depth and height windows of at most MAX_WINDOW_ROWS rows,
 * output rows of at most 512 columns, at most MAX_PLAN_ROWS output rows per
 * plane (their window rows are computed once, in the plan). The gradient
 * takes the same shapes on 2-D planes (see "Gradient" below).
 * Everything else declines to the AVX2 entries.
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
 * (edge_block_max), in the generic order of taps.
 *
 * Stride 1: lane l's window starts at column base + l, so a row's taps are
 * its 16 columns from base and the same shifted by one and two lanes
 * (stride1_taps: two loads masked to the row), and every tap's column is
 * checked per lane (stride1_reduce_row): on narrow planes (14 columns: one
 * block with a padding column at each end) nearly every block meets an end,
 * which sent AVX2's 8-column blocks through their slowest edge loads (3x3/1
 * p1 on 32x256x14x14: 6.1-6.5 ms there, 2.1-2.2 here). The gradient adds
 * InputGradient at those argmaxes into a FLOAT32 plane per thread, in
 * increasing output order as the generic kernel (stride1_plane). */
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
    WIDE_LANES = 32, /* FLOAT16 keys (below) */
    MAX_BLOCKS = 32, /* blocks of an output row: 512 columns */
};

/* How a block's windows meet the row's ends. */
typedef enum block_kind {
    BLOCK_INSIDE,    /* every real lane's window lies inside the row */
    BLOCK_LEFT_EDGE, /* inside but for lane 0's first tap (column -1) */
    BLOCK_EDGE,      /* anything else: each tap's column checked */
} block_kind;

/* One block of an output row: columns ow0 .. ow0 + count - 1, whose lane
 * l's window starts at input column base + 2 l (W stride 1: base + l); the
 * lanes of its loads (row_taps, stride1_taps) that lie inside the row. */
typedef struct row_block {
    int32_t base;
    uint32_t ow0, count;
    uint32_t first_lane;   /* the lanes before it were written by the block before (the last block) */
    uint32_t low, high;    /* load masks of lanes (__mmask16 or __mmask32) */
    bool last;             /* column base + 2 lanes lies inside the row */
    uint8_t kind;          /* block_kind */
    uint16_t tap_valid[3]; /* W stride 1: the lanes whose tap k lies in the row (and below count) */
} row_block;

/* The input and the blocks of an output row: what the forward pass and the
 * gradient share. */
typedef struct row_geometry {
    dml_pool_view in;
    bool half;
    bool track_position; /* false: a FLOAT32 pass without indices needs only values */
    uint32_t lanes;      /* output columns per block: LANES, or WIDE_LANES (FLOAT16 keys) */
    uint32_t window_w, padding_w;
    uint32_t stride_w; /* 2 or 1 */
    uint32_t blocks;   /* per output row (row_block_at) */
    row_block block[MAX_BLOCKS];
} row_geometry;

typedef struct forward_plan {
    row_geometry g;
    nchw_outputs o;
    bool stream; /* outputs far larger than the caches: streamed where aligned */
    int threads;
    int chunk_rows;                 /* of the dynamic schedule: whole planes (nchw_forward_chunk_rows) */
    uint32_t out_rows;              /* OD * OH */
    plan_window_rows window_rows[]; /* per output row (od * OH + oh) */
} forward_plan;

/* The lanes where `value` wins over `best` (see the top of the file). */
static ALWAYS_INLINE __mmask16 lanes_win(__m512 value, __m512 best) {
    return _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(value, value, _CMP_ORD_Q), value, best, _CMP_NLE_UQ);
}

/* The lanes j of `lanes` (at most 32) whose column first + j lies in [0, width). */
static uint32_t column_mask(int64_t first, int64_t width, uint32_t lanes) {
    int64_t begin = first < 0 ? -first : 0, end = width - first;
    if (end > lanes) end = lanes;
    if (end <= begin) return 0;
    return (uint32_t)((((uint64_t)1 << end) - 1) & ~(((uint64_t)1 << begin) - 1));
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

/* Fetches the two lines PREFETCH_AHEAD bytes after a block's loads from `at`. */
static ALWAYS_INLINE void prefetch_ahead(const char* at) {
    _mm_prefetch(at + PREFETCH_AHEAD, _MM_HINT_T0);
    _mm_prefetch(at + PREFETCH_AHEAD + 64, _MM_HINT_T0);
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
    prefetch_ahead(row + first * (half ? 2 : 4));
    __m512 low = load_columns(row, first, (__mmask16)b->low, half);
    __m512 high = load_columns(row, first + 16, (__mmask16)b->high, half);
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
static ALWAYS_INLINE block_max edge_block_max(const row_geometry* g, const char* plane, const plan_window_rows* w,
                                              const row_block* b, __m512i columns, int window_w, bool half,
                                              bool track) {
    const int64_t width = g->in.sizes[4];
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
        row_taps(plane + w->offset[r] * (half ? 2 : 4), b, window_w, half, false, tap);
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

/* Writes the indices (if any) of output columns ow0 .. ow0 + count - 1
 * (count <= 16) of plane positions `position`: all ones where no tap was
 * valid (lanes not in `found`); streamed as store_lanes32 says. */
static ALWAYS_INLINE void store_indices(const nchw_output_row* r, uint32_t ow0, __m512i position, __mmask16 found,
                                        uint32_t count, uint32_t first_lane, bool stream) {
    if (r->indices32) {
        __m512i index = _mm512_add_epi32(position, _mm512_set1_epi32((int32_t)(uint32_t)r->plane_index));
        index = _mm512_mask_mov_epi32(_mm512_set1_epi32(-1), found, index);
        store_lanes32(r->indices32 + ow0, _mm512_castsi512_ps(index), count, first_lane, stream);
    } else if (r->indices64) {
        const __m512i base = _mm512_set1_epi64((long long)r->plane_index), all_ones = _mm512_set1_epi64(-1);
        __mmask16 lanes = (__mmask16)(((uint32_t)1 << count) - 1);
        for (uint32_t eighth = 0; eighth < 2; eighth++) {
            __m256i part = eighth ? _mm512_extracti64x4_epi64(position, 1) : _mm512_castsi512_si256(position);
            __m512i index = _mm512_add_epi64(_mm512_cvtepu32_epi64(part), base);
            index = _mm512_mask_mov_epi64(all_ones, (__mmask8)(found >> (8 * eighth)), index);
            if (count == LANES)
                _mm512_storeu_si512(r->indices64 + ow0 + 8 * eighth, index);
            else
                _mm512_mask_storeu_epi64(r->indices64 + ow0 + 8 * eighth, (__mmask8)(lanes >> (8 * eighth)), index);
        }
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
                if (nan_lanes >> lane & 1) bits[lane] = half_at_position(&f->g.in, r->plane, (uint32_t)position[lane]);
            halves = _mm256_load_si256((const __m256i*)bits);
        }
        if (count == LANES) /* a whole block: a plain store (masked ones are slow) */
            _mm256_storeu_si256((__m256i*)((uint16_t*)r->output + ow0), halves);
        else
            _mm256_mask_storeu_epi16((uint16_t*)r->output + ow0, lanes, halves);
    } else {
        store_lanes32((float*)r->output + ow0, value, count, b->first_lane, f->stream);
    }
    store_indices(r, ow0, m.position, m.found, count, b->first_lane, f->stream);
}

/* Whether the reductions of the first of rows w of the plane at `plane`
 * (elements of `element` bytes) are those the cache keeps. */
static ALWAYS_INLINE bool row_cache_holds(const row_cache* cache, const char* plane, const plan_window_rows* w,
                                          size_t element) {
    return w->count > 0 && cache->row == plane + w->offset[0] * (int64_t)element && cache->position == w->position[0];
}

/* Keeps the reductions of the last of rows w (block_maxima put them in the cache). */
static ALWAYS_INLINE void row_cache_keep(row_cache* cache, const char* plane, const plan_window_rows* w,
                                         size_t element) {
    cache->row = w->count > 0 ? plane + w->offset[w->count - 1] * (int64_t)element : NULL;
    cache->position = w->count > 0 ? w->position[w->count - 1] : 0;
}

/* The window maxima of block j of an output row whose windows' input rows
 * are w of the plane at `plane`, at least one (`kept`: the cache holds the
 * reductions of the first of them); keeps the last row's reductions in the
 * cache. */
static ALWAYS_INLINE block_max block_maxima(const row_geometry* g, const char* plane, const plan_window_rows* w,
                                            uint32_t j, bool kept, row_cache* cache, int window_w, bool half,
                                            bool track) {
    const size_t element = half ? 2 : 4;
    const __m512i lane_columns = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const row_block* b = &g->block[j];
    __m512i columns = _mm512_add_epi32(lane_columns, _mm512_set1_epi32(b->base));
    if (b->kind == BLOCK_EDGE) return edge_block_max(g, plane, w, b, columns, window_w, half, track);
    bool left_edge = b->kind == BLOCK_LEFT_EDGE;
    __m512 value;
    __m512i at;
    if (kept) {
        value = cache->value[j];
        at = cache->position_of[j];
    } else {
        reduce_row(plane + w->offset[0] * element, b, _mm512_add_epi32(columns, _mm512_set1_epi32(w->position[0])),
                   window_w, half, track, left_edge, &value, &at);
    }
    block_max m = {value, at, 0xffff};
    for (uint32_t k = 1; k < w->count; k++) {
        reduce_row(plane + w->offset[k] * element, b, _mm512_add_epi32(columns, _mm512_set1_epi32(w->position[k])),
                   window_w, half, track, left_edge, &value, &at);
        __mmask16 take = lanes_win(value, m.value);
        m.value = _mm512_mask_mov_ps(m.value, take, value);
        if (track) m.position = _mm512_mask_mov_epi32(m.position, take, at);
    }
    cache->value[j] = value; /* the last row's reductions */
    cache->position_of[j] = at;
    return m;
}

/* ---- W stride 1 ----
 *
 * Each input row of the windows is reduced on its own over the block's taps
 * (a lane taking a tap where it is the lane's first valid one or wins, in
 * the generic order), and the rows are merged in window order, as at stride
 * 2. (A row of a 3-row window at H stride 1 serves three output rows; a
 * ring that kept its reductions for them was slower, 2.48-2.68 ms against
 * 2.09-2.21 on 32x256x14x14 3x3/1 p1 in the same run.) */

/* The taps of one input row for a W-stride-1 block: tap[k] holds column
 * base + l + k, from the 16 columns at base and the next window_w - 1 (the
 * lanes of b->low and b->high: nothing outside the row is read). */
static ALWAYS_INLINE void stride1_taps(const char* row, const row_block* b, int window_w, bool half, __m512 tap[3]) {
    __m512i low = _mm512_castps_si512(load_columns(row, b->base, (__mmask16)b->low, half));
    __m512i high = _mm512_castps_si512(load_columns(row, b->base + LANES, (__mmask16)b->high, half));
    tap[0] = _mm512_castsi512_ps(low);
    tap[1] = _mm512_castsi512_ps(_mm512_alignr_epi32(high, low, 1));
    if (window_w == 3) tap[2] = _mm512_castsi512_ps(_mm512_alignr_epi32(high, low, 2));
}

/* One input row at plane position `position` reduced over a stride-1
 * block's taps; lanes past the block's count and columns outside the row
 * take none (found clear). */
static ALWAYS_INLINE block_max stride1_reduce_row(const char* row, int32_t position, const row_block* b, int window_w,
                                                  bool half, bool track) {
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 tap[3];
    stride1_taps(row, b, window_w, half, tap);
    __m512i at = _mm512_add_epi32(lane, _mm512_set1_epi32(b->base + position)); /* lane l's first tap */
    block_max m = {_mm512_setzero_ps(), _mm512_setzero_si512(), 0};
    for (int k = 0; k < window_w; k++) {
        /* take = valid & (~found | wins), in mask registers */
        __mmask16 valid = (__mmask16)b->tap_valid[k];
        __mmask16 number = _mm512_mask_cmp_ps_mask(valid, tap[k], tap[k], _CMP_ORD_Q);
        __mmask16 wins = _mm512_mask_cmp_ps_mask(number, tap[k], m.value, _CMP_NLE_UQ);
        __mmask16 take = _kor_mask16(wins, _kandn_mask16(m.found, valid));
        m.found = _kor_mask16(m.found, valid);
        m.value = _mm512_mask_mov_ps(m.value, take, tap[k]);
        if (track) m.position = _mm512_mask_add_epi32(m.position, take, at, _mm512_set1_epi32(k));
    }
    return m;
}

/* Merges a later row's reduction into m: it wins where m has no valid tap
 * yet or where it is strictly better (the first maximum of a sequence is
 * that of its parts merged in order). */
static ALWAYS_INLINE void merge_row(block_max* m, const block_max* row, bool track) {
    __mmask16 number = _mm512_mask_cmp_ps_mask(row->found, row->value, row->value, _CMP_ORD_Q);
    __mmask16 wins = _mm512_mask_cmp_ps_mask(number, row->value, m->value, _CMP_NLE_UQ);
    __mmask16 take = _kor_mask16(wins, _kandn_mask16(m->found, row->found));
    m->found = _kor_mask16(m->found, row->found);
    m->value = _mm512_mask_mov_ps(m->value, take, row->value);
    if (track) m->position = _mm512_mask_mov_epi32(m->position, take, row->position);
}

/* The window maxima of a stride-1 block whose windows' input rows are w of
 * the plane at `plane`. */
static ALWAYS_INLINE block_max stride1_block_max(const char* plane, const plan_window_rows* w, const row_block* b,
                                                 int window_w, bool half, bool track) {
    const size_t element = half ? 2 : 4;
    block_max m = {_mm512_setzero_ps(), _mm512_setzero_si512(), 0};
    for (uint32_t k = 0; k < w->count; k++) {
        block_max row =
            stride1_reduce_row(plane + w->offset[k] * (int64_t)element, w->position[k], b, window_w, half, track);
        merge_row(&m, &row, track);
    }
    return m;
}

/* One output row at W stride 1: every block's window maxima, stored. */
static ALWAYS_INLINE void stride1_forward_row(const forward_plan* f, const nchw_output_row* r, int window_w, bool half,
                                              bool track) {
    const plan_window_rows* w = &f->window_rows[(size_t)r->od * f->o.out.sizes[3] + r->oh];
    for (uint32_t j = 0; j < f->g.blocks; j++)
        store_block(f, r, &f->g.block[j], stride1_block_max(r->plane, w, &f->g.block[j], window_w, half, track), half);
}

/* One output row: every block's window maxima, stored. */
static ALWAYS_INLINE void forward_row(const forward_plan* f, const nchw_output_row* r, row_cache* cache, int window_w,
                                      bool half, bool track) {
    const plan_window_rows* w = &f->window_rows[(size_t)r->od * f->o.out.sizes[3] + r->oh];
    const size_t element = half ? 2 : 4;
    bool kept = row_cache_holds(cache, r->plane, w, element);
    /* The count checked once per row, not in block_maxima: 6% of the FLOAT16 pass on one thread. */
    const block_max padding_only = {_mm512_setzero_ps(), _mm512_setzero_si512(), 0};
    for (uint32_t j = 0; j < f->g.blocks; j++)
        store_block(f, r, &f->g.block[j],
                    w->count > 0 ? block_maxima(&f->g, r->plane, w, j, kept, cache, window_w, half, track)
                                 : padding_only,
                    half);
    row_cache_keep(cache, r->plane, w, element);
}

/* ---- FLOAT16 as 16-bit keys: 32 output columns to a vector ----
 *
 * Where every block's windows lie inside the row (BLOCK_INSIDE or
 * BLOCK_LEFT_EDGE), FLOAT16 is compared without conversions: each value's
 * key (half_keys) orders as the value does under the rules above, as an
 * unsigned 16-bit integer, so a tap wins where its key is strictly greater
 * (a NaN never wins, a number beats a NaN best; +0 and -0 tie). Blocks of
 * WIDE_LANES columns, loaded and split into taps as row_taps does, rows
 * reduced and merged in window order as block_maxima does; each lane keeps
 * its argmax as a 16-bit offset from the plane position of its window's
 * first tap in the first row (the plan checks that they fit). The key gives the value's
 * bits back but for a zero's sign and a NaN's payload: those lanes re-read
 * their argmax (exact_half_bits). */

/* Keys: KEY_ZERO + magnitude for a positive sign, KEY_ZERO - magnitude for
 * a negative one (both zeros KEY_ZERO), every NaN KEY_NAN, just below
 * -inf's KEY_ZERO - 0x7C00. */
enum { KEY_ZERO = 0x83FF, KEY_NAN = KEY_ZERO - 0x7C01 };

/* Lane indices 0 .. 31 as 16-bit lanes: the permutes' indices derive from them. */
static const _Alignas(64) uint16_t lane_index16[WIDE_LANES] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                                               11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                                               22, 23, 24, 25, 26, 27, 28, 29, 30, 31};

static ALWAYS_INLINE __m512i half_keys(__m512i bits) {
    const __m512i zero_key = _mm512_set1_epi16((short)KEY_ZERO);
    __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi16(0x7FFF));
    __m512i key =
        _mm512_mask_sub_epi16(_mm512_add_epi16(zero_key, magnitude), _mm512_movepi16_mask(bits), zero_key, magnitude);
    /* A NaN's magnitude is above 0x7C00: its key wrapped around to at most KEY_NAN. */
    return _mm512_max_epu16(key, _mm512_set1_epi16(KEY_NAN));
}

/* The bits of the values of keys: +0 for both zeros, a NaN's bits for KEY_NAN. */
static ALWAYS_INLINE __m512i half_bits(__m512i key) {
    const __m512i zero_key = _mm512_set1_epi16((short)KEY_ZERO);
    __mmask32 negative = _mm512_cmplt_epu16_mask(key, zero_key);
    /* 0x8000 | (KEY_ZERO - key), modulo 2^16 */
    return _mm512_mask_sub_epi16(_mm512_sub_epi16(key, zero_key), negative,
                                 _mm512_set1_epi16((short)((0x8000 + KEY_ZERO) & 0xFFFF)), key);
}

/* Thirty-two FLOAT16 values of `row` from column `first` on (the lanes of
 * `mask`, zero elsewhere: nothing outside them is read). */
static ALWAYS_INLINE __m512i load_halves(const char* row, int64_t first, uint32_t mask) {
    uintptr_t at = (uintptr_t)row + (uintptr_t)(first * 2); /* `first` may be before the row (masked off) */
    if (mask == UINT32_MAX) return _mm512_loadu_si512((const void*)at);
    return _mm512_maskz_loadu_epi16(mask, (const void*)at);
}

/* The keys of the taps of one input row for block b (row_taps, 32 lanes). */
static ALWAYS_INLINE void wide_row_taps(const char* row, const row_block* b, int window_w, bool left_edge, bool keys,
                                        __m512i tap[3]) {
    const __m512i lane = _mm512_load_si512(lane_index16);
    const __m512i even = _mm512_add_epi16(lane, lane), odd = _mm512_add_epi16(even, _mm512_set1_epi16(1));
    int64_t first = left_edge ? b->base + 1 : b->base;
    prefetch_ahead(row + first * 2);
    __m512i low = load_halves(row, first, b->low), high = load_halves(row, first + WIDE_LANES, b->high);
    if (keys) { /* else the values' bits */
        low = half_keys(low);
        high = half_keys(high);
    }
    __m512i first_columns = _mm512_permutex2var_epi16(low, even, high);
    __m512i second_columns = _mm512_permutex2var_epi16(low, odd, high);
    __m512i third_columns = second_columns; /* the third tap if any: lane l's is lane l + 1's first */
    if (!left_edge && window_w == 3) {      /* the last lane's is column base + 64 */
        __m512i last = _mm512_setzero_si512();
        if (b->last) last = _mm512_set1_epi16((short)((const uint16_t*)row)[b->base + 2 * WIDE_LANES]);
        if (keys) last = half_keys(last);
        third_columns = _mm512_permutex2var_epi16(first_columns, _mm512_add_epi16(lane, _mm512_set1_epi16(1)), last);
    }
    /* A left edge block's loads start at its lanes' second taps (lane 0's first, column -1, is never used).
     * Constant indices: taps kept in registers (a tap[left_edge] store put them on the stack). */
    tap[0] = left_edge ? _mm512_permutexvar_epi16(_mm512_sub_epi16(lane, _mm512_set1_epi16(1)), second_columns)
                       : first_columns;
    tap[1] = left_edge ? first_columns : second_columns;
    tap[2] = left_edge ? second_columns : third_columns;
}

/* A block's window maxima: keys and argmax offsets (codes). */
typedef struct wide_max {
    __m512i key, code;
} wide_max;

/* One input row reduced over a block's horizontal taps (reduce_row): codes k, tap k's. */
static ALWAYS_INLINE wide_max wide_reduce_row(const char* row, const row_block* b, int window_w, bool left_edge) {
    __m512i tap[3];
    wide_row_taps(row, b, window_w, left_edge, true, tap);
    wide_max m = {tap[0], _mm512_setzero_si512()};
    if (left_edge) { /* lane 0 starts at its second tap */
        m.key = _mm512_mask_mov_epi16(m.key, 1, tap[1]);
        m.code = _mm512_mask_mov_epi16(m.code, 1, _mm512_set1_epi16(1));
    }
    for (int k = 1; k < window_w; k++) {
        __mmask32 take = _mm512_cmpgt_epu16_mask(tap[k], m.key);
        m.key = _mm512_max_epu16(m.key, tap[k]);
        m.code = _mm512_mask_mov_epi16(m.code, take, _mm512_set1_epi16((short)k));
    }
    return m;
}

/* The window maxima of block j (block_maxima; the cache keeps keys in its
 * value lanes and codes in its positions). */
static ALWAYS_INLINE wide_max wide_block_maxima(const row_geometry* g, const char* plane, const plan_window_rows* w,
                                                uint32_t j, bool kept, row_cache* cache, int window_w) {
    const row_block* b = &g->block[j];
    bool left_edge = b->kind == BLOCK_LEFT_EDGE;
    wide_max row = kept ? (wide_max){_mm512_castps_si512(cache->value[j]), cache->position_of[j]}
                        : wide_reduce_row(plane + w->offset[0] * 2, b, window_w, left_edge);
    wide_max m = row;
    for (uint32_t r = 1; r < w->count; r++) {
        row = wide_reduce_row(plane + w->offset[r] * 2, b, window_w, left_edge);
        __mmask32 take = _mm512_cmpgt_epu16_mask(row.key, m.key);
        m.key = _mm512_max_epu16(m.key, row.key);
        m.code =
            _mm512_mask_add_epi16(m.code, take, row.code, _mm512_set1_epi16((short)(w->position[r] - w->position[0])));
    }
    cache->value[j] = _mm512_castsi512_ps(row.key); /* the last row's reductions */
    cache->position_of[j] = row.code;
    return m;
}

/* `bits` with the lanes of `lanes` replaced by the bits of their argmax
 * (codes `code`) among the taps of rows w of the plane at `plane` (block
 * b): the signs of zeros and the payloads of NaN, which keys do not keep.
 * Taps of equal codes are the same element, but for a left edge block's
 * lane 0 first tap (column -1: no element, never an argmax), whose code
 * may be the row before's last column. */
static __attribute__((noinline)) __m512i exact_half_bits(__m512i bits, __mmask32 lanes, __m512i code,
                                                         const row_block* b, const char* plane,
                                                         const plan_window_rows* w, int window_w) {
    const bool left_edge = b->kind == BLOCK_LEFT_EDGE;
    for (uint32_t r = 0; r < w->count; r++) {
        __m512i tap[3];
        wide_row_taps(plane + w->offset[r] * 2, b, window_w, left_edge, false, tap);
        for (int k = 0; k < window_w; k++) {
            __m512i tap_code = _mm512_set1_epi16((short)(w->position[r] - w->position[0] + k));
            __mmask32 valid = left_edge && k == 0 ? lanes & ~(__mmask32)1 : lanes;
            bits = _mm512_mask_mov_epi16(bits, _mm512_mask_cmpeq_epi16_mask(valid, code, tap_code), tap[k]);
        }
    }
    return bits;
}

/* A block's 16-lane parts (masked stores are slow): part 0 its first 16
 * lanes (all of them in a block of at most 16), part 1, in a block of more
 * than 16, its last 16 (overlapping part 0 in a block of 17 to 31). */
static ALWAYS_INLINE uint32_t wide_parts(const row_block* b) { return b->count > LANES ? 2 : 1; }
static ALWAYS_INLINE uint32_t wide_part_first_lane(const row_block* b, uint32_t part) {
    return part ? b->count - LANES : 0;
}
static ALWAYS_INLINE uint32_t wide_part_count(const row_block* b) { return b->count < LANES ? b->count : LANES; }

/* The 16 lanes of part `part` of vector v of block b. */
static ALWAYS_INLINE __m256i wide_part(__m512i v, const row_block* b, uint32_t part) {
    if (part == 0) return _mm512_castsi512_si256(v);
    const __m512i tail =
        _mm512_add_epi16(_mm512_load_si512(lane_index16), _mm512_set1_epi16((short)(b->count - LANES)));
    return _mm512_castsi512_si256(_mm512_permutexvar_epi16(tail, v));
}

/* Writes block b of an output row: the maxima m of windows whose input
 * rows are w, or, where w has no rows, -inf and all-ones indices (decision MP-2). */
static ALWAYS_INLINE void wide_store_block(const row_geometry* g, const nchw_output_row* r, const row_block* b,
                                           const plan_window_rows* w, wide_max m) {
    const uint32_t count = b->count;
    const __mmask32 lanes = count == WIDE_LANES ? UINT32_MAX : ((uint32_t)1 << count) - 1;
    __m512i bits = _mm512_set1_epi16((short)0xFC00);
    if (w->count > 0) {
        bits = half_bits(m.key);
        __mmask32 inexact = (_mm512_cmpeq_epi16_mask(m.key, _mm512_set1_epi16((short)KEY_ZERO)) |
                             _mm512_cmpeq_epi16_mask(m.key, _mm512_set1_epi16(KEY_NAN))) &
                            lanes;
        if (inexact) bits = exact_half_bits(bits, inexact, m.code, b, r->plane, w, (int)g->window_w);
    }
    uint16_t* output = (uint16_t*)r->output + b->ow0;
    if (count == WIDE_LANES) {
        _mm512_storeu_si512(output, bits);
    } else if (count > LANES) {
        for (uint32_t part = 0; part < 2; part++)
            _mm256_storeu_si256((__m256i*)(output + wide_part_first_lane(b, part)), wide_part(bits, b, part));
    } else {
        _mm512_mask_storeu_epi16(output, lanes, bits);
    }
    if (!r->indices32 && !r->indices64) return;
    const __m512i lane_columns = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (uint32_t part = 0; part < wide_parts(b); part++) {
        uint32_t first_lane = wide_part_first_lane(b, part);
        int32_t first = (w->count > 0 ? w->position[0] : 0) + b->base + 2 * (int32_t)first_lane;
        __m512i position = _mm512_add_epi32(_mm512_cvtepu16_epi32(wide_part(m.code, b, part)),
                                            _mm512_add_epi32(lane_columns, _mm512_set1_epi32(first)));
        store_indices(r, b->ow0 + first_lane, position, w->count > 0 ? 0xffff : 0, wide_part_count(b), 0, false);
    }
}

/* One output row of FLOAT16 keys (forward_row; its window rows read from
 * the plan where they are: copying them took 5% of the time). */
static ALWAYS_INLINE void wide_forward_row(const forward_plan* f, const nchw_output_row* r, row_cache* cache,
                                           int window_w) {
    const plan_window_rows* w = &f->window_rows[(size_t)r->od * f->o.out.sizes[3] + r->oh];
    bool kept = row_cache_holds(cache, r->plane, w, 2);
    const wide_max padding_only = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    for (uint32_t j = 0; j < f->g.blocks; j++)
        wide_store_block(&f->g, r, &f->g.block[j], w,
                         w->count > 0 ? wide_block_maxima(&f->g, r->plane, w, j, kept, cache, window_w) : padding_only);
    row_cache_keep(cache, r->plane, w, 2);
}

/* forward_row specialized for the loop-invariant choices. */
static void forward_row_any(const forward_plan* f, const nchw_output_row* r, row_cache* cache) {
    if (f->g.stride_w == 1) {
        switch ((f->g.window_w == 3) * 4 + f->g.half * 2 + f->g.track_position) {
        case 0: stride1_forward_row(f, r, 2, false, false); break;
        case 1: stride1_forward_row(f, r, 2, false, true); break;
        case 2: stride1_forward_row(f, r, 2, true, false); break;
        case 3: stride1_forward_row(f, r, 2, true, true); break;
        case 4: stride1_forward_row(f, r, 3, false, false); break;
        case 5: stride1_forward_row(f, r, 3, false, true); break;
        case 6: stride1_forward_row(f, r, 3, true, false); break;
        default: stride1_forward_row(f, r, 3, true, true); break;
        }
        return;
    }
    if (f->g.lanes == WIDE_LANES) {
        if (f->g.window_w == 3)
            wide_forward_row(f, r, cache, 3);
        else
            wide_forward_row(f, r, cache, 2);
        return;
    }
    switch ((f->g.window_w == 3) * 4 + f->g.half * 2 + f->g.track_position) {
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

/* Block j of an output row of `out_width` columns, L = g->lanes: columns
 * L j .. L j + L - 1, the last block ending at the row's end and
 * overlapping the one before (its columns computed again, the same values:
 * whole vectors, no masked stores, which are slow); a row narrower than L
 * columns is one block of `count` columns. */
static row_block row_block_at(const row_geometry* g, uint32_t j, uint32_t out_width) {
    const uint32_t lanes = g->lanes;
    uint32_t ow0 = out_width < lanes ? 0 : lanes * j < out_width - lanes ? lanes * j : out_width - lanes;
    row_block b = {.base = (int32_t)(g->stride_w * ow0) - (int32_t)g->padding_w,
                   .ow0 = ow0,
                   .count = out_width < lanes ? out_width : lanes,
                   .first_lane = lanes * j - ow0};
    int64_t width = g->in.sizes[4];
    if (g->stride_w == 1) { /* every lane's columns checked (stride1_reduce_row) */
        b.kind = BLOCK_EDGE;
        b.low = column_mask(b.base, width, lanes);
        b.high = column_mask(b.base + lanes, width, lanes) & (((uint32_t)1 << (g->window_w - 1)) - 1);
        for (uint32_t k = 0; k < g->window_w; k++)
            b.tap_valid[k] =
                (uint16_t)(column_mask(b.base + (int64_t)k, width, lanes) & (((uint32_t)1 << b.count) - 1));
        return b;
    }
    bool ends_inside = b.base + 2 * (int64_t)(b.count - 1) + g->window_w <= width;
    b.kind = b.base >= 0 && ends_inside ? BLOCK_INSIDE : b.base == -1 && ends_inside ? BLOCK_LEFT_EDGE : BLOCK_EDGE;
    int64_t first = b.kind == BLOCK_LEFT_EDGE ? b.base + 1 : b.base; /* row_taps */
    b.low = column_mask(first, width, lanes);
    b.high = column_mask(first + lanes, width, lanes);
    b.last = b.kind != BLOCK_LEFT_EDGE && b.base + 2 * (int64_t)lanes >= 0 && b.base + 2 * (int64_t)lanes < width;
    return b;
}

/* Whether both directions take the problem: FLOAT32 or FLOAT16 input
 * contiguous along W, W stride 2 or 1 (blocks of LANES columns) with
 * windows of two or three undilated columns, at most
 * MAX_WINDOW_ROWS rows per window, output rows of at most 512 columns, at
 * most MAX_PLAN_ROWS output rows per plane, positions and columns in int32
 * lanes. Sets g's input and blocks of `lanes` columns for output view out. */
static bool row_geometry_init(row_geometry* g, const dml_tensor* input, const dml_pooling_params* p,
                              const dml_pool_view* out, uint32_t lanes) {
    if (input->type != DML_TENSOR_DATA_TYPE_FLOAT32 && input->type != DML_TENSOR_DATA_TYPE_FLOAT16) return false;
    g->in = dml_pool_view_5d(input);
    g->half = input->type == DML_TENSOR_DATA_TYPE_FLOAT16;
    g->window_w = p->window[2];
    g->padding_w = p->start_padding[2];
    g->stride_w = p->strides[2];
    g->lanes = lanes;
    if (g->in.strides[4] != 1 || out->strides[4] != 1) return false;
    if (g->stride_w != 2 && !(g->stride_w == 1 && lanes == LANES)) return false;
    if (p->dilations[2] != 1 || (g->window_w != 2 && g->window_w != 3)) return false;
    if ((uint64_t)p->window[0] * p->window[1] > MAX_WINDOW_ROWS) return false;
    if ((uint64_t)out->sizes[2] * out->sizes[3] > MAX_PLAN_ROWS) return false;
    uint32_t out_width = out->sizes[4];
    const uint64_t limit = (uint64_t)1 << 28; /* positions and columns in int32 lanes */
    uint64_t plane = (uint64_t)g->in.sizes[2] * g->in.sizes[3] * g->in.sizes[4];
    if (out_width > LANES * MAX_BLOCKS || plane >= limit || g->padding_w >= limit) return false;
    g->blocks = (out_width + lanes - 1) / lanes;
    for (uint32_t j = 0; j < g->blocks; j++)
        g->block[j] = row_block_at(g, j, out_width);
    return true;
}

/* Whether every argmax of the windows of `rows` (out_rows of them, windows
 * of window_w columns) lies less than 2^16 plane positions after its
 * window's first tap in the first row (wide_max's codes). */
static bool offsets_fit_16_bits(const plan_window_rows* rows, uint32_t out_rows, uint32_t window_w) {
    for (uint32_t i = 0; i < out_rows; i++)
        if (rows[i].count > 0 &&
            (int64_t)rows[i].position[rows[i].count - 1] - rows[i].position[0] + window_w > UINT16_MAX)
            return false;
    return true;
}

/* Whether no block of g is a BLOCK_EDGE. */
static bool blocks_inside(const row_geometry* g) {
    for (uint32_t j = 0; j < g->blocks; j++)
        if (g->block[j].kind == BLOCK_EDGE) return false;
    return true;
}

/* FLOAT16 (g of LANES lanes) as keys where every block's windows lie
 * inside the row and the argmaxes' offsets fit 16 bits: blocks of
 * WIDE_LANES for output view out with window rows `rows`; g otherwise. */
static row_geometry wide_geometry_or(const row_geometry* g, const dml_tensor* input, const dml_pooling_params* p,
                                     const dml_pool_view* out, const plan_window_rows* rows, uint32_t out_rows) {
    row_geometry wide;
    if (!g->half || g->stride_w != 2) return *g;
    row_geometry_init(&wide, input, p, out, WIDE_LANES);
    wide.track_position = g->track_position;
    return blocks_inside(&wide) && offsets_fit_16_bits(rows, out_rows, g->window_w) ? wide : *g;
}

static HRESULT plan_forward(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    const dml_pooling_params* p = op->params;
    forward_plan f;
    memset(&f, 0, sizeof f);
    f.o = nchw_outputs_of(op);
    const dml_tensor* input = &op->inputs[DML_POOL_INPUT].tensor;
    if (!row_geometry_init(&f.g, input, p, &f.o.out, LANES)) return S_FALSE;
    if (f.o.has_indices && f.o.idx.strides[4] != 1) return S_FALSE;
    /* FLOAT16 values are written from FLOAT32 lanes, but a NaN's own bits are re-read at its position. */
    f.g.track_position = f.o.has_indices || f.g.half;
    f.threads = nchw_forward_threads(&f.o, p, device);
    f.chunk_rows = nchw_forward_chunk_rows(&f.o, f.threads);
    uint32_t out_width = f.o.out.sizes[4];
    uint64_t out_bytes = (uint64_t)f.o.rows * out_width * (f.g.half ? 2 : 4) * (f.o.has_indices ? 2 : 1);
    /* FLOAT32 rows of whole 32-byte halves (partial lines of streamed rows cost more than they save). */
    f.stream = !f.g.half && out_bytes >= DML_CPU_STREAM_BYTES && out_width % 8 == 0;
    f.out_rows = f.o.out.sizes[2] * f.o.out.sizes[3];
    forward_plan* state = dml_plan_state(plan, sizeof *state + f.out_rows * sizeof(plan_window_rows));
    if (state == NULL) return E_OUTOFMEMORY;
    *state = f;
    plan_window_rows_fill(p, &f.g.in, &f.o.out, state->window_rows);
    state->g = wide_geometry_or(&f.g, input, p, &f.o.out, state->window_rows, f.out_rows);
    return S_OK;
}

static HRESULT run_forward(const dml_kernel_args* args) {
    const forward_plan* f = DML_PLAN_STATE(args, forward_plan);
    char* indices = f->o.has_indices ? args->outputs[DML_POOL_OUTPUT_INDICES] : NULL;
#pragma omp parallel num_threads(f->threads)
    {
        row_cache cache; /* a chunk's rows are consecutive: row pairs share */
        cache.row = NULL;
        cache.position = 0;
        nchw_row_cursor cursor = {.row = -1};
        nchw_output_row r = {0}; /* set by the first nchw_output_row_next (cursor row -1) */
#pragma omp for schedule(dynamic, f->chunk_rows)
        for (int64_t row = 0; row < f->o.rows; row++) {
            nchw_output_row_next(&f->o, &f->g.in, f->g.half ? 2 : 4, args->inputs[DML_POOL_INPUT],
                                 args->outputs[DML_POOL_OUTPUT], indices, &cursor, row, &r);
            forward_row_any(f, &r, &cache);
        }
        _mm_sfence(); /* the streamed stores are visible before the dispatch returns */
    }
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_avx512_nchw = {"max_pooling/avx512/nchw", DML_ISA_AVX512, plan_forward, run_forward};

/* ---- Gradient: overlapping or disjoint windows of 2-D planes, a band of accumulator rows ----
 *
 * The design of max_pooling_avx2.c's band (band_plane), sixteen output
 * columns to a vector. For each output row, block_maxima gives the argmax
 * positions; each one's offset from its window's first element and its
 * InputGradient value go into column-ordered arrays (grad_row). Then, for
 * each input row of the windows, sixteen output columns at a time compare
 * the offsets with those of their window's columns in that row and add the
 * values that hit, +0 elsewhere (band_add_rows: up to three input rows per
 * pass over the output row, whose offsets and values it loads once), into a
 * ring of band_rows
 * FLOAT32 accumulator rows. A band row keeps the windows' first columns
 * ("even": input column 2 ow - padding) apart from their second ("odd"),
 * so that lanes add to lanes; band_write_row interleaves them into
 * OutputGradient once the row is complete (no later output row reaches it)
 * and zeroes it. The order of the terms of each element's sum is the
 * generic kernel's (increasing output index): an even column shared by
 * outputs ow - 1 (its third column) and ow gets ow - 1's value first.
 * Adding +0 changes nothing: a sum starting from +0 is never -0, and a NaN
 * stays the same NaN. */

/* Floats past a band row's even and odd columns: band_write_row's loads of
 * the last 32 columns reach up to 16 past them. */
enum { BAND_SLACK = 16 };

/* Each thread's band starts on a cache line of its own (no false sharing). */
enum { BAND_ALIGNMENT = 64 };

typedef struct grad_plan {
    row_geometry g;
    dml_pool_view grad_in, grad_out; /* InputGradient, OutputGradient */
    bool stream;                     /* FLOAT32 OutputGradient far larger than the caches: streamed where aligned */
    bool quads;           /* 3x3 windows with start padding 1 or 2x2 without, strides 2: quad_plane, no band */
    bool stride1;         /* W stride 1: stride1_plane, an accumulator plane per thread */
    int64_t planes;       /* N * C */
    uint32_t band_rows;   /* accumulator rows per thread */
    uint32_t band_blocks; /* blocks of 16 even (and of 16 odd) columns of a band row */
    uint32_t band_width;  /* floats of a band row: 32 band_blocks + BAND_SLACK */
    int threads;
    plan_window_rows window_rows[]; /* per output row oh */
} grad_plan;

/* One output row: per column its argmax's plane position minus that of its
 * window's first element (the window's first row, column 2 ow - padding),
 * and its InputGradient value (+0 where no tap was valid); columns past the
 * row's end hold offset -1 and value +0, so they never hit. */
enum { GRAD_ROW_COLUMNS = LANES * MAX_BLOCKS + LANES };
typedef struct grad_row {
    _Alignas(64) int32_t offset[GRAD_ROW_COLUMNS];
    _Alignas(64) float dy[GRAD_ROW_COLUMNS];
} grad_row;

/* Fills r's columns of one output row from its blocks' maxima. */
static ALWAYS_INLINE void grad_row_fill(const grad_plan* gp, const plan_window_rows* w, const char* plane,
                                        row_cache* cache, const char* dy_row, grad_row* r, int window_w, bool half) {
    const __m512i lane_first = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const row_geometry* g = &gp->g;
    const size_t element = half ? 2 : 4;
    bool kept = row_cache_holds(cache, plane, w, element);
    /* Lane l's window starts at plane position first + 2 (ow0 + l). */
    const int32_t first = w->position[0] - (int32_t)g->padding_w;
    for (uint32_t j = 0; j < g->blocks; j++) {
        const row_block* b = &g->block[j];
        block_max m = block_maxima(g, plane, w, j, kept, cache, window_w, half, true);
        __mmask16 lanes = (__mmask16)(((uint32_t)1 << b->count) - 1);
        __m512 value = _mm512_maskz_mov_ps(m.found, load_columns(dy_row, b->ow0, lanes, half));
        __m512i offset =
            _mm512_sub_epi32(m.position, _mm512_add_epi32(lane_first, _mm512_set1_epi32(first + 2 * (int32_t)b->ow0)));
        if (b->count == LANES) { /* masked stores are slow */
            _mm512_storeu_si512(r->offset + b->ow0, offset);
            _mm512_storeu_ps(r->dy + b->ow0, value);
        } else {
            _mm512_mask_storeu_epi32(r->offset + b->ow0, lanes, offset);
            _mm512_mask_storeu_ps(r->dy + b->ow0, lanes, value);
        }
    }
    row_cache_keep(cache, plane, w, element);
}

/* grad_row_fill of FLOAT16 keys (wide blocks; window rows w of the plane
 * at `plane`): a code is the offset grad_row keeps. */
static ALWAYS_INLINE void wide_grad_row_fill(const grad_plan* gp, const plan_window_rows* w, const char* plane,
                                             row_cache* cache, const char* dy_row, grad_row* r, int window_w) {
    const row_geometry* g = &gp->g;
    bool kept = row_cache_holds(cache, plane, w, 2);
    for (uint32_t j = 0; j < g->blocks; j++) {
        const row_block* b = &g->block[j];
        wide_max m = wide_block_maxima(g, plane, w, j, kept, cache, window_w);
        const uint32_t count = wide_part_count(b);
        for (uint32_t part = 0; part < wide_parts(b); part++) {
            uint32_t column = b->ow0 + wide_part_first_lane(b, part);
            __m512i offset = _mm512_cvtepu16_epi32(wide_part(m.code, b, part));
            __m512 dy = load_columns(dy_row, column, (__mmask16)(((uint32_t)1 << count) - 1), true);
            if (count == LANES) { /* masked stores are slow */
                _mm512_storeu_si512(r->offset + column, offset);
                _mm512_storeu_ps(r->dy + column, dy);
            } else {
                _mm512_mask_storeu_epi32(r->offset + column, (__mmask16)(((uint32_t)1 << count) - 1), offset);
                _mm512_mask_storeu_ps(r->dy + column, (__mmask16)(((uint32_t)1 << count) - 1), dy);
            }
        }
    }
    row_cache_keep(cache, plane, w, 2);
}

/* Adds one output row's values into `rows` band rows: acc[k] for the input
 * row whose plane position is row_offset[k] past that of the windows' first
 * row. The row's offsets and values are loaded once for all of them. */
static ALWAYS_INLINE void band_add_rows(float* const* acc, const int32_t* row_offset, uint32_t rows, const grad_row* r,
                                        uint32_t blocks, int window_w) {
    enum { MAX_ROWS = 3 };
    __m512i previous_third[MAX_ROWS]; /* per row, the block before's third-column values */
    for (uint32_t k = 0; k < rows; k++)
        previous_third[k] = _mm512_setzero_si512();
    for (uint32_t j = 0; j < LANES * blocks; j += LANES) {
        __m512i offset = _mm512_load_si512(r->offset + j);
        __m512 dy = _mm512_load_ps(r->dy + j);
        for (uint32_t k = 0; k < rows; k++) {
            float *even = acc[k], *odd = acc[k] + LANES * blocks;
            __m512 at_first =
                _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(offset, _mm512_set1_epi32(row_offset[k])), dy);
            __m512 at_second =
                _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(offset, _mm512_set1_epi32(row_offset[k] + 1)), dy);
            _mm512_store_ps(odd + j, _mm512_add_ps(_mm512_load_ps(odd + j), at_second));
            if (window_w == 2) {
                _mm512_store_ps(even + j, _mm512_add_ps(_mm512_load_ps(even + j), at_first));
                continue;
            }
            /* The third column of lane l is the first of lane l + 1: lane l - 1's value comes first. */
            __m512i at_third = _mm512_castps_si512(
                _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(offset, _mm512_set1_epi32(row_offset[k] + 2)), dy));
            __m512 from_previous = _mm512_castsi512_ps(_mm512_alignr_epi32(at_third, previous_third[k], 15));
            previous_third[k] = at_third;
            _mm512_store_ps(even + j, _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(even + j), from_previous), at_first));
        }
    }
}

/* Sixteen consecutive input columns from sixteen windows' lanes: lane l's
 * `even` value at column 2 l, its `odd` value at 2 l + 1 (low: lanes 0 .. 7). */
static ALWAYS_INLINE void interleave_columns(__m512 even, __m512 odd, __m512* low, __m512* high) {
    const __m512i low_lanes = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i high_lanes = _mm512_add_epi32(low_lanes, _mm512_set1_epi32(8));
    *low = _mm512_permutex2var_ps(even, low_lanes, odd);
    *high = _mm512_permutex2var_ps(even, high_lanes, odd);
}

/* Stores 16 FLOAT32 lanes (the first `count`) at `at` as OutputGradient's type. */
static ALWAYS_INLINE void store_gradient(char* at, __m512 lanes, uint32_t count, bool half, bool stream) {
    if (!half) {
        store_lanes32(at, lanes, count, 0, stream);
        return;
    }
    __m256i halves = _mm512_cvtps_ph(lanes, _MM_FROUND_TO_NEAREST_INT);
    if (count == LANES) /* a whole block: a plain store (masked ones are slow) */
        _mm256_storeu_si256((__m256i*)at, halves);
    else
        _mm256_mask_storeu_epi16(at, (__mmask16)(((uint32_t)1 << count) - 1), halves);
}

/* Writes band row `acc` as an OutputGradient row, interleaving its even and
 * odd columns, and zeroes it for the input row that takes its place. */
static ALWAYS_INLINE void band_write_row(const grad_plan* gp, float* acc, char* dx_row, bool half) {
    const uint32_t width = gp->g.in.sizes[4], padding = gp->g.padding_w;
    const size_t element = half ? 2 : 4;
    const float *even = acc, *odd = acc + LANES * gp->band_blocks;
    /* Input column c is band column c + padding: of the even ones when that is even. */
    const float* at_even_column = padding % 2 ? odd + (padding - 1) / 2 : even + padding / 2;
    const float* at_odd_column = padding % 2 ? even + (padding + 1) / 2 : odd + padding / 2;
    for (uint32_t w = 0; w < width; w += 2 * LANES) {
        __m512 low, high;
        interleave_columns(_mm512_loadu_ps(at_even_column + w / 2), _mm512_loadu_ps(at_odd_column + w / 2), &low,
                           &high);
        uint32_t rest = width - w;
        store_gradient(dx_row + w * element, low, rest < LANES ? rest : LANES, half, gp->stream);
        if (rest > LANES)
            store_gradient(dx_row + (w + LANES) * element, high, rest - LANES < LANES ? rest - LANES : LANES, half,
                           gp->stream);
    }
    for (uint32_t i = 0; i < gp->band_width; i += LANES)
        _mm512_store_ps(acc + i, _mm512_setzero_ps());
}

/* The gradient of one 2-D plane through the band (see above). */
static ALWAYS_INLINE void band_plane(const grad_plan* gp, const dml_pooling_params* p, const char* plane,
                                     const char* dy_plane, char* dx_plane, float* band, grad_row* r, row_cache* cache,
                                     int window_w, bool half) {
    const row_geometry* g = &gp->g;
    const size_t element = half ? 2 : 4;
    const uint32_t height = g->in.sizes[3], width = g->in.sizes[4], out_height = gp->grad_in.sizes[3];
    uint32_t written = 0; /* input rows before it are in OutputGradient */
    for (uint32_t oh = 0; oh < out_height; oh++) {
        const plan_window_rows* w = &gp->window_rows[oh];
        if (w->count > 0) {
            const char* dy_row = dy_plane + oh * gp->grad_in.strides[3] * element;
            if (g->lanes == WIDE_LANES)
                wide_grad_row_fill(gp, w, plane, cache, dy_row, r, window_w);
            else
                grad_row_fill(gp, w, plane, cache, dy_row, r, window_w, half);
            for (uint32_t k0 = 0; k0 < w->count; k0 += 3) { /* three rows at a time (band_add_rows) */
                float* acc[3];
                int32_t row_offset[3];
                uint32_t rows = w->count - k0 < 3 ? w->count - k0 : 3;
                for (uint32_t k = 0; k < rows; k++) { /* a 2-D plane: position h W */
                    acc[k] = band + (size_t)((uint32_t)w->position[k0 + k] / width % gp->band_rows) * gp->band_width;
                    row_offset[k] = w->position[k0 + k] - w->position[0];
                }
                if (rows == 3)
                    band_add_rows(acc, row_offset, 3, r, gp->band_blocks, window_w);
                else if (rows == 2)
                    band_add_rows(acc, row_offset, 2, r, gp->band_blocks, window_w);
                else
                    band_add_rows(acc, row_offset, 1, r, gp->band_blocks, window_w);
            }
        }
        for (uint32_t complete = rows_complete_after(p, oh, out_height, height); written < complete; written++)
            band_write_row(gp, band + (size_t)(written % gp->band_rows) * gp->band_width,
                           dx_plane + written * gp->grad_out.strides[3] * element, half);
    }
}

/* ---- Gradient of 3x3 windows with start padding 1 or 2x2 windows, strides 2: no band ----
 *
 * 3x3: window (oh, ow) covers input rows 2 oh - 1 .. 2 oh + 1 and columns
 * 2 ow - 1 .. 2 ow + 1, so input row 2 oh lies in output row oh's windows
 * alone (their middle row), and row 2 oh - 1 in those of oh - 1 (their last
 * row), then of oh (their first); columns likewise: column 2 ow is window
 * ow's middle one, column 2 ow + 1 the last of ow, then the first of ow + 1.
 * 2x2 (no start padding): rows 2 oh and 2 oh + 1, columns 2 ow and 2 ow + 1
 * lie in window (oh, ow) alone. Each OutputGradient row is therefore summed
 * straight from the grad_rows of one or two output rows, its terms in the
 * generic kernel's order (increasing output index) from +0, +0 where a tap
 * did not win: the band's sums, without the band's adds, ring and zeroing. */

/* Adds the terms of one output row's windows (r) to input row `row_offset`
 * (its plane position minus that of the windows' first row) for columns
 * 32 j .. 32 j + 31: `even` (2 ow) and `odd` (2 ow + 1). */
static ALWAYS_INLINE void quad_add(const grad_row* r, int32_t row_offset, uint32_t j, int window_w, __m512* even,
                                   __m512* odd) {
    const uint32_t ow0 = LANES * j;
    __m512i offset = _mm512_load_si512(r->offset + ow0);
    __m512 dy = _mm512_load_ps(r->dy + ow0);
    /* The window's column of input column 2 ow: its first (2x2) or middle (3x3, padding 1). */
    const int32_t even_column = window_w == 3;
    __m512 at_even =
        _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(offset, _mm512_set1_epi32(row_offset + even_column)), dy);
    __m512 at_odd =
        _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(offset, _mm512_set1_epi32(row_offset + even_column + 1)), dy);
    *even = _mm512_add_ps(*even, at_even);
    *odd = _mm512_add_ps(*odd, at_odd);
    if (window_w == 2) return;
    /* Window ow + 1's first column: the next lane's (the row's columns past its end never hit). */
    __m512i next_offset = _mm512_loadu_si512(r->offset + ow0 + 1);
    __m512 next_dy = _mm512_loadu_ps(r->dy + ow0 + 1);
    *odd = _mm512_add_ps(
        *odd, _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(next_offset, _mm512_set1_epi32(row_offset)), next_dy));
}

/* Writes OutputGradient row `row` of the plane from the windows of output
 * rows `above` then `below` (either NULL: none), whose first rows are at
 * plane positions above_first and below_first. */
static ALWAYS_INLINE void quad_write_row(const grad_plan* gp, uint32_t row, const grad_row* above, int32_t above_first,
                                         const grad_row* below, int32_t below_first, char* dx_plane, int window_w,
                                         bool half) {
    const uint32_t width = gp->g.in.sizes[4];
    const size_t element = half ? 2 : 4;
    const int32_t position = (int32_t)(row * width);
    char* dx_row = dx_plane + row * gp->grad_out.strides[3] * element;
    for (uint32_t j = 0; 2 * LANES * j < width; j++) {
        __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();
        if (above) quad_add(above, position - above_first, j, window_w, &even, &odd);
        if (below) quad_add(below, position - below_first, j, window_w, &even, &odd);
        __m512 low, high;
        interleave_columns(even, odd, &low, &high);
        uint32_t w = 2 * LANES * j, rest = width - w;
        store_gradient(dx_row + w * element, low, rest < LANES ? rest : LANES, half, gp->stream);
        if (rest > LANES)
            store_gradient(dx_row + (w + LANES) * element, high, rest - LANES < LANES ? rest - LANES : LANES, half,
                           gp->stream);
    }
}

/* The gradient of one 2-D plane (see above): two grad_rows, the current
 * output row's and the one before. */
static ALWAYS_INLINE void quad_plane(const grad_plan* gp, const char* plane, const char* dy_plane, char* dx_plane,
                                     grad_row rows[2], row_cache* cache, int window_w, bool half) {
    const row_geometry* g = &gp->g;
    const size_t element = half ? 2 : 4;
    const uint32_t height = g->in.sizes[3], out_height = gp->grad_in.sizes[3];
    const grad_row* above = NULL; /* output row oh - 1's windows, if any tap was valid */
    int32_t above_first = 0;
    for (uint32_t oh = 0; oh < out_height; oh++) {
        const plan_window_rows* w = &gp->window_rows[oh];
        grad_row* current = NULL;
        int32_t current_first = w->count > 0 ? w->position[0] : 0;
        if (w->count > 0) {
            current = &rows[oh % 2];
            const char* dy_row = dy_plane + oh * gp->grad_in.strides[3] * element;
            if (g->lanes == WIDE_LANES)
                wide_grad_row_fill(gp, w, plane, cache, dy_row, current, window_w);
            else
                grad_row_fill(gp, w, plane, cache, dy_row, current, window_w, half);
        }
        if (window_w == 2) {
            for (uint32_t row = 2 * oh; row < 2 * oh + 2 && row < height; row++)
                quad_write_row(gp, row, current, current_first, NULL, 0, dx_plane, 2, half);
            continue;
        }
        if (oh > 0 && 2 * oh - 1 < height)
            quad_write_row(gp, 2 * oh - 1, above, above_first, current, current_first, dx_plane, 3, half);
        if (2 * oh < height) quad_write_row(gp, 2 * oh, current, current_first, NULL, 0, dx_plane, 3, half);
        above = current;
        above_first = current_first;
    }
    /* 3x3: the last output row's last window row; then rows no window reaches. */
    for (uint32_t row = 2 * out_height - (window_w == 3); row < height; row++)
        quad_write_row(gp, row, row == 2 * out_height - 1 ? above : NULL, above_first, NULL, 0, dx_plane, window_w,
                       half);
}

/* One plane at W stride 1: each output row's argmaxes (stride1_block_max),
 * their InputGradient added into the FLOAT32 plane `acc` in increasing
 * output order (as the generic kernel: the same sums, bit for bit; lanes
 * before a block's first_lane were added by the block before), then the
 * plane written. */
static ALWAYS_INLINE void stride1_plane(const grad_plan* gp, const char* plane, const char* dy_plane, char* dx_plane,
                                        float* acc, int window_w, bool half) {
    const row_geometry* g = &gp->g;
    const dml_pool_view *dy = &gp->grad_in, *dx = &gp->grad_out;
    const uint32_t height = g->in.sizes[3], width = g->in.sizes[4];
    const size_t element = half ? 2 : 4;
    memset(acc, 0, (size_t)height * width * sizeof *acc);
    for (uint32_t oh = 0; oh < dy->sizes[3]; oh++) {
        const char* dy_row = dy_plane + (uint64_t)oh * dy->strides[3] * element;
        for (uint32_t j = 0; j < g->blocks; j++) {
            const row_block* b = &g->block[j];
            block_max m = stride1_block_max(plane, &gp->window_rows[oh], b, window_w, half, true);
            _Alignas(64) int32_t position[LANES];
            _mm512_store_si512(position, m.position);
            for (uint32_t lane = b->first_lane; lane < b->count; lane++) {
                if (!(m.found >> lane & 1)) continue; /* an all-padding window: no gradient */
                uint64_t at = (uint64_t)(b->ow0 + lane) * dy->strides[4];
                acc[position[lane]] += half ? _cvtsh_ss(((const uint16_t*)dy_row)[at]) : ((const float*)dy_row)[at];
            }
        }
    }
    for (uint32_t h = 0; h < height; h++) {
        char* dx_row = dx_plane + (uint64_t)h * dx->strides[3] * element;
        for (uint32_t x = 0; x < width; x += LANES) {
            uint32_t count = width - x < LANES ? width - x : LANES;
            __m512 sums = _mm512_maskz_loadu_ps((__mmask16)(((uint32_t)1 << count) - 1), acc + (size_t)h * width + x);
            store_gradient(dx_row + x * element, sums, count, half, false);
        }
    }
}

/* stride1_plane, quad_plane or band_plane (`band`: the thread's band, or
 * its plane at W stride 1), specialized for the window's width and the type. */
static void grad_plane_any(const grad_plan* gp, const dml_pooling_params* p, const char* plane, const char* dy_plane,
                           char* dx_plane, float* band, grad_row r[2], row_cache* cache) {
    if (gp->stride1) {
        switch ((gp->g.window_w == 3) * 2 + gp->g.half) {
        case 0: stride1_plane(gp, plane, dy_plane, dx_plane, band, 2, false); break;
        case 1: stride1_plane(gp, plane, dy_plane, dx_plane, band, 2, true); break;
        case 2: stride1_plane(gp, plane, dy_plane, dx_plane, band, 3, false); break;
        default: stride1_plane(gp, plane, dy_plane, dx_plane, band, 3, true); break;
        }
        return;
    }
    switch (gp->quads * 4 + (gp->g.window_w == 3) * 2 + gp->g.half) {
    case 4: quad_plane(gp, plane, dy_plane, dx_plane, r, cache, 2, false); break;
    case 5: quad_plane(gp, plane, dy_plane, dx_plane, r, cache, 2, true); break;
    case 6: quad_plane(gp, plane, dy_plane, dx_plane, r, cache, 3, false); break;
    case 7: quad_plane(gp, plane, dy_plane, dx_plane, r, cache, 3, true); break;
    case 0: band_plane(gp, p, plane, dy_plane, dx_plane, band, r, cache, 2, false); break;
    case 1: band_plane(gp, p, plane, dy_plane, dx_plane, band, r, cache, 2, true); break;
    case 2: band_plane(gp, p, plane, dy_plane, dx_plane, band, r, cache, 3, false); break;
    default: band_plane(gp, p, plane, dy_plane, dx_plane, band, r, cache, 3, true); break;
    }
}

/* The problems of the forward pass (row_geometry_init) on 2-D planes (D = 1,
 * one output depth) at least three columns wide (an argmax's offset from its
 * window's first element then tells its row), InputGradient and
 * OutputGradient contiguous along W; at W stride 2 also W padding of at most
 * 2 and a band (with its alignment) no larger than a plane: the temporary
 * resource's bound, one FLOAT32 plane per thread, which W stride 1 takes
 * whole (stride1_plane). */
static HRESULT plan_grad(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    const dml_pooling_params* p = op->params;
    grad_plan gp;
    memset(&gp, 0, sizeof gp);
    gp.grad_in = dml_pool_view_5d(&op->inputs[DML_POOL_INPUT_GRADIENT].tensor);
    gp.grad_out = dml_pool_view_5d(&op->outputs[DML_POOL_OUTPUT].tensor);
    const dml_tensor* input = &op->inputs[DML_POOL_INPUT].tensor;
    if (!row_geometry_init(&gp.g, input, p, &gp.grad_in, LANES)) return S_FALSE;
    const row_geometry* g = &gp.g;
    gp.g.track_position = true;
    if (g->in.sizes[2] != 1 || gp.grad_in.sizes[2] != 1 || g->in.sizes[4] < 3 || gp.grad_out.strides[4] != 1)
        return S_FALSE;
    uint64_t plane_size = (uint64_t)g->in.sizes[3] * g->in.sizes[4];
    gp.planes = (int64_t)g->in.sizes[0] * g->in.sizes[1];
    uint64_t plane_cost =
        plane_size + (uint64_t)gp.grad_in.sizes[3] * gp.grad_in.sizes[4] * p->window[0] * p->window[1] * p->window[2];
    gp.threads = dml_cpu_threads_for((int)device->threads, (uint64_t)gp.planes,
                                     dml_cpu_items_per_thread(plane_cost, DML_CPU_MIN_WORK_PER_THREAD));
    uint32_t out_height = gp.grad_in.sizes[3];
    if (g->stride_w == 1) { /* stride1_plane: a FLOAT32 plane per thread, 4 T H W bytes (the documented bound) */
        gp.stride1 = true;
        grad_plan* state = dml_plan_state(plan, sizeof *state + out_height * sizeof(plan_window_rows));
        if (state == NULL) return E_OUTOFMEMORY;
        *state = gp;
        plan_window_rows_fill(p, &gp.g.in, &gp.grad_in, state->window_rows);
        plan->temporary_size = (uint64_t)gp.threads * plane_size * sizeof(float);
        return S_OK;
    }
    /* quad_plane's windows: 3x3 with start padding 1 or 2x2 without, strides 2, undilated. */
    uint32_t quad_padding = p->window[1] == 3;
    gp.quads = (p->window[1] == 2 || p->window[1] == 3) && p->window[2] == p->window[1] && p->strides[1] == 2 &&
               p->strides[2] == 2 && p->start_padding[1] == quad_padding && p->start_padding[2] == quad_padding &&
               p->dilations[1] == 1 && p->dilations[2] == 1 &&
               (g->in.sizes[4] + 2 * LANES - 1) / (2 * LANES) <= MAX_BLOCKS; /* quad_write_row's blocks */
    if (!gp.quads && g->padding_w > 2)
        return S_FALSE; /* band_write_row's loads start at most one column in (BAND_SLACK) */
    uint64_t rows = (uint64_t)(p->window[1] - 1) * p->dilations[1] + 1;
    gp.band_rows = (uint32_t)(rows < g->in.sizes[3] ? rows : g->in.sizes[3]);
    /* Band columns: every output column and the one after (the last window's third column), every input column. */
    uint64_t columns = (uint64_t)gp.grad_in.sizes[4] + 1,
             input_columns = ((uint64_t)g->in.sizes[4] + g->padding_w + 1) / 2;
    if (input_columns > columns) columns = input_columns;
    gp.band_blocks = (uint32_t)((columns + LANES - 1) / LANES);
    gp.band_width = 2 * LANES * gp.band_blocks + BAND_SLACK;
    if (!gp.quads && (uint64_t)gp.band_rows * gp.band_width + BAND_ALIGNMENT / sizeof(float) > plane_size)
        return S_FALSE;
    /* FLOAT32 rows of whole 32-byte halves: a line is never both streamed and stored through the cache.
     * quad_plane's rows go through the cache: streamed, 3x3/2 took 9.3-10.0 ms against 7.9-8.2 (Zen 4). */
    gp.stream = !gp.quads && !g->half && (uint64_t)gp.planes * plane_size * sizeof(float) >= DML_CPU_STREAM_BYTES &&
                g->in.sizes[4] % 8 == 0;
    grad_plan* state = dml_plan_state(plan, sizeof *state + out_height * sizeof(plan_window_rows));
    if (state == NULL) return E_OUTOFMEMORY;
    *state = gp;
    plan_window_rows_fill(p, &gp.g.in, &gp.grad_in, state->window_rows);
    state->g = wide_geometry_or(&gp.g, input, p, &gp.grad_in, state->window_rows, out_height);
    plan->temporary_size =
        gp.quads ? 0 : (uint64_t)gp.threads * gp.band_rows * gp.band_width * sizeof(float) + BAND_ALIGNMENT;
    return S_OK;
}

static HRESULT run_grad(const dml_kernel_args* args) {
    const grad_plan* gp = DML_PLAN_STATE(args, grad_plan);
    const row_geometry* g = &gp->g;
    const dml_pooling_params* p = args->op->params;
    const dml_pool_view *dy = &gp->grad_in, *dx = &gp->grad_out;
    const size_t element = g->half ? 2 : 4;
#pragma omp parallel num_threads(gp->threads)
    {
        float* band = NULL; /* each thread's on its own cache lines, wherever the resource starts */
        if (gp->stride1) {  /* the thread's accumulator plane */
            band = (float*)args->temporary + (size_t)dml_cpu_thread_index() * g->in.sizes[3] * g->in.sizes[4];
        } else if (!gp->quads) {
            uintptr_t bands = ((uintptr_t)args->temporary + BAND_ALIGNMENT - 1) & ~(uintptr_t)(BAND_ALIGNMENT - 1);
            band = (float*)bands + (size_t)dml_cpu_thread_index() * gp->band_rows * gp->band_width;
            for (uint32_t i = 0; i < gp->band_rows * gp->band_width; i += LANES)
                _mm512_store_ps(band + i, _mm512_setzero_ps());
        }
        row_cache cache;
        cache.row = NULL;
        cache.position = 0;
        grad_row r[2]; /* the band's, or quad_plane's two; the columns past the output row's end never hit */
        for (uint32_t k = 0; k < 2; k++)
            for (uint32_t i = 0; i < GRAD_ROW_COLUMNS; i++) {
                r[k].offset[i] = -1;
                r[k].dy[i] = 0;
            }
#pragma omp for schedule(dynamic, dml_cpu_chunk((uint64_t)gp->planes, gp->threads))
        for (int64_t plane_index = 0; plane_index < gp->planes; plane_index++) {
            uint64_t c = (uint64_t)plane_index % g->in.sizes[1], n = (uint64_t)plane_index / g->in.sizes[1];
            grad_plane_any(gp, p,
                           (const char*)args->inputs[DML_POOL_INPUT] +
                               (n * g->in.strides[0] + c * g->in.strides[1]) * element,
                           (const char*)args->inputs[DML_POOL_INPUT_GRADIENT] +
                               (n * dy->strides[0] + c * dy->strides[1]) * element,
                           (char*)args->outputs[DML_POOL_OUTPUT] + (n * dx->strides[0] + c * dx->strides[1]) * element,
                           band, r, &cache);
        }
        _mm_sfence(); /* the streamed stores are visible before the dispatch returns */
    }
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_grad_avx512_nchw = {"max_pooling_grad/avx512/nchw", DML_ISA_AVX512, plan_grad,
                                                       run_grad};
