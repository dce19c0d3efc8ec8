/* Winograd F(2x2, 3x3), F(2x2x2, 3x3x3) and F(2x2, 2x2) transforms for float32 Conv
 * (stride 1).
 * In 3-D the same matrices apply along each of the three axes: 4x4x4 patches,
 * 64 transformed values per tile of 2x2x2 outputs (216 products before).
 *
 * A tile is 2 x 2 outputs; it reads a 4 x 4 input patch d (zero outside x).
 * Its 16 transformed inputs are V = B^T d B, its products M[xi] =
 * sum over channels of U[xi] V[xi] (U = G g G^T, the transformed 3 x 3
 * weights g), its outputs A^T M A, with
 *     B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],
 *     A^T = [1 1 1 0; 0 1 -1 -1],
 *     G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
 * The transforms only add and subtract (B, A) or halve exactly (G): their
 * rounding adds a few units per value, and the products sum C channels
 * instead of 9 C taps, so float32 errors stay below direct engines' that sum
 * the whole reduction in one run (see convt/_dispatch.py).
 *
 * F(2x2, 2x2) (`taps` 2, 2-D only) serves the stride phases of a ConvTranspose
 * whose kernel is twice its stride (k4 s2): each phase is a 2x2 correlation.  A
 * tile's 3x3 patch gives 9 transformed inputs and products (16 before), with
 *     B^T = [1 -1 0; 0 1 0; 0 -1 1],  A^T = [1 1 0; 0 1 1],  G = [1 0; 1 1; 0 1],
 * so that y0 = (d0 - d1) g0 + d1 (g0 + g1) = d0 g0 + d1 g1 reads exactly the
 * inputs of its direct sum, as in F(2x2, 3x3).
 *
 * A block is R tile rows x `tiles` tile columns of one image; tile t = r *
 * tiles + column.  Buffers hold `capacity` tiles per (xi, channel) row, the
 * columns from R * tiles on zero.
 */
#ifndef CONVT_WINOGRAD_H
#define CONVT_WINOGRAD_H

#include <stddef.h>

/* Tiles per block row, at most (bounds the stack rows of the transforms). */
#define CONVT_WINOGRAD_MAX_TILES 128

typedef struct convt_winograd_block {
    ptrdiff_t dims;          /* 2: F(2x2, taps); 3: F(2x2x2, 3x3x3), one plane of tiles */
    ptrdiff_t taps;          /* kernel taps per axis: 3, or 2 (2-D only) */
    ptrdiff_t front;         /* 3-D: first input plane of the tiles' patches (may be < 0) */
    ptrdiff_t out_front;     /* 3-D: first output plane of the tiles */
    ptrdiff_t rows;          /* R: tile rows */
    ptrdiff_t tiles;         /* tile columns per row, <= CONVT_WINOGRAD_MAX_TILES */
    ptrdiff_t top, left;     /* input coordinates of the first tile's patch (may be < 0) */
    ptrdiff_t capacity;      /* tiles per buffer row (>= rows * tiles) */
} convt_winograd_block;

typedef struct convt_winograd_plane {
    ptrdiff_t depth, height, width;  /* of x (input) or y (output); depth 1 in 2-D */
    ptrdiff_t plane_stride, row_stride, col_stride;  /* elements */
} convt_winograd_plane;

/* Declares a build of the transforms, PREFIX##_input_f32 and PREFIX##_output_f32
 * (winograd_body.h defines them):
 *
 * input: V[xi][c][t] for channels c < channels of x (channel stride x_channel).
 *   Returns 0: an input that is not finite makes every output it feeds not finite
 *   (Inf and NaN never cancel), which the output transform reports, and each output
 *   reads exactly the inputs its direct sum reads.
 * output: y = A^T M A (+ bias[m], bias may be NULL) for m < channels, from
 *   M[xi][m][t] (`capacity` tiles per row); the block's first tile has its top-left
 *   output at (out_top, out_left) of the output plane (3-D: of planes out_front and
 *   the next; channel stride y_channel); outputs beyond the plane are not written.
 *   Returns nonzero if any output is not finite. */
#define CONVT_DECLARE_WINOGRAD(PREFIX)                                                    \
    int PREFIX##_input_f32(const convt_winograd_block *block,                             \
                           const convt_winograd_plane *plane, const float *x,             \
                           ptrdiff_t x_channel, ptrdiff_t channels, float *v);            \
    int PREFIX##_output_f32(const convt_winograd_block *block, ptrdiff_t out_top,         \
                            ptrdiff_t out_left, const convt_winograd_plane *plane,        \
                            const float *m, ptrdiff_t channels, const float *bias,        \
                            float *y, ptrdiff_t y_channel);

/* The baseline build (winograd.c): the portable and NEON sets' transforms. */
CONVT_DECLARE_WINOGRAD(convt_winograd)

#endif /* CONVT_WINOGRAD_H */
