# Kernel testers: call one kernel of one set, or the family's scalar reference
# (convt/src/reference.c), on NumPy arrays.  Used by tests/test_kernels.py only.
#
# Each tester takes a `spec` object with the call's arrays and scalars as
# attributes; `spec.family` names a kernel family or is "reference".
# An entry a set does not have raises LookupError.


cdef extern from "reference.h" nogil:
    ctypedef struct convt_call_shape:
        int rows
        int width
        Py_ssize_t sibling
    void convt_reference_gemm_f32(const convt_call_shape*, Py_ssize_t, Py_ssize_t, const float*,
                                  const float*, const Py_ssize_t*, float*, Py_ssize_t, int,
                                  float*)
    void convt_reference_gemm_f64(const convt_call_shape*, Py_ssize_t, Py_ssize_t,
                                  const double*, const double*, const Py_ssize_t*, double*,
                                  Py_ssize_t, int, double*)
    void convt_reference_gemm_t_f32(const convt_call_shape*, Py_ssize_t, Py_ssize_t,
                                    const float*, const float*, const Py_ssize_t*,
                                    const Py_ssize_t*, float*, Py_ssize_t, int)
    void convt_reference_gemm_t_f64(const convt_call_shape*, Py_ssize_t, Py_ssize_t,
                                    const double*, const double*, const Py_ssize_t*,
                                    const Py_ssize_t*, double*, Py_ssize_t, int)
    void convt_reference_pair_store_f32(const convt_call_shape*, int, Py_ssize_t, Py_ssize_t,
                                        const float*, const float*, const Py_ssize_t*, void*,
                                        Py_ssize_t, int, const float*)
    void convt_reference_pair_store_f64(const convt_call_shape*, int, Py_ssize_t, Py_ssize_t,
                                        const double*, const double*, const Py_ssize_t*,
                                        void*, Py_ssize_t, int, const double*)
    void convt_reference_row_f32(Py_ssize_t, const float* const*, const float*, Py_ssize_t,
                                 const Py_ssize_t*, Py_ssize_t, Py_ssize_t, float*, int)
    void convt_reference_row_f64(Py_ssize_t, const double* const*, const double*, Py_ssize_t,
                                 const Py_ssize_t*, Py_ssize_t, Py_ssize_t, double*, int)
    void convt_reference_channels_f32(Py_ssize_t, Py_ssize_t, const float*, Py_ssize_t,
                                      const float*, float*, Py_ssize_t)
    void convt_reference_channels_f64(Py_ssize_t, Py_ssize_t, const double*, Py_ssize_t,
                                      const double*, double*, Py_ssize_t)
    void convt_reference_interleave_f32(float*, const float*, const float*, Py_ssize_t, float)
    void convt_reference_interleave_f64(double*, const double*, const double*, Py_ssize_t,
                                        double)
    void convt_reference_store_even_f32(float*, const float*, Py_ssize_t, float)
    void convt_reference_store_even_f64(double*, const double*, Py_ssize_t, double)
    void convt_reference_pack_pair_f32(Py_ssize_t, Py_ssize_t, const float*, const Py_ssize_t*,
                                       Py_ssize_t, float*)
    void convt_reference_transpose_f32(Py_ssize_t, Py_ssize_t, const float*, Py_ssize_t,
                                       float*, Py_ssize_t, const float*)
    void convt_reference_transpose_f64(Py_ssize_t, Py_ssize_t, const double*, Py_ssize_t,
                                       double*, Py_ssize_t, const double*)
    void convt_reference_pack_pair_f64(Py_ssize_t, Py_ssize_t, const double*,
                                       const Py_ssize_t*, Py_ssize_t, double*)
    void convt_reference_stencil_f32(const convt_stencil_shape*, const float* const*,
                                     const float*, float*, int)
    void convt_reference_stencil_f64(const convt_stencil_shape*, const double* const*,
                                     const double*, double*, int)
    void convt_reference_add_bias_f32(float*, const float*, Py_ssize_t, float)
    void convt_reference_add_bias_f64(double*, const double*, Py_ssize_t, double)
    void convt_reference_load_f32(int, float*, const void*, Py_ssize_t)
    void convt_reference_load_f64(int, double*, const void*, Py_ssize_t)
    void convt_reference_store_f32(int, void*, const float*, Py_ssize_t, float)
    void convt_reference_store_f64(int, void*, const double*, Py_ssize_t, double)


cdef inline void* pointer(object array) except? NULL:
    return <void*>data_of(array)


cdef void* _found(void* entry, spec) except NULL:
    if entry == NULL:
        raise LookupError(f"kernel set {spec.family!r} has no {spec.kernel!r} entry "
                          f"for {spec.rows} rows")
    return entry


cdef gemm_typed(spec, acc_t* a):
    """spec.kernel: 'gemm', 'gemm_pack', 'gemm_stream', 'half', 'pair' or 'pair_store'
    (half=spec.half)."""
    cdef acc_t* b = <acc_t*>pointer(spec.b)
    cdef const Py_ssize_t* offsets = <const Py_ssize_t*>pointer(spec.offsets)
    cdef void* out = pointer(spec.out)
    cdef acc_t* pack_to = <acc_t*>pointer(spec.pack_to)
    cdef const acc_t* bias = <const acc_t*>pointer(spec.bias)
    cdef int rows = spec.rows
    cdef int half = spec.half
    cdef int storage = spec.storage
    cdef convt_call_shape shape
    cdef Kernels kernels
    cdef void* entry
    shape.rows = rows
    shape.width = spec.width
    shape.sibling = spec.sibling if spec.kernel in ("pair", "pair_store") else 0
    if spec.family == "reference":
        if spec.kernel == "pair_store":
            if acc_t is float:
                convt_reference_pair_store_f32(&shape, storage, spec.depth, spec.block, a, b,
                                               offsets, out, spec.ldc, spec.accumulate, bias)
            else:
                convt_reference_pair_store_f64(&shape, storage, spec.depth, spec.block, a, b,
                                               offsets, out, spec.ldc, spec.accumulate, bias)
        elif acc_t is float:
            convt_reference_gemm_f32(&shape, spec.depth, spec.block, a, b, offsets,
                                     <float*>out, spec.ldc, spec.accumulate, pack_to)
        else:
            convt_reference_gemm_f64(&shape, spec.depth, spec.block, a, b, offsets,
                                     <double*>out, spec.ldc, spec.accumulate, pack_to)
        return
    kernels = kernels_named(spec.family)
    if acc_t is float:
        if spec.kernel == "gemm":
            entry = <void*>kernels.f32.gemm[rows - 1]
        elif spec.kernel == "gemm_pack":
            entry = <void*>kernels.f32.gemm_pack[rows - 1]
        elif spec.kernel == "gemm_stream":
            entry = <void*>kernels.f32.gemm_stream[rows - 1]
        elif spec.kernel == "half":
            entry = <void*>kernels.f32.half[rows - 1]
        elif spec.kernel == "pair":
            entry = <void*>kernels.f32.pair[half][rows // 2 - 1]
        else:
            entry = <void*>kernels.f32.pair_store[storage][half][rows // 2 - 1]
        _found(entry, spec)
        if spec.kernel == "pair":
            (<convt_pair_f32>entry)(spec.depth, spec.block, a, b, offsets, spec.sibling,
                                    <float*>out, spec.ldc, spec.accumulate)
        elif spec.kernel == "pair_store":
            (<convt_pair_store_f32>entry)(spec.depth, spec.block, a, b, offsets, spec.sibling,
                                          out, spec.ldc, spec.accumulate, bias)
        else:
            (<convt_gemm_f32>entry)(spec.depth, spec.block, a, b, offsets, <float*>out,
                                    spec.ldc, spec.accumulate, pack_to)
    else:
        if spec.kernel == "gemm":
            entry = <void*>kernels.f64.gemm[rows - 1]
        elif spec.kernel == "gemm_pack":
            entry = <void*>kernels.f64.gemm_pack[rows - 1]
        elif spec.kernel == "gemm_stream":
            entry = <void*>kernels.f64.gemm_stream[rows - 1]
        elif spec.kernel == "half":
            entry = <void*>kernels.f64.half[rows - 1]
        elif spec.kernel == "pair":
            entry = <void*>kernels.f64.pair[half][rows // 2 - 1]
        else:
            entry = <void*>kernels.f64.pair_store[storage][half][rows // 2 - 1]
        _found(entry, spec)
        if spec.kernel == "pair":
            (<convt_pair_f64>entry)(spec.depth, spec.block, a, b, offsets, spec.sibling,
                                    <double*>out, spec.ldc, spec.accumulate)
        elif spec.kernel == "pair_store":
            (<convt_pair_store_f64>entry)(spec.depth, spec.block, a, b, offsets, spec.sibling,
                                          out, spec.ldc, spec.accumulate, bias)
        else:
            (<convt_gemm_f64>entry)(spec.depth, spec.block, a, b, offsets, <double*>out,
                                    spec.ldc, spec.accumulate, pack_to)


def _run_gemm_family(spec):
    """Tests only: one call of a GEMM-family kernel (see gemm_typed)."""
    if spec.a.dtype == np.float32:
        gemm_typed(spec, <float*>pointer(spec.a))
    else:
        gemm_typed(spec, <double*>pointer(spec.a))


cdef gemm_t_typed(spec, acc_t* a):
    """gemm_t: spec.rows weight rows (one or two vectors) x spec.width positions, each
    reading B from its entry of spec.positions (intp)."""
    cdef const acc_t* b = <const acc_t*>pointer(spec.b)
    cdef const Py_ssize_t* offsets = <const Py_ssize_t*>pointer(spec.offsets)
    cdef const Py_ssize_t* positions = <const Py_ssize_t*>pointer(spec.positions)
    cdef acc_t* out = <acc_t*>pointer(spec.out)
    cdef convt_call_shape shape
    cdef Kernels kernels
    cdef void* entry
    cdef int vectors
    shape.rows = spec.rows
    shape.width = spec.width
    shape.sibling = 0
    if spec.family == "reference":
        if acc_t is float:
            convt_reference_gemm_t_f32(&shape, spec.depth, spec.block, a, b, offsets, positions,
                                       out, spec.ldc, spec.accumulate)
        else:
            convt_reference_gemm_t_f64(&shape, spec.depth, spec.block, a, b, offsets, positions,
                                       out, spec.ldc, spec.accumulate)
        return
    kernels = kernels_named(spec.family)
    if acc_t is float:
        vectors = spec.rows // (kernels.f32.nr // 2)
        entry = <void*>kernels.f32.gemm_t[vectors - 1][spec.width - 1]
        _found(entry, spec)
        (<convt_gemm_t_f32>entry)(spec.depth, spec.block, a, b, offsets, positions, out,
                                  spec.ldc, spec.accumulate)
    else:
        vectors = spec.rows // (kernels.f64.nr // 2)
        entry = <void*>kernels.f64.gemm_t[vectors - 1][spec.width - 1]
        _found(entry, spec)
        (<convt_gemm_t_f64>entry)(spec.depth, spec.block, a, b, offsets, positions, out,
                                  spec.ldc, spec.accumulate)


def _run_gemm_t(spec):
    """Tests only: one call of a transposed GEMM kernel (see gemm_t_typed)."""
    if spec.a.dtype == np.float32:
        gemm_t_typed(spec, <float*>pointer(spec.a))
    else:
        gemm_t_typed(spec, <double*>pointer(spec.a))


cdef pack_pair_typed(spec, acc_t* to):
    cdef const acc_t* b = <const acc_t*>pointer(spec.b)
    cdef const Py_ssize_t* offsets = <const Py_ssize_t*>pointer(spec.offsets)
    cdef Kernels kernels
    cdef void* entry
    if spec.family == "reference":
        if acc_t is float:
            convt_reference_pack_pair_f32(spec.width, spec.depth, b, offsets, spec.sibling, to)
        else:
            convt_reference_pack_pair_f64(spec.width, spec.depth, b, offsets, spec.sibling, to)
        return
    kernels = kernels_named(spec.family)
    if acc_t is float:
        entry = _found(<void*>kernels.f32.pack_pair, spec)
        (<convt_pack_pair_f32>entry)(spec.depth, b, offsets, spec.sibling, to)
    else:
        entry = _found(<void*>kernels.f64.pack_pair, spec)
        (<convt_pack_pair_f64>entry)(spec.depth, b, offsets, spec.sibling, to)


def _run_pack_pair(spec):
    """Tests only: one pack_pair call into spec.to (64-byte aligned); the reference
    (spec.family "reference") copies spec.width elements per operand and step."""
    if spec.to.ctypes.data % 64:
        raise ValueError("pack_pair writes whole aligned vectors: spec.to must be 64-byte aligned")
    if spec.to.dtype == np.float32:
        pack_pair_typed(spec, <float*>pointer(spec.to))
    else:
        pack_pair_typed(spec, <double*>pointer(spec.to))


cdef transpose_typed(spec, acc_t* dst):
    cdef const acc_t* src = <const acc_t*>pointer(spec.src)
    cdef const acc_t* bias = NULL
    cdef Kernels kernels
    cdef void* entry
    if spec.bias is not None:
        bias = <const acc_t*>pointer(spec.bias)
    if spec.family == "reference":
        if acc_t is float:
            convt_reference_transpose_f32(spec.rows, spec.cols, src, spec.src_stride, dst,
                                          spec.dst_stride, bias)
        else:
            convt_reference_transpose_f64(spec.rows, spec.cols, src, spec.src_stride, dst,
                                          spec.dst_stride, bias)
        return
    kernels = kernels_named(spec.family)
    if acc_t is float:
        entry = _found(<void*>kernels.f32.transpose, spec)
        (<convt_transpose_f32>entry)(spec.rows, spec.cols, src, spec.src_stride, dst,
                                     spec.dst_stride, bias)
    else:
        entry = _found(<void*>kernels.f64.transpose, spec)
        (<convt_transpose_f64>entry)(spec.rows, spec.cols, src, spec.src_stride, dst,
                                     spec.dst_stride, bias)


def _run_transpose(spec):
    """Tests only: one transpose call, spec.dst[c * dst_stride + r] = spec.src[r *
    src_stride + c] (+ spec.bias[r]) for r < spec.rows, c < spec.cols."""
    if spec.rows and spec.cols:
        needed = {"src": (spec.rows - 1) * spec.src_stride + spec.cols,
                  "dst": (spec.cols - 1) * spec.dst_stride + spec.rows}
        if spec.bias is not None:
            needed["bias"] = spec.rows
        for name, size in needed.items():
            if getattr(spec, name).size < size:
                raise ValueError(f"spec.{name} holds fewer than {size} elements")
    if spec.dst.dtype == np.float32:
        transpose_typed(spec, <float*>pointer(spec.dst))
    else:
        transpose_typed(spec, <double*>pointer(spec.dst))


cdef row_typed(spec, acc_t* w):
    cdef Py_ssize_t sources = len(spec.x)
    cdef const acc_t* rows[64]
    cdef Py_ssize_t s
    cdef void* entry
    for s in range(sources):
        rows[s] = <const acc_t*>pointer(spec.x[s])
    cdef acc_t* out = <acc_t*>pointer(spec.out)
    cdef const Py_ssize_t* offsets = <const Py_ssize_t*>pointer(spec.offsets)
    if spec.family == "reference":
        if acc_t is float:
            convt_reference_row_f32(sources, rows, w, spec.taps, offsets, spec.in_size,
                                    spec.count, out, spec.accumulate)
        else:
            convt_reference_row_f64(sources, rows, w, spec.taps, offsets, spec.in_size,
                                    spec.count, out, spec.accumulate)
        return
    kernels = kernels_named(spec.family)
    if acc_t is float:
        kernels.f32.row(sources, rows, w, spec.taps, offsets, spec.in_size, spec.count, out,
                        spec.accumulate)
    else:
        kernels.f64.row(sources, rows, w, spec.taps, offsets, spec.in_size, spec.count, out,
                        spec.accumulate)


def _run_row(spec):
    """Tests only: one call of a row kernel (sources spec.x: at most 64 rows)."""
    if len(spec.x) > 64:
        raise ValueError("at most 64 source rows")
    if spec.w.dtype == np.float32:
        row_typed(spec, <float*>pointer(spec.w))
    else:
        row_typed(spec, <double*>pointer(spec.w))


cdef stencil_typed(spec, acc_t* w):
    cdef const acc_t* rows[64]
    cdef convt_stencil_shape shape
    cdef Py_ssize_t q
    cdef acc_t* out = <acc_t*>pointer(spec.out)
    cdef Kernels kernels
    for q in range(len(spec.x)):
        rows[q] = <const acc_t*>pointer(spec.x[q])
    shape.rows = spec.rows
    shape.kernel_rows = spec.kernel_rows
    shape.taps = spec.taps
    shape.offsets = <const Py_ssize_t*>pointer(spec.offsets)
    shape.in_size = spec.in_size
    shape.count = spec.count
    shape.out_stride = spec.out_stride
    if spec.family == "reference":
        if acc_t is float:
            convt_reference_stencil_f32(&shape, rows, w, out, spec.accumulate)
        else:
            convt_reference_stencil_f64(&shape, rows, w, out, spec.accumulate)
        return
    kernels = kernels_named(spec.family)
    if acc_t is float:
        (<convt_stencil_f32>_found(<void*>kernels.f32.stencil, spec))(&shape, rows, w, out,
                                                                       spec.accumulate)
    else:
        (<convt_stencil_f64>_found(<void*>kernels.f64.stencil, spec))(&shape, rows, w, out,
                                                                       spec.accumulate)


def _run_stencil(spec):
    """Tests only: one call of a stencil kernel: spec.rows output rows spec.out_stride
    apart, input rows spec.x (rows + kernel_rows - 1 of them, each spec.in_size long),
    weights spec.w [kernel_rows][taps]."""
    if not 1 <= spec.rows <= 4:
        raise ValueError(f"rows must be 1 to 4, got {spec.rows}")
    if len(spec.x) != spec.rows + spec.kernel_rows - 1 or len(spec.x) > 64:
        raise ValueError("x must hold rows + kernel_rows - 1 rows, at most 64")
    if any(row.size < spec.in_size for row in spec.x) or spec.w.size < spec.kernel_rows * spec.taps:
        raise ValueError("x rows shorter than in_size or too few weights")
    if spec.count and spec.out.size < (spec.rows - 1) * spec.out_stride + spec.count:
        raise ValueError("out too short for rows, out_stride and count")
    if spec.w.dtype == np.float32:
        stencil_typed(spec, <float*>pointer(spec.w))
    else:
        stencil_typed(spec, <double*>pointer(spec.w))


cdef channels_typed(spec, acc_t* out):
    cdef const acc_t* x = <const acc_t*>pointer(spec.x)
    cdef const acc_t* w = <const acc_t*>pointer(spec.w)
    cdef Py_ssize_t count = spec.count, channels = spec.channels
    cdef Py_ssize_t x_step = spec.x_step, out_step = spec.out_step
    cdef Kernels kernels
    if spec.family == "reference":
        if acc_t is float:
            convt_reference_channels_f32(count, channels, x, x_step, w, out, out_step)
        else:
            convt_reference_channels_f64(count, channels, x, x_step, w, out, out_step)
        return
    kernels = kernels_named(spec.family)
    if acc_t is float:
        kernels.f32.channels(count, channels, x, x_step, w, out, out_step)
    else:
        kernels.f64.channels(count, channels, x, x_step, w, out, out_step)


def _run_channels(spec):
    """Tests only: one call of a channels kernel: spec.out[t * out_step + c] +=
    spec.w[c] * spec.x[t * x_step + c] for t < spec.count, c < spec.channels."""
    needed = {"x": (spec.count - 1) * spec.x_step + spec.channels,
              "out": (spec.count - 1) * spec.out_step + spec.channels, "w": spec.channels}
    for name, size in needed.items():
        if spec.count and getattr(spec, name).size < size:
            raise ValueError(f"spec.{name} holds fewer than {size} elements")
    if spec.out.dtype == np.float32:
        channels_typed(spec, <float*>pointer(spec.out))
    else:
        channels_typed(spec, <double*>pointer(spec.out))


cdef runs_typed(spec, acc_t* out):
    """spec.kernel: 'interleave', 'interleave_stream' (the reference: its interleave),
    'store_even', 'add_bias', 'load' or 'store'."""
    cdef const acc_t* src = <const acc_t*>pointer(spec.src)
    cdef const acc_t* odd = <const acc_t*>pointer(spec.odd)
    cdef const void* raw = pointer(spec.raw)
    cdef Py_ssize_t count = spec.count
    cdef acc_t bias = spec.bias
    cdef int storage = spec.storage
    cdef str kernel = spec.kernel
    cdef Kernels kernels
    if spec.family == "reference":
        if acc_t is float:
            if kernel in ("interleave", "interleave_stream"):
                convt_reference_interleave_f32(out, src, odd, count, bias)
            elif kernel == "store_even":
                convt_reference_store_even_f32(out, src, count, bias)
            elif kernel == "add_bias":
                convt_reference_add_bias_f32(out, src, count, bias)
            elif kernel == "load":
                convt_reference_load_f32(storage, out, raw, count)
            else:
                convt_reference_store_f32(storage, <void*>raw, src, count, bias)
        else:
            if kernel in ("interleave", "interleave_stream"):
                convt_reference_interleave_f64(out, src, odd, count, bias)
            elif kernel == "store_even":
                convt_reference_store_even_f64(out, src, count, bias)
            elif kernel == "add_bias":
                convt_reference_add_bias_f64(out, src, count, bias)
            elif kernel == "load":
                convt_reference_load_f64(storage, out, raw, count)
            else:
                convt_reference_store_f64(storage, <void*>raw, src, count, bias)
        return
    kernels = kernels_named(spec.family)
    if kernel == "interleave_stream" and (
            (acc_t is float and kernels.f32.interleave_stream == NULL)
            or (acc_t is double and kernels.f64.interleave_stream == NULL)):
        raise ValueError(f"kernel set {spec.family!r} has no interleave_stream")
    if acc_t is float:
        if kernel == "interleave":
            kernels.f32.interleave(out, src, odd, count, bias)
        elif kernel == "interleave_stream":
            kernels.f32.interleave_stream(out, src, odd, count, bias)
            convt_store_fence()
        elif kernel == "store_even":
            kernels.f32.store_even(out, src, count, bias)
        elif kernel == "add_bias":
            kernels.f32.add_bias(out, src, count, bias)
        elif kernel == "load":
            kernels.f32.load[storage](out, raw, count)
        else:
            kernels.f32.store[storage](<void*>raw, src, count, bias)
    else:
        if kernel == "interleave":
            kernels.f64.interleave(out, src, odd, count, bias)
        elif kernel == "interleave_stream":
            kernels.f64.interleave_stream(out, src, odd, count, bias)
            convt_store_fence()
        elif kernel == "store_even":
            kernels.f64.store_even(out, src, count, bias)
        elif kernel == "add_bias":
            kernels.f64.add_bias(out, src, count, bias)
        elif kernel == "load":
            kernels.f64.load[storage](out, raw, count)
        else:
            kernels.f64.store[storage](<void*>raw, src, count, bias)


def _run_runs(spec):
    """Tests only: one call of a run kernel in accumulation type spec.acc: it reads
    spec.src (and spec.odd), writes spec.out; load reads and store writes
    spec.raw, an array of storage type spec.storage."""
    if np.dtype(spec.acc) == np.float32:
        runs_typed(spec, <float*>pointer(spec.out))
    else:
        runs_typed(spec, <double*>pointer(spec.out))


def _run_winograd(spec):
    """Tests only: the Winograd transforms of family ``spec.family`` ("reference": the
    baseline build of convt/src/winograd.c).  ``spec.stage`` "input": V of ``spec.x``
    (C, [D,] H, W) into ``spec.out`` (points, C, capacity); "output": y of ``spec.m``
    (points, M, capacity) into ``spec.out`` (M, [OD,] OH, OW); ``spec.taps`` (3 when
    absent) picks F(2x2, 2x2) when 2.  The block and its
    output position come from spec (rows, tiles, front, top, left, capacity,
    out_front, out_top, out_left); returns the transform's result flag."""
    cdef Kernels kernels
    cdef convt_winograd_in_f32 transform_input = convt_winograd_input_f32
    cdef convt_winograd_out_f32 transform_output = convt_winograd_output_f32
    cdef convt_winograd_block block
    cdef convt_winograd_plane plane
    if spec.family != "reference":
        kernels = kernels_named(spec.family)
        if kernels.f32.winograd_input == NULL:
            raise LookupError(f"kernel set {spec.family!r} has no winograd entries")
        transform_input = kernels.f32.winograd_input
        transform_output = kernels.f32.winograd_output
    data = spec.x if spec.stage == "input" else spec.out
    block.dims = data.ndim - 1
    block.taps = getattr(spec, "taps", 3)
    block.rows, block.tiles, block.capacity = spec.rows, spec.tiles, spec.capacity
    block.front, block.top, block.left = spec.front, spec.top, spec.left
    block.out_front = spec.out_front
    plane_of(data[None], &plane)
    if spec.stage == "input":
        return transform_input(&block, &plane, <const float*>pointer(spec.x),
                               spec.x.strides[0] // 4, spec.x.shape[0],
                               <float*>pointer(spec.out))
    return transform_output(&block, spec.out_top, spec.out_left, &plane,
                            <const float*>pointer(spec.m), spec.m.shape[1],
                            <const float*>pointer(spec.bias), <float*>pointer(spec.out),
                            spec.out.strides[0] // 4)
