# Weight-bound ConvTranspose on small maps (convt._col2im; the rule that picks it is
# convt._dispatch.col2im_route): per image and group, the products of every input
# position with every (output channel, tap) column of w,
#
#     C[p, m * taps + t] = sum over c of x[c, p] w[c, m, t],
#
# by the set's gemm kernels, w read once per call (its rows copied chunk by chunk
# into panels in L2, not packed once and cached, so no packed copy to keep or to
# compare with the weights), then each product added to the output it lands on
# (col2im).  A work item is one image, group and run of
# output channels: it owns those output planes, fills them with the bias and adds
# its products position by position, tap by tap, so results do not depend on
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
    Py_ssize_t batch, groups, cg, mg, taps, positions, plane   # plane: outputs per channel
    Py_ssize_t run, runs               # output channels per item; items per image and group
    Py_ssize_t depth_chunk             # K rows per kernel call (and per copy of w's panels)
    Py_ssize_t ldc                     # product columns (whole panels)
    const char* packed_x               # per (image, group): row blocks [block][cg][rows]
    const char* w                      # (groups, cg, mg * taps), rows w_row apart
    Py_ssize_t w_group, w_row          # element strides
    const char* panels                 # w's panels made before the call (fixed weights:
                                       # see col2im_pack_panels), or NULL: copied per item
    Py_ssize_t item_panels             # elements of a full item's panels, all K chunks
    Py_ssize_t group_panels            # elements of a group's panels (all its items)
    const Py_ssize_t* panel_offsets    # k * nr
    const Py_ssize_t* table            # [positions][taps]: output index in a plane, or -1
    const char* bias                   # (M,) of the dtype, or NULL
    char* y                            # (N, M, plane) C-contiguous
    Py_ssize_t per_thread              # workspace elements per thread (64-byte multiples)
    char* workspace
    Signals* signals


cdef inline void col2im_kernel(const Col2imJob* job, Py_ssize_t rows, Py_ssize_t depth,
                               const acc_t* a, const acc_t* b, acc_t* c,
                               bint accumulate) noexcept nogil:
    if acc_t is float:
        job.kernels_f32.gemm[rows - 1](depth, job.block, a, b, job.panel_offsets, c, job.ldc,
                                       accumulate, NULL)
    else:
        job.kernels_f64.gemm[rows - 1](depth, job.block, a, b, job.panel_offsets, c, job.ldc,
                                       accumulate, NULL)


cdef void copy_panels(const Col2imJob* job, const acc_t* w_group, Py_ssize_t first_column,
                      Py_ssize_t columns, Py_ssize_t k0, Py_ssize_t depth,
                      acc_t* panels) noexcept nogil:
    """Rows k0 .. k0 + depth - 1 of w's columns [first_column, + columns) as
    panels [panel][k][NR], zero past ``columns``; w read row by row, front to
    back, with prefetch hints a few rows ahead."""
    cdef Py_ssize_t count = (columns + job.nr - 1) // job.nr
    cdef Py_ssize_t q, k, i, n
    cdef const acc_t* source
    cdef acc_t* target
    cdef bint ahead
    for k in range(depth):
        source = w_group + (k0 + k) * job.w_row + first_column
        ahead = k0 + k + COL2IM_PREFETCH_ROWS < job.cg
        for q in range(count):
            if ahead:  # one hint per cache line (NR elements are 64 bytes)
                convt_prefetch(source + COL2IM_PREFETCH_ROWS * job.w_row + q * job.nr)
            target = panels + (q * depth + k) * job.nr
            n = min(job.nr, columns - q * job.nr)
            for i in range(n):  # a loop the compiler vectorises: no call per line
                target[i] = source[q * job.nr + i]
            for i in range(n, job.nr):
                target[i] = 0


cdef void col2im_products(const Col2imJob* job, const acc_t* x_blocks, const acc_t* w_group,
                          Py_ssize_t first_column, Py_ssize_t columns, acc_t* product,
                          acc_t* panels, const acc_t* made) noexcept nogil:
    """product[p, j] = sum over c of x[c, p] w[c, first_column + j] for every
    position p and j < columns, in whole panels (columns past ``columns`` sum
    zeros).  Each K chunk of w's columns is first copied (copy_panels) into
    ``panels`` that the kernels read from L2: read in place, each kernel step
    would fetch a cache line of another row (rows a few KiB apart), and the calls
    waited on memory.  (Hints for the next chunk spread over the kernel calls made
    the call 1.1-1.2x slower.)  ``made``: this item's panels, all K chunks one
    after the other, made before the call (fixed weights), read instead of a copy:
    the kernels then stream them front to back."""
    cdef Py_ssize_t blocks = (job.positions + job.mr - 1) // job.mr
    cdef Py_ssize_t count = (columns + job.nr - 1) // job.nr
    cdef Py_ssize_t k0, depth, q, j, rows
    k0 = 0
    while k0 < job.cg:
        depth = min(job.depth_chunk, job.cg - k0)
        if made != NULL:
            panels = <acc_t*>made + k0 * count * job.nr
        else:
            copy_panels(job, w_group, first_column, columns, k0, depth, panels)
        for q in range(count):
            for j in range(blocks):
                rows = min(job.mr, job.positions - j * job.mr)
                col2im_kernel(job, rows, depth, x_blocks + j * job.mr * job.cg + k0 * rows,
                              panels + q * depth * job.nr,
                              product + j * job.mr * job.ldc + q * job.nr, k0 > 0)
        k0 = k0 + depth


cdef void col2im_item(const Col2imJob* job, Py_ssize_t index, int slot,
                      const acc_t* like) noexcept nogil:
    cdef Py_ssize_t image = index // (job.groups * job.runs)
    cdef Py_ssize_t rest = index - image * job.groups * job.runs
    cdef Py_ssize_t group = rest // job.runs
    cdef Py_ssize_t first = (rest - group * job.runs) * job.run
    cdef Py_ssize_t last = min(job.mg, first + job.run)
    cdef Py_ssize_t columns = (last - first) * job.taps
    cdef acc_t* product = <acc_t*>job.workspace + slot * job.per_thread
    cdef Py_ssize_t panel_at = (job.positions + job.mr - 1) // job.mr * job.mr * job.ldc
    cdef acc_t* panels = product + (panel_at + 15) // 16 * 16
    cdef const acc_t* x_blocks = (<const acc_t*>job.packed_x
                                  + (image * job.groups + group) * job.cg * job.positions)
    cdef const acc_t* w_group = <const acc_t*>job.w + group * job.w_group
    cdef Py_ssize_t m, p, t, at, channel
    cdef acc_t* out
    cdef const acc_t* sums
    cdef const Py_ssize_t* targets
    cdef acc_t bias
    cdef const acc_t* made = NULL
    if stopped(job.signals, slot):
        return
    if job.panels != NULL:
        made = (<const acc_t*>job.panels + group * job.group_panels
                + (rest - group * job.runs) * job.item_panels)
    col2im_products(job, x_blocks, w_group, first * job.taps, columns, product, panels, made)
    for m in range(first, last):
        channel = group * job.mg + m
        out = <acc_t*>job.y + (image * job.groups * job.mg + channel) * job.plane
        bias = (<const acc_t*>job.bias)[channel] if job.bias != NULL else 0
        for at in range(job.plane):
            out[at] = bias
        for p in range(job.positions):
            sums = product + p * job.ldc + (m - first) * job.taps
            targets = job.table + p * job.taps
            for t in range(job.taps):
                if targets[t] >= 0:
                    out[targets[t]] = out[targets[t]] + sums[t]


cdef void col2im_task(void* context, Py_ssize_t index, int slot) noexcept nogil:
    cdef const Col2imJob* job = <const Col2imJob*>context
    if job.doubles:
        col2im_item(job, index, slot, <const double*>NULL)
    else:
        col2im_item(job, index, slot, <const float*>NULL)


cdef int set_panel_geometry(Col2imJob* job, Kernels kernels, w, Py_ssize_t item, Py_ssize_t mg,
                            Py_ssize_t taps, Py_ssize_t run, Py_ssize_t depth_chunk) except -1:
    """The job's w and panel fields: w (G, Cg, Mg * taps) with unit column stride."""
    job.doubles = item == 8
    job.kernels_f32, job.kernels_f64 = kernels.f32, kernels.f64
    job.mr = kernels.f64.mr if job.doubles else kernels.f32.mr
    job.nr = kernels.f64.nr if job.doubles else kernels.f32.nr
    job.groups, job.cg, job.mg, job.taps = w.shape[0], w.shape[1], mg, taps
    job.run = run
    job.runs = (mg + run - 1) // run
    job.depth_chunk = min(depth_chunk, job.cg)
    job.ldc = (run * taps + job.nr - 1) // job.nr * job.nr
    job.w_group, job.w_row = w.strides[0] // item, w.strides[1] // item
    job.w = <const char*>data_of(w)
    # made panels: item after item (the last of a group may have fewer columns)
    job.item_panels = job.ldc * job.cg
    job.group_panels = ((job.runs - 1) * job.item_panels
                        + (((mg - (job.runs - 1) * run) * taps + job.nr - 1) // job.nr)
                        * job.nr * job.cg)
    job.panels = NULL
    return 0


def col2im_pack_panels(str family, w, Py_ssize_t mg, Py_ssize_t taps, Py_ssize_t run,
                       Py_ssize_t depth_chunk):
    """w's panels as col2im_conv_transpose copies them into L2 item by item, made
    once for all items (group, then run of output channels; per item its K
    chunks in order): a 1-D array to pass it as ``panels``.  Arguments as there
    (mg: output channels per group)."""
    cdef Kernels kernels = kernels_named(family)
    cdef Col2imJob job
    cdef Py_ssize_t item = w.dtype.itemsize
    cdef Py_ssize_t group, r, first, columns, k0, depth, at
    if (w.ndim != 3 or item not in (4, 8) or w.strides[2] != item or w.shape[2] != mg * taps
            or run < 1 or depth_chunk < 1):
        raise ValueError("col2im_pack_panels: inconsistent operands")
    set_panel_geometry(&job, kernels, w, item, mg, taps, run, depth_chunk)
    panels = np.empty(job.groups * job.group_panels, dtype=w.dtype)
    cdef char* to = <char*>data_of(panels)
    with nogil:
        for group in range(job.groups):
            for r in range(job.runs):
                first = r * run
                columns = (min(mg, first + run) - first) * taps
                at = group * job.group_panels + r * job.item_panels
                k0 = 0
                while k0 < job.cg:
                    depth = min(job.depth_chunk, job.cg - k0)
                    if job.doubles:
                        copy_panels(&job, <const double*>job.w + group * job.w_group,
                                    first * taps, columns, k0, depth,
                                    <double*>to + at)
                    else:
                        copy_panels(&job, <const float*>job.w + group * job.w_group,
                                    first * taps, columns, k0, depth,
                                    <float*>to + at)
                    at = at + (columns + job.nr - 1) // job.nr * job.nr * depth
                    k0 = k0 + depth
    return panels


def col2im_conv_transpose(str family, packed_x, w, b, y, table, Py_ssize_t run,
                          Py_ssize_t depth_chunk, Py_ssize_t block, int num_threads,
                          panels=None):
    """Fill ``y`` (N, M, plane) with ConvTranspose(x, w, b) by col2im on
    ``num_threads`` pool threads: ``packed_x`` (N, G, Cg * P) holds each image's
    and group's x as row blocks of the set's MR positions ([block][Cg][rows]), w
    is (G, Cg, Mg * taps) with unit column stride, ``table`` (P, taps) the output
    index in a plane of each position's tap (-1: outside), b (M,) contiguous or
    None; ``run`` output channels per work item, ``depth_chunk`` input channels per
    kernel call and per copy of w's panels, ``block`` the blocked-sum steps.  All of one dtype, float32 or
    float64.  ``panels``: col2im_pack_panels of w with the same arguments, read
    instead of copying w's panels."""
    cdef Kernels kernels = kernels_named(family)
    cdef Col2imJob job
    cdef Signals signals = signals_for_this_call()
    cdef int threads = max(1, num_threads)
    cdef Py_ssize_t item = y.dtype.itemsize
    cdef Py_ssize_t items, product, chunk
    if (packed_x.ndim != 3 or w.ndim != 3 or y.ndim != 3 or table.ndim != 2
            or packed_x.dtype != y.dtype or w.dtype != y.dtype or item not in (4, 8)
            or not packed_x.flags.c_contiguous or not y.flags.c_contiguous
            or not table.flags.c_contiguous or table.dtype != np.intp
            or w.strides[2] != item or w.shape[2] != table.shape[1] * (y.shape[1] // w.shape[0])
            or packed_x.shape[2] != w.shape[1] * table.shape[0] or run < 1 or depth_chunk < 1
            or (b is not None and (b.dtype != y.dtype or not b.flags.c_contiguous))):
        raise ValueError("col2im_conv_transpose: inconsistent operands")
    set_panel_geometry(&job, kernels, w, item, y.shape[1] // w.shape[0], table.shape[1], run,
                       depth_chunk)
    if panels is not None:
        if (panels.ndim != 1 or panels.dtype != y.dtype or not panels.flags.c_contiguous
                or panels.shape[0] != job.groups * job.group_panels):
            raise ValueError("col2im_conv_transpose: panels of other operands")
        job.panels = <const char*>data_of(panels)
    job.block = block
    job.batch = y.shape[0]
    job.positions = table.shape[0]
    job.plane = y.shape[2]
    panel_offsets = np.arange(job.depth_chunk, dtype=np.intp) * job.nr
    job.panel_offsets = <const Py_ssize_t*>data_of(panel_offsets)
    job.table = <const Py_ssize_t*>data_of(table)
    job.packed_x = <const char*>data_of(packed_x)
    job.bias = <const char*>data_of(b)
    job.y = <char*>data_of(y)
    # per thread: the product (whole row blocks x ldc), then 64-byte aligned panels of w
    product = (job.positions + job.mr - 1) // job.mr * job.mr * job.ldc
    job.per_thread = ((product + 15) // 16 * 16 + job.depth_chunk * job.ldc + 16) // 16 * 16
    items = job.batch * job.groups * job.runs
    workspace = np.empty(threads * job.per_thread * item + 64, dtype=np.uint8)
    job.workspace = <char*>data_of(workspace)
    job.workspace = job.workspace + (-(<size_t>job.workspace)) % 64
    job.signals = &signals
    with nogil:
        convt_run(col2im_task, &job, items, threads)
    raise_if_stopped(&signals)
