/*
 * The operators' description structs as field lists, and the builder that
 * fills one from a tuple of Python values.
 *
 * Each field names its struct member, so a layout is the struct written once
 * more in field order; tensor fields in that order are also the binding slots
 * (spec tensors.md §6.1: inputs first, then outputs, each in struct order).
 */
#include <stddef.h>
#include <string.h>

#include "binding.h"

typedef enum FieldKind {
    FIELD_INPUT,      /* const DML_TENSOR_DESC*, an input slot */
    FIELD_OUTPUT,     /* const DML_TENSOR_DESC*, an output slot */
    FIELD_UINT,       /* UINT or an enum */
    FIELD_BOOL,       /* BOOL */
    FIELD_FLOAT,      /* FLOAT */
    FIELD_UINT_ARRAY, /* const UINT*, DimensionCount entries */
    FIELD_SIZE_2D,    /* DML_SIZE_2D, from (width, height) */
    FIELD_ACTIVATION  /* const DML_OPERATOR_DESC*, a fused activation or NULL */
} FieldKind;

typedef struct Field {
    const char* name;
    FieldKind kind;
    size_t offset;
} Field;

#define LAYOUT_MAX_FIELDS 16

struct OperatorLayout {
    const char* name;
    DML_OPERATOR_TYPE type;
    Field fields[LAYOUT_MAX_FIELDS]; /* ends at the first field without a name */
};

#define FIELD(desc, member, kind)                                                                                      \
    { #member, kind, offsetof(desc, member) }

#define MP2 DML_MAX_POOLING2_OPERATOR_DESC
#define MPG DML_MAX_POOLING_GRAD_OPERATOR_DESC
#define RP DML_ROI_POOLING_OPERATOR_DESC
#define RA1 DML_ROI_ALIGN1_OPERATOR_DESC
#define RAG DML_ROI_ALIGN_GRAD_OPERATOR_DESC
#define BN DML_BATCH_NORMALIZATION_OPERATOR_DESC
#define BNT DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC
#define BNG DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC
#define BNTG DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC

/* The window of MAX_POOLING2 and MAX_POOLING_GRAD, after their tensors. */
#define POOLING_WINDOW_FIELDS(desc)                                                                                    \
    FIELD(desc, DimensionCount, FIELD_UINT), FIELD(desc, Strides, FIELD_UINT_ARRAY),                                   \
        FIELD(desc, WindowSize, FIELD_UINT_ARRAY), FIELD(desc, StartPadding, FIELD_UINT_ARRAY),                        \
        FIELD(desc, EndPadding, FIELD_UINT_ARRAY), FIELD(desc, Dilations, FIELD_UINT_ARRAY)

/* The two batch normalization gradients share one field list (two struct types). */
#define BN_GRAD_FIELDS(desc)                                                                                           \
    FIELD(desc, InputTensor, FIELD_INPUT), FIELD(desc, InputGradientTensor, FIELD_INPUT),                              \
        FIELD(desc, MeanTensor, FIELD_INPUT), FIELD(desc, VarianceTensor, FIELD_INPUT),                                \
        FIELD(desc, ScaleTensor, FIELD_INPUT), FIELD(desc, OutputGradientTensor, FIELD_OUTPUT),                        \
        FIELD(desc, OutputScaleGradientTensor, FIELD_OUTPUT), FIELD(desc, OutputBiasGradientTensor, FIELD_OUTPUT),     \
        FIELD(desc, Epsilon, FIELD_FLOAT)

static const OperatorLayout layouts[] = {
    {"MAX_POOLING2",
     DML_OPERATOR_MAX_POOLING2,
     {FIELD(MP2, InputTensor, FIELD_INPUT), FIELD(MP2, OutputTensor, FIELD_OUTPUT),
      FIELD(MP2, OutputIndicesTensor, FIELD_OUTPUT), POOLING_WINDOW_FIELDS(MP2)}},
    {"MAX_POOLING_GRAD",
     DML_OPERATOR_MAX_POOLING_GRAD,
     {FIELD(MPG, InputTensor, FIELD_INPUT), FIELD(MPG, InputGradientTensor, FIELD_INPUT),
      FIELD(MPG, OutputGradientTensor, FIELD_OUTPUT), POOLING_WINDOW_FIELDS(MPG)}},
    {"ROI_POOLING",
     DML_OPERATOR_ROI_POOLING,
     {FIELD(RP, InputTensor, FIELD_INPUT), FIELD(RP, ROITensor, FIELD_INPUT), FIELD(RP, OutputTensor, FIELD_OUTPUT),
      FIELD(RP, SpatialScale, FIELD_FLOAT), FIELD(RP, PooledSize, FIELD_SIZE_2D)}},
    {"ROI_ALIGN1",
     DML_OPERATOR_ROI_ALIGN1,
     {FIELD(RA1, InputTensor, FIELD_INPUT), FIELD(RA1, ROITensor, FIELD_INPUT),
      FIELD(RA1, BatchIndicesTensor, FIELD_INPUT), FIELD(RA1, OutputTensor, FIELD_OUTPUT),
      FIELD(RA1, ReductionFunction, FIELD_UINT), FIELD(RA1, InterpolationMode, FIELD_UINT),
      FIELD(RA1, SpatialScaleX, FIELD_FLOAT), FIELD(RA1, SpatialScaleY, FIELD_FLOAT),
      FIELD(RA1, InputPixelOffset, FIELD_FLOAT), FIELD(RA1, OutputPixelOffset, FIELD_FLOAT),
      FIELD(RA1, OutOfBoundsInputValue, FIELD_FLOAT), FIELD(RA1, MinimumSamplesPerOutput, FIELD_UINT),
      FIELD(RA1, MaximumSamplesPerOutput, FIELD_UINT), FIELD(RA1, AlignRegionsToCorners, FIELD_BOOL)}},
    {"ROI_ALIGN_GRAD",
     DML_OPERATOR_ROI_ALIGN_GRAD,
     {FIELD(RAG, InputTensor, FIELD_INPUT), FIELD(RAG, InputGradientTensor, FIELD_INPUT),
      FIELD(RAG, ROITensor, FIELD_INPUT), FIELD(RAG, BatchIndicesTensor, FIELD_INPUT),
      FIELD(RAG, OutputGradientTensor, FIELD_OUTPUT), FIELD(RAG, OutputROIGradientTensor, FIELD_OUTPUT),
      FIELD(RAG, ReductionFunction, FIELD_UINT), FIELD(RAG, InterpolationMode, FIELD_UINT),
      FIELD(RAG, SpatialScaleX, FIELD_FLOAT), FIELD(RAG, SpatialScaleY, FIELD_FLOAT),
      FIELD(RAG, InputPixelOffset, FIELD_FLOAT), FIELD(RAG, OutputPixelOffset, FIELD_FLOAT),
      FIELD(RAG, MinimumSamplesPerOutput, FIELD_UINT), FIELD(RAG, MaximumSamplesPerOutput, FIELD_UINT),
      FIELD(RAG, AlignRegionsToCorners, FIELD_BOOL)}},
    {"BATCH_NORMALIZATION",
     DML_OPERATOR_BATCH_NORMALIZATION,
     {FIELD(BN, InputTensor, FIELD_INPUT), FIELD(BN, MeanTensor, FIELD_INPUT), FIELD(BN, VarianceTensor, FIELD_INPUT),
      FIELD(BN, ScaleTensor, FIELD_INPUT), FIELD(BN, BiasTensor, FIELD_INPUT), FIELD(BN, OutputTensor, FIELD_OUTPUT),
      FIELD(BN, Spatial, FIELD_BOOL), FIELD(BN, Epsilon, FIELD_FLOAT), FIELD(BN, FusedActivation, FIELD_ACTIVATION)}},
    {"BATCH_NORMALIZATION_TRAINING",
     DML_OPERATOR_BATCH_NORMALIZATION_TRAINING,
     {FIELD(BNT, InputTensor, FIELD_INPUT), FIELD(BNT, ScaleTensor, FIELD_INPUT), FIELD(BNT, BiasTensor, FIELD_INPUT),
      FIELD(BNT, FusedAddTensor, FIELD_INPUT), FIELD(BNT, OutputTensor, FIELD_OUTPUT),
      FIELD(BNT, OutputMeanTensor, FIELD_OUTPUT), FIELD(BNT, OutputVarianceTensor, FIELD_OUTPUT),
      FIELD(BNT, Epsilon, FIELD_FLOAT), FIELD(BNT, FusedActivation, FIELD_ACTIVATION)}},
    {"BATCH_NORMALIZATION_GRAD", DML_OPERATOR_BATCH_NORMALIZATION_GRAD, {BN_GRAD_FIELDS(BNG)}},
    {"BATCH_NORMALIZATION_TRAINING_GRAD", DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, {BN_GRAD_FIELDS(BNTG)}},
};

const OperatorLayout* find_operator_layout(const char* name) {
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (strcmp(layouts[i].name, name) == 0) return &layouts[i];
    return NULL;
}

/* The key's capacity covers the largest description, so running out is a
 * bug of this file. */
int append_key(DescriptionBuilder* builder, const void* bytes, size_t count) {
    if (builder->key_length + count > sizeof builder->key) {
        PyErr_SetString(PyExc_SystemError, "libdml: description key overflow");
        return -1;
    }
    memcpy(builder->key + builder->key_length, bytes, count);
    builder->key_length += count;
    return 0;
}

static int read_uint(const OperatorLayout* layout, const Field* field, PyObject* value, UINT* result) {
    unsigned long long number = PyLong_AsUnsignedLongLong(value);
    if (number == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: %s must be an integer in [0, %u]", layout->name, field->name,
                     (unsigned)UINT32_MAX);
        return -1;
    }
    if (number > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: %s is %llu but must be at most %u", layout->name, field->name, number,
                     (unsigned)UINT32_MAX);
        return -1;
    }
    *result = (UINT)number;
    return 0;
}

static int read_float(const OperatorLayout* layout, const char* name, PyObject* value, FLOAT* result) {
    double number = PyFloat_AsDouble(value);
    if (number == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %s must be a number", layout->name, name);
        return -1;
    }
    *result = (FLOAT)number;
    return 0;
}

static int add_tensor(DescriptionBuilder* builder, const OperatorLayout* layout, const Field* field, PyObject* value,
                      MemoryKind memory, int device_id, const DML_TENSOR_DESC** slot) {
    int is_output = field->kind == FIELD_OUTPUT;
    TensorView* view = NULL;
    UINT index = builder->input_count + builder->output_count;
    if (value != Py_None) {
        if (!PyObject_TypeCheck(value, &TensorViewType)) {
            PyErr_Format(PyExc_TypeError, "%s: %s must be a tensor (TensorView) or None, not %s", layout->name,
                         field->name, Py_TYPE(value)->tp_name);
            return -1;
        }
        view = (TensorView*)value;
        static const char* const memory_names[] = {"cpu", "cuda"};
        if (view->memory != memory || (memory == MEMORY_CUDA && view->device_id != device_id)) {
            PyErr_Format(PyExc_ValueError, "%s: %s is in %s:%d memory but the operator runs on %s:%d", layout->name,
                         field->name, memory_names[view->memory], view->device_id, memory_names[memory], device_id);
            return -1;
        }
        if (is_output && view->readonly) {
            PyErr_Format(PyExc_ValueError, "%s: %s is read-only but is an output", layout->name, field->name);
            return -1;
        }
        DML_BUFFER_TENSOR_DESC* buffer = &builder->buffer_descs[index];
        buffer->DataType = view->data_type;
        buffer->Flags = DML_TENSOR_FLAG_NONE;
        buffer->DimensionCount = view->dimension_count;
        buffer->Sizes = view->sizes;
        buffer->Strides = view->strides;
        /* 0 on overflow: libdml then rejects the tensor with its own message. */
        buffer->TotalTensorSizeInBytes =
            DMLCalcBufferTensorSize(view->data_type, view->dimension_count, view->sizes, view->strides);
        buffer->GuaranteedBaseOffsetAlignment = 0;
        builder->tensor_descs[index].Type = DML_TENSOR_TYPE_BUFFER;
        builder->tensor_descs[index].Desc = buffer;
        *slot = &builder->tensor_descs[index];
    } else {
        *slot = NULL;
    }
    if (is_output)
        builder->outputs[builder->output_count++] = view;
    else
        builder->inputs[builder->input_count++] = view;
    unsigned char present = view != NULL;
    if (append_key(builder, &present, 1) != 0) return -1;
    if (view == NULL) return 0;
    if (append_key(builder, &view->data_type, sizeof view->data_type) != 0 ||
        append_key(builder, &view->dimension_count, sizeof view->dimension_count) != 0 ||
        append_key(builder, view->sizes, view->dimension_count * sizeof view->sizes[0]) != 0 ||
        append_key(builder, view->strides, view->dimension_count * sizeof view->strides[0]) != 0)
        return -1;
    return 0;
}

static int add_uint_array(DescriptionBuilder* builder, const OperatorLayout* layout, const Field* field,
                          PyObject* value, UINT dimension_count, int* array_count, const UINT** slot) {
    PyObject* sequence = PySequence_Fast(value, "");
    if (sequence == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %s must be a sequence of integers", layout->name, field->name);
        return -1;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
    if (count != (Py_ssize_t)dimension_count || *array_count >= BUILDER_MAX_ARRAYS) {
        PyErr_Format(PyExc_ValueError, "%s: %s has %zd entries but DimensionCount is %u", layout->name, field->name,
                     count, dimension_count);
        Py_DECREF(sequence);
        return -1;
    }
    UINT* array = builder->arrays[(*array_count)++];
    for (Py_ssize_t i = 0; i < count; i++) {
        if (read_uint(layout, field, PySequence_Fast_GET_ITEM(sequence, i), &array[i]) != 0) {
            Py_DECREF(sequence);
            return -1;
        }
    }
    Py_DECREF(sequence);
    *slot = array;
    return append_key(builder, array, (size_t)count * sizeof array[0]);
}

/* value: None, or (DML_OPERATOR_TYPE of the activation, (parameters...)). */
static int add_activation(DescriptionBuilder* builder, const OperatorLayout* layout, const Field* field,
                          PyObject* value, const DML_OPERATOR_DESC** slot) {
    unsigned char present = value != Py_None;
    if (append_key(builder, &present, 1) != 0) return -1;
    if (!present) {
        *slot = NULL;
        return 0;
    }
    PyObject* parameters;
    unsigned int type;
    if (!PyArg_ParseTuple(value, "IO", &type, &parameters)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %s must be None or (activation type, parameters)", layout->name,
                     field->name);
        return -1;
    }
    FusedActivationDesc* activation = &builder->activation_storage;
    memset(activation, 0, sizeof *activation);
    PyObject* sequence = PySequence_Fast(parameters, "");
    if (sequence == NULL || PySequence_Fast_GET_SIZE(sequence) > 2) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: %s takes at most 2 parameters", layout->name, field->name);
        Py_XDECREF(sequence);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(sequence); i++) {
        if (read_float(layout, field->name, PySequence_Fast_GET_ITEM(sequence, i), &activation->Parameters[i]) != 0) {
            Py_DECREF(sequence);
            return -1;
        }
    }
    Py_DECREF(sequence);
    builder->activation.Type = (DML_OPERATOR_TYPE)type;
    builder->activation.Desc = activation;
    *slot = &builder->activation;
    if (append_key(builder, &type, sizeof type) != 0) return -1;
    return append_key(builder, activation->Parameters, sizeof activation->Parameters);
}

int build_description(DescriptionBuilder* builder, const OperatorLayout* layout, PyObject* fields, MemoryKind memory,
                      int device_id) {
    memset(builder, 0, offsetof(DescriptionBuilder, key));
    builder->key_length = 0;
    int field_count = 0;
    while (field_count < LAYOUT_MAX_FIELDS && layout->fields[field_count].name != NULL)
        field_count++;
    if (!PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) != field_count) {
        PyErr_Format(PyExc_TypeError, "%s: expected a tuple of %d field values", layout->name, field_count);
        return -1;
    }
    if (append_key(builder, &layout->type, sizeof layout->type) != 0) return -1;
    char* desc = (char*)&builder->storage;
    UINT dimension_count = 0;
    int array_count = 0;
    for (int i = 0; i < field_count; i++) {
        const Field* field = &layout->fields[i];
        PyObject* value = PyTuple_GET_ITEM(fields, i);
        void* member = desc + field->offset;
        int status = 0;
        switch (field->kind) {
        case FIELD_INPUT:
        case FIELD_OUTPUT:
            status = add_tensor(builder, layout, field, value, memory, device_id, (const DML_TENSOR_DESC**)member);
            break;
        case FIELD_UINT:
            status = read_uint(layout, field, value, (UINT*)member);
            if (status == 0 && strcmp(field->name, "DimensionCount") == 0) dimension_count = *(UINT*)member;
            if (status == 0) status = append_key(builder, member, sizeof(UINT));
            break;
        case FIELD_BOOL: {
            int truth = PyObject_IsTrue(value);
            *(BOOL*)member = truth > 0;
            status = truth < 0 ? -1 : append_key(builder, member, sizeof(BOOL));
            break;
        }
        case FIELD_FLOAT:
            status = read_float(layout, field->name, value, (FLOAT*)member);
            if (status == 0) status = append_key(builder, member, sizeof(FLOAT));
            break;
        case FIELD_UINT_ARRAY:
            status = add_uint_array(builder, layout, field, value, dimension_count, &array_count, (const UINT**)member);
            break;
        case FIELD_SIZE_2D: {
            DML_SIZE_2D* size = member;
            Field width = {"PooledSize.Width", FIELD_UINT, 0}, height = {"PooledSize.Height", FIELD_UINT, 0};
            if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) {
                PyErr_Format(PyExc_TypeError, "%s: %s must be (width, height)", layout->name, field->name);
                status = -1;
            } else {
                status = read_uint(layout, &width, PyTuple_GET_ITEM(value, 0), &size->Width);
                if (status == 0) status = read_uint(layout, &height, PyTuple_GET_ITEM(value, 1), &size->Height);
                if (status == 0) status = append_key(builder, size, sizeof *size);
            }
            break;
        }
        case FIELD_ACTIVATION:
            status = add_activation(builder, layout, field, value, (const DML_OPERATOR_DESC**)member);
            break;
        }
        if (status != 0) return -1;
    }
    builder->desc.Type = layout->type;
    builder->desc.Desc = &builder->storage;
    return 0;
}
