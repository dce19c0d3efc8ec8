"""A thread fills a tile's buffer once for the row groups of that tile, which are
consecutive work items (convt/_gemm.pxi, fill_once).  Items next to each other
that differ in image, group, stack or tile, or that cut the depth into K chunks,
must fill again: these cases put such items side by side and compare every
thread count against the reference and against each other."""

import zlib

import numpy as np
import pytest

from _conv_helpers import assert_conv_matches_reference, run_conv_engine
from _helpers import ENGINES
from convt import Conv, _dispatch, explain

KERNEL_ENGINES = [engine for engine in ENGINES
                  if engine.startswith("gemm-") and engine != "gemm-blas"]

# x shape, w shape, attributes: several images (and groups), each group's output
# channels several row blocks deep
CASES = {
    "stride1": ((2, 8, 9, 9), (96, 4, 3, 3), dict(pads=(1, 1, 1, 1), group=2)),
    "stride2": ((2, 8, 9, 9), (96, 4, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=2)),
    "1d": ((3, 6, 17), (72, 3, 5), dict(pads=(2, 2), group=2)),
    "one_group": ((3, 4, 7, 7), (48, 4, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "3d": ((2, 4, 5, 6, 7), (48, 2, 3, 3, 3), dict(pads=(1,) * 6, group=2)),
}


@pytest.mark.parametrize("chunked", [False, True], ids=["one_chunk", "k_chunks"])
@pytest.mark.parametrize("engine", KERNEL_ENGINES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_row_groups_of_one_tile_share_its_fill(name, engine, chunked, monkeypatch,
                                               threads_for_any_work):
    monkeypatch.setattr(_dispatch.os, "cpu_count", lambda: 8)      # many work items
    monkeypatch.setattr(_dispatch, "PRODUCT_BYTES", 4 * 12 * 40)  # row groups
    if chunked:
        monkeypatch.setattr(_dispatch, "MAX_DEPTH", 9)  # a K chunk per input channel
    x_shape, w_shape, params = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    with monkeypatch.context() as patch:
        patch.setenv(_dispatch.KERNEL_SET_VARIABLE, engine.partition("-")[2])
        stacks = explain(Conv(**params), x, w).plan.stacks
    assert stacks["row_groups"].max() > 1, "the case no longer plans row groups"
    assert (stacks["chunk"].min() < x.shape[1] // params.get("group", 1)) == chunked
    first = None
    for threads in (1, 2, 3):
        y = run_conv_engine(engine, x, w, b, num_threads=threads, **params)
        assert_conv_matches_reference(y, x, w, b, **params)
        if first is None:
            first = y
        np.testing.assert_array_equal(y, first)


# inputs of more than 256 KiB per group (FILL_HINT_MIN_BYTES in convt/_tiles.pxi):
# the fill hints each next channel's rows while it copies, also where channels run
# backwards in memory (the hints then point at lower addresses) and where the
# channels of a K chunk end before the group's (the last channel hints the next
# chunk's first)
LARGE_CASES = {
    "stride2": ((1, 48, 44, 44), (24, 48, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "stride1": ((1, 40, 48, 48), (16, 40, 3, 3), dict(pads=(1, 1, 1, 1))),
    "stride3_1d": ((1, 64, 1100), (8, 64, 5), dict(strides=(3,), pads=(2, 2))),
}


@pytest.mark.parametrize("layout", ["c_order", "channels_reversed"])
@pytest.mark.parametrize("chunked", [False, True], ids=["set_chunks", "k_chunks"])
@pytest.mark.parametrize("name", sorted(LARGE_CASES))
def test_large_inputs_fill_with_hints_exactly(name, chunked, layout, monkeypatch):
    x_shape, w_shape, params = LARGE_CASES[name]
    if chunked:
        monkeypatch.setattr(_dispatch, "MAX_DEPTH", 4 * int(np.prod(w_shape[2:])))
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    x = rng.standard_normal(x_shape).astype(np.float32)
    assert x[0].nbytes >= 256 * 1024
    if layout == "channels_reversed":
        x = np.ascontiguousarray(x[:, ::-1])[:, ::-1]  # same values, channel stride < 0
    w = rng.standard_normal(w_shape).astype(np.float32)
    stacks = explain(Conv(**params), x, w).plan.stacks
    if chunked:  # (unchunked: as the set's blocking cuts the depth)
        assert stacks["chunk"].min() < x.shape[1]
    first = None
    for threads in (1, 2):
        y = Conv(num_threads=threads, **params).apply(x, w)
        assert_conv_matches_reference(y, x, w, **params)
        if first is None:
            first = y
        np.testing.assert_array_equal(y, first)
