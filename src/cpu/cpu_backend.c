/* The CPU backend: buffers are host memory, dispatch runs to completion on
 * the device's OpenMP threads. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../core/status.h"
#include "cpu.h"

static HRESULT cpu_create(DMLDevice* device, const DML_DEVICE_DESC* desc) {
    unsigned threads = desc->ThreadCount;
#ifdef _OPENMP
    if (threads == 0) threads = (unsigned)omp_get_num_procs();
#endif
    if (threads > DML_MAX_THREAD_COUNT) threads = DML_MAX_THREAD_COUNT;
    device->threads = threads ? threads : 1;
    return S_OK;
}

static void cpu_destroy(DMLDevice* device) { (void)device; }

static HRESULT cpu_allocate(DMLDevice* device, uint64_t size, void** buffer) {
    (void)device;
    /* Rounded up so that aligned_alloc's size rule holds; 256 bytes covers every
     * alignment libdml requires (DML_PERSISTENT_BUFFER_ALIGNMENT). */
    if (size > SIZE_MAX - 255)
        return dml_fail(E_OUTOFMEMORY, "dmlAllocateBuffer: %llu bytes is too large", (unsigned long long)size);
    *buffer = aligned_alloc(256, (size + 255) / 256 * 256);
    if (*buffer == NULL)
        return dml_fail(E_OUTOFMEMORY, "dmlAllocateBuffer: out of memory (%llu bytes)", (unsigned long long)size);
    return S_OK;
}

static void cpu_free(DMLDevice* device, void* buffer) {
    (void)device;
    free(buffer);
}

static HRESULT cpu_copy(DMLDevice* device, void* dst, const void* src, uint64_t size) {
    (void)device;
    memmove(dst, src, size);
    return S_OK;
}

static HRESULT cpu_fill(DMLDevice* device, void* dst, int byte_value, uint64_t size) {
    (void)device;
    memset(dst, byte_value, size);
    return S_OK;
}

static HRESULT cpu_synchronize(DMLDevice* device) {
    (void)device;
    return S_OK; /* every CPU dispatch has completed when it returns */
}

const dml_backend dml_cpu_backend = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .allocate = cpu_allocate,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .synchronize = cpu_synchronize,
    .kernels =
        {
            [DML_KERNEL_MAX_POOLING] = dml_cpu_max_pooling,
            [DML_KERNEL_MAX_POOLING_GRAD] = dml_cpu_max_pooling_grad,
            [DML_KERNEL_BATCH_NORMALIZATION] = dml_cpu_batch_normalization,
            [DML_KERNEL_BATCH_NORMALIZATION_TRAINING] = dml_cpu_batch_normalization_training,
            [DML_KERNEL_BATCH_NORMALIZATION_GRAD] = dml_cpu_batch_normalization_grad,
            [DML_KERNEL_BATCH_NORMALIZATION_TRAINING_GRAD] = dml_cpu_batch_normalization_training_grad,
            [DML_KERNEL_ROI_POOLING] = dml_cpu_roi_pooling,
            [DML_KERNEL_ROI_ALIGN] = dml_cpu_roi_align,
            [DML_KERNEL_ROI_ALIGN_GRAD] = dml_cpu_roi_align_grad,
        },
};
