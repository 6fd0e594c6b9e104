/* Max pooling and its gradient with AVX-512 for channels-last tensors (C
 * stride 1: NHWC, NDHWC), FLOAT32 and FLOAT16 (each input element converted
 * once), 4-D and 5-D, any window, padding and dilation.
 *
 * Sixteen channels per vector, four vectors per pass over a window's taps
 * (independent compare chains). Every lane shares the window's taps, so a
 * tap is one load; a lane takes a later tap where the value wins by the
 * rules of src/ops/max_pooling_rules.h (!(value <= best) and value is a
 * number), compared into a mask: values, indices, ties and NaN are the
 * generic kernel's bit for bit. Channel tails are masked loads and stores,
 * so nothing outside a tensor is read or written. The forward streams its
 * outputs where they are far larger than the caches and each line is one
 * whole store or two (nhwc_forward_streams; a plain store first reads its
 * line: a third more traffic for 2x2/2 with indices).
 *
 * The gradient of disjoint windows (2x2/2): each window writes its taps of
 * OutputGradient once (+0 + dy at the argmax, +0 at the others: the
 * generic sum). Far larger than the caches and in whole lines
 * (nhwc_grad_plan.stream), they are streamed: a plain store first reads its
 * line, a third more traffic (64x128x112x112 2x2/2, two threads, A/B in one
 * process: 18.6-19.0 -> 13.0-13.3 ms FLOAT32, 9.6-10.5 -> 8.5 FLOAT16).
 * Otherwise each store's line is fetched ahead (the hardware prefetchers
 * do not run ahead of these stores: 25 -> 21.7 ms on one thread). Overlapping
 * windows (3x3/2): the band gradient of max_pooling_nhwc.h, each input
 * position gathering the windows that chose it, with 16 lanes. The
 * geometry, plans and loops are max_pooling_nhwc.h's. */
#include <immintrin.h>

#include "max_pooling_nhwc.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

enum { LANES = 16, CHUNK_VECTORS = 4, CHUNK = LANES * CHUNK_VECTORS };

/* Channels per sum of the band gradient's gather step: eight vectors, kept
 * in registers (four: 6.8-7.0 ms against 6.4-6.6, 32x256x56x56 3x3/2 on
 * two threads). */
enum { GATHER_VECTORS = 8, GATHER = LANES * GATHER_VECTORS };

enum { ALL_LANES = 0xFFFF };

/* What one vector of sixteen channels found: the winning value and its
 * plane position (d * H + h) * W + w. */
typedef struct lanes_max {
    __m512 value;
    __m512i position;
} lanes_max;

/* The first `count` lanes (at most 16). */
static ALWAYS_INLINE __mmask16 first_lanes(uint32_t count) {
    return count >= LANES ? (__mmask16)ALL_LANES : (__mmask16)((1u << count) - 1);
}

/* Sixteen channels at `at` as FLOAT32 lanes, those outside `mask` zero and unread. */
static ALWAYS_INLINE __m512 load_lanes(const char* at, bool half, __mmask16 mask) {
    if (half) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, at));
    return _mm512_maskz_loadu_ps(mask, at);
}

/* The lanes where `value` wins over `best` (src/ops/max_pooling_rules.h): a
 * NaN never wins, a number beats a NaN best. */
static ALWAYS_INLINE __mmask16 lanes_win(__m512 value, __m512 best) {
    return _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(value, value, _CMP_ORD_Q), value, best, _CMP_NLE_UQ);
}

/* The window maxima over window w (at least one tap) of `vectors` vectors
 * of channels at `image` (the image's first element plus the channel
 * offset, in bytes), the last vector's lanes `last_mask`. Every lane takes
 * the window's first tap, then a later tap where it wins: the generic order.
 * (The first tap is loaded before the loop, so m stays in registers.) */
static ALWAYS_INLINE void chunk_max(const nhwc_geometry* g, const dml_pooling_params* p, const char* image,
                                    const nhwc_window* w, int vectors, __mmask16 last_mask, lanes_max* m) {
    const size_t element = g->half ? 2 : 4;
    int64_t first_offset;
    int32_t first_position;
    nhwc_first_tap(g, p, w, &first_offset, &first_position);
    for (int v = 0; v < vectors; v++)
        m[v] = (lanes_max){load_lanes(image + (first_offset + v * LANES) * (int64_t)element, g->half,
                                      v == vectors - 1 ? last_mask : (__mmask16)ALL_LANES),
                           _mm512_set1_epi32(first_position)};
    bool first = true;
#define MAX_TAP(tap_offset, tap_position)                                                                              \
    do {                                                                                                               \
        const char* at_ = image + (tap_offset) * (int64_t)element;                                                     \
        for (int line_ = 0; line_ < vectors * LANES * (int)element; line_ += 64)                                       \
            _mm_prefetch(at_ + line_ + NHWC_PREFETCH_AHEAD, _MM_HINT_T0);                                              \
        if (first) { /* loaded above */                                                                                \
            first = false;                                                                                             \
            break;                                                                                                     \
        }                                                                                                              \
        __m512i position_ = _mm512_set1_epi32(tap_position);                                                           \
        for (int v_ = 0; v_ < vectors; v_++) {                                                                         \
            __m512 value_ =                                                                                            \
                load_lanes(at_ + v_ * LANES * element, g->half, v_ == vectors - 1 ? last_mask : (__mmask16)ALL_LANES); \
            __mmask16 take_ = lanes_win(value_, m[v_].value);                                                          \
            m[v_].value = _mm512_mask_mov_ps(m[v_].value, take_, value_);                                              \
            m[v_].position = _mm512_mask_mov_epi32(m[v_].position, take_, position_);                                  \
        }                                                                                                              \
    } while (0)
    FOR_EACH_NHWC_TAP(g, p, *w, MAX_TAP);
#undef MAX_TAP
}

/* ---- Forward ---- */

/* Writes the maxima of channels c .. c + 15 (`mask`) and their indices
 * (NULL: none); `found` false: -inf and an all-ones index (a window without
 * taps). A FLOAT16 NaN is re-read from the input for its own bits. `stream`
 * (nhwc_forward_streams, aligned buffers): every store is whole, aligned
 * vectors, streamed. */
static ALWAYS_INLINE void store_forward(const nhwc_forward_plan* f, const char* image, char* out, char* indices,
                                        uint32_t n, uint32_t c, __mmask16 mask, const lanes_max* m, bool found,
                                        bool stream) {
    const nhwc_geometry* g = &f->g;
    __m512 value = found ? m->value : _mm512_set1_ps(-__builtin_inff());
    if (g->half) {
        __m256i halves = _mm512_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT); /* exact: the values were halves */
        __mmask16 nan_lanes = _mm512_mask_cmp_ps_mask(mask, value, value, _CMP_UNORD_Q);
        if (nan_lanes) {
            uint16_t lanes[LANES];
            int32_t position[LANES];
            _mm256_storeu_si256((__m256i*)lanes, halves);
            _mm512_storeu_si512(position, m->position);
            for (uint32_t lane = 0; lane < LANES; lane++) {
                if (!(nan_lanes >> lane & 1)) continue;
                lanes[lane] = nhwc_half_at_position(g, image, (uint32_t)position[lane], c + lane);
            }
            halves = _mm256_loadu_si256((const __m256i*)lanes);
        }
        if (stream)
            _mm256_stream_si256((__m256i*)((uint16_t*)out + c), halves);
        else
            _mm256_mask_storeu_epi16((uint16_t*)out + c, mask, halves);
    } else if (stream) {
        _mm512_stream_ps((float*)out + c, value);
    } else {
        _mm512_mask_storeu_ps((float*)out + c, mask, value);
    }
    if (indices == NULL) return;
    uint64_t plane = (uint64_t)g->in.sizes[2] * g->in.sizes[3] * g->in.sizes[4];
    uint64_t first = ((uint64_t)n * g->channels + c) * plane; /* lane l: + l * plane + position */
    if (!f->indices_64) {                                     /* modulo 2^32, as the generic kernel's truncation */
        __m512i lane_planes = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32((int32_t)plane));
        __m512i index =
            found ? _mm512_add_epi32(_mm512_add_epi32(_mm512_set1_epi32((int32_t)(uint32_t)first), lane_planes),
                                     m->position)
                  : _mm512_set1_epi32(-1);
        if (stream)
            _mm512_stream_si512((__m512i*)((uint32_t*)indices + c), index);
        else
            _mm512_mask_storeu_epi32((uint32_t*)indices + c, mask, index);
        return;
    }
    for (int half_index = 0; half_index < 2; half_index++) { /* lanes 0-7, then 8-15 */
        __m512i lanes = _mm512_add_epi64(
            _mm512_set1_epi64((int64_t)(first + 8 * (uint64_t)half_index * plane)),
            _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64((int64_t)plane)));
        __m512i index = _mm512_set1_epi64(-1);
        if (found)
            index = _mm512_add_epi64(lanes, _mm512_cvtepu32_epi64(half_index ? _mm512_extracti64x4_epi64(m->position, 1)
                                                                             : _mm512_castsi512_si256(m->position)));
        if (stream)
            _mm512_stream_si512((__m512i*)((uint64_t*)indices + c + 8 * half_index), index);
        else
            _mm512_mask_storeu_epi64((uint64_t*)indices + c + 8 * half_index, (__mmask8)(mask >> (8 * half_index)),
                                     index);
    }
}

/* One output position's channels: chunks of four vectors, then single
 * vectors, the last masked. */
static ALWAYS_INLINE void forward_position(const nhwc_forward_plan* shared_plan,
                                           const dml_pooling_params* shared_params, const char* image, char* out,
                                           char* indices, uint32_t n, const nhwc_window* shared_window, bool stream) {
    /* Local copies, as in write_once_window. */
    const nhwc_forward_plan plan = *shared_plan;
    const dml_pooling_params params = *shared_params;
    const nhwc_window window = *shared_window;
    const nhwc_forward_plan* f = &plan;
    const dml_pooling_params* p = &params;
    const nhwc_window* w = &window;
    const nhwc_geometry* g = &f->g;
    const size_t element = g->half ? 2 : 4;
    uint32_t c = 0;
    if (w->taps == 0) { /* an all-padding window */
        for (; c < g->channels; c += LANES)
            store_forward(f, image, out, indices, n, c, first_lanes(g->channels - c), NULL, false, stream);
        return;
    }
    for (; c + CHUNK <= g->channels; c += CHUNK) {
        lanes_max m[CHUNK_VECTORS];
        chunk_max(g, p, image + c * element, w, CHUNK_VECTORS, ALL_LANES, m);
        /* Unrolled: an m[v] indexed by a loop variable kept m in memory, and
         * each tap's compare waited on the last tap's store (3x3/2 on one
         * thread: 7.7 -> 5.2 ms). */
#pragma GCC unroll 4
        for (int v = 0; v < CHUNK_VECTORS; v++)
            store_forward(f, image, out, indices, n, c + LANES * v, ALL_LANES, &m[v], true, stream);
    }
    for (; c < g->channels; c += LANES) {
        lanes_max m;
        __mmask16 mask = first_lanes(g->channels - c);
        chunk_max(g, p, image + c * element, w, 1, mask, &m);
        store_forward(f, image, out, indices, n, c, mask, &m, true, stream);
    }
}

static void forward_position_stored(const nhwc_forward_plan* f, const dml_pooling_params* p, const char* image,
                                    char* out, char* indices, uint32_t n, const nhwc_window* w) {
    forward_position(f, p, image, out, indices, n, w, false);
}

static void forward_position_streamed(const nhwc_forward_plan* f, const dml_pooling_params* p, const char* image,
                                      char* out, char* indices, uint32_t n, const nhwc_window* w) {
    forward_position(f, p, image, out, indices, n, w, true);
}

static HRESULT run_forward(const dml_kernel_args* args) {
    const nhwc_forward_plan* f = DML_PLAN_STATE(args, nhwc_forward_plan);
    uintptr_t bases = (uintptr_t)args->outputs[DML_POOL_OUTPUT] |
                      (f->has_indices ? (uintptr_t)args->outputs[DML_POOL_OUTPUT_INDICES] : 0);
    bool stream = f->stream && bases % 64 == 0;
    nhwc_run_forward(args, stream ? forward_position_streamed : forward_position_stored);
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_avx512_nhwc = {"max_pooling/avx512/nhwc", DML_ISA_AVX512, nhwc_plan_forward,
                                                  run_forward};

/* ---- Gradient ---- */

static HRESULT plan_grad(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags, dml_plan* plan) {
    (void)flags;
    nhwc_grad_plan gp;
    if (!nhwc_grad_plan_of(op, device, &gp)) return S_FALSE;
    return nhwc_grad_plan_store(&gp, plan);
}

/* Disjoint windows. */

/* Channels c .. of one window's taps: `vectors` vectors, the last `last_mask`.
 * `stream` (nhwc_grad_plan.stream, an aligned buffer): whole lines, each
 * written by one store or two back to back, streamed. */
static ALWAYS_INLINE void write_once_chunk(const nhwc_geometry* g, const dml_pooling_params* p, const char* image,
                                           const char* dy, char* dx_image, const nhwc_window* w, uint32_t c,
                                           int vectors, __mmask16 last_mask, bool stream) {
    const size_t element = g->half ? 2 : 4;
    lanes_max m[CHUNK_VECTORS];
    chunk_max(g, p, image + c * element, w, vectors, last_mask, m);
    __m512 gradient[CHUNK_VECTORS];
    for (int v = 0; v < vectors; v++) /* +0 + dy: the generic sum of one term (-0 becomes +0) */
        gradient[v] = _mm512_add_ps(_mm512_setzero_ps(), load_lanes(dy + (c + LANES * v) * element, g->half,
                                                                    v == vectors - 1 ? last_mask : ALL_LANES));
#define WRITE_TAP(tap_offset, tap_position)                                                                            \
    do {                                                                                                               \
        __m512i position_ = _mm512_set1_epi32(tap_position);                                                           \
        for (int v_ = 0; v_ < vectors; v_++) {                                                                         \
            __mmask16 mask_ = v_ == vectors - 1 ? last_mask : (__mmask16)ALL_LANES;                                    \
            __m512 value_ = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(m[v_].position, position_), gradient[v_]);     \
            char* at_ = dx_image + ((tap_offset) + c + LANES * v_) * (int64_t)element;                                 \
            if (stream && g->half)                                                                                     \
                _mm256_stream_si256((__m256i*)at_, _mm512_cvtps_ph(value_, _MM_FROUND_TO_NEAREST_INT));                \
            else if (stream)                                                                                           \
                _mm512_stream_ps((float*)at_, value_);                                                                 \
            else {                                                                                                     \
                _mm_prefetch(at_ + NHWC_PREFETCH_AHEAD, _MM_HINT_T0);                                                  \
                if (g->half)                                                                                           \
                    _mm256_mask_storeu_epi16(at_, mask_, _mm512_cvtps_ph(value_, _MM_FROUND_TO_NEAREST_INT));          \
                else                                                                                                   \
                    _mm512_mask_storeu_ps(at_, mask_, value_);                                                         \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)
    FOR_EACH_NHWC_TAP(g, p, *w, WRITE_TAP);
#undef WRITE_TAP
}

static ALWAYS_INLINE void write_once_window(const nhwc_grad_plan* gp, const dml_pooling_params* p, const char* image,
                                            const char* dy, char* dx_image, const nhwc_window* w, bool stream) {
    /* Local copies: stores through char and integer pointers might write the
     * plan, so the tap loops would re-read it after every store. */
    const nhwc_geometry g = gp->g;
    const dml_pooling_params params = *p;
    const nhwc_window window = *w;
    uint32_t c = 0;
    for (; c + CHUNK <= g.channels; c += CHUNK)
        write_once_chunk(&g, &params, image, dy, dx_image, &window, c, CHUNK_VECTORS, ALL_LANES, stream);
    if (stream && g.half) /* a line is two vectors: both in one pass (the channels are whole lines) */
        for (; c < g.channels; c += 2 * LANES)
            write_once_chunk(&g, &params, image, dy, dx_image, &window, c, 2, ALL_LANES, true);
    for (; c < g.channels; c += LANES)
        write_once_chunk(&g, &params, image, dy, dx_image, &window, c, 1, first_lanes(g.channels - c), stream);
}

static void write_once_window_stored(const nhwc_grad_plan* gp, const dml_pooling_params* p, const char* image,
                                     const char* dy, char* dx_image, const nhwc_window* w) {
    write_once_window(gp, p, image, dy, dx_image, w, false);
}

static void write_once_window_streamed(const nhwc_grad_plan* gp, const dml_pooling_params* p, const char* image,
                                       const char* dy, char* dx_image, const nhwc_window* w) {
    write_once_window(gp, p, image, dy, dx_image, w, true);
}

/* Overlapping windows: nhwc_argmax_row_fn (masked stores: the band's pitch
 * is a multiple of 8, not of 16). */
static void argmax_row(const nhwc_grad_plan* gp, const dml_pooling_params* p, const char* chunk_image, uint32_t width,
                       uint32_t od, uint32_t oh, int32_t* row) {
    const nhwc_geometry* g = &gp->g;
    const size_t element = g->half ? 2 : 4;
    for (uint32_t ow = 0; ow < g->out.sizes[4]; ow++) {
        nhwc_window w = nhwc_window_at(g, p, od, oh, ow);
        if (w.taps == 0) continue; /* contains no input element: never read */
        int32_t* positions = row + (uint64_t)ow * gp->pitch;
        uint32_t c = 0;
        for (; c + CHUNK <= width; c += CHUNK) {
            lanes_max m[CHUNK_VECTORS];
            chunk_max(g, p, chunk_image + c * element, &w, CHUNK_VECTORS, ALL_LANES, m);
#pragma GCC unroll 4
            for (int v = 0; v < CHUNK_VECTORS; v++)
                _mm512_storeu_si512(positions + c + LANES * v, m[v].position);
        }
        for (; c < width; c += LANES) {
            lanes_max m;
            __mmask16 mask = first_lanes(width - c);
            chunk_max(g, p, chunk_image + c * element, &w, 1, mask, &m);
            _mm512_mask_storeu_epi32(positions + c, mask, m.position);
        }
    }
}

/* nhwc_gather_fn's work over `vectors` vectors of sixteen channels, the
 * last `last_mask`. A lane adds a window's InputGradient where the window
 * chose the position; skipping the others' +0 leaves the generic sum's
 * bits (a sum that starts at +0 is never -0, and x + +0 is x for every
 * other x, NaN included). */
static ALWAYS_INLINE void gather_vectors(const nhwc_grad_plan* gp, const dml_pooling_params* p, const char* dy_chunk,
                                         const int32_t* const* band_rows, uint32_t c, dml_pool_cover sd,
                                         dml_pool_cover sh, uint32_t d, uint32_t h, uint32_t w, int vectors,
                                         __mmask16 last_mask, char* dx) {
    const nhwc_geometry* g = &gp->g;
    const size_t element = g->half ? 2 : 4;
    __m512i position = _mm512_set1_epi32((int32_t)((d * g->in.sizes[3] + h) * g->in.sizes[4] + w));
    __m512 sum[GATHER_VECTORS];
    for (int v = 0; v < vectors; v++)
        sum[v] = _mm512_setzero_ps();
#define ADD_CHOSEN(argmax, dy)                                                                                         \
    for (int v_ = 0; v_ < vectors; v_++) {                                                                             \
        __mmask16 mask_ = v_ == vectors - 1 ? last_mask : (__mmask16)ALL_LANES;                                        \
        __mmask16 chosen_ =                                                                                            \
            _mm512_mask_cmpeq_epi32_mask(mask_, _mm512_maskz_loadu_epi32(mask_, (argmax) + LANES * v_), position);     \
        sum[v_] =                                                                                                      \
            _mm512_mask_add_ps(sum[v_], chosen_, sum[v_], load_lanes((dy) + LANES * v_ * element, g->half, mask_));    \
    }
    FOR_EACH_CONTAINING_WINDOW(gp, p, band_rows, sd, sh, d, h, w, c, dy_chunk, ADD_CHOSEN);
#undef ADD_CHOSEN
    for (int v = 0; v < vectors; v++) {
        __mmask16 mask = v == vectors - 1 ? last_mask : (__mmask16)ALL_LANES;
        char* at = dx + LANES * v * element;
        if (g->half)
            _mm256_mask_storeu_epi16(at, mask, _mm512_cvtps_ph(sum[v], _MM_FROUND_TO_NEAREST_INT));
        else
            _mm512_mask_storeu_ps(at, mask, sum[v]);
    }
}

static ALWAYS_INLINE void gather(const nhwc_grad_plan* gp, const dml_pooling_params* p, const char* dy_chunk,
                                 const int32_t* const* band_rows, uint32_t c, dml_pool_cover sd, dml_pool_cover sh,
                                 uint32_t d, uint32_t h, uint32_t w, uint32_t count, char* dx) {
    if (count == GATHER) /* the common case, with constant counts */
        gather_vectors(gp, p, dy_chunk, band_rows, c, sd, sh, d, h, w, GATHER_VECTORS, ALL_LANES, dx);
    else
        gather_vectors(gp, p, dy_chunk, band_rows, c, sd, sh, d, h, w, (int)(count + LANES - 1) / LANES,
                       first_lanes(count - (count - 1) / LANES * LANES), dx);
}

static void band_task(const nhwc_grad_plan* gp, const dml_pooling_params* p, const dml_kernel_args* args, int64_t task,
                      char* band) {
    nhwc_band_task(gp, p, args, task, band, argmax_row, gather, GATHER);
}

static HRESULT run_grad(const dml_kernel_args* args) {
    const nhwc_grad_plan* gp = DML_PLAN_STATE(args, nhwc_grad_plan);
    if (gp->write_once && gp->stream && (uintptr_t)args->outputs[DML_POOL_OUTPUT] % 64 == 0)
        nhwc_write_once(gp, args->op->params, args, write_once_window_streamed);
    else if (gp->write_once)
        nhwc_write_once(gp, args->op->params, args, write_once_window_stored);
    else
        nhwc_run_band(gp, args, band_task);
    return S_OK;
}

const dml_impl dml_cpu_max_pooling_grad_avx512_nhwc = {"max_pooling_grad/avx512/nhwc", DML_ISA_AVX512, plan_grad,
                                                       run_grad};
