"""Weight-bound ConvTranspose on small maps by col2im (driven by
``col2im_conv_transpose`` in _col2im.pxi).

On a map of a few dozen positions with many channels (the first layers of a
DCGAN generator: 1024 -> 512 on 4x4, 512 -> 256 on 8x8), every weight is used
by a few positions only, so the call is bound by reading the weights.  The GEMM
engine reads them three times (the weights and the copy its cache compares them
with, then the packed weights); col2im reads them once, front to back: the
products of every input position with every (output channel, tap) column of w,
``C[p, m * taps + t] = sum_c x[c, p] w[c, m, t]``, are computed by the set's gemm
kernels with w's rows as B (read in place by the gemm_stream kernels of sets that
have them, else copied chunk by chunk into panels in L2, front to back), then
added to the outputs they land on.  The rule
that picks it is :func:`convt._dispatch.col2im_route`.

Every product of the definition is computed once and added to its output, so
Inf and NaN propagate as the definition says; products landing outside the
output (cropped by the pads) are dropped, as there.  Each output sums its
products in a fixed order (position, then tap), whatever the thread count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _dispatch, _weight_cache, _workspace
from ._compiled import load


@dataclass(frozen=True)
class Col2imRun:
    """How a col2im call is blocked (one per prepared call)."""

    family: str            # the kernel set whose gemm kernels run
    mr: int                # its kernels' rows (positions per kernel call)
    nr: int                # its kernels' columns
    fixed_nr: int          # fixed weights: positions per kernel call (nr, or the half
                           # kernels' nr / 2 where all positions fit in them)
    run: int               # output channels per work item
    work_items: int
    depth_chunk: int       # input channels per kernel call (and per copy of w's panels)
    sum_block: int         # blocked-sum steps
    multiply_adds: int     # with the products cropped by the pads
    table: np.ndarray      # (positions, taps): output index in a plane, or -1


def _targets(geometry):
    """(positions, taps) array: the index, in a C-ordered output plane, of the output
    that input position p's tap t lands on, or -1 when the pads crop it."""
    index = None
    valid = None
    for axis in range(geometry.ndim):
        size_in = geometry.input_shape[axis]
        size_out = geometry.output_shape[axis]
        inputs = np.arange(size_in)[:, None]
        taps = np.arange(geometry.kernel_shape[axis])[None, :]
        out = (inputs * geometry.strides[axis] - geometry.pads_begin[axis]
               + taps * geometry.dilations[axis])               # (in, k)
        inside = (out >= 0) & (out < size_out)
        if index is None:
            index, valid = out, inside
            continue
        # positions and taps in C order: earlier axes vary slowest
        index = (index[:, None, :, None] * size_out + out[None, :, None, :])
        valid = valid[:, None, :, None] & inside[None, :, None, :]
        shape = (index.shape[0] * index.shape[1], index.shape[2] * index.shape[3])
        index, valid = index.reshape(shape), valid.reshape(shape)
    return np.ascontiguousarray(np.where(valid, index, -1), dtype=np.intp)


def plan(problem, decision):
    """The Col2imRun of a problem that col2im_route accepts."""
    geometry = problem.geometry
    mr, nr = decision.blocking.mr, decision.blocking.nr
    positions = _dispatch.col2im_positions(problem)  # every image's, stacked
    taps = math.prod(geometry.kernel_shape)
    itemsize = decision.accumulation.itemsize
    # the item's products stay within COL2IM_PRODUCT_BYTES, and the items keep the
    # threads busy (work_items_target) where the channels allow
    fitting = max(1, _dispatch.COL2IM_PRODUCT_BYTES // (positions * taps * itemsize))
    wanted = max(1, -(-_dispatch.work_items_target() // problem.group))
    # and the panels of w it copies per K chunk of COL2IM_DEPTH input channels
    panel_bytes = _dispatch.col2im_panel_bytes()
    panels = max(1, panel_bytes // (min(problem.cg, _dispatch.COL2IM_DEPTH) * taps * itemsize))
    run = max(1, min(problem.mg, fitting, panels, -(-problem.mg // wanted)))
    # whole panels of columns where the channels allow
    unit = nr // math.gcd(nr, taps)
    if run > unit:
        run = run // unit * unit
    runs = -(-problem.mg // run)
    table = _targets(geometry)
    # the item's panels of w (its columns x the chunk) stay within col2im_panel_bytes
    panel_columns = -(-run * taps // nr) * nr
    depth_chunk = max(1, min(problem.cg, _dispatch.COL2IM_DEPTH,
                             panel_bytes // (panel_columns * itemsize)))
    # fixed weights: x's positions are the vectors; half panels where they all fit
    kernels = _dispatch.family_named(decision.kernel_set).kernel_set(decision.accumulation)
    fixed_nr = nr // 2 if positions <= nr // 2 and kernels.has(_dispatch.SET_HALF) else nr
    # each product sums all input channels, as a Conv's does: the GEMM engine's blocks
    return Col2imRun(decision.kernel_set, mr, nr, fixed_nr, run, problem.group * runs,
                     depth_chunk, decision.blocking.sum_block(problem.cg, problem.cg),
                     int((table >= 0).sum()) * problem.cg * problem.mg * problem.group
                     * problem.batch, table)


def _positions(x):
    """x (N, C, spatial...) as (N, C, P) with unit position stride (a view where
    x's spatial axes allow it, else a C-order copy)."""
    batch, channels = x.shape[:2]
    flat = x.reshape(batch, channels, -1)
    if flat.strides[2] != x.itemsize and flat.shape[2] > 1:
        flat = np.ascontiguousarray(flat)
    return flat


def _packed_shape(x_shape, group, width, padded):
    """The shape of packed_input (``padded`` False) or input_panels (True) of an x of
    ``x_shape`` in blocks of ``width`` positions."""
    stacked = x_shape[0] * math.prod(x_shape[2:])
    cg = x_shape[1] // group
    if padded:
        return (group, -(-stacked // width), cg, width)
    return (group, cg * stacked)


def _pack(x, group, width, padded, out):
    """x packed by col2im_pack_positions into ``out`` (None: a new array)."""
    if out is None:
        out = np.empty(_packed_shape(x.shape, group, width, padded), x.dtype)
    load().col2im_pack_positions(_positions(x), group, width, padded, out.reshape(group, -1))
    return out


def packed_input(x, group, mr, out=None):
    """x (N, C, spatial...) as (G, Cg * N P): per group, its images' positions stacked
    in row blocks of ``mr`` ([block][Cg][rows of the block]); into ``out`` when given
    (C-contiguous, of that shape and x's dtype)."""
    return _pack(x, group, mr, False, out)


def run(col2im, x, w, b, y, group, threads):
    """Fill ``y`` with ConvTranspose(x, w, b); False (nothing written) when x and y
    differ in dtype.  The result does not depend on the operands' layouts: x is
    packed whatever its layout, w of any other layout than C order (whose (output
    channel, tap) columns are one run per input channel) is copied to it first, and
    a y in another layout (channels-last outputs, data_format "NXC") is written
    through a C-order array.  So a bound layer, which keeps its copy of w in w's
    memory order, gives the bits of ``apply``, and channels-last data those of
    channels-first."""
    batch, channels = x.shape[:2]
    dtype = y.dtype
    if x.dtype != dtype:
        return False
    target = y if y.flags.c_contiguous else np.empty(y.shape, dtype)
    if not w.flags.c_contiguous:
        w = np.ascontiguousarray(w)
    grouped = w.reshape((group, channels // group, -1))
    bias = None if b is None else np.ascontiguousarray(b, dtype=dtype)
    planes = target.reshape(batch, y.shape[1], -1)
    fixed = _weight_cache.fixed_weights_of(grouped)
    width = col2im.fixed_nr if fixed is not None else col2im.mr
    # (a fresh array would be faulted in on every call)
    x_packed, loan = _workspace.lend(_packed_shape(x.shape, group, width, fixed is not None),
                                     dtype)
    try:
        if fixed is not None:
            load().col2im_conv_transpose_fixed(
                col2im.family, input_panels(x, group, width, x_packed),
                made_blocks(col2im, grouped, fixed),
                bias, planes, col2im.table, channels // group, col2im.run, col2im.depth_chunk,
                col2im.sum_block, threads, _workspace)
        else:
            load().col2im_conv_transpose(
                col2im.family, packed_input(x, group, width, x_packed), grouped,
                bias, planes, col2im.table, col2im.run, col2im.depth_chunk,
                col2im.sum_block, threads, _workspace)
    finally:
        _workspace.give_back(loan)
    if target is not y:
        y[...] = target
    return True


def input_panels(x, group, nr, out=None):
    """x (N, C, spatial...) as (G, L / nr, Cg, nr): per group, its images' N P
    positions stacked in panels of ``nr`` ([panel][channel][position]), zeros past
    them (L: the next multiple of nr), so that a kernel call reads one contiguous
    panel; into ``out`` when given (C-contiguous, of that shape and x's dtype)."""
    return _pack(x, group, nr, True, out)


def made_blocks(col2im, grouped, fixed):
    """Fixed weights (a bound layer's, see convt._bound) as col2im's column blocks for
    this run, made on its first call and kept with them."""
    key = ("col2im", id(col2im), grouped.shape, grouped.strides)
    made = fixed.find(key, col2im)
    if made is None:
        made = load().col2im_make_blocks(grouped, col2im.mr, col2im.run, col2im.table.shape[1])
        fixed.keep(key, col2im, made)
    return made


def describe(col2im, bound=False):
    """One line for :func:`convt.explain` (``bound``: a BoundLayer's call)."""
    positions, taps = col2im.table.shape
    reads = ("w's columns read from blocks made on the first call" if bound
             else "w read once per call (not packed and cached)")
    return (f"col2im: the products of the {positions} input positions with every (output "
            f"channel, tap) column of w, {reads}, added "
            f"to the outputs they land on; {col2im.run} output channel(s) per work item, "
            f"{col2im.work_items} work items, K chunks of {col2im.depth_chunk}, blocked sums "
            f"of {col2im.sum_block}, kernel set {col2im.family}")
