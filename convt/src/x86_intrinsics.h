/* The x86 intrinsics of the AVX2 and AVX-512 sets, for every compiler, and the
 * direct-engine row both sets instantiate (CONVT_X86_ROW, below; it uses
 * sets.h's convt_row_interior and CONVT_ROW_EDGE).
 *
 * GCC, Clang and MSVC declare every intrinsic in <immintrin.h>.  clang-cl
 * before clang 19 does not: in MSVC mode its <immintrin.h> leaves out the
 * headers of instruction sets not enabled for the whole file (llvm-project
 * issue 53520), so functions with target attributes found no AVX2 or AVX-512
 * intrinsic.  Those headers are included here by name (they have include
 * guards, so newer clang-cl includes them once). */
#ifndef CONVT_X86_INTRINSICS_H
#define CONVT_X86_INTRINSICS_H

#include <immintrin.h>

#if defined(_MSC_VER) && defined(__clang__)
#include <smmintrin.h>
#include <avxintrin.h>
#include <avx2intrin.h>
#include <fmaintrin.h>
#include <f16cintrin.h>
#include <avx512fintrin.h>
#include <avx512vlintrin.h>
#endif

/* Direct-engine rows on one vector width (AVX2: 8 floats / 4 doubles; AVX-512:
 * 16 / 8): the interior in blocks of 4 vectors, the last block's vectors
 * masked where the interior ends (lanes past it are neither read nor
 * written); each block sums every (source, tap) with one broadcast and four
 * FMAs, in the same order as the scalar sums; the edges are fused scalar sums
 * of the taps inside.  QUALIFIERS: the target attribute (and
 * static).  MASK(n) makes the mask of lanes [0, n); MASKLOAD(p, mask) and
 * MASKSTORE(p, mask, v) use it; BROADCAST(p) splats *p. */
#define CONVT_X86_ROW(QUALIFIERS, NAME, T, V, W, MASK_T, MASK, SETZERO, LOAD, STORE,       \
                      MASKLOAD, MASKSTORE, BROADCAST, FMA, SCALAR_FMA)                    \
    QUALIFIERS void NAME(ptrdiff_t sources, const T *const *x, const T *w, ptrdiff_t taps, \
                         const ptrdiff_t *offsets, ptrdiff_t in_size, ptrdiff_t count,    \
                         T *out, int accumulate)                                          \
    {                                                                                     \
        ptrdiff_t t, lo, hi, s, j;                                                        \
        convt_row_interior(taps, offsets, in_size, count, &lo, &hi);                      \
        for (t = 0; t < lo; ++t) CONVT_ROW_EDGE(T, t, SCALAR_FMA)                         \
        for (t = lo; t + 4 * W <= hi; t += 4 * W) {                                       \
            V a0 = accumulate ? LOAD(out + t) : SETZERO();                                \
            V a1 = accumulate ? LOAD(out + t + W) : SETZERO();                            \
            V a2 = accumulate ? LOAD(out + t + 2 * W) : SETZERO();                        \
            V a3 = accumulate ? LOAD(out + t + 3 * W) : SETZERO();                        \
            for (s = 0; s < sources; ++s)                                                 \
                for (j = 0; j < taps; ++j) {                                              \
                    const T *row = x[s] + t + offsets[j];                                 \
                    V weight = BROADCAST(w + s * taps + j);                               \
                    a0 = FMA(weight, LOAD(row), a0);                                      \
                    a1 = FMA(weight, LOAD(row + W), a1);                                  \
                    a2 = FMA(weight, LOAD(row + 2 * W), a2);                              \
                    a3 = FMA(weight, LOAD(row + 3 * W), a3);                              \
                }                                                                         \
            STORE(out + t, a0);                                                           \
            STORE(out + t + W, a1);                                                       \
            STORE(out + t + 2 * W, a2);                                                   \
            STORE(out + t + 3 * W, a3);                                                   \
        }                                                                                 \
        if (t < hi) {                                                                     \
            /* the last < 4 W interior outputs: up to 4 vectors, the last partial, */     \
            /* summed side by side (one after the other, each a chain of all the */       \
            /* taps, they cost 2-4x the chains' latency on short rows) */                 \
            ptrdiff_t rest = hi - t;                                                      \
            MASK_T m0 = MASK(rest < W ? rest : W);                                        \
            MASK_T m1 = MASK(rest < W ? 0 : rest < 2 * W ? rest - W : W);                 \
            MASK_T m2 = MASK(rest < 2 * W ? 0 : rest < 3 * W ? rest - 2 * W : W);         \
            MASK_T m3 = MASK(rest < 3 * W ? 0 : rest - 3 * W);                            \
            V a0 = accumulate ? MASKLOAD(out + t, m0) : SETZERO();                        \
            V a1 = accumulate ? MASKLOAD(out + t + W, m1) : SETZERO();                    \
            V a2 = accumulate ? MASKLOAD(out + t + 2 * W, m2) : SETZERO();                \
            V a3 = accumulate ? MASKLOAD(out + t + 3 * W, m3) : SETZERO();                \
            for (s = 0; s < sources; ++s)                                                 \
                for (j = 0; j < taps; ++j) {                                              \
                    const T *row = x[s] + t + offsets[j];                                 \
                    V weight = BROADCAST(w + s * taps + j);                               \
                    a0 = FMA(weight, MASKLOAD(row, m0), a0);                              \
                    a1 = FMA(weight, MASKLOAD(row + W, m1), a1);                          \
                    a2 = FMA(weight, MASKLOAD(row + 2 * W, m2), a2);                      \
                    a3 = FMA(weight, MASKLOAD(row + 3 * W, m3), a3);                      \
                }                                                                         \
            /* whole vectors stored whole: a later load waits for a masked store */       \
            if (rest >= W) STORE(out + t, a0); else MASKSTORE(out + t, m0, a0);           \
            if (rest >= 2 * W) STORE(out + t + W, a1); else MASKSTORE(out + t + W, m1, a1); \
            if (rest >= 3 * W) STORE(out + t + 2 * W, a2);                                \
            else MASKSTORE(out + t + 2 * W, m2, a2);                                      \
            MASKSTORE(out + t + 3 * W, m3, a3);                                           \
            t = hi;                                                                       \
        }                                                                                 \
        for (; t < count; ++t) CONVT_ROW_EDGE(T, t, SCALAR_FMA)                           \
    }

/* Stencils (kernel_set.h) on one vector width: 2 vectors of outputs of every
 * row of the band at a time, 2 x ROWS accumulators in registers; each tap is
 * one broadcast and 2 x ROWS loads and FMAs (rows read their own input rows,
 * so there is no branch on which rows a load feeds: the loads are cheaper than
 * the branches were).  Vectors whose taps all lie inside the input load without
 * masks; the others mask the lanes outside the input to zeros, so edges cost
 * no scalar code.  ROWS is a constant in each expansion of the body.
 * BETWEEN(lo, hi) makes the mask of lanes [lo, hi) for any lo, hi. */
/* The bodies' accumulators of `rows` output rows: from zero or from out (masked
 * past the row's end), and back to out. */
#define CONVT_X86_STENCIL_START(ROWS, T, W, SETZERO, LOAD, MASKLOAD)                                               \
    for (r = 0; r < (ROWS); ++r) {                                                        \
        T *o = out + r * stride + t;                                                      \
        if (!accumulate) {                                                                \
            lo[r] = SETZERO();                                                            \
            hi[r] = SETZERO();                                                            \
        } else if (rest >= 2 * (W)) {                                                     \
            lo[r] = LOAD(o);                                                              \
            hi[r] = LOAD(o + (W));                                                        \
        } else {                                                                          \
            lo[r] = MASKLOAD(o, m0);                                                      \
            hi[r] = MASKLOAD(o + (W), m1);                                                \
        }                                                                                 \
    }
#define CONVT_X86_STENCIL_FINISH(ROWS, T, W, STORE, MASKSTORE)                                               \
    for (r = 0; r < (ROWS); ++r) {                                                        \
        T *o = out + r * stride + t;                                                      \
        if (rest >= 2 * (W)) {                                                            \
            STORE(o, lo[r]);                                                              \
            STORE(o + (W), hi[r]);                                                        \
        } else {                                                                          \
            MASKSTORE(o, m0, lo[r]);                                                      \
            MASKSTORE(o + (W), m1, hi[r]);                                                \
        }                                                                                 \
    }
#define CONVT_X86_STENCIL_TAPS(ROWS, T, V, W, BROADCAST, FMA, LOADV, LOAD, MASKLOAD, BETWEEN) \
    for (i = 0; i < kernel_rows; ++i)                                                     \
        for (j = 0; j < taps; ++j) {                                                      \
            const ptrdiff_t u = t + shape->offsets[j];                                    \
            const V weight = BROADCAST(w + i * taps + j);                                 \
            for (r = 0; r < (ROWS); ++r) {                                                \
                const T *in = x[r + i] + u;                                               \
                lo[r] = FMA(weight, LOADV(in, 0, LOAD, MASKLOAD, BETWEEN), lo[r]);        \
                hi[r] = FMA(weight, LOADV(in + (W), W, LOAD, MASKLOAD, BETWEEN), hi[r]);  \
            }                                                                             \
        }
#define CONVT_X86_STENCIL_BODY(ROWS, T, V, W, MASK_T, BETWEEN, SETZERO, LOAD, STORE,      \
                               MASKLOAD, MASKSTORE, BROADCAST, FMA)                       \
    {                                                                                     \
        const ptrdiff_t taps = shape->taps, in_size = shape->in_size;                     \
        const ptrdiff_t kernel_rows = shape->kernel_rows, stride = shape->out_stride;     \
        ptrdiff_t t, i, j, r, first = 0, end = 0;                                         \
        for (j = 0; j < taps; ++j) {                                                      \
            if (shape->offsets[j] < first) first = shape->offsets[j];                     \
            if (shape->offsets[j] > end) end = shape->offsets[j];                         \
        }                                                                                 \
        for (t = 0; t < shape->count; t += 2 * (W)) {                                     \
            const ptrdiff_t rest = shape->count - t;                                      \
            const MASK_T m0 = BETWEEN(0, rest), m1 = BETWEEN(0, rest - (W));              \
            V lo[ROWS], hi[ROWS];                                                         \
            CONVT_X86_STENCIL_START(ROWS, T, W, SETZERO, LOAD, MASKLOAD)                  \
            if (t + first >= 0 && t + end + 2 * (W) <= in_size) {                         \
                CONVT_X86_STENCIL_TAPS(ROWS, T, V, W, BROADCAST, FMA, CONVT_X86_LOAD_WHOLE, \
                                       LOAD, MASKLOAD, BETWEEN)                           \
            } else if (taps <= CONVT_X86_STENCIL_MASKED_TAPS) {                           \
                MASK_T low_masks[CONVT_X86_STENCIL_MASKED_TAPS];                          \
                MASK_T high_masks[CONVT_X86_STENCIL_MASKED_TAPS];                         \
                for (j = 0; j < taps; ++j) {                                              \
                    const ptrdiff_t u = t + shape->offsets[j];                            \
                    low_masks[j] = BETWEEN(-u, in_size - u);                              \
                    high_masks[j] = BETWEEN(-u - (W), in_size - u - (W));                 \
                }                                                                         \
                CONVT_X86_STENCIL_TAPS(ROWS, T, V, W, BROADCAST, FMA, CONVT_X86_LOAD_MASKED, \
                                       LOAD, MASKLOAD, BETWEEN)                           \
            } else {                                                                      \
                CONVT_X86_STENCIL_TAPS(ROWS, T, V, W, BROADCAST, FMA, CONVT_X86_LOAD_INSIDE, \
                                       LOAD, MASKLOAD, BETWEEN)                           \
            }                                                                             \
            CONVT_X86_STENCIL_FINISH(ROWS, T, W, STORE, MASKSTORE)                        \
        }                                                                                 \
    }
/* The stencil's loads: a whole vector, or its lanes inside the input (input
 * index u + shift + lane in [0, in_size)). */
#define CONVT_X86_LOAD_WHOLE(p, shift, LOAD, MASKLOAD, BETWEEN) LOAD(p)
#define CONVT_X86_LOAD_INSIDE(p, shift, LOAD, MASKLOAD, BETWEEN)                         \
    MASKLOAD(p, BETWEEN(-u - (shift), in_size - u - (shift)))
/* The same masks made once per tap and output vector, not once per load (every
 * kernel row and output row of the band loads at the same lanes): on rows of 14
 * to 28 outputs every vector is at an end, and making each mask took more than
 * the loads and FMAs it served. */
#define CONVT_X86_STENCIL_MASKED_TAPS 16
#define CONVT_X86_LOAD_MASKED(p, shift, LOAD, MASKLOAD, BETWEEN)                         \
    MASKLOAD(p, (shift) ? high_masks[j] : low_masks[j])
/* Full bands (4 rows) of common kernel heights KR get their own body: input
 * row q's 2 vectors at a tap are loaded once and feed the FMAs of every row
 * r with 0 <= q - r < KR.  With KR and the row count constants and the loop
 * over q unrolled, which rows a load feeds is known at compile time: no
 * branches, 1 load per up to 4 FMA pairs instead of one per pair (on Zen 4,
 * where a 512-bit load that straddles cache lines costs two, 3x3 rows ran at
 * 0.9x of the FMA peak instead of 0.5x).  Each output still sums its kernel
 * rows, then taps, in order.  Only sets passing BANDS = 1 use them (AVX-512):
 * with AVX2's 256-bit loads, which straddle lines half as often, a depthwise
 * 3x3 Conv on 112x112 ran 7% slower with bands on Zen 3 (1.36 against 1.27 ms,
 * 1 thread). */
#if defined(__GNUC__) || defined(__clang__)
#define CONVT_UNROLL _Pragma("GCC unroll 16")
#else
#define CONVT_UNROLL
#endif
#define CONVT_X86_BAND_TAPS(KR, T, V, W, BROADCAST, FMA, LOADV, LOAD, MASKLOAD, BETWEEN)   \
    CONVT_UNROLL                                                                          \
    for (q = 0; q < 4 + (KR) - 1; ++q) {                                                  \
        const T *row = x[q];                                                              \
        for (j = 0; j < taps; ++j) {                                                      \
            const ptrdiff_t u = t + shape->offsets[j];                                    \
            const V v0 = LOADV(row + u, 0, LOAD, MASKLOAD, BETWEEN);                      \
            const V v1 = LOADV(row + u + (W), W, LOAD, MASKLOAD, BETWEEN);                \
            CONVT_UNROLL                                                                  \
            for (r = 0; r < 4; ++r)                                                       \
                if (q - r >= 0 && q - r < (KR)) {                                         \
                    const V weight = BROADCAST(w + (q - r) * taps + j);                   \
                    lo[r] = FMA(weight, v0, lo[r]);                                       \
                    hi[r] = FMA(weight, v1, hi[r]);                                       \
                }                                                                         \
        }                                                                                 \
    }
#define CONVT_X86_BAND_BODY(KR, T, V, W, MASK_T, BETWEEN, SETZERO, LOAD, STORE, MASKLOAD,  \
                            MASKSTORE, BROADCAST, FMA)                                    \
    {                                                                                     \
        const ptrdiff_t taps = shape->taps, in_size = shape->in_size;                     \
        const ptrdiff_t stride = shape->out_stride;                                       \
        ptrdiff_t t, q, j, r, first = 0, end = 0;                                         \
        for (j = 0; j < taps; ++j) {                                                      \
            if (shape->offsets[j] < first) first = shape->offsets[j];                     \
            if (shape->offsets[j] > end) end = shape->offsets[j];                         \
        }                                                                                 \
        for (t = 0; t < shape->count; t += 2 * (W)) {                                     \
            const ptrdiff_t rest = shape->count - t;                                      \
            const MASK_T m0 = BETWEEN(0, rest), m1 = BETWEEN(0, rest - (W));              \
            V lo[4], hi[4];                                                               \
            CONVT_X86_STENCIL_START(4, T, W, SETZERO, LOAD, MASKLOAD)                     \
            if (t + first >= 0 && t + end + 2 * (W) <= in_size) {                         \
                CONVT_X86_BAND_TAPS(KR, T, V, W, BROADCAST, FMA, CONVT_X86_LOAD_WHOLE,    \
                                    LOAD, MASKLOAD, BETWEEN)                              \
            } else {                                                                      \
                CONVT_X86_BAND_TAPS(KR, T, V, W, BROADCAST, FMA, CONVT_X86_LOAD_INSIDE,   \
                                    LOAD, MASKLOAD, BETWEEN)                              \
            }                                                                             \
            CONVT_X86_STENCIL_FINISH(4, T, W, STORE, MASKSTORE)                           \
        }                                                                                 \
    }
#define CONVT_X86_STENCIL(QUALIFIERS, NAME, BANDS, T, V, W, MASK_T, BETWEEN, SETZERO, LOAD, \
                          STORE, MASKLOAD, MASKSTORE, BROADCAST, FMA)                     \
    QUALIFIERS void NAME(const convt_stencil_shape *shape, const T *const *x, const T *w,  \
                         T *out, int accumulate)                                          \
    {                                                                                     \
        if ((BANDS) && shape->rows == 4) switch (shape->kernel_rows) {                    \
            case 1:                                                                       \
                CONVT_X86_BAND_BODY(1, T, V, W, MASK_T, BETWEEN, SETZERO, LOAD, STORE,    \
                                    MASKLOAD, MASKSTORE, BROADCAST, FMA)                  \
                return;                                                                   \
            case 2:                                                                       \
                CONVT_X86_BAND_BODY(2, T, V, W, MASK_T, BETWEEN, SETZERO, LOAD, STORE,    \
                                    MASKLOAD, MASKSTORE, BROADCAST, FMA)                  \
                return;                                                                   \
            case 3:                                                                       \
                CONVT_X86_BAND_BODY(3, T, V, W, MASK_T, BETWEEN, SETZERO, LOAD, STORE,    \
                                    MASKLOAD, MASKSTORE, BROADCAST, FMA)                  \
                return;                                                                   \
            case 5:                                                                       \
                CONVT_X86_BAND_BODY(5, T, V, W, MASK_T, BETWEEN, SETZERO, LOAD, STORE,    \
                                    MASKLOAD, MASKSTORE, BROADCAST, FMA)                  \
                return;                                                                   \
            case 7:                                                                       \
                CONVT_X86_BAND_BODY(7, T, V, W, MASK_T, BETWEEN, SETZERO, LOAD, STORE,    \
                                    MASKLOAD, MASKSTORE, BROADCAST, FMA)                  \
                return;                                                                   \
            default:                                                                      \
                break;                                                                    \
            }                                                                             \
        switch (shape->rows) {                                                            \
        case 4:                                                                           \
            CONVT_X86_STENCIL_BODY(4, T, V, W, MASK_T, BETWEEN, SETZERO, LOAD, STORE,     \
                                   MASKLOAD, MASKSTORE, BROADCAST, FMA)                   \
            break;                                                                        \
        case 3:                                                                           \
            CONVT_X86_STENCIL_BODY(3, T, V, W, MASK_T, BETWEEN, SETZERO, LOAD, STORE,     \
                                   MASKLOAD, MASKSTORE, BROADCAST, FMA)                   \
            break;                                                                        \
        case 2:                                                                           \
            CONVT_X86_STENCIL_BODY(2, T, V, W, MASK_T, BETWEEN, SETZERO, LOAD, STORE,     \
                                   MASKLOAD, MASKSTORE, BROADCAST, FMA)                   \
            break;                                                                        \
        default:                                                                          \
            CONVT_X86_STENCIL_BODY(1, T, V, W, MASK_T, BETWEEN, SETZERO, LOAD, STORE,     \
                                   MASKLOAD, MASKSTORE, BROADCAST, FMA)                   \
            break;                                                                        \
        }                                                                                 \
    }

/* Channels-last direct-engine passes on one vector width: the channels in
 * blocks of 2 vectors (their weights kept in registers across the run of
 * outputs), then one vector, then the last channels of each output in 256-
 * and 128-bit vectors and scalars.  No masked accesses: outputs closer than a
 * vector apart would make each masked load wait for the previous output's
 * masked store (measured 4-10x slower on Zen 4).  Every output is one FMA on
 * its own value, so the order of the outputs does not matter to the result.
 * TAIL(n, x, w, out) adds the last n < W channels of one output. */
#define CONVT_X86_CHANNELS(QUALIFIERS, NAME, T, V, W, LOAD, STORE, FMA, TAIL)              \
    QUALIFIERS void NAME(ptrdiff_t count, ptrdiff_t channels, const T *x, ptrdiff_t x_step, \
                         const T *w, T *out, ptrdiff_t out_step)                          \
    {                                                                                     \
        ptrdiff_t t, c = 0;                                                               \
        for (; c + 2 * W <= channels; c += 2 * W) {                                       \
            V w0 = LOAD(w + c), w1 = LOAD(w + c + W);                                     \
            for (t = 0; t < count; ++t) {                                                 \
                const T *in = x + t * x_step + c;                                         \
                T *o = out + t * out_step + c;                                            \
                STORE(o, FMA(w0, LOAD(in), LOAD(o)));                                     \
                STORE(o + W, FMA(w1, LOAD(in + W), LOAD(o + W)));                         \
            }                                                                             \
        }                                                                                 \
        for (; c + W <= channels; c += W) {                                               \
            V w0 = LOAD(w + c);                                                           \
            for (t = 0; t < count; ++t) {                                                 \
                T *o = out + t * out_step + c;                                            \
                STORE(o, FMA(w0, LOAD(x + t * x_step + c), LOAD(o)));                     \
            }                                                                             \
        }                                                                                 \
        if (c < channels)                                                                 \
            for (t = 0; t < count; ++t)                                                   \
                TAIL(channels - c, x + t * x_step + c, w + c, out + t * out_step + c);    \
    }

/* The last n channels of one output (n < 16 floats or 8 doubles): a 256-bit
 * vector, a 128-bit vector, then scalars, each only if that many are left.
 * YW and XW: lanes of the 256- and 128-bit vectors. */
#define CONVT_X86_CHANNEL_TAIL(QUALIFIERS, NAME, T, YW, YLOAD, YSTORE, YFMA, XW, XLOAD,     \
                               XSTORE, XFMA, SCALAR_FMA)                                  \
    QUALIFIERS static inline void NAME(ptrdiff_t n, const T *x, const T *w, T *o)          \
    {                                                                                     \
        if (n >= (YW)) {                                                                  \
            YSTORE(o, YFMA(YLOAD(w), YLOAD(x), YLOAD(o)));                                \
            x += (YW), w += (YW), o += (YW), n -= (YW);                                   \
        }                                                                                 \
        if (n >= (XW)) {                                                                  \
            XSTORE(o, XFMA(XLOAD(w), XLOAD(x), XLOAD(o)));                                \
            x += (XW), w += (XW), o += (XW), n -= (XW);                                   \
        }                                                                                 \
        for (; n > 0; --n, ++x, ++w, ++o) *o = SCALAR_FMA(*w, *x, *o);                    \
    }
#define CONVT_X86_CHANNEL_TAILS(QUALIFIERS)                                               \
    CONVT_X86_CHANNEL_TAIL(QUALIFIERS, convt_channel_tail_f32, float, 8, _mm256_loadu_ps, \
                           _mm256_storeu_ps, _mm256_fmadd_ps, 4, _mm_loadu_ps,            \
                           _mm_storeu_ps, _mm_fmadd_ps, fmaf)                             \
    CONVT_X86_CHANNEL_TAIL(QUALIFIERS, convt_channel_tail_f64, double, 4, _mm256_loadu_pd, \
                           _mm256_storeu_pd, _mm256_fmadd_pd, 2, _mm_loadu_pd,            \
                           _mm_storeu_pd, _mm_fmadd_pd, fma)

#endif /* CONVT_X86_INTRINSICS_H */
