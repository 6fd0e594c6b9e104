/* Batch normalization on the CPU: libdml against oneDNN (the peer), the four
 * operators (TRAINING also with fused RELU), FLOAT32 and FLOAT16, NCHW and
 * channels-last (NHWC strides over the same logical {N,C,H,W} tensor). For
 * each: median time, GB/s, the fraction of the copy-bandwidth floor, and the
 * ratio to oneDNN's best layout measured in the same run (> 1: libdml is
 * faster). oneDNN runs FLOAT32 (its CPU batch normalization has no f16 on
 * this machine); FLOAT16 rows are compared with its FLOAT32 time.
 *
 * Bytes are the minimum: every element-wise input read once and every
 * element-wise output written once (parameters are negligible):
 * inference and TRAINING x + y, the GRADs x + dy + dx. */
#include <dml/dml.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench.h"

#ifdef DML_BENCH_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

typedef struct bn_shape {
    const char* name;
    uint32_t n, c, h, w;
} bn_shape;

static const bn_shape shapes[] = {
    {"issue 11 32x256x56x56", 32, 256, 56, 56},
    {"resnet stem 16x64x112x112", 16, 64, 112, 112},
    {"resnet conv5 32x512x7x7", 32, 512, 7, 7},
};

enum {
    WORKLOAD_INFERENCE,
    WORKLOAD_TRAINING,
    WORKLOAD_TRAINING_RELU,
    WORKLOAD_GRAD,
    WORKLOAD_TRAINING_GRAD,
    WORKLOADS
};
static const char* workload_names[WORKLOADS] = {"BATCH_NORMALIZATION", "BATCH_NORMALIZATION_TRAINING",
                                                "BATCH_NORMALIZATION_TRAINING + RELU", "BATCH_NORMALIZATION_GRAD",
                                                "BATCH_NORMALIZATION_TRAINING_GRAD"};

#define CHECK_DML(call)                                                                                                \
    do {                                                                                                               \
        HRESULT status_ = (call);                                                                                      \
        if (FAILED(status_)) {                                                                                         \
            fprintf(stderr, "%s: %s\n", #call, dmlGetLastErrorMessage());                                              \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

/* Buffers of one shape and type, shared by every workload. */
typedef struct buffers {
    void *x, *y, *dy, *dx;
    void *mean, *variance, *scale, *bias, *out_mean, *out_variance, *out_scale_gradient, *out_bias_gradient;
    uint64_t data_bytes, parameter_bytes;
} buffers;

/* Values in [0.5, 1) (FLOAT32 or FLOAT16 bits), the same pattern for both. */
static void* filled(uint64_t bytes, bool half, double constant) {
    void* data = malloc(bytes);
    uint64_t count = bytes / (half ? 2 : 4);
    for (uint64_t i = 0; i < count; i++) {
        uint32_t step = (uint32_t)((i * 2654435761u) % 1024);
        if (half)
            ((uint16_t*)data)[i] = constant > 0 ? (uint16_t)0x3C00u : (uint16_t)(0x3800u + step); /* 1.0 or [0.5, 1) */
        else
            ((float*)data)[i] = constant > 0 ? (float)constant : 0.5f + (float)step / 2048.0f;
    }
    return data;
}

static void buffers_init(buffers* b, const bn_shape* s, bool half) {
    uint64_t element = half ? 2 : 4;
    b->data_bytes = element * s->n * s->c * s->h * s->w;
    b->parameter_bytes = element * s->c;
    b->x = filled(b->data_bytes, half, 0);
    b->dy = filled(b->data_bytes, half, 0);
    b->y = filled(b->data_bytes, half, 0);
    b->dx = filled(b->data_bytes, half, 0);
    b->mean = filled(b->parameter_bytes, half, 0);
    b->variance = filled(b->parameter_bytes, half, 1.0);
    b->scale = filled(b->parameter_bytes, half, 1.0);
    b->bias = filled(b->parameter_bytes, half, 0);
    b->out_mean = malloc(b->parameter_bytes);
    b->out_variance = malloc(b->parameter_bytes);
    b->out_scale_gradient = malloc(b->parameter_bytes);
    b->out_bias_gradient = malloc(b->parameter_bytes);
}

static void buffers_free(buffers* b) {
    void* all[] = {b->x,
                   b->y,
                   b->dy,
                   b->dx,
                   b->mean,
                   b->variance,
                   b->scale,
                   b->bias,
                   b->out_mean,
                   b->out_variance,
                   b->out_scale_gradient,
                   b->out_bias_gradient};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* ---- libdml ---- */

typedef struct dml_job {
    DMLCompiledOperator* compiled;
    DML_DISPATCH_BINDINGS bindings;
    DML_BUFFER_BINDING buffers[8], temporary_buffer;
    DML_BINDING_DESC inputs[5], outputs[3];
    void* temporary; /* the workspace the plan asked for (TemporaryResourceSize) */
    char implementation[64];
} dml_job;

static void run_dml(void* context) {
    dml_job* job = context;
    CHECK_DML(dmlDispatch(job->compiled, &job->bindings));
}

/* The tensors of one operator: data {N,C,H,W} (NCHW or NHWC strides), parameters {1,C,1,1}. */
typedef struct descs {
    UINT data_sizes[4], data_strides[4], parameter_sizes[4];
    DML_BUFFER_TENSOR_DESC data_buffer, parameter_buffer;
    DML_TENSOR_DESC data, parameter;
} descs;

static void descs_init(descs* d, const bn_shape* s, DML_TENSOR_DATA_TYPE type, bool nhwc) {
    UINT sizes[4] = {s->n, s->c, s->h, s->w}, strides[4] = {s->c * s->h * s->w, 1, s->w * s->c, s->c};
    UINT parameter_sizes[4] = {1, s->c, 1, 1};
    memcpy(d->data_sizes, sizes, sizeof sizes);
    memcpy(d->data_strides, strides, sizeof strides);
    memcpy(d->parameter_sizes, parameter_sizes, sizeof parameter_sizes);
    const UINT* data_strides = nhwc ? d->data_strides : NULL;
    d->data_buffer = (DML_BUFFER_TENSOR_DESC){type,
                                              DML_TENSOR_FLAG_NONE,
                                              4,
                                              d->data_sizes,
                                              data_strides,
                                              DMLCalcBufferTensorSize(type, 4, sizes, data_strides),
                                              0};
    d->parameter_buffer = (DML_BUFFER_TENSOR_DESC){type, DML_TENSOR_FLAG_NONE,
                                                   4,    d->parameter_sizes,
                                                   NULL, DMLCalcBufferTensorSize(type, 4, parameter_sizes, NULL),
                                                   0};
    d->data = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, &d->data_buffer};
    d->parameter = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, &d->parameter_buffer};
}

static void compile_and_bind(dml_job* job, DMLDevice* device, const DML_OPERATOR_DESC* desc, int inputs, int outputs,
                             void* const* data, const uint64_t* sizes) {
    DMLOperator* op;
    CHECK_DML(dmlCreateOperator(device, desc, &op));
    CHECK_DML(dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &job->compiled));
    dmlReleaseOperator(op);
    CHECK_DML(dmlInitializeOperator(job->compiled, 0, NULL, NULL));
    for (int i = 0; i < inputs + outputs; i++)
        job->buffers[i] = (DML_BUFFER_BINDING){data[i], 0, sizes[i]};
    /* A NULL buffer binds NONE: an absent optional tensor. */
    for (int i = 0; i < inputs; i++)
        job->inputs[i] =
            (DML_BINDING_DESC){data[i] ? DML_BINDING_TYPE_BUFFER : DML_BINDING_TYPE_NONE, &job->buffers[i]};
    for (int i = 0; i < outputs; i++)
        job->outputs[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &job->buffers[inputs + i]};
    job->bindings =
        (DML_DISPATCH_BINDINGS){(UINT)inputs, job->inputs, (UINT)outputs, job->outputs, {0, NULL}, {0, NULL}};
    DML_COMPILED_OPERATOR_INFO info;
    CHECK_DML(dmlGetCompiledOperatorInfo(job->compiled, &info));
    snprintf(job->implementation, sizeof job->implementation, "%s", info.ImplementationName);
    job->temporary = NULL;
    if (info.TemporaryResourceSize > 0) {
        job->temporary = malloc(info.TemporaryResourceSize);
        job->temporary_buffer = (DML_BUFFER_BINDING){job->temporary, 0, info.TemporaryResourceSize};
        job->bindings.TemporaryResource = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &job->temporary_buffer};
    }
}

/* Times one workload; its implementation's name goes to `implementation`. */
static double time_dml(DMLDevice* device, int workload, const bn_shape* s, DML_TENSOR_DATA_TYPE type, bool nhwc,
                       buffers* b, char* implementation, size_t implementation_size) {
    descs d;
    descs_init(&d, s, type, nhwc);
    DML_TENSOR_DESC *data = &d.data, *parameter = &d.parameter;
    uint64_t db = d.data_buffer.TotalTensorSizeInBytes, pb = d.parameter_buffer.TotalTensorSizeInBytes;
    DML_ACTIVATION_RELU_OPERATOR_DESC relu = {NULL, NULL};
    DML_OPERATOR_DESC relu_desc = {DML_OPERATOR_ACTIVATION_RELU, &relu};
    dml_job job;
    switch (workload) {
    case WORKLOAD_INFERENCE: {
        DML_BATCH_NORMALIZATION_OPERATOR_DESC op = {data, parameter, parameter, parameter, parameter,
                                                    data, 1,         1e-5f,     NULL};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_BATCH_NORMALIZATION, &op};
        compile_and_bind(&job, device, &desc, 5, 1, (void*[]){b->x, b->mean, b->variance, b->scale, b->bias, b->y},
                         (uint64_t[]){db, pb, pb, pb, pb, db});
        break;
    }
    case WORKLOAD_TRAINING:
    case WORKLOAD_TRAINING_RELU: {
        DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC op = {
            data,      parameter, parameter,
            NULL,      data,      parameter,
            parameter, 1e-5f,     workload == WORKLOAD_TRAINING_RELU ? &relu_desc : NULL};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, &op};
        compile_and_bind(&job, device, &desc, 4, 3,
                         (void*[]){b->x, b->scale, b->bias, NULL, b->y, b->out_mean, b->out_variance},
                         (uint64_t[]){db, pb, pb, 0, db, pb, pb});
        break;
    }
    default: { /* the GRADs share one field list */
        DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC op = {data, data,      parameter, parameter, parameter,
                                                         data, parameter, parameter, 1e-5f};
        DML_OPERATOR_DESC desc = {workload == WORKLOAD_GRAD ? DML_OPERATOR_BATCH_NORMALIZATION_GRAD
                                                            : DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD,
                                  &op};
        compile_and_bind(
            &job, device, &desc, 5, 3,
            (void*[]){b->x, b->dy, b->mean, b->variance, b->scale, b->dx, b->out_scale_gradient, b->out_bias_gradient},
            (uint64_t[]){db, db, pb, pb, pb, db, pb, pb});
        break;
    }
    }
    double seconds = bench_median_seconds(run_dml, &job, 3, 21);
    snprintf(implementation, implementation_size, "%s", job.implementation);
    dmlReleaseCompiledOperator(job.compiled);
    free(job.temporary);
    return seconds;
}

static double workload_bytes(int workload, uint64_t data_bytes) {
    return (double)data_bytes * (workload == WORKLOAD_GRAD || workload == WORKLOAD_TRAINING_GRAD ? 3 : 2);
}

/* ---- oneDNN ---- */

enum { PEER_LAYOUTS = 3 };
static const char* peer_layout_names[PEER_LAYOUTS] = {"nchw", "nChw8c", "nhwc"};

#ifdef DML_BENCH_HAVE_ONEDNN
#define CHECK_DNNL(call)                                                                                               \
    do {                                                                                                               \
        dnnl_status_t status_ = (call);                                                                                \
        if (status_ != dnnl_success) {                                                                                 \
            fprintf(stderr, "%s failed: %d\n", #call, (int)status_);                                                   \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

typedef struct dnnl_job {
    dnnl_primitive_t primitive;
    dnnl_stream_t stream;
    int arg_count;
    dnnl_exec_arg_t args[12];
} dnnl_job;

static void run_dnnl(void* context) {
    dnnl_job* job = context;
    CHECK_DNNL(dnnl_primitive_execute(job->primitive, job->stream, job->arg_count, job->args));
    CHECK_DNNL(dnnl_stream_wait(job->stream));
}

static dnnl_memory_t dnnl_memory(const dnnl_memory_desc_t* md, dnnl_engine_t engine) {
    dnnl_memory_t memory;
    CHECK_DNNL(dnnl_memory_create(&memory, md, engine, DNNL_MEMORY_ALLOCATE));
    void* data;
    CHECK_DNNL(dnnl_memory_get_data_handle(memory, &data));
    size_t count = dnnl_memory_desc_get_size(md) / 4;
    for (size_t i = 0; i < count; i++)
        ((float*)data)[i] = 0.5f + (float)((i * 2654435761u) % 1024) / 2048.0f;
    return memory;
}

/* FLOAT32 times of each workload in each layout, and oneDNN's implementation. */
typedef struct peer_times {
    double seconds[WORKLOADS][PEER_LAYOUTS]; /* 0 where oneDNN has none */
    char implementation[WORKLOADS][PEER_LAYOUTS][48];
} peer_times;

static void time_onednn(const bn_shape* s, peer_times* times) {
    static const dnnl_format_tag_t tags[PEER_LAYOUTS] = {dnnl_nchw, dnnl_nChw8c, dnnl_nhwc};
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    CHECK_DNNL(dnnl_engine_create(&engine, dnnl_cpu, 0));
    CHECK_DNNL(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    dnnl_dims_t dims = {s->n, s->c, s->h, s->w}, parameter_dims = {s->c}, scale_shift_dims = {2, s->c};
    dnnl_memory_desc_t parameter_md, scale_shift_md;
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&parameter_md, 1, parameter_dims, dnnl_f32, dnnl_a));
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&scale_shift_md, 2, scale_shift_dims, dnnl_f32, dnnl_nc));
    /* One {2, C} scale-shift tensor (dnnl_use_scaleshift): separate scale and
     * shift tensors send oneDNN 2.6 to its reference implementation. */
    dnnl_memory_t scale_shift = dnnl_memory(&scale_shift_md, engine);
    dnnl_memory_t diff_scale_shift = dnnl_memory(&scale_shift_md, engine);
    dnnl_memory_t mean = dnnl_memory(&parameter_md, engine), variance = dnnl_memory(&parameter_md, engine);
    for (int layout = 0; layout < PEER_LAYOUTS; layout++) {
        dnnl_memory_desc_t data_md;
        CHECK_DNNL(dnnl_memory_desc_init_by_tag(&data_md, 4, dims, dnnl_f32, tags[layout]));
        dnnl_memory_t src = dnnl_memory(&data_md, engine), dst = dnnl_memory(&data_md, engine);
        dnnl_memory_t diff_dst = dnnl_memory(&data_md, engine), diff_src = dnnl_memory(&data_md, engine);
        for (int workload = 0; workload < WORKLOADS; workload++) {
            unsigned flags = dnnl_use_scaleshift;
            if (workload == WORKLOAD_INFERENCE) flags |= dnnl_use_global_stats;
            if (workload == WORKLOAD_TRAINING_RELU) flags |= dnnl_fuse_norm_relu;
            bool backward = workload == WORKLOAD_GRAD || workload == WORKLOAD_TRAINING_GRAD;
            dnnl_batch_normalization_desc_t desc;
            dnnl_primitive_desc_t forward_pd, pd;
            CHECK_DNNL(dnnl_batch_normalization_forward_desc_init(
                &desc, workload == WORKLOAD_INFERENCE ? dnnl_forward_inference : dnnl_forward_training, &data_md, 1e-5f,
                flags));
            CHECK_DNNL(dnnl_primitive_desc_create(&forward_pd, &desc, NULL, engine, NULL));
            pd = forward_pd;
            if (backward) {
                /* GRAD treats the statistics as constants: oneDNN's backward with global statistics. */
                unsigned backward_flags = dnnl_use_scaleshift;
                if (workload == WORKLOAD_GRAD) backward_flags |= dnnl_use_global_stats;
                CHECK_DNNL(dnnl_batch_normalization_backward_desc_init(&desc, dnnl_backward, &data_md, &data_md, 1e-5f,
                                                                       backward_flags));
                if (dnnl_primitive_desc_create(&pd, &desc, NULL, engine, forward_pd) != dnnl_success) {
                    dnnl_primitive_desc_destroy(forward_pd);
                    continue;
                }
            }
            dnnl_job job = {.stream = stream, .arg_count = 0};
            CHECK_DNNL(dnnl_primitive_create(&job.primitive, pd));
            dnnl_exec_arg_t* a = job.args;
            a[job.arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, src};
            a[job.arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_MEAN, mean};
            a[job.arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_VARIANCE, variance};
            a[job.arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_SCALE_SHIFT, scale_shift};
            if (backward) {
                a[job.arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, diff_dst};
                a[job.arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, diff_src};
                a[job.arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SCALE_SHIFT, diff_scale_shift};
            } else {
                a[job.arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_DST, dst};
            }
            dnnl_memory_t workspace = NULL;
            const dnnl_memory_desc_t* workspace_md = dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
            if (workspace_md != NULL && dnnl_memory_desc_get_size(workspace_md) > 0) {
                CHECK_DNNL(dnnl_memory_create(&workspace, workspace_md, engine, DNNL_MEMORY_ALLOCATE));
                a[job.arg_count++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, workspace};
            }
            const char* name = "?";
            dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
            snprintf(times->implementation[workload][layout], sizeof times->implementation[workload][layout], "%s",
                     name);
            times->seconds[workload][layout] = bench_median_seconds(run_dnnl, &job, 3, 21);
            dnnl_primitive_destroy(job.primitive);
            if (pd != forward_pd) dnnl_primitive_desc_destroy(pd);
            dnnl_primitive_desc_destroy(forward_pd);
            if (workspace) dnnl_memory_destroy(workspace);
        }
        dnnl_memory_destroy(src);
        dnnl_memory_destroy(dst);
        dnnl_memory_destroy(diff_dst);
        dnnl_memory_destroy(diff_src);
    }
    dnnl_memory_t parameters[] = {scale_shift, diff_scale_shift, mean, variance};
    for (size_t i = 0; i < sizeof parameters / sizeof parameters[0]; i++)
        dnnl_memory_destroy(parameters[i]);
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
}
#endif

/* Optional argument: run only the shapes whose name contains it. */
int main(int argc, char** argv) {
    const char* only = argc > 1 ? argv[1] : NULL;
    DMLDevice* device;
    CHECK_DML(dmlCreateDevice(NULL, &device));
#ifdef _OPENMP
    int threads = omp_get_max_threads();
#else
    int threads = 1;
#endif
    double bandwidth = bench_copy_bandwidth(threads);
    printf("batch normalization, %d threads; copy bandwidth %.2f GB/s (read + write)\n", threads, bandwidth * 1e-9);
#ifndef DML_BENCH_HAVE_ONEDNN
    printf("oneDNN not found at build time: no peer ratios (install libdnnl-dev)\n");
#endif
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const bn_shape* s = &shapes[i];
        if (only != NULL && strstr(s->name, only) == NULL) continue;
        peer_times peer = {{{0}}, {{{0}}}};
#ifdef DML_BENCH_HAVE_ONEDNN
        time_onednn(s, &peer);
#endif
        for (int half = 0; half < 2; half++) {
            DML_TENSOR_DATA_TYPE type = half ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
            buffers b;
            buffers_init(&b, s, half);
            printf("%s %s\n", s->name, half ? "FLOAT16 (peer: oneDNN FLOAT32)" : "FLOAT32");
            for (int workload = 0; workload < WORKLOADS; workload++) {
                double best_peer = 0;
                for (int layout = 0; layout < PEER_LAYOUTS; layout++)
                    if (peer.seconds[workload][layout] > 0 &&
                        (best_peer == 0 || peer.seconds[workload][layout] < best_peer))
                        best_peer = peer.seconds[workload][layout];
                for (int nhwc = 0; nhwc < 2; nhwc++) {
                    char implementation[64], label[160];
                    double seconds =
                        time_dml(device, workload, s, type, nhwc, &b, implementation, sizeof implementation);
                    snprintf(label, sizeof label, "  libdml %s %s [%s]", workload_names[workload],
                             nhwc ? "NHWC" : "NCHW", implementation);
                    bench_report(label, seconds, workload_bytes(workload, b.data_bytes), bandwidth, best_peer);
                }
                if (!half)
                    for (int layout = 0; layout < PEER_LAYOUTS; layout++) {
                        if (peer.seconds[workload][layout] == 0) continue;
                        char label[160];
                        snprintf(label, sizeof label, "  oneDNN %s %s [%s]", workload_names[workload],
                                 peer_layout_names[layout], peer.implementation[workload][layout]);
                        bench_report(label, peer.seconds[workload][layout], workload_bytes(workload, b.data_bytes),
                                     bandwidth, 0);
                    }
            }
            buffers_free(&b);
        }
    }
    dmlReleaseDevice(device);
    return 0;
}
