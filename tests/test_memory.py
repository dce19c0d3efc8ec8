"""Workspace is bounded: it does not grow with the volume (no column buffers)."""

import numpy as np
import pytest

from convt import _dispatch

from _helpers import plan_of

KERNEL_SETS = _dispatch.available_kernel_sets()


def _workspace_bytes(side, kernel_set, dtype=np.float32):
    x = np.empty((1, 32, side, side, side), dtype)
    w = np.empty((32, 16, 4, 4, 4), dtype)
    decision, plan = plan_of(kernel_set, x, w, strides=(2, 2, 2), pads=(1,) * 6)
    return plan.workspace_per_thread * decision.accumulation.itemsize, plan


@pytest.mark.parametrize("kernel_set", KERNEL_SETS)
def test_workspace_does_not_grow_with_the_volume(kernel_set):
    # The per-thread workspace is bounded by the tile budgets whatever the volume:
    # the same bound holds for 48^3 and for a 64x larger 192^3 volume.
    bound = _dispatch.OPERAND_BYTES + _dispatch.PRODUCT_BYTES + _dispatch.MAX_DEPTH * 64 + 64
    for side in (48, 96, 192):
        size, plan = _workspace_bytes(side, kernel_set)
        assert size <= bound, side
        # packed weights are the size of w, whatever the volume
        assert plan.packed_size == 32 * 16 * 4 * 4 * 4


def test_direct_engine_workspace_is_a_few_rows():
    x = np.empty((1, 64, 2048, 2048), np.float32)
    w = np.empty((64, 1, 4, 4), np.float32)
    _, plan = plan_of(None, x, w, engine="direct", strides=(2, 2), pads=(1, 1, 1, 1), group=64)
    assert plan.layout["floats"][0] * 4 < 200 * 2**10  # one output row by phase and 16 input rows
