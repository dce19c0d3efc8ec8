/* The ARM64 NEON kernel set (AArch64: Linux, macOS on Apple silicon, Windows
 * on ARM).  Advanced SIMD is part of every AArch64 CPU, and so are the
 * half <-> single conversions used here (FCVTL/FCVTN): the set needs no
 * optional feature (FEAT_FP16 adds half-precision *arithmetic*, which convt
 * never does: float16 accumulates in float32).
 *
 * GEMM: float32 12 rows x 2 vectors (8 floats), float64 10 rows x 2 vectors
 * (4 doubles).  AArch64 has 32 vector registers and an FMA by vector element
 * (FMLA v.4s, v.4s, v.s[lane]), so the weights of 4 rows (2 for doubles)
 * come in one load and are never broadcast.  Per step of depth, float32:
 * 24 accumulators + 2 B vectors + 3 A vectors = 29 registers, 5 vector loads
 * (and one offset) per 24 FMAs; float64: 20 + 2 + 5 = 27 registers, 7 loads
 * per 20 FMAs.  The pair kernels load 2 more B vectors (odd rows): 31 and 29
 * registers; at 12 rows the float64 pairs would need 34, and GCC spills
 * accumulators in the loop, hence 10.  The cores people have issue at most
 * 3 vector loads and 4 FMAs per cycle (Apple M1-M4 and Neoverse V1/V2: 4 x
 * 128-bit FMA pipes, latency 3-4; Neoverse N1/N2: 2 pipes), so the loops are
 * FMA-bound everywhere, and their 20-24 independent chains cover the 16
 * (4 pipes x 4 cycles) that keep the pipes busy.  Wider blocks do not fit:
 * 8 x 4 vectors needs 32 accumulators; 8 x 3 vectors gives NR = 12, whose
 * half panels (6) are not whole vectors and whose exact stacks would need
 * phases of a multiple of 6 positions.  12 rows also give 6 row pairs for
 * the pair kernels, like AVX-512's.  Block sums live in registers; the
 * block totals go through C (the families' arithmetic anyway), or through a
 * small stack tile for the pair kernels that store into y, which must round
 * once.
 *
 * Half kernels (1 vector) serve a tile's last panel of <= NR / 2 positions.
 * B rows are read in place: an unaligned load costs these cores one more
 * load slot at most, when it crosses a cache line (64 bytes on Neoverse, 128
 * on Apple), and the loops leave load slots free, so no gemm_pack.  There is no masked store, so store_even is the portable one.
 * Direct-engine rows sum 8 vectors (32 floats) at a time: 8 FMA chains, one
 * load each.  Every product is an FMA in the families' order, so the set is
 * CONVT_SET_FUSED and matches reference.c bit for bit (with the default
 * FPCR: round to nearest even, no flush to zero, NaNs propagated).
 */
#include "sets.h"

#ifdef CONVT_AARCH64
#include <arm_neon.h>
#include <math.h>
#include <string.h>

/* Rows per block (see above). */
#define MR_F32 12
#define MR_F64 10
#define MR 12 /* the most of either: sizes of the stack tiles */

/* Vector flavours: F32 (4 floats) and F64 (2 doubles) per 128-bit register. */
#define F32_T float
#define F32_V float32x4_t
#define F32_L 4
#define F32_ZERO() vdupq_n_f32(0.0f)
#define F32_DUP(x) vdupq_n_f32(x)
#define F32_LOAD(p) vld1q_f32(p)
#define F32_STORE(p, v) vst1q_f32((p), (v))
#define F32_ADD(x, y) vaddq_f32((x), (y))
#define F32_FMA_LANE(acc, b, a, lane) vfmaq_laneq_f32((acc), (b), (a), (lane))
#define F32_FMA_N(acc, b, w) vfmaq_n_f32((acc), (b), (w))
#define F32_ZIP1(x, y) vzip1q_f32((x), (y))
#define F32_ZIP2(x, y) vzip2q_f32((x), (y))
/* The weights of rows r .. r + n - 1 (n >= 1), lanes past them unused and
 * never read from memory (A ends with the block's last row). */
#define F32_LOAD_ROWS(p, n)                                                               \
    ((n) >= 4   ? vld1q_f32(p)                                                            \
     : (n) == 3 ? vcombine_f32(vld1_f32(p), vld1_dup_f32((p) + 2))                        \
     : (n) == 2 ? vcombine_f32(vld1_f32(p), vdup_n_f32(0.0f))                             \
                : vld1q_dup_f32(p))

#define F64_T double
#define F64_V float64x2_t
#define F64_L 2
#define F64_ZERO() vdupq_n_f64(0.0)
#define F64_DUP(x) vdupq_n_f64(x)
#define F64_LOAD(p) vld1q_f64(p)
#define F64_STORE(p, v) vst1q_f64((p), (v))
#define F64_ADD(x, y) vaddq_f64((x), (y))
#define F64_FMA_LANE(acc, b, a, lane) vfmaq_laneq_f64((acc), (b), (a), (lane))
#define F64_FMA_N(acc, b, w) vfmaq_n_f64((acc), (b), (w))
#define F64_ZIP1(x, y) vzip1q_f64((x), (y))
#define F64_ZIP2(x, y) vzip2q_f64((x), (y))
#define F64_LOAD_ROWS(p, n) ((n) >= 2 ? vld1q_f64(p) : vld1q_dup_f64(p))

/* M(i, F) for every row i < MR; each expansion tests i < ROWS, a constant. */
#define EACH_ROW(M, F)                                                                    \
    M(0, F) M(1, F) M(2, F) M(3, F) M(4, F) M(5, F)                                       \
    M(6, F) M(7, F) M(8, F) M(9, F) M(10, F) M(11, F)
/* ... and every group g of F##_L rows (6 for doubles, 3 for floats). */
#define EACH_GROUP(M, F) M(0, F) M(1, F) M(2, F) M(3, F) M(4, F) M(5, F)

/* The kernels' constants are enumerators of each function:
 * ROWS, VECTORS (B vectors per row: 2, or 1 for half panels) and PAIRED (odd
 * rows read B `b_shift` further and write C `c_shift` further). */

#define ZERO_ROW(i, F)                                                                    \
    if ((i) < ROWS) acc[i][0] = acc[i][1] = F##_ZERO();

#define LOAD_GROUP(g, F)                                                                  \
    if ((g) * F##_L < ROWS) weights[g] = F##_LOAD_ROWS(a + (g) * F##_L, ROWS - (g) * F##_L);

/* Row i's weight is lane i % L of weights[i / L], loaded with its first row
 * (loading every group first needs 34 registers in the float64 pairs). */
#define STEP_ROW(i, F)                                                                    \
    if ((i) < ROWS) {                                                                     \
        if ((i) % F##_L == 0) LOAD_GROUP((i) / F##_L, F)                                  \
        acc[i][0] = F##_FMA_LANE(acc[i][0], PAIRED && ((i) & 1) ? odd0 : even0,           \
                                 weights[(i) / F##_L], (i) % F##_L);                      \
        if (VECTORS > 1)                                                                  \
            acc[i][1] = F##_FMA_LANE(acc[i][1], PAIRED && ((i) & 1) ? odd1 : even1,       \
                                     weights[(i) / F##_L], (i) % F##_L);                  \
    }

/* C row i = the block sum (first block, not accumulating) or C + block sum. */
#define FINISH_ROW(i, F)                                                                  \
    if ((i) < ROWS) {                                                                     \
        F##_T *row = c + (i) * ldc + (PAIRED && ((i) & 1) ? c_shift : 0);                 \
        F##_STORE(row, first ? acc[i][0] : F##_ADD(F##_LOAD(row), acc[i][0]));            \
        if (VECTORS > 1)                                                                  \
            F##_STORE(row + F##_L,                                                        \
                      first ? acc[i][1] : F##_ADD(F##_LOAD(row + F##_L), acc[i][1]));     \
    }

/* Blocked sums of kernel_set.h into c (row stride ldc); `first` says c holds
 * nothing yet.  Expects a, b, offsets, depth, block and the enumerators. */
#define BLOCKED_SUMS(F)                                                                   \
    {                                                                                     \
        ptrdiff_t k = 0, end;                                                             \
        while (k < depth) {                                                               \
            F##_V acc[MR][2], weights[6];                                                 \
            EACH_ROW(ZERO_ROW, F)                                                         \
            end = k + block < depth ? k + block : depth;                                  \
            for (; k < end; ++k, a += ROWS) {                                             \
                const F##_T *row = b + offsets[k];                                        \
                F##_V even0 = F##_LOAD(row);                                              \
                F##_V even1 = VECTORS > 1 ? F##_LOAD(row + F##_L) : even0;                \
                F##_V odd0 = PAIRED ? F##_LOAD(row + b_shift) : even0;                    \
                F##_V odd1 = PAIRED && VECTORS > 1 ? F##_LOAD(row + b_shift + F##_L) : even1; \
                EACH_ROW(STEP_ROW, F)                                                     \
            }                                                                             \
            EACH_ROW(FINISH_ROW, F)                                                       \
            first = 0;                                                                    \
        }                                                                                 \
    }

/* gemm (VECTORS 2) and half (VECTORS 1). */
#define DEFINE_GEMM(NAME, F, R, NV)                                                       \
    static void NAME(ptrdiff_t depth, ptrdiff_t block, const F##_T *a, const F##_T *b,    \
                     const ptrdiff_t *offsets, F##_T *c, ptrdiff_t ldc, int accumulate,   \
                     F##_T *pack_to)                                                      \
    {                                                                                     \
        enum { ROWS = R, VECTORS = NV, PAIRED = 0 };                                      \
        const ptrdiff_t b_shift = 0, c_shift = 0;                                         \
        int first = !accumulate;                                                          \
        (void)pack_to;                                                                    \
        (void)b_shift;                                                                    \
        (void)c_shift;                                                                    \
        BLOCKED_SUMS(F)                                                                   \
    }

/* Pairs: blocked sums into c, odd rows reading B `b_shift` and writing C
 * `c_shift` further.  Not inlined: the storing pairs pass a tile on the
 * stack, which the compiler would otherwise keep in registers (clang does,
 * spilling accumulators in the inner loop). */
#define DEFINE_PAIR_SUMS(NAME, F, R, NV)                                                  \
    CONVT_NOINLINE static void NAME(ptrdiff_t depth, ptrdiff_t block, const F##_T *a,     \
                                    const F##_T *b, const ptrdiff_t *offsets,             \
                                    ptrdiff_t b_shift, F##_T *c, ptrdiff_t ldc,           \
                                    ptrdiff_t c_shift, int first)                         \
    {                                                                                     \
        enum { ROWS = R, VECTORS = NV, PAIRED = 1 };                                      \
        BLOCKED_SUMS(F)                                                                   \
    }

#define DEFINE_PAIR(NAME, F, R, NV)                                                       \
    DEFINE_PAIR_SUMS(NAME##_sums, F, R, NV)                                               \
    static void NAME(ptrdiff_t depth, ptrdiff_t block, const F##_T *a, const F##_T *b,    \
                     const ptrdiff_t *offsets, ptrdiff_t sibling, F##_T *c, ptrdiff_t ldc, \
                     int accumulate)                                                      \
    {                                                                                     \
        NAME##_sums(depth, block, a, b, offsets, sibling, c, ldc, sibling, !accumulate);  \
    }

/* Storing pairs: the blocked sums go to a tile on the stack; the sums of rows
 * 2j and 2j + 1 are the even and odd outputs of one channel: interleaved
 * (zip), then y = v + bias or y = y + v, rounded once to the storage type
 * (S##_LOAD widens F##_L values exactly, S##_STORE rounds them). */
#define STORE_PAIR(j, F, S)                                                               \
    if (2 * (j) < ROWS) {                                                                 \
        S##_ITEM *out = (S##_ITEM *)y + (j) * ldy;                                        \
        int v;                                                                            \
        for (v = 0; v < VECTORS; ++v) {                                                   \
            F##_V even = F##_LOAD(tile + 2 * (j) * ldt + v * F##_L);                      \
            F##_V odd = F##_LOAD(tile + (2 * (j) + 1) * ldt + v * F##_L);                 \
            F##_V low = F##_ZIP1(even, odd), high = F##_ZIP2(even, odd);                  \
            S##_ITEM *at = out + 2 * v * F##_L;                                           \
            if (accumulate) {                                                             \
                low = F##_ADD(S##_LOAD(at), low);                                         \
                high = F##_ADD(S##_LOAD(at + F##_L), high);                               \
            } else if (bias) {                                                            \
                low = F##_ADD(low, F##_DUP(bias[j]));                                     \
                high = F##_ADD(high, F##_DUP(bias[j]));                                   \
            }                                                                             \
            S##_STORE(at, low);                                                           \
            S##_STORE(at + F##_L, high);                                                  \
        }                                                                                 \
    }
#define STORE_PAIRS_F32(j, S) STORE_PAIR(j, F32, S)
#define STORE_PAIRS_F64(j, S) STORE_PAIR(j, F64, S)

/* SUMS: the pair kernel's blocked sums (NAME##_sums of DEFINE_PAIR). */
#define DEFINE_PAIR_STORE(NAME, F, S, SUMS, R, NV)                                        \
    static void NAME(ptrdiff_t depth, ptrdiff_t block, const F##_T *a, const F##_T *b,    \
                     const ptrdiff_t *offsets, ptrdiff_t sibling, void *y, ptrdiff_t ldy, \
                     int accumulate, const F##_T *bias)                                   \
    {                                                                                     \
        enum { ROWS = R, VECTORS = NV };                                                  \
        F##_T tile[MR * 2 * F##_L];                                                       \
        const ptrdiff_t ldt = NV * F##_L;                                                 \
        if (depth < 1) memset(tile, 0, sizeof tile); /* sums of nothing */                \
        SUMS(depth, block, a, b, offsets, sibling, tile, ldt, 0, 1);                      \
        EACH_GROUP(STORE_PAIRS_##F, S)                                                    \
    }

/* Storage types, as seen by the storing pairs: element type, widening load and
 * rounding store of one vector of the accumulation type. */
#define SF32_ITEM float
#define SF32_LOAD(p) vld1q_f32(p)
#define SF32_STORE(p, v) vst1q_f32((p), (v))
#define SF64_ITEM double
#define SF64_LOAD(p) vld1q_f64(p)
#define SF64_STORE(p, v) vst1q_f64((p), (v))
#define SF16_ITEM uint16_t
#define SF16_LOAD(p) half_to_float(p)
#define SF16_STORE(p, v) float_to_half((p), (v))
#define SBF16_ITEM uint16_t
#define SBF16_LOAD(p) bf16_to_float(p)
#define SBF16_STORE(p, v) float_to_bf16((p), (v))

/* FCVTL is exact; FCVTN rounds to nearest even (the default FPCR) with
 * subnormal results kept and overflow to inf, like convt_float_to_half; NaN
 * payloads may differ. */
static inline float32x4_t half_to_float(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

static inline void float_to_half(uint16_t *p, float32x4_t v)
{
    vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v)));
}

static inline float32x4_t bf16_to_float(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

/* Round to nearest even on the bits, NaN to a quiet NaN (convt_float_to_bf16);
 * BFCVTN (ARMv8.6) is not everywhere and may flush subnormals. */
static inline void float_to_bf16(uint16_t *p, float32x4_t v)
{
    uint32x4_t bits = vreinterpretq_u32_f32(v);
    uint32x4_t lowest_kept = vandq_u32(vshrq_n_u32(bits, 16), vdupq_n_u32(1));
    uint32x4_t rounded = vaddq_u32(bits, vaddq_u32(lowest_kept, vdupq_n_u32(0x7fff)));
    uint32x4_t quiet = vorrq_u32(bits, vdupq_n_u32(0x00400000));
    uint32x4_t number = vceqq_f32(v, v);
    vst1_u16(p, vshrn_n_u32(vbslq_u32(number, rounded, quiet), 16));
}

/* One function per row count up to MR (pairs: even counts), full and half
 * width.  Fixed arities: MSVC's traditional preprocessor would pass a
 * forwarded __VA_ARGS__ on as one argument. */
#define ROWS_10(M, NAME, F)                                                               \
    M(NAME##1, F, 1) M(NAME##2, F, 2) M(NAME##3, F, 3) M(NAME##4, F, 4) M(NAME##5, F, 5)   \
    M(NAME##6, F, 6) M(NAME##7, F, 7) M(NAME##8, F, 8) M(NAME##9, F, 9) M(NAME##10, F, 10)
#define ROWS_12(M, NAME, F) ROWS_10(M, NAME, F) M(NAME##11, F, 11) M(NAME##12, F, 12)
#define PAIRS_10(M, NAME, F, S)                                                           \
    M(NAME##2, F, S, 2) M(NAME##4, F, S, 4) M(NAME##6, F, S, 6) M(NAME##8, F, S, 8)        \
    M(NAME##10, F, S, 10)
#define PAIRS_12(M, NAME, F, S) PAIRS_10(M, NAME, F, S) M(NAME##12, F, S, 12)
#define ROW_TABLE_10(P) {P##1, P##2, P##3, P##4, P##5, P##6, P##7, P##8, P##9, P##10}
#define ROW_TABLE_12(P) {P##1, P##2, P##3, P##4, P##5, P##6, P##7, P##8, P##9, P##10, P##11, P##12}
#define PAIR_TABLE_10(P) {P##2, P##4, P##6, P##8, P##10}
#define PAIR_TABLE_12(P) {P##2, P##4, P##6, P##8, P##10, P##12}

/* The adapters put the row count before the width (S: the storage of the
 * storing pairs, unused by the others). */
#define GEMM_FULL(NAME, F, R) DEFINE_GEMM(NAME, F, R, 2)
#define GEMM_HALF(NAME, F, R) DEFINE_GEMM(NAME, F, R, 1)
#define PAIR_FULL(NAME, F, S, R) DEFINE_PAIR(NAME, F, R, 2)
#define PAIR_HALF(NAME, F, S, R) DEFINE_PAIR(NAME, F, R, 1)
#define STORE_FULL(NAME, F, S, R) DEFINE_PAIR_STORE(NAME, F, S, pair_##F##_r##R##_sums, R, 2)
#define STORE_HALF(NAME, F, S, R) DEFINE_PAIR_STORE(NAME, F, S, pair_half_##F##_r##R##_sums, R, 1)

ROWS_12(GEMM_FULL, gemm_f32_r, F32)
ROWS_12(GEMM_HALF, half_f32_r, F32)
ROWS_10(GEMM_FULL, gemm_f64_r, F64)
ROWS_10(GEMM_HALF, half_f64_r, F64)
PAIRS_12(PAIR_FULL, pair_F32_r, F32, -)
PAIRS_12(PAIR_HALF, pair_half_F32_r, F32, -)
PAIRS_10(PAIR_FULL, pair_F64_r, F64, -)
PAIRS_10(PAIR_HALF, pair_half_F64_r, F64, -)
PAIRS_12(STORE_FULL, store_f16_r, F32, SF16)
PAIRS_12(STORE_HALF, store_half_f16_r, F32, SF16)
PAIRS_12(STORE_FULL, store_bf16_r, F32, SBF16)
PAIRS_12(STORE_HALF, store_half_bf16_r, F32, SBF16)
PAIRS_12(STORE_FULL, store_f32_r, F32, SF32)
PAIRS_12(STORE_HALF, store_half_f32_r, F32, SF32)
PAIRS_10(STORE_FULL, store_f64_r, F64, SF64)
PAIRS_10(STORE_HALF, store_half_f64_r, F64, SF64)

/* Direct-engine rows: the interior in blocks of 8 vectors (8 FMA chains, one
 * load per FMA), then single vectors; the edges are fused scalar sums of the
 * taps inside.  Each output sums its sources, then taps, in order. */
#define ROW_BLOCK_STEP(n, F)                                                              \
    sums[n] = F##_FMA_N(sums[n], F##_LOAD(row + (n) * F##_L), weight);
#define ROW_BLOCK(M, F) M(0, F) M(1, F) M(2, F) M(3, F) M(4, F) M(5, F) M(6, F) M(7, F)

#define DEFINE_ROW(NAME, F, SCALAR_FMA)                                                   \
    static void NAME(ptrdiff_t sources, const F##_T *const *x, const F##_T *w,            \
                     ptrdiff_t taps, const ptrdiff_t *offsets, ptrdiff_t in_size,         \
                     ptrdiff_t count, F##_T *out, int accumulate)                         \
    {                                                                                     \
        ptrdiff_t t, lo, hi, s, j;                                                        \
        int n;                                                                            \
        convt_row_interior(taps, offsets, in_size, count, &lo, &hi);                      \
        for (t = 0; t < lo; ++t) CONVT_ROW_EDGE(F##_T, t, SCALAR_FMA)                     \
        for (t = lo; t + 8 * F##_L <= hi; t += 8 * F##_L) {                               \
            F##_V sums[8];                                                                \
            for (n = 0; n < 8; ++n)                                                       \
                sums[n] = accumulate ? F##_LOAD(out + t + n * F##_L) : F##_ZERO();        \
            for (s = 0; s < sources; ++s)                                                 \
                for (j = 0; j < taps; ++j) {                                              \
                    const F##_T *row = x[s] + t + offsets[j];                             \
                    F##_T weight = w[s * taps + j];                                       \
                    ROW_BLOCK(ROW_BLOCK_STEP, F)                                          \
                }                                                                         \
            for (n = 0; n < 8; ++n) F##_STORE(out + t + n * F##_L, sums[n]);              \
        }                                                                                 \
        for (; t + F##_L <= hi; t += F##_L) {                                             \
            F##_V sum = accumulate ? F##_LOAD(out + t) : F##_ZERO();                      \
            for (s = 0; s < sources; ++s)                                                 \
                for (j = 0; j < taps; ++j)                                                \
                    sum = F##_FMA_N(sum, F##_LOAD(x[s] + t + offsets[j]), w[s * taps + j]); \
            F##_STORE(out + t, sum);                                                      \
        }                                                                                 \
        for (; t < count; ++t) CONVT_ROW_EDGE(F##_T, t, SCALAR_FMA)                       \
    }
DEFINE_ROW(row_f32, F32, fmaf)
DEFINE_ROW(row_f64, F64, fma)

/* Channels-last direct-engine passes: the channels in vectors (weights kept in
 * registers across the run of outputs), then fused scalar lanes. */
#define DEFINE_CHANNELS(NAME, F, SCALAR_FMA)                                              \
    static void NAME(ptrdiff_t count, ptrdiff_t channels, const F##_T *x, ptrdiff_t x_step, \
                     const F##_T *w, F##_T *out, ptrdiff_t out_step)                      \
    {                                                                                     \
        ptrdiff_t t, c = 0;                                                               \
        for (; c + F##_L <= channels; c += F##_L) {                                       \
            F##_V weight = F##_LOAD(w + c);                                               \
            for (t = 0; t < count; ++t) {                                                 \
                F##_T *o = out + t * out_step + c;                                        \
                F##_STORE(o, F##_FMA(F##_LOAD(o), weight, F##_LOAD(x + t * x_step + c))); \
            }                                                                             \
        }                                                                                 \
        for (; c < channels; ++c)                                                         \
            for (t = 0; t < count; ++t)                                                   \
                out[t * out_step + c] = SCALAR_FMA(w[c], x[t * x_step + c], out[t * out_step + c]); \
    }
#define F32_FMA(acc, a, b) vfmaq_f32((acc), (a), (b))
#define F64_FMA(acc, a, b) vfmaq_f64((acc), (a), (b))
DEFINE_CHANNELS(channels_f32, F32, fmaf)
DEFINE_CHANNELS(channels_f64, F64, fma)

/* y[2 i] = even[i] + bias, y[2 i + 1] = odd[i] + bias: ST2 interleaves. */
#define DEFINE_INTERLEAVE(NAME, F, PAIR_T, STORE2)                                        \
    static void NAME(F##_T *y, const F##_T *even, const F##_T *odd, ptrdiff_t pairs,      \
                     F##_T bias)                                                          \
    {                                                                                     \
        F##_V b = F##_DUP(bias);                                                          \
        ptrdiff_t i = 0;                                                                  \
        for (; i + F##_L <= pairs; i += F##_L) {                                          \
            PAIR_T both;                                                                  \
            both.val[0] = F##_ADD(F##_LOAD(even + i), b);                                 \
            both.val[1] = F##_ADD(F##_LOAD(odd + i), b);                                  \
            STORE2(y + 2 * i, both);                                                      \
        }                                                                                 \
        for (; i < pairs; ++i) {                                                          \
            y[2 * i] = even[i] + bias;                                                    \
            y[2 * i + 1] = odd[i] + bias;                                                 \
        }                                                                                 \
    }
DEFINE_INTERLEAVE(interleave_f32, F32, float32x4x2_t, vst2q_f32)
DEFINE_INTERLEAVE(interleave_f64, F64, float64x2x2_t, vst2q_f64)

#define DEFINE_ADD_BIAS(NAME, F)                                                          \
    static void NAME(F##_T *dst, const F##_T *src, ptrdiff_t count, F##_T bias)           \
    {                                                                                     \
        F##_V b = F##_DUP(bias);                                                          \
        ptrdiff_t i = 0;                                                                  \
        for (; i + 2 * F##_L <= count; i += 2 * F##_L) {                                  \
            F##_STORE(dst + i, F##_ADD(F##_LOAD(src + i), b));                            \
            F##_STORE(dst + i + F##_L, F##_ADD(F##_LOAD(src + i + F##_L), b));           \
        }                                                                                 \
        for (; i < count; ++i) dst[i] = src[i] + bias;                                    \
    }
DEFINE_ADD_BIAS(add_bias_f32, F32)
DEFINE_ADD_BIAS(add_bias_f64, F64)

/* Storage conversions of float32 accumulation, 8 values per step. */
static void load_f16_f32(float *dst, const void *src, ptrdiff_t count)
{
    const uint16_t *halves = (const uint16_t *)src;
    ptrdiff_t i = 0;
    for (; i + 8 <= count; i += 8) {
        vst1q_f32(dst + i, half_to_float(halves + i));
        vst1q_f32(dst + i + 4, half_to_float(halves + i + 4));
    }
    for (; i < count; ++i) dst[i] = convt_half_to_float(halves[i]);
}

static void store_f16_f32(void *dst, const float *src, ptrdiff_t count, float bias)
{
    uint16_t *halves = (uint16_t *)dst;
    float32x4_t b = vdupq_n_f32(bias);
    ptrdiff_t i = 0;
    for (; i + 8 <= count; i += 8) {
        float_to_half(halves + i, vaddq_f32(vld1q_f32(src + i), b));
        float_to_half(halves + i + 4, vaddq_f32(vld1q_f32(src + i + 4), b));
    }
    for (; i < count; ++i) halves[i] = convt_float_to_half(src[i] + bias);
}

static void load_bf16_f32(float *dst, const void *src, ptrdiff_t count)
{
    const uint16_t *values = (const uint16_t *)src;
    ptrdiff_t i = 0;
    for (; i + 8 <= count; i += 8) {
        vst1q_f32(dst + i, bf16_to_float(values + i));
        vst1q_f32(dst + i + 4, bf16_to_float(values + i + 4));
    }
    for (; i < count; ++i) dst[i] = convt_bf16_to_float(values[i]);
}

static void store_bf16_f32(void *dst, const float *src, ptrdiff_t count, float bias)
{
    uint16_t *values = (uint16_t *)dst;
    float32x4_t b = vdupq_n_f32(bias);
    ptrdiff_t i = 0;
    for (; i + 8 <= count; i += 8) {
        float_to_bf16(values + i, vaddq_f32(vld1q_f32(src + i), b));
        float_to_bf16(values + i + 4, vaddq_f32(vld1q_f32(src + i + 4), b));
    }
    for (; i < count; ++i) values[i] = convt_float_to_bf16(src[i] + bias);
}

static void load_f32_f32(float *dst, const void *src, ptrdiff_t count)
{
    memcpy(dst, src, (size_t)count * sizeof(float));
}

static void load_f64_f64(double *dst, const void *src, ptrdiff_t count)
{
    memcpy(dst, src, (size_t)count * sizeof(double));
}

static void store_f32_f32(void *dst, const float *src, ptrdiff_t count, float bias)
{
    add_bias_f32((float *)dst, src, count, bias);
}

static void store_f64_f64(void *dst, const double *src, ptrdiff_t count, double bias)
{
    add_bias_f64((double *)dst, src, count, bias);
}

/* Stencils: the plain C loops with fused multiply-adds (the set is fused). */
CONVT_DEFINE_STENCIL(convt_neon_stencil_f32, float, fmaf)
CONVT_DEFINE_STENCIL(convt_neon_stencil_f64, double, fma)

#define NO_STORES {{0}, {0}}
#define FLAGS (CONVT_SET_HALF | CONVT_SET_PAIRS | CONVT_SET_FUSED)

const convt_kernels_f32 convt_neon_f32 = {
    "neon", MR_F32, 2 * F32_L, FLAGS,
    ROW_TABLE_12(gemm_f32_r), {0}, ROW_TABLE_12(half_f32_r),
    {PAIR_TABLE_12(pair_F32_r), PAIR_TABLE_12(pair_half_F32_r)},
    {{PAIR_TABLE_12(store_f16_r), PAIR_TABLE_12(store_half_f16_r)},
     {PAIR_TABLE_12(store_bf16_r), PAIR_TABLE_12(store_half_bf16_r)},
     {PAIR_TABLE_12(store_f32_r), PAIR_TABLE_12(store_half_f32_r)},
     NO_STORES},
    row_f32, channels_f32, interleave_f32, convt_portable_store_even_f32, add_bias_f32,
    {load_f16_f32, load_bf16_f32, load_f32_f32, convt_portable_load_f64_f32},
    {store_f16_f32, store_bf16_f32, store_f32_f32, convt_portable_store_f64_f32},
    0, convt_portable_transpose_f32, convt_neon_stencil_f32};

const convt_kernels_f64 convt_neon_f64 = {
    "neon", MR_F64, 2 * F64_L, FLAGS,
    ROW_TABLE_10(gemm_f64_r), {0}, ROW_TABLE_10(half_f64_r),
    {PAIR_TABLE_10(pair_F64_r), PAIR_TABLE_10(pair_half_F64_r)},
    {NO_STORES, NO_STORES, NO_STORES,
     {PAIR_TABLE_10(store_f64_r), PAIR_TABLE_10(store_half_f64_r)}},
    row_f64, channels_f64, interleave_f64, convt_portable_store_even_f64, add_bias_f64,
    {convt_portable_load_f16_f64, convt_portable_load_bf16_f64, convt_portable_load_f32_f64,
     load_f64_f64},
    {convt_portable_store_f16_f64, convt_portable_store_bf16_f64,
     convt_portable_store_f32_f64, store_f64_f64},
    0, convt_portable_transpose_f64, convt_neon_stencil_f64};

#endif /* AArch64 */
