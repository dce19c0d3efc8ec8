"""Output arrays for calls without ``out=``: large ones recycled once no array uses them.

A new array larger than the C library's mmap threshold (glibc raises it to at most
32 MiB) gets pages that the kernel maps, faults in and zeroes on their first write,
every call: about 0.17 ms per MiB on a Zen 3 server (a 34 MiB output 5.6-6 ms, 15-20%
of a 1-thread UNet 3-D decoder layer that writes it; 67 MiB 10 ms).  Smaller arrays
come from memory malloc already reuses.  So outputs of at least ``MIN_BYTES`` are views
of blocks that this module keeps: at most ``BLOCKS`` of them, ``MAX_BYTES`` in all,
the most recently used.  A block is handed out again only when nothing but this
module refers to it: every array made from it (views of views included: NumPy points
each view's base at the array that owns the memory) holds a reference to the block,
so a block that is referred to only here has no array left on it.  onnxruntime's and
OpenVINO's arenas reuse their outputs' memory in the same way.

The check counts references (as NumPy's ``ndarray.resize`` does), so the pool is used
only where that count is exact: CPython with its global interpreter lock.  Elsewhere,
and for smaller or larger outputs, every call gets ``np.empty``.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from ._locks import ForkSafeLock

MIN_BYTES = 32 << 20   # glibc's largest mmap threshold: below it malloc reuses memory
MAX_BYTES = 256 << 20  # memory kept for reuse, at most (blocks in use count too)
BLOCKS = 2             # blocks kept, at most: a layer's output and the one before it
ALIGNMENT = 64         # bytes: a cache line, as the kernels' stores prefer

_lock = ForkSafeLock()
_blocks = []           # uint8 arrays, least recently handed out first


def _references(blocks, index):
    """References to blocks[index]: the list's and this call's argument when free."""
    return sys.getrefcount(blocks[index])


def _supported():
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    return sys.implementation.name == "cpython" and gil


ENABLED = _supported()
_FREE = _references([np.empty(1, np.uint8)], 0) if ENABLED else 0


def pooled(nbytes):
    """Whether an output of ``nbytes`` comes from the kept blocks (see the module)."""
    return ENABLED and MIN_BYTES <= nbytes <= MAX_BYTES // BLOCKS


def empty(shape, dtype):
    """An uninitialised C-contiguous array of ``shape`` and ``dtype``, as
    ``np.empty`` gives, from a recycled block when it is large (see the module).

    Examples
    --------
    >>> from convt._outputs import empty
    >>> empty((2, 3), "float32").shape
    (2, 3)
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if not pooled(nbytes):
        return np.empty(shape, dtype)
    with _lock.lock:
        block = _take(nbytes)
    start = -block.ctypes.data % ALIGNMENT
    return block[start:start + nbytes].view(dtype).reshape(shape)


def _take(nbytes):
    """A free block of at least ``nbytes`` (at most twice that: a much larger one
    stays for its own size), moved to the end of the list; else a new one, the
    oldest free block dropped to keep within BLOCKS."""
    for index in range(len(_blocks)):
        size = _blocks[index].size - ALIGNMENT
        if nbytes <= size <= 2 * nbytes and _references(_blocks, index) <= _FREE:
            block = _blocks.pop(index)
            _blocks.append(block)
            return block
    if len(_blocks) >= BLOCKS:
        free = [i for i in range(len(_blocks)) if _references(_blocks, i) <= _FREE]
        if free:
            del _blocks[free[0]]
    block = np.empty(nbytes + ALIGNMENT, np.uint8)
    if len(_blocks) < BLOCKS:
        _blocks.append(block)
    return block


def release():
    """Drop the kept blocks (their memory goes back to the system once no array
    uses it).

    Examples
    --------
    >>> from convt._outputs import release
    >>> release()
    """
    with _lock.lock:
        _blocks.clear()
