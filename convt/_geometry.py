"""Shapes and pads of ConvTranspose, from the ONNX ConvTranspose-11/22 text.

Pure Python: no arrays, so it can be tested without compiling anything.
Per spatial axis, with stride s, dilation d, kernel k, input size i and
output_padding a, the text's full size is ``s * (i - 1) + a + (k - 1) * d + 1``:

* explicit ``pads``: output = full - pads_begin - pads_end;
* ``output_shape`` given: total padding = full - output_shape, split with
  floor division (``begin = total // 2`` for SAME_UPPER, otherwise
  ``begin = total - total // 2``); pads may be negative, which makes
  zero-filled margins;
* SAME_UPPER / SAME_LOWER without output_shape: as if output_shape were
  ``i * s``, so the total includes output_padding and may be negative;
* VALID: zero pads.
"""

from __future__ import annotations

from dataclasses import dataclass


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


def _check_axis_count(attributes, x_shape):
    count = len(x_shape) - 2
    given = attributes.axis_count()
    if given is not None and given != count:
        raise ValueError(
            f"The per-axis parameters of ConvTranspose describe {given} spatial axes, but x "
            f"of shape {tuple(x_shape)} has {count} (x is (N, C, D1, ..., Dn)). Give one value "
            f"per spatial axis (two for pads)."
        )


def resolve(attributes, x_shape, w_shape):
    """Resolve pads and output size of every spatial axis.

    Parameters
    ----------
    attributes : convt._validation.Attributes
        Validated parameters.
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
    strides = attributes.strides or (1,) * count
    dilations = attributes.dilations or (1,) * count
    output_padding = attributes.output_padding or (0,) * count
    full = tuple(
        full_size(*axis) for axis in zip(inputs, kernel, strides, dilations, output_padding)
    )
    if attributes.output_shape is not None:
        targets = attributes.output_shape
    elif attributes.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        targets = tuple(size * stride for size, stride in zip(inputs, strides))
    else:
        targets = None
    if targets is not None:
        pairs = [split_total_padding(f - t, attributes.auto_pad) for f, t in zip(full, targets)]
        begin = tuple(pair[0] for pair in pairs)
        end = tuple(pair[1] for pair in pairs)
    elif attributes.auto_pad == "VALID" or attributes.pads is None:
        begin = end = (0,) * count
    else:
        begin, end = attributes.pads[:count], attributes.pads[count:]
    outputs = tuple(f - b - e for f, b, e in zip(full, begin, end))
    for axis, size in enumerate(outputs):
        if size < 1:
            raise ValueError(
                f"The pads leave an empty output on spatial axis {axis}: full size {full[axis]} "
                f"- pads_begin {begin[axis]} - pads_end {end[axis]} = {size}. Reduce pads on "
                f"that axis (at most {full[axis] - 1} in total)."
            )
    return Geometry(
        input_shape=inputs,
        kernel_shape=kernel,
        strides=strides,
        dilations=dilations,
        output_padding=output_padding,
        pads_begin=begin,
        pads_end=end,
        output_shape=outputs,
    )
