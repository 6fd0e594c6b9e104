/* What the CPU backend's batch normalization implementations share: the
 * generic strided kernel (batch_normalization.c) and the fast paths of
 * packed layouts (batch_normalization_avx2.c). Per-group bookkeeping lives
 * here once so that every implementation stores the same outputs from the
 * same sums (spec batch_normalization.md §5-§7). */
#ifndef DML_CPU_BATCH_NORMALIZATION_CPU_H
#define DML_CPU_BATCH_NORMALIZATION_CPU_H

#include <stdbool.h>
#include <stddef.h>

#include "../ops/batch_normalization.h"
#include "cpu.h"

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
