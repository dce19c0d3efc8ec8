/* The depthwise planes of plane.h, included by each file that compiles them for a
 * CPU family, with PLANE_NAME(part) naming its functions, PLANE_TARGET its target
 * attribute (empty for the baseline build), and per element type S (f32, f64)
 * its vectors: PLANE_V_S, PLANE_LANES_S lanes, PLANE_ZERO_S(), PLANE_SPLAT_S(v),
 * PLANE_LOAD_S(p) and PLANE_STORE_S(p, v) (unaligned), PLANE_ADD_S(a, b) and
 * PLANE_MADD_S(w, x, acc) (w x + acc, fused where the family's multiply-adds are). */
#include <string.h>

#include "plane.h"

/* The input plane into the buffer: row r, phase p holds padded column q stride_x
 * + p at q, that is input column q stride_x + p - pad_left.  Only input elements
 * are written, except that a row's copy may end in whole vectors past its input
 * (reading further along the plane, never past its last element) whose extra
 * elements are zeroed again; the rest (padding) is zeroed when the buffer is
 * fresh. */
#define PLANE_DEFINE_FILL(S, T)                                                           \
    static PLANE_TARGET void PLANE_NAME(fill_##S)(const convt_plane_shape *s,             \
                                                  const T *x, T *buffer, int fresh)       \
    {                                                                                     \
        enum { L = PLANE_LANES_##S };                                                     \
        const ptrdiff_t rows = s->rows, width = s->width, sx = s->stride_x;               \
        /* buffer rows [top, end): input rows from top - pad_top */                       \
        const ptrdiff_t top = s->pad_top > 0 ? s->pad_top : 0;                            \
        const ptrdiff_t end = s->pad_top + s->in_height < rows ? s->pad_top + s->in_height \
                                                               : rows;                    \
        /* the plane's elements from its first, where rows lie forward */                 \
        const ptrdiff_t limit = s->x_row > 0 ? (s->in_height - 1) * s->x_row + s->in_width \
                                             : 0;                                         \
        ptrdiff_t r, p, q;                                                                \
        if (fresh)                                                                        \
            memset(buffer, 0, (size_t)(rows * sx * width) * sizeof(T));                   \
        if (sx == 2 && s->x_col == 1                                                      \
            && s->in_width + s->pad_left <= 2 * width) {                                  \
            /* input column i goes to phase (i + pad_left) % 2 at (i + pad_left) / 2: */  \
            /* the even and odd columns, each a unit-stride run into one phase */         \
            const ptrdiff_t pairs = s->in_width / 2, left = s->pad_left;                  \
            T *to_even = buffer + (left % 2) * rows * width + left / 2;                   \
            T *to_odd = buffer + ((left + 1) % 2) * rows * width + (left + 1) / 2;        \
            for (r = top; r < end; ++r) {                                                 \
                const T *in = x + (r - s->pad_top) * s->x_row;                            \
                T *even = to_even + r * width, *odd = to_odd + r * width;                 \
                for (q = 0; q < pairs; ++q) {                                             \
                    even[q] = in[2 * q];                                                  \
                    odd[q] = in[2 * q + 1];                                               \
                }                                                                         \
                if (s->in_width % 2)                                                      \
                    even[pairs] = in[2 * pairs];                                          \
            }                                                                             \
            return;                                                                       \
        }                                                                                 \
        for (p = 0; p < sx; ++p) {                                                        \
            /* q in [first, last): input columns inside [0, in_width) */                  \
            const ptrdiff_t before = s->pad_left - p, after = s->in_width + before;       \
            ptrdiff_t first = before > 0 ? (before + sx - 1) / sx : 0;                    \
            ptrdiff_t last = after > 0 ? (after + sx - 1) / sx : 0;                       \
            ptrdiff_t n, whole;                                                           \
            if (last > width) last = width;                                               \
            if (first > last) first = last;                                               \
            n = last - first;                                                             \
            whole = (n + L - 1) / L * L;  /* a row's copy in whole vectors */             \
            if (first + whole > width) whole = 0;                                         \
            for (r = top; r < end; ++r) {                                                 \
                T *row = buffer + (p * rows + r) * width + first;                         \
                const ptrdiff_t at = (r - s->pad_top) * s->x_row                          \
                                     + (first * sx - before) * s->x_col;                  \
                const T *in = x + at;                                                     \
                if (sx == 1 && s->x_col == 1 && whole && at + whole <= limit) {           \
                    /* whole vectors, reading into the next input row */                  \
                    for (q = 0; q < whole; q += L) {                                      \
                        const PLANE_V_##S v = PLANE_LOAD_##S(in + q);                     \
                        PLANE_STORE_##S(row + q, v);                                      \
                    }                                                                     \
                    for (q = n; q < whole; ++q) row[q] = (T)0;                            \
                } else if (sx == 1 && s->x_col == 1) {                                    \
                    memcpy(row, in, (size_t)n * sizeof(T));                               \
                } else {                                                                  \
                    const ptrdiff_t step = sx * s->x_col;                                 \
                    for (q = 0; q < n; ++q) row[q] = in[q * step];                        \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }

/* Output rows oy .. oy + count - 1 (count <= ROWS), one block of VECS vectors of
 * outputs from t: ROWS x VECS independent sums (a sum's multiply-adds wait on
 * each other: a row alone would run at the FMA latency; rows past count repeat
 * the last one and are not stored), each from zero over kernel rows, then taps,
 * then + bias (if any).  A block past the row's end is stored whole when its
 * extra lanes fall on rows of the plane that are written after it (y's rows
 * contiguous; the row is one block, or the next row is the next block's),
 * else through a copy. */
#define PLANE_BLOCK(S, T, ROWS, VECS, KH, KW)                                             \
    {                                                                                     \
        PLANE_V_##S acc[ROWS][VECS];                                                      \
        ptrdiff_t shift[ROWS];                                                            \
        for (r = 0; r < (ROWS); ++r) {                                                    \
            shift[r] = (r < count ? r : count - 1) * row_step;                            \
            for (v = 0; v < (VECS); ++v) acc[r][v] = PLANE_ZERO_##S();                    \
        }                                                                                 \
        for (i = 0; i < (KH); ++i) {                                                      \
            const T *row = buffer + (oy * s->stride_y + i * s->dilation_y) * width + t;   \
            const T *weights = w + i * (KW);                                              \
            for (j = 0; j < (KW); ++j) {                                                  \
                const T *src = row + s->taps[j];                                          \
                const PLANE_V_##S weight = PLANE_SPLAT_##S(weights[j]);                   \
                for (r = 0; r < (ROWS); ++r)                                              \
                    for (v = 0; v < (VECS); ++v)                                          \
                        acc[r][v] = PLANE_MADD_##S(                                       \
                            weight, PLANE_LOAD_##S(src + shift[r] + v * L), acc[r][v]);   \
            }                                                                             \
        }                                                                                 \
        for (r = 0; r < (ROWS); ++r) {                                                    \
            T *out = y + (oy + r) * s->y_row;                                             \
            T sums[(VECS) * L];                                                           \
            if (r >= count)                                                               \
                break;                                                                    \
            if (bias) {                                                                   \
                const PLANE_V_##S add = PLANE_SPLAT_##S(*bias);                           \
                for (v = 0; v < (VECS); ++v) acc[r][v] = PLANE_ADD_##S(acc[r][v], add);   \
            }                                                                             \
            if (t + (VECS) * L <= ow                                                      \
                || (packed && (oy + r) * ow + t + (VECS) * L <= oh * ow                   \
                    && (ow <= (VECS) * L || r == count - 1))) {                           \
                for (v = 0; v < (VECS); ++v) PLANE_STORE_##S(out + t + v * L, acc[r][v]); \
            } else {                                                                      \
                for (v = 0; v < (VECS); ++v) PLANE_STORE_##S(sums + v * L, acc[r][v]);    \
                for (n = 0; n < ow - t; ++n) out[(t + n) * s->y_col] = sums[n];           \
            }                                                                             \
        }                                                                                 \
    }

/* One output channel's plane from the filled buffer, KH x KW taps (constants, or
 * the shape's): rows one vector long in blocks of 8 rows, longer rows in blocks
 * of 4 rows x 2 vectors (8 sums either way). */
#define PLANE_DEFINE_SUMS_OF(S, T, SUFFIX, KH, KW)                                        \
    static PLANE_TARGET void PLANE_NAME(sums_##SUFFIX)(const convt_plane_shape *s,        \
                                                       const T *buffer, const T *w,       \
                                                       const T *bias, T *y)               \
    {                                                                                     \
        enum { L = PLANE_LANES_##S };                                                     \
        const ptrdiff_t width = s->width, kh = s->kernel_height, kw = s->kernel_width;    \
        const ptrdiff_t ow = s->out_width, oh = s->out_height;                            \
        const ptrdiff_t row_step = s->stride_y * width;  /* one output row further */     \
        const int packed = s->y_col == 1 && s->y_row == ow;                               \
        ptrdiff_t oy, t, i, j, r, v, n, count;                                            \
        (void)kh;                                                                         \
        (void)kw;                                                                         \
        if (ow <= L) {                                                                    \
            for (oy = 0; oy < oh; oy += 8) {                                              \
                count = oh - oy < 8 ? oh - oy : 8;                                        \
                t = 0;                                                                    \
                PLANE_BLOCK(S, T, 8, 1, KH, KW)                                           \
            }                                                                             \
            return;                                                                       \
        }                                                                                 \
        for (oy = 0; oy < oh; oy += 4) {                                                  \
            count = oh - oy < 4 ? oh - oy : 4;                                            \
            for (t = 0; t < ow; t += 2 * L)                                               \
                PLANE_BLOCK(S, T, 4, 2, KH, KW)                                           \
        }                                                                                 \
    }
/* 3x3 kernels get their taps unrolled: the tap loops' overheads took about as
 * long as a block's multiply-adds (a depthwise 3x3 Conv on 14x14 planes: 1.3x
 * faster sums, 1 Zen 3 core). */
#define PLANE_DEFINE_SUMS(S, T)                                                           \
    PLANE_DEFINE_SUMS_OF(S, T, S##_3x3, 3, 3)                                             \
    PLANE_DEFINE_SUMS_OF(S, T, S, kh, kw)

#define PLANE_DEFINE(S, T)                                                                \
    PLANE_DEFINE_FILL(S, T)                                                               \
    PLANE_DEFINE_SUMS(S, T)                                                               \
    PLANE_TARGET void PLANE_NAME(S)(const convt_plane_shape *shape, const T *x,           \
                                    const T *w, const T *bias, T *y, T *buffer,           \
                                    int fresh)                                            \
    {                                                                                     \
        const int three = shape->kernel_height == 3 && shape->kernel_width == 3;          \
        ptrdiff_t m;                                                                      \
        PLANE_NAME(fill_##S)(shape, x, buffer, fresh);                                    \
        for (m = 0; m < shape->outputs; ++m)                                              \
            (three ? PLANE_NAME(sums_##S##_3x3) : PLANE_NAME(sums_##S))(                  \
                shape, buffer, w + m * shape->w_channel, bias ? bias + m : NULL,          \
                y + m * shape->y_channel);                                                \
    }

PLANE_DEFINE(f32, float)
PLANE_DEFINE(f64, double)
