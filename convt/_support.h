/* Small portable helpers for convt's kernels.
 *
 * - IEEE binary16 <-> binary32 conversion in plain integer/float code, so that
 *   float16 data is converted tile by tile inside the kernels on every
 *   compiler and CPU (no F16C or _Float16 requirement).  float -> half rounds
 *   to nearest even, keeps subnormals, saturates to +-inf and maps NaN to a
 *   quiet NaN of the same sign.
 * - OpenMP shims, so the kernels compile (serially) without OpenMP.
 */
#ifndef CONVT_SUPPORT_H
#define CONVT_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#define CONVT_HAVE_OPENMP 1
static inline int convt_thread_num(void) { return omp_get_thread_num(); }
static inline int convt_max_threads(void) { return omp_get_max_threads(); }
#else
#define CONVT_HAVE_OPENMP 0
static inline int convt_thread_num(void) { return 0; }
static inline int convt_max_threads(void) { return 1; }
#endif

/* Prefetch for reading: lines far apart (a new page each) defeat the hardware
 * prefetchers, so loops walking them ask a few steps ahead. */
#if defined(__GNUC__) || defined(__clang__)
#define convt_prefetch(address) __builtin_prefetch((address), 0, 3)
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#include <xmmintrin.h>
#define convt_prefetch(address) _mm_prefetch((const char *)(address), _MM_HINT_T0)
#else
#define convt_prefetch(address) ((void)(address))
#endif

static inline uint32_t convt_float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static inline float convt_bits_float(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* Exponent and mantissa are moved into float position and rebiased; a zero
 * exponent (zero or subnormal) is renormalised by a float subtraction, which is
 * exact because every half subnormal is a float normal. */
static inline float convt_half_to_float(uint16_t half)
{
    const uint32_t exponent_mask = 0x7c00u << 13;
    uint32_t bits = ((uint32_t)half & 0x7fffu) << 13;
    uint32_t exponent = bits & exponent_mask;
    bits += (uint32_t)(127 - 15) << 23;
    if (exponent == exponent_mask) {
        bits += (uint32_t)(128 - 16) << 23;           /* inf, nan */
    } else if (exponent == 0) {
        bits += 1u << 23;                              /* zero, subnormal */
        bits = convt_float_bits(convt_bits_float(bits) - convt_bits_float(113u << 23));
    }
    return convt_bits_float(bits | (((uint32_t)half & 0x8000u) << 16));
}

/* Round to nearest even.  Subnormal results are produced by an addition whose
 * float rounding performs the half rounding; normal results add the rounding
 * bias (0xfff plus the lowest kept bit) before truncating 13 bits. */
static inline uint16_t convt_float_to_half(float value)
{
    uint32_t bits = convt_float_bits(value);
    uint32_t sign = (bits >> 16) & 0x8000u;
    uint32_t magnitude = bits & 0x7fffffffu;
    uint16_t half;
    if (magnitude >= ((uint32_t)(127 + 16) << 23)) {
        half = magnitude > (255u << 23) ? 0x7e00u : 0x7c00u; /* nan : overflow, inf */
    } else if (magnitude < (113u << 23)) {
        const uint32_t magic_bits = (uint32_t)((127 - 15) + (23 - 10) + 1) << 23;
        float shifted = convt_bits_float(magnitude) + convt_bits_float(magic_bits);
        half = (uint16_t)(convt_float_bits(shifted) - magic_bits);
    } else {
        uint32_t lowest_kept = (magnitude >> 13) & 1u;
        magnitude += ((uint32_t)(15 - 127) << 23) + 0xfffu + lowest_kept;
        half = (uint16_t)(magnitude >> 13);
    }
    return (uint16_t)(half | sign);
}

/* Runs of conversions.  On x86-64 CPUs with F16C they convert 8 values per
 * instruction (exactly, and rounding to nearest even like the scalar code;
 * only NaN payloads may differ); elsewhere they loop over the scalar code. */
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#if defined(_MSC_VER)
#include <intrin.h>
#define CONVT_TARGET_F16C
static int convt_cpu_has_f16c(void)
{
    int regs[4];
    __cpuid(regs, 1);
    return (regs[2] & (1 << 29)) && (regs[2] & (1 << 28)) && (regs[2] & (1 << 27))
           && ((_xgetbv(0) & 6) == 6);
}
#else
#include <cpuid.h>
#define CONVT_TARGET_F16C __attribute__((target("avx,f16c")))
static int convt_cpu_has_f16c(void)
{
    unsigned int a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (!(c & (1u << 29)) || !(c & (1u << 28)) || !(c & (1u << 27))) return 0;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6) == 6;
}
#endif

CONVT_TARGET_F16C static void convt_halves_to_floats_f16c(float *dst, const uint16_t *src,
                                                          ptrdiff_t count)
{
    ptrdiff_t i = 0;
    for (; i + 8 <= count; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < count; ++i) dst[i] = convt_half_to_float(src[i]);
}

CONVT_TARGET_F16C static void convt_floats_to_halves_f16c(uint16_t *dst, const float *src,
                                                          ptrdiff_t count, float bias)
{
    __m256 b = _mm256_set1_ps(bias);
    ptrdiff_t i = 0;
    for (; i + 8 <= count; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_add_ps(_mm256_loadu_ps(src + i), b),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < count; ++i) dst[i] = convt_float_to_half(src[i] + bias);
}
#endif

/* Whether F16C may be used; set once by convt_detect_f16c() when the module loads. */
static int convt_f16c = 0;

static void convt_detect_f16c(void)
{
#if defined(__x86_64__) || defined(_M_X64)
    convt_f16c = convt_cpu_has_f16c();
#endif
}

/* dst[i] = src[i] + bias for contiguous runs (the scatter's stride-1 rows): AVX
 * where the CPU has it (detected with F16C, which implies AVX), then the rest. */
#if defined(__x86_64__) || defined(_M_X64)
#define CONVT_DEFINE_ADD_BIAS(NAME, VECTOR, T, V, W, SET1, LOAD, ADD, STORE)           \
    CONVT_TARGET_F16C static ptrdiff_t VECTOR(T *dst, const T *src, ptrdiff_t count,    \
                                              T bias)                                  \
    {                                                                                  \
        V b = SET1(bias);                                                              \
        ptrdiff_t i = 0;                                                               \
        for (; i + (W) <= count; i += (W)) STORE(dst + i, ADD(LOAD(src + i), b));      \
        return i;                                                                      \
    }                                                                                  \
    static void NAME(T *dst, const T *src, ptrdiff_t count, T bias)                    \
    {                                                                                  \
        ptrdiff_t i = convt_f16c ? VECTOR(dst, src, count, bias) : 0;                  \
        for (; i < count; ++i) dst[i] = src[i] + bias;                                 \
    }
CONVT_DEFINE_ADD_BIAS(convt_add_bias_f32, convt_add_bias_avx_f32, float, __m256, 8,
                      _mm256_set1_ps, _mm256_loadu_ps, _mm256_add_ps, _mm256_storeu_ps)
CONVT_DEFINE_ADD_BIAS(convt_add_bias_f64, convt_add_bias_avx_f64, double, __m256d, 4,
                      _mm256_set1_pd, _mm256_loadu_pd, _mm256_add_pd, _mm256_storeu_pd)
#else
#define CONVT_DEFINE_ADD_BIAS(NAME, T)                                                 \
    static void NAME(T *dst, const T *src, ptrdiff_t count, T bias)                    \
    {                                                                                  \
        ptrdiff_t i;                                                                   \
        for (i = 0; i < count; ++i) dst[i] = src[i] + bias;                            \
    }
CONVT_DEFINE_ADD_BIAS(convt_add_bias_f32, float)
CONVT_DEFINE_ADD_BIAS(convt_add_bias_f64, double)
#endif

/* dst[i] = float(src[i]) for a contiguous run. */
static void convt_halves_to_floats(float *dst, const uint16_t *src, ptrdiff_t count)
{
    ptrdiff_t i;
#if defined(__x86_64__) || defined(_M_X64)
    if (convt_f16c) {
        convt_halves_to_floats_f16c(dst, src, count);
        return;
    }
#endif
    for (i = 0; i < count; ++i) dst[i] = convt_half_to_float(src[i]);
}

/* dst[i] = half(src[i] + bias), rounded to nearest even, for a contiguous run. */
static void convt_floats_to_halves(uint16_t *dst, const float *src, ptrdiff_t count, float bias)
{
    ptrdiff_t i;
#if defined(__x86_64__) || defined(_M_X64)
    if (convt_f16c) {
        convt_floats_to_halves_f16c(dst, src, count, bias);
        return;
    }
#endif
    for (i = 0; i < count; ++i) dst[i] = convt_float_to_half(src[i] + bias);
}

#endif /* CONVT_SUPPORT_H */
