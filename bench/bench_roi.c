/* ROI pooling and the ROI align family on the CPU: libdml against
 * torchvision (bench/peer_torchvision.py in the same run, by the first of
 * $DML_BENCH_PYTHON, /usr/bin/python3 (Debian's python3-torchvision) and the
 * python3 on PATH (e.g. a venv of torch from pip) that imports torchvision;
 * skipped with a message, and the peer's reason, where none does).
 *
 * Workloads of BENCHMARKS.md (roi_pool, roi_align_fwd, roi_align_grad) in
 * FLOAT32 and FLOAT16, NCHW and channels-last, every reduction and
 * interpolation of the forward, and a small-ROI/large-ROI pair. Each row:
 * median time, GB/s and fraction of the copy floor for the minimal bytes
 * (inputs read once, outputs written once), the implementation that ran, and
 * the ratio to torchvision and torchvision's time (bench_report: < 1 is
 * faster than the peer).
 * Arguments: bench.h's (--csv PATH, --only TEXT on the row's description). */
#include <dml/dml.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../src/core/half.h"
#include "bench.h"

typedef enum { ROI_POOL, ROI_ALIGN_FORWARD, ROI_ALIGN_FEATURES, ROI_ALIGN_FEATURES_AND_BOXES } workload_kind;
typedef enum { ROIS_DEFAULT, ROIS_SMALL, ROIS_LARGE } roi_kind;
static const char* const roi_kind_names[] = {"default", "small", "large"};

typedef struct workload {
    workload_kind kind;
    bool half, channels_last;
    DML_REDUCE_FUNCTION reduction;
    DML_INTERPOLATION_MODE interpolation;
    uint32_t n, c, h, w, rois, out_h, out_w, samples;
    float scale;
    roi_kind roi_sizes;
} workload;

#define AVG DML_REDUCE_FUNCTION_AVERAGE
#define MAX DML_REDUCE_FUNCTION_MAX
#define LIN DML_INTERPOLATION_MODE_LINEAR
#define NEAR DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR
#define POOL_SHAPE 2, 256, 64, 64, 512, 7, 7, 0, 1.0f / 16
#define ALIGN_SHAPE 2, 256, 128, 128, 512, 7, 7, 2, 1.0f / 8

static const workload workloads[] = {
    {ROI_POOL, false, false, MAX, LIN, POOL_SHAPE, ROIS_DEFAULT},
    {ROI_POOL, true, false, MAX, LIN, POOL_SHAPE, ROIS_DEFAULT},
    {ROI_POOL, false, true, MAX, LIN, POOL_SHAPE, ROIS_DEFAULT},
    {ROI_POOL, true, true, MAX, LIN, POOL_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FORWARD, false, false, AVG, LIN, ALIGN_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FORWARD, true, false, AVG, LIN, ALIGN_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FORWARD, false, true, AVG, LIN, ALIGN_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FORWARD, true, true, AVG, LIN, ALIGN_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FORWARD, false, false, MAX, LIN, ALIGN_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FORWARD, false, false, AVG, NEAR, ALIGN_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FORWARD, false, false, MAX, NEAR, ALIGN_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FORWARD, false, false, AVG, LIN, ALIGN_SHAPE, ROIS_SMALL},
    {ROI_ALIGN_FORWARD, false, false, AVG, LIN, ALIGN_SHAPE, ROIS_LARGE},
    {ROI_ALIGN_FEATURES, false, false, AVG, LIN, ALIGN_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FEATURES, true, false, AVG, LIN, ALIGN_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FEATURES, false, true, AVG, LIN, ALIGN_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FEATURES, false, false, AVG, LIN, ALIGN_SHAPE, ROIS_SMALL},
    {ROI_ALIGN_FEATURES, false, false, AVG, LIN, ALIGN_SHAPE, ROIS_LARGE},
    {ROI_ALIGN_FEATURES_AND_BOXES, false, false, AVG, LIN, ALIGN_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FEATURES_AND_BOXES, true, false, AVG, LIN, ALIGN_SHAPE, ROIS_DEFAULT},
    {ROI_ALIGN_FEATURES_AND_BOXES, false, true, AVG, LIN, ALIGN_SHAPE, ROIS_DEFAULT},
};
enum { WORKLOAD_COUNT = sizeof workloads / sizeof workloads[0] };

/* The first word of a row's description is its operator (bench_report):
 * the gradient's two workloads are different operations. */
static const char* const kind_names[] = {"roi_pool", "roi_align_fwd", "roi_align_grad", "roi_align_grad_boxes"};

/* ---- Data ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static double uniform(void) { /* [0, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

static double normal(void) { return sqrt(-2.0 * log(1.0 - uniform())) * cos(6.283185307179586 * uniform()); }

static void* values(uint64_t count, bool half, double (*draw)(void)) {
    void* data = malloc(count * (half ? 2 : 4));
    for (uint64_t i = 0; i < count; i++) {
        float value = (float)draw();
        if (half)
            ((uint16_t*)data)[i] = dml_float_to_half(value);
        else
            ((float*)data)[i] = value;
    }
    return data;
}

/* ROI rows [batch, x1, y1, x2, y2] in image coordinates (BENCHMARKS.md);
 * small: 0.5 to 2.5 feature pixels a side; large: half the image to all of it. */
static void draw_rois(const workload* wl, double (*rows)[5]) {
    double image_w = wl->w / wl->scale, image_h = wl->h / wl->scale;
    for (uint32_t r = 0; r < wl->rois; r++) {
        double width, height;
        if (wl->roi_sizes == ROIS_SMALL) {
            width = (0.5 + 2 * uniform()) / wl->scale;
            height = (0.5 + 2 * uniform()) / wl->scale;
        } else if (wl->roi_sizes == ROIS_LARGE) {
            width = (0.5 + 0.5 * uniform()) * image_w;
            height = (0.5 + 0.5 * uniform()) * image_h;
        } else {
            width = uniform() * image_w * 0.5 + 4;
            height = uniform() * image_h * 0.5 + 4;
        }
        double x1 = uniform() * image_w * 0.8, y1 = uniform() * image_h * 0.8;
        rows[r][0] = (double)(uint32_t)(uniform() * wl->n);
        rows[r][1] = x1;
        rows[r][2] = y1;
        rows[r][3] = fmin(x1 + width, image_w - 1);
        rows[r][4] = fmin(y1 + height, image_h - 1);
    }
}

/* ---- Tensors ---- */

typedef struct tensor_desc {
    DML_BUFFER_TENSOR_DESC buffer;
    DML_TENSOR_DESC desc;
    UINT sizes[4], strides[4];
} tensor_desc;

/* A 4-D tensor, packed NCHW or (channels_last) NHWC in memory. */
static const DML_TENSOR_DESC* tensor(tensor_desc* t, bool half, UINT n, UINT c, UINT h, UINT w, bool channels_last) {
    UINT sizes[4] = {n, c, h, w};
    memcpy(t->sizes, sizes, sizeof sizes);
    bench_channels_last_strides(4, t->sizes, t->strides);
    return bench_tensor(&t->buffer, &t->desc, half ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32, 4,
                        t->sizes, channels_last ? t->strides : NULL);
}

static const DML_TENSOR_DESC* index_tensor(tensor_desc* t, UINT rois) {
    t->sizes[0] = rois;
    return bench_tensor(&t->buffer, &t->desc, DML_TENSOR_DATA_TYPE_UINT32, 1, t->sizes, NULL);
}

/* ---- One measurement ---- */

typedef struct measurement {
    double seconds, bytes;
    char implementation[64];
} measurement;

static measurement measure(DMLDevice* device, const workload* wl) {
    bool half = wl->half, nhwc = wl->channels_last;
    uint64_t element = half ? 2 : 4;
    uint64_t image = (uint64_t)wl->n * wl->c * wl->h * wl->w;
    uint64_t pooled = (uint64_t)wl->rois * wl->c * wl->out_h * wl->out_w;
    double(*rows)[5] = malloc(wl->rois * sizeof *rows);
    draw_rois(wl, rows);
    /* ROI pooling: rows [batch, x1, y1, x2, y2]; ROI align: [x1, y1, x2, y2] and batch indices. */
    uint32_t columns = wl->kind == ROI_POOL ? 5 : 4;
    void* rois = malloc(wl->rois * columns * element);
    uint32_t* batch = malloc(wl->rois * sizeof *batch);
    for (uint32_t r = 0; r < wl->rois; r++) {
        batch[r] = (uint32_t)rows[r][0];
        for (uint32_t k = 0; k < columns; k++) {
            float value = (float)rows[r][k + 5 - columns];
            if (half)
                ((uint16_t*)rois)[r * columns + k] = dml_float_to_half(value);
            else
                ((float*)rois)[r * columns + k] = value;
        }
    }
    uint64_t roi_bytes = wl->rois * columns * element, batch_bytes = 4ull * wl->rois;
    void* input = values(image, half, normal);
    void* pooled_data = values(pooled, half, normal); /* forward output or gradient input */
    void* image_out = NULL;
    void* roi_gradient = NULL;
    tensor_desc t_input, t_pooled, t_rois, t_batch, t_image_out;
    const DML_TENSOR_DESC* d_input = tensor(&t_input, half, wl->n, wl->c, wl->h, wl->w, nhwc);
    const DML_TENSOR_DESC* d_pooled = tensor(&t_pooled, half, wl->rois, wl->c, wl->out_h, wl->out_w, nhwc);
    const DML_TENSOR_DESC* d_rois = tensor(&t_rois, half, 1, 1, wl->rois, columns, false);
    DML_ROI_POOLING_OPERATOR_DESC pool = {d_input, d_rois, d_pooled, wl->scale, {wl->out_w, wl->out_h}};
    DML_ROI_ALIGN1_OPERATOR_DESC forward = {d_input,
                                            d_rois,
                                            index_tensor(&t_batch, wl->rois),
                                            d_pooled,
                                            wl->reduction,
                                            wl->interpolation,
                                            wl->scale,
                                            wl->scale,
                                            0.0f,
                                            -0.5f,
                                            0.0f,
                                            wl->samples,
                                            wl->samples,
                                            0};
    DML_ROI_ALIGN_GRAD_OPERATOR_DESC grad = {d_input,
                                             d_pooled,
                                             d_rois,
                                             &t_batch.desc,
                                             tensor(&t_image_out, half, wl->n, wl->c, wl->h, wl->w, nhwc),
                                             NULL,
                                             wl->reduction,
                                             wl->interpolation,
                                             wl->scale,
                                             wl->scale,
                                             0.0f,
                                             -0.5f,
                                             wl->samples,
                                             wl->samples,
                                             0};
    bench_dml_job job;
    measurement m = {0};
    if (wl->kind == ROI_POOL) {
        DML_OPERATOR_DESC desc = {DML_OPERATOR_ROI_POOLING, &pool};
        bench_dml_prepare(&job, device, &desc, 2, 1, (void*[]){input, rois, pooled_data},
                          (uint64_t[]){image * element, roi_bytes, pooled * element});
        m.bytes = (double)((image + pooled) * element + roi_bytes);
    } else if (wl->kind == ROI_ALIGN_FORWARD) {
        DML_OPERATOR_DESC desc = {DML_OPERATOR_ROI_ALIGN1, &forward};
        bench_dml_prepare(&job, device, &desc, 3, 1, (void*[]){input, rois, batch, pooled_data},
                          (uint64_t[]){image * element, roi_bytes, batch_bytes, pooled * element});
        m.bytes = (double)((image + pooled) * element + roi_bytes + batch_bytes);
    } else {
        bool boxes = wl->kind == ROI_ALIGN_FEATURES_AND_BOXES;
        image_out = malloc(image * element);
        if (boxes) {
            roi_gradient = malloc(roi_bytes);
            grad.OutputROIGradientTensor = d_rois;
        } else {
            grad.InputTensor = NULL; /* AVERAGE needs no input for the feature gradient */
        }
        DML_OPERATOR_DESC desc = {DML_OPERATOR_ROI_ALIGN_GRAD, &grad};
        bench_dml_prepare(
            &job, device, &desc, 4, 2,
            (void*[]){boxes ? input : NULL, pooled_data, rois, batch, image_out, roi_gradient},
            (uint64_t[]){image * element, pooled * element, roi_bytes, batch_bytes, image * element, roi_bytes});
        m.bytes = (double)((image * (boxes ? 2 : 1) + pooled) * element + roi_bytes * (boxes ? 2 : 1) + batch_bytes);
    }
    m.seconds = bench_dml_time(&job);
    snprintf(m.implementation, sizeof m.implementation, "%s", job.implementation);
    bench_dml_release(&job);
    free(rows);
    free(rois);
    free(batch);
    free(input);
    free(pooled_data);
    free(image_out);
    free(roi_gradient);
    return m;
}

/* ---- The peer ---- */

/* torchvision's workload token (peer_torchvision.py), or false where it has
 * no counterpart (MAX or NEAREST_NEIGHBOR align, the box gradient). */
static bool peer_token(const workload* wl, char* token, size_t size) {
    const char* kind = wl->kind == ROI_POOL ? "pool" : wl->kind == ROI_ALIGN_FORWARD ? "align" : "grad";
    if (wl->kind == ROI_ALIGN_FEATURES_AND_BOXES) return false;
    if (wl->kind != ROI_POOL && (wl->reduction != AVG || wl->interpolation != LIN)) return false;
    snprintf(token, size, "%s:%s:%s:%u,%u,%u,%u:%u:%u,%u:%.9g:%u:%s", kind, wl->half ? "f16" : "f32",
             wl->channels_last ? "nhwc" : "nchw", wl->n, wl->c, wl->h, wl->w, wl->rois, wl->out_h, wl->out_w,
             (double)wl->scale, wl->samples, roi_kind_names[wl->roi_sizes]);
    return true;
}

/* "roi_align_fwd f32 nchw avg linear default rois" */
static const char* describe(const workload* wl, char* text, size_t size) {
    bool pool = wl->kind == ROI_POOL;
    snprintf(text, size, "%s %s %s %s%s%s rois", kind_names[wl->kind], wl->half ? "f16" : "f32",
             wl->channels_last ? "nhwc" : "nchw",
             pool                   ? ""
             : wl->reduction == AVG ? "avg "
                                    : "max ",
             pool                       ? ""
             : wl->interpolation == LIN ? "linear "
                                        : "nearest ",
             roi_kind_names[wl->roi_sizes]);
    return text;
}

/* Whether the workload is run: its description contains --only's text. */
static bool selected(const bench_context* ctx, const workload* wl) {
    char text[128];
    return bench_selected(ctx, describe(wl, text, sizeof text));
}

/* Runs the peer with `python` on every selected workload it has;
 * peer_seconds[i] stays 0 elsewhere. Prints the peer's versions line ('# ...');
 * its reasons for failing go to stderr. Returns the script's exit status (3:
 * this python cannot import torchvision; -1: not run). */
static int run_peer_with(const bench_context* ctx, const char* python, double* peer_seconds) {
    char command[8192];
    int length =
        snprintf(command, sizeof command, "%s %s/peer_torchvision.py %d", python, DML_BENCH_SOURCE_DIR, ctx->threads);
    char tokens[WORKLOAD_COUNT][128];
    for (int i = 0; i < WORKLOAD_COUNT; i++) {
        tokens[i][0] = 0;
        if (selected(ctx, &workloads[i]) && peer_token(&workloads[i], tokens[i], sizeof tokens[i]))
            length += snprintf(command + length, sizeof command - (size_t)length, " %s", tokens[i]);
    }
    fflush(stdout);
    FILE* peer = popen(command, "r");
    if (peer == NULL) return -1;
    char line[256];
    while (fgets(line, sizeof line, peer)) {
        char token[128];
        double ms;
        if (line[0] == '#') printf("torchvision peer:%s", line + 1);
        if (sscanf(line, "%127s %lf", token, &ms) != 2) continue;
        for (int i = 0; i < WORKLOAD_COUNT; i++)
            if (strcmp(tokens[i], token) == 0) peer_seconds[i] = ms * 1e-3;
    }
    int status = pclose(peer);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The peer with the first python that imports torchvision. */
static void run_peer(const bench_context* ctx, double* peer_seconds) {
    const char* pythons[] = {getenv("DML_BENCH_PYTHON"), "/usr/bin/python3", "python3"};
    int status = -1;
    for (size_t i = 0; i < sizeof pythons / sizeof pythons[0]; i++) {
        if (pythons[i] == NULL || pythons[i][0] == '\0') continue;
        status = run_peer_with(ctx, pythons[i], peer_seconds);
        if (status != 3) break; /* 3: this python has no torchvision; try the next */
    }
    if (status != 0)
        printf("torchvision not run (peer exit status %d, the reason above): no peer ratios (apt-get install "
               "python3-torchvision, or DML_BENCH_PYTHON=a python with torchvision)\n",
               status);
}

int main(int argc, char** argv) {
    bench_context ctx;
    if (bench_begin_with_peer(&ctx, "ROI pooling and ROI align", "torchvision", argc, argv) == BENCH_PEER_CHILD)
        return 0;
    /* libdml's threads are the peer's (OMP_NUM_THREADS; a device's default is every core). */
    DML_DEVICE_DESC device_desc = {.Backend = DML_BACKEND_CPU, .ThreadCount = (UINT)ctx.threads};
    DMLDevice* device;
    BENCH_CHECK_DML(dmlCreateDevice(&device_desc, &device));
    double peer_seconds[WORKLOAD_COUNT] = {0};
    if (getenv("DML_BENCH_NO_PEER")) /* profiling libdml alone */
        printf("DML_BENCH_NO_PEER set: torchvision not run\n");
    else
        run_peer(&ctx, peer_seconds);
    for (int i = 0; i < WORKLOAD_COUNT; i++) {
        const workload* wl = &workloads[i];
        if (!selected(&ctx, wl)) continue;
        measurement m = measure(device, wl);
        char text[128], peer[48];
        printf("%s\n", describe(wl, text, sizeof text));
        /* The peer's time beside the ratio: "x0.05 torchvision 105.600 ms". */
        snprintf(peer, sizeof peer, "torchvision %.3f ms", peer_seconds[i] * 1e3);
        bench_report(&ctx, &(bench_row){text, wl->half ? "FLOAT16" : "FLOAT32", wl->channels_last ? "nhwc" : "nchw",
                                        "libdml", m.implementation, m.seconds, m.bytes,
                                        peer_seconds[i] > 0 ? peer : NULL, peer_seconds[i]});
    }
    dmlReleaseDevice(device);
    bench_end(&ctx);
    return 0;
}
