/* make_seeds CORPUS_DIR: writes the seed corpus of every fuzz target from
 * the example models (`make fuzz-seeds`; fuzz/README.md):
 *
 *   fuzz_create/seed_<template>     the template's description, encoded
 *   fuzz_dispatch/seed_<template>   the template unchanged, and again as FLOAT16
 *   fuzz_dmlrun/seed_<model>        the model's text, and a model that reads
 *                                   data.npy (after the text's NUL)
 *
 * Every file is small; each decodes to exactly what it was made from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_models.h"
#include "npy.h"

static void write_file(const char* directory, const char* target, const char* name, const void* bytes, size_t size) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s/seed_%s", directory, target, name);
    for (char* c = path + strlen(directory) + strlen(target) + 2; *c; c++)
        if (*c == ':' || *c == '/') *c = '_';
    FILE* file = fopen(path, "wb");
    if (file == NULL || fwrite(bytes, 1, size, file) != size || fclose(file) != 0) {
        fprintf(stderr, "make_seeds: cannot write %s\n", path);
        exit(1);
    }
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds CORPUS_DIR (with fuzz_create, fuzz_dispatch, fuzz_dmlrun in it)\n");
        return 2;
    }
    const char* directory = argv[1];
    size_t count;
    const fuzz_template* templates = fuzz_templates(&count);
    for (size_t t = 0; t < count; t++) {
        /* fuzz_create: the highest feature level, the description, no execution flags. */
        fuzz_output out = {NULL, 0, 0};
        fuzz_put_feature_level(&out, (DML_FEATURE_LEVEL)0);
        fuzz_encode_operator(&out, templates[t].desc);
        fuzz_put_u8(&out, 0);
        write_file(directory, "fuzz_create", templates[t].name, out.data, out.size);
        fuzz_output_free(&out);

        /* fuzz_dispatch: the template, one thread, no mutation, canonical bindings (zeros). */
        uint8_t plain[] = {(uint8_t)t, 0, 0};
        write_file(directory, "fuzz_dispatch", templates[t].name, plain, sizeof plain);
        /* Two threads and one mutation: every tensor of the first tensor's type becomes FLOAT16. */
        uint8_t half[] = {(uint8_t)t, 1, 1, 0, 0, 1};
        char name[128];
        snprintf(name, sizeof name, "%s_float16", templates[t].name);
        write_file(directory, "fuzz_dispatch", name, half, sizeof half);
    }
    for (size_t m = 0; m < fuzz_model_count; m++)
        write_file(directory, "fuzz_dmlrun", fuzz_model_names[m], fuzz_models[m], fuzz_model_sizes[m]);
    /* A model that reads data.npy (its bytes follow the text's NUL) as input
     * and as expected values, and writes the output as .npy. */
    static const char npy_model[] =
        "{\"resources\": {\"x\": {\"initialValuesDataType\": \"FLOAT32\", \"initialValues\": {\"sourcePath\": "
        "\"data.npy\"}},\n"
        "\"y\": {\"initialValuesDataType\": \"FLOAT32\", \"initialValues\": {\"valueCount\": 4, \"value\": 0}}},\n"
        "\"dispatchables\": {\"pool\": {\"type\": \"MAX_POOLING\", \"desc\": {\"InputTensor\": {\"DataType\": "
        "\"FLOAT32\", \"Sizes\": [1, 1, 2, 2]}, \"OutputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [1, 1, 2, "
        "2]}, \"Strides\": [1, 1], \"WindowSize\": [1, 1], \"StartPadding\": [0, 0], \"EndPadding\": [0, 0]}}},\n"
        "\"commands\": [{\"type\": \"dispatch\", \"dispatchable\": \"pool\", \"bindings\": {\"InputTensor\": "
        "\"x\", \"OutputTensor\": \"y\"}},\n"
        "{\"type\": \"expect\", \"resource\": \"y\", \"sourcePath\": \"data.npy\"},\n"
        "{\"type\": \"writeFile\", \"resource\": \"y\", \"targetPath\": \"y.npy\", \"shape\": [2, 2]}]}\n";
    const float values[4] = {1.0f, -2.0f, 0.5f, 4.0f};
    const uint64_t shape[2] = {2, 2};
    uint8_t* npy = NULL;
    size_t npy_size = 0;
    char error[128];
    if (!dmlrun_npy_write(DML_TENSOR_DATA_TYPE_FLOAT32, 2, shape, values, sizeof values, &npy, &npy_size, error,
                          sizeof error)) {
        fprintf(stderr, "make_seeds: %s\n", error);
        return 1;
    }
    size_t text_size = sizeof npy_model; /* with its NUL */
    uint8_t* seed = malloc(text_size + npy_size);
    memcpy(seed, npy_model, text_size);
    memcpy(seed + text_size, npy, npy_size);
    write_file(directory, "fuzz_dmlrun", "reads_data.npy", seed, text_size + npy_size);
    free(seed);
    free(npy);
    printf("make_seeds: %zu templates, %zu models\n", count, fuzz_model_count);
    return 0;
}
