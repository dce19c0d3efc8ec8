/* The portable kernel set: plain C for every compiler and CPU.
 *
 * The GEMM kernels have a constant row count (one function per count), so the
 * accumulators are fixed-size locals the compiler keeps in registers.  With
 * GCC or Clang they are written with 16-byte vector extensions, which every
 * 64-bit target maps to its SIMD registers (SSE2, NEON, VSX, z/Vector); other
 * compilers (or CONVT_NO_VECTOR_EXTENSIONS, to test that path) get the same
 * loops on arrays.  The direct engine's rows sum blocks of outputs side by
 * side in the same way.  Products are a multiply and an add
 * unless the compiler contracts them (it may, where FMA is part of the base
 * instruction set), so the set is not flagged CONVT_SET_FUSED.
 */
#include <string.h>

#include "kernel_set.h"
#include "sets.h"

#define NR_F32 8
#define NR_F64 4
#define MR 6

#if (defined(__GNUC__) || defined(__clang__)) && !defined(CONVT_NO_VECTOR_EXTENSIONS)
typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));

/* rows x 2 vectors of accumulators; B rows are loaded unaligned with memcpy */
#define PORTABLE_GEMM(NAME, ROWS, T, V, LANES, SPLAT)                                     \
    static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,            \
                     const ptrdiff_t *offsets, T *c, ptrdiff_t ldc, int accumulate,       \
                     T *pack_to)                                                          \
    {                                                                                     \
        ptrdiff_t k = 0, end;                                                             \
        int i;                                                                            \
        (void)pack_to;                                                                    \
        while (k < depth) {                                                               \
            V acc[ROWS][2];                                                               \
            for (i = 0; i < (ROWS); ++i) acc[i][0] = acc[i][1] = (V){0};                  \
            end = k + block < depth ? k + block : depth;                                  \
            for (; k < end; ++k, a += (ROWS)) {                                           \
                V b0, b1;                                                                 \
                memcpy(&b0, b + offsets[k], sizeof b0);                                   \
                memcpy(&b1, b + offsets[k] + (LANES), sizeof b1);                         \
                for (i = 0; i < (ROWS); ++i) {                                            \
                    V weight = SPLAT(a[i]);                                               \
                    acc[i][0] += weight * b0;                                             \
                    acc[i][1] += weight * b1;                                             \
                }                                                                         \
            }                                                                             \
            for (i = 0; i < (ROWS); ++i) {                                                \
                V c0 = acc[i][0], c1 = acc[i][1], old;                                    \
                if (accumulate) {                                                         \
                    memcpy(&old, c + i * ldc, sizeof old);                                \
                    c0 = old + c0;                                                        \
                    memcpy(&old, c + i * ldc + (LANES), sizeof old);                      \
                    c1 = old + c1;                                                        \
                }                                                                         \
                memcpy(c + i * ldc, &c0, sizeof c0);                                      \
                memcpy(c + i * ldc + (LANES), &c1, sizeof c1);                            \
            }                                                                             \
            accumulate = 1;                                                               \
        }                                                                                 \
    }
/* (V){0} + x would be an addition: it turns -0 into +0, so it stays */
#define SPLAT_4(x) ((v4f){(x), (x), (x), (x)})
#define SPLAT_2(x) ((v2d){(x), (x)})
#define PORTABLE_F32(NAME, ROWS) PORTABLE_GEMM(NAME, ROWS, float, v4f, 4, SPLAT_4)
#define PORTABLE_F64(NAME, ROWS) PORTABLE_GEMM(NAME, ROWS, double, v2d, 2, SPLAT_2)
#else
#define PORTABLE_GEMM(NAME, ROWS, T, NR)                                                  \
    static void NAME(ptrdiff_t depth, ptrdiff_t block, const T *a, const T *b,            \
                     const ptrdiff_t *offsets, T *c, ptrdiff_t ldc, int accumulate,       \
                     T *pack_to)                                                          \
    {                                                                                     \
        ptrdiff_t k = 0, end;                                                             \
        int i, j;                                                                         \
        (void)pack_to;                                                                    \
        while (k < depth) {                                                               \
            T acc[ROWS][NR];                                                              \
            for (i = 0; i < (ROWS); ++i)                                                  \
                for (j = 0; j < (NR); ++j) acc[i][j] = 0;                                 \
            end = k + block < depth ? k + block : depth;                                  \
            for (; k < end; ++k, a += (ROWS))                                             \
                for (i = 0; i < (ROWS); ++i)                                              \
                    for (j = 0; j < (NR); ++j) acc[i][j] += a[i] * b[offsets[k] + j];     \
            for (i = 0; i < (ROWS); ++i)                                                  \
                for (j = 0; j < (NR); ++j)                                                \
                    c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j]; \
            accumulate = 1;                                                               \
        }                                                                                 \
    }
#define PORTABLE_F32(NAME, ROWS) PORTABLE_GEMM(NAME, ROWS, float, NR_F32)
#define PORTABLE_F64(NAME, ROWS) PORTABLE_GEMM(NAME, ROWS, double, NR_F64)
#endif

#define PORTABLE_ROWS(TYPE)                                                              \
    PORTABLE_##TYPE(gemm_##TYPE##_r1, 1) PORTABLE_##TYPE(gemm_##TYPE##_r2, 2)            \
    PORTABLE_##TYPE(gemm_##TYPE##_r3, 3) PORTABLE_##TYPE(gemm_##TYPE##_r4, 4)            \
    PORTABLE_##TYPE(gemm_##TYPE##_r5, 5) PORTABLE_##TYPE(gemm_##TYPE##_r6, 6)
PORTABLE_ROWS(F32)
PORTABLE_ROWS(F64)

/* Direct-engine rows: the interior (every tap inside the input) in blocks of
 * ROW_BLOCK outputs summed side by side, so the compiler vectorises across
 * outputs; each output still sums its sources, then taps, in order.  The rest
 * of the interior and the edges (bounds checked: taps outside the input
 * contribute nothing) one output at a time. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(CONVT_NO_VECTOR_EXTENSIONS)
/* 8 vectors of accumulators: 8 independent add chains */
#define ROW_VECTORS 8
#define PORTABLE_ROW(NAME, T, V, LANES, SPLAT)                                            \
    void NAME(ptrdiff_t sources, const T *const *x, const T *w, ptrdiff_t taps,           \
              const ptrdiff_t *offsets, ptrdiff_t in_size, ptrdiff_t count, T *out,       \
              int accumulate)                                                             \
    {                                                                                     \
        ptrdiff_t t, lo, hi, s, j;                                                        \
        int n;                                                                            \
        convt_row_interior(taps, offsets, in_size, count, &lo, &hi);                      \
        for (t = 0; t < lo; ++t) CONVT_ROW_EDGE(T, t, CONVT_MUL_ADD)                      \
        for (t = lo; t + ROW_VECTORS * (LANES) <= hi; t += ROW_VECTORS * (LANES)) {       \
            V sums[ROW_VECTORS];                                                          \
            for (n = 0; n < ROW_VECTORS; ++n) {                                           \
                sums[n] = SPLAT((T)0);                                                    \
                if (accumulate) memcpy(&sums[n], out + t + n * (LANES), sizeof(V));       \
            }                                                                             \
            for (s = 0; s < sources; ++s)                                                 \
                for (j = 0; j < taps; ++j) {                                              \
                    const T *row = x[s] + t + offsets[j];                                 \
                    V weight = SPLAT(w[s * taps + j]);                                    \
                    for (n = 0; n < ROW_VECTORS; ++n) {                                   \
                        V value;                                                          \
                        memcpy(&value, row + n * (LANES), sizeof value);                  \
                        sums[n] += weight * value;                                        \
                    }                                                                     \
                }                                                                         \
            for (n = 0; n < ROW_VECTORS; ++n)                                             \
                memcpy(out + t + n * (LANES), &sums[n], sizeof(V));                       \
        }                                                                                 \
        for (; t < count; ++t) CONVT_ROW_EDGE(T, t, CONVT_MUL_ADD)                        \
    }
PORTABLE_ROW(convt_portable_row_f32, float, v4f, 4, SPLAT_4)
PORTABLE_ROW(convt_portable_row_f64, double, v2d, 2, SPLAT_2)
#else
/* fixed-length inner loops, which compilers vectorise */
#define ROW_BLOCK 16
#define PORTABLE_ROW(NAME, T)                                                             \
    void NAME(ptrdiff_t sources, const T *const *x, const T *w, ptrdiff_t taps,           \
              const ptrdiff_t *offsets, ptrdiff_t in_size, ptrdiff_t count, T *out,       \
              int accumulate)                                                             \
    {                                                                                     \
        ptrdiff_t t, lo, hi, s, j;                                                        \
        int n;                                                                            \
        convt_row_interior(taps, offsets, in_size, count, &lo, &hi);                      \
        for (t = 0; t < lo; ++t) CONVT_ROW_EDGE(T, t, CONVT_MUL_ADD)                      \
        for (t = lo; t + ROW_BLOCK <= hi; t += ROW_BLOCK) {                               \
            T sums[ROW_BLOCK];                                                            \
            for (n = 0; n < ROW_BLOCK; ++n) sums[n] = accumulate ? out[t + n] : (T)0;     \
            for (s = 0; s < sources; ++s)                                                 \
                for (j = 0; j < taps; ++j) {                                              \
                    const T *row = x[s] + t + offsets[j];                                 \
                    T weight = w[s * taps + j];                                           \
                    for (n = 0; n < ROW_BLOCK; ++n) sums[n] += weight * row[n];           \
                }                                                                         \
            for (n = 0; n < ROW_BLOCK; ++n) out[t + n] = sums[n];                         \
        }                                                                                 \
        for (; t < count; ++t) CONVT_ROW_EDGE(T, t, CONVT_MUL_ADD)                        \
    }
PORTABLE_ROW(convt_portable_row_f32, float)
PORTABLE_ROW(convt_portable_row_f64, double)
#endif

#define PORTABLE_RUNS(S, T)                                                               \
    void convt_portable_channels_##S(ptrdiff_t count, ptrdiff_t channels, const T *x,     \
                                     ptrdiff_t x_step, const T *w, T *out,                \
                                     ptrdiff_t out_step)                                  \
    {                                                                                     \
        ptrdiff_t t, c;                                                                   \
        for (t = 0; t < count; ++t) {                                                     \
            const T *in = x + t * x_step;                                                 \
            T *o = out + t * out_step;                                                    \
            for (c = 0; c < channels; ++c) o[c] = CONVT_MUL_ADD(w[c], in[c], o[c]);       \
        }                                                                                 \
    }                                                                                     \
    void convt_portable_interleave_##S(T *y, const T *even, const T *odd, ptrdiff_t pairs, \
                                       T bias)                                            \
    {                                                                                     \
        ptrdiff_t i;                                                                      \
        for (i = 0; i < pairs; ++i) {                                                     \
            y[2 * i] = even[i] + bias;                                                    \
            y[2 * i + 1] = odd[i] + bias;                                                 \
        }                                                                                 \
    }                                                                                     \
    void convt_portable_store_even_##S(T *y, const T *src, ptrdiff_t count, T bias)       \
    {                                                                                     \
        ptrdiff_t i;                                                                      \
        for (i = 0; i < count; ++i) y[2 * i] = src[i] + bias;                             \
    }                                                                                     \
    void convt_portable_add_bias_##S(T *dst, const T *src, ptrdiff_t count, T bias)       \
    {                                                                                     \
        ptrdiff_t i;                                                                      \
        for (i = 0; i < count; ++i) dst[i] = src[i] + bias;                               \
    }
PORTABLE_RUNS(f32, float)
PORTABLE_RUNS(f64, double)

/* Transposes in square blocks of TRANSPOSE_BLOCK: each block reads and writes
 * whole cache lines of its rows instead of one element per line; the vector
 * sets transpose the blocks' interiors in registers and call this for edges. */
#define TRANSPOSE_BLOCK 16
#define PORTABLE_TRANSPOSE(S, T)                                                          \
    void convt_portable_transpose_##S(ptrdiff_t rows, ptrdiff_t cols, const T *src,       \
                                      ptrdiff_t src_stride, T *dst, ptrdiff_t dst_stride, \
                                      const T *bias)                                      \
    {                                                                                     \
        ptrdiff_t r0, c0, r, c, r_end, c_end;                                             \
        for (r0 = 0; r0 < rows; r0 += TRANSPOSE_BLOCK) {                                  \
            r_end = r0 + TRANSPOSE_BLOCK < rows ? r0 + TRANSPOSE_BLOCK : rows;            \
            for (c0 = 0; c0 < cols; c0 += TRANSPOSE_BLOCK) {                              \
                c_end = c0 + TRANSPOSE_BLOCK < cols ? c0 + TRANSPOSE_BLOCK : cols;        \
                for (c = c0; c < c_end; ++c)                                              \
                    for (r = r0; r < r_end; ++r)                                          \
                        dst[c * dst_stride + r] = bias ? src[r * src_stride + c] + bias[r] \
                                                       : src[r * src_stride + c];         \
            }                                                                             \
        }                                                                                 \
    }
PORTABLE_TRANSPOSE(f32, float)
PORTABLE_TRANSPOSE(f64, double)

/* Conversions to and from storage: exact widening, one rounding on the way out. */
#define PORTABLE_CONVERSIONS(S, T)                                                        \
    void convt_portable_load_f16_##S(T *dst, const void *src, ptrdiff_t count)            \
    {                                                                                     \
        ptrdiff_t i;                                                                      \
        for (i = 0; i < count; ++i) dst[i] = convt_half_to_float(((const uint16_t *)src)[i]); \
    }                                                                                     \
    void convt_portable_load_bf16_##S(T *dst, const void *src, ptrdiff_t count)           \
    {                                                                                     \
        ptrdiff_t i;                                                                      \
        for (i = 0; i < count; ++i) dst[i] = convt_bf16_to_float(((const uint16_t *)src)[i]); \
    }                                                                                     \
    void convt_portable_load_f32_##S(T *dst, const void *src, ptrdiff_t count)            \
    {                                                                                     \
        ptrdiff_t i;                                                                      \
        for (i = 0; i < count; ++i) dst[i] = (T)((const float *)src)[i];                  \
    }                                                                                     \
    void convt_portable_load_f64_##S(T *dst, const void *src, ptrdiff_t count)            \
    {                                                                                     \
        ptrdiff_t i;                                                                      \
        for (i = 0; i < count; ++i) dst[i] = (T)((const double *)src)[i];                 \
    }                                                                                     \
    void convt_portable_store_f16_##S(void *dst, const T *src, ptrdiff_t count, T bias)   \
    {                                                                                     \
        ptrdiff_t i;                                                                      \
        for (i = 0; i < count; ++i)                                                       \
            ((uint16_t *)dst)[i] = convt_float_to_half((float)(src[i] + bias));           \
    }                                                                                     \
    void convt_portable_store_bf16_##S(void *dst, const T *src, ptrdiff_t count, T bias)  \
    {                                                                                     \
        ptrdiff_t i;                                                                      \
        for (i = 0; i < count; ++i)                                                       \
            ((uint16_t *)dst)[i] = convt_float_to_bf16((float)(src[i] + bias));           \
    }                                                                                     \
    void convt_portable_store_f32_##S(void *dst, const T *src, ptrdiff_t count, T bias)   \
    {                                                                                     \
        ptrdiff_t i;                                                                      \
        for (i = 0; i < count; ++i) ((float *)dst)[i] = (float)(src[i] + bias);           \
    }                                                                                     \
    void convt_portable_store_f64_##S(void *dst, const T *src, ptrdiff_t count, T bias)   \
    {                                                                                     \
        ptrdiff_t i;                                                                      \
        for (i = 0; i < count; ++i) ((double *)dst)[i] = (double)(src[i] + bias);        \
    }
PORTABLE_CONVERSIONS(f32, float)
PORTABLE_CONVERSIONS(f64, double)

CONVT_DEFINE_STENCIL(convt_portable_stencil_f32, float, CONVT_MUL_ADD)
CONVT_DEFINE_STENCIL(convt_portable_stencil_f64, double, CONVT_MUL_ADD)

#define PORTABLE_SET(S, TYPE, NR)                                                         \
    const convt_kernels_##S convt_portable_##S = {                                        \
        "portable", MR, NR, 0,                                                            \
        {gemm_##TYPE##_r1, gemm_##TYPE##_r2, gemm_##TYPE##_r3,                            \
         gemm_##TYPE##_r4, gemm_##TYPE##_r5, gemm_##TYPE##_r6},                           \
        {0}, {0}, {{0}}, {{{0}}},                                                         \
        convt_portable_row_##S, convt_portable_channels_##S, convt_portable_interleave_##S,                            \
        convt_portable_store_even_##S, convt_portable_add_bias_##S,                       \
        CONVT_PORTABLE_LOADS(S), CONVT_PORTABLE_STORES(S), 0,                             \
        convt_portable_transpose_##S, convt_portable_stencil_##S};
PORTABLE_SET(f32, F32, NR_F32)
PORTABLE_SET(f64, F64, NR_F64)
