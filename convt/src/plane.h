/* Depthwise planes: 2-D Conv where every group has one input channel (depthwise
 * and channel-multiplier layers), one whole input plane at a time.
 *
 * The plane is copied once into a zero-padded buffer in L1/L2, split by column
 * phase (column c of the padded plane goes to phase c mod stride_x, position
 * c / stride_x), so that every tap of a block of consecutive outputs reads
 * consecutive buffer elements, whatever the strides, dilations and pads:
 * output (oy, t), tap (i, j) reads padded row oy stride_y + i dilation_y,
 * phase (j dilation_x) mod stride_x, position t + (j dilation_x) / stride_x.
 * Blocks of outputs (rows x vectors) are summed side by side, each output from
 * zero over kernel rows, then taps, in order (the stencil family's arithmetic,
 * see kernel_set.h: padding is zeros, multiplied like any input), then the
 * bias is added (one rounding).  Each output channel of the group reuses the
 * buffer.
 */
#ifndef CONVT_PLANE_H
#define CONVT_PLANE_H

#include <stddef.h>

/* The padded buffer's slack: every block of outputs a build sums side by side
 * stays inside it.  A row holds its outputs rounded up to whole blocks of 16
 * elements, then the kernel's reach, then 16 more: a block of two 256-bit
 * vectors (at most 16 elements) starts below the outputs' end, and so does one
 * of two 512-bit vectors (32 elements), at a multiple of 32, which the rounding
 * and the 16 more reach too.  (A wider slack made rows longer: 3x3 on 56x56
 * planes ran 5% slower, their buffer no longer in L1.) */
#define CONVT_PLANE_BLOCK 16
/* Taps along a kernel row, at most. */
#define CONVT_PLANE_MAX_TAPS 32

typedef struct convt_plane_shape {
    ptrdiff_t in_height, in_width;          /* the input plane */
    ptrdiff_t out_height, out_width;        /* the output plane */
    ptrdiff_t kernel_height, kernel_width;  /* kernel_width <= CONVT_PLANE_MAX_TAPS */
    ptrdiff_t stride_y, stride_x, dilation_y, dilation_x;
    ptrdiff_t pad_top, pad_left;
    ptrdiff_t x_row, x_col;                 /* element strides of x's plane */
    ptrdiff_t y_row, y_col;                 /* element strides of y's plane */
    ptrdiff_t outputs;                      /* output channels of the group */
    ptrdiff_t w_channel;                    /* elements from one output's kernel to the
                                               next */
    ptrdiff_t y_channel;                    /* elements from one output plane to the next */
    /* set by convt_plane_prepare: */
    ptrdiff_t rows;                         /* buffer rows: every row an output reads */
    ptrdiff_t width;                        /* elements per row and phase, with the slack */
    ptrdiff_t taps[CONVT_PLANE_MAX_TAPS];   /* tap j: its phase's row offset + shift */
} convt_plane_shape;

/* Completes `shape` from the fields above `rows`; returns the buffer's elements
 * (rows x stride_x phases x width). */
static inline ptrdiff_t convt_plane_prepare(convt_plane_shape *s)
{
    const ptrdiff_t blocks = (s->out_width + CONVT_PLANE_BLOCK - 1) / CONVT_PLANE_BLOCK;
    const ptrdiff_t reach = (s->kernel_width - 1) * s->dilation_x / s->stride_x;
    const ptrdiff_t used = blocks * CONVT_PLANE_BLOCK + reach + CONVT_PLANE_BLOCK;
    ptrdiff_t j;
    s->rows = (s->out_height - 1) * s->stride_y + (s->kernel_height - 1) * s->dilation_y
              + 1;
    /* whole cache lines of floats (buffers are 64-byte aligned): fewer loads
     * straddle two lines; and room for a copy's last vector (the fill) */
    s->width = (used + CONVT_PLANE_BLOCK - 1) / CONVT_PLANE_BLOCK * CONVT_PLANE_BLOCK;
    for (j = 0; j < s->kernel_width && j < CONVT_PLANE_MAX_TAPS; ++j) {
        const ptrdiff_t shift = j * s->dilation_x;
        s->taps[j] = shift % s->stride_x * s->rows * s->width + shift / s->stride_x;
    }
    return s->rows * s->stride_x * s->width;
}

/* Channels side by side (the _channels entries): a block of channels of one
 * image, with zero padding, as [padded row][padded column][channel], of
 * convt_plane_channels_rows x convt_plane_channels_cols positions (every
 * position an output reads, and none other: input rows and columns past them
 * are not copied).  For strided planes of many channels whose output rows are
 * at most a vector long (onto 7x7: the plane sums' vectors run along a row, most
 * of their lanes idle; convt._dispatch.plane_channel_block). */
static inline ptrdiff_t convt_plane_channels_rows(const convt_plane_shape *s)
{
    return (s->out_height - 1) * s->stride_y + (s->kernel_height - 1) * s->dilation_y + 1;
}
static inline ptrdiff_t convt_plane_channels_cols(const convt_plane_shape *s)
{
    return (s->out_width - 1) * s->stride_x + (s->kernel_width - 1) * s->dilation_x + 1;
}

/* Declares a build of the planes, PREFIX##_f32 and PREFIX##_f64 (plane_body.h):
 * y[m] = Conv(x, w[m]) + bias[m] for the group's m < outputs (bias may be NULL),
 * w[m] the kernel_height x kernel_width weights at w + m w_channel (row-major,
 * contiguous), y[m] at y + m y_channel; `shape` completed by convt_plane_prepare,
 * whose result is the elements `buffer` holds.  `fresh`: the buffer holds
 * nothing yet (its padding is zeroed; no call writes there after, so later
 * calls on the same shape and buffer pass 0). */
#define CONVT_DECLARE_PLANE(PREFIX)                                                      \
    void PREFIX##_f32(const convt_plane_shape *shape, const float *x, const float *w,    \
                      const float *bias, float *y, float *buffer, int fresh);            \
    void PREFIX##_f64(const convt_plane_shape *shape, const double *x, const double *w,  \
                      const double *bias, double *y, double *buffer, int fresh);            \
    void PREFIX##_channels_f32(const convt_plane_shape *shape, ptrdiff_t block,           \
                               const float *buffer, const float *w, const float *bias,    \
                               float *out);                                               \
    void PREFIX##_channels_f64(const convt_plane_shape *shape, ptrdiff_t block,           \
                               const double *buffer, const double *w, const double *bias, \
                               double *out);

/* The baseline build (plane.c): the portable and NEON sets' planes. */
CONVT_DECLARE_PLANE(convt_plane)

#endif /* CONVT_PLANE_H */
