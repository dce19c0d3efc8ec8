"""convt.kernels and convt.upsample against scipy, scikit-image and an independent reference."""

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _upsampling import (SCIPY_MODE, SKIMAGE_MODE, assert_same_bits, keys_cubic,
                         reference_upsample, triangle)
from convt import conv_transpose, kernels, upsample
from convt._upsample import Spec, Window, slab_rows_for, upsample_box, upsample_slabs

MODES = ("edge", "reflect", "mirror", "constant", "wrap")
KERNELS = ("nearest", "linear", "cubic")
EXAMPLES = max(10, int(os.environ.get("CONVT_HYPOTHESIS_EXAMPLES", "250")) // 5)
EPS = {np.dtype(np.float16): 2.0**-11, np.dtype(np.float32): 2.0**-24,
       np.dtype(np.float64): 2.0**-53}


def assert_close_to(result, expected, image, kernel="linear"):
    """result within a few roundings of its dtype of the float64 ``expected``.

    A sum of K products of weights (|w| summing to ``gain``) and inputs errs by
    about K u gain max|x|; float16 adds its final rounding and the weights'.
    """
    scale = max(1.0, float(np.max(np.abs(np.asarray(image, np.float64)), initial=0)))
    gain = {"nearest": 1.0, "linear": 1.0, "cubic": 1.25}[kernel]
    eps = EPS[result.dtype]
    bound = (64 if result.dtype == np.float16 else 16) * eps * gain**3 * scale
    error = np.max(np.abs(result.astype(np.float64) - expected), initial=0)
    assert error <= bound, f"largest error {error} > {bound}"


# ---------------------------------------------------------------- kernels


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("factor", range(1, 9))
def test_taps_are_symmetric_and_every_phase_sums_to_one(kernel, factor):
    taps = kernels.taps(kernel, factor)
    assert len(taps) % 2 == factor % 2
    np.testing.assert_array_equal(taps, taps[::-1])
    assert taps[0] != 0  # no useless end taps
    for residue in range(factor):
        assert taps[residue::factor].sum() == pytest.approx(1.0, abs=1e-14)


@pytest.mark.parametrize("factor", range(1, 7))
def test_taps_are_the_kernels_sampled_at_output_offsets(factor):
    # output o of phase r sits at (r + 0.5) / f - 0.5 from its nearest-below input
    for kernel, profile, radius in (("linear", triangle, 1), ("cubic", keys_cubic, 2)):
        taps = kernels.taps(kernel, factor)
        count = len(taps)
        expected = profile((np.arange(count) - (count - 1) / 2) / factor)
        np.testing.assert_allclose(taps, expected, rtol=0, atol=1e-15)
        # every tap of the support |t| < radius is present, no more
        assert count <= 2 * radius * factor
    assert len(kernels.taps("nearest", factor)) == factor


def test_known_tap_values():
    np.testing.assert_array_equal(kernels.taps("linear", 2), [0.25, 0.75, 0.75, 0.25])
    np.testing.assert_array_equal(kernels.taps("linear", 1), [1.0])
    np.testing.assert_array_equal(kernels.taps("cubic", 1), [1.0])
    # Keys at 0.25, 0.75, 1.25, 1.75 with a = -1/2
    np.testing.assert_array_equal(kernels.taps("cubic", 2)[4:],
                                  [111 / 128, 29 / 128, -9 / 128, -3 / 128])
    assert kernels.pads("linear", 3, ndim=1) == (1, 1)
    assert kernels.pads("cubic", (4, 1)) == (6, 0, 6, 0)


@pytest.mark.parametrize("kernel", KERNELS)
def test_weights_are_outer_products_in_onnx_layout(kernel):
    w = kernels.weights(kernel, (2, 3), channels=4, dtype=np.float32)
    taps = np.multiply.outer(kernels.taps(kernel, 2), kernels.taps(kernel, 3))
    assert w.shape == (4, 1) + taps.shape and w.dtype == np.float32 and w.flags.writeable
    for channel in range(4):
        np.testing.assert_array_equal(w[channel, 0], taps.astype(np.float32))
    np.testing.assert_array_equal(getattr(kernels, kernel)(2, 3), kernels.weights(kernel, 2, 3))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("factors", [(2, 2), (3, 2), (4, 1)])
def test_kernel_weights_in_a_conv_transpose_interpolate_the_interior(kernel, factors):
    # with zero pads only the border strips differ from the reference
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 9, 11))
    y = conv_transpose(x[None], kernels.weights(kernel, factors, channels=2),
                       **kernels.conv_transpose_params(kernel, factors, channels=2))[0]
    expected = np.stack([reference_upsample(c, factors, kernel) for c in x])
    strip = kernels.pads(kernel, factors)[:2]
    inner = (slice(None),) + tuple(slice(p, y.shape[1 + a] - p) for a, p in enumerate(strip))
    np.testing.assert_allclose(y[inner], expected[inner], rtol=0, atol=1e-13)


@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda: kernels.taps("bilinear", 2), ValueError, r"'kernel'.*got 'bilinear'.*'linear'"),
        (lambda: kernels.taps("linear", 0), ValueError, r"'factor'.*>= 1.*got 0"),
        (lambda: kernels.taps("linear", 2.0), TypeError, r"'factor'.*got 2.0"),
        (lambda: kernels.weights("linear", (2, 2), ndim=3), ValueError, r"one value per axis"),
        (lambda: kernels.weights("linear", 2, channels=0), ValueError, r"'channels'.*got 0"),
        (lambda: kernels.weights("linear", 2, dtype=np.int32), TypeError, r"'dtype'.*float16"),
        (lambda: kernels.pads("cubic", 2, ndim=0), ValueError, r"'ndim'.*got 0"),
    ],
)
def test_kernels_bad_input(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# ---------------------------------------------------------------- upsample vs scipy / skimage


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, factor", [((13,), 3), ((9, 14), 2), ((5, 6, 7), 2),
                                           ((4, 5, 3), (3, 1, 2)), ((1, 2), 4)])
def test_linear_and_nearest_equal_scipy_zoom(mode, shape, factor):
    ndimage = pytest.importorskip("scipy.ndimage")
    x = np.random.default_rng(len(shape)).standard_normal(shape)
    factors = factor if isinstance(factor, tuple) else (factor,) * len(shape)
    for kernel, order in (("linear", 1), ("nearest", 0)):
        y = upsample(x, factor, kernel=kernel, mode=mode, cval=0.5)
        expected = ndimage.zoom(x, factors, order=order, grid_mode=True, mode=SCIPY_MODE[mode],
                                cval=0.5)
        assert y.shape == expected.shape
        np.testing.assert_allclose(y, expected, rtol=0, atol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(37, 41), (9, 10, 11)])
@pytest.mark.parametrize("mode", MODES)
def test_linear_equals_skimage_rescale(dtype, shape, mode):
    transform = pytest.importorskip("skimage.transform")
    x = np.random.default_rng(7).random(shape).astype(dtype)
    for factor in (2, 3):
        y = upsample(x, factor, mode=mode)
        # clip=False: with mode 'constant' scikit-image clips to the image's range, not cval's
        expected = transform.rescale(x, factor, order=1, mode=SKIMAGE_MODE[mode], clip=False)
        assert y.shape == expected.shape and y.dtype == expected.dtype == dtype
        if dtype == np.float32:
            assert_close_to(y, expected.astype(np.float64), x)
        else:  # scipy's coordinates (j + 0.5) * (1/3) - 0.5 err by an ulp of j, not of 1
            np.testing.assert_allclose(y, expected, rtol=0, atol=1e-13)


def test_rgb_image_equals_skimage_rescale_with_channel_axis():
    transform = pytest.importorskip("skimage.transform")
    data = pytest.importorskip("skimage.data")
    image = data.astronaut()[::8, ::8]  # uint8 (64, 64, 3)
    y = upsample(image, 2, channel_axis=-1)
    expected = transform.rescale(image, 2, order=1, mode="edge", channel_axis=-1,
                                 preserve_range=True)
    assert y.shape == (128, 128, 3) and y.dtype == np.float32
    assert_close_to(y, expected, image)


# ---------------------------------------------------------------- upsample vs the reference


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, factors", [((17,), (2,)), ((1,), (3,)), ((6, 7), (3, 2)),
                                            ((2, 3), (4, 4)), ((3, 4, 5), (2, 2, 3))])
def test_every_kernel_and_mode_equals_the_reference(kernel, mode, shape, factors):
    x = np.random.default_rng(11).standard_normal(shape)
    y = upsample(x, factors, kernel=kernel, mode=mode, cval=-1.5)
    expected = reference_upsample(x, factors, kernel, mode, cval=-1.5)
    np.testing.assert_allclose(y, expected, rtol=0, atol=1e-13)


@st.composite
def upsample_cases(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=ndim, max_size=ndim)))
    factors = tuple(draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim)))
    kernel = draw(st.sampled_from(KERNELS))
    mode = draw(st.sampled_from(MODES))
    dtype = draw(st.sampled_from([np.float16, np.float32, np.float64]))
    cval = draw(st.sampled_from([0.0, 2.5]))
    seed = draw(st.integers(0, 2**16))
    return shape, factors, kernel, mode, np.dtype(dtype), cval, seed


@settings(max_examples=EXAMPLES)
@given(upsample_cases())
def test_upsample_property(case):
    shape, factors, kernel, mode, dtype, cval, seed = case
    x = np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype)
    y = upsample(x, factors, kernel=kernel, mode=mode, cval=cval)
    assert y.dtype == dtype and y.flags.c_contiguous
    expected = reference_upsample(x, factors, kernel, mode, cval)
    assert_close_to(y, expected, np.append(x.astype(np.float64).ravel(), cval), kernel)


# ---------------------------------------------------------------- image-shaped input, dtypes, out


def test_axes_and_channel_axis_leave_other_axes_alone():
    x = np.random.default_rng(0).random((5, 6, 3))
    last = upsample(x, 2, channel_axis=-1)
    assert last.shape == (10, 12, 3)
    for channel in range(3):
        np.testing.assert_array_equal(last[..., channel], upsample(x[..., channel], 2))
    first = upsample(np.moveaxis(x, -1, 0), 2, channel_axis=0)
    np.testing.assert_array_equal(first, np.moveaxis(last, -1, 0))
    assert upsample(x, (3, 2), axes=(2, 0)).shape == (10, 6, 9)
    np.testing.assert_array_equal(upsample(x, 2, axes=-1), upsample(x, (1, 1, 2)))


@pytest.mark.parametrize("dtype, expected", [(np.uint8, np.float32), (np.int16, np.float32),
                                             (np.bool_, np.float32), (np.int32, np.float64),
                                             (np.uint64, np.float64)])
def test_integer_images_are_computed_in_a_float_that_holds_them(dtype, expected):
    x = np.array([[0, 1], [1, 1]], dtype=dtype)
    y = upsample(x, 2)
    assert y.dtype == expected
    np.testing.assert_array_equal(y, upsample(x.astype(np.float64), 2).astype(expected))
    assert upsample(x, 2, dtype=np.float16).dtype == np.float16


def test_any_memory_layout_gives_the_same_result():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((12, 10)).astype(np.float32)
    expected = upsample(x, 3, kernel="cubic", mode="mirror")
    for variant in (np.asfortranarray(x), x[::-1, ::-1][::-1, ::-1], x.astype(">f4"),
                    x.tolist()):
        y = upsample(variant, 3, kernel="cubic", mode="mirror", dtype=np.float32)
        np.testing.assert_array_equal(y, expected)
    view = np.asarray(x.T)
    np.testing.assert_array_equal(upsample(view, 3, kernel="cubic", mode="mirror"),
                                  upsample(np.ascontiguousarray(view), 3, kernel="cubic",
                                           mode="mirror"))


def test_out_threads_and_slabs_give_the_same_bits():
    x = np.random.default_rng(2).standard_normal((40, 33, 3)).astype(np.float32)
    spec_args = dict(kernel="cubic", mode="reflect", channel_axis=-1)
    expected = upsample(x, 2, **spec_args)
    out = np.full(expected.shape, np.nan, np.float32)
    assert upsample(x, 2, out=out, **spec_args) is out
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(upsample(x, 2, num_threads=1, **spec_args), expected)
    spec = Spec("cubic", (2, 2, 1), "reflect", 0.0, np.dtype(np.float32))
    for rows in (1, 5, 80):
        slabs = upsample_slabs(x, spec, np.empty_like(expected), rows)
        assert_same_bits(slabs, expected)
    assert slab_rows_for((10**6, 10**3)) >= 1


def test_any_output_box_is_computed_alone_with_the_same_bits():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((9, 8, 7))
    spec = Spec("linear", (3, 2, 2), "wrap", 0.0, np.dtype(np.float64))
    expected = upsample(x, (3, 2, 2), mode="wrap")
    for _ in range(10):
        box = tuple(sorted(rng.choice(size + 1, 2, replace=False)) for size in expected.shape)
        part = upsample_box(Window(x), spec, x.shape, box, np.empty([b - a for a, b in box]))
        assert_same_bits(part, expected[tuple(slice(a, b) for a, b in box)])


def test_float16_accumulates_in_float32():
    x = np.random.default_rng(4).uniform(0, 1, (31, 17)).astype(np.float16)
    y = upsample(x, 2, kernel="linear", axes=0)
    wide = upsample(x.astype(np.float32), 2, kernel="linear", axes=0)
    # taps exact in float16, products exact in float32: one rounding of the float32 sum
    np.testing.assert_array_equal(y, wide.astype(np.float16))
    # 2-D cubic weights (products of taps) are rounded to float16: within an ulp or two
    cubic = upsample(x, 2, kernel="cubic")
    exact = reference_upsample(x, (2, 2), "cubic")
    assert np.max(np.abs(cubic - exact)) <= 2 * 2.0**-11 * np.max(np.abs(exact))


def test_constant_images_stay_constant_and_nan_stays_local():
    flat = np.full((6, 5), 0.3)
    for kernel in KERNELS:
        for mode in ("edge", "reflect", "mirror", "wrap"):
            np.testing.assert_allclose(upsample(flat, 3, kernel=kernel, mode=mode), 0.3,
                                       rtol=1e-15)
    x = np.zeros((9, 9))
    x[4, 4] = np.nan
    y = upsample(x, 2)
    assert np.isnan(y).sum() == 16 and not np.isnan(y[:6]).any()


def test_empty_and_zero_dimensional_images():
    assert upsample(np.zeros((0, 3)), 2).shape == (0, 6)
    assert upsample(np.float32(2.0), ()).shape == ()
    assert upsample(np.float32(2.0), ()) == 2.0


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        (dict(factor=0), ValueError, r"'factor' parameter of upsample.*got 0"),
        (dict(factor=(2, 2, 2)), ValueError, r"'factor'.*one value per axis \(2\)"),
        (dict(factor=2.5), TypeError, r"'factor'.*got 2.5"),
        (dict(kernel="bicubic"), ValueError, r"'kernel'.*got 'bicubic'.*Did you mean 'cubic'"),
        (dict(mode="symetric"), ValueError, r"'mode'.*got 'symetric'.*Did you mean 'symmetric'"),
        (dict(mode="grid-mirror"), ValueError, r"'grid-mirror' is 'reflect'"),
        (dict(mode="periodic"), ValueError, r"Did you mean 'wrap'"),
        (dict(axes=(0, 0)), ValueError, r"'axes'.*must not repeat"),
        (dict(axes=2), ValueError, r"'axes'.*axis 2.*has 2 axes"),
        (dict(axes=(0,), channel_axis=0), ValueError, r"must not contain channel_axis"),
        (dict(channel_axis=1.0), TypeError, r"'channel_axis'.*ints; got 1.0"),
        (dict(cval="0"), TypeError, r"'cval'.*real number"),
        (dict(dtype=np.int8), TypeError, r"'dtype'.*float16, float32 or float64"),
        (dict(num_threads=0), ValueError, r"'num_threads'.*got 0"),
        (dict(out=np.empty((8, 8))), ValueError, r"'out'.*shape \(8, 10\) and dtype float64"),
        (dict(out=np.empty((10, 8)).T), ValueError, r"'out'.*C-contiguous"),
        (dict(out=[0.0]), TypeError, r"'out'.*numpy.ndarray"),
    ],
)
def test_upsample_bad_input(kwargs, error, pattern):
    kwargs = {"factor": 2, **kwargs}
    with pytest.raises(error, match=pattern):
        upsample(np.ones((4, 5)), **kwargs)


def test_upsample_refuses_complex_and_object_images():
    with pytest.raises(TypeError, match="complex.*real and imaginary parts separately"):
        upsample(np.ones((3, 3), complex), 2)
    with pytest.raises(TypeError, match="dtype object"):
        upsample(np.array([[None]]), 2)


def test_importing_convt_does_not_import_optional_packages():
    code = ("import sys, convt, convt.kernels; convt.upsample([[1.0]], 2); "
            "print(sorted(m for m in ('dask', 'skimage', 'tifffile', 'zarr', 'sphinx') "
            "if m in sys.modules))")
    import subprocess
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("module", ["convt.kernels", "convt._upsample"])
def test_docstring_examples(module):
    import doctest
    import importlib

    failures, tried = doctest.testmod(importlib.import_module(module),
                                      optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 0 and failures == 0


def test_upsampling_page_examples():
    import doctest
    from pathlib import Path

    page = Path(__file__).resolve().parents[1] / "docs" / "upsampling.md"
    failures, tried = doctest.testfile(str(page), module_relative=False,
                                       optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 0 and failures == 0
