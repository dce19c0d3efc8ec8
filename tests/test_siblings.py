"""Stacked residues: a stack holding every stride phase of the last axis writes them
to y together, each output row front to back (scatter_siblings), with loops of
constant stride for 2, 3, 4 and 8 residues, groups of eight for other multiples of
eight, and a chunked loop for the rest, up to convt._plan.MAX_SIBLINGS."""

import numpy as np
import pytest

from convt import _engine, _plan
from convt._compiled import load

from _helpers import ENGINES, assert_matches_reference, case_operands, plan_of, run_engine

KERNEL_ENGINES = [engine for engine in ENGINES if engine.startswith("gemm-")
                  and engine != "gemm-blas"]

# x shape, w shape, attributes: kernels twice the stride and pads that are multiples
# of it (s24 and s5: short inputs), so every residue of the last axis reads the same
# inputs and one stack holds them all
CASES = {
    "s3_2d": ((1, 3, 5, 6), (3, 4, 6, 6), dict(strides=(3, 3), pads=(0, 3, 3, 0))),
    "s4_1d": ((2, 5, 9), (5, 3, 8), dict(strides=(4,), pads=(2, 2))),
    "s5_1d": ((1, 4, 7), (4, 3, 10), dict(strides=(5,), pads=(1, 3))),
    "s8_2d": ((1, 2, 4, 5), (2, 3, 16, 16), dict(strides=(8, 8), pads=(0, 0, 8, 0))),
    "s16_1d": ((2, 3, 6), (3, 2, 32), dict(strides=(16,), pads=(0, 16))),
    "s24_1d": ((1, 4, 5), (4, 3, 48), dict(strides=(24,), pads=(5, 7))),
    "s32_2d": ((1, 2, 3, 4), (2, 3, 64, 64), dict(strides=(32, 32), pads=(0, 0, 0, 0))),
    "s64_1d": ((1, 3, 4), (3, 2, 128), dict(strides=(64,), pads=(0, 0))),
}


def _interleaved(x, w, params):
    _, plan = plan_of("portable", x, w, **params)
    return bool(np.any(plan.stacks["interleave"]))


@pytest.mark.parametrize("engine", KERNEL_ENGINES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_stacked_residues_match_reference(name, dtype, engine):
    x, w, b, params = case_operands(CASES, name, dtype)
    assert _interleaved(x, w, params), "the case no longer interleaves its residues"
    for bias in (b, None):
        y = run_engine(engine, x, w, bias, num_threads=2, **params)
        assert_matches_reference(y, x, w, bias, **params)


def test_more_residues_than_the_limit_are_written_one_by_one(monkeypatch):
    x, w, b, params = case_operands(CASES, "s32_2d", np.float32)
    together = run_engine("gemm-portable", x, w, b, **params)
    monkeypatch.setattr(_plan, "MAX_SIBLINGS", 16)
    _plan.gemm_plan.cache_clear()  # plans are cached, not keyed on _plan's constants
    _engine._execution.cache_clear()
    try:
        assert not _interleaved(x, w, params)
        separate = run_engine("gemm-portable", x, w, b, **params)
    finally:
        monkeypatch.undo()
        _plan.gemm_plan.cache_clear()
        _engine._execution.cache_clear()
    np.testing.assert_array_equal(together, separate)
    assert_matches_reference(separate, x, w, b, **params)


def test_plans_interleave_no_more_residues_than_the_scatter_holds():
    assert _plan.MAX_SIBLINGS == load().SCATTER_MAX_SIBLINGS
