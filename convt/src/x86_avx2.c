/* The AVX2 + FMA kernel set (x86-64 CPUs from Haswell and Zen 1 on; F16C is
 * required too: every AVX2 CPU has it).
 *
 * GEMM: 6 rows x 2 vectors (16 floats or 8 doubles): 12 accumulators, 2 loads
 * and 6 broadcasts per step of depth, FMA-bound on every AVX2 core.  The 16
 * YMM registers leave no room for block totals, so each block is added to C in
 * memory (which is the families' arithmetic anyway).  B rows straddling cache
 * lines cost ~10% (30% on Zen 3), so the first row block of a tile may copy
 * them for the others (gemm_pack).  Half kernels (1 vector) serve a tile's
 * last panel of <= 8 floats.  Pair kernels compute two stride phases of a last
 * axis at once: the even rows on the even B vectors, then the odd rows on the
 * odd ones loaded into the same two registers (15 registers in all); storing
 * pairs sum into a tile on the stack, then interleave it into y (exact stacks,
 * see _plan.py), and pack_pair copies a full pair panel's operands to an
 * aligned buffer first.  No masked stores: VMASKMOVPS stores are microcoded
 * and slow on AMD cores, so store_even is the portable one.
 */
#include "sets.h"

#ifdef CONVT_X86_64
#include "x86_intrinsics.h"
#include "prefetch.h"
#include <math.h>
#include <string.h>

#define AVX2 CONVT_TARGET("avx2,fma,f16c")
#define MR 6

/* The kernels' constants are enumerators of each function: ROWS, VECTORS (B
 * vectors per row: 2, or 1 for half panels), PAIRED (odd rows read B `b_shift`
 * further and write C `c_shift` further) and PACK (gemm_pack).  Rows whose
 * index is not below ROWS compile away. */

/* Row i of the block: broadcast bc[at_i] (a's row i, at_i = i; B's position i in
 * gemm_t, at_i = positions[i]), one FMA per vector. */
#define STEP_ROW(i, BROADCAST, FMA, ci0, ci1)                                             \
    if ((i) < ROWS) {                                                                     \
        x = BROADCAST(bc + at_##i);                                                       \
        ci0 = FMA(x, b0, ci0);                                                            \
        if (VECTORS > 1) ci1 = FMA(x, b1, ci1);                                           \
    }
/* C row i = the block sum (first block, not accumulating) or C + block sum. */
#define FINISH_ROW(i, T, LOAD, STORE, ADD, W, ci0, ci1)                                    \
    if ((i) < ROWS) {                                                                     \
        T *out = c + (i) * ldc + (PAIRED && ((i) & 1) ? c_shift : 0);                     \
        if (!first) {                                                                     \
            ci0 = ADD(LOAD(out), ci0);                                                    \
            if (VECTORS > 1) ci1 = ADD(LOAD(out + (W)), ci1);                             \
        }                                                                                 \
        STORE(out, ci0);                                                                  \
        if (VECTORS > 1) STORE(out + (W), ci1);                                           \
    }

/* Blocked sums of kernel_set.h into c (row stride ldc); `first` says c holds
 * nothing yet.  12 accumulators, 2 B vectors and a broadcast fill the 16 YMM
 * registers, so the block totals go through C.  Pairs run the even rows on
 * the even B vectors, then load the odd ones into the same registers.
 * TRANSPOSED (gemm_t): the vectors are a's rows, VECTORS * W per step, and the
 * broadcasts B's positions; ROWS counts positions. */
#define POSITION(i) (TRANSPOSED && (i) < ROWS ? positions[i] : (i))
#define BLOCKED_SUMS(T, V, SETZERO, LOAD, STORE, BROADCAST, FMA, ADD, W)                  \
    {                                                                                     \
        ptrdiff_t k = 0, end;                                                             \
        const ptrdiff_t at_0 = POSITION(0), at_1 = POSITION(1), at_2 = POSITION(2);       \
        const ptrdiff_t at_3 = POSITION(3), at_4 = POSITION(4), at_5 = POSITION(5);       \
        while (k < depth) {                                                               \
            V c00 = SETZERO(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;     \
            V c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;           \
            end = k + block < depth ? k + block : depth;                                  \
            for (; k < end; ++k, a += TRANSPOSED ? VECTORS * (W) : ROWS) {                \
                const T *row = b + offsets[k];                                            \
                const T *vec = TRANSPOSED ? a : row, *bc = TRANSPOSED ? row : a;          \
                V b0 = LOAD(vec), b1 = VECTORS > 1 ? LOAD(vec + (W)) : b0, x;             \
                convt_prefetch_weights(a, ROWS);                                          \
                if (PACK) {                                                               \
                    STORE(pack_to + 2 * (W) * k, b0);                                     \
                    STORE(pack_to + 2 * (W) * k + (W), b1);                               \
                }                                                                         \
                STEP_ROW(0, BROADCAST, FMA, c00, c01)                                     \
                if (!PAIRED) STEP_ROW(1, BROADCAST, FMA, c10, c11)                        \
                STEP_ROW(2, BROADCAST, FMA, c20, c21)                                     \
                if (!PAIRED) STEP_ROW(3, BROADCAST, FMA, c30, c31)                        \
                STEP_ROW(4, BROADCAST, FMA, c40, c41)                                     \
                if (!PAIRED) STEP_ROW(5, BROADCAST, FMA, c50, c51)                        \
                if (PAIRED) {                                                             \
                    b0 = LOAD(row + b_shift);                                             \
                    if (VECTORS > 1) b1 = LOAD(row + b_shift + (W));                      \
                    STEP_ROW(1, BROADCAST, FMA, c10, c11)                                 \
                    STEP_ROW(3, BROADCAST, FMA, c30, c31)                                 \
                    STEP_ROW(5, BROADCAST, FMA, c50, c51)                                 \
                }                                                                         \
            }                                                                             \
            FINISH_ROW(0, T, LOAD, STORE, ADD, W, c00, c01)                               \
            FINISH_ROW(1, T, LOAD, STORE, ADD, W, c10, c11)                               \
            FINISH_ROW(2, T, LOAD, STORE, ADD, W, c20, c21)                               \
            FINISH_ROW(3, T, LOAD, STORE, ADD, W, c30, c31)                               \
            FINISH_ROW(4, T, LOAD, STORE, ADD, W, c40, c41)                               \
            FINISH_ROW(5, T, LOAD, STORE, ADD, W, c50, c51)                               \
            first = 0;                                                                    \
        }                                                                                 \
    }

/* gemm (VECTORS 2), gemm_pack (PACK) and half (VECTORS 1). */
#define DEFINE_GEMM(NAME, R, NV, PK, T, V, SETZERO, LOAD, STORE, BROADCAST, FMA, ADD, W)  \
    AVX2 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,       \
                          const ptrdiff_t *offsets, T *c, ptrdiff_t ldc, int accumulate,  \
                          T *pack_to)                                                     \
    {                                                                                     \
        enum { ROWS = R, VECTORS = NV, PAIRED = 0, PACK = PK, TRANSPOSED = 0 };           \
        const ptrdiff_t b_shift = 0, c_shift = 0, *positions = NULL;                      \
        int first = !accumulate;                                                          \
        (void)pack_to;                                                                    \
        (void)positions;                                                                  \
        (void)b_shift;                                                                    \
        (void)c_shift;                                                                    \
        BLOCKED_SUMS(T, V, SETZERO, LOAD, STORE, BROADCAST, FMA, ADD, W)                  \
    }

/* Pairs: blocked sums into c, odd rows reading B `b_shift` and writing C
 * `c_shift` further.  Not inlined: the storing pairs pass a tile on the
 * stack, which the compiler would otherwise try to keep in registers. */
#define DEFINE_PAIR_SUMS(NAME, R, NV, T, V, SETZERO, LOAD, STORE, BROADCAST, FMA, ADD, W) \
    AVX2 CONVT_NOINLINE static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a,    \
                                         const T *b, const ptrdiff_t *offsets,            \
                                         ptrdiff_t b_shift, T *c, ptrdiff_t ldc,          \
                                         ptrdiff_t c_shift, int first)                    \
    {                                                                                     \
        enum { ROWS = R, VECTORS = NV, PAIRED = 1, PACK = 0, TRANSPOSED = 0 };            \
        T *pack_to = NULL;                                                                \
        const ptrdiff_t *positions = NULL;                                                \
        (void)pack_to;                                                                    \
        (void)positions;                                                                  \
        BLOCKED_SUMS(T, V, SETZERO, LOAD, STORE, BROADCAST, FMA, ADD, W)                  \
    }
#define DEFINE_PAIR(NAME, R, NV, T, V, SETZERO, LOAD, STORE, BROADCAST, FMA, ADD, W)      \
    DEFINE_PAIR_SUMS(NAME##_sums, R, NV, T, V, SETZERO, LOAD, STORE, BROADCAST, FMA, ADD, W) \
    AVX2 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,       \
                          const ptrdiff_t *offsets, ptrdiff_t sibling, T *c,              \
                          ptrdiff_t ldc, int accumulate)                                  \
    {                                                                                     \
        NAME##_sums(depth, block, a, b, offsets, sibling, c, ldc, sibling, !accumulate);  \
    }

/* Storing pairs: the blocked sums go to a tile on the stack; the sums of rows
 * 2j and 2j + 1 are the even and odd outputs of one channel: interleaved
 * (unpack, then the 128-bit lanes in order), then y = v + bias or y = y + v,
 * rounded once to the storage type (YLOAD widens a vector exactly, YSTORE
 * rounds one). */
#define DEFINE_PAIR_STORE(NAME, SUMS, R, NV, T, YT, V, W, LOAD, YLOAD, YSTORE, SET1, ADD, \
                          UNPACKLO, UNPACKHI, PERMUTE)                                    \
    AVX2 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,       \
                          const ptrdiff_t *offsets, ptrdiff_t sibling, void *y,           \
                          ptrdiff_t ldy, int accumulate, const T *bias)                   \
    {                                                                                     \
        enum { ROWS = R, VECTORS = NV };                                                  \
        T tile[MR * 2 * (W)];                                           \
        const ptrdiff_t ldt = (NV) * (W);                                                 \
        int j, v;                                                                         \
        if (depth < 1) memset(tile, 0, sizeof tile); /* sums of nothing */                \
        SUMS(depth, block, a, b, offsets, sibling, tile, ldt, 0, 1);                      \
        for (j = 0; 2 * j < ROWS; ++j)                                                    \
            for (v = 0; v < VECTORS; ++v) {                                               \
                V even = LOAD(tile + 2 * j * ldt + v * (W));                              \
                V odd = LOAD(tile + (2 * j + 1) * ldt + v * (W));                         \
                V lo = UNPACKLO(even, odd), hi = UNPACKHI(even, odd);                     \
                V low = PERMUTE(lo, hi, 0x20), high = PERMUTE(lo, hi, 0x31);              \
                YT *at = (YT *)y + j * ldy + 2 * v * (W);                                 \
                if (accumulate) {                                                         \
                    low = ADD(YLOAD(at), low);                                            \
                    high = ADD(YLOAD(at + (W)), high);                                    \
                } else if (bias) {                                                        \
                    low = ADD(low, SET1(bias[j]));                                        \
                    high = ADD(high, SET1(bias[j]));                                      \
                }                                                                         \
                YSTORE(at, low);                                                          \
                YSTORE(at + (W), high);                                                   \
            }                                                                             \
    }

/* pack_pair: both operands of every step of a full panel (2 vectors), aligned. */
#define DEFINE_PACK_PAIR(NAME, T, LOADU, STORE, W)                                        \
    AVX2 static void NAME(ptrdiff_t depth, const T *b, const ptrdiff_t *offsets,          \
                          ptrdiff_t sibling, T *to)                                       \
    {                                                                                     \
        ptrdiff_t k;                                                                      \
        for (k = 0; k < depth; ++k) {                                                     \
            const T *even = b + offsets[k], *odd = even + sibling;                        \
            T *low = to + 2 * (W) * k, *high = to + 2 * (W) * (depth + k);                \
            STORE(low, LOADU(even));                                                      \
            STORE(low + (W), LOADU(even + (W)));                                          \
            STORE(high, LOADU(odd));                                                      \
            STORE(high + (W), LOADU(odd + (W)));                                          \
        }                                                                                 \
    }

/* Vector flavours: float (8 lanes) and double (4 lanes). */
#define F32 float, __m256, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_storeu_ps,         \
    _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_add_ps, 8
#define F64 double, __m256d, _mm256_setzero_pd, _mm256_loadu_pd, _mm256_storeu_pd,       \
    _mm256_broadcast_sd, _mm256_fmadd_pd, _mm256_add_pd, 4
/* CALL(M, (a, b)) is M(a, b) once the arguments are expanded (portable to MSVC). */
#define CALL(MACRO, ARGUMENTS) MACRO ARGUMENTS

#define GEMMS(P, NV, PK, FLAVOUR)                                                         \
    CALL(DEFINE_GEMM, (P##1, 1, NV, PK, FLAVOUR)) CALL(DEFINE_GEMM, (P##2, 2, NV, PK, FLAVOUR)) \
    CALL(DEFINE_GEMM, (P##3, 3, NV, PK, FLAVOUR)) CALL(DEFINE_GEMM, (P##4, 4, NV, PK, FLAVOUR)) \
    CALL(DEFINE_GEMM, (P##5, 5, NV, PK, FLAVOUR)) CALL(DEFINE_GEMM, (P##6, 6, NV, PK, FLAVOUR))
#define GEMM_TABLE(P) {P##1, P##2, P##3, P##4, P##5, P##6}
GEMMS(gemm_f32_r, 2, 0, F32)
GEMMS(gemm_pack_f32_r, 2, 1, F32)
GEMMS(half_f32_r, 1, 0, F32)
GEMMS(gemm_f64_r, 2, 0, F64)
GEMMS(gemm_pack_f64_r, 2, 1, F64)
GEMMS(half_f64_r, 1, 0, F64)

/* Transposed GEMM (gemm_t): the weights are the vectors and the positions the
 * broadcasts, c[j * ldc + i] (+)= sum_k a[k * VECTORS * W + i] *
 * b[offsets[k] + positions[j]] for P positions j and VECTORS * W weight rows i
 * (positions in any order and spacing: a call may skip a window's margin
 * columns, and each position's index costs a register, not a load per step).
 * Every output's arithmetic is
 * gemm's (FMA operands commute exactly), so products are bitwise the same; the
 * weight rows are read aligned and whole, and B needs no vector loads at all, so
 * nothing straddles cache lines and no B panel is packed. */
#define DEFINE_GEMM_T(NAME, P, NV, T, V, SETZERO, LOAD, STORE, BROADCAST, FMA, ADD, W)    \
    AVX2 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,       \
                          const ptrdiff_t *offsets, const ptrdiff_t *positions, T *c,     \
                          ptrdiff_t ldc, int accumulate)                                  \
    {                                                                                     \
        enum { ROWS = P, VECTORS = NV, PAIRED = 0, PACK = 0, TRANSPOSED = 1 };            \
        const ptrdiff_t b_shift = 0, c_shift = 0;                                         \
        T *pack_to = NULL;                                                                \
        int first = !accumulate;                                                          \
        (void)pack_to;                                                                    \
        (void)b_shift;                                                                    \
        (void)c_shift;                                                                    \
        BLOCKED_SUMS(T, V, SETZERO, LOAD, STORE, BROADCAST, FMA, ADD, W)                  \
    }
#define GEMMS_T(P, NV, FLAVOUR)                                                           \
    CALL(DEFINE_GEMM_T, (P##1, 1, NV, FLAVOUR)) CALL(DEFINE_GEMM_T, (P##2, 2, NV, FLAVOUR)) \
    CALL(DEFINE_GEMM_T, (P##3, 3, NV, FLAVOUR)) CALL(DEFINE_GEMM_T, (P##4, 4, NV, FLAVOUR)) \
    CALL(DEFINE_GEMM_T, (P##5, 5, NV, FLAVOUR)) CALL(DEFINE_GEMM_T, (P##6, 6, NV, FLAVOUR))
GEMMS_T(gemm_t_f32_v1_p, 1, F32)
GEMMS_T(gemm_t_f32_v2_p, 2, F32)
GEMMS_T(gemm_t_f64_v1_p, 1, F64)
GEMMS_T(gemm_t_f64_v2_p, 2, F64)
#define GEMM_T_TABLES(S) {GEMM_TABLE(gemm_t_##S##_v1_p), GEMM_TABLE(gemm_t_##S##_v2_p)}

#define PAIRS(P, NV, FLAVOUR)                                                             \
    CALL(DEFINE_PAIR, (P##2, 2, NV, FLAVOUR)) CALL(DEFINE_PAIR, (P##4, 4, NV, FLAVOUR))   \
    CALL(DEFINE_PAIR, (P##6, 6, NV, FLAVOUR))
#define PAIR_TABLE(P) {P##2, P##4, P##6}
PAIRS(pair_f32_r, 2, F32)
PAIRS(pair_half_f32_r, 1, F32)
PAIRS(pair_f64_r, 2, F64)
PAIRS(pair_half_f64_r, 1, F64)

/* Widening loads and rounding stores of one vector per storage type. */
#define LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define STORE_F16(p, v) _mm_storeu_si128((__m128i *)(p), \
    _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define LOAD_BF16(p) _mm256_castsi256_ps(_mm256_slli_epi32( \
    _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define STORE_BF16(p, v) _mm_storeu_si128((__m128i *)(p), float_to_bf16_avx2(v))
AVX2 static __m128i float_to_bf16_avx2(__m256 value);

/* DEFINE_PAIR_STORE arguments per storage after NAME, SUMS, ROWS and VECTORS. */
#define ST_F32 float, float, __m256, 8, _mm256_loadu_ps, _mm256_loadu_ps, _mm256_storeu_ps, \
    _mm256_set1_ps, _mm256_add_ps, _mm256_unpacklo_ps, _mm256_unpackhi_ps,                 \
    _mm256_permute2f128_ps
#define ST_F16 float, uint16_t, __m256, 8, _mm256_loadu_ps, LOAD_F16, STORE_F16,           \
    _mm256_set1_ps, _mm256_add_ps, _mm256_unpacklo_ps, _mm256_unpackhi_ps,                 \
    _mm256_permute2f128_ps
#define ST_BF16 float, uint16_t, __m256, 8, _mm256_loadu_ps, LOAD_BF16, STORE_BF16,        \
    _mm256_set1_ps, _mm256_add_ps, _mm256_unpacklo_ps, _mm256_unpackhi_ps,                 \
    _mm256_permute2f128_ps
#define ST_F64 double, double, __m256d, 4, _mm256_loadu_pd, _mm256_loadu_pd,               \
    _mm256_storeu_pd, _mm256_set1_pd, _mm256_add_pd, _mm256_unpacklo_pd,                   \
    _mm256_unpackhi_pd, _mm256_permute2f128_pd
#define STORES(P, SUMS, NV, STORAGE)                                                      \
    CALL(DEFINE_PAIR_STORE, (P##2, SUMS##2_sums, 2, NV, STORAGE))                         \
    CALL(DEFINE_PAIR_STORE, (P##4, SUMS##4_sums, 4, NV, STORAGE))                         \
    CALL(DEFINE_PAIR_STORE, (P##6, SUMS##6_sums, 6, NV, STORAGE))
STORES(store_f32_r, pair_f32_r, 2, ST_F32)
STORES(store_half_f32_r, pair_half_f32_r, 1, ST_F32)
STORES(store_f16_r, pair_f32_r, 2, ST_F16)
STORES(store_half_f16_r, pair_half_f32_r, 1, ST_F16)
STORES(store_bf16_r, pair_f32_r, 2, ST_BF16)
STORES(store_half_bf16_r, pair_half_f32_r, 1, ST_BF16)
STORES(store_f64_r, pair_f64_r, 2, ST_F64)
STORES(store_half_f64_r, pair_half_f64_r, 1, ST_F64)

DEFINE_PACK_PAIR(pack_pair_f32, float, _mm256_loadu_ps, _mm256_store_ps, 8)
DEFINE_PACK_PAIR(pack_pair_f64, double, _mm256_loadu_pd, _mm256_store_pd, 4)

/* Direct-engine rows (CONVT_X86_ROW): lanes [0, n) of a vector of 8 floats or 4
 * doubles, for the masked loads and stores of the last partial vector. */
AVX2 static inline __m256i lanes_below_f32(ptrdiff_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
AVX2 static inline __m256i lanes_below_f64(ptrdiff_t n)
{
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x((long long)n), _mm256_setr_epi64x(0, 1, 2, 3));
}

CONVT_X86_ROW(AVX2, convt_avx2_row_f32, float, __m256, 8, __m256i, lanes_below_f32,
              _mm256_setzero_ps, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_maskload_ps,
              _mm256_maskstore_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, fmaf)
CONVT_X86_ROW(AVX2, convt_avx2_row_f64, double, __m256d, 4, __m256i, lanes_below_f64,
              _mm256_setzero_pd, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_maskload_pd,
              _mm256_maskstore_pd, _mm256_broadcast_sd, _mm256_fmadd_pd, fma)

/* Stencils (CONVT_X86_STENCIL): lanes [lo, hi), clamped first so that the
 * compares above see small ints. */
AVX2 static inline __m256i lanes_between_f32(ptrdiff_t lo, ptrdiff_t hi)
{
    lo = lo < 0 ? 0 : lo > 8 ? 8 : lo;
    hi = hi < 0 ? 0 : hi > 8 ? 8 : hi;
    return _mm256_andnot_si256(lanes_below_f32(lo), lanes_below_f32(hi));
}
AVX2 static inline __m256i lanes_between_f64(ptrdiff_t lo, ptrdiff_t hi)
{
    lo = lo < 0 ? 0 : lo > 4 ? 4 : lo;
    hi = hi < 0 ? 0 : hi > 4 ? 4 : hi;
    return _mm256_andnot_si256(lanes_below_f64(lo), lanes_below_f64(hi));
}

CONVT_X86_STENCIL(AVX2 static, stencil_f32, 0, float, __m256, 8, __m256i, lanes_between_f32,
                  _mm256_setzero_ps, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_maskload_ps,
                  _mm256_maskstore_ps, _mm256_broadcast_ss, _mm256_fmadd_ps)
CONVT_X86_STENCIL(AVX2 static, stencil_f64, 0, double, __m256d, 4, __m256i, lanes_between_f64,
                  _mm256_setzero_pd, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_maskload_pd,
                  _mm256_maskstore_pd, _mm256_broadcast_sd, _mm256_fmadd_pd)

CONVT_X86_CHANNEL_TAILS(AVX2)
CONVT_X86_CHANNELS(AVX2 static, channels_f32, float, __m256, 8, _mm256_loadu_ps,
                   _mm256_storeu_ps, _mm256_fmadd_ps, convt_channel_tail_f32)
CONVT_X86_CHANNELS(AVX2 static, channels_f64, double, __m256d, 4, _mm256_loadu_pd,
                   _mm256_storeu_pd, _mm256_fmadd_pd, convt_channel_tail_f64)

/* 2 W outputs per step: unpack the halves, then put the 128-bit lanes in order;
 * steps y[2 i...] from pair i on while W pairs remain (i is the caller's). */
#define INTERLEAVE_STEPS(V, W, SET1, LOAD, ADD, UNPACKLO, UNPACKHI, PERMUTE, STORE)       \
    {                                                                                     \
        V b = SET1(bias);                                                                 \
        for (; i + (W) <= pairs; i += (W)) {                                              \
            V e = ADD(LOAD(even + i), b), o = ADD(LOAD(odd + i), b);                      \
            V lo = UNPACKLO(e, o), hi = UNPACKHI(e, o);                                   \
            STORE(y + 2 * i, PERMUTE(lo, hi, 0x20));                                      \
            STORE(y + 2 * i + (W), PERMUTE(lo, hi, 0x31));                                \
        }                                                                                 \
    }
#define INTERLEAVE_STEPS_F32(STORE)                                                       \
    INTERLEAVE_STEPS(__m256, 8, _mm256_set1_ps, _mm256_loadu_ps, _mm256_add_ps,          \
                     _mm256_unpacklo_ps, _mm256_unpackhi_ps, _mm256_permute2f128_ps, STORE)
#define INTERLEAVE_STEPS_F64(STORE)                                                       \
    INTERLEAVE_STEPS(__m256d, 4, _mm256_set1_pd, _mm256_loadu_pd, _mm256_add_pd,         \
                     _mm256_unpacklo_pd, _mm256_unpackhi_pd, _mm256_permute2f128_pd, STORE)

#define DEFINE_INTERLEAVE(NAME, T, STEPS, STORE)                                          \
    AVX2 void NAME(T *y, const T *even, const T *odd, ptrdiff_t pairs, T bias)            \
    {                                                                                     \
        ptrdiff_t i = 0;                                                                  \
        STEPS(STORE)                                                                      \
        for (; i < pairs; ++i) {                                                          \
            y[2 * i] = even[i] + bias;                                                    \
            y[2 * i + 1] = odd[i] + bias;                                                 \
        }                                                                                 \
    }
DEFINE_INTERLEAVE(convt_avx2_interleave_f32, float, INTERLEAVE_STEPS_F32, _mm256_storeu_ps)
DEFINE_INTERLEAVE(convt_avx2_interleave_f64, double, INTERLEAVE_STEPS_F64, _mm256_storeu_pd)

/* The same with non-temporal stores (kernel_set.h, interleave_stream): from the
 * first pair whose y starts a cache line, every step (two vectors: a whole line)
 * goes past the caches; the pairs before it and a tail of less than a line go
 * through the plain kernel.  Lines are streamed whole only: a line written partly
 * past the caches and partly through them made 3-D outputs 3-4x slower.  NumPy's
 * large arrays start 16 bytes past a page, so every row of such an `out` starts
 * inside a line; storing all of it plainly made large 2-D outputs 1.2-1.6x slower
 * than convt's own, aligned, ones.  A row that starts inside a line streams only
 * if it spans STREAM_MISALIGNED_MIN_BYTES (on 2 Zen 4 cores a 3-D k1x2x2 output
 * of 256-byte rows, one line in four then cached, ran 1.3x slower at 2 threads
 * than with every row stored plainly; 512-byte rows and longer gained 1.2-1.4x);
 * one that no pair brings to a line's start (an odd element offset) never does. */
#define STREAM_MISALIGNED_MIN_BYTES 512
#define DEFINE_INTERLEAVE_STREAM(NAME, PLAIN, T, STEPS, STREAM)                           \
    AVX2 void NAME(T *y, const T *even, const T *odd, ptrdiff_t pairs, T bias)            \
    {                                                                                     \
        const size_t offset = (size_t)((uintptr_t)y & 63);                                \
        ptrdiff_t i = 0;                                                                  \
        if (offset == 0 || (offset % (2 * sizeof(T)) == 0                                 \
                            && pairs * 2 * (ptrdiff_t)sizeof(T)                           \
                               >= STREAM_MISALIGNED_MIN_BYTES)) {                         \
            ptrdiff_t head = offset ? (ptrdiff_t)((64 - offset) / (2 * sizeof(T))) : 0;   \
            if (head > pairs) head = pairs;                                               \
            PLAIN(y, even, odd, head, bias);                                              \
            i = head;                                                                     \
            STEPS(STREAM)                                                                 \
        }                                                                                 \
        PLAIN(y + 2 * i, even + i, odd + i, pairs - i, bias);                             \
    }
DEFINE_INTERLEAVE_STREAM(convt_avx2_interleave_stream_f32, convt_avx2_interleave_f32, float,
                         INTERLEAVE_STEPS_F32, _mm256_stream_ps)
DEFINE_INTERLEAVE_STREAM(convt_avx2_interleave_stream_f64, convt_avx2_interleave_f64, double,
                         INTERLEAVE_STEPS_F64, _mm256_stream_pd)

#define DEFINE_ADD_BIAS(NAME, T, V, W, SET1, LOAD, ADD, STORE)                            \
    AVX2 void NAME(T *dst, const T *src, ptrdiff_t count, T bias)                         \
    {                                                                                     \
        V b = SET1(bias);                                                                 \
        ptrdiff_t i = 0;                                                                  \
        for (; i + (W) <= count; i += (W)) STORE(dst + i, ADD(LOAD(src + i), b));         \
        for (; i < count; ++i) dst[i] = src[i] + bias;                                    \
    }
DEFINE_ADD_BIAS(convt_avx2_add_bias_f32, float, __m256, 8, _mm256_set1_ps, _mm256_loadu_ps,
                _mm256_add_ps, _mm256_storeu_ps)
DEFINE_ADD_BIAS(convt_avx2_add_bias_f64, double, __m256d, 4, _mm256_set1_pd,
                _mm256_loadu_pd, _mm256_add_pd, _mm256_storeu_pd)

/* Storage conversions, 8 values per step (F16C converts exactly and rounds to
 * nearest even like the scalar code; NaN payloads may differ). */
AVX2 void convt_avx2_load_f16_f32(float *dst, const void *src, ptrdiff_t count)
{
    const uint16_t *halves = (const uint16_t *)src;
    ptrdiff_t i = 0;
    for (; i + 8 <= count; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(halves + i))));
    for (; i < count; ++i) dst[i] = convt_half_to_float(halves[i]);
}

AVX2 void convt_avx2_store_f16_f32(void *dst, const float *src, ptrdiff_t count, float bias)
{
    uint16_t *halves = (uint16_t *)dst;
    __m256 b = _mm256_set1_ps(bias);
    ptrdiff_t i = 0;
    for (; i + 8 <= count; i += 8)
        _mm_storeu_si128((__m128i *)(halves + i),
                         _mm256_cvtps_ph(_mm256_add_ps(_mm256_loadu_ps(src + i), b),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < count; ++i) halves[i] = convt_float_to_half(src[i] + bias);
}

AVX2 void convt_avx2_load_bf16_f32(float *dst, const void *src, ptrdiff_t count)
{
    const uint16_t *values = (const uint16_t *)src;
    ptrdiff_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(values + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
    }
    for (; i < count; ++i) dst[i] = convt_bf16_to_float(values[i]);
}

/* Round to nearest even on the bits, as convt_float_to_bf16 does. */
AVX2 static __m128i float_to_bf16_avx2(__m256 value)
{
    __m256i bits = _mm256_castps_si256(value);
    __m256i lowest_kept = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lowest_kept,
                                                              _mm256_set1_epi32(0x7fff)));
    __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(value, value, _CMP_UNORD_Q));
    __m256i high = _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
    return _mm_packus_epi32(_mm256_castsi256_si128(high), _mm256_extracti128_si256(high, 1));
}

AVX2 void convt_avx2_store_bf16_f32(void *dst, const float *src, ptrdiff_t count, float bias)
{
    uint16_t *values = (uint16_t *)dst;
    __m256 b = _mm256_set1_ps(bias);
    ptrdiff_t i = 0;
    for (; i + 8 <= count; i += 8)
        _mm_storeu_si128((__m128i *)(values + i),
                         float_to_bf16_avx2(_mm256_add_ps(_mm256_loadu_ps(src + i), b)));
    for (; i < count; ++i) values[i] = convt_float_to_bf16(src[i] + bias);
}

void convt_avx2_load_f32_f32(float *dst, const void *src, ptrdiff_t count)
{
    memcpy(dst, src, (size_t)count * sizeof(float));
}

void convt_avx2_load_f64_f64(double *dst, const void *src, ptrdiff_t count)
{
    memcpy(dst, src, (size_t)count * sizeof(double));
}

void convt_avx2_store_f32_f32(void *dst, const float *src, ptrdiff_t count, float bias)
{
    convt_avx2_add_bias_f32((float *)dst, src, count, bias);
}

void convt_avx2_store_f64_f64(void *dst, const double *src, ptrdiff_t count, double bias)
{
    convt_avx2_add_bias_f64((double *)dst, src, count, bias);
}

/* Transposes: 8 x 8 float (4 x 4 double) blocks in registers, the edges by
 * the portable blocked loops.  Bias (one per source row) is added after the
 * shuffle, as a vector along the destination row: the N transposed vectors
 * out[] plus bias, stored as the block's destination rows. */
#define STORE_TRANSPOSED(V, N, LOADU, ADD, STOREU)                                        \
    {                                                                                     \
        int c;                                                                            \
        if (bias) {                                                                       \
            V b = LOADU(bias);                                                            \
            for (c = 0; c < (N); ++c) out[c] = ADD(out[c], b);                            \
        }                                                                                 \
        for (c = 0; c < (N); ++c) STOREU(dst + c * dst_stride, out[c]);                   \
    }

/* Four floats at lo in the low half, four at hi in the high half. */
AVX2 static inline __m256 halves_f32(const float *lo, const float *hi)
{
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo)), _mm_loadu_ps(hi), 1);
}

AVX2 static inline void transpose_8x8_f32(const float *src, ptrdiff_t src_stride, float *dst,
                                          ptrdiff_t dst_stride, const float *bias)
{
    /* rows r and r + 4 share a vector (their columns 0-3, or 4-7, in its two
     * halves): the two 128-bit halves then never cross, and two shuffle stages
     * complete the transpose.  No array: every vector stays in a register. */
    const float *s4 = src + 4 * src_stride;
    __m256 r0 = halves_f32(src, s4), r1 = halves_f32(src + src_stride, s4 + src_stride);
    __m256 r2 = halves_f32(src + 2 * src_stride, s4 + 2 * src_stride);
    __m256 r3 = halves_f32(src + 3 * src_stride, s4 + 3 * src_stride);
    __m256 r4 = halves_f32(src + 4, s4 + 4);
    __m256 r5 = halves_f32(src + src_stride + 4, s4 + src_stride + 4);
    __m256 r6 = halves_f32(src + 2 * src_stride + 4, s4 + 2 * src_stride + 4);
    __m256 r7 = halves_f32(src + 3 * src_stride + 4, s4 + 3 * src_stride + 4);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 c0 = _mm256_shuffle_ps(t0, t2, 0x44), c1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 c2 = _mm256_shuffle_ps(t1, t3, 0x44), c3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 c4 = _mm256_shuffle_ps(t4, t6, 0x44), c5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 c6 = _mm256_shuffle_ps(t5, t7, 0x44), c7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    if (bias) {
        __m256 b = _mm256_loadu_ps(bias);
        c0 = _mm256_add_ps(c0, b), c1 = _mm256_add_ps(c1, b), c2 = _mm256_add_ps(c2, b);
        c3 = _mm256_add_ps(c3, b), c4 = _mm256_add_ps(c4, b), c5 = _mm256_add_ps(c5, b);
        c6 = _mm256_add_ps(c6, b), c7 = _mm256_add_ps(c7, b);
    }
    _mm256_storeu_ps(dst, c0);
    _mm256_storeu_ps(dst + dst_stride, c1);
    _mm256_storeu_ps(dst + 2 * dst_stride, c2);
    _mm256_storeu_ps(dst + 3 * dst_stride, c3);
    _mm256_storeu_ps(dst + 4 * dst_stride, c4);
    _mm256_storeu_ps(dst + 5 * dst_stride, c5);
    _mm256_storeu_ps(dst + 6 * dst_stride, c6);
    _mm256_storeu_ps(dst + 7 * dst_stride, c7);
}

/* A 4 x 4 float block on 128-bit vectors, for fewer than 8 rows. */
AVX2 static void transpose_4x4_f32(const float *src, ptrdiff_t src_stride, float *dst,
                                   ptrdiff_t dst_stride, const float *bias)
{
    __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + src_stride);
    __m128 r2 = _mm_loadu_ps(src + 2 * src_stride), r3 = _mm_loadu_ps(src + 3 * src_stride);
    __m128 t0 = _mm_unpacklo_ps(r0, r1), t1 = _mm_unpackhi_ps(r0, r1);
    __m128 t2 = _mm_unpacklo_ps(r2, r3), t3 = _mm_unpackhi_ps(r2, r3);
    __m128 out[4];
    out[0] = _mm_movelh_ps(t0, t2);
    out[1] = _mm_movehl_ps(t2, t0);
    out[2] = _mm_movelh_ps(t1, t3);
    out[3] = _mm_movehl_ps(t3, t1);
    STORE_TRANSPOSED(__m128, 4, _mm_loadu_ps, _mm_add_ps, _mm_storeu_ps)
}

AVX2 static void transpose_4x4_f64(const double *src, ptrdiff_t src_stride, double *dst,
                                   ptrdiff_t dst_stride, const double *bias)
{
    __m256d r0 = _mm256_loadu_pd(src), r1 = _mm256_loadu_pd(src + src_stride);
    __m256d r2 = _mm256_loadu_pd(src + 2 * src_stride), r3 = _mm256_loadu_pd(src + 3 * src_stride);
    __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    __m256d out[4];
    out[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    out[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    out[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    out[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
    STORE_TRANSPOSED(__m256d, 4, _mm256_loadu_pd, _mm256_add_pd, _mm256_storeu_pd)
}

/* Square blocks of B x B in registers over the largest multiple of B rows and
 * columns, in strips of TRANSPOSE_STRIP_BYTES of each source row: within a
 * strip, row block after row block, each reading its B rows' lines whole.  The
 * streamed Conv weights (convt._gemm streamed_weights) are 16-32 rows of w a
 * whole row apart (18 KiB for 512 x 3 x 3), which fall into two sets of L1:
 * transposed one 8-column strip of every row at a time, the second half of each
 * line had been evicted before it was read.  With strips of 256 bytes, 2048 -> 512
 * 1x1 on 7x7 ran 12-13% faster on 1 and 2 Zen 4 cores; the strip's destination
 * rows (64 x the block width) stay in L1. */
/* Whole B x B blocks; rows left below a multiple of B as one more block over the
 * last B rows (those before are moved again: the same values, bias included), and
 * so are columns left below a multiple of B when there are B or more;
 * fewer than B rows in (B/2) x (B/2) blocks the same way (HAS_HALF: HALF); the
 * columns left below a multiple of the block there, or fewer than B columns, by
 * the portable loops.  On a 7x7
 * map a 1x1 Conv's rows are 7 positions, which the portable loops moved one
 * element at a time (5-7% of the call). */
#ifndef TRANSPOSE_STRIP_BYTES
#define TRANSPOSE_STRIP_BYTES 256
#endif
#define AVX2_TRANSPOSE(S, T, B, BLOCK, HAS_HALF, HALF)                                    \
    AVX2 void convt_avx2_transpose_##S(ptrdiff_t rows, ptrdiff_t cols, const T *src,      \
                                       ptrdiff_t src_stride, T *dst, ptrdiff_t dst_stride, \
                                       const T *bias)                                     \
    {                                                                                     \
        ptrdiff_t r, c, strip, strip_end, whole_cols = 0;                                 \
        if (rows >= B) {                                                                  \
            whole_cols = cols - cols % B;                                                 \
            for (strip = 0; strip < whole_cols; strip += TRANSPOSE_STRIP_BYTES / sizeof(T)) { \
                strip_end = strip + TRANSPOSE_STRIP_BYTES / sizeof(T);                    \
                if (strip_end > whole_cols) strip_end = whole_cols;                       \
                for (r = 0; r + B <= rows; r += B)                                        \
                    for (c = strip; c < strip_end; c += B)                                \
                        BLOCK(src + r * src_stride + c, src_stride,                       \
                              dst + c * dst_stride + r, dst_stride, bias ? bias + r : NULL); \
                if (rows % B)                                                             \
                    for (c = strip; c < strip_end; c += B)                                \
                        BLOCK(src + (rows - B) * src_stride + c, src_stride,              \
                              dst + c * dst_stride + rows - B, dst_stride,                \
                              bias ? bias + rows - B : NULL);                             \
            }                                                                             \
            if (whole_cols < cols && cols >= B) {                                         \
                /* the last columns as one more block over the last B (the same */        \
                /* values again), as for the rows */                                      \
                c = cols - B;                                                             \
                for (r = 0; r + B <= rows; r += B)                                        \
                    BLOCK(src + r * src_stride + c, src_stride, dst + c * dst_stride + r, \
                          dst_stride, bias ? bias + r : NULL);                            \
                if (rows % B)                                                             \
                    BLOCK(src + (rows - B) * src_stride + c, src_stride,                  \
                          dst + c * dst_stride + rows - B, dst_stride,                    \
                          bias ? bias + rows - B : NULL);                                 \
                whole_cols = cols;                                                        \
            }                                                                             \
        } else if (HAS_HALF && rows >= B / 2) {                                           \
            whole_cols = cols - cols % (B / 2);                                           \
            for (c = 0; c < whole_cols; c += B / 2) {                                     \
                HALF(src + c, src_stride, dst + c * dst_stride, dst_stride, bias);        \
                if (rows % (B / 2))                                                       \
                    HALF(src + (rows - B / 2) * src_stride + c, src_stride,               \
                         dst + c * dst_stride + rows - B / 2, dst_stride,                 \
                         bias ? bias + rows - B / 2 : NULL);                              \
            }                                                                             \
        }                                                                                 \
        if (whole_cols < cols)                                                            \
            convt_portable_transpose_##S(rows, cols - whole_cols, src + whole_cols,       \
                                         src_stride, dst + whole_cols * dst_stride,       \
                                         dst_stride, bias);                               \
    }
AVX2_TRANSPOSE(f32, float, 8, transpose_8x8_f32, 1, transpose_4x4_f32)
#define NO_HALF(src, src_stride, dst, dst_stride, bias) ((void)0)
AVX2_TRANSPOSE(f64, double, 4, transpose_4x4_f64, 0, NO_HALF)

#define AVX2_FLAGS (CONVT_SET_PACK | CONVT_SET_HALF | CONVT_SET_PAIRS | CONVT_SET_FUSED |   \
                    CONVT_SET_PACK_PAIRS | CONVT_SET_TRANSPOSED | CONVT_SET_STREAM_STORES)
#define NO_STORES {{0}, {0}}
/* The Winograd transforms, vectorised by the compiler for AVX2 (the AVX-512 sets
 * share them: their loops are short rows of tiles). */
#define WINOGRAD_NAME(part) convt_avx2_winograd_##part
#define WINOGRAD_TARGET AVX2
#include "winograd_body.h"
#undef WINOGRAD_NAME
#undef WINOGRAD_TARGET
/* The depthwise planes on 256-bit vectors (the AVX-512 sets run them too where
 * their own 512-bit planes would compute more columns or gain nothing:
 * convt._dispatch.wide_planes). */
#define PLANE_NAME(part) convt_avx2_plane_##part
#define PLANE_TARGET AVX2
#define PLANE_V_f32 __m256
#define PLANE_LANES_f32 8
#define PLANE_ZERO_f32() _mm256_setzero_ps()
#define PLANE_SPLAT_f32(v) _mm256_set1_ps(v)
#define PLANE_LOAD_f32(p) _mm256_loadu_ps(p)
#define PLANE_STORE_f32(p, v) _mm256_storeu_ps((p), (v))
#define PLANE_ADD_f32(a, b) _mm256_add_ps(a, b)
#define PLANE_MADD_f32(w, x, acc) _mm256_fmadd_ps(w, x, acc)
#define PLANE_V_f64 __m256d
#define PLANE_LANES_f64 4
#define PLANE_ZERO_f64() _mm256_setzero_pd()
#define PLANE_SPLAT_f64(v) _mm256_set1_pd(v)
#define PLANE_LOAD_f64(p) _mm256_loadu_pd(p)
#define PLANE_STORE_f64(p, v) _mm256_storeu_pd((p), (v))
#define PLANE_ADD_f64(a, b) _mm256_add_pd(a, b)
#define PLANE_MADD_f64(w, x, acc) _mm256_fmadd_pd(w, x, acc)
/* an empty asm on the vector: GCC would turn the fill's row copies into memmove
 * calls (most rows are 4-16 vectors: the call cost more than the copy) */
#if defined(__GNUC__) || defined(__clang__)
#define PLANE_OPAQUE_f32(v) __asm__("" : "+x"(v))
#define PLANE_OPAQUE_f64(v) __asm__("" : "+x"(v))
#endif
#include "plane_body.h"

const convt_kernels_f32 convt_avx2_f32 = {
    "avx2", MR, 16, AVX2_FLAGS,
    GEMM_TABLE(gemm_f32_r), GEMM_TABLE(gemm_pack_f32_r), GEMM_TABLE(half_f32_r),
    {PAIR_TABLE(pair_f32_r), PAIR_TABLE(pair_half_f32_r)},
    {{PAIR_TABLE(store_f16_r), PAIR_TABLE(store_half_f16_r)},
     {PAIR_TABLE(store_bf16_r), PAIR_TABLE(store_half_bf16_r)},
     {PAIR_TABLE(store_f32_r), PAIR_TABLE(store_half_f32_r)},
     NO_STORES},
    convt_avx2_row_f32, channels_f32, convt_avx2_interleave_f32, convt_portable_store_even_f32,
    convt_avx2_add_bias_f32, CONVT_AVX2_LOADS_F32, CONVT_AVX2_STORES_F32, pack_pair_f32,
    convt_avx2_transpose_f32, stencil_f32, GEMM_T_TABLES(f32),
    convt_avx2_winograd_input_f32, convt_avx2_winograd_output_f32, convt_avx2_plane_f32,
    convt_avx2_interleave_stream_f32, convt_avx2_plane_channels_f32};

const convt_kernels_f64 convt_avx2_f64 = {
    "avx2", MR, 8, AVX2_FLAGS,
    GEMM_TABLE(gemm_f64_r), GEMM_TABLE(gemm_pack_f64_r), GEMM_TABLE(half_f64_r),
    {PAIR_TABLE(pair_f64_r), PAIR_TABLE(pair_half_f64_r)},
    {NO_STORES, NO_STORES, NO_STORES, {PAIR_TABLE(store_f64_r), PAIR_TABLE(store_half_f64_r)}},
    convt_avx2_row_f64, channels_f64, convt_avx2_interleave_f64, convt_portable_store_even_f64,
    convt_avx2_add_bias_f64, CONVT_AVX2_LOADS_F64, CONVT_AVX2_STORES_F64, pack_pair_f64,
    convt_avx2_transpose_f64, stencil_f64, GEMM_T_TABLES(f64), 0, 0, convt_avx2_plane_f64,
    convt_avx2_interleave_stream_f64, convt_avx2_plane_channels_f64};

#endif /* x86-64 */
