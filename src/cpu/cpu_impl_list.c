/* The CPU backend's implementation lists: per kernel, the implementations in
 * order of preference, like oneDNN's cpu_pooling_list.cpp. dmlCompileOperator
 * takes the first whose instruction set the device allows and whose plan
 * accepts the problem; the generic strided kernel, last, accepts every
 * problem and is the reference the others are tested against. */
#include "cpu.h"

const dml_impl* const dml_cpu_max_pooling_impls[] = {&dml_cpu_max_pooling_avx512_nchw, &dml_cpu_max_pooling_avx2_nchw,
                                                     &dml_cpu_max_pooling_avx512_nhwc, &dml_cpu_max_pooling_avx2_nhwc,
                                                     &dml_cpu_max_pooling_generic,     NULL};
const dml_impl* const dml_cpu_max_pooling_grad_impls[] = {
    &dml_cpu_max_pooling_grad_avx512_nchw, &dml_cpu_max_pooling_grad_avx2_nchw, &dml_cpu_max_pooling_grad_avx512_nhwc,
    &dml_cpu_max_pooling_grad_avx2_nhwc,   &dml_cpu_max_pooling_grad_generic,   NULL};
const dml_impl* const dml_cpu_roi_pooling_impls[] = {&dml_cpu_roi_pooling_avx2_nhwc, &dml_cpu_roi_pooling_avx2_nchw,
                                                     &dml_cpu_roi_pooling_generic, NULL};
const dml_impl* const dml_cpu_roi_align_impls[] = {&dml_cpu_roi_align_avx512_nhwc, &dml_cpu_roi_align_avx512_nchw,
                                                   &dml_cpu_roi_align_avx2_nhwc,   &dml_cpu_roi_align_avx2_nchw,
                                                   &dml_cpu_roi_align_generic,     NULL};
const dml_impl* const dml_cpu_roi_align_grad_impls[] = {
    &dml_cpu_roi_align_grad_avx512_nhwc, &dml_cpu_roi_align_grad_avx512_nchw, &dml_cpu_roi_align_grad_avx2_nhwc,
    &dml_cpu_roi_align_grad_avx2_nchw,   &dml_cpu_roi_align_grad_generic,     NULL};
const dml_impl* const dml_cpu_batch_normalization_impls[] = {&dml_cpu_batch_normalization_avx2_nchw,
                                                             &dml_cpu_batch_normalization_avx2_nhwc,
                                                             &dml_cpu_batch_normalization_generic, NULL};
const dml_impl* const dml_cpu_batch_normalization_training_impls[] = {
    &dml_cpu_batch_normalization_training_avx512_nchw, &dml_cpu_batch_normalization_training_avx2_nchw,
    &dml_cpu_batch_normalization_training_avx2_nhwc, &dml_cpu_batch_normalization_training_generic, NULL};
const dml_impl* const dml_cpu_batch_normalization_grad_impls[] = {
    &dml_cpu_batch_normalization_grad_avx512_nchw, &dml_cpu_batch_normalization_grad_avx2_nchw,
    &dml_cpu_batch_normalization_grad_avx2_nhwc, &dml_cpu_batch_normalization_grad_generic, NULL};
const dml_impl* const dml_cpu_batch_normalization_training_grad_impls[] = {
    &dml_cpu_batch_normalization_training_grad_avx512_nchw, &dml_cpu_batch_normalization_training_grad_avx2_nchw,
    &dml_cpu_batch_normalization_training_grad_avx2_nhwc, &dml_cpu_batch_normalization_training_grad_generic, NULL};
