/* What the two AVX-512 files share (x86_avx512.c, x86_avx512_wide.c): the
 * target attribute, widening loads and rounding stores of the narrow storage
 * types, the identity the block totals start from, the hint for a later call's
 * lines of y, the interleaved store of a channel's two stride phases and the lane
 * orders it uses, and the argument
 * lists of the pair-store kernels per storage type and vector width. */
#ifndef CONVT_X86_AVX512_H
#define CONVT_X86_AVX512_H

#include "prefetch.h"

#define AVX512 CONVT_TARGET("avx512f,avx512vl,avx2,fma,f16c")

/* Widening loads and rounding stores of each storage type, per width. */
#define LOAD_F16_Z(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define STORE_F16_Z(p, v) _mm256_storeu_si256((__m256i *)(p), \
    _mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define LOAD_F16_Y(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define STORE_F16_Y(p, v) _mm_storeu_si128((__m128i *)(p), \
    _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define LOAD_BF16_Z(p) _mm512_castsi512_ps(_mm512_slli_epi32( \
    _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define STORE_BF16_Z(p, v) _mm256_storeu_si256((__m256i *)(p), float_to_bf16_z(v))
#define LOAD_BF16_Y(p) _mm256_castsi256_ps(_mm256_slli_epi32( \
    _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define STORE_BF16_Y(p, v) _mm_storeu_si128((__m128i *)(p), float_to_bf16_y(v))

/* Round to nearest even on the bits; NaN becomes a quiet NaN (as
 * convt_float_to_bf16).  AVX512_BF16's instruction would flush subnormals. */
AVX512 static inline __m256i float_to_bf16_z(__m512 value)
{
    __m512i bits = _mm512_castps_si512(value);
    __m512i lowest_kept = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(lowest_kept,
                                                              _mm512_set1_epi32(0x7fff)));
    __mmask16 nan = _mm512_cmp_ps_mask(value, value, _CMP_UNORD_Q);
    rounded = _mm512_mask_or_epi32(rounded, nan, bits, _mm512_set1_epi32(0x00400000));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16));
}

AVX512 static inline __m128i float_to_bf16_y(__m256 value)
{
    __m256i bits = _mm256_castps_si256(value);
    __m256i lowest_kept = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lowest_kept,
                                                              _mm256_set1_epi32(0x7fff)));
    __mmask8 nan = _mm256_cmp_ps_mask(value, value, _CMP_UNORD_Q);
    rounded = _mm256_mask_or_epi32(rounded, nan, bits, _mm256_set1_epi32(0x00400000));
    return _mm256_cvtepi32_epi16(_mm256_srli_epi32(rounded, 16));
}

/* 64 bytes of -0.0, floats or doubles: the identity the kernels' block totals start
 * from (-0 + x is x for every x, +0 and -0 included), read by vector loads so that
 * the start is chosen by address, with no branch for the compiler to merge the
 * totals through memory. */
static const float NEGATIVE_ZEROS_F32[16] = {-0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f,
                                             -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f,
                                             -0.0f, -0.0f};
static const double NEGATIVE_ZEROS_F64[8] = {-0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0};
#define IDENTITY_LANES(T_SIZE)                                                            \
    ((T_SIZE) == 4 ? (const void *)NEGATIVE_ZEROS_F32 : (const void *)NEGATIVE_ZEROS_F64)

/* Ask for the lines a later call writes, two panels on (DISTANCE elements past
 * this call's first output in each of ROWS rows LDC apart): where C is y and y is
 * not cached (an output larger than the caches, the first calls after a pause),
 * each store otherwise waits for its line's read for ownership.  On 2 Zen 4 vCPUs
 * (alternating builds): a float64 16 -> 16 k4s2 ConvTranspose writing 32 MiB ran
 * 1.25x faster at 1 thread and 1.21x at 2; after a 0.2 s pause, the first call of
 * wav2vec's first layer (1 -> 512, 6.5 MiB of output) took 0.78-0.83 ms against
 * 1.22-1.43 ms; back to back, other layers within the noise. */
#define PREFETCH_LATER_PANEL(ROWS, C, LDC, DISTANCE)                                      \
    for (i = 0; i < (ROWS); ++i) convt_prefetch_write((C) + i * (LDC) + (DISTANCE));

/* One channel's even and odd sums (EVEN, ODD: vectors of W outputs of the two stride
 * phases) interleaved in registers into outputs OUT .. OUT + 2 W - 1, then stored: y +
 * the sums when accumulating, else the sums + the channel's bias (if any), rounded
 * once to the storage type (YLOAD widens, YSTORE rounds).  The pair-store kernels of
 * both files end with it (`accumulate` and `bias` are their arguments). */
#define STORE_PAIR(OUT, EVEN, ODD, CHANNEL, V, W, YLOAD, YSTORE, SET1, ADD, PERMUTE, LOW,  \
                   HIGH)                                                                  \
    {                                                                                     \
        V low = PERMUTE(EVEN, LOW, ODD);                                                  \
        V high = PERMUTE(EVEN, HIGH, ODD);                                                \
        if (accumulate) {                                                                 \
            low = ADD(YLOAD(OUT), low);                                                   \
            high = ADD(YLOAD((OUT) + (W)), high);                                         \
        } else if (bias) {                                                                \
            low = ADD(low, SET1(bias[CHANNEL]));                                          \
            high = ADD(high, SET1(bias[CHANNEL]));                                        \
        }                                                                                 \
        YSTORE(OUT, low);                                                                 \
        YSTORE((OUT) + (W), high);                                                        \
    }

/* Lane orders interleaving two vectors: a0 b0 a1 b1 ... (low half), then the high half. */
#define LOW_ZF _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0)
#define HIGH_ZF _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8)
#define LOW_YF _mm256_set_epi32(11, 3, 10, 2, 9, 1, 8, 0)
#define HIGH_YF _mm256_set_epi32(15, 7, 14, 6, 13, 5, 12, 4)
#define LOW_ZD _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0)
#define HIGH_ZD _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4)
#define LOW_YD _mm256_set_epi64x(5, 1, 4, 0)
#define HIGH_YD _mm256_set_epi64x(7, 3, 6, 2)

/* DEFINE_PAIR_STORE arguments per (storage, width) after NAME and ROWS. */
#define ST_F32_Z float, float, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps, \
    _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, \
    _mm512_permutex2var_ps, LOW_ZF, HIGH_ZF
#define ST_F32_Y float, float, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps, \
    _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, \
    _mm256_permutex2var_ps, LOW_YF, HIGH_YF
#define ST_F16_Z float, uint16_t, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps, \
    LOAD_F16_Z, STORE_F16_Z, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, \
    _mm512_permutex2var_ps, LOW_ZF, HIGH_ZF
#define ST_F16_Y float, uint16_t, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps, \
    LOAD_F16_Y, STORE_F16_Y, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, \
    _mm256_permutex2var_ps, LOW_YF, HIGH_YF
#define ST_BF16_Z float, uint16_t, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps, \
    LOAD_BF16_Z, STORE_BF16_Z, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, \
    _mm512_permutex2var_ps, LOW_ZF, HIGH_ZF
#define ST_BF16_Y float, uint16_t, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps, \
    LOAD_BF16_Y, STORE_BF16_Y, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, \
    _mm256_permutex2var_ps, LOW_YF, HIGH_YF
#define ST_F64_Z double, double, __m512d, 8, _mm512_setzero_pd, _mm512_loadu_pd, \
    _mm512_loadu_pd, _mm512_storeu_pd, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_add_pd, \
    _mm512_permutex2var_pd, LOW_ZD, HIGH_ZD
#define ST_F64_Y double, double, __m256d, 4, _mm256_setzero_pd, _mm256_loadu_pd, \
    _mm256_loadu_pd, _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd, _mm256_add_pd, \
    _mm256_permutex2var_pd, LOW_YD, HIGH_YD

/* pack_pair (kernel_set.h) for panels of VECS vectors of W elements: both operands
 * of every step, to an aligned buffer. */
#define CONVT_AVX512_PACK_PAIR(NAME, T, LOAD, STORE, W, VECS)                             \
    AVX512 static void NAME(ptrdiff_t depth, const T *b, const ptrdiff_t *offsets,        \
                            ptrdiff_t sibling, T *to)                                     \
    {                                                                                     \
        ptrdiff_t k;                                                                      \
        int j;                                                                            \
        for (k = 0; k < depth; ++k)                                                       \
            for (j = 0; j < (VECS); ++j) {                                                \
                STORE(to + ((VECS) * k + j) * (W), LOAD(b + offsets[k] + j * (W)));       \
                STORE(to + ((VECS) * (depth + k) + j) * (W),                              \
                      LOAD(b + offsets[k] + sibling + j * (W)));                          \
            }                                                                             \
    }

/* Capability flags, the empty pair-store table, and the record entries after the
 * pair stores that both sets share (row, channel, store and conversion kernels). */
#define AVX512_FLAGS (CONVT_SET_PACK | CONVT_SET_HALF | CONVT_SET_PAIRS |                  \
                      CONVT_SET_MASKED_STORES | CONVT_SET_FUSED | CONVT_SET_PACK_PAIRS |      \
                      CONVT_SET_STREAM_STORES)
#define AVX512_NO_STORES {{0}, {0}}
#define AVX512_SHARED_F32                                                                 \
    convt_avx512_row_f32, convt_avx512_channels_f32, convt_avx2_interleave_f32,           \
    convt_avx512_store_even_f32, convt_avx2_add_bias_f32, CONVT_AVX2_LOADS_F32,           \
    CONVT_AVX2_STORES_F32
#define AVX512_SHARED_F64                                                                 \
    convt_avx512_row_f64, convt_avx512_channels_f64, convt_avx2_interleave_f64,           \
    convt_avx512_store_even_f64, convt_avx2_add_bias_f64, CONVT_AVX2_LOADS_F64,           \
    CONVT_AVX2_STORES_F64

/* Shared by both sets (x86_avx512.c). */
void convt_avx512_stencil_f32(const convt_stencil_shape *shape, const float *const *x,
                              const float *w, float *out, int accumulate);
void convt_avx512_stencil_f64(const convt_stencil_shape *shape, const double *const *x,
                              const double *w, double *out, int accumulate);
void convt_avx512_row_f32(ptrdiff_t sources, const float *const *x, const float *w,
                          ptrdiff_t taps, const ptrdiff_t *offsets, ptrdiff_t in_size,
                          ptrdiff_t count, float *out, int accumulate);
void convt_avx512_row_f64(ptrdiff_t sources, const double *const *x, const double *w,
                          ptrdiff_t taps, const ptrdiff_t *offsets, ptrdiff_t in_size,
                          ptrdiff_t count, double *out, int accumulate);
void convt_avx512_channels_f32(ptrdiff_t count, ptrdiff_t channels, const float *x,
                               ptrdiff_t x_step, const float *w, float *out,
                               ptrdiff_t out_step);
void convt_avx512_channels_f64(ptrdiff_t count, ptrdiff_t channels, const double *x,
                               ptrdiff_t x_step, const double *w, double *out,
                               ptrdiff_t out_step);
void convt_avx512_store_even_f32(float *y, const float *src, ptrdiff_t count, float bias);
void convt_avx512_store_even_f64(double *y, const double *src, ptrdiff_t count, double bias);

#endif /* CONVT_X86_AVX512_H */
