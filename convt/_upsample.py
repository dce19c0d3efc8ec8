"""Upsampling n-D arrays by integer factors on the ConvTranspose engine, with exact boundaries.

Every axis of the image is a spatial axis of one ConvTranspose call on
``image[None, None]``: upsampled axes get the interpolation taps and stride
``factor``, the others (channels, a stack of slices) one tap of weight 1.  The
weight is the outer product of the 1-D taps, so all axes are done in one pass
over the output.

Boundaries.  Along an axis with ``p`` pads (``convt.kernels.pads``), an
output ``o`` reads inputs outside ``[0, n)`` only if ``o < p`` or
``o >= n * factor - p``.  The ConvTranspose over the image reads zeros there,
which is exact everywhere except in those border strips.  Each strip (a slab
``p`` outputs thick, full-size along the other axes) is then recomputed from
the few input rows it needs, extended by the boundary mode through an index
map: O(surface) extra work and memory, never a padded copy of the image.  The
strips are a partition of the border (axis ``a``'s strips exclude the strips
of earlier axes), so each output is computed once more at most.

Every value comes from one ConvTranspose evaluation of fixed taps over fixed
inputs; convt's own kernels sum them in an order that does not depend on where
the evaluated block starts or ends, as long as every tap reaches some output of
the call (the engines skip the others, which regroups the blocked sums): small
boxes are widened by zeros until it does, so any output box can be computed
on its own with the same bits (the dask blocks and the command line's slabs
rely on this).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from . import _upsample_args as _args
from . import kernels as _kernels
from ._arrays import SUPPORTED_DTYPES, check_output_size
from ._estimator import ConvTranspose
from ._plan import zeros_keeping_every_tap

__all__ = ["upsample"]

# Output elements per slab of upsample_slabs (the command line's progress steps):
# 16 MiB of float32.
SLAB_ELEMENTS = 4 * 2**20


def extend_indices(index, size, mode):
    """Map integer positions along an axis of ``size`` samples into ``[0, size)``.

    ``-1`` marks positions that read the constant (mode 'constant').  The
    definitions are scipy.ndimage's: 'reflect' ``(d c b a | a b c d | d c b a)``,
    'mirror' ``(d c b | a b c d | c b a)``, 'wrap' ``(a b c d | a b c d)``,
    'edge' ``(a a | a b c d | d d)``, periodic however far they reach.
    """
    index = np.asarray(index, dtype=np.int64)
    if mode == "edge":
        return np.clip(index, 0, size - 1)
    if mode == "wrap":
        return index % size
    if mode == "reflect":
        period = 2 * size
        folded = index % period
        return np.where(folded < size, folded, period - 1 - folded)
    if mode == "mirror":
        if size == 1:
            return np.zeros_like(index)
        period = 2 * size - 2
        folded = index % period
        return np.where(folded < size, folded, period - folded)
    return np.where((index >= 0) & (index < size), index, -1)


@dataclass(frozen=True)
class Spec:
    """A validated upsampling: per array axis its factor, taps and pads; the mode; the dtype."""

    kernel: str
    factors: tuple[int, ...]
    mode: str
    cval: float
    dtype: np.dtype

    @functools.cached_property
    def taps(self):
        return tuple(_axis_taps(self.kernel, f) for f in self.factors)

    @functools.cached_property
    def pads(self):
        return tuple((len(taps) - f) // 2 for taps, f in zip(self.taps, self.factors))

    @functools.cached_property
    def axes(self):
        """(factor, number of taps, pad) of every axis."""
        return tuple(zip(self.factors, (len(taps) for taps in self.taps), self.pads))

    def output_shape(self, shape):
        return tuple(n * f for n, f in zip(shape, self.factors))

    def weight(self):
        """The ConvTranspose weight (1, 1, k1, ..., kn) in the computation dtype."""
        product = np.ones(())
        for taps in self.taps:
            product = np.multiply.outer(product, taps)
        return product.astype(self.dtype)[np.newaxis, np.newaxis]

    @property
    def exact_at_borders(self):
        """True when zeros beyond the input are what the mode reads: no strips to redo."""
        return all(pad == 0 for pad in self.pads) or (self.mode == "constant" and self.cval == 0)


def _axis_taps(kernel, factor):
    # an axis that is not upsampled is copied: one tap of weight 1
    return np.ones(1) if factor == 1 else _kernels.taps(kernel, factor)


def input_range(box_start, box_stop, factor, taps, pad):
    """Input positions ``[start, stop)`` (unclipped) read by outputs ``[box_start, box_stop)``."""
    return -((taps - 1 - box_start - pad) // factor), (box_stop - 1 + pad) // factor + 1


def conv_pads(box_start, box_stop, first_input, input_count, factor, taps, pad):
    """(begin, end) crop of the ConvTranspose of inputs ``[first, first + count)``: the box."""
    begin = box_start + pad - first_input * factor
    end = factor * (input_count - 1) + taps - begin - (box_stop - box_start)
    return begin, end


def border_boxes(out_shape, pads):
    """Boxes (one (start, stop) per axis) partitioning the outputs that read beyond the input."""
    boxes = []
    inner = []
    for axis, (size, width) in enumerate(zip(out_shape, pads)):
        low = min(width, size)
        high = max(size - width, low)
        after = tuple((0, rest) for rest in out_shape[axis + 1:])
        if width:
            for span in ((0, low), (high, size)):
                if span[1] > span[0]:
                    boxes.append(tuple(inner) + (span,) + after)
            inner.append((low, high))
        else:
            inner.append((0, size))
        if high <= low and width:
            break
    return boxes


def intersect(box, other):
    """The intersection of two boxes, or None when it is empty."""
    spans = tuple((max(a0, b0), min(a1, b1)) for (a0, a1), (b0, b1) in zip(box, other))
    return spans if all(stop > start for start, stop in spans) else None


class Window:
    """Input values at sorted global positions per axis.

    The whole image (``positions=None``), or the samples a dask block gathered.
    """

    def __init__(self, data, positions=None):
        self.data = data
        self.positions = positions  # None: data is the whole image

    def slice(self, axis, start, stop):
        if self.positions is None:
            return slice(start, stop)
        first = int(np.searchsorted(self.positions[axis], start))
        return slice(first, first + stop - start)

    def take(self, axis, indices):
        if self.positions is None:
            return indices
        return np.searchsorted(self.positions[axis], indices)


def widened(x, geometry, widths):
    """``x`` (N, C, D...) between ``widths`` zeros per spatial axis, and the pads
    (begins, then ends) that keep the output where it was: with widths from
    ``_plan.zeros_keeping_every_tap``, every tap reaches an output."""
    x = np.pad(x, [(0, 0), (0, 0)] + [(width, width) for width in widths])
    grown = [width * stride for width, stride in zip(widths, geometry.strides)]
    return x, tuple(pad + extra for pad, extra in zip(geometry.pads_begin, grown)) + tuple(
        pad + extra for pad, extra in zip(geometry.pads_end, grown))


def _convolve(data, spec, weight, spans, inputs, out, num_threads):
    """ConvTranspose of ``data`` (inputs ``[i0, i1)`` per axis) cropped to the output ``spans``.

    Every call keeps every tap (small pieces are widened by zeros), so any box
    sums the same products in the same order as the whole image.
    """
    begins, ends = [], []
    for (start, stop), (first, last), (f, taps, pad) in zip(spans, inputs, spec.axes):
        begin, end = conv_pads(start, stop, first, last - first, f, taps, pad)
        begins.append(begin)
        ends.append(end)
    x = data[np.newaxis, np.newaxis]
    layer = ConvTranspose(strides=spec.factors, pads=tuple(begins + ends),
                          num_threads=num_threads)
    geometry = layer._geometry_for(x.shape, weight.shape)
    widths = zeros_keeping_every_tap(geometry)
    if any(widths):
        x, pads = widened(x, geometry, widths)
        layer.set_params(pads=pads)
    return layer.apply(x, weight, out=None if out is None else out[np.newaxis, np.newaxis])[0, 0]


def _extended(window, spec, shape, spans):
    """The inputs that the outputs ``spans`` read, beyond the image too, extended by the mode."""
    ranges, picks, outside = [], [], []
    for axis, ((start, stop), (f, taps, pad)) in enumerate(zip(spans, spec.axes)):
        first, last = input_range(start, stop, f, taps, pad)
        mapped = extend_indices(np.arange(first, last), shape[axis], spec.mode)
        ranges.append((first, last))
        outside.append(mapped < 0)
        picks.append(window.take(axis, np.maximum(mapped, 0)))
    # Runs of consecutive positions are sliced (a view); only the axes the mode
    # extends are gathered, the thinnest first, so each copy is a strip's size.
    runs = tuple(slice(int(pick[0]), int(pick[-1]) + 1) if _is_run(pick) else slice(None)
                 for pick in picks)
    values = window.data[runs]
    gathered = sorted((axis for axis, pick in enumerate(picks) if not _is_run(pick)),
                      key=lambda axis: len(picks[axis]))
    for axis in gathered:
        values = np.take(values, picks[axis], axis=axis)
    values = values.astype(spec.dtype, copy=False)
    for axis, mask in enumerate(outside):
        if mask.any():
            values[(slice(None),) * axis + (mask,)] = spec.cval  # a copy: this axis was gathered
    return values, ranges


def _is_run(positions):
    return positions[-1] - positions[0] == len(positions) - 1 and bool(
        np.all(np.diff(positions) == 1))


def upsample_box(window, spec, shape, box, out, num_threads=None, weight=None):
    """Fill ``out`` (the box's shape) with the exact upsampled values over the output ``box``.

    ``window`` holds at least every in-image input the box reads (and, for the
    border strips, the positions the mode maps their extensions to).
    """
    weight = spec.weight() if weight is None else weight
    inputs = []
    for axis, ((start, stop), (f, taps, pad)) in enumerate(zip(box, spec.axes)):
        first, last = input_range(start, stop, f, taps, pad)
        inputs.append((max(first, 0), min(last, shape[axis])))
    data = window.data[tuple(window.slice(axis, first, last)
                             for axis, (first, last) in enumerate(inputs))]
    data = data.astype(spec.dtype, copy=False)  # e.g. slabs of a uint8 memory map
    _convolve(data, spec, weight, box, inputs, out, num_threads)
    if spec.exact_at_borders:
        return out
    for strip in border_boxes(spec.output_shape(shape), spec.pads):
        part = intersect(strip, box)
        if part is None:
            continue
        values, ranges = _extended(window, spec, shape, part)
        target = tuple(slice(start - origin, stop - origin)
                       for (start, stop), (origin, _) in zip(part, box))
        out[target] = _convolve(values, spec, weight, part, ranges, None, num_threads)
    return out


def compute_dtype(dtype, requested=None, function="upsample"):
    """The dtype upsample computes in and returns (see upsample's Notes)."""
    if requested is not None:
        return _args.check_float_dtype(requested, function)
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.newbyteorder("=") in SUPPORTED_DTYPES:
        return dtype.newbyteorder("=")
    if dtype.kind in "biu":
        return np.dtype(np.float32 if dtype.itemsize <= 2 else np.float64)
    hint = (" Upsample the real and imaginary parts separately." if dtype.kind == "c"
            else " Cast it first, e.g. image.astype(np.float64).")
    raise TypeError(f"The image has dtype {dtype}; {function} accepts float16, float32, float64, "
                    f"integer and boolean images.{hint}")


def resolve(shape, dtype, factor, kernel, axes, mode, cval, channel_axis, requested_dtype,
            function="upsample"):
    """Validate upsample's parameters for an image of this shape and dtype; return a Spec."""
    kernel = _args.check_kernel(kernel, function)
    mode = _args.check_mode(mode, function)
    axes, channel_axis = _args.check_axes(axes, channel_axis, len(shape), function)
    factors = _args.check_factors(factor, len(axes), function) if axes else ()
    cval = _args.check_cval(cval, function)
    per_axis = [1] * len(shape)
    for axis, f in zip(axes, factors):
        per_axis[axis] = f
    return Spec(kernel, tuple(per_axis), mode, cval,
                compute_dtype(dtype, requested_dtype, function))


def _prepare_out(out, shape, dtype, image):
    if out is None:
        check_output_size(shape, dtype)
        return np.empty(shape, dtype=dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"The 'out' parameter of upsample must be a numpy.ndarray or None; "
                        f"got {type(out).__name__}.")
    if out.shape != shape or out.dtype != dtype:
        raise ValueError(f"The 'out' parameter of upsample must have shape {shape} and dtype "
                         f"{dtype}; got shape {out.shape} and dtype {out.dtype}.")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("The 'out' parameter of upsample must be a writeable C-contiguous array.")
    if np.may_share_memory(out, image):
        raise ValueError("The 'out' parameter of upsample must not share memory with the image.")
    return out


def upsample(image, factor, *, kernel="linear", axes=None, mode="edge", cval=0.0,
             channel_axis=None, dtype=None, num_threads=None, out=None):
    """Upsample an n-D image by integer factors, with exact boundaries.

    Output sample ``j`` of an upsampled axis is the image interpolated at input
    coordinate ``(j + 0.5) / factor - 0.5``: the grid of
    ``scipy.ndimage.zoom(..., grid_mode=True)`` and ``skimage.transform.rescale``.
    One depthwise ConvTranspose (stride ``factor``) computes every axis at once;
    the border strips are then recomputed with the boundary mode.

    Parameters
    ----------
    image : array_like
        Any number of axes, e.g. (H, W), (H, W, C) with ``channel_axis=-1``,
        (D, H, W).  No batch or channel axes are needed.
    factor : int or sequence of int
        Upsampling factor (>= 1) for every upsampled axis, or one per axis of
        ``axes``.
    kernel : {'linear', 'nearest', 'cubic'}, default='linear'
        Interpolation kernel (see :mod:`convt.kernels`): 'linear' is
        bilinear/trilinear, 'cubic' is Keys' cubic convolution (a = -1/2).
    axes : int or sequence of int, optional
        Axes to upsample.  Default: every axis except ``channel_axis``.
    mode : str, default='edge'
        Values beyond the image (scipy.ndimage's names; numpy.pad's in brackets):

        - 'edge' or 'nearest' ('edge'): ``a a | a b c d | d d``
        - 'reflect' or 'symmetric' ('symmetric'): ``b a | a b c d | d c``
        - 'mirror' ('reflect'): ``c b | a b c d | c b``
        - 'constant' or 'grid-constant': ``cval``
        - 'wrap' or 'grid-wrap' ('wrap'): ``c d | a b c d | a b``

        scipy's legacy non-grid 'constant' and 'wrap' are not provided (scipy
        itself recommends the grid variants with ``grid_mode=True``).
    cval : float, default=0.0
        Value beyond the image for mode 'constant'.
    channel_axis : int, optional
        An axis that is not upsampled (colour channels).
    dtype : {None, float16, float32, float64}, optional
        Computation and output dtype.  Default: the image's float dtype;
        float32 for 8- and 16-bit integer and boolean images (exact), float64
        for wider integers.
    num_threads : int, optional
        Threads; the result does not depend on it.
    out : ndarray, optional
        C-contiguous array of the output shape and dtype to write into.

    Returns
    -------
    ndarray
        The image's shape with each upsampled axis multiplied by its factor,
        C-contiguous, in ``dtype``.

    See Also
    --------
    convt.kernels : the kernels as ConvTranspose weights.
    convt.dask.upsample : the same on dask arrays, block by block.

    Notes
    -----
    The result equals, to rounding, ``scipy.ndimage.zoom(image, factor,
    order=1, grid_mode=True, mode=m)`` (kernel 'linear', where ``m`` is scipy's
    name of the mode, 'grid-constant' and 'grid-wrap' for 'constant' and
    'wrap'), ``order=0`` for 'nearest', and ``skimage.transform.rescale(image,
    factor, order=1, mode=...)`` for float images.  scipy's ``order=3`` is a
    cubic B-spline with a prefilter, a different (smoother) interpolation than
    Keys' cubic.  Integer images keep their values (scikit-image scales them to
    [0, 1]).  float16 is accumulated in float32 and rounded once.  Values beyond
    the image are read through an index map applied to the few rows each border
    strip needs: no padded copy of the image is made.

    Examples
    --------
    >>> import numpy as np
    >>> from convt import upsample
    >>> image = np.array([[0.0, 1.0], [2.0, 3.0]])
    >>> upsample(image, 2)
    array([[0.  , 0.25, 0.75, 1.  ],
           [0.5 , 0.75, 1.25, 1.5 ],
           [1.5 , 1.75, 2.25, 2.5 ],
           [2.  , 2.25, 2.75, 3.  ]])
    >>> upsample(image, 2, kernel="nearest")[0]
    array([0., 0., 1., 1.])
    >>> rgb = np.zeros((64, 48, 3), dtype=np.uint8)
    >>> upsample(rgb, 3, channel_axis=-1).shape, upsample(rgb, 3, channel_axis=-1).dtype
    ((192, 144, 3), dtype('float32'))
    >>> upsample(np.ones((4, 8, 8), np.float32), (3, 2), axes=(1, 2), mode="constant").shape
    (4, 24, 16)
    """
    array = np.asarray(image)
    spec = resolve(array.shape, array.dtype, factor, kernel, axes, mode, cval, channel_axis,
                   dtype)
    num_threads = _args.check_threads(num_threads, "upsample")
    shape = spec.output_shape(array.shape)
    result = _prepare_out(out, shape, spec.dtype, array)
    if array.dtype != spec.dtype:
        array = array.astype(spec.dtype)
    if result.size == 0:
        return result
    if array.ndim == 0:
        result[...] = array
        return result
    box = tuple((0, size) for size in shape)
    return upsample_box(Window(array), spec, array.shape, box, result, num_threads)


def upsample_slabs(array, spec, result, slab_rows, num_threads=None, progress=None):
    """upsample's result computed ``slab_rows`` output rows (axis 0) at a time, bit for bit.

    ``progress(done, total)`` is called after each slab (the command line's progress bar).
    """
    shape = result.shape
    weight = spec.weight()
    window = Window(array)
    for start in range(0, shape[0], slab_rows):
        stop = min(start + slab_rows, shape[0])
        box = ((start, stop),) + tuple((0, size) for size in shape[1:])
        upsample_box(window, spec, array.shape, box, result[start:stop], num_threads, weight)
        if progress is not None:
            progress(stop, shape[0])
    return result


def slab_rows_for(shape):
    """Output rows along axis 0 per slab so that a slab holds about SLAB_ELEMENTS values."""
    return max(1, SLAB_ELEMENTS // max(1, math.prod(shape[1:])))
