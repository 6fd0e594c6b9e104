/* A program outside the libdml tree, built against an installed libdml. */
#include <dml/dml.h>
#include <stdio.h>

int main(void) {
    DMLDevice* device = NULL;
    if (FAILED(dmlCreateDevice(NULL, &device))) return 1;
    UINT sizes[4] = {1, 1, 3, 5};
    int ok = DMLCalcBufferTensorSize(DML_TENSOR_DATA_TYPE_FLOAT16, 4, sizes, NULL) == 32;
    dmlReleaseDevice(device);
    printf("consumer of libdml %s: %s\n", dmlGetVersionString(), ok ? "ok" : "wrong buffer size");
    return ok ? 0 : 1;
}
