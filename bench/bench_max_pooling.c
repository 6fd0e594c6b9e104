/* Max pooling on the CPU: libdml against oneDNN (the peer), FLOAT32 NCHW,
 * on the pooling layers of common CNNs. For each: median time, GB/s, the
 * fraction of the copy-bandwidth floor, and the ratio to oneDNN measured in
 * the same run (> 1: libdml is faster).
 *
 * Bytes counted are each library's own: libdml's forward reads the input and
 * writes the output (and the indices), its gradient reads the input and the
 * input gradient and writes the output gradient; oneDNN's backward reads its
 * workspace instead of the input. */
#include <dml/dml.h>
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

typedef struct pooling_shape {
    const char* name;
    uint32_t n, c, h, w, window, stride, padding;
} pooling_shape;

static const pooling_shape shapes[] = {
    {"resnet stem 16x64x112x112 3x3/2 pad 1", 16, 64, 112, 112, 3, 2, 1},
    {"vgg 16x128x56x56 2x2/2", 16, 128, 56, 56, 2, 2, 0},
    {"overlapping 32x256x14x14 3x3/1 pad 1", 32, 256, 14, 14, 3, 1, 1},
};

static uint32_t output_size(uint32_t in, const pooling_shape* s) {
    return (in + 2 * s->padding - s->window) / s->stride + 1;
}

#define CHECK_DML(call)                                                                                                \
    do {                                                                                                               \
        HRESULT status_ = (call);                                                                                      \
        if (FAILED(status_)) {                                                                                         \
            fprintf(stderr, "%s: %s\n", #call, dmlGetLastErrorMessage());                                              \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

/* ---- libdml ---- */

typedef struct dml_job {
    DMLCompiledOperator* compiled;
    DML_DISPATCH_BINDINGS bindings;
    DML_BUFFER_BINDING buffers[4], temporary_buffer;
    DML_BINDING_DESC inputs[2], outputs[2];
    void* temporary; /* the workspace the plan asked for (TemporaryResourceSize) */
    char implementation[64];
} dml_job;

static void run_dml(void* context) {
    dml_job* job = context;
    CHECK_DML(dmlDispatch(job->compiled, &job->bindings));
}

static DML_TENSOR_DESC* tensor(DML_BUFFER_TENSOR_DESC* buffer, DML_TENSOR_DESC* desc, DML_TENSOR_DATA_TYPE type,
                               const UINT* sizes) {
    *buffer = (DML_BUFFER_TENSOR_DESC){
        type, DML_TENSOR_FLAG_NONE, 4, sizes, NULL, DMLCalcBufferTensorSize(type, 4, sizes, NULL), 0};
    *desc = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, buffer};
    return desc;
}

static DMLCompiledOperator* compile(DMLDevice* device, const DML_OPERATOR_DESC* desc) {
    DMLOperator* op;
    DMLCompiledOperator* compiled;
    CHECK_DML(dmlCreateOperator(device, desc, &op));
    CHECK_DML(dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &compiled));
    dmlReleaseOperator(op);
    CHECK_DML(dmlInitializeOperator(compiled, 0, NULL, NULL));
    return compiled;
}

static void bind(dml_job* job, int inputs, int outputs, void* const* buffers, const uint64_t* sizes) {
    for (int i = 0; i < inputs + outputs; i++)
        job->buffers[i] = (DML_BUFFER_BINDING){buffers[i], 0, sizes[i]};
    /* A NULL buffer binds NONE: an absent optional tensor. */
    for (int i = 0; i < inputs; i++)
        job->inputs[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &job->buffers[i]};
    for (int i = 0; i < outputs; i++)
        job->outputs[i] = (DML_BINDING_DESC){buffers[inputs + i] ? DML_BINDING_TYPE_BUFFER : DML_BINDING_TYPE_NONE,
                                             &job->buffers[inputs + i]};
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

static void release(dml_job* job) {
    dmlReleaseCompiledOperator(job->compiled);
    free(job->temporary);
}

static void* filled(uint64_t bytes) {
    float* data = malloc(bytes);
    for (uint64_t i = 0; i < bytes / 4; i++)
        data[i] = (float)((i * 2654435761u) % 1000) * 0.001f;
    return data;
}

#ifdef DML_BENCH_HAVE_ONEDNN
/* ---- oneDNN ---- */

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
    dnnl_exec_arg_t args[4];
} dnnl_job;

static void run_dnnl(void* context) {
    dnnl_job* job = context;
    CHECK_DNNL(dnnl_primitive_execute(job->primitive, job->stream, job->arg_count, job->args));
    CHECK_DNNL(dnnl_stream_wait(job->stream));
}

typedef struct dnnl_times {
    double inference, training, backward;
    double training_bytes, backward_bytes;
} dnnl_times;

static dnnl_times time_onednn(const pooling_shape* s, void* src, void* dst, void* diff_dst, void* diff_src) {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    CHECK_DNNL(dnnl_engine_create(&engine, dnnl_cpu, 0));
    CHECK_DNNL(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    dnnl_dims_t src_dims = {s->n, s->c, s->h, s->w};
    dnnl_dims_t dst_dims = {s->n, s->c, output_size(s->h, s), output_size(s->w, s)};
    dnnl_memory_desc_t src_md, dst_md;
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, dnnl_nchw));
    CHECK_DNNL(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, dnnl_nchw));
    dnnl_dims_t strides = {s->stride, s->stride}, kernel = {s->window, s->window}, dilation = {0, 0};
    dnnl_dims_t padding = {s->padding, s->padding};
    dnnl_times times = {0};

    dnnl_memory_t src_mem, dst_mem, diff_dst_mem, diff_src_mem, workspace_mem;
    CHECK_DNNL(dnnl_memory_create(&src_mem, &src_md, engine, src));
    CHECK_DNNL(dnnl_memory_create(&dst_mem, &dst_md, engine, dst));
    CHECK_DNNL(dnnl_memory_create(&diff_dst_mem, &dst_md, engine, diff_dst));
    CHECK_DNNL(dnnl_memory_create(&diff_src_mem, &src_md, engine, diff_src));

    /* Inference: no workspace. */
    dnnl_pooling_v2_desc_t desc;
    dnnl_primitive_desc_t pd;
    CHECK_DNNL(dnnl_pooling_v2_forward_desc_init(&desc, dnnl_forward_inference, dnnl_pooling_max, &src_md, &dst_md,
                                                 strides, kernel, dilation, padding, padding));
    CHECK_DNNL(dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL));
    dnnl_job job = {.stream = stream, .arg_count = 2};
    CHECK_DNNL(dnnl_primitive_create(&job.primitive, pd));
    job.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, src_mem};
    job.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, dst_mem};
    times.inference = bench_median_seconds(run_dnnl, &job, 3, 21);
    dnnl_primitive_destroy(job.primitive);
    dnnl_primitive_desc_destroy(pd);

    /* Training: the workspace records the argmax (the counterpart of indices). */
    dnnl_primitive_desc_t training_pd;
    CHECK_DNNL(dnnl_pooling_v2_forward_desc_init(&desc, dnnl_forward_training, dnnl_pooling_max, &src_md, &dst_md,
                                                 strides, kernel, dilation, padding, padding));
    CHECK_DNNL(dnnl_primitive_desc_create(&training_pd, &desc, NULL, engine, NULL));
    const dnnl_memory_desc_t* workspace_md = dnnl_primitive_desc_query_md(training_pd, dnnl_query_workspace_md, 0);
    CHECK_DNNL(dnnl_memory_create(&workspace_mem, workspace_md, engine, DNNL_MEMORY_ALLOCATE));
    double workspace_bytes = (double)dnnl_memory_desc_get_size(workspace_md);
    CHECK_DNNL(dnnl_primitive_create(&job.primitive, training_pd));
    job.arg_count = 3;
    job.args[2] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, workspace_mem};
    times.training = bench_median_seconds(run_dnnl, &job, 3, 21);
    times.training_bytes =
        (double)dnnl_memory_desc_get_size(&src_md) + (double)dnnl_memory_desc_get_size(&dst_md) + workspace_bytes;
    dnnl_primitive_destroy(job.primitive);

    /* Backward from the workspace. */
    CHECK_DNNL(dnnl_pooling_v2_backward_desc_init(&desc, dnnl_pooling_max, &src_md, &dst_md, strides, kernel, dilation,
                                                  padding, padding));
    CHECK_DNNL(dnnl_primitive_desc_create(&pd, &desc, NULL, engine, training_pd));
    CHECK_DNNL(dnnl_primitive_create(&job.primitive, pd));
    job.args[0] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, diff_dst_mem};
    job.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, diff_src_mem};
    job.args[2] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, workspace_mem};
    times.backward = bench_median_seconds(run_dnnl, &job, 3, 21);
    times.backward_bytes =
        (double)dnnl_memory_desc_get_size(&dst_md) + workspace_bytes + (double)dnnl_memory_desc_get_size(&src_md);
    dnnl_primitive_destroy(job.primitive);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_desc_destroy(training_pd);

    dnnl_memory_destroy(src_mem);
    dnnl_memory_destroy(dst_mem);
    dnnl_memory_destroy(diff_dst_mem);
    dnnl_memory_destroy(diff_src_mem);
    dnnl_memory_destroy(workspace_mem);
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
    return times;
}
#endif

int main(void) {
    DMLDevice* device;
    CHECK_DML(dmlCreateDevice(NULL, &device));
#ifdef _OPENMP
    int threads = omp_get_max_threads();
#else
    int threads = 1;
#endif
    double bandwidth = bench_copy_bandwidth(threads);
    printf("max pooling, FLOAT32 NCHW, %d threads; copy bandwidth %.2f GB/s (read + write)\n", threads,
           bandwidth * 1e-9);
#ifndef DML_BENCH_HAVE_ONEDNN
    printf("oneDNN not found at build time: no peer ratios (install libdnnl-dev)\n");
#endif

    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const pooling_shape* s = &shapes[i];
        UINT in_sizes[4] = {s->n, s->c, s->h, s->w};
        UINT out_sizes[4] = {s->n, s->c, output_size(s->h, s), output_size(s->w, s)};
        uint64_t in_bytes = 4ull * s->n * s->c * s->h * s->w;
        uint64_t out_bytes = 4ull * out_sizes[0] * out_sizes[1] * out_sizes[2] * out_sizes[3];
        void* src = filled(in_bytes);
        void* dst = malloc(out_bytes);
        void* indices = malloc(out_bytes);
        void* diff_dst = filled(out_bytes);
        void* diff_src = malloc(in_bytes);

        DML_BUFFER_TENSOR_DESC in_buffer, out_buffer, idx_buffer, grad_buffer;
        DML_TENSOR_DESC in_desc, out_desc, idx_desc, grad_desc;
        UINT strides[2] = {s->stride, s->stride}, window[2] = {s->window, s->window};
        UINT padding[2] = {s->padding, s->padding}, dilations[2] = {1, 1};
        DML_MAX_POOLING2_OPERATOR_DESC forward = {
            tensor(&in_buffer, &in_desc, DML_TENSOR_DATA_TYPE_FLOAT32, in_sizes),
            tensor(&out_buffer, &out_desc, DML_TENSOR_DATA_TYPE_FLOAT32, out_sizes),
            NULL,
            2,
            strides,
            window,
            padding,
            padding,
            dilations};
        DML_OPERATOR_DESC forward_desc = {DML_OPERATOR_MAX_POOLING2, &forward};

        dml_job job, job_indices, job_grad;
        job.compiled = compile(device, &forward_desc);
        bind(&job, 1, 2, (void*[]){src, dst, NULL}, (uint64_t[]){in_bytes, out_bytes, 0});
        double plain = bench_median_seconds(run_dml, &job, 3, 21);
        release(&job);

        forward.OutputIndicesTensor = tensor(&idx_buffer, &idx_desc, DML_TENSOR_DATA_TYPE_UINT32, out_sizes);
        job_indices.compiled = compile(device, &forward_desc);
        bind(&job_indices, 1, 2, (void*[]){src, dst, indices}, (uint64_t[]){in_bytes, out_bytes, out_bytes});
        double with_indices = bench_median_seconds(run_dml, &job_indices, 3, 21);
        release(&job_indices);

        DML_MAX_POOLING_GRAD_OPERATOR_DESC grad = {
            &in_desc, &out_desc, tensor(&grad_buffer, &grad_desc, DML_TENSOR_DATA_TYPE_FLOAT32, in_sizes),
            2,        strides,   window,
            padding,  padding,   dilations};
        DML_OPERATOR_DESC grad_desc_op = {DML_OPERATOR_MAX_POOLING_GRAD, &grad};
        job_grad.compiled = compile(device, &grad_desc_op);
        bind(&job_grad, 2, 1, (void*[]){src, diff_dst, diff_src}, (uint64_t[]){in_bytes, out_bytes, in_bytes});
        double backward = bench_median_seconds(run_dml, &job_grad, 3, 21);
        release(&job_grad);

        double peer_inference = 0, peer_training = 0, peer_backward = 0;
#ifdef DML_BENCH_HAVE_ONEDNN
        dnnl_times peer = time_onednn(s, src, dst, diff_dst, diff_src);
        peer_inference = peer.inference;
        peer_training = peer.training;
        peer_backward = peer.backward;
#endif
        printf("%s\n", s->name);
        char label[160];
        snprintf(label, sizeof label, "  libdml forward [%s]", job.implementation);
        bench_report(label, plain, (double)(in_bytes + out_bytes), bandwidth, peer_inference);
        snprintf(label, sizeof label, "  libdml forward + UINT32 indices [%s] (peer: training)",
                 job_indices.implementation);
        bench_report(label, with_indices, (double)(in_bytes + 2 * out_bytes), bandwidth, peer_training);
        snprintf(label, sizeof label, "  libdml gradient [%s] (peer: backward from workspace)",
                 job_grad.implementation);
        bench_report(label, backward, (double)(2 * in_bytes + out_bytes), bandwidth, peer_backward);
#ifdef DML_BENCH_HAVE_ONEDNN
        bench_report("  oneDNN forward inference", peer.inference, (double)(in_bytes + out_bytes), bandwidth, 0);
        bench_report("  oneDNN forward training", peer.training, peer.training_bytes, bandwidth, 0);
        bench_report("  oneDNN backward", peer.backward, peer.backward_bytes, bandwidth, 0);
#endif
        free(src);
        free(dst);
        free(indices);
        free(diff_dst);
        free(diff_src);
    }
    dmlReleaseDevice(device);
    return 0;
}
