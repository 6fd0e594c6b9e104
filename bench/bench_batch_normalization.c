/* Batch normalization on the CPU (BENCHMARKS.md): libdml against oneDNN,
 * the peer, on the workload and a few ResNet layers, FLOAT32 and
 * FLOAT16, NCHW and channels-last (NHWC strides over the same logical
 * tensor). Five operations: BATCH_NORMALIZATION (oneDNN: inference with
 * global statistics), BATCH_NORMALIZATION_TRAINING with and without fused
 * RELU (oneDNN: forward training, dnnl_fuse_norm_relu), and the two
 * gradients (oneDNN: backward, with global statistics for the GRAD whose
 * statistics are constants).
 *
 * Bytes are the minimal traffic: every element-wise input read once and
 * every element-wise output written once (the per-channel parameters are
 * negligible): inference and TRAINING x + y, the GRADs x + dy + dx. oneDNN
 * runs with one {2, C} scale-shift tensor (dnnl_use_scaleshift: separate
 * scale and shift tensors send oneDNN 2.6 to its reference code). Where
 * oneDNN has no FLOAT16 batch normalization, FLOAT16 rows are compared with
 * its best FLOAT32 time. */
#include <dml/dml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct bn_shape {
    const char* name;
    UINT sizes[4];
} bn_shape;

static const bn_shape shapes[] = {
    {"32x256x56x56", {32, 256, 56, 56}},
    {"resnet stem 16x64x112x112", {16, 64, 112, 112}},
    {"resnet conv5 32x512x7x7", {32, 512, 7, 7}},
};

enum { INFERENCE, TRAINING, TRAINING_RELU, GRAD, TRAINING_GRAD, OPERATIONS };
static const char* const operation_names[OPERATIONS] = {"bn_inference", "bn_train_fwd", "bn_train_fwd_relu", "bn_grad",
                                                        "bn_train_grad"};

static bool is_gradient(int operation) { return operation == GRAD || operation == TRAINING_GRAD; }

static void workload_name(char* name, size_t size, int operation, const bn_shape* s) {
    snprintf(name, size, "%s %s", operation_names[operation], s->name);
}

/* ---- libdml ---- */

static void bench_libdml(const bench_context* ctx, DMLDevice* device, const bn_shape* s, DML_TENSOR_DATA_TYPE type,
                         bool channels_last) {
    UINT strides[4], parameter_sizes[4] = {1, s->sizes[1], 1, 1};
    if (channels_last) bench_channels_last_strides(4, s->sizes, strides);
    uint64_t count = (uint64_t)s->sizes[0] * s->sizes[1] * s->sizes[2] * s->sizes[3];
    uint64_t element_size = type == DML_TENSOR_DATA_TYPE_FLOAT16 ? 2 : 4;
    uint64_t db = count * element_size, pb = s->sizes[1] * element_size;
    void *x = bench_filled(type, count), *y = bench_filled(type, count);
    void *dy = bench_filled(type, count), *dx = bench_filled(type, count);
    void* parameters[7]; /* mean, variance (made positive), scale, bias, and three outputs */
    for (int k = 0; k < 7; k++)
        parameters[k] = bench_filled(type, s->sizes[1]);
    for (UINT c = 0; c < s->sizes[1]; c++) { /* Variance = 1 */
        if (type == DML_TENSOR_DATA_TYPE_FLOAT16)
            ((uint16_t*)parameters[1])[c] = 0x3C00;
        else
            ((float*)parameters[1])[c] = 1.0f;
    }
    DML_BUFFER_TENSOR_DESC data_buffer, parameter_buffer;
    DML_TENSOR_DESC data_desc, parameter_desc;
    DML_TENSOR_DESC* data = bench_tensor(&data_buffer, &data_desc, type, 4, s->sizes, channels_last ? strides : NULL);
    DML_TENSOR_DESC* parameter = bench_tensor(&parameter_buffer, &parameter_desc, type, 4, parameter_sizes, NULL);
    DML_ACTIVATION_RELU_OPERATOR_DESC relu = {NULL, NULL};
    DML_OPERATOR_DESC relu_desc = {DML_OPERATOR_ACTIVATION_RELU, &relu};
    DML_BATCH_NORMALIZATION_OPERATOR_DESC inference = {data, parameter, parameter, parameter, parameter,
                                                       data, 1,         1e-5f,     NULL};
    DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC training = {data,      parameter, parameter, NULL, data,
                                                               parameter, parameter, 1e-5f,     NULL};
    /* BATCH_NORMALIZATION_GRAD and _TRAINING_GRAD share one field list. */
    DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC grad = {data, data,      parameter, parameter, parameter,
                                                       data, parameter, parameter, 1e-5f};
    for (int operation = 0; operation < OPERATIONS; operation++) {
        bench_dml_job job;
        if (operation == INFERENCE) {
            DML_OPERATOR_DESC desc = {DML_OPERATOR_BATCH_NORMALIZATION, &inference};
            bench_dml_prepare(&job, device, &desc, 5, 1,
                              (void*[]){x, parameters[0], parameters[1], parameters[2], parameters[3], y},
                              (uint64_t[]){db, pb, pb, pb, pb, db});
        } else if (!is_gradient(operation)) {
            training.FusedActivation = operation == TRAINING_RELU ? &relu_desc : NULL;
            DML_OPERATOR_DESC desc = {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, &training};
            bench_dml_prepare(&job, device, &desc, 4, 3,
                              (void*[]){x, parameters[2], parameters[3], NULL, y, parameters[4], parameters[5]},
                              (uint64_t[]){db, pb, pb, 0, db, pb, pb});
        } else {
            DML_OPERATOR_DESC desc = {operation == GRAD ? DML_OPERATOR_BATCH_NORMALIZATION_GRAD
                                                        : DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD,
                                      &grad};
            bench_dml_prepare(
                &job, device, &desc, 5, 3,
                (void*[]){x, dy, parameters[0], parameters[1], parameters[2], dx, parameters[4], parameters[5]},
                (uint64_t[]){db, db, pb, pb, pb, db, pb, pb});
        }
        double seconds = bench_dml_time(&job);
        bench_dml_release(&job);
        char workload[96], peer_label[128];
        workload_name(workload, sizeof workload, operation, s);
        const char* dtype = bench_dtype_name(type);
        const bench_peer_row* peer = bench_peer_best(ctx, workload, dtype);
        if (peer == NULL) peer = bench_peer_best(ctx, workload, "FLOAT32");
        if (peer)
            snprintf(peer_label, sizeof peer_label, "oneDNN %s %s %s", peer->dtype, peer->layout, peer->implementation);
        double bytes = (double)db * (is_gradient(operation) ? 3 : 2);
        bench_report(ctx, &(bench_row){workload, dtype, channels_last ? "channels-last" : "nchw", "libdml",
                                       job.implementation, seconds, bytes, peer ? peer_label : NULL,
                                       peer ? peer->seconds : 0});
    }
    free(x);
    free(y);
    free(dy);
    free(dx);
    for (int k = 0; k < 7; k++)
        free(parameters[k]);
}

#ifdef DML_BENCH_HAVE_ONEDNN
/* ---- oneDNN (run in the peer children) ---- */

typedef struct dnnl_layout {
    const char* name;
    dnnl_format_tag_t tag;
} dnnl_layout;

/* nChw16c: oneDNN's own blocking on AVX-512 */
static const dnnl_layout dnnl_layouts[] = {
    {"nchw", dnnl_nchw}, {"nChw8c", dnnl_nChw8c}, {"nChw16c", dnnl_nChw16c}, {"channels-last", dnnl_nhwc}};

/* The five operations of one shape, type and layout; nothing when oneDNN
 * has no implementation for the type. */
static void bench_onednn(const bench_dnnl* dnnl, const bn_shape* s, dnnl_data_type_t type, const dnnl_layout* layout) {
    const char* dtype = type == dnnl_f16 ? "FLOAT16" : "FLOAT32";
    dnnl_dim_t dims[4] = {s->sizes[0], s->sizes[1], s->sizes[2], s->sizes[3]};
    dnnl_dim_t parameter_dims[1] = {s->sizes[1]}, scale_shift_dims[2] = {2, s->sizes[1]};
    dnnl_memory_desc_t data_md = bench_dnnl_md(4, dims, type, layout->tag);
    dnnl_memory_desc_t parameter_md = bench_dnnl_md(1, parameter_dims, dnnl_f32, dnnl_a);
    dnnl_memory_desc_t scale_shift_md = bench_dnnl_md(2, scale_shift_dims, dnnl_f32, dnnl_nc);
    double data_bytes = (double)dnnl_memory_desc_get_size(&data_md);
    dnnl_memory_t src = bench_dnnl_memory(dnnl, &data_md, true), dst = bench_dnnl_memory(dnnl, &data_md, false);
    dnnl_memory_t diff_dst = bench_dnnl_memory(dnnl, &data_md, true);
    dnnl_memory_t diff_src = bench_dnnl_memory(dnnl, &data_md, false);
    dnnl_memory_t mean = bench_dnnl_memory(dnnl, &parameter_md, true);
    dnnl_memory_t variance = bench_dnnl_memory(dnnl, &parameter_md, false);
    dnnl_memory_t scale_shift = bench_dnnl_memory(dnnl, &scale_shift_md, true);
    dnnl_memory_t diff_scale_shift = bench_dnnl_memory(dnnl, &scale_shift_md, false);
    for (int operation = 0; operation < OPERATIONS; operation++) {
        unsigned flags = dnnl_use_scaleshift;
        if (operation == INFERENCE) flags |= dnnl_use_global_stats;
        if (operation == TRAINING_RELU) flags |= dnnl_fuse_norm_relu;
        dnnl_batch_normalization_desc_t desc;
        dnnl_primitive_desc_t forward_pd, pd;
        BENCH_CHECK_DNNL(dnnl_batch_normalization_forward_desc_init(
            &desc, operation == INFERENCE ? dnnl_forward_inference : dnnl_forward_training, &data_md, 1e-5f, flags));
        if (dnnl_primitive_desc_create(&forward_pd, &desc, NULL, dnnl->engine, NULL) != dnnl_success) continue;
        if (bench_dnnl_is_reference(forward_pd)) {
            dnnl_primitive_desc_destroy(forward_pd);
            continue;
        }
        pd = forward_pd;
        if (is_gradient(operation)) {
            unsigned backward_flags = dnnl_use_scaleshift | (operation == GRAD ? dnnl_use_global_stats : 0u);
            BENCH_CHECK_DNNL(dnnl_batch_normalization_backward_desc_init(&desc, dnnl_backward, &data_md, &data_md,
                                                                         1e-5f, backward_flags));
            if (dnnl_primitive_desc_create(&pd, &desc, NULL, dnnl->engine, forward_pd) != dnnl_success) {
                dnnl_primitive_desc_destroy(forward_pd);
                continue;
            }
        }
        dnnl_exec_arg_t args[10];
        int arg_count = 0;
        args[arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, src};
        args[arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_MEAN, mean};
        args[arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_VARIANCE, variance};
        args[arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_SCALE_SHIFT, scale_shift};
        if (is_gradient(operation)) {
            args[arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, diff_dst};
            args[arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, diff_src};
            args[arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SCALE_SHIFT, diff_scale_shift};
        } else {
            args[arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_DST, dst};
        }
        dnnl_memory_t workspace = NULL;
        const dnnl_memory_desc_t* workspace_md = dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
        if (workspace_md != NULL && dnnl_memory_desc_get_size(workspace_md) > 0) {
            workspace = bench_dnnl_memory(dnnl, workspace_md, false);
            args[arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, workspace};
        }
        dnnl_primitive_t primitive;
        BENCH_CHECK_DNNL(dnnl_primitive_create(&primitive, pd));
        bench_peer_row row = {.seconds = bench_dnnl_time(dnnl, primitive, arg_count, args),
                              .bytes = data_bytes * (is_gradient(operation) ? 3 : 2)};
        workload_name(row.workload, sizeof row.workload, operation, s);
        snprintf(row.dtype, sizeof row.dtype, "%s", dtype);
        snprintf(row.layout, sizeof row.layout, "%s", layout->name);
        snprintf(row.implementation, sizeof row.implementation, "%s", bench_dnnl_impl(pd));
        bench_peer_emit(&row);
        dnnl_primitive_destroy(primitive);
        if (workspace) dnnl_memory_destroy(workspace);
        if (pd != forward_pd) dnnl_primitive_desc_destroy(pd);
        dnnl_primitive_desc_destroy(forward_pd);
    }
    dnnl_memory_t memories[] = {src, dst, diff_dst, diff_src, mean, variance, scale_shift, diff_scale_shift};
    for (size_t i = 0; i < sizeof memories / sizeof memories[0]; i++)
        dnnl_memory_destroy(memories[i]);
}

static void measure_peer(const bench_dnnl* dnnl, size_t shape, dnnl_data_type_t type, size_t layout) {
    bench_onednn(dnnl, &shapes[shape], type, &dnnl_layouts[layout]);
}
#endif

static const char* shape_name(size_t shape) { return shapes[shape].name; }

/* The five operations of one shape and type, NCHW and channels-last, then
 * oneDNN's rows. */
static void measure(const bench_context* ctx, DMLDevice* device, size_t shape, DML_TENSOR_DATA_TYPE type) {
    for (int channels_last = 0; channels_last < 2; channels_last++)
        bench_libdml(ctx, device, &shapes[shape], type, channels_last);
    for (int operation = 0; operation < OPERATIONS; operation++) {
        char workload[96];
        workload_name(workload, sizeof workload, operation, &shapes[shape]);
        bench_report_peers(ctx, workload, bench_dtype_name(type));
    }
}

int main(int argc, char** argv) {
    bench_program program = {.title = "batch normalization",
                             .shapes = sizeof shapes / sizeof shapes[0],
                             .shape_name = shape_name,
                             .measure = measure};
#ifdef DML_BENCH_HAVE_ONEDNN
    program.peer_layouts = sizeof dnnl_layouts / sizeof dnnl_layouts[0];
    program.measure_peer = measure_peer;
#endif
    return bench_run_program(&program, argc, argv);
}
