/* dmlrun: runs DirectML operator models (DxDispatch's JSON format) on
 * libdml. With no model it runs an embedded tour of the operators. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* The embedded default model (default_model.json, compiled in at build time). */
extern const char dmlrun_default_model[];
extern const size_t dmlrun_default_model_size;

static const char usage[] = "usage: dmlrun [MODEL.json] [options]\n"
                            "\n"
                            "Runs a DirectML operator model (DxDispatch's JSON format: resources,\n"
                            "dispatchables, commands) on libdml. Without MODEL.json it runs a built-in\n"
                            "tour of the operators.\n"
                            "\n"
                            "options:\n"
                            "  --backend cpu|cuda  the libdml backend (default cpu)\n"
                            "  --threads N         CPU worker threads (default 0: all cores)\n"
                            "  --iterations N      timed dispatches per dispatch command (default 1)\n"
                            "  --warmup N          untimed dispatches before them (default 1 when\n"
                            "                      --iterations > 1, else 0)\n"
                            "  --output-dir DIR    where writeFile writes (default: the working directory)\n"
                            "  --allow-any-path    let the model read and write outside its directory and\n"
                            "                      the output directory (a model is as trusted as a script)\n"
                            "  --max-memory BYTES  the most all resources may take together, with an\n"
                            "                      optional K, M or G (2^10, 2^20, 2^30); default: half\n"
                            "                      the physical memory\n"
                            "  --verbose           say what dmlrun does\n"
                            "  --version           print libdml's version\n"
                            "  --help              this text\n"
                            "\n"
                            "Each dispatch prints 'Dispatch NAME [backend]: N iterations, median, min,\n"
                            "max (ms), GB/s'; print commands print 'Resource NAME: values'. Errors name\n"
                            "the place in the model and exit with status 1 (2 for a bad command line).\n";

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

/* Returns 0 to run, 1 after --help/--version, 2 on a bad command line. */
static int parse_options(int argc, char** argv, dmlrun_options* options, const char** model_path) {
    bool warmup_given = false;
    options->backend = DML_BACKEND_CPU;
    options->iterations = 1;
    for (int i = 1; i < argc; i++) {
        const char* argument = argv[i];
        if (strcmp(argument, "--help") == 0 || strcmp(argument, "-h") == 0) {
            fputs(usage, stdout);
            return 1;
        }
        if (strcmp(argument, "--version") == 0) {
            printf("dmlrun (libdml %s)\n", dmlGetVersionString());
            return 1;
        }
        if (strcmp(argument, "--allow-any-path") == 0) {
            options->allow_any_path = true;
            continue;
        }
        if (strcmp(argument, "--verbose") == 0 || strcmp(argument, "-v") == 0) {
            options->verbose = true;
            continue;
        }
        if (strncmp(argument, "--", 2) != 0) {
            if (*model_path != NULL) {
                fprintf(stderr, "dmlrun: one model at a time ('%s' and '%s')\n%s", *model_path, argument, usage);
                return 2;
            }
            *model_path = argument;
            continue;
        }
        /* --name value or --name=value */
        char name[32];
        const char* value = strchr(argument, '=');
        size_t name_length = value ? (size_t)(value - argument) : strlen(argument);
        if (name_length >= sizeof name) name_length = sizeof name - 1;
        memcpy(name, argument, name_length);
        name[name_length] = '\0';
        bool known = strcmp(name, "--backend") == 0 || strcmp(name, "--threads") == 0 ||
                     strcmp(name, "--iterations") == 0 || strcmp(name, "--warmup") == 0 ||
                     strcmp(name, "--output-dir") == 0 || strcmp(name, "--max-memory") == 0;
        if (!known) {
            fprintf(stderr, "dmlrun: unknown option '%s'\n%s", argument, usage);
            return 2;
        }
        if (value != NULL) {
            value++;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            fprintf(stderr, "dmlrun: %s needs a value\n", name);
            return 2;
        }
        if (strcmp(name, "--backend") == 0) {
            if (strcmp(value, "cpu") == 0)
                options->backend = DML_BACKEND_CPU;
            else if (strcmp(value, "cuda") == 0)
                options->backend = DML_BACKEND_CUDA;
            else {
                fprintf(stderr, "dmlrun: --backend is cpu or cuda, not '%s'\n", value);
                return 2;
            }
        } else if (strcmp(name, "--output-dir") == 0) {
            options->output_dir = value;
        } else if (strcmp(name, "--max-memory") == 0) {
            if (!parse_bytes(name, value, &options->max_memory)) return 2;
        } else if (strcmp(name, "--threads") == 0) {
            if (!parse_count(name, value, DML_MAX_THREAD_COUNT, &options->threads)) return 2;
        } else if (strcmp(name, "--iterations") == 0) {
            if (!parse_count(name, value, 1000000, &options->iterations)) return 2;
            if (options->iterations == 0) {
                fprintf(stderr, "dmlrun: --iterations must be at least 1\n");
                return 2;
            }
        } else {
            if (!parse_count(name, value, 1000000, &options->warmup)) return 2;
            warmup_given = true;
        }
    }
    if (!warmup_given) options->warmup = options->iterations > 1 ? 1 : 0;
    return 0;
}

int main(int argc, char** argv) {
    dmlrun_options options = {0};
    const char* model_path = NULL;
    int parsed = parse_options(argc, argv, &options, &model_path);
    if (parsed == 1) return 0;
    if (parsed == 2) return 2;
    /* The built-in tour must work at every stage of libdml: operators it
     * reports as not implemented yet are skipped with a note there. */
    options.skip_unimplemented = model_path == NULL;

    dmlrun_model model = {.output_directory = options.output_dir,
                          .allow_any_path = options.allow_any_path,
                          .max_memory = options.max_memory};
    bool ok = model_path
                  ? dmlrun_load_model(&model, model_path)
                  : dmlrun_load_model_text(&model, dmlrun_default_model, dmlrun_default_model_size, "(built-in tour)");
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
    dmlrun_model_free(&model);
    return ok ? 0 : 1;
}
