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
 * 16 / 8): the interior in blocks of 4 vectors, then single vectors, then one
 * masked vector for the interior's last partial vector (lanes past it are
 * neither read nor written); each block sums every (source, tap) with one
 * broadcast and four FMAs, in the same order as the scalar sums; the edges are
 * fused scalar sums of the taps inside.  QUALIFIERS: the target attribute (and
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
        for (; t + W <= hi; t += W) {                                                     \
            V a0 = accumulate ? LOAD(out + t) : SETZERO();                                \
            for (s = 0; s < sources; ++s)                                                 \
                for (j = 0; j < taps; ++j)                                                \
                    a0 = FMA(BROADCAST(w + s * taps + j), LOAD(x[s] + t + offsets[j]), a0); \
            STORE(out + t, a0);                                                           \
        }                                                                                 \
        if (t < hi) {                                                                     \
            MASK_T mask = MASK(hi - t);                                                   \
            V a0 = accumulate ? MASKLOAD(out + t, mask) : SETZERO();                      \
            for (s = 0; s < sources; ++s)                                                 \
                for (j = 0; j < taps; ++j)                                                \
                    a0 = FMA(BROADCAST(w + s * taps + j),                                 \
                             MASKLOAD(x[s] + t + offsets[j], mask), a0);                  \
            MASKSTORE(out + t, mask, a0);                                                 \
            t = hi;                                                                       \
        }                                                                                 \
        for (; t < count; ++t) CONVT_ROW_EDGE(T, t, SCALAR_FMA)                           \
    }

#endif /* CONVT_X86_INTRINSICS_H */
