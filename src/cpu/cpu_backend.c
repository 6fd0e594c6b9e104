/* The CPU backend: buffers are host memory, dispatch runs to completion on
 * the device's OpenMP threads. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../backends.h"
#include "../core/status.h"
#include "cpu.h"

static HRESULT cpu_create(DMLDevice* device, const DML_DEVICE_DESC* desc) {
    unsigned threads = desc->ThreadCount;
#ifdef _OPENMP
    if (threads == 0) threads = (unsigned)omp_get_num_procs();
#endif
    if (threads > DML_MAX_THREAD_COUNT) threads = DML_MAX_THREAD_COUNT;
    device->threads = threads ? threads : 1;
    return dml_cpu_device_isa(desc->MaxCpuIsa, &device->cpu_isa);
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
    .impls =
        {
#define DML_CPU_IMPLS(ID, name) [DML_KERNEL_##ID] = dml_cpu_##name##_impls,
            DML_KERNEL_LIST(DML_CPU_IMPLS)
#undef DML_CPU_IMPLS
        },
};
