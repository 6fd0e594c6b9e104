/* Commands (spec model-format.md, "Commands"): bindings are checked when the
 * model is read, so that a run stops before its first dispatch when any
 * command is wrong; then the device is set up and the commands run. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "npy.h"
#include "values.h"

/* ---- Bindings ---- */

static const char* tensor_field_list(const dmlrun_dispatchable* dispatchable, char* list, size_t capacity) {
    size_t used = 0;
    list[0] = '\0';
    for (uint32_t t = 0; t < dispatchable->tensor_count && used < capacity; t++)
        used +=
            (size_t)snprintf(list + used, capacity - used, "%s%s", t ? ", " : "", dispatchable->tensors[t].field->name);
    return list;
}

/* One binding: "resource", {"name", "elementOffset", "elementSizeInBytes", ...}
 * or a one-element array of either (DxDispatch's buffer-array form). */
static bool parse_binding(const dmlrun_model* model, const dmlrun_tensor_info* tensor, const cJSON* value,
                          const char* place, dmlrun_binding* binding) {
    if (cJSON_IsArray(value)) {
        size_t length = 0;
        for (const cJSON* element = value->child; element != NULL; element = element->next)
            length++;
        if (length != 1)
            return dmlrun_fail(place, "binds %zu resources but a DirectML operator tensor takes exactly one", length);
        char element_place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_index(element_place, place, 0);
        return parse_binding(model, tensor, value->child, element_place, binding);
    }
    const char* name;
    uint64_t element_offset = 0, element_size = 0;
    char member_place[DMLRUN_PLACE_CAPACITY];
    if (cJSON_IsString(value)) {
        name = value->valuestring;
    } else if (cJSON_IsObject(value)) {
        /* elementCount, format and shape describe HLSL views and ONNX tensors; DirectML operators ignore them. */
        static const char* const members[] = {"name",  "elementOffset", "elementSizeInBytes", "elementCount", "format",
                                              "shape", "counter",       "counterOffsetBytes"};
        if (!dmlrun_json_check_object(value, place, members, sizeof members / sizeof members[0], "a binding"))
            return false;
        dmlrun_place_member(member_place, place, "name");
        const cJSON* name_json = dmlrun_json_member(value, "name");
        if (name_json == NULL) return dmlrun_fail(member_place, "required field is missing (a resource name)");
        if (!dmlrun_json_string(name_json, member_place, &name)) return false;
        if (dmlrun_json_member(value, "counter") || dmlrun_json_member(value, "counterOffsetBytes")) {
            dmlrun_place_member(member_place, place, "counter");
            return dmlrun_fail(member_place, "counter resources belong to HLSL dispatchables");
        }
        const cJSON* offset_json = dmlrun_json_member(value, "elementOffset");
        dmlrun_place_member(member_place, place, "elementOffset");
        if (offset_json != NULL && !dmlrun_json_uint64(offset_json, member_place, &element_offset)) return false;
        const cJSON* size_json = dmlrun_json_member(value, "elementSizeInBytes");
        dmlrun_place_member(member_place, place, "elementSizeInBytes");
        if (size_json != NULL && !dmlrun_json_uint64(size_json, member_place, &element_size)) return false;
    } else {
        return dmlrun_fail(place,
                           "must be a resource name or an object {\"name\": ..., \"elementOffset\": ...}, not %s",
                           dmlrun_json_kind(value));
    }
    size_t index = dmlrun_find_resource(model, name);
    if (index == SIZE_MAX) return dmlrun_fail(place, "there is no resource named '%s'", name);
    const dmlrun_resource* resource = &model->resources[index];
    /* As in DxDispatch, elementOffset counts elements of elementSizeInBytes,
     * which defaults to the size of the resource's initialValuesDataType. */
    if (element_size == 0) element_size = dmlrun_value_size(resource->type);
    if (element_offset != 0 && element_size > UINT64_MAX / element_offset)
        return dmlrun_fail(place, "elementOffset %" PRIu64 " overflows", element_offset);
    uint64_t offset = element_offset * element_size;
    if (offset > resource->size_bytes)
        return dmlrun_fail(place,
                           "elementOffset %" PRIu64 " (byte %" PRIu64 ") is beyond the end of resource '%s' (%" PRIu64
                           " bytes)",
                           element_offset, offset, name, resource->size_bytes);
    if (tensor->total_bytes > resource->size_bytes - offset)
        return dmlrun_fail(place,
                           "resource '%s' is too small: %s needs %" PRIu64 " bytes (TotalTensorSizeInBytes) "
                           "but the resource has %" PRIu64 " bytes from byte %" PRIu64,
                           name, tensor->field->name, tensor->total_bytes, resource->size_bytes - offset, offset);
    binding->bound = true;
    binding->resource = index;
    binding->offset_bytes = offset;
    return true;
}

/* A "bindings" object: tensor field name -> resource. At initialization only
 * OWNED_BY_DML inputs are bound; at dispatch every other present tensor. */
static bool parse_bindings(const dmlrun_model* model, const dmlrun_dispatchable* dispatchable, const cJSON* json,
                           const char* place, bool initialization, dmlrun_binding* bindings) {
    char list[512];
    if (!cJSON_IsObject(json))
        return dmlrun_fail(place, "must be an object (tensor field name -> resource), not %s", dmlrun_json_kind(json));
    for (const cJSON* member = json->child; member != NULL; member = member->next) {
        char member_place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_member(member_place, place, member->string);
        uint32_t t = 0;
        while (t < dispatchable->tensor_count && strcmp(dispatchable->tensors[t].field->name, member->string) != 0)
            t++;
        if (t == dispatchable->tensor_count)
            return dmlrun_fail(member_place, "'%s' is not a tensor field of %s (its tensor fields: %s)", member->string,
                               dispatchable->schema->name, tensor_field_list(dispatchable, list, sizeof list));
        const dmlrun_tensor_info* tensor = &dispatchable->tensors[t];
        if (!tensor->present)
            return dmlrun_fail(member_place, "%s is absent from the description of '%s', so it must not be bound",
                               member->string, dispatchable->name);
        bool owned = !tensor->is_output && (tensor->flags & DML_TENSOR_FLAG_OWNED_BY_DML);
        if (initialization && !owned)
            return dmlrun_fail(member_place,
                               "only OWNED_BY_DML input tensors are bound at initialization; bind %s in "
                               "the dispatch command",
                               member->string);
        if (!initialization && owned)
            return dmlrun_fail(member_place,
                               "%s is OWNED_BY_DML: bind it in the dispatchable's \"bindings\" "
                               "(initialization), not at dispatch",
                               member->string);
        if (!parse_binding(model, tensor, member, member_place, &bindings[t])) return false;
    }
    for (uint32_t t = 0; t < dispatchable->tensor_count; t++) {
        const dmlrun_tensor_info* tensor = &dispatchable->tensors[t];
        bool owned = !tensor->is_output && (tensor->flags & DML_TENSOR_FLAG_OWNED_BY_DML);
        if (!tensor->present || bindings[t].bound || owned != initialization) continue;
        if (initialization)
            return dmlrun_fail(place, "%s is OWNED_BY_DML and must be bound here, at initialization",
                               tensor->field->name);
        return dmlrun_fail(place, "%s is %s but not bound", tensor->field->name,
                           dmlrun_field_is_optional(tensor->field->kind) ? "in the description" : "required");
    }
    return true;
}

/* ---- Parsing the commands ---- */

static bool command_resource(const dmlrun_model* model, const cJSON* json, const char* place, size_t* index) {
    char member_place[DMLRUN_PLACE_CAPACITY];
    dmlrun_place_member(member_place, place, "resource");
    const cJSON* value = dmlrun_json_member(json, "resource");
    const char* name;
    if (value == NULL) return dmlrun_fail(member_place, "required field is missing (a resource name)");
    if (!dmlrun_json_string(value, member_place, &name)) return false;
    *index = dmlrun_find_resource(model, name);
    if (*index == SIZE_MAX) return dmlrun_fail(member_place, "there is no resource named '%s'", name);
    return true;
}

static uint64_t shown_count(const dmlrun_resource* resource) {
    return resource->shown_bytes / dmlrun_value_size(resource->type);
}

static bool parse_dispatch(dmlrun_model* model, dmlrun_command* command, const cJSON* json, const char* place) {
    static const char* const members[] = {"type", "dispatchable", "bindings", "threadGroupCount"};
    if (!dmlrun_json_check_object(json, place, members, 4, "a dispatch command")) return false;
    char member_place[DMLRUN_PLACE_CAPACITY];
    dmlrun_place_member(member_place, place, "dispatchable");
    const cJSON* name_json = dmlrun_json_member(json, "dispatchable");
    const char* name;
    if (name_json == NULL) return dmlrun_fail(member_place, "required field is missing (a dispatchable name)");
    if (!dmlrun_json_string(name_json, member_place, &name)) return false;
    size_t index = 0;
    while (index < model->dispatchable_count && strcmp(model->dispatchables[index].name, name) != 0)
        index++;
    if (index == model->dispatchable_count)
        return dmlrun_fail(member_place, "there is no dispatchable named '%s'", name);
    command->dispatchable = index;
    dmlrun_place_member(member_place, place, "bindings");
    const cJSON* bindings = dmlrun_json_member(json, "bindings");
    if (bindings == NULL) return dmlrun_fail(member_place, "required field is missing (tensor field name -> resource)");
    return parse_bindings(model, &model->dispatchables[index], bindings, member_place, false, command->bindings);
}

static bool parse_write_file(dmlrun_model* model, dmlrun_command* command, const cJSON* json, const char* place) {
    static const char* const members[] = {"type", "resource", "targetPath", "dimensions", "shape"};
    if (!dmlrun_json_check_object(json, place, members, 5, "a writeFile command")) return false;
    if (!command_resource(model, json, place, &command->resource)) return false;
    char member_place[DMLRUN_PLACE_CAPACITY];
    dmlrun_place_member(member_place, place, "targetPath");
    const cJSON* target = dmlrun_json_member(json, "targetPath");
    if (target == NULL) return dmlrun_fail(member_place, "required field is missing (the file to write)");
    if (!dmlrun_json_string(target, member_place, &command->target_path)) return false;
    if (command->target_path[0] == '\0') return dmlrun_fail(member_place, "is empty");
    if (dmlrun_is_image_path(command->target_path))
        return dmlrun_fail(member_place, "writing image files is not supported (write .npy or raw .bin/.dat files)");
    /* "shape" (libdml) or "dimensions" (DxDispatch's name): the .npy shape. */
    const char* shape_key = dmlrun_json_member(json, "shape") ? "shape" : "dimensions";
    const cJSON* shape = dmlrun_json_member(json, shape_key);
    if (dmlrun_json_member(json, "shape") && dmlrun_json_member(json, "dimensions"))
        return dmlrun_fail(place, "has both \"shape\" and \"dimensions\"");
    if (shape == NULL) return true;
    dmlrun_place_member(member_place, place, shape_key);
    if (!cJSON_IsArray(shape))
        return dmlrun_fail(member_place, "must be an array of sizes, not %s", dmlrun_json_kind(shape));
    size_t rank = 0;
    for (const cJSON* element = shape->child; element != NULL; element = element->next)
        rank++;
    if (rank > DMLRUN_NPY_MAX_RANK)
        return dmlrun_fail(member_place, "has more than %d dimensions", DMLRUN_NPY_MAX_RANK);
    command->shape = calloc(rank ? rank : 1, sizeof *command->shape);
    if (command->shape == NULL) return dmlrun_fail(member_place, "out of memory");
    command->shape_rank = (uint32_t)rank;
    uint64_t product = 1;
    size_t i = 0;
    for (const cJSON* element = shape->child; element != NULL; element = element->next, i++) {
        char element_place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_index(element_place, member_place, i);
        if (!dmlrun_json_uint64(element, element_place, &command->shape[i])) return false;
        if (command->shape[i] != 0 && product > UINT64_MAX / command->shape[i])
            return dmlrun_fail(member_place, "the product of the sizes overflows");
        product *= command->shape[i];
    }
    const dmlrun_resource* resource = &model->resources[command->resource];
    if (product != shown_count(resource))
        return dmlrun_fail(member_place, "has %" PRIu64 " elements but resource '%s' has %" PRIu64, product,
                           resource->name, shown_count(resource));
    return true;
}

/* Expected values in the resource's type, from a "values" array or a file. */
static bool parse_expected(dmlrun_model* model, dmlrun_command* command, const cJSON* json, const char* place) {
    const dmlrun_resource* resource = &model->resources[command->resource];
    size_t element_size = dmlrun_value_size(resource->type);
    uint64_t count = shown_count(resource);
    char member_place[DMLRUN_PLACE_CAPACITY];
    const cJSON* values = dmlrun_json_member(json, "values");
    const cJSON* source = dmlrun_json_member(json, "sourcePath");
    if ((values == NULL) == (source == NULL))
        return dmlrun_fail(place, "an expect command has exactly one of \"values\" and \"sourcePath\"");
    command->expected = calloc(count ? count : 1, element_size); /* count * size <= the resource's size */
    if (command->expected == NULL) return dmlrun_fail(place, "out of memory");
    command->expected_count = count;
    if (values != NULL) {
        dmlrun_place_member(member_place, place, "values");
        if (!cJSON_IsArray(values))
            return dmlrun_fail(member_place, "must be an array of values, not %s", dmlrun_json_kind(values));
        uint64_t length = 0;
        for (const cJSON* element = values->child; element != NULL; element = element->next)
            length++;
        if (length != count)
            return dmlrun_fail(member_place, "has %" PRIu64 " values but resource '%s' has %" PRIu64, length,
                               resource->name, count);
        uint64_t i = 0;
        for (const cJSON* element = values->child; element != NULL; element = element->next, i++) {
            char element_place[DMLRUN_PLACE_CAPACITY];
            dmlrun_place_index(element_place, member_place, (size_t)i);
            if (!dmlrun_value_from_json(resource->type, element, element_place,
                                        (uint8_t*)command->expected + i * element_size))
                return false;
        }
        return true;
    }
    dmlrun_place_member(member_place, place, "sourcePath");
    const char* source_path;
    if (!dmlrun_json_string(source, member_place, &source_path)) return false;
    char* path = dmlrun_input_path(model, source_path, member_place);
    if (path == NULL) return false;
    uint8_t* bytes;
    size_t size;
    bool ok = dmlrun_read_file(path, member_place, &bytes, &size);
    if (ok && !dmlrun_note_input(model, path)) ok = dmlrun_fail(member_place, "out of memory");
    if (ok) {
        size_t length = strlen(source_path);
        if (length >= 4 && strcasecmp(source_path + length - 4, ".npy") == 0) {
            dmlrun_npy_array array;
            char error[256];
            if (!dmlrun_npy_parse(bytes, size, &array, error, sizeof error)) {
                ok = dmlrun_fail(member_place, "'%s': %s", path, error);
            } else if (array.element_count != count) {
                ok = dmlrun_fail(member_place, "'%s' has %" PRIu64 " values but resource '%s' has %" PRIu64, path,
                                 array.element_count, resource->name, count);
            } else {
                /* References may be of another type (float64 references for a FLOAT32 result). */
                size_t file_element = dmlrun_value_size(array.type);
                for (uint64_t i = 0; i < count; i++)
                    dmlrun_value_from_double(resource->type,
                                             dmlrun_value_to_double(array.type, array.data + i * file_element),
                                             (uint8_t*)command->expected + i * element_size);
            }
        } else if (size != count * element_size) {
            ok = dmlrun_fail(member_place,
                             "'%s' has %zu bytes but resource '%s' has %" PRIu64 " %s values (%" PRIu64 " bytes)", path,
                             size, resource->name, count, dmlDataTypeName(resource->type), count * element_size);
        } else {
            memcpy(command->expected, bytes, size);
        }
        free(bytes);
    }
    free(path);
    return ok;
}

static bool parse_tolerance(const cJSON* json, const char* place, const char* name, double* out) {
    const cJSON* value = dmlrun_json_member(json, name);
    *out = 0;
    if (value == NULL) return true;
    char member_place[DMLRUN_PLACE_CAPACITY];
    dmlrun_place_member(member_place, place, name);
    if (!cJSON_IsNumber(value)) return dmlrun_fail(member_place, "must be a number, not %s", dmlrun_json_kind(value));
    if (!(value->valuedouble >= 0))
        return dmlrun_fail(member_place, "is %g but a tolerance must be >= 0", value->valuedouble);
    *out = value->valuedouble;
    return true;
}

static bool parse_expect(dmlrun_model* model, dmlrun_command* command, const cJSON* json, const char* place) {
    static const char* const members[] = {
        "type", "resource", "values", "sourcePath", "absoluteTolerance", "relativeTolerance", "ulpTolerance"};
    if (!dmlrun_json_check_object(json, place, members, 7, "an expect command")) return false;
    if (!command_resource(model, json, place, &command->resource)) return false;
    if (!parse_tolerance(json, place, "absoluteTolerance", &command->absolute_tolerance)) return false;
    if (!parse_tolerance(json, place, "relativeTolerance", &command->relative_tolerance)) return false;
    const cJSON* ulp = dmlrun_json_member(json, "ulpTolerance");
    if (ulp != NULL) {
        char member_place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_member(member_place, place, "ulpTolerance");
        if (!dmlrun_json_uint64(ulp, member_place, &command->ulp_tolerance)) return false;
    }
    return parse_expected(model, command, json, place);
}

bool dmlrun_parse_commands(dmlrun_model* model, const cJSON* commands) {
    /* First the dispatchables' initialization bindings: they need the resources too. */
    for (size_t d = 0; d < model->dispatchable_count; d++) {
        dmlrun_dispatchable* dispatchable = &model->dispatchables[d];
        if (dispatchable->init_bindings == NULL) continue;
        char place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_member(place, dispatchable->place, "bindings");
        if (!parse_bindings(model, dispatchable, dispatchable->init_bindings, place, true, dispatchable->init))
            return false;
    }
    for (size_t d = 0; d < model->dispatchable_count; d++) {
        const dmlrun_dispatchable* dispatchable = &model->dispatchables[d];
        for (uint32_t t = 0; t < dispatchable->tensor_count; t++) {
            const dmlrun_tensor_info* tensor = &dispatchable->tensors[t];
            if (dispatchable->init_bindings == NULL && tensor->present && !tensor->is_output &&
                (tensor->flags & DML_TENSOR_FLAG_OWNED_BY_DML))
                return dmlrun_fail(dispatchable->place,
                                   "%s is OWNED_BY_DML: bind it in the dispatchable's "
                                   "\"bindings\" (initialization)",
                                   tensor->field->name);
        }
    }

    if (!cJSON_IsArray(commands))
        return dmlrun_fail("commands", "must be an array of commands, not %s", dmlrun_json_kind(commands));
    size_t count = 0;
    for (const cJSON* command = commands->child; command != NULL; command = command->next)
        count++;
    model->commands = calloc(count ? count : 1, sizeof *model->commands);
    if (model->commands == NULL) return dmlrun_fail("commands", "out of memory");
    for (const cJSON* json = commands->child; json != NULL; json = json->next) {
        dmlrun_command* command = &model->commands[model->command_count];
        snprintf(command->place, sizeof command->place, "commands[%zu]", model->command_count);
        model->command_count++;
        const char* place = command->place;
        char type_place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_member(type_place, place, "type");
        if (!dmlrun_json_object(json, place)) return false;
        const cJSON* type_json = dmlrun_json_member(json, "type");
        const char* type;
        if (type_json == NULL)
            return dmlrun_fail(type_place, "required field is missing (dispatch, print, writeFile or expect)");
        if (!dmlrun_json_string(type_json, type_place, &type)) return false;
        bool ok;
        if (strcasecmp(type, "dispatch") == 0) {
            command->kind = DMLRUN_COMMAND_DISPATCH;
            ok = parse_dispatch(model, command, json, place);
        } else if (strcasecmp(type, "print") == 0) {
            static const char* const members[] = {"type", "resource", "verbose"};
            command->kind = DMLRUN_COMMAND_PRINT;
            ok = dmlrun_json_check_object(json, place, members, 3, "a print command") &&
                 command_resource(model, json, place, &command->resource);
            const cJSON* verbose = dmlrun_json_member(json, "verbose");
            char verbose_place[DMLRUN_PLACE_CAPACITY];
            dmlrun_place_member(verbose_place, place, "verbose");
            if (ok && verbose != NULL) ok = dmlrun_json_bool(verbose, verbose_place, &command->verbose);
        } else if (strcasecmp(type, "writeFile") == 0) {
            command->kind = DMLRUN_COMMAND_WRITE_FILE;
            ok = parse_write_file(model, command, json, place);
        } else if (strcasecmp(type, "expect") == 0) {
            command->kind = DMLRUN_COMMAND_EXPECT;
            ok = parse_expect(model, command, json, place);
        } else {
            return dmlrun_fail(type_place, "'%s' is not a command (dispatch, print, writeFile or expect)", type);
        }
        if (!ok) return false;
    }
    return true;
}

/* ---- Setting up the device and the operators ---- */

static const char* backend_name(DML_BACKEND backend) { return backend == DML_BACKEND_CUDA ? "cuda" : "cpu"; }

static bool libdml_failed(const char* place, const char* what, HRESULT status) {
    return dmlrun_fail(place, "%s: %s (%s)", what, dmlGetLastErrorMessage(), dmlStatusName(status));
}

static void binding_of(const dmlrun_model* model, const dmlrun_binding* binding, DML_BUFFER_BINDING* buffer,
                       DML_BINDING_DESC* desc) {
    if (!binding->bound) {
        desc->Type = DML_BINDING_TYPE_NONE;
        desc->Desc = NULL;
        return;
    }
    const dmlrun_resource* resource = &model->resources[binding->resource];
    buffer->Buffer = resource->device;
    buffer->Offset = binding->offset_bytes;
    buffer->SizeInBytes = resource->size_bytes - binding->offset_bytes;
    desc->Type = DML_BINDING_TYPE_BUFFER;
    desc->Desc = buffer;
}

/* dmlCreateOperator and dmlCompileOperator; E_NOTIMPL skips the operator
 * when the options allow it (the default tour). */
static bool create_dispatchable(dmlrun_model* model, dmlrun_dispatchable* dispatchable, const dmlrun_options* options) {
    char place[DMLRUN_PLACE_CAPACITY];
    dmlrun_place_member(place, dispatchable->place, "desc");
    DMLOperator* op = NULL;
    HRESULT status = dmlCreateOperator(model->device, &dispatchable->desc, &op);
    const char* step = "libdml rejected the description";
    if (SUCCEEDED(status)) {
        UINT inputs = 0, outputs = 0;
        status = dmlGetOperatorSlotCounts(op, &inputs, &outputs);
        if (SUCCEEDED(status) && (inputs != dispatchable->input_count || outputs != dispatchable->output_count)) {
            dmlReleaseOperator(op);
            return dmlrun_fail(place,
                               "internal error: dmlrun's schema of %s has %u input and %u output tensors but "
                               "libdml binds %u and %u",
                               dispatchable->schema->name, dispatchable->input_count, dispatchable->output_count,
                               inputs, outputs);
        }
        if (SUCCEEDED(status)) {
            step = "libdml cannot compile the operator";
            status = dmlCompileOperator(model->device, op, dispatchable->flags, &dispatchable->compiled);
        }
        dmlReleaseOperator(op);
    }
    if (status == E_NOTIMPL && options->skip_unimplemented) {
        dispatchable->skipped = strdup(dmlGetLastErrorMessage());
        if (dispatchable->skipped == NULL) return dmlrun_fail(place, "out of memory");
        if (options->verbose) dmlrun_note("skipping dispatchable '%s': %s", dispatchable->name, dispatchable->skipped);
        return true;
    }
    if (status == E_NOTIMPL) step = "libdml cannot run this operator";
    if (FAILED(status)) return libdml_failed(place, step, status);

    DML_BINDING_PROPERTIES properties;
    status = dmlGetBindingProperties(dispatchable->compiled, &properties);
    if (FAILED(status)) return libdml_failed(dispatchable->place, "dmlGetBindingProperties", status);
    dispatchable->persistent_size = properties.PersistentResourceSize;
    dispatchable->temporary_size = properties.TemporaryResourceSize;
    if (options->verbose) {
        DML_COMPILED_OPERATOR_INFO info;
        if (SUCCEEDED(dmlGetCompiledOperatorInfo(dispatchable->compiled, &info)))
            dmlrun_note("dispatchable '%s': implementation %s, temporary %llu bytes, persistent %llu bytes",
                        dispatchable->name, info.ImplementationName, (unsigned long long)info.TemporaryResourceSize,
                        (unsigned long long)info.PersistentResourceSize);
    }
    if (dispatchable->persistent_size > 0) {
        status = dmlAllocateBuffer(model->device, dispatchable->persistent_size, &dispatchable->persistent);
        if (FAILED(status)) return libdml_failed(dispatchable->place, "allocating the persistent resource", status);
    }
    if (dispatchable->temporary_size > 0) {
        status = dmlAllocateBuffer(model->device, dispatchable->temporary_size, &dispatchable->temporary);
        if (FAILED(status)) return libdml_failed(dispatchable->place, "allocating the temporary resource", status);
    }

    /* Initialization binds the OWNED_BY_DML inputs (the dispatchable's "bindings"). */
    DML_BUFFER_BINDING buffers[DMLRUN_MAX_TENSORS];
    DML_BINDING_DESC inputs[DMLRUN_MAX_TENSORS];
    for (uint32_t t = 0; t < dispatchable->tensor_count; t++) {
        const dmlrun_tensor_info* tensor = &dispatchable->tensors[t];
        if (!tensor->is_output)
            binding_of(model, &dispatchable->init[t], &buffers[tensor->slot], &inputs[tensor->slot]);
    }
    DML_BUFFER_BINDING persistent_buffer = {dispatchable->persistent, 0, dispatchable->persistent_size};
    DML_BINDING_DESC persistent = {DML_BINDING_TYPE_NONE, NULL};
    if (dispatchable->persistent_size > 0) persistent = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &persistent_buffer};
    status =
        dmlInitializeOperator(dispatchable->compiled, dispatchable->persistent_size ? dispatchable->input_count : 0,
                              dispatchable->persistent_size ? inputs : NULL, &persistent);
    if (FAILED(status)) {
        char bindings_place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_member(bindings_place, dispatchable->place, "bindings");
        return libdml_failed(bindings_place, "initializing the operator failed", status);
    }
    return true;
}

bool dmlrun_prepare(dmlrun_model* model, const dmlrun_options* options) {
    DML_DEVICE_DESC desc = {.Backend = options->backend,
                            .Flags = options->debug ? DML_CREATE_DEVICE_FLAG_DEBUG : DML_CREATE_DEVICE_FLAG_NONE,
                            .ThreadCount = options->threads};
    HRESULT status = dmlCreateDevice(&desc, &model->device);
    if (FAILED(status))
        return dmlrun_fail(NULL, "cannot create the %s device: %s (%s)", backend_name(options->backend),
                           dmlGetLastErrorMessage(), dmlStatusName(status));
    for (size_t r = 0; r < model->resource_count; r++) {
        dmlrun_resource* resource = &model->resources[r];
        char place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_member(place, "resources", resource->name);
        status = dmlAllocateBuffer(model->device, resource->size_bytes, &resource->device);
        if (FAILED(status)) return libdml_failed(place, "cannot allocate the buffer", status);
        status = dmlUpload(model->device, resource->device, resource->host, resource->size_bytes);
        if (FAILED(status)) return libdml_failed(place, "cannot upload the initial values", status);
        free(resource->host);
        resource->host = NULL;
    }
    for (size_t d = 0; d < model->dispatchable_count; d++)
        if (!create_dispatchable(model, &model->dispatchables[d], options)) return false;
    status = dmlSynchronize(model->device);
    if (FAILED(status)) return libdml_failed(NULL, "dmlSynchronize", status);
    return true;
}

/* ---- Running ---- */

static double now_ms(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (double)time.tv_sec * 1e3 + (double)time.tv_nsec * 1e-6;
}

static int compare_doubles(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

/* The timed iterations of one dispatch command (DxDispatch's loop): at
 * least options->iterations of them after options->warmup untimed ones, more
 * while options->milliseconds_to_run has not passed; each runs the dispatch
 * options->repeat times and waits, and takes at least options->interval_ms. */
typedef struct dispatch_timing {
    double* samples;  /* per dispatch, ms: count sorted, then count in order (in_order) */
    double* in_order; /* samples + count */
    uint32_t count;
    double cold; /* the first dispatch's time (warm-up included) */
} dispatch_timing;

enum { DMLRUN_MAX_SAMPLES = 1000000 };

static HRESULT time_dispatches(dmlrun_model* model, const dmlrun_dispatchable* dispatchable,
                               const DML_DISPATCH_BINDINGS* bindings, const dmlrun_options* options,
                               dispatch_timing* timing) {
    uint32_t repeat = options->repeat ? options->repeat : 1, capacity = options->iterations;
    double* times = malloc(sizeof(double) * capacity);
    if (times == NULL) return E_OUTOFMEMORY;
    uint32_t count = 0;
    double first_start = 0;
    for (uint32_t i = 0;; i++) {
        bool warming_up = i < options->warmup;
        double timed_for = now_ms() - first_start;
        if (!warming_up && count >= options->iterations &&
            (count >= DMLRUN_MAX_SAMPLES || timed_for >= (double)options->milliseconds_to_run))
            break;
        double start = now_ms();
        if (!warming_up && count == 0) first_start = start;
        HRESULT status = S_OK;
        for (uint32_t r = 0; r < repeat && SUCCEEDED(status); r++)
            status = dmlDispatch(dispatchable->compiled, bindings);
        if (SUCCEEDED(status)) status = dmlSynchronize(model->device);
        double elapsed = (now_ms() - start) / repeat;
        if (FAILED(status)) {
            free(times);
            return status;
        }
        if (i == 0) timing->cold = elapsed;
        if (!warming_up) {
            if (count == capacity) {
                capacity = capacity * 2 < DMLRUN_MAX_SAMPLES ? capacity * 2 : DMLRUN_MAX_SAMPLES;
                double* grown = realloc(times, sizeof(double) * capacity);
                if (grown == NULL) {
                    free(times);
                    return E_OUTOFMEMORY;
                }
                times = grown;
            }
            times[count++] = elapsed;
        }
        double remaining = options->interval_ms - (now_ms() - start);
        if (remaining > 0) {
            struct timespec pause = {(time_t)(remaining / 1e3), (long)(fmod(remaining, 1e3) * 1e6)};
            nanosleep(&pause, NULL);
        }
    }
    timing->samples = malloc(sizeof(double) * 2 * count);
    if (timing->samples == NULL) {
        free(times);
        return E_OUTOFMEMORY;
    }
    timing->count = count;
    timing->in_order = timing->samples + count;
    memcpy(timing->samples, times, sizeof(double) * count);
    memcpy(timing->in_order, times, sizeof(double) * count);
    free(times);
    qsort(timing->samples, count, sizeof(double), compare_doubles);
    return S_OK;
}

static bool run_dispatch(dmlrun_model* model, const dmlrun_command* command, const dmlrun_options* options) {
    dmlrun_dispatchable* dispatchable = &model->dispatchables[command->dispatchable];
    if (dispatchable->skipped != NULL) {
        printf("Dispatch '%s' skipped: %s\n", dispatchable->name, dispatchable->skipped);
        for (uint32_t t = 0; t < dispatchable->tensor_count; t++)
            if (dispatchable->tensors[t].is_output && command->bindings[t].bound)
                model->resources[command->bindings[t].resource].not_computed = dispatchable->skipped;
        return true;
    }
    DML_BUFFER_BINDING input_buffers[DMLRUN_MAX_TENSORS], output_buffers[DMLRUN_MAX_TENSORS];
    DML_BINDING_DESC inputs[DMLRUN_MAX_TENSORS], outputs[DMLRUN_MAX_TENSORS];
    uint64_t bytes = 0; /* the bound tensors' sizes: what the dispatch reads and writes */
    for (uint32_t t = 0; t < dispatchable->tensor_count; t++) {
        const dmlrun_tensor_info* tensor = &dispatchable->tensors[t];
        uint32_t slot = tensor->slot;
        if (tensor->is_output)
            binding_of(model, &command->bindings[t], &output_buffers[slot], &outputs[slot]);
        else
            binding_of(model, &command->bindings[t], &input_buffers[slot], &inputs[slot]);
        if (command->bindings[t].bound) bytes += tensor->total_bytes;
    }
    DML_BUFFER_BINDING persistent_buffer = {dispatchable->persistent, 0, dispatchable->persistent_size};
    DML_BUFFER_BINDING temporary_buffer = {dispatchable->temporary, 0, dispatchable->temporary_size};
    DML_DISPATCH_BINDINGS bindings = {dispatchable->input_count,     inputs,
                                      dispatchable->output_count,    outputs,
                                      {DML_BINDING_TYPE_NONE, NULL}, {DML_BINDING_TYPE_NONE, NULL}};
    if (dispatchable->temporary_size)
        bindings.TemporaryResource = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &temporary_buffer};
    if (dispatchable->persistent_size)
        bindings.PersistentResource = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &persistent_buffer};

    dispatch_timing timing = {0};
    HRESULT status = time_dispatches(model, dispatchable, &bindings, options, &timing);
    if (FAILED(status)) {
        char what[DMLRUN_PLACE_CAPACITY + 32];
        snprintf(what, sizeof what, "dispatching '%s' failed", dispatchable->name);
        return status == E_OUTOFMEMORY ? dmlrun_fail(command->place, "out of memory")
                                       : libdml_failed(command->place, what, status);
    }
    for (uint32_t t = 0; t < dispatchable->tensor_count; t++)
        if (dispatchable->tensors[t].is_output && command->bindings[t].bound)
            model->resources[command->bindings[t].resource].not_computed = NULL;
    double median = timing.samples[timing.count / 2], min = timing.samples[0], max = timing.samples[timing.count - 1];
    double seconds = median > 1e-9 ? median * 1e-3 : 1e-12;
    printf("Dispatch '%s' [%s]: %u iterations, median %.4f ms, min %.4f ms, max %.4f ms, %.2f GB/s\n",
           dispatchable->name, backend_name(dmlGetDeviceBackend(model->device)), timing.count, median, min, max,
           (double)bytes / seconds * 1e-9);
    if (options->timing_verbosity >= 1) printf("  cold (the first dispatch): %.4f ms\n", timing.cold);
    if (options->timing_verbosity >= 2) {
        fputs("  samples (ms, in order):", stdout);
        for (uint32_t i = 0; i < timing.count; i++)
            printf(" %.4f", timing.in_order[i]);
        putchar('\n');
    }
    free(timing.samples);
    return true;
}

/* The resource's shown elements, downloaded. */
static bool download(const dmlrun_model* model, const dmlrun_resource* resource, const char* place, uint8_t** out) {
    *out = malloc(resource->shown_bytes ? (size_t)resource->shown_bytes : 1);
    if (*out == NULL) return dmlrun_fail(place, "out of memory");
    HRESULT status = dmlDownload(model->device, *out, resource->device, resource->shown_bytes);
    if (FAILED(status)) {
        free(*out);
        *out = NULL;
        return libdml_failed(place, "cannot read the resource back", status);
    }
    return true;
}

static bool run_print(const dmlrun_model* model, const dmlrun_command* command) {
    const dmlrun_resource* resource = &model->resources[command->resource];
    if (resource->not_computed != NULL) {
        printf("Resource '%s': not computed (%s)\n", resource->name, resource->not_computed);
        return true;
    }
    uint8_t* data;
    if (!download(model, resource, command->place, &data)) return false;
    size_t size = dmlrun_value_size(resource->type);
    uint64_t count = shown_count(resource);
    char text[64];
    if (command->verbose) {
        /* DxDispatch's verbose form: index, value and the raw bits in hex. */
        int index_width = 1, hex_width = (int)size * 2;
        for (uint64_t limit = 10; count > limit && index_width < 20; limit *= 10)
            index_width++;
        printf("Resource '%s':\n", resource->name);
        for (uint64_t i = 0; i < count; i++) {
            dmlrun_value_format(resource->type, data + i * size, text, sizeof text);
            printf("[%*" PRIu64 "] %s (0x%*" PRIX64 ")\n", index_width, i, text, hex_width,
                   dmlrun_value_bits(resource->type, data + i * size));
        }
    } else {
        printf("Resource '%s': ", resource->name);
        for (uint64_t i = 0; i < count; i++) {
            dmlrun_value_format(resource->type, data + i * size, text, sizeof text);
            fputs(text, stdout);
            if (i + 1 < count) fputs(", ", stdout);
        }
        fputc('\n', stdout);
    }
    free(data);
    return true;
}

static bool run_write_file(const dmlrun_model* model, const dmlrun_command* command) {
    const dmlrun_resource* resource = &model->resources[command->resource];
    char place[DMLRUN_PLACE_CAPACITY];
    dmlrun_place_member(place, command->place, "targetPath");
    uint8_t* data;
    if (!download(model, resource, command->place, &data)) return false;
    const uint8_t* file_bytes = data;
    size_t file_size = (size_t)resource->shown_bytes;
    uint8_t* npy = NULL;
    size_t length = strlen(command->target_path);
    if (length >= 4 && strcasecmp(command->target_path + length - 4, ".npy") == 0) {
        uint64_t count = shown_count(resource);
        uint64_t flat[1] = {count};
        char error[256];
        if (!dmlrun_npy_write(resource->type, command->shape ? command->shape_rank : 1,
                              command->shape ? command->shape : flat, data, count * dmlrun_value_size(resource->type),
                              &npy, &file_size, error, sizeof error)) {
            free(data);
            return dmlrun_fail(place, "%s", error);
        }
        file_bytes = npy;
    }
    int fd = dmlrun_open_output(model, command->target_path, place);
    FILE* file = fd < 0 ? NULL : fdopen(fd, "wb");
    if (fd >= 0 && file == NULL) close(fd);
    bool ok = file != NULL && fwrite(file_bytes, 1, file_size, file) == file_size;
    int error = errno;
    if (file != NULL && fclose(file) != 0 && ok) {
        ok = false;
        error = errno;
    }
    if (fd < 0) { /* dmlrun_open_output said why */
        free(npy);
        free(data);
        return false;
    }
    free(npy);
    free(data);
    if (!ok) return dmlrun_fail(place, "cannot write '%s': %s", command->target_path, strerror(error));
    printf("Resource '%s' written to '%s'\n", resource->name, command->target_path);
    return true;
}

static bool run_expect(const dmlrun_model* model, const dmlrun_command* command, bool* matched) {
    const dmlrun_resource* resource = &model->resources[command->resource];
    *matched = false;
    if (resource->not_computed != NULL) {
        printf("Expect '%s': not computed (%s)\n", resource->name, resource->not_computed);
        *matched = true;
        return true;
    }
    uint8_t* data;
    if (!download(model, resource, command->place, &data)) return false;
    DML_TENSOR_DATA_TYPE type = resource->type;
    size_t size = dmlrun_value_size(type);
    const uint8_t* expected = command->expected;
    uint64_t mismatches = 0, worst_index = 0;
    double worst_error = -1;
    enum { SHOWN_MISMATCHES = 10 };
    uint64_t shown[SHOWN_MISMATCHES];
    for (uint64_t i = 0; i < command->expected_count; i++) {
        const uint8_t* got_element = data + i * size;
        const uint8_t* expected_element = expected + i * size;
        double got = dmlrun_value_to_double(type, got_element), want = dmlrun_value_to_double(type, expected_element);
        double error;
        bool match;
        if (isnan(got) || isnan(want)) { /* NaN matches only NaN */
            match = isnan(got) && isnan(want);
            error = match ? 0 : INFINITY;
        } else if (dmlrun_value_bits(type, got_element) == dmlrun_value_bits(type, expected_element) || got == want) {
            match = true;
            error = 0;
        } else {
            error = fabs(got - want);
            match =
                (isfinite(error) && error <= command->absolute_tolerance + command->relative_tolerance * fabs(want)) ||
                (command->ulp_tolerance > 0 &&
                 dmlrun_value_ulp_distance(type, got_element, expected_element) <= command->ulp_tolerance);
            if (isnan(error)) error = INFINITY;
        }
        if (error > worst_error) {
            worst_error = error;
            worst_index = i;
        }
        if (!match) {
            if (mismatches < SHOWN_MISMATCHES) shown[mismatches] = i;
            mismatches++;
        }
    }
    if (mismatches == 0) {
        printf("Expect '%s': %" PRIu64 " values match\n", resource->name, command->expected_count);
        *matched = true;
        free(data);
        return true;
    }
    char got_text[64], want_text[64];
    dmlrun_fail(command->place,
                "expect '%s': %" PRIu64 " of %" PRIu64 " values differ (absoluteTolerance %g, "
                "relativeTolerance %g, ulpTolerance %" PRIu64 ")",
                resource->name, mismatches, command->expected_count, command->absolute_tolerance,
                command->relative_tolerance, command->ulp_tolerance);
    for (uint64_t m = 0; m < mismatches && m < SHOWN_MISMATCHES; m++) {
        uint64_t i = shown[m];
        dmlrun_value_format(type, data + i * size, got_text, sizeof got_text);
        dmlrun_value_format(type, expected + i * size, want_text, sizeof want_text);
        double error =
            fabs(dmlrun_value_to_double(type, data + i * size) - dmlrun_value_to_double(type, expected + i * size));
        fprintf(stderr, "  [%" PRIu64 "] got %s, expected %s (error %g)\n", i, got_text, want_text, error);
    }
    if (mismatches > SHOWN_MISMATCHES) fprintf(stderr, "  ... and %" PRIu64 " more\n", mismatches - SHOWN_MISMATCHES);
    dmlrun_value_format(type, data + worst_index * size, got_text, sizeof got_text);
    dmlrun_value_format(type, expected + worst_index * size, want_text, sizeof want_text);
    fprintf(stderr, "  largest error %g at [%" PRIu64 "] (got %s, expected %s)\n", worst_error, worst_index, got_text,
            want_text);
    free(data);
    return true;
}

bool dmlrun_run_commands(dmlrun_model* model, const dmlrun_options* options) {
    uint64_t failed_expects = 0;
    for (size_t c = 0; c < model->command_count; c++) {
        const dmlrun_command* command = &model->commands[c];
        if (options->verbose) fprintf(stderr, "dmlrun: running %s\n", command->place);
        bool ok = true, matched = true;
        switch (command->kind) {
        case DMLRUN_COMMAND_DISPATCH: ok = run_dispatch(model, command, options); break;
        case DMLRUN_COMMAND_PRINT: ok = run_print(model, command); break;
        case DMLRUN_COMMAND_WRITE_FILE: ok = run_write_file(model, command); break;
        case DMLRUN_COMMAND_EXPECT: ok = run_expect(model, command, &matched); break;
        }
        fflush(stdout);
        if (!ok) return false;
        if (!matched) failed_expects++;
    }
    if (failed_expects > 0)
        return dmlrun_fail(NULL, "%" PRIu64 " expect command%s failed", failed_expects, failed_expects == 1 ? "" : "s");
    return true;
}
