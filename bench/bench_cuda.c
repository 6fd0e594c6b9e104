/* Every operator on the CUDA backend, on the workloads of BENCHMARKS.md,
 * against PyTorch/cuDNN/torchvision (bench/peer_torch.py) run on the same GPU
 * just before: FLOAT32 and FLOAT16, NCHW and channels-last.
 *
 *   bench_cuda [--peer FILE] [--only SUBSTRING] [--first-case]
 *
 * --first-case: only FLOAT32 NCHW, three dispatches, no timing (for ncu).
 *
 * Per row: the implementation that ran; the CUDA-event median per dispatch
 * over batches of back-to-back dispatches ("batch") and over lone dispatches
 * between two events ("single"); the host time per dispatch (dmlDispatch's
 * own cost, measured around the batch's calls); GB/s of the minimal bytes and
 * the fraction of the floor (minimal bytes / device-to-device copy bandwidth
 * measured at the start of this run); the best peer time for the same
 * workload and data type (any layout) and the ratio peer / libdml (> 1:
 * libdml is faster). Inputs: standard normal values (a pool of random values
 * uploaded at rotating offsets), ROIs as BENCHMARKS.md draws them. */
#include <cuda_runtime_api.h>
#include <dml/dml.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define CHECK_DML(call)                                                                                                \
    do {                                                                                                               \
        HRESULT status_ = (call);                                                                                      \
        if (FAILED(status_)) {                                                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, dmlGetLastErrorMessage());                   \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

#define CHECK_CUDA(call)                                                                                               \
    do {                                                                                                               \
        cudaError_t error_ = (call);                                                                                   \
        if (error_ != cudaSuccess) {                                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(error_));                 \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

enum { BATCH = 20, BATCH_REPEATS = 15, SINGLE_REPEATS = 30 };

/* ---- Random data ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double rng_uniform(void) { return (double)(rng_next() >> 11) * 0x1.0p-53; }

static double rng_normal(void) {
    double u = rng_uniform(), v = rng_uniform();
    return sqrt(-2.0 * log(u > 0 ? u : 0x1.0p-53)) * cos(6.283185307179586 * v);
}

static uint16_t float_to_half(float value) {
    /* Round to nearest even; the pool holds normal numbers well inside binary16's range. */
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint32_t sign = (bits >> 16) & 0x8000u;
    int32_t exponent = (int32_t)((bits >> 23) & 0xFF) - 127 + 15;
    uint32_t mantissa = bits & 0x7FFFFFu;
    if (exponent <= 0) return (uint16_t)sign; /* tiny: to zero (timing data only) */
    uint32_t half = sign | ((uint32_t)exponent << 10) | (mantissa >> 13);
    uint32_t rest = mantissa & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half++;
    return (uint16_t)half;
}

/* A pool of standard normal values in both types; tensors are filled from it
 * at rotating offsets (its length is no multiple of any plane size here). */
enum { POOL = (1 << 24) - 3 };
static float* pool_f32;
static uint16_t* pool_f16;
static uint64_t pool_offset;

static void pool_make(void) {
    pool_f32 = malloc(2 * (size_t)POOL * sizeof *pool_f32);
    pool_f16 = malloc(2 * (size_t)POOL * sizeof *pool_f16);
    for (size_t i = 0; i < POOL; i++) {
        pool_f32[i] = pool_f32[i + POOL] = (float)rng_normal();
        pool_f16[i] = pool_f16[i + POOL] = float_to_half(pool_f32[i]);
    }
}

static bool is_half(DML_TENSOR_DATA_TYPE type) { return type == DML_TENSOR_DATA_TYPE_FLOAT16; }

/* Fills `count` elements at `device_buffer` with pool values. */
static void fill_random(DMLDevice* device, void* device_buffer, uint64_t count, DML_TENSOR_DATA_TYPE type) {
    size_t element = is_half(type) ? 2 : 4;
    for (uint64_t done = 0; done < count;) {
        uint64_t chunk = count - done < POOL ? count - done : POOL;
        const char* source =
            is_half(type) ? (const char*)(pool_f16 + pool_offset) : (const char*)(pool_f32 + pool_offset);
        CHECK_DML(dmlUpload(device, (char*)device_buffer + done * element, source, chunk * element));
        done += chunk;
        pool_offset = (pool_offset + 7919 * 31) % POOL;
    }
}

/* Fills `count` elements with one value (small per-channel tensors). */
static void fill_constant(DMLDevice* device, void* device_buffer, uint64_t count, DML_TENSOR_DATA_TYPE type,
                          float value) {
    size_t element = is_half(type) ? 2 : 4;
    char* host = malloc(count * element);
    for (uint64_t i = 0; i < count; i++) {
        if (is_half(type)) {
            uint16_t h = float_to_half(value);
            memcpy(host + i * 2, &h, 2);
        } else {
            memcpy(host + i * 4, &value, 4);
        }
    }
    CHECK_DML(dmlUpload(device, device_buffer, host, count * element));
    free(host);
}

/* ---- Tensors and bindings ---- */

typedef enum layout { LAYOUT_NCHW, LAYOUT_NHWC } layout;
static const char* layout_name(layout l) { return l == LAYOUT_NCHW ? "nchw" : "nhwc"; }

/* A tensor of one benchmark: its description (4-D {N, C, H, W}, packed in
 * the layout) and its device buffer. */
typedef struct gpu_tensor {
    UINT sizes[4], strides[4];
    DML_BUFFER_TENSOR_DESC buffer_desc;
    DML_TENSOR_DESC desc;
    void* data;
    uint64_t elements;
} gpu_tensor;

static void tensor_make(gpu_tensor* t, DMLDevice* device, DML_TENSOR_DATA_TYPE type, layout l, UINT n, UINT c, UINT h,
                        UINT w) {
    UINT sizes[4] = {n, c, h, w};
    memcpy(t->sizes, sizes, sizeof sizes);
    if (l == LAYOUT_NHWC) {
        UINT strides[4] = {h * w * c, 1, w * c, c};
        memcpy(t->strides, strides, sizeof strides);
    } else {
        UINT strides[4] = {c * h * w, h * w, w, 1};
        memcpy(t->strides, strides, sizeof strides);
    }
    t->elements = (uint64_t)n * c * h * w;
    t->buffer_desc = (DML_BUFFER_TENSOR_DESC){
        type, DML_TENSOR_FLAG_NONE, 4, t->sizes, t->strides, DMLCalcBufferTensorSize(type, 4, t->sizes, t->strides), 0};
    t->desc = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, &t->buffer_desc};
    CHECK_DML(dmlAllocateBuffer(device, t->buffer_desc.TotalTensorSizeInBytes, &t->data));
}

static void tensor_free(gpu_tensor* t, DMLDevice* device) {
    if (t->data) dmlFreeBuffer(device, t->data);
    t->data = NULL;
}

static uint64_t tensor_bytes(const gpu_tensor* t) {
    return t->elements * (t->buffer_desc.DataType == DML_TENSOR_DATA_TYPE_FLOAT16 ? 2 : 4);
}

/* ---- Workloads (BENCHMARKS.md) ---- */

typedef enum family {
    MAXPOOL_FWD,
    MAXPOOL_GRAD,
    BN_INFER,
    BN_TRAIN,
    BN_TRAIN_RELU,
    BN_GRAD,
    BN_TRAIN_GRAD,
    ROI_POOL,
    ROI_ALIGN_FWD,
    ROI_ALIGN_GRAD
} family;

typedef struct workload {
    const char* name; /* as peer_torch.py prints it */
    family kind;
    UINT n, c, h, w;
    UINT window, stride, padding; /* max pooling */
    UINT rois;                    /* ROI operators */
    float spatial_scale;
} workload;

static const workload workloads[] = {
    {"maxpool_fwd_idx_32x256x56x56_3x3s2p1", MAXPOOL_FWD, 32, 256, 56, 56, 3, 2, 1, 0, 0},
    {"maxpool_grad_32x256x56x56_3x3s2p1", MAXPOOL_GRAD, 32, 256, 56, 56, 3, 2, 1, 0, 0},
    {"maxpool_fwd_idx_64x128x112x112_2x2s2", MAXPOOL_FWD, 64, 128, 112, 112, 2, 2, 0, 0, 0},
    {"maxpool_grad_64x128x112x112_2x2s2", MAXPOOL_GRAD, 64, 128, 112, 112, 2, 2, 0, 0, 0},
    {"bn_infer_fwd_32x256x56x56", BN_INFER, 32, 256, 56, 56, 0, 0, 0, 0, 0},
    {"bn_train_fwd_32x256x56x56", BN_TRAIN, 32, 256, 56, 56, 0, 0, 0, 0, 0},
    {"bn_train_fwd_relu_32x256x56x56", BN_TRAIN_RELU, 32, 256, 56, 56, 0, 0, 0, 0, 0},
    {"bn_grad_32x256x56x56", BN_GRAD, 32, 256, 56, 56, 0, 0, 0, 0, 0},
    {"bn_train_grad_32x256x56x56", BN_TRAIN_GRAD, 32, 256, 56, 56, 0, 0, 0, 0, 0},
    {"roi_pool_2x256x64x64_512x7x7", ROI_POOL, 2, 256, 64, 64, 0, 0, 0, 512, 1.0f / 16},
    {"roi_align_fwd_2x256x128x128_512x7x7", ROI_ALIGN_FWD, 2, 256, 128, 128, 0, 0, 0, 512, 1.0f / 8},
    {"roi_align_grad_2x256x128x128_512x7x7", ROI_ALIGN_GRAD, 2, 256, 128, 128, 0, 0, 0, 512, 1.0f / 8},
};

/* One compiled benchmark: the operator and everything bound to it. */
typedef struct bench_case {
    gpu_tensor tensors[8];
    unsigned tensor_count;
    DMLCompiledOperator* compiled;
    DML_BUFFER_BINDING input_buffers[6], output_buffers[6], temporary_buffer;
    DML_BINDING_DESC inputs[6], outputs[6];
    DML_DISPATCH_BINDINGS bindings;
    void* temporary;
    uint64_t bytes; /* minimal bytes moved; 0: no floor (ROI operators) */
    const char* implementation;
} bench_case;

static gpu_tensor* add_tensor(bench_case* b, DMLDevice* device, DML_TENSOR_DATA_TYPE type, layout l, UINT n, UINT c,
                              UINT h, UINT w) {
    gpu_tensor* t = &b->tensors[b->tensor_count++];
    tensor_make(t, device, type, l, n, c, h, w);
    return t;
}

static void bind(DML_BUFFER_BINDING* buffer, DML_BINDING_DESC* binding, const gpu_tensor* t) {
    if (t == NULL) {
        *binding = (DML_BINDING_DESC){DML_BINDING_TYPE_NONE, NULL};
        return;
    }
    *buffer = (DML_BUFFER_BINDING){t->data, 0, t->buffer_desc.TotalTensorSizeInBytes};
    *binding = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, buffer};
}

static void bind_all(bench_case* b, const gpu_tensor* const* inputs, unsigned input_count,
                     const gpu_tensor* const* outputs, unsigned output_count) {
    for (unsigned i = 0; i < input_count; i++)
        bind(&b->input_buffers[i], &b->inputs[i], inputs[i]);
    for (unsigned i = 0; i < output_count; i++)
        bind(&b->output_buffers[i], &b->outputs[i], outputs[i]);
    b->bindings = (DML_DISPATCH_BINDINGS){input_count, b->inputs, output_count, b->outputs, {0}, {0}};
}

static void compile(bench_case* b, DMLDevice* device, const DML_OPERATOR_DESC* desc) {
    DMLOperator* op;
    CHECK_DML(dmlCreateOperator(device, desc, &op));
    CHECK_DML(dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &b->compiled));
    dmlReleaseOperator(op);
    CHECK_DML(dmlInitializeOperator(b->compiled, 0, NULL, NULL));
    DML_COMPILED_OPERATOR_INFO info;
    CHECK_DML(dmlGetCompiledOperatorInfo(b->compiled, &info));
    b->implementation = info.ImplementationName;
    if (info.TemporaryResourceSize > 0) {
        CHECK_DML(dmlAllocateBuffer(device, info.TemporaryResourceSize, &b->temporary));
        b->temporary_buffer = (DML_BUFFER_BINDING){b->temporary, 0, info.TemporaryResourceSize};
        b->bindings.TemporaryResource = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &b->temporary_buffer};
    }
}

static uint32_t pooled_size(UINT in, const workload* w) { return (in + 2 * w->padding - w->window) / w->stride + 1; }

static void setup_max_pooling(bench_case* b, DMLDevice* device, const workload* w, DML_TENSOR_DATA_TYPE type,
                              layout l) {
    UINT oh = pooled_size(w->h, w), ow = pooled_size(w->w, w);
    UINT strides[2] = {w->stride, w->stride}, window[2] = {w->window, w->window};
    UINT padding[2] = {w->padding, w->padding}, dilations[2] = {1, 1};
    gpu_tensor* input = add_tensor(b, device, type, l, w->n, w->c, w->h, w->w);
    fill_random(device, input->data, input->elements, type);
    if (w->kind == MAXPOOL_FWD) {
        gpu_tensor* output = add_tensor(b, device, type, l, w->n, w->c, oh, ow);
        gpu_tensor* indices = add_tensor(b, device, DML_TENSOR_DATA_TYPE_UINT32, l, w->n, w->c, oh, ow);
        DML_MAX_POOLING2_OPERATOR_DESC pool = {&input->desc, &output->desc, &indices->desc, 2,        strides,
                                               window,       padding,       padding,        dilations};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_MAX_POOLING2, &pool};
        const gpu_tensor* ins[] = {input};
        const gpu_tensor* outs[] = {output, indices};
        bind_all(b, ins, 1, outs, 2);
        compile(b, device, &desc);
        b->bytes = tensor_bytes(input) + tensor_bytes(output) + indices->elements * 4;
    } else {
        gpu_tensor* dy = add_tensor(b, device, type, l, w->n, w->c, oh, ow);
        gpu_tensor* dx = add_tensor(b, device, type, l, w->n, w->c, w->h, w->w);
        fill_random(device, dy->data, dy->elements, type);
        DML_MAX_POOLING_GRAD_OPERATOR_DESC grad = {&input->desc, &dy->desc, &dx->desc, 2,        strides,
                                                   window,       padding,   padding,   dilations};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_MAX_POOLING_GRAD, &grad};
        const gpu_tensor* ins[] = {input, dy};
        const gpu_tensor* outs[] = {dx};
        bind_all(b, ins, 2, outs, 1);
        compile(b, device, &desc);
        b->bytes = tensor_bytes(input) + tensor_bytes(dy) + tensor_bytes(dx);
    }
}

static void setup_batch_normalization(bench_case* b, DMLDevice* device, const workload* w, DML_TENSOR_DATA_TYPE type,
                                      layout l) {
    gpu_tensor* input = add_tensor(b, device, type, l, w->n, w->c, w->h, w->w);
    fill_random(device, input->data, input->elements, type);
    gpu_tensor* scale = add_tensor(b, device, type, LAYOUT_NCHW, 1, w->c, 1, 1);
    fill_random(device, scale->data, scale->elements, type);
    if (w->kind == BN_INFER) {
        gpu_tensor* mean = add_tensor(b, device, type, LAYOUT_NCHW, 1, w->c, 1, 1);
        gpu_tensor* variance = add_tensor(b, device, type, LAYOUT_NCHW, 1, w->c, 1, 1);
        gpu_tensor* bias = add_tensor(b, device, type, LAYOUT_NCHW, 1, w->c, 1, 1);
        fill_random(device, mean->data, mean->elements, type);
        fill_constant(device, variance->data, variance->elements, type, 1.0f);
        fill_random(device, bias->data, bias->elements, type);
        gpu_tensor* output = add_tensor(b, device, type, l, w->n, w->c, w->h, w->w);
        DML_BATCH_NORMALIZATION_OPERATOR_DESC bn = {
            &input->desc, &mean->desc, &variance->desc, &scale->desc, &bias->desc, &output->desc, 1, 1e-5f, NULL};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_BATCH_NORMALIZATION, &bn};
        const gpu_tensor* ins[] = {input, mean, variance, scale, bias};
        const gpu_tensor* outs[] = {output};
        bind_all(b, ins, 5, outs, 1);
        compile(b, device, &desc);
        b->bytes = tensor_bytes(input) + tensor_bytes(output);
    } else if (w->kind != BN_GRAD && w->kind != BN_TRAIN_GRAD) {
        gpu_tensor* bias = add_tensor(b, device, type, LAYOUT_NCHW, 1, w->c, 1, 1);
        fill_random(device, bias->data, bias->elements, type);
        gpu_tensor* output = add_tensor(b, device, type, l, w->n, w->c, w->h, w->w);
        gpu_tensor* mean = add_tensor(b, device, type, LAYOUT_NCHW, 1, w->c, 1, 1);
        gpu_tensor* variance = add_tensor(b, device, type, LAYOUT_NCHW, 1, w->c, 1, 1);
        DML_ACTIVATION_RELU_OPERATOR_DESC relu = {NULL, NULL};
        DML_OPERATOR_DESC relu_desc = {DML_OPERATOR_ACTIVATION_RELU, &relu};
        DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC bn = {&input->desc,
                                                             &scale->desc,
                                                             &bias->desc,
                                                             NULL,
                                                             &output->desc,
                                                             &mean->desc,
                                                             &variance->desc,
                                                             1e-5f,
                                                             w->kind == BN_TRAIN_RELU ? &relu_desc : NULL};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, &bn};
        const gpu_tensor* ins[] = {input, scale, bias, NULL};
        const gpu_tensor* outs[] = {output, mean, variance};
        bind_all(b, ins, 4, outs, 3);
        compile(b, device, &desc);
        /* Statistics need one read of the input, the normalization another
         * (it does not fit the L2), and one write. */
        b->bytes = 2 * tensor_bytes(input) + tensor_bytes(output);
    } else {
        gpu_tensor* dy = add_tensor(b, device, type, l, w->n, w->c, w->h, w->w);
        fill_random(device, dy->data, dy->elements, type);
        gpu_tensor* mean = add_tensor(b, device, type, LAYOUT_NCHW, 1, w->c, 1, 1);
        gpu_tensor* variance = add_tensor(b, device, type, LAYOUT_NCHW, 1, w->c, 1, 1);
        fill_constant(device, mean->data, mean->elements, type, 0.0f);
        fill_constant(device, variance->data, variance->elements, type, 1.0f);
        gpu_tensor* dx = add_tensor(b, device, type, l, w->n, w->c, w->h, w->w);
        gpu_tensor* dscale = add_tensor(b, device, type, LAYOUT_NCHW, 1, w->c, 1, 1);
        gpu_tensor* dbias = add_tensor(b, device, type, LAYOUT_NCHW, 1, w->c, 1, 1);
        /* The same fields; GRAD's input gradient reads no x. */
        DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC grad = {&input->desc,    &dy->desc,    &mean->desc,
                                                                    &variance->desc, &scale->desc, &dx->desc,
                                                                    &dscale->desc,   &dbias->desc, 1e-5f};
        DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC constant = {grad.InputTensor,
                                                               grad.InputGradientTensor,
                                                               grad.MeanTensor,
                                                               grad.VarianceTensor,
                                                               grad.ScaleTensor,
                                                               grad.OutputGradientTensor,
                                                               grad.OutputScaleGradientTensor,
                                                               grad.OutputBiasGradientTensor,
                                                               grad.Epsilon};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, &grad};
        if (w->kind == BN_GRAD) desc = (DML_OPERATOR_DESC){DML_OPERATOR_BATCH_NORMALIZATION_GRAD, &constant};
        const gpu_tensor* ins[] = {input, dy, mean, variance, scale};
        const gpu_tensor* outs[] = {dx, dscale, dbias};
        bind_all(b, ins, 5, outs, 3);
        compile(b, device, &desc);
        /* The reductions read x and dy, the gradient reads dy (and x for
         * TRAINING_GRAD) again and writes dx. */
        b->bytes = (w->kind == BN_GRAD ? 3 * tensor_bytes(dy) : 2 * (tensor_bytes(input) + tensor_bytes(dy))) +
                   tensor_bytes(dx);
    }
}

/* ROIs as BENCHMARKS.md draws them, in image coordinates; with_batch: rows
 * of 5 ([batch, x1, y1, x2, y2], ROI_POOLING), else of 4 plus batch indices. */
static void upload_rois(DMLDevice* device, const workload* w, DML_TENSOR_DATA_TYPE type, bool with_batch,
                        void* device_rois, void* device_batch) {
    unsigned columns = with_batch ? 5 : 4;
    float* rows = malloc((size_t)w->rois * columns * sizeof *rows);
    uint32_t* batches = malloc((size_t)w->rois * sizeof *batches);
    float image_w = (float)w->w / w->spatial_scale, image_h = (float)w->h / w->spatial_scale;
    for (UINT r = 0; r < w->rois; r++) {
        uint32_t batch = (uint32_t)(rng_uniform() * w->n) % w->n;
        float x1 = (float)rng_uniform() * image_w * 0.8f, y1 = (float)rng_uniform() * image_h * 0.8f;
        float width = (float)rng_uniform() * image_w * 0.5f + 4, height = (float)rng_uniform() * image_h * 0.5f + 4;
        float x2 = fminf(x1 + width, image_w - 1), y2 = fminf(y1 + height, image_h - 1);
        float* row = rows + (size_t)r * columns;
        float values[5] = {(float)batch, x1, y1, x2, y2};
        memcpy(row, with_batch ? values : values + 1, columns * sizeof *row);
        batches[r] = batch;
    }
    size_t count = (size_t)w->rois * columns;
    if (is_half(type)) {
        uint16_t* halves = malloc(count * sizeof *halves);
        for (size_t i = 0; i < count; i++)
            halves[i] = float_to_half(rows[i]);
        CHECK_DML(dmlUpload(device, device_rois, halves, count * 2));
        free(halves);
    } else {
        CHECK_DML(dmlUpload(device, device_rois, rows, count * 4));
    }
    if (device_batch) CHECK_DML(dmlUpload(device, device_batch, batches, (size_t)w->rois * 4));
    free(rows);
    free(batches);
}

static void setup_roi(bench_case* b, DMLDevice* device, const workload* w, DML_TENSOR_DATA_TYPE type, layout l) {
    gpu_tensor* input = add_tensor(b, device, type, l, w->n, w->c, w->h, w->w);
    fill_random(device, input->data, input->elements, type);
    bool pooling = w->kind == ROI_POOL;
    gpu_tensor* rois = add_tensor(b, device, type, LAYOUT_NCHW, 1, 1, w->rois, pooling ? 5 : 4);
    gpu_tensor* batch =
        pooling ? NULL : add_tensor(b, device, DML_TENSOR_DATA_TYPE_UINT32, LAYOUT_NCHW, 1, 1, 1, w->rois);
    upload_rois(device, w, type, pooling, rois->data, batch ? batch->data : NULL);
    gpu_tensor* pooled = add_tensor(b, device, type, l, w->rois, w->c, 7, 7);
    if (pooling) {
        DML_ROI_POOLING_OPERATOR_DESC roi = {&input->desc, &rois->desc, &pooled->desc, w->spatial_scale, {7, 7}};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_ROI_POOLING, &roi};
        const gpu_tensor* ins[] = {input, rois};
        const gpu_tensor* outs[] = {pooled};
        bind_all(b, ins, 2, outs, 1);
        compile(b, device, &desc);
    } else if (w->kind == ROI_ALIGN_FWD) {
        DML_ROI_ALIGN1_OPERATOR_DESC align = {&input->desc,
                                              &rois->desc,
                                              &batch->desc,
                                              &pooled->desc,
                                              DML_REDUCE_FUNCTION_AVERAGE,
                                              DML_INTERPOLATION_MODE_LINEAR,
                                              w->spatial_scale,
                                              w->spatial_scale,
                                              0.0f,
                                              -0.5f,
                                              0.0f,
                                              2,
                                              2,
                                              0};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_ROI_ALIGN1, &align};
        const gpu_tensor* ins[] = {input, rois, batch};
        const gpu_tensor* outs[] = {pooled};
        bind_all(b, ins, 3, outs, 1);
        compile(b, device, &desc);
    } else {
        fill_random(device, pooled->data, pooled->elements, type); /* the incoming gradient */
        DML_ROI_ALIGN_GRAD_OPERATOR_DESC grad = {NULL,
                                                 &pooled->desc,
                                                 &rois->desc,
                                                 &batch->desc,
                                                 &input->desc,
                                                 NULL,
                                                 DML_REDUCE_FUNCTION_AVERAGE,
                                                 DML_INTERPOLATION_MODE_LINEAR,
                                                 w->spatial_scale,
                                                 w->spatial_scale,
                                                 0.0f,
                                                 -0.5f,
                                                 2,
                                                 2,
                                                 0};
        DML_OPERATOR_DESC desc = {DML_OPERATOR_ROI_ALIGN_GRAD, &grad};
        const gpu_tensor* ins[] = {NULL, pooled, rois, batch};
        const gpu_tensor* outs[] = {input, NULL};
        bind_all(b, ins, 4, outs, 2);
        compile(b, device, &desc);
    }
    b->bytes = 0; /* reads depend on the ROIs: no floor (as the table) */
}

static void case_free(bench_case* b, DMLDevice* device) {
    CHECK_DML(dmlSynchronize(device));
    for (unsigned i = 0; i < b->tensor_count; i++)
        tensor_free(&b->tensors[i], device);
    if (b->temporary) dmlFreeBuffer(device, b->temporary);
    dmlReleaseCompiledOperator(b->compiled);
}

/* ---- Timing ---- */

static int compare_doubles(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static double median(double* values, int count) {
    qsort(values, (size_t)count, sizeof *values, compare_doubles);
    return values[count / 2];
}

typedef struct timing {
    double batch_ms, single_ms, host_us;
} timing;

static timing time_case(bench_case* b, DMLDevice* device, cudaStream_t stream) {
    cudaEvent_t start, stop;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
    for (int i = 0; i < 3; i++)
        CHECK_DML(dmlDispatch(b->compiled, &b->bindings));
    CHECK_DML(dmlSynchronize(device));
    double batch[BATCH_REPEATS], host[BATCH_REPEATS], single[SINGLE_REPEATS];
    for (int r = 0; r < BATCH_REPEATS; r++) {
        CHECK_CUDA(cudaEventRecord(start, stream));
        double t0 = bench_now_seconds();
        for (int i = 0; i < BATCH; i++)
            CHECK_DML(dmlDispatch(b->compiled, &b->bindings));
        host[r] = (bench_now_seconds() - t0) / BATCH * 1e6;
        CHECK_CUDA(cudaEventRecord(stop, stream));
        CHECK_CUDA(cudaEventSynchronize(stop));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
        batch[r] = ms / BATCH;
    }
    for (int r = 0; r < SINGLE_REPEATS; r++) {
        CHECK_CUDA(cudaEventRecord(start, stream));
        CHECK_DML(dmlDispatch(b->compiled, &b->bindings));
        CHECK_CUDA(cudaEventRecord(stop, stream));
        CHECK_CUDA(cudaEventSynchronize(stop));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
        single[r] = ms;
    }
    CHECK_CUDA(cudaEventDestroy(start));
    CHECK_CUDA(cudaEventDestroy(stop));
    return (timing){median(batch, BATCH_REPEATS), median(single, SINGLE_REPEATS), median(host, BATCH_REPEATS)};
}

/* Device-to-device copy bandwidth, bytes read + written per second: the
 * median of 20 copies of 1 GiB. */
static double copy_bandwidth(cudaStream_t stream) {
    size_t bytes = (size_t)1 << 30;
    void *src, *dst;
    CHECK_CUDA(cudaMalloc(&src, bytes));
    CHECK_CUDA(cudaMalloc(&dst, bytes));
    CHECK_CUDA(cudaMemsetAsync(src, 1, bytes, stream));
    cudaEvent_t start, stop;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
    double times[20];
    for (int i = -2; i < 20; i++) {
        CHECK_CUDA(cudaEventRecord(start, stream));
        CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
        CHECK_CUDA(cudaEventRecord(stop, stream));
        CHECK_CUDA(cudaEventSynchronize(stop));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
        if (i >= 0) times[i] = ms * 1e-3;
    }
    CHECK_CUDA(cudaEventDestroy(start));
    CHECK_CUDA(cudaEventDestroy(stop));
    CHECK_CUDA(cudaFree(src));
    CHECK_CUDA(cudaFree(dst));
    return 2.0 * (double)bytes / median(times, 20);
}

/* ---- The peer's times (peer_torch.py: "workload dtype variant ms" per line) ---- */

typedef struct peer_time {
    char workload[64], dtype[8], variant[48];
    double ms;
} peer_time;

static peer_time peers[512];
static int peer_count;

static void read_peers(const char* path) {
    FILE* file = fopen(path, "r");
    if (file == NULL) {
        fprintf(stderr, "bench_cuda: cannot read the peer's times from %s\n", path);
        return;
    }
    char line[256];
    while (peer_count < (int)(sizeof peers / sizeof peers[0]) && fgets(line, sizeof line, file)) {
        peer_time* p = &peers[peer_count];
        if (sscanf(line, "%63s %7s %47s %lf", p->workload, p->dtype, p->variant, &p->ms) == 4) peer_count++;
    }
    fclose(file);
}

/* The fastest peer variant of the workload in the data type, or NULL. */
static const peer_time* best_peer(const char* name, const char* dtype) {
    const peer_time* best = NULL;
    for (int i = 0; i < peer_count; i++)
        if (!strcmp(peers[i].workload, name) && !strcmp(peers[i].dtype, dtype) &&
            (best == NULL || peers[i].ms < best->ms))
            best = &peers[i];
    return best;
}

int main(int argc, char** argv) {
    const char* only = NULL;
    bool first_case = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--peer") && i + 1 < argc)
            read_peers(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--first-case"))
            first_case = true;
        else {
            fprintf(stderr, "usage: %s [--peer FILE] [--only SUBSTRING] [--first-case]\n", argv[0]);
            return 2;
        }
    }
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
        printf("bench_cuda: no CUDA GPU, nothing measured\n");
        return 0;
    }
    struct cudaDeviceProp properties;
    CHECK_CUDA(cudaGetDeviceProperties(&properties, 0));
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    DML_DEVICE_DESC device_desc = {.Backend = DML_BACKEND_CUDA, .CudaStream = stream};
    DMLDevice* device;
    CHECK_DML(dmlCreateDevice(&device_desc, &device));
    double bandwidth = copy_bandwidth(stream);
    pool_make();
    printf("GPU %s, device-to-device copy %.0f GB/s (read + write); %d dispatches a batch, medians of %d batches and "
           "%d single dispatches\n",
           properties.name, bandwidth * 1e-9, BATCH, BATCH_REPEATS, SINGLE_REPEATS);
    printf("%-38s %-4s %-4s %-40s %9s %9s %7s %8s %6s %9s %-24s %6s\n", "workload", "type", "lay", "implementation",
           "batch ms", "single ms", "host us", "GB/s", "floor", "peer ms", "peer", "ratio");

    static const DML_TENSOR_DATA_TYPE types[] = {DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_FLOAT16};
    for (size_t k = 0; k < sizeof workloads / sizeof workloads[0]; k++) {
        const workload* w = &workloads[k];
        if (only && !strstr(w->name, only)) continue;
        for (int t = 0; t < (first_case ? 1 : 2); t++) {
            for (int l = 0; l < (first_case ? 1 : 2); l++) {
                bench_case b;
                memset(&b, 0, sizeof b);
                if (w->kind == MAXPOOL_FWD || w->kind == MAXPOOL_GRAD)
                    setup_max_pooling(&b, device, w, types[t], (layout)l);
                else if (w->kind >= BN_INFER && w->kind <= BN_TRAIN_GRAD)
                    setup_batch_normalization(&b, device, w, types[t], (layout)l);
                else
                    setup_roi(&b, device, w, types[t], (layout)l);
                if (first_case) {
                    for (int i = 0; i < 3; i++)
                        CHECK_DML(dmlDispatch(b.compiled, &b.bindings));
                    printf("%s: %s, 3 dispatches\n", w->name, b.implementation);
                    case_free(&b, device);
                    continue;
                }
                timing m = time_case(&b, device, stream);
                const char* dtype = t ? "f16" : "f32";
                printf("%-38s %-4s %-4s %-40s %9.4f %9.4f %7.2f", w->name, dtype, layout_name((layout)l),
                       b.implementation, m.batch_ms, m.single_ms, m.host_us);
                if (b.bytes)
                    printf(" %8.0f %5.0f%%", b.bytes / (m.batch_ms * 1e-3) * 1e-9,
                           100.0 * (b.bytes / bandwidth) / (m.batch_ms * 1e-3));
                else
                    printf(" %8s %6s", "-", "-");
                const peer_time* p = best_peer(w->name, dtype);
                if (p)
                    printf(" %9.4f %-24s %6.2f\n", p->ms, p->variant, p->ms / m.batch_ms);
                else
                    printf(" %9s %-24s %6s\n", "-", "-", "-");
                fflush(stdout);
                case_free(&b, device);
            }
        }
    }
    dmlReleaseDevice(device);
    CHECK_CUDA(cudaStreamDestroy(stream));
    free(pool_f32);
    free(pool_f16);
    return 0;
}
