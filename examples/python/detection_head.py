"""One training step of a detection head's ROI align, on the CPU and (when
PyTorch sees one) on the GPU: libdml.torch.roi_align is torchvision's
roi_align with a deterministic backward and a gradient for the boxes."""
import torch

import libdml.torch as dml

for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
    torch.manual_seed(0)
    features = torch.randn(2, 256, 50, 68, device=device, requires_grad=True)  # an FPN level, stride 8
    boxes = torch.tensor([[0, 10.0, 20.0, 200.0, 150.0],  # [batch, x1, y1, x2, y2] in image pixels
                          [1, 64.0, 32.0, 96.0, 300.0]], device=device, requires_grad=True)
    head = dml.RoIAlign(output_size=7, spatial_scale=1 / 8, sampling_ratio=2, aligned=True)
    pooled = head(features, boxes)  # [2, 256, 7, 7], as torchvision.ops.RoIAlign
    loss = pooled.square().mean()
    loss.backward()  # ROI_ALIGN_GRAD: the same bits on every run
    print(device, tuple(pooled.shape), f"loss {loss.item():.6f}",
          f"|dL/dfeatures| {features.grad.norm().item():.6f}", "dL/dboxes", boxes.grad[:, 1:].tolist())
