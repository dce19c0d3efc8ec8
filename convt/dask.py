"""ConvTranspose and upsampling of dask arrays, block by block, larger than memory.

Each output block is computed from the input values it needs: its own input
block plus a halo from the neighbouring blocks (and, at the border, the
positions the boundary mode maps to, e.g. the far side for 'wrap').  The
blocks are computed by convt's in-memory code on that window, and give the
same bits as the in-memory call on the whole array (convt's kernels sum each
output in an order that does not depend on where the computed block starts;
with ``CONVT_GEMM_BACKEND=blas`` the results agree to rounding only, as BLAS
may sum differently for different matrix sizes).

dask is imported when these functions are called; ``import convt`` never
imports it.

Examples
--------
>>> import numpy as np
>>> import dask.array as da
>>> import convt, convt.dask
>>> volume = da.random.default_rng(0).random((64, 64, 64), chunks=32)
>>> big = convt.dask.upsample(volume, 2, kernel="cubic", mode="reflect")
>>> big
dask.array<convt-upsample, shape=(128, 128, 128), dtype=float64, chunksize=(64, 64, 64), chunktype=numpy.ndarray>
>>> same = convt.upsample(volume.compute(), 2, kernel="cubic", mode="reflect")
>>> bool((big.compute() == same).all())
True
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from . import _dispatch, _engine, _frontend, _layouts, _plan
from ._estimator import ConvTranspose
from ._upsample import Window, extend_indices, input_range, resolve, upsample_box, widened
from ._upsample_args import check_threads

__all__ = ["conv_transpose", "upsample"]


def _dask_array():
    try:
        import dask.array
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "convt.dask needs dask: pip install 'dask[array]' (or convt's 'dask' extra)."
        ) from error
    return dask.array


@dataclass(frozen=True)
class _Piece:
    """Where a piece of one input block goes in an output block's window."""

    indexers: tuple  # per axis: a slice or an int array of positions in the input block
    offsets: tuple  # per axis: first position of the piece in the window
    whole: bool  # the piece is the entire input block


@dataclass(frozen=True)
class _Block:
    """The window an output block reads and what to compute from it."""

    window_shape: tuple
    dtype: np.dtype
    compute: object  # callable(window) -> output block
    pieces: tuple


def _take(block, piece):
    """The piece of an input block; a copy unless it is the whole block (halos stay small)."""
    if piece.whole:
        return block
    basic = tuple(index if isinstance(index, slice) else slice(None) for index in piece.indexers)
    values = block[basic]
    for axis, index in enumerate(piece.indexers):
        if not isinstance(index, slice):
            values = np.take(values, index, axis=axis)
    return np.array(values, copy=True)


def _run_block(pieces, block):
    """Assemble the window from its pieces and compute the output block."""
    window = np.empty(block.window_shape, dtype=block.dtype)
    for values, piece in zip(pieces, block.pieces):
        target = tuple(slice(offset, offset + size)
                       for offset, size in zip(piece.offsets, values.shape))
        window[target] = values
    return block.compute(window)


def _split(positions, bounds):
    """Positions (sorted) grouped by input block: [(block, indexer, offset in positions)]."""
    if len(positions) == 0:
        return []
    blocks = np.searchsorted(bounds, positions, side="right") - 1
    groups = []
    for block in np.unique(blocks):
        where = np.flatnonzero(blocks == block)
        local = positions[where] - bounds[block]
        contiguous = local[-1] - local[0] == len(local) - 1
        indexer = slice(int(local[0]), int(local[-1]) + 1) if contiguous else local
        groups.append((int(block), indexer, int(where[0])))
    return groups


def _gathering_array(x, name, out_chunks, positions, make_compute, dtype):
    """A dask array whose block ``q`` is ``make_compute(q)(x[np.ix_(*positions[a][q[a]])])``.

    ``positions[a][k]`` are the sorted positions along axis ``a`` that output
    block ``k`` of that axis reads.  Pieces are cut out of the input blocks by
    small tasks, so an output task holds only its window, not the neighbours.
    """
    da = _dask_array()
    from dask.highlevelgraph import HighLevelGraph

    bounds = [np.cumsum((0,) + chunks) for chunks in x.chunks]
    splits = [[_split(np.asarray(p, dtype=np.int64), bounds[axis]) for p in axis_positions]
              for axis, axis_positions in enumerate(positions)]
    piece_name = name + "-piece"
    graph = {}
    for index in itertools.product(*(range(len(chunks)) for chunks in out_chunks)):
        groups = [splits[axis][k] for axis, k in enumerate(index)]
        window_shape = tuple(len(positions[axis][k]) for axis, k in enumerate(index))
        pieces, keys = [], []
        for combination in itertools.product(*groups):
            in_block = tuple(group[0] for group in combination)
            indexers = tuple(group[1] for group in combination)
            whole = all(isinstance(i, slice) and i.stop - i.start == x.chunks[a][in_block[a]]
                        for a, i in enumerate(indexers))
            piece = _Piece(indexers, tuple(group[2] for group in combination), whole)
            key = (piece_name,) + index + in_block
            graph[key] = (_take, (x.name,) + in_block, piece)
            pieces.append(piece)
            keys.append(key)
        block = _Block(window_shape, np.dtype(dtype), make_compute(index), tuple(pieces))
        graph[(name,) + index] = (_run_block, keys, block)
    layers = HighLevelGraph.from_collections(name, graph, dependencies=[x])
    return da.Array(layers, name, chunks=out_chunks, dtype=dtype)


def _token(*parts):
    from dask.base import tokenize

    return tokenize(*parts)


def _as_dask(x):
    da = _dask_array()
    if isinstance(x, da.Array):
        return x
    array = np.asarray(x)
    return da.from_array(array, chunks="auto", name=False) if array.ndim else da.asarray(array)


# ---------------------------------------------------------------- conv_transpose


def _output_bounds(in_bounds, stride, pad_begin, out_size):
    """Output block bounds of a spatial axis: input block starts mapped to ``i * stride - pad``."""
    inner = sorted({min(max(int(b) * stride - pad_begin, 0), out_size) for b in in_bounds[1:-1]})
    bounds = [0] + [b for b in inner if 0 < b < out_size] + [out_size]
    return bounds


class _ConvBlock:
    """One output block of conv_transpose: the ConvTranspose of its window, placed in the block.

    Along each spatial axis the window's inputs ``[i0, i1)`` produce the global
    outputs ``[i0 * stride - pad_begin, ...)`` of their full ConvTranspose; the
    block keeps the part inside its span and is bias (or zero) elsewhere, where
    no input reaches (zero margins of negative pads, output_padding past the data).
    """

    def __init__(self, geometry, group, spans, inputs, shape, params, run):
        self.geometry, self.group = geometry, group
        self.spans, self.inputs, self.shape, self.params = spans, inputs, shape, params
        # the whole array's engine and kernel set: the in-memory call's sums, bit for bit
        self.engine, self.kernel_set, self.num_threads = run
        # the whole call keeps every tap: so must each block (else it is one block)
        self.all_taps = not any(_plan.zeros_keeping_every_tap(geometry))

    def _crop(self):
        """(begin pads, end pads, target slices) of the window's ConvTranspose, or None."""
        g = self.geometry
        begins, ends, target = [], [], []
        for axis, ((o0, o1), (i0, i1)) in enumerate(zip(self.spans, self.inputs)):
            reach = (g.kernel_shape[axis] - 1) * g.dilations[axis]
            start = i0 * g.strides[axis] - g.pads_begin[axis]
            stop = start + g.strides[axis] * (i1 - i0 - 1) + reach + 1
            first, last = max(o0, start), min(o1, stop)
            if i1 <= i0 or last <= first:
                return None
            begins.append(first - start)
            ends.append(stop - last)
            target.append(slice(first - o0, last - o0))
        return begins, ends, target

    def __call__(self, window, w, b):
        out = np.empty(self.shape, dtype=window.dtype)
        crop = self._crop()
        g = self.geometry
        covered = crop is not None and all(
            part.stop - part.start == o1 - o0 for part, (o0, o1) in zip(crop[2], self.spans))
        if not covered:
            out[...] = 0 if b is None else b.reshape((1, -1) + (1,) * (out.ndim - 2))
        if crop is None:
            return out
        begins, ends, target = crop
        layer = ConvTranspose(strides=g.strides, dilations=g.dilations, group=self.group,
                              pads=tuple(begins + ends), **self.params)
        _, window, w, b, geometry = layer._prepare(window, w, b)
        if self.all_taps:
            widths = _plan.zeros_keeping_every_tap(geometry)
            if any(widths):
                window, pads = widened(window, geometry, widths)
                layer.set_params(pads=pads)
                geometry = layer._geometry_for(window.shape, w.shape)
        result = _frontend.compute(window, w, b, geometry, self.group, self.num_threads,
                                   out=out if covered else None, engine=self.engine,
                                   backend=self.kernel_set)
        if not covered:
            out[(slice(None), slice(None)) + tuple(target)] = result
        return out


def conv_transpose(x, w, b=None, *, num_threads=1, **params):
    """ConvTranspose of a dask array, block by block: a lazy dask array.

    Parameters
    ----------
    x : dask.array.Array, shape (N, C, D1, ..., Dn)
        float16, float32 or float64, chunked any way along N and the spatial
        axes (the channel axis is gathered into one block).
    w : array_like, shape (C, M / group, k1, ..., kn)
        Same dtype as ``x``; a NumPy array (it is sent with every task).
    b : array_like, shape (M,), optional
    num_threads : int, default=1
        Threads per block.  dask already runs blocks in parallel; more
        threads per block oversubscribe the cores.
    **params
        Any :class:`convt.ConvTranspose` parameter (ONNX attributes).

    Returns
    -------
    dask.array.Array, shape (N, M, O1, ..., On)
        Output block boundaries are the input block boundaries mapped to
        ``i * stride - pads_begin`` (one block along M).  Each block is
        computed from its input block plus the halo of ``(k - 1) * dilation / stride``
        inputs the kernel reaches, and equals the in-memory result bit for bit.

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> import convt, convt.dask
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((2, 4, 40, 30)).astype(np.float32)
    >>> w = rng.standard_normal((4, 3, 4, 4)).astype(np.float32)
    >>> y = convt.dask.conv_transpose(da.from_array(x, chunks=(1, 4, 16, 16)), w,
    ...                               strides=(2, 2), pads=(1, 1, 1, 1))
    >>> y.shape, y.chunks[2]
    ((2, 3, 80, 60), (31, 32, 17))
    >>> bool((y.compute() == convt.conv_transpose(x, w, strides=(2, 2), pads=(1, 1, 1, 1))).all())
    True
    """
    x = _as_dask(x)
    num_threads = check_threads(num_threads, "convt.dask.conv_transpose")
    arrays = _frontend.operands({"x": np.empty(0, x.dtype), "w": w, "b": b})
    w, b = arrays["w"], arrays["b"]
    layer = ConvTranspose(**params)
    for name, supported in (("data_format", "NCX"), ("filter_format", "IOX")):
        if getattr(layer, name) != supported:
            raise ValueError(
                f"convt.dask.conv_transpose reads x as (N, C, D...) blocks and w as (C, M/group, "
                f"k...): {name} must be {supported!r}, got {getattr(layer, name)!r}. Move the "
                f"axes first, e.g. with dask.array.moveaxis.")
    group = layer._attributes().group
    _layouts.check_shapes(x.shape, w.shape, None if b is None else b.shape, group)
    geometry = layer._geometry_for(x.shape, w.shape)
    out_channels = w.shape[1] * group
    x = x.rechunk({1: -1})
    if any(_plan.zeros_keeping_every_tap(geometry)):
        # a kernel longer than the array: the whole call skips taps that reach no
        # output, and only one block per image computes the same sums
        x = x.rechunk({axis: -1 for axis in range(2, x.ndim)})
    in_bounds = [np.cumsum((0,) + chunks) for chunks in x.chunks]
    out_bounds = [list(in_bounds[0]), [0, out_channels]]
    positions = [[np.arange(a, z) for a, z in zip(in_bounds[0][:-1], in_bounds[0][1:])],
                 [np.arange(x.shape[1])]]
    for axis in range(geometry.ndim):
        stride, dilation = geometry.strides[axis], geometry.dilations[axis]
        reach = (geometry.kernel_shape[axis] - 1) * dilation
        pad, size = geometry.pads_begin[axis], geometry.input_shape[axis]
        bounds = _output_bounds(in_bounds[2 + axis], stride, pad,
                                geometry.output_shape[axis])
        out_bounds.append(bounds)
        axis_positions = []
        for o0, o1 in zip(bounds[:-1], bounds[1:]):
            first = max(0, -((reach - o0 - pad) // stride))
            last = min(size, (o1 - 1 + pad) // stride + 1)
            axis_positions.append(np.arange(first, max(first, last)))
        positions.append(axis_positions)
    out_chunks = tuple(tuple(np.diff(bounds).tolist()) for bounds in out_bounds)
    extra = {}
    if params.get("kernel_shape") is not None:
        extra["kernel_shape"] = params["kernel_shape"]
    decision = _engine.execution(_dispatch.Problem(
        geometry, x.shape[0], x.shape[1], out_channels, group, x.dtype)).decision
    run = (decision.engine, decision.kernel_set, num_threads)

    def make_compute(index):
        spans = [(out_bounds[a][k], out_bounds[a][k + 1]) for a, k in enumerate(index)]
        inputs = [(int(positions[a][k][0]), int(positions[a][k][-1]) + 1)
                  if len(positions[a][k]) else (0, 0) for a, k in enumerate(index)]
        shape = tuple(z - a for a, z in spans)
        block = _ConvBlock(geometry, group, spans[2:], inputs[2:], shape, extra, run)
        return _Bound(block, w, b)

    name = "convt-conv_transpose-" + _token(x.name, w, b, params, num_threads)
    return _gathering_array(x, name, out_chunks, positions, make_compute, x.dtype)


@dataclass(frozen=True)
class _Bound:
    """A block computation with its constant arguments (weights, bias)."""

    function: object
    w: object
    b: object

    def __call__(self, window):
        return self.function(window, self.w, self.b)


# ---------------------------------------------------------------- upsample


@dataclass(frozen=True)
class _UpsampleBlock:
    spec: object
    shape: tuple
    box: tuple
    positions: tuple
    num_threads: object

    def __call__(self, window):
        out = np.empty(tuple(z - a for a, z in self.box), dtype=self.spec.dtype)
        return upsample_box(Window(window, self.positions), self.spec, self.shape, self.box, out,
                            self.num_threads)


def upsample(image, factor, *, kernel="linear", axes=None, mode="edge", cval=0.0,
             channel_axis=None, dtype=None, num_threads=1):
    """:func:`convt.upsample` of a dask array, block by block: a lazy dask array.

    Parameters
    ----------
    image : dask.array.Array
        Any number of axes and chunking.
    factor, kernel, axes, mode, cval, channel_axis, dtype
        As in :func:`convt.upsample`.
    num_threads : int, default=1
        Threads per block (dask runs blocks in parallel).

    Returns
    -------
    dask.array.Array
        Blocks are the image's blocks upsampled (block boundaries multiplied by
        the factors).  Each is computed from its input block plus a halo of a
        few samples (and the samples the boundary mode maps to), and equals the
        in-memory :func:`convt.upsample` bit for bit.

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> import convt, convt.dask
    >>> image = np.random.default_rng(1).random((100, 80, 3)).astype(np.float32)
    >>> lazy = convt.dask.upsample(da.from_array(image, chunks=(32, 32, 3)), 3, channel_axis=-1)
    >>> lazy.shape, lazy.chunks[0]
    ((300, 240, 3), (96, 96, 96, 12))
    >>> bool((lazy.compute() == convt.upsample(image, 3, channel_axis=-1)).all())
    True
    """
    x = _as_dask(image)
    spec = resolve(x.shape, x.dtype, factor, kernel, axes, mode, cval, channel_axis, dtype,
                   "convt.dask.upsample")
    num_threads = check_threads(num_threads, "convt.dask.upsample")
    shape = tuple(x.shape)
    out_bounds, positions = [], []
    for axis, (f, taps, pad) in enumerate(spec.axes):
        bounds = [int(b) * f for b in np.cumsum((0,) + x.chunks[axis])]
        out_bounds.append(bounds)
        axis_positions = []
        for o0, o1 in zip(bounds[:-1], bounds[1:]):
            first, last = input_range(o0, o1, f, taps, pad)
            mapped = extend_indices(np.arange(first, last), shape[axis], spec.mode)
            axis_positions.append(np.unique(mapped[mapped >= 0]))
        positions.append(axis_positions)
    out_chunks = tuple(tuple(np.diff(bounds).tolist()) for bounds in out_bounds)

    def make_compute(index):
        box = tuple((out_bounds[a][k], out_bounds[a][k + 1]) for a, k in enumerate(index))
        window_positions = tuple(positions[a][k] for a, k in enumerate(index))
        return _UpsampleBlock(spec, shape, box, window_positions, num_threads)

    name = "convt-upsample-" + _token(x.name, spec, num_threads)
    return _gathering_array(x, name, out_chunks, positions, make_compute, spec.dtype)
