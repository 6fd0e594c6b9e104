/* The "no hidden scratch" contract (docs/tensors-and-bindings.md,
 * "Temporary resource"): TemporaryResourceSize stays within the documented
 * multiple of the tensors it serves, for random shapes and thread counts. */
#include <stdio.h>
#include <string.h>

#include "harness.h"

typedef struct tensor {
    UINT sizes[4];
    DML_BUFFER_TENSOR_DESC buffer;
    DML_TENSOR_DESC desc;
} tensor;

static void tensor_make(tensor* t, const UINT sizes[4]) {
    memcpy(t->sizes, sizes, sizeof t->sizes);
    t->buffer = (DML_BUFFER_TENSOR_DESC){DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_FLAG_NONE, 4, t->sizes, NULL, 0, 0};
    t->buffer.TotalTensorSizeInBytes = DMLCalcBufferTensorSize(DML_TENSOR_DATA_TYPE_FLOAT32, 4, t->sizes, NULL);
    t->desc = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, &t->buffer};
}

/* The TemporaryResourceSize of desc compiled on a CPU device of `threads`. */
static uint64_t temporary_size(const DML_OPERATOR_DESC* desc, uint32_t threads) {
    DMLDevice* device = test_device(threads);
    DMLOperator* op = NULL;
    DMLCompiledOperator* compiled = NULL;
    DML_BINDING_PROPERTIES properties;
    memset(&properties, 0, sizeof properties);
    EXPECT_STATUS(dmlCreateOperator(device, desc, &op), S_OK, NULL);
    if (op != NULL) EXPECT_STATUS(dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &compiled), S_OK, NULL);
    if (compiled != NULL) EXPECT_STATUS(dmlGetBindingProperties(compiled, &properties), S_OK, NULL);
    DML_COMPILED_OPERATOR_INFO info; /* the implementation whose bound this checks, listed at the end */
    if (compiled != NULL && SUCCEEDED(dmlGetCompiledOperatorInfo(compiled, &info)))
        test_note_implementation(info.ImplementationName);
    dmlReleaseCompiledOperator(compiled);
    dmlReleaseOperator(op);
    dmlReleaseDevice(device);
    return properties.TemporaryResourceSize;
}

/* MAX_POOLING_GRAD: one FLOAT32 band of an input plane per thread, so at
 * most 4 * T * H * W bytes: 2x2 windows at stride 1, and at stride 2 with
 * 2x2 and 3x3 (padding 1) windows (the AVX-512 band). */
TEST_CASE(max_pooling_grad_bound) {
    for (int round = 0; round < 60 && !test_case_failed(); round++) {
        uint32_t threads = test_rand_range(1, 8);
        UINT in_sizes[4] = {test_rand_range(1, 3), test_rand_range(1, 3), test_rand_range(2, 40),
                            test_rand_range(2, 40)};
        UINT stride = round % 3 ? 2 : 1, extent = round % 3 == 2 ? 3 : 2, padding = extent == 3 ? 1 : 0;
        UINT out_sizes[4] = {in_sizes[0], in_sizes[1], (in_sizes[2] + 2 * padding - extent) / stride + 1,
                             (in_sizes[3] + 2 * padding - extent) / stride + 1};
        tensor input, gradient, output;
        tensor_make(&input, in_sizes);
        tensor_make(&gradient, out_sizes);
        tensor_make(&output, in_sizes);
        UINT strides[2] = {stride, stride}, window[2] = {extent, extent}, pads[2] = {padding, padding},
             dilations[2] = {1, 1};
        DML_MAX_POOLING_GRAD_OPERATOR_DESC grad = {&input.desc, &gradient.desc, &output.desc, 2,        strides,
                                                   window,      pads,           pads,         dilations};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_MAX_POOLING_GRAD, &grad};
        uint64_t size = temporary_size(&desc, threads), bound = 4ull * threads * in_sizes[2] * in_sizes[3];
        EXPECT(size <= bound, "MAX_POOLING_GRAD %ux%ux%ux%u, %u threads: TemporaryResourceSize %llu > %llu (seed %llu)",
               in_sizes[0], in_sizes[1], in_sizes[2], in_sizes[3], threads, (unsigned long long)size,
               (unsigned long long)bound, (unsigned long long)test_seed());
    }
}

/* BATCH_NORMALIZATION_TRAINING: the generic kernel takes 24 bytes per
 * reduction chunk (at most one per element) and 32 per group (at most one per
 * element), 64-aligned; the AVX2 one declines problems whose padded
 * per-group arrays would need more: at most 56 E + 64 bytes, E the input's
 * elements, whichever runs; the worst case is no reduced axis (the mean has
 * the input's sizes). */
TEST_CASE(batch_normalization_training_bound) {
    for (int round = 0; round < 20 && !test_case_failed(); round++) {
        uint32_t threads = test_rand_range(1, 8);
        UINT sizes[4] = {test_rand_range(1, 4), test_rand_range(1, 8), test_rand_range(1, 16), test_rand_range(1, 16)};
        UINT mean_sizes[4];
        for (int i = 0; i < 4; i++)
            mean_sizes[i] = test_rand_bool() ? sizes[i] : 1; /* reduced where 1 */
        tensor input, scale, bias, output, mean, variance;
        tensor_make(&input, sizes);
        tensor_make(&scale, mean_sizes);
        tensor_make(&bias, mean_sizes);
        tensor_make(&output, sizes);
        tensor_make(&mean, mean_sizes);
        tensor_make(&variance, mean_sizes);
        DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC bn = {
            &input.desc, &scale.desc, &bias.desc, NULL, &output.desc, &mean.desc, &variance.desc, 1e-5f, NULL};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, &bn};
        uint64_t elements = (uint64_t)sizes[0] * sizes[1] * sizes[2] * sizes[3];
        uint64_t size = temporary_size(&desc, threads), bound = 56 * elements + 64;
        EXPECT(size <= bound,
               "BATCH_NORMALIZATION_TRAINING %ux%ux%ux%u, mean %ux%ux%ux%u: TemporaryResourceSize %llu > %llu "
               "(seed %llu)",
               sizes[0], sizes[1], sizes[2], sizes[3], mean_sizes[0], mean_sizes[1], mean_sizes[2], mean_sizes[3],
               (unsigned long long)size, (unsigned long long)bound, (unsigned long long)test_seed());
    }
}

/* ROI_POOLING: the AVX2 kernel's per-thread column bins and, NCHW, a bin
 * row's transposed column maxima and a ROI's results in 8 channels, and for
 * an output of 8 MiB or more their staging copy: at most
 * T x (8 PW + 63 + 32 (W + 7) + 32 (PH PW + 7) [+ 32 (PH PW + 1) + 63]) bytes;
 * the generic one none. Every other round has an output of 8 MiB or more. */
TEST_CASE(roi_pooling_bound) {
    for (int round = 0; round < 20 && !test_case_failed(); round++) {
        uint32_t threads = test_rand_range(1, 8);
        bool large = round % 2 == 1;
        UINT in_sizes[4] = {test_rand_range(1, 3), test_rand_range(large ? 8 : 1, 20), test_rand_range(1, 40),
                            test_rand_range(1, 40)};
        UINT pooled[2] = {test_rand_range(large ? 4 : 1, 9), test_rand_range(large ? 4 : 1, 9)}; /* height, width */
        UINT roi_sizes[4] = {1, 1, large ? 16384 : test_rand_range(1, 9), 5}; /* large: >= 8 MiB of output */
        UINT out_sizes[4] = {roi_sizes[2], in_sizes[1], pooled[0], pooled[1]};
        tensor input, rois, output;
        tensor_make(&input, in_sizes);
        tensor_make(&rois, roi_sizes);
        tensor_make(&output, out_sizes);
        DML_ROI_POOLING_OPERATOR_DESC pool = {&input.desc, &rois.desc, &output.desc, 0.5f, {pooled[1], pooled[0]}};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_ROI_POOLING, &pool};
        uint64_t bins = (uint64_t)pooled[0] * pooled[1];
        uint64_t output_bytes = 4ull * roi_sizes[2] * in_sizes[1] * bins;
        uint64_t staging = output_bytes >= (8u << 20) ? 32 * (bins + 1) + 63 : 0;
        uint64_t size = temporary_size(&desc, threads),
                 bound = threads * (8ull * pooled[1] + 63 + 32ull * (in_sizes[3] + 7) + 32 * (bins + 7) + staging);
        EXPECT(size <= bound,
               "ROI_POOLING %ux%ux%ux%u, pooled %ux%u, %u threads: TemporaryResourceSize %llu > %llu "
               "(seed %llu)",
               in_sizes[0], in_sizes[1], in_sizes[2], in_sizes[3], pooled[0], pooled[1], threads,
               (unsigned long long)size, (unsigned long long)bound, (unsigned long long)test_seed());
    }
}

/* ROI_ALIGN1: the fast paths' ROIs by image (8 R) and, per thread, the
 * sample tables of one ROI (64 bytes per sample index along X and Y), a
 * ROI's results in 8 channels (32 OH OW), for an output of 8 MiB or more
 * their staging copy (32 (OH OW + 1)), and an 8-channel image tile
 * (32 H W), each 64-aligned; the generic kernel none. Every other round has
 * an output of 8 MiB or more. */
TEST_CASE(roi_align_bound) {
    for (int round = 0; round < 20 && !test_case_failed(); round++) {
        uint32_t threads = test_rand_range(1, 8);
        bool large = round % 2 == 1;
        UINT in_sizes[4] = {test_rand_range(1, 3), test_rand_range(large ? 8 : 1, 20), test_rand_range(1, 40),
                            test_rand_range(1, 40)};
        UINT roi_count = large ? 16384 : test_rand_range(1, 9), samples = test_rand_range(1, 4);
        UINT roi_sizes[4] = {1, 1, roi_count, 4};
        UINT out_sizes[4] = {roi_count, in_sizes[1], test_rand_range(large ? 4 : 1, 9),
                             test_rand_range(large ? 4 : 1, 9)}; /* large: >= 8 MiB */
        tensor input, rois, output;
        tensor_make(&input, in_sizes);
        tensor_make(&rois, roi_sizes);
        tensor_make(&output, out_sizes);
        UINT index_sizes[1] = {roi_count};
        DML_BUFFER_TENSOR_DESC index_buffer = {
            DML_TENSOR_DATA_TYPE_UINT32,
            DML_TENSOR_FLAG_NONE,
            1,
            index_sizes,
            NULL,
            DMLCalcBufferTensorSize(DML_TENSOR_DATA_TYPE_UINT32, 1, index_sizes, NULL),
            0};
        DML_TENSOR_DESC indices = {DML_TENSOR_TYPE_BUFFER, &index_buffer};
        DML_ROI_ALIGN1_OPERATOR_DESC align = {&input.desc,
                                              &rois.desc,
                                              &indices,
                                              &output.desc,
                                              DML_REDUCE_FUNCTION_AVERAGE,
                                              DML_INTERPOLATION_MODE_LINEAR,
                                              0.5f,
                                              0.5f,
                                              0.0f,
                                              -0.5f,
                                              0.0f,
                                              samples,
                                              samples,
                                              0};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_ROI_ALIGN1, &align};
        uint64_t sample_indices = (uint64_t)(out_sizes[2] + out_sizes[3]) * samples;
        uint64_t bins = (uint64_t)out_sizes[2] * out_sizes[3];
        uint64_t staging = 4ull * roi_count * in_sizes[1] * bins >= (8u << 20) ? 32 * (bins + 1) + 63 : 0;
        uint64_t per_thread =
            64 * sample_indices + 63 + 32 * bins + 63 + staging + 32ull * in_sizes[2] * in_sizes[3] + 63;
        uint64_t size = temporary_size(&desc, threads), bound = 8ull * roi_count + 63 + threads * per_thread;
        EXPECT(size <= bound,
               "ROI_ALIGN1 %ux%ux%ux%u, %u ROIs, output %ux%u, %u threads: TemporaryResourceSize %llu "
               "> %llu (seed %llu)",
               in_sizes[0], in_sizes[1], in_sizes[2], in_sizes[3], roi_count, out_sizes[2], out_sizes[3], threads,
               (unsigned long long)size, (unsigned long long)bound, (unsigned long long)test_seed());
    }
}
