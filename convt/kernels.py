"""Interpolation kernels as ConvTranspose weights.

Upsampling an axis by an integer factor ``f`` is a ConvTranspose with stride
``f``: input sample ``i`` spreads over the outputs through the kernel taps.
With the taps and pads given here, output ``j`` is the interpolated value at
input coordinate ``(j + 0.5) / f - 0.5``: pixel centres stay pixel centres,
the grid of ``scipy.ndimage.zoom(..., grid_mode=True)`` and of
``skimage.transform.rescale``.

Along one axis a kernel ``h`` (a function of the distance in input samples)
gives ``K`` taps ``w[k] = h((k - (K - 1) / 2) / f)`` and pads ``(K - f) / 2``
at both ends, where ``K`` is the shortest length of the parity of ``f`` that
holds every non-zero tap.  N-D kernels are outer products of the 1-D taps.

=========  ==========================================  ============  =====================
name       h(t)                                        taps          pads per side
=========  ==========================================  ============  =====================
nearest    1 for ``|t| < 1/2``                         ``f``         0
linear     ``1 - |t|`` for ``|t| < 1``                 ``2f`` (1)    ``f // 2``
cubic      Keys' cubic convolution, ``a = -1/2``       ``4f`` (1)    ``3f // 2``
=========  ==========================================  ============  =====================

(1) one fewer for odd ``f``: the end taps would be zero.

Each phase's taps sum to one (a constant image stays constant).  Zero pads
darken a border strip ``pads`` outputs wide; :func:`convt.upsample` corrects it
exactly for every boundary mode.

Examples
--------
>>> import numpy as np
>>> from convt import conv_transpose, kernels
>>> kernels.taps("linear", 2)
array([0.25, 0.75, 0.75, 0.25])
>>> x = np.array([[[0.0, 1.0, 2.0, 3.0]]])
>>> params = kernels.conv_transpose_params("linear", 2, ndim=1)
>>> conv_transpose(x, kernels.linear(2, ndim=1), **params)
array([[[0.  , 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 2.25]]])

The first and last outputs see the zero padding: ``convt.upsample`` gives
0 and 3 there (mode ``"edge"``).
"""

from __future__ import annotations

import math

import numpy as np

from . import _upsample_args as _args

__all__ = ["KERNELS", "taps", "pads", "weights", "nearest", "linear", "cubic",
           "conv_transpose_params"]

#: Names of the interpolation kernels.
KERNELS = _args.KERNELS

# Half-width of each kernel's support, in input samples.
_RADIUS = {"nearest": 0.5, "linear": 1.0, "cubic": 2.0}
# Keys' parameter: a = -1/2 makes the cubic third-order accurate.
_KEYS_A = -0.5
# Weights larger than this are refused (a mistyped factor, not an interpolation kernel).
_MAX_WEIGHT_ELEMENTS = 2**27


def _ndim(ndim, factor, function):
    if ndim is None:
        return None if hasattr(factor, "__len__") else 2
    return _args.check_count("ndim", ndim, function, 1, 32)


def _checked(kernel, factor, ndim, function):
    """(kernel, factors per axis) checked for ``function``."""
    kernel = _args.check_kernel(kernel, function)
    return kernel, _args.check_factors(factor, _ndim(ndim, factor, function), function)


def _profile(kernel, distance):
    """The kernel's value at ``distance`` (>= 0) in input samples, float64."""
    if kernel == "nearest":
        return np.where(distance < 0.5, 1.0, 0.0)
    if kernel == "linear":
        return np.maximum(0.0, 1.0 - distance)
    a = _KEYS_A
    near = ((a + 2) * distance - (a + 3)) * distance**2 + 1
    far = ((a * distance - 5 * a) * distance + 8 * a) * distance - 4 * a
    return np.where(distance <= 1, near, np.where(distance < 2, far, 0.0))


def _raw_taps(kernel, factor):
    """Taps of ``kernel`` for ``factor``, the end taps trimmed while they are zero."""
    span = round(2 * _RADIUS[kernel] * factor)
    count = span - 1 if (span - 1 - factor) % 2 == 0 else span
    values = _profile(kernel, np.abs(np.arange(count) - (count - 1) / 2) / factor)
    while len(values) > 2 and values[0] == 0 and values[-1] == 0:
        values = values[1:-1]  # Keys' cubic is zero at distance 1: factor 1 keeps one tap
    return values


def _pad_width(kernel, factor):
    """Outputs cropped at each end of an axis: ``(taps - factor) / 2``."""
    return (len(_raw_taps(kernel, factor)) - factor) // 2


def taps(kernel, factor):
    """The 1-D taps of ``kernel`` for upsampling ``factor`` times, in float64.

    Parameters
    ----------
    kernel : {'nearest', 'linear', 'cubic'}
    factor : int
        Upsampling factor, >= 1.

    Returns
    -------
    ndarray, shape (K,)
        ``K = factor`` (nearest), ``2 factor`` (linear) or ``4 factor`` (cubic),
        one fewer for odd factors except for nearest.

    Examples
    --------
    >>> from convt import kernels
    >>> kernels.taps("nearest", 3)
    array([1., 1., 1.])
    >>> kernels.taps("linear", 3).round(4)
    array([0.3333, 0.6667, 1.    , 0.6667, 0.3333])
    >>> kernels.taps("cubic", 2)
    array([-0.0234375, -0.0703125,  0.2265625,  0.8671875,  0.8671875,  0.2265625,
           -0.0703125, -0.0234375])
    """
    kernel, (factor,) = _checked(kernel, factor, 1, "kernels.taps")
    return _raw_taps(kernel, factor)


def pads(kernel, factor, ndim=None):
    """ONNX ``pads`` that put output ``j`` at input coordinate ``(j + 0.5) / f - 0.5``.

    Parameters
    ----------
    kernel : {'nearest', 'linear', 'cubic'}
    factor : int or sequence of int
        Upsampling factor, one for every axis or one per axis.
    ndim : int, optional
        Number of spatial axes; default ``len(factor)`` for a sequence, 2 for an int.

    Returns
    -------
    tuple of int
        ``(x1_begin, ..., xn_begin, x1_end, ..., xn_end)``, the same at both ends.

    Examples
    --------
    >>> from convt import kernels
    >>> kernels.pads("linear", 2)
    (1, 1, 1, 1)
    >>> kernels.pads("cubic", (2, 3, 1))
    (3, 4, 0, 3, 4, 0)
    """
    kernel, factors = _checked(kernel, factor, ndim, "kernels.pads")
    widths = tuple(_pad_width(kernel, f) for f in factors)
    return widths + widths


def weights(kernel, factor, ndim=None, *, channels=1, dtype=np.float64):
    """The N-D interpolation kernel as a depthwise ConvTranspose weight.

    Parameters
    ----------
    kernel : {'nearest', 'linear', 'cubic'}
    factor : int or sequence of int
        Upsampling factor, one for every axis or one per axis.
    ndim : int, optional
        Number of spatial axes; default ``len(factor)`` for a sequence, 2 for an int.
    channels : int, default=1
        Channels upsampled independently (the ConvTranspose runs with
        ``group=channels``).
    dtype : {float64, float32, float16}, default=float64
        The dtype of the weights, which must be that of the input.

    Returns
    -------
    ndarray, shape (channels, 1, K1, ..., Kn)
        The outer product of the 1-D :func:`taps` of each axis, in the ONNX
        weight layout ``(C, M / group, k1, ..., kn)``.

    See Also
    --------
    conv_transpose_params : the matching ``strides``, ``pads`` and ``group``.
    convt.upsample : upsampling with exact boundaries.

    Examples
    --------
    >>> from convt import kernels
    >>> kernels.weights("linear", 2).shape
    (1, 1, 4, 4)
    >>> kernels.weights("linear", (2, 1), channels=3, dtype="float32")[0, 0]
    array([[0.25],
           [0.75],
           [0.75],
           [0.25]], dtype=float32)
    """
    kernel, factors = _checked(kernel, factor, ndim, "kernels.weights")
    channels = _args.check_count("channels", channels, "kernels.weights")
    dtype = _args.check_float_dtype(dtype, "kernels.weights")
    size = channels * math.prod(len(_raw_taps(kernel, f)) for f in factors)
    if size > _MAX_WEIGHT_ELEMENTS:
        raise ValueError(f"The weights of kernels.weights({kernel!r}, factor={factor!r}, "
                         f"channels={channels}) would hold {size} values, more than "
                         f"{_MAX_WEIGHT_ELEMENTS}; check factor, ndim and channels.")
    product = np.ones(())
    for f in factors:
        product = np.multiply.outer(product, taps(kernel, f))
    single = product.astype(dtype)[np.newaxis, np.newaxis]
    return np.ascontiguousarray(np.broadcast_to(single, (channels, 1) + single.shape[2:]))


def nearest(factor, ndim=None, *, channels=1, dtype=np.float64):
    """Nearest-neighbour kernel: each input fills a ``factor``-wide block.

    The same as ``weights("nearest", ...)``; see :func:`weights` for the parameters.
    Pads are zero: no border effect, whatever the boundary mode.

    Examples
    --------
    >>> import numpy as np
    >>> from convt import conv_transpose, kernels
    >>> kernels.nearest(2, ndim=1)
    array([[[1., 1.]]])
    >>> conv_transpose(np.array([[[1.0, 2.0]]]), kernels.nearest(2, ndim=1), strides=(2,))
    array([[[1., 1., 2., 2.]]])
    """
    return weights("nearest", factor, ndim, channels=channels, dtype=dtype)


def linear(factor, ndim=None, *, channels=1, dtype=np.float64):
    """Linear interpolation kernel (bilinear in 2-D, trilinear in 3-D).

    The same as ``weights("linear", ...)``; see :func:`weights` for the parameters.
    The result equals ``scipy.ndimage.zoom(order=1, grid_mode=True)`` and
    ``skimage.transform.rescale(order=1)`` away from the borders.

    Examples
    --------
    >>> from convt import kernels
    >>> kernels.linear(2)[0, 0]
    array([[0.0625, 0.1875, 0.1875, 0.0625],
           [0.1875, 0.5625, 0.5625, 0.1875],
           [0.1875, 0.5625, 0.5625, 0.1875],
           [0.0625, 0.1875, 0.1875, 0.0625]])
    >>> kernels.linear(3, ndim=3).shape
    (1, 1, 5, 5, 5)
    """
    return weights("linear", factor, ndim, channels=channels, dtype=dtype)


def cubic(factor, ndim=None, *, channels=1, dtype=np.float64):
    """Keys' cubic convolution kernel (``a = -1/2``; Catmull-Rom spline).

    The same as ``weights("cubic", ...)``; see :func:`weights` for the parameters.
    This is the bicubic of most image libraries, an interpolating kernel
    (inputs are reproduced exactly), not the cubic B-spline of
    ``scipy.ndimage.zoom(order=3)``, which prefilters the image first.

    Examples
    --------
    >>> from convt import kernels
    >>> kernels.cubic(2, ndim=1).round(4)
    array([[[-0.0234, -0.0703,  0.2266,  0.8672,  0.8672,  0.2266, -0.0703,
             -0.0234]]])
    >>> kernels.cubic(2, ndim=1).sum() / 2
    np.float64(1.0)
    """
    return weights("cubic", factor, ndim, channels=channels, dtype=dtype)


def conv_transpose_params(kernel, factor, ndim=None, *, channels=1):
    """``strides``, ``pads`` and ``group`` of the ConvTranspose that upsamples with ``kernel``.

    Parameters
    ----------
    kernel : {'nearest', 'linear', 'cubic'}
    factor : int or sequence of int
        Upsampling factor, one for every axis or one per axis.
    ndim : int, optional
        Number of spatial axes; default ``len(factor)`` for a sequence, 2 for an int.
    channels : int, default=1
        Channels of the input, upsampled independently.

    Returns
    -------
    dict
        Keyword arguments for :class:`convt.ConvTranspose` or :func:`convt.conv_transpose`.
        The border outputs see zeros beyond the input; :func:`convt.upsample`
        gives exact boundaries.

    Examples
    --------
    >>> import numpy as np
    >>> from convt import conv_transpose, kernels
    >>> kernels.conv_transpose_params("linear", 2, channels=3)
    {'strides': (2, 2), 'pads': (1, 1, 1, 1), 'group': 3}
    >>> x = np.ones((1, 3, 8, 8), dtype=np.float32)
    >>> w = kernels.linear(2, channels=3, dtype=np.float32)
    >>> y = conv_transpose(x, w, **kernels.conv_transpose_params("linear", 2, channels=3))
    >>> y.shape, float(y[0, 0, 5, 5]), float(y[0, 0, 0, 0])
    ((1, 3, 16, 16), 1.0, 0.5625)
    """
    kernel, factors = _checked(kernel, factor, ndim, "kernels.conv_transpose_params")
    channels = _args.check_count("channels", channels, "kernels.conv_transpose_params")
    return {"strides": factors, "pads": pads(kernel, factors), "group": channels}
