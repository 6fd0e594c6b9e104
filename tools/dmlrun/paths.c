/* Where a model may read and write (docs/dmlrun.md, "Files"). A model is as
 * trusted as a script, so by default dmlrun confines it: inputs resolve
 * inside the model's directory, outputs inside the output directory (the
 * working directory or --output-dir); absolute paths, '..' and symbolic
 * links that leave them are refused unless --allow-any-path. Outputs are
 * always regular files opened without following a final link, and never
 * the model or one of its inputs. */
/* realpath is XSI. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

/* A relative path without '..' components stays below its base, lexically. */
static bool stays_below(const char* path) {
    if (path[0] == '/') return false;
    for (const char* part = path; *part != '\0';) {
        size_t length = strcspn(part, "/");
        if (length == 2 && part[0] == '.' && part[1] == '.') return false;
        part += length;
        while (*part == '/')
            part++;
    }
    return true;
}

/* base + "/" + path, malloc'ed (path alone when absolute). */
static char* join(const char* base, const char* path) {
    if (path[0] == '/') return strdup(path);
    size_t length = strlen(base) + strlen(path) + 2;
    char* joined = malloc(length);
    if (joined != NULL) snprintf(joined, length, "%s/%s", base, path);
    return joined;
}

/* Whether the existing `path` resolves (links followed) inside directory `base`. */
static bool resolves_inside(const char* path, const char* base) {
    char resolved[PATH_MAX], resolved_base[PATH_MAX];
    if (realpath(path, resolved) == NULL || realpath(base, resolved_base) == NULL) return false;
    size_t length = strlen(resolved_base);
    if (strcmp(resolved_base, "/") == 0) return true;
    return strncmp(resolved, resolved_base, length) == 0 && (resolved[length] == '/' || resolved[length] == '\0');
}

static bool remember_file(dmlrun_model* model, const struct stat* status) {
    dmlrun_file_id* grown = realloc(model->inputs, (model->input_count + 1) * sizeof *grown);
    if (grown == NULL) return false;
    model->inputs = grown;
    model->inputs[model->input_count++] = (dmlrun_file_id){status->st_dev, status->st_ino};
    return true;
}

bool dmlrun_note_input(dmlrun_model* model, const char* path) {
    struct stat status;
    return stat(path, &status) != 0 || remember_file(model, &status);
}

char* dmlrun_input_path(const dmlrun_model* model, const char* path, const char* place) {
    const char* directory = model->directory ? model->directory : ".";
    if (!model->allow_any_path && !stays_below(path)) {
        dmlrun_fail(place,
                    "'%s' leaves the model's directory: absolute paths and '..' are refused (--allow-any-path "
                    "allows them)",
                    path);
        return NULL;
    }
    char* joined = join(directory, path);
    if (joined == NULL) {
        dmlrun_fail(place, "out of memory");
        return NULL;
    }
    struct stat status;
    /* DxDispatch falls back to the working directory when only that has the file. */
    const char* base = directory;
    if (stat(joined, &status) != 0 && stat(path, &status) == 0) {
        free(joined);
        joined = strdup(path);
        base = ".";
        if (joined == NULL) {
            dmlrun_fail(place, "out of memory");
            return NULL;
        }
    }
    if (!model->allow_any_path && stat(joined, &status) == 0 && !resolves_inside(joined, base)) {
        dmlrun_fail(place, "'%s' resolves outside the %s through a symbolic link (--allow-any-path allows that)", path,
                    base == directory ? "model's directory" : "working directory");
        free(joined);
        return NULL;
    }
    return joined;
}

int dmlrun_open_output(const dmlrun_model* model, const char* path, const char* place) {
    const char* directory = model->output_directory ? model->output_directory : ".";
    if (!model->allow_any_path && !stays_below(path)) {
        dmlrun_fail(place,
                    "'%s' leaves the output directory: absolute paths and '..' are refused (--allow-any-path "
                    "allows them)",
                    path);
        return -1;
    }
    char* joined = join(directory, path);
    if (joined == NULL) return dmlrun_fail(place, "out of memory"), -1;
    /* The file's directory (links followed) must lie in the output directory. */
    char* slash = strrchr(joined, '/');
    char* parent = strndup(joined, slash ? (size_t)(slash - joined + (slash == joined)) : 0);
    char resolved[PATH_MAX];
    const char* refusal = parent == NULL ? "out of memory" : NULL;
    if (refusal == NULL && realpath(parent[0] ? parent : ".", resolved) == NULL) refusal = strerror(errno);
    if (refusal == NULL && !model->allow_any_path && !resolves_inside(resolved, directory))
        refusal = "its directory is outside the output directory through a symbolic link (--allow-any-path allows "
                  "that)";
    free(parent);
    if (refusal != NULL) {
        free(joined);
        return dmlrun_fail(place, "cannot write '%s': %s", path, refusal), -1;
    }
    /* No final link followed; O_NONBLOCK: a FIFO never blocks the open. */
    int fd = open(joined, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    int error = errno;
    free(joined);
    if (fd < 0)
        return dmlrun_fail(place, "cannot write '%s': %s", path,
                           error == ELOOP   ? "it is a symbolic link"
                           : error == ENXIO ? "not a regular file"
                                            : strerror(error)),
               -1;
    struct stat status;
    if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) refusal = "it is not a regular file";
    for (size_t i = 0; refusal == NULL && i < model->input_count; i++)
        if (model->inputs[i].device == status.st_dev && model->inputs[i].inode == status.st_ino)
            refusal = "it is the model or one of its input files";
    /* Truncated only once it is known to be a file that may be replaced. */
    if (refusal == NULL && (fcntl(fd, F_SETFL, 0) != 0 || ftruncate(fd, 0) != 0)) refusal = strerror(errno);
    if (refusal != NULL) {
        close(fd);
        return dmlrun_fail(place, "cannot write '%s': %s", path, refusal), -1;
    }
    return fd;
}
