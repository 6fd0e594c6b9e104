/* Resources: buffers with their initial values (spec model-format.md,
 * "Resources"). Every size is checked against DMLRUN_MAX_BUFFER_BYTES before
 * anything is allocated. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "npy.h"
#include "random.h"
#include "values.h"

uint64_t dmlrun_default_max_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0) return (uint64_t)8 << 30;
    return (uint64_t)pages * (uint64_t)page_size / 2;
}

/* ---- Files ---- */

bool dmlrun_read_file(const char* path, const char* place, uint8_t** bytes, size_t* size) {
    *bytes = NULL;
    *size = 0;
    struct stat status;
    if (stat(path, &status) != 0) return dmlrun_fail(place, "cannot read '%s': %s", path, strerror(errno));
    if (S_ISDIR(status.st_mode)) return dmlrun_fail(place, "cannot read '%s': it is a directory", path);
    /* A pipe or a device has no size to check and may block or never end. */
    if (!S_ISREG(status.st_mode)) return dmlrun_fail(place, "cannot read '%s': it is not a regular file", path);
    /* Files hold at most one buffer plus a header. */
    const uint64_t limit = DMLRUN_MAX_BUFFER_BYTES + (1u << 20);
    if (status.st_size < 0 || (uint64_t)status.st_size > limit)
        return dmlrun_fail(place, "'%s' is larger than dmlrun's limit of %" PRIu64 " bytes", path, limit);
    FILE* file = fopen(path, "rb");
    if (file == NULL) return dmlrun_fail(place, "cannot read '%s': %s", path, strerror(errno));
    size_t expected = (size_t)status.st_size;
    uint8_t* data = malloc(expected + 1);
    if (data == NULL) {
        fclose(file);
        return dmlrun_fail(place, "out of memory reading '%s' (%zu bytes)", path, expected);
    }
    size_t got = fread(data, 1, expected + 1, file);
    bool failed = ferror(file) != 0;
    fclose(file);
    if (failed || got != expected) {
        free(data);
        return dmlrun_fail(place, "cannot read '%s': %s", path, failed ? strerror(errno) : "its size changed");
    }
    data[expected] = '\0';
    *bytes = data;
    *size = expected;
    return true;
}

/* ---- Names: a hash table (open addressing), so that models of 100k
 * resources are looked up in constant time per name ---- */

static size_t name_hash(const char* name) { /* FNV-1a */
    uint64_t hash = 14695981039346656037u;
    for (const unsigned char* c = (const unsigned char*)name; *c; c++)
        hash = (hash ^ *c) * 1099511628211u;
    return (size_t)hash;
}

size_t dmlrun_find_resource(const dmlrun_model* model, const char* name) {
    if (model->resource_index_capacity == 0) return SIZE_MAX;
    size_t mask = model->resource_index_capacity - 1;
    for (size_t slot = name_hash(name) & mask;; slot = (slot + 1) & mask) {
        size_t entry = model->resource_index[slot];
        if (entry == 0) return SIZE_MAX;
        if (strcmp(model->resources[entry - 1].name, name) == 0) return entry - 1;
    }
}

/* Indexes resources [0, resource_count): a power of two at least twice the
 * count, so probes stay short and an empty slot always ends them. */
static bool index_resources(dmlrun_model* model) {
    size_t capacity = 2;
    while (capacity < 2 * model->resource_count)
        capacity *= 2;
    model->resource_index = calloc(capacity, sizeof *model->resource_index);
    if (model->resource_index == NULL) return false;
    model->resource_index_capacity = capacity;
    for (size_t i = 0; i < model->resource_count; i++) {
        size_t slot = name_hash(model->resources[i].name) & (capacity - 1);
        while (model->resource_index[slot] != 0)
            slot = (slot + 1) & (capacity - 1);
        model->resource_index[slot] = i + 1;
    }
    return true;
}

/* ---- Initial values ---- */

typedef enum initializer_kind {
    INITIALIZER_ARRAY,
    INITIALIZER_CONSTANT,
    INITIALIZER_SEQUENCE,
    INITIALIZER_FILE,
    INITIALIZER_RANDOM
} initializer_kind;

/* value_count elements of element_size: checked against the limit. */
static bool checked_bytes(uint64_t value_count, size_t element_size, const char* place, uint64_t* bytes) {
    if (value_count > DMLRUN_MAX_BUFFER_BYTES / element_size)
        return dmlrun_fail(place,
                           "%" PRIu64 " values of %zu bytes exceed dmlrun's limit of %" PRIu64 " bytes per buffer",
                           value_count, element_size, DMLRUN_MAX_BUFFER_BYTES);
    *bytes = value_count * element_size;
    return true;
}

static bool parse_value_count(const cJSON* initializer, const char* place, uint64_t* count) {
    char count_place[DMLRUN_PLACE_CAPACITY];
    dmlrun_place_member(count_place, place, "valueCount");
    const cJSON* value = dmlrun_json_member(initializer, "valueCount");
    if (value == NULL) return dmlrun_fail(count_place, "required field is missing (the number of values)");
    if (!dmlrun_json_uint64(value, count_place, count)) return false;
    if (*count == 0) return dmlrun_fail(count_place, "is 0 but a resource needs at least one value");
    return true;
}

typedef struct random_settings {
    bool normal;
    double min, max, mean, stddev;
    uint64_t seed;
} random_settings;

static bool parse_random(const cJSON* json, const char* place, DML_TENSOR_DATA_TYPE type, random_settings* settings) {
    static const char* const uniform_members[] = {"distribution", "min", "max", "seed"};
    static const char* const normal_members[] = {"distribution", "mean", "stddev", "seed"};
    char member_place[DMLRUN_PLACE_CAPACITY];
    if (!dmlrun_json_object(json, place)) return false;
    const cJSON* distribution = dmlrun_json_member(json, "distribution");
    dmlrun_place_member(member_place, place, "distribution");
    const char* name;
    if (distribution == NULL) return dmlrun_fail(member_place, "required field is missing (\"uniform\" or \"normal\")");
    if (!dmlrun_json_string(distribution, member_place, &name)) return false;
    if (strcmp(name, "uniform") == 0)
        settings->normal = false;
    else if (strcmp(name, "normal") == 0)
        settings->normal = true;
    else
        return dmlrun_fail(member_place, "'%s' is not \"uniform\" or \"normal\"", name);
    if (!dmlrun_json_check_object(json, place, settings->normal ? normal_members : uniform_members, 4,
                                  settings->normal ? "a normal distribution" : "a uniform distribution"))
        return false;
    settings->min = 0, settings->max = 1, settings->mean = 0, settings->stddev = 1, settings->seed = 0;
    struct {
        const char* name;
        double* value;
    } numbers[] = {
        {"min", &settings->min}, {"max", &settings->max}, {"mean", &settings->mean}, {"stddev", &settings->stddev}};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        const cJSON* value = dmlrun_json_member(json, numbers[i].name);
        dmlrun_place_member(member_place, place, numbers[i].name);
        if (value == NULL) continue;
        if (!cJSON_IsNumber(value))
            return dmlrun_fail(member_place, "must be a number, not %s", dmlrun_json_kind(value));
        *numbers[i].value = value->valuedouble;
    }
    const cJSON* seed = dmlrun_json_member(json, "seed");
    dmlrun_place_member(member_place, place, "seed");
    if (seed != NULL && !dmlrun_json_uint64(seed, member_place, &settings->seed)) return false;
    if (!settings->normal && !(settings->min <= settings->max))
        return dmlrun_fail(place, "min (%g) must not be larger than max (%g)", settings->min, settings->max);
    if (settings->normal && !(settings->stddev >= 0))
        return dmlrun_fail(place, "stddev (%g) must be >= 0", settings->stddev);
    if (!settings->normal && !dmlrun_value_is_float(type) &&
        (settings->min != floor(settings->min) || settings->max != floor(settings->max)))
        return dmlrun_fail(place, "min and max must be integers for %s values", dmlDataTypeName(type));
    return true;
}

static void fill_random(const random_settings* settings, DML_TENSOR_DATA_TYPE type, uint64_t count, uint8_t* dst) {
    size_t size = dmlrun_value_size(type);
    dmlrun_random random;
    dmlrun_random_seed(&random, settings->seed);
    for (uint64_t i = 0; i < count; i++) {
        double value;
        if (settings->normal) {
            value = settings->mean + settings->stddev * dmlrun_random_normal(&random);
        } else if (dmlrun_value_is_float(type)) {
            value = settings->min + (settings->max - settings->min) * dmlrun_random_uniform(&random);
        } else {
            /* Integers uniform in [min, max], both included. */
            value = floor(settings->min + (settings->max - settings->min + 1) * dmlrun_random_uniform(&random));
            if (value > settings->max) value = settings->max;
        }
        dmlrun_value_from_double(type, value, dst + i * size);
    }
}

static bool has_extension(const char* path, const char* extension) {
    size_t length = strlen(path), extension_length = strlen(extension);
    return length >= extension_length && strcasecmp(path + length - extension_length, extension) == 0;
}

bool dmlrun_is_image_path(const char* path) {
    static const char* const extensions[] = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff"};
    for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++)
        if (has_extension(path, extensions[i])) return true;
    return false;
}

static bool parse_resource(dmlrun_model* model, dmlrun_resource* resource, const cJSON* json, const char* place) {
    static const char* const members[] = {"type", "initialValuesDataType", "initialValues",
                                          "initialValuesOffsetInBytes", "sizeInBytes"};
    if (!dmlrun_json_check_object(json, place, members, 5, "a resource")) return false;
    char member_place[DMLRUN_PLACE_CAPACITY], type_place[DMLRUN_PLACE_CAPACITY], values_place[DMLRUN_PLACE_CAPACITY];

    const cJSON* resource_type = dmlrun_json_member(json, "type");
    if (resource_type != NULL) {
        dmlrun_place_member(member_place, place, "type");
        const char* text;
        if (!dmlrun_json_string(resource_type, member_place, &text)) return false;
        if (strcmp(text, "buffer") != 0)
            return dmlrun_fail(member_place, "'%s' is not a resource type (only \"buffer\" exists)", text);
    }

    dmlrun_place_member(type_place, place, "initialValuesDataType");
    const cJSON* data_type = dmlrun_json_member(json, "initialValuesDataType");
    bool have_type = data_type != NULL;
    if (have_type) {
        int64_t value;
        if (!dmlrun_json_enum(data_type, type_place, &dmlrun_data_type_enum, &value)) return false;
        resource->type = (DML_TENSOR_DATA_TYPE)value;
        if (dmlrun_value_size(resource->type) == 0)
            return dmlrun_fail(type_place,
                               "%s has no whole-byte elements; a resource needs FLOAT16, FLOAT32, "
                               "FLOAT64, (U)INT8, (U)INT16, (U)INT32 or (U)INT64",
                               dmlDataTypeName(resource->type) ? dmlDataTypeName(resource->type) : "this type");
    }

    dmlrun_place_member(values_place, place, "initialValues");
    const cJSON* values = dmlrun_json_member(json, "initialValues");
    if (values == NULL)
        return dmlrun_fail(values_place, "required field is missing (an array, {valueCount, value}, {valueCount, "
                                         "valueStart, valueDelta}, {sourcePath} or {valueCount, random})");

    initializer_kind kind;
    uint64_t value_count = 0;
    uint8_t* file_bytes = NULL; /* a file's contents until copied */
    size_t file_size = 0;
    const uint8_t* file_values = NULL;
    random_settings random = {0};
    if (cJSON_IsArray(values)) {
        kind = INITIALIZER_ARRAY;
        for (const cJSON* element = values->child; element != NULL; element = element->next)
            value_count++;
        if (value_count == 0) return dmlrun_fail(values_place, "is empty but a resource needs at least one value");
    } else if (cJSON_IsString(values) && strcmp(values->valuestring, "deferred") == 0) {
        return dmlrun_fail(values_place, "\"deferred\" resources belong to ONNX dispatchables, which dmlrun does not "
                                         "run");
    } else if (cJSON_IsObject(values)) {
        int kinds = (dmlrun_json_member(values, "value") != NULL) + (dmlrun_json_member(values, "valueStart") != NULL) +
                    (dmlrun_json_member(values, "sourcePath") != NULL) + (dmlrun_json_member(values, "random") != NULL);
        if (kinds != 1)
            return dmlrun_fail(values_place,
                               "%s: an initializer object has exactly one of \"value\" (constant), "
                               "\"valueStart\" (sequence), \"sourcePath\" (file) and \"random\"",
                               kinds ? "ambiguous" : "unknown initializer");
        if (dmlrun_json_member(values, "value")) {
            static const char* const constant_members[] = {"valueCount", "value"};
            kind = INITIALIZER_CONSTANT;
            if (!dmlrun_json_check_object(values, values_place, constant_members, 2, "a constant initializer"))
                return false;
        } else if (dmlrun_json_member(values, "valueStart")) {
            static const char* const sequence_members[] = {"valueCount", "valueStart", "valueDelta"};
            kind = INITIALIZER_SEQUENCE;
            if (!dmlrun_json_check_object(values, values_place, sequence_members, 3, "a sequence initializer"))
                return false;
            dmlrun_place_member(member_place, values_place, "valueDelta");
            if (dmlrun_json_member(values, "valueDelta") == NULL)
                return dmlrun_fail(member_place, "required field is missing (the step between values)");
        } else if (dmlrun_json_member(values, "random")) {
            static const char* const random_members[] = {"valueCount", "random"};
            kind = INITIALIZER_RANDOM;
            if (!dmlrun_json_check_object(values, values_place, random_members, 2, "a random initializer"))
                return false;
        } else {
            static const char* const file_members[] = {"sourcePath"};
            kind = INITIALIZER_FILE;
            if (!dmlrun_json_check_object(values, values_place, file_members, 1, "a file initializer")) return false;
        }
        if (kind != INITIALIZER_FILE && !parse_value_count(values, values_place, &value_count)) return false;
    } else {
        return dmlrun_fail(values_place, "must be an array of values or an initializer object, not %s",
                           dmlrun_json_kind(values));
    }

    if (kind == INITIALIZER_FILE) {
        dmlrun_place_member(member_place, values_place, "sourcePath");
        const char* source;
        if (!dmlrun_json_string(dmlrun_json_member(values, "sourcePath"), member_place, &source)) return false;
        if (dmlrun_is_image_path(source))
            return dmlrun_fail(member_place, "image files are not supported (use .npy or raw .bin/.dat files)");
        char* path = dmlrun_input_path(model, source, member_place);
        if (path == NULL) return false;
        bool read = dmlrun_read_file(path, member_place, &file_bytes, &file_size);
        if (read && !dmlrun_note_input(model, path)) read = dmlrun_fail(member_place, "out of memory");
        if (read && has_extension(source, ".npy")) {
            dmlrun_npy_array array;
            char error[256];
            if (!dmlrun_npy_parse(file_bytes, file_size, &array, error, sizeof error)) {
                dmlrun_fail(member_place, "'%s': %s", path, error);
                read = false;
            } else if (have_type && array.type != resource->type) {
                dmlrun_fail(member_place, "'%s' holds %s values but initialValuesDataType is %s", path,
                            dmlDataTypeName(array.type), dmlDataTypeName(resource->type));
                read = false;
            } else {
                resource->type = array.type;
                have_type = true;
                value_count = array.element_count;
                file_values = array.data;
            }
        } else if (read) {
            if (!have_type) {
                dmlrun_fail(type_place, "required for raw files (the type of the values in '%s')", path);
                read = false;
            } else if (file_size % dmlrun_value_size(resource->type) != 0) {
                dmlrun_fail(member_place, "'%s' has %zu bytes, not a whole number of %s values", path, file_size,
                            dmlDataTypeName(resource->type));
                read = false;
            } else {
                value_count = file_size / dmlrun_value_size(resource->type);
                file_values = file_bytes;
            }
        }
        if (read && value_count == 0) {
            dmlrun_fail(member_place, "'%s' holds no values but a resource needs at least one", path);
            read = false;
        }
        free(path);
        if (!read) {
            free(file_bytes);
            return false;
        }
    } else if (!have_type) {
        free(file_bytes);
        return dmlrun_fail(type_place, "required field is missing (the data type of the initial values)");
    }

    size_t element_size = dmlrun_value_size(resource->type);
    uint64_t value_bytes = 0, offset = 0, size;
    bool ok = checked_bytes(value_count, element_size, values_place, &value_bytes);
    const cJSON* offset_json = dmlrun_json_member(json, "initialValuesOffsetInBytes");
    dmlrun_place_member(member_place, place, "initialValuesOffsetInBytes");
    if (ok && offset_json != NULL) {
        ok = dmlrun_json_uint64(offset_json, member_place, &offset);
        if (ok && offset > DMLRUN_MAX_BUFFER_BYTES - value_bytes)
            ok = dmlrun_fail(member_place,
                             "%" PRIu64 " + %" PRIu64 " bytes of values exceed dmlrun's limit of %" PRIu64
                             " bytes per buffer",
                             offset, value_bytes, DMLRUN_MAX_BUFFER_BYTES);
    }
    size = offset + value_bytes;
    const cJSON* size_json = dmlrun_json_member(json, "sizeInBytes");
    dmlrun_place_member(member_place, place, "sizeInBytes");
    if (ok && size_json != NULL) {
        uint64_t given;
        ok = dmlrun_json_uint64(size_json, member_place, &given);
        if (ok && given < size)
            ok = dmlrun_fail(member_place,
                             "is %" PRIu64 " but the initial values need %" PRIu64 " bytes (offset %" PRIu64
                             " + %" PRIu64 " values of %zu bytes)",
                             given, size, offset, value_count, element_size);
        if (ok && given > DMLRUN_MAX_BUFFER_BYTES)
            ok = dmlrun_fail(member_place, "%" PRIu64 " bytes exceed dmlrun's limit of %" PRIu64 " bytes per buffer",
                             given, DMLRUN_MAX_BUFFER_BYTES);
        size = given;
    }
    if (!ok) {
        free(file_bytes);
        return false;
    }
    resource->size_bytes = (size + 3) / 4 * 4; /* buffers are multiples of 4 bytes (DirectML's rule) */
    resource->shown_bytes = offset + value_bytes;
    uint64_t max_memory = model->max_memory ? model->max_memory : dmlrun_default_max_memory();
    if (resource->size_bytes > max_memory - model->resource_bytes) {
        free(file_bytes);
        return dmlrun_fail(place,
                           "%" PRIu64 " bytes would bring the resources to more than --max-memory (%" PRIu64
                           " bytes; %" PRIu64 " taken before this one)",
                           resource->size_bytes, max_memory, model->resource_bytes);
    }
    model->resource_bytes += resource->size_bytes;
    resource->host = calloc(1, (size_t)resource->size_bytes);
    if (resource->host == NULL) {
        free(file_bytes);
        return dmlrun_fail(place, "out of memory allocating %" PRIu64 " bytes", resource->size_bytes);
    }

    uint8_t* dst = resource->host + offset;
    switch (kind) {
    case INITIALIZER_ARRAY: {
        uint64_t index = 0;
        for (const cJSON* element = values->child; element != NULL; element = element->next, index++) {
            dmlrun_place_index(member_place, values_place, (size_t)index);
            if (!dmlrun_value_from_json(resource->type, element, member_place, dst + index * element_size))
                return false;
        }
        break;
    }
    case INITIALIZER_CONSTANT: {
        dmlrun_place_member(member_place, values_place, "value");
        if (!dmlrun_value_from_json(resource->type, dmlrun_json_member(values, "value"), member_place, dst))
            return false;
        for (uint64_t i = 1; i < value_count; i++)
            memcpy(dst + i * element_size, dst, element_size);
        break;
    }
    case INITIALIZER_SEQUENCE: {
        uint8_t delta[8];
        dmlrun_place_member(member_place, values_place, "valueStart");
        if (!dmlrun_value_from_json(resource->type, dmlrun_json_member(values, "valueStart"), member_place, dst))
            return false;
        dmlrun_place_member(member_place, values_place, "valueDelta");
        if (!dmlrun_value_from_json(resource->type, dmlrun_json_member(values, "valueDelta"), member_place, delta))
            return false;
        /* a, a+d, a+2d, ...: accumulated in the element type, as DxDispatch does. */
        for (uint64_t i = 1; i < value_count; i++) {
            memcpy(dst + i * element_size, dst + (i - 1) * element_size, element_size);
            dmlrun_value_add(resource->type, dst + i * element_size, delta);
        }
        break;
    }
    case INITIALIZER_RANDOM: {
        dmlrun_place_member(member_place, values_place, "random");
        if (!parse_random(dmlrun_json_member(values, "random"), member_place, resource->type, &random)) return false;
        fill_random(&random, resource->type, value_count, dst);
        break;
    }
    case INITIALIZER_FILE:
        memcpy(dst, file_values, (size_t)value_bytes);
        free(file_bytes);
        break;
    }
    return true;
}

bool dmlrun_load_resources(dmlrun_model* model, const cJSON* resources) {
    if (!cJSON_IsObject(resources))
        return dmlrun_fail("resources", "must be an object (resource name -> resource), not %s",
                           dmlrun_json_kind(resources));
    size_t count = 0;
    for (const cJSON* member = resources->child; member != NULL; member = member->next)
        count++;
    model->resources = calloc(count ? count : 1, sizeof *model->resources);
    if (model->resources == NULL) return dmlrun_fail("resources", "out of memory");
    for (const cJSON* member = resources->child; member != NULL; member = member->next) {
        char place[DMLRUN_PLACE_CAPACITY];
        dmlrun_place_member(place, "resources", member->string);
        /* Names are unique: the parser refuses a member name twice. */
        dmlrun_resource* resource = &model->resources[model->resource_count++];
        resource->name = member->string;
        if (!parse_resource(model, resource, member, place)) return false;
    }
    return index_resources(model) || dmlrun_fail("resources", "out of memory");
}
