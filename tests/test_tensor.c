/* Tensor descriptions: the buffer-size formula (examples TS-1..8) and every
 * validation rule of spec tensors.md §3, exercised through MAX_POOLING1
 * (the message must name the operator and the field). */
#include <string.h>

#include "harness.h"

TEST_CASE(buffer_size_golden_vectors) {
    static const struct {
        const char* id;
        DML_TENSOR_DATA_TYPE type;
        UINT rank;
        UINT sizes[4];
        UINT strides[4];
        int has_strides;
        UINT64 expected;
    } cases[] = {
        {"TS-1", DML_TENSOR_DATA_TYPE_FLOAT16, 4, {1, 1, 3, 5}, {0}, 0, 32},
        {"TS-2", DML_TENSOR_DATA_TYPE_FLOAT32, 4, {1, 1, 3, 5}, {0}, 0, 60},
        {"TS-3", DML_TENSOR_DATA_TYPE_FLOAT32, 4, {1, 1, 3, 5}, {15, 1, 5, 1}, 1, 60},
        {"TS-4", DML_TENSOR_DATA_TYPE_UINT8, 4, {1, 1, 2, 3}, {6, 6, 5, 1}, 1, 8},
        {"TS-5", DML_TENSOR_DATA_TYPE_FLOAT32, 4, {1, 1, 2, 3}, {0, 0, 0, 1}, 1, 12},
        {"TS-6", DML_TENSOR_DATA_TYPE_INT8, 1, {3}, {0}, 0, 4},
        {"TS-7", DML_TENSOR_DATA_TYPE_FLOAT16, 4, {1, 1, 1, 1}, {0}, 0, 4},
        {"TS-8", DML_TENSOR_DATA_TYPE_INT64, 2, {2, 3}, {1, 2}, 1, 48},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        UINT64 got = DMLCalcBufferTensorSize(cases[i].type, cases[i].rank, cases[i].sizes,
                                             cases[i].has_strides ? cases[i].strides : NULL);
        EXPECT(got == cases[i].expected, "%s: %llu, expected %llu", cases[i].id, (unsigned long long)got,
               (unsigned long long)cases[i].expected);
    }
}

TEST_CASE(buffer_size_edge_cases) {
    UINT sizes[2] = {3, 3};
    EXPECT(DMLCalcBufferTensorSize(DML_TENSOR_DATA_TYPE_UNKNOWN, 2, sizes, NULL) == 0, "unknown type gives 0");
    EXPECT(DMLCalcBufferTensorSize((DML_TENSOR_DATA_TYPE)99, 2, sizes, NULL) == 0, "invalid type gives 0");
    /* 64-bit arithmetic: the 32-bit helper would wrap here. */
    UINT big[2] = {65536, 65536};
    EXPECT(DMLCalcBufferTensorSize(DML_TENSOR_DATA_TYPE_FLOAT32, 2, big, NULL) == 17179869184ull,
           "2^32 elements of 4 bytes");
    UINT huge_strides[2] = {0xFFFFFFFFu, 0xFFFFFFFFu};
    EXPECT(DMLCalcBufferTensorSize(DML_TENSOR_DATA_TYPE_FLOAT64, 2, big, huge_strides) ==
               ((65535ull * 0xFFFFFFFFull * 2 + 1) * 8),
           "large strides do not wrap");
    EXPECT(dmlDataTypeSize(DML_TENSOR_DATA_TYPE_UINT4) == 0, "sub-byte types are out of scope");
}

/* A MAX_POOLING1 description whose input tensor the case changes. */
typedef struct pool_fixture {
    UINT in_sizes[4], in_strides[4], out_sizes[4], out_strides[4];
    DML_BUFFER_TENSOR_DESC in, out;
    DML_TENSOR_DESC in_desc, out_desc;
    UINT window[2], strides[2], padding[2];
    DML_MAX_POOLING1_OPERATOR_DESC pool;
    DML_OPERATOR_DESC op;
} pool_fixture;

static void fixture_init(pool_fixture* f) {
    memset(f, 0, sizeof *f);
    UINT in_sizes[4] = {1, 2, 4, 4}, out_sizes[4] = {1, 2, 3, 3};
    memcpy(f->in_sizes, in_sizes, sizeof in_sizes);
    memcpy(f->out_sizes, out_sizes, sizeof out_sizes);
    f->in = (DML_BUFFER_TENSOR_DESC){DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_FLAG_NONE, 4, f->in_sizes, NULL, 128, 0};
    f->out = (DML_BUFFER_TENSOR_DESC){DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_FLAG_NONE, 4, f->out_sizes, NULL, 72, 0};
    f->in_desc = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, &f->in};
    f->out_desc = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, &f->out};
    f->window[0] = f->window[1] = 2;
    f->strides[0] = f->strides[1] = 1;
    f->pool = (DML_MAX_POOLING1_OPERATOR_DESC){&f->in_desc, &f->out_desc, NULL,       2,
                                               f->strides,  f->window,    f->padding, f->padding};
    f->op = (DML_OPERATOR_DESC){DML_OPERATOR_MAX_POOLING1, &f->pool};
}

static HRESULT create(DMLDevice* device, const pool_fixture* f) {
    DMLOperator* op = NULL;
    HRESULT status = dmlCreateOperator(device, &f->op, &op);
    EXPECT(FAILED(status) == (op == NULL), "an operator is returned exactly on success");
    dmlReleaseOperator(op);
    return status;
}

TEST_CASE(tensor_validation_rules) {
    DMLDevice* device = test_device(1);
    pool_fixture f;

    fixture_init(&f);
    EXPECT_STATUS(create(device, &f), S_OK, NULL);

    fixture_init(&f);
    f.in_desc.Type = DML_TENSOR_TYPE_INVALID;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "MAX_POOLING1", "InputTensor.Type");

    fixture_init(&f);
    f.in_desc.Desc = NULL;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.Desc");

    fixture_init(&f);
    f.in.DataType = DML_TENSOR_DATA_TYPE_UNKNOWN;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.DataType");

    fixture_init(&f);
    f.in.DataType = DML_TENSOR_DATA_TYPE_INT4;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.DataType");

    fixture_init(&f);
    f.in.Flags = (DML_TENSOR_FLAGS)0x2;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.Flags");

    fixture_init(&f);
    f.out.Flags = DML_TENSOR_FLAG_OWNED_BY_DML;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "OutputTensor.Flags", "OWNED_BY_DML");

    fixture_init(&f);
    f.in.DimensionCount = 0;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.DimensionCount");

    fixture_init(&f);
    f.in.DimensionCount = 9;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.DimensionCount");

    fixture_init(&f);
    f.in.Sizes = NULL;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.Sizes");

    fixture_init(&f);
    f.in_sizes[2] = 0;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.Sizes[2]", ">= 1");

    fixture_init(&f);
    f.in.TotalTensorSizeInBytes = 124;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.TotalTensorSizeInBytes", "128");

    fixture_init(&f);
    f.in.TotalTensorSizeInBytes = 130; /* large enough, not a multiple of 4 (decision T-2) */
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.TotalTensorSizeInBytes", "multiple of 4");

    fixture_init(&f);
    f.in.TotalTensorSizeInBytes = 1024; /* larger is allowed */
    EXPECT_STATUS(create(device, &f), S_OK, NULL);

    fixture_init(&f);
    f.in.GuaranteedBaseOffsetAlignment = 24;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.GuaranteedBaseOffsetAlignment", "power of two");

    fixture_init(&f);
    f.in.GuaranteedBaseOffsetAlignment = 2; /* below the element size */
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.GuaranteedBaseOffsetAlignment");

    fixture_init(&f);
    f.in.GuaranteedBaseOffsetAlignment = 256;
    EXPECT_STATUS(create(device, &f), S_OK, NULL);

    /* Element limit (decision T-1): logical count and addressed range. */
    fixture_init(&f);
    f.in_sizes[0] = 65536;
    f.in_sizes[1] = 65536;
    f.out_sizes[0] = 65536;
    f.out_sizes[1] = 65536;
    f.in.TotalTensorSizeInBytes = UINT64_MAX - 3;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor", "2^32 - 1 elements");

    fixture_init(&f);
    UINT far_strides[4] = {16, 0xFFFFFFFFu, 4, 1}; /* last index 2^32 + 14 */
    f.in.Strides = far_strides;
    f.in.TotalTensorSizeInBytes = UINT64_MAX - 3;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor.Strides", "2^32 - 1");

    /* Zero strides: inputs may broadcast, outputs may not (decision T-3). */
    fixture_init(&f);
    UINT broadcast[4] = {0, 0, 4, 1};
    f.in.Strides = broadcast;
    f.in.TotalTensorSizeInBytes = 64;
    EXPECT_STATUS(create(device, &f), S_OK, NULL);

    fixture_init(&f);
    UINT out_broadcast[4] = {0, 0, 3, 1};
    f.out.Strides = out_broadcast;
    f.out.TotalTensorSizeInBytes = 36;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "OutputTensor.Strides[1]", "broadcast");

    fixture_init(&f);
    UINT out_unit_zero[4] = {0, 9, 3, 1}; /* zero stride on a size-1 dimension is fine */
    f.out.Strides = out_unit_zero;
    EXPECT_STATUS(create(device, &f), S_OK, NULL);

    fixture_init(&f);
    f.pool.InputTensor = NULL;
    EXPECT_STATUS(create(device, &f), E_INVALIDARG, "InputTensor is NULL");

    dmlReleaseDevice(device);
}
