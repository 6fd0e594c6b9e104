/* The CPU's instruction sets, detected once per process, and the level a
 * device may use: the machine's, capped by the environment variable
 * DML_CPU_ISA and by DML_DEVICE_DESC.MaxCpuIsa (as oneDNN's
 * ONEDNN_MAX_CPU_ISA caps its JIT kernels). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/status.h"
#include "cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* The register state the OS saves on context switches (XCR0). */
static uint64_t os_saved_state(void) {
    uint32_t low, high;
    __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    return ((uint64_t)high << 32) | low;
}
#endif

/* From CPUID and XCR0 directly (compilers differ in the feature names their
 * __builtin_cpu_supports knows): a level counts only when the CPU has every
 * instruction set of it and the OS saves its registers. */
static dml_isa detect(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return DML_ISA_GENERIC;
    bool fma = ecx & (1u << 12), osxsave = ecx & (1u << 27), avx = ecx & (1u << 28), f16c = ecx & (1u << 29);
    if (!(fma && osxsave && avx && f16c)) return DML_ISA_GENERIC;
    uint64_t state = os_saved_state();
    if ((state & 0x6) != 0x6) return DML_ISA_GENERIC; /* XMM and YMM */
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return DML_ISA_GENERIC;
    bool avx2 = ebx & (1u << 5);
    bool avx512 = (ebx & (1u << 16)) && (ebx & (1u << 17)) && (ebx & (1u << 30)) && (ebx & (1u << 31)); /* F DQ BW VL */
    if (!avx2) return DML_ISA_GENERIC;
    if (avx512 && (state & 0xE6) == 0xE6) return DML_ISA_AVX512; /* and opmask, ZMM */
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
