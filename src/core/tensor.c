#include "tensor.h"

#include <string.h>

#include "checked.h"
#include "status.h"

/* Elements from the first to the last addressed one (last index + 1); false on overflow. */
static bool addressed_elements(uint32_t rank, const uint32_t* sizes, const uint32_t* strides, uint64_t* elements) {
    uint64_t last_index = 0;
    if (strides == NULL) {
        uint64_t count = 1;
        for (uint32_t i = 0; i < rank; i++)
            if (!dml_mul_u64(count, sizes[i], &count)) return false;
        *elements = count;
        return true;
    }
    for (uint32_t i = 0; i < rank; i++) {
        if (sizes[i] == 0) {
            *elements = 0;
            return true;
        }
        uint64_t term;
        if (!dml_mul_u64((uint64_t)sizes[i] - 1, strides[i], &term) || !dml_add_u64(last_index, term, &last_index))
            return false;
    }
    return dml_add_u64(last_index, 1, elements);
}

UINT64 DMLCalcBufferTensorSize(DML_TENSOR_DATA_TYPE dataType, UINT dimensionCount, const UINT* sizes,
                               const UINT* strides) {
    uint32_t element_size = dmlDataTypeSize(dataType);
    if (element_size == 0 || (dimensionCount > 0 && sizes == NULL)) return 0;
    uint64_t elements, bytes;
    if (!addressed_elements(dimensionCount, sizes, strides, &elements)) return 0;
    if (!dml_mul_u64(elements, element_size, &bytes) || bytes > UINT64_MAX - 3) return 0;
    return dml_round_up_u64(bytes, 4);
}

HRESULT dml_tensor_from_desc(dml_tensor* tensor, const DML_TENSOR_DESC* desc, dml_tensor_role role, const char* op_name,
                             const char* field) {
    memset(tensor, 0, sizeof *tensor);
    if (desc->Type != DML_TENSOR_TYPE_BUFFER)
        return dml_fail(E_INVALIDARG, "%s: %s.Type is %u but must be DML_TENSOR_TYPE_BUFFER (1)", op_name, field,
                        (unsigned)desc->Type);
    const DML_BUFFER_TENSOR_DESC* buffer = (const DML_BUFFER_TENSOR_DESC*)desc->Desc;
    if (buffer == NULL)
        return dml_fail(E_INVALIDARG, "%s: %s.Desc is NULL but must point to a DML_BUFFER_TENSOR_DESC", op_name, field);

    uint32_t element_size = dmlDataTypeSize(buffer->DataType);
    if (element_size == 0)
        return dml_fail(E_INVALIDARG, "%s: %s.DataType %u is not a supported tensor data type", op_name, field,
                        (unsigned)buffer->DataType);
    if ((uint32_t)buffer->Flags & ~(uint32_t)DML_TENSOR_FLAG_OWNED_BY_DML)
        return dml_fail(E_INVALIDARG, "%s: %s.Flags 0x%x has bits other than DML_TENSOR_FLAG_OWNED_BY_DML", op_name,
                        field, (unsigned)buffer->Flags);
    if (role == DML_TENSOR_OUTPUT && (buffer->Flags & DML_TENSOR_FLAG_OWNED_BY_DML))
        return dml_fail(E_INVALIDARG, "%s: %s.Flags has DML_TENSOR_FLAG_OWNED_BY_DML, which only inputs may have",
                        op_name, field);
    if (buffer->DimensionCount < 1 || buffer->DimensionCount > DML_MAX_RANK)
        return dml_fail(E_INVALIDARG, "%s: %s.DimensionCount is %u but must be 1..%u", op_name, field,
                        buffer->DimensionCount, (unsigned)DML_MAX_RANK);
    if (buffer->Sizes == NULL)
        return dml_fail(E_INVALIDARG, "%s: %s.Sizes is NULL but DimensionCount is %u", op_name, field,
                        buffer->DimensionCount);

    uint32_t rank = buffer->DimensionCount;
    uint64_t element_count = 1;
    for (uint32_t i = 0; i < rank; i++) {
        if (buffer->Sizes[i] == 0)
            return dml_fail(E_INVALIDARG, "%s: %s.Sizes[%u] is 0 but every size must be >= 1", op_name, field, i);
        element_count *= buffer->Sizes[i]; /* < 2^32 * 2^32: cannot wrap, checked at once */
        if (element_count > UINT32_MAX)
            return dml_fail(E_INVALIDARG, "%s: %s has more than 2^32 - 1 elements", op_name, field);
    }

    uint64_t addressed;
    if (!addressed_elements(rank, buffer->Sizes, buffer->Strides, &addressed) || addressed > UINT32_MAX)
        return dml_fail(E_INVALIDARG, "%s: %s.Strides address more than 2^32 - 1 elements", op_name, field);

    if (role == DML_TENSOR_OUTPUT && buffer->Strides != NULL) {
        for (uint32_t i = 0; i < rank; i++)
            if (buffer->Strides[i] == 0 && buffer->Sizes[i] > 1)
                return dml_fail(E_INVALIDARG,
                                "%s: %s.Strides[%u] is 0 with Sizes[%u] = %u; an output must not broadcast "
                                "(elements would share memory)",
                                op_name, field, i, i, buffer->Sizes[i]);
    }

    uint64_t minimum = DMLCalcBufferTensorSize(buffer->DataType, rank, buffer->Sizes, buffer->Strides);
    if (buffer->TotalTensorSizeInBytes < minimum)
        return dml_fail(E_INVALIDARG,
                        "%s: %s.TotalTensorSizeInBytes is %llu but must be >= %llu (DMLCalcBufferTensorSize)", op_name,
                        field, (unsigned long long)buffer->TotalTensorSizeInBytes, (unsigned long long)minimum);
    if (buffer->TotalTensorSizeInBytes % 4 != 0)
        return dml_fail(E_INVALIDARG, "%s: %s.TotalTensorSizeInBytes is %llu but must be a multiple of 4", op_name,
                        field, (unsigned long long)buffer->TotalTensorSizeInBytes);

    uint32_t alignment = buffer->GuaranteedBaseOffsetAlignment;
    if (alignment != 0 && ((alignment & (alignment - 1)) != 0 || alignment < element_size))
        return dml_fail(E_INVALIDARG,
                        "%s: %s.GuaranteedBaseOffsetAlignment is %u but must be 0 or a power of two >= the "
                        "element size (%u)",
                        op_name, field, alignment, element_size);

    tensor->present = true;
    tensor->type = buffer->DataType;
    tensor->flags = (uint32_t)buffer->Flags;
    tensor->rank = rank;
    tensor->element_count = element_count;
    tensor->total_bytes = buffer->TotalTensorSizeInBytes;
    tensor->alignment =
        alignment > DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT ? alignment : DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT;
    uint64_t packed_stride = 1;
    for (uint32_t i = rank; i-- > 0;) {
        tensor->sizes[i] = buffer->Sizes[i];
        tensor->strides[i] = buffer->Strides ? buffer->Strides[i] : packed_stride;
        packed_stride *= buffer->Sizes[i];
    }
    return S_OK;
}
