/* Plain scalar references of every kernel family (see kernel_set.h for what
 * each family computes).  They define the arithmetic: products are fused
 * multiply-adds in the documented order, so a set flagged CONVT_SET_FUSED must
 * match them bit for bit; other sets match within the rounding bound.  Used
 * by the kernel tests only, never by the engines. */
#ifndef CONVT_REFERENCE_H
#define CONVT_REFERENCE_H

#include <stddef.h>

#include "kernel_set.h"

/* Shape of one kernel call: rows x width outputs; odd rows read B and write C
 * `sibling` positions further (0 for the gemm family).  gemm_t: rows weight
 * rows x width positions, stored transposed. */
typedef struct convt_call_shape {
    int rows;
    int width;
    ptrdiff_t sibling;
} convt_call_shape;

#define CONVT_DECLARE_REFERENCE(S, T)                                                     \
    void convt_reference_gemm_##S(const convt_call_shape *shape, ptrdiff_t depth,         \
                                  ptrdiff_t block, const T *a, const T *b,                \
                                  const ptrdiff_t *offsets, T *c, ptrdiff_t ldc,          \
                                  int accumulate, T *pack_to);                            \
    void convt_reference_gemm_t_##S(const convt_call_shape *shape, ptrdiff_t depth,       \
                                    ptrdiff_t block, const T *a, const T *b,              \
                                    const ptrdiff_t *offsets,                             \
                                    const ptrdiff_t *positions, T *c, ptrdiff_t ldc,      \
                                    int accumulate);                                      \
    void convt_reference_pair_store_##S(const convt_call_shape *shape, int storage,       \
                                        ptrdiff_t depth, ptrdiff_t block, const T *a,     \
                                        const T *b, const ptrdiff_t *offsets, void *y,    \
                                        ptrdiff_t ldy, int accumulate, const T *bias);    \
    void convt_reference_row_##S(ptrdiff_t sources, const T *const *x, const T *w,        \
                                 ptrdiff_t taps, const ptrdiff_t *offsets,                \
                                 ptrdiff_t in_size, ptrdiff_t count, T *out,              \
                                 int accumulate);                                         \
    void convt_reference_channels_##S(ptrdiff_t count, ptrdiff_t channels, const T *x,    \
                                      ptrdiff_t x_step, const T *w, T *out,               \
                                      ptrdiff_t out_step);                                \
    void convt_reference_interleave_##S(T *y, const T *even, const T *odd,                \
                                        ptrdiff_t pairs, T bias);                         \
    void convt_reference_store_even_##S(T *y, const T *src, ptrdiff_t count, T bias);     \
    void convt_reference_pack_pair_##S(ptrdiff_t width, ptrdiff_t depth, const T *b,     \
                                       const ptrdiff_t *offsets, ptrdiff_t sibling,       \
                                       T *to);                                            \
    void convt_reference_add_bias_##S(T *dst, const T *src, ptrdiff_t count, T bias);     \
    void convt_reference_transpose_##S(ptrdiff_t rows, ptrdiff_t cols, const T *src,      \
                                       ptrdiff_t src_stride, T *dst, ptrdiff_t dst_stride, \
                                       const T *bias);                                    \
    void convt_reference_stencil_##S(const convt_stencil_shape *shape, const T *const *x,  \
                                     const T *w, T *out, int accumulate);                 \
    void convt_reference_load_##S(int storage, T *dst, const void *src, ptrdiff_t count); \
    void convt_reference_store_##S(int storage, void *dst, const T *src, ptrdiff_t count, \
                                   T bias);

CONVT_DECLARE_REFERENCE(f32, float)
CONVT_DECLARE_REFERENCE(f64, double)

#endif /* CONVT_REFERENCE_H */
