"""The ONNX text's own examples and ONNX's own node test cases, exactly."""

import numpy as np
import pytest

import _onnx_shim
import onnx_text_examples
from _helpers import ENGINES, run_engine
from convt import ConvTranspose, conv_transpose
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
    node = pytest.importorskip("onnx.backend.test.case.node")
    return node.collect_testcases("ConvTranspose")


def _attributes(node):
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _decoded(attributes):
    return {k: v.decode() if isinstance(v, bytes) else (list(v) if isinstance(v, list) else v)
            for k, v in attributes.items()}


def test_onnx_node_cases():
    cases = _onnx_node_cases()
    assert len(cases) == 11
    for case in cases:
        (node,) = case.model.graph.node
        attributes = _decoded(_attributes(node))
        for inputs, outputs in case.data_sets:
            for engine in (None,) + ENGINES:
                if engine is None:
                    y = ConvTranspose(**attributes).apply(*inputs)
                else:
                    y = run_engine(engine, *inputs, **attributes)
                assert y.shape == outputs[0].shape, case.name
                np.testing.assert_array_equal(y, outputs[0], err_msg=f"{case.name} {engine}")
