/* The dispatch templates: every dispatchable of the embedded example models,
 * read with dmlrun's own loader and deep-copied. */
#include "fuzz_models.h"

#include <stdio.h>
#include <stdlib.h>

#include "dmlrun.h"

const fuzz_template* fuzz_templates(size_t* count) {
    static fuzz_template templates[FUZZ_MAX_TEMPLATES];
    static size_t template_count;
    static fuzz_arena arena; /* lives as long as the process */
    static bool loaded;
    if (!loaded) {
        loaded = true;
        for (size_t m = 0; m < fuzz_model_count; m++) {
            dmlrun_model model = {0};
            if (!dmlrun_load_model_text(&model, fuzz_models[m], fuzz_model_sizes[m], fuzz_model_names[m])) {
                fprintf(stderr, "fuzz: the example model %s does not load\n", fuzz_model_names[m]);
                abort();
            }
            for (size_t d = 0; d < model.dispatchable_count && template_count < FUZZ_MAX_TEMPLATES; d++) {
                const dmlrun_dispatchable* dispatchable = &model.dispatchables[d];
                fuzz_template* template = &templates[template_count++];
                snprintf(template->name, sizeof template->name, "%s:%s", fuzz_model_names[m], dispatchable->name);
                template->desc = fuzz_copy_operator(&arena, &dispatchable->desc);
                template->schema = dispatchable->schema;
                template->flags = dispatchable->flags;
            }
            dmlrun_model_free(&model);
        }
    }
    *count = template_count;
    return templates;
}
