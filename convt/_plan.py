"""From a resolved geometry to the integer tables the kernels run on.

Along one axis, output ``o = r + t * stride`` (residue ``r``) receives the taps
``k`` with ``(r + pad_begin - k * dilation) % stride == 0``, each reading input
``i = t + (r + pad_begin - k * dilation) // stride``: a stride-1 correlation
over the un-expanded input.  Residues whose taps read the same offsets up to a
common shift form an *axis group*; in N-D, a *stack* is one axis group per axis
and becomes one GEMM per tile whose rows are (phase, output channel) and whose
columns are positions ``u = t + shift`` of a grid shared by the stacked phases.

Plans depend on shapes and attributes only, never on the thread count, so the
work decomposition, and thus every rounding, is the same for every
``num_threads``.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

# Elements of the per-thread gather and product buffers of the GEMM engine
# (together 512 KiB in float32): sized to stay in the L2 cache, independent of
# the volume, so workspace never grows with the input.
TILE_BUDGET = 2**17
# Longest K chunk (rows of the gathered tile) before splitting input channels.
MAX_DEPTH = 4096
MIN_TILE = 16
# Columns of GemmPlan.stacks (see the STACK_* enum in convt/_kernels.pyx).
STACK_FIELDS = 13
STACK_WEIGHTS, STACK_ROWS, STACK_ROW_BLOCK = 7, 10, 11


@dataclass(frozen=True)
class Phase:
    """Outputs ``o = residue + t * stride`` for ``t < count``; each tap ``(k, offset)`` reads ``i = t + offset``."""

    residue: int
    count: int
    taps: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class AxisGroup:
    """Phases of one axis whose tap offsets agree up to a shift (``u = t + shift``)."""

    offsets: tuple[int, ...]
    phases: tuple[Phase, ...]
    shifts: tuple[int, ...]
    first: int
    extent: int


def axis_phases(in_size, kernel, stride, dilation, pad_begin, out_size):
    """The stride phases of one axis, in residue order."""
    phases = []
    for residue in range(min(stride, out_size)):
        base = residue + pad_begin
        taps = tuple(
            (k, (base - k * dilation) // stride)
            for k in range(kernel)
            if (base - k * dilation) % stride == 0
        )
        phases.append(Phase(residue, -(-(out_size - residue) // stride), taps))
    return tuple(phases)


def axis_groups(phases):
    """Group phases by their tap pattern; phases without taps belong to no group."""
    members = {}
    for phase in phases:
        if phase.taps:
            shift = phase.taps[0][1]
            pattern = tuple(offset - shift for _, offset in phase.taps)
            members.setdefault(pattern, []).append((phase, shift))
    groups = []
    for pattern, entries in members.items():
        first = min(shift for _, shift in entries)
        end = max(shift + phase.count for phase, shift in entries)
        groups.append(
            AxisGroup(
                offsets=pattern,
                phases=tuple(phase for phase, _ in entries),
                shifts=tuple(shift for _, shift in entries),
                first=first,
                extent=end - first,
            )
        )
    return tuple(groups)


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


def _intp(values, shape=None):
    array = np.array(values, dtype=np.intp)
    if shape is not None:
        array = array.reshape(shape)
    return np.ascontiguousarray(array)


@dataclass(frozen=True)
class GemmPlan:
    """Tables of the GEMM engine (see convt._kernels.run_gemm)."""

    stacks: np.ndarray          # (S, STACK_FIELDS)
    stack_axes: np.ndarray      # (S, ndim, 2)
    tap_offsets: np.ndarray     # (total taps, ndim)
    phases: np.ndarray          # (total phases, ndim, 3)
    kernel_index: tuple         # per stack: (P, J, ndim) kernel coordinates
    items: np.ndarray           # (n_items, 4)
    packed_size: int
    gather_capacity: int
    workspace_per_thread: int
    needs_fill: bool            # some outputs get no tap: prefill with the bias


def _tile_shape(rows, taps, cg, positions, panel):
    """Input channels per K chunk and positions per tile (a whole number of panels)."""
    chunk = max(1, min(cg, MAX_DEPTH // taps))
    depth = chunk * taps
    width = TILE_BUDGET // (depth + rows)
    quantum = panel or MIN_TILE
    width = max(quantum, width - width % quantum)
    if width >= positions:
        width = -(-positions // quantum) * quantum if panel else positions
    return chunk, width


def _round_up(value, quantum):
    return -(-value // quantum) * quantum


@functools.lru_cache(maxsize=128)
def gemm_plan(geometry, batch, cg, mg, groups, row_block, panel):
    """Plan the GEMM engine for ``batch`` images of ``groups`` groups.

    ``row_block`` (MR) and ``panel`` (NR) are the micro-kernel's block shape;
    0 means one block of all rows and one panel per tile (the BLAS backend).
    """
    per_axis = geometry_phases(geometry)
    grouped = [axis_groups(phases) for phases in per_axis]
    needs_fill = any(not phase.taps for phases in per_axis for phase in phases)
    ndim = geometry.ndim
    stack_rows, axes_rows, offset_rows, phase_rows, kernel_index, items = [], [], [], [], [], []
    packed = gather = product = 0
    for index, stack in enumerate(itertools.product(*grouped)):
        taps = math.prod(len(group.offsets) for group in stack)
        phase_count = math.prod(len(group.phases) for group in stack)
        positions = math.prod(group.extent for group in stack)
        rows = phase_count * mg
        block = row_block or rows
        padded_rows = _round_up(rows, block)
        chunk, width = _tile_shape(rows, taps, cg, positions, panel)
        panel_width = panel or width
        identity = (
            taps == 1
            and all(group.offsets == (0,) and group.first == 0 for group in stack)
            and tuple(group.extent for group in stack) == geometry.input_shape
        )
        stack_rows.append(
            [taps, phase_count, positions, width, chunk, len(offset_rows), len(phase_rows),
             packed, padded_rows * cg * taps, int(identity), padded_rows, block, panel_width]
        )
        axes_rows.append([[group.first, group.extent] for group in stack])
        for choice in itertools.product(*(range(len(group.offsets)) for group in stack)):
            offset_rows.append([group.offsets[j] for group, j in zip(stack, choice)])
        kernels = np.empty((phase_count, taps, ndim), dtype=np.intp)
        for rho, phase_choice in enumerate(
            itertools.product(*(range(len(group.phases)) for group in stack))
        ):
            phase_rows.append(
                [
                    [group.phases[p].residue, group.shifts[p], group.phases[p].count]
                    for group, p in zip(stack, phase_choice)
                ]
            )
            for j, tap_choice in enumerate(
                itertools.product(*(range(len(group.offsets)) for group in stack))
            ):
                kernels[rho, j] = [
                    group.phases[p].taps[t][0]
                    for group, p, t in zip(stack, phase_choice, tap_choice)
                ]
        kernel_index.append(kernels)
        packed += padded_rows * cg * taps * groups
        gather = max(gather, chunk * taps * _round_up(width, panel_width))
        product = max(product, padded_rows * _round_up(width, panel_width))
        tiles = -(-positions // width)
        items.append((index, tiles))
    work = [
        (image, group, stack, tile)
        for image in range(batch)
        for group in range(groups)
        for stack, tiles in items
        for tile in range(tiles)
    ]
    return GemmPlan(
        stacks=_intp(stack_rows, (len(stack_rows), STACK_FIELDS)),
        stack_axes=_intp(axes_rows, (len(axes_rows), ndim, 2)),
        tap_offsets=_intp(offset_rows, (len(offset_rows), ndim)),
        phases=_intp(phase_rows, (len(phase_rows), ndim, 3)),
        kernel_index=tuple(kernel_index),
        items=_intp(work, (len(work), 4)),
        packed_size=packed,
        gather_capacity=gather,
        workspace_per_thread=gather + product,
        needs_fill=needs_fill,
    )


@dataclass(frozen=True)
class DirectPlan:
    """Tables of the direct engine (see convt._kernels.run_direct)."""

    tap_count: np.ndarray       # (ndim, max phases)
    tap_kernel: np.ndarray      # (ndim, max phases, max taps)
    tap_offset: np.ndarray      # (ndim, max phases, max taps)
    phase_length: int
    row_buffers: int            # accumulation elements for one output row's phases
    rows: int


@functools.lru_cache(maxsize=128)
def direct_plan(geometry, batch, out_channels):
    """Plan the direct engine: per-axis tap tables and the output row count."""
    per_axis = geometry_phases(geometry)
    ndim = geometry.ndim
    max_phases = max(len(phases) for phases in per_axis)
    max_taps = max(1, max(len(phase.taps) for phases in per_axis for phase in phases))
    count = np.zeros((ndim, max_phases), dtype=np.intp)
    kernel = np.zeros((ndim, max_phases, max_taps), dtype=np.intp)
    offset = np.zeros((ndim, max_phases, max_taps), dtype=np.intp)
    for a, phases in enumerate(per_axis):
        for phase in phases:
            count[a, phase.residue] = len(phase.taps)
            for j, (k, off) in enumerate(phase.taps):
                kernel[a, phase.residue, j] = k
                offset[a, phase.residue, j] = off
    last = per_axis[-1]
    phase_length = max(phase.count for phase in last)
    return DirectPlan(
        tap_count=count,
        tap_kernel=kernel,
        tap_offset=offset,
        phase_length=phase_length,
        row_buffers=len(last) * phase_length,
        rows=batch * out_channels * math.prod(geometry.output_shape[:-1]),
    )
