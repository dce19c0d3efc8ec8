# Channels-last rows of the direct engine: when x's and y's channels are
# innermost and every output channel reads its own input channel (depthwise,
# cg = mg = 1), a row is every channel of y[n, o_0, ..., o_{last-1}, :, :]
# and the channels are the vector lanes.  The row is a (position, channel)
# block, written in place when y holds the accumulation type, else in the
# thread's row buffer.  Each source (one leading-axis tap combination whose
# input row exists) and each of its last-axis taps adds one run of
# w[tap, :] * x[source row][i(t), :] to the outputs t of one last-axis entry
# (the kernel set's channels pass).  Per output the sums are taken in the
# direct engine's order (batches of sources; per batch, ConvTranspose: sources
# then taps; Conv: input residues, then sources, then taps), so both paths
# give bit-identical results.


cdef bint channel_source(const Direct* d, const DirectScratch* scratch, acc_t* x_rows,
                         Py_ssize_t image, Py_ssize_t batch) noexcept nogil:
    """Make source ``batch`` the input row of the current leading taps (converted
    into ``x_rows`` unless x holds the accumulation type), with its weights'
    first kernel position in scratch.w_offsets; False if that row does not exist."""
    cdef int last = d.problem.ndim - 1
    cdef int storage = d.storage.type
    cdef Py_ssize_t channels = d.layout.channels
    cdef Py_ssize_t x_offset = image * d.ops.x_strides[0]
    cdef Py_ssize_t kernel_row = 0
    cdef Py_ssize_t step = d.ops.x_strides[2 + last]
    cdef Py_ssize_t i
    cdef acc_t* row
    if not leading_taps(d, scratch, d.kernel_strides, &x_offset, &kernel_row):
        return False
    scratch.w_offsets[batch] = kernel_row
    if is_accumulation(storage, x_rows):
        scratch.sources[batch] = <void*>element(d.ops.x, x_offset, storage)
        return True
    row = x_rows + batch * d.layout.x_row
    if step == channels:
        load_run(&d.storage, row, element(d.ops.x, x_offset, storage), 1,
                 d.axes[last].in_size * channels)
    else:
        for i in range(d.axes[last].in_size):
            load_run(&d.storage, row + i * channels,
                     element(d.ops.x, x_offset + i * step, storage), 1, channels)
    scratch.sources[batch] = <void*>row
    return True


cdef void channel_flush(const Direct* d, const DirectScratch* scratch, Py_ssize_t count,
                        acc_t* out) noexcept nogil:
    """Add the batch of ``count`` sources to the row ``out`` ([position][channel])."""
    cdef int last = d.problem.ndim - 1
    cdef const Axis* axis = d.axes + last
    cdef Py_ssize_t channels = d.layout.channels
    cdef const acc_t** sources = <const acc_t**>scratch.sources
    cdef const acc_t* packed = <const acc_t*>d.packed
    cdef Py_ssize_t x_step = (d.ops.x_strides[2 + last]
                              if is_accumulation(d.storage.type, out) else channels)
    cdef Py_ssize_t entry, table, taps, first, out_step, outputs, residue, sub_row
    cdef Py_ssize_t s, j, offset, lo, hi
    for entry in range(d.layout.max_stride):
        taps = d.tap_count[last * d.layout.max_stride + entry]
        if taps == 0:
            continue
        table = (last * d.layout.max_stride + entry) * d.layout.max_taps
        if d.layout.transpose:     # outputs entry + t * stride read inputs t + offset
            first, out_step, outputs, residue = entry, axis.stride, phase_count(axis, entry), 0
        else:                      # outputs t read inputs (t + offset) * decimation + residue
            first, out_step, outputs, residue = 0, 1, axis.out_size, d.tap_residue[table]
        sub_row = (axis.in_size - residue + axis.decimation - 1) // axis.decimation
        for s in range(count):
            for j in range(taps):
                offset = d.tap_offset[table + j]
                lo = max(0, -offset)
                hi = min(outputs, sub_row - offset)
                if lo >= hi:
                    continue
                if acc_t is float:
                    d.storage.kernels.f32.channels(
                        hi - lo, channels,
                        sources[s] + ((lo + offset) * axis.decimation + residue) * x_step,
                        axis.decimation * x_step,
                        packed + (scratch.w_offsets[s] + d.tap_kernel[table + j]) * channels,
                        out + (first + lo * out_step) * channels, out_step * channels)
                else:
                    d.storage.kernels.f64.channels(
                        hi - lo, channels,
                        sources[s] + ((lo + offset) * axis.decimation + residue) * x_step,
                        axis.decimation * x_step,
                        packed + (scratch.w_offsets[s] + d.tap_kernel[table + j]) * channels,
                        out + (first + lo * out_step) * channels, out_step * channels)


cdef void channel_store(const Direct* d, const acc_t* out, Py_ssize_t y_offset,
                        bint in_place) noexcept nogil:
    """y's row = out + the channels' biases (out is y's row itself when ``in_place``)."""
    cdef int last = d.problem.ndim - 1
    cdef Py_ssize_t channels = d.layout.channels
    cdef Py_ssize_t positions = d.axes[last].out_size
    cdef Py_ssize_t step = d.ops.y_strides[2 + last]
    cdef const acc_t* bias = <const acc_t*>d.ops.bias_acc
    cdef acc_t* sums = <acc_t*>out
    cdef Py_ssize_t t, c
    if bias != NULL:
        for t in range(positions):
            for c in range(channels):
                sums[t * channels + c] = sums[t * channels + c] + bias[c]
    if in_place:
        return
    if step == channels:
        store_run(&d.storage, <char*>element(d.ops.y, y_offset, d.storage.type), 1, out,
                  positions * channels, 0)
        return
    for t in range(positions):
        store_run(&d.storage, <char*>element(d.ops.y, y_offset + t * step, d.storage.type), 1,
                  out + t * channels, channels, 0)


cdef void channel_row(const Direct* d, Py_ssize_t row, DirectScratch* scratch,
                      acc_t* floats) noexcept nogil:
    """Compute every channel of output row ``row`` (image, leading outputs)."""
    cdef int last = d.problem.ndim - 1
    cdef int storage = d.storage.type
    cdef Py_ssize_t channels = d.layout.channels
    cdef Py_ssize_t remaining = row
    cdef Py_ssize_t image, y_offset, batch = 0
    cdef bint in_place, skip = False
    cdef acc_t* out
    cdef int a
    for a in range(last - 1, -1, -1):
        scratch.out_index[a] = remaining % d.axes[a].out_size
        remaining = remaining // d.axes[a].out_size
    image = remaining
    y_offset = image * d.ops.y_strides[0]
    for a in range(last):
        y_offset = y_offset + scratch.out_index[a] * d.ops.y_strides[2 + a]
        if d.tap_count[a * d.layout.max_stride
                       + remainder(scratch.out_index[a], d.axes[a].stride)] == 0:
            skip = True        # a leading phase without taps: the bias only
        scratch.tap[a] = 0
    in_place = is_accumulation(storage, floats) and (
        d.ops.y_strides[2 + last] == channels or d.axes[last].out_size == 1)
    out = <acc_t*>element(d.ops.y, y_offset, storage) if in_place else floats
    memset(out, 0, d.axes[last].out_size * channels * sizeof(acc_t))
    while not skip:
        if channel_source(d, scratch, floats + d.layout.x_rows, image, batch):
            batch = batch + 1
            if batch == d.layout.max_sources:
                channel_flush(d, scratch, batch, out)
                batch = 0
        if not next_taps(d, scratch):
            break
    if batch:
        channel_flush(d, scratch, batch, out)
    channel_store(d, out, y_offset, in_place)


cdef void pack_channel_weights(const Direct* d, acc_t* packed) noexcept nogil:
    """packed[k][c] = w[group c, 0, 0, kernel position k] (row-major positions)."""
    cdef int ndim = d.problem.ndim
    cdef Py_ssize_t channels = d.layout.channels
    cdef Py_ssize_t positions = d.kernel_positions
    cdef Py_ssize_t k, c, remaining, index, offset
    cdef int a
    for k in range(positions):
        offset = 0
        remaining = k
        for a in range(ndim):
            index = remaining // d.kernel_strides[a]
            remaining = remaining - index * d.kernel_strides[a]
            offset = offset + index * d.ops.w_strides[3 + a]
        for c in range(channels):
            packed[k * channels + c] = <acc_t>convt_load_double(
                d.ops.w, offset + c * d.ops.w_strides[0], d.storage.type)


def transpose_planes(str family, src, dst):
    """``dst[n] = src[n].T`` for every ``n``, exactly, by the family's transpose kernels:
    ``src`` (N, R, C) and ``dst`` (N, C, R), C-contiguous, of one dtype (float32 or
    float64).  Channels-first planes to channels-last rows and back (see
    convt._dispatch.channels_last_problem)."""
    cdef Kernels kernels = kernels_named(family)
    cdef Py_ssize_t n, count = src.shape[0], rows = src.shape[1], cols = src.shape[2]
    cdef Py_ssize_t plane = rows * cols
    cdef bint doubles = src.dtype.itemsize == 8
    cdef char* source = <char*>data_of(src)
    cdef char* target = <char*>data_of(dst)
    if not (src.flags.c_contiguous and dst.flags.c_contiguous and src.dtype == dst.dtype
            and dst.shape == (count, cols, rows) and src.dtype.itemsize in (4, 8)):
        raise ValueError("transpose_planes: src (N, R, C) and dst (N, C, R), C-contiguous, "
                         "float32 or float64")
    with nogil:
        for n in range(count):
            if doubles:
                kernels.f64.transpose(rows, cols, <const double*>source + n * plane, cols,
                                      <double*>target + n * plane, rows, NULL)
            else:
                kernels.f32.transpose(rows, cols, <const float*>source + n * plane, cols,
                                      <float*>target + n * plane, rows, NULL)
