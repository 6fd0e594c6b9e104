/* fuzz_dmlrun: dmlrun on fuzzed model text: the JSON parser, the loader of
 * resources, dispatchables and commands, the set-up of the device and the
 * operators (create, compile, initialize), and the commands (dispatch,
 * print, writeFile, expect) on the CPU with one thread.
 *
 * dmlrun is built with DMLRUN_FUZZING here (dmlrun.h): buffers of at most
 * 1 MiB. Each run works in a scratch directory made at start and removed at
 * exit (so -artifact_prefix must be an absolute path):
 *
 *   SCRATCH/model/          the working and the model's directory (inputs)
 *       values.npy, values.bin    small files models may read
 *       data.npy                  an input's bytes after its first NUL, so
 *                                 that the .npy and raw readers are fuzzed
 *       leak.bin -> ../outside/secret.bin      an input link leaving it
 *       out/                      the output directory (writeFile)
 *           up -> ..              leaves it (the model's directory)
 *           escape -> ../../outside            leaves both
 *           input.bin -> ../values.bin         a link to an input
 *           fifo                  not a regular file
 *   SCRATCH/outside/secret.bin
 *
 * dmlrun confines the model (docs/dmlrun.md, "Files"): beyond ASan, UBSan
 * and LSan's invariants, after every run the inputs and SCRATCH/outside are
 * unchanged (no write escaped out/). Files written to out/ are removed after
 * each run. Commands run only when every tensor has at most 4096 elements
 * and no ROI align operator takes more than 16 samples per axis: dispatch
 * time grows with both. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dmlrun.h"
#include "fuzz_common.h"
#include "npy.h"

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

enum { MAX_ELEMENTS = 4096, MAX_SAMPLES = 16 };

static char scratch[64];
static int original_directory = -1;

/* The files and links of the scratch directory, relative to SCRATCH/model. */
static const char* const fixed_links[][2] = {{"leak.bin", "../outside/secret.bin"},
                                             {"out/up", ".."},
                                             {"out/escape", "../../outside"},
                                             {"out/input.bin", "../values.bin"}};
static const float fixture_values[4] = {1.0f, -2.0f, 0.5f, 4.0f};
static const char secret[] = "not to be read or written by a model";

static bool is_fixed_output_entry(const char* name) {
    return strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, "up") == 0 ||
           strcmp(name, "escape") == 0 || strcmp(name, "input.bin") == 0 || strcmp(name, "fifo") == 0;
}

/* Removes what the model wrote to out/ (dmlrun writes only regular files). */
static void clear_outputs(void) {
    DIR* directory = opendir("out");
    if (directory == NULL) abort();
    for (struct dirent* entry; (entry = readdir(directory)) != NULL;) {
        if (is_fixed_output_entry(entry->d_name)) continue;
        char path[300];
        snprintf(path, sizeof path, "out/%s", entry->d_name);
        if (unlink(path) != 0) abort();
    }
    closedir(directory);
}

static void remove_scratch(void) {
    if (chdir(scratch) != 0 || chdir("model") != 0) return;
    clear_outputs();
    for (size_t i = 0; i < sizeof fixed_links / sizeof fixed_links[0]; i++)
        unlink(fixed_links[i][0]);
    unlink("out/fifo");
    rmdir("out");
    unlink("data.npy");
    unlink("values.npy");
    unlink("values.bin");
    unlink("../outside/secret.bin");
    rmdir("../outside");
    if (chdir("..") == 0) rmdir("model");
    if (fchdir(original_directory) == 0) rmdir(scratch);
}

static void write_fixture(const char* name, const void* bytes, size_t size) {
    FILE* file = fopen(name, "wb");
    if (file == NULL || fwrite(bytes, 1, size, file) != size || fclose(file) != 0) abort();
}

/* Whether file `name` holds exactly `size` bytes equal to `bytes`. */
static bool holds(const char* name, const void* bytes, size_t size) {
    FILE* file = fopen(name, "rb");
    if (file == NULL) return false;
    char buffer[1024];
    size_t got = fread(buffer, 1, sizeof buffer, file);
    fclose(file);
    return got == size && memcmp(buffer, bytes, size) == 0;
}

static uint8_t* values_npy;
static size_t values_npy_size;

/* No write left out/: the inputs and SCRATCH/outside are as made. */
static void check_confinement(void) {
    FUZZ_CHECK(holds("values.npy", values_npy, values_npy_size) &&
                   holds("values.bin", fixture_values, sizeof fixture_values),
               "a model overwrote one of its input files");
    FUZZ_CHECK(holds("../outside/secret.bin", secret, sizeof secret), "a model wrote outside its output directory");
    DIR* outside = opendir("../outside");
    if (outside == NULL) abort();
    size_t entries = 0;
    while (readdir(outside) != NULL)
        entries++;
    closedir(outside);
    FUZZ_CHECK(entries == 3, "a model created a file outside its output directory");
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
    (void)argc, (void)argv;
    snprintf(scratch, sizeof scratch, "/tmp/dmlrun-fuzz-XXXXXX");
    original_directory = open(".", O_RDONLY | O_DIRECTORY);
    if (original_directory < 0 || mkdtemp(scratch) == NULL || chdir(scratch) != 0) abort();
    atexit(remove_scratch);
    if (mkdir("outside", 0700) != 0 || mkdir("model", 0700) != 0 || chdir("model") != 0 || mkdir("out", 0700) != 0 ||
        mkfifo("out/fifo", 0600) != 0)
        abort();
    write_fixture("../outside/secret.bin", secret, sizeof secret);
    for (size_t i = 0; i < sizeof fixed_links / sizeof fixed_links[0]; i++)
        if (symlink(fixed_links[i][1], fixed_links[i][0]) != 0) abort();
    const uint64_t shape[1] = {4};
    char error[128];
    if (!dmlrun_npy_write(DML_TENSOR_DATA_TYPE_FLOAT32, 1, shape, fixture_values, sizeof fixture_values, &values_npy,
                          &values_npy_size, error, sizeof error))
        abort();
    write_fixture("values.npy", values_npy, values_npy_size);
    write_fixture("values.bin", fixture_values, sizeof fixture_values);
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
    if (chdir(scratch) != 0 || chdir("model") != 0) abort();
    const uint8_t* nul = memchr(data, 0, size);
    size_t text_size = nul ? (size_t)(nul - data) : size;
    if (nul)
        write_fixture("data.npy", nul + 1, size - text_size - 1);
    else
        unlink("data.npy");
    dmlrun_model model;
    memset(&model, 0, sizeof model);
    model.output_directory = "out";
    bool ok = dmlrun_load_model_text(&model, (const char*)data, text_size, "fuzz.json");
    ok = ok && dmlrun_prepare(&model, &options);
    ok = ok && small_enough(&model) && dmlrun_run_commands(&model, &options);
    dmlrun_model_free(&model);
    check_confinement();
    clear_outputs();
    if (fchdir(original_directory) != 0) abort();
    return 0;
}
