"""Winograd: F(2x2, 3x3) for float32 2-D Conv and stride-1 ConvTranspose (the Conv
with the flipped kernel), F(2x2x2, 3x3x3) for float32 3-D Conv, and F(2x2, 2x2) for
2-D ConvTranspose whose kernel is twice its stride (k4 s2, k2 s1, k8 s4; float32,
float16, bfloat16): each stride phase of its output is a 2x2 Conv of x (see
:func:`phases_of`), and one driver call interleaves the phases into whole rows of y:
blocking, transformed weights, the call.

The rule that picks it is :func:`convt._dispatch.winograd_route`; the transforms
are convt/src/winograd_body.h (compiled per kernel set) and the driver
``winograd_conv`` in _winograd.pxi.  The weights are transformed in float64
(U = G g G^T, G along each axis, rounded once to float32),
packed in the kernel set's row blocks, and remembered between calls by
convt._weight_cache (reused only for bitwise-equal weights).  Non-finite
weights, inputs or outputs send the call to the GEMM engine, whose arithmetic
follows the definition's products one by one (0 x Inf is NaN where it says).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from . import _dispatch, _weight_cache, _workspace
from ._compiled import load

# G of F(2x2, 3x3) and of F(2x2, 2x2): U = G g G^T for each 3x3 (2x2) kernel g,
# G along every kernel axis (winograd_weight_transform in _winograd.pxi computes it).
G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
G2 = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])


@dataclass(frozen=True)
class Phase:
    """One stride phase of a ConvTranspose whose kernel is twice its stride, as the
    2x2 Conv of x that computes it: its outputs are y[..., first[0]::s, first[1]::s]."""

    first: tuple         # (row, column) of its first output
    taps: tuple          # per axis, the kernel indices it reads, in the Conv's order
    pads: tuple          # the Conv's begin pads (top, left); negative: it starts inside x


def phases_of(geometry):
    """The Phases of a 2-D ConvTranspose with kernel 2 s, dilation 1 (stride s per
    axis) that have outputs.

    Output o = s t + r reads the inputs i with o = s i + k - pad: the taps k that
    leave ``r + pad - k`` a multiple of s, k0 = (r + pad) mod s and k0 + s, at
    i = t + c and t + c - 1 (c = (r + pad) // s).  As a Conv, the phase reads x from
    t - (1 - c) with the kernel (w[k0 + s], w[k0]).
    """
    per_axis = []
    for size, stride, pad in zip(geometry.output_shape, geometry.strides,
                                 geometry.pads_begin):
        axis = []
        for residue in range(min(stride, size)):
            c, k0 = divmod(residue + pad, stride)
            axis.append((residue, (k0 + stride, k0), 1 - c))
        per_axis.append(axis)
    return tuple(Phase((row[0], col[0]), (row[1], col[1]), (row[2], col[2]))
                 for row in per_axis[0] for col in per_axis[1])


@dataclass(frozen=True, eq=False)
class WinogradRun:
    """How a Winograd call is blocked (see winograd_conv in _winograd.pxi); one per
    prepared call, also the weight cache's key."""

    family: str          # kernel set of the products' GEMM micro-kernels
    transpose: bool      # a ConvTranspose: the Conv with the flipped kernel
    mr: int              # its rows per block: the packing's row blocks
    layout: dict         # taps, tile_rows, tiles, capacity, channel_chunk, out_chunk, block
    work_items: int
    multiply_adds: int   # the GEMM's, for the thread count
    phases: tuple = ()   # F(2x2, 2x2): the ConvTranspose's stride phases, row-major
    strides: tuple = ()  # and its strides
    phase_table: np.ndarray = None  # (phases, 4) intp: first row, column, pads (the driver's)


def plan(problem, decision):
    """The WinogradRun of a problem that winograd_route accepts, the same object for
    every call of a problem (per decision and tuning): the weight cache finds the
    transformed weights of an earlier call only under the same run."""
    return _plan(problem, decision, _dispatch.tuning())


@functools.lru_cache(maxsize=64)
def _plan(problem, decision, tuning):
    family, mr, nr = decision.kernel_set, decision.blocking.mr, decision.blocking.nr
    geometry = problem.geometry
    phases = phases_of(geometry) if _dispatch.winograd_phased(problem) else ()
    taps = 2 if phases else 3
    # phases: the first phase's outputs, the most; its blocking fits the others
    grid = _dispatch.winograd_tiles(geometry, geometry.strides if phases else None)
    out_rows, out_cols = grid[-2:]
    tile_planes = grid[0] if len(grid) == 3 else 1
    points = (taps + 1) ** len(grid)
    tiles = min(out_cols, _dispatch.WINOGRAD_TILES)
    tile_rows = max(1, min(out_rows, _dispatch.WINOGRAD_TILES // tiles))
    shrink = 2 if len(grid) == 3 else 1  # 3-D: 64 values per tile, half the channels
    channel_chunk = _dispatch.WINOGRAD_CHANNEL_CHUNK // shrink
    chunks = -(-problem.mg // (_dispatch.WINOGRAD_PHASE_OUT_CHUNK if phases
                               else _dispatch.WINOGRAD_OUT_CHUNK // shrink))
    per_block = problem.batch * problem.group * tile_planes * -(-out_cols // tiles) * chunks
    cores = decision.blocking.cores if decision.blocking is not None else 1
    while tile_rows > 1 and per_block * -(-out_rows // tile_rows) < cores:
        tile_rows = -(-tile_rows // 2)  # a small map: blocks for every core
    panel = nr // 2 if decision.half_panels else nr  # the narrowest kernel call
    capacity = -(-tile_rows * tiles // panel) * panel
    if phases:  # an item also holds its block of y rows (a row residue's phases)
        block_bytes = 4 * geometry.strides[-1] * 4 * tile_rows * tiles
        chunks = max(chunks, -(-problem.mg // max(mr, _dispatch.WINOGRAD_PHASE_BLOCK_BYTES
                                                   // block_bytes)))
    out_chunk = min(problem.mg, -(-(-(-problem.mg // chunks)) // mr) * mr)  # equal chunks
    cg = problem.cg
    block = (_dispatch.WINOGRAD_PHASE_SUM_BLOCK if phases
             else _dispatch.WINOGRAD_TRANSPOSE_SUM_BLOCK if problem.transpose
             else _dispatch.SUM_BLOCK_SHALLOW if cg <= _dispatch.SUM_BLOCK_SPLIT
             else _dispatch.SUM_BLOCK_DEEP)
    layout = dict(taps=taps, tile_rows=tile_rows, tiles=tiles, capacity=capacity,
                  channel_chunk=min(cg, channel_chunk),
                  out_chunk=out_chunk, block=block)
    items = (problem.batch * problem.group * tile_planes * -(-out_rows // tile_rows)
             * -(-out_cols // tiles) * -(-problem.mg // out_chunk)
             * (min(geometry.strides[0], geometry.output_shape[0]) if phases else 1))
    work = (max(1, len(phases)) * points * problem.batch * problem.group * problem.cg
            * problem.mg * math.prod(grid))
    table = np.array([phase.first + phase.pads for phase in phases], dtype=np.intp)
    return WinogradRun(family, problem.transpose, mr, layout, items, work, phases,
                       tuple(geometry.strides) if phases else (), table if phases else None)


def transformed_weights(w, group, mr):
    """U = G g G^T (3-D: G along each of the three axes) of Conv weights ``w`` (M,
    C/group, 3, 3[, 3] or 2, 2), packed as the driver reads them: per group and point
    (4 i + j; 16 i + 4 j + k; 3 i + j for 2x2 kernels), the group's output channels
    in row blocks of ``mr``, each block [C/group][rows].  The kernels' values are
    first laid out in that packed order (one copy, widened to float64), so the
    compiled transform (``winograd_weight_transform``: G along each axis in float64,
    one rounding to float32) writes the packing itself."""
    m_total, cg = w.shape[:2]
    kernel = w.shape[2:]
    size = math.prod(kernel)
    mg = m_total // group
    full = mg // mr * mr
    grouped = w.reshape(group, mg, cg, size)
    points = math.prod(k + 1 for k in kernel)
    with _workspace.borrowed((size, group, mg * cg), np.float64) as taps:
        # full row blocks: [block][channel][row]; the last, shorter one: [channel][row]
        taps[:, :, :full * cg].reshape(size, group, mg // mr, cg, mr)[...] = (
            grouped[:, :full].reshape(group, mg // mr, mr, cg, size).transpose(4, 0, 1, 3, 2))
        if full < mg:
            taps[:, :, full * cg:].reshape(size, group, cg, mg - full)[...] = (
                grouped[:, full:].transpose(3, 0, 2, 1))
        packed = np.empty((points, group * mg * cg), dtype=np.float32)
        load().winograd_weight_transform(taps.reshape(size, -1), packed, kernel)
    packed = packed.reshape(points, group, mg * cg)
    return np.ascontiguousarray(packed.swapaxes(0, 1)) if group > 1 else packed.reshape(
        1, points, mg * cg)


def conv_weights(w, group):
    """The Conv weights (M, C/group, 3, ...) of ConvTranspose weights ``w`` (C, M/group,
    3, ...): each group's channel axes swapped, the kernel flipped along every axis."""
    channels, mg = w.shape[:2]
    cg = channels // group
    grouped = w.reshape((group, cg, mg) + w.shape[2:]).swapaxes(1, 2)
    flipped = grouped[(slice(None),) * 3 + (slice(None, None, -1),) * (w.ndim - 2)]
    return flipped.reshape((group * mg, cg) + w.shape[2:])


def phase_weights(w, group, phase):
    """The Conv weights (M, C/group, 2, 2) of ConvTranspose weights ``w`` (C,
    M/group, kH, kW) for one Phase: its taps, each group's channel axes swapped."""
    channels, mg = w.shape[:2]
    rows, cols = phase.taps
    taps = w[:, :, list(rows)][:, :, :, list(cols)]
    grouped = taps.reshape((group, channels // group, mg, 2, 2)).swapaxes(1, 2)
    return grouped.reshape((group * mg, channels // group, 2, 2))


@dataclass
class _Weights:
    """What convt._weight_cache reads of a call's arrays."""

    w: np.ndarray
    w_strides: np.ndarray


def packed_weights(run, w, group, threads):
    """The transformed weights of ``w`` for ``run``: remembered for bitwise-equal
    weights, else made (None when a weight is not finite)."""
    arrays = _Weights(w, np.array(w.strides, dtype=np.intp))
    packed, dense = _weight_cache.lookup(run, arrays, True, threads)
    if packed is not None:
        return packed
    if not np.isfinite(w).all():
        return None
    if run.phases:  # per phase, stacked
        packed = np.stack([transformed_weights(phase_weights(w, group, phase), group, run.mr)
                           for phase in run.phases])
    else:
        packed = transformed_weights(conv_weights(w, group) if run.transpose else w, group,
                                     run.mr)
    if dense is not None:
        _weight_cache.store(run, arrays, dense, True, packed)
    return packed


def run(winograd, x, w, b, y, geometry, group, threads):
    """Fill ``y`` with Conv(x, w, b) by Winograd; False (y undefined) when a weight,
    a transformed input or an output is not finite."""
    packed = packed_weights(winograd, w, group, threads)
    if packed is None:
        return False
    bias = None if b is None else np.ascontiguousarray(b, dtype=np.float32)
    if winograd.phases:
        return load().winograd_phases_conv(winograd.family, x, packed, bias, y, group,
                                           winograd.phase_table, winograd.strides,
                                           winograd.layout, threads)
    drive = load().winograd_conv
    pads = tuple(geometry.pads_begin)
    if winograd.transpose:  # output o reads input o + pad - k: a Conv padded by 2 - pad
        pads = tuple(2 - pad for pad in pads)
    return drive(winograd.family, x, packed, bias, y, group, pads, winograd.layout, threads)
