/* fuzz_dmlrun: dmlrun on fuzzed model text: the JSON parser, the loader of
 * resources, dispatchables and commands, the set-up of the device and the
 * operators (create, compile, initialize), and the commands (dispatch,
 * print, writeFile, expect) on the CPU with one thread.
 *
 * dmlrun is built with DMLRUN_FUZZING here (dmlrun.h): buffers of at most
 * 1 MiB, no file written, files read from the working directory only. The
 * working directory of each run is a fresh temporary directory holding two
 * small files models may read (values.npy, values.bin), removed at exit (so
 * -artifact_prefix must be an absolute path). An input's bytes after its
 * first NUL become a third file, data.npy, so that the .npy reader and the
 * raw file reader are fuzzed too. Commands run
 * only when every tensor has at most 4096 elements and no ROI align
 * operator takes more than 16 samples per axis: dispatch time grows with
 * both. Invariants: ASan, UBSan and LSan's. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dmlrun.h"
#include "fuzz_common.h"
#include "npy.h"

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

enum { MAX_ELEMENTS = 4096, MAX_SAMPLES = 16 };

static char directory[64];
static int original_directory = -1;

static void remove_directory(void) {
    if (chdir(directory) != 0) return;
    unlink("data.npy");
    unlink("values.npy");
    unlink("values.bin");
    if (fchdir(original_directory) == 0) rmdir(directory);
}

static void write_fixture(const char* name, const void* bytes, size_t size) {
    FILE* file = fopen(name, "wb");
    if (file == NULL || fwrite(bytes, 1, size, file) != size || fclose(file) != 0) abort();
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
    (void)argc, (void)argv;
    snprintf(directory, sizeof directory, "/tmp/dmlrun-fuzz-XXXXXX");
    original_directory = open(".", O_RDONLY | O_DIRECTORY);
    if (original_directory < 0 || mkdtemp(directory) == NULL || chdir(directory) != 0) abort();
    atexit(remove_directory);
    const float values[4] = {1.0f, -2.0f, 0.5f, 4.0f};
    const uint64_t shape[1] = {4};
    uint8_t* npy = NULL;
    size_t npy_size = 0;
    char error[128];
    if (!dmlrun_npy_write(DML_TENSOR_DATA_TYPE_FLOAT32, 1, shape, values, sizeof values, &npy, &npy_size, error,
                          sizeof error))
        abort();
    write_fixture("values.npy", npy, npy_size);
    free(npy);
    write_fixture("values.bin", values, sizeof values);
    if (fchdir(original_directory) != 0) abort(); /* libFuzzer reads the corpus from here */
    return 0;
}

/* Whether the commands run quickly enough for a fuzzer (the header says why). */
static bool small_enough(const dmlrun_model* model) {
    for (size_t d = 0; d < model->dispatchable_count; d++) {
        const dmlrun_dispatchable* dispatchable = &model->dispatchables[d];
        const dmlrun_op_schema* schema = dispatchable->schema;
        for (size_t i = 0; i < schema->field_count; i++) {
            const dmlrun_field* field = &schema->fields[i];
            const void* slot = fuzz_field_at(dispatchable->desc.Desc, field);
            if (strcmp(field->name, "MaximumSamplesPerOutput") == 0 && fuzz_load_u32(slot) > MAX_SAMPLES) return false;
            const DML_TENSOR_DESC* tensor = dmlrun_field_is_tensor(field->kind) ? fuzz_load_pointer(slot) : NULL;
            if (tensor == NULL) continue;
            const DML_BUFFER_TENSOR_DESC* buffer = tensor->Desc;
            uint64_t elements = 1;
            for (uint32_t k = 0; k < buffer->DimensionCount && elements <= MAX_ELEMENTS; k++)
                elements *= buffer->Sizes[k];
            if (elements > MAX_ELEMENTS) return false;
        }
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    dmlrun_options options;
    memset(&options, 0, sizeof options);
    options.backend = DML_BACKEND_CPU;
    options.threads = 1;
    options.iterations = 1;
    if (chdir(directory) != 0) abort();
    const uint8_t* nul = memchr(data, 0, size);
    size_t text_size = nul ? (size_t)(nul - data) : size;
    if (nul)
        write_fixture("data.npy", nul + 1, size - text_size - 1);
    else
        unlink("data.npy");
    dmlrun_model model;
    memset(&model, 0, sizeof model);
    bool ok = dmlrun_load_model_text(&model, (const char*)data, text_size, "fuzz.json");
    ok = ok && dmlrun_prepare(&model, &options);
    ok = ok && small_enough(&model) && dmlrun_run_commands(&model, &options);
    dmlrun_model_free(&model);
    if (fchdir(original_directory) != 0) abort();
    return 0;
}
