"""Validation of the constructor parameters of ConvTranspose and the other front-ends.

Each check raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right
kind, wrong value) with a message naming the parameter, the value received
and what is allowed.  Values are only read here, never stored: the estimator
keeps what the user gave so that ``clone`` and ``get_params`` round-trip.
The checks take an ``owner`` (the class named in messages) so that every
front-end speaks its own vocabulary.
"""

from __future__ import annotations

import difflib
import numbers
import operator
from dataclasses import dataclass

import numpy as np

AUTO_PAD_VALUES = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")

# ONNX ConvTranspose versions: ConvTranspose-1 serves opsets 1-10, ConvTranspose-11
# opsets 11-21, ConvTranspose-22 (adds bfloat16) opset 22 and every later opset
# (no newer ConvTranspose exists).  ``opset=None`` means the latest text.
LATEST_OPSET = 22
FIRST_OPSET_11 = 11
FIRST_OPSET_BFLOAT16 = 22

DATA_FORMATS = ("NCX", "NXC")
FILTER_FORMATS = ("IOX", "XOI", "OIX")
# Conv's weight layouts: 'OIX' is ONNX's (M, C/group, k...); I is the input
# channels of one group, O the output channels (the letters of FILTER_FORMATS,
# whose I is every input channel and O those of one group).
CONV_FILTER_FORMATS = ("OIX", "XIO", "IOX")

# Other spellings of the layouts and their convt names, for hints.
_FORMAT_SYNONYMS = {
    "NCHW": "NCX", "NCW": "NCX", "NCDHW": "NCX", "CHANNELS_FIRST": "NCX",
    "NHWC": "NXC", "NWC": "NXC", "NDHWC": "NXC", "CHANNELS_LAST": "NXC",
    "IOHW": "IOX", "IOW": "IOX", "IODHW": "IOX",
    "HWOI": "XOI", "WOI": "XOI", "DHWOI": "XOI",
    "OIHW": "OIX", "OIW": "OIX", "OIDHW": "OIX",
    "HWIO": "XIO", "WIO": "XIO", "DHWIO": "XIO",
}

# Names other libraries give to ConvTranspose's parameters (PyTorch, Keras, scipy).
_KNOWN_ALIASES = {
    "stride": "strides", "dilation": "dilations", "padding": "pads", "pad": "pads",
    "groups": "group", "kernel_size": "kernel_shape", "output_size": "output_shape",
    "threads": "num_threads", "n_jobs": "num_threads", "padding_mode": "auto_pad",
}

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
    dilations: tuple[int, ...] | int | None
    group: int
    kernel_shape: tuple[int, ...] | None
    output_padding: tuple[int, ...] | None
    output_shape: tuple[int, ...] | None
    pads: tuple[int, ...] | None
    strides: tuple[int, ...] | int | None
    num_threads: int | None
    opset: int = LATEST_OPSET
    data_format: str = "NCX"
    filter_format: str = "IOX"

    def axis_count(self):
        """Number of spatial axes the per-axis attributes describe, or None.

        A bare int (``strides=2``) applies to every axis and describes none.
        """
        for name in ("dilations", "kernel_shape", "output_padding", "output_shape", "strides"):
            value = getattr(self, name)
            if isinstance(value, tuple):
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


def _fail(exception, name, value, allowed, owner="ConvTranspose"):
    raise exception(
        f"The {name!r} parameter of {owner} must be {allowed}; "
        f"got {_describe(value)}."
    )


def check_integer(name, value, minimum, allow_none=False, owner="ConvTranspose"):
    """Return ``value`` as a Python int >= minimum (or None when allowed)."""
    allowed = f"an int >= {minimum}" + (" or None" if allow_none else "")
    if value is None and allow_none:
        return None
    if not _is_integer(value):
        _fail(TypeError, name, value, allowed, owner)
    value = operator.index(value)
    if not minimum <= value <= MAX_ATTRIBUTE:
        _fail(ValueError, name, value, f"{allowed} and <= {MAX_ATTRIBUTE}", owner)
    return value


def check_per_axis(name, value, minimum, what="integers", owner="ConvTranspose",
                   scalar=False, allow_none=True):
    """Return a per-axis attribute as a tuple of Python ints >= minimum, or None.

    With ``scalar``, a bare int is accepted too (it applies to every spatial
    axis) and returned as an int.
    """
    sequence = f"a non-empty sequence of {what} >= {minimum} (tuple, list or 1-D integer array)"
    choices = (["None"] if allow_none else []) + (
        [f"an int >= {minimum} (for every axis)"] if scalar else []) + [sequence]
    allowed = choices[0] if len(choices) == 1 else ", ".join(choices[:-1]) + " or " + choices[-1]
    if value is None:
        if allow_none:
            return None
        _fail(TypeError, name, value, allowed, owner)
    if scalar and _is_integer(value):
        value = operator.index(value)
        if not minimum <= value <= MAX_ATTRIBUTE:
            _fail(ValueError, name, value, f"{allowed} and <= {MAX_ATTRIBUTE}", owner)
        return value
    if isinstance(value, (str, bytes, dict)) or _is_integer(value):
        _fail(TypeError, name, value, allowed, owner)
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            _fail(ValueError, name, value, allowed, owner)
        if value.dtype.kind not in "iu":
            _fail(TypeError, name, value, allowed, owner)
    try:
        items = list(value)
    except TypeError:
        _fail(TypeError, name, value, allowed, owner)
    if not items:
        _fail(ValueError, name, value, allowed, owner)
    for item in items:
        if not _is_integer(item):
            _fail(TypeError, name, value, allowed + f" (element {item!r} is not an int)", owner)
    result = tuple(operator.index(item) for item in items)
    for item in result:
        if not minimum <= item <= MAX_ATTRIBUTE:
            _fail(ValueError, name, value, f"{allowed} and <= {MAX_ATTRIBUTE}", owner)
    return result


def check_choice(name, value, choices, owner="ConvTranspose", hints=None, ignore_case=False):
    """Return ``value``, one of the strings ``choices`` (in their spelling when
    ``ignore_case``); ``hints`` maps other spellings to a choice for the message."""
    allowed = "one of " + ", ".join(repr(v) for v in choices)
    if ignore_case:
        allowed += " (in any case)"
    if not isinstance(value, str):
        _fail(TypeError, name, value, allowed, owner)
    if ignore_case:
        for choice in choices:
            if value.upper() == choice.upper():
                return choice
    elif value in choices:
        return value
    hint = (hints or {}).get(value.upper())
    _fail(ValueError, name, value, allowed + (f" ({hint})" if hint else ""), owner)


def check_auto_pad(value, owner="ConvTranspose"):
    """Return auto_pad, one of AUTO_PAD_VALUES."""
    hints = {v: f"ONNX spells it in capitals: {v!r}" for v in AUTO_PAD_VALUES}
    return check_choice("auto_pad", value, AUTO_PAD_VALUES, owner=owner, hints=hints)


def check_opset(value, owner="ConvTranspose"):
    """Return the ONNX opset as an int (None means the latest, LATEST_OPSET)."""
    if value is None:
        return LATEST_OPSET
    return check_integer("opset", value, 1, owner=owner)


def check_format(name, value, choices, owner="ConvTranspose"):
    """Return data_format or filter_format, one of ``choices``."""
    hints = {
        spelling: f"{spelling} is {target!r} here"
        for spelling, target in _FORMAT_SYNONYMS.items() if target in choices
    }
    hints.update({choice: f"in capitals: {choice!r}" for choice in choices})
    return check_choice(name, value, choices, owner=owner, hints=hints)


def onnx_version(opset):
    """The ConvTranspose (or Conv) version (1, 11 or 22) an ONNX opset uses: both
    operators changed at the same opsets."""
    if opset >= FIRST_OPSET_BFLOAT16:
        return 22
    return 11 if opset >= FIRST_OPSET_11 else 1


def check_opset_dtype(name, dtype, opset, operator="ConvTranspose"):
    """A dtype the opset's ``operator`` (ConvTranspose or Conv) does not allow (bfloat16
    before 22) is a TypeError.

    Works by dtype name, so it needs no ml_dtypes import; dtypes that are not
    floats at all are left to the array checks.
    """
    dtype = np.dtype(dtype)
    # kind 'V' first: dtype.name is slow to compute, and bfloat16 is a 'V' dtype
    if opset < FIRST_OPSET_BFLOAT16 and dtype.kind == "V" and dtype.name == "bfloat16":
        version = onnx_version(opset)
        raise TypeError(
            f"{name} has dtype bfloat16, which ONNX opset {opset} does not allow: its "
            f"{operator}-{version} takes float16, float32 and float64. bfloat16 needs "
            f"opset {FIRST_OPSET_BFLOAT16} or later (opset=None means the latest); or cast, "
            f"e.g. {name}.astype(np.float32)."
        )


def suggest(name, valid):
    """' Did you mean ...?' for a misspelt parameter name, or ''."""
    alias = _KNOWN_ALIASES.get(name)
    if alias in valid:
        return f" Did you mean {alias!r}?"
    if name.endswith("s") and name[:-1] in valid:
        return f" Did you mean {name[:-1]!r}?"
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def unknown_parameter_message(owner, name, valid):
    """Message for a keyword the estimator does not have."""
    return (f"Invalid parameter {name!r} for {owner}.{suggest(name, valid)} "
            f"Valid parameters are: {', '.join(valid)}.")


def per_axis(value, count, default):
    """A per-axis attribute as a tuple of ``count`` ints: None gives ``default``
    on every axis and a bare int (strides=2) applies to every axis."""
    if value is None:
        return (default,) * count
    if isinstance(value, int):
        return (value,) * count
    return tuple(value)


def check_lengths(values, owner="ConvTranspose", pairs=None):
    """Per-axis parameters (name -> tuple, int or None) must agree on the axis count;
    ``pairs`` names one holding two values per axis (ONNX's pads)."""
    lengths = {}
    for name, value in values.items():
        if not isinstance(value, tuple):
            continue
        if name == pairs:
            if len(value) % 2:
                _fail(ValueError, name, value,
                      "a sequence of even length: begin values for every axis, then end values",
                      owner)
            lengths[name] = len(value) // 2
        else:
            lengths[name] = len(value)
    if len(set(lengths.values())) > 1:
        described = ", ".join(
            f"{name} has {count} ({'pairs' if name == pairs else 'values'})"
            for name, count in lengths.items()
        )
        extra = f" ({pairs} holds two values per axis)" if pairs else ""
        raise ValueError(
            f"Per-axis parameters of {owner} must describe the same number of "
            f"spatial axes{extra}; got: {described}."
        )


def _check_lengths(attributes):
    check_lengths({name: getattr(attributes, name) for name in
                   ("dilations", "kernel_shape", "output_padding", "output_shape", "strides",
                    "pads")}, pairs="pads")


def _check_output_padding(attributes):
    # ConvTranspose-1 sets no bound on output_padding ("the zero-padding added to
    # one side of the output"); ConvTranspose-11 wants it below stride/dilation.
    if attributes.output_padding is None or attributes.opset < FIRST_OPSET_11:
        return
    count = len(attributes.output_padding)
    strides = per_axis(attributes.strides, count, 1)
    dilations = per_axis(attributes.dilations, count, 1)
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
        dilations=check_per_axis("dilations", params["dilations"], 1, scalar=True),
        group=check_integer("group", params["group"], 1),
        kernel_shape=check_per_axis("kernel_shape", params["kernel_shape"], 1),
        output_padding=check_per_axis("output_padding", params["output_padding"], 0),
        output_shape=check_per_axis("output_shape", params["output_shape"], 1),
        pads=check_per_axis("pads", params["pads"], 0),
        strides=check_per_axis("strides", params["strides"], 1, scalar=True),
        num_threads=check_integer("num_threads", params["num_threads"], 1, allow_none=True),
        opset=check_opset(params.get("opset")),
        data_format=check_format("data_format", params.get("data_format", "NCX"), DATA_FORMATS),
        filter_format=check_format("filter_format", params.get("filter_format", "IOX"),
                                   FILTER_FORMATS),
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


def validate_conv(params):
    """Check a dict of Conv parameters and return normalised Attributes (their
    ``output_padding`` and ``output_shape`` are None: Conv has neither)."""
    owner = "Conv"
    attributes = Attributes(
        auto_pad=check_auto_pad(params["auto_pad"], owner),
        dilations=check_per_axis("dilations", params["dilations"], 1, owner=owner, scalar=True),
        group=check_integer("group", params["group"], 1, owner=owner),
        kernel_shape=check_per_axis("kernel_shape", params["kernel_shape"], 1, owner=owner),
        output_padding=None,
        output_shape=None,
        pads=check_per_axis("pads", params["pads"], 0, owner=owner),
        strides=check_per_axis("strides", params["strides"], 1, owner=owner, scalar=True),
        num_threads=check_integer("num_threads", params["num_threads"], 1, allow_none=True,
                                  owner=owner),
        opset=check_opset(params.get("opset"), owner),
        data_format=check_format("data_format", params.get("data_format", "NCX"), DATA_FORMATS,
                                 owner),
        filter_format=check_format("filter_format", params.get("filter_format", "OIX"),
                                   CONV_FILTER_FORMATS, owner),
    )
    check_lengths({name: getattr(attributes, name) for name in
                   ("dilations", "kernel_shape", "strides", "pads")}, owner, pairs="pads")
    if attributes.pads is not None and attributes.auto_pad != "NOTSET":
        raise ValueError(
            f"The 'pads' parameter of Conv cannot be combined with "
            f"auto_pad={attributes.auto_pad!r} (the ONNX text forbids using both); "
            f"got pads={params['pads']!r}. Drop pads, or set auto_pad='NOTSET'."
        )
    return attributes
