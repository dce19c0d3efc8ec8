# Direct engine, stencil blocks: Conv layers with one input channel per group
# (depthwise, single-channel filters).  A block is up to layout.band_rows
# consecutive output rows of the band axis (the second to last; a 1-D row is
# its own block) of one image, output channel and outer output position; the
# kernel set's stencil sums every tap of the band and last axes into them,
# straight in y, once per combination of outer-axis taps.  Input rows outside
# the input read a zero row: padding is zeros, as in the GEMM's tiles, so the
# result is the textbook sum whatever the weights.
#
# A work item's blocks run along the band axis of one channel: its zero row is
# zeroed once per item (nothing writes it after), and a block gathers its weights
# only when they differ from the last block's (same offset in w).  A thread's
# block state: NO_ROW in a fresh item (stencil_item_starts), ZERO_ROW once its
# zero row is zeroed, WEIGHTS while it holds the gathered weights of the w offset
# that follows the state.  Small maps have few outputs per block to spread that
# work over (a depthwise 5x5 Conv on 28x28, 1 thread, Zen 3: 0.557 -> 0.533 ms,
# the best of interleaved runs).
#
# Invariants (convt._dispatch.stencil_rows): Conv; x's spatial axes and y's
# last axis are contiguous and of the accumulation type; the last axis has
# stride 1 (one tap-table entry); with band_rows > 1 the band axis has stride
# and dilation 1, so its taps read consecutive input rows.


cdef inline Py_ssize_t band_axis_of(const Direct* d) noexcept nogil:
    """The band axis, or -1 for 1-D rows."""
    return d.problem.ndim - 2


cdef void band_block_origin(const Direct* d, Py_ssize_t block, const DirectScratch* scratch,
                            Py_ssize_t* image, Py_ssize_t* m,
                            Py_ssize_t* first_row) noexcept nogil:
    """Decode ``block`` into its image, output channel, outer output position
    (scratch.out_index) and first band row: blocks run along the band axis first."""
    cdef Py_ssize_t band = band_axis_of(d)
    cdef Py_ssize_t remaining = block
    cdef Py_ssize_t blocks_per_band
    cdef int a
    first_row[0] = 0
    if band >= 0:
        blocks_per_band = (d.axes[band].out_size + d.layout.band_rows - 1) // d.layout.band_rows
        first_row[0] = (remaining % blocks_per_band) * d.layout.band_rows
        remaining = remaining // blocks_per_band
        for a in range(band - 1, -1, -1):
            scratch.out_index[a] = remaining % d.axes[a].out_size
            remaining = remaining // d.axes[a].out_size
    m[0] = remaining % d.problem.out_channels
    image[0] = remaining // d.problem.out_channels


cdef void band_sources(const Direct* d, const DirectScratch* scratch, const char* x_plane,
                       Py_ssize_t first_row, Py_ssize_t inputs,
                       const acc_t* zero_row) noexcept nogil:
    """scratch.sources[q] = the input row that band source q of the block reads
    (``zero_row`` where it lies outside the input), q < inputs: consecutive rows
    from the first tap's when the block has several rows, else one row per tap."""
    cdef Py_ssize_t band = band_axis_of(d)
    cdef Py_ssize_t table, index, q
    cdef int storage = d.storage.type
    if band < 0:
        scratch.sources[0] = <void*>x_plane
        return
    table = band * d.layout.max_stride * d.layout.max_taps
    for q in range(inputs):
        if d.layout.band_rows > 1:
            index = first_row + d.tap_offset[table] + q
        else:
            index = ((first_row + d.tap_offset[table + q]) * d.axes[band].decimation
                     + d.tap_residue[table + q])
        if 0 <= index < d.axes[band].in_size:
            scratch.sources[q] = <void*>element(x_plane, index * d.ops.x_strides[2 + band],
                                                storage)
        else:
            scratch.sources[q] = <void*>zero_row


cdef enum:
    NO_ROW = 0
    ZERO_ROW = 1
    WEIGHTS = 2


cdef inline Py_ssize_t state_index(const Direct* d) noexcept nogil:
    """Where a thread's block state lies in its ints workspace: after the arrays
    that direct_row_in lays out there."""
    return 2 * d.problem.ndim + 3 * d.layout.max_sources


cdef inline Py_ssize_t* block_state(const Direct* d, const DirectScratch* scratch) noexcept nogil:
    """A thread's block state, then the w offset of the weights it holds
    (scratch.tap lies ndim elements into the ints workspace)."""
    return scratch.tap - d.problem.ndim + state_index(d)


cdef inline void stencil_item_starts(const Direct* d, Py_ssize_t* ints) noexcept nogil:
    """Mark a thread's workspace fresh before the first block of a work item."""
    ints[state_index(d)] = NO_ROW


cdef void gather_band_weights(const Direct* d, Py_ssize_t w_offset, Py_ssize_t kernel_rows,
                              Py_ssize_t taps, acc_t* weights) noexcept nogil:
    """weights[i * taps + j] = the weight of band tap i and last-axis tap j, from
    ``w_offset`` (the channel's and the outer taps' position in w)."""
    cdef Py_ssize_t band = band_axis_of(d)
    cdef int last = d.problem.ndim - 1
    cdef Py_ssize_t band_table = band * d.layout.max_stride * d.layout.max_taps
    cdef Py_ssize_t last_table = last * d.layout.max_stride * d.layout.max_taps
    cdef Py_ssize_t i, j, offset
    for i in range(kernel_rows):
        offset = w_offset
        if band >= 0:
            offset = offset + d.tap_kernel[band_table + i] * d.ops.w_strides[3 + band]
        for j in range(taps):
            weights[i * taps + j] = <acc_t>convt_load_double(
                d.ops.w, offset + d.tap_kernel[last_table + j] * d.ops.w_strides[3 + last],
                d.storage.type)


cdef inline bint outer_taps(const Direct* d, const DirectScratch* scratch,
                            Py_ssize_t* x_offset, Py_ssize_t* w_offset) noexcept nogil:
    """Add the input position and the kernel position of the current outer-axis
    taps (axes before the band axis) to the offsets; False if that input is outside
    (padding: the kernel position is added all the same)."""
    cdef Py_ssize_t entry, index
    cdef bint inside = True
    cdef int a
    for a in range(d.problem.ndim - 2):
        entry = a * d.layout.max_stride * d.layout.max_taps + scratch.tap[a]
        index = ((scratch.out_index[a] + d.tap_offset[entry]) * d.axes[a].decimation
                 + d.tap_residue[entry])
        if index < 0 or index >= d.axes[a].in_size:
            inside = False
        else:
            x_offset[0] = x_offset[0] + index * d.ops.x_strides[2 + a]
        w_offset[0] = w_offset[0] + d.tap_kernel[entry] * d.ops.w_strides[3 + a]
    return inside


cdef inline bint next_outer_taps(const Direct* d, const DirectScratch* scratch) noexcept nogil:
    """Advance the odometer over outer-axis taps; False after the last combination."""
    cdef int a
    for a in range(d.problem.ndim - 3, -1, -1):
        scratch.tap[a] = scratch.tap[a] + 1
        if scratch.tap[a] < d.tap_count[a * d.layout.max_stride]:
            return True
        scratch.tap[a] = 0
    return False


cdef void stencil_block(const Direct* d, Py_ssize_t block, const DirectScratch* scratch,
                        acc_t* zero_row) noexcept nogil:
    """Compute one block of output rows in y (see the file's comment)."""
    cdef int last = d.problem.ndim - 1
    cdef Py_ssize_t band = band_axis_of(d)
    cdef convt_stencil_shape shape
    cdef Py_ssize_t image, m, first_row, group, x_offset, w_offset, y_offset, r
    cdef Py_ssize_t y_row_stride = d.ops.y_strides[2 + band] if band >= 0 else 0
    cdef int storage = d.storage.type
    cdef bint accumulate = False
    cdef acc_t bias
    cdef acc_t* y_rows
    cdef Py_ssize_t* state = block_state(d, scratch)
    cdef Py_ssize_t q
    cdef int a
    band_block_origin(d, block, scratch, &image, &m, &first_row)
    group = quotient(m, d.problem.mg)
    shape.rows = 1
    shape.kernel_rows = 1
    if band >= 0:
        shape.rows = min(d.layout.band_rows, d.axes[band].out_size - first_row)
        shape.kernel_rows = d.tap_count[band * d.layout.max_stride]
    shape.taps = d.tap_count[last * d.layout.max_stride]
    shape.offsets = d.tap_offset + last * d.layout.max_stride * d.layout.max_taps
    shape.in_size = d.axes[last].in_size
    shape.count = d.axes[last].out_size
    shape.out_stride = y_row_stride
    y_offset = image * d.ops.y_strides[0] + m * d.ops.y_strides[1] + first_row * y_row_stride
    for a in range(max(band, 0)):
        y_offset = y_offset + scratch.out_index[a] * d.ops.y_strides[2 + a]
        scratch.tap[a] = 0
    y_rows = <acc_t*>element(d.ops.y, y_offset, storage)
    if state[0] == NO_ROW:
        memset(zero_row, 0, shape.in_size * sizeof(acc_t))
        state[0] = ZERO_ROW
    while shape.kernel_rows > 0 and shape.taps > 0:
        # one combination of outer-axis taps (none for 1-D and 2-D)
        x_offset = image * d.ops.x_strides[0] + group * d.ops.x_strides[1]
        w_offset = group * d.ops.w_strides[0] + (m - group * d.problem.mg) * d.ops.w_strides[2]
        if outer_taps(d, scratch, &x_offset, &w_offset):
            band_sources(d, scratch, element(d.ops.x, x_offset, storage), first_row,
                         shape.rows + shape.kernel_rows - 1, zero_row)
        else:
            # outer taps on padding: its zeros times the kernel plane's weights, as the
            # text's zero padding has them (0 x Inf is NaN), like the band and last axes
            for q in range(shape.rows + shape.kernel_rows - 1):
                scratch.sources[q] = <void*>zero_row
        if state[0] != WEIGHTS or state[1] != w_offset:
            gather_band_weights(d, w_offset, shape.kernel_rows, shape.taps,
                                <acc_t*>scratch.weights)
            state[0] = WEIGHTS
            state[1] = w_offset
        if acc_t is float:
            d.storage.kernels.f32.stencil(&shape, <const float* const*>scratch.sources,
                                          <const float*>scratch.weights, y_rows, accumulate)
        else:
            d.storage.kernels.f64.stencil(&shape, <const double* const*>scratch.sources,
                                          <const double*>scratch.weights, y_rows, accumulate)
        accumulate = True
        if not next_outer_taps(d, scratch):
            break
    bias = bias_of(&d.storage, d.ops.bias, m, y_rows)
    for r in range(shape.rows):
        if not accumulate:
            memset(y_rows + r * y_row_stride, 0, shape.count * sizeof(acc_t))
        if d.ops.bias != NULL:
            if acc_t is float:
                d.storage.kernels.f32.add_bias(y_rows + r * y_row_stride,
                                               y_rows + r * y_row_stride, shape.count, bias)
            else:
                d.storage.kernels.f64.add_bias(y_rows + r * y_row_stride,
                                               y_rows + r * y_row_stride, shape.count, bias)
