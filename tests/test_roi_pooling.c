/* ROI_POOLING (spec roi_pooling.md): golden vectors RP-1..RP-4, randomized
 * comparisons with the float64 reference (bit-exact: the result is a copy of
 * an input element), layouts, FLOAT16, invalid and NaN batch ids and
 * coordinates, huge and infinite coordinates, determinism across thread
 * counts, guard bytes, and every validation rule of §2. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference/roi_reference.h"

/* RP-1: ROI pooling, 3 identical ROIs, pooled 1x1 (third-party-test) */
static const double RP1_Input[] = {
    0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2,  1.3,  1.4,  1.5,  1.6,  1.7,  1.8,  1.9, 2.0, 2.1,
    2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8, 2.9, 3.0, 3.1, 3.2, 3.3, 3.4,  3.5,  3.6,  3.7,  3.8,  3.9,  4.0,  4.1, 4.2, 4.3,
    4.4, 4.5, 4.6, 4.7, 4.8, 4.9, 5.0, 5.1, 5.2, 5.3, 5.4, 5.5, 5.6,  5.7,  5.8,  5.9,  6.0,  6.1,  6.2,  6.3, 6.4, 6.5,
    6.6, 6.7, 6.8, 6.9, 7.0, 7.1, 7.2, 7.3, 7.4, 7.5, 7.6, 7.7, 7.8,  7.9,  8.0,  8.1,  8.2,  8.3,  8.4,  8.5, 8.6, 8.7,
    8.8, 8.9, 9.0, 9.1, 9.2, 9.3, 9.4, 9.5, 9.6, 9.7, 9.8, 9.9, 10.0, 10.1, 10.2, 10.3, 10.4, 10.5, 10.6, 10.7};
static const double RP1_ROI[] = {0.0, 1.0, 1.0, 2.0, 3.0, 0.0, 1.0, 1.0, 2.0, 3.0, 0.0, 1.0, 1.0, 2.0, 3.0};
static const double RP1_Output[] = {2.0, 5.6, 9.2, 2.0, 5.6, 9.2, 2.0, 5.6, 9.2};
/* RP-2: ROI partly outside the image: clamped bins, empty bins give 0 (derived) */
static const double RP2_Input[] = {0.0, 1.0, 2.0,  3.0,  4.0,  5.0,  6.0,  7.0,
                                   8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0};
static const double RP2_ROI[] = {0.0, 2.0, 1.0, 5.0, 6.0};
static const double RP2_Output[] = {15.0, 0.0, 0.0, 0.0};
/* RP-3: Rounding of scaled coordinates (halves away from zero) (derived) */
static const double RP3_Input[] = {0.0, 1.0, 2.0,  3.0,  4.0,  5.0,  6.0,  7.0,
                                   8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0};
static const double RP3_ROI[] = {0.0, 1.0, 1.0, 5.0, 3.0};
static const double RP3_Output[] = {10.0, 11.0};
/* RP-4: Two ROIs, batch index 1 and a single-pixel ROI (derived) */
static const double RP4_Input[] = {0.0,   1.0,   2.0,   3.0,   4.0,   5.0,   6.0,   7.0,   8.0,   9.0,   10.0,
                                   11.0,  12.0,  13.0,  14.0,  15.0,  100.0, 101.0, 102.0, 103.0, 104.0, 105.0,
                                   106.0, 107.0, 108.0, 109.0, 110.0, 111.0, 112.0, 113.0, 114.0, 115.0};
static const double RP4_ROI[] = {1.0, 0.0, 0.0, 3.0, 3.0, 0.0, 3.0, 3.0, 3.0, 3.0};
static const double RP4_Output[] = {105.0, 107.0, 113.0, 115.0, 15.0, 15.0, 15.0, 15.0};

/* One ROI_POOLING problem: logical data and the layouts to run it with. */
typedef struct pooling_problem {
    DML_TENSOR_DATA_TYPE type;
    uint32_t batch, channels, height, width, roi_count, pooled_height, pooled_width;
    float spatial_scale;
    const double* input; /* {N, C, H, W} */
    const double* rois;  /* {R, 5} */
    test_layout input_layout, roi_layout, output_layout;
} pooling_problem;

/* What a run produced: the status, and the output in logical order (bits and
 * values); input and rois as actually stored (a broadcast layout aliases
 * elements, FLOAT16 rounds values), for the reference. */
typedef struct pooling_run {
    HRESULT status;
    uint64_t* bits;
    double* output;
    double* input;
    double* rois;
} pooling_run;

static void read_logical(const test_buffer* b, const test_tensor* t, double* values) {
    for (uint64_t i = 0; i < t->element_count; i++)
        values[i] = test_load(t->buffer.DataType, b->data, test_tensor_offset(t, i));
}

static void pooling_run_free(pooling_run* run) {
    free(run->bits);
    free(run->output);
    free(run->input);
    free(run->rois);
}

static pooling_run run_pooling(DMLDevice* device, const pooling_problem* p) {
    uint32_t in_sizes[4] = {p->batch, p->channels, p->height, p->width};
    uint32_t roi_sizes[4] = {1, 1, p->roi_count, 5};
    uint32_t out_sizes[4] = {p->roi_count, p->channels, p->pooled_height, p->pooled_width};
    test_tensor input, rois, output;
    test_tensor_init(&input, p->type, 4, in_sizes, p->input_layout);
    test_tensor_init(&rois, p->type, 4, roi_sizes, p->roi_layout);
    test_tensor_init(&output, p->type, 4, out_sizes, p->output_layout);
    test_buffer in_buffer, roi_buffer, out_buffer;
    test_buffer_alloc(&in_buffer, input.buffer.TotalTensorSizeInBytes);
    test_buffer_alloc(&roi_buffer, rois.buffer.TotalTensorSizeInBytes);
    test_buffer_alloc(&out_buffer, output.buffer.TotalTensorSizeInBytes);
    test_fill_values(&in_buffer, &input, p->input);
    test_fill_values(&roi_buffer, &rois, p->rois);

    DML_ROI_POOLING_OPERATOR_DESC desc = {
        &input.desc, &rois.desc, &output.desc, p->spatial_scale, {p->pooled_width, p->pooled_height}};
    DML_OPERATOR_DESC op = {DML_OPERATOR_ROI_POOLING, &desc};
    test_buffer* inputs[2] = {&in_buffer, &roi_buffer};
    test_buffer* outputs[1] = {&out_buffer};
    pooling_run run = {0};
    run.status = test_run(device, &op, 2, inputs, 1, outputs);
    test_buffer_check_guards(&in_buffer, "InputTensor");
    test_buffer_check_guards(&roi_buffer, "ROITensor");
    test_buffer_check_guards(&out_buffer, "OutputTensor");
    test_buffer_check_unaddressed(&out_buffer, &output, "OutputTensor");
    run.bits = malloc(output.element_count * sizeof *run.bits);
    run.output = malloc(output.element_count * sizeof *run.output);
    run.input = malloc(input.element_count * sizeof *run.input);
    run.rois = malloc(rois.element_count * sizeof *run.rois);
    for (uint64_t i = 0; i < output.element_count; i++)
        run.bits[i] = test_load_bits(p->type, out_buffer.data, test_tensor_offset(&output, i));
    read_logical(&out_buffer, &output, run.output);
    read_logical(&in_buffer, &input, run.input);
    read_logical(&roi_buffer, &rois, run.rois);
    test_buffer_free(&in_buffer);
    test_buffer_free(&roi_buffer);
    test_buffer_free(&out_buffer);
    return run;
}

static uint64_t expected_bits(DML_TENSOR_DATA_TYPE type, double value) {
    if (type == DML_TENSOR_DATA_TYPE_FLOAT16) return test_double_to_half(value);
    float f = (float)value;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

/* Bit-exact comparison (NaN matches any NaN); reports the first mismatch. */
static bool expect_bits(const pooling_problem* p, const pooling_run* run, const double* expected, const char* what) {
    uint64_t count = (uint64_t)p->roi_count * p->channels * p->pooled_height * p->pooled_width;
    for (uint64_t i = 0; i < count; i++) {
        bool both_nan = isnan(run->output[i]) && isnan(expected[i]);
        if (!both_nan && run->bits[i] != expected_bits(p->type, expected[i])) {
            EXPECT(false, "%s: output element %llu is %.9g (bits 0x%llx) but expected %.9g (%s, layouts %s/%s/%s)",
                   what, (unsigned long long)i, run->output[i], (unsigned long long)run->bits[i], expected[i],
                   dmlDataTypeName(p->type), test_layout_name(p->input_layout), test_layout_name(p->roi_layout),
                   test_layout_name(p->output_layout));
            return false;
        }
    }
    return true;
}

/* Runs p and compares with the reference computed on the stored inputs. */
static bool check_against_reference(DMLDevice* device, const pooling_problem* p, const char* what) {
    pooling_run run = run_pooling(device, p);
    EXPECT_STATUS(run.status, S_OK, NULL);
    uint64_t count = (uint64_t)p->roi_count * p->channels * p->pooled_height * p->pooled_width;
    double* expected = malloc(count * sizeof *expected);
    ref_roi_pooling(run.input, p->batch, p->channels, p->height, p->width, run.rois, p->roi_count, p->spatial_scale,
                    p->pooled_height, p->pooled_width, expected);
    bool ok = SUCCEEDED(run.status) && expect_bits(p, &run, expected, what);
    free(expected);
    pooling_run_free(&run);
    return ok;
}

/* ---- Golden vectors (examples.md RP-1..RP-4) ---- */

typedef struct pooling_vector {
    const char* id;
    uint32_t batch, channels, height, width, roi_count, pooled_height, pooled_width;
    float spatial_scale;
    const double *input, *rois, *output;
} pooling_vector;

static const pooling_vector pooling_vectors[] = {
    {"RP-1", 1, 3, 6, 6, 3, 1, 1, 1.0f, RP1_Input, RP1_ROI, RP1_Output},
    {"RP-2", 1, 1, 4, 4, 1, 2, 2, 1.0f, RP2_Input, RP2_ROI, RP2_Output},
    {"RP-3", 1, 1, 4, 4, 1, 1, 2, 0.5f, RP3_Input, RP3_ROI, RP3_Output},
    {"RP-4", 2, 1, 4, 4, 2, 2, 2, 1.0f, RP4_Input, RP4_ROI, RP4_Output},
};

TEST_CASE(golden_vectors) {
    DMLDevice* device = test_device(0);
    const DML_TENSOR_DATA_TYPE types[2] = {DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_FLOAT16};
    for (size_t v = 0; v < sizeof pooling_vectors / sizeof pooling_vectors[0]; v++) {
        const pooling_vector* g = &pooling_vectors[v];
        for (int t = 0; t < 2; t++) {
            for (int layout_run = 0; layout_run < 3; layout_run++) {
                /* Packed first, then random layouts (no broadcast: the data must stay as listed). */
                /* clang-format off */
                pooling_problem p = {types[t], g->batch, g->channels, g->height, g->width, g->roi_count,
                                     g->pooled_height, g->pooled_width, g->spatial_scale, g->input, g->rois,
                                     TEST_LAYOUT_PACKED, TEST_LAYOUT_PACKED, TEST_LAYOUT_PACKED};
                /* clang-format on */
                if (layout_run > 0) {
                    p.input_layout = test_random_layout(false);
                    p.roi_layout = test_random_layout(false);
                    p.output_layout = test_random_layout(false);
                }
                pooling_run run = run_pooling(device, &p);
                EXPECT_STATUS(run.status, S_OK, NULL);
                /* The output is a copy of an input element: exact in both types
                 * (for FLOAT16, the listed value rounded to FLOAT16). */
                char what[64];
                snprintf(what, sizeof what, "%s %s", g->id, dmlDataTypeName(p.type));
                if (SUCCEEDED(run.status)) expect_bits(&p, &run, g->output, what);
                pooling_run_free(&run);
            }
        }
    }
    dmlReleaseDevice(device);
}

/* The reference itself reproduces the golden vectors (it is the oracle of
 * the randomized tests). */
TEST_CASE(reference_matches_golden_vectors) {
    for (size_t v = 0; v < sizeof pooling_vectors / sizeof pooling_vectors[0]; v++) {
        const pooling_vector* g = &pooling_vectors[v];
        uint32_t count = g->roi_count * g->channels * g->pooled_height * g->pooled_width;
        double got[64];
        ref_roi_pooling(g->input, g->batch, g->channels, g->height, g->width, g->rois, g->roi_count, g->spatial_scale,
                        g->pooled_height, g->pooled_width, got);
        for (uint32_t i = 0; i < count; i++)
            EXPECT(got[i] == g->output[i], "%s: reference element %u is %g, expected %g", g->id, i, got[i],
                   g->output[i]);
    }
}

/* ---- Randomized comparisons ---- */

/* A coordinate along an axis of `extent` pixels (before SpatialScale): inside,
 * crossing an edge, entirely outside, or huge. */
static double random_coordinate(uint32_t extent, float scale) {
    double unscaled = extent / scale;
    switch (test_rand_range(0, 19)) {
    case 0: return test_rand_double(-2.0 * unscaled, -0.1 * unscaled);  /* before the image */
    case 1: return test_rand_double(1.05 * unscaled, 3.0 * unscaled);   /* after it */
    case 2: return test_rand_double(-1e6, 1e6);                         /* huge */
    case 3: return round(test_rand_double(-1, unscaled)) + 0.5 / scale; /* scaled value ends in .5 */
    default: return test_rand_double(-0.2 * unscaled, 1.2 * unscaled);
    }
}

static double random_batch_id(uint32_t batch) {
    switch (test_rand_range(0, 19)) {
    case 0: return batch;                                /* one past the end */
    case 1: return -1.0;                                 /* negative */
    case 2: return NAN;                                  /* RP-5 */
    case 3: return -test_rand_double(0.0, 0.99);         /* truncates to 0 */
    case 4: return test_rand_range(0, batch - 1) + 0.75; /* truncates down */
    case 5: return 1e9;
    default: return test_rand_range(0, batch - 1);
    }
}

/* wide: 8 to 27 channels, larger images and more bins, so that the fast
 * paths that vectorize across 8 channels or 8 columns run full vectors and
 * tails. */
static void random_pooling_problem(pooling_problem* p, double** input, double** rois, bool wide) {
    static const float scales[] = {1.0f, 0.5f, 0.25f, 0.0625f, 2.0f, 0.3f};
    p->type = test_rand_bool() ? DML_TENSOR_DATA_TYPE_FLOAT32 : DML_TENSOR_DATA_TYPE_FLOAT16;
    p->batch = test_rand_range(1, 3);
    p->channels = wide ? test_rand_range(8, 27) : test_rand_range(1, 4);
    p->height = test_rand_range(1, wide ? 20 : 9);
    p->width = test_rand_range(1, wide ? 40 : 9); /* several vectors of 8 columns */
    p->roi_count = test_rand_range(1, 6);
    p->pooled_height = test_rand_range(1, wide ? 7 : 4); /* 7 x 7: whole and partial blocks of 8 bins */
    p->pooled_width = test_rand_range(1, wide ? 7 : 4);
    p->spatial_scale = scales[test_rand_range(0, 5)];
    p->input_layout = test_random_layout(true);
    p->roi_layout = test_random_layout(true);
    p->output_layout = test_random_layout(false);
    size_t in_count = (size_t)p->batch * p->channels * p->height * p->width;
    *input = malloc(in_count * sizeof **input);
    *rois = malloc((size_t)p->roi_count * 5 * sizeof **rois);
    for (size_t i = 0; i < in_count; i++) {
        uint32_t kind = test_rand_range(0, 19);
        /* Mostly distinct values; some signed zeros, repeats and NaN to pin the max rule. */
        (*input)[i] = kind == 0   ? NAN
                      : kind == 1 ? -0.0
                      : kind == 2 ? 0.0
                      : kind == 3 ? 1.0
                                  : round(test_rand_double(-40, 40)) / 4;
    }
    for (uint32_t r = 0; r < p->roi_count; r++) {
        double* roi = *rois + (size_t)r * 5;
        roi[0] = random_batch_id(p->batch);
        roi[1] = random_coordinate(p->width, p->spatial_scale);
        roi[2] = random_coordinate(p->height, p->spatial_scale);
        roi[3] = random_coordinate(p->width, p->spatial_scale);
        roi[4] = random_coordinate(p->height, p->spatial_scale);
        if (test_rand_range(0, 3) != 0) { /* mostly well-ordered corners; sometimes inverted (RP-4) */
            if (roi[3] < roi[1]) {
                double t = roi[1];
                roi[1] = roi[3];
                roi[3] = t;
            }
            if (roi[4] < roi[2]) {
                double t = roi[2];
                roi[2] = roi[4];
                roi[4] = t;
            }
        }
        if (test_rand_range(0, 15) == 0) roi[1 + test_rand_range(0, 3)] = NAN; /* RP-6 */
    }
    p->input = *input;
    p->rois = *rois;
}

static void random_problems_against_reference(int iterations, bool wide) {
    DMLDevice* device = test_device(0);
    uint64_t nonzero = 0, total = 0;
    for (int iteration = 0; iteration < iterations && !test_case_failed(); iteration++) {
        pooling_problem p;
        double *input, *rois;
        random_pooling_problem(&p, &input, &rois, wide);
        char what[48];
        snprintf(what, sizeof what, "random problem %d", iteration);
        check_against_reference(device, &p, what);
        pooling_run run = run_pooling(device, &p);
        uint64_t count = (uint64_t)p.roi_count * p.channels * p.pooled_height * p.pooled_width;
        for (uint64_t i = 0; i < count; i++)
            nonzero += run.output[i] != 0;
        total += count;
        pooling_run_free(&run);
        free(input);
        free(rois);
    }
    /* The problems must exercise real bins, not mostly empty ones. */
    EXPECT(nonzero * 5 > total, "only %llu of %llu outputs are non-zero", (unsigned long long)nonzero,
           (unsigned long long)total);
    dmlReleaseDevice(device);
}

TEST_CASE(random_against_reference) { random_problems_against_reference(300, false); }

/* Full 8-channel vectors and their tails (the AVX2 paths), NaN and ties included. */
TEST_CASE(random_wide_against_reference) { random_problems_against_reference(120, true); }

/* Outputs of 8 MiB or more, which the AVX2 kernel writes with non-temporal
 * stores a block of 8 channels at a time (packed NCHW): full blocks and a
 * partial one (260 channels), 117 bins a channel so that blocks start and
 * end inside cache lines, in both types; the first ROIs also cover the
 * whole image and the ROIs of random_pooling_problem's kinds follow. */
TEST_CASE(streamed_output_against_reference) {
    DMLDevice* device = test_device(0);
    for (int t = 0; t < 2 && !test_case_failed(); t++) {
        pooling_problem p = {t ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32,
                             2,
                             260,
                             13,
                             21,
                             144,
                             9,
                             13,
                             0.5f,
                             NULL,
                             NULL,
                             TEST_LAYOUT_PACKED,
                             TEST_LAYOUT_PACKED,
                             TEST_LAYOUT_PACKED};
        size_t in_count = (size_t)p.batch * p.channels * p.height * p.width;
        double* input = malloc(in_count * sizeof *input);
        double* rois = malloc((size_t)p.roi_count * 5 * sizeof *rois);
        for (size_t i = 0; i < in_count; i++)
            input[i] = round(test_rand_double(-4000, 4000)) / 4;
        for (uint32_t r = 0; r < p.roi_count; r++) {
            double* roi = rois + (size_t)r * 5;
            bool whole = r < 4;
            roi[0] = whole ? r % 2 : random_batch_id(p.batch);
            roi[1] = whole ? 0 : random_coordinate(p.width, p.spatial_scale);
            roi[2] = whole ? 0 : random_coordinate(p.height, p.spatial_scale);
            roi[3] = whole ? 2 * p.width : random_coordinate(p.width, p.spatial_scale);
            roi[4] = whole ? 2 * p.height : random_coordinate(p.height, p.spatial_scale);
        }
        p.input = input;
        p.rois = rois;
        check_against_reference(device, &p, "streamed output");
        free(input);
        free(rois);
    }
    dmlReleaseDevice(device);
}

/* NaN never wins over a number; an all-NaN bin gives NaN; ties keep the
 * first element in (y, x) order, so -0.0 before +0.0 gives -0.0. */
TEST_CASE(max_rule_nan_and_ties) {
    DMLDevice* device = test_device(0);
    const double input[8] = {NAN, 3.0, NAN, 3.0, -0.0, 0.0, NAN, NAN};
    /* Input {1, 4, 1, 2}: channel 0 {NaN, 3}, 1 {NaN, 3}, 2 {-0, +0}, 3 {NaN, NaN}. */
    const double rois[5] = {0, 0, 0, 1, 0};
    const double expected[4] = {3.0, 3.0, -0.0, NAN};
    for (int t = 0; t < 2; t++) {
        /* clang-format off */
        pooling_problem p = {t ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32, 1, 4, 1, 2, 1, 1, 1,
                             1.0f, input, rois, TEST_LAYOUT_PACKED, TEST_LAYOUT_PACKED, TEST_LAYOUT_PACKED};
        /* clang-format on */
        pooling_run run = run_pooling(device, &p);
        EXPECT_STATUS(run.status, S_OK, NULL);
        if (SUCCEEDED(run.status)) expect_bits(&p, &run, expected, "NaN and tie rule");
        pooling_run_free(&run);
    }
    dmlReleaseDevice(device);
}

/* Batch ids and coordinates that select nothing: all outputs of that ROI are
 * +0.0, and nothing outside the input is read (ASan checks the reads). */
TEST_CASE(invalid_rois_give_zero) {
    DMLDevice* device = test_device(0);
    double input[2 * 2 * 3 * 3];
    for (int i = 0; i < 18 * 2; i++)
        input[i] = 100 + i;
    /* clang-format off */
    const double rois[] = {
        2, 0, 0, 2, 2,             /* batch id N */
        -1, 0, 0, 2, 2,            /* negative */
        NAN, 0, 0, 2, 2,           /* NaN id */
        4294967296.0, 0, 0, 2, 2,  /* 2^32: would wrap in 32 bits */
        0, NAN, 0, 2, 2,           /* NaN coordinate */
        1, 0, 0, 2, NAN,           /* NaN coordinate */
        1.9, 5, 5, 9, 9,           /* valid id 1, region entirely outside: every bin empty */
        -0.9, -9, -9, -5, -5,      /* valid id 0 (truncated), region entirely before the image */
    };
    /* clang-format on */
    const uint32_t roi_count = sizeof rois / sizeof rois[0] / 5;
    double expected[8 * 2 * 2 * 2];
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        expected[i] = 0.0;
    for (int t = 0; t < 2; t++) {
        /* clang-format off */
        pooling_problem p = {t ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32, 2, 2, 3, 3, roi_count,
                             2, 2, 1.0f, input, rois, TEST_LAYOUT_PACKED, TEST_LAYOUT_PACKED, TEST_LAYOUT_PACKED};
        /* clang-format on */
        pooling_run run = run_pooling(device, &p);
        EXPECT_STATUS(run.status, S_OK, NULL);
        if (SUCCEEDED(run.status)) expect_bits(&p, &run, expected, "invalid ROIs");
        pooling_run_free(&run);
    }
    dmlReleaseDevice(device);
}

/* Huge and infinite coordinates go through the integer arithmetic without
 * overflow; regions covering the image pick the expected bins. */
TEST_CASE(huge_and_infinite_coordinates) {
    DMLDevice* device = test_device(0);
    double input[1 * 1 * 4 * 4];
    for (int i = 0; i < 16; i++)
        input[i] = i;
    /* clang-format off */
    const double rois[] = {
        0, -INFINITY, -INFINITY, INFINITY, INFINITY,
        0, -3e38, -3e38, 3e38, 3e38,
        0, 1e30, 1e30, 2e30, 2e30,
        0, -1e20, 0, 1e20, 3,
        0, 0, 0, 65504, 65504,
    };
    /* clang-format on */
    /* clang-format off */
    pooling_problem p = {DML_TENSOR_DATA_TYPE_FLOAT32, 1, 1, 4, 4, 5, 2, 3, 1.0f, input, rois,
                         TEST_LAYOUT_PACKED, TEST_LAYOUT_PACKED, TEST_LAYOUT_PACKED};
    /* clang-format on */
    check_against_reference(device, &p, "huge coordinates");
    /* Exact expectations for the symmetric infinite region: the corners
     * clamp to -2^61 and 2^61 (2^62 + 1 pixels). Rows: bin 0 is [-2^61, 1)
     * -> row 0; bin 1 starts at 0 -> every row. Columns (3 bins): bin 0 ends
     * before 0 (empty), bin 1 covers every column, bin 2 starts after the
     * image (empty). So the output is {0, 3, 0; 0, 15, 0}. */
    pooling_run run = run_pooling(device, &p);
    const double infinite_region[6] = {0, 3, 0, 0, 15, 0};
    if (SUCCEEDED(run.status))
        for (int i = 0; i < 6; i++)
            EXPECT(run.output[i] == infinite_region[i], "infinite region: element %d is %g, expected %g", i,
                   run.output[i], infinite_region[i]);
    pooling_run_free(&run);
    p.type = DML_TENSOR_DATA_TYPE_FLOAT16;
    check_against_reference(device, &p, "huge coordinates FLOAT16");
    dmlReleaseDevice(device);
}

/* Same bits with 1, 2 and all threads, and on a repeated run. On CUDA the
 * thread counts do not apply: the three devices are CUDA devices, and the
 * case checks run-to-run and device-to-device identity. */
TEST_CASE(deterministic_across_threads) {
    DMLDevice* devices[3] = {test_device(1), test_device(2), test_device(0)};
    if (test_backend_is_cuda())
        printf("note: CUDA backend: thread counts do not apply; checking identical bits across runs and devices\n");
    for (int iteration = 0; iteration < 10 && !test_case_failed(); iteration++) {
        pooling_problem p;
        double *input, *rois;
        random_pooling_problem(&p, &input, &rois, iteration % 2 == 1);
        p.input_layout = p.roi_layout = p.output_layout = TEST_LAYOUT_PACKED;
        pooling_run first = run_pooling(devices[0], &p);
        uint64_t count = (uint64_t)p.roi_count * p.channels * p.pooled_height * p.pooled_width;
        for (int d = 0; d < 4; d++) {
            pooling_run again = run_pooling(devices[d % 3], &p);
            EXPECT(memcmp(first.bits, again.bits, count * sizeof *first.bits) == 0,
                   "run %d (device %d) differs from the single-thread run", d, d % 3);
            pooling_run_free(&again);
        }
        pooling_run_free(&first);
        free(input);
        free(rois);
    }
    for (int d = 0; d < 3; d++)
        dmlReleaseDevice(devices[d]);
}

/* ---- Validation (spec §2) ---- */

typedef struct pooling_desc_set {
    uint32_t in_sizes[5], roi_sizes[5], out_sizes[5];
    DML_BUFFER_TENSOR_DESC in, roi, out;
    DML_TENSOR_DESC in_desc, roi_desc, out_desc;
    DML_ROI_POOLING_OPERATOR_DESC pool;
    DML_OPERATOR_DESC op;
} pooling_desc_set;

static void set_tensor(DML_BUFFER_TENSOR_DESC* b, DML_TENSOR_DESC* d, DML_TENSOR_DATA_TYPE type, uint32_t rank,
                       const uint32_t* sizes) {
    *b = (DML_BUFFER_TENSOR_DESC){
        type, DML_TENSOR_FLAG_NONE, rank, sizes, NULL, DMLCalcBufferTensorSize(type, rank, sizes, NULL), 0};
    *d = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, b};
}

/* A valid description: input {2, 3, 8, 8}, 4 ROIs, pooled 2 high x 3 wide. */
static void valid_pooling_desc(pooling_desc_set* s) {
    memset(s, 0, sizeof *s);
    const uint32_t in_sizes[4] = {2, 3, 8, 8}, roi_sizes[4] = {1, 1, 4, 5}, out_sizes[4] = {4, 3, 2, 3};
    memcpy(s->in_sizes, in_sizes, sizeof in_sizes);
    memcpy(s->roi_sizes, roi_sizes, sizeof roi_sizes);
    memcpy(s->out_sizes, out_sizes, sizeof out_sizes);
    s->pool.SpatialScale = 1.0f;
    s->pool.PooledSize = (DML_SIZE_2D){3, 2};
    s->op = (DML_OPERATOR_DESC){DML_OPERATOR_ROI_POOLING, &s->pool};
}

/* (Re)builds the tensor descs from the sizes; rank and types as given. */
static void build_pooling_desc(pooling_desc_set* s, uint32_t in_rank, uint32_t roi_rank, uint32_t out_rank,
                               DML_TENSOR_DATA_TYPE in_type, DML_TENSOR_DATA_TYPE roi_type,
                               DML_TENSOR_DATA_TYPE out_type) {
    set_tensor(&s->in, &s->in_desc, in_type, in_rank, s->in_sizes);
    set_tensor(&s->roi, &s->roi_desc, roi_type, roi_rank, s->roi_sizes);
    set_tensor(&s->out, &s->out_desc, out_type, out_rank, s->out_sizes);
    s->pool.InputTensor = &s->in_desc;
    s->pool.ROITensor = &s->roi_desc;
    s->pool.OutputTensor = &s->out_desc;
}

static HRESULT create_pooling(DMLDevice* device, const pooling_desc_set* s) {
    DMLOperator* op = NULL;
    HRESULT status = dmlCreateOperator(device, &s->op, &op);
    dmlReleaseOperator(op);
    return status;
}

#define F32 DML_TENSOR_DATA_TYPE_FLOAT32
#define F16 DML_TENSOR_DATA_TYPE_FLOAT16

TEST_CASE(validation) {
    DMLDevice* device = test_device(0);
    pooling_desc_set s;
    /* The valid description is accepted, in both types, at feature level 1.0 too. */
    valid_pooling_desc(&s);
    build_pooling_desc(&s, 4, 4, 4, F32, F32, F32);
    EXPECT_STATUS(create_pooling(device, &s), S_OK, NULL);
    build_pooling_desc(&s, 4, 4, 4, F16, F16, F16);
    EXPECT_STATUS(create_pooling(device, &s), S_OK, NULL);
    DML_DEVICE_DESC level_1 = {.FeatureLevel = DML_FEATURE_LEVEL_1_0};
    DMLDevice* device_1 = NULL;
    EXPECT_STATUS(dmlCreateDevice(&level_1, &device_1), S_OK, NULL);
    EXPECT_STATUS(create_pooling(device_1, &s), S_OK, NULL);
    dmlReleaseDevice(device_1);

    /* Every tensor is required. */
    valid_pooling_desc(&s);
    build_pooling_desc(&s, 4, 4, 4, F32, F32, F32);
    s.pool.InputTensor = NULL;
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "InputTensor", "required");
    build_pooling_desc(&s, 4, 4, 4, F32, F32, F32);
    s.pool.ROITensor = NULL;
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "ROITensor", "required");
    build_pooling_desc(&s, 4, 4, 4, F32, F32, F32);
    s.pool.OutputTensor = NULL;
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "OutputTensor", "required");

    /* 4-D only (the ROI tensor too: RP-7). */
    valid_pooling_desc(&s);
    s.in_sizes[4] = 1;
    build_pooling_desc(&s, 5, 4, 4, F32, F32, F32);
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "InputTensor.DimensionCount");
    valid_pooling_desc(&s);
    s.roi_sizes[0] = 4;
    s.roi_sizes[1] = 5; /* {R, 5} */
    build_pooling_desc(&s, 4, 2, 4, F32, F32, F32);
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "ROITensor.DimensionCount");
    valid_pooling_desc(&s);
    build_pooling_desc(&s, 4, 4, 3, F32, F32, F32);
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "OutputTensor.DimensionCount");

    /* Types: FLOAT32 or FLOAT16, one type for all three. */
    valid_pooling_desc(&s);
    build_pooling_desc(&s, 4, 4, 4, DML_TENSOR_DATA_TYPE_UINT32, DML_TENSOR_DATA_TYPE_UINT32,
                       DML_TENSOR_DATA_TYPE_UINT32);
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "InputTensor.DataType", "FLOAT16");
    build_pooling_desc(&s, 4, 4, 4, DML_TENSOR_DATA_TYPE_FLOAT64, DML_TENSOR_DATA_TYPE_FLOAT64,
                       DML_TENSOR_DATA_TYPE_FLOAT64);
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "InputTensor.DataType");
    build_pooling_desc(&s, 4, 4, 4, F32, F16, F32);
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "ROITensor.DataType");
    build_pooling_desc(&s, 4, 4, 4, F16, F16, F32);
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "OutputTensor.DataType");

    /* ROITensor is {1, 1, R, 5}. */
    valid_pooling_desc(&s);
    s.roi_sizes[0] = 2;
    build_pooling_desc(&s, 4, 4, 4, F32, F32, F32);
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "ROITensor.Sizes[0]");
    valid_pooling_desc(&s);
    s.roi_sizes[1] = 4;
    build_pooling_desc(&s, 4, 4, 4, F32, F32, F32);
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "ROITensor.Sizes[1]");
    valid_pooling_desc(&s);
    s.roi_sizes[3] = 4;
    build_pooling_desc(&s, 4, 4, 4, F32, F32, F32);
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "ROITensor.Sizes[3]", "5");

    /* OutputTensor is {R, C, PooledSize.Height, PooledSize.Width}. */
    valid_pooling_desc(&s);
    s.out_sizes[0] = 3;
    build_pooling_desc(&s, 4, 4, 4, F32, F32, F32);
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "OutputTensor.Sizes[0]", "ROITensor");
    valid_pooling_desc(&s);
    s.out_sizes[1] = 2;
    build_pooling_desc(&s, 4, 4, 4, F32, F32, F32);
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "OutputTensor.Sizes[1]", "channel");
    /* RP-1: by field name. Height 2 <-> Sizes[2], Width 3 <-> Sizes[3]; the
     * swapped order (ONNX Runtime's aggregate initialiser) is rejected. */
    valid_pooling_desc(&s);
    build_pooling_desc(&s, 4, 4, 4, F32, F32, F32);
    s.pool.PooledSize = (DML_SIZE_2D){2, 3};
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "PooledSize.Height", "Sizes[2]");
    s.pool.PooledSize = (DML_SIZE_2D){4, 2};
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "PooledSize.Width", "Sizes[3]");
    s.pool.PooledSize = (DML_SIZE_2D){0, 2};
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "PooledSize.Width", ">= 1");
    s.pool.PooledSize = (DML_SIZE_2D){3, 0};
    EXPECT_STATUS(create_pooling(device, &s), E_INVALIDARG, "ROI_POOLING", "PooledSize.Height", ">= 1");

    /* Slots: inputs {Input, ROI}, outputs {Output}. */
    valid_pooling_desc(&s);
    build_pooling_desc(&s, 4, 4, 4, F32, F32, F32);
    DMLOperator* op = NULL;
    EXPECT_STATUS(dmlCreateOperator(device, &s.op, &op), S_OK, NULL);
    UINT inputs = 0, outputs = 0;
    EXPECT_STATUS(dmlGetOperatorSlotCounts(op, &inputs, &outputs), S_OK, NULL);
    EXPECT(inputs == 2 && outputs == 1, "slot counts %u/%u, expected 2/1", inputs, outputs);
    dmlReleaseOperator(op);
    dmlReleaseDevice(device);
}
