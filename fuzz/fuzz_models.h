/* The example models (the .json files of examples/models, then dmlrun's default tour),
 * compiled in by embed_models.cmake, and the dispatch templates read from
 * them with dmlrun's loader. */
#ifndef DML_FUZZ_MODELS_H
#define DML_FUZZ_MODELS_H

#include <stddef.h>

#include "fuzz_common.h"

extern const char* const fuzz_models[];
extern const size_t fuzz_model_sizes[];
extern const char* const fuzz_model_names[];
extern const size_t fuzz_model_count;

/* One dispatchable of an example model: a valid description. */
typedef struct fuzz_template {
    char name[96]; /* "max_pooling2_mp4.json:mp4" */
    const DML_OPERATOR_DESC* desc;
    const dmlrun_op_schema* schema;
    DML_EXECUTION_FLAGS flags;
} fuzz_template;

enum { FUZZ_MAX_TEMPLATES = 128 };

/* Reads every dispatchable of every model once (later calls return the same
 * list): the templates in model order, then dispatchable order. */
const fuzz_template* fuzz_templates(size_t* count);

#endif
