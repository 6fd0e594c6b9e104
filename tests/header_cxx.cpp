// The public header compiles as C++ (extern "C", no C-only constructs).
#include <dml/dml.h>

#include <cstdio>

int main() {
    DML_MAX_POOLING2_OPERATOR_DESC desc = {};
    DML_OPERATOR_DESC op = {DML_OPERATOR_MAX_POOLING2, &desc};
    bool ok = op.Type == 110 && dmlDataTypeSize(DML_TENSOR_DATA_TYPE_FLOAT16) == 2;
    std::printf("%d passed, %d failed\n", ok ? 1 : 0, ok ? 0 : 1);
    return ok ? 0 : 1;
}
