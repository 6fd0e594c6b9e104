"""The same operators on PyTorch CUDA tensors: results against the CPU
backend, zero copy (no host copy), PyTorch's current stream, autograd.
Skipped where PyTorch sees no GPU; run on the GPU machine before resolving."""
import numpy as np
import pytest
import torch
import torchvision

import libdml
import libdml.torch as dml_torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to PyTorch")


def roi_case(rng, count=32):
    x = torch.from_numpy(rng.standard_normal((2, 8, 20, 24)).astype(np.float32))
    rois = torch.from_numpy(rng.uniform(-2, 22, (count, 4)).astype(np.float32))
    batch_indices = torch.from_numpy(rng.integers(0, 2, count).astype(np.int32))
    return x, rois, batch_indices


def both(function, *tensors, **keywords):
    """function on CPU tensors and on their CUDA copies (keyword tensors too), results on the host."""
    cpu = function(*tensors, **keywords)
    on_gpu = {name: value.cuda() if isinstance(value, torch.Tensor) else value for name, value in keywords.items()}
    cuda = function(*(t.cuda() if isinstance(t, torch.Tensor) else t for t in tensors), **on_gpu)
    cuda = cuda if isinstance(cuda, tuple) else (cuda,)
    cpu = cpu if isinstance(cpu, tuple) else (cpu,)
    return cpu, tuple(t.cpu() for t in cuda)


def test_operators_match_the_cpu_backend(rng):
    x, rois, batch_indices = roi_case(rng)
    dy = torch.from_numpy(rng.standard_normal((32, 8, 3, 3)).astype(np.float32))
    # bit-identical families (README: max pooling, ROI pooling, ROI align, gradients included)
    cases = [
        both(libdml.roi_align, x, rois, batch_indices, 3),
        both(libdml.roi_align, x, rois, batch_indices, 3, reduction="max", interpolation="nearest"),
        both(libdml.roi_align_grad, dy, rois, batch_indices, input=x, compute_roi_gradient=True),
        both(libdml.max_pooling, x, 3, 2, 1, 1, output_indices=True),
        both(libdml.max_pooling_grad, x, torch.ones(2, 8, 10, 12), 3, 2, 1, 1),
        both(libdml.roi_pooling, x, torch.cat([batch_indices[:, None].float(), rois.abs()], 1), 3, 0.5),
    ]
    for cpu, cuda in cases:
        for a, b in zip(cpu, cuda):
            assert torch.equal(a, b)
    scale, bias = torch.randn(8), torch.randn(8)
    cpu, cuda = both(libdml.batch_normalization_training, x, scale, bias, epsilon=1e-3, fused_activation="relu")
    for a, b in zip(cpu, cuda):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    mean, variance = cpu[1], cpu[2]
    cpu, cuda = both(libdml.batch_normalization_training_grad, x, torch.randn_like(x), mean, variance, scale,
                     epsilon=1e-3)
    for a, b in zip(cpu, cuda):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_zero_copy_and_no_host_copy(rng, monkeypatch):
    x, rois, batch_indices = (t.cuda() for t in roi_case(rng))
    out = torch.empty(32, 8, 3, 3, device="cuda")
    pointer = out.data_ptr()

    def no_host_copy(*args, **kwargs):
        raise AssertionError("a host copy was made")

    monkeypatch.setattr(np, "empty", no_host_copy)
    monkeypatch.setattr(torch.Tensor, "cpu", no_host_copy)
    monkeypatch.setattr(torch.Tensor, "numpy", no_host_copy)
    result = libdml.roi_align(x, rois, batch_indices, 3, out=out)
    assert result is out and result.data_ptr() == pointer and result.is_cuda
    new = libdml.roi_align(x, rois, batch_indices, 3)
    assert new.is_cuda and new.device == x.device
    monkeypatch.undo()
    assert torch.equal(new.cpu(), out.cpu())


def test_runs_on_pytorchs_current_stream(rng):
    x, rois, batch_indices = roi_case(rng)
    want = libdml.roi_align(x, rois, batch_indices, 3)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        # produced, consumed and reduced on the side stream with no synchronization in between
        x_cuda = x.cuda(non_blocking=True) * 1.0
        y = libdml.roi_align(x_cuda, rois.cuda(), batch_indices.cuda(), 3)
        total = y.sum()
    stream.synchronize()
    assert torch.equal(y.cpu(), want)
    assert total.item() == pytest.approx(want.sum().item(), rel=1e-5)


def test_autograd_on_cuda(rng):
    x, rois, batch_indices = roi_case(rng, 64)
    boxes = torch.cat([batch_indices[:, None].float(), rois.abs()], 1).cuda()
    x = x.cuda().requires_grad_()
    ours = dml_torch.roi_align(x, boxes, 7, 0.5, 2, True)
    torch.testing.assert_close(ours, torchvision.ops.roi_align(x, boxes, 7, 0.5, 2, True), rtol=1e-5, atol=1e-5)
    gradients = []
    for _ in range(3):
        x.grad = None
        boxes.requires_grad_()
        boxes.grad = None
        dml_torch.roi_align(x, boxes, 7, 0.5, 2, True).pow(2).sum().backward()
        gradients.append((x.grad.clone(), boxes.grad.clone()))
    for grad_x, grad_boxes in gradients[1:]:  # deterministic, unlike torchvision's atomics
        assert torch.equal(grad_x, gradients[0][0]) and torch.equal(grad_boxes, gradients[0][1])
    pool = dml_torch.MaxPool2d(3, 2, 1, return_indices=True)
    y, indices = pool(x)
    assert y.is_cuda and indices.is_cuda
    norm = dml_torch.BatchNorm(8, fused_activation="relu").cuda()
    norm(x).sum().backward()
    assert norm.weight.grad is not None and norm.weight.grad.is_cuda
