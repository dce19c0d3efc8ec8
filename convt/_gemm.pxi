# GEMM engine driver.
#
# A work item is one tile of one stack for one image and group (see
# convt/_plan.py): for each K chunk of input channels it copies the tile's
# input once into a zero-padded buffer, runs the kernel set's micro-kernels on
# it against the packed weights (tap j of product column q is
# buffer[q + offsets[j]]: no im2col), then writes the product rows to their
# output positions.  Exact stacks' pair kernels may store into y themselves.
# The BLAS path gathers an im2col operand instead and calls scipy's GEMM.


cdef inline Py_ssize_t block_start(const Gemm* g, const GemmStack* stack,
                                   Py_ssize_t block) noexcept nogil:
    """First row of a row block (block == blocks: the stack's rows); blocks never
    straddle a leading phase in exact stacks (see convt._plan)."""
    return g.block_starts[stack.block_start + block]


cdef inline Py_ssize_t row_phase(Py_ssize_t row, Py_ssize_t mg, Py_ssize_t siblings,
                                 Py_ssize_t* m) noexcept nogil:
    """Rows are ordered (leading-axis phase, output channel, last-axis phase), so the
    stride phases of one output row are adjacent.  Return the stacked phase index
    of ``row`` (C order over axes) and set ``m`` to its output channel."""
    cdef Py_ssize_t rest = row // siblings
    m[0] = rest % mg
    return (rest // mg) * siblings + row % siblings


# scipy's BLAS, bound on first use (importing scipy costs 0.4-1.5 s; only the
# BLAS kernel set needs it).
ctypedef void (*sgemm_t)(char*, char*, int*, int*, int*, float*, float*, int*, float*, int*,
                         float*, float*, int*) noexcept nogil
ctypedef void (*dgemm_t)(char*, char*, int*, int*, int*, double*, double*, int*, double*,
                         int*, double*, double*, int*) noexcept nogil
cdef sgemm_t blas_sgemm = NULL
cdef dgemm_t blas_dgemm = NULL


cdef void bind_blas() except *:
    global blas_sgemm, blas_dgemm
    if blas_sgemm != NULL:
        return
    from scipy.linalg import cython_blas

    capsules = cython_blas.__pyx_capi__
    blas_dgemm = <dgemm_t>PyCapsule_GetPointer(capsules["dgemm"],
                                               PyCapsule_GetName(capsules["dgemm"]))
    blas_sgemm = <sgemm_t>PyCapsule_GetPointer(capsules["sgemm"],
                                               PyCapsule_GetName(capsules["sgemm"]))


cdef inline void blas_gemm(int m, int n, int k, acc_t* a, int lda, acc_t* b,
                           int ldb, acc_t beta, acc_t* c, int ldc) noexcept nogil:
    """Column-major C = A B^T + beta C (row-major callers pass operands swapped)."""
    cdef char no_trans = b'N'
    cdef char trans = b'T'
    cdef acc_t one = 1
    if acc_t is float:
        blas_sgemm(&no_trans, &trans, &m, &n, &k, &one, a, &lda, b, &ldb, &beta, c, &ldc)
    else:
        blas_dgemm(&no_trans, &trans, &m, &n, &k, &one, a, &lda, b, &ldb, &beta, c, &ldc)


# Per-thread state kept in the scratch row after the tile's ndim leading grid
# coordinates: [0, 3) what an image-window stack's buffer holds (see
# image_window_operand), [3, 7) which tile a filled buffer holds (see
# fill_once).  -1: nothing yet; every run starts from a fresh scratch.
cdef enum:
    THREAD_STATE = 7
    FILLED_KEY = 3
GEMM_THREAD_STATE = THREAD_STATE


cdef TileSpan decode_tile(const Gemm* g, const GemmStack* stack, const StackAxis* axes,
                          Py_ssize_t index, Py_ssize_t* lead) noexcept nogil:
    """Work item ``index`` of a stack: its tile's grid rows and columns, its group of
    product rows, and in ``lead`` the grid coordinates of its leading axes (all
    axes before the last two)."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t row_group = index % stack.row_groups
    index = index // stack.row_groups
    cdef Py_ssize_t column_tile = index % stack.col_tiles
    cdef Py_ssize_t rest = index // stack.col_tiles
    cdef Py_ssize_t row_tile = rest % stack.row_tiles
    cdef Py_ssize_t plane = rest // stack.row_tiles
    cdef TileSpan tile
    cdef int a
    tile.first_block = row_group * stack.group_blocks
    tile.end_block = min(stack.blocks, tile.first_block + stack.group_blocks)
    tile.first_row = block_start(g, stack, tile.first_block)
    tile.end_row = block_start(g, stack, tile.end_block)
    tile.x = axes[last].first + column_tile * stack.tile_cols
    tile.cols = min(stack.tile_cols, axes[last].extent - column_tile * stack.tile_cols)
    if last >= 1:
        tile.y = axes[last - 1].first + row_tile * stack.tile_rows
        tile.rows = min(stack.tile_rows, axes[last - 1].extent - row_tile * stack.tile_rows)
    else:
        tile.y = 0
        tile.rows = 1
    for a in range(last - 2, -1, -1):
        lead[a] = axes[a].first + plane % axes[a].extent
        plane = plane // axes[a].extent
    return tile


cdef inline void micro_kernel(const Gemm* g, int variant, Py_ssize_t rows, const Panel* p,
                              const acc_t* a, const acc_t* b, acc_t* c,
                              acc_t* pack_to) noexcept nogil:
    """One call of the set's gemm, gemm_pack, gemm_stream or half kernel for ``rows`` rows."""
    cdef const convt_kernels_f32* k32 = g.storage.kernels.f32
    cdef const convt_kernels_f64* k64 = g.storage.kernels.f64
    if acc_t is float:
        if variant == VARIANT_HALF:
            k32.half[rows - 1](p.depth, p.block, a, b, p.offsets, c, p.ldc, p.accumulate, pack_to)
        elif variant == VARIANT_PACK:
            k32.gemm_pack[rows - 1](p.depth, p.block, a, b, p.offsets, c, p.ldc, p.accumulate,
                                    pack_to)
        elif variant == VARIANT_STREAM:
            k32.gemm_stream[rows - 1](p.depth, p.block, a, b, p.offsets, c, p.ldc, p.accumulate,
                                      pack_to)
        else:
            k32.gemm[rows - 1](p.depth, p.block, a, b, p.offsets, c, p.ldc, p.accumulate, pack_to)
    else:
        if variant == VARIANT_HALF:
            k64.half[rows - 1](p.depth, p.block, a, b, p.offsets, c, p.ldc, p.accumulate, pack_to)
        elif variant == VARIANT_PACK:
            k64.gemm_pack[rows - 1](p.depth, p.block, a, b, p.offsets, c, p.ldc, p.accumulate,
                                    pack_to)
        elif variant == VARIANT_STREAM:
            k64.gemm_stream[rows - 1](p.depth, p.block, a, b, p.offsets, c, p.ldc, p.accumulate,
                                      pack_to)
        else:
            k64.gemm[rows - 1](p.depth, p.block, a, b, p.offsets, c, p.ldc, p.accumulate, pack_to)


cdef inline void pair_kernel(const Gemm* g, bint half, Py_ssize_t rows, const Panel* p,
                             const acc_t* a, const acc_t* b, acc_t* c) noexcept nogil:
    """One pair-kernel call into the product."""
    if acc_t is float:
        g.storage.kernels.f32.pair[half][rows // 2 - 1](p.depth, p.block, a, b, p.offsets,
                                                        p.sibling, c, p.ldc, p.accumulate)
    else:
        g.storage.kernels.f64.pair[half][rows // 2 - 1](p.depth, p.block, a, b, p.offsets,
                                                        p.sibling, c, p.ldc, p.accumulate)


cdef inline void store_kernel(const Gemm* g, bint half, Py_ssize_t rows, const Panel* p,
                              const acc_t* a, const acc_t* b, char* y,
                              const acc_t* bias) noexcept nogil:
    """One storing pair-kernel call into y, of y's storage type."""
    cdef int storage = g.storage.type
    if acc_t is float:
        g.storage.kernels.f32.pair_store[storage][half][rows // 2 - 1](
            p.depth, p.block, a, b, p.offsets, p.sibling, y, p.ldc, p.accumulate, bias)
    else:
        g.storage.kernels.f64.pair_store[storage][half][rows // 2 - 1](
            p.depth, p.block, a, b, p.offsets, p.sibling, y, p.ldc, p.accumulate, bias)


cdef inline Py_ssize_t direct_panels(const Gemm* g, Py_ssize_t used, Py_ssize_t panel) noexcept nogil:
    """Leading panels of ``used`` columns whose kernels write no column past ``used``:
    those may write straight into y (see rows_in_y)."""
    cdef Py_ssize_t full = used // panel
    if full * panel < used and panel_width(g, used, full, panel) == used - full * panel:
        return full + 1
    return full


# Chunks of B (depth x used columns) up to this size run row block by row block
# (see multiply_tile): half the smallest L1 data cache of the CPUs convt serves.
cdef enum:
    BLOCKS_FIRST_MAX_BYTES = 16384


cdef void multiply_tile(const Gemm* g, const GemmStack* stack, const Panel* call,
                        const acc_t* weights, const acc_t* operand, bint in_place, TileSpan tile,
                        acc_t* product, acc_t* panel_buffer, acc_t* y_rows,
                        Py_ssize_t y_ldc) noexcept nogil:
    """product[item rows, :used] (+)= weights[item rows, this K chunk] @ operand.

    ``weights`` are the group's, packed by row block: [block][depth][rows of the
    block], so a block of ``width`` rows starting at ``row`` reads its chunk at
    ``weights + row * depth + call.k_begin * width``.  With enough row blocks to share it,
    the first block's kernel also copies the panel's B rows into contiguous
    aligned rows that the other blocks read (sets with gemm_pack).  With ``y_rows``
    (rows_in_y), the direct_panels write y itself, rows ``y_ldc`` apart, and only the
    rest go to the product.
    """
    cdef Py_ssize_t depth = g.problem.cg * stack.taps
    cdef Py_ssize_t panel = stack.panel
    cdef Py_ssize_t used = (tile.rows - 1) * stack.row_stride + tile.cols
    cdef Py_ssize_t panels = (used + panel - 1) // panel
    cdef Py_ssize_t direct = direct_panels(g, used, panel) if y_rows != NULL else 0
    cdef Panel y_call = call[0]
    cdef Panel y_packed_call
    cdef acc_t* c_rows
    cdef Py_ssize_t min_blocks = (g.layout.pack_min_blocks if in_place
                                  else g.layout.buffer_pack_min_blocks)
    cdef bint pack = min_blocks > 0 and tile.end_block - tile.first_block >= min_blocks
    cdef Py_ssize_t block, row, p, width
    cdef int variant
    cdef bint half
    cdef Panel packed_call = call[0]
    cdef const Panel* current
    cdef const acc_t* b
    cdef acc_t* pack_to
    packed_call.offsets = g.panel_offsets
    y_call.ldc = y_ldc
    y_packed_call = y_call
    y_packed_call.offsets = g.panel_offsets
    if tile.end_block - tile.first_block == 1 or (
            not pack
            and call.depth * used * <Py_ssize_t>sizeof(acc_t) <= BLOCKS_FIRST_MAX_BYTES):
        # block by block, nothing packed: one block (few rows, shallow reductions:
        # thousands of short calls per tile), or a shallow chunk whose B rows all
        # stay in L1, so that each block's rows of the product (or of y) are written
        # as whole runs, not a panel-wide piece of every row of the tile in turn
        # (wav2vec's 1 -> 512 k10 s5: 512 rows 12.8 KiB apart, each piece a new line)
        for block in range(tile.first_block, tile.end_block):
            row = block_start(g, stack, block)
            width = block_start(g, stack, block + 1) - row
            for p in range(panels):
                current = <const Panel*>&y_call if p < direct else call
                c_rows = y_rows + p * panel if p < direct else product + p * panel
                half = panel_width(g, used, p, panel) < panel
                micro_kernel(g, VARIANT_HALF if half else VARIANT_PLAIN, width, current,
                             weights + row * depth + call.k_begin * width, operand + p * panel,
                             c_rows + (row - tile.first_row) * current.ldc, NULL)
        return
    for p in range(panels):
        b = operand + p * panel
        current = <const Panel*>&y_call if p < direct else call
        c_rows = y_rows + p * panel if p < direct else product + p * panel
        # a last panel of at most NR / 2 positions: the half-width kernels
        half = panel_width(g, used, p, panel) < panel
        pack_to = panel_buffer if pack and not half else NULL
        for block in range(tile.first_block, tile.end_block):
            row = block_start(g, stack, block)
            width = block_start(g, stack, block + 1) - row
            variant = VARIANT_HALF if half else (VARIANT_PACK if pack_to != NULL else VARIANT_PLAIN)
            if (variant == VARIANT_PLAIN and in_place and block == tile.first_block
                    and g.stream_in_place):
                # the panel's first row block reads its B rows from x itself, cold
                # when x comes from memory (a network's layers in turn): its kernel
                # hints each row's line further on, for the panels after it
                variant = VARIANT_STREAM
            micro_kernel(g, variant, width, current, weights + row * depth + call.k_begin * width, b,
                         c_rows + (row - tile.first_row) * current.ldc, pack_to)
            if pack_to != NULL:
                # the remaining blocks read the packed copy
                b = panel_buffer
                current = &y_packed_call if p < direct else &packed_call
                pack_to = NULL


cdef enum:
    # rows of at least this many positions get calls of their own on sets whose
    # gemm_t reads runs of positions at constant displacements (CONVT_SET_T_RUNS)
    T_RUN_MIN_POSITIONS = 6

cdef inline void transposed_kernel(const Gemm* g, Py_ssize_t vectors, Py_ssize_t positions,
                                   const Py_ssize_t* starts, const Panel* p, const acc_t* a,
                                   const acc_t* b, acc_t* c, Py_ssize_t ldc) noexcept nogil:
    """One gemm_t call: ``positions`` rows of the transposed product, position j's
    operands at ``b + starts[j]``, ``vectors`` vectors of weight rows."""
    if acc_t is float:
        g.storage.kernels.f32.gemm_t[vectors - 1][positions - 1](
            p.depth, p.block, a, b, p.offsets, starts, c, ldc, p.accumulate)
    else:
        g.storage.kernels.f64.gemm_t[vectors - 1][positions - 1](
            p.depth, p.block, a, b, p.offsets, starts, c, ldc, p.accumulate)


cdef inline const acc_t* streamed_weights(const Gemm* g, const WorkItem* item, Py_ssize_t row,
                                          Py_ssize_t width, const Panel* call,
                                          acc_t* buffer) noexcept nogil:
    """Rows [row, row + width) of the group's weights for this K chunk, copied from w
    itself into ``buffer`` as packing lays them out ([depth][width]).

    Only where convt._dispatch.streams_weights allowed it: a Conv stack of one phase
    whose taps are the kernel's in C order, w of the accumulation type with each
    output channel's (input channel, kernel) weights contiguous (K row k is then
    w[row][k]), and every row block in one work item per call, so that w is read
    once per call, with no packed copy, no cache entry and no comparison.
    """
    cdef const acc_t* source = <const acc_t*>element(
        g.ops.w, item.group * g.ops.w_strides[0] + row * g.ops.w_strides[2],
        g.storage.type) + call.k_begin
    transpose(&g.storage, width, call.depth, source, g.ops.w_strides[2], buffer, width,
              <const acc_t*>NULL)
    return buffer


cdef void multiply_tile_transposed(const Gemm* g, const GemmStack* stack, const WorkItem* item,
                                   const Panel* call, const acc_t* weights,
                                   const acc_t* operand, TileSpan tile, acc_t* transposed,
                                   acc_t* panel_buffer) noexcept nogil:
    """transposed[:positions, item rows] (+)= (weights[item rows, this K chunk] @
    operand)^T, one row per position of the tile (its rows x cols in row order:
    the window's margin columns, which hold no output, are skipped).

    Row blocks are one or two vectors of rows (see convt._plan._transposed); each
    block's chunk of weights (at most NR rows x the chunk) stays in L1 while the
    tile's positions pass at most MR at a time, broadcast from the operand (a
    call per row, or per even share of a row, where the set reads runs).  With
    ``g.stream_weights`` the chunk is copied from w into ``panel_buffer`` first.
    """
    cdef Py_ssize_t depth = g.problem.cg * stack.taps
    cdef Py_ssize_t positions = tile.rows * tile.cols
    cdef Py_ssize_t ldt = tile.end_row - tile.first_row
    cdef Py_ssize_t lanes = stack.panel // 2
    cdef Py_ssize_t mr = (g.storage.kernels.f32.mr if acc_t is float
                          else g.storage.kernels.f64.mr)
    # positions shared out evenly over the fewest calls: a short last call (49
    # positions as 8 x 6 + 1) runs its few accumulators at the FMA latency, not at
    # the FMA rate, and costs nearly a full call
    cdef Py_ssize_t calls = (positions + mr - 1) // mr
    cdef Py_ssize_t even = positions // calls
    cdef Py_ssize_t longer = positions - even * calls
    cdef Py_ssize_t block, row, width, p, q, count, j, r, col
    cdef unsigned flags = (g.storage.kernels.f32.flags if acc_t is float
                           else g.storage.kernels.f64.flags)
    cdef Py_ssize_t row_calls = 0, row_even = 0, row_longer = 0
    cdef Py_ssize_t starts[CONVT_MAX_MR]
    cdef const acc_t* a
    cdef acc_t* c
    # With margin columns between the tile's rows, a call spanning two rows reads
    # its positions one by one from the table; a set with CONVT_SET_T_RUNS reads a
    # run within a row at constant displacements (on Zen 4, 512 -> 512 3x3 over 7x7
    # 6-10% faster with a call per row than with 49 positions as 5 calls), so rows
    # long enough to keep a call's accumulators busy take calls of their own.
    if (flags & CONVT_SET_T_RUNS and stack.row_stride != tile.cols
            and tile.cols >= T_RUN_MIN_POSITIONS):
        row_calls = (tile.cols + mr - 1) // mr
        row_even = tile.cols // row_calls
        row_longer = tile.cols - row_even * row_calls
    for block in range(tile.first_block, tile.end_block):
        row = block_start(g, stack, block)
        width = block_start(g, stack, block + 1) - row
        if g.stream_weights:
            a = streamed_weights(g, item, row, width, call, panel_buffer)
        else:
            a = weights + row * depth + call.k_begin * width
        c = transposed + (row - tile.first_row)
        if row_calls:
            p = 0
            for r in range(tile.rows):
                col = 0
                for q in range(row_calls):
                    count = row_even + (q < row_longer)
                    for j in range(count):
                        starts[j] = r * stack.row_stride + col + j
                    transposed_kernel(g, width // lanes, count, starts, call, a, operand,
                                      c + p * ldt, ldt)
                    col = col + count
                    p = p + count
            continue
        p = r = col = 0  # position p of the tile is its row r, column col
        for q in range(calls):
            # the first ``longer`` calls take one position more
            count = even + (q < longer)
            for j in range(count):
                starts[j] = r * stack.row_stride + col
                col = col + 1
                if col == tile.cols:
                    col = 0
                    r = r + 1
            transposed_kernel(g, width // lanes, count, starts, call, a, operand, c + p * ldt,
                              ldt)
            p = p + count


cdef inline void transpose_product(const Gemm* g, const GemmStack* stack, TileSpan tile,
                                   const acc_t* transposed, acc_t* product) noexcept nogil:
    """product[item rows, r * row_stride + col] = transposed[r * cols + col, item rows]
    for the tile's rows r and columns col, exactly (the margin columns are not outputs)."""
    cdef Py_ssize_t rows = tile.end_row - tile.first_row
    cdef Py_ssize_t r
    if stack.row_stride == tile.cols:  # no margin: one transpose
        transpose(&g.storage, tile.rows * tile.cols, rows, transposed, rows, product,
                  stack.columns, <const acc_t*>NULL)
        return
    for r in range(tile.rows):
        transpose(&g.storage, tile.cols, rows, transposed + r * tile.cols * rows, rows,
                  product + r * stack.row_stride, stack.columns, <const acc_t*>NULL)


cdef inline void pack_pair(const Gemm* g, const Panel* p, const acc_t* b,
                           acc_t* to) noexcept nogil:
    """Copy a full pair panel's operands to ``to`` (see kernel_set.h, pack_pair)."""
    if acc_t is float:
        g.storage.kernels.f32.pack_pair(p.depth, b, p.offsets, p.sibling, to)
    else:
        g.storage.kernels.f64.pack_pair(p.depth, b, p.offsets, p.sibling, to)


cdef enum:
    # row blocks whose targets multiply_exact works out once per grid row
    EXACT_TARGETS = 32


cdef void multiply_exact(const Gemm* g, const GemmStack* stack, const WorkItem* item,
                         const Py_ssize_t* lead, TileSpan tile, const Panel* call,
                         const acc_t* weights, const acc_t* operand,
                         acc_t* product, acc_t* panel_buffer) noexcept nogil:
    """multiply_tile for an exact stack (see convt._plan._exact_pairs).

    Each block is whole pairs of last-axis phases of one leading phase; for each
    grid row the block has outputs on, its panels cover the pair's positions
    t = 0 .. count - 1 exactly: the even phase at grid position t + shift, the
    odd one a `sibling` further.  Stacks with store_direct have their pair
    kernels write the interleaved outputs into y (plus bias, or added to y
    after the first K chunk); the others fill the same product columns as
    multiply_tile.  With store_direct, a full panel read by pair_pack_min_blocks
    row blocks or more is first copied to ``panel_buffer`` (aligned, in L1) and
    every block reads it there.  Where each block's outputs start on a grid row
    is worked out once per row (up to EXACT_TARGETS blocks at a time), not once
    per panel: a float64 k4s2 layer of 16 channels makes 64-step kernel calls,
    and that bookkeeping took about 7% of its time.  Every call writes its own outputs,
    so their order leaves the results unchanged.
    """
    cdef int ndim = g.problem.ndim
    cdef int last = ndim - 1
    cdef int storage = g.storage.type
    cdef const PhaseAxis* phases = g.phases + stack.phase_start * ndim
    cdef Py_ssize_t depth = g.problem.cg * stack.taps
    cdef Py_ssize_t panel = stack.panel
    # the pair's even phase: the same last-axis shift and count in every block
    cdef Py_ssize_t shift = phases[last].shift
    cdef Py_ssize_t count = phases[last].count
    # only storing pairs: the pair kernels into the product shift C by the sibling too
    cdef bint pack = (stack.store_direct and g.layout.pair_pack_min_blocks > 0
                      and tile.end_block - tile.first_block >= g.layout.pair_pack_min_blocks)
    cdef Py_ssize_t r, t, i, block, row, column, m, base, chunk, chunk_end
    # per block of the chunk: its first weight, its rows, where its outputs start
    # (y's element of the even phase, or its product row), its output channel;
    # starts[i] < 0: no outputs on this grid row
    cdef Py_ssize_t weight_at[EXACT_TARGETS]
    cdef Py_ssize_t widths[EXACT_TARGETS]
    cdef Py_ssize_t starts[EXACT_TARGETS]
    cdef Py_ssize_t channels[EXACT_TARGETS]
    cdef bint half
    cdef const PhaseAxis* phase
    cdef const acc_t* b
    cdef const acc_t* bias
    cdef Py_ssize_t item_size = convt_itemsize(storage)
    cdef Panel pair_call = call[0]
    cdef Panel packed_call
    cdef const Panel* current
    pair_call.sibling = phases[ndim + last].shift - shift
    if stack.store_direct:
        pair_call.ldc = g.ops.y_strides[1]
    packed_call = pair_call
    packed_call.offsets = g.panel_offsets
    packed_call.sibling = call.depth * panel
    for r in range(tile.rows):
        column = r * stack.row_stride + shift - tile.x
        chunk = tile.first_block
        while chunk < tile.end_block:
            chunk_end = min(tile.end_block, chunk + <Py_ssize_t>EXACT_TARGETS)
            for block in range(chunk, chunk_end):
                i = block - chunk
                row = block_start(g, stack, block)
                phase = phases + row_phase(row, g.problem.mg, 2, &m) * ndim
                # grid rows and leading coordinates outside this leading phase have no outputs
                starts[i] = -1
                if not (output_base(g, phase, item, item.group * g.problem.mg + m, lead, &base)
                        and row_offset(g, phase, tile.y + r, &base)):
                    continue
                widths[i] = block_start(g, stack, block + 1) - row
                weight_at[i] = row * depth + call.k_begin * widths[i]
                starts[i] = (base + phase[last].residue if stack.store_direct
                             else row - tile.first_row)
                channels[i] = item.group * g.problem.mg + m
            t = 0
            while t < count:
                half = 2 * (count - t) <= panel
                b = operand + column + t
                current = &pair_call
                if pack and not half:
                    pack_pair(g, &pair_call, b, panel_buffer)
                    b = panel_buffer
                    current = &packed_call
                for i in range(chunk_end - chunk):
                    if starts[i] < 0:
                        continue
                    if stack.store_direct:
                        bias = (<const acc_t*>g.ops.bias_acc + channels[i]
                                if g.ops.bias_acc != NULL else NULL)
                        store_kernel(g, half, widths[i], current, weights + weight_at[i], b,
                                     <char*>element(g.ops.y, starts[i], storage)
                                     + 2 * t * item_size, bias)
                    else:
                        pair_kernel(g, half, widths[i], current, weights + weight_at[i], b,
                                    product + starts[i] * call.ldc + column + t)
                t = t + panel
            chunk = chunk_end


cdef acc_t* rows_in_y(const Gemm* g, const GemmStack* stack, const WorkItem* item,
                      const Py_ssize_t* lead, TileSpan tile, const acc_t* like,
                      Py_ssize_t* ldc) noexcept nogil:
    """Where a tile's product may be computed in y itself, or NULL.

    That holds for a plain one-phase stack (a Conv's) whose product columns are
    consecutive outputs of y, of the accumulation type: every column inside the
    phase on unit-stride axes, and either one grid row or whole rows of a stack
    and of a y without gaps between rows (1x1 Conv layers, 1-D layers).  Its
    rows are then its output channels, ``ldc`` apart; scatter_tile's copy is
    saved (a quarter of a 1x1 Conv's time).
    """
    cdef int ndim = g.problem.ndim
    cdef int last = ndim - 1
    cdef const PhaseAxis* phase = g.phases + stack.phase_start * ndim
    cdef Py_ssize_t base
    if (g.layout.blas or stack.exact or stack.transposed or stack.partner >= 0
            or stack.phases != 1 or not is_accumulation(g.storage.type, like)
            or g.ops.y_strides[2 + last] != 1 or g.axes[last].stride != 1
            or tile.x < phase[last].shift
            or tile.x + tile.cols > phase[last].shift + phase[last].count):
        return NULL
    if tile.rows > 1 and not (
            g.axes[last - 1].stride == 1 and stack.row_stride == tile.cols
            and g.ops.y_strides[1 + last] == tile.cols
            and tile.y >= phase[last - 1].shift
            and tile.y + tile.rows <= phase[last - 1].shift + phase[last - 1].count):
        return NULL
    if not (output_base(g, phase, item, item.group * g.problem.mg + tile.first_row, lead, &base)
            and row_offset(g, phase, tile.y, &base)):
        return NULL
    ldc[0] = g.ops.y_strides[1]
    return <acc_t*>element(g.ops.y, base + phase[last].residue + tile.x - phase[last].shift,
                           g.storage.type)


cdef void finish_rows_in_y(const Gemm* g, const GemmStack* stack, const WorkItem* item,
                           TileSpan tile, const acc_t* product, acc_t* y_rows,
                           Py_ssize_t ldc) noexcept nogil:
    """After the last K chunk of a tile computed in y (rows_in_y): store the columns
    its kernels computed in the product, and add the bias to the others."""
    cdef Py_ssize_t used = (tile.rows - 1) * stack.row_stride + tile.cols
    cdef Py_ssize_t start = min(used, direct_panels(g, used, stack.panel) * stack.panel)
    cdef Py_ssize_t row
    cdef acc_t* y
    cdef acc_t bias
    for row in range(tile.first_row, tile.end_row):
        y = y_rows + (row - tile.first_row) * ldc
        bias = bias_of(&g.storage, g.ops.bias, item.group * g.problem.mg + row, y)
        if g.ops.bias != NULL and start > 0:
            store_run(&g.storage, <char*>y, 1, y, start, bias)
        if start < used:
            store_run(&g.storage, <char*>(y + start), 1,
                      product + (row - tile.first_row) * stack.columns + start, used - start, bias)


cdef inline acc_t* image_window_operand(const Gemm* g, const GemmStack* stack,
                                        const StackAxis* axes, const WorkItem* item,
                                        Py_ssize_t c_begin, TileSpan tile, Py_ssize_t* lead,
                                        acc_t* buffer) noexcept nogil:
    """An image-window stack's operand for a tile and K chunk: the tile's first row
    in the thread's tile buffer, which holds the window of the tile's image and
    group, channel c_begin.

    The rows a tile reads are filled when the thread first needs them, with the
    row after them (a row's last columns may be the next row's first zeros, see
    convt._plan._shared_gaps) and each plane's first row (the next plane's, for
    the last row); lead[ndim:ndim + 3] hold the image and group held (-1: none)
    and the rows [first, end) filled.  A thread's items come in increasing order,
    so its tiles extend the rows it holds; any other order refills."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t held = item.image * g.problem.groups + item.group
    cdef Py_ssize_t start = c_begin * stack.buffer_channel + tile.x - axes[last].first
    cdef Py_ssize_t first = 0
    cdef Py_ssize_t end = stack.buffer_rows
    cdef Py_ssize_t* state = lead + g.problem.ndim
    if last >= 1:
        first = tile.y - axes[last - 1].first
        end = min(stack.buffer_rows, first + tile.rows + axes[last - 1].span + 1)
        start = start + first * stack.row_stride
    if state[0] != held or first < state[1] or first > state[2]:
        if first > 0:  # each plane's first row, the padding and the zeros after the data
            fill_image_window(g, stack, axes, item.image, item.group, 0, 1, buffer)
        fill_image_window(g, stack, axes, item.image, item.group, first, end, buffer)
        state[0] = held
        state[1] = first
        state[2] = end
    elif end > state[2]:
        fill_image_window(g, stack, axes, item.image, item.group, state[2], end, buffer)
        state[2] = end
    return buffer + start


cdef inline void forget_filled(const Gemm* g, Py_ssize_t* lead) noexcept nogil:
    """The thread's operand buffer no longer holds a filled tile (see fill_once)."""
    lead[g.problem.ndim + FILLED_KEY] = -1


cdef void fill_once(const Gemm* g, const GemmStack* stack, const StackAxis* axes,
                    const WorkItem* item, const char* x_image, Py_ssize_t c_begin,
                    Py_ssize_t c_end, Py_ssize_t* lead, TileSpan tile,
                    acc_t* buffer) noexcept nogil:
    """fill_buffer, unless the thread's buffer already holds this tile: the row groups
    of one tile are consecutive items, which one thread running them in turn (one
    thread, or the last items) would otherwise each fill again.  Only for a single
    K chunk (the buffer then holds every channel) of a stack without a residue
    partner (whose fill would overwrite the buffer within the item)."""
    cdef Py_ssize_t* key = lead + g.problem.ndim + FILLED_KEY
    cdef Py_ssize_t stack_index = stack - g.stacks
    cdef Py_ssize_t tile_index = item.tile // stack.row_groups
    if c_begin != 0 or c_end != g.problem.cg or stack.partner >= 0:
        fill_buffer(g, stack, axes, x_image, c_begin, c_end, lead, tile, buffer)
        forget_filled(g, lead)
        return
    if (key[0] == stack_index and key[1] == item.image and key[2] == item.group
            and key[3] == tile_index):
        return
    fill_buffer(g, stack, axes, x_image, c_begin, c_end, lead, tile, buffer)
    key[0] = stack_index
    key[1] = item.image
    key[2] = item.group
    key[3] = tile_index


cdef bint multiply_stack(const Gemm* g, const GemmStack* stack, const acc_t* packed,
                         const WorkItem* item, Py_ssize_t* lead, TileSpan tile,
                         acc_t* operand, acc_t* product, acc_t* transposed,
                         acc_t* panel_buffer, int slot, bint alone) noexcept nogil:
    """The product of one tile of one stack, K chunk by K chunk: gather, multiply
    (``slot``: the pool thread's, 0 for the caller, who runs signal handlers).
    ``alone``: not one of a residue pair (their products are interleaved).  True
    when the product went into y itself (rows_in_y), with its bias."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t cg = g.problem.cg
    cdef Py_ssize_t depth = cg * stack.taps
    cdef const acc_t* weights = packed + stack.weight_start + item.group * stack.group_size
    cdef const char* x_image = element(
        g.ops.x, item.image * g.ops.x_strides[0] + item.group * cg * g.ops.x_strides[1],
        g.storage.type)
    cdef acc_t* source
    cdef const acc_t* in_place
    cdef const StackAxis* axes = g.stack_axes + (stack - g.stacks) * g.problem.ndim
    cdef Py_ssize_t c_begin, c_end, ld_operand, start, y_ldc = 0
    cdef acc_t* y_rows = (rows_in_y(g, stack, item, lead, tile, product, &y_ldc) if alone
                          else NULL)
    cdef int a
    cdef Panel call
    call.block = stack.sum_block
    call.sibling = 0
    call.ldc = stack.columns
    c_begin = 0
    while c_begin < cg:
        if c_begin and stopped(g.signals, slot):
            return False  # interrupted: the item is abandoned
        c_end = min(cg, c_begin + stack.chunk)
        call.depth = (c_end - c_begin) * stack.taps
        call.k_begin = c_begin * stack.taps
        call.accumulate = c_begin > 0
        if not g.layout.blas:
            in_place = input_as_operand(g, stack, x_image, c_begin, c_end, lead, tile, operand)
            if in_place != NULL:  # identity stacks: never transposed (convt._plan.gemm_plan)
                call.offsets = g.x_channel_offsets
                multiply_tile(g, stack, &call, weights, in_place, True, tile, product, panel_buffer,
                              y_rows, y_ldc)
            else:
                call.offsets = g.buffer_offsets + stack.offset_start
                source = operand
                if stack.image_window:  # never exact
                    source = image_window_operand(g, stack, axes, item, c_begin, tile, lead,
                                                  operand)
                    forget_filled(g, lead)
                elif stack.gather:
                    gather_tile(g, stack, x_image, c_begin, c_end, lead, tile, operand)
                    forget_filled(g, lead)
                else:
                    fill_once(g, stack, axes, item, x_image, c_begin, c_end, lead, tile, operand)
                if stack.exact:
                    multiply_exact(g, stack, item, lead, tile, &call, weights, operand, product,
                                   panel_buffer)
                elif stack.transposed:
                    multiply_tile_transposed(g, stack, item, &call, weights, source, tile,
                                             transposed, panel_buffer)
                else:
                    multiply_tile(g, stack, &call, weights, source, False, tile, product,
                                  panel_buffer, y_rows, y_ldc)
        else:
            source = operand
            ld_operand = stack.columns
            if stack.identity and g.layout.input_is_tile:
                # the im2col of a 1-tap, 0-offset stack is x itself
                start = c_begin * g.ops.x_strides[1] + tile.x * g.ops.x_strides[2 + last]
                if last >= 1:
                    start = start + tile.y * g.ops.x_strides[1 + last]
                for a in range(last - 1):
                    start = start + lead[a] * g.ops.x_strides[2 + a]
                source = <acc_t*>element(x_image, start, g.storage.type)
                ld_operand = g.ops.x_strides[1]
            else:
                gather_tile(g, stack, x_image, c_begin, c_end, lead, tile, operand)
                forget_filled(g, lead)
            # weights: one (rows x depth) column-major block; operand (used x k) column-major
            blas_gemm(<int>((tile.rows - 1) * stack.row_stride + tile.cols), <int>stack.rows,
                      <int>call.depth, source, <int>ld_operand,
                      <acc_t*>weights + call.k_begin * stack.rows, <int>stack.rows,
                      1 if call.accumulate else 0, product, <int>stack.columns)
        c_begin = c_end
    if y_rows != NULL:
        finish_rows_in_y(g, stack, item, tile, product, y_rows, y_ldc)
        return True
    if stack.transposed and not g.layout.blas and not stores_transposed(g, stack, product):
        transpose_product(g, stack, tile, transposed, product)
    return False


cdef void gemm_item(const Gemm* g, const acc_t* packed, Py_ssize_t index, acc_t* workspace,
                    Py_ssize_t* lead, int slot) noexcept nogil:
    """One tile of one stack (and of its residue partner) for one image and group.
    ``lead``: the thread's scratch, ndim + THREAD_STATE entries: the tile's leading
    grid coordinates, then for an image-window stack the image and group whose
    window its tile buffer holds (image x groups + group; -1: none yet) and the
    window rows [first, end) filled (see image_window_operand), then the tile a
    filled buffer holds (see fill_once)."""
    cdef const WorkItem* item = g.items + index
    cdef const GemmStack* stack = g.stacks + item.stack
    cdef const StackAxis* axes = g.stack_axes + item.stack * g.problem.ndim
    cdef TileSpan tile = decode_tile(g, stack, axes, item.tile, lead)
    cdef acc_t* operand = workspace
    cdef acc_t* product = workspace + g.layout.operand
    cdef acc_t* transposed = product + g.layout.product
    # B panels are copied to a 64-byte aligned place after the products
    cdef acc_t* panel_buffer = <acc_t*>((<size_t>(transposed + g.layout.transposed) + 63)
                                        & ~(<size_t>63))
    cdef const GemmStack* other
    cdef TileSpan other_tile
    cdef acc_t* other_product
    cdef int last = g.problem.ndim - 1
    # NXC output: channels adjacent, positions not; runs of a few channels (depthwise)
    # are shorter than a row's positions, which the strided scatter stores instead
    cdef bint channels_last = (g.ops.y_strides[1] == 1 and g.ops.y_strides[2 + last] != 1
                               and g.problem.mg >= MIN_CHANNEL_RUN)
    if multiply_stack(g, stack, packed, item, lead, tile, operand, product, transposed,
                      panel_buffer, slot, stack.partner < 0):
        return  # computed in y
    if convt_stop_raised(&g.signals.stop):
        return
    if stack.partner >= 0:
        # the odd residue: same rows and blocks, its own columns; its product follows
        other = g.stacks + stack.partner
        other_tile = decode_tile(g, other, g.stack_axes + stack.partner * g.problem.ndim,
                                 item.tile, lead)
        other_product = product + (tile.end_row - tile.first_row) * stack.columns
        multiply_stack(g, other, packed, item, lead, other_tile, operand, other_product,
                       transposed, panel_buffer, slot, False)
        if convt_stop_raised(&g.signals.stop):
            return
        if channels_last:
            scatter_channels_last(g, stack, item, lead, tile, product)
            scatter_channels_last(g, other, item, lead, other_tile, other_product)
        else:
            scatter_pair(g, stack, other, item, lead, tile, other_tile, product, other_product)
    elif stores_transposed(g, stack, product):
        store_transposed(g, stack, item, lead, tile, transposed)
    elif channels_last and not stack.store_direct:
        scatter_channels_last(g, stack, item, lead, tile, product)
    elif not stack.store_direct:
        scatter_tile(g, stack, item, lead, tile, product)


# One run of the GEMM engine, shared by the pool's threads.
cdef struct GemmJob:
    const Gemm* g
    const void* packed
    void* workspace                    # (threads, layout.per_thread) accumulation elements
    Py_ssize_t* scratch                # (threads, ndim + THREAD_STATE): see gemm_item's lead


cdef inline void gemm_task(const GemmJob* job, Py_ssize_t index, int slot,
                           const acc_t* like) noexcept nogil:
    """Work item ``index`` on pool thread ``slot``, with that slot's workspace."""
    if not stopped(job.g.signals, slot):
        gemm_item(job.g, <const acc_t*>job.packed, index,
                  <acc_t*>job.workspace + slot * job.g.layout.per_thread,
                  job.scratch + slot * (job.g.problem.ndim + THREAD_STATE), slot)
        if job.g.layout.stream_output:
            convt_store_fence()  # the item's streamed rows, before the pool counts it done


cdef void gemm_task_f32(void* job, Py_ssize_t index, int slot) noexcept nogil:
    gemm_task(<const GemmJob*>job, index, slot, <const float*>NULL)


cdef void gemm_task_f64(void* job, Py_ssize_t index, int slot) noexcept nogil:
    gemm_task(<const GemmJob*>job, index, slot, <const double*>NULL)


cdef class GemmEngine:
    """The GEMM engine prepared for one plan and decision (convt._engine.Execution):
    everything but the call's arrays is resolved once, so a call costs little."""

    cdef Gemm g
    cdef object keep                   # the records and plan the pointers point into
    cdef Py_ssize_t n_items
    cdef bint doubles

    def __cinit__(self, problem, axes, plan, layout, decision):
        if decision.kernel_set == "blas":
            bind_blas()
        self.keep = (problem, axes, plan, layout)
        self.g.problem = (<const Problem*>data_of(problem))[0]
        self.g.axes = <const Axis*>data_of(axes)
        self.g.storage = storage_for(decision, <int>self.g.problem.storage)
        self.g.layout = (<const GemmLayout*>data_of(layout))[0]
        self.g.stacks = <const GemmStack*>data_of(plan.stacks)
        self.g.stack_axes = <const StackAxis*>data_of(plan.stack_axes)
        self.g.tap_offsets = <const Py_ssize_t*>data_of(plan.tap_offsets)
        self.g.tap_residues = <const Py_ssize_t*>data_of(plan.tap_residues)
        self.g.residues = <const Py_ssize_t*>data_of(plan.residues)
        self.g.buffer_offsets = <const Py_ssize_t*>data_of(plan.buffer_offsets)
        self.g.phases = <const PhaseAxis*>data_of(plan.phases)
        self.g.items = <const WorkItem*>data_of(plan.items)
        self.g.block_starts = <const Py_ssize_t*>data_of(plan.block_starts)
        self.g.panel_offsets = <const Py_ssize_t*>data_of(plan.panel_offsets)
        self.n_items = plan.items.shape[0]
        self.doubles = decision.accumulation.itemsize == 8
        self.g.stream_in_place = ((self.g.storage.kernels.f64.flags if self.doubles
                                   else self.g.storage.kernels.f32.flags)
                                  & CONVT_SET_STREAM_B) != 0

    def run(self, arrays, packed, workspace, scratch, int num_threads,
            bint stream_weights=False):
        """Every work item, on ``arrays`` (convt._engine.Operands) with the packed
        weights, shared by up to ``num_threads`` pool threads; ``workspace`` is
        (threads, layout.per_thread) of the accumulation type and ``scratch``
        (threads, ndim + GEMM_THREAD_STATE) intp, its last columns -1 (see gemm_item).  With
        ``stream_weights`` (see streamed_weights) the
        transposed stacks read w itself and ``packed`` is not read.  Returns the
        threads that took part."""
        cdef Gemm g = self.g
        cdef GemmJob job
        cdef Signals signals = signals_for_this_call()
        cdef convt_task task = gemm_task_f64 if self.doubles else gemm_task_f32
        cdef int used
        g.ops = operands_of(arrays)
        g.signals = &signals
        g.x_extent = arrays.x_extent if arrays.x_channel_offsets is not None else 0
        g.x_channel_offsets = <const Py_ssize_t*>data_of(arrays.x_channel_offsets)
        g.stream_weights = stream_weights
        job.g = &g
        job.packed = data_of(packed)
        job.workspace = <void*>data_of(workspace)
        if scratch.shape[1] != g.problem.ndim + THREAD_STATE or scratch.shape[0] < num_threads:
            raise ValueError(f"scratch must be (threads, ndim + {THREAD_STATE}); "
                             f"got {scratch.shape}")
        job.scratch = <Py_ssize_t*>data_of(scratch)
        with nogil:
            used = convt_run(task, &job, self.n_items, num_threads)
        raise_if_stopped(&signals)
        return used
