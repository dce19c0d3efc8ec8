"""convt.onnx: the estimator of an ONNX node, and nodes and models run on arrays."""

import subprocess
import sys

import numpy as np
import pytest

from _helpers import assert_matches_reference
from convt import ConvTranspose

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from convt.onnx import from_node, run_node  # noqa: E402


def _model(node, opset, initializers=(), inputs=("X", "W")):
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in inputs],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_attributes_are_decoded_by_type():
    node = helper.make_node("ConvTranspose", ["X", "W", "B"], ["Y"], auto_pad="SAME_LOWER",
                            strides=[2, 3], dilations=[1, 2], group=2, output_padding=[1, 0],
                            kernel_shape=[3, 3])
    layer = from_node(node)
    assert isinstance(layer, ConvTranspose)
    assert layer.get_params() == dict(
        auto_pad="SAME_LOWER", dilations=(1, 2), group=2, kernel_shape=(3, 3),
        output_padding=(1, 0), output_shape=None, pads=None, strides=(2, 3), opset=22,
        data_format="NCX", filter_format="IOX", num_threads=None)


def test_opset_from_the_argument_then_the_model_then_the_latest():
    node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], strides=[2], output_shape=[6])
    model = _model(node, 9)
    assert from_node(node).get_params()["opset"] == 22
    assert from_node(model).get_params()["opset"] == 9
    assert from_node(model, opset=13).get_params()["opset"] == 13
    x = np.array([[[1.0, 2.0, 3.0]]], np.float32)
    w = np.ones((1, 1, 3), np.float32)                    # full: 1 1 3 2 5 3 3, total 1
    np.testing.assert_array_equal(run_node(model, [x, w])[0].ravel(), [1, 1, 3, 2, 5, 3])
    np.testing.assert_array_equal(run_node(node, [x, w])[0].ravel(), [1, 3, 2, 5, 3, 3])


def test_model_initializers_fill_missing_inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["X", "W", "B"], ["Y"], strides=[2, 2],
                            pads=[1, 1, 1, 1])
    model = _model(node, 17, [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")],
                   inputs=("X",))
    (y,) = run_node(model, [x])
    assert_matches_reference(y, x, w, b, strides=(2, 2), pads=(1, 1, 1, 1))
    np.testing.assert_array_equal(run_node(model, {"X": x})[0], y)
    # TensorProto inputs are read too
    np.testing.assert_array_equal(run_node(node, [numpy_helper.from_array(x), w, b])[0], y)


def test_a_model_with_other_nodes_runs_its_single_conv_transpose():
    node = helper.make_node("ConvTranspose", ["X", "W"], ["T"], strides=[2])
    relu = helper.make_node("Relu", ["T"], ["Y"])
    graph = helper.make_graph([node, relu], "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert from_node(model).get_params()["strides"] == (2,)
    model.graph.node.append(helper.make_node("ConvTranspose", ["Y", "W"], ["Z"], name="second"))
    with pytest.raises(ValueError, match=r"exactly one node convt can run.*has 2.*'second'"):
        from_node(model)


@pytest.mark.parametrize(
    "node, error, pattern",
    [
        (helper.make_node("ConvTranspose", ["X", "W"], ["Y"], strides=2), TypeError,
         r"Attribute 'strides' of the ConvTranspose node has type INT; ConvTranspose defines "
         r"it as INTS"),
        (helper.make_node("ConvTranspose", ["X", "W"], ["Y"], name="up", colour=[1]), ValueError,
         r"ConvTranspose node 'up' has attribute 'colour', which ConvTranspose does not define"),
        (helper.make_node("ConvTranspose", ["X", "W"], ["Y"], auto_pad="SAME"), ValueError,
         r"'auto_pad'.*got 'SAME'"),
        (helper.make_node("MaxPool", ["X"], ["Y"]), ValueError,
         r"cannot run a 'MaxPool' node; it runs ConvTranspose, Conv"),
        (helper.make_node("ConvTranspose", ["X", "W"], ["Y"], domain="com.example"), ValueError,
         r"in domain 'com.example'"),
        (helper.make_node("ConvTranspose", ["X"], ["Y"]), ValueError, r"has 1 inputs"),
    ],
)
def test_bad_nodes(node, error, pattern):
    with pytest.raises(error, match=pattern):
        run_node(node, [np.ones((1, 1, 2), np.float32), np.ones((1, 1, 2), np.float32)])


def test_bad_calls():
    node = helper.make_node("ConvTranspose", ["X", "W", "B"], ["Y"])
    x = np.ones((1, 1, 2), np.float32)
    with pytest.raises(ValueError, match=r"no value for input 2 \('B'\)"):
        run_node(node, [x, x])
    with pytest.raises(ValueError, match=r"got 4 inputs.*which has 3"):
        run_node(node, [x, x, x, x])
    with pytest.raises(TypeError, match=r"onnx.NodeProto or an onnx.ModelProto; got dict"):
        from_node({"op_type": "ConvTranspose"})
    with pytest.raises(ValueError, match=r"'opset' parameter of convt.onnx.*got 0"):
        from_node(node, opset=0)
    # an empty name is an omitted optional input
    empty = helper.make_node("ConvTranspose", ["X", "W", ""], ["Y"])
    np.testing.assert_array_equal(run_node(empty, [x, x])[0].ravel(), [1, 2, 1])


def test_importing_convt_and_its_front_ends_imports_no_optional_package():
    code = ("import sys, convt, convt.onnx, convt.openvino, convt.onednn\n"
            "print(sorted(m for m in ('onnx', 'onnxruntime', 'openvino', 'ml_dtypes', 'torch')"
            " if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"
