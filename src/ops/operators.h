/* Every operator libdml implements, in one list: its DML_OPERATOR_ type, the
 * feature level that introduced it (spec tensors.md §1.3) and its family's
 * create function dml_create_<family> (src/ops/<family>.c), which validates
 * the description and picks the kernel (DML_KERNEL_LIST, src/core/operator.h).
 * The registry (registry.c) and the create functions' declarations (ops.h)
 * come from it. */
#ifndef DML_OPS_OPERATORS_H
#define DML_OPS_OPERATORS_H

#define DML_OPERATOR_LIST(X)                                                                                           \
    X(MAX_POOLING, 1_0, max_pooling)                                                                                   \
    X(MAX_POOLING1, 2_0, max_pooling)                                                                                  \
    X(MAX_POOLING2, 2_1, max_pooling)                                                                                  \
    X(MAX_POOLING_GRAD, 3_0, max_pooling_grad)                                                                         \
    X(ROI_POOLING, 1_0, roi_pooling)                                                                                   \
    X(ROI_ALIGN, 3_0, roi_align)                                                                                       \
    X(ROI_ALIGN1, 4_0, roi_align)                                                                                      \
    X(ROI_ALIGN_GRAD, 4_1, roi_align_grad)                                                                             \
    X(BATCH_NORMALIZATION, 1_0, batch_normalization)                                                                   \
    X(BATCH_NORMALIZATION_GRAD, 3_1, batch_normalization_grad)                                                         \
    X(BATCH_NORMALIZATION_TRAINING, 4_1, batch_normalization_training)                                                 \
    X(BATCH_NORMALIZATION_TRAINING_GRAD, 4_1, batch_normalization_grad)

#endif
