/* The CPU backend's kernels (one file per family) and shared helpers. */
#ifndef DML_CPU_CPU_H
#define DML_CPU_CPU_H

#include "../core/operator.h"

HRESULT dml_cpu_max_pooling(const dml_kernel_args* args);
HRESULT dml_cpu_max_pooling_grad(const dml_kernel_args* args);
HRESULT dml_cpu_batch_normalization(const dml_kernel_args* args);
HRESULT dml_cpu_batch_normalization_training(const dml_kernel_args* args);
HRESULT dml_cpu_batch_normalization_grad(const dml_kernel_args* args);
HRESULT dml_cpu_batch_normalization_training_grad(const dml_kernel_args* args);
HRESULT dml_cpu_roi_pooling(const dml_kernel_args* args);
HRESULT dml_cpu_roi_align(const dml_kernel_args* args);
HRESULT dml_cpu_roi_align_grad(const dml_kernel_args* args);

/* Worker threads for one dispatch (the device's ThreadCount). */
static inline int dml_cpu_threads(const dml_kernel_args* args) { return (int)args->device->threads; }

#endif
