/* What the NCHW max pooling fast paths of every ISA share (max_pooling_avx2.c,
 * max_pooling_avx512.c): the input rows of an output row's windows, the
 * addressing of one output row, and a FLOAT16 NaN's own bits. Plain C: no
 * vector types, so each ISA's file includes it with its own flags. */
#ifndef DML_CPU_MAX_POOLING_CPU_H
#define DML_CPU_MAX_POOLING_CPU_H

#include <stdbool.h>
#include <stdint.h>

#include "../ops/max_pooling_rules.h"
#include "cpu.h"

/* The most input rows (depth times height) of a window the whole-row paths take. */
enum { MAX_WINDOW_ROWS = 16 };

/* The input rows of one output row's windows, in tap order. */
typedef struct window_rows {
    uint32_t count;
    const char* row[MAX_WINDOW_ROWS];
    int32_t position[MAX_WINDOW_ROWS]; /* plane position of the row's column 0: (d * H + h) * W */
    uint32_t d[MAX_WINDOW_ROWS], h[MAX_WINDOW_ROWS];
} window_rows;

/* The rows of the windows whose depth and height taps are rd and rh, in
 * `plane` (elements of `element` bytes) of input view `in`. */
static inline void window_rows_at(const dml_pool_view* in, size_t element, const dml_pooling_params* p,
                                  const char* plane, const dml_pool_taps* rd, const dml_pool_taps* rh, window_rows* w) {
    w->count = 0;
    for (uint32_t kd = rd->begin; kd < rd->end; kd++) {
        int64_t d = rd->start + (int64_t)kd * p->dilations[0];
        for (uint32_t kh = rh->begin; kh < rh->end; kh++, w->count++) {
            int64_t h = rh->start + (int64_t)kh * p->dilations[1];
            w->row[w->count] = plane + (d * (int64_t)in->strides[2] + h * (int64_t)in->strides[3]) * element;
            w->position[w->count] = (int32_t)((d * in->sizes[3] + h) * in->sizes[4]);
            w->d[w->count] = (uint32_t)d;
            w->h[w->count] = (uint32_t)h;
        }
    }
}

/* The input rows of one output row's windows (od, oh) as offsets from the
 * plane's first element, in tap order, computed once per plan: per output
 * row, the window arithmetic (dml_pool_window_taps, window_rows_at) took a
 * quarter of the 3x3/2 forward pass's time on one thread (max_pooling_avx512.c). */
typedef struct plan_window_rows {
    uint32_t count;
    int32_t position[MAX_WINDOW_ROWS]; /* (d * H + h) * W */
    int64_t offset[MAX_WINDOW_ROWS];   /* elements */
} plan_window_rows;

/* The most output rows per plane (OD * OH) whose window rows a plan keeps. */
enum { MAX_PLAN_ROWS = 2048 };

/* rows[od * OH + oh] for every output row of view `out` (at most
 * MAX_PLAN_ROWS) over input view `in`. */
static inline void plan_window_rows_fill(const dml_pooling_params* p, const dml_pool_view* in, const dml_pool_view* out,
                                         plan_window_rows* rows) {
    for (uint32_t od = 0; od < out->sizes[2]; od++)
        for (uint32_t oh = 0; oh < out->sizes[3]; oh++, rows++) {
            dml_pool_taps rd = dml_pool_window_taps(p, 0, od, in->sizes[2]);
            dml_pool_taps rh = dml_pool_window_taps(p, 1, oh, in->sizes[3]);
            rows->count = 0;
            for (uint32_t kd = rd.begin; kd < rd.end; kd++) {
                int64_t d = rd.start + (int64_t)kd * p->dilations[0];
                for (uint32_t kh = rh.begin; kh < rh.end; kh++, rows->count++) {
                    int64_t h = rh.start + (int64_t)kh * p->dilations[1];
                    rows->offset[rows->count] = d * (int64_t)in->strides[2] + h * (int64_t)in->strides[3];
                    rows->position[rows->count] = (int32_t)((d * in->sizes[3] + h) * in->sizes[4]);
                }
            }
        }
}

/* The input rows (along H) of a 2-D plane whose gradient is complete once
 * the windows of output rows 0 .. oh are added: those before the next output
 * row's first window row, all of them after the last output row (the bands
 * of max_pooling_avx2.c and max_pooling_avx512.c). */
static inline uint32_t rows_complete_after(const dml_pooling_params* p, uint32_t oh, uint32_t out_height,
                                           uint32_t height) {
    int64_t next = oh + 1 < out_height ? (int64_t)(oh + 1) * p->strides[1] - p->start_padding[1] : height;
    return next < 0 ? 0 : next > height ? height : (uint32_t)next;
}

/* A FLOAT16 NaN's own bits (FLOAT32 lanes keep its payload but not whether
 * it was signaling): re-read from the input at the plane position. */
static inline uint16_t half_at_position(const dml_pool_view* in, const char* plane, uint32_t position) {
    uint32_t w = position % in->sizes[4], h = position / in->sizes[4] % in->sizes[3];
    uint32_t d = position / in->sizes[4] / in->sizes[3];
    return ((const uint16_t*)plane)[d * in->strides[2] + h * in->strides[3] + w];
}

/* The forward pass's outputs: Output and the optional indices, and how
 * many output rows (N * C * OD * OH) they have. */
typedef struct nchw_outputs {
    dml_pool_view out, idx;
    bool has_indices, indices_64;
    int64_t rows;
} nchw_outputs;

static inline nchw_outputs nchw_outputs_of(const DMLOperator* op) {
    nchw_outputs o = {.out = dml_pool_view_5d(&op->outputs[DML_POOL_OUTPUT].tensor)};
    const dml_tensor* indices =
        op->output_count > DML_POOL_OUTPUT_INDICES ? &op->outputs[DML_POOL_OUTPUT_INDICES].tensor : NULL;
    o.has_indices = indices && indices->present;
    if (o.has_indices) {
        o.idx = dml_pool_view_5d(indices);
        o.indices_64 = indices->type == DML_TENSOR_DATA_TYPE_UINT64;
    }
    o.rows = (int64_t)o.out.sizes[0] * o.out.sizes[1] * o.out.sizes[2] * o.out.sizes[3];
    return o;
}

/* Threads for the forward pass: rows of OW * window-taps visits each. */
static inline int nchw_forward_threads(const nchw_outputs* o, const dml_pooling_params* p, const DMLDevice* device) {
    uint64_t row_cost = (uint64_t)o->out.sizes[4] * p->window[0] * p->window[1] * p->window[2];
    return dml_cpu_threads_for((int)device->threads, (uint64_t)o->rows,
                               dml_cpu_items_per_thread(row_cost, DML_CPU_MIN_WORK_PER_THREAD));
}

/* Output rows per chunk of the forward pass's dynamic schedule: whole
 * planes (dml_cpu_chunk), so that a chunk's rows follow one another. */
static inline int nchw_forward_chunk_rows(const nchw_outputs* o, int threads) {
    uint64_t plane_rows = o->out.sizes[3], rows = dml_cpu_chunk((uint64_t)o->rows / plane_rows, threads) * plane_rows;
    return rows > INT32_MAX ? INT32_MAX : (int)rows;
}

/* One output row (od, oh) of plane (n, c): where its input plane, output
 * and indices rows start. */
typedef struct nchw_output_row {
    const char* plane;    /* the input plane's first element */
    void* output;         /* the output row's first element */
    uint32_t* indices32;  /* the indices row, or NULL */
    uint64_t* indices64;  /* the indices row, or NULL */
    uint64_t plane_index; /* logical index of the plane's first element: (n * C + c) * D * H * W */
    uint32_t od, oh;
} nchw_output_row;

/* An output row's place among the flattened N * C * OD * OH. A thread's
 * rows are consecutive (schedule static): it steps from one to the next
 * (nchw_row_step) instead of dividing, which took a third of the 3x3/2
 * forward pass's time. */
typedef struct nchw_row_cursor {
    int64_t row; /* -1: none yet */
    uint32_t n, c, od, oh;
} nchw_row_cursor;

/* Moves cursor x to output row `row` of view `out`. */
static inline void nchw_row_step(const dml_pool_view* out, nchw_row_cursor* x, int64_t row) {
    if (x->row >= 0 && row == x->row + 1) {
        x->row = row;
        if (++x->oh < out->sizes[3]) return;
        x->oh = 0;
        if (++x->od < out->sizes[2]) return;
        x->od = 0;
        if (++x->c < out->sizes[1]) return;
        x->c = 0;
        x->n++;
        return;
    }
    uint64_t rest = (uint64_t)row;
    x->row = row;
    x->oh = (uint32_t)(rest % out->sizes[3]);
    rest /= out->sizes[3];
    x->od = (uint32_t)(rest % out->sizes[2]);
    rest /= out->sizes[2];
    x->c = (uint32_t)(rest % out->sizes[1]);
    x->n = (uint32_t)(rest / out->sizes[1]);
}

/* The output row at cursor x (elements of `element` bytes); indices NULL
 * when there are none. */
static inline nchw_output_row nchw_output_row_at(const nchw_outputs* o, const dml_pool_view* in, size_t element,
                                                 const char* input, char* output, char* indices,
                                                 const nchw_row_cursor* cursor) {
    const dml_pool_view* v = &o->out;
    const dml_pool_view* x = &o->idx;
    nchw_output_row r = {.oh = cursor->oh, .od = cursor->od};
    uint64_t c = cursor->c, n = cursor->n;
    r.plane = input + (n * in->strides[0] + c * in->strides[1]) * element;
    r.output = output + (n * v->strides[0] + c * v->strides[1] + r.od * v->strides[2] + r.oh * v->strides[3]) * element;
    r.plane_index = (n * in->sizes[1] + c) * in->sizes[2] * in->sizes[3] * in->sizes[4];
    if (indices) {
        char* at = indices + (n * x->strides[0] + c * x->strides[1] + r.od * x->strides[2] + r.oh * x->strides[3]) *
                                 (o->indices_64 ? 8 : 4);
        if (o->indices_64)
            r.indices64 = (uint64_t*)at;
        else
            r.indices32 = (uint32_t*)at;
    }
    return r;
}

/* Moves cursor x and its output row r to output row `row`: the next row of
 * the same plane by stepping r's pointers, any other by nchw_row_step and
 * nchw_output_row_at (whose multiplications, with the window rows copied
 * per row, took a quarter of the 3x3/2 forward pass's time on one thread). */
static inline void nchw_output_row_next(const nchw_outputs* o, const dml_pool_view* in, size_t element,
                                        const char* input, char* output, char* indices, nchw_row_cursor* x, int64_t row,
                                        nchw_output_row* r) {
    if (x->row >= 0 && row == x->row + 1 && x->oh + 1 < o->out.sizes[3]) {
        x->row = row;
        x->oh++;
        r->oh++;
        r->output = (char*)r->output + o->out.strides[3] * element;
        if (r->indices32) r->indices32 += o->idx.strides[3];
        if (r->indices64) r->indices64 += o->idx.strides[3];
        return;
    }
    nchw_row_step(&o->out, x, row);
    *r = nchw_output_row_at(o, in, element, input, output, indices, x);
}

#endif
