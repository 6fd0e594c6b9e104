/*
 * TensorView: a tensor borrowed through the DLPack protocol, without a copy.
 *
 * A view is made from the capsule an object's __dlpack__() returns: either
 * "dltensor" (DLPack 0.x, DLManagedTensor) or "dltensor_versioned" (DLPack
 * 1.x, DLManagedTensorVersioned). As the protocol asks, the capsule is
 * renamed "used_..." and the view calls the producer's deleter when it dies.
 * Sizes and strides become DirectML's (UINT, in elements); what DirectML
 * cannot express is refused here, everything else is for libdml to judge.
 */
#include <dlpack/dlpack.h>
#include <string.h>

#include "binding.h"

#ifndef DLPACK_MAJOR_VERSION
/* DLPack 1.0's versioned managed tensor, written from the published
 * specification (dlpack.h of DLPack v1.0): Debian 12's header is 0.6. */
typedef struct DLPackVersion {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void* manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned* self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#endif

/* The DLPack major version whose layout this file reads. */
#define SUPPORTED_DLPACK_MAJOR 1

static void delete_managed(TensorView* view) {
    if (view->managed == NULL) return;
    if (view->versioned) {
        DLManagedTensorVersioned* managed = view->managed;
        if (managed->deleter != NULL) managed->deleter(managed);
    } else {
        DLManagedTensor* managed = view->managed;
        if (managed->deleter != NULL) managed->deleter(managed);
    }
    view->managed = NULL;
}

static void view_dealloc(TensorView* view) {
    delete_managed(view);
    Py_XDECREF(view->parent);
    Py_TYPE(view)->tp_free((PyObject*)view);
}

/* DirectML's data type of a DLPack dtype; UNKNOWN when DirectML has none. */
static DML_TENSOR_DATA_TYPE data_type_of(DLDataType dtype) {
    /* [code: kDLInt, kDLUInt, kDLFloat][bits: 8, 16, 32, 64] */
    static const DML_TENSOR_DATA_TYPE types[3][4] = {
        {DML_TENSOR_DATA_TYPE_INT8, DML_TENSOR_DATA_TYPE_INT16, DML_TENSOR_DATA_TYPE_INT32, DML_TENSOR_DATA_TYPE_INT64},
        {DML_TENSOR_DATA_TYPE_UINT8, DML_TENSOR_DATA_TYPE_UINT16, DML_TENSOR_DATA_TYPE_UINT32,
         DML_TENSOR_DATA_TYPE_UINT64},
        {DML_TENSOR_DATA_TYPE_UNKNOWN, DML_TENSOR_DATA_TYPE_FLOAT16, DML_TENSOR_DATA_TYPE_FLOAT32,
         DML_TENSOR_DATA_TYPE_FLOAT64},
    };
    int width = dtype.bits == 8 ? 0 : dtype.bits == 16 ? 1 : dtype.bits == 32 ? 2 : dtype.bits == 64 ? 3 : -1;
    if (dtype.lanes != 1 || width < 0 || dtype.code > kDLFloat) return DML_TENSOR_DATA_TYPE_UNKNOWN;
    return types[dtype.code][width];
}

/* Reads a DLTensor into view; -1 with an exception when DirectML cannot
 * describe it. */
static int read_dl_tensor(TensorView* view, const DLTensor* tensor) {
    switch (tensor->device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: /* pinned host memory: the CPU backend reads it directly */ view->memory = MEMORY_HOST; break;
    case kDLCUDA:
    case kDLCUDAManaged: view->memory = MEMORY_CUDA; break;
    default:
        PyErr_Format(PyExc_TypeError,
                     "libdml: tensor is on DLPack device type %d; libdml reads CPU (1) and CUDA (2) memory",
                     (int)tensor->device.device_type);
        return -1;
    }
    view->device_id = tensor->device.device_id;
    view->data_type = data_type_of(tensor->dtype);
    if (view->data_type == DML_TENSOR_DATA_TYPE_UNKNOWN) {
        PyErr_Format(PyExc_TypeError,
                     "libdml: tensor has DLPack dtype (code %u, %u bits, %u lanes), which DirectML has no "
                     "DML_TENSOR_DATA_TYPE for",
                     (unsigned)tensor->dtype.code, (unsigned)tensor->dtype.bits, (unsigned)tensor->dtype.lanes);
        return -1;
    }
    if (tensor->ndim < 1 || tensor->ndim > VIEW_MAX_DIMENSIONS) {
        PyErr_Format(PyExc_ValueError, "libdml: tensor has %d dimensions; DirectML tensors have 1 to %d",
                     (int)tensor->ndim, VIEW_MAX_DIMENSIONS);
        return -1;
    }
    view->dimension_count = (UINT)tensor->ndim;
    int64_t packed_stride = 1;
    for (int i = tensor->ndim - 1; i >= 0; i--) {
        int64_t size = tensor->shape[i];
        int64_t stride = tensor->strides != NULL ? tensor->strides[i] : packed_stride;
        if (size < 0 || size > (int64_t)UINT32_MAX) {
            PyErr_Format(PyExc_ValueError, "libdml: tensor size %lld of dimension %d is outside DirectML's UINT range",
                         (long long)size, i);
            return -1;
        }
        if (stride < 0) {
            PyErr_Format(PyExc_ValueError,
                         "libdml: tensor stride %lld of dimension %d is negative (a reversed view); DirectML "
                         "strides are unsigned: pass a copy",
                         (long long)stride, i);
            return -1;
        }
        if (stride > (int64_t)UINT32_MAX) {
            PyErr_Format(PyExc_ValueError,
                         "libdml: tensor stride %lld of dimension %d is outside DirectML's UINT range",
                         (long long)stride, i);
            return -1;
        }
        view->sizes[i] = (UINT)size;
        view->strides[i] = (UINT)stride;
        /* Past UINT_MAX the next packed stride is refused anyway: stop there, before int64 overflows. */
        if (size > 0)
            packed_stride = packed_stride <= (int64_t)UINT32_MAX && size <= (int64_t)UINT32_MAX
                                ? packed_stride * size
                                : (int64_t)UINT32_MAX + 1;
    }
    view->address = (char*)tensor->data + tensor->byte_offset;
    return 0;
}

static PyObject* view_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
    static char* keywords[] = {"capsule", NULL};
    PyObject* capsule;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:TensorView", keywords, &capsule)) return NULL;
    TensorView* view = (TensorView*)type->tp_alloc(type, 0);
    if (view == NULL) return NULL;
    const DLTensor* tensor;
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        DLManagedTensorVersioned* managed = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (managed->version.major != SUPPORTED_DLPACK_MAJOR) {
            Py_DECREF(view);
            return PyErr_Format(PyExc_TypeError, "libdml: DLPack version %u.%u is not supported (major %d is)",
                                managed->version.major, managed->version.minor, SUPPORTED_DLPACK_MAJOR);
        }
        if (PyCapsule_SetName(capsule, "used_dltensor_versioned") != 0) {
            Py_DECREF(view);
            return NULL;
        }
        view->managed = managed;
        view->versioned = 1;
        view->readonly = (managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
        tensor = &managed->dl_tensor;
    } else if (PyCapsule_IsValid(capsule, "dltensor")) {
        DLManagedTensor* managed = PyCapsule_GetPointer(capsule, "dltensor");
        if (PyCapsule_SetName(capsule, "used_dltensor") != 0) {
            Py_DECREF(view);
            return NULL;
        }
        view->managed = managed;
        tensor = &managed->dl_tensor;
    } else {
        Py_DECREF(view);
        return PyErr_Format(PyExc_TypeError,
                            "libdml: expected an unused DLPack capsule (\"dltensor\" or \"dltensor_versioned\")");
    }
    if (read_dl_tensor(view, tensor) != 0) {
        Py_DECREF(view); /* calls the producer's deleter */
        return NULL;
    }
    return (PyObject*)view;
}

/* A new view of the same memory as parent, which it keeps alive. */
static TensorView* derive_view(TensorView* parent) {
    TensorView* view = (TensorView*)TensorViewType.tp_alloc(&TensorViewType, 0);
    if (view == NULL) return NULL;
    Py_INCREF(parent);
    view->parent = (PyObject*)parent;
    view->address = parent->address;
    view->memory = parent->memory;
    view->device_id = parent->device_id;
    view->readonly = parent->readonly;
    view->data_type = parent->data_type;
    view->dimension_count = parent->dimension_count;
    memcpy(view->sizes, parent->sizes, sizeof view->sizes);
    memcpy(view->strides, parent->strides, sizeof view->strides);
    return view;
}

static PyObject* view_unsqueeze(TensorView* self, PyObject* arg) {
    long dimension = PyLong_AsLong(arg);
    if (dimension == -1 && PyErr_Occurred()) return NULL;
    if (dimension < 0 || dimension > (long)self->dimension_count || self->dimension_count >= VIEW_MAX_DIMENSIONS)
        return PyErr_Format(PyExc_ValueError, "libdml: cannot insert dimension %ld into a %u-dimensional tensor",
                            dimension, self->dimension_count);
    TensorView* view = derive_view(self);
    if (view == NULL) return NULL;
    memmove(&view->sizes[dimension + 1], &view->sizes[dimension],
            (self->dimension_count - (UINT)dimension) * sizeof view->sizes[0]);
    memmove(&view->strides[dimension + 1], &view->strides[dimension],
            (self->dimension_count - (UINT)dimension) * sizeof view->strides[0]);
    view->sizes[dimension] = 1;
    view->strides[dimension] = 0; /* a size-1 dimension addresses nothing more */
    view->dimension_count++;
    return (PyObject*)view;
}

/* The same bytes read as another DirectML type of the same element size
 * (e.g. PyTorch's int64 indices as DirectML's UINT64). */
static PyObject* view_reinterpret(TensorView* self, PyObject* arg) {
    long data_type = PyLong_AsLong(arg);
    if (data_type == -1 && PyErr_Occurred()) return NULL;
    UINT element_size = dmlDataTypeSize((DML_TENSOR_DATA_TYPE)data_type);
    if (data_type <= 0 || element_size == 0 || element_size != dmlDataTypeSize(self->data_type))
        return PyErr_Format(PyExc_TypeError, "libdml: cannot read a %s tensor as data type %ld",
                            dmlDataTypeName(self->data_type), data_type);
    TensorView* view = derive_view(self);
    if (view == NULL) return NULL;
    view->data_type = (DML_TENSOR_DATA_TYPE)data_type;
    return (PyObject*)view;
}

static PyObject* uint_tuple(const UINT* values, UINT count) {
    PyObject* tuple = PyTuple_New(count);
    if (tuple == NULL) return NULL;
    for (UINT i = 0; i < count; i++) {
        PyObject* value = PyLong_FromUnsignedLong(values[i]);
        if (value == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, i, value);
    }
    return tuple;
}

static PyObject* view_get_shape(TensorView* self, void* closure) {
    (void)closure;
    return uint_tuple(self->sizes, self->dimension_count);
}

static PyObject* view_get_strides(TensorView* self, void* closure) {
    (void)closure;
    return uint_tuple(self->strides, self->dimension_count);
}

static PyObject* view_get_data_type(TensorView* self, void* closure) {
    (void)closure;
    return PyLong_FromLong((long)self->data_type);
}

static PyObject* view_get_device(TensorView* self, void* closure) {
    (void)closure;
    return Py_BuildValue("(si)", self->memory == MEMORY_CUDA ? "cuda" : "cpu", self->device_id);
}

static PyObject* view_get_address(TensorView* self, void* closure) {
    (void)closure;
    return PyLong_FromVoidPtr(self->address);
}

static PyObject* view_get_readonly(TensorView* self, void* closure) {
    (void)closure;
    return PyBool_FromLong(self->readonly);
}

static PyObject* view_get_nbytes(TensorView* self, void* closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong(
        DMLCalcBufferTensorSize(self->data_type, self->dimension_count, self->sizes, self->strides));
}

static PyGetSetDef view_getset[] = {
    {"shape", (getter)view_get_shape, NULL, "sizes, outermost first", NULL},
    {"strides", (getter)view_get_strides, NULL, "strides in elements", NULL},
    {"data_type", (getter)view_get_data_type, NULL, "DML_TENSOR_DATA_TYPE value", NULL},
    {"device", (getter)view_get_device, NULL, "('cpu' or 'cuda', device id)", NULL},
    {"address", (getter)view_get_address, NULL, "address of the first element", NULL},
    {"readonly", (getter)view_get_readonly, NULL, "the producer marked the memory read-only", NULL},
    {"nbytes", (getter)view_get_nbytes, NULL, "DMLCalcBufferTensorSize of the view (0 on overflow)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef view_methods[] = {
    {"unsqueeze", (PyCFunction)view_unsqueeze, METH_O, "view with a size-1 dimension inserted at the given place"},
    {"reinterpret", (PyCFunction)view_reinterpret, METH_O,
     "view of the same bytes as another DML_TENSOR_DATA_TYPE of the same element size"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject TensorViewType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libdml._libdml.TensorView",
    .tp_basicsize = sizeof(TensorView),
    .tp_dealloc = (destructor)view_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "TensorView(capsule): a tensor borrowed through a DLPack capsule, without a copy",
    .tp_getset = view_getset,
    .tp_methods = view_methods,
    .tp_new = view_new,
};
