"""Conv: the text's examples, ONNX's node cases, the estimator protocol, layouts, dtypes,
out=, non-finite values and bitwise determinism across threads."""

import copy
import pickle

import numpy as np
import pytest

import _onnx_shim
import onnx_conv_text_examples
from _conv_helpers import assert_conv_matches_reference, run_conv_engine
from _helpers import DTYPES, ENGINES, bfloat16, onnx_node_cases
from convt import Conv, ConvTranspose, _dispatch, _engine, conv, explain
from convt._reference import reference_conv


def _text_cases():
    _onnx_shim.CASES.clear()
    for example in onnx_conv_text_examples.EXAMPLES:
        example()
    return list(_onnx_shim.CASES)


TEXT_CASES = _text_cases()
TEXT_IDS = [case[0] for case in TEXT_CASES]


def test_every_text_example_is_collected():
    # 3 example sections holding 2 + 3 + 1 nodes
    assert len(TEXT_CASES) == 6


@pytest.mark.parametrize("case", TEXT_CASES, ids=TEXT_IDS)
def test_text_example(case):
    name, attributes, inputs, outputs = case
    y = conv(*inputs, **attributes)
    assert y.dtype == outputs[0].dtype
    np.testing.assert_array_equal(y, outputs[0])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", TEXT_CASES, ids=TEXT_IDS)
def test_text_example_each_engine(case, engine):
    name, attributes, inputs, outputs = case
    np.testing.assert_array_equal(run_conv_engine(engine, *inputs, **attributes), outputs[0])


@pytest.mark.parametrize("case", TEXT_CASES, ids=TEXT_IDS)
def test_reference_reproduces_text_example(case):
    # The reference is the oracle of every other Conv test: it must pass the text's numbers.
    name, attributes, inputs, outputs = case
    np.testing.assert_array_equal(reference_conv(*inputs, **attributes), outputs[0])


def _onnx_node_cases():
    return onnx_node_cases("Conv")


def test_onnx_node_cases_through_run_node():
    # ONNX's own node test cases, each a model of one node, given as the model and as
    # the bare node.
    from convt.onnx import from_node, run_node

    cases = _onnx_node_cases()
    assert len(cases) == 6
    for case in cases:
        (node,) = case.model.graph.node
        layer = from_node(case.model)
        assert isinstance(layer, Conv)
        assert layer.get_params()["opset"] == case.model.opset_import[0].version
        for inputs, outputs in case.data_sets:
            for source in (case.model, node):
                (y,) = run_node(source, inputs)
                assert y.shape == outputs[0].shape, case.name
                np.testing.assert_array_equal(y, outputs[0], err_msg=case.name)


def test_onnx_node_cases_each_engine():
    from convt.onnx import from_node

    for case in _onnx_node_cases():
        params = from_node(case.model).get_params()
        params.pop("num_threads")
        for inputs, outputs in case.data_sets:
            for engine in ENGINES:
                np.testing.assert_array_equal(run_conv_engine(engine, *inputs, **params),
                                              outputs[0], err_msg=f"{case.name} {engine}")


def test_a_conv_node_with_bias_and_attributes_decoded_by_type():
    onnx = pytest.importorskip("onnx")
    from convt.onnx import from_node, run_node

    node = onnx.helper.make_node("Conv", ["X", "W", "B"], ["Y"], auto_pad="SAME_LOWER",
                                 strides=[2, 3], dilations=[1, 2], group=2, kernel_shape=[3, 3])
    layer = from_node(node, opset=13)
    assert layer.get_params() == dict(
        auto_pad="SAME_LOWER", dilations=(1, 2), group=2, kernel_shape=(3, 3), pads=None,
        strides=(2, 3), opset=13, data_format="NCX", filter_format="OIX", num_threads=None)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 7, 9)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    (y,) = run_node(node, [x, w, b], opset=13)
    assert_conv_matches_reference(y, x, w, b, **layer.get_params())
    with pytest.raises(ValueError, match=r"Conv node has attribute 'output_padding', which "
                                         r"Conv does not define"):
        from_node(onnx.helper.make_node("Conv", ["X", "W"], ["Y"], output_padding=[1]))


# --- the estimator protocol ----------------------------------------------------

ALL = dict(auto_pad="NOTSET", dilations=[1, 2], group=2, kernel_shape=(3, 3),
           pads=(1, 0, 1, 0), strides=(2, 2), opset=13, data_format="NXC", filter_format="XIO",
           num_threads=1)


def test_get_params_returns_values_as_given_and_set_params_validates():
    layer = Conv(**ALL)
    params = layer.get_params()
    assert list(params) == list(ALL)
    assert all(params[name] is value for name, value in ALL.items())
    assert layer.set_params(strides=(3, 1)) is layer and layer.strides == (3, 1)
    with pytest.raises(ValueError, match="'strides' parameter of Conv"):
        layer.set_params(strides=(0, 1))
    assert layer.strides == (3, 1)


def test_clone_repr_and_pickle():
    base = pytest.importorskip("sklearn.base")
    layer = Conv(**ALL)
    assert repr(base.clone(layer)) == repr(layer)
    twin = type(layer)(**{k: copy.deepcopy(v) for k, v in layer.get_params().items()})
    assert repr(twin) == repr(layer)
    assert repr(Conv()) == "Conv()"
    assert repr(Conv(strides=2, auto_pad="SAME_UPPER")) == "Conv(auto_pad='SAME_UPPER', strides=2)"
    layer = Conv(strides=(2, 2), pads=(1, 1, 1, 1), group=2)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(layer)).apply(x, w), layer.apply(x, w))


def test_functional_twin_and_output_shape_and_pads_without_computing():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 8, 5, 7))
    w = rng.standard_normal((4, 8, 4, 4))
    b = rng.standard_normal(4)
    layer = Conv(strides=(2, 3), auto_pad="SAME_UPPER")
    y = layer.apply(x, w, b)
    np.testing.assert_array_equal(conv(x, w, b, strides=(2, 3), auto_pad="SAME_UPPER"), y)
    # ceil(5 / 2) = 3, ceil(7 / 3) = 3; totals 2*2 + 4 - 5 = 3 and 2*3 + 4 - 7 = 3
    assert layer.output_shape_for(x.shape, w.shape) == y.shape == (3, 4, 3, 3)
    assert layer.pads_for(x.shape, w.shape) == ((1, 2), (1, 2))
    assert layer.set_params(auto_pad="SAME_LOWER").pads_for(x.shape, w.shape) == ((2, 1), (2, 1))
    assert_conv_matches_reference(y, x, w, b, strides=(2, 3), auto_pad="SAME_UPPER")


def test_a_bare_int_applies_to_every_axis():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 9, 8))
    w = rng.standard_normal((3, 2, 3, 3))
    layer = Conv(strides=2, dilations=2, pads=(1, 0, 1, 0))
    np.testing.assert_array_equal(
        layer.apply(x, w), conv(x, w, strides=(2, 2), dilations=(2, 2), pads=(1, 0, 1, 0)))


# --- layouts, dtypes, out= -----------------------------------------------------

@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
@pytest.mark.parametrize("filter_format", ["OIX", "XIO", "IOX"])
def test_layouts_are_read_in_place(data_format, filter_format):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 7, 8)).astype(np.float32)        # NCX
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)        # OIX, group 2
    b = rng.standard_normal(4).astype(np.float32)
    params = dict(strides=(2, 1), pads=(1, 0, 1, 1), group=2)
    expected = conv(x, w, b, **params)
    xs = np.moveaxis(x, 1, -1).copy() if data_format == "NXC" else x
    ws = {"OIX": w, "XIO": np.moveaxis(w, (0, 1), (-1, -2)).copy(),
          "IOX": np.swapaxes(w, 0, 1).copy()}[filter_format]
    layer = Conv(data_format=data_format, filter_format=filter_format, **params)
    y = layer.apply(xs, ws, b)
    assert y.shape == layer.output_shape_for(xs.shape, ws.shape)
    np.testing.assert_array_equal(np.moveaxis(y, -1, 1) if data_format == "NXC" else y, expected)
    out = np.empty_like(y)
    assert layer.apply(xs, ws, b, out=out) is out
    np.testing.assert_array_equal(out, y)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes_are_kept_and_rounded_once(dtype):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 4, 9, 7)).astype(dtype)
    w = rng.standard_normal((6, 4, 3, 3)).astype(dtype)
    b = rng.standard_normal(6).astype(dtype)
    for params in (dict(pads=(1, 1, 1, 1)), dict(strides=2, auto_pad="SAME_UPPER"),
                   dict(strides=(3, 2), dilations=(1, 2))):
        y = conv(x, w, b, **params)
        assert y.dtype == np.dtype(dtype)
        assert_conv_matches_reference(y, x, w, b, **params)


@pytest.mark.skipif(bfloat16 is None, reason="needs ml_dtypes")
def test_bfloat16_needs_opset_22():
    x = np.ones((1, 1, 4), bfloat16)
    w = np.ones((1, 1, 2), bfloat16)
    assert conv(x, w).dtype == bfloat16
    assert conv(x, w, opset=22).dtype == bfloat16
    with pytest.raises(TypeError, match=r"x has dtype bfloat16, which ONNX opset 21 does not "
                                        r"allow: its Conv-11 takes float16, float32 and float64"):
        conv(x, w, opset=21)


def test_array_likes_and_odd_strides_are_read():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 3, 12, 10))
    w = rng.standard_normal((2, 3, 3, 3))
    expected = conv(x, w, strides=2)
    np.testing.assert_array_equal(conv(x.tolist(), w.tolist(), strides=2), expected)
    fortran, reversed_w = np.asfortranarray(x), w[:, :, ::-1, ::-1].copy()[:, :, ::-1, ::-1]
    np.testing.assert_array_equal(conv(fortran, reversed_w, strides=2), expected)
    np.testing.assert_array_equal(conv(x.astype(">f8"), w, strides=2), expected)


# --- errors --------------------------------------------------------------------

@pytest.mark.parametrize(
    "params, error, pattern",
    [
        (dict(strides=(2, 0)), ValueError, r"'strides' parameter of Conv must be .*got \(2, 0\)"),
        (dict(dilations="2"), TypeError, r"'dilations' parameter of Conv"),
        (dict(group=0), ValueError, r"'group' parameter of Conv must be an int >= 1"),
        (dict(pads=(1, -1)), ValueError, r"'pads' parameter of Conv.*>= 0"),
        (dict(pads=(1, 1, 1)), ValueError, r"'pads' parameter of Conv must be a sequence of even"),
        (dict(auto_pad="same_upper"), ValueError,
         r"'auto_pad' parameter of Conv .*ONNX spells it in capitals: 'SAME_UPPER'"),
        (dict(auto_pad="SAME_UPPER", pads=(1, 1)), ValueError,
         r"'pads' parameter of Conv cannot be combined with auto_pad='SAME_UPPER'"),
        (dict(strides=(1, 2), dilations=(1, 1, 1)), ValueError,
         r"Per-axis parameters of Conv must describe the same number"),
        (dict(opset=0), ValueError, r"'opset' parameter of Conv"),
        (dict(filter_format="HWIO"), ValueError,
         r"'filter_format' parameter of Conv .*HWIO is 'XIO'"),
        (dict(data_format="NHWC"), ValueError, r"'data_format' parameter of Conv .*NHWC is 'NXC'"),
        (dict(num_threads=0), ValueError, r"'num_threads' parameter of Conv"),
    ],
)
def test_bad_parameters_name_the_parameter(params, error, pattern):
    with pytest.raises(error, match=pattern):
        Conv(**params)


@pytest.mark.parametrize("wrong, right", [
    ("stride", "strides"), ("padding", "pads"), ("groups", "group"),
    ("kernel_size", "kernel_shape"), ("dilation", "dilations"), ("autopad", "auto_pad"),
])
def test_misspelt_keywords_get_a_suggestion(wrong, right):
    pattern = rf"Invalid parameter '{wrong}' for Conv\. Did you mean '{right}'\?"
    with pytest.raises(TypeError, match=pattern):
        Conv(**{wrong: 2})
    with pytest.raises(ValueError, match=pattern):
        Conv().set_params(**{wrong: 2})
    with pytest.raises(TypeError, match="Invalid parameter 'output_padding' for Conv"):
        conv(np.ones((1, 1, 2)), np.ones((1, 1, 2)), output_padding=(1,))


@pytest.mark.parametrize(
    "x_shape, w_shape, params, pattern",
    [
        ((64, 64), (1, 1, 3, 3), {}, r"x must have shape \(N, C, D1, D2\).*batch axis N and the "
                                     r"channel axis C are missing.*x\[None, None\]"),
        ((64, 48, 3), (8, 3, 3, 3), {}, r"x looks channels-last.*data_format='NXC'"),
        ((3, 64, 48), (8, 3, 3, 3), {}, r"batch axis N is missing: x\[None\] adds it"),
        ((1, 3, 8), (8, 3, 3, 3), {}, r"x must have shape \(N, C, D1, D2\)"),
        ((1, 3, 8, 8), (8, 3, 3), {}, r"w must have shape \(M, C/group, k1, \.\.\., kn\) with the "
                                      r"same rank as x"),
        ((1, 4, 8, 8), (8, 3, 3, 3), {}, r"w.shape\[1\] \* group must equal the number of input "
                                         r"channels x.shape\[1\]=4.*should be 4"),
        ((1, 6, 8, 8), (8, 3, 3, 3), dict(group=4), r"group=4 must divide the number of input "
                                                     r"channels x.shape\[1\]=6"),
        ((1, 6, 8, 8), (7, 3, 3, 3), dict(group=2), r"w.shape\[0\]=7, the number of output "
                                                     r"channels M, must be a multiple of group=2"),
        ((1, 3, 8, 0), (8, 3, 3, 3), {}, r"x must have non-empty spatial axes"),
        ((1, 3, 8, 8), (8, 3, 3, 0), {}, r"w must have a non-empty kernel"),
        ((1, 3, 8, 8), (8, 3, 3, 3), dict(strides=(1, 1, 1)),
         r"per-axis parameters of Conv describe 3 spatial axes, but x of shape "
         r"\(1, 3, 8, 8\) has 2"),
        ((1, 3, 8, 8), (8, 3, 3, 3), dict(kernel_shape=(2, 2)),
         r"'kernel_shape' parameter of Conv must equal the kernel axes of w, \(3, 3\)"),
        ((1, 3, 2, 8), (8, 3, 3, 3), {}, r"kernel does not fit on spatial axis 0: x has 2 "
                                         r"positions there, 2 with pads \(0, 0\).*extent .* = 3"),
        ((1, 3, 8, 8), (8, 3, 3, 3), dict(dilations=(4, 1)), r"kernel does not fit on spatial "
                                                               r"axis 0.*= 9"),
    ],
)
def test_bad_shapes_say_what_is_wrong(x_shape, w_shape, params, pattern):
    with pytest.raises(ValueError, match=pattern):
        conv(np.ones(x_shape, np.float32), np.ones(w_shape, np.float32), **params)
    with pytest.raises(ValueError, match=pattern):
        Conv(**params).output_shape_for(x_shape, w_shape)


def test_bad_operands():
    x = np.ones((1, 2, 5), np.float32)
    w = np.ones((3, 2, 2), np.float32)
    with pytest.raises(TypeError, match=r"x and w must have the same dtype"):
        conv(x, w.astype(np.float64))
    with pytest.raises(TypeError, match=r"x has dtype int64; convt computes in float16"):
        conv(np.ones((1, 2, 5), np.int64), w)
    with pytest.raises(ValueError, match=r"b must have shape \(M,\) = \(3,\)"):
        conv(x, w, np.ones(2, np.float32))
    with pytest.raises(ValueError, match=r"out must have shape \(1, 3, 4\) and dtype float32"):
        conv(x, w, out=np.empty((1, 3, 5), np.float32))
    with pytest.raises(ValueError, match=r"out must not share memory with x"):
        conv(x, np.ones((2, 2, 1), np.float32), out=x)
    with pytest.raises(ValueError, match=r"^w is a ragged nested sequence"):
        conv(x, [[[1.0, 2.0], [1.0]]])


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_explain_describes_the_forward_problem(data_format):
    x_shape = (2, 8, 20, 20) if data_format == "NCX" else (2, 20, 20, 8)
    report = explain(Conv(strides=(2, 2), pads=(1, 1, 1, 1), group=2, data_format=data_format),
                     x_shape, (12, 4, 3, 3), np.float64)
    problem = report.problem
    assert not problem.transpose
    assert (problem.in_channels, problem.out_channels, problem.group) == (8, 12, 2)
    assert problem.geometry.output_shape == (10, 10)
    # every output's 3x3 window, padding included (Conv multiplies its zeros)
    assert problem.multiply_adds() == 2 * 12 * 4 * 10 * 10 * 3 * 3
    assert "output (10, 10)" in str(report)


def test_absurd_outputs_are_refused_before_allocating():
    x = np.ones((1, 1, 4, 4), np.float32)
    w = np.ones((1, 1, 1, 1), np.float32)
    with pytest.raises(MemoryError, match=r"would need .* GiB"):
        conv(x, w, pads=(2**17, 2**17, 2**17, 2**17))
    with pytest.raises(ValueError, match=r"more than this platform can address"):
        conv(x, w, pads=(2**31 - 1,) * 4)


# --- non-finite values ----------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_padding_zeros_times_an_infinite_weight_are_nan(engine):
    # The text pads the input with zeros and multiplies them: 0 x Inf = NaN where an
    # infinite weight meets padding (onnxruntime, the onnx reference and PyTorch agree);
    # on real positions it gives +-Inf.
    x = np.ones((1, 2, 5, 4), np.float32)
    w = np.ones((3, 2, 3, 3), np.float32)
    w[1, 0, 0, 2] = np.inf
    w[2, 1, 1, 1] = np.nan
    params = dict(pads=(1, 2, 1, 0), strides=(2, 1))
    y = run_conv_engine(engine, x, w, **params)
    expected = reference_conv(x, w, **params)
    assert np.isnan(expected[0, 1]).any() and np.isinf(expected[0, 1]).any()
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    np.testing.assert_array_equal(y[np.isinf(expected)], expected[np.isinf(expected)])
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(y[finite], expected[finite])
    assert np.isnan(y[0, 2]).all()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_nan_input_spoils_exactly_the_outputs_reading_it(engine):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 3, 9, 8))
    x[0, 1, 4, 5] = np.nan
    w = rng.standard_normal((2, 3, 3, 3))
    params = dict(strides=2, pads=(1, 1, 1, 1))
    y = run_conv_engine(engine, x, w, **params)
    expected = reference_conv(x, w, **params)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    assert np.isnan(y).sum() == 2 * 2 * 1  # rows 2 and 3 x column 3, both channels
    # the other outputs do not read x[0, 1, 4, 5]: as with any value there
    clean = reference_conv(np.nan_to_num(x), w, **params)
    np.testing.assert_allclose(y[~np.isnan(y)], clean[~np.isnan(y)], rtol=1e-12, atol=1e-12)


# --- threads -------------------------------------------------------------------

THREAD_CASES = {
    "2d_k3s1": dict(x=(2, 16, 21, 19), w=(24, 16, 3, 3), pads=(1, 1, 1, 1)),
    "2d_k3s2_grouped": dict(x=(1, 16, 23, 20), w=(16, 4, 3, 3), strides=(2, 2), group=4,
                            pads=(1, 1, 1, 1)),
    "3d_same": dict(x=(1, 6, 9, 8, 10), w=(6, 6, 3, 3, 3), strides=(2, 1, 2),
                    auto_pad="SAME_LOWER"),
    "1d_long": dict(x=(1, 12, 700), w=(8, 12, 7), strides=(3,), dilations=(2,)),
    "2d_depthwise": dict(x=(2, 6, 19, 37), w=(12, 1, 3, 3), group=6, pads=(1, 2, 1, 0)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(THREAD_CASES))
def test_bitwise_identical_across_thread_counts(name, engine, dtype, small_tiles):
    spec = dict(THREAD_CASES[name])
    rng = np.random.default_rng(1)
    x = rng.standard_normal(spec.pop("x")).astype(dtype)
    w = rng.standard_normal(spec.pop("w")).astype(dtype)
    b = rng.standard_normal(w.shape[0]).astype(dtype)
    results = [run_conv_engine(engine, x, w, b, num_threads=n, **spec) for n in (1, 2, 3)]
    for other in results[1:]:
        assert np.array_equal(results[0].view(np.uint8), other.view(np.uint8))
    assert_conv_matches_reference(results[0], x, w, b, **spec)


def test_conv_and_conv_transpose_share_one_weight_array():
    # The pair reads the same memory: Conv's (M, C/group, k) is ConvTranspose's (C, M/group, k).
    rng = np.random.default_rng(7)
    w = rng.standard_normal((6, 2, 3, 3))
    down = Conv(strides=2, pads=(1, 1, 1, 1), group=2)
    up = down.adjoint((1, 4, 9, 9), w.shape)
    assert isinstance(up, ConvTranspose)
    assert up.output_shape_for(down.output_shape_for((1, 4, 9, 9), w.shape), w.shape) == \
        (1, 4, 9, 9)


# --- stencil blocks ----------------------------------------------------------------

STENCIL_CASES = {
    # (x shape, w shape, params): one input channel per group, last-axis stride 1
    "depthwise_k3": ((2, 4, 13, 40), (4, 1, 3, 3), dict(group=4, pads=(1, 1, 1, 1))),
    "multiplier_4_k5_uneven_pads": ((1, 3, 9, 21), (12, 1, 5, 5),
                                    dict(group=3, pads=(0, 3, 4, 1))),
    "single_channel_band_stride_2": ((1, 1, 17, 33), (1, 1, 3, 4), dict(strides=(2, 1))),
    "dilated": ((1, 2, 15, 50), (2, 1, 3, 3), dict(group=2, dilations=(2, 3),
                                                  pads=(2, 3, 2, 3))),
    "kernel_wider_than_input": ((1, 2, 3, 4), (2, 1, 5, 7), dict(group=2, pads=(2, 3, 2, 3))),
    "3d_depthwise": ((1, 3, 6, 7, 19), (3, 1, 3, 2, 3), dict(group=3, strides=(2, 1, 1),
                                                             pads=(1, 0, 1, 1, 1, 1))),
    "1d_depthwise": ((3, 5, 200), (5, 1, 7), dict(group=5, pads=(3, 3))),
    # more blocks than work items: an item runs blocks of several channels (and, in
    # 3-D, outer taps) in turn, each with its own weights
    "items_span_channels": ((2, 300, 17, 17), (300, 1, 3, 3), dict(group=300, pads=(1, 1, 1, 1))),
    "3d_items_span_channels": ((1, 130, 3, 4, 9), (260, 1, 2, 3, 3),
                               dict(group=130, pads=(1, 1, 1, 0, 1, 1))),
}


@pytest.mark.parametrize("family", [e.split("-", 1)[1] for e in ENGINES
                                    if e.startswith("direct-")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(STENCIL_CASES))
def test_stencil_blocks_match_the_reference_and_the_row_engine(name, dtype, family):
    x_shape, w_shape, params = STENCIL_CASES[name]
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    assert explain(Conv(**params), x_shape, w_shape, dtype).decision.stencil_rows > 0
    y = run_conv_engine(f"direct-{family}", x, w, b, **params)
    assert_conv_matches_reference(y, x, w, b, **params)
    rows = run_conv_engine(f"direct-{family}", x, w, b, overrides=dict(stencil_rows=0),
                           **params)
    np.testing.assert_allclose(y, rows, rtol=1e-5 if dtype == np.float32 else 1e-13,
                               atol=1e-5 if dtype == np.float32 else 1e-13)


def test_stencil_blocks_multiply_padding_by_non_finite_weights():
    # an Inf weight on a tap that reads padding gives NaN there, as the text's zero
    # padding does; a NaN input spoils exactly the outputs whose taps read it
    x = np.ones((1, 2, 6, 40), np.float32)
    x[0, 1, 3, 20] = np.nan
    w = np.ones((2, 1, 3, 3), np.float32)
    w[0, 0, 0, 0] = np.inf
    params = dict(group=2, pads=(1, 1, 1, 1))
    assert explain(Conv(**params), x.shape, w.shape).decision.stencil_rows > 0
    y = Conv(**params).apply(x, w)
    expected = reference_conv(x, w, **params)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    assert np.isnan(y[0, 0, 0]).all() and np.isnan(y[0, 0, :, 0]).all()
    assert np.isnan(y[0, 1]).sum() == 9
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(np.isinf(y), np.isinf(expected))
    np.testing.assert_allclose(y[finite], expected[finite], rtol=1e-6)


def test_stencil_blocks_multiply_outer_axis_padding_by_non_finite_weights():
    # 3-D: an Inf weight on a tap of the first axis that reads padding spoils the
    # outputs of the planes where it does (the stencil skipped such taps: no NaN)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 9, 6, 5, 6))
    w = rng.standard_normal((9, 1, 2, 3, 1))
    w[0, 0, 1, 2, 0] = np.inf
    params = dict(group=9, pads=(2, 2, 2, 1, 1, 1), dilations=(2, 1, 1))
    assert explain(Conv(**params), x.shape, w.shape).decision.stencil_rows > 0
    y = Conv(**params).apply(x, w)
    expected = reference_conv(x, w, **params)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    assert np.isnan(y[0, 0, -1]).all()  # the last plane's second tap reads padding
    finite = np.isfinite(expected)
    np.testing.assert_allclose(y[finite], expected[finite], rtol=1e-12, atol=1e-12)


def test_stencil_blocks_are_not_used_where_they_do_not_apply():
    def rows(x_shape, w_shape, dtype="float32", **params):
        return explain(Conv(**params), x_shape, w_shape, dtype).decision.stencil_rows

    assert rows((1, 8, 30, 30), (8, 1, 3, 3), group=8) == 4
    assert rows((1, 8, 30, 30), (8, 1, 3, 3), group=8, strides=(1, 2)) == 0  # last stride
    assert rows((1, 8, 30, 30), (8, 1, 3, 3), group=8, strides=(2, 1)) == 1  # band stride
    assert rows((1, 8, 30, 30), (8, 2, 3, 3), group=4) == 0  # two input channels per group
    assert rows((1, 2, 30, 30), (16, 1, 3, 3), group=2) == 0  # 8 outputs per group
    assert rows((1, 8, 30, 30), (8, 1, 3, 3), "float16", group=8) == 0  # converted rows


# --- small depthwise maps: channels-last copies ------------------------------------

CHANNELS_LAST_CASES = {
    # (x shape, w shape, params): depthwise, at most CHANNELS_LAST_MAX_OUTPUTS outputs,
    # which depthwise planes do not serve (2-D ones do; see tests/test_planes.py)
    "3d": ((1, 8, 5, 6, 7), (8, 1, 3, 3, 3), dict(group=8, pads=(1,) * 6)),
    "3d_strided_dilated_uneven_pads": ((1, 24, 3, 19, 17), (24, 1, 1, 5, 3),
                                       dict(group=24, strides=(1, 2, 2), dilations=(1, 1, 2),
                                            pads=(0, 2, 1, 0, 3, 0))),
    "2d_kernel_rows_beyond_the_planes_taps": ((1, 16, 3, 40), (16, 1, 1, 33),
                                              dict(group=16, pads=(0, 1, 0, 1))),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CHANNELS_LAST_CASES))
def test_small_depthwise_maps_run_on_channels_last_copies(name, dtype):
    x_shape, w_shape, params = CHANNELS_LAST_CASES[name]
    rng = np.random.default_rng(6)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    layer = Conv(**params)
    assert explain(layer, x_shape, w_shape, dtype).channels_last_copies
    y = layer.apply(x, w, b)
    assert_conv_matches_reference(y, x, w, b, **params)
    out = np.full_like(y, np.nan)
    assert layer.apply(x, w, b, out=out) is out
    np.testing.assert_array_equal(out, y)
    # channel planes a stride apart, and a repeated (remembered) call
    np.testing.assert_array_equal(layer.apply(np.repeat(x, 2, axis=1)[:, ::2], w, b), y)
    np.testing.assert_array_equal(layer.apply(x, w, b), y)
    # a non-finite weight multiplies the padding too, as the text's zeros do
    w[0].flat[0] = np.inf
    with np.errstate(invalid="ignore"):
        expected = reference_conv(x, w, b, **params)
    np.testing.assert_array_equal(np.isnan(layer.apply(x, w, b)), np.isnan(expected))


def test_channels_last_copies_are_not_used_where_they_do_not_apply():
    def copies(x_shape, w_shape, **params):
        return explain(Conv(**params), x_shape, w_shape).channels_last_copies

    assert copies((1, 8, 4, 8, 8), (8, 1, 3, 3, 3), group=8, pads=(1,) * 6)
    assert not copies((1, 8, 5, 8, 8), (8, 1, 3, 3, 3), group=8, pads=(1,) * 6)  # 320 outputs
    assert not copies((1, 8, 16, 16), (8, 1, 3, 3), group=8, pads=(1, 1, 1, 1))  # planes
    assert not copies((1, 4, 8, 8), (4, 1, 3, 3), group=4)  # fewer channels than lanes
    assert not copies((1, 8, 8, 8), (16, 1, 3, 3), group=8)  # two outputs per channel
    assert not copies((1, 8, 8, 8), (8, 2, 3, 3), group=4)  # not depthwise
    assert not copies((1, 8, 64), (8, 1, 3), group=8)  # 1-D rows: the stencil's own
    assert not copies((1, 8, 8, 8), (8, 1, 3, 3), group=8, data_format="NXC")  # already
    # rows of 128 positions x 2100 channels: beyond CHANNEL_ROW_MAX, no channels-last rows
    assert not copies((1, 2100, 2, 128), (2100, 1, 1, 1), group=2100)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("width", [15, 16, 17])
@pytest.mark.parametrize("pads", [(0, 0), (1, 1), (2, 0), (0, 2)])
def test_stride_2_tiles_fill_both_residues_in_one_pass(dtype, width, pads):
    # the GEMM engine's tile buffers split each input row into its even and odd
    # residues in one pass; odd and even widths and every border must match
    rng = np.random.default_rng(width)
    x = rng.standard_normal((1, 6, 5, width)).astype(dtype)
    w = rng.standard_normal((16, 6, 3, 3)).astype(dtype)
    params = dict(strides=(2, 2), pads=(1, pads[0], 0, pads[1]))
    layer = Conv(**params)
    assert explain(layer, x, w).decision.engine == "gemm"
    assert_conv_matches_reference(layer.apply(x, w), x, w, **params)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("case", ["contiguous", "sliced rows", "3-D", "two K chunks"])
def test_pointwise_tiles_copy_whole_rows_per_channel(dtype, case, monkeypatch):
    # a 1x1 Conv over channel planes a page or more apart copies each channel's
    # tile rows as one run when they are whole, consecutive rows of x (tiles of
    # some of the 40 rows here), else row by row (kernels that pack B panels:
    # the others read such planes in place, test_input_in_place.py)
    monkeypatch.setattr(_dispatch, "split_512_fma", lambda: False)
    _engine._execution.cache_clear()
    rng = np.random.default_rng(len(case))
    shape = {"contiguous": (2, 8, 40, 36), "sliced rows": (2, 8, 40, 38),
             "3-D": (1, 8, 3, 40, 36), "two K chunks": (1, 200, 40, 36)}[case]
    x = rng.standard_normal(shape).astype(dtype)
    if case == "sliced rows":
        x = x[..., 1:37]  # rows 36 long, 38 apart
    w = rng.standard_normal((16, shape[1]) + (1,) * (x.ndim - 2)).astype(dtype)
    b = rng.standard_normal(16).astype(dtype)
    layer = Conv()
    report = explain(layer, x, w)
    assert report.decision.engine == "gemm" and report.plan.stacks["row_tiles"][0] > 1
    if not report.decision.blocking.packs_b:  # NEON: no B packing on any CPU
        pytest.skip("this CPU's kernels pack no B panels, so such planes are read in place "
                    "(test_input_in_place.py)")
    assert not report.plan.stacks["identity"].any()
    y = layer.apply(x, w, b)
    _engine._execution.cache_clear()
    assert_conv_matches_reference(y, x, w, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape, w_shape, pads, strides", [
    ((2, 128, 9, 13), (40, 128, 1, 1), (0, 0, 0, 0), (1, 1)),     # whole rows, a 5-column tail
    ((1, 96, 28, 28), (512, 96, 1, 1), (0, 0, 0, 0), (1, 1)),     # whole panels only
    ((1, 64, 7, 6), (36, 64, 1, 1), (0, 0, 0, 0), (1, 1)),        # a half panel's tail
    ((1, 33, 17, 11), (24, 33, 1, 1), (0, 0, 0, 0), (2, 2)),      # decimated rows
    ((3, 48, 301), (30, 48, 5), (2, 2), (1,)),                    # 1-D: one grid row per tile
    ((1, 24, 5, 6, 7), (20, 24, 1, 1, 1), (0,) * 6, (1, 1, 1)),   # leading axes
])
def test_products_computed_in_y_stay_inside_their_outputs(x_shape, w_shape, pads, strides, dtype):
    # one-phase Conv stacks whose product columns are consecutive outputs are
    # multiplied straight into y (rows_in_y): the partial last panel goes through
    # the product, the bias is added in place, and nothing is written past y
    rng = np.random.default_rng(sum(x_shape))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    expected = reference_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                              pads=pads, strides=strides)
    first = None
    for threads in (1, 2, 3):
        layer = Conv(pads=pads, strides=strides, num_threads=threads)
        size = expected.size
        guarded = np.full(size + 64, 7.0, dtype)
        out = guarded[32:32 + size].reshape(expected.shape)
        got = layer.apply(x, w, b, out=out)
        assert got is out
        assert np.all(guarded[:32] == 7.0) and np.all(guarded[32 + size:] == 7.0)
        tolerance = 2e-6 if dtype == np.float32 else 1e-13
        scale = np.abs(expected).max()
        assert np.abs(got - expected).max() <= tolerance * scale
        if first is None:
            first = got.copy()
        else:
            np.testing.assert_array_equal(got, first)  # bitwise across thread counts
