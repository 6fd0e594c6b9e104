/* The max pooling family (spec max_pooling.md): golden vectors MP-1..MP-8,
 * randomized comparisons with the float64 reference over every type, rank,
 * layout and option, determinism, and every validation rule of §3. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference/max_pooling_reference.h"

/* ---- A pooling problem: description, tensors and buffers ---- */

typedef struct pool_case {
    DML_OPERATOR_TYPE type;                     /* MAX_POOLING, 1, 2 or MAX_POOLING_GRAD */
    DML_TENSOR_DATA_TYPE data_type, index_type; /* index_type UNKNOWN: no indices tensor */
    uint32_t rank;
    uint32_t input_sizes[5], output_sizes[5];
    uint32_t strides[3], window[3], start_padding[3], end_padding[3], dilations[3];
    test_layout layouts[3]; /* input, output (or input gradient), indices (or output gradient) */
} pool_case;

typedef struct pool_run {
    test_tensor input, output, indices, output_gradient; /* forward: input, output, indices; grad: input, output
                                                            = InputGradient, output_gradient */
    test_buffer input_buffer, output_buffer, indices_buffer, output_gradient_buffer;
    DML_MAX_POOLING_OPERATOR_DESC pool;
    DML_MAX_POOLING1_OPERATOR_DESC pool1;
    DML_MAX_POOLING2_OPERATOR_DESC pool2;
    DML_MAX_POOLING_GRAD_OPERATOR_DESC grad;
    DML_OPERATOR_DESC desc;
} pool_run;

static bool is_grad(const pool_case* c) { return c->type == DML_OPERATOR_MAX_POOLING_GRAD; }

/* Builds the description and poisoned guarded buffers of c. */
static void pool_run_init(pool_run* r, const pool_case* c) {
    memset(r, 0, sizeof *r);
    uint32_t k = c->rank - 2;
    test_tensor_init(&r->input, c->data_type, c->rank, c->input_sizes, c->layouts[0]);
    test_buffer_alloc(&r->input_buffer, r->input.buffer.TotalTensorSizeInBytes);
    test_tensor_init(&r->output, c->data_type, c->rank, c->output_sizes, c->layouts[1]);
    test_buffer_alloc(&r->output_buffer, r->output.buffer.TotalTensorSizeInBytes);
    if (is_grad(c)) {
        test_tensor_init(&r->output_gradient, c->data_type, c->rank, c->input_sizes, c->layouts[2]);
        test_buffer_alloc(&r->output_gradient_buffer, r->output_gradient.buffer.TotalTensorSizeInBytes);
        r->grad = (DML_MAX_POOLING_GRAD_OPERATOR_DESC){
            &r->input.desc, &r->output.desc,  &r->output_gradient.desc, k,           c->strides,
            c->window,      c->start_padding, c->end_padding,           c->dilations};
        r->desc = (DML_OPERATOR_DESC){c->type, &r->grad};
        return;
    }
    const DML_TENSOR_DESC* indices = NULL;
    if (c->index_type != DML_TENSOR_DATA_TYPE_UNKNOWN) {
        test_tensor_init(&r->indices, c->index_type, c->rank, c->output_sizes, c->layouts[2]);
        test_buffer_alloc(&r->indices_buffer, r->indices.buffer.TotalTensorSizeInBytes);
        indices = &r->indices.desc;
    }
    switch (c->type) {
    case DML_OPERATOR_MAX_POOLING:
        r->pool = (DML_MAX_POOLING_OPERATOR_DESC){&r->input.desc,   &r->output.desc, k, c->strides, c->window,
                                                  c->start_padding, c->end_padding};
        r->desc = (DML_OPERATOR_DESC){c->type, &r->pool};
        break;
    case DML_OPERATOR_MAX_POOLING1:
        r->pool1 = (DML_MAX_POOLING1_OPERATOR_DESC){&r->input.desc, &r->output.desc, indices,          k,
                                                    c->strides,     c->window,       c->start_padding, c->end_padding};
        r->desc = (DML_OPERATOR_DESC){c->type, &r->pool1};
        break;
    default:
        r->pool2 =
            (DML_MAX_POOLING2_OPERATOR_DESC){&r->input.desc, &r->output.desc,  indices,        k,           c->strides,
                                             c->window,      c->start_padding, c->end_padding, c->dilations};
        r->desc = (DML_OPERATOR_DESC){c->type, &r->pool2};
        break;
    }
}

static void pool_run_free(pool_run* r) {
    test_buffer_free(&r->input_buffer);
    test_buffer_free(&r->output_buffer);
    if (r->indices_buffer.block) test_buffer_free(&r->indices_buffer);
    if (r->output_gradient_buffer.block) test_buffer_free(&r->output_gradient_buffer);
}

static HRESULT pool_dispatch(DMLDevice* device, pool_run* r, const pool_case* c) {
    if (is_grad(c)) {
        test_buffer* inputs[2] = {&r->input_buffer, &r->output_buffer};
        test_buffer* outputs[1] = {&r->output_gradient_buffer};
        return test_run(device, &r->desc, 2, inputs, 1, outputs);
    }
    test_buffer* inputs[1] = {&r->input_buffer};
    test_buffer* outputs[2] = {&r->output_buffer, r->indices_buffer.block ? &r->indices_buffer : NULL};
    return test_run(device, &r->desc, 1, inputs, c->type == DML_OPERATOR_MAX_POOLING ? 1 : 2, outputs);
}

static ref_pooling reference_problem(const pool_case* c) {
    ref_pooling p = {.spatial_rank = c->rank - 2};
    memcpy(p.input_sizes, c->input_sizes, sizeof p.input_sizes);
    memcpy(p.output_sizes, c->output_sizes, sizeof p.output_sizes);
    for (uint32_t i = 0; i < p.spatial_rank; i++) {
        p.strides[i] = c->strides[i];
        p.window[i] = c->window[i];
        p.start_padding[i] = c->start_padding[i];
        p.dilations[i] = c->type == DML_OPERATOR_MAX_POOLING2 || is_grad(c) ? c->dilations[i] : 1;
    }
    return p;
}

/* The all-padding value of each type (decision MP-2). */
static double lowest_value(DML_TENSOR_DATA_TYPE type) {
    switch (type) {
    case DML_TENSOR_DATA_TYPE_FLOAT32:
    case DML_TENSOR_DATA_TYPE_FLOAT16: return -INFINITY;
    case DML_TENSOR_DATA_TYPE_INT8: return -128;
    case DML_TENSOR_DATA_TYPE_INT16: return -32768;
    case DML_TENSOR_DATA_TYPE_INT32: return -2147483648.0;
    case DML_TENSOR_DATA_TYPE_INT64: return -9223372036854775808.0;
    default: return 0; /* unsigned */
    }
}

static double* load_logical(const test_buffer* b, const test_tensor* t) {
    double* values = malloc(t->element_count * sizeof *values);
    for (uint64_t i = 0; i < t->element_count; i++)
        values[i] = test_load(t->buffer.DataType, b->data, test_tensor_offset(t, i));
    return values;
}

/* Forward check: every output is a bit-exact copy of the input element the
 * reference chose (or the sentinel), indices equal the reference's. */
static void check_forward(const pool_run* r, const pool_case* c, const char* what) {
    double* input = load_logical(&r->input_buffer, &r->input);
    uint64_t count = r->output.element_count;
    double* expected = malloc(count * sizeof *expected);
    uint64_t* indices = malloc(count * sizeof *indices);
    ref_pooling p = reference_problem(c);
    ref_max_pooling(&p, input, lowest_value(c->data_type), expected, indices);
    for (uint64_t o = 0; o < count && !test_case_failed(); o++) {
        uint64_t got = test_load_bits(c->data_type, r->output_buffer.data, test_tensor_offset(&r->output, o));
        if (indices[o] != UINT64_MAX) {
            uint64_t want =
                test_load_bits(c->data_type, r->input_buffer.data, test_tensor_offset(&r->input, indices[o]));
            EXPECT(got == want, "%s: output %llu bits 0x%llx, expected input element %llu (0x%llx)", what,
                   (unsigned long long)o, (unsigned long long)got, (unsigned long long)indices[o],
                   (unsigned long long)want);
        } else {
            double value = test_load(c->data_type, r->output_buffer.data, test_tensor_offset(&r->output, o));
            EXPECT(value == lowest_value(c->data_type), "%s: all-padding output %llu is %g", what,
                   (unsigned long long)o, value);
        }
        if (r->indices_buffer.block) {
            uint64_t got_index =
                test_load_bits(c->index_type, r->indices_buffer.data, test_tensor_offset(&r->indices, o));
            uint64_t want_index = indices[o];
            if (c->index_type == DML_TENSOR_DATA_TYPE_UINT32 && want_index == UINT64_MAX) want_index = UINT32_MAX;
            EXPECT(got_index == want_index, "%s: index %llu is %llu, expected %llu", what, (unsigned long long)o,
                   (unsigned long long)got_index, (unsigned long long)want_index);
        }
    }
    test_buffer_check_guards(&r->output_buffer, "OutputTensor");
    test_buffer_check_unaddressed(&r->output_buffer, &r->output, "OutputTensor");
    if (r->indices_buffer.block) {
        test_buffer_check_guards(&r->indices_buffer, "OutputIndicesTensor");
        test_buffer_check_unaddressed(&r->indices_buffer, &r->indices, "OutputIndicesTensor");
    }
    free(input);
    free(expected);
    free(indices);
}

static void check_grad(const pool_run* r, const pool_case* c, const char* what) {
    double* input = load_logical(&r->input_buffer, &r->input);
    double* input_gradient = load_logical(&r->output_buffer, &r->output);
    double* expected = malloc(r->input.element_count * sizeof *expected);
    ref_pooling p = reference_problem(c);
    ref_max_pooling_grad(&p, input, input_gradient, expected);
    bool half = c->data_type == DML_TENSOR_DATA_TYPE_FLOAT16;
    test_compare(&r->output_gradient_buffer, &r->output_gradient, expected, half ? 2e-3 : 1e-5, half ? 2e-3 : 1e-5,
                 what);
    test_buffer_check_guards(&r->output_gradient_buffer, "OutputGradientTensor");
    test_buffer_check_unaddressed(&r->output_gradient_buffer, &r->output_gradient, "OutputGradientTensor");
    free(input);
    free(input_gradient);
    free(expected);
}

/* ---- Golden vectors (spec examples.md MP-1..MP-8) ---- */

static pool_case golden_case(DML_OPERATOR_TYPE type, DML_TENSOR_DATA_TYPE data_type, const uint32_t in[4],
                             const uint32_t out[4], uint32_t window_h, uint32_t window_w, uint32_t stride,
                             uint32_t padding, uint32_t dilation) {
    pool_case c = {.type = type, .data_type = data_type, .rank = 4};
    memcpy(c.input_sizes, in, 4 * sizeof *in);
    memcpy(c.output_sizes, out, 4 * sizeof *out);
    c.window[0] = window_h;
    c.window[1] = window_w;
    for (int i = 0; i < 2; i++) {
        c.strides[i] = stride;
        c.start_padding[i] = c.end_padding[i] = padding;
        c.dilations[i] = dilation;
    }
    c.index_type = type == DML_OPERATOR_MAX_POOLING || type == DML_OPERATOR_MAX_POOLING_GRAD
                       ? DML_TENSOR_DATA_TYPE_UNKNOWN
                       : DML_TENSOR_DATA_TYPE_UINT32;
    for (int i = 0; i < 3; i++)
        c.layouts[i] = test_random_layout(false);
    return c;
}

/* Runs a golden forward vector in both float types with random layouts. */
static void golden_forward(const char* id, DML_OPERATOR_TYPE type, const uint32_t in[4], const uint32_t out[4],
                           uint32_t window_h, uint32_t window_w, uint32_t stride, uint32_t padding, uint32_t dilation,
                           const double* input, const double* expected_values, const double* expected_indices) {
    DMLDevice* device = test_device(0);
    DML_TENSOR_DATA_TYPE types[2] = {DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_FLOAT16};
    for (int t = 0; t < 2; t++) {
        pool_case c = golden_case(type, types[t], in, out, window_h, window_w, stride, padding, dilation);
        pool_run r;
        pool_run_init(&r, &c);
        test_fill_values(&r.input_buffer, &r.input, input);
        EXPECT_STATUS(pool_dispatch(device, &r, &c), S_OK, NULL);
        test_compare(&r.output_buffer, &r.output, expected_values, 0, 0, id);
        if (r.indices_buffer.block) test_compare(&r.indices_buffer, &r.indices, expected_indices, 0, 0, id);
        test_buffer_check_guards(&r.output_buffer, id);
        pool_run_free(&r);
    }
    dmlReleaseDevice(device);
}

static void golden_grad(const char* id, const uint32_t in[4], const uint32_t out[4], const double* input,
                        const double* input_gradient, const double* expected) {
    DMLDevice* device = test_device(0);
    DML_TENSOR_DATA_TYPE types[2] = {DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_FLOAT16};
    for (int t = 0; t < 2; t++) {
        pool_case c = golden_case(DML_OPERATOR_MAX_POOLING_GRAD, types[t], in, out, 2, 2, 1, 0, 1);
        pool_run r;
        pool_run_init(&r, &c);
        test_fill_values(&r.input_buffer, &r.input, input);
        test_fill_values(&r.output_buffer, &r.output, input_gradient);
        EXPECT_STATUS(pool_dispatch(device, &r, &c), S_OK, NULL);
        test_compare(&r.output_gradient_buffer, &r.output_gradient, expected, 0, 0, id);
        pool_run_free(&r);
    }
    dmlReleaseDevice(device);
}

static const uint32_t in_1133[4] = {1, 1, 3, 3}, out_1122[4] = {1, 1, 2, 2};
static const double seed_input[9] = {1, 2, 3, 2, 4, 2, 5, 6, 7};

TEST_CASE(golden_mp1_seed_forward_every_variant) {
    const double values[4] = {4, 4, 6, 7}, indices[4] = {4, 4, 7, 8};
    golden_forward("MP-1 MAX_POOLING2", DML_OPERATOR_MAX_POOLING2, in_1133, out_1122, 2, 2, 1, 0, 1, seed_input, values,
                   indices);
    golden_forward("MP-1 MAX_POOLING1", DML_OPERATOR_MAX_POOLING1, in_1133, out_1122, 2, 2, 1, 0, 1, seed_input, values,
                   indices);
    golden_forward("MP-1 MAX_POOLING", DML_OPERATOR_MAX_POOLING, in_1133, out_1122, 2, 2, 1, 0, 1, seed_input, values,
                   NULL);
}

TEST_CASE(golden_mp2_seed_gradient) {
    const double dy[4] = {1, 2, 4, 5}, dx[9] = {0, 0, 0, 0, 3, 0, 0, 4, 5};
    golden_grad("MP-2", in_1133, out_1122, seed_input, dy, dx);
}

TEST_CASE(golden_mp3_window_1x3) {
    const uint32_t in[4] = {1, 1, 2, 4}, out[4] = {1, 1, 2, 2};
    const double input[8] = {3, 5, 7, 1, 9, 4, 2, 8}, values[4] = {7, 7, 9, 8}, indices[4] = {2, 2, 4, 7};
    golden_forward("MP-3", DML_OPERATOR_MAX_POOLING1, in, out, 1, 3, 1, 0, 1, input, values, indices);
}

TEST_CASE(golden_mp4_indices_span_the_whole_tensor) {
    const uint32_t in[4] = {1, 2, 3, 3}, out[4] = {1, 2, 2, 2};
    const double input[18] = {1, 2, 3, 2, 4, 2, 5, 6, 7, 9, 1, 1, 1, 1, 1, 1, 1, 8};
    const double values[8] = {4, 4, 6, 7, 9, 1, 1, 8}, indices[8] = {4, 4, 7, 8, 9, 10, 12, 17};
    golden_forward("MP-4", DML_OPERATOR_MAX_POOLING2, in, out, 2, 2, 1, 0, 1, input, values, indices);
}

TEST_CASE(golden_mp5_padding_and_dilation) {
    const uint32_t in[4] = {1, 1, 4, 4};
    double input[16];
    for (int i = 0; i < 16; i++)
        input[i] = i + 1;
    const double values[4] = {6, 8, 14, 16}, indices[4] = {5, 7, 13, 15};
    golden_forward("MP-5", DML_OPERATOR_MAX_POOLING2, in, out_1122, 2, 2, 2, 1, 2, input, values, indices);
}

TEST_CASE(golden_mp6_ties_pick_the_lowest_index) {
    const uint32_t in[4] = {1, 1, 2, 2}, out[4] = {1, 1, 1, 1};
    const double input[4] = {5, 5, 5, 5}, values[1] = {5}, indices[1] = {0};
    golden_forward("MP-6", DML_OPERATOR_MAX_POOLING2, in, out, 2, 2, 1, 0, 1, input, values, indices);
}

TEST_CASE(golden_mp7_ceil_mode_output_size) {
    const double input[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, values[4] = {5, 6, 8, 9}, indices[4] = {4, 5, 7, 8};
    golden_forward("MP-7", DML_OPERATOR_MAX_POOLING2, in_1133, out_1122, 2, 2, 2, 0, 1, input, values, indices);
}

TEST_CASE(golden_mp8_gradient_accumulates_overlaps) {
    const double input[9] = {1, 1, 1, 1, 9, 1, 1, 1, 1}, dy[4] = {0.5, 0.25, 2, 1};
    const double dx[9] = {0, 0, 0, 0, 3.75, 0, 0, 0, 0};
    golden_grad("MP-8", in_1133, out_1122, input, dy, dx);
}

TEST_CASE(all_padding_windows_give_the_sentinel) {
    /* Padding 3 > window 2: the corner windows hold padding only (MP-2, MP-6). */
    const uint32_t in[4] = {1, 1, 2, 2}, out[4] = {1, 1, 4, 4};
    DMLDevice* device = test_device(0);
    pool_case c = golden_case(DML_OPERATOR_MAX_POOLING2, DML_TENSOR_DATA_TYPE_INT16, in, out, 2, 2, 1, 3, 1);
    c.index_type = DML_TENSOR_DATA_TYPE_UINT64;
    pool_run r;
    pool_run_init(&r, &c);
    test_fill_random(&r.input_buffer, &r.input, 0, 0);
    EXPECT_STATUS(pool_dispatch(device, &r, &c), S_OK, NULL);
    EXPECT(test_load_bits(DML_TENSOR_DATA_TYPE_UINT64, r.indices_buffer.data, 0) == UINT64_MAX,
           "all-ones UINT64 index");
    check_forward(&r, &c, "all-padding");
    pool_run_free(&r);
    dmlReleaseDevice(device);
}

TEST_CASE(huge_strides_leave_windows_outside_the_input) {
    /* Stride 2^32 - 1: every window but the first starts past the input. */
    const uint32_t in[4] = {1, 2, 3, 3}, out[4] = {1, 2, 3, 2};
    DMLDevice* device = test_device(0);
    pool_case c = golden_case(DML_OPERATOR_MAX_POOLING2, DML_TENSOR_DATA_TYPE_FLOAT32, in, out, 2, 2, 1, 0, 1);
    c.strides[0] = c.strides[1] = UINT32_MAX;
    pool_run r;
    pool_run_init(&r, &c);
    test_fill_random(&r.input_buffer, &r.input, -5, 5);
    EXPECT_STATUS(pool_dispatch(device, &r, &c), S_OK, NULL);
    check_forward(&r, &c, "huge strides");
    pool_run_free(&r);
    dmlReleaseDevice(device);
}

/* ---- Randomized comparisons with the reference ---- */

static const DML_TENSOR_DATA_TYPE forward_types[] = {DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_FLOAT16,
                                                     DML_TENSOR_DATA_TYPE_INT64,   DML_TENSOR_DATA_TYPE_INT32,
                                                     DML_TENSOR_DATA_TYPE_INT16,   DML_TENSOR_DATA_TYPE_INT8,
                                                     DML_TENSOR_DATA_TYPE_UINT64,  DML_TENSOR_DATA_TYPE_UINT32,
                                                     DML_TENSOR_DATA_TYPE_UINT16,  DML_TENSOR_DATA_TYPE_UINT8};

/* A random problem: windows, strides, dilations and paddings of every kind
 * (padding beyond the window included), and output sizes from the floor
 * formula, the ceil formula, or anything >= 1 (decision MP-1). */
static pool_case random_case(DML_OPERATOR_TYPE type, DML_TENSOR_DATA_TYPE data_type) {
    pool_case c = {.type = type, .data_type = data_type, .rank = test_rand_range(4, 5)};
    c.input_sizes[0] = test_rand_range(1, 3);
    c.input_sizes[1] = test_rand_range(1, 4);
    c.output_sizes[0] = c.input_sizes[0];
    c.output_sizes[1] = c.input_sizes[1];
    bool dilated = type == DML_OPERATOR_MAX_POOLING2 || type == DML_OPERATOR_MAX_POOLING_GRAD;
    for (uint32_t i = 0; i < c.rank - 2; i++) {
        uint32_t in = c.input_sizes[2 + i] = test_rand_range(1, c.rank == 5 ? 6 : 11);
        c.window[i] = test_rand_range(1, 4);
        c.strides[i] = test_rand_range(1, 3);
        c.dilations[i] = dilated ? test_rand_range(1, 3) : 1;
        c.start_padding[i] = test_rand_range(0, c.window[i] + 1);
        c.end_padding[i] = test_rand_range(0, c.window[i] + 1);
        uint32_t dilated_window = (c.window[i] - 1) * c.dilations[i] + 1;
        uint32_t padded = in + c.start_padding[i] + c.end_padding[i];
        uint32_t floor_size = padded >= dilated_window ? (padded - dilated_window) / c.strides[i] + 1 : 1;
        uint32_t ceil_size =
            padded >= dilated_window ? (padded - dilated_window + c.strides[i] - 1) / c.strides[i] + 1 : 1;
        uint32_t choice = test_rand_range(0, 3);
        c.output_sizes[2 + i] = choice == 0 ? ceil_size : choice == 1 ? test_rand_range(1, floor_size + 2) : floor_size;
    }
    c.index_type = DML_TENSOR_DATA_TYPE_UNKNOWN;
    if ((type == DML_OPERATOR_MAX_POOLING1 || type == DML_OPERATOR_MAX_POOLING2) && test_rand_range(0, 3) > 0)
        c.index_type = test_rand_bool() ? DML_TENSOR_DATA_TYPE_UINT32 : DML_TENSOR_DATA_TYPE_UINT64;
    c.layouts[0] = test_random_layout(true);
    c.layouts[1] = test_random_layout(type == DML_OPERATOR_MAX_POOLING_GRAD); /* InputGradient may broadcast */
    c.layouts[2] = test_random_layout(false);
    return c;
}

/* Inputs with many ties (few distinct values) half of the time, and for
 * floats some NaN and infinities, to exercise the tie and NaN rules. */
static void fill_pooling_input(pool_run* r, const pool_case* c) {
    bool few_values = test_rand_bool();
    if (!few_values && !test_type_is_float(c->data_type)) { /* integers over the type's whole range */
        test_fill_random(&r->input_buffer, &r->input, 0, 0);
        return;
    }
    bool specials = test_type_is_float(c->data_type) && test_rand_range(0, 3) == 0;
    /* Sometimes only zeros and NaN: windows whose maximum is a zero or a NaN, whose bits must be the first's */
    bool zeros_and_nan = few_values && specials && test_rand_bool();
    for (uint64_t i = 0; i < r->input.element_count; i++) {
        double v = few_values && !zeros_and_nan ? (double)test_rand_range(0, 3) : test_rand_double(-100, 100);
        if (zeros_and_nan) v = 0;
        if (v == 0 && test_rand_bool()) v = -0.0; /* ties of -0 and +0: the first one wins, sign included */
        uint32_t pick = zeros_and_nan ? test_rand_range(0, 3) : specials ? test_rand_range(0, 19) : 99;
        if (pick == 0) v = NAN;
        if (pick == 1) v = INFINITY;
        if (pick == 2) v = -INFINITY;
        uint64_t at = test_tensor_offset(&r->input, i);
        test_store(c->data_type, r->input_buffer.data, at, v);
        if (pick == 0 && c->data_type == DML_TENSOR_DATA_TYPE_FLOAT16) /* NaNs of either sign, any payload */
            ((uint16_t*)r->input_buffer.data)[at] =
                (uint16_t)(test_rand_range(0, 1) << 15 | test_rand_range(0x7C01, 0x7FFF));
    }
}

static const char* case_name(const pool_case* c) {
    static char name[160];
    snprintf(name, sizeof name, "%s %s rank %u layouts %s/%s/%s", dmlOperatorTypeName(c->type),
             dmlDataTypeName(c->data_type), c->rank, test_layout_name(c->layouts[0]), test_layout_name(c->layouts[1]),
             test_layout_name(c->layouts[2]));
    return name;
}

TEST_CASE(random_forward_matches_reference) {
    DMLDevice* devices[3] = {test_device(1), test_device(2), test_device(0)};
    const DML_OPERATOR_TYPE types[3] = {DML_OPERATOR_MAX_POOLING, DML_OPERATOR_MAX_POOLING1, DML_OPERATOR_MAX_POOLING2};
    for (int i = 0; i < 300 && !test_case_failed(); i++) {
        pool_case c = random_case(types[test_rand_range(0, 2)], forward_types[test_rand_range(0, 9)]);
        pool_run r;
        pool_run_init(&r, &c);
        fill_pooling_input(&r, &c);
        EXPECT_STATUS(pool_dispatch(devices[test_rand_range(0, 2)], &r, &c), S_OK, NULL);
        check_forward(&r, &c, case_name(&c));
        pool_run_free(&r);
    }
    for (int d = 0; d < 3; d++)
        dmlReleaseDevice(devices[d]);
}

TEST_CASE(random_gradient_matches_reference) {
    DMLDevice* devices[3] = {test_device(1), test_device(2), test_device(0)};
    for (int i = 0; i < 200 && !test_case_failed(); i++) {
        DML_TENSOR_DATA_TYPE type = test_rand_bool() ? DML_TENSOR_DATA_TYPE_FLOAT32 : DML_TENSOR_DATA_TYPE_FLOAT16;
        pool_case c = random_case(DML_OPERATOR_MAX_POOLING_GRAD, type);
        pool_run r;
        pool_run_init(&r, &c);
        fill_pooling_input(&r, &c);
        /* Gradients that are multiples of 1/64 are exact in FLOAT16 and sum exactly in FLOAT32. */
        for (uint64_t o = 0; o < r.output.element_count; o++)
            test_store(type, r.output_buffer.data, test_tensor_offset(&r.output, o),
                       (double)test_rand_range(0, 256) / 64.0 - 2.0);
        EXPECT_STATUS(pool_dispatch(devices[test_rand_range(0, 2)], &r, &c), S_OK, NULL);
        check_grad(&r, &c, case_name(&c));
        pool_run_free(&r);
    }
    for (int d = 0; d < 3; d++)
        dmlReleaseDevice(devices[d]);
}

TEST_CASE(gradient_is_deterministic_across_threads_and_runs) {
    /* Overlapping windows (stride 1, window 3) over many planes and few planes,
     * with non-representable gradient values so that order would matter. */
    DMLDevice* devices[3] = {test_device(1), test_device(2), test_device(0)};
    const uint32_t shapes[2][4] = {{2, 16, 17, 19}, {1, 1, 64, 61}};
    for (int s = 0; s < 2; s++) {
        pool_case c = {.type = DML_OPERATOR_MAX_POOLING_GRAD, .data_type = DML_TENSOR_DATA_TYPE_FLOAT32, .rank = 4};
        memcpy(c.input_sizes, shapes[s], sizeof shapes[s]);
        memcpy(c.output_sizes, shapes[s], sizeof shapes[s]);
        c.output_sizes[2] -= 2;
        c.output_sizes[3] -= 2;
        for (int i = 0; i < 2; i++) {
            c.window[i] = 3;
            c.strides[i] = c.dilations[i] = 1;
        }
        pool_run r;
        pool_run_init(&r, &c);
        for (uint64_t i = 0; i < r.input.element_count; i++) /* few values: many shared maxima */
            test_store(c.data_type, r.input_buffer.data, i, (double)test_rand_range(0, 2));
        test_fill_random(&r.output_buffer, &r.output, -1, 1);
        uint64_t bytes = r.output_gradient_buffer.size;
        uint8_t* first = NULL;
        for (int run = 0; run < 6; run++) {
            test_buffer_poison(&r.output_gradient_buffer);
            EXPECT_STATUS(pool_dispatch(devices[run % 3], &r, &c), S_OK, NULL);
            if (first == NULL) {
                first = malloc(bytes);
                memcpy(first, r.output_gradient_buffer.data, bytes);
                check_grad(&r, &c, "determinism reference run");
            } else {
                EXPECT(memcmp(first, r.output_gradient_buffer.data, bytes) == 0,
                       "shape %d run %d (threads %s) differs from the first run", s, run,
                       run % 3 == 0   ? "1"
                       : run % 3 == 1 ? "2"
                                      : "all");
            }
        }
        free(first);
        pool_run_free(&r);
    }
    for (int d = 0; d < 3; d++)
        dmlReleaseDevice(devices[d]);
}

TEST_CASE(forward_is_identical_for_every_thread_count) {
    /* Large enough that the forward pass fans out over every thread. */
    DMLDevice* devices[3] = {test_device(1), test_device(2), test_device(0)};
    const uint32_t in[4] = {4, 16, 64, 64}, out[4] = {4, 16, 32, 32};
    pool_case c = golden_case(DML_OPERATOR_MAX_POOLING2, DML_TENSOR_DATA_TYPE_FLOAT16, in, out, 3, 3, 2, 1, 1);
    c.index_type = DML_TENSOR_DATA_TYPE_UINT64;
    pool_run r;
    pool_run_init(&r, &c);
    fill_pooling_input(&r, &c);
    uint8_t* first[2] = {NULL, NULL};
    test_buffer* outputs[2] = {&r.output_buffer, &r.indices_buffer};
    for (int run = 0; run < 3; run++) {
        test_buffer_poison(&r.output_buffer);
        test_buffer_poison(&r.indices_buffer);
        EXPECT_STATUS(pool_dispatch(devices[run], &r, &c), S_OK, NULL);
        for (int o = 0; o < 2; o++) {
            if (run == 0) {
                first[o] = malloc(outputs[o]->size);
                memcpy(first[o], outputs[o]->data, outputs[o]->size);
            } else {
                EXPECT(memcmp(first[o], outputs[o]->data, outputs[o]->size) == 0,
                       "output %d with device %d differs from the 1-thread run", o, run);
            }
        }
    }
    check_forward(&r, &c, "thread-count determinism");
    free(first[0]);
    free(first[1]);
    pool_run_free(&r);
    for (int d = 0; d < 3; d++)
        dmlReleaseDevice(devices[d]);
}

/* ---- Fast paths: bit-identical to the generic kernel ---- */

/* Rewrites t's strides to channels-last (NHWC, NDHWC: C innermost) over the
 * same logical sizes; t must have been built with TEST_LAYOUT_EXPLICIT. */
static void make_channels_last(test_tensor* t) {
    uint32_t rank = t->buffer.DimensionCount;
    uint32_t stride = 1;
    t->strides[1] = stride;
    stride *= t->sizes[1];
    for (uint32_t i = rank; i-- > 2;) {
        t->strides[i] = stride;
        stride *= t->sizes[i];
    }
    t->strides[0] = stride;
    t->buffer.TotalTensorSizeInBytes = DMLCalcBufferTensorSize(t->buffer.DataType, rank, t->sizes, t->strides);
}

/* A problem in the layout classes the fast paths take (rows contiguous
 * along W, or channels-last), wide enough for whole vectors and tails
 * (W up to 45, C up to 21), W strides 1 and 2, padding and dilation. */
static pool_case fast_path_case(DML_OPERATOR_TYPE type, DML_TENSOR_DATA_TYPE data_type, bool channels_last) {
    pool_case c = {.type = type, .data_type = data_type, .rank = test_rand_range(4, 5)};
    c.input_sizes[0] = c.output_sizes[0] = test_rand_range(1, 2);
    c.input_sizes[1] = c.output_sizes[1] = channels_last ? test_rand_range(1, 21) : test_rand_range(1, 3);
    bool dilated = type == DML_OPERATOR_MAX_POOLING2 || type == DML_OPERATOR_MAX_POOLING_GRAD;
    for (uint32_t i = 0; i < c.rank - 2; i++) {
        bool w = i == c.rank - 3;
        uint32_t in = c.input_sizes[2 + i] = w ? test_rand_range(1, 45) : test_rand_range(1, c.rank == 5 ? 4 : 7);
        c.window[i] = test_rand_range(1, 4);
        c.strides[i] = w ? test_rand_range(1, 2) : test_rand_range(1, 3);
        c.dilations[i] = dilated ? test_rand_range(1, 2) : 1;
        c.start_padding[i] = test_rand_range(0, c.window[i] - 1);
        c.end_padding[i] = test_rand_range(0, c.window[i]);
        uint32_t dilated_window = (c.window[i] - 1) * c.dilations[i] + 1;
        uint32_t padded = in + c.start_padding[i] + c.end_padding[i];
        c.output_sizes[2 + i] =
            padded >= dilated_window ? (padded - dilated_window) / c.strides[i] + 1 + test_rand_range(0, 1) : 1;
    }
    c.index_type = DML_TENSOR_DATA_TYPE_UNKNOWN;
    if (type == DML_OPERATOR_MAX_POOLING1 || type == DML_OPERATOR_MAX_POOLING2)
        c.index_type = test_rand_bool() ? DML_TENSOR_DATA_TYPE_UINT32 : DML_TENSOR_DATA_TYPE_UINT64;
    for (int i = 0; i < 3; i++) {
        static const test_layout contiguous_w[3] = {TEST_LAYOUT_PACKED, TEST_LAYOUT_EXPLICIT, TEST_LAYOUT_PADDED};
        c.layouts[i] = channels_last ? TEST_LAYOUT_EXPLICIT : contiguous_w[test_rand_range(0, 2)];
    }
    return c;
}

static void pool_run_channels_last(pool_run* r, const pool_case* c) {
    make_channels_last(&r->input);
    make_channels_last(&r->output);
    if (r->indices_buffer.block) make_channels_last(&r->indices);
    if (r->output_gradient_buffer.block) make_channels_last(&r->output_gradient);
    test_buffer_free(&r->input_buffer);
    test_buffer_free(&r->output_buffer);
    test_buffer_alloc(&r->input_buffer, r->input.buffer.TotalTensorSizeInBytes);
    test_buffer_alloc(&r->output_buffer, r->output.buffer.TotalTensorSizeInBytes);
    if (r->indices_buffer.block) {
        test_buffer_free(&r->indices_buffer);
        test_buffer_alloc(&r->indices_buffer, r->indices.buffer.TotalTensorSizeInBytes);
    }
    if (r->output_gradient_buffer.block) {
        test_buffer_free(&r->output_gradient_buffer);
        test_buffer_alloc(&r->output_gradient_buffer, r->output_gradient.buffer.TotalTensorSizeInBytes);
    }
    (void)c;
}

/* Copies every output buffer's payload (to compare two runs bit for bit). */
static uint8_t* save_outputs(const pool_run* r, const pool_case* c, uint64_t* bytes) {
    const test_buffer* first = is_grad(c) ? &r->output_gradient_buffer : &r->output_buffer;
    uint64_t extra = !is_grad(c) && r->indices_buffer.block ? r->indices_buffer.size : 0;
    *bytes = first->size + extra;
    uint8_t* copy = malloc(*bytes);
    memcpy(copy, first->data, first->size);
    if (extra) memcpy(copy + first->size, r->indices_buffer.data, extra);
    return copy;
}

/* Every operator on problems of the fast paths' layout classes: the device
 * at this run's ISA level (DML_CPU_ISA) and a generic-only device give the
 * same bits (values, indices, gradients: the determinism contract), and both
 * match the float64 reference. */
/* The generic kernel's device: the reference of the fast paths, bit for bit. */
static DMLDevice* generic_device(void) {
    DML_DEVICE_DESC generic_desc = {.Backend = DML_BACKEND_CPU, .MaxCpuIsa = DML_CPU_ISA_GENERIC};
    DMLDevice* generic = NULL;
    if (test_backend_is_cuda() || FAILED(dmlCreateDevice(&generic_desc, &generic))) generic = test_device(0);
    return generic;
}

/* Runs case c on `device` (checked against the float64 reference) and on the
 * generic kernel, and expects the same bytes in every output. Gradients:
 * `gradient_specials` puts NaN and infinities among InputGradient's values. */
static void expect_generic_bits(DMLDevice* device, DMLDevice* generic, const pool_case* c, bool channels_last,
                                bool gradient_specials) {
    pool_run r;
    pool_run_init(&r, c);
    if (channels_last) pool_run_channels_last(&r, c);
    fill_pooling_input(&r, c);
    if (is_grad(c)) { /* values whose sums round: the order of accumulation shows in the bits */
        test_fill_random(&r.output_buffer, &r.output, -1, 1);
        if (test_rand_bool()) /* and -0, whose sum with the +0 a sum starts from is +0 */
            for (uint64_t i = 0; i < r.output.element_count; i += 3)
                test_store(c->data_type, r.output_buffer.data, test_tensor_offset(&r.output, i), -0.0);
        /* Infinities of one sign per case: every NaN of a sum is then the data's NaN. Two different
         * NaNs (+inf + -inf is x86's default NaN) would meet in sums, where which one is kept
         * follows the operand order each compiler picks for the generic kernel's `acc += dy`
         * (gcc and clang differ), which no other implementation can follow. */
        double infinity = test_rand_bool() ? INFINITY : -INFINITY;
        double specials[2] = {NAN, infinity};
        if (gradient_specials)
            for (uint64_t i = test_rand_range(0, 6); i < r.output.element_count; i += test_rand_range(1, 13))
                test_store(c->data_type, r.output_buffer.data, test_tensor_offset(&r.output, i),
                           specials[test_rand_range(0, 1)]);
    }
    char what[200];
    snprintf(what, sizeof what, "%s%s", case_name(c), channels_last ? " (channels-last)" : "");
    EXPECT_STATUS(pool_dispatch(device, &r, c), S_OK, NULL);
    if (is_grad(c)) {
        check_grad(&r, c, what);
    } else {
        check_forward(&r, c, what);
    }
    uint64_t bytes;
    uint8_t* fast = save_outputs(&r, c, &bytes);
    EXPECT_STATUS(pool_dispatch(generic, &r, c), S_OK, NULL);
    uint8_t* reference = save_outputs(&r, c, &bytes);
    EXPECT(memcmp(fast, reference, bytes) == 0, "%s: outputs differ from the generic kernel's", what);
    free(fast);
    free(reference);
    pool_run_free(&r);
}

TEST_CASE(fast_paths_match_generic_bit_for_bit) {
    DMLDevice* devices[2] = {test_device(0), test_device(1)};
    DMLDevice* generic = generic_device();
    const DML_OPERATOR_TYPE types[4] = {DML_OPERATOR_MAX_POOLING, DML_OPERATOR_MAX_POOLING1, DML_OPERATOR_MAX_POOLING2,
                                        DML_OPERATOR_MAX_POOLING_GRAD};
    for (int i = 0; i < 400 && !test_case_failed(); i++) {
        DML_TENSOR_DATA_TYPE type = test_rand_bool() ? DML_TENSOR_DATA_TYPE_FLOAT32 : DML_TENSOR_DATA_TYPE_FLOAT16;
        bool channels_last = test_rand_bool();
        pool_case c = fast_path_case(types[i % 4], type, channels_last);
        expect_generic_bits(devices[i % 2], generic, &c, channels_last, false);
    }
    dmlReleaseDevice(devices[0]);
    dmlReleaseDevice(devices[1]);
    dmlReleaseDevice(generic);
}

/* An undilated window along spatial dimension d, with random paddings
 * smaller than it. */
static void set_window(pool_case* c, uint32_t d, uint32_t window, uint32_t stride) {
    c->window[d] = window;
    c->strides[d] = stride;
    c->dilations[d] = 1;
    c->start_padding[d] = test_rand_range(0, window - 1);
    c->end_padding[d] = test_rand_range(0, window - 1);
}

/* The output sizes of c's input, windows and paddings (spec §3). */
static void fit_output_sizes(pool_case* c) {
    for (uint32_t d = 0; d < c->rank - 2; d++) {
        uint32_t padded = c->input_sizes[2 + d] + c->start_padding[d] + c->end_padding[d];
        uint32_t dilated_window = (c->window[d] - 1) * c->dilations[d] + 1;
        c->output_sizes[2 + d] = padded >= dilated_window ? (padded - dilated_window) / c->strides[d] + 1 : 1;
    }
}

/* The NCHW whole-row path (W stride 2, windows of 2 or 3 columns): rows of
 * one to five interior blocks (the last overlapping), padding 0 to 2 on
 * either side (padding 1 with 3 columns: column 0 in the first block), H
 * strides 1 to 3 (stride 2 with 3 rows: consecutive output rows share an
 * input row), odd and even heights, 5-D windows, one and two threads. */
TEST_CASE(whole_row_path_matches_generic_bit_for_bit) {
    DMLDevice* devices[2] = {test_device(1), test_device(2)};
    DMLDevice* generic = generic_device();
    const DML_OPERATOR_TYPE types[3] = {DML_OPERATOR_MAX_POOLING1, DML_OPERATOR_MAX_POOLING2,
                                        DML_OPERATOR_MAX_POOLING_GRAD};
    for (int i = 0; i < 240 && !test_case_failed(); i++) {
        DML_TENSOR_DATA_TYPE type = i % 2 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        pool_case c = fast_path_case(types[i % 3], type, false);
        if (c.type == DML_OPERATOR_MAX_POOLING2 && test_rand_bool()) c.index_type = DML_TENSOR_DATA_TYPE_UNKNOWN;
        uint32_t w = c.rank - 3; /* the W dimension among the spatial ones */
        set_window(&c, w, test_rand_range(2, 3), 2);
        c.input_sizes[2 + w] = test_rand_range(16, 90);
        if (c.rank == 4) { /* taller images, H stride 1 to 3 */
            c.input_sizes[2] = test_rand_range(1, 12);
            set_window(&c, 0, test_rand_range(1, 3), test_rand_range(1, 3));
        }
        fit_output_sizes(&c);
        expect_generic_bits(devices[i % 2], generic, &c, false, false);
    }
    dmlReleaseDevice(devices[0]);
    dmlReleaseDevice(devices[1]);
    dmlReleaseDevice(generic);
}

/* Cases of the AVX-512 NCHW row blocks at W stride `stride_w` against the
 * generic kernel, bit for bit: every operator (MAX_POOLING2 with and
 * without indices), windows of 2 or 3 columns, padding 0 to 2 on either
 * side, rows of 1 to 82 input columns, H windows of 1 to 3 rows at H
 * strides 1 to 3, windows past the row's end, forward rows of padding only,
 * NaN and infinities among half the gradients, one to three threads. */
static void row_blocks_match_generic(uint32_t stride_w) {
    DMLDevice* devices[3] = {test_device(1), test_device(2), test_device(3)};
    DMLDevice* generic = generic_device();
    const DML_OPERATOR_TYPE types[4] = {DML_OPERATOR_MAX_POOLING, DML_OPERATOR_MAX_POOLING1, DML_OPERATOR_MAX_POOLING2,
                                        DML_OPERATOR_MAX_POOLING_GRAD};
    for (int i = 0; i < 320 && !test_case_failed(); i++) {
        DML_TENSOR_DATA_TYPE type = i / 4 % 2 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        pool_case c = fast_path_case(types[i % 4], type, false);
        if (c.type == DML_OPERATOR_MAX_POOLING2 && test_rand_bool()) c.index_type = DML_TENSOR_DATA_TYPE_UNKNOWN;
        uint32_t w = c.rank - 3, h = w - 1;
        set_window(&c, w, test_rand_range(2, 3), stride_w);
        c.start_padding[w] = test_rand_range(0, 2);
        c.end_padding[w] = test_rand_range(0, 2);
        bool narrow = stride_w == 1 && test_rand_range(0, 3) == 0; /* 14 columns: one block, both ends padding */
        c.input_sizes[2 + w] = narrow ? 14 : test_rand_range(1, 82);
        /* Stride 2 gradients: planes tall enough for the band of narrow rows too (a band row takes 48 floats). */
        c.input_sizes[2 + h] = test_rand_range(1, stride_w == 1 ? 16 : is_grad(&c) ? 64 : 9);
        set_window(&c, h, test_rand_range(1, 3), test_rand_range(1, 3));
        fit_output_sizes(&c);
        if (c.output_sizes[2 + w] > 1 && test_rand_bool()) c.output_sizes[2 + w]++; /* a window past the end */
        if (!is_grad(&c) && test_rand_range(0, 3) == 0) c.output_sizes[2 + h] += 3; /* rows of padding only */
        /* Stride 1, zero strides: rows at one address with different positions */
        if (stride_w == 1 && test_rand_range(0, 3) == 0) c.layouts[0] = TEST_LAYOUT_BROADCAST;
        expect_generic_bits(devices[i % 3], generic, &c, false, is_grad(&c) && test_rand_bool());
    }
    for (int i = 0; i < 3; i++)
        dmlReleaseDevice(devices[i]);
    dmlReleaseDevice(generic);
}

/* W stride 2: rows of 1 to 40 output columns, the AVX-512 paths' blocks of
 * 16 columns (a row narrower than a block, whole blocks, the last block
 * overlapping the one before) with padding 0 to 2 on either side (the first
 * block at column -1, or further out), odd and even widths, 4-D and 5-D;
 * the gradient's band on 2-D planes, one to six planes. */
TEST_CASE(stride2_row_blocks_match_generic_bit_for_bit) { row_blocks_match_generic(2); }

/* W stride 1 (every block checked at the row's ends), forward and gradient:
 * narrow planes such as 14 columns with padding 1, one to six blocks, 4-D
 * and 5-D, FLOAT32 and FLOAT16, with and without indices, inputs with zero
 * strides. */
TEST_CASE(stride1_row_blocks_match_generic_bit_for_bit) { row_blocks_match_generic(1); }

/* FLOAT16 rows of two or three columns, 3x3/2 windows from column -1
 * (padding 1), several window rows: the AVX-512 path's keys give back the
 * bits of zeros and NaN from their argmax, whose offset from the window's
 * first element may also be that of the next row's column -1 (no element). */
TEST_CASE(narrow_float16_rows_match_generic_bit_for_bit) {
    DMLDevice* devices[2] = {test_device(1), test_device(2)};
    DMLDevice* generic = generic_device();
    for (int i = 0; i < 600 && !test_case_failed(); i++) {
        pool_case c = fast_path_case(i % 2 ? DML_OPERATOR_MAX_POOLING1 : DML_OPERATOR_MAX_POOLING_GRAD,
                                     DML_TENSOR_DATA_TYPE_FLOAT16, false);
        uint32_t w = c.rank - 3, h = w - 1;
        if (c.rank == 5) { /* depth 1: a 2-D plane for the gradient */
            c.input_sizes[2] = 1;
            set_window(&c, 0, 1, 1);
        }
        set_window(&c, w, 3, 2);
        c.start_padding[w] = 1;
        c.end_padding[w] = 0;
        c.input_sizes[2 + w] = test_rand_range(2, 3);
        c.input_sizes[2 + h] = test_rand_range(2, 12);
        set_window(&c, h, test_rand_range(2, 3), test_rand_range(1, 2));
        fit_output_sizes(&c);
        expect_generic_bits(devices[i % 2], generic, &c, false, false);
    }
    dmlReleaseDevice(devices[0]);
    dmlReleaseDevice(devices[1]);
    dmlReleaseDevice(generic);
}

/* Gradients of overlapping windows on 2-D planes whose rows take the
 * whole-row path (W stride 2, two or three columns): the band of
 * accumulator rows. Heights where the band's rows wrap around several
 * times and where the last window ends before the last row, H windows of
 * one to four rows with dilation 1 or 2, H strides 1 to 3, padding on every
 * side, 5-D tensors of depth 1, NaN and infinities among the gradients, one
 * to three threads. Few distinct input values make ties, so that windows
 * sharing a column often share their argmax. */
TEST_CASE(overlapping_window_gradients_match_generic_bit_for_bit) {
    DMLDevice* devices[3] = {test_device(1), test_device(2), test_device(3)};
    DMLDevice* generic = generic_device();
    for (int i = 0; i < 240 && !test_case_failed(); i++) {
        DML_TENSOR_DATA_TYPE type = i % 2 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        pool_case c = fast_path_case(DML_OPERATOR_MAX_POOLING_GRAD, type, false);
        uint32_t w = c.rank - 3, h = w - 1;
        if (c.rank == 5) { /* depth 1: a 2-D plane */
            c.input_sizes[2] = 1;
            set_window(&c, 0, 1, test_rand_range(1, 2));
        }
        set_window(&c, w, test_rand_range(2, 3), 2);
        c.input_sizes[2 + w] = test_rand_range(16, 90);
        c.input_sizes[2 + h] = test_rand_range(1, 20);
        set_window(&c, h, test_rand_range(1, 4), test_rand_range(1, 3));
        c.dilations[h] = test_rand_range(1, 2);
        fit_output_sizes(&c);
        expect_generic_bits(devices[i % 3], generic, &c, false, test_rand_bool());
    }
    for (int i = 0; i < 3; i++)
        dmlReleaseDevice(devices[i]);
    dmlReleaseDevice(generic);
}

/* Outputs of 8 MiB and more, which the NCHW fast paths stream past the
 * caches (values and UINT32 indices of rows of whole blocks, FLOAT32
 * gradients): 2x2/2 forward (rows of 128 columns, and of 56, whose last
 * AVX-512 block overlaps the one before) and gradient (the band), 3x3/2 p1
 * gradient on rows of 256 and of 56 columns (224 bytes: every other row
 * starts half a line in), packed or with padded pitches (rows that start
 * unaligned), one and two threads. */
TEST_CASE(large_outputs_match_generic_bit_for_bit) {
    DMLDevice* devices[2] = {test_device(1), test_device(2)};
    DMLDevice* generic = generic_device();
    static const struct {
        bool forward;
        uint32_t channels, height, width, window, padding;
    } shapes[] = {
        {true, 64, 256, 256, 2, 0},  {false, 64, 256, 256, 2, 0}, {false, 64, 256, 256, 3, 1},
        {true, 160, 256, 112, 2, 0}, {false, 704, 56, 56, 3, 1}, /* the benchmark's rows: 224 bytes */
    };
    for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]) && !test_case_failed(); i++) {
        bool forward = shapes[i].forward;
        pool_case c = {.type = forward ? DML_OPERATOR_MAX_POOLING1 : DML_OPERATOR_MAX_POOLING_GRAD,
                       .data_type = DML_TENSOR_DATA_TYPE_FLOAT32,
                       .index_type = forward ? DML_TENSOR_DATA_TYPE_UINT32 : DML_TENSOR_DATA_TYPE_UNKNOWN,
                       .rank = 4,
                       .input_sizes = {1, shapes[i].channels, shapes[i].height, shapes[i].width}};
        c.output_sizes[0] = 1;
        c.output_sizes[1] = c.input_sizes[1];
        uint32_t window = shapes[i].window, padding = shapes[i].padding;
        for (uint32_t d = 0; d < 2; d++) {
            c.window[d] = window;
            c.strides[d] = 2;
            c.dilations[d] = 1;
            c.start_padding[d] = c.end_padding[d] = padding;
        }
        for (int t = 0; t < 3; t++)
            c.layouts[t] = test_rand_bool() ? TEST_LAYOUT_PACKED : TEST_LAYOUT_PADDED;
        fit_output_sizes(&c);
        expect_generic_bits(devices[i % 2], generic, &c, false, false);
    }
    dmlReleaseDevice(devices[0]);
    dmlReleaseDevice(devices[1]);
    dmlReleaseDevice(generic);
}

/* Gradients of disjoint windows (every stride at least its window,
 * undilated: each input element in at most one window), NCHW and
 * channels-last: the paths that write each element once. Odd sizes, larger
 * strides and padding leave elements in no window. */
TEST_CASE(disjoint_window_gradients_match_generic_bit_for_bit) {
    DMLDevice* devices[2] = {test_device(1), test_device(2)};
    DMLDevice* generic = generic_device();
    for (int i = 0; i < 160 && !test_case_failed(); i++) {
        DML_TENSOR_DATA_TYPE type = i % 2 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        bool channels_last = i % 4 >= 2;
        pool_case c = fast_path_case(DML_OPERATOR_MAX_POOLING_GRAD, type, channels_last);
        uint32_t w = c.rank - 3;
        if (!channels_last && test_rand_bool()) c.input_sizes[2 + w] = test_rand_range(16, 70); /* whole rows */
        for (uint32_t d = 0; d < c.rank - 2; d++) {
            uint32_t window = d == w && !channels_last ? 2 : test_rand_range(1, 3);
            set_window(&c, d, window, window + (d == w ? 0 : test_rand_range(0, 1)));
        }
        fit_output_sizes(&c);
        expect_generic_bits(devices[i % 2], generic, &c, channels_last, false);
    }
    dmlReleaseDevice(devices[0]);
    dmlReleaseDevice(devices[1]);
    dmlReleaseDevice(generic);
}

/* The channels-last paths: channel counts around their chunks of four
 * vectors (1 to 80: tails of 1 to 7 channels, whole chunks, single vectors
 * after them), odd and even widths, padding on every side, half of the
 * cases with 3x3/2 windows (the benchmarks' shape), 4-D and 5-D, FLOAT32
 * and FLOAT16, every operator, one and two threads. */
TEST_CASE(channels_last_paths_match_generic_bit_for_bit) {
    DMLDevice* devices[2] = {test_device(1), test_device(2)};
    DMLDevice* generic = generic_device();
    const DML_OPERATOR_TYPE types[4] = {DML_OPERATOR_MAX_POOLING, DML_OPERATOR_MAX_POOLING1, DML_OPERATOR_MAX_POOLING2,
                                        DML_OPERATOR_MAX_POOLING_GRAD};
    static const uint32_t channels[] = {1, 7, 8, 9, 24, 31, 32, 33, 40, 63, 64, 67, 80};
    for (int i = 0; i < 200 && !test_case_failed(); i++) {
        DML_TENSOR_DATA_TYPE type = i % 2 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        pool_case c = fast_path_case(types[i % 4], type, true);
        c.input_sizes[1] = c.output_sizes[1] = channels[test_rand_range(0, sizeof channels / sizeof *channels - 1)];
        if (test_rand_bool()) {
            for (uint32_t d = 0; d < c.rank - 2; d++)
                set_window(&c, d, 3, 2);
            fit_output_sizes(&c);
        }
        expect_generic_bits(devices[i % 2], generic, &c, true, false);
    }
    dmlReleaseDevice(devices[0]);
    dmlReleaseDevice(devices[1]);
    dmlReleaseDevice(generic);
}

/* The channels-last paths at every channel count from 1 to 33 (tails of
 * every width for eight- and sixteen-lane vectors) and around their chunks
 * (16, 32 and 64 channels), odd sizes, 4-D and 5-D, a third of the cases
 * with disjoint windows (the write-once gradients, max_pooling_grad/
 * avx512/nhwc), some with NaN and infinities in InputGradient. */
TEST_CASE(channels_last_channel_tails_match_generic_bit_for_bit) {
    DMLDevice* devices[2] = {test_device(1), test_device(2)};
    DMLDevice* generic = generic_device();
    const DML_OPERATOR_TYPE types[4] = {DML_OPERATOR_MAX_POOLING, DML_OPERATOR_MAX_POOLING1, DML_OPERATOR_MAX_POOLING2,
                                        DML_OPERATOR_MAX_POOLING_GRAD};
    static const uint32_t chunk_edges[] = {15, 16, 17, 47, 48, 49, 63, 64, 65, 79, 96, 127, 128, 129};
    for (int i = 0; i < 264 && !test_case_failed(); i++) {
        DML_TENSOR_DATA_TYPE type = i % 2 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        pool_case c = fast_path_case(types[i / 2 % 4], type, true);
        uint32_t channels = i < 132 ? (uint32_t)(i % 33 + 1)
                                    : chunk_edges[test_rand_range(0, sizeof chunk_edges / sizeof *chunk_edges - 1)];
        c.input_sizes[1] = c.output_sizes[1] = channels;
        if (i % 3 == 0) {
            for (uint32_t d = 0; d < c.rank - 2; d++) {
                uint32_t window = test_rand_range(1, 3);
                set_window(&c, d, window, window + test_rand_range(0, 1));
            }
            fit_output_sizes(&c);
        }
        expect_generic_bits(devices[i % 2], generic, &c, true, i % 5 == 0);
    }
    dmlReleaseDevice(devices[0]);
    dmlReleaseDevice(devices[1]);
    dmlReleaseDevice(generic);
}

/* Forwards whose outputs exceed DML_CPU_STREAM_BYTES (8 MiB), channels-last:
 * channel counts of whole 64-byte lines (streamed by max_pooling/avx512/
 * nhwc), FLOAT32 and FLOAT16, UINT32 and UINT64 indices and none, 3x3/2 p1
 * and 2x2/2, and one count of partial lines (40 FLOAT32 channels, stored
 * plainly); NCHW FLOAT16 with UINT32 indices (max_pooling/avx512/nchw
 * stores them plainly: streaming them measured slower); one and two
 * threads. */
TEST_CASE(large_forward_outputs_match_generic_bit_for_bit) {
    DMLDevice* devices[2] = {test_device(1), test_device(2)};
    DMLDevice* generic = generic_device();
    typedef struct large_case {
        DML_OPERATOR_TYPE type;
        DML_TENSOR_DATA_TYPE data_type, index_type;
        uint32_t channels, size, window;
        bool channels_last;
    } large_case;
    static const large_case cases[] = {
        {DML_OPERATOR_MAX_POOLING1, DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_UINT32, 64, 256, 3, true},
        {DML_OPERATOR_MAX_POOLING2, DML_TENSOR_DATA_TYPE_FLOAT16, DML_TENSOR_DATA_TYPE_UINT64, 32, 512, 2, true},
        {DML_OPERATOR_MAX_POOLING2, DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_UNKNOWN, 96, 300, 3, true},
        {DML_OPERATOR_MAX_POOLING1, DML_TENSOR_DATA_TYPE_FLOAT16, DML_TENSOR_DATA_TYPE_UINT32, 64, 320, 3, true},
        {DML_OPERATOR_MAX_POOLING1, DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_UINT32, 40, 400, 2, true},
        {DML_OPERATOR_MAX_POOLING1, DML_TENSOR_DATA_TYPE_FLOAT16, DML_TENSOR_DATA_TYPE_UINT32, 96, 256, 2, false},
        {DML_OPERATOR_MAX_POOLING2, DML_TENSOR_DATA_TYPE_FLOAT16, DML_TENSOR_DATA_TYPE_UINT32, 96, 256, 3, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases && !test_case_failed(); i++) {
        const large_case* l = &cases[i];
        pool_case c = {.type = l->type,
                       .data_type = l->data_type,
                       .index_type = l->index_type,
                       .rank = 4,
                       .input_sizes = {1, l->channels, l->size, l->size}};
        c.output_sizes[0] = 1;
        c.output_sizes[1] = l->channels;
        for (uint32_t d = 0; d < 2; d++) {
            c.window[d] = l->window;
            c.strides[d] = 2;
            c.dilations[d] = 1;
            c.start_padding[d] = c.end_padding[d] = l->window == 3 ? 1 : 0;
        }
        for (int t = 0; t < 3; t++)
            c.layouts[t] = l->channels_last ? TEST_LAYOUT_EXPLICIT : TEST_LAYOUT_PACKED;
        fit_output_sizes(&c);
        expect_generic_bits(devices[i % 2], generic, &c, l->channels_last, false);
    }
    dmlReleaseDevice(devices[0]);
    dmlReleaseDevice(devices[1]);
    dmlReleaseDevice(generic);
}

/* Channels-last gradients of disjoint windows whose OutputGradient exceeds
 * DML_CPU_STREAM_BYTES (8 MiB): channel counts of whole 64-byte lines
 * (max_pooling_grad/avx512/nhwc streams them: whole chunks of 64 channels,
 * a FLOAT32 tail of one vector, FLOAT16 tails of two vectors a line) and
 * one of partial lines (40 FLOAT32 channels, stored plainly); odd sizes and
 * a stride past the window leave positions in no window (zeroed beside the
 * streamed ones); NaN and infinities in one InputGradient; one and two
 * threads. */
TEST_CASE(large_channels_last_gradients_match_generic_bit_for_bit) {
    DMLDevice* devices[2] = {test_device(1), test_device(2)};
    DMLDevice* generic = generic_device();
    static const struct {
        DML_TENSOR_DATA_TYPE data_type;
        uint32_t channels, height, width, stride;
    } shapes[] = {
        {DML_TENSOR_DATA_TYPE_FLOAT32, 128, 130, 129, 2}, {DML_TENSOR_DATA_TYPE_FLOAT32, 80, 160, 161, 2},
        {DML_TENSOR_DATA_TYPE_FLOAT16, 96, 230, 200, 3},  {DML_TENSOR_DATA_TYPE_FLOAT16, 32, 400, 331, 2},
        {DML_TENSOR_DATA_TYPE_FLOAT32, 40, 260, 203, 2},
    };
    for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]) && !test_case_failed(); i++) {
        pool_case c = {.type = DML_OPERATOR_MAX_POOLING_GRAD,
                       .data_type = shapes[i].data_type,
                       .index_type = DML_TENSOR_DATA_TYPE_UNKNOWN,
                       .rank = 4,
                       .input_sizes = {1, shapes[i].channels, shapes[i].height, shapes[i].width}};
        c.output_sizes[0] = 1;
        c.output_sizes[1] = c.input_sizes[1];
        for (uint32_t d = 0; d < 2; d++)
            set_window(&c, d, 2, shapes[i].stride);
        for (int t = 0; t < 3; t++)
            c.layouts[t] = TEST_LAYOUT_EXPLICIT;
        fit_output_sizes(&c);
        expect_generic_bits(devices[i % 2], generic, &c, true, i == 1);
    }
    dmlReleaseDevice(devices[0]);
    dmlReleaseDevice(devices[1]);
    dmlReleaseDevice(generic);
}

/* Input strides over the same logical sizes with C innermost at stride
 * `channel_stride` and `pixel_padding` unused elements after each pixel's
 * channels; reallocates the buffer. */
static void spread_channels_last(test_tensor* t, test_buffer* b, uint32_t channel_stride, uint32_t pixel_padding) {
    uint32_t rank = t->buffer.DimensionCount;
    t->strides[1] = channel_stride;
    uint32_t stride = t->sizes[1] * channel_stride + pixel_padding;
    for (uint32_t i = rank; i-- > 2;) {
        t->strides[i] = stride;
        stride *= t->sizes[i];
    }
    t->strides[0] = stride;
    t->buffer.TotalTensorSizeInBytes = DMLCalcBufferTensorSize(t->buffer.DataType, rank, t->sizes, t->strides);
    test_buffer_free(b);
    test_buffer_alloc(b, t->buffer.TotalTensorSizeInBytes);
}

/* The implementation `device` compiles desc to. */
static void compiled_implementation(DMLDevice* device, const DML_OPERATOR_DESC* desc, char* name, size_t size) {
    DMLOperator* op = NULL;
    DMLCompiledOperator* compiled = NULL;
    DML_COMPILED_OPERATOR_INFO info;
    snprintf(name, size, "(none)");
    EXPECT_STATUS(dmlCreateOperator(device, desc, &op), S_OK, NULL);
    if (op == NULL) return;
    EXPECT_STATUS(dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &compiled), S_OK, NULL);
    dmlReleaseOperator(op);
    if (compiled == NULL) return;
    if (SUCCEEDED(dmlGetCompiledOperatorInfo(compiled, &info))) snprintf(name, size, "%s", info.ImplementationName);
    dmlReleaseCompiledOperator(compiled);
}

/* Channels-last inputs that are not packed: C at stride 2 (no fast path
 * takes it: the generic kernel must), or each pixel padded (C stride 1:
 * the channels-last paths take it, the write-once gradients only where
 * OutputGradient has the same strides). Both match the generic kernel. */
TEST_CASE(strided_channels_last_inputs_match_generic_bit_for_bit) {
    DMLDevice* device = test_device(2);
    DMLDevice* generic = generic_device();
    const DML_OPERATOR_TYPE types[2] = {DML_OPERATOR_MAX_POOLING1, DML_OPERATOR_MAX_POOLING_GRAD};
    for (int i = 0; i < 48 && !test_case_failed(); i++) {
        DML_TENSOR_DATA_TYPE type = i % 2 ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32;
        pool_case c = fast_path_case(types[i / 2 % 2], type, true);
        c.input_sizes[1] = c.output_sizes[1] = test_rand_range(1, 40);
        if (i % 3 == 0) {
            for (uint32_t d = 0; d < c.rank - 2; d++)
                set_window(&c, d, 2, 2);
            fit_output_sizes(&c);
        }
        bool channel_strided = i / 4 % 2 == 0;
        pool_run r;
        pool_run_init(&r, &c);
        pool_run_channels_last(&r, &c);
        spread_channels_last(&r.input, &r.input_buffer, channel_strided ? 2 : 1,
                             channel_strided ? 0 : test_rand_range(1, 5));
        fill_pooling_input(&r, &c);
        if (is_grad(&c)) test_fill_random(&r.output_buffer, &r.output, -1, 1);
        char what[200], implementation[64];
        snprintf(what, sizeof what, "%s (channels-last, %s)", case_name(&c),
                 channel_strided ? "C stride 2" : "padded pixels");
        compiled_implementation(device, &r.desc, implementation, sizeof implementation);
        if (!test_backend_is_cuda()) {
            bool channels_last_path = !channel_strided && dmlGetDeviceCpuIsa(device) >= DML_CPU_ISA_AVX2;
            EXPECT((strstr(implementation, "/nhwc") != NULL) == channels_last_path, "%s: ran %s", what, implementation);
        }
        EXPECT_STATUS(pool_dispatch(device, &r, &c), S_OK, NULL);
        if (is_grad(&c)) {
            check_grad(&r, &c, what);
        } else {
            check_forward(&r, &c, what);
        }
        uint64_t bytes;
        uint8_t* fast = save_outputs(&r, &c, &bytes);
        EXPECT_STATUS(pool_dispatch(generic, &r, &c), S_OK, NULL);
        uint8_t* reference = save_outputs(&r, &c, &bytes);
        EXPECT(memcmp(fast, reference, bytes) == 0, "%s: outputs differ from the generic kernel's", what);
        free(fast);
        free(reference);
        pool_run_free(&r);
    }
    dmlReleaseDevice(device);
    dmlReleaseDevice(generic);
}

/* ---- Validation (spec §2, §3) ---- */

typedef struct invalid_case {
    pool_case c;
    pool_run r;
} invalid_case;

static HRESULT create_only(DMLDevice* device, const DML_OPERATOR_DESC* desc) {
    DMLOperator* op = NULL;
    HRESULT status = dmlCreateOperator(device, desc, &op);
    dmlReleaseOperator(op);
    return status;
}

static DMLDevice* device_at(DML_FEATURE_LEVEL level) {
    DML_DEVICE_DESC desc = {.FeatureLevel = level, .ThreadCount = 1};
    DMLDevice* device = NULL;
    if (FAILED(dmlCreateDevice(&desc, &device))) abort();
    return device;
}

static pool_case valid_case(DML_OPERATOR_TYPE type) {
    const uint32_t in[4] = {2, 3, 5, 5}, out[4] = {2, 3, 4, 4};
    pool_case c = golden_case(type, DML_TENSOR_DATA_TYPE_FLOAT32, in, out, 2, 2, 1, 0, 1);
    for (int i = 0; i < 3; i++)
        c.layouts[i] = TEST_LAYOUT_PACKED;
    return c;
}

/* After a change of sizes or types, TotalTensorSizeInBytes grows to stay
 * valid, so that each check breaks exactly one rule. */
static void grow_total_sizes(pool_run* r) {
    test_tensor* tensors[4] = {&r->input, &r->output, &r->indices, &r->output_gradient};
    for (int i = 0; i < 4; i++) {
        DML_BUFFER_TENSOR_DESC* b = &tensors[i]->buffer;
        if (b->Sizes == NULL) continue;
        UINT64 needed = DMLCalcBufferTensorSize(b->DataType, b->DimensionCount, b->Sizes, b->Strides);
        if (needed > b->TotalTensorSizeInBytes) b->TotalTensorSizeInBytes = needed;
    }
}

/* Each check builds a valid case, breaks one thing, and expects the status
 * and a message that names the field. */
#define EXPECT_REJECTED(op_type, level, breakage, ...)                                                                 \
    do {                                                                                                               \
        DMLDevice* device_ = device_at(level);                                                                         \
        pool_case c = valid_case(op_type);                                                                             \
        pool_run r;                                                                                                    \
        pool_run_init(&r, &c);                                                                                         \
        breakage;                                                                                                      \
        grow_total_sizes(&r);                                                                                          \
        EXPECT_STATUS(create_only(device_, &r.desc), E_INVALIDARG, __VA_ARGS__);                                       \
        pool_run_free(&r);                                                                                             \
        dmlReleaseDevice(device_);                                                                                     \
    } while (0)

#define EXPECT_ACCEPTED(op_type, level, change)                                                                        \
    do {                                                                                                               \
        DMLDevice* device_ = device_at(level);                                                                         \
        pool_case c = valid_case(op_type);                                                                             \
        pool_run r;                                                                                                    \
        pool_run_init(&r, &c);                                                                                         \
        change;                                                                                                        \
        grow_total_sizes(&r);                                                                                          \
        EXPECT_STATUS(create_only(device_, &r.desc), S_OK, NULL);                                                      \
        pool_run_free(&r);                                                                                             \
        dmlReleaseDevice(device_);                                                                                     \
    } while (0)

#define TOP DML_FEATURE_LEVEL_6_4
#define MP DML_OPERATOR_MAX_POOLING
#define MP1 DML_OPERATOR_MAX_POOLING1
#define MP2 DML_OPERATOR_MAX_POOLING2
#define GRAD DML_OPERATOR_MAX_POOLING_GRAD

TEST_CASE(validation_required_tensors_and_arrays) {
    EXPECT_REJECTED(MP2, TOP, r.pool2.InputTensor = NULL, "MAX_POOLING2", "InputTensor", "required");
    EXPECT_REJECTED(MP, TOP, r.pool.OutputTensor = NULL, "MAX_POOLING", "OutputTensor", "required");
    EXPECT_REJECTED(GRAD, TOP, r.grad.InputGradientTensor = NULL, "MAX_POOLING_GRAD", "InputGradientTensor");
    EXPECT_REJECTED(GRAD, TOP, r.grad.OutputGradientTensor = NULL, "OutputGradientTensor");
    EXPECT_REJECTED(MP2, TOP, r.pool2.Strides = NULL, "MAX_POOLING2", "Strides is NULL");
    EXPECT_REJECTED(MP1, TOP, r.pool1.WindowSize = NULL, "WindowSize is NULL");
    EXPECT_REJECTED(MP, TOP, r.pool.StartPadding = NULL, "StartPadding is NULL");
    EXPECT_REJECTED(MP2, TOP, r.pool2.EndPadding = NULL, "EndPadding is NULL");
    EXPECT_REJECTED(MP2, TOP, r.pool2.Dilations = NULL, "Dilations is NULL");
    EXPECT_REJECTED(GRAD, TOP, r.grad.Dilations = NULL, "Dilations is NULL");
    EXPECT_ACCEPTED(MP1, TOP, r.pool1.OutputIndicesTensor = NULL);
}

TEST_CASE(validation_dimension_counts) {
    EXPECT_REJECTED(MP2, TOP, (r.input.buffer.DimensionCount = 3, r.pool2.DimensionCount = 1),
                    "InputTensor.DimensionCount is 3", "4..5");
    EXPECT_REJECTED(MP2, TOP, r.pool2.DimensionCount = 3, "DimensionCount is 3", "InputTensor.DimensionCount - 2");
    EXPECT_REJECTED(GRAD, TOP, r.grad.DimensionCount = 1, "MAX_POOLING_GRAD", "DimensionCount is 1");
    EXPECT_REJECTED(MP2, TOP, r.output.buffer.DimensionCount = 3, "OutputTensor.DimensionCount");
    EXPECT_REJECTED(GRAD, TOP, r.output.buffer.DimensionCount = 3, "InputGradientTensor.DimensionCount");
    /* GRAD is 4-D only below FL 4.0 (decision MP-8). */
    {
        DMLDevice* fl3 = device_at(DML_FEATURE_LEVEL_3_0);
        DMLDevice* fl4 = device_at(DML_FEATURE_LEVEL_4_0);
        pool_case c = valid_case(GRAD);
        c.rank = 5;
        c.input_sizes[4] = 5;
        c.output_sizes[4] = 4;
        c.window[2] = 2;
        c.strides[2] = c.dilations[2] = 1;
        pool_run r;
        pool_run_init(&r, &c);
        EXPECT_STATUS(create_only(fl3, &r.desc), E_INVALIDARG, "MAX_POOLING_GRAD", "InputTensor.DimensionCount is 5",
                      "must be 4");
        EXPECT_STATUS(create_only(fl4, &r.desc), S_OK, NULL);
        pool_run_free(&r);
        dmlReleaseDevice(fl3);
        dmlReleaseDevice(fl4);
    }
}

TEST_CASE(validation_shapes) {
    EXPECT_REJECTED(MP2, TOP, r.output.sizes[0] = 1, "OutputTensor.Sizes[0] is 1", "batch size");
    EXPECT_REJECTED(MP1, TOP, r.output.sizes[1] = 2, "OutputTensor.Sizes[1] is 2", "channel");
    EXPECT_REJECTED(MP2, TOP, r.indices.sizes[3] = 3, "OutputIndicesTensor.Sizes[3]", "OutputTensor.Sizes[3]");
    EXPECT_REJECTED(GRAD, TOP, r.output_gradient.sizes[2] = 4, "OutputGradientTensor.Sizes[2]", "InputTensor.Sizes[2]");
    EXPECT_REJECTED(GRAD, TOP, r.output.sizes[1] = 1, "InputGradientTensor.Sizes[1] is 1", "channel");
    EXPECT_REJECTED(GRAD, TOP, r.output.sizes[0] = 3, "InputGradientTensor.Sizes[0] is 3");
    /* Any spatial output size >= 1 is accepted (decision MP-1). */
    EXPECT_ACCEPTED(MP2, TOP, (r.output.sizes[2] = 40, r.indices.sizes[2] = 40));
}

TEST_CASE(validation_window_parameters) {
    EXPECT_REJECTED(MP2, TOP, c.strides[1] = 0, "MAX_POOLING2", "Strides[1] is 0", ">= 1");
    EXPECT_REJECTED(MP1, TOP, c.window[0] = 0, "WindowSize[0] is 0");
    EXPECT_REJECTED(MP2, TOP, c.dilations[1] = 0, "Dilations[1] is 0");
    EXPECT_REJECTED(GRAD, TOP, c.dilations[0] = 0, "MAX_POOLING_GRAD", "Dilations[0] is 0");
    /* Padding larger than the window is allowed (decision MP-6). */
    EXPECT_ACCEPTED(MP2, TOP, (c.start_padding[0] = 9, c.end_padding[1] = 9));
}

TEST_CASE(validation_data_types_by_feature_level) {
    EXPECT_REJECTED(MP2, TOP, r.output.buffer.DataType = DML_TENSOR_DATA_TYPE_FLOAT16, "OutputTensor.DataType",
                    "InputTensor.DataType");
    EXPECT_REJECTED(MP2, TOP, (r.input.buffer.DataType = r.output.buffer.DataType = DML_TENSOR_DATA_TYPE_FLOAT64),
                    "InputTensor.DataType is FLOAT64");
    EXPECT_REJECTED(MP2, TOP, r.indices.buffer.DataType = DML_TENSOR_DATA_TYPE_INT32,
                    "OutputIndicesTensor.DataType is INT32", "UINT32");
    EXPECT_REJECTED(MP1, DML_FEATURE_LEVEL_4_1, r.indices.buffer.DataType = DML_TENSOR_DATA_TYPE_UINT64,
                    "OutputIndicesTensor.DataType is UINT64");
    EXPECT_ACCEPTED(MP1, DML_FEATURE_LEVEL_5_0, r.indices.buffer.DataType = DML_TENSOR_DATA_TYPE_UINT64);
    /* 8-bit integers from FL 3.0, the other integers from FL 5.0. */
    EXPECT_REJECTED(MP, DML_FEATURE_LEVEL_2_1,
                    (r.input.buffer.DataType = r.output.buffer.DataType = DML_TENSOR_DATA_TYPE_UINT8),
                    "InputTensor.DataType is UINT8");
    EXPECT_ACCEPTED(MP, DML_FEATURE_LEVEL_3_0,
                    (r.input.buffer.DataType = r.output.buffer.DataType = DML_TENSOR_DATA_TYPE_INT8));
    EXPECT_REJECTED(MP2, DML_FEATURE_LEVEL_4_1,
                    (r.input.buffer.DataType = r.output.buffer.DataType = DML_TENSOR_DATA_TYPE_INT32),
                    "InputTensor.DataType is INT32");
    EXPECT_ACCEPTED(MP2, DML_FEATURE_LEVEL_5_0,
                    (r.input.buffer.DataType = r.output.buffer.DataType = DML_TENSOR_DATA_TYPE_UINT16));
    EXPECT_REJECTED(GRAD, TOP, r.output_gradient.buffer.DataType = DML_TENSOR_DATA_TYPE_FLOAT16,
                    "OutputGradientTensor.DataType");
    EXPECT_REJECTED(GRAD, TOP,
                    (r.input.buffer.DataType = r.output.buffer.DataType = r.output_gradient.buffer.DataType =
                         DML_TENSOR_DATA_TYPE_INT8),
                    "MAX_POOLING_GRAD", "InputTensor.DataType is INT8");
    /* Operators by feature level. */
    EXPECT_REJECTED(MP1, DML_FEATURE_LEVEL_1_0, (void)0, "MAX_POOLING1", "feature level");
    EXPECT_REJECTED(GRAD, DML_FEATURE_LEVEL_2_1, (void)0, "MAX_POOLING_GRAD", "feature level");
    EXPECT_ACCEPTED(MP, DML_FEATURE_LEVEL_1_0, (void)0);
}
