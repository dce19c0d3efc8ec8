"""Conv geometry (convt._geometry.resolve_conv and its pure functions) against the text.

Pure Python: nothing here runs the kernels.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _helpers import examples
from convt import Conv
from convt._geometry import conv_output_size, conv_pads, conv_same_pads
from test_conv import TEXT_CASES, TEXT_IDS


@pytest.mark.parametrize("case", TEXT_CASES, ids=TEXT_IDS)
def test_text_examples_shapes(case):
    # The output shape of each of the text's examples, from the shapes alone.
    name, attributes, (x, w), (y,) = case
    assert Conv(**attributes).output_shape_for(x.shape, w.shape) == y.shape


def test_text_examples_pads():
    # The text's examples, read as numbers: 5x5 and 7x5 inputs, 3x3 kernel.
    assert Conv(pads=(1, 1, 1, 1)).pads_for((1, 1, 5, 5), (1, 1, 3, 3)) == ((1, 1), (1, 1))
    assert Conv(pads=(1, 0, 1, 0), strides=2).pads_for((1, 1, 7, 5), (1, 1, 3, 3)) == \
        ((1, 1), (0, 0))
    assert Conv(pads=(1, 0, 1, 0), strides=2).output_shape_for((1, 1, 7, 5), (1, 1, 3, 3)) == \
        (1, 1, 4, 2)
    # SAME_LOWER, stride 2 on 5: ceil(5 / 2) = 3 outputs, total (3 - 1) * 2 + 3 - 5 = 2
    layer = Conv(auto_pad="SAME_LOWER", strides=(2, 2), kernel_shape=(3, 3))
    assert layer.pads_for((1, 1, 5, 5), (1, 1, 3, 3)) == ((1, 1), (1, 1))


def test_same_pads_worked_by_hand():
    assert conv_same_pads(7, 2, 1, 1, "SAME_UPPER", 22) == (0, 1)
    assert conv_same_pads(7, 2, 1, 1, "SAME_LOWER", 22) == (1, 0)
    assert conv_same_pads(7, 3, 2, 1, "SAME_UPPER", 22) == (1, 1)
    assert conv_same_pads(8, 3, 2, 1, "SAME_UPPER", 22) == (0, 1)    # total 3*2 + 3 - 8 = 1
    assert conv_same_pads(8, 3, 2, 1, "SAME_LOWER", 22) == (1, 0)
    assert conv_same_pads(7, 3, 1, 2, "SAME_UPPER", 22) == (2, 2)    # dilated extent 5
    assert conv_same_pads(10, 4, 3, 2, "SAME_UPPER", 22) == (3, 3)   # 4 outputs: 9 + 7 - 10
    assert conv_same_pads(9, 2, 4, 1, "SAME_LOWER", 22) == (1, 0)    # 3 outputs: 8 + 2 - 9
    assert conv_same_pads(5, 1, 3, 1, "SAME_UPPER", 22) == (0, 0)    # -1 clamped: 2 outputs
    assert conv_same_pads(20, 1, 2, 1, "SAME_LOWER", 22) == (0, 0)   # -1 clamped: 10 outputs
    # Conv-1 (opsets 1-10): the output as long as the input
    assert conv_same_pads(7, 3, 2, 1, "SAME_UPPER", 10) == (4, 4)    # 6*2 + 3 - 7 = 8
    assert conv_same_pads(8, 4, 1, 1, "SAME_UPPER", 1) == (1, 2)
    assert conv_same_pads(8, 4, 1, 1, "SAME_LOWER", 1) == (2, 1)


def test_valid_and_explicit_pads():
    assert conv_pads((5, 6), (3, 3), (1, 1), (1, 1), "VALID", None, 22) == ((0, 0), (0, 0))
    assert conv_pads((5, 6), (3, 3), (1, 1), (1, 1), "NOTSET", None, 22) == ((0, 0), (0, 0))
    assert conv_pads((5, 6), (3, 3), (1, 1), (1, 1), "NOTSET", (1, 2, 3, 4), 22) == \
        ((1, 2), (3, 4))
    # the text's 7x5, pads 1, stride 2 example: (7 + 2 - 3) // 2 + 1 = 4, (5 + 2 - 3) // 2 + 1 = 3
    assert conv_output_size(7, 3, 2, 1, 1, 1) == 4
    assert conv_output_size(5, 3, 2, 1, 1, 1) == 3
    assert conv_output_size(2, 3, 1, 1, 0, 0) == 0   # does not fit


@st.composite
def axes(draw):
    return (draw(st.integers(1, 60)), draw(st.integers(1, 9)), draw(st.integers(1, 9)),
            draw(st.integers(1, 5)), draw(st.sampled_from(["SAME_UPPER", "SAME_LOWER"])),
            draw(st.sampled_from([1, 10, 11, 22])))


@settings(max_examples=examples(300))
@given(axis=axes())
def test_same_pads_follow_the_text(axis):
    size, kernel, stride, dilation, auto_pad, opset = axis
    begin, end = conv_same_pads(size, kernel, stride, dilation, auto_pad, opset)
    target = math.ceil(size / stride) if opset >= 11 else size
    # the output is ceil(input / stride) (Conv-11) or the input's length (Conv-1) ...
    assert conv_output_size(size, kernel, stride, dilation, begin, end) == target
    # ... with padding >= 0, split equally or almost, the odd unit at the end (UPPER) or
    # the beginning (LOWER) ...
    assert begin >= 0 and end >= 0
    assert end - begin == ((begin + end) % 2) * (1 if auto_pad == "SAME_UPPER" else -1)
    # ... and no more padding than needed: one unit less would lose an output
    if begin + end:
        assert conv_output_size(size, kernel, stride, dilation, 0, begin + end - 1) < target

