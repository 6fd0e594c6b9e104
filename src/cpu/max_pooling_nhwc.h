/* What the channels-last max pooling fast paths of every ISA share
 * (max_pooling_avx2.c, max_pooling_nhwc_avx512.c): the geometry of windows
 * over tensors whose C stride is 1 (NHWC, NDHWC), the plans, and the loops
 * over output positions that call each ISA's per-position kernel. Plain C:
 * each ISA's file includes it with its own flags. */
#ifndef DML_CPU_MAX_POOLING_NHWC_H
#define DML_CPU_MAX_POOLING_NHWC_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <xmmintrin.h>

#include "../ops/max_pooling_rules.h"
#include "cpu.h"

/* ---- Disjoint windows (the write-once gradients, NCHW and channels-last) ---- */

/* Windows that never share an input element (each dimension's stride at
 * least its window, undilated: 2x2/2): every element of OutputGradient can
 * be written once, straight from its window's argmax, with no accumulator. */
static inline bool disjoint_windows(const dml_pooling_params* p) {
    for (int i = 0; i < 3; i++)
        if (p->dilations[i] != 1 || p->strides[i] < p->window[i]) return false;
    return true;
}

/* Whether a coordinate of spatial dimension `dim` (input size `size`) lies
 * in no window (W odd, padding), windows being disjoint. */
static inline bool some_coordinate_in_no_window(const dml_pooling_params* p, uint32_t dim, uint32_t size,
                                                uint32_t out_size) {
    uint64_t covered = 0; /* the sum of the windows' taps */
    for (uint32_t o = 0; o < out_size; o++) {
        dml_pool_taps r = dml_pool_window_taps(p, dim, o, size);
        covered += r.end - r.begin;
    }
    return covered < size;
}

/* Whether input coordinate x of spatial dimension `dim` lies in a window
 * (disjoint, undilated windows). */
static inline bool in_a_window(const dml_pooling_params* p, uint32_t dim, uint32_t x, uint32_t out_size) {
    uint64_t padded = (uint64_t)x + p->start_padding[dim];
    return padded % p->strides[dim] < p->window[dim] && padded / p->strides[dim] < out_size;
}

/* ---- Channels-last geometry ---- */

typedef struct nhwc_geometry {
    dml_pool_view in;
    dml_pool_view out; /* Output (forward) or InputGradient (gradient): the windows */
    bool half;
    uint32_t channels;
} nhwc_geometry;

/* The taps of one output position, in increasing order. */
typedef struct nhwc_window {
    dml_pool_taps r[3];
    uint32_t taps; /* how many: the product of the three ranges */
} nhwc_window;

static inline nhwc_window nhwc_window_at(const nhwc_geometry* g, const dml_pooling_params* p, uint32_t od, uint32_t oh,
                                         uint32_t ow) {
    nhwc_window w;
    w.r[0] = dml_pool_window_taps(p, 0, od, g->in.sizes[2]);
    w.r[1] = dml_pool_window_taps(p, 1, oh, g->in.sizes[3]);
    w.r[2] = dml_pool_window_taps(p, 2, ow, g->in.sizes[4]);
    w.taps = (w.r[0].end - w.r[0].begin) * (w.r[1].end - w.r[1].begin) * (w.r[2].end - w.r[2].begin);
    return w;
}

/* Output position `at` of the flattened N * OD * OH * OW of view o. */
typedef struct nhwc_position {
    uint32_t n, od, oh, ow;
} nhwc_position;

static inline nhwc_position nhwc_position_at(const dml_pool_view* o, uint64_t at) {
    nhwc_position x;
    x.ow = (uint32_t)(at % o->sizes[4]);
    at /= o->sizes[4];
    x.oh = (uint32_t)(at % o->sizes[3]);
    at /= o->sizes[3];
    x.od = (uint32_t)(at % o->sizes[2]);
    x.n = (uint32_t)(at / o->sizes[2]);
    return x;
}

/* The element offset within the image and the plane position of input
 * element (d, h, w). */
static inline int64_t nhwc_tap_offset(const nhwc_geometry* g, int64_t d, int64_t h, int64_t w) {
    return d * (int64_t)g->in.strides[2] + h * (int64_t)g->in.strides[3] + w * (int64_t)g->in.strides[4];
}

static inline int32_t nhwc_tap_position(const nhwc_geometry* g, int64_t d, int64_t h, int64_t w) {
    return (int32_t)((d * g->in.sizes[3] + h) * g->in.sizes[4] + w);
}

/* The input coordinate of tap k along dimension dim of window w. */
static inline int64_t nhwc_tap_coordinate(const dml_pooling_params* p, const nhwc_window* w, int dim, uint32_t k) {
    return w->r[dim].start + (int64_t)k * p->dilations[dim];
}

/* Calls TAP(offset, position) for every tap of window w in increasing
 * order: the tap's element offset within the image and its plane position. */
#define FOR_EACH_NHWC_TAP(g, p, w, TAP)                                                                                \
    for (uint32_t kd_ = (w).r[0].begin; kd_ < (w).r[0].end; kd_++) {                                                   \
        int64_t d_ = nhwc_tap_coordinate(p, &(w), 0, kd_);                                                             \
        for (uint32_t kh_ = (w).r[1].begin; kh_ < (w).r[1].end; kh_++) {                                               \
            int64_t h_ = nhwc_tap_coordinate(p, &(w), 1, kh_);                                                         \
            for (uint32_t kw_ = (w).r[2].begin; kw_ < (w).r[2].end; kw_++) {                                           \
                int64_t w_ = nhwc_tap_coordinate(p, &(w), 2, kw_);                                                     \
                TAP(nhwc_tap_offset(g, d_, h_, w_), nhwc_tap_position(g, d_, h_, w_));                                 \
            }                                                                                                          \
        }                                                                                                              \
    }

/* The offset and plane position of window w's first tap (it has one). */
static inline void nhwc_first_tap(const nhwc_geometry* g, const dml_pooling_params* p, const nhwc_window* w,
                                  int64_t* offset, int32_t* position) {
    int64_t d = nhwc_tap_coordinate(p, w, 0, w->r[0].begin), h = nhwc_tap_coordinate(p, w, 1, w->r[1].begin);
    int64_t x = nhwc_tap_coordinate(p, w, 2, w->r[2].begin);
    *offset = nhwc_tap_offset(g, d, h, x);
    *position = nhwc_tap_position(g, d, h, x);
}

/* A FLOAT16 NaN's own bits (FLOAT32 lanes keep its payload but not whether
 * it was signaling): channel `channel` of the image at plane position `at`. */
static inline uint16_t nhwc_half_at_position(const nhwc_geometry* g, const char* image, uint32_t at, uint32_t channel) {
    uint32_t w = at % g->in.sizes[4], h = at / g->in.sizes[4] % g->in.sizes[3];
    uint32_t d = at / g->in.sizes[4] / g->in.sizes[3];
    return ((const uint16_t*)image)[nhwc_tap_offset(g, d, h, w) + channel];
}

/* How far ahead of each tap's load the same row of the image is fetched:
 * the hardware's prefetchers leave the channels-last paths waiting for
 * memory (a window reads a few rows, C values at each of its columns);
 * 4 KiB ahead halves their time here (NCHW rows gain nothing from it). A
 * prefetch never faults, past the end of the tensor included. */
enum { NHWC_PREFETCH_AHEAD = 4096 };

/* Whether the problem is one the channels-last path handles: FLOAT32 or
 * FLOAT16, C stride 1 in every tensor given, plane positions fitting int32. */
static inline bool nhwc_geometry_init(nhwc_geometry* g, const DMLOperator* op, const dml_tensor* windows,
                                      const dml_tensor* const* channels_last, int count) {
    const dml_tensor* input = &op->inputs[DML_POOL_INPUT].tensor;
    if (input->type != DML_TENSOR_DATA_TYPE_FLOAT32 && input->type != DML_TENSOR_DATA_TYPE_FLOAT16) return false;
    g->in = dml_pool_view_5d(input);
    g->out = dml_pool_view_5d(windows);
    g->half = input->type == DML_TENSOR_DATA_TYPE_FLOAT16;
    g->channels = g->in.sizes[1];
    if (g->in.strides[1] != 1 || g->out.strides[1] != 1) return false;
    for (int i = 0; i < count; i++)
        if (dml_pool_view_5d(channels_last[i]).strides[1] != 1) return false;
    uint64_t plane = (uint64_t)g->in.sizes[2] * g->in.sizes[3] * g->in.sizes[4];
    return plane < ((uint64_t)1 << 28);
}

/* ---- Forward ---- */

typedef struct nhwc_forward_plan {
    nhwc_geometry g;
    dml_pool_view idx;
    bool has_indices, indices_64;
    int64_t positions; /* N * OD * OH * OW */
    bool stream;       /* nhwc_forward_streams */
    int threads;
} nhwc_forward_plan;

/* Whether every position's channels of view v are whole 64-byte lines at
 * offsets that are multiples of 64 bytes from the tensor's start. */
static inline bool nhwc_whole_lines(const dml_pool_view* v, uint32_t channels, size_t element) {
    if (channels * element % 64 != 0) return false;
    for (int i = 0; i < 5; i++)
        if (i != 1 && v->strides[i] * element % 64 != 0) return false;
    return true;
}

/* Whether the forward's outputs may be streamed (DML_CPU_STREAM_BYTES):
 * far larger than the caches, and written in whole lines, each by one store
 * or two (a line streamed in parts or partly stored plainly is slow: the
 * gradient's partial lines measured twice as slow streamed). The AVX-512
 * path streams them where the buffers are 64-byte aligned. */
static inline bool nhwc_forward_streams(const nhwc_forward_plan* f) {
    size_t element = f->g.half ? 2 : 4, index_element = f->indices_64 ? 8 : 4;
    uint64_t bytes = (uint64_t)f->positions * f->g.channels * (element + (f->has_indices ? index_element : 0));
    return bytes >= DML_CPU_STREAM_BYTES && nhwc_whole_lines(&f->g.out, f->g.channels, element) &&
           (!f->has_indices || nhwc_whole_lines(&f->idx, f->g.channels, index_element));
}

static inline HRESULT nhwc_plan_forward(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                                        dml_plan* plan) {
    (void)flags;
    nhwc_forward_plan f;
    memset(&f, 0, sizeof f);
    const dml_tensor* indices =
        op->output_count > DML_POOL_OUTPUT_INDICES ? &op->outputs[DML_POOL_OUTPUT_INDICES].tensor : NULL;
    f.has_indices = indices && indices->present;
    if (!nhwc_geometry_init(&f.g, op, &op->outputs[DML_POOL_OUTPUT].tensor, &indices, f.has_indices ? 1 : 0))
        return S_FALSE;
    if (f.has_indices) {
        f.idx = dml_pool_view_5d(indices);
        f.indices_64 = indices->type == DML_TENSOR_DATA_TYPE_UINT64;
    }
    const dml_pool_view* o = &f.g.out;
    f.positions = (int64_t)o->sizes[0] * o->sizes[2] * o->sizes[3] * o->sizes[4];
    f.stream = nhwc_forward_streams(&f);
    const dml_pooling_params* p = op->params;
    uint64_t cost = (uint64_t)o->sizes[1] * p->window[0] * p->window[1] * p->window[2];
    f.threads = dml_cpu_threads_for((int)device->threads, (uint64_t)f.positions,
                                    dml_cpu_items_per_thread(cost, DML_CPU_MIN_WORK_PER_THREAD));
    nhwc_forward_plan* state = dml_plan_state(plan, sizeof *state);
    if (state == NULL) return E_OUTOFMEMORY;
    *state = f;
    return S_OK;
}

/* One output position's channels: `image` is its input image, `out` and
 * `indices` (NULL: none) its first output and index element. */
typedef void (*nhwc_forward_position_fn)(const nhwc_forward_plan* f, const dml_pooling_params* p, const char* image,
                                         char* out, char* indices, uint32_t n, const nhwc_window* w);

/* Every output position, split over the plan's threads. */
static inline void nhwc_run_forward(const dml_kernel_args* args, nhwc_forward_position_fn position) {
    const nhwc_forward_plan* f = DML_PLAN_STATE(args, nhwc_forward_plan);
    const nhwc_geometry* g = &f->g;
    const dml_pooling_params* p = args->op->params;
    const char* input = args->inputs[DML_POOL_INPUT];
    char* output = args->outputs[DML_POOL_OUTPUT];
    char* indices = f->has_indices ? args->outputs[DML_POOL_OUTPUT_INDICES] : NULL;
    size_t element = g->half ? 2 : 4, index_element = f->indices_64 ? 8 : 4;
    const dml_pool_view* o = &g->out;
#pragma omp parallel num_threads(f->threads)
    {
#pragma omp for schedule(dynamic, dml_cpu_chunk((uint64_t)f->positions, f->threads)) nowait
        for (int64_t at = 0; at < f->positions; at++) {
            nhwc_position x = nhwc_position_at(o, (uint64_t)at);
            nhwc_window w = nhwc_window_at(g, p, x.od, x.oh, x.ow);
            char* out =
                output +
                (x.n * o->strides[0] + x.od * o->strides[2] + x.oh * o->strides[3] + x.ow * o->strides[4]) * element;
            char* idx = indices ? indices + (x.n * f->idx.strides[0] + x.od * f->idx.strides[2] +
                                             x.oh * f->idx.strides[3] + x.ow * f->idx.strides[4]) *
                                                index_element
                                : NULL;
            position(f, p, input + x.n * g->in.strides[0] * element, out, idx, x.n, &w);
        }
        _mm_sfence(); /* streamed stores (if any) are visible before the dispatch returns */
    }
}

/* ---- Gradient ---- */

/* The gradient, channels-last: tasks of (image, chunk of channels), each
 * writing every element of its part of OutputGradient once, input row by
 * input row: per lane +0 plus, in increasing output order, InputGradient of
 * each window that contains the element and whose argmax it is. That is
 * the generic kernel's sum bit for bit (it adds in the same order; the +0
 * skipped for the other windows leaves a sum that started at +0 unchanged),
 * with no accumulator to clear, re-read and copy. The argmax positions of
 * the output rows an input row needs are computed once into a band in the
 * temporary resource, slot (od % band_d, oh % band_h): the output rows whose
 * windows contain an input row are consecutive up to that many, so they
 * never share a slot. Disjoint windows need no band: each window writes
 * its own taps (nhwc_write_once). */
typedef struct nhwc_grad_plan {
    nhwc_geometry g;
    dml_pool_view grad_out;
    bool write_once;   /* disjoint windows: nhwc_write_once, no band */
    bool stream;       /* write_once: OutputGradient far larger than the caches, in whole lines (AVX-512 streams it) */
    bool uncovered[3]; /* write_once: some coordinate of D, H, W lies in no window */
    int64_t windows;   /* write_once: N * OD * OH * OW */
    uint32_t chunks;   /* per image */
    uint32_t pitch;    /* int32 per output position in a band row: the chunk rounded up to 8 */
    uint32_t band_d, band_h;
    uint64_t band_tags; /* bytes of the band's slot tags, 64-aligned; the rows follow */
    uint64_t band_size; /* bytes per thread */
    int64_t tasks;
    int threads;
} nhwc_grad_plan;

/* The most band rows a task keeps; windows that need more (tall windows
 * over small strides) decline to the generic kernel. */
enum { NHWC_MAX_BAND_SLOTS = 64 };

/* Channels per task of the band gradient (whole pixels of most layers: each
 * pass over an image reads whole cache lines). */
enum { NHWC_GRAD_CHUNK = 256 };

/* How many consecutive output coordinates along `dim` can have windows
 * containing one input coordinate. */
static inline uint32_t windows_per_coordinate(const dml_pooling_params* p, uint32_t dim) {
    return (uint32_t)((uint64_t)(p->window[dim] - 1) * p->dilations[dim] / p->strides[dim] + 1);
}

/* The gradient's plan (false: declined, the generic kernel takes it). */
static inline bool nhwc_grad_plan_of(const DMLOperator* op, const DMLDevice* device, nhwc_grad_plan* gp) {
    memset(gp, 0, sizeof *gp);
    const dml_tensor* output_gradient = &op->outputs[DML_POOL_OUTPUT].tensor;
    if (!nhwc_geometry_init(&gp->g, op, &op->inputs[DML_POOL_INPUT_GRADIENT].tensor, &output_gradient, 1)) return false;
    gp->grad_out = dml_pool_view_5d(output_gradient);
    const dml_pooling_params* p = op->params;
    const dml_pool_view* o = &gp->g.out;
    uint32_t chunk = gp->g.channels < NHWC_GRAD_CHUNK ? gp->g.channels : NHWC_GRAD_CHUNK;
    gp->chunks = (gp->g.channels + chunk - 1) / chunk;
    gp->pitch = (chunk + 7) / 8 * 8;
    gp->tasks = (int64_t)gp->g.in.sizes[0] * gp->chunks;
    gp->band_d = windows_per_coordinate(p, 0);
    gp->band_h = windows_per_coordinate(p, 1);
    uint64_t slots = (uint64_t)gp->band_d * gp->band_h;
    gp->band_tags = (slots * sizeof(int64_t) + 63) / 64 * 64;
    gp->band_size = gp->band_tags + slots * o->sizes[4] * gp->pitch * sizeof(int32_t);
    uint64_t plane = (uint64_t)gp->g.in.sizes[2] * gp->g.in.sizes[3] * gp->g.in.sizes[4];
    uint64_t cost = plane * chunk + (uint64_t)o->sizes[2] * o->sizes[3] * o->sizes[4] * chunk * p->window[0] *
                                        p->window[1] * p->window[2];
    gp->threads = dml_cpu_threads_for((int)device->threads, (uint64_t)gp->tasks,
                                      dml_cpu_items_per_thread(cost, DML_CPU_MIN_WORK_PER_THREAD));
    /* Disjoint windows over the same spatial strides in Input and OutputGradient: write once. */
    gp->write_once = disjoint_windows(p) && gp->grad_out.strides[2] == gp->g.in.strides[2] &&
                     gp->grad_out.strides[3] == gp->g.in.strides[3] && gp->grad_out.strides[4] == gp->g.in.strides[4];
    if (gp->write_once) {
        for (uint32_t dim = 0; dim < 3; dim++)
            gp->uncovered[dim] = some_coordinate_in_no_window(p, dim, gp->g.in.sizes[2 + dim], o->sizes[2 + dim]);
        gp->windows = (int64_t)o->sizes[0] * o->sizes[2] * o->sizes[3] * o->sizes[4];
        size_t element = gp->g.half ? 2 : 4;
        gp->stream = (uint64_t)gp->g.in.sizes[0] * plane * gp->g.channels * element >= DML_CPU_STREAM_BYTES &&
                     nhwc_whole_lines(&gp->grad_out, gp->g.channels, element);
        gp->threads = dml_cpu_threads_for(
            (int)device->threads, (uint64_t)gp->windows,
            dml_cpu_items_per_thread((uint64_t)gp->g.channels * p->window[0] * p->window[1] * p->window[2],
                                     DML_CPU_MIN_WORK_PER_THREAD));
    }
    return gp->write_once || slots <= NHWC_MAX_BAND_SLOTS;
}

/* Stores the plan in `plan` with its temporary resource: a band per thread. */
static inline HRESULT nhwc_grad_plan_store(const nhwc_grad_plan* gp, dml_plan* plan) {
    nhwc_grad_plan* state = dml_plan_state(plan, sizeof *state);
    if (state == NULL) return E_OUTOFMEMORY;
    *state = *gp;
    plan->temporary_size = gp->write_once ? 0 : (uint64_t)gp->threads * gp->band_size;
    return S_OK;
}

/* Zeroes the positions of one image that lie in no window. */
static inline void zero_uncovered_nhwc(const nhwc_grad_plan* gp, const dml_pooling_params* p, char* dx_image,
                                       uint32_t d, uint32_t h) {
    const nhwc_geometry* g = &gp->g;
    const dml_pool_view* x = &gp->grad_out;
    const size_t element = g->half ? 2 : 4;
    char* row = dx_image + (d * x->strides[2] + h * x->strides[3]) * element;
    bool row_covered = in_a_window(p, 0, d, g->out.sizes[2]) && in_a_window(p, 1, h, g->out.sizes[3]);
    for (uint32_t w = 0; w < g->in.sizes[4]; w++)
        if (!row_covered || !in_a_window(p, 2, w, g->out.sizes[4]))
            memset(row + w * x->strides[4] * element, 0, g->channels * element);
}

/* One disjoint window's taps of OutputGradient: `image` and `dx_image` are
 * the input and OutputGradient images, `dy` the window's InputGradient. */
typedef void (*nhwc_write_once_window_fn)(const nhwc_grad_plan* gp, const dml_pooling_params* p, const char* image,
                                          const char* dy, char* dx_image, const nhwc_window* w);

/* OutputGradient of disjoint windows: each window writes its taps once
 * (+0 + dy at the argmax, the generic one-term sum, and +0 elsewhere), then
 * the positions in no window are zeroed. */
static inline void nhwc_write_once(const nhwc_grad_plan* gp, const dml_pooling_params* p, const dml_kernel_args* args,
                                   nhwc_write_once_window_fn window) {
    const nhwc_geometry* g = &gp->g;
    const dml_pool_view* o = &g->out;
    const size_t element = g->half ? 2 : 4;
    const char* input = args->inputs[DML_POOL_INPUT];
    const char* input_gradient = args->inputs[DML_POOL_INPUT_GRADIENT];
    char* output_gradient = args->outputs[DML_POOL_OUTPUT];
    bool some_uncovered = gp->uncovered[0] || gp->uncovered[1] || gp->uncovered[2];
    int64_t rows = (int64_t)g->in.sizes[0] * g->in.sizes[2] * g->in.sizes[3]; /* N * D * H */
#pragma omp parallel num_threads(gp->threads)
    {
#pragma omp for schedule(dynamic, dml_cpu_chunk((uint64_t)gp->windows, gp->threads)) nowait
        for (int64_t at = 0; at < gp->windows; at++) {
            nhwc_position x = nhwc_position_at(o, (uint64_t)at);
            nhwc_window w = nhwc_window_at(g, p, x.od, x.oh, x.ow);
            if (w.taps == 0) continue; /* an all-padding window: no taps */
            window(gp, p, input + x.n * g->in.strides[0] * element,
                   input_gradient +
                       (x.n * o->strides[0] + x.od * o->strides[2] + x.oh * o->strides[3] + x.ow * o->strides[4]) *
                           element,
                   output_gradient + x.n * gp->grad_out.strides[0] * element, &w);
        }
        if (some_uncovered) {
#pragma omp for schedule(dynamic, dml_cpu_chunk((uint64_t)rows, gp->threads))
            for (int64_t row = 0; row < rows; row++) {
                uint32_t h = (uint32_t)((uint64_t)row % g->in.sizes[3]);
                uint64_t rest = (uint64_t)row / g->in.sizes[3];
                uint32_t d = (uint32_t)(rest % g->in.sizes[2]);
                uint32_t n = (uint32_t)(rest / g->in.sizes[2]);
                zero_uncovered_nhwc(gp, p, output_gradient + n * gp->grad_out.strides[0] * element, d, h);
            }
        }
        _mm_sfence(); /* streamed stores (if any) are visible before the dispatch returns */
    }
}

/* ---- Overlapping windows: the band gradient ---- */

/* The argmax positions of output row (od, oh) of one task's chunk of
 * `width` channels (at chunk_image) into a band row: pitch int32 per output
 * column. */
typedef void (*nhwc_argmax_row_fn)(const nhwc_grad_plan* gp, const dml_pooling_params* p, const char* chunk_image,
                                   uint32_t width, uint32_t od, uint32_t oh, int32_t* row);

/* OutputGradient of `count` channels from channel c of a task's chunk
 * (dy_chunk and dx at c) at input position (d, h, w): per lane +0 plus
 * InputGradient of each window containing it whose argmax it is, in
 * increasing output order. band_rows[i * band_h + j]: the band row of the
 * i-th and j-th output coordinates of spans sd and sh. */
typedef void (*nhwc_gather_fn)(const nhwc_grad_plan* gp, const dml_pooling_params* p, const char* dy_chunk,
                               const int32_t* const* band_rows, uint32_t c, dml_pool_cover sd, dml_pool_cover sh,
                               uint32_t d, uint32_t h, uint32_t w, uint32_t count, char* dx);

/* Calls WINDOW(argmax, dy) for every window containing input position
 * (d, h, w), in increasing output order: `argmax` its positions in its band
 * row from channel c on, `dy` its InputGradient in the chunk (dy_chunk, a
 * char pointer). sd and sh are the position's spans of windows along D and
 * H, band_rows their band rows (nhwc_gather_fn). */
#define FOR_EACH_CONTAINING_WINDOW(gp, p, band_rows, sd, sh, d, h, w, c, dy_chunk, WINDOW)                             \
    do {                                                                                                               \
        const dml_pool_view* o_ = &(gp)->g.out;                                                                        \
        const size_t element_ = (gp)->g.half ? 2 : 4;                                                                  \
        dml_pool_cover sw_ = dml_pool_covering_windows(p, 2, w, o_->sizes[4]);                                         \
        for (uint32_t od_ = (sd).first; od_ < (sd).end; od_++) {                                                       \
            if (!dml_pool_window_contains(p, 0, d, od_)) continue;                                                     \
            for (uint32_t oh_ = (sh).first; oh_ < (sh).end; oh_++) {                                                   \
                if (!dml_pool_window_contains(p, 1, h, oh_)) continue;                                                 \
                const int32_t* row_ = (band_rows)[(od_ - (sd).first) * (gp)->band_h + (oh_ - (sh).first)];             \
                for (uint32_t ow_ = sw_.first; ow_ < sw_.end; ow_++) {                                                 \
                    if (!dml_pool_window_contains(p, 2, w, ow_)) continue;                                             \
                    WINDOW(row_ + (uint64_t)ow_ * (gp)->pitch + (c),                                                   \
                           (dy_chunk) +                                                                                \
                               (od_ * o_->strides[2] + oh_ * o_->strides[3] + ow_ * o_->strides[4]) * element_);       \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

/* One task (an image's chunk of channels) of the band gradient, its band at
 * `band`: input rows in order, each output row's argmaxes computed once
 * when the first input row that needs it comes, then each input position
 * gathered `gather_width` channels at a time. Always inlined, so that each
 * ISA's argmax_row and gather are direct calls. */
static inline __attribute__((always_inline)) void nhwc_band_task(const nhwc_grad_plan* gp, const dml_pooling_params* p,
                                                                 const dml_kernel_args* args, int64_t task, char* band,
                                                                 nhwc_argmax_row_fn argmax_row, nhwc_gather_fn gather,
                                                                 uint32_t gather_width) {
    const nhwc_geometry* g = &gp->g;
    const dml_pool_view* o = &g->out;
    const dml_pool_view* x = &gp->grad_out;
    const size_t element = g->half ? 2 : 4;
    uint32_t n = (uint32_t)((uint64_t)task / gp->chunks);
    uint32_t c0 = (uint32_t)((uint64_t)task % gp->chunks) * NHWC_GRAD_CHUNK;
    uint32_t width = g->channels - c0 < NHWC_GRAD_CHUNK ? g->channels - c0 : NHWC_GRAD_CHUNK;
    const char* chunk_image = (const char*)args->inputs[DML_POOL_INPUT] + (n * g->in.strides[0] + c0) * element;
    const char* dy_chunk = (const char*)args->inputs[DML_POOL_INPUT_GRADIENT] + (n * o->strides[0] + c0) * element;
    char* dx_chunk = (char*)args->outputs[DML_POOL_OUTPUT] + (n * x->strides[0] + c0) * element;
    int64_t* tags = (int64_t*)band; /* the output row (od * OH + oh) in each slot, -1: none */
    int32_t* rows = (int32_t*)(band + gp->band_tags);
    const uint64_t row_size = (uint64_t)o->sizes[4] * gp->pitch;
    for (uint32_t slot = 0; slot < gp->band_d * gp->band_h; slot++)
        tags[slot] = -1;
    const int32_t* band_rows[NHWC_MAX_BAND_SLOTS]; /* of the current input row's spans of windows */
    for (uint32_t d = 0; d < g->in.sizes[2]; d++) {
        dml_pool_cover sd = dml_pool_covering_windows(p, 0, d, o->sizes[2]);
        for (uint32_t h = 0; h < g->in.sizes[3]; h++) {
            dml_pool_cover sh = dml_pool_covering_windows(p, 1, h, o->sizes[3]);
            for (uint32_t od = sd.first; od < sd.end; od++)
                for (uint32_t oh = sh.first; oh < sh.end; oh++) {
                    uint32_t slot = od % gp->band_d * gp->band_h + oh % gp->band_h;
                    int64_t tag = (int64_t)od * o->sizes[3] + oh;
                    int32_t* row = rows + slot * row_size;
                    if (tags[slot] != tag && dml_pool_window_contains(p, 0, d, od) &&
                        dml_pool_window_contains(p, 1, h, oh)) {
                        argmax_row(gp, p, chunk_image, width, od, oh, row);
                        tags[slot] = tag;
                    }
                    band_rows[(od - sd.first) * gp->band_h + (oh - sh.first)] = row;
                }
            char* dx_row = dx_chunk + (d * x->strides[2] + h * x->strides[3]) * element;
            for (uint32_t w = 0; w < g->in.sizes[4]; w++) {
                char* dx = dx_row + w * x->strides[4] * element;
                uint32_t c = 0;
                for (; c + gather_width <= width; c += gather_width)
                    gather(gp, p, dy_chunk + c * element, band_rows, c, sd, sh, d, h, w, gather_width,
                           dx + c * element);
                if (c < width)
                    gather(gp, p, dy_chunk + c * element, band_rows, c, sd, sh, d, h, w, width - c, dx + c * element);
            }
        }
    }
}

/* Runs the band gradient's tasks, each thread in its own band of the
 * temporary resource; `task` is the ISA's instance of nhwc_band_task. */
typedef void (*nhwc_band_task_fn)(const nhwc_grad_plan* gp, const dml_pooling_params* p, const dml_kernel_args* args,
                                  int64_t task, char* band);

static inline void nhwc_run_band(const nhwc_grad_plan* gp, const dml_kernel_args* args, nhwc_band_task_fn task) {
    char* scratch = args->temporary;
#pragma omp parallel num_threads(gp->threads)
    {
        int thread = dml_cpu_thread_index();
#pragma omp for schedule(dynamic, dml_cpu_chunk((uint64_t)gp->tasks, gp->threads))
        for (int64_t t = 0; t < gp->tasks; t++)
            task(gp, args->op->params, args, t, scratch + (size_t)thread * gp->band_size);
    }
}

#endif
