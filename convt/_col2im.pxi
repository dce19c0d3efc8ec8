# Weight-bound ConvTranspose on small maps (convt._col2im; the rule that picks it is
# convt._dispatch.col2im_route): per group, the products of every input
# position of every image (the images' positions stacked: w is read once per call,
# not once per image) with every (output channel, tap) column of w,
#
#     C[p, m * taps + t] = sum over c of x[c, p] w[c, m, t],
#
# by the set's gemm kernels, w read once per call (in place by the sets' gemm_stream
# kernels, else its rows copied chunk by chunk into panels in L2; not packed once
# and cached, so no packed copy to keep or to compare with the weights), then
# each product added to the output it lands on
# (col2im).  A work item is one group and run of output channels: it owns those
# output planes of every image, fills them with the bias and adds its products
# image by image, position by position, tap by tap, so results do not depend on
# the thread count.


# The copy of w's rows hints the row this many rows ahead into the caches: an
# item's part of a row is a run of a few KiB, too short for the hardware
# prefetchers to reach full speed on (without the hints the call was 1.2-1.3x
# slower on Zen 3).
cdef enum:
    COL2IM_PREFETCH_ROWS = 8


cdef struct Col2imJob:
    bint doubles
    const convt_kernels_f32* kernels_f32
    const convt_kernels_f64* kernels_f64
    Py_ssize_t mr, nr, block           # kernel rows and columns; blocked-sum steps
    Py_ssize_t panel                   # positions per kernel call: nr, or nr / 2 (fixed
                                       # weights, by the half kernels)
    Py_ssize_t batch, groups, cg, mg, taps, positions, plane   # plane: outputs per channel
    Py_ssize_t stacked                 # batch * positions: the products' positions
    Py_ssize_t run, runs               # output channels per item; items per group
    Py_ssize_t depth_chunk             # K rows per kernel call (and per copy of w's panels)
    Py_ssize_t ldc                     # product columns (whole panels)
    const char* packed_x               # per group: row blocks [block][cg][rows] of the
                                       # stacked positions (fixed weights: panels)
    const char* w                      # (groups, cg, mg * taps), rows w_row apart
    Py_ssize_t w_group, w_row          # element strides
    const Py_ssize_t* panel_offsets    # k * nr
    const Py_ssize_t* row_offsets      # k * w_row where the set streams B rows in place
                                       # (gemm_stream), else NULL
    const char* made                   # fixed weights: w's column blocks, made once (see
                                       # col2im_make_blocks); NULL otherwise
    const Py_ssize_t* table            # [positions][taps]: output index in a plane, or -1
    const char* bias                   # (M,) of the dtype, or NULL
    char* y                            # (N, M, plane) C-contiguous
    Py_ssize_t per_thread              # workspace elements per thread (64-byte multiples)
    char* workspace
    Signals* signals


# The gemm entries a col2im kernel call takes: the set's gemm over panels (offsets
# k NR), its half kernels over half panels (fixed weights, few positions), or its
# gemm_stream over w's rows in place (offsets k w_row).  Each computes the same
# arithmetic (kernel_set.h), so the choice never changes the bits.
cdef enum:
    PANEL_KERNEL = 0
    HALF_KERNEL = 1
    STREAM_KERNEL = 2


cdef inline const void* kernel_entries(const Col2imJob* job, int kind) noexcept nogil:
    """The address of the set's ``kind`` of gemm entries (for 1 .. MR rows), in the
    job's accumulation type: chosen once per work item, not per kernel call."""
    if job.doubles:
        if kind == STREAM_KERNEL:
            return <const void*>job.kernels_f64.gemm_stream
        if kind == HALF_KERNEL:
            return <const void*>job.kernels_f64.half
        return <const void*>job.kernels_f64.gemm
    if kind == STREAM_KERNEL:
        return <const void*>job.kernels_f32.gemm_stream
    if kind == HALF_KERNEL:
        return <const void*>job.kernels_f32.half
    return <const void*>job.kernels_f32.gemm


cdef inline void col2im_kernel(const Col2imJob* job, const void* entries,
                               const Py_ssize_t* offsets, Py_ssize_t rows, Py_ssize_t depth,
                               const acc_t* a, const acc_t* b, acc_t* c,
                               bint accumulate) noexcept nogil:
    """One call of ``entries``' kernel for ``rows`` rows (see kernel_entries)."""
    if acc_t is float:
        (<const convt_gemm_f32*>entries)[rows - 1](depth, job.block, a, b, offsets, c, job.ldc,
                                                   accumulate, NULL)
    else:
        (<const convt_gemm_f64*>entries)[rows - 1](depth, job.block, a, b, offsets, c, job.ldc,
                                                   accumulate, NULL)


cdef void copy_panels(const Col2imJob* job, const acc_t* source, Py_ssize_t rows_left,
                      Py_ssize_t columns, Py_ssize_t depth, acc_t* panels) noexcept nogil:
    """Rows [0, depth) of w's ``columns`` from ``source`` (rows w_row apart, ``rows_left``
    of them in w from there) into panels [panel][k][NR], zeros past ``columns``,
    hinting the row COL2IM_PREFETCH_ROWS ahead (one hint per NR elements: a line)."""
    cdef Py_ssize_t count = (columns + job.nr - 1) // job.nr
    cdef Py_ssize_t k, q, i, n
    cdef const acc_t* row
    cdef acc_t* target
    cdef bint ahead
    for k in range(depth):
        row = source + k * job.w_row
        ahead = k + COL2IM_PREFETCH_ROWS < rows_left
        for q in range(count):
            if ahead:
                convt_prefetch(row + COL2IM_PREFETCH_ROWS * job.w_row + q * job.nr)
            target = panels + (q * depth + k) * job.nr
            n = min(job.nr, columns - q * job.nr)
            for i in range(n):  # a loop the compiler vectorises: no call per line
                target[i] = row[q * job.nr + i]
            for i in range(n, job.nr):
                target[i] = 0


cdef void col2im_products(const Col2imJob* job, const acc_t* x_blocks, const acc_t* w_group,
                          Py_ssize_t first_column, Py_ssize_t columns, acc_t* product,
                          acc_t* panels) noexcept nogil:
    """product[p, j] = sum over c of x[c, p] w[c, first_column + j] for every
    stacked position p and j < columns, in whole panels (columns past ``columns``
    sum zeros), K chunk by K chunk.  Sets with gemm_stream kernels read w's rows in
    place where the columns fill whole panels (a partial last panel would read past
    the item's columns, and past w's end on its last row): the same kernel calls on
    the same values, so the same bits, without a copy.  Otherwise each chunk of w's
    columns is first copied row by row (w read once, front to back, with prefetch
    hints a few rows ahead) into panels [panel][k][NR] that the kernels read from
    L2: read in place by the plain kernels, each kernel step would fetch a cache
    line of another row (rows a few KiB apart) unhinted, and the calls waited on
    memory.  (Hints for the next chunk spread over the kernel calls made the call
    1.1-1.2x slower.)"""
    cdef Py_ssize_t blocks = (job.stacked + job.mr - 1) // job.mr
    cdef Py_ssize_t count = (columns + job.nr - 1) // job.nr
    cdef bint in_place = job.row_offsets != NULL and columns % job.nr == 0
    cdef const void* entries = kernel_entries(job, STREAM_KERNEL if in_place else PANEL_KERNEL)
    cdef const Py_ssize_t* offsets = job.row_offsets if in_place else job.panel_offsets
    cdef Py_ssize_t k0, depth, q, j, rows
    cdef const acc_t* b
    k0 = 0
    while k0 < job.cg:
        depth = min(job.depth_chunk, job.cg - k0)
        if not in_place:
            copy_panels(job, w_group + k0 * job.w_row + first_column, job.cg - k0, columns,
                        depth, panels)
        for q in range(count):
            b = (w_group + k0 * job.w_row + first_column + q * job.nr if in_place
                 else panels + q * depth * job.nr)
            for j in range(blocks):
                rows = min(job.mr, job.stacked - j * job.mr)
                col2im_kernel(job, entries, offsets, rows, depth,
                              x_blocks + j * job.mr * job.cg + k0 * rows, b,
                              product + j * job.mr * job.ldc + q * job.nr, k0 > 0)
        k0 = k0 + depth


cdef void add_products(const Col2imJob* job, Py_ssize_t image, Py_ssize_t group,
                       Py_ssize_t first, Py_ssize_t last, const acc_t* product,
                       Py_ssize_t column_step, Py_ssize_t position_step) noexcept nogil:
    """Output channels [first, last) of this image and group: the bias, then each
    product added to the output it lands on, position by position, tap by tap.
    The product of position p and column j (channel m - first's tap t is column
    (m - first) * taps + t) is at product[j * column_step + p * position_step]."""
    cdef Py_ssize_t m, p, t, at, channel
    cdef acc_t* out
    cdef const acc_t* sums
    cdef const Py_ssize_t* targets
    cdef acc_t bias
    for m in range(first, last):
        channel = group * job.mg + m
        out = <acc_t*>job.y + (image * job.groups * job.mg + channel) * job.plane
        bias = (<const acc_t*>job.bias)[channel] if job.bias != NULL else 0
        for at in range(job.plane):
            out[at] = bias
        for p in range(job.positions):
            sums = product + p * position_step + (m - first) * job.taps * column_step
            targets = job.table + p * job.taps
            for t in range(job.taps):
                if targets[t] >= 0:
                    out[targets[t]] = out[targets[t]] + sums[t * column_step]


cdef void col2im_item(const Col2imJob* job, Py_ssize_t index, int slot,
                      const acc_t* like) noexcept nogil:
    cdef Py_ssize_t group = index // job.runs
    cdef Py_ssize_t first = (index - group * job.runs) * job.run
    cdef Py_ssize_t last = min(job.mg, first + job.run)
    cdef Py_ssize_t columns = (last - first) * job.taps
    cdef acc_t* product = <acc_t*>job.workspace + slot * job.per_thread
    cdef Py_ssize_t panel_at = (job.stacked + job.mr - 1) // job.mr * job.mr * job.ldc
    cdef acc_t* panels = product + (panel_at + 15) // 16 * 16
    cdef const acc_t* x_blocks = <const acc_t*>job.packed_x + group * job.cg * job.stacked
    cdef const acc_t* w_group = <const acc_t*>job.w + group * job.w_group
    cdef Py_ssize_t image
    if stopped(job.signals, slot):
        return
    col2im_products(job, x_blocks, w_group, first * job.taps, columns, product, panels)
    for image in range(job.batch):  # product row image * positions + p
        add_products(job, image, group, first, last, product + image * job.positions * job.ldc,
                     1, job.ldc)


cdef void col2im_task(void* context, Py_ssize_t index, int slot) noexcept nogil:
    cdef const Col2imJob* job = <const Col2imJob*>context
    if job.made != NULL:
        if job.doubles:
            col2im_item_fixed(job, index, slot, <const double*>NULL)
        else:
            col2im_item_fixed(job, index, slot, <const float*>NULL)
    elif job.doubles:
        col2im_item(job, index, slot, <const double*>NULL)
    else:
        col2im_item(job, index, slot, <const float*>NULL)


# Fixed weights (a bound layer's, convt._bound): the products are computed the
# other way round, C^T[j, p] = sum over c of w[c, j] x[c, p], by the same gemm
# kernels with w's columns as the broadcast rows (blocks of MR columns made once,
# [block][c][rows], so the kernels stream them front to back, each weight read
# once) and x's positions as the vectors (x in panels of NR positions,
# [panel][c][position], zero past the last).  Each product is the same blocked
# sum of the same terms in the same order (an FMA's two factors commute), and
# add_products adds them to the outputs in the same order, so results are
# bitwise those of col2im_item.


cdef void col2im_item_fixed(const Col2imJob* job, Py_ssize_t index, int slot,
                            const acc_t* like) noexcept nogil:
    cdef Py_ssize_t group = index // job.runs
    cdef Py_ssize_t first = (index - group * job.runs) * job.run
    cdef Py_ssize_t last = min(job.mg, first + job.run)
    cdef Py_ssize_t columns = (last - first) * job.taps
    cdef acc_t* product = <acc_t*>job.workspace + slot * job.per_thread
    cdef const acc_t* x_panels = <const acc_t*>job.packed_x + group * job.cg * job.ldc
    # the group's blocks, then this item's: items before it hold run * taps columns each
    cdef const acc_t* blocks = (<const acc_t*>job.made
                                + (group * job.mg + first) * job.taps * job.cg)
    cdef Py_ssize_t j0, rows, k0, depth, p, image
    cdef const void* entries = kernel_entries(job, PANEL_KERNEL if job.panel == job.nr
                                              else HALF_KERNEL)
    cdef const acc_t* a
    if stopped(job.signals, slot):
        return
    j0 = 0
    while j0 < columns:
        rows = min(job.mr, columns - j0)
        a = blocks + j0 * job.cg  # this block: [c][rows], every K chunk in turn
        k0 = 0
        while k0 < job.cg:
            depth = min(job.depth_chunk, job.cg - k0)
            for p in range(job.ldc // job.panel):  # the panels of positions
                col2im_kernel(job, entries, job.panel_offsets, rows, depth, a + k0 * rows,
                              x_panels + (p * job.cg + k0) * job.panel,
                              product + j0 * job.ldc + p * job.panel, k0 > 0)
            k0 = k0 + depth
        j0 = j0 + rows
    for image in range(job.batch):  # product column image * positions + p
        add_products(job, image, group, first, last, product + image * job.positions,
                     job.ldc, 1)


cdef int set_col2im_job(Col2imJob* job, str family, y, table, b, Py_ssize_t groups,
                        Py_ssize_t cg, Py_ssize_t run, Py_ssize_t depth_chunk,
                        Py_ssize_t block) except -1:
    """The fields both drivers share: the kernel set, the shapes, the output and bias."""
    cdef Kernels kernels = kernels_named(family)
    job.doubles = y.dtype.itemsize == 8
    job.kernels_f32, job.kernels_f64 = kernels.f32, kernels.f64
    job.mr = kernels.f64.mr if job.doubles else kernels.f32.mr
    job.nr = kernels.f64.nr if job.doubles else kernels.f32.nr
    job.panel = job.nr
    job.block = block
    job.batch, job.groups, job.cg = y.shape[0], groups, cg
    job.mg = y.shape[1] // groups
    job.positions, job.taps = table.shape[0], table.shape[1]
    job.stacked = job.batch * job.positions
    job.plane = y.shape[2]
    job.run = run
    job.runs = (job.mg + run - 1) // run
    job.depth_chunk = min(depth_chunk, cg)
    job.table = <const Py_ssize_t*>data_of(table)
    job.bias = <const char*>data_of(b)
    job.y = <char*>data_of(y)
    job.w = job.made = NULL
    job.w_group = job.w_row = 0
    job.row_offsets = NULL
    return 0


cdef run_col2im(Col2imJob* job, Py_ssize_t item, int num_threads, workspaces):
    """Run every work item on ``num_threads`` pool threads, each with job.per_thread
    elements of workspace (64-byte aligned, lent by ``workspaces``, convt._workspace:
    a few hundred KiB a thread, which a fresh array would fault in on every call),
    and raise if the call was stopped."""
    cdef int threads = max(1, num_threads)
    cdef Signals signals = signals_for_this_call()
    cdef Py_ssize_t items = job.groups * job.runs
    # the panels' offsets within a K chunk: k * panel; w's rows: k * w_row
    panel_offsets = np.arange(job.depth_chunk, dtype=np.intp) * job.panel
    job.panel_offsets = <const Py_ssize_t*>data_of(panel_offsets)
    row_offsets = np.arange(job.depth_chunk, dtype=np.intp) * job.w_row
    if job.w != NULL and (job.kernels_f64.flags if job.doubles
                          else job.kernels_f32.flags) & CONVT_SET_STREAM_B:
        job.row_offsets = <const Py_ssize_t*>data_of(row_offsets)
    workspace, loan = workspaces.lend((threads * job.per_thread * item + 64,), np.uint8)
    try:
        job.workspace = aligned_data(workspace)
        job.signals = &signals
        with nogil:
            convt_run(col2im_task, job, items, threads)
    finally:
        workspaces.give_back(loan)
    raise_if_stopped(&signals)


def col2im_pack_positions(x, Py_ssize_t groups, Py_ssize_t width, bint padded, out):
    """Copy x (N, C, P), positions at unit stride, into ``out`` (G, Cg * L) C-contiguous:
    per group, its images' N P positions stacked, image after image, in blocks of
    ``width`` positions, [block][Cg][positions of the block].  ``padded``: every
    block holds ``width`` (L the next multiple of it), zeros past the N P positions
    (the panels of convt._col2im.input_panels); else the last block holds the rest
    (L = N P: the row blocks of packed_input).  Values are copied as bits."""
    cdef Py_ssize_t item = out.dtype.itemsize
    if (x.ndim != 3 or out.ndim != 2 or x.dtype != out.dtype or item not in (4, 8)
            or groups < 1 or width < 1 or x.shape[1] % groups
            or (x.strides[2] != item and x.shape[2] > 1)
            or x.strides[0] % item or x.strides[1] % item or not out.flags.c_contiguous
            or not out.flags.writeable or out.shape[0] != groups):
        raise ValueError("col2im_pack_positions: inconsistent operands")
    cdef Py_ssize_t batch = x.shape[0], cg = x.shape[1] // groups, positions = x.shape[2]
    cdef Py_ssize_t stacked = batch * positions
    cdef Py_ssize_t length = (stacked + width - 1) // width * width if padded else stacked
    if out.shape[1] != cg * length:
        raise ValueError("col2im_pack_positions: out holds the wrong number of values")
    cdef Py_ssize_t image_stride = x.strides[0] // item, channel_stride = x.strides[1] // item
    cdef const char* source = <const char*>data_of(x)
    cdef char* to = <char*>data_of(out)
    cdef Py_ssize_t g, first, rows, c, i, s, n, p, at = 0
    with nogil:
        for g in range(groups):
            first = 0
            while first < stacked:
                rows = min(width, stacked - first)
                for c in range(cg):
                    # positions first .. first + rows - 1 of the stack, across images
                    s = 0
                    while s < rows:
                        n = (first + s) // positions
                        p = (first + s) - n * positions
                        i = min(rows - s, positions - p)  # the run within image n
                        memcpy(to + at * item, source + (n * image_stride
                               + (g * cg + c) * channel_stride + p) * item, i * item)
                        at = at + i
                        s = s + i
                    if padded and rows < width:
                        memset(to + at * item, 0, (width - rows) * item)
                        at = at + width - rows
                first = first + rows


def col2im_make_blocks(w, Py_ssize_t mr, Py_ssize_t run, Py_ssize_t taps):
    """Fixed weights w (G, Cg, Mg * taps), unit column stride, as col2im's column
    blocks: per group, per item (``run`` output channels, the last may have fewer),
    per block of ``mr`` columns (the last may have fewer), [c][rows].  A 1-D array
    of w's size."""
    cdef Py_ssize_t item = w.dtype.itemsize
    if w.ndim != 3 or item not in (4, 8) or w.strides[2] != item or w.shape[2] % taps:
        raise ValueError("col2im_make_blocks: inconsistent operands")
    cdef Py_ssize_t groups = w.shape[0], cg = w.shape[1], width = w.shape[2]
    cdef Py_ssize_t w_group = w.strides[0] // item, w_row = w.strides[1] // item
    made = np.empty(groups * cg * width, dtype=w.dtype)
    cdef char* to = <char*>data_of(made)
    cdef const char* source = <const char*>data_of(w)
    cdef Py_ssize_t g, first, end, j0, rows, c, i, at = 0
    with nogil:
        for g in range(groups):
            first = 0
            while first < width:
                end = min(width, first + run * taps)
                j0 = first
                while j0 < end:
                    rows = min(mr, end - j0)
                    for c in range(cg):
                        for i in range(rows):
                            if item == 8:
                                (<double*>to)[at] = (<const double*>source)[
                                    g * w_group + c * w_row + j0 + i]
                            else:
                                (<float*>to)[at] = (<const float*>source)[
                                    g * w_group + c * w_row + j0 + i]
                            at = at + 1
                    j0 = j0 + rows
                first = end
    return made


def col2im_conv_transpose_fixed(str family, x_panels, made, b, y, table, Py_ssize_t cg,
                                Py_ssize_t run, Py_ssize_t depth_chunk, Py_ssize_t block,
                                int num_threads, workspaces):
    """col2im_conv_transpose for fixed weights: ``x_panels`` (G, L / NR, Cg, NR)
    holds each group's x, its images' positions stacked (N P of them), in panels of
    the set's NR positions (or NR / 2, run by its half kernels), zero past the N P
    positions; ``made`` is col2im_make_blocks of w for the set's MR and this
    ``run``; the rest as there."""
    cdef Col2imJob job
    cdef Py_ssize_t item = y.dtype.itemsize
    cdef Py_ssize_t product
    if (x_panels.ndim != 4 or y.ndim != 3 or table.ndim != 2 or made.ndim != 1
            or x_panels.dtype != y.dtype or made.dtype != y.dtype or item not in (4, 8)
            or not x_panels.flags.c_contiguous or not y.flags.c_contiguous
            or not made.flags.c_contiguous or not table.flags.c_contiguous
            or table.dtype != np.intp or x_panels.shape[2] != cg
            or y.shape[1] % x_panels.shape[0]
            or made.shape[0] != x_panels.shape[0] * cg * (y.shape[1] // x_panels.shape[0])
            * table.shape[1] or run < 1 or depth_chunk < 1
            or (b is not None and (b.dtype != y.dtype or not b.flags.c_contiguous))):
        raise ValueError("col2im_conv_transpose_fixed: inconsistent operands")
    set_col2im_job(&job, family, y, table, b, x_panels.shape[0], cg, run, depth_chunk, block)
    job.panel = x_panels.shape[3]
    if not (job.panel == job.nr or job.panel * 2 == job.nr and (
                job.kernels_f64.flags if job.doubles else job.kernels_f32.flags) & CONVT_SET_HALF):
        raise ValueError("col2im_conv_transpose_fixed: x's panels are not of the set's NR "
                         "(or NR / 2, for a set with half kernels)")
    if x_panels.shape[1] * job.panel < job.stacked:
        raise ValueError("col2im_conv_transpose_fixed: x's panels hold fewer positions than "
                         "y's images and table")
    job.ldc = x_panels.shape[1] * job.panel
    job.packed_x, job.made = <const char*>data_of(x_panels), <const char*>data_of(made)
    # per thread: the transposed product, whole blocks of MR columns x ldc positions
    product = (run * job.taps + job.mr - 1) // job.mr * job.mr * job.ldc
    job.per_thread = (product + 16) // 16 * 16
    run_col2im(&job, item, num_threads, workspaces)


def col2im_conv_transpose(str family, packed_x, w, b, y, table, Py_ssize_t run,
                          Py_ssize_t depth_chunk, Py_ssize_t block, int num_threads,
                          workspaces):
    """Fill ``y`` (N, M, plane) with ConvTranspose(x, w, b) by col2im on
    ``num_threads`` pool threads: ``packed_x`` (G, Cg * N P) holds each group's x,
    its images' positions stacked, as row blocks of the set's MR positions
    ([block][Cg][rows]), w
    is (G, Cg, Mg * taps) with unit column stride, ``table`` (P, taps) the output
    index in a plane of each position's tap (-1: outside), b (M,) contiguous or
    None; ``run`` output channels per work item, ``depth_chunk`` input channels per
    kernel call and per copy of w's panels, ``block`` the blocked-sum steps,
    ``workspaces`` what lends the threads' workspace (convt._workspace).  All of one
    dtype, float32 or float64."""
    cdef Col2imJob job
    cdef Py_ssize_t item = y.dtype.itemsize
    cdef Py_ssize_t product
    if (packed_x.ndim != 2 or w.ndim != 3 or y.ndim != 3 or table.ndim != 2
            or packed_x.dtype != y.dtype or w.dtype != y.dtype or item not in (4, 8)
            or not packed_x.flags.c_contiguous or not y.flags.c_contiguous
            or not table.flags.c_contiguous or table.dtype != np.intp
            or w.strides[2] != item or w.shape[2] != table.shape[1] * (y.shape[1] // w.shape[0])
            or packed_x.shape[0] != w.shape[0]
            or packed_x.shape[1] != w.shape[1] * y.shape[0] * table.shape[0]
            or run < 1 or depth_chunk < 1
            or (b is not None and (b.dtype != y.dtype or not b.flags.c_contiguous))):
        raise ValueError("col2im_conv_transpose: inconsistent operands")
    set_col2im_job(&job, family, y, table, b, w.shape[0], w.shape[1], run, depth_chunk, block)
    job.ldc = (run * job.taps + job.nr - 1) // job.nr * job.nr
    job.w_group, job.w_row = w.strides[0] // item, w.strides[1] // item
    job.packed_x, job.w = <const char*>data_of(packed_x), <const char*>data_of(w)
    # per thread: the product (whole row blocks x ldc), then 64-byte aligned panels of w
    product = (job.stacked + job.mr - 1) // job.mr * job.mr * job.ldc
    job.per_thread = ((product + 15) // 16 * 16 + job.depth_chunk * job.ldc + 16) // 16 * 16
    run_col2im(&job, item, num_threads, workspaces)
