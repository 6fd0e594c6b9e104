/* DirectML descriptions of the fusable activations (spec
 * batch_normalization.md §8.1) for tests that build them from a type and its
 * FLOAT fields. */
#ifndef DML_TESTS_ACTIVATION_DESC_H
#define DML_TESTS_ACTIVATION_DESC_H

#include <dml/dml.h>

/* Storage for any fusable activation's struct. */
typedef union test_activation_storage {
    DML_ACTIVATION_LINEAR_OPERATOR_DESC linear;
    DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC hard_sigmoid;
    DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC scaled_tanh;
    DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC leaky_relu;
    DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC thresholded_relu;
    DML_ACTIVATION_ELU_OPERATOR_DESC elu;
    DML_ACTIVATION_CELU_OPERATOR_DESC celu;
    DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC scaled_elu;
    DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC softplus;
    DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC parametric_softplus;
    DML_ACTIVATION_SHRINK_OPERATOR_DESC shrink;
    DML_ACTIVATION_SIGMOID_OPERATOR_DESC sigmoid;
    DML_ACTIVATION_TANH_OPERATOR_DESC tanh_;
    DML_ACTIVATION_RELU_OPERATOR_DESC relu;
    DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC softsign;
    DML_ACTIVATION_IDENTITY_OPERATOR_DESC identity;
    DML_ACTIVATION_GELU_OPERATOR_DESC gelu;
} test_activation_storage;

/* The description of activation `type` (a DML_OPERATOR_ACTIVATION_* value)
 * with p0, p1 as its FLOAT fields in struct order; NULL tensors. */
DML_OPERATOR_DESC test_activation_desc(test_activation_storage* storage, int type, float p0, float p1);

/* Every fusable activation type. */
extern const int test_fusable_activations[17];

#endif
