# Storage layer: the only place that knows element types.
#
# User arrays hold float16, bfloat16, float32 or float64 ("storage"); the
# drivers compute in the accumulation type acc_t (double for float64, float
# otherwise).  Runs are converted here: exactly on the way in, rounded once on
# the way out, through the kernel set's vectorised conversions where the run
# is contiguous.


cdef inline const char* element(const char* base, Py_ssize_t index, int storage) noexcept nogil:
    return base + index * convt_itemsize(storage)


cdef inline bint is_accumulation(int storage, const acc_t* like) noexcept nogil:
    """Whether elements of ``storage`` are acc_t values (no conversion)."""
    if acc_t is float:
        return storage == CONVT_F32
    else:
        return storage == CONVT_F64


cdef inline void transpose(const Storage* s, Py_ssize_t rows, Py_ssize_t cols,
                           const acc_t* src, Py_ssize_t src_stride, acc_t* dst,
                           Py_ssize_t dst_stride, const acc_t* bias) noexcept nogil:
    """dst[c * dst_stride + r] = src[r * src_stride + c] (+ bias[r] unless NULL)."""
    if acc_t is float:
        s.kernels.f32.transpose(rows, cols, src, src_stride, dst, dst_stride, bias)
    else:
        s.kernels.f64.transpose(rows, cols, src, src_stride, dst, dst_stride, bias)


cdef inline void interleave_run(const Storage* s, bint stream, acc_t* y, const acc_t* even,
                                const acc_t* odd, Py_ssize_t pairs, acc_t bias) noexcept nogil:
    """y[2 i] = even[i] + bias, y[2 i + 1] = odd[i] + bias for i < pairs, y of the
    accumulation type; ``stream``: past the caches (the set's interleave_stream, which
    the caller fences with convt_store_fence before another thread reads y)."""
    if acc_t is float:
        (s.kernels.f32.interleave_stream if stream else s.kernels.f32.interleave)(
            y, even, odd, pairs, bias)
    else:
        (s.kernels.f64.interleave_stream if stream else s.kernels.f64.interleave)(
            y, even, odd, pairs, bias)


cdef inline void load_run(const Storage* s, acc_t* dst, const char* src, Py_ssize_t step,
                          Py_ssize_t count) noexcept nogil:
    """dst[i] = src[i * step] widened to the accumulation type (exact)."""
    cdef Py_ssize_t i
    if step == 1 and is_accumulation(s.type, dst):
        memcpy(dst, src, count * sizeof(acc_t))
    elif step == 1:
        if acc_t is float:
            s.kernels.f32.load[s.type](dst, src, count)
        else:
            s.kernels.f64.load[s.type](dst, src, count)
    elif step == 2 and is_accumulation(s.type, dst):
        # Conv's stride 2 (one residue of a decimated row): a constant stride the
        # compiler vectorises with shuffles
        for i in range(count):
            dst[i] = (<const acc_t*>src)[2 * i]
    elif is_accumulation(s.type, dst):
        for i in range(count):
            dst[i] = (<const acc_t*>src)[i * step]
    else:
        for i in range(count):
            dst[i] = <acc_t>convt_load_double(src, i * step, s.type)


cdef inline void store_run(const Storage* s, char* dst, Py_ssize_t step, const acc_t* src,
                           Py_ssize_t count, acc_t bias) noexcept nogil:
    """dst[i * step] = src[i] + bias, rounded once to the storage type."""
    cdef Py_ssize_t i, done, chunk
    cdef char converted[64 * 8]
    cdef Py_ssize_t itemsize
    if step == 1:
        if acc_t is float:
            s.kernels.f32.store[s.type](dst, src, count, bias)
        else:
            s.kernels.f64.store[s.type](dst, src, count, bias)
    elif step == 2 and s.masked_stores and is_accumulation(s.type, src):
        if acc_t is float:
            s.kernels.f32.store_even(<float*>dst, src, count, bias)
        else:
            s.kernels.f64.store_even(<double*>dst, src, count, bias)
    elif is_accumulation(s.type, src):
        for i in range(count):
            (<acc_t*>dst)[i * step] = src[i] + bias
    else:
        # convert a vector-sized chunk, then place its elements with the stride
        itemsize = convt_itemsize(s.type)
        done = 0
        while done < count:
            chunk = min(64, count - done)
            if acc_t is float:
                s.kernels.f32.store[s.type](converted, src + done, chunk, bias)
            else:
                s.kernels.f64.store[s.type](converted, src + done, chunk, bias)
            for i in range(chunk):
                memcpy(dst + (done + i) * step * itemsize, converted + i * itemsize, itemsize)
            done = done + chunk


cdef inline acc_t bias_of(const Storage* s, const char* bias, Py_ssize_t channel,
                          const acc_t* like) noexcept nogil:
    """The bias of an output channel in the accumulation type, or 0 without bias."""
    if bias == NULL:
        return 0
    return <acc_t>convt_load_double(bias, channel, s.type)
