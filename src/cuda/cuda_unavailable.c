/* Linked instead of the CUDA backend when libdml is built without CUDA. */
#include "../backends.h"

const dml_backend* dml_cuda_backend(void) { return NULL; }
