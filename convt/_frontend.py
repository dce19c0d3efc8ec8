"""What every front-end shares: the parameter protocol, operand coercion and the one
call into the engine.

Each front-end (``ConvTranspose``, ``convt.openvino``, ``convt.onednn``)
validates its own attributes in its own vocabulary, resolves them to a
:class:`convt._geometry.Geometry` with its spec's pad rules, and calls
:func:`compute`, which runs ``convt._engine.compute`` once on (N, C, D...),
(C, M/group, k...) and (N, M, O...) views of the user's arrays.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
from dataclasses import dataclass

import numpy as np

from . import _arrays, _layouts, _outputs, _validation


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


def validated(validate, params):
    """validate(params), memoised on a typed snapshot of the values.

    The snapshot is taken on every call, so parameters changed in place (a list
    edited after construction) are validated again.  Only valid combinations
    are remembered.
    """
    snapshot = tuple(_frozen(value) for value in params.values())
    if None in snapshot:
        return validate(params)
    key = (validate, tuple(params), snapshot)
    attributes = _VALIDATED.get(key)
    if attributes is None:
        attributes = validate(params)
        if len(_VALIDATED) >= _VALIDATED_LIMIT:
            _VALIDATED.clear()
        _VALIDATED[key] = attributes
    return attributes


class Parameters:
    """scikit-learn's parameter protocol for a front-end with keyword-only parameters.

    Subclasses define ``__init__`` (storing every parameter as given, then
    calling ``self._attributes()``) and ``_validate(params)``, a static
    method returning the normalised attributes or raising.
    """

    def __new__(cls, *args, **kwargs):
        # Before __init__: an unknown keyword gets a suggestion, not Python's bare TypeError.
        valid = cls._param_names()
        for name in kwargs:
            if name not in valid:
                raise TypeError(_validation.unknown_parameter_message(cls.__name__, name, valid))
        return super().__new__(cls)

    # An assignment may change a parameter: the key remembered calls were found
    # under (see _parameter_key) goes with it.
    def __setattr__(self, name, value):
        self.__dict__.pop(_PARAMETER_KEY, None)
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        self.__dict__.pop(_PARAMETER_KEY, None)
        object.__delattr__(self, name)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop(_PARAMETER_KEY, None)
        return state

    @classmethod
    @functools.cache
    def _param_names(cls):
        signature = inspect.signature(cls.__init__)
        return tuple(name for name in signature.parameters if name != "self")

    def _attributes(self):
        return validated(self._validate, self.get_params())

    def get_params(self, deep=True):
        """Parameters of this estimator, by name, as given.

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
        self

        Examples
        --------
        >>> from convt import ConvTranspose
        >>> ConvTranspose().set_params(strides=(2,), pads=(1, 1))
        ConvTranspose(pads=(1, 1), strides=(2,))
        """
        valid = self._param_names()
        for name in params:
            if name not in valid:
                raise ValueError(_validation.unknown_parameter_message(
                    type(self).__name__, name, valid))
        merged = {**self.get_params(), **params}
        self._validate(merged)
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


# Operands that may be None (no bias); any other None is a TypeError naming it.
OPTIONAL_OPERANDS = ("b", "bias")


def operands(arrays, opset=None, operator="ConvTranspose"):
    """The operands (name -> array-like or None) as arrays the kernels can read,
    all of one dtype.

    ``opset`` applies ONNX's per-opset dtype rule of ``operator`` (bfloat16
    from 22) before convt's own dtype check, by dtype name, so it needs no
    ml_dtypes.
    """
    result = {}
    for name, value in arrays.items():
        if value is None:
            if name not in OPTIONAL_OPERANDS:
                raise TypeError(f"{name} must be an array (a numpy array or a nested sequence of "
                                f"numbers), got None")
            result[name] = None
            continue
        array = _layouts.as_array(name, value)
        if opset is not None:
            _validation.check_opset_dtype(name, array.dtype, opset, operator)
        result[name] = _arrays.as_operand(name, array)
    names = [name for name in result if result[name] is not None]
    first = result[names[0]]
    for name in names[1:]:
        if result[name].dtype != first.dtype:
            raise TypeError(
                f"{names[0]} and {name} must have the same dtype; got "
                f"{names[0]}.dtype={first.dtype} and {name}.dtype={result[name].dtype}. Cast one "
                f"of them, e.g. {name}.astype({names[0]}.dtype).")
    return result


def compute(x, w, b, geometry, group, num_threads, data_format="NCX", out=None,
            engine=None, backend=None, **overrides):
    """Run the transposed convolution and return the output in ``data_format``.

    ``x`` is an (N, C, D...) array or view, ``w`` a (C, M/group, k...) one, ``b``
    (M,) or None.  The output is allocated (or ``out`` checked: C-contiguous in
    ``data_format`` order) in the user's layout and the engine writes it
    through an (N, M, O...) view.  ``engine``, ``backend`` and ``overrides``
    force a kernel path (tests; see convt._engine.compute).
    """
    from . import _engine  # compiled kernels load on first use: a quick `import convt`

    shape = _layouts.data_shape(data_format, x.shape[0], w.shape[1] * group,
                                geometry.output_shape)
    y = _arrays.prepare_output(out, shape, x.dtype, {"x": x, "w": w, "b": b})
    _engine.compute(x, w, b, _layouts.data_view(y, data_format), geometry, group, num_threads,
                    engine=engine, backend=backend, **overrides)
    return y


def compute_conv(x, w, b, geometry, group, num_threads, data_format="NCX", out=None,
                 engine=None, backend=None, **overrides):
    """Run the forward Conv and return the output in ``data_format``.

    ``x`` is an (N, C, D...) array or view, ``w`` an (M, C/group, k...) one, ``b``
    (M,) or None; otherwise as :func:`compute` (see convt._engine.compute_conv).
    """
    from . import _engine

    shape = _layouts.data_shape(data_format, x.shape[0], w.shape[0], geometry.output_shape)
    y = _arrays.prepare_output(out, shape, x.dtype, {"x": x, "w": w, "b": b})
    _engine.compute_conv(x, w, b, _layouts.data_view(y, data_format), geometry, group,
                         num_threads, engine=engine, backend=backend, **overrides)
    return y


# --- repeated calls ------------------------------------------------------------
#
# A call is validated, resolved and planned in full the first time; what that
# produced (the output shape, the views, the engine's Call) is remembered under
# a key of everything it depended on: the estimator's class and parameter
# values with their types, each operand's type, shape, strides, dtype and
# alignment, the kernel-set override and the tuning constants.  A later call with an equal key only makes its views and output
# and runs the engine.  Operands that validation would have converted (array-
# likes, misaligned or byte-swapped arrays, subclasses) never take this path.

_CALLS = {}
_CALLS_LIMIT = 256
_MODULES = {}  # the engine and dispatch modules once imported: repeated calls skip the import


def _module(name):
    """convt._engine or convt._dispatch, imported on first use (a quick `import convt`)."""
    module = _MODULES.get(name)
    if module is None:
        module = _MODULES[name] = importlib.import_module("." + name, __package__)
    return module


# The instance attribute a layer's parameter key is kept in while its values are
# immutable (Parameters.__setattr__ drops it): 4 of a tiny call's 23 us.
_PARAMETER_KEY = "_convt_parameter_key"


def _parameter_key(layer):
    """The parameters as a hashable key that keeps types (2 and 2.0 and True differ),
    or None for values that are not plain ints, strings, None or tuples or lists of ints."""
    state = layer.__dict__
    key = state.get(_PARAMETER_KEY)
    if key is not None:
        return key
    parts = [type(layer)]
    lists = False
    for name in layer._param_names():
        value = state[name] if name in state else getattr(layer, name)
        kind = type(value)
        if kind is tuple or kind is list:
            for item in value:
                if type(item) is not int:
                    return None
            if kind is list:
                lists = True
                value = tuple(value)  # its current items: an edit in place makes a new key
        elif kind is not int and kind is not str and value is not None:
            return None
        parts.append((kind, value))
    key = tuple(parts)
    if not lists:  # a list may change in place, unseen: its key is made every call
        state[_PARAMETER_KEY] = key
    return key


class KeyParts:
    """What the compiled call key (convt._kernels.call_key) reads besides the
    operands: the parameter key's slot and maker, the kernel-set variable (and its
    key in CPython's os.environ mapping) and the tuning constants' module."""

    parameter_slot = _PARAMETER_KEY
    parameter_key = staticmethod(_parameter_key)
    environ_type = getattr(os, "_Environ", None)
    kernel_set_variable = None    # set with dispatch, on first use
    kernel_set_key = None
    dispatch = None


def call_key(layer, x, w, b, out):
    """The key of a call (see above), or None if it cannot be remembered:
    ``(parameters, x's part, w's part, b's part or None, out is None, kernel-set
    variable, tuning key)``, an operand's part being its shape, strides, dtype and
    alignment.  Compiled (convt._kernels.call_key): every call makes one, and each
    Python function it called cost 5-15 us once a large call had pushed it out of
    the CPU caches.  This first call binds the compiled one in its place.
    """
    global call_key
    _dispatch = _module("_dispatch")
    KeyParts.kernel_set_variable = _dispatch.KERNEL_SET_VARIABLE
    environ = os.environ
    if type(environ) is KeyParts.environ_type:
        KeyParts.kernel_set_key = environ.encodekey(_dispatch.KERNEL_SET_VARIABLE)
    KeyParts.dispatch = _dispatch
    kernels = _module("_compiled").load()
    kernels.set_key_parts(KeyParts)
    call_key = kernels.call_key
    return call_key(layer, x, w, b, out)


@dataclass(frozen=True)
class Prepared:
    """A validated call: the attributes, the operands as arrays the kernels read (in
    the user's layouts), their (N, C, D...) and filter views, and the geometry."""

    attributes: object
    x: np.ndarray
    w: np.ndarray
    b: np.ndarray | None
    x_view: np.ndarray
    w_view: np.ndarray
    geometry: object


def prepare(layer, x, w, b):
    """Validate and resolve a call of ``layer`` (ConvTranspose or Conv, which name
    their operator, filter view and geometry rule as class attributes)."""
    attributes = layer._attributes()
    arrays = operands({"x": x, "w": w, "b": b}, opset=attributes.opset,
                      operator=layer._operator)
    x, w, b = arrays["x"], arrays["w"], arrays["b"]
    layer._check_shapes(attributes, x.shape, w.shape, None if b is None else b.shape)
    x_view = _layouts.data_view(x, attributes.data_format)
    w_view = layer._filter_view(w, attributes.filter_format)
    return Prepared(attributes, x, w, b, x_view, w_view,
                    layer._resolve(attributes, x_view.shape, w_view.shape))


@dataclass(frozen=True)
class RememberedCall:
    """A call's layouts, output shape and engine Call (see above)."""

    data_format: str
    filter_view: object            # the filter layout's view function
    filter_format: str
    shape: tuple                   # the output, in data_format
    call: object                   # convt._engine.Call, or None (nothing to multiply)
    num_threads: object
    execute: object                # convt._engine.execute
    views: bool                    # layouts other than the engines' own: x, w, y need views

    def __call__(self, x, w, b, out):
        if out is None:
            y = _outputs.empty(self.shape, x.dtype)  # its size was vetted on the first call
        else:
            y = _arrays.prepare_output(out, self.shape, x.dtype, {"x": x, "w": w, "b": b})
        if self.views:
            return self.run(x, w, b, y)
        # the engines' layouts: straight to the engine (each Python call on this
        # path costs 5-15 us once a large call has left the caches cold)
        self.execute(self.call, x, w, b, y, self.num_threads)
        return y

    def run(self, x, w, b, y):
        """Fill ``y`` (the output array) from the operands, in the user's layouts."""
        self.execute(self.call, _layouts.data_view(x, self.data_format),
                     self.filter_view(w, self.filter_format), b,
                     _layouts.data_view(y, self.data_format), self.num_threads)
        return y


def apply(layer, x, w, b, out):
    """``layer.apply(x, w, b, out=out)`` for ConvTranspose and Conv: validated, planned
    and remembered on the first call of a key, only run on the next ones."""
    key = call_key(layer, x, w, b, out)
    remembered = _CALLS.get(key) if key is not None else None
    if remembered is not None:
        return remembered(x, w, b, out)
    _engine = _module("_engine")
    p = prepare(layer, x, w, b)
    attributes, forward = p.attributes, layer._forward
    channels = p.w_view.shape[0] if forward else p.w_view.shape[1] * attributes.group
    shape = _layouts.data_shape(attributes.data_format, p.x_view.shape[0], channels,
                                p.geometry.output_shape)
    y = _arrays.prepare_output(out, shape, p.x.dtype, {"x": p.x, "w": p.w, "b": p.b})
    call = _engine.prepare(p.x_view, p.w_view, _layouts.data_view(y, attributes.data_format),
                           p.geometry, attributes.group, transpose=not forward)
    views = attributes.data_format != "NCX" or p.w_view is not p.w
    remembered = RememberedCall(attributes.data_format, layer._filter_view,
                                attributes.filter_format, y.shape, call, attributes.num_threads,
                                _engine.execute, views)
    remembered.run(p.x, p.w, p.b, y)
    # operands that validation converted (array-likes, misaligned, byte-swapped) must
    # be converted on every call: such calls are not remembered
    if key is not None and p.x is x and p.w is w and p.b is b:
        if len(_CALLS) >= _CALLS_LIMIT:
            _CALLS.clear()
        repeated = None if views else _engine.repeated(call, attributes.num_threads, remembered,
                                                        p.x, p.w, y)
        _CALLS[key] = remembered if repeated is None else repeated
    return y
