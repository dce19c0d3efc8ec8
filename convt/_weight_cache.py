"""Packed GEMM weights kept between calls, reused only for bitwise-equal weights.

Packing reorders every weight into the micro-kernels' row blocks: on a small
or weight-heavy layer (a tiny 8x8 map, a batched vocoder layer with 8 MiB of
weights) it costs a quarter of the call or more, and a fresh packed buffer
costs page faults.  Inference calls the same layer with the same weights again
and again, so the packed weights of a call are remembered with a copy of the
weights they came from.  A later call reuses them only when its weights hold
exactly the same bytes (one ``memcmp``, several times cheaper than packing);
weights edited in place, or other weights of the same shape, are packed again.
Results are therefore those of packing every time.  Weights bound to a layer
(``layer.bind(w)``, convt._bound) are the layer's own read-only copy: their
packings stay with it and are found without comparing any byte.

Memory stays bounded: entries (the copy plus the packed weights) are evicted
least recently used beyond ``CONVT_WEIGHT_CACHE_MIB`` mebibytes (default
:data:`DEFAULT_BUDGET_MIB`; 0 turns the cache off), but only entries unused for
:data:`RECENT_SECONDS`: while a network larger than the budget runs layer after
layer, every entry is in use, and evicting the least recent one for each new one
would make every call miss (the evicted layer comes round again first); new
weights are then packed for their call only, and the entries kept keep hitting
(ResNet-50's 53 Conv layers in turn at 2 threads, 90 MiB of weights: 61.5 ms a
pass under least-recently-used eviction, 54 ms with this rule, 55 ms with a budget
that holds the whole network).  A layer keeps at most
:data:`ENTRIES_PER_PLAN` sets of weights, and no entry may take more than half
of the budget (by default, weights up to 32 MiB: a 512 -> 1024 3x3 layer; two
such layers stay remembered together).  Only finite weights whose elements fill
one dense block of memory (in any axis order: a layout's view such as XOI seen
as IOX) are kept, and they are copied and compared in that memory order.  Large
Conv weights over few outputs are not packed at all but read from w during the
call (convt._dispatch.streams_weights).
"""

from __future__ import annotations

import time
import weakref
from collections import OrderedDict

from . import _environ
from ._compiled import load
from ._locks import ForkSafeLock

BUDGET_VARIABLE = "CONVT_WEIGHT_CACHE_MIB"
DEFAULT_BUDGET_MIB = 128
# Sets of weights remembered per plan: layers of one shape in one model (the
# repeated blocks of a decoder or encoder) share a plan and take turns, and
# ResNet-101 has 23 of one shape; with fewer kept than take turns, every call
# misses (10 Winograd 256 -> 256 3x3 layers over 14x14 in turn: 5.4 ms a call
# against 0.87 ms, with 4 kept).  The budget bounds the memory; other weights
# are told apart by their first bytes (same_bytes).
ENTRIES_PER_PLAN = 32

_lock = ForkSafeLock()
# Entries kept only while no newer weights need their room: those used within this
# many seconds (a network's layers in turn come round far sooner) are not evicted.
RECENT_SECONDS = 1.0
# key -> list of [run, weights copy, packed, last used, key], most recent first
_plans = OrderedDict()
_bytes = 0
# The entry found or stored last: the first of the most recent plan, until an
# eviction or clear() drops it (then None).  A call whose weights it holds needs no
# reordering (convt._kernels.RepeatedGemm serves such calls without this module).
_latest = None
# Weights bound to a layer (convt._bound): address of the first byte of the bound
# layer's own read-only copy -> its FixedWeights.  Nothing else can write that
# memory, so every view of it keeps its bytes for as long as the copy lives.
# Weakly held: the entry goes when the last bound layer holding the copy goes.
_fixed = weakref.WeakValueDictionary()
# Packings kept per fixed weights (one per plan: input shape, thread count,
# route), the oldest dropped first: a bound layer applied to many input shapes
# keeps a bounded number.
FIXED_PACKINGS = 4


class FixedWeights:
    """The packings of weights that cannot change: a bound layer's own read-only
    copy (see convt._bound), shared with its adjoint.  Its packings are kept with
    it, outside the cache's budget, and found without comparing bytes."""

    def __init__(self, weights):
        if weights.flags.writeable or weights.base is not None:
            raise ValueError("fixed weights must be a read-only array owning its memory")
        self.weights = weights
        self.packings = {}
        with _lock.lock:
            _fixed[weights.__array_interface__["data"][0]] = self

    def find(self, key, run):
        """The packing kept under ``key`` by ``run``, or None.  Keys hold id(run):
        the run itself tells a reused id apart."""
        kept = self.packings.get(key)
        return kept[1] if kept is not None and kept[0] is run else None

    def keep(self, key, run, packing):
        """Remember ``packing`` (an array, made read-only) of ``run`` under ``key``."""
        packing.flags.writeable = False
        with _lock.lock:
            self.packings.pop(key, None)
            while len(self.packings) >= FIXED_PACKINGS:
                del self.packings[next(iter(self.packings))]
            self.packings[key] = (run, packing)


def fixed_weights_of(w):
    """The FixedWeights whose memory ``w`` views, or None.  A view starting at the
    copy's first byte is inside it: its address cannot belong to other memory
    while the copy lives."""
    if not _fixed or w.flags.writeable:
        return None
    fixed = _fixed.get(w.__array_interface__["data"][0])
    if fixed is None or w.nbytes > fixed.weights.nbytes:
        return None
    return fixed


def budget_bytes():
    """The cache's budget in bytes from CONVT_WEIGHT_CACHE_MIB (invalid values: the default)."""
    value = _environ.value(BUDGET_VARIABLE, "").strip()
    mib = int(value) if value.isdigit() else DEFAULT_BUDGET_MIB
    return mib << 20


def cache_key(run, arrays, finite):
    """The key of the plan a call's weights are kept under (``finite``: ConvTranspose's)."""
    w = arrays.w
    return (id(run), w.shape, w.dtype, arrays.w_strides.tobytes(), finite)


def _memory_order(w):
    """w's elements in the order they lie in memory, as a C-contiguous view, or None
    when they do not fill one dense block (gaps, reversed axes)."""
    if w.flags.c_contiguous:
        return w
    dense = w.transpose(sorted(range(w.ndim), key=lambda axis: -w.strides[axis]))
    return dense if dense.flags.c_contiguous else None


def lookup(run, arrays, finite, threads=1):
    """``(packed, dense)``: the packed weights of an earlier call of ``run`` with
    bitwise-equal weights, or None (large weights are compared by up to ``threads``
    threads), and the weights as they lie in memory, a C-contiguous view to pass to
    ``store``, or None when they cannot be remembered (compared with one memcmp).
    Fixed weights (a view of a bound layer's copy) are not compared: their packing,
    if made before, and their FixedWeights.

    Every call runs this: it calls few Python functions, each of which costs 5-15 us
    once a large call has pushed them out of the CPU caches.
    """
    global _latest
    w = arrays.w
    fixed = fixed_weights_of(w)
    if fixed is not None:
        return fixed.find(cache_key(run, arrays, finite), run), fixed
    dense = w if w.flags.c_contiguous else _memory_order(w)
    if dense is None or budget_bytes() <= 0:
        return None, None
    key = cache_key(run, arrays, finite)
    with _lock.lock:
        entries = list(_plans.get(key, ()))
        latest = next(reversed(_plans), None)
    for position, entry in enumerate(entries):
        held_run, copy, packed = entry[:3]
        if held_run is run and copy is not None and load().same_bytes(copy, dense, threads):
            entry[3] = time.monotonic()
            if position == 0 and latest == key:
                _latest = entry
                return packed, dense  # already the most recent (every call of a busy loop)
            with _lock.lock:  # most recent first, in its plan and among plans
                held = _plans.get(key, [])
                for index, kept in enumerate(held):
                    if kept is entry:  # (by identity: lists of arrays do not compare)
                        held.insert(0, held.pop(index))
                        _plans.move_to_end(key)
                        _latest = entry
                        break
            return packed, dense
    return None, dense


def store(run, arrays, w, finite, packed):
    """Remember ``packed`` as the packing of ``arrays.w`` by ``run`` (a copy of its memory-order
    view ``w``, from ``lookup``, is kept; for fixed weights, ``w`` is their FixedWeights,
    which keeps ``packed`` alone)."""
    global _bytes, _latest
    if isinstance(w, FixedWeights):
        w.keep(cache_key(run, arrays, finite), run, packed)
        return
    budget = budget_bytes()
    size = w.nbytes + packed.nbytes
    now = time.monotonic()
    key = cache_key(run, arrays, finite)
    with _lock.lock:
        held = _plans.get(key, ())
        if (2 * size > budget or not _room_for(size, budget, now)
                or (len(held) >= ENTRIES_PER_PLAN and now - held[-1][3] < RECENT_SECONDS)):
            return
    packed.flags.writeable = False  # shared by every later call that finds it
    entry = [run, w.copy(), packed, now, key]
    with _lock.lock:
        entries = _plans.pop(key, [])
        entries.insert(0, entry)
        _bytes += size
        while len(entries) > ENTRIES_PER_PLAN:
            _bytes -= _evicted(entries.pop())
        _plans[key] = entries
        _latest = entry
        while _bytes > budget and _plans:
            oldest_key = next(iter(_plans))
            oldest = _plans[oldest_key]
            _bytes -= _evicted(oldest.pop())
            if not oldest:
                del _plans[oldest_key]


def _room_for(size, budget, now):
    """Whether ``size`` more bytes fit the budget once the least recently used
    entries are evicted, none of them used within RECENT_SECONDS (the lock held)."""
    free = budget - _bytes
    for entries in _plans.values():  # least recently used plan first
        for entry in reversed(entries):
            if free >= size:
                return True
            if now - entry[3] < RECENT_SECONDS:
                return False
            free += _size(entry)
    return free >= size


def clear():
    """Forget every remembered packing."""
    global _bytes, _latest
    with _lock.lock:
        for entries in _plans.values():
            for entry in entries:
                _evicted(entry)
        _plans.clear()
        _bytes = 0
        _latest = None


def held_bytes():
    """Bytes the cache holds (weights copies and packed weights)."""
    return _bytes


def _size(entry):
    return entry[1].nbytes + entry[2].nbytes


def _evicted(entry):
    """Drop ``entry``'s arrays (the lock held) and return the bytes they held: a
    compiled repeated call may still hold the entry, never its memory."""
    global _latest
    size = _size(entry)
    entry[1] = entry[2] = None
    if entry is _latest:
        _latest = None
    return size
