/* The CUDA backend: device creation (ordinals, the caller's stream), buffers
 * (allocate, upload, download, fill, the caller's cudaMalloc'ed memory),
 * OWNED_BY_DML inputs, removal on a CUDA fault, and randomized CPU-vs-CUDA
 * comparisons of every CUDA kernel: max pooling, ROI pooling and ROI align
 * results must equal the CPU's byte for byte (values, indices, gradients, and
 * every byte around them; for ROI align a NaN matches any NaN, as arithmetic
 * NaN payloads differ between x86 and CUDA); batch normalization results
 * agree within the spec's tolerances (FLOAT64 sums in another order) and are
 * bit-identical from run to run.
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

#include "activation_desc.h"
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
    EXPECT_STATUS(
        dmlCheckFeatureSupport(device, DML_FEATURE_FEATURE_LEVELS, sizeof query, &query, sizeof levels, &levels), S_OK,
        NULL);
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
    for (size_t i = 0; i < SIZE; i++)
        wrong += back[i] != 0x5A;
    EXPECT(wrong == 0, "dmlFill then dmlDownload: %zu bytes differ", wrong);

    for (size_t i = 0; i < SIZE; i++)
        host[i] = (uint8_t)test_rand();
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
    bool channels_last; /* 4-D, every tensor packed N, H, W, C in memory instead of the layouts above */
    bool bit_patterns;  /* FLOAT16/FLOAT32 Input drawn from fill_bit_patterns rather than fill_input */
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
        c->out_sizes[2 + i] =
            output_size(in, c->window[i], c->strides[i], c->dilations[i], c->start_padding[i], c->end_padding[i]);
    }
}

static void build_descs(pool_case* c) {
    UINT spatial = c->rank - 2;
    c->pool = (DML_MAX_POOLING_OPERATOR_DESC){&c->in.desc, &c->out.desc,     spatial,       c->strides,
                                              c->window,   c->start_padding, c->end_padding};
    const DML_TENSOR_DESC* indices = c->index_type != DML_TENSOR_DATA_TYPE_UNKNOWN ? &c->idx.desc : NULL;
    c->pool1 = (DML_MAX_POOLING1_OPERATOR_DESC){&c->in.desc, &c->out.desc, indices,          spatial,
                                                c->strides,  c->window,    c->start_padding, c->end_padding};
    c->pool2 = (DML_MAX_POOLING2_OPERATOR_DESC){&c->in.desc, &c->out.desc,     indices,        spatial,     c->strides,
                                                c->window,   c->start_padding, c->end_padding, c->dilations};
    c->grad =
        (DML_MAX_POOLING_GRAD_OPERATOR_DESC){&c->in.desc, &c->out.desc,     &c->grad_out.desc, spatial,     c->strides,
                                             c->window,   c->start_padding, c->end_padding,    c->dilations};
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
    for (uint32_t i = 0; i < c->rank; i++)
        used += snprintf(text + used, sizeof text - (size_t)used, " %u", c->in_sizes[i]);
    used += snprintf(text + used, sizeof text - (size_t)used, " ] out [");
    for (uint32_t i = 0; i < c->rank; i++)
        used += snprintf(text + used, sizeof text - (size_t)used, " %u", c->out_sizes[i]);
    used += snprintf(text + used, sizeof text - (size_t)used, " ] window/stride/pad/dilation");
    for (uint32_t i = 0; i + 2 < c->rank; i++)
        used += snprintf(text + used, sizeof text - (size_t)used, " %u/%u/%u,%u/%u", c->window[i], c->strides[i],
                         c->start_padding[i], c->end_padding[i], c->dilations[i]);
    if (c->channels_last)
        snprintf(text + used, sizeof text - (size_t)used, " layouts channels-last");
    else
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
        if (ties)
            test_store(type, b->data, offset,
                       (double)test_rand_range(0, 4) + (type == DML_TENSOR_DATA_TYPE_INT8 ? -2 : 0));
        if (!specials) continue;
        static const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
        if (test_rand_range(0, 5) == 0) test_store(type, b->data, offset, special[test_rand_range(0, 4)]);
    }
}

/* FLOAT16 or FLOAT32 values from a random run of a few bit patterns (the
 * same list in both encodings), so that ties are frequent: NaN of both signs
 * with payloads (runs of them only: windows of NaN alone), signed zeros,
 * subnormals, infinities and numbers. */
static void fill_bit_patterns(test_buffer* b, const test_tensor* t, DML_TENSOR_DATA_TYPE type) {
    static const uint16_t binary16[] = {0x7E00, 0xFE01, 0x7D00, 0x7E01, 0x0000, 0x8000, 0x0001,
                                        0x8001, 0x03FF, 0xFC00, 0x7C00, 0x3C00, 0xBC00, 0x3C01};
    static const uint32_t binary32[] = {0x7FC00000, 0xFFC00001, 0x7FA00000, 0x7FC00001, 0x00000000,
                                        0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0xFF800000,
                                        0x7F800000, 0x3F800000, 0xBF800000, 0x3F800001};
    enum { COUNT = sizeof binary16 / sizeof binary16[0] };
    _Static_assert(sizeof binary32 / sizeof binary32[0] == COUNT, "one list in two encodings");
    bool half = type == DML_TENSOR_DATA_TYPE_FLOAT16;
    uint32_t first = test_rand_range(0, COUNT - 1), last = test_rand_range(first, COUNT - 1);
    for (uint64_t i = 0; i < t->element_count; i++) {
        uint32_t k = test_rand_range(first, last);
        if (half)
            memcpy(b->data + 2 * test_tensor_offset(t, i), &binary16[k], 2);
        else
            memcpy(b->data + 4 * test_tensor_offset(t, i), &binary32[k], 4);
    }
}

static void fill_case_input(test_buffer* b, const pool_case* c) {
    if (c->bit_patterns)
        fill_bit_patterns(b, &c->in, c->value_type);
    else
        fill_input(b, &c->in, c->value_type);
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
            EXPECT(false,
                   "%s: byte %lld differs (element offset %" PRIu64 ": CPU 0x%" PRIx64 ", CUDA 0x%" PRIx64 "); %s",
                   what, byte, element, byte >= 0 ? test_load_bits(t->buffer.DataType, cpu->data, element) : 0,
                   byte >= 0 ? test_load_bits(t->buffer.DataType, cuda->data, element) : 0, context);
            return false;
        }
    return true;
}

static const DML_TENSOR_DATA_TYPE forward_types[] = {DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_FLOAT16,
                                                     DML_TENSOR_DATA_TYPE_INT64,   DML_TENSOR_DATA_TYPE_INT32,
                                                     DML_TENSOR_DATA_TYPE_INT16,   DML_TENSOR_DATA_TYPE_INT8,
                                                     DML_TENSOR_DATA_TYPE_UINT64,  DML_TENSOR_DATA_TYPE_UINT32,
                                                     DML_TENSOR_DATA_TYPE_UINT16,  DML_TENSOR_DATA_TYPE_UINT8};
enum { FORWARD_TYPE_COUNT = sizeof forward_types / sizeof forward_types[0] };

/* Restrides a 4-D tensor packed channels-last (N, H, W, C in memory): the
 * same bytes as packed. */
static void make_channels_last(test_tensor* t) {
    t->strides[1] = 1;
    t->strides[3] = t->sizes[1];
    t->strides[2] = t->sizes[3] * t->sizes[1];
    t->strides[0] = t->sizes[2] * t->strides[2];
    t->buffer.Strides = t->strides;
}

/* The tensors of a case in its layouts (test_tensor_init, or channels-last). */
static void init_case_tensor(const pool_case* c, test_tensor* t, DML_TENSOR_DATA_TYPE type, const uint32_t* sizes,
                             test_layout layout) {
    test_tensor_init(t, type, c->rank, sizes, c->channels_last ? TEST_LAYOUT_PACKED : layout);
    if (c->channels_last) make_channels_last(t);
}

/* Runs one forward case on both devices and compares. */
static void compare_forward(DMLDevice* cpu, DMLDevice* cuda, pool_case* c) {
    init_case_tensor(c, &c->in, c->value_type, c->in_sizes, c->in_layout);
    init_case_tensor(c, &c->out, c->value_type, c->out_sizes, c->out_layout);
    if (c->index_type) init_case_tensor(c, &c->idx, c->index_type, c->out_sizes, c->idx_layout);
    build_descs(c);

    test_buffer in_cpu, out_cpu, idx_cpu = {0}, in_cuda, out_cuda, idx_cuda = {0};
    test_buffer_alloc(&in_cpu, c->in.buffer.TotalTensorSizeInBytes);
    fill_case_input(&in_cpu, c);
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
    init_case_tensor(c, &c->in, c->value_type, c->in_sizes, c->in_layout);
    init_case_tensor(c, &c->out, c->value_type, c->out_sizes, c->idx_layout);
    init_case_tensor(c, &c->grad_out, c->value_type, c->in_sizes, c->out_layout);
    build_descs(c);

    test_buffer in_cpu, dy_cpu, dx_cpu, in_cuda, dy_cuda, dx_cuda;
    test_buffer_alloc(&in_cpu, c->in.buffer.TotalTensorSizeInBytes);
    fill_case_input(&in_cpu, c);
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

/* The implementation CUDA compiles a run's operator to. */
static const char* cuda_implementation_of(DMLDevice* cuda, const DML_OPERATOR_DESC* desc) {
    static char name[96];
    DMLOperator* op = NULL;
    DMLCompiledOperator* compiled = NULL;
    DML_COMPILED_OPERATOR_INFO info = {0};
    snprintf(name, sizeof name, "(not compiled: %s)", dmlGetLastErrorMessage());
    if (SUCCEEDED(dmlCreateOperator(cuda, desc, &op)) &&
        SUCCEEDED(dmlCompileOperator(cuda, op, DML_EXECUTION_FLAG_NONE, &compiled)) &&
        SUCCEEDED(dmlGetCompiledOperatorInfo(compiled, &info)))
        snprintf(name, sizeof name, "%s", info.ImplementationName);
    dmlReleaseCompiledOperator(compiled);
    dmlReleaseOperator(op);
    return name;
}

/* A 4-D case of 3x3 windows, strides 2, start padding 1 and random end
 * padding 0-2 (at 2, a last window on one input row or column). */
static void stem_geometry(pool_case* c, uint32_t batch, uint32_t channels, uint32_t height, uint32_t width) {
    c->rank = 4;
    c->in_sizes[0] = c->out_sizes[0] = batch;
    c->in_sizes[1] = c->out_sizes[1] = channels;
    c->in_sizes[2] = height;
    c->in_sizes[3] = width;
    for (int i = 0; i < 2; i++) {
        c->window[i] = 3;
        c->strides[i] = 2;
        c->dilations[i] = 1;
        c->start_padding[i] = 1;
        c->end_padding[i] = test_rand_range(0, 2);
        c->out_sizes[2 + i] = output_size(c->in_sizes[2 + i], 3, 2, 1, 1, c->end_padding[i]);
    }
}

/* Spatial geometry of a packed NCHW case: windows that tile the input
 * exactly (2x2 / 2 with widths that are and are not multiples of 4, or k x k
 * / k), 3x3 windows with strides 2 and start padding 1 (the stem pooling of
 * ResNet-like models; planes of even, at times odd, sizes), or any geometry
 * (overlap, padding, dilation); at times planes tall and narrow enough that
 * the gradient's gather splits them into bands. */
static void nchw_geometry(pool_case* c) {
    uint32_t shape = test_rand_range(0, 4);
    if (shape == 4) {
        bool odd = test_rand_range(0, 4) == 0; /* up to 68 wide: past one warp of columns */
        stem_geometry(c, test_rand_range(1, 3), test_rand_range(1, 5), 2 * test_rand_range(1, 34),
                      2 * test_rand_range(1, 34) + odd);
    } else if (shape == 3) {
        random_geometry(c, 4, true, 23);
        for (int i = 0; i < 2; i++) /* strides near 2^32 leave 32-bit coordinates: the strided kernel's */
            if (c->strides[i] > 3) {
                c->strides[i] = test_rand_range(1, 3);
                c->out_sizes[2 + i] = output_size(c->in_sizes[2 + i], c->window[i], c->strides[i], c->dilations[i],
                                                  c->start_padding[i], c->end_padding[i]);
            }
    } else {
        c->rank = 4;
        c->in_sizes[0] = c->out_sizes[0] = test_rand_range(1, 3);
        c->in_sizes[1] = c->out_sizes[1] = test_rand_range(1, 5);
        for (int i = 0; i < 2; i++) {
            uint32_t k = shape == 2 ? test_rand_range(1, 4) : 2;
            c->window[i] = c->strides[i] = k;
            c->dilations[i] = 1;
            c->start_padding[i] = c->end_padding[i] = 0;
            c->out_sizes[2 + i] = test_rand_range(1, 12);
            c->in_sizes[2 + i] = c->out_sizes[2 + i] * k;
        }
        if (shape == 0 && test_rand_bool()) { /* rows of whole 4-element vectors */
            c->out_sizes[3] = 2 * test_rand_range(1, 6);
            c->in_sizes[3] = 2 * c->out_sizes[3];
        }
    }
    if (test_rand_range(0, 7) == 0) { /* tall and narrow: several bands per plane */
        c->in_sizes[2] = test_rand_range(600, 1500);
        c->in_sizes[3] = test_rand_range(1, 6);
        for (int i = 0; i < 2; i++)
            c->out_sizes[2 + i] = output_size(c->in_sizes[2 + i], c->window[i], c->strides[i], c->dilations[i],
                                              c->start_padding[i], c->end_padding[i]);
    }
}

/* Runs case c (forward or gradient) on both devices and compares, after
 * checking that CUDA takes it by an implementation whose name contains
 * `expected`. */
static void compare_by(DMLDevice* cpu, DMLDevice* cuda, pool_case* c, const char* expected) {
    /* The descriptions, to ask which implementation CUDA takes. */
    init_case_tensor(c, &c->in, c->value_type, c->in_sizes, c->in_layout);
    init_case_tensor(c, &c->out, c->value_type, c->out_sizes, c->out_layout);
    if (c->index_type) init_case_tensor(c, &c->idx, c->index_type, c->out_sizes, c->idx_layout);
    init_case_tensor(c, &c->grad_out, c->value_type, c->in_sizes, c->out_layout);
    build_descs(c);
    const char* name = cuda_implementation_of(cuda, &c->op);
    EXPECT(strstr(name, expected) != NULL, "CUDA chose %s; %s", name, describe(c));
    if (c->type == DML_OPERATOR_MAX_POOLING_GRAD)
        compare_grad(cpu, cuda, c);
    else
        compare_forward(cpu, cuda, c);
}

/* Cases of the fast paths of one layout class: the geometries of
 * nchw_geometry, forward or gradient, FLOAT32 or FLOAT16, which CUDA must
 * run by an implementation whose name contains `expected`; channels-last
 * ones with channel counts that fill 16-byte vectors of channels and that
 * do not (odd ones included). */
static void compare_fast_path_cases(bool channels_last, int iterations, const char* expected) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    static const uint32_t channel_counts[] = {1, 3, 4, 7, 8, 12, 16, 24, 33};
    for (int iteration = 0; iteration < iterations && !test_case_failed(); iteration++) {
        pool_case* c = calloc(1, sizeof *c);
        bool grad = iteration % 2;
        c->value_type = iteration % 4 < 2 ? DML_TENSOR_DATA_TYPE_FLOAT32 : DML_TENSOR_DATA_TYPE_FLOAT16;
        c->type = grad ? DML_OPERATOR_MAX_POOLING_GRAD : DML_OPERATOR_MAX_POOLING2;
        if (!grad) {
            uint32_t pick = test_rand_range(0, 2);
            c->index_type = pick == 0   ? DML_TENSOR_DATA_TYPE_UNKNOWN
                            : pick == 1 ? DML_TENSOR_DATA_TYPE_UINT32
                                        : DML_TENSOR_DATA_TYPE_UINT64;
        }
        nchw_geometry(c);
        if (channels_last) {
            uint32_t most = c->in_sizes[2] > 100 ? 4 : 8; /* tall planes: at most 8 channels */
            c->in_sizes[1] = c->out_sizes[1] = channel_counts[test_rand_range(0, most)];
            c->channels_last = true;
        } else {
            c->in_layout = c->out_layout = c->idx_layout = test_rand_bool() ? TEST_LAYOUT_PACKED : TEST_LAYOUT_EXPLICIT;
        }
        compare_by(cpu, cuda, c, expected);
        free(c);
    }
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* The packed NCHW fast paths ("max_pooling/cuda/nchw", "max_pooling_grad/cuda/nchw"):
 * bit-identical to the CPU, ties, NaN, infinities and signed zeros included. */
TEST_CASE(cuda_max_pooling_nchw_matches_cpu) { compare_fast_path_cases(false, 400, "/cuda/nchw"); }

/* FLOAT16 and FLOAT32 3x3 windows, strides 2, start padding 1 on packed
 * NCHW planes up to 64 wide (the row kernels: FLOAT16 on __half2 pairs, two
 * window columns per lane; FLOAT32 a window column per lane): every width
 * (odd ones take the whole-plane kernels), with and without 8-byte rows and
 * even output widths, end padding 0-2 (a last window column and row on one
 * input column and row), heights that leave streams without rows, inputs of
 * bit patterns (ties, signed zeros, subnormals, NaN payloads, windows of NaN
 * alone: the kernels' rarely taken path that reads the chosen tap again and
 * places an all-NaN window's argmax), forward with and without indices and
 * gradient, bit-identical to the CPU. */
static void compare_3x3s2_bit_patterns(DML_TENSOR_DATA_TYPE type) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    for (uint32_t width = 1; width <= 64 && !test_case_failed(); width++)
        for (int run = 0; run < 6 && !test_case_failed(); run++) {
            pool_case* c = calloc(1, sizeof *c);
            bool grad = run % 2;
            c->type = grad ? DML_OPERATOR_MAX_POOLING_GRAD : DML_OPERATOR_MAX_POOLING1;
            c->value_type = type;
            c->index_type = grad || run == 4 ? DML_TENSOR_DATA_TYPE_UNKNOWN
                            : run == 0       ? DML_TENSOR_DATA_TYPE_UINT32
                                             : DML_TENSOR_DATA_TYPE_UINT64;
            c->bit_patterns = run < 4;
            stem_geometry(c, test_rand_range(1, 2), test_rand_range(1, 4), 2 * test_rand_range(1, 40), width);
            compare_by(cpu, cuda, c, "/cuda/nchw");
            free(c);
        }
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

TEST_CASE(cuda_max_pooling_3x3s2_binary16) { compare_3x3s2_bit_patterns(DML_TENSOR_DATA_TYPE_FLOAT16); }
TEST_CASE(cuda_max_pooling_3x3s2_binary32) { compare_3x3s2_bit_patterns(DML_TENSOR_DATA_TYPE_FLOAT32); }

/* The packed channels-last fast paths ("max_pooling/cuda/nhwc",
 * "max_pooling_grad/cuda/nhwc"): the same, bit-identical to the CPU. */
TEST_CASE(cuda_max_pooling_nhwc_matches_cpu) { compare_fast_path_cases(true, 300, "/cuda/nhwc"); }

/* ---- Batch normalization: CPU vs CUDA ---- */

/* Both backends compute in FLOAT64 (sums, statistics, the pre-activation
 * value) but sum in different orders and use their own FLOAT32 math library
 * in the activations: the results agree within spec batch_normalization.md
 * §9's tolerances (most elements bit for bit; inference and GRAD's input
 * gradient take the same IEEE steps on both). Run to run, CUDA's results are
 * bit-identical. */

enum { BN_INPUTS = 5, BN_OUTPUTS = 3 };

typedef struct bn_case {
    DML_OPERATOR_TYPE type;
    DML_TENSOR_DATA_TYPE data_type;
    uint32_t rank;
    uint32_t x[8];
    uint32_t p[4][8]; /* inference: Mean, Variance, Scale, Bias; the other operators use p[0] */
    bool fused_add;
    float epsilon;
    int activation; /* DML_OPERATOR_ACTIVATION_*, 0: none */
    float a0, a1;
    bool nhwc;           /* 4-D operands stored N, H, W, C */
    bool random_layouts; /* otherwise packed (or NHWC) */
    /* Built by bn_build: */
    uint32_t input_count, output_count;
    bool present[BN_INPUTS];
    test_tensor in[BN_INPUTS], out[BN_OUTPUTS];
    test_activation_storage activation_storage;
    DML_OPERATOR_DESC activation_desc;
    union {
        DML_BATCH_NORMALIZATION_OPERATOR_DESC inference;
        DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC training;
        DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC grad;
        DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC training_grad;
    } desc;
    DML_OPERATOR_DESC op;
} bn_case;

static bool bn_is_gradient(DML_OPERATOR_TYPE type) {
    return type == DML_OPERATOR_BATCH_NORMALIZATION_GRAD || type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD;
}

static const char* bn_describe(const bn_case* c) {
    static char text[512];
    int used = snprintf(text, sizeof text, "%s %s X={", dmlOperatorTypeName(c->type), dmlDataTypeName(c->data_type));
    for (uint32_t i = 0; i < c->rank; i++)
        used += snprintf(text + used, sizeof text - (size_t)used, "%s%u", i ? "," : "", c->x[i]);
    for (uint32_t k = 0; k < (c->type == DML_OPERATOR_BATCH_NORMALIZATION ? 4u : 1u); k++) {
        used += snprintf(text + used, sizeof text - (size_t)used, "} P%u={", k);
        for (uint32_t i = 0; i < c->rank; i++)
            used += snprintf(text + used, sizeof text - (size_t)used, "%s%u", i ? "," : "", c->p[k][i]);
    }
    snprintf(text + used, sizeof text - (size_t)used, "} activation %d (%g, %g) fused_add %d epsilon %g%s",
             c->activation, (double)c->a0, (double)c->a1, c->fused_add, (double)c->epsilon,
             c->nhwc             ? " NHWC"
             : c->random_layouts ? " random layouts"
                                 : " packed");
    return text;
}

/* A tensor of the case: NHWC, a random layout (0 strides only for inputs) or packed. */
static void bn_tensor(const bn_case* c, test_tensor* t, const uint32_t* sizes, bool input) {
    if (c->nhwc && c->rank == 4) {
        test_tensor_init(t, c->data_type, 4, sizes, TEST_LAYOUT_EXPLICIT);
        static const uint32_t stored_order[4] = {0, 2, 3, 1};
        uint32_t stride = 1;
        for (int d = 3; d >= 0; d--) {
            t->strides[stored_order[d]] = stride;
            stride *= sizes[stored_order[d]];
        }
        t->buffer.TotalTensorSizeInBytes = DMLCalcBufferTensorSize(c->data_type, 4, t->sizes, t->strides);
        return;
    }
    test_tensor_init(t, c->data_type, c->rank, sizes,
                     c->random_layouts ? test_random_layout(input) : TEST_LAYOUT_PACKED);
}

/* Builds the tensors and the description of c. */
static void bn_build(bn_case* c) {
    const uint32_t* x = c->x;
    const uint32_t* p = c->p[0];
    const DML_OPERATOR_DESC* activation = NULL;
    if (c->activation) {
        c->activation_desc = test_activation_desc(&c->activation_storage, c->activation, c->a0, c->a1);
        activation = &c->activation_desc;
    }
    memset(c->present, 0, sizeof c->present);
    switch (c->type) {
    case DML_OPERATOR_BATCH_NORMALIZATION:
        c->input_count = 5, c->output_count = 1;
        bn_tensor(c, &c->in[0], x, true);
        for (int k = 0; k < 4; k++)
            bn_tensor(c, &c->in[1 + k], c->p[k], true);
        bn_tensor(c, &c->out[0], x, false);
        c->desc.inference = (DML_BATCH_NORMALIZATION_OPERATOR_DESC){
            &c->in[0].desc, &c->in[1].desc, &c->in[2].desc, &c->in[3].desc, &c->in[4].desc, &c->out[0].desc, 1,
            c->epsilon,     activation};
        break;
    case DML_OPERATOR_BATCH_NORMALIZATION_TRAINING:
        c->input_count = 4, c->output_count = 3;
        bn_tensor(c, &c->in[0], x, true);
        bn_tensor(c, &c->in[1], p, true);
        bn_tensor(c, &c->in[2], p, true);
        if (c->fused_add) bn_tensor(c, &c->in[3], x, true);
        bn_tensor(c, &c->out[0], x, false);
        bn_tensor(c, &c->out[1], p, false);
        bn_tensor(c, &c->out[2], p, false);
        c->desc.training = (DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC){
            &c->in[0].desc,  &c->in[1].desc,  &c->in[2].desc,  c->fused_add ? &c->in[3].desc : NULL,
            &c->out[0].desc, &c->out[1].desc, &c->out[2].desc, c->epsilon,
            activation};
        break;
    default:
        c->input_count = 5, c->output_count = 3;
        bn_tensor(c, &c->in[0], x, true);
        bn_tensor(c, &c->in[1], x, true);
        for (int k = 2; k < 5; k++)
            bn_tensor(c, &c->in[k], p, true);
        bn_tensor(c, &c->out[0], x, false);
        bn_tensor(c, &c->out[1], p, false);
        bn_tensor(c, &c->out[2], p, false);
        c->desc.grad = (DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC){&c->in[0].desc,  &c->in[1].desc,  &c->in[2].desc,
                                                                    &c->in[3].desc,  &c->in[4].desc,  &c->out[0].desc,
                                                                    &c->out[1].desc, &c->out[2].desc, c->epsilon};
        if (c->type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD) { /* same fields, its own struct */
            DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC g = c->desc.grad;
            c->desc.training_grad = (DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC){g.InputTensor,
                                                                                          g.InputGradientTensor,
                                                                                          g.MeanTensor,
                                                                                          g.VarianceTensor,
                                                                                          g.ScaleTensor,
                                                                                          g.OutputGradientTensor,
                                                                                          g.OutputScaleGradientTensor,
                                                                                          g.OutputBiasGradientTensor,
                                                                                          g.Epsilon};
        }
        break;
    }
    for (uint32_t k = 0; k < c->input_count; k++)
        c->present[k] = k != 3 || c->type != DML_OPERATOR_BATCH_NORMALIZATION_TRAINING || c->fused_add;
    c->op = (DML_OPERATOR_DESC){c->type, &c->desc};
}

/* The value range of input slot k (variances positive). */
static void bn_input_range(const bn_case* c, uint32_t k, double* lo, double* hi) {
    static const double inference[5][2] = {{-2, 2}, {-1, 1}, {0.1, 2}, {-1.5, 1.5}, {-1, 1}};
    static const double training[4][2] = {{-2, 2}, {-1.5, 1.5}, {-1, 1}, {-1, 1}};
    static const double gradient[5][2] = {{-2, 2}, {-1, 1}, {-0.5, 0.5}, {0.1, 2}, {-1.5, 1.5}};
    const double(*range)[2] = c->type == DML_OPERATOR_BATCH_NORMALIZATION            ? inference
                              : c->type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING ? training
                                                                                     : gradient;
    *lo = range[k][0];
    *hi = range[k][1];
}

/* Group size M of the reducing operators. */
static uint64_t bn_group_size(const bn_case* c) {
    uint64_t m = 1;
    for (uint32_t i = 0; i < c->rank; i++)
        if (c->p[0][i] == 1) m *= c->x[i];
    return m;
}

/* Whether a and b are the two sides of a jump of c's activation: one is 0,
 * the other (within tolerance) the value the activation jumps to at its
 * threshold. THRESHOLDED_RELU (x > Alpha ? x : 0) and SHRINK (x - Bias
 * above Threshold, x + Bias below -Threshold, else 0) are discontinuous, so
 * pre-activations that differ in their last bit (within the spec's
 * tolerance) can land on either side. */
static bool bn_activation_jump(const bn_case* c, double a, double b, double abs_tol, double rel_tol) {
    if (a != 0) {
        double t = a;
        a = b, b = t;
    }
    if (a != 0) return false;
    double near = abs_tol + rel_tol * fabs(b);
    if (c->activation == DML_OPERATOR_ACTIVATION_THRESHOLDED_RELU) return fabs(b - c->a0) <= near;
    if (c->activation == DML_OPERATOR_ACTIVATION_SHRINK) /* a0 Bias, a1 Threshold */
        return fabs(fabs(b) - fabs((double)c->a1 - c->a0)) <= near;
    return false;
}

/* Expects |CUDA - CPU| <= abs + rel * |CPU| element by element (NaN matches
 * NaN; an activated output may also take the other side of an activation's
 * jump); counts elements and bit-identical elements. */
static bool bn_expect_close(const test_buffer* cpu, const test_buffer* cuda, const test_tensor* t, double abs_tol,
                            double rel_tol, const char* what, bool activated, const bn_case* c, uint64_t* compared,
                            uint64_t* identical) {
    DML_TENSOR_DATA_TYPE type = t->buffer.DataType;
    for (uint64_t i = 0; i < t->element_count; i++) {
        uint64_t offset = test_tensor_offset(t, i);
        double want = test_load(type, cpu->data, offset), got = test_load(type, cuda->data, offset);
        (*compared)++;
        if (test_load_bits(type, cpu->data, offset) == test_load_bits(type, cuda->data, offset)) {
            (*identical)++;
            continue;
        }
        bool ok = (isnan(got) && isnan(want)) || fabs(got - want) <= abs_tol + rel_tol * fabs(want) ||
                  (activated && bn_activation_jump(c, got, want, abs_tol, rel_tol));
        if (!ok) {
            EXPECT(false, "%s: logical element %" PRIu64 ": CUDA %.9g, CPU %.9g (tolerance %g + %g * |CPU|); %s", what,
                   i, got, want, abs_tol, rel_tol, bn_describe(c));
            return false;
        }
    }
    return true;
}

/* Runs c on both devices with the same random inputs and compares every
 * output, its guards and its unaddressed bytes. */
static void bn_compare(DMLDevice* cpu, DMLDevice* cuda, bn_case* c, uint64_t* compared, uint64_t* identical) {
    test_buffer in_cpu[BN_INPUTS] = {{0}}, in_cuda[BN_INPUTS] = {{0}}, out_cpu[BN_OUTPUTS], out_cuda[BN_OUTPUTS];
    test_buffer *cpu_inputs[BN_INPUTS] = {0}, *cuda_inputs[BN_INPUTS] = {0};
    test_buffer *cpu_outputs[BN_OUTPUTS] = {0}, *cuda_outputs[BN_OUTPUTS] = {0};
    for (uint32_t k = 0; k < c->input_count; k++) {
        if (!c->present[k]) continue;
        double lo, hi;
        bn_input_range(c, k, &lo, &hi);
        test_buffer_alloc(&in_cpu[k], c->in[k].buffer.TotalTensorSizeInBytes);
        test_fill_random(&in_cpu[k], &c->in[k], lo, hi);
        clone_buffer(&in_cuda[k], &in_cpu[k]);
        cpu_inputs[k] = &in_cpu[k];
        cuda_inputs[k] = &in_cuda[k];
    }
    for (uint32_t k = 0; k < c->output_count; k++) {
        test_buffer_alloc(&out_cpu[k], c->out[k].buffer.TotalTensorSizeInBytes);
        test_buffer_alloc(&out_cuda[k], c->out[k].buffer.TotalTensorSizeInBytes);
        cpu_outputs[k] = &out_cpu[k];
        cuda_outputs[k] = &out_cuda[k];
    }
    HRESULT cpu_status = test_run(cpu, &c->op, c->input_count, cpu_inputs, c->output_count, cpu_outputs);
    HRESULT cuda_status = test_run(cuda, &c->op, c->input_count, cuda_inputs, c->output_count, cuda_outputs);
    EXPECT(cpu_status == S_OK && cuda_status == S_OK, "CPU %s, CUDA %s (%s); %s", dmlStatusName(cpu_status),
           dmlStatusName(cuda_status), dmlGetLastErrorMessage(), bn_describe(c));
    if (cpu_status == S_OK && cuda_status == S_OK) {
        bool half = c->data_type == DML_TENSOR_DATA_TYPE_FLOAT16;
        bool large = bn_group_size(c) > 1000;
        static const char* names[4][3] = {{"Output"},
                                          {"Output", "OutputMean", "OutputVariance"},
                                          {"OutputGradient", "OutputScaleGradient", "OutputBiasGradient"}};
        int family = c->type == DML_OPERATOR_BATCH_NORMALIZATION            ? 0
                     : c->type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING ? 1
                                                                            : 2;
        for (uint32_t k = 0; k < c->output_count; k++) {
            /* Spec §9: FLOAT32 1e-5 relative + 1e-6 absolute, 1e-4 relative for
             * sums over more than 1e3 elements; FLOAT16 1e-2 relative. */
            double rel = half ? 1e-2 : (k > 0 && large) ? 1e-4 : 1e-5;
            double abs_tol = half ? 1e-3 : 1e-6;
            bn_expect_close(&out_cpu[k], &out_cuda[k], &c->out[k], abs_tol, rel, names[family][k], k == 0 && family < 2,
                            c, compared, identical);
            test_buffer_check_guards(&out_cuda[k], names[family][k]);
            test_buffer_check_unaddressed(&out_cuda[k], &c->out[k], names[family][k]);
        }
    }
    for (uint32_t k = 0; k < c->input_count; k++)
        if (c->present[k]) {
            test_buffer_free(&in_cpu[k]);
            test_buffer_free(&in_cuda[k]);
        }
    for (uint32_t k = 0; k < c->output_count; k++) {
        test_buffer_free(&out_cpu[k]);
        test_buffer_free(&out_cuda[k]);
    }
}

/* Random activation parameters in well-conditioned ranges (SOFTPLUS
 * Steepness >= 1, decision BN-7). */
static void bn_random_activation(bn_case* c) {
    c->activation = test_rand_range(0, 4) == 0 ? 0 : test_fusable_activations[test_rand_range(0, 16)];
    c->a0 = (float)test_rand_double(-2, 2);
    c->a1 = (float)test_rand_double(-2, 2);
    if (c->activation == DML_OPERATOR_ACTIVATION_SOFTPLUS) c->a0 = (float)test_rand_double(1, 4);
    if (c->activation == DML_OPERATOR_ACTIVATION_CELU) c->a0 = (float)test_rand_double(0.25, 2);
    if (c->activation == DML_OPERATOR_ACTIVATION_SHRINK || c->activation == DML_OPERATOR_ACTIVATION_SCALED_ELU) {
        c->a0 = (float)test_rand_double(0, 1);
        c->a1 = (float)test_rand_double(0, 2);
    }
}

/* Random sizes of at most max_elements elements, ranks 1-8. */
static void bn_random_sizes(bn_case* c, uint64_t max_elements) {
    uint64_t count = 1;
    for (uint32_t i = 0; i < c->rank; i++) {
        uint32_t limit = c->rank <= 2 ? 300 : c->rank <= 4 ? 40 : 6;
        c->x[i] = test_rand_range(1, limit);
        count *= c->x[i];
    }
    while (count > max_elements) { /* halve the largest dimension */
        uint32_t largest = 0;
        for (uint32_t i = 1; i < c->rank; i++)
            if (c->x[i] > c->x[largest]) largest = i;
        count = count / c->x[largest] * (c->x[largest] / 2);
        c->x[largest] /= 2;
    }
}

static const DML_OPERATOR_TYPE bn_types[4] = {
    DML_OPERATOR_BATCH_NORMALIZATION, DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, DML_OPERATOR_BATCH_NORMALIZATION_GRAD,
    DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD};

static void bn_print_identical(uint64_t identical, uint64_t compared) {
    printf("note: %" PRIu64 " of %" PRIu64 " compared output elements are bit-identical on CPU and CUDA\n", identical,
           compared);
}

/* A packed 4-D case (NCHW, or NHWC) whose parameters are all per channel. */
static bn_case* bn_channel_case(DML_OPERATOR_TYPE type, DML_TENSOR_DATA_TYPE data_type, const uint32_t x[4],
                                bool nhwc) {
    bn_case* c = calloc(1, sizeof *c);
    c->type = type;
    c->data_type = data_type;
    c->rank = 4;
    memcpy(c->x, x, 4 * sizeof *x);
    for (int k = 0; k < 4; k++)
        for (uint32_t i = 0; i < 4; i++)
            c->p[k][i] = i == 1 ? x[1] : 1;
    c->nhwc = nhwc;
    return c;
}

TEST_CASE(cuda_batch_normalization_matches_cpu) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    uint64_t compared = 0, identical = 0;
    for (int iteration = 0; iteration < 400 && !test_case_failed(); iteration++) {
        bn_case* c = calloc(1, sizeof *c);
        c->type = bn_types[iteration % 4];
        c->data_type = (iteration / 4) % 2 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        c->rank = test_rand_range(1, 8);
        bn_random_sizes(c, test_rand_range(0, 3) == 0 ? 60000 : 5000);
        /* Random reduction axes; inference: each parameter broadcast its own way (BN-5). */
        bool inference = c->type == DML_OPERATOR_BATCH_NORMALIZATION;
        for (int k = 0; k < 4; k++)
            for (uint32_t i = 0; i < c->rank; i++)
                c->p[k][i] = k > 0 && !inference ? c->p[0][i] : test_rand_bool() ? c->x[i] : 1;
        c->epsilon = (float)test_rand_double(1e-3, 1e-1);
        c->fused_add = c->type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING && test_rand_bool();
        if (!bn_is_gradient(c->type)) bn_random_activation(c);
        c->nhwc = c->rank == 4 && test_rand_range(0, 3) == 0;
        c->random_layouts = true;
        bn_build(c);
        bn_compare(cpu, cuda, c, &compared, &identical);
        free(c);
    }
    bn_print_identical(identical, compared);
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* Typical large problems: one channel (a single group of millions of
 * elements over the whole GPU), NHWC with 64 channels (groups as the fast
 * thread index), an odd NCHW shape; every operator, FLOAT32 and FLOAT16. */
TEST_CASE(cuda_batch_normalization_large) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    static const struct {
        uint32_t x[4];
        bool nhwc;
        DML_TENSOR_DATA_TYPE type;
    } shapes[] = {
        {{16, 1, 512, 512}, false, DML_TENSOR_DATA_TYPE_FLOAT32},
        {{8, 64, 56, 56}, true, DML_TENSOR_DATA_TYPE_FLOAT16},
        {{8, 64, 56, 56}, true, DML_TENSOR_DATA_TYPE_FLOAT32},
        {{3, 5, 333, 71}, false, DML_TENSOR_DATA_TYPE_FLOAT32},
    };
    uint64_t compared = 0, identical = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            bn_case* c = bn_channel_case(bn_types[t], shapes[s].type, shapes[s].x, shapes[s].nhwc);
            c->epsilon = 1e-5f;
            c->fused_add = c->type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING;
            if (!bn_is_gradient(c->type)) c->activation = DML_OPERATOR_ACTIVATION_RELU;
            bn_build(c);
            bn_compare(cpu, cuda, c, &compared, &identical);
            free(c);
        }
    bn_print_identical(identical, compared);
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* The packed fast paths ("batch_normalization_training/cuda/nchw", "/nhwc"
 * and the other operators'; inference with parameters per channel or, at
 * times, a scalar Variance, decision BN-5). NCHW: planes whose H*W is a multiple of 8 (vector loads
 * for both types), 4 mod 8, 2 mod 4 and odd (element loads), a plane of one
 * element, several images per apply task with a partial last task, more
 * tasks than the cooperative grid has blocks (several per block).
 * Channels-last: channel counts that are multiples of 8, of 4 only, odd,
 * more than 64 vectors (several column blocks), rows fewer and more than
 * the row ranges. FLOAT32 and FLOAT16, FusedAdd and random activations;
 * against the CPU, and the implementation CUDA chose. */
TEST_CASE(cuda_batch_normalization_packed_layouts) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    static const struct {
        uint32_t x[4];
        bool nhwc;
    } shapes[] = {
        {{4, 32, 56, 56}, false}, {{2, 3, 70, 61}, false},   {{5, 7, 9, 9}, false},   {{1, 1, 64, 64}, false},
        {{3, 17, 1, 1}, false},   {{33, 2, 8, 16}, false},   {{7, 3, 30, 22}, false}, {{4, 768, 64, 64}, false},
        {{4, 64, 30, 30}, true},  {{2, 12, 9, 7}, true},     {{3, 37, 5, 11}, true},  {{2, 520, 3, 5}, true},
        {{1, 3, 40, 41}, true},   {{16, 256, 14, 14}, true},
    };
    uint64_t compared = 0, identical = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] && !test_case_failed(); s++)
        for (int t = 0; t < 4; t++)
            for (int half = 0; half < 2; half++) {
                bn_case* c =
                    bn_channel_case(bn_types[t], half ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32,
                                    shapes[s].x, shapes[s].nhwc);
                if (c->type == DML_OPERATOR_BATCH_NORMALIZATION && s % 2) c->p[1][1] = 1; /* a scalar Variance */
                c->epsilon = (float)test_rand_double(1e-5, 1e-2);
                c->fused_add = c->type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING && test_rand_bool();
                if (!bn_is_gradient(c->type)) bn_random_activation(c);
                bn_build(c);
                const char* name = cuda_implementation_of(cuda, &c->op);
                const char* expected = c->nhwc ? "/cuda/nhwc" : "/cuda/nchw";
                EXPECT(strstr(name, expected) != NULL, "CUDA chose %s; %s", name, bn_describe(c));
                bn_compare(cpu, cuda, c, &compared, &identical);
                free(c);
            }
    bn_print_identical(identical, compared);
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* Adversarial values for order-sensitivity: a quarter of the elements +1e15,
 * a quarter -1e15 at random places, the rest of order 1. The huge values
 * cancel, so every sum is small while the rounding of its partial sums
 * depends on their order: any change in how a reduction is split or combined
 * changes the results. */
static void fill_adversarial(test_buffer* b, const test_tensor* t) {
    uint64_t n = t->element_count;
    uint32_t* order = malloc(n * sizeof *order);
    for (uint64_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    for (uint64_t k = n; k > 1; k--) {
        uint64_t j = test_rand() % k;
        uint32_t tmp = order[k - 1];
        order[k - 1] = order[j];
        order[j] = tmp;
    }
    for (uint64_t k = 0; k < n; k++) {
        double value = k < n / 4 ? 1e15 : k < n / 2 ? -1e15 : test_rand_double(-1, 1);
        test_store(t->buffer.DataType, b->data, test_tensor_offset(t, order[k]), value);
    }
    free(order);
}

/* TRAINING and TRAINING_GRAD on a large single group (C = 1), ordinary and
 * adversarial data: three CUDA runs give the same bytes. */
TEST_CASE(cuda_batch_normalization_run_to_run) {
    DMLDevice* cuda = test_cuda_device();
    static const DML_OPERATOR_TYPE types[2] = {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING,
                                               DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD};
    for (int t = 0; t < 2; t++)
        for (int adversarial = 0; adversarial < 2; adversarial++) {
            const uint32_t x[4] = {16, 1, 512, 512};
            bn_case* c = bn_channel_case(types[t], DML_TENSOR_DATA_TYPE_FLOAT32, x, false);
            c->epsilon = 1e-5f;
            c->fused_add = t == 0;
            if (t == 0) c->activation = DML_OPERATOR_ACTIVATION_GELU;
            bn_build(c);
            test_buffer inputs[BN_INPUTS] = {{0}}, outputs[BN_OUTPUTS], first[BN_OUTPUTS];
            test_buffer *in[BN_INPUTS] = {0}, *out[BN_OUTPUTS] = {0};
            for (uint32_t k = 0; k < c->input_count; k++) {
                if (!c->present[k]) continue;
                double lo, hi;
                bn_input_range(c, k, &lo, &hi);
                test_buffer_alloc(&inputs[k], c->in[k].buffer.TotalTensorSizeInBytes);
                test_fill_random(&inputs[k], &c->in[k], lo, hi);
                if (adversarial && k < (t == 0 ? 1u : 2u)) fill_adversarial(&inputs[k], &c->in[k]); /* x (and dy) */
                in[k] = &inputs[k];
            }
            for (uint32_t k = 0; k < c->output_count; k++) {
                test_buffer_alloc(&outputs[k], c->out[k].buffer.TotalTensorSizeInBytes);
                test_buffer_alloc(&first[k], c->out[k].buffer.TotalTensorSizeInBytes);
                out[k] = &outputs[k];
            }
            for (int run = 0; run < 3; run++) {
                for (uint32_t k = 0; k < c->output_count; k++)
                    test_buffer_poison(&outputs[k]);
                EXPECT_STATUS(test_run(cuda, &c->op, c->input_count, in, c->output_count, out), S_OK, NULL);
                for (uint32_t k = 0; k < c->output_count; k++) {
                    uint64_t bytes = outputs[k].size + 2 * TEST_GUARD_BYTES;
                    if (run == 0)
                        memcpy(first[k].block, outputs[k].block, bytes);
                    else
                        EXPECT(memcmp(first[k].block, outputs[k].block, bytes) == 0,
                               "%s output %u: CUDA run %d differs from run 1%s", dmlOperatorTypeName(c->type), k,
                               run + 1, adversarial ? " (adversarial data)" : "");
                }
            }
            for (uint32_t k = 0; k < c->input_count; k++)
                if (c->present[k]) test_buffer_free(&inputs[k]);
            for (uint32_t k = 0; k < c->output_count; k++) {
                test_buffer_free(&outputs[k]);
                test_buffer_free(&first[k]);
            }
            free(c);
        }
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
    EXPECT_STATUS(test_run(device, &c->op, 1, (test_buffer*[]){&in}, 2, (test_buffer*[]){&small, NULL}), E_INVALIDARG,
                  "MAX_POOLING2", "OutputTensor", "SizeInBytes");
    /* One buffer bound as input and output (the harness mirrors it once). */
    EXPECT_STATUS(test_run(device, &c->op, 1, (test_buffer*[]){&both}, 2, (test_buffer*[]){&both, NULL}), E_INVALIDARG,
                  "MAX_POOLING2", "OutputTensor", "overlaps", "InputTensor");
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

/* Counts of the packed cases by the implementation CUDA chose. */
typedef struct roi_pooling_reached {
    int staged, packed;
} roi_pooling_reached;

/* packed: input and output packed NCHW or (channels_last) packed
 * channels-last, which CUDA runs as "roi_pooling/cuda/staged_nchw" or
 * "/staged_nhwc" (the image's channels in shared memory), or, where that
 * declines (here: more than 64 bins a ROI), as "/nchw" or "/nhwc". */
static void compare_roi_pooling(DMLDevice* cpu, DMLDevice* cuda, bool large, bool packed, bool channels_last,
                                roi_pooling_reached* reached) {
    DML_TENSOR_DATA_TYPE type = test_rand_bool() ? DML_TENSOR_DATA_TYPE_FLOAT32 : DML_TENSOR_DATA_TYPE_FLOAT16;
    /* Channels-last: up to 1300 channels, several 1024-channel tasks; packed
     * NCHW: up to 70 (the staged kernel's 1 to 16 channels a pixel, counts
     * that are no multiple of them). */
    uint32_t batch = test_rand_range(1, 3);
    uint32_t channels = large ? 64 : test_rand_range(1, channels_last ? 1300 : packed ? 70 : 4);
    /* tall: one FLOAT32 channel of the image fills 78 KB of shared memory. */
    bool tall = packed && !channels_last && !large && test_rand_range(0, 19) == 0;
    /* wide: the staged kernel declines (more than 64 bins a ROI). */
    bool wide = packed && test_rand_range(0, 7) == 0;
    /* mid: images of 20..90 pixels a side (2, 4 or 8 words a staged pixel) and
     * up to 200 ROIs. */
    bool mid = packed && !large && !tall && test_rand_range(0, 3) == 0;
    /* crowded: 280-320 ROIs on one of three images of 256 channels, 64x64
     * (the benchmark's chunks): the staged kernel's share of the image holds
     * more ROIs than its plan, made for ROIs spread over the images, keeps,
     * so a task scans the list several times. */
    bool crowded = packed && !large && !tall && !wide && !mid && test_rand_range(0, 15) == 0;
    uint32_t crowd = test_rand_range(0, 2);
    if (crowded) {
        batch = 3;
        channels = 256;
    }
    uint32_t height = large     ? 61
                      : tall    ? test_rand_range(900, 1500)
                      : mid     ? test_rand_range(20, 90)
                      : crowded ? 64
                                : test_rand_range(1, 12);
    uint32_t width = large ? 83 : mid ? test_rand_range(20, 90) : crowded ? 64 : test_rand_range(1, 12);
    uint32_t roi_count = large     ? 500
                         : mid     ? test_rand_range(1, 200)
                         : crowded ? test_rand_range(280, 320)
                                   : test_rand_range(1, 10);
    uint32_t pooled_height = large ? 7 : test_rand_range(1, 4);
    uint32_t pooled_width = wide ? 64 : large || tall ? 7 : test_rand_range(1, 4);
    float scale = random_roi_scale();
    uint32_t in_sizes[4] = {batch, channels, height, width}, roi_sizes[4] = {1, 1, roi_count, 5};
    uint32_t out_sizes[4] = {roi_count, channels, pooled_height, pooled_width};
    test_layout layouts[3] = {large ? TEST_LAYOUT_PERMUTED : test_random_layout(true),
                              large ? TEST_LAYOUT_PACKED : test_random_layout(true),
                              large ? TEST_LAYOUT_PADDED : test_random_layout(false)};
    if (packed) layouts[0] = layouts[2] = test_rand_bool() ? TEST_LAYOUT_PACKED : TEST_LAYOUT_EXPLICIT;
    twin_buffer input, rois, output;
    twin_init(&input, type, 4, in_sizes, layouts[0]);
    twin_init(&rois, type, 4, roi_sizes, layouts[1]);
    twin_init(&output, type, 4, out_sizes, layouts[2]);
    if (channels_last) {
        twin_make_channels_last(&input);
        twin_make_channels_last(&output);
    }
    double* image = random_image(input.tensor.element_count, true);
    twin_fill(&input, image);
    double* rows = malloc((size_t)roi_count * 5 * sizeof *rows);
    for (uint32_t r = 0; r < roi_count; r++) {
        uint32_t kind = test_rand_range(0, 19);
        /* Batch ids: mostly valid integers; fractions truncate; out of range and NaN at times (RP-5). */
        rows[r * 5] = kind == 0  ? NAN
                      : crowded  ? crowd
                      : kind < 3 ? test_rand_double(-1.5, batch + 0.5)
                                 : test_rand_range(0, batch - 1);
        for (int k = 1; k < 5; k++)
            rows[r * 5 + k] = random_roi_coordinate(k % 2 ? width : height, scale, !large);
    }
    twin_fill(&rois, rows);

    DML_ROI_POOLING_OPERATOR_DESC desc = {
        &input.tensor.desc, &rois.tensor.desc, &output.tensor.desc, scale, {pooled_width, pooled_height}};
    DML_OPERATOR_DESC op = {DML_OPERATOR_ROI_POOLING, &desc};
    char context[256];
    snprintf(context, sizeof context, "ROI_POOLING %s in [%u %u %u %u] R %u pooled %ux%u scale %g layouts %s/%s/%s%s%s",
             dmlDataTypeName(type), batch, channels, height, width, roi_count, pooled_height, pooled_width, scale,
             test_layout_name(layouts[0]), test_layout_name(layouts[1]), test_layout_name(layouts[2]),
             channels_last ? " (channels-last)" : "", crowded ? " (crowded)" : "");
    if (packed) {
        const char* name = cuda_implementation_of(cuda, &op);
        const char* expected = wide ? (channels_last ? "roi_pooling/cuda/nhwc" : "roi_pooling/cuda/nchw")
                                    : (channels_last ? "roi_pooling/cuda/staged_nhwc" : "roi_pooling/cuda/staged_nchw");
        EXPECT(strcmp(name, expected) == 0, "CUDA chose %s; %s", name, context);
        if (wide)
            reached->packed++;
        else
            reached->staged++;
    }
    HRESULT cpu_status =
        test_run(cpu, &op, 2, (test_buffer*[]){&input.cpu, &rois.cpu}, 1, (test_buffer*[]){&output.cpu});
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
    roi_pooling_reached reached = {0, 0};
    for (int iteration = 0; iteration < 300 && !test_case_failed(); iteration++)
        compare_roi_pooling(cpu, cuda, false, false, false, &reached);
    /* More outputs than one pass of the grid: every thread loops. */
    compare_roi_pooling(cpu, cuda, true, false, false, &reached);
    /* The packed fast paths, small and large (more tasks than blocks): NCHW,
     * and channels-last in every third case. */
    for (int iteration = 0; iteration < 300 && !test_case_failed(); iteration++)
        compare_roi_pooling(cpu, cuda, iteration % 100 == 99, true, iteration % 3 == 2, &reached);
    printf("ROI pooling packed cases: %d staged, %d on the per-ROI kernels\n", reached.staged, reached.packed);
    EXPECT(test_case_failed() || (reached.staged > 0 && reached.packed > 0), "a packed kernel was never chosen");
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* Runs `run` on the CPU once and on CUDA `cuda_runs` times (outputs poisoned
 * before each; between(context) after each CUDA compile, before its
 * dispatch, unless NULL), expecting every CUDA run equal to the CPU's. */
static void compare_roi_align_run_with(DMLDevice* cpu, DMLDevice* cuda, roi_align_run* run, int cuda_runs,
                                       void (*between)(void*), void* context) {
    test_buffer *inputs[4], *outputs[2];
    roi_align_run_buffers(run, false, inputs, outputs);
    HRESULT status = test_run(cpu, &run->op, run->input_count, inputs, run->output_count, outputs);
    EXPECT(status == S_OK, "CPU %s (%s); %s", dmlStatusName(status), dmlGetLastErrorMessage(), run->context);
    roi_align_run_buffers(run, true, inputs, outputs);
    for (int attempt = 1; attempt <= cuda_runs && status == S_OK && !test_case_failed(); attempt++) {
        for (uint32_t i = 0; i < run->output_count; i++)
            if (outputs[i]) test_buffer_poison(outputs[i]);
        status = test_run_with(cuda, &run->op, run->input_count, inputs, run->output_count, outputs, between, context);
        EXPECT(status == S_OK, "CUDA %s (%s); %s", dmlStatusName(status), dmlGetLastErrorMessage(), run->context);
        char label[32];
        snprintf(label, sizeof label, "CUDA run %d", attempt);
        if (status == S_OK) roi_align_run_compare(run, label);
    }
}

static void compare_roi_align_run(DMLDevice* cpu, DMLDevice* cuda, roi_align_run* run, int cuda_runs) {
    compare_roi_align_run_with(cpu, cuda, run, cuda_runs, NULL, NULL);
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

/* Runs forward case c (then freed) on the CPU and `cuda_runs` times on
 * CUDA, expecting the implementation `expected` and the CPU's results. */
static void compare_forward_case(DMLDevice* cpu, DMLDevice* cuda, roi_align_case* c, const char* expected,
                                 int cuda_runs) {
    roi_align_run run;
    roi_align_forward_setup(&run, c);
    const char* name = cuda_implementation_of(cuda, &run.op);
    EXPECT(strcmp(name, expected) == 0, "CUDA chose %s; %s", name, run.context);
    compare_roi_align_run(cpu, cuda, &run, cuda_runs);
    roi_align_run_free(&run);
    roi_align_case_free(c);
}

/* The forward pass on packed input and output: the CPU's bits, adaptive
 * sample counts, MAX and AVERAGE, both interpolations, odd and wide channel
 * counts. Channels-last goes to "roi_align/cuda/nhwc"; NCHW LINEAR AVERAGE
 * to "roi_align/cuda/staged_nchw", the other NCHW cases to "roi_align/cuda/nchw". */
static void compare_packed_forward_cases(bool channels_last, const char* packed, const char* staged) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    for (int iteration = 0; iteration < PACKED_ROI_ALIGN_CASES && !test_case_failed(); iteration++) {
        roi_align_case c;
        packed_roi_align_case(&c, iteration, channels_last);
        bool stageable = c.reduction == DML_REDUCE_FUNCTION_AVERAGE && c.interpolation == DML_INTERPOLATION_MODE_LINEAR;
        compare_forward_case(cpu, cuda, &c, stageable ? staged : packed, 1);
    }
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

TEST_CASE(cuda_roi_align_nchw_matches_cpu) {
    compare_packed_forward_cases(false, "roi_align/cuda/nchw", "roi_align/cuda/staged_nchw");
}

TEST_CASE(cuda_roi_align_nhwc_matches_cpu) {
    compare_packed_forward_cases(true, "roi_align/cuda/nhwc", "roi_align/cuda/nhwc");
}

/* The staged kernel on images that stage K = 4, 2 and 1 channels a task,
 * channel counts that are not multiples of K, long lists of ROIs of mixed
 * images, and images too large to stage ("roi_align/cuda/nchw" then); every
 * case run twice (the same bits). */
TEST_CASE(cuda_roi_align_staged_nchw_matches_cpu) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    for (int iteration = 0; iteration < STAGED_ROI_ALIGN_CASES && !test_case_failed(); iteration++) {
        roi_align_case c;
        staged_roi_align_case(&c, iteration);
        const char* expected =
            staged_roi_align_case_declines(iteration) ? "roi_align/cuda/nchw" : "roi_align/cuda/staged_nchw";
        compare_forward_case(cpu, cuda, &c, expected, 2);
    }
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* An operator compiled between another's compile and its dispatch. */
typedef struct compile_between {
    DMLDevice* cuda;
    const DML_OPERATOR_DESC* desc;
    const char* name; /* the implementation it got */
} compile_between;

static void compile_in_between(void* context) {
    compile_between* c = context;
    c->name = cuda_implementation_of(c->cuda, c->desc);
}

/* Two compiled operators of one staged kernel: compiling a small image's
 * (little shared memory) between a large image's compile and its dispatch
 * must not lower the shared memory the large one launches with. */
TEST_CASE(cuda_roi_align_staged_plans_share_their_kernel) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    roi_align_case large, small;
    staged_roi_align_case_sized(&large, 64);
    staged_roi_align_case_sized(&small, 20);
    roi_align_run large_run, small_run;
    roi_align_forward_setup(&large_run, &large);
    roi_align_forward_setup(&small_run, &small);
    const char* name = cuda_implementation_of(cuda, &large_run.op);
    EXPECT(strcmp(name, "roi_align/cuda/staged_nchw") == 0, "the large image got %s; %s", name, large_run.context);
    compile_between between = {cuda, &small_run.op, NULL};
    compare_roi_align_run_with(cpu, cuda, &large_run, 1, compile_in_between, &between);
    EXPECT(between.name && strcmp(between.name, "roi_align/cuda/staged_nchw") == 0, "the small image got %s; %s",
           between.name ? between.name : "(nothing)", small_run.context);
    roi_align_run_free(&large_run);
    roi_align_run_free(&small_run);
    roi_align_case_free(&large);
    roi_align_case_free(&small);
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

/* The feature gradient's one-launch forms ("roi_align_grad/cuda/nchw" and
 * "/nhwc": AVERAGE, a fixed sample count, no ROI gradient, both gradients
 * packed NCHW or both packed channels-last): random small problems (several
 * images, odd and wide channel counts, ROIs outside the image, FLOAT16) and
 * the large overlapping ones, the CPU's bits on every run. The channel
 * counts (1-11, 129-1300, 19, 256) cover NCHW rows padded to 4 channels, a
 * lane's vector clamped past the row, several channel groups, and transposes
 * of 1 to thousands of tasks split in thirds. */
static void compare_listed_grad_cases(bool channels_last, const char* expected) {
    DMLDevice* cuda = test_cuda_device();
    DMLDevice* cpu = cpu_device();
    for (int iteration = 0; iteration < LISTED_ROI_ALIGN_GRAD_CASES && !test_case_failed(); iteration++) {
        roi_align_case c;
        listed_roi_align_grad_case(&c, iteration, channels_last);
        roi_align_run run;
        roi_align_grad_setup(&run, &c, test_rand_bool(), true, false);
        const char* name = cuda_implementation_of(cuda, &run.op);
        EXPECT(strcmp(name, expected) == 0, "CUDA chose %s; %s", name, run.context);
        compare_roi_align_run(cpu, cuda, &run, 2);
        roi_align_run_free(&run);
        roi_align_case_free(&c);
    }
    dmlReleaseDevice(cpu);
    dmlReleaseDevice(cuda);
}

TEST_CASE(cuda_roi_align_grad_nchw_matches_cpu) { compare_listed_grad_cases(false, "roi_align_grad/cuda/nchw"); }

TEST_CASE(cuda_roi_align_grad_nhwc_matches_cpu) { compare_listed_grad_cases(true, "roi_align_grad/cuda/nhwc"); }

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
        DML_DISPATCH_BINDINGS bindings = {
            1, inputs, 2, outputs, {DML_BINDING_TYPE_NONE, NULL}, {DML_BINDING_TYPE_NONE, NULL}};
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
    DML_DISPATCH_BINDINGS bindings = {
        1, inputs, 2, outputs, {DML_BINDING_TYPE_NONE, NULL}, {DML_BINDING_TYPE_NONE, NULL}};
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
