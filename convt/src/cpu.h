/* What the CPU and the operating system let convt's kernels use, detected once.
 *
 * Only this file's companion cpu.c asks the hardware; everything else reads
 * convt_cpu_features().  The x86 decoding is a pure function of the CPUID
 * words, XCR0 and the OS's answer on lazily enabled AVX-512 state, so its
 * rules are tested on any machine (convt._kernels._decode_x86).
 */
#ifndef CONVT_CPU_H
#define CONVT_CPU_H

#include <stdint.h>

enum {
    CONVT_CPU_AVX2 = 1 << 0,        /* with the OS saving YMM state */
    CONVT_CPU_FMA = 1 << 1,
    CONVT_CPU_F16C = 1 << 2,
    CONVT_CPU_AVX512F = 1 << 3,     /* with the OS saving ZMM and opmask state */
    CONVT_CPU_AVX512VL = 1 << 4,
    CONVT_CPU_AVX512BW = 1 << 5,
    CONVT_CPU_AVX512BF16 = 1 << 6,
    CONVT_CPU_NEON = 1 << 8,        /* AArch64 Advanced SIMD (always present there) */
    CONVT_CPU_NEON_FP16 = 1 << 9,   /* ARMv8.2 half-precision arithmetic */
    CONVT_CPU_NEON_BF16 = 1 << 10
};

/* The inputs of the x86 decision. */
typedef struct convt_x86_words {
    uint32_t max_leaf;      /* CPUID leaf 0, eax */
    uint32_t leaf1_ecx;     /* CPUID leaf 1, ecx: FMA, OSXSAVE, AVX, F16C */
    uint32_t leaf7_ebx;     /* CPUID leaf 7.0, ebx: AVX2, AVX512F/BW/VL */
    uint32_t leaf7_1_eax;   /* CPUID leaf 7.1, eax: AVX512_BF16 */
    uint64_t xcr0;          /* state components the OS saves (XGETBV 0) */
    int os_avx512;          /* the OS enables AVX-512 state on first use (macOS) */
} convt_x86_words;

/* CONVT_CPU_* bits that the given x86 words allow. */
unsigned convt_decode_x86(const convt_x86_words *words);

/* CONVT_CPU_* bits of this machine (computed once, then cached). */
unsigned convt_cpu_features(void);

/* Bytes of one core's level-1 data cache, as the CPU (x86 CPUID leaf 4 or
 * 0x80000005) or the OS (Linux sysconf, macOS sysctl) reports it; 0 when
 * neither says (computed once, then cached). */
long convt_l1_data_bytes(void);

/* Bytes of the level-2 cache of one core (or of its cluster, where cores share
 * it), as the CPU (x86 CPUID leaf 4 or 0x80000006) or the OS (Linux sysconf,
 * macOS sysctl) reports it; 0 when neither says (computed once, then cached). */
long convt_l2_bytes(void);

/* How much faster this core runs 512-bit FMAs than 256-bit ones, per FLOP,
 * measured by a register-only loop on each (x86_avx512.c, about 0.1 ms): about
 * 2 where 512-bit FMAs are native (Intel cores with two 512-bit FMA units,
 * AMD Zen 5 server and desktop cores), about 1 where the core splits them in
 * two (AMD Zen 4, Zen 5 mobile).  Call only where convt_cpu_features() has
 * CONVT_CPU_AVX512F; 0 on other architectures. */
double convt_avx512_fma_speedup(void);

#endif /* CONVT_CPU_H */
