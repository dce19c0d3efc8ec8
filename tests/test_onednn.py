"""convt.onednn: oneDNN Graph's ConvTranspose-1, as its text says.

The text's formulas are transcribed below independently of convt's geometry
code (its ``/`` is C++ integer division on s64, which truncates toward zero);
results are held against the float64 reference with those pads.  No oneDNN
runtime is available from Python, so the text is the only oracle.
"""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from _helpers import assert_matches_reference, examples
from convt import _geometry
from convt.onednn import ConvTranspose


def c_div(a, b):
    """C++ integer division: the quotient truncated toward zero."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def text_pads(kernel, strides, dilations, auto_pad, pads_begin, pads_end):
    """The text's pseudo-code, without output_shape (not an attribute of the operator)."""
    auto_pad = auto_pad.upper() if auto_pad else "NONE"
    if auto_pad == "VALID":
        return [0] * len(kernel), [0] * len(kernel)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        return list(pads_begin), list(pads_end)
    begin, end = [], []
    for k, s, d in zip(kernel, strides, dilations):
        total = (k - 1) * d + 1 - s         # "if (auto_pad == SAME)"
        if auto_pad == "SAME_UPPER":
            begin.append(c_div(total, 2))
            end.append(total - begin[-1])
        else:
            end.append(c_div(total, 2))
            begin.append(total - end[-1])
    return begin, end


@pytest.mark.parametrize(
    "kernel, stride, dilation, upper, lower",
    [
        (5, 2, 1, (1, 2), (2, 1)),     # total 4 + 1 - 2 = 3
        (4, 2, 1, (1, 1), (1, 1)),     # total 2
        (3, 2, 1, (0, 1), (1, 0)),     # total 1
        (2, 2, 1, (0, 0), (0, 0)),     # total 0
        (3, 1, 2, (2, 2), (2, 2)),     # total (3 - 1) * 2 + 1 - 1 = 4
        (1, 2, 1, (0, -1), (-1, 0)),   # total -1: C++ -1 / 2 = 0
        (1, 4, 1, (-1, -2), (-2, -1)),  # total -3: -3 / 2 = -1
    ],
)
def test_same_total_is_kernel_extent_minus_stride(kernel, stride, dilation, upper, lower):
    assert _geometry.onednn_pads((kernel,), (stride,), (dilation,), "SAME_UPPER", (9,), (9,)) \
        == ((upper[0],), (upper[1],))
    assert _geometry.onednn_pads((kernel,), (stride,), (dilation,), "SAME_LOWER", (9,), (9,)) \
        == ((lower[0],), (lower[1],))


@pytest.mark.parametrize("output_padding", [0, 1, 3])
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "same_lower", "Same_Upper"])
def test_same_output_is_input_times_stride_plus_output_padding(auto_pad, output_padding):
    # output = s(i-1) + a + (k-1)d + 1 - ((k-1)d + 1 - s) = i*s + a, in every case
    layer = ConvTranspose(strides=(2, 3), pads_begin=(5, 5), pads_end=(5, 5), dilations=(1, 2),
                          auto_pad=auto_pad, output_padding=(output_padding, 0))
    assert layer.output_shape_for((1, 7, 5, 4), (3, 4, 6, 4)) == (1, 14 + output_padding, 15, 6)


def test_explicit_pads_and_valid():
    # full = 2 * 6 + 4 = 16 per axis: None crops the pads, VALID ignores them
    shapes = ((2, 7, 7, 8), (4, 4, 3, 8))      # NXC input, XOI filter (O = 3, I = 8)
    layer = ConvTranspose(strides=2, pads_begin=(1, 0), pads_end=(2, 3), dilations=1)
    assert layer.output_shape_for(*shapes) == (2, 13, 13, 3)
    assert layer.set_params(auto_pad="VALID").output_shape_for(*shapes) == (2, 16, 16, 3)
    assert layer.set_params(auto_pad=None).pads_for(*shapes) == ((1, 2), (0, 3))


def test_default_layouts_are_channels_last_and_xoi():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 5, 6, 4)).astype(np.float32)       # N, H, W, C
    w = rng.standard_normal((3, 2, 6, 4)).astype(np.float32)       # kH, kW, O, I
    b = rng.standard_normal(6).astype(np.float32)
    y = ConvTranspose(strides=(2, 2), pads_begin=(1, 0), pads_end=(0, 1), dilations=(1, 1)).apply(
        x, w, b)
    assert y.shape == (2, 10, 11, 6) and y.flags.c_contiguous
    assert_matches_reference(y, x, w, b, strides=(2, 2), pads=(1, 0, 0, 1),
                             data_format="NXC", filter_format="XOI")
    # the same operator in NCX / IOX
    ncx = ConvTranspose(strides=(2, 2), pads_begin=(1, 0), pads_end=(0, 1), dilations=(1, 1),
                        data_format="NCX", filter_format="IOX").apply(
        np.moveaxis(x, -1, 1), np.transpose(w, (3, 2, 0, 1)), b)
    np.testing.assert_allclose(np.moveaxis(ncx, 1, -1), y, rtol=1e-6, atol=1e-6)


def test_groups():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 4, 4, 6))
    w = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)    # O = out/groups = 5
    layer = ConvTranspose(strides=2, pads_begin=(0, 0), pads_end=(0, 0), dilations=1, groups=3)
    y = layer.apply(x.astype(np.float32), w)
    assert y.shape == (1, 8, 9, 15)
    assert_matches_reference(y, x.astype(np.float32), w, None, strides=2, group=3,
                             data_format="NXC", filter_format="XOI")


# ---------------------------------------------------------------- bad input

BASE = dict(strides=(2, 2), pads_begin=(0, 0), pads_end=(0, 0), dilations=(1, 1))


@pytest.mark.parametrize(
    "params, error, pattern",
    [
        (dict(auto_pad="SAME"), ValueError,
         r"'auto_pad' parameter of oneDNN ConvTranspose.*'SAME_UPPER'.*in any case.*got 'SAME'"),
        (dict(auto_pad="explicit"), ValueError, r"'auto_pad'.*got 'explicit'"),
        (dict(groups=0), ValueError, r"'groups'.*int >= 1"),
        (dict(data_format="NHWC"), ValueError, r"'data_format'.*NHWC is 'NXC' here"),
        (dict(filter_format="OIX"), ValueError, r"'filter_format'.*one of 'XOI', 'IOX'"),
        (dict(filter_format="HWOI"), ValueError, r"HWOI is 'XOI' here"),
        (dict(pads_begin=None), TypeError, r"'pads_begin'.*got None"),
        (dict(pads_end=(0,)), ValueError, r"pads_end has 1"),
        (dict(output_padding=(-1, 0)), ValueError, r"'output_padding'.*>= 0"),
    ],
)
def test_bad_parameters(params, error, pattern):
    with pytest.raises(error, match=pattern):
        ConvTranspose(**{**BASE, **params})


def test_unknown_keyword():
    with pytest.raises(TypeError, match=r"'group' for ConvTranspose.*Did you mean 'groups'\?"):
        ConvTranspose(**BASE, group=2)


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_types_outside_the_text(dtype):
    x = np.ones((1, 3, 3, 2), dtype)
    w = np.ones((2, 2, 1, 2), dtype)
    with pytest.raises(TypeError, match="f32, f16 and bf16|float16, bfloat16"):
        ConvTranspose(**BASE).apply(x, w)


def test_float16_is_served():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, 3, 2)).astype(np.float16)
    w = rng.standard_normal((2, 2, 1, 2)).astype(np.float16)
    y = ConvTranspose(**BASE).apply(x, w)
    assert y.dtype == np.float16
    assert_matches_reference(y, x, w, None, strides=(2, 2), data_format="NXC",
                             filter_format="XOI")


@pytest.mark.parametrize(
    "x_shape, w_shape, b_shape, pattern",
    [
        ((1, 3, 3, 2), (2, 2, 1, 3), None, r"filter.shape\[3\] must equal the number of input "
                                           r"channels input.shape\[3\]=2.*\(k1, \.\.\., kn, M/group, C\)"),
        ((1, 3, 3, 2), (2, 2, 1, 2), (2,), r"bias must have shape \(M,\) = \(1,\)"),
        ((3, 3, 2), (2, 2, 1, 2), None, r"batch axis N is missing: input\[None\]"),
    ],
)
def test_bad_shapes(x_shape, w_shape, b_shape, pattern):
    b = None if b_shape is None else np.ones(b_shape, np.float32)
    with pytest.raises(ValueError, match=pattern):
        ConvTranspose(**BASE).apply(np.ones(x_shape, np.float32), np.ones(w_shape, np.float32), b)


# ---------------------------------------------------------------- properties

@st.composite
def onednn_cases(draw):
    ndim = draw(st.integers(1, 3))
    groups = draw(st.integers(1, 3))
    cg, mg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    axes = lambda low, high: st.lists(st.integers(low, high), min_size=ndim, max_size=ndim)  # noqa: E731
    inputs, kernel = draw(axes(1, 5)), draw(axes(1, 4))
    params = dict(strides=draw(axes(1, 4)), dilations=draw(axes(1, 2)),
                  pads_begin=draw(axes(0, 3)), pads_end=draw(axes(0, 3)),
                  output_padding=draw(axes(0, 4)), groups=groups,
                  auto_pad=draw(st.sampled_from(["None", "none", None, "SAME_UPPER", "same_upper",
                                                 "SAME_LOWER", "VALID", "valid"])),
                  data_format=draw(st.sampled_from(["NXC", "NCX"])),
                  filter_format=draw(st.sampled_from(["XOI", "IOX"])))
    dtype = draw(st.sampled_from([np.float16, np.float32]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    batch, channels = draw(st.integers(1, 2)), cg * groups
    x_shape = ((batch, channels, *inputs) if params["data_format"] == "NCX"
               else (batch, *inputs, channels))
    w_shape = ((channels, mg, *kernel) if params["filter_format"] == "IOX"
               else (*kernel, mg, channels))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(mg * groups).astype(dtype) if draw(st.booleans()) else None
    try:
        ConvTranspose(**params).output_shape_for(x.shape, w.shape)
    except ValueError:
        assume(False)
    return x, w, b, params, kernel


@settings(max_examples=examples(60))
@given(case=onednn_cases())
def test_matches_the_text_on_the_reference(case):
    x, w, b, params, kernel = case
    y = ConvTranspose(**params).apply(x, w, b)
    begin, end = text_pads(kernel, params["strides"], params["dilations"], params["auto_pad"],
                           params["pads_begin"], params["pads_end"])
    assert_matches_reference(y, x, w, b, strides=params["strides"],
                             dilations=params["dilations"], group=params["groups"],
                             output_padding=params["output_padding"], pads=begin + end,
                             data_format=params["data_format"],
                             filter_format=params["filter_format"])
