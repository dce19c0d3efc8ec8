"""Data and filter layouts: views in convt's canonical order, and shape checks in the user's.

The engine reads ``x`` as (N, C, D1, ..., Dn), ``w`` as (C, M/group, k1, ..., kn)
(ONNX's IOX) and writes ``y`` as (N, M, O1, ..., On), all through element
strides.  Other layouts are served by ``np.moveaxis`` views of the user's
arrays, never by transposed copies:

* data_format 'NCX' (channels first) or 'NXC' (channels last, (N, D1, ..., Dn, C));
* filter_format 'IOX' (C, M/group, k...), 'XOI' (k..., M/group, C) or
  'OIX' (M/group, C, k...): I is the input channels, O the output channels
  of one group, X the kernel axes (oneDNN's letters).

Shape errors are reported in the user's layout and names, with a hint when
the shapes suggest one (a 2-D image without batch and channel axes, an
(H, W, 3) RGB image).
"""

from __future__ import annotations

import numpy as np

# Layout descriptions for messages, by format.
_DATA_PATTERN = {"NCX": "(N, C, D1, ..., Dn)", "NXC": "(N, D1, ..., Dn, C)"}
_FILTER_PATTERN = {
    "IOX": "(C, M/group, k1, ..., kn)",
    "XOI": "(k1, ..., kn, M/group, C)",
    "OIX": "(M/group, C, k1, ..., kn)",
}


def channel_axis(ndim, data_format):
    """Index of the channel axis of data of rank ``ndim``."""
    return 1 if data_format == "NCX" else ndim - 1


def filter_axes(ndim, filter_format):
    """(input-channel axis, output-channel axis, first kernel axis) of a filter of rank ``ndim``."""
    if filter_format == "IOX":
        return 0, 1, 2
    if filter_format == "OIX":
        return 1, 0, 2
    return ndim - 1, ndim - 2, 0


def data_view(array, data_format):
    """(N, C, D...) view of data in ``data_format`` (the array itself for NCX)."""
    return array if data_format == "NCX" else np.moveaxis(array, -1, 1)


def filter_view(array, filter_format):
    """(C, M/group, k...) view of a filter in ``filter_format``."""
    if filter_format == "IOX":
        return array
    if filter_format == "OIX":
        return np.swapaxes(array, 0, 1)
    return np.moveaxis(array, (-1, -2), (0, 1))


def canonical_data_shape(shape, data_format):
    """(N, C, D...) order of a data shape given in ``data_format``."""
    shape = tuple(int(v) for v in shape)
    if data_format == "NCX":
        return shape
    return (shape[0], shape[-1]) + shape[1:-1]


def canonical_filter_shape(shape, filter_format):
    """(C, M/group, k...) order of a filter shape given in ``filter_format``."""
    shape = tuple(int(v) for v in shape)
    i_axis, o_axis, first = filter_axes(len(shape), filter_format)
    kernel = shape[first:first + len(shape) - 2]
    return (shape[i_axis], shape[o_axis]) + kernel


def data_shape(data_format, batch, channels, spatial):
    """Shape of data in ``data_format`` from its parts."""
    if data_format == "NCX":
        return (batch, channels) + tuple(spatial)
    return (batch,) + tuple(spatial) + (channels,)


def as_array(name, value):
    """``np.asarray(value)``; a ragged nested sequence is a ValueError naming the operand."""
    if isinstance(value, np.ndarray):
        return value
    try:
        return np.asarray(value)
    except ValueError as error:
        raise ValueError(
            f"{name} is a ragged nested sequence (its rows have different lengths), not an "
            f"array: {error} Make every row the same length, or pass a numpy array."
        ) from None


def _layout_of(data_format, spatial):
    """'(N, C, D1, D2)'-like description of data with ``spatial`` axes."""
    axes = [f"D{axis + 1}" for axis in range(spatial)]
    axes = ["N", "C"] + axes if data_format == "NCX" else ["N"] + axes + ["C"]
    return f"({', '.join(axes)})"


def _channels_hint(x_shape, channels, data_format, name):
    """A suggestion for data without its batch axis whose channel axis is on the other side."""
    if data_format == "NCX" and x_shape[-1] == channels:
        return (f" {name} looks channels-last (its last axis has the {channels} input channels "
                f"w expects): {name}[None] with data_format='NXC' reads it in place, or "
                f"np.moveaxis({name}, -1, 0)[None] gives (N, C, D1, ...).")
    if data_format == "NXC" and x_shape[0] == channels:
        return (f" {name} looks channels-first (its first axis has the {channels} input "
                f"channels w expects): {name}[None] with data_format='NCX' reads it in place, "
                f"or np.moveaxis({name}, 0, -1)[None] gives (N, D1, ..., C).")
    return ""


def _rank_message(x_shape, w_shape, data_format, filter_format, names, channels=None,
                  filter_pattern=None):
    """Why x and w do not have matching ranks, and what would fix it (x has fewer axes).

    ``channels`` (the input channels w expects) and ``filter_pattern`` default to
    ConvTranspose's reading of ``filter_format``.
    """
    x_name, w_name = names[0], names[1]
    filter_pattern = filter_pattern or _FILTER_PATTERN[filter_format]
    if len(w_shape) < 3:
        return (f"{x_name} must have shape {_DATA_PATTERN[data_format]} with at least one "
                f"spatial axis, and {w_name} {filter_pattern} of the same rank; "
                f"got {x_name}.shape={tuple(x_shape)} and {w_name}.shape={tuple(w_shape)}.")
    expected = len(w_shape)
    if channels is None:
        channels = w_shape[filter_axes(expected, filter_format)[0]]
    head = (f"{x_name} must have shape {_layout_of(data_format, expected - 2)}: {expected} "
            f"axes, one spatial axis per kernel axis of {w_name} (shape {tuple(w_shape)}); got "
            f"{x_name}.shape={tuple(x_shape)} ({len(x_shape)} axes).")
    missing = expected - len(x_shape)
    if missing >= 2:
        head += " The batch axis N and the channel axis C are missing."
        if missing == 2 and channels == 1:
            where = f"{x_name}[None, None]" if data_format == "NCX" else f"{x_name}[None, ..., None]"
            head += f" For one single-channel image or volume, {where} adds both (N = C = 1)."
        return head
    channel_at = 0 if data_format == "NCX" else -1
    if x_shape and x_shape[channel_at] == channels:
        return head + f" The batch axis N is missing: {x_name}[None] adds it for one sample."
    hint = _channels_hint(x_shape, channels, data_format, x_name) if x_shape else ""
    if hint:
        return head + " The batch axis N is missing." + hint
    add_channel = f"{x_name}[:, None]" if data_format == "NCX" else f"{x_name}[..., None]"
    return (head + f" One axis is missing: the batch axis N ({x_name}[None]) or the channel "
            f"axis C ({add_channel} for one channel).")


def check_shapes(x_shape, w_shape, b_shape, group, data_format="NCX", filter_format="IOX",
                 axis_count=None, names=("x", "w", "b"), owner="ConvTranspose",
                 group_name="group"):
    """Ranks and channel counts of data, filter and bias in the user's layout.

    ``axis_count`` is the number of spatial axes the per-axis parameters
    describe (None: any).  Messages use ``names`` for the operands and
    ``group_name`` for the group parameter.
    """
    x_name, w_name, b_name = names
    x_shape, w_shape = tuple(x_shape), tuple(w_shape)
    if len(x_shape) < 3 or len(w_shape) != len(x_shape):
        if len(x_shape) >= 3 and len(w_shape) < len(x_shape):
            raise ValueError(
                f"{w_name} must have shape {_FILTER_PATTERN[filter_format]} with the same rank "
                f"as {x_name}; got {x_name}.shape={x_shape} (rank {len(x_shape)}) and "
                f"{w_name}.shape={w_shape} (rank {len(w_shape)}).")
        raise ValueError(_rank_message(x_shape, w_shape, data_format, filter_format, names))
    count = len(x_shape) - 2
    if axis_count is not None and axis_count != count:
        raise ValueError(
            f"The per-axis parameters of {owner} describe {axis_count} spatial axes, but "
            f"{x_name} of shape {x_shape} has {count} ({x_name} is {_DATA_PATTERN[data_format]})."
            f" Give one value per spatial axis (two for pads).")
    c_axis = channel_axis(len(x_shape), data_format)
    channels = x_shape[c_axis]
    i_axis, o_axis, first = filter_axes(len(w_shape), filter_format)
    if group > 0 and channels % group:
        raise ValueError(
            f"{group_name}={group} must divide the number of input channels "
            f"{x_name}.shape[{c_axis}]={channels}.")
    if w_shape[i_axis] != channels:
        raise ValueError(
            f"{w_name}.shape[{i_axis}] must equal the number of input channels "
            f"{x_name}.shape[{c_axis}]={channels}; got {w_name}.shape={w_shape}. The "
            f"{filter_format} weight layout is {_FILTER_PATTERN[filter_format]}.")
    spatial = [a for a in range(len(x_shape)) if a not in (0, c_axis)]
    for axis, position in enumerate(spatial):
        if x_shape[position] < 1:
            raise ValueError(
                f"{x_name} must have non-empty spatial axes; got {x_name}.shape={x_shape} "
                f"(spatial axis {axis} has size {x_shape[position]}).")
    for axis in range(count):
        if w_shape[first + axis] < 1:
            raise ValueError(
                f"{w_name} must have a non-empty kernel; got {w_name}.shape={w_shape} "
                f"(kernel axis {axis} has size {w_shape[first + axis]}).")
    out_channels = w_shape[o_axis] * group
    if b_shape is not None and tuple(b_shape) != (out_channels,):
        raise ValueError(
            f"{b_name} must have shape (M,) = ({out_channels},), one value per output channel "
            f"({w_name}.shape[{o_axis}] * {group_name} = {w_shape[o_axis]} * {group}); got "
            f"{b_name}.shape={tuple(b_shape)}.")


# --- Conv: weights (M, C/group, k1, ..., kn) in ONNX's order ('OIX') -----------

_CONV_FILTER_PATTERN = {
    "OIX": "(M, C/group, k1, ..., kn)",
    "XIO": "(k1, ..., kn, C/group, M)",
    "IOX": "(C/group, M, k1, ..., kn)",
}


def letter_axes(ndim, letters):
    """(I axis, O axis, first kernel axis) of a filter of rank ``ndim`` laid out as
    ``letters`` (a permutation of 'I', 'O', 'X'; X stands for the ndim - 2 kernel axes)."""
    position, axes = 0, {}
    for letter in letters:
        axes[letter] = position
        position += ndim - 2 if letter == "X" else 1
    return axes["I"], axes["O"], axes["X"]


def conv_filter_view(array, filter_format):
    """(M, C/group, k...) view of a Conv filter in ``filter_format`` (the array itself
    for 'OIX')."""
    if filter_format == "OIX":
        return array
    i_axis, o_axis, first = letter_axes(array.ndim, filter_format)
    return array.transpose([o_axis, i_axis] + list(range(first, first + array.ndim - 2)))


def canonical_conv_filter_shape(shape, filter_format):
    """(M, C/group, k...) order of a Conv filter shape given in ``filter_format``."""
    shape = tuple(int(v) for v in shape)
    i_axis, o_axis, first = letter_axes(len(shape), filter_format)
    return (shape[o_axis], shape[i_axis]) + shape[first:first + len(shape) - 2]


def check_conv_shapes(x_shape, w_shape, b_shape, group, data_format="NCX", filter_format="OIX",
                      axis_count=None):
    """Ranks and channel counts of Conv's data, filter and bias in the user's layout.

    The text: ``X.shape[1] == W.shape[1] * group == C`` and ``W.shape[0] mod group == 0``.
    """
    x_shape, w_shape = tuple(x_shape), tuple(w_shape)
    pattern = _CONV_FILTER_PATTERN[filter_format]
    if len(x_shape) < 3 or len(w_shape) != len(x_shape):
        if len(x_shape) >= 3 and len(w_shape) < len(x_shape):
            raise ValueError(
                f"w must have shape {pattern} with the same rank as x; got x.shape={x_shape} "
                f"(rank {len(x_shape)}) and w.shape={w_shape} (rank {len(w_shape)}).")
        channels = None
        if len(w_shape) >= 3:
            channels = w_shape[letter_axes(len(w_shape), filter_format)[0]] * group
        raise ValueError(_rank_message(x_shape, w_shape, data_format, filter_format,
                                       ("x", "w", "b"), channels, pattern))
    count = len(x_shape) - 2
    if axis_count is not None and axis_count != count:
        raise ValueError(
            f"The per-axis parameters of Conv describe {axis_count} spatial axes, but x of "
            f"shape {x_shape} has {count} (x is {_DATA_PATTERN[data_format]}). Give one value "
            f"per spatial axis (two for pads).")
    c_axis = channel_axis(len(x_shape), data_format)
    channels = x_shape[c_axis]
    i_axis, o_axis, first = letter_axes(len(w_shape), filter_format)
    if channels % group:
        raise ValueError(
            f"group={group} must divide the number of input channels "
            f"x.shape[{c_axis}]={channels}.")
    if w_shape[i_axis] * group != channels:
        raise ValueError(
            f"w.shape[{i_axis}] * group must equal the number of input channels "
            f"x.shape[{c_axis}]={channels}; got w.shape={w_shape} and group={group} "
            f"(w.shape[{i_axis}] should be {channels // group}). The {filter_format} weight "
            f"layout is {pattern}.")
    out_channels = w_shape[o_axis]
    if out_channels % group:
        raise ValueError(
            f"w.shape[{o_axis}]={out_channels}, the number of output channels M, must be a "
            f"multiple of group={group} (each group computes M/group of them); got "
            f"w.shape={w_shape}.")
    spatial = [a for a in range(len(x_shape)) if a not in (0, c_axis)]
    for axis, position in enumerate(spatial):
        if x_shape[position] < 1:
            raise ValueError(
                f"x must have non-empty spatial axes; got x.shape={x_shape} "
                f"(spatial axis {axis} has size {x_shape[position]}).")
    for axis in range(count):
        if w_shape[first + axis] < 1:
            raise ValueError(
                f"w must have a non-empty kernel; got w.shape={w_shape} "
                f"(kernel axis {axis} has size {w_shape[first + axis]}).")
    if b_shape is not None and tuple(b_shape) != (out_channels,):
        raise ValueError(
            f"b must have shape (M,) = ({out_channels},), one value per output channel "
            f"(w.shape[{o_axis}]); got b.shape={tuple(b_shape)}.")
