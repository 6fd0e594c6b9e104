/* The fused-activation math shared by every backend (src/ops/activation.h)
 * against the float64 formulas of spec batch_normalization.md §8.1, over a
 * wide input range: large |x| must neither overflow (SOFTPLUS,
 * PARAMETRIC_SOFTPLUS, §8.2) nor lose the formula's value.
 *
 * Each value is computed twice: by the header's functions on the host (the
 * CPU backend's code) and through the operator on the device under test,
 * BATCH_NORMALIZATION with Mean 0, Variance 1, Epsilon 0, Scale 1, Bias 0
 * (the pre-activation value is then x exactly) and the activation fused. On
 * CUDA (test_activation_cuda, DML_TEST_BACKEND=cuda) that second value is the
 * device code's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/ops/activation.h"
#include "activation_desc.h"
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

/* f(xs[i]) for count FLOAT32 inputs, through BATCH_NORMALIZATION with the
 * activation fused, on device. Returns false (after a failed expectation)
 * when the operator did not run. */
static bool through_operator(DMLDevice* device, int type, float p0, float p1, const float* xs, float* results,
                             uint32_t count) {
    const uint32_t sizes[1] = {count}, one[1] = {1};
    test_tensor input, output, parameter;
    test_tensor_init(&input, DML_TENSOR_DATA_TYPE_FLOAT32, 1, sizes, TEST_LAYOUT_PACKED);
    test_tensor_init(&output, DML_TENSOR_DATA_TYPE_FLOAT32, 1, sizes, TEST_LAYOUT_PACKED);
    test_tensor_init(&parameter, DML_TENSOR_DATA_TYPE_FLOAT32, 1, one, TEST_LAYOUT_PACKED);
    test_buffer x, y, zero, unit;
    test_buffer_alloc(&x, input.buffer.TotalTensorSizeInBytes);
    test_buffer_alloc(&y, output.buffer.TotalTensorSizeInBytes);
    test_buffer_alloc(&zero, parameter.buffer.TotalTensorSizeInBytes);
    test_buffer_alloc(&unit, parameter.buffer.TotalTensorSizeInBytes);
    memcpy(x.data, xs, count * sizeof *xs);
    ((float*)zero.data)[0] = 0.0f;
    ((float*)unit.data)[0] = 1.0f;
    test_activation_storage storage;
    DML_OPERATOR_DESC activation = test_activation_desc(&storage, type, p0, p1);
    DML_BATCH_NORMALIZATION_OPERATOR_DESC bn = {
        &input.desc, &parameter.desc, &parameter.desc, &parameter.desc, &parameter.desc, &output.desc, 1,
        0.0f,        &activation};
    DML_OPERATOR_DESC desc = {DML_OPERATOR_BATCH_NORMALIZATION, &bn};
    HRESULT status =
        test_run(device, &desc, 5, (test_buffer*[]){&x, &zero, &unit, &unit, &zero}, 1, (test_buffer*[]){&y});
    EXPECT_STATUS(status, S_OK, NULL);
    test_buffer_check_guards(&y, "Output");
    memcpy(results, y.data, count * sizeof *results);
    test_buffer_free(&x);
    test_buffer_free(&y);
    test_buffer_free(&zero);
    test_buffer_free(&unit);
    return SUCCEEDED(status);
}

enum { GRID = 8001 };

TEST_CASE(activations_match_the_formulas) {
    DMLDevice* device = test_device(0);
    float* xs = malloc(GRID * sizeof *xs);
    float* device_results = malloc(GRID * sizeof *device_results);
    for (int step = -4000; step <= 4000; step++) /* a dense grid around 0 and a sparse one up to +-200 */
        xs[step + 4000] = step >= -2000 && step <= 2000 ? (float)step / 400.0f : (float)step / 20.0f;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const activation_case* c = &cases[i];
        dml_activation a = {(uint32_t)c->type, c->p0, c->p1};
        bn_ref_activation reference = {c->type, c->p0, c->p1};
        if (!through_operator(device, c->type, c->p0, c->p1, xs, device_results, GRID)) break;
        int failures = 0;
        for (int g = 0; g < GRID && failures < 3; g++) {
            float x = xs[g];
            double want = bn_ref_activate(&reference, (double)x);
            float got[2] = {dml_activation_apply(&a, x), device_results[g]};
            static const char* where[2] = {"host math", "through the operator"};
            for (int k = 0; k < 2; k++) {
                bool ok = isfinite(got[k]) && fabs((double)got[k] - want) <= tolerance(c, x, want);
                if (!ok) {
                    failures++;
                    EXPECT(false, "activation %d (%g, %g) at x = %.9g (%s): %.9g but expected %.9g", c->type,
                           (double)c->p0, (double)c->p1, (double)x, where[k], (double)got[k], want);
                }
            }
        }
    }
    free(xs);
    free(device_results);
    dmlReleaseDevice(device);
}

/* f(x) by the host math, and expects the operator on the device under test
 * to give the same (exact cases below are exact on both). */
static float apply_everywhere(DMLDevice* device, const dml_activation* a, float x) {
    float host = dml_activation_apply(a, x), through = NAN;
    if (through_operator(device, (int)a->type, a->param0, a->param1, &x, &through, 1))
        EXPECT((isnan(host) && isnan(through)) || host == through,
               "activation %u at %g: host math %.9g, through the operator %.9g", a->type, (double)x, (double)host,
               (double)through);
    return through;
}

TEST_CASE(activations_at_extremes) {
    DMLDevice* device = test_device(0);
    dml_activation softplus = {DML_ACTIVATION_SOFTPLUS, 1.0f, 0};
    EXPECT(apply_everywhere(device, &softplus, 1000.0f) == 1000.0f, "SOFTPLUS(1000) = 1000 without overflow");
    EXPECT(apply_everywhere(device, &softplus, -1000.0f) == 0.0f, "SOFTPLUS(-1000) = 0");
    dml_activation parametric = {DML_ACTIVATION_PARAMETRIC_SOFTPLUS, 2.0f, 10.0f};
    EXPECT(apply_everywhere(device, &parametric, 100.0f) == 2000.0f, "PARAMETRIC_SOFTPLUS(100) = 2 * 1000");
    dml_activation sigmoid = {DML_ACTIVATION_SIGMOID, 0, 0};
    EXPECT(apply_everywhere(device, &sigmoid, -200.0f) == 0.0f && apply_everywhere(device, &sigmoid, 200.0f) == 1.0f,
           "SIGMOID saturates");
    dml_activation gelu = {DML_ACTIVATION_GELU, 0, 0};
    EXPECT(apply_everywhere(device, &gelu, 50.0f) == 50.0f && apply_everywhere(device, &gelu, -50.0f) == 0.0f,
           "GELU tails");
    dml_activation identity = {DML_ACTIVATION_IDENTITY, 0, 0};
    EXPECT(apply_everywhere(device, &identity, -3.25f) == -3.25f, "IDENTITY");
    dml_activation none = {DML_ACTIVATION_NONE, 0, 0};
    EXPECT(dml_activation_apply(&none, -3.25f) == -3.25f, "no activation is the identity");
    /* max/min are IEEE maxNum/minNum: a NaN argument yields the other operand. */
    dml_activation relu = {DML_ACTIVATION_RELU, 0, 0};
    EXPECT(apply_everywhere(device, &relu, NAN) == 0.0f, "RELU(NaN) is max(0, NaN) = 0");
    EXPECT(isnan(apply_everywhere(device, &sigmoid, NAN)), "SIGMOID(NaN) is NaN");
    dmlReleaseDevice(device);
}
