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

enum { THREADS = 4, MAX_INPUTS = 5, MAX_OUTPUTS = 3, MAX_TENSORS = MAX_INPUTS + MAX_OUTPUTS };

/* How an input is filled: values, or data the operator reads as positions. */
typedef enum input_kind {
    VALUES,       /* uniform in [-2, 2] */
    POSITIVE,     /* uniform in [0.5, 2]: variances */
    ALIGN_BOXES,  /* ROI align: [x1, y1, x2, y2] rows inside a 24x24 image */
    POOLING_ROWS, /* ROI pooling: [batch, x1, y1, x2, y2] rows, batch < 2 */
    BATCH_INDICES /* ROI align: batch indices < 2 */
} input_kind;

/* One operator with its inputs and the outputs of a serial run. */
typedef struct workload {
    const char* name;
    uint32_t input_count, output_count;
    test_tensor tensors[MAX_TENSORS]; /* inputs, then outputs */
    input_kind kinds[MAX_INPUTS];
    UINT strides[3], window[3], padding[3], dilations[3];
    union {
        DML_MAX_POOLING2_OPERATOR_DESC pool;
        DML_MAX_POOLING_GRAD_OPERATOR_DESC pool_grad;
        DML_ROI_POOLING_OPERATOR_DESC roi_pool;
        DML_ROI_ALIGN_OPERATOR_DESC align;
        DML_ROI_ALIGN1_OPERATOR_DESC align1;
        DML_ROI_ALIGN_GRAD_OPERATOR_DESC align_grad;
        DML_BATCH_NORMALIZATION_OPERATOR_DESC bn;
        DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC bn_training;
        DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC bn_grad;
        DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC bn_training_grad;
    } op;
    DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC leaky_relu;
    DML_OPERATOR_DESC activation;
    DML_OPERATOR_DESC desc;
    test_buffer inputs[MAX_INPUTS];
    test_buffer expected[MAX_OUTPUTS];
} workload;

static const DML_TENSOR_DESC* tensor(workload* w, uint32_t index) { return &w->tensors[index].desc; }

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
    w->op.pool = (DML_MAX_POOLING2_OPERATOR_DESC){tensor(w, 0), tensor(w, 1), tensor(w, 2), k,           w->strides,
                                                  w->window,    w->padding,   w->padding,   w->dilations};
    w->desc = (DML_OPERATOR_DESC){DML_OPERATOR_MAX_POOLING2, &w->op.pool};
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
    w->op.pool_grad = (DML_MAX_POOLING_GRAD_OPERATOR_DESC){
        tensor(w, 0), tensor(w, 1), tensor(w, 2), 2, w->strides, w->window, w->padding, w->padding, w->dilations};
    w->desc = (DML_OPERATOR_DESC){DML_OPERATOR_MAX_POOLING_GRAD, &w->op.pool_grad};
    w->input_count = 2;
    w->output_count = 1;
}

/* The ROI workloads: 2 images of 16 channels, 24x24; 16 regions, 8x8 outputs
 * (2048 output rows: each dispatch runs on both threads). */
static const uint32_t roi_image[4] = {2, 16, 24, 24}, roi_output[4] = {16, 16, 8, 8};

static void roi_pooling_workload(workload* w) {
    const uint32_t rois[4] = {1, 1, 16, 5};
    w->name = "ROI_POOLING FLOAT32";
    test_tensor_init(&w->tensors[0], DML_TENSOR_DATA_TYPE_FLOAT32, 4, roi_image, TEST_LAYOUT_PERMUTED);
    test_tensor_init(&w->tensors[1], DML_TENSOR_DATA_TYPE_FLOAT32, 4, rois, TEST_LAYOUT_PACKED);
    test_tensor_init(&w->tensors[2], DML_TENSOR_DATA_TYPE_FLOAT32, 4, roi_output, TEST_LAYOUT_PADDED);
    w->kinds[1] = POOLING_ROWS;
    w->op.roi_pool = (DML_ROI_POOLING_OPERATOR_DESC){tensor(w, 0), tensor(w, 1), tensor(w, 2), 1.0f, {8, 8}};
    w->desc = (DML_OPERATOR_DESC){DML_OPERATOR_ROI_POOLING, &w->op.roi_pool};
    w->input_count = 2;
    w->output_count = 1;
}

static void roi_inputs(workload* w, DML_TENSOR_DATA_TYPE type) {
    const uint32_t rois[2] = {16, 4}, batch[1] = {16};
    test_tensor_init(&w->tensors[0], type, 4, roi_image, TEST_LAYOUT_PERMUTED);
    test_tensor_init(&w->tensors[1], type, 2, rois, TEST_LAYOUT_PACKED);
    test_tensor_init(&w->tensors[2], DML_TENSOR_DATA_TYPE_UINT32, 1, batch, TEST_LAYOUT_PACKED);
    w->kinds[1] = ALIGN_BOXES;
    w->kinds[2] = BATCH_INDICES;
}

static void roi_align_workload(workload* w, bool version1) {
    DML_TENSOR_DATA_TYPE type = version1 ? DML_TENSOR_DATA_TYPE_FLOAT32 : DML_TENSOR_DATA_TYPE_FLOAT16;
    w->name = version1 ? "ROI_ALIGN1 FLOAT32 AVERAGE" : "ROI_ALIGN FLOAT16 MAX";
    roi_inputs(w, type);
    test_tensor_init(&w->tensors[3], type, 4, roi_output, TEST_LAYOUT_PADDED);
    if (version1) {
        w->op.align1 = (DML_ROI_ALIGN1_OPERATOR_DESC){tensor(w, 0),
                                                      tensor(w, 1),
                                                      tensor(w, 2),
                                                      tensor(w, 3),
                                                      DML_REDUCE_FUNCTION_AVERAGE,
                                                      DML_INTERPOLATION_MODE_LINEAR,
                                                      1.0f,
                                                      1.0f,
                                                      0.5f,
                                                      -0.5f,
                                                      0.0f,
                                                      1,
                                                      4,
                                                      0};
        w->desc = (DML_OPERATOR_DESC){DML_OPERATOR_ROI_ALIGN1, &w->op.align1};
    } else {
        w->op.align = (DML_ROI_ALIGN_OPERATOR_DESC){tensor(w, 0),
                                                    tensor(w, 1),
                                                    tensor(w, 2),
                                                    tensor(w, 3),
                                                    DML_REDUCE_FUNCTION_MAX,
                                                    DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR,
                                                    1.0f,
                                                    1.0f,
                                                    -1.0f,
                                                    1,
                                                    4};
        w->desc = (DML_OPERATOR_DESC){DML_OPERATOR_ROI_ALIGN, &w->op.align};
    }
    w->input_count = 3;
    w->output_count = 1;
}

/* Both gradients; MAX reduction, whose winners come from InputTensor. */
static void roi_align_grad_workload(workload* w) {
    const DML_TENSOR_DATA_TYPE type = DML_TENSOR_DATA_TYPE_FLOAT32;
    const uint32_t rois[2] = {16, 4}, batch[1] = {16};
    w->name = "ROI_ALIGN_GRAD FLOAT32 MAX";
    /* Slots: Input, InputGradient, ROI, BatchIndices | OutputGradient, OutputROIGradient. */
    test_tensor_init(&w->tensors[0], type, 4, roi_image, TEST_LAYOUT_PERMUTED);
    test_tensor_init(&w->tensors[1], type, 4, roi_output, TEST_LAYOUT_PERMUTED);
    test_tensor_init(&w->tensors[2], type, 2, rois, TEST_LAYOUT_PACKED);
    test_tensor_init(&w->tensors[3], DML_TENSOR_DATA_TYPE_UINT32, 1, batch, TEST_LAYOUT_PACKED);
    w->kinds[2] = ALIGN_BOXES;
    w->kinds[3] = BATCH_INDICES;
    test_tensor_init(&w->tensors[4], type, 4, roi_image, TEST_LAYOUT_PADDED);
    test_tensor_init(&w->tensors[5], type, 2, rois, TEST_LAYOUT_PACKED);
    w->op.align_grad = (DML_ROI_ALIGN_GRAD_OPERATOR_DESC){tensor(w, 0),
                                                          tensor(w, 1),
                                                          tensor(w, 2),
                                                          tensor(w, 3),
                                                          tensor(w, 4),
                                                          tensor(w, 5),
                                                          DML_REDUCE_FUNCTION_MAX,
                                                          DML_INTERPOLATION_MODE_LINEAR,
                                                          1.0f,
                                                          1.0f,
                                                          0.5f,
                                                          -0.5f,
                                                          1,
                                                          4,
                                                          0};
    w->desc = (DML_OPERATOR_DESC){DML_OPERATOR_ROI_ALIGN_GRAD, &w->op.align_grad};
    w->input_count = 4;
    w->output_count = 2;
}

/* The batch normalization workloads, statistics per channel: 65536 elements
 * (4 blocks of the element-wise pass, 8 reduction tiles) in 16 channels, or
 * in 2048 channels (more groups than GROUPS_PER_THREAD: the per-group loops
 * run on both threads too). */
typedef struct bn_shape {
    uint32_t input[4], channel[4];
} bn_shape;
static const bn_shape bn_deep = {{4, 16, 32, 32}, {1, 16, 1, 1}}, bn_wide = {{2, 2048, 4, 4}, {1, 2048, 1, 1}};

static void bn_workload(workload* w) {
    const DML_TENSOR_DATA_TYPE type = DML_TENSOR_DATA_TYPE_FLOAT32;
    const uint32_t *bn_input = bn_wide.input, *bn_channel = bn_wide.channel;
    w->name = "BATCH_NORMALIZATION FLOAT32 LEAKY_RELU";
    test_tensor_init(&w->tensors[0], type, 4, bn_input, TEST_LAYOUT_PERMUTED);
    for (uint32_t i = 1; i < 5; i++)
        test_tensor_init(&w->tensors[i], type, 4, bn_channel, TEST_LAYOUT_PACKED);
    test_tensor_init(&w->tensors[5], type, 4, bn_input, TEST_LAYOUT_PADDED);
    w->kinds[2] = POSITIVE;
    w->leaky_relu = (DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC){NULL, NULL, 0.125f};
    w->activation = (DML_OPERATOR_DESC){DML_OPERATOR_ACTIVATION_LEAKY_RELU, &w->leaky_relu};
    w->op.bn = (DML_BATCH_NORMALIZATION_OPERATOR_DESC){
        tensor(w, 0), tensor(w, 1), tensor(w, 2), tensor(w, 3), tensor(w, 4), tensor(w, 5), 1, 1e-3f, &w->activation};
    w->desc = (DML_OPERATOR_DESC){DML_OPERATOR_BATCH_NORMALIZATION, &w->op.bn};
    w->input_count = 5;
    w->output_count = 1;
}

static void bn_training_workload(workload* w) {
    const DML_TENSOR_DATA_TYPE type = DML_TENSOR_DATA_TYPE_FLOAT16;
    const uint32_t *bn_input = bn_wide.input, *bn_channel = bn_wide.channel;
    w->name = "BATCH_NORMALIZATION_TRAINING FLOAT16 FusedAdd";
    test_tensor_init(&w->tensors[0], type, 4, bn_input, TEST_LAYOUT_PERMUTED);
    test_tensor_init(&w->tensors[1], type, 4, bn_channel, TEST_LAYOUT_PACKED);
    test_tensor_init(&w->tensors[2], type, 4, bn_channel, TEST_LAYOUT_PACKED);
    test_tensor_init(&w->tensors[3], type, 4, bn_input, TEST_LAYOUT_PADDED);
    test_tensor_init(&w->tensors[4], type, 4, bn_input, TEST_LAYOUT_PERMUTED);
    test_tensor_init(&w->tensors[5], type, 4, bn_channel, TEST_LAYOUT_PACKED);
    test_tensor_init(&w->tensors[6], type, 4, bn_channel, TEST_LAYOUT_EXPLICIT);
    w->op.bn_training = (DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC){
        tensor(w, 0), tensor(w, 1), tensor(w, 2), tensor(w, 3), tensor(w, 4), tensor(w, 5), tensor(w, 6), 1e-3f, NULL};
    w->desc = (DML_OPERATOR_DESC){DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, &w->op.bn_training};
    w->input_count = 4;
    w->output_count = 3;
}

/* GRAD and TRAINING_GRAD share their fields: Input, InputGradient, Mean,
 * Variance, Scale | OutputGradient, OutputScaleGradient, OutputBiasGradient. */
static void bn_grad_workload(workload* w, bool training) {
    const DML_TENSOR_DATA_TYPE type = training ? DML_TENSOR_DATA_TYPE_FLOAT32 : DML_TENSOR_DATA_TYPE_FLOAT16;
    const bn_shape* shape = training ? &bn_wide : &bn_deep;
    const uint32_t *bn_input = shape->input, *bn_channel = shape->channel;
    w->name = training ? "BATCH_NORMALIZATION_TRAINING_GRAD FLOAT32" : "BATCH_NORMALIZATION_GRAD FLOAT16";
    test_tensor_init(&w->tensors[0], type, 4, bn_input, TEST_LAYOUT_PERMUTED);
    test_tensor_init(&w->tensors[1], type, 4, bn_input, TEST_LAYOUT_PADDED);
    for (uint32_t i = 2; i < 5; i++)
        test_tensor_init(&w->tensors[i], type, 4, bn_channel, TEST_LAYOUT_PACKED);
    test_tensor_init(&w->tensors[5], type, 4, bn_input, TEST_LAYOUT_PERMUTED);
    test_tensor_init(&w->tensors[6], type, 4, bn_channel, TEST_LAYOUT_PACKED);
    test_tensor_init(&w->tensors[7], type, 4, bn_channel, TEST_LAYOUT_EXPLICIT);
    w->kinds[3] = POSITIVE;
    if (training) {
        w->op.bn_training_grad = (DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC){
            tensor(w, 0), tensor(w, 1), tensor(w, 2), tensor(w, 3), tensor(w, 4),
            tensor(w, 5), tensor(w, 6), tensor(w, 7), 1e-3f};
        w->desc = (DML_OPERATOR_DESC){DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, &w->op.bn_training_grad};
    } else {
        w->op.bn_grad = (DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC){tensor(w, 0), tensor(w, 1), tensor(w, 2),
                                                                     tensor(w, 3), tensor(w, 4), tensor(w, 5),
                                                                     tensor(w, 6), tensor(w, 7), 1e-3f};
        w->desc = (DML_OPERATOR_DESC){DML_OPERATOR_BATCH_NORMALIZATION_GRAD, &w->op.bn_grad};
    }
    w->input_count = 5;
    w->output_count = 3;
}

/* Fills input i of w as its kind says. */
static void fill_input(workload* w, uint32_t i) {
    const test_tensor* t = &w->tensors[i];
    test_buffer* b = &w->inputs[i];
    DML_TENSOR_DATA_TYPE type = t->buffer.DataType;
    switch (w->kinds[i]) {
    case VALUES: test_fill_random(b, t, -2, 2); break;
    case POSITIVE: test_fill_random(b, t, 0.5, 2); break;
    case BATCH_INDICES:
        for (uint64_t e = 0; e < t->element_count; e++)
            test_store(type, b->data, test_tensor_offset(t, e), e % 2);
        break;
    case ALIGN_BOXES:
    case POOLING_ROWS: {
        uint32_t columns = w->kinds[i] == POOLING_ROWS ? 5 : 4, first = columns - 4;
        for (uint64_t e = 0; e < t->element_count; e++) {
            uint32_t column = (uint32_t)(e % columns);
            /* x1, y1 in [0, 12], x2, y2 in [12, 23]: every region covers a few pixels. */
            double value = column < first       ? (double)(e / columns % 2)
                           : column - first < 2 ? test_rand_double(0, 12)
                                                : test_rand_double(12, 23);
            test_store(type, b->data, test_tensor_offset(t, e), value);
        }
        break;
    }
    }
}

static const test_tensor* output_tensor(const workload* w, uint32_t i) { return &w->tensors[w->input_count + i]; }

/* Fills the inputs and computes the expected outputs with one thread. */
static void prepare(workload* w, DMLDevice* serial) {
    test_buffer* inputs[MAX_INPUTS];
    test_buffer* outputs[MAX_OUTPUTS];
    for (uint32_t i = 0; i < w->input_count; i++) {
        test_buffer_alloc(&w->inputs[i], w->tensors[i].buffer.TotalTensorSizeInBytes);
        fill_input(w, i);
        inputs[i] = &w->inputs[i];
    }
    for (uint32_t i = 0; i < w->output_count; i++) {
        test_buffer_alloc(&w->expected[i], output_tensor(w, i)->buffer.TotalTensorSizeInBytes);
        outputs[i] = &w->expected[i];
    }
    EXPECT_STATUS(test_run(serial, &w->desc, w->input_count, inputs, w->output_count, outputs), S_OK, NULL);
}

static void release(workload* w) {
    for (uint32_t i = 0; i < w->input_count; i++)
        test_buffer_free(&w->inputs[i]);
    for (uint32_t i = 0; i < w->output_count; i++)
        test_buffer_free(&w->expected[i]);
}

enum { WORKLOADS = 12, ITERATIONS = WORKLOADS };
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
    test_buffer outputs[MAX_OUTPUTS];
    DML_BUFFER_BINDING buffers[MAX_TENSORS];
    DML_BINDING_DESC in_bindings[MAX_INPUTS], out_bindings[MAX_OUTPUTS];
    for (uint32_t i = 0; i < w->input_count; i++) {
        buffers[i] = (DML_BUFFER_BINDING){w->inputs[i].data, 0, w->inputs[i].size};
        in_bindings[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &buffers[i]};
    }
    for (uint32_t i = 0; i < w->output_count; i++) {
        test_buffer_alloc(&outputs[i], w->expected[i].size);
        buffers[MAX_INPUTS + i] = (DML_BUFFER_BINDING){outputs[i].data, 0, outputs[i].size};
        out_bindings[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &buffers[MAX_INPUTS + i]};
    }
    DML_DISPATCH_BINDINGS bindings = {w->input_count, in_bindings, w->output_count, out_bindings, {0, NULL}, {0, NULL}};
    /* Concurrent dispatches of one compiled operator share its plan, never a workspace. */
    DML_BINDING_PROPERTIES properties = {0};
    dmlGetBindingProperties(compiled, &properties);
    test_buffer temporary = {0};
    DML_BUFFER_BINDING temporary_buffer;
    if (properties.TemporaryResourceSize > 0) {
        test_buffer_alloc(&temporary, properties.TemporaryResourceSize);
        temporary_buffer = (DML_BUFFER_BINDING){temporary.data, 0, temporary.size};
        bindings.TemporaryResource = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &temporary_buffer};
    }
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
    if (temporary.block) test_buffer_free(&temporary);
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
    /* Large enough that each dispatch runs on both OpenMP threads
     * (dml_cpu_threads_for, src/cpu/cpu.h): every operator family. */
    const uint32_t in4[4] = {2, 16, 64, 48}, out4[4] = {2, 16, 32, 24};
    const uint32_t in5[5] = {2, 8, 9, 33, 31}, out5[5] = {2, 8, 5, 17, 16};
    const uint32_t grad_out[4] = {2, 16, 64, 48};
    forward_workload(&workloads[0], "MAX_POOLING2 FLOAT32", DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_UINT32,
                     4, in4, out4);
    forward_workload(&workloads[1], "MAX_POOLING2 INT8 5-D", DML_TENSOR_DATA_TYPE_INT8, DML_TENSOR_DATA_TYPE_UINT64, 5,
                     in5, out5);
    grad_workload(&workloads[2], "MAX_POOLING_GRAD FLOAT32", DML_TENSOR_DATA_TYPE_FLOAT32, in4, grad_out);
    grad_workload(&workloads[3], "MAX_POOLING_GRAD FLOAT16", DML_TENSOR_DATA_TYPE_FLOAT16, in4, grad_out);
    roi_pooling_workload(&workloads[4]);
    roi_align_workload(&workloads[5], true);
    roi_align_workload(&workloads[6], false);
    roi_align_grad_workload(&workloads[7]);
    bn_workload(&workloads[8]);
    bn_training_workload(&workloads[9]);
    bn_grad_workload(&workloads[10], false);
    bn_grad_workload(&workloads[11], true);
    for (int w = 0; w < WORKLOADS; w++)
        prepare(&workloads[w], serial);

    DMLOperator* op = NULL;
    EXPECT_STATUS(dmlCreateOperator(shared_device, &workloads[0].desc, &op), S_OK, NULL);
    EXPECT_STATUS(dmlCompileOperator(shared_device, op, DML_EXECUTION_FLAG_NONE, &shared_compiled), S_OK, NULL);
    dmlReleaseOperator(op);

    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, worker, (void*)(intptr_t)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    EXPECT(atomic_load(&failures) == 0, "%d concurrent calls failed", atomic_load(&failures));
    EXPECT(atomic_load(&mismatches) == 0, "%d concurrent results differ from the serial run", atomic_load(&mismatches));

    dmlReleaseCompiledOperator(shared_compiled);
    for (int w = 0; w < WORKLOADS; w++)
        release(&workloads[w]);
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
