"""Checking and coercing the arrays of a ConvTranspose call.

Kernels read ``x``, ``w`` and ``b`` through element strides, so views of any
layout (Fortran order, negative strides, read-only) are used in place.  Only
what the kernels cannot read is copied: non-native byte order, misaligned data
and strides that are not a multiple of the item size.
"""

from __future__ import annotations

import os

import numpy as np

from . import _outputs

SUPPORTED_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
# bfloat16 is ml_dtypes' NumPy dtype, recognised by name: convt never imports
# ml_dtypes (a user passing such an array already has it).
SUPPORTED_NAMES = ("float16", "bfloat16", "float32", "float64")


def is_bfloat16(dtype):
    """Whether ``dtype`` is ml_dtypes' bfloat16 (a 2-byte dtype of that name)."""
    # kind 'V' (ml_dtypes' dtypes) first: dtype.name is slow to compute
    return dtype.kind == "V" and dtype.itemsize == 2 and dtype.name == "bfloat16"


def is_supported(dtype):
    """Whether convt computes in ``dtype`` (any byte order)."""
    return is_bfloat16(dtype) or (dtype.kind == "f"
                                  and dtype.newbyteorder("=") in SUPPORTED_DTYPES)


def as_operand(name, value):
    """Return ``value`` as an ndarray of a supported float dtype the kernels can read."""
    array = np.asarray(value)
    dtype = array.dtype
    if not is_supported(dtype):
        raise TypeError(
            f"{name} has dtype {dtype}; convt computes in float16, bfloat16 (ml_dtypes), "
            f"float32 or float64. Cast it first, e.g. {name}.astype(np.float32)."
        )
    if not dtype.isnative:
        array = array.astype(dtype.newbyteorder("="))
    itemsize = array.dtype.itemsize
    if not array.flags.aligned or any(stride % itemsize for stride in array.strides):
        array = np.ascontiguousarray(array)
    return array


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
        return _outputs.empty(shape, dtype)
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
    if not out.flags.aligned:
        raise ValueError(
            f"out must be aligned to its {out.dtype.itemsize}-byte elements (the kernels store "
            f"whole elements); got an array at an odd address, such as a view into a byte "
            f"buffer. Pass np.empty(shape, dtype), or None and copy the result.")
    for name, array in inputs.items():
        if array is not None and np.may_share_memory(out, array):
            raise ValueError(f"out must not share memory with {name}; pass a separate array.")
    return out
