/* fuzz_create: dmlCreateOperator on fuzzed descriptions of every operator
 * type libdml knows (and of unknown types, activations as operators, NULL
 * descriptions), on a device of a fuzzed feature level; what is created is
 * compiled with fuzzed execution flags, queried, dispatched without
 * bindings (which must fail) and released. Then dmlCheckFeatureSupport with
 * fuzzed features, sizes and queries.
 *
 * Invariants beyond ASan/UBSan/LSan:
 *   - create returns S_OK with an operator or E_INVALIDARG with NULL and a
 *     message that names the operator ("MAX_POOLING2: ...");
 *   - the description is unchanged by create, and the operator keeps no
 *     pointer into it (it is poisoned and freed right after create);
 *   - an operator has the binding slots of its schema (spec tensors.md §6.1);
 *   - no call removes the device. */
#include <stdio.h>
#include <string.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void check_failure(HRESULT status, const char* function, const char* expected_prefix) {
    const char* message = dmlGetLastErrorMessage();
    FUZZ_CHECK(status == E_INVALIDARG, "%s returned %s", function, dmlStatusName(status));
    size_t length = strlen(expected_prefix);
    FUZZ_CHECK(strncmp(message, expected_prefix, length) == 0 && message[length] == ':',
               "%s's message does not begin with '%s:': %s", function, expected_prefix, message);
    FUZZ_CHECK(strstr(message, "(null)") == NULL, "%s's message prints a NULL string: %s", function, message);
}

/* Execution flags: mostly known bits, sometimes unknown ones. */
static DML_EXECUTION_FLAGS execution_flags(uint8_t byte) {
    if (byte % 16 < 8) return (DML_EXECUTION_FLAGS)(byte % 8);
    return (DML_EXECUTION_FLAGS)((uint32_t)byte << 20 | (byte % 8));
}

static void compile_and_release(DMLDevice* device, DMLOperator* op, const dmlrun_op_schema* schema,
                                uint8_t flags_byte) {
    UINT inputs = 0, outputs = 0, schema_inputs = 0, schema_outputs = 0;
    for (size_t i = 0; i < schema->field_count; i++) {
        if (!dmlrun_field_is_tensor(schema->fields[i].kind)) continue;
        if (dmlrun_field_is_input(schema->fields[i].kind))
            schema_inputs++;
        else
            schema_outputs++;
    }
    FUZZ_CHECK(dmlGetOperatorSlotCounts(op, &inputs, &outputs) == S_OK, "dmlGetOperatorSlotCounts failed");
    FUZZ_CHECK(inputs == schema_inputs && outputs == schema_outputs,
               "%s has %u input and %u output slots but its description %u and %u tensor fields", schema->name, inputs,
               outputs, schema_inputs, schema_outputs);

    DML_EXECUTION_FLAGS flags = execution_flags(flags_byte);
    DMLCompiledOperator* compiled = (DMLCompiledOperator*)&flags; /* must be overwritten */
    HRESULT status = dmlCompileOperator(device, op, flags, &compiled);
    if (FAILED(status)) {
        FUZZ_CHECK(compiled == NULL, "a failed compile returned an operator");
        FUZZ_CHECK(flags & ~7u, "compiling with known flags 0x%x failed", (unsigned)flags);
        check_failure(status, "dmlCompileOperator", schema->name);
        return;
    }
    FUZZ_CHECK(!(flags & ~7u), "compiling with unknown flags 0x%x succeeded", (unsigned)flags);
    DML_BINDING_PROPERTIES properties;
    FUZZ_CHECK(dmlGetBindingProperties(compiled, &properties) == S_OK, "dmlGetBindingProperties failed");
    FUZZ_CHECK(properties.RequiredDescriptorCount == inputs + outputs, "RequiredDescriptorCount is %u",
               properties.RequiredDescriptorCount);
    FUZZ_CHECK(properties.PersistentResourceSize % DML_PERSISTENT_BUFFER_ALIGNMENT == 0,
               "PersistentResourceSize %llu is not a multiple of 256",
               (unsigned long long)properties.PersistentResourceSize);
    /* Every operator has a required tensor: a dispatch without bindings fails. */
    DML_DISPATCH_BINDINGS none;
    memset(&none, 0, sizeof none);
    status = dmlDispatch(compiled, &none);
    check_failure(status, "dmlDispatch without bindings", schema->name);
    dmlReleaseCompiledOperator(compiled);
}

/* dmlCheckFeatureSupport with a fuzzed feature, sizes and query; the
 * harness's buffers hold as many bytes (and levels) as it claims. */
static void check_feature_support(fuzz_input* in, DMLDevice* device) {
    DML_FEATURE feature = (DML_FEATURE)(fuzz_u8(in) % 3);
    UINT query_size = fuzz_u8(in) % 4 == 0 ? fuzz_u8(in) % 32 : (feature ? 16 : 4);
    UINT support_size = fuzz_u8(in) % 4 == 0 ? fuzz_u8(in) % 32 : 4;
    uint32_t level_count = fuzz_u8(in) % 8;
    DML_FEATURE_LEVEL levels[8];
    for (uint32_t i = 0; i < level_count; i++)
        levels[i] = fuzz_feature_level(in);
    union {
        DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT data_type;
        DML_FEATURE_QUERY_FEATURE_LEVELS levels;
        unsigned char bytes[32];
    } query;
    unsigned char support[32];
    memset(&query, 0, sizeof query);
    if (feature == DML_FEATURE_FEATURE_LEVELS) {
        query.levels.RequestedFeatureLevelCount = level_count;
        query.levels.RequestedFeatureLevels = fuzz_u8(in) % 8 == 7 ? NULL : levels;
    } else {
        query.data_type.DataType = (DML_TENSOR_DATA_TYPE)fuzz_u8(in);
    }
    HRESULT status = dmlCheckFeatureSupport(device, feature, query_size, &query, support_size, support);
    FUZZ_CHECK(status == S_OK || status == E_INVALIDARG, "dmlCheckFeatureSupport returned %s", dmlStatusName(status));
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz_input in = {data, size, 0};
    DML_DEVICE_DESC device_desc;
    memset(&device_desc, 0, sizeof device_desc);
    device_desc.Backend = DML_BACKEND_CPU;
    device_desc.FeatureLevel = fuzz_feature_level(&in);
    device_desc.ThreadCount = 1;
    DMLDevice* device = NULL;
    HRESULT status = dmlCreateDevice(&device_desc, &device);
    if (FAILED(status)) {
        FUZZ_CHECK(device == NULL, "a failed dmlCreateDevice returned a device");
        FUZZ_CHECK(status == E_INVALIDARG || status == DXGI_ERROR_UNSUPPORTED, "dmlCreateDevice returned %s",
                   dmlStatusName(status));
        return 0;
    }

    fuzz_arena arena = {NULL};
    const dmlrun_op_schema* schema = NULL;
    const DML_OPERATOR_DESC* desc = fuzz_decode_operator(&in, &arena, &schema);
    uint8_t flags_byte = fuzz_u8(&in);
    const char* name = desc ? dmlOperatorTypeName(desc->Type) : NULL;
    unsigned type = desc ? (unsigned)desc->Type : 0u;
    if (fuzz_verbose()) fuzz_print_operator(desc);
    uint64_t checksum = fuzz_arena_checksum(&arena);
    DMLOperator* op = (DMLOperator*)&in; /* must be overwritten */
    status = dmlCreateOperator(device, desc, &op);
    FUZZ_CHECK(fuzz_arena_checksum(&arena) == checksum, "dmlCreateOperator changed the description");
    /* The operator holds deep copies only (spec tensors.md §5). */
    fuzz_arena_release(&arena);
    if (fuzz_verbose()) fprintf(stderr, "dmlCreateOperator: %s %s\n", dmlStatusName(status), dmlGetLastErrorMessage());

    if (FAILED(status)) {
        FUZZ_CHECK(op == NULL, "a failed dmlCreateOperator returned an operator");
        check_failure(status, "dmlCreateOperator", name ? name : "dmlCreateOperator");
    } else {
        FUZZ_CHECK(op != NULL && name != NULL && schema != NULL, "dmlCreateOperator succeeded for type %u", type);
        compile_and_release(device, op, schema, flags_byte);
        dmlReleaseOperator(op);
    }
    check_feature_support(&in, device);
    FUZZ_CHECK(dmlGetDeviceRemovedReason(device) == S_OK, "the device was removed");
    dmlReleaseDevice(device);
    return 0;
}
