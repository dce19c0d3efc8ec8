"""Typed records of the plan-to-kernel interface.

Plans are NumPy structured arrays whose dtypes mirror, field for field, the
structs of ``convt/_kernels.pxd``: the compiled drivers read them through
pointers, Python builds and tests them by field name.  Every field is an
``intp`` (``Py_ssize_t`` in C), so the layouts agree whenever the names and
their order do; ``convt._kernels`` checks that when it is imported.  Planned
arrays are read-only: a cached plan cannot be edited by accident.
"""

from __future__ import annotations

import numpy as np


def _record(*fields):
    return np.dtype([(name, np.intp) for name in fields])


# One spatial axis of a problem: sizes, the output stride (ConvTranspose's
# stride; 1 for Conv) and the input decimation (Conv's stride; 1 for
# ConvTranspose).
AXIS = _record("in_size", "out_size", "stride", "decimation")

# The scalars of a problem: storage type, batch, groups, channels per group.
PROBLEM = _record("ndim", "storage", "batch", "groups", "cg", "mg", "out_channels")

# One stack of the GEMM engine: stride phases whose taps read the same input
# offsets up to a shift, computed as one GEMM per tile (see _plan.py).
GEMM_STACK = _record(
    "taps",            # taps per phase (J)
    "phases",          # stacked phases (P)
    "rows",            # product rows: P x output channels of a group
    "items",           # work items per image and group (0: run by its partner)
    "columns",         # product columns of a tile, whole panels
    "chunk",           # input channels per K chunk
    "sum_block",       # depth steps per blocked sum
    "tap_start",       # first row of this stack in tap_offsets
    "phase_start",     # first row of this stack in phases
    "weight_start",    # first packed weight (group 0)
    "group_size",      # packed weights per group
    "kernel_start",    # first row of this stack in kernel_index
    "table_start",     # first entry of this stack's tap table (weight packing)
    "identity",        # 1: the im2col of a tile is the input itself (BLAS)
    "blocks",          # row blocks of at most MR rows (1 for BLAS)
    "block_start",     # first entry of this stack in block_starts
    "panel",           # positions per micro-kernel call (the whole tile for BLAS)
    "tile_rows",       # grid rows (axis ndim - 2) per tile
    "tile_cols",       # grid columns (last axis) per tile
    "row_tiles",       # tiles along axis ndim - 2
    "col_tiles",       # tiles along the last axis
    "row_stride",      # product (and buffer) columns per tile row
    "buffer_rows",     # buffer rows per plane: tile rows plus the taps' span
    "buffer_planes",   # leading-axis planes of a buffer channel
    "buffer_channel",  # buffer elements per input channel
    "offset_start",    # first entry of this stack in buffer_offsets
    "gather",          # 1: the tile is gathered tap by tap (im2col) instead of copied once
    "residue_start",   # first row of this stack's window planes in residues (Conv)
    "row_groups",      # groups the row blocks of a tile are split into
    "group_blocks",    # row blocks per group
    "siblings",        # stacked phases of the last axis (adjacent rows)
    "interleave",      # 1: they are all the residues of the last axis
    "exact",           # 1: pair kernels over each pair of last-axis phases
    "store_direct",    # 1: exact, and its pair kernels store straight into y
    "partner",         # stack of the other stride-2 residue run by the same items, or -1
    "transposed",      # 1: the product is computed transposed by gemm_t (blocks of NR or NR / 2 rows)
    "image_window",    # 1: the thread's tile buffer holds the whole image's window (buffer_* and
                       #    row_stride are its), filled once per image and group
)

# Per stack and axis: first grid position, grid extent, span of the taps.
STACK_AXIS = _record("first", "extent", "span")

# Per stacked phase and axis: residue, grid shift, output count.
PHASE_AXIS = _record("residue", "shift", "count")

# One GEMM work item: a tile of one stack (and its partner) of one image and group.
WORK_ITEM = _record("image", "group", "stack", "tile")

# Per-thread workspace of the GEMM engine, in accumulation elements, and the
# choices the drivers obey (from convt._dispatch.Decision).
GEMM_LAYOUT = _record(
    "operand",         # tile buffer (or im2col operand) capacity
    "product",         # product capacity of one work item
    "per_thread",      # workspace elements per thread
    "blas",            # 1: multiply through scipy's BLAS (im2col operands)
    "pack_min_blocks", # pack B panels for items of at least this many row blocks (0: never)
    "half_panels",     # 1: half-width kernels for last panels of <= NR / 2 positions
    "masked_stores",   # 1: stride-2 even stores with the set's masked stores
    "input_is_tile",   # 1: x holds accumulation-type values, spatially C-contiguous
    "pair_pack_min_blocks",  # exact stacks: pack full pair panels read by this many blocks (0: never)
    "buffer_pack_min_blocks",  # pack_min_blocks for B panels read from a tile buffer (not x)
    "transposed",      # transposed product capacity of one work item (gemm_t stacks)
    "stream_output",   # 1: interleaved output rows go past the caches (interleave_stream)
)

# The direct engine's plan: table sizes and one thread's workspace layout.
DIRECT_LAYOUT = _record(
    "rows",            # output rows (batch x channels x leading output positions)
    "max_stride",      # second axis of the tap tables
    "max_taps",        # third axis of the tap tables
    "phase_length",    # row buffer elements per last-axis phase
    "max_sources",     # source rows summed per row-kernel call
    "x_rows",          # offset of the converted input rows in a thread's workspace
    "x_row",           # elements per converted input row (Conv: its decimated sub-rows)
    "weights",         # offset of one phase's gathered weights
    "floats",          # accumulation elements per thread
    "ints",            # intp elements per thread
    "interleave",      # 1: stride-2 rows are written with the interleaving store
    "masked_stores",   # 1: stride-2 even stores with the set's masked stores
    "transpose",       # 1: ConvTranspose; 0: Conv (last-axis entries are input residues)
    "channels",        # >0: rows are every channel of a position run, these many lanes
    "band_rows",       # >0: stencil blocks of up to this many rows of the band axis
    "stream_output",   # 1: interleaved output rows go past the caches (interleave_stream)
)

RECORDS = {
    "Axis": AXIS,
    "Problem": PROBLEM,
    "GemmStack": GEMM_STACK,
    "StackAxis": STACK_AXIS,
    "PhaseAxis": PHASE_AXIS,
    "WorkItem": WORK_ITEM,
    "GemmLayout": GEMM_LAYOUT,
    "DirectLayout": DIRECT_LAYOUT,
}


def records(dtype, rows, shape=None):
    """A read-only structured array of ``dtype`` from a list of field tuples."""
    array = np.array([tuple(row) for row in rows], dtype=dtype)
    if shape is not None:
        array = array.reshape(shape)
    array.flags.writeable = False
    return array


def record(dtype, **fields):
    """A read-only one-element structured array of ``dtype`` from named fields."""
    missing = set(dtype.names) - set(fields)
    extra = set(fields) - set(dtype.names)
    if missing or extra:
        raise TypeError(f"record fields: missing {sorted(missing)}, unknown {sorted(extra)}")
    return records(dtype, [tuple(fields[name] for name in dtype.names)], (1,))


def frozen(array):
    """``array`` (intp, C order) made read-only, for plan tables."""
    array = np.ascontiguousarray(array, dtype=np.intp)
    array.flags.writeable = False
    return array
