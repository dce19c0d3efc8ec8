"""Bad input: every category gets ValueError or TypeError saying what to change."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from convt import ConvTranspose, conv_transpose

X = np.ones((1, 2, 3, 3), dtype=np.float32)
W = np.ones((2, 3, 2, 2), dtype=np.float32)


@pytest.mark.parametrize(
    "params, error, pattern",
    [
        (dict(auto_pad=1), TypeError, r"'auto_pad'.*one of 'NOTSET'.*got 1"),
        (dict(auto_pad="SAME"), ValueError, r"'auto_pad'.*'SAME_UPPER'.*got 'SAME'"),
        (dict(auto_pad="same_upper"), ValueError, r"capitals: 'SAME_UPPER'"),
        (dict(group=0), ValueError, r"'group'.*int >= 1.*got 0"),
        (dict(group=1.5), TypeError, r"'group'.*int >= 1.*got 1.5"),
        (dict(group=True), TypeError, r"'group'.*got True"),
        (dict(group="2"), TypeError, r"'group'.*got '2'"),
        (dict(num_threads=0), ValueError, r"'num_threads'.*int >= 1 or None.*got 0"),
        (dict(num_threads=2.0), TypeError, r"'num_threads'.*got 2.0"),
        (dict(strides=(2, 0)), ValueError, r"'strides'.*>= 1.*got \(2, 0\)"),
        (dict(strides=0), ValueError, r"'strides'.*an int >= 1 \(for every axis\).*got 0"),
        (dict(strides=2.0), TypeError, r"'strides'.*an int >= 1.*got 2.0"),
        (dict(output_padding=1), TypeError, r"'output_padding'.*sequence of integers.*got 1"),
        (dict(strides="22"), TypeError, r"'strides'.*got '22'"),
        (dict(strides=[1.5, 2]), TypeError, r"'strides'.*element 1.5 is not an int"),
        (dict(strides=[]), ValueError, r"'strides'.*non-empty.*got \[\]"),
        (dict(strides=np.array([2.0, 2.0])), TypeError, r"'strides'.*dtype=float64"),
        (dict(strides=np.array([[2, 2]])), ValueError, r"'strides'.*1-D integer array"),
        (dict(strides=(2**40,)), ValueError, r"'strides'.*<= 2147483647"),
        (dict(dilations=(0, 1)), ValueError, r"'dilations'.*>= 1.*got \(0, 1\)"),
        (dict(kernel_shape=(0, 2)), ValueError, r"'kernel_shape'.*>= 1"),
        (dict(output_padding=(-1, 0)), ValueError, r"'output_padding'.*>= 0.*got \(-1, 0\)"),
        (dict(output_shape=(0, 4)), ValueError, r"'output_shape'.*>= 1.*got \(0, 4\)"),
        (dict(pads=(1, 1, -1, 1)), ValueError, r"'pads'.*>= 0.*got \(1, 1, -1, 1\)"),
        (dict(pads=(1, 1, 1)), ValueError, r"'pads'.*even length"),
        (dict(strides=(2, 2), dilations=(1, 1, 1)), ValueError,
         r"same number of spatial axes.*dilations has 3.*strides has 2"),
        (dict(strides=(2, 2), pads=(1, 1)), ValueError, r"pads has 1 \(pairs\)"),
        (dict(auto_pad="SAME_UPPER", pads=(0, 0, 0, 0)), ValueError,
         r"'pads'.*cannot be combined with auto_pad='SAME_UPPER'"),
        (dict(strides=(2, 2), output_padding=(2, 0)), ValueError,
         r"output_padding\[0\] = 2 with strides\[0\] = 2 and dilations\[0\] = 1 \(allowed: 0 to 1\)"),
        (dict(output_padding=(1,)), ValueError, r"smaller than max\(stride, dilation\)"),
    ],
)
def test_bad_parameter(params, error, pattern):
    with pytest.raises(error, match=pattern):
        ConvTranspose(**params)
    with pytest.raises(error, match=pattern):
        ConvTranspose().set_params(**params)


def test_output_padding_bound_is_max_of_stride_and_dilation():
    ConvTranspose(strides=(1,), dilations=(3,), output_padding=(2,))  # 2 < max(1, 3)
    with pytest.raises(ValueError, match="allowed: 0 to 2"):
        ConvTranspose(strides=(1,), dilations=(3,), output_padding=(3,))


def test_set_params_is_atomic():
    layer = ConvTranspose(strides=(2, 2))
    with pytest.raises(ValueError):
        layer.set_params(strides=(1, 1), output_padding=(1, 1))  # invalid together
    assert layer.strides == (2, 2) and layer.output_padding is None


def test_set_params_rejects_unknown_names():
    with pytest.raises(ValueError, match=r"Invalid parameter 'stride' .*Valid parameters are: auto_pad"):
        ConvTranspose().set_params(stride=2)


def test_keyword_only():
    with pytest.raises(TypeError):
        ConvTranspose("SAME_UPPER")


def _shape_error(x_shape, w_shape, b_shape=None, **params):
    x = np.zeros(x_shape, np.float32)
    w = np.zeros(w_shape, np.float32)
    b = None if b_shape is None else np.zeros(b_shape, np.float32)
    return lambda: ConvTranspose(**params).apply(x, w, b)


@pytest.mark.parametrize(
    "call, pattern",
    [
        (_shape_error((2, 3), (3, 1)), r"x must have shape \(N, C, D1, \.\.\., Dn\).*got x.shape=\(2, 3\)"),
        (_shape_error((1, 2, 4, 4), (2, 1, 3)), r"same rank as x.*rank 4.*rank 3"),
        (_shape_error((1, 2, 4, 4), (3, 1, 3, 3)), r"w.shape\[0\] must equal.*x.shape\[1\]=2"),
        (_shape_error((1, 3, 4, 4), (3, 1, 3, 3), group=2), r"group=2 must divide.*x.shape\[1\]=3"),
        (_shape_error((1, 2, 4, 4), (2, 3, 3, 3), (4,)), r"b must have shape \(M,\) = \(3,\).*\(4,\)"),
        (_shape_error((1, 2, 4, 4), (2, 3, 3, 3), (3, 1)), r"b must have shape.*\(3, 1\)"),
        (_shape_error((1, 2, 4, 4), (2, 3, 3, 3), strides=(2,)), r"describe 1 spatial axes.*has 2"),
        (_shape_error((1, 2, 4, 4), (2, 3, 3, 3), kernel_shape=(3, 2)), r"'kernel_shape'.*w.shape\[2:\] = \(3, 3\)"),
        (_shape_error((1, 2, 2, 2), (2, 3, 2, 2), pads=(2, 0, 1, 0)), r"empty output on spatial axis 0.*3 - pads_begin 2 - pads_end 1 = 0"),
        (_shape_error((1, 2, 0, 4), (2, 3, 3, 3)), r"non-empty spatial axes"),
        (_shape_error((1, 2, 4, 4), (2, 3, 0, 3)), r"non-empty kernel"),
    ],
)
def test_bad_shapes(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


@pytest.mark.parametrize(
    "x, w, pattern",
    [
        (X.astype(np.int64), W, r"x has dtype int64.*float16, bfloat16 \(ml_dtypes\), float32 or float64.*x.astype"),
        (X, W.astype(np.complex64), r"w has dtype complex64"),
        (X.astype(object), W, r"x has dtype object"),
        (X.astype(bool), W, r"x has dtype bool"),
        (X.astype(np.longdouble), W, r"x has dtype float128|x has dtype float64"),
        (X, W.astype(np.float64), r"x and w must have the same dtype.*x.dtype=float32.*w.dtype=float64.*astype"),
    ],
)
def test_bad_dtypes(x, w, pattern):
    if x.dtype == np.longdouble and np.dtype(np.longdouble) == np.float64:
        pytest.skip("long double is double on this platform")
    with pytest.raises(TypeError, match=pattern):
        conv_transpose(x, w)


def test_bias_dtype_mismatch():
    with pytest.raises(TypeError, match=r"x and b must have the same dtype.*b.dtype=float64"):
        conv_transpose(X, W, np.zeros(3))


def test_bfloat16_mixed_with_another_dtype_is_refused():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    with pytest.raises(TypeError, match="bfloat16"):
        conv_transpose(X.astype(ml_dtypes.bfloat16), W)


@pytest.mark.parametrize(
    "out, error, pattern",
    [
        ([0.0], TypeError, r"out must be a numpy.ndarray or None; got list"),
        (np.empty((1, 3, 4, 4), np.float32), ValueError, r"shape \(1, 3, 4, 5\) and dtype float32; got shape \(1, 3, 4, 4\)"),
        (np.empty((1, 3, 4, 5), np.float64), ValueError, r"dtype float32; got shape \(1, 3, 4, 5\) and dtype float64"),
        (np.empty((1, 3, 5, 4), np.float32).transpose(0, 1, 3, 2), ValueError, r"C-contiguous"),
    ],
)
def test_bad_out(out, error, pattern):
    x = np.ones((1, 2, 3, 4), np.float32)
    with pytest.raises(error, match=pattern):
        conv_transpose(x, W, out=out)


def test_read_only_out():
    out = np.empty((1, 3, 4, 5), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        conv_transpose(np.ones((1, 2, 3, 4), np.float32), W, out=out)


def test_out_overlapping_input():
    buffer = np.zeros(2 * 3 * 4 * 5 + 100, np.float32)
    out = buffer[: 3 * 4 * 5].reshape(1, 3, 4, 5)
    x = buffer[50:74].reshape(1, 2, 3, 4)  # overlaps out[50:60]
    with pytest.raises(ValueError, match="must not share memory with x"):
        conv_transpose(x, W, out=out)


def test_absurd_output_fails_before_allocating():
    x = np.ones((1, 1, 3, 3), np.float32)
    w = np.ones((1, 1, 1, 1), np.float32)
    with pytest.raises((MemoryError, ValueError), match="output of shape"):
        conv_transpose(x, w, strides=(2**30, 2**30))
    with pytest.raises((MemoryError, ValueError), match="output of shape"):
        conv_transpose(x, w, output_shape=(2**31 - 1, 2**31 - 1))


ANYTHING = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 2**33), st.floats(allow_nan=True),
    st.text(max_size=12), st.lists(st.integers(-3, 9), max_size=7),
    st.tuples(st.integers(-2, 5), st.floats()),
    st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]),
)


@given(params=st.dictionaries(
    st.sampled_from(["auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                     "output_shape", "pads", "strides", "num_threads", "opset", "data_format",
                     "filter_format"]), ANYTHING | st.sampled_from(["NCX", "NXC", "IOX", "XOI",
                                                                      "OIX"])))
def test_arbitrary_parameters_only_raise_value_or_type_errors(params):
    x = np.ones((1, 2, 3, 3), np.float32)
    w = np.ones((2, 1, 2, 2), np.float32)
    try:
        layer = ConvTranspose(**params)
        layer.output_shape_for(x.shape, w.shape)
    except (ValueError, TypeError):
        return
    try:
        y = layer.apply(x, w)
    except (ValueError, TypeError, MemoryError):
        return
    assert y.shape == layer.output_shape_for(x.shape, w.shape)
