#include "activation_desc.h"

#include <string.h>

const int test_fusable_activations[17] = {
    DML_OPERATOR_ACTIVATION_LINEAR,
    DML_OPERATOR_ACTIVATION_SIGMOID,
    DML_OPERATOR_ACTIVATION_HARD_SIGMOID,
    DML_OPERATOR_ACTIVATION_TANH,
    DML_OPERATOR_ACTIVATION_SCALED_TANH,
    DML_OPERATOR_ACTIVATION_RELU,
    DML_OPERATOR_ACTIVATION_LEAKY_RELU,
    DML_OPERATOR_ACTIVATION_THRESHOLDED_RELU,
    DML_OPERATOR_ACTIVATION_ELU,
    DML_OPERATOR_ACTIVATION_CELU,
    DML_OPERATOR_ACTIVATION_SCALED_ELU,
    DML_OPERATOR_ACTIVATION_SOFTPLUS,
    DML_OPERATOR_ACTIVATION_PARAMETRIC_SOFTPLUS,
    DML_OPERATOR_ACTIVATION_SOFTSIGN,
    DML_OPERATOR_ACTIVATION_IDENTITY,
    DML_OPERATOR_ACTIVATION_SHRINK,
    DML_OPERATOR_ACTIVATION_GELU,
};

DML_OPERATOR_DESC test_activation_desc(test_activation_storage* s, int type, float p0, float p1) {
    memset(s, 0, sizeof *s);
    switch (type) {
    case DML_OPERATOR_ACTIVATION_LINEAR: s->linear.Alpha = p0, s->linear.Beta = p1; break;
    case DML_OPERATOR_ACTIVATION_HARD_SIGMOID: s->hard_sigmoid.Alpha = p0, s->hard_sigmoid.Beta = p1; break;
    case DML_OPERATOR_ACTIVATION_SCALED_TANH: s->scaled_tanh.Alpha = p0, s->scaled_tanh.Beta = p1; break;
    case DML_OPERATOR_ACTIVATION_LEAKY_RELU: s->leaky_relu.Alpha = p0; break;
    case DML_OPERATOR_ACTIVATION_THRESHOLDED_RELU: s->thresholded_relu.Alpha = p0; break;
    case DML_OPERATOR_ACTIVATION_ELU: s->elu.Alpha = p0; break;
    case DML_OPERATOR_ACTIVATION_CELU: s->celu.Alpha = p0; break;
    case DML_OPERATOR_ACTIVATION_SCALED_ELU: s->scaled_elu.Alpha = p0, s->scaled_elu.Gamma = p1; break;
    case DML_OPERATOR_ACTIVATION_SOFTPLUS: s->softplus.Steepness = p0; break;
    case DML_OPERATOR_ACTIVATION_PARAMETRIC_SOFTPLUS:
        s->parametric_softplus.Alpha = p0, s->parametric_softplus.Beta = p1;
        break;
    case DML_OPERATOR_ACTIVATION_SHRINK: s->shrink.Bias = p0, s->shrink.Threshold = p1; break;
    default: break; /* no FLOAT fields */
    }
    return (DML_OPERATOR_DESC){(DML_OPERATOR_TYPE)type, s};
}
