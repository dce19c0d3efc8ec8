/* Row kernels of convt's direct engine (a few multiply-adds per output).
 *
 * One call computes one stride phase of one output row:
 *   out[t] (+)= sum over sources s and taps j of w[s * taps + j] * x[s][t + offsets[j]]
 * for t < count, where an input index outside [0, in_size) reads zero.  All
 * taps of all sources are summed in registers before out[t] is written once,
 * so the loop is bound by FMAs and loads, not by re-reading out.
 * Sums run over s, then j, in that order, in every variant and at every t.
 *
 * The x rows and out are in the accumulation type (float or double); the
 * caller converts float16 rows and strided rows beforehand.
 */
#ifndef CONVT_DIRECT_H
#define CONVT_DIRECT_H

#include <stddef.h>

#include "_microkernels.h"

/* Row kernels are memory-bound: AVX2 serves the AVX-512 backend too. */
static int convt_backend_has_avx2(int backend)
{
    return backend == CONVT_BACKEND_AVX2 || backend == CONVT_BACKEND_AVX512;
}

typedef void (*convt_phase_f32)(ptrdiff_t sources, const float *const *x, const float *w,
                                ptrdiff_t taps, const ptrdiff_t *offsets, ptrdiff_t in_size,
                                ptrdiff_t count, float *out, int accumulate);
typedef void (*convt_phase_f64)(ptrdiff_t sources, const double *const *x, const double *w,
                                ptrdiff_t taps, const ptrdiff_t *offsets, ptrdiff_t in_size,
                                ptrdiff_t count, double *out, int accumulate);

/* Outputs t in [lo, hi) read every tap inside the input: no bounds checks there. */
static void convt_phase_interior(ptrdiff_t taps, const ptrdiff_t *offsets, ptrdiff_t in_size,
                                 ptrdiff_t count, ptrdiff_t *lo, ptrdiff_t *hi)
{
    ptrdiff_t j, first = 0, end = count;
    for (j = 0; j < taps; ++j) {
        if (-offsets[j] > first) first = -offsets[j];
        if (in_size - offsets[j] < end) end = in_size - offsets[j];
    }
    if (first > count) first = count;
    if (end < first) end = first;
    *lo = first;
    *hi = end;
}

/* The checked sum for one output t (edges, and the portable kernel). */
#define CONVT_PHASE_AT(T, t)                                                       \
    {                                                                              \
        T sum = accumulate ? out[t] : (T)0;                                        \
        ptrdiff_t s, j;                                                            \
        for (s = 0; s < sources; ++s)                                              \
            for (j = 0; j < taps; ++j) {                                           \
                ptrdiff_t i = (t) + offsets[j];                                    \
                if (i >= 0 && i < in_size) sum += w[s * taps + j] * x[s][i];       \
            }                                                                      \
        out[t] = sum;                                                              \
    }

#define CONVT_DEFINE_PHASE_PORTABLE(NAME, T)                                       \
    static void NAME(ptrdiff_t sources, const T *const *x, const T *w, ptrdiff_t taps, \
                     const ptrdiff_t *offsets, ptrdiff_t in_size, ptrdiff_t count,  \
                     T *out, int accumulate)                                        \
    {                                                                              \
        ptrdiff_t t, lo, hi;                                                       \
        convt_phase_interior(taps, offsets, in_size, count, &lo, &hi);             \
        for (t = 0; t < lo; ++t) CONVT_PHASE_AT(T, t)                              \
        for (t = lo; t < hi; ++t) {                                                \
            T sum = accumulate ? out[t] : (T)0;                                    \
            ptrdiff_t s, j;                                                        \
            for (s = 0; s < sources; ++s)                                          \
                for (j = 0; j < taps; ++j)                                         \
                    sum += w[s * taps + j] * x[s][t + offsets[j]];                 \
            out[t] = sum;                                                          \
        }                                                                          \
        for (t = hi; t < count; ++t) CONVT_PHASE_AT(T, t)                          \
    }

CONVT_DEFINE_PHASE_PORTABLE(convt_phase_portable_f32, float)
CONVT_DEFINE_PHASE_PORTABLE(convt_phase_portable_f64, double)

#ifdef CONVT_X86_64
/* Interior in blocks of 4 vectors (32 floats or 16 doubles), then single vectors;
 * each block sums every (source, tap) with one broadcast and four FMAs. */
#define CONVT_DEFINE_PHASE_AVX2(NAME, T, V, W, SETZERO, LOAD, STORE, BROADCAST, FMA)  \
    CONVT_TARGET_AVX2 static void NAME(ptrdiff_t sources, const T *const *x,          \
                                       const T *w, ptrdiff_t taps,                    \
                                       const ptrdiff_t *offsets, ptrdiff_t in_size,   \
                                       ptrdiff_t count, T *out, int accumulate)       \
    {                                                                                 \
        ptrdiff_t t, lo, hi, s, j;                                                    \
        convt_phase_interior(taps, offsets, in_size, count, &lo, &hi);               \
        for (t = 0; t < lo; ++t) CONVT_PHASE_AT(T, t)                                \
        for (t = lo; t + 4 * W <= hi; t += 4 * W) {                                  \
            V a0 = accumulate ? LOAD(out + t) : SETZERO();                           \
            V a1 = accumulate ? LOAD(out + t + W) : SETZERO();                       \
            V a2 = accumulate ? LOAD(out + t + 2 * W) : SETZERO();                   \
            V a3 = accumulate ? LOAD(out + t + 3 * W) : SETZERO();                   \
            for (s = 0; s < sources; ++s)                                            \
                for (j = 0; j < taps; ++j) {                                         \
                    const T *row = x[s] + t + offsets[j];                            \
                    V weight = BROADCAST(w + s * taps + j);                          \
                    a0 = FMA(weight, LOAD(row), a0);                                 \
                    a1 = FMA(weight, LOAD(row + W), a1);                             \
                    a2 = FMA(weight, LOAD(row + 2 * W), a2);                         \
                    a3 = FMA(weight, LOAD(row + 3 * W), a3);                         \
                }                                                                    \
            STORE(out + t, a0);                                                      \
            STORE(out + t + W, a1);                                                  \
            STORE(out + t + 2 * W, a2);                                              \
            STORE(out + t + 3 * W, a3);                                              \
        }                                                                            \
        for (; t + W <= hi; t += W) {                                                \
            V a0 = accumulate ? LOAD(out + t) : SETZERO();                           \
            for (s = 0; s < sources; ++s)                                            \
                for (j = 0; j < taps; ++j)                                           \
                    a0 = FMA(BROADCAST(w + s * taps + j), LOAD(x[s] + t + offsets[j]), a0); \
            STORE(out + t, a0);                                                      \
        }                                                                            \
        for (; t < count; ++t) CONVT_PHASE_AT(T, t)                                  \
    }

CONVT_DEFINE_PHASE_AVX2(convt_phase_avx2_f32, float, __m256, 8, _mm256_setzero_ps,
                        _mm256_loadu_ps, _mm256_storeu_ps, _mm256_broadcast_ss, _mm256_fmadd_ps)
CONVT_DEFINE_PHASE_AVX2(convt_phase_avx2_f64, double, __m256d, 4, _mm256_setzero_pd,
                        _mm256_loadu_pd, _mm256_storeu_pd, _mm256_broadcast_sd, _mm256_fmadd_pd)
#endif

/* y[2 i] = even[i] + bias, y[2 i + 1] = odd[i] + bias for i < pairs: the two
 * phases of a stride-2 axis written back as whole vectors. */
typedef void (*convt_interleave_f32)(float *y, const float *even, const float *odd,
                                     ptrdiff_t pairs, float bias);
typedef void (*convt_interleave_f64)(double *y, const double *even, const double *odd,
                                     ptrdiff_t pairs, double bias);

#define CONVT_DEFINE_INTERLEAVE_PORTABLE(NAME, T)                                  \
    static void NAME(T *y, const T *even, const T *odd, ptrdiff_t pairs, T bias)  \
    {                                                                              \
        ptrdiff_t i;                                                               \
        for (i = 0; i < pairs; ++i) {                                              \
            y[2 * i] = even[i] + bias;                                             \
            y[2 * i + 1] = odd[i] + bias;                                          \
        }                                                                          \
    }

CONVT_DEFINE_INTERLEAVE_PORTABLE(convt_interleave_portable_f32, float)
CONVT_DEFINE_INTERLEAVE_PORTABLE(convt_interleave_portable_f64, double)

#ifdef CONVT_X86_64
/* 2 W outputs per step: unpack the halves, then put the 128-bit lanes in order. */
#define CONVT_DEFINE_INTERLEAVE_AVX2(NAME, T, V, W, SET1, LOAD, ADD, UNPACKLO, UNPACKHI,      \
                                     PERMUTE, STORE)                                       \
    CONVT_TARGET_AVX2 static void NAME(T *y, const T *even, const T *odd, ptrdiff_t pairs,   \
                                       T bias)                                             \
    {                                                                                      \
        V b = SET1(bias);                                                                  \
        ptrdiff_t i = 0;                                                                   \
        for (; i + (W) <= pairs; i += (W)) {                                               \
            V e = ADD(LOAD(even + i), b), o = ADD(LOAD(odd + i), b);                       \
            V lo = UNPACKLO(e, o), hi = UNPACKHI(e, o);                                    \
            STORE(y + 2 * i, PERMUTE(lo, hi, 0x20));                                       \
            STORE(y + 2 * i + (W), PERMUTE(lo, hi, 0x31));                                 \
        }                                                                                  \
        for (; i < pairs; ++i) {                                                           \
            y[2 * i] = even[i] + bias;                                                     \
            y[2 * i + 1] = odd[i] + bias;                                                  \
        }                                                                                  \
    }
CONVT_DEFINE_INTERLEAVE_AVX2(convt_interleave_avx2_f32, float, __m256, 8, _mm256_set1_ps,
                             _mm256_loadu_ps, _mm256_add_ps, _mm256_unpacklo_ps,
                             _mm256_unpackhi_ps, _mm256_permute2f128_ps, _mm256_storeu_ps)
CONVT_DEFINE_INTERLEAVE_AVX2(convt_interleave_avx2_f64, double, __m256d, 4, _mm256_set1_pd,
                             _mm256_loadu_pd, _mm256_add_pd, _mm256_unpacklo_pd,
                             _mm256_unpackhi_pd, _mm256_permute2f128_pd, _mm256_storeu_pd)
#endif

/* y[2 i] = src[i] + bias for i < count: one stride phase of a stride-2 output
 * row, whose odd outputs belong to another stack, possibly another thread.
 * AVX-512 masked stores write the even lanes only, 8 outputs per store; the
 * fallback is scalar.  convt_masked_stores is set when the module loads. */
static int convt_masked_stores = 0;

static void convt_detect_masked_stores(void)
{
    convt_masked_stores = convt_backend_available(CONVT_BACKEND_AVX512);
}

/* The AVX-512 body expands 8 (float) or 4 (double) values into the even lanes. */
#ifdef CONVT_X86_64
#define CONVT_STORE_EVEN_AVX512(T, V, N, MASK, SET1, CAST, LOAD, EXPAND, ADD, STORE)         \
    {                                                                                   \
        V b = SET1(bias);                                                               \
        for (; i + (N) <= count; i += (N))                                              \
            STORE(y + 2 * i, (MASK), ADD(EXPAND((MASK), CAST(LOAD(src + i))), b));      \
    }
CONVT_TARGET_AVX512 static ptrdiff_t convt_store_even_avx512_f32(float *y, const float *src,
                                                                ptrdiff_t count, float bias)
{
    ptrdiff_t i = 0;
    CONVT_STORE_EVEN_AVX512(float, __m512, 8, 0x5555, _mm512_set1_ps, _mm512_castps256_ps512,
                            _mm256_loadu_ps, _mm512_maskz_expand_ps, _mm512_add_ps,
                            _mm512_mask_storeu_ps)
    return i;
}

CONVT_TARGET_AVX512 static ptrdiff_t convt_store_even_avx512_f64(double *y, const double *src,
                                                                ptrdiff_t count, double bias)
{
    ptrdiff_t i = 0;
    CONVT_STORE_EVEN_AVX512(double, __m512d, 4, 0x55, _mm512_set1_pd, _mm512_castpd256_pd512,
                            _mm256_loadu_pd, _mm512_maskz_expand_pd, _mm512_add_pd,
                            _mm512_mask_storeu_pd)
    return i;
}
#endif

/* Stores y[2 i] = src[i] + bias: the vector part where the CPU has it, then the rest. */
#ifdef CONVT_X86_64
#define CONVT_STORE_EVEN(NAME, T, VECTOR)                                               \
    static void NAME(T *y, const T *src, ptrdiff_t count, T bias)                       \
    {                                                                                   \
        ptrdiff_t i = convt_masked_stores ? VECTOR(y, src, count, bias) : 0;            \
        for (; i < count; ++i) y[2 * i] = src[i] + bias;                                \
    }
CONVT_STORE_EVEN(convt_store_even_f32, float, convt_store_even_avx512_f32)
CONVT_STORE_EVEN(convt_store_even_f64, double, convt_store_even_avx512_f64)
#else
#define CONVT_STORE_EVEN(NAME, T)                                                       \
    static void NAME(T *y, const T *src, ptrdiff_t count, T bias)                       \
    {                                                                                   \
        ptrdiff_t i;                                                                    \
        for (i = 0; i < count; ++i) y[2 * i] = src[i] + bias;                           \
    }
CONVT_STORE_EVEN(convt_store_even_f32, float)
CONVT_STORE_EVEN(convt_store_even_f64, double)
#endif

static convt_interleave_f32 convt_interleave_for_f32(int backend)
{
#ifdef CONVT_X86_64
    if (convt_backend_has_avx2(backend)) return convt_interleave_avx2_f32;
#endif
    return convt_interleave_portable_f32;
}

static convt_interleave_f64 convt_interleave_for_f64(int backend)
{
#ifdef CONVT_X86_64
    if (convt_backend_has_avx2(backend)) return convt_interleave_avx2_f64;
#endif
    return convt_interleave_portable_f64;
}

static convt_phase_f32 convt_direct_f32(int backend)
{
#ifdef CONVT_X86_64
    if (convt_backend_has_avx2(backend)) return convt_phase_avx2_f32;
#endif
    return convt_phase_portable_f32;
}

static convt_phase_f64 convt_direct_f64(int backend)
{
#ifdef CONVT_X86_64
    if (convt_backend_has_avx2(backend)) return convt_phase_avx2_f64;
#endif
    return convt_phase_portable_f64;
}

#endif /* CONVT_DIRECT_H */
