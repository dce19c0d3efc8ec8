"""Validation of ConvTranspose's constructor parameters.

Each check raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right
kind, wrong value) with a message naming the parameter, the value received
and what is allowed.  Values are only read here, never stored: the estimator
keeps what the user gave so that ``clone`` and ``get_params`` round-trip.
"""

from __future__ import annotations

import numbers
import operator
from dataclasses import dataclass

import numpy as np

AUTO_PAD_VALUES = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")

# Index arithmetic in the kernels is done in signed 64-bit integers; keeping
# every attribute below 2**31 makes overflow impossible for any sane shape.
MAX_ATTRIBUTE = 2**31 - 1


@dataclass(frozen=True)
class Attributes:
    """ConvTranspose attributes as normalised tuples of Python ints.

    Per-axis attributes that were not given are ``None``; ``pads`` is in the
    ONNX order ``(x1_begin, x2_begin, ..., x1_end, x2_end, ...)``.
    """

    auto_pad: str
    dilations: tuple[int, ...] | None
    group: int
    kernel_shape: tuple[int, ...] | None
    output_padding: tuple[int, ...] | None
    output_shape: tuple[int, ...] | None
    pads: tuple[int, ...] | None
    strides: tuple[int, ...] | None
    num_threads: int | None

    def axis_count(self):
        """Number of spatial axes the per-axis attributes describe, or None."""
        for name in ("dilations", "kernel_shape", "output_padding", "output_shape", "strides"):
            value = getattr(self, name)
            if value is not None:
                return len(value)
        if self.pads is not None:
            return len(self.pads) // 2
        return None


def _is_integer(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _describe(value):
    if isinstance(value, np.ndarray):
        return f"array({value.tolist()!r}, dtype={value.dtype})"
    return repr(value)


def _fail(exception, name, value, allowed):
    raise exception(
        f"The {name!r} parameter of ConvTranspose must be {allowed}; "
        f"got {_describe(value)}."
    )


def check_integer(name, value, minimum, allow_none=False):
    """Return ``value`` as a Python int >= minimum (or None when allowed)."""
    allowed = f"an int >= {minimum}" + (" or None" if allow_none else "")
    if value is None and allow_none:
        return None
    if not _is_integer(value):
        _fail(TypeError, name, value, allowed)
    value = operator.index(value)
    if not minimum <= value <= MAX_ATTRIBUTE:
        _fail(ValueError, name, value, f"{allowed} and <= {MAX_ATTRIBUTE}")
    return value


def check_per_axis(name, value, minimum, what="integers"):
    """Return a per-axis attribute as a tuple of Python ints >= minimum, or None."""
    allowed = f"None or a non-empty sequence of {what} >= {minimum} (tuple, list or 1-D integer array)"
    if value is None:
        return None
    if isinstance(value, (str, bytes, dict)) or _is_integer(value):
        _fail(TypeError, name, value, allowed)
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            _fail(ValueError, name, value, allowed)
        if value.dtype.kind not in "iu":
            _fail(TypeError, name, value, allowed)
    try:
        items = list(value)
    except TypeError:
        _fail(TypeError, name, value, allowed)
    if not items:
        _fail(ValueError, name, value, allowed)
    for item in items:
        if not _is_integer(item):
            _fail(TypeError, name, value, allowed + f" (element {item!r} is not an int)")
    result = tuple(operator.index(item) for item in items)
    for item in result:
        if not minimum <= item <= MAX_ATTRIBUTE:
            _fail(ValueError, name, value, f"{allowed} and <= {MAX_ATTRIBUTE}")
    return result


def check_auto_pad(value):
    """Return auto_pad, one of AUTO_PAD_VALUES."""
    allowed = "one of " + ", ".join(repr(v) for v in AUTO_PAD_VALUES)
    if not isinstance(value, str):
        _fail(TypeError, "auto_pad", value, allowed)
    if value not in AUTO_PAD_VALUES:
        hint = ""
        if value.upper() in AUTO_PAD_VALUES:
            hint = f" (ONNX spells it in capitals: {value.upper()!r})"
        _fail(ValueError, "auto_pad", value, allowed + hint)
    return value


def _check_lengths(attributes):
    lengths = {}
    for name in ("dilations", "kernel_shape", "output_padding", "output_shape", "strides"):
        value = getattr(attributes, name)
        if value is not None:
            lengths[name] = len(value)
    if attributes.pads is not None:
        if len(attributes.pads) % 2:
            _fail(ValueError, "pads", attributes.pads,
                  "a sequence of even length: begin values for every axis, then end values")
        lengths["pads"] = len(attributes.pads) // 2
    if len(set(lengths.values())) > 1:
        described = ", ".join(
            f"{name} has {count} ({'pairs' if name == 'pads' else 'values'})"
            for name, count in lengths.items()
        )
        raise ValueError(
            "Per-axis parameters of ConvTranspose must describe the same number of "
            f"spatial axes (pads holds two values per axis); got: {described}."
        )


def _check_output_padding(attributes):
    if attributes.output_padding is None:
        return
    count = len(attributes.output_padding)
    strides = attributes.strides or (1,) * count
    dilations = attributes.dilations or (1,) * count
    for axis, (padding, stride, dilation) in enumerate(
        zip(attributes.output_padding, strides, dilations)
    ):
        bound = max(stride, dilation)
        if padding >= bound:
            raise ValueError(
                f"The 'output_padding' parameter of ConvTranspose must be smaller than "
                f"max(stride, dilation) on each axis; got output_padding[{axis}] = {padding} "
                f"with strides[{axis}] = {stride} and dilations[{axis}] = {dilation} "
                f"(allowed: 0 to {bound - 1})."
            )


def validate(params):
    """Check a dict of ConvTranspose parameters and return normalised Attributes."""
    attributes = Attributes(
        auto_pad=check_auto_pad(params["auto_pad"]),
        dilations=check_per_axis("dilations", params["dilations"], 1),
        group=check_integer("group", params["group"], 1),
        kernel_shape=check_per_axis("kernel_shape", params["kernel_shape"], 1),
        output_padding=check_per_axis("output_padding", params["output_padding"], 0),
        output_shape=check_per_axis("output_shape", params["output_shape"], 1),
        pads=check_per_axis("pads", params["pads"], 0),
        strides=check_per_axis("strides", params["strides"], 1),
        num_threads=check_integer("num_threads", params["num_threads"], 1, allow_none=True),
    )
    _check_lengths(attributes)
    if attributes.pads is not None and attributes.auto_pad != "NOTSET":
        raise ValueError(
            f"The 'pads' parameter of ConvTranspose cannot be combined with "
            f"auto_pad={attributes.auto_pad!r} (the ONNX text forbids using both); "
            f"got pads={params['pads']!r}. Drop pads, or set auto_pad='NOTSET'."
        )
    _check_output_padding(attributes)
    return attributes
