/* The CPU's instruction sets, detected once per process, and the level a
 * device may use: the machine's, capped by the environment variable
 * DML_CPU_ISA and by DML_DEVICE_DESC.MaxCpuIsa (as oneDNN's
 * ONEDNN_MAX_CPU_ISA caps its JIT kernels). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../core/status.h"
#include "cpu.h"

static dml_isa detect(void) {
#if defined(__x86_64__) || defined(__i386__)
    /* libgcc's cpu model also checks that the OS saves the wider registers. */
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
        return DML_ISA_GENERIC;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        return DML_ISA_AVX512;
    return DML_ISA_AVX2;
#else
    return DML_ISA_GENERIC;
#endif
}

dml_isa dml_cpu_machine_isa(void) {
    /* -1 until detected; detection is idempotent, so a race only repeats it. */
    static atomic_int detected = -1;
    int isa = atomic_load_explicit(&detected, memory_order_relaxed);
    if (isa < 0) {
        isa = (int)detect();
        atomic_store_explicit(&detected, isa, memory_order_relaxed);
    }
    return (dml_isa)isa;
}

static const char* const isa_names[] = {"generic", "avx2", "avx512"};

const char* dml_isa_name(dml_isa isa) { return isa_names[isa]; }

HRESULT dml_cpu_device_isa(DML_CPU_ISA requested, dml_isa* isa) {
    *isa = dml_cpu_machine_isa();
    const char* cap = getenv("DML_CPU_ISA");
    if (cap != NULL && cap[0] != '\0') {
        dml_isa level = DML_ISA_GENERIC;
        while (level <= DML_ISA_AVX512 && strcmp(cap, isa_names[level]) != 0)
            level++;
        if (level > DML_ISA_AVX512)
            return dml_fail(E_INVALIDARG,
                            "dmlCreateDevice: the environment variable DML_CPU_ISA is \"%s\" but must be "
                            "generic, avx2 or avx512",
                            cap);
        if (level < *isa) *isa = level;
    }
    if (requested != DML_CPU_ISA_DEFAULT && (dml_isa)(requested - 1) < *isa) *isa = (dml_isa)(requested - 1);
    return S_OK;
}
