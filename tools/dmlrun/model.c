/* The model: loading (resources, dispatchables, commands, all checked
 * before anything runs) and releasing everything it holds. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json.h"

void dmlrun_model_free(dmlrun_model* model) {
    for (size_t d = 0; d < model->dispatchable_count; d++) {
        dmlrun_dispatchable* dispatchable = &model->dispatchables[d];
        dmlReleaseCompiledOperator(dispatchable->compiled);
        dmlFreeBuffer(model->device, dispatchable->persistent);
        dmlFreeBuffer(model->device, dispatchable->temporary);
        dmlrun_dispatchable_free(dispatchable);
    }
    free(model->dispatchables);
    for (size_t r = 0; r < model->resource_count; r++) {
        dmlFreeBuffer(model->device, model->resources[r].device);
        free(model->resources[r].host);
    }
    free(model->resources);
    for (size_t c = 0; c < model->command_count; c++) {
        free(model->commands[c].shape);
        free(model->commands[c].expected);
    }
    free(model->commands);
    dmlReleaseDevice(model->device);
    cJSON_Delete(model->root);
    free(model->directory);
    free(model->inputs);
    free(model->resource_index);
    memset(model, 0, sizeof *model);
}

static bool load_dispatchables(dmlrun_model* model, const cJSON* dispatchables) {
    if (!cJSON_IsObject(dispatchables))
        return dmlrun_fail("dispatchables", "must be an object (dispatchable name -> dispatchable), not %s",
                           dmlrun_json_kind(dispatchables));
    size_t count = 0;
    for (const cJSON* member = dispatchables->child; member != NULL; member = member->next)
        count++;
    model->dispatchables = calloc(count ? count : 1, sizeof *model->dispatchables);
    if (model->dispatchables == NULL) return dmlrun_fail("dispatchables", "out of memory");
    for (const cJSON* member = dispatchables->child; member != NULL; member = member->next) {
        for (size_t d = 0; d < model->dispatchable_count; d++)
            if (strcmp(model->dispatchables[d].name, member->string) == 0) {
                char place[DMLRUN_PLACE_CAPACITY];
                dmlrun_place_member(place, "dispatchables", member->string);
                return dmlrun_fail(place, "a second dispatchable named '%s'", member->string);
            }
        dmlrun_dispatchable* dispatchable = &model->dispatchables[model->dispatchable_count++];
        if (!dmlrun_parse_dispatchable(member->string, member, dispatchable)) return false;
    }
    return true;
}

/* Parses and checks the model text; nothing runs before it is all valid. */
static bool load_text(dmlrun_model* model, char* text, size_t length, const char* source) {
    model->root = dmlrun_json_parse(text, length, source);
    if (model->root == NULL) return false;
    if (!cJSON_IsObject(model->root))
        return dmlrun_fail(NULL, "%s: a model is an object {\"resources\", \"dispatchables\", \"commands\"}, not %s",
                           source, dmlrun_json_kind(model->root));
    static const char* const required[] = {"resources", "dispatchables", "commands"};
    for (size_t i = 0; i < 3; i++)
        if (dmlrun_json_member(model->root, required[i]) == NULL)
            return dmlrun_fail(required[i], "required member of the model is missing");
    return dmlrun_load_resources(model, dmlrun_json_member(model->root, "resources")) &&
           load_dispatchables(model, dmlrun_json_member(model->root, "dispatchables")) &&
           dmlrun_parse_commands(model, dmlrun_json_member(model->root, "commands"));
}

bool dmlrun_load_model(dmlrun_model* model, const char* path) {
    size_t path_length = strlen(path);
    if (path_length >= 5 && strcasecmp(path + path_length - 5, ".onnx") == 0)
        return dmlrun_fail(path, "ONNX models are not supported: dmlrun runs JSON models of DirectML operators "
                                 "(ONNX models need DxDispatch on Windows)");
    uint8_t* bytes;
    size_t length;
    if (!dmlrun_read_file(path, NULL, &bytes, &length)) return false;
    if (!dmlrun_note_input(model, path)) {
        free(bytes);
        return dmlrun_fail(NULL, "out of memory");
    }
    /* sourcePath is relative to the model's directory unless the caller
     * chose another (dmlrun --input_path). */
    const char* slash = strrchr(path, '/');
    if (model->directory == NULL)
        model->directory = slash ? strndup(path, (size_t)(slash - path + (slash == path))) : strdup(".");
    if (model->directory == NULL) {
        free(bytes);
        return dmlrun_fail(NULL, "out of memory");
    }
    bool ok = load_text(model, (char*)bytes, length, path);
    free(bytes);
    return ok;
}

bool dmlrun_load_model_text(dmlrun_model* model, const char* text, size_t length, const char* source) {
    char* copy = malloc(length + 1); /* the parser blanks comments out in place */
    if (copy == NULL) return dmlrun_fail(NULL, "out of memory");
    memcpy(copy, text, length);
    copy[length] = '\0';
    bool ok = load_text(model, copy, length, source);
    free(copy);
    return ok;
}
