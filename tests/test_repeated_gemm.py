"""The compiled shortcut of repeated GEMM calls (convt._kernels.RepeatedGemm, made by
convt._engine.repeated): the results of the Python path bit for bit, every change
of the weights seen, and the weight cache's rules (budget, eviction, memory) kept."""

import gc
import weakref

import numpy as np
import pytest

from convt import Conv, ConvTranspose, _frontend, _weight_cache, explain
from convt._compiled import load
from convt._reference import reference_conv, reference_conv_transpose

# (operator, parameters, x shape, w shape): GEMM-engine calls of either operator
CASES = dict(
    transpose_k4s2=(ConvTranspose, dict(strides=(2, 2), pads=(1, 1, 1, 1)),
                    (1, 16, 8, 8), (16, 8, 4, 4)),
    transpose_gaps=(ConvTranspose, dict(strides=(3, 3), group=2),  # outputs no tap reaches
                    (2, 6, 5, 4), (6, 4, 2, 2)),
    conv_k3=(Conv, dict(pads=(1, 1, 1, 1)), (1, 8, 8, 8), (8, 8, 3, 3)),
    conv_strided_dilated=(Conv, dict(strides=(2, 1), dilations=(2, 2), pads=(3, 1, 0, 2)),
                          (2, 12, 20, 11), (20, 12, 3, 2)),
    conv_grouped_3d=(Conv, dict(group=2, pads=(1, 0, 1, 0, 1, 0)),
                     (1, 8, 5, 6, 4), (6, 4, 3, 2, 2)),
)
TOLERANCE = {np.float16: 2e-2, np.float32: 1e-5, np.float64: 1e-12}


def _operands(name, dtype, seed=0):
    operator, params, x_shape, w_shape = CASES[name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = (rng.standard_normal(w_shape) / 4).astype(dtype)
    channels = w_shape[0] if operator is Conv else w_shape[1] * params.get("group", 1)
    return operator(**params), x, w, rng.standard_normal(channels).astype(dtype)


def _expected(layer, x, w, b):
    reference = reference_conv if isinstance(layer, Conv) else reference_conv_transpose
    return reference(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                     **{k: v for k, v in layer.get_params().items() if k != "num_threads"})


def _shortcut(layer, x, w, b):
    remembered = _frontend._CALLS[_frontend.call_key(layer, x, w, b, None)]
    assert type(remembered) is load().RepeatedGemm
    return remembered


@pytest.fixture
def python_calls(monkeypatch):
    """The calls the Python path (the remembered call) served, counted."""
    served = []
    original = _frontend.RememberedCall.__call__

    def counted(self, *arguments):
        served.append(1)
        return original(self, *arguments)

    monkeypatch.setattr(_frontend.RememberedCall, "__call__", counted)
    return served


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_repeated_calls_give_the_python_paths_results(name, dtype, python_calls):
    _weight_cache.clear()
    layer, x, w, b = _operands(name, dtype)
    for bias in (b, None):
        first = layer.apply(x, w, bias)
        shortcut = _shortcut(layer, x, w, bias)
        served = len(python_calls)
        again = layer.apply(x, w, bias)
        assert len(python_calls) == served  # the shortcut served it
        np.testing.assert_array_equal(again, first)
        np.testing.assert_array_equal(shortcut.slow(x, w, bias, None), first)
        assert again.dtype == x.dtype and again is not first
        expected = _expected(layer, x, w, b if bias is not None else 0 * b)
        np.testing.assert_allclose(again, expected, rtol=TOLERANCE[dtype],
                                   atol=TOLERANCE[dtype] * np.abs(expected).max())


@pytest.mark.parametrize("name", sorted(CASES))
def test_weights_changed_between_calls_are_used(name, python_calls):
    layer, x, w, b = _operands(name, np.float32)
    layer.apply(x, w, b)
    layer.apply(x, w, b)
    for change in range(3):
        if change == 0:
            w[(0,) * w.ndim] += 1.0  # one weight edited in place
        elif change == 1:
            w = -w  # other weights of the same shape
        else:
            w.reshape(-1)[-1] = 0.0  # the last byte compared
        y = layer.apply(x, w, b)
        expected = _expected(layer, x, w, b)
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
        served = len(python_calls)
        np.testing.assert_array_equal(layer.apply(x, w, b), y)
        assert len(python_calls) == served


@pytest.mark.parametrize("name", ["transpose_gaps", "conv_k3"])
def test_repeated_calls_into_out_are_served_and_checked(name, python_calls):
    """A usable ``out`` is filled by the shortcut; every other ``out`` reaches the
    remembered call, which raises as on a first call."""
    layer, x, w, b = _operands(name, np.float32)
    expected = layer.apply(x, w, b)
    out = np.full_like(expected, np.nan)
    assert layer.apply(x, w, b, out=out) is out
    served = len(python_calls)
    out[...] = np.nan
    assert layer.apply(x, w, b, out=out) is out
    assert len(python_calls) == served
    np.testing.assert_array_equal(out, expected)
    other = np.empty_like(expected)
    assert layer.apply(x, w, b, out=other) is other  # another array of the same layout
    np.testing.assert_array_equal(other, expected)
    assert len(python_calls) == served
    read_only = np.empty_like(expected)
    read_only.flags.writeable = False
    wrong = [(read_only, "writeable"), (np.empty_like(expected, dtype=np.float64), "dtype"),
             (np.empty(expected.shape[::-1], np.float32).T, "C-contiguous")]
    for bad, message in wrong:
        with pytest.raises(ValueError, match=message):
            layer.apply(x, w, b, out=bad)
    buffer = np.zeros(x.size + expected.size, np.float32)
    x_inside = buffer[:x.size].reshape(x.shape)
    x_inside[...] = x
    overlapping = buffer[x.size - 1:-1].reshape(expected.shape)
    layer.apply(x_inside, w, b, out=buffer[x.size:].reshape(expected.shape))
    layer.apply(x_inside, w, b, out=buffer[x.size:].reshape(expected.shape))
    with pytest.raises(ValueError, match="out must not share memory with x"):
        layer.apply(x_inside, w, b, out=overlapping)


def test_threads_and_out_give_the_same_results():
    layer, x, w, b = _operands("conv_k3", np.float32)
    y = layer.apply(x, w, b)
    for threads in (None, 1, 2, 3):
        other = Conv(**layer.get_params() | {"num_threads": threads})
        for _ in range(3):
            np.testing.assert_array_equal(other.apply(x, w, b), y)
    out = np.empty_like(y)
    assert layer.apply(x, w, b, out=out) is out
    np.testing.assert_array_equal(out, y)


def test_a_zero_budget_between_calls_turns_the_cache_off(monkeypatch, python_calls):
    layer, x, w, b = _operands("transpose_k4s2", np.float32)
    y = layer.apply(x, w, b)
    layer.apply(x, w, b)
    monkeypatch.setenv(_weight_cache.BUDGET_VARIABLE, "0")
    served = len(python_calls)
    for _ in range(3):
        np.testing.assert_array_equal(layer.apply(x, w, b), y)
    assert len(python_calls) == served + 3  # no remembered packing is used


def test_evicted_weights_are_not_held_by_the_shortcut(python_calls):
    layer, x, w, b = _operands("conv_k3", np.float32)
    y = layer.apply(x, w, b)
    layer.apply(x, w, b)
    packed = weakref.ref(_weight_cache._latest[2])
    _weight_cache.clear()
    gc.collect()
    assert packed() is None  # the shortcut still holds the entry, not its memory
    served = len(python_calls)
    np.testing.assert_array_equal(layer.apply(x, w, b), y)
    assert len(python_calls) == served + 1  # packed and remembered again
    np.testing.assert_array_equal(layer.apply(x, w, b), y)
    assert len(python_calls) == served + 1


def test_layers_taking_turns_keep_the_caches_order(python_calls):
    """Two layers of one plan in turn: each call's weights become the most recent
    entry through the Python path, as without the shortcut."""
    _weight_cache.clear()
    layer, x, w, b = _operands("conv_k3", np.float32)
    other = -w
    expected = [layer.apply(x, weights, b) for weights in (w, other)]
    for _ in range(3):
        for weights, y in zip((w, other), expected):
            np.testing.assert_array_equal(layer.apply(x, weights, b), y)
            assert _weight_cache._latest is not None
            np.testing.assert_array_equal(_weight_cache._latest[1], weights)


def _streamed_case(seed):
    """A Conv whose weights apply streams from w (512 -> 512 3x3 on 7x7), x and w."""
    layer = Conv(pads=(1, 1, 1, 1))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 512, 7, 7)).astype(np.float32)
    w = (rng.standard_normal((512, 512, 3, 3)) / 64).astype(np.float32)
    if not explain(layer, x.shape, w.shape).streamed:
        pytest.skip("this machine's kernel set packs these weights (no transposed kernels)")
    return layer, x, w


def test_streamed_weights_are_read_on_every_call(python_calls):
    layer, x, w = _streamed_case(3)
    y = layer.apply(x, w)
    served = len(python_calls)
    np.testing.assert_array_equal(layer.apply(x, w), y)
    w[7, 100, 1, 1] += 1.0
    changed = layer.apply(x, w)
    assert len(python_calls) == served
    expected = reference_conv(x.astype(np.float64), w.astype(np.float64), pads=(1, 1, 1, 1))
    np.testing.assert_allclose(changed, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    assert not np.array_equal(changed, y)


def test_bound_layers_of_streamed_weights_use_their_packing(python_calls):
    """Weights that apply streams from w are packed once by a bound layer, and its
    repeated calls compute from that packing (as the Python path does), not from
    the weights again: a packing altered behind the layer's back shows in the
    result, which it would not if the call streamed."""
    layer, x, w = _streamed_case(5)
    expected = layer.apply(x, w)
    bound = layer.bind(w)
    np.testing.assert_array_equal(bound(x), expected)
    served = len(python_calls)
    np.testing.assert_array_equal(bound(x), expected)  # the shortcut, bit for bit
    assert len(python_calls) == served
    packed = next(iter(bound._fixed.packings.values()))[1]
    packed.flags.writeable = True  # (it owns its memory)
    packed[...] = 0  # what the packing holds is what the call uses
    assert not bound(x).any()
    assert len(python_calls) == served


PLANE_CASES = dict(
    planes=((1, 32, 16, 16), (32, 1, 3, 3), dict(group=32, pads=(1, 1, 1, 1))),
    channels_side_by_side=((2, 96, 14, 14), (96, 1, 5, 5),
                           dict(group=96, strides=(2, 2), pads=(2, 2, 2, 2))),
    multiplier_2=((1, 8, 20, 9), (16, 1, 3, 3), dict(group=8, dilations=(2, 1))),
)


@pytest.mark.parametrize("threads", [None, 1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(PLANE_CASES))
def test_repeated_depthwise_planes_give_the_python_paths_results(name, dtype, threads,
                                                                 python_calls):
    x_shape, w_shape, params = PLANE_CASES[name]
    layer = Conv(num_threads=threads, **params)
    assert explain(layer, x_shape, w_shape, dtype).plane is not None
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    for bias in (b, None):
        first = layer.apply(x, w, bias)
        shortcut = _frontend._CALLS[_frontend.call_key(layer, x, w, bias, None)]
        assert type(shortcut) is load().RepeatedPlanes
        served = len(python_calls)
        again = layer.apply(x, w, bias)
        assert len(python_calls) == served
        np.testing.assert_array_equal(again, first)
        np.testing.assert_array_equal(shortcut.slow(x, w, bias, None), first)
        w[0, 0, 0, 0] += 1.0  # weights are read on every call
        expected = reference_conv(x, w, bias, **params)
        np.testing.assert_allclose(layer.apply(x, w, bias), expected,
                                   rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


def test_calls_of_other_engines_keep_the_python_path():
    """col2im calls keep the Python path (as Winograd, folded and channels-last ones do)."""
    x = np.ones((1, 128, 8, 8), np.float32)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    w = np.ones((128, 64, 4, 4), np.float32)
    assert explain(layer, x.shape, w.shape).col2im is not None
    layer.apply(x, w)
    assert type(_frontend._CALLS[_frontend.call_key(layer, x, w, None, None)]) is \
        _frontend.RememberedCall


def test_python_threads_calling_one_layer_get_their_own_weights_results():
    """Threads share the layer's shortcut and the cache's entries while each call's
    engine runs without the GIL: every call still multiplies its own weights."""
    import threading

    layer, x, w, b = _operands("conv_k3", np.float32)
    weights = [w * scale for scale in (1.0, -2.0, 0.5)]
    expected = [layer.apply(x, weights_i, b) for weights_i in weights]
    failures = []

    def work(seed):
        order = np.random.default_rng(seed).integers(0, len(weights), 60)
        for index in order:
            if not np.array_equal(layer.apply(x, weights[index], b), expected[index]):
                failures.append(index)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


@pytest.mark.parametrize("name", ["transpose_k4s2", "conv_grouped_3d"])
def test_bound_layers_use_their_kept_packing(name, python_calls):
    """A bound layer's weights (fixed, read-only) are served with the packing kept
    with them, found without comparing bytes: the results of apply, bit for bit."""
    layer, x, w, b = _operands(name, np.float32)
    expected = layer.apply(x, w, b)
    bound = layer.bind(w, b)
    np.testing.assert_array_equal(bound(x), expected)
    served = len(python_calls)
    for _ in range(3):
        np.testing.assert_array_equal(bound(x), expected)
    assert len(python_calls) == served
    w[(0,) * w.ndim] += 1.0  # the bound layer keeps its own copy
    np.testing.assert_array_equal(bound(x), expected)
    packings = weakref.ref(next(iter(bound._fixed.packings.values()))[1])
    address = bound._fixed.weights.__array_interface__["data"][0]
    del bound
    gc.collect()
    assert address not in _weight_cache._fixed and packings() is None  # the shortcut holds neither


def test_every_repeated_call_resolves_its_threads_through_dispatch(monkeypatch):
    """The default thread count follows the machine's load call by call, and the
    benchmarks count what calls resolve: each repeated call asks
    convt._dispatch.resolve_threads, as the Python path does."""
    from convt import _dispatch

    resolved = []
    original = _dispatch.resolve_threads

    def counted(*arguments):
        resolved.append(original(*arguments))
        return resolved[-1]

    gemm, x, w, b = _operands("conv_k3", np.float32)
    planes = Conv(group=32, pads=(1, 1, 1, 1))
    x_planes, w_planes = np.ones((1, 32, 16, 16), np.float32), np.ones((32, 1, 3, 3), np.float32)
    gemm.apply(x, w, b)
    planes.apply(x_planes, w_planes)
    monkeypatch.setattr(_dispatch, "resolve_threads", counted)
    for _ in range(3):
        gemm.apply(x, w, b)
        planes.apply(x_planes, w_planes)
    assert len(resolved) == 6 and set(resolved) == {1}
