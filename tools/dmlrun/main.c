/* dmlrun: runs DirectML operator models (DxDispatch's JSON format) on
 * libdml. With no model it runs an embedded tour of the operators. */
#define _GNU_SOURCE /* strcasestr */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* The embedded default model (default_model.json, compiled in at build time). */
extern const char dmlrun_default_model[];
extern const size_t dmlrun_default_model_size;

/* ---- The command line: dmlrun's options and DxDispatch's ----
 *
 * One table: getopt_long's options, the short-option string and --help all
 * come from it. DxDispatch's options keep DxDispatch's names, letters and
 * meaning; those about Direct3D, PIX and ONNX Runtime have no counterpart in
 * libdml and are accepted and ignored with a note (docs/dmlrun.md has the
 * whole table). */

typedef enum option_id {
    OPTION_HELP,
    OPTION_VERSION,
    OPTION_SHOW_DEPENDENCIES,
    OPTION_SHOW_ADAPTERS,
    OPTION_MODEL,
    OPTION_BACKEND,
    OPTION_ADAPTER,
    OPTION_THREADS,
    OPTION_DEBUG,
    OPTION_ITERATIONS,
    OPTION_REPEAT,
    OPTION_MILLISECONDS_TO_RUN,
    OPTION_INTERVAL,
    OPTION_WARMUP,
    OPTION_TIMING_VERBOSITY,
    OPTION_VERBOSE,
    OPTION_PRINT_COMMANDS,
    OPTION_INPUT_PATH,
    OPTION_OUTPUT_DIR,
    OPTION_ALLOW_ANY_PATH,
    OPTION_MAX_MEMORY,
    OPTION_IGNORED, /* DxDispatch's Direct3D, PIX and ONNX Runtime options */
} option_id;

typedef struct option_entry {
    const char* name; /* the long name */
    int letter;       /* the short option, 0 for none */
    option_id id;
    const char* value; /* the value's name in --help, NULL for a flag */
    const char* help;  /* NULL: not listed by --help (aliases, ignored options) */
} option_entry;

static const option_entry option_table[] = {
    /* dmlrun's own */
    {"backend", 0, OPTION_BACKEND, "cpu|cuda", "the libdml backend (default cpu)"},
    {"threads", 0, OPTION_THREADS, "N", "CPU worker threads (default 0: all cores)"},
    {"iterations", 0, OPTION_ITERATIONS, "N", NULL},
    {"warmup", 0, OPTION_WARMUP, "N", NULL},
    {"output-dir", 0, OPTION_OUTPUT_DIR, "DIR", "where writeFile writes (default: the working directory)"},
    {"allow-any-path", 0, OPTION_ALLOW_ANY_PATH, NULL,
     "let the model read and write outside its directory and the output directory (a model is as trusted as a "
     "script)"},
    {"max-memory", 0, OPTION_MAX_MEMORY, "BYTES",
     "the most all resources may take together, with an optional K, M or G (2^10, 2^20, 2^30); default: half the "
     "physical memory"},
    {"verbose", 0, OPTION_VERBOSE, NULL, "say what dmlrun does, on stderr"},
    {"version", 0, OPTION_VERSION, NULL, "print libdml's version"},
    /* DxDispatch's, with DxDispatch's meaning */
    {"model", 'm', OPTION_MODEL, "PATH", "the model (or give it as the first argument)"},
    {"help", 'h', OPTION_HELP, NULL, "this text"},
    {"show_dependencies", 'S', OPTION_SHOW_DEPENDENCIES, NULL, "print the versions of libdml and its dependencies"},
    {"input_path", 0, OPTION_INPUT_PATH, "DIR", "base directory of sourcePath files (default: the model's)"},
    {"output_path", 0, OPTION_OUTPUT_DIR, "DIR", "base directory of writeFile's targetPath (as --output-dir)"},
    {"print_commands", 0, OPTION_PRINT_COMMANDS, NULL, "say which command runs (as --verbose)"},
    {"dispatch_iterations", 'i', OPTION_ITERATIONS, "N",
     "timed iterations of each dispatch, at least (default 1; alias --iterations)"},
    {"dispatch_repeat", 'r', OPTION_REPEAT, "N", "dispatches per timed iteration (default 1); times are per dispatch"},
    {"milliseconds_to_run", 't', OPTION_MILLISECONDS_TO_RUN, "MS",
     "time each dispatch for at least MS ms (more iterations if needed)"},
    {"dispatch_interval", 'I', OPTION_INTERVAL, "MS", "at least MS ms between iterations (default 0)"},
    {"warmup_samples", 'w', OPTION_WARMUP, "N",
     "untimed iterations first (default 1 when iterations > 1, else 0; alias --warmup)"},
    {"timing_verbosity", 'v', OPTION_TIMING_VERBOSITY, "0|1|2",
     "0: each dispatch's timing line; 1: also its first (cold) time; 2: also every sample"},
    {"debug", 'd', OPTION_DEBUG, NULL, "create the device with DML_CREATE_DEVICE_FLAG_DEBUG"},
    {"adapter", 'a', OPTION_ADAPTER, "NAME", "the backend whose name contains NAME: cpu, cuda (or nvidia)"},
    {"show_adapters", 's', OPTION_SHOW_ADAPTERS, NULL, "list libdml's backends and whether they can run here"},
    {"max_gpu_time_measurements", 0, OPTION_IGNORED, "N", NULL},
    {"queue_type", 'q', OPTION_IGNORED, "TYPE", NULL},
    {"clear_shader_caches", 0, OPTION_IGNORED, NULL, NULL},
    {"disable_gpu_timeout", 0, OPTION_IGNORED, NULL, NULL},
    {"disable_background_processing", 0, OPTION_IGNORED, NULL, NULL},
    {"set_stable_power_state", 0, OPTION_IGNORED, NULL, NULL},
    {"disable_agility_sdk", 0, OPTION_IGNORED, NULL, NULL},
    {"print_hlsl_disassembly", 0, OPTION_IGNORED, NULL, NULL},
    {"post_dispatch_barriers", 0, OPTION_IGNORED, "TYPES", NULL},
    {"xbox_allow_precompile", 0, OPTION_IGNORED, NULL, NULL},
    {"pix_capture_type", 'c', OPTION_IGNORED, "TYPE", NULL},
    {"pix_capture_name", 'o', OPTION_IGNORED, "NAME", NULL},
    {"onnx_free_dim_name_override", 'f', OPTION_IGNORED, "NAME:N", NULL},
    {"onnx_free_dim_denotation_override", 'F', OPTION_IGNORED, "NAME:N", NULL},
    {"onnx_session_config_entry", 'e', OPTION_IGNORED, "KEY:VALUE", NULL},
    {"binding_shape", 'b', OPTION_IGNORED, "NAME:SHAPE", NULL},
    {"onnx_graph_optimization_level", 'l', OPTION_IGNORED, "N", NULL},
    {"onnx_logging_level", 'L', OPTION_IGNORED, "N", NULL},
    {"print_onnx_bindings", 'p', OPTION_IGNORED, NULL, NULL},
    {"enable_ort_extensions", 'x', OPTION_IGNORED, NULL, NULL},
    {"enable_onnx_profiling", 0, OPTION_IGNORED, NULL, NULL},
};
enum { OPTION_COUNT = sizeof option_table / sizeof option_table[0] };

static void print_usage(FILE* out) {
    fputs("usage: dmlrun [MODEL.json] [options]\n"
          "\n"
          "Runs a DirectML operator model (DxDispatch's JSON format: resources,\n"
          "dispatchables, commands) on libdml. Without a model it runs a built-in\n"
          "tour of the operators that checks every result.\n"
          "\n"
          "options (DxDispatch's keep its names and meaning):\n",
          out);
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const option_entry* entry = &option_table[i];
        if (entry->help == NULL) continue;
        char synopsis[64];
        snprintf(synopsis, sizeof synopsis, "%c%c%c --%s%s%s", entry->letter ? '-' : ' ',
                 entry->letter ? entry->letter : ' ', entry->letter ? ',' : ' ', entry->name, entry->value ? " " : "",
                 entry->value ? entry->value : "");
        fprintf(out, "  %-36s %s\n", synopsis, entry->help);
    }
    fputs("\n"
          "DxDispatch's Direct3D, PIX and ONNX Runtime options (-q, -c, -o, -f, -F,\n"
          "-e, -b, -l, -L, -p, -x, --disable_gpu_timeout, ...) are accepted and\n"
          "ignored with a note: they have no counterpart in libdml.\n"
          "\n"
          "Each dispatch prints 'Dispatch NAME [backend]: N iterations, median, min,\n"
          "max (ms), GB/s'; print commands print 'Resource NAME: values'. Errors name\n"
          "the place in the model and exit with status 1 (2 for a bad command line).\n"
          "docs/dmlrun.md (installed: /usr/share/doc/libdml/dmlrun.md) has the details.\n",
          out);
}

static bool parse_count(const char* option, const char* text, uint32_t max, uint32_t* out) {
    char* end = NULL;
    errno = 0;
    unsigned long long value = (text[0] >= '0' && text[0] <= '9') ? strtoull(text, &end, 10) : 0;
    if (end == NULL || *end != '\0' || errno == ERANGE || value > max) {
        fprintf(stderr, "dmlrun: %s needs a whole number from 0 to %u, not '%s'\n", option, max, text);
        return false;
    }
    *out = (uint32_t)value;
    return true;
}

/* "1073741824", "512M", "8G": a byte count of at least 1. */
static bool parse_bytes(const char* option, const char* text, uint64_t* out) {
    char* end = NULL;
    errno = 0;
    unsigned long long value = (text[0] >= '0' && text[0] <= '9') ? strtoull(text, &end, 10) : 0;
    unsigned shift = 0;
    if (end != NULL && (*end == 'K' || *end == 'M' || *end == 'G') && end[1] == '\0')
        shift = *end == 'K' ? 10 : *end == 'M' ? 20 : 30, end++;
    if (end == NULL || *end != '\0' || errno == ERANGE || value == 0 || value > (UINT64_MAX >> shift)) {
        fprintf(stderr,
                "dmlrun: %s needs a byte count of at least 1 (a number, optionally followed by K, M or G), "
                "not '%s'\n",
                option, text);
        return false;
    }
    *out = (uint64_t)value << shift;
    return true;
}

/* -a/--adapter: DxDispatch matches a substring of the adapter's name; here
 * the adapters are libdml's backends. */
static bool parse_adapter(const char* text, DML_BACKEND* backend) {
    if (strcasestr("cpu", text) != NULL) {
        *backend = DML_BACKEND_CPU;
    } else if (strcasestr("cuda", text) != NULL || strcasestr("nvidia", text) != NULL) {
        *backend = DML_BACKEND_CUDA;
    } else {
        fprintf(stderr, "dmlrun: --adapter '%s' matches no libdml backend (cpu, cuda or nvidia)\n", text);
        return false;
    }
    return true;
}

/* -s/--show_adapters: each backend, and whether a device can be made here. */
static void show_adapters(void) {
    static const struct {
        DML_BACKEND backend;
        const char* name;
    } backends[] = {{DML_BACKEND_CPU, "cpu"}, {DML_BACKEND_CUDA, "cuda"}};
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        DML_DEVICE_DESC desc = {.Backend = backends[i].backend};
        DMLDevice* device = NULL;
        HRESULT status = dmlCreateDevice(&desc, &device);
        if (SUCCEEDED(status))
            printf("%s: available\n", backends[i].name);
        else
            printf("%s: unavailable: %s\n", backends[i].name, dmlGetLastErrorMessage());
        dmlReleaseDevice(device);
    }
}

/* What the command line asks for besides the run's options. */
typedef struct command_line {
    const char* model_path;
    const char* input_path;
} command_line;

/* Returns 0 to run, 1 after --help, --version and the like, 2 on a bad
 * command line. */
static int parse_options(int argc, char** argv, dmlrun_options* options, command_line* line) {
    struct option long_options[OPTION_COUNT + 1];
    char short_options[2 * OPTION_COUNT + 2] = ":"; /* ':' first: a missing value is reported as ':' */
    size_t short_length = 1;
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const option_entry* entry = &option_table[i];
        /* getopt_long returns the letter, or for a long-only option a code
         * beyond every letter: 256 + its index. */
        long_options[i] = (struct option){entry->name, entry->value ? required_argument : no_argument, NULL,
                                          entry->letter ? entry->letter : 256 + (int)i};
        if (entry->letter) {
            short_options[short_length++] = (char)entry->letter;
            if (entry->value) short_options[short_length++] = ':';
        }
    }
    long_options[OPTION_COUNT] = (struct option){NULL, 0, NULL, 0};
    short_options[short_length] = '\0';

    bool warmup_given = false;
    options->backend = DML_BACKEND_CPU;
    options->iterations = 1;
    options->repeat = 1;
    opterr = 0; /* dmlrun's own messages */
    int code;
    while ((code = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
        if (code == '?') {
            if (optopt)
                fprintf(stderr, "dmlrun: unknown option '-%c'\n", optopt);
            else
                fprintf(stderr, "dmlrun: unknown option '%s'\n", argv[optind - 1]);
            fputs("dmlrun --help lists the options\n", stderr);
            return 2;
        }
        if (code == ':') {
            fprintf(stderr, "dmlrun: %s needs a value\n", argv[optind - 1]);
            return 2;
        }
        const option_entry* entry = NULL;
        for (size_t i = 0; i < OPTION_COUNT && entry == NULL; i++)
            if (long_options[i].val == code) entry = &option_table[i];
        char name[64];
        snprintf(name, sizeof name, "--%s", entry->name);
        switch (entry->id) {
        case OPTION_HELP: print_usage(stdout); return 1;
        case OPTION_VERSION: printf("dmlrun (libdml %s)\n", dmlGetVersionString()); return 1;
        case OPTION_SHOW_DEPENDENCIES:
            printf("dmlrun (libdml %s)\n  cJSON %s\n", dmlGetVersionString(), cJSON_Version());
            return 1;
        case OPTION_SHOW_ADAPTERS: show_adapters(); return 1;
        case OPTION_MODEL:
            if (line->model_path != NULL) {
                fprintf(stderr, "dmlrun: one model at a time ('%s' and '%s')\n", line->model_path, optarg);
                return 2;
            }
            line->model_path = optarg;
            break;
        case OPTION_BACKEND:
            if (strcmp(optarg, "cpu") == 0)
                options->backend = DML_BACKEND_CPU;
            else if (strcmp(optarg, "cuda") == 0)
                options->backend = DML_BACKEND_CUDA;
            else {
                fprintf(stderr, "dmlrun: --backend is cpu or cuda, not '%s'\n", optarg);
                return 2;
            }
            break;
        case OPTION_ADAPTER:
            if (!parse_adapter(optarg, &options->backend)) return 2;
            break;
        case OPTION_THREADS:
            if (!parse_count(name, optarg, DML_MAX_THREAD_COUNT, &options->threads)) return 2;
            break;
        case OPTION_ITERATIONS:
            if (!parse_count(name, optarg, 1000000, &options->iterations)) return 2;
            if (options->iterations == 0) {
                fprintf(stderr, "dmlrun: %s must be at least 1\n", name);
                return 2;
            }
            break;
        case OPTION_REPEAT:
            if (!parse_count(name, optarg, 1000000, &options->repeat)) return 2;
            if (options->repeat == 0) {
                fprintf(stderr, "dmlrun: %s must be at least 1\n", name);
                return 2;
            }
            break;
        case OPTION_MILLISECONDS_TO_RUN:
            if (!parse_count(name, optarg, 3600000, &options->milliseconds_to_run)) return 2;
            break;
        case OPTION_INTERVAL:
            if (!parse_count(name, optarg, 3600000, &options->interval_ms)) return 2;
            break;
        case OPTION_WARMUP:
            if (!parse_count(name, optarg, 1000000, &options->warmup)) return 2;
            warmup_given = true;
            break;
        case OPTION_TIMING_VERBOSITY:
            if (!parse_count(name, optarg, 2, &options->timing_verbosity)) return 2;
            break;
        case OPTION_DEBUG: options->debug = true; break;
        case OPTION_VERBOSE:
        case OPTION_PRINT_COMMANDS: options->verbose = true; break;
        case OPTION_INPUT_PATH: line->input_path = optarg; break;
        case OPTION_OUTPUT_DIR: options->output_dir = optarg; break;
        case OPTION_ALLOW_ANY_PATH: options->allow_any_path = true; break;
        case OPTION_MAX_MEMORY:
            if (!parse_bytes(name, optarg, &options->max_memory)) return 2;
            break;
        case OPTION_IGNORED:
            dmlrun_note("%s is DxDispatch's Direct3D, PIX or ONNX Runtime option: it has no counterpart in libdml "
                        "and is ignored",
                        name);
            break;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (line->model_path != NULL) {
            fprintf(stderr, "dmlrun: one model at a time ('%s' and '%s')\n", line->model_path, argv[i]);
            return 2;
        }
        line->model_path = argv[i];
    }
    if (!warmup_given) options->warmup = options->iterations > 1 || options->milliseconds_to_run ? 1 : 0;
    return 0;
}

/* The tour's last lines: what it showed, and where to go next. */
static void print_tour_summary(const dmlrun_model* model) {
    size_t operators = 0, skipped = 0;
    for (size_t d = 0; d < model->dispatchable_count; d++) {
        const dmlrun_dispatchable* dispatchable = &model->dispatchables[d];
        size_t first = 0;
        while (model->dispatchables[first].schema->type != dispatchable->schema->type)
            first++;
        if (first == d) operators++; /* the first dispatchable of its operator type */
        if (dispatchable->skipped != NULL) skipped++;
    }
    if (skipped == 0)
        printf("tour: %zu operators, all results as expected\n", operators);
    else
        printf("tour: %zu operators, %zu not implemented in this libdml (skipped), the other results as expected\n",
               operators, skipped);
    printf(
        "next: your own models (examples/models/ has one per operator: dmlrun examples/models/roi_align1_ra1.json),\n"
        "      the documentation in docs/ (the model format: docs/dmlrun.md), and dmlrun --help;\n"
        "      installed from the package, examples/ and docs/ are in /usr/share/doc/libdml/\n");
}

int main(int argc, char** argv) {
    dmlrun_options options = {0};
    command_line line = {0};
    int parsed = parse_options(argc, argv, &options, &line);
    if (parsed == 1) return 0;
    if (parsed == 2) return 2;
    const char* model_path = line.model_path;
    /* The built-in tour must work at every stage of libdml: operators it
     * reports as not implemented yet are skipped with a note there. */
    options.skip_unimplemented = model_path == NULL;

    dmlrun_model model = {.output_directory = options.output_dir,
                          .allow_any_path = options.allow_any_path,
                          .max_memory = options.max_memory};
    if (line.input_path != NULL) model.directory = strdup(line.input_path);
    bool ok = line.input_path == NULL || model.directory != NULL || dmlrun_fail(NULL, "out of memory");
    ok = ok && (model_path ? dmlrun_load_model(&model, model_path)
                           : dmlrun_load_model_text(&model, dmlrun_default_model, dmlrun_default_model_size,
                                                    "(built-in tour)"));
    if (ok && model_path == NULL)
        printf("libdml %s: a tour of the operators (dmlrun --help shows how to run your own models)\n",
               dmlGetVersionString());
    if (ok && options.verbose)
        fprintf(stderr, "dmlrun: %zu resources, %zu dispatchables, %zu commands\n", model.resource_count,
                model.dispatchable_count, model.command_count);
    ok = ok && dmlrun_prepare(&model, &options);
    if (ok && options.verbose) {
        fprintf(stderr, "dmlrun: libdml %s, %s backend", dmlGetVersionString(),
                options.backend == DML_BACKEND_CUDA ? "cuda" : "cpu");
        if (options.threads)
            fprintf(stderr, ", %u threads\n", options.threads);
        else
            fputs(", all cores\n", stderr);
    }
    ok = ok && dmlrun_run_commands(&model, &options);
    if (ok && model_path == NULL) print_tour_summary(&model);
    dmlrun_model_free(&model);
    return ok ? 0 : 1;
}
