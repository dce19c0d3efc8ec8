"""Test configuration: hypothesis profile and fixtures."""

import os

import pytest
from hypothesis import HealthCheck, settings

from convt import _dispatch, _plan

settings.register_profile(
    "default",
    deadline=None,
    max_examples=int(os.environ.get("CONVT_HYPOTHESIS_EXAMPLES", "250")),
    # small_tiles patches module constants once per test: sharing it across examples is intended.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture],
)
settings.load_profile("default")


@pytest.fixture
def small_tiles(monkeypatch):
    """Tiny GEMM tiles and K chunks, so small problems cross tile and chunk edges."""
    monkeypatch.setattr(_dispatch, "OPERAND_BYTES", 160)
    monkeypatch.setattr(_dispatch, "PRODUCT_BYTES", 160)
    monkeypatch.setattr(_dispatch, "MAX_DEPTH", 3)
    monkeypatch.setattr(_dispatch, "MIN_TILE", 3)
    _plan.gemm_plan.cache_clear()
    yield
    _plan.gemm_plan.cache_clear()
