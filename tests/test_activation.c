/* The fused-activation math shared by every backend (src/ops/activation.h)
 * against the float64 formulas of spec batch_normalization.md §8.1, over a
 * wide input range: large |x| must neither overflow (SOFTPLUS,
 * PARAMETRIC_SOFTPLUS, §8.2) nor lose the formula's value. */
#include <math.h>

#include "../src/ops/activation.h"
#include "harness.h"
#include "reference/batch_normalization_reference.h"

typedef struct activation_case {
    int type;
    float p0, p1;
} activation_case;

static const activation_case cases[] = {
    {DML_OPERATOR_ACTIVATION_LINEAR, 2.0f, 0.5f},
    {DML_OPERATOR_ACTIVATION_LINEAR, -0.75f, -3.0f},
    {DML_OPERATOR_ACTIVATION_SIGMOID, 0, 0},
    {DML_OPERATOR_ACTIVATION_HARD_SIGMOID, 0.2f, 0.5f},
    {DML_OPERATOR_ACTIVATION_HARD_SIGMOID, -1.5f, 0.25f},
    {DML_OPERATOR_ACTIVATION_TANH, 0, 0},
    {DML_OPERATOR_ACTIVATION_SCALED_TANH, 1.5f, 0.5f},
    {DML_OPERATOR_ACTIVATION_SCALED_TANH, -2.0f, 3.0f},
    {DML_OPERATOR_ACTIVATION_RELU, 0, 0},
    {DML_OPERATOR_ACTIVATION_LEAKY_RELU, 0.01f, 0},
    {DML_OPERATOR_ACTIVATION_LEAKY_RELU, -0.5f, 0},
    {DML_OPERATOR_ACTIVATION_THRESHOLDED_RELU, 1.0f, 0},
    {DML_OPERATOR_ACTIVATION_THRESHOLDED_RELU, -0.5f, 0},
    {DML_OPERATOR_ACTIVATION_ELU, 1.0f, 0},
    {DML_OPERATOR_ACTIVATION_ELU, 0.3f, 0},
    {DML_OPERATOR_ACTIVATION_CELU, 1.0f, 0},
    {DML_OPERATOR_ACTIVATION_CELU, 0.5f, 0},
    {DML_OPERATOR_ACTIVATION_SCALED_ELU, 1.6732632f, 1.050701f},
    {DML_OPERATOR_ACTIVATION_SOFTPLUS, 1.0f, 0},
    {DML_OPERATOR_ACTIVATION_SOFTPLUS, 3.5f, 0},
    {DML_OPERATOR_ACTIVATION_PARAMETRIC_SOFTPLUS, 2.0f, 0.5f},
    {DML_OPERATOR_ACTIVATION_PARAMETRIC_SOFTPLUS, -1.0f, -4.0f},
    {DML_OPERATOR_ACTIVATION_SOFTSIGN, 0, 0},
    {DML_OPERATOR_ACTIVATION_IDENTITY, 0, 0},
    {DML_OPERATOR_ACTIVATION_SHRINK, 0.1f, 0.5f},
    {DML_OPERATOR_ACTIVATION_SHRINK, 0.0f, 2.0f},
    {DML_OPERATOR_ACTIVATION_GELU, 0, 0},
};

/* FLOAT32 math on FLOAT32 inputs: about 8 ulps of the result, plus a few
 * ulps of the intermediate products such as Alpha * x, whose rounding shows
 * when the result is much smaller than they are (Alpha * x + Beta near 0). */
static double tolerance(const activation_case* c, double x, double expected) {
    double scale = fabs(c->p0) > 1 ? fabs(c->p0) : 1.0;
    if (fabs(c->p1) > 1) scale *= fabs(c->p1);
    return 1e-6 * fabs(expected) + 2.5e-7 * scale * (1.0 + fabs(x));
}

TEST_CASE(activations_match_the_formulas) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const activation_case* c = &cases[i];
        dml_activation a = {(uint32_t)c->type, c->p0, c->p1};
        bn_ref_activation reference = {c->type, c->p0, c->p1};
        int failures = 0;
        for (int step = -4000; step <= 4000 && failures < 3; step++) {
            /* A dense grid around 0 and a sparse one up to +-200. */
            float x = step >= -2000 && step <= 2000 ? (float)step / 400.0f : (float)step / 20.0f;
            float got = dml_activation_apply(&a, x);
            double want = bn_ref_activate(&reference, (double)x);
            bool ok = isfinite(got) && fabs((double)got - want) <= tolerance(c, x, want);
            if (!ok) {
                failures++;
                EXPECT(false, "activation %d (%g, %g) at x = %.9g: %.9g but expected %.9g", c->type, (double)c->p0,
                       (double)c->p1, (double)x, (double)got, want);
            }
        }
    }
}

TEST_CASE(activations_at_extremes) {
    dml_activation softplus = {DML_ACTIVATION_SOFTPLUS, 1.0f, 0};
    EXPECT(dml_activation_apply(&softplus, 1000.0f) == 1000.0f, "SOFTPLUS(1000) = 1000 without overflow");
    EXPECT(dml_activation_apply(&softplus, -1000.0f) == 0.0f, "SOFTPLUS(-1000) = 0");
    dml_activation parametric = {DML_ACTIVATION_PARAMETRIC_SOFTPLUS, 2.0f, 10.0f};
    EXPECT(dml_activation_apply(&parametric, 100.0f) == 2000.0f, "PARAMETRIC_SOFTPLUS(100) = 2 * 1000");
    dml_activation sigmoid = {DML_ACTIVATION_SIGMOID, 0, 0};
    EXPECT(dml_activation_apply(&sigmoid, -200.0f) == 0.0f && dml_activation_apply(&sigmoid, 200.0f) == 1.0f,
           "SIGMOID saturates");
    dml_activation gelu = {DML_ACTIVATION_GELU, 0, 0};
    EXPECT(dml_activation_apply(&gelu, 50.0f) == 50.0f && dml_activation_apply(&gelu, -50.0f) == 0.0f,
           "GELU tails");
    dml_activation none = {DML_ACTIVATION_NONE, 0, 0};
    EXPECT(dml_activation_apply(&none, -3.25f) == -3.25f, "no activation is the identity");
    /* max/min are IEEE maxNum/minNum: a NaN argument yields the other operand. */
    dml_activation relu = {DML_ACTIVATION_RELU, 0, 0};
    EXPECT(dml_activation_apply(&relu, NAN) == 0.0f, "RELU(NaN) is max(0, NaN) = 0");
    EXPECT(isnan(dml_activation_apply(&sigmoid, NAN)), "SIGMOID(NaN) is NaN");
}
