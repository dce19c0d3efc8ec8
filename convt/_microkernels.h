/* Register-blocked micro-kernels of convt's GEMM engine.
 *
 * One call computes a rows x NR block (rows <= MR) of C = A B over `depth`:
 *   a: [depth][rows]  (packed weights: the block's rows side by side)
 *   b + offsets[k] .. + NR: row k of B, NR consecutive positions of a
 *      zero-padded input tile (tap k of every position is a fixed offset
 *      away, so B is read in place: no im2col copy per tap);
 *   c: MR rows of NR values, row stride ldc; overwritten, or added to when
 *      `accumulate` is non-zero (K chunks after the first);
 *   block: blocked summation, for accuracy: every `block` steps of depth are
 *      summed from zero and then added to the total, so float32 errors grow
 *      with sqrt(block + depth / block) instead of sqrt(depth);
 *   pack_to: if not NULL, B rows are also stored there contiguously
 *      ([depth][NR], 64-byte aligned), for the other row blocks to read.
 * Positions are the vector dimension, so each row of C is NR contiguous
 * outputs of one (phase, channel), ready for the scatter to the output.
 *
 * Backends: a portable C kernel (every compiler and CPU), AVX2+FMA kernels
 * (6 rows x 2 vectors) and AVX-512F kernels (12 rows x 1 vector: with 32
 * registers, fewer loads per FMA, so B is read in place at full speed);
 * x86-64 kernels are chosen at run time by CPUID and compiled with target
 * attributes on GCC/Clang (MSVC accepts the intrinsics as they are).
 */
#ifndef CONVT_MICROKERNELS_H
#define CONVT_MICROKERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Rows per block (MR): at most CONVT_MAX_MR for any backend. */
#define CONVT_MR 6
#define CONVT_AVX512_MR 12
#define CONVT_MAX_MR 12

enum {
    CONVT_BACKEND_BLAS = 0,
    CONVT_BACKEND_PORTABLE = 1,
    CONVT_BACKEND_AVX2 = 2,
    CONVT_BACKEND_AVX512 = 3,
    CONVT_BACKEND_COUNT = 4
};

typedef void (*convt_kernel_f32)(ptrdiff_t depth, ptrdiff_t block, int rows, const float *a,
                                 const float *b, const ptrdiff_t *offsets, float *c,
                                 ptrdiff_t ldc, int accumulate, float *pack_to);
typedef void (*convt_kernel_f64)(ptrdiff_t depth, ptrdiff_t block, int rows, const double *a,
                                 const double *b, const ptrdiff_t *offsets, double *c,
                                 ptrdiff_t ldc, int accumulate, double *pack_to);
/* Pair kernels: as above for an even number of rows, where odd rows read B
 * and write C `sibling` positions further than even rows (two stride phases
 * of the last axis, one shift apart on the grid). */
typedef void (*convt_pair_f32)(ptrdiff_t depth, ptrdiff_t block, const float *a,
                               const float *b, const ptrdiff_t *offsets, ptrdiff_t sibling,
                               float *c, ptrdiff_t ldc, int accumulate);
typedef void (*convt_pair_f64)(ptrdiff_t depth, ptrdiff_t block, const double *a,
                               const double *b, const ptrdiff_t *offsets, ptrdiff_t sibling,
                               double *c, ptrdiff_t ldc, int accumulate);
/* Pair kernels that store straight into the output: pair j's two rows are the
 * even and odd outputs of one channel, so their totals are interleaved in
 * registers and stored as 2 NR contiguous values at y + j * ldy, plus bias[j]
 * (bias may be NULL), or added to what y holds when `accumulate`.  This skips
 * the product buffer and the scatter of exact stacks. */
typedef void (*convt_pair_store_f32)(ptrdiff_t depth, ptrdiff_t block, const float *a,
                                     const float *b, const ptrdiff_t *offsets,
                                     ptrdiff_t sibling, float *y, ptrdiff_t ldy,
                                     int accumulate, const float *bias);
typedef void (*convt_pair_store_f16)(ptrdiff_t depth, ptrdiff_t block, const float *a,
                                     const float *b, const ptrdiff_t *offsets,
                                     ptrdiff_t sibling, uint16_t *y, ptrdiff_t ldy,
                                     int accumulate, const float *bias);
typedef void (*convt_pair_store_f64)(ptrdiff_t depth, ptrdiff_t block, const double *a,
                                     const double *b, const ptrdiff_t *offsets,
                                     ptrdiff_t sibling, double *y, ptrdiff_t ldy,
                                     int accumulate, const double *bias);

/* ---------------------------------------------------------------- portable */

#define CONVT_PORTABLE_NR_F32 16
#define CONVT_PORTABLE_NR_F64 8

/* `rows` (1..MR) rows of a: [depth][rows]; the compiler vectorises over NR. */
#define CONVT_DEFINE_PORTABLE(NAME, T, NR)                                         \
    static void NAME(ptrdiff_t depth, ptrdiff_t block, int rows, const T *a,       \
                     const T *b, const ptrdiff_t *offsets, T *c, ptrdiff_t ldc,    \
                     int accumulate, T *pack_to)                                   \
    {                                                                              \
        T acc[CONVT_MR][NR];                                                       \
        ptrdiff_t k = 0, end;                                                      \
        int i, j;                                                                  \
        while (k < depth) {                                                        \
            end = k + block < depth ? k + block : depth;                           \
            for (i = 0; i < rows; ++i)                                             \
                for (j = 0; j < NR; ++j)                                           \
                    acc[i][j] = (T)0;                                              \
            for (; k < end; ++k, a += rows) {                                      \
                const T *row = b + offsets[k];                                     \
                if (pack_to)                                                       \
                    for (j = 0; j < NR; ++j)                                       \
                        pack_to[k * NR + j] = row[j];                              \
                for (i = 0; i < rows; ++i)                                         \
                    for (j = 0; j < NR; ++j)                                       \
                        acc[i][j] += a[i] * row[j];                                \
            }                                                                      \
            for (i = 0; i < rows; ++i)                                             \
                for (j = 0; j < NR; ++j)                                           \
                    c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j]; \
            accumulate = 1;                                                        \
        }                                                                          \
    }

CONVT_DEFINE_PORTABLE(convt_portable_f32, float, CONVT_PORTABLE_NR_F32)
CONVT_DEFINE_PORTABLE(convt_portable_f64, double, CONVT_PORTABLE_NR_F64)

/* ---------------------------------------------------------------- x86-64 */

#if defined(__x86_64__) || defined(_M_X64)
#define CONVT_X86_64 1
#include <immintrin.h>
#if defined(_MSC_VER)
#include <intrin.h>
#define CONVT_TARGET_AVX2
#define CONVT_TARGET_AVX512
static void convt_cpuid(int leaf, int sub, int regs[4]) { __cpuidex(regs, leaf, sub); }
static unsigned long long convt_xgetbv(void) { return _xgetbv(0); }
#else
#include <cpuid.h>
#define CONVT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define CONVT_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,fma,f16c")))
static void convt_cpuid(int leaf, int sub, int regs[4])
{
    unsigned int a, b, c, d;
    __cpuid_count(leaf, sub, a, b, c, d);
    regs[0] = (int)a; regs[1] = (int)b; regs[2] = (int)c; regs[3] = (int)d;
}
static unsigned long long convt_xgetbv(void)
{
    unsigned int lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

/* AVX2 and FMA present, and the OS saves the YMM state. */
static int convt_cpu_has_avx2_fma(void)
{
    int regs[4];
    convt_cpuid(0, 0, regs);
    if (regs[0] < 7) return 0;
    convt_cpuid(1, 0, regs);
    if (!(regs[2] & (1 << 12)) || !(regs[2] & (1 << 27)) || !(regs[2] & (1 << 28))) return 0;
    if ((convt_xgetbv() & 6) != 6) return 0;
    convt_cpuid(7, 0, regs);
    return (regs[1] & (1 << 5)) != 0;
}

/* AVX-512F and VL present (VL: the 256-bit tail kernels use all 32 registers),
 * F16C too (every AVX-512 CPU has it), and the OS saves the opmask and ZMM state. */
static int convt_cpu_has_avx512(void)
{
    int regs[4];
    if (!convt_cpu_has_avx2_fma()) return 0;
    if ((convt_xgetbv() & 0xe6) != 0xe6) return 0;
    convt_cpuid(1, 0, regs);
    if (!(regs[2] & (1 << 29))) return 0; /* F16C: the float16 output kernels */
    convt_cpuid(7, 0, regs);
    return (regs[1] & (1 << 16)) != 0 && (regs[1] & (1u << 31)) != 0;
}

#define CONVT_AVX2_NR_F32 16
#define CONVT_AVX2_NR_F64 8

/* One row i < ROWS of the block: broadcast a[i], two FMAs. */
#define CONVT_AVX2_ROW(i, ROWS, BROADCAST, FMA, ci0, ci1)                          \
    if ((i) < (ROWS)) {                                                           \
        x = BROADCAST(a + (i));                                                   \
        ci0 = FMA(x, b0, ci0);                                                    \
        ci1 = FMA(x, b1, ci1);                                                    \
    }
#define CONVT_AVX2_FINISH(i, ROWS, LOAD, STORE, ADD, W, ci0, ci1)                 \
    if ((i) < (ROWS)) {                                                           \
        if (accumulate) {                                                         \
            ci0 = ADD(ci0, LOAD(c + (i) * ldc));                                  \
            ci1 = ADD(ci1, LOAD(c + (i) * ldc + W));                              \
        }                                                                         \
        STORE(c + (i) * ldc, ci0);                                                \
        STORE(c + (i) * ldc + W, ci1);                                            \
    }

/* Two vectors of positions, ROWS (<= 6) rows: up to 12 accumulators, one
 * offset, 2 loads and ROWS broadcasts per step of depth, FMA-bound on every
 * AVX2 core.  ROWS is a constant, so unused rows compile away.  16 registers
 * leave no room for block totals: each block is added to C in memory. */
#define CONVT_DEFINE_AVX2(NAME, ROWS, PACK, T, V, SETZERO, LOAD, STORE, BROADCAST, FMA, ADD, W) \
    CONVT_TARGET_AVX2 static void NAME(ptrdiff_t depth, ptrdiff_t block, int rows,  \
                                       const T *a, const T *b,                      \
                                       const ptrdiff_t *offsets, T *c,              \
                                       ptrdiff_t ldc, int accumulate, T *pack_to)   \
    {                                                                               \
        ptrdiff_t k = 0, end;                                                       \
        (void)rows;                                                                 \
        (void)pack_to;                                                              \
        while (k < depth) {                                                         \
            V c00 = SETZERO(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00; \
            V c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;      \
            end = k + block < depth ? k + block : depth;                            \
            for (; k < end; ++k, a += (ROWS)) {                                     \
                const T *row = b + offsets[k];                                      \
                V b0 = LOAD(row), b1 = LOAD(row + W), x;                            \
                if (PACK) {                                                         \
                    STORE(pack_to + 2 * W * k, b0);                                 \
                    STORE(pack_to + 2 * W * k + W, b1);                             \
                }                                                                   \
                CONVT_AVX2_ROW(0, ROWS, BROADCAST, FMA, c00, c01)                   \
                CONVT_AVX2_ROW(1, ROWS, BROADCAST, FMA, c10, c11)                   \
                CONVT_AVX2_ROW(2, ROWS, BROADCAST, FMA, c20, c21)                   \
                CONVT_AVX2_ROW(3, ROWS, BROADCAST, FMA, c30, c31)                   \
                CONVT_AVX2_ROW(4, ROWS, BROADCAST, FMA, c40, c41)                   \
                CONVT_AVX2_ROW(5, ROWS, BROADCAST, FMA, c50, c51)                   \
            }                                                                       \
            CONVT_AVX2_FINISH(0, ROWS, LOAD, STORE, ADD, W, c00, c01)               \
            CONVT_AVX2_FINISH(1, ROWS, LOAD, STORE, ADD, W, c10, c11)               \
            CONVT_AVX2_FINISH(2, ROWS, LOAD, STORE, ADD, W, c20, c21)               \
            CONVT_AVX2_FINISH(3, ROWS, LOAD, STORE, ADD, W, c30, c31)               \
            CONVT_AVX2_FINISH(4, ROWS, LOAD, STORE, ADD, W, c40, c41)               \
            CONVT_AVX2_FINISH(5, ROWS, LOAD, STORE, ADD, W, c50, c51)               \
            accumulate = 1;                                                         \
        }                                                                           \
    }

#define CONVT_AVX2_F32(NAME, ROWS, PACK) \
    CONVT_DEFINE_AVX2(NAME, ROWS, PACK, float, __m256, _mm256_setzero_ps, _mm256_loadu_ps, \
                      _mm256_storeu_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_add_ps, 8)
#define CONVT_AVX2_F64(NAME, ROWS, PACK) \
    CONVT_DEFINE_AVX2(NAME, ROWS, PACK, double, __m256d, _mm256_setzero_pd, _mm256_loadu_pd, \
                      _mm256_storeu_pd, _mm256_broadcast_sd, _mm256_fmadd_pd, _mm256_add_pd, 4)
#define CONVT_AVX2_ALL(TYPE, PACK, P)                                                  \
    CONVT_AVX2_##TYPE(convt_avx2_##TYPE##_r1##P, 1, PACK)                              \
    CONVT_AVX2_##TYPE(convt_avx2_##TYPE##_r2##P, 2, PACK)                              \
    CONVT_AVX2_##TYPE(convt_avx2_##TYPE##_r3##P, 3, PACK)                              \
    CONVT_AVX2_##TYPE(convt_avx2_##TYPE##_r4##P, 4, PACK)                              \
    CONVT_AVX2_##TYPE(convt_avx2_##TYPE##_r5##P, 5, PACK)                              \
    CONVT_AVX2_##TYPE(convt_avx2_##TYPE##_r6##P, 6, PACK)

CONVT_AVX2_ALL(F32, 0, )
CONVT_AVX2_ALL(F32, 1, _pack)
CONVT_AVX2_ALL(F64, 0, )
CONVT_AVX2_ALL(F64, 1, _pack)

/* [pack][rows - 1] */
static const convt_kernel_f32 convt_avx2_f32[2][CONVT_MR] = {
    {convt_avx2_F32_r1, convt_avx2_F32_r2, convt_avx2_F32_r3,
     convt_avx2_F32_r4, convt_avx2_F32_r5, convt_avx2_F32_r6},
    {convt_avx2_F32_r1_pack, convt_avx2_F32_r2_pack, convt_avx2_F32_r3_pack,
     convt_avx2_F32_r4_pack, convt_avx2_F32_r5_pack, convt_avx2_F32_r6_pack}};
static const convt_kernel_f64 convt_avx2_f64[2][CONVT_MR] = {
    {convt_avx2_F64_r1, convt_avx2_F64_r2, convt_avx2_F64_r3,
     convt_avx2_F64_r4, convt_avx2_F64_r5, convt_avx2_F64_r6},
    {convt_avx2_F64_r1_pack, convt_avx2_F64_r2_pack, convt_avx2_F64_r3_pack,
     convt_avx2_F64_r4_pack, convt_avx2_F64_r5_pack, convt_avx2_F64_r6_pack}};
#define CONVT_AVX512_NR_F32 16
#define CONVT_AVX512_NR_F64 8

/* ROWS (<= 12) rows x 1 vector: measured on a Zen 4 core with B rows read in
 * place (scattered), 115 GFLOP/s against 101 for the AVX2 6 x 16 kernel and
 * 116 for a 12 x 32 tile that wastes more columns to panel rounding.  B rows
 * are never packed.  With 32 registers the block totals stay in registers
 * too, so one call covers the whole depth (117.5 GFLOP/s at depth 1024 and
 * 64-step blocks, against 102-109 for the AVX2 kernel storing every block).
 * The row loops have a constant trip count, so the compiler unrolls them and
 * keeps the accumulators in registers. */
#define CONVT_DEFINE_AVX512(NAME, ROWS, T, V, SETZERO, LOAD, STORE, SET1, FMA, ADD)   \
    CONVT_TARGET_AVX512 static void NAME(ptrdiff_t depth, ptrdiff_t block, int rows, \
                                         const T *a, const T *b,                   \
                                         const ptrdiff_t *offsets, T *c,           \
                                         ptrdiff_t ldc, int accumulate, T *pack_to) \
    {                                                                              \
        V acc[ROWS], total[ROWS];                                                  \
        ptrdiff_t k = 0, end;                                                      \
        int i;                                                                     \
        (void)rows;                                                                \
        (void)pack_to;                                                             \
        for (i = 0; i < (ROWS); ++i) total[i] = SETZERO();                         \
        while (k < depth) {                                                        \
            end = k + block < depth ? k + block : depth;                           \
            for (i = 0; i < (ROWS); ++i) acc[i] = SETZERO();                       \
            for (; k < end; ++k, a += (ROWS)) {                                    \
                V row = LOAD(b + offsets[k]);                                      \
                for (i = 0; i < (ROWS); ++i) acc[i] = FMA(SET1(a[i]), row, acc[i]); \
            }                                                                      \
            for (i = 0; i < (ROWS); ++i) total[i] = ADD(total[i], acc[i]);         \
        }                                                                          \
        for (i = 0; i < (ROWS); ++i) {                                             \
            if (accumulate) total[i] = ADD(LOAD(c + i * ldc), total[i]);           \
            STORE(c + i * ldc, total[i]);                                          \
        }                                                                          \
    }

#define CONVT_AVX512_F32(NAME, ROWS) \
    CONVT_DEFINE_AVX512(NAME, ROWS, float, __m512, _mm512_setzero_ps, _mm512_loadu_ps, \
                        _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps)
#define CONVT_AVX512_F64(NAME, ROWS) \
    CONVT_DEFINE_AVX512(NAME, ROWS, double, __m512d, _mm512_setzero_pd, _mm512_loadu_pd, \
                        _mm512_storeu_pd, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_add_pd)
#define CONVT_AVX512_ALL(TYPE)                                                          \
    CONVT_AVX512_##TYPE(convt_avx512_##TYPE##_r1, 1)                                    \
    CONVT_AVX512_##TYPE(convt_avx512_##TYPE##_r2, 2)                                    \
    CONVT_AVX512_##TYPE(convt_avx512_##TYPE##_r3, 3)                                    \
    CONVT_AVX512_##TYPE(convt_avx512_##TYPE##_r4, 4)                                    \
    CONVT_AVX512_##TYPE(convt_avx512_##TYPE##_r5, 5)                                    \
    CONVT_AVX512_##TYPE(convt_avx512_##TYPE##_r6, 6)                                    \
    CONVT_AVX512_##TYPE(convt_avx512_##TYPE##_r7, 7)                                    \
    CONVT_AVX512_##TYPE(convt_avx512_##TYPE##_r8, 8)                                    \
    CONVT_AVX512_##TYPE(convt_avx512_##TYPE##_r9, 9)                                    \
    CONVT_AVX512_##TYPE(convt_avx512_##TYPE##_r10, 10)                                  \
    CONVT_AVX512_##TYPE(convt_avx512_##TYPE##_r11, 11)                                  \
    CONVT_AVX512_##TYPE(convt_avx512_##TYPE##_r12, 12)

/* total[i] = the blocked sums of row i of a times B, where odd rows read B
 * `sibling` positions further: two B rows per step of depth (pair kernels). */
#define CONVT_AVX512_PAIR_TOTALS(ROWS, V, SETZERO, LOAD, SET1, FMA, ADD)                 \
    {                                                                                  \
        V acc[ROWS];                                                                   \
        ptrdiff_t k = 0, end;                                                          \
        for (i = 0; i < (ROWS); ++i) total[i] = SETZERO();                             \
        while (k < depth) {                                                            \
            end = k + block < depth ? k + block : depth;                               \
            for (i = 0; i < (ROWS); ++i) acc[i] = SETZERO();                           \
            for (; k < end; ++k, a += (ROWS)) {                                        \
                V even = LOAD(b + offsets[k]), odd = LOAD(b + offsets[k] + sibling);   \
                for (i = 0; i < (ROWS); i += 2) {                                      \
                    acc[i] = FMA(SET1(a[i]), even, acc[i]);                            \
                    acc[i + 1] = FMA(SET1(a[i + 1]), odd, acc[i + 1]);                 \
                }                                                                      \
            }                                                                          \
            for (i = 0; i < (ROWS); ++i) total[i] = ADD(total[i], acc[i]);             \
        }                                                                              \
    }

/* Pair kernels (see convt_pair_f32). */
#define CONVT_DEFINE_AVX512_PAIR(NAME, ROWS, T, V, SETZERO, LOAD, STORE, SET1, FMA, ADD) \
    CONVT_TARGET_AVX512 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a,  \
                                         const T *b, const ptrdiff_t *offsets,         \
                                         ptrdiff_t sibling, T *c, ptrdiff_t ldc,       \
                                         int accumulate)                               \
    {                                                                                  \
        V total[ROWS];                                                                 \
        int i;                                                                         \
        CONVT_AVX512_PAIR_TOTALS(ROWS, V, SETZERO, LOAD, SET1, FMA, ADD)               \
        for (i = 0; i < (ROWS); ++i) {                                                 \
            T *row = c + i * ldc + (i & 1 ? sibling : 0);                              \
            if (accumulate) total[i] = ADD(LOAD(row), total[i]);                       \
            STORE(row, total[i]);                                                      \
        }                                                                              \
    }

#define CONVT_AVX512_PAIR_F32(NAME, ROWS) \
    CONVT_DEFINE_AVX512_PAIR(NAME, ROWS, float, __m512, _mm512_setzero_ps, _mm512_loadu_ps, \
                             _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps)
#define CONVT_AVX512_PAIR_F64(NAME, ROWS) \
    CONVT_DEFINE_AVX512_PAIR(NAME, ROWS, double, __m512d, _mm512_setzero_pd, _mm512_loadu_pd, \
                             _mm512_storeu_pd, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_add_pd)
#define CONVT_AVX512_PAIR_H32(NAME, ROWS) \
    CONVT_DEFINE_AVX512_PAIR(NAME, ROWS, float, __m256, _mm256_setzero_ps, _mm256_loadu_ps, \
                             _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps)
#define CONVT_AVX512_PAIR_H64(NAME, ROWS) \
    CONVT_DEFINE_AVX512_PAIR(NAME, ROWS, double, __m256d, _mm256_setzero_pd, _mm256_loadu_pd, \
                             _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd, _mm256_add_pd)
#define CONVT_AVX512_PAIRS(TYPE)                                                  \
    CONVT_AVX512_PAIR_##TYPE(convt_avx512_pair_##TYPE##_r2, 2)                    \
    CONVT_AVX512_PAIR_##TYPE(convt_avx512_pair_##TYPE##_r4, 4)                    \
    CONVT_AVX512_PAIR_##TYPE(convt_avx512_pair_##TYPE##_r6, 6)                    \
    CONVT_AVX512_PAIR_##TYPE(convt_avx512_pair_##TYPE##_r8, 8)                    \
    CONVT_AVX512_PAIR_##TYPE(convt_avx512_pair_##TYPE##_r10, 10)                  \
    CONVT_AVX512_PAIR_##TYPE(convt_avx512_pair_##TYPE##_r12, 12)                  \
    static const convt_pair_##TYPE##_t convt_avx512_pairs_##TYPE[CONVT_AVX512_MR / 2] = { \
        convt_avx512_pair_##TYPE##_r2, convt_avx512_pair_##TYPE##_r4,               \
        convt_avx512_pair_##TYPE##_r6, convt_avx512_pair_##TYPE##_r8,               \
        convt_avx512_pair_##TYPE##_r10, convt_avx512_pair_##TYPE##_r12};

typedef convt_pair_f32 convt_pair_F32_t;
typedef convt_pair_f32 convt_pair_H32_t;
typedef convt_pair_f64 convt_pair_F64_t;
typedef convt_pair_f64 convt_pair_H64_t;
CONVT_AVX512_PAIRS(F32)
CONVT_AVX512_PAIRS(F64)
CONVT_AVX512_PAIRS(H32)
CONVT_AVX512_PAIRS(H64)

/* Storing pair kernels (see CONVT_DEFINE_AVX512_PAIR_STORE). */

#define CONVT_DEFINE_AVX512_PAIR_STORE(NAME, ROWS, T, YT, V, W, SETZERO, LOAD, YLOAD, YSTORE, \
                                       SET1, FMA, ADD, INTERLEAVE, LOW, HIGH)                \
    CONVT_TARGET_AVX512 static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a,    \
                                         const T *b, const ptrdiff_t *offsets,           \
                                         ptrdiff_t sibling, YT *y, ptrdiff_t ldy,        \
                                         int accumulate, const T *bias)                  \
    {                                                                                    \
        V total[ROWS];                                                                   \
        int i;                                                                           \
        CONVT_AVX512_PAIR_TOTALS(ROWS, V, SETZERO, LOAD, SET1, FMA, ADD)                 \
        for (i = 0; i < (ROWS); i += 2) {                                                \
            YT *row = y + (i / 2) * ldy;                                                 \
            V low = INTERLEAVE(total[i], LOW, total[i + 1]);                             \
            V high = INTERLEAVE(total[i], HIGH, total[i + 1]);                           \
            if (accumulate) {                                                            \
                low = ADD(YLOAD(row), low);                                              \
                high = ADD(YLOAD(row + (W)), high);                                      \
            } else if (bias) {                                                           \
                low = ADD(low, SET1(bias[i / 2]));                                       \
                high = ADD(high, SET1(bias[i / 2]));                                     \
            }                                                                            \
            YSTORE(row, low);                                                            \
            YSTORE(row + (W), high);                                                     \
        }                                                                                \
    }

/* float16 outputs: rounded once from the float total (+ bias), like the scatter */
#define CONVT_LOAD_H512(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define CONVT_STORE_H512(p, v) _mm256_storeu_si256((__m256i *)(p), \
    _mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define CONVT_LOAD_H256(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define CONVT_STORE_H256(p, v) _mm_storeu_si128((__m128i *)(p), \
    _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define CONVT_PERMUTE_F32_LOW512 \
    _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23)
#define CONVT_PERMUTE_F32_HIGH512 \
    _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)
#define CONVT_PERMUTE_F32_LOW256 _mm256_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11)
#define CONVT_PERMUTE_F32_HIGH256 _mm256_setr_epi32(4, 12, 5, 13, 6, 14, 7, 15)

#define CONVT_PAIR_STORE_F32(NAME, ROWS)                                                    \
    CONVT_DEFINE_AVX512_PAIR_STORE(NAME, ROWS, float, float, __m512, 16, _mm512_setzero_ps, \
        _mm512_loadu_ps, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps, \
        _mm512_add_ps, _mm512_permutex2var_ps, CONVT_PERMUTE_F32_LOW512,                     \
        CONVT_PERMUTE_F32_HIGH512)
#define CONVT_PAIR_STORE_H32(NAME, ROWS)                                                    \
    CONVT_DEFINE_AVX512_PAIR_STORE(NAME, ROWS, float, float, __m256, 8, _mm256_setzero_ps,  \
        _mm256_loadu_ps, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps, \
        _mm256_add_ps, _mm256_permutex2var_ps, CONVT_PERMUTE_F32_LOW256,                     \
        CONVT_PERMUTE_F32_HIGH256)
#define CONVT_PAIR_STORE_F16(NAME, ROWS)                                                    \
    CONVT_DEFINE_AVX512_PAIR_STORE(NAME, ROWS, float, uint16_t, __m512, 16,                 \
        _mm512_setzero_ps, _mm512_loadu_ps, CONVT_LOAD_H512, CONVT_STORE_H512,              \
        _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_permutex2var_ps,             \
        CONVT_PERMUTE_F32_LOW512, CONVT_PERMUTE_F32_HIGH512)
#define CONVT_PAIR_STORE_H16(NAME, ROWS)                                                    \
    CONVT_DEFINE_AVX512_PAIR_STORE(NAME, ROWS, float, uint16_t, __m256, 8,                  \
        _mm256_setzero_ps, _mm256_loadu_ps, CONVT_LOAD_H256, CONVT_STORE_H256,              \
        _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_permutex2var_ps,             \
        CONVT_PERMUTE_F32_LOW256, CONVT_PERMUTE_F32_HIGH256)
#define CONVT_PAIR_STORE_F64(NAME, ROWS)                                                    \
    CONVT_DEFINE_AVX512_PAIR_STORE(NAME, ROWS, double, double, __m512d, 8,                  \
        _mm512_setzero_pd, _mm512_loadu_pd, _mm512_loadu_pd, _mm512_storeu_pd,              \
        _mm512_set1_pd, _mm512_fmadd_pd, _mm512_add_pd, _mm512_permutex2var_pd,             \
        _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15))
#define CONVT_PAIR_STORE_H64(NAME, ROWS)                                                    \
    CONVT_DEFINE_AVX512_PAIR_STORE(NAME, ROWS, double, double, __m256d, 4,                  \
        _mm256_setzero_pd, _mm256_loadu_pd, _mm256_loadu_pd, _mm256_storeu_pd,              \
        _mm256_set1_pd, _mm256_fmadd_pd, _mm256_add_pd, _mm256_permutex2var_pd,            \
        _mm256_setr_epi64x(0, 4, 1, 5), _mm256_setr_epi64x(2, 6, 3, 7))
#define CONVT_AVX512_PAIR_STORES(TYPE)                                            \
    CONVT_PAIR_STORE_##TYPE(convt_avx512_store_##TYPE##_r2, 2)                    \
    CONVT_PAIR_STORE_##TYPE(convt_avx512_store_##TYPE##_r4, 4)                    \
    CONVT_PAIR_STORE_##TYPE(convt_avx512_store_##TYPE##_r6, 6)                    \
    CONVT_PAIR_STORE_##TYPE(convt_avx512_store_##TYPE##_r8, 8)                    \
    CONVT_PAIR_STORE_##TYPE(convt_avx512_store_##TYPE##_r10, 10)                  \
    CONVT_PAIR_STORE_##TYPE(convt_avx512_store_##TYPE##_r12, 12)                  \
    static const convt_pair_store_##TYPE##_t convt_avx512_stores_##TYPE[CONVT_AVX512_MR / 2] = { \
        convt_avx512_store_##TYPE##_r2, convt_avx512_store_##TYPE##_r4,             \
        convt_avx512_store_##TYPE##_r6, convt_avx512_store_##TYPE##_r8,             \
        convt_avx512_store_##TYPE##_r10, convt_avx512_store_##TYPE##_r12};

typedef convt_pair_store_f32 convt_pair_store_F32_t;
typedef convt_pair_store_f32 convt_pair_store_H32_t;
typedef convt_pair_store_f16 convt_pair_store_F16_t;
typedef convt_pair_store_f16 convt_pair_store_H16_t;
typedef convt_pair_store_f64 convt_pair_store_F64_t;
typedef convt_pair_store_f64 convt_pair_store_H64_t;
CONVT_AVX512_PAIR_STORES(F32)
CONVT_AVX512_PAIR_STORES(H32)
CONVT_AVX512_PAIR_STORES(F16)
CONVT_AVX512_PAIR_STORES(H16)
CONVT_AVX512_PAIR_STORES(F64)
CONVT_AVX512_PAIR_STORES(H64)

/* Half-width twins for the last panel of a tile when it holds at most NR / 2
 * positions: the same kernel on 256-bit vectors.  Where 512-bit FMAs are
 * double-pumped (Zen 4) they cost half as much as a full panel. */
#define CONVT_AVX512_H32(NAME, ROWS) \
    CONVT_DEFINE_AVX512(NAME, ROWS, float, __m256, _mm256_setzero_ps, _mm256_loadu_ps, \
                        _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps)
#define CONVT_AVX512_H64(NAME, ROWS) \
    CONVT_DEFINE_AVX512(NAME, ROWS, double, __m256d, _mm256_setzero_pd, _mm256_loadu_pd, \
                        _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd, _mm256_add_pd)

CONVT_AVX512_ALL(F32)
CONVT_AVX512_ALL(F64)
CONVT_AVX512_ALL(H32)
CONVT_AVX512_ALL(H64)

#define CONVT_AVX512_TABLE(TYPE)                                                      \
    {convt_avx512_##TYPE##_r1, convt_avx512_##TYPE##_r2, convt_avx512_##TYPE##_r3,    \
     convt_avx512_##TYPE##_r4, convt_avx512_##TYPE##_r5, convt_avx512_##TYPE##_r6,    \
     convt_avx512_##TYPE##_r7, convt_avx512_##TYPE##_r8, convt_avx512_##TYPE##_r9,    \
     convt_avx512_##TYPE##_r10, convt_avx512_##TYPE##_r11, convt_avx512_##TYPE##_r12}

static const convt_kernel_f32 convt_avx512_f32[CONVT_AVX512_MR] = CONVT_AVX512_TABLE(F32);
static const convt_kernel_f64 convt_avx512_f64[CONVT_AVX512_MR] = CONVT_AVX512_TABLE(F64);
static const convt_kernel_f32 convt_avx512_h32[CONVT_AVX512_MR] = CONVT_AVX512_TABLE(H32);
static const convt_kernel_f64 convt_avx512_h64[CONVT_AVX512_MR] = CONVT_AVX512_TABLE(H64);
#endif /* x86-64 */

/* ---------------------------------------------------------------- dispatch */

/* Whether a backend can run on this machine.  CPUID exits to the hypervisor
 * in a virtual machine (microseconds), so each answer is computed once; racing
 * threads would store the same value. */
static int convt_backend_available(int backend)
{
#ifdef CONVT_X86_64
    static int has_avx2 = -1, has_avx512 = -1;
#endif
    switch (backend) {
    case CONVT_BACKEND_BLAS:
    case CONVT_BACKEND_PORTABLE:
        return 1;
#ifdef CONVT_X86_64
    case CONVT_BACKEND_AVX2:
        if (has_avx2 < 0) has_avx2 = convt_cpu_has_avx2_fma();
        return has_avx2;
    case CONVT_BACKEND_AVX512:
        if (has_avx512 < 0) has_avx512 = convt_cpu_has_avx512();
        return has_avx512;
#endif
    default:
        return 0;
    }
}

/* Rows per micro-kernel block (0 for BLAS: one block of all rows). */
static ptrdiff_t convt_backend_mr(int backend)
{
    switch (backend) {
    case CONVT_BACKEND_BLAS:
        return 0;
    case CONVT_BACKEND_AVX512:
        return CONVT_AVX512_MR;
    default:
        return CONVT_MR;
    }
}

/* Positions per micro-kernel call (the vector dimension). */
static ptrdiff_t convt_backend_nr(int backend, int is_double)
{
    switch (backend) {
#ifdef CONVT_X86_64
    case CONVT_BACKEND_AVX2:
        return is_double ? CONVT_AVX2_NR_F64 : CONVT_AVX2_NR_F32;
    case CONVT_BACKEND_AVX512:
        return is_double ? CONVT_AVX512_NR_F64 : CONVT_AVX512_NR_F32;
#endif
    case CONVT_BACKEND_PORTABLE:
        return is_double ? CONVT_PORTABLE_NR_F64 : CONVT_PORTABLE_NR_F32;
    default:
        return 0; /* BLAS: one panel spanning the tile */
    }
}

/* The kernel computing blocks of `rows` (1..MR of the backend) rows; with `pack`,
 * one that also stores the B rows it reads (pack_to must then not be NULL).
 * NULL for rows the backend does not have, and for packing where the backend
 * reads B in place at full speed (AVX-512). */
static convt_kernel_f32 convt_backend_f32(int backend, int rows, int pack)
{
#ifdef CONVT_X86_64
    if (backend == CONVT_BACKEND_AVX2)
        return rows <= CONVT_MR ? convt_avx2_f32[pack != 0][rows - 1] : NULL;
    if (backend == CONVT_BACKEND_AVX512) return pack ? NULL : convt_avx512_f32[rows - 1];
#endif
    return backend == CONVT_BACKEND_PORTABLE && rows <= CONVT_MR ? convt_portable_f32 : NULL;
}

static convt_kernel_f64 convt_backend_f64(int backend, int rows, int pack)
{
#ifdef CONVT_X86_64
    if (backend == CONVT_BACKEND_AVX2)
        return rows <= CONVT_MR ? convt_avx2_f64[pack != 0][rows - 1] : NULL;
    if (backend == CONVT_BACKEND_AVX512) return pack ? NULL : convt_avx512_f64[rows - 1];
#endif
    return backend == CONVT_BACKEND_PORTABLE && rows <= CONVT_MR ? convt_portable_f64 : NULL;
}

/* An AVX-512 kernel from its full- or half-width table, or NULL for other
 * backends (and off x86-64, where the tables do not exist). */
#ifdef CONVT_X86_64
#define CONVT_AVX512_PICK(backend, half, full_table, half_table, index) \
    ((backend) == CONVT_BACKEND_AVX512 ? ((half) ? (half_table) : (full_table))[index] : NULL)
#else
#define CONVT_AVX512_PICK(backend, half, full_table, half_table, index) NULL
#endif

/* The kernel for a last panel of at most NR / 2 positions (it computes only
 * those), or NULL where the backend has none. */
static convt_kernel_f32 convt_backend_half_f32(int backend, int rows)
{
    return CONVT_AVX512_PICK(backend, 1, convt_avx512_h32, convt_avx512_h32, rows - 1);
}

static convt_kernel_f64 convt_backend_half_f64(int backend, int rows)
{
    return CONVT_AVX512_PICK(backend, 1, convt_avx512_h64, convt_avx512_h64, rows - 1);
}

/* The pair kernels for `rows` (even, 2..12) rows, half-width or not, and their
 * storing twins; NULL where the backend has none (plans then never ask). */
static convt_pair_f32 convt_backend_pair_f32(int backend, int rows, int half)
{
    return CONVT_AVX512_PICK(backend, half, convt_avx512_pairs_F32, convt_avx512_pairs_H32,
                             rows / 2 - 1);
}

static convt_pair_f64 convt_backend_pair_f64(int backend, int rows, int half)
{
    return CONVT_AVX512_PICK(backend, half, convt_avx512_pairs_F64, convt_avx512_pairs_H64,
                             rows / 2 - 1);
}

static convt_pair_store_f32 convt_backend_pair_store_f32(int backend, int rows, int half)
{
    return CONVT_AVX512_PICK(backend, half, convt_avx512_stores_F32, convt_avx512_stores_H32,
                             rows / 2 - 1);
}

static convt_pair_store_f16 convt_backend_pair_store_f16(int backend, int rows, int half)
{
    return CONVT_AVX512_PICK(backend, half, convt_avx512_stores_F16, convt_avx512_stores_H16,
                             rows / 2 - 1);
}

static convt_pair_store_f64 convt_backend_pair_store_f64(int backend, int rows, int half)
{
    return CONVT_AVX512_PICK(backend, half, convt_avx512_stores_F64, convt_avx512_stores_H64,
                             rows / 2 - 1);
}

#endif /* CONVT_MICROKERNELS_H */
