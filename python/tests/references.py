"""Float64 references written from the specification (docs: /spec,
max_pooling.md, roi_pooling.md, roi_align.md, batch_normalization.md), with
plain loops that follow its pseudo-code line by line."""
import itertools
import math

import numpy as np


# ---- max_pooling.md §4-§6 ----

def pooled_size(size, window, stride, start, end, dilation):
    dilated = (window - 1) * dilation + 1
    padded = size + start + end
    return (padded - dilated) // stride + 1 if padded >= dilated else 1


def max_pooling(x, window, strides, start, end, dilations, output_spatial=None):
    """(output, flat indices): §5, ties to the lowest index, padding skipped."""
    n_size, c_size, spatial = x.shape[0], x.shape[1], x.shape[2:]
    k = len(spatial)
    if output_spatial is None:
        output_spatial = tuple(pooled_size(spatial[i], window[i], strides[i], start[i], end[i], dilations[i])
                               for i in range(k))
    output = np.empty((n_size, c_size) + tuple(output_spatial))
    indices = np.empty(output.shape, dtype=np.int64)
    for n, c in itertools.product(range(n_size), range(c_size)):
        for o in itertools.product(*(range(s) for s in output_spatial)):
            best, best_index = None, -1
            for w in itertools.product(*(range(s) for s in window)):
                p = [o[i] * strides[i] - start[i] + w[i] * dilations[i] for i in range(k)]
                if any(p[i] < 0 or p[i] >= spatial[i] for i in range(k)):
                    continue
                v = float(x[(n, c) + tuple(p)])
                if best is None or v > best or (math.isnan(best) and not math.isnan(v)):
                    best = v
                    best_index = int(np.ravel_multi_index((n, c) + tuple(p), x.shape))
            output[(n, c) + o] = -math.inf if best is None else best
            indices[(n, c) + o] = best_index
    return output, indices


def max_pooling_grad(x, dy, window, strides, start, end, dilations):
    """§6: scatter-add of dy to the forward argmax."""
    _, indices = max_pooling(x, window, strides, start, end, dilations, dy.shape[2:])
    dx = np.zeros(x.size)
    for index, g in zip(indices.ravel(), dy.astype(np.float64).ravel()):
        if index >= 0:
            dx[index] += g
    return dx.reshape(x.shape)


# ---- roi_pooling.md §3 ----

def _round_half_away(v):
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def roi_pooling(x, rois, pooled_height, pooled_width, spatial_scale):
    n_size, c_size, height, width = x.shape
    rois = rois.reshape(-1, 5)
    output = np.zeros((len(rois), c_size, pooled_height, pooled_width))
    for r, roi in enumerate(rois):
        b = int(roi[0])
        if not 0 <= b < n_size:
            continue
        x1, y1, x2, y2 = (_round_half_away(float(np.float32(v) * np.float32(spatial_scale))) for v in roi[1:])
        region_h, region_w = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        for ph, pw in itertools.product(range(pooled_height), range(pooled_width)):
            h0 = min(max((ph * region_h) // pooled_height + y1, 0), height)
            h1 = min(max(-((-(ph + 1) * region_h) // pooled_height) + y1, 0), height)
            w0 = min(max((pw * region_w) // pooled_width + x1, 0), width)
            w1 = min(max(-((-(pw + 1) * region_w) // pooled_width) + x1, 0), width)
            if h1 > h0 and w1 > w0:
                output[r, :, ph, pw] = x[b, :, h0:h1, w0:w1].reshape(c_size, -1).max(axis=1)
    return output


# ---- roi_align.md §4 and §7 ----

class RoiAlignParameters:
    def __init__(self, reduction="average", interpolation="linear", scale_x=1.0, scale_y=1.0, input_offset=0.5,
                 output_offset=-0.5, out_of_bounds=0.0, minimum=1, maximum=2**32 - 1, corners=False):
        self.__dict__.update(locals())
        del self.__dict__["self"]


def _sample_counts(roi, out_h, out_w, p):
    x1s, y1s = roi[0] * p.scale_x, roi[1] * p.scale_y
    size_x, size_y = roi[2] * p.scale_x - x1s, roi[3] * p.scale_y - y1s
    s_x = min(max(math.ceil(abs(size_x) / out_w), p.minimum), p.maximum)
    s_y = min(max(math.ceil(abs(size_y) / out_h), p.minimum), p.maximum)
    return x1s, y1s, size_x, size_y, s_x, s_y


def _sample_coordinate(start, size, t, count, p):
    if not p.corners:
        return start + (t - p.output_offset) * (size / count) - p.input_offset
    if count > 1:
        return start + t * (size / (count - 1)) - p.input_offset
    return start + 0.5 * size - p.input_offset


def _axis(c, size):
    c = max(c, 0.0)
    i0 = math.floor(c)
    if i0 >= size - 1:
        return size - 1, size - 1, 0.0
    return i0, i0 + 1, c - i0


def _taps(cx, cy, height, width, p):
    """[(row, column, weight)] of one sample, or None when out of bounds."""
    if cx < -1 or cx > width or cy < -1 or cy > height:
        return None
    if p.interpolation == "nearest":
        ix = min(max(math.ceil(cx - 0.5), 0), width - 1)
        iy = min(max(math.ceil(cy - 0.5), 0), height - 1)
        return [(iy, ix, 1.0)]
    xa, xb, fx = _axis(cx, width)
    ya, yb, fy = _axis(cy, height)
    return [(ya, xa, (1 - fy) * (1 - fx)), (ya, xb, (1 - fy) * fx), (yb, xa, fy * (1 - fx)), (yb, xb, fy * fx)]


def _samples(roi, out_h, out_w, oy, ox, p):
    """[(tx, ty, cx, cy, nX, nY)] of one output element, X outer, Y inner."""
    x1s, y1s, size_x, size_y, s_x, s_y = _sample_counts(roi, out_h, out_w, p)
    n_x, n_y = out_w * s_x, out_h * s_y
    return [(tx, ty, _sample_coordinate(x1s, size_x, tx, n_x, p), _sample_coordinate(y1s, size_y, ty, n_y, p),
             n_x, n_y)
            for tx in range(ox * s_x, ox * s_x + s_x) for ty in range(oy * s_y, oy * s_y + s_y)]


def _value(plane, taps, out_of_bounds):
    return out_of_bounds if taps is None else sum(w * plane[r, c] for r, c, w in taps)


def roi_align(x, rois, batch_indices, out_h, out_w, p):
    n_size, c_size, height, width = x.shape
    x = x.astype(np.float64)
    rois = rois.astype(np.float64).reshape(-1, 4)
    output = np.full((len(rois), c_size, out_h, out_w), float(p.out_of_bounds))
    for r, roi in enumerate(rois):
        b = int(batch_indices.ravel()[r])
        if not 0 <= b < n_size:
            continue
        for oy, ox in itertools.product(range(out_h), range(out_w)):
            samples = _samples(roi, out_h, out_w, oy, ox, p)
            for c in range(c_size):
                values = [_value(x[b, c], _taps(cx, cy, height, width, p), p.out_of_bounds)
                          for _, _, cx, cy, _, _ in samples]
                output[r, c, oy, ox] = sum(values) / len(values) if p.reduction == "average" else max(values)
    return output


def roi_align_grad(x, dy, rois, batch_indices, input_shape, p):
    """(dL/dinput, dL/drois) of §7: weights of §7.1, scatter of §7.2, the
    floor/ceil image gradient of §7.3."""
    n_size, c_size, height, width = input_shape
    dy = dy.astype(np.float64)
    roi_shape = rois.shape
    rois = rois.astype(np.float64).reshape(-1, 4)
    dx = np.zeros(input_shape)
    droi = np.zeros(rois.shape)
    for r, roi in enumerate(rois):
        b = int(batch_indices.ravel()[r])
        if not 0 <= b < n_size:
            continue
        for oy, ox in itertools.product(range(dy.shape[2]), range(dy.shape[3])):
            samples = _samples(roi, dy.shape[2], dy.shape[3], oy, ox, p)
            for c in range(c_size):
                g = dy[r, c, oy, ox]
                taps = [_taps(cx, cy, height, width, p) for _, _, cx, cy, _, _ in samples]
                if p.reduction == "average":
                    weights = [1.0 / len(samples)] * len(samples)
                else:
                    values = [_value(x[b, c].astype(np.float64), t, 0.0) for t in taps]
                    weights = [0.0] * len(samples)
                    weights[values.index(max(values))] = 1.0
                for (tx, ty, cx, cy, n_x, n_y), sample_taps, w in zip(samples, taps, weights):
                    if w == 0 or sample_taps is None:
                        continue
                    for row, column, tap in sample_taps:
                        dx[b, c, row, column] += g * w * tap
                    if x is None:
                        continue
                    plane = x[b, c].astype(np.float64)
                    u = (tx - p.output_offset) / n_x if not p.corners else (tx / (n_x - 1) if n_x > 1 else 0.5)
                    v = (ty - p.output_offset) / n_y if not p.corners else (ty / (n_y - 1) if n_y > 1 else 0.5)
                    cxc, cyc = min(max(cx, 0), width - 1), min(max(cy, 0), height - 1)
                    left, right, top, bottom = math.floor(cxc), math.ceil(cxc), math.floor(cyc), math.ceil(cyc)
                    xl, yl = cxc - left, cyc - top
                    tl, tr = plane[top, left], plane[top, right]
                    bl, br = plane[bottom, left], plane[bottom, right]
                    grad_x = (1 - yl) * (tr - tl) + yl * (br - bl)
                    grad_y = (1 - xl) * (bl - tl) + xl * (br - tr)
                    droi[r, 0] += g * w * grad_x * p.scale_x * (1 - u)
                    droi[r, 2] += g * w * grad_x * p.scale_x * u
                    droi[r, 1] += g * w * grad_y * p.scale_y * (1 - v)
                    droi[r, 3] += g * w * grad_y * p.scale_y * v
    return dx, droi.reshape(roi_shape)


# ---- batch_normalization.md §4-§8 ----

ACTIVATIONS = {
    "linear": lambda x, alpha, beta: alpha * x + beta,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "hard_sigmoid": lambda x, alpha, beta: np.maximum(0, np.minimum(alpha * x + beta, 1)),
    "tanh": np.tanh,
    "scaled_tanh": lambda x, alpha, beta: alpha * np.tanh(beta * x),
    "relu": lambda x: np.maximum(0, x),
    "leaky_relu": lambda x, alpha: np.where(x >= 0, x, alpha * x),
    "thresholded_relu": lambda x, alpha: np.where(x > alpha, x, 0),
    "elu": lambda x, alpha: np.where(x >= 0, x, alpha * (np.exp(x) - 1)),
    "celu": lambda x, alpha: np.maximum(0, x) + np.minimum(0, alpha * (np.exp(x / alpha) - 1)),
    "scaled_elu": lambda x, alpha, gamma: np.where(x > 0, gamma * x, gamma * (alpha * np.exp(x) - alpha)),
    "softplus": lambda x, steepness: np.log1p(np.exp(steepness * x)) / steepness,
    "parametric_softplus": lambda x, alpha, beta: alpha * np.log1p(np.exp(beta * x)),
    "softsign": lambda x: x / (1 + np.abs(x)),
    "identity": lambda x: x,
    "shrink": lambda x, bias, threshold: np.where(x > threshold, x - bias, np.where(x < -threshold, x + bias, 0)),
    "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
}


def activate(x, name=None, parameters=()):
    return x if name is None else ACTIVATIONS[name](x, *parameters)


def reduced_axes(parameter_shape):
    return tuple(i for i, s in enumerate(parameter_shape) if s == 1)


def batch_normalization(x, mean, variance, scale, bias, epsilon, activation=None, parameters=()):
    x, mean, variance, scale, bias = (t.astype(np.float64) for t in (x, mean, variance, scale, bias))
    return activate(scale * (x - mean) / np.sqrt(variance + epsilon) + bias, activation, parameters)


def batch_normalization_training(x, scale, bias, fused_add, epsilon, activation=None, parameters=()):
    x = x.astype(np.float64)
    axes = reduced_axes(scale.shape)
    mean = x.mean(axis=axes, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    pre = scale.astype(np.float64) * (x - mean) / np.sqrt(variance + epsilon) + bias.astype(np.float64)
    if fused_add is not None:
        pre = pre + fused_add.astype(np.float64)
    return activate(pre, activation, parameters), mean, variance


def batch_normalization_grad(x, dy, mean, variance, scale, epsilon, training):
    x, dy, mean, variance, scale = (t.astype(np.float64) for t in (x, dy, mean, variance, scale))
    axes = reduced_axes(scale.shape)
    group = x.size // scale.size
    inv = 1 / np.sqrt(variance + epsilon)
    sdy = dy.sum(axis=axes, keepdims=True)
    sdyxc = (dy * (x - mean)).sum(axis=axes, keepdims=True)
    if training:
        dx = scale * inv * (dy - sdy / group - (x - mean) * (sdyxc / group) / (variance + epsilon))
    else:
        dx = dy * scale * inv
    return dx, sdyxc * inv, sdy
