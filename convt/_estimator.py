"""The ConvTranspose estimator and its functional twin."""

from __future__ import annotations

from . import _frontend, _geometry, _layouts, _validation
from ._bound import Bindable


class ConvTranspose(_frontend.Parameters, Bindable):
    """Transposed convolution, exactly as the ONNX ConvTranspose operator text.

    Parameters are the ONNX attributes, keyword-only, validated on
    construction and by :meth:`set_params`; they are stored as given.

    Parameters
    ----------
    auto_pad : {'NOTSET', 'SAME_UPPER', 'SAME_LOWER', 'VALID'}, default='NOTSET'
        'NOTSET' uses ``pads``.  'SAME_UPPER' and 'SAME_LOWER' make each output
        axis ``input * stride`` long, the total padding (which includes
        output_padding and may be negative) split with the odd unit at the end
        (UPPER) or the beginning (LOWER).  'VALID' means zero pads.
        (Opsets 1-10 read differently; see ``opset``.)
    dilations : int or sequence of int, optional
        Spacing of kernel taps per spatial axis, each >= 1; a bare int applies
        to every axis.  Default 1.
    group : int, default=1
        Number of groups input and output channels are divided into.
    kernel_shape : sequence of int, optional
        If given, must equal the kernel axes of ``w``.
    output_padding : sequence of int, optional
        Extra output elements at the high end of each axis, each smaller than
        ``max(stride, dilation)`` of its axis (any value >= 0 for opsets 1-10,
        whose text sets no bound).  It selects computed values (or zeros past
        the data); with ``output_shape`` it only enters the pads.
    output_shape : sequence of int, optional
        Spatial output size.  Pads are then generated (floor division, possibly
        negative, meaning zero-filled margins) and ``pads`` is ignored.
    pads : sequence of int, optional
        ``(x1_begin, ..., xn_begin, x1_end, ..., xn_end)``, each >= 0: output
        elements cropped from each side.  Not allowed with auto_pad other than
        'NOTSET'.
    strides : int or sequence of int, optional
        Stride per spatial axis, each >= 1; a bare int applies to every axis.
        Default 1.
    opset : int, optional
        ONNX opset whose ConvTranspose text applies: 1-10 ConvTranspose-1,
        11-21 ConvTranspose-11, 22 and later ConvTranspose-22 (which adds
        bfloat16).  ``None`` means the latest.  ConvTranspose-1 splits the
        pads generated from ``output_shape`` the other way round (SAME_UPPER
        puts the odd unit at the beginning, the other modes at the end), and
        its SAME_UPPER / SAME_LOWER make the output as long as the input.
    data_format : {'NCX', 'NXC'}, default='NCX'
        Layout of ``x`` and of the result: channels first (N, C, D1, ..., Dn)
        or channels last (N, D1, ..., Dn, C).  Both are read and written in
        place, with no transposed copy.
    filter_format : {'IOX', 'XOI', 'OIX'}, default='IOX'
        Layout of ``w``: 'IOX' is ONNX's (C, M/group, k1, ..., kn), 'XOI'
        (k1, ..., kn, M/group, C) and 'OIX' (M/group, C, k1, ..., kn).
    num_threads : int, optional
        Threads.  ``None`` uses ``CONVT_NUM_THREADS`` or ``OMP_NUM_THREADS``
        when set, else every core the process may use; small calls use fewer.
        Results are bitwise identical for every value.

    See Also
    --------
    conv_transpose : the same operator as a function.
    Conv : its adjoint (:meth:`adjoint` builds the exact pair).
    convt.onnx.from_node : the estimator of an ONNX node.

    Notes
    -----
    Per spatial axis, ``y[o] = b + sum x[i] * w[k]`` over ``o = i * stride +
    k * dilation - pads_begin``; the output length is ``stride * (input - 1) +
    output_padding + (kernel - 1) * dilation + 1 - pads_begin - pads_end``.
    Where onnxruntime, PyTorch or OpenVINO deviate from the text (SAME with
    output_padding, negative generated pads), convt follows the text.

    Examples
    --------
    >>> import numpy as np
    >>> from convt import ConvTranspose
    >>> x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    >>> w = np.ones((1, 1, 2, 2), dtype=np.float32)
    >>> layer = ConvTranspose(strides=(2, 2), auto_pad="SAME_UPPER")
    >>> layer.apply(x, w).shape
    (1, 1, 6, 6)
    >>> layer
    ConvTranspose(auto_pad='SAME_UPPER', strides=(2, 2))

    Channels-last images, with a bare int stride:

    >>> images = np.ones((2, 8, 8, 3), dtype=np.float32)           # (N, H, W, C)
    >>> ConvTranspose(strides=2, pads=(1, 1, 1, 1), data_format="NXC").apply(
    ...     images, np.ones((3, 5, 4, 4), dtype=np.float32)).shape
    (2, 16, 16, 5)
    """

    def __init__(
        self,
        *,
        auto_pad="NOTSET",
        dilations=None,
        group=1,
        kernel_shape=None,
        output_padding=None,
        output_shape=None,
        pads=None,
        strides=None,
        opset=None,
        data_format="NCX",
        filter_format="IOX",
        num_threads=None,
    ):
        self.auto_pad = auto_pad
        self.dilations = dilations
        self.group = group
        self.kernel_shape = kernel_shape
        self.output_padding = output_padding
        self.output_shape = output_shape
        self.pads = pads
        self.strides = strides
        self.opset = opset
        self.data_format = data_format
        self.filter_format = filter_format
        self.num_threads = num_threads
        self._attributes()

    _validate = staticmethod(_validation.validate)

    def _check_shapes(self, attributes, x_shape, w_shape, b_shape):
        _layouts.check_shapes(x_shape, w_shape, b_shape, attributes.group,
                              attributes.data_format, attributes.filter_format,
                              attributes.axis_count())

    # what _frontend.prepare needs to know of this operator
    _operator = "ConvTranspose"
    _forward = False
    _filter_view = staticmethod(_layouts.filter_view)
    _resolve = staticmethod(_geometry.resolve)

    def _prepare(self, x, w, b):
        """Validated attributes, the (N, C, D...) and (C, M/group, k...) views of x and
        w, the bias and the geometry."""
        p = _frontend.prepare(self, x, w, b)
        return p.attributes, p.x_view, p.w_view, p.b, p.geometry

    def _geometry_for(self, x_shape, w_shape):
        attributes = self._attributes()
        x_shape, w_shape = tuple(x_shape), tuple(w_shape)
        self._check_shapes(attributes, x_shape, w_shape, None)
        return _geometry.resolve(
            attributes,
            _layouts.canonical_data_shape(x_shape, attributes.data_format),
            _layouts.canonical_filter_shape(w_shape, attributes.filter_format),
        )

    def output_shape_for(self, x_shape, w_shape):
        """The output shape for inputs of these shapes, without computing anything.

        Parameters
        ----------
        x_shape : tuple of int
            ``(N, C, D1, ..., Dn)`` (``(N, D1, ..., Dn, C)`` for data_format 'NXC').
        w_shape : tuple of int
            ``(C, M / group, k1, ..., kn)``, or its filter_format order.

        Returns
        -------
        tuple of int
            ``(N, M, O1, ..., On)`` (``(N, O1, ..., On, M)`` for 'NXC').

        Examples
        --------
        >>> from convt import ConvTranspose
        >>> ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1)).output_shape_for(
        ...     (1, 8, 16, 16), (8, 4, 4, 4))
        (1, 4, 32, 32)
        """
        geometry = self._geometry_for(x_shape, w_shape)
        attributes = self._attributes()
        w_shape = _layouts.canonical_filter_shape(w_shape, attributes.filter_format)
        return _layouts.data_shape(attributes.data_format, int(x_shape[0]),
                                   w_shape[1] * attributes.group, geometry.output_shape)

    def pads_for(self, x_shape, w_shape):
        """The resolved (begin, end) pads of every spatial axis.

        Generated pads (``output_shape``, SAME_*) can be negative: a negative pad
        is a zero-filled margin of the output.  ONNX's flat ``pads`` order is
        ``[b for b, _ in pairs] + [e for _, e in pairs]``.

        Parameters
        ----------
        x_shape, w_shape : tuple of int
            As in :meth:`output_shape_for`.

        Returns
        -------
        tuple of (int, int)

        Examples
        --------
        >>> from convt import ConvTranspose
        >>> ConvTranspose(strides=(3, 2), output_shape=(10, 8)).pads_for(
        ...     (1, 1, 3, 3), (1, 2, 3, 3))
        ((0, -1), (0, -1))
        >>> ConvTranspose(strides=(3, 2), output_shape=(10, 8), opset=9).pads_for(
        ...     (1, 1, 3, 3), (1, 2, 3, 3))
        ((-1, 0), (-1, 0))
        """
        geometry = self._geometry_for(x_shape, w_shape)
        return tuple(zip(geometry.pads_begin, geometry.pads_end))

    def adjoint(self, x_shape, w_shape):
        """The :class:`Conv` whose input gradient this ConvTranspose is, for these shapes.

        With the same weight array, ``<conv_transpose(x), y> == <x, conv(y)>`` for
        every ``x`` of shape ``x_shape`` and ``y`` of the output shape, and the Conv
        maps that output shape back to ``x_shape``.

        The rule: the Conv has the same strides, dilations, group, opset,
        data_format and num_threads, the filter_format naming the same memory
        layout ('IOX' -> 'OIX', 'XOI' -> 'XIO', 'OIX' -> 'IOX'), this layer's
        resolved ``pads_begin`` and, per axis, the smallest ``pads_end >= 0``
        that makes the Conv's output as long as ``x``: ``max(0, pads_end -
        output_padding)`` for pads >= 0 and output_padding below the stride.
        Resolved pads depend on the input size (SAME_*, output_shape), so the
        pair is built for a shape.  Layers whose resolved pads are negative
        (zero margins of the output) or whose output_padding reaches past a
        stride have no Conv adjoint (the Conv text's pads are >= 0): a
        ValueError says which axis.

        Parameters
        ----------
        x_shape, w_shape : tuple of int
            As in :meth:`output_shape_for`.

        Returns
        -------
        Conv

        Examples
        --------
        >>> from convt import ConvTranspose
        >>> up = ConvTranspose(strides=2, pads=(1, 1), output_padding=(1,))
        >>> up.adjoint((1, 4, 10), (4, 2, 3))
        Conv(pads=(1, 0), strides=(2,))
        >>> up.output_shape_for((1, 4, 10), (4, 2, 3))
        (1, 2, 20)
        >>> up.adjoint((1, 4, 10), (4, 2, 3)).output_shape_for((1, 2, 20), (4, 2, 3))
        (1, 4, 10)
        """
        from ._conv import transpose_adjoint

        return transpose_adjoint(self, x_shape, w_shape)

    def _apply(self, x, w, b=None, out=None, engine=None, backend=None, **overrides):
        attributes, x, w, b, geometry = self._prepare(x, w, b)
        return _frontend.compute(x, w, b, geometry, attributes.group, attributes.num_threads,
                                 attributes.data_format, out, engine, backend, **overrides)

    def apply(self, x, w, b=None, *, out=None):
        """Compute the transposed convolution of ``x`` with ``w`` (and bias ``b``).

        Parameters
        ----------
        x : array_like, shape (N, C, D1, ..., Dn)
            Or (N, D1, ..., Dn, C) for data_format 'NXC'.  float16, bfloat16, float32 or
            float64; any memory layout.
        w : array_like, shape (C, M / group, k1, ..., kn)
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
        >>> from convt import ConvTranspose
        >>> x = np.array([[[0., 1., 2.]]])
        >>> w = np.ones((1, 2, 3))
        >>> ConvTranspose().apply(x, w)
        array([[[0., 1., 3., 3., 2.],
                [0., 1., 3., 3., 2.]]])
        """
        return _frontend.apply(self, x, w, b, out)


def conv_transpose(x, w, b=None, *, out=None, **params):
    """Transposed convolution as a function: ``ConvTranspose(**params).apply(x, w, b, out=out)``.

    Parameters
    ----------
    x, w, b, out
        As in :meth:`ConvTranspose.apply`.
    **params
        Any :class:`ConvTranspose` parameter (ONNX attribute names, ``opset``,
        ``data_format``, ``filter_format``, ``num_threads``).

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from convt import conv_transpose
    >>> x = np.ones((1, 1, 2), dtype=np.float32)
    >>> w = np.ones((1, 1, 2), dtype=np.float32)
    >>> conv_transpose(x, w, strides=2)
    array([[[1., 1., 1., 1.]]], dtype=float32)
    """
    return ConvTranspose(**params).apply(x, w, b, out=out)
