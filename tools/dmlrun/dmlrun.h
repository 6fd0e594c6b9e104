/*
 * dmlrun.h — what dmlrun's parts share: the model (resources, dispatchables,
 * commands), the options, and error reporting with the place in the model.
 *
 * dmlrun runs DirectML operator models in DxDispatch's JSON format
 * (spec model-format.md) through libdml's public API only.
 *
 *   json.c        JSON text -> cJSON tree (comments, trailing commas, line and
 *                 column of syntax errors), typed getters that name the place
 *   values.c      elements of every data type: from JSON, to text, FLOAT16
 *   random.c      the reproducible random initializer (own PRNG, own log/cos)
 *   npy.c         .npy read and write
 *   resources.c   resources and their initial values
 *   op_schema.c   one table per operator: its fields in struct order
 *                 (op_schema.h; the library dmlrun_schema)
 *   op_desc.c     JSON description -> DML_*_OPERATOR_DESC, driven by the tables
 *   commands.c    dispatch, print, writeFile, expect; device set-up; timing
 *   model.c       the whole model: loading, checking, releasing
 *   main.c        command line, the embedded default model
 */
#ifndef DMLRUN_H
#define DMLRUN_H

#include <cJSON.h>
#include <dml/dml.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "op_schema.h"

/* The largest buffer dmlrun allocates for a resource, a file or expected
 * values: sizes above it are model errors, not allocation attempts. */
#ifdef DMLRUN_FUZZING
/* Fuzzing builds (DML_FUZZ, fuzz/fuzz_dmlrun.c): small buffers, so that
 * an execution stays fast. */
#define DMLRUN_MAX_BUFFER_BYTES ((uint64_t)1 << 20)
#else
#define DMLRUN_MAX_BUFFER_BYTES ((uint64_t)4 << 30)
#endif

enum {
    DMLRUN_PLACE_CAPACITY = 512, /* "dispatchables.pool.desc.WindowSize[1]" */
    DMLRUN_MAX_TENSORS = 16      /* tensor fields of one operator description */
};

/* ---- Diagnostics (json.c) ---- */

/* Prints "dmlrun: error: PLACE: message" to stderr; returns false so that
 * callers can `return dmlrun_fail(...)`. place may be NULL or "". */
bool dmlrun_fail(const char* place, const char* format, ...) __attribute__((format(printf, 2, 3)));
/* Prints "dmlrun: warning: PLACE: message" to stderr; the run goes on. */
void dmlrun_warning(const char* place, const char* format, ...) __attribute__((format(printf, 2, 3)));
/* Prints "dmlrun: note: message" to stderr. */
void dmlrun_note(const char* format, ...) __attribute__((format(printf, 1, 2)));
/* Places of members and elements: "parent.key", "parent[index]". */
void dmlrun_place_member(char* out, const char* parent, const char* key);
void dmlrun_place_index(char* out, const char* parent, size_t index);

/* ---- A small arena: everything one operator description points to ---- */
typedef struct dmlrun_arena_block dmlrun_arena_block;
typedef struct dmlrun_arena {
    dmlrun_arena_block* blocks;
} dmlrun_arena;
/* Zeroed memory that lives until dmlrun_arena_free; NULL when out of memory. */
void* dmlrun_arena_alloc(dmlrun_arena* arena, size_t size);
void dmlrun_arena_free(dmlrun_arena* arena);

/* ---- Resources (resources.c) ---- */
typedef struct dmlrun_resource {
    const char* name;          /* the member name in "resources" (owned by the JSON tree) */
    DML_TENSOR_DATA_TYPE type; /* initialValuesDataType: types print, expect and writeFile */
    uint64_t size_bytes;       /* the buffer's size, a multiple of 4 */
    uint64_t shown_bytes;      /* initialValuesOffsetInBytes + the initial values' bytes */
    uint8_t* host;             /* the initial contents (size_bytes); freed after the upload */
    void* device;              /* the buffer in the device's memory */
    const char* not_computed;  /* default tour: why its values were not computed (NULL: they were) */
} dmlrun_resource;

/* ---- Dispatchables (op_desc.c) ---- */
typedef struct dmlrun_tensor_info {
    const dmlrun_field* field;
    bool is_output;
    uint32_t slot; /* index among the operator's input or output slots */
    bool present;  /* false: an optional tensor that is absent */
    DML_TENSOR_DATA_TYPE type;
    DML_TENSOR_FLAGS flags;
    uint64_t total_bytes; /* TotalTensorSizeInBytes */
} dmlrun_tensor_info;

typedef struct dmlrun_binding {
    bool bound;
    size_t resource;
    uint64_t offset_bytes;
} dmlrun_binding;

typedef struct dmlrun_dispatchable {
    const char* name; /* member name in "dispatchables" */
    char place[DMLRUN_PLACE_CAPACITY];
    const dmlrun_op_schema* schema;
    DML_OPERATOR_DESC desc; /* points into arena */
    dmlrun_arena arena;
    DML_EXECUTION_FLAGS flags;
    dmlrun_tensor_info tensors[DMLRUN_MAX_TENSORS]; /* tensor fields in struct order */
    uint32_t tensor_count, input_count, output_count;
    const cJSON* init_bindings; /* "bindings": OWNED_BY_DML inputs bound at initialization */
    dmlrun_binding init[DMLRUN_MAX_TENSORS];
    DMLCompiledOperator* compiled;
    void* persistent; /* the persistent resource, when the operator needs one */
    uint64_t persistent_size;
    void* temporary; /* the temporary resource, when the operator needs one */
    uint64_t temporary_size;
    char* skipped; /* default tour: libdml's E_NOTIMPL message; not dispatched */
} dmlrun_dispatchable;

/* Builds a dispatchable from its JSON ("type", "desc", "executionFlags",
 * "bindings"). On failure reports the place and returns false; whatever was
 * allocated is released by dmlrun_dispatchable_free. */
bool dmlrun_parse_dispatchable(const char* name, const cJSON* json, dmlrun_dispatchable* dispatchable);
void dmlrun_dispatchable_free(dmlrun_dispatchable* dispatchable);

/* ---- Commands (commands.c) ---- */
typedef enum dmlrun_command_kind {
    DMLRUN_COMMAND_DISPATCH,
    DMLRUN_COMMAND_PRINT,
    DMLRUN_COMMAND_WRITE_FILE,
    DMLRUN_COMMAND_EXPECT
} dmlrun_command_kind;

typedef struct dmlrun_command {
    dmlrun_command_kind kind;
    char place[32]; /* "commands[3]" */
    size_t dispatchable;
    dmlrun_binding bindings[DMLRUN_MAX_TENSORS]; /* dispatch: by tensor index */
    size_t resource;
    bool verbose;            /* print */
    const char* target_path; /* writeFile (owned by the JSON tree) */
    uint32_t shape_rank;     /* writeFile: 0 = 1-D of every shown element */
    uint64_t* shape;
    void* expected; /* expect: values in the resource's type */
    uint64_t expected_count;
    double absolute_tolerance, relative_tolerance;
    uint64_t ulp_tolerance;
} dmlrun_command;

/* ---- The model and the options ---- */
typedef struct dmlrun_options {
    DML_BACKEND backend;
    uint32_t threads;             /* 0 = all cores */
    bool debug;                   /* DML_CREATE_DEVICE_FLAG_DEBUG */
    uint32_t iterations;          /* timed iterations per dispatch command, at least */
    uint32_t warmup;              /* untimed iterations before them */
    uint32_t repeat;              /* dispatches per iteration (0 means 1) */
    uint32_t milliseconds_to_run; /* more timed iterations until this long */
    uint32_t interval_ms;         /* at least this long from one iteration's start to the next */
    uint32_t timing_verbosity;    /* 1: also the cold time; 2: also every sample */
    bool verbose;
    bool skip_unimplemented; /* default tour: skip operators libdml reports E_NOTIMPL for */
    const char* output_dir;  /* --output-dir; NULL: the working directory */
    bool allow_any_path;     /* --allow-any-path */
    uint64_t max_memory;     /* --max-memory: bytes; 0: dmlrun_default_max_memory() */
} dmlrun_options;

/* A file's identity: outputs may not replace the model or its inputs. */
typedef struct dmlrun_file_id {
    dev_t device;
    ino_t inode;
} dmlrun_file_id;

typedef struct dmlrun_model {
    cJSON* root;
    char* directory;              /* sourcePath is relative to it: the model file's, or set before loading */
    const char* output_directory; /* targetPath is relative to it; NULL: the working directory */
    bool allow_any_path;          /* --allow-any-path: no confinement (paths.c) */
    uint64_t max_memory;          /* bytes all resources may take together; 0: the default */
    uint64_t resource_bytes;      /* what they take so far */
    dmlrun_file_id* inputs;       /* the model file and every file read */
    size_t input_count;
    size_t* resource_index; /* hash of the names: slot -> resource index + 1 (0: empty) */
    size_t resource_index_capacity;
    dmlrun_resource* resources;
    size_t resource_count;
    dmlrun_dispatchable* dispatchables;
    size_t dispatchable_count;
    dmlrun_command* commands;
    size_t command_count;
    DMLDevice* device;
} dmlrun_model;

/* resources.c: parses every resource and builds its initial contents. */
bool dmlrun_load_resources(dmlrun_model* model, const cJSON* resources);
/* The default of --max-memory: half the physical memory (8 GiB when it
 * cannot be read), so that a model's resources never exhaust the machine. */
uint64_t dmlrun_default_max_memory(void);
/* Index of the resource with that name, or SIZE_MAX. */
size_t dmlrun_find_resource(const dmlrun_model* model, const char* name);
/* Whether path names an image file (.png, .jpg, ...), which DxDispatch reads
 * and writes through Windows' imaging component and dmlrun does not. */
bool dmlrun_is_image_path(const char* path);
/* Reads a whole file (at most DMLRUN_MAX_BUFFER_BYTES). */
bool dmlrun_read_file(const char* path, const char* place, uint8_t** bytes, size_t* size);

/* ---- Confinement (paths.c) ---- */
/* sourcePath relative to the model's directory (or, as DxDispatch does, to
 * the working directory when only that has it), refused when it leaves that
 * directory (unless allow_any_path). A malloc'ed path, or NULL after an error. */
char* dmlrun_input_path(const dmlrun_model* model, const char* path, const char* place);
/* Remembers the identity of a file read, which outputs may not replace. */
bool dmlrun_note_input(dmlrun_model* model, const char* path);
/* Opens targetPath (relative to the output directory) for writing: a
 * regular file inside it, not a link, not the model or an input; truncated.
 * A file descriptor, or -1 after an error. */
int dmlrun_open_output(const dmlrun_model* model, const char* path, const char* place);

/* commands.c */
bool dmlrun_parse_commands(dmlrun_model* model, const cJSON* commands);
/* Creates the device, uploads the resources, creates, compiles and
 * initializes every dispatchable. */
bool dmlrun_prepare(dmlrun_model* model, const dmlrun_options* options);
/* Runs the commands in order; false on an error or a failed expect. */
bool dmlrun_run_commands(dmlrun_model* model, const dmlrun_options* options);

/* model.c: reads the model file (sourcePath is then relative to its
 * directory) or model text given in memory, and checks all of it. On failure
 * reports the place; whatever was loaded is released by dmlrun_model_free. */
bool dmlrun_load_model(dmlrun_model* model, const char* path);
bool dmlrun_load_model_text(dmlrun_model* model, const char* text, size_t length, const char* source);
void dmlrun_model_free(dmlrun_model* model);

#endif /* DMLRUN_H */
