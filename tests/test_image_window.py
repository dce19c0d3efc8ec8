"""Image windows: a 1-D or 2-D stack whose tiles would copy the input again and again
(row groups, halo rows) reads, from each thread's tile buffer, the window of the
whole image, each row copied once by the thread when its tiles first need it
(convt._plan._image_window_of, image_window_operand in _gemm.pxi).  The kernels
run the same calls on the same values, so the results are bitwise those of
per-tile buffers, at any thread count (threads take tiles in any order)."""

import numpy as np
import pytest
from hypothesis import given, settings

from convt import Conv, ConvTranspose, _dispatch, _engine, _plan, explain
from convt._compiled import load
from _conv_helpers import assert_conv_matches_reference, run_conv_engine
from _helpers import (ENGINES, assert_matches_reference, examples, run_engine,
                      wrap_engine_runs)
from test_conv_properties import conv_cases as forward_cases
from test_properties import conv_cases as transpose_cases

_kernels = load()

# (operator, x shape, w shape, params): strided, dilated, 1-D with column tiles,
# several images and groups, and ConvTranspose stacks of many phases
LAYERS = {
    "k3s2": (Conv, (1, 48, 30, 30), (64, 48, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "k5s3_odd": (Conv, (2, 16, 41, 37), (40, 16, 5, 3),
                 dict(strides=(3, 2), pads=(2, 1, 0, 2))),
    "dilated_groups": (Conv, (3, 32, 21, 19), (48, 16, 3, 3),
                       dict(pads=(2, 2, 2, 2), dilations=(2, 2), group=2)),
    # rows sharing their zero columns: a row's last column is the next row's first
    "k3_shared_zeros": (Conv, (2, 24, 23, 56), (40, 24, 3, 3), dict(pads=(1, 1, 1, 1))),
    "k7_1d": (Conv, (2, 40, 700), (56, 40, 7), dict(pads=(3, 3))),
    "k10s5_1d": (Conv, (1, 3, 3000), (64, 3, 10), dict(strides=(5,))),
    "vocoder": (ConvTranspose, (2, 64, 24), (64, 32, 16), dict(strides=(8,), pads=(4, 4))),
    "k6s3": (ConvTranspose, (1, 24, 17, 15), (24, 3, 6, 6), dict(strides=(3, 3), pads=(1, 2, 2, 1))),
}


@pytest.fixture
def windows_everywhere(monkeypatch):
    """Every stack that may take an image window takes one (and cached plans go)."""
    monkeypatch.setattr(_plan, "IMAGE_WINDOW_MIN_COPIES", 0)
    monkeypatch.setattr(_plan, "IMAGE_WINDOW_MIN_WORK", 0)
    _plan.gemm_plan.cache_clear()
    _engine._execution.cache_clear()
    yield
    _plan.gemm_plan.cache_clear()
    _engine._execution.cache_clear()


def _run(operator, kernel_set, x, w, b, threads, params):
    runner = run_conv_engine if operator is Conv else run_engine
    return runner(f"gemm-{kernel_set}", x, w, b, num_threads=threads, **params)


def _without_windows(monkeypatch):
    monkeypatch.setattr(_plan, "IMAGE_WINDOW_MAX_BYTES", 0)
    _plan.gemm_plan.cache_clear()
    _engine._execution.cache_clear()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_image_windows_give_the_tile_buffers_bits(name, dtype, monkeypatch, windows_everywhere):
    operator, x_shape, w_shape, params = LAYERS[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    out_channels = w_shape[0] if operator is Conv else w_shape[1] * params.get("group", 1)
    b = rng.standard_normal(out_channels).astype(dtype)
    sets = [name for name in _dispatch.available_kernel_sets() if name != "blas"]
    windowed = {}
    for kernel_set in sets:
        monkeypatch.setenv(_dispatch.KERNEL_SET_VARIABLE, kernel_set)
        report = explain(operator(**params), x, w)
        assert report.decision.engine == "gemm" and report.decision.kernel_set == kernel_set
        if report.plan.stacks["image_window"].all():  # (some sets' tiles span part of a row)
            windowed[kernel_set] = [_run(operator, kernel_set, x, w, b, threads, params)
                                    for threads in (1, 2)]
    monkeypatch.delenv(_dispatch.KERNEL_SET_VARIABLE)
    assert windowed, "no kernel set took a window"
    _without_windows(monkeypatch)
    for kernel_set in windowed:
        tiled = _run(operator, kernel_set, x, w, b, 2, params)
        for y in windowed[kernel_set]:  # any thread count: each thread fills its own
            np.testing.assert_array_equal(y, tiled)
        check = assert_conv_matches_reference if operator is Conv else assert_matches_reference
        check(tiled, x, w, b, **params)


def test_windows_are_spread_over_the_cache_sets():
    """A window's channels lie an odd number of cache lines apart: a 1-D row of 4102
    floats is 16408 bytes, which would put every channel in the same L1 set."""
    assert _plan._spread_stride(4102, 4) * 4 % 128 == 64
    assert _plan._spread_stride(4102, 4) >= 4102
    assert _plan._spread_stride(16, 4) == 16  # one line
    assert _plan._spread_stride(17, 8) == 24  # three lines of doubles


def test_windows_serve_stacks_that_copy_their_input_often(monkeypatch):
    """On 2 cores, a 256 -> 512 3x3 s2 Conv over 28x28 (two 7-row tiles of four row
    groups: each tile's buffer copied four times) takes a window; a layer whose
    tiles copy the input about once per core (3x3 s2 128 -> 256 over 56x56, 1.24
    times) keeps its tile buffers, and so does a call too small to pay for it."""
    monkeypatch.setattr(_dispatch.os, "cpu_count", lambda: 2)
    _plan.gemm_plan.cache_clear()
    _engine._execution.cache_clear()
    try:
        s2 = dict(strides=(2, 2), pads=(1, 1, 1, 1))

        def windowed(x_shape, w_shape, **params):
            report = explain(Conv(**params), x_shape, w_shape, np.float32)
            if report.decision.kernel_set in ("avx512", "avx512_wide", "avx2"):
                return bool(report.plan.stacks["image_window"].all())
            pytest.skip("tile shapes of another kernel set")

        assert windowed((1, 256, 28, 28), (512, 256, 3, 3), **s2)
        assert not windowed((1, 128, 56, 56), (256, 128, 3, 3), **s2)
        assert not windowed((1, 8, 12, 12), (16, 8, 3, 3), **s2)
    finally:
        _plan.gemm_plan.cache_clear()
        _engine._execution.cache_clear()


GEMM_ENGINES = [engine for engine in ENGINES if engine.startswith("gemm-") and engine != "gemm-blas"]


@pytest.mark.parametrize("engine", GEMM_ENGINES)
@settings(max_examples=examples(25))
@given(case=forward_cases(max_ndim=2, max_size=11, max_channels=5))
def test_windowed_conv_matches_reference(engine, case, small_tiles, windows_everywhere):
    """Random Conv layers (strides, dilations, pads, auto_pad, groups, channels-last
    data, every filter layout and dtype) with small tiles, every stack that may take
    an image window taking one, shared by 3 threads."""
    x, w, b, params = case
    y = run_conv_engine(engine, x, w, b, num_threads=3, **params)
    assert_conv_matches_reference(y, x, w, b, **params)


@pytest.mark.parametrize("engine", GEMM_ENGINES)
@settings(max_examples=examples(25))
@given(case=transpose_cases(max_ndim=2, max_size=9))
def test_windowed_conv_transpose_matches_reference(engine, case, small_tiles,
                                                   windows_everywhere):
    """The same for ConvTranspose: its single-stack layers (stride 1 on the last axes,
    several taps per phase) take windows."""
    x, w, b, params = case
    y = run_engine(engine, x, w, b, num_threads=3, **params)
    assert_matches_reference(y, x, w, b, **params)


def test_the_engine_refuses_scratch_without_room_for_the_window_state(monkeypatch):
    """Each thread's scratch row ends with what its tile buffer holds (the image, group
    and rows of a window; the tile a fill holds): a caller passing the leading
    coordinates alone gets an error, not a write past the array."""
    x = np.ones((1, 8, 12, 12), np.float32)
    w = np.ones((8, 8, 3, 3), np.float32)
    calls = []

    def short_scratch_first(run, arrays, packed, workspace, scratch, threads, *rest):
        calls.append(scratch.shape)
        with pytest.raises(ValueError, match=f"ndim \\+ {_kernels.GEMM_THREAD_STATE}"):
            run(arrays, packed, workspace, scratch[:, :-_kernels.GEMM_THREAD_STATE], threads,
                *rest)
        return run(arrays, packed, workspace, scratch, threads, *rest)

    wrap_engine_runs(monkeypatch, short_scratch_first)
    y = Conv(pads=(1, 1, 1, 1), num_threads=1)._apply(x, w, None, engine="gemm",
                                                      backend="portable")
    assert calls and calls[0][1] == 2 + _kernels.GEMM_THREAD_STATE
    assert_conv_matches_reference(y, x, w, None, pads=(1, 1, 1, 1))


def test_streamed_weights_read_tiles_from_the_window(monkeypatch, windows_everywhere):
    """A Conv whose weights stream from w (transposed kernels, more than 8 MiB over at
    most 64 outputs) reads its tiles from the window too, with the same bits."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 512, 7, 7)).astype(np.float32)
    w = rng.standard_normal((512, 512, 3, 3)).astype(np.float32)
    layer = Conv(pads=(1, 1, 1, 1))
    report = explain(layer, x, w)
    assert report.plan.stacks["image_window"].all()
    windowed = [Conv(pads=(1, 1, 1, 1), num_threads=t).apply(x, w) for t in (1, 2)]
    _without_windows(monkeypatch)
    assert not explain(layer, x, w).plan.stacks["image_window"].any()
    tiled = layer.apply(x, w)
    for y in windowed:
        np.testing.assert_array_equal(y, tiled)
    assert_conv_matches_reference(tiled, x, w, None, pads=(1, 1, 1, 1))
