# Repeated calls: the calls after the first of a call the front-ends remember
# (convt._frontend: same parameters, operand shapes, strides and dtypes), with its
# operands in the engines' own layouts, served by the GEMM engine alone
# (RepeatedGemm) or by the depthwise planes (RepeatedPlanes).  Such a call only
# allocates its output, finds its packed weights and runs the engine; in Python that
# took about 7 of a tiny layer's 10 us in a loop, and after an idle pause each of
# its twenty Python functions cost far more (its code and objects out of the
# caches).  The shortcuts do the same steps here, the weight cache's most recent
# entry checked with one memcmp, and hand every other case to the Python path
# (``slow``, the remembered call), which they follow exactly: results are those of
# the Python path, bit for bit.  The call key every call makes (call_key) is made
# here too.


cdef bint usable_output(out, tuple shape, cnp.dtype dtype, x, w, b) except -1:
    """Whether ``out`` is None or an array the remembered call would take as it is
    (convt._arrays.prepare_output: an ndarray of the output's shape and dtype,
    C-contiguous, writeable, aligned, sharing no memory with an operand); where it
    is not, the remembered call raises its error."""
    if out is None:
        return True
    if type(out) is not np.ndarray:
        return False
    cdef cnp.ndarray array = <cnp.ndarray>out
    if (not cnp.PyArray_IS_C_CONTIGUOUS(array) or not cnp.PyArray_ISWRITEABLE(array)
            or not cnp.PyArray_ISALIGNED(array) or array.dtype != dtype
            or (<object>array).shape != shape):
        return False
    return not (np.may_share_memory(out, x) or np.may_share_memory(out, w)
                or (b is not None and np.may_share_memory(out, b)))


cdef inline object new_output(hooks, tuple shape, cnp.dtype dtype, bint pooled):
    """A fresh output, as convt._arrays.prepare_output makes it: from convt._outputs's
    kept blocks where it is that large (``pooled``), else np.empty."""
    return hooks.pooled_empty(shape, dtype) if pooled else np.empty(shape, dtype)


cdef class RepeatedGemm:
    """A remembered GEMM call's shortcut: ``self(x, w, b, out)`` as the remembered
    call ``slow`` computes it (see above), into ``out`` when it is given and usable
    as it is.  Made by convt._engine.repeated."""

    cdef readonly object slow   # the remembered call: every case not served here
    cdef GemmEngine engine
    cdef object run             # convt._engine.Execution (the weight cache names it)
    cdef readonly object call   # convt._engine.Call
    cdef object hooks           # convt._engine.RepeatHooks: the Python parts it calls
    cdef object cache_key       # the weight cache's key of this call's weights
    cdef object entry           # the weight cache's entry holding them, or None
    cdef object budget          # the cache's budget variable when the entry was taken
    cdef object fixed_weights   # weak references: the fixed weights served last (a
    cdef object fixed_packing   # bound layer's, read-only for good) and their packing
    cdef tuple shape            # the output
    cdef cnp.dtype dtype, accumulation
    cdef object num_threads     # the layer's (None: the default)
    cdef Py_ssize_t scratch_width, per_thread
    cdef bint streamed, needs_fill, pooled_output

    def __cinit__(self, slow, run, call, hooks, cache_key, tuple shape, dtype, num_threads):
        self.slow, self.run, self.call, self.hooks = slow, run, call, hooks
        self.engine = run.engine
        self.cache_key, self.entry, self.budget = cache_key, None, None
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.accumulation = run.decision.accumulation
        self.num_threads = num_threads
        self.scratch_width = len(run.axes) + THREAD_STATE
        self.per_thread = run.plan.workspace_per_thread
        self.streamed = call.streamed
        self.needs_fill = run.plan.needs_fill
        self.pooled_output = hooks.pooled(shape, self.dtype)
        self._take_entry()  # the first call (the Python path's) has just run

    def __call__(self, x, w, b, out):
        cdef object packed = None
        cdef int threads = 1
        cdef bint streamed = self.streamed
        # (the remembered call's key holds w's type: an ndarray, not a subclass)
        if usable_output(out, self.shape, self.dtype, x, w, b):
            # (through the module: what every call resolves, and benchmarks count)
            threads = self.hooks.dispatch.resolve_threads(
                self.num_threads, self.call.work_items, self.run.multiply_adds)
            if not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>w):  # a bound layer's, if fixed
                # packed once for all calls: nothing to stream (as convt._engine.execute)
                packed = self._fixed_packing(w)
                streamed = False
            elif streamed:
                packed = self.hooks.nothing_packed[self.accumulation.itemsize == 8]
            else:
                packed = self._remembered_packing(w, threads)
        if packed is None:
            y = self.slow(x, w, b, out)
            self._take_entry()
            return y
        if out is None:
            out = new_output(self.hooks, self.shape, self.dtype, self.pooled_output)
        return self._run(x, w, b, packed, threads, out, streamed)

    cdef object _remembered_packing(self, w, int threads):
        """The packed weights of the cache's most recent entry when it is this call's
        and holds w's bytes (then nothing about the cache changes but the entry's time
        of use, as in its lookup), else None."""
        cdef list entry = self.entry
        if (entry is None or entry is not self.hooks.weight_cache._latest
                or not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>w)):
            return None
        if self.hooks.budget_variable() != self.budget:
            return None
        copy, packed = entry[1], entry[2]  # (None once evicted, by another thread too)
        if copy is None or packed is None:
            return None
        if not same_bytes(copy, w, threads):
            return None
        entry[3] = self.hooks.monotonic()
        return packed

    cdef object _fixed_packing(self, w):
        """The packing kept with fixed weights ``w``, or None (not fixed, or not packed
        yet): the one served last while both live (fixed weights never change, so
        their packing stays right), else the one FixedWeights keeps."""
        if self.fixed_weights is not None and self.fixed_weights() is w:
            packed = self.fixed_packing()
            if packed is not None:
                return packed
        packed = self.hooks.fixed_packing(w, self.run, self.cache_key)
        if packed is not None:
            self.fixed_weights, self.fixed_packing = weakref.ref(w), weakref.ref(packed)
        return packed

    cdef void _take_entry(self):
        """After a call of the Python path: the cache's most recent entry, if it holds
        this call's weights (the path found or stored them)."""
        cache = self.hooks.weight_cache
        entry = cache._latest
        self.budget = self.hooks.budget_variable()
        self.entry = entry if (entry is not None and entry[4] == self.cache_key
                               and cache.budget_bytes() > 0) else None

    cdef object _run(self, x, w, b, packed, int threads, y, bint streamed):
        """Fill ``y`` by the engine, as convt._engine.execute and _run_gemm do
        (``streamed``: the engine reads w itself, ``packed`` holds nothing)."""
        cdef cnp.npy_intp dims[2]
        b_acc = None if b is None else np.ascontiguousarray(b, dtype=self.accumulation)
        c = self.call
        arrays = self.hooks.operands(x, w, y, b, b_acc, c.x_strides, c.w_strides, c.y_strides,
                                     c.x_extent, c.x_channel_offsets)
        if self.needs_fill:
            self.hooks.fill_with_bias(y, b)
        dims[0], dims[1] = threads, self.scratch_width
        scratch = cnp.PyArray_EMPTY(2, dims, cnp.NPY_INTP, 0)
        memset(cnp.PyArray_DATA(scratch), 0xff, threads * self.scratch_width * sizeof(Py_ssize_t))
        workspaces = self.hooks.workspace
        if threads * self.per_thread * self.accumulation.itemsize < workspaces.MIN_BYTES:
            # what lend gives below that size, without its Python call
            dims[1] = self.per_thread
            workspace = cnp.PyArray_EMPTY(2, dims, self.accumulation.type_num, 0)
            self.engine.run(arrays, packed, workspace, scratch, threads, streamed)
            return y
        workspace, loan = workspaces.lend((threads, self.per_thread), self.accumulation)
        try:
            self.engine.run(arrays, packed, workspace, scratch, threads, streamed)
        finally:
            workspaces.give_back(loan)
        return y


cdef class RepeatedPlanes:
    """A remembered depthwise-planes call's shortcut (convt._planes): ``self(x, w, b,
    out)`` as the remembered call ``slow`` computes it, the steps of
    convt._engine.execute made here and those of convt._planes.run by the same
    plane_call.  Made by convt._engine.repeated for weights whose kernels are
    contiguous."""

    cdef readonly object slow   # the remembered call: every case not served here
    cdef readonly object call   # convt._engine.Call
    cdef object plane           # convt._planes.PlaneRun
    cdef object hooks           # convt._engine.RepeatHooks
    cdef tuple shape            # the output
    cdef cnp.dtype dtype
    cdef object num_threads     # the layer's (None: the default)
    cdef bint pooled_output

    def __cinit__(self, slow, call, hooks, tuple shape, dtype, num_threads):
        self.slow, self.call, self.plane, self.hooks = slow, call, call.plane, hooks
        self.shape, self.dtype, self.num_threads = shape, np.dtype(dtype), num_threads
        self.pooled_output = hooks.pooled(shape, self.dtype)

    def __call__(self, x, w, b, out):
        cdef int threads
        if not usable_output(out, self.shape, self.dtype, x, w, b):
            return self.slow(x, w, b, out)
        plane = self.plane
        threads = self.hooks.dispatch.resolve_threads(self.num_threads, plane.work_items,
                                                     plane.multiply_adds)
        y = new_output(self.hooks, self.shape, self.dtype, self.pooled_output) if out is None \
            else out
        plane_call(plane, x, w, b, y, threads, self.hooks.workspace)
        return y


# The key of a call (convt._frontend.call_key), made here: every call makes one,
# and in Python its five functions and three flags objects cost 1.5 us in a loop
# and 6 us after an idle pause.  KeyParts holds what it reads besides the operands.
cdef object _key_parts = None


def set_key_parts(parts):
    """Give call_key the front-end's parts (convt._frontend.KeyParts)."""
    global _key_parts
    _key_parts = parts


cdef inline object _operand_key(object a):
    return a.shape, a.strides, a.dtype, cnp.PyArray_ISALIGNED(<cnp.ndarray>a)


def call_key(layer, x, w, b, out):
    """The key of a call of ``layer`` on these operands, or None if it cannot be
    remembered: convt._frontend.call_key (its documentation holds the rule)."""
    parts = _key_parts
    parameters = getattr(layer, "__dict__").get(parts.parameter_slot)
    if parameters is None:
        parameters = parts.parameter_key(layer)
        if parameters is None:
            return None
    if (type(x) is not np.ndarray or type(w) is not np.ndarray
            or (b is not None and type(b) is not np.ndarray)):
        return None  # array-likes and subclasses take the full path
    dispatch = parts.dispatch
    tuning = dispatch._tuning_key_now
    if tuning is None:
        tuning = dispatch.tuning_key()
    return (parameters, _operand_key(x), _operand_key(w),
            None if b is None else _operand_key(b), out is None,
            _environment_value(parts), tuning)


cdef object _environment_value(parts):
    """The kernel-set variable as os.environ holds it (bytes where CPython keeps
    them: equal exactly when the decoded values are), else as os.environ.get reads it."""
    environ = os.environ
    if type(environ) is parts.environ_type:
        data = getattr(environ, "_data", None)
        if type(data) is dict:
            return (<dict>data).get(parts.kernel_set_key)
    return environ.get(parts.kernel_set_variable)
