/* Max pooling on the CPU (BENCHMARKS.md): libdml against oneDNN, the peer,
 * on the workloads and a few ResNet/VGG layers, FLOAT32 and FLOAT16,
 * NCHW and channels-last (NHWC strides over the same logical tensor). Three
 * operations per workload: forward (MAX_POOLING2, no indices), forward with
 * UINT32 indices (oneDNN: forward training with its workspace) and the
 * gradient (oneDNN: backward from the workspace).
 *
 * Bytes counted are each library's own minimal traffic: libdml's forward
 * reads the input and writes the output (and the indices), its gradient
 * reads the input and the input gradient and writes the output gradient;
 * oneDNN's training writes its workspace, its backward reads it instead of
 * the input. oneDNN has no FLOAT16 pooling on this CPU; FLOAT16 rows are
 * then compared with its best FLOAT32 time. */
#include <dml/dml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct pool_shape {
    const char* name;
    uint32_t rank;
    uint32_t in[5];
    uint32_t window, stride, padding; /* the same along every spatial dimension */
} pool_shape;

static const pool_shape shapes[] = {
    {"32x256x56x56 3x3/2 p1", 4, {32, 256, 56, 56}, 3, 2, 1},
    {"64x128x112x112 2x2/2", 4, {64, 128, 112, 112}, 2, 2, 0},
    {"resnet stem 16x64x112x112 3x3/2 p1", 4, {16, 64, 112, 112}, 3, 2, 1},
    {"vgg 16x512x28x28 2x2/2", 4, {16, 512, 28, 28}, 2, 2, 0},
    {"overlapping 32x256x14x14 3x3/1 p1", 4, {32, 256, 14, 14}, 3, 1, 1},
    {"3-D 4x64x16x56x56 2x2x2/2", 5, {4, 64, 16, 56, 56}, 2, 2, 0},
};
enum { OPERATIONS = 3 };
static const char* const operation_names[OPERATIONS] = {"maxpool_fwd", "maxpool_fwd_idx", "maxpool_grad"};

static uint32_t output_size(uint32_t in, const pool_shape* s) {
    return (in + 2 * s->padding - s->window) / s->stride + 1;
}

static void output_sizes(const pool_shape* s, UINT* out) {
    out[0] = s->in[0];
    out[1] = s->in[1];
    for (uint32_t i = 2; i < s->rank; i++)
        out[i] = output_size(s->in[i], s);
}

static uint64_t elements(uint32_t rank, const UINT* sizes) {
    uint64_t count = 1;
    for (uint32_t i = 0; i < rank; i++)
        count *= sizes[i];
    return count;
}

static void workload_name(char* name, size_t size, int operation, const pool_shape* s) {
    snprintf(name, size, "%s %s", operation_names[operation], s->name);
}

/* ---- libdml ---- */

/* One libdml measurement, reported after all of them (grouped by operator). */
typedef struct libdml_row {
    char workload[96], implementation[64];
    double seconds, bytes;
} libdml_row;

/* Measures the three operations of one shape, type and layout into rows[]. */
static void bench_libdml(DMLDevice* device, const pool_shape* s, DML_TENSOR_DATA_TYPE type, bool channels_last,
                         libdml_row rows[OPERATIONS]) {
    UINT out[5], in_strides[5], out_strides[5];
    output_sizes(s, out);
    if (channels_last) {
        bench_channels_last_strides(s->rank, s->in, in_strides);
        bench_channels_last_strides(s->rank, out, out_strides);
    }
    const UINT* in_layout = channels_last ? in_strides : NULL;
    const UINT* out_layout = channels_last ? out_strides : NULL;
    uint64_t element_size = type == DML_TENSOR_DATA_TYPE_FLOAT16 ? 2 : 4;
    uint64_t in_count = elements(s->rank, s->in), out_count = elements(s->rank, out);
    uint64_t in_bytes = in_count * element_size, out_bytes = out_count * element_size, idx_bytes = out_count * 4;
    void* src = bench_filled(type, in_count);
    void* dst = bench_filled(type, out_count);
    void* indices = bench_filled(DML_TENSOR_DATA_TYPE_FLOAT32, out_count);
    void* diff_dst = bench_filled(type, out_count);
    void* diff_src = bench_filled(type, in_count);

    DML_BUFFER_TENSOR_DESC in_buffer, out_buffer, idx_buffer, grad_buffer;
    DML_TENSOR_DESC in_desc, out_desc, idx_desc, grad_desc;
    uint32_t spatial = s->rank - 2;
    UINT strides[3] = {s->stride, s->stride, s->stride}, window[3] = {s->window, s->window, s->window};
    UINT padding[3] = {s->padding, s->padding, s->padding}, dilations[3] = {1, 1, 1};
    DML_MAX_POOLING2_OPERATOR_DESC forward = {bench_tensor(&in_buffer, &in_desc, type, s->rank, s->in, in_layout),
                                              bench_tensor(&out_buffer, &out_desc, type, s->rank, out, out_layout),
                                              NULL,
                                              spatial,
                                              strides,
                                              window,
                                              padding,
                                              padding,
                                              dilations};
    DML_OPERATOR_DESC forward_desc = {DML_OPERATOR_MAX_POOLING2, &forward};
    DML_MAX_POOLING_GRAD_OPERATOR_DESC grad = {
        &in_desc, &out_desc, bench_tensor(&grad_buffer, &grad_desc, type, s->rank, s->in, in_layout),
        spatial,  strides,   window,
        padding,  padding,   dilations};
    DML_OPERATOR_DESC grad_desc_op = {DML_OPERATOR_MAX_POOLING_GRAD, &grad};

    for (int operation = 0; operation < OPERATIONS; operation++) {
        bench_dml_job job;
        double bytes;
        if (operation == 0) {
            bench_dml_prepare(&job, device, &forward_desc, 1, 2, (void*[]){src, dst, NULL},
                              (uint64_t[]){in_bytes, out_bytes, 0});
            bytes = (double)(in_bytes + out_bytes);
        } else if (operation == 1) {
            forward.OutputIndicesTensor =
                bench_tensor(&idx_buffer, &idx_desc, DML_TENSOR_DATA_TYPE_UINT32, s->rank, out, out_layout);
            bench_dml_prepare(&job, device, &forward_desc, 1, 2, (void*[]){src, dst, indices},
                              (uint64_t[]){in_bytes, out_bytes, idx_bytes});
            bytes = (double)(in_bytes + out_bytes + idx_bytes);
        } else {
            bench_dml_prepare(&job, device, &grad_desc_op, 2, 1, (void*[]){src, diff_dst, diff_src},
                              (uint64_t[]){in_bytes, out_bytes, in_bytes});
            bytes = (double)(2 * in_bytes + out_bytes);
        }
        libdml_row* row = &rows[operation];
        row->seconds = bench_dml_time(&job);
        row->bytes = bytes;
        snprintf(row->implementation, sizeof row->implementation, "%s", job.implementation);
        workload_name(row->workload, sizeof row->workload, operation, s);
        bench_dml_release(&job);
    }
    free(src);
    free(dst);
    free(indices);
    free(diff_dst);
    free(diff_src);
}

/* Reports a libdml row against the best oneDNN row of the same operation and
 * workload: of the same type, or FLOAT32 where oneDNN has no FLOAT16. */
static void report_libdml(const bench_context* ctx, const libdml_row* row, DML_TENSOR_DATA_TYPE type,
                          bool channels_last) {
    const char* dtype = bench_dtype_name(type);
    const bench_peer_row* peer = bench_peer_best(ctx, row->workload, dtype);
    if (peer == NULL) peer = bench_peer_best(ctx, row->workload, "FLOAT32");
    char peer_label[128];
    if (peer)
        snprintf(peer_label, sizeof peer_label, "oneDNN %s %s %s", peer->dtype, peer->layout, peer->implementation);
    bench_report(ctx, &(bench_row){row->workload, dtype, channels_last ? "channels-last" : "nchw", "libdml",
                                   row->implementation, row->seconds, row->bytes, peer ? peer_label : NULL,
                                   peer ? peer->seconds : 0});
}

#ifdef DML_BENCH_HAVE_ONEDNN
/* ---- oneDNN (run in the peer children) ---- */

typedef struct dnnl_layout {
    const char* name;
    dnnl_format_tag_t tag_4d, tag_5d;
} dnnl_layout;

static const dnnl_layout dnnl_layouts[] = {
    {"nchw", dnnl_nchw, dnnl_ncdhw},
    {"nChw8c", dnnl_nChw8c, dnnl_nCdhw8c},
    {"nChw16c", dnnl_nChw16c, dnnl_nCdhw16c}, /* oneDNN's own blocking on AVX-512 */
    {"channels-last", dnnl_nhwc, dnnl_ndhwc},
};

static void emit(const pool_shape* s, int operation, const char* dtype, const char* layout,
                 const_dnnl_primitive_desc_t pd, double seconds, double bytes) {
    bench_peer_row row = {.seconds = seconds, .bytes = bytes};
    workload_name(row.workload, sizeof row.workload, operation, s);
    snprintf(row.dtype, sizeof row.dtype, "%s", dtype);
    snprintf(row.layout, sizeof row.layout, "%s", layout);
    snprintf(row.implementation, sizeof row.implementation, "%s", bench_dnnl_impl(pd));
    bench_peer_emit(&row);
}

/* The three operations of one shape, type and layout; nothing when oneDNN
 * has no implementation for the type (FLOAT16 on most CPUs). */
static void bench_onednn(const bench_dnnl* dnnl, const pool_shape* s, dnnl_data_type_t type,
                         const dnnl_layout* layout) {
    const char* dtype = type == dnnl_f16 ? "FLOAT16" : "FLOAT32";
    UINT out[5];
    output_sizes(s, out);
    dnnl_dims_t src_dims, dst_dims, strides, kernel, dilation, padding;
    for (uint32_t i = 0; i < s->rank; i++) {
        src_dims[i] = s->in[i];
        dst_dims[i] = out[i];
    }
    for (uint32_t i = 0; i < s->rank - 2; i++) {
        strides[i] = s->stride;
        kernel[i] = s->window;
        dilation[i] = 0;
        padding[i] = s->padding;
    }
    dnnl_format_tag_t tag = s->rank == 4 ? layout->tag_4d : layout->tag_5d;
    dnnl_memory_desc_t src_md = bench_dnnl_md((int)s->rank, src_dims, type, tag);
    dnnl_memory_desc_t dst_md = bench_dnnl_md((int)s->rank, dst_dims, type, tag);
    double src_bytes = (double)dnnl_memory_desc_get_size(&src_md),
           dst_bytes = (double)dnnl_memory_desc_get_size(&dst_md);

    dnnl_pooling_v2_desc_t desc;
    dnnl_primitive_desc_t inference_pd, training_pd, backward_pd;
    BENCH_CHECK_DNNL(dnnl_pooling_v2_forward_desc_init(&desc, dnnl_forward_inference, dnnl_pooling_max, &src_md,
                                                       &dst_md, strides, kernel, dilation, padding, padding));
    if (dnnl_primitive_desc_create(&inference_pd, &desc, NULL, dnnl->engine, NULL) != dnnl_success) return;
    if (bench_dnnl_is_reference(inference_pd)) {
        dnnl_primitive_desc_destroy(inference_pd);
        return;
    }
    BENCH_CHECK_DNNL(dnnl_pooling_v2_forward_desc_init(&desc, dnnl_forward_training, dnnl_pooling_max, &src_md, &dst_md,
                                                       strides, kernel, dilation, padding, padding));
    BENCH_CHECK_DNNL(dnnl_primitive_desc_create(&training_pd, &desc, NULL, dnnl->engine, NULL));
    BENCH_CHECK_DNNL(dnnl_pooling_v2_backward_desc_init(&desc, dnnl_pooling_max, &src_md, &dst_md, strides, kernel,
                                                        dilation, padding, padding));
    dnnl_status_t backward_status = dnnl_primitive_desc_create(&backward_pd, &desc, NULL, dnnl->engine, training_pd);

    dnnl_memory_t src = bench_dnnl_memory(dnnl, &src_md, true), dst = bench_dnnl_memory(dnnl, &dst_md, false);
    const dnnl_memory_desc_t* workspace_md = dnnl_primitive_desc_query_md(training_pd, dnnl_query_workspace_md, 0);
    dnnl_memory_t workspace = bench_dnnl_memory(dnnl, workspace_md, false);
    double workspace_bytes = (double)dnnl_memory_desc_get_size(workspace_md);
    dnnl_primitive_t primitive;

    BENCH_CHECK_DNNL(dnnl_primitive_create(&primitive, inference_pd));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_WORKSPACE, workspace}};
    emit(s, 0, dtype, layout->name, inference_pd, bench_dnnl_time(dnnl, primitive, 2, args), src_bytes + dst_bytes);
    dnnl_primitive_destroy(primitive);

    BENCH_CHECK_DNNL(dnnl_primitive_create(&primitive, training_pd));
    emit(s, 1, dtype, layout->name, training_pd, bench_dnnl_time(dnnl, primitive, 3, args),
         src_bytes + dst_bytes + workspace_bytes);
    dnnl_primitive_destroy(primitive);

    if (backward_status == dnnl_success) {
        dnnl_memory_t diff_dst = bench_dnnl_memory(dnnl, &dst_md, true),
                      diff_src = bench_dnnl_memory(dnnl, &src_md, false);
        BENCH_CHECK_DNNL(dnnl_primitive_create(&primitive, backward_pd));
        dnnl_exec_arg_t backward_args[3] = {
            {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}, {DNNL_ARG_WORKSPACE, workspace}};
        emit(s, 2, dtype, layout->name, backward_pd, bench_dnnl_time(dnnl, primitive, 3, backward_args),
             dst_bytes + workspace_bytes + src_bytes);
        dnnl_primitive_destroy(primitive);
        dnnl_primitive_desc_destroy(backward_pd);
        dnnl_memory_destroy(diff_dst);
        dnnl_memory_destroy(diff_src);
    }
    dnnl_memory_destroy(src);
    dnnl_memory_destroy(dst);
    dnnl_memory_destroy(workspace);
    dnnl_primitive_desc_destroy(inference_pd);
    dnnl_primitive_desc_destroy(training_pd);
}

static void measure_peer(const bench_dnnl* dnnl, size_t shape, dnnl_data_type_t type, size_t layout) {
    bench_onednn(dnnl, &shapes[shape], type, &dnnl_layouts[layout]);
}
#endif

static const char* shape_name(size_t shape) { return shapes[shape].name; }

/* The three operations of one shape and type, NCHW and channels-last, each
 * followed by oneDNN's rows. */
static void measure(const bench_context* ctx, DMLDevice* device, size_t shape, DML_TENSOR_DATA_TYPE type) {
    libdml_row rows[2][OPERATIONS]; /* [channels_last][operation] */
    for (int channels_last = 0; channels_last < 2; channels_last++)
        bench_libdml(device, &shapes[shape], type, channels_last, rows[channels_last]);
    for (int operation = 0; operation < OPERATIONS; operation++) {
        for (int channels_last = 0; channels_last < 2; channels_last++)
            report_libdml(ctx, &rows[channels_last][operation], type, channels_last);
        bench_report_peers(ctx, rows[0][operation].workload, bench_dtype_name(type));
    }
}

int main(int argc, char** argv) {
    bench_program program = {.title = "max pooling",
                             .shapes = sizeof shapes / sizeof shapes[0],
                             .shape_name = shape_name,
                             .measure = measure};
#ifdef DML_BENCH_HAVE_ONEDNN
    program.peer_layouts = sizeof dnnl_layouts / sizeof dnnl_layouts[0];
    program.measure_peer = measure_peer;
#endif
    return bench_run_program(&program, argc, argv);
}
