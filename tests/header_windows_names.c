/* The public header in a program that already has the Windows-style names:
 * its own macros (spelt differently) and typedefs (DML_WINDOWS_TYPES_DEFINED)
 * are kept, and libdml's statuses still read as the program expects. Built
 * with -std=c11 -pedantic -Werror: a redefinition would fail the build. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef unsigned int UINT;
typedef int INT;
typedef unsigned long long UINT64; /* another type than uint64_t, same size */
typedef float FLOAT;
typedef int BOOL;
typedef int HRESULT;
#define DML_WINDOWS_TYPES_DEFINED
#define S_OK 0
#define E_INVALIDARG ((HRESULT)0x80070057L)
#define FAILED(status) ((status) < 0)
#define SUCCEEDED(status) ((status) >= 0)

#include <dml/dml.h>

int main(void) {
    int failed = 0;
    DMLDevice* device = NULL;
    if (dmlCreateDevice(NULL, &device) != S_OK) failed++;
    DML_DEVICE_DESC bad = {.Backend = (DML_BACKEND)7};
    DMLDevice* other = NULL;
    HRESULT status = dmlCreateDevice(&bad, &other);
    if (!FAILED(status) || status != E_INVALIDARG || strstr(dmlGetLastErrorMessage(), "Backend") == NULL) failed++;
    /* The header's own names still come from it. */
    if ((unsigned)DXGI_ERROR_DEVICE_REMOVED != 0x887A0005u || !SUCCEEDED(S_FALSE)) failed++;
    UINT64 total = 0;
    UINT sizes[4] = {1, 1, 3, 5};
    DML_BUFFER_TENSOR_DESC tensor = {DML_TENSOR_DATA_TYPE_FLOAT16, DML_TENSOR_FLAG_NONE, 4, sizes, NULL, 0, 0};
    total = tensor.TotalTensorSizeInBytes = DMLCalcBufferTensorSize(tensor.DataType, 4, sizes, NULL);
    if (total != 32) failed++;
    dmlReleaseDevice(device);
    printf("%d passed, %d failed\n", failed ? 0 : 1, failed ? 1 : 0);
    return failed != 0;
}
