/* A short tour of the libdml API: 2x2 max pooling with indices over a 3x3
 * image (the example of DirectML's MAX_POOLING_GRAD page). */
#include <dml/dml.h>
#include <stdio.h>

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        HRESULT status_ = (call);                                                                                      \
        if (FAILED(status_)) {                                                                                         \
            fprintf(stderr, "%s failed: %s: %s\n", #call, dmlStatusName(status_), dmlGetLastErrorMessage());           \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

int main(void) {
    float input[9] = {1, 2, 3, 2, 4, 2, 5, 6, 7};
    float output[4];
    uint32_t indices[4];

    UINT input_sizes[4] = {1, 1, 3, 3}, output_sizes[4] = {1, 1, 2, 2};
    DML_BUFFER_TENSOR_DESC input_buffer = {
        DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_FLAG_NONE, 4, input_sizes, NULL, sizeof input, 0};
    DML_BUFFER_TENSOR_DESC output_buffer = {
        DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_FLAG_NONE, 4, output_sizes, NULL, sizeof output, 0};
    DML_BUFFER_TENSOR_DESC indices_buffer = {
        DML_TENSOR_DATA_TYPE_UINT32, DML_TENSOR_FLAG_NONE, 4, output_sizes, NULL, sizeof indices, 0};
    DML_TENSOR_DESC input_desc = {DML_TENSOR_TYPE_BUFFER, &input_buffer};
    DML_TENSOR_DESC output_desc = {DML_TENSOR_TYPE_BUFFER, &output_buffer};
    DML_TENSOR_DESC indices_desc = {DML_TENSOR_TYPE_BUFFER, &indices_buffer};

    UINT strides[2] = {1, 1}, window[2] = {2, 2}, padding[2] = {0, 0}, dilations[2] = {1, 1};
    DML_MAX_POOLING2_OPERATOR_DESC pooling = {&input_desc, &output_desc, &indices_desc, 2,        strides,
                                              window,      padding,      padding,       dilations};
    DML_OPERATOR_DESC op_desc = {DML_OPERATOR_MAX_POOLING2, &pooling};

    DMLDevice* device;
    DMLOperator* op;
    DMLCompiledOperator* compiled;
    void *input_mem, *output_mem, *indices_mem;
    CHECK(dmlCreateDevice(NULL, &device)); /* CPU backend, all cores */
    CHECK(dmlCreateOperator(device, &op_desc, &op));
    CHECK(dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &compiled));
    dmlReleaseOperator(op); /* the compiled operator keeps what it needs */
    CHECK(dmlInitializeOperator(compiled, 0, NULL, NULL));

    CHECK(dmlAllocateBuffer(device, sizeof input, &input_mem));
    CHECK(dmlAllocateBuffer(device, sizeof output, &output_mem));
    CHECK(dmlAllocateBuffer(device, sizeof indices, &indices_mem));
    CHECK(dmlUpload(device, input_mem, input, sizeof input));

    DML_BUFFER_BINDING in = {input_mem, 0, sizeof input};
    DML_BUFFER_BINDING out[2] = {{output_mem, 0, sizeof output}, {indices_mem, 0, sizeof indices}};
    DML_BINDING_DESC inputs[1] = {{DML_BINDING_TYPE_BUFFER, &in}};
    DML_BINDING_DESC outputs[2] = {{DML_BINDING_TYPE_BUFFER, &out[0]}, {DML_BINDING_TYPE_BUFFER, &out[1]}};
    DML_DISPATCH_BINDINGS bindings = {
        1, inputs, 2, outputs, {DML_BINDING_TYPE_NONE, NULL}, {DML_BINDING_TYPE_NONE, NULL}};
    CHECK(dmlDispatch(compiled, &bindings));
    CHECK(dmlSynchronize(device));
    CHECK(dmlDownload(device, output, output_mem, sizeof output));
    CHECK(dmlDownload(device, indices, indices_mem, sizeof indices));

    printf("libdml %s: MAX_POOLING2, 2x2 window, stride 1\n", dmlGetVersionString());
    printf("input   [[1 2 3] [2 4 2] [5 6 7]]\n");
    printf("output  [[%g %g] [%g %g]]\n", output[0], output[1], output[2], output[3]);
    printf("indices [[%u %u] [%u %u]]\n", indices[0], indices[1], indices[2], indices[3]);

    dmlFreeBuffer(device, input_mem);
    dmlFreeBuffer(device, output_mem);
    dmlFreeBuffer(device, indices_mem);
    dmlReleaseCompiledOperator(compiled);
    dmlReleaseDevice(device);
    return 0;
}
