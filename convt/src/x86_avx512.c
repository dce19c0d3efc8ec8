/* The AVX-512 kernel set (AVX-512F and VL, with FMA and F16C).
 *
 * GEMM: ROWS (<= 12) rows x 1 vector (16 floats or 8 doubles).  With 32
 * registers the block totals stay in registers and one call covers the whole
 * depth; there are 13 loads (12 broadcasts, one B row) per 12 FMAs (on Zen 4,
 * where 512-bit FMAs are split in two: 115-117 GFLOP/s per core against 101-109
 * for the AVX2 kernel).  gemm_pack copies the B rows of a panel to an aligned
 * buffer while the first row block reads them, and pack_pair copies a pair
 * panel's two operands, so the other blocks read aligned rows from L1 where
 * the tile's rows straddle cache lines (on Intel cores with two 512-bit FMA
 * units, B loads from L2 were the bottleneck: 1.05-1.19x on k2s2 and k16s8
 * layers, 1.03-1.18x on k4s2).
 * Half-width twins on 256-bit vectors serve a tile's last panel of <= 8
 * positions.  x86_avx512_wide.c holds the 8 rows x 2 vectors twin of this
 * set, which convt._dispatch chooses for large layers.  Pair kernels compute two stride phases of a last axis at once
 * and may store straight into y, interleaved (exact stacks, see _plan.py).
 * Masked stores write the even outputs of a stride-2 row in whole vectors.
 * Direct-engine rows are 512-bit with masked tails; interleaves and
 * conversions are memory-bound: they are the AVX2 set's.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sets.h"

#ifdef CONVT_X86_64
#include "x86_intrinsics.h"

#include "x86_avx512.h"

#if defined(_MSC_VER)
#include <intrin.h> /* __rdtsc */
#else
#include <x86intrin.h>
#endif

#define MR 12

/* Steps k .. end - 1 of one block summed into SUMS[ROWS] (a += ROWS per step). */
#define BLOCK_STEPS(ROWS, V, LOAD, SET1, FMA, SIBLING, KEEP, SUMS)                        \
    for (; k < end; ++k, a += (ROWS)) {                                                   \
        V even = LOAD(b + offsets[k]), odd = LOAD(b + offsets[k] + (SIBLING));            \
        convt_prefetch_weights(a, ROWS);                                                  \
        KEEP                                                                              \
        for (i = 0; i < (ROWS); ++i)                                                      \
            SUMS[i] = FMA(SET1(a[i]), (i & 1) ? odd : even, SUMS[i]);                     \
    }

/* total[i] = c's row (accumulate) or the first block sum, plus each next block
 * sum (see kernel_set.h); odd rows read B `sibling` positions further.  START
 * sets the totals: c's rows, or -0.0, the additive identity (-0 + x is x for
 * every x, +0 and -0 included), so every block sum is added, the first one
 * too, with the same result as taking it for the totals.  One loop and no flag:
 * with a flag choosing copy or add (and a loop filling totals with zeros)
 * GCC kept the totals on the stack, storing and reloading every one of them
 * once per block.  The loop runs at least once: calls of no steps return
 * before (NO_STEPS), so that no path skipping it merges with it either. */
#define BLOCKED_TOTALS(ROWS, V, SETZERO, LOAD, SET1, FMA, ADD, SIBLING, START, KEEP)      \
    {                                                                                     \
        V acc[ROWS];                                                                      \
        ptrdiff_t k = 0, end;                                                             \
        START                                                                             \
        do {                                                                              \
            end = k + block < depth ? k + block : depth;                                  \
            for (i = 0; i < (ROWS); ++i) acc[i] = SETZERO();                              \
            BLOCK_STEPS(ROWS, V, LOAD, SET1, FMA, SIBLING, KEEP, acc)                     \
            for (i = 0; i < (ROWS); ++i) total[i] = ADD(total[i], acc[i]);                \
        } while (k < depth);                                                              \
    }

/* A call of no steps (never made by the engines; kernel_set.h defines it): c's
 * rows stay, or become zeros. */
#define NO_STEPS(ROWS, STORE, SETZERO, SIBLING)                                           \
    if (depth < 1) {                                                                      \
        if (!accumulate)                                                                  \
            for (i = 0; i < (ROWS); ++i) STORE(c + i * ldc + ((i & 1) ? (SIBLING) : 0), SETZERO()); \
        return;                                                                           \
    }

/* The totals start from c's rows when accumulating, else from the identity: one
 * load per row from an address chosen in scalar registers. */
#define START_FROM_C(ROWS, LOAD, SIBLING)                                                 \
    {                                                                                     \
        const char *from = accumulate ? (const char *)c : (const char *)IDENTITY_LANES(sizeof *c); \
        ptrdiff_t row_step = accumulate ? ldc * (ptrdiff_t)sizeof *c : 0;                 \
        ptrdiff_t odd_step = accumulate ? (SIBLING) * (ptrdiff_t)sizeof *c : 0;           \
        for (i = 0; i < (ROWS); ++i)                                                      \
            total[i] = LOAD((const void *)(from + i * row_step + ((i & 1) ? odd_step : 0))); \
    }
/* The totals start from the identity (a pair_store's sums start from zero). */
#define START_FROM_IDENTITY(ROWS, LOAD, T_SIZE)                                           \
    {                                                                                     \
        const void *identity = IDENTITY_LANES(T_SIZE);                                    \
        for (i = 0; i < (ROWS); ++i) total[i] = LOAD(identity);                           \
    }

/* A call of one block, not accumulating, summed from zero into SUMS: the same
 * arithmetic as BLOCKED_TOTALS without its start and last addition (a tenth of
 * a 10-step call: a one-channel Conv's taps), on a path of its own that
 * returns, so that it never merges with BLOCKED_TOTALS'. */
#define ONE_BLOCK(ROWS, V, SETZERO, LOAD, SET1, FMA, SIBLING, KEEP, SUMS)                 \
    V SUMS[ROWS];                                                                         \
    ptrdiff_t k = 0, end = depth;                                                         \
    for (i = 0; i < (ROWS); ++i) SUMS[i] = SETZERO();                                     \
    BLOCK_STEPS(ROWS, V, LOAD, SET1, FMA, SIBLING, KEEP, SUMS)

/* PACK 1: also copy each B row read to pack_to + k W, 64-byte aligned, for the
 * panel's other row blocks (gemm_pack); PACK 2: hint the line of each B row
 * CONVT_STREAM_AHEAD_BYTES further on (gemm_stream, B rows read in place). */
#define STREAM_KEEP(PACK, STORE, V, T)                                                    \
    if ((PACK) == 1) STORE(pack_to + k * (ptrdiff_t)(sizeof(V) / sizeof(T)), even);       \
    if ((PACK) == 2) convt_prefetch((const char *)(b + offsets[k]) + CONVT_STREAM_AHEAD_BYTES);
#define DEFINE_GEMM(NAME, ROWS, PACK, T, V, SETZERO, LOAD, STORE, SET1, FMA, ADD)         \
    AVX512 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,     \
                            const ptrdiff_t *offsets, T *c, ptrdiff_t ldc,                \
                            int accumulate, T *pack_to)                                   \
    {                                                                                     \
        V total[ROWS];                                                                    \
        int i;                                                                            \
        (void)pack_to;                                                                    \
        NO_STEPS(ROWS, STORE, SETZERO, 0)                                                 \
        PREFETCH_LATER_PANEL(ROWS, c, ldc, 2 * (ptrdiff_t)(sizeof(V) / sizeof(T)))        \
        if (!accumulate && depth <= block) {                                              \
            ONE_BLOCK(ROWS, V, SETZERO, LOAD, SET1, FMA, 0,                               \
                      STREAM_KEEP(PACK, STORE, V, T), sums)                               \
            for (i = 0; i < (ROWS); ++i) STORE(c + i * ldc, sums[i]);                     \
            return;                                                                       \
        }                                                                                 \
        BLOCKED_TOTALS(ROWS, V, SETZERO, LOAD, SET1, FMA, ADD, 0,                         \
                       START_FROM_C(ROWS, LOAD, 0),                                       \
                       STREAM_KEEP(PACK, STORE, V, T))                                    \
        for (i = 0; i < (ROWS); ++i) STORE(c + i * ldc, total[i]);                        \
    }

#define DEFINE_PAIR(NAME, ROWS, T, V, SETZERO, LOAD, STORE, SET1, FMA, ADD)               \
    AVX512 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,     \
                            const ptrdiff_t *offsets, ptrdiff_t sibling, T *c,            \
                            ptrdiff_t ldc, int accumulate)                                \
    {                                                                                     \
        V total[ROWS];                                                                    \
        int i;                                                                            \
        NO_STEPS(ROWS, STORE, SETZERO, sibling)                                           \
        if (!accumulate && depth <= block) {                                              \
            ONE_BLOCK(ROWS, V, SETZERO, LOAD, SET1, FMA, sibling, , sums)                 \
            for (i = 0; i < (ROWS); ++i) STORE(c + i * ldc + ((i & 1) ? sibling : 0), sums[i]); \
            return;                                                                       \
        }                                                                                 \
        BLOCKED_TOTALS(ROWS, V, SETZERO, LOAD, SET1, FMA, ADD, sibling,                   \
                       START_FROM_C(ROWS, LOAD, sibling), )                               \
        for (i = 0; i < (ROWS); ++i) STORE(c + i * ldc + ((i & 1) ? sibling : 0), total[i]); \
    }

/* Storing pairs: the sums of rows 2j and 2j + 1 are the even and odd outputs of
 * one channel, stored interleaved by STORE_PAIR (x86_avx512.h). */
#define DEFINE_PAIR_STORE(NAME, ROWS, T, YT, V, W, SETZERO, LOAD, YLOAD, YSTORE, SET1,     \
                          FMA, ADD, PERMUTE, LOW, HIGH)                                   \
    AVX512 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,     \
                            const ptrdiff_t *offsets, ptrdiff_t sibling, void *y,         \
                            ptrdiff_t ldy, int accumulate, const T *bias)                 \
    {                                                                                     \
        V total[ROWS];                                                                    \
        int i;                                                                            \
        PREFETCH_LATER_PANEL((ROWS) / 2, (YT *)y, ldy, 4 * (W))                           \
        BLOCKED_TOTALS(ROWS, V, SETZERO, LOAD, SET1, FMA, ADD, sibling,                   \
                       START_FROM_IDENTITY(ROWS, LOAD, sizeof(T)), )                      \
        for (i = 0; i < (ROWS); i += 2) {                                                 \
            YT *row = (YT *)y + (i / 2) * ldy;                                            \
            STORE_PAIR(row, total[i], total[i + 1], i / 2, V, W, YLOAD, YSTORE, SET1, ADD, \
                       PERMUTE, LOW, HIGH)                                                \
        }                                                                                 \
    }

/* Vector flavours: full (512-bit) and half (256-bit) width, float and double. */
#define ZF float, __m512, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_storeu_ps, \
    _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps
#define YF float, __m256, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_storeu_ps, \
    _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps
#define ZD double, __m512d, _mm512_setzero_pd, _mm512_loadu_pd, _mm512_storeu_pd, \
    _mm512_set1_pd, _mm512_fmadd_pd, _mm512_add_pd
#define YD double, __m256d, _mm256_setzero_pd, _mm256_loadu_pd, _mm256_storeu_pd, \
    _mm256_set1_pd, _mm256_fmadd_pd, _mm256_add_pd
/* CALL(M, (a, b)) is M(a, b) once the arguments are expanded (portable to MSVC). */
#define CALL(MACRO, ARGUMENTS) MACRO ARGUMENTS

#define GEMMS(FLAVOUR, P, PACK)                                                           \
    CALL(DEFINE_GEMM, (P##1, 1, PACK, FLAVOUR)) CALL(DEFINE_GEMM, (P##2, 2, PACK, FLAVOUR)) \
    CALL(DEFINE_GEMM, (P##3, 3, PACK, FLAVOUR)) CALL(DEFINE_GEMM, (P##4, 4, PACK, FLAVOUR)) \
    CALL(DEFINE_GEMM, (P##5, 5, PACK, FLAVOUR)) CALL(DEFINE_GEMM, (P##6, 6, PACK, FLAVOUR)) \
    CALL(DEFINE_GEMM, (P##7, 7, PACK, FLAVOUR)) CALL(DEFINE_GEMM, (P##8, 8, PACK, FLAVOUR)) \
    CALL(DEFINE_GEMM, (P##9, 9, PACK, FLAVOUR)) CALL(DEFINE_GEMM, (P##10, 10, PACK, FLAVOUR)) \
    CALL(DEFINE_GEMM, (P##11, 11, PACK, FLAVOUR)) CALL(DEFINE_GEMM, (P##12, 12, PACK, FLAVOUR))
#define GEMM_TABLE(P) {P##1, P##2, P##3, P##4, P##5, P##6, P##7, P##8, P##9, P##10, P##11, P##12}
GEMMS(ZF, gemm_zf_r, 0)
GEMMS(ZF, gemm_pack_zf_r, 1)
GEMMS(ZF, gemm_stream_zf_r, 2)
GEMMS(YF, gemm_yf_r, 0)
GEMMS(ZD, gemm_zd_r, 0)
GEMMS(ZD, gemm_pack_zd_r, 1)
GEMMS(ZD, gemm_stream_zd_r, 2)
GEMMS(YD, gemm_yd_r, 0)

/* Transposed GEMM (gemm_t, kernel_set.h): the weights are the vectors (one
 * zmm of 16 floats or 8 doubles, or a ymm of half that) and the positions the
 * broadcasts, c[j * ldc + i] (+)= blocked sums of a[k * lanes + i] *
 * b[offsets[k] + positions[j]] for P <= 12 positions j.  Every output's
 * arithmetic is gemm's (FMA operands commute exactly, the block totals are
 * added in the same order), so products are bitwise the same; the weight rows
 * are read whole and aligned, and B only through broadcasts, so nothing
 * straddles cache lines.  Here the 12 x 1 block of gemm with its roles swapped:
 * 12 broadcasts and one weight load per 12 FMAs. */
/* Positions that follow each other (a tile's row, as most calls are), or every
 * other one (a stride-2 Conv's row read by convt's band engine), are read at
 * constant displacements from one base: with one register per position the
 * compiler ran out of general registers, and a 10-position step took 27
 * instructions (an address computed per FMA, positions moved in from vector
 * registers) against 16.  Either way each product and sum is the same. */
#define GEMM_T_BLOCKS(P, T, V, SETZERO, LOAD, SET1, FMA, ADD, BASE, AT)                   \
    do {                                                                                  \
        end = k + block < depth ? k + block : depth;                                      \
        for (i = 0; i < (P); ++i) acc[i] = SETZERO();                                     \
        for (; k < end; ++k, a += LANES) {                                                \
            const T *row = (BASE) + offsets[k];                                           \
            V weights = LOAD(a);                                                          \
            convt_prefetch_weights(a, P);                                                 \
            for (i = 0; i < (P); ++i) acc[i] = FMA(weights, SET1(row[AT]), acc[i]);       \
        }                                                                                 \
        for (i = 0; i < (P); ++i) total[i] = ADD(total[i], acc[i]);                       \
    } while (k < depth);
#define DEFINE_GEMM_T(NAME, P, T, V, SETZERO, LOAD, STORE, SET1, FMA, ADD)                \
    AVX512 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,     \
                            const ptrdiff_t *offsets, const ptrdiff_t *positions, T *c,   \
                            ptrdiff_t ldc, int accumulate)                                \
    {                                                                                     \
        enum { LANES = sizeof(V) / sizeof(T) };                                           \
        V total[P], acc[P];                                                               \
        ptrdiff_t at[P], k = 0, end;                                                      \
        int i, consecutive = 1, doubled = 1;                                              \
        NO_STEPS(P, STORE, SETZERO, 0)                                                    \
        for (i = 0; i < (P); ++i) {                                                       \
            at[i] = positions[i];                                                         \
            consecutive &= at[i] == positions[0] + i;                                     \
            doubled &= at[i] == positions[0] + 2 * i;                                     \
        }                                                                                 \
        START_FROM_C(P, LOAD, 0)                                                          \
        if (consecutive) {                                                                \
            const T *base = b + positions[0];                                             \
            GEMM_T_BLOCKS(P, T, V, SETZERO, LOAD, SET1, FMA, ADD, base, i)                \
        } else if (doubled) {                                                             \
            const T *base = b + positions[0];                                             \
            GEMM_T_BLOCKS(P, T, V, SETZERO, LOAD, SET1, FMA, ADD, base, 2 * i)            \
        } else {                                                                          \
            GEMM_T_BLOCKS(P, T, V, SETZERO, LOAD, SET1, FMA, ADD, b, at[i])               \
        }                                                                                 \
        for (i = 0; i < (P); ++i) STORE(c + i * ldc, total[i]);                           \
    }
#define GEMMS_T(FLAVOUR, P)                                                               \
    CALL(DEFINE_GEMM_T, (P##1, 1, FLAVOUR)) CALL(DEFINE_GEMM_T, (P##2, 2, FLAVOUR))       \
    CALL(DEFINE_GEMM_T, (P##3, 3, FLAVOUR)) CALL(DEFINE_GEMM_T, (P##4, 4, FLAVOUR))       \
    CALL(DEFINE_GEMM_T, (P##5, 5, FLAVOUR)) CALL(DEFINE_GEMM_T, (P##6, 6, FLAVOUR))       \
    CALL(DEFINE_GEMM_T, (P##7, 7, FLAVOUR)) CALL(DEFINE_GEMM_T, (P##8, 8, FLAVOUR))       \
    CALL(DEFINE_GEMM_T, (P##9, 9, FLAVOUR)) CALL(DEFINE_GEMM_T, (P##10, 10, FLAVOUR))     \
    CALL(DEFINE_GEMM_T, (P##11, 11, FLAVOUR)) CALL(DEFINE_GEMM_T, (P##12, 12, FLAVOUR))     \
    CALL(DEFINE_GEMM_T, (P##13, 13, FLAVOUR)) CALL(DEFINE_GEMM_T, (P##14, 14, FLAVOUR))
/* gemm_t[0]: one half-width vector of rows (8 floats, 4 doubles); [1]: one zmm.
 * Up to 14 positions (2 x 14 accumulators and the weights fill 29 of the 32
 * registers): the band engine's stride-2 rows of 14 and 28 outputs run whole. */
GEMMS_T(YF, gemm_t_yf_p)
GEMMS_T(ZF, gemm_t_zf_p)
GEMMS_T(YD, gemm_t_yd_p)
GEMMS_T(ZD, gemm_t_zd_p)
#define GEMM_T_TABLE(P) {P##1, P##2, P##3, P##4, P##5, P##6, P##7, P##8, P##9, P##10, P##11, P##12, P##13, P##14}
#define GEMM_T_TABLES(Y, Z) {GEMM_T_TABLE(Y), GEMM_T_TABLE(Z)}

#define PAIRS(FLAVOUR, P)                                                                 \
    CALL(DEFINE_PAIR, (P##2, 2, FLAVOUR)) CALL(DEFINE_PAIR, (P##4, 4, FLAVOUR))           \
    CALL(DEFINE_PAIR, (P##6, 6, FLAVOUR)) CALL(DEFINE_PAIR, (P##8, 8, FLAVOUR))           \
    CALL(DEFINE_PAIR, (P##10, 10, FLAVOUR)) CALL(DEFINE_PAIR, (P##12, 12, FLAVOUR))
#define PAIR_TABLE(P) {P##2, P##4, P##6, P##8, P##10, P##12}
PAIRS(ZF, pair_zf_r)
PAIRS(YF, pair_yf_r)
PAIRS(ZD, pair_zd_r)
PAIRS(YD, pair_yd_r)

#define STORES(FLAVOUR, P)                                                                \
    CALL(DEFINE_PAIR_STORE, (P##2, 2, FLAVOUR)) CALL(DEFINE_PAIR_STORE, (P##4, 4, FLAVOUR)) \
    CALL(DEFINE_PAIR_STORE, (P##6, 6, FLAVOUR)) CALL(DEFINE_PAIR_STORE, (P##8, 8, FLAVOUR)) \
    CALL(DEFINE_PAIR_STORE, (P##10, 10, FLAVOUR))                                         \
    CALL(DEFINE_PAIR_STORE, (P##12, 12, FLAVOUR))
STORES(ST_F32_Z, store_f32_z_r)
STORES(ST_F32_Y, store_f32_y_r)
STORES(ST_F16_Z, store_f16_z_r)
STORES(ST_F16_Y, store_f16_y_r)
STORES(ST_BF16_Z, store_bf16_z_r)
STORES(ST_BF16_Y, store_bf16_y_r)
STORES(ST_F64_Z, store_f64_z_r)
STORES(ST_F64_Y, store_f64_y_r)

/* y[2 i] = src[i] + bias: 8 floats (4 doubles) expanded into the even lanes
 * and written with a masked store, so the odd outputs, which another work item
 * may be writing, are never touched. */
#define DEFINE_STORE_EVEN(NAME, T, V, N, MASK, SET1, CAST, LOAD, EXPAND_LANES, ADD, STORE) \
    AVX512 void NAME(T *y, const T *src, ptrdiff_t count, T bias)                         \
    {                                                                                     \
        V b = SET1(bias);                                                                 \
        ptrdiff_t i = 0;                                                                  \
        for (; i + (N) <= count; i += (N))                                                \
            STORE(y + 2 * i, (MASK), ADD(EXPAND_LANES((MASK), CAST(LOAD(src + i))), b));  \
        for (; i < count; ++i) y[2 * i] = src[i] + bias;                                  \
    }
DEFINE_STORE_EVEN(convt_avx512_store_even_f32, float, __m512, 8, 0x5555, _mm512_set1_ps,
                  _mm512_castps256_ps512, _mm256_loadu_ps, _mm512_maskz_expand_ps,
                  _mm512_add_ps, _mm512_mask_storeu_ps)
DEFINE_STORE_EVEN(convt_avx512_store_even_f64, double, __m512d, 4, 0x55, _mm512_set1_pd,
                  _mm512_castpd256_pd512, _mm256_loadu_pd, _mm512_maskz_expand_pd,
                  _mm512_add_pd, _mm512_mask_storeu_pd)

/* Direct-engine rows on 512-bit vectors (CONVT_X86_ROW): on short rows
 * (depthwise layers, 100-odd outputs) the loop overhead and the scalar edges
 * dominate, and half as many iterations as AVX2's halve them. */
#define LANES_BELOW(n) ((1u << (n)) - 1u)
#define MASKED_LOAD_PS(p, mask) _mm512_maskz_loadu_ps((__mmask16)(mask), p)
#define MASKED_LOAD_PD(p, mask) _mm512_maskz_loadu_pd((__mmask8)(mask), p)
#define MASKED_STORE_PS(p, mask, v) _mm512_mask_storeu_ps(p, (__mmask16)(mask), v)
#define MASKED_STORE_PD(p, mask, v) _mm512_mask_storeu_pd(p, (__mmask8)(mask), v)
#define SPLAT_PS(p) _mm512_set1_ps(*(p))
#define SPLAT_PD(p) _mm512_set1_pd(*(p))
CONVT_X86_ROW(AVX512, convt_avx512_row_f32, float, __m512, 16, unsigned, LANES_BELOW,
              _mm512_setzero_ps, _mm512_loadu_ps, _mm512_storeu_ps, MASKED_LOAD_PS,
              MASKED_STORE_PS, SPLAT_PS, _mm512_fmadd_ps, fmaf)
CONVT_X86_ROW(AVX512, convt_avx512_row_f64, double, __m512d, 8, unsigned, LANES_BELOW,
              _mm512_setzero_pd, _mm512_loadu_pd, _mm512_storeu_pd, MASKED_LOAD_PD,
              MASKED_STORE_PD, SPLAT_PD, _mm512_fmadd_pd, fma)

/* Stencils (CONVT_X86_STENCIL), shared with the wide set: lanes [lo, hi) of 16
 * floats or 8 doubles. */
#define CLAMP(n, W) ((n) < 0 ? 0 : (n) > (W) ? (W) : (n))
static inline unsigned lanes_between_16(ptrdiff_t lo, ptrdiff_t hi)
{
    return ((1u << CLAMP(hi, 16)) - 1u) & ~((1u << CLAMP(lo, 16)) - 1u);
}
static inline unsigned lanes_between_8(ptrdiff_t lo, ptrdiff_t hi)
{
    return ((1u << CLAMP(hi, 8)) - 1u) & ~((1u << CLAMP(lo, 8)) - 1u);
}
CONVT_X86_STENCIL(AVX512, convt_avx512_stencil_f32, 1, float, __m512, 16, unsigned,
                  lanes_between_16, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_storeu_ps,
                  MASKED_LOAD_PS, MASKED_STORE_PS, SPLAT_PS, _mm512_fmadd_ps)
CONVT_X86_STENCIL(AVX512, convt_avx512_stencil_f64, 1, double, __m512d, 8, unsigned,
                  lanes_between_8, _mm512_setzero_pd, _mm512_loadu_pd, _mm512_storeu_pd,
                  MASKED_LOAD_PD, MASKED_STORE_PD, SPLAT_PD, _mm512_fmadd_pd)

CONVT_X86_CHANNEL_TAILS(AVX512)
CONVT_X86_CHANNELS(AVX512, convt_avx512_channels_f32, float, __m512, 16, _mm512_loadu_ps,
                   _mm512_storeu_ps, _mm512_fmadd_ps, convt_channel_tail_f32)
CONVT_X86_CHANNELS(AVX512, convt_avx512_channels_f64, double, __m512d, 8, _mm512_loadu_pd,
                   _mm512_storeu_pd, _mm512_fmadd_pd, convt_channel_tail_f64)

CONVT_AVX512_PACK_PAIR(pack_pair_f32, float, _mm512_loadu_ps, _mm512_store_ps, 16, 1)
CONVT_AVX512_PACK_PAIR(pack_pair_f64, double, _mm512_loadu_pd, _mm512_store_pd, 8, 1)

/* The depthwise planes on 512-bit vectors: a block of 4 rows x 2 vectors covers
 * 32 outputs of a row, or 8 rows of up to 16, with half the loads of 256-bit
 * vectors per output (a shifted tap's 512-bit load always straddles two cache
 * lines, a 256-bit one half the time: fewer loads still, and fewer split ones
 * per output).  convt._dispatch.wide_planes says where they serve. */
#define PLANE_NAME(part) convt_avx512_plane_##part
#define PLANE_TARGET AVX512
#define PLANE_V_f32 __m512
#define PLANE_LANES_f32 16
#define PLANE_ZERO_f32() _mm512_setzero_ps()
#define PLANE_SPLAT_f32(v) _mm512_set1_ps(v)
#define PLANE_LOAD_f32(p) _mm512_loadu_ps(p)
#define PLANE_STORE_f32(p, v) _mm512_storeu_ps((p), (v))
#define PLANE_ADD_f32(a, b) _mm512_add_ps(a, b)
#define PLANE_MADD_f32(w, x, acc) _mm512_fmadd_ps(w, x, acc)
#define PLANE_V_f64 __m512d
#define PLANE_LANES_f64 8
#define PLANE_ZERO_f64() _mm512_setzero_pd()
#define PLANE_SPLAT_f64(v) _mm512_set1_pd(v)
#define PLANE_LOAD_f64(p) _mm512_loadu_pd(p)
#define PLANE_STORE_f64(p, v) _mm512_storeu_pd((p), (v))
#define PLANE_ADD_f64(a, b) _mm512_add_pd(a, b)
#define PLANE_MADD_f64(w, x, acc) _mm512_fmadd_pd(w, x, acc)
/* (see x86_avx2.c: keeps the fill's row copies inline) */
#if defined(__GNUC__) || defined(__clang__)
#define PLANE_OPAQUE_f32(v) __asm__("" : "+v"(v))
#define PLANE_OPAQUE_f64(v) __asm__("" : "+v"(v))
#endif
#include "plane_body.h"

const convt_kernels_f32 convt_avx512_f32 = {
    "avx512", MR, 16, AVX512_FLAGS | CONVT_SET_TRANSPOSED | CONVT_SET_T_RUNS | CONVT_SET_STREAM_B,
    GEMM_TABLE(gemm_zf_r), GEMM_TABLE(gemm_pack_zf_r), GEMM_TABLE(gemm_yf_r),
    {PAIR_TABLE(pair_zf_r), PAIR_TABLE(pair_yf_r)},
    {{PAIR_TABLE(store_f16_z_r), PAIR_TABLE(store_f16_y_r)},
     {PAIR_TABLE(store_bf16_z_r), PAIR_TABLE(store_bf16_y_r)},
     {PAIR_TABLE(store_f32_z_r), PAIR_TABLE(store_f32_y_r)},
     AVX512_NO_STORES},
    AVX512_SHARED_F32, pack_pair_f32, convt_avx2_transpose_f32,
    convt_avx512_stencil_f32, GEMM_T_TABLES(gemm_t_yf_p, gemm_t_zf_p),
    convt_avx2_winograd_input_f32,
    convt_avx2_winograd_output_f32, convt_avx512_plane_f32,
    convt_avx2_interleave_stream_f32, convt_avx512_plane_channels_f32,
    GEMM_TABLE(gemm_stream_zf_r)};

const convt_kernels_f64 convt_avx512_f64 = {
    "avx512", MR, 8, AVX512_FLAGS | CONVT_SET_TRANSPOSED | CONVT_SET_T_RUNS | CONVT_SET_STREAM_B,
    GEMM_TABLE(gemm_zd_r), GEMM_TABLE(gemm_pack_zd_r), GEMM_TABLE(gemm_yd_r),
    {PAIR_TABLE(pair_zd_r), PAIR_TABLE(pair_yd_r)},
    {AVX512_NO_STORES, AVX512_NO_STORES, AVX512_NO_STORES,
     {PAIR_TABLE(store_f64_z_r), PAIR_TABLE(store_f64_y_r)}},
    AVX512_SHARED_F64, pack_pair_f64, convt_avx2_transpose_f64,
    convt_avx512_stencil_f64, GEMM_T_TABLES(gemm_t_yd_p, gemm_t_zd_p), 0, 0,
    convt_avx512_plane_f64,
    convt_avx2_interleave_stream_f64, convt_avx512_plane_channels_f64,
    GEMM_TABLE(gemm_stream_zd_r)};


/* The FMA probe (cpu.h, convt_avx512_fma_speedup): the same register-only loop on
 * 512-bit and on 256-bit vectors, timed with the time-stamp counter, best of a
 * few interleaved runs (a run the OS interrupts only looks slower).  12
 * independent accumulators exceed FMA latency x pipes on current cores, so
 * the loop issues FMAs as fast as the core can; a = b = 0.5 keeps the values
 * finite.  About 0.1 ms on a 3 GHz core. */
#define PROBE_ACCUMULATORS 12
#define PROBE_ITERATIONS 1000
#define PROBE_RUNS 7
#define FMA_PROBE(NAME, V, SET1, FMADD, ADD, LANES)                                       \
    AVX512 static uint64_t NAME(volatile float *sink)                                     \
    {                                                                                     \
        const V a = SET1(0.5f), b = SET1(0.5f);                                           \
        V acc[PROBE_ACCUMULATORS];                                                        \
        float lanes[LANES];                                                               \
        uint64_t start;                                                                   \
        int k, i;                                                                         \
        for (k = 0; k < PROBE_ACCUMULATORS; ++k) acc[k] = SET1((float)k);                 \
        start = __rdtsc();                                                                \
        for (i = 0; i < PROBE_ITERATIONS; ++i)                                            \
            for (k = 0; k < PROBE_ACCUMULATORS; ++k) acc[k] = FMADD(acc[k], a, b);       \
        start = __rdtsc() - start;                                                        \
        for (k = 1; k < PROBE_ACCUMULATORS; ++k) acc[0] = ADD(acc[0], acc[k]);            \
        memcpy(lanes, &acc[0], sizeof lanes);                                             \
        *sink = lanes[0];                                                                 \
        return start;                                                                     \
    }
FMA_PROBE(probe_zmm, __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, 16)
FMA_PROBE(probe_ymm, __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, 8)

double convt_avx512_fma_speedup(void)
{
    volatile float sink;
    uint64_t zmm = UINT64_MAX, ymm = UINT64_MAX, t;
    int run;
    for (run = 0; run < PROBE_RUNS; ++run) {
        t = probe_ymm(&sink);
        if (t < ymm) ymm = t;
        t = probe_zmm(&sink);
        if (t < zmm) zmm = t;
    }
    /* each zmm FMA does twice a ymm FMA's work */
    return zmm ? 2.0 * (double)ymm / (double)zmm : 0.0;
}

#endif /* x86-64 */
