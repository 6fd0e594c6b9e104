/*
 * binding.h — the pieces of libdml's Python extension (libdml._libdml).
 *
 *   tensor_view.c  TensorView: a tensor borrowed through DLPack (zero copy)
 *   operators.c    the description layouts of the operators and their builder
 *   module.c       Device: compiled-operator cache, dispatch, errors
 *
 * The extension is a thin layer: libdml validates every description and
 * binding; the layer only turns Python values into DirectML structs and
 * refuses what those structs cannot express (negative strides, sizes above
 * UINT_MAX, data types DirectML lacks, tensors on another device).
 */
#ifndef LIBDML_PYTHON_BINDING_H
#define LIBDML_PYTHON_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dml/dml.h>

#define VIEW_MAX_DIMENSIONS DML_TENSOR_DIMENSION_COUNT_MAX1

/* Where a tensor's memory lives, as libdml's backends see it. */
typedef enum MemoryKind { MEMORY_HOST = 0, MEMORY_CUDA = 1 } MemoryKind;

typedef struct TensorView {
    PyObject_HEAD PyObject* parent; /* the view this one was derived from (owns the memory); NULL for a root */
    void* managed;                  /* root only: DLManagedTensor or DLManagedTensorVersioned, deleted with the view */
    int versioned;                  /* managed is a DLManagedTensorVersioned */
    char* address;                  /* data + byte_offset */
    MemoryKind memory;
    int device_id;
    int readonly;
    DML_TENSOR_DATA_TYPE data_type;
    UINT dimension_count;
    UINT sizes[VIEW_MAX_DIMENSIONS];
    UINT strides[VIEW_MAX_DIMENSIONS]; /* in elements, as DirectML's Strides */
} TensorView;

extern PyTypeObject TensorViewType;

/* Raises the Python exception that matches status, carrying libdml's message. */
PyObject* raise_dml_error(HRESULT status, const char* context);

/* The exception type of failures that are neither ValueError nor MemoryError. */
extern PyObject* LibdmlError;

/* ---- operators.c ---- */

typedef struct OperatorLayout OperatorLayout;

/* The layout of the operator DirectML names so ("ROI_ALIGN1"); NULL if unknown. */
const OperatorLayout* find_operator_layout(const char* name);

/* Storage for any description the binding builds. */
typedef union OperatorDescStorage {
    DML_MAX_POOLING2_OPERATOR_DESC max_pooling2;
    DML_MAX_POOLING_GRAD_OPERATOR_DESC max_pooling_grad;
    DML_ROI_POOLING_OPERATOR_DESC roi_pooling;
    DML_ROI_ALIGN1_OPERATOR_DESC roi_align1;
    DML_ROI_ALIGN_GRAD_OPERATOR_DESC roi_align_grad;
    DML_BATCH_NORMALIZATION_OPERATOR_DESC batch_normalization;
    DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC batch_normalization_training;
    DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC batch_normalization_grad;
    DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC batch_normalization_training_grad;
} OperatorDescStorage;

/* Every fusable activation struct of dml_types.h is its two (NULL) tensor
 * pointers followed by at most two FLOAT parameters. */
typedef struct FusedActivationDesc {
    const DML_TENSOR_DESC* InputTensor;
    const DML_TENSOR_DESC* OutputTensor;
    FLOAT Parameters[2];
} FusedActivationDesc;

#define BUILDER_MAX_TENSORS 8
#define BUILDER_MAX_ARRAYS 5
#define BUILDER_MAX_KEY 1024

/* One operator description built from Python values, with the tensors to
 * bind in slot order and a key that identifies the description. Lives on the
 * caller's stack; dmlCreateOperator deep-copies what it keeps. */
typedef struct DescriptionBuilder {
    OperatorDescStorage storage;
    DML_OPERATOR_DESC desc;
    DML_TENSOR_DESC tensor_descs[BUILDER_MAX_TENSORS];
    DML_BUFFER_TENSOR_DESC buffer_descs[BUILDER_MAX_TENSORS];
    UINT arrays[BUILDER_MAX_ARRAYS][VIEW_MAX_DIMENSIONS];
    FusedActivationDesc activation_storage;
    DML_OPERATOR_DESC activation;
    UINT input_count;
    UINT output_count;
    TensorView* inputs[BUILDER_MAX_TENSORS]; /* NULL for an absent optional tensor */
    TensorView* outputs[BUILDER_MAX_TENSORS];
    unsigned char key[BUILDER_MAX_KEY];
    size_t key_length;
} DescriptionBuilder;

/* Fills builder from fields (a tuple of values in the struct's field order:
 * TensorView or None for tensors, int, float, tuple of ints for arrays,
 * (width, height) for DML_SIZE_2D, (type, parameters) or None for a fused
 * activation), checking that every tensor lies in memory of kind memory on
 * device_id. Returns 0, or -1 with a Python exception set. */
int build_description(DescriptionBuilder* builder, const OperatorLayout* layout, PyObject* fields, MemoryKind memory,
                      int device_id);

/* Appends bytes to builder's key; -1 with an exception if it is full. */
int append_key(DescriptionBuilder* builder, const void* bytes, size_t count);

#endif
