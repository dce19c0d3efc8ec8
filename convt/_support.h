/* Small portable helpers for convt's kernels.
 *
 * - IEEE binary16 <-> binary32 conversion in plain integer/float code, so that
 *   float16 data is converted tile by tile inside the kernels on every
 *   compiler and CPU (no F16C or _Float16 requirement).  float -> half rounds
 *   to nearest even, keeps subnormals, saturates to +-inf and maps NaN to a
 *   quiet NaN of the same sign.
 * - OpenMP shims, so the kernels compile (serially) without OpenMP.
 */
#ifndef CONVT_SUPPORT_H
#define CONVT_SUPPORT_H

#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#define CONVT_HAVE_OPENMP 1
static inline int convt_thread_num(void) { return omp_get_thread_num(); }
static inline int convt_max_threads(void) { return omp_get_max_threads(); }
#else
#define CONVT_HAVE_OPENMP 0
static inline int convt_thread_num(void) { return 0; }
static inline int convt_max_threads(void) { return 1; }
#endif

static inline uint32_t convt_float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static inline float convt_bits_float(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* Exponent and mantissa are moved into float position and rebiased; a zero
 * exponent (zero or subnormal) is renormalised by a float subtraction, which is
 * exact because every half subnormal is a float normal. */
static inline float convt_half_to_float(uint16_t half)
{
    const uint32_t exponent_mask = 0x7c00u << 13;
    uint32_t bits = ((uint32_t)half & 0x7fffu) << 13;
    uint32_t exponent = bits & exponent_mask;
    bits += (uint32_t)(127 - 15) << 23;
    if (exponent == exponent_mask) {
        bits += (uint32_t)(128 - 16) << 23;           /* inf, nan */
    } else if (exponent == 0) {
        bits += 1u << 23;                              /* zero, subnormal */
        bits = convt_float_bits(convt_bits_float(bits) - convt_bits_float(113u << 23));
    }
    return convt_bits_float(bits | (((uint32_t)half & 0x8000u) << 16));
}

/* Round to nearest even.  Subnormal results are produced by an addition whose
 * float rounding performs the half rounding; normal results add the rounding
 * bias (0xfff plus the lowest kept bit) before truncating 13 bits. */
static inline uint16_t convt_float_to_half(float value)
{
    uint32_t bits = convt_float_bits(value);
    uint32_t sign = (bits >> 16) & 0x8000u;
    uint32_t magnitude = bits & 0x7fffffffu;
    uint16_t half;
    if (magnitude >= ((uint32_t)(127 + 16) << 23)) {
        half = magnitude > (255u << 23) ? 0x7e00u : 0x7c00u; /* nan : overflow, inf */
    } else if (magnitude < (113u << 23)) {
        const uint32_t magic_bits = (uint32_t)((127 - 15) + (23 - 10) + 1) << 23;
        float shifted = convt_bits_float(magnitude) + convt_bits_float(magic_bits);
        half = (uint16_t)(convt_float_bits(shifted) - magic_bits);
    } else {
        uint32_t lowest_kept = (magnitude >> 13) & 1u;
        magnitude += ((uint32_t)(15 - 127) << 23) + 0xfffu + lowest_kept;
        half = (uint16_t)(magnitude >> 13);
    }
    return (uint16_t)(half | sign);
}

#endif /* CONVT_SUPPORT_H */
