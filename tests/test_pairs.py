"""Residue pairs: the two stride-2 phases of the last axis, in separate stacks
(different tap counts), computed by one work item and written interleaved."""

import numpy as np
import pytest

from convt import _dispatch

from _helpers import ENGINES, assert_matches_reference, case_operands, plan_of, run_engine
KERNEL_ENGINES = [engine for engine in ENGINES if engine.startswith("gemm-")
                  and engine != "gemm-blas"]

# x shape, w shape, attributes; each plans at least one residue pair
CASES = {
    "k3s2": ((1, 6, 5, 9), (6, 7, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    "k3s2_output_padding": ((2, 4, 6, 11), (4, 5, 3, 3),
                            dict(strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1))),
    "odd_width": ((1, 3, 4, 10), (3, 6, 3, 3), dict(strides=(2, 2), pads=(0, 0, 0, 1))),
    "k5s2": ((1, 3, 4, 12), (3, 6, 5, 5), dict(strides=(2, 2), pads=(2, 2, 2, 2))),
    "lead_stride1": ((1, 4, 5, 13), (4, 6, 3, 3), dict(strides=(1, 2), pads=(1, 1, 1, 1))),
    "grouped": ((1, 8, 4, 9), (8, 3, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1), group=4)),
    "3d": ((1, 3, 3, 4, 9), (3, 5, 3, 3, 3), dict(strides=(2, 2, 2), pads=(1,) * 6,
                                                   output_padding=(1, 1, 1))),
    "1d": ((2, 4, 21), (4, 9, 3), dict(strides=(2,), pads=(1, 0))),
    "many_channels": ((1, 5, 4, 9), (5, 27, 3, 3), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
}


def _pairs(x, w, params):
    _, plan = plan_of("portable", x, w, **params)
    return int(np.sum(plan.stacks["partner"] >= 0))


def _operands(name, dtype, with_bias=True):
    return case_operands(CASES, name, dtype, with_bias)


@pytest.mark.parametrize("engine", KERNEL_ENGINES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_residue_pairs_match_reference(name, dtype, engine):
    x, w, b, params = _operands(name, dtype, with_bias=name != "k3s2")
    assert _pairs(x, w, params) > 0, "the case no longer plans a residue pair"
    y = run_engine(engine, x, w, b, num_threads=2, **params)
    assert_matches_reference(y, x, w, b, **params)


@pytest.mark.parametrize("name", sorted(CASES))
def test_residue_pairs_across_row_tiles_chunks_and_row_groups(name, monkeypatch,
                                                             threads_for_any_work):
    monkeypatch.setattr(_dispatch, "MAX_DEPTH", 9)
    monkeypatch.setattr(_dispatch, "OPERAND_BYTES", 4 * 120)
    monkeypatch.setattr(_dispatch, "PRODUCT_BYTES", 4 * 6 * 48)
    x, w, b, params = _operands(name, np.float32)
    first = None
    for engine in KERNEL_ENGINES:
        for threads in (1, 2, 3):
            y = run_engine(engine, x, w, b, num_threads=threads, **params)
            assert_matches_reference(y, x, w, b, **params)
            if first is None or threads == 1:
                first = y
            np.testing.assert_array_equal(y, first)
