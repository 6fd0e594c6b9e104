/* The public header as strict C11: it compiles with -std=c11 -pedantic
 * -Werror, and its structs have directml.h's LP64 layout (spec tensors.md §2). */
#include <dml/dml.h>
#include <stddef.h>
#include <stdio.h>

#define LAYOUT(cond)                                                                                                   \
    if (!(cond)) {                                                                                                     \
        printf("layout check failed: %s\n", #cond);                                                                    \
        failed++;                                                                                                      \
    }

int main(void) {
    int failed = 0;
    LAYOUT(sizeof(DML_BUFFER_TENSOR_DESC) == 48);
    LAYOUT(offsetof(DML_BUFFER_TENSOR_DESC, Sizes) == 16);
    LAYOUT(offsetof(DML_BUFFER_TENSOR_DESC, Strides) == 24);
    LAYOUT(offsetof(DML_BUFFER_TENSOR_DESC, TotalTensorSizeInBytes) == 32);
    LAYOUT(offsetof(DML_BUFFER_TENSOR_DESC, GuaranteedBaseOffsetAlignment) == 40);
    LAYOUT(sizeof(DML_TENSOR_DESC) == 16);
    LAYOUT(sizeof(DML_OPERATOR_DESC) == 16);
    LAYOUT(sizeof(DML_BINDING_DESC) == 16);
    LAYOUT(sizeof(DML_BUFFER_BINDING) == 24);
    LAYOUT(offsetof(DML_SIZE_2D, Width) == 0);
    LAYOUT(DML_OPERATOR_MAX_POOLING == 58 && DML_OPERATOR_MAX_POOLING2 == 110);
    LAYOUT(DML_OPERATOR_ROI_ALIGN1 == 149 && DML_OPERATOR_BATCH_NORMALIZATION_GRAD == 146);
    LAYOUT(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD == 152 && DML_OPERATOR_ACTIVATION_GELU == 157);
    LAYOUT((unsigned)E_INVALIDARG == 0x80070057u && (unsigned)DXGI_ERROR_DEVICE_REMOVED == 0x887A0005u);
    printf("%d passed, %d failed\n", failed ? 0 : 1, failed ? 1 : 0);
    return failed != 0;
}
