/* Kernel sets: what the compiled drivers call, one record per (CPU family,
 * accumulation type).
 *
 * A set holds its register blocking (mr rows x nr positions), capability flags
 * and one function table per kernel family.  Drivers call through the tables
 * only; which families a call uses is decided in convt/_dispatch.py from the
 * flags, never inferred from NULL entries.  Every family has a plain scalar
 * reference in reference.c that defines its arithmetic (see below); the kernel
 * tests hold each set against it.
 *
 * Families (T is float in the f32 sets, double in the f64 sets):
 *
 * gemm[rows - 1]: one block of rows x nr of C = A B over `depth`:
 *     a: [depth][rows] (packed weights, the block's rows side by side);
 *     row k of B is b + offsets[k] .. + nr (positions of a zero-padded tile:
 *     tap k of every position is a fixed offset away, so B is read in place);
 *     c: rows of nr values, row stride ldc.
 *     Arithmetic, per output: the depth is cut into blocks of `block` steps;
 *     each block is summed from zero with fused multiply-adds in k order; the
 *     block sums are added in order to c's value (accumulate != 0) or to the
 *     first block sum.  Blocked summation keeps float32 errors growing with
 *     sqrt(block + depth / block) rather than sqrt(depth).
 * gemm_pack[rows - 1]: gemm that also copies the B rows it reads to pack_to
 *     ([depth][nr], 64-byte aligned), for the block's neighbours to read.
 * half[rows - 1]: gemm over nr / 2 positions (a tile's short last panel).
 * gemm_stream[rows - 1]: gemm for B rows read in place far apart (rows of a
 *     weight array, col2im): each step also hints the line of its B row
 *     CONVT_STREAM_AHEAD_BYTES further on (prefetch.h); same arithmetic.
 * pair[half][rows / 2 - 1]: gemm for an even number of rows where odd rows
 *     read B and write C `sibling` positions further (the two stride phases of
 *     a last axis, one grid shift apart); half: nr / 2 positions.
 * pair_store[storage][half][rows / 2 - 1]: pair, but row pair j's sums are the
 *     even and odd outputs of one channel: they are interleaved and stored as
 *     2 nr (or nr) contiguous outputs at y + j * ldy in the storage type:
 *     y = v + bias[j] (bias may be NULL), or y = y + v when `accumulate`,
 *     where v is the blocked sum from zero; rounded once.
 * pack_pair: copies a full panel's pair operands, b + offsets[k] .. + nr to
 *     to + k nr and b + offsets[k] + sibling .. + nr to to + (depth + k) nr,
 *     so that pair and pair_store read them with offsets k nr and sibling
 *     depth nr from L1, 64-byte aligned (sets flagged CONVT_SET_PACK_PAIRS).
 * row: the direct engine's row-phase sum,
 *     out[t] (+)= sum over sources s, then taps j, of w[s * taps + j] *
 *     x[s][t + offsets[j]] for t < count, where only taps whose input index
 *     is inside [0, in_size) contribute (fused multiply-adds in that order).
 * channels: the channels-last direct engine's pass (channels are the lanes),
 *     out[t * out_step + c] = fma(w[c], x[t * x_step + c], out[t * out_step + c])
 *     for t < count, c < channels: one (source, tap) added to a run of outputs.
 * interleave: y[2 i] = even[i] + bias, y[2 i + 1] = odd[i] + bias.
 * interleave_stream: the same, its whole cache lines (from the first line y
 *     reaches) stored past the caches (non-temporal stores), for outputs too
 *     large to stay cached: a line then costs its write, not its read for
 *     ownership too; the part of a line at either end goes through the caches
 *     (and the whole of a short row that starts inside a line: x86_avx2.c).
 *     Such stores are weakly ordered: the caller fences them
 *     (convt_store_fence, prefetch.h) before another thread reads y.  NULL
 *     unless the set is flagged CONVT_SET_STREAM_STORES.
 * store_even: y[2 i] = src[i] + bias (odd outputs untouched).
 * add_bias: dst[i] = src[i] + bias.
 * transpose: dst[c * dst_stride + r] = src[r * src_stride + c] + bias[r], or an
 *     exact copy when bias is NULL, for r < rows, c < cols: channels-last data
 *     to and from the engines' channel-major tiles and products (strides in
 *     elements).
 * stencil: the direct engine's band of output rows, sharing input rows
 *     (depthwise and single-channel layers): for r < shape->rows, t < count,
 *     out[r * out_stride + t] (+)= sum over kernel rows i, then taps j, of
 *     w[i * taps + j] * X(r + i, t + offsets[j]) (fused multiply-adds in that
 *     order, from zero or from out's value), where X(q, u) = x[q][u] inside
 *     [0, in_size) and 0 outside: zero padding, like the GEMM's tiles.
 *     Output row r reads input rows x[r] .. x[r + kernel_rows - 1], so a band
 *     of rows loads each input vector once for every output row it feeds.
 * gemm_t[vectors - 1][positions - 1]: gemm transposed, the weights as vectors
 *     and the positions broadcast: for i < vectors x (nr / 2) weight rows and
 *     j < positions, c[j * ldc + i] is the blocked sum of a[k * vectors x
 *     (nr / 2) + i] x b[offsets[k] + positions[j]], accumulated as in gemm (so
 *     the same value, bit for bit).  a: a row block of the packed weights,
 *     nr / 2 or nr rows wide; positions: where each position's operands start
 *     (any, so a call can skip a window's margin columns); c: the product
 *     transposed, one row per position (CONVT_SET_TRANSPOSED sets).
 * winograd_input, winograd_output: the Winograd transforms (2-D and 3-D) of
 *     winograd.h compiled for the set's CPU (float32 sets; NULL: the baseline
 *     build of winograd.c, which every set may call).
 * plane: depthwise 2-D Conv a whole input plane at a time (plane.h): the
 *     stencil family's arithmetic on a zero-padded copy of the plane, for
 *     groups of one input channel (NULL: the baseline build of plane.c).
 * plane_channels: the same sums with channels side by side, from a buffer the
 *     caller fills (plane.h; NULL: the baseline build of plane.c).
 * load[storage]: dst[i] = T(src[i]), exact.
 * store[storage]: dst[i] = storage(src[i] + bias), rounded once.
 */
#ifndef CONVT_KERNEL_SET_H
#define CONVT_KERNEL_SET_H

#include <stddef.h>
#include <stdint.h>

#include "storage.h"
#include "plane.h"
#include "winograd.h"

#define CONVT_MAX_MR 12
#define CONVT_MAX_PAIRS (CONVT_MAX_MR / 2)
/* Positions of one gemm_t call, at most (sets may fill fewer entries: NULL past them). */
#define CONVT_MAX_T_POSITIONS 14
/* Output rows of one stencil call, at most. */
#define CONVT_STENCIL_ROWS 4

/* The geometry of a stencil call (one struct for both accumulation types). */
typedef struct convt_stencil_shape {
    ptrdiff_t rows;             /* output rows, 1 .. CONVT_STENCIL_ROWS */
    ptrdiff_t kernel_rows;      /* input rows summed into each output row */
    ptrdiff_t taps;             /* taps per kernel row */
    const ptrdiff_t *offsets;   /* [taps]: tap j of output t reads input t + offsets[j] */
    ptrdiff_t in_size;          /* elements of an input row */
    ptrdiff_t count;            /* outputs per row */
    ptrdiff_t out_stride;       /* elements from one output row to the next */
} convt_stencil_shape;

/* Capability flags of a set.  Python reads them to decide; drivers obey. */
enum {
    CONVT_SET_PACK = 1 << 0,          /* gemm_pack entries */
    CONVT_SET_HALF = 1 << 1,          /* half entries */
    CONVT_SET_PAIRS = 1 << 2,         /* pair and pair_store entries (exact stacks) */
    CONVT_SET_MASKED_STORES = 1 << 3, /* store_even writes whole vectors of even lanes */
    CONVT_SET_FUSED = 1 << 4,         /* all products are fused multiply-adds */
    CONVT_SET_PACK_PAIRS = 1 << 5,    /* pack_pair entry */
    CONVT_SET_TRANSPOSED = 1 << 6,    /* gemm_t entries */
    CONVT_SET_STREAM_STORES = 1 << 7, /* interleave_stream entry */
    CONVT_SET_STREAM_B = 1 << 8,      /* gemm_stream entries */
    CONVT_SET_T_RUNS = 1 << 9         /* gemm_t reads positions that follow each other at
                                         constant displacements: callers keep a call's
                                         positions within one row of their buffer */
};

#define CONVT_DECLARE_FAMILIES(S, T)                                                      \
    typedef void (*convt_gemm_##S)(ptrdiff_t depth, ptrdiff_t block, const T *a,          \
                                   const T *b, const ptrdiff_t *offsets, T *c,            \
                                   ptrdiff_t ldc, int accumulate, T *pack_to);            \
    typedef void (*convt_pair_##S)(ptrdiff_t depth, ptrdiff_t block, const T *a,          \
                                   const T *b, const ptrdiff_t *offsets,                  \
                                   ptrdiff_t sibling, T *c, ptrdiff_t ldc, int accumulate); \
    typedef void (*convt_pair_store_##S)(ptrdiff_t depth, ptrdiff_t block, const T *a,    \
                                         const T *b, const ptrdiff_t *offsets,            \
                                         ptrdiff_t sibling, void *y, ptrdiff_t ldy,       \
                                         int accumulate, const T *bias);                  \
    typedef void (*convt_row_##S)(ptrdiff_t sources, const T *const *x, const T *w,       \
                                  ptrdiff_t taps, const ptrdiff_t *offsets,               \
                                  ptrdiff_t in_size, ptrdiff_t count, T *out,             \
                                  int accumulate);                                        \
    typedef void (*convt_channels_##S)(ptrdiff_t count, ptrdiff_t channels, const T *x,   \
                                       ptrdiff_t x_step, const T *w, T *out,              \
                                       ptrdiff_t out_step);                               \
    typedef void (*convt_interleave_##S)(T *y, const T *even, const T *odd,               \
                                         ptrdiff_t pairs, T bias);                        \
    typedef void (*convt_run_##S)(T *dst, const T *src, ptrdiff_t count, T bias);         \
    typedef void (*convt_load_##S)(T *dst, const void *src, ptrdiff_t count);             \
    typedef void (*convt_store_##S)(void *dst, const T *src, ptrdiff_t count, T bias);    \
    typedef void (*convt_pack_pair_##S)(ptrdiff_t depth, const T *b,                      \
                                        const ptrdiff_t *offsets, ptrdiff_t sibling,      \
                                        T *to);                                           \
    typedef void (*convt_transpose_##S)(ptrdiff_t rows, ptrdiff_t cols, const T *src,     \
                                        ptrdiff_t src_stride, T *dst,                     \
                                        ptrdiff_t dst_stride, const T *bias);             \
    typedef void (*convt_stencil_##S)(const convt_stencil_shape *shape, const T *const *x, \
                                      const T *w, T *out, int accumulate);                \
    typedef void (*convt_gemm_t_##S)(ptrdiff_t depth, ptrdiff_t block, const T *a,        \
                                     const T *b, const ptrdiff_t *offsets,                \
                                     const ptrdiff_t *positions, T *c, ptrdiff_t ldc,     \
                                     int accumulate);                                     \
    typedef int (*convt_winograd_in_##S)(const convt_winograd_block *block,            \
                                            const convt_winograd_plane *plane,            \
                                            const T *x, ptrdiff_t x_channel,              \
                                            ptrdiff_t channels, T *v);                    \
    typedef int (*convt_winograd_out_##S)(const convt_winograd_block *block,           \
                                             ptrdiff_t out_top, ptrdiff_t out_left,       \
                                             const convt_winograd_plane *plane,           \
                                             const T *m, ptrdiff_t channels,              \
                                             const T *bias, T *y, ptrdiff_t y_channel);   \
    typedef void (*convt_plane_kernel_##S)(const convt_plane_shape *shape, const T *x,    \
                                           const T *w, const T *bias, T *y, T *buffer,    \
                                           int fresh);                                    \
    typedef void (*convt_plane_channels_kernel_##S)(                                      \
        const convt_plane_shape *shape, ptrdiff_t block, const T *buffer, const T *w,     \
        const T *bias, T *out);                                                           \
                                                                                          \
    typedef struct convt_kernels_##S {                                                    \
        const char *name;                                                                 \
        int mr, nr;                                                                       \
        unsigned flags;                                                                   \
        convt_gemm_##S gemm[CONVT_MAX_MR];                                                \
        convt_gemm_##S gemm_pack[CONVT_MAX_MR];                                           \
        convt_gemm_##S half[CONVT_MAX_MR];                                                \
        convt_pair_##S pair[2][CONVT_MAX_PAIRS];                                          \
        convt_pair_store_##S pair_store[CONVT_STORAGE_COUNT][2][CONVT_MAX_PAIRS];         \
        convt_row_##S row;                                                                \
        convt_channels_##S channels;                                                      \
        convt_interleave_##S interleave;                                                  \
        convt_run_##S store_even;                                                         \
        convt_run_##S add_bias;                                                           \
        convt_load_##S load[CONVT_STORAGE_COUNT];                                         \
        convt_store_##S store[CONVT_STORAGE_COUNT];                                       \
        convt_pack_pair_##S pack_pair;                                                    \
        convt_transpose_##S transpose;                                                    \
        convt_stencil_##S stencil;                                                        \
        convt_gemm_t_##S gemm_t[2][CONVT_MAX_T_POSITIONS];                                     \
        convt_winograd_in_##S winograd_input;                                             \
        convt_winograd_out_##S winograd_output;                                           \
        convt_plane_kernel_##S plane;                                                     \
        convt_interleave_##S interleave_stream;                                           \
        convt_plane_channels_kernel_##S plane_channels;                                   \
        convt_gemm_##S gemm_stream[CONVT_MAX_MR];                                         \
    } convt_kernels_##S;

CONVT_DECLARE_FAMILIES(f32, float)
CONVT_DECLARE_FAMILIES(f64, double)

/* A CPU family's two sets and the CPU features it needs (CONVT_CPU_* bits). */
typedef struct convt_family {
    const char *name;
    unsigned requires;
    const convt_kernels_f32 *f32;
    const convt_kernels_f64 *f64;
} convt_family;

/* The registered families, portable first and most capable last (registry.c). */
int convt_family_count(void);
const convt_family *convt_family_at(int index);
/* Whether this CPU and OS can run a family's kernels. */
int convt_family_available(const convt_family *family);

#endif /* CONVT_KERNEL_SET_H */
