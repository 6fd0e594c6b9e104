/* Eight channels at once (AVX2 + F16C), for the ROI kernels that vectorize
 * across channels: each lane is one channel and computes exactly what the
 * generic kernel computes for it, so results are the same bits. Include only
 * from the src/cpu/ files named _avx2.c or _avx512.c (compiled with -mavx2
 * -mf16c, and AVX-512 for the latter).
 *
 * A channel_lanes view reads or writes channels [c0, c0 + lanes) at one
 * spatial position: contiguous when the channel stride is 1 (channels-last),
 * gathered otherwise (NCHW). Gathers take int32 lane offsets, so plans accept
 * a tensor only when 7 * its channel stride fits (roi_lanes_fit). FLOAT16
 * is gathered as the 32-bit word that ends with the element (the element
 * before it is inside the tensor), never past the tensor's last element. */
#ifndef DML_CPU_ROI_LANES_AVX2_H
#define DML_CPU_ROI_LANES_AVX2_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "roi_common.h"

enum { ROI_LANES = 8 };

typedef struct channel_lanes {
    void* base;
    uint64_t channel_stride;
    bool half, contiguous;
    __m256i lane_offsets; /* lane * channel_stride */
} channel_lanes;

/* Whether a tensor with this channel stride can be gathered (int32 offsets). */
static inline bool roi_lanes_fit(uint64_t channel_stride) {
    return channel_stride <= (uint64_t)INT32_MAX / (ROI_LANES - 1);
}

static inline channel_lanes channel_lanes_make(const void* base, uint64_t channel_stride, bool half) {
    channel_lanes v = {(void*)base, channel_stride, half, channel_stride == 1, _mm256_setzero_si256()};
    int32_t stride = (int32_t)channel_stride;
    v.lane_offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
    return v;
}

/* Eight 16-bit values, one in the low half of each 32-bit lane, in order. */
static inline __m128i lanes_pack_halves(__m256i words) {
    __m256i packed = _mm256_packus_epi32(words, words); /* per 128 bits: a0..a3 a0..a3 | a4..a7 a4..a7 */
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

/* The raw bits of `lanes` elements at `offset` (FLOAT16: zero-extended to
 * 32 bits); lanes past `lanes` are 0. */
static inline __m256i lanes_load_bits(const channel_lanes* v, uint64_t offset, uint32_t lanes) {
    if (lanes == ROI_LANES) {
        if (v->contiguous)
            return v->half ? _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)((const uint16_t*)v->base + offset)))
                           : _mm256_loadu_si256((const __m256i*)((const float*)v->base + offset));
        if (!v->half) return _mm256_i32gather_epi32((const int*)((const float*)v->base + offset), v->lane_offsets, 4);
        if (offset > 0)
            return _mm256_srli_epi32(
                _mm256_i32gather_epi32((const int*)((const uint16_t*)v->base + offset - 1), v->lane_offsets, 2), 16);
    }
    uint32_t bits[ROI_LANES] = {0};
    for (uint32_t i = 0; i < lanes; i++) {
        uint64_t at = offset + i * v->channel_stride;
        bits[i] = v->half ? ((const uint16_t*)v->base)[at] : ((const uint32_t*)v->base)[at];
    }
    return _mm256_loadu_si256((const __m256i*)bits);
}

/* One element as FLOAT32 (FLOAT16 through F16C, as dml_half_to_float). */
static inline float lanes_load_one(const channel_lanes* v, uint64_t offset) {
    return v->half ? _cvtsh_ss(((const uint16_t*)v->base)[offset]) : ((const float*)v->base)[offset];
}

/* The bits of lanes_load_bits as FLOAT32 values. */
static inline __m256 lanes_bits_to_float(const channel_lanes* v, __m256i bits) {
    return v->half ? _mm256_cvtph_ps(lanes_pack_halves(bits)) : _mm256_castsi256_ps(bits);
}

static inline __m256 lanes_load(const channel_lanes* v, uint64_t offset, uint32_t lanes) {
    return lanes_bits_to_float(v, lanes_load_bits(v, offset, lanes));
}

/* How a hot loop reads 8 channels: a compile-time constant, so that each
 * loop is specialized (contiguous FLOAT32 or FLOAT16 loads of 8 lanes, or
 * the general lanes_load for gathers and partial blocks). */
typedef enum load_mode { LOAD_GENERAL, LOAD_F32, LOAD_F16 } load_mode;

static inline __attribute__((always_inline)) __m256 lanes_load_as(const channel_lanes* v, uint64_t offset,
                                                                  uint32_t lanes, load_mode mode) {
    if (mode == LOAD_F32) return _mm256_loadu_ps((const float*)v->base + offset);
    if (mode == LOAD_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)((const uint16_t*)v->base + offset)));
    return lanes_load(v, offset, lanes);
}

/* Stores raw bits (FLOAT16: the low 16 bits of each lane). */
static inline void lanes_store_bits(const channel_lanes* v, uint64_t offset, uint32_t lanes, __m256i bits) {
    if (lanes == ROI_LANES && v->contiguous) {
        if (v->half)
            _mm_storeu_si128((__m128i*)((uint16_t*)v->base + offset), lanes_pack_halves(bits));
        else
            _mm256_storeu_si256((__m256i*)((float*)v->base + offset), bits);
        return;
    }
    uint32_t values[ROI_LANES];
    _mm256_storeu_si256((__m256i*)values, bits);
    for (uint32_t i = 0; i < lanes; i++) {
        uint64_t at = offset + i * v->channel_stride;
        if (v->half)
            ((uint16_t*)v->base)[at] = (uint16_t)values[i];
        else
            ((uint32_t*)v->base)[at] = values[i];
    }
}

/* Stores FLOAT32 values; FLOAT16 rounds to nearest even, as dml_float_to_half. */
static inline void lanes_store(const channel_lanes* v, uint64_t offset, uint32_t lanes, __m256 value) {
    if (lanes == ROI_LANES && v->contiguous) {
        if (v->half)
            _mm_storeu_si128((__m128i*)((uint16_t*)v->base + offset),
                             _mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        else
            _mm256_storeu_ps((float*)v->base + offset, value);
        return;
    }
    if (v->half) { /* F16C rounds as dml_float_to_half does, NaN included (tested bit for bit) */
        __m128i halves = _mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        lanes_store_bits(v, offset, lanes, _mm256_cvtepu16_epi32(halves));
        return;
    }
    float values[ROI_LANES];
    _mm256_storeu_ps(values, value);
    for (uint32_t i = 0; i < lanes; i++)
        ((float*)v->base)[offset + i * v->channel_stride] = values[i];
}

/* Transposes 8 vectors of 8 in place (r[i][j] becomes r[j][i]): the
 * classic unpack, shuffle, then swap of 128-bit halves. */
static inline void transpose_8x8(__m256 r[ROI_LANES]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* Bins [b0, b0 + 8) of results[bins][8] transposed: block[i] holds channel
 * c0 + i's, 0 past the last bin. */
static inline void bins_by_channel(const uint32_t* results, uint32_t b0, uint32_t bins, __m256 block[ROI_LANES]) {
    for (uint32_t j = 0; j < ROI_LANES; j++)
        block[j] = b0 + j < bins ? _mm256_loadu_ps((const float*)results + (uint64_t)(b0 + j) * ROI_LANES)
                                 : _mm256_setzero_ps();
    transpose_8x8(block);
}

/* Writes the results of one ROI's bins in 8 channels, results[bin][8] in
 * raw bits (FLOAT16 in the low half) for bins = out_height x out_width, to
 * channels [c0, c0 + lanes) of `out` from `first`, the offset of (r, c0, 0,
 * 0): 8 bins at a time transposed to 8 runs of one channel each, stored as
 * vectors where a channel's bins are contiguous (packed NCHW output, or one row),
 * element by element elsewhere and for the last bins. */
static inline void lanes_write_bins(const channel_lanes* out, uint64_t first, const uint64_t strides[4],
                                    uint32_t out_height, uint32_t out_width, uint32_t lanes, const uint32_t* results) {
    uint32_t bins = out_height * out_width;
    bool packed = strides[3] == 1 && (out_height == 1 || strides[2] == out_width);
    for (uint32_t b0 = 0; b0 < bins; b0 += ROI_LANES) {
        uint32_t count = bins - b0 < ROI_LANES ? bins - b0 : ROI_LANES;
        __m256 block[ROI_LANES];
        bins_by_channel(results, b0, bins, block);
        for (uint32_t i = 0; i < lanes; i++) {
            uint64_t at = first + i * strides[1];
            __m256i bits = _mm256_castps_si256(block[i]);
            if (packed && count == ROI_LANES) {
                if (out->half)
                    _mm_storeu_si128((__m128i*)((uint16_t*)out->base + at + b0), lanes_pack_halves(bits));
                else
                    _mm256_storeu_si256((__m256i*)((uint32_t*)out->base + at + b0), bits);
                continue;
            }
            uint32_t values[ROI_LANES];
            _mm256_storeu_si256((__m256i*)values, bits);
            for (uint32_t k = 0; k < count; k++) {
                uint32_t bin = b0 + k;
                uint64_t offset =
                    packed ? at + bin : at + (bin / out_width) * strides[2] + (bin % out_width) * strides[3];
                if (out->half)
                    ((uint16_t*)out->base)[offset] = (uint16_t)values[k];
                else
                    ((uint32_t*)out->base)[offset] = values[k];
            }
        }
    }
}

/* Whether the outputs of 8 channels, out_height x out_width each, are one
 * contiguous run (packed NCHW output): lanes_stream_bins' case. */
static inline bool lanes_bins_contiguous(const uint64_t strides[4], uint32_t out_height, uint32_t out_width,
                                         uint32_t lanes) {
    return lanes == ROI_LANES && strides[3] == 1 && (out_height == 1 || strides[2] == out_width) &&
           strides[1] == (uint64_t)out_height * out_width;
}

/* Copies `bytes` from `from` to `to`, the cache lines it fills whole with
 * non-temporal stores (no read of the line for ownership, no eviction of
 * the input from the caches), the partial lines at the ends with plain
 * stores. The caller fences (_mm_sfence) before its results are read. */
static inline void stream_bytes(char* to, const char* from, uint64_t bytes) {
    uint64_t head = (64 - ((uintptr_t)to & 63)) & 63, at;
    if (head > bytes) head = bytes;
    memcpy(to, from, head);
    for (at = head; at + 64 <= bytes; at += 64) {
        _mm256_stream_si256((__m256i*)(to + at), _mm256_loadu_si256((const __m256i*)(from + at)));
        _mm256_stream_si256((__m256i*)(to + at + 32), _mm256_loadu_si256((const __m256i*)(from + at + 32)));
    }
    memcpy(to + at, from + at, bytes - at);
}

/* Whether an output is streamed (DML_CPU_STREAM_BYTES; a ROI pooling or ROI
 * align output of 512 ROIs x 256 channels x 7 x 7 is 25 MB). */
static inline bool roi_output_streams(const dml_tensor* output) {
    return output->element_count * dml_tensor_element_size(output) >= DML_CPU_STREAM_BYTES;
}

/* Bytes of lanes_stream_bins' staging area for `bins` bins: 8 channels'
 * runs and one vector of slack. */
static inline uint64_t lanes_staging_bytes(uint64_t bins) { return (bins + 1) * ROI_LANES * sizeof(uint32_t); }

/* lanes_write_bins where lanes_bins_contiguous holds, for outputs no cache
 * keeps (a dispatch's output of tens of MB): the 8 channels' runs of bins
 * transposed into `staged` (lanes_staging_bytes), then streamed to the
 * output in one piece (stream_bytes). Blocks of 8 bins go last to first:
 * a partial block's vector spills into the next channel's first block,
 * which is written after it. */
static inline void lanes_stream_bins(const channel_lanes* out, uint64_t first, uint32_t bins, const uint32_t* results,
                                     void* staged) {
    uint64_t element = out->half ? 2 : 4;
    for (uint32_t b0 = (bins - 1) / ROI_LANES * ROI_LANES;; b0 -= ROI_LANES) {
        __m256 block[ROI_LANES];
        bins_by_channel(results, b0, bins, block);
        for (uint32_t i = 0; i < ROI_LANES; i++) {
            uint64_t at = (uint64_t)i * bins + b0;
            __m256i bits = _mm256_castps_si256(block[i]);
            if (out->half)
                _mm_storeu_si128((__m128i*)((uint16_t*)staged + at), lanes_pack_halves(bits));
            else
                _mm256_storeu_si256((__m256i*)((uint32_t*)staged + at), bits);
        }
        if (b0 == 0) break;
    }
    stream_bytes((char*)out->base + first * element, staged, (uint64_t)ROI_LANES * bins * element);
}

/* Announces lanes_write_bins' stores (packed NCHW output), at the start of
 * a ROI's work: the output's cache lines are then fetched for writing while
 * the ROI is computed instead of stalling the stores (1 thread: ROI
 * pooling 10.6 -> 8.4 ms, ROI align forward 13.2 -> 11.1 ms). */
static inline void lanes_prefetch_bins(const channel_lanes* out, uint64_t first, const uint64_t strides[4],
                                       uint32_t out_height, uint32_t out_width, uint32_t lanes) {
    if (strides[3] != 1 || strides[2] != out_width) return;
    uint64_t element = out->half ? 2 : 4, bytes = (uint64_t)out_height * out_width * element;
    for (uint32_t i = 0; i < lanes; i++) {
        const char* run = (const char*)out->base + (first + i * strides[1]) * element;
        for (uint64_t at = 0; at < bytes; at += 64)
            __builtin_prefetch(run + at, 1);
        __builtin_prefetch(run + bytes - 1, 1);
    }
}

/* FLOAT32 values as the bits lanes_write_bins stores: FLOAT16 rounded to
 * nearest even (as dml_float_to_half). */
static inline __m256i lanes_value_bits(const channel_lanes* v, __m256 value) {
    return v->half ? _mm256_cvtepu16_epi32(_mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
                   : _mm256_castps_si256(value);
}

/* Task `task` of rois x blocks (roi, 8-channel block) tasks, in the order
 * that keeps what they read in cache: channels-last, every block of a ROI in
 * turn (they share its pixels' cache lines); NCHW, every ROI of a block in
 * turn (the block's 8 planes stay in L2 while its ROIs are computed). */
typedef struct roi_task {
    uint32_t roi, c0;
} roi_task;

static inline roi_task roi_task_at(int64_t task, uint32_t rois, uint32_t blocks, bool channels_last) {
    roi_task t;
    if (channels_last) {
        t.roi = (uint32_t)(task / blocks);
        t.c0 = (uint32_t)(task % blocks) * ROI_LANES;
    } else {
        t.roi = (uint32_t)(task % rois);
        t.c0 = (uint32_t)(task / rois) * ROI_LANES;
    }
    return t;
}

/* The max rule of every ROI reduction per lane (dml_nan_aware_greater): value >
 * best, or best is NaN and value is not. */
static inline __m256 lanes_greater(__m256 value, __m256 best) {
    __m256 value_nan = _mm256_cmp_ps(value, value, _CMP_UNORD_Q), best_nan = _mm256_cmp_ps(best, best, _CMP_UNORD_Q);
    return _mm256_or_ps(_mm256_cmp_ps(value, best, _CMP_GT_OQ), _mm256_andnot_ps(value_nan, best_nan));
}

/* Eight FLOAT64 lanes: the FLOAT64 sums of RA-16, one per channel. One
 * AVX-512 vector where the file is compiled for it (_avx512.c), two AVX2
 * vectors otherwise; the same IEEE operations either way. */
#ifdef __AVX512F__
typedef __m512d lanes_f64;
static inline lanes_f64 lanes_f64_zero(void) { return _mm512_setzero_pd(); }
static inline lanes_f64 lanes_f64_load(const double* from) { return _mm512_loadu_pd(from); }
static inline void lanes_f64_store(double* to, lanes_f64 sum) { _mm512_storeu_pd(to, sum); }
/* sum + (double)value, lane by lane. */
static inline lanes_f64 lanes_f64_add(lanes_f64 sum, __m256 value) {
    return _mm512_add_pd(sum, _mm512_cvtps_pd(value));
}
/* (float)sum and (float)(sum / divisor), lane by lane. */
static inline __m256 lanes_f64_to_float(lanes_f64 sum) { return _mm512_cvtpd_ps(sum); }
static inline __m256 lanes_f64_quotient(lanes_f64 sum, double divisor) {
    return _mm512_cvtpd_ps(_mm512_div_pd(sum, _mm512_set1_pd(divisor)));
}
#else
typedef struct lanes_f64 {
    __m256d low, high;
} lanes_f64;
static inline lanes_f64 lanes_f64_zero(void) { return (lanes_f64){_mm256_setzero_pd(), _mm256_setzero_pd()}; }
static inline lanes_f64 lanes_f64_load(const double* from) {
    return (lanes_f64){_mm256_loadu_pd(from), _mm256_loadu_pd(from + 4)};
}
static inline void lanes_f64_store(double* to, lanes_f64 sum) {
    _mm256_storeu_pd(to, sum.low);
    _mm256_storeu_pd(to + 4, sum.high);
}
static inline lanes_f64 lanes_f64_add(lanes_f64 sum, __m256 value) {
    return (lanes_f64){_mm256_add_pd(sum.low, _mm256_cvtps_pd(_mm256_castps256_ps128(value))),
                       _mm256_add_pd(sum.high, _mm256_cvtps_pd(_mm256_extractf128_ps(value, 1)))};
}
static inline __m256 lanes_f64_to_float(lanes_f64 sum) {
    return _mm256_set_m128(_mm256_cvtpd_ps(sum.high), _mm256_cvtpd_ps(sum.low));
}
static inline __m256 lanes_f64_quotient(lanes_f64 sum, double divisor) {
    __m256d by = _mm256_set1_pd(divisor);
    return _mm256_set_m128(_mm256_cvtpd_ps(_mm256_div_pd(sum.high, by)), _mm256_cvtpd_ps(_mm256_div_pd(sum.low, by)));
}
#endif

/* One {N, C, H, W} tensor's strides and data (NULL when absent). */
typedef struct tensor_view {
    uint64_t strides[4];
    channel_lanes lanes;
} tensor_view;

static inline tensor_view tensor_view_make(const dml_tensor* tensor, const void* data) {
    tensor_view v;
    roi_copy_strides(v.strides, tensor);
    v.lanes = channel_lanes_make(data, tensor->strides[1], tensor->type == DML_TENSOR_DATA_TYPE_FLOAT16);
    return v;
}

static inline uint64_t view_offset(const tensor_view* v, uint64_t n, uint64_t c, uint64_t y, uint64_t x) {
    return n * v->strides[0] + c * v->strides[1] + y * v->strides[2] + x * v->strides[3];
}

/* A box of pixels: [x0, x1) x [y0, y1). */
typedef struct pixel_box {
    uint32_t x0, x1, y0, y1;
} pixel_box;

/* NCHW: copies the box of 8 channels at `at` into tile[y][x][8] (FLOAT32,
 * channels-last), 8x8 blocks transposed in registers where rows are packed. */
static inline void transpose_to_tile(const tensor_view* in, uint64_t at, pixel_box box, float* tile) {
    uint32_t width = box.x1 - box.x0;
    const channel_lanes* v = &in->lanes;
    for (uint32_t y = box.y0; y < box.y1; y++) {
        float* row = tile + (uint64_t)(y - box.y0) * width * ROI_LANES;
        uint64_t source = at + y * in->strides[2] + box.x0 * in->strides[3];
        uint32_t x = 0;
        if (in->strides[3] == 1) {
            for (; x + ROI_LANES <= width; x += ROI_LANES) {
                __m256 r[ROI_LANES];
                for (int i = 0; i < ROI_LANES; i++) {
                    uint64_t at_row = source + i * v->channel_stride + x;
                    r[i] = v->half
                               ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)((const uint16_t*)v->base + at_row)))
                               : _mm256_loadu_ps((const float*)v->base + at_row);
                }
                transpose_8x8(r);
                float* out = row + (uint64_t)x * ROI_LANES;
                for (int i = 0; i < ROI_LANES; i++)
                    _mm256_storeu_ps(out + i * ROI_LANES, r[i]);
            }
        }
        for (; x < width; x++)
            for (int i = 0; i < ROI_LANES; i++)
                row[(uint64_t)x * ROI_LANES + i] =
                    lanes_load_one(v, source + i * v->channel_stride + x * in->strides[3]);
    }
}

#endif
