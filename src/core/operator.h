/* The internal shape of devices, operators and backends. Data flows down:
 * src/ops/ fills a DMLOperator (validated slots and family parameters),
 * src/core/ checks bindings, a backend's kernel computes. */
#ifndef DML_CORE_OPERATOR_H
#define DML_CORE_OPERATOR_H

#include <stddef.h>
#ifdef __cplusplus
#include <atomic>
#else
#include <stdatomic.h>
#endif

#include "dml/dml.h"
#include "tensor.h"

/* The CUDA backend's .cu files include the core headers as C++. */
#ifdef __cplusplus
extern "C" {
#endif

/* The most input or output slots of any operator (BATCH_NORMALIZATION has 5 inputs). */
#define DML_MAX_SLOTS 6

/* The kernels: one per family variant, named as in its backends' functions
 * (dml_cpu_<name>, dml_cuda_<name>) and implementation lists. */
#define DML_KERNEL_LIST(X)                                                                                             \
    X(MAX_POOLING, max_pooling)                                                                                        \
    X(MAX_POOLING_GRAD, max_pooling_grad)                                                                              \
    X(ROI_POOLING, roi_pooling)                                                                                        \
    X(ROI_ALIGN, roi_align)                                                                                            \
    X(ROI_ALIGN_GRAD, roi_align_grad)                                                                                  \
    X(BATCH_NORMALIZATION, batch_normalization)                                                                        \
    X(BATCH_NORMALIZATION_TRAINING, batch_normalization_training)                                                      \
    X(BATCH_NORMALIZATION_GRAD, batch_normalization_grad)                                                              \
    X(BATCH_NORMALIZATION_TRAINING_GRAD, batch_normalization_training_grad)

typedef enum dml_kernel_id {
#define DML_KERNEL_ID(ID, name) DML_KERNEL_##ID,
    DML_KERNEL_LIST(DML_KERNEL_ID)
#undef DML_KERNEL_ID
        DML_KERNEL_COUNT
} dml_kernel_id;

/* A binding slot: the description's field name and its validated tensor
 * (tensor.present is false for an absent optional tensor). */
typedef struct dml_slot {
    const char* field;
    dml_tensor tensor;
} dml_slot;

struct DMLOperator {
    DMLDevice* device;
    DML_OPERATOR_TYPE type;
    const char* name; /* "MAX_POOLING2" */
    dml_kernel_id kernel;
    uint32_t input_count;
    uint32_t output_count;
    dml_slot inputs[DML_MAX_SLOTS];
    dml_slot outputs[DML_MAX_SLOTS];
    /* Family parameters (a struct of src/ops/<family>.h), owned; no pointers inside. */
    void* params;
    size_t params_size;
    /* The persistent resource: the OWNED_BY_DML inputs, each 256-aligned at
     * its offset (laid out and checked by dmlCreateOperator). */
    uint64_t persistent_size;
    uint64_t persistent_offsets[DML_MAX_SLOTS];
};

/* CPU instruction-set levels, each including the ones before it. An
 * implementation names the level it needs; a device runs those at or below
 * its level (detected once per process, capped by DML_CPU_ISA and
 * DML_DEVICE_DESC.MaxCpuIsa). */
typedef enum dml_isa {
    DML_ISA_GENERIC = 0, /* any x86-64 (or other) CPU: plain C */
    DML_ISA_AVX2 = 1,    /* AVX2, FMA and F16C */
    DML_ISA_AVX512 = 2,  /* AVX-512 F, BW, VL and DQ */
} dml_isa;

typedef struct dml_impl dml_impl;

/* What an implementation decided at compile time for one problem. Immutable
 * once compiled, so concurrent dispatches share it. */
typedef struct dml_plan {
    const dml_impl* impl;
    uint64_t temporary_size; /* bytes of TemporaryResource each dispatch needs */
    void* state;             /* the implementation's own precomputed data (dml_plan_state), or NULL */
} dml_plan;

/* What an implementation's run step receives: the operator, its plan and the
 * address of every slot's data (Buffer + Offset; NULL for an absent optional
 * tensor) and of the temporary resource (NULL when the plan needs none). */
typedef struct dml_kernel_args {
    const DMLOperator* op;
    const dml_plan* plan;
    void* inputs[DML_MAX_SLOTS];
    void* outputs[DML_MAX_SLOTS];
    void* temporary;
    DML_EXECUTION_FLAGS flags;
    const DMLDevice* device;
} dml_kernel_args;

/* Run steps never validate: everything was checked and planned before. They
 * return S_OK, or a backend error for a fault. */
typedef HRESULT (*dml_kernel_fn)(const dml_kernel_args* args);

/* A plan step: S_OK when the implementation takes the problem (having filled
 * plan->temporary_size and plan->state as it needs), S_FALSE when it declines
 * it, or a failure (E_OUTOFMEMORY). It reads the operator, the device
 * (threads, ISA) and the execution flags, never data. */
typedef HRESULT (*dml_plan_fn)(const DMLOperator* op, const DMLDevice* device, DML_EXECUTION_FLAGS flags,
                               dml_plan* plan);

/* One entry of a backend's ordered implementation list for a kernel. */
struct dml_impl {
    const char* name; /* "<kernel>/<isa>/<layout>", e.g. "max_pooling/avx2/nchw" */
    dml_isa isa;      /* the CPU level it needs (DML_ISA_GENERIC on CUDA) */
    dml_plan_fn plan; /* NULL: takes every problem, needs no state and no workspace */
    dml_kernel_fn run;
};

/* Allocates the plan's zeroed state of `size` bytes (freed with the compiled
 * operator); NULL when out of memory. */
void* dml_plan_state(dml_plan* plan, size_t size);

/* The plan state of the implementation that runs, as its own type. */
#define DML_PLAN_STATE(args, type) ((const type*)(args)->plan->state)

typedef struct dml_backend {
    const char* name; /* "cpu", "cuda" */
    HRESULT (*create)(DMLDevice* device, const DML_DEVICE_DESC* desc);
    void (*destroy)(DMLDevice* device);
    HRESULT (*allocate)(DMLDevice* device, uint64_t size, void** buffer);
    void (*free)(DMLDevice* device, void* buffer);
    HRESULT (*upload)(DMLDevice* device, void* device_dst, const void* host_src, uint64_t size);
    HRESULT (*download)(DMLDevice* device, void* host_dst, const void* device_src, uint64_t size);
    HRESULT (*copy)(DMLDevice* device, void* device_dst, const void* device_src, uint64_t size);
    HRESULT (*fill)(DMLDevice* device, void* device_dst, int byte_value, uint64_t size);
    HRESULT (*synchronize)(DMLDevice* device);
    /* Per kernel, the implementations in order of preference, NULL-terminated;
     * the generic strided one last. NULL: the kernel is not on this backend. */
    const dml_impl* const* impls[DML_KERNEL_COUNT];
} dml_backend;

/* The backend of a DML_BACKEND value, or NULL when this libdml has none
 * (src/backends.c). */
const dml_backend* dml_backend_find(DML_BACKEND kind);

/* ---- The operator registry (defined by src/ops/registry.c) ---- */
typedef HRESULT (*dml_op_create_fn)(DMLOperator* op, const void* desc);

typedef struct dml_op_info {
    DML_OPERATOR_TYPE type;
    const char* name;             /* without the DML_OPERATOR_ prefix */
    DML_FEATURE_LEVEL introduced; /* the first feature level that has it */
    dml_op_create_fn create;      /* validates a description and fills the DMLOperator */
} dml_op_info;

/* The registry entry of an operator type, or NULL. */
const dml_op_info* dml_op_info_find(DML_OPERATOR_TYPE type);

/* Copies a family's parameter struct (no pointers inside) into the operator. */
HRESULT dml_op_set_params(DMLOperator* op, const void* params, size_t size);

/* The removed reason is atomic: any thread may remove the device while others
 * query it. C++ (the CUDA backend) sees std::atomic of the same size and
 * alignment (checked below); only C code (src/core/device.c) touches it. */
#ifdef __cplusplus
typedef std::atomic<HRESULT> dml_atomic_hresult;
typedef std::atomic<uint32_t> dml_atomic_u32;
static_assert(sizeof(dml_atomic_hresult) == sizeof(HRESULT) && alignof(dml_atomic_hresult) == alignof(HRESULT),
              "C and C++ must agree on the layout of struct DMLDevice");
static_assert(sizeof(dml_atomic_u32) == sizeof(uint32_t) && alignof(dml_atomic_u32) == alignof(uint32_t),
              "C and C++ must agree on the layout of struct DMLDevice");
#else
typedef _Atomic HRESULT dml_atomic_hresult;
typedef _Atomic uint32_t dml_atomic_u32;
_Static_assert(sizeof(dml_atomic_hresult) == sizeof(HRESULT) && _Alignof(dml_atomic_hresult) == _Alignof(HRESULT),
               "C and C++ must agree on the layout of struct DMLDevice");
_Static_assert(sizeof(dml_atomic_u32) == sizeof(uint32_t) && _Alignof(dml_atomic_u32) == _Alignof(uint32_t),
               "C and C++ must agree on the layout of struct DMLDevice");
#endif

struct DMLDevice {
    const dml_backend* backend;
    DML_BACKEND backend_kind;
    DML_FEATURE_LEVEL feature_level;
    uint32_t threads;                    /* CPU worker threads (>= 1) */
    dml_isa cpu_isa;                     /* CPU implementations up to this level may run */
    uint32_t roi_align_samples_per_axis; /* DML_DEVICE_DESC.RoiAlignMaxSamplesPerAxis, resolved */
    void* backend_state;                 /* owned by the backend */
    dml_atomic_hresult removed_reason;   /* S_OK while healthy */
    dml_atomic_u32 references;           /* the caller's, plus one per (compiled) operator */
};

/* References of operators and compiled operators: the device is destroyed
 * when the last of them and the caller's (dmlReleaseDevice) are released. */
void dml_device_retain(DMLDevice* device);
void dml_device_release(DMLDevice* device);

/* Puts the device into the removed state (spec tensors.md §7.3) and returns
 * DXGI_ERROR_DEVICE_REMOVED with a message naming what failed, followed by
 * the last message recorded (the cause, e.g. CUDA's error string) if any. */
HRESULT dml_device_remove(DMLDevice* device, HRESULT reason, const char* what);

/* Clears the last message; fails for a NULL or removed device. */
HRESULT dml_check_device_usable(const DMLDevice* device, const char* function);

#ifdef __cplusplus
}
#endif

#endif
