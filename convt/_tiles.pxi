# The GEMM engine's B operand: tile buffers filled from x.
#
# A tile's buffer holds, for each input channel of a K chunk, the tile's input
# rows zero-padded by the stack's reach, so that tap j of product column q is
# buffer[q + offsets[j]]; gathered tiles (im2col-like) serve stacks whose taps
# are too sparse for a window.  One-tap stacks over whole contiguous rows read
# x itself (input_as_operand): no copy.

# Bytes per cache line, the step of cache hints (64 on every CPU convt targets;
# a longer line only repeats a hint).
cdef enum:
    CACHE_LINE_BYTES = 64
    # fill_channel_rows hints the next channel's rows only where the group's input
    # exceeds this: smaller inputs stay in L2 from call to call, and on a tiny
    # ConvTranspose (64 channels of 8x8) the hints took a tenth of the copy
    FILL_HINT_MIN_BYTES = 256 * 1024


cdef inline void zero_run(acc_t* dst, Py_ssize_t count) noexcept nogil:
    """dst[:count] = 0; halos are a few elements, where a loop beats a memset call."""
    cdef Py_ssize_t i
    if count > 32:
        memset(dst, 0, count * sizeof(acc_t))
    else:
        for i in range(count):
            dst[i] = 0


cdef inline void fill_run(const Gemm* g, acc_t* dst, Py_ssize_t count, Py_ssize_t origin,
                          const char* x_row, Py_ssize_t residue) noexcept nogil:
    """dst[i] = x_row[decimation * (origin + i) + residue] where that index is inside
    the last input axis, else 0 (x_row: the row's index 0; decimation and residue
    1 and 0 but for Conv's strides)."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t decimation = g.axes[last].decimation
    cdef Py_ssize_t size = g.axes[last].in_size - residue
    if decimation == 2:  # a division per run costs as much as a short copy
        size = (size + 1) >> 1
    elif decimation != 1:
        size = (size + decimation - 1) // decimation
    cdef Py_ssize_t step = g.ops.x_strides[2 + last]
    cdef Py_ssize_t lo = min(max(0, -origin), count)
    cdef Py_ssize_t hi = max(lo, min(count, size - origin))
    zero_run(dst, lo)
    if hi > lo:
        load_run(&g.storage, dst + lo,
                 element(x_row, (decimation * (origin + lo) + residue) * step, g.storage.type),
                 decimation * step, hi - lo)
    zero_run(dst + hi, count - hi)


cdef inline void fill_run_pair(const Gemm* g, acc_t* even, acc_t* odd, Py_ssize_t count,
                               Py_ssize_t origin, const acc_t* x_row) noexcept nogil:
    """fill_run for the two residues of a last axis decimated by 2, in one pass over
    the input row: even[i] = x_row[2 (origin + i)], odd[i] = x_row[2 (origin + i) + 1],
    0 outside the axis (x_row: contiguous, of the accumulation type)."""
    cdef Py_ssize_t in_size = g.axes[g.problem.ndim - 1].in_size
    cdef Py_ssize_t lo = min(max(0, -origin), count)
    # the odd residue has in_size // 2 inputs, the even one that or one more
    cdef Py_ssize_t hi_odd = max(lo, min(count, (in_size >> 1) - origin))
    cdef Py_ssize_t hi_even = max(lo, min(count, ((in_size + 1) >> 1) - origin))
    cdef const acc_t* src = x_row + 2 * (origin + lo)
    cdef acc_t* e = even + lo
    cdef acc_t* o = odd + lo
    cdef Py_ssize_t i
    zero_run(even, lo)
    zero_run(odd, lo)
    for i in range(hi_odd - lo):  # one read for both: the compiler vectorises the split
        e[i] = src[2 * i]
        o[i] = src[2 * i + 1]
    if hi_even > hi_odd:
        even[hi_odd] = x_row[2 * (origin + hi_odd)]
    zero_run(even + hi_even, count - hi_even)
    zero_run(odd + hi_odd, count - hi_odd)


cdef inline int residue_pairing(const Gemm* g, const GemmStack* stack, Py_ssize_t combo,
                                Py_ssize_t combos, bint channels_last,
                                const acc_t* like) noexcept nogil:
    """For Conv's last axis decimated by 2, read contiguously in the accumulation
    type: 1 if residue combination ``combo`` of the buffer's planes has last-axis
    residue 0 and the next one is the same but for residue 1 (fill_run_pair fills
    both), 2 if it is that next one, else 0."""
    cdef int ndim = g.problem.ndim
    cdef int last = ndim - 1
    cdef const Py_ssize_t* residues = g.residues + (stack.residue_start + combo) * ndim
    cdef const Py_ssize_t* other
    cdef int a
    if (channels_last or g.axes[last].decimation != 2 or g.ops.x_strides[2 + last] != 1
            or not is_accumulation(g.storage.type, like)):
        return 0
    if residues[last] == 0 and combo + 1 < combos:
        other = residues + ndim
    elif residues[last] == 1 and combo > 0:
        other = residues - ndim
    else:
        return 0
    if other[last] != 1 - residues[last]:
        return 0
    for a in range(last):
        if other[a] != residues[a]:
            return 0
    return 1 + residues[last]


cdef void fill_row_channels_last(const Gemm* g, acc_t* dst, Py_ssize_t channel_step,
                                 Py_ssize_t channels, Py_ssize_t count, Py_ssize_t origin,
                                 const char* x_row, Py_ssize_t residue) noexcept nogil:
    """fill_run for ``channels`` consecutive channels of channels-last input at once:
    dst[c * channel_step + i] = x_row[c, decimation * (origin + i) + residue] (or 0
    outside the last axis).  Each position's channels are one contiguous read,
    spread over the channels' buffer rows: reading channel by channel would load
    every cache line of the row once per channel."""
    cdef int last = g.problem.ndim - 1
    cdef int storage = g.storage.type
    cdef Py_ssize_t decimation = g.axes[last].decimation
    cdef Py_ssize_t size = (g.axes[last].in_size - residue + decimation - 1) // decimation
    cdef Py_ssize_t step = g.ops.x_strides[2 + last] * decimation
    cdef Py_ssize_t lo = min(max(0, -origin), count)
    cdef Py_ssize_t hi = max(lo, min(count, size - origin))
    cdef Py_ssize_t c, k, q0, positions, done, chunk
    cdef const char* source
    cdef acc_t block[TRANSPOSE_POSITIONS * 256]
    for c in range(channels):
        zero_run(dst + c * channel_step, lo)
        zero_run(dst + c * channel_step + hi, count - hi)
    x_row = element(x_row, residue * g.ops.x_strides[2 + last], storage)
    if is_accumulation(storage, dst):
        if hi > lo:  # positions x channels in, channels x positions out
            transpose(&g.storage, hi - lo, channels,
                      <const acc_t*>element(x_row, (origin + lo) * step, storage), step,
                      dst + lo, channel_step, NULL)
        return
    # narrow storage: blocks of TRANSPOSE_POSITIONS positions x 256 channels,
    # widened, then transposed into the buffer rows
    q0 = lo
    while q0 < hi:
        positions = min(<Py_ssize_t>TRANSPOSE_POSITIONS, hi - q0)
        done = 0
        while done < channels:
            chunk = min(256, channels - done)
            for k in range(positions):
                source = element(x_row, (origin + q0 + k) * step, storage)
                load_run(&g.storage, block + k * 256, element(source, done, storage), 1, chunk)
            transpose(&g.storage, positions, chunk, block, 256, dst + done * channel_step + q0,
                      channel_step, NULL)
            done = done + chunk
        q0 = q0 + positions


cdef inline void zero_planes(acc_t* dst, acc_t* odd_dst, Py_ssize_t channel_step,
                             Py_ssize_t channels, Py_ssize_t start, Py_ssize_t count) noexcept nogil:
    """Zero ``count`` elements from ``start`` in each channel's plane of ``dst``, and of
    ``odd_dst`` when it is not NULL (a residue-1 plane filled in the same pass)."""
    cdef Py_ssize_t channel
    for channel in range(channels):
        memset(dst + channel * channel_step + start, 0, count * sizeof(acc_t))
        if odd_dst != NULL:
            memset(odd_dst + channel * channel_step + start, 0, count * sizeof(acc_t))


cdef inline Py_ssize_t input_row(const Gemm* g, Py_ssize_t grid_row,
                                 const Py_ssize_t* residues) noexcept nogil:
    """The input row (index on axis ndim - 2) that a buffer row at ``grid_row`` reads,
    or -1 where it lies outside x (a row of zeros); 0 for 1-D input."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t index
    if last < 1:
        return 0
    index = grid_row * g.axes[last - 1].decimation + residues[last - 1]
    return index if 0 <= index < g.axes[last - 1].in_size else -1


cdef void fill_channel_rows(const Gemm* g, const GemmStack* stack, acc_t* dst, acc_t* odd_dst,
                            const char* x_plane, Py_ssize_t y_origin, Py_ssize_t x_origin,
                            const Py_ssize_t* residues, Py_ssize_t rows,
                            Py_ssize_t next_channel) noexcept nogil:
    """One channel's ``rows`` rows of a buffer plane (and of its residue-1 sibling when
    ``odd_dst`` is not NULL), from x_plane (the channel's plane at the plane's
    leading coordinates).  One channel at a time keeps the reads one stream the
    hardware prefetchers follow; rows across channels read a plane apart each time
    (vnet3d_k3s2: the copy 24% -> 13% of the call, batch2d_k3s1 7.7% -> 3.8%).

    Each channel's rows are a short run of a plane that x's size keeps beyond L2
    (ResNet's k3s2 layer: 1.6 MiB), too short for the prefetchers to catch up: the
    same rows of the channel ``next_channel`` bytes further on (0: none; x's last
    axis is then contiguous, see fill_planes) get cache hints meanwhile.  On 1 Zen 4 core the copy's share of that layer's call fell
    from 7.6% to 3.6% of the samples, and k3s2 layers over 112x112 and 32^3 ran
    2-5% faster (B N N B); 2 cores, whose copies share L3, moved within the noise."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t row_stride = stack.row_stride
    cdef Py_ssize_t decimation = g.axes[last].decimation
    cdef Py_ssize_t item_size = convt_itemsize(g.storage.type)
    cdef Py_ssize_t residue = 0 if odd_dst != NULL else residues[last]
    # the bytes of a row that the run reads (see fill_run); the hints are written
    # here, not in a function of their own, which GCC would take for pure and drop
    cdef Py_ssize_t first = max(0, decimation * x_origin + residue) * item_size
    cdef Py_ssize_t end = min(g.axes[last].in_size,
                              decimation * (x_origin + row_stride) + residue) * item_size
    cdef Py_ssize_t r, row_index, byte
    cdef const char* row
    if end <= first:
        next_channel = 0  # the run reads only padding
    for r in range(rows):
        row_index = input_row(g, y_origin + r, residues)
        if row_index < 0:
            zero_planes(dst, odd_dst, 0, 1, r * row_stride, row_stride)
            continue
        row = element(x_plane, row_index * g.ops.x_strides[1 + last], g.storage.type)
        if next_channel:
            byte = first
            while byte < end:
                convt_prefetch(row + next_channel + byte)
                byte = byte + CACHE_LINE_BYTES
            convt_prefetch(row + next_channel + end - 1)
        if odd_dst != NULL:
            fill_run_pair(g, dst + r * row_stride, odd_dst + r * row_stride, row_stride,
                          x_origin, <const acc_t*>row)
        else:
            fill_run(g, dst + r * row_stride, row_stride, x_origin, row, residues[last])


cdef inline bint whole_rows_inside(const Gemm* g, const GemmStack* stack, Py_ssize_t y_origin,
                                   Py_ssize_t x_origin, const Py_ssize_t* residues,
                                   bint paired, Py_ssize_t rows) noexcept nogil:
    """Whether a buffer plane's ``rows`` rows are consecutive whole rows of x, all inside the
    input, and x's rows lie end to end: then each channel's plane is one contiguous
    run of x (1x1 layers, kernels of one column, with no padding along the last
    axis; any storage type, load_run widens it).  Not for ``paired`` planes (two
    residues filled at once); x is channels-first."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t in_size = g.axes[last].in_size
    if (paired or x_origin != 0 or g.axes[last].decimation != 1
            or residues[last] != 0 or stack.row_stride != in_size
            or g.ops.x_strides[2 + last] != 1):
        return False
    return (last >= 1 and g.axes[last - 1].decimation == 1 and g.ops.x_strides[1 + last] == in_size
            and y_origin + residues[last - 1] >= 0
            and y_origin + residues[last - 1] + rows <= g.axes[last - 1].in_size)


cdef void fill_planes(const Gemm* g, const GemmStack* stack, const StackAxis* axes,
                      const char* x_image, Py_ssize_t c_begin, Py_ssize_t c_end,
                      bint channels_last, const Py_ssize_t* lead, TileSpan tile,
                      Py_ssize_t rows, acc_t* buffer) noexcept nogil:
    """fill_buffer's planes for channels [c_begin, c_end) into ``buffer`` (channel
    c_begin's planes first): the first ``rows`` of each plane's buffer_rows, those
    from grid row tile.y - span on."""
    cdef int last = g.problem.ndim - 1
    cdef int storage = g.storage.type
    cdef Py_ssize_t row_stride = stack.row_stride
    cdef Py_ssize_t plane_size = stack.buffer_rows * row_stride
    cdef Py_ssize_t x_origin = tile.x - axes[last].span
    cdef Py_ssize_t y_origin = tile.y - (axes[last - 1].span if last >= 1 else 0)
    cdef Py_ssize_t channels = c_end - c_begin
    cdef Py_ssize_t channel_step = g.ops.x_strides[1]
    cdef Py_ssize_t lead_planes = 1
    cdef Py_ssize_t channel, plane, rest, index, offset, r, row_index, combos, next_channel
    # fill_channel_rows hints the next channel's rows: inputs of contiguous rows
    # beyond FILL_HINT_MIN_BYTES per group
    cdef Py_ssize_t channel_distance = channel_step if channel_step >= 0 else -channel_step
    cdef bint hinted = (g.ops.x_strides[2 + last] == 1 and g.problem.cg * channel_distance
                        * convt_itemsize(storage) >= FILL_HINT_MIN_BYTES)
    cdef const Py_ssize_t* residues
    cdef const char* row
    cdef int a, pairing
    cdef bint inside
    cdef acc_t* dst
    cdef acc_t* odd_dst
    for a in range(last - 1):
        lead_planes = lead_planes * (axes[a].span + 1)
    combos = stack.buffer_planes // lead_planes
    for plane in range(stack.buffer_planes):
        pairing = residue_pairing(g, stack, plane // lead_planes, combos, channels_last, buffer)
        if pairing == 2:
            continue  # filled with its residue-0 sibling
        dst = buffer + plane * plane_size
        # the residue-1 plane of the same leading coordinates, filled in the same pass
        odd_dst = dst + lead_planes * plane_size if pairing == 1 else NULL
        residues = g.residues + (stack.residue_start + plane // lead_planes) * g.problem.ndim
        offset = c_begin * channel_step
        inside = True
        rest = plane % lead_planes
        for a in range(last - 2, -1, -1):
            index = lead[a] - axes[a].span + rest % (axes[a].span + 1)
            index = index * g.axes[a].decimation + residues[a]
            rest = rest // (axes[a].span + 1)
            if index < 0 or index >= g.axes[a].in_size:
                inside = False
                break
            offset = offset + index * g.ops.x_strides[2 + a]
        if not inside:
            zero_planes(dst, odd_dst, stack.buffer_channel, channels, 0, rows * row_stride)
        elif channels_last:
            for r in range(rows):
                row_index = input_row(g, y_origin + r, residues)
                if row_index < 0:
                    zero_planes(dst, odd_dst, stack.buffer_channel, channels, r * row_stride,
                                row_stride)
                    continue
                fill_row_channels_last(g, dst + r * row_stride, stack.buffer_channel, channels,
                                       row_stride, x_origin,
                                       element(x_image, offset + row_index
                                               * g.ops.x_strides[1 + last], storage),
                                       residues[last])
        elif whole_rows_inside(g, stack, y_origin, x_origin, residues, odd_dst != NULL, rows):
            # the plane's rows are consecutive whole rows of x: one run per channel
            row = element(x_image, offset + (y_origin + residues[last - 1])
                          * g.ops.x_strides[1 + last], storage)
            for channel in range(channels):
                load_run(&g.storage, dst + channel * stack.buffer_channel,
                         element(row, channel * channel_step, storage), 1,
                         rows * row_stride)
        else:
            for channel in range(channels):
                next_channel = (channel_step * convt_itemsize(storage)
                                if c_begin + channel + 1 < g.problem.cg and hinted else 0)
                fill_channel_rows(g, stack, dst + channel * stack.buffer_channel,
                                  odd_dst + channel * stack.buffer_channel
                                  if odd_dst != NULL else NULL,
                                  element(x_image, offset + channel * channel_step, storage),
                                  y_origin, x_origin, residues, rows, next_channel)


cdef void fill_buffer(const Gemm* g, const GemmStack* stack, const StackAxis* axes,
                      const char* x_image, Py_ssize_t c_begin, Py_ssize_t c_end,
                      const Py_ssize_t* lead, TileSpan tile, acc_t* buffer) noexcept nogil:
    """Copy the input a tile reads, once, into a zero-padded buffer.

    Buffer axes: per input channel, one plane per decimated input residue
    (Conv's strides; one plane otherwise), then each leading axis spans its
    taps (span + 1 planes), axis ndim - 2 the tile's rows and their taps
    (buffer_rows), the last axis a row of row_stride (columns plus taps).
    Tap j of product column q is buffer[q + buffer_offsets[j]].  Grid
    coordinates u read input index ``decimation * u + residue`` per axis.
    Channels-last input is copied position by position, all channels at once;
    channel-first input of several planes one channel at a time, all its
    planes in turn: the residue planes of a strided Conv read alternate rows
    of the same few lines of x, which the first plane brings into L1 for the
    others (one plane: per channel too, within fill_planes, without the
    planes' setup per channel).
    """
    fill_channels(g, stack, axes, x_image, c_begin, c_end, lead, tile, stack.buffer_rows, buffer)
    # the last panel of the last channel may read up to one panel past the data
    memset(buffer + (c_end - c_begin) * stack.buffer_channel, 0, stack.panel * sizeof(acc_t))


cdef void fill_channels(const Gemm* g, const GemmStack* stack, const StackAxis* axes,
                        const char* x_image, Py_ssize_t c_begin, Py_ssize_t c_end,
                        const Py_ssize_t* lead, TileSpan tile, Py_ssize_t rows,
                        acc_t* buffer) noexcept nogil:
    """fill_buffer's planes of channels [c_begin, c_end) (their first ``rows`` rows,
    see fill_planes), written nowhere else."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t channel
    cdef bint channels_last = (g.ops.x_strides[1] == 1 and g.ops.x_strides[2 + last] != 1
                               and c_end - c_begin >= MIN_CHANNEL_RUN)
    if channels_last or stack.buffer_planes == 1:
        fill_planes(g, stack, axes, x_image, c_begin, c_end, channels_last, lead, tile, rows,
                    buffer)
    else:
        for channel in range(c_begin, c_end):
            fill_planes(g, stack, axes, x_image, channel, channel + 1, False, lead, tile, rows,
                        buffer + (channel - c_begin) * stack.buffer_channel)


cdef void fill_image_window(const Gemm* g, const GemmStack* stack, const StackAxis* axes,
                            Py_ssize_t image, Py_ssize_t group, Py_ssize_t first,
                            Py_ssize_t end, acc_t* buffer) noexcept nogil:
    """Rows [first, end) of every plane of the window of one image and group, for an
    image-window stack (its buffer fields describe the window: every grid row plus
    the taps' span, whole rows; each channel's planes padded to a stride that
    spreads the channels over the cache sets).  With ``first`` 0 also the
    channels' padding, and the panel of zeros after the last channel that the last
    tile's kernels may read."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t cg = g.problem.cg
    cdef Py_ssize_t lead[1]
    cdef Py_ssize_t filled = stack.buffer_planes * stack.buffer_rows * stack.row_stride
    cdef Py_ssize_t channel
    cdef TileSpan rows
    cdef const char* x_image = element(
        g.ops.x, image * g.ops.x_strides[0] + group * cg * g.ops.x_strides[1], g.storage.type)
    rows.x = axes[last].first
    rows.cols = axes[last].extent
    rows.y = (axes[last - 1].first if last >= 1 else 0) + first
    rows.rows = end - first
    fill_channels(g, stack, axes, x_image, 0, cg, lead, rows, end - first,
                  buffer + first * stack.row_stride)
    if first == 0:  # (the rows from 0 are a window's first)
        for channel in range(cg):
            zero_run(buffer + channel * stack.buffer_channel + filled,
                     stack.buffer_channel - filled)
        memset(buffer + cg * stack.buffer_channel, 0, stack.panel * sizeof(acc_t))


cdef void gather_tile(const Gemm* g, const GemmStack* stack, const char* x_image,
                      Py_ssize_t c_begin, Py_ssize_t c_end, Py_ssize_t* lead, TileSpan tile,
                      acc_t* operand) noexcept nogil:
    """A gathered (im2col) tile: rows of `columns` positions,
    operand[(c, j), r * row_stride + q] = x[c, lead, tile.y + r, tile.x + q + offset(j)].
    For the micro-kernels, the positions a short tile does not have are zeroed
    up to the last panel they read.  (lead[ndim - 2] is used as scratch.)"""
    cdef int ndim = g.problem.ndim
    cdef int last = ndim - 1
    cdef const Py_ssize_t* offsets = g.tap_offsets + stack.tap_start * ndim
    cdef const Py_ssize_t* residues = g.tap_residues + stack.tap_start * ndim
    cdef Py_ssize_t channel, j, index, x_offset, r
    cdef int a
    cdef bint inside
    cdef acc_t* dst
    for r in range(tile.rows):
        if last >= 1:
            lead[last - 1] = tile.y + r
        for channel in range(c_begin, c_end):
            for j in range(stack.taps):
                dst = operand + ((channel - c_begin) * stack.taps + j) * stack.columns \
                    + r * stack.row_stride
                x_offset = channel * g.ops.x_strides[1]
                inside = True
                for a in range(last):
                    index = ((lead[a] + offsets[j * ndim + a]) * g.axes[a].decimation
                             + residues[j * ndim + a])
                    if index < 0 or index >= g.axes[a].in_size:
                        inside = False
                        break
                    x_offset = x_offset + index * g.ops.x_strides[2 + a]
                if inside:
                    fill_run(g, dst, tile.cols, tile.x + offsets[j * ndim + last],
                             element(x_image, x_offset, g.storage.type),
                             residues[j * ndim + last])
                else:
                    memset(dst, 0, tile.cols * sizeof(acc_t))
    if not g.layout.blas:
        pad_gathered_tile(stack, c_end - c_begin, tile, operand)


cdef void pad_gathered_tile(const GemmStack* stack, Py_ssize_t channels, TileSpan tile,
                            acc_t* operand) noexcept nogil:
    """Zero the positions of each gathered row that a short tile leaves out and the
    micro-kernels' last panel reads (never stored; zeros keep them cheap)."""
    cdef Py_ssize_t used = (tile.rows - 1) * stack.row_stride + tile.cols
    cdef Py_ssize_t end = min(stack.columns, (used + stack.panel - 1) // stack.panel * stack.panel)
    cdef Py_ssize_t k, r
    cdef acc_t* row
    for k in range(channels * stack.taps):
        row = operand + k * stack.columns
        if tile.cols < stack.row_stride:
            for r in range(tile.rows - 1):
                zero_run(row + r * stack.row_stride + tile.cols, stack.row_stride - tile.cols)
        zero_run(row + used, end - used)


cdef inline Py_ssize_t panel_width(const Gemm* g, Py_ssize_t used, Py_ssize_t p,
                                    Py_ssize_t panel) noexcept nogil:
    """Columns the kernels write (and read of B) for panel ``p`` of ``used`` columns: NR, or NR / 2
    for a last panel of at most NR / 2 positions (the half kernels)."""
    if g.layout.half_panels and 2 * (used - p * panel) <= panel:
        return panel // 2
    return panel


cdef const acc_t* input_as_operand(const Gemm* g, const GemmStack* stack, const char* x_image,
                                   Py_ssize_t c_begin, Py_ssize_t c_end,
                                   const Py_ssize_t* lead, TileSpan tile,
                                   const acc_t* like) noexcept nogil:
    """x itself as a tile's operand, or NULL: a one-tap, zero-offset stack (1x1 layers,
    the phases of k2s2) whose channel planes lie less than a page apart (identity
    stacks, see convt._plan.IN_PLACE_MAX_CHANNEL_BYTES), over whole rows of an x of
    the accumulation type whose rows
    are contiguous reads x[c, lead, tile.y + r, q] at the buffer's place r * row_stride
    + q, the channels g.x_channel_offsets apart; no copy.  The last panel may read up
    to a panel past the tile, or half a panel where the half kernels take it
    (panel_width): that must stay inside x,
    which the last tile of a 14x14 plane (56 positions: three panels and a half) does."""
    cdef int last = g.problem.ndim - 1
    cdef Py_ssize_t start, furthest, used, full, reach
    cdef int a
    if not (stack.identity and not stack.exact and g.x_extent > 0
            and is_accumulation(g.storage.type, like)
            and g.ops.x_strides[2 + last] == 1 and tile.cols == g.axes[last].in_size):
        return NULL
    if last >= 1 and tile.rows > 1 and g.ops.x_strides[1 + last] != stack.row_stride:
        return NULL
    start = c_begin * g.ops.x_strides[1] + tile.x * g.ops.x_strides[2 + last]
    if last >= 1:
        start = start + tile.y * g.ops.x_strides[1 + last]
    for a in range(last - 1):
        start = start + lead[a] * g.ops.x_strides[2 + a]
    used = (tile.rows - 1) * stack.row_stride + tile.cols
    full = used // stack.panel
    reach = full * stack.panel
    if reach < used:
        reach = reach + panel_width(g, used, full, stack.panel)
    # x_image is x's data pointer plus the image's and the group's offset
    furthest = ((x_image - g.ops.x) // sizeof(acc_t) + start
                + (c_end - c_begin - 1) * g.ops.x_strides[1] + reach)
    if furthest > g.x_extent:
        return NULL
    return <const acc_t*>element(x_image, start, g.storage.type)
