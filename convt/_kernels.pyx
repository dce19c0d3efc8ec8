# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled kernels of convt.

Two engines compute ``y[n, m, o] = b[m] + sum x[n, c, i] w[c, m, k]`` over
``o = i * stride + k * dilation - pad_begin`` (per axis), both organised by
stride phase: along an axis, the outputs ``o = r + t * stride`` of one residue
``r`` receive a fixed set of taps ``k`` reading input ``i = t + offset(k)``,
an ordinary stride-1 correlation over the un-expanded input.  Every output
element is therefore written exactly once; there is no col2im scatter-add.

* The GEMM engine stacks the phases whose tap offsets agree up to a shift.
  Per work item (a tile of positions and a group of rows) it copies the
  tile's input once into a zero-padded buffer and runs the register-blocked
  micro-kernels of _microkernels.h, which read tap j of position q at
  ``buffer[q + offset[j]]`` (no im2col), against pre-packed weights; then it
  scatters the product rows to the output.  The BLAS backend runs the same
  plan on an im2col tile through scipy's BLAS, held single-threaded.  Items
  are shared by an OpenMP ``prange``.
* The direct engine computes one output row at a time, each stride phase
  summed in registers by the row kernels of _direct.h; it serves problems of
  a few multiply-adds per output (single-channel or depthwise, small
  kernels), where a GEMM would degenerate.

All array access goes through element strides, so any memory layout of ``x``,
``w`` and ``y`` is served without copying.  Storage may be float16, float32
or float64; accumulation is float32 for the first two and float64 for the
last (the fused type ``acc_t``), with float16 converted tile by tile.
The work decomposition never depends on the thread count, so results are
bitwise identical for every ``num_threads``.
"""

from cython.parallel cimport prange
from libc.stdint cimport uint16_t
from libc.string cimport memcpy, memset

cimport numpy as cnp
import numpy as np
from scipy.linalg.cython_blas cimport dgemm, sgemm

cnp.import_array()
convt_detect_f16c()
convt_detect_masked_stores()

cdef extern from "_microkernels.h" nogil:
    ctypedef void (*convt_kernel_f32)(Py_ssize_t, Py_ssize_t, int, const float*, const float*,
                                      const Py_ssize_t*, float*, Py_ssize_t, int, float*)
    ctypedef void (*convt_kernel_f64)(Py_ssize_t, Py_ssize_t, int, const double*, const double*,
                                      const Py_ssize_t*, double*, Py_ssize_t, int, double*)
    int CONVT_MR
    int CONVT_MAX_MR
    int CONVT_BACKEND_BLAS
    int CONVT_BACKEND_PORTABLE
    int CONVT_BACKEND_AVX2
    int CONVT_BACKEND_AVX512
    int CONVT_BACKEND_COUNT
    Py_ssize_t convt_backend_mr(int backend)
    int convt_backend_available(int backend)
    Py_ssize_t convt_backend_nr(int backend, int is_double)
    convt_kernel_f32 convt_backend_f32(int backend, int rows, int pack)
    convt_kernel_f64 convt_backend_f64(int backend, int rows, int pack)
    ctypedef void (*convt_pair_f32)(Py_ssize_t, Py_ssize_t, const float*, const float*,
                                    const Py_ssize_t*, Py_ssize_t, float*, Py_ssize_t, int)
    ctypedef void (*convt_pair_f64)(Py_ssize_t, Py_ssize_t, const double*, const double*,
                                    const Py_ssize_t*, Py_ssize_t, double*, Py_ssize_t, int)
    ctypedef void (*convt_pair_store_f32)(Py_ssize_t, Py_ssize_t, const float*, const float*,
                                          const Py_ssize_t*, Py_ssize_t, float*, Py_ssize_t,
                                          int, const float*)
    ctypedef void (*convt_pair_store_f64)(Py_ssize_t, Py_ssize_t, const double*,
                                          const double*, const Py_ssize_t*, Py_ssize_t,
                                          double*, Py_ssize_t, int, const double*)
    ctypedef void (*convt_pair_store_f16)(Py_ssize_t, Py_ssize_t, const float*, const float*,
                                          const Py_ssize_t*, Py_ssize_t, uint16_t*, Py_ssize_t,
                                          int, const float*)
    convt_pair_store_f16 convt_backend_pair_store_f16(int backend, int rows, int half)
    convt_pair_store_f32 convt_backend_pair_store_f32(int backend, int rows, int half)
    convt_pair_store_f64 convt_backend_pair_store_f64(int backend, int rows, int half)
    convt_pair_f32 convt_backend_pair_f32(int backend, int rows, int half)
    convt_pair_f64 convt_backend_pair_f64(int backend, int rows, int half)
    convt_kernel_f32 convt_backend_half_f32(int backend, int rows)
    convt_kernel_f64 convt_backend_half_f64(int backend, int rows)

cdef extern from "_direct.h" nogil:
    void convt_detect_masked_stores()
    int convt_masked_stores
    void convt_store_even_f32(float* y, const float* src, Py_ssize_t count, float bias)
    void convt_store_even_f64(double* y, const double* src, Py_ssize_t count, double bias)
    ctypedef void (*convt_phase_f32)(Py_ssize_t, const float* const*, const float*,
                                     Py_ssize_t, const Py_ssize_t*, Py_ssize_t, Py_ssize_t,
                                     float*, int)
    ctypedef void (*convt_phase_f64)(Py_ssize_t, const double* const*, const double*,
                                     Py_ssize_t, const Py_ssize_t*, Py_ssize_t, Py_ssize_t,
                                     double*, int)
    convt_phase_f32 convt_direct_f32(int backend)
    convt_phase_f64 convt_direct_f64(int backend)
    ctypedef void (*convt_interleave_f32)(float*, const float*, const float*, Py_ssize_t, float)
    ctypedef void (*convt_interleave_f64)(double*, const double*, const double*, Py_ssize_t,
                                          double)
    convt_interleave_f32 convt_interleave_for_f32(int backend)
    convt_interleave_f64 convt_interleave_for_f64(int backend)

cdef extern from "_support.h" nogil:
    float convt_half_to_float(uint16_t half)
    uint16_t convt_float_to_half(float value)
    void convt_prefetch(const void* address)
    void convt_detect_f16c()
    int convt_f16c
    void convt_halves_to_floats(float* dst, const uint16_t* src, Py_ssize_t count)
    void convt_floats_to_halves(uint16_t* dst, const float* src, Py_ssize_t count, float bias)
    void convt_add_bias_f32(float* dst, const float* src, Py_ssize_t count, float bias)
    void convt_add_bias_f64(double* dst, const double* src, Py_ssize_t count, double bias)
    int convt_thread_num()
    int convt_max_threads()
    int CONVT_HAVE_OPENMP


ctypedef fused acc_t:
    float
    double


# Storage kinds of user arrays; the item size of kind k is 2 << k bytes.
cdef enum:
    STORAGE_F16 = 0
    STORAGE_F32 = 1
    STORAGE_F64 = 2

# Columns of the per-stack table built by convt._plan.
cdef enum:
    STACK_TAPS = 0         # taps per phase (J)
    STACK_PHASES = 1       # phases stacked into one GEMM (P)
    STACK_ITEMS = 2        # work items per image and group: tiles x row groups
    STACK_COLUMNS = 3      # product columns of a tile (whole panels)
    STACK_CHUNK = 4        # input channels per K chunk
    STACK_OFFSETS = 5      # start of this stack's rows in the tap-offset table
    STACK_PHASE_ROWS = 6   # start of this stack's rows in the phase table
    STACK_WEIGHTS = 7      # start of this stack's packed weights (group 0)
    STACK_GROUP_SIZE = 8   # packed weight elements per group
    STACK_IDENTITY = 9     # 1 if the im2col of a tile is the input itself
    STACK_ROWS = 10        # rows: stacked phases x output channels of a group
    STACK_BLOCKS = 11      # row blocks of at most MR rows, balanced (1 for BLAS)
    STACK_PANEL = 12       # positions per micro-kernel call (the tile for BLAS)
    STACK_TILE_ROWS = 13   # grid rows (axis ndim - 2) per tile
    STACK_TILE_COLS = 14   # grid columns (last axis) per tile
    STACK_ROW_TILES = 15   # tiles along axis ndim - 2
    STACK_COL_TILES = 16   # tiles along the last axis
    STACK_ROW_STRIDE = 17  # product (and buffer) columns per tile row
    STACK_BUFFER_OFFSETS = 18  # start of this stack's rows in buffer_offsets
    STACK_ROW_GROUPS = 19  # groups the row blocks of a tile are split into
    STACK_GROUP_BLOCKS = 20  # row blocks per group
    STACK_SIBLINGS = 21    # stacked phases of the last axis (adjacent rows)
    STACK_INTERLEAVE = 22  # 1 if they are all the residues of the last axis
    STACK_EXACT = 23       # 1: per-row panels of each phase pair (multiply_exact)
    STACK_BLOCK_STARTS = 24    # start of this stack's blocks + 1 rows in block_starts
    STACK_PARTNER = 25     # the stack of the other stride-2 residue run by the same items, or -1
    STACK_FIELDS = 26

# Row blocks an item needs before its B panels are worth packing contiguously.
cdef enum:
    PACK_MIN_BLOCKS = 4


def _use_masked_stores(bint enabled):
    """Tests only: turn the AVX-512 stride-2 stores off (or back on, where the CPU has them)."""
    global convt_masked_stores
    convt_detect_masked_stores()
    convt_masked_stores = convt_masked_stores and enabled


def _use_f16c(bint enabled):
    """Tests only: turn the F16C conversions off (or back on, where the CPU has them)."""
    global convt_f16c
    convt_detect_f16c()
    convt_f16c = convt_f16c and enabled


def openmp_enabled():
    """Whether the kernels were compiled with OpenMP."""
    return bool(CONVT_HAVE_OPENMP)


def max_threads():
    """Threads an OpenMP region uses by default (1 without OpenMP)."""
    return convt_max_threads()


cdef inline const char* element(const char* base, Py_ssize_t index, int kind) noexcept nogil:
    return base + index * (2 << kind)


cdef inline double load_double(const char* base, Py_ssize_t index, int kind) noexcept nogil:
    if kind == STORAGE_F16:
        return convt_half_to_float((<const uint16_t*>base)[index])
    if kind == STORAGE_F32:
        return (<const float*>base)[index]
    return (<const double*>base)[index]


cdef inline void load_run(acc_t* dst, const char* src, Py_ssize_t step,
                          Py_ssize_t count, int kind) noexcept nogil:
    """dst[i] = src[i * step] converted to the accumulation type."""
    cdef Py_ssize_t i
    cdef const uint16_t* halves
    cdef const float* floats
    cdef const double* doubles
    if kind == STORAGE_F16:
        halves = <const uint16_t*>src
        if acc_t is float and step == 1:
            convt_halves_to_floats(dst, halves, count)
        else:
            for i in range(count):
                dst[i] = convt_half_to_float(halves[i * step])
    elif kind == STORAGE_F32:
        floats = <const float*>src
        if acc_t is float and step == 1:
            memcpy(dst, floats, count * sizeof(float))
        else:
            for i in range(count):
                dst[i] = <acc_t>floats[i * step]
    else:
        doubles = <const double*>src
        if acc_t is double and step == 1:
            memcpy(dst, doubles, count * sizeof(double))
        else:
            for i in range(count):
                dst[i] = <acc_t>doubles[i * step]


cdef inline void store_run(char* dst, Py_ssize_t step, const acc_t* src,
                           Py_ssize_t count, acc_t bias, int kind) noexcept nogil:
    """dst[i * step] = src[i] + bias, rounded once to the storage type."""
    cdef Py_ssize_t i, done, chunk
    cdef uint16_t* halves
    cdef float* floats
    cdef double* doubles
    cdef uint16_t converted[64]
    if kind == STORAGE_F16:
        halves = <uint16_t*>dst
        if acc_t is float and step == 1:
            convt_floats_to_halves(halves, src, count, bias)
        elif acc_t is float:
            # convert in vector-sized chunks, then place the halves with the stride
            done = 0
            while done < count:
                chunk = min(64, count - done)
                convt_floats_to_halves(converted, src + done, chunk, bias)
                for i in range(chunk):
                    halves[(done + i) * step] = converted[i]
                done = done + chunk
        else:
            for i in range(count):
                halves[i * step] = convt_float_to_half(<float>(src[i] + bias))
    elif kind == STORAGE_F32:
        floats = <float*>dst
        if acc_t is float and step == 1:
            convt_add_bias_f32(floats, src, count, bias)
        elif acc_t is float and step == 2:
            convt_store_even_f32(floats, src, count, bias)
        elif step == 1:
            for i in range(count):
                floats[i] = <float>(src[i] + bias)
        else:
            for i in range(count):
                floats[i * step] = <float>(src[i] + bias)
    else:
        doubles = <double*>dst
        if acc_t is double and step == 1:
            convt_add_bias_f64(doubles, src, count, bias)
        elif acc_t is double and step == 2:
            convt_store_even_f64(doubles, src, count, bias)
        elif step == 1:
            for i in range(count):
                doubles[i] = <double>(src[i] + bias)
        else:
            for i in range(count):
                doubles[i * step] = <double>(src[i] + bias)


cdef inline acc_t bias_of(const char* bias, Py_ssize_t channel, int kind,
                          const acc_t* like) noexcept nogil:
    if bias == NULL:
        return 0
    return <acc_t>load_double(bias, channel, kind)


# --------------------------------------------------------------------------
# GEMM engine
# --------------------------------------------------------------------------

cdef struct GemmArgs:
    int ndim
    int kind
    int backend                      # CONVT_BACKEND_*
    convt_kernel_f32 kernel_f32[24]  # micro-kernels by [pack][rows - 1] (NULL for BLAS)
    convt_kernel_f64 kernel_f64[24]
    convt_kernel_f32 half_f32[12]    # by [rows - 1]: last panels of <= NR / 2 positions
    convt_kernel_f64 half_f64[12]
    convt_pair_f32 pair_f32[12]      # by [half * 6 + rows / 2 - 1] (exact stacks)
    convt_pair_f64 pair_f64[12]
    convt_pair_store_f32 store_f32[12]  # the same, storing into y (store_exact)
    convt_pair_store_f64 store_f64[12]
    convt_pair_store_f16 store_f16[12]
    const char* bias_acc             # the bias in the accumulation type (or NULL)
    bint store_exact                 # exact stacks store into y: y's rows are contiguous
                                     # and of the accumulation type
    const char* x
    char* y
    const char* bias
    const Py_ssize_t* x_strides      # elements: n, c, spatial...
    const Py_ssize_t* y_strides
    const Py_ssize_t* in_size        # spatial input sizes
    const Py_ssize_t* conv_stride
    Py_ssize_t cg                    # input channels per group
    Py_ssize_t mg                    # output channels per group
    const Py_ssize_t* stacks         # [S, STACK_FIELDS]
    const Py_ssize_t* stack_axes     # [S, ndim, 3]: first position, extent, tap span
    const Py_ssize_t* tap_offsets    # rows of ndim input offsets, one per tap
    const Py_ssize_t* buffer_offsets # per stack: tap rows inside a tile buffer
    const Py_ssize_t* phases         # rows of ndim (residue, shift, count)
    const Py_ssize_t* items          # [n_items, 4]: image, group, stack, tile
    Py_ssize_t operand_capacity      # elements of the gathered operand / tile buffer
    Py_ssize_t product_capacity      # elements of the product of one work item
    convt_interleave_f32 interleave_f32  # stride-2 stores of the chosen backend
    convt_interleave_f64 interleave_f64
    const Py_ssize_t* panel_offsets  # k * NR: rows of a packed B panel
    const Py_ssize_t* block_starts   # per stack: first row of each row block (convt._plan)
    bint input_is_tile               # x holds acc_t values, spatially C-contiguous


cdef inline Py_ssize_t block_start(const Py_ssize_t* starts, const Py_ssize_t* info,
                                   Py_ssize_t block) noexcept nogil:
    """First row of a row block of a stack (block == blocks: the stack's rows);
    blocks never straddle a leading phase in exact stacks (see convt._plan)."""
    return starts[info[STACK_BLOCK_STARTS] + block]


cdef inline Py_ssize_t row_phase(Py_ssize_t row, Py_ssize_t mg, Py_ssize_t siblings,
                                 Py_ssize_t* m) noexcept nogil:
    """Rows are ordered (leading-axis phase, output channel, last-axis phase), so the
    stride phases of one output row are adjacent.  Return the stacked phase index
    of ``row`` (C order over axes) and set ``m`` to its output channel."""
    cdef Py_ssize_t rest = row // siblings
    m[0] = rest % mg
    return (rest // mg) * siblings + row % siblings


cdef struct TileSpan:
    Py_ssize_t y                     # first grid coordinate on axis ndim - 2 (0 in 1-D)
    Py_ssize_t rows
    Py_ssize_t x                     # first grid coordinate on the last axis
    Py_ssize_t cols
    Py_ssize_t first_block           # row blocks [first_block, end_block) of this item
    Py_ssize_t end_block
    Py_ssize_t first_row             # their rows [first_row, end_row)
    Py_ssize_t end_row


cdef inline void blas_gemm(int m, int n, int k, acc_t* a, int lda, acc_t* b,
                           int ldb, acc_t beta, acc_t* c, int ldc) noexcept nogil:
    """Column-major C = A B^T + beta C (row-major callers pass operands swapped)."""
    cdef char no_trans = b'N'
    cdef char trans = b'T'
    cdef acc_t one = 1
    if acc_t is float:
        sgemm(&no_trans, &trans, &m, &n, &k, &one, a, &lda, b, &ldb, &beta, c, &ldc)
    else:
        dgemm(&no_trans, &trans, &m, &n, &k, &one, a, &lda, b, &ldb, &beta, c, &ldc)


cdef TileSpan decode_tile(const GemmArgs* args, const Py_ssize_t* info,
                          const Py_ssize_t* axes, Py_ssize_t index,
                          Py_ssize_t* lead) noexcept nogil:
    """Work item ``index`` of a stack: its tile's grid rows and columns, its group of
    product rows, and in ``lead`` the grid coordinates of its leading axes (all
    axes before the last two)."""
    cdef int last = args.ndim - 1
    cdef Py_ssize_t row_group = index % info[STACK_ROW_GROUPS]
    index = index // info[STACK_ROW_GROUPS]
    cdef Py_ssize_t column_tile = index % info[STACK_COL_TILES]
    cdef Py_ssize_t rest = index // info[STACK_COL_TILES]
    cdef Py_ssize_t row_tile = rest % info[STACK_ROW_TILES]
    cdef Py_ssize_t plane = rest // info[STACK_ROW_TILES]
    cdef TileSpan tile
    cdef int a
    tile.first_block = row_group * info[STACK_GROUP_BLOCKS]
    tile.end_block = min(info[STACK_BLOCKS], tile.first_block + info[STACK_GROUP_BLOCKS])
    tile.first_row = block_start(args.block_starts, info, tile.first_block)
    tile.end_row = block_start(args.block_starts, info, tile.end_block)
    tile.x = axes[3 * last] + column_tile * info[STACK_TILE_COLS]
    tile.cols = min(info[STACK_TILE_COLS], axes[3 * last + 1] - column_tile * info[STACK_TILE_COLS])
    if last >= 1:
        tile.y = axes[3 * (last - 1)] + row_tile * info[STACK_TILE_ROWS]
        tile.rows = min(info[STACK_TILE_ROWS],
                        axes[3 * (last - 1) + 1] - row_tile * info[STACK_TILE_ROWS])
    else:
        tile.y = 0
        tile.rows = 1
    for a in range(last - 2, -1, -1):
        lead[a] = axes[3 * a] + plane % axes[3 * a + 1]
        plane = plane // axes[3 * a + 1]
    return tile


cdef inline void zero_run(acc_t* dst, Py_ssize_t count) noexcept nogil:
    """dst[:count] = 0; halos are a few elements, where a loop beats a memset call."""
    cdef Py_ssize_t i
    if count > 32:
        memset(dst, 0, count * sizeof(acc_t))
    else:
        for i in range(count):
            dst[i] = 0


cdef inline void fill_run(acc_t* dst, Py_ssize_t count, Py_ssize_t origin, Py_ssize_t size,
                          const char* x_row, Py_ssize_t step, int kind) noexcept nogil:
    """dst[i] = x_row[origin + i] where 0 <= origin + i < size, else 0 (x_row: index 0)."""
    cdef Py_ssize_t lo = min(max(0, -origin), count)
    cdef Py_ssize_t hi = max(lo, min(count, size - origin))
    cdef Py_ssize_t i
    cdef const acc_t* same
    zero_run(dst, lo)
    if hi - lo <= 64 and step == 1 and (
            acc_t is float and kind == STORAGE_F32 or acc_t is double and kind == STORAGE_F64):
        # same type, contiguous: a plain copy (glibc picks the vector width)
        same = <const acc_t*>element(x_row, origin + lo, kind)
        memcpy(dst + lo, same, (hi - lo) * sizeof(acc_t))
    elif hi > lo:
        load_run(dst + lo, element(x_row, (origin + lo) * step, kind), step, hi - lo, kind)
    zero_run(dst + hi, count - hi)


cdef void fill_buffer(const GemmArgs* args, const Py_ssize_t* info, const Py_ssize_t* axes,
                      const char* x_image, Py_ssize_t c_begin, Py_ssize_t c_end,
                      const Py_ssize_t* lead, TileSpan tile, acc_t* buffer) noexcept nogil:
    """Copy the input a tile reads, once, into a zero-padded buffer.

    Buffer axes: each leading axis spans its taps (span + 1), axis ndim - 2
    spans the tile's rows and their taps, the last axis a row of
    STACK_ROW_STRIDE (columns plus taps); then per input channel.  Tap j of
    product column q is buffer[q + buffer_offsets[j]].
    """
    cdef int ndim = args.ndim
    cdef int last = ndim - 1
    cdef int kind = args.kind
    cdef Py_ssize_t row_stride = info[STACK_ROW_STRIDE]
    cdef Py_ssize_t buffer_rows = info[STACK_TILE_ROWS] + (axes[3 * (last - 1) + 2] if last >= 1 else 0)
    cdef Py_ssize_t plane_size = buffer_rows * row_stride
    cdef Py_ssize_t planes = 1
    cdef Py_ssize_t channel_size, channel, plane, rest, index, x_offset, r, row_index
    cdef Py_ssize_t x_origin = tile.x - axes[3 * last + 2]
    cdef Py_ssize_t y_origin = tile.y - (axes[3 * (last - 1) + 2] if last >= 1 else 0)
    cdef int a
    cdef bint inside
    cdef acc_t* dst
    for a in range(last - 1):
        planes = planes * (axes[3 * a + 2] + 1)
    channel_size = planes * plane_size
    for channel in range(c_begin, c_end):
        for plane in range(planes):
            dst = buffer + (channel - c_begin) * channel_size + plane * plane_size
            x_offset = channel * args.x_strides[1]
            inside = True
            rest = plane
            for a in range(last - 2, -1, -1):
                index = lead[a] - axes[3 * a + 2] + rest % (axes[3 * a + 2] + 1)
                rest = rest // (axes[3 * a + 2] + 1)
                if index < 0 or index >= args.in_size[a]:
                    inside = False
                    break
                x_offset = x_offset + index * args.x_strides[2 + a]
            if not inside:
                memset(dst, 0, plane_size * sizeof(acc_t))
                continue
            for r in range(buffer_rows):
                row_index = y_origin + r
                if last >= 1 and (row_index < 0 or row_index >= args.in_size[last - 1]):
                    memset(dst + r * row_stride, 0, row_stride * sizeof(acc_t))
                    continue
                fill_run(dst + r * row_stride, row_stride, x_origin, args.in_size[last],
                         element(x_image, x_offset + (row_index * args.x_strides[1 + last]
                                                      if last >= 1 else 0), kind),
                         args.x_strides[2 + last], kind)
    # the last panel of the last channel may read up to one panel past the data
    memset(buffer + (c_end - c_begin) * channel_size, 0, info[STACK_PANEL] * sizeof(acc_t))


cdef void gather_row(const GemmArgs* args, const Py_ssize_t* info, const Py_ssize_t* axes,
                     const char* x_image, Py_ssize_t c_begin, Py_ssize_t c_end,
                     const Py_ssize_t* lead, Py_ssize_t column, Py_ssize_t run,
                     Py_ssize_t done, acc_t* operand, Py_ssize_t depth) noexcept nogil:
    """im2col of one tile row: operand[(c, j), done + q] = x[c, lead, column + q + offset(j)]."""
    cdef int ndim = args.ndim
    cdef int last = ndim - 1
    cdef int kind = args.kind
    cdef Py_ssize_t taps = info[STACK_TAPS]
    cdef Py_ssize_t width = info[STACK_COLUMNS]
    cdef const Py_ssize_t* offsets = args.tap_offsets + info[STACK_OFFSETS] * ndim
    cdef Py_ssize_t channel, j, index, x_offset
    cdef int a
    cdef bint inside
    cdef acc_t* dst
    for channel in range(c_begin, c_end):
        for j in range(taps):
            dst = operand + ((channel - c_begin) * taps + j) * width + done
            x_offset = channel * args.x_strides[1]
            inside = True
            for a in range(last):
                index = lead[a] + offsets[j * ndim + a]
                if index < 0 or index >= args.in_size[a]:
                    inside = False
                    break
                x_offset = x_offset + index * args.x_strides[2 + a]
            if inside:
                fill_run(dst, run, column + offsets[j * ndim + last], args.in_size[last],
                         element(x_image, x_offset, kind), args.x_strides[2 + last], kind)
            else:
                memset(dst, 0, run * sizeof(acc_t))


cdef void gather_tile(const GemmArgs* args, const Py_ssize_t* info, const Py_ssize_t* axes,
                      const char* x_image, Py_ssize_t c_begin, Py_ssize_t c_end,
                      Py_ssize_t* lead, TileSpan tile, acc_t* operand) noexcept nogil:
    """The BLAS operand of a tile: im2col rows of STACK_COLUMNS positions."""
    cdef int last = args.ndim - 1
    cdef Py_ssize_t depth = (c_end - c_begin) * info[STACK_TAPS]
    cdef Py_ssize_t r
    for r in range(tile.rows):
        if last >= 1:
            lead[last - 1] = tile.y + r
        gather_row(args, info, axes, x_image, c_begin, c_end, lead, tile.x, tile.cols,
                   r * info[STACK_ROW_STRIDE], operand, depth)


cdef bint output_base(const GemmArgs* args, const Py_ssize_t* phase, Py_ssize_t image,
                      Py_ssize_t channel, const Py_ssize_t* lead, Py_ssize_t* base) noexcept nogil:
    """Offset in y of (image, channel) and of the phase's leading-axis outputs at
    ``lead``; False if a leading coordinate is outside the phase's outputs."""
    cdef int last = args.ndim - 1
    cdef Py_ssize_t t
    cdef int a
    base[0] = image * args.y_strides[0] + channel * args.y_strides[1]
    for a in range(last - 1):
        t = lead[a] - phase[3 * a + 1]
        if t < 0 or t >= phase[3 * a + 2]:
            return False
        base[0] = base[0] + (phase[3 * a] + t * args.conv_stride[a]) * args.y_strides[2 + a]
    return True


cdef bint row_offset(const GemmArgs* args, const Py_ssize_t* phase, Py_ssize_t grid_row,
                     Py_ssize_t* offset) noexcept nogil:
    """Add the phase's output row on axis ndim - 2 for a grid row (nothing in 1-D);
    False if that grid row has no output in this phase."""
    cdef int last = args.ndim - 1
    cdef Py_ssize_t t
    if last >= 1:
        t = grid_row - phase[3 * (last - 1) + 1]
        if t < 0 or t >= phase[3 * (last - 1) + 2]:
            return False
        offset[0] = offset[0] + (phase[3 * (last - 1)] + t * args.conv_stride[last - 1]) \
            * args.y_strides[1 + last]
    return True


cdef void scatter_row(const GemmArgs* args, const Py_ssize_t* phase, Py_ssize_t image,
                      Py_ssize_t channel, const Py_ssize_t* lead, TileSpan tile,
                      const acc_t* source, Py_ssize_t row_stride, Py_ssize_t t_begin,
                      Py_ssize_t t_end) noexcept nogil:
    """Store one product row (one phase, one channel): outputs residue + t * stride
    of the last axis for t in [t_begin, t_end), every grid row of the tile."""
    cdef int last = args.ndim - 1
    cdef int kind = args.kind
    cdef Py_ssize_t base, offset, r
    cdef Py_ssize_t shift = phase[3 * last + 1]
    cdef Py_ssize_t step = args.y_strides[2 + last]
    cdef acc_t bias
    if t_end <= t_begin or not output_base(args, phase, image, channel, lead, &base):
        return
    bias = bias_of(args.bias, channel, kind, source)
    base = base + (phase[3 * last] + t_begin * args.conv_stride[last]) * step
    source = source + (t_begin + shift - tile.x)
    for r in range(tile.rows):
        offset = base
        if row_offset(args, phase, tile.y + r, &offset):
            store_run(<char*>element(args.y, offset, kind), args.conv_stride[last] * step,
                      source + r * row_stride, t_end - t_begin, bias, kind)


cdef inline Py_ssize_t phase_t_begin(const Py_ssize_t* phase, int last, TileSpan tile) noexcept nogil:
    return max(tile.x, phase[3 * last + 1]) - phase[3 * last + 1]


cdef inline Py_ssize_t phase_t_end(const Py_ssize_t* phase, int last, TileSpan tile) noexcept nogil:
    return min(tile.x + tile.cols, phase[3 * last + 1] + phase[3 * last + 2]) - phase[3 * last + 1]


cdef void store_interleaved(const GemmArgs* args, Py_ssize_t offset, const acc_t** rows,
                            Py_ssize_t stride, Py_ssize_t count, acc_t bias) noexcept nogil:
    """y[offset + (t * stride + q) * step] = rows[q][t] + bias, for t < count and q < stride:
    the residues of one output row, written front to back (stride 2: whole vectors)."""
    cdef int kind = args.kind
    cdef Py_ssize_t step = args.y_strides[1 + args.ndim]
    cdef Py_ssize_t done, chunk, t, q
    cdef acc_t merged[64]
    if stride == 2 and step == 1 and kind != STORAGE_F16:
        # float32 storage accumulates in float, float64 in double
        if acc_t is float:
            args.interleave_f32(<float*>element(args.y, offset, kind), rows[0], rows[1], count,
                                bias)
        else:
            args.interleave_f64(<double*>element(args.y, offset, kind), rows[0], rows[1], count,
                                bias)
        return
    # interleave a chunk of whole output groups, then store it as one run
    done = 0
    while done < count:
        chunk = min(count - done, 64 // stride)
        for t in range(chunk):
            for q in range(stride):
                merged[t * stride + q] = rows[q][done + t]
        store_run(<char*>element(args.y, offset + done * stride * step, kind), step,
                  merged, chunk * stride, bias, kind)
        done = done + chunk


cdef void scatter_siblings(const GemmArgs* args, const Py_ssize_t* info, const Py_ssize_t* first,
                           Py_ssize_t image, Py_ssize_t channel, const Py_ssize_t* lead,
                           TileSpan tile, const acc_t* source, Py_ssize_t product_stride) noexcept nogil:
    """Store the rows of every residue of the last axis together, so each output row
    is written front to back once (stride 2: whole vectors) instead of by one
    strided pass per residue.  Outputs not shared by all residues (the edges) go
    through scatter_row."""
    cdef int last = args.ndim - 1
    cdef int kind = args.kind
    cdef Py_ssize_t stride = args.conv_stride[last]
    cdef Py_ssize_t row_stride = info[STACK_ROW_STRIDE]
    cdef Py_ssize_t step = args.y_strides[2 + last]
    cdef Py_ssize_t t_begin = 0
    cdef Py_ssize_t t_end = tile.x + tile.cols  # any upper bound
    cdef Py_ssize_t q, r, base, offset, count
    cdef const Py_ssize_t* phase
    cdef const acc_t* rows[16]
    cdef const acc_t* at[16]
    cdef acc_t bias = bias_of(args.bias, channel, kind, source)
    for q in range(stride):
        phase = first + q * args.ndim * 3
        t_begin = max(t_begin, phase_t_begin(phase, last, tile))
        t_end = min(t_end, phase_t_end(phase, last, tile))
    for q in range(stride):
        phase = first + q * args.ndim * 3
        # this residue's outputs outside the shared range
        scatter_row(args, phase, image, channel, lead, tile, source + q * product_stride,
                    row_stride, phase_t_begin(phase, last, tile), min(t_begin, phase_t_end(phase, last, tile)))
        scatter_row(args, phase, image, channel, lead, tile, source + q * product_stride,
                    row_stride, max(t_end, phase_t_begin(phase, last, tile)), phase_t_end(phase, last, tile))
        rows[q] = source + q * product_stride + (t_begin + phase[3 * last + 1] - tile.x)
    count = t_end - t_begin
    if count <= 0 or not output_base(args, first, image, channel, lead, &base):
        return
    base = base + stride * t_begin * step   # residues are 0 .. stride - 1, in row order
    for r in range(tile.rows):
        offset = base
        if not row_offset(args, first, tile.y + r, &offset):
            continue
        for q in range(stride):
            at[q] = rows[q] + r * row_stride
        store_interleaved(args, offset, at, stride, count, bias)


cdef void scatter_pair(const GemmArgs* args, const Py_ssize_t* info, const Py_ssize_t* other,
                       Py_ssize_t image, Py_ssize_t group, const Py_ssize_t* lead,
                       TileSpan tile, TileSpan other_tile, const acc_t* product,
                       const acc_t* other_product) noexcept nogil:
    """Write the products of a residue pair (see convt._plan._residue_pairs): the
    outputs both residues have in a row are interleaved, as scatter_siblings does
    for stacked residues; the others go through scatter_row."""
    cdef int ndim = args.ndim
    cdef int last = ndim - 1
    cdef const Py_ssize_t* even_phases = args.phases + info[STACK_PHASE_ROWS] * ndim * 3
    cdef const Py_ssize_t* odd_phases = args.phases + other[STACK_PHASE_ROWS] * ndim * 3
    cdef Py_ssize_t even_stride = info[STACK_ROW_STRIDE]
    cdef Py_ssize_t odd_stride = other[STACK_ROW_STRIDE]
    cdef Py_ssize_t step = args.y_strides[2 + last]
    cdef Py_ssize_t row, rho, m, channel, base, offset, r
    cdef Py_ssize_t even_begin, even_end, odd_begin, odd_end, t_begin, t_end
    cdef const Py_ssize_t* even
    cdef const Py_ssize_t* odd
    cdef const acc_t* even_rows
    cdef const acc_t* odd_rows
    cdef const acc_t* at[2]
    cdef acc_t bias
    for row in range(tile.first_row, tile.end_row):
        rho = row_phase(row, args.mg, 1, &m)
        even = even_phases + rho * ndim * 3
        odd = odd_phases + rho * ndim * 3
        channel = group * args.mg + m
        even_rows = product + (row - tile.first_row) * info[STACK_COLUMNS]
        odd_rows = other_product + (row - tile.first_row) * other[STACK_COLUMNS]
        even_begin = phase_t_begin(even, last, tile)
        even_end = phase_t_end(even, last, tile)
        odd_begin = phase_t_begin(odd, last, other_tile)
        odd_end = phase_t_end(odd, last, other_tile)
        t_begin = max(even_begin, odd_begin)
        t_end = max(t_begin, min(even_end, odd_end))
        # outputs of one residue only (the ends of rows)
        scatter_row(args, even, image, channel, lead, tile, even_rows, even_stride, even_begin,
                    min(t_begin, even_end))
        scatter_row(args, even, image, channel, lead, tile, even_rows, even_stride,
                    max(t_end, even_begin), even_end)
        scatter_row(args, odd, image, channel, lead, other_tile, odd_rows, odd_stride, odd_begin,
                    min(t_begin, odd_end))
        scatter_row(args, odd, image, channel, lead, other_tile, odd_rows, odd_stride,
                    max(t_end, odd_begin), odd_end)
        if t_end == t_begin or not output_base(args, even, image, channel, lead, &base):
            continue
        bias = bias_of(args.bias, channel, args.kind, even_rows)
        base = base + 2 * t_begin * step   # residue 0, then 1
        for r in range(tile.rows):
            offset = base
            if not row_offset(args, even, tile.y + r, &offset):
                continue
            at[0] = even_rows + r * even_stride + (t_begin + even[3 * last + 1] - tile.x)
            at[1] = odd_rows + r * odd_stride + (t_begin + odd[3 * last + 1] - other_tile.x)
            store_interleaved(args, offset, at, 2, t_end - t_begin, bias)


cdef void scatter_tile(const GemmArgs* args, const Py_ssize_t* info,
                       const Py_ssize_t* axes, Py_ssize_t image, Py_ssize_t group,
                       const Py_ssize_t* lead, TileSpan tile, const acc_t* product,
                       Py_ssize_t product_stride) noexcept nogil:
    """Write the item's product rows to their output positions.

    Product column ``r * STACK_ROW_STRIDE + (u - tile.x)`` holds grid position
    (lead, tile.y + r, u); position u is output ``residue + (u - shift) * stride``
    of a phase when ``0 <= u - shift < count``.
    """
    cdef int ndim = args.ndim
    cdef int last = ndim - 1
    cdef const Py_ssize_t* phases = args.phases + info[STACK_PHASE_ROWS] * ndim * 3
    cdef const Py_ssize_t* phase
    cdef Py_ssize_t siblings = info[STACK_SIBLINGS]
    cdef Py_ssize_t row = tile.first_row
    cdef Py_ssize_t rho, m
    cdef const acc_t* source
    while row < tile.end_row:
        rho = row_phase(row, args.mg, siblings, &m)
        phase = phases + rho * ndim * 3
        source = product + (row - tile.first_row) * product_stride
        if info[STACK_INTERLEAVE] and row % siblings == 0 and row + siblings <= tile.end_row:
            scatter_siblings(args, info, phase, image, group * args.mg + m, lead, tile, source,
                             product_stride)
            row = row + siblings
        else:
            scatter_row(args, phase, image, group * args.mg + m, lead, tile, source,
                        info[STACK_ROW_STRIDE], phase_t_begin(phase, last, tile),
                        phase_t_end(phase, last, tile))
            row = row + 1


cdef inline void micro_kernel(const GemmArgs* args, bint half, Py_ssize_t kernel,
                              Py_ssize_t width, Py_ssize_t depth, Py_ssize_t block,
                              const acc_t* a, const acc_t* b, const Py_ssize_t* offsets,
                              acc_t* c, Py_ssize_t ldc, bint accumulate,
                              acc_t* pack_to) noexcept nogil:
    """One call of micro-kernel ``kernel`` ([pack][rows - 1]) of the accumulation type,
    or of the half-width kernel of ``width`` rows (a last panel of <= NR / 2 positions)."""
    cdef convt_kernel_f32 kernel_f32
    cdef convt_kernel_f64 kernel_f64
    if acc_t is float:
        kernel_f32 = args.half_f32[width - 1] if half else args.kernel_f32[kernel]
        kernel_f32(depth, block, <int>width, a, b, offsets, c, ldc, accumulate, pack_to)
    else:
        kernel_f64 = args.half_f64[width - 1] if half else args.kernel_f64[kernel]
        kernel_f64(depth, block, <int>width, a, b, offsets, c, ldc, accumulate, pack_to)


cdef inline void pair_kernel(const GemmArgs* args, Py_ssize_t kernel, Py_ssize_t depth,
                             Py_ssize_t block, const acc_t* a, const acc_t* b,
                             const Py_ssize_t* offsets, Py_ssize_t sibling, acc_t* c,
                             Py_ssize_t ldc, bint accumulate) noexcept nogil:
    """One pair-kernel call ([half][rows / 2 - 1]) into the product."""
    if acc_t is float:
        args.pair_f32[kernel](depth, block, a, b, offsets, sibling, c, ldc, accumulate)
    else:
        args.pair_f64[kernel](depth, block, a, b, offsets, sibling, c, ldc, accumulate)


cdef inline void store_kernel(const GemmArgs* args, Py_ssize_t kernel, Py_ssize_t depth,
                              Py_ssize_t block, const acc_t* a, const acc_t* b,
                              const Py_ssize_t* offsets, Py_ssize_t sibling, char* y,
                              bint accumulate, const acc_t* bias) noexcept nogil:
    """One storing pair-kernel call ([half][rows / 2 - 1]) into y, of y's storage type."""
    if acc_t is double:
        args.store_f64[kernel](depth, block, a, b, offsets, sibling, <double*>y,
                               args.y_strides[1], accumulate, bias)
    elif args.kind == STORAGE_F32:
        args.store_f32[kernel](depth, block, a, b, offsets, sibling, <float*>y,
                               args.y_strides[1], accumulate, bias)
    else:
        args.store_f16[kernel](depth, block, a, b, offsets, sibling, <uint16_t*>y,
                               args.y_strides[1], accumulate, bias)


cdef void multiply_tile(const GemmArgs* args, const Py_ssize_t* info, const acc_t* weights,
                        Py_ssize_t depth, Py_ssize_t k_begin, Py_ssize_t k_depth,
                        acc_t* operand, Py_ssize_t ld_operand, Py_ssize_t used, TileSpan tile,
                        acc_t* product, Py_ssize_t product_stride, bint accumulate,
                        acc_t* panel_buffer) noexcept nogil:
    """product[item rows, :used] (+)= weights[item rows, k_begin:k_begin + k_depth] @ operand.

    Weights are packed by row block, [block][depth][rows of the block] (see
    block_start).  With enough row blocks to
    share it, the first block's kernel also copies the panel's B rows into
    contiguous aligned rows that the other blocks read (the kernel is ~10%
    faster than on rows straddling cache lines).
    """
    cdef Py_ssize_t rows = info[STACK_ROWS]
    cdef Py_ssize_t panel = info[STACK_PANEL]
    cdef Py_ssize_t panels = (used + panel - 1) // panel
    cdef const Py_ssize_t* offsets = args.buffer_offsets + info[STACK_BUFFER_OFFSETS]
    cdef bint pack = tile.end_block - tile.first_block >= PACK_MIN_BLOCKS and (
        args.kernel_f32[CONVT_MAX_MR] != NULL)  # backends that read B in place do not pack
    # about 2 sqrt(depth), the error-optimal block, in steps cheap for the kernel
    cdef Py_ssize_t sum_block = 32 if depth <= 256 else 64
    cdef Py_ssize_t block, row, p, width, kernel
    cdef const acc_t* b
    cdef const Py_ssize_t* b_offsets
    cdef acc_t* pack_to
    cdef bint half
    if args.backend == CONVT_BACKEND_BLAS:
        # weights are one (rows x depth) column-major block, operand (used x k) col-major
        blas_gemm(<int>used, <int>rows, <int>k_depth, operand, <int>ld_operand,
                  <acc_t*>weights + k_begin * rows, <int>rows,
                  1 if accumulate else 0, product, <int>product_stride)
        return
    if tile.end_block - tile.first_block == 1:
        # one block (few rows, shallow reductions): thousands of short calls per tile
        row = block_start(args.block_starts, info, tile.first_block)
        width = block_start(args.block_starts, info, tile.first_block + 1) - row
        weights = weights + row * depth + k_begin * width
        product = product + (row - tile.first_row) * product_stride
        half = 2 * (used - (panels - 1) * panel) <= panel and args.half_f32[0] != NULL
        for p in range(panels):
            micro_kernel(args, half and p == panels - 1, width - 1, width, k_depth, sum_block,
                         weights, operand + p * panel, offsets, product + p * panel,
                         product_stride, accumulate, <acc_t*>NULL)
        return
    for p in range(panels):
        b = operand + p * panel
        b_offsets = offsets
        # a last panel of at most NR / 2 positions: a half-width kernel where there is one
        half = 2 * (used - p * panel) <= panel and args.half_f32[0] != NULL
        pack_to = panel_buffer if pack and not half else NULL
        for block in range(tile.first_block, tile.end_block):
            row = block_start(args.block_starts, info, block)
            width = block_start(args.block_starts, info, block + 1) - row
            kernel = (CONVT_MAX_MR if pack_to != NULL else 0) + width - 1
            # blocked summation (see _microkernels.h): measured below PyTorch's
            # float32 error on every benchmark
            micro_kernel(args, half, kernel, width, k_depth, sum_block,
                         weights + row * depth + k_begin * width, b, b_offsets,
                         product + (row - tile.first_row) * product_stride + p * panel,
                         product_stride, accumulate, pack_to)
            if pack_to != NULL:
                # the remaining blocks read the packed copy
                b = panel_buffer
                b_offsets = args.panel_offsets
                pack_to = NULL


cdef inline bint store_exact(const GemmArgs* args, const Py_ssize_t* info) noexcept nogil:
    """Whether an exact stack's kernels store into y (no product buffer, no scatter)."""
    return info[STACK_EXACT] and args.store_exact and (
        args.kind != STORAGE_F16 or info[STACK_CHUNK] >= args.cg)


cdef void multiply_exact(const GemmArgs* args, const Py_ssize_t* info, const acc_t* weights,
                         Py_ssize_t depth, Py_ssize_t k_begin, Py_ssize_t k_depth,
                         const acc_t* operand, const Py_ssize_t* lead, TileSpan tile,
                         Py_ssize_t image, Py_ssize_t group, acc_t* product,
                         Py_ssize_t product_stride, bint accumulate) noexcept nogil:
    """multiply_tile for an exact stack (see convt._plan._exact_pairs).

    Each block is whole pairs of last-axis phases of one leading phase; for each
    grid row the block has outputs on, its panels cover the pair's positions
    t = 0 .. count - 1 exactly: the even phase at grid position t + shift, the
    odd one a `sibling` further.  With args.store_exact the pair kernels write
    the interleaved outputs into y (plus bias, or added to y after the first
    K chunk); else they fill the same product columns as multiply_tile.
    """
    cdef int ndim = args.ndim
    cdef int last = ndim - 1
    cdef const Py_ssize_t* phases = args.phases + info[STACK_PHASE_ROWS] * ndim * 3
    cdef const Py_ssize_t* offsets = args.buffer_offsets + info[STACK_BUFFER_OFFSETS]
    cdef Py_ssize_t panel = info[STACK_PANEL]
    cdef Py_ssize_t row_stride = info[STACK_ROW_STRIDE]
    cdef Py_ssize_t sum_block = 32 if depth <= 256 else 64
    # the pair's even phase: the same last-axis shift and count in every block
    cdef Py_ssize_t shift = phases[3 * last + 1]
    cdef Py_ssize_t sibling = phases[3 * ndim + 3 * last + 1] - shift
    cdef Py_ssize_t count = phases[3 * last + 2]
    cdef Py_ssize_t r, t, block, row, width, column, kernel, m, base
    cdef const Py_ssize_t* phase
    cdef const acc_t* a
    cdef char* y
    cdef const acc_t* bias
    cdef Py_ssize_t y_item = 2 << args.kind  # bytes per output
    # float16 outputs are rounded once: straight stores only with a single K chunk
    cdef bint store = store_exact(args, info)
    for r in range(tile.rows):
        column = r * row_stride + shift - tile.x
        for block in range(tile.first_block, tile.end_block):
            # the block's weights stay in cache for all its panels along the row
            row = block_start(args.block_starts, info, block)
            phase = phases + row_phase(row, args.mg, 2, &m) * ndim * 3
            # grid rows and leading coordinates outside this leading phase have no outputs
            if not (output_base(args, phase, image, group * args.mg + m, lead, &base)
                    and row_offset(args, phase, tile.y + r, &base)):
                continue
            width = block_start(args.block_starts, info, block + 1) - row
            a = weights + row * depth + k_begin * width
            y = <char*>element(args.y, base + phase[3 * last], args.kind)
            bias = (<const acc_t*>args.bias_acc + group * args.mg + m
                    if args.bias_acc != NULL else NULL)
            t = 0
            while t < count:
                kernel = (6 if 2 * (count - t) <= panel else 0) + width // 2 - 1
                if store:
                    store_kernel(args, kernel, k_depth, sum_block, a, operand + column + t,
                                 offsets, sibling, y + 2 * t * y_item, accumulate, bias)
                else:
                    pair_kernel(args, kernel, k_depth, sum_block, a, operand + column + t,
                                offsets, sibling,
                                product + (row - tile.first_row) * product_stride + column + t,
                                product_stride, accumulate)
                t = t + panel


cdef void multiply_stack(const GemmArgs* args, const Py_ssize_t* info, const Py_ssize_t* axes,
                         const acc_t* packed, Py_ssize_t image, Py_ssize_t group,
                         Py_ssize_t* lead, TileSpan tile, acc_t* operand,
                         acc_t* product, acc_t* panel_buffer) noexcept nogil:
    """The product of one tile of one stack, K chunk by K chunk: gather, multiply.
    (The BLAS backend's im2col sets lead[ndim - 2] as scratch; nothing reads it after.)"""
    cdef int last = args.ndim - 1
    cdef Py_ssize_t taps = info[STACK_TAPS]
    cdef Py_ssize_t product_stride = info[STACK_COLUMNS]
    cdef Py_ssize_t used = (tile.rows - 1) * info[STACK_ROW_STRIDE] + tile.cols
    cdef Py_ssize_t depth = args.cg * taps
    cdef Py_ssize_t chunk = info[STACK_CHUNK]
    cdef const acc_t* weights = packed + info[STACK_WEIGHTS] + group * info[STACK_GROUP_SIZE]
    cdef const char* x_image = element(
        args.x, image * args.x_strides[0] + group * args.cg * args.x_strides[1], args.kind)
    cdef acc_t* source
    cdef Py_ssize_t c_begin, c_end, ld_operand, start
    cdef int a
    c_begin = 0
    while c_begin < args.cg:
        c_end = min(args.cg, c_begin + chunk)
        ld_operand = product_stride
        source = operand
        if args.backend != CONVT_BACKEND_BLAS:
            fill_buffer(args, info, axes, x_image, c_begin, c_end, lead, tile, operand)
        elif info[STACK_IDENTITY] and args.input_is_tile:
            # the im2col of a 1-tap, 0-offset stack is x itself
            start = c_begin * args.x_strides[1] + tile.x * args.x_strides[2 + last]
            if last >= 1:
                start = start + tile.y * args.x_strides[1 + last]
            for a in range(last - 1):
                start = start + lead[a] * args.x_strides[2 + a]
            source = <acc_t*>element(x_image, start, args.kind)
            ld_operand = args.x_strides[1]
        else:
            gather_tile(args, info, axes, x_image, c_begin, c_end, lead, tile, operand)
        if info[STACK_EXACT]:
            multiply_exact(args, info, weights, depth, c_begin * taps, (c_end - c_begin) * taps,
                           source, lead, tile, image, group, product, product_stride,
                           c_begin > 0)
        else:
            multiply_tile(args, info, weights, depth, c_begin * taps, (c_end - c_begin) * taps,
                          source, ld_operand, used, tile, product, product_stride, c_begin > 0,
                          panel_buffer)
        c_begin = c_end


cdef void gemm_item(const GemmArgs* args, const acc_t* packed, Py_ssize_t item,
                    acc_t* workspace, Py_ssize_t* lead) noexcept nogil:
    """One tile of one stack (and of its residue partner) for one image and group."""
    cdef const Py_ssize_t* work = args.items + 4 * item
    cdef Py_ssize_t image = work[0]
    cdef Py_ssize_t group = work[1]
    cdef const Py_ssize_t* info = args.stacks + work[2] * STACK_FIELDS
    cdef const Py_ssize_t* axes = args.stack_axes + work[2] * args.ndim * 3
    cdef TileSpan tile = decode_tile(args, info, axes, work[3], lead)
    cdef acc_t* operand = workspace
    cdef acc_t* product = workspace + args.operand_capacity
    # B panels are copied to a 64-byte aligned place after the product
    cdef acc_t* panel_buffer = <acc_t*>((<size_t>(product + args.product_capacity) + 63)
                                        & ~(<size_t>63))
    cdef const Py_ssize_t* other
    cdef const Py_ssize_t* other_axes
    cdef TileSpan other_tile
    cdef acc_t* other_product
    multiply_stack(args, info, axes, packed, image, group, lead, tile, operand, product,
                   panel_buffer)
    if info[STACK_PARTNER] >= 0:
        # the odd residue: same rows and blocks, its own columns; its product follows
        other = args.stacks + info[STACK_PARTNER] * STACK_FIELDS
        other_axes = args.stack_axes + info[STACK_PARTNER] * args.ndim * 3
        other_tile = decode_tile(args, other, other_axes, work[3], lead)
        other_product = product + (tile.end_row - tile.first_row) * info[STACK_COLUMNS]
        multiply_stack(args, other, other_axes, packed, image, group, lead, other_tile,
                       operand, other_product, panel_buffer)
        scatter_pair(args, info, other, image, group, lead, tile, other_tile, product,
                     other_product)
    elif not store_exact(args, info):
        scatter_tile(args, info, axes, image, group, lead, tile, product, info[STACK_COLUMNS])


cdef void gemm_engine(const GemmArgs* args, const acc_t* packed, Py_ssize_t n_items,
                      acc_t* workspace, Py_ssize_t workspace_stride,
                      Py_ssize_t* scratch, int num_threads) noexcept nogil:
    cdef Py_ssize_t item
    cdef int thread
    for item in prange(n_items, num_threads=num_threads, schedule="dynamic"):
        thread = convt_thread_num()
        gemm_item(args, packed, item, workspace + thread * workspace_stride,
                  scratch + thread * args.ndim)


cdef inline const Py_ssize_t* intp_data(cnp.ndarray array):
    return <const Py_ssize_t*>cnp.PyArray_DATA(array)


cdef inline const char* optional_data(object array):
    if array is None:
        return NULL
    return <const char*>cnp.PyArray_DATA(<cnp.ndarray>array)


def preferred_backend():
    """The fastest GEMM backend this machine can run (measured choices, see the header)."""
    if convt_backend_available(CONVT_BACKEND_AVX512):
        return "avx512"
    if convt_backend_available(CONVT_BACKEND_AVX2):
        return "avx2"
    return "blas"


def available_backends():
    """Names of the GEMM backends this machine can run, best last."""
    names = {CONVT_BACKEND_BLAS: "blas", CONVT_BACKEND_PORTABLE: "portable",
             CONVT_BACKEND_AVX2: "avx2", CONVT_BACKEND_AVX512: "avx512"}
    return [names[b] for b in range(CONVT_BACKEND_COUNT) if convt_backend_available(b)]


def backend_shape(str backend, bint is_double):
    """(backend id, rows per micro-kernel block, positions per panel); 0 means 'all'."""
    ids = {"blas": CONVT_BACKEND_BLAS, "portable": CONVT_BACKEND_PORTABLE,
           "avx2": CONVT_BACKEND_AVX2, "avx512": CONVT_BACKEND_AVX512}
    cdef int identifier = ids[backend]
    if not convt_backend_available(identifier):
        raise ValueError(f"GEMM backend {backend!r} cannot run on this machine")
    if identifier == CONVT_BACKEND_BLAS:
        return identifier, 0, 0
    return identifier, convt_backend_mr(identifier), convt_backend_nr(identifier, is_double)


def run_gemm(cnp.ndarray x, cnp.ndarray y, object bias, int kind, int backend,
             cnp.ndarray x_strides, cnp.ndarray y_strides, cnp.ndarray in_size,
             cnp.ndarray conv_stride, Py_ssize_t cg, Py_ssize_t mg,
             cnp.ndarray stacks, cnp.ndarray stack_axes, cnp.ndarray tap_offsets,
             cnp.ndarray buffer_offsets, cnp.ndarray phases, cnp.ndarray items,
             cnp.ndarray packed, cnp.ndarray workspace, cnp.ndarray scratch,
             Py_ssize_t operand_capacity, Py_ssize_t product_capacity,
             cnp.ndarray panel_offsets, cnp.ndarray block_starts, bint input_is_tile,
             object bias_acc, int num_threads):
    """Run the GEMM engine; arrays come from convt._plan (intp tables, C order).

    ``workspace`` is (threads, per-thread elements) of the accumulation dtype,
    ``scratch`` is (threads, ndim) intp; ``packed`` holds the packed weights.
    """
    cdef GemmArgs args
    args.ndim = <int>in_size.shape[0]
    args.kind = kind
    args.backend = backend
    cdef int rows, pack
    for pack in range(2):
        for rows in range(1, CONVT_MAX_MR + 1):
            args.kernel_f32[pack * CONVT_MAX_MR + rows - 1] = convt_backend_f32(backend, rows, pack)
            args.kernel_f64[pack * CONVT_MAX_MR + rows - 1] = convt_backend_f64(backend, rows, pack)
    for rows in range(1, CONVT_MAX_MR + 1):
        args.half_f32[rows - 1] = convt_backend_half_f32(backend, rows)
        args.half_f64[rows - 1] = convt_backend_half_f64(backend, rows)
    for pack in range(2):  # here: half-width or not
        for rows in range(2, CONVT_MAX_MR + 1, 2):
            args.pair_f32[pack * 6 + rows // 2 - 1] = convt_backend_pair_f32(backend, rows, pack)
            args.pair_f64[pack * 6 + rows // 2 - 1] = convt_backend_pair_f64(backend, rows, pack)
            args.store_f32[pack * 6 + rows // 2 - 1] = convt_backend_pair_store_f32(
                backend, rows, pack)
            args.store_f64[pack * 6 + rows // 2 - 1] = convt_backend_pair_store_f64(
                backend, rows, pack)
            args.store_f16[pack * 6 + rows // 2 - 1] = convt_backend_pair_store_f16(
                backend, rows, pack)
    args.x = <const char*>cnp.PyArray_DATA(x)
    args.y = <char*>cnp.PyArray_DATA(y)
    args.bias = optional_data(bias)
    args.x_strides = intp_data(x_strides)
    args.y_strides = intp_data(y_strides)
    args.in_size = intp_data(in_size)
    args.conv_stride = intp_data(conv_stride)
    args.cg = cg
    args.mg = mg
    args.stacks = intp_data(stacks)
    args.stack_axes = intp_data(stack_axes)
    args.tap_offsets = intp_data(tap_offsets)
    args.buffer_offsets = intp_data(buffer_offsets)
    args.phases = intp_data(phases)
    args.items = intp_data(items)
    args.operand_capacity = operand_capacity
    args.product_capacity = product_capacity
    args.interleave_f32 = convt_interleave_for_f32(backend)
    args.interleave_f64 = convt_interleave_for_f64(backend)
    args.panel_offsets = intp_data(panel_offsets)
    args.block_starts = intp_data(block_starts)
    args.store_exact = args.store_f32[0] != NULL and y_strides[y_strides.shape[0] - 1] == 1
    args.bias_acc = optional_data(bias_acc)
    args.input_is_tile = input_is_tile
    cdef Py_ssize_t n_items = items.shape[0]
    cdef Py_ssize_t stride = workspace.shape[1]
    cdef Py_ssize_t* lead = <Py_ssize_t*>cnp.PyArray_DATA(scratch)
    if packed.dtype.itemsize == 4:
        with nogil:
            gemm_engine(&args, <const float*>cnp.PyArray_DATA(packed), n_items,
                        <float*>cnp.PyArray_DATA(workspace), stride, lead, num_threads)
    else:
        with nogil:
            gemm_engine(&args, <const double*>cnp.PyArray_DATA(packed), n_items,
                        <double*>cnp.PyArray_DATA(workspace), stride, lead, num_threads)


cdef inline void gather_elements(acc_t* dst, Py_ssize_t step, const char* src,
                                 const Py_ssize_t* offsets, Py_ssize_t count,
                                 int kind) noexcept nogil:
    """dst[i * step] = src[offsets[i]] converted to the accumulation type."""
    cdef Py_ssize_t i
    if kind == STORAGE_F16:
        for i in range(count):
            dst[i * step] = convt_half_to_float((<const uint16_t*>src)[offsets[i]])
    elif kind == STORAGE_F32:
        for i in range(count):
            dst[i * step] = <acc_t>(<const float*>src)[offsets[i]]
    else:
        for i in range(count):
            dst[i * step] = <acc_t>(<const double*>src)[offsets[i]]


cdef void tap_table(const Py_ssize_t* w_strides, int ndim, const Py_ssize_t* info,
                    const Py_ssize_t* stack_kernels, Py_ssize_t mg, Py_ssize_t* table) noexcept nogil:
    """table[j * rows + row] = offset in w[c] of the weight of product row ``row``, tap j."""
    cdef Py_ssize_t rows = info[STACK_ROWS]
    cdef Py_ssize_t taps = info[STACK_TAPS]
    cdef Py_ssize_t row, rho, m, j, t
    cdef int a
    cdef const Py_ssize_t* kernel
    for row in range(rows):
        rho = row_phase(row, mg, info[STACK_SIBLINGS], &m)
        for j in range(taps):
            kernel = stack_kernels + (rho * taps + j) * ndim
            t = m * w_strides[1]
            for a in range(ndim):
                t = t + kernel[a] * w_strides[2 + a]
            table[j * rows + row] = t


cdef void pack_input_channel(const char* w, int kind, const Py_ssize_t* w_strides,
                             acc_t* packed, const Py_ssize_t* info, const Py_ssize_t* starts,
                             const Py_ssize_t* table, Py_ssize_t g, Py_ssize_t c,
                             Py_ssize_t cg) noexcept nogil:
    """Pack every row's weights of input channel c of group g: w[g * cg + c] is one
    contiguous region, gathered into runs of a block's rows (see pack_weights_typed)."""
    cdef Py_ssize_t rows = info[STACK_ROWS]
    cdef Py_ssize_t taps = info[STACK_TAPS]
    cdef Py_ssize_t depth = cg * taps
    cdef const char* source = element(w, (g * cg + c) * w_strides[0], kind)
    cdef Py_ssize_t block, first, width, j
    cdef acc_t* destination
    for block in range(info[STACK_BLOCKS]):
        first = block_start(starts, info, block)
        width = block_start(starts, info, block + 1) - first
        destination = packed + info[STACK_WEIGHTS] + g * info[STACK_GROUP_SIZE] \
            + first * depth + c * taps * width
        for j in range(taps):
            gather_elements(destination + j * width, 1, source, table + j * rows + first,
                            width, kind)


cdef inline Py_ssize_t table_offset(const Py_ssize_t* stacks, Py_ssize_t stack) noexcept nogil:
    """Start of a stack's tap table: the rows x taps of the stacks before it."""
    cdef Py_ssize_t s
    cdef Py_ssize_t start = 0
    for s in range(stack):
        start = start + stacks[s * STACK_FIELDS + STACK_ROWS] * stacks[s * STACK_FIELDS + STACK_TAPS]
    return start


cdef void pack_weights_typed(const char* w, int kind, const Py_ssize_t* w_strides, int ndim,
                             acc_t* packed, const Py_ssize_t* stacks, Py_ssize_t stack_count,
                             const Py_ssize_t* kernel_index, const Py_ssize_t* starts,
                             Py_ssize_t* tables, Py_ssize_t groups, Py_ssize_t cg,
                             Py_ssize_t mg, int num_threads) noexcept nogil:
    """Pack the weights of every stack and group: rows r = (phase, m) by row block
    (see block_start, row_phase), [block][(c, j)][r in block], with
    w[g * cg + c, m, k(phase, j)].

    ``kernel_index`` holds, stack after stack, the ndim kernel coordinates of
    tap j of stacked phase rho at row rho * taps + j; ``tables`` has room for
    every stack's rows x taps (tap_table).  One task per stack, group and input
    channel: it reads that channel's weights, one contiguous region, and writes
    runs of whole row blocks.
    """
    cdef Py_ssize_t total = 0
    cdef Py_ssize_t kernel_start = 0
    cdef Py_ssize_t table_start = 0
    cdef Py_ssize_t s, task, local
    cdef const Py_ssize_t* info
    for s in range(stack_count):
        info = stacks + s * STACK_FIELDS
        tap_table(w_strides, ndim, info, kernel_index + kernel_start * ndim, mg,
                  tables + table_start)
        kernel_start = kernel_start + info[STACK_PHASES] * info[STACK_TAPS]
        table_start = table_start + info[STACK_ROWS] * info[STACK_TAPS]
    total = stack_count * groups * cg
    for task in prange(total, num_threads=num_threads, schedule="static"):
        s = task // (groups * cg)
        local = task % (groups * cg)
        pack_input_channel(w, kind, w_strides, packed, stacks + s * STACK_FIELDS, starts,
                           tables + table_offset(stacks, s), local // cg, local % cg, cg)


def pack_weights(cnp.ndarray w, int kind, cnp.ndarray w_strides, cnp.ndarray packed,
                 cnp.ndarray stacks, cnp.ndarray kernel_index, cnp.ndarray block_starts,
                 Py_ssize_t groups, Py_ssize_t cg, Py_ssize_t mg, int num_threads):
    """Pack the weights of every stack of a GEMM plan into ``packed`` (see pack_weights_typed)."""
    cdef const char* w_data = <const char*>cnp.PyArray_DATA(w)
    cdef const Py_ssize_t* strides = intp_data(w_strides)
    cdef const Py_ssize_t* table = intp_data(stacks)
    cdef const Py_ssize_t* index = intp_data(kernel_index)
    cdef const Py_ssize_t* starts = intp_data(block_starts)
    cdef Py_ssize_t stack_count = stacks.shape[0]
    cdef int ndim = <int>(w.ndim - 2)
    cdef cnp.ndarray tables = np.empty(
        max(1, int((stacks[:, STACK_ROWS] * stacks[:, STACK_TAPS]).sum())), dtype=np.intp)
    cdef Py_ssize_t* tables_data = <Py_ssize_t*>cnp.PyArray_DATA(tables)
    if packed.dtype.itemsize == 4:
        with nogil:
            pack_weights_typed(w_data, kind, strides, ndim, <float*>cnp.PyArray_DATA(packed),
                               table, stack_count, index, starts, tables_data, groups, cg,
                               mg, num_threads)
    else:
        with nogil:
            pack_weights_typed(w_data, kind, strides, ndim, <double*>cnp.PyArray_DATA(packed),
                               table, stack_count, index, starts, tables_data, groups, cg,
                               mg, num_threads)


# --------------------------------------------------------------------------
# Direct engine
# --------------------------------------------------------------------------

# Source rows (input channel x leading-axis taps) summed per phase-kernel call;
# bounds the per-thread buffers whatever the channel count or kernel size.
cdef enum:
    MAX_SOURCES = 16


cdef struct DirectArgs:
    int ndim
    int kind
    convt_phase_f32 phase_f32        # row-phase kernels of the chosen backend
    convt_phase_f64 phase_f64
    convt_interleave_f32 interleave_f32  # stride-2 stores of the chosen backend
    convt_interleave_f64 interleave_f64
    const char* x
    const char* w
    char* y
    const char* bias
    const Py_ssize_t* x_strides
    const Py_ssize_t* w_strides
    const Py_ssize_t* y_strides
    const Py_ssize_t* in_size
    const Py_ssize_t* out_size
    const Py_ssize_t* conv_stride
    Py_ssize_t cg
    Py_ssize_t mg
    Py_ssize_t m_total
    const Py_ssize_t* tap_count      # [ndim, max_stride]
    const Py_ssize_t* tap_kernel     # [ndim, max_stride, max_taps]
    const Py_ssize_t* tap_offset     # [ndim, max_stride, max_taps]
    Py_ssize_t max_stride
    Py_ssize_t max_taps
    Py_ssize_t phase_length          # row buffer length of one last-axis phase


cdef struct DirectScratch:
    # accumulation-type buffers (float or double, as the caller's acc_t)
    void* x_rows                     # [MAX_SOURCES][in_size[-1]]: converted input rows
    void* weights                    # [MAX_SOURCES][max_taps]: one phase's weights
    void** sources                   # [MAX_SOURCES] input rows of the batch
    Py_ssize_t* w_offsets            # [MAX_SOURCES] their kernel rows in w
    Py_ssize_t* out_index            # [ndim]
    Py_ssize_t* tap                  # [ndim]


cdef void flush_sources(const DirectArgs* args, const DirectScratch* scratch, acc_t* rows,
                        Py_ssize_t count, bint accumulate) noexcept nogil:
    """Add the batch of ``count`` source rows to every last-axis phase of ``rows``."""
    cdef int last = args.ndim - 1
    cdef acc_t* weights = <acc_t*>scratch.weights
    cdef const acc_t** sources = <const acc_t**>scratch.sources
    cdef Py_ssize_t stride = args.conv_stride[last]
    cdef Py_ssize_t out_size = args.out_size[last]
    cdef Py_ssize_t table, taps, residue, s, j
    for residue in range(min(stride, out_size)):
        table = (last * args.max_stride + residue) * args.max_taps
        taps = args.tap_count[last * args.max_stride + residue]
        for s in range(count):
            for j in range(taps):
                weights[s * taps + j] = <acc_t>load_double(
                    args.w, scratch.w_offsets[s] + args.tap_kernel[table + j] * args.w_strides[2 + last],
                    args.kind)
        if acc_t is float:
            args.phase_f32(count, sources, weights, taps, args.tap_offset + table,
                           args.in_size[last], (out_size - residue + stride - 1) // stride,
                           rows + residue * args.phase_length, accumulate)
        else:
            args.phase_f64(count, sources, weights, taps, args.tap_offset + table,
                           args.in_size[last], (out_size - residue + stride - 1) // stride,
                           rows + residue * args.phase_length, accumulate)


cdef void direct_row(const DirectArgs* args, Py_ssize_t row, const DirectScratch* scratch,
                     acc_t* rows) noexcept nogil:
    """Compute one output row y[n, m, o_0, ..., o_{last-1}, :].

    Every (input channel, leading-axis tap) pair whose input row exists is a
    source; sources are summed in batches by the row-phase kernels.
    """
    cdef int ndim = args.ndim
    cdef int last = ndim - 1
    cdef int kind = args.kind
    cdef Py_ssize_t* out_index = scratch.out_index
    cdef Py_ssize_t* tap = scratch.tap
    cdef acc_t* x_rows = <acc_t*>scratch.x_rows
    cdef const acc_t** sources = <const acc_t**>scratch.sources
    cdef Py_ssize_t remaining = row
    cdef Py_ssize_t image, m, group, m_local, c, channel, x_offset, w_offset, y_offset
    cdef Py_ssize_t residue, index, entry, count, batch
    cdef int a
    cdef bint skip, more, flushed
    cdef acc_t bias
    for a in range(last - 1, -1, -1):
        out_index[a] = remaining % args.out_size[a]
        remaining = remaining // args.out_size[a]
    m = remaining % args.m_total
    image = remaining // args.m_total
    group = m // args.mg
    m_local = m - group * args.mg
    skip = False
    for a in range(last):
        residue = out_index[a] % args.conv_stride[a]
        if args.tap_count[a * args.max_stride + residue] == 0:
            skip = True
        tap[a] = 0
    batch = 0
    flushed = False
    for c in range(args.cg if not skip else 0):
        channel = group * args.cg + c
        more = True
        while more:
            # one combination of leading-axis taps
            x_offset = image * args.x_strides[0] + channel * args.x_strides[1]
            w_offset = channel * args.w_strides[0] + m_local * args.w_strides[1]
            skip = False
            for a in range(last):
                residue = out_index[a] % args.conv_stride[a]
                entry = (a * args.max_stride + residue) * args.max_taps + tap[a]
                index = out_index[a] // args.conv_stride[a] + args.tap_offset[entry]
                if index < 0 or index >= args.in_size[a]:
                    skip = True
                    break
                x_offset = x_offset + index * args.x_strides[2 + a]
                w_offset = w_offset + args.tap_kernel[entry] * args.w_strides[2 + a]
            if not skip:
                if (acc_t is float and kind == STORAGE_F32 or acc_t is double and kind == STORAGE_F64) \
                        and args.x_strides[2 + last] == 1:
                    sources[batch] = <const acc_t*>element(args.x, x_offset, kind)
                else:
                    load_run(x_rows + batch * args.in_size[last], element(args.x, x_offset, kind),
                             args.x_strides[2 + last], args.in_size[last], kind)
                    sources[batch] = x_rows + batch * args.in_size[last]
                scratch.w_offsets[batch] = w_offset
                batch = batch + 1
                if batch == MAX_SOURCES:
                    flush_sources(args, scratch, rows, batch, flushed)
                    flushed = True
                    batch = 0
            # advance the odometer over leading taps
            more = False
            for a in range(last - 1, -1, -1):
                residue = out_index[a] % args.conv_stride[a]
                tap[a] = tap[a] + 1
                if tap[a] < args.tap_count[a * args.max_stride + residue]:
                    more = True
                    break
                tap[a] = 0
    if batch or not flushed:
        flush_sources(args, scratch, rows, batch, flushed)  # no sources at all: zeros
    y_offset = image * args.y_strides[0] + m * args.y_strides[1]
    for a in range(last):
        y_offset = y_offset + out_index[a] * args.y_strides[2 + a]
    bias = bias_of(args.bias, m, kind, rows)
    store_row(args, rows, y_offset, bias)


cdef void store_row(const DirectArgs* args, const acc_t* rows, Py_ssize_t y_offset,
                    acc_t bias) noexcept nogil:
    """y row = its last-axis phases + bias; stride 2 into a contiguous row interleaves
    the two phases with vector shuffles, anything else stores each phase strided."""
    cdef int last = args.ndim - 1
    cdef int kind = args.kind
    cdef Py_ssize_t stride = args.conv_stride[last]
    cdef Py_ssize_t out_size = args.out_size[last]
    cdef Py_ssize_t step = args.y_strides[2 + last]
    cdef Py_ssize_t residue, count, pairs = out_size // 2
    if stride == 2 and step == 1 and pairs > 0 and (
            acc_t is float and kind == STORAGE_F32 or acc_t is double and kind == STORAGE_F64):
        if acc_t is float:
            args.interleave_f32(<float*>element(args.y, y_offset, kind), rows,
                                rows + args.phase_length, pairs, bias)
        else:
            args.interleave_f64(<double*>element(args.y, y_offset, kind), rows,
                                rows + args.phase_length, pairs, bias)
        if out_size % 2:
            store_run(<char*>element(args.y, y_offset + 2 * pairs, kind), 1,
                      rows + pairs, 1, bias, kind)
        return
    for residue in range(min(stride, out_size)):
        count = (out_size - residue + stride - 1) // stride
        store_run(<char*>element(args.y, y_offset + residue * step, kind), stride * step,
                  rows + residue * args.phase_length, count, bias, kind)


cdef void direct_row_in(const DirectArgs* args, Py_ssize_t row, acc_t* workspace,
                        Py_ssize_t* ints) noexcept nogil:
    """direct_row with one thread's workspace laid out as DirectScratch."""
    cdef int last = args.ndim - 1
    cdef Py_ssize_t row_buffers = min(args.conv_stride[last], args.out_size[last]) * args.phase_length
    cdef DirectScratch scratch
    scratch.x_rows = workspace + row_buffers
    scratch.weights = workspace + row_buffers + MAX_SOURCES * args.in_size[last]
    scratch.out_index = ints
    scratch.tap = ints + args.ndim
    scratch.w_offsets = ints + 2 * args.ndim
    scratch.sources = <void**>(ints + 2 * args.ndim + MAX_SOURCES)
    direct_row(args, row, &scratch, workspace)


cdef void direct_engine(const DirectArgs* args, Py_ssize_t n_rows, acc_t* workspace,
                        Py_ssize_t workspace_stride, Py_ssize_t* ints,
                        Py_ssize_t ints_stride, int num_threads) noexcept nogil:
    cdef Py_ssize_t row
    cdef int thread
    for row in prange(n_rows, num_threads=num_threads, schedule="static"):
        thread = convt_thread_num()
        direct_row_in(args, row, workspace + thread * workspace_stride,
                      ints + thread * ints_stride)


def direct_workspace(Py_ssize_t row_buffers, Py_ssize_t in_size_last, Py_ssize_t max_taps,
                     Py_ssize_t ndim):
    """(accumulation elements, intp elements) of one thread's direct-engine scratch."""
    return (row_buffers + MAX_SOURCES * (in_size_last + max_taps),
            2 * ndim + 2 * MAX_SOURCES)


def run_direct(cnp.ndarray x, cnp.ndarray w, cnp.ndarray y, object bias, int kind,
               int backend, cnp.ndarray x_strides, cnp.ndarray w_strides,
               cnp.ndarray y_strides, cnp.ndarray in_size, cnp.ndarray out_size,
               cnp.ndarray conv_stride, Py_ssize_t cg, Py_ssize_t mg, Py_ssize_t m_total,
               cnp.ndarray tap_count, cnp.ndarray tap_kernel, cnp.ndarray tap_offset,
               Py_ssize_t phase_length, cnp.ndarray workspace, cnp.ndarray scratch,
               Py_ssize_t n_rows, int num_threads):
    """Run the direct engine over ``n_rows`` output rows (tables from convt._plan).

    ``workspace`` and ``scratch`` are (threads, sizes from direct_workspace) of
    the accumulation dtype and intp.
    """
    cdef DirectArgs args
    args.ndim = <int>in_size.shape[0]
    args.kind = kind
    args.phase_f32 = convt_direct_f32(backend)
    args.phase_f64 = convt_direct_f64(backend)
    args.interleave_f32 = convt_interleave_for_f32(backend)
    args.interleave_f64 = convt_interleave_for_f64(backend)
    args.x = <const char*>cnp.PyArray_DATA(x)
    args.w = <const char*>cnp.PyArray_DATA(w)
    args.y = <char*>cnp.PyArray_DATA(y)
    args.bias = optional_data(bias)
    args.x_strides = intp_data(x_strides)
    args.w_strides = intp_data(w_strides)
    args.y_strides = intp_data(y_strides)
    args.in_size = intp_data(in_size)
    args.out_size = intp_data(out_size)
    args.conv_stride = intp_data(conv_stride)
    args.cg = cg
    args.mg = mg
    args.m_total = m_total
    args.tap_count = intp_data(tap_count)
    args.tap_kernel = intp_data(tap_kernel)
    args.tap_offset = intp_data(tap_offset)
    args.max_stride = tap_count.shape[1]
    args.max_taps = tap_kernel.shape[2]
    args.phase_length = phase_length
    cdef Py_ssize_t stride = workspace.shape[1]
    cdef Py_ssize_t ints_stride = scratch.shape[1]
    cdef Py_ssize_t* ints = <Py_ssize_t*>cnp.PyArray_DATA(scratch)
    if workspace.dtype.itemsize == 4:
        with nogil:
            direct_engine(&args, n_rows, <float*>cnp.PyArray_DATA(workspace), stride,
                          ints, ints_stride, num_threads)
    else:
        with nogil:
            direct_engine(&args, n_rows, <double*>cnp.PyArray_DATA(workspace), stride,
                          ints, ints_stride, num_threads)
