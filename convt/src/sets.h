/* Declarations shared by the kernel-set files (not by the drivers): the
 * registered sets, and the pieces one set borrows from another. */
#ifndef CONVT_SETS_H
#define CONVT_SETS_H

#include "kernel_set.h"

#if defined(__x86_64__) || defined(_M_X64)
#define CONVT_X86_64 1
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
#define CONVT_AARCH64 1
#endif

/* GCC and Clang (clang-cl included) compile intrinsics only inside functions
 * whose target allows them; MSVC accepts them anywhere. */
#if defined(__GNUC__) || defined(__clang__)
#define CONVT_TARGET(features) __attribute__((target(features)))
#else
#define CONVT_TARGET(features)
#endif

/* A function the compiler must not inline (see arm_neon.c's storing pairs). */
#if defined(__GNUC__) || defined(__clang__)
#define CONVT_NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define CONVT_NOINLINE __declspec(noinline)
#else
#define CONVT_NOINLINE
#endif

extern const convt_kernels_f32 convt_portable_f32;
extern const convt_kernels_f64 convt_portable_f64;
#ifdef CONVT_X86_64
extern const convt_kernels_f32 convt_avx2_f32;
extern const convt_kernels_f64 convt_avx2_f64;
extern const convt_kernels_f32 convt_avx512_f32;
extern const convt_kernels_f64 convt_avx512_f64;
extern const convt_kernels_f32 convt_avx512_wide_f32;
extern const convt_kernels_f64 convt_avx512_wide_f64;
#endif
#ifdef CONVT_AARCH64
extern const convt_kernels_f32 convt_neon_f32;
extern const convt_kernels_f64 convt_neon_f64;
#endif

/* Outputs t in [lo, hi) of a row read every tap inside the input: no bounds
 * checks there. */
static inline void convt_row_interior(ptrdiff_t taps, const ptrdiff_t *offsets,
                                      ptrdiff_t in_size, ptrdiff_t count, ptrdiff_t *lo,
                                      ptrdiff_t *hi)
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

#define CONVT_MUL_ADD(a, b, c) ((a) * (b) + (c))

/* The checked sum of output t of a row (its edges): taps outside the input
 * are skipped; MADD(w, x, sum) is a multiply-add, fused or not. */
#define CONVT_ROW_EDGE(T, t, MADD)                                                        \
    {                                                                                     \
        T sum = accumulate ? out[t] : (T)0;                                               \
        ptrdiff_t s, j;                                                                   \
        for (s = 0; s < sources; ++s)                                                     \
            for (j = 0; j < taps; ++j) {                                                  \
                ptrdiff_t i = (t) + offsets[j];                                           \
                if (i >= 0 && i < in_size) sum = MADD(w[s * taps + j], x[s][i], sum);     \
            }                                                                             \
        out[t] = sum;                                                                     \
    }

/* The stencil family (kernel_set.h) in plain C, for sets without their own:
 * each output row in blocks of CONVT_STENCIL_BLOCK outputs summed side by side
 * (which compilers vectorise); a tap whose block lies inside the input reads it
 * without bounds checks.  MADD(w, x, sum) is the set's multiply-add. */
#define CONVT_STENCIL_BLOCK 16
#define CONVT_DEFINE_STENCIL(NAME, T, MADD)                                               \
    void NAME(const convt_stencil_shape *shape, const T *const *x, const T *w, T *out,    \
              int accumulate)                                                             \
    {                                                                                     \
        ptrdiff_t r, t, i, j, n;                                                          \
        for (r = 0; r < shape->rows; ++r) {                                               \
            T *o = out + r * shape->out_stride;                                           \
            for (t = 0; t < shape->count; t += CONVT_STENCIL_BLOCK) {                     \
                ptrdiff_t width = shape->count - t;                                       \
                T sums[CONVT_STENCIL_BLOCK];                                              \
                if (width > CONVT_STENCIL_BLOCK) width = CONVT_STENCIL_BLOCK;             \
                for (n = 0; n < width; ++n) sums[n] = accumulate ? o[t + n] : (T)0;       \
                for (i = 0; i < shape->kernel_rows; ++i)                                  \
                    for (j = 0; j < shape->taps; ++j) {                                   \
                        const T *row = x[r + i];                                          \
                        T weight = w[i * shape->taps + j];                                \
                        ptrdiff_t u = t + shape->offsets[j];                              \
                        if (width == CONVT_STENCIL_BLOCK && u >= 0                        \
                            && u + CONVT_STENCIL_BLOCK <= shape->in_size) {               \
                            for (n = 0; n < CONVT_STENCIL_BLOCK; ++n)                     \
                                sums[n] = MADD(weight, row[u + n], sums[n]);              \
                            continue;                                                     \
                        }                                                                 \
                        for (n = 0; n < width; ++n) {                                     \
                            T value = u + n >= 0 && u + n < shape->in_size ? row[u + n]   \
                                                                           : (T)0;        \
                            sums[n] = MADD(weight, value, sums[n]);                       \
                        }                                                                 \
                    }                                                                     \
                for (n = 0; n < width; ++n) o[t + n] = sums[n];                           \
            }                                                                             \
        }                                                                                 \
    }

/* Functions of the portable set that other sets reuse. */
#define CONVT_DECLARE_PORTABLE(S, T)                                                      \
    void convt_portable_row_##S(ptrdiff_t sources, const T *const *x, const T *w,         \
                                ptrdiff_t taps, const ptrdiff_t *offsets,                 \
                                ptrdiff_t in_size, ptrdiff_t count, T *out,               \
                                int accumulate);                                          \
    void convt_portable_channels_##S(ptrdiff_t count, ptrdiff_t channels, const T *x,     \
                                     ptrdiff_t x_step, const T *w, T *out,                \
                                     ptrdiff_t out_step);                                 \
    void convt_portable_interleave_##S(T *y, const T *even, const T *odd,                 \
                                       ptrdiff_t pairs, T bias);                          \
    void convt_portable_store_even_##S(T *y, const T *src, ptrdiff_t count, T bias);      \
    void convt_portable_add_bias_##S(T *dst, const T *src, ptrdiff_t count, T bias);      \
    void convt_portable_load_f16_##S(T *dst, const void *src, ptrdiff_t count);           \
    void convt_portable_load_bf16_##S(T *dst, const void *src, ptrdiff_t count);          \
    void convt_portable_load_f32_##S(T *dst, const void *src, ptrdiff_t count);           \
    void convt_portable_load_f64_##S(T *dst, const void *src, ptrdiff_t count);           \
    void convt_portable_store_f16_##S(void *dst, const T *src, ptrdiff_t count, T bias);  \
    void convt_portable_store_bf16_##S(void *dst, const T *src, ptrdiff_t count, T bias); \
    void convt_portable_store_f32_##S(void *dst, const T *src, ptrdiff_t count, T bias);  \
    void convt_portable_store_f64_##S(void *dst, const T *src, ptrdiff_t count, T bias);  \
    void convt_portable_transpose_##S(ptrdiff_t rows, ptrdiff_t cols, const T *src,       \
                                      ptrdiff_t src_stride, T *dst, ptrdiff_t dst_stride, \
                                      const T *bias);                                     \
    void convt_portable_stencil_##S(const convt_stencil_shape *shape, const T *const *x,  \
                                    const T *w, T *out, int accumulate);
CONVT_DECLARE_PORTABLE(f32, float)
CONVT_DECLARE_PORTABLE(f64, double)

/* Conversion tables in storage order (CONVT_F16, CONVT_BF16, CONVT_F32, CONVT_F64). */
#define CONVT_PORTABLE_LOADS(S)                                                           \
    {convt_portable_load_f16_##S, convt_portable_load_bf16_##S,                           \
     convt_portable_load_f32_##S, convt_portable_load_f64_##S}
#define CONVT_PORTABLE_STORES(S)                                                          \
    {convt_portable_store_f16_##S, convt_portable_store_bf16_##S,                         \
     convt_portable_store_f32_##S, convt_portable_store_f64_##S}

#ifdef CONVT_X86_64
/* AVX2 pieces the AVX-512 set reuses (memory-bound: wider vectors gain nothing). */
#define CONVT_DECLARE_AVX2(S, T)                                                          \
    void convt_avx2_row_##S(ptrdiff_t sources, const T *const *x, const T *w,             \
                            ptrdiff_t taps, const ptrdiff_t *offsets, ptrdiff_t in_size,  \
                            ptrdiff_t count, T *out, int accumulate);                     \
    void convt_avx2_interleave_##S(T *y, const T *even, const T *odd, ptrdiff_t pairs,    \
                                   T bias);                                               \
    void convt_avx2_interleave_stream_##S(T *y, const T *even, const T *odd,              \
                                          ptrdiff_t pairs, T bias);                       \
    void convt_avx2_add_bias_##S(T *dst, const T *src, ptrdiff_t count, T bias);        \
    void convt_avx2_transpose_##S(ptrdiff_t rows, ptrdiff_t cols, const T *src,           \
                                  ptrdiff_t src_stride, T *dst, ptrdiff_t dst_stride,     \
                                  const T *bias);
CONVT_DECLARE_AVX2(f32, float)
CONVT_DECLARE_AVX2(f64, double)
CONVT_DECLARE_WINOGRAD(convt_avx2_winograd)
CONVT_DECLARE_PLANE(convt_avx2_plane)
CONVT_DECLARE_PLANE(convt_avx512_plane)
void convt_avx2_load_f16_f32(float *dst, const void *src, ptrdiff_t count);
void convt_avx2_load_bf16_f32(float *dst, const void *src, ptrdiff_t count);
void convt_avx2_load_f32_f32(float *dst, const void *src, ptrdiff_t count);
void convt_avx2_load_f64_f64(double *dst, const void *src, ptrdiff_t count);
void convt_avx2_store_f16_f32(void *dst, const float *src, ptrdiff_t count, float bias);
void convt_avx2_store_bf16_f32(void *dst, const float *src, ptrdiff_t count, float bias);
void convt_avx2_store_f32_f32(void *dst, const float *src, ptrdiff_t count, float bias);
void convt_avx2_store_f64_f64(void *dst, const double *src, ptrdiff_t count, double bias);
#define CONVT_AVX2_LOADS_F32                                                              \
    {convt_avx2_load_f16_f32, convt_avx2_load_bf16_f32, convt_avx2_load_f32_f32,          \
     convt_portable_load_f64_f32}
#define CONVT_AVX2_STORES_F32                                                             \
    {convt_avx2_store_f16_f32, convt_avx2_store_bf16_f32, convt_avx2_store_f32_f32,       \
     convt_portable_store_f64_f32}
#define CONVT_AVX2_LOADS_F64                                                              \
    {convt_portable_load_f16_f64, convt_portable_load_bf16_f64,                           \
     convt_portable_load_f32_f64, convt_avx2_load_f64_f64}
#define CONVT_AVX2_STORES_F64                                                             \
    {convt_portable_store_f16_f64, convt_portable_store_bf16_f64,                         \
     convt_portable_store_f32_f64, convt_avx2_store_f64_f64}
#endif

#endif /* CONVT_SETS_H */
