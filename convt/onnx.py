"""ONNX nodes in convt: the estimator of a ConvTranspose or Conv node, a node run on
arrays, and a one-node model's layer bound to its weights.

``onnx`` is imported when these functions are called, never by ``import convt``;
it stays an optional dependency (``pip install onnx``).

>>> import numpy as np
>>> from onnx import helper
>>> from convt.onnx import from_node, run_node
>>> node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], strides=[2, 2],
...                         auto_pad="SAME_UPPER")
>>> from_node(node)
ConvTranspose(auto_pad='SAME_UPPER', strides=(2, 2), opset=22)
>>> x = np.ones((1, 1, 3, 3), np.float32)
>>> w = np.ones((1, 1, 2, 2), np.float32)
>>> [y.shape for y in run_node(node, [x, w])]
[(1, 1, 6, 6)]
"""

from __future__ import annotations

from collections.abc import Mapping

from . import _validation
from ._conv import Conv
from ._estimator import ConvTranspose

# Attribute types of ConvTranspose (the same in versions 1, 11 and 22), by the
# names of onnx.AttributeProto.AttributeType.
_CONV_TRANSPOSE_ATTRIBUTES = {
    "auto_pad": "STRING",
    "dilations": "INTS",
    "group": "INT",
    "kernel_shape": "INTS",
    "output_padding": "INTS",
    "output_shape": "INTS",
    "pads": "INTS",
    "strides": "INTS",
}

# Attribute types of Conv (the same in versions 1, 11 and 22).
_CONV_ATTRIBUTES = {
    "auto_pad": "STRING",
    "dilations": "INTS",
    "group": "INT",
    "kernel_shape": "INTS",
    "pads": "INTS",
    "strides": "INTS",
}

# op_type -> (estimator class taking the attributes and opset=, attribute types,
# (min, max) inputs).
_OPERATORS = {
    "ConvTranspose": (ConvTranspose, _CONV_TRANSPOSE_ATTRIBUTES, (2, 3)),
    "Conv": (Conv, _CONV_ATTRIBUTES, (2, 3)),
}

_DEFAULT_DOMAINS = ("", "ai.onnx")


def _onnx():
    try:
        import onnx
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "convt.onnx needs the onnx package to read ONNX nodes and models: "
            "pip install onnx. (convt itself does not depend on it.)"
        ) from None
    return onnx


def _node_label(node):
    return f"{node.op_type} node {node.name!r}" if node.name else f"{node.op_type} node"


def _decode(attribute, node, expected, onnx):
    """The Python value of one attribute: str for STRING (ONNX stores bytes), int
    for INT, a tuple of ints for INTS; its type must be the operator's."""
    types = onnx.AttributeProto.AttributeType
    kind = types.Name(attribute.type)
    if attribute.ref_attr_name:
        raise ValueError(
            f"Attribute {attribute.name!r} of the {_node_label(node)} refers to a function "
            f"attribute ({attribute.ref_attr_name!r}); convt runs nodes with concrete values."
        )
    if kind != expected:
        raise TypeError(
            f"Attribute {attribute.name!r} of the {_node_label(node)} has type {kind}; "
            f"{node.op_type} defines it as {expected}."
        )
    if kind == "STRING":
        try:
            return attribute.s.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(
                f"Attribute {attribute.name!r} of the {_node_label(node)} is not UTF-8 text: "
                f"{attribute.s!r}."
            ) from None
    if kind == "INT":
        return int(attribute.i)
    return tuple(int(value) for value in attribute.ints)


def _model_opset(model):
    for entry in model.opset_import:
        if entry.domain in _DEFAULT_DOMAINS:
            return int(entry.version)
    raise ValueError(
        "The model imports no version of the default ONNX domain (opset_import has "
        f"{[(e.domain, e.version) for e in model.opset_import]}); pass opset= explicitly."
    )


def _single_node(model):
    nodes = [node for node in model.graph.node if node.op_type in _OPERATORS]
    if len(nodes) != 1:
        found = [f"{n.op_type} {n.name!r}" for n in nodes]
        raise ValueError(
            f"The model must hold exactly one node convt can run ({', '.join(_OPERATORS)}); "
            f"its graph has {len(nodes)}: {found}. Pass the node itself, e.g. "
            f"from_node(model.graph.node[i], opset=...)."
        )
    return nodes[0]


def _resolve(node, opset):
    """(model or None, node, opset) from a NodeProto or a ModelProto."""
    onnx = _onnx()
    model = None
    if isinstance(node, onnx.ModelProto):
        model = node
        node = _single_node(model)
        if opset is None:
            opset = _model_opset(model)
    elif not isinstance(node, onnx.NodeProto):
        raise TypeError(
            f"node must be an onnx.NodeProto or an onnx.ModelProto; got {type(node).__name__}."
        )
    if node.domain not in _DEFAULT_DOMAINS:
        raise ValueError(
            f"The {_node_label(node)} is in domain {node.domain!r}; convt runs the default "
            f"ONNX domain ('' or 'ai.onnx')."
        )
    if node.op_type not in _OPERATORS:
        raise ValueError(
            f"convt cannot run a {node.op_type!r} node; it runs {', '.join(_OPERATORS)}."
        )
    return model, node, _validation.check_opset(opset, owner="convt.onnx")


def _attributes(node, onnx):
    _, types, _ = _OPERATORS[node.op_type]
    attributes = {}
    for attribute in node.attribute:
        if attribute.name not in types:
            raise ValueError(
                f"The {_node_label(node)} has attribute {attribute.name!r}, which "
                f"{node.op_type} does not define; its attributes are {', '.join(types)}."
            )
        attributes[attribute.name] = _decode(attribute, node, types[attribute.name], onnx)
    return attributes


def from_node(node, opset=None):
    """The convt estimator of an ONNX node.

    Parameters
    ----------
    node : onnx.NodeProto or onnx.ModelProto
        A ConvTranspose or Conv node, or a model whose graph holds exactly one.
    opset : int, optional
        ONNX opset of the default domain: 1-10 read ConvTranspose-1 (Conv-1),
        11-21 ConvTranspose-11 (Conv-11), 22 and later ConvTranspose-22
        (Conv-22).  Default: the model's opset when given a model, else the
        latest.

    Returns
    -------
    ConvTranspose or Conv
        With the node's attributes (STRING decoded to str, INTS to tuples) and
        ``opset``; ``set_params(num_threads=...)`` tunes it further.

    Examples
    --------
    >>> from onnx import helper
    >>> from convt.onnx import from_node
    >>> node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], strides=[3, 2],
    ...                         output_shape=[10, 8])
    >>> layer = from_node(node, opset=9)
    >>> layer
    ConvTranspose(output_shape=(10, 8), strides=(3, 2), opset=9)
    >>> layer.pads_for((1, 1, 3, 3), (1, 2, 3, 3))
    ((-1, 0), (-1, 0))
    >>> from_node(helper.make_node("Conv", ["X", "W"], ["Y"], strides=[2, 2],
    ...                            auto_pad="SAME_UPPER"))
    Conv(auto_pad='SAME_UPPER', strides=(2, 2), opset=22)
    """
    onnx = _onnx()
    _, node, opset = _resolve(node, opset)
    estimator, _, _ = _OPERATORS[node.op_type]
    return estimator(**_attributes(node, onnx), opset=opset)


def _tensor(value, onnx):
    if isinstance(value, onnx.TensorProto):
        from onnx import numpy_helper

        return numpy_helper.to_array(value)
    return value


def _inputs(model, node, inputs, onnx):
    """The node's input arrays, in order: from ``inputs`` (a sequence in node.input
    order, or a mapping by name), else a graph initializer of the model, else
    None for an empty (omitted optional) name."""
    _, _, (least, most) = _OPERATORS[node.op_type]
    names = list(node.input)
    if not least <= len(names) <= most:
        raise ValueError(
            f"The {_node_label(node)} has {len(names)} inputs; {node.op_type} takes "
            f"{least} to {most}."
        )
    if isinstance(inputs, Mapping):
        given = dict(inputs)
    else:
        inputs = list(inputs)
        if len(inputs) > len(names):
            raise ValueError(
                f"run_node got {len(inputs)} inputs for the {_node_label(node)}, which has "
                f"{len(names)}: {names}."
            )
        given = dict(zip(names, inputs))
    stored = {t.name: t for t in model.graph.initializer} if model is not None else {}
    arrays = []
    for position, name in enumerate(names):
        if name in given:
            arrays.append(_tensor(given[name], onnx))
        elif name in stored:
            arrays.append(_tensor(stored[name], onnx))
        elif name == "" and position >= least:
            arrays.append(None)
        else:
            raise ValueError(
                f"run_node has no value for input {position} ({name!r}) of the "
                f"{_node_label(node)}: give it in inputs"
                + (" or as an initializer of the model." if model is not None else ".")
            )
    return arrays


def run_node(node, inputs, opset=None):
    """Run an ONNX node on arrays and return its outputs.

    Parameters
    ----------
    node : onnx.NodeProto or onnx.ModelProto
        As in :func:`from_node`.
    inputs : sequence or mapping of array_like
        The node's inputs in ``node.input`` order (ConvTranspose and Conv: X, W
        and optionally B), or by name.  With a model, inputs not given are taken
        from its graph initializers (typically W and B).
    opset : int, optional
        As in :func:`from_node`.

    Returns
    -------
    list of ndarray
        The node's outputs (ConvTranspose and Conv: ``[Y]``).

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import helper
    >>> from convt.onnx import run_node
    >>> node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"])
    >>> run_node(node, [np.array([[[0., 1., 2.]]]), np.ones((1, 1, 3))])
    [array([[[0., 1., 3., 3., 2.]]])]
    """
    onnx = _onnx()
    model, node, opset = _resolve(node, opset)
    estimator = from_node(node, opset)
    return [estimator.apply(*_inputs(model, node, inputs, onnx))]


def from_model(model, opset=None):
    """The layer of a model's ConvTranspose or Conv node, bound to the weights (and
    bias) stored in its graph's initializers: call it with X alone.

    Parameters
    ----------
    model : onnx.ModelProto
        A model whose graph holds exactly one ConvTranspose or Conv node, whose W
        (and B, when the node has one) are graph initializers.
    opset : int, optional
        As in :func:`from_node` (default: the model's).

    Returns
    -------
    BoundLayer
        ``from_node(model, opset).bind(W, B)``: see :meth:`convt.ConvTranspose.bind`.

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> from convt.onnx import from_model
    >>> w = numpy_helper.from_array(np.ones((1, 1, 3), np.float32), "W")
    >>> graph = helper.make_graph(
    ...     [helper.make_node("ConvTranspose", ["X", "W"], ["Y"], strides=[2])], "up",
    ...     [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 3])],
    ...     [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], [w])
    >>> up = from_model(helper.make_model(graph), opset=22)
    >>> up
    ConvTranspose(strides=(2,), opset=22).bind(w: float32 (1, 1, 3))
    >>> up(np.array([[[0., 1., 2.]]], np.float32))
    array([[[0., 0., 1., 1., 3., 2., 2.]]], dtype=float32)
    """
    onnx = _onnx()
    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"from_model takes an onnx.ModelProto; got {type(model).__name__}. "
                        f"For a node, use from_node(node).bind(w, b).")
    _, node, opset = _resolve(model, opset)
    stored = {t.name: t for t in model.graph.initializer}
    names = list(node.input)
    missing = [name for name in names[1:] if name and name not in stored]
    if missing:
        raise ValueError(
            f"from_model binds the {_node_label(node)} to the weights in its graph's "
            f"initializers, which have no {missing}: give them to run_node instead, or "
            f"bind them yourself: from_node(model).bind(w, b).")
    w = _tensor(stored[names[1]], onnx)
    b = _tensor(stored[names[2]], onnx) if len(names) > 2 and names[2] else None
    return from_node(node, opset).bind(w, b)
