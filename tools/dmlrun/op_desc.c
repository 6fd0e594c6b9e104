/* Operator descriptions from JSON, driven by the schemas of op_schema.c:
 * every field is read by its kind and written at its offset, so that one
 * builder serves every operator. The result is the DML_OPERATOR_DESC that
 * dmlCreateOperator takes, with all it points to in the dispatchable's
 * arena, plus what the binding step needs to know of each tensor field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json.h"

_Static_assert(sizeof(DML_REDUCE_FUNCTION) == sizeof(int32_t), "enum fields are 32-bit");
_Static_assert(sizeof(DML_INTERPOLATION_MODE) == sizeof(int32_t), "enum fields are 32-bit");
_Static_assert(sizeof(BOOL) == sizeof(int32_t), "BOOL is 32-bit");

enum { MAX_KNOWN_MEMBERS = 40 };

/* A tensor field's JSON: {"DataType", "Sizes", "Strides"?, "Flags"?,
 * "DimensionCount"?, "TotalTensorSizeInBytes"?, "GuaranteedBaseOffsetAlignment"?},
 * or wrapped as DxDispatch also reads it: {"Type": "BUFFER", "Desc": {...}}. */
static const char* const buffer_tensor_members[] = {"DataType",
                                                    "Sizes",
                                                    "Strides",
                                                    "Flags",
                                                    "DimensionCount",
                                                    "TotalTensorSizeInBytes",
                                                    "GuaranteedBaseOffsetAlignment",
                                                    "Type"};

static const dmlrun_name_value tensor_type_values[] = {{"INVALID", DML_TENSOR_TYPE_INVALID},
                                                       {"BUFFER", DML_TENSOR_TYPE_BUFFER}};
static const dmlrun_enum tensor_type_enum = {"DML_TENSOR_TYPE", "DML_TENSOR_TYPE_", tensor_type_values, 2};

/* Reads an array of UINT into the arena (never NULL, even when empty). */
static bool parse_uint_array(const cJSON* value, const char* place, dmlrun_arena* arena, UINT** out, uint32_t* count) {
    if (!cJSON_IsArray(value))
        return dmlrun_fail(place, "must be an array of unsigned integers, not %s", dmlrun_json_kind(value));
    size_t length = 0;
    for (const cJSON* element = value->child; element != NULL; element = element->next)
        length++;
    if (length > UINT32_MAX) return dmlrun_fail(place, "has too many elements");
    UINT* elements = dmlrun_arena_alloc(arena, (length ? length : 1) * sizeof(UINT));
    if (elements == NULL) return dmlrun_fail(place, "out of memory");
    size_t index = 0;
    for (const cJSON* element = value->child; element != NULL; element = element->next, index++) {
        char element_place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_index(element_place, place, index);
        if (!dmlrun_json_uint32(element, element_place, &elements[index])) return false;
    }
    *out = elements;
    *count = (uint32_t)length;
    return true;
}

static bool parse_tensor(const cJSON* value, const char* place, dmlrun_arena* arena, DML_TENSOR_DESC** out,
                         dmlrun_tensor_info* info) {
    if (!cJSON_IsObject(value))
        return dmlrun_fail(place, "a tensor must be an object {\"DataType\": ..., \"Sizes\": [...]}, not %s",
                           dmlrun_json_kind(value));
    const cJSON* buffer_json = value;
    char buffer_place[DMLRUN_PLACE_CAPACITY];
    snprintf(buffer_place, sizeof buffer_place, "%s", place);
    const cJSON* wrapped = dmlrun_json_member(value, "Desc");
    if (wrapped != NULL) {
        static const char* const wrapper_members[] = {"Type", "Desc"};
        if (!dmlrun_json_check_object(value, place, wrapper_members, 2, "a DML_TENSOR_DESC")) return false;
        buffer_json = wrapped;
        dmlrun_place_member(buffer_place, place, "Desc");
    }
    const cJSON* type_json = dmlrun_json_member(value, "Type");
    if (type_json != NULL) {
        char type_place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_member(type_place, place, "Type");
        int64_t tensor_type;
        if (!dmlrun_json_enum(type_json, type_place, &tensor_type_enum, &tensor_type)) return false;
        if (tensor_type != DML_TENSOR_TYPE_BUFFER)
            return dmlrun_fail(type_place, "only DML_TENSOR_TYPE_BUFFER tensors exist");
    }
    size_t member_count = sizeof buffer_tensor_members / sizeof buffer_tensor_members[0];
    if (!dmlrun_json_check_object(buffer_json, buffer_place, buffer_tensor_members,
                                  wrapped ? member_count - 1 : member_count, "a DML_BUFFER_TENSOR_DESC"))
        return false;

    char member_place[DMLRUN_PLACE_CAPACITY];
    DML_BUFFER_TENSOR_DESC* buffer = dmlrun_arena_alloc(arena, sizeof *buffer);
    DML_TENSOR_DESC* tensor = dmlrun_arena_alloc(arena, sizeof *tensor);
    if (buffer == NULL || tensor == NULL) return dmlrun_fail(place, "out of memory");

    const cJSON* data_type = dmlrun_json_member(buffer_json, "DataType");
    dmlrun_place_member(member_place, buffer_place, "DataType");
    if (data_type == NULL) return dmlrun_fail(member_place, "required field is missing (a data type such as FLOAT32)");
    int64_t type_value;
    if (!dmlrun_json_enum(data_type, member_place, &dmlrun_data_type_enum, &type_value)) return false;
    buffer->DataType = (DML_TENSOR_DATA_TYPE)type_value;

    const cJSON* sizes = dmlrun_json_member(buffer_json, "Sizes");
    dmlrun_place_member(member_place, buffer_place, "Sizes");
    if (sizes == NULL) return dmlrun_fail(member_place, "required field is missing (an array of unsigned integers)");
    UINT* sizes_array;
    uint32_t rank;
    if (!parse_uint_array(sizes, member_place, arena, &sizes_array, &rank)) return false;
    buffer->Sizes = sizes_array;
    buffer->DimensionCount = rank;

    const cJSON* strides = dmlrun_json_member(buffer_json, "Strides");
    if (strides != NULL && !cJSON_IsNull(strides)) {
        dmlrun_place_member(member_place, buffer_place, "Strides");
        UINT* strides_array;
        uint32_t stride_count;
        if (!parse_uint_array(strides, member_place, arena, &strides_array, &stride_count)) return false;
        if (stride_count != rank)
            return dmlrun_fail(member_place, "has %u elements but Sizes has %u (one stride per dimension)",
                               stride_count, rank);
        buffer->Strides = strides_array;
    }

    const cJSON* dimension_count = dmlrun_json_member(buffer_json, "DimensionCount");
    if (dimension_count != NULL) {
        dmlrun_place_member(member_place, buffer_place, "DimensionCount");
        uint32_t given;
        if (!dmlrun_json_uint32(dimension_count, member_place, &given)) return false;
        if (given != rank)
            return dmlrun_fail(member_place, "is %u but Sizes has %u elements (it may be omitted)", given, rank);
    }

    const cJSON* flags = dmlrun_json_member(buffer_json, "Flags");
    if (flags != NULL) {
        dmlrun_place_member(member_place, buffer_place, "Flags");
        uint32_t flag_bits;
        if (!dmlrun_json_flags(flags, member_place, &dmlrun_tensor_flags_enum, &flag_bits)) return false;
        buffer->Flags = (DML_TENSOR_FLAGS)flag_bits;
    }

    const cJSON* total = dmlrun_json_member(buffer_json, "TotalTensorSizeInBytes");
    if (total != NULL) {
        dmlrun_place_member(member_place, buffer_place, "TotalTensorSizeInBytes");
        if (!dmlrun_json_uint64(total, member_place, &buffer->TotalTensorSizeInBytes)) return false;
    }
    /* Missing (or 0, as DxDispatch treats it): the buffer-size formula. */
    if (buffer->TotalTensorSizeInBytes == 0)
        buffer->TotalTensorSizeInBytes = DMLCalcBufferTensorSize(buffer->DataType, rank, sizes_array, buffer->Strides);

    const cJSON* alignment = dmlrun_json_member(buffer_json, "GuaranteedBaseOffsetAlignment");
    if (alignment != NULL) {
        dmlrun_place_member(member_place, buffer_place, "GuaranteedBaseOffsetAlignment");
        if (!dmlrun_json_uint32(alignment, member_place, &buffer->GuaranteedBaseOffsetAlignment)) return false;
    }

    tensor->Type = DML_TENSOR_TYPE_BUFFER;
    tensor->Desc = buffer;
    *out = tensor;
    info->present = true;
    info->type = buffer->DataType;
    info->flags = buffer->Flags;
    info->total_bytes = buffer->TotalTensorSizeInBytes;
    return true;
}

static bool build_struct(const dmlrun_op_schema* schema, const cJSON* json, const char* place, bool fused,
                         const char* const* extra_members, size_t extra_count, dmlrun_arena* arena, void* out,
                         dmlrun_dispatchable* dispatchable);

static bool list_fusable(char* list, size_t capacity) {
    size_t used = 0;
    list[0] = '\0';
    for (size_t i = 0; i < dmlrun_op_schema_count() && used < capacity; i++)
        if (dmlrun_op_schema_at(i)->fusable)
            used +=
                (size_t)snprintf(list + used, capacity - used, "%s%s", used ? ", " : "", dmlrun_op_schema_at(i)->name);
    return true;
}

/* FusedActivation: {"Type": "ACTIVATION_X", "Desc": {...}} or flattened
 * {"Type": "ACTIVATION_X", "Alpha": ...}; its own tensors stay NULL. */
static bool parse_activation(const cJSON* value, const char* place, dmlrun_arena* arena,
                             const DML_OPERATOR_DESC** out) {
    if (!cJSON_IsObject(value))
        return dmlrun_fail(place,
                           "a FusedActivation must be an object {\"Type\": \"ACTIVATION_...\", ...} or null, "
                           "not %s",
                           dmlrun_json_kind(value));
    const char* type_key = dmlrun_json_member(value, "Type") ? "Type" : "type";
    const char* desc_key = dmlrun_json_member(value, "Desc") ? "Desc" : "desc";
    const cJSON* type_json = dmlrun_json_member(value, type_key);
    char type_place[DMLRUN_PLACE_CAPACITY];
    dmlrun_place_member(type_place, place, type_key);
    if (type_json == NULL) return dmlrun_fail(place, "needs a \"Type\", e.g. \"ACTIVATION_RELU\"");
    const char* type_name;
    if (!dmlrun_json_string(type_json, type_place, &type_name)) return false;
    const dmlrun_op_schema* schema = dmlrun_find_op_schema(type_name);
    if (schema == NULL || !schema->fusable) {
        char list[1024];
        list_fusable(list, sizeof list);
        return dmlrun_fail(type_place,
                           "'%s' is not a fusable activation (fusable: %s; the DML_OPERATOR_ prefix is "
                           "optional)",
                           type_name, list);
    }
    void* activation = dmlrun_arena_alloc(arena, schema->desc_size);
    DML_OPERATOR_DESC* op = dmlrun_arena_alloc(arena, sizeof *op);
    if (activation == NULL || op == NULL) return dmlrun_fail(place, "out of memory");
    const cJSON* desc = dmlrun_json_member(value, desc_key);
    if (desc != NULL) {
        const char* const wrapper[] = {type_key, desc_key};
        if (!dmlrun_json_check_object(value, place, wrapper, 2, "a FusedActivation")) return false;
        char desc_place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_member(desc_place, place, desc_key);
        if (!build_struct(schema, desc, desc_place, true, NULL, 0, arena, activation, NULL)) return false;
    } else {
        const char* const extra[] = {type_key};
        if (!build_struct(schema, value, place, true, extra, 1, arena, activation, NULL)) return false;
    }
    op->Type = schema->type;
    op->Desc = activation;
    *out = op;
    return true;
}

static const char* kind_description(dmlrun_field_kind kind) {
    switch (kind) {
    case DMLRUN_FIELD_UINT: return "an unsigned integer";
    case DMLRUN_FIELD_FLOAT: return "a number";
    case DMLRUN_FIELD_BOOL: return "true or false";
    case DMLRUN_FIELD_ENUM: return "an enumeration name";
    case DMLRUN_FIELD_UINT_ARRAY: return "an array of unsigned integers";
    case DMLRUN_FIELD_SIZE_2D: return "an object {\"Width\": w, \"Height\": h}";
    default: return "a tensor {\"DataType\": ..., \"Sizes\": [...]}";
    }
}

static bool build_struct(const dmlrun_op_schema* schema, const cJSON* json, const char* place, bool fused,
                         const char* const* extra_members, size_t extra_count, dmlrun_arena* arena, void* out,
                         dmlrun_dispatchable* dispatchable) {
    const char* known[MAX_KNOWN_MEMBERS];
    size_t known_count = 0;
    for (size_t i = 0; i < schema->field_count && known_count < MAX_KNOWN_MEMBERS; i++)
        known[known_count++] = schema->fields[i].name;
    for (size_t i = 0; i < extra_count && known_count < MAX_KNOWN_MEMBERS; i++)
        known[known_count++] = extra_members[i];
    char what[96];
    snprintf(what, sizeof what, "a DML_%s_OPERATOR_DESC", schema->name);
    if (!dmlrun_json_check_object(json, place, known, known_count, what)) return false;

    uint32_t array_lengths[MAX_KNOWN_MEMBERS] = {0};
    bool array_given[MAX_KNOWN_MEMBERS] = {false};
    for (size_t i = 0; i < schema->field_count; i++) {
        const dmlrun_field* field = &schema->fields[i];
        const cJSON* value = dmlrun_json_member(json, field->name);
        char field_place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_member(field_place, place, field->name);
        void* slot = (char*)out + field->offset;
        bool absent = value == NULL || cJSON_IsNull(value);

        if (dmlrun_field_is_tensor(field->kind)) {
            if (fused) {
                if (!absent)
                    return dmlrun_fail(field_place, "must be omitted in a FusedActivation (DirectML requires the "
                                                    "fused activation's tensors to be NULL)");
                continue;
            }
            if (dispatchable->tensor_count >= DMLRUN_MAX_TENSORS) return dmlrun_fail(place, "too many tensors");
            dmlrun_tensor_info* info = &dispatchable->tensors[dispatchable->tensor_count++];
            info->field = field;
            info->is_output = !dmlrun_field_is_input(field->kind);
            info->slot = info->is_output ? dispatchable->output_count++ : dispatchable->input_count++;
            if (absent) {
                if (!dmlrun_field_is_optional(field->kind))
                    return dmlrun_fail(field_place, "required tensor is missing (%s)", kind_description(field->kind));
                continue; /* absent optional tensor: NULL, bound as NONE */
            }
            DML_TENSOR_DESC* tensor = NULL;
            if (!parse_tensor(value, field_place, arena, &tensor, info)) return false;
            const DML_TENSOR_DESC* pointer = tensor;
            memcpy(slot, &pointer, sizeof pointer);
            continue;
        }
        if (field->kind == DMLRUN_FIELD_COUNT) continue; /* after the arrays */
        if (field->kind == DMLRUN_FIELD_FUSED_ACTIVATION) {
            if (absent) continue;
            const DML_OPERATOR_DESC* activation = NULL;
            if (!parse_activation(value, field_place, arena, &activation)) return false;
            memcpy(slot, &activation, sizeof activation);
            continue;
        }
        if (value == NULL)
            return dmlrun_fail(field_place, "required field is missing (%s)", kind_description(field->kind));
        switch (field->kind) {
        case DMLRUN_FIELD_UINT: {
            UINT number;
            if (!dmlrun_json_uint32(value, field_place, &number)) return false;
            memcpy(slot, &number, sizeof number);
            break;
        }
        case DMLRUN_FIELD_FLOAT: {
            FLOAT number;
            if (!dmlrun_json_float(value, field_place, &number)) return false;
            memcpy(slot, &number, sizeof number);
            break;
        }
        case DMLRUN_FIELD_BOOL: {
            bool flag;
            if (!dmlrun_json_bool(value, field_place, &flag)) return false;
            BOOL number = flag ? 1 : 0;
            memcpy(slot, &number, sizeof number);
            break;
        }
        case DMLRUN_FIELD_ENUM: {
            int64_t number;
            if (!dmlrun_json_enum(value, field_place, field->enumeration, &number)) return false;
            int32_t stored = (int32_t)number;
            memcpy(slot, &stored, sizeof stored);
            break;
        }
        case DMLRUN_FIELD_UINT_ARRAY: {
            UINT* elements;
            if (!parse_uint_array(value, field_place, arena, &elements, &array_lengths[i])) return false;
            array_given[i] = true;
            const UINT* pointer = elements;
            memcpy(slot, &pointer, sizeof pointer);
            break;
        }
        case DMLRUN_FIELD_SIZE_2D: {
            static const char* const size_members[] = {"Width", "Height"};
            if (!dmlrun_json_check_object(value, field_place, size_members, 2, "a DML_SIZE_2D")) return false;
            DML_SIZE_2D size = {0, 0};
            for (int axis = 0; axis < 2; axis++) {
                char axis_place[DMLRUN_PLACE_CAPACITY];
                dmlrun_place_member(axis_place, field_place, size_members[axis]);
                const cJSON* axis_value = dmlrun_json_member(value, size_members[axis]);
                if (axis_value == NULL)
                    return dmlrun_fail(axis_place, "required field is missing (an unsigned integer)");
                if (!dmlrun_json_uint32(axis_value, axis_place, axis == 0 ? &size.Width : &size.Height)) return false;
            }
            memcpy(slot, &size, sizeof size);
            break;
        }
        default: return dmlrun_fail(field_place, "internal error: unknown field kind");
        }
    }

    /* Count fields: the length of their arrays (which must agree), or the
     * given value, which must agree too. */
    for (size_t c = 0; c < schema->field_count; c++) {
        const dmlrun_field* count_field = &schema->fields[c];
        if (count_field->kind != DMLRUN_FIELD_COUNT) continue;
        const char* first_array = NULL;
        uint32_t count = 0;
        for (size_t a = 0; a < schema->field_count; a++) {
            const dmlrun_field* array = &schema->fields[a];
            if (array->kind != DMLRUN_FIELD_UINT_ARRAY || !array_given[a] ||
                strcmp(array->count_field, count_field->name) != 0)
                continue;
            if (first_array == NULL) {
                first_array = array->name;
                count = array_lengths[a];
            } else if (array_lengths[a] != count) {
                char array_place[DMLRUN_PLACE_CAPACITY];
                dmlrun_place_member(array_place, place, array->name);
                return dmlrun_fail(array_place,
                                   "has %u elements but %s has %u (every array counted by %s has %s "
                                   "elements)",
                                   array_lengths[a], first_array, count, count_field->name, count_field->name);
            }
        }
        const cJSON* given = dmlrun_json_member(json, count_field->name);
        if (given != NULL) {
            char count_place[DMLRUN_PLACE_CAPACITY];
            dmlrun_place_member(count_place, place, count_field->name);
            uint32_t given_count;
            if (!dmlrun_json_uint32(given, count_place, &given_count)) return false;
            if (first_array != NULL && given_count != count)
                return dmlrun_fail(count_place,
                                   "is %u but %s has %u elements (it may be omitted: it is then the "
                                   "arrays' length)",
                                   given_count, first_array, count);
            count = given_count;
        }
        memcpy((char*)out + count_field->offset, &count, sizeof count);
    }
    return true;
}

bool dmlrun_parse_dispatchable(const char* name, const cJSON* json, dmlrun_dispatchable* dispatchable) {
    dispatchable->name = name;
    dmlrun_place_member(dispatchable->place, "dispatchables", name);
    const char* place = dispatchable->place;
    if (!cJSON_IsObject(json))
        return dmlrun_fail(place, "a dispatchable must be an object {\"type\": ..., \"desc\": {...}}, not %s",
                           dmlrun_json_kind(json));
    char member_place[DMLRUN_PLACE_CAPACITY];
    dmlrun_place_member(member_place, place, "type");
    const cJSON* type_json = dmlrun_json_member(json, "type");
    if (type_json == NULL)
        return dmlrun_fail(member_place, "required field is missing (an operator type such as "
                                         "\"DML_OPERATOR_MAX_POOLING2\")");
    const char* type;
    if (!dmlrun_json_string(type_json, member_place, &type)) return false;
    if (strcasecmp(type, "hlsl") == 0 || strcasecmp(type, "onnx") == 0 || strcasecmp(type, "dmlSerializedGraph") == 0)
        return dmlrun_fail(member_place,
                           "'%s' dispatchables are not supported: dmlrun runs DirectML operators only "
                           "(HLSL shaders, ONNX models and serialized graphs need DxDispatch on "
                           "Windows)",
                           type);
    const dmlrun_op_schema* schema = dmlrun_find_op_schema(type);
    if (schema == NULL) {
        char list[1024];
        size_t used = 0;
        list[0] = '\0';
        for (size_t i = 0; i < dmlrun_op_schema_count() && used < sizeof list; i++)
            if (!dmlrun_op_schema_at(i)->fusable)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                                         dmlrun_op_schema_at(i)->name);
        return dmlrun_fail(member_place,
                           "'%s' is not an operator dmlrun supports (supported: %s; the DML_OPERATOR_ "
                           "prefix is optional)",
                           type, list);
    }
    dispatchable->schema = schema;

    static const char* const dispatchable_members[] = {"type",           "desc",     "Desc",
                                                       "executionFlags", "bindings", "dmlCompileType"};
    const size_t dispatchable_member_count = sizeof dispatchable_members / sizeof dispatchable_members[0];
    const char* desc_key = dmlrun_json_member(json, "desc") ? "desc" : "Desc";
    const cJSON* desc = dmlrun_json_member(json, desc_key);
    if (dmlrun_json_member(json, "desc") && dmlrun_json_member(json, "Desc"))
        return dmlrun_fail(place, "has both \"desc\" and \"Desc\"");

    void* op_struct = dmlrun_arena_alloc(&dispatchable->arena, schema->desc_size);
    if (op_struct == NULL) return dmlrun_fail(place, "out of memory");
    if (desc != NULL) {
        if (!dmlrun_json_check_object(json, place, dispatchable_members, dispatchable_member_count, "a dispatchable"))
            return false;
        dmlrun_place_member(member_place, place, desc_key);
        if (!build_struct(schema, desc, member_place, false, NULL, 0, &dispatchable->arena, op_struct, dispatchable))
            return false;
    } else {
        /* DxDispatch also reads the fields from the dispatchable itself. */
        const char* const extra[] = {"type", "executionFlags", "bindings", "dmlCompileType"};
        if (!build_struct(schema, json, place, false, extra, 4, &dispatchable->arena, op_struct, dispatchable))
            return false;
    }
    dispatchable->desc.Type = schema->type;
    dispatchable->desc.Desc = op_struct;

    const cJSON* flags = dmlrun_json_member(json, "executionFlags");
    if (flags != NULL) {
        dmlrun_place_member(member_place, place, "executionFlags");
        uint32_t flag_bits;
        if (!dmlrun_json_flags(flags, member_place, &dmlrun_execution_flags_enum, &flag_bits)) return false;
        dispatchable->flags = (DML_EXECUTION_FLAGS)flag_bits;
    }
    const cJSON* compile_type = dmlrun_json_member(json, "dmlCompileType");
    if (compile_type != NULL) {
        dmlrun_place_member(member_place, place, "dmlCompileType");
        const char* text;
        if (!dmlrun_json_string(compile_type, member_place, &text)) return false;
        /* One operator compiles the same way alone or as a one-node graph. */
        if (strcmp(text, "DmlCompileOp") != 0 && strcmp(text, "DmlCompileGraph") != 0)
            return dmlrun_fail(member_place, "'%s' is not DmlCompileOp or DmlCompileGraph", text);
    }
    const cJSON* bindings = dmlrun_json_member(json, "bindings");
    if (bindings != NULL) {
        dmlrun_place_member(member_place, place, "bindings");
        if (!dmlrun_json_object(bindings, member_place)) return false;
        dispatchable->init_bindings = bindings;
    }
    return true;
}

void dmlrun_dispatchable_free(dmlrun_dispatchable* dispatchable) {
    dmlrun_arena_free(&dispatchable->arena);
    free(dispatchable->skipped);
    dispatchable->skipped = NULL;
}
