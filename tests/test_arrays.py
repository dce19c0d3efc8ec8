"""Array-likes, layouts, out=, empty batches and non-finite values."""

import numpy as np
import pytest

from _helpers import DTYPES, ENGINES, assert_matches_reference, run_engine
from convt import ConvTranspose, conv_transpose
from convt._reference import reference_conv_transpose

PARAMS = dict(strides=(2, 3), pads=(1, 0, 0, 2), output_padding=(1, 0))


def _operands(dtype=np.float32, seed=0, channels=4, out_per_group=3, group=2):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, channels, 5, 6)).astype(dtype)
    w = rng.standard_normal((channels, out_per_group, 3, 2)).astype(dtype)
    b = rng.standard_normal(out_per_group * group).astype(dtype)
    return x, w, b


def test_nested_lists_are_float64():
    x, w, b = _operands(np.float64)
    y = conv_transpose(x.tolist(), w.tolist(), b.tolist(), group=2, **PARAMS)
    assert y.dtype == np.float64
    assert_matches_reference(y, x, w, b, group=2, **PARAMS)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "layout",
    [
        lambda a: np.asfortranarray(a),
        lambda a: a[..., ::-1],
        lambda a: a[:, :, ::-1, :],
        lambda a: np.repeat(a, 2, axis=-1)[..., ::2],
        lambda a: np.moveaxis(np.ascontiguousarray(np.moveaxis(a, 1, -1)), -1, 1),
    ],
    ids=["fortran", "reversed_last", "reversed_row", "strided_last", "channels_last"],
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_layouts_give_the_same_result(layout, engine, dtype):
    x, w, b = _operands(dtype)
    expected = run_engine(engine, np.ascontiguousarray(layout(x)), np.ascontiguousarray(layout(w)),
                          b, group=2, **PARAMS)
    y = run_engine(engine, layout(x), layout(w), b, group=2, **PARAMS)
    np.testing.assert_array_equal(y, expected)
    assert y.flags.c_contiguous


def test_read_only_inputs():
    x, w, b = _operands()
    for array in (x, w, b):
        array.flags.writeable = False
    y = conv_transpose(x, w, b, group=2, **PARAMS)
    assert_matches_reference(y, x, w, b, group=2, **PARAMS)


@pytest.mark.parametrize("dtype", DTYPES)
def test_non_native_byte_order(dtype):
    x, w, b = _operands(dtype)
    swapped = [a.astype(a.dtype.newbyteorder("S")) for a in (x, w, b)]
    y = conv_transpose(*swapped, group=2, **PARAMS)
    assert y.dtype == np.dtype(dtype) and y.dtype.isnative
    np.testing.assert_array_equal(y, conv_transpose(x, w, b, group=2, **PARAMS))


def test_misaligned_input_is_copied_not_misread():
    x, w, b = _operands(np.float32)
    raw = np.zeros(x.nbytes + 1, np.uint8)
    misaligned = raw[1:].view(np.float32).reshape(x.shape)
    misaligned[...] = x
    assert not misaligned.flags.aligned
    np.testing.assert_array_equal(conv_transpose(misaligned, w, b, group=2, **PARAMS),
                                  conv_transpose(x, w, b, group=2, **PARAMS))


@pytest.mark.parametrize("dtype", DTYPES)
def test_out_is_filled_and_returned(dtype):
    x, w, b = _operands(dtype)
    layer = ConvTranspose(group=2, **PARAMS)
    out = np.full(layer.output_shape_for(x.shape, w.shape), np.nan, dtype=dtype)
    result = layer.apply(x, w, b, out=out)
    assert result is out
    np.testing.assert_array_equal(out, layer.apply(x, w, b))


def test_negative_pads_margins_overwrite_out():
    # Generated negative pads make zero margins; stale values in out must not survive.
    x, w, b = _operands()
    layer = ConvTranspose(group=2, strides=(2, 3), output_shape=(16, 21))
    assert min(min(pair) for pair in layer.pads_for(x.shape, w.shape)) < 0
    out = np.full(layer.output_shape_for(x.shape, w.shape), 7.0, np.float32)
    layer.apply(x, w, None, out=out)
    assert_matches_reference(out, x, w, None, group=2, strides=(2, 3), output_shape=(16, 21))


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_batch(dtype):
    x, w, b = _operands(dtype)
    y = conv_transpose(x[:0], w, b, group=2, **PARAMS)
    assert y.shape == (0, 6, 11, 15) and y.dtype == dtype


def test_zero_output_channels():
    x, w, _ = _operands()
    y = conv_transpose(x, w[:, :0], group=2, **PARAMS)
    assert y.shape == (2, 0, 11, 15)


def test_zero_input_channels_give_the_bias():
    x = np.zeros((1, 0, 3, 3), np.float32)
    w = np.zeros((0, 2, 2, 2), np.float32)
    b = np.array([1.5, -2.0], np.float32)
    y = conv_transpose(x, w, b)
    np.testing.assert_array_equal(y, np.broadcast_to(b.reshape(1, 2, 1, 1), (1, 2, 4, 4)))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_and_inf_propagate(engine, dtype):
    x = np.zeros((1, 2, 4, 4), dtype)
    w = np.ones((2, 17, 2, 2), dtype)
    x[0, 0, 1, 1] = np.nan
    x[0, 1, 3, 3] = np.inf
    y = run_engine(engine, x, w, strides=(2, 2))
    expected = reference_conv_transpose(x, w, strides=(2, 2))
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    np.testing.assert_array_equal(np.isposinf(y), np.isposinf(expected))
    assert np.isnan(y).sum() == 17 * 4 and np.isposinf(y).sum() == 17 * 4
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(y[finite], 0)


def test_inf_times_zero_weight_is_nan():
    x = np.array([[[np.inf, 1.0]]], np.float32)
    w = np.array([[[0.0, 1.0]]], np.float32)
    y = conv_transpose(x, w)
    assert np.isnan(y[0, 0, 0]) and np.isposinf(y[0, 0, 1])
