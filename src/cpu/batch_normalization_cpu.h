/* What the CPU backend's batch normalization implementations share: the
 * generic strided kernel (batch_normalization.c) and the fast paths of
 * packed layouts (batch_normalization_avx2.c). Per-group bookkeeping lives
 * here once so that every implementation stores the same outputs from the
 * same sums (spec batch_normalization.md §5-§7). */
#ifndef DML_CPU_BATCH_NORMALIZATION_CPU_H
#define DML_CPU_BATCH_NORMALIZATION_CPU_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>

#include "../ops/batch_normalization.h"
#include "cpu.h"

/* The plan of the fast paths (batch_normalization_avx2.c classifies the
 * layout): x[o][g][i], O outer rows, G groups, I inner elements. */
typedef struct bn_fast_plan {
    uint64_t outer, groups, inner; /* O, G, I */
    bool channels;                 /* I == 1: vectorized across groups */
    uint64_t chunk_rows, chunks;   /* channels: rows per chunk of the reduction and of the work split */
    bool reduces;                  /* TRAINING and the GRADs (inference needs no partials) */
    bool half;
    bool stream;
    int threads;
} bn_fast_plan;

/* BATCH_NORMALIZATION_TRAINING's plan for the runs class (packed NCHW-like,
 * I > 1): S_FALSE for other layouts. */
HRESULT dml_cpu_bn_plan_training_runs(const DMLOperator* op, const DMLDevice* device, dml_plan* result);
/* Both GRADs' plan for the runs class. */
HRESULT dml_cpu_bn_plan_gradient_runs(const DMLOperator* op, const DMLDevice* device, dml_plan* result);

enum {
    /* Elements of a run per statistics chunk (runs): a chunk stays in L1
     * between its two passes. */
    DML_BN_CHUNK = 4096,
    /* Fast paths may add FLOAT32 values in FLOAT32 lanes for spans of at most
     * DML_BN_SPAN vectors, each span then added to FLOAT64 lanes (spec §9: at
     * least FLOAT32 accumulation): a span's sum is off by at most
     * DML_BN_SPAN * 2^-24 of its terms' magnitudes, at a fraction of the
     * conversions to FLOAT64. */
    DML_BN_SPAN = 8
};

/* Runs `items` work items over the device's threads. Each item computes its
 * own outputs in a fixed order, so which thread runs it changes no bit:
 * items are handed out dynamically, and a thread that the OS delays (a
 * shared machine) does not hold the others up. The non-temporal stores are
 * fenced before the threads join. */
#define PARALLEL_ITEMS(plan, items, item_cost, body)                                                                   \
    do {                                                                                                               \
        int64_t count_ = (int64_t)(items);                                                                             \
        int threads_ = dml_cpu_threads_for((plan)->threads, (uint64_t)count_,                                          \
                                           dml_cpu_items_per_thread((item_cost), DML_CPU_MIN_WORK_PER_THREAD));        \
        _Pragma("omp parallel num_threads(threads_)") {                                                                \
            _Pragma("omp for schedule(dynamic)") for (int64_t item = 0; item < count_; item++) { body; }               \
            _mm_sfence();                                                                                              \
        }                                                                                                              \
    } while (0)

/* Statistics of part of a group: element count, mean, and the sum of
 * squared deviations from that mean. */
typedef struct dml_bn_stats {
    double count, mean, m2;
} dml_bn_stats;

/* Chan's merge of `part` into `total` (an empty total takes `part` as is):
 * no E[x^2] - E[x]^2 cancellation (spec §5). Merging in a fixed order gives
 * the same bits for every thread count. */
static inline void dml_bn_stats_merge(dml_bn_stats* total, dml_bn_stats part) {
    if (total->count == 0) {
        *total = part;
        return;
    }
    double merged = total->count + part.count;
    double delta = part.mean - total->mean;
    total->mean += delta * (part.count / merged);
    total->m2 += part.m2 + delta * delta * (total->count * part.count / merged);
    total->count = merged;
}

/* Runs class: group g's statistics, merged over its chunks in a fixed
 * order. A chunk is a piece of up to DML_BN_CHUNK elements of one long run,
 * or the same piece of several short runs (`runs` runs of `count` elements,
 * `stride` apart); `ahead` is the distance to the next chunk, for prefetching
 * (0: none). */
typedef dml_bn_stats (*dml_bn_chunk_stats)(const void* x, uint64_t index, uint64_t count, uint64_t runs,
                                           uint64_t stride, uint64_t ahead);

static inline __attribute__((always_inline)) dml_bn_stats dml_bn_group_stats(const bn_fast_plan* p, const void* x,
                                                                             uint64_t g, dml_bn_chunk_stats chunk) {
    dml_bn_stats stats = {0, 0, 0};
    uint64_t runs_per_chunk = p->inner >= DML_BN_CHUNK ? 1 : DML_BN_CHUNK / p->inner, stride = p->groups * p->inner;
    for (uint64_t o = 0; o < p->outer; o += runs_per_chunk) {
        uint64_t runs = p->outer - o < runs_per_chunk ? p->outer - o : runs_per_chunk;
        for (uint64_t c = 0; c < p->inner; c += DML_BN_CHUNK) {
            /* the next chunk: the run's next piece, or the same piece of the next runs */
            uint64_t ahead = c + DML_BN_CHUNK < p->inner          ? DML_BN_CHUNK
                             : o + 2 * runs_per_chunk <= p->outer ? runs * stride
                                                                  : 0;
            uint64_t count = p->inner - c < DML_BN_CHUNK ? p->inner - c : DML_BN_CHUNK;
            dml_bn_stats_merge(&stats, chunk(x, (o * p->groups + g) * p->inner + c, count, runs, stride, ahead));
        }
    }
    return stats;
}

/* The operands of a forward element-wise pass. */
typedef struct dml_bn_forward_args {
    const void* x;
    const void* fused_add; /* NULL when absent */
    void* y;
    dml_activation activation;
    bool stream; /* non-temporal stores where aligned */
} dml_bn_forward_args;

static inline dml_bn_forward_args dml_bn_training_forward_args(const dml_kernel_args* args, bool stream) {
    const dml_batch_norm_params* params = args->op->params;
    return (dml_bn_forward_args){
        .x = args->inputs[DML_BN_TRAINING_INPUT],
        .fused_add = args->inputs[DML_BN_TRAINING_FUSED_ADD],
        .y = args->outputs[DML_BN_TRAINING_OUTPUT],
        .activation = params->activation,
        .stream = stream,
    };
}

/* The operands of a backward element-wise pass (both GRADs). */
typedef struct dml_bn_backward_args {
    const void* x;
    const void* dy;
    void* dx;
    bool training; /* TRAINING_GRAD: dx = k * (dy - u - (x - Mean) * w), else k * dy */
    bool stream;   /* non-temporal stores where aligned */
} dml_bn_backward_args;

static inline dml_bn_backward_args dml_bn_backward_args_of(const dml_kernel_args* args, bool training, bool stream) {
    return (dml_bn_backward_args){
        .x = args->inputs[DML_BN_GRAD_INPUT],
        .dy = args->inputs[DML_BN_GRAD_INPUT_GRADIENT],
        .dx = args->outputs[DML_BN_GRAD_OUTPUT_GRADIENT],
        .training = training,
        .stream = stream,
    };
}

/* A parameter tensor's element at row-major index `index` over its sizes
 * (the group j), read or rounded once to the tensor's type. */
double dml_cpu_bn_load_parameter(const dml_tensor* tensor, const void* data, uint64_t index);
void dml_cpu_bn_store_parameter(const dml_tensor* tensor, void* data, uint64_t index, double value);

/* BATCH_NORMALIZATION_TRAINING, group j's whole statistics: stores
 * OutputMean and the biased OutputVariance (divisor M, decision BN-1) and
 * returns the element-wise pass's {mean, factor = Scale / sqrt(variance +
 * Epsilon), Bias}. */
void dml_cpu_bn_finish_statistics(const dml_kernel_args* args, uint64_t j, dml_bn_stats stats, double values[3]);

/* Both GRADs, group j's sums sdy = sum dy and sdyxc = sum dy * (x - Mean):
 * stores OutputBiasGradient and OutputScaleGradient and returns {k, u, w} of
 * dx = k * (dy - u - (x - Mean) * w) (u = w = 0 for BATCH_NORMALIZATION_GRAD). */
void dml_cpu_bn_finish_gradient(const dml_kernel_args* args, uint64_t j, double sdy, double sdyxc, bool training,
                                double values[3]);

/* The fused activation over `count` FLOAT32 pre-activation values, in place. */
void dml_cpu_bn_apply_activation(const dml_activation* activation, float* values, size_t count);

#endif
