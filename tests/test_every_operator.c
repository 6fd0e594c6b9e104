/* Every operator type, through its whole lifecycle, in every data type it
 * accepts (issue #7). The descriptions are the dispatchables of the example
 * models (examples/models: every operator and every fusable activation),
 * read with dmlrun's loader; the tensor fields come from dmlrun's operator
 * schemas (tools/dmlrun/op_schema.h).
 *
 * - every_data_type: each description again in every numeric data type,
 *   for the values and for the indices (pooling indices, batch indices):
 *   exactly the spec's types are accepted (the highest feature level), and
 *   each accepted combination runs with guard bytes around every buffer
 *   (checked), poisoned outputs whose unaddressed bytes must stay poisoned,
 *   and inputs that must come back bit-identical (test_run).
 * - lifecycle_and_error_paths: creation failing at every tensor field,
 *   compile failing, dispatches failing (counts, sizes) and succeeding after
 *   the operator is released, OWNED_BY_DML on every input in turn (dispatch
 *   before initialization, initialization without the persistent resource,
 *   the owned input bound at dispatch; then a result bit-identical to the
 *   plain run's). Under ASan (build-asan, detect_leaks=1) LeakSanitizer sees
 *   every one of these paths. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dmlrun.h"
#include "harness.h"

enum { MAX_TENSORS = 8, MAX_MODELS = 64, MAX_DESC_BYTES = 256 };

/* ---- The example models ---- */

typedef struct models {
    dmlrun_model list[MAX_MODELS];
    size_t count;
} models;

static int compare_names(const void* a, const void* b) {
    return strcmp(*(const char* const*)a, *(const char* const*)b);
}

static void load_models(models* m) {
    memset(m, 0, sizeof *m);
    DIR* directory = opendir(DML_EXAMPLE_MODELS_DIR);
    EXPECT(directory != NULL, "cannot open %s", DML_EXAMPLE_MODELS_DIR);
    if (directory == NULL) return;
    char* names[MAX_MODELS];
    size_t count = 0;
    for (struct dirent* entry; (entry = readdir(directory)) != NULL && count < MAX_MODELS;) {
        size_t length = strlen(entry->d_name);
        if (length > 5 && strcmp(entry->d_name + length - 5, ".json") == 0) names[count++] = strdup(entry->d_name);
    }
    closedir(directory);
    qsort(names, count, sizeof names[0], compare_names);
    for (size_t i = 0; i < count; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", DML_EXAMPLE_MODELS_DIR, names[i]);
        EXPECT(dmlrun_load_model(&m->list[m->count], path), "the example model %s does not load", path);
        m->count++;
        free(names[i]);
    }
}

static void free_models(models* m) {
    for (size_t i = 0; i < m->count; i++)
        dmlrun_model_free(&m->list[i]);
}

/* ---- One description, rebuilt with its own tensors and buffers ---- */

typedef struct instance {
    const dmlrun_dispatchable* template;
    const dmlrun_op_schema* schema;
    unsigned char desc[MAX_DESC_BYTES]; /* a copy of the template's struct, pointing at tensors[] */
    DML_OPERATOR_DESC op;
    uint32_t tensor_count, input_count, output_count;
    const dmlrun_field* fields[MAX_TENSORS];
    bool is_output[MAX_TENSORS], present[MAX_TENSORS];
    test_tensor tensors[MAX_TENSORS];
    test_buffer buffers[MAX_TENSORS];
    test_buffer temporary; /* the compiled operator's TemporaryResource, when it needs one */
} instance;

static const DML_BUFFER_TENSOR_DESC* template_tensor(const instance* in, uint32_t t) {
    const DML_TENSOR_DESC* tensor;
    memcpy(&tensor, (const char*)in->template->desc.Desc + in->fields[t]->offset, sizeof tensor);
    return tensor ? tensor->Desc : NULL;
}

static void set_tensor_field(instance* in, uint32_t t, const DML_TENSOR_DESC* tensor) {
    memcpy(in->desc + in->fields[t]->offset, &tensor, sizeof tensor);
}

/* The tensors of the template: value tensors (the type of the first present
 * tensor) become value_type, the others (indices) index_type; random
 * layouts (no broadcasting for outputs); inputs filled (integer inputs with
 * 0 or 1: valid batch indices), outputs poisoned. */
static void instance_init(instance* in, const dmlrun_dispatchable* template, DML_TENSOR_DATA_TYPE value_type,
                          DML_TENSOR_DATA_TYPE index_type) {
    memset(in, 0, sizeof *in);
    in->template = template;
    in->schema = template->schema;
    EXPECT(in->schema->desc_size <= MAX_DESC_BYTES, "%s: description too large", in->schema->name);
    memcpy(in->desc, template->desc.Desc, in->schema->desc_size);
    in->op = (DML_OPERATOR_DESC){template->desc.Type, in->desc};
    for (size_t i = 0; i < in->schema->field_count && in->tensor_count < MAX_TENSORS; i++) {
        const dmlrun_field* field = &in->schema->fields[i];
        if (!dmlrun_field_is_tensor(field->kind)) continue;
        uint32_t t = in->tensor_count++;
        in->fields[t] = field;
        in->is_output[t] = !dmlrun_field_is_input(field->kind);
        in->input_count += !in->is_output[t];
        in->output_count += in->is_output[t];
    }
    DML_TENSOR_DATA_TYPE template_value_type = DML_TENSOR_DATA_TYPE_UNKNOWN;
    for (uint32_t t = 0; t < in->tensor_count && !template_value_type; t++)
        if (template_tensor(in, t)) template_value_type = template_tensor(in, t)->DataType;
    for (uint32_t t = 0; t < in->tensor_count; t++) {
        const DML_BUFFER_TENSOR_DESC* source = template_tensor(in, t);
        if (source == NULL) continue;
        in->present[t] = true;
        DML_TENSOR_DATA_TYPE type = source->DataType == template_value_type ? value_type : index_type;
        test_tensor_init(&in->tensors[t], type, source->DimensionCount, source->Sizes,
                         test_random_layout(!in->is_output[t]));
        set_tensor_field(in, t, &in->tensors[t].desc);
        uint64_t size = in->tensors[t].buffer.TotalTensorSizeInBytes;
        test_buffer_alloc(&in->buffers[t], size ? size : 4);
        if (in->is_output[t]) continue;
        if (test_type_is_float(type)) {
            test_fill_random(&in->buffers[t], &in->tensors[t], -2, 2);
        } else {
            for (uint64_t e = 0; e < in->tensors[t].element_count; e++)
                test_store(type, in->buffers[t].data, test_tensor_offset(&in->tensors[t], e), (double)(e % 2));
        }
    }
}

static void instance_free(instance* in) {
    for (uint32_t t = 0; t < in->tensor_count; t++)
        if (in->present[t]) test_buffer_free(&in->buffers[t]);
    if (in->temporary.block) test_buffer_free(&in->temporary);
}

/* Allocates the TemporaryResource that `compiled` reports, if any. */
static void instance_allocate_temporary(instance* in, const DMLCompiledOperator* compiled) {
    DML_BINDING_PROPERTIES properties;
    EXPECT_STATUS(dmlGetBindingProperties(compiled, &properties), S_OK, NULL);
    if (properties.TemporaryResourceSize > 0) test_buffer_alloc(&in->temporary, properties.TemporaryResourceSize);
}

/* test_run over the instance's buffers (absent tensors bound as NONE). */
static HRESULT instance_run(instance* in, DMLDevice* device) {
    test_buffer* inputs[MAX_TENSORS];
    test_buffer* outputs[MAX_TENSORS];
    uint32_t i = 0, o = 0;
    for (uint32_t t = 0; t < in->tensor_count; t++) {
        test_buffer* b = in->present[t] ? &in->buffers[t] : NULL;
        if (in->is_output[t])
            outputs[o++] = b;
        else
            inputs[i++] = b;
    }
    return test_run(device, &in->op, in->input_count, inputs, in->output_count, outputs);
}

/* Guards of every buffer, unaddressed output bytes. */
static void check_buffers(const instance* in, const char* what) {
    for (uint32_t t = 0; t < in->tensor_count; t++) {
        if (!in->present[t]) continue;
        char name[512];
        snprintf(name, sizeof name, "%.300s %s", what, in->fields[t]->name);
        test_buffer_check_guards(&in->buffers[t], name);
        if (in->is_output[t]) test_buffer_check_unaddressed(&in->buffers[t], &in->tensors[t], name);
    }
}

/* ---- Data types ---- */

static const DML_TENSOR_DATA_TYPE numeric_types[] = {
    DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_FLOAT16, DML_TENSOR_DATA_TYPE_FLOAT64,
    DML_TENSOR_DATA_TYPE_UINT8,   DML_TENSOR_DATA_TYPE_INT8,    DML_TENSOR_DATA_TYPE_UINT16,
    DML_TENSOR_DATA_TYPE_INT16,   DML_TENSOR_DATA_TYPE_UINT32,  DML_TENSOR_DATA_TYPE_INT32,
    DML_TENSOR_DATA_TYPE_UINT64,  DML_TENSOR_DATA_TYPE_INT64};

#define BIT(type) (1u << DML_TENSOR_DATA_TYPE_##type)
#define FLOATS (BIT(FLOAT32) | BIT(FLOAT16))
#define POOLING_VALUES                                                                                                 \
    (FLOATS | BIT(INT8) | BIT(UINT8) | BIT(INT16) | BIT(UINT16) | BIT(INT32) | BIT(UINT32) | BIT(INT64) | BIT(UINT64))

/* The spec's data types at the highest feature level (max_pooling.md §2,
 * roi_pooling.md, roi_align.md §2, batch_normalization.md §2). */
static void expected_types(DML_OPERATOR_TYPE type, uint32_t* values, uint32_t* indices) {
    *indices = 0;
    switch (type) {
    case DML_OPERATOR_MAX_POOLING: *values = POOLING_VALUES; break;
    case DML_OPERATOR_MAX_POOLING1:
    case DML_OPERATOR_MAX_POOLING2:
        *values = POOLING_VALUES;
        *indices = BIT(UINT32) | BIT(UINT64);
        break;
    case DML_OPERATOR_ROI_ALIGN:
    case DML_OPERATOR_ROI_ALIGN1:
        *values = FLOATS;
        *indices = BIT(UINT32) | BIT(UINT64);
        break;
    case DML_OPERATOR_ROI_ALIGN_GRAD:
        *values = FLOATS;
        *indices = BIT(UINT32);
        break;
    default: *values = FLOATS; break; /* MAX_POOLING_GRAD, ROI_POOLING, the batch normalization family */
    }
}

/* The template's index type, or UNKNOWN when all its tensors have one type. */
static DML_TENSOR_DATA_TYPE template_index_type(const instance* in) {
    DML_TENSOR_DATA_TYPE value = DML_TENSOR_DATA_TYPE_UNKNOWN;
    for (uint32_t t = 0; t < in->tensor_count; t++) {
        const DML_BUFFER_TENSOR_DESC* tensor = template_tensor(in, t);
        if (tensor == NULL) continue;
        if (value == DML_TENSOR_DATA_TYPE_UNKNOWN)
            value = tensor->DataType;
        else if (tensor->DataType != value)
            return tensor->DataType;
    }
    return DML_TENSOR_DATA_TYPE_UNKNOWN;
}

/* Creates and runs the template in (value_type, index_type); true when accepted. */
static bool try_types(DMLDevice* device, const dmlrun_dispatchable* template, DML_TENSOR_DATA_TYPE value_type,
                      DML_TENSOR_DATA_TYPE index_type) {
    instance in;
    instance_init(&in, template, value_type, index_type);
    char what[160];
    snprintf(what, sizeof what, "%s (%s) %s/%s", template->name, in.schema->name, dmlDataTypeName(value_type),
             index_type ? dmlDataTypeName(index_type) : "-");
    HRESULT status = instance_run(&in, device);
    if (FAILED(status)) {
        EXPECT(status == E_INVALIDARG && strstr(dmlGetLastErrorMessage(), "DataType") != NULL,
               "%s: rejected with %s: %s", what, dmlStatusName(status), dmlGetLastErrorMessage());
    } else {
        check_buffers(&in, what);
    }
    instance_free(&in);
    return SUCCEEDED(status);
}

TEST_CASE(every_data_type) {
    models m;
    load_models(&m);
    DMLDevice* device = test_device(0);
    static const DML_OPERATOR_TYPE operators[] = {DML_OPERATOR_MAX_POOLING,
                                                  DML_OPERATOR_MAX_POOLING1,
                                                  DML_OPERATOR_MAX_POOLING2,
                                                  DML_OPERATOR_MAX_POOLING_GRAD,
                                                  DML_OPERATOR_ROI_POOLING,
                                                  DML_OPERATOR_ROI_ALIGN,
                                                  DML_OPERATOR_ROI_ALIGN1,
                                                  DML_OPERATOR_ROI_ALIGN_GRAD,
                                                  DML_OPERATOR_BATCH_NORMALIZATION,
                                                  DML_OPERATOR_BATCH_NORMALIZATION_TRAINING,
                                                  DML_OPERATOR_BATCH_NORMALIZATION_GRAD,
                                                  DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD};
    bool seen[sizeof operators / sizeof operators[0]] = {false};
    for (size_t i = 0; i < m.count; i++)
        for (size_t d = 0; d < m.list[i].dispatchable_count; d++) {
            const dmlrun_dispatchable* template = &m.list[i].dispatchables[d];
            instance probe;
            instance_init(&probe, template, DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_UNKNOWN);
            DML_TENSOR_DATA_TYPE index_type = template_index_type(&probe);
            instance_free(&probe);
            uint32_t values = 0, indices = 0, expected_values, expected_indices;
            expected_types(template->desc.Type, &expected_values, &expected_indices);
            for (size_t v = 0; v < sizeof numeric_types / sizeof numeric_types[0]; v++)
                if (try_types(device, template, numeric_types[v], index_type)) values |= 1u << numeric_types[v];
            if (index_type != DML_TENSOR_DATA_TYPE_UNKNOWN)
                for (size_t x = 0; x < sizeof numeric_types / sizeof numeric_types[0]; x++)
                    if (try_types(device, template, DML_TENSOR_DATA_TYPE_FLOAT32, numeric_types[x]))
                        indices |= 1u << numeric_types[x];
            EXPECT(values == expected_values, "%s (%s): value types 0x%x accepted, the spec's are 0x%x", template->name,
                   template->schema->name, values, expected_values);
            if (index_type != DML_TENSOR_DATA_TYPE_UNKNOWN)
                EXPECT(indices == expected_indices, "%s (%s): index types 0x%x accepted, the spec's are 0x%x",
                       template->name, template->schema->name, indices, expected_indices);
            for (size_t k = 0; k < sizeof operators / sizeof operators[0]; k++)
                seen[k] |= operators[k] == template->desc.Type;
        }
    for (size_t k = 0; k < sizeof operators / sizeof operators[0]; k++)
        EXPECT(seen[k], "no example model has a %s", dmlOperatorTypeName(operators[k]));
    dmlReleaseDevice(device);
    free_models(&m);
}

/* ---- The lifecycle and its error paths ---- */

/* Creation fails at every tensor field: an unknown data type, and NULL
 * where the field is required. The message names the field. */
static void creation_errors(DMLDevice* device, const dmlrun_dispatchable* template) {
    for (uint32_t t = 0; t < MAX_TENSORS; t++) {
        instance in;
        instance_init(&in, template, DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_UINT32);
        if (t < in.tensor_count && in.present[t]) {
            DMLOperator* op = NULL;
            in.tensors[t].buffer.DataType = DML_TENSOR_DATA_TYPE_UNKNOWN;
            EXPECT_STATUS(dmlCreateOperator(device, &in.op, &op), E_INVALIDARG, in.schema->name, in.fields[t]->name);
            EXPECT(op == NULL, "%s: a failed create returned an operator", template->name);
            if (!dmlrun_field_is_optional(in.fields[t]->kind)) {
                set_tensor_field(&in, t, NULL);
                EXPECT_STATUS(dmlCreateOperator(device, &in.op, &op), E_INVALIDARG, in.schema->name,
                              in.fields[t]->name);
            }
        }
        instance_free(&in);
    }
}

/* Bindings of every present tensor of in (owned inputs left NONE). */
typedef struct manual_bindings {
    DML_BUFFER_BINDING buffers[MAX_TENSORS], temporary;
    DML_BINDING_DESC inputs[MAX_TENSORS + 1], outputs[MAX_TENSORS + 1];
    DML_DISPATCH_BINDINGS bindings;
} manual_bindings;

static void bind_all(manual_bindings* b, instance* in, uint32_t owned) {
    memset(b, 0, sizeof *b);
    uint32_t i = 0, o = 0;
    for (uint32_t t = 0; t < in->tensor_count; t++) {
        DML_BINDING_DESC* desc = in->is_output[t] ? &b->outputs[o++] : &b->inputs[i++];
        if (!in->present[t] || t == owned) continue;
        b->buffers[t] = (DML_BUFFER_BINDING){in->buffers[t].data, 0, in->buffers[t].size};
        *desc = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &b->buffers[t]};
    }
    b->bindings = (DML_DISPATCH_BINDINGS){
        i, b->inputs, o, b->outputs, {DML_BINDING_TYPE_NONE, NULL}, {DML_BINDING_TYPE_NONE, NULL}};
    if (in->temporary.block) {
        b->temporary = (DML_BUFFER_BINDING){in->temporary.data, 0, in->temporary.size};
        b->bindings.TemporaryResource = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &b->temporary};
    }
}

/* Create, failing compile, compile, release the operator, failing
 * dispatches (they write nothing), a dispatch, release. */
static void plain_lifecycle(DMLDevice* device, const dmlrun_dispatchable* template) {
    instance in;
    instance_init(&in, template, DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_UINT32);
    const char* name = in.schema->name;
    DMLOperator* op = NULL;
    DMLCompiledOperator* compiled = NULL;
    EXPECT_STATUS(dmlCreateOperator(device, &in.op, &op), S_OK, NULL);
    EXPECT_STATUS(dmlCompileOperator(device, op, (DML_EXECUTION_FLAGS)0x100, &compiled), E_INVALIDARG, name, "flags");
    EXPECT_STATUS(dmlCompileOperator(device, op, template->flags, &compiled), S_OK, NULL);
    dmlReleaseOperator(op);
    if (compiled == NULL) {
        instance_free(&in);
        return;
    }
    EXPECT_STATUS(dmlInitializeOperator(compiled, 0, NULL, NULL), S_OK, NULL);
    instance_allocate_temporary(&in, compiled);
    manual_bindings b;
    bind_all(&b, &in, MAX_TENSORS);
    b.bindings.InputCount++;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, name, "bindings given");
    if (in.temporary.block) { /* a workspace is required */
        bind_all(&b, &in, MAX_TENSORS);
        b.bindings.TemporaryResource = (DML_BINDING_DESC){DML_BINDING_TYPE_NONE, NULL};
        EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, name, "TemporaryResource must be bound");
        bind_all(&b, &in, MAX_TENSORS);
        b.temporary.SizeInBytes--;
        EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, name, "TemporaryResource", "SizeInBytes");
    }
    bind_all(&b, &in, MAX_TENSORS);
    uint32_t first_output = 0;
    while (!in.is_output[first_output] || !in.present[first_output])
        first_output++;
    b.buffers[first_output].SizeInBytes -= 4;
    uint8_t* before[MAX_TENSORS] = {NULL};
    for (uint32_t t = 0; t < in.tensor_count; t++)
        if (in.present[t]) {
            before[t] = malloc(in.buffers[t].size + 2 * TEST_GUARD_BYTES);
            memcpy(before[t], in.buffers[t].block, in.buffers[t].size + 2 * TEST_GUARD_BYTES);
        }
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, name, in.fields[first_output]->name, "SizeInBytes");
    for (uint32_t t = 0; t < in.tensor_count; t++)
        if (in.present[t]) {
            EXPECT(memcmp(before[t], in.buffers[t].block, in.buffers[t].size + 2 * TEST_GUARD_BYTES) == 0,
                   "%s: a failed dispatch changed %s", template->name, in.fields[t]->name);
            free(before[t]);
        }
    bind_all(&b, &in, MAX_TENSORS);
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), S_OK, NULL);
    check_buffers(&in, template->name);
    dmlReleaseCompiledOperator(compiled);
    EXPECT(dmlGetDeviceRemovedReason(device) == S_OK, "%s: the device was removed", template->name);
    instance_free(&in);
}

/* OWNED_BY_DML on input t: the persistent resource's path gives the plain
 * run's bytes. */
static void owned_lifecycle(DMLDevice* device, const dmlrun_dispatchable* template, uint32_t owned) {
    instance plain, in;
    instance_init(&in, template, DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_UINT32);
    if (owned >= in.tensor_count || in.is_output[owned] || !in.present[owned]) {
        instance_free(&in);
        return;
    }
    /* The same description and inputs, without the flag, for the expected bytes. */
    plain = in;
    for (uint32_t t = 0; t < in.tensor_count; t++) {
        if (!in.present[t]) continue;
        plain.tensors[t].buffer.Sizes = plain.tensors[t].sizes;
        if (plain.tensors[t].buffer.Strides) plain.tensors[t].buffer.Strides = plain.tensors[t].strides;
        plain.tensors[t].desc.Desc = &plain.tensors[t].buffer;
        set_tensor_field(&plain, t, &plain.tensors[t].desc);
        test_buffer_alloc(&plain.buffers[t], in.buffers[t].size);
        memcpy(plain.buffers[t].block, in.buffers[t].block, in.buffers[t].size + 2 * TEST_GUARD_BYTES);
    }
    plain.op.Desc = plain.desc;
    EXPECT_STATUS(instance_run(&plain, device), S_OK, NULL);

    const char* name = in.schema->name;
    in.tensors[owned].buffer.Flags = DML_TENSOR_FLAG_OWNED_BY_DML;
    DMLOperator* op = NULL;
    DMLCompiledOperator* compiled = NULL;
    EXPECT_STATUS(dmlCreateOperator(device, &in.op, &op), S_OK, NULL);
    if (op) EXPECT_STATUS(dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &compiled), S_OK, NULL);
    dmlReleaseOperator(op);
    if (compiled == NULL) {
        instance_free(&in);
        instance_free(&plain);
        return;
    }
    DML_BINDING_PROPERTIES properties;
    EXPECT_STATUS(dmlGetBindingProperties(compiled, &properties), S_OK, NULL);
    EXPECT(properties.PersistentResourceSize >= in.tensors[owned].buffer.TotalTensorSizeInBytes,
           "%s: PersistentResourceSize %llu", name, (unsigned long long)properties.PersistentResourceSize);
    test_buffer persistent;
    test_buffer_alloc(&persistent, properties.PersistentResourceSize);
    instance_allocate_temporary(&in, compiled);
    DML_BUFFER_BINDING persistent_buffer = {persistent.data, 0, persistent.size};
    DML_BINDING_DESC persistent_binding = {DML_BINDING_TYPE_BUFFER, &persistent_buffer};

    manual_bindings b;
    bind_all(&b, &in, owned);
    b.bindings.PersistentResource = persistent_binding;
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), E_INVALIDARG, name, "not initialized");

    DML_BUFFER_BINDING owned_buffer = {in.buffers[owned].data, 0, in.buffers[owned].size};
    DML_BINDING_DESC init[MAX_TENSORS];
    uint32_t slot = 0;
    for (uint32_t t = 0; t < in.tensor_count; t++) {
        if (in.is_output[t]) continue;
        init[slot++] = t == owned ? (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &owned_buffer}
                                  : (DML_BINDING_DESC){DML_BINDING_TYPE_NONE, NULL};
    }
    EXPECT_STATUS(dmlInitializeOperator(compiled, in.input_count, init, NULL), E_INVALIDARG, name,
                  "PersistentResource");
    EXPECT_STATUS(dmlInitializeOperator(compiled, in.input_count, init, &persistent_binding), S_OK, NULL);
    test_buffer_check_guards(&persistent, "PersistentResource");
    /* The captured copy is what counts now. */
    memset(in.buffers[owned].data, 0xCD, in.buffers[owned].size);

    manual_bindings wrong;
    bind_all(&wrong, &in, MAX_TENSORS);
    wrong.bindings.PersistentResource = persistent_binding;
    EXPECT_STATUS(dmlDispatch(compiled, &wrong.bindings), E_INVALIDARG, name, "OWNED_BY_DML");
    EXPECT_STATUS(dmlDispatch(compiled, &b.bindings), S_OK, NULL);
    for (uint32_t t = 0; t < in.tensor_count; t++)
        if (in.is_output[t] && in.present[t])
            EXPECT(memcmp(in.buffers[t].block, plain.buffers[t].block, in.buffers[t].size + 2 * TEST_GUARD_BYTES) == 0,
                   "%s (%s) with %s OWNED_BY_DML: %s differs from the plain run's", template->name, name,
                   in.fields[owned]->name, in.fields[t]->name);
    test_buffer_check_guards(&persistent, "PersistentResource");
    test_buffer_free(&persistent);
    dmlReleaseCompiledOperator(compiled);
    instance_free(&in);
    instance_free(&plain);
}

TEST_CASE(lifecycle_and_error_paths) {
    models m;
    load_models(&m);
    DMLDevice* device = test_device(0);
    for (size_t i = 0; i < m.count; i++)
        for (size_t d = 0; d < m.list[i].dispatchable_count && !test_case_failed(); d++) {
            const dmlrun_dispatchable* template = &m.list[i].dispatchables[d];
            creation_errors(device, template);
            plain_lifecycle(device, template);
            for (uint32_t t = 0; t < MAX_TENSORS; t++)
                owned_lifecycle(device, template, t);
        }
    dmlReleaseDevice(device);
    free_models(&m);
}
