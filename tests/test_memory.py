"""Workspace is bounded: it does not grow with the volume (no column buffers)."""

import numpy as np
import pytest

from convt import ConvTranspose, _kernels, _plan

BACKENDS = _kernels.available_backends()


def _workspace_bytes(shape, backend, dtype=np.float32):
    layer = ConvTranspose(strides=(2, 2, 2), pads=(1,) * 6)
    geometry = layer._geometry_for(shape, (32, 16, 4, 4, 4))
    _, row_block, panel = _kernels.backend_shape(backend, dtype == np.float64)
    itemsize = np.dtype(dtype).itemsize
    plan = _plan.gemm_plan(geometry, shape[0], 32, 16, 1, row_block, panel, itemsize)
    return plan.workspace_per_thread * itemsize, plan


@pytest.mark.parametrize("backend", BACKENDS)
def test_workspace_does_not_grow_with_the_volume(backend):
    # The per-thread workspace is bounded by the tile budgets whatever the volume:
    # the same bound holds for 48^3 and for a 64x larger 192^3 volume.
    bound = _plan.OPERAND_BYTES + _plan.PRODUCT_BYTES + _plan.MAX_DEPTH * 64 + 64
    for side in (48, 96, 192):
        size, plan = _workspace_bytes((1, 32, side, side, side), backend)
        assert size <= bound, side
        # packed weights are the size of w, whatever the volume
        assert plan.packed_size == 32 * 16 * 4 * 4 * 4


def test_direct_engine_workspace_is_a_few_rows():
    layer = ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1), group=64)
    geometry = layer._geometry_for((1, 64, 2048, 2048), (64, 1, 4, 4))
    plan = _plan.direct_plan(geometry, 1, 64)
    floats, ints = _kernels.direct_workspace(plan.row_buffers, 2048, plan.tap_kernel.shape[2], 2)
    assert floats * 4 < 200 * 2**10  # one output row by phase and 16 input rows
