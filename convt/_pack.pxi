# Weight packing for the GEMM engine.
#
# Per stack and group, row r = (phase, output channel) of the GEMM is laid out
# by row block (see convt/_plan.py: block_starts): [block][(c, j)][r in block],
# holding w[g * cg + c, m, k(phase, j)] in the accumulation type.  Blocks are
# what a micro-kernel call reads, contiguously, for every step of depth.


# Weights of the input channels one packing task reads (kept in L2 while it
# writes every row block).
cdef enum:
    PACK_CHUNK_BYTES = 128 * 1024
    PACK_MIN_TASKS = 64


cdef struct Packing:
    Problem problem
    const char* w
    const Py_ssize_t* w_strides
    const GemmStack* stacks
    const Py_ssize_t* kernel_index     # stack after stack: (phase, tap) -> ndim kernel coordinates
    const Py_ssize_t* block_starts
    Py_ssize_t* tables                 # per stack: [tap][row] offsets in w[c]
    void* packed                       # the packed weights (accumulation type)
    Signals* signals                   # Ctrl-C between tasks (large weights pack for long)
    Py_ssize_t chunk                   # input channels per task


cdef void tap_table(const Packing* p, const GemmStack* stack) noexcept nogil:
    """tables[stack][j * rows + row] = offset in w[c] of the weight of row ``row``, tap j."""
    cdef int ndim = p.problem.ndim
    cdef const Py_ssize_t* kernels = p.kernel_index + stack.kernel_start * ndim
    cdef Py_ssize_t* table = p.tables + stack.table_start
    cdef Py_ssize_t row, rho, m, j, offset
    cdef const Py_ssize_t* kernel
    cdef int a
    for row in range(stack.rows):
        rho = row_phase(row, p.problem.mg, stack.siblings, &m)
        for j in range(stack.taps):
            kernel = kernels + (rho * stack.taps + j) * ndim
            offset = m * p.w_strides[2]
            for a in range(ndim):
                offset = offset + kernel[a] * p.w_strides[3 + a]
            table[j * stack.rows + row] = offset


cdef void gather_weights(acc_t* dst, const char* source, const Py_ssize_t* offsets,
                         Py_ssize_t count, int storage) noexcept nogil:
    """dst[i] = source[offsets[i]] in the accumulation type (one loop per storage type)."""
    cdef Py_ssize_t i
    if storage == CONVT_F32:
        for i in range(count):
            dst[i] = <acc_t>(<const float*>source)[offsets[i]]
    elif storage == CONVT_F64:
        for i in range(count):
            dst[i] = <acc_t>(<const double*>source)[offsets[i]]
    else:
        for i in range(count):
            dst[i] = <acc_t>convt_load_double(source, offsets[i], storage)


cdef Py_ssize_t zero_non_finite(acc_t* packed, Py_ssize_t count) noexcept nogil:
    """Replace NaN and +-Inf by 0 in ``packed``; return how many there were.

    The GEMM engine multiplies zero padding by every weight, and 0 x NaN or
    0 x Inf would spoil outputs the weight does not reach (convt._engine adds
    the exact contributions of these weights).  One contiguous, vectorised
    pass: a few microseconds per 100k weights.
    """
    cdef Py_ssize_t i
    cdef Py_ssize_t non_finite = 0
    for i in range(count):
        non_finite += packed[i] - packed[i] != 0
    if non_finite:
        for i in range(count):
            if packed[i] - packed[i] != 0:
                packed[i] = 0
    return non_finite


cdef void pack_channels(const Packing* p, const GemmStack* stack, Py_ssize_t group,
                        Py_ssize_t c_begin, acc_t* packed) noexcept nogil:
    """Pack input channels [c_begin, c_begin + p.chunk) of ``group`` into every row
    block: their weights w[group * cg + c] stay in cache while each block gets one
    contiguous run of chunk x taps x block rows.  (One channel per task wrote runs
    of a few rows, so each cache line of the packed weights was written piecemeal
    by several tasks; one block per task re-read each weight line once per phase.)"""
    cdef Py_ssize_t cg = p.problem.cg
    cdef Py_ssize_t depth = cg * stack.taps
    cdef Py_ssize_t c_end = min(cg, c_begin + p.chunk)
    cdef int storage = p.problem.storage
    cdef const Py_ssize_t* table = p.tables + stack.table_start
    cdef const Py_ssize_t* starts = p.block_starts + stack.block_start
    cdef Py_ssize_t block, first, width, c, j
    cdef acc_t* destination
    cdef const char* source
    for block in range(stack.blocks):
        first = starts[block]
        width = starts[block + 1] - first
        destination = packed + stack.weight_start + group * stack.group_size + first * depth
        for c in range(c_begin, c_end):
            source = element(p.w, group * p.w_strides[0] + c * p.w_strides[1], storage)
            for j in range(stack.taps):
                gather_weights(destination + (c * stack.taps + j) * width, source,
                               table + j * stack.rows + first, width, storage)


cdef inline void pack_task(const Packing* p, Py_ssize_t task, acc_t* packed) noexcept nogil:
    """Task ``task`` = (stack, group, chunk of input channels) of the packing."""
    cdef Py_ssize_t chunks = (p.problem.cg + p.chunk - 1) // p.chunk
    cdef Py_ssize_t per_stack = p.problem.groups * chunks
    cdef Py_ssize_t local = task % per_stack
    pack_channels(p, p.stacks + task // per_stack, local // chunks,
                  (local % chunks) * p.chunk, packed)


cdef void pack_task_f32(void* packing, Py_ssize_t task, int slot) noexcept nogil:
    cdef const Packing* p = <const Packing*>packing
    if not stopped(p.signals, slot):
        pack_task(p, task, <float*>p.packed)


cdef void pack_task_f64(void* packing, Py_ssize_t task, int slot) noexcept nogil:
    cdef const Packing* p = <const Packing*>packing
    if not stopped(p.signals, slot):
        pack_task(p, task, <double*>p.packed)


def pack_weights(arrays, problem, plan, packed, int num_threads, bint finite=True):
    """Pack the weights ``arrays.w`` of every stack of a GEMM plan into ``packed``
    (plan.packed_size elements of the accumulation type), one task per stack,
    group and chunk of input channels (their weights, PACK_CHUNK_BYTES at most,
    are read once and written as one run per row block).  With ``finite`` (ConvTranspose),
    return how many non-finite weights were packed as 0 (see zero_non_finite);
    Conv keeps them: its zero padding is part of its definition."""
    cdef Packing p
    cdef cnp.ndarray tables = np.empty(plan.table_size, dtype=np.intp)
    cdef Py_ssize_t stack_count = plan.stacks.shape[0]
    cdef Py_ssize_t size = plan.packed_size
    cdef Py_ssize_t tasks, s, non_finite, footprint, blocks, chunks
    cdef bint doubles = packed.dtype.itemsize == 8
    cdef convt_task task = pack_task_f64 if doubles else pack_task_f32
    cdef Signals signals = signals_for_this_call()
    p.signals = &signals
    p.problem = (<const Problem*>data_of(problem))[0]
    p.w = <const char*>data_of(arrays.w)
    p.w_strides = <const Py_ssize_t*>data_of(arrays.w_strides)
    p.stacks = <const GemmStack*>data_of(plan.stacks)
    p.kernel_index = <const Py_ssize_t*>data_of(plan.kernel_index)
    p.block_starts = <const Py_ssize_t*>data_of(plan.block_starts)
    p.tables = <Py_ssize_t*>data_of(tables)
    p.packed = <void*>data_of(packed)
    footprint = p.problem.mg * math.prod(arrays.w.shape[2:])   # weights per input channel
    p.chunk = max(1, min(p.problem.cg, PACK_CHUNK_BYTES // max(
        1, footprint * convt_itemsize(p.problem.storage))))
    # at least PACK_MIN_TASKS tasks where there are channels for them: tasks of whole
    # stacks and groups left the threads unevenly loaded (grouped layers 11% slower)
    blocks = stack_count * p.problem.groups     # 0 when every tap reads only padding
    if blocks:
        chunks = (PACK_MIN_TASKS + blocks - 1) // blocks
        p.chunk = max(1, min(p.chunk, (p.problem.cg + chunks - 1) // chunks))
    tasks = blocks * ((p.problem.cg + p.chunk - 1) // p.chunk)
    with nogil:
        for s in range(stack_count):
            tap_table(&p, p.stacks + s)
        convt_run(task, &p, tasks, num_threads)
    raise_if_stopped(&signals)
    with nogil:
        if not finite:
            non_finite = 0
        elif doubles:
            non_finite = zero_non_finite(<double*>p.packed, size)
        else:
            non_finite = zero_non_finite(<float*>p.packed, size)
    return non_finite


# Weights of more than COMPARE_SHARED_BYTES are compared by every thread of the
# call, piece by piece, rather than by the caller alone while the others wait (a
# 512 -> 256 k16 layer's 8 MiB at 2 threads: 0.56 -> 0.3 ms).  Pieces of a
# quarter MiB share 1-2 MiB of weights (ResNet's 3x3 layers) evenly; pieces of
# 1 MiB gave one thread all of 1.2 MiB but 0.2 MiB.
cdef enum:
    COMPARE_SHARED_BYTES = 1 << 20
    COMPARE_PIECE_BYTES = 1 << 18
    COMPARE_FIRST_BYTES = 256  # compared first, by the caller, before the pool is woken


cdef struct Comparison:
    const char* left
    const char* right
    size_t size
    int differ


cdef void compare_piece(void* context, Py_ssize_t item, int slot) noexcept nogil:
    cdef Comparison* c = <Comparison*>context
    cdef size_t start = <size_t>item * COMPARE_PIECE_BYTES
    cdef size_t count = min(<size_t>COMPARE_PIECE_BYTES, c.size - start)
    if c.differ:
        return  # another piece differs already
    if memcmp(c.left + start, c.right + start, count):
        c.differ = 1


def same_bytes(cnp.ndarray a, cnp.ndarray b, int num_threads=1):
    """Whether two C-contiguous arrays hold the same bytes (the packed-weights cache
    checks that a call's weights are those it packed before: bitwise, so NaN
    payloads and signed zeros count); large arrays are compared by up to
    ``num_threads`` threads."""
    cdef Comparison c
    cdef Py_ssize_t pieces
    if a.nbytes != b.nbytes or not (a.flags.c_contiguous and b.flags.c_contiguous):
        raise ValueError("same_bytes takes two C-contiguous arrays of one size")
    c.left = <const char*>cnp.PyArray_DATA(a)
    c.right = <const char*>cnp.PyArray_DATA(b)
    c.size = a.nbytes
    c.differ = 0
    pieces = (c.size + COMPARE_PIECE_BYTES - 1) // COMPARE_PIECE_BYTES
    with nogil:
        if c.size > COMPARE_FIRST_BYTES and memcmp(c.left, c.right, COMPARE_FIRST_BYTES):
            c.differ = 1  # other weights (the cache tries each kept set) differ at once
        elif c.size > COMPARE_SHARED_BYTES and num_threads > 1:
            convt_run(compare_piece, &c, pieces, num_threads)
        elif c.size:
            c.differ = memcmp(c.left, c.right, c.size) != 0
    return c.differ == 0
