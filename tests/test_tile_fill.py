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
