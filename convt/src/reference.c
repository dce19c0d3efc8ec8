/* Scalar references of the kernel families (see reference.h). */
#include <math.h>

#include "reference.h"

/* The blocked sum of one output: row i, position j (see kernel_set.h).
 * `start` is c's value when accumulating; `first` says there is none. */
#define CONVT_DEFINE_BLOCKED_SUM(S, T, FMA)                                                \
    static T blocked_sum_##S(const convt_call_shape *shape, int i, int j, ptrdiff_t depth,  \
                             ptrdiff_t block, const T *a, const T *b,                       \
                             const ptrdiff_t *offsets, T start, int first)                  \
    {                                                                                       \
        ptrdiff_t shift = (i & 1) ? shape->sibling : 0, k = 0, end;                         \
        T total = start;                                                                    \
        while (k < depth) {                                                                 \
            T sum = 0;                                                                      \
            end = k + block < depth ? k + block : depth;                                    \
            for (; k < end; ++k)                                                            \
                sum = FMA(a[k * shape->rows + i], b[offsets[k] + shift + j], sum);          \
            total = first ? sum : total + sum;                                              \
            first = 0;                                                                      \
        }                                                                                   \
        return total;                                                                       \
    }

#define CONVT_DEFINE_REFERENCE(S, T, FMA)                                                  \
    CONVT_DEFINE_BLOCKED_SUM(S, T, FMA)                                                     \
                                                                                            \
    void convt_reference_gemm_##S(const convt_call_shape *shape, ptrdiff_t depth,           \
                                  ptrdiff_t block, const T *a, const T *b,                  \
                                  const ptrdiff_t *offsets, T *c, ptrdiff_t ldc,            \
                                  int accumulate, T *pack_to)                               \
    {                                                                                       \
        int i, j;                                                                           \
        ptrdiff_t k;                                                                        \
        for (i = 0; i < shape->rows; ++i)                                                   \
            for (j = 0; j < shape->width; ++j) {                                            \
                T *out = c + i * ldc + ((i & 1) ? shape->sibling : 0) + j;                  \
                *out = blocked_sum_##S(shape, i, j, depth, block, a, b, offsets,            \
                                       accumulate ? *out : (T)0, !accumulate);              \
            }                                                                               \
        if (pack_to)                                                                        \
            for (k = 0; k < depth; ++k)                                                     \
                for (j = 0; j < shape->width; ++j)                                          \
                    pack_to[k * shape->width + j] = b[offsets[k] + j];                      \
    }                                                                                       \
                                                                                            \
    void convt_reference_gemm_t_##S(const convt_call_shape *shape, ptrdiff_t depth,         \
                                    ptrdiff_t block, const T *a, const T *b,                \
                                    const ptrdiff_t *offsets, const ptrdiff_t *positions,   \
                                    T *c, ptrdiff_t ldc, int accumulate)                    \
    {                                                                                       \
        int i, j;                                                                           \
        for (j = 0; j < shape->width; ++j)                                                  \
            for (i = 0; i < shape->rows; ++i) {                                             \
                T *out = c + j * ldc + i;                                                   \
                *out = blocked_sum_##S(shape, i, 0, depth, block, a, b + positions[j],      \
                                       offsets, accumulate ? *out : (T)0, !accumulate);     \
            }                                                                               \
    }                                                                                       \
                                                                                            \
    void convt_reference_pair_store_##S(const convt_call_shape *shape, int storage,         \
                                        ptrdiff_t depth, ptrdiff_t block, const T *a,       \
                                        const T *b, const ptrdiff_t *offsets, void *y,      \
                                        ptrdiff_t ldy, int accumulate, const T *bias)       \
    {                                                                                       \
        int i, j;                                                                           \
        for (i = 0; i < shape->rows; ++i)                                                   \
            for (j = 0; j < shape->width; ++j) {                                            \
                ptrdiff_t at = (i / 2) * ldy + 2 * j + (i & 1);                             \
                T v = blocked_sum_##S(shape, i, j, depth, block, a, b, offsets, 0, 1);      \
                if (accumulate)                                                             \
                    v = (T)convt_load_double(y, at, storage) + v;                           \
                else if (bias)                                                              \
                    v = v + bias[i / 2];                                                    \
                convt_store_double(y, at, storage, v);                                                     \
            }                                                                               \
    }                                                                                       \
                                                                                            \
    void convt_reference_row_##S(ptrdiff_t sources, const T *const *x, const T *w,          \
                                 ptrdiff_t taps, const ptrdiff_t *offsets,                  \
                                 ptrdiff_t in_size, ptrdiff_t count, T *out,                \
                                 int accumulate)                                            \
    {                                                                                       \
        ptrdiff_t t, s, j;                                                                  \
        for (t = 0; t < count; ++t) {                                                       \
            T sum = accumulate ? out[t] : (T)0;                                             \
            for (s = 0; s < sources; ++s)                                                   \
                for (j = 0; j < taps; ++j) {                                                \
                    ptrdiff_t i = t + offsets[j];                                           \
                    if (i >= 0 && i < in_size) sum = FMA(w[s * taps + j], x[s][i], sum);    \
                }                                                                           \
            out[t] = sum;                                                                   \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    void convt_reference_channels_##S(ptrdiff_t count, ptrdiff_t channels, const T *x,      \
                                      ptrdiff_t x_step, const T *w, T *out,                 \
                                      ptrdiff_t out_step)                                   \
    {                                                                                       \
        ptrdiff_t t, c;                                                                     \
        for (t = 0; t < count; ++t)                                                         \
            for (c = 0; c < channels; ++c)                                                  \
                out[t * out_step + c] = FMA(w[c], x[t * x_step + c], out[t * out_step + c]); \
    }                                                                                       \
                                                                                            \
    void convt_reference_interleave_##S(T *y, const T *even, const T *odd,                  \
                                        ptrdiff_t pairs, T bias)                            \
    {                                                                                       \
        ptrdiff_t i;                                                                        \
        for (i = 0; i < pairs; ++i) {                                                       \
            y[2 * i] = even[i] + bias;                                                      \
            y[2 * i + 1] = odd[i] + bias;                                                   \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    void convt_reference_store_even_##S(T *y, const T *src, ptrdiff_t count, T bias)       \
    {                                                                                       \
        ptrdiff_t i;                                                                        \
        for (i = 0; i < count; ++i) y[2 * i] = src[i] + bias;                               \
    }                                                                                       \
                                                                                            \
    void convt_reference_pack_pair_##S(ptrdiff_t width, ptrdiff_t depth, const T *b,       \
                                       const ptrdiff_t *offsets, ptrdiff_t sibling, T *to) \
    {                                                                                       \
        ptrdiff_t k, j;                                                                     \
        for (k = 0; k < depth; ++k)                                                         \
            for (j = 0; j < width; ++j) {                                                   \
                to[k * width + j] = b[offsets[k] + j];                                      \
                to[(depth + k) * width + j] = b[offsets[k] + sibling + j];                  \
            }                                                                               \
    }                                                                                       \
                                                                                            \
    void convt_reference_add_bias_##S(T *dst, const T *src, ptrdiff_t count, T bias)       \
    {                                                                                       \
        ptrdiff_t i;                                                                        \
        for (i = 0; i < count; ++i) dst[i] = src[i] + bias;                                 \
    }                                                                                       \
                                                                                            \
    void convt_reference_transpose_##S(ptrdiff_t rows, ptrdiff_t cols, const T *src,       \
                                       ptrdiff_t src_stride, T *dst, ptrdiff_t dst_stride,  \
                                       const T *bias)                                       \
    {                                                                                       \
        ptrdiff_t r, c;                                                                     \
        for (r = 0; r < rows; ++r)                                                          \
            for (c = 0; c < cols; ++c)                                                      \
                dst[c * dst_stride + r] =                                                   \
                    bias ? src[r * src_stride + c] + bias[r] : src[r * src_stride + c];      \
    }                                                                                       \
                                                                                            \
    void convt_reference_stencil_##S(const convt_stencil_shape *shape, const T *const *x,   \
                                     const T *w, T *out, int accumulate)                    \
    {                                                                                       \
        ptrdiff_t r, t, i, j;                                                               \
        for (r = 0; r < shape->rows; ++r)                                                   \
            for (t = 0; t < shape->count; ++t) {                                            \
                T *o = out + r * shape->out_stride + t;                                     \
                T sum = accumulate ? *o : (T)0;                                             \
                for (i = 0; i < shape->kernel_rows; ++i)                                    \
                    for (j = 0; j < shape->taps; ++j) {                                     \
                        ptrdiff_t u = t + shape->offsets[j];                                \
                        T value = u >= 0 && u < shape->in_size ? x[r + i][u] : (T)0;        \
                        sum = FMA(w[i * shape->taps + j], value, sum);                      \
                    }                                                                       \
                *o = sum;                                                                   \
            }                                                                               \
    }                                                                                       \
                                                                                            \
    void convt_reference_load_##S(int storage, T *dst, const void *src, ptrdiff_t count)   \
    {                                                                                       \
        ptrdiff_t i;                                                                        \
        for (i = 0; i < count; ++i) dst[i] = (T)convt_load_double(src, i, storage);         \
    }                                                                                       \
                                                                                            \
    void convt_reference_store_##S(int storage, void *dst, const T *src, ptrdiff_t count,   \
                                   T bias)                                                  \
    {                                                                                       \
        ptrdiff_t i;                                                                        \
        for (i = 0; i < count; ++i) convt_store_double(dst, i, storage, src[i] + bias);                    \
    }

CONVT_DEFINE_REFERENCE(f32, float, fmaf)
CONVT_DEFINE_REFERENCE(f64, double, fma)
