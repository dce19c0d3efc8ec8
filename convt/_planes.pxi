# Depthwise planes: 2-D Conv whose groups each have one input channel, a whole
# input plane at a time (convt/src/plane.h; the rule that picks it is
# convt._dispatch.plane_route).  A work item is one image and a run of
# consecutive groups; per group the kernel set's plane entry copies the input
# plane into the thread's zero-padded buffer and sums every output plane of the
# group from it.  Work items never depend on the thread count, so results are
# bitwise identical for every num_threads.


cdef struct PlaneJob:
    convt_plane_shape shape
    const char* x
    const char* w
    const char* bias           # (M,) of the dtype, or NULL
    char* y
    bint doubles
    const convt_kernels_f32* kernels_f32
    const convt_kernels_f64* kernels_f64
    Py_ssize_t groups, run      # groups, and groups per work item
    Py_ssize_t x_image, x_group, y_image, y_group, w_group   # element strides
    Py_ssize_t mg               # outputs per group
    Py_ssize_t per_thread       # buffer elements per thread (64-byte multiples)
    char* workspace
    Signals* signals


cdef void plane_task(void* context, Py_ssize_t index, int slot) noexcept nogil:
    cdef const PlaneJob* job = <const PlaneJob*>context
    cdef Py_ssize_t runs = (job.groups + job.run - 1) // job.run
    cdef Py_ssize_t n = index // runs
    cdef Py_ssize_t first = (index - n * runs) * job.run
    cdef Py_ssize_t last = min(job.groups, first + job.run)
    cdef Py_ssize_t g, x_at, y_at, w_at
    cdef Py_ssize_t item = 8 if job.doubles else 4
    cdef char* buffer = job.workspace + slot * job.per_thread * item
    cdef convt_plane_kernel_f32 sums_f32
    cdef convt_plane_kernel_f64 sums_f64
    if stopped(job.signals, slot):
        return
    for g in range(first, last):
        x_at = (n * job.x_image + g * job.x_group) * item
        y_at = (n * job.y_image + g * job.y_group) * item
        w_at = g * job.w_group * item
        if job.doubles:
            sums_f64 = (job.kernels_f64.plane if job.kernels_f64.plane != NULL
                        else convt_plane_f64)
            sums_f64(&job.shape, <const double*>(job.x + x_at), <const double*>(job.w + w_at),
                     <const double*>job.bias + g * job.mg if job.bias != NULL else NULL,
                     <double*>(job.y + y_at), <double*>buffer, g == first)
        else:
            sums_f32 = (job.kernels_f32.plane if job.kernels_f32.plane != NULL
                        else convt_plane_f32)
            sums_f32(&job.shape, <const float*>(job.x + x_at), <const float*>(job.w + w_at),
                     <const float*>job.bias + g * job.mg if job.bias != NULL else NULL,
                     <float*>(job.y + y_at), <float*>buffer, g == first)


cdef void plane_shape(convt_plane_shape* shape, in_shape, out_shape, kernel_shape, pads,
                      strides, dilations):
    """The geometry fields of a plane shape (convt_plane_prepare completes it)."""
    shape.in_height, shape.in_width = in_shape
    shape.out_height, shape.out_width = out_shape
    shape.kernel_height, shape.kernel_width = kernel_shape
    shape.stride_y, shape.stride_x = strides
    shape.dilation_y, shape.dilation_x = dilations
    shape.pad_top, shape.pad_left = pads


def plane_buffer_elements(in_shape, out_shape, kernel_shape, pads, strides, dilations):
    """Elements of a thread's padded plane buffer for this 2-D geometry
    (convt_plane_prepare in plane.h: the one place that sizes it)."""
    cdef convt_plane_shape shape
    if kernel_shape[1] > CONVT_PLANE_MAX_TAPS:
        raise ValueError("plane_buffer_elements: a kernel row longer than CONVT_PLANE_MAX_TAPS")
    plane_shape(&shape, in_shape, out_shape, kernel_shape, pads, strides, dilations)
    return convt_plane_prepare(&shape)


cdef Py_ssize_t aligned_elements(Py_ssize_t elements, Py_ssize_t item):
    """``elements`` of ``item`` bytes rounded up to a multiple of 64 bytes."""
    return (elements * item + 63) // 64 * 64 // item


def plane_call(plane, x, w, b, y, int threads, workspaces):
    """Fill ``y`` with Conv(x, w, b) as ``plane`` (convt._planes.PlaneRun) plans it, w's
    kernels contiguous, on ``threads`` threads: plane by plane, or with channels side
    by side in a workspace lent by ``workspaces`` (convt._workspace: 100-300 KiB a
    thread, which a fresh array would fault in on every call)."""
    bias = None if b is None else np.ascontiguousarray(b, dtype=x.dtype)
    if not plane.channel_block:
        plane_conv(plane.family, x, w, bias, y, plane.run, plane.pads, plane.strides,
                   plane.dilations, threads)
        return
    workspace, loan = workspaces.lend((max(1, threads) * plane.buffer_bytes + 64,), np.uint8)
    try:
        plane_conv_channels(plane.family, x, w, bias, y, plane.channel_block, plane.pads,
                            plane.strides, plane.dilations, workspace, threads)
    finally:
        workspaces.give_back(loan)


def plane_conv(str family, x, w, b, y, Py_ssize_t run, pads, strides, dilations,
               int num_threads):
    """Fill ``y`` with Conv(x, w, b) plane by plane on ``num_threads`` pool threads:
    x (N, C, H, W) and y (N, M, OH, OW) of one dtype (float32 or float64) with
    unit column strides, C groups of one input channel (M a multiple of C), w (M, 1,
    KH, KW) with each kernel contiguous, b (M,) contiguous or None; ``run`` groups
    per work item; ``pads`` the begin pads (top, left)."""
    cdef Kernels kernels = kernels_named(family)
    cdef PlaneJob job
    cdef Signals signals = signals_for_this_call()
    cdef Py_ssize_t items, buffer
    cdef int threads = max(1, num_threads)
    cdef Py_ssize_t item = x.dtype.itemsize
    if (x.ndim != 4 or y.ndim != 4 or w.ndim != 4 or w.shape[1] != 1
            or x.dtype != y.dtype or x.dtype != w.dtype or x.dtype.itemsize not in (4, 8)
            or x.dtype.kind != "f" or y.shape[1] % x.shape[1] or w.shape[0] != y.shape[1]
            or (x.shape[3] > 1 and x.strides[3] != item)
            or (y.shape[3] > 1 and y.strides[3] != item)
            or w.strides[3] != item or w.strides[2] != w.shape[3] * item
            or w.shape[3] > CONVT_PLANE_MAX_TAPS or run < 1
            or (b is not None and (b.dtype != x.dtype or not b.flags.c_contiguous))):
        raise ValueError("plane_conv: inconsistent operands")
    job.doubles = item == 8
    job.kernels_f32 = kernels.f32
    job.kernels_f64 = kernels.f64
    plane_shape(&job.shape, x.shape[2:], y.shape[2:], w.shape[2:], pads, strides, dilations)
    job.shape.x_row, job.shape.x_col = x.strides[2] // item, 1
    job.shape.y_row, job.shape.y_col = y.strides[2] // item, 1
    job.shape.outputs = y.shape[1] // x.shape[1]
    job.shape.w_channel = w.strides[0] // item
    job.shape.y_channel = y.strides[1] // item
    buffer = convt_plane_prepare(&job.shape)
    job.per_thread = aligned_elements(buffer, item)
    job.x, job.w = <const char*>data_of(x), <const char*>data_of(w)
    job.y = <char*>data_of(y)
    job.bias = <const char*>data_of(b)
    job.groups, job.run, job.mg = x.shape[1], run, job.shape.outputs
    job.x_image, job.x_group = x.strides[0] // item, x.strides[1] // item
    job.y_image, job.y_group = y.strides[0] // item, job.mg * y.strides[1] // item
    job.w_group = job.mg * job.shape.w_channel
    items = x.shape[0] * ((job.groups + run - 1) // run)
    # 64-byte aligned buffers (rows are whole cache lines, see plane.h)
    workspace = np.empty(threads * job.per_thread * item + 64, dtype=np.uint8)
    job.workspace = aligned_data(workspace)
    job.signals = &signals
    with nogil:
        convt_run(plane_task, &job, items, threads)
    raise_if_stopped(&signals)


# Depthwise planes with channels side by side (plane.h, the plane_channels
# entries): for small planes of many channels, whose rows are too short for the
# plane sums' vectors.  A work item is one image and a block of consecutive
# channels (one input channel and one output channel per group); its thread
# transposes the block's input planes into a zero-padded [row][column][channel]
# buffer, sums every output from it, and transposes the sums back into y.  The
# arithmetic is the plane sums' (see plane.h), so both layouts give the same bits,
# and results do not depend on the thread count.


cdef struct ChannelsJob:
    convt_plane_shape shape
    const char* x
    const char* w              # (C, 1, KH, KW), each kernel contiguous
    const char* bias           # (C,) or NULL
    char* y
    Storage storage            # the kernel set and the element type (float32 or float64)
    Py_ssize_t channels, block, blocks
    Py_ssize_t x_image, x_channel, y_image, y_channel, w_channel   # element strides
    Py_ssize_t rows, cols      # the padded buffer's positions
    Py_ssize_t padded, sums, weights   # elements of each part of a thread's buffer
    Py_ssize_t per_thread      # buffer elements per thread (64-byte multiples)
    char* workspace
    Signals* signals


cdef inline void channels_weights(const ChannelsJob* job, Py_ssize_t first, Py_ssize_t count,
                                  acc_t* w, acc_t* bias) noexcept nogil:
    """The block's kernels as [kernel row][tap][channel] into ``w``, its biases into
    ``bias``, zero past its last channel (those lanes are summed, never stored)."""
    cdef Py_ssize_t taps = job.shape.kernel_height * job.shape.kernel_width
    cdef const acc_t* source = <const acc_t*>job.w + first * job.w_channel
    cdef Py_ssize_t t
    if count < job.block:
        for t in range(taps):
            memset(w + t * job.block + count, 0, (job.block - count) * sizeof(acc_t))
    # the set's transpose: element by element, the stores a block apart took a
    # tenth of a 5x5 stride-2 call over 672 channels of 14x14
    transpose(&job.storage, count, taps, source, job.w_channel, w, job.block,
              <const acc_t*>NULL)
    if job.bias != NULL:
        memset(bias, 0, job.block * sizeof(acc_t))
        memcpy(bias, <const acc_t*>job.bias + first, count * sizeof(acc_t))


cdef inline void channels_sums(const ChannelsJob* job, const acc_t* padded, const acc_t* w,
                               const acc_t* bias, acc_t* sums) noexcept nogil:
    cdef const Kernels* kernels = &job.storage.kernels
    if acc_t is float:
        if kernels.f32.plane_channels != NULL:
            kernels.f32.plane_channels(&job.shape, job.block, padded, w, bias, sums)
        else:
            convt_plane_channels_f32(&job.shape, job.block, padded, w, bias, sums)
    else:
        if kernels.f64.plane_channels != NULL:
            kernels.f64.plane_channels(&job.shape, job.block, padded, w, bias, sums)
        else:
            convt_plane_channels_f64(&job.shape, job.block, padded, w, bias, sums)


cdef inline void zero_border(const ChannelsJob* job, Py_ssize_t used, acc_t* padded) noexcept nogil:
    """Zero the padded buffer's positions that no input element lands on (its padding):
    rows above and below the input's, and the columns left and right of it."""
    cdef const convt_plane_shape* s = &job.shape
    cdef Py_ssize_t block = job.block
    cdef Py_ssize_t top = min(s.pad_top, job.rows)
    cdef Py_ssize_t end = min(s.pad_top + s.in_height, job.rows)  # input rows [top, end)
    cdef Py_ssize_t left = min(s.pad_left, job.cols)
    cdef Py_ssize_t right = left + max(used, 0)
    cdef Py_ssize_t r
    memset(padded, 0, top * job.cols * block * sizeof(acc_t))
    memset(padded + end * job.cols * block, 0, (job.rows - end) * job.cols * block * sizeof(acc_t))
    for r in range(top, end):
        memset(padded + r * job.cols * block, 0, left * block * sizeof(acc_t))
        memset(padded + (r * job.cols + right) * block, 0,
               (job.cols - right) * block * sizeof(acc_t))


cdef void channels_item(const ChannelsJob* job, Py_ssize_t n, Py_ssize_t block_index,
                        acc_t* buffer) noexcept nogil:
    """One image's block of channels: input planes into the padded buffer (input row
    h at padded row h + pad_top, column q at q + pad_left, those an output reads,
    each row transposed straight into place), the sums, and the sums into y."""
    cdef const convt_plane_shape* s = &job.shape
    cdef Py_ssize_t block = job.block
    cdef Py_ssize_t first = block_index * block
    cdef Py_ssize_t count = min(block, job.channels - first)
    cdef acc_t* padded = buffer
    cdef acc_t* sums = padded + job.padded
    cdef acc_t* w = sums + job.sums
    cdef acc_t* bias = w + job.weights
    cdef const acc_t* x = <const acc_t*>job.x + n * job.x_image + first * job.x_channel
    cdef acc_t* y = <acc_t*>job.y + n * job.y_image + first * job.y_channel
    cdef Py_ssize_t used = min(s.in_width, job.cols - s.pad_left)  # input columns read
    cdef Py_ssize_t h, oy
    zero_border(job, used, padded)
    if used > 0:
        for h in range(min(s.in_height, job.rows - s.pad_top)):
            transpose(&job.storage, count, used, x + h * s.x_row, job.x_channel,
                      padded + ((h + s.pad_top) * job.cols + s.pad_left) * block, block,
                      <const acc_t*>NULL)
    channels_weights(job, first, count, w, bias)
    channels_sums(job, padded, w, bias if job.bias != NULL else NULL, sums)
    if s.y_row == s.out_width:
        transpose(&job.storage, s.out_height * s.out_width, count, sums, block, y,
                  job.y_channel, <const acc_t*>NULL)
    else:
        for oy in range(s.out_height):
            transpose(&job.storage, s.out_width, count, sums + oy * s.out_width * block,
                      block, y + oy * s.y_row, job.y_channel, <const acc_t*>NULL)


cdef void channels_task(void* context, Py_ssize_t index, int slot) noexcept nogil:
    cdef const ChannelsJob* job = <const ChannelsJob*>context
    cdef Py_ssize_t n = index // job.blocks
    cdef bint doubles = job.storage.type == CONVT_F64
    cdef char* buffer = job.workspace + slot * job.per_thread * (8 if doubles else 4)
    if stopped(job.signals, slot):
        return
    if doubles:
        channels_item(job, n, index - n * job.blocks, <double*>buffer)
    else:
        channels_item(job, n, index - n * job.blocks, <float*>buffer)


cdef void channels_buffers(ChannelsJob* job, Py_ssize_t item):
    """The elements of each part of a thread's buffer, each a 64-byte multiple."""
    cdef const convt_plane_shape* s = &job.shape
    job.rows = convt_plane_channels_rows(s)
    job.cols = convt_plane_channels_cols(s)
    job.padded = aligned_elements(job.rows * job.cols * job.block, item)
    job.sums = aligned_elements(s.out_height * s.out_width * job.block, item)
    job.weights = aligned_elements(s.kernel_height * s.kernel_width * job.block, item)
    job.per_thread = (job.padded + job.sums + job.weights
                      + aligned_elements(job.block, item))


def plane_channels_bytes(in_shape, out_shape, kernel_shape, strides, dilations,
                         Py_ssize_t block, Py_ssize_t itemsize):
    """Bytes of a thread's buffer for plane_conv_channels."""
    cdef ChannelsJob job
    plane_shape(&job.shape, in_shape, out_shape, kernel_shape, (0, 0), strides, dilations)
    job.block = block
    channels_buffers(&job, itemsize)
    return job.per_thread * itemsize


def plane_conv_channels(str family, x, w, b, y, Py_ssize_t block, pads, strides, dilations,
                        workspace, int num_threads):
    """Fill ``y`` with Conv(x, w, b) with channels side by side, ``block`` channels per
    work item (a multiple of 32), on ``num_threads`` pool threads: x (N, C, H, W) and
    y (N, C, OH, OW) of one dtype (float32 or float64) with unit column strides, C
    groups of one channel, w (C, 1, KH, KW) with each kernel contiguous, b (C,)
    contiguous or None; ``pads`` the begin pads (top, left), not negative;
    ``workspace`` a C-contiguous array of at least ``num_threads`` times
    plane_channels_bytes, plus 64, bytes."""
    cdef Kernels kernels = kernels_named(family)
    cdef ChannelsJob job
    cdef Signals signals = signals_for_this_call()
    cdef int threads = max(1, num_threads)
    cdef Py_ssize_t item = x.dtype.itemsize
    cdef Py_ssize_t channels, items
    if (x.ndim != 4 or y.ndim != 4 or w.ndim != 4 or w.shape[1] != 1
            or x.dtype != y.dtype or x.dtype != w.dtype or x.dtype.itemsize not in (4, 8)
            or x.dtype.kind != "f" or y.shape[1] != x.shape[1] or w.shape[0] != x.shape[1]
            or (x.shape[3] > 1 and x.strides[3] != item)
            or (y.shape[3] > 1 and y.strides[3] != item)
            or block < 32 or block % 32 or min(pads) < 0
            or w.strides[3] != item or w.strides[2] != w.shape[3] * item
            or (b is not None and (b.dtype != x.dtype or b.shape != (x.shape[1],)
                                   or not b.flags.c_contiguous))):
        raise ValueError("plane_conv_channels: inconsistent operands")
    channels = x.shape[1]
    job.storage.kernels = kernels
    job.storage.type = CONVT_F64 if item == 8 else CONVT_F32
    job.storage.masked_stores = False
    plane_shape(&job.shape, x.shape[2:], y.shape[2:], w.shape[2:], pads, strides, dilations)
    job.shape.x_row, job.shape.x_col = x.strides[2] // item, 1
    job.shape.y_row, job.shape.y_col = y.strides[2] // item, 1
    job.shape.outputs = 1
    job.channels, job.block = channels, block
    job.blocks = (channels + block - 1) // block
    channels_buffers(&job, item)
    job.x, job.w = <const char*>data_of(x), <const char*>data_of(w)
    job.y = <char*>data_of(y)
    job.bias = <const char*>data_of(b)
    job.x_image, job.x_channel = x.strides[0] // item, x.strides[1] // item
    job.w_channel = w.strides[0] // item
    job.y_image, job.y_channel = y.strides[0] // item, y.strides[1] // item
    items = x.shape[0] * job.blocks
    if (not workspace.flags.c_contiguous or not workspace.flags.writeable
            or workspace.nbytes < threads * job.per_thread * item + 64):
        raise ValueError("plane_conv_channels: workspace too small")
    job.workspace = aligned_data(workspace)
    job.signals = &signals
    with nogil:
        convt_run(channels_task, &job, items, threads)
    raise_if_stopped(&signals)
