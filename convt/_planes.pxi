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
    job.per_thread = (buffer * item + 63) // 64 * 64 // item
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
    job.workspace = <char*>data_of(workspace)
    job.workspace = job.workspace + (-(<size_t>job.workspace)) % 64
    job.signals = &signals
    with nogil:
        convt_run(plane_task, &job, items, threads)
    raise_if_stopped(&signals)
