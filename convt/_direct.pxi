# Direct engine driver: one output row at a time, for problems of a few
# multiply-adds per output (single-channel or depthwise, small kernels),
# where a GEMM would degenerate.  Every (input channel, leading-axis tap) pair
# whose input row exists is a source; sources are summed, in batches, into
# each last-axis stride phase of the row by the kernel set's row kernel, then
# the phases are written out (interleaved for stride 2).  For Conv the row has
# one phase, and its last-axis entries are the input residues of a strided
# row: each source holds one decimated sub-row per residue.


cdef struct Direct:
    Problem problem
    const Axis* axes
    Operands ops
    Storage storage
    DirectLayout layout
    const Py_ssize_t* tap_count        # [ndim][max_stride]
    const Py_ssize_t* tap_kernel       # [ndim][max_stride][max_taps]
    const Py_ssize_t* tap_offset       # [ndim][max_stride][max_taps]
    const Py_ssize_t* tap_residue      # [ndim][max_stride][max_taps] (Conv)
    const Py_ssize_t* kernel_strides   # [ndim]: row-major strides of kernel positions
    Py_ssize_t kernel_positions        # channels-last rows: positions of packed
    const void* packed                 # channels-last rows: [position][channel] weights


# One thread's scratch, carved from its workspace (see convt._plan.direct_plan).
cdef struct DirectScratch:
    void* rows                         # accumulation type: [stride][phase_length] phase sums
    void* x_rows                       # [max_sources][x_row]: converted input rows
    void* weights                      # [max_sources][max_taps]: one phase's weights
    void** sources                     # [max_sources] input rows of the batch
    void** group_sources               # [max_sources] their sub-rows of one residue (Conv)
    Py_ssize_t* w_offsets              # [max_sources] their kernel rows in w
    Py_ssize_t* out_index              # [ndim]
    Py_ssize_t* tap                    # [ndim]


cdef inline Py_ssize_t quotient(Py_ssize_t value, Py_ssize_t divisor) noexcept nogil:
    """value // divisor, without a division for the common divisor 1 (a row does a
    dozen of these: integer divisions were a fifth of a depthwise row's cost)."""
    return value if divisor == 1 else value // divisor


cdef inline Py_ssize_t remainder(Py_ssize_t value, Py_ssize_t divisor) noexcept nogil:
    """value % divisor (see quotient)."""
    return 0 if divisor == 1 else value % divisor


cdef inline Py_ssize_t phase_count(const Axis* axis, Py_ssize_t residue) noexcept nogil:
    """Outputs residue + t * stride of an axis."""
    return (axis.out_size - residue + axis.stride - 1) // axis.stride


cdef inline void gather_entry_weights(const Direct* d, const DirectScratch* scratch,
                                     Py_ssize_t table, Py_ssize_t taps, Py_ssize_t count,
                                     acc_t* weights) noexcept nogil:
    """weights[s * taps + j] = the weight of last-axis tap j of entry ``table`` for source s."""
    cdef int last = d.problem.ndim - 1
    cdef Py_ssize_t s, j
    for s in range(count):
        for j in range(taps):
            weights[s * taps + j] = <acc_t>convt_load_double(
                d.ops.w, scratch.w_offsets[s] + d.tap_kernel[table + j] * d.ops.w_strides[3 + last],
                d.storage.type)


cdef void flush_conv_sources(const Direct* d, const DirectScratch* scratch, acc_t* rows,
                             Py_ssize_t count, bint accumulate) noexcept nogil:
    """Conv: add the batch of ``count`` sources to the row's one phase, residue by
    residue of the last axis (each source row holds one decimated sub-row per
    residue when the last stride decimates)."""
    cdef int last = d.problem.ndim - 1
    cdef const Axis* axis = d.axes + last
    cdef acc_t* weights = <acc_t*>scratch.weights
    cdef const acc_t** sources = <const acc_t**>scratch.sources
    cdef const acc_t** group_sources = <const acc_t**>scratch.group_sources
    cdef Py_ssize_t sub_row = (axis.in_size + axis.decimation - 1) // axis.decimation
    cdef Py_ssize_t group, table, taps, residue, s
    for group in range(d.layout.max_stride):
        table = (last * d.layout.max_stride + group) * d.layout.max_taps
        taps = d.tap_count[last * d.layout.max_stride + group]
        if taps == 0:
            continue
        residue = d.tap_residue[table]
        gather_entry_weights(d, scratch, table, taps, count, weights)
        for s in range(count):
            group_sources[s] = sources[s] + (group * sub_row if axis.decimation > 1 else 0)
        if acc_t is float:
            d.storage.kernels.f32.row(count, group_sources, weights, taps, d.tap_offset + table,
                                      (axis.in_size - residue + axis.decimation - 1)
                                      // axis.decimation, axis.out_size, rows, accumulate)
        else:
            d.storage.kernels.f64.row(count, group_sources, weights, taps, d.tap_offset + table,
                                      (axis.in_size - residue + axis.decimation - 1)
                                      // axis.decimation, axis.out_size, rows, accumulate)
        accumulate = True
    if not accumulate:
        memset(rows, 0, axis.out_size * sizeof(acc_t))


cdef void flush_sources(const Direct* d, const DirectScratch* scratch, acc_t* rows,
                        Py_ssize_t count, bint accumulate) noexcept nogil:
    """Add the batch of ``count`` source rows to every last-axis phase of ``rows``
    (scratch.rows)."""
    cdef int last = d.problem.ndim - 1
    cdef const Axis* axis = d.axes + last
    cdef acc_t* weights = <acc_t*>scratch.weights
    cdef const acc_t** sources = <const acc_t**>scratch.sources
    cdef Py_ssize_t table, taps, residue, s, j
    if not d.layout.transpose:
        flush_conv_sources(d, scratch, rows, count, accumulate)
        return
    for residue in range(min(axis.stride, axis.out_size)):
        table = (last * d.layout.max_stride + residue) * d.layout.max_taps
        taps = d.tap_count[last * d.layout.max_stride + residue]
        gather_entry_weights(d, scratch, table, taps, count, weights)
        if acc_t is float:
            d.storage.kernels.f32.row(count, sources, weights, taps, d.tap_offset + table,
                                      axis.in_size, phase_count(axis, residue),
                                      rows + residue * d.layout.phase_length, accumulate)
        else:
            d.storage.kernels.f64.row(count, sources, weights, taps, d.tap_offset + table,
                                      axis.in_size, phase_count(axis, residue),
                                      rows + residue * d.layout.phase_length, accumulate)


cdef void store_row(const Direct* d, const acc_t* rows, Py_ssize_t y_offset,
                    acc_t bias) noexcept nogil:
    """y row = its last-axis phases + bias; stride 2 into a contiguous row of the
    accumulation type interleaves the two phases with vector shuffles, anything
    else stores each phase with its stride."""
    cdef int last = d.problem.ndim - 1
    cdef int storage = d.storage.type
    cdef const Axis* axis = d.axes + last
    cdef Py_ssize_t step = d.ops.y_strides[2 + last]
    cdef Py_ssize_t residue, pairs = axis.out_size // 2
    if d.layout.interleave and axis.stride == 2 and pairs > 0:
        interleave_run(&d.storage, d.layout.stream_output,
                       <acc_t*>element(d.ops.y, y_offset, storage), rows,
                       rows + d.layout.phase_length, pairs, bias)
        if axis.out_size % 2:
            store_run(&d.storage, <char*>element(d.ops.y, y_offset + 2 * pairs * step, storage),
                      1, rows + pairs, 1, bias)
        return
    for residue in range(min(axis.stride, axis.out_size)):
        store_run(&d.storage, <char*>element(d.ops.y, y_offset + residue * step, storage),
                  axis.stride * step, rows + residue * d.layout.phase_length,
                  phase_count(axis, residue), bias)


cdef inline bint leading_taps(const Direct* d, const DirectScratch* scratch,
                              const Py_ssize_t* kernel_steps, Py_ssize_t* x_offset,
                              Py_ssize_t* kernel_offset) noexcept nogil:
    """Add to ``x_offset`` the input row that the current leading taps (scratch.tap)
    of the output row at scratch.out_index read, and to ``kernel_offset`` their
    kernel positions times ``kernel_steps`` (per leading axis); False if that input
    row does not exist."""
    cdef Py_ssize_t residue, entry, index
    cdef int a
    for a in range(d.problem.ndim - 1):
        residue = remainder(scratch.out_index[a], d.axes[a].stride)
        entry = (a * d.layout.max_stride + residue) * d.layout.max_taps + scratch.tap[a]
        # ConvTranspose: decimation 1, residue 0; Conv: output stride 1
        index = ((quotient(scratch.out_index[a], d.axes[a].stride) + d.tap_offset[entry])
                 * d.axes[a].decimation + d.tap_residue[entry])
        if index < 0 or index >= d.axes[a].in_size:
            return False
        x_offset[0] = x_offset[0] + index * d.ops.x_strides[2 + a]
        kernel_offset[0] = kernel_offset[0] + d.tap_kernel[entry] * kernel_steps[a]
    return True


cdef bint add_source(const Direct* d, const DirectScratch* scratch, acc_t* x_rows,
                     Py_ssize_t image, Py_ssize_t channel, Py_ssize_t m_local,
                     Py_ssize_t batch) noexcept nogil:
    """Make source ``batch`` the input row of (channel, current leading taps) of the
    output row at scratch.out_index, converted into ``x_rows`` (scratch.x_rows) when
    it is not a contiguous row of the accumulation type; False if that input row
    does not exist."""
    cdef int last = d.problem.ndim - 1
    cdef int storage = d.storage.type
    cdef Py_ssize_t x_offset = image * d.ops.x_strides[0] + channel * d.ops.x_strides[1]
    cdef Py_ssize_t group = quotient(channel, d.problem.cg)
    cdef Py_ssize_t w_offset = (group * d.ops.w_strides[0]
                                + (channel - group * d.problem.cg) * d.ops.w_strides[1]
                                + m_local * d.ops.w_strides[2])
    cdef const Axis* axis = d.axes + last
    cdef Py_ssize_t step = d.ops.x_strides[2 + last]
    cdef acc_t* row = x_rows + batch * d.layout.x_row
    if not leading_taps(d, scratch, d.ops.w_strides + 3, &x_offset, &w_offset):
        return False
    scratch.w_offsets[batch] = w_offset
    if axis.decimation > 1:
        load_decimated_row(d, row, element(d.ops.x, x_offset, storage))
        scratch.sources[batch] = <void*>row
    elif is_accumulation(storage, x_rows) and step == 1:
        scratch.sources[batch] = <void*>element(d.ops.x, x_offset, storage)
    else:
        load_run(&d.storage, row, element(d.ops.x, x_offset, storage), step, axis.in_size)
        scratch.sources[batch] = <void*>row
    return True


cdef void load_decimated_row(const Direct* d, acc_t* row, const char* x_row) noexcept nogil:
    """Conv with a last-axis stride: one sub-row per input residue its taps read,
    row[group * sub_row + u] = x_row[decimation * u + residue(group)]."""
    cdef int last = d.problem.ndim - 1
    cdef const Axis* axis = d.axes + last
    cdef Py_ssize_t step = d.ops.x_strides[2 + last]
    cdef Py_ssize_t sub_row = (axis.in_size + axis.decimation - 1) // axis.decimation
    cdef Py_ssize_t group, residue, table
    for group in range(d.layout.max_stride):
        table = (last * d.layout.max_stride + group) * d.layout.max_taps
        if d.tap_count[last * d.layout.max_stride + group] == 0:
            continue
        residue = d.tap_residue[table]
        load_run(&d.storage, row + group * sub_row,
                 element(x_row, residue * step, d.storage.type), axis.decimation * step,
                 (axis.in_size - residue + axis.decimation - 1) // axis.decimation)


cdef bint next_taps(const Direct* d, const DirectScratch* scratch) noexcept nogil:
    """Advance the odometer over leading-axis taps; False after the last combination."""
    cdef Py_ssize_t residue
    cdef int a
    for a in range(d.problem.ndim - 2, -1, -1):
        residue = remainder(scratch.out_index[a], d.axes[a].stride)
        scratch.tap[a] = scratch.tap[a] + 1
        if scratch.tap[a] < d.tap_count[a * d.layout.max_stride + residue]:
            return True
        scratch.tap[a] = 0
    return False


cdef void direct_row(const Direct* d, Py_ssize_t row, const DirectScratch* scratch,
                     acc_t* rows) noexcept nogil:
    """Compute one output row y[n, m, o_0, ..., o_{last-1}, :] (``rows``: scratch.rows)."""
    cdef int ndim = d.problem.ndim
    cdef int last = ndim - 1
    cdef Py_ssize_t remaining = row
    cdef Py_ssize_t mg = d.problem.mg
    cdef Py_ssize_t image, m, group, c, y_offset, batch
    cdef int a
    cdef bint skip, flushed
    if d.ops.y_strides[1] == 1 and d.ops.y_strides[2 + last] != 1:
        # channels-last y: rows in (image, leading outputs, channel) order, so that
        # consecutive rows read the same input positions and fill the same output
        # cache lines, one channel each
        m = remaining % d.problem.out_channels
        remaining = remaining // d.problem.out_channels
        for a in range(last - 1, -1, -1):
            scratch.out_index[a] = remaining % d.axes[a].out_size
            remaining = remaining // d.axes[a].out_size
        image = remaining
    else:
        for a in range(last - 1, -1, -1):
            scratch.out_index[a] = remaining % d.axes[a].out_size
            remaining = remaining // d.axes[a].out_size
        m = remaining % d.problem.out_channels
        image = remaining // d.problem.out_channels
    group = quotient(m, mg)
    # an output row on a leading phase without taps gets the bias only
    skip = False
    for a in range(last):
        if d.tap_count[a * d.layout.max_stride
                       + remainder(scratch.out_index[a], d.axes[a].stride)] == 0:
            skip = True
        scratch.tap[a] = 0
    batch = 0
    flushed = False
    for c in range(d.problem.cg if not skip else 0):
        while True:
            if add_source(d, scratch, <acc_t*>scratch.x_rows, image, group * d.problem.cg + c,
                          m - group * mg, batch):
                batch = batch + 1
                if batch == d.layout.max_sources:
                    flush_sources(d, scratch, rows, batch, flushed)
                    flushed = True
                    batch = 0
            if not next_taps(d, scratch):
                break
    if batch or not flushed:
        flush_sources(d, scratch, rows, batch, flushed)  # no sources at all: zeros
    y_offset = image * d.ops.y_strides[0] + m * d.ops.y_strides[1]
    for a in range(last):
        y_offset = y_offset + scratch.out_index[a] * d.ops.y_strides[2 + a]
    store_row(d, rows, y_offset, bias_of(&d.storage, d.ops.bias, m, rows))


cdef void direct_row_in(const Direct* d, Py_ssize_t row, acc_t* floats,
                        Py_ssize_t* ints) noexcept nogil:
    """direct_row with one thread's workspace laid out as DirectScratch."""
    cdef DirectScratch scratch
    scratch.rows = floats
    scratch.x_rows = floats + d.layout.x_rows
    scratch.weights = floats + d.layout.weights
    scratch.out_index = ints
    scratch.tap = ints + d.problem.ndim
    scratch.w_offsets = ints + 2 * d.problem.ndim
    scratch.sources = <void**>(ints + 2 * d.problem.ndim + d.layout.max_sources)
    scratch.group_sources = <void**>(ints + 2 * d.problem.ndim + 2 * d.layout.max_sources)
    if d.layout.channels:
        channel_row(d, row, &scratch, floats)
    elif d.layout.band_rows:
        stencil_block(d, row, &scratch, <acc_t*>scratch.x_rows)
    else:
        direct_row(d, row, &scratch, floats)


# One run of the direct engine, shared by the pool's threads: item i is the
# output rows [i * rows_per_item, (i + 1) * rows_per_item).
cdef struct DirectJob:
    const Direct* d
    Signals* signals
    void* workspace                    # (threads, layout.floats) accumulation elements
    Py_ssize_t* ints                   # (threads, layout.ints)
    Py_ssize_t rows_per_item


cdef inline void direct_task(const DirectJob* job, Py_ssize_t item, int slot,
                             acc_t* like) noexcept nogil:
    cdef const Direct* d = job.d
    cdef Py_ssize_t row
    cdef Py_ssize_t first = item * job.rows_per_item
    if d.layout.band_rows:
        stencil_item_starts(d, job.ints + slot * d.layout.ints)
    for row in range(first, min(d.layout.rows, first + job.rows_per_item)):
        # every 8 rows: a row is microseconds, reading the clock ~20 ns
        if (row - first) % 8 == 0 and stopped(job.signals, slot):
            return
        direct_row_in(d, row, <acc_t*>job.workspace + slot * d.layout.floats,
                      job.ints + slot * d.layout.ints)
    if d.layout.stream_output:
        convt_store_fence()  # the item's streamed rows, before the pool counts it done


cdef void direct_task_f32(void* job, Py_ssize_t item, int slot) noexcept nogil:
    direct_task(<const DirectJob*>job, item, slot, <float*>NULL)


cdef void direct_task_f64(void* job, Py_ssize_t item, int slot) noexcept nogil:
    direct_task(<const DirectJob*>job, item, slot, <double*>NULL)


# Work items the direct engine's rows are cut into: enough for any thread
# count's balance, few enough that claiming them costs nothing.
cdef enum:
    DIRECT_ITEMS = 256


cdef class DirectEngine:
    """The direct engine prepared for one plan and decision (convt._engine.Execution)."""

    cdef Direct d
    cdef object keep                   # the records and plan the pointers point into
    cdef bint doubles

    def __cinit__(self, problem, axes, plan, decision):
        self.keep = (problem, axes, plan)
        self.d.problem = (<const Problem*>data_of(problem))[0]
        self.d.axes = <const Axis*>data_of(axes)
        self.d.storage = storage_for(decision, <int>self.d.problem.storage)
        self.d.layout = (<const DirectLayout*>data_of(plan.layout))[0]
        self.d.tap_count = <const Py_ssize_t*>data_of(plan.tap_count)
        self.d.tap_kernel = <const Py_ssize_t*>data_of(plan.tap_kernel)
        self.d.tap_offset = <const Py_ssize_t*>data_of(plan.tap_offset)
        self.d.tap_residue = <const Py_ssize_t*>data_of(plan.tap_residue)
        self.d.kernel_strides = <const Py_ssize_t*>data_of(plan.kernel_strides)
        self.doubles = decision.accumulation.itemsize == 8

    def run(self, arrays, workspace, scratch, packed, int num_threads):
        """Every output row, on ``arrays`` (convt._engine.Operands), shared by up to
        ``num_threads`` pool threads; ``workspace`` is (threads, layout.floats) of
        the accumulation type, ``scratch`` (threads, layout.ints) intp, ``packed``
        (kernel positions, layout.channels) of the accumulation type, filled here
        for channels-last rows.  Returns the threads that took part."""
        cdef Direct d = self.d
        cdef DirectJob job
        cdef Signals signals = signals_for_this_call()
        cdef convt_task task = direct_task_f64 if self.doubles else direct_task_f32
        cdef Py_ssize_t rows = d.layout.rows
        cdef int used
        d.ops = operands_of(arrays)
        d.packed = data_of(packed)
        d.kernel_positions = packed.shape[0]
        if d.layout.channels:
            if self.doubles:
                pack_channel_weights(&d, <double*>d.packed)
            else:
                pack_channel_weights(&d, <float*>d.packed)
        job.d = &d
        job.signals = &signals
        job.workspace = <void*>data_of(workspace)
        job.ints = <Py_ssize_t*>data_of(scratch)
        job.rows_per_item = (rows + DIRECT_ITEMS - 1) // DIRECT_ITEMS
        with nogil:
            used = convt_run(task, &job, (rows + job.rows_per_item - 1) // job.rows_per_item,
                             num_threads)
        raise_if_stopped(&signals)
        return used
