/*
 * dml_types.h — DirectML-compatible types for the operators libdml implements.
 *
 * Enum values, struct names, field order and field types follow directml.h
 * (DML_TARGET_VERSION 0x6400), so code that fills DirectML operator
 * descriptions compiles against libdml unchanged. The one deliberate
 * difference: DML_BUFFER_BINDING::Buffer is a plain address in the device's
 * memory (host memory on the CPU backend, CUDA device memory on the CUDA
 * backend) instead of an ID3D12Resource*.
 */
#ifndef DML_TYPES_H
#define DML_TYPES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The Windows-style names are guarded, so a program that already has them
 * (from its own Windows compatibility header, say) can include this one.
 * Define DML_WINDOWS_TYPES_DEFINED when your program already declares the
 * typedefs below; they must be the same sizes (HRESULT and BOOL 32-bit,
 * UINT64 64-bit), which the checks after them verify. A macro already
 * defined is kept as the program defined it. */
#ifndef DML_WINDOWS_TYPES_DEFINED
#define DML_WINDOWS_TYPES_DEFINED
typedef uint32_t UINT;
typedef int32_t INT;
typedef uint64_t UINT64;
typedef float FLOAT;
typedef int32_t BOOL;
typedef int32_t HRESULT;
#endif
#ifdef __cplusplus
#define DML_STATIC_ASSERT_ static_assert
#else
#define DML_STATIC_ASSERT_ _Static_assert
#endif
DML_STATIC_ASSERT_(sizeof(UINT) == 4 && sizeof(INT) == 4 && sizeof(UINT64) == 8 && sizeof(FLOAT) == 4,
                   "libdml: UINT, INT, UINT64 and FLOAT must have DirectML's sizes");
DML_STATIC_ASSERT_(sizeof(BOOL) == 4 && sizeof(HRESULT) == 4 && (HRESULT)-1 < 0,
                   "libdml: BOOL and HRESULT must be signed 32-bit integers, as in DirectML");
#undef DML_STATIC_ASSERT_

/* ---- HRESULT values (spec tensors.md §7.1) ---- */
#ifndef S_OK
#define S_OK ((HRESULT)0x00000000)
#endif
#ifndef S_FALSE
#define S_FALSE ((HRESULT)0x00000001)
#endif
#ifndef E_NOTIMPL
#define E_NOTIMPL ((HRESULT)0x80004001u)
#endif
#ifndef E_NOINTERFACE
#define E_NOINTERFACE ((HRESULT)0x80004002u)
#endif
#ifndef E_POINTER
#define E_POINTER ((HRESULT)0x80004003u)
#endif
#ifndef E_FAIL
#define E_FAIL ((HRESULT)0x80004005u)
#endif
#ifndef E_OUTOFMEMORY
#define E_OUTOFMEMORY ((HRESULT)0x8007000Eu)
#endif
#ifndef E_INVALIDARG
#define E_INVALIDARG ((HRESULT)0x80070057u)
#endif
#ifndef DXGI_ERROR_INVALID_CALL
#define DXGI_ERROR_INVALID_CALL ((HRESULT)0x887A0001u)
#endif
#ifndef DXGI_ERROR_UNSUPPORTED
#define DXGI_ERROR_UNSUPPORTED ((HRESULT)0x887A0004u)
#endif
#ifndef DXGI_ERROR_DEVICE_REMOVED
#define DXGI_ERROR_DEVICE_REMOVED ((HRESULT)0x887A0005u)
#endif
#ifndef DXGI_ERROR_DEVICE_HUNG
#define DXGI_ERROR_DEVICE_HUNG ((HRESULT)0x887A0006u)
#endif
#ifndef DXGI_ERROR_DEVICE_RESET
#define DXGI_ERROR_DEVICE_RESET ((HRESULT)0x887A0007u)
#endif
#ifndef DXGI_ERROR_DRIVER_INTERNAL_ERROR
#define DXGI_ERROR_DRIVER_INTERNAL_ERROR ((HRESULT)0x887A0020u)
#endif
#ifndef SUCCEEDED
#define SUCCEEDED(hr) (((HRESULT)(hr)) >= 0)
#endif
#ifndef FAILED
#define FAILED(hr) (((HRESULT)(hr)) < 0)
#endif

/* ---- Constants ---- */
#define DML_TENSOR_DIMENSION_COUNT_MAX 5
#define DML_TENSOR_DIMENSION_COUNT_MAX1 8
#define DML_TEMPORARY_BUFFER_ALIGNMENT 256
#define DML_PERSISTENT_BUFFER_ALIGNMENT 256
#define DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT 16

/* ---- Enumerations ---- */
typedef enum DML_TENSOR_DATA_TYPE {
    DML_TENSOR_DATA_TYPE_UNKNOWN = 0,
    DML_TENSOR_DATA_TYPE_FLOAT32 = 1,
    DML_TENSOR_DATA_TYPE_FLOAT16 = 2,
    DML_TENSOR_DATA_TYPE_UINT32 = 3,
    DML_TENSOR_DATA_TYPE_UINT16 = 4,
    DML_TENSOR_DATA_TYPE_UINT8 = 5,
    DML_TENSOR_DATA_TYPE_INT32 = 6,
    DML_TENSOR_DATA_TYPE_INT16 = 7,
    DML_TENSOR_DATA_TYPE_INT8 = 8,
    DML_TENSOR_DATA_TYPE_FLOAT64 = 9,
    DML_TENSOR_DATA_TYPE_UINT64 = 10,
    DML_TENSOR_DATA_TYPE_INT64 = 11,
    DML_TENSOR_DATA_TYPE_UINT4 = 12,
    DML_TENSOR_DATA_TYPE_INT4 = 13
} DML_TENSOR_DATA_TYPE;

typedef enum DML_TENSOR_TYPE { DML_TENSOR_TYPE_INVALID = 0, DML_TENSOR_TYPE_BUFFER = 1 } DML_TENSOR_TYPE;

typedef enum DML_TENSOR_FLAGS { DML_TENSOR_FLAG_NONE = 0x0, DML_TENSOR_FLAG_OWNED_BY_DML = 0x1 } DML_TENSOR_FLAGS;

/* The full DirectML enum is dense from 0; only the values libdml uses or
 * recognises are named here. */
typedef enum DML_OPERATOR_TYPE {
    DML_OPERATOR_INVALID = 0,
    DML_OPERATOR_ELEMENT_WISE_CLIP = 8,
    DML_OPERATOR_ACTIVATION_ELU = 35,
    DML_OPERATOR_ACTIVATION_HARDMAX = 36,
    DML_OPERATOR_ACTIVATION_HARD_SIGMOID = 37,
    DML_OPERATOR_ACTIVATION_IDENTITY = 38,
    DML_OPERATOR_ACTIVATION_LEAKY_RELU = 39,
    DML_OPERATOR_ACTIVATION_LINEAR = 40,
    DML_OPERATOR_ACTIVATION_LOG_SOFTMAX = 41,
    DML_OPERATOR_ACTIVATION_PARAMETERIZED_RELU = 42,
    DML_OPERATOR_ACTIVATION_PARAMETRIC_SOFTPLUS = 43,
    DML_OPERATOR_ACTIVATION_RELU = 44,
    DML_OPERATOR_ACTIVATION_SCALED_ELU = 45,
    DML_OPERATOR_ACTIVATION_SCALED_TANH = 46,
    DML_OPERATOR_ACTIVATION_SIGMOID = 47,
    DML_OPERATOR_ACTIVATION_SOFTMAX = 48,
    DML_OPERATOR_ACTIVATION_SOFTPLUS = 49,
    DML_OPERATOR_ACTIVATION_SOFTSIGN = 50,
    DML_OPERATOR_ACTIVATION_TANH = 51,
    DML_OPERATOR_ACTIVATION_THRESHOLDED_RELU = 52,
    DML_OPERATOR_MAX_POOLING = 58,
    DML_OPERATOR_ROI_POOLING = 59,
    DML_OPERATOR_BATCH_NORMALIZATION = 72,
    DML_OPERATOR_ACTIVATION_SHRINK = 90,
    DML_OPERATOR_MAX_POOLING1 = 91,
    DML_OPERATOR_MAX_UNPOOLING = 92,
    DML_OPERATOR_MAX_POOLING2 = 110,
    DML_OPERATOR_ACTIVATION_CELU = 128,
    DML_OPERATOR_MAX_POOLING_GRAD = 131,
    DML_OPERATOR_RESAMPLE_GRAD = 134,
    DML_OPERATOR_ROI_ALIGN = 139,
    DML_OPERATOR_BATCH_NORMALIZATION_GRAD = 146,
    DML_OPERATOR_ROI_ALIGN1 = 149,
    DML_OPERATOR_ROI_ALIGN_GRAD = 150,
    DML_OPERATOR_BATCH_NORMALIZATION_TRAINING = 151,
    DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD = 152,
    DML_OPERATOR_ACTIVATION_GELU = 157
} DML_OPERATOR_TYPE;

typedef enum DML_REDUCE_FUNCTION {
    DML_REDUCE_FUNCTION_ARGMAX = 0,
    DML_REDUCE_FUNCTION_ARGMIN = 1,
    DML_REDUCE_FUNCTION_AVERAGE = 2,
    DML_REDUCE_FUNCTION_L1 = 3,
    DML_REDUCE_FUNCTION_L2 = 4,
    DML_REDUCE_FUNCTION_LOG_SUM = 5,
    DML_REDUCE_FUNCTION_LOG_SUM_EXP = 6,
    DML_REDUCE_FUNCTION_MAX = 7,
    DML_REDUCE_FUNCTION_MIN = 8,
    DML_REDUCE_FUNCTION_MULTIPLY = 9,
    DML_REDUCE_FUNCTION_SUM = 10,
    DML_REDUCE_FUNCTION_SUM_SQUARE = 11
} DML_REDUCE_FUNCTION;

typedef enum DML_INTERPOLATION_MODE {
    DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR = 0,
    DML_INTERPOLATION_MODE_LINEAR = 1
} DML_INTERPOLATION_MODE;

typedef enum DML_FEATURE_LEVEL {
    DML_FEATURE_LEVEL_1_0 = 0x1000,
    DML_FEATURE_LEVEL_2_0 = 0x2000,
    DML_FEATURE_LEVEL_2_1 = 0x2100,
    DML_FEATURE_LEVEL_3_0 = 0x3000,
    DML_FEATURE_LEVEL_3_1 = 0x3100,
    DML_FEATURE_LEVEL_4_0 = 0x4000,
    DML_FEATURE_LEVEL_4_1 = 0x4100,
    DML_FEATURE_LEVEL_5_0 = 0x5000,
    DML_FEATURE_LEVEL_5_1 = 0x5100,
    DML_FEATURE_LEVEL_5_2 = 0x5200,
    DML_FEATURE_LEVEL_6_0 = 0x6000,
    DML_FEATURE_LEVEL_6_1 = 0x6100,
    DML_FEATURE_LEVEL_6_2 = 0x6200,
    DML_FEATURE_LEVEL_6_3 = 0x6300,
    DML_FEATURE_LEVEL_6_4 = 0x6400
} DML_FEATURE_LEVEL;

typedef enum DML_EXECUTION_FLAGS {
    DML_EXECUTION_FLAG_NONE = 0,
    DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION = 0x1,
    DML_EXECUTION_FLAG_DISABLE_META_COMMANDS = 0x2,
    DML_EXECUTION_FLAG_DESCRIPTORS_VOLATILE = 0x4
} DML_EXECUTION_FLAGS;

typedef enum DML_CREATE_DEVICE_FLAGS {
    DML_CREATE_DEVICE_FLAG_NONE = 0,
    DML_CREATE_DEVICE_FLAG_DEBUG = 0x1
} DML_CREATE_DEVICE_FLAGS;

typedef enum DML_BINDING_TYPE {
    DML_BINDING_TYPE_NONE = 0,
    DML_BINDING_TYPE_BUFFER = 1,
    DML_BINDING_TYPE_BUFFER_ARRAY = 2
} DML_BINDING_TYPE;

typedef enum DML_FEATURE { DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT = 0, DML_FEATURE_FEATURE_LEVELS = 1 } DML_FEATURE;

/* ---- Tensors ---- */
typedef struct DML_BUFFER_TENSOR_DESC {
    DML_TENSOR_DATA_TYPE DataType;
    DML_TENSOR_FLAGS Flags;
    UINT DimensionCount;
    const UINT* Sizes;   /* DimensionCount entries */
    const UINT* Strides; /* optional: NULL means packed row-major; in elements */
    UINT64 TotalTensorSizeInBytes;
    UINT GuaranteedBaseOffsetAlignment;
} DML_BUFFER_TENSOR_DESC;

typedef struct DML_TENSOR_DESC {
    DML_TENSOR_TYPE Type;
    const void* Desc; /* -> DML_BUFFER_TENSOR_DESC */
} DML_TENSOR_DESC;

typedef struct DML_OPERATOR_DESC {
    DML_OPERATOR_TYPE Type;
    const void* Desc; /* -> DML_<Type>_OPERATOR_DESC */
} DML_OPERATOR_DESC;

typedef struct DML_SIZE_2D {
    UINT Width; /* Width first, as in directml.h */
    UINT Height;
} DML_SIZE_2D;

typedef struct DML_SCALE_BIAS {
    FLOAT Scale;
    FLOAT Bias;
} DML_SCALE_BIAS;

/* ---- Bindings ---- */
typedef struct DML_BINDING_DESC {
    DML_BINDING_TYPE Type;
    const void* Desc; /* NULL, DML_BUFFER_BINDING* or DML_BUFFER_ARRAY_BINDING* */
} DML_BINDING_DESC;

typedef struct DML_BUFFER_BINDING {
    void* Buffer;       /* address in the device's memory; NULL means "no binding" */
    UINT64 Offset;      /* bytes from Buffer */
    UINT64 SizeInBytes; /* usable bytes from Buffer + Offset */
} DML_BUFFER_BINDING;

typedef struct DML_BUFFER_ARRAY_BINDING {
    UINT BindingCount;
    const DML_BUFFER_BINDING* Bindings;
} DML_BUFFER_ARRAY_BINDING;

typedef struct DML_BINDING_PROPERTIES {
    UINT RequiredDescriptorCount;
    UINT64 TemporaryResourceSize;
    UINT64 PersistentResourceSize;
} DML_BINDING_PROPERTIES;

/* ---- Feature queries ---- */
typedef struct DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT {
    DML_TENSOR_DATA_TYPE DataType;
} DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT;

typedef struct DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT {
    BOOL IsSupported;
} DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT;

typedef struct DML_FEATURE_QUERY_FEATURE_LEVELS {
    UINT RequestedFeatureLevelCount;
    const DML_FEATURE_LEVEL* RequestedFeatureLevels;
} DML_FEATURE_QUERY_FEATURE_LEVELS;

typedef struct DML_FEATURE_DATA_FEATURE_LEVELS {
    DML_FEATURE_LEVEL MaxSupportedFeatureLevel;
} DML_FEATURE_DATA_FEATURE_LEVELS;

/* ---- Max pooling family (spec max_pooling.md) ---- */
typedef struct DML_MAX_POOLING_OPERATOR_DESC {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* OutputTensor;
    UINT DimensionCount;
    const UINT* Strides;
    const UINT* WindowSize;
    const UINT* StartPadding;
    const UINT* EndPadding;
} DML_MAX_POOLING_OPERATOR_DESC;

typedef struct DML_MAX_POOLING1_OPERATOR_DESC {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* OutputTensor;
    const DML_TENSOR_DESC* OutputIndicesTensor; /* optional */
    UINT DimensionCount;
    const UINT* Strides;
    const UINT* WindowSize;
    const UINT* StartPadding;
    const UINT* EndPadding;
} DML_MAX_POOLING1_OPERATOR_DESC;

typedef struct DML_MAX_POOLING2_OPERATOR_DESC {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* OutputTensor;
    const DML_TENSOR_DESC* OutputIndicesTensor; /* optional */
    UINT DimensionCount;
    const UINT* Strides;
    const UINT* WindowSize;
    const UINT* StartPadding;
    const UINT* EndPadding;
    const UINT* Dilations;
} DML_MAX_POOLING2_OPERATOR_DESC;

typedef struct DML_MAX_POOLING_GRAD_OPERATOR_DESC {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* InputGradientTensor;
    const DML_TENSOR_DESC* OutputGradientTensor;
    UINT DimensionCount;
    const UINT* Strides;
    const UINT* WindowSize;
    const UINT* StartPadding;
    const UINT* EndPadding;
    const UINT* Dilations;
} DML_MAX_POOLING_GRAD_OPERATOR_DESC;

/* ---- ROI pooling (spec roi_pooling.md) ---- */
typedef struct DML_ROI_POOLING_OPERATOR_DESC {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* ROITensor;
    const DML_TENSOR_DESC* OutputTensor;
    FLOAT SpatialScale;
    DML_SIZE_2D PooledSize;
} DML_ROI_POOLING_OPERATOR_DESC;

/* ---- ROI align family (spec roi_align.md) ---- */
typedef struct DML_ROI_ALIGN_OPERATOR_DESC {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* ROITensor;
    const DML_TENSOR_DESC* BatchIndicesTensor;
    const DML_TENSOR_DESC* OutputTensor;
    DML_REDUCE_FUNCTION ReductionFunction;
    DML_INTERPOLATION_MODE InterpolationMode;
    FLOAT SpatialScaleX;
    FLOAT SpatialScaleY;
    FLOAT OutOfBoundsInputValue;
    UINT MinimumSamplesPerOutput;
    UINT MaximumSamplesPerOutput;
} DML_ROI_ALIGN_OPERATOR_DESC;

typedef struct DML_ROI_ALIGN1_OPERATOR_DESC {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* ROITensor;
    const DML_TENSOR_DESC* BatchIndicesTensor;
    const DML_TENSOR_DESC* OutputTensor;
    DML_REDUCE_FUNCTION ReductionFunction;
    DML_INTERPOLATION_MODE InterpolationMode;
    FLOAT SpatialScaleX;
    FLOAT SpatialScaleY;
    FLOAT InputPixelOffset;
    FLOAT OutputPixelOffset;
    FLOAT OutOfBoundsInputValue;
    UINT MinimumSamplesPerOutput;
    UINT MaximumSamplesPerOutput;
    BOOL AlignRegionsToCorners;
} DML_ROI_ALIGN1_OPERATOR_DESC;

typedef struct DML_ROI_ALIGN_GRAD_OPERATOR_DESC {
    const DML_TENSOR_DESC* InputTensor; /* optional */
    const DML_TENSOR_DESC* InputGradientTensor;
    const DML_TENSOR_DESC* ROITensor;
    const DML_TENSOR_DESC* BatchIndicesTensor;
    const DML_TENSOR_DESC* OutputGradientTensor;    /* optional */
    const DML_TENSOR_DESC* OutputROIGradientTensor; /* optional */
    DML_REDUCE_FUNCTION ReductionFunction;
    DML_INTERPOLATION_MODE InterpolationMode;
    FLOAT SpatialScaleX;
    FLOAT SpatialScaleY;
    FLOAT InputPixelOffset;
    FLOAT OutputPixelOffset;
    UINT MinimumSamplesPerOutput;
    UINT MaximumSamplesPerOutput;
    BOOL AlignRegionsToCorners;
} DML_ROI_ALIGN_GRAD_OPERATOR_DESC;

/* ---- Batch normalization family (spec batch_normalization.md) ---- */
typedef struct DML_BATCH_NORMALIZATION_OPERATOR_DESC {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* MeanTensor;
    const DML_TENSOR_DESC* VarianceTensor;
    const DML_TENSOR_DESC* ScaleTensor;
    const DML_TENSOR_DESC* BiasTensor;
    const DML_TENSOR_DESC* OutputTensor;
    BOOL Spatial;
    FLOAT Epsilon;
    const DML_OPERATOR_DESC* FusedActivation; /* optional */
} DML_BATCH_NORMALIZATION_OPERATOR_DESC;

typedef struct DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* ScaleTensor;
    const DML_TENSOR_DESC* BiasTensor;
    const DML_TENSOR_DESC* FusedAddTensor; /* optional */
    const DML_TENSOR_DESC* OutputTensor;
    const DML_TENSOR_DESC* OutputMeanTensor;
    const DML_TENSOR_DESC* OutputVarianceTensor;
    FLOAT Epsilon;
    const DML_OPERATOR_DESC* FusedActivation; /* optional */
} DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC;

typedef struct DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* InputGradientTensor;
    const DML_TENSOR_DESC* MeanTensor;
    const DML_TENSOR_DESC* VarianceTensor;
    const DML_TENSOR_DESC* ScaleTensor;
    const DML_TENSOR_DESC* OutputGradientTensor;
    const DML_TENSOR_DESC* OutputScaleGradientTensor;
    const DML_TENSOR_DESC* OutputBiasGradientTensor;
    FLOAT Epsilon;
} DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC;

typedef struct DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* InputGradientTensor;
    const DML_TENSOR_DESC* MeanTensor;
    const DML_TENSOR_DESC* VarianceTensor;
    const DML_TENSOR_DESC* ScaleTensor;
    const DML_TENSOR_DESC* OutputGradientTensor;
    const DML_TENSOR_DESC* OutputScaleGradientTensor;
    const DML_TENSOR_DESC* OutputBiasGradientTensor;
    FLOAT Epsilon;
} DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC;

/* ---- Activations (fusable into the batch normalization operators) ----
 * InputTensor and OutputTensor must be NULL when used as FusedActivation. */
#define DML_ACTIVATION_TENSORS_                                                                                        \
    const DML_TENSOR_DESC* InputTensor;                                                                                \
    const DML_TENSOR_DESC* OutputTensor

typedef struct DML_ACTIVATION_ELU_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
    FLOAT Alpha;
} DML_ACTIVATION_ELU_OPERATOR_DESC;
typedef struct DML_ACTIVATION_CELU_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
    FLOAT Alpha;
} DML_ACTIVATION_CELU_OPERATOR_DESC;
typedef struct DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
    FLOAT Alpha;
    FLOAT Beta;
} DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC;
typedef struct DML_ACTIVATION_IDENTITY_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
} DML_ACTIVATION_IDENTITY_OPERATOR_DESC;
typedef struct DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
    FLOAT Alpha;
} DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC;
typedef struct DML_ACTIVATION_LINEAR_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
    FLOAT Alpha;
    FLOAT Beta;
} DML_ACTIVATION_LINEAR_OPERATOR_DESC;
typedef struct DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
    FLOAT Alpha;
    FLOAT Beta;
} DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC;
typedef struct DML_ACTIVATION_RELU_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
} DML_ACTIVATION_RELU_OPERATOR_DESC;
typedef struct DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
    FLOAT Alpha;
    FLOAT Gamma;
} DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC;
typedef struct DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
    FLOAT Alpha;
    FLOAT Beta;
} DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC;
typedef struct DML_ACTIVATION_SIGMOID_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
} DML_ACTIVATION_SIGMOID_OPERATOR_DESC;
typedef struct DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
    FLOAT Steepness;
} DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC;
typedef struct DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
} DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC;
typedef struct DML_ACTIVATION_TANH_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
} DML_ACTIVATION_TANH_OPERATOR_DESC;
typedef struct DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
    FLOAT Alpha;
} DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC;
typedef struct DML_ACTIVATION_SHRINK_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
    FLOAT Bias;
    FLOAT Threshold;
} DML_ACTIVATION_SHRINK_OPERATOR_DESC;
typedef struct DML_ACTIVATION_GELU_OPERATOR_DESC {
    DML_ACTIVATION_TENSORS_;
} DML_ACTIVATION_GELU_OPERATOR_DESC;

#undef DML_ACTIVATION_TENSORS_

#ifdef __cplusplus
}
#endif

#endif /* DML_TYPES_H */
