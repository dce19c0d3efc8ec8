/* The Winograd F(2x2, 3x3), F(2x2x2, 3x3x3) and F(2x2, 2x2) transforms of winograd.h,
 * included by each file that compiles them for a CPU family, with WINOGRAD_NAME(part)
 * naming its functions and WINOGRAD_TARGET its target attribute (empty for the
 * portable build): plain C written so that compilers vectorise every inner loop for
 * that target (no floating-point reductions, no branches inside them). */
#include <stdint.h>
#include <string.h>

#include "winograd.h"

#ifndef CONVT_WINOGRAD_NON_FINITE
#define CONVT_WINOGRAD_NON_FINITE 0x7f800000u  /* a float's exponent bits: Inf or NaN */
#endif

/* One input row of the block's patches: row `iy` of the plane, columns left ..
 * left + count - 1, zero outside the plane. */
static WINOGRAD_TARGET void WINOGRAD_NAME(patch_row)(const convt_winograd_plane *plane,
                                                     const float *x, ptrdiff_t iy,
                                                     ptrdiff_t left, ptrdiff_t count, float *row)
{
    ptrdiff_t q, start, stop;
    memset(row, 0, (size_t)count * sizeof *row);
    if (iy < 0 || iy >= plane->height)
        return;
    start = left < 0 ? -left : 0;                       /* first q inside the plane */
    stop = plane->width - left < count ? plane->width - left : count;
    x += iy * plane->row_stride + left * plane->col_stride;
    if (plane->col_stride == 1) {
        if (stop > start)
            memcpy(row + start, x + start, (size_t)(stop - start) * sizeof *row);
    } else {
        for (q = start; q < stop; ++q)
            row[q] = x[q * plane->col_stride];
    }
}

/* B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] across four rows of `count` values:
 * out row k = sum over j of B^T[k][j] in row j (rows `in_step` and `out_step` apart). */
static WINOGRAD_TARGET void WINOGRAD_NAME(combine_rows)(const float *in, ptrdiff_t in_step,
                                                        float *out, ptrdiff_t out_step,
                                                        ptrdiff_t count)
{
    const float *d0 = in, *d1 = d0 + in_step, *d2 = d1 + in_step, *d3 = d2 + in_step;
    float *u0 = out, *u1 = u0 + out_step, *u2 = u1 + out_step, *u3 = u2 + out_step;
    ptrdiff_t q;
    for (q = 0; q < count; ++q) {
        u0[q] = d0[q] - d2[q];
        u1[q] = d1[q] + d2[q];
        u2[q] = d2[q] - d1[q];
        u3[q] = d1[q] - d3[q];
    }
}

/* B^T applied to each tile's four columns 2 t .. 2 t + 3 of row u, into rows v, v +
 * stride, v + 2 stride, v + 3 stride at t < tiles. */
static WINOGRAD_TARGET void WINOGRAD_NAME(combine_columns)(const float *u, float *v,
                                                           ptrdiff_t stride, ptrdiff_t tiles)
{
    float *v0 = v, *v1 = v0 + stride, *v2 = v1 + stride, *v3 = v2 + stride;
    ptrdiff_t t;
    for (t = 0; t < tiles; ++t) {
        const float d0 = u[2 * t], d1 = u[2 * t + 1], d2 = u[2 * t + 2], d3 = u[2 * t + 3];
        v0[t] = d0 - d2;
        v1[t] = d1 + d2;
        v2[t] = d2 - d1;
        v3[t] = d1 - d3;
    }
}

/* V = B^T d B of every tile's 4x4 patch (3-D: 4x4x4, B^T along the planes, the rows,
 * then the columns); V[4 j + k] (3-D: V[16 i + 4 j + k]). */
static WINOGRAD_TARGET void WINOGRAD_NAME(patches)(const convt_winograd_block *block,
                                                   const convt_winograd_plane *plane,
                                                   const float *x, ptrdiff_t x_channel,
                                                   ptrdiff_t channels, float *v)
{
    enum { MAX_COLUMNS = 2 * CONVT_WINOGRAD_MAX_TILES + 2, PLANE = 4 * MAX_COLUMNS };
    const ptrdiff_t planes = block->dims == 3 ? 4 : 1, points = 16 * planes;
    const ptrdiff_t tiles = block->tiles, count = 2 * tiles + 2;
    const ptrdiff_t used = block->rows * tiles, capacity = block->capacity;
    const ptrdiff_t xi_stride = channels * capacity;
    float d[4][4][MAX_COLUMNS], e[4][4][MAX_COLUMNS];
    ptrdiff_t c, r, i, j, t;
    for (c = 0; c < channels; ++c) {
        const float *xc = x + c * x_channel;
        float *vc = v + c * capacity;
        for (r = 0; r < block->rows; ++r) {
            const ptrdiff_t top = block->top + 2 * r;
            float (*rows)[4][MAX_COLUMNS] = d, (*combined)[4][MAX_COLUMNS] = e;
            for (i = 0; i < planes; ++i) {
                const ptrdiff_t z = block->front + i;
                const int outside = planes > 1 && (z < 0 || z >= plane->depth);
                for (j = 0; j < 4; ++j) {
                    if (outside)
                        memset(d[i][j], 0, (size_t)count * sizeof(float));
                    else
                        WINOGRAD_NAME(patch_row)(plane,
                                                 planes > 1 ? xc + z * plane->plane_stride : xc,
                                                 top + j, block->left, count, d[i][j]);
                }
            }
            if (planes > 1) {  /* along the planes, into e; the rows then go back to d */
                for (j = 0; j < 4; ++j)
                    WINOGRAD_NAME(combine_rows)(d[0][j], PLANE, e[0][j], PLANE, count);
                rows = e;
                combined = d;
            }
            for (i = 0; i < planes; ++i)
                WINOGRAD_NAME(combine_rows)(rows[i][0], MAX_COLUMNS, combined[i][0],
                                            MAX_COLUMNS, count);
            for (i = 0; i < planes; ++i)
                for (j = 0; j < 4; ++j)
                    WINOGRAD_NAME(combine_columns)(
                        combined[i][j], vc + (16 * i + 4 * j) * xi_stride + r * tiles,
                        xi_stride, tiles);
        }
        for (i = 0; i < points; ++i)  /* the panels' padding columns */
            for (t = used; t < capacity; ++t)
                vc[i * xi_stride + t] = 0.0f;
    }
}

/* F(2x2, 2x2), B^T = [1 -1 0; 0 1 0; 0 -1 1] across the rows a, b, c of `count`
 * values: u = a - b and w = c - b (the middle row is b itself). */
static WINOGRAD_TARGET void WINOGRAD_NAME(rows2)(const float *a, const float *b,
                                                 const float *c, ptrdiff_t count, float *u,
                                                 float *w)
{
    ptrdiff_t q;
    for (q = 0; q < count; ++q) {
        u[q] = a[q] - b[q];
        w[q] = c[q] - b[q];
    }
}

/* F(2x2, 2x2): B^T across each tile's three columns 2 t .. 2 t + 2 of row u, into
 * rows v, v + stride, v + 2 stride at t < tiles. */
static WINOGRAD_TARGET void WINOGRAD_NAME(columns2)(const float *u, float *v, ptrdiff_t stride,
                                                    ptrdiff_t tiles)
{
    float *v0 = v, *v1 = v0 + stride, *v2 = v1 + stride;
    ptrdiff_t t;
    for (t = 0; t < tiles; ++t) {
        const float d0 = u[2 * t], d1 = u[2 * t + 1], d2 = u[2 * t + 2];
        v0[t] = d0 - d1;
        v1[t] = d1;
        v2[t] = d2 - d1;
    }
}

/* F(2x2, 2x2): V of one tile from its 3x3 patch e (rows, then columns, as above). */
static WINOGRAD_TARGET void WINOGRAD_NAME(tile2)(const float e[3][3], float *v,
                                                 ptrdiff_t stride)
{
    float u[3], w[3];
    WINOGRAD_NAME(rows2)(e[0], e[1], e[2], 3, u, w);
    WINOGRAD_NAME(columns2)(u, v, stride, 1);
    WINOGRAD_NAME(columns2)(e[1], v + 3 * stride, stride, 1);
    WINOGRAD_NAME(columns2)(w, v + 6 * stride, stride, 1);
}

/* F(2x2, 2x2): V of every tile's 3x3 patch; V[3 j + k].  Tiles whose patch lies
 * inside the plane's columns read x's rows in place; the others (at most one at
 * each end) read a zero-padded copy of their patch, as do all of a plane whose
 * columns are not contiguous. */
static WINOGRAD_TARGET void WINOGRAD_NAME(patches2)(const convt_winograd_block *block,
                                                    const convt_winograd_plane *plane,
                                                    const float *x, ptrdiff_t x_channel,
                                                    ptrdiff_t channels, float *v)
{
    enum { MAX_COLUMNS = 2 * CONVT_WINOGRAD_MAX_TILES + 1 };
    const ptrdiff_t tiles = block->tiles, count = 2 * tiles + 1, left = block->left;
    const ptrdiff_t used = block->rows * tiles, capacity = block->capacity;
    const ptrdiff_t xi_stride = channels * capacity;
    const int contiguous = plane->col_stride == 1;
    /* tiles [first, last) read columns left + 2 t .. left + 2 t + 2, all inside */
    ptrdiff_t first = left < 0 ? (1 - left) / 2 : 0;
    ptrdiff_t last = plane->width - 1 - left >= 0 ? (plane->width - 1 - left) / 2 : 0;
    float zeros[MAX_COLUMNS], d[3][MAX_COLUMNS], u[MAX_COLUMNS], w[MAX_COLUMNS], e[3][3];
    ptrdiff_t c, r, j, t;
    if (!contiguous) {  /* copies: every tile reads them */
        first = 0;
        last = tiles;
    }
    if (last > tiles) last = tiles;
    if (first > last) first = last;
    memset(zeros, 0, sizeof zeros);
    for (c = 0; c < channels; ++c) {
        const float *xc = x + c * x_channel;
        float *vc = v + c * capacity;
        for (r = 0; r < block->rows; ++r) {
            const float *rows[3];  /* each from column left (+ 2 first) on */
            const ptrdiff_t offset = contiguous ? left + 2 * first : 0;
            float *vr = vc + r * tiles;
            for (j = 0; j < 3; ++j) {
                const ptrdiff_t iy = block->top + 2 * r + j;
                if (iy < 0 || iy >= plane->height) {
                    rows[j] = zeros;
                } else if (contiguous) {
                    rows[j] = xc + iy * plane->row_stride + offset;
                } else {
                    WINOGRAD_NAME(patch_row)(plane, xc, iy, left, count, d[j]);
                    rows[j] = d[j];
                }
            }
            if (last > first) {
                const ptrdiff_t columns = 2 * (last - first) + 1;
                WINOGRAD_NAME(rows2)(rows[0], rows[1], rows[2], columns, u, w);
                WINOGRAD_NAME(columns2)(u, vr + first, xi_stride, last - first);
                WINOGRAD_NAME(columns2)(rows[1], vr + first + 3 * xi_stride, xi_stride,
                                        last - first);
                WINOGRAD_NAME(columns2)(w, vr + first + 6 * xi_stride, xi_stride,
                                        last - first);
            }
            for (t = 0; t < tiles; ++t) {  /* the edge tiles: their patches zero-padded */
                if (t == first) t = last;
                if (t >= tiles) break;
                for (j = 0; j < 3; ++j) {
                    const ptrdiff_t iy = block->top + 2 * r + j;
                    ptrdiff_t k;
                    for (k = 0; k < 3; ++k) {
                        const ptrdiff_t ix = left + 2 * t + k;
                        e[j][k] = iy >= 0 && iy < plane->height && ix >= 0 && ix < plane->width
                            ? xc[iy * plane->row_stride + ix] : 0.0f;
                    }
                }
                WINOGRAD_NAME(tile2)((const float (*)[3])e, vr + t, xi_stride);
            }
        }
        for (j = 0; j < 9; ++j)  /* the panels' padding columns */
            for (t = used; t < capacity; ++t)
                vc[j * xi_stride + t] = 0.0f;
    }
}

WINOGRAD_TARGET int WINOGRAD_NAME(input_f32)(const convt_winograd_block *block,
                                             const convt_winograd_plane *plane,
                                             const float *x, ptrdiff_t x_channel,
                                             ptrdiff_t channels, float *v)
{
    if (block->taps == 2)
        WINOGRAD_NAME(patches2)(block, plane, x, x_channel, channels, v);
    else
        WINOGRAD_NAME(patches)(block, plane, x, x_channel, channels, v);
    return 0;  /* see winograd.h: the output transform notices non-finite inputs */
}

static WINOGRAD_TARGET uint32_t WINOGRAD_NAME(larger)(uint32_t a, uint32_t b)
{
    return a > b ? a : b;
}

/* The largest exponent field among o[0 .. count - 1] (CONVT_WINOGRAD_NON_FINITE: one is Inf or NaN). */
static WINOGRAD_TARGET uint32_t WINOGRAD_NAME(exponents)(const float *o, ptrdiff_t count)
{
    uint32_t largest = 0, bits;
    ptrdiff_t t;
    for (t = 0; t < count; ++t) {
        memcpy(&bits, o + t, sizeof bits);
        bits &= CONVT_WINOGRAD_NON_FINITE;
        largest = bits > largest ? bits : largest;
    }
    return largest;
}

/* One row of tiles' outputs o[a][t] (a = 2 row + column) from M[xi][t] (xi stride
 * `stride`), plus `add`; A^T M A summed in double, rounded once: these sums cancel,
 * and rounding them in float32 would add as much error as the products' sums. */
static WINOGRAD_TARGET void WINOGRAD_NAME(combine)(const float *s, ptrdiff_t stride,
                                                    ptrdiff_t tiles, double add,
                                                    float o[4][CONVT_WINOGRAD_MAX_TILES])
{
    ptrdiff_t t;
    for (t = 0; t < tiles; ++t) {  /* A^T = [1 1 1 0; 0 1 -1 -1] */
#define M_(k) ((double)s[(k) * stride + t])
        const double p0 = M_(0) + M_(1) + M_(2), q0 = M_(1) - M_(2) - M_(3);
        const double p1 = M_(4) + M_(5) + M_(6), q1 = M_(5) - M_(6) - M_(7);
        const double p2 = M_(8) + M_(9) + M_(10), q2 = M_(9) - M_(10) - M_(11);
        const double p3 = M_(12) + M_(13) + M_(14), q3 = M_(13) - M_(14) - M_(15);
#undef M_
        o[0][t] = (float)(p0 + p1 + p2 + add);
        o[1][t] = (float)(q0 + q1 + q2 + add);
        o[2][t] = (float)(p1 - p2 - p3 + add);
        o[3][t] = (float)(q1 - q2 - q3 + add);
    }
}

/* F(2x2, 2x2): combine's outputs from the 9 products, A^T = [1 1 0; 0 1 1]. */
static WINOGRAD_TARGET void WINOGRAD_NAME(combine2)(const float *s, ptrdiff_t stride,
                                                     ptrdiff_t tiles, double add,
                                                     float o[4][CONVT_WINOGRAD_MAX_TILES])
{
    ptrdiff_t t;
    for (t = 0; t < tiles; ++t) {
#define M_(k) ((double)s[(k) * stride + t])
        const double p0 = M_(0) + M_(1), q0 = M_(1) + M_(2);
        const double p1 = M_(3) + M_(4), q1 = M_(4) + M_(5);
        const double p2 = M_(6) + M_(7), q2 = M_(7) + M_(8);
#undef M_
        o[0][t] = (float)(p0 + p1 + add);
        o[1][t] = (float)(q0 + q1 + add);
        o[2][t] = (float)(p1 + p2 + add);
        o[3][t] = (float)(q1 + q2 + add);
    }
}

/* F(2x2x2, 3x3x3): the 8 outputs o[4 plane + 2 row + column][t] of a row of tiles,
 * A^T applied along the columns, the rows, then the planes, each a pass over the
 * row's tiles (so that it vectorises), in double, rounded once. */
static WINOGRAD_TARGET void WINOGRAD_NAME(combine3d)(const float *s, ptrdiff_t stride,
                                                     ptrdiff_t tiles, double add,
                                                     float o[8][CONVT_WINOGRAD_MAX_TILES])
{
    double p[4][4][2][CONVT_WINOGRAD_MAX_TILES], q[4][2][2][CONVT_WINOGRAD_MAX_TILES];
    ptrdiff_t t;
    int i, j, k;
    for (i = 0; i < 4; ++i)
        for (j = 0; j < 4; ++j) {  /* along the columns */
            const float *m0 = s + (16 * i + 4 * j) * stride, *m1 = m0 + stride;
            const float *m2 = m1 + stride, *m3 = m2 + stride;
            for (t = 0; t < tiles; ++t) {
                p[i][j][0][t] = (double)m0[t] + (double)m1[t] + (double)m2[t];
                p[i][j][1][t] = (double)m1[t] - (double)m2[t] - (double)m3[t];
            }
        }
    for (i = 0; i < 4; ++i)
        for (k = 0; k < 2; ++k)    /* along the rows */
            for (t = 0; t < tiles; ++t) {
                q[i][0][k][t] = p[i][0][k][t] + p[i][1][k][t] + p[i][2][k][t];
                q[i][1][k][t] = p[i][1][k][t] - p[i][2][k][t] - p[i][3][k][t];
            }
    for (j = 0; j < 2; ++j)
        for (k = 0; k < 2; ++k)    /* along the planes */
            for (t = 0; t < tiles; ++t) {
                o[2 * j + k][t] = (float)(q[0][j][k][t] + q[1][j][k][t] + q[2][j][k][t] + add);
                o[4 + 2 * j + k][t] =
                    (float)(q[1][j][k][t] - q[2][j][k][t] - q[3][j][k][t] + add);
            }
}

/* Rows oy and oy + 1 (those inside the plane) of one output plane from a row of
 * tiles' outputs o[2 row + column]; returns the largest exponent field written. */
static WINOGRAD_TARGET uint32_t WINOGRAD_NAME(write_rows)(const convt_winograd_plane *plane,
                                                          float *y, ptrdiff_t oy,
                                                          ptrdiff_t out_left, ptrdiff_t tiles,
                                                          float (*o)[CONVT_WINOGRAD_MAX_TILES])
{
    const ptrdiff_t step = plane->col_stride;
    const ptrdiff_t inside = (plane->width - out_left) / 2;  /* tiles with both columns in */
    const ptrdiff_t whole = inside < tiles ? inside : tiles;
    uint32_t largest = 0;
    ptrdiff_t a, t;
    for (a = 0; a < 2 && oy + a < plane->height; ++a) {
        float *row = y + (oy + a) * plane->row_stride + out_left * step;
        const float *even = o[2 * a], *odd = o[2 * a + 1];
        if (step == 1) {
            for (t = 0; t < whole; ++t) {
                row[2 * t] = even[t];
                row[2 * t + 1] = odd[t];
            }
        } else {
            for (t = 0; t < whole; ++t) {
                row[2 * t * step] = even[t];
                row[(2 * t + 1) * step] = odd[t];
            }
        }
        largest = WINOGRAD_NAME(larger)(largest, WINOGRAD_NAME(exponents)(even, whole));
        largest = WINOGRAD_NAME(larger)(largest, WINOGRAD_NAME(exponents)(odd, whole));
        if (whole < tiles && out_left + 2 * whole < plane->width) {  /* a last column */
            row[2 * whole * step] = even[whole];
            largest = WINOGRAD_NAME(larger)(largest, WINOGRAD_NAME(exponents)(even + whole, 1));
        }
    }
    return largest;
}

WINOGRAD_TARGET int WINOGRAD_NAME(output_f32)(const convt_winograd_block *block,
                                              ptrdiff_t out_top, ptrdiff_t out_left,
                                              const convt_winograd_plane *plane,
                                              const float *m, ptrdiff_t channels,
                                              const float *bias, float *y,
                                              ptrdiff_t y_channel)
{
    const ptrdiff_t tiles = block->tiles, capacity = block->capacity;
    const ptrdiff_t xi_stride = channels * capacity;
    float o[8][CONVT_WINOGRAD_MAX_TILES];
    uint32_t largest = 0;
    ptrdiff_t c, r, z;
    for (c = 0; c < channels; ++c) {
        const double add = bias ? bias[c] : 0.0;
        float *yc = y + c * y_channel;
        for (r = 0; r < block->rows; ++r) {
            const float *s = m + c * capacity + r * tiles;
            const ptrdiff_t oy = out_top + 2 * r;
            if (block->dims == 3) {
                WINOGRAD_NAME(combine3d)(s, xi_stride, tiles, add, o);
                for (z = 0; z < 2 && block->out_front + z < plane->depth; ++z)
                    largest = WINOGRAD_NAME(larger)(largest, WINOGRAD_NAME(write_rows)(
                        plane, yc + (block->out_front + z) * plane->plane_stride, oy,
                        out_left, tiles, o + 4 * z));
            } else {
                if (block->taps == 2)
                    WINOGRAD_NAME(combine2)(s, xi_stride, tiles, add, o);
                else
                    WINOGRAD_NAME(combine)(s, xi_stride, tiles, add, o);
                largest = WINOGRAD_NAME(larger)(largest, WINOGRAD_NAME(write_rows)(
                    plane, yc, oy, out_left, tiles, o));
            }
        }
    }
    return largest == CONVT_WINOGRAD_NON_FINITE;
}
