"""Bound layers (``layer.bind(w, b)``, convt/_bound.py): bitwise the results of
``apply`` on every route (packed GEMM, col2im from made panels, Conv weights
packed instead of streamed, Winograd, direct, depthwise planes), dtypes, layouts,
bias, out= and threads, and against the float64 reference; the copy made at bind
(edits of w do not reach it, it cannot be made writeable), packings kept with it
and bounded, found without the weight cache, released with it; pickling, the
adjoint pair, and errors."""

import gc
import pickle

import numpy as np
import pytest

from _helpers import FAMILIES, relative_error, use_kernel_set
from convt import BoundLayer, Conv, ConvTranspose, _col2im, _dispatch, _weight_cache, explain
from convt._reference import reference_conv, reference_conv_transpose


def _operands(x_shape, w_shape, bias_channels, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(dtype)
    b = rng.standard_normal(bias_channels).astype(dtype)
    return x, w, b


def _exact(layer, x, w, b):
    reference = reference_conv if isinstance(layer, Conv) else reference_conv_transpose
    return reference(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                     **layer.get_params())


# the kernel sets with transposed kernels (gemm_t), which a Conv's streamed weights need
TRANSPOSED = tuple(family.name for family in _dispatch.families()
                   if family.name in FAMILIES and family.f32.has(_dispatch.SET_TRANSPOSED))


@pytest.fixture
def small_routes(monkeypatch):
    """col2im and streamed Conv weights on small, fast layers."""
    monkeypatch.setattr(_dispatch, "COL2IM_MIN_WEIGHT_BYTES", 4096)
    monkeypatch.setattr(_dispatch, "COL2IM_MIN_WEIGHT_BYTES_PER_POSITION", 64)
    monkeypatch.setattr(_dispatch, "STREAM_MIN_WEIGHT_BYTES", 0)
    monkeypatch.setattr(_dispatch, "STREAM_MIN_WEIGHT_BYTES_AVX512", 0)
    monkeypatch.setattr(_dispatch, "STREAM_MAX_POSITIONS", 1 << 20)


# name -> (layer, x shape, w shape, output channels, the route explain names)
CASES = {
    "gemm k4s2": (ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1)), (2, 24, 12, 10),
                  (24, 20, 4, 4), 20, "gemm"),
    "col2im 4x4": (ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1)), (1, 96, 4, 4),
                   (96, 40, 4, 4), 40, "col2im"),
    "col2im groups": (ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), group=4), (1, 64, 6, 6),
                      (64, 13, 4, 4), 52, "col2im"),
    "col2im 1-D k16s8": (ConvTranspose(strides=(8,), pads=(4, 4)), (1, 64, 8), (64, 36, 16),
                         36, "col2im"),
    "conv streamed": (Conv(pads=(1, 1, 1, 1)), (1, 64, 4, 4), (256, 64, 3, 3), 256, "streamed"),
    "conv gemm s2": (Conv(strides=(2, 2), pads=(1, 1, 1, 1)), (1, 16, 23, 17), (24, 16, 3, 3),
                     24, "gemm"),
    "winograd": (Conv(pads=(1, 1, 1, 1)), (1, 64, 24, 24), (64, 64, 3, 3), 64, "winograd"),
    "direct": (ConvTranspose(), (1, 1, 256), (1, 1, 2), 1, "direct"),
    "depthwise planes": (Conv(pads=(1, 1, 1, 1), group=16), (1, 16, 40, 40), (16, 1, 3, 3), 16,
                         "plane"),
}


def _route(layer, x_shape, w_shape, dtype):
    found = explain(layer, x_shape, w_shape, dtype)
    if found.plane is not None:
        return "plane"
    if found.winograd is not None:
        return "winograd"
    if found.col2im is not None:
        return "col2im"
    if found.streamed:
        return "streamed"
    return found.decision.engine


@pytest.mark.parametrize("name", list(CASES))
def test_bound_results_are_bitwise_those_of_apply(request, name):
    layer, x_shape, w_shape, channels, route = CASES[name]
    if route in ("col2im", "streamed"):
        request.getfixturevalue("small_routes")
    x, w, b = _operands(x_shape, w_shape, channels)
    if route == "streamed" and (explain(layer, x_shape, w_shape, np.float32).decision.kernel_set
                                not in TRANSPOSED):
        route = "gemm"  # streaming needs transposed kernels (gemm_t); other sets pack
    assert _route(layer, x_shape, w_shape, np.float32) == route
    for bias in (b, None):
        expected = layer.apply(x, w, bias)
        bound = layer.bind(w, bias)
        for _ in range(3):  # the first call packs; the next ones use what it kept
            np.testing.assert_array_equal(bound(x), expected)
        # the GEMM and Winograd pack (a streamed Conv packs too), col2im makes its panels
        assert bool(bound._fixed.packings) == (route in ("gemm", "streamed", "col2im",
                                                         "winograd"))
        assert relative_error(bound(x), _exact(layer, x, w, b if bias is not None else 0 * b)) < 2e-6


@pytest.mark.parametrize("name", ["col2im 4x4", "conv streamed", "gemm k4s2"])
@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_other_dtypes(request, name, dtype):
    layer, x_shape, w_shape, channels, route = CASES[name]
    if route in ("col2im", "streamed"):
        request.getfixturevalue("small_routes")
    x, w, b = _operands(x_shape, w_shape, channels, dtype)
    bound = layer.bind(w, b)
    np.testing.assert_array_equal(bound(x), layer.apply(x, w, b))
    np.testing.assert_array_equal(bound(x), layer.apply(x, w, b))


def test_threads_out_and_layouts(small_routes):
    x, w, b = _operands((1, 96, 4, 4), (96, 40, 4, 4), 40)
    params = dict(strides=(2, 2), pads=(1, 1, 1, 1))
    expected = ConvTranspose(**params).apply(x, w, b)
    for threads in (1, 2, 3):
        bound = ConvTranspose(num_threads=threads, **params).bind(w, b)
        out = np.empty_like(expected)
        assert bound(x, out=out) is out
        np.testing.assert_array_equal(out, expected)
    # channels-last data and an XOI filter (w's memory order kept in the copy)
    nxc = ConvTranspose(data_format="NXC", filter_format="XOI", **params)
    x_nxc, w_xoi = np.moveaxis(x, 1, -1).copy(), np.moveaxis(w, (0, 1), (-1, -2)).copy()
    np.testing.assert_array_equal(nxc.bind(w_xoi, b)(x_nxc), nxc.apply(x_nxc, w_xoi, b))
    assert relative_error(nxc.bind(w_xoi, b)(x_nxc), np.moveaxis(expected, 1, -1)) < 2e-6


def test_the_weights_are_copied_once_and_read_only(small_routes):
    x, w, b = _operands((1, 96, 4, 4), (96, 40, 4, 4), 40)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    expected = layer.apply(x, w, b)
    bound = layer.bind(w, b)
    w[...] = 0  # edits of the caller's arrays do not reach the bound layer
    b[...] = 0
    layer.set_params(strides=(1, 1))
    np.testing.assert_array_equal(bound(x), expected)
    assert bound.layer.strides == (2, 2)
    for array in (bound.weights, bound.bias):
        assert not array.flags.writeable
        with pytest.raises(ValueError):
            array.flags.writeable = True
        with pytest.raises(ValueError):
            array[...] = 1


def test_packings_are_kept_with_the_weights_bounded_and_released():
    x, w, _ = _operands((1, 8, 6, 6), (8, 4, 3, 3), 4)
    layer = ConvTranspose(strides=(2, 2))
    _weight_cache.clear()
    bound = layer.bind(w)
    fixed = _weight_cache.fixed_weights_of(bound.weights)
    assert fixed is not None and fixed.weights is bound._fixed.weights
    for size in range(3, 10):  # one plan per input shape
        x = _operands((1, 8, size, size), w.shape, 4, seed=size)[0]
        np.testing.assert_array_equal(bound(x), layer.apply(x, w))
        assert 1 <= len(fixed.packings) <= _weight_cache.FIXED_PACKINGS
    # the weight cache holds only apply's packings, never the bound layer's
    held = _weight_cache.held_bytes()
    bound(x)
    assert _weight_cache.held_bytes() == held
    # a writeable array of the same bytes, or a read-only copy, is not trusted
    assert _weight_cache.fixed_weights_of(w) is None
    other = w.copy()
    other.flags.writeable = False
    assert _weight_cache.fixed_weights_of(other) is None
    address = bound._fixed.weights.__array_interface__["data"][0]
    del bound, fixed
    gc.collect()
    assert address not in _weight_cache._fixed


def test_col2im_reads_blocks_made_once(small_routes, monkeypatch):
    x, w, b = _operands((2, 64, 6, 6), (64, 13, 4, 4), 52)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), group=4)
    made = []
    original = _col2im.made_blocks

    def spy(col2im, grouped, fixed):
        blocks = original(col2im, grouped, fixed)
        made.append(blocks)
        return blocks

    monkeypatch.setattr(_col2im, "made_blocks", spy)
    layer.apply(x, w, b)
    assert made == []  # apply's weights may change: copied per call
    bound = layer.bind(w, b)
    np.testing.assert_array_equal(bound(x), layer.apply(x, w, b))
    np.testing.assert_array_equal(bound(x), layer.apply(x, w, b))
    assert len(made) == 2 and made[1] is made[0]  # made once, then reused
    assert not made[0].flags.writeable and made[0].size == w.size


@pytest.mark.parametrize("positions", [(2, 2), (2, 3), (4, 4), (5, 7), (6, 8)])
def test_col2im_positions_in_panels(small_routes, monkeypatch, positions):
    """Positions padded to whole panels of the set's NR, short last column blocks and
    items, K chunks of 16 input channels (the last shorter)."""
    monkeypatch.setattr(_dispatch, "COL2IM_DEPTH", 16)
    x, w, b = _operands((3, 40) + positions, (40, 7, 3, 3), 7, np.float64)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 0, 1, 1))
    assert _route(layer, x.shape, w.shape, np.float64) == "col2im"
    bound = layer.bind(w, b)
    np.testing.assert_array_equal(bound(x), layer.apply(x, w, b))
    assert relative_error(bound(x), _exact(layer, x, w, b)) < 1e-14


def test_pickle_and_repr():
    x, w, b = _operands((1, 4, 5, 5), (4, 3, 3, 3), 3)
    bound = ConvTranspose(strides=(2, 2)).bind(w, b)
    copy = pickle.loads(pickle.dumps(bound))
    np.testing.assert_array_equal(copy(x), bound(x))
    assert not copy.weights.flags.writeable and not copy.bias.flags.writeable
    assert _weight_cache.fixed_weights_of(copy.weights) is copy._fixed
    assert repr(bound) == ("ConvTranspose(strides=(2, 2)).bind(w: float32 (4, 3, 3, 3), "
                           "b: float32 (3,))")
    assert bound.output_shape_for(x.shape) == bound(x).shape


@pytest.mark.parametrize("forward", [True, False])
def test_adjoint_pair_shares_the_weights(forward):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 4, 3, 3))
    layer = (Conv(strides=(2, 2), pads=(1, 1, 1, 1)) if forward
             else ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1)))
    x_shape = (2, 4 if forward else 6, 11, 9)
    bound = layer.bind(w, rng.standard_normal(6 if forward else 4))
    adjoint = bound.adjoint(x_shape)
    assert isinstance(adjoint, BoundLayer) and adjoint.bias is None
    assert np.shares_memory(adjoint.weights, bound.weights)
    x = rng.standard_normal(x_shape)
    y = rng.standard_normal(bound.output_shape_for(x_shape))
    linear = layer.bind(w)  # the bias is not part of the linear map
    left, right = np.vdot(linear(x), y), np.vdot(x, adjoint(y))
    assert abs(left - right) <= 1e-12 * np.abs(x).sum() * np.abs(y).sum() * np.abs(w).max()
    np.testing.assert_array_equal(adjoint(y), layer.adjoint(x_shape, w.shape).apply(y, w))


def test_errors_name_the_operand():
    layer = ConvTranspose()
    with pytest.raises(TypeError, match="w"):
        layer.bind(np.ones((1, 1, 3), dtype=np.int32))
    with pytest.raises(TypeError, match="b.dtype=float64"):
        layer.bind(np.ones((1, 1, 3), dtype=np.float32), np.ones(1))
    bound = layer.bind(np.ones((2, 1, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="x"):
        bound(np.ones((1, 3, 5), dtype=np.float32))  # 3 input channels for a w of 2
    with pytest.raises(TypeError, match="dtype"):
        bound(np.ones((1, 2, 5), dtype=np.float64))


@pytest.mark.parametrize("name", ["col2im 4x4", "conv streamed", "winograd", "gemm k4s2"])
def test_explain_a_bound_layer(request, name):
    layer, x_shape, w_shape, _, route = CASES[name]
    request.getfixturevalue("small_routes")
    w = np.ones(w_shape, dtype=np.float64)
    bound = layer.bind(w)
    unbound, found = explain(layer, x_shape, w_shape, np.float64), explain(bound, x_shape)
    # the same problem and engine; the weights' shape and dtype from the bound copy
    assert found.bound and not unbound.bound
    assert found.problem == unbound.problem and found.problem.dtype == np.float64
    assert found.decision.engine == unbound.decision.engine
    assert (found.col2im is None) == (unbound.col2im is None)
    assert (found.winograd is None) == (unbound.winograd is None)
    assert not found.streamed  # a bound layer packs what apply would stream
    assert unbound.streamed == (route == "streamed"
                                and unbound.decision.kernel_set in TRANSPOSED)
    report = str(found)
    assert "bound weights: packed on the first call" in report
    if found.col2im is not None:
        assert "blocks made on the first call" in report
        assert "w read once per call" in str(unbound)
    assert explain(bound, x_shape, w_shape).bound  # the bound shape, given again
    with pytest.raises(ValueError, match=r"w_shape must be the bound weights' shape"):
        explain(bound, x_shape, (1,) + tuple(w_shape[1:]))


def test_explain_errors():
    with pytest.raises(TypeError, match="w_shape is required unless layer is a BoundLayer"):
        explain(ConvTranspose(), (1, 1, 8))
    with pytest.raises(TypeError, match="layer must be a ConvTranspose, a Conv or a BoundLayer"):
        explain(object(), (1, 1, 8), (1, 1, 3))


def _one_node_model(op_type, w, b, initializers, **attributes):
    from onnx import TensorProto, helper, numpy_helper

    inputs = ["X", "W"] + (["B"] if b is not None else [])
    stored = [numpy_helper.from_array(array, name)
              for name, array in (("W", w), ("B", b)) if name in initializers]
    graph = helper.make_graph(
        [helper.make_node(op_type, inputs, ["Y"], **attributes)], "layer",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], stored)
    return helper.make_model(graph)


@pytest.mark.parametrize("op_type", ["ConvTranspose", "Conv"])
def test_onnx_from_model_binds_the_initializers(op_type):
    pytest.importorskip("onnx")
    from convt.onnx import from_model, run_node

    x, w, b = _operands((1, 6, 9, 9), (6, 6, 3, 3), 6)
    model = _one_node_model(op_type, w, b, ("W", "B"), strides=[2, 2], pads=[1, 1, 1, 1])
    bound = from_model(model)
    assert isinstance(bound, BoundLayer)
    np.testing.assert_array_equal(bound(x), run_node(model, [x])[0])
    layer = (Conv if op_type == "Conv" else ConvTranspose)(strides=2, pads=(1, 1, 1, 1))
    assert relative_error(bound(x), _exact(layer, x, w, b)) < 2e-6


def test_onnx_from_model_errors():
    pytest.importorskip("onnx")
    from convt.onnx import from_model

    x, w, b = _operands((1, 2, 5, 5), (2, 2, 3, 3), 2)
    with pytest.raises(ValueError, match=r"initializers, which have no \['B'\]"):
        from_model(_one_node_model("Conv", w, b, ("W",)))
    model = _one_node_model("Conv", w, None, ("W",))
    with pytest.raises(TypeError, match="ModelProto; got NodeProto"):
        from_model(model.graph.node[0])


@pytest.mark.parametrize("forward", [True, False])
def test_as_linear_operator(forward):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 2, 3, 2))
    layer = (Conv(strides=(2, 1), pads=(1, 0, 1, 1)) if forward
             else ConvTranspose(strides=(2, 1), pads=(1, 0, 1, 1)))
    x_shape = (2, 2 if forward else 3, 7, 5)
    bound = layer.bind(w)
    operator = bound.as_linear_operator(x_shape)
    y_shape = bound.output_shape_for(x_shape)
    assert operator.shape == (np.prod(y_shape), np.prod(x_shape)) and operator.dtype == w.dtype
    x = rng.standard_normal(x_shape)
    r = rng.standard_normal(y_shape)
    np.testing.assert_array_equal(operator.matvec(x.ravel()), layer.apply(x, w).ravel())
    np.testing.assert_array_equal(operator.rmatvec(r.ravel()),
                                  layer.adjoint(x_shape, w.shape).apply(r, w).ravel())
    # the dense matrix from matmat is the transpose of the one from rmatmat
    dense = operator.matmat(np.eye(operator.shape[1]))
    np.testing.assert_allclose(operator.rmatmat(np.eye(operator.shape[0])), dense.T,
                               rtol=1e-13, atol=1e-13)
    with pytest.raises(ValueError, match="without a bias"):
        layer.bind(w, rng.standard_normal(3 if forward else 2)).as_linear_operator(x_shape)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", ["col2im 4x4", "col2im groups", "gemm k4s2", "conv streamed"])
def test_every_kernel_set(request, monkeypatch, family, name):
    """Each set's own blocking (MR rows, NR positions) for the made blocks and packings."""
    use_kernel_set(monkeypatch, family)
    layer, x_shape, w_shape, channels, route = CASES[name]
    if route in ("col2im", "streamed"):
        request.getfixturevalue("small_routes")
    # sets without transposed kernels pack what the others stream
    assert _route(layer, x_shape, w_shape, np.float32) in (route, "gemm")
    for dtype in (np.float32, np.float64):
        x, w, b = _operands(x_shape, w_shape, channels, dtype)
        bound = layer.bind(w, b)
        expected = layer.apply(x, w, b)
        np.testing.assert_array_equal(bound(x), expected)
        np.testing.assert_array_equal(bound(x), expected)
