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

/* One kernel per family variant; each backend fills a table indexed by it. */
typedef enum dml_kernel_id {
    DML_KERNEL_MAX_POOLING,
    DML_KERNEL_MAX_POOLING_GRAD,
    DML_KERNEL_ROI_POOLING,
    DML_KERNEL_ROI_ALIGN,
    DML_KERNEL_ROI_ALIGN_GRAD,
    DML_KERNEL_BATCH_NORMALIZATION,
    DML_KERNEL_BATCH_NORMALIZATION_TRAINING,
    DML_KERNEL_BATCH_NORMALIZATION_GRAD,
    DML_KERNEL_BATCH_NORMALIZATION_TRAINING_GRAD,
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
};

/* What a kernel receives: the operator and the address of every slot's data
 * (Buffer + Offset; NULL for an absent optional tensor). */
typedef struct dml_kernel_args {
    const DMLOperator* op;
    void* inputs[DML_MAX_SLOTS];
    void* outputs[DML_MAX_SLOTS];
    DML_EXECUTION_FLAGS flags;
    const DMLDevice* device;
} dml_kernel_args;

/* Kernels never validate: everything was checked before. They return S_OK,
 * or E_OUTOFMEMORY / a backend error for resources they could not get. */
typedef HRESULT (*dml_kernel_fn)(const dml_kernel_args* args);

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
    dml_kernel_fn kernels[DML_KERNEL_COUNT]; /* NULL: not (yet) on this backend */
} dml_backend;

extern const dml_backend dml_cpu_backend;
/* The CUDA backend, or NULL when libdml was built without CUDA. */
const dml_backend* dml_cuda_backend(void);

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
    DML_FEATURE_LEVEL feature_level;
    DML_CREATE_DEVICE_FLAGS flags;
    uint32_t threads;                    /* CPU worker threads (>= 1) */
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
