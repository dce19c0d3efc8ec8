"""ONNX opsets: ConvTranspose-1 for opsets 1-10, -11 for 11-21, -22 (bfloat16) from 22.

The opset-1 numbers are worked out by hand from the ConvTranspose-1 text (see
convt/_geometry.py for how convt reads it); the differential tests hold convt
against onnxruntime and the onnx reference evaluator only where those follow
the text of the opset they run (../shared/specs/README.md and the notes below).
"""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from _helpers import assert_matches_reference, examples
from convt import ConvTranspose, conv_transpose
from convt._geometry import onnx_pads, split_total_padding_opset1
from convt._reference import reference_conv_transpose

X = np.array([[[1.0, 2.0, 3.0]]], np.float32)  # (1, 1, 3)
W = np.ones((1, 1, 3), np.float32)             # full output (stride 2): 1 1 3 2 5 3 3


@pytest.mark.parametrize(
    "total, notset, upper, lower",
    [(3, (1, 2), (2, 1), (1, 2)), (4, (2, 2), (2, 2), (2, 2)), (0, (0, 0), (0, 0), (0, 0)),
     (-1, (-1, 0), (0, -1), (-1, 0)), (-3, (-2, -1), (-1, -2), (-2, -1))],
)
def test_opset1_output_shape_split_is_the_mirror_of_opset11(total, notset, upper, lower):
    # ConvTranspose-1: "If (auto_pads != SAME_UPPER): pads[start] = total/2 ... Else:
    # pads[start] = total - total/2", / read as floor division.
    assert split_total_padding_opset1(total, "NOTSET") == notset
    assert split_total_padding_opset1(total, "SAME_UPPER") == upper
    assert split_total_padding_opset1(total, "SAME_LOWER") == lower


@pytest.mark.parametrize("opset, expected", [(1, [1, 1, 3, 2, 5, 3]), (10, [1, 1, 3, 2, 5, 3]),
                                             (11, [1, 3, 2, 5, 3, 3]), (22, [1, 3, 2, 5, 3, 3])])
def test_output_shape_odd_unit_by_opset(opset, expected):
    # full = 2*2 + 3 = 7, output_shape 6: total 1.  Opsets 1-10 (NOTSET): begin = 1 // 2 = 0,
    # the odd unit cropped at the end; 11+: begin = 1 - 0 = 1, cropped at the beginning.
    y = conv_transpose(X, W, strides=(2,), output_shape=(6,), opset=opset)
    np.testing.assert_array_equal(y.ravel(), expected)
    np.testing.assert_array_equal(reference_conv_transpose(X, W, strides=(2,), output_shape=(6,),
                                                           opset=opset).ravel(), expected)


@pytest.mark.parametrize(
    "auto_pad, opset, expected",
    [
        # ConvTranspose-1: the output "match[es] the input": 3 long; total = 7 - 3 = 4, (2, 2).
        ("SAME_UPPER", 9, [3, 2, 5]),
        ("SAME_LOWER", 9, [3, 2, 5]),
        # ConvTranspose-11: 3 * 2 = 6 long; total 1: UPPER crops the end, LOWER the beginning.
        ("SAME_UPPER", 11, [1, 1, 3, 2, 5, 3]),
        ("SAME_LOWER", 11, [1, 3, 2, 5, 3, 3]),
    ],
)
def test_same_output_length_by_opset(auto_pad, opset, expected):
    y = conv_transpose(X, W, strides=(2,), auto_pad=auto_pad, opset=opset)
    np.testing.assert_array_equal(y.ravel(), expected)
    np.testing.assert_array_equal(
        reference_conv_transpose(X, W, strides=(2,), auto_pad=auto_pad, opset=opset).ravel(),
        expected)


def test_opset1_same_odd_unit_follows_the_auto_pad_sentence():
    # ConvTranspose-1's auto_pad text: "add the extra padding at the end for SAME_UPPER and
    # at the beginning for SAME_LOWER".  k=2, s=2, i=3: full 6, output 3, total 3.
    x = np.array([[[1.0, 2.0, 3.0]]])
    w = np.array([[[1.0, 10.0]]])          # full: 1 10 2 20 3 30
    upper = conv_transpose(x, w, strides=(2,), auto_pad="SAME_UPPER", opset=1)
    lower = conv_transpose(x, w, strides=(2,), auto_pad="SAME_LOWER", opset=1)
    np.testing.assert_array_equal(upper.ravel(), [10, 2, 20])   # pads (1, 2)
    np.testing.assert_array_equal(lower.ravel(), [2, 20, 3])    # pads (2, 1)
    assert ConvTranspose(strides=2, auto_pad="SAME_UPPER", opset=1).pads_for(
        x.shape, w.shape) == ((1, 2),)


def test_onnx_test_case_output_shape_at_opset_9():
    # ONNX's test_convtranspose_output_shape (s=(3, 2), output_shape (10, 8), total -1 on
    # both axes) at opset 9: begin = -1 // 2 = -1, so the zero row and column come first.
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    w = np.ones((1, 2, 3, 3), np.float32)
    layer = ConvTranspose(strides=(3, 2), output_shape=(10, 8), opset=9)
    assert layer.pads_for(x.shape, w.shape) == ((-1, 0), (-1, 0))
    y = layer.apply(x, w)
    latest = ConvTranspose(strides=(3, 2), output_shape=(10, 8)).apply(x, w)
    np.testing.assert_array_equal(y[..., 1:, 1:], latest[..., :-1, :-1])
    assert not y[..., 0, :].any() and not y[..., :, 0].any()


def test_explicit_pads_mean_the_same_in_every_opset():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 4, 5))
    w = rng.standard_normal((2, 3, 3, 2))
    params = dict(strides=(2, 3), pads=(1, 0, 2, 1), dilations=(1, 2))
    expected = conv_transpose(x, w, **params)
    for opset in (1, 7, 10, 11, 17, 22, 25):
        np.testing.assert_array_equal(conv_transpose(x, w, opset=opset, **params), expected)


def test_output_padding_bound_is_from_opset_11():
    # ConvTranspose-1 sets no bound ("the zero-padding added to one side of the output").
    with pytest.raises(ValueError, match="smaller than max"):
        ConvTranspose(strides=(2,), output_padding=(3,), opset=11)
    y = conv_transpose(X, W, strides=(2,), output_padding=(3,), opset=10)
    np.testing.assert_array_equal(y.ravel(), [1, 1, 3, 2, 5, 3, 3, 0, 0, 0])


@pytest.mark.parametrize("opset, error, pattern", [
    (0, ValueError, r"'opset'.*int >= 1.*got 0"),
    (11.0, TypeError, r"'opset'.*got 11.0"),
    ("22", TypeError, r"'opset'.*got '22'"),
])
def test_bad_opset(opset, error, pattern):
    with pytest.raises(error, match=pattern):
        ConvTranspose(opset=opset)


def test_bfloat16_before_opset_22_is_a_type_error_naming_the_opset():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x, w = X.astype(ml_dtypes.bfloat16), W.astype(ml_dtypes.bfloat16)
    for opset in (1, 11, 21):
        with pytest.raises(TypeError, match=rf"bfloat16, which ONNX opset {opset} does not allow"):
            conv_transpose(x, w, opset=opset)
    with pytest.raises(TypeError, match="ConvTranspose-11 takes float16, float32 and float64"):
        conv_transpose(x, w, opset=13)


def test_bfloat16_is_served_from_opset_22():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x, w = X.astype(ml_dtypes.bfloat16), W.astype(ml_dtypes.bfloat16)
    for opset in (None, 22, 23):
        y = conv_transpose(x, w, strides=(2,), opset=opset)
        assert y.dtype == x.dtype
        np.testing.assert_array_equal(y.astype(np.float32).ravel(), [1, 1, 3, 2, 5, 3, 3])


@st.composite
def onnx_cases(draw, opsets=(1, 9, 10, 11, 13, 21, 22, 25)):
    ndim = draw(st.integers(1, 2))
    group = draw(st.integers(1, 2))
    cg, mg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    inputs = draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim))
    kernel = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    strides = draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim))
    dilations = draw(st.lists(st.integers(1, 2), min_size=ndim, max_size=ndim))
    opset = draw(st.sampled_from(opsets))
    bound = [max(s, d) for s, d in zip(strides, dilations)] if opset >= 11 else [5] * ndim
    output_padding = [draw(st.integers(0, b - 1)) for b in bound]
    params = dict(strides=strides, dilations=dilations, group=group,
                  output_padding=output_padding, opset=opset)
    mode = draw(st.sampled_from(["pads", "SAME_UPPER", "SAME_LOWER", "VALID", "output_shape"]))
    if mode == "pads":
        params["pads"] = draw(st.lists(st.integers(0, 3), min_size=2 * ndim, max_size=2 * ndim))
    elif mode == "output_shape":
        params["output_shape"] = draw(st.lists(st.integers(1, 16), min_size=ndim, max_size=ndim))
        params["auto_pad"] = draw(st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER"]))
    else:
        params["auto_pad"] = mode
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((draw(st.integers(1, 2)), cg * group, *inputs)).astype(np.float32)
    w = rng.standard_normal((cg * group, mg, *kernel)).astype(np.float32)
    b = rng.standard_normal(mg * group).astype(np.float32)
    try:
        ConvTranspose(**params).output_shape_for(x.shape, w.shape)
    except ValueError:
        assume(False)
    return x, w, b, params


@settings(max_examples=examples(60))
@given(case=onnx_cases())
def test_every_opset_matches_the_reference(case):
    x, w, b, params = case
    assert_matches_reference(ConvTranspose(**params).apply(x, w, b), x, w, b, **params)


def _totals(x, w, params):
    count = x.ndim - 2
    full = [s * (i - 1) + a + (k - 1) * d + 1 for i, k, s, d, a in zip(
        x.shape[2:], w.shape[2:], params["strides"], params["dilations"],
        params["output_padding"])]
    targets = params.get("output_shape") or [i * s for i, s in zip(x.shape[2:], params["strides"])]
    return [f - t for f, t in zip(full, targets)][:count]


def _onnxruntime_follows_the_text(x, w, params):
    """Where onnxruntime computes what convt's opset text says (specs README items 1-4).

    onnxruntime applies the ConvTranspose-11 rules at every opset, rejects
    output_padding >= stride, clamps the SAME total at 0 and adds output_padding
    (item 1), refuses output_shape larger than the full size.  So: explicit pads
    always; output_shape with a non-negative total, and below opset 11 an even one
    (ConvTranspose-1 splits odd totals the other way); SAME from opset 11 with
    output_padding 0 and a non-negative total.
    """
    opset = params["opset"]
    if any(a >= s for a, s in zip(params["output_padding"], params["strides"])):
        return False
    auto_pad = params.get("auto_pad", "NOTSET")
    if "output_shape" in params:
        totals = _totals(x, w, params)
        return all(t >= 0 for t in totals) and (opset >= 11 or all(t % 2 == 0 for t in totals))
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return (opset >= 11 and not any(params["output_padding"])
                and all(t >= 0 for t in _totals(x, w, params)))
    return True


@settings(max_examples=examples(40))
@given(case=onnx_cases(opsets=(7, 9, 11, 13, 17, 21, 22)))
def test_onnxruntime_where_it_follows_the_text(case):
    ortrun = pytest.importorskip("onnxruntime")
    from onnx import helper

    x, w, b, params = case
    assume(_onnxruntime_follows_the_text(x, w, params))
    attributes = {k: v for k, v in params.items() if k != "opset"}
    node = helper.make_node("ConvTranspose", ["X", "W", "B"], ["Y"], **attributes)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, 1, a.shape) for n, a in zip("XWB", (x, w, b))],
        [helper.make_tensor_value_info("Y", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", params["opset"])],
                              ir_version=8)
    options = ortrun.SessionOptions()
    options.intra_op_num_threads = 1
    session = ortrun.InferenceSession(model.SerializeToString(), options,
                                      providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"X": x, "W": w, "B": b})
    from convt.onnx import run_node

    (y,) = run_node(model, [x, w, b])
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


@settings(max_examples=examples(30))
@given(case=onnx_cases(opsets=(11, 13, 22)))
def test_onnx_reference_evaluator_for_same(case):
    # The onnx Python reference evaluator follows the ConvTranspose-11 text for SAME_*,
    # with or without output_shape, output_padding included (specs README item 1).  It
    # ignores the opset, and its NOTSET + output_shape and grouped paths are broken, as is
    # output_padding >= stride (its col2im fails), so only group 1 with auto_pad SAME_*
    # and output_padding < stride is compared.
    reference = pytest.importorskip("onnx.reference")
    from onnx import helper

    x, w, b, params = case
    assume(params.get("auto_pad") in ("SAME_UPPER", "SAME_LOWER") and params["group"] == 1)
    assume(all(a < s for a, s in zip(params["output_padding"], params["strides"])))
    attributes = {k: v for k, v in params.items() if k != "opset"}
    node = helper.make_node("ConvTranspose", ["X", "W", "B"], ["Y"], **attributes)
    (expected,) = reference.ReferenceEvaluator(node).run(None, {"X": x, "W": w, "B": b})
    y = ConvTranspose(**params).apply(x, w, b)
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_onnx_pads_reads_opsets_literally():
    # full 7, input 3, stride 2; explicit pads (1, 0) whatever the opset
    assert onnx_pads((7,), (3,), (2,), "NOTSET", (1, 0), None, 9) == ((1,), (0,))
    assert onnx_pads((7,), (3,), (2,), "VALID", None, None, 1) == ((0,), (0,))
    assert onnx_pads((7,), (3,), (2,), "SAME_LOWER", None, None, 22) == ((1,), (0,))
    assert onnx_pads((7,), (3,), (2,), "SAME_LOWER", None, None, 10) == ((2,), (2,))
