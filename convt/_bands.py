"""Conv by bands of output rows (driven by ``band_conv`` in _bands.pxi).

A strided Conv whose input channels are many (ResNet's 3x3 stride-2
downsampling: 128 -> 256 over 56x56; a 3-D encoder's 3x3x3 stride-2 layers) is a GEMM of the output channels with
every (input channel, kernel row, tap) of each output position.  The GEMM
engine reads x decimated by the strides into tile buffers; here each work item
copies the input rows a band of output rows reads (of one output slice, in 3-D:
the rows of every input slice it reads), of every input channel of the group, as
they are, zero-padded, into a buffer that stays in the core's L2,
and the set's transposed kernels (gemm_t) multiply one vector of output channels
(16 float32 lanes on AVX-512) at a time with the positions of an output row,
broadcast from the buffer at the column stride, over the whole depth in one
call.  Nothing is decimated or transposed but the few sums of each call, and
the weights, packed once into vectors of output channels, are kept by
convt._weight_cache like the GEMM engine's.  The rule that picks it is
:func:`convt._dispatch.band_route`.

Each output is one kernel call's blocked sum, over the input channels, then the
kernel rows, then the taps (the GEMM engine's order for Conv), started from the
bias (or zero); padding is multiplied like any input (Inf and NaN weights give what the
Conv definition gives), and the results are the same bits whatever the thread
count.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from . import _dispatch, _weight_cache, _workspace
from ._compiled import load


@dataclass(frozen=True)
class BandRun:
    """How a band call is blocked (one per prepared call)."""

    family: str          # the kernel set whose gemm_t kernels run
    lanes: int           # output channels per kernel call (the set's NR)
    band_rows: int       # output rows per work item
    parts: int           # runs of output-channel vectors a band is cut into
    work_items: int
    sum_block: int       # blocked-sum steps
    buffer_bytes: int    # workspace per thread
    multiply_adds: int


def volume_of(geometry):
    """(output shape, kernel shape, strides, dilations, begin pads) of a 1-D, 2-D or
    3-D geometry as 3-D ones (a 2-D problem is one slice, a 1-D one a row)."""
    fields = (geometry.output_shape, geometry.kernel_shape, geometry.strides,
              geometry.dilations, geometry.pads_begin)
    lead = 3 - geometry.ndim
    return tuple((fill,) * lead + tuple(f) for f, fill in zip(fields, (1, 1, 1, 1, 0)))


def _buffer_bytes(problem, family, rows, accumulation):
    """A thread's workspace for bands of ``rows`` output rows."""
    out, kernel, strides, dilations, _ = volume_of(problem.geometry)
    kernels = _dispatch.family_named(family).kernel_set(accumulation)
    slices = (kernel[0] - 1) * dilations[0] + 1
    in_rows = (rows - 1) * strides[1] + (kernel[1] - 1) * dilations[1] + 1
    width = (out[2] - 1) * strides[2] + (kernel[2] - 1) * dilations[2] + 1
    positions = load().band_positions(family, accumulation.itemsize == 8)
    return load().band_buffer_elements(problem.cg * slices, in_rows, width, positions,
                                       kernels.nr) * accumulation.itemsize


def fits(problem, decision):
    """Whether the smallest band (one output row) fits twice BAND_BUFFER_BYTES: a
    buffer bounded whatever the input's width and channels (band_route's last test)."""
    return (_buffer_bytes(problem, decision.kernel_set, 1, decision.accumulation)
            <= 2 * _dispatch.BAND_BUFFER_BYTES)


def plan(problem, decision):
    """The BandRun of a problem that band_route accepts (1-D and 2-D problems are
    given as 3-D ones: one slice, one row)."""
    g = problem.geometry
    accumulation = decision.accumulation
    family = decision.kernel_set
    lanes = _dispatch.family_named(family).kernel_set(accumulation).nr
    out_slices, out_rows = volume_of(g)[0][:2]
    # the largest bands whose buffer fits BAND_BUFFER_BYTES ...
    rows = 1
    while (rows < out_rows and _buffer_bytes(problem, family, rows + 1, accumulation)
           <= _dispatch.BAND_BUFFER_BYTES):
        rows += 1
    # ... then as many bands as keep the threads busy, then runs of vectors
    images = problem.batch * problem.group * out_slices
    target = max(1, min(_dispatch.MAX_WORK_ITEMS,
                        _dispatch.BAND_WORK_ITEMS_PER_CORE * (os.cpu_count() or 1)))
    bands = -(-out_rows // rows)
    bands = min(out_rows, max(bands, -(-target // images)))
    rows = -(-out_rows // bands)
    bands = -(-out_rows // rows)
    vectors = -(-problem.mg // lanes)
    parts = max(1, min(vectors, -(-target // (images * bands))))
    return BandRun(family, lanes, rows, parts, images * bands * parts,
                   decision.blocking.sum_block(problem.cg * math.prod(g.kernel_shape),
                                               problem.cg * math.prod(g.kernel_shape)),
                   _buffer_bytes(problem, family, rows, accumulation),
                   problem.multiply_adds())


def packed_weights(w, group, lanes):
    """w (M, C/G, KH, KW) as (G, V, C/G x KH x KW, lanes): each group's output
    channels in vectors of ``lanes`` (zeros past them), one vector's weights for a
    depth step contiguous."""
    mg = w.shape[0] // group
    vectors = -(-mg // lanes)
    depth = math.prod(w.shape[1:])
    grouped = w.reshape(group, mg, depth)
    packed = np.zeros((group, vectors * lanes, depth), w.dtype)
    packed[:, :mg] = grouped
    return np.ascontiguousarray(
        packed.reshape(group, vectors, lanes, depth).transpose(0, 1, 3, 2))


class _Weights:
    """What convt._weight_cache reads of a call's operands."""

    def __init__(self, w):
        self.w = w
        self.w_strides = np.array(w.strides, dtype=np.intp) // w.itemsize


def _cached_packing(band, w, group, threads):
    """The packed weights of ``w``: an earlier call's for bitwise-equal weights
    (convt._weight_cache; non-finite ones too: equal bytes pack equally), else
    packed now and remembered."""
    operands = _Weights(w)
    packed, dense = _weight_cache.lookup(band, operands, False, threads)
    if packed is None:
        packed = packed_weights(w, group, band.lanes)
        if dense is not None:
            _weight_cache.store(band, operands, dense, False, packed)
    return packed


def _three_d(array):
    """An (N, C, spatial...) array of 1 to 3 spatial axes as (N, C, D, H, W): leading
    axes of one."""
    return array[(slice(None), slice(None)) + (None,) * (5 - array.ndim)]


def run(band, x, w, b, y, geometry, group, threads):
    """Fill ``y`` with Conv(x, w, b) as ``band`` plans it."""
    dtype = y.dtype
    if x.dtype != dtype or w.dtype != dtype:
        x = x.astype(dtype, copy=False)
        w = w.astype(dtype, copy=False)
    if any(s % dtype.itemsize for s in x.strides):
        x = np.ascontiguousarray(x)
    packed = _cached_packing(band, w, group, threads)
    bias = None if b is None else np.ascontiguousarray(b, dtype=dtype)
    target = y if not any(s % dtype.itemsize for s in y.strides) else np.empty(y.shape, dtype)
    _, kernel, strides, dilations, pads = volume_of(geometry)
    load().band_conv(band.family, _three_d(x), packed, bias, _three_d(target), kernel, pads,
                     strides, dilations, band.band_rows, band.parts, band.sum_block, threads,
                     _workspace)
    if target is not y:
        y[...] = target


def describe(band):
    """One line for :func:`convt.explain`."""
    return (f"bands of output rows: each work item copies the input rows its {band.band_rows} "
            f"output row(s) read, zero-padded ({band.buffer_bytes / 1024:.1f} KiB per thread), "
            f"and multiplies vectors of {band.lanes} output channels with each row's "
            f"positions broadcast from it (gemm_t), weights packed once and cached; "
            f"{band.parts} run(s) of vectors per band, {band.work_items} work items, blocked "
            f"sums of {band.sum_block}, kernel set {band.family}")
