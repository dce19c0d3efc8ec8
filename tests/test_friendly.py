"""Friendly array handling: bare-int strides, suggestions for misspelt keywords, rank
errors that say which axis is missing and how to add it, ragged lists named."""

import numpy as np
import pytest

from _helpers import assert_matches_reference
from convt import ConvTranspose, conv_transpose


def test_a_bare_int_stride_applies_to_every_axis():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 4, 5))
    w = rng.standard_normal((2, 3, 3, 3))
    layer = ConvTranspose(strides=2, dilations=2, pads=(1, 0, 1, 0))
    assert layer.get_params()["strides"] == 2 and layer.get_params()["dilations"] == 2
    assert repr(layer) == "ConvTranspose(dilations=2, pads=(1, 0, 1, 0), strides=2)"
    np.testing.assert_array_equal(
        layer.apply(x, w),
        conv_transpose(x, w, strides=(2, 2), dilations=(2, 2), pads=(1, 0, 1, 0)))
    assert_matches_reference(layer.apply(x, w), x, w, None, strides=2, dilations=2,
                             pads=(1, 0, 1, 0))


def test_bare_int_stride_bounds_output_padding_on_every_axis():
    ConvTranspose(strides=3, output_padding=(2, 2))
    with pytest.raises(ValueError, match=r"output_padding\[1\] = 3 with strides\[1\] = 3"):
        ConvTranspose(strides=3, output_padding=(2, 3))


@pytest.mark.parametrize("wrong, right", [
    ("stride", "strides"), ("dilation", "dilations"), ("padding", "pads"), ("groups", "group"),
    ("kernel_size", "kernel_shape"), ("autopad", "auto_pad"), ("output_pads", "output_padding"),
    ("dataformat", "data_format"),
])
def test_misspelt_keywords_get_a_suggestion(wrong, right):
    pattern = rf"Invalid parameter '{wrong}' for ConvTranspose\. Did you mean '{right}'\?"
    with pytest.raises(TypeError, match=pattern):
        ConvTranspose(**{wrong: 2})
    with pytest.raises(ValueError, match=pattern):
        ConvTranspose().set_params(**{wrong: 2})
    with pytest.raises(TypeError, match=pattern):
        conv_transpose(np.ones((1, 1, 2)), np.ones((1, 1, 2)), **{wrong: 2})


def test_unknown_keyword_without_a_close_name_lists_the_valid_ones():
    with pytest.raises(TypeError, match=r"'colour' for ConvTranspose\. Valid parameters are: "
                                        r"auto_pad, dilations"):
        ConvTranspose(colour=1)


W_GRAY = np.ones((1, 1, 4, 4))
W_RGB = np.ones((3, 5, 4, 4))


@pytest.mark.parametrize(
    "x_shape, w, params, pattern",
    [
        # a 2-D image with no batch or channel axis
        ((64, 64), W_GRAY, {}, r"x must have shape \(N, C, D1, D2\).*got x.shape=\(64, 64\).*"
                               r"batch axis N and the channel axis C are missing.*x\[None, None\]"),
        # an (H, W, 3) RGB image
        ((64, 48, 3), W_RGB, {}, r"batch axis N is missing\. x looks channels-last.*"
                                 r"data_format='NXC'.*np\.moveaxis\(x, -1, 0\)\[None\]"),
        # a (3, H, W) image without batch axis
        ((3, 64, 48), W_RGB, {}, r"batch axis N is missing: x\[None\] adds it"),
        # channels-last without batch axis
        ((64, 48, 3), W_RGB.transpose(2, 3, 1, 0), dict(data_format="NXC", filter_format="XOI"),
         r"\(N, D1, D2, C\).*batch axis N is missing: x\[None\]"),
        # channels-first data given to an NXC layer
        ((3, 64, 48), W_RGB.transpose(2, 3, 1, 0), dict(data_format="NXC", filter_format="XOI"),
         r"x looks channels-first.*data_format='NCX'"),
        # a 1-D signal
        ((100,), np.ones((1, 1, 4)), {}, r"\(N, C, D1\).*x\[None, None\]"),
        # a batch of single-channel images without the channel axis
        ((8, 64, 64), W_GRAY, {}, r"One axis is missing: the batch axis N \(x\[None\]\) or the "
                                  r"channel axis C \(x\[:, None\]"),
    ],
)
def test_rank_errors_say_which_axis_is_missing(x_shape, w, params, pattern):
    with pytest.raises(ValueError, match=pattern):
        conv_transpose(np.ones(x_shape), w, **params)


@pytest.mark.parametrize("position, name", [(0, "x"), (1, "w"), (2, "b")])
def test_ragged_lists_name_the_operand(position, name):
    operands = [np.ones((1, 1, 2)).tolist(), np.ones((1, 1, 2)).tolist(), [1.0]]
    operands[position] = [[[1.0, 2.0], [3.0]]] if position < 2 else [[1.0], [2.0, 3.0]]
    with pytest.raises(ValueError, match=rf"^{name} is a ragged nested sequence"):
        conv_transpose(*operands)


def test_explain_takes_arrays_for_shapes_and_names_a_bad_one():
    import convt
    x = np.zeros((1, 8, 12, 12), np.float64)
    w = np.zeros((16, 8, 3, 3), np.float64)
    report = convt.explain(convt.Conv(pads=(1, 1, 1, 1)), x, w)
    assert str(report).splitlines()[0].endswith("float64")
    assert str(convt.explain(convt.Conv(pads=(1, 1, 1, 1)), x.shape, w.shape)).splitlines()[0] \
        .endswith("float32")
    with pytest.raises(TypeError, match="x_shape must be a shape"):
        convt.explain(convt.Conv(), 5, w)


@pytest.mark.parametrize("operator", ["ConvTranspose", "Conv"])
@pytest.mark.parametrize("name", ["x", "w"])
def test_a_missing_operand_is_named(operator, name):
    import convt
    layer = getattr(convt, operator)()
    operands = {"x": np.ones((1, 1, 5), np.float32), "w": np.ones((1, 1, 3), np.float32)}
    operands[name] = None
    with pytest.raises(TypeError, match=rf"^{name} must be an array .*got None"):
        layer.apply(operands["x"], operands["w"])
    if name == "w":
        with pytest.raises(TypeError, match=r"^w must be an array .*got None"):
            layer.bind(None)
    # a bias of None is no bias
    np.testing.assert_array_equal(layer.apply(np.ones((1, 1, 5), np.float32),
                                              np.ones((1, 1, 3), np.float32), None),
                                  layer.apply(np.ones((1, 1, 5), np.float32),
                                              np.ones((1, 1, 3), np.float32)))


@pytest.mark.parametrize("dtype", [np.int32, "foo", np.complex64, bool])
def test_explain_names_an_unsupported_dtype(dtype):
    import convt
    with pytest.raises(TypeError, match=r"^dtype must be one of float16, bfloat16, float32, "
                                        r"float64"):
        convt.explain(convt.Conv(), (1, 1, 8), (1, 1, 3), dtype)
    assert convt.explain(convt.Conv(), (1, 1, 8), (1, 1, 3), ">f8").problem.dtype == np.float64
