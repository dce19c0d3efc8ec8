/* The registered kernel families, in order of preference (best last).
 * Adding a CPU family is adding its file and one line here. */
#include "cpu.h"
#include "sets.h"

static const convt_family families[] = {
    {"portable", 0, &convt_portable_f32, &convt_portable_f64},
#ifdef CONVT_X86_64
    {"avx2", CONVT_CPU_AVX2 | CONVT_CPU_FMA | CONVT_CPU_F16C, &convt_avx2_f32, &convt_avx2_f64},
    /* chosen over avx512 for large layers only (convt._dispatch.WIDE_MIN_WORK) */
    {"avx512_wide", CONVT_CPU_AVX2 | CONVT_CPU_FMA | CONVT_CPU_F16C | CONVT_CPU_AVX512F
                        | CONVT_CPU_AVX512VL,
     &convt_avx512_wide_f32, &convt_avx512_wide_f64},
    {"avx512", CONVT_CPU_AVX2 | CONVT_CPU_FMA | CONVT_CPU_F16C | CONVT_CPU_AVX512F
                   | CONVT_CPU_AVX512VL,
     &convt_avx512_f32, &convt_avx512_f64},
#endif
#ifdef CONVT_AARCH64
    {"neon", CONVT_CPU_NEON, &convt_neon_f32, &convt_neon_f64},
#endif
};

int convt_family_count(void)
{
    return (int)(sizeof families / sizeof families[0]);
}

const convt_family *convt_family_at(int index)
{
    return index >= 0 && index < convt_family_count() ? &families[index] : 0;
}

int convt_family_available(const convt_family *family)
{
    return (convt_cpu_features() & family->requires) == family->requires;
}
