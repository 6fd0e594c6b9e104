/* The CUDA backend: buffers are CUDA device memory (dmlAllocateBuffer's or
 * the caller's cudaMalloc'ed memory), and every copy, fill and kernel runs in
 * order on one stream per device: the caller's DML_DEVICE_DESC.CudaStream or
 * a stream the device creates.
 *
 * Synchronization: dmlDispatch, dmlFill and the copies of dmlInitializeOperator
 * are asynchronous; dmlUpload and dmlDownload return once their copy has
 * completed (the host memory may be reused or read at once); dmlSynchronize
 * waits for everything queued on the stream.
 *
 * Errors: every CUDA error becomes a status with CUDA's own message. A lack
 * of memory (E_OUTOFMEMORY) or an invalid address (E_INVALIDARG) in a buffer
 * call leaves the device usable; any other error (a fault of asynchronous
 * work, a lost GPU) and every failure of a dispatch put the device into the
 * removed state (spec tensors.md §7.3). Nothing aborts. */
#include <stdio.h>
#include <stdlib.h>

#include "../backends.h"
#include "cuda.h"

/* ---- Shared helpers (cuda.h) ---- */

dml_cuda_device_guard::dml_cuda_device_guard(const DMLDevice* device) {
    int wanted = dml_cuda_state(device)->ordinal;
    status_ = cudaGetDevice(&previous_);
    if (status_ == cudaSuccess && previous_ != wanted) {
        status_ = cudaSetDevice(wanted);
        switched_ = status_ == cudaSuccess;
    }
    /* A stale error of the caller's earlier CUDA calls on this thread must not
     * be taken for ours (the check after a launch reads the last error). */
    if (status_ == cudaSuccess) (void)cudaGetLastError();
}

dml_cuda_device_guard::~dml_cuda_device_guard() {
    if (switched_) (void)cudaSetDevice(previous_);
}

/* Records "<what>: <CUDA's message> (<error name>)" and resets CUDA's last
 * error unless it is sticky (then it stays, and so does the removal). */
static HRESULT record_cuda_error(HRESULT status, cudaError_t error, const char* what) {
    (void)cudaGetLastError();
    return dml_fail(status, "%s: %s (%s)", what, cudaGetErrorString(error), cudaGetErrorName(error));
}

HRESULT dml_cuda_kernel_error(cudaError_t error, const char* what) {
    HRESULT status = error == cudaErrorMemoryAllocation ? E_OUTOFMEMORY : DXGI_ERROR_DRIVER_INTERNAL_ERROR;
    return record_cuda_error(status, error, what);
}

HRESULT dml_cuda_check_launch(const char* kernel_name) {
    cudaError_t error = cudaGetLastError();
    if (error == cudaSuccess) return S_OK;
    char what[160];
    snprintf(what, sizeof what, "CUDA kernel %s", kernel_name);
    return dml_cuda_kernel_error(error, what);
}

unsigned dml_cuda_blocks(const dml_kernel_args* args, uint64_t count, unsigned threads) {
    uint64_t needed = (count + threads - 1) / threads;
    uint64_t enough = (uint64_t)dml_cuda_state(args->device)->multiprocessors * 16;
    uint64_t blocks = needed < enough ? needed : enough;
    return blocks ? (unsigned)blocks : 1;
}

/* ---- Device methods ---- */

#define DML_STRINGIFY_(x) #x
#define DML_STRINGIFY(x) DML_STRINGIFY_(x)
/* "13.0": the toolkit whose static runtime is linked in (nvcc's version). */
#define DML_CUDA_RUNTIME_NAME DML_STRINGIFY(__CUDACC_VER_MAJOR__) "." DML_STRINGIFY(__CUDACC_VER_MINOR__)

/* A failed CUDA call of a device method (function is the libdml function,
 * call the CUDA call). */
static HRESULT device_error(DMLDevice* device, cudaError_t error, const char* function, const char* call) {
    char what[160];
    snprintf(what, sizeof what, "%s: %s failed", function, call);
    switch (error) {
    case cudaErrorMemoryAllocation: return record_cuda_error(E_OUTOFMEMORY, error, what);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection: return record_cuda_error(E_INVALIDARG, error, what);
    default:
        record_cuda_error(DXGI_ERROR_DRIVER_INTERNAL_ERROR, error, call);
        return dml_device_remove(device, DXGI_ERROR_DRIVER_INTERNAL_ERROR, function);
    }
}

static HRESULT cuda_create(DMLDevice* device, const DML_DEVICE_DESC* desc) {
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    /* The CUDA runtime is linked in statically and loads the driver here: on
     * a machine without one, this is the first and only CUDA call. */
    if (error == cudaErrorInsufficientDriver)
        return record_cuda_error(DXGI_ERROR_UNSUPPORTED, error,
                                 "dmlCreateDevice: no usable CUDA device: the NVIDIA driver (libcuda.so.1) is missing "
                                 "or older than the CUDA " DML_CUDA_RUNTIME_NAME " runtime libdml was built with "
                                 "(the CPU backend needs no CUDA)");
    if (error != cudaSuccess)
        return record_cuda_error(DXGI_ERROR_UNSUPPORTED, error, "dmlCreateDevice: no usable CUDA device");
    if (desc->CudaDeviceOrdinal < 0 || desc->CudaDeviceOrdinal >= count)
        return dml_fail(E_INVALIDARG,
                        "dmlCreateDevice: CudaDeviceOrdinal is %d but must be >= 0 and < %d (the "
                        "number of CUDA devices)",
                        (int)desc->CudaDeviceOrdinal, count);

    dml_cuda_device* state = (dml_cuda_device*)calloc(1, sizeof *state);
    if (state == NULL) return dml_fail(E_OUTOFMEMORY, "dmlCreateDevice: out of memory");
    state->ordinal = desc->CudaDeviceOrdinal;
    device->backend_state = state;
    device->threads = 1;
    HRESULT status = S_OK;
    {
        dml_cuda_device_guard guard(device);
        error = guard.status();
        if (error == cudaSuccess)
            error = cudaDeviceGetAttribute(&state->multiprocessors, cudaDevAttrMultiProcessorCount, state->ordinal);
        if (error != cudaSuccess) {
            status = record_cuda_error(DXGI_ERROR_UNSUPPORTED, error, "dmlCreateDevice: the CUDA device is not usable");
        } else if (desc->CudaStream != NULL) {
            /* Work queued on the caller's stream before a dispatch completes
             * before it; the caller synchronizes the stream as it likes. */
            state->stream = (cudaStream_t)desc->CudaStream;
#if CUDART_VERSION >= 12080 /* cudaStreamGetDevice */
            int stream_device = -1;
            if (cudaStreamGetDevice(state->stream, &stream_device) == cudaSuccess && stream_device != state->ordinal)
                status = dml_fail(E_INVALIDARG,
                                  "dmlCreateDevice: CudaStream belongs to CUDA device %d but "
                                  "CudaDeviceOrdinal is %d",
                                  stream_device, state->ordinal);
            (void)cudaGetLastError();
#endif
        } else {
            /* A blocking stream: it waits for the legacy default stream, so
             * data the caller copied with plain cudaMemcpy is ready. */
            error = cudaStreamCreateWithFlags(&state->stream, cudaStreamDefault);
            if (error != cudaSuccess)
                status = record_cuda_error(error == cudaErrorMemoryAllocation ? E_OUTOFMEMORY : DXGI_ERROR_UNSUPPORTED,
                                           error, "dmlCreateDevice: cudaStreamCreate failed");
            else
                state->owns_stream = true;
        }
    }
    if (FAILED(status)) {
        free(state);
        device->backend_state = NULL;
    }
    return status;
}

static void cuda_destroy(DMLDevice* device) {
    dml_cuda_device* state = dml_cuda_state(device);
    if (state == NULL) return;
    if (state->owns_stream) {
        dml_cuda_device_guard guard(device);
        /* Queued work still completes: CUDA releases the stream after it. */
        (void)cudaStreamDestroy(state->stream);
        (void)cudaGetLastError();
    }
    free(state);
    device->backend_state = NULL;
}

static HRESULT cuda_allocate(DMLDevice* device, uint64_t size, void** buffer) {
    dml_cuda_device_guard guard(device);
    if (guard.status() != cudaSuccess)
        return device_error(device, guard.status(), "dmlAllocateBuffer", "cudaSetDevice");
    cudaError_t error = cudaMalloc(buffer, size);
    if (error != cudaSuccess) {
        *buffer = NULL;
        char call[64];
        snprintf(call, sizeof call, "cudaMalloc(%llu bytes)", (unsigned long long)size);
        return device_error(device, error, "dmlAllocateBuffer", call);
    }
    return S_OK;
}

static void cuda_free(DMLDevice* device, void* buffer) {
    dml_cuda_device_guard guard(device);
    /* cudaFree waits for the work that may still use the buffer. */
    (void)cudaFree(buffer);
    (void)cudaGetLastError();
}

/* Copies on the device's stream; wait says whether to wait for completion. */
static HRESULT stream_copy(DMLDevice* device, void* dst, const void* src, uint64_t size, cudaMemcpyKind kind, bool wait,
                           const char* function) {
    dml_cuda_device_guard guard(device);
    if (guard.status() != cudaSuccess) return device_error(device, guard.status(), function, "cudaSetDevice");
    cudaStream_t stream = dml_cuda_state(device)->stream;
    cudaError_t error = cudaMemcpyAsync(dst, src, size, kind, stream);
    if (error != cudaSuccess) return device_error(device, error, function, "cudaMemcpyAsync");
    if (wait) {
        error = cudaStreamSynchronize(stream);
        if (error != cudaSuccess) return device_error(device, error, function, "cudaStreamSynchronize");
    }
    return S_OK;
}

/* Waits for the copy: the caller may reuse the host memory at once (and
 * pinned host memory would otherwise still be read after the return). */
static HRESULT cuda_upload(DMLDevice* device, void* device_dst, const void* host_src, uint64_t size) {
    return stream_copy(device, device_dst, host_src, size, cudaMemcpyHostToDevice, true, "dmlUpload");
}

/* Waits for the copy, and so for all work queued before it: the host data is ready. */
static HRESULT cuda_download(DMLDevice* device, void* host_dst, const void* device_src, uint64_t size) {
    return stream_copy(device, host_dst, device_src, size, cudaMemcpyDeviceToHost, true, "dmlDownload");
}

static HRESULT cuda_copy(DMLDevice* device, void* device_dst, const void* device_src, uint64_t size) {
    return stream_copy(device, device_dst, device_src, size, cudaMemcpyDeviceToDevice, false, "dmlInitializeOperator");
}

static HRESULT cuda_fill(DMLDevice* device, void* device_dst, int byte_value, uint64_t size) {
    dml_cuda_device_guard guard(device);
    if (guard.status() != cudaSuccess) return device_error(device, guard.status(), "dmlFill", "cudaSetDevice");
    cudaError_t error = cudaMemsetAsync(device_dst, byte_value, size, dml_cuda_state(device)->stream);
    if (error != cudaSuccess) return device_error(device, error, "dmlFill", "cudaMemsetAsync");
    return S_OK;
}

static HRESULT cuda_synchronize(DMLDevice* device) {
    dml_cuda_device_guard guard(device);
    cudaError_t error = guard.status();
    if (error == cudaSuccess) error = cudaStreamSynchronize(dml_cuda_state(device)->stream);
    if (error == cudaSuccess) return S_OK;
    /* A fault of asynchronous work shows here: the device is removed whatever
     * the error (dispatched work failed). */
    record_cuda_error(DXGI_ERROR_DRIVER_INTERNAL_ERROR, error, "cudaStreamSynchronize failed");
    return dml_device_remove(device, DXGI_ERROR_DRIVER_INTERNAL_ERROR, "dmlSynchronize");
}

/* ---- The backend ---- */

/* Per kernel, the implementations in order of preference (as on the CPU,
 * cpu_impl_list.c); the generic strided one, last, takes every problem. */
constexpr const dml_impl* max_pooling_impls[] = {&dml_cuda_max_pooling_nchw, &dml_cuda_max_pooling_nhwc,
                                                 &dml_cuda_max_pooling_generic, nullptr};
constexpr const dml_impl* max_pooling_grad_impls[] = {&dml_cuda_max_pooling_grad_nchw, &dml_cuda_max_pooling_grad_nhwc,
                                                      &dml_cuda_max_pooling_grad_generic, nullptr};
constexpr const dml_impl* roi_pooling_impls[] = {&dml_cuda_roi_pooling_staged_nchw, &dml_cuda_roi_pooling_staged_nhwc,
                                                 &dml_cuda_roi_pooling_nchw,        &dml_cuda_roi_pooling_nhwc,
                                                 &dml_cuda_roi_pooling_generic,     nullptr};
constexpr const dml_impl* roi_align_impls[] = {&dml_cuda_roi_align_staged_nchw, &dml_cuda_roi_align_nchw,
                                               &dml_cuda_roi_align_nhwc, &dml_cuda_roi_align_generic, nullptr};
constexpr const dml_impl* roi_align_grad_impls[] = {&dml_cuda_roi_align_grad_nchw, &dml_cuda_roi_align_grad_nhwc,
                                                    &dml_cuda_roi_align_grad_generic, nullptr};
constexpr const dml_impl* batch_normalization_impls[] = {&dml_cuda_batch_normalization_nchw,
                                                         &dml_cuda_batch_normalization_nhwc,
                                                         &dml_cuda_batch_normalization_generic, nullptr};
constexpr const dml_impl* batch_normalization_training_impls[] = {
    &dml_cuda_batch_normalization_training_nchw, &dml_cuda_batch_normalization_training_nhwc,
    &dml_cuda_batch_normalization_training_generic, nullptr};
constexpr const dml_impl* batch_normalization_grad_impls[] = {&dml_cuda_batch_normalization_grad_nchw,
                                                              &dml_cuda_batch_normalization_grad_nhwc,
                                                              &dml_cuda_batch_normalization_grad_generic, nullptr};
constexpr const dml_impl* batch_normalization_training_grad_impls[] = {
    &dml_cuda_batch_normalization_training_grad_nchw, &dml_cuda_batch_normalization_training_grad_nhwc,
    &dml_cuda_batch_normalization_training_grad_generic, nullptr};

static constexpr dml_backend make_cuda_backend() {
    dml_backend backend{};
    backend.name = "cuda";
    backend.create = cuda_create;
    backend.destroy = cuda_destroy;
    backend.allocate = cuda_allocate;
    backend.free = cuda_free;
    backend.upload = cuda_upload;
    backend.download = cuda_download;
    backend.copy = cuda_copy;
    backend.fill = cuda_fill;
    backend.synchronize = cuda_synchronize;
#define DML_CUDA_IMPLS(ID, name) backend.impls[DML_KERNEL_##ID] = name##_impls;
    DML_KERNEL_LIST(DML_CUDA_IMPLS)
#undef DML_CUDA_IMPLS
    return backend;
}

static constexpr dml_backend cuda_backend = make_cuda_backend();

const dml_backend* dml_cuda_backend(void) { return &cuda_backend; }
