"""libdml.torch against torchvision 0.14 and PyTorch (CPU): forward values,
gradients, determinism, and gradcheck of ROI align w.r.t. input and boxes."""
import math
import sys

import numpy as np
import pytest
import torch
import torchvision

import libdml
import libdml.torch as dml_torch


def random_boxes(rng, count, batch, height, width, minimum_size, scale):
    """[K, 5] boxes whose scaled size is at least minimum_size, inside the image."""
    boxes = []
    for _ in range(count):
        w, h = (rng.uniform(minimum_size, size - 1) for size in (width, height))
        x1, y1 = rng.uniform(0, width - 1 - w), rng.uniform(0, height - 1 - h)
        boxes.append([rng.integers(0, batch), x1 / scale, y1 / scale, (x1 + w) / scale, (y1 + h) / scale])
    return torch.tensor(boxes, dtype=torch.float32)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [-1, 2])
@pytest.mark.parametrize("spatial_scale", [1.0, 0.5])
def test_roi_align_matches_torchvision(rng, aligned, sampling_ratio, spatial_scale):
    x = torch.from_numpy(rng.standard_normal((2, 3, 12, 10)).astype(np.float32)).requires_grad_()
    # torchvision forces boxes to at least 1 pixel when not aligned; DirectML does not (docs/python.md)
    boxes = random_boxes(rng, 7, 2, 12, 10, 1.0, spatial_scale)
    args = ((3, 4), spatial_scale, sampling_ratio, aligned)
    ours = dml_torch.roi_align(x, boxes, *args)
    theirs = torchvision.ops.roi_align(x, boxes, *args)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    dy = torch.from_numpy(rng.standard_normal(ours.shape).astype(np.float32))
    ours_grad, = torch.autograd.grad(ours, x, dy)
    theirs_grad, = torch.autograd.grad(theirs, x, dy)
    torch.testing.assert_close(ours_grad, theirs_grad, rtol=1e-5, atol=1e-5)
    # the same boxes as one list of [L, 4] per image
    per_image = [boxes[boxes[:, 0] == b, 1:] for b in range(2)]
    order = torch.cat([torch.nonzero(boxes[:, 0] == b).flatten() for b in range(2)])
    torch.testing.assert_close(dml_torch.roi_align(x, per_image, *args), theirs[order], rtol=1e-5, atol=1e-5)
    module = dml_torch.RoIAlign((3, 4), spatial_scale, sampling_ratio, aligned)
    torch.testing.assert_close(module(x, boxes), theirs, rtol=1e-5, atol=1e-5)


def test_roi_align_backward_is_deterministic(rng):
    x = torch.from_numpy(rng.standard_normal((2, 8, 16, 16)).astype(np.float32)).requires_grad_()
    boxes = random_boxes(rng, 64, 2, 16, 16, 1.0, 1.0)  # heavily overlapping boxes
    boxes.requires_grad_()
    gradients = []
    for _ in range(3):
        x.grad = boxes.grad = None
        dml_torch.roi_align(x, boxes, 7, 1.0, 2, True).pow(2).sum().backward()
        gradients.append((x.grad.clone(), boxes.grad.clone()))
    for grad_x, grad_boxes in gradients[1:]:
        assert torch.equal(grad_x, gradients[0][0]) and torch.equal(grad_boxes, gradients[0][1])
    assert torch.count_nonzero(gradients[0][1][:, 1:]) > 0 and torch.all(gradients[0][1][:, 0] == 0)


def boxes_away_from_pixels(rng, count, height, width, output_size, sampling_ratio, offset):
    """Boxes whose samples stay 0.02 px or more from integer coordinates and
    inside the image, where ROI align is differentiable in the box."""
    boxes = []
    while len(boxes) < count:
        x1, x2 = sorted(rng.uniform(0.2, width - 1.2, 2))
        y1, y2 = sorted(rng.uniform(0.2, height - 1.2, 2))
        positions = [start + (t + 0.5) * (end - start) / (n * sampling_ratio) - offset
                     for start, end, n in ((x1, x2, output_size), (y1, y2, output_size))
                     for t in range(n * sampling_ratio)]
        if min(abs(p - round(p)) for p in positions) > 0.02 and min(positions) > 0 and \
                max(positions) < min(height, width) - 1:
            boxes.append([rng.integers(0, 2), x1, y1, x2, y2])
    return torch.tensor(boxes, dtype=torch.float64)


@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_gradcheck_input_and_boxes(rng, aligned):
    """libdml computes in float32: gradcheck runs on a float64 wrapper with
    finite differences sized for float32 (eps 1e-3, tolerance 1e-2)."""
    x = torch.from_numpy(rng.standard_normal((2, 2, 9, 9))).requires_grad_()
    boxes = boxes_away_from_pixels(rng, 3, 9, 9, 2, 2, 0.5 if aligned else 0.0)
    batch, corners = boxes[:, :1], boxes[:, 1:].clone().requires_grad_()  # the batch column is an index

    def function(input, coordinates):
        rois = torch.cat([batch, coordinates], dim=1)
        return dml_torch.roi_align(input.float(), rois.float(), 2, 1.0, 2, aligned).double()

    assert torch.autograd.gradcheck(function, (x, corners), eps=1e-3, atol=1e-2, rtol=1e-2)


def test_roi_align_directml_extras(rng):
    x = torch.from_numpy(rng.standard_normal((1, 2, 8, 8)).astype(np.float32)).requires_grad_()
    boxes = random_boxes(rng, 4, 1, 8, 8, 1.0, 1.0)
    y = dml_torch.roi_align(x, boxes, 2, 1.0, 2, True, reduction="max", interpolation="nearest")
    want = libdml.roi_align(x.detach(), boxes[:, 1:].contiguous(), boxes[:, 0].to(torch.int32), 2, reduction="max",
                            interpolation="nearest", minimum_samples_per_output=2, maximum_samples_per_output=2)
    assert torch.equal(y, want)
    y.sum().backward()
    assert x.grad.sum().item() == pytest.approx(y.numel())  # MAX: each output's gradient reaches one pixel


def test_roi_pool_matches_torchvision(rng):
    x = torch.from_numpy(rng.standard_normal((2, 3, 12, 10)).astype(np.float32))
    boxes = torch.cat([torch.from_numpy(rng.integers(0, 2, (6, 1))),
                       torch.from_numpy(np.sort(rng.integers(0, 10, (6, 2, 2)), axis=1).transpose(0, 2, 1)
                                        .reshape(6, 4))], dim=1).float()
    boxes = boxes[:, [0, 1, 2, 3, 4]]
    # pooled sizes of 2 and 4 make torchvision's float bin edges exact (docs/python.md)
    for output_size in ((2, 4), 4):
        ours = dml_torch.roi_pool(x, boxes, output_size, 1.0)
        assert torch.equal(ours, torchvision.ops.roi_pool(x, boxes, output_size, 1.0))
        assert torch.equal(dml_torch.RoIPool(output_size, 1.0)(x, boxes), ours)
    with pytest.raises(NotImplementedError, match="no ROI pooling gradient"):
        dml_torch.roi_pool(x.requires_grad_(), boxes, 2).sum().backward()


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool_matches_torch(rng, k, ceil_mode):
    spatial = (7, 6, 5)[:k]
    x = torch.from_numpy(rng.standard_normal((2, 3) + spatial).astype(np.float32)).requires_grad_()
    arguments = dict(kernel_size=3, stride=2, padding=1, dilation=1 if k == 3 else 2, ceil_mode=ceil_mode)
    pool = dml_torch.MaxPool2d if k == 2 else dml_torch.MaxPool3d
    ours, indices = pool(return_indices=True, **arguments)(x)
    torch_pool = torch.nn.functional.max_pool2d if k == 2 else torch.nn.functional.max_pool3d
    theirs, their_indices = torch_pool(x, return_indices=True, **arguments)
    assert torch.equal(ours, theirs)
    plane = math.prod(spatial)
    assert torch.equal(indices % plane, their_indices)  # DirectML's indices are flat over the whole tensor
    dy = torch.from_numpy(rng.standard_normal(ours.shape).astype(np.float32))
    torch.testing.assert_close(torch.autograd.grad(ours, x, dy)[0], torch.autograd.grad(theirs, x, dy)[0])


@pytest.mark.parametrize("activation", [None, "relu", ("leaky_relu", 0.1)])
def test_batch_norm_matches_torch(rng, activation):
    x = torch.from_numpy(rng.standard_normal((4, 3, 5, 6)).astype(np.float32)).requires_grad_()
    ours = dml_torch.BatchNorm(3, fused_activation=activation)
    theirs = torch.nn.BatchNorm2d(3)
    with torch.no_grad():
        for module in (ours, theirs):
            module.weight.copy_(torch.tensor([0.5, -1.0, 2.0]))
            module.bias.copy_(torch.tensor([0.1, 0.0, -0.3]))

    def torch_activation(y):
        if activation is None:
            return y
        return torch.relu(y) if activation == "relu" else torch.nn.functional.leaky_relu(y, 0.1)

    for training in (True, False):
        ours.train(training)
        theirs.train(training)
        y, want = ours(x), torch_activation(theirs(x))
        torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-5)
        dy = torch.from_numpy(rng.standard_normal(y.shape).astype(np.float32))
        got = torch.autograd.grad(y, (x, ours.weight, ours.bias), dy)
        expected = torch.autograd.grad(want, (x, theirs.weight, theirs.bias), dy)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(ours.running_mean, theirs.running_mean)
        torch.testing.assert_close(ours.running_var, theirs.running_var)


def test_batch_norm_fused_add_gradient(rng):
    x, add = (torch.from_numpy(rng.standard_normal((3, 2, 4)).astype(np.float32)).requires_grad_()
              for _ in range(2))
    y = dml_torch.batch_norm(x, None, None, training=True, fused_activation="relu", fused_add=add)
    want = torch.relu(torch.nn.functional.batch_norm(x, None, None, training=True) + add)
    torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-5)
    dy = torch.from_numpy(rng.standard_normal(y.shape).astype(np.float32))
    for g, e in zip(torch.autograd.grad(y, (x, add), dy), torch.autograd.grad(want, (x, add), dy)):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


def test_roi_pool_float_bin_difference_is_as_documented():
    """docs/python.md: a 57-row region in 7 bins; torchvision's float32 bin
    end ceil(7 * (57 / 7)) is 58, one row past the region, DirectML's integer
    bins end at 57."""
    x = torch.zeros(1, 1, 70, 4)
    x[0, 0, 59, :] = 5.0  # the row just below the region's inclusive end (row 58)
    boxes = torch.tensor([[0.0, 0.0, 2.0, 1.0, 58.0]])
    assert torchvision.ops.roi_pool(x, boxes, (7, 1), 1.0)[-1].max() == 5.0
    assert dml_torch.roi_pool(x, boxes, (7, 1), 1.0).max() == 0.0
    assert libdml.roi_pooling(x, boxes, (7, 1)).max() == 0.0


def test_roi_align_small_box_difference_is_as_documented(rng):
    """docs/python.md: with aligned=False torchvision widens boxes to 1 pixel;
    DirectML samples the box as it is."""
    x = torch.from_numpy(rng.standard_normal((1, 1, 8, 8)).astype(np.float32))
    boxes = torch.tensor([[0.0, 2.0, 2.0, 2.25, 2.25]])
    ours = dml_torch.roi_align(x, boxes, 2, 1.0, 2, False)
    theirs = torchvision.ops.roi_align(x, boxes, 2, 1.0, 2, False)
    widened = torch.tensor([[0.0, 2.0, 2.0, 3.0, 3.0]])
    torch.testing.assert_close(theirs, dml_torch.roi_align(x, widened, 2, 1.0, 2, False), rtol=1e-5, atol=1e-6)
    assert not torch.allclose(ours, theirs)


def test_readme_example_runs():
    """examples/python/detection_head.py, shown in README.md, runs and its box gradient is filled."""
    import os
    import subprocess

    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "detection_head.py")
    result = subprocess.run([sys.executable, example], capture_output=True, text=True, check=True)
    assert result.stdout.startswith("cpu (2, 256, 7, 7) loss") and "dL/dboxes [[" in result.stdout
