/* ROI align and its gradient with AVX-512: the kernels of AVX2
 * (roi_align_lanes.h), their FLOAT64 sums of 8 channels in one vector. */
#include "roi_align_lanes.h"

const dml_impl dml_cpu_roi_align_avx512_nchw = {"roi_align/avx512/nchw", DML_ISA_AVX512, plan_forward_nchw,
                                                run_forward};
const dml_impl dml_cpu_roi_align_avx512_nhwc = {"roi_align/avx512/nhwc", DML_ISA_AVX512, plan_forward_nhwc,
                                                run_forward};
const dml_impl dml_cpu_roi_align_grad_avx512_nchw = {"roi_align_grad/avx512/nchw", DML_ISA_AVX512, plan_grad_nchw,
                                                     run_grad};
const dml_impl dml_cpu_roi_align_grad_avx512_nhwc = {"roi_align_grad/avx512/nhwc", DML_ISA_AVX512, plan_grad_nhwc,
                                                     run_grad};
