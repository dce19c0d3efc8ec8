"""Working memory of the engines' calls (per-thread tile buffers), kept for the next call.

A GEMM, direct, Winograd, depthwise-plane or col2im call gives each thread a workspace:
its tile buffers, up to a few MiB per thread (col2im also packs x into a lent block).  A fresh ``np.empty`` of that size is, from glibc's mmap threshold
(128 KiB at first) up, memory the C library maps for the call and unmaps after it, or
heap memory it trims back to the system once enough lies free at the heap's top; which
of these happens depends on everything the process allocated before.  Fresh pages cost
a fault each (zeroed by the kernel) on their first write, and the threads of a call
fault at once, contending for the process's memory map: a 256 -> 64 1x1 Conv over 56x56
(0.9 MiB of workspace on 2 threads) took 190 faults and 0.79 ms per call, against 0.53 ms
with its workspace kept (2 Zen 4 vCPUs; at 1 thread it happened not to fault).

So calls borrow their workspace here and give it back (workspaces under
``MIN_BYTES`` come from ``np.empty``: malloc serves them from memory it reuses, and
borrowing would cost a tiny call more than their page faults could).  A block is lent to one call at a
time (calls from several Python threads at once get distinct blocks), and no call reads
what its workspace held before it wrote it, as with ``np.empty``: results never depend
on it.  At most ``KEPT_BLOCKS`` free blocks of at most ``KEPT_MAX_BYTES`` each are kept;
:func:`release` drops them.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from ._locks import ForkSafeLock

MIN_BYTES = 256 << 10          # smaller workspaces are plain np.empty arrays
KEPT_BLOCKS = 2                # free blocks kept, at most: the largest
KEPT_MAX_BYTES = 64 << 20      # larger blocks go back to the system after their call
GRANULE = 64 << 10             # sizes rounded up to this: neighbouring sizes share blocks
ALIGNMENT = 64                 # bytes: a cache line

_lock = ForkSafeLock()
# Loans no call holds: (block, (shape, dtype) of its last view, that view).  A call
# of the same shape gets the view again: a loop pays no slicing.
_free = []


def lend(shape, dtype):
    """``(array, loan)``: an uninitialised C-contiguous array of ``shape`` and
    ``dtype`` and the loan of the kept block it lies in (None for a plain array
    under MIN_BYTES), to pass to :func:`give_back` once the call is done with it.

    Examples
    --------
    >>> from convt._workspace import give_back, lend
    >>> workspace, loan = lend((2, 100000), "float32")
    >>> workspace.shape
    (2, 100000)
    >>> give_back(loan)
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES:
        return np.empty(shape, dtype), None
    key = (tuple(shape), dtype)
    loan = _take(nbytes, key)
    if loan is not None and loan[1] == key:
        return loan[2], loan
    block = loan[0] if loan is not None else np.empty(
        -(-(nbytes + ALIGNMENT) // GRANULE) * GRANULE, np.uint8)
    start = -block.ctypes.data % ALIGNMENT
    view = block[start:start + nbytes].view(dtype).reshape(shape)
    return view, (block, key, view)


def give_back(loan):
    """Keep the block of ``loan`` (from :func:`lend`; None: nothing) for later
    calls, dropping the smallest kept beyond KEPT_BLOCKS."""
    if loan is None or loan[0].size > KEPT_MAX_BYTES:
        return
    with _lock.lock:
        _free.append(loan)
        while len(_free) > KEPT_BLOCKS:  # (by index: loans hold arrays, which do not compare)
            del _free[min(range(len(_free)), key=lambda index: _free[index][0].size)]


@contextlib.contextmanager
def borrowed(shape, dtype):
    """:func:`lend` for the ``with`` block: an uninitialised C-contiguous array of
    ``shape`` and ``dtype`` whose memory may serve later calls.

    Examples
    --------
    >>> from convt._workspace import borrowed
    >>> with borrowed((2, 1000), "float32") as workspace:
    ...     workspace.shape
    (2, 1000)
    """
    array, loan = lend(shape, dtype)
    try:
        yield array
    finally:
        give_back(loan)


def _take(nbytes, key):
    """The free loan whose view has ``key``, else the one of the smallest block
    that holds ``nbytes`` aligned, else None."""
    with _lock.lock:
        best = None
        for index, loan in enumerate(_free):
            if loan[1] == key:
                return _free.pop(index)
            if loan[0].size - ALIGNMENT >= nbytes and (
                    best is None or loan[0].size < _free[best][0].size):
                best = index
        return _free.pop(best) if best is not None else None


def kept_bytes():
    """Bytes of the free blocks kept now.

    Examples
    --------
    >>> from convt._workspace import kept_bytes, release
    >>> release()
    >>> kept_bytes()
    0
    """
    with _lock.lock:
        return sum(loan[0].size for loan in _free)


def release():
    """Drop the kept blocks: their memory goes back to the system.

    Examples
    --------
    >>> from convt._workspace import release
    >>> release()
    """
    with _lock.lock:
        _free.clear()
