"""The ONNX text's own examples and ONNX's own node test cases, exactly."""

import numpy as np
import pytest

import _onnx_shim
import onnx_text_examples
from _helpers import ENGINES, onnx_node_cases, run_engine
from convt import conv_transpose
from convt._reference import reference_conv_transpose


def _text_cases():
    _onnx_shim.CASES.clear()
    for example in onnx_text_examples.EXAMPLES:
        example()
    return list(_onnx_shim.CASES)


TEXT_CASES = _text_cases()


def test_every_text_example_is_collected():
    # 7 example sections; the "attributes" section holds three nodes.
    assert len(TEXT_CASES) == 9


@pytest.mark.parametrize("case", TEXT_CASES, ids=[case[0] for case in TEXT_CASES])
def test_text_example(case):
    name, attributes, inputs, outputs = case
    y = conv_transpose(*inputs, **attributes)
    assert y.dtype == outputs[0].dtype
    np.testing.assert_array_equal(y, outputs[0])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", TEXT_CASES, ids=[case[0] for case in TEXT_CASES])
def test_text_example_each_engine(case, engine):
    name, attributes, inputs, outputs = case
    np.testing.assert_array_equal(run_engine(engine, *inputs, **attributes), outputs[0])


@pytest.mark.parametrize("case", TEXT_CASES, ids=[case[0] for case in TEXT_CASES])
def test_reference_reproduces_text_example(case):
    # The reference is the oracle of every other test: it must pass the spec's own numbers.
    name, attributes, inputs, outputs = case
    np.testing.assert_array_equal(reference_conv_transpose(*inputs, **attributes), outputs[0])


def _onnx_node_cases():
    return onnx_node_cases("ConvTranspose")


def test_onnx_node_cases_through_run_node():
    # ONNX's own node test cases, each a model of one node (opset 22), through
    # convt.onnx.run_node: given the model, and given the bare node.
    from convt.onnx import from_node, run_node

    cases = _onnx_node_cases()
    assert len(cases) == 11
    for case in cases:
        (node,) = case.model.graph.node
        assert from_node(case.model).get_params()["opset"] == 22
        for inputs, outputs in case.data_sets:
            for source in (case.model, node):
                (y,) = run_node(source, inputs)
                assert y.shape == outputs[0].shape, case.name
                np.testing.assert_array_equal(y, outputs[0], err_msg=case.name)


def test_onnx_node_cases_each_engine():
    from convt.onnx import from_node

    for case in _onnx_node_cases():
        params = from_node(case.model).get_params()
        for inputs, outputs in case.data_sets:
            for engine in ENGINES:
                y = run_engine(engine, *inputs, **{k: v for k, v in params.items()
                                                   if k != "num_threads"})
                np.testing.assert_array_equal(y, outputs[0], err_msg=f"{case.name} {engine}")
