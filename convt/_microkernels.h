/* Register-blocked micro-kernels of convt's GEMM engine.
 *
 * One call computes an MR x NR block of C = A B over `depth`:
 *   a: [depth][MR]  (packed weights: MR rows side by side)
 *   b: [depth][NR]  (gathered input: NR positions side by side)
 *   c: MR rows of NR values, row stride ldc; overwritten, or added to when
 *      `accumulate` is non-zero (K chunks after the first).
 * Positions are the vector dimension, so each row of C is NR contiguous
 * outputs of one (phase, channel), ready for the scatter to the output.
 *
 * Backends: a portable C kernel (every compiler and CPU) and AVX2+FMA kernels
 * (x86-64, chosen at run time by CPUID, compiled with target attributes on
 * GCC/Clang; MSVC accepts the intrinsics as they are).
 */
#ifndef CONVT_MICROKERNELS_H
#define CONVT_MICROKERNELS_H

#include <stddef.h>

#define CONVT_MR 6

enum {
    CONVT_BACKEND_BLAS = 0,
    CONVT_BACKEND_PORTABLE = 1,
    CONVT_BACKEND_AVX2 = 2,
    CONVT_BACKEND_COUNT = 3
};

typedef void (*convt_kernel_f32)(ptrdiff_t depth, const float *a, const float *b,
                                 float *c, ptrdiff_t ldc, int accumulate);
typedef void (*convt_kernel_f64)(ptrdiff_t depth, const double *a, const double *b,
                                 double *c, ptrdiff_t ldc, int accumulate);

/* ---------------------------------------------------------------- portable */

#define CONVT_PORTABLE_NR_F32 16
#define CONVT_PORTABLE_NR_F64 8

#define CONVT_DEFINE_PORTABLE(NAME, T, NR)                                        \
    static void NAME(ptrdiff_t depth, const T *a, const T *b, T *c, ptrdiff_t ldc, \
                     int accumulate)                                              \
    {                                                                             \
        T acc[CONVT_MR][NR];                                                      \
        ptrdiff_t k;                                                              \
        int i, j;                                                                 \
        for (i = 0; i < CONVT_MR; ++i)                                            \
            for (j = 0; j < NR; ++j)                                              \
                acc[i][j] = accumulate ? c[i * ldc + j] : (T)0;                   \
        for (k = 0; k < depth; ++k, a += CONVT_MR, b += NR)                       \
            for (i = 0; i < CONVT_MR; ++i)                                        \
                for (j = 0; j < NR; ++j)                                          \
                    acc[i][j] += a[i] * b[j];                                     \
        for (i = 0; i < CONVT_MR; ++i)                                            \
            for (j = 0; j < NR; ++j)                                              \
                c[i * ldc + j] = acc[i][j];                                       \
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
static void convt_cpuid(int leaf, int sub, int regs[4]) { __cpuidex(regs, leaf, sub); }
static unsigned long long convt_xgetbv(void) { return _xgetbv(0); }
#else
#include <cpuid.h>
#define CONVT_TARGET_AVX2 __attribute__((target("avx2,fma")))
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

#define CONVT_AVX2_NR_F32 16
#define CONVT_AVX2_NR_F64 8

/* Two vectors of positions, six rows: 12 accumulators, 2 loads and 6
 * broadcasts per step of depth, FMA-bound on every AVX2 core. */
#define CONVT_DEFINE_AVX2(NAME, T, V, SETZERO, LOAD, STORE, BROADCAST, FMA, ADD, W) \
    CONVT_TARGET_AVX2 static void NAME(ptrdiff_t depth, const T *a, const T *b,     \
                                       T *c, ptrdiff_t ldc, int accumulate)         \
    {                                                                               \
        V c00 = SETZERO(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;    \
        V c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;          \
        ptrdiff_t k;                                                                \
        for (k = 0; k < depth; ++k, a += CONVT_MR, b += 2 * W) {                    \
            V b0 = LOAD(b), b1 = LOAD(b + W), x;                                    \
            x = BROADCAST(a + 0); c00 = FMA(x, b0, c00); c01 = FMA(x, b1, c01);      \
            x = BROADCAST(a + 1); c10 = FMA(x, b0, c10); c11 = FMA(x, b1, c11);      \
            x = BROADCAST(a + 2); c20 = FMA(x, b0, c20); c21 = FMA(x, b1, c21);      \
            x = BROADCAST(a + 3); c30 = FMA(x, b0, c30); c31 = FMA(x, b1, c31);      \
            x = BROADCAST(a + 4); c40 = FMA(x, b0, c40); c41 = FMA(x, b1, c41);      \
            x = BROADCAST(a + 5); c50 = FMA(x, b0, c50); c51 = FMA(x, b1, c51);      \
        }                                                                           \
        if (accumulate) {                                                           \
            c00 = ADD(c00, LOAD(c + 0 * ldc)); c01 = ADD(c01, LOAD(c + 0 * ldc + W)); \
            c10 = ADD(c10, LOAD(c + 1 * ldc)); c11 = ADD(c11, LOAD(c + 1 * ldc + W)); \
            c20 = ADD(c20, LOAD(c + 2 * ldc)); c21 = ADD(c21, LOAD(c + 2 * ldc + W)); \
            c30 = ADD(c30, LOAD(c + 3 * ldc)); c31 = ADD(c31, LOAD(c + 3 * ldc + W)); \
            c40 = ADD(c40, LOAD(c + 4 * ldc)); c41 = ADD(c41, LOAD(c + 4 * ldc + W)); \
            c50 = ADD(c50, LOAD(c + 5 * ldc)); c51 = ADD(c51, LOAD(c + 5 * ldc + W)); \
        }                                                                           \
        STORE(c + 0 * ldc, c00); STORE(c + 0 * ldc + W, c01);                       \
        STORE(c + 1 * ldc, c10); STORE(c + 1 * ldc + W, c11);                       \
        STORE(c + 2 * ldc, c20); STORE(c + 2 * ldc + W, c21);                       \
        STORE(c + 3 * ldc, c30); STORE(c + 3 * ldc + W, c31);                       \
        STORE(c + 4 * ldc, c40); STORE(c + 4 * ldc + W, c41);                       \
        STORE(c + 5 * ldc, c50); STORE(c + 5 * ldc + W, c51);                       \
    }

CONVT_DEFINE_AVX2(convt_avx2_f32, float, __m256, _mm256_setzero_ps, _mm256_loadu_ps,
                  _mm256_storeu_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_add_ps, 8)
CONVT_DEFINE_AVX2(convt_avx2_f64, double, __m256d, _mm256_setzero_pd, _mm256_loadu_pd,
                  _mm256_storeu_pd, _mm256_broadcast_sd, _mm256_fmadd_pd, _mm256_add_pd, 4)
#endif /* x86-64 */

/* ---------------------------------------------------------------- dispatch */

/* Whether a backend can run on this machine. */
static int convt_backend_available(int backend)
{
    switch (backend) {
    case CONVT_BACKEND_BLAS:
    case CONVT_BACKEND_PORTABLE:
        return 1;
#ifdef CONVT_X86_64
    case CONVT_BACKEND_AVX2:
        return convt_cpu_has_avx2_fma();
#endif
    default:
        return 0;
    }
}

/* Positions per micro-kernel call (the vector dimension). */
static ptrdiff_t convt_backend_nr(int backend, int is_double)
{
    switch (backend) {
#ifdef CONVT_X86_64
    case CONVT_BACKEND_AVX2:
        return is_double ? CONVT_AVX2_NR_F64 : CONVT_AVX2_NR_F32;
#endif
    case CONVT_BACKEND_PORTABLE:
        return is_double ? CONVT_PORTABLE_NR_F64 : CONVT_PORTABLE_NR_F32;
    default:
        return 0; /* BLAS: one panel spanning the tile */
    }
}

static convt_kernel_f32 convt_backend_f32(int backend)
{
#ifdef CONVT_X86_64
    if (backend == CONVT_BACKEND_AVX2) return convt_avx2_f32;
#endif
    return backend == CONVT_BACKEND_PORTABLE ? convt_portable_f32 : NULL;
}

static convt_kernel_f64 convt_backend_f64(int backend)
{
#ifdef CONVT_X86_64
    if (backend == CONVT_BACKEND_AVX2) return convt_avx2_f64;
#endif
    return backend == CONVT_BACKEND_PORTABLE ? convt_portable_f64 : NULL;
}

#endif /* CONVT_MICROKERNELS_H */
