# Conv by bands of output rows (convt._bands; the rule that picks it is
# convt._dispatch.band_route).  A work item is one image, one group, one output
# slice (3-D; one for 1-D and 2-D), a band of consecutive output rows and a run of
# output-channel vectors.  Its thread copies the input rows the band reads, of
# every input channel of the group and every input slice the output slice reads,
# into a zero-padded buffer ([channel][slice][row][column], so every tap of every
# output is inside it), then, vector by vector, row by row, runs the set's transposed
# kernels (gemm_t): one vector of output channels per call, the call's positions
# broadcast from the buffer at the column stride.  Every output is one kernel
# call's blocked sum over the whole depth (input channel, kernel row, tap in C
# order) started from the bias, from a buffer whose values do not depend on the
# band, so results are the same bits whatever the bands, work items and thread
# count.  Padding is multiplied like any input, as the Conv definition does.


cdef struct BandJob:
    const char* x
    const char* packed          # (G, V, depth, lanes): w's vectors of output channels
    const char* bias            # (M,) of the dtype, or NULL
    char* y
    bint doubles
    const convt_kernels_f32* kernels_f32
    const convt_kernels_f64* kernels_f64
    const Py_ssize_t* offsets   # [depth]: where step k reads, relative to a position
    Py_ssize_t groups, cg, mg, vectors, lanes, depth, block
    Py_ssize_t in_slices, in_height, in_width, out_slices, out_height, out_width
    Py_ssize_t kernel_height, stride_y, stride_x, dilation_y, pad_top, pad_left
    Py_ssize_t stride_z, dilation_z, pad_front, slice_extent   # the 3-D's first axis
    Py_ssize_t band_rows, bands, parts, max_positions, items, threads
    Py_ssize_t padded_width, band_in_rows, plane_elements, channel_elements
    Py_ssize_t x_image, x_channel, x_slice, x_row, x_col      # element strides
    Py_ssize_t y_image, y_channel, y_slice, y_row, y_col
    Py_ssize_t per_thread       # workspace elements per thread (64-byte multiples)
    char* workspace
    Signals* signals


cdef inline void band_hints(const BandJob* job, const acc_t* x, Py_ssize_t top,
                            Py_ssize_t copied) noexcept nogil:
    """Cache hints for the rows band_fill copies next (x: that channel's, or input
    slice's, first element): a band reads a few rows of each channel, a plane apart, too short a
    run for the hardware prefetchers to catch up."""
    cdef Py_ssize_t q, byte, row
    cdef Py_ssize_t length = ((copied - 1) * job.x_col + 1) * sizeof(acc_t)
    cdef const char* start
    for q in range(job.band_in_rows):
        row = top + q
        if row < 0 or row >= job.in_height or copied == 0:
            continue
        start = <const char*>(x + row * job.x_row)
        byte = 0
        while byte < length:
            convt_prefetch(start + byte)
            byte += CACHE_LINE_BYTES
        convt_prefetch(start + length - 1)


cdef struct BandHints:
    # cache hints for the input rows of a later work item, a few per kernel call:
    # each (channel, input slice)'s rows are one span of memory (rows of x lie next
    # to each other)
    const char* channel         # the current channel's first slice's first row
    const char* span_start      # the current span's first byte
    Py_ssize_t channel_bytes, slice_bytes, span, spans, slices, per_call
    Py_ssize_t index, slice, offset  # where the next hint goes: span (and its slice), byte


cdef inline void start_hints(const BandJob* job, Py_ssize_t index, Py_ssize_t calls,
                             BandHints* hints, const acc_t* like) noexcept nogil:
    """Hints for work item ``index`` (none past the last), spread over ``calls``
    kernel calls: while this item computes, the rows the next one this thread
    takes will copy come into L2 (a band reads a few rows of each channel, a
    plane apart, which the hardware prefetchers do not follow; the copy waited
    on them).  Only where x's rows are dense (a span holds little else)."""
    cdef Py_ssize_t rest, band_index, slice_index, g, n, top, bottom, front, back, length
    hints.spans = 0
    hints.index = hints.slice = hints.offset = 0
    if index >= job.items or calls < 1 or job.in_width < 1:
        return
    rest = index // job.parts
    band_index = rest % job.bands
    rest = rest // job.bands
    slice_index = rest % job.out_slices
    rest = rest // job.out_slices
    g = rest % job.groups
    n = rest // job.groups
    top = max(0, band_index * job.band_rows * job.stride_y - job.pad_top)
    bottom = min(job.in_height, band_index * job.band_rows * job.stride_y - job.pad_top
                 + job.band_in_rows)
    front = max(0, slice_index * job.stride_z - job.pad_front)
    back = min(job.in_slices, slice_index * job.stride_z - job.pad_front + job.slice_extent)
    length = ((job.in_width - 1) * job.x_col + 1) * sizeof(acc_t)
    if (bottom <= top or back <= front
            or job.x_row * <Py_ssize_t>sizeof(acc_t) > 2 * length + CACHE_LINE_BYTES):
        return
    hints.channel = <const char*>(<const acc_t*>job.x + n * job.x_image + g * job.cg * job.x_channel
                                  + front * job.x_slice + top * job.x_row)
    hints.span_start = hints.channel
    hints.channel_bytes = job.x_channel * sizeof(acc_t)
    hints.slice_bytes = job.x_slice * sizeof(acc_t)
    hints.span = (bottom - top - 1) * job.x_row * sizeof(acc_t) + length
    hints.slices = back - front
    hints.spans = job.cg * hints.slices
    hints.per_call = ((hints.span // CACHE_LINE_BYTES + 2) * hints.spans + calls - 1) // calls


cdef inline void next_hints(BandHints* hints) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(hints.per_call):
        if hints.index >= hints.spans:
            return
        convt_prefetch(hints.span_start + hints.offset)
        hints.offset += CACHE_LINE_BYTES
        if hints.offset >= hints.span + CACHE_LINE_BYTES:  # (the span's last line too)
            # the next span: the channel's next input slice, or the next channel's first
            # (a cursor: no division per hint)
            hints.offset = 0
            hints.index += 1
            hints.slice += 1
            if hints.slice == hints.slices:
                hints.slice = 0
                hints.channel += hints.channel_bytes
                hints.span_start = hints.channel
            else:
                hints.span_start += hints.slice_bytes


cdef inline void band_fill(const BandJob* job, const acc_t* x, Py_ssize_t front,
                           Py_ssize_t top, bint hinted, acc_t* band) noexcept nogil:
    """band[c][z][q][u] = x[c, front + z, top + q, u - pad_left] inside the input, 0
    outside, for the group's channels c, z < slice_extent, q < band_in_rows, u <
    padded_width (x: the group's first channel of the image).  Unless ``hinted``
    (the item before on this thread hinted these rows, start_hints), each span of
    rows hints the next one as it is copied."""
    cdef Py_ssize_t c, z, q, u, row, plane
    cdef Py_ssize_t width = job.padded_width
    cdef Py_ssize_t left = min(job.pad_left, width)
    cdef Py_ssize_t copied = max(0, min(job.in_width, width - job.pad_left))
    cdef const acc_t* source
    cdef acc_t* dst
    for c in range(job.cg):
        for z in range(job.slice_extent):
            plane = front + z
            dst = band + c * job.channel_elements + z * job.plane_elements
            if plane < 0 or plane >= job.in_slices:
                memset(dst, 0, job.plane_elements * sizeof(acc_t))
                continue
            if hinted:
                pass
            elif z + 1 < job.slice_extent and plane + 1 < job.in_slices:
                band_hints(job, x + c * job.x_channel + (plane + 1) * job.x_slice, top, copied)
            elif c + 1 < job.cg:
                band_hints(job, x + (c + 1) * job.x_channel + max(0, front) * job.x_slice, top,
                           copied)
            for q in range(job.band_in_rows):
                dst = band + c * job.channel_elements + z * job.plane_elements + q * width
                row = top + q
                if row < 0 or row >= job.in_height or copied == 0:
                    memset(dst, 0, width * sizeof(acc_t))
                    continue
                source = x + c * job.x_channel + plane * job.x_slice + row * job.x_row
                for u in range(left):
                    dst[u] = 0
                if job.x_col == 1:  # rows of a few dozen elements: a loop beats memcpy's call
                    for u in range(copied):
                        dst[left + u] = source[u]
                else:
                    for u in range(copied):
                        dst[left + u] = source[u * job.x_col]
                for u in range(left + copied, width):
                    dst[u] = 0


cdef inline void band_store(const BandJob* job, const acc_t* product, Py_ssize_t count,
                            Py_ssize_t positions, acc_t* y) noexcept nogil:
    """y[m, j] = product[j][m] for the vector's ``count`` output channels m and the
    call's ``positions`` j (y: the first one's output)."""
    cdef Py_ssize_t m, j
    if job.y_col == 1:
        if acc_t is float:
            job.kernels_f32.transpose(positions, count, product, job.lanes, y, job.y_channel,
                                      NULL)
        else:
            job.kernels_f64.transpose(positions, count, product, job.lanes, y, job.y_channel,
                                      NULL)
        return
    for m in range(count):
        for j in range(positions):
            y[m * job.y_channel + j * job.y_col] = product[j * job.lanes + m]


cdef inline void band_item(const BandJob* job, Py_ssize_t index, int slot,
                           const acc_t* like) noexcept nogil:
    """Work item ``index``: (image, group, output slice, band, part of the vectors),
    slowest first."""
    cdef Py_ssize_t part = index % job.parts
    cdef Py_ssize_t rest = index // job.parts
    cdef Py_ssize_t band_index = rest % job.bands
    rest = rest // job.bands
    cdef Py_ssize_t slice_index = rest % job.out_slices
    rest = rest // job.out_slices
    cdef Py_ssize_t g = rest % job.groups
    cdef Py_ssize_t n = rest // job.groups
    cdef Py_ssize_t first_row = band_index * job.band_rows
    cdef Py_ssize_t end_row = min(job.out_height, first_row + job.band_rows)
    cdef Py_ssize_t first_vector = part * job.vectors // job.parts
    cdef Py_ssize_t end_vector = (part + 1) * job.vectors // job.parts
    cdef Py_ssize_t item = sizeof(acc_t)
    cdef acc_t* band = <acc_t*>(job.workspace + slot * job.per_thread * item)
    cdef acc_t* product = band + (job.cg * job.channel_elements + 15) // 16 * 16
    cdef acc_t* biases = product + (job.max_positions * job.lanes + 15) // 16 * 16
    cdef Py_ssize_t* positions = <Py_ssize_t*>(biases + (job.max_positions * job.lanes + 15)
                                               // 16 * 16)
    cdef const acc_t* x = <const acc_t*>job.x + n * job.x_image + g * job.cg * job.x_channel
    cdef const acc_t* weights
    cdef const acc_t* bias
    cdef acc_t* y_vector
    cdef Py_ssize_t v, r, j, m, m0, count, calls, call, size, done, base
    cdef int accumulate = job.bias != NULL
    if first_row >= end_row or first_vector >= end_vector:
        return
    cdef BandHints hints
    # items after a thread's first were hinted by the one before (start_hints)
    band_fill(job, x, slice_index * job.stride_z - job.pad_front,
              first_row * job.stride_y - job.pad_top, index >= job.threads, band)
    calls = (job.out_width + job.max_positions - 1) // job.max_positions
    # the item this thread most likely takes next: the pool hands items out in turn
    start_hints(job, index + job.threads, (end_vector - first_vector) * (end_row - first_row)
                * calls, &hints, like)
    for v in range(first_vector, end_vector):
        weights = (<const acc_t*>job.packed) + (g * job.vectors + v) * job.depth * job.lanes
        m0 = g * job.mg + v * job.lanes
        count = min(job.lanes, job.mg - v * job.lanes)
        y_vector = <acc_t*>job.y + n * job.y_image + m0 * job.y_channel + slice_index * job.y_slice
        if accumulate:  # the sums start from the bias: a call's copy of these rows
            bias = (<const acc_t*>job.bias) + m0
            for j in range(job.max_positions):
                for m in range(job.lanes):
                    biases[j * job.lanes + m] = bias[m] if m < count else 0
        for r in range(first_row, end_row):
            base = (r - first_row) * job.stride_y * job.padded_width
            done = 0
            for call in range(calls):
                # the row's positions in calls of equal sizes (the first ones one more)
                size = job.out_width // calls + (1 if call < job.out_width % calls else 0)
                for j in range(size):
                    positions[j] = base + (done + j) * job.stride_x
                next_hints(&hints)
                if accumulate:
                    memcpy(product, biases, size * job.lanes * sizeof(acc_t))
                if acc_t is float:
                    job.kernels_f32.gemm_t[1][size - 1](
                        job.depth, job.block, weights, band, job.offsets, positions, product,
                        job.lanes, accumulate)
                else:
                    job.kernels_f64.gemm_t[1][size - 1](
                        job.depth, job.block, weights, band, job.offsets, positions, product,
                        job.lanes, accumulate)
                band_store(job, product, count, size, y_vector + r * job.y_row + done * job.y_col)
                done += size


cdef void band_task(void* context, Py_ssize_t index, int slot) noexcept nogil:
    cdef const BandJob* job = <const BandJob*>context
    if stopped(job.signals, slot):
        return
    if job.doubles:
        band_item(job, index, slot, <const double*>NULL)
    else:
        band_item(job, index, slot, <const float*>NULL)


cdef Py_ssize_t transposed_positions(Kernels kernels, bint doubles):
    """Positions of the longest gemm_t call of full vectors the set has (0: none)."""
    cdef Py_ssize_t p
    for p in range(CONVT_MAX_T_POSITIONS, 0, -1):
        if (kernels.f64.gemm_t[1][p - 1] if doubles else kernels.f32.gemm_t[1][p - 1]) != NULL:
            return p
    return 0


def band_positions(str family, bint doubles):
    """Positions of the longest gemm_t call of full vectors kernel set ``family`` has."""
    return transposed_positions(kernels_named(family), doubles)


def band_buffer_elements(Py_ssize_t channels, Py_ssize_t band_in_rows, Py_ssize_t padded_width,
                         Py_ssize_t max_positions, Py_ssize_t lanes):
    """Workspace elements (float32 or float64) of one thread: the band, the product,
    the bias rows, the positions (each rounded up to 16 elements), in 64-byte
    multiples."""
    cdef Py_ssize_t band = (channels * band_in_rows * padded_width + 15) // 16 * 16
    cdef Py_ssize_t product = (max_positions * lanes + 15) // 16 * 16
    # the product, the bias rows, then the positions (Py_ssize_t: twice a float32's size)
    return band + 2 * product + (max_positions * sizeof(Py_ssize_t) + 63) // 64 * 16


def band_conv(str family, x, packed, b, y, kernel_shape, pads, strides, dilations,
              Py_ssize_t band_rows, Py_ssize_t parts, Py_ssize_t block, int num_threads,
              workspaces):
    """Fill ``y`` (N, M, OD, OH, OW) with Conv(x, w, b) by bands of output rows on
    ``num_threads`` pool threads: x (N, C, D, H, W) and y of one dtype (float32 or
    float64) with strides that are multiples of it (1-D and 2-D problems with
    leading axes of one); ``packed`` (G, V, depth, lanes) C-contiguous, w's output
    channels of each group in vectors of the set's NR lanes (zeros past the group's
    channels), depth = C/G x KD x KH x KW in C order; b (M,) contiguous or None;
    ``kernel_shape``, ``strides``, ``dilations`` and ``pads`` (the begin pads) of
    the three axes; ``band_rows``
    output rows per band, ``parts`` runs of vectors per band, ``block`` the
    blocked-sum steps; ``workspaces`` lends the threads' buffers (convt._workspace)."""
    cdef Kernels kernels = kernels_named(family)
    cdef BandJob job
    cdef Signals signals = signals_for_this_call()
    cdef int threads = max(1, num_threads)
    cdef Py_ssize_t item = y.dtype.itemsize
    cdef Py_ssize_t c, t, i, j, k, items
    cdef Py_ssize_t* offset
    job.doubles = item == 8
    job.kernels_f32, job.kernels_f64 = kernels.f32, kernels.f64
    job.lanes = kernels.f64.nr if job.doubles else kernels.f32.nr
    job.max_positions = transposed_positions(kernels, job.doubles)
    if (x.ndim != 5 or y.ndim != 5 or packed.ndim != 4 or x.dtype != y.dtype
            or packed.dtype != y.dtype or item not in (4, 8) or x.dtype.kind != "f"
            or not packed.flags.c_contiguous or packed.shape[3] != job.lanes
            or x.shape[0] != y.shape[0] or x.shape[1] % packed.shape[0]
            or y.shape[1] % packed.shape[0] or band_rows < 1 or parts < 1 or block < 1
            or any(s % item for s in x.strides) or any(s % item for s in y.strides)
            or (b is not None and (b.dtype != y.dtype or not b.flags.c_contiguous
                                   or b.shape[0] != y.shape[1]))
            or (job.doubles and kernels.f64.gemm_t[1][0] == NULL)
            or (not job.doubles and kernels.f32.gemm_t[1][0] == NULL)):
        raise ValueError("band_conv: inconsistent operands")
    job.groups = packed.shape[0]
    job.vectors = packed.shape[1]
    job.cg = x.shape[1] // job.groups
    job.mg = y.shape[1] // job.groups
    job.depth = packed.shape[2]
    job.block = block
    job.in_slices, job.in_height, job.in_width = x.shape[2:]
    job.out_slices, job.out_height, job.out_width = y.shape[2:]
    job.kernel_height = kernel_shape[1]
    job.stride_z, job.stride_y, job.stride_x = strides
    job.dilation_z, job.dilation_y = dilations[0], dilations[1]
    job.pad_front, job.pad_top, job.pad_left = pads
    if (job.vectors * job.lanes < job.mg
            or job.depth != job.cg * kernel_shape[0] * kernel_shape[1] * kernel_shape[2]
            or job.out_slices < 1 or job.out_height < 1 or job.out_width < 1):
        raise ValueError("band_conv: inconsistent operands")
    job.band_rows = band_rows
    job.bands = (job.out_height + band_rows - 1) // band_rows
    job.parts = min(parts, job.vectors)
    # every tap of every output lies inside the buffer's rows
    job.padded_width = (job.out_width - 1) * job.stride_x + (kernel_shape[2] - 1) * dilations[2] + 1
    job.band_in_rows = (band_rows - 1) * job.stride_y + (job.kernel_height - 1) * job.dilation_y + 1
    job.slice_extent = (kernel_shape[0] - 1) * job.dilation_z + 1
    job.plane_elements = job.band_in_rows * job.padded_width
    job.channel_elements = job.slice_extent * job.plane_elements
    job.x_image, job.x_channel, job.x_slice, job.x_row, job.x_col = [s // item for s in x.strides]
    job.y_image, job.y_channel, job.y_slice, job.y_row, job.y_col = [s // item for s in y.strides]
    job.per_thread = band_buffer_elements(job.cg * job.slice_extent, job.band_in_rows,
                                          job.padded_width, job.max_positions, job.lanes)
    job.per_thread = (job.per_thread * item + 63) // 64 * 64 // item
    offsets = np.empty(job.depth, dtype=np.intp)
    offset = <Py_ssize_t*>data_of(offsets)
    k = 0
    for c in range(job.cg):
        for t in range(kernel_shape[0]):
            for i in range(kernel_shape[1]):
                for j in range(kernel_shape[2]):
                    offset[k] = (c * job.channel_elements + t * job.dilation_z * job.plane_elements
                                 + i * job.dilation_y * job.padded_width + j * dilations[2])
                    k += 1
    job.offsets = offset
    job.x, job.packed = <const char*>data_of(x), <const char*>data_of(packed)
    job.bias = <const char*>data_of(b)
    job.y = <char*>data_of(y)
    items = x.shape[0] * job.groups * job.out_slices * job.bands * job.parts
    job.items, job.threads = items, threads
    workspace, loan = workspaces.lend((threads * job.per_thread * item + 64,), np.uint8)
    try:
        job.workspace = aligned_data(workspace)
        job.signals = &signals
        with nogil:
            convt_run(band_task, &job, items, threads)
    finally:
        workspaces.give_back(loan)
    raise_if_stopped(&signals)
