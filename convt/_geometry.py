"""Shapes and pads of a transposed convolution, from each operator text convt implements.

Pure Python: no arrays, so it can be tested without compiling anything.
Per spatial axis, with stride s, dilation d, kernel k, input size i and
output_padding a, every text has the same full size
``s * (i - 1) + a + (k - 1) * d + 1``; the output is that range cropped by
``pads_begin`` and ``pads_end`` (a negative pad is a zero-filled margin).
The texts differ only in how they generate the pads, one function each:

* :func:`onnx_pads` -- ONNX ConvTranspose-11/22, and ConvTranspose-1 for opsets 1-10;
* :func:`openvino_pads` -- OpenVINO ConvolutionBackpropData-1;
* :func:`onednn_pads` -- oneDNN Graph ConvTranspose-1.

Every front-end turns its attributes into one :class:`Geometry` through
:func:`build`, so the kernels see a single resolved problem.

ONNX ConvTranspose-11/22:

* explicit ``pads``: output = full - pads_begin - pads_end;
* ``output_shape`` given: total padding = full - output_shape, split with
  floor division (``begin = total // 2`` for SAME_UPPER, otherwise
  ``begin = total - total // 2``); pads may be negative;
* SAME_UPPER / SAME_LOWER without output_shape: as if output_shape were
  ``i * s``, so the total includes output_padding and may be negative;
* VALID: zero pads.

ONNX ConvTranspose-1 (opsets 1 to 10), read from its text:

* ``output_shape`` given: the summary's equations, the mirror image of
  ConvTranspose-11's: ``begin = total // 2`` unless auto_pad is SAME_UPPER,
  which gets ``begin = total - total // 2`` (onnx/onnx#1609).  ``/`` is read
  as floor division, as in ConvTranspose-11 and ONNX's Python examples.
* SAME_UPPER / SAME_LOWER without output_shape: "pad the input so that the
  output spatial size match the input", read literally: output = ``i`` (the
  reading onnx/onnx#3153 states for that wording; ConvTranspose-11 changed
  it to ``i * s``).  The odd unit follows the auto_pad attribute's own
  sentence: at the end for SAME_UPPER, at the beginning for SAME_LOWER.

The forward Conv (:func:`resolve_conv`) gets the same :class:`Geometry`, read
the other way: ``input_shape`` is x's spatial shape, ``output_shape`` is
``floor((i + pads_begin + pads_end - d * (k - 1) - 1) / s) + 1`` and output
``o`` reads input ``o * s + k * d - pads_begin`` through tap ``k``;
``output_padding`` is all zeros.  Its pads (:func:`conv_pads`): explicit
(each >= 0), VALID (zeros), or SAME_UPPER / SAME_LOWER: the total
``max(0, (target - 1) * s + d * (k - 1) + 1 - i)`` for a target length
``ceil(i / s)`` (Conv-11 and later) or ``i`` (Conv-1, opsets 1-10, read
literally: "the output spatial size match the input"), the odd unit at the
end (UPPER) or the beginning (LOWER).  The total is clamped at 0 because the
text pads the input (pads are ">= 0"): a kernel shorter than the stride
already gives ``ceil(i / s)`` outputs without padding.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validation import FIRST_OPSET_11, per_axis


@dataclass(frozen=True)
class Geometry:
    """The resolved per-axis numbers of one ConvTranspose call."""

    input_shape: tuple[int, ...]
    kernel_shape: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    output_padding: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    output_shape: tuple[int, ...]

    @property
    def ndim(self):
        """Number of spatial axes."""
        return len(self.input_shape)


def full_size(size, kernel, stride, dilation, output_padding):
    """Length of the un-cropped output along one axis (the text's equation without pads)."""
    return stride * (size - 1) + output_padding + (kernel - 1) * dilation + 1


def split_total_padding(total, auto_pad):
    """(begin, end) pads from a total, by the ConvTranspose-11 rule, floor division."""
    if auto_pad == "SAME_UPPER":
        begin = total // 2
    else:
        begin = total - total // 2
    return begin, total - begin


def split_total_padding_opset1(total, auto_pad):
    """(begin, end) pads from an output_shape total by ConvTranspose-1's equations:
    ``begin = total / 2`` unless SAME_UPPER, which gets ``total - total / 2``
    (floor division)."""
    if auto_pad == "SAME_UPPER":
        begin = total - total // 2
    else:
        begin = total // 2
    return begin, total - begin


def _c_half(total):
    """``total / 2`` in C++ integer arithmetic: truncated toward zero."""
    return -((-total) // 2) if total < 0 else total // 2


def full_sizes(inputs, kernel, strides, dilations, output_padding):
    """The full size of every axis."""
    return tuple(full_size(*axis) for axis in zip(inputs, kernel, strides, dilations,
                                                  output_padding))


# The kernels index with signed 64-bit integers; sizes below this keep every
# offset, stride product and tile computation in range.
MAX_EXTENT = 2**62


def build(inputs, kernel, strides, dilations, output_padding, begin, end):
    """The Geometry of these per-axis numbers; every output axis must be non-empty
    and within 64-bit index arithmetic."""
    full = full_sizes(inputs, kernel, strides, dilations, output_padding)
    outputs = tuple(f - b - e for f, b, e in zip(full, begin, end))
    for axis, (size, whole) in enumerate(zip(outputs, full)):
        if max(size, whole, abs(begin[axis]), abs(end[axis])) >= MAX_EXTENT:
            raise ValueError(
                f"Spatial axis {axis} would span {max(size, whole)} output positions "
                f"(stride {strides[axis]} x input {inputs[axis]}, dilation {dilations[axis]} x "
                f"kernel {kernel[axis]}, pads {begin[axis]}, {end[axis]}): more than convt's "
                f"64-bit index arithmetic allows ({MAX_EXTENT}). Reduce strides, dilations or "
                f"the pads/output_shape on that axis.")
        if size < 1:
            raise ValueError(
                f"The pads leave an empty output on spatial axis {axis}: full size {full[axis]} "
                f"- pads_begin {begin[axis]} - pads_end {end[axis]} = {size}. Reduce pads on "
                f"that axis (at most {full[axis] - 1} in total)."
            )
    return Geometry(
        input_shape=tuple(inputs),
        kernel_shape=tuple(kernel),
        strides=tuple(strides),
        dilations=tuple(dilations),
        output_padding=tuple(output_padding),
        pads_begin=tuple(begin),
        pads_end=tuple(end),
        output_shape=outputs,
    )


def _split_all(full, targets, split, auto_pad):
    pairs = [split(f - t, auto_pad) for f, t in zip(full, targets)]
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


def onnx_pads(full, inputs, strides, auto_pad, pads, output_shape, opset):
    """(begin, end) pads of every axis by ONNX ConvTranspose (version by opset).

    Parameters
    ----------
    full : tuple of int
        Full size of every axis (:func:`full_size`).
    inputs, strides : tuple of int
        Input size and stride of every axis.
    auto_pad : str
        'NOTSET', 'SAME_UPPER', 'SAME_LOWER' or 'VALID'.
    pads : tuple of int or None
        ONNX order ``(x1_begin, ..., xn_begin, x1_end, ..., xn_end)``.
    output_shape : tuple of int or None
    opset : int
        Opsets below 11 use ConvTranspose-1, the others ConvTranspose-11/22.
    """
    count = len(full)
    same = auto_pad in ("SAME_UPPER", "SAME_LOWER")
    if output_shape is not None:
        split = split_total_padding if opset >= FIRST_OPSET_11 else split_total_padding_opset1
        return _split_all(full, output_shape, split, auto_pad)
    if same and opset >= FIRST_OPSET_11:
        return _split_all(full, [i * s for i, s in zip(inputs, strides)], split_total_padding,
                          auto_pad)
    if same:
        return _split_all(full, inputs, split_total_padding, auto_pad)
    if auto_pad == "VALID" or pads is None:
        return (0,) * count, (0,) * count
    return tuple(pads[:count]), tuple(pads[count:])


def _check_axis_count(attributes, x_shape, owner="ConvTranspose"):
    count = len(x_shape) - 2
    given = attributes.axis_count()
    if given is not None and given != count:
        raise ValueError(
            f"The per-axis parameters of {owner} describe {given} spatial axes, but x "
            f"of shape {tuple(x_shape)} has {count} (x is (N, C, D1, ..., Dn)). Give one value "
            f"per spatial axis (two for pads)."
        )


def resolve(attributes, x_shape, w_shape):
    """Resolve pads and output size of every spatial axis by the ONNX text.

    Parameters
    ----------
    attributes : convt._validation.Attributes
        Validated parameters (``attributes.opset`` picks the ConvTranspose version).
    x_shape, w_shape : tuple of int
        Shapes of the input (N, C, D1, ..., Dn) and weight (C, M/group, k1, ..., kn);
        their ranks and channel counts are assumed checked.

    Returns
    -------
    Geometry
    """
    _check_axis_count(attributes, x_shape)
    count = len(x_shape) - 2
    inputs = tuple(int(v) for v in x_shape[2:])
    kernel = tuple(int(v) for v in w_shape[2:])
    if attributes.kernel_shape is not None and attributes.kernel_shape != kernel:
        raise ValueError(
            f"The 'kernel_shape' parameter of ConvTranspose must equal w.shape[2:] = {kernel} "
            f"when given; got {attributes.kernel_shape}. Drop it or match the weight."
        )
    strides = per_axis(attributes.strides, count, 1)
    dilations = per_axis(attributes.dilations, count, 1)
    output_padding = per_axis(attributes.output_padding, count, 0)
    full = full_sizes(inputs, kernel, strides, dilations, output_padding)
    begin, end = onnx_pads(full, inputs, strides, attributes.auto_pad, attributes.pads,
                           attributes.output_shape, attributes.opset)
    return build(inputs, kernel, strides, dilations, output_padding, begin, end)


def openvino_pads(full, auto_pad, pads_begin, pads_end, output_shape):
    """(begin, end) pads of every axis by OpenVINO's ConvolutionBackpropData-1 text.

    Without ``output_shape``: ``pads_begin``/``pads_end`` for 'explicit', zero
    pads for every other auto_pad ("if auto_pads != None: pads = 0").  With
    it, pads_begin and pads_end are ignored and the total
    ``full - output_shape`` is split as the text writes (``//``, floor):
    'same_upper' gets ``end = total // 2`` (the odd unit at the beginning),
    every other mode ``begin = total // 2`` (the odd unit at the end).
    """
    count = len(full)
    if output_shape is not None:
        begin, end = [], []
        for f, o in zip(full, output_shape):
            total = f - o
            if auto_pad == "same_upper":
                end.append(total // 2)
                begin.append(total - end[-1])
            else:
                begin.append(total // 2)
                end.append(total - begin[-1])
        return tuple(begin), tuple(end)
    if auto_pad == "explicit":
        return tuple(pads_begin), tuple(pads_end)
    return (0,) * count, (0,) * count


def resolve_openvino(x_shape, w_shape, *, strides, dilations, auto_pad, pads_begin, pads_end,
                     output_padding, output_shape=None):
    """Geometry of ConvolutionBackpropData-1 for an input (N, C, D...) and a weight
    (C, M/group, k...); per-axis values are tuples (or None for output_padding)."""
    count = len(x_shape) - 2
    inputs = tuple(int(v) for v in x_shape[2:])
    kernel = tuple(int(v) for v in w_shape[2:])
    strides = per_axis(strides, count, 1)
    dilations = per_axis(dilations, count, 1)
    output_padding = per_axis(output_padding, count, 0)
    full = full_sizes(inputs, kernel, strides, dilations, output_padding)
    begin, end = openvino_pads(full, auto_pad, pads_begin, pads_end, output_shape)
    return build(inputs, kernel, strides, dilations, output_padding, begin, end)


def onednn_pads(kernel, strides, dilations, auto_pad, pads_begin, pads_end):
    """(begin, end) pads of every axis by oneDNN Graph's ConvTranspose-1 text.

    'SAME_UPPER'/'SAME_LOWER': total = ``(k - 1) * d + 1 - s`` (output_padding
    not in it, so the output is ``i * s + output_padding``), split with the
    text's C++ ``/`` (truncation toward zero): SAME_UPPER ``begin = total / 2``,
    SAME_LOWER ``end = total / 2``.  'VALID': zero pads.  'None': pads_begin
    and pads_end.
    """
    count = len(kernel)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for k, s, d in zip(kernel, strides, dilations):
            total = (k - 1) * d + 1 - s
            if auto_pad == "SAME_UPPER":
                begin.append(_c_half(total))
                end.append(total - begin[-1])
            else:
                end.append(_c_half(total))
                begin.append(total - end[-1])
        return tuple(begin), tuple(end)
    if auto_pad == "VALID":
        return (0,) * count, (0,) * count
    return tuple(pads_begin), tuple(pads_end)


def resolve_onednn(x_shape, w_shape, *, strides, dilations, auto_pad, pads_begin, pads_end,
                   output_padding):
    """Geometry of oneDNN Graph ConvTranspose-1 for an input (N, C, D...) and a weight
    (C, M/groups, k...); per-axis values are tuples (or None for output_padding)."""
    count = len(x_shape) - 2
    inputs = tuple(int(v) for v in x_shape[2:])
    kernel = tuple(int(v) for v in w_shape[2:])
    strides = per_axis(strides, count, 1)
    dilations = per_axis(dilations, count, 1)
    output_padding = per_axis(output_padding, count, 0)
    begin, end = onednn_pads(kernel, strides, dilations, auto_pad, pads_begin, pads_end)
    return build(inputs, kernel, strides, dilations, output_padding, begin, end)


# --- Conv, the forward operator ------------------------------------------------


def conv_output_size(size, kernel, stride, dilation, begin, end):
    """Conv's output length on one axis: ``floor((size + begin + end - dilation * (kernel
    - 1) - 1) / stride) + 1``; below 1 when the dilated kernel does not fit."""
    return (size + begin + end - dilation * (kernel - 1) - 1) // stride + 1


def conv_same_pads(size, kernel, stride, dilation, auto_pad, opset):
    """(begin, end) pads of SAME_UPPER / SAME_LOWER on one axis of a Conv.

    The target output length is ``ceil(size / stride)`` from opset 11 (Conv-11's
    text) and ``size`` before (Conv-1's "the output spatial size match the
    input").  The total padding reaching it is clamped at 0 and split with the
    odd unit at the end for SAME_UPPER, at the beginning for SAME_LOWER.

    Examples
    --------
    >>> conv_same_pads(5, 3, 2, 1, "SAME_LOWER", 22)   # the text's autopad example
    (1, 1)
    >>> conv_same_pads(7, 2, 1, 1, "SAME_UPPER", 22), conv_same_pads(7, 2, 1, 1, "SAME_LOWER", 22)
    ((0, 1), (1, 0))
    >>> conv_same_pads(5, 1, 3, 1, "SAME_UPPER", 22)   # no padding needed: 2 outputs already
    (0, 0)
    >>> conv_same_pads(7, 3, 2, 1, "SAME_UPPER", 10)   # Conv-1: 7 outputs
    (4, 4)
    """
    target = -(-size // stride) if opset >= FIRST_OPSET_11 else size
    total = max(0, (target - 1) * stride + dilation * (kernel - 1) + 1 - size)
    small = total // 2
    if auto_pad == "SAME_UPPER":
        return small, total - small
    return total - small, small


def conv_pads(inputs, kernel, strides, dilations, auto_pad, pads, opset):
    """(begin, end) pads of every axis of a Conv by the ONNX text (version by opset)."""
    count = len(inputs)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pairs = [conv_same_pads(i, k, s, d, auto_pad, opset)
                 for i, k, s, d in zip(inputs, kernel, strides, dilations)]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    if auto_pad == "VALID" or pads is None:
        return (0,) * count, (0,) * count
    return tuple(pads[:count]), tuple(pads[count:])


def build_conv(inputs, kernel, strides, dilations, begin, end):
    """The Geometry of a Conv with these per-axis numbers; every output axis must be
    non-empty and within 64-bit index arithmetic."""
    outputs = tuple(conv_output_size(*axis)
                    for axis in zip(inputs, kernel, strides, dilations, begin, end))
    for axis, size in enumerate(outputs):
        extent = dilations[axis] * (kernel[axis] - 1) + 1
        padded = inputs[axis] + begin[axis] + end[axis]
        if max(padded, extent, size) >= MAX_EXTENT:
            raise ValueError(
                f"Spatial axis {axis} would span {max(padded, extent, size)} positions (input "
                f"{inputs[axis]}, pads {begin[axis]}, {end[axis]}, dilation {dilations[axis]} x "
                f"kernel {kernel[axis]}): more than convt's 64-bit index arithmetic allows "
                f"({MAX_EXTENT}). Reduce the pads or dilations on that axis.")
        if size < 1:
            raise ValueError(
                f"The kernel does not fit on spatial axis {axis}: x has {inputs[axis]} "
                f"positions there, {padded} with pads ({begin[axis]}, {end[axis]}), fewer than "
                f"the dilated kernel's extent dilation * (kernel - 1) + 1 = {dilations[axis]} * "
                f"{kernel[axis] - 1} + 1 = {extent}. Pad more (or auto_pad='SAME_UPPER'), or "
                f"use a smaller kernel or dilation.")
    count = len(inputs)
    return Geometry(
        input_shape=tuple(inputs),
        kernel_shape=tuple(kernel),
        strides=tuple(strides),
        dilations=tuple(dilations),
        output_padding=(0,) * count,
        pads_begin=tuple(begin),
        pads_end=tuple(end),
        output_shape=outputs,
    )


def resolve_conv(attributes, x_shape, w_shape):
    """Resolve pads and output size of every spatial axis of a Conv by the ONNX text.

    Parameters
    ----------
    attributes : convt._validation.Attributes
        Validated Conv parameters (``attributes.opset`` picks Conv-1 or Conv-11/22).
    x_shape, w_shape : tuple of int
        Shapes of the input (N, C, D1, ..., Dn) and weight (M, C/group, k1, ..., kn);
        their ranks and channel counts are assumed checked.

    Returns
    -------
    Geometry
        With zero ``output_padding``; see the module docstring for what the fields
        mean for a Conv.
    """
    _check_axis_count(attributes, x_shape, "Conv")
    count = len(x_shape) - 2
    inputs = tuple(int(v) for v in x_shape[2:])
    kernel = tuple(int(v) for v in w_shape[2:])
    if attributes.kernel_shape is not None and attributes.kernel_shape != kernel:
        raise ValueError(
            f"The 'kernel_shape' parameter of Conv must equal the kernel axes of w, {kernel}, "
            f"when given; got {attributes.kernel_shape}. Drop it or match the weight."
        )
    strides = per_axis(attributes.strides, count, 1)
    dilations = per_axis(attributes.dilations, count, 1)
    begin, end = conv_pads(inputs, kernel, strides, dilations, attributes.auto_pad,
                           attributes.pads, attributes.opset)
    return build_conv(inputs, kernel, strides, dilations, begin, end)
