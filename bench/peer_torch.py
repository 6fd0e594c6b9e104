#!/usr/bin/env python3
"""The GPU peer of bench_cuda: PyTorch, cuDNN and torchvision on the workloads
of BENCHMARKS.md, FLOAT32 and FLOAT16, NCHW and channels-last, outputs
preallocated where the library lets the caller pass them.

Prints one line per (workload, dtype, variant): "workload dtype variant ms",
the CUDA-event median per call over batches of back-to-back calls; bench_cuda
--peer FILE reads these lines and prints the ratio to the fastest variant.

    python3 bench/peer_torch.py > peer.txt && build/bench/bench_cuda --peer peer.txt
"""
import sys

import torch
import torch.nn.functional as F

try:
    import torchvision  # noqa: F401  (registers torch.ops.torchvision)
    from torchvision.ops import roi_align, roi_pool
except ImportError:  # the ROI rows are then left out
    roi_align = roi_pool = None

BATCH, REPEATS = 20, 15


def median_ms(fn):
    """CUDA-event median per call over batches of BATCH back-to-back calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(REPEATS):
        start.record()
        for _ in range(BATCH):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / BATCH)
    return sorted(times)[len(times) // 2]


def report(workload, dtype, variant, fn):
    try:
        ms = median_ms(fn)
    except Exception as error:  # a variant this build lacks: say so, go on
        print(f"# {workload} {dtype} {variant}: {type(error).__name__}: {error}", file=sys.stderr)
        return
    print(f"{workload} {dtype} {variant} {ms:.5f}", flush=True)


def layouts(x):
    yield "nchw", x.contiguous()
    yield "nhwc", x.contiguous(memory_format=torch.channels_last)


def max_pooling(name, shape, k, s, p, dtype, tag):
    for layout, x in layouts(torch.randn(shape, device="cuda", dtype=dtype)):
        out, idx = F.max_pool2d(x, k, s, p, return_indices=True)
        fwd_args = (x, [k, k], [s, s], [p, p], [1, 1], False)
        report(f"maxpool_fwd_idx_{name}", tag, f"torch_{layout}",
               lambda: torch.ops.aten.max_pool2d_with_indices.out(*fwd_args, out=out, indices=idx))
        dy = torch.randn_like(out)
        dx = torch.empty_like(x)
        report(f"maxpool_grad_{name}", tag, f"torch_{layout}",
               lambda: torch.ops.aten.max_pool2d_with_indices_backward.grad_input(
                   dy, x, [k, k], [s, s], [p, p], [1, 1], False, idx, grad_input=dx))


def batch_normalization(dtype, tag):
    shape, name = (32, 256, 56, 56), "32x256x56x56"
    c = shape[1]
    for layout, x in layouts(torch.randn(shape, device="cuda", dtype=dtype)):
        # cuDNN takes FLOAT32 parameters for FLOAT16 data (mixed precision).
        weight = torch.randn(c, device="cuda")
        bias = torch.randn(c, device="cuda")
        running_mean = torch.zeros(c, device="cuda")
        running_var = torch.ones(c, device="cuda")

        def cudnn():
            return torch.ops.aten.cudnn_batch_norm(x, weight, bias, running_mean, running_var, True, 0.1, 1e-5)

        def native():
            return torch.ops.aten.native_batch_norm(x, weight, bias, running_mean, running_var, True, 0.1, 1e-5)

        report(f"bn_infer_fwd_{name}", tag, f"cudnn_{layout}",
               lambda: torch.ops.aten.cudnn_batch_norm(x, weight, bias, running_mean, running_var, False, 0.1, 1e-5))
        report(f"bn_infer_fwd_{name}", tag, f"native_{layout}",
               lambda: torch.ops.aten.native_batch_norm(x, weight, bias, running_mean, running_var, False, 0.1, 1e-5))
        report(f"bn_train_fwd_{name}", tag, f"cudnn_{layout}", cudnn)
        report(f"bn_train_fwd_{name}", tag, f"native_{layout}", native)
        report(f"bn_train_fwd_relu_{name}", tag, f"cudnn+relu_{layout}", lambda: torch.relu_(cudnn()[0]))
        report(f"bn_train_fwd_relu_{name}", tag, f"native+relu_{layout}", lambda: torch.relu_(native()[0]))

        dy = torch.randn_like(x)
        _, save_mean, save_invstd, reserve = cudnn()
        report(f"bn_train_grad_{name}", tag, f"cudnn_{layout}",
               lambda: torch.ops.aten.cudnn_batch_norm_backward(
                   x, dy, weight, running_mean, running_var, save_mean, save_invstd, 1e-5, reserve))
        # The gradient through fixed statistics (BATCH_NORMALIZATION_GRAD).
        report(f"bn_grad_{name}", tag, f"native_{layout}",
               lambda: torch.ops.aten.native_batch_norm_backward(
                   dy, x, weight, running_mean, running_var, None, None, False, 1e-5, [True, True, True]))
        _, save_mean, save_invstd = native()
        report(f"bn_train_grad_{name}", tag, f"native_{layout}",
               lambda: torch.ops.aten.native_batch_norm_backward(
                   dy, x, weight, running_mean, running_var, save_mean, save_invstd, True, 1e-5,
                   [True, True, True]))


def proposals(n, h, w, scale, count):
    """ROIs as BENCHMARKS.md draws them: rows [batch, x1, y1, x2, y2]."""
    image_w, image_h = w / scale, h / scale
    u = lambda: torch.rand(count, device="cuda")  # noqa: E731
    batch = torch.randint(0, n, (count,), device="cuda").float()
    x1, y1 = u() * image_w * 0.8, u() * image_h * 0.8
    x2 = torch.clamp(x1 + u() * image_w * 0.5 + 4, max=image_w - 1)
    y2 = torch.clamp(y1 + u() * image_h * 0.5 + 4, max=image_h - 1)
    return torch.stack([batch, x1, y1, x2, y2], dim=1)


def roi_operators(dtype, tag):
    if roi_pool is None:
        return
    n, c = 2, 256
    rois = proposals(n, 64, 64, 1 / 16, 512).to(dtype)
    for layout, x in layouts(torch.randn((n, c, 64, 64), device="cuda", dtype=dtype)):
        report("roi_pool_2x256x64x64_512x7x7", tag, f"torchvision_{layout}",
               lambda: roi_pool(x, rois, (7, 7), 1 / 16))
    rois = proposals(n, 128, 128, 1 / 8, 512).to(dtype)
    for layout, x in layouts(torch.randn((n, c, 128, 128), device="cuda", dtype=dtype)):
        report("roi_align_fwd_2x256x128x128_512x7x7", tag, f"torchvision_{layout}",
               lambda: roi_align(x, rois, (7, 7), 1 / 8, sampling_ratio=2, aligned=False))
        dy = torch.randn((512, c, 7, 7), device="cuda", dtype=dtype)
        if layout == "nhwc":
            dy = dy.contiguous(memory_format=torch.channels_last)
        report("roi_align_grad_2x256x128x128_512x7x7", tag, f"torchvision_{layout}",
               lambda: torch.ops.torchvision._roi_align_backward(
                   dy, rois, 1 / 8, 7, 7, n, c, 128, 128, 2, False))


def main():
    torch.backends.cudnn.benchmark = True
    print(f"# torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}", file=sys.stderr)
    for dtype, tag in ((torch.float32, "f32"), (torch.float16, "f16")):
        max_pooling("32x256x56x56_3x3s2p1", (32, 256, 56, 56), 3, 2, 1, dtype, tag)
        max_pooling("64x128x112x112_2x2s2", (64, 128, 112, 112), 2, 2, 0, dtype, tag)
        batch_normalization(dtype, tag)
        roi_operators(dtype, tag)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
