"""The torchvision peer of bench_roi (Debian's python3-torchvision, or torch
and torchvision from pip).

Usage: peer_torchvision.py THREADS WORKLOAD...
A workload is kind:type:layout:N,C,H,W:R:OH,OW:scale:samples:rois, with kind
pool (roi_pool), align (roi_align, AVERAGE, LINEAR, aligned=False), grad (the
feature gradient of roi_align); type f32 or f16; layout nchw or nhwc; rois
default, small or large (drawn as bench_roi.c draws them).
Prints a first line '# torch X, torchvision Y, python Z' (bench_roi shows
it), then one line per workload: the workload and its median milliseconds,
or '-' where torchvision cannot run it, the reason on stderr. Exits 3, the
reason on stderr, when torch or torchvision cannot be imported.
"""
import statistics
import sys
import time

try:
    import torch
    import torchvision  # registers torch.ops.torchvision
except Exception as error:  # ImportError, or e.g. a torchvision built for another torch
    print("peer_torchvision: %s cannot import torch and torchvision: %s: %s"
          % (sys.executable, type(error).__name__, error), file=sys.stderr)
    sys.exit(3)


def boxes(rois, n, h, w, scale, kind, gen):
    """Detection-proposal-like boxes (BENCHMARKS.md) in image coordinates."""
    image_w, image_h = w / scale, h / scale
    u = lambda: torch.rand(rois, generator=gen, dtype=torch.float64)
    batch = torch.randint(0, n, (rois,), generator=gen).double()
    if kind == "small":  # 0.5 to 2.5 feature pixels a side
        width, height = (0.5 + 2 * u()) / scale, (0.5 + 2 * u()) / scale
    elif kind == "large":  # half the image to all of it
        width, height = (0.5 + 0.5 * u()) * image_w, (0.5 + 0.5 * u()) * image_h
    else:
        width, height = u() * image_w * 0.5 + 4, u() * image_h * 0.5 + 4
    x1, y1 = u() * image_w * 0.8, u() * image_h * 0.8
    x2 = torch.minimum(x1 + width, torch.full_like(x1, image_w - 1))
    y2 = torch.minimum(y1 + height, torch.full_like(y1, image_h - 1))
    return torch.stack([batch, x1, y1, x2, y2], 1)


def median_ms(fn):
    start = time.perf_counter()
    fn()
    repeats = 11 if time.perf_counter() - start < 0.5 else 3  # the slow FLOAT16 kernels: fewer
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def measure(workload):
    kind, dtype, layout, shape, rois, out, scale, samples, roi_kind = workload.split(":")
    n, c, h, w = map(int, shape.split(","))
    oh, ow = map(int, out.split(","))
    scale, samples, rois = float(scale), int(samples), int(rois)
    gen = torch.Generator().manual_seed(1)
    dt = torch.float16 if dtype == "f16" else torch.float32
    memory = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    x = torch.randn(n, c, h, w, generator=gen).to(dt).contiguous(memory_format=memory)
    b = boxes(rois, n, h, w, scale, roi_kind, gen).to(dt)
    ops = torch.ops.torchvision
    if kind == "pool":
        return median_ms(lambda: ops.roi_pool(x, b, scale, oh, ow))
    if kind == "align":
        return median_ms(lambda: ops.roi_align(x, b, scale, oh, ow, samples, False))
    g = torch.randn(rois, c, oh, ow, generator=gen).to(dt).contiguous(memory_format=memory)
    return median_ms(lambda: ops._roi_align_backward(g, b, scale, oh, ow, n, c, h, w, samples, False))


def main():
    torch.set_num_threads(int(sys.argv[1]))
    print("# torch %s, torchvision %s, python %s (%s), %d threads"
          % (torch.__version__, torchvision.__version__, sys.version.split()[0], sys.executable,
             torch.get_num_threads()), flush=True)
    for workload in sys.argv[2:]:
        try:
            result = "%.4f" % measure(workload)
        except Exception as error:  # e.g. a type the CPU kernel lacks
            print("peer_torchvision: %s: %s: %s" % (workload, type(error).__name__, error), file=sys.stderr)
            result = "-"
        print(workload, result, flush=True)


main()
