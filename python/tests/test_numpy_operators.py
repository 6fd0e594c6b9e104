"""Every operator on NumPy arrays against the float64 references of
references.py (written from the spec), in FLOAT32 and FLOAT16, packed and
strided."""
import numpy as np
import pytest

import libdml
import references as ref

RTOL32, ATOL32 = 1e-5, 1e-5
RTOL16, ATOL16 = 2e-3, 2e-3  # spec roi_align.md RA-13 and batch_normalization.md §9: 1e-3 to 1e-2


def tolerances(dtype):
    return (RTOL32, ATOL32) if dtype == np.float32 else (RTOL16, ATOL16)


def strided(array, rng):
    """The same values in a padded buffer (a strided view), or packed."""
    if rng.random() < 0.5:
        return array
    padded = np.zeros(array.shape[:-1] + (array.shape[-1] + 3,), array.dtype)
    padded[..., 1:array.shape[-1] + 1] = array
    return padded[..., 1:array.shape[-1] + 1]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("k", [2, 3])
def test_max_pooling(rng, dtype, k):
    for _ in range(4):
        spatial = tuple(rng.integers(3, 7, k))
        x = strided(rng.integers(-8, 8, (2, 3) + spatial).astype(dtype), rng)  # integers: ties happen
        window = tuple(rng.integers(1, 4, k))
        strides = tuple(rng.integers(1, 3, k))
        dilations = tuple(rng.integers(1, 3, k))
        start = tuple(int(rng.integers(0, w)) for w in window)
        end = tuple(int(rng.integers(0, w)) for w in window)
        y, indices = libdml.max_pooling(x, window, strides, start, end, dilations, output_indices=True)
        want, want_indices = ref.max_pooling(x, window, strides, start, end, dilations)
        assert y.dtype == dtype and indices.dtype == np.uint32
        np.testing.assert_array_equal(y, want.astype(dtype))  # a copy of one element: exact
        np.testing.assert_array_equal(indices.astype(np.int64), want_indices)
        dy = rng.standard_normal(y.shape).astype(dtype)
        dx = libdml.max_pooling_grad(x, dy, window, strides, start, end, dilations)
        rtol, atol = tolerances(dtype)
        np.testing.assert_allclose(dx, ref.max_pooling_grad(x, dy, window, strides, start, end, dilations),
                                   rtol=rtol, atol=atol)


def test_max_pooling_defaults_and_output_size():
    x = np.array([1, 2, 3, 2, 4, 2, 5, 6, 7], np.float32).reshape(1, 1, 3, 3)
    np.testing.assert_array_equal(libdml.max_pooling(x, 2), [[[[4, 4], [6, 7]]]])  # spec MP-1 example
    # ceil-mode size: DirectML computes whatever OutputTensor asks for
    y = libdml.max_pooling(x, 2, 2, output_size=2)
    want, _ = ref.max_pooling(x, (2, 2), (2, 2), (0, 0), (0, 0), (1, 1), (2, 2))
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_roi_pooling(rng, dtype):
    x = strided(rng.standard_normal((2, 3, 9, 11)).astype(dtype), rng)
    count = 6
    corners = rng.uniform(-2, 12, (count, 4))
    rois = np.concatenate([rng.integers(0, 2, (count, 1)), np.minimum(corners[:, :2], corners[:, 2:]),
                           np.maximum(corners[:, :2], corners[:, 2:])], axis=1).astype(dtype)
    rois[:, [1, 3]], rois[:, [2, 4]] = corners[:, [0, 2]].clip(-2, 12), corners[:, [1, 3]]
    rois[:, 1:] = np.concatenate([np.minimum(rois[:, 1:3], rois[:, 3:5]), np.maximum(rois[:, 1:3], rois[:, 3:5])], 1)
    for scale in (1.0, 0.5):
        y = libdml.roi_pooling(x, rois, (3, 4), scale)
        np.testing.assert_array_equal(y, ref.roi_pooling(x, rois, 3, 4, scale).astype(dtype))
        y4 = libdml.roi_pooling(x, rois.reshape(1, 1, count, 5), 2, scale)  # DirectML's own {1, 1, R, 5}
        np.testing.assert_array_equal(y4, ref.roi_pooling(x, rois, 2, 2, scale).astype(dtype))


def roi_case(rng, dtype, count=5, n=2, c=3, height=7, width=9):
    x = rng.standard_normal((n, c, height, width)).astype(dtype)
    corners = rng.uniform(-2, max(height, width) + 1, (count, 4))
    rois = corners.astype(dtype)
    batch_indices = rng.integers(0, n, count).astype(np.uint32)
    return x, rois, batch_indices


ROI_ALIGN_CASES = [
    ref.RoiAlignParameters(),
    ref.RoiAlignParameters(reduction="max", interpolation="nearest", scale_x=0.5, scale_y=0.75, out_of_bounds=-3.0),
    ref.RoiAlignParameters(input_offset=0.0, minimum=2, maximum=2),
    ref.RoiAlignParameters(reduction="max", input_offset=0.0, output_offset=0.0, corners=True, maximum=3),
]


def roi_align_keywords(p):
    return dict(reduction=p.reduction, interpolation=p.interpolation, spatial_scale_x=p.scale_x,
                spatial_scale_y=p.scale_y, input_pixel_offset=p.input_offset, output_pixel_offset=p.output_offset,
                minimum_samples_per_output=p.minimum, maximum_samples_per_output=p.maximum,
                align_regions_to_corners=p.corners)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("case", range(len(ROI_ALIGN_CASES)))
def test_roi_align(rng, dtype, case):
    p = ROI_ALIGN_CASES[case]
    x, rois, batch_indices = roi_case(rng, dtype)
    y = libdml.roi_align(strided(x, rng), rois, batch_indices, (3, 2), out_of_bounds_input_value=p.out_of_bounds,
                         **roi_align_keywords(p))
    rtol, atol = tolerances(dtype)
    np.testing.assert_allclose(y, ref.roi_align(x, rois, batch_indices, 3, 2, p), rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", range(len(ROI_ALIGN_CASES)))
def test_roi_align_grad(rng, case):
    p = ROI_ALIGN_CASES[case]
    x, rois, batch_indices = roi_case(rng, np.float32)
    dy = rng.standard_normal((len(rois), x.shape[1], 3, 2)).astype(np.float32)
    dx, droi = libdml.roi_align_grad(dy, rois, batch_indices.astype(np.int32), input=x, compute_roi_gradient=True,
                                     **roi_align_keywords(p))
    want_dx, want_droi = ref.roi_align_grad(x, dy, rois, batch_indices, x.shape, p)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(droi, want_droi, rtol=1e-3, atol=1e-3)
    if p.reduction == "average":  # the input gradient alone needs no input
        only_dx = libdml.roi_align_grad(dy, rois, batch_indices, input_shape=x.shape, **roi_align_keywords(p))
        np.testing.assert_array_equal(only_dx, dx)


def test_roi_align_spec_example():
    """roi_align.md §6: the seed page's nearest-neighbour example, forward and gradient."""
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    rois = np.array([[0, 0, 2, 2], [2, 0, 4, 2], [0, 2, 2, 4], [2, 2, 4, 4]], np.float32)
    keywords = dict(interpolation="nearest", maximum_samples_per_output=1)
    y = libdml.roi_align(x, rois, np.zeros(4, np.uint32), (1, 3), **keywords)
    np.testing.assert_array_equal(y.reshape(4, 3), [[1, 1, 2], [3, 3, 4], [9, 9, 10], [11, 11, 12]])
    dy = np.arange(1, 13, dtype=np.float32).reshape(4, 1, 1, 3)
    dx = libdml.roi_align_grad(dy, rois, np.zeros(4, np.uint32), input_shape=(1, 1, 4, 4), **keywords)
    np.testing.assert_array_equal(dx.reshape(4, 4), [[3, 3, 9, 6], [0, 0, 0, 0], [15, 9, 21, 12], [0, 0, 0, 0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("activation", [None] + [(name, ) for name in libdml.ACTIVATIONS])
def test_batch_normalization(rng, dtype, activation):
    x = strided(rng.standard_normal((2, 3, 4, 5)).astype(dtype), rng)
    mean, scale, bias = (rng.standard_normal(3).astype(dtype) for _ in range(3))
    variance = rng.uniform(0.5, 2, 3).astype(dtype)
    parameters = activation and libdml.activation_parameters(activation)
    name, values = parameters if parameters else (None, {})
    y = libdml.batch_normalization(x, mean, variance, scale, bias, epsilon=1e-3, fused_activation=activation)
    per_channel = [t.reshape(1, 3, 1, 1) for t in (mean, variance, scale, bias)]
    want = ref.batch_normalization(x, *per_channel, 1e-3, name, tuple(values.values()))
    rtol, atol = tolerances(dtype)
    np.testing.assert_allclose(y, want, rtol=rtol * 10, atol=atol * 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("fused", [None, ("leaky_relu", 0.2), ("elu", {"alpha": 0.5})])
def test_batch_normalization_training(rng, dtype, fused):
    x = rng.standard_normal((3, 4, 5, 6)).astype(dtype)
    scale, bias = (rng.standard_normal((1, 4, 1, 1)).astype(dtype) for _ in range(2))
    add = rng.standard_normal(x.shape).astype(dtype) if fused else None
    y, mean, variance = libdml.batch_normalization_training(x, scale, bias, add, epsilon=1e-4, fused_activation=fused)
    name, values = libdml.activation_parameters(fused) if fused else (None, {})
    want, want_mean, want_variance = ref.batch_normalization_training(x, scale, bias, add, 1e-4, name,
                                                                      tuple(values.values()))
    rtol, atol = tolerances(dtype)
    assert mean.shape == scale.shape and variance.shape == scale.shape
    np.testing.assert_allclose(mean, want_mean, rtol=rtol, atol=atol)
    np.testing.assert_allclose(variance, want_variance, rtol=rtol, atol=atol)
    np.testing.assert_allclose(y, want, rtol=rtol * 10, atol=atol * 10)


@pytest.mark.parametrize("training", [False, True])
def test_batch_normalization_grads(rng, training):
    x = rng.standard_normal((4, 3, 5, 2)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    mean = x.mean(axis=(0, 2, 3)).astype(np.float32)
    variance = x.var(axis=(0, 2, 3)).astype(np.float32)
    scale = rng.standard_normal(3).astype(np.float32)
    function = libdml.batch_normalization_training_grad if training else libdml.batch_normalization_grad
    dx, dscale, dbias = function(x, dy, mean, variance, scale, epsilon=1e-3)
    want = ref.batch_normalization_grad(x, dy, *(t.reshape(1, 3, 1, 1) for t in (mean, variance, scale)), 1e-3,
                                        training)
    np.testing.assert_allclose(dx, want[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dscale, want[1].ravel(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dbias, want[2].ravel(), rtol=1e-4, atol=1e-4)
