"""Recycled output memory (convt/_outputs.py): large outputs of calls without out=
are views of kept blocks, handed out again only once no array uses them; results
never depend on what a block held before."""

import threading

import numpy as np
import pytest

from convt import Conv, ConvTranspose, _outputs
from convt._reference import reference_conv, reference_conv_transpose

pytestmark = pytest.mark.skipif(not _outputs.ENABLED, reason="reference counts are not exact")


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks from 64 KiB on, 1 MiB in all (the tests' outputs are 80-320 KiB)."""
    monkeypatch.setattr(_outputs, "MIN_BYTES", 64 << 10)
    monkeypatch.setattr(_outputs, "MAX_BYTES", 1 << 20)
    _outputs.release()
    yield
    _outputs.release()


def _layer_and_operands(seed=0):
    """A ConvTranspose whose stride exceeds its kernel (outputs no tap reaches: only
    the bias), with a bias, and its reference result: (2, 4, 65, 95) float32 outputs."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 22, 32)).astype(np.float32)
    w = rng.standard_normal((3, 4, 2, 2)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    layer = ConvTranspose(strides=(3, 3), pads=(0, 0, 0, 1))
    expected = reference_conv_transpose(x.astype(np.float64), w.astype(np.float64),
                                        b.astype(np.float64), **layer.get_params())
    return layer, (x, w, b), expected


def _poison(shape):
    """The kept block an output of ``shape`` (float32) would get, filled with NaN."""
    junk = _outputs.empty(shape, np.float32)
    junk[:] = np.nan
    return junk.ctypes.data


def test_large_outputs_reuse_dropped_memory_and_are_overwritten():
    layer, operands, expected = _layer_and_operands()
    first = layer.apply(*operands)
    address = first.ctypes.data
    assert first.nbytes >= _outputs.MIN_BYTES and np.shares_memory(first, _outputs._blocks[-1])
    np.testing.assert_allclose(first, expected, rtol=1e-5, atol=1e-5)
    del first
    for seed in (1, 2):
        assert _poison(expected.shape) == address
        layer, operands, expected = _layer_and_operands(seed)
        y = layer.apply(*operands)
        assert y.ctypes.data == address  # the same memory, written anew
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
        assert y.flags.c_contiguous and y.flags.writeable and y.dtype == np.float32
        assert y.ctypes.data % _outputs.ALIGNMENT == 0
        del y


def test_memory_of_a_live_array_or_view_is_never_handed_out():
    layer, operands, expected = _layer_and_operands()
    y = layer.apply(*operands)
    view = y[1, 2, ::2]            # a view of a view: its base is the block
    kept = view.copy()
    del y
    fresh = layer.apply(*operands)
    assert not np.shares_memory(fresh, view)
    fresh[:] = np.nan
    np.testing.assert_array_equal(view, kept)
    del fresh
    again = layer.apply(*operands)  # the block of `fresh` is free again
    assert not np.shares_memory(again, view)
    np.testing.assert_allclose(again, expected, rtol=1e-5, atol=1e-5)


def test_blocks_kept_are_bounded():
    layer, operands, _ = _layer_and_operands()
    live = [layer.apply(*operands) for _ in range(5)]   # all in use: new memory each
    assert len({y.ctypes.data for y in live}) == 5
    assert len(_outputs._blocks) <= _outputs.BLOCKS
    assert sum(block.nbytes for block in _outputs._blocks) <= _outputs.MAX_BYTES + 64 * 2
    big = _outputs.empty((_outputs.MAX_BYTES,), np.uint8)  # above a block's share
    assert big.base is None or not any(big.base is block for block in _outputs._blocks)


def test_small_outputs_and_unsupported_interpreters_get_new_arrays(monkeypatch):
    small = Conv().apply(np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 3, 3), np.float32))
    assert small.base is None and not _outputs._blocks
    monkeypatch.setattr(_outputs, "ENABLED", False)
    layer, operands, expected = _layer_and_operands()
    y = layer.apply(*operands)
    assert y.base is None and not _outputs._blocks
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_concurrent_calls_get_their_own_memory():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 8, 100, 100)).astype(np.float32)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    layer = Conv(pads=(1, 1, 1, 1), num_threads=1)
    expected = reference_conv(x.astype(np.float64), w.astype(np.float64), None,
                              **layer.get_params())
    errors = []

    def work():
        try:
            for _ in range(6):
                ys = [layer.apply(x, w), layer.apply(x, w)]
                assert not np.shares_memory(ys[0], ys[1])
                for y in ys:
                    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
        except AssertionError as error:  # reported by the test's thread
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]


def test_release_drops_the_blocks():
    layer, operands, _ = _layer_and_operands()
    y = layer.apply(*operands)
    assert _outputs._blocks
    _outputs.release()
    assert not _outputs._blocks
    assert np.isfinite(y).all()  # the array keeps its memory
