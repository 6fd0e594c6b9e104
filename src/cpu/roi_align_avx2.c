/* ROI align and its gradient with AVX2 + F16C (roi_align_lanes.h). */
#include "roi_align_lanes.h"

const dml_impl dml_cpu_roi_align_avx2_nchw = {"roi_align/avx2/nchw", DML_ISA_AVX2, plan_forward_nchw, run_forward};
const dml_impl dml_cpu_roi_align_avx2_nhwc = {"roi_align/avx2/nhwc", DML_ISA_AVX2, plan_forward_nhwc, run_forward};
const dml_impl dml_cpu_roi_align_grad_avx2_nchw = {"roi_align_grad/avx2/nchw", DML_ISA_AVX2, plan_grad_nchw, run_grad};
const dml_impl dml_cpu_roi_align_grad_avx2_nhwc = {"roi_align_grad/avx2/nhwc", DML_ISA_AVX2, plan_grad_nhwc, run_grad};
