/* Several threads using one device at once: each creates, compiles and
 * dispatches operators while the others do the same, and one compiled
 * operator is dispatched from every thread concurrently. Every result must
 * equal the serial run's, bit for bit. Runs clean under ThreadSanitizer
 * (make test-tsan). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { THREADS = 4, ITERATIONS = 12, MAX_SLOTS = 3 };

/* One operator with its inputs and the outputs of a serial run. */
typedef struct workload {
    const char* name;
    test_tensor tensors[2 * MAX_SLOTS];
    UINT strides[3], window[3], padding[3], dilations[3];
    DML_MAX_POOLING2_OPERATOR_DESC pool;
    DML_MAX_POOLING_GRAD_OPERATOR_DESC grad;
    DML_OPERATOR_DESC desc;
    uint32_t input_count, output_count;
    test_buffer inputs[MAX_SLOTS];
    test_buffer expected[MAX_SLOTS];
} workload;

static void set_window(workload* w, uint32_t k, uint32_t window, uint32_t stride, uint32_t padding) {
    for (uint32_t i = 0; i < k; i++) {
        w->window[i] = window;
        w->strides[i] = stride;
        w->padding[i] = padding;
        w->dilations[i] = 1;
    }
}

static void forward_workload(workload* w, const char* name, DML_TENSOR_DATA_TYPE type, DML_TENSOR_DATA_TYPE index,
                             uint32_t rank, const uint32_t* in, const uint32_t* out) {
    w->name = name;
    uint32_t k = rank - 2;
    set_window(w, k, 3, 2, 1);
    test_tensor_init(&w->tensors[0], type, rank, in, TEST_LAYOUT_PERMUTED);
    test_tensor_init(&w->tensors[1], type, rank, out, TEST_LAYOUT_PADDED);
    test_tensor_init(&w->tensors[2], index, rank, out, TEST_LAYOUT_PACKED);
    w->pool = (DML_MAX_POOLING2_OPERATOR_DESC){&w->tensors[0].desc, &w->tensors[1].desc, &w->tensors[2].desc, k,
                                               w->strides, w->window, w->padding, w->padding, w->dilations};
    w->desc = (DML_OPERATOR_DESC){DML_OPERATOR_MAX_POOLING2, &w->pool};
    w->input_count = 1;
    w->output_count = 2;
}

static void grad_workload(workload* w, const char* name, DML_TENSOR_DATA_TYPE type, const uint32_t* in,
                          const uint32_t* out) {
    w->name = name;
    set_window(w, 2, 3, 1, 1); /* overlapping windows: accumulation order matters */
    test_tensor_init(&w->tensors[0], type, 4, in, TEST_LAYOUT_PACKED);
    test_tensor_init(&w->tensors[1], type, 4, out, TEST_LAYOUT_PERMUTED);
    test_tensor_init(&w->tensors[2], type, 4, in, TEST_LAYOUT_PADDED);
    w->grad = (DML_MAX_POOLING_GRAD_OPERATOR_DESC){&w->tensors[0].desc, &w->tensors[1].desc, &w->tensors[2].desc, 2,
                                                   w->strides, w->window, w->padding, w->padding, w->dilations};
    w->desc = (DML_OPERATOR_DESC){DML_OPERATOR_MAX_POOLING_GRAD, &w->grad};
    w->input_count = 2;
    w->output_count = 1;
}

static const test_tensor* output_tensor(const workload* w, uint32_t i) { return &w->tensors[w->input_count + i]; }

/* Fills the inputs and computes the expected outputs with one thread. */
static void prepare(workload* w, DMLDevice* serial) {
    test_buffer* inputs[MAX_SLOTS];
    test_buffer* outputs[MAX_SLOTS];
    for (uint32_t i = 0; i < w->input_count; i++) {
        test_buffer_alloc(&w->inputs[i], w->tensors[i].buffer.TotalTensorSizeInBytes);
        test_fill_random(&w->inputs[i], &w->tensors[i], -2, 2);
        inputs[i] = &w->inputs[i];
    }
    for (uint32_t i = 0; i < w->output_count; i++) {
        test_buffer_alloc(&w->expected[i], output_tensor(w, i)->buffer.TotalTensorSizeInBytes);
        outputs[i] = &w->expected[i];
    }
    EXPECT_STATUS(test_run(serial, &w->desc, w->input_count, inputs, w->output_count, outputs), S_OK, NULL);
}

static void release(workload* w) {
    for (uint32_t i = 0; i < w->input_count; i++) test_buffer_free(&w->inputs[i]);
    for (uint32_t i = 0; i < w->output_count; i++) test_buffer_free(&w->expected[i]);
}

enum { WORKLOADS = 4 };
static workload workloads[WORKLOADS];
static DMLDevice* shared_device;
static DMLCompiledOperator* shared_compiled; /* workloads[0], dispatched by every thread */
static atomic_int mismatches, failures;

/* Dispatches workload w (compiled, or created and compiled here when NULL)
 * into fresh outputs and compares them with the serial run. */
static void dispatch_and_compare(const workload* w, DMLCompiledOperator* compiled) {
    DMLOperator* op = NULL;
    DMLCompiledOperator* own = NULL;
    if (compiled == NULL) {
        if (FAILED(dmlCreateOperator(shared_device, &w->desc, &op)) ||
            FAILED(dmlCompileOperator(shared_device, op, DML_EXECUTION_FLAG_NONE, &own))) {
            fprintf(stderr, "%s: %s\n", w->name, dmlGetLastErrorMessage());
            atomic_fetch_add(&failures, 1);
            dmlReleaseOperator(op);
            return;
        }
        dmlReleaseOperator(op);
        compiled = own;
    }
    test_buffer outputs[MAX_SLOTS];
    DML_BUFFER_BINDING buffers[2 * MAX_SLOTS];
    DML_BINDING_DESC in_bindings[MAX_SLOTS], out_bindings[MAX_SLOTS];
    for (uint32_t i = 0; i < w->input_count; i++) {
        buffers[i] = (DML_BUFFER_BINDING){w->inputs[i].data, 0, w->inputs[i].size};
        in_bindings[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &buffers[i]};
    }
    for (uint32_t i = 0; i < w->output_count; i++) {
        test_buffer_alloc(&outputs[i], w->expected[i].size);
        buffers[MAX_SLOTS + i] = (DML_BUFFER_BINDING){outputs[i].data, 0, outputs[i].size};
        out_bindings[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &buffers[MAX_SLOTS + i]};
    }
    DML_DISPATCH_BINDINGS bindings = {w->input_count, in_bindings, w->output_count, out_bindings, {0, NULL}, {0, NULL}};
    if (FAILED(dmlDispatch(compiled, &bindings))) {
        fprintf(stderr, "%s: %s\n", w->name, dmlGetLastErrorMessage());
        atomic_fetch_add(&failures, 1);
    }
    for (uint32_t i = 0; i < w->output_count; i++) {
        /* Whole blocks: guards and unaddressed bytes must match the serial run's too. */
        if (memcmp(outputs[i].block, w->expected[i].block, outputs[i].size + 2 * TEST_GUARD_BYTES) != 0)
            atomic_fetch_add(&mismatches, 1);
        test_buffer_free(&outputs[i]);
    }
    dmlReleaseCompiledOperator(own);
}

static void* worker(void* argument) {
    int thread = (int)(intptr_t)argument;
    for (int i = 0; i < ITERATIONS; i++) {
        dispatch_and_compare(&workloads[(thread + i) % WORKLOADS], NULL);
        dispatch_and_compare(&workloads[0], shared_compiled);
    }
    return NULL;
}

TEST_CASE(threads_share_a_device_and_a_compiled_operator) {
    DMLDevice* serial = test_device(1);
    shared_device = test_device(2); /* each dispatch also runs on 2 OpenMP threads */
    /* Large enough that each dispatch runs on both OpenMP threads. */
    const uint32_t in4[4] = {2, 16, 64, 48}, out4[4] = {2, 16, 32, 24};
    const uint32_t in5[5] = {1, 3, 5, 9, 7}, out5[5] = {1, 3, 3, 5, 4};
    const uint32_t grad_out[4] = {2, 16, 64, 48};
    forward_workload(&workloads[0], "MAX_POOLING2 FLOAT32", DML_TENSOR_DATA_TYPE_FLOAT32,
                     DML_TENSOR_DATA_TYPE_UINT32, 4, in4, out4);
    forward_workload(&workloads[1], "MAX_POOLING2 INT8 5-D", DML_TENSOR_DATA_TYPE_INT8, DML_TENSOR_DATA_TYPE_UINT64,
                     5, in5, out5);
    grad_workload(&workloads[2], "MAX_POOLING_GRAD FLOAT32", DML_TENSOR_DATA_TYPE_FLOAT32, in4, grad_out);
    grad_workload(&workloads[3], "MAX_POOLING_GRAD FLOAT16", DML_TENSOR_DATA_TYPE_FLOAT16, in4, grad_out);
    for (int w = 0; w < WORKLOADS; w++) prepare(&workloads[w], serial);

    DMLOperator* op = NULL;
    EXPECT_STATUS(dmlCreateOperator(shared_device, &workloads[0].desc, &op), S_OK, NULL);
    EXPECT_STATUS(dmlCompileOperator(shared_device, op, DML_EXECUTION_FLAG_NONE, &shared_compiled), S_OK, NULL);
    dmlReleaseOperator(op);

    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, worker, (void*)(intptr_t)t);
    for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
    EXPECT(atomic_load(&failures) == 0, "%d concurrent calls failed", atomic_load(&failures));
    EXPECT(atomic_load(&mismatches) == 0, "%d concurrent results differ from the serial run",
           atomic_load(&mismatches));

    dmlReleaseCompiledOperator(shared_compiled);
    for (int w = 0; w < WORKLOADS; w++) release(&workloads[w]);
    dmlReleaseDevice(shared_device);
    dmlReleaseDevice(serial);
}

static void* read_message(void* unused) {
    (void)unused;
    return (void*)dmlGetLastErrorMessage();
}

TEST_CASE(error_messages_are_per_thread) {
    /* A failure on one thread leaves another thread's message alone. */
    DMLDevice* device = test_device(1);
    DML_OPERATOR_DESC bad = {DML_OPERATOR_MAX_POOLING2, NULL};
    DMLOperator* op = NULL;
    EXPECT_STATUS(dmlCreateOperator(device, &bad, &op), E_INVALIDARG, "MAX_POOLING2");
    pthread_t other;
    pthread_create(&other, NULL, read_message, NULL);
    void* message = NULL;
    pthread_join(other, &message);
    EXPECT(message != NULL && ((const char*)message)[0] == '\0', "a new thread starts with no message");
    EXPECT(strstr(dmlGetLastErrorMessage(), "MAX_POOLING2") != NULL, "this thread keeps its message");
    dmlReleaseDevice(device);
}
