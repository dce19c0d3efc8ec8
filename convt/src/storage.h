/* Element types of user arrays ("storage") and their scalar conversions.
 *
 * Storage may be float16, bfloat16, float32 or float64.  The kernels compute in
 * an accumulation type: float for the first three, double for float64.  Narrow
 * types are widened exactly when a tile is loaded and rounded once, to nearest
 * even, when an output is stored.  The conversions here are plain integer and
 * float code, so they are exact on every compiler and CPU; kernel sets add
 * vectorised runs of them (F16C, AVX-512).
 */
#ifndef CONVT_STORAGE_H
#define CONVT_STORAGE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum {
    CONVT_F16 = 0,
    CONVT_BF16 = 1,
    CONVT_F32 = 2,
    CONVT_F64 = 3,
    CONVT_STORAGE_COUNT = 4
};

/* Bytes per element of each storage type. */
static inline ptrdiff_t convt_itemsize(int storage)
{
    return storage == CONVT_F64 ? 8 : storage == CONVT_F32 ? 4 : 2;
}

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

/* IEEE binary16 -> binary32, exact.  Exponent and mantissa move into float
 * position and are rebiased; a zero exponent (zero or subnormal) is
 * renormalised by a float subtraction, exact because every half subnormal is a
 * float normal. */
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

/* binary32 -> binary16, rounded to nearest even; subnormals kept, overflow to
 * inf, NaN to a quiet NaN of the same sign.  Subnormal results come from an
 * addition whose float rounding performs the half rounding; normal results add
 * the rounding bias (0xfff plus the lowest kept bit) before dropping 13 bits. */
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

/* bfloat16 is the high half of a binary32: widening is a shift. */
static inline float convt_bf16_to_float(uint16_t value)
{
    return convt_bits_float((uint32_t)value << 16);
}

/* binary32 -> bfloat16, rounded to nearest even (overflow gives inf, as the
 * carry runs into the exponent); NaN stays a quiet NaN of the same sign. */
static inline uint16_t convt_float_to_bf16(float value)
{
    uint32_t bits = convt_float_bits(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* Element `index` of an array of storage type `storage`, widened to double
 * (exact for every storage type). */
static inline double convt_load_double(const void *base, ptrdiff_t index, int storage)
{
    switch (storage) {
    case CONVT_F16: return convt_half_to_float(((const uint16_t *)base)[index]);
    case CONVT_BF16: return convt_bf16_to_float(((const uint16_t *)base)[index]);
    case CONVT_F32: return ((const float *)base)[index];
    default: return ((const double *)base)[index];
    }
}

/* Element `index` of an array of storage type `storage` set from an
 * accumulation value, rounded once (a float widened to double and rounded
 * back gives the float itself). */
static inline void convt_store_double(void *base, ptrdiff_t index, int storage, double value)
{
    switch (storage) {
    case CONVT_F16: ((uint16_t *)base)[index] = convt_float_to_half((float)value); break;
    case CONVT_BF16: ((uint16_t *)base)[index] = convt_float_to_bf16((float)value); break;
    case CONVT_F32: ((float *)base)[index] = (float)value; break;
    default: ((double *)base)[index] = value; break;
    }
}

#endif /* CONVT_STORAGE_H */
