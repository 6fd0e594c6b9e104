"""libdml.torch: PyTorch autograd over libdml's operators.

``roi_align``, ``roi_pool``, ``RoIAlign`` and ``RoIPool`` take exactly
``torchvision.ops``' arguments and return what torchvision returns where the
two agree (docs/python.md lists where they differ and why); swapping the
import is enough. Their backward passes call libdml's gradient operators:
deterministic (bit-identical on every run and thread count), and ROI align
also differentiates the boxes: ``boxes.requires_grad_()`` fills
``boxes.grad``, which torchvision cannot. Extra keyword arguments expose what
DirectML adds (MAX reduction, nearest interpolation, pixel offsets).

``MaxPool2d``/``MaxPool3d`` (indices are DirectML's flat whole-tensor
indices) and ``BatchNorm`` (training statistics and a fused activation)
differentiate through MAX_POOLING_GRAD and the BATCH_NORMALIZATION gradients.
"""
import torch
from torch import nn

import libdml

__all__ = ["roi_align", "roi_pool", "RoIAlign", "RoIPool", "max_pool", "MaxPool2d", "MaxPool3d", "batch_norm",
           "BatchNorm"]


def _pair(value):
    return (value, value) if isinstance(value, int) else tuple(value)


def _rois_and_batch_indices(boxes):
    """torchvision's box formats (Tensor[K, 5] of [batch, x1, y1, x2, y2], or a
    list of Tensor[L, 4] per image) as DirectML's ROI tensor [K, 4] (a view,
    so gradients reach boxes) and UINT32 batch indices."""
    if isinstance(boxes, (list, tuple)):
        for box in boxes:
            if box.dim() != 2 or box.size(1) != 4:
                raise ValueError(f"libdml.torch: each boxes tensor must be [L, 4], not {list(box.shape)}")
        boxes = torch.cat([torch.cat([torch.full_like(box[:, :1], index), box], dim=1)
                           for index, box in enumerate(boxes)], dim=0)
    elif not isinstance(boxes, torch.Tensor) or boxes.dim() != 2 or boxes.size(1) != 5:
        raise ValueError("libdml.torch: boxes must be a Tensor[K, 5] or a list of Tensor[L, 4]")
    return boxes[:, 1:], boxes[:, 0].detach().to(torch.int32)


class _RoIAlign(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, rois, batch_indices, output_size, parameters, out_of_bounds_input_value):
        ctx.save_for_backward(input, rois, batch_indices)
        ctx.parameters = parameters
        return libdml.roi_align(input, rois, batch_indices, output_size,
                                out_of_bounds_input_value=out_of_bounds_input_value, **parameters)

    @staticmethod
    def backward(ctx, grad_output):
        input, rois, batch_indices = ctx.saved_tensors
        want_input, want_rois = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        needs_input = want_rois or ctx.parameters["reduction"] == "max"
        result = libdml.roi_align_grad(grad_output, rois, batch_indices, input=input if needs_input else None,
                                       input_shape=tuple(input.shape), compute_input_gradient=want_input,
                                       compute_roi_gradient=want_rois, **ctx.parameters)
        grad_input, grad_rois = result if want_rois else (result, None)
        return grad_input, grad_rois, None, None, None, None


def roi_align(input, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False, *,
              reduction="average", interpolation="linear", input_pixel_offset=None, output_pixel_offset=-0.5,
              out_of_bounds_input_value=0.0):
    """torchvision.ops.roi_align on libdml's ROI_ALIGN1 (and ROI_ALIGN_GRAD
    for backward, boxes included). aligned picks DirectML's InputPixelOffset
    (0.5 if aligned else 0); sampling_ratio > 0 fixes the samples per output
    (Minimum = Maximum), otherwise they adapt to the box (1 .. UINT_MAX)."""
    rois, batch_indices = _rois_and_batch_indices(boxes)
    if rois.dtype != input.dtype:
        raise ValueError(f"libdml.torch.roi_align: boxes are {rois.dtype} but input is {input.dtype}")
    samples = (sampling_ratio, sampling_ratio) if sampling_ratio > 0 else (1, libdml.UINT_MAX)
    parameters = dict(reduction=reduction, interpolation=interpolation, spatial_scale_x=spatial_scale,
                      spatial_scale_y=spatial_scale,
                      input_pixel_offset=(0.5 if aligned else 0.0) if input_pixel_offset is None
                      else input_pixel_offset, output_pixel_offset=output_pixel_offset,
                      minimum_samples_per_output=samples[0], maximum_samples_per_output=samples[1])
    return _RoIAlign.apply(input, rois, batch_indices, _pair(output_size), parameters, out_of_bounds_input_value)


class _RoIPool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, boxes, output_size, spatial_scale):
        return libdml.roi_pooling(input, boxes.detach(), output_size, spatial_scale)

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("libdml.torch.roi_pool: DirectML has no ROI pooling gradient operator "
                                  "(docs/python.md); train with roi_align")


def roi_pool(input, boxes, output_size, spatial_scale=1.0):
    """torchvision.ops.roi_pool on libdml's ROI_POOLING (forward only: DirectML
    defines no gradient for it)."""
    if isinstance(boxes, (list, tuple)):
        boxes = torch.cat([torch.cat([torch.full_like(box[:, :1], index), box], dim=1)
                           for index, box in enumerate(boxes)], dim=0)
    return _RoIPool.apply(input, boxes, _pair(output_size), float(spatial_scale))


class RoIAlign(nn.Module):
    """torchvision.ops.RoIAlign on libdml; extra keywords as in roi_align."""

    def __init__(self, output_size, spatial_scale, sampling_ratio, aligned=False, **directml):
        super().__init__()
        self.output_size, self.spatial_scale = output_size, spatial_scale
        self.sampling_ratio, self.aligned, self.directml = sampling_ratio, aligned, directml

    def forward(self, input, rois):
        return roi_align(input, rois, self.output_size, self.spatial_scale, self.sampling_ratio, self.aligned,
                         **self.directml)


class RoIPool(nn.Module):
    """torchvision.ops.RoIPool on libdml (forward only)."""

    def __init__(self, output_size, spatial_scale):
        super().__init__()
        self.output_size, self.spatial_scale = output_size, spatial_scale

    def forward(self, input, rois):
        return roi_pool(input, rois, self.output_size, self.spatial_scale)


# ---- Max pooling ----

class _MaxPool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, window, strides, padding, dilations, output_size, return_indices):
        ctx.save_for_backward(input)
        ctx.geometry = (window, strides, padding, padding, dilations)
        result = libdml.max_pooling(input, *ctx.geometry, output_indices=return_indices, output_size=output_size)
        if return_indices:
            ctx.mark_non_differentiable(result[1])
        return result

    @staticmethod
    def backward(ctx, grad_output, grad_indices=None):
        (input,) = ctx.saved_tensors
        return libdml.max_pooling_grad(input, grad_output, *ctx.geometry), None, None, None, None, None, None


def max_pool(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """torch.nn.functional.max_pool2d/3d on libdml (2 or 3 spatial axes, from
    input.dim()); indices are flat over the whole input tensor (DirectML's),
    `indices % (H * W)` gives PyTorch's per-plane ones."""
    k = input.dim() - 2

    def per_axis(value):
        return (value,) * k if isinstance(value, int) else tuple(value)

    window = per_axis(kernel_size)
    strides = window if stride is None else per_axis(stride)
    padding, dilations = per_axis(padding), per_axis(dilation)
    sizes = []
    for size, w, s, p, d in zip(input.shape[2:], window, strides, padding, dilations):
        span = size + 2 * p - d * (w - 1) - 1
        out = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (out - 1) * s >= size + p:  # PyTorch: the last window starts inside
            out -= 1
        sizes.append(out)
    return _MaxPool.apply(input, window, strides, padding, dilations, tuple(sizes), return_indices)


class MaxPool2d(nn.Module):
    """torch.nn.MaxPool2d's arguments; backward through MAX_POOLING_GRAD."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.arguments = (kernel_size, stride, padding, dilation, ceil_mode, return_indices)

    def forward(self, input):
        if input.dim() != self.spatial_dimensions + 2:
            raise ValueError(f"libdml.torch.{type(self).__name__}: input must have "
                             f"{self.spatial_dimensions + 2} dimensions, not {input.dim()}")
        return max_pool(input, *self.arguments)

    spatial_dimensions = 2


class MaxPool3d(MaxPool2d):
    """torch.nn.MaxPool3d's arguments; backward through MAX_POOLING_GRAD."""

    spatial_dimensions = 3


# ---- Batch normalization ----

# PyTorch forms of DirectML's fusable activations, for the backward pass
# through the activation (DirectML's gradient operators start after it).
_TORCH_ACTIVATIONS = {
    "linear": lambda x, alpha, beta: alpha * x + beta,
    "sigmoid": torch.sigmoid,
    "hard_sigmoid": lambda x, alpha, beta: torch.clamp(alpha * x + beta, 0, 1),
    "tanh": torch.tanh,
    "scaled_tanh": lambda x, alpha, beta: alpha * torch.tanh(beta * x),
    "relu": torch.relu,
    "leaky_relu": lambda x, alpha: torch.where(x >= 0, x, alpha * x),
    "thresholded_relu": lambda x, alpha: torch.where(x > alpha, x, torch.zeros_like(x)),
    "elu": lambda x, alpha: torch.where(x >= 0, x, alpha * torch.expm1(x)),
    "celu": lambda x, alpha: torch.clamp(x, min=0) + torch.clamp(alpha * torch.expm1(x / alpha), max=0),
    "scaled_elu": lambda x, alpha, gamma: torch.where(x > 0, gamma * x, gamma * alpha * torch.expm1(x)),
    "softplus": lambda x, steepness: nn.functional.softplus(x, beta=steepness),
    "parametric_softplus": lambda x, alpha, beta: alpha * beta * nn.functional.softplus(x, beta=beta),
    "softsign": nn.functional.softsign,
    "identity": lambda x: x,
    "shrink": lambda x, bias, threshold: torch.where(x > threshold, x - bias,
                                                     torch.where(x < -threshold, x + bias, torch.zeros_like(x))),
    "gelu": nn.functional.gelu,
}


def _through_activation(grad_output, pre_activation, activation):
    """dL/d(pre-activation) from dL/d(output)."""
    if activation is None or activation[0] == "identity":
        return grad_output
    name, values = activation
    with torch.enable_grad():
        pre = pre_activation.detach().requires_grad_()
        out = _TORCH_ACTIVATIONS[name](pre, *values.values())
        return torch.autograd.grad(out, pre, grad_output)[0]


def _channel_shape(input):
    return (1, input.shape[1]) + (1,) * (input.dim() - 2)


class _BatchNormTraining(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, fused_add, epsilon, activation):
        output, mean, variance = libdml.batch_normalization_training(
            input, weight, bias, fused_add, epsilon=epsilon,
            fused_activation=None if activation is None else (activation[0], activation[1]))
        ctx.save_for_backward(input, weight, bias, fused_add, mean, variance)
        ctx.epsilon, ctx.activation = epsilon, activation
        ctx.mark_non_differentiable(mean, variance)
        return output, mean, variance

    @staticmethod
    def backward(ctx, grad_output, grad_mean=None, grad_variance=None):
        input, weight, bias, fused_add, mean, variance = ctx.saved_tensors
        shape = _channel_shape(input)
        pre = None
        if ctx.activation is not None:
            pre = (input - mean.view(shape)) * (weight.view(shape) / torch.sqrt(variance.view(shape) + ctx.epsilon))
            pre = pre + bias.view(shape) + (fused_add if fused_add is not None else 0)
        grad_pre = _through_activation(grad_output, pre, ctx.activation)
        grad_input, grad_weight, grad_bias = libdml.batch_normalization_training_grad(
            input, grad_pre, mean, variance, weight, epsilon=ctx.epsilon)
        return grad_input, grad_weight, grad_bias, (grad_pre if fused_add is not None else None), None, None


class _BatchNormInference(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, mean, variance, weight, bias, epsilon, activation):
        ctx.save_for_backward(input, mean, variance, weight, bias)
        ctx.epsilon, ctx.activation = epsilon, activation
        return libdml.batch_normalization(input, mean, variance, weight, bias, epsilon=epsilon,
                                          fused_activation=None if activation is None else activation)

    @staticmethod
    def backward(ctx, grad_output):
        input, mean, variance, weight, bias = ctx.saved_tensors
        shape = _channel_shape(input)
        pre = None
        if ctx.activation is not None:
            pre = (input - mean.view(shape)) * (weight.view(shape) / torch.sqrt(variance.view(shape) + ctx.epsilon))
            pre = pre + bias.view(shape)
        grad_pre = _through_activation(grad_output, pre, ctx.activation)
        grad_input, grad_weight, grad_bias = libdml.batch_normalization_grad(input, grad_pre, mean, variance, weight,
                                                                             epsilon=ctx.epsilon)
        return grad_input, None, None, grad_weight, grad_bias, None, None


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5,
               fused_activation=None, fused_add=None):
    """torch.nn.functional.batch_norm on libdml, plus DirectML's fusions:
    fused_activation (libdml.ACTIVATIONS: 'relu', ('leaky_relu', 0.1), ...) and,
    in training, fused_add (a residual added before the activation)."""
    channels = input.shape[1]
    if weight is None:
        weight = torch.ones(channels, dtype=input.dtype, device=input.device)
    if bias is None:
        bias = torch.zeros(channels, dtype=input.dtype, device=input.device)
    activation = libdml.activation_parameters(fused_activation)
    activation = None if activation is None else (activation[0], activation[1])
    if training:
        output, mean, variance = _BatchNormTraining.apply(input, weight, bias, fused_add, eps, activation)
        if running_mean is not None:
            count = input.numel() // channels
            with torch.no_grad():  # PyTorch keeps the unbiased variance
                running_mean.mul_(1 - momentum).add_(momentum * mean)
                running_var.mul_(1 - momentum).add_(momentum * variance * count / max(count - 1, 1))
        return output
    if fused_add is not None:
        raise ValueError("libdml.torch.batch_norm: fused_add is a training fusion (BATCH_NORMALIZATION_TRAINING)")
    return _BatchNormInference.apply(input, running_mean, running_var, weight, bias, eps, activation)


class BatchNorm(nn.Module):
    """torch.nn.BatchNorm1d/2d/3d's arguments (any input of 2 to 8 dimensions,
    channels second) plus fused_activation; forward(input, fused_add=None)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 fused_activation=None, device=None, dtype=None):
        super().__init__()
        self.eps, self.momentum, self.fused_activation = eps, momentum, fused_activation
        options = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.ones(num_features, **options)) if affine else None
        self.bias = nn.Parameter(torch.zeros(num_features, **options)) if affine else None
        self.track_running_stats = track_running_stats
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **options))
            self.register_buffer("running_var", torch.ones(num_features, **options))
        else:
            self.running_mean = self.running_var = None

    def forward(self, input, fused_add=None):
        training = self.training or not self.track_running_stats
        return batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, training,
                          self.momentum, self.eps, self.fused_activation, fused_add)
