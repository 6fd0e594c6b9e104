/* The backends libdml is built with. Only src/backends.c looks them up;
 * src/core/ reaches them through dml_backend_find. */
#ifndef DML_BACKENDS_H
#define DML_BACKENDS_H

#include "core/operator.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const dml_backend dml_cpu_backend; /* src/cpu/cpu_backend.c */
/* The CUDA backend (src/cuda/cuda_backend.cu), or NULL when libdml was
 * built without CUDA (src/cuda/cuda_unavailable.c). */
const dml_backend* dml_cuda_backend(void);

#ifdef __cplusplus
}
#endif

#endif
