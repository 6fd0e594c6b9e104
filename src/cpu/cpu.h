/* The CPU backend's kernels (one file per family) and shared helpers. */
#ifndef DML_CPU_CPU_H
#define DML_CPU_CPU_H

#include "../core/operator.h"

HRESULT dml_cpu_max_pooling(const dml_kernel_args* args);
HRESULT dml_cpu_max_pooling_grad(const dml_kernel_args* args);
HRESULT dml_cpu_batch_normalization(const dml_kernel_args* args);
HRESULT dml_cpu_batch_normalization_training(const dml_kernel_args* args);
HRESULT dml_cpu_batch_normalization_grad(const dml_kernel_args* args);
HRESULT dml_cpu_batch_normalization_training_grad(const dml_kernel_args* args);
HRESULT dml_cpu_roi_pooling(const dml_kernel_args* args);
HRESULT dml_cpu_roi_align(const dml_kernel_args* args);
HRESULT dml_cpu_roi_align_grad(const dml_kernel_args* args);

/* Worker threads for one dispatch (the device's ThreadCount). */
static inline int dml_cpu_threads(const dml_kernel_args* args) { return (int)args->device->threads; }

/* Threads for `items` work items of which each thread should get at least
 * `per_thread`: small problems do not wake every thread (waking them costs
 * more than the work). Results never depend on the thread count. */
static inline int dml_cpu_threads_for(int threads, uint64_t items, uint64_t per_thread) {
    uint64_t useful = (items + per_thread - 1) / per_thread;
    return useful < (uint64_t)threads ? (useful > 0 ? (int)useful : 1) : threads;
}

/* Work items per thread such that each thread gets about `min_work`
 * element visits when one item costs `item_cost` of them. */
static inline uint64_t dml_cpu_items_per_thread(uint64_t item_cost, uint64_t min_work) {
    return item_cost >= min_work ? 1 : min_work / (item_cost ? item_cost : 1);
}

/* Element visits a thread should have before another thread is worth waking. */
#define DML_CPU_MIN_WORK_PER_THREAD 32768

#endif
