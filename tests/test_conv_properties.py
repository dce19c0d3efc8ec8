"""Hypothesis: Conv against the float64 reference on every engine path, and the adjoint pair.

Random N-D, grouped, strided, dilated, padded and auto_pad cases in every dtype,
within the rounding bound of the accumulation type; the dot-product test of
Conv and ConvTranspose within a proven float64 bound (tests/_conv_helpers).
"""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from _conv_helpers import adjoint_bound, assert_conv_matches_reference, inner, run_conv_engine
from _helpers import DTYPES, ENGINES, assert_matches_reference, examples
from convt import Conv, ConvTranspose


@st.composite
def conv_params(draw, ndim, layouts=True):
    strides = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    dilations = draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim))
    params = dict(strides=strides, dilations=dilations)
    mode = draw(st.sampled_from(["pads", "SAME_UPPER", "SAME_LOWER", "VALID", "none"]))
    if mode == "pads":
        params["pads"] = draw(st.lists(st.integers(0, 4), min_size=2 * ndim, max_size=2 * ndim))
    elif mode != "none":
        params["auto_pad"] = mode
        params["opset"] = draw(st.sampled_from([None, None, 9]))
    if layouts:
        params["data_format"] = draw(st.sampled_from(["NCX", "NCX", "NXC"]))
        params["filter_format"] = draw(st.sampled_from(["OIX", "OIX", "XIO", "IOX"]))
    return params


def _in_layouts(x, w, params):
    """x (N, C, D...) and w (M, C/group, k...) rearranged into the params' layouts."""
    if params.get("data_format") == "NXC":
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    fmt = params.get("filter_format", "OIX")
    if fmt == "XIO":
        w = np.ascontiguousarray(np.moveaxis(w, (0, 1), (-1, -2)))
    elif fmt == "IOX":
        w = np.ascontiguousarray(np.swapaxes(w, 0, 1))
    return x, w


@st.composite
def conv_cases(draw, max_ndim=3, max_size=7, max_channels=4, dtypes=DTYPES, layouts=True):
    ndim = draw(st.integers(1, max_ndim))
    group = draw(st.integers(1, 3))
    cg, mg = draw(st.integers(1, max_channels)), draw(st.integers(1, max_channels))
    batch = draw(st.integers(1, 2))
    inputs = draw(st.lists(st.integers(1, max_size), min_size=ndim, max_size=ndim))
    kernel = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    params = dict(draw(conv_params(ndim, layouts)), group=group)
    dtype = draw(st.sampled_from(dtypes))
    if np.dtype(dtype).name == "bfloat16" and params.get("opset") == 9:
        params["opset"] = 22  # bfloat16 is Conv-22's
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((batch, cg * group, *inputs)).astype(dtype)
    w = rng.standard_normal((mg * group, cg, *kernel)).astype(dtype)
    b = rng.standard_normal(mg * group).astype(dtype) if draw(st.booleans()) else None
    x, w = _in_layouts(x, w, params)
    try:
        Conv(**params).output_shape_for(x.shape, w.shape)
    except ValueError:
        assume(False)  # the kernel does not fit
    return x, w, b, params


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=examples(40))
@given(case=conv_cases())
def test_engine_matches_reference(engine, case):
    x, w, b, params = case
    assert_conv_matches_reference(run_conv_engine(engine, x, w, b, **params), x, w, b, **params)


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=examples(15))
@given(case=conv_cases(max_ndim=2, max_size=9, layouts=False))
def test_engine_matches_reference_across_tiles(engine, case, small_tiles):
    # Tiles of a few positions and K chunks of a few rows, shared by 3 threads.
    x, w, b, params = case
    y = run_conv_engine(engine, x, w, b, num_threads=3, **params)
    assert_conv_matches_reference(y, x, w, b, **params)


@settings(max_examples=examples(100))
@given(case=conv_cases(max_ndim=4, max_size=5, max_channels=3))
def test_public_apply_matches_reference(case):
    # Whatever engine the dispatcher picks, for up to 4 spatial axes.
    x, w, b, params = case
    assert_conv_matches_reference(Conv(**params).apply(x, w, b), x, w, b, **params)


@pytest.mark.parametrize("engine", [e for e in ENGINES if e in ("gemm-avx512", "gemm-avx2")])
@settings(max_examples=examples(15))
@given(case=conv_cases(max_ndim=2, max_size=24, max_channels=12, layouts=False))
def test_wide_layers_match_reference(engine, case):
    # Rows of up to 24 outputs and up to 12 channels per group reach multi-block tiles.
    x, w, b, params = case
    assert_conv_matches_reference(run_conv_engine(engine, x, w, b, **params), x, w, b, **params)


# --- the adjoint pair ----------------------------------------------------------

def _dot_test(conv_layer, transpose_layer, x, w, y):
    """(<Conv x, y>, <x, ConvTranspose y>) computed in float64 with one w array."""
    left = inner(conv_layer.apply(x, w), y)
    right = inner(x, transpose_layer.apply(y, w))
    return left, right


def _terms(x_shape, w_shape, group, params):
    """Products per output of the Conv and of the ConvTranspose (C/group and M/group
    times the kernel size)."""
    conv_w = Conv(**params)._geometry_for(x_shape, w_shape).kernel_shape
    kernel = math.prod(conv_w)
    fmt = params.get("filter_format", "OIX")
    c_axis = -1 if params.get("data_format") == "NXC" else 1
    o_axis = {"OIX": 0, "IOX": 1, "XIO": -1}[fmt]
    return x_shape[c_axis] // group * kernel, w_shape[o_axis] // group * kernel


@settings(max_examples=examples(150))
@given(case=conv_cases(max_ndim=3, max_size=8, dtypes=(np.float64,)))
def test_conv_and_its_adjoint_pass_the_dot_product_test(case):
    x, w, _, params = case
    down = Conv(**params)
    up = down.adjoint(x.shape, w.shape)
    y_shape = down.output_shape_for(x.shape, w.shape)
    assert up.output_shape_for(y_shape, w.shape) == x.shape
    y = np.random.default_rng(int(abs(x.ravel()[0]) * 1e6)).standard_normal(y_shape)
    left, right = _dot_test(down, up, x, w, y)
    conv_terms, transpose_terms = _terms(x.shape, w.shape, params["group"], params)
    bound = adjoint_bound(x, w, y, params, conv_terms, transpose_terms)
    assert abs(left - right) <= bound, (left, right, bound)


@st.composite
def transpose_cases(draw):
    """ConvTranspose layers with pads >= 0 and output_padding below the stride (the ones
    with a Conv adjoint), their x (the ConvTranspose's input) and w, float64."""
    ndim = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3))
    cg, mg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    inputs = draw(st.lists(st.integers(1, 6), min_size=ndim, max_size=ndim))
    kernel = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    strides = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    dilations = draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim))
    params = dict(strides=strides, dilations=dilations, group=group,
                  output_padding=[draw(st.integers(0, s - 1)) for s in strides])
    mode = draw(st.sampled_from(["pads", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if mode == "pads":
        params["pads"] = draw(st.lists(st.integers(0, 3), min_size=2 * ndim, max_size=2 * ndim))
    else:
        params["auto_pad"] = mode
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((draw(st.integers(1, 2)), cg * group, *inputs))
    w = rng.standard_normal((cg * group, mg, *kernel))
    layer = ConvTranspose(**params)
    try:
        pads = layer.pads_for(x.shape, w.shape)
    except ValueError:
        assume(False)
    assume(all(begin >= 0 and end >= 0 for begin, end in pads))
    return layer, x, w


@settings(max_examples=examples(100))
@given(case=transpose_cases())
def test_conv_transpose_and_its_adjoint_pass_the_dot_product_test(case):
    up, x, w = case
    down = up.adjoint(x.shape, w.shape)
    y_shape = up.output_shape_for(x.shape, w.shape)
    assert down.output_shape_for(y_shape, w.shape) == x.shape
    y = np.random.default_rng(x.size).standard_normal(y_shape)
    # <ConvTranspose x, y> = <x, Conv y>: the Conv's input is y
    left, right = _dot_test(down, up, y, w, x)
    params = down.get_params()
    conv_terms, transpose_terms = _terms(y.shape, w.shape, params["group"], params)
    bound = adjoint_bound(y, w, x, params, conv_terms, transpose_terms)
    assert abs(left - right) <= bound, (left, right, bound)
    # and the adjoint of the adjoint computes the layer again
    again = down.adjoint(y_shape, w.shape)
    assert_matches_reference(again.apply(x, w), x, w, None, **up.get_params())


def test_the_adjoint_of_a_layer_with_negative_pads_is_refused_with_the_axis():
    up = ConvTranspose(strides=2, auto_pad="SAME_UPPER")   # k1 s2: total -1, pads (-1, 0)
    with pytest.raises(ValueError, match=r"no Conv adjoint for x of shape \(1, 1, 5\): on "
                                         r"spatial axis 0 its resolved pads are \(-1, 0\)"):
        up.adjoint((1, 1, 5), (1, 1, 1))


def test_dot_product_test_on_a_large_image_holds_to_rounding():
    # An iterative-reconstruction-sized pair: the two sides agree to ~1e-16 relative.
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 3, 96, 80))
    w = rng.standard_normal((8, 3, 5, 5))
    down = Conv(strides=2, auto_pad="SAME_UPPER", dilations=(1, 2))
    up = down.adjoint(x.shape, w.shape)
    y = rng.standard_normal(down.output_shape_for(x.shape, w.shape))
    left, right = _dot_test(down, up, x, w, y)
    bound = adjoint_bound(x, w, y, down.get_params(), 3 * 25, 8 * 25)
    assert abs(left - right) <= bound
    assert abs(left - right) <= 1e-13 * abs(left)
