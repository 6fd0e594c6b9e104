/* The CUDA backend: device creation (ordinals, the caller's stream), buffers
 * (allocate, upload, download, fill, the caller's cudaMalloc'ed memory),
 * OWNED_BY_DML inputs, removal on a CUDA fault, and randomized CPU-vs-CUDA
 * comparisons of every CUDA kernel: the CUDA results must equal the CPU's
 * byte for byte (values, indices, gradients, and every byte around them;
 * for ROI align a NaN matches any NaN, as arithmetic NaN payloads differ
 * between x86 and CUDA).
 *
 * Without a usable GPU the program prints "SKIPPED: ..." and exits with 77. */
#define _POSIX_C_SOURCE 200809L

#include <cuda_runtime_api.h>
#include <inttypes.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "roi_cases.h"

extern char** environ;

static DMLDevice* cpu_device(void) {
    DML_DEVICE_DESC desc = {.Backend = DML_BACKEND_CPU};
    DMLDevice* device = NULL;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), S_OK, NULL);
    return device;
}

/* ---- Devices ---- */

TEST_CASE(cuda_device_creation) {
    DMLDevice* device = test_cuda_device();
    EXPECT(dmlGetDeviceBackend(device) == DML_BACKEND_CUDA, "a CUDA device reports the CUDA backend");
    EXPECT(dmlGetDeviceRemovedReason(device) == S_OK, "a new device is healthy");
    DML_FEATURE_LEVEL requested[1] = {DML_FEATURE_LEVEL_6_4};
    DML_FEATURE_QUERY_FEATURE_LEVELS query = {1, requested};
    DML_FEATURE_DATA_FEATURE_LEVELS levels = {0};
    EXPECT_STATUS(dmlCheckFeatureSupport(device, DML_FEATURE_FEATURE_LEVELS, sizeof query, &query, sizeof levels,
                                         &levels), S_OK, NULL);
    dmlReleaseDevice(device);

    int count = 0;
    EXPECT(cudaGetDeviceCount(&count) == cudaSuccess && count >= 1, "cudaGetDeviceCount");
    DML_DEVICE_DESC desc = {.Backend = DML_BACKEND_CUDA, .CudaDeviceOrdinal = count};
    device = NULL;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), E_INVALIDARG, "CudaDeviceOrdinal");
    EXPECT(device == NULL, "no device after a failure");
    desc.CudaDeviceOrdinal = -1;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), E_INVALIDARG, "CudaDeviceOrdinal", "-1");

    /* The caller's current GPU is left as it was. */
    int before = -1, after = -2;
    cudaGetDevice(&before);
    desc.CudaDeviceOrdinal = count - 1;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), S_OK, NULL);
    cudaGetDevice(&after);
    EXPECT(before == after, "current GPU %d before, %d after dmlCreateDevice", before, after);
    dmlReleaseDevice(device);

#if CUDART_VERSION >= 12080
    if (count >= 2) {
        /* A stream of GPU 0 with CudaDeviceOrdinal 1. */
        cudaStream_t stream = NULL;
        EXPECT(cudaSetDevice(0) == cudaSuccess && cudaStreamCreate(&stream) == cudaSuccess, "stream on GPU 0");
        DML_DEVICE_DESC other = {.Backend = DML_BACKEND_CUDA, .CudaDeviceOrdinal = 1, .CudaStream = stream};
        EXPECT_STATUS(dmlCreateDevice(&other, &device), E_INVALIDARG, "CudaStream", "CudaDeviceOrdinal");
        cudaStreamDestroy(stream);
    } else {
        printf("note: one GPU, so the check of a stream of another GPU did not run\n");
    }
#endif
}

TEST_CASE(cuda_buffers) {
    DMLDevice* device = test_cuda_device();
    enum { SIZE = 1000003 };
    uint8_t* host = malloc(SIZE);
    uint8_t* back = malloc(SIZE);
    void* buffer = NULL;
    EXPECT_STATUS(dmlAllocateBuffer(device, SIZE, &buffer), S_OK, NULL);
    EXPECT_STATUS(dmlFill(device, buffer, 0x5A, SIZE), S_OK, NULL);
    EXPECT_STATUS(dmlDownload(device, back, buffer, SIZE), S_OK, NULL);
    size_t wrong = 0;
    for (size_t i = 0; i < SIZE; i++) wrong += back[i] != 0x5A;
    EXPECT(wrong == 0, "dmlFill then dmlDownload: %zu bytes differ", wrong);

    for (size_t i = 0; i < SIZE; i++) host[i] = (uint8_t)test_rand();
    EXPECT_STATUS(dmlUpload(device, buffer, host, SIZE), S_OK, NULL);
    EXPECT_STATUS(dmlFill(device, (uint8_t*)buffer + 17, 0x100 | 0x33, 1000), S_OK, NULL); /* low byte counts */
    EXPECT_STATUS(dmlDownload(device, back, buffer, SIZE), S_OK, NULL);
    memset(host + 17, 0x33, 1000);
    EXPECT(memcmp(host, back, SIZE) == 0, "upload, fill a range, download");
    EXPECT_STATUS(dmlUpload(device, buffer, host, 0), S_OK, NULL);
    EXPECT_STATUS(dmlSynchronize(device), S_OK, NULL);

    /* Running out of GPU memory is an error, not a removal. */
    void* huge = NULL;
    EXPECT_STATUS(dmlAllocateBuffer(device, (UINT64)1 << 52, &huge), E_OUTOFMEMORY, "dmlAllocateBuffer", "cudaMalloc");
    EXPECT(huge == NULL, "no buffer after a failed allocation");
    EXPECT(dmlGetDeviceRemovedReason(device) == S_OK, "out of memory leaves the device usable");
    EXPECT_STATUS(dmlDownload(device, back, buffer, 16), S_OK, NULL);

    dmlFreeBuffer(device, buffer);
    free(host);
    free(back);
    dmlReleaseDevice(device);
}

/* ---- Max pooling problems ---- */

typedef struct pool_case {
    DML_OPERATOR_TYPE type;
    DML_TENSOR_DATA_TYPE value_type;
    DML_TENSOR_DATA_TYPE index_type; /* UNKNOWN: no OutputIndicesTensor */
    uint32_t rank;
    uint32_t in_sizes[5], out_sizes[5];
    UINT strides[3], window[3], start_padding[3], end_padding[3], dilations[3];
    test_tensor in, out, idx, grad_out; /* GRAD: out is InputGradient, grad_out OutputGradient */
    test_layout in_layout, out_layout, idx_layout;
    DML_MAX_POOLING_OPERATOR_DESC pool;
    DML_MAX_POOLING1_OPERATOR_DESC pool1;
    DML_MAX_POOLING2_OPERATOR_DESC pool2;
    DML_MAX_POOLING_GRAD_OPERATOR_DESC grad;
    DML_OPERATOR_DESC op;
} pool_case;

/* The forward output size of §4 in one of its accepted forms (MP-1): floor,
 * ceil, or a little beyond (all-padding windows). */
static uint32_t output_size(uint32_t in, uint32_t window, uint32_t stride, uint32_t dilation, uint32_t start,
                            uint32_t end) {
    uint64_t dilated = (uint64_t)(window - 1) * dilation + 1, padded = (uint64_t)in + start + end;
    if (padded < dilated) return 1 + test_rand_range(0, 1);
    uint32_t floor_size = (uint32_t)((padded - dilated) / stride + 1);
    uint32_t ceil_size = (uint32_t)((padded - dilated + stride - 1) / stride + 1);
    switch (test_rand_range(0, 5)) {
    case 0: return ceil_size;
    case 1: return floor_size + test_rand_range(1, 2);
    default: return floor_size;
    }
}

/* A random geometry; spatial sizes up to max_spatial. Padding reaches past
 * the dilated window at times, so windows of padding alone occur. */
static void random_geometry(pool_case* c, uint32_t rank, bool dilations, uint32_t max_spatial) {
    c->rank = rank;
    c->in_sizes[0] = test_rand_range(1, 2);
    c->in_sizes[1] = test_rand_range(1, 3);
    c->out_sizes[0] = c->in_sizes[0];
    c->out_sizes[1] = c->in_sizes[1];
    for (uint32_t i = 0; i < rank - 2; i++) {
        uint32_t in = test_rand_range(1, max_spatial);
        c->in_sizes[2 + i] = in;
        c->window[i] = test_rand_range(1, 4);
        /* At times a stride so large that every window after the first starts past the input. */
        c->strides[i] = test_rand_range(0, 15) == 0 ? UINT32_MAX - test_rand_range(0, 7) : test_rand_range(1, 3);
        c->dilations[i] = dilations ? test_rand_range(1, 3) : 1;
        uint32_t dilated = (c->window[i] - 1) * c->dilations[i] + 1;
        c->start_padding[i] = test_rand_range(0, test_rand_range(0, 3) == 0 ? dilated + 1 : 2);
        c->end_padding[i] = test_rand_range(0, 2);
        c->out_sizes[2 + i] = output_size(in, c->window[i], c->strides[i], c->dilations[i], c->start_padding[i],
                                          c->end_padding[i]);
    }
}

static void build_descs(pool_case* c) {
    UINT spatial = c->rank - 2;
    c->pool = (DML_MAX_POOLING_OPERATOR_DESC){&c->in.desc, &c->out.desc, spatial, c->strides, c->window,
                                              c->start_padding, c->end_padding};
    const DML_TENSOR_DESC* indices = c->index_type != DML_TENSOR_DATA_TYPE_UNKNOWN ? &c->idx.desc : NULL;
    c->pool1 = (DML_MAX_POOLING1_OPERATOR_DESC){&c->in.desc, &c->out.desc, indices, spatial, c->strides, c->window,
                                                c->start_padding, c->end_padding};
    c->pool2 = (DML_MAX_POOLING2_OPERATOR_DESC){&c->in.desc, &c->out.desc, indices, spatial, c->strides, c->window,
                                                c->start_padding, c->end_padding, c->dilations};
    c->grad = (DML_MAX_POOLING_GRAD_OPERATOR_DESC){&c->in.desc, &c->out.desc, &c->grad_out.desc, spatial,
                                                   c->strides, c->window, c->start_padding, c->end_padding,
                                                   c->dilations};
    const void* desc = c->type == DML_OPERATOR_MAX_POOLING    ? (const void*)&c->pool
                       : c->type == DML_OPERATOR_MAX_POOLING1 ? (const void*)&c->pool1
                       : c->type == DML_OPERATOR_MAX_POOLING2 ? (const void*)&c->pool2
                                                              : (const void*)&c->grad;
    c->op = (DML_OPERATOR_DESC){c->type, desc};
}

static const char* describe(const pool_case* c) {
    static char text[512];
    int used = snprintf(text, sizeof text, "%s %s%s%s rank %u in [", dmlOperatorTypeName(c->type),
                        dmlDataTypeName(c->value_type), c->index_type ? " indices " : "",
                        c->index_type ? dmlDataTypeName(c->index_type) : "", c->rank);
    for (uint32_t i = 0; i < c->rank; i++) used += snprintf(text + used, sizeof text - (size_t)used, " %u", c->in_sizes[i]);
    used += snprintf(text + used, sizeof text - (size_t)used, " ] out [");
    for (uint32_t i = 0; i < c->rank; i++) used += snprintf(text + used, sizeof text - (size_t)used, " %u", c->out_sizes[i]);
    used += snprintf(text + used, sizeof text - (size_t)used, " ] window/stride/pad/dilation");
    for (uint32_t i = 0; i + 2 < c->rank; i++)
        used += snprintf(text + used, sizeof text - (size_t)used, " %u/%u/%u,%u/%u", c->window[i], c->strides[i],
                         c->start_padding[i], c->end_padding[i], c->dilations[i]);
    snprintf(text + used, sizeof text - (size_t)used, " layouts %s/%s/%s", test_layout_name(c->in_layout),
             test_layout_name(c->out_layout), test_layout_name(c->idx_layout));
    return text;
}

/* Input values: random over the type's range, or from a small set so that
 * ties are frequent; floats get NaN, infinities and signed zeros at times. */
static void fill_input(test_buffer* b, const test_tensor* t, DML_TENSOR_DATA_TYPE type) {
    bool ties = test_rand_bool();
    bool specials = test_type_is_float(type) && test_rand_bool();
    test_fill_random(b, t, -100, 100);
    for (uint64_t i = 0; i < t->element_count; i++) {
        uint64_t offset = test_tensor_offset(t, i);
        if (ties) test_store(type, b->data, offset, (double)test_rand_range(0, 4) + (type == DML_TENSOR_DATA_TYPE_INT8 ? -2 : 0));
        if (!specials) continue;
        static const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
        if (test_rand_range(0, 5) == 0) test_store(type, b->data, offset, special[test_rand_range(0, 4)]);
    }
}

/* A second guarded buffer with the same bytes, guards and poison included. */
static void clone_buffer(test_buffer* copy, const test_buffer* original) {
    test_buffer_alloc(copy, original->size);
    memcpy(copy->block, original->block, (size_t)original->size + 2 * TEST_GUARD_BYTES);
}

/* Expects the CPU's and CUDA's buffers identical, guards and poison included;
 * context describes the problem. */
static bool expect_same(const test_buffer* cpu, const test_buffer* cuda, const test_tensor* t, const char* what,
                        const char* context) {
    test_buffer_check_guards(cuda, what);
    test_buffer_check_unaddressed(cuda, t, what);
    uint64_t total = cpu->size + 2 * TEST_GUARD_BYTES;
    for (uint64_t i = 0; i < total; i++)
        if (cpu->block[i] != cuda->block[i]) {
            long long byte = (long long)i - TEST_GUARD_BYTES;
            uint32_t element_size = dmlDataTypeSize(t->buffer.DataType);
            uint64_t element = byte >= 0 ? (uint64_t)byte / element_size : 0;
            EXPECT(false, "%s: byte %lld differs (element offset %" PRIu64 ": CPU 0x%" PRIx64 ", CUDA 0x%" PRIx64
                          "); %s", what, byte, element,
                   byte >= 0 ? test_load_bits(t->buffer.DataType, cpu->data, element) : 0,
                   byte >= 0 ? test_load_bits(t->buffer.DataType, cuda->data, element) : 0, context);
            return false;
        }
    return true;
}

static const DML_TENSOR_DATA_TYPE forward_types[] = {
    DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_FLOAT16, DML_TENSOR_DATA_TYPE_INT64,
    DML_TENSOR_DATA_TYPE_INT32,   DML_TENSOR_DATA_TYPE_INT16,   DML_TENSOR_DATA_TYPE_INT8,
    DML_TENSOR_DATA_TYPE_UINT64,  DML_TENSOR_DATA_TYPE_UINT32,  DML_TENSOR_DATA_TYPE_UINT16,
    DML_TENSOR_DATA_TYPE_UINT8};
enum { FORWARD_TYPE_COUNT = sizeof forward_types / sizeof forward_types[0] };

/* Runs one forward case on both devices and compares. */
static void compare_forward(DMLDevice* cpu, DMLDevice* cuda, pool_case* c) {
    test_tensor_init(&c->in, c->value_type, c->rank, c->in_sizes, c->in_layout);
    test_tensor_init(&c->out, c->value_type, c->rank, c->out_sizes, c->out_layout);
    if (c->index_type) test_tensor_init(&c->idx, c->index_type, c->rank, c->out_sizes, c->idx_layout);
    build_descs(c);

    test_buffer in_cpu, out_cpu, idx_cpu = {0}, in_cuda, out_cuda, idx_cuda = {0};
    test_buffer_alloc(&in_cpu, c->in.buffer.TotalTensorSizeInBytes);
    fill_input(&in_cpu, &c->in, c->value_type);
    clone_buffer(&in_cuda, &in_cpu);
    test_buffer_alloc(&out_cpu, c->out.buffer.TotalTensorSizeInBytes);
    test_buffer_alloc(&out_cuda, c->out.buffer.TotalTensorSizeInBytes);
    if (c->index_type) {
        test_buffer_alloc(&idx_cpu, c->idx.buffer.TotalTensorSizeInBytes);
        test_buffer_alloc(&idx_cuda, c->idx.buffer.TotalTensorSizeInBytes);
    }
    bool has_slot = c->type != DML_OPERATOR_MAX_POOLING;
    test_buffer* cpu_outputs[2] = {&out_cpu, c->index_type ? &idx_cpu : NULL};
    test_buffer* cuda_outputs[2] = {&out_cuda, c->index_type ? &idx_cuda : NULL};
    HRESULT cpu_status = test_run(cpu, &c->op, 1, (test_buffer*[]){&in_cpu}, has_slot ? 2 : 1, cpu_outputs);
    HRESULT cuda_status = test_run(cuda, &c->op, 1, (test_buffer*[]){&in_cuda}, has_slot ? 2 : 1, cuda_outputs);
    EXPECT(cpu_status == S_OK && cuda_status == S_OK, "CPU %s, CUDA %s (%s); %s", dmlStatusName(cpu_status),
           dmlStatusName(cuda_status), dmlGetLastErrorMessage(), describe(c));
    if (cpu_status == S_OK && cuda_status == S_OK) {
        expect_same(&in_cpu, &in_cuda, &c->in, "InputTensor (unchanged)", describe(c));
        expect_same(&out_cpu, &out_cuda, &c->out, "OutputTensor", describe(c));
        if (c->index_type) expect_same(&idx_cpu, &idx_cuda, &c->idx, "OutputIndicesTensor", describe(c));
    }
    test_buffer_free(&in_cpu);
    test_buffer_free(&in_cuda);
    test_buffer_free(&out_cpu);
    test_buffer_free(&out_cuda);
    if (c->index_type) {
        test_buffer_free(&idx_cpu);
        test_buffer_free(&idx_cuda);
    }
}

TEST_CASE(cuda_max_pooling_matches_cpu) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    static const DML_OPERATOR_TYPE types[] = {DML_OPERATOR_MAX_POOLING, DML_OPERATOR_MAX_POOLING1,
                                              DML_OPERATOR_MAX_POOLING2};
    /* With DML_TEST_CUDA_DEVICE=1 on a machine of several GPUs, the device is
     * not the current GPU: every libdml call must switch to it and back. */
    int current = -1, now = -2;
    cudaGetDevice(&current);
    for (int iteration = 0; iteration < 400 && !test_case_failed(); iteration++) {
        pool_case* c = calloc(1, sizeof *c);
        c->type = types[test_rand_range(0, 2)];
        c->value_type = forward_types[iteration % FORWARD_TYPE_COUNT];
        if (c->type != DML_OPERATOR_MAX_POOLING) {
            uint32_t pick = test_rand_range(0, 2);
            c->index_type = pick == 0   ? DML_TENSOR_DATA_TYPE_UNKNOWN
                            : pick == 1 ? DML_TENSOR_DATA_TYPE_UINT32
                                        : DML_TENSOR_DATA_TYPE_UINT64;
        }
        uint32_t rank = test_rand_range(4, 5);
        random_geometry(c, rank, c->type == DML_OPERATOR_MAX_POOLING2, rank == 4 ? 11 : 6);
        c->in_layout = test_random_layout(true);
        c->out_layout = test_random_layout(false);
        c->idx_layout = test_random_layout(false);
        compare_forward(cpu, cuda, c);
        free(c);
        cudaGetDevice(&now);
        EXPECT(now == current, "current GPU %d before, %d after the dispatches", current, now);
    }
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* Runs one gradient case on both devices and compares; FLOAT32 and FLOAT16
 * gradients must be bit-identical (same order of FLOAT32 sums). */
static void compare_grad(DMLDevice* cpu, DMLDevice* cuda, pool_case* c) {
    test_tensor_init(&c->in, c->value_type, c->rank, c->in_sizes, c->in_layout);
    test_tensor_init(&c->out, c->value_type, c->rank, c->out_sizes, c->idx_layout);
    test_tensor_init(&c->grad_out, c->value_type, c->rank, c->in_sizes, c->out_layout);
    build_descs(c);

    test_buffer in_cpu, dy_cpu, dx_cpu, in_cuda, dy_cuda, dx_cuda;
    test_buffer_alloc(&in_cpu, c->in.buffer.TotalTensorSizeInBytes);
    fill_input(&in_cpu, &c->in, c->value_type);
    clone_buffer(&in_cuda, &in_cpu);
    test_buffer_alloc(&dy_cpu, c->out.buffer.TotalTensorSizeInBytes);
    test_fill_random(&dy_cpu, &c->out, -1, 1); /* non-integers: the summation order shows */
    clone_buffer(&dy_cuda, &dy_cpu);
    test_buffer_alloc(&dx_cpu, c->grad_out.buffer.TotalTensorSizeInBytes);
    test_buffer_alloc(&dx_cuda, c->grad_out.buffer.TotalTensorSizeInBytes);
    HRESULT cpu_status = test_run(cpu, &c->op, 2, (test_buffer*[]){&in_cpu, &dy_cpu}, 1, (test_buffer*[]){&dx_cpu});
    HRESULT cuda_status =
        test_run(cuda, &c->op, 2, (test_buffer*[]){&in_cuda, &dy_cuda}, 1, (test_buffer*[]){&dx_cuda});
    EXPECT(cpu_status == S_OK && cuda_status == S_OK, "CPU %s, CUDA %s (%s); %s", dmlStatusName(cpu_status),
           dmlStatusName(cuda_status), dmlGetLastErrorMessage(), describe(c));
    if (cpu_status == S_OK && cuda_status == S_OK) {
        expect_same(&dx_cpu, &dx_cuda, &c->grad_out, "OutputGradientTensor", describe(c));
        /* Run again: the same bits (no scheduling-dependent sums). */
        test_buffer_poison(&dx_cuda);
        EXPECT_STATUS(test_run(cuda, &c->op, 2, (test_buffer*[]){&in_cuda, &dy_cuda}, 1, (test_buffer*[]){&dx_cuda}),
                      S_OK, NULL);
        expect_same(&dx_cpu, &dx_cuda, &c->grad_out, "OutputGradientTensor (second run)", describe(c));
    }
    test_buffer_free(&in_cpu);
    test_buffer_free(&in_cuda);
    test_buffer_free(&dy_cpu);
    test_buffer_free(&dy_cuda);
    test_buffer_free(&dx_cpu);
    test_buffer_free(&dx_cuda);
}

TEST_CASE(cuda_max_pooling_grad_matches_cpu) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    for (int iteration = 0; iteration < 300 && !test_case_failed(); iteration++) {
        pool_case* c = calloc(1, sizeof *c);
        c->type = DML_OPERATOR_MAX_POOLING_GRAD;
        c->value_type = iteration % 2 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        uint32_t rank = test_rand_range(4, 5);
        random_geometry(c, rank, true, rank == 4 ? 11 : 6);
        /* Overlapping windows most of the time: stride below the window. */
        for (uint32_t i = 0; i + 2 < rank; i++)
            if (test_rand_range(0, 3) != 0 && c->window[i] > 1 && c->strides[i] >= c->window[i]) {
                c->strides[i] = test_rand_range(1, c->window[i] - 1);
                c->out_sizes[2 + i] = output_size(c->in_sizes[2 + i], c->window[i], c->strides[i], c->dilations[i],
                                                  c->start_padding[i], c->end_padding[i]);
            }
        c->in_layout = test_random_layout(true);
        c->idx_layout = test_random_layout(true); /* InputGradient */
        c->out_layout = test_random_layout(false);
        compare_grad(cpu, cuda, c);
        free(c);
    }
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* Problems larger than one pass of the grid: every thread loops. */
TEST_CASE(cuda_max_pooling_large) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    pool_case* c = calloc(1, sizeof *c);
    c->type = DML_OPERATOR_MAX_POOLING2;
    c->value_type = DML_TENSOR_DATA_TYPE_FLOAT16;
    c->index_type = DML_TENSOR_DATA_TYPE_UINT64;
    c->rank = 4;
    uint32_t in_sizes[4] = {2, 16, 384, 384}, out_sizes[4] = {2, 16, 384, 384};
    memcpy(c->in_sizes, in_sizes, sizeof in_sizes);
    memcpy(c->out_sizes, out_sizes, sizeof out_sizes);
    for (int i = 0; i < 2; i++) {
        c->window[i] = 3;
        c->strides[i] = 1;
        c->start_padding[i] = c->end_padding[i] = 1;
        c->dilations[i] = 1;
    }
    c->in_layout = TEST_LAYOUT_PERMUTED;
    c->out_layout = TEST_LAYOUT_PACKED;
    c->idx_layout = TEST_LAYOUT_PACKED;
    compare_forward(cpu, cuda, c);
    memset(c, 0, sizeof *c);

    c->type = DML_OPERATOR_MAX_POOLING_GRAD;
    c->value_type = DML_TENSOR_DATA_TYPE_FLOAT32;
    c->rank = 4;
    uint32_t grad_out_sizes[4] = {2, 16, 192, 192};
    memcpy(c->in_sizes, in_sizes, sizeof in_sizes);
    memcpy(c->out_sizes, grad_out_sizes, sizeof grad_out_sizes);
    for (int i = 0; i < 2; i++) {
        c->window[i] = 3;
        c->strides[i] = 2;
        c->start_padding[i] = c->end_padding[i] = 1;
        c->dilations[i] = 1;
    }
    c->in_layout = TEST_LAYOUT_PACKED;
    c->idx_layout = TEST_LAYOUT_PACKED;
    c->out_layout = TEST_LAYOUT_PADDED;
    compare_grad(cpu, cuda, c);
    free(c);
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* Binding errors on a device: the same statuses and messages as on the CPU
 * (validation is shared), and the device stays usable. */
static void check_binding_errors(DMLDevice* device) {
    pool_case* c = calloc(1, sizeof *c);
    c->type = DML_OPERATOR_MAX_POOLING2;
    c->value_type = DML_TENSOR_DATA_TYPE_FLOAT32;
    random_geometry(c, 4, true, 8);
    test_tensor_init(&c->in, c->value_type, 4, c->in_sizes, TEST_LAYOUT_PACKED);
    test_tensor_init(&c->out, c->value_type, 4, c->out_sizes, TEST_LAYOUT_PACKED);
    build_descs(c);
    uint64_t in_bytes = c->in.buffer.TotalTensorSizeInBytes, out_bytes = c->out.buffer.TotalTensorSizeInBytes;
    test_buffer in, small, both;
    test_buffer_alloc(&in, in_bytes);
    test_buffer_alloc(&small, out_bytes - 4);
    test_buffer_alloc(&both, in_bytes > out_bytes ? in_bytes : out_bytes);
    EXPECT_STATUS(test_run(device, &c->op, 1, (test_buffer*[]){&in}, 2, (test_buffer*[]){&small, NULL}),
                  E_INVALIDARG, "MAX_POOLING2", "OutputTensor", "SizeInBytes");
    /* One buffer bound as input and output (the harness mirrors it once). */
    EXPECT_STATUS(test_run(device, &c->op, 1, (test_buffer*[]){&both}, 2, (test_buffer*[]){&both, NULL}),
                  E_INVALIDARG, "MAX_POOLING2", "OutputTensor", "overlaps", "InputTensor");
    EXPECT(dmlGetDeviceRemovedReason(device) == S_OK, "binding errors do not remove the device (T-8)");
    test_buffer_free(&in);
    test_buffer_free(&small);
    test_buffer_free(&both);
    free(c);
}

TEST_CASE(cuda_binding_errors_keep_device) {
    DMLDevice* cpu = cpu_device();
    check_binding_errors(cpu);
    dmlReleaseDevice(cpu);
    DMLDevice* cuda = test_cuda_device();
    check_binding_errors(cuda);
    dmlReleaseDevice(cuda);
}

/* ---- ROI families: CPU vs CUDA (roi_cases.h) ---- */

static void compare_roi_pooling(DMLDevice* cpu, DMLDevice* cuda, bool large) {
    DML_TENSOR_DATA_TYPE type = test_rand_bool() ? DML_TENSOR_DATA_TYPE_FLOAT32 : DML_TENSOR_DATA_TYPE_FLOAT16;
    uint32_t batch = test_rand_range(1, 3), channels = large ? 64 : test_rand_range(1, 4);
    uint32_t height = large ? 61 : test_rand_range(1, 12), width = large ? 83 : test_rand_range(1, 12);
    uint32_t roi_count = large ? 500 : test_rand_range(1, 10);
    uint32_t pooled_height = large ? 7 : test_rand_range(1, 4), pooled_width = large ? 7 : test_rand_range(1, 4);
    float scale = random_roi_scale();
    uint32_t in_sizes[4] = {batch, channels, height, width}, roi_sizes[4] = {1, 1, roi_count, 5};
    uint32_t out_sizes[4] = {roi_count, channels, pooled_height, pooled_width};
    test_layout layouts[3] = {large ? TEST_LAYOUT_PERMUTED : test_random_layout(true),
                              large ? TEST_LAYOUT_PACKED : test_random_layout(true),
                              large ? TEST_LAYOUT_PADDED : test_random_layout(false)};
    twin_buffer input, rois, output;
    twin_init(&input, type, 4, in_sizes, layouts[0]);
    twin_init(&rois, type, 4, roi_sizes, layouts[1]);
    twin_init(&output, type, 4, out_sizes, layouts[2]);
    double* image = random_image(input.tensor.element_count, true);
    twin_fill(&input, image);
    double* rows = malloc((size_t)roi_count * 5 * sizeof *rows);
    for (uint32_t r = 0; r < roi_count; r++) {
        uint32_t kind = test_rand_range(0, 19);
        /* Batch ids: mostly valid integers; fractions truncate; out of range and NaN at times (RP-5). */
        rows[r * 5] = kind == 0 ? NAN : kind < 3 ? test_rand_double(-1.5, batch + 0.5) : test_rand_range(0, batch - 1);
        for (int k = 1; k < 5; k++) rows[r * 5 + k] = random_roi_coordinate(k % 2 ? width : height, scale, !large);
    }
    twin_fill(&rois, rows);

    DML_ROI_POOLING_OPERATOR_DESC desc = {&input.tensor.desc, &rois.tensor.desc, &output.tensor.desc, scale,
                                          {pooled_width, pooled_height}};
    DML_OPERATOR_DESC op = {DML_OPERATOR_ROI_POOLING, &desc};
    char context[256];
    snprintf(context, sizeof context, "ROI_POOLING %s in [%u %u %u %u] R %u pooled %ux%u scale %g layouts %s/%s/%s",
             dmlDataTypeName(type), batch, channels, height, width, roi_count, pooled_height, pooled_width, scale,
             test_layout_name(layouts[0]), test_layout_name(layouts[1]), test_layout_name(layouts[2]));
    HRESULT cpu_status = test_run(cpu, &op, 2, (test_buffer*[]){&input.cpu, &rois.cpu}, 1, (test_buffer*[]){&output.cpu});
    HRESULT cuda_status =
        test_run(cuda, &op, 2, (test_buffer*[]){&input.cuda, &rois.cuda}, 1, (test_buffer*[]){&output.cuda});
    EXPECT(cpu_status == S_OK && cuda_status == S_OK, "CPU %s, CUDA %s (%s); %s", dmlStatusName(cpu_status),
           dmlStatusName(cuda_status), dmlGetLastErrorMessage(), context);
    /* A copy of an input element or +0: byte for byte, NaN payloads included. */
    if (cpu_status == S_OK && cuda_status == S_OK)
        expect_same(&output.cpu, &output.cuda, &output.tensor, "ROI_POOLING OutputTensor", context);
    twin_free(&input);
    twin_free(&rois);
    twin_free(&output);
    free(image);
    free(rows);
}

TEST_CASE(cuda_roi_pooling_matches_cpu) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    for (int iteration = 0; iteration < 300 && !test_case_failed(); iteration++) compare_roi_pooling(cpu, cuda, false);
    /* More outputs than one pass of the grid: every thread loops. */
    compare_roi_pooling(cpu, cuda, true);
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* Runs `run` on the CPU once and on CUDA `cuda_runs` times (outputs poisoned
 * before each), expecting every CUDA run equal to the CPU's. */
static void compare_roi_align_run(DMLDevice* cpu, DMLDevice* cuda, roi_align_run* run, int cuda_runs) {
    test_buffer *inputs[4], *outputs[2];
    roi_align_run_buffers(run, false, inputs, outputs);
    HRESULT status = test_run(cpu, &run->op, run->input_count, inputs, run->output_count, outputs);
    EXPECT(status == S_OK, "CPU %s (%s); %s", dmlStatusName(status), dmlGetLastErrorMessage(), run->context);
    roi_align_run_buffers(run, true, inputs, outputs);
    for (int attempt = 1; attempt <= cuda_runs && status == S_OK && !test_case_failed(); attempt++) {
        for (uint32_t i = 0; i < run->output_count; i++)
            if (outputs[i]) test_buffer_poison(outputs[i]);
        status = test_run(cuda, &run->op, run->input_count, inputs, run->output_count, outputs);
        EXPECT(status == S_OK, "CUDA %s (%s); %s", dmlStatusName(status), dmlGetLastErrorMessage(), run->context);
        char label[32];
        snprintf(label, sizeof label, "CUDA run %d", attempt);
        if (status == S_OK) roi_align_run_compare(run, label);
    }
}

TEST_CASE(cuda_roi_align_matches_cpu) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    for (int iteration = 0; iteration < 400 && !test_case_failed(); iteration++) {
        roi_align_case c;
        random_roi_align_case(&c);
        roi_align_run run;
        roi_align_forward_setup(&run, &c);
        compare_roi_align_run(cpu, cuda, &run, 1);
        roi_align_run_free(&run);
        roi_align_case_free(&c);
    }
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

TEST_CASE(cuda_roi_align_grad_matches_cpu) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    for (int iteration = 0; iteration < 400 && !test_case_failed(); iteration++) {
        roi_align_case c;
        random_roi_align_case(&c);
        /* InputTensor is required for MAX and for the ROI gradient (§3). */
        bool want_roi_gradient = test_rand_bool();
        bool want_output_gradient = !want_roi_gradient || test_rand_bool();
        bool with_input = c.reduction == DML_REDUCE_FUNCTION_MAX || want_roi_gradient || test_rand_bool();
        roi_align_run run;
        roi_align_grad_setup(&run, &c, with_input, want_output_gradient, want_roi_gradient);
        compare_roi_align_run(cpu, cuda, &run, 2);
        roi_align_run_free(&run);
        roi_align_case_free(&c);
    }
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* Many overlapping ROIs on few images (more than one scan chunk of 256 ROIs
 * per image), more tile tasks than one pass of the grid, non-integer
 * gradients: the feature gradient's sums must be the same bits on every CUDA
 * run and equal to the CPU's; likewise the forward pass and the ROI gradient. */
TEST_CASE(cuda_roi_align_large_overlapping_deterministic) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    for (int variant = 0; variant < 4 && !test_case_failed(); variant++) {
        roi_align_case c;
        large_roi_align_case(&c, variant);
        roi_align_run run;
        roi_align_forward_setup(&run, &c);
        compare_roi_align_run(cpu, cuda, &run, 1);
        roi_align_run_free(&run);
        roi_align_grad_setup(&run, &c, true, true, true);
        compare_roi_align_run(cpu, cuda, &run, 3);
        roi_align_run_free(&run);
        roi_align_case_free(&c);
    }
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* ---- The caller's memory and stream ---- */

/* MAX_POOLING2 on a caller-created stream with cudaMalloc'ed buffers: the
 * dispatch is ordered on that stream between the caller's own copies. */
TEST_CASE(cuda_caller_stream_and_memory) {
    DMLDevice* probe = test_cuda_device(); /* skips without a GPU */
    dmlReleaseDevice(probe);
    cudaStream_t stream = NULL;
    EXPECT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreate");
    DML_DEVICE_DESC desc = {.Backend = DML_BACKEND_CUDA, .CudaStream = stream};
    DMLDevice* cuda = NULL;
    EXPECT_STATUS(dmlCreateDevice(&desc, &cuda), S_OK, NULL);
    DMLDevice* cpu = cpu_device();
    if (cuda == NULL) return;

    pool_case* c = calloc(1, sizeof *c);
    c->type = DML_OPERATOR_MAX_POOLING2;
    c->value_type = DML_TENSOR_DATA_TYPE_FLOAT32;
    c->index_type = DML_TENSOR_DATA_TYPE_UINT32;
    uint32_t in_sizes[4] = {2, 3, 64, 48}, out_sizes[4] = {2, 3, 32, 24};
    c->rank = 4;
    memcpy(c->in_sizes, in_sizes, sizeof in_sizes);
    memcpy(c->out_sizes, out_sizes, sizeof out_sizes);
    for (int i = 0; i < 2; i++) {
        c->window[i] = c->strides[i] = 2;
        c->dilations[i] = 1;
    }
    test_tensor_init(&c->in, c->value_type, 4, c->in_sizes, TEST_LAYOUT_PACKED);
    test_tensor_init(&c->out, c->value_type, 4, c->out_sizes, TEST_LAYOUT_PACKED);
    test_tensor_init(&c->idx, c->index_type, 4, c->out_sizes, TEST_LAYOUT_PACKED);
    build_descs(c);
    uint64_t in_bytes = c->in.buffer.TotalTensorSizeInBytes, out_bytes = c->out.buffer.TotalTensorSizeInBytes;
    test_buffer in, out, idx;
    test_buffer_alloc(&in, in_bytes);
    test_fill_random(&in, &c->in, -10, 10);
    test_buffer_alloc(&out, out_bytes);
    test_buffer_alloc(&idx, out_bytes);
    EXPECT_STATUS(test_run(cpu, &c->op, 1, (test_buffer*[]){&in}, 2, (test_buffer*[]){&out, &idx}), S_OK, NULL);

    /* The caller's memory, its pinned host buffers and its stream; no libdml
     * synchronization at all: the caller's stream orders everything. */
    void *d_in = NULL, *d_out = NULL, *d_idx = NULL, *h_in = NULL, *h_out = NULL, *h_idx = NULL;
    EXPECT(cudaMalloc(&d_in, in_bytes) == cudaSuccess && cudaMalloc(&d_out, out_bytes) == cudaSuccess &&
               cudaMalloc(&d_idx, out_bytes) == cudaSuccess,
           "cudaMalloc");
    EXPECT(cudaMallocHost(&h_in, in_bytes) == cudaSuccess && cudaMallocHost(&h_out, out_bytes) == cudaSuccess &&
               cudaMallocHost(&h_idx, out_bytes) == cudaSuccess,
           "cudaMallocHost");
    if (!test_case_failed()) {
        memcpy(h_in, in.data, in_bytes);
        cudaMemsetAsync(d_out, 0xCD, out_bytes, stream);
        cudaMemcpyAsync(d_in, h_in, in_bytes, cudaMemcpyHostToDevice, stream);
        DMLOperator* op = NULL;
        DMLCompiledOperator* compiled = NULL;
        EXPECT_STATUS(dmlCreateOperator(cuda, &c->op, &op), S_OK, NULL);
        EXPECT_STATUS(dmlCompileOperator(cuda, op, DML_EXECUTION_FLAG_NONE, &compiled), S_OK, NULL);
        EXPECT_STATUS(dmlInitializeOperator(compiled, 0, NULL, NULL), S_OK, NULL);
        DML_BUFFER_BINDING in_buffer = {d_in, 0, in_bytes}, out_buffer = {d_out, 0, out_bytes},
                           idx_buffer = {d_idx, 0, out_bytes};
        DML_BINDING_DESC inputs[1] = {{DML_BINDING_TYPE_BUFFER, &in_buffer}};
        DML_BINDING_DESC outputs[2] = {{DML_BINDING_TYPE_BUFFER, &out_buffer}, {DML_BINDING_TYPE_BUFFER, &idx_buffer}};
        DML_DISPATCH_BINDINGS bindings = {1, inputs, 2, outputs, {DML_BINDING_TYPE_NONE, NULL},
                                          {DML_BINDING_TYPE_NONE, NULL}};
        EXPECT_STATUS(dmlDispatch(compiled, &bindings), S_OK, NULL);
        cudaMemcpyAsync(h_out, d_out, out_bytes, cudaMemcpyDeviceToHost, stream);
        cudaMemcpyAsync(h_idx, d_idx, out_bytes, cudaMemcpyDeviceToHost, stream);
        EXPECT(cudaStreamSynchronize(stream) == cudaSuccess, "cudaStreamSynchronize");
        EXPECT(memcmp(h_out, out.data, out_bytes) == 0, "values as on the CPU");
        EXPECT(memcmp(h_idx, idx.data, out_bytes) == 0, "indices as on the CPU");
        dmlReleaseCompiledOperator(compiled);
        dmlReleaseOperator(op);
    }
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_idx);
    cudaFreeHost(h_in);
    cudaFreeHost(h_out);
    cudaFreeHost(h_idx);
    test_buffer_free(&in);
    test_buffer_free(&out);
    test_buffer_free(&idx);
    free(c);
    dmlReleaseDevice(cuda);
    dmlReleaseDevice(cpu);
    EXPECT(cudaStreamDestroy(stream) == cudaSuccess, "the caller's stream outlives the device and stays valid");
}

/* OWNED_BY_DML: dmlInitializeOperator copies the input into the persistent
 * resource on the device (the backend's device-to-device copy). */
TEST_CASE(cuda_owned_by_dml_input) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    pool_case* c = calloc(1, sizeof *c);
    c->type = DML_OPERATOR_MAX_POOLING1;
    c->value_type = DML_TENSOR_DATA_TYPE_INT32;
    random_geometry(c, 4, false, 9);
    test_tensor_init(&c->in, c->value_type, 4, c->in_sizes, TEST_LAYOUT_PACKED);
    test_tensor_init(&c->out, c->value_type, 4, c->out_sizes, TEST_LAYOUT_PACKED);
    build_descs(c);
    test_buffer in, expected;
    test_buffer_alloc(&in, c->in.buffer.TotalTensorSizeInBytes);
    test_fill_random(&in, &c->in, 0, 0);
    test_buffer_alloc(&expected, c->out.buffer.TotalTensorSizeInBytes);
    EXPECT_STATUS(test_run(cpu, &c->op, 1, (test_buffer*[]){&in}, 2, (test_buffer*[]){&expected, NULL}), S_OK, NULL);

    c->in.buffer.Flags = DML_TENSOR_FLAG_OWNED_BY_DML;
    uint64_t in_bytes = in.size, out_bytes = expected.size;
    DMLOperator* op = NULL;
    DMLCompiledOperator* compiled = NULL;
    EXPECT_STATUS(dmlCreateOperator(cuda, &c->op, &op), S_OK, NULL);
    EXPECT_STATUS(dmlCompileOperator(cuda, op, DML_EXECUTION_FLAG_NONE, &compiled), S_OK, NULL);
    DML_BINDING_PROPERTIES properties = {0};
    EXPECT_STATUS(dmlGetBindingProperties(compiled, &properties), S_OK, NULL);
    void *d_in = NULL, *d_out = NULL, *persistent = NULL;
    EXPECT_STATUS(dmlAllocateBuffer(cuda, in_bytes, &d_in), S_OK, NULL);
    EXPECT_STATUS(dmlAllocateBuffer(cuda, out_bytes, &d_out), S_OK, NULL);
    EXPECT_STATUS(dmlAllocateBuffer(cuda, properties.PersistentResourceSize, &persistent), S_OK, NULL);
    if (!test_case_failed()) {
        EXPECT_STATUS(dmlUpload(cuda, d_in, in.data, in_bytes), S_OK, NULL);
        DML_BUFFER_BINDING in_buffer = {d_in, 0, in_bytes}, out_buffer = {d_out, 0, out_bytes},
                           persistent_buffer = {persistent, 0, properties.PersistentResourceSize};
        DML_BINDING_DESC init_inputs[1] = {{DML_BINDING_TYPE_BUFFER, &in_buffer}};
        DML_BINDING_DESC persistent_binding = {DML_BINDING_TYPE_BUFFER, &persistent_buffer};
        EXPECT_STATUS(dmlInitializeOperator(compiled, 1, init_inputs, &persistent_binding), S_OK, NULL);
        EXPECT_STATUS(dmlFill(cuda, d_in, 0, in_bytes), S_OK, NULL); /* the captured copy is what counts now */
        DML_BINDING_DESC inputs[1] = {{DML_BINDING_TYPE_NONE, NULL}};
        DML_BINDING_DESC outputs[2] = {{DML_BINDING_TYPE_BUFFER, &out_buffer}, {DML_BINDING_TYPE_NONE, NULL}};
        DML_DISPATCH_BINDINGS bindings = {1, inputs, 2, outputs, {DML_BINDING_TYPE_NONE, NULL}, persistent_binding};
        EXPECT_STATUS(dmlDispatch(compiled, &bindings), S_OK, NULL);
        uint8_t* got = malloc(out_bytes);
        EXPECT_STATUS(dmlDownload(cuda, got, d_out, out_bytes), S_OK, NULL);
        EXPECT(memcmp(got, expected.data, out_bytes) == 0, "computed from the persistent copy, as on the CPU");
        free(got);
    }
    dmlFreeBuffer(cuda, d_in);
    dmlFreeBuffer(cuda, d_out);
    dmlFreeBuffer(cuda, persistent);
    dmlReleaseCompiledOperator(compiled);
    dmlReleaseOperator(op);
    test_buffer_free(&in);
    test_buffer_free(&expected);
    free(c);
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* ---- Device removal on a CUDA fault ---- */

/* A kernel reading an unmapped device address faults; the fault is sticky
 * for the whole process, so it is provoked in a child process (this program,
 * run again with DML_TEST_CUDA_FAULT_CHILD=1 and only this case). */
TEST_CASE(cuda_fault_removes_device) {
    DMLDevice* cuda = test_cuda_device();
    if (getenv("DML_TEST_CUDA_FAULT_CHILD") == NULL) {
        dmlReleaseDevice(cuda);
        char* argv[] = {"test_cuda_backend", "cuda_fault_removes_device", NULL};
        setenv("DML_TEST_CUDA_FAULT_CHILD", "1", 1);
        pid_t child = 0;
        int spawned = posix_spawn(&child, "/proc/self/exe", NULL, NULL, argv, environ);
        unsetenv("DML_TEST_CUDA_FAULT_CHILD");
        EXPECT(spawned == 0, "posix_spawn: %s", strerror(spawned));
        int wait_status = 0;
        if (spawned == 0) waitpid(child, &wait_status, 0);
        EXPECT(spawned == 0 && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0,
               "the fault case failed in its child process (its output is above)");
        return;
    }
    /* 1x1x8x8, 2x2 windows, stride 2: every window reads the input. */
    pool_case* c = calloc(1, sizeof *c);
    c->type = DML_OPERATOR_MAX_POOLING2;
    c->value_type = DML_TENSOR_DATA_TYPE_FLOAT32;
    c->rank = 4;
    uint32_t in_sizes[4] = {1, 1, 8, 8}, out_sizes[4] = {1, 1, 4, 4};
    memcpy(c->in_sizes, in_sizes, sizeof in_sizes);
    memcpy(c->out_sizes, out_sizes, sizeof out_sizes);
    for (int i = 0; i < 2; i++) {
        c->window[i] = c->strides[i] = 2;
        c->dilations[i] = 1;
    }
    test_tensor_init(&c->in, c->value_type, 4, c->in_sizes, TEST_LAYOUT_PACKED);
    test_tensor_init(&c->out, c->value_type, 4, c->out_sizes, TEST_LAYOUT_PACKED);
    build_descs(c);
    void* out = NULL;
    EXPECT_STATUS(dmlAllocateBuffer(cuda, c->out.buffer.TotalTensorSizeInBytes, &out), S_OK, NULL);
    DMLOperator* op = NULL;
    DMLCompiledOperator* compiled = NULL;
    EXPECT_STATUS(dmlCreateOperator(cuda, &c->op, &op), S_OK, NULL);
    EXPECT_STATUS(dmlCompileOperator(cuda, op, DML_EXECUTION_FLAG_NONE, &compiled), S_OK, NULL);
    DML_BUFFER_BINDING in_buffer = {(void*)(uintptr_t)0x1000, 0, c->in.buffer.TotalTensorSizeInBytes};
    DML_BUFFER_BINDING out_buffer = {out, 0, c->out.buffer.TotalTensorSizeInBytes};
    DML_BINDING_DESC inputs[1] = {{DML_BINDING_TYPE_BUFFER, &in_buffer}};
    DML_BINDING_DESC outputs[2] = {{DML_BINDING_TYPE_BUFFER, &out_buffer}, {DML_BINDING_TYPE_NONE, NULL}};
    DML_DISPATCH_BINDINGS bindings = {1, inputs, 2, outputs, {DML_BINDING_TYPE_NONE, NULL},
                                      {DML_BINDING_TYPE_NONE, NULL}};
    HRESULT dispatched = dmlDispatch(compiled, &bindings); /* asynchronous: the fault shows later */
    EXPECT(dispatched == S_OK || dispatched == DXGI_ERROR_DEVICE_REMOVED, "dispatch: %s", dmlStatusName(dispatched));
    if (dispatched == S_OK)
        EXPECT_STATUS(dmlSynchronize(cuda), DXGI_ERROR_DEVICE_REMOVED, "device removed", "dmlSynchronize",
                      "cudaStreamSynchronize");
    printf("fault reported as: %s\n", dmlGetLastErrorMessage());
    EXPECT(dmlGetDeviceRemovedReason(cuda) == DXGI_ERROR_DRIVER_INTERNAL_ERROR, "removed reason %s",
           dmlStatusName(dmlGetDeviceRemovedReason(cuda)));
    /* Removed: every call fails the same way, nothing aborts. */
    EXPECT_STATUS(dmlDispatch(compiled, &bindings), DXGI_ERROR_DEVICE_REMOVED, "removed");
    EXPECT_STATUS(dmlSynchronize(cuda), DXGI_ERROR_DEVICE_REMOVED, "removed");
    void* more = NULL;
    EXPECT_STATUS(dmlAllocateBuffer(cuda, 16, &more), DXGI_ERROR_DEVICE_REMOVED, "removed");
    dmlReleaseCompiledOperator(compiled);
    dmlReleaseOperator(op);
    dmlFreeBuffer(cuda, out);
    dmlReleaseDevice(cuda);
    free(c);
}
