# Declarations shared by the parts of convt._kernels (the .pxi files it includes).

from libc.stdint cimport uint16_t


cdef extern from "storage.h" nogil:
    int CONVT_F16
    int CONVT_BF16
    int CONVT_F32
    int CONVT_F64
    int CONVT_STORAGE_COUNT
    Py_ssize_t convt_itemsize(int storage)
    double convt_load_double(const void* base, Py_ssize_t index, int storage)


# Winograd transforms (convt/src/winograd.h).
cdef extern from "winograd.h" nogil:
    ctypedef struct convt_winograd_block:
        Py_ssize_t dims
        Py_ssize_t taps
        Py_ssize_t front
        Py_ssize_t out_front
        Py_ssize_t rows
        Py_ssize_t tiles
        Py_ssize_t top
        Py_ssize_t left
        Py_ssize_t capacity
    ctypedef struct convt_winograd_plane:
        Py_ssize_t depth
        Py_ssize_t plane_stride
        Py_ssize_t height
        Py_ssize_t width
        Py_ssize_t row_stride
        Py_ssize_t col_stride
    int CONVT_WINOGRAD_MAX_TILES
    int convt_winograd_input_f32(const convt_winograd_block*, const convt_winograd_plane*,
                                 const float*, Py_ssize_t, Py_ssize_t, float*)
    int convt_winograd_output_f32(const convt_winograd_block*, Py_ssize_t, Py_ssize_t,
                                  const convt_winograd_plane*, const float*, Py_ssize_t,
                                  const float*, float*, Py_ssize_t)


# Depthwise planes (convt/src/plane.h).
cdef extern from "plane.h" nogil:
    int CONVT_PLANE_MAX_TAPS
    ctypedef struct convt_plane_shape:
        Py_ssize_t in_height
        Py_ssize_t in_width
        Py_ssize_t out_height
        Py_ssize_t out_width
        Py_ssize_t kernel_height
        Py_ssize_t kernel_width
        Py_ssize_t stride_y
        Py_ssize_t stride_x
        Py_ssize_t dilation_y
        Py_ssize_t dilation_x
        Py_ssize_t pad_top
        Py_ssize_t pad_left
        Py_ssize_t x_row
        Py_ssize_t x_col
        Py_ssize_t y_row
        Py_ssize_t y_col
        Py_ssize_t outputs
        Py_ssize_t w_channel
        Py_ssize_t y_channel
        Py_ssize_t rows
        Py_ssize_t width
    Py_ssize_t convt_plane_prepare(convt_plane_shape*)
    void convt_plane_f32(const convt_plane_shape*, const float*, const float*, const float*,
                         float*, float*, int)
    void convt_plane_f64(const convt_plane_shape*, const double*, const double*,
                         const double*, double*, double*, int)
    Py_ssize_t convt_plane_channels_rows(const convt_plane_shape*)
    Py_ssize_t convt_plane_channels_cols(const convt_plane_shape*)
    void convt_plane_channels_f32(const convt_plane_shape*, Py_ssize_t, const float*,
                                  const float*, const float*, float*)
    void convt_plane_channels_f64(const convt_plane_shape*, Py_ssize_t, const double*,
                                  const double*, const double*, double*)


cdef extern from "kernel_set.h" nogil:
    enum: CONVT_MAX_MR
    enum: CONVT_MAX_T_POSITIONS
    enum: CONVT_SET_STREAM_B
    enum: CONVT_SET_T_RUNS
    enum: CONVT_SET_HALF
    ctypedef void (*convt_gemm_f32)(Py_ssize_t, Py_ssize_t, const float*, const float*,
                                    const Py_ssize_t*, float*, Py_ssize_t, int, float*)
    ctypedef void (*convt_gemm_f64)(Py_ssize_t, Py_ssize_t, const double*, const double*,
                                    const Py_ssize_t*, double*, Py_ssize_t, int, double*)
    ctypedef void (*convt_pair_f32)(Py_ssize_t, Py_ssize_t, const float*, const float*,
                                    const Py_ssize_t*, Py_ssize_t, float*, Py_ssize_t, int)
    ctypedef void (*convt_pair_f64)(Py_ssize_t, Py_ssize_t, const double*, const double*,
                                    const Py_ssize_t*, Py_ssize_t, double*, Py_ssize_t, int)
    ctypedef void (*convt_pair_store_f32)(Py_ssize_t, Py_ssize_t, const float*, const float*,
                                          const Py_ssize_t*, Py_ssize_t, void*, Py_ssize_t,
                                          int, const float*)
    ctypedef void (*convt_pair_store_f64)(Py_ssize_t, Py_ssize_t, const double*,
                                          const double*, const Py_ssize_t*, Py_ssize_t, void*,
                                          Py_ssize_t, int, const double*)
    ctypedef void (*convt_row_f32)(Py_ssize_t, const float* const*, const float*, Py_ssize_t,
                                   const Py_ssize_t*, Py_ssize_t, Py_ssize_t, float*, int)
    ctypedef void (*convt_row_f64)(Py_ssize_t, const double* const*, const double*,
                                   Py_ssize_t, const Py_ssize_t*, Py_ssize_t, Py_ssize_t,
                                   double*, int)
    ctypedef void (*convt_channels_f32)(Py_ssize_t, Py_ssize_t, const float*, Py_ssize_t,
                                        const float*, float*, Py_ssize_t)
    ctypedef void (*convt_interleave_f32)(float*, const float*, const float*, Py_ssize_t, float)
    ctypedef void (*convt_channels_f64)(Py_ssize_t, Py_ssize_t, const double*, Py_ssize_t,
                                        const double*, double*, Py_ssize_t)
    ctypedef void (*convt_interleave_f64)(double*, const double*, const double*, Py_ssize_t,
                                          double)
    ctypedef void (*convt_run_f32)(float*, const float*, Py_ssize_t, float)
    ctypedef void (*convt_run_f64)(double*, const double*, Py_ssize_t, double)
    ctypedef void (*convt_load_f32)(float*, const void*, Py_ssize_t)
    ctypedef void (*convt_load_f64)(double*, const void*, Py_ssize_t)
    ctypedef void (*convt_store_f32)(void*, const float*, Py_ssize_t, float)
    ctypedef void (*convt_pack_pair_f32)(Py_ssize_t, const float*, const Py_ssize_t*, Py_ssize_t,
                                        float*)
    ctypedef void (*convt_store_f64)(void*, const double*, Py_ssize_t, double)
    ctypedef void (*convt_pack_pair_f64)(Py_ssize_t, const double*, const Py_ssize_t*, Py_ssize_t,
                                        double*)
    ctypedef void (*convt_transpose_f32)(Py_ssize_t, Py_ssize_t, const float*, Py_ssize_t,
                                         float*, Py_ssize_t, const float*)
    ctypedef void (*convt_transpose_f64)(Py_ssize_t, Py_ssize_t, const double*, Py_ssize_t,
                                         double*, Py_ssize_t, const double*)
    ctypedef struct convt_stencil_shape:
        Py_ssize_t rows
        Py_ssize_t kernel_rows
        Py_ssize_t taps
        const Py_ssize_t* offsets
        Py_ssize_t in_size
        Py_ssize_t count
        Py_ssize_t out_stride
    ctypedef void (*convt_stencil_f32)(const convt_stencil_shape*, const float* const*,
                                       const float*, float*, int)
    ctypedef void (*convt_stencil_f64)(const convt_stencil_shape*, const double* const*,
                                       const double*, double*, int)
    ctypedef void (*convt_gemm_t_f32)(Py_ssize_t, Py_ssize_t, const float*, const float*,
                                      const Py_ssize_t*, const Py_ssize_t*, float*,
                                      Py_ssize_t, int)
    ctypedef void (*convt_gemm_t_f64)(Py_ssize_t, Py_ssize_t, const double*, const double*,
                                      const Py_ssize_t*, const Py_ssize_t*, double*,
                                      Py_ssize_t, int)
    ctypedef int (*convt_winograd_in_f32)(const convt_winograd_block*,
                                             const convt_winograd_plane*, const float*,
                                             Py_ssize_t, Py_ssize_t, float*)
    ctypedef int (*convt_winograd_out_f32)(const convt_winograd_block*, Py_ssize_t,
                                              Py_ssize_t, const convt_winograd_plane*,
                                              const float*, Py_ssize_t, const float*, float*,
                                              Py_ssize_t)
    ctypedef void (*convt_plane_kernel_f32)(const convt_plane_shape*, const float*,
                                            const float*, const float*, float*, float*, int)
    ctypedef void (*convt_plane_kernel_f64)(const convt_plane_shape*, const double*,
                                            const double*, const double*, double*, double*,
                                            int)
    ctypedef void (*convt_plane_channels_kernel_f32)(const convt_plane_shape*, Py_ssize_t,
                                                     const float*, const float*, const float*,
                                                     float*)
    ctypedef void (*convt_plane_channels_kernel_f64)(const convt_plane_shape*, Py_ssize_t,
                                                     const double*, const double*,
                                                     const double*, double*)

    ctypedef struct convt_kernels_f32:
        const char* name
        int mr
        int nr
        unsigned flags
        convt_gemm_f32 gemm[12]
        convt_gemm_f32 gemm_pack[12]
        convt_gemm_f32 half[12]
        convt_pair_f32 pair[2][6]
        convt_pair_store_f32 pair_store[4][2][6]
        convt_row_f32 row
        convt_channels_f32 channels
        convt_interleave_f32 interleave
        convt_run_f32 store_even
        convt_run_f32 add_bias
        convt_load_f32 load[4]
        convt_store_f32 store[4]
        convt_pack_pair_f32 pack_pair
        convt_transpose_f32 transpose
        convt_stencil_f32 stencil
        convt_gemm_t_f32 gemm_t[2][14]
        convt_winograd_in_f32 winograd_input
        convt_winograd_out_f32 winograd_output
        convt_plane_kernel_f32 plane
        convt_interleave_f32 interleave_stream
        convt_plane_channels_kernel_f32 plane_channels
        convt_gemm_f32 gemm_stream[12]

    ctypedef struct convt_kernels_f64:
        const char* name
        int mr
        int nr
        unsigned flags
        convt_gemm_f64 gemm[12]
        convt_gemm_f64 gemm_pack[12]
        convt_gemm_f64 half[12]
        convt_pair_f64 pair[2][6]
        convt_pair_store_f64 pair_store[4][2][6]
        convt_row_f64 row
        convt_channels_f64 channels
        convt_interleave_f64 interleave
        convt_run_f64 store_even
        convt_run_f64 add_bias
        convt_load_f64 load[4]
        convt_store_f64 store[4]
        convt_pack_pair_f64 pack_pair
        convt_transpose_f64 transpose
        convt_stencil_f64 stencil
        convt_gemm_t_f64 gemm_t[2][14]
        void* winograd_input     # float32 sets only (NULL here)
        void* winograd_output
        convt_plane_kernel_f64 plane
        convt_interleave_f64 interleave_stream
        convt_plane_channels_kernel_f64 plane_channels
        convt_gemm_f64 gemm_stream[12]

    ctypedef struct convt_family:
        const char* name
        unsigned requires
        const convt_kernels_f32* f32
        const convt_kernels_f64* f64

    int convt_family_count()
    const convt_family* convt_family_at(int index)
    int convt_family_available(const convt_family* family)


cdef extern from "cpu.h" nogil:
    ctypedef struct convt_x86_words:
        unsigned max_leaf
        unsigned leaf1_ecx
        unsigned leaf7_ebx
        unsigned leaf7_1_eax
        unsigned long long xcr0
        int os_avx512
    unsigned convt_decode_x86(const convt_x86_words* words)
    unsigned convt_cpu_features()
    long convt_l1_data_bytes()
    long convt_l2_bytes()
    double convt_avx512_fma_speedup()


cdef extern from "pool.h" nogil:
    ctypedef void (*convt_task)(void* context, Py_ssize_t item, int slot) noexcept nogil
    int convt_run(convt_task task, void* context, Py_ssize_t items, int threads)
    int convt_pool_workers()
    int convt_pool_contended(int threads)
    double convt_seconds()
    ctypedef struct convt_stop:
        int raised
    int convt_stop_raised(const convt_stop* stop)
    void convt_raise_stop(convt_stop* stop)


cdef extern from "Python.h":
    ctypedef struct PyObject
    int PyErr_CheckSignals()
    void PyErr_Fetch(PyObject** kind, PyObject** value, PyObject** traceback)
    void PyErr_Restore(PyObject* kind, PyObject* value, PyObject* traceback)


# Signal checks between work items: the calling (main) thread runs Python's
# signal handlers every `period` seconds; an exception they raise stops the
# engine (see _signals.pxi).
cdef struct Signals:
    bint enabled                       # the call came from the main thread
    double period
    double next_check
    convt_stop stop
    PyObject* kind                     # the exception a handler raised
    PyObject* value
    PyObject* traceback


ctypedef fused acc_t:
    float
    double


# The kernel sets of one family, for both accumulation types.
cdef struct Kernels:
    const convt_kernels_f32* f32
    const convt_kernels_f64* f64


# Plan records (convt/src/records.h; mirrored by the dtypes of convt/_records.py).
cdef extern from "records.h" nogil:
    ctypedef struct Axis "convt_axis":
        Py_ssize_t in_size, out_size, stride, decimation
    ctypedef struct Problem "convt_problem":
        Py_ssize_t ndim, storage, batch, groups, cg, mg, out_channels
    ctypedef struct GemmStack "convt_gemm_stack":
        Py_ssize_t taps, phases, rows, items, columns, chunk, sum_block, tap_start
        Py_ssize_t phase_start, weight_start, group_size, kernel_start, table_start
        Py_ssize_t identity, blocks, block_start, panel, tile_rows, tile_cols, row_tiles
        Py_ssize_t col_tiles, row_stride, buffer_rows, buffer_planes, buffer_channel
        Py_ssize_t offset_start, gather, residue_start, row_groups, group_blocks, siblings
        Py_ssize_t interleave, exact, store_direct, partner, transposed, image_window
    ctypedef struct StackAxis "convt_stack_axis":
        Py_ssize_t first, extent, span
    ctypedef struct PhaseAxis "convt_phase_axis":
        Py_ssize_t residue, shift, count
    ctypedef struct WorkItem "convt_work_item":
        Py_ssize_t image, group, stack, tile
    ctypedef struct GemmLayout "convt_gemm_layout":
        Py_ssize_t operand, product, per_thread, blas, pack_min_blocks, half_panels
        Py_ssize_t masked_stores, input_is_tile, pair_pack_min_blocks, buffer_pack_min_blocks
        Py_ssize_t transposed, stream_output
    ctypedef struct DirectLayout "convt_direct_layout":
        Py_ssize_t rows, max_stride, max_taps, phase_length, max_sources, x_rows, x_row
        Py_ssize_t weights, floats, ints, interleave, masked_stores, transpose, channels
        Py_ssize_t band_rows, stream_output
    const char* const* convt_axis_fields
    const char* const* convt_problem_fields
    const char* const* convt_gemm_stack_fields
    const char* const* convt_stack_axis_fields
    const char* const* convt_phase_axis_fields
    const char* const* convt_work_item_fields
    const char* const* convt_gemm_layout_fields
    const char* const* convt_direct_layout_fields


# The arrays of one call: data pointers and element strides: x and y (n,
# channel, spatial...), w as a (group, input channel of the group, output
# channel of the group, kernel...) view, whatever the operator's layout.
cdef struct Operands:
    const char* x
    const char* w
    char* y
    const char* bias             # storage type, or NULL
    const char* bias_acc         # the bias in the accumulation type, or NULL
    const Py_ssize_t* x_strides
    const Py_ssize_t* w_strides
    const Py_ssize_t* y_strides


# The storage layer of a call (see _storage.pxi).
cdef struct Storage:
    Kernels kernels          # the family whose conversions and stores serve the call
    int type                 # CONVT_F16, CONVT_BF16, CONVT_F32 or CONVT_F64
    bint masked_stores       # stride-2 runs of the accumulation type use store_even


# The GEMM engine (see _gemm.pxi and _scatter.pxi).
cdef enum:
    VARIANT_PLAIN = 0        # gemm[rows - 1]
    VARIANT_PACK = 1         # gemm_pack[rows - 1]: also copies B for the next blocks
    VARIANT_HALF = 2         # half[rows - 1]: a last panel of <= NR / 2 positions
    VARIANT_STREAM = 3       # gemm_stream[rows - 1]: hints each B row's line further on


cdef struct Gemm:
    Signals* signals                   # checked between work items and K chunks
    # sets with gemm_stream (CONVT_SET_STREAM_B): a panel read from x in place runs
    # it for its first row block (see multiply_tile)
    bint stream_in_place
    Problem problem
    const Axis* axes
    Operands ops
    Storage storage
    GemmLayout layout
    const GemmStack* stacks
    const StackAxis* stack_axes        # [stack][axis]
    const Py_ssize_t* tap_offsets      # [tap row][axis]
    const Py_ssize_t* tap_residues     # [tap row][axis]: decimated input plane (Conv)
    const Py_ssize_t* residues         # [window plane][axis]: its input residues (Conv)
    const Py_ssize_t* buffer_offsets
    const PhaseAxis* phases            # [stacked phase][axis]
    const WorkItem* items
    const Py_ssize_t* block_starts
    const Py_ssize_t* panel_offsets
    const Py_ssize_t* x_channel_offsets  # [k] = k * x's channel stride (x read in place)
    Py_ssize_t x_extent                # elements readable from x's data pointer (0: none)
    bint stream_weights                # transposed stacks read w itself, block by block
                                       # (see streamed_weights); the packed weights are unused


# The scalar arguments of one micro-kernel call.
cdef struct Panel:
    Py_ssize_t depth                   # K rows of this chunk
    Py_ssize_t k_begin                 # its first K row (a column of the packed weights)
    Py_ssize_t block                   # blocked-summation steps
    const Py_ssize_t* offsets          # B row offsets
    Py_ssize_t sibling                 # pair kernels: the odd rows' B and C shift
    Py_ssize_t ldc                     # C (or y) row stride
    bint accumulate


cdef struct TileSpan:
    Py_ssize_t y                       # first grid coordinate on axis ndim - 2 (0 in 1-D)
    Py_ssize_t rows
    Py_ssize_t x                       # first grid coordinate on the last axis
    Py_ssize_t cols
    Py_ssize_t first_block             # row blocks [first_block, end_block) of this item
    Py_ssize_t end_block
    Py_ssize_t first_row               # their rows [first_row, end_row)
    Py_ssize_t end_row


cdef extern from "prefetch.h" nogil:
    void convt_prefetch(const void* p)
    void convt_store_fence()
