/*
 * dml.h — the libdml API: DirectML's operator lifecycle as plain C functions.
 *
 *   dmlCreateDevice        ~ DMLCreateDevice1
 *   dmlCreateOperator      ~ IDMLDevice::CreateOperator    (validates, deep-copies)
 *   dmlCompileOperator     ~ IDMLDevice::CompileOperator   (chooses kernels)
 *   dmlGetBindingProperties~ IDMLDispatchable::GetBindingProperties
 *   dmlInitializeOperator  ~ IDMLOperatorInitializer + RecordDispatch
 *   dmlDispatch            ~ IDMLBindingTable::Bind* + RecordDispatch
 *
 * Every function returns an HRESULT (or nothing for releases); nothing
 * aborts on bad input. After a failure, dmlGetLastErrorMessage() explains it,
 * naming the operator, the field and the violated rule.
 *
 * Buffers are addresses in the device's memory: host memory on the CPU
 * backend (any malloc'ed memory may be bound), CUDA device memory on the CUDA
 * backend (dmlAllocateBuffer's or the caller's cudaMalloc'ed memory).
 */
#ifndef DML_DML_H
#define DML_DML_H

#include <stddef.h>

#include "dml_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* libdml's version: the one place it is set (CMakeLists.txt, the .deb and the
 * pkg-config and CMake package files read it from here). */
#define DML_VERSION_MAJOR 0
#define DML_VERSION_MINOR 1
#define DML_VERSION_PATCH 0

/* Opaque handles. */
typedef struct DMLDevice DMLDevice;
typedef struct DMLOperator DMLOperator;
typedef struct DMLCompiledOperator DMLCompiledOperator;

typedef enum DML_BACKEND {
    DML_BACKEND_CPU = 0, /* all cores, SIMD; always available */
    DML_BACKEND_CUDA = 1 /* NVIDIA GPUs; only when libdml was built with CUDA */
} DML_BACKEND;

/* CPU instruction-set levels for DML_DEVICE_DESC.MaxCpuIsa, like oneDNN's
 * ONEDNN_MAX_CPU_ISA: implementations that need more than the level are not
 * chosen. DEFAULT: the most the machine has, capped by the environment
 * variable DML_CPU_ISA=generic|avx2|avx512 when it is set. */
typedef enum DML_CPU_ISA {
    DML_CPU_ISA_DEFAULT = 0,
    DML_CPU_ISA_GENERIC = 1, /* plain C, any x86-64 */
    DML_CPU_ISA_AVX2 = 2,    /* AVX2 + FMA + F16C */
    DML_CPU_ISA_AVX512 = 3   /* AVX-512 F/BW/VL/DQ */
} DML_CPU_ISA;

typedef struct DML_DEVICE_DESC {
    DML_BACKEND Backend;
    DML_CREATE_DEVICE_FLAGS Flags;
    /* The feature level the device behaves as; 0 means the highest libdml
     * supports. Operators, data types and dimension counts introduced after
     * it are rejected by dmlCreateOperator, as DirectML at that level would. */
    DML_FEATURE_LEVEL FeatureLevel;
    UINT ThreadCount;      /* CPU: worker threads; 0 = all cores (at most DML_MAX_THREAD_COUNT) */
    void* CudaStream;      /* CUDA: a cudaStream_t to dispatch on; NULL = the device's own */
    INT CudaDeviceOrdinal; /* CUDA: which GPU */
    DML_CPU_ISA MaxCpuIsa; /* CPU: the highest instruction set kernels may use (see DML_CPU_ISA) */
    /* ROI_ALIGN, ROI_ALIGN1, ROI_ALIGN_GRAD: the most samples per output
     * element along each axis, the bound of their cost and precision
     * (docs/operators/roi_align.md). 0 = DML_ROI_ALIGN_DEFAULT_SAMPLES_PER_AXIS;
     * at most DML_ROI_ALIGN_MAX_SAMPLES_PER_AXIS. */
    UINT RoiAlignMaxSamplesPerAxis;
} DML_DEVICE_DESC;

/* The most CPU worker threads a device may ask for: larger values are
 * E_INVALIDARG (OpenMP runtimes abort the process when they cannot create
 * the threads); 0 (all cores) takes at most this many. */
#define DML_MAX_THREAD_COUNT 1024u

#define DML_ROI_ALIGN_DEFAULT_SAMPLES_PER_AXIS 4096u /* 2^24 samples per output element */
#define DML_ROI_ALIGN_MAX_SAMPLES_PER_AXIS 65536u    /* 2^32 samples per output element */

/* Everything bound for one dispatch, in DirectML's slot order (spec
 * tensors.md §6.1): one entry per input slot and per output slot, absent
 * optional tensors included (DML_BINDING_TYPE_NONE). */
typedef struct DML_DISPATCH_BINDINGS {
    UINT InputCount;
    const DML_BINDING_DESC* Inputs;
    UINT OutputCount;
    const DML_BINDING_DESC* Outputs;
    DML_BINDING_DESC TemporaryResource;  /* NONE when TemporaryResourceSize is 0 */
    DML_BINDING_DESC PersistentResource; /* NONE when PersistentResourceSize is 0 */
} DML_DISPATCH_BINDINGS;

/* ---- Version and messages ---- */
const char* dmlGetVersionString(void);
/* The message of the last failed call on this thread ("" if none). */
const char* dmlGetLastErrorMessage(void);
/* "E_INVALIDARG", "S_OK", ...; "unknown HRESULT" for others. */
const char* dmlStatusName(HRESULT status);

/* ---- Device ---- */
/* desc may be NULL: CPU backend, highest feature level, all cores.
 * A FeatureLevel above what libdml supports gives DXGI_ERROR_UNSUPPORTED. */
HRESULT dmlCreateDevice(const DML_DEVICE_DESC* desc, DMLDevice** device);
/* Releases the caller's reference: the device lives on while operators or
 * compiled operators created on it do (as in DirectML), so the release
 * order of a device and its children does not matter. */
void dmlReleaseDevice(DMLDevice* device);
/* S_OK while healthy; the cause once the device is removed (spec §7.3). */
HRESULT dmlGetDeviceRemovedReason(const DMLDevice* device);
/* IDMLDevice::CheckFeatureSupport, same queries and answers. */
HRESULT dmlCheckFeatureSupport(const DMLDevice* device, DML_FEATURE feature, UINT featureQueryDataSize,
                               const void* featureQueryData, UINT featureSupportDataSize, void* featureSupportData);
DML_BACKEND dmlGetDeviceBackend(const DMLDevice* device);
/* The instruction set the device's CPU implementations may use: the
 * machine's, capped by DML_CPU_ISA and MaxCpuIsa (GENERIC for NULL). */
DML_CPU_ISA dmlGetDeviceCpuIsa(const DMLDevice* device);

/* ---- Buffers in the device's memory ---- */
HRESULT dmlAllocateBuffer(DMLDevice* device, UINT64 sizeInBytes, void** buffer);
void dmlFreeBuffer(DMLDevice* device, void* buffer);
HRESULT dmlUpload(DMLDevice* device, void* deviceDst, const void* hostSrc, UINT64 sizeInBytes);
HRESULT dmlDownload(DMLDevice* device, void* hostDst, const void* deviceSrc, UINT64 sizeInBytes);
HRESULT dmlFill(DMLDevice* device, void* deviceDst, int byteValue, UINT64 sizeInBytes);
/* Waits for all work dispatched on the device. */
HRESULT dmlSynchronize(DMLDevice* device);

/* ---- Operators ---- */
HRESULT dmlCreateOperator(DMLDevice* device, const DML_OPERATOR_DESC* desc, DMLOperator** op);
void dmlReleaseOperator(DMLOperator* op);
/* Number of input and output binding slots of an operator (spec §6.1). */
HRESULT dmlGetOperatorSlotCounts(const DMLOperator* op, UINT* inputCount, UINT* outputCount);

HRESULT dmlCompileOperator(DMLDevice* device, const DMLOperator* op, DML_EXECUTION_FLAGS flags,
                           DMLCompiledOperator** compiled);
void dmlReleaseCompiledOperator(DMLCompiledOperator* compiled);
HRESULT dmlGetBindingProperties(const DMLCompiledOperator* compiled, DML_BINDING_PROPERTIES* properties);

/* What dmlCompileOperator chose: the first implementation of the backend's
 * ordered list that accepted the problem, and the resources it needs. */
typedef struct DML_COMPILED_OPERATOR_INFO {
    /* "<kernel>/<isa>/<layout>", e.g. "max_pooling/avx2/nchw" or
     * "max_pooling/generic"; valid while the compiled operator lives. */
    const char* ImplementationName;
    UINT64 TemporaryResourceSize;  /* as dmlGetBindingProperties reports */
    UINT64 PersistentResourceSize; /* likewise */
} DML_COMPILED_OPERATOR_INFO;
HRESULT dmlGetCompiledOperatorInfo(const DMLCompiledOperator* compiled, DML_COMPILED_OPERATOR_INFO* info);

/* Captures OWNED_BY_DML inputs into the persistent resource. inputs holds
 * one entry per input slot (only OWNED_BY_DML tensors are bound, others are
 * NONE) and may be NULL with inputCount 0 when there are none. persistent is
 * NONE (or NULL) when PersistentResourceSize is 0. Must be called once before
 * the first dispatch of an operator whose PersistentResourceSize is not 0. */
HRESULT dmlInitializeOperator(DMLCompiledOperator* compiled, UINT inputCount, const DML_BINDING_DESC* inputs,
                              const DML_BINDING_DESC* persistent);

/* Validates every binding (count, type, size, alignment, overlap; spec T-8),
 * then runs the operator. A TemporaryResource of at least
 * TemporaryResourceSize bytes (Offset a multiple of
 * DML_TEMPORARY_BUFFER_ALIGNMENT) is bound when that size is not 0; its
 * contents need not survive between dispatches, and dispatches that may run
 * at the same time need one each. On failure nothing is written. May return before
 * the work completes (CUDA); dmlSynchronize waits for it. */
HRESULT dmlDispatch(DMLCompiledOperator* compiled, const DML_DISPATCH_BINDINGS* bindings);

/* ---- Helpers ---- */
/* DMLCalcBufferTensorSize with 64-bit arithmetic (spec tensors.md §4);
 * 0 for an unknown data type or on overflow. */
UINT64 DMLCalcBufferTensorSize(DML_TENSOR_DATA_TYPE dataType, UINT dimensionCount, const UINT* sizes,
                               const UINT* strides);
/* Bytes per element; 0 for UNKNOWN and the sub-byte types. */
UINT dmlDataTypeSize(DML_TENSOR_DATA_TYPE dataType);
/* "FLOAT32", ...; NULL for an unknown value. */
const char* dmlDataTypeName(DML_TENSOR_DATA_TYPE dataType);
/* "MAX_POOLING2", ...; NULL for an operator libdml does not know. */
const char* dmlOperatorTypeName(DML_OPERATOR_TYPE type);

#ifdef __cplusplus
}
#endif

#endif /* DML_DML_H */
