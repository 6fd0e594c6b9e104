/* The CUDA backend's internals, shared by its .cu files.
 *
 * Adding a family to the CUDA backend: one src/cuda/<family>.cu with its
 * kernels and an implementation (dml_impl) per kernel id (declared below),
 * listed in cuda_backend.cu. A run step launches on dml_cuda_stream(args),
 * checks each launch with dml_cuda_check_launch("NAME"), takes scratch memory
 * from args->temporary (sized by its plan step), and never allocates or
 * synchronizes (dispatch is asynchronous). */
#ifndef DML_CUDA_CUDA_H
#define DML_CUDA_CUDA_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "../core/half.h"
#include "../core/operator.h"
#include "../core/status.h"

/* What the backend keeps per DMLDevice (DMLDevice.backend_state). */
typedef struct dml_cuda_device {
    int ordinal;         /* DML_DEVICE_DESC.CudaDeviceOrdinal */
    cudaStream_t stream; /* every copy, fill and kernel of the device runs here */
    bool owns_stream;    /* false: the caller's DML_DEVICE_DESC.CudaStream */
    int multiprocessors; /* sizes grid-stride launches */
} dml_cuda_device;

static inline dml_cuda_device* dml_cuda_state(const DMLDevice* device) {
    return (dml_cuda_device*)device->backend_state;
}

static inline cudaStream_t dml_cuda_stream(const dml_kernel_args* args) { return dml_cuda_state(args->device)->stream; }

/* Makes the device's GPU current on this thread for the guard's lifetime and
 * restores the caller's current GPU afterwards: libdml calls may come from any
 * thread, and the caller's own CUDA state is left as it was. */
class dml_cuda_device_guard {
  public:
    explicit dml_cuda_device_guard(const DMLDevice* device);
    ~dml_cuda_device_guard();
    dml_cuda_device_guard(const dml_cuda_device_guard&) = delete;
    dml_cuda_device_guard& operator=(const dml_cuda_device_guard&) = delete;
    /* cudaSuccess, or why the GPU could not be made current. */
    cudaError_t status() const { return status_; }

  private:
    int previous_ = -1;
    bool switched_ = false;
    cudaError_t status_ = cudaSuccess;
};

/* Records "<what>: <CUDA's message> (<error name>)" and returns the status a
 * kernel returns for it: E_OUTOFMEMORY for a lack of memory, otherwise
 * DXGI_ERROR_DRIVER_INTERNAL_ERROR (dmlDispatch then removes the device,
 * spec tensors.md §7.3). */
HRESULT dml_cuda_kernel_error(cudaError_t error, const char* what);

/* After each launch: S_OK, or the launch's error (dml_cuda_kernel_error). */
HRESULT dml_cuda_check_launch(const char* kernel_name);

/* Blocks for a grid-stride launch over `count` items with `threads` threads
 * per block: enough to fill every multiprocessor several times over, and
 * never more than the items need. */
unsigned dml_cuda_blocks(const dml_kernel_args* args, uint64_t count, unsigned threads);

/* Unrolled on the device (arrays indexed by the loop then stay in
 * registers); for host and device functions, which a host build replays. */
#ifdef __CUDA_ARCH__
#define DML_UNROLL _Pragma("unroll")
#else
#define DML_UNROLL
#endif

/* The blocks of `kernel` (`threads` threads, `shared_bytes` of dynamic
 * shared memory) that the device's multiprocessors hold at once: the grid of
 * a persistent kernel, whose blocks loop over tasks. With `cooperative`, 0
 * where the device cannot launch cooperatively (a grid-wide barrier needs
 * every block resident). 0 if a query fails: the plan then declines. */
template <class Kernel>
unsigned dml_cuda_resident_blocks(const DMLDevice* device, Kernel kernel, unsigned threads, size_t shared_bytes,
                                  bool cooperative = false) {
    dml_cuda_device_guard guard(device);
    int per_multiprocessor = 0, can_cooperate = 1;
    cudaError_t error = guard.status();
    if (error == cudaSuccess && cooperative)
        error = cudaDeviceGetAttribute(&can_cooperate, cudaDevAttrCooperativeLaunch, dml_cuda_state(device)->ordinal);
    if (error == cudaSuccess)
        error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, (int)threads, shared_bytes);
    if (error != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return can_cooperate ? (unsigned)per_multiprocessor * (unsigned)dml_cuda_state(device)->multiprocessors : 0;
}

/* The shared memory a block may opt in to on the device (above the 48 KB
 * default), or 0 if the query fails. */
static inline size_t dml_cuda_shared_optin(const DMLDevice* device) {
    dml_cuda_device_guard guard(device);
    int optin = 0;
    if (guard.status() != cudaSuccess || cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                                                dml_cuda_state(device)->ordinal) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (size_t)optin;
}

/* Lets `kernel` launch with as much dynamic shared memory as a block may opt
 * in to, less the kernel's static shared memory, and returns that amount (0
 * if a query fails: the plan then declines). The limit is a property of the
 * kernel, not of one compiled operator: every plan sets the same value, so
 * that compiling an operator that needs less never lowers the limit of one
 * compiled before it. */
template <class Kernel> size_t dml_cuda_allow_dynamic_shared(const DMLDevice* device, Kernel kernel) {
    const size_t optin = dml_cuda_shared_optin(device);
    dml_cuda_device_guard guard(device);
    cudaFuncAttributes attributes = {};
    if (optin == 0 || guard.status() != cudaSuccess || cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess ||
        attributes.sharedSizeBytes >= optin ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)(optin - attributes.sharedSizeBytes)) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return optin - attributes.sharedSizeBytes;
}

/* A 4-D tensor stored packed in NCHW order (the layout class of the
 * "<kernel>/cuda/nchw" fast paths). */
static inline bool dml_cuda_packed_nchw(const dml_tensor& t) {
    return t.rank == 4 && t.strides[3] == 1 && t.strides[2] == t.sizes[3] &&
           t.strides[1] == (uint64_t)t.sizes[2] * t.sizes[3] && t.strides[0] == (uint64_t)t.sizes[1] * t.strides[1];
}

/* A 4-D tensor stored packed channels-last (N, H, W, C in memory; the
 * layout class of the "<kernel>/cuda/nhwc" fast paths). */
static inline bool dml_cuda_packed_nhwc(const dml_tensor& t) {
    return t.rank == 4 && t.strides[1] == 1 && t.strides[3] == t.sizes[1] &&
           t.strides[2] == (uint64_t)t.sizes[3] * t.sizes[1] && t.strides[0] == (uint64_t)t.sizes[2] * t.strides[2];
}

/* A value as FLOAT32: binary16 bits by the GPU's exact conversion (every
 * binary16 value is a FLOAT32 value; the software dml_half_to_float gives the
 * same numbers, only slower). */
__device__ inline float dml_cuda_widen(float value) { return value; }
__device__ inline float dml_cuda_widen(uint16_t half) {
    float value;
    asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(half));
    return value;
}

/* A FLOAT32 result as T (FLOAT32 itself, or binary16 bits), with the bits
 * of dml_float_to_half (the CPU's) for every input. On the device the GPU's
 * cvt.rn.f16.f32, which rounds to nearest even exactly as dml_float_to_half
 * does for every number, infinities and subnormals included (checked for
 * all 2^32 inputs); a NaN keeps the software path, which keeps its payload
 * (the instruction returns the canonical NaN). The software path for all
 * took about 30 instructions an element. */
__host__ __device__ inline float dml_cuda_narrow(float value, float) { return value; }
__host__ __device__ inline uint16_t dml_cuda_narrow(float value, uint16_t) {
#ifdef __CUDA_ARCH__
    if (value != value) return dml_float_to_half(value);
    uint16_t bits;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));
    return bits;
#else
    return dml_float_to_half(value);
#endif
}

/* The indices threadIdx.x, + blockDim.x, ... of a row-major {outer, middle,
 * inner} range as their three coordinates, advanced without divisions (the
 * 32-bit divisions by run-time sizes would cost more than the max itself). */
struct dml_cuda_block_walker {
    uint32_t inner, middle, outer;
    uint32_t inner_size, middle_size;
    uint32_t inner_step, middle_step, outer_step;
    __device__ dml_cuda_block_walker(uint32_t inner_count, uint32_t middle_count)
        : inner(threadIdx.x % inner_count), middle(threadIdx.x / inner_count % middle_count),
          outer(threadIdx.x / inner_count / middle_count), inner_size(inner_count), middle_size(middle_count),
          inner_step(blockDim.x % inner_count), middle_step(blockDim.x / inner_count % middle_count),
          outer_step(blockDim.x / inner_count / middle_count) {}
    __device__ void next() { /* each coordinate stays below twice its size: one carry at most */
        inner += inner_step;
        uint32_t carry = inner >= inner_size;
        inner -= carry ? inner_size : 0;
        middle += middle_step + carry;
        carry = middle >= middle_size;
        middle -= carry ? middle_size : 0;
        outer += outer_step + carry;
    }
};

/* ---- Implementations (one .cu per family) and their lists (cuda_backend.cu) ---- */
#define DML_CUDA_GENERIC_IMPL(ID, name) extern const dml_impl dml_cuda_##name##_generic;
DML_KERNEL_LIST(DML_CUDA_GENERIC_IMPL)
#undef DML_CUDA_GENERIC_IMPL
/* Fast paths, before the generic ones in their lists. */
extern const dml_impl dml_cuda_max_pooling_nchw;
extern const dml_impl dml_cuda_max_pooling_grad_nchw;
extern const dml_impl dml_cuda_max_pooling_nhwc;
extern const dml_impl dml_cuda_max_pooling_grad_nhwc;
extern const dml_impl dml_cuda_roi_align_nchw;
extern const dml_impl dml_cuda_roi_align_nhwc;
extern const dml_impl dml_cuda_roi_align_staged_nchw;
extern const dml_impl dml_cuda_roi_align_grad_nchw;
extern const dml_impl dml_cuda_roi_align_grad_nhwc;
extern const dml_impl dml_cuda_roi_pooling_nchw;
extern const dml_impl dml_cuda_roi_pooling_nhwc;
extern const dml_impl dml_cuda_roi_pooling_staged_nchw;
extern const dml_impl dml_cuda_roi_pooling_staged_nhwc;
extern const dml_impl dml_cuda_batch_normalization_nchw;
extern const dml_impl dml_cuda_batch_normalization_nhwc;
extern const dml_impl dml_cuda_batch_normalization_training_nchw;
extern const dml_impl dml_cuda_batch_normalization_training_nhwc;
extern const dml_impl dml_cuda_batch_normalization_grad_nchw;
extern const dml_impl dml_cuda_batch_normalization_grad_nhwc;
extern const dml_impl dml_cuda_batch_normalization_training_grad_nchw;
extern const dml_impl dml_cuda_batch_normalization_training_grad_nhwc;

#endif
