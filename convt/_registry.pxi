# Registry: the compiled kernel families, the CPU's features, the thread pool.

CPU_FEATURES = {
    "avx2": 1 << 0, "fma": 1 << 1, "f16c": 1 << 2, "avx512f": 1 << 3, "avx512vl": 1 << 4,
    "avx512bw": 1 << 5, "avx512bf16": 1 << 6, "neon": 1 << 8, "neon_fp16": 1 << 9,
    "neon_bf16": 1 << 10,
}


def pool_workers():
    """Worker threads convt's pool has started in this process (it starts them on
    first use; a forked child starts its own)."""
    return convt_pool_workers()


def pool_contended(int threads):
    """Whether a call on ``threads`` threads would share cores with other busy
    threads: a recent threaded call waited long for a descheduled worker (it stays
    so for a second or more), or, on Linux, the threads runnable on the machine
    leave fewer free CPUs."""
    return bool(convt_pool_contended(threads))


def _feature_names(unsigned bits):
    return [name for name, bit in CPU_FEATURES.items() if bits & bit]


def cpu_features():
    """Names of the CPU features the kernels may use on this machine (detected once)."""
    return _feature_names(convt_cpu_features())


def l1_data_bytes():
    """Bytes of one core's level-1 data cache (0 when neither the CPU nor the OS says)."""
    return convt_l1_data_bytes()


def l2_bytes():
    """Bytes of one core's level-2 cache (0 when neither the CPU nor the OS says)."""
    return convt_l2_bytes()


def avx512_fma_speedup():
    """How much faster this core runs 512-bit FMAs than 256-bit ones, per FLOP,
    measured now (about 0.1 ms): about 2 where they are native, about 1 where the
    core splits them in two; 0 without AVX-512."""
    if not convt_cpu_features() & CPU_FEATURES["avx512f"]:
        return 0.0
    return convt_avx512_fma_speedup()


def _decode_x86(max_leaf, leaf1_ecx, leaf7_ebx, leaf7_1_eax, xcr0, os_avx512):
    """Tests only: the features convt's x86 rules grant for these CPUID words."""
    cdef convt_x86_words words
    words.max_leaf = max_leaf
    words.leaf1_ecx = leaf1_ecx
    words.leaf7_ebx = leaf7_ebx
    words.leaf7_1_eax = leaf7_1_eax
    words.xcr0 = xcr0
    words.os_avx512 = os_avx512
    return _feature_names(convt_decode_x86(&words))


def families():
    """Every compiled kernel family, best last: name, availability, required CPU
    features and, per accumulation type, (mr, nr, flags)."""
    cdef const convt_family* family
    cdef int index
    found = []
    for index in range(convt_family_count()):
        family = convt_family_at(index)
        found.append({
            "name": family.name.decode("ascii"),
            "available": bool(convt_family_available(family)),
            "requires": _feature_names(family.requires),
            "f32": (family.f32.mr, family.f32.nr, family.f32.flags),
            "f64": (family.f64.mr, family.f64.nr, family.f64.flags),
        })
    return found


cdef Kernels kernels_named(str name) except *:
    """The kernel sets of the family ``name``, which must be available here."""
    cdef const convt_family* family
    cdef int index
    cdef Kernels kernels
    encoded = name.encode("ascii")
    for index in range(convt_family_count()):
        family = convt_family_at(index)
        if family.name == encoded:
            if not convt_family_available(family):
                raise ValueError(f"kernel family {name!r} cannot run on this machine")
            kernels.f32 = family.f32
            kernels.f64 = family.f64
            return kernels
    raise ValueError(f"no kernel family named {name!r}")


cdef Storage storage_for(decision, int storage_type) except *:
    """The storage layer of a decision: its family's conversions and stores."""
    cdef Storage storage
    storage.kernels = kernels_named(decision.row_family)
    storage.type = storage_type
    storage.masked_stores = decision.masked_stores
    return storage


cdef list _field_names(const char* const* names):
    cdef list found = []
    cdef Py_ssize_t index = 0
    while names[index] != NULL:
        found.append(names[index].decode("ascii"))
        index += 1
    return found


def _compiled_records():
    """(size in bytes, field names) of every plan struct, by record name (records.h)."""
    return {
        "Axis": (sizeof(Axis), _field_names(convt_axis_fields)),
        "Problem": (sizeof(Problem), _field_names(convt_problem_fields)),
        "GemmStack": (sizeof(GemmStack), _field_names(convt_gemm_stack_fields)),
        "StackAxis": (sizeof(StackAxis), _field_names(convt_stack_axis_fields)),
        "PhaseAxis": (sizeof(PhaseAxis), _field_names(convt_phase_axis_fields)),
        "WorkItem": (sizeof(WorkItem), _field_names(convt_work_item_fields)),
        "GemmLayout": (sizeof(GemmLayout), _field_names(convt_gemm_layout_fields)),
        "DirectLayout": (sizeof(DirectLayout), _field_names(convt_direct_layout_fields)),
    }


def _check_records():
    """Raise ImportError unless every plan struct matches its dtype in convt._records:
    the same field names in the same order, all Py_ssize_t, so the same offsets."""
    from . import _records

    compiled = _compiled_records()
    if set(compiled) != set(_records.RECORDS):
        raise ImportError(f"plan records differ: compiled {sorted(compiled)}, "
                          f"convt._records {sorted(_records.RECORDS)}")
    for name, (size, fields) in compiled.items():
        dtype = _records.RECORDS[name]
        if size != dtype.itemsize or tuple(fields) != dtype.names:
            raise ImportError(
                f"convt._kernels was built with a {name} record of {size} bytes with fields "
                f"{fields}, but convt._records has {dtype.itemsize} bytes {dtype.names}; "
                f"rebuild the extension (pip install .)."
            )


# A pool job whose first worker item runs long, as if its thread were descheduled
# in the middle of it (tests of the contention signal, tests/test_threads.py).
cdef struct StallJob:
    double item_seconds
    double stall_seconds
    int stalled


cdef void stall_task(void* context, Py_ssize_t item, int slot) noexcept nogil:
    cdef StallJob* job = <StallJob*>context
    cdef double seconds = job.item_seconds
    cdef double end
    if slot != 0 and not job.stalled:
        job.stalled = 1  # one worker item at most (a race between workers only adds one)
        seconds = job.stall_seconds
    end = convt_seconds() + seconds
    while convt_seconds() < end:
        pass


def _run_stalled_job(Py_ssize_t items, double item_seconds, double stall_seconds):
    """Threads that ran items of a 2-thread job of ``items`` busy-waits of
    ``item_seconds``, the first item a worker claims lasting ``stall_seconds``."""
    cdef StallJob job
    job.item_seconds = item_seconds
    job.stall_seconds = stall_seconds
    job.stalled = 0
    with nogil:
        used = convt_run(stall_task, &job, items, 2)
    return used
