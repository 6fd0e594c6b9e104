/*
 * npy.h — NumPy .npy files (format versions 1.0, 2.0 and 3.0).
 *
 * Reading: dtypes <f2 <f4 <f8 |i1 |u1 <i2 <u2 <i4 <u4 <i8 <u8 and |b1 (read
 * as UINT8); big-endian ('>') data is byte-swapped to the machine's order;
 * fortran_order True is rejected unless the layout is the same as C order
 * (at most one dimension larger than 1). Writing: version 1.0,
 * little-endian, C order.
 */
#ifndef DMLRUN_NPY_H
#define DMLRUN_NPY_H

#include <dml/dml.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { DMLRUN_NPY_MAX_RANK = 64 };

typedef struct dmlrun_npy_array {
    DML_TENSOR_DATA_TYPE type;
    uint32_t rank;
    uint64_t shape[DMLRUN_NPY_MAX_RANK];
    uint64_t element_count;
    uint8_t* data; /* points into the parsed bytes, in the machine's byte order */
    uint64_t data_bytes;
} dmlrun_npy_array;

/* Parses a whole .npy file held in bytes (big-endian data is swapped in
 * place). On failure writes the reason into error and returns false. */
bool dmlrun_npy_parse(uint8_t* bytes, size_t size, dmlrun_npy_array* array, char* error, size_t error_size);

/* Serializes data (element_count elements of type, the product of shape) as
 * a .npy file (format 1.0) into a malloc'ed buffer. */
bool dmlrun_npy_write(DML_TENSOR_DATA_TYPE type, uint32_t rank, const uint64_t* shape, const void* data,
                      uint64_t data_bytes, uint8_t** out, size_t* out_size, char* error, size_t error_size);

#endif /* DMLRUN_NPY_H */
