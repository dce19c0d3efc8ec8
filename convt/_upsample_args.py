"""Checks of the parameters of convt.kernels, convt.upsample and convt.dask.

Each check returns the normalised value or raises ``TypeError`` (wrong kind of
value) or ``ValueError`` (right kind, wrong value) with a message naming the
function, the parameter, the value received and what is allowed, with a
"did you mean" where a near miss is likely.
"""

from __future__ import annotations

import difflib
import numbers
import operator

import numpy as np

KERNELS = ("nearest", "linear", "cubic")
KERNEL_ALIASES = {"bilinear": "linear", "trilinear": "linear", "bicubic": "cubic",
                  "tricubic": "cubic", "box": "nearest"}
# Accepted names -> canonical mode.  scipy.ndimage's names; 'constant' and
# 'wrap' mean scipy's 'grid-constant' and 'grid-wrap' (what scipy recommends
# with grid_mode=True, and what numpy.pad and scikit-image call them).
MODE_ALIASES = {
    "edge": "edge",
    "nearest": "edge",
    "reflect": "reflect",
    "symmetric": "reflect",
    "mirror": "mirror",
    "constant": "constant",
    "grid-constant": "constant",
    "wrap": "wrap",
    "grid-wrap": "wrap",
}
MAX_FACTOR = 2**20
FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def is_integer(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _listed(names):
    return ", ".join(repr(name) for name in names)


def check_kernel(kernel, function):
    """The kernel name, or a ValueError naming the allowed ones (and the closest)."""
    if isinstance(kernel, str) and kernel in KERNELS:
        return kernel
    hint = ""
    if isinstance(kernel, str):
        close = KERNEL_ALIASES.get(kernel.lower()) or next(
            iter(difflib.get_close_matches(kernel.lower(), KERNELS, n=1)), None)
        hint = f" Did you mean {close!r}?" if close else ""
    raise ValueError(f"The 'kernel' parameter of {function} must be one of {_listed(KERNELS)}; "
                     f"got {kernel!r}.{hint}")


def check_mode(mode, function):
    """The canonical boundary mode for ``mode``, or a ValueError listing the accepted names."""
    if isinstance(mode, str) and mode in MODE_ALIASES:
        return MODE_ALIASES[mode]
    hint = ""
    if isinstance(mode, str):
        if mode == "grid-mirror":
            hint = " scipy's 'grid-mirror' is 'reflect'."
        elif mode in ("periodic", "circular"):
            hint = " Did you mean 'wrap'?"
        else:
            close = difflib.get_close_matches(mode.lower(), MODE_ALIASES, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"The 'mode' parameter of {function} must be one of "
                     f"{_listed(MODE_ALIASES)}; got {mode!r}.{hint}")


def check_factors(factor, ndim, function):
    """``factor`` (an int, or one int per axis, each >= 1) as a tuple of ``ndim`` ints.

    ``ndim=None`` takes the length of a sequence, or 1 for an int.
    """
    allowed = f"an int >= 1 or a sequence of such ints (one per axis), each <= {MAX_FACTOR}"
    if is_integer(factor):
        values = (operator.index(factor),) * (1 if ndim is None else ndim)
    elif isinstance(factor, (str, bytes)) or not hasattr(factor, "__len__"):
        raise TypeError(f"The 'factor' parameter of {function} must be {allowed}; got {factor!r}.")
    else:
        items = list(factor.tolist() if isinstance(factor, np.ndarray) else factor)
        if not items or not all(is_integer(item) for item in items):
            raise TypeError(f"The 'factor' parameter of {function} must be {allowed}; "
                            f"got {factor!r}.")
        values = tuple(operator.index(item) for item in items)
        if ndim is not None and len(values) != ndim:
            raise ValueError(f"The 'factor' parameter of {function} must have one value per "
                             f"axis ({ndim}); got {factor!r} ({len(values)} values).")
    if not all(1 <= value <= MAX_FACTOR for value in values):
        raise ValueError(f"The 'factor' parameter of {function} must be {allowed}; "
                         f"got {factor!r}.")
    return values


def check_float_dtype(dtype, function):
    """``dtype`` as one of float16, float32, float64, or a TypeError."""
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        resolved = None
    if resolved not in FLOAT_DTYPES:
        raise TypeError(f"The 'dtype' parameter of {function} must be float16, float32 or "
                        f"float64; got {dtype!r}.")
    return resolved


def check_count(name, value, function, minimum=1, maximum=None):
    """An int in ``[minimum, maximum]`` (ndim, channels)."""
    upper = "" if maximum is None else f" and <= {maximum}"
    if not is_integer(value) or value < minimum or (maximum is not None and value > maximum):
        raise ValueError(f"The {name!r} parameter of {function} must be an int >= "
                         f"{minimum}{upper}; got {value!r}.")
    return operator.index(value)


def check_threads(num_threads, function):
    """None or an int >= 1."""
    if num_threads is None:
        return None
    if not is_integer(num_threads) or num_threads < 1:
        raise ValueError(f"The 'num_threads' parameter of {function} must be None or an int "
                         f">= 1; got {num_threads!r}.")
    return operator.index(num_threads)


def check_axis(name, axis, ndim, function):
    """``axis`` in ``[-ndim, ndim)`` as a non-negative int."""
    if not is_integer(axis):
        raise TypeError(f"The {name!r} parameter of {function} must contain ints; got {axis!r}.")
    if not -ndim <= axis < ndim:
        raise ValueError(f"The {name!r} parameter of {function} refers to axis {axis}, but the "
                         f"image has {ndim} axes (allowed: {-ndim} to {ndim - 1}).")
    return operator.index(axis) % ndim


def check_axes(axes, channel_axis, ndim, function):
    """The upsampled axes (sorted as given) and the channel axis, both normalised."""
    if channel_axis is not None:
        channel_axis = check_axis("channel_axis", channel_axis, ndim, function)
    if axes is None:
        return tuple(axis for axis in range(ndim) if axis != channel_axis), channel_axis
    listed = (axes,) if isinstance(axes, numbers.Integral) else tuple(axes)
    normalised = tuple(check_axis("axes", axis, ndim, function) for axis in listed)
    if len(set(normalised)) != len(normalised):
        raise ValueError(f"The 'axes' parameter of {function} must not repeat an axis; "
                         f"got {listed!r}.")
    if channel_axis is not None and channel_axis in normalised:
        raise ValueError(f"The 'axes' parameter of {function} must not contain channel_axis "
                         f"({channel_axis}); got {listed!r}.")
    return normalised, channel_axis


def check_cval(cval, function):
    if not isinstance(cval, numbers.Real):
        raise TypeError(f"The 'cval' parameter of {function} must be a real number; "
                        f"got {cval!r}.")
    return float(cval)
