"""Test configuration: hypothesis profile and fixtures."""

import os

import pytest
from hypothesis import HealthCheck, settings

from convt import _dispatch

settings.register_profile(
    "default",
    deadline=None,
    max_examples=int(os.environ.get("CONVT_HYPOTHESIS_EXAMPLES", "250")),
    # small_tiles patches module constants once per test: sharing it across examples is intended.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture],
)
settings.load_profile("default")

# CONVT_TEST_WITHOUT_RUNTIMES=1 (tools/sanitize.sh): the other runtimes' differential
# tests skip as if those packages were absent; their native code aborts under a
# preloaded AddressSanitizer runtime, which says nothing about convt.
if os.environ.get("CONVT_TEST_WITHOUT_RUNTIMES"):
    import sys

    class _HiddenRuntimes:
        """An import finder under which these packages cannot be imported."""

        names = ("openvino", "onnxruntime", "torch")

        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in self.names:
                raise ModuleNotFoundError(f"{name} is hidden (CONVT_TEST_WITHOUT_RUNTIMES)")
            return None

    sys.meta_path.insert(0, _HiddenRuntimes())


@pytest.fixture
def threads_for_any_work(monkeypatch):
    """Test problems are small: let them use the threads a test asks for, so that
    work sharing is exercised (by default a thread needs at least
    MIN_MULTIPLY_ADDS_PER_THREAD of work)."""
    monkeypatch.setattr(_dispatch, "MIN_MULTIPLY_ADDS_PER_THREAD", 1)


@pytest.fixture
def small_tiles(monkeypatch, threads_for_any_work):
    """Tiny GEMM tiles and K chunks, so small problems cross tile and chunk edges,
    shared by the threads a test asks for."""
    monkeypatch.setattr(_dispatch, "OPERAND_BYTES", 160)
    monkeypatch.setattr(_dispatch, "PRODUCT_BYTES", 160)
    monkeypatch.setattr(_dispatch, "MAX_DEPTH", 3)
    monkeypatch.setattr(_dispatch, "MIN_TILE", 3)
