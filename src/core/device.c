/* Devices, buffers and feature queries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "operator.h"
#include "status.h"

#define DML_HIGHEST_FEATURE_LEVEL DML_FEATURE_LEVEL_6_4

static const DML_FEATURE_LEVEL known_levels[] = {
    DML_FEATURE_LEVEL_1_0, DML_FEATURE_LEVEL_2_0, DML_FEATURE_LEVEL_2_1, DML_FEATURE_LEVEL_3_0, DML_FEATURE_LEVEL_3_1,
    DML_FEATURE_LEVEL_4_0, DML_FEATURE_LEVEL_4_1, DML_FEATURE_LEVEL_5_0, DML_FEATURE_LEVEL_5_1, DML_FEATURE_LEVEL_5_2,
    DML_FEATURE_LEVEL_6_0, DML_FEATURE_LEVEL_6_1, DML_FEATURE_LEVEL_6_2, DML_FEATURE_LEVEL_6_3, DML_FEATURE_LEVEL_6_4};

static int is_known_level(DML_FEATURE_LEVEL level) {
    for (size_t i = 0; i < sizeof known_levels / sizeof known_levels[0]; i++)
        if (known_levels[i] == level) return 1;
    return 0;
}

HRESULT dmlCreateDevice(const DML_DEVICE_DESC* desc, DMLDevice** device) {
    dml_clear_error();
    if (device == NULL) return dml_fail(E_POINTER, "dmlCreateDevice: device is NULL");
    *device = NULL;
    DML_DEVICE_DESC defaults = {0};
    if (desc == NULL) desc = &defaults;

    if (desc->Backend != DML_BACKEND_CPU && desc->Backend != DML_BACKEND_CUDA)
        return dml_fail(E_INVALIDARG,
                        "dmlCreateDevice: Backend is %u but must be DML_BACKEND_CPU (0) or "
                        "DML_BACKEND_CUDA (1)",
                        (unsigned)desc->Backend);
    const dml_backend* backend = dml_backend_find(desc->Backend);
    if (backend == NULL)
        return dml_fail(DXGI_ERROR_UNSUPPORTED,
                        "dmlCreateDevice: Backend is DML_BACKEND_CUDA but this libdml was built without CUDA "
                        "(configure with -DDML_CUDA=ON where nvcc is installed)");
    if ((unsigned)desc->Flags & ~(unsigned)DML_CREATE_DEVICE_FLAG_DEBUG)
        return dml_fail(E_INVALIDARG, "dmlCreateDevice: Flags 0x%x has unknown bits", (unsigned)desc->Flags);

    if ((unsigned)desc->MaxCpuIsa > DML_CPU_ISA_AVX512)
        return dml_fail(E_INVALIDARG, "dmlCreateDevice: MaxCpuIsa is %u but must be a DML_CPU_ISA value (0 to 3)",
                        (unsigned)desc->MaxCpuIsa);

    DML_FEATURE_LEVEL level = desc->FeatureLevel ? desc->FeatureLevel : DML_HIGHEST_FEATURE_LEVEL;
    if (level > DML_HIGHEST_FEATURE_LEVEL)
        return dml_fail(DXGI_ERROR_UNSUPPORTED,
                        "dmlCreateDevice: FeatureLevel 0x%x is above the highest libdml "
                        "supports (" DML_LEVEL_FORMAT ", 0x%x)",
                        (unsigned)level, DML_LEVEL_ARGS(DML_HIGHEST_FEATURE_LEVEL),
                        (unsigned)DML_HIGHEST_FEATURE_LEVEL);
    if (!is_known_level(level))
        return dml_fail(E_INVALIDARG, "dmlCreateDevice: FeatureLevel 0x%x is not a DML_FEATURE_LEVEL value",
                        (unsigned)level);

    if (desc->ThreadCount > DML_MAX_THREAD_COUNT)
        return dml_fail(E_INVALIDARG, "dmlCreateDevice: ThreadCount is %u but must be <= %u (0: all cores)",
                        desc->ThreadCount, DML_MAX_THREAD_COUNT);
    UINT samples_per_axis =
        desc->RoiAlignMaxSamplesPerAxis ? desc->RoiAlignMaxSamplesPerAxis : DML_ROI_ALIGN_DEFAULT_SAMPLES_PER_AXIS;
    if (samples_per_axis > DML_ROI_ALIGN_MAX_SAMPLES_PER_AXIS)
        return dml_fail(E_INVALIDARG,
                        "dmlCreateDevice: RoiAlignMaxSamplesPerAxis is %u but must be <= %u (2^32 samples per "
                        "output element, the most whose sums stay exact enough)",
                        samples_per_axis, DML_ROI_ALIGN_MAX_SAMPLES_PER_AXIS);

    DMLDevice* created = calloc(1, sizeof *created);
    if (created == NULL) return dml_fail(E_OUTOFMEMORY, "dmlCreateDevice: out of memory");
    created->backend = backend;
    created->backend_kind = desc->Backend;
    created->feature_level = level;
    created->roi_align_samples_per_axis = samples_per_axis;
    atomic_init(&created->references, 1);
    atomic_init(&created->removed_reason, S_OK);
    HRESULT status = backend->create(created, desc);
    if (FAILED(status)) {
        free(created);
        return status;
    }
    *device = created;
    return S_OK;
}

void dml_device_retain(DMLDevice* device) { atomic_fetch_add(&device->references, 1); }

void dml_device_release(DMLDevice* device) {
    if (device == NULL || atomic_fetch_sub(&device->references, 1) != 1) return;
    device->backend->destroy(device);
    free(device);
}

void dmlReleaseDevice(DMLDevice* device) { dml_device_release(device); }

HRESULT dml_device_remove(DMLDevice* device, HRESULT reason, const char* what) {
    HRESULT healthy = S_OK;
    atomic_compare_exchange_strong(&device->removed_reason, &healthy, reason);
    /* The failure's own message (a CUDA error, say) stays part of the new one. */
    char cause[768];
    snprintf(cause, sizeof cause, "%s", dmlGetLastErrorMessage());
    if (cause[0] != '\0')
        return dml_fail(DXGI_ERROR_DEVICE_REMOVED, "device removed: %s: %s (%s)", what, cause, dmlStatusName(reason));
    return dml_fail(DXGI_ERROR_DEVICE_REMOVED, "device removed: %s (%s)", what, dmlStatusName(reason));
}

HRESULT dmlGetDeviceRemovedReason(const DMLDevice* device) {
    if (device == NULL) return E_POINTER;
    return atomic_load(&((DMLDevice*)device)->removed_reason);
}

DML_BACKEND dmlGetDeviceBackend(const DMLDevice* device) { return device ? device->backend_kind : DML_BACKEND_CPU; }

DML_CPU_ISA dmlGetDeviceCpuIsa(const DMLDevice* device) {
    return device ? (DML_CPU_ISA)(DML_CPU_ISA_GENERIC + device->cpu_isa) : DML_CPU_ISA_GENERIC;
}

/* Common entry check of every device method: a usable device. */
HRESULT dml_check_device_usable(const DMLDevice* device, const char* function) {
    dml_clear_error();
    if (device == NULL) return dml_fail(E_POINTER, "%s: device is NULL", function);
    if (dmlGetDeviceRemovedReason(device) != S_OK)
        return dml_fail(DXGI_ERROR_DEVICE_REMOVED, "%s: the device was removed (%s)", function,
                        dmlStatusName(dmlGetDeviceRemovedReason(device)));
    return S_OK;
}

HRESULT dmlCheckFeatureSupport(const DMLDevice* device, DML_FEATURE feature, UINT featureQueryDataSize,
                               const void* featureQueryData, UINT featureSupportDataSize, void* featureSupportData) {
    DML_TRY(dml_check_device_usable(device, "dmlCheckFeatureSupport"));
    if (featureQueryData == NULL || featureSupportData == NULL)
        return dml_fail(E_INVALIDARG, "dmlCheckFeatureSupport: query and support data must not be NULL");
    switch (feature) {
    case DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT: {
        if (featureQueryDataSize != sizeof(DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT) ||
            featureSupportDataSize != sizeof(DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT))
            return dml_fail(E_INVALIDARG, "dmlCheckFeatureSupport: wrong query or support size for "
                                          "DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT");
        const DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT* query = featureQueryData;
        DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT* support = featureSupportData;
        support->IsSupported = dmlDataTypeSize(query->DataType) != 0;
        return S_OK;
    }
    case DML_FEATURE_FEATURE_LEVELS: {
        if (featureQueryDataSize != sizeof(DML_FEATURE_QUERY_FEATURE_LEVELS) ||
            featureSupportDataSize != sizeof(DML_FEATURE_DATA_FEATURE_LEVELS))
            return dml_fail(E_INVALIDARG, "dmlCheckFeatureSupport: wrong query or support size for "
                                          "DML_FEATURE_FEATURE_LEVELS");
        const DML_FEATURE_QUERY_FEATURE_LEVELS* query = featureQueryData;
        DML_FEATURE_DATA_FEATURE_LEVELS* support = featureSupportData;
        if (query->RequestedFeatureLevelCount == 0 || query->RequestedFeatureLevels == NULL)
            return dml_fail(E_INVALIDARG, "dmlCheckFeatureSupport: RequestedFeatureLevels must list at least one "
                                          "level");
        DML_FEATURE_LEVEL best = 0;
        for (UINT i = 0; i < query->RequestedFeatureLevelCount; i++) {
            DML_FEATURE_LEVEL level = query->RequestedFeatureLevels[i];
            if (is_known_level(level) && level <= device->feature_level && level > best) best = level;
        }
        if (best == 0)
            return dml_fail(E_INVALIDARG,
                            "dmlCheckFeatureSupport: none of the requested feature levels is "
                            "supported (device level " DML_LEVEL_FORMAT ")",
                            DML_LEVEL_ARGS(device->feature_level));
        support->MaxSupportedFeatureLevel = best;
        return S_OK;
    }
    default:
        return dml_fail(E_INVALIDARG, "dmlCheckFeatureSupport: feature %u is not a DML_FEATURE value",
                        (unsigned)feature);
    }
}

HRESULT dmlAllocateBuffer(DMLDevice* device, UINT64 sizeInBytes, void** buffer) {
    DML_TRY(dml_check_device_usable(device, "dmlAllocateBuffer"));
    if (buffer == NULL) return dml_fail(E_POINTER, "dmlAllocateBuffer: buffer is NULL");
    *buffer = NULL;
    if (sizeInBytes == 0) return dml_fail(E_INVALIDARG, "dmlAllocateBuffer: sizeInBytes must be > 0");
    return device->backend->allocate(device, sizeInBytes, buffer);
}

void dmlFreeBuffer(DMLDevice* device, void* buffer) {
    if (device != NULL && buffer != NULL) device->backend->free(device, buffer);
}

/* Shared argument check of the copy helpers. */
static HRESULT check_copy(const DMLDevice* device, const char* function, const void* dst, const void* src,
                          UINT64 size) {
    DML_TRY(dml_check_device_usable(device, function));
    if (size > 0 && (dst == NULL || src == NULL))
        return dml_fail(E_POINTER, "%s: a NULL address with %llu bytes to copy", function, (unsigned long long)size);
    return S_OK;
}

HRESULT dmlUpload(DMLDevice* device, void* deviceDst, const void* hostSrc, UINT64 sizeInBytes) {
    DML_TRY(check_copy(device, "dmlUpload", deviceDst, hostSrc, sizeInBytes));
    return sizeInBytes ? device->backend->upload(device, deviceDst, hostSrc, sizeInBytes) : S_OK;
}

HRESULT dmlDownload(DMLDevice* device, void* hostDst, const void* deviceSrc, UINT64 sizeInBytes) {
    DML_TRY(check_copy(device, "dmlDownload", hostDst, deviceSrc, sizeInBytes));
    return sizeInBytes ? device->backend->download(device, hostDst, deviceSrc, sizeInBytes) : S_OK;
}

HRESULT dmlFill(DMLDevice* device, void* deviceDst, int byteValue, UINT64 sizeInBytes) {
    DML_TRY(check_copy(device, "dmlFill", deviceDst, deviceDst, sizeInBytes));
    return sizeInBytes ? device->backend->fill(device, deviceDst, byteValue, sizeInBytes) : S_OK;
}

HRESULT dmlSynchronize(DMLDevice* device) {
    DML_TRY(dml_check_device_usable(device, "dmlSynchronize"));
    return device->backend->synchronize(device);
}
