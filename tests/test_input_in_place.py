"""One-tap stacks (1x1 layers, the phases of k2s2) read x in place as the GEMM operand
(convt._gemm.input_as_operand) while its channel planes are less than a page apart: the
same sums as through the tile buffer, and never a read past the end of x.  Farther
apart they copy their tiles, one run of whole rows per channel: the same sums again;
but for Conv's 1x1 stacks where the kernels pack no B panels (packs_b), which read x
in place at any distance."""

import dataclasses

import ctypes
import mmap
import sys

import numpy as np
import pytest

from convt import Conv, ConvTranspose, _dispatch, _engine, _plan, explain

LAYERS = {
    "conv_1x1": (Conv, (2, 24, 7, 9), (16, 24, 1, 1), {}),
    "conv_1x1_grouped": (Conv, (1, 12, 5, 33), (9, 4, 1, 1), dict(group=3)),
    # the last tile (3 rows of 40: seven panels and a half) read in place up to x's end
    "conv_1x1_half_panel": (Conv, (1, 8, 7, 40), (16, 8, 1, 1), {}),
    "k2s2": (ConvTranspose, (2, 20, 6, 13), (20, 12, 2, 2), dict(strides=(2, 2))),
    "k1x2x2": (ConvTranspose, (1, 16, 3, 5, 7), (16, 8, 1, 2, 2), dict(strides=(1, 2, 2))),
    "1d_k2s2": (ConvTranspose, (3, 10, 21), (10, 6, 2), dict(strides=(2,))),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_in_place_equals_the_tile_buffer(name, dtype):
    operator, x_shape, w_shape, params = LAYERS[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    layer = operator(**params)
    # a view with a negative channel stride is never read in place: the tile buffer path
    buffered = np.flip(np.flip(x, axis=1).copy(), axis=1)
    assert buffered.strides[1] < 0
    for threads in (1, 2):
        layer.set_params(num_threads=threads)
        np.testing.assert_array_equal(layer.apply(x, w), layer.apply(buffered, w))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect through libc")
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_no_read_past_the_end_of_x(name):
    # x ends exactly where an inaccessible page begins: a read past it would crash
    operator, x_shape, w_shape, params = LAYERS[name]
    page = mmap.PAGESIZE
    size = int(np.prod(x_shape)) * 4
    pages = -(-size // page)
    region = mmap.mmap(-1, (pages + 1) * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base + pages * page, page, 0) == 0  # PROT_NONE
    try:
        x = np.frombuffer(region, dtype=np.float32, count=size // 4,
                          offset=pages * page - size).reshape(x_shape)
        x[...] = np.random.default_rng(0).standard_normal(x_shape)
        w = np.random.default_rng(1).standard_normal(w_shape).astype(np.float32)
        layer = operator(**params)
        expected = layer.apply(x.copy(), w)
        np.testing.assert_array_equal(layer.apply(x, w), expected)
        del x
    finally:
        libc.mprotect(base + pages * page, page, 3)  # PROT_READ | PROT_WRITE


LARGE_PLANES = {
    "conv_1x1": (Conv, (2, 24, 40, 36), (16, 24, 1, 1), {}),
    "k2s2": (ConvTranspose, (1, 20, 36, 40), (20, 12, 2, 2), dict(strides=(2, 2))),
    "k1x2x2": (ConvTranspose, (1, 16, 2, 40, 36), (16, 8, 1, 2, 2), dict(strides=(1, 2, 2))),
}


def _kernels_packing_b(monkeypatch, packs):
    """Decisions whose kernels pack B panels (``packs``) or read them in place."""
    decide = _dispatch.decide

    def decide_packing(problem, **arguments):
        decision = decide(problem, **arguments)
        if decision.engine != "gemm":
            return decision
        return dataclasses.replace(decision, blocking=dataclasses.replace(
            decision.blocking, packs_b=packs))

    monkeypatch.setattr(_dispatch, "decide", decide_packing)
    _plan.gemm_plan.cache_clear()
    _engine._execution.cache_clear()


@pytest.fixture
def clean_plans():
    yield
    _plan.gemm_plan.cache_clear()
    _engine._execution.cache_clear()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(LARGE_PLANES))
def test_planes_a_page_apart_are_copied_with_the_same_sums(name, dtype, monkeypatch,
                                                           clean_plans):
    _kernels_packing_b(monkeypatch, True)
    operator, x_shape, w_shape, params = LARGE_PLANES[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    layer = operator(**params)
    assert np.prod(x_shape[2:]) * x.itemsize >= _plan.IN_PLACE_MAX_CHANNEL_BYTES
    assert not explain(layer, x, w).plan.stacks["identity"].any()
    copied = layer.apply(x, w)
    monkeypatch.setattr(_plan, "IN_PLACE_MAX_CHANNEL_BYTES", 1 << 40)
    _plan.gemm_plan.cache_clear()
    _engine._execution.cache_clear()
    try:
        assert explain(layer, x, w).plan.stacks["identity"].all()
        np.testing.assert_array_equal(layer.apply(x, w), copied)
    finally:
        _plan.gemm_plan.cache_clear()
        _engine._execution.cache_clear()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(LARGE_PLANES))
def test_kernels_packing_no_b_read_conv_planes_in_place_at_any_distance(
        name, dtype, monkeypatch, clean_plans):
    """packs_b off: Conv's 1x1 stacks read x in place however far apart its planes
    lie, ConvTranspose's one-tap phases still copy them; the same sums either way."""
    operator, x_shape, w_shape, params = LARGE_PLANES[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    layer = operator(**params)
    _kernels_packing_b(monkeypatch, True)
    copied = layer.apply(x, w)
    _kernels_packing_b(monkeypatch, False)
    stacks = explain(layer, x, w).plan.stacks
    assert stacks["identity"].all() == (operator is Conv)
    assert not stacks["identity"].any() == (operator is ConvTranspose)
    for threads in (1, 2):
        layer.set_params(num_threads=threads)
        np.testing.assert_array_equal(layer.apply(x, w), copied)
