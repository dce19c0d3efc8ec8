# Winograd engine for float32 Conv, F(2x2, 3x3) and F(2x2x2, 3x3x3) (stride 1;
# convt/_winograd.py maps ConvTranspose and dilated layers onto it), and F(2x2, 2x2)
# on the stride phases of a ConvTranspose whose kernel is twice its stride
# (winograd_phases_conv, at the end): each work item is one image, group, plane
# of tiles (3-D), block of tiles and chunk of output channels (and, for phases, one
# output row residue).  It transforms the block's inputs a chunk of input channels
# at a time (convt/src/winograd_body.h, compiled per kernel set), sums the 16 (64, 9)
# products with the kernel set's GEMM micro-kernels (rows: output channels, vectors:
# tiles; blocked sums as in the GEMM engine), then transforms the products into y.
# Work items never depend on the thread count, so results are bitwise identical for
# every num_threads.


# the element types the phased driver reads and writes (winograd_phases_conv)
STORAGE_TYPES = {"float32": CONVT_F32, "float16": CONVT_F16, "bfloat16": CONVT_BF16}


cdef struct WinogradJob:
    const float* x
    float* y
    const float* packed         # [group][points][mg][cg] in row blocks of mr (_winograd.py)
    const float* bias           # (M,) float32 or NULL
    const convt_kernels_f32* kernels
    const Py_ssize_t* offsets   # [k] = k * capacity, k < channel_chunk
    float* workspace            # per thread: points x channel_chunk x capacity, then
                                # points x out_chunk x capacity
    Py_ssize_t per_thread
    Py_ssize_t dims             # 2 or 3 spatial axes
    Py_ssize_t taps             # kernel taps per axis: 3, or 2 (2-D only)
    Py_ssize_t points           # transformed values per tile: (taps + 1) ** dims
    Py_ssize_t n_stride, x_channel, y_n_stride, y_channel   # elements
    convt_winograd_plane x_plane, y_plane
    Py_ssize_t groups, cg, mg
    Py_ssize_t out_height, out_width, pad_front, pad_top, pad_left
    Py_ssize_t tile_planes      # 3-D: planes of tiles (each a block dimension); 1 in 2-D
    Py_ssize_t tile_rows        # R per block
    Py_ssize_t tiles            # tile columns per block
    Py_ssize_t row_blocks, column_blocks, out_chunks
    Py_ssize_t capacity, channel_chunk, out_chunk, block
    int* non_finite             # [threads]
    Signals* signals
    # phased calls (winograd_phases_conv): y's stride phases, each a Conv of x
    const Py_ssize_t* phase_table   # [phases][4]: first row, first column, pad top, left
    Py_ssize_t phases, stride_rows, stride_cols
    Py_ssize_t y_row_stride, y_col_stride
    Py_ssize_t row_residues, col_residues   # phases: row-major, rows x columns
    int storage                 # x's and y's element type (CONVT_F16, _BF16 or _F32)
    Py_ssize_t slab             # narrow x: floats per thread for a patch window's copy
    Py_ssize_t local_rows, local_cols   # an item's block of y rows: 2 R x (2 tiles s)


cdef void winograd_products(const WinogradJob* job, const float* packed, const float* v,
                            float* m, Py_ssize_t g, Py_ssize_t m0, Py_ssize_t mc,
                            Py_ssize_t c0, Py_ssize_t cc, Py_ssize_t used) noexcept nogil:
    """m[xi][j][t] (+)= sum over c < cc of U[xi][m0 + j][c0 + c] v[xi][c][t], U the
    ``packed`` weights (the job's, or one phase's of them)."""
    cdef const convt_kernels_f32* k = job.kernels
    cdef Py_ssize_t mr = k.mr, nr = k.nr
    cdef Py_ssize_t xi, j, rows, t, cap = job.capacity
    cdef const float* a
    cdef int accumulate = c0 > 0
    for xi in range(job.points):
        j = 0
        while j < mc:
            rows = min(mr, mc - j)
            # row block of U: [cg][rows] from the block's first row, at channel c0
            a = packed + ((g * job.points + xi) * job.mg + m0 + j) * job.cg + c0 * rows
            t = 0
            while t + nr <= used or (t < used and k.half[0] == NULL):  # (capacity: nr x)
                k.gemm[rows - 1](cc, job.block, a, v + xi * cc * cap + t, job.offsets,
                                 m + (xi * mc + j) * cap + t, cap, accumulate, NULL)
                t += nr
            while t < used:  # half panels (capacity is a multiple of nr / 2 with them)
                k.half[rows - 1](cc, job.block, a, v + xi * cc * cap + t, job.offsets,
                                 m + (xi * mc + j) * cap + t, cap, accumulate, NULL)
                t += nr // 2
            j += rows


cdef plane_of(array, convt_winograd_plane* plane):
    """The spatial extents and element strides of an (N, C, [D,] H, W) array."""
    cdef int last = array.ndim - 1
    cdef Py_ssize_t size = array.itemsize
    plane.height, plane.width = array.shape[last - 1], array.shape[last]
    plane.row_stride = array.strides[last - 1] // size
    plane.col_stride = array.strides[last] // size
    plane.depth = array.shape[2] if array.ndim == 5 else 1
    plane.plane_stride = array.strides[2] // size if array.ndim == 5 else 0


cdef inline void transforms_of(const WinogradJob* job, convt_winograd_in_f32* transform_input,
                               convt_winograd_out_f32* transform_output) noexcept nogil:
    """The job's kernel set's own transforms, else the baseline build (kernel_set.h)."""
    transform_input[0] = (job.kernels.winograd_input if job.kernels.winograd_input != NULL
                          else convt_winograd_input_f32)
    transform_output[0] = (job.kernels.winograd_output if job.kernels.winograd_output != NULL
                           else convt_winograd_output_f32)


cdef void winograd_task(void* context, Py_ssize_t index, int slot) noexcept nogil:
    cdef const WinogradJob* job = <const WinogradJob*>context
    cdef Py_ssize_t rest = index, n, g, tz, rb, cb, oc, m0, mc, c0, cc, used
    cdef convt_winograd_block block
    cdef float* v = job.workspace + slot * job.per_thread
    cdef float* m = v + job.points * job.channel_chunk * job.capacity
    cdef const float* xg
    cdef int bad = 0
    cdef convt_winograd_in_f32 transform_input
    cdef convt_winograd_out_f32 transform_output
    if stopped(job.signals, slot):
        return
    transforms_of(job, &transform_input, &transform_output)
    oc = rest % job.out_chunks
    rest //= job.out_chunks
    cb = rest % job.column_blocks
    rest //= job.column_blocks
    rb = rest % job.row_blocks
    rest //= job.row_blocks
    tz = rest % job.tile_planes
    rest //= job.tile_planes
    g = rest % job.groups
    n = rest // job.groups
    block.dims = job.dims
    block.taps = job.taps
    block.front = 2 * tz - job.pad_front
    block.out_front = 2 * tz
    block.tiles = min(job.tiles, (job.out_width + 1) // 2 - cb * job.tiles)
    block.rows = min(job.tile_rows, (job.out_height + 1) // 2 - rb * job.tile_rows)
    block.top = 2 * rb * job.tile_rows - job.pad_top
    block.left = 2 * cb * job.tiles - job.pad_left
    block.capacity = job.capacity
    used = block.rows * block.tiles
    m0 = oc * job.out_chunk
    mc = min(job.out_chunk, job.mg - m0)
    xg = job.x + n * job.n_stride + g * job.cg * job.x_channel
    c0 = 0
    while c0 < job.cg:
        cc = min(job.channel_chunk, job.cg - c0)
        bad |= transform_input(&block, &job.x_plane, xg + c0 * job.x_channel, job.x_channel,
                               cc, v)
        winograd_products(job, job.packed, v, m, g, m0, mc, c0, cc, used)
        c0 += cc
    bad |= transform_output(
        &block, 2 * rb * job.tile_rows, 2 * cb * job.tiles, &job.y_plane, m, mc,
        job.bias + g * job.mg + m0 if job.bias != NULL else NULL,
        job.y + n * job.y_n_stride + (g * job.mg + m0) * job.y_channel, job.y_channel)
    if bad:
        job.non_finite[slot] = 1


cdef Kernels job_operands(WinogradJob* job, str family, x, packed, b, y, Py_ssize_t groups,
                          layout):
    """The fields both drivers share: operands and their element strides, groups,
    output extents and the blocking of ``layout``; returns the kernel set."""
    cdef Kernels kernels = kernels_named(family)
    cdef Py_ssize_t size = x.itemsize
    cdef int last = x.ndim - 1
    job.kernels = kernels.f32
    job.storage = STORAGE_TYPES.get(x.dtype.name, -1)
    job.x = <const float*>data_of(x)
    job.y = <float*>data_of(y)
    job.packed = <const float*>data_of(packed)
    job.bias = <const float*>data_of(b)
    job.n_stride, job.x_channel = x.strides[0] // size, x.strides[1] // size
    job.y_n_stride, job.y_channel = y.strides[0] // size, y.strides[1] // size
    plane_of(x, &job.x_plane)
    plane_of(y, &job.y_plane)
    job.groups = groups
    job.cg = x.shape[1] // groups
    job.mg = y.shape[1] // groups
    job.out_height, job.out_width = y.shape[last - 1], y.shape[last]
    job.tile_rows = layout["tile_rows"]
    job.tiles = layout["tiles"]
    job.capacity = layout["capacity"]
    job.channel_chunk = layout["channel_chunk"]
    job.out_chunk = layout["out_chunk"]
    job.block = layout["block"]
    job.out_chunks = (job.mg + job.out_chunk - 1) // job.out_chunk
    if (job.storage < 0 or y.dtype != x.dtype or packed.dtype != np.float32
            or job.tiles > CONVT_WINOGRAD_MAX_TILES or job.capacity < job.tile_rows * job.tiles
            or job.capacity % (kernels.f32.nr // (2 if kernels.f32.half[0] != NULL else 1))
            or (b is not None and (b.dtype != np.float32 or not b.flags.c_contiguous))):
        raise ValueError("Winograd driver: inconsistent blocking or operands")
    return kernels


cdef bint run_job(WinogradJob* job, convt_task task, Py_ssize_t items, int threads) except *:
    """Run ``items`` of ``task`` on ``threads`` pool threads with per-thread workspaces
    of job.per_thread floats; False when an item saw a value that is not finite."""
    cdef Signals signals = signals_for_this_call()
    from ._workspace import borrowed
    offsets = np.arange(job.channel_chunk, dtype=np.intp) * job.capacity
    flags = np.zeros(threads, dtype=np.intc)
    job.offsets = <const Py_ssize_t*>data_of(offsets)
    job.non_finite = <int*>data_of(flags)
    job.signals = &signals
    with borrowed((threads * job.per_thread + 16,), np.float32) as workspace:
        job.workspace = <float*>data_of(workspace)
        with nogil:
            convt_run(task, job, items, threads)
    raise_if_stopped(&signals)
    return not flags.any()


def winograd_conv(str family, x, packed, b, y, Py_ssize_t groups, pads, layout,
                  int num_threads):
    """Fill ``y`` with Conv(x, w, b) by Winograd F(2x2, 3x3), F(2x2x2, 3x3x3) or F(2x2,
    2x2) (``layout["taps"]``: 3 or 2) on
    ``num_threads`` pool threads: x (N, C, [D,] H, W) and y (N, M, [OD,] OH, OW) float32
    arrays of any strides, ``packed`` from convt._winograd.transformed_weights, ``b``
    float32 (M,) or None, ``pads`` the begin pads ([front,] top, left),
    ``layout`` a dict of the blocking (convt._winograd_plan).  Returns False when a
    transformed input or an output was not finite (y then holds no defined values):
    the caller computes such calls by an engine that follows the definition's
    arithmetic."""
    cdef WinogradJob job
    cdef Py_ssize_t items
    job_operands(&job, family, x, packed, b, y, groups, layout)
    job.dims = x.ndim - 2
    job.taps = layout.get("taps", 3)
    job.points = (job.taps + 1) ** job.dims
    if (job.dims not in (2, 3) or y.ndim != x.ndim or len(pads) != job.dims
            or job.taps not in (2, 3) or (job.taps == 2 and job.dims != 2)
            or x.dtype != np.float32
            or packed.size != groups * job.points * job.mg * job.cg):
        raise ValueError("winograd_conv: float32 2-D or 3-D operands and pads, 2 taps in "
                         "2-D only, weights for them")
    job.pad_front = pads[0] if job.dims == 3 else 0
    job.pad_top, job.pad_left = pads[job.dims - 2], pads[job.dims - 1]
    job.tile_planes = (y.shape[2] + 1) // 2 if job.dims == 3 else 1
    # ceiling divisions (cdivision: C's / truncates toward zero, so no -(-a // b))
    job.row_blocks = ((job.out_height + 1) // 2 + job.tile_rows - 1) // job.tile_rows
    job.column_blocks = ((job.out_width + 1) // 2 + job.tiles - 1) // job.tiles
    job.per_thread = job.points * (job.channel_chunk + job.out_chunk) * job.capacity
    items = (x.shape[0] * groups * job.tile_planes * job.row_blocks * job.column_blocks
             * job.out_chunks)
    return run_job(&job, winograd_task, items, max(1, num_threads))


cdef void copy_block(const WinogradJob* job, const float* block, Py_ssize_t rows,
                     Py_ssize_t cols, Py_ssize_t ld, char* y, Py_ssize_t row_stride,
                     Py_ssize_t col_stride) noexcept nogil:
    """y[r, c] = block[r * ld + c] for r < rows, c < cols (y's element strides),
    rounded once to a narrow y (whose columns are then contiguous)."""
    cdef Py_ssize_t r, c
    cdef float* out
    for r in range(rows):
        if job.storage != CONVT_F32:
            job.kernels.store[job.storage](y + r * row_stride * convt_itemsize(job.storage),
                                           block + r * ld, cols, 0.0)
        elif col_stride == 1:
            memcpy(y + r * row_stride * sizeof(float), block + r * ld, cols * sizeof(float))
        else:
            out = <float*>y + r * row_stride
            for c in range(cols):
                out[c * col_stride] = block[r * ld + c]


cdef const float* window_copy(const WinogradJob* job, const char* x, Py_ssize_t channels,
                              convt_winograd_block* block, convt_winograd_plane* plane,
                              float* slab) noexcept nogil:
    """The part of ``block``'s patches inside narrow x's plane, widened into ``slab``
    (``channels`` planes of it, each ``plane`` as it returns: contiguous rows of the
    window's columns); ``block``'s top and left move to the slab's coordinates."""
    cdef Py_ssize_t size = convt_itemsize(job.storage)
    cdef Py_ssize_t top = max(block.top, 0), left = max(block.left, 0)
    cdef Py_ssize_t bottom = min(block.top + 2 * block.rows + block.taps - 1,
                                 job.x_plane.height)
    cdef Py_ssize_t right = min(block.left + 2 * block.tiles + block.taps - 1,
                                job.x_plane.width)
    cdef Py_ssize_t c, r
    plane.depth, plane.plane_stride, plane.col_stride = 1, 0, 1
    plane.height, plane.width = max(bottom - top, 0), max(right - left, 0)
    plane.row_stride = plane.width
    for c in range(channels):
        for r in range(plane.height):
            job.kernels.load[job.storage](
                slab + (c * plane.height + r) * plane.width,
                x + (c * job.x_channel + (top + r) * job.x_plane.row_stride + left) * size,
                plane.width)
    block.top -= top
    block.left -= left
    return slab


cdef void winograd_phases_task(void* context, Py_ssize_t index, int slot) noexcept nogil:
    """One block of tiles and chunk of output channels of the phases of one output
    row residue: their outputs, interleaved along the rows, go into the item's block
    of y rows in the workspace (``local``), which is then copied to y whole, so that
    y's lines are written once, not once per phase."""
    cdef const WinogradJob* job = <const WinogradJob*>context
    cdef Py_ssize_t rest = index, n, g, residue, rb, cb, oc, m0, mc, c0, cc, used, p, c, r
    cdef Py_ssize_t t_row, t_col, height, width, y_col
    cdef Py_ssize_t local_size = job.local_rows * job.local_cols
    cdef convt_winograd_block block
    cdef convt_winograd_plane local_plane
    cdef float* v = job.workspace + slot * job.per_thread
    cdef float* m = v + job.points * job.channel_chunk * job.capacity
    cdef float* local = m + job.points * job.out_chunk * job.capacity
    cdef float* slab = local + job.out_chunk * local_size
    cdef char* y_rows
    cdef const char* xg
    cdef const float* weights
    cdef const float* xc
    cdef convt_winograd_plane x_plane
    cdef convt_winograd_block window
    cdef Py_ssize_t item_size = convt_itemsize(job.storage)
    cdef const Py_ssize_t* phase
    cdef int bad = 0
    cdef convt_winograd_in_f32 transform_input
    cdef convt_winograd_out_f32 transform_output
    if stopped(job.signals, slot):
        return
    transforms_of(job, &transform_input, &transform_output)
    oc = rest % job.out_chunks
    rest //= job.out_chunks
    cb = rest % job.column_blocks
    rest //= job.column_blocks
    rb = rest % job.row_blocks
    rest //= job.row_blocks
    residue = rest % job.row_residues
    rest //= job.row_residues
    g = rest % job.groups
    n = rest // job.groups
    m0 = oc * job.out_chunk
    mc = min(job.out_chunk, job.mg - m0)
    t_row = 2 * rb * job.tile_rows  # the block's first output of every phase
    t_col = 2 * cb * job.tiles
    # the residue's outputs s t + residue below y's height, in the block
    height = min(2 * job.tile_rows,
                 (job.out_height - residue + job.stride_rows - 1) // job.stride_rows - t_row)
    if height <= 0:
        return
    xg = <const char*>job.x + (n * job.n_stride + g * job.cg * job.x_channel) * item_size
    block.dims = 2
    block.taps = job.taps
    block.front = 0
    block.out_front = 0
    block.capacity = job.capacity
    block.rows = (height + 1) // 2
    local_plane.depth = 1
    local_plane.plane_stride = 0
    local_plane.height = height
    local_plane.row_stride = job.local_cols
    local_plane.col_stride = job.stride_cols
    for p in range(residue * job.col_residues, (residue + 1) * job.col_residues):
        phase = job.phase_table + 4 * p
        width = min(2 * job.tiles, (job.out_width - phase[1] + job.stride_cols - 1)
                    // job.stride_cols - t_col)
        if width <= 0:
            continue
        block.tiles = (width + 1) // 2
        block.top = t_row - phase[2]
        block.left = t_col - phase[3]
        used = block.rows * block.tiles
        local_plane.width = width
        weights = job.packed + p * job.groups * job.points * job.mg * job.cg
        c0 = 0
        while c0 < job.cg:
            cc = min(job.channel_chunk, job.cg - c0)
            if job.storage == CONVT_F32:
                bad |= transform_input(&block, &job.x_plane,
                                       <const float*>xg + c0 * job.x_channel,
                                       job.x_channel, cc, v)
            else:
                window = block
                xc = window_copy(job, xg + c0 * job.x_channel * item_size, cc, &window,
                                 &x_plane, slab)
                bad |= transform_input(&window, &x_plane, xc, x_plane.height * x_plane.width,
                                       cc, v)
            winograd_products(job, weights, v, m, g, m0, mc, c0, cc, used)
            c0 += cc
        bad |= transform_output(
            &block, 0, 0, &local_plane, m, mc,
            job.bias + g * job.mg + m0 if job.bias != NULL else NULL,
            local + phase[1], local_size)
    y_col = job.stride_cols * t_col
    width = min(job.local_cols, job.out_width - y_col)
    for c in range(mc):
        y_rows = <char*>job.y + item_size * (
            n * job.y_n_stride + (g * job.mg + m0 + c) * job.y_channel
            + (job.stride_rows * t_row + residue) * job.y_row_stride + y_col * job.y_col_stride)
        copy_block(job, local + c * local_size, height, width, job.local_cols, y_rows,
                   job.stride_rows * job.y_row_stride, job.y_col_stride)
    if bad:
        job.non_finite[slot] = 1


def winograd_phases_conv(str family, x, packed, b, y, Py_ssize_t groups, phase_table,
                         strides, layout, int num_threads):
    """Fill ``y`` with the ConvTranspose whose stride phases are the Convs of x in
    ``phase_table`` ((P, 4) intp, row-major over the residues: each phase's first
    output row and column, and the begin pads (top, left) of its Conv), by Winograd
    F(2x2, 2x2) on ``num_threads`` pool threads: x (N, C, H, W) and y (N, M, OH, OW)
    float32 arrays of any strides (float16 or bfloat16: columns contiguous; computed in
    float32, rounded once),
    ``packed`` (P, ...) the phases' weights from convt._winograd.transformed_weights,
    ``b`` float32 (M,) or None, ``strides`` (rows, columns), ``layout`` the blocking
    (convt._winograd.plan).  Returns False when a transformed input or an output was
    not finite (y then holds no defined values), as winograd_conv."""
    cdef WinogradJob job
    cdef Py_ssize_t items, phase_rows, phase_cols
    table = np.ascontiguousarray(phase_table, dtype=np.intp)
    job_operands(&job, family, x, packed, b, y, groups, layout)
    job.dims = 2
    job.taps = 2
    job.points = 9
    job.phases = table.shape[0]
    job.phase_table = <const Py_ssize_t*>data_of(table)
    job.stride_rows, job.stride_cols = strides
    job.y_row_stride, job.y_col_stride = y.strides[2] // y.itemsize, y.strides[3] // y.itemsize
    job.tile_planes = 1
    # the first phase has the most outputs: its tiles set the grid of blocks
    phase_rows = (job.out_height + job.stride_rows - 1) // job.stride_rows
    phase_cols = (job.out_width + job.stride_cols - 1) // job.stride_cols
    job.row_blocks = ((phase_rows + 1) // 2 + job.tile_rows - 1) // job.tile_rows
    job.column_blocks = ((phase_cols + 1) // 2 + job.tiles - 1) // job.tiles
    job.row_residues = min(job.stride_rows, job.out_height)
    job.col_residues = min(job.stride_cols, job.out_width)
    job.local_rows = 2 * job.tile_rows
    job.local_cols = 2 * job.tiles * job.stride_cols
    job.slab = 0 if job.storage == CONVT_F32 else job.channel_chunk * (
        (2 * job.tile_rows + 1) * (2 * job.tiles + 1))
    job.per_thread = (job.points * (job.channel_chunk + job.out_chunk) * job.capacity
                      + job.out_chunk * job.local_rows * job.local_cols + job.slab)
    if (x.ndim != 4 or y.ndim != 4 or table.ndim != 2 or table.shape[1] != 4
            or layout.get("taps") != 2 or job.phases != job.row_residues * job.col_residues
            or packed.size != job.phases * groups * job.points * job.mg * job.cg
            or (job.storage != CONVT_F32
                and (x.strides[3] != x.itemsize or y.strides[3] != y.itemsize))):
        raise ValueError("winograd_phases_conv: 2-D operands, a (phases, 4) table, weights "
                         "for them; narrow types with contiguous columns")
    items = (x.shape[0] * groups * job.row_residues * job.row_blocks * job.column_blocks
             * job.out_chunks)
    return run_job(&job, winograd_phases_task, items, max(1, num_threads))


# --- weight transform ---------------------------------------------------------

cdef enum:
    # positions transformed per block: two blocks of at most 64 rows stay in L2
    TRANSFORM_WIDTH = 64


cdef void transform_along(const double* src, double* dst, Py_ssize_t before, Py_ssize_t taps,
                          Py_ssize_t row) noexcept nogil:
    """dst (before, taps + 1, row) = G along the middle axis of src (before, taps, row):
    F(2x2, 3x3)'s rows g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2 for 3 taps, F(2x2,
    2x2)'s g0, g0 + g1, g1 for 2.  The operations' order is fixed (no contraction: the
    module is built without -ffast-math): the same bits on every platform."""
    cdef Py_ssize_t b, j
    cdef const double* s
    cdef double* d
    cdef double ends
    for b in range(before):
        s = src + b * taps * row
        d = dst + b * (taps + 1) * row
        if taps == 3:
            for j in range(row):
                ends = s[j] + s[2 * row + j]
                d[j] = s[j]
                d[row + j] = (ends + s[row + j]) * 0.5
                d[2 * row + j] = (ends - s[row + j]) * 0.5
                d[3 * row + j] = s[2 * row + j]
        else:
            for j in range(row):
                d[j] = s[j]
                d[row + j] = s[j] + s[row + j]
                d[2 * row + j] = s[row + j]


def winograd_weight_transform(const double[:, ::1] taps, float[:, ::1] out, kernel):
    """out[:, j] = G g G^T (G along every kernel axis) of the kernel g = taps[:, j] (its
    values in C order over ``kernel``, 2 or 3 axes of 2 or 3 taps), rounded once to
    float32: out[p, j] for the transformed point p in C order (4 i + j for 3x3 kernels,
    16 i + 4 j + k for 3x3x3, 3 i + j for 2x2)."""
    cdef Py_ssize_t axes = len(kernel), n = taps.shape[1], size = 1, points = 1
    cdef Py_ssize_t dims[3]
    cdef Py_ssize_t axis, j0, j, k, width, before, row
    if not 2 <= axes <= 3:
        raise ValueError("winograd_weight_transform: 2 or 3 kernel axes")
    for axis in range(axes):
        dims[axis] = kernel[axis]
        if dims[axis] not in (2, 3):
            raise ValueError("winograd_weight_transform: 2 or 3 taps per axis")
        size *= dims[axis]
        points *= dims[axis] + 1
    if taps.shape[0] != size or out.shape[0] != points or out.shape[1] != n:
        raise ValueError("winograd_weight_transform: operands do not match the kernel")
    buffers = np.empty((2, points * TRANSFORM_WIDTH), dtype=np.float64)
    cdef double[:, ::1] work = buffers
    cdef double* src
    cdef double* dst
    cdef double* swap
    cdef Py_ssize_t shape[3]
    with nogil:
        j0 = 0
        while j0 < n:
            width = min(<Py_ssize_t>TRANSFORM_WIDTH, n - j0)
            src = &work[0, 0]
            dst = &work[1, 0]
            for k in range(size):
                for j in range(width):
                    src[k * width + j] = taps[k, j0 + j]
            for axis in range(axes):
                shape[axis] = dims[axis]
            for axis in range(axes):
                before = 1
                for k in range(axis):
                    before *= shape[k]
                row = width
                for k in range(axis + 1, axes):
                    row *= shape[k]
                transform_along(src, dst, before, shape[axis], row)
                shape[axis] += 1
                swap = src
                src = dst
                dst = swap
            for k in range(points):
                for j in range(width):
                    out[k, j0 + j] = <float>src[k * width + j]
            j0 += TRANSFORM_WIDTH
