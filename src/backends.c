/* The one place that names the backends: DML_BACKEND values to backends. */
#include "backends.h"

const dml_backend* dml_backend_find(DML_BACKEND kind) {
    switch (kind) {
    case DML_BACKEND_CPU: return &dml_cpu_backend;
    case DML_BACKEND_CUDA: return dml_cuda_backend();
    default: return NULL;
    }
}
