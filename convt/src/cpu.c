/* CPU feature detection (see cpu.h). */
#include "cpu.h"

#if defined(__x86_64__) || defined(_M_X64)
#define CONVT_X86_64 1
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
static void cpuid(uint32_t leaf, uint32_t sub, uint32_t regs[4])
{
    int out[4];
    __cpuidex(out, (int)leaf, (int)sub);
    regs[0] = (uint32_t)out[0]; regs[1] = (uint32_t)out[1];
    regs[2] = (uint32_t)out[2]; regs[3] = (uint32_t)out[3];
}
static uint64_t xgetbv0(void) { return _xgetbv(0); }
#else
#include <cpuid.h>
static void cpuid(uint32_t leaf, uint32_t sub, uint32_t regs[4])
{
    __cpuid_count(leaf, sub, regs[0], regs[1], regs[2], regs[3]);
}
static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#endif /* x86-64 */

#if defined(__linux__)
#include <unistd.h>
#endif

#if defined(__aarch64__) || defined(_M_ARM64)
#define CONVT_AARCH64 1
#if defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#endif

#define BIT(word, n) (((word) >> (n)) & 1u)

unsigned convt_decode_x86(const convt_x86_words *words)
{
    unsigned features = 0;
    int osxsave = BIT(words->leaf1_ecx, 27);
    int ymm_state = osxsave && (words->xcr0 & 0x6) == 0x6;
    /* opmask, upper ZMM0-15 and ZMM16-31 besides SSE and AVX state; macOS
     * leaves them off in XCR0 until a thread first uses AVX-512 */
    int zmm_state = ymm_state && ((words->xcr0 & 0xe6) == 0xe6 || words->os_avx512);
    int leaf7 = words->max_leaf >= 7;
    if (!ymm_state || !BIT(words->leaf1_ecx, 28)) return 0; /* no usable AVX */
    if (BIT(words->leaf1_ecx, 12)) features |= CONVT_CPU_FMA;
    if (BIT(words->leaf1_ecx, 29)) features |= CONVT_CPU_F16C;
    if (leaf7 && BIT(words->leaf7_ebx, 5)) features |= CONVT_CPU_AVX2;
    if (leaf7 && zmm_state && BIT(words->leaf7_ebx, 16)) {
        features |= CONVT_CPU_AVX512F;
        if (BIT(words->leaf7_ebx, 31)) features |= CONVT_CPU_AVX512VL;
        if (BIT(words->leaf7_ebx, 30)) features |= CONVT_CPU_AVX512BW;
        if (BIT(words->leaf7_1_eax, 5)) features |= CONVT_CPU_AVX512BF16;
    }
    return features;
}

#ifdef CONVT_X86_64
static int darwin_avx512(void)
{
#if defined(__APPLE__)
    int value = 0;
    size_t size = sizeof value;
    if (sysctlbyname("hw.optional.avx512f", &value, &size, NULL, 0) == 0) return value != 0;
#endif
    return 0;
}

static unsigned detect(void)
{
    uint32_t regs[4];
    convt_x86_words words = {0, 0, 0, 0, 0, 0};
    cpuid(0, 0, regs);
    words.max_leaf = regs[0];
    if (words.max_leaf < 1) return 0;
    cpuid(1, 0, regs);
    words.leaf1_ecx = regs[2];
    if (BIT(words.leaf1_ecx, 27)) words.xcr0 = xgetbv0();
    if (words.max_leaf >= 7) {
        cpuid(7, 0, regs);
        words.leaf7_ebx = regs[1];
        if (regs[0] >= 1) {
            cpuid(7, 1, regs);
            words.leaf7_1_eax = regs[0];
        }
    }
    words.os_avx512 = darwin_avx512();
    return convt_decode_x86(&words);
}
#elif defined(CONVT_AARCH64)
static int darwin_flag(const char *name)
{
#if defined(__APPLE__)
    int value = 0;
    size_t size = sizeof value;
    if (sysctlbyname(name, &value, &size, NULL, 0) == 0) return value != 0;
#else
    (void)name;
#endif
    return 0;
}

static unsigned detect(void)
{
    unsigned features = CONVT_CPU_NEON;
#if defined(__linux__) && defined(AT_HWCAP)
    unsigned long hwcap = getauxval(AT_HWCAP);
    if (hwcap & (1ul << 10)) features |= CONVT_CPU_NEON_FP16; /* HWCAP_ASIMDHP */
#if defined(AT_HWCAP2)
    if (getauxval(AT_HWCAP2) & (1ul << 14)) features |= CONVT_CPU_NEON_BF16; /* HWCAP2_BF16 */
#endif
#endif
    if (darwin_flag("hw.optional.arm.FEAT_FP16")) features |= CONVT_CPU_NEON_FP16;
    if (darwin_flag("hw.optional.arm.FEAT_BF16")) features |= CONVT_CPU_NEON_BF16;
    return features;
}
#else
static unsigned detect(void) { return 0; }
#endif

/* CPUID exits to the hypervisor in a virtual machine (microseconds): ask once.
 * Threads racing on the first call store the same value. */
unsigned convt_cpu_features(void)
{
    static int known = 0;
    static unsigned features = 0;
    if (!known) {
        features = detect();
        known = 1;
    }
    return features;
}

#ifdef CONVT_X86_64
/* Intel's deterministic cache parameters (leaf 4): bytes of the cache of `level`
 * and `type` (1 data, 3 unified), 0 when the leaf lists none. */
static long x86_leaf4_cache_bytes(uint32_t level, uint32_t type)
{
    uint32_t regs[4];
    uint32_t sub;
    cpuid(0, 0, regs);
    if (regs[0] < 4) return 0;
    for (sub = 0; sub < 16; ++sub) {
        cpuid(4, sub, regs);
        if ((regs[0] & 0x1f) == 0) break; /* no more caches */
        if ((regs[0] & 0x1f) == type && ((regs[0] >> 5) & 0x7) == level)
            return (long)(((regs[1] >> 22) & 0x3ff) + 1) * (((regs[1] >> 12) & 0x3ff) + 1)
                   * ((regs[1] & 0xfff) + 1) * ((long)regs[2] + 1);
    }
    return 0;
}

/* AMD's extended leaf `leaf` (0x80000005: L1, 0x80000006: L2): its ECX >> shift KiB. */
static long x86_extended_cache_bytes(uint32_t leaf, unsigned shift)
{
    uint32_t regs[4];
    cpuid(0x80000000u, 0, regs);
    if (regs[0] < leaf) return 0;
    cpuid(leaf, 0, regs);
    return (long)(regs[2] >> shift) * 1024;
}
#endif

/* Bytes of a cache as the CPU (x86: leaf 4's `level` and `type`, else AMD's
 * `leaf`) or the OS (Linux sysconf `name`, macOS sysctl `sysctl_name`) reports it,
 * 0 when none does. */
static long detect_cache_bytes(unsigned level, unsigned type, unsigned leaf, unsigned shift,
                               int name, const char *sysctl_name)
{
    long bytes = 0;
#ifdef CONVT_X86_64
    bytes = x86_leaf4_cache_bytes(level, type);
    if (bytes <= 0) bytes = x86_extended_cache_bytes(leaf, shift);
#else
    (void)level;
    (void)type;
    (void)leaf;
    (void)shift;
#endif
#if defined(__linux__)
    if (bytes <= 0 && name >= 0) bytes = sysconf(name);
#else
    (void)name;
#endif
#if defined(__APPLE__)
    if (bytes <= 0) {
        int64_t value = 0;
        size_t size = sizeof value;
        if (sysctlbyname(sysctl_name, &value, &size, NULL, 0) == 0) bytes = (long)value;
    }
#else
    (void)sysctl_name;
#endif
    return bytes > 0 ? bytes : 0;
}

#if defined(__linux__) && defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
#define CONVT_SC_L1D _SC_LEVEL1_DCACHE_SIZE
#define CONVT_SC_L2 _SC_LEVEL2_CACHE_SIZE
#else
#define CONVT_SC_L1D (-1)
#define CONVT_SC_L2 (-1)
#endif

long convt_l1_data_bytes(void)
{
    static int known = 0;
    static long bytes = 0;
    if (!known) {
        bytes = detect_cache_bytes(1, 1, 0x80000005u, 24, CONVT_SC_L1D, "hw.l1dcachesize");
        known = 1;
    }
    return bytes;
}

long convt_l2_bytes(void)
{
    static int known = 0;
    static long bytes = 0;
    if (!known) {
        bytes = detect_cache_bytes(2, 3, 0x80000006u, 16, CONVT_SC_L2, "hw.l2cachesize");
        known = 1;
    }
    return bytes;
}

#ifndef CONVT_X86_64
double convt_avx512_fma_speedup(void) { return 0.0; }
#endif
