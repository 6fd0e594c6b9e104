#include "status.h"

#include <stdarg.h>
#include <stdio.h>

enum { DML_MESSAGE_CAPACITY = 1024 };

static _Thread_local char last_message[DML_MESSAGE_CAPACITY];

HRESULT dml_fail(HRESULT status, const char* format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(last_message, sizeof last_message, format, args);
    va_end(args);
    return status;
}

void dml_clear_error(void) { last_message[0] = '\0'; }

const char* dmlGetLastErrorMessage(void) { return last_message; }

/* One list of the statuses libdml returns; it generates the name lookup. */
#define DML_STATUS_LIST(X)                                                                                             \
    X(S_OK)                                                                                                            \
    X(S_FALSE)                                                                                                         \
    X(E_NOTIMPL)                                                                                                       \
    X(E_NOINTERFACE)                                                                                                   \
    X(E_POINTER)                                                                                                       \
    X(E_FAIL)                                                                                                          \
    X(E_OUTOFMEMORY)                                                                                                   \
    X(E_INVALIDARG)                                                                                                    \
    X(DXGI_ERROR_INVALID_CALL)                                                                                         \
    X(DXGI_ERROR_UNSUPPORTED)                                                                                          \
    X(DXGI_ERROR_DEVICE_REMOVED)                                                                                       \
    X(DXGI_ERROR_DEVICE_HUNG)                                                                                          \
    X(DXGI_ERROR_DEVICE_RESET)                                                                                         \
    X(DXGI_ERROR_DRIVER_INTERNAL_ERROR)

const char* dmlStatusName(HRESULT status) {
#define DML_STATUS_CASE(name)                                                                                          \
    if (status == name) return #name;
    DML_STATUS_LIST(DML_STATUS_CASE)
#undef DML_STATUS_CASE
    return "unknown HRESULT";
}
