"""From a resolved geometry to the integer tables the kernels run on.

Along one axis, output ``o = r + t * stride`` (residue ``r``) receives the taps
``k`` with ``(r + pad_begin - k * dilation) % stride == 0``, each reading input
``i = t + (r + pad_begin - k * dilation) // stride``: a stride-1 correlation
over the un-expanded input.  Residues whose taps read the same offsets up to a
common shift form an *axis group*; in N-D, a *stack* is one axis group per axis
and becomes one GEMM per tile whose rows are (leading phase, output channel,
last-axis phase) and whose columns are positions ``u = t + shift`` of a grid
shared by the stacked phases.

Plans depend on shapes and attributes only, never on the thread count, so the
work decomposition, and thus every rounding, is the same for every
``num_threads``.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, replace

import numpy as np

from . import _records

@dataclass(frozen=True)
class Phase:
    """Outputs ``o = residue + t * stride`` for ``t < count``; each tap ``(k, offset)`` reads ``i = t + offset``."""

    residue: int
    count: int
    taps: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class AxisGroup:
    """Phases of one axis whose tap offsets agree up to a shift (``u = t + shift``).

    ``residues`` (Conv only) holds each tap's input residue: the input is read
    decimated by the stride, tap j at ``stride * (u + offsets[j]) + residues[j]``.
    """

    offsets: tuple[int, ...]
    phases: tuple[Phase, ...]
    shifts: tuple[int, ...]
    first: int
    extent: int
    residues: tuple[int, ...] = ()

    @property
    def residue_values(self):
        """The distinct input residues the taps read, in order (ConvTranspose: 0)."""
        return tuple(sorted(set(self.residues))) or (0,)


def phase_tap_range(residue, count, in_size, kernel, stride, dilation, pad_begin):
    """The kernel taps k (a ``range``) of the phase of outputs ``residue + t *
    stride`` (``t < count``) that reach an output.

    Tap k serves the phase when ``(residue + pad_begin - k * dilation) % stride
    == 0`` and reads input ``t + offset``, ``offset = (residue + pad_begin - k *
    dilation) // stride``, which must lie in ``[0, in_size)`` for some t, so
    ``-count < offset < in_size``.  Modular arithmetic finds them without
    visiting the others: planning costs what reaches the output, however long
    the kernel or large the dilation.  Every tap serves exactly one residue.
    """
    base = residue + pad_begin
    common = math.gcd(dilation, stride)
    if base % common:
        return range(0)
    period = stride // common  # k steps between taps of this phase
    first = (base // common) * pow(dilation // common, -1, period) % period if period > 1 else 0
    # -count < (base - k d) / stride < in_size  <=>  base - in_size s < k d < base + count s
    low = max(0, (base - in_size * stride) // dilation + 1)
    high = min(kernel - 1, -(-(base + count * stride) // dilation) - 1)
    start = low + (first - low) % period
    return range(start, high + 1, period)


def phase_taps(residue, count, in_size, kernel, stride, dilation, pad_begin):
    """The taps ``(k, offset)`` of a phase that reach an output (see phase_tap_range)."""
    base = residue + pad_begin
    return tuple((k, (base - k * dilation) // stride) for k in phase_tap_range(
        residue, count, in_size, kernel, stride, dilation, pad_begin))


def axis_phases(in_size, kernel, stride, dilation, pad_begin, out_size):
    """The stride phases of one axis, in residue order, with the taps that reach
    their outputs."""
    phases = []
    for residue in range(min(stride, out_size)):
        count = -(-(out_size - residue) // stride)
        phases.append(Phase(residue, count, phase_taps(residue, count, in_size, kernel, stride,
                                                        dilation, pad_begin)))
    return tuple(phases)


def _axis_group(pattern, entries):
    first = min(shift for _, shift in entries)
    end = max(shift + phase.count for phase, shift in entries)
    return AxisGroup(
        offsets=pattern,
        phases=tuple(phase for phase, _ in entries),
        shifts=tuple(shift for _, shift in entries),
        first=first,
        extent=end - first,
    )


def axis_groups(phases):
    """Group phases whose taps read the same offsets; phases without taps join no group.

    Stacked phases share one grid of positions ``u = t + shift``.  Phases with
    different shifts are stacked while the union grid is at most 1/8 longer
    than the longest phase: more rows per GEMM and one input tile for all of
    them are worth far more than a few positions computed for nothing.
    """
    by_pattern = {}
    for phase in phases:
        if phase.taps:
            shift = phase.taps[0][1]
            pattern = tuple(offset - shift for _, offset in phase.taps)
            by_pattern.setdefault(pattern, []).append((phase, shift))
    groups = []
    for pattern, entries in by_pattern.items():
        union = _axis_group(pattern, entries)
        if 8 * union.extent <= 9 * max(phase.count for phase, _ in entries):
            groups.append(union)
            continue
        by_shift = {}
        for phase, shift in entries:
            by_shift.setdefault(shift, []).append((phase, shift))
        groups.extend(_axis_group(pattern, members) for members in by_shift.values())
    return tuple(groups)


@functools.lru_cache(maxsize=256)
def geometry_phases(geometry):
    """Stride phases of every spatial axis."""
    return tuple(
        axis_phases(*axis)
        for axis in zip(
            geometry.input_shape,
            geometry.kernel_shape,
            geometry.strides,
            geometry.dilations,
            geometry.pads_begin,
            geometry.output_shape,
        )
    )


@functools.lru_cache(maxsize=256)
def phase_tap_counts(geometry):
    """Per axis, (outputs, reaching taps) of every phase, without listing the taps."""
    return tuple(
        tuple(
            (count, len(phase_tap_range(residue, count, size, kernel, stride, dilation, pad)))
            for residue in range(min(stride, out))
            for count in (-(-(out - residue) // stride),)
        )
        for size, kernel, stride, dilation, pad, out in zip(
            geometry.input_shape, geometry.kernel_shape, geometry.strides, geometry.dilations,
            geometry.pads_begin, geometry.output_shape)
    )


def conv_reaching_taps(geometry):
    """Per axis, the taps of a Conv that read some real input (see conv_axis_group)."""
    return tuple(
        max(0, min(kernel - 1, (size - 1 + pad) // dilation)
            - max(0, -(-(pad - (out - 1) * stride) // dilation)) + 1)
        for size, kernel, stride, dilation, pad, out in zip(
            geometry.input_shape, geometry.kernel_shape, geometry.strides, geometry.dilations,
            geometry.pads_begin, geometry.output_shape))


def reaching_kernel_size(geometry, transpose=True):
    """Kernel taps that reach some output (all of them, but for huge cropped kernels)."""
    if not transpose:
        return math.prod(conv_reaching_taps(geometry))
    return math.prod(sum(taps for _, taps in phases) for phases in phase_tap_counts(geometry))


def zeros_keeping_every_tap(geometry):
    """Per spatial axis, the zeros to put on both sides of the input (with the
    pads grown by as many strides) so that every kernel tap reaches an output:
    0 where every tap already does.

    The engines skip taps that reach no output of a call, which regroups the
    blocked sums of the outputs they keep.  Code that computes one result in
    pieces (dask blocks, upsampling strips and slabs) widens the small pieces
    so that every piece sums the same products in the same order.
    """
    widths = []
    for axis, phases in enumerate(phase_tap_counts(geometry)):
        kernel = geometry.kernel_shape[axis]
        if sum(taps for _, taps in phases) == kernel:
            widths.append(0)
            continue
        stride, dilation = geometry.strides[axis], geometry.dilations[axis]
        widths.append(-(-(kernel - 1) * dilation // stride) + 1)
    return tuple(widths)


@functools.lru_cache(maxsize=256)
def performed_multiply_adds(geometry, batch, in_channels, out_channels, group, transpose=True):
    """Multiply-adds the engines perform: every (tap, output) pair of every phase
    whose tap reaches the output range, per input channel of a group and output
    channel (kernel taps that reach no output are never visited).  Counted
    without listing the taps, so it can vet a call before it is planned."""
    if transpose:
        pairs = math.prod(sum(count * taps for count, taps in phases)
                          for phases in phase_tap_counts(geometry))
    else:
        pairs = math.prod(geometry.output_shape) * math.prod(conv_reaching_taps(geometry))
    return batch * out_channels * (in_channels // group) * pairs


@functools.lru_cache(maxsize=128)
def max_stack_taps(geometry, transpose=True):
    """Taps of the deepest stack: its GEMM's reduction depth per input channel."""
    grouped = operator_axis_groups(geometry, transpose)[0]
    return max(
        (math.prod(len(group.offsets) for group in stack) for stack in itertools.product(*grouped)),
        default=0,
    )


@dataclass(frozen=True)
class GemmPlan:
    """Tables of the GEMM engine, read-only (records: see convt._records)."""

    stacks: np.ndarray          # (S,) GEMM_STACK
    stack_axes: np.ndarray      # (S, ndim) STACK_AXIS
    tap_offsets: np.ndarray     # (total taps, ndim): input offset of each tap
    tap_residues: np.ndarray    # (total taps, ndim): input residue of each tap (Conv)
    residues: np.ndarray        # per stack, per window plane: (planes, ndim) input residues
    buffer_offsets: np.ndarray  # (total K rows,): tap offsets inside a tile buffer
    phases: np.ndarray          # (total phases, ndim) PHASE_AXIS
    kernel_index: np.ndarray    # stack after stack, (P * J, ndim) kernel coordinates
    items: np.ndarray           # (n_items,) WORK_ITEM
    block_starts: np.ndarray    # per stack, blocks + 1 first rows (see _block_starts)
    panel_offsets: np.ndarray   # k * NR for every row of a packed B panel
    packed_size: int            # elements of the packed weights
    table_size: int             # entries of the packing's tap tables
    operand_capacity: int       # elements of the per-thread tile buffer or operand
    product_capacity: int       # elements of the per-thread product of one item
    transposed_capacity: int    # elements of the per-thread transposed product (gemm_t stacks)
    workspace_per_thread: int
    needs_fill: bool            # some outputs get no tap: prefill with the bias


def _round_up(value, quantum):
    return -(-value // quantum) * quantum


@dataclass(frozen=True)
class _TileShape:
    """A tile: ``rows`` grid rows (axis ndim - 2) of ``cols`` columns, and its operand."""

    rows: int
    cols: int
    row_stride: int      # product (and buffer) columns per tile row
    columns: int         # product columns of a full tile, padded to whole panels
    panel: int
    gather: bool         # operand gathered tap by tap (im2col) rather than copied once
    buffer_rows: int     # window buffers: rows per plane (tile rows plus the taps' span)
    buffer_planes: int   # window buffers: leading-axis planes per channel
    buffer_channel: int  # window buffers: elements per input channel
    operand: int         # elements of the operand (buffer or gathered rows)


@dataclass(frozen=True)
class _Reach:
    """What a stack's taps read around a grid position: per axis, the span of
    their offsets; and the number of decimated input planes (Conv strides)."""

    spans: tuple[int, ...]
    residue_planes: int


def _window_tile(reach, rows, cols, chunk, taps, panel):
    """The micro-kernels' usual tile: its input copied once into a zero-padded
    window whose rows are ``cols + span`` long; tap j of every position is then
    a fixed offset away (no copy per tap).  A window holds, per channel, one
    plane per decimated input residue, each made of the leading axes' span
    planes of ``buffer_rows`` rows."""
    spans = reach.spans
    row_stride = cols + spans[-1]
    planes = reach.residue_planes * math.prod(span + 1 for span in spans[:-2])
    buffer_rows = rows + (spans[-2] if len(spans) >= 2 else 0)
    buffer_channel = planes * buffer_rows * row_stride
    columns = _round_up((rows - 1) * row_stride + cols, panel)
    return _TileShape(rows, cols, row_stride, columns, panel, False, buffer_rows, planes,
                      buffer_channel, chunk * buffer_channel + panel)


def _gathered_tile(rows, cols, chunk, taps, panel):
    """A tile gathered tap by tap (im2col): one operand row of ``columns`` per
    (channel, tap).  BLAS multiplies it (panel 0: one panel per tile); the
    micro-kernels use it when the taps span far more input than the tile has
    positions (large dilations), where a window would not fit the budget."""
    columns = rows * cols
    if panel:
        columns = _round_up(columns, panel)
    return _TileShape(rows, cols, cols, columns, panel or columns, True, 0, 0, 0,
                      chunk * taps * columns)


def _choose_rows_cols(extents, shape_of, budget, quantum):
    """The tile with the most whole rows whose operand fits ``budget`` elements.

    Rows are equalised over the tiles of an axis; when a single row is over
    budget, columns are split in whole ``quantum`` and equalised too.
    """
    grid_rows = extents[-2] if len(extents) >= 2 else 1
    rows, cols = grid_rows, extents[-1]
    while True:
        tile = shape_of(rows, cols)
        if tile.operand <= budget:
            break
        if rows > 1:
            rows = max(1, min(rows - 1, rows * budget // tile.operand))
            continue
        smaller = max(quantum, _round_up(cols * budget // tile.operand, quantum))
        if smaller >= cols:
            # rounding up to whole quanta made no progress: one quantum less
            smaller = cols - quantum
            if smaller < quantum:
                break
        cols = smaller
    return shape_of(_equal_share(grid_rows, rows), _equal_share(extents[-1], cols, quantum))


def _equal_share(extent, most, quantum=1):
    """The length of each of the fewest pieces of at most ``most`` (whole ``quantum``)
    that cover ``extent``, shared as equally as whole quanta allow.  A short last
    piece makes an item of another size, and a thread idle at the end: 56 rows in
    tiles of at most 35 are two of 28, not 35 and 21; a 1-D row of 4096 columns in
    tiles of at most 3040 (panels of 16) two of 2048, not 3040 and 1056 (a Conv 64 ->
    64, k31 on that row, ran its two items on 2 Zen 4 threads 1.44x faster: 7.0 ->
    4.9 ms)."""
    if most >= extent:
        return extent
    return min(most, _round_up(-(-extent // -(-extent // most)), quantum))


# How much larger than the gathered taps a window may be and still be chosen.
WINDOW_MAX_EXCESS = 2
# One-tap, zero-offset stacks (1x1 layers, k2s2 phases) read x in place, with
# no tile copy, only while x's channel planes are closer than this: the first
# row block's panel copy reads one position run of every channel in turn, and
# from a page apart each step of it touches a new page and waits on memory
# (64 KiB apart, as in a 128x128 image, every channel also falls in the same L1
# and L2 sets).  Farther apart, tiles are copied as usual, one run of whole
# rows per channel.  On Zen 3 (1 thread, separate processes), copying ran
# k2s2 ConvTranspose 1.13-1.16x (128 -> 64 on 128x128; 1.10-1.13x at 2
# threads), 1.22x (64 -> 32 on 256x256) and 1.01-1.07x (3-D, 32^3) faster, and
# a 1x1 Conv (256 -> 64 on 56x56, then gemm_t) 1.27x at 1 thread, 1.25x at 2,
# its batch-4 twin 1.16-1.27x; at the threshold (32x32, 4 KiB planes) and on
# 48x48 the copy was 1.03-1.09x faster (k2s2 and 1x1); on 16x16 (1 KiB planes)
# reading in place was 2-5% faster, on 28x28 and 7x7 the two were within 2%.
IN_PLACE_MAX_CHANNEL_BYTES = 4096
# Kernels that read B rows in place, packing none (convt._dispatch, packs_b: the
# AVX-512 set where 512-bit FMAs are split), have no panel copy to slow down, and
# a Conv's 1x1 stack reads x in place however far apart its planes lie.  On 1
# and 2 Zen 4 cores (in one process, alternating; warm, and with the caches
# flushed between calls) against copying tiles: 256 -> 64 on 56x56 1.11-1.19x,
# its batch-4 twin 1.17x, 64 -> 64 on 112x112 1.14-1.18x, 128 -> 128 on 64x64
# (16 KiB planes) 1.04-1.08x faster, a 1x1 s2 within 1.5%.  ConvTranspose's
# k2s2 phases keep the limit: unet2d gained 4-5% warm but lost 7% with cold
# caches (four phases re-read x from memory where one copy reads it once).
# Conv 1x1 layers read x in place only from this many positions per plane: on
# smaller planes the copied tile runs the transposed kernels (gemm_t: the many
# output channels as vectors, the few positions broadcast), which read in place
# cannot.  On 1 Zen 3 core (separate processes, two runs each) copying ran 64 ->
# 384 on 14x14 1.33-1.66x, 160 -> 960 on 7x7 1.75x, 32 -> 64 on 7x7 1.6-2.0x,
# 96 -> 576 on 10x10 1.26-2.0x, 512 -> 512 on 8x8 1.05-1.33x, 320 -> 1280 on 7x7
# 1.11x, batch 8 x 64 -> 384 on 14x14 1.19x faster, 384 -> 64 on 14x14 and 256 ->
# 64 on 16x16 within 2%; from 28x28 the two took turns (0.81-1.15x).
CONV_IN_PLACE_MIN_POSITIONS = 256
# Idle share of the cores (see _balanced_items) above which a single stack's
# items are re-cut: 17 items on 2 cores leave 5.9% idle, 33 items 3.0%.
BALANCE_TOLERANCE = 0.03
# _cheapest_height's cost model, in multiply-adds: one element copied into a
# tile buffer, and one packed weight read again by another tile; and the share
# by which another height must beat the planned one.  On 1 Zen 4 core, a 3x3 s2
# Conv (128 -> 256 on 56x56) spent 8% of its time filling 1.04M buffer
# elements and 83% in kernels over 248M multiply-adds: 24 multiply-adds per
# element.  Weights reread from L3 cost less than their loads, hidden behind the
# FMAs, but more than nothing: at 2 the model took 3-row tiles for that layer
# (1.027x as fast as 4 rows), at 6 it takes 5 rows (1.041-1.048x).
HEIGHT_FILL_COST = 20
HEIGHT_WEIGHT_COST = 6
HEIGHT_MIN_GAIN = 0.01
# A single 1-D or 2-D stack whose tiles would copy the input at least
# IMAGE_WINDOW_MIN_COPIES times as often as copying it once per core (row
# groups and halo rows copy it again) makes each thread's tile buffer the window
# of the whole image instead, filled once per image and group by each thread
# that runs one of its tiles (see _image_window_of): up to
# IMAGE_WINDOW_MAX_BYTES, for calls of at least IMAGE_WINDOW_MIN_WORK
# multiply-adds.  On 1 / 2 Zen 4 threads: 256 -> 512 3x3 s2 on 28x28 (tiles copy
# 2.1 times one copy per core) 1.05-1.09x / within +-3%; 128 -> 256 on 56x56 (1.24
# times) 1.05x / 0.99x, so it keeps its tiles.  A window that all threads share
# would be written by one core and read by the other, its lines moving between
# them on every call: that lost 2% on 2 threads.
IMAGE_WINDOW_MIN_COPIES = 1.5
IMAGE_WINDOW_MAX_BYTES = 4 << 20
IMAGE_WINDOW_MIN_WORK = 1 << 22
# A stack holding every residue of its last axis has them written to y together,
# each output row front to back (scatter_siblings, whose arrays hold this many).
# FCN-32s' head (k64 s32, 21 channels on 16x16) spent 31% of its time in one
# strided pass per residue; written together, eight residues at a time, it ran
# 1.10x faster (1 Zen 4 thread, best 16.1-16.3 -> 14.7 ms).
MAX_SIBLINGS = 64


def _choose_tile(extents, reach, chunk, taps, panel, budget, blocking):
    """A window tile when one fits the budget and is at most WINDOW_MAX_EXCESS
    times the gathered taps (always, for ordinary kernels), else a gathered tile."""
    def gathered(rows, cols):
        return _gathered_tile(rows, cols, chunk, taps, panel)

    if not panel:
        return _choose_rows_cols(extents, gathered, budget, blocking.min_tile)

    def window(rows, cols):
        return _window_tile(reach, rows, cols, chunk, taps, panel)

    tile = _choose_rows_cols(extents, window, budget, panel)
    # A window costs one copy per input element and reads its taps in place;
    # gathering copies every (tap, position) again.  Windows of a few taps are a
    # little larger than the gathered rows (their margins), which is no reason
    # to gather: only a window several times larger (taps far apart) is.
    if tile.operand <= budget and tile.operand <= WINDOW_MAX_EXCESS * gathered(
            tile.rows, tile.cols).operand:
        return tile
    return _choose_rows_cols(extents, gathered, budget, panel)


def _split_rows(tile, extents, reach, chunk, taps, min_items, blocking):
    """The tile cut into more row tiles when a stack has fewer than ``min_items``
    tiles (small layers), down to ``blocking.min_split_rows`` rows per tile, so
    that every thread gets work."""
    if len(extents) < 2:
        return tile
    grid_rows = extents[-2]
    lead = math.prod(extents[:-2])
    col_tiles = -(-extents[-1] // tile.cols)
    row_tiles = -(-grid_rows // tile.rows)
    wanted = min(-(-min_items // (lead * col_tiles)), grid_rows // blocking.min_split_rows)
    if wanted <= row_tiles:
        return tile
    return _resized(tile, -(-grid_rows // wanted), tile.cols, reach, chunk, taps, blocking)


def _resized(tile, rows, cols, reach, chunk, taps, blocking):
    """The same kind of tile (window or gathered) with other rows and columns."""
    if tile.gather:
        return _gathered_tile(rows, cols, chunk, taps, blocking.nr)
    return _window_tile(reach, rows, cols, chunk, taps, blocking.nr)


def _shared_gaps(tile, group, span, in_size, decimation, chunk):
    """The window tile with consecutive buffer rows overlapping where both hold
    zero padding.  A window row reads input columns [x - span, x + cols) of its
    grid row (grid x reads input ``decimation * x + residue``); when every row
    starts with ``left`` zeros and ends with ``right`` zeros, row r's last
    min(left, right) columns can be row r + 1's first ones, and the taps still read
    zeros there.  The kernels compute every column of a row stride, so each shared
    column is one product column less per row (3x3 Conv, pad 1: 57 columns for 56
    outputs instead of 58, 8 for 7 instead of 9).  Only for tiles spanning the whole
    last axis: inner column tiles read input on both sides.
    """
    if tile.gather or tile.cols != group.extent or span == 0:
        return tile
    left = span - group.first  # grid x = first reads input columns from first - span
    right = min(group.first + tile.cols - -(-(in_size - residue) // decimation)
                for residue in group.residue_values)
    # the last row's shared columns lie past the chunk's planes, in the panel of
    # zeros that fill_buffer writes there
    shared = max(0, min(left, right, span, tile.panel))
    if not shared:
        return tile
    row_stride = tile.row_stride - shared
    buffer_channel = tile.buffer_planes * tile.buffer_rows * row_stride
    return replace(tile, row_stride=row_stride,
                   columns=_round_up((tile.rows - 1) * row_stride + tile.cols, tile.panel),
                   buffer_channel=buffer_channel, operand=chunk * buffer_channel + tile.panel)


def _buffer_offsets(stack, reach, tile, chunk):
    """Offset of each (channel, tap) row inside a tile's operand (taps in C order)."""
    if tile.gather:
        taps = math.prod(len(group.offsets) for group in stack)
        return [row * tile.columns for row in range(chunk * taps)]
    ndim = len(stack)
    spans = reach.spans
    dims = [span + 1 for span in spans[:-2]]
    if ndim >= 2:
        dims.append(tile.buffer_rows)
    dims.append(tile.row_stride)
    strides = [math.prod(dims[a + 1:]) for a in range(ndim)]
    plane_size = math.prod(dims)  # one decimated input residue of a channel
    taps = [
        _residue_plane(stack, choice) * plane_size
        + sum((span + group.offsets[j]) * stride
              for span, group, j, stride in zip(spans, stack, choice, strides))
        for choice in itertools.product(*(range(len(group.offsets)) for group in stack))
    ]
    return [c * tile.buffer_channel + tap for c in range(chunk) for tap in taps]


def _residue_plane(stack, choice):
    """The window plane of a tap (a choice of one tap per axis): the mixed-radix
    index of its input residues among each axis's residue values."""
    plane = 0
    for group, j in zip(stack, choice):
        values = group.residue_values
        plane = plane * len(values) + values.index(group.residues[j] if group.residues else 0)
    return plane


def _reach(stack):
    return _Reach(tuple(-min(group.offsets) for group in stack),
                  math.prod(len(group.residue_values) for group in stack))


def _block_starts(rows, segment_rows, segment_blocks, unit):
    """First row of every row block, and ``rows``: each segment of ``segment_rows``
    rows is split into ``segment_blocks`` blocks of whole ``unit`` rows, as evenly
    as possible, so no block is much narrower than the kernel's MR (a 2-row
    kernel is half as fast)."""
    units = segment_rows // unit
    base, wide = divmod(units, segment_blocks)
    return [
        segment * segment_rows + unit * (block * base + min(block, wide))
        for segment in range(rows // segment_rows)
        for block in range(segment_blocks)
    ] + [rows]


def _residue_pairs(stacks, strides, blocking):
    """{a: b} for stacks that differ only in holding residue 0 (a) or 1 (b) of a
    stride-2 last axis (k3s2: the residues have 1 and 2 taps, so they are not
    stacked).  One work item runs both and interleaves their outputs, so every
    output line is written once, by one core, in whole vectors."""
    if not blocking.residue_pairs or strides[-1] != 2:
        return {}
    pairs = {}
    for a, stack in enumerate(stacks):
        if len(stack[-1].phases) != 1 or stack[-1].phases[0].residue != 0:
            continue
        for b, other in enumerate(stacks):
            if (other[:-1] == stack[:-1] and len(other[-1].phases) == 1
                    and other[-1].phases[0].residue == 1):
                pairs[a] = b
    return pairs


def _stores_pairs(blocking, chunk, cg):
    """Whether exact stacks store into y with chunks of ``chunk`` channels: narrow
    outputs are rounded once, so straight stores need a single K chunk."""
    return blocking.store_direct and (not blocking.rounds_once or chunk >= cg)


def _balanced_chunk(cg, limit):
    """Channels per K chunk: as few chunks of at most ``limit`` channels as cover
    ``cg``, made equal (64 channels in chunks of up to 18: four of 16, not three
    of 18 and a pass over the product for the last 10)."""
    chunks = -(-cg // max(1, min(cg, limit)))
    return -(-cg // chunks)


def _stack_tile(stack, cg, min_items, blocking, rows=None):
    """Taps, K chunk, extents, reach and tile of a stack (``rows``: forced tile rows)."""
    taps = math.prod(len(group.offsets) for group in stack)
    chunk = _balanced_chunk(cg, blocking.max_depth // taps)
    extents = [group.extent for group in stack]
    reach = _reach(stack)
    panel = blocking.nr
    tile = _choose_tile(extents, reach, chunk, taps, panel,
                        blocking.operand_bytes // blocking.itemsize, blocking)
    if rows is None:
        tile = _split_rows(tile, extents, reach, chunk, taps, min_items, blocking)
    else:
        tile = _resized(tile, rows, extents[-1], reach, chunk, taps, blocking)
    return taps, chunk, extents, reach, tile


def _tile_grid(extents, tile):
    """(row tiles, column tiles, tiles) of ``tile`` over a stack's grid."""
    row_tiles = -(-(extents[-2] if len(extents) >= 2 else 1) // tile.rows)
    col_tiles = -(-extents[-1] // tile.cols)
    return row_tiles, col_tiles, math.prod(extents[:-2]) * row_tiles * col_tiles


def _product_sized(tile, extents, reach, chunk, taps, rows, held, blocks, cg, blocking):
    """A smaller tile whose product (``held`` rows per column: ``rows``, twice that for
    transposed stacks) fits blocking.product_bytes, when it moves fewer elements
    than cutting the tile's ``blocks`` row blocks into product groups, else
    ``tile``.  Each group fills the whole tile buffer again; each extra tile reads
    the stack's weights again (and its taps' halo), so long 1-D rows of many
    channels (k7 Conv: the input filled 4 times) prefer shorter tiles, and stacks
    of heavy weights (vocoder ConvTranspose) keep their groups."""
    panel = blocking.nr
    max_columns = blocking.product_bytes // (held * blocking.itemsize) // panel * panel
    if not panel or tile.gather or tile.columns <= max_columns or max_columns < 4 * panel:
        return tile
    if tile.rows > 1 and max_columns >= tile.cols + panel:
        fitting = max(1, (max_columns - tile.cols) // tile.row_stride + 1)
        grid_rows = extents[-2] if len(extents) >= 2 else 1
        smaller = _resized(tile, _equal_share(grid_rows, fitting), tile.cols, reach, chunk, taps,
                           blocking)
    else:
        columns = _equal_share(extents[-1], min(tile.cols, max_columns), panel)
        smaller = _resized(tile, 1, columns, reach, chunk, taps, blocking)
    if smaller.columns > max_columns:
        return tile
    # groups are whole row blocks: a stack of one block has no groups to cut
    groups = min(-(-held * tile.columns * blocking.itemsize // blocking.product_bytes), blocks)
    chunks = -(-cg // chunk)
    weights = rows * cg * taps
    grouped = _tile_grid(extents, tile)[2] * (groups * tile.operand * chunks + weights)
    split = _tile_grid(extents, smaller)[2] * (smaller.operand * chunks + weights)
    return smaller if split < grouped else tile


@dataclass(frozen=True)
class _TileContext:
    """What resizing a stack's tile needs: its grid, taps, K chunk and input
    channels per group, how many times its items repeat (images x groups), and what _shared_gaps reads (the
    stack's last axis group, the input's last extent, its decimation)."""

    extents: list
    reach: object
    chunk: int
    taps: int
    cg: int
    repeats: int
    last_group: object
    in_size: int
    decimation: int

    def reshaped(self, tile, rows, blocking):
        """``tile`` with ``rows`` rows, its row gaps shared again (_shared_gaps)."""
        candidate = _resized(tile, rows, tile.cols, self.reach, self.chunk, self.taps, blocking)
        if tile.gather:
            return candidate
        return _shared_gaps(candidate, self.last_group, self.reach.spans[-1], self.in_size,
                            self.decimation, self.chunk)

    def other_heights(self, tile, blocking):
        """``tile`` reshaped to the other heights that row tiles of equal rows make,
        each once, the nearest first: between half and twice its height (or
        MIN_SPLIT_ROWS), within the operand budget (or its own operand)."""
        grid_rows = self.extents[-2] if len(self.extents) >= 2 else 1
        budget = max(blocking.operand_bytes // blocking.itemsize, tile.operand)
        lowest = max(1, min(tile.rows // 2 + 1, blocking.min_split_rows))
        highest = min(grid_rows, 2 * tile.rows)
        heights = {_equal_share(grid_rows, rows) for rows in range(lowest, highest + 1)}
        candidates = (self.reshaped(tile, rows, blocking)
                      for rows in sorted(heights - {tile.rows},
                                         key=lambda r: (abs(r - tile.rows), -r)))
        return [candidate for candidate in candidates if candidate.operand <= budget]


def _even_groups(blocks, groups):
    """Row groups after cutting ``blocks`` row blocks into ``groups`` groups of
    equal whole blocks (the last may be shorter): 10 blocks in 4 groups of 3
    make 4, 10 in 6 groups of 2 make 5."""
    return -(-blocks // -(-blocks // groups))


def _idle_share(items, cores):
    """The share of ``cores`` threads' time left idle when ``items`` equal work
    items are dealt out dynamically: ceil(items / cores) rounds."""
    return -(-items // cores) * cores / items - 1


# Up to this many rounds of items per core, _split_idle_share weighs them by
# their sizes (few items: small maps, where a short last tile is a large share).
SPLIT_IDLE_MAX_ROUNDS = 2


def _split_idle_share(extents, tile, blocks, groups, repeats, cores):
    """_idle_share for the items of ``tile`` over a grid of ``extents`` and
    ``blocks`` row blocks in ``groups`` even groups, repeated ``repeats`` times,
    weighing each item by its rows and row blocks: the last row tile and the
    last group may be short, so 2 items of 4 and 3 rows (a 7-row map) leave a
    core idle an eighth of the time where their count says none.  Items are
    dealt out in order, each to the first free core.  More than
    SPLIT_IDLE_MAX_ROUNDS per core even out and are counted as equal (the tile
    heights of larger layers were measured with that count)."""
    row_tiles, col_tiles, tiles = _tile_grid(extents, tile)
    groups = _even_groups(blocks, groups)
    items = repeats * tiles * groups
    if items > SPLIT_IDLE_MAX_ROUNDS * cores or cores <= 1:
        return _idle_share(items, cores)
    grid_rows = extents[-2] if len(extents) >= 2 else 1
    per_group = -(-blocks // groups)
    group_sizes = [per_group] * (groups - 1) + [blocks - per_group * (groups - 1)]
    row_sizes = [tile.rows] * (row_tiles - 1) + [grid_rows - tile.rows * (row_tiles - 1)]
    sizes = [rows * size for rows in row_sizes for size in group_sizes] * (
        repeats * tiles // row_tiles)
    loads = [0] * cores
    for size in sizes:
        loads[loads.index(min(loads))] += size
    return max(loads) * cores / sum(sizes) - 1


def _balanced_items(tile, row_groups, context, row_groups_of, blocks, repack, blocking):
    """A tile and row groups whose work items share out evenly over the machine's
    cores, when the plan's split leaves more than BALANCE_TOLERANCE of them idle.

    Items run dynamically, but a single stack's items are of one size, so 17 of
    them on 2 cores take 9 rounds where 8.5 would do (dcgan k4s2: 6% idle; a
    k16s8 vocoder's 9 row groups, 10%).  The first option within the tolerance
    wins, else the one leaving the fewest idle.  Tried in order: other tile heights
    (each row tile re-reads its taps' halo rows, so the nearest first, between
    half and twice the tile's height (or MIN_SPLIT_ROWS) that the operand
    budget holds), then up to cores - 1 more row groups (each repeats the tile's fill;
    not where the groups would also ``repack`` every pair panel, as exact stacks
    do, nor for BLAS, whose tile is one panel).  Plans depend on the
    machine's cores, never on a call's threads: results are the same at any
    thread count.
    """
    cores = blocking.cores
    extents = context.extents

    def idle(candidate, groups):
        return _split_idle_share(extents, candidate, blocks, groups, context.repeats, cores)

    if cores <= 1 or idle(tile, row_groups) <= BALANCE_TOLERANCE:
        return tile, row_groups
    options = [(candidate, row_groups_of(candidate, _tile_grid(extents, candidate)[2]))
               for candidate in context.other_heights(tile, blocking)]
    if not repack:
        options += [(tile, groups) for groups in range(row_groups + 1,
                                                       min(blocks, row_groups + cores - 1) + 1)]
    best, least = (tile, row_groups), idle(tile, row_groups) - BALANCE_TOLERANCE
    for candidate, groups in options:
        share = idle(candidate, groups)
        if share <= BALANCE_TOLERANCE:
            return candidate, groups
        if share < least:
            best, least = (candidate, groups), share
    return best


def _computed_columns(used, blocking):
    """Product columns the kernels compute for ``used`` columns: whole panels, the
    last one half wide where the set has half kernels and it holds at most NR / 2
    (the driver's panel_width, in _gemm.pxi)."""
    panel = blocking.nr
    full, rest = divmod(used, panel)
    if rest and blocking.half_panels and 2 * rest <= panel:
        return full * panel + panel // 2
    return (full + (rest > 0)) * panel


def _height_cost(tile, groups, context, rows, blocks, blocking):
    """Estimated time of a stack's items with tiles of ``tile``'s height and
    ``groups`` row groups, in multiply-adds: the kernels' work over the columns
    they compute (each tile's last panel rounded up, and every row's halo
    columns), plus HEIGHT_FILL_COST per element filled into tile buffers (once
    per tile and row group) and HEIGHT_WEIGHT_COST per weight read again by
    another tile, scaled by the share of the cores left idle."""
    extents = context.extents
    full, rest = divmod(extents[-2], tile.rows)
    lead = math.prod(extents[:-2])

    def computed(tile_rows):
        return _computed_columns((tile_rows - 1) * tile.row_stride + tile.cols, blocking)

    columns = lead * (full * computed(tile.rows) + (computed(rest) if rest else 0))
    tiles = lead * (full + (rest > 0))
    groups = _even_groups(blocks, groups)
    depth = context.cg * context.taps
    work = (columns * rows * depth
            + HEIGHT_FILL_COST * tiles * groups * context.cg * tile.buffer_channel
            + HEIGHT_WEIGHT_COST * tiles * rows * depth)
    return work * (1 + _idle_share(context.repeats * tiles * groups, blocking.cores))


def _cheapest_height(tile, context, row_groups_of, rows, blocks, blocking):
    """The tile of least _height_cost among ``tile`` and its other heights (another
    must be HEIGHT_MIN_GAIN cheaper).  A window tile's product rows are runs of its
    row stride, so the height sets how much of the last panel is waste (a 3x3 s2
    Conv on a 28x28 output, row stride 29: four rows use 115 of 120 computed
    columns, five rows 144 of 144), and with the row groups it sets how often the
    input is copied."""
    def cost(candidate):
        groups = row_groups_of(candidate, _tile_grid(context.extents, candidate)[2])
        return _height_cost(candidate, groups, context, rows, blocks, blocking)

    best, bar = tile, cost(tile) * (1 - HEIGHT_MIN_GAIN)
    for candidate in context.other_heights(tile, blocking):
        price = cost(candidate)
        if price < bar:
            best, bar = candidate, price
    return best


def _spread_stride(elements, itemsize, line=64):
    """``elements`` rounded up to whole cache lines, an odd number of them: the kernels
    read a B row of every channel in turn, and channels a multiple of many lines apart
    share a few cache sets (a 1-D row of 4102 floats: every channel in one L1 set)."""
    lines = -(-elements * itemsize // line)
    return (lines | 1) * line // itemsize


def _image_window_of(tile, extents, reach, cg, copies, work, blocking):
    """The image window of a stack (see IMAGE_WINDOW_MIN_COPIES), or None: ``tile``'s
    buffer layout stretched over the whole grid, whose channel holds every grid row
    (2-D; tiles span whole rows) or the whole row (1-D), a channel's planes padded
    to a stride that spreads the channels over the cache sets.  ``copies``:
    elements the stack's tiles would copy per image and group."""
    if len(extents) == 2:
        rows = extents[-2] + reach.spans[-2]
        row_stride = tile.row_stride
    else:
        rows = 1
        row_stride = _round_up(extents[-1], tile.cols) - tile.cols + tile.row_stride
    channel = _spread_stride(tile.buffer_planes * rows * row_stride, blocking.itemsize)
    elements = cg * channel + tile.panel  # the last panel may read a panel past the data
    if (work < IMAGE_WINDOW_MIN_WORK
            or copies < IMAGE_WINDOW_MIN_COPIES * blocking.cores * cg * channel
            or elements * blocking.itemsize > IMAGE_WINDOW_MAX_BYTES):
        return None
    return replace(tile, row_stride=row_stride, buffer_rows=rows, buffer_channel=channel,
                   operand=elements)


def _exact_pairs(stack, stride, tile, col_tiles, mg, depth, blocking):
    """Whether a stack runs exact: per-row panels of each pair of last-axis phases.

    A tile's product rows are runs of ``row_stride`` columns, so contiguous
    panels also compute the union grid's extra position and the buffer's halo
    on every row.  When the last axis has two phases of equal length, in whole
    half-panels, the pair kernels read the two phases' B rows one shift apart
    and compute each grid row's valid positions only; row blocks then hold
    whole phase pairs of one leading phase (see block_start).  ``depth``: the
    reduction (input channels per group x taps), at least blocking.exact_min_depth.
    """
    phases = stack[-1].phases
    panel = blocking.nr
    return (
        blocking.exact_stacks
        and not tile.gather
        # the two phases are then residues 0 and 1: outputs 2 t and 2 t + 1
        and stride == 2
        and len(phases) == 2
        and phases[0].count == phases[1].count
        # otherwise rows have no extra positions to save (k2s2), and the
        # contiguous panels measured up to 12% faster (unet3d)
        and tile.row_stride > phases[0].count
        and phases[0].count % (panel // 2) == 0
        and col_tiles == 1
        and tile.cols == stack[-1].extent
        and 2 * mg >= blocking.mr
        and depth >= blocking.exact_min_depth
    )


def conv_axis_group(in_size, kernel, stride, dilation, pad_begin, out_size):
    """The one phase of an axis of a Conv, as an AxisGroup.

    Output o reads input ``o * stride + k * dilation - pad_begin``, that is
    ``stride * (o + offset) + residue`` with ``(offset, residue) = divmod(k *
    dilation - pad_begin, stride)``: a stride-1 correlation over the input
    decimated by the stride, one plane per residue.  Taps that read only
    padding for every output contribute zeros and are left out (found by
    arithmetic, for any kernel length); the grid shift is the largest offset,
    so that the pattern's offsets are <= 0 as the tile buffers expect.
    """
    low = max(0, -(-(pad_begin - (out_size - 1) * stride) // dilation))
    high = min(kernel - 1, (in_size - 1 + pad_begin) // dilation)
    taps = tuple((k,) + divmod(k * dilation - pad_begin, stride) for k in range(low, high + 1))
    if not taps:
        return None
    shift = max(offset for _, offset, _ in taps)
    phase = Phase(0, out_size, tuple((k, offset) for k, offset, _ in taps))
    return AxisGroup(offsets=tuple(offset - shift for _, offset, _ in taps), phases=(phase,),
                     shifts=(shift,), first=shift, extent=out_size,
                     residues=tuple(residue for _, _, residue in taps))


def operator_axis_groups(geometry, transpose):
    """Per axis, the groups of phases of the operator (ConvTranspose or Conv), and
    whether some outputs get no tap (prefilled with the bias)."""
    if transpose:
        per_axis = geometry_phases(geometry)
        return ([axis_groups(phases) for phases in per_axis],
                any(not phase.taps for phases in per_axis for phase in phases))
    groups = [conv_axis_group(*axis) for axis in zip(
        geometry.input_shape, geometry.kernel_shape, geometry.strides, geometry.dilations,
        geometry.pads_begin, geometry.output_shape)]
    if any(group is None for group in groups):
        return [[] for _ in groups], True  # every tap reads only padding: bias only
    return [[group] for group in groups], False


def _transposed(rows, phases, identity, exact, blocking):
    """Whether a product-path stack runs the transposed kernels (gemm_t): rows in
    whole vectors (NR / 2 lanes), at least NR of them, of one phase (every Conv
    stack; ConvTranspose's stride-1 axes), read from a tile buffer.  (Residue
    pairs never do: their two stacks must cut their rows into the same blocks.)

    Measured on Zen 3 (AVX2), 1 thread, in separate processes against the
    standard orientation: Conv 3x3 layers 4-8% faster, 1-D k7 2%, batch-8 3x3
    ConvTranspose 0-3%; stacks of several phases (k16s8 vocoders, FCN heads,
    float64 k4s2) lost 3-7%, and stacks reading x in place (identity stacks,
    see IN_PLACE_MAX_CHANNEL_BYTES) up to 37% where channels lie a multiple of
    4 KiB apart: the broadcasts of one position from every channel then share
    an L1 set, where gemm_pack's panel copy keeps them contiguous.
    """
    lanes = blocking.nr // 2
    return (blocking.transposed and not exact and not identity and phases == 1
            and lanes > 0 and rows % lanes == 0 and rows >= blocking.nr)


@functools.lru_cache(maxsize=128)
def gemm_plan(geometry, batch, cg, mg, groups, blocking, transpose=True):
    """Plan the GEMM engine for ``batch`` images of ``groups`` groups.

    ``blocking`` (convt._dispatch.Blocking) holds the micro-kernel's block shape
    (MR rows x NR positions; 0 means one block of all rows and one im2col
    panel per tile: the BLAS backend), the accumulation item size and which
    kernel families the set has.  ``transpose``: ConvTranspose (else Conv,
    whose outputs form one phase per axis, read from the input decimated by
    the strides).
    """
    grouped, needs_fill = operator_axis_groups(geometry, transpose)
    ndim = geometry.ndim
    out_strides = geometry.strides if transpose else (1,) * ndim
    row_block, panel = blocking.mr, blocking.nr
    stacks = list(itertools.product(*grouped))
    min_items = -(-blocking.min_work_items // max(1, batch * groups * len(stacks)))
    stack_rows, axes_rows, offset_rows, buffer_rows, phase_rows = [], [], [], [], []
    residue_rows, tap_residue_rows = [], []
    kernel_index, item_counts, block_rows = [], [], []
    packed = operand = product = transposed_product = depth_max = tables = kernel_rows = 0
    # residue pairs run in one item: same tile rows, whole grid rows in one tile
    partner, forced_rows = {}, {}
    for a, b in _residue_pairs(stacks, out_strides, blocking).items():
        tile_a = _stack_tile(stacks[a], cg, min_items, blocking)[-1]
        tile_b = _stack_tile(stacks[b], cg, min_items, blocking)[-1]
        if tile_a.cols == stacks[a][-1].extent and tile_b.cols == stacks[b][-1].extent:
            partner[a] = b
            forced_rows[a] = forced_rows[b] = min(tile_a.rows, tile_b.rows)
    partner_of = {b: a for a, b in partner.items()}
    shared = {}  # a -> (row_groups, product columns) for its partner
    for index, stack in enumerate(stacks):
        phase_count = math.prod(len(group.phases) for group in stack)
        rows = phase_count * mg
        block = row_block or rows
        taps, chunk, extents, reach, tile = _stack_tile(stack, cg, min_items, blocking,
                                                        forced_rows.get(index))
        row_tiles, col_tiles, tiles = _tile_grid(extents, tile)
        exact = _exact_pairs(stack, out_strides[-1], tile, col_tiles, mg, cg * taps, blocking)
        if (exact and blocking.store_direct
                and _balanced_chunk(cg, blocking.pair_max_depth // taps) != chunk):
            # exact stacks storing into y take their own K chunks (pair_chunk_depth)
            paired = replace(blocking, max_depth=blocking.pair_max_depth)
            taps_s, chunk_s, extents_s, reach_s, tile_s = _stack_tile(
                stack, cg, min_items, paired, forced_rows.get(index))
            col_tiles_s = -(-extents_s[-1] // tile_s.cols)
            if (_exact_pairs(stack, out_strides[-1], tile_s, col_tiles_s, mg, cg * taps, blocking)
                    and _stores_pairs(blocking, chunk_s, cg)):
                chunk, tile = chunk_s, tile_s
                row_tiles, col_tiles, tiles = _tile_grid(extents, tile)
        # a 1x1 Conv on a small plane: the copied tile's transposed kernels serve it better
        small_transposable = (not transpose
                              and math.prod(geometry.input_shape) < CONV_IN_PLACE_MIN_POSITIONS
                              and _transposed(rows, phase_count, False, exact, blocking))
        identity = (
            taps == 1
            and all(group.offsets == (0,) and group.first == 0 for group in stack)
            and tuple(extents) == geometry.input_shape
            and (transpose or set(geometry.strides) == {1})  # Conv's strides decimate x
            # BLAS packs its operands itself: x is its im2col
            and (not row_block
                 or ((math.prod(geometry.input_shape) * blocking.itemsize
                      < IN_PLACE_MAX_CHANNEL_BYTES or not (transpose or blocking.packs_b))
                     and not small_transposable))
        )
        # residue pairs share their row blocks (one item scatters both products)
        in_pair = index in partner or index in partner_of
        transposed = not in_pair and _transposed(rows, phase_count, identity, exact, blocking)
        if transposed:
            block = panel  # gemm_t blocks: one or two vectors of rows
        # product rows held per column: transposed stacks keep both orientations
        held = rows * (2 if transposed else 1)
        if not exact and row_block and index not in forced_rows:
            tile = _product_sized(tile, extents, reach, chunk, taps, rows, held,
                                  -(-rows // block), cg, blocking)
            row_tiles, col_tiles, tiles = _tile_grid(extents, tile)
        if not exact and row_block:
            tile = _shared_gaps(tile, stack[-1], reach.spans[-1], geometry.input_shape[-1],
                                1 if transpose else geometry.strides[-1], chunk)
        depth_max = max(depth_max, chunk * taps)
        if exact:
            # segments: one leading phase's rows (mg pairs); blocks of whole pairs
            segment_rows, unit = 2 * mg, 2
        elif transposed:
            segment_rows, unit = rows, panel // 2
        else:
            segment_rows, unit = rows, 1
        segment_blocks = -(-segment_rows // block)
        blocks = segment_blocks * (rows // segment_rows)
        starts = _block_starts(rows, segment_rows, segment_blocks, unit)
        store_direct = exact and _stores_pairs(blocking, chunk, cg)
        # split the row blocks of a tile into groups, for a product buffer of
        # bounded size and enough work items to share; each group repeats the
        # tile's panel packing, and its buffer fill unless the thread ran the
        # tile's previous group (fill_once, a single K chunk), so groups keep
        # >= 8 blocks.
        # Stacks storing straight into y have no product buffer, and a second
        # fill would cost more (sci2d_f64: 9% of the time in fills).
        def row_groups_of(tile, tiles):
            product_groups = 1 if store_direct else -(
                -held * tile.columns * blocking.itemsize // blocking.product_bytes)
            groups = max(min(-(-min_items // tiles), blocks // 8), product_groups)
            return max(1, min(blocks, groups)) if row_block else 1

        context = _TileContext(extents, reach, chunk, taps, cg, batch * groups, stack[-1],
                               geometry.input_shape[-1],
                               1 if transpose else geometry.strides[-1])
        if (len(stacks) == 1 and index not in forced_rows and row_block and not exact
                and not transposed and not identity and not tile.gather and col_tiles == 1
                and ndim >= 2):
            tile = _cheapest_height(tile, context, row_groups_of, rows, blocks, blocking)
            row_tiles, col_tiles, tiles = _tile_grid(extents, tile)
        row_groups = row_groups_of(tile, tiles)
        if len(stacks) == 1 and index not in forced_rows:
            tile, row_groups = _balanced_items(tile, row_groups, context, row_groups_of, blocks,
                                               exact or not row_block, blocking)
            row_tiles, col_tiles, tiles = _tile_grid(extents, tile)
        if index in partner_of:
            # the partner's item runs this stack too: the same split of rows
            row_groups = shared[partner_of[index]][0]
        row_groups = _even_groups(blocks, row_groups)
        group_blocks = -(-blocks // row_groups)
        item_count = 0 if index in partner_of else tiles * row_groups
        window = None
        if (len(stacks) == 1 and row_block and not exact and not identity and not tile.gather
                and ndim <= 2 and (ndim == 1 or col_tiles == 1)):
            window = _image_window_of(tile, extents, reach, cg,
                                      tiles * row_groups * cg * tile.buffer_channel,
                                      batch * groups * rows * cg * taps * math.prod(extents),
                                      blocking)
        buffer = window or tile  # the layout of the tile buffer (the kernels' B offsets)
        stack_rows.append(dict(
            taps=taps, phases=phase_count, rows=rows, items=item_count, columns=tile.columns,
            chunk=chunk, sum_block=blocking.sum_block(cg * taps, cg if transpose else cg * taps,
                                                      chunk * taps),
            tap_start=len(offset_rows),
            phase_start=len(phase_rows) // ndim, weight_start=packed, group_size=rows * cg * taps,
            kernel_start=kernel_rows, table_start=tables, identity=int(identity),
            blocks=blocks, block_start=len(block_rows), panel=tile.panel,
            tile_rows=tile.rows, tile_cols=tile.cols, row_tiles=row_tiles,
            col_tiles=col_tiles, row_stride=buffer.row_stride, buffer_rows=buffer.buffer_rows,
            buffer_planes=tile.buffer_planes, buffer_channel=buffer.buffer_channel,
            offset_start=len(buffer_rows), gather=int(tile.gather),
            residue_start=len(residue_rows) // ndim, row_groups=row_groups,
            group_blocks=group_blocks,
            siblings=len(stack[-1].phases),
            interleave=int(1 < out_strides[-1] == len(stack[-1].phases) <= MAX_SIBLINGS),
            exact=int(exact), store_direct=int(store_direct),
            partner=partner.get(index, -1), transposed=int(transposed),
            image_window=int(window is not None),
        ))
        block_rows.extend(starts)
        axes_rows.extend((group.first, group.extent, span)
                         for group, span in zip(stack, reach.spans))
        for choice in itertools.product(*(range(len(group.offsets)) for group in stack)):
            offset_rows.append([group.offsets[j] for group, j in zip(stack, choice)])
            tap_residue_rows.append([group.residues[j] if group.residues else 0
                                     for group, j in zip(stack, choice)])
        for residues in itertools.product(*(group.residue_values for group in stack)):
            residue_rows.extend(residues)
        if panel:
            buffer_rows.extend(_buffer_offsets(stack, reach, buffer, chunk))
        for phase_choice in itertools.product(*(range(len(group.phases)) for group in stack)):
            phase_rows.extend(
                (group.phases[p].residue, group.shifts[p], group.phases[p].count)
                for group, p in zip(stack, phase_choice)
            )
            for tap_choice in itertools.product(*(range(len(group.offsets)) for group in stack)):
                kernel_index.append([
                    group.phases[p].taps[t][0]
                    for group, p, t in zip(stack, phase_choice, tap_choice)
                ])
        kernel_rows += phase_count * taps
        tables += rows * taps
        packed += rows * cg * taps * groups
        operand = max(operand, buffer.operand)
        # a group's rows: group_blocks blocks of at most `block` rows each; a
        # pair's item holds both products, one after the other
        group_rows = min(rows, group_blocks * block)
        if index in partner:
            shared[index] = (row_groups, tile.columns)
        columns = tile.columns + (shared[partner_of[index]][1] if index in partner_of else 0)
        if not store_direct:  # stacks storing into y use no product buffer
            product = max(product, group_rows * columns)
        if transposed:
            transposed_product = max(transposed_product, group_rows * tile.columns)
        item_counts.append(item_count)
    # Stacks of one group write interleaved outputs (stride phases) into the
    # same cache lines: items running at the same time should not be two
    # stacks of one group, or the lines bounce between cores.  So groups vary
    # faster than stacks (grouped2d: the scatter went from 45% of the time).
    work = [
        (image, group, stack, item)
        for image in range(batch)
        for stack, count in enumerate(item_counts)
        for group in range(groups)
        for item in range(count)
    ]
    stack_dtype = _records.GEMM_STACK
    return GemmPlan(
        stacks=_records.records(stack_dtype, [tuple(row[name] for name in stack_dtype.names)
                                              for row in stack_rows]),
        stack_axes=_records.records(_records.STACK_AXIS, axes_rows, (len(stacks), ndim)),
        tap_offsets=_records.frozen(np.reshape(offset_rows, (-1, ndim))),
        tap_residues=_records.frozen(np.reshape(tap_residue_rows, (-1, ndim))),
        residues=_records.frozen(np.reshape(residue_rows or [0] * ndim, (-1, ndim))),
        buffer_offsets=_records.frozen(buffer_rows or [0]),
        phases=_records.records(_records.PHASE_AXIS, phase_rows, (-1, ndim)),
        kernel_index=_records.frozen(np.reshape(kernel_index, (-1, ndim))),
        items=_records.records(_records.WORK_ITEM, work),
        block_starts=_records.frozen(block_rows),
        panel_offsets=_records.frozen([k * panel for k in range(max(1, depth_max))]),
        packed_size=packed,
        table_size=max(1, tables),
        operand_capacity=operand,
        product_capacity=product,
        transposed_capacity=transposed_product,
        # + a packed B panel (two for the pair kernels), and room to align it to 64 bytes
        workspace_per_thread=(operand + product + transposed_product + 2 * depth_max * panel
                              + 64 // blocking.itemsize),
        needs_fill=needs_fill,
    )


@dataclass(frozen=True)
class DirectPlan:
    """Tables of the direct engine, read-only.  Entry e of axis a is a stride
    phase (ConvTranspose; Conv's one phase on leading axes) or, on Conv's last
    axis, the taps reading one input residue of the decimated row."""

    layout: np.ndarray          # (1,) DIRECT_LAYOUT
    tap_count: np.ndarray       # (ndim, max entries)
    tap_kernel: np.ndarray      # (ndim, max entries, max taps)
    tap_offset: np.ndarray      # (ndim, max entries, max taps): decimated input offsets
    tap_residue: np.ndarray     # (ndim, max entries, max taps): input residues (Conv)
    kernel_strides: np.ndarray  # (ndim,): row-major strides of the kernel's positions


def _direct_entries(geometry, transpose):
    """Per axis, the entries of the direct engine's tap tables: lists of
    (k, offset, residue) taps (see DirectPlan)."""
    if transpose:
        return [[[(k, offset, 0) for k, offset in phase.taps] for phase in phases]
                for phases in geometry_phases(geometry)]
    entries = []
    for axis, group in enumerate(operator_axis_groups(geometry, False)[0]):
        if not group:
            return None  # every tap reads only padding
        phase = group[0].phases[0]
        taps = [(k, offset, residue) for (k, offset), residue in zip(phase.taps,
                                                                      group[0].residues)]
        if axis < geometry.ndim - 1:
            entries.append([taps])
        else:
            entries.append([[tap for tap in taps if tap[2] == value]
                            for value in group[0].residue_values])
    return entries


@functools.lru_cache(maxsize=128)
def direct_plan(geometry, batch, out_channels, max_sources, interleave, masked_stores,
                transpose=True, channel_vectors=False, converted=False, band_rows=0,
                stream_output=False):
    """Plan the direct engine: per-axis tap tables, output rows, workspace layout.

    ``interleave``: stride-2 output rows are written with the interleaving
    store (y's last axis is contiguous and the storage is the accumulation type).
    ``transpose``: ConvTranspose, else Conv (its last axis's entries are input
    residues summed into one output phase; rows are read decimated).
    ``channel_vectors``: a row is every channel of (image, leading outputs),
    summed with the channels as vector lanes (channels-last depthwise);
    ``converted``: its source rows are converted to the accumulation type.
    ``band_rows``: stencil blocks of up to this many band-axis rows (Conv with one
    input channel per group; see convt/_stencil.pxi).
    ``stream_output``: interleaved rows are stored past the caches (see
    convt._dispatch.STREAM_OUTPUT_MIN_BYTES).
    """
    ndim = geometry.ndim
    entries = _direct_entries(geometry, transpose) or [[[]] for _ in range(ndim)]
    max_entries = max(len(axis) for axis in entries)
    max_taps = max(1, max(len(taps) for axis in entries for taps in axis))
    count = np.zeros((ndim, max_entries), dtype=np.intp)
    kernel = np.zeros((ndim, max_entries, max_taps), dtype=np.intp)
    offset = np.zeros((ndim, max_entries, max_taps), dtype=np.intp)
    residue = np.zeros((ndim, max_entries, max_taps), dtype=np.intp)
    for a, axis in enumerate(entries):
        for e, taps in enumerate(axis):
            count[a, e] = len(taps)
            for j, tap in enumerate(taps):
                kernel[a, e, j], offset[a, e, j], residue[a, e, j] = tap
    out_last, in_last = geometry.output_shape[-1], geometry.input_shape[-1]
    kernel_strides = np.array([math.prod(geometry.kernel_shape[a + 1:]) for a in range(ndim)],
                              dtype=np.intp)
    tables = (_records.frozen(count), _records.frozen(kernel), _records.frozen(offset),
              _records.frozen(residue), _records.frozen(kernel_strides))
    if band_rows:
        return DirectPlan(_stencil_layout(geometry, batch, out_channels, max_sources,
                                          max_entries, max_taps, band_rows), *tables)
    if channel_vectors:
        return DirectPlan(_channel_layout(geometry, batch, out_channels, max_sources,
                                          max_entries, max_taps, transpose, converted), *tables)
    if transpose:
        phase_length = max(phase.count for phase in geometry_phases(geometry)[-1])
        row_buffers = len(entries[-1]) * phase_length
        x_row = in_last
    else:
        # one output phase; each source holds one decimated sub-row per residue
        phase_length = row_buffers = out_last
        decimation = geometry.strides[-1]
        x_row = len(entries[-1]) * -(-in_last // decimation) if decimation > 1 else in_last
    layout = _records.record(
        _records.DIRECT_LAYOUT,
        rows=batch * out_channels * math.prod(geometry.output_shape[:-1]),
        max_stride=max_entries,
        max_taps=max_taps,
        phase_length=phase_length,
        max_sources=max_sources,
        x_rows=row_buffers,
        x_row=x_row,
        weights=row_buffers + max_sources * x_row,
        floats=row_buffers + max_sources * (x_row + max_taps),
        # out_index and tap odometer (ndim each), weight offsets, two source-pointer lists
        ints=2 * ndim + 3 * max_sources,
        interleave=int(interleave),
        masked_stores=int(masked_stores),
        transpose=int(transpose),
        channels=0,
        band_rows=0,
        stream_output=int(interleave and stream_output),
    )
    return DirectPlan(layout, *tables)


def _channel_layout(geometry, batch, channels, max_sources, max_entries, max_taps, transpose,
                    converted):
    """The direct engine's layout for channels-last rows: a thread holds one output
    row of (position, channel) sums and, when x is converted, a batch of source rows
    within CHANNEL_ROW_MAX elements; rows are read in place otherwise."""
    from ._dispatch import CHANNEL_ROW_MAX

    ndim = geometry.ndim
    out_row = geometry.output_shape[-1] * channels
    x_row = geometry.input_shape[-1] * channels
    if converted:
        max_sources = max(1, min(max_sources, CHANNEL_ROW_MAX // max(1, x_row)))
    floats = out_row + (max_sources * x_row if converted else 0)
    return _records.record(
        _records.DIRECT_LAYOUT,
        rows=batch * math.prod(geometry.output_shape[:-1]),
        max_stride=max_entries,
        max_taps=max_taps,
        phase_length=geometry.output_shape[-1],
        max_sources=max_sources,
        x_rows=out_row,
        x_row=x_row,
        weights=floats,
        floats=floats,
        ints=2 * ndim + 3 * max_sources,
        interleave=0,
        masked_stores=0,
        transpose=int(transpose),
        channels=channels,
        band_rows=0,
        stream_output=0,
    )


def _stencil_layout(geometry, batch, out_channels, max_sources, max_entries, max_taps,
                    band_rows):
    """The direct engine's layout for stencil blocks: ``rows`` counts blocks of up to
    ``band_rows`` rows of the band axis (1-D: one row each); a thread holds a zero
    row (what input rows outside the input read) and one kernel plane's weights,
    and its source pointers hold a block's input rows."""
    ndim = geometry.ndim
    kernel_rows = geometry.kernel_shape[-2] if ndim >= 2 else 1
    sources = max(max_sources, band_rows + kernel_rows - 1)
    leading = geometry.output_shape[:-1]
    blocks = math.prod(leading[:-1]) * -(-leading[-1] // band_rows) if ndim >= 2 else 1
    zero_row = geometry.input_shape[-1]
    weights = kernel_rows * geometry.kernel_shape[-1]
    return _records.record(
        _records.DIRECT_LAYOUT,
        rows=batch * out_channels * blocks,
        max_stride=max_entries,
        max_taps=max_taps,
        phase_length=geometry.output_shape[-1],
        max_sources=sources,
        x_rows=0,
        x_row=zero_row,
        weights=zero_row,
        floats=zero_row + weights,
        ints=2 * ndim + 3 * sources + 2,  # ... then the block state (_stencil.pxi)
        interleave=0,
        masked_stores=0,
        transpose=0,
        channels=0,
        band_rows=band_rows,
        stream_output=0,
    )
