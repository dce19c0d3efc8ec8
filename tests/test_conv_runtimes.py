"""Conv against onnxruntime, the onnx reference evaluator, PyTorch and OpenVINO, where they
follow the text, and the one place where the ONNX runtimes do not (SAME under opsets 1-10).

Each runtime is optional: its tests are skipped when it is not installed.
"""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from _conv_helpers import conv_error_bound
from _helpers import examples
from convt import Conv, conv
from convt._reference import reference_conv


@st.composite
def runtime_cases(draw, opsets=(11, 13, 17, 22), dtype=np.float32):
    ndim = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3))
    cg, mg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    inputs = draw(st.lists(st.integers(1, 8), min_size=ndim, max_size=ndim))
    kernel = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    params = dict(strides=draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)),
                  dilations=draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)),
                  group=group, opset=draw(st.sampled_from(opsets)))
    mode = draw(st.sampled_from(["pads", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if mode == "pads":
        params["pads"] = draw(st.lists(st.integers(0, 3), min_size=2 * ndim, max_size=2 * ndim))
    else:
        params["auto_pad"] = mode
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((draw(st.integers(1, 2)), cg * group, *inputs)).astype(dtype)
    w = rng.standard_normal((mg * group, cg, *kernel)).astype(dtype)
    b = rng.standard_normal(mg * group).astype(dtype)
    try:
        Conv(**params).output_shape_for(x.shape, w.shape)
    except ValueError:
        assume(False)
    return x, w, b, params


def _model(x, w, b, params):
    from onnx import helper

    attributes = {k: v for k, v in params.items() if k != "opset"}
    node = helper.make_node("Conv", ["X", "W", "B"], ["Y"], **attributes)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, 1, a.shape) for n, a in zip("XWB", (x, w, b))],
        [helper.make_tensor_value_info("Y", 1, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", params["opset"])],
                             ir_version=8)


def _onnxruntime(model, x, w, b):
    ortrun = pytest.importorskip("onnxruntime")
    options = ortrun.SessionOptions()
    options.intra_op_num_threads = 1
    session = ortrun.InferenceSession(model.SerializeToString(), options,
                                      providers=["CPUExecutionProvider"])
    return session.run(None, {"X": x, "W": w, "B": b})[0]


def _same(params):
    return params.get("auto_pad") in ("SAME_UPPER", "SAME_LOWER")


@settings(max_examples=examples(40))
@given(case=runtime_cases(opsets=(7, 10, 11, 13, 22)))
def test_onnxruntime_where_it_follows_the_text(case):
    # onnxruntime refuses SAME_* with dilations (its own limit), and applies Conv-11's
    # SAME below opset 11 too (pinned below): compared everywhere else.
    pytest.importorskip("onnxruntime")
    x, w, b, params = case
    assume(not (_same(params) and any(d > 1 for d in params["dilations"])))
    assume(not (_same(params) and params["opset"] < 11 and any(s > 1 for s in params["strides"])))
    from convt.onnx import run_node

    model = _model(x, w, b, params)
    expected = _onnxruntime(model, x, w, b)
    (y,) = run_node(model, [x, w, b])
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_onnxruntime_applies_conv11_same_below_opset_11():
    # Conv-1's SAME: "the output spatial size match the input"; convt reads it literally
    # (as it reads ConvTranspose-1), onnxruntime and the onnx reference compute
    # ceil(input / stride) at every opset.  Pinned, so a change shows up.
    pytest.importorskip("onnxruntime")
    x = np.arange(7, dtype=np.float32).reshape(1, 1, 7)
    w = np.ones((1, 1, 3), np.float32)
    b = np.zeros(1, np.float32)
    params = dict(auto_pad="SAME_UPPER", strides=[2], opset=10)
    assert _onnxruntime(_model(x, w, b, params), x, w, b).shape == (1, 1, 4)
    y = conv(x, w, b, **params)
    assert y.shape == (1, 1, 7)                  # total 6*2 + 3 - 7 = 8: pads (4, 4)
    np.testing.assert_array_equal(y.ravel(), [0, 0, 3, 9, 15, 6, 0])  # x[2o-4 .. 2o-2]
    np.testing.assert_array_equal(conv(x, w, b, **dict(params, opset=11)).ravel(), [1, 6, 12, 11])


@settings(max_examples=examples(30))
@given(case=runtime_cases(opsets=(11, 22)))
def test_onnx_reference_evaluator(case):
    reference = pytest.importorskip("onnx.reference")
    x, w, b, params = case
    model = _model(x, w, b, params)
    (expected,) = reference.ReferenceEvaluator(model).run(None, {"X": x, "W": w, "B": b})
    y = Conv(**params).apply(x, w, b)
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


@settings(max_examples=examples(30))
@given(case=runtime_cases(dtype=np.float64))
def test_pytorch_in_float64(case):
    # PyTorch's conv{1,2,3}d with the resolved pads applied by F.pad: both within the
    # float64 rounding bound of the exact result, so within twice it of each other.
    torch = pytest.importorskip("torch")
    x, w, b, params = case
    assume(x.ndim <= 5)
    layer = Conv(**params)
    pads = layer.pads_for(x.shape, w.shape)
    padded = torch.nn.functional.pad(torch.from_numpy(x),
                                     [p for pair in reversed(pads) for p in pair])
    function = {3: torch.nn.functional.conv1d, 4: torch.nn.functional.conv2d,
                5: torch.nn.functional.conv3d}[x.ndim]
    expected = function(padded, torch.from_numpy(w), torch.from_numpy(b),
                        stride=params["strides"], dilation=params["dilations"],
                        groups=params["group"]).numpy()
    y = layer.apply(x, w, b)
    assert y.shape == expected.shape
    assert np.all(np.abs(y - expected) <= 2 * conv_error_bound(x, w, b, params))


def test_openvino_convolution_and_group_convolution():
    ov = pytest.importorskip("openvino")
    from openvino import opset13 as ops

    rng = np.random.default_rng(3)
    core = ov.Core()
    for group, (x_shape, w_shape) in ((1, ((2, 4, 11, 9), (6, 4, 3, 3))),
                                      (2, ((1, 4, 10, 12), (6, 2, 3, 3)))):
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = rng.standard_normal(w_shape).astype(np.float32)
        params = dict(strides=(2, 1), dilations=(1, 2), pads=(1, 0, 2, 1), group=group)
        data = ops.parameter(x_shape, np.float32)
        if group == 1:
            node = ops.convolution(data, ops.constant(w), [2, 1], [1, 0], [2, 1], [1, 2])
        else:
            grouped = w.reshape(group, w_shape[0] // group, *w_shape[1:])
            node = ops.group_convolution(data, ops.constant(grouped), [2, 1], [1, 0], [2, 1],
                                         [1, 2])
        compiled = core.compile_model(ov.Model([node], [data]), "CPU",
                                      {"INFERENCE_PRECISION_HINT": "f32"})
        expected = compiled([x])[0]
        y = conv(x, w, **params)
        assert y.shape == expected.shape
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(y, reference_conv(x, w, **params), rtol=1e-5, atol=1e-5)
