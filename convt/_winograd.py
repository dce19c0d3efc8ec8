"""Winograd for float32 layers: F(2x2, 3x3) for 2-D Conv and stride-1 ConvTranspose
(the Conv with the flipped kernel), F(2x2x2, 3x3x3) for 3-D Conv: blocking,
transformed weights, the call.

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

import math
from dataclasses import dataclass

import numpy as np

from . import _dispatch, _weight_cache
from ._compiled import load

# G of F(2x2, 3x3): U = G g G^T for each 3x3 kernel g (exact in float64).
G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
KRON_G = np.kron(G, G)  # U[4 i + j] = sum over k, l of G[i, k] G[j, l] g[3 k + l]
KRON_G3 = np.kron(G, KRON_G)  # the same along three axes: 64 x 27


@dataclass(frozen=True, eq=False)
class WinogradRun:
    """How a Winograd call is blocked (see winograd_conv in _winograd.pxi); one per
    prepared call, also the weight cache's key."""

    family: str          # kernel set of the products' GEMM micro-kernels
    transpose: bool      # a ConvTranspose: the Conv with the flipped kernel
    mr: int              # its rows per block: the packing's row blocks
    layout: dict         # tile_rows, tiles, capacity, channel_chunk, out_chunk, block
    work_items: int
    multiply_adds: int   # the GEMM's, for the thread count


def plan(problem, decision):
    """The WinogradRun of a problem that winograd_route accepts."""
    family, mr, nr = decision.kernel_set, decision.blocking.mr, decision.blocking.nr
    grid = _dispatch.winograd_tiles(problem.geometry)
    out_rows, out_cols = grid[-2:]
    tile_planes = grid[0] if len(grid) == 3 else 1
    points = 4 ** len(grid)
    tiles = min(out_cols, _dispatch.WINOGRAD_TILES)
    tile_rows = max(1, min(out_rows, _dispatch.WINOGRAD_TILES // tiles))
    shrink = 2 if len(grid) == 3 else 1  # 3-D: 64 values per tile, half the channels
    channel_chunk = _dispatch.WINOGRAD_CHANNEL_CHUNK // shrink
    chunks = -(-problem.mg // (_dispatch.WINOGRAD_OUT_CHUNK // shrink))
    per_block = problem.batch * problem.group * tile_planes * -(-out_cols // tiles) * chunks
    cores = decision.blocking.cores if decision.blocking is not None else 1
    while tile_rows > 1 and per_block * -(-out_rows // tile_rows) < cores:
        tile_rows = -(-tile_rows // 2)  # a small map: blocks for every core
    panel = nr // 2 if decision.half_panels else nr  # the narrowest kernel call
    capacity = -(-tile_rows * tiles // panel) * panel
    out_chunk = min(problem.mg, -(-(-(-problem.mg // chunks)) // mr) * mr)  # equal chunks
    cg = problem.cg
    block = (_dispatch.WINOGRAD_TRANSPOSE_SUM_BLOCK if problem.transpose
             else _dispatch.SUM_BLOCK_SHALLOW if cg <= _dispatch.SUM_BLOCK_SPLIT
             else _dispatch.SUM_BLOCK_DEEP)
    layout = dict(tile_rows=tile_rows, tiles=tiles, capacity=capacity,
                  channel_chunk=min(cg, channel_chunk),
                  out_chunk=out_chunk, block=block)
    items = (problem.batch * problem.group * tile_planes * -(-out_rows // tile_rows)
             * -(-out_cols // tiles) * -(-problem.mg // out_chunk))
    work = points * problem.batch * problem.group * problem.cg * problem.mg * math.prod(grid)
    return WinogradRun(family, problem.transpose, mr, layout, items, work)


def transformed_weights(w, group, mr):
    """U = G g G^T (3-D: G along each of the three axes) of Conv weights ``w`` (M,
    C/group, 3, 3[, 3]), packed as the driver reads them: per group and point (4 i + j;
    16 i + 4 j + k), the group's output channels in row blocks of ``mr``, each block
    [C/group][rows].  One float64 matrix product by the Kronecker product of the G's
    gives the values point-major, so the packing moves whole row blocks."""
    m_total, cg = w.shape[:2]
    mg = m_total // group
    kron = KRON_G if w.ndim == 4 else KRON_G3
    points, size = kron.shape
    taps = np.ascontiguousarray(w.reshape(m_total * cg, size).T, dtype=np.float64)
    u = (kron @ taps).astype(np.float32).reshape(points, group, mg, cg).swapaxes(0, 1)
    packed = np.empty((group, points, mg * cg), dtype=np.float32)
    full = mg // mr * mr
    packed[:, :, :full * cg] = (u[:, :, :full].reshape(group, points, mg // mr, mr, cg)
                                .swapaxes(3, 4).reshape(group, points, -1))
    if full < mg:  # the last, shorter row block
        packed[:, :, full * cg:] = u[:, :, full:].swapaxes(2, 3).reshape(group, points, -1)
    return packed


def conv_weights(w, group):
    """The Conv weights (M, C/group, 3, ...) of ConvTranspose weights ``w`` (C, M/group,
    3, ...): each group's channel axes swapped, the kernel flipped along every axis."""
    channels, mg = w.shape[:2]
    cg = channels // group
    grouped = w.reshape((group, cg, mg) + w.shape[2:]).swapaxes(1, 2)
    flipped = grouped[(slice(None),) * 3 + (slice(None, None, -1),) * (w.ndim - 2)]
    return flipped.reshape((group * mg, cg) + w.shape[2:])


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
    packed = transformed_weights(conv_weights(w, group) if run.transpose else w, group, run.mr)
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
    drive = load().winograd_conv
    pads = tuple(geometry.pads_begin)
    if winograd.transpose:  # output o reads input o + pad - k: a Conv padded by 2 - pad
        pads = tuple(2 - pad for pad in pads)
    return drive(winograd.family, x, packed, bias, y, group, pads, winograd.layout, threads)
