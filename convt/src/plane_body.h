/* The depthwise planes of plane.h, included by each file that compiles them for a
 * CPU family, with PLANE_NAME(part) naming its functions, PLANE_TARGET its target
 * attribute (empty for the baseline build), and per element type S (f32, f64)
 * its vectors: PLANE_V_S, PLANE_LANES_S lanes, PLANE_ZERO_S(), PLANE_SPLAT_S(v),
 * PLANE_LOAD_S(p) and PLANE_STORE_S(p, v) (unaligned), PLANE_ADD_S(a, b) and
 * PLANE_MADD_S(w, x, acc) (w x + acc, fused where the family's multiply-adds are);
 * optionally PLANE_OPAQUE_S(v), which hides a vector's (or an element's) origin
 * from the compiler (so that a copy loop stays inline rather than becoming a
 * library call). */
#include <string.h>

#include "plane.h"

/* Asks for a loop to be unrolled completely (PLANE_SUMS_SHARED's conditions
 * then vanish at compile time). */
#if defined(__clang__)
#define PLANE_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define PLANE_UNROLL _Pragma("GCC unroll 16")
#else
#define PLANE_UNROLL
#endif

#ifndef PLANE_OPAQUE_f32
#define PLANE_OPAQUE_f32(v) ((void)0)
#endif
#ifndef PLANE_OPAQUE_f64
#define PLANE_OPAQUE_f64(v) ((void)0)
#endif

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
        if (sx == 1 && s->x_col == 1) {                                                   \
            /* one phase: each row's input run, from pointers that step by rows */        \
            const ptrdiff_t before = s->pad_left;                                         \
            ptrdiff_t first = before > 0 ? before : 0;                                    \
            ptrdiff_t last = s->in_width + before > 0 ? s->in_width + before : 0;         \
            ptrdiff_t n, whole, at;                                                       \
            T *row;                                                                       \
            if (last > width) last = width;                                               \
            if (first > last) first = last;                                               \
            n = last - first;                                                             \
            whole = (n + L - 1) / L * L;                                                  \
            if (first + whole > width) whole = 0;                                         \
            at = (top - s->pad_top) * s->x_row + (first - before);                        \
            row = buffer + top * width + first;                                           \
            for (r = top; r < end; ++r, at += s->x_row, row += width) {                   \
                const T *in = x + at;                                                     \
                if (whole && at + whole <= limit) {                                       \
                    /* whole vectors, reading into the next input row */                  \
                    for (q = 0; q < whole; q += L) {                                      \
                        PLANE_V_##S v = PLANE_LOAD_##S(in + q);                           \
                        PLANE_OPAQUE_##S(v);                                              \
                        PLANE_STORE_##S(row + q, v);                                      \
                    }                                                                     \
                    for (q = n; q < whole; ++q) {                                         \
                        T zero = (T)0;                                                    \
                        PLANE_OPAQUE_##S(zero);                                           \
                        row[q] = zero;                                                    \
                    }                                                                     \
                } else if (n > 4 * L) {                                                   \
                    memcpy(row, in, (size_t)n * sizeof(T));                               \
                } else {  /* a short row: a call would cost more than the copy */         \
                    for (q = 0; q < n; ++q) {                                             \
                        T value = in[q];                                                  \
                        PLANE_OPAQUE_##S(value);                                          \
                        row[q] = value;                                                   \
                    }                                                                     \
                }                                                                         \
            }                                                                             \
            return;                                                                       \
        }                                                                                 \
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
            const ptrdiff_t step = sx * s->x_col;                                         \
            ptrdiff_t first = before > 0 ? (before + sx - 1) / sx : 0;                    \
            ptrdiff_t last = after > 0 ? (after + sx - 1) / sx : 0;                       \
            if (last > width) last = width;                                               \
            if (first > last) first = last;                                               \
            for (r = top; r < end; ++r) {                                                 \
                T *row = buffer + (p * rows + r) * width + first;                         \
                const T *in = x + (r - s->pad_top) * s->x_row                             \
                              + (first * sx - before) * s->x_col;                         \
                for (q = 0; q < last - first; ++q) row[q] = in[q * step];                 \
            }                                                                             \
        }                                                                                 \
    }

/* Output rows oy .. oy + count - 1 (count <= ROWS), one block of VECS vectors of
 * outputs from t: ROWS x VECS independent sums (a sum's multiply-adds wait on
 * each other: a row alone would run at the FMA latency; rows past count repeat
 * the last one and are not stored), each from zero over kernel rows, then taps.
 * Every multiply-add loads its input vector. */
#define PLANE_SUMS_BY_ROW(S, T, ROWS, VECS, KH, KW)                                       \
    {                                                                                     \
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
    }

/* The same sums for a plane with row stride SY and unit row dilation, KH and KW
 * constants: output row r, kernel row i reads buffer row oy SY + r SY + i, so
 * each buffer row's vectors are loaded once and serve every output row that
 * reads them (PLANE_SUMS_BY_ROW loads each vector for each row, and its loads,
 * many across two cache lines, bound its speed).  Each sum still runs over
 * kernel rows, then taps, in order: the same arithmetic.  PARTIAL: count may be
 * below ROWS, and no buffer row past the last one the count rows need is read
 * (the other rows' sums are not stored); a compile-time 0 saves the check. */
#define PLANE_SUMS_SHARED(S, T, ROWS, VECS, KH, KW, SY, PARTIAL)                          \
    {                                                                                     \
        const ptrdiff_t rows_read = (count - 1) * (SY) + (KH);                           \
        ptrdiff_t q;                                                                      \
        for (r = 0; r < (ROWS); ++r)                                                      \
            for (v = 0; v < (VECS); ++v) acc[r][v] = PLANE_ZERO_##S();                    \
        PLANE_UNROLL                                                                      \
        for (q = 0; q < ((ROWS) - 1) * (SY) + (KH); ++q) {                                \
            const T *row = buffer + (oy * (SY) + q) * width + t;                          \
            if ((PARTIAL) && q >= rows_read)                                              \
                break;                                                                    \
            PLANE_UNROLL                                                                  \
            for (j = 0; j < (KW); ++j) {                                                  \
                PLANE_V_##S in[VECS];                                                     \
                for (v = 0; v < (VECS); ++v)                                              \
                    in[v] = PLANE_LOAD_##S(row + s->taps[j] + v * L);                     \
                PLANE_UNROLL                                                              \
                for (r = 0; r < (ROWS); ++r) {                                            \
                    if (q - r * (SY) >= 0 && q - r * (SY) < (KH)) {                       \
                        const PLANE_V_##S weight =                                        \
                            PLANE_SPLAT_##S(w[(q - r * (SY)) * (KW) + j]);                \
                        for (v = 0; v < (VECS); ++v)                                      \
                            acc[r][v] = PLANE_MADD_##S(weight, in[v], acc[r][v]);         \
                    }                                                                     \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }

/* Stores the block's count rows, + bias (if any).  A block past the row's end
 * is stored whole when its extra lanes fall inside the plane (y's rows
 * contiguous): they land on the next row's first elements, fewer than a row and
 * than a block, which are written after it (rows are summed in order, and a
 * row's blocks from its last to its first); else through a copy. */
#define PLANE_STORE_BLOCK(S, T, ROWS, VECS)                                               \
    for (r = 0; r < count; ++r) {                                                         \
        T *out = y + (oy + r) * s->y_row;                                                 \
        T sums[(VECS) * L];                                                               \
        if (bias) {                                                                       \
            const PLANE_V_##S add = PLANE_SPLAT_##S(*bias);                               \
            for (v = 0; v < (VECS); ++v) acc[r][v] = PLANE_ADD_##S(acc[r][v], add);       \
        }                                                                                 \
        if (t + (VECS) * L <= ow                                                          \
            || (packed && (oy + r) * ow + t + (VECS) * L <= oh * ow)) {                   \
            for (v = 0; v < (VECS); ++v) PLANE_STORE_##S(out + t + v * L, acc[r][v]);     \
        } else {                                                                          \
            for (v = 0; v < (VECS); ++v) PLANE_STORE_##S(sums + v * L, acc[r][v]);        \
            for (n = 0; n < ow - t; ++n) out[(t + n) * s->y_col] = sums[n];               \
        }                                                                                 \
    }

/* One output channel's plane from the filled buffer, KH x KW taps (constants, or
 * the shape's): rows one vector long in blocks of 8 rows, longer rows in blocks
 * of 4 rows x 2 vectors (8 sums either way).  SY > 0: the plane's row stride is
 * SY and its row dilation 1, and blocks of 4 whole rows, or of up to 8 rows one
 * vector long, share their loads.  (Sharing in the 4-row blocks of a plane's
 * last rows too, by a second copy of the block, made the 5x5 and 3x3 calls on
 * larger planes 3-8% slower on Zen 4: a larger function, for 1-2% on 14x14.) */
#define PLANE_DEFINE_SUMS_OF(S, T, SUFFIX, KH, KW, SY)                                    \
    static PLANE_TARGET void PLANE_NAME(sums_##SUFFIX)(const convt_plane_shape *s,        \
                                                       const T *buffer, const T *w,       \
                                                       const T *bias, T *y)               \
    {                                                                                     \
        enum { L = PLANE_LANES_##S, SHARE = (SY) > 0 ? (SY) : 1 };                        \
        const ptrdiff_t width = s->width, kh = s->kernel_height, kw = s->kernel_width;    \
        const ptrdiff_t ow = s->out_width, oh = s->out_height;                            \
        const ptrdiff_t row_step = s->stride_y * width;  /* one output row further */     \
        const int packed = s->y_col == 1 && s->y_row == ow;                               \
        ptrdiff_t oy, t, i, j, r, v, n, count;                                            \
        (void)kh;                                                                         \
        (void)kw;                                                                         \
        if (ow <= L) {                                                                    \
            for (oy = 0; oy < oh; oy += 8) {                                              \
                PLANE_V_##S acc[8][1];                                                    \
                count = oh - oy < 8 ? oh - oy : 8;                                        \
                t = 0;                                                                    \
                if ((SY) > 0)                                                             \
                    PLANE_SUMS_SHARED(S, T, 8, 1, KH, KW, SHARE, 1)                       \
                else                                                                      \
                    PLANE_SUMS_BY_ROW(S, T, 8, 1, KH, KW)                                 \
                PLANE_STORE_BLOCK(S, T, 8, 1)                                             \
            }                                                                             \
            return;                                                                       \
        }                                                                                 \
        for (oy = 0; oy < oh; oy += 4) {                                                  \
            count = oh - oy < 4 ? oh - oy : 4;                                            \
            for (t = (ow - 1) / (2 * L) * (2 * L); t >= 0; t -= 2 * L) {                  \
                PLANE_V_##S acc[4][2];                                                    \
                if ((SY) > 0 && count == 4)                                               \
                    PLANE_SUMS_SHARED(S, T, 4, 2, KH, KW, SHARE, 0)                       \
                else                                                                      \
                    PLANE_SUMS_BY_ROW(S, T, 4, 2, KH, KW)                                 \
                PLANE_STORE_BLOCK(S, T, 4, 2)                                             \
            }                                                                             \
        }                                                                                 \
    }
/* Constant kernel shapes get their taps unrolled: the tap loops' overheads took
 * about as long as a block's multiply-adds (a depthwise 3x3 Conv on 14x14
 * planes: 1.3x faster sums, 1 Zen 3 core); with row strides 1 and 2 (the
 * common depthwise layers) their blocks share loads. */
#define PLANE_DEFINE_SUMS(S, T)                                                           \
    PLANE_DEFINE_SUMS_OF(S, T, S##_3x3, 3, 3, 0)                                          \
    PLANE_DEFINE_SUMS_OF(S, T, S##_3x3_s1, 3, 3, 1)                                       \
    PLANE_DEFINE_SUMS_OF(S, T, S##_3x3_s2, 3, 3, 2)                                       \
    PLANE_DEFINE_SUMS_OF(S, T, S##_5x5, 5, 5, 0)                                          \
    PLANE_DEFINE_SUMS_OF(S, T, S##_5x5_s1, 5, 5, 1)                                       \
    PLANE_DEFINE_SUMS_OF(S, T, S##_5x5_s2, 5, 5, 2)                                       \
    PLANE_DEFINE_SUMS_OF(S, T, S##_7x7_s1, 7, 7, 1)                                       \
    PLANE_DEFINE_SUMS_OF(S, T, S, kh, kw, 0)

/* The sums for this shape: the most specific of PLANE_DEFINE_SUMS's. */
#define PLANE_DEFINE_SUMS_FOR(S, T)                                                       \
    typedef void (*PLANE_NAME(sums_##S##_fn))(const convt_plane_shape *, const T *,       \
                                              const T *, const T *, T *);                 \
    static PLANE_NAME(sums_##S##_fn) PLANE_NAME(sums_for_##S)(const convt_plane_shape *s) \
    {                                                                                     \
        const ptrdiff_t kh = s->kernel_height, kw = s->kernel_width;                      \
        const int shares = s->dilation_y == 1 && s->stride_y <= 2;                        \
        const int one = s->stride_y == 1;                                                 \
        if (kh == 3 && kw == 3)                                                           \
            return !shares ? PLANE_NAME(sums_##S##_3x3)                                   \
                   : one   ? PLANE_NAME(sums_##S##_3x3_s1)                                \
                           : PLANE_NAME(sums_##S##_3x3_s2);                               \
        if (kh == 5 && kw == 5)                                                           \
            return !shares ? PLANE_NAME(sums_##S##_5x5)                                   \
                   : one   ? PLANE_NAME(sums_##S##_5x5_s1)                                \
                           : PLANE_NAME(sums_##S##_5x5_s2);                               \
        if (kh == 7 && kw == 7 && shares && one)                                          \
            return PLANE_NAME(sums_##S##_7x7_s1);                                         \
        return PLANE_NAME(sums_##S);                                                      \
    }

/* Depthwise sums with channels side by side (plane.h, convt_plane_channels):
 * `buffer` holds the zero-padded input of `block` channels, [padded row][padded
 * column][channel]; `w` their kernels, [kernel row][tap][channel]; `bias` their
 * biases (NULL: none); `out` receives [output row][output column][channel].
 * Each output is summed from zero over kernel rows, then taps, padding
 * multiplied like any input, then the bias added: the arithmetic of the plane
 * sums above, so both layouts give the same bits.  Blocks of 4 consecutive
 * outputs x 2 vectors of channels; an output past the row's end repeats the
 * last one and is not stored.  `block` is a multiple of 2 vectors. */
#define PLANE_DEFINE_CHANNELS_OF(S, T, SUFFIX, KH, KW)                                    \
    static PLANE_TARGET void PLANE_NAME(channels_##SUFFIX)(                               \
        const convt_plane_shape *s, ptrdiff_t block, const T *buffer, const T *w,         \
        const T *bias, T *out)                                                            \
    {                                                                                     \
        enum { L = PLANE_LANES_##S, P = 4 };                                              \
        const ptrdiff_t kh = s->kernel_height, kw = s->kernel_width;                      \
        const ptrdiff_t oh = s->out_height, ow = s->out_width;                            \
        const ptrdiff_t cols = convt_plane_channels_cols(s);                              \
        const ptrdiff_t col_step = s->stride_x * block, tap_step = s->dilation_x * block; \
        ptrdiff_t c, oy, ox, i, j, p, count;                                              \
        (void)kh;                                                                         \
        (void)kw;                                                                         \
        for (c = 0; c < block; c += 2 * L) {                                              \
            for (oy = 0; oy < oh; ++oy) {                                                 \
                for (ox = 0; ox < ow; ox += P) {                                          \
                    PLANE_V_##S acc[P][2];                                                \
                    ptrdiff_t at[P];                                                      \
                    count = ow - ox < P ? ow - ox : P;                                    \
                    for (p = 0; p < P; ++p) {                                             \
                        at[p] = (p < count ? p : count - 1) * col_step;                   \
                        acc[p][0] = PLANE_ZERO_##S();                                     \
                        acc[p][1] = PLANE_ZERO_##S();                                     \
                    }                                                                     \
                    PLANE_UNROLL                                                          \
                    for (i = 0; i < (KH); ++i) {                                          \
                        const T *row = buffer                                             \
                                       + ((oy * s->stride_y + i * s->dilation_y) * cols   \
                                          + ox * s->stride_x) * block + c;                \
                        const T *weights = w + i * (KW) * block + c;                      \
                        PLANE_UNROLL                                                      \
                        for (j = 0; j < (KW); ++j) {                                      \
                            const PLANE_V_##S w0 = PLANE_LOAD_##S(weights + j * block);   \
                            const PLANE_V_##S w1 = PLANE_LOAD_##S(weights + j * block + L); \
                            const T *src = row + j * tap_step;                            \
                            PLANE_UNROLL                                                  \
                            for (p = 0; p < P; ++p) {                                     \
                                acc[p][0] = PLANE_MADD_##S(w0, PLANE_LOAD_##S(src + at[p]), \
                                                           acc[p][0]);                    \
                                acc[p][1] = PLANE_MADD_##S(                               \
                                    w1, PLANE_LOAD_##S(src + at[p] + L), acc[p][1]);      \
                            }                                                             \
                        }                                                                 \
                    }                                                                     \
                    for (p = 0; p < count; ++p) {                                         \
                        T *to = out + (oy * ow + ox + p) * block + c;                     \
                        if (bias) {                                                       \
                            acc[p][0] = PLANE_ADD_##S(acc[p][0], PLANE_LOAD_##S(bias + c)); \
                            acc[p][1] = PLANE_ADD_##S(acc[p][1],                          \
                                                      PLANE_LOAD_##S(bias + c + L));      \
                        }                                                                 \
                        PLANE_STORE_##S(to, acc[p][0]);                                   \
                        PLANE_STORE_##S(to + L, acc[p][1]);                               \
                    }                                                                     \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }

/* Square 3x3 and 5x5 kernels with their taps unrolled, any other shape from the
 * shape's sizes. */
#define PLANE_DEFINE_CHANNELS(S, T)                                                       \
    PLANE_DEFINE_CHANNELS_OF(S, T, S##_3x3, 3, 3)                                         \
    PLANE_DEFINE_CHANNELS_OF(S, T, S##_5x5, 5, 5)                                         \
    PLANE_DEFINE_CHANNELS_OF(S, T, S##_any, kh, kw)                                       \
    PLANE_TARGET void PLANE_NAME(channels_##S)(const convt_plane_shape *s, ptrdiff_t block, \
                                               const T *buffer, const T *w, const T *bias, \
                                               T *out)                                    \
    {                                                                                     \
        if (s->kernel_height == 3 && s->kernel_width == 3)                                \
            PLANE_NAME(channels_##S##_3x3)(s, block, buffer, w, bias, out);               \
        else if (s->kernel_height == 5 && s->kernel_width == 5)                           \
            PLANE_NAME(channels_##S##_5x5)(s, block, buffer, w, bias, out);               \
        else                                                                              \
            PLANE_NAME(channels_##S##_any)(s, block, buffer, w, bias, out);               \
    }

#define PLANE_DEFINE(S, T)                                                                \
    PLANE_DEFINE_CHANNELS(S, T)                                                           \
    PLANE_DEFINE_FILL(S, T)                                                               \
    PLANE_DEFINE_SUMS(S, T)                                                               \
    PLANE_DEFINE_SUMS_FOR(S, T)                                                           \
    PLANE_TARGET void PLANE_NAME(S)(const convt_plane_shape *shape, const T *x,           \
                                    const T *w, const T *bias, T *y, T *buffer,           \
                                    int fresh)                                            \
    {                                                                                     \
        const PLANE_NAME(sums_##S##_fn) sums = PLANE_NAME(sums_for_##S)(shape);           \
        ptrdiff_t m;                                                                      \
        PLANE_NAME(fill_##S)(shape, x, buffer, fresh);                                    \
        for (m = 0; m < shape->outputs; ++m)                                              \
            sums(shape, buffer, w + m * shape->w_channel, bias ? bias + m : NULL,         \
                 y + m * shape->y_channel);                                               \
    }

PLANE_DEFINE(f32, float)
PLANE_DEFINE(f64, double)
