"""Depthwise planes: 2-D Conv with one input channel per group, a whole input plane
at a time (convt/src/plane.h, driven by ``plane_conv`` in _planes.pxi).

The rule that picks it is :func:`convt._dispatch.plane_route`.  A work item is
one image and a run of consecutive groups; each thread copies a group's input
plane into its zero-padded buffer once and sums every output plane of the group
from it.  The sums follow the stencil blocks' arithmetic (from zero, kernel rows
then taps, padding multiplied like any input, then the bias), so Inf and NaN
weights give what the Conv definition gives.

Strided depthwise calls with short output rows (see
:func:`convt._dispatch.plane_channel_block`) put the channels side by side
instead: a work item is one image and a block of channels, transposed into a
zero-padded [row][column][channel] buffer and summed with the channels as
vector lanes, in the same order, so the results are the same bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _dispatch, _environ, _workspace
from ._compiled import load


@dataclass(frozen=True)
class PlaneRun:
    """How a plane call is blocked (one per prepared call)."""

    family: str          # kernel set whose plane entry runs (else the baseline build)
    run: int             # groups per work item
    work_items: int
    multiply_adds: int   # in the GEMM engine's measure, for the thread count
                         # (convt._dispatch.PLANE_WORK_SCALE)
    buffer_bytes: int    # per thread
    pads: tuple          # begin pads (top, left), strides, dilations: plane_conv's
    strides: tuple
    dilations: tuple
    channel_block: int = 0   # channels side by side, this many per work item; 0: planes


def plan(problem, family, forced=None):
    """The PlaneRun of a problem that plane_route accepts, on kernel set ``family``
    (whose planes, or AVX2's, see convt._dispatch.plane_family; ``forced``: the
    set a caller forced).  Channels side by side run on the best set this CPU has
    (or the one forced): their vectors run along the channels, never past a row's
    end, so the widest serve best (AVX-512's ran 3x3 s2 x 576 and 5x5 s2 x 672 onto
    7x7 4-7% faster than AVX2's on one Zen 4 core)."""
    geometry = problem.geometry
    layout = (tuple(geometry.pads_begin), tuple(geometry.strides), tuple(geometry.dilations))
    block = _dispatch.plane_channel_block(problem)
    if block:
        if not forced and not _environ.value(_dispatch.KERNEL_SET_VARIABLE):
            family = _dispatch.preferred_kernel_set()  # not the GEMM decision's set
        return _channels_run(problem, _planes_family(family), block, layout)
    family = _planes_family(_dispatch.plane_family(problem, family, forced))
    groups = problem.group
    per_image = max(1, min(groups, -(-_dispatch.work_items_target() // problem.batch)))
    run = -(-groups // per_image)
    items = problem.batch * -(-groups // run)
    return PlaneRun(family, run, items, problem.multiply_adds() * _dispatch.PLANE_WORK_SCALE,
                    _dispatch.plane_bytes(problem), *layout)


def _planes_family(family):
    """The set whose plane entries serve: the portable set's where BLAS serves GEMMs."""
    return "portable" if family == "blas" else family


def _channels_run(problem, family, block, layout):
    """The PlaneRun of channels side by side, ``block`` channels per work item."""
    geometry = problem.geometry
    # the transposes move every input and output element once more, each about a
    # multiply-add's time (3x3 s2 onto 7x7 x 576: 0.25 M multiply-adds and 0.14 M
    # elements moved ran 0.049 ms on one Zen 4 core, 0.029 on two)
    moved = problem.batch * problem.group * (math.prod(geometry.input_shape)
                                             + math.prod(geometry.output_shape))
    buffer_bytes = load().plane_channels_bytes(
        geometry.input_shape, geometry.output_shape, geometry.kernel_shape, geometry.strides,
        geometry.dilations, block, np.dtype(problem.dtype).itemsize)
    return PlaneRun(family, 1, problem.batch * -(-problem.group // block),
                    (problem.multiply_adds() + moved) * _dispatch.PLANE_WORK_SCALE,
                    buffer_bytes, *layout, channel_block=block)


def kernels_contiguous(w):
    """Whether each of w's (M, 1, KH, KW) kernels is contiguous, as the planes read them."""
    return w.strides[3] == w.itemsize and w.strides[2] == w.shape[3] * w.itemsize


def run(plane, x, w, b, y, threads):
    """Fill ``y`` (N, M, OH, OW) with Conv(x, w, b), plane by plane."""
    if not kernels_contiguous(w):
        w = np.ascontiguousarray(w)  # (a few weights per channel)
    load().plane_call(plane, x, w, b, y, threads, _workspace)


def describe(plane):
    """One line for :func:`convt.explain`."""
    if plane.channel_block:
        return (f"depthwise planes, channels side by side: each work item transposes "
                f"{plane.channel_block} channels' input planes into a zero-padded buffer "
                f"of positions x channels and sums their outputs with the channels as "
                f"vector lanes ({plane.buffer_bytes / 1024:.1f} KiB per thread), "
                f"{plane.work_items} work items, kernel set {plane.family}")
    return (f"depthwise planes: each input plane copied once into a zero-padded buffer "
            f"({plane.buffer_bytes / 1024:.1f} KiB per thread), every output plane of its "
            f"group summed from it in blocks of 8 sums; {plane.run} group(s) per work item, "
            f"{plane.work_items} work items, kernel set {plane.family}")
