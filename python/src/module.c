/*
 * libdml._libdml: devices, the compiled-operator cache and dispatch.
 *
 * Device.run(name, fields, allocate) builds the description named name from
 * fields (operators.c), compiles it once per distinct description (the cache
 * is keyed by the description's bytes, so a repeated call neither validates
 * nor plans again), binds the tensors in slot order and dispatches. Scratch
 * memory follows dmlGetBindingProperties: a temporary resource of
 * TemporaryResourceSize bytes per dispatch and a persistent one, made at
 * compile time and kept with the compiled operator, each from allocate(size),
 * which returns a TensorView in the device's memory (a NumPy array on the
 * CPU, a tensor of PyTorch's caching allocator on CUDA).
 */
#include "binding.h"

PyObject* LibdmlError;

/* The number of compiled operators a device keeps; past it the cache starts over. */
#define CACHE_CAPACITY 512

PyObject* raise_dml_error(HRESULT status, const char* context) {
    const char* message = dmlGetLastErrorMessage();
    if (message == NULL || message[0] == '\0') message = context;
    PyObject* type = status == E_INVALIDARG    ? PyExc_ValueError
                     : status == E_OUTOFMEMORY ? PyExc_MemoryError
                                               : LibdmlError;
    PyErr_Format(type, "%s (%s)", message, dmlStatusName(status));
    return NULL;
}

/* ---- Compiled operators (held by a device's cache) ---- */

typedef struct Compiled {
    PyObject_HEAD DMLCompiledOperator* handle;
    PyObject* persistent; /* TensorView or NULL */
    UINT64 temporary_size;
} Compiled;

static void compiled_dealloc(Compiled* self) {
    dmlReleaseCompiledOperator(self->handle);
    Py_XDECREF(self->persistent);
    Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyTypeObject CompiledType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libdml._libdml.Compiled",
    .tp_basicsize = sizeof(Compiled),
    .tp_dealloc = (destructor)compiled_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a compiled operator and its persistent resource",
};

/* ---- Devices ---- */

typedef struct Device {
    PyObject_HEAD DMLDevice* handle;
    MemoryKind memory;
    int device_id;
    PyObject* cache; /* dict: description key (bytes) -> Compiled */
} Device;

static PyObject* device_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
    static char* keywords[] = {"backend", "thread_count", "cuda_device", "cuda_stream", NULL};
    const char* backend = "cpu";
    unsigned int thread_count = 0;
    int cuda_device = 0;
    PyObject* stream_object = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|sIiO:Device", keywords, &backend, &thread_count, &cuda_device,
                                     &stream_object))
        return NULL;
    DML_DEVICE_DESC desc = {0};
    if (strcmp(backend, "cpu") == 0) {
        desc.Backend = DML_BACKEND_CPU;
    } else if (strcmp(backend, "cuda") == 0) {
        desc.Backend = DML_BACKEND_CUDA;
    } else {
        return PyErr_Format(PyExc_ValueError, "libdml.Device: backend is '%s' but must be 'cpu' or 'cuda'", backend);
    }
    desc.ThreadCount = thread_count;
    desc.CudaDeviceOrdinal = cuda_device;
    if (stream_object != NULL && stream_object != Py_None) {
        desc.CudaStream = PyLong_AsVoidPtr(stream_object);
        if (desc.CudaStream == NULL && PyErr_Occurred()) return NULL;
    }
    Device* self = (Device*)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->memory = desc.Backend == DML_BACKEND_CUDA ? MEMORY_CUDA : MEMORY_HOST;
    self->device_id = desc.Backend == DML_BACKEND_CUDA ? cuda_device : 0;
    self->cache = PyDict_New();
    if (self->cache == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    HRESULT status = dmlCreateDevice(&desc, &self->handle);
    if (FAILED(status)) {
        Py_DECREF(self);
        return raise_dml_error(status, "dmlCreateDevice failed");
    }
    return (PyObject*)self;
}

static void device_dealloc(Device* self) {
    Py_XDECREF(self->cache); /* compiled operators go before their device */
    if (self->handle != NULL) dmlReleaseDevice(self->handle);
    Py_TYPE(self)->tp_free((PyObject*)self);
}

/* allocate(size) must give a TensorView of at least size bytes in the
 * device's memory; returns it (a new reference) or NULL with an exception. */
static TensorView* allocate_resource(Device* self, PyObject* allocate, UINT64 size, const char* what) {
    PyObject* result = PyObject_CallFunction(allocate, "K", (unsigned long long)size);
    if (result == NULL) return NULL;
    if (!PyObject_TypeCheck(result, &TensorViewType)) {
        Py_DECREF(result);
        return (TensorView*)PyErr_Format(PyExc_TypeError,
                                         "libdml: the allocator of the %s resource must return a TensorView", what);
    }
    TensorView* view = (TensorView*)result;
    UINT64 bytes = DMLCalcBufferTensorSize(view->data_type, view->dimension_count, view->sizes, view->strides);
    if (bytes < size || view->memory != self->memory ||
        (self->memory == MEMORY_CUDA && view->device_id != self->device_id) || view->readonly) {
        Py_DECREF(result);
        return (TensorView*)PyErr_Format(LibdmlError,
                                         "libdml: the allocator gave the %s resource %llu bytes in the wrong memory or "
                                         "read-only; it needs %llu writable bytes in the device's memory",
                                         what, (unsigned long long)bytes, (unsigned long long)size);
    }
    return view;
}

static DML_BINDING_DESC resource_binding(TensorView* view, DML_BUFFER_BINDING* buffer) {
    DML_BINDING_DESC binding = {DML_BINDING_TYPE_NONE, NULL};
    if (view == NULL) return binding;
    buffer->Buffer = view->address;
    buffer->Offset = 0;
    buffer->SizeInBytes = DMLCalcBufferTensorSize(view->data_type, view->dimension_count, view->sizes, view->strides);
    binding.Type = DML_BINDING_TYPE_BUFFER;
    binding.Desc = buffer;
    return binding;
}

/* Creates, compiles and initializes the operator of builder. */
static Compiled* compile_description(Device* self, const DescriptionBuilder* builder, PyObject* allocate,
                                     DML_EXECUTION_FLAGS flags) {
    DMLOperator* op = NULL;
    HRESULT status = dmlCreateOperator(self->handle, &builder->desc, &op);
    if (FAILED(status)) return (Compiled*)raise_dml_error(status, "dmlCreateOperator failed");
    Compiled* compiled = PyObject_New(Compiled, &CompiledType);
    if (compiled == NULL) {
        dmlReleaseOperator(op);
        return NULL;
    }
    compiled->handle = NULL;
    compiled->persistent = NULL;
    PyThreadState* thread = PyEval_SaveThread();
    status = dmlCompileOperator(self->handle, op, flags, &compiled->handle);
    PyEval_RestoreThread(thread);
    dmlReleaseOperator(op);
    if (FAILED(status)) {
        Py_DECREF(compiled);
        return (Compiled*)raise_dml_error(status, "dmlCompileOperator failed");
    }
    DML_BINDING_PROPERTIES properties;
    status = dmlGetBindingProperties(compiled->handle, &properties);
    if (FAILED(status)) {
        Py_DECREF(compiled);
        return (Compiled*)raise_dml_error(status, "dmlGetBindingProperties failed");
    }
    compiled->temporary_size = properties.TemporaryResourceSize;
    if (properties.PersistentResourceSize > 0) {
        compiled->persistent =
            (PyObject*)allocate_resource(self, allocate, properties.PersistentResourceSize, "persistent");
        if (compiled->persistent == NULL) {
            Py_DECREF(compiled);
            return NULL;
        }
    }
    DML_BUFFER_BINDING persistent_buffer;
    DML_BINDING_DESC persistent = resource_binding((TensorView*)compiled->persistent, &persistent_buffer);
    status = dmlInitializeOperator(compiled->handle, 0, NULL, &persistent);
    if (FAILED(status)) {
        Py_DECREF(compiled);
        return (Compiled*)raise_dml_error(status, "dmlInitializeOperator failed");
    }
    return compiled;
}

static void bind_tensors(TensorView* const* views, UINT count, const DML_TENSOR_DESC* const* descs,
                         DML_BUFFER_BINDING* buffers, DML_BINDING_DESC* bindings) {
    for (UINT i = 0; i < count; i++) {
        if (views[i] == NULL) {
            bindings[i].Type = DML_BINDING_TYPE_NONE;
            bindings[i].Desc = NULL;
            continue;
        }
        const DML_BUFFER_TENSOR_DESC* desc = descs[i]->Desc;
        buffers[i].Buffer = views[i]->address;
        buffers[i].Offset = 0;
        buffers[i].SizeInBytes = desc->TotalTensorSizeInBytes;
        bindings[i].Type = DML_BINDING_TYPE_BUFFER;
        bindings[i].Desc = &buffers[i];
    }
}

static PyObject* device_run(Device* self, PyObject* args, PyObject* kwargs) {
    static char* keywords[] = {"operator", "fields", "allocate", "allow_half_precision", NULL};
    const char* name;
    PyObject* fields;
    PyObject* allocate;
    int allow_half = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sO!O|p:run", keywords, &name, &PyTuple_Type, &fields, &allocate,
                                     &allow_half))
        return NULL;
    const OperatorLayout* layout = find_operator_layout(name);
    if (layout == NULL) return PyErr_Format(PyExc_ValueError, "libdml: no operator named %s", name);
    DescriptionBuilder builder;
    if (build_description(&builder, layout, fields, self->memory, self->device_id) != 0) return NULL;
    unsigned char allow_half_key = (unsigned char)allow_half;
    if (append_key(&builder, &allow_half_key, 1) != 0) return NULL;
    PyObject* key = PyBytes_FromStringAndSize((const char*)builder.key, (Py_ssize_t)builder.key_length);
    if (key == NULL) return NULL;
    Compiled* compiled = (Compiled*)PyDict_GetItemWithError(self->cache, key);
    if (compiled != NULL) {
        Py_INCREF(compiled);
    } else if (PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    } else {
        compiled = compile_description(self, &builder, allocate,
                                       allow_half ? DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION
                                                  : DML_EXECUTION_FLAG_NONE);
        if (compiled != NULL && PyDict_GET_SIZE(self->cache) >= CACHE_CAPACITY) PyDict_Clear(self->cache);
        if (compiled == NULL || PyDict_SetItem(self->cache, key, (PyObject*)compiled) != 0) {
            Py_XDECREF(compiled);
            Py_DECREF(key);
            return NULL;
        }
    }
    Py_DECREF(key);

    TensorView* temporary = NULL;
    if (compiled->temporary_size > 0) {
        temporary = allocate_resource(self, allocate, compiled->temporary_size, "temporary");
        if (temporary == NULL) {
            Py_DECREF(compiled);
            return NULL;
        }
    }
    const DML_TENSOR_DESC* input_descs[BUILDER_MAX_TENSORS];
    const DML_TENSOR_DESC* output_descs[BUILDER_MAX_TENSORS];
    for (UINT i = 0; i < builder.input_count; i++)
        input_descs[i] = &builder.tensor_descs[i];
    for (UINT i = 0; i < builder.output_count; i++)
        output_descs[i] = &builder.tensor_descs[builder.input_count + i];
    DML_BUFFER_BINDING input_buffers[BUILDER_MAX_TENSORS], output_buffers[BUILDER_MAX_TENSORS];
    DML_BINDING_DESC inputs[BUILDER_MAX_TENSORS], outputs[BUILDER_MAX_TENSORS];
    bind_tensors(builder.inputs, builder.input_count, input_descs, input_buffers, inputs);
    bind_tensors(builder.outputs, builder.output_count, output_descs, output_buffers, outputs);
    DML_BUFFER_BINDING temporary_buffer, persistent_buffer;
    DML_DISPATCH_BINDINGS bindings = {builder.input_count,
                                      inputs,
                                      builder.output_count,
                                      outputs,
                                      resource_binding(temporary, &temporary_buffer),
                                      resource_binding((TensorView*)compiled->persistent, &persistent_buffer)};
    PyThreadState* thread = PyEval_SaveThread();
    HRESULT status = dmlDispatch(compiled->handle, &bindings);
    PyEval_RestoreThread(thread);
    Py_XDECREF(temporary); /* CUDA: PyTorch's allocator reuses it in stream order only */
    Py_DECREF(compiled);
    if (FAILED(status)) return raise_dml_error(status, "dmlDispatch failed");
    Py_RETURN_NONE;
}

static PyObject* device_synchronize(Device* self, PyObject* unused) {
    (void)unused;
    PyThreadState* thread = PyEval_SaveThread();
    HRESULT status = dmlSynchronize(self->handle);
    PyEval_RestoreThread(thread);
    if (FAILED(status)) return raise_dml_error(status, "dmlSynchronize failed");
    Py_RETURN_NONE;
}

static PyObject* device_get_cache_size(Device* self, void* closure) {
    (void)closure;
    return PyLong_FromSsize_t(PyDict_GET_SIZE(self->cache));
}

static PyObject* device_get_backend(Device* self, void* closure) {
    (void)closure;
    return PyUnicode_FromString(self->memory == MEMORY_CUDA ? "cuda" : "cpu");
}

static PyObject* device_get_device_id(Device* self, void* closure) {
    (void)closure;
    return PyLong_FromLong(self->device_id);
}

static PyMethodDef device_methods[] = {
    {"run", (PyCFunction)(void (*)(void))device_run, METH_VARARGS | METH_KEYWORDS,
     "run(operator, fields, allocate, allow_half_precision=False): build, compile (once) and dispatch"},
    {"synchronize", (PyCFunction)device_synchronize, METH_NOARGS, "wait for all work dispatched on the device"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef device_getset[] = {
    {"cache_size", (getter)device_get_cache_size, NULL, "compiled operators held by the device", NULL},
    {"backend", (getter)device_get_backend, NULL, "'cpu' or 'cuda'", NULL},
    {"device_id", (getter)device_get_device_id, NULL, "CUDA ordinal (0 on the CPU)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject DeviceType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libdml._libdml.Device",
    .tp_basicsize = sizeof(Device),
    .tp_dealloc = (destructor)device_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Device(backend='cpu', thread_count=0, cuda_device=0, cuda_stream=None): a libdml device",
    .tp_methods = device_methods,
    .tp_getset = device_getset,
    .tp_new = device_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "libdml._libdml",
    .m_doc = "libdml's C API for Python",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__libdml(void) {
    if (PyType_Ready(&TensorViewType) < 0 || PyType_Ready(&CompiledType) < 0 || PyType_Ready(&DeviceType) < 0)
        return NULL;
    PyObject* m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    LibdmlError = PyErr_NewExceptionWithDoc("libdml.Error", "a libdml failure other than an invalid argument",
                                            PyExc_RuntimeError, NULL);
    if (LibdmlError == NULL || PyModule_AddObjectRef(m, "Error", LibdmlError) < 0 ||
        PyModule_AddObjectRef(m, "TensorView", (PyObject*)&TensorViewType) < 0 ||
        PyModule_AddObjectRef(m, "Device", (PyObject*)&DeviceType) < 0 ||
        PyModule_AddStringConstant(m, "version", dmlGetVersionString()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
