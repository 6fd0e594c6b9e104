/* Operator lifecycle: create (validate, deep-copy), compile (choose the
 * implementation and plan it, lay out the persistent resource), initialize
 * (capture OWNED_BY_DML inputs), dispatch (validate bindings, run). */
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "operator.h"
#include "status.h"

struct DMLCompiledOperator {
    DMLDevice* device;
    DMLOperator op; /* a private copy: the caller may release its DMLOperator */
    DML_EXECUTION_FLAGS flags;
    dml_plan plan; /* the chosen implementation and what it precomputed */
    bool initialized;
};

static void release_params(DMLOperator* op) {
    free(op->params);
    op->params = NULL;
}

HRESULT dml_op_set_params(DMLOperator* op, const void* params, size_t size) {
    void* copy = malloc(size);
    if (copy == NULL) return dml_fail(E_OUTOFMEMORY, "%s: out of memory", op->name);
    memcpy(copy, params, size);
    free(op->params);
    op->params = copy;
    op->params_size = size;
    return S_OK;
}

void* dml_plan_state(dml_plan* plan, size_t size) {
    free(plan->state);
    plan->state = calloc(1, size ? size : 1);
    return plan->state;
}

/* The first implementation of the backend's ordered list that the device's
 * CPU level allows and whose plan accepts the problem (as oneDNN walks its
 * implementation lists). The generic strided one, last, accepts everything. */
static HRESULT choose_implementation(DMLCompiledOperator* compiled, const dml_impl* const* impls) {
    for (const dml_impl* const* entry = impls; *entry != NULL; entry++) {
        const dml_impl* impl = *entry;
        if (impl->isa > compiled->device->cpu_isa) continue;
        dml_plan plan = {.impl = impl};
        HRESULT status = impl->plan ? impl->plan(&compiled->op, compiled->device, compiled->flags, &plan) : S_OK;
        if (status == S_OK) {
            compiled->plan = plan;
            return S_OK;
        }
        free(plan.state);
        if (FAILED(status))
            return status == E_OUTOFMEMORY
                       ? dml_fail(status, "%s: out of memory planning %s", compiled->op.name, impl->name)
                       : status;
    }
    return dml_fail(E_NOTIMPL, "%s: no implementation on the %s backend takes this problem", compiled->op.name,
                    compiled->device->backend->name);
}

/* Lays out op's persistent resource (op->persistent_size and _offsets),
 * when the operator is created: a description whose resource would pass
 * 2^64 bytes is rejected there, and compiling it cannot fail on it. */
static HRESULT persistent_layout(DMLOperator* op) {
    uint64_t* size = &op->persistent_size;
    *size = 0;
    for (uint32_t i = 0; i < op->input_count; i++) {
        const dml_tensor* tensor = &op->inputs[i].tensor;
        if (!tensor->present || !(tensor->flags & DML_TENSOR_FLAG_OWNED_BY_DML)) continue;
        op->persistent_offsets[i] = *size;
        uint64_t padded; /* round_up(total_bytes, 256), overflow-checked as the sum */
        if (!dml_add_u64(tensor->total_bytes, DML_PERSISTENT_BUFFER_ALIGNMENT - 1, &padded) ||
            !dml_add_u64(*size, padded / DML_PERSISTENT_BUFFER_ALIGNMENT * DML_PERSISTENT_BUFFER_ALIGNMENT, size))
            return dml_fail(E_INVALIDARG,
                            "%s: %s is OWNED_BY_DML with TotalTensorSizeInBytes %llu: the persistent resource "
                            "would exceed 2^64 bytes",
                            op->name, op->inputs[i].field, (unsigned long long)tensor->total_bytes);
    }
    return S_OK;
}

HRESULT dmlCreateOperator(DMLDevice* device, const DML_OPERATOR_DESC* desc, DMLOperator** op) {
    DML_TRY(dml_check_device_usable(device, "dmlCreateOperator"));
    if (op == NULL) return dml_fail(E_POINTER, "dmlCreateOperator: op is NULL");
    *op = NULL;
    if (desc == NULL) return dml_fail(E_INVALIDARG, "dmlCreateOperator: desc is NULL");
    const dml_op_info* info = dml_op_info_find(desc->Type);
    if (info == NULL)
        return dml_fail(E_INVALIDARG,
                        "dmlCreateOperator: DML_OPERATOR_DESC.Type %u is not an operator libdml "
                        "implements",
                        (unsigned)desc->Type);
    if (info->create == NULL)
        return dml_fail(E_NOTIMPL, "%s: not implemented yet in this version of libdml", info->name);
    if (device->feature_level < info->introduced)
        return dml_fail(E_INVALIDARG,
                        "%s: needs feature level " DML_LEVEL_FORMAT " but the device was created at " DML_LEVEL_FORMAT,
                        info->name, DML_LEVEL_ARGS(info->introduced), DML_LEVEL_ARGS(device->feature_level));
    if (desc->Desc == NULL) return dml_fail(E_INVALIDARG, "%s: DML_OPERATOR_DESC.Desc is NULL", info->name);

    DMLOperator* created = calloc(1, sizeof *created);
    if (created == NULL) return dml_fail(E_OUTOFMEMORY, "%s: out of memory", info->name);
    created->device = device;
    created->type = desc->Type;
    created->name = info->name;
    HRESULT status = info->create(created, desc->Desc);
    if (SUCCEEDED(status)) status = persistent_layout(created);
    if (FAILED(status)) {
        release_params(created);
        free(created);
        return status;
    }
    dml_device_retain(device);
    *op = created;
    return S_OK;
}

void dmlReleaseOperator(DMLOperator* op) {
    if (op == NULL) return;
    DMLDevice* device = op->device;
    release_params(op);
    free(op);
    dml_device_release(device);
}

HRESULT dmlGetOperatorSlotCounts(const DMLOperator* op, UINT* inputCount, UINT* outputCount) {
    dml_clear_error();
    if (op == NULL || inputCount == NULL || outputCount == NULL)
        return dml_fail(E_POINTER, "dmlGetOperatorSlotCounts: NULL argument");
    *inputCount = op->input_count;
    *outputCount = op->output_count;
    return S_OK;
}

HRESULT dmlCompileOperator(DMLDevice* device, const DMLOperator* op, DML_EXECUTION_FLAGS flags,
                           DMLCompiledOperator** compiled) {
    DML_TRY(dml_check_device_usable(device, "dmlCompileOperator"));
    if (op == NULL || compiled == NULL) return dml_fail(E_POINTER, "dmlCompileOperator: NULL argument");
    *compiled = NULL;
    if (op->device != device)
        return dml_fail(E_INVALIDARG, "%s: dmlCompileOperator: the operator was created on another device", op->name);
    const unsigned known_flags = DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION |
                                 DML_EXECUTION_FLAG_DISABLE_META_COMMANDS | DML_EXECUTION_FLAG_DESCRIPTORS_VOLATILE;
    if ((unsigned)flags & ~known_flags)
        return dml_fail(E_INVALIDARG, "%s: execution flags 0x%x have unknown bits", op->name, (unsigned)flags);
    const dml_impl* const* impls = device->backend->impls[op->kernel];
    if (impls == NULL)
        return dml_fail(E_NOTIMPL, "%s: not implemented yet on the %s backend", op->name, device->backend->name);

    DMLCompiledOperator* result = calloc(1, sizeof *result);
    if (result == NULL) return dml_fail(E_OUTOFMEMORY, "%s: out of memory", op->name);
    result->device = device;
    dml_device_retain(device); /* released with the compiled operator, on every path */
    result->op = *op;
    result->op.params = NULL;
    result->flags = flags;
    HRESULT status = S_OK;
    if (op->params_size > 0) status = dml_op_set_params(&result->op, op->params, op->params_size);
    if (SUCCEEDED(status)) status = choose_implementation(result, impls);
    if (FAILED(status)) {
        dmlReleaseCompiledOperator(result);
        return status;
    }
    result->initialized = op->persistent_size == 0;
    *compiled = result;
    return S_OK;
}

void dmlReleaseCompiledOperator(DMLCompiledOperator* compiled) {
    if (compiled == NULL) return;
    DMLDevice* device = compiled->device;
    release_params(&compiled->op);
    free(compiled->plan.state);
    free(compiled);
    dml_device_release(device);
}

HRESULT dmlGetBindingProperties(const DMLCompiledOperator* compiled, DML_BINDING_PROPERTIES* properties) {
    dml_clear_error();
    if (compiled == NULL || properties == NULL) return dml_fail(E_POINTER, "dmlGetBindingProperties: NULL argument");
    properties->RequiredDescriptorCount = compiled->op.input_count + compiled->op.output_count;
    properties->TemporaryResourceSize = compiled->plan.temporary_size;
    properties->PersistentResourceSize = compiled->op.persistent_size;
    return S_OK;
}

HRESULT dmlGetCompiledOperatorInfo(const DMLCompiledOperator* compiled, DML_COMPILED_OPERATOR_INFO* info) {
    dml_clear_error();
    if (compiled == NULL || info == NULL) return dml_fail(E_POINTER, "dmlGetCompiledOperatorInfo: NULL argument");
    info->ImplementationName = compiled->plan.impl->name;
    info->TemporaryResourceSize = compiled->plan.temporary_size;
    info->PersistentResourceSize = compiled->op.persistent_size;
    return S_OK;
}

/* ---- Binding validation (spec tensors.md §6, decision T-8) ---- */

typedef struct byte_range {
    uintptr_t begin, end; /* [begin, end) */
    const char* field;
} byte_range;

/* NULL, NONE, or BUFFER with a NULL Buffer: "nothing bound" (decision T-5). */
static bool is_unbound(const DML_BINDING_DESC* binding) {
    if (binding == NULL || binding->Type == DML_BINDING_TYPE_NONE) return true;
    if (binding->Type != DML_BINDING_TYPE_BUFFER) return false;
    const DML_BUFFER_BINDING* buffer = binding->Desc;
    return buffer == NULL || buffer->Buffer == NULL;
}

/* Checks one bound buffer against the bytes it must hold and the alignment
 * of its offset; returns its address range. */
static HRESULT check_buffer(const char* op_name, const char* what, const char* field, const DML_BINDING_DESC* binding,
                            uint64_t required_bytes, uint32_t offset_alignment, uint32_t element_size,
                            byte_range* range) {
    if (binding->Type != DML_BINDING_TYPE_BUFFER)
        return dml_fail(E_INVALIDARG, "%s: %s: %s must be bound with DML_BINDING_TYPE_BUFFER (got type %u)", op_name,
                        what, field, (unsigned)binding->Type);
    const DML_BUFFER_BINDING* buffer = binding->Desc;
    if (buffer->SizeInBytes < required_bytes)
        return dml_fail(E_INVALIDARG, "%s: %s: %s binding SizeInBytes is %llu but must be >= %llu", op_name, what,
                        field, (unsigned long long)buffer->SizeInBytes, (unsigned long long)required_bytes);
    if (buffer->Offset % offset_alignment != 0)
        return dml_fail(E_INVALIDARG, "%s: %s: %s binding Offset %llu is not a multiple of its alignment (%u)", op_name,
                        what, field, (unsigned long long)buffer->Offset, offset_alignment);
    uint64_t begin;
    if (!dml_add_u64((uintptr_t)buffer->Buffer, buffer->Offset, &begin) || begin > UINTPTR_MAX - required_bytes)
        return dml_fail(E_INVALIDARG, "%s: %s: %s binding Buffer + Offset overflows the address space", op_name, what,
                        field);
    if (element_size > 1 && begin % element_size != 0)
        return dml_fail(E_INVALIDARG,
                        "%s: %s: %s binding address Buffer + Offset is not aligned to its element "
                        "size (%u)",
                        op_name, what, field, element_size);
    range->begin = (uintptr_t)begin;
    range->end = (uintptr_t)(begin + required_bytes);
    range->field = field;
    return S_OK;
}

static bool ranges_overlap(const byte_range* a, const byte_range* b) {
    return a->begin < b->end && b->begin < a->end && a->begin != a->end && b->begin != b->end;
}

/* Validates the bindings of one list of slots and collects their addresses
 * and ranges. owned_base is the persistent resource (or NULL). */
static HRESULT bind_slots(const DMLCompiledOperator* compiled, bool outputs, UINT count,
                          const DML_BINDING_DESC* bindings, void* owned_base, void** addresses, byte_range* ranges,
                          uint32_t* range_count) {
    const DMLOperator* op = &compiled->op;
    const char* what = outputs ? "dispatch outputs" : "dispatch inputs";
    uint32_t slot_count = outputs ? op->output_count : op->input_count;
    const dml_slot* slots = outputs ? op->outputs : op->inputs;
    if (count != slot_count)
        return dml_fail(E_INVALIDARG, "%s: %s: %u bindings given but the operator has %u %s slots", op->name, what,
                        count, slot_count, outputs ? "output" : "input");
    if (count > 0 && bindings == NULL)
        return dml_fail(E_INVALIDARG, "%s: %s: the binding array is NULL", op->name, what);
    for (uint32_t i = 0; i < slot_count; i++) {
        const dml_tensor* tensor = &slots[i].tensor;
        const char* field = slots[i].field;
        addresses[i] = NULL;
        if (!tensor->present) {
            if (!is_unbound(&bindings[i]))
                return dml_fail(E_INVALIDARG,
                                "%s: %s: %s is absent from the description, so its binding must be "
                                "DML_BINDING_TYPE_NONE",
                                op->name, what, field);
            continue;
        }
        if (tensor->flags & DML_TENSOR_FLAG_OWNED_BY_DML) {
            if (!is_unbound(&bindings[i]))
                return dml_fail(E_INVALIDARG,
                                "%s: %s: %s is OWNED_BY_DML: it is bound at initialization and must "
                                "not be bound at dispatch",
                                op->name, what, field);
            addresses[i] = (char*)owned_base + compiled->op.persistent_offsets[i];
            continue;
        }
        if (is_unbound(&bindings[i]))
            return dml_fail(E_INVALIDARG, "%s: %s: %s is required but not bound", op->name, what, field);
        byte_range* range = &ranges[(*range_count)++];
        DML_TRY(check_buffer(op->name, what, field, &bindings[i], tensor->total_bytes, tensor->alignment,
                             dml_tensor_element_size(tensor), range));
        addresses[i] = (void*)range->begin;
    }
    return S_OK;
}

/* The temporary or persistent resource (`field`) of `size` bytes bound for
 * initialization or dispatch: NONE when size is 0, else a large enough
 * buffer at an offset aligned to 256 (DML_*_BUFFER_ALIGNMENT). */
static HRESULT bind_resource(const DMLCompiledOperator* compiled, const char* what, const char* field,
                             const DML_BINDING_DESC* binding, uint64_t size, uint32_t element_alignment,
                             byte_range* range) {
    const DMLOperator* op = &compiled->op;
    const char* size_field = field[0] == 'T' ? "TemporaryResourceSize" : "PersistentResourceSize";
    memset(range, 0, sizeof *range);
    if (size == 0) {
        if (!is_unbound(binding))
            return dml_fail(E_INVALIDARG, "%s: %s: %s is bound but %s is 0", op->name, what, field, size_field);
        return S_OK;
    }
    if (is_unbound(binding))
        return dml_fail(E_INVALIDARG, "%s: %s: %s must be bound (%s is %llu)", op->name, what, field, size_field,
                        (unsigned long long)size);
    _Static_assert(DML_TEMPORARY_BUFFER_ALIGNMENT == DML_PERSISTENT_BUFFER_ALIGNMENT, "one alignment rule");
    return check_buffer(op->name, what, field, binding, size, DML_PERSISTENT_BUFFER_ALIGNMENT, element_alignment,
                        range);
}

static HRESULT bind_persistent(const DMLCompiledOperator* compiled, const char* what, const DML_BINDING_DESC* binding,
                               byte_range* range) {
    /* Kernels read the owned tensors in place: the resource's address must
     * suit their elements (their offsets in it are multiples of 256). */
    const DMLOperator* op = &compiled->op;
    uint32_t element_alignment = 1;
    for (uint32_t i = 0; i < op->input_count; i++)
        if (op->inputs[i].tensor.present && (op->inputs[i].tensor.flags & DML_TENSOR_FLAG_OWNED_BY_DML) &&
            dml_tensor_element_size(&op->inputs[i].tensor) > element_alignment)
            element_alignment = dml_tensor_element_size(&op->inputs[i].tensor);
    return bind_resource(compiled, what, "PersistentResource", binding, compiled->op.persistent_size, element_alignment,
                         range);
}

HRESULT dmlInitializeOperator(DMLCompiledOperator* compiled, UINT inputCount, const DML_BINDING_DESC* inputs,
                              const DML_BINDING_DESC* persistent) {
    dml_clear_error();
    if (compiled == NULL) return dml_fail(E_POINTER, "dmlInitializeOperator: compiled is NULL");
    DML_TRY(dml_check_device_usable(compiled->device, "dmlInitializeOperator"));
    const DMLOperator* op = &compiled->op;
    const char* what = "initialize";
    byte_range persistent_range;
    DML_TRY(bind_persistent(compiled, what, persistent, &persistent_range));
    if (compiled->op.persistent_size == 0) {
        if (inputCount != 0 && inputCount != op->input_count)
            return dml_fail(E_INVALIDARG, "%s: %s: %u input bindings given but the operator has %u input slots",
                            op->name, what, inputCount, op->input_count);
        for (UINT i = 0; i < inputCount; i++)
            if (inputs == NULL || !is_unbound(&inputs[i]))
                return dml_fail(E_INVALIDARG,
                                "%s: %s: input %u is bound but only OWNED_BY_DML inputs are bound at "
                                "initialization",
                                op->name, what, i);
        compiled->initialized = true;
        return S_OK;
    }
    if (inputCount != op->input_count || inputs == NULL)
        return dml_fail(E_INVALIDARG, "%s: %s: %u input bindings given but the operator has %u input slots", op->name,
                        what, inputCount, op->input_count);
    void* base = (void*)persistent_range.begin;
    for (uint32_t i = 0; i < op->input_count; i++) {
        const dml_tensor* tensor = &op->inputs[i].tensor;
        const char* field = op->inputs[i].field;
        bool owned = tensor->present && (tensor->flags & DML_TENSOR_FLAG_OWNED_BY_DML);
        if (!owned) {
            if (!is_unbound(&inputs[i]))
                return dml_fail(E_INVALIDARG,
                                "%s: %s: %s is not OWNED_BY_DML, so it is bound at dispatch, not at "
                                "initialization",
                                op->name, what, field);
            continue;
        }
        if (is_unbound(&inputs[i]))
            return dml_fail(E_INVALIDARG, "%s: %s: %s is OWNED_BY_DML and must be bound at initialization", op->name,
                            what, field);
        byte_range range;
        DML_TRY(check_buffer(op->name, what, field, &inputs[i], tensor->total_bytes, tensor->alignment,
                             dml_tensor_element_size(tensor), &range));
        if (ranges_overlap(&range, &persistent_range))
            return dml_fail(E_INVALIDARG, "%s: %s: %s overlaps the PersistentResource", op->name, what, field);
    }
    for (uint32_t i = 0; i < op->input_count; i++) {
        const dml_tensor* tensor = &op->inputs[i].tensor;
        if (!tensor->present || !(tensor->flags & DML_TENSOR_FLAG_OWNED_BY_DML)) continue;
        const DML_BUFFER_BINDING* buffer = inputs[i].Desc;
        HRESULT status =
            compiled->device->backend->copy(compiled->device, (char*)base + compiled->op.persistent_offsets[i],
                                            (const char*)buffer->Buffer + buffer->Offset, tensor->total_bytes);
        if (FAILED(status)) return status;
    }
    compiled->initialized = true;
    return S_OK;
}

/* The temporary resource overlaps none of `ranges`. */
static HRESULT check_temporary_apart(const DMLOperator* op, const byte_range* temporary, const byte_range* ranges,
                                     uint32_t count) {
    for (uint32_t i = 0; i < count; i++)
        if (ranges_overlap(temporary, &ranges[i]))
            return dml_fail(E_INVALIDARG, "%s: dispatch: the TemporaryResource overlaps %s", op->name, ranges[i].field);
    return S_OK;
}

HRESULT dmlDispatch(DMLCompiledOperator* compiled, const DML_DISPATCH_BINDINGS* bindings) {
    dml_clear_error();
    if (compiled == NULL || bindings == NULL) return dml_fail(E_POINTER, "dmlDispatch: NULL argument");
    DML_TRY(dml_check_device_usable(compiled->device, "dmlDispatch"));
    const DMLOperator* op = &compiled->op;
    if (!compiled->initialized)
        return dml_fail(E_INVALIDARG,
                        "%s: dispatch: the operator has OWNED_BY_DML inputs and was not initialized "
                        "(call dmlInitializeOperator first)",
                        op->name);

    byte_range persistent, temporary;
    DML_TRY(bind_persistent(compiled, "dispatch", &bindings->PersistentResource, &persistent));
    DML_TRY(bind_resource(compiled, "dispatch", "TemporaryResource", &bindings->TemporaryResource,
                          compiled->plan.temporary_size, 1, &temporary));

    dml_kernel_args args = {.op = op,
                            .plan = &compiled->plan,
                            .temporary = (void*)temporary.begin,
                            .flags = compiled->flags,
                            .device = compiled->device};
    byte_range inputs[DML_MAX_SLOTS], outputs[DML_MAX_SLOTS];
    uint32_t input_ranges = 0, output_ranges = 0;
    DML_TRY(bind_slots(compiled, false, bindings->InputCount, bindings->Inputs, (void*)persistent.begin, args.inputs,
                       inputs, &input_ranges));
    DML_TRY(bind_slots(compiled, true, bindings->OutputCount, bindings->Outputs, NULL, args.outputs, outputs,
                       &output_ranges));

    /* Overlap rules (spec §6.4, decision T-4): no operator here runs in place,
     * and the temporary resource is the dispatch's alone. */
    for (uint32_t o = 0; o < output_ranges; o++) {
        for (uint32_t i = 0; i < input_ranges; i++)
            if (ranges_overlap(&outputs[o], &inputs[i]))
                return dml_fail(E_INVALIDARG,
                                "%s: dispatch: output %s overlaps input %s (in-place execution is not "
                                "supported)",
                                op->name, outputs[o].field, inputs[i].field);
        for (uint32_t p = o + 1; p < output_ranges; p++)
            if (ranges_overlap(&outputs[o], &outputs[p]))
                return dml_fail(E_INVALIDARG, "%s: dispatch: outputs %s and %s overlap", op->name, outputs[o].field,
                                outputs[p].field);
        if (ranges_overlap(&outputs[o], &persistent))
            return dml_fail(E_INVALIDARG, "%s: dispatch: output %s overlaps the PersistentResource", op->name,
                            outputs[o].field);
    }
    DML_TRY(check_temporary_apart(op, &temporary, inputs, input_ranges));
    DML_TRY(check_temporary_apart(op, &temporary, outputs, output_ranges));
    DML_TRY(check_temporary_apart(op, &temporary, &persistent, 1));

    /* A kernel fails only for lack of resources or a backend fault; DirectML
     * then removes the device (spec §7.3). */
    HRESULT status = compiled->plan.impl->run(&args);
    if (FAILED(status)) return dml_device_remove(compiled->device, status, op->name);
    return status;
}
