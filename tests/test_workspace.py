"""Working memory kept between calls (convt/_workspace.py): lent to one call at a time,
bounded, and never read by a call before the call wrote it."""

import numpy as np
import pytest

from _helpers import ENGINE_CASES, ENGINES, assert_matches_reference, engine_case, run_engine
from convt import Conv, ConvTranspose, _dispatch, _workspace, explain
from convt._reference import reference_conv


@pytest.fixture(autouse=True)
def nothing_kept(monkeypatch):
    """Every workspace lent from kept blocks, however small, and none kept before."""
    monkeypatch.setattr(_workspace, "MIN_BYTES", 0)
    _workspace.release()
    yield
    _workspace.release()


def test_small_workspaces_are_plain_arrays(monkeypatch):
    monkeypatch.setattr(_workspace, "MIN_BYTES", 64 << 10)
    small, loan = _workspace.lend((2, 1000), np.float64)
    assert loan is None and small.shape == (2, 1000) and small.dtype == np.float64
    _workspace.give_back(loan)
    assert _workspace.kept_bytes() == 0
    large, loan = _workspace.lend((2, 8192), np.float32)
    assert loan is not None and np.shares_memory(large, loan[0])
    _workspace.give_back(loan)
    assert _workspace.kept_bytes() == loan[0].size
    again, _ = _workspace.lend((2, 8192), np.float32)
    assert again is large  # the same shape: the view made before


def test_a_kept_block_serves_other_shapes_it_holds():
    with _workspace.borrowed((4, 1000), np.float32) as first:
        address = first.ctypes.data
    with _workspace.borrowed((3, 100), np.float64) as second:
        assert second.shape == (3, 100) and second.dtype == np.float64
        assert second.ctypes.data == address
    with _workspace.borrowed((4, 1000), np.float32) as third:
        assert third.ctypes.data == address and third.shape == (4, 1000)


@pytest.fixture
def poisoned(monkeypatch):
    """Every lent workspace filled with 0xFF bytes first: NaN in every float type, so
    a call that read its workspace before writing it would spoil its outputs."""
    lend = _workspace.lend

    def poisoned_lend(shape, dtype):
        array, loan = lend(shape, dtype)
        array.view(np.uint8).fill(0xFF)
        return array, loan

    monkeypatch.setattr(_workspace, "lend", poisoned_lend)


def test_poisoned_blocks_hold_nan(poisoned):
    with _workspace.borrowed((4, 100), np.float64) as block:
        assert np.isnan(block).all()


def test_a_block_given_back_serves_the_next_call():
    with _workspace.borrowed((3, 1000), np.float32) as first:
        assert first.shape == (3, 1000) and first.dtype == np.float32
        assert first.flags.c_contiguous and first.ctypes.data % _workspace.ALIGNMENT == 0
        address = first.ctypes.data
    assert _workspace.kept_bytes() >= 12000
    with _workspace.borrowed((1500,), np.float64) as second:
        assert second.ctypes.data == address


def test_calls_at_once_get_distinct_blocks():
    with _workspace.borrowed((1000,), np.float32) as outer:
        with _workspace.borrowed((1000,), np.float32) as inner:
            assert not np.shares_memory(outer, inner)
    # both kept; each serves again
    with _workspace.borrowed((1000,), np.float32) as again, \
            _workspace.borrowed((1000,), np.float32) as other:
        assert {again.ctypes.data, other.ctypes.data} == {outer.ctypes.data, inner.ctypes.data}


def test_kept_memory_is_bounded(monkeypatch):
    monkeypatch.setattr(_workspace, "KEPT_BLOCKS", 2)
    monkeypatch.setattr(_workspace, "KEPT_MAX_BYTES", 1 << 20)
    sizes = (100_000, 300_000, 200_000)  # bytes
    with _workspace.borrowed((sizes[0],), np.uint8), _workspace.borrowed((sizes[1],), np.uint8), \
            _workspace.borrowed((sizes[2],), np.uint8):
        pass
    granule = _workspace.GRANULE
    kept = [-(-(size + _workspace.ALIGNMENT) // granule) * granule for size in (300_000, 200_000)]
    assert _workspace.kept_bytes() == sum(kept)  # the two largest
    with _workspace.borrowed((2 << 20,), np.uint8):
        pass
    assert _workspace.kept_bytes() == sum(kept)  # too large to keep
    monkeypatch.setattr(_workspace, "KEPT_BLOCKS", 0)
    with _workspace.borrowed((10,), np.uint8):
        pass
    assert _workspace.kept_bytes() == 0


def test_an_error_inside_gives_the_block_back():
    with pytest.raises(RuntimeError):
        with _workspace.borrowed((1000,), np.float32):
            raise RuntimeError("inside")
    assert _workspace.kept_bytes() > 0


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(ENGINE_CASES))
def test_results_never_depend_on_what_the_workspace_held(name, engine, poisoned, small_tiles):
    x, w, b, spec = engine_case(name, np.float32, seed=5)
    for threads in (1, 3):
        y = run_engine(engine, x, w, b, num_threads=threads, **spec)
        assert_matches_reference(y, x, w, b, **spec)


WINOGRAD_CASES = [
    (Conv(pads=(1, 1, 1, 1)), (1, 32, 14, 15), (40, 32, 3, 3)),
    (ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1)), (1, 64, 14, 13), (64, 64, 4, 4)),
]


@pytest.mark.parametrize("case", range(len(WINOGRAD_CASES)))
def test_winograd_results_never_depend_on_what_the_workspace_held(case, poisoned, monkeypatch):
    for name in ("WINOGRAD_MIN_WORK", "WINOGRAD_PHASE_MIN_WORK"):
        monkeypatch.setattr(_dispatch, name, 0)
    layer, x_shape, w_shape = WINOGRAD_CASES[case]
    assert explain(layer, x_shape, w_shape, np.float32).winograd is not None
    rng = np.random.default_rng(case)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) / 16).astype(np.float32)
    y = layer.apply(x, w)
    if isinstance(layer, Conv):
        exact = reference_conv(x.astype(np.float64), w.astype(np.float64), None,
                               **layer.get_params())
        np.testing.assert_allclose(y, exact, rtol=0, atol=1e-5 * np.abs(exact).max())
    else:
        assert_matches_reference(y, x, w, **{k: v for k, v in layer.get_params().items()
                                             if k in ("strides", "pads")})


def test_image_window_results_never_depend_on_what_the_workspace_held(poisoned, monkeypatch):
    # the windows fill their rows lazily, as the thread's tiles first need them
    from convt import _plan

    monkeypatch.setattr(_plan, "IMAGE_WINDOW_MIN_COPIES", 0)
    monkeypatch.setattr(_plan, "IMAGE_WINDOW_MIN_WORK", 0)
    layer = Conv(strides=(2, 2), pads=(1, 1, 1, 1), num_threads=2)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 24, 30, 29)).astype(np.float32)
    w = rng.standard_normal((40, 24, 3, 3)).astype(np.float32)
    assert "window of the whole image" in str(explain(layer, x.shape, w.shape, np.float32))
    exact = reference_conv(x.astype(np.float64), w.astype(np.float64), None,
                           strides=(2, 2), pads=(1, 1, 1, 1))
    np.testing.assert_allclose(layer.apply(x, w), exact, rtol=0, atol=1e-5 * np.abs(exact).max())
