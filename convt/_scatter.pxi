# Output side of the GEMM engine: writing product rows to their outputs.
#
# Product rows are ordered (leading phase, output channel, last-axis phase);
# column r * row_stride + (u - tile.x) of a tile's product holds grid position
# (lead, tile.y + r, u).  The residues of one output row are written together, front to back, so
# stride-2 rows are stored in whole vectors; residue pairs (two stacks, one
# work item) are interleaved the same way.  Exact stacks that store straight
# into y have no scatter at all.


cdef bint output_base(const Gemm* g, const PhaseAxis* phase, const WorkItem* item,
                      Py_ssize_t channel, const Py_ssize_t* lead, Py_ssize_t* base) noexcept nogil:
    """Offset in y of (image, channel) and of the phase's leading-axis outputs at
    ``lead``; False if a leading coordinate is outside the phase's outputs."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t t
    cdef int a
    base[0] = item.image * g.ops.y_strides[0] + channel * g.ops.y_strides[1]
    for a in range(last - 1):
        t = lead[a] - phase[a].shift
        if t < 0 or t >= phase[a].count:
            return False
        base[0] = base[0] + (phase[a].residue + t * g.axes[a].stride) * g.ops.y_strides[2 + a]
    return True


cdef bint row_offset(const Gemm* g, const PhaseAxis* phase, Py_ssize_t grid_row,
                     Py_ssize_t* offset) noexcept nogil:
    """Add the phase's output row on axis ndim - 2 for a grid row (nothing in 1-D);
    False if that grid row has no output in this phase."""
    cdef int a = g.problem.ndim - 2
    cdef Py_ssize_t t
    if a >= 0:
        t = grid_row - phase[a].shift
        if t < 0 or t >= phase[a].count:
            return False
        offset[0] = offset[0] + (phase[a].residue + t * g.axes[a].stride) * g.ops.y_strides[2 + a]
    return True


cdef inline Py_ssize_t phase_t_begin(const PhaseAxis* phase, int last, TileSpan tile) noexcept nogil:
    return max(tile.x, phase[last].shift) - phase[last].shift


cdef inline Py_ssize_t phase_t_end(const PhaseAxis* phase, int last, TileSpan tile) noexcept nogil:
    return min(tile.x + tile.cols, phase[last].shift + phase[last].count) - phase[last].shift


cdef void scatter_row(const Gemm* g, const PhaseAxis* phase, const WorkItem* item,
                      Py_ssize_t channel, const Py_ssize_t* lead, TileSpan tile,
                      const acc_t* source, Py_ssize_t row_stride, Py_ssize_t t_begin,
                      Py_ssize_t t_end) noexcept nogil:
    """Store one product row (one phase, one channel): outputs residue + t * stride
    of the last axis for t in [t_begin, t_end), every grid row of the tile."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t step = g.ops.y_strides[2 + last]
    cdef Py_ssize_t base, offset, r
    cdef acc_t bias
    if t_end <= t_begin or not output_base(g, phase, item, channel, lead, &base):
        return
    bias = bias_of(&g.storage, g.ops.bias, channel, source)
    base = base + (phase[last].residue + t_begin * g.axes[last].stride) * step
    source = source + (t_begin + phase[last].shift - tile.x)
    for r in range(tile.rows):
        offset = base
        if row_offset(g, phase, tile.y + r, &offset):
            store_run(&g.storage, <char*>element(g.ops.y, offset, g.storage.type),
                      g.axes[last].stride * step, source + r * row_stride, t_end - t_begin,
                      bias)


# Super-resolution heads' stride 3, vocoders' k8 s4 and k16 s8 upsamplers, FCN-8s'
# head: their three, four or eight stacked residues written in one pass, with
# constant strides the compiler vectorises.

cdef inline void interleave_3(acc_t* y, const acc_t** rows, Py_ssize_t count,
                              acc_t bias) noexcept nogil:
    """y[3 t + q] = rows[q][t] + bias for t < count."""
    cdef const acc_t* r0 = rows[0]
    cdef const acc_t* r1 = rows[1]
    cdef const acc_t* r2 = rows[2]
    cdef Py_ssize_t t
    for t in range(count):
        y[3 * t] = r0[t] + bias
        y[3 * t + 1] = r1[t] + bias
        y[3 * t + 2] = r2[t] + bias


cdef inline void interleave_4(acc_t* y, const acc_t** rows, Py_ssize_t count,
                              acc_t bias) noexcept nogil:
    """y[4 t + q] = rows[q][t] + bias for t < count."""
    cdef const acc_t* r0 = rows[0]
    cdef const acc_t* r1 = rows[1]
    cdef const acc_t* r2 = rows[2]
    cdef const acc_t* r3 = rows[3]
    cdef Py_ssize_t t
    for t in range(count):
        y[4 * t] = r0[t] + bias
        y[4 * t + 1] = r1[t] + bias
        y[4 * t + 2] = r2[t] + bias
        y[4 * t + 3] = r3[t] + bias


cdef inline void interleave_8(acc_t* y, const acc_t** rows, Py_ssize_t count,
                              acc_t bias) noexcept nogil:
    """y[8 t + q] = rows[q][t] + bias for t < count."""
    cdef const acc_t* r0 = rows[0]
    cdef const acc_t* r1 = rows[1]
    cdef const acc_t* r2 = rows[2]
    cdef const acc_t* r3 = rows[3]
    cdef const acc_t* r4 = rows[4]
    cdef const acc_t* r5 = rows[5]
    cdef const acc_t* r6 = rows[6]
    cdef const acc_t* r7 = rows[7]
    cdef Py_ssize_t t
    for t in range(count):
        y[8 * t] = r0[t] + bias
        y[8 * t + 1] = r1[t] + bias
        y[8 * t + 2] = r2[t] + bias
        y[8 * t + 3] = r3[t] + bias
        y[8 * t + 4] = r4[t] + bias
        y[8 * t + 5] = r5[t] + bias
        y[8 * t + 6] = r6[t] + bias
        y[8 * t + 7] = r7[t] + bias


cdef inline void interleave_8_of(acc_t* y, const acc_t** rows, Py_ssize_t stride,
                                 Py_ssize_t count, acc_t bias) noexcept nogil:
    """y[stride t + q] = rows[q][t] + bias for t < count, q < 8: eight residues of a
    larger multiple of 8 (FCN-32s' 32)."""
    cdef const acc_t* r0 = rows[0]
    cdef const acc_t* r1 = rows[1]
    cdef const acc_t* r2 = rows[2]
    cdef const acc_t* r3 = rows[3]
    cdef const acc_t* r4 = rows[4]
    cdef const acc_t* r5 = rows[5]
    cdef const acc_t* r6 = rows[6]
    cdef const acc_t* r7 = rows[7]
    cdef Py_ssize_t t
    cdef acc_t* out
    for t in range(count):
        out = y + t * stride
        out[0] = r0[t] + bias
        out[1] = r1[t] + bias
        out[2] = r2[t] + bias
        out[3] = r3[t] + bias
        out[4] = r4[t] + bias
        out[5] = r5[t] + bias
        out[6] = r6[t] + bias
        out[7] = r7[t] + bias


cdef void store_interleaved(const Gemm* g, Py_ssize_t offset, const acc_t** rows,
                            Py_ssize_t stride, Py_ssize_t count, acc_t bias) noexcept nogil:
    """y[offset + (t * stride + q) * step] = rows[q][t] + bias, for t < count and q < stride:
    the residues of one output row, written front to back (stride 2: whole vectors)."""
    cdef int storage = g.storage.type
    cdef Py_ssize_t step = g.ops.y_strides[1 + g.problem.ndim]
    cdef Py_ssize_t done, chunk, t, q
    cdef acc_t merged[64]
    cdef acc_t* y
    if step == 1 and is_accumulation(storage, rows[0]):
        y = <acc_t*>element(g.ops.y, offset, storage)
        if stride == 2:
            interleave_run(&g.storage, g.layout.stream_output, y, rows[0], rows[1], count, bias)
            return
        if stride == 3:
            interleave_3(y, rows, count, bias)
            return
        if stride == 4:
            interleave_4(y, rows, count, bias)
            return
        if stride == 8:  # a constant stride: 5% faster than the groups of eight (FCN-8s)
            interleave_8(y, rows, count, bias)
            return
        if stride % 8 == 0:
            for q in range(0, stride, 8):
                interleave_8_of(y + q, rows + q, stride, count, bias)
            return
    # interleave a chunk of whole output groups, then store it as one run
    done = 0
    while done < count:
        chunk = min(count - done, 64 // stride)
        if stride == 2:  # a constant stride, which the compiler vectorises
            for t in range(chunk):
                merged[2 * t] = rows[0][done + t]
                merged[2 * t + 1] = rows[1][done + t]
        else:
            for t in range(chunk):
                for q in range(stride):
                    merged[t * stride + q] = rows[q][done + t]
        store_run(&g.storage, <char*>element(g.ops.y, offset + done * stride * step, storage),
                  step, merged, chunk * stride, bias)
        done = done + chunk


cdef enum:
    # last-axis residues a stack interleaves, at most (convt._plan.MAX_SIBLINGS)
    MAX_SIBLINGS = 64
SCATTER_MAX_SIBLINGS = MAX_SIBLINGS  # tests hold convt._plan.MAX_SIBLINGS to it


cdef void scatter_siblings(const Gemm* g, const GemmStack* stack, const PhaseAxis* first,
                           const WorkItem* item, Py_ssize_t channel, const Py_ssize_t* lead,
                           TileSpan tile, const acc_t* source,
                           Py_ssize_t product_stride) noexcept nogil:
    """Store the rows of every residue of the last axis together, so each output row
    is written front to back once (stride 2: whole vectors) instead of by one
    strided pass per residue.  Outputs not shared by all residues (the edges) go
    through scatter_row."""
    cdef int ndim = g.problem.ndim
    cdef int last = ndim - 1
    cdef Py_ssize_t stride = g.axes[last].stride
    cdef Py_ssize_t row_stride = stack.row_stride
    cdef Py_ssize_t step = g.ops.y_strides[2 + last]
    cdef Py_ssize_t t_begin = 0
    cdef Py_ssize_t t_end = tile.x + tile.cols  # any upper bound
    cdef Py_ssize_t q, r, base, offset, count
    cdef const PhaseAxis* phase
    cdef const acc_t* rows[MAX_SIBLINGS]
    cdef const acc_t* at[MAX_SIBLINGS]
    cdef acc_t bias = bias_of(&g.storage, g.ops.bias, channel, source)
    for q in range(stride):
        phase = first + q * ndim
        t_begin = max(t_begin, phase_t_begin(phase, last, tile))
        t_end = min(t_end, phase_t_end(phase, last, tile))
    for q in range(stride):
        phase = first + q * ndim
        # this residue's outputs outside the shared range
        scatter_row(g, phase, item, channel, lead, tile, source + q * product_stride,
                    row_stride, phase_t_begin(phase, last, tile),
                    min(t_begin, phase_t_end(phase, last, tile)))
        scatter_row(g, phase, item, channel, lead, tile, source + q * product_stride,
                    row_stride, max(t_end, phase_t_begin(phase, last, tile)),
                    phase_t_end(phase, last, tile))
        rows[q] = source + q * product_stride + (t_begin + phase[last].shift - tile.x)
    count = t_end - t_begin
    if count <= 0 or not output_base(g, first, item, channel, lead, &base):
        return
    base = base + stride * t_begin * step   # residues are 0 .. stride - 1, in row order
    for r in range(tile.rows):
        offset = base
        if not row_offset(g, first, tile.y + r, &offset):
            continue
        for q in range(stride):
            at[q] = rows[q] + r * row_stride
        store_interleaved(g, offset, at, stride, count, bias)


cdef void scatter_pair(const Gemm* g, const GemmStack* stack, const GemmStack* other,
                       const WorkItem* item, const Py_ssize_t* lead, TileSpan tile,
                       TileSpan other_tile, const acc_t* product,
                       const acc_t* other_product) noexcept nogil:
    """Write the products of a residue pair (see convt._plan._residue_pairs): the
    outputs both residues have in a row are interleaved, as scatter_siblings does
    for stacked residues; the others go through scatter_row."""
    cdef int ndim = g.problem.ndim
    cdef int last = ndim - 1
    cdef const PhaseAxis* even_phases = g.phases + stack.phase_start * ndim
    cdef const PhaseAxis* odd_phases = g.phases + other.phase_start * ndim
    cdef Py_ssize_t step = g.ops.y_strides[2 + last]
    cdef Py_ssize_t row, rho, m, channel, base, offset, r
    cdef Py_ssize_t even_begin, even_end, odd_begin, odd_end, t_begin, t_end
    cdef const PhaseAxis* even
    cdef const PhaseAxis* odd
    cdef const acc_t* even_rows
    cdef const acc_t* odd_rows
    cdef const acc_t* at[2]
    cdef acc_t bias
    for row in range(tile.first_row, tile.end_row):
        rho = row_phase(row, g.problem.mg, 1, &m)
        even = even_phases + rho * ndim
        odd = odd_phases + rho * ndim
        channel = item.group * g.problem.mg + m
        even_rows = product + (row - tile.first_row) * stack.columns
        odd_rows = other_product + (row - tile.first_row) * other.columns
        even_begin = phase_t_begin(even, last, tile)
        even_end = phase_t_end(even, last, tile)
        odd_begin = phase_t_begin(odd, last, other_tile)
        odd_end = phase_t_end(odd, last, other_tile)
        t_begin = max(even_begin, odd_begin)
        t_end = max(t_begin, min(even_end, odd_end))
        # outputs of one residue only (the ends of rows)
        scatter_row(g, even, item, channel, lead, tile, even_rows, stack.row_stride, even_begin,
                    min(t_begin, even_end))
        scatter_row(g, even, item, channel, lead, tile, even_rows, stack.row_stride,
                    max(t_end, even_begin), even_end)
        scatter_row(g, odd, item, channel, lead, other_tile, odd_rows, other.row_stride,
                    odd_begin, min(t_begin, odd_end))
        scatter_row(g, odd, item, channel, lead, other_tile, odd_rows, other.row_stride,
                    max(t_end, odd_begin), odd_end)
        if t_end == t_begin or not output_base(g, even, item, channel, lead, &base):
            continue
        bias = bias_of(&g.storage, g.ops.bias, channel, even_rows)
        base = base + 2 * t_begin * step   # residue 0, then 1
        for r in range(tile.rows):
            offset = base
            if not row_offset(g, even, tile.y + r, &offset):
                continue
            at[0] = even_rows + r * stack.row_stride + (t_begin + even[last].shift - tile.x)
            at[1] = odd_rows + r * other.row_stride + (t_begin + odd[last].shift - other_tile.x)
            store_interleaved(g, offset, at, 2, t_end - t_begin, bias)


cdef inline bint stores_transposed(const Gemm* g, const GemmStack* stack,
                                   const acc_t* like) noexcept nogil:
    """Whether a transposed stack's product goes straight into y (store_transposed):
    each channel's outputs of a grid row contiguous in y, in the accumulation type."""
    cdef int last = g.problem.ndim - 1
    return (stack.transposed and not g.layout.blas and g.ops.y_strides[2 + last] == 1
            and g.axes[last].stride == 1 and is_accumulation(g.storage.type, like))


cdef inline bint tile_rows_end_to_end(const Gemm* g, const PhaseAxis* phase, TileSpan tile,
                                      Py_ssize_t t_begin, Py_ssize_t t_end, Py_ssize_t base,
                                      Py_ssize_t* offset) noexcept nogil:
    """Whether every grid row of the tile has outputs, each row's are all the tile's
    columns, and y holds them row after row with no gap (a 1x1 or 3x3 Conv on a
    7x7 map): then the tile's transposed positions map onto one run of y per
    channel, from ``offset`` (set here)."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t first_row = base
    cdef Py_ssize_t last_row = base
    if (last < 1 or tile.rows < 2 or t_end - t_begin != tile.cols
            or t_begin + phase[last].shift != tile.x
            or g.axes[last - 1].stride * g.ops.y_strides[1 + last] != tile.cols):
        return False
    # row_offset is affine in the grid row where it holds: both ends decide
    if not (row_offset(g, phase, tile.y, &first_row)
            and row_offset(g, phase, tile.y + tile.rows - 1, &last_row)):
        return False
    offset[0] = first_row
    return last_row - first_row == (tile.rows - 1) * tile.cols


cdef inline void store_positions(const Gemm* g, Py_ssize_t first, Py_ssize_t rows,
                                 Py_ssize_t count, const acc_t* transposed,
                                 acc_t* y) noexcept nogil:
    """y[m, :count] = transposed[:count, m] (+ the bias of channel first + m), for the
    item's ``rows`` channels, channel_stride apart: the same two roundings as
    scatter_row's store."""
    cdef Py_ssize_t channel_stride = g.ops.y_strides[1]
    cdef Py_ssize_t m
    transpose(&g.storage, count, rows, transposed, rows, y, channel_stride, NULL)
    if g.ops.bias != NULL:
        for m in range(rows):
            store_run(&g.storage, <char*>(y + m * channel_stride), 1, y + m * channel_stride,
                      count, bias_of(&g.storage, g.ops.bias, first + m, y))


cdef void store_transposed(const Gemm* g, const GemmStack* stack, const WorkItem* item,
                           const Py_ssize_t* lead, TileSpan tile,
                           const acc_t* transposed) noexcept nogil:
    """scatter_tile for a stack that stores_transposed, from its transposed product
    (position j of the tile, its rows x cols in row order, row i of the item at
    transposed[j * rows + i]): each
    grid row's positions are transposed straight into the item's channels, then
    the bias is added, the same two roundings as scatter_row's store.  A
    transposed stack has one phase, so its rows are its output channels."""
    cdef int last = g.problem.ndim - 1
    cdef const PhaseAxis* phase = g.phases + stack.phase_start * g.problem.ndim
    cdef Py_ssize_t rows = tile.end_row - tile.first_row
    cdef Py_ssize_t first = item.group * g.problem.mg + tile.first_row
    cdef Py_ssize_t t_begin = phase_t_begin(phase, last, tile)
    cdef Py_ssize_t t_end = phase_t_end(phase, last, tile)
    cdef Py_ssize_t base, offset, r
    if t_end <= t_begin or not output_base(g, phase, item, first, lead, &base):
        return
    base = base + phase[last].residue + t_begin  # stride 1, contiguous rows
    if tile_rows_end_to_end(g, phase, tile, t_begin, t_end, base, &offset):
        # the tile's grid rows are whole rows of y, end to end: one transpose of all
        # its positions (on a 7x7 map, 8-wide blocks instead of 4-wide ones)
        store_positions(g, first, rows, tile.rows * tile.cols, transposed,
                        <acc_t*>element(g.ops.y, offset, g.storage.type))
        return
    for r in range(tile.rows):
        offset = base
        if not row_offset(g, phase, tile.y + r, &offset):
            continue
        store_positions(g, first, rows, t_end - t_begin,
                        transposed + (r * tile.cols + t_begin + phase[last].shift - tile.x) * rows,
                        <acc_t*>element(g.ops.y, offset, g.storage.type))


cdef void scatter_tile(const Gemm* g, const GemmStack* stack, const WorkItem* item,
                       const Py_ssize_t* lead, TileSpan tile, const acc_t* product) noexcept nogil:
    """Write the item's product rows to their output positions.

    Product column ``r * row_stride + (u - tile.x)`` holds grid position
    (lead, tile.y + r, u); position u is output ``residue + (u - shift) * stride``
    of a phase when ``0 <= u - shift < count``.
    """
    cdef int ndim = g.problem.ndim
    cdef int last = ndim - 1
    cdef const PhaseAxis* phases = g.phases + stack.phase_start * ndim
    cdef const PhaseAxis* phase
    cdef Py_ssize_t siblings = stack.siblings
    cdef Py_ssize_t row = tile.first_row
    cdef Py_ssize_t rho, m
    cdef const acc_t* source
    while row < tile.end_row:
        rho = row_phase(row, g.problem.mg, siblings, &m)
        phase = phases + rho * ndim
        source = product + (row - tile.first_row) * stack.columns
        if (stack.interleave and siblings <= MAX_SIBLINGS and row % siblings == 0
                and row + siblings <= tile.end_row):
            scatter_siblings(g, stack, phase, item, item.group * g.problem.mg + m, lead, tile,
                             source, stack.columns)
            row = row + siblings
        else:
            scatter_row(g, phase, item, item.group * g.problem.mg + m, lead, tile, source,
                        stack.row_stride, phase_t_begin(phase, last, tile),
                        phase_t_end(phase, last, tile))
            row = row + 1


# Channels-last data are transposed through blocks of TRANSPOSE_POSITIONS
# positions x 256 channels, when runs have at least MIN_CHANNEL_RUN channels.
cdef enum:
    TRANSPOSE_POSITIONS = 16
    MIN_CHANNEL_RUN = 8

# The bias of up to 256 channels without one (a static array: zero bits, zeros
# of either accumulation type).
cdef double ZERO_BIAS[256]


cdef void scatter_channels_last(const Gemm* g, const GemmStack* stack, const WorkItem* item,
                                const Py_ssize_t* lead, TileSpan tile,
                                const acc_t* product) noexcept nogil:
    """scatter_tile for a y whose channels are adjacent (NXC) and positions are not:
    the rows of one phase are consecutive channels, so for every output position
    their values are gathered from the product (plus bias) and stored as one
    contiguous run of channels, instead of one strided store per channel."""
    cdef int ndim = g.problem.ndim
    cdef int last = ndim - 1
    cdef const PhaseAxis* phases = g.phases + stack.phase_start * ndim
    cdef const PhaseAxis* phase
    cdef Py_ssize_t siblings = stack.siblings
    cdef Py_ssize_t mg = g.problem.mg
    cdef Py_ssize_t step = g.ops.y_strides[2 + last]
    cdef Py_ssize_t channel_step = siblings * stack.columns   # product rows of consecutive channels
    cdef const acc_t* bias = <const acc_t*>g.ops.bias_acc
    cdef Py_ssize_t row, rho, m, count, channel, base, offset, r, t0, t_begin, t_end, done, n, j
    cdef Py_ssize_t k, positions
    cdef const acc_t* source
    cdef const acc_t* column
    cdef acc_t added
    cdef acc_t block[TRANSPOSE_POSITIONS * 256]
    cdef const acc_t* zeros = <const acc_t*>ZERO_BIAS
    for row in range(tile.first_row, tile.end_row):
        rho = row_phase(row, mg, siblings, &m)
        # a run of channels starts at the tile's first rows and where a leading phase starts
        if row - siblings >= tile.first_row and m > 0:
            continue
        count = min(mg - m, (tile.end_row - 1 - row) // siblings + 1)
        phase = phases + rho * ndim
        channel = item.group * mg + m
        if not output_base(g, phase, item, channel, lead, &base):
            continue
        t_begin = phase_t_begin(phase, last, tile)
        t_end = phase_t_end(phase, last, tile)
        base = base + phase[last].residue * step
        source = product + (row - tile.first_row) * stack.columns + (phase[last].shift - tile.x)
        for r in range(tile.rows):
            offset = base
            if not row_offset(g, phase, tile.y + r, &offset):
                continue
            if is_accumulation(g.storage.type, product) and t_end > t_begin:
                # channels x positions in, positions x channels out, 256 channels at
                # a time (a missing bias adds zeros, as the other stores do)
                done = 0
                while done < count:
                    n = min(count - done, 256)
                    transpose(&g.storage, n, t_end - t_begin,
                              source + done * channel_step + r * stack.row_stride + t_begin,
                              channel_step, <acc_t*>element(
                                  g.ops.y, offset + t_begin * g.axes[last].stride * step + done,
                                  g.storage.type),
                              g.axes[last].stride * step,
                              bias + channel + done if bias != NULL else zeros)
                    done = done + n
                continue
            # narrow storage: blocks of TRANSPOSE_POSITIONS positions x 256 channels, read
            # along the product's rows (a column walk would hit one cache set per channel)
            t0 = t_begin
            while t0 < t_end:
                positions = min(<Py_ssize_t>TRANSPOSE_POSITIONS, t_end - t0)
                done = 0
                while done < count:
                    n = min(count - done, 256)
                    for j in range(n):
                        column = source + (done + j) * channel_step + r * stack.row_stride + t0
                        added = bias[channel + done + j] if bias != NULL else <acc_t>0
                        for k in range(positions):
                            block[k * 256 + j] = column[k] + added
                    for k in range(positions):
                        store_run(&g.storage, <char*>element(
                            g.ops.y, offset + (t0 + k) * g.axes[last].stride * step + done,
                            g.storage.type), 1, block + k * 256, n, <acc_t>0)
                    done = done + n
                t0 = t0 + positions
