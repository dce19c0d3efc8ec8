# Weight packing for the GEMM engine.
#
# Per stack and group, row r = (phase, output channel) of the GEMM is laid out
# by row block (see convt/_plan.py: block_starts): [block][(c, j)][r in block],
# holding w[g * cg + c, m, k(phase, j)] in the accumulation type.  Blocks are
# what a micro-kernel call reads, contiguously, for every step of depth.


cdef struct Packing:
    Problem problem
    const char* w
    const Py_ssize_t* w_strides
    const GemmStack* stacks
    const Py_ssize_t* kernel_index     # stack after stack: (phase, tap) -> ndim kernel coordinates
    const Py_ssize_t* block_starts
    Py_ssize_t* tables                 # per stack: [tap][row] offsets in w[c]


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
            offset = m * p.w_strides[1]
            for a in range(ndim):
                offset = offset + kernel[a] * p.w_strides[2 + a]
            table[j * stack.rows + row] = offset


cdef Py_ssize_t pack_input_channel(const Packing* p, const GemmStack* stack, Py_ssize_t group,
                                   Py_ssize_t c, acc_t* packed) noexcept nogil:
    """Pack every row's weights of input channel c of ``group``: w[group * cg + c] is
    one contiguous region, gathered into runs of a block's rows.

    Non-finite weights are packed as 0 and counted: the GEMM engine multiplies
    zero padding by every weight, and 0 x NaN or 0 x Inf would spoil outputs
    the weight does not reach (convt._engine adds their exact contributions).
    Return how many there were."""
    cdef Py_ssize_t cg = p.problem.cg
    cdef Py_ssize_t depth = cg * stack.taps
    cdef int storage = p.problem.storage
    cdef const char* source = element(p.w, (group * cg + c) * p.w_strides[0], storage)
    cdef const Py_ssize_t* table = p.tables + stack.table_start
    cdef const Py_ssize_t* starts = p.block_starts + stack.block_start
    cdef Py_ssize_t block, first, width, j, i
    cdef Py_ssize_t non_finite = 0
    cdef acc_t* destination
    cdef acc_t value
    for block in range(stack.blocks):
        first = starts[block]
        width = starts[block + 1] - first
        destination = packed + stack.weight_start + group * stack.group_size \
            + first * depth + c * stack.taps * width
        for j in range(stack.taps):
            for i in range(width):
                value = <acc_t>convt_load_double(source, table[j * stack.rows + first + i],
                                                 storage)
                if value - value != 0:  # NaN or +-Inf
                    non_finite = non_finite + 1
                    value = 0
                destination[j * width + i] = value
    return non_finite


cdef Py_ssize_t pack_all(const Packing* p, Py_ssize_t stack_count, acc_t* packed,
                         int num_threads) noexcept nogil:
    """Tap tables of every stack, then one task per stack, group and input channel:
    it reads that channel's weights, one contiguous region, and writes runs of
    whole row blocks.  Return the number of non-finite weights packed as 0
    (each counted once per stack it appears in)."""
    cdef Py_ssize_t s, task, local
    cdef Py_ssize_t per_stack = p.problem.groups * p.problem.cg
    cdef Py_ssize_t non_finite = 0
    for s in range(stack_count):
        tap_table(p, p.stacks + s)
    if num_threads == 1:
        for task in range(stack_count * per_stack):
            non_finite += pack_input_channel(p, p.stacks + task // per_stack,
                                             (task % per_stack) // p.problem.cg,
                                             task % p.problem.cg, packed)
        return non_finite
    for task in prange(stack_count * per_stack, num_threads=num_threads, schedule="static"):
        s = task // per_stack
        local = task % per_stack
        non_finite += pack_input_channel(p, p.stacks + s, local // p.problem.cg,
                                         local % p.problem.cg, packed)
    return non_finite


def pack_weights(arrays, problem, plan, packed, int num_threads):
    """Pack the weights ``arrays.w`` of every stack of a GEMM plan into ``packed``
    (plan.packed_size elements of the accumulation type); return how many
    non-finite weights were packed as 0 (see pack_input_channel)."""
    cdef Packing p
    cdef cnp.ndarray tables = np.empty(plan.table_size, dtype=np.intp)
    p.problem = (<const Problem*>data_of(problem))[0]
    p.w = <const char*>data_of(arrays.w)
    p.w_strides = <const Py_ssize_t*>data_of(arrays.w_strides)
    p.stacks = <const GemmStack*>data_of(plan.stacks)
    p.kernel_index = <const Py_ssize_t*>data_of(plan.kernel_index)
    p.block_starts = <const Py_ssize_t*>data_of(plan.block_starts)
    p.tables = <Py_ssize_t*>data_of(tables)
    cdef Py_ssize_t stack_count = plan.stacks.shape[0]
    cdef void* destination = <void*>data_of(packed)
    cdef Py_ssize_t non_finite
    if packed.dtype.itemsize == 4:
        with nogil:
            non_finite = pack_all(&p, stack_count, <float*>destination, num_threads)
    else:
        with nogil:
            non_finite = pack_all(&p, stack_count, <double*>destination, num_threads)
    return non_finite
