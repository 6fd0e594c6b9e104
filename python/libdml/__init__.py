"""libdml: DirectML's max pooling, ROI pooling, ROI align and batch
normalization operators on NumPy arrays, PyTorch tensors and any object with
``__dlpack__``, without copies.

Every function takes DirectML's fields in snake case (``window_size`` for
``WindowSize``) with DirectML's meaning; docs/python.md lists the defaults
this module chooses where DirectML's C structs have none. Outputs are
allocated through the framework of the first input (a NumPy array for CPU
memory, a PyTorch tensor for PyTorch inputs) unless passed as ``out=``, in
which case the result is that very object, written in place.

The device follows the tensors: CPU memory runs on the CPU backend (all
cores; PyTorch's thread count for PyTorch tensors), CUDA memory on the CUDA
backend of that GPU, on PyTorch's current stream. ``device=libdml.Device(...)``
chooses explicitly. Invalid descriptions and bindings raise ValueError or
TypeError with libdml's message, which names the operator, the field and the
rule.
"""
import threading

from ._libdml import Device, Error, TensorView, version

__all__ = ["Device", "Error", "TensorView", "version", "ACTIVATIONS", "max_pooling", "max_pooling_grad",
           "roi_pooling", "roi_align", "roi_align_grad", "batch_normalization", "batch_normalization_training",
           "batch_normalization_grad", "batch_normalization_training_grad"]

# DML_TENSOR_DATA_TYPE values (include/dml/dml_types.h).
FLOAT32, FLOAT16, UINT32, UINT16, UINT8, INT32, INT16, INT8, FLOAT64, UINT64, INT64 = range(1, 12)
_UNSIGNED_OF = {INT8: UINT8, INT16: UINT16, INT32: UINT32, INT64: UINT64}
_SIGNED_OF = {unsigned: signed for signed, unsigned in _UNSIGNED_OF.items()}
_NUMPY_NAMES = {FLOAT32: "float32", FLOAT16: "float16", FLOAT64: "float64", UINT8: "uint8", UINT16: "uint16",
                UINT32: "uint32", UINT64: "uint64", INT8: "int8", INT16: "int16", INT32: "int32", INT64: "int64"}

_REDUCTIONS = {"average": 2, "max": 7}  # DML_REDUCE_FUNCTION
_INTERPOLATIONS = {"nearest": 0, "nearest_neighbor": 0, "linear": 1}  # DML_INTERPOLATION_MODE
UINT_MAX = 2**32 - 1

# The activations DirectML fuses into batch normalization: name ->
# (DML_OPERATOR_TYPE, parameter names, defaults). The defaults are the spec's
# "typical values" (batch_normalization.md §8.1); DirectML's structs have none.
ACTIVATIONS = {
    "linear": (40, ("alpha", "beta"), (1.0, 0.0)),
    "sigmoid": (47, (), ()),
    "hard_sigmoid": (37, ("alpha", "beta"), (0.2, 0.5)),
    "tanh": (51, (), ()),
    "scaled_tanh": (46, ("alpha", "beta"), (1.0, 1.0)),
    "relu": (44, (), ()),
    "leaky_relu": (39, ("alpha",), (0.01,)),
    "thresholded_relu": (52, ("alpha",), (1.0,)),
    "elu": (35, ("alpha",), (1.0,)),
    "celu": (128, ("alpha",), (1.0,)),
    "scaled_elu": (45, ("alpha", "gamma"), (1.6732632, 1.0507010)),
    "softplus": (49, ("steepness",), (1.0,)),
    "parametric_softplus": (43, ("alpha", "beta"), (1.0, 1.0)),
    "softsign": (50, (), ()),
    "identity": (38, (), ()),
    "shrink": (90, ("bias", "threshold"), (0.0, 0.5)),
    "gelu": (157, (), ()),
}


def activation_parameters(fused_activation):
    """(name, {parameter: value}) of a fused_activation argument, or None.

    fused_activation is None, a name ('relu'), or a name with its parameters
    positionally or by name: ('leaky_relu', 0.2), ('elu', {'alpha': 0.5}).
    """
    if fused_activation is None:
        return None
    if isinstance(fused_activation, str):
        name, given = fused_activation, ()
    else:
        name, given = fused_activation[0], tuple(fused_activation[1:])
    if name not in ACTIVATIONS:
        raise ValueError(f"libdml: fused_activation '{name}' is not one of {', '.join(ACTIVATIONS)}")
    _, names, defaults = ACTIVATIONS[name]
    values = dict(zip(names, defaults))
    if len(given) == 1 and isinstance(given[0], dict):
        unknown = set(given[0]) - set(names)
        if unknown:
            raise ValueError(f"libdml: fused_activation '{name}' has no parameter {', '.join(sorted(unknown))}")
        values.update(given[0])
    elif len(given) > len(names):
        raise ValueError(f"libdml: fused_activation '{name}' takes {len(names)} parameters, got {len(given)}")
    else:
        values.update(zip(names, given))
    return name, values


def _activation_field(fused_activation):
    parsed = activation_parameters(fused_activation)
    if parsed is None:
        return None
    name, values = parsed
    operator_type, names, _ = ACTIVATIONS[name]
    return operator_type, tuple(float(values[n]) for n in names)


# ---- Devices, views and outputs ----

_devices = {}
_devices_lock = threading.Lock()
_accepts_max_version = {}


def _is_torch(obj):
    return type(obj).__module__.split(".")[0] == "torch"


def _torch():
    import torch
    return torch


def _shared_device(backend, thread_count=0, cuda_device=0, cuda_stream=None):
    key = (backend, thread_count, cuda_device, cuda_stream)
    with _devices_lock:
        device = _devices.get(key)
        if device is None:
            device = _devices[key] = Device(backend, thread_count, cuda_device, cuda_stream)
        return device


def _dlpack_device(obj):
    if isinstance(obj, TensorView):
        kind, index = obj.device
        return (2 if kind == "cuda" else 1), index
    if not hasattr(obj, "__dlpack_device__"):
        raise TypeError(f"libdml: {type(obj).__name__} is not a tensor (it has no __dlpack__)")
    return tuple(obj.__dlpack_device__())


# cudaStreamLegacy: what PyTorch's default stream (handle 0) is, named so
# that libdml dispatches on it (CudaStream NULL would mean a stream of its
# own) and DLPack's producers read it as "the legacy default stream".
_CUDA_STREAM_LEGACY = 1


def _current_stream(cuda_device):
    """PyTorch's current CUDA stream of that GPU, as a cudaStream_t value."""
    return _torch().cuda.current_stream(cuda_device).cuda_stream or _CUDA_STREAM_LEGACY


class _Call:
    """One operator call: its device, the framework its outputs come from,
    and the views of its tensors (kept alive until the call returns)."""

    def __init__(self, device, first_tensor, tensors):
        self.proto = first_tensor
        if device is None:
            device_type, index = _dlpack_device(first_tensor)
            if device_type in (2, 13):  # kDLCUDA, kDLCUDAManaged
                stream = _current_stream(index) if _is_torch(first_tensor) else None
                device = _shared_device("cuda", 0, index, stream)
            else:
                threads = _torch().get_num_threads() if any(_is_torch(t) for t in tensors) else 0
                device = _shared_device("cpu", threads)
        self.device = device
        self.stream = None
        if device.backend == "cuda" and _is_torch(first_tensor):
            self.stream = _current_stream(device.device_id)

    def view(self, obj, name):
        """A TensorView of obj (None stays None)."""
        if obj is None or isinstance(obj, TensorView):
            return obj
        if getattr(obj, "requires_grad", False):
            obj = obj.detach()
        if not hasattr(obj, "__dlpack__"):
            raise TypeError(f"libdml: {name} must be a tensor with __dlpack__ (a NumPy array, a PyTorch tensor, ...), "
                            f"not {type(obj).__name__}")
        kwargs = {"stream": self.stream} if self.stream is not None and _dlpack_device(obj)[0] == 2 else {}
        kind = type(obj)
        if _accepts_max_version.get(kind, True):
            try:
                capsule = obj.__dlpack__(max_version=(1, 0), **kwargs)
                _accepts_max_version[kind] = True
            except TypeError:
                _accepts_max_version[kind] = False
        if not _accepts_max_version[kind]:
            capsule = obj.__dlpack__(**kwargs)
        return TensorView(capsule)

    def _empty(self, shape, data_type):
        """A new tensor of the input's framework; returns (tensor, view)."""
        proto = self.proto
        if _is_torch(proto):
            torch = _torch()
            storage_type = _SIGNED_OF.get(data_type, data_type) if data_type in (UINT16, UINT32, UINT64) else data_type
            tensor = torch.empty(shape, dtype=getattr(torch, _NUMPY_NAMES[storage_type]), device=proto.device)
            view = self.view(tensor, "output")
            return tensor, (view.reinterpret(data_type) if storage_type != data_type else view)
        if self.device.backend == "cuda":
            raise TypeError("libdml: outputs for CUDA tensors are allocated through PyTorch; pass out= for "
                            f"{type(proto).__name__} inputs")
        import numpy
        array = numpy.empty(shape, dtype=_NUMPY_NAMES[data_type])
        return array, self.view(array, "output")

    def output(self, out, name, shape, data_type):
        """(result object, view) for an output: out itself if given, else a new tensor."""
        if out is None:
            return self._empty(tuple(shape), data_type)
        view = self.view(out, name)
        if view.data_type != data_type and _UNSIGNED_OF.get(view.data_type) == data_type:
            view = view.reinterpret(data_type)  # signed storage for DirectML's unsigned indices
        return out, view

    def allocate(self, size):
        """Scratch memory for libdml's temporary and persistent resources."""
        if self.device.backend == "cuda":
            torch = _torch()  # the caching allocator, in stream order
            return self.view(torch.empty(size, dtype=torch.uint8, device=f"cuda:{self.device.device_id}"), "scratch")
        import numpy
        return self.view(numpy.empty(size, dtype="uint8"), "scratch")

    def run(self, operator, fields, allow_half_precision=False):
        self.device.run(operator, fields, self.allocate, allow_half_precision)
        if self.device.backend == "cuda" and self.stream is None:
            self.device.synchronize()  # not PyTorch: no stream to order the caller's work on


def _unsigned(view):
    """Signed integer indices read as DirectML's unsigned ones (negative → out of range)."""
    return view.reinterpret(_UNSIGNED_OF[view.data_type]) if view.data_type in _UNSIGNED_OF else view


def _per_axis(value, count, name):
    if isinstance(value, int):
        return (value,) * count
    value = tuple(int(v) for v in value)
    if len(value) != count:
        raise ValueError(f"libdml: {name} has {len(value)} entries but the input has {count} spatial dimensions")
    return value


def _pair(value, name):
    return _per_axis(value, 2, name)


# ---- Max pooling ----

def pooled_sizes(input_sizes, window_size, strides, start_padding, end_padding, dilations):
    """Output spatial sizes of max pooling (spec max_pooling.md §4, floor)."""
    sizes = []
    for size, window, stride, start, end, dilation in zip(input_sizes, window_size, strides, start_padding,
                                                          end_padding, dilations):
        dilated = (window - 1) * dilation + 1
        padded = size + start + end
        sizes.append((padded - dilated) // max(stride, 1) + 1 if padded >= dilated else 1)
    return tuple(sizes)


def _pooling_fields(view, window_size, strides, start_padding, end_padding, dilations):
    k = max(len(view.shape) - 2, 0)
    return (k, _per_axis(1 if strides is None else strides, k, "strides"), _per_axis(window_size, k, "window_size"),
            _per_axis(0 if start_padding is None else start_padding, k, "start_padding"),
            _per_axis(0 if end_padding is None else end_padding, k, "end_padding"),
            _per_axis(1 if dilations is None else dilations, k, "dilations"))


def max_pooling(input, window_size, strides=None, start_padding=None, end_padding=None, dilations=None,
                output_indices=False, *, output_size=None, indices_data_type=None, out=None, out_indices=None,
                device=None):
    """DML_MAX_POOLING2: the maximum of each window; with output_indices, also
    the flat (whole-tensor, row-major) index of each maximum.

    strides, dilations default to 1 and paddings to 0 per spatial axis;
    output_size (spatial) defaults to the floor formula; DirectML accepts any
    size >= 1 (ceil mode included). Indices are UINT32 for NumPy and int64
    (read as UINT64) for PyTorch unless indices_data_type says otherwise.
    Returns the output, or (output, indices).
    """
    call = _Call(device, input, (input,))
    x = call.view(input, "InputTensor")
    k, strides, window_size, start_padding, end_padding, dilations = _pooling_fields(
        x, window_size, strides, start_padding, end_padding, dilations)
    if output_size is None:
        output_size = pooled_sizes(x.shape[2:], window_size, strides, start_padding, end_padding, dilations)
    shape = tuple(x.shape[:2]) + _per_axis(output_size, k, "output_size")
    output, y = call.output(out, "OutputTensor", shape, x.data_type)
    indices = index_view = None
    if output_indices or out_indices is not None:
        if indices_data_type is None:
            indices_data_type = UINT64 if _is_torch(input) else UINT32
        indices, index_view = call.output(out_indices, "OutputIndicesTensor", shape, indices_data_type)
    call.run("MAX_POOLING2", (x, y, index_view, k, strides, window_size, start_padding, end_padding, dilations))
    return (output, indices) if indices is not None else output


def max_pooling_grad(input, input_gradient, window_size, strides=None, start_padding=None, end_padding=None,
                     dilations=None, *, out=None, device=None):
    """DML_MAX_POOLING_GRAD: dL/d(input) from dL/d(output) = input_gradient,
    the argmax re-derived from input (ties: lowest index)."""
    call = _Call(device, input, (input, input_gradient))
    x = call.view(input, "InputTensor")
    dy = call.view(input_gradient, "InputGradientTensor")
    fields = _pooling_fields(x, window_size, strides, start_padding, end_padding, dilations)
    output, dx = call.output(out, "OutputGradientTensor", x.shape, x.data_type)
    call.run("MAX_POOLING_GRAD", (x, dy, dx) + fields)
    return output


# ---- ROI pooling and ROI align ----

def roi_pooling(input, rois, pooled_size, spatial_scale=1.0, *, out=None, device=None):
    """DML_ROI_POOLING: rois is (R, 5) or (1, 1, R, 5) rows [batch, x1, y1, x2, y2]
    (inclusive corners); pooled_size is (height, width) or an int."""
    call = _Call(device, input, (input, rois))
    x = call.view(input, "InputTensor")
    r = call.view(rois, "ROITensor")
    if len(r.shape) == 2:
        r = r.unsqueeze(0).unsqueeze(0)
    height, width = _pair(pooled_size, "pooled_size")
    shape = (r.shape[-2], x.shape[1] if len(x.shape) > 1 else 1, height, width)
    output, y = call.output(out, "OutputTensor", shape, x.data_type)
    call.run("ROI_POOLING", (x, r, y, spatial_scale, (width, height)))
    return output


def _roi_align_parameters(reduction, interpolation, spatial_scale_x, spatial_scale_y, input_pixel_offset,
                          output_pixel_offset, minimum_samples_per_output, maximum_samples_per_output,
                          align_regions_to_corners, out_of_bounds_input_value=None):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"libdml: reduction is '{reduction}' but must be 'average' or 'max'")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"libdml: interpolation is '{interpolation}' but must be 'linear' or 'nearest'")
    head = (_REDUCTIONS[reduction], _INTERPOLATIONS[interpolation], spatial_scale_x, spatial_scale_y,
            input_pixel_offset, output_pixel_offset)
    tail = (minimum_samples_per_output, maximum_samples_per_output, align_regions_to_corners)
    return head + ((out_of_bounds_input_value,) if out_of_bounds_input_value is not None else ()) + tail


def roi_align(input, rois, batch_indices, output_size, *, reduction="average", interpolation="linear",
              spatial_scale_x=1.0, spatial_scale_y=1.0, input_pixel_offset=0.5, output_pixel_offset=-0.5,
              out_of_bounds_input_value=0.0, minimum_samples_per_output=1, maximum_samples_per_output=UINT_MAX,
              align_regions_to_corners=False, out=None, device=None):
    """DML_ROI_ALIGN1: rois (R, 4) rows [x1, y1, x2, y2], batch_indices (R,)
    (unsigned; signed integers are read as unsigned), output_size (height,
    width) or an int. The pixel offsets default to DML_ROI_ALIGN's
    pixel-centre model (0.5, -0.5); the sample counts to adaptive."""
    call = _Call(device, input, (input, rois, batch_indices))
    x = call.view(input, "InputTensor")
    r = call.view(rois, "ROITensor")
    b = _unsigned(call.view(batch_indices, "BatchIndicesTensor"))
    height, width = _pair(output_size, "output_size")
    shape = (r.shape[-2] if len(r.shape) > 1 else 1, x.shape[1] if len(x.shape) > 1 else 1, height, width)
    output, y = call.output(out, "OutputTensor", shape, x.data_type)
    parameters = _roi_align_parameters(reduction, interpolation, spatial_scale_x, spatial_scale_y,
                                       input_pixel_offset, output_pixel_offset, minimum_samples_per_output,
                                       maximum_samples_per_output, align_regions_to_corners,
                                       out_of_bounds_input_value)
    call.run("ROI_ALIGN1", (x, r, b, y) + parameters)
    return output


def roi_align_grad(input_gradient, rois, batch_indices, *, input=None, input_shape=None,
                   compute_input_gradient=True, compute_roi_gradient=False, reduction="average",
                   interpolation="linear", spatial_scale_x=1.0, spatial_scale_y=1.0, input_pixel_offset=0.5,
                   output_pixel_offset=-0.5, minimum_samples_per_output=1, maximum_samples_per_output=UINT_MAX,
                   align_regions_to_corners=False, out=None, out_roi_gradient=None, device=None):
    """DML_ROI_ALIGN_GRAD: dL/d(input) (shape of input, or input_shape when
    input is not given) and, with compute_roi_gradient, dL/d(rois).

    Returns the input gradient; with compute_roi_gradient, the pair
    (input gradient or None, ROI gradient). input is required for the ROI
    gradient and for reduction='max'."""
    call = _Call(device, input_gradient, (input_gradient, rois, batch_indices, input))
    dy = call.view(input_gradient, "InputGradientTensor")
    x = call.view(input, "InputTensor")
    r = call.view(rois, "ROITensor")
    b = _unsigned(call.view(batch_indices, "BatchIndicesTensor"))
    gradient = dx = roi_gradient = dr = None
    if compute_input_gradient or out is not None:
        if x is not None:
            input_shape = x.shape
        if input_shape is None:
            raise ValueError("libdml: ROI_ALIGN_GRAD: pass input or input_shape for OutputGradientTensor")
        gradient, dx = call.output(out, "OutputGradientTensor", tuple(input_shape), dy.data_type)
    if compute_roi_gradient or out_roi_gradient is not None:
        roi_gradient, dr = call.output(out_roi_gradient, "OutputROIGradientTensor", r.shape, r.data_type)
    parameters = _roi_align_parameters(reduction, interpolation, spatial_scale_x, spatial_scale_y,
                                       input_pixel_offset, output_pixel_offset, minimum_samples_per_output,
                                       maximum_samples_per_output, align_regions_to_corners)
    call.run("ROI_ALIGN_GRAD", (x, dy, r, b, dx, dr) + parameters)
    return (gradient, roi_gradient) if dr is not None else gradient


# ---- Batch normalization ----

def _parameter_view(call, obj, name, dimension_count):
    """A parameter tensor; a 1-D one of C values becomes {1, C, 1, ...}."""
    view = call.view(obj, name)
    if view is not None and len(view.shape) == 1 and dimension_count >= 2:
        view = view.unsqueeze(0)
        while len(view.shape) < dimension_count:
            view = view.unsqueeze(len(view.shape))
    return view


def batch_normalization(input, mean, variance, scale, bias, *, epsilon=1e-5, spatial=True, fused_activation=None,
                        out=None, device=None):
    """DML_BATCH_NORMALIZATION (inference): act(scale·(x−mean)/sqrt(var+ε)+bias).
    Parameters broadcast by size; 1-D parameters of C values are per channel."""
    call = _Call(device, input, (input, mean, variance, scale, bias))
    x = call.view(input, "InputTensor")
    k = len(x.shape)
    params = [_parameter_view(call, t, n, k) for t, n in ((mean, "MeanTensor"), (variance, "VarianceTensor"),
                                                           (scale, "ScaleTensor"), (bias, "BiasTensor"))]
    output, y = call.output(out, "OutputTensor", x.shape, x.data_type)
    call.run("BATCH_NORMALIZATION", (x, *params, y, spatial, epsilon, _activation_field(fused_activation)))
    return output


def batch_normalization_training(input, scale, bias, fused_add=None, *, epsilon=1e-5, fused_activation=None,
                                 out=None, out_mean=None, out_variance=None, device=None):
    """DML_BATCH_NORMALIZATION_TRAINING: returns (output, mean, variance), the
    batch statistics (biased variance) shaped like scale."""
    call = _Call(device, input, (input, scale, bias, fused_add))
    x = call.view(input, "InputTensor")
    k = len(x.shape)
    s = _parameter_view(call, scale, "ScaleTensor", k)
    b = _parameter_view(call, bias, "BiasTensor", k)
    add = call.view(fused_add, "FusedAddTensor")
    output, y = call.output(out, "OutputTensor", x.shape, x.data_type)
    user_shape = tuple(scale.shape) if hasattr(scale, "shape") else s.shape
    mean, m = call.output(out_mean, "OutputMeanTensor", user_shape, x.data_type)
    variance, v = call.output(out_variance, "OutputVarianceTensor", user_shape, x.data_type)
    m, v = (_parameter_view(call, t, n, k) for t, n in ((m, "OutputMeanTensor"), (v, "OutputVarianceTensor")))
    call.run("BATCH_NORMALIZATION_TRAINING", (x, s, b, add, y, m, v, epsilon, _activation_field(fused_activation)))
    return output, mean, variance


def _batch_normalization_gradient(operator, input, input_gradient, mean, variance, scale, epsilon, out,
                                  out_scale_gradient, out_bias_gradient, device):
    call = _Call(device, input, (input, input_gradient, mean, variance, scale))
    x = call.view(input, "InputTensor")
    k = len(x.shape)
    dy = call.view(input_gradient, "InputGradientTensor")
    params = [_parameter_view(call, t, n, k) for t, n in ((mean, "MeanTensor"), (variance, "VarianceTensor"),
                                                           (scale, "ScaleTensor"))]
    gradient, dx = call.output(out, "OutputGradientTensor", x.shape, x.data_type)
    user_shape = tuple(scale.shape) if hasattr(scale, "shape") else params[2].shape
    scale_gradient, ds = call.output(out_scale_gradient, "OutputScaleGradientTensor", user_shape, x.data_type)
    bias_gradient, db = call.output(out_bias_gradient, "OutputBiasGradientTensor", user_shape, x.data_type)
    ds, db = (_parameter_view(call, t, n, k) for t, n in ((ds, "OutputScaleGradientTensor"),
                                                          (db, "OutputBiasGradientTensor")))
    call.run(operator, (x, dy, *params, dx, ds, db, epsilon))
    return gradient, scale_gradient, bias_gradient


def batch_normalization_grad(input, input_gradient, mean, variance, scale, *, epsilon=1e-5, out=None,
                             out_scale_gradient=None, out_bias_gradient=None, device=None):
    """DML_BATCH_NORMALIZATION_GRAD (mean and variance held constant): returns
    (input gradient, scale gradient, bias gradient)."""
    return _batch_normalization_gradient("BATCH_NORMALIZATION_GRAD", input, input_gradient, mean, variance, scale,
                                         epsilon, out, out_scale_gradient, out_bias_gradient, device)


def batch_normalization_training_grad(input, input_gradient, mean, variance, scale, *, epsilon=1e-5, out=None,
                                      out_scale_gradient=None, out_bias_gradient=None, device=None):
    """DML_BATCH_NORMALIZATION_TRAINING_GRAD (through the batch statistics):
    returns (input gradient, scale gradient, bias gradient)."""
    return _batch_normalization_gradient("BATCH_NORMALIZATION_TRAINING_GRAD", input, input_gradient, mean, variance,
                                         scale, epsilon, out, out_scale_gradient, out_bias_gradient, device)
