"""Checking and coercing the arrays of a ConvTranspose call.

Kernels read ``x``, ``w`` and ``b`` through element strides, so views of any
layout (Fortran order, negative strides, read-only) are used in place.  Only
what the kernels cannot read is copied: non-native byte order, misaligned data
and strides that are not a multiple of the item size.
"""

from __future__ import annotations

import os

import numpy as np

SUPPORTED_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))

def as_operand(name, value):
    """Return ``value`` as an ndarray of a supported float dtype the kernels can read."""
    array = np.asarray(value)
    dtype = array.dtype
    if dtype.kind != "f" or dtype.newbyteorder("=") not in SUPPORTED_DTYPES:
        raise TypeError(
            f"{name} has dtype {dtype}; convt computes in float16, float32 or float64. "
            f"Cast it first, e.g. {name}.astype(np.float32)."
        )
    if not dtype.isnative:
        array = array.astype(dtype.newbyteorder("="))
    itemsize = array.dtype.itemsize
    if not array.flags.aligned or any(stride % itemsize for stride in array.strides):
        array = np.ascontiguousarray(array)
    return array


def check_same_dtype(x, w, b):
    """x, w and b must share one dtype; convt never casts silently."""
    for name, array in (("w", w), ("b", b)):
        if array is not None and array.dtype != x.dtype:
            raise TypeError(
                f"x and {name} must have the same dtype; got x.dtype={x.dtype} and "
                f"{name}.dtype={array.dtype}. Cast one of them, e.g. "
                f"{name}.astype(x.dtype)."
            )


def check_shapes(x_shape, w_shape, b_shape, group):
    """Ranks and channel counts of x (N, C, D...), w (C, M/group, k...) and b (M,)."""
    if len(x_shape) < 3:
        raise ValueError(
            f"x must have shape (N, C, D1, ..., Dn) with at least one spatial axis; "
            f"got shape {tuple(x_shape)}."
        )
    if len(w_shape) != len(x_shape):
        raise ValueError(
            f"w must have shape (C, M/group, k1, ..., kn) with the same rank as x; got "
            f"x.shape={tuple(x_shape)} (rank {len(x_shape)}) and w.shape={tuple(w_shape)} "
            f"(rank {len(w_shape)})."
        )
    channels = x_shape[1]
    if group > 0 and channels % group:
        raise ValueError(
            f"group={group} must divide the number of input channels x.shape[1]={channels}."
        )
    if w_shape[0] != channels:
        raise ValueError(
            f"w.shape[0] must equal the number of input channels x.shape[1]={channels}; got "
            f"w.shape={tuple(w_shape)}. The ONNX weight layout is (C, M/group, k1, ..., kn)."
        )
    for axis, size in enumerate(x_shape[2:]):
        if size < 1:
            raise ValueError(
                f"x must have non-empty spatial axes; got x.shape={tuple(x_shape)} "
                f"(spatial axis {axis} has size {size})."
            )
    for axis, size in enumerate(w_shape[2:]):
        if size < 1:
            raise ValueError(
                f"w must have a non-empty kernel; got w.shape={tuple(w_shape)} "
                f"(kernel axis {axis} has size {size})."
            )
    out_channels = w_shape[1] * group
    if b_shape is not None and tuple(b_shape) != (out_channels,):
        raise ValueError(
            f"b must have shape (M,) = ({out_channels},), one value per output channel "
            f"(w.shape[1] * group = {w_shape[1]} * {group}); got b.shape={tuple(b_shape)}."
        )


def _physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_output_size(shape, dtype):
    """Refuse absurd outputs before allocating anything."""
    count = 1
    for size in shape:
        count *= int(size)
    nbytes = count * np.dtype(dtype).itemsize
    if nbytes > np.iinfo(np.intp).max:
        raise ValueError(
            f"The output of shape {tuple(shape)} would need {nbytes} bytes, more than this "
            f"platform can address. Check strides, dilations and output_shape."
        )
    memory = _physical_memory()
    if memory is not None and nbytes > memory:
        raise MemoryError(
            f"The output of shape {tuple(shape)} and dtype {np.dtype(dtype)} would need "
            f"{nbytes / 2**30:.1f} GiB, more than this machine's {memory / 2**30:.1f} GiB of "
            f"memory. Check strides, dilations and output_shape."
        )


def prepare_output(out, shape, dtype, inputs):
    """Validate a user-supplied ``out`` or allocate a new C-contiguous result."""
    if out is None:
        check_output_size(shape, dtype)
        return np.empty(shape, dtype=dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray or None; got {type(out).__name__}.")
    if out.shape != tuple(shape) or out.dtype != dtype:
        raise ValueError(
            f"out must have shape {tuple(shape)} and dtype {dtype}; got shape {out.shape} "
            f"and dtype {out.dtype}."
        )
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous; pass np.empty(shape, dtype) or None.")
    if not out.flags.writeable:
        raise ValueError("out must be writeable; got a read-only array.")
    for name, array in inputs.items():
        if array is not None and np.may_share_memory(out, array):
            raise ValueError(f"out must not share memory with {name}; pass a separate array.")
    return out
