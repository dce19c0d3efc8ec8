"""Choosing and running a kernel for one validated ConvTranspose call."""

from __future__ import annotations

import contextlib
import functools
import math
import os

import numpy as np

from . import _kernels
from ._arrays import ACCUMULATION_DTYPE, STORAGE_KIND, element_strides
from ._blas import controller as blas_controller
from ._plan import direct_plan, gemm_plan, max_stack_taps

# Upper bound on OpenMP threads: more would only add workspace, never speed.
MAX_THREADS = 256
# The direct engine is chosen below this many multiply-adds per output position
# and group (cg * mg * kernel size), where the GEMM's row blocks and depth are a
# few elements.  Measured on 2 Zen 4 cores, interleaved: direct wins 1.05-1.7x at
# 4-9 (1 channel k2s2 and k3s1, depthwise k2s2 and k3s1), the GEMM engine wins
# 1.04-1.8x at 16 (depthwise k4s2, single-channel k4s2 on 2048^2 and in 1-D)
# and 1.1-3.9x above (3-D, more channels).
DIRECT_MAX_WORK = 16


def resolve_threads(num_threads, work_units):
    """Threads to use: all the process may use by default, never more than the work."""
    if num_threads is None:
        num_threads = _kernels.max_threads()
    return max(1, min(num_threads, work_units, MAX_THREADS))


def fill_with_bias(y, b):
    """y[n, m, ...] = b[m] (or 0 without bias)."""
    if b is None:
        y.fill(0)
    else:
        y[...] = b.reshape((1, -1) + (1,) * (y.ndim - 2))


def _spatially_contiguous(array):
    expected = 1
    strides = element_strides(array)
    for size, stride in zip(reversed(array.shape[2:]), reversed(strides[2:])):
        if size > 1 and stride != expected:
            return False
        expected *= size
    return 0 < strides[1] < 2**31 and strides[1] >= expected


def choose_engine(geometry, cg, mg):
    """'direct' when the GEMM would be a few multiply-adds per position, else 'gemm'."""
    if cg * mg * math.prod(geometry.kernel_shape) < DIRECT_MAX_WORK:
        return "direct"
    return "gemm"


BACKEND_VARIABLE = "CONVT_GEMM_BACKEND"


# Below this reduction depth (input channels per group x taps of a stack) the
# AVX-512 kernels' register totals cost more than their wider FMAs give: on
# 2 Zen 4 cores, AVX2 was 5-6% faster at depths 4-32 (depthwise, 3-D with 4
# channels) and AVX-512 0-15% faster from 64 up.
AVX512_MIN_DEPTH = 64


@functools.cache
def default_backend():
    """The GEMM backend to use: convt's own micro-kernels where the CPU has them, else BLAS.

    The environment variable CONVT_GEMM_BACKEND (avx512, avx2, portable, blas)
    overrides the choice; a backend the machine cannot run is refused loudly.
    """
    requested = os.environ.get(BACKEND_VARIABLE)
    if requested:
        available = _kernels.available_backends()
        if requested not in available:
            raise ValueError(
                f"{BACKEND_VARIABLE}={requested!r} cannot be used here; this machine can run "
                f"{', '.join(repr(name) for name in available)}."
            )
        return requested
    return _kernels.preferred_backend()


def backend_for(geometry, cg):
    """The default backend, with AVX2 instead of AVX-512 for shallow reductions
    (unless CONVT_GEMM_BACKEND asked for AVX-512)."""
    backend = default_backend()
    if (
        backend == "avx512"
        and not os.environ.get(BACKEND_VARIABLE)
        and cg * max_stack_taps(geometry) < AVX512_MIN_DEPTH
        and "avx2" in _kernels.available_backends()
    ):
        return "avx2"
    return backend


def compute(x, w, b, y, geometry, group, num_threads, engine=None, backend=None):
    """Fill ``y`` with ConvTranspose(x, w, b); all arguments already validated.

    ``engine`` forces 'gemm' or 'direct' and ``backend`` a backend ('avx512',
    'avx2', 'portable', 'blas'); tests use them to cover every path.
    """
    batch, channels = x.shape[:2]
    out_channels = y.shape[1]
    if batch == 0 or out_channels == 0:
        return y
    cg, mg = channels // group, out_channels // group
    if cg == 0:
        fill_with_bias(y, b)
        return y
    if b is not None:
        b = np.ascontiguousarray(b)
    engine = engine or choose_engine(geometry, cg, mg)
    if engine == "gemm":
        _run_gemm(x, w, b, y, geometry, group, num_threads, backend or backend_for(geometry, cg))
    else:
        _run_direct(x, w, b, y, geometry, group, num_threads, backend or default_backend())
    return y


def _run_gemm(x, w, b, y, geometry, group, num_threads, backend):
    batch, channels = x.shape[:2]
    cg, mg = channels // group, y.shape[1] // group
    acc = ACCUMULATION_DTYPE[x.dtype]
    kind = STORAGE_KIND[x.dtype]
    backend_id, row_block, panel = _kernels.backend_shape(backend, acc == np.float64)
    plan = gemm_plan(geometry, batch, cg, mg, group, row_block, panel, acc.itemsize,
                     pairs=backend == "avx512")
    if plan.needs_fill:
        fill_with_bias(y, b)
    threads = resolve_threads(num_threads, len(plan.items))
    packed = np.empty(plan.packed_size, dtype=acc)
    _kernels.pack_weights(w, kind, element_strides(w), packed, plan.stacks, plan.kernel_index,
                          plan.block_starts, group, cg, mg, threads)
    workspace = np.empty((threads, plan.workspace_per_thread), dtype=acc)
    scratch = np.empty((threads, geometry.ndim), dtype=np.intp)
    input_is_tile = backend == "blas" and x.dtype == acc and _spatially_contiguous(x)
    # BLAS is called from convt's own threads: hold its pool at one thread meanwhile
    guard = blas_controller().single_threaded() if backend == "blas" else contextlib.nullcontext()
    with guard:
        _kernels.run_gemm(
            x, y, b, kind, backend_id, element_strides(x), element_strides(y), plan.in_size,
            plan.conv_strides, cg, mg, plan.stacks, plan.stack_axes, plan.tap_offsets,
            plan.buffer_offsets, plan.phases, plan.items, packed, workspace, scratch,
            plan.operand_capacity, plan.product_capacity, plan.panel_offsets,
            plan.block_starts, input_is_tile,
            None if b is None else np.ascontiguousarray(b, dtype=acc), threads,
        )


def _run_direct(x, w, b, y, geometry, group, num_threads, backend):
    batch, channels = x.shape[:2]
    out_channels = y.shape[1]
    acc = ACCUMULATION_DTYPE[x.dtype]
    plan = direct_plan(geometry, batch, out_channels)
    threads = resolve_threads(num_threads, plan.rows)
    floats, ints = _kernels.direct_workspace(
        plan.row_buffers, geometry.input_shape[-1], plan.tap_kernel.shape[2], geometry.ndim)
    workspace = np.empty((threads, floats), dtype=acc)
    scratch = np.zeros((threads, ints), dtype=np.intp)
    # the portable phase kernel stands in for BLAS, which the direct engine does not use
    backend_id = _kernels.backend_shape("portable" if backend == "blas" else backend,
                                        acc == np.float64)[0]
    _kernels.run_direct(
        x, w, y, b, STORAGE_KIND[x.dtype], backend_id,
        element_strides(x), element_strides(w), element_strides(y),
        plan.in_size, plan.out_size, plan.conv_strides, channels // group, out_channels // group, out_channels,
        plan.tap_count, plan.tap_kernel, plan.tap_offset, plan.phase_length,
        workspace, scratch, plan.rows, threads,
    )


def flop_count(x_shape, w_shape):
    """Floating-point operations (2 per multiply-add) of the textbook ConvTranspose."""
    batch, channels = x_shape[:2]
    return 2 * batch * channels * w_shape[1] * math.prod(x_shape[2:]) * math.prod(w_shape[2:])
