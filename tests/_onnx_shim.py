"""Stand-ins for the two onnx names the operator text's examples use.

``onnx.helper.make_node(op, inputs, outputs, **attributes)`` returns the
attributes; ``expect(node, inputs, outputs, name)`` records one case in CASES.
"""

import types

CASES = []


def _make_node(op_type, inputs, outputs, name=None, **attributes):
    return dict(attributes)


onnx = types.SimpleNamespace(helper=types.SimpleNamespace(make_node=_make_node))


def expect(node, inputs, outputs, name):
    CASES.append((name, node, list(inputs), list(outputs)))
