/* The API around operators: devices, feature levels and queries, buffers,
 * the lifecycle, binding validation at dispatch (decision T-8), OWNED_BY_DML
 * inputs and the persistent resource, and the removed state. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TEST_CASE(device_creation) {
    DMLDevice* device = NULL;
    EXPECT_STATUS(dmlCreateDevice(NULL, &device), S_OK, NULL);
    EXPECT(device != NULL, "default device");
    EXPECT(dmlGetDeviceBackend(device) == DML_BACKEND_CPU, "default backend is the CPU");
    EXPECT(dmlGetDeviceRemovedReason(device) == S_OK, "a new device is healthy");
    dmlReleaseDevice(device);

    DML_DEVICE_DESC desc = {.FeatureLevel = (DML_FEATURE_LEVEL)0x7000};
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), DXGI_ERROR_UNSUPPORTED, "FeatureLevel");
    desc.FeatureLevel = (DML_FEATURE_LEVEL)0x1234;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), E_INVALIDARG, "FeatureLevel");
    desc.FeatureLevel = DML_FEATURE_LEVEL_1_0;
    desc.Backend = (DML_BACKEND)7;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), E_INVALIDARG, "Backend");
    desc.Backend = DML_BACKEND_CPU;
    desc.Flags = (DML_CREATE_DEVICE_FLAGS)0x10;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), E_INVALIDARG, "Flags");
    EXPECT_STATUS(dmlCreateDevice(NULL, NULL), E_POINTER, "device");
    /* ThreadCount is capped (OpenMP runtimes abort or crash past their limits). */
    desc.Flags = DML_CREATE_DEVICE_FLAG_NONE;
    const UINT too_many[3] = {DML_MAX_THREAD_COUNT + 1, 32768, 2147483648u};
    for (int i = 0; i < 3; i++) {
        desc.ThreadCount = too_many[i];
        EXPECT_STATUS(dmlCreateDevice(&desc, &device), E_INVALIDARG, "dmlCreateDevice", "ThreadCount", "<= 1024");
    }
    desc.ThreadCount = DML_MAX_THREAD_COUNT;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), S_OK, NULL);
    dmlReleaseDevice(device);
    EXPECT(strcmp(dmlStatusName(E_INVALIDARG), "E_INVALIDARG") == 0, "status names");
    EXPECT(strcmp(dmlOperatorTypeName(DML_OPERATOR_MAX_POOLING2), "MAX_POOLING2") == 0, "operator names");
    EXPECT(strcmp(dmlDataTypeName(DML_TENSOR_DATA_TYPE_FLOAT16), "FLOAT16") == 0, "type names");
}

TEST_CASE(feature_support_queries) {
    DML_DEVICE_DESC desc = {.FeatureLevel = DML_FEATURE_LEVEL_4_1};
    DMLDevice* device = NULL;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), S_OK, NULL);
    DML_FEATURE_LEVEL requested[3] = {DML_FEATURE_LEVEL_2_0, DML_FEATURE_LEVEL_4_1, DML_FEATURE_LEVEL_5_0};
    DML_FEATURE_QUERY_FEATURE_LEVELS query = {3, requested};
    DML_FEATURE_DATA_FEATURE_LEVELS levels = {0};
    EXPECT_STATUS(
        dmlCheckFeatureSupport(device, DML_FEATURE_FEATURE_LEVELS, sizeof query, &query, sizeof levels, &levels), S_OK,
        NULL);
    EXPECT(levels.MaxSupportedFeatureLevel == DML_FEATURE_LEVEL_4_1, "highest requested level the device has: 0x%x",
           (unsigned)levels.MaxSupportedFeatureLevel);

    DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT type_query = {DML_TENSOR_DATA_TYPE_FLOAT64};
    DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT type_support = {0};
    EXPECT_STATUS(dmlCheckFeatureSupport(device, DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT, sizeof type_query, &type_query,
                                         sizeof type_support, &type_support),
                  S_OK, NULL);
    EXPECT(type_support.IsSupported, "FLOAT64 is supported");
    type_query.DataType = DML_TENSOR_DATA_TYPE_UINT4;
    EXPECT_STATUS(dmlCheckFeatureSupport(device, DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT, sizeof type_query, &type_query,
                                         sizeof type_support, &type_support),
                  S_OK, NULL);
    EXPECT(!type_support.IsSupported, "UINT4 is not");
    EXPECT_STATUS(dmlCheckFeatureSupport(device, DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT, 1, &type_query,
                                         sizeof type_support, &type_support),
                  E_INVALIDARG, "size");
    EXPECT_STATUS(dmlCheckFeatureSupport(device, (DML_FEATURE)9, sizeof type_query, &type_query, sizeof type_support,
                                         &type_support),
                  E_INVALIDARG, "feature");
    dmlReleaseDevice(device);
}

/* MAX_POOLING2 over a 1x1x4x4 FLOAT32 input, 2x2 window, stride 2. */
typedef struct pool_op {
    UINT in_sizes[4], out_sizes[4], window[2], strides[2], padding[2], dilations[2];
    DML_BUFFER_TENSOR_DESC in, out, idx;
    DML_TENSOR_DESC in_desc, out_desc, idx_desc;
    DML_MAX_POOLING2_OPERATOR_DESC pool;
    DML_OPERATOR_DESC op;
} pool_op;

static void pool_op_init(pool_op* p, bool indices) {
    memset(p, 0, sizeof *p);
    UINT in_sizes[4] = {1, 1, 4, 4}, out_sizes[4] = {1, 1, 2, 2};
    memcpy(p->in_sizes, in_sizes, sizeof in_sizes);
    memcpy(p->out_sizes, out_sizes, sizeof out_sizes);
    p->window[0] = p->window[1] = p->strides[0] = p->strides[1] = 2;
    p->dilations[0] = p->dilations[1] = 1;
    p->in = (DML_BUFFER_TENSOR_DESC){DML_TENSOR_DATA_TYPE_FLOAT32, 0, 4, p->in_sizes, NULL, 64, 0};
    p->out = (DML_BUFFER_TENSOR_DESC){DML_TENSOR_DATA_TYPE_FLOAT32, 0, 4, p->out_sizes, NULL, 16, 0};
    p->idx = (DML_BUFFER_TENSOR_DESC){DML_TENSOR_DATA_TYPE_UINT32, 0, 4, p->out_sizes, NULL, 16, 0};
    p->in_desc = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, &p->in};
    p->out_desc = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, &p->out};
    p->idx_desc = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, &p->idx};
    p->pool = (DML_MAX_POOLING2_OPERATOR_DESC){&p->in_desc, &p->out_desc, indices ? &p->idx_desc : NULL,
                                               2,           p->strides,   p->window,
                                               p->padding,  p->padding,   p->dilations};
    p->op = (DML_OPERATOR_DESC){DML_OPERATOR_MAX_POOLING2, &p->pool};
}

static DMLCompiledOperator* compile(DMLDevice* device, const DML_OPERATOR_DESC* desc) {
    DMLOperator* op = NULL;
    DMLCompiledOperator* compiled = NULL;
    EXPECT_STATUS(dmlCreateOperator(device, desc, &op), S_OK, NULL);
    if (op) EXPECT_STATUS(dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &compiled), S_OK, NULL);
    dmlReleaseOperator(op);
    return compiled;
}

TEST_CASE(lifecycle_and_slot_counts) {
    DMLDevice* device = test_device(0);
    pool_op p;
    pool_op_init(&p, true);
    DMLOperator* op = NULL;
    EXPECT_STATUS(dmlCreateOperator(device, &p.op, &op), S_OK, NULL);
    UINT inputs = 0, outputs = 0;
    EXPECT_STATUS(dmlGetOperatorSlotCounts(op, &inputs, &outputs), S_OK, NULL);
    EXPECT(inputs == 1 && outputs == 2, "MAX_POOLING2 has 1 input and 2 output slots, got %u/%u", inputs, outputs);
    DMLCompiledOperator* compiled = NULL;
    EXPECT_STATUS(dmlCompileOperator(device, op, (DML_EXECUTION_FLAGS)0x10, &compiled), E_INVALIDARG, "flags");
    EXPECT_STATUS(dmlCompileOperator(device, op,
                                     DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION |
                                         DML_EXECUTION_FLAG_DESCRIPTORS_VOLATILE,
                                     &compiled),
                  S_OK, NULL);
    DMLDevice* other = test_device(1);
    DMLCompiledOperator* wrong = NULL;
    EXPECT_STATUS(dmlCompileOperator(other, op, DML_EXECUTION_FLAG_NONE, &wrong), E_INVALIDARG, "another device");
    dmlReleaseDevice(other);
    DML_BINDING_PROPERTIES properties;
    EXPECT_STATUS(dmlGetBindingProperties(compiled, &properties), S_OK, NULL);
    EXPECT(properties.TemporaryResourceSize == 0 && properties.PersistentResourceSize == 0, "no resources needed");
    dmlReleaseOperator(op);
    dmlReleaseCompiledOperator(compiled);

    DML_OPERATOR_DESC unknown = {(DML_OPERATOR_TYPE)5, &p.pool};
    EXPECT_STATUS(dmlCreateOperator(device, &unknown, &op), E_INVALIDARG, "Type 5");
    DML_OPERATOR_DESC no_desc = {DML_OPERATOR_MAX_POOLING2, NULL};
    EXPECT_STATUS(dmlCreateOperator(device, &no_desc, &op), E_INVALIDARG, "MAX_POOLING2", "Desc");
    dmlReleaseDevice(device);
}

TEST_CASE(operator_feature_levels) {
    DML_DEVICE_DESC desc = {.FeatureLevel = DML_FEATURE_LEVEL_2_0};
    DMLDevice* device = NULL;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), S_OK, NULL);
    pool_op p;
    pool_op_init(&p, false);
    DMLOperator* op = NULL;
    /* Levels print as DirectML names them (DML_FEATURE_LEVEL_2_1 is 0x2100). */
    EXPECT_STATUS(dmlCreateOperator(device, &p.op, &op), E_INVALIDARG, "MAX_POOLING2",
                  "needs feature level 2.1 but the device was created at 2.0");
    dmlReleaseDevice(device);
}

/* Dispatches p with the given bindings; expects status and message needles. */
typedef struct bound {
    float input[16], output[4];
    uint32_t indices[4];
    DML_BUFFER_BINDING in, out, idx;
    DML_BINDING_DESC inputs[1], outputs[2];
    DML_DISPATCH_BINDINGS bindings;
} bound;

static void bound_init(bound* b) {
    memset(b, 0, sizeof *b);
    for (int i = 0; i < 16; i++)
        b->input[i] = (float)i;
    b->in = (DML_BUFFER_BINDING){b->input, 0, sizeof b->input};
    b->out = (DML_BUFFER_BINDING){b->output, 0, sizeof b->output};
    b->idx = (DML_BUFFER_BINDING){b->indices, 0, sizeof b->indices};
    b->inputs[0] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &b->in};
    b->outputs[0] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &b->out};
    b->outputs[1] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &b->idx};
    b->bindings = (DML_DISPATCH_BINDINGS){1, b->inputs, 2, b->outputs, {0, NULL}, {0, NULL}};
}

TEST_CASE(binding_validation) {
    DMLDevice* device = test_device(2);
    pool_op p;
    pool_op_init(&p, true);
    DMLCompiledOperator* compiled = compile(device, &p.op);
    if (!compiled) return;
    bound b;

    bound_init(&b);
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), S_OK, NULL);
    EXPECT(b.output[0] == 5 && b.output[3] == 15 && b.indices[3] == 15, "a valid dispatch computes");

    bound_init(&b);
    b.bindings.InputCount = 2;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "MAX_POOLING2", "2 bindings", "1 input");

    bound_init(&b);
    b.bindings.OutputCount = 1;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "output slots");

    bound_init(&b);
    b.inputs[0].Type = DML_BINDING_TYPE_NONE;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "InputTensor", "not bound");

    bound_init(&b);
    b.inputs[0].Type = DML_BINDING_TYPE_BUFFER_ARRAY;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "InputTensor", "DML_BINDING_TYPE_BUFFER");

    bound_init(&b);
    b.in.SizeInBytes = 60;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "InputTensor", "SizeInBytes", "64");

    bound_init(&b);
    b.in.Offset = 4; /* not a multiple of the 16-byte default alignment */
    b.in.SizeInBytes = 64;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "InputTensor", "Offset");

    bound_init(&b);
    b.in.Buffer = (char*)b.input + 2; /* not aligned to the element size */
    b.in.SizeInBytes = 64;            /* rejected before anything is read */
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "InputTensor", "element");

    /* Absent optional output: NONE and a NULL Buffer both mean "not bound". */
    pool_op q;
    pool_op_init(&q, false);
    DMLCompiledOperator* no_indices = compile(device, &q.op);
    bound_init(&b);
    b.outputs[1].Type = DML_BINDING_TYPE_NONE;
    EXPECT_STATUS(dmlDispatch(no_indices, &b.bindings), S_OK, NULL);
    bound_init(&b);
    b.idx.Buffer = NULL;
    EXPECT_STATUS(dmlDispatch(no_indices, &b.bindings), S_OK, NULL);
    bound_init(&b);
    EXPECT_STATUS(dmlDispatch(no_indices, &b.bindings), E_INVALIDARG, "OutputIndicesTensor", "absent");
    dmlReleaseCompiledOperator(no_indices);

    /* Overlaps (spec §6.4): input/output and output/output. */
    bound_init(&b);
    b.out.Buffer = b.input + 8;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "OutputTensor", "overlaps", "InputTensor");
    bound_init(&b);
    b.idx.Buffer = b.output;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "overlap");

    /* A temporary or persistent resource where none is needed. */
    bound_init(&b);
    DML_BUFFER_BINDING scratch = {b.input, 0, 64};
    b.bindings.TemporaryResource = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &scratch};
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "TemporaryResource");

    /* A failed dispatch wrote nothing. */
    bound_init(&b);
    b.in.SizeInBytes = 4;
    for (int i = 0; i < 4; i++)
        b.output[i] = -1;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "SizeInBytes");
    EXPECT(b.output[0] == -1 && b.output[3] == -1, "outputs untouched after a rejected dispatch");
    EXPECT(dmlGetDeviceRemovedReason(device) == S_OK, "binding errors do not remove the device (T-8)");

    dmlReleaseCompiledOperator(compiled);
    dmlReleaseDevice(device);
}

TEST_CASE(owned_by_dml_inputs_use_the_persistent_resource) {
    DMLDevice* device = test_device(1);
    pool_op p;
    pool_op_init(&p, false);
    p.in.Flags = DML_TENSOR_FLAG_OWNED_BY_DML;
    DMLCompiledOperator* compiled = compile(device, &p.op);
    if (!compiled) return;
    DML_BINDING_PROPERTIES properties;
    dmlGetBindingProperties(compiled, &properties);
    EXPECT(properties.PersistentResourceSize == 256, "one 256-aligned slot, got %llu",
           (unsigned long long)properties.PersistentResourceSize);

    bound b;
    bound_init(&b);
    b.inputs[0].Type = DML_BINDING_TYPE_NONE;
    b.bindings.OutputCount = 2;
    b.outputs[1].Type = DML_BINDING_TYPE_NONE;
    void* persistent = NULL;
    EXPECT_STATUS(dmlAllocateBuffer(device, properties.PersistentResourceSize, &persistent), S_OK, NULL);
    DML_BUFFER_BINDING persistent_buffer = {persistent, 0, properties.PersistentResourceSize};
    DML_BINDING_DESC persistent_binding = {DML_BINDING_TYPE_BUFFER, &persistent_buffer};
    b.bindings.PersistentResource = persistent_binding;

    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "not initialized");
    DML_BINDING_DESC init_inputs[1] = {{DML_BINDING_TYPE_BUFFER, &b.in}};
    EXPECT_STATUS(dmlInitializeOperator(compiled, 1, init_inputs, NULL), E_INVALIDARG, "PersistentResource");
    EXPECT_STATUS(dmlInitializeOperator(compiled, 1, init_inputs, &persistent_binding), S_OK, NULL);
    memset(b.input, 0, sizeof b.input); /* the captured copy is what counts now */

    b.inputs[0] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &b.in};
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "OWNED_BY_DML");
    b.inputs[0].Type = DML_BINDING_TYPE_NONE;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), S_OK, NULL);
    EXPECT(b.output[0] == 5 && b.output[3] == 15, "computed from the captured input: %g %g", b.output[0], b.output[3]);

    /* The resource's address must suit the owned tensors' elements, as every
     * other binding's must (its Offset being a multiple of 256 is not enough). */
    void* larger = NULL;
    EXPECT_STATUS(dmlAllocateBuffer(device, 2 * properties.PersistentResourceSize, &larger), S_OK, NULL);
    DML_BUFFER_BINDING misaligned_buffer = {(char*)larger + 2, 0, properties.PersistentResourceSize};
    DML_BINDING_DESC misaligned = {DML_BINDING_TYPE_BUFFER, &misaligned_buffer};
    EXPECT_STATUS(dmlInitializeOperator(compiled, 1, init_inputs, &misaligned), E_INVALIDARG, "MAX_POOLING2",
                  "PersistentResource", "aligned");
    b.bindings.PersistentResource = misaligned;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, "PersistentResource", "aligned");
    dmlFreeBuffer(device, larger);
    dmlFreeBuffer(device, persistent);
    dmlReleaseCompiledOperator(compiled);
    dmlReleaseDevice(device);
}

/* The persistent resource's size is an overflow-checked sum: an owned input
 * whose rounded size, or owned inputs whose sizes together, pass 2^64 are an
 * invalid description, rejected by dmlCreateOperator (once wrapped to 0,
 * dispatch read through NULL), so that a created operator always compiles
 * (fuzz_create's rule; the fuzzer found it failing at compile time). */
TEST_CASE(persistent_size_past_2_64_is_an_error) {
    DMLDevice* device = test_device(1);
    pool_op p;
    pool_op_init(&p, false);
    p.in.Flags = DML_TENSOR_FLAG_OWNED_BY_DML;
    DMLOperator* op = NULL;
    DMLCompiledOperator* compiled = NULL;
    const UINT64 wrapping[2] = {UINT64_MAX - 251, UINT64_MAX - 3}; /* multiples of 4 */
    for (int i = 0; i < 2; i++) {
        p.in.TotalTensorSizeInBytes = wrapping[i];
        EXPECT_STATUS(dmlCreateOperator(device, &p.op, &op), E_INVALIDARG, "MAX_POOLING2", "InputTensor",
                      "OWNED_BY_DML", "2^64");
        EXPECT(op == NULL, "no operator on failure");
    }

    /* MAX_POOLING_GRAD: two owned inputs. */
    DML_BUFFER_TENSOR_DESC gradient = p.in;
    gradient.Flags = DML_TENSOR_FLAG_NONE;
    gradient.TotalTensorSizeInBytes = 64;
    DML_TENSOR_DESC gradient_desc = {DML_TENSOR_TYPE_BUFFER, &gradient};
    DML_MAX_POOLING_GRAD_OPERATOR_DESC grad = {&p.in_desc, &p.out_desc, &gradient_desc, 2,          p.strides,
                                               p.window,   p.padding,   p.padding,      p.dilations};
    DML_OPERATOR_DESC grad_op = {DML_OPERATOR_MAX_POOLING_GRAD, &grad};
    p.out.Flags = DML_TENSOR_FLAG_OWNED_BY_DML;
    const UINT64 second[2] = {(UINT64)1 << 63, ((UINT64)1 << 63) - 512};
    for (int i = 0; i < 2; i++) {
        p.in.TotalTensorSizeInBytes = (UINT64)1 << 63;
        p.out.TotalTensorSizeInBytes = second[i];
        HRESULT status = dmlCreateOperator(device, &grad_op, &op);
        if (i == 0) {
            EXPECT_STATUS(status, E_INVALIDARG, "MAX_POOLING_GRAD", "InputGradientTensor", "2^64");
        } else { /* 2^64 - 512 in all: representable, so accepted */
            EXPECT_STATUS(status, S_OK, NULL);
            EXPECT_STATUS(dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &compiled), S_OK, NULL);
            DML_BINDING_PROPERTIES properties = {0};
            dmlGetBindingProperties(compiled, &properties);
            EXPECT(properties.PersistentResourceSize == UINT64_MAX - 511, "PersistentResourceSize %llu",
                   (unsigned long long)properties.PersistentResourceSize);
        }
        dmlReleaseCompiledOperator(compiled);
        compiled = NULL;
        dmlReleaseOperator(op);
    }
    dmlReleaseDevice(device);
}

/* Operators and compiled operators keep their device alive, as in DirectML:
 * any release order works (ASan checks that nothing is used after free). */
TEST_CASE(release_order_does_not_matter) {
    for (int order = 0; order < 2; order++) {
        DMLDevice* device = test_device(1);
        pool_op p;
        pool_op_init(&p, true);
        DMLOperator* op = NULL;
        DMLCompiledOperator* compiled = NULL;
        EXPECT_STATUS(dmlCreateOperator(device, &p.op, &op), S_OK, NULL);
        EXPECT_STATUS(dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &compiled), S_OK, NULL);
        dmlReleaseDevice(device); /* the caller's reference only */
        if (order == 0) dmlReleaseOperator(op);
        bound b;
        bound_init(&b);
        if (compiled) EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), S_OK, NULL);
        EXPECT(b.output[0] == 5 && b.output[3] == 15, "dispatch after dmlReleaseDevice computes");
        dmlReleaseCompiledOperator(compiled);
        if (order == 1) dmlReleaseOperator(op); /* the last reference */
    }
}

TEST_CASE(buffers_round_trip) {
    DMLDevice* device = test_device(1);
    void* buffer = NULL;
    EXPECT_STATUS(dmlAllocateBuffer(device, 0, &buffer), E_INVALIDARG, "sizeInBytes");
    EXPECT_STATUS(dmlAllocateBuffer(device, 100, &buffer), S_OK, NULL);
    char in[100], out[100];
    for (int i = 0; i < 100; i++)
        in[i] = (char)i;
    EXPECT_STATUS(dmlUpload(device, buffer, in, 100), S_OK, NULL);
    EXPECT_STATUS(dmlDownload(device, out, buffer, 100), S_OK, NULL);
    EXPECT(memcmp(in, out, 100) == 0, "upload then download gives the bytes back");
    EXPECT_STATUS(dmlFill(device, buffer, 7, 100), S_OK, NULL);
    EXPECT_STATUS(dmlDownload(device, out, buffer, 100), S_OK, NULL);
    EXPECT(out[0] == 7 && out[99] == 7, "fill");
    EXPECT_STATUS(dmlUpload(device, NULL, in, 4), E_POINTER, "NULL");
    dmlFreeBuffer(device, buffer);
    dmlReleaseDevice(device);
}

/* Instruction-set levels: MaxCpuIsa and DML_CPU_ISA cap what may run. */
TEST_CASE(cpu_isa_levels) {
    DMLDevice* device = NULL;
    DML_DEVICE_DESC desc = {.MaxCpuIsa = (DML_CPU_ISA)5};
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), E_INVALIDARG, "MaxCpuIsa");

    char saved[32] = "";
    const char* environment = getenv("DML_CPU_ISA");
    bool had_environment = environment != NULL;
    if (had_environment) snprintf(saved, sizeof saved, "%s", environment);
    unsetenv("DML_CPU_ISA");
    EXPECT_STATUS(dmlCreateDevice(NULL, &device), S_OK, NULL);
    DML_CPU_ISA machine = dmlGetDeviceCpuIsa(device);
    EXPECT(machine >= DML_CPU_ISA_GENERIC && machine <= DML_CPU_ISA_AVX512, "a level: %d", (int)machine);
    dmlReleaseDevice(device);

    desc.MaxCpuIsa = DML_CPU_ISA_GENERIC;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), S_OK, NULL);
    EXPECT(dmlGetDeviceCpuIsa(device) == DML_CPU_ISA_GENERIC, "MaxCpuIsa caps the level");
    pool_op p;
    pool_op_init(&p, true);
    DMLCompiledOperator* compiled = compile(device, &p.op);
    DML_COMPILED_OPERATOR_INFO info = {0};
    EXPECT_STATUS(dmlGetCompiledOperatorInfo(compiled, &info), S_OK, NULL);
    EXPECT(info.ImplementationName && strcmp(info.ImplementationName, "max_pooling/generic/strided") == 0,
           "a generic device runs the generic kernel, got %s", info.ImplementationName);
    dmlReleaseCompiledOperator(compiled);
    dmlReleaseDevice(device);

    desc.MaxCpuIsa = DML_CPU_ISA_AVX512;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), S_OK, NULL);
    EXPECT(dmlGetDeviceCpuIsa(device) == machine, "a cap above the machine's level changes nothing");
    dmlReleaseDevice(device);

    setenv("DML_CPU_ISA", "sse9", 1);
    EXPECT_STATUS(dmlCreateDevice(NULL, &device), E_INVALIDARG, "DML_CPU_ISA", "sse9");
    setenv("DML_CPU_ISA", "generic", 1);
    EXPECT_STATUS(dmlCreateDevice(NULL, &device), S_OK, NULL);
    EXPECT(dmlGetDeviceCpuIsa(device) == DML_CPU_ISA_GENERIC, "DML_CPU_ISA caps the level");
    dmlReleaseDevice(device);
    if (had_environment)
        setenv("DML_CPU_ISA", saved, 1);
    else
        unsetenv("DML_CPU_ISA");
    EXPECT_STATUS(dmlGetCompiledOperatorInfo(NULL, &info), E_POINTER, "dmlGetCompiledOperatorInfo");
}

/* MAX_POOLING_GRAD plans a workspace: the TemporaryResource rules at dispatch. */
TEST_CASE(temporary_resource_binding) {
    DMLDevice* device = test_device(2);
    pool_op p;
    pool_op_init(&p, false);
    /* Overlapping 2x2 windows, strides 1: every implementation asks for a
     * workspace (the fast paths' band-free 2x2/2 and 3x3/2 gradients do not). */
    p.strides[0] = p.strides[1] = 1;
    p.out_sizes[2] = p.out_sizes[3] = 3;
    p.out.TotalTensorSizeInBytes = 36;
    DML_BUFFER_TENSOR_DESC grad_out = p.in;
    DML_TENSOR_DESC grad_out_desc = {DML_TENSOR_TYPE_BUFFER, &grad_out};
    DML_MAX_POOLING_GRAD_OPERATOR_DESC grad = {&p.in_desc, &p.out_desc, &grad_out_desc, 2,          p.strides,
                                               p.window,   p.padding,   p.padding,      p.dilations};
    DML_OPERATOR_DESC desc = {DML_OPERATOR_MAX_POOLING_GRAD, &grad};
    DMLCompiledOperator* compiled = compile(device, &desc);
    if (!compiled) return;
    DML_COMPILED_OPERATOR_INFO info;
    DML_BINDING_PROPERTIES properties;
    EXPECT_STATUS(dmlGetCompiledOperatorInfo(compiled, &info), S_OK, NULL);
    EXPECT_STATUS(dmlGetBindingProperties(compiled, &properties), S_OK, NULL);
    EXPECT(strncmp(info.ImplementationName, "max_pooling_grad/", 17) == 0, "implementation %s",
           info.ImplementationName);
    EXPECT(info.TemporaryResourceSize > 0 && info.TemporaryResourceSize == properties.TemporaryResourceSize,
           "the workspace is reported alike: %llu and %llu", (unsigned long long)info.TemporaryResourceSize,
           (unsigned long long)properties.TemporaryResourceSize);

    float input[16], dy[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, dx[16];
    for (int i = 0; i < 16; i++)
        input[i] = (float)i;
    uint64_t temporary_size = info.TemporaryResourceSize;
    uint8_t* temporary = aligned_alloc(256, (temporary_size + 256 + 255) / 256 * 256);
    DML_BUFFER_BINDING in = {input, 0, sizeof input}, gradient = {dy, 0, sizeof dy}, out = {dx, 0, sizeof dx};
    DML_BUFFER_BINDING scratch = {temporary, 0, temporary_size};
    DML_BINDING_DESC inputs[2] = {{DML_BINDING_TYPE_BUFFER, &in}, {DML_BINDING_TYPE_BUFFER, &gradient}};
    DML_BINDING_DESC outputs[1] = {{DML_BINDING_TYPE_BUFFER, &out}};
    DML_DISPATCH_BINDINGS bindings = {2, inputs, 1, outputs, {DML_BINDING_TYPE_NONE, NULL}, {0, NULL}};
    EXPECT_STATUS(dmlDispatch(compiled, &bindings), E_INVALIDARG, "MAX_POOLING_GRAD",
                  "TemporaryResource must be bound");
    bindings.TemporaryResource = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &scratch};
    scratch.SizeInBytes = temporary_size - 1;
    EXPECT_STATUS(dmlDispatch(compiled, &bindings), E_INVALIDARG, "TemporaryResource", "SizeInBytes");
    scratch = (DML_BUFFER_BINDING){temporary, 16, temporary_size};
    EXPECT_STATUS(dmlDispatch(compiled, &bindings), E_INVALIDARG, "TemporaryResource", "Offset");
    scratch = (DML_BUFFER_BINDING){dx, 0, temporary_size};
    EXPECT_STATUS(dmlDispatch(compiled, &bindings), E_INVALIDARG, "TemporaryResource overlaps", "OutputGradient");
    scratch = (DML_BUFFER_BINDING){temporary, 256, temporary_size}; /* any 256-aligned offset */
    memset(temporary, 0xCD, temporary_size + 256);                  /* the workspace need not be zeroed */
    EXPECT_STATUS(dmlDispatch(compiled, &bindings), S_OK, NULL);
    /* Window (oh, ow)'s maximum is its last element, (oh + 1, ow + 1): each once. */
    for (int i = 0; i < 16; i++) {
        int h = i / 4, w = i % 4;
        float expected = h > 0 && w > 0 ? dy[(h - 1) * 3 + w - 1] : 0;
        EXPECT(dx[i] == expected, "dx[%d] is %g, expected %g", i, dx[i], expected);
    }
    free(temporary);
    dmlReleaseCompiledOperator(compiled);
    dmlReleaseDevice(device);
}
