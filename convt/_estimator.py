"""The ConvTranspose estimator and its functional twin."""

from __future__ import annotations

import functools
import inspect

import numpy as np

from . import _arrays, _geometry, _validation


def _frozen(value):
    """A hashable snapshot of a parameter value that keeps every type, or None."""
    if isinstance(value, np.ndarray):
        return (np.ndarray, value.dtype.str, value.shape, tuple(value.ravel().tolist()))
    if isinstance(value, (list, tuple)):
        items = tuple(_frozen(item) for item in value)
        return None if None in items else (type(value), items)
    try:
        hash(value)
    except TypeError:
        return None
    return (type(value), value)


_VALIDATED = {}
_VALIDATED_LIMIT = 256


def _validated(params):
    """validate(params), memoised on a typed snapshot of the values.

    The snapshot is taken on every call, so parameters changed in place (a list
    edited after construction) are validated again.  Only valid combinations
    are remembered.
    """
    snapshot = tuple(_frozen(value) for value in params.values())
    if None in snapshot:
        return _validation.validate(params)
    attributes = _VALIDATED.get(snapshot)
    if attributes is None:
        attributes = _validation.validate(params)
        if len(_VALIDATED) >= _VALIDATED_LIMIT:
            _VALIDATED.clear()
        _VALIDATED[snapshot] = attributes
    return attributes


class ConvTranspose:
    """Transposed convolution, exactly as the ONNX ConvTranspose-11/22 operator.

    Parameters are the ONNX attributes, keyword-only, validated on
    construction and by :meth:`set_params`; they are stored as given.

    Parameters
    ----------
    auto_pad : {'NOTSET', 'SAME_UPPER', 'SAME_LOWER', 'VALID'}, default='NOTSET'
        'NOTSET' uses ``pads``.  'SAME_UPPER' and 'SAME_LOWER' make each output
        axis ``input * stride`` long, the total padding (which includes
        output_padding and may be negative) split with the odd unit at the end
        (UPPER) or the beginning (LOWER).  'VALID' means zero pads.
    dilations : sequence of int, optional
        Spacing of kernel taps per spatial axis, each >= 1.  Default 1.
    group : int, default=1
        Number of groups input and output channels are divided into.
    kernel_shape : sequence of int, optional
        If given, must equal ``w.shape[2:]``.
    output_padding : sequence of int, optional
        Extra output elements at the high end of each axis, each smaller than
        ``max(stride, dilation)`` of its axis.  It selects computed values (or
        zeros past the data); with ``output_shape`` it only enters the pads.
    output_shape : sequence of int, optional
        Spatial output size.  Pads are then generated (floor division, possibly
        negative, meaning zero-filled margins) and ``pads`` is ignored.
    pads : sequence of int, optional
        ``(x1_begin, ..., xn_begin, x1_end, ..., xn_end)``, each >= 0: output
        elements cropped from each side.  Not allowed with auto_pad other than
        'NOTSET'.
    strides : sequence of int, optional
        Stride per spatial axis, each >= 1.  Default 1.
    num_threads : int, optional
        OpenMP threads.  ``None`` uses every core the process may use (and
        respects ``OMP_NUM_THREADS``).  Results are bitwise identical for every
        value.

    See Also
    --------
    conv_transpose : the same operator as a function.

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
        self.num_threads = num_threads
        self._attributes()

    @classmethod
    @functools.cache
    def _param_names(cls):
        signature = inspect.signature(cls.__init__)
        return tuple(name for name in signature.parameters if name != "self")

    def _attributes(self):
        return _validated(self.get_params())

    def get_params(self, deep=True):
        """Parameters of this estimator, by name.

        Parameters
        ----------
        deep : bool, default=True
            Accepted for scikit-learn compatibility; there are no sub-estimators.

        Returns
        -------
        dict

        Examples
        --------
        >>> from convt import ConvTranspose
        >>> ConvTranspose(group=2).get_params()["group"]
        2
        """
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set parameters; the new combination is validated before anything changes.

        Returns
        -------
        self : ConvTranspose

        Examples
        --------
        >>> from convt import ConvTranspose
        >>> ConvTranspose().set_params(strides=(2,), pads=(1, 1))
        ConvTranspose(pads=(1, 1), strides=(2,))
        """
        valid = self._param_names()
        for name in params:
            if name not in valid:
                raise ValueError(
                    f"Invalid parameter {name!r} for ConvTranspose. Valid parameters are: "
                    f"{', '.join(valid)}."
                )
        merged = {**self.get_params(), **params}
        _validation.validate(merged)
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def __repr__(self):
        defaults = inspect.signature(type(self).__init__).parameters
        shown = []
        for name in self._param_names():
            value = getattr(self, name)
            default = defaults[name].default
            if value is default or (isinstance(value, (str, int)) and value == default):
                continue
            shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def _prepare(self, x, w, b):
        attributes = self._attributes()
        x = _arrays.as_operand("x", x)
        w = _arrays.as_operand("w", w)
        b = None if b is None else _arrays.as_operand("b", b)
        _arrays.check_same_dtype(x, w, b)
        _arrays.check_shapes(x.shape, w.shape, None if b is None else b.shape, attributes.group)
        geometry = _geometry.resolve(attributes, x.shape, w.shape)
        return attributes, x, w, b, geometry

    def _geometry_for(self, x_shape, w_shape):
        attributes = self._attributes()
        x_shape, w_shape = tuple(x_shape), tuple(w_shape)
        _arrays.check_shapes(x_shape, w_shape, None, attributes.group)
        return _geometry.resolve(attributes, x_shape, w_shape)

    def output_shape_for(self, x_shape, w_shape):
        """The output shape for inputs of these shapes, without computing anything.

        Parameters
        ----------
        x_shape : tuple of int
            ``(N, C, D1, ..., Dn)``.
        w_shape : tuple of int
            ``(C, M / group, k1, ..., kn)``.

        Returns
        -------
        tuple of int
            ``(N, M, O1, ..., On)``.

        Examples
        --------
        >>> from convt import ConvTranspose
        >>> ConvTranspose(strides=(2, 2), pads=(1, 1, 1, 1)).output_shape_for(
        ...     (1, 8, 16, 16), (8, 4, 4, 4))
        (1, 4, 32, 32)
        """
        geometry = self._geometry_for(x_shape, w_shape)
        return (x_shape[0], w_shape[1] * self._attributes().group) + geometry.output_shape

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
        """
        geometry = self._geometry_for(x_shape, w_shape)
        return tuple(zip(geometry.pads_begin, geometry.pads_end))

    def apply(self, x, w, b=None, *, out=None):
        """Compute the transposed convolution of ``x`` with ``w`` (and bias ``b``).

        Parameters
        ----------
        x : array_like, shape (N, C, D1, ..., Dn)
            float16, float32 or float64; any memory layout.
        w : array_like, shape (C, M / group, k1, ..., kn)
            Same dtype as ``x``.
        b : array_like, shape (M,), optional
            Same dtype as ``x``.
        out : ndarray, optional
            C-contiguous array of the exact output shape and dtype to write into.

        Returns
        -------
        ndarray, shape (N, M, O1, ..., On)
            In the dtype of ``x`` (native byte order); ``out`` if given.

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
        from . import _engine  # compiled kernels load on first use: a quick `import convt`

        attributes, x, w, b, geometry = self._prepare(x, w, b)
        shape = (x.shape[0], w.shape[1] * attributes.group) + geometry.output_shape
        y = _arrays.prepare_output(out, shape, x.dtype, {"x": x, "w": w, "b": b})
        return _engine.compute(x, w, b, y, geometry, attributes.group, attributes.num_threads)


def conv_transpose(x, w, b=None, *, out=None, **params):
    """Transposed convolution as a function: ``ConvTranspose(**params).apply(x, w, b, out=out)``.

    Parameters
    ----------
    x, w, b, out
        As in :meth:`ConvTranspose.apply`.
    **params
        Any :class:`ConvTranspose` parameter (ONNX attribute names).

    Returns
    -------
    ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from convt import conv_transpose
    >>> x = np.ones((1, 1, 2), dtype=np.float32)
    >>> w = np.ones((1, 1, 2), dtype=np.float32)
    >>> conv_transpose(x, w, strides=(2,))
    array([[[1., 1., 1., 1.]]], dtype=float32)
    """
    return ConvTranspose(**params).apply(x, w, b, out=out)
