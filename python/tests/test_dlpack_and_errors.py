"""DLPack views (zero copy, strides, broadcast, versioned capsules), errors
as exceptions with libdml's message, the compiled-operator cache, and
reference counts over many calls."""
import ctypes
import gc
import resource
import sys
import weakref

import numpy as np
import pytest
import torch

import libdml


def roi_inputs(rng, n=2, c=3, height=7, width=9, count=4):
    x = rng.standard_normal((n, c, height, width)).astype(np.float32)
    rois = rng.uniform(0, 8, (count, 4)).astype(np.float32)
    return x, rois, rng.integers(0, n, count).astype(np.uint32)


def test_out_is_written_in_place(rng):
    x, rois, batch_indices = roi_inputs(rng)
    out = np.full((4, 3, 2, 2), np.nan, np.float32)
    result = libdml.roi_align(x, rois, batch_indices, 2, out=out)
    assert result is out and result.ctypes.data == out.ctypes.data
    np.testing.assert_array_equal(out, libdml.roi_align(x, rois, batch_indices, 2))
    torch_out = torch.full((4, 3, 2, 2), float("nan"))
    result = libdml.roi_align(torch.from_numpy(x), torch.from_numpy(rois), torch.from_numpy(batch_indices.astype(
        np.int32)), 2, out=torch_out)
    assert result is torch_out and not torch.isnan(torch_out).any()
    np.testing.assert_array_equal(torch_out.numpy(), out)


def test_strided_and_broadcast_views(rng):
    x, rois, batch_indices = roi_inputs(rng)
    want = libdml.roi_align(x, rois, batch_indices, (2, 3))
    channels_last = torch.from_numpy(x).to(memory_format=torch.channels_last)
    assert not channels_last.is_contiguous()
    np.testing.assert_array_equal(libdml.roi_align(channels_last, torch.from_numpy(rois),
                                                   torch.from_numpy(batch_indices.astype(np.int64)), (2, 3)), want)
    # ROI rows inside a wider [K, 5] tensor, as torchvision passes boxes: a strided view
    boxes = np.concatenate([batch_indices[:, None].astype(np.float32), rois], axis=1)
    np.testing.assert_array_equal(libdml.roi_align(x, boxes[:, 1:], batch_indices, (2, 3)), want)
    # broadcast (zero-stride) input: one channel seen as three
    single = torch.from_numpy(x[:, :1].copy())
    expanded = single.expand(2, 3, 7, 9)
    assert expanded.stride(1) == 0
    result = libdml.roi_align(expanded, torch.from_numpy(rois), torch.from_numpy(batch_indices.astype(np.int32)),
                              (2, 3))
    np.testing.assert_array_equal(result.numpy(), libdml.roi_align(np.repeat(x[:, :1], 3, axis=1), rois,
                                                                   batch_indices, (2, 3)))
    # a round trip: libdml's output fed back as an input, through a strided view of it
    pooled = libdml.max_pooling(np.ascontiguousarray(want.transpose(0, 1, 3, 2)), 1)
    np.testing.assert_array_equal(pooled, want.transpose(0, 1, 3, 2))


class Deleter:
    def __init__(self):
        self.calls = 0
        self.callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self)

    def __call__(self, _):
        self.calls += 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensorVersioned(ctypes.Structure):
    """DLPack 1.0's struct, from the published header's layout."""
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.CFUNCTYPE(None, ctypes.c_void_p)), ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]


class VersionedProducer:
    """A DLPack 1.0 producer of a float32 NumPy array's memory."""

    def __init__(self, array, device_type=1, read_only=False, major=1):
        self.array, self.device_type, self.read_only, self.major = array, device_type, read_only, major
        self.deleter = Deleter()

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None, max_version=None):
        assert max_version == (1, 0)
        shape = (ctypes.c_int64 * self.array.ndim)(*self.array.shape)
        strides = (ctypes.c_int64 * self.array.ndim)(*(s // 4 for s in self.array.strides))
        managed = DLManagedTensorVersioned(self.major, 0, None, self.deleter.callback, 1 if self.read_only else 0,
                                           DLTensor(self.array.ctypes.data, DLDevice(self.device_type, 0),
                                                    self.array.ndim, DLDataType(2, 32, 1), shape, strides, 0))
        self.keep = (shape, strides, managed)
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = ctypes.py_object
        new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new_capsule(ctypes.addressof(managed), b"dltensor_versioned", None)


def test_versioned_capsules():
    x = np.array([1, 2, 3, 2, 4, 2, 5, 6, 7], np.float32).reshape(1, 1, 3, 3)
    producer = VersionedProducer(x)
    out = np.zeros((1, 1, 2, 2), np.float32)
    libdml.max_pooling(producer, 2, out=out)
    np.testing.assert_array_equal(out, [[[[4, 4], [6, 7]]]])
    gc.collect()
    assert producer.deleter.calls == 1  # the consumer calls the producer's deleter once
    with pytest.raises(ValueError, match="MAX_POOLING2: OutputTensor is read-only"):
        libdml.max_pooling(x, 2, out=VersionedProducer(np.zeros((1, 1, 2, 2), np.float32), read_only=True))
    with pytest.raises(TypeError, match="DLPack version 2.0 is not supported"):
        libdml.max_pooling(VersionedProducer(x, major=2), 2)


def test_errors_name_operator_field_and_rule(rng):
    x, rois, batch_indices = roi_inputs(rng)
    with pytest.raises(ValueError, match=r"ROI_ALIGN1: InputTensor.DataType is FLOAT64"):
        libdml.roi_align(x.astype(np.float64), rois, batch_indices, 2)
    with pytest.raises(ValueError, match=r"ROI_ALIGN1: OutputTensor"):
        libdml.roi_align(x, rois, batch_indices, 2, out=np.zeros((4, 5, 2, 2), np.float32))  # wrong channels
    with pytest.raises(ValueError, match=r"ROI_ALIGN1: OutputTensor.DataType"):
        libdml.roi_align(x, rois, batch_indices, 2, out=np.zeros((4, 3, 2, 2), np.float16))
    with pytest.raises(ValueError, match=r"MinimumSamplesPerOutput"):
        libdml.roi_align(x, rois, batch_indices, 2, minimum_samples_per_output=3, maximum_samples_per_output=2)
    with pytest.raises(ValueError, match=r"BatchIndicesTensor"):
        libdml.roi_align(x, rois, batch_indices[:3], 2)
    with pytest.raises(ValueError, match="negative"):
        libdml.roi_align(x[:, :, ::-1], rois, batch_indices, 2)
    with pytest.raises(TypeError, match="DLPack dtype"):
        libdml.roi_align(x.astype(np.complex64), rois, batch_indices, 2)
    with pytest.raises(TypeError, match="list"):
        libdml.roi_align(x.tolist(), rois, batch_indices, 2)
    with pytest.raises(ValueError, match="Sizes"):
        libdml.max_pooling(np.zeros((0, 3, 4, 4), np.float32), 2)
    with pytest.raises(ValueError, match="window_size has 3 entries but the input has 2 spatial"):
        libdml.max_pooling(x, (2, 2, 2))
    with pytest.raises(ValueError, match="fused_activation 'swish'"):
        libdml.batch_normalization_training(x, np.ones(3, np.float32), np.zeros(3, np.float32),
                                            fused_activation="swish")
    with pytest.raises(ValueError, match="reduction"):
        libdml.roi_align(x, rois, batch_indices, 2, reduction="sum")
    # an output that aliases an input (spec tensors.md T-4) and a broadcast output (T-3)
    with pytest.raises(ValueError, match="overlap"):
        libdml.max_pooling(x, 1, out=x)
    with pytest.raises(ValueError, match="Strides"):
        libdml.max_pooling(torch.from_numpy(x), 1, out=torch.empty(2, 3, 1, 1).expand(2, 3, 7, 9))


def test_wrong_device_is_an_error():
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(ValueError, match=r"MAX_POOLING2: InputTensor is in cuda:0 memory but the operator runs on "
                                         r"cpu:0"):
        libdml.max_pooling(VersionedProducer(x, device_type=2), 2, device=libdml.Device("cpu"))
    if not torch.cuda.is_available():
        # the CUDA backend of a CPU-only build, or without a GPU: an exception, never a crash
        with pytest.raises((libdml.Error, ValueError, TypeError)):
            libdml.max_pooling(VersionedProducer(x, device_type=2), 2)


def test_compiled_operators_are_cached(rng):
    device = libdml.Device()
    x, rois, batch_indices = roi_inputs(rng)
    for _ in range(5):
        libdml.roi_align(x, rois, batch_indices, 2, device=device)
    assert device.cache_size == 1
    libdml.roi_align(x, rois, batch_indices, 3, device=device)  # another description
    assert device.cache_size == 2


def test_thread_count_does_not_change_results(rng):
    x, rois, batch_indices = roi_inputs(rng, count=16)
    dy = rng.standard_normal((16, 3, 2, 2)).astype(np.float32)
    results = [libdml.roi_align_grad(dy, rois, batch_indices, input=x, compute_roi_gradient=True,
                                     device=libdml.Device(thread_count=threads)) for threads in (1, 2, 0)]
    for dx, droi in results[1:]:
        np.testing.assert_array_equal(dx, results[0][0])
        np.testing.assert_array_equal(droi, results[0][1])


def test_no_reference_or_memory_leaks(rng):
    x, rois, batch_indices = roi_inputs(rng)
    dy = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    tx = torch.from_numpy(x)

    def calls():
        libdml.roi_align(x, rois, batch_indices, 2)
        libdml.roi_align_grad(dy, rois, batch_indices, input=x, compute_roi_gradient=True)
        libdml.max_pooling(tx, 2, output_indices=True)
        libdml.batch_normalization_training(x, np.ones(3, np.float32), np.zeros(3, np.float32))
        with pytest.raises(ValueError):
            libdml.roi_align(x.astype(np.float64), rois, batch_indices, 2)

    calls()
    counts = [sys.getrefcount(t) for t in (x, rois, batch_indices, dy, tx)]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(3000):
        calls()
    gc.collect()
    assert [sys.getrefcount(t) for t in (x, rois, batch_indices, dy, tx)] == counts
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 20 * 1024  # KiB: no per-call growth
    temporary = np.zeros((1, 1, 4, 4), np.float32)
    alive = weakref.ref(temporary)
    libdml.max_pooling(temporary, 2)
    del temporary
    gc.collect()
    assert alive() is None  # the view gave its DLPack capsule back
