/* Status and the per-thread message of the last failure. */
#ifndef DML_CORE_STATUS_H
#define DML_CORE_STATUS_H

#include "dml/dml.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DML_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define DML_PRINTF(fmt_index, first_arg)
#endif

/* Records a message for dmlGetLastErrorMessage() and returns status, so a
 * failure reads `return dml_fail(E_INVALIDARG, "...", ...);`. */
HRESULT dml_fail(HRESULT status, const char* format, ...) DML_PRINTF(2, 3);

/* A DML_FEATURE_LEVEL as DirectML names it: 0x4100 prints as "4.1". */
#define DML_LEVEL_FORMAT "%u.%u"
#define DML_LEVEL_ARGS(level) ((unsigned)(level) >> 12), (((unsigned)(level) >> 8) & 0xFu)

/* Clears the message at the start of every public call. */
void dml_clear_error(void);

/* Evaluates expr once; returns its status from the enclosing function on failure. */
#define DML_TRY(expr)                                                                                                  \
    do {                                                                                                               \
        HRESULT dml_try_status_ = (expr);                                                                              \
        if (FAILED(dml_try_status_)) return dml_try_status_;                                                           \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
