/* The AVX-512 wide kernel set "avx512_wide" (AVX-512F and VL, with FMA and F16C).
 *
 * GEMM: ROWS (<= 8) rows x 2 vectors (32 floats or 16 doubles): 16 block sums
 * in registers and 10 loads (8 broadcasts, two B vectors) per 16 FMAs, where
 * the narrow set (x86_avx512.c) issues 13 loads per 12 FMAs.  On Intel cores
 * with two 512-bit FMA units loads are the limit: on aligned rows in L1 the
 * narrow kernel peaked at 83% of the FMA rate, this one at 94%; large layers
 * ran 1.03-1.2x faster, small ones (32x32 maps, 12-wide rows) up to 1.35x
 * slower, so convt._dispatch chooses it per call (WIDE_MIN_WORK and friends).  Half
 * panels (<= 16 floats, 8 doubles) run the same kernels on one vector.  The
 * row, channel, store and conversion kernels are the narrow set's.
 */
#include <math.h>

#include "sets.h"

#ifdef CONVT_X86_64
#include "x86_intrinsics.h"
#include "x86_avx512.h"

#define MR 8

/* Steps k .. end - 1 of one block summed into SUMS[ROWS][VECS] (a += ROWS per step). */
#define BLOCK_STEPS(ROWS, VECS, W, V, LOAD, SET1, FMA, SIBLING, KEEP, SUMS)               \
    for (; k < end; ++k, a += (ROWS)) {                                                   \
        V even[VECS], odd[VECS];                                                          \
        for (j = 0; j < (VECS); ++j) {                                                    \
            even[j] = LOAD(b + offsets[k] + j * (W));                                     \
            odd[j] = LOAD(b + offsets[k] + (SIBLING) + j * (W));                          \
        }                                                                                 \
        convt_prefetch_weights(a, ROWS);                                                  \
        KEEP                                                                              \
        for (i = 0; i < (ROWS); ++i) {                                                    \
            V weight = SET1(a[i]);                                                        \
            for (j = 0; j < (VECS); ++j)                                                  \
                SUMS[i][j] = FMA(weight, (i & 1) ? odd[j] : even[j], SUMS[i][j]);         \
        }                                                                                 \
    }

/* total[i][j] = c's row (accumulate) or the first block sum, plus each next
 * block sum (see kernel_set.h), over VECS vectors of W elements; odd rows read
 * B `sibling` positions further.  KEEP runs once per step, after the step's B
 * vectors (even[], odd[]) are read.  As in x86_avx512.c: the totals start from
 * c's rows or from -0.0 (the additive identity) and every block is added, one
 * loop that runs at least once (calls of no steps return first, NO_STEPS), so
 * that no flag or merge of paths sends the totals through memory. */
#define BLOCKED_TOTALS(ROWS, VECS, W, V, SETZERO, LOAD, SET1, FMA, ADD, SIBLING, START, KEEP) \
    {                                                                                     \
        V acc[ROWS][VECS];                                                                \
        ptrdiff_t k = 0, end;                                                             \
        START                                                                             \
        do {                                                                              \
            end = k + block < depth ? k + block : depth;                                  \
            for (i = 0; i < (ROWS); ++i)                                                  \
                for (j = 0; j < (VECS); ++j) acc[i][j] = SETZERO();                       \
            BLOCK_STEPS(ROWS, VECS, W, V, LOAD, SET1, FMA, SIBLING, KEEP, acc)            \
            for (i = 0; i < (ROWS); ++i)                                                  \
                for (j = 0; j < (VECS); ++j) total[i][j] = ADD(total[i][j], acc[i][j]);   \
        } while (k < depth);                                                              \
    }

/* The totals start from c's rows when accumulating, else from the identity: one
 * load per vector from an address chosen in scalar registers. */
#define START_FROM_C(ROWS, VECS, W, LOAD, SIBLING)                                        \
    {                                                                                     \
        const char *from = accumulate ? (const char *)c : (const char *)IDENTITY_LANES(sizeof *c); \
        ptrdiff_t unit = accumulate ? (ptrdiff_t)sizeof *c : 0;                           \
        for (i = 0; i < (ROWS); ++i)                                                      \
            for (j = 0; j < (VECS); ++j)                                                  \
                total[i][j] = LOAD((const void *)(                                        \
                    from + (i * ldc + ((i & 1) ? (SIBLING) : 0) + j * (W)) * unit));      \
    }
/* The totals start from the identity (a pair_store's sums start from zero). */
#define START_FROM_IDENTITY(ROWS, VECS, LOAD, T_SIZE)                                     \
    {                                                                                     \
        const void *identity = IDENTITY_LANES(T_SIZE);                                    \
        for (i = 0; i < (ROWS); ++i)                                                      \
            for (j = 0; j < (VECS); ++j) total[i][j] = LOAD(identity);                    \
    }

/* A call of no steps (never made by the engines; kernel_set.h defines it): c's
 * rows stay, or become zeros. */
#define NO_STEPS(ROWS, VECS, W, STORE, SETZERO, SIBLING)                                  \
    if (depth < 1) {                                                                      \
        if (!accumulate)                                                                  \
            for (i = 0; i < (ROWS); ++i)                                                  \
                for (j = 0; j < (VECS); ++j)                                              \
                    STORE(c + i * ldc + ((i & 1) ? (SIBLING) : 0) + j * (W), SETZERO());  \
        return;                                                                           \
    }

/* A call of one block, not accumulating, summed from zero into SUMS: the same
 * arithmetic as BLOCKED_TOTALS without its start and last addition, on a path
 * of its own that returns (see x86_avx512.c's ONE_BLOCK). */
#define ONE_BLOCK(ROWS, VECS, W, V, SETZERO, LOAD, SET1, FMA, SIBLING, KEEP, SUMS)         \
    V SUMS[ROWS][VECS];                                                                   \
    ptrdiff_t k = 0, end = depth;                                                         \
    for (i = 0; i < (ROWS); ++i)                                                          \
        for (j = 0; j < (VECS); ++j) SUMS[i][j] = SETZERO();                              \
    BLOCK_STEPS(ROWS, VECS, W, V, LOAD, SET1, FMA, SIBLING, KEEP, SUMS)

/* PACK 1: also copy each step's B vectors to pack_to + k VECS W, 64-byte
 * aligned, for the panel's other row blocks (gemm_pack); PACK 2: hint the lines
 * of each step's B vectors CONVT_STREAM_AHEAD_BYTES further on (gemm_stream). */
#define STREAM_KEEP(PACK, VECS, W, STORE)                                                 \
    if ((PACK) == 1)                                                                      \
        for (j = 0; j < (VECS); ++j) STORE(pack_to + (k * (VECS) + j) * (W), even[j]);    \
    if ((PACK) == 2)                                                                      \
        for (j = 0; j < (VECS); ++j)                                                      \
            convt_prefetch((const char *)(b + offsets[k] + j * (W)) + CONVT_STREAM_AHEAD_BYTES);
#define DEFINE_GEMM(NAME, ROWS, PACK, VECS, T, V, W, SETZERO, LOAD, STORE, SET1, FMA, ADD) \
    AVX512 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,     \
                            const ptrdiff_t *offsets, T *c, ptrdiff_t ldc,                \
                            int accumulate, T *pack_to)                                   \
    {                                                                                     \
        V total[ROWS][VECS];                                                              \
        int i, j;                                                                         \
        (void)pack_to;                                                                    \
        NO_STEPS(ROWS, VECS, W, STORE, SETZERO, 0)                                        \
        PREFETCH_LATER_PANEL(ROWS, c, ldc, 2 * (VECS) * (W))                              \
        if (!accumulate && depth <= block) {                                              \
            ONE_BLOCK(ROWS, VECS, W, V, SETZERO, LOAD, SET1, FMA, 0,                      \
                      STREAM_KEEP(PACK, VECS, W, STORE), sums)                            \
            for (i = 0; i < (ROWS); ++i)                                                  \
                for (j = 0; j < (VECS); ++j) STORE(c + i * ldc + j * (W), sums[i][j]);    \
            return;                                                                       \
        }                                                                                 \
        BLOCKED_TOTALS(ROWS, VECS, W, V, SETZERO, LOAD, SET1, FMA, ADD, 0,                \
                       START_FROM_C(ROWS, VECS, W, LOAD, 0),                              \
                       STREAM_KEEP(PACK, VECS, W, STORE))                                 \
        for (i = 0; i < (ROWS); ++i)                                                      \
            for (j = 0; j < (VECS); ++j) STORE(c + i * ldc + j * (W), total[i][j]);       \
    }

#define DEFINE_PAIR(NAME, ROWS, VECS, T, V, W, SETZERO, LOAD, STORE, SET1, FMA, ADD)      \
    AVX512 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,     \
                            const ptrdiff_t *offsets, ptrdiff_t sibling, T *c,            \
                            ptrdiff_t ldc, int accumulate)                                \
    {                                                                                     \
        V total[ROWS][VECS];                                                              \
        int i, j;                                                                         \
        NO_STEPS(ROWS, VECS, W, STORE, SETZERO, sibling)                                  \
        if (!accumulate && depth <= block) {                                              \
            ONE_BLOCK(ROWS, VECS, W, V, SETZERO, LOAD, SET1, FMA, sibling, , sums)        \
            for (i = 0; i < (ROWS); ++i)                                                  \
                for (j = 0; j < (VECS); ++j)                                              \
                    STORE(c + i * ldc + ((i & 1) ? sibling : 0) + j * (W), sums[i][j]);   \
            return;                                                                       \
        }                                                                                 \
        BLOCKED_TOTALS(ROWS, VECS, W, V, SETZERO, LOAD, SET1, FMA, ADD, sibling,          \
                       START_FROM_C(ROWS, VECS, W, LOAD, sibling), )                      \
        for (i = 0; i < (ROWS); ++i)                                                      \
            for (j = 0; j < (VECS); ++j)                                                  \
                STORE(c + i * ldc + ((i & 1) ? sibling : 0) + j * (W), total[i][j]);      \
    }

/* Storing pairs: the sums of rows 2r and 2r + 1 are the even and odd outputs of
 * one channel; vector j of each makes outputs 2 j W .. 2 (j + 1) W, stored
 * interleaved by STORE_PAIR (x86_avx512.h). */
#define DEFINE_PAIR_STORE(NAME, ROWS, VECS, T, YT, V, W, SETZERO, LOAD, YLOAD, YSTORE,     \
                          SET1, FMA, ADD, PERMUTE, LOW, HIGH)                             \
    AVX512 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,     \
                            const ptrdiff_t *offsets, ptrdiff_t sibling, void *y,         \
                            ptrdiff_t ldy, int accumulate, const T *bias)                 \
    {                                                                                     \
        V total[ROWS][VECS];                                                              \
        int i, j;                                                                         \
        PREFETCH_LATER_PANEL((ROWS) / 2, (YT *)y, ldy, 4 * (VECS) * (W))                  \
        BLOCKED_TOTALS(ROWS, VECS, W, V, SETZERO, LOAD, SET1, FMA, ADD, sibling,          \
                       START_FROM_IDENTITY(ROWS, VECS, LOAD, sizeof(T)), )                \
        for (i = 0; i < (ROWS); i += 2) {                                                 \
            YT *row = (YT *)y + (i / 2) * ldy;                                            \
            for (j = 0; j < (VECS); ++j) {                                                \
                YT *out = row + 2 * j * (W);                                              \
                STORE_PAIR(out, total[i][j], total[i + 1][j], i / 2, V, W, YLOAD, YSTORE, \
                           SET1, ADD, PERMUTE, LOW, HIGH)                                 \
            }                                                                             \
        }                                                                                 \
    }

/* Vector flavours (type, vector, lanes, then the operations). */
#define ZF float, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_storeu_ps, \
    _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps
#define ZD double, __m512d, 8, _mm512_setzero_pd, _mm512_loadu_pd, _mm512_storeu_pd, \
    _mm512_set1_pd, _mm512_fmadd_pd, _mm512_add_pd
/* CALL(M, (a, b)) is M(a, b) once the arguments are expanded (portable to MSVC). */
#define CALL(MACRO, ARGUMENTS) MACRO ARGUMENTS

/* gemm, gemm_pack (2 vectors) and half (1 vector) kernels for 1..MR rows. */
#define GEMMS(FLAVOUR, P, PACK, VECS)                                                     \
    CALL(DEFINE_GEMM, (P##1, 1, PACK, VECS, FLAVOUR))                                     \
    CALL(DEFINE_GEMM, (P##2, 2, PACK, VECS, FLAVOUR))                                     \
    CALL(DEFINE_GEMM, (P##3, 3, PACK, VECS, FLAVOUR))                                     \
    CALL(DEFINE_GEMM, (P##4, 4, PACK, VECS, FLAVOUR))                                     \
    CALL(DEFINE_GEMM, (P##5, 5, PACK, VECS, FLAVOUR))                                     \
    CALL(DEFINE_GEMM, (P##6, 6, PACK, VECS, FLAVOUR))                                     \
    CALL(DEFINE_GEMM, (P##7, 7, PACK, VECS, FLAVOUR))                                     \
    CALL(DEFINE_GEMM, (P##8, 8, PACK, VECS, FLAVOUR))
#define GEMM_TABLE(P) {P##1, P##2, P##3, P##4, P##5, P##6, P##7, P##8}
GEMMS(ZF, gemm_f32_r, 0, 2)
GEMMS(ZF, gemm_pack_f32_r, 1, 2)
GEMMS(ZF, gemm_stream_f32_r, 2, 2)
GEMMS(ZF, half_f32_r, 0, 1)
GEMMS(ZD, gemm_f64_r, 0, 2)
GEMMS(ZD, gemm_pack_f64_r, 1, 2)
GEMMS(ZD, gemm_stream_f64_r, 2, 2)
GEMMS(ZD, half_f64_r, 0, 1)

#define PAIRS(FLAVOUR, P, VECS)                                                           \
    CALL(DEFINE_PAIR, (P##2, 2, VECS, FLAVOUR)) CALL(DEFINE_PAIR, (P##4, 4, VECS, FLAVOUR)) \
    CALL(DEFINE_PAIR, (P##6, 6, VECS, FLAVOUR)) CALL(DEFINE_PAIR, (P##8, 8, VECS, FLAVOUR))
#define PAIR_TABLE(P) {P##2, P##4, P##6, P##8}
PAIRS(ZF, pair_f32_r, 2)
PAIRS(ZF, pair_half_f32_r, 1)
PAIRS(ZD, pair_f64_r, 2)
PAIRS(ZD, pair_half_f64_r, 1)

#define STORES(FLAVOUR, P, VECS)                                                          \
    CALL(DEFINE_PAIR_STORE, (P##2, 2, VECS, FLAVOUR))                                     \
    CALL(DEFINE_PAIR_STORE, (P##4, 4, VECS, FLAVOUR))                                     \
    CALL(DEFINE_PAIR_STORE, (P##6, 6, VECS, FLAVOUR))                                     \
    CALL(DEFINE_PAIR_STORE, (P##8, 8, VECS, FLAVOUR))
STORES(ST_F32_Z, store_f32_r, 2)
STORES(ST_F32_Z, store_half_f32_r, 1)
STORES(ST_F16_Z, store_f16_r, 2)
STORES(ST_F16_Z, store_half_f16_r, 1)
STORES(ST_BF16_Z, store_bf16_r, 2)
STORES(ST_BF16_Z, store_half_bf16_r, 1)
STORES(ST_F64_Z, store_f64_r, 2)
STORES(ST_F64_Z, store_half_f64_r, 1)

CONVT_AVX512_PACK_PAIR(pack_pair_f32, float, _mm512_loadu_ps, _mm512_store_ps, 16, 2)
CONVT_AVX512_PACK_PAIR(pack_pair_f64, double, _mm512_loadu_pd, _mm512_store_pd, 8, 2)


const convt_kernels_f32 convt_avx512_wide_f32 = {
    "avx512_wide", MR, 32, AVX512_FLAGS | CONVT_SET_STREAM_B,
    GEMM_TABLE(gemm_f32_r), GEMM_TABLE(gemm_pack_f32_r), GEMM_TABLE(half_f32_r),
    {PAIR_TABLE(pair_f32_r), PAIR_TABLE(pair_half_f32_r)},
    {{PAIR_TABLE(store_f16_r), PAIR_TABLE(store_half_f16_r)},
     {PAIR_TABLE(store_bf16_r), PAIR_TABLE(store_half_bf16_r)},
     {PAIR_TABLE(store_f32_r), PAIR_TABLE(store_half_f32_r)},
     AVX512_NO_STORES},
    AVX512_SHARED_F32, pack_pair_f32, convt_avx2_transpose_f32,
    convt_avx512_stencil_f32, {{0}}, convt_avx2_winograd_input_f32,
    convt_avx2_winograd_output_f32, convt_avx512_plane_f32,
    convt_avx2_interleave_stream_f32, convt_avx512_plane_channels_f32,
    GEMM_TABLE(gemm_stream_f32_r)};

const convt_kernels_f64 convt_avx512_wide_f64 = {
    "avx512_wide", MR, 16, AVX512_FLAGS | CONVT_SET_STREAM_B,
    GEMM_TABLE(gemm_f64_r), GEMM_TABLE(gemm_pack_f64_r), GEMM_TABLE(half_f64_r),
    {PAIR_TABLE(pair_f64_r), PAIR_TABLE(pair_half_f64_r)},
    {AVX512_NO_STORES, AVX512_NO_STORES, AVX512_NO_STORES,
     {PAIR_TABLE(store_f64_r), PAIR_TABLE(store_half_f64_r)}},
    AVX512_SHARED_F64, pack_pair_f64, convt_avx2_transpose_f64,
    convt_avx512_stencil_f64, {{0}}, 0, 0, convt_avx512_plane_f64,
    convt_avx2_interleave_stream_f64, convt_avx512_plane_channels_f64,
    GEMM_TABLE(gemm_stream_f64_r)};

#endif /* x86-64 */
