/* The CPU backend's kernels (one file per family) and shared helpers. */
#ifndef DML_CPU_CPU_H
#define DML_CPU_CPU_H

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../core/operator.h"

/* Each kernel's generic strided implementation (one file per family), the
 * last entry of its list and the reference of every fast path. */
#define DML_CPU_GENERIC_IMPL(ID, name) extern const dml_impl dml_cpu_##name##_generic;
DML_KERNEL_LIST(DML_CPU_GENERIC_IMPL)
#undef DML_CPU_GENERIC_IMPL

/* Fast paths (one file per family and ISA: <family>_<isa>.c). */
extern const dml_impl dml_cpu_max_pooling_avx2_nchw;        /* max_pooling_avx2.c: rows contiguous along W */
extern const dml_impl dml_cpu_max_pooling_grad_avx2_nchw;   /* max_pooling_avx2.c */
extern const dml_impl dml_cpu_max_pooling_avx512_nchw;      /* max_pooling_avx512.c: W stride 2, 2 or 3 columns */
extern const dml_impl dml_cpu_max_pooling_grad_avx512_nchw; /* max_pooling_avx512.c: the same, 2-D planes */
extern const dml_impl dml_cpu_max_pooling_avx2_nhwc;        /* max_pooling_avx2.c: channels-last (C stride 1) */
extern const dml_impl dml_cpu_max_pooling_grad_avx2_nhwc;   /* max_pooling_avx2.c */
extern const dml_impl dml_cpu_max_pooling_avx512_nhwc;      /* max_pooling_nhwc_avx512.c: channels-last */
extern const dml_impl dml_cpu_max_pooling_grad_avx512_nhwc; /* max_pooling_nhwc_avx512.c: disjoint windows */
extern const dml_impl dml_cpu_roi_pooling_avx2_nchw, dml_cpu_roi_pooling_avx2_nhwc;           /* roi_pooling_avx2.c */
extern const dml_impl dml_cpu_roi_align_avx2_nchw, dml_cpu_roi_align_avx2_nhwc;               /* roi_align_avx2.c */
extern const dml_impl dml_cpu_roi_align_grad_avx2_nchw, dml_cpu_roi_align_grad_avx2_nhwc;     /* roi_align_avx2.c */
extern const dml_impl dml_cpu_roi_align_avx512_nchw, dml_cpu_roi_align_avx512_nhwc;           /* roi_align_avx512.c */
extern const dml_impl dml_cpu_roi_align_grad_avx512_nchw, dml_cpu_roi_align_grad_avx512_nhwc; /* roi_align_avx512.c */
/* batch_normalization_avx2.c: packed, groups outside their runs (nchw) or innermost (nhwc) */
#define DML_CPU_BN_AVX2_IMPLS(name)                                                                                    \
    extern const dml_impl dml_cpu_##name##_avx2_nchw;                                                                  \
    extern const dml_impl dml_cpu_##name##_avx2_nhwc;
DML_CPU_BN_AVX2_IMPLS(batch_normalization)
DML_CPU_BN_AVX2_IMPLS(batch_normalization_training)
DML_CPU_BN_AVX2_IMPLS(batch_normalization_grad)
DML_CPU_BN_AVX2_IMPLS(batch_normalization_training_grad)
#undef DML_CPU_BN_AVX2_IMPLS
extern const dml_impl dml_cpu_batch_normalization_training_avx512_nchw, dml_cpu_batch_normalization_grad_avx512_nchw,
    dml_cpu_batch_normalization_training_grad_avx512_nchw; /* batch_normalization_avx512.c: FLOAT32 */

/* Each kernel's implementation list, in order of preference (cpu_impl_list.c). */
#define DML_CPU_IMPL_LIST(ID, name) extern const dml_impl* const dml_cpu_##name##_impls[];
DML_KERNEL_LIST(DML_CPU_IMPL_LIST)
#undef DML_CPU_IMPL_LIST

/* ---- Instruction sets (cpu_isa.c) ---- */
/* What this machine has, detected once per process. */
dml_isa dml_cpu_machine_isa(void);
/* The level a new device may use: the machine's, capped by the environment
 * variable DML_CPU_ISA and by `requested` (E_INVALIDARG for a bad variable). */
HRESULT dml_cpu_device_isa(DML_CPU_ISA requested, dml_isa* isa);
/* "generic", "avx2", "avx512". */
const char* dml_isa_name(dml_isa isa);

/* The calling thread's index in its OpenMP team (its share of a workspace). */
static inline int dml_cpu_thread_index(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

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

/* Items per chunk of a dynamic schedule over `items`: about 16 chunks per
 * thread, so that a thread that runs slower (a virtual CPU its host shares:
 * on the 2-core test machine, at times half the other's speed for seconds)
 * takes fewer of them instead of holding the others at the end. Each item's
 * result never depends on the thread that computes it. */
static inline int dml_cpu_chunk(uint64_t items, int threads) {
    uint64_t chunk = items / ((uint64_t)(threads > 0 ? threads : 1) * 16);
    return chunk < 1 ? 1 : chunk > INT32_MAX ? INT32_MAX : (int)chunk;
}

/* Element visits a thread should have before another thread is worth waking. */
#define DML_CPU_MIN_WORK_PER_THREAD 32768

/* Outputs of at least this many bytes are written by the fast paths with
 * non-temporal (streaming) stores where they can: far larger than the
 * caches, they would be evicted before anyone read them, and a plain store
 * first reads each line it writes (perf: a third of ROI pooling's time). */
#define DML_CPU_STREAM_BYTES ((uint64_t)8 << 20)

#endif
