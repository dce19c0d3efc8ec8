"""Packed weights remembered between calls are reused only for bitwise-equal weights."""

import numpy as np
import pytest

from convt import Conv, ConvTranspose, _weight_cache
from convt._reference import reference_conv, reference_conv_transpose

# a layer the GEMM engine serves (many multiply-adds per output)
X_SHAPE, W_SHAPE = (1, 16, 5, 6), (16, 8, 3, 3)


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.delenv(_weight_cache.BUDGET_VARIABLE, raising=False)
    _weight_cache.clear()
    yield
    _weight_cache.clear()


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(X_SHAPE), rng.standard_normal(W_SHAPE)


def _check(layer, x, w):
    expected = reference_conv_transpose(x, w, strides=(2, 2), pads=(1, 1, 1, 1))
    np.testing.assert_allclose(layer.apply(x, w), expected, rtol=1e-12, atol=1e-12)


def test_repeated_weights_are_packed_once_and_give_the_same_result():
    x, w = _arrays()
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), num_threads=1)
    first = layer.apply(x, w)
    held = _weight_cache.held_bytes()
    assert held >= w.nbytes  # the copy and the packing are held
    np.testing.assert_array_equal(layer.apply(x, w.copy()), first)  # equal bytes, another array
    assert _weight_cache.held_bytes() == held
    _check(layer, x, w)


@pytest.mark.parametrize("edit", ["one weight", "sign of a zero", "nan payload"])
def test_weights_edited_in_place_are_packed_again(edit):
    x, w = _arrays()
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), num_threads=1)
    layer.apply(x, w)
    if edit == "one weight":
        w[-1, -1, -1, -1] += 1.0
        _check(layer, x, w)
    elif edit == "sign of a zero":
        w[3, 2, 1, 1] = 0.0
        layer.apply(x, w)
        w[3, 2, 1, 1] = -0.0  # equal as numbers, not as bytes: packed again, same result
        _check(layer, x, w)
    else:
        w[0, 0, 0, 0] = np.nan
        result = layer.apply(x, w)
        assert np.isnan(result[0, 0]).any() and not np.isnan(result[0, 0, -1, -1])
        w[0, 0, 0, 0] = 0.5
        _check(layer, x, w)


def test_layers_of_one_shape_take_turns():
    x, w1 = _arrays(1)
    _, w2 = _arrays(2)
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    for _ in range(3):
        _check(layer, x, w1)
        _check(layer, x, w2)


def test_budget_bounds_the_memory_and_zero_turns_it_off(monkeypatch):
    x, w = _arrays()
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    monkeypatch.setenv(_weight_cache.BUDGET_VARIABLE, "0")
    _check(layer, x, w)
    assert _weight_cache.held_bytes() == 0
    monkeypatch.setenv(_weight_cache.BUDGET_VARIABLE, "1")  # 1 MiB: a few of these layers
    for seed in range(40):
        _check(layer, x, _arrays(seed)[1])
        for shape in ((1, 16, 4, 4), (1, 16, 7, 3)):
            layer.apply(np.ones(shape), _arrays(seed)[1])
        assert 0 < _weight_cache.held_bytes() <= 1 << 20


@pytest.mark.parametrize("layout", ["fortran", "XOI filter"])
def test_weights_of_other_memory_orders_are_remembered_in_that_order(layout):
    x, w = _arrays()
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), num_threads=1)
    if layout == "fortran":
        user_w, edit = np.asfortranarray(w), (0, 1, 2, 0)
    else:  # (k..., M, C) contiguous, seen by the engine as a (C, M, k...) view
        layer.set_params(filter_format="XOI")
        user_w, edit = np.ascontiguousarray(np.moveaxis(w, (0, 1), (-1, -2))), (2, 0, 1, 3)

    def check():
        got = layer.apply(x, user_w)
        view = user_w if layout == "fortran" else np.moveaxis(user_w, (-1, -2), (0, 1))
        expected = reference_conv_transpose(x, view, strides=(2, 2), pads=(1, 1, 1, 1))
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)

    check()
    held = _weight_cache.held_bytes()
    assert held >= w.nbytes  # remembered although not C-contiguous
    check()
    assert _weight_cache.held_bytes() == held  # found, not packed again
    user_w[edit] += 1.0  # an edit in place is seen
    check()
    # reversed axes do not fill memory in any order of axes: packed every call
    reversed_w = w[:, :, ::-1, :]
    before = _weight_cache.held_bytes()
    _check(layer.set_params(filter_format="IOX"), x, reversed_w)
    assert _weight_cache.held_bytes() == before


def test_views_and_conv_weights():
    x, w = _arrays()
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    _check(layer, x, w[:, :, ::-1, ::-1])  # not one dense block: packed every call
    _check(layer, x, w[:, :, ::-1, ::-1])
    conv = Conv(strides=(2, 1), pads=(1, 0, 1, 1))
    cx = np.random.default_rng(3).standard_normal((1, 8, 9, 7))
    cw = np.random.default_rng(4).standard_normal((16, 8, 3, 3))
    for value in (1.0, np.inf):
        cw[0, 0, 0, 0] = value  # Conv packs non-finite weights as they are
        for _ in range(2):
            np.testing.assert_allclose(conv.apply(cx, cw),
                                       reference_conv(cx, cw, strides=(2, 1), pads=(1, 0, 1, 1)),
                                       rtol=1e-12, atol=1e-12)


def test_the_weights_used_last_are_evicted_last(monkeypatch):
    monkeypatch.setattr(_weight_cache, "RECENT_SECONDS", 0.0)  # every entry may go
    x, _ = _arrays()
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1))
    weights = [_arrays(seed)[1] for seed in range(_weight_cache.ENTRIES_PER_PLAN + 1)]
    for w in weights[:-1]:
        layer.apply(x, w)
    layer.apply(x, weights[0])       # a hit: now the most recent of its plan
    held = _weight_cache.held_bytes()
    layer.apply(x, weights[-1])      # one more set: evicts weights[1], not weights[0]
    assert _weight_cache.held_bytes() == held
    key = next(iter(_weight_cache._plans))
    copies = [entry[1] for entry in _weight_cache._plans[key]]
    assert any(np.array_equal(copy, weights[0]) for copy in copies)
    assert not any(np.array_equal(copy, weights[1]) for copy in copies)
    _check(layer, x, weights[0])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_large_weights_are_compared_whole_by_every_thread(threads):
    from convt._compiled import load

    same_bytes = load().same_bytes
    size = 3 * (1 << 20) + 5  # several quarter-MiB pieces and a short last one
    left = np.random.default_rng(1).integers(0, 256, size, dtype=np.uint8)
    assert same_bytes(left, left.copy(), threads)
    for position in (0, 255, 256, (1 << 18) - 1, 1 << 18, 5 * (1 << 18) + 3, (1 << 20) - 1,
                     1 << 20, 2 * (1 << 20) + 17, size - 1):
        right = left.copy()
        right[position] ^= 1
        assert not same_bytes(left, right, threads), position
    empty = np.zeros(0, np.uint8)
    assert same_bytes(empty, empty.copy(), threads)


def test_an_entry_may_take_half_the_budget_and_no_more(monkeypatch):
    # weights of 288 KiB (float64): the copy and the packing take about 576 KiB
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 64, 5, 5)), rng.standard_normal((64, 64, 3, 3))
    layer = Conv(pads=(1, 1, 1, 1), num_threads=1)
    expected = reference_conv(x, w, pads=(1, 1, 1, 1))
    for budget_mib, kept in ((1, False), (2, True)):
        _weight_cache.clear()
        monkeypatch.setenv(_weight_cache.BUDGET_VARIABLE, str(budget_mib))
        np.testing.assert_allclose(layer.apply(x, w), expected, rtol=1e-12, atol=1e-12)
        held = _weight_cache.held_bytes()
        assert (held >= 2 * w.nbytes) == kept and held <= (budget_mib << 20) // 2


class _Clock:
    """time.monotonic for the cache, moved by hand."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


def test_weights_in_use_are_not_evicted_for_newer_ones(monkeypatch):
    # a network larger than the budget, layer after layer: the kept layers keep hitting
    clock = _Clock()
    monkeypatch.setattr(_weight_cache, "time", clock)
    x, _ = _arrays()
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), num_threads=1)
    weights = [_arrays(seed)[1] for seed in range(6)]
    layer.apply(x, weights[0])
    entry = _weight_cache.held_bytes()
    monkeypatch.setenv(_weight_cache.BUDGET_VARIABLE, "1")
    monkeypatch.setattr(_weight_cache, "budget_bytes", lambda: 3 * entry)  # room for three
    for w in weights:  # all six in turn, twice, within a second
        for _ in range(2):
            clock.now += 0.01
            _check(layer, x, w)
    assert _weight_cache.held_bytes() == 3 * entry
    key = next(iter(_weight_cache._plans))
    kept = [entry[1] for entry in _weight_cache._plans[key]]
    assert all(any(np.array_equal(copy, w) for copy in kept) for w in weights[:3])
    for _ in range(3):  # another round: the first three hit, the others are packed anew
        for w in weights:
            clock.now += 0.01
            _check(layer, x, w)
    assert {id(entry[1]) for entry in _weight_cache._plans[key]} == {id(copy) for copy in kept}
    clock.now += 2 * _weight_cache.RECENT_SECONDS  # unused for a while: evicted as before
    _check(layer, x, weights[5])
    assert any(np.array_equal(entry[1], weights[5]) for entry in _weight_cache._plans[key])
    assert _weight_cache.held_bytes() == 3 * entry


def test_a_layer_shape_keeps_its_sets_in_use(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(_weight_cache, "time", clock)
    monkeypatch.setattr(_weight_cache, "ENTRIES_PER_PLAN", 2)
    x, _ = _arrays()
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), num_threads=1)
    weights = [_arrays(seed)[1] for seed in range(3)]
    for w in weights * 2:
        clock.now += 0.01
        _check(layer, x, w)
    key = next(iter(_weight_cache._plans))
    kept = _weight_cache._plans[key]
    assert len(kept) == 2
    assert all(any(np.array_equal(entry[1], w) for entry in kept) for w in weights[:2])
