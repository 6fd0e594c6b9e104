/* A driver for the fuzz targets where libFuzzer is not available (gcc, the
 * CUDA machine): `TARGET PATH [SECONDS [SEED]]` runs LLVMFuzzerTestOneInput
 * on PATH (a corpus directory: every file; or one file), then on random
 * inputs for SECONDS: random bytes, and corpus files with random byte
 * flips, insertions, deletions, truncations and splices. A failing input
 * (an abort: a violated invariant; or a crash) is saved to
 * TARGET-failure-SEED.bin in the starting directory before the process
 * dies. No coverage guidance: it finds less than libFuzzer per execution,
 * and relies on the corpus for depth (fuzz/README.md). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
/* Optional, as for libFuzzer. */
int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

enum {
    MAX_RANDOM_LENGTH = 4096,
    MAX_MUTATED_LENGTH = 8192,
    PROGRESS_SECONDS = 30,
};

/* ---- Saving the input that fails ---- */

static char failure_path[4096];
static const uint8_t* volatile current_data;
static volatile size_t current_size;

/* Async-signal-safe: open, write and close only. */
static void save_input(int signal_number) {
    static const char note[] = "\n==fuzz standalone== the failing input is saved to ";
    int fd = open(failure_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        for (size_t done = 0; done < current_size;) {
            ssize_t written = write(fd, current_data + done, current_size - done);
            if (written <= 0) break;
            done += (size_t)written;
        }
        close(fd);
        ssize_t ignored = write(STDERR_FILENO, note, sizeof note - 1);
        ignored = write(STDERR_FILENO, failure_path, strlen(failure_path));
        ignored = write(STDERR_FILENO, "\n", 1);
        (void)ignored;
    }
    signal(signal_number, SIG_DFL);
    raise(signal_number);
}

static void on_failure_save_input(const char* program, uint64_t seed) {
    const char* name = strrchr(program, '/') ? strrchr(program, '/') + 1 : program;
    char directory[2048];
    if (getcwd(directory, sizeof directory) == NULL) snprintf(directory, sizeof directory, ".");
    snprintf(failure_path, sizeof failure_path, "%s/%s-failure-%" PRIu64 ".bin", directory, name, seed);
    static const int signals[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        signal(signals[i], save_input);
}

/* One execution, on a copy of exactly size bytes (a sanitizer sees reads past it). */
static void run_one(const uint8_t* data, size_t size) {
    uint8_t* copy = malloc(size ? size : 1);
    if (copy == NULL) abort();
    if (size) memcpy(copy, data, size);
    current_data = copy;
    current_size = size;
    LLVMFuzzerTestOneInput(copy, size);
    current_size = 0;
    free(copy);
}

/* ---- The corpus ---- */

typedef struct input {
    uint8_t* data;
    size_t size;
} input;

typedef struct corpus {
    input* inputs;
    size_t count, capacity;
} corpus;

static void read_input(corpus* c, const char* path) {
    FILE* file = fopen(path, "rb");
    if (file == NULL) {
        fprintf(stderr, "fuzz standalone: cannot open %s\n", path);
        exit(2);
    }
    input in = {NULL, 0};
    size_t capacity = 0;
    for (int byte; (byte = getc(file)) != EOF;) {
        if (in.size == capacity) {
            capacity = capacity ? 2 * capacity : 256;
            in.data = realloc(in.data, capacity);
            if (in.data == NULL) abort();
        }
        in.data[in.size++] = (uint8_t)byte;
    }
    fclose(file);
    if (c->count == c->capacity) {
        c->capacity = c->capacity ? 2 * c->capacity : 64;
        c->inputs = realloc(c->inputs, c->capacity * sizeof *c->inputs);
        if (c->inputs == NULL) abort();
    }
    c->inputs[c->count++] = in;
}

static int by_name(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

/* PATH: a directory (its regular files, by name) or one file. */
static void read_corpus(corpus* c, const char* path) {
    struct stat info;
    if (stat(path, &info) != 0) {
        fprintf(stderr, "fuzz standalone: %s does not exist\n", path);
        exit(2);
    }
    if (!S_ISDIR(info.st_mode)) {
        read_input(c, path);
        return;
    }
    DIR* directory = opendir(path);
    if (directory == NULL) {
        fprintf(stderr, "fuzz standalone: cannot read the directory %s\n", path);
        exit(2);
    }
    char** names = NULL;
    size_t count = 0;
    for (struct dirent* entry; (entry = readdir(directory)) != NULL;) {
        char file[4096];
        snprintf(file, sizeof file, "%s/%s", path, entry->d_name);
        if (stat(file, &info) != 0 || !S_ISREG(info.st_mode)) continue;
        names = realloc(names, (count + 1) * sizeof *names);
        if (names == NULL || (names[count] = strdup(file)) == NULL) abort();
        count++;
    }
    closedir(directory);
    qsort(names, count, sizeof *names, by_name);
    for (size_t i = 0; i < count; i++) {
        read_input(c, names[i]);
        free(names[i]);
    }
    free(names);
}

/* ---- Random inputs ---- */

static uint64_t below(uint64_t* state, uint64_t bound) { return bound ? fuzz_splitmix64(state) % bound : 0; }

/* Random bytes, short inputs more often than long ones. */
static size_t random_bytes(uint64_t* state, uint8_t* buffer) {
    size_t size = (size_t)below(state, (uint64_t)1 << below(state, 13)) % (MAX_RANDOM_LENGTH + 1);
    for (size_t i = 0; i < size; i++)
        buffer[i] = (uint8_t)fuzz_splitmix64(state);
    return size;
}

/* A corpus input with 1 to 8 mutations; returns the new size. */
static size_t mutated(uint64_t* state, const corpus* c, uint8_t* buffer) {
    const input* base = &c->inputs[below(state, c->count)];
    size_t size = base->size < MAX_MUTATED_LENGTH ? base->size : MAX_MUTATED_LENGTH;
    memcpy(buffer, base->data, size);
    for (uint64_t m = 1 + below(state, 8); m-- > 0;) {
        size_t at = (size_t)below(state, size + 1);
        switch (below(state, 6)) {
        case 0: /* flip bits of a byte */
            if (at < size) buffer[at] ^= (uint8_t)(1 + below(state, 255));
            break;
        case 1: /* set a byte: often a boundary value */
            if (at < size) {
                static const uint8_t values[] = {0, 1, 2, 0x7F, 0x80, 0xFE, 0xFF};
                buffer[at] = below(state, 2) ? values[below(state, sizeof values)] : (uint8_t)fuzz_splitmix64(state);
            }
            break;
        case 2: { /* insert random bytes */
            size_t count = (size_t)(1 + below(state, 16));
            if (size + count > MAX_MUTATED_LENGTH) break;
            memmove(buffer + at + count, buffer + at, size - at);
            for (size_t i = 0; i < count; i++)
                buffer[at + i] = (uint8_t)fuzz_splitmix64(state);
            size += count;
            break;
        }
        case 3: { /* delete bytes */
            size_t count = (size_t)below(state, size - at + 1);
            memmove(buffer + at, buffer + at + count, size - at - count);
            size -= count;
            break;
        }
        case 4: /* truncate */ size = at; break;
        default: { /* splice: the tail of another input */
            const input* other = &c->inputs[below(state, c->count)];
            size_t from = (size_t)below(state, other->size + 1), count = other->size - from;
            if (at + count > MAX_MUTATED_LENGTH) count = MAX_MUTATED_LENGTH - at;
            memcpy(buffer + at, other->data + from, count);
            size = at + count;
            break;
        }
        }
    }
    return size;
}

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr,
                "usage: %s PATH [SECONDS [SEED]]\n"
                "  runs every file of the corpus directory PATH (or the file PATH), then random and\n"
                "  mutated inputs for SECONDS (default 0); a failing input is saved to\n"
                "  %s-failure-SEED.bin in the current directory\n",
                argv[0], argv[0]);
        return 2;
    }
    double seconds = argc > 2 ? strtod(argv[2], NULL) : 0;
    uint64_t seed =
        argc > 3 ? strtoull(argv[3], NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)clock();
    const char* program = argv[0];
    on_failure_save_input(program, seed);
    if (LLVMFuzzerInitialize != NULL) LLVMFuzzerInitialize(&argc, &argv);

    corpus c = {NULL, 0, 0};
    read_corpus(&c, argv[1]);
    printf("%s: seed %" PRIu64 " (reproduce: %s %s %g %" PRIu64 ")\n", program, seed, program, argv[1], seconds, seed);
    printf("%s: replaying %zu corpus inputs\n", program, c.count);
    fflush(stdout);
    double start = now_seconds();
    for (size_t i = 0; i < c.count; i++)
        run_one(c.inputs[i].data, c.inputs[i].size);

    uint64_t state = seed, random_runs = 0;
    static uint8_t buffer[MAX_MUTATED_LENGTH];
    double fuzz_start = now_seconds(), next_progress = fuzz_start + PROGRESS_SECONDS;
    for (double t = fuzz_start; t - fuzz_start < seconds; t = now_seconds()) {
        /* A quarter random bytes, the rest mutated corpus inputs. */
        size_t size =
            c.count == 0 || below(&state, 4) == 0 ? random_bytes(&state, buffer) : mutated(&state, &c, buffer);
        run_one(buffer, size);
        random_runs++;
        if (t >= next_progress) {
            printf("%s: %" PRIu64 " random inputs in %.0f s (%.0f/s)\n", program, random_runs, t - fuzz_start,
                   (double)random_runs / (t - fuzz_start));
            fflush(stdout);
            next_progress += PROGRESS_SECONDS;
        }
    }
    double elapsed = now_seconds() - start;
    uint64_t total = c.count + random_runs;
    printf("%s: %" PRIu64 " executions (%zu corpus, %" PRIu64 " random) in %.1f s (%.0f/s), seed %" PRIu64 "\n",
           program, total, c.count, random_runs, elapsed, elapsed > 0 ? (double)total / elapsed : 0.0, seed);
    printf("%s: %" PRIu64 " passed, 0 failed\n", program, total);
    for (size_t i = 0; i < c.count; i++)
        free(c.inputs[i].data);
    free(c.inputs);
    return 0;
}
