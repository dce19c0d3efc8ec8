"""The forward Conv estimator, its functional twin, and the adjoint pair with ConvTranspose."""

from __future__ import annotations

from . import _frontend, _geometry, _layouts, _validation
from ._bound import Bindable

# The same weight array read by a Conv and by its adjoint ConvTranspose: Conv's
# (M, C/group, k...) is ConvTranspose's (C, M/group, k...) with the roles of
# the channels exchanged, so the letters I and O swap.
CONV_TO_TRANSPOSE_FORMAT = {"OIX": "IOX", "XIO": "XOI", "IOX": "OIX"}
TRANSPOSE_TO_CONV_FORMAT = {value: key for key, value in CONV_TO_TRANSPOSE_FORMAT.items()}


class Conv(_frontend.Parameters, Bindable):
    """Convolution, exactly as the ONNX Conv operator text.

    Parameters are the ONNX attributes, keyword-only, validated on
    construction and by :meth:`set_params`; they are stored as given.

    Parameters
    ----------
    auto_pad : {'NOTSET', 'SAME_UPPER', 'SAME_LOWER', 'VALID'}, default='NOTSET'
        'NOTSET' uses ``pads``.  'SAME_UPPER' and 'SAME_LOWER' pad the input so
        that each output axis is ``ceil(input / stride)`` long, the odd unit of
        padding at the end (UPPER) or the beginning (LOWER); no padding where
        none is needed.  'VALID' means zero pads.  (Opsets 1-10 read
        differently; see ``opset``.)
    dilations : int or sequence of int, optional
        Spacing of kernel taps per spatial axis, each >= 1; a bare int applies
        to every axis.  Default 1.
    group : int, default=1
        Number of groups input and output channels are divided into; it must
        divide both.
    kernel_shape : sequence of int, optional
        If given, must equal the kernel axes of ``w``.
    pads : sequence of int, optional
        ``(x1_begin, ..., xn_begin, x1_end, ..., xn_end)``, each >= 0: zeros
        added to each side of the input.  Not allowed with auto_pad other than
        'NOTSET'.
    strides : int or sequence of int, optional
        Stride per spatial axis, each >= 1; a bare int applies to every axis.
        Default 1.
    opset : int, optional
        ONNX opset whose Conv text applies: 1-10 Conv-1, 11-21 Conv-11, 22 and
        later Conv-22 (which adds bfloat16).  ``None`` means the latest.
        Conv-1's SAME_UPPER / SAME_LOWER make the output as long as the input
        ("the output spatial size match the input", read literally).
    data_format : {'NCX', 'NXC'}, default='NCX'
        Layout of ``x`` and of the result: channels first (N, C, D1, ..., Dn)
        or channels last (N, D1, ..., Dn, C), read and written in place.
    filter_format : {'OIX', 'XIO', 'IOX'}, default='OIX'
        Layout of ``w``: 'OIX' is ONNX's (M, C/group, k1, ..., kn), 'XIO'
        (k1, ..., kn, C/group, M) and 'IOX' (C/group, M, k1, ..., kn).
    num_threads : int, optional
        Threads.  ``None`` uses every core the process may use (and
        respects ``OMP_NUM_THREADS``).  Results are bitwise identical for every
        value.

    See Also
    --------
    conv : the same operator as a function.
    ConvTranspose : its adjoint (:meth:`adjoint` builds the exact pair).

    Notes
    -----
    Per spatial axis, ``y[o] = b + sum x_padded[o * stride + k * dilation] *
    w[k]``, where ``x_padded`` has ``pads_begin`` zeros before the input and
    ``pads_end`` after; the output length is ``floor((input + pads_begin +
    pads_end - dilation * (kernel - 1) - 1) / stride) + 1``.  Padding zeros are
    multiplied like any input: a NaN or infinite weight gives NaN where it meets
    padding, as onnxruntime, the onnx reference and PyTorch compute.

    Examples
    --------
    The text's first example (a 5x5 input, a 3x3 kernel of ones, pads 1):

    >>> import numpy as np
    >>> from convt import Conv
    >>> x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    >>> w = np.ones((1, 1, 3, 3), dtype=np.float32)
    >>> layer = Conv(kernel_shape=(3, 3), pads=(1, 1, 1, 1))
    >>> layer.apply(x, w)[0, 0]
    array([[ 12.,  21.,  27.,  33.,  24.],
           [ 33.,  54.,  63.,  72.,  51.],
           [ 63.,  99., 108., 117.,  81.],
           [ 93., 144., 153., 162., 111.],
           [ 72., 111., 117., 123.,  84.]], dtype=float32)
    >>> Conv(strides=2, auto_pad="SAME_LOWER").output_shape_for(x.shape, w.shape)
    (1, 1, 3, 3)
    >>> layer
    Conv(kernel_shape=(3, 3), pads=(1, 1, 1, 1))
    """

    # what _frontend.prepare needs to know of this operator (forward: the strides
    # decimate the input)
    _operator = "Conv"
    _forward = True
    _filter_view = staticmethod(_layouts.conv_filter_view)
    _resolve = staticmethod(_geometry.resolve_conv)

    def __init__(
        self,
        *,
        auto_pad="NOTSET",
        dilations=None,
        group=1,
        kernel_shape=None,
        pads=None,
        strides=None,
        opset=None,
        data_format="NCX",
        filter_format="OIX",
        num_threads=None,
    ):
        self.auto_pad = auto_pad
        self.dilations = dilations
        self.group = group
        self.kernel_shape = kernel_shape
        self.pads = pads
        self.strides = strides
        self.opset = opset
        self.data_format = data_format
        self.filter_format = filter_format
        self.num_threads = num_threads
        self._attributes()

    _validate = staticmethod(_validation.validate_conv)

    def _check_shapes(self, attributes, x_shape, w_shape, b_shape):
        _layouts.check_conv_shapes(x_shape, w_shape, b_shape, attributes.group,
                                   attributes.data_format, attributes.filter_format,
                                   attributes.axis_count())

    def _prepare(self, x, w, b):
        """Validated attributes, the (N, C, D...) and (M, C/group, k...) views of x and
        w, the bias and the geometry."""
        p = _frontend.prepare(self, x, w, b)
        return p.attributes, p.x_view, p.w_view, p.b, p.geometry

    def _geometry_for(self, x_shape, w_shape):
        attributes = self._attributes()
        x_shape, w_shape = tuple(x_shape), tuple(w_shape)
        self._check_shapes(attributes, x_shape, w_shape, None)
        return _geometry.resolve_conv(
            attributes,
            _layouts.canonical_data_shape(x_shape, attributes.data_format),
            _layouts.canonical_conv_filter_shape(w_shape, attributes.filter_format),
        )

    def output_shape_for(self, x_shape, w_shape):
        """The output shape for inputs of these shapes, without computing anything.

        Parameters
        ----------
        x_shape : tuple of int
            ``(N, C, D1, ..., Dn)`` (``(N, D1, ..., Dn, C)`` for data_format 'NXC').
        w_shape : tuple of int
            ``(M, C / group, k1, ..., kn)``, or its filter_format order.

        Returns
        -------
        tuple of int
            ``(N, M, O1, ..., On)`` (``(N, O1, ..., On, M)`` for 'NXC').

        Examples
        --------
        >>> from convt import Conv
        >>> Conv(strides=(2, 2), pads=(1, 1, 1, 1)).output_shape_for((1, 8, 7, 5), (4, 8, 3, 3))
        (1, 4, 4, 3)
        """
        geometry = self._geometry_for(x_shape, w_shape)
        attributes = self._attributes()
        w_shape = _layouts.canonical_conv_filter_shape(w_shape, attributes.filter_format)
        return _layouts.data_shape(attributes.data_format, int(x_shape[0]), w_shape[0],
                                   geometry.output_shape)

    def pads_for(self, x_shape, w_shape):
        """The resolved (begin, end) pads of every spatial axis, each >= 0.

        ONNX's flat ``pads`` order is ``[b for b, _ in pairs] + [e for _, e in pairs]``.

        Parameters
        ----------
        x_shape, w_shape : tuple of int
            As in :meth:`output_shape_for`.

        Returns
        -------
        tuple of (int, int)

        Examples
        --------
        >>> from convt import Conv
        >>> Conv(strides=2, auto_pad="SAME_UPPER").pads_for((1, 1, 8, 7), (1, 1, 4, 4))
        ((1, 1), (1, 2))
        >>> Conv(strides=2, auto_pad="SAME_LOWER").pads_for((1, 1, 8, 7), (1, 1, 4, 4))
        ((1, 1), (2, 1))
        """
        geometry = self._geometry_for(x_shape, w_shape)
        return tuple(zip(geometry.pads_begin, geometry.pads_end))

    def adjoint(self, x_shape, w_shape):
        """The ConvTranspose that is this Conv's adjoint (input gradient) for these shapes.

        With the same weight array, ``<conv(x), y> == <x, conv_transpose(y)>`` for
        every ``x`` of shape ``x_shape`` and ``y`` of the output shape, and the
        ConvTranspose maps that output shape back to ``x_shape``.

        The rule: the ConvTranspose has the same strides, dilations, group,
        opset, data_format and num_threads, the Conv's resolved pads as explicit
        ``pads``, the filter_format naming the same memory layout ('OIX' ->
        'IOX', 'XIO' -> 'XOI', 'IOX' -> 'OIX') and, per axis, ``output_padding
        = (input + pads_begin + pads_end - dilation * (kernel - 1) - 1) mod
        stride``: the input positions past the last window, which the Conv
        never reads and the ConvTranspose must still produce (as zeros).  That
        remainder depends on the input size, so the pair is built for a shape.

        Parameters
        ----------
        x_shape, w_shape : tuple of int
            As in :meth:`output_shape_for`.

        Returns
        -------
        ConvTranspose

        Examples
        --------
        >>> import numpy as np
        >>> from convt import Conv
        >>> down = Conv(strides=2, auto_pad="SAME_UPPER")
        >>> up = down.adjoint((1, 3, 9, 9), (8, 3, 3, 3))
        >>> up
        ConvTranspose(pads=(1, 1, 1, 1), strides=(2, 2))
        >>> up.output_shape_for(down.output_shape_for((1, 3, 9, 9), (8, 3, 3, 3)), (8, 3, 3, 3))
        (1, 3, 9, 9)
        """
        from ._estimator import ConvTranspose

        geometry = self._geometry_for(x_shape, w_shape)
        attributes = self._attributes()
        remainders = tuple(
            (size + begin + end - dilation * (kernel - 1) - 1) % stride
            for size, kernel, stride, dilation, begin, end in zip(
                geometry.input_shape, geometry.kernel_shape, geometry.strides,
                geometry.dilations, geometry.pads_begin, geometry.pads_end))
        return ConvTranspose(
            dilations=_unless_ones(geometry.dilations), group=attributes.group,
            output_padding=remainders if any(remainders) else None,
            pads=geometry.pads_begin + geometry.pads_end,
            strides=geometry.strides, opset=self.opset, data_format=self.data_format,
            filter_format=CONV_TO_TRANSPOSE_FORMAT[attributes.filter_format],
            num_threads=self.num_threads)

    def _apply(self, x, w, b=None, out=None, engine=None, backend=None, **overrides):
        attributes, x, w, b, geometry = self._prepare(x, w, b)
        return _frontend.compute_conv(x, w, b, geometry, attributes.group,
                                      attributes.num_threads, attributes.data_format, out,
                                      engine, backend, **overrides)

    def apply(self, x, w, b=None, *, out=None):
        """Compute the convolution of ``x`` with ``w`` (and bias ``b``).

        Parameters
        ----------
        x : array_like, shape (N, C, D1, ..., Dn)
            Or (N, D1, ..., Dn, C) for data_format 'NXC'.  float16, bfloat16, float32 or
            float64; any memory layout.
        w : array_like, shape (M, C / group, k1, ..., kn)
            Or its filter_format order.  Same dtype as ``x``.
        b : array_like, shape (M,), optional
            Same dtype as ``x``.
        out : ndarray, optional
            Array of the exact output shape and dtype to write into,
            C-contiguous in the data_format's order.

        Returns
        -------
        ndarray, shape (N, M, O1, ..., On)
            Or (N, O1, ..., On, M) for 'NXC'; in the dtype of ``x`` (native byte
            order), C-contiguous; ``out`` if given.

        Examples
        --------
        >>> import numpy as np
        >>> from convt import Conv
        >>> Conv(strides=2).apply(np.array([[[0., 1., 2., 3., 4.]]]), np.array([[[1., 10.]]]))
        array([[[10., 32.]]])
        """
        return _frontend.apply(self, x, w, b, out)


def _unless_ones(values):
    """None (the default) for all-ones per-axis values, else the tuple: short reprs."""
    return None if all(v == 1 for v in values) else tuple(values)


def conv(x, w, b=None, *, out=None, **params):
    """Convolution as a function: ``Conv(**params).apply(x, w, b, out=out)``.

    Parameters
    ----------
    x, w, b, out
        As in :meth:`Conv.apply`.
    **params
        Any :class:`Conv` parameter (ONNX attribute names, ``opset``,
        ``data_format``, ``filter_format``, ``num_threads``).

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from convt import conv
    >>> conv(np.ones((1, 1, 4), np.float32), np.ones((1, 1, 2), np.float32), pads=(1, 0))
    array([[[1., 2., 2., 2.]]], dtype=float32)
    """
    return Conv(**params).apply(x, w, b, out=out)


def transpose_adjoint(layer, x_shape, w_shape):
    """The Conv that is ConvTranspose ``layer``'s adjoint for these shapes (see
    :meth:`convt.ConvTranspose.adjoint`)."""
    geometry = layer._geometry_for(x_shape, w_shape)
    attributes = layer._attributes()
    ends = []
    for axis, (size, outputs, kernel, stride, dilation, begin) in enumerate(zip(
            geometry.input_shape, geometry.output_shape, geometry.kernel_shape,
            geometry.strides, geometry.dilations, geometry.pads_begin)):
        # The Conv reading the ConvTranspose's output must give `size` outputs:
        # pads_end in [lowest, lowest + stride - 1]; the smallest one >= 0 is taken.
        lowest = stride * (size - 1) + dilation * (kernel - 1) + 1 - outputs - begin
        end = max(0, lowest)
        if begin < 0 or end > lowest + stride - 1:
            raise ValueError(
                f"This ConvTranspose has no Conv adjoint for x of shape {tuple(x_shape)}: on "
                f"spatial axis {axis} its resolved pads are ({begin}, "
                f"{geometry.pads_end[axis]}) with output_padding "
                f"{geometry.output_padding[axis]}, so the Conv would need pads_begin "
                f"{begin} and pads_end {lowest} to {lowest + stride - 1}, and the Conv text "
                f"allows pads >= 0 only. (A negative pad is a zero margin of the "
                f"ConvTranspose's output, which its adjoint would have to crop.) Use explicit "
                f"pads >= 0 and an output_padding below the stride.")
        ends.append(end)
    return Conv(
        dilations=_unless_ones(geometry.dilations), group=attributes.group,
        pads=geometry.pads_begin + tuple(ends), strides=geometry.strides, opset=layer.opset,
        data_format=layer.data_format,
        filter_format=TRANSPOSE_TO_CONV_FORMAT[attributes.filter_format],
        num_threads=layer.num_threads)
