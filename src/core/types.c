/* Data type facts (spec tensors.md §1.1) and the library version. */
#include "dml/dml.h"

#define DML_STRINGIFY_(x) #x
#define DML_STRINGIFY(x) DML_STRINGIFY_(x)

const char* dmlGetVersionString(void) {
    return DML_STRINGIFY(DML_VERSION_MAJOR) "." DML_STRINGIFY(DML_VERSION_MINOR) "." DML_STRINGIFY(DML_VERSION_PATCH);
}

UINT dmlDataTypeSize(DML_TENSOR_DATA_TYPE dataType) {
    switch (dataType) {
    case DML_TENSOR_DATA_TYPE_UINT8:
    case DML_TENSOR_DATA_TYPE_INT8: return 1;
    case DML_TENSOR_DATA_TYPE_FLOAT16:
    case DML_TENSOR_DATA_TYPE_UINT16:
    case DML_TENSOR_DATA_TYPE_INT16: return 2;
    case DML_TENSOR_DATA_TYPE_FLOAT32:
    case DML_TENSOR_DATA_TYPE_UINT32:
    case DML_TENSOR_DATA_TYPE_INT32: return 4;
    case DML_TENSOR_DATA_TYPE_FLOAT64:
    case DML_TENSOR_DATA_TYPE_UINT64:
    case DML_TENSOR_DATA_TYPE_INT64: return 8;
    default: return 0; /* UNKNOWN, and UINT4/INT4 which are out of scope */
    }
}

const char* dmlDataTypeName(DML_TENSOR_DATA_TYPE dataType) {
    static const char* const names[] = {"UNKNOWN", "FLOAT32", "FLOAT16", "UINT32", "UINT16", "UINT8", "INT32",
                                        "INT16",   "INT8",    "FLOAT64", "UINT64", "INT64",  "UINT4", "INT4"};
    unsigned index = (unsigned)dataType;
    return index < sizeof names / sizeof names[0] ? names[index] : NULL;
}
