/* The batch normalization family (spec batch_normalization.md): golden
 * vectors BN-1..BN-6, randomized comparisons with the float64 reference
 * (ranks 1-8, random reduction axes, FLOAT32 and FLOAT16, random layouts
 * including 0-stride inputs, broadcast parameters, FusedAdd, every fusable
 * activation), finite-difference checks of both gradients, determinism
 * across thread counts and runs, the numerical robustness of the statistics,
 * guard bytes and poisoned outputs, and every validation rule.
 *
 * The same program runs on the CPU (test_batch_normalization) and on CUDA
 * (test_batch_normalization_cuda: DML_TEST_BACKEND=cuda, every case on a
 * CUDA device with the harness mirroring each buffer into device memory). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activation_desc.h"
#include "harness.h"
#include "reference/batch_normalization_reference.h"

/* ---- Operands: a tensor description, its guarded buffer, its logical values ---- */

typedef struct operand {
    bool present;
    test_tensor t;
    test_buffer b;
    double* values; /* inputs: the stored values in logical order (after rounding to the type) */
} operand;

static void read_back(operand* o) {
    for (uint64_t i = 0; i < o->t.element_count; i++)
        o->values[i] = test_load(o->t.buffer.DataType, o->b.data, test_tensor_offset(&o->t, i));
}

/* The layout of an operand: a harness layout, or NHWC (4-D, channels
 * innermost in memory). */
typedef struct layout_choice {
    test_layout layout;
    bool nhwc;
} layout_choice;

static void tensor_init(test_tensor* t, DML_TENSOR_DATA_TYPE type, uint32_t rank, const uint32_t* sizes,
                        layout_choice layout) {
    if (!layout.nhwc || rank != 4) {
        test_tensor_init(t, type, rank, sizes, layout.layout);
        return;
    }
    test_tensor_init(t, type, rank, sizes, TEST_LAYOUT_EXPLICIT);
    static const uint32_t stored_order[4] = {0, 2, 3, 1}; /* N, H, W, C */
    uint32_t stride = 1;
    for (int d = 3; d >= 0; d--) {
        t->strides[stored_order[d]] = stride;
        stride *= sizes[stored_order[d]];
    }
    t->buffer.TotalTensorSizeInBytes = DMLCalcBufferTensorSize(type, rank, t->sizes, t->strides);
}

/* An input with the given values (NULL: uniform random in [lo, hi]). */
static void input_init(operand* o, DML_TENSOR_DATA_TYPE type, uint32_t rank, const uint32_t* sizes,
                       layout_choice layout, const double* values, double lo, double hi) {
    memset(o, 0, sizeof *o);
    o->present = true;
    tensor_init(&o->t, type, rank, sizes, layout);
    test_buffer_alloc(&o->b, o->t.buffer.TotalTensorSizeInBytes);
    o->values = calloc(o->t.element_count, sizeof *o->values);
    if (values)
        test_fill_values(&o->b, &o->t, values);
    else
        test_fill_random(&o->b, &o->t, lo, hi);
    read_back(o); /* 0-stride layouts: elements sharing an address share the last value written */
}

static void output_init(operand* o, DML_TENSOR_DATA_TYPE type, uint32_t rank, const uint32_t* sizes,
                        layout_choice layout) {
    memset(o, 0, sizeof *o);
    o->present = true;
    tensor_init(&o->t, type, rank, sizes, layout);
    test_buffer_alloc(&o->b, o->t.buffer.TotalTensorSizeInBytes);
}

static void operand_free(operand* o) {
    if (!o->present) return;
    test_buffer_free(&o->b);
    free(o->values);
    memset(o, 0, sizeof *o);
}

static const DML_TENSOR_DESC* desc_of(operand* o) { return o->present ? &o->t.desc : NULL; }

/* ---- Fused activation descriptions ---- */

typedef struct fused_activation {
    test_activation_storage storage;
    DML_OPERATOR_DESC desc;
} fused_activation;

/* The DML description of a reference activation (NULL when type is 0). */
static const DML_OPERATOR_DESC* make_activation(fused_activation* f, const bn_ref_activation* a) {
    if (a->type == 0) return NULL;
    f->desc = test_activation_desc(&f->storage, a->type, (float)a->p0, (float)a->p1);
    return &f->desc;
}

enum { ACTIVATION_COUNT = sizeof test_fusable_activations / sizeof test_fusable_activations[0] };

/* Random parameters in ranges where the FLOAT32 computation is well conditioned
 * (values stored as FLOAT32, as the description carries them). */
static bn_ref_activation random_activation(int type) {
    bn_ref_activation a = {type, 0, 0};
    switch (type) {
    case DML_OPERATOR_ACTIVATION_CELU: a.p0 = test_rand_double(0.25, 2); break;
    case DML_OPERATOR_ACTIVATION_SOFTPLUS: a.p0 = test_rand_double(1, 4); break; /* Steepness >= 1 (BN-7) */
    case DML_OPERATOR_ACTIVATION_SCALED_ELU: a.p0 = test_rand_double(0, 2), a.p1 = test_rand_double(0, 2); break;
    case DML_OPERATOR_ACTIVATION_SHRINK: a.p0 = test_rand_double(0, 1), a.p1 = test_rand_double(0, 1); break;
    default: a.p0 = test_rand_double(-2, 2), a.p1 = test_rand_double(-2, 2); break;
    }
    a.p0 = (float)a.p0;
    a.p1 = (float)a.p1;
    return a;
}

/* ---- One operator problem: description, operands, reference check ---- */

enum { MAX_INPUTS = 5, MAX_OUTPUTS = 3 };

typedef struct bn_problem {
    DML_OPERATOR_TYPE type;
    DML_TENSOR_DATA_TYPE data_type;
    uint32_t rank;
    uint32_t input_sizes[8];
    /* Inference: sizes of Mean, Variance, Scale, Bias; the others use [0] = P. */
    uint32_t parameter_sizes[4][8];
    bool fused_add;
    double epsilon;
    bn_ref_activation activation;
    BOOL spatial;
    bool random_layouts;
    bool nhwc; /* every 4-D operand stored NHWC */
} bn_problem;

typedef struct bn_run {
    operand inputs[MAX_INPUTS];
    operand outputs[MAX_OUTPUTS];
    uint32_t input_count, output_count;
    fused_activation activation;
    union {
        DML_BATCH_NORMALIZATION_OPERATOR_DESC inference;
        DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC training;
        DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC grad;
        DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC training_grad;
    } desc;
    DML_OPERATOR_DESC op;
} bn_run;

static bool is_gradient(DML_OPERATOR_TYPE type) {
    return type == DML_OPERATOR_BATCH_NORMALIZATION_GRAD || type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD;
}

/* Inputs with given values never get 0 strides, which would merge elements. */
static layout_choice input_layout(const bn_problem* p, const double* given) {
    return (layout_choice){p->random_layouts ? test_random_layout(given == NULL) : TEST_LAYOUT_PACKED, p->nhwc};
}

static layout_choice output_layout(const bn_problem* p) {
    return (layout_choice){p->random_layouts ? test_random_layout(false) : TEST_LAYOUT_PACKED, p->nhwc};
}

/* Builds operands and the description. given[i] (may be NULL) holds the
 * values of input slot i; the others are random. */
static void bn_setup(bn_run* r, const bn_problem* p, const double* const* given) {
    memset(r, 0, sizeof *r);
    const double* none[MAX_INPUTS] = {0};
    if (given == NULL) given = none;
    DML_TENSOR_DATA_TYPE type = p->data_type;
    uint32_t rank = p->rank;
    const uint32_t* x = p->input_sizes;
    const uint32_t* parameter = p->parameter_sizes[0];
    const DML_OPERATOR_DESC* activation = make_activation(&r->activation, &p->activation);
    switch (p->type) {
    case DML_OPERATOR_BATCH_NORMALIZATION:
        r->input_count = 5, r->output_count = 1;
        input_init(&r->inputs[0], type, rank, x, input_layout(p, given[0]), given[0], -2, 2);
        input_init(&r->inputs[1], type, rank, p->parameter_sizes[0], input_layout(p, given[1]), given[1], -1, 1);
        input_init(&r->inputs[2], type, rank, p->parameter_sizes[1], input_layout(p, given[2]), given[2], 0.1, 2);
        input_init(&r->inputs[3], type, rank, p->parameter_sizes[2], input_layout(p, given[3]), given[3], -1.5, 1.5);
        input_init(&r->inputs[4], type, rank, p->parameter_sizes[3], input_layout(p, given[4]), given[4], -1, 1);
        output_init(&r->outputs[0], type, rank, x, output_layout(p));
        r->desc.inference = (DML_BATCH_NORMALIZATION_OPERATOR_DESC){desc_of(&r->inputs[0]),
                                                                    desc_of(&r->inputs[1]),
                                                                    desc_of(&r->inputs[2]),
                                                                    desc_of(&r->inputs[3]),
                                                                    desc_of(&r->inputs[4]),
                                                                    desc_of(&r->outputs[0]),
                                                                    p->spatial,
                                                                    (FLOAT)p->epsilon,
                                                                    activation};
        break;
    case DML_OPERATOR_BATCH_NORMALIZATION_TRAINING:
        r->input_count = 4, r->output_count = 3;
        input_init(&r->inputs[0], type, rank, x, input_layout(p, given[0]), given[0], -2, 2);
        input_init(&r->inputs[1], type, rank, parameter, input_layout(p, given[1]), given[1], -1.5, 1.5);
        input_init(&r->inputs[2], type, rank, parameter, input_layout(p, given[2]), given[2], -1, 1);
        if (p->fused_add) input_init(&r->inputs[3], type, rank, x, input_layout(p, given[3]), given[3], -1, 1);
        output_init(&r->outputs[0], type, rank, x, output_layout(p));
        output_init(&r->outputs[1], type, rank, parameter, output_layout(p));
        output_init(&r->outputs[2], type, rank, parameter, output_layout(p));
        r->desc.training = (DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC){
            desc_of(&r->inputs[0]),  desc_of(&r->inputs[1]),  desc_of(&r->inputs[2]),
            desc_of(&r->inputs[3]),  desc_of(&r->outputs[0]), desc_of(&r->outputs[1]),
            desc_of(&r->outputs[2]), (FLOAT)p->epsilon,       activation};
        break;
    default: /* both gradients */
        r->input_count = 5, r->output_count = 3;
        input_init(&r->inputs[0], type, rank, x, input_layout(p, given[0]), given[0], -2, 2);
        input_init(&r->inputs[1], type, rank, x, input_layout(p, given[1]), given[1], -1, 1);
        input_init(&r->inputs[2], type, rank, parameter, input_layout(p, given[2]), given[2], -0.5, 0.5);
        input_init(&r->inputs[3], type, rank, parameter, input_layout(p, given[3]), given[3], 0.1, 2);
        input_init(&r->inputs[4], type, rank, parameter, input_layout(p, given[4]), given[4], -1.5, 1.5);
        output_init(&r->outputs[0], type, rank, x, output_layout(p));
        output_init(&r->outputs[1], type, rank, parameter, output_layout(p));
        output_init(&r->outputs[2], type, rank, parameter, output_layout(p));
        r->desc.grad = (DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC){
            desc_of(&r->inputs[0]),  desc_of(&r->inputs[1]),  desc_of(&r->inputs[2]),
            desc_of(&r->inputs[3]),  desc_of(&r->inputs[4]),  desc_of(&r->outputs[0]),
            desc_of(&r->outputs[1]), desc_of(&r->outputs[2]), (FLOAT)p->epsilon};
        if (p->type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD) { /* same fields, its own struct type */
            DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC g = r->desc.grad;
            r->desc.training_grad = (DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC){g.InputTensor,
                                                                                          g.InputGradientTensor,
                                                                                          g.MeanTensor,
                                                                                          g.VarianceTensor,
                                                                                          g.ScaleTensor,
                                                                                          g.OutputGradientTensor,
                                                                                          g.OutputScaleGradientTensor,
                                                                                          g.OutputBiasGradientTensor,
                                                                                          g.Epsilon};
        }
        break;
    }
    r->op = (DML_OPERATOR_DESC){p->type, &r->desc};
}

static void bn_free(bn_run* r) {
    for (uint32_t i = 0; i < MAX_INPUTS; i++)
        operand_free(&r->inputs[i]);
    for (uint32_t i = 0; i < MAX_OUTPUTS; i++)
        operand_free(&r->outputs[i]);
}

/* Poisons the outputs and runs the operator on the device. */
static HRESULT bn_execute(bn_run* r, DMLDevice* device) {
    test_buffer* inputs[MAX_INPUTS] = {0};
    test_buffer* outputs[MAX_OUTPUTS] = {0};
    for (uint32_t i = 0; i < r->input_count; i++)
        inputs[i] = r->inputs[i].present ? &r->inputs[i].b : NULL;
    for (uint32_t i = 0; i < r->output_count; i++) {
        test_buffer_poison(&r->outputs[i].b);
        outputs[i] = &r->outputs[i].b;
    }
    return test_run(device, &r->op, r->input_count, inputs, r->output_count, outputs);
}

/* The reference results for the stored inputs: expected[k] per output slot;
 * pre receives the FLOAT32 pre-activation values of the forward operators. */
static void bn_reference(const bn_problem* p, const bn_run* r, double** expected, double* pre) {
    bn_ref_shape shape = {.rank = p->rank};
    memcpy(shape.input_sizes, p->input_sizes, sizeof shape.input_sizes);
    memcpy(shape.parameter_sizes, p->parameter_sizes[0], sizeof shape.parameter_sizes);
    const double* const in[MAX_INPUTS] = {r->inputs[0].values, r->inputs[1].values, r->inputs[2].values,
                                          r->inputs[3].values, r->inputs[4].values};
    switch (p->type) {
    case DML_OPERATOR_BATCH_NORMALIZATION:
        bn_ref_inference(p->rank, p->input_sizes, in[0], p->parameter_sizes[0], in[1], p->parameter_sizes[1], in[2],
                         p->parameter_sizes[2], in[3], p->parameter_sizes[3], in[4], p->epsilon, &p->activation, pre,
                         expected[0]);
        break;
    case DML_OPERATOR_BATCH_NORMALIZATION_TRAINING:
        bn_ref_training(&shape, in[0], in[1], in[2], p->fused_add ? in[3] : NULL, p->epsilon, &p->activation, pre,
                        expected[0], expected[1], expected[2]);
        break;
    default:
        bn_ref_gradient(p->type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, &shape, in[0], in[1], in[2], in[3],
                        in[4], p->epsilon, expected[0], expected[1], expected[2]);
        break;
    }
}

typedef struct tolerance {
    double abs, rel;
} tolerance;

/* Spec §9: FLOAT32 1e-5 relative + 1e-6 absolute, 1e-4 relative for sums over
 * more than 1e3 elements; FLOAT16 1e-2 relative. */
static tolerance tolerance_for(const bn_problem* p, uint32_t output) {
    bool half = p->data_type == DML_TENSOR_DATA_TYPE_FLOAT16;
    if (half) return (tolerance){1e-3, 1e-2};
    uint64_t m = 1;
    for (uint32_t i = 0; i < p->rank; i++)
        if (p->parameter_sizes[0][i] == 1) m *= p->input_sizes[i];
    bool reduction = output > 0 && (p->type != DML_OPERATOR_BATCH_NORMALIZATION);
    if (reduction && m > 1000) return (tolerance){1e-5, 1e-4};
    return (tolerance){1e-6, 1e-5};
}

/* Compares the forward Output element by element. The fused activation runs
 * in FLOAT32 on a FLOAT32 value (§8.2): its absolute error scales with the
 * pre-activation magnitude; next to a jump of the activation either side is
 * accepted. */
static bool compare_forward_output(const bn_problem* p, const operand* o, const double* expected, const double* pre,
                                   const char* what) {
    tolerance tol = tolerance_for(p, 0);
    for (uint64_t i = 0; i < o->t.element_count; i++) {
        double got = test_load(o->t.buffer.DataType, o->b.data, test_tensor_offset(&o->t, i));
        double want = expected[i];
        double abs_tol = tol.abs * (1.0 + fabs(pre[i]) * (p->activation.type ? 2.0 : 0.0));
        bool ok = (isnan(got) && isnan(want)) || got == want || fabs(got - want) <= abs_tol + tol.rel * fabs(want);
        if (!ok && bn_ref_near_jump(&p->activation, pre[i], 1e-5 * (1.0 + fabs(pre[i])))) ok = true;
        if (!ok) {
            EXPECT(false, "%s: element %llu is %.9g but expected %.9g (pre-activation %.9g)", what,
                   (unsigned long long)i, got, want, pre[i]);
            return false;
        }
    }
    return true;
}

static const char* output_names[4][3] = {
    {"Output", NULL, NULL},
    {"Output", "OutputMean", "OutputVariance"},
    {"OutputGradient", "OutputScaleGradient", "OutputBiasGradient"},
};

static const char* output_name(DML_OPERATOR_TYPE type, uint32_t k) {
    if (type == DML_OPERATOR_BATCH_NORMALIZATION) return output_names[0][k];
    if (type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING) return output_names[1][k];
    return output_names[2][k];
}

static void describe(const bn_problem* p, char* text, size_t size) {
    int used = snprintf(text, size, "op %u %s X={", (unsigned)p->type,
                        p->data_type == DML_TENSOR_DATA_TYPE_FLOAT16 ? "FLOAT16" : "FLOAT32");
    for (uint32_t i = 0; i < p->rank && used > 0 && (size_t)used < size; i++)
        used += snprintf(text + used, size - (size_t)used, "%s%u", i ? "," : "", p->input_sizes[i]);
    for (uint32_t k = 0; k < (p->type == DML_OPERATOR_BATCH_NORMALIZATION ? 4u : 1u); k++) {
        if (used > 0 && (size_t)used < size) used += snprintf(text + used, size - (size_t)used, "} P%u={", k);
        for (uint32_t i = 0; i < p->rank && used > 0 && (size_t)used < size; i++)
            used += snprintf(text + used, size - (size_t)used, "%s%u", i ? "," : "", p->parameter_sizes[k][i]);
    }
    if (used > 0 && (size_t)used < size)
        snprintf(text + used, size - (size_t)used, "} act %d(%g,%g) fused_add %d eps %g", p->activation.type,
                 p->activation.p0, p->activation.p1, p->fused_add, p->epsilon);
}

/* Checks every output against the reference, the guards and the bytes no
 * element addresses. */
static bool bn_check(const bn_problem* p, bn_run* r) {
    double* expected[MAX_OUTPUTS] = {0};
    for (uint32_t k = 0; k < r->output_count; k++)
        expected[k] = calloc(r->outputs[k].t.element_count, sizeof(double));
    double* pre = calloc(r->outputs[0].t.element_count, sizeof(double));
    bn_reference(p, r, expected, pre);
    char what[512];
    describe(p, what, sizeof what);
    bool ok = true;
    for (uint32_t k = 0; k < r->output_count; k++) {
        char field[600];
        snprintf(field, sizeof field, "%s (%s)", output_name(p->type, k), what);
        operand* o = &r->outputs[k];
        tolerance tol = tolerance_for(p, k);
        if (k == 0 && !is_gradient(p->type))
            ok &= compare_forward_output(p, o, expected[k], pre, field);
        else
            ok &= test_compare(&o->b, &o->t, expected[k], tol.abs, tol.rel, field);
        test_buffer_check_guards(&o->b, field);
        test_buffer_check_unaddressed(&o->b, &o->t, field);
    }
    for (uint32_t k = 0; k < r->output_count; k++)
        free(expected[k]);
    free(pre);
    return ok && !test_case_failed();
}

/* Runs p once on device with fresh operands and checks it. */
static bool bn_run_and_check(const bn_problem* p, DMLDevice* device, const double* const* given) {
    bn_run r;
    bn_setup(&r, p, given);
    HRESULT status = bn_execute(&r, device);
    EXPECT_STATUS(status, S_OK, NULL);
    bool ok = SUCCEEDED(status) && bn_check(p, &r);
    bn_free(&r);
    return ok;
}

/* ---- Problem builders ---- */

static bn_problem problem_4d(DML_OPERATOR_TYPE type, const uint32_t* x, const uint32_t* parameter) {
    bn_problem p;
    memset(&p, 0, sizeof p);
    p.type = type;
    p.data_type = DML_TENSOR_DATA_TYPE_FLOAT32;
    p.rank = 4;
    memcpy(p.input_sizes, x, 4 * sizeof *x);
    for (int k = 0; k < 4; k++)
        memcpy(p.parameter_sizes[k], parameter, 4 * sizeof *parameter);
    p.spatial = 1;
    return p;
}

/* Random sizes with at most max_elements elements. */
static void random_sizes(uint32_t rank, uint32_t* sizes, uint64_t max_elements) {
    uint64_t count = 1;
    for (uint32_t i = 0; i < rank; i++) {
        sizes[i] = test_rand_range(1, rank <= 2 ? 40 : rank <= 4 ? 9 : 4);
        count *= sizes[i];
    }
    while (count > max_elements) { /* shrink the largest dimension */
        uint32_t largest = 0;
        for (uint32_t i = 1; i < rank; i++)
            if (sizes[i] > sizes[largest]) largest = i;
        count = count / sizes[largest] * (sizes[largest] / 2);
        sizes[largest] /= 2;
    }
}

/* Parameter sizes: each dimension 1 (broadcast / reduced) or X[i] at random. */
static void random_parameter_sizes(uint32_t rank, const uint32_t* x, uint32_t* sizes) {
    for (uint32_t i = 0; i < rank; i++)
        sizes[i] = test_rand_bool() ? 1 : x[i];
}

static bn_problem random_problem(DML_OPERATOR_TYPE type, DML_TENSOR_DATA_TYPE data_type) {
    bn_problem p;
    memset(&p, 0, sizeof p);
    p.type = type;
    p.data_type = data_type;
    p.rank = test_rand_range(1, 8);
    random_sizes(p.rank, p.input_sizes, 3000);
    for (int k = 0; k < 4; k++) {
        if (k == 0 || type == DML_OPERATOR_BATCH_NORMALIZATION)
            random_parameter_sizes(p.rank, p.input_sizes, p.parameter_sizes[k]);
        else
            memcpy(p.parameter_sizes[k], p.parameter_sizes[0], sizeof p.parameter_sizes[k]);
    }
    p.epsilon = test_rand_double(1e-3, 1e-1);
    p.spatial = test_rand_bool();
    p.random_layouts = true;
    if (type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING) p.fused_add = test_rand_bool();
    if (!is_gradient(type) && test_rand_range(0, 5) > 0)
        p.activation = random_activation(test_fusable_activations[test_rand_range(0, ACTIVATION_COUNT - 1)]);
    return p;
}

/* ---- Golden vectors (spec examples.md BN-1..BN-6) ---- */

static const uint32_t bn_x[4] = {2, 2, 1, 2}, bn_p[4] = {1, 2, 1, 1};
static const double bn_input[8] = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0};

/* Checks one output of a golden vector against its listed values. */
static void expect_values(operand* o, const double* expected, tolerance tol, const char* what) {
    test_compare(&o->b, &o->t, expected, tol.abs, tol.rel, what);
    test_buffer_check_guards(&o->b, what);
    test_buffer_check_unaddressed(&o->b, &o->t, what);
}

/* The tolerance of a vector, widened for FLOAT16 runs (examples.md "Format"). */
static tolerance vector_tolerance(DML_TENSOR_DATA_TYPE type, double abs, double rel) {
    if (type == DML_TENSOR_DATA_TYPE_FLOAT16) return (tolerance){1e-3, 1e-3};
    return (tolerance){abs, rel};
}

/* Runs a golden vector in FLOAT32 and FLOAT16, packed and in random layouts,
 * and checks both the listed values and the reference. */
static void run_vector(bn_problem p, const double* const* given, const double* const* expected, double abs, double rel,
                       const char* id) {
    DMLDevice* device = test_device(0);
    for (int variant = 0; variant < 4; variant++) {
        p.data_type = variant & 1 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        p.random_layouts = variant >= 2;
        bn_run r;
        bn_setup(&r, &p, given);
        EXPECT_STATUS(bn_execute(&r, device), S_OK, NULL);
        for (uint32_t k = 0; k < r.output_count; k++) {
            char what[128];
            snprintf(what, sizeof what, "%s %s %s %s", id, output_name(p.type, k), variant & 1 ? "FLOAT16" : "FLOAT32",
                     variant >= 2 ? "random layout" : "packed");
            expect_values(&r.outputs[k], expected[k], vector_tolerance(p.data_type, abs, rel), what);
        }
        bn_check(&p, &r);
        bn_free(&r);
    }
    dmlReleaseDevice(device);
}

TEST_CASE(golden_bn1_training_forward) {
    bn_problem p = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, bn_x, bn_p);
    const double scale[2] = {1.0, 2.0}, bias[2] = {0.0, 1.0};
    const double* given[5] = {bn_input, scale, bias, NULL, NULL};
    const double output[8] = {-1.212678, -0.7276069, -1.306227, -0.4675988, 0.7276069, 1.212678, 2.048285, 3.725541};
    const double mean[2] = {3.5, 5.75}, variance[2] = {4.25, 5.6875}; /* biased: unbiased would be 5.6667 */
    const double* expected[3] = {output, mean, variance};
    run_vector(p, given, expected, 1e-6, 1e-6, "BN-1");
}

TEST_CASE(golden_bn2_training_fused_add_relu) {
    bn_problem p = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, bn_x, bn_p);
    p.fused_add = true;
    p.activation = (bn_ref_activation){DML_OPERATOR_ACTIVATION_RELU, 0, 0};
    const double scale[2] = {1.0, 2.0}, bias[2] = {0.0, 1.0}, fused_add[8] = {0.5, -0.5, 0, 0, -10, 0, 0, 0};
    const double* given[5] = {bn_input, scale, bias, fused_add, NULL};
    const double output[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 1.212678, 2.048285, 3.725541};
    const double mean[2] = {3.5, 5.75}, variance[2] = {4.25, 5.6875};
    const double* expected[3] = {output, mean, variance};
    run_vector(p, given, expected, 1e-6, 1e-6, "BN-2");
}

static const double bn_dy[8] = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8};

TEST_CASE(golden_bn3_training_gradient) {
    bn_problem p = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, bn_x, bn_p);
    p.epsilon = 0.001;
    const double mean[2] = {3.5, 5.75}, variance[2] = {4.25, 5.6875}, scale[2] = {1.0, 2.0};
    const double* given[5] = {bn_input, bn_dy, mean, variance, scale};
    const double dx[8] = {0.1055485, -0.0627746, -0.203591, 3.685304e-05, -0.2767353, 0.2339614, 0.6109203, -0.4073662};
    const double dscale[2] = {0.3880114, -1.36265}, dbias[2] = {0.0, 0.6};
    const double* expected[3] = {dx, dscale, dbias};
    run_vector(p, given, expected, 1e-5, 1e-5, "BN-3");
}

TEST_CASE(golden_bn4_inference_gradient) {
    bn_problem p = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION_GRAD, bn_x, bn_p);
    const double mean[2] = {2.0, 5.0}, variance[2] = {4.0, 1.0}, scale[2] = {1.0, 2.0};
    const double* given[5] = {bn_input, bn_dy, mean, variance, scale};
    const double dx[8] = {0.05, -0.1, 0.6, 0.8, -0.25, 0.3, 1.4, -1.6};
    const double dscale[2] = {0.4, -2.8}, dbias[2] = {0.0, 0.6};
    const double* expected[3] = {dx, dscale, dbias};
    run_vector(p, given, expected, 1e-6, 1e-6, "BN-4");
}

TEST_CASE(golden_bn5_inference_mixed_broadcast) {
    bn_problem p = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION, bn_x, bn_p);
    const uint32_t scalar[4] = {1, 1, 1, 1}, per_w[4] = {1, 1, 1, 2};
    memcpy(p.parameter_sizes[1], scalar, sizeof scalar); /* Variance */
    memcpy(p.parameter_sizes[3], per_w, sizeof per_w);   /* Bias */
    const double mean[2] = {2.0, 5.0}, variance[1] = {4.0}, scale[2] = {1.0, 2.0}, bias[2] = {0.0, 10.0};
    const double* given[5] = {bn_input, mean, variance, scale, bias};
    const double output[8] = {-0.5, 10.0, -2.0, 9.0, 1.5, 12.0, 2.0, 14.0};
    const double* expected[1] = {output};
    run_vector(p, given, expected, 1e-6, 1e-6, "BN-5");
}

TEST_CASE(golden_bn6_every_activation) {
    static const struct {
        bn_ref_activation activation;
        double expected[5];
    } cases[] = {
        {{DML_OPERATOR_ACTIVATION_ELU, 1.0, 0}, {-0.8646647, -0.3934693, 0.0, 0.5, 2.0}},
        {{DML_OPERATOR_ACTIVATION_CELU, 1.0, 0}, {-0.8646647, -0.3934693, 0.0, 0.5, 2.0}},
        {{DML_OPERATOR_ACTIVATION_HARD_SIGMOID, 0.2, 0.5}, {0.1, 0.4, 0.5, 0.6, 0.9}},
        {{DML_OPERATOR_ACTIVATION_LEAKY_RELU, 0.01, 0}, {-0.02, -0.005, 0.0, 0.5, 2.0}},
        {{DML_OPERATOR_ACTIVATION_LINEAR, 2.0, 0.5}, {-3.5, -0.5, 0.5, 1.5, 4.5}},
        {{DML_OPERATOR_ACTIVATION_PARAMETRIC_SOFTPLUS, 2.0, 0.5}, {0.6265234, 1.151879, 1.386294, 1.651879, 2.626523}},
        {{DML_OPERATOR_ACTIVATION_RELU, 0, 0}, {0.0, 0.0, 0.0, 0.5, 2.0}},
        {{DML_OPERATOR_ACTIVATION_SCALED_ELU, 1.6732632, 1.050701}, {-1.520166, -0.6917582, 0.0, 0.5253505, 2.101402}},
        {{DML_OPERATOR_ACTIVATION_SCALED_TANH, 1.5, 0.5}, {-1.142391, -0.367378, 0.0, 0.367378, 1.142391}},
        {{DML_OPERATOR_ACTIVATION_SIGMOID, 0, 0}, {0.1192029, 0.3775407, 0.5, 0.6224593, 0.8807971}},
        {{DML_OPERATOR_ACTIVATION_SOFTPLUS, 2.0, 0}, {0.009074964, 0.1566308, 0.3465736, 0.6566308, 2.009075}},
        {{DML_OPERATOR_ACTIVATION_SOFTSIGN, 0, 0}, {-0.6666667, -0.3333333, 0.0, 0.3333333, 0.6666667}},
        {{DML_OPERATOR_ACTIVATION_TANH, 0, 0}, {-0.9640276, -0.4621172, 0.0, 0.4621172, 0.9640276}},
        {{DML_OPERATOR_ACTIVATION_THRESHOLDED_RELU, 0.5, 0}, {0.0, 0.0, 0.0, 0.0, 2.0}},
        {{DML_OPERATOR_ACTIVATION_SHRINK, 0.1, 0.5}, {-1.9, 0.0, 0.0, 0.0, 1.9}},
        {{DML_OPERATOR_ACTIVATION_GELU, 0, 0}, {-0.04550026, -0.1542688, 0.0, 0.3457312, 1.9545}},
        {{DML_OPERATOR_ACTIVATION_IDENTITY, 0, 0}, {-2.0, -0.5, 0.0, 0.5, 2.0}},
    };
    const uint32_t x[4] = {1, 1, 1, 5}, one[4] = {1, 1, 1, 1};
    const double input[5] = {-2.0, -0.5, 0.0, 0.5, 2.0}, zero[1] = {0.0}, unit[1] = {1.0};
    const double* given[5] = {input, zero, unit, unit, zero};
    EXPECT(sizeof cases / sizeof cases[0] == ACTIVATION_COUNT, "BN-6 covers every fusable activation");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bn_problem p = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION, x, one);
        p.activation = cases[i].activation;
        p.activation.p0 = (float)p.activation.p0, p.activation.p1 = (float)p.activation.p1;
        const double* expected[1] = {cases[i].expected};
        char id[64];
        snprintf(id, sizeof id, "BN-6 activation %d", p.activation.type);
        run_vector(p, given, expected, 1e-6, 1e-6, id);
    }
}

/* ---- Randomized comparisons with the reference ---- */

static void random_comparisons(DML_OPERATOR_TYPE type, int iterations) {
    DMLDevice* device = test_device(0);
    for (int i = 0; i < iterations && !test_case_failed(); i++) {
        DML_TENSOR_DATA_TYPE data_type = i % 2 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        bn_problem p = random_problem(type, data_type);
        bn_run_and_check(&p, device, NULL);
    }
    dmlReleaseDevice(device);
}

TEST_CASE(random_inference) { random_comparisons(DML_OPERATOR_BATCH_NORMALIZATION, 150); }
TEST_CASE(random_training) { random_comparisons(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, 150); }
TEST_CASE(random_gradient) { random_comparisons(DML_OPERATOR_BATCH_NORMALIZATION_GRAD, 100); }
TEST_CASE(random_training_gradient) { random_comparisons(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, 100); }

/* Every activation with random parameters, through both forward operators. */
TEST_CASE(every_activation_random_parameters) {
    DMLDevice* device = test_device(0);
    for (int a = 0; a < ACTIVATION_COUNT && !test_case_failed(); a++)
        for (int repeat = 0; repeat < 4; repeat++) {
            DML_OPERATOR_TYPE type =
                repeat % 2 ? DML_OPERATOR_BATCH_NORMALIZATION_TRAINING : DML_OPERATOR_BATCH_NORMALIZATION;
            bn_problem p =
                random_problem(type, repeat < 2 ? DML_TENSOR_DATA_TYPE_FLOAT32 : DML_TENSOR_DATA_TYPE_FLOAT16);
            p.activation = random_activation(test_fusable_activations[a]);
            bn_run_and_check(&p, device, NULL);
        }
    dmlReleaseDevice(device);
}

/* Larger problems in typical layouts: several chunks per group, many groups
 * per tile, groups as the inner loop (NHWC), a single or two channels, runs
 * longer than an inference work item of the fast path (65536 elements). */
TEST_CASE(larger_typical_layouts) {
    static const uint32_t shapes[][4] = {
        {2, 3, 70, 61}, {8, 64, 5, 7}, {3, 1, 100, 90}, {1, 2, 150, 150}, {1, 8, 259, 261}};
    DMLDevice* device = test_device(0);
    static const DML_OPERATOR_TYPE types[4] = {
        DML_OPERATOR_BATCH_NORMALIZATION, DML_OPERATOR_BATCH_NORMALIZATION_TRAINING,
        DML_OPERATOR_BATCH_NORMALIZATION_GRAD, DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int nhwc = 0; nhwc < 2; nhwc++) {
                const uint32_t* x = shapes[s];
                const uint32_t p_sizes[4] = {1, x[1], 1, 1};
                bn_problem p = problem_4d(types[t], x, p_sizes);
                p.epsilon = 1e-5;
                p.fused_add = types[t] == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING;
                if (!is_gradient(types[t])) p.activation = (bn_ref_activation){DML_OPERATOR_ACTIVATION_RELU, 0, 0};
                p.nhwc = nhwc;
                bn_run_and_check(&p, device, NULL);
            }
    dmlReleaseDevice(device);
}

/* ---- Statistics robustness (spec §5): mean 1e4, standard deviation 1e-2 ---- */

static double gaussian(void) {
    double u = test_rand_double(1e-12, 1.0), v = test_rand_double(0.0, 1.0);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

TEST_CASE(statistics_large_mean_small_deviation) {
    const uint32_t x[4] = {16, 2, 48, 48}, p_sizes[4] = {1, 2, 1, 1}; /* M = 36864: several chunks */
    bn_problem p = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, x, p_sizes);
    p.epsilon = 1e-9;
    uint64_t count = 16 * 2 * 48 * 48;
    double* input = malloc(count * sizeof *input);
    for (uint64_t i = 0; i < count; i++)
        input[i] = 1e4 + 1e-2 * gaussian();
    const double scale[2] = {1.0, 0.5}, bias[2] = {0.0, 0.25};
    const double* given[5] = {input, scale, bias, NULL, NULL};
    DMLDevice* device = test_device(0);
    bn_run r;
    bn_setup(&r, &p, given);
    EXPECT_STATUS(bn_execute(&r, device), S_OK, NULL);
    /* The float64 reference of the stored FLOAT32 inputs. */
    double* output = malloc(count * sizeof *output);
    double* pre = malloc(count * sizeof *pre);
    double mean[2], variance[2];
    bn_ref_shape shape = {.rank = 4};
    memcpy(shape.input_sizes, x, sizeof x);
    memcpy(shape.parameter_sizes, p_sizes, sizeof p_sizes);
    bn_ref_training(&shape, r.inputs[0].values, r.inputs[1].values, r.inputs[2].values, NULL, p.epsilon, &p.activation,
                    pre, output, mean, variance);
    EXPECT(variance[0] > 0.5e-4 && variance[0] < 2e-4, "the data has variance ~1e-4 (got %g)", variance[0]);
    /* E[x^2] - E[x]^2 loses ~8 digits here; two-pass / Chan keeps all of FLOAT32's. */
    test_compare(&r.outputs[2].b, &r.outputs[2].t, variance, 0, 1e-5, "OutputVariance (mean 1e4, std 1e-2)");
    test_compare(&r.outputs[1].b, &r.outputs[1].t, mean, 0, 1e-7, "OutputMean (mean 1e4, std 1e-2)");
    test_compare(&r.outputs[0].b, &r.outputs[0].t, output, 1e-4, 1e-4, "Output (mean 1e4, std 1e-2)");
    bn_free(&r);
    free(input);
    free(output);
    free(pre);
    dmlReleaseDevice(device);
}

/* ---- Finite differences ---- */

/* L = sum(dy * y) of the reference forward; y from TRAINING (training) or
 * from inference with Mean/Variance fixed. */
typedef struct fd_problem {
    bool training;
    bn_ref_shape shape;
    uint64_t count, groups;
    double epsilon;
    double *x, *dy, *scale, *bias, *mean, *variance;
} fd_problem;

static double fd_loss(const fd_problem* f) {
    double* y = malloc(f->count * sizeof *y);
    if (f->training) {
        double* m = malloc(f->groups * sizeof *m);
        double* v = malloc(f->groups * sizeof *v);
        bn_ref_training(&f->shape, f->x, f->scale, f->bias, NULL, f->epsilon, NULL, NULL, y, m, v);
        free(m);
        free(v);
    } else {
        const uint32_t* ps = f->shape.parameter_sizes;
        bn_ref_inference(f->shape.rank, f->shape.input_sizes, f->x, ps, f->mean, ps, f->variance, ps, f->scale, ps,
                         f->bias, f->epsilon, NULL, NULL, y); /* the exact map, no FLOAT32 rounding */
    }
    double loss = 0;
    for (uint64_t e = 0; e < f->count; e++)
        loss += f->dy[e] * y[e];
    free(y);
    return loss;
}

/* Central difference of L with respect to *value. */
static double fd_derivative(const fd_problem* f, double* value) {
    const double h = 1e-5;
    double saved = *value;
    *value = saved + h;
    double up = fd_loss(f);
    *value = saved - h;
    double down = fd_loss(f);
    *value = saved;
    return (up - down) / (2 * h);
}

/* Runs the library gradient (FLOAT32) on the values and compares every output
 * with the finite differences of the reference forward. */
static void finite_difference_check(bool training) {
    DMLDevice* device = test_device(0);
    for (int iteration = 0; iteration < 12 && !test_case_failed(); iteration++) {
        bn_problem p;
        memset(&p, 0, sizeof p);
        p.type = training ? DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD : DML_OPERATOR_BATCH_NORMALIZATION_GRAD;
        p.data_type = DML_TENSOR_DATA_TYPE_FLOAT32;
        p.rank = test_rand_range(1, 4);
        random_sizes(p.rank, p.input_sizes, 40);
        random_parameter_sizes(p.rank, p.input_sizes, p.parameter_sizes[0]);
        p.epsilon = 1e-3;
        p.random_layouts = true;

        fd_problem f = {.training = training, .epsilon = p.epsilon};
        f.shape.rank = p.rank;
        memcpy(f.shape.input_sizes, p.input_sizes, sizeof f.shape.input_sizes);
        memcpy(f.shape.parameter_sizes, p.parameter_sizes[0], sizeof f.shape.parameter_sizes);
        f.count = bn_ref_count(p.rank, p.input_sizes);
        f.groups = bn_ref_count(p.rank, p.parameter_sizes[0]);
        f.x = malloc(f.count * sizeof(double));
        f.dy = malloc(f.count * sizeof(double));
        f.scale = malloc(f.groups * sizeof(double));
        f.bias = malloc(f.groups * sizeof(double));
        f.mean = malloc(f.groups * sizeof(double));
        f.variance = malloc(f.groups * sizeof(double));
        /* Values exact in FLOAT32, so the library sees the same numbers. */
        for (uint64_t e = 0; e < f.count; e++) {
            f.x[e] = (float)test_rand_double(-2, 2);
            f.dy[e] = (float)test_rand_double(-1, 1);
        }
        for (uint64_t j = 0; j < f.groups; j++) {
            f.scale[j] = (float)test_rand_double(-1.5, 1.5);
            f.bias[j] = (float)test_rand_double(-1, 1);
            f.mean[j] = (float)test_rand_double(-0.5, 0.5);
            f.variance[j] = (float)test_rand_double(0.1, 2);
        }
        /* The statistics the reference's formulas take: exact (the finite
         * differences differentiate the exact forward); the library gets
         * them rounded to FLOAT32, as a FLOAT32 forward would output them. */
        double* exact_mean = malloc(f.groups * sizeof(double));
        double* exact_variance = malloc(f.groups * sizeof(double));
        memcpy(exact_mean, f.mean, f.groups * sizeof(double));
        memcpy(exact_variance, f.variance, f.groups * sizeof(double));
        if (training) { /* TRAINING_GRAD receives the forward's batch statistics */
            double* y = malloc(f.count * sizeof *y);
            bn_ref_training(&f.shape, f.x, f.scale, f.bias, NULL, f.epsilon, NULL, NULL, y, exact_mean, exact_variance);
            for (uint64_t j = 0; j < f.groups; j++)
                f.mean[j] = (float)exact_mean[j], f.variance[j] = (float)exact_variance[j];
            free(y);
        }
        const double* given[5] = {f.x, f.dy, f.mean, f.variance, f.scale};
        bn_run r;
        bn_setup(&r, &p, given);
        EXPECT_STATUS(bn_execute(&r, device), S_OK, NULL);

        double* fd_dx = malloc(f.count * sizeof(double));
        double* fd_dscale = malloc(f.groups * sizeof(double));
        double* fd_dbias = malloc(f.groups * sizeof(double));
        for (uint64_t e = 0; e < f.count; e++)
            fd_dx[e] = fd_derivative(&f, &f.x[e]);
        for (uint64_t j = 0; j < f.groups; j++) {
            fd_dscale[j] = fd_derivative(&f, &f.scale[j]);
            fd_dbias[j] = fd_derivative(&f, &f.bias[j]);
        }
        /* The library, in FLOAT32 and with FLOAT32 statistics, against float64 differences. */
        test_compare(&r.outputs[0].b, &r.outputs[0].t, fd_dx, 1e-4, 1e-4, "OutputGradient vs finite differences");
        test_compare(&r.outputs[1].b, &r.outputs[1].t, fd_dscale, 1e-4, 1e-4,
                     "OutputScaleGradient vs finite differences");
        test_compare(&r.outputs[2].b, &r.outputs[2].t, fd_dbias, 1e-4, 1e-4,
                     "OutputBiasGradient vs finite differences");
        /* The reference's own formulas (spec §6/§7), in float64, against the same differences. */
        double* ref[3] = {malloc(f.count * sizeof(double)), malloc(f.groups * sizeof(double)),
                          malloc(f.groups * sizeof(double))};
        bn_ref_gradient(training, &f.shape, f.x, f.dy, exact_mean, exact_variance, f.scale, f.epsilon, ref[0], ref[1],
                        ref[2]);
        free(exact_mean);
        free(exact_variance);
        const double* fd[3] = {fd_dx, fd_dscale, fd_dbias};
        uint64_t counts[3] = {f.count, f.groups, f.groups};
        for (int k = 0; k < 3; k++)
            for (uint64_t i = 0; i < counts[k]; i++)
                EXPECT(fabs(ref[k][i] - fd[k][i]) <= 1e-5 + 1e-5 * fabs(fd[k][i]),
                       "reference %s gradient output %d element %llu: %.9g vs finite difference %.9g",
                       training ? "TRAINING_GRAD" : "GRAD", k, (unsigned long long)i, ref[k][i], fd[k][i]);
        for (int k = 0; k < 3; k++)
            free(ref[k]);
        free(fd_dx);
        free(fd_dscale);
        free(fd_dbias);
        free(f.x), free(f.dy), free(f.scale), free(f.bias), free(f.mean), free(f.variance);
        bn_free(&r);
    }
    dmlReleaseDevice(device);
}

TEST_CASE(training_gradient_finite_differences) { finite_difference_check(true); }
TEST_CASE(inference_gradient_finite_differences) { finite_difference_check(false); }

/* ---- Determinism: the same bits for every thread count and run ---- */

/* Adversarial values for order-sensitivity: in every group (parameter
 * element of p_sizes), a quarter of the elements are +1e15 and a quarter
 * -1e15, at random places, the rest of order 1. The huge values cancel
 * exactly, so each sum's result is small while the rounding of its partial
 * sums depends on their order: any change in how a reduction is split or
 * combined changes the result, also after rounding to FLOAT32. */
static void fill_adversarial(operand* o, uint32_t rank, const uint32_t* x, const uint32_t* p_sizes) {
    uint64_t count = o->t.element_count, groups = bn_ref_count(rank, p_sizes);
    uint64_t* group_of = malloc(count * sizeof *group_of);
    uint64_t* start = calloc(groups + 1, sizeof *start);
    uint64_t* members = malloc(count * sizeof *members);
    double* values = malloc(count * sizeof *values);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t rest = i, g = 0, stride = 1;
        for (uint32_t d = rank; d-- > 0;) {
            if (p_sizes[d] != 1) g += (rest % x[d]) * stride;
            stride *= p_sizes[d];
            rest /= x[d];
        }
        group_of[i] = g;
        start[g + 1]++;
    }
    for (uint64_t g = 0; g < groups; g++)
        start[g + 1] += start[g];
    uint64_t* fill = calloc(groups, sizeof *fill);
    for (uint64_t i = 0; i < count; i++)
        members[start[group_of[i]] + fill[group_of[i]]++] = i;
    for (uint64_t g = 0; g < groups; g++) {
        uint64_t* m = members + start[g];
        uint64_t n = start[g + 1] - start[g];
        for (uint64_t k = n; k > 1; k--) { /* shuffle the group */
            uint64_t j = test_rand() % k, tmp = m[k - 1];
            m[k - 1] = m[j];
            m[j] = tmp;
        }
        for (uint64_t k = 0; k < n; k++)
            values[m[k]] = k < n / 4 ? 1e15 : k < n / 2 ? -1e15 : test_rand_double(-1, 1);
    }
    test_fill_values(&o->b, &o->t, values);
    read_back(o);
    free(group_of), free(start), free(members), free(values), free(fill);
}

/* Runs one problem with 1, 2, 3, 7, all and again 1 threads and expects the
 * same output bytes, with ordinary or adversarial inputs. On CUDA (where
 * thread counts do not apply) the six runs are six dispatches on fresh
 * devices: run-to-run bit identity. */
static void expect_same_bits_typed(DML_OPERATOR_TYPE type, DML_TENSOR_DATA_TYPE data_type, const uint32_t* x,
                                   const uint32_t* p_sizes, bool nhwc, bool adversarial) {
    bn_problem p = problem_4d(type, x, p_sizes);
    p.data_type = data_type;
    p.epsilon = 1e-5;
    p.fused_add = type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING;
    if (!is_gradient(type)) p.activation = (bn_ref_activation){DML_OPERATOR_ACTIVATION_GELU, 0, 0};
    p.nhwc = nhwc;
    bn_run r;
    bn_setup(&r, &p, NULL);
    if (adversarial) /* the input, and the input gradient of the GRADs */
        for (uint32_t k = 0; k < (is_gradient(type) ? 2u : 1u); k++)
            fill_adversarial(&r.inputs[k], 4, x, p_sizes);
    static const uint32_t thread_counts[] = {1, 2, 3, 7, 0, 1};
    uint8_t* first[MAX_OUTPUTS] = {0};
    for (size_t t = 0; t < sizeof thread_counts / sizeof thread_counts[0]; t++) {
        DMLDevice* device = test_device(thread_counts[t]);
        EXPECT_STATUS(bn_execute(&r, device), S_OK, NULL);
        dmlReleaseDevice(device);
        for (uint32_t k = 0; k < r.output_count; k++) {
            if (t == 0) {
                first[k] = malloc(r.outputs[k].b.size);
                memcpy(first[k], r.outputs[k].b.data, r.outputs[k].b.size);
            } else {
                if (test_backend_is_cuda())
                    EXPECT(memcmp(first[k], r.outputs[k].b.data, r.outputs[k].b.size) == 0,
                           "op %u output %u differs between CUDA runs 1 and %zu%s", (unsigned)type, k, t + 1,
                           adversarial ? " (adversarial data)" : "");
                else
                    EXPECT(memcmp(first[k], r.outputs[k].b.data, r.outputs[k].b.size) == 0,
                           "op %u output %u differs between 1 thread and %u threads%s", (unsigned)type, k,
                           thread_counts[t], adversarial ? " (adversarial data)" : "");
            }
        }
    }
    if (!adversarial) bn_check(&p, &r);
    for (uint32_t k = 0; k < r.output_count; k++)
        free(first[k]);
    bn_free(&r);
}

static void expect_same_bits(DML_OPERATOR_TYPE type, const uint32_t* x, const uint32_t* p_sizes, bool nhwc,
                             bool adversarial) {
    expect_same_bits_typed(type, DML_TENSOR_DATA_TYPE_FLOAT32, x, p_sizes, nhwc, adversarial);
}

TEST_CASE(determinism_across_thread_counts) {
    static const DML_OPERATOR_TYPE types[3] = {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING,
                                               DML_OPERATOR_BATCH_NORMALIZATION_GRAD,
                                               DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD};
    const uint32_t one_channel[4] = {4, 1, 96, 96}, one_p[4] = {1, 1, 1, 1};
    const uint32_t two_channels[4] = {2, 2, 120, 100}, two_p[4] = {1, 2, 1, 1};
    const uint32_t many[4] = {16, 40, 6, 6}, many_p[4] = {1, 40, 1, 1};
    for (int t = 0; t < 3; t++)
        for (int adversarial = 0; adversarial < 2; adversarial++) {
            expect_same_bits(types[t], one_channel, one_p, false, adversarial);
            expect_same_bits(types[t], two_channels, two_p, false, adversarial);
            expect_same_bits(types[t], two_channels, two_p, true, adversarial); /* NHWC, two interleaved groups */
            expect_same_bits(types[t], many, many_p, true, adversarial);
        }
    expect_same_bits(DML_OPERATOR_BATCH_NORMALIZATION, two_channels, two_p, true, false);
}

/* Packed layouts of the fast paths' classes (src/cpu/batch_normalization_avx2.c):
 * runs along H*W (NCHW) with tails shorter than a vector, 5-D, runs of
 * one element vectorized across channels ({N,C,1,1} and NHWC) with a channel
 * count that is not a multiple of the 16-channel block (37: the FLOAT16
 * reductions walk two blocks, then a partial one), FLOAT32 and FLOAT16,
 * fused add and each class of activation that the passes instantiate (none,
 * RELU vectorized, GELU through the scalar code) with every layout and type. */
TEST_CASE(fast_path_layouts) {
    static const DML_OPERATOR_TYPE activations[3] = {0, DML_OPERATOR_ACTIVATION_RELU, DML_OPERATOR_ACTIVATION_GELU};
    static const uint32_t shapes[][5] = {{3, 37, 5, 7, 1}, {2, 19, 13, 1, 1}, {5, 24, 1, 1, 1}, {2, 9, 3, 4, 5}};
    static const uint32_t ranks[] = {4, 4, 4, 5};
    static const DML_OPERATOR_TYPE types[4] = {
        DML_OPERATOR_BATCH_NORMALIZATION, DML_OPERATOR_BATCH_NORMALIZATION_TRAINING,
        DML_OPERATOR_BATCH_NORMALIZATION_GRAD, DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD};
    DMLDevice* device = test_device(0);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] && !test_case_failed(); s++)
        for (int t = 0; t < 4; t++)
            for (int variant = 0; variant < 12; variant++) {
                bool nhwc = variant & 1, half = variant & 2;
                int activation = variant / 4;
                if ((nhwc && ranks[s] != 4) || (is_gradient(types[t]) && activation > 0)) continue;
                bn_problem p;
                memset(&p, 0, sizeof p);
                p.type = types[t];
                p.data_type = half ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
                p.rank = ranks[s];
                memcpy(p.input_sizes, shapes[s], sizeof shapes[s]);
                for (int k = 0; k < 4; k++)
                    for (uint32_t i = 0; i < p.rank; i++)
                        p.parameter_sizes[k][i] = i == 1 ? shapes[s][1] : 1;
                p.spatial = 1;
                p.epsilon = 1e-3;
                p.nhwc = nhwc;
                p.fused_add = types[t] == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING && variant % 4 < 2;
                p.activation = (bn_ref_activation){activations[activation], 0, 0};
                bn_run_and_check(&p, device, NULL);
            }
    dmlReleaseDevice(device);
    /* Bit identity across thread counts, ordinary and adversarial data. */
    static const DML_OPERATOR_TYPE reducing[3] = {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING,
                                                  DML_OPERATOR_BATCH_NORMALIZATION_GRAD,
                                                  DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD};
    const uint32_t runs[4] = {6, 21, 40, 41}, runs_p[4] = {1, 21, 1, 1};
    const uint32_t channels[4] = {9, 35, 17, 30}, channels_p[4] = {1, 35, 1, 1};
    for (int t = 0; t < 3; t++)
        for (int adversarial = 0; adversarial < 2; adversarial++) {
            expect_same_bits(reducing[t], runs, runs_p, false, adversarial);
            expect_same_bits(reducing[t], channels, channels_p, true, adversarial);
            /* FLOAT16 channels: walks of two blocks, then a partial block */
            expect_same_bits_typed(reducing[t], DML_TENSOR_DATA_TYPE_FLOAT16, channels, channels_p, true, adversarial);
        }
}

/* FLOAT16 through the fast paths' FLOAT32 element-wise passes and the
 * FLOAT32 spans of their sums (src/cpu/batch_normalization_avx2.c): runs of
 * several spans and a tail, NHWC, data far from zero (mean about 50, so that
 * the centering matters) with a Mean input near it; the spec's tolerances
 * against the float64 reference, and the same bits on every thread count. */
TEST_CASE(half_precision_passes) {
    static const uint32_t x[4] = {3, 20, 17, 19}, p_sizes[4] = {1, 20, 1, 1}; /* runs of 323 */
    static const DML_OPERATOR_TYPE types[4] = {
        DML_OPERATOR_BATCH_NORMALIZATION, DML_OPERATOR_BATCH_NORMALIZATION_TRAINING,
        DML_OPERATOR_BATCH_NORMALIZATION_GRAD, DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD};
    uint64_t count = 3 * 20 * 17 * 19;
    double* input = malloc(count * sizeof *input);
    double mean[20];
    for (uint64_t i = 0; i < count; i++)
        input[i] = 50 + test_rand_double(-2, 2);
    for (int j = 0; j < 20; j++)
        mean[j] = 50 + test_rand_double(-0.5, 0.5);
    DMLDevice* device = test_device(0);
    for (int t = 0; t < 4 && !test_case_failed(); t++)
        for (int nhwc = 0; nhwc < 2; nhwc++) {
            bn_problem p = problem_4d(types[t], x, p_sizes);
            p.data_type = DML_TENSOR_DATA_TYPE_FLOAT16;
            p.epsilon = 1e-3;
            p.nhwc = nhwc;
            p.fused_add = types[t] == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING;
            if (!is_gradient(types[t])) p.activation = (bn_ref_activation){DML_OPERATOR_ACTIVATION_RELU, 0, 0};
            const double* given[5] = {input};
            if (types[t] == DML_OPERATOR_BATCH_NORMALIZATION) given[1] = mean; /* the Mean inputs */
            if (is_gradient(types[t])) given[2] = mean;
            bn_run r;
            bn_setup(&r, &p, given);
            EXPECT_STATUS(bn_execute(&r, device), S_OK, NULL);
            bn_check(&p, &r);
            bn_free(&r);
        }
    dmlReleaseDevice(device);
    free(input);
    for (int t = 1; t < 4; t++)
        for (int nhwc = 0; nhwc < 2; nhwc++)
            expect_same_bits_typed(types[t], DML_TENSOR_DATA_TYPE_FLOAT16, x, p_sizes, nhwc, false);
}

/* FLOAT32 TRAINING and GRADs through the FLOAT32 spans of the AVX-512 sums
 * (src/cpu/batch_normalization_avx512.c): runs longer than a statistics
 * chunk (4096) with tails, and runs whose output is large enough for
 * non-temporal stores (8 MiB) starting off 64-byte boundaries; data far from
 * zero relative to its spread (offsets 1e3 and 1e4, so that the centering
 * matters) with a Mean input near it, a fused add and activations; the
 * spec's tolerances against the float64 reference, and the same bits on
 * every thread count. */
TEST_CASE(single_precision_long_runs) {
    static const uint32_t shapes[2][4] = {{3, 16, 67, 67}, {2, 16, 362, 363}}, p_sizes[4] = {1, 16, 1, 1};
    static const double offsets[2] = {1e3, 1e4};
    static const DML_OPERATOR_TYPE types[3] = {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING,
                                               DML_OPERATOR_BATCH_NORMALIZATION_GRAD,
                                               DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD};
    DMLDevice* device = test_device(0);
    for (int s = 0; s < 2 && !test_case_failed(); s++) {
        const uint32_t* x = shapes[s];
        uint64_t count = (uint64_t)x[0] * x[1] * x[2] * x[3];
        double* input = malloc(count * sizeof *input);
        double mean[16];
        for (uint64_t i = 0; i < count; i++)
            input[i] = offsets[s] + test_rand_double(-1, 1);
        for (int j = 0; j < 16; j++)
            mean[j] = offsets[s] + test_rand_double(-0.1, 0.1);
        for (int t = 0; t < 3 && !test_case_failed(); t++)
            for (int variant = 0; variant < (is_gradient(types[t]) ? 1 : 2) && !test_case_failed(); variant++) {
                bn_problem p = problem_4d(types[t], x, p_sizes);
                p.epsilon = 1e-5;
                p.fused_add = !is_gradient(types[t]) && variant == 0;
                if (!is_gradient(types[t]))
                    p.activation = (bn_ref_activation){
                        variant ? DML_OPERATOR_ACTIVATION_GELU : DML_OPERATOR_ACTIVATION_RELU, 0, 0};
                const double* given[5] = {input};
                if (is_gradient(types[t])) given[2] = mean; /* the Mean input */
                bn_run r;
                bn_setup(&r, &p, given);
                EXPECT_STATUS(bn_execute(&r, device), S_OK, NULL);
                bn_check(&p, &r);
                bn_free(&r);
            }
        free(input);
    }
    dmlReleaseDevice(device);
    for (int t = 0; t < 3; t++)
        for (int adversarial = 0; adversarial < 2; adversarial++)
            expect_same_bits(types[t], shapes[0], p_sizes, false, adversarial);
}

/* FLOAT16 inference whose output is large enough for non-temporal stores
 * (8 MiB, DML_CPU_STREAM_BYTES in src/cpu/cpu.h): runs of
 * 362 x 363 elements (not a multiple of 16), so that they start on 32-byte
 * boundaries (16 halves per store) and off them (8 per store), with tails. */
TEST_CASE(half_precision_streamed_inference) {
    static const uint32_t x[4] = {2, 16, 362, 363}, p_sizes[4] = {1, 16, 1, 1};
    bn_problem p = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION, x, p_sizes);
    p.data_type = DML_TENSOR_DATA_TYPE_FLOAT16;
    p.activation = (bn_ref_activation){DML_OPERATOR_ACTIVATION_RELU, 0, 0};
    DMLDevice* device = test_device(0);
    bn_run_and_check(&p, device, NULL);
    dmlReleaseDevice(device);
}

/* FLOAT16 channels-last outputs of 8 MiB or more: the forward and backward
 * passes stream whole 16-channel blocks with one 32-byte store where the
 * block is 32-byte aligned (40 channels: 80-byte rows, so every other row's
 * blocks are not; the last block of each row is partial). */
TEST_CASE(half_precision_streamed_channels_last) {
    static const uint32_t x[4] = {2, 40, 256, 205}, p_sizes[4] = {1, 40, 1, 1}; /* 8.01 MiB */
    static const DML_OPERATOR_TYPE types[3] = {DML_OPERATOR_BATCH_NORMALIZATION,
                                               DML_OPERATOR_BATCH_NORMALIZATION_TRAINING,
                                               DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD};
    DMLDevice* device = test_device(0);
    for (int t = 0; t < 3 && !test_case_failed(); t++) {
        bn_problem p = problem_4d(types[t], x, p_sizes);
        p.data_type = DML_TENSOR_DATA_TYPE_FLOAT16;
        p.nhwc = true;
        if (!is_gradient(types[t])) p.activation = (bn_ref_activation){DML_OPERATOR_ACTIVATION_RELU, 0, 0};
        bn_run_and_check(&p, device, NULL);
    }
    dmlReleaseDevice(device);
}

/* ---- The fused activation is deep-copied at creation (tensors.md §5) ---- */

TEST_CASE(activation_is_deep_copied) {
    const uint32_t x[4] = {1, 1, 1, 5}, one[4] = {1, 1, 1, 1};
    bn_problem p = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION, x, one);
    p.activation = (bn_ref_activation){DML_OPERATOR_ACTIVATION_LINEAR, 2.0, 0.5};
    const double input[5] = {-2.0, -0.5, 0.0, 0.5, 2.0}, zero[1] = {0.0}, unit[1] = {1.0};
    const double* given[5] = {input, zero, unit, unit, zero};
    bn_run r;
    bn_setup(&r, &p, given);
    DMLDevice* device = test_device(1);
    DMLOperator* op = NULL;
    EXPECT_STATUS(dmlCreateOperator(device, &r.op, &op), S_OK, NULL);
    /* The caller's description changes (or dies) after creation. */
    r.activation.storage.linear.Alpha = 100.0f;
    r.activation.desc.Type = DML_OPERATOR_ACTIVATION_SOFTMAX;
    DMLCompiledOperator* compiled = NULL;
    EXPECT_STATUS(dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &compiled), S_OK, NULL);
    dmlReleaseOperator(op);
    /* Bound directly (not through test_run, which would create the operator
     * from the changed description): the device's own memory, uploaded. */
    void* in_memory[5] = {NULL};
    void* out_memory = NULL;
    DML_BUFFER_BINDING in[5], out[1];
    DML_BINDING_DESC in_bindings[5], out_bindings[1];
    for (int i = 0; i < 5; i++) {
        EXPECT_STATUS(dmlAllocateBuffer(device, r.inputs[i].b.size, &in_memory[i]), S_OK, NULL);
        if (in_memory[i])
            EXPECT_STATUS(dmlUpload(device, in_memory[i], r.inputs[i].b.data, r.inputs[i].b.size), S_OK, NULL);
        in[i] = (DML_BUFFER_BINDING){in_memory[i], 0, r.inputs[i].b.size};
        in_bindings[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &in[i]};
    }
    test_buffer_poison(&r.outputs[0].b);
    EXPECT_STATUS(dmlAllocateBuffer(device, r.outputs[0].b.size, &out_memory), S_OK, NULL);
    if (out_memory) EXPECT_STATUS(dmlUpload(device, out_memory, r.outputs[0].b.data, r.outputs[0].b.size), S_OK, NULL);
    out[0] = (DML_BUFFER_BINDING){out_memory, 0, r.outputs[0].b.size};
    out_bindings[0] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &out[0]};
    DML_DISPATCH_BINDINGS bindings = {
        5, in_bindings, 1, out_bindings, {DML_BINDING_TYPE_NONE, NULL}, {DML_BINDING_TYPE_NONE, NULL}};
    if (compiled && !test_case_failed()) {
        EXPECT_STATUS(dmlDispatch(compiled, &bindings), S_OK, NULL);
        EXPECT_STATUS(dmlDownload(device, r.outputs[0].b.data, out_memory, r.outputs[0].b.size), S_OK, NULL);
    }
    for (int i = 0; i < 5; i++)
        dmlFreeBuffer(device, in_memory[i]);
    dmlFreeBuffer(device, out_memory);
    const double expected[5] = {-3.5, -0.5, 0.5, 1.5, 4.5}; /* LINEAR 2x + 0.5, as at creation */
    test_compare(&r.outputs[0].b, &r.outputs[0].t, expected, 1e-6, 1e-6, "Output after the description changed");
    dmlReleaseCompiledOperator(compiled);
    dmlReleaseDevice(device);
    bn_free(&r);
}

/* Edge cases: M = 1 (nothing reduced: variance 0), everything reduced,
 * Epsilon 0 with a zero variance (NaN per the formula), a negative variance
 * in inference (NaN, no sign check). */
TEST_CASE(edge_cases) {
    DMLDevice* device = test_device(0);
    const uint32_t x[4] = {2, 3, 2, 2}, all[4] = {2, 3, 2, 2}, none[4] = {1, 1, 1, 1};
    for (int t = 0; t < 2; t++) {
        bn_problem p = problem_4d(
            t ? DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD : DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, x, all);
        p.epsilon = 0.5;
        bn_run_and_check(&p, device, NULL);
        bn_problem q = problem_4d(p.type, x, none);
        q.epsilon = 0.5;
        bn_run_and_check(&q, device, NULL);
    }
    /* Epsilon 0 and one element per group: 0/0 = NaN by the formula (BN-6). */
    bn_problem p = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, x, all);
    p.epsilon = 0.0;
    bn_run r;
    bn_setup(&r, &p, NULL);
    EXPECT_STATUS(bn_execute(&r, device), S_OK, NULL);
    EXPECT(isnan(test_load(DML_TENSOR_DATA_TYPE_FLOAT32, r.outputs[0].b.data, 0)), "0 * Scale / sqrt(0 + 0) is NaN");
    EXPECT(test_load(DML_TENSOR_DATA_TYPE_FLOAT32, r.outputs[2].b.data, 0) == 0.0, "variance of one element is 0");
    bn_free(&r);
    /* Inference with Variance + Epsilon < 0: NaN, no validation of the sign. */
    bn_problem q = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION, x, none);
    q.epsilon = -2.0;
    const double input[24] = {0}, zero[1] = {0.0}, unit[1] = {1.0};
    const double* given[5] = {input, zero, unit, unit, zero};
    bn_setup(&r, &q, given);
    EXPECT_STATUS(bn_execute(&r, device), S_OK, NULL);
    EXPECT(isnan(test_load(DML_TENSOR_DATA_TYPE_FLOAT32, r.outputs[0].b.data, 0)), "sqrt(1 - 2) is NaN");
    bn_free(&r);
    dmlReleaseDevice(device);
}

/* Variance + Epsilon = 0 with a nonzero deviation: the factor is infinite
 * and each element's result is ±inf by its sign (BN-6: NaN and infinities
 * propagate by the formula). Pins that no fast path rewrites the formula
 * into one whose terms meet as inf - inf (the AVX-512 passes expand
 * (x - Mean) * factor + Bias into x * factor + offset only where factor and
 * offset are finite). Runs of 20 elements: whole vectors and a tail. */
TEST_CASE(infinite_factor_keeps_the_sign) {
    enum { CHANNELS = 8, RUN = 20, COUNT = 2 * CHANNELS * RUN }; /* 8 channels: the gradients' fast paths want 8 */
    const uint32_t x[4] = {2, CHANNELS, 1, RUN}, per_channel[4] = {1, CHANNELS, 1, 1};
    double input[COUNT], dy[COUNT], forward[COUNT], backward[COUNT];
    for (int i = 0; i < COUNT; i++) { /* per channel: mean 2, biased variance 1 */
        input[i] = i % 2 ? 3.0 : 1.0;
        dy[i] = i % 2 ? 2.0 : 1.0;
        forward[i] = i % 2 ? INFINITY : -INFINITY;
        backward[i] = -forward[i];
    }
    double scale[CHANNELS], bias[CHANNELS], mean[CHANNELS], variance[CHANNELS], dscale[CHANNELS], dbias[CHANNELS];
    for (int c = 0; c < CHANNELS; c++) {
        scale[c] = 1.0 + c, bias[c] = c, mean[c] = 2.0, variance[c] = 1.0;
        dscale[c] = INFINITY, dbias[c] = RUN * (1.0 + 2.0); /* sdy: two runs of 1, 2, 1, 2, ... */
    }
    bn_problem p = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, x, per_channel);
    p.epsilon = -1.0f;
    const double* training_given[5] = {input, scale, bias, NULL, NULL};
    const double* training_expected[3] = {forward, mean, variance};
    run_vector(p, training_given, training_expected, 1e-6, 1e-6, "Variance + Epsilon = 0, TRAINING");
    /* TRAINING_GRAD: k = Scale / 0 = inf and w = sdyxc / M / 0 = inf
     * (sdyxc = RUN a channel), so dx = k * (dy - u - (x - 2) * w) is +inf
     * where x = 1 and -inf where x = 3. */
    bn_problem q = problem_4d(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, x, per_channel);
    q.epsilon = -1.0f;
    const double* gradient_given[5] = {input, dy, mean, variance, scale};
    const double* gradient_expected[3] = {backward, dscale, dbias};
    run_vector(q, gradient_given, gradient_expected, 1e-6, 1e-6, "Variance + Epsilon = 0, TRAINING_GRAD");
}

/* ---- Validation (spec §2 rules 1-6, §4 Spatial, §8.2) ---- */

/* A device of the backend under test at a feature level (validation is
 * shared, but the CUDA run checks it on a CUDA device too). */
static DMLDevice* device_at(DML_FEATURE_LEVEL level) {
    DML_DEVICE_DESC desc = {.Backend = DML_BACKEND_CPU, .FeatureLevel = level, .ThreadCount = 1};
    if (test_backend_is_cuda()) {
        DMLDevice* probe = test_cuda_device(); /* skips without a GPU */
        dmlReleaseDevice(probe);
        const char* ordinal = getenv("DML_TEST_CUDA_DEVICE");
        desc = (DML_DEVICE_DESC){
            .Backend = DML_BACKEND_CUDA, .FeatureLevel = level, .CudaDeviceOrdinal = ordinal ? atoi(ordinal) : 0};
    }
    DMLDevice* device = NULL;
    EXPECT_STATUS(dmlCreateDevice(&desc, &device), S_OK, NULL);
    return device;
}

static HRESULT try_create(DMLDevice* device, const DML_OPERATOR_DESC* desc) {
    DMLOperator* op = NULL;
    HRESULT status = dmlCreateOperator(device, desc, &op);
    dmlReleaseOperator(op);
    return status;
}

/* The address of a description's tensor field by its position in the struct. */
static const DML_TENSOR_DESC** field_at(bn_run* r, DML_OPERATOR_TYPE type, int index) {
    if (type == DML_OPERATOR_BATCH_NORMALIZATION) {
        DML_BATCH_NORMALIZATION_OPERATOR_DESC* d = &r->desc.inference;
        const DML_TENSOR_DESC** fields[6] = {&d->InputTensor, &d->MeanTensor, &d->VarianceTensor,
                                             &d->ScaleTensor, &d->BiasTensor, &d->OutputTensor};
        return fields[index];
    }
    if (type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING) {
        DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC* d = &r->desc.training;
        const DML_TENSOR_DESC** fields[7] = {&d->InputTensor,         &d->ScaleTensor,  &d->BiasTensor,
                                             &d->FusedAddTensor,      &d->OutputTensor, &d->OutputMeanTensor,
                                             &d->OutputVarianceTensor};
        return fields[index];
    }
    if (type == DML_OPERATOR_BATCH_NORMALIZATION_GRAD) {
        DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC* d = &r->desc.grad;
        const DML_TENSOR_DESC** fields[8] = {&d->InputTensor,
                                             &d->InputGradientTensor,
                                             &d->MeanTensor,
                                             &d->VarianceTensor,
                                             &d->ScaleTensor,
                                             &d->OutputGradientTensor,
                                             &d->OutputScaleGradientTensor,
                                             &d->OutputBiasGradientTensor};
        return fields[index];
    }
    DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC* d = &r->desc.training_grad;
    const DML_TENSOR_DESC** fields[8] = {&d->InputTensor,
                                         &d->InputGradientTensor,
                                         &d->MeanTensor,
                                         &d->VarianceTensor,
                                         &d->ScaleTensor,
                                         &d->OutputGradientTensor,
                                         &d->OutputScaleGradientTensor,
                                         &d->OutputBiasGradientTensor};
    return fields[index];
}

/* A packed tensor description for invalid variants. */
static const DML_TENSOR_DESC* make_tensor(test_tensor* t, DML_TENSOR_DATA_TYPE type, uint32_t rank,
                                          const uint32_t* sizes) {
    test_tensor_init(t, type, rank, sizes, TEST_LAYOUT_PACKED);
    return &t->desc;
}

static const uint32_t v_x[4] = {2, 3, 4, 5}, v_p[4] = {1, 3, 1, 1};

static bn_problem valid_problem(DML_OPERATOR_TYPE type) {
    bn_problem p = problem_4d(type, v_x, v_p);
    p.epsilon = 1e-5;
    p.fused_add = type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING;
    return p;
}

TEST_CASE(validation_required_tensors) {
    DMLDevice* device = test_device(1);
    bn_run r;
    bn_problem p = valid_problem(DML_OPERATOR_BATCH_NORMALIZATION);
    static const char* inference_fields[6] = {"InputTensor", "MeanTensor", "VarianceTensor",
                                              "ScaleTensor", "BiasTensor", "OutputTensor"};
    for (int f = 0; f < 6; f++) {
        bn_setup(&r, &p, NULL);
        EXPECT_STATUS(try_create(device, &r.op), S_OK, NULL);
        *field_at(&r, p.type, f) = NULL;
        EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, "BATCH_NORMALIZATION", inference_fields[f], "NULL");
        bn_free(&r);
    }
    p = valid_problem(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING);
    static const char* training_fields[7] = {"InputTensor",         "ScaleTensor",  "BiasTensor",
                                             "FusedAddTensor",      "OutputTensor", "OutputMeanTensor",
                                             "OutputVarianceTensor"};
    for (int f = 0; f < 7; f++) {
        bn_setup(&r, &p, NULL);
        EXPECT_STATUS(try_create(device, &r.op), S_OK, NULL);
        *field_at(&r, p.type, f) = NULL;
        if (f == 3) /* FusedAdd is optional */
            EXPECT_STATUS(try_create(device, &r.op), S_OK, NULL);
        else
            EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, "BATCH_NORMALIZATION_TRAINING", training_fields[f],
                          "NULL");
        bn_free(&r);
    }
    static const char* grad_fields[8] = {"InputTensor",
                                         "InputGradientTensor",
                                         "MeanTensor",
                                         "VarianceTensor",
                                         "ScaleTensor",
                                         "OutputGradientTensor",
                                         "OutputScaleGradientTensor",
                                         "OutputBiasGradientTensor"};
    for (int t = 0; t < 2; t++) {
        p = valid_problem(t ? DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD : DML_OPERATOR_BATCH_NORMALIZATION_GRAD);
        for (int f = 0; f < 8; f++) {
            bn_setup(&r, &p, NULL);
            EXPECT_STATUS(try_create(device, &r.op), S_OK, NULL);
            *field_at(&r, p.type, f) = NULL;
            EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, "BATCH_NORMALIZATION_", grad_fields[f], "NULL");
            bn_free(&r);
        }
    }
    dmlReleaseDevice(device);
}

TEST_CASE(validation_types_and_ranks) {
    DMLDevice* device = test_device(1);
    bn_run r;
    test_tensor bad;
    const uint32_t x3[3] = {2, 3, 4}, p3[3] = {1, 3, 1};
    /* Rule 6: the data type is FLOAT32 or FLOAT16. */
    bn_problem p = valid_problem(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING);
    bn_setup(&r, &p, NULL);
    r.desc.training.InputTensor = make_tensor(&bad, DML_TENSOR_DATA_TYPE_INT32, 4, v_x);
    EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, "InputTensor.DataType", "FLOAT32");
    r.desc.training.InputTensor = make_tensor(&bad, DML_TENSOR_DATA_TYPE_FLOAT64, 4, v_x);
    EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, "InputTensor.DataType");
    bn_free(&r);
    /* Rule 1: every tensor has the input's DataType and DimensionCount. */
    static const DML_OPERATOR_TYPE types[4] = {
        DML_OPERATOR_BATCH_NORMALIZATION, DML_OPERATOR_BATCH_NORMALIZATION_TRAINING,
        DML_OPERATOR_BATCH_NORMALIZATION_GRAD, DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD};
    static const char* names[4][8] = {
        {"InputTensor", "MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor", "OutputTensor"},
        {"InputTensor", "ScaleTensor", "BiasTensor", "FusedAddTensor", "OutputTensor", "OutputMeanTensor",
         "OutputVarianceTensor"},
        {"InputTensor", "InputGradientTensor", "MeanTensor", "VarianceTensor", "ScaleTensor", "OutputGradientTensor",
         "OutputScaleGradientTensor", "OutputBiasGradientTensor"},
        {"InputTensor", "InputGradientTensor", "MeanTensor", "VarianceTensor", "ScaleTensor", "OutputGradientTensor",
         "OutputScaleGradientTensor", "OutputBiasGradientTensor"},
    };
    static const int field_counts[4] = {6, 7, 8, 8};
    for (int t = 0; t < 4; t++) {
        p = valid_problem(types[t]);
        for (int f = 1; f < field_counts[t]; f++) {
            bn_setup(&r, &p, NULL);
            const DML_TENSOR_DESC** field = field_at(&r, p.type, f);
            const DML_BUFFER_TENSOR_DESC* original = (*field)->Desc;
            *field = make_tensor(&bad, DML_TENSOR_DATA_TYPE_FLOAT16, 4, original->Sizes);
            EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, names[t][f], "DataType", "FLOAT32");
            *field = make_tensor(&bad, DML_TENSOR_DATA_TYPE_FLOAT32, 3, original->Sizes);
            EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, names[t][f], "DimensionCount");
            bn_free(&r);
        }
    }
    /* Rule 6: BATCH_NORMALIZATION is 4-D only below FL 3.1, 1-8 from 3.1. */
    DMLDevice* fl30 = device_at(DML_FEATURE_LEVEL_3_0);
    DMLDevice* fl31 = device_at(DML_FEATURE_LEVEL_3_1);
    bn_problem q = valid_problem(DML_OPERATOR_BATCH_NORMALIZATION);
    q.rank = 3;
    for (int k = 0; k < 4; k++)
        memcpy(q.parameter_sizes[k], p3, sizeof p3);
    memcpy(q.input_sizes, x3, sizeof x3);
    bn_setup(&r, &q, NULL);
    EXPECT_STATUS(try_create(fl30, &r.op), E_INVALIDARG, "BATCH_NORMALIZATION", "InputTensor.DimensionCount", "4");
    EXPECT_STATUS(try_create(fl31, &r.op), S_OK, NULL);
    bn_free(&r);
    q = valid_problem(DML_OPERATOR_BATCH_NORMALIZATION);
    bn_setup(&r, &q, NULL);
    EXPECT_STATUS(try_create(fl30, &r.op), S_OK, NULL);
    bn_free(&r);
    /* Feature levels of the operators: GRAD 3.1, TRAINING and TRAINING_GRAD 4.1. */
    DMLDevice* fl40 = device_at(DML_FEATURE_LEVEL_4_0);
    DMLDevice* fl41 = device_at(DML_FEATURE_LEVEL_4_1);
    q = valid_problem(DML_OPERATOR_BATCH_NORMALIZATION_GRAD);
    bn_setup(&r, &q, NULL);
    EXPECT_STATUS(try_create(fl30, &r.op), E_INVALIDARG, "BATCH_NORMALIZATION_GRAD", "feature level");
    EXPECT_STATUS(try_create(fl31, &r.op), S_OK, NULL);
    bn_free(&r);
    for (int t = 0; t < 2; t++) {
        q = valid_problem(t ? DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD
                            : DML_OPERATOR_BATCH_NORMALIZATION_TRAINING);
        bn_setup(&r, &q, NULL);
        EXPECT_STATUS(try_create(fl40, &r.op), E_INVALIDARG, "BATCH_NORMALIZATION_TRAINING", "feature level");
        EXPECT_STATUS(try_create(fl41, &r.op), S_OK, NULL);
        bn_free(&r);
    }
    /* 1-D and 8-D problems at the highest level. */
    for (uint32_t rank = 1; rank <= 8; rank += 7) {
        bn_problem e = valid_problem(DML_OPERATOR_BATCH_NORMALIZATION_TRAINING);
        e.rank = rank;
        for (uint32_t i = 0; i < rank; i++)
            e.input_sizes[i] = 2, e.parameter_sizes[0][i] = i == 0 ? 2 : 1;
        bn_run_and_check(&e, device, NULL);
    }
    dmlReleaseDevice(fl30);
    dmlReleaseDevice(fl31);
    dmlReleaseDevice(fl40);
    dmlReleaseDevice(fl41);
    dmlReleaseDevice(device);
}

TEST_CASE(validation_sizes) {
    DMLDevice* device = test_device(1);
    bn_run r;
    test_tensor bad;
    const uint32_t wrong_x[4] = {2, 3, 4, 6}, wrong_p[4] = {1, 2, 1, 1}, other_p[4] = {2, 3, 1, 1};
    /* Rule 2: the "sizes X" tensors have identical Sizes. */
    struct {
        DML_OPERATOR_TYPE type;
        int field;
        const char* name;
    } x_tensors[] = {
        {DML_OPERATOR_BATCH_NORMALIZATION, 5, "OutputTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, 3, "FusedAddTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, 4, "OutputTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_GRAD, 1, "InputGradientTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_GRAD, 5, "OutputGradientTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, 1, "InputGradientTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, 5, "OutputGradientTensor"},
    };
    for (size_t i = 0; i < sizeof x_tensors / sizeof x_tensors[0]; i++) {
        bn_problem p = valid_problem(x_tensors[i].type);
        bn_setup(&r, &p, NULL);
        const DML_TENSOR_DESC** field = field_at(&r, p.type, x_tensors[i].field);
        *field = make_tensor(&bad, DML_TENSOR_DATA_TYPE_FLOAT32, 4, wrong_x);
        EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, x_tensors[i].name, "Sizes[3]", "6");
        /* BN-8: FusedAdd does not broadcast by size 1 either. */
        if (x_tensors[i].field == 3 && x_tensors[i].type == DML_OPERATOR_BATCH_NORMALIZATION_TRAINING) {
            *field = make_tensor(&bad, DML_TENSOR_DATA_TYPE_FLOAT32, 4, v_p);
            EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, "FusedAddTensor", "Sizes[0]");
        }
        bn_free(&r);
    }
    /* Rule 3: a parameter size is 1 or X[i]. */
    struct {
        DML_OPERATOR_TYPE type;
        int field;
        const char* name;
    } parameters[] = {
        {DML_OPERATOR_BATCH_NORMALIZATION, 1, "MeanTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION, 2, "VarianceTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION, 3, "ScaleTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION, 4, "BiasTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, 1, "ScaleTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_GRAD, 2, "MeanTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, 2, "MeanTensor"},
    };
    for (size_t i = 0; i < sizeof parameters / sizeof parameters[0]; i++) {
        bn_problem p = valid_problem(parameters[i].type);
        bn_setup(&r, &p, NULL);
        *field_at(&r, p.type, parameters[i].field) = make_tensor(&bad, DML_TENSOR_DATA_TYPE_FLOAT32, 4, wrong_p);
        EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, parameters[i].name, "Sizes[1]", "1 or");
        bn_free(&r);
    }
    /* Inference (BN-5): each parameter may broadcast differently. */
    bn_problem mixed = valid_problem(DML_OPERATOR_BATCH_NORMALIZATION);
    bn_setup(&r, &mixed, NULL);
    r.desc.inference.BiasTensor = make_tensor(&bad, DML_TENSOR_DATA_TYPE_FLOAT32, 4, other_p);
    EXPECT_STATUS(try_create(device, &r.op), S_OK, NULL);
    bn_free(&r);
    /* Rule 4: the other parameter tensors have the Sizes P of Scale (TRAINING) or Mean (GRADs). */
    struct {
        DML_OPERATOR_TYPE type;
        int field;
        const char* name;
    } equal[] = {
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, 2, "BiasTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, 5, "OutputMeanTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, 6, "OutputVarianceTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_GRAD, 3, "VarianceTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_GRAD, 4, "ScaleTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_GRAD, 6, "OutputScaleGradientTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_GRAD, 7, "OutputBiasGradientTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, 3, "VarianceTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, 4, "ScaleTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, 6, "OutputScaleGradientTensor"},
        {DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, 7, "OutputBiasGradientTensor"},
    };
    for (size_t i = 0; i < sizeof equal / sizeof equal[0]; i++) {
        bn_problem p = valid_problem(equal[i].type);
        bn_setup(&r, &p, NULL);
        *field_at(&r, p.type, equal[i].field) =
            make_tensor(&bad, DML_TENSOR_DATA_TYPE_FLOAT32, 4, other_p); /* valid alone */
        EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, equal[i].name, "Sizes[0]", "must equal");
        bn_free(&r);
    }
    dmlReleaseDevice(device);
}

TEST_CASE(validation_spatial) {
    const uint32_t full_p[4] = {1, 3, 4, 5}, half_p[4] = {1, 3, 4, 1};
    DML_FEATURE_LEVEL levels[3] = {DML_FEATURE_LEVEL_1_0, DML_FEATURE_LEVEL_3_1, DML_FEATURE_LEVEL_4_0};
    for (int l = 0; l < 3; l++) {
        DMLDevice* device = device_at(levels[l]);
        bool ignored = levels[l] >= DML_FEATURE_LEVEL_4_0; /* BN-2: ignored from FL 4.0 */
        bn_run r;
        bn_problem p = valid_problem(DML_OPERATOR_BATCH_NORMALIZATION);
        p.spatial = 0;
        bn_setup(&r, &p, NULL); /* Mean/Variance {1,C,1,1}: broadcast along H and W */
        EXPECT_STATUS(try_create(device, &r.op), ignored ? S_OK : E_INVALIDARG, "MeanTensor", "Sizes[2]", "Spatial");
        r.desc.inference.Spatial = 1;
        EXPECT_STATUS(try_create(device, &r.op), S_OK, NULL);
        bn_free(&r);
        memcpy(p.parameter_sizes[0], full_p, sizeof full_p);
        memcpy(p.parameter_sizes[1], half_p, sizeof half_p);
        bn_setup(&r, &p, NULL); /* Variance still broadcast along W */
        EXPECT_STATUS(try_create(device, &r.op), ignored ? S_OK : E_INVALIDARG, "VarianceTensor", "Sizes[3]",
                      "Spatial");
        bn_free(&r);
        memcpy(p.parameter_sizes[1], full_p, sizeof full_p);
        bn_setup(&r, &p, NULL); /* Mean and Variance per (C, H, W); Scale/Bias may still broadcast */
        EXPECT_STATUS(try_create(device, &r.op), S_OK, NULL);
        bn_free(&r);
        dmlReleaseDevice(device);
    }
}

TEST_CASE(validation_fused_activation) {
    DMLDevice* device = test_device(1);
    bn_run r;
    static const DML_OPERATOR_TYPE types[2] = {DML_OPERATOR_BATCH_NORMALIZATION,
                                               DML_OPERATOR_BATCH_NORMALIZATION_TRAINING};
    for (int t = 0; t < 2; t++) {
        bn_problem p = valid_problem(types[t]);
        p.activation = (bn_ref_activation){DML_OPERATOR_ACTIVATION_RELU, 0, 0};
        bn_setup(&r, &p, NULL);
        EXPECT_STATUS(try_create(device, &r.op), S_OK, NULL);
        /* Not fusable: ELEMENT_WISE_CLIP (CONVOLUTION/GEMM only), PARAMETERIZED_RELU, SOFTMAX, ... */
        static const DML_OPERATOR_TYPE not_fusable[] = {
            DML_OPERATOR_ELEMENT_WISE_CLIP,  DML_OPERATOR_ACTIVATION_PARAMETERIZED_RELU,
            DML_OPERATOR_ACTIVATION_SOFTMAX, DML_OPERATOR_ACTIVATION_LOG_SOFTMAX,
            DML_OPERATOR_ACTIVATION_HARDMAX, DML_OPERATOR_BATCH_NORMALIZATION,
            (DML_OPERATOR_TYPE)9999};
        for (size_t i = 0; i < sizeof not_fusable / sizeof not_fusable[0]; i++) {
            r.activation.desc.Type = not_fusable[i];
            EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, "FusedActivation->Type", "not a fusable");
        }
        r.activation.desc.Type = DML_OPERATOR_ACTIVATION_RELU;
        r.activation.desc.Desc = NULL;
        EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, "FusedActivation->Desc", "NULL");
        r.activation.desc.Desc = &r.activation.storage;
        r.activation.storage.relu.InputTensor = desc_of(&r.inputs[0]);
        EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, "FusedActivation", "InputTensor", "must be NULL");
        r.activation.storage.relu.InputTensor = NULL;
        r.activation.storage.relu.OutputTensor = desc_of(&r.outputs[0]);
        EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, "FusedActivation", "OutputTensor", "must be NULL");
        r.activation.storage.relu.OutputTensor = NULL;
        EXPECT_STATUS(try_create(device, &r.op), S_OK, NULL);
        /* BN-7: SOFTPLUS Steepness >= 1 and not NaN. */
        r.activation.desc.Type = DML_OPERATOR_ACTIVATION_SOFTPLUS;
        float steepness[4] = {0.5f, 0.0f, -1.0f, NAN};
        for (int i = 0; i < 4; i++) {
            r.activation.storage.softplus.Steepness = steepness[i];
            EXPECT_STATUS(try_create(device, &r.op), E_INVALIDARG, "FusedActivation", "Steepness", ">= 1");
        }
        r.activation.storage.softplus.Steepness = 1.0f;
        EXPECT_STATUS(try_create(device, &r.op), S_OK, NULL);
        bn_free(&r);
    }
    dmlReleaseDevice(device);
    /* Feature levels of activations: SHRINK 2.0, CELU 3.0, GELU 5.1. */
    struct {
        int type;
        DML_FEATURE_LEVEL below, at;
    } levels[] = {
        {DML_OPERATOR_ACTIVATION_SHRINK, DML_FEATURE_LEVEL_1_0, DML_FEATURE_LEVEL_2_0},
        {DML_OPERATOR_ACTIVATION_CELU, DML_FEATURE_LEVEL_2_1, DML_FEATURE_LEVEL_3_0},
        {DML_OPERATOR_ACTIVATION_GELU, DML_FEATURE_LEVEL_5_0, DML_FEATURE_LEVEL_5_1},
    };
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        bn_problem p = valid_problem(DML_OPERATOR_BATCH_NORMALIZATION);
        p.activation = (bn_ref_activation){levels[i].type, 1.0, 0.5};
        bn_setup(&r, &p, NULL);
        DMLDevice* below = device_at(levels[i].below);
        DMLDevice* at = device_at(levels[i].at);
        EXPECT_STATUS(try_create(below, &r.op), E_INVALIDARG, "FusedActivation->Type", "feature level");
        EXPECT_STATUS(try_create(at, &r.op), S_OK, NULL);
        dmlReleaseDevice(below);
        dmlReleaseDevice(at);
        bn_free(&r);
    }
}
