"""A layer with its weights fixed: ``layer.bind(w, b)``.

Inference and iterative reconstruction apply one layer to many inputs with the
same weights.  ``layer.apply(x, w)`` cannot know that w is unchanged since the
last call, so it compares w with the copy its weight cache keeps (one memcmp
of the weights per call, a few percent of a weight-heavy layer) or reads w
afresh (col2im).  A bound layer owns a read-only copy of w, made once, that
nothing else can write: its packings (convt._weight_cache.FixedWeights) are
made on the first call of each plan and then used without any comparison;
col2im streams w's columns from blocks made once instead of copying them from w
every call, and a Conv whose weights ``apply`` streams packs them once.  Results
are bitwise those of ``layer.apply(x, w, b)``.
"""

from __future__ import annotations

import math

import numpy as np

from . import _frontend
from ._weight_cache import FixedWeights


def _read_only_copy(array):
    """A read-only copy of ``array`` that owns its memory, in the same memory order."""
    copy = np.array(array, copy=True, order="K")
    copy.flags.writeable = False
    return copy


def _own_copy(name, value, opset, operator):
    """_read_only_copy of operand ``value``, validated like ``apply``'s operands."""
    return _read_only_copy(_frontend.operands({name: value}, opset=opset,
                                              operator=operator)[name])


class Bindable:
    """The ``bind`` method of ConvTranspose and Conv."""

    def bind(self, w, b=None):
        """This layer with weights ``w`` (and bias ``b``) fixed, for many inputs.

        The weights and bias are checked (arrays of a supported dtype) and copied
        once (read-only, in their memory order); their shapes are checked against
        ``x`` on each call, as by ``apply``.  The returned :class:`~convt.BoundLayer`
        is called with ``x`` alone.  Each call then uses the weights as packed on the first call of
        its input shape, without comparing them with a remembered copy as
        ``apply`` must (w may have changed between calls), and weight-bound
        layers on small maps read column blocks made once.  Results are bitwise
        those of ``apply`` with the same operands.  Memory: the copy, plus up to
        four packings (about the weights' size each), kept while the bound layer
        lives.

        Parameters
        ----------
        w : array_like
            As in ``apply``.
        b : array_like, optional
            As in ``apply``.

        Returns
        -------
        BoundLayer

        Examples
        --------
        >>> import numpy as np
        >>> from convt import Conv, ConvTranspose
        >>> w = np.ones((2, 1, 3), dtype=np.float32)
        >>> down = Conv(strides=2).bind(w)
        >>> down
        Conv(strides=2).bind(w: float32 (2, 1, 3))
        >>> x = np.arange(7, dtype=np.float32)[None, None]
        >>> down(x)
        array([[[ 3.,  9., 15.],
                [ 3.,  9., 15.]]], dtype=float32)
        >>> up = ConvTranspose(strides=2).bind(w)
        >>> y = np.ones((1, 2, 2), dtype=np.float32)
        >>> bool(np.array_equal(up(y), ConvTranspose(strides=2).apply(y, w)))
        True
        """
        return BoundLayer(self, w, b)


class BoundLayer:
    """A :class:`ConvTranspose` or :class:`Conv` with its weights (and bias) fixed.

    Made by ``layer.bind(w, b)``; see :meth:`ConvTranspose.bind`.  The layer's
    parameters and the weights are copied when it is made: later changes to the
    layer or to ``w`` do not reach it.

    Attributes
    ----------
    layer : ConvTranspose or Conv
        A clone of the layer it was bound from.
    weights : ndarray
        The weights, read-only.
    bias : ndarray or None
        The bias, read-only.

    Examples
    --------
    >>> import numpy as np
    >>> from convt import ConvTranspose
    >>> w = np.ones((1, 2, 3))
    >>> up = ConvTranspose().bind(w)
    >>> up(np.array([[[0., 1., 2.]]]))
    array([[[0., 1., 3., 3., 2.],
            [0., 1., 3., 3., 2.]]])
    """

    def __init__(self, layer, w, b=None):
        attributes = layer._attributes()
        self.layer = type(layer)(**layer.get_params())
        self._fixed = FixedWeights(_own_copy("w", w, attributes.opset, layer._operator))
        self._bias = None if b is None else _own_copy("b", b, attributes.opset, layer._operator)
        if self._bias is not None and self._bias.dtype != self._fixed.weights.dtype:
            raise TypeError(
                f"w and b must have the same dtype; got w.dtype={self._fixed.weights.dtype} "
                f"and b.dtype={self._bias.dtype}. Cast one of them, e.g. b.astype(w.dtype).")

    @classmethod
    def _sharing(cls, layer, fixed):
        """A bound layer over the same fixed weights (an adjoint), without a bias."""
        bound = cls.__new__(cls)
        bound.layer, bound._fixed, bound._bias = layer, fixed, None
        return bound

    @property
    def weights(self):
        """The bound weights, a read-only view (the copy itself owns its memory, and an
        owner may be made writeable again: a view may not)."""
        return self._fixed.weights[...]

    def apply(self, x, *, out=None):
        """The layer applied to ``x`` with the bound weights and bias.

        Parameters
        ----------
        x : array_like
            As in the layer's ``apply``; of the weights' dtype.
        out : ndarray, optional
            As in the layer's ``apply``.

        Returns
        -------
        ndarray
            Bitwise ``layer.apply(x, weights, bias, out=out)``.

        Examples
        --------
        >>> import numpy as np
        >>> from convt import Conv
        >>> smooth = Conv(pads=(1, 1)).bind(np.full((1, 1, 3), 1 / 3))
        >>> smooth.apply(np.array([[[3., 3., 3., 6.]]]))
        array([[[2., 3., 4., 3.]]])
        """
        return _frontend.apply(self.layer, x, self._fixed.weights, self._bias, out)

    __call__ = apply

    @property
    def bias(self):
        """The bound bias, a read-only view, or None."""
        return None if self._bias is None else self._bias[...]

    def output_shape_for(self, x_shape):
        """The output shape for an input of shape ``x_shape``.

        Examples
        --------
        >>> import numpy as np
        >>> from convt import ConvTranspose
        >>> ConvTranspose(strides=2).bind(np.ones((3, 4, 2, 2))).output_shape_for((1, 3, 5, 5))
        (1, 4, 10, 10)
        """
        return self.layer.output_shape_for(x_shape, self.weights.shape)

    def adjoint(self, x_shape):
        """The bound adjoint for inputs of shape ``x_shape``: the layer's
        ``adjoint(x_shape, weights.shape)`` bound to the same weights (shared, not
        copied), without a bias: the adjoint of the linear part.

        ``<self(x), y> == <x, self.adjoint(x.shape)(y)>`` up to rounding, for x of
        shape ``x_shape`` and y of the output shape (the pair of iterative
        reconstruction).

        Examples
        --------
        >>> import numpy as np
        >>> from convt import Conv
        >>> rng = np.random.default_rng(0)
        >>> blur = Conv(strides=2, pads=(1, 1, 1, 1)).bind(rng.random((1, 1, 3, 3)))
        >>> x, y = rng.random((1, 1, 9, 9)), rng.random((1, 1, 5, 5))
        >>> bool(np.isclose(np.vdot(blur(x), y), np.vdot(x, blur.adjoint(x.shape)(y))))
        True
        """
        return type(self)._sharing(self.layer.adjoint(x_shape, self.weights.shape), self._fixed)

    def as_linear_operator(self, x_shape):
        """This bound layer as a ``scipy.sparse.linalg.LinearOperator`` on inputs of
        shape ``x_shape``, its adjoint as ``rmatvec``: for scipy's iterative solvers
        (``lsqr``, ``cg`` on the normal equations, ...).

        Vectors are the flattened (C-order) input and output arrays; ``matmat``
        applies the layer to each column.  The layer must have no bias (an
        operator with one is not linear): bind without ``b``.

        Parameters
        ----------
        x_shape : tuple of int
            The input shape, batch included.

        Returns
        -------
        scipy.sparse.linalg.LinearOperator
            Of shape (output size, input size) and the weights' dtype.

        Examples
        --------
        >>> import numpy as np
        >>> from scipy.sparse.linalg import lsqr
        >>> from convt import Conv
        >>> blur = Conv(pads=(1, 1)).bind(np.array([[[0.25, 0.5, 0.25]]]))
        >>> truth = np.sin(np.linspace(0, 3, 40))[None, None]
        >>> A = blur.as_linear_operator(truth.shape)
        >>> A.shape
        (40, 40)
        >>> estimate = lsqr(A, blur(truth).ravel(), atol=1e-12, btol=1e-12)[0]
        >>> bool(np.abs(estimate - truth.ravel()).max() < 1e-6)
        True
        """
        if self._bias is not None:
            raise ValueError(
                "as_linear_operator needs a bound layer without a bias (an operator with "
                "one is not linear); bind the weights alone: layer.bind(w).")
        from scipy.sparse.linalg import LinearOperator

        x_shape = tuple(x_shape)
        y_shape = self.output_shape_for(x_shape)
        adjoint = self.adjoint(x_shape)
        dtype = self._fixed.weights.dtype

        def forward(vector):
            return self.apply(np.ascontiguousarray(vector, dtype=dtype).reshape(x_shape)).ravel()

        def backward(vector):
            return adjoint.apply(
                np.ascontiguousarray(vector, dtype=dtype).reshape(y_shape)).ravel()

        return LinearOperator((math.prod(y_shape), math.prod(x_shape)), matvec=forward,
                              rmatvec=backward, dtype=dtype)

    def __repr__(self):
        weights = self.weights
        bias = "" if self._bias is None else f", b: {self._bias.dtype} {self._bias.shape}"
        return f"{self.layer!r}.bind(w: {weights.dtype} {weights.shape}{bias})"

    def __getstate__(self):
        return {"layer": self.layer, "weights": self._fixed.weights, "bias": self._bias}

    def __setstate__(self, state):
        # unpickled arrays are writeable: the copies must be made again
        self.layer = state["layer"]
        self._fixed = FixedWeights(_read_only_copy(state["weights"]))
        self._bias = None if state["bias"] is None else _read_only_copy(state["bias"])
