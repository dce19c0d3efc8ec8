"""
An ONNX decoder layer without a deep-learning framework
=======================================================

A decoder's upsampling layer exported to ONNX is one ``ConvTranspose`` node.
Here such a model is built with ``onnx.helper`` (as an exporter would write
it), and run with :func:`convt.conv_transpose` on the node's own attributes and
weights.  ONNX's reference evaluator checks the result.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import convt

rng = np.random.default_rng(0)
weight = (rng.standard_normal((64, 32, 4, 4)) / 16).astype(np.float32)  # (C, M/group, kH, kW)
bias = rng.standard_normal(32).astype(np.float32)
node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2],
                        pads=[1, 1, 1, 1], kernel_shape=[4, 4])
graph = helper.make_graph(
    [node], "decoder_block",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 32, 32])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 64, 64])],
    [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
onnx.checker.check_model(model)

# %%
# Read the node back as a runtime would: attributes and initializers.

node = model.graph.node[0]
attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
initializers = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
print(node.op_type, attributes)

x = rng.standard_normal((1, 64, 32, 32)).astype(np.float32)
y = convt.conv_transpose(x, initializers[node.input[1]], initializers[node.input[2]],
                         **attributes)
print("convt:", y.shape, y.dtype)

# %%
# ONNX's own Python reference implementation of the operator gives the same
# numbers (to float32 rounding).

(expected,) = ReferenceEvaluator(model).run(None, {"x": x})
print("largest difference from onnx.reference:", float(np.max(np.abs(y - expected))))
