"""libdml.torch.roi_align against torchvision.ops.roi_align on the same
tensors: forward, and forward + backward (input gradient; libdml also with
the box gradient, which torchvision lacks). A Faster R-CNN box head's shapes:
FPN-level features 2x256x50x68, 512 boxes, 7x7 output, sampling ratio 2.

    make bench-python        (or: PYTHONPATH=<libdml install> /usr/bin/python3 bench/bench_roi_align_torch.py)

Prints the median of the repeats in ms and torchvision's time / libdml's
(> 1: libdml is faster), on the CPU and, when PyTorch sees one, on the GPU.
"""
import argparse
import statistics
import time

import torch
import torchvision

import libdml.torch as dml_torch


def median_ms(function, device, repeats):
    for _ in range(2):
        function()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def problem(device, batch, channels, height, width, boxes, generator):
    features = torch.randn(batch, channels, height, width, generator=generator).to(device)
    corners = torch.rand(boxes, 4, generator=generator) * torch.tensor([width, height, width, height]) * 8
    corners = torch.cat([corners[:, :2].minimum(corners[:, 2:]), corners[:, :2].maximum(corners[:, 2:])], dim=1)
    indices = torch.randint(0, batch, (boxes, 1), generator=generator).float()
    return features, torch.cat([indices, corners], dim=1).to(device)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boxes", type=int, default=512)
    parser.add_argument("--channels", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=15)
    options = parser.parse_args()
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    arguments = dict(output_size=7, spatial_scale=0.125, sampling_ratio=2, aligned=True)
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, {torch.get_num_threads()} CPU threads")
    for device in devices:
        features, boxes = problem(device, 2, options.channels, 50, 68, options.boxes, torch.Generator().manual_seed(0))
        grad = torch.randn(options.boxes, options.channels, 7, 7).to(device)
        x = features.clone().requires_grad_()
        b = boxes.clone().requires_grad_()

        def forward(roi_align):
            return lambda: roi_align(features, boxes, **arguments)

        def backward(roi_align, inputs):
            return lambda: torch.autograd.grad(roi_align(x, b if len(inputs) == 2 else boxes, **arguments), inputs,
                                               grad)

        rows = [
            ("forward", forward(dml_torch.roi_align), forward(torchvision.ops.roi_align)),
            ("forward + backward (input)", backward(dml_torch.roi_align, (x,)),
             backward(torchvision.ops.roi_align, (x,))),
            ("forward + backward (input, boxes)", backward(dml_torch.roi_align, (x, b)), None),
        ]
        for name, ours, theirs in rows:
            ours_ms = median_ms(ours, device, options.repeats)
            line = f"{device.type:4} roi_align {name:34} libdml {ours_ms:9.3f} ms"
            if theirs is not None:
                theirs_ms = median_ms(theirs, device, options.repeats)
                line += f"   torchvision {theirs_ms:9.3f} ms   x{theirs_ms / ours_ms:.2f}"
            else:
                line += "   torchvision: no box gradient"
            print(line)


if __name__ == "__main__":
    main()
