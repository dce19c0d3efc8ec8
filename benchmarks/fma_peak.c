/* Register-only FMA loops: the peak multiply-add rate of each x86 kernel set.
 *
 * Each loop keeps ACCUMULATORS independent vector accumulators in registers
 * and updates them with acc = acc * a + b: no loads, no stores, no
 * dependency between accumulators, so the only limit is how many FMAs a
 * core issues per cycle. 12 accumulators exceed latency x FMA pipes on
 * current x86-64 cores (4-5 cycles x 2 pipes = 8-10) and, with the two
 * operands, still fit the 16 ymm registers of AVX2; AVX-512 has 32 zmm.
 * With a = b = 0.5 the accumulators converge to 1: no overflow, no
 * subnormals.
 *
 * Built by peaks.py at run time (cc -O2 -fopenmp -shared -fPIC). Each loop
 * carries its own target attribute, so the file compiles on any x86-64 CPU;
 * call fma_kernel_supported before running a kernel.
 */
#include <immintrin.h>
#include <omp.h>

enum { KERNEL_AVX512 = 0, KERNEL_AVX2 = 1 };
enum { DTYPE_FLOAT32 = 0, DTYPE_FLOAT64 = 1 };
#define ACCUMULATORS 12

/* One loop: VEC vector type, SET1 broadcast, FMADD fused multiply-add.
 * Returns a checksum so that the compiler cannot drop the work. */
#define FMA_LOOP(NAME, TARGET, VEC, SCALAR, SET1, FMADD, LANES)                   \
    __attribute__((target(TARGET))) static double NAME(long iterations) {         \
        const VEC a = SET1((SCALAR)0.5), b = SET1((SCALAR)0.5);                    \
        VEC acc[ACCUMULATORS];                                                     \
        _Pragma("GCC unroll 16") for (int k = 0; k < ACCUMULATORS; ++k)            \
            acc[k] = SET1((SCALAR)k);                                              \
        for (long i = 0; i < iterations; ++i) {                                    \
            _Pragma("GCC unroll 16") for (int k = 0; k < ACCUMULATORS; ++k)        \
                acc[k] = FMADD(acc[k], a, b);                                      \
        }                                                                          \
        SCALAR lanes[LANES];                                                       \
        double total = 0.0;                                                        \
        for (int k = 0; k < ACCUMULATORS; ++k) {                                   \
            __builtin_memcpy(lanes, &acc[k], sizeof lanes);                        \
            for (int lane = 0; lane < LANES; ++lane) total += lanes[lane];         \
        }                                                                          \
        return total;                                                              \
    }

FMA_LOOP(avx512_float32, "avx512f", __m512, float, _mm512_set1_ps, _mm512_fmadd_ps, 16)
FMA_LOOP(avx512_float64, "avx512f", __m512d, double, _mm512_set1_pd, _mm512_fmadd_pd, 8)
FMA_LOOP(avx2_float32, "avx2,fma", __m256, float, _mm256_set1_ps, _mm256_fmadd_ps, 8)
FMA_LOOP(avx2_float64, "avx2,fma", __m256d, double, _mm256_set1_pd, _mm256_fmadd_pd, 4)

typedef double (*fma_loop)(long);

static fma_loop select_loop(int kernel, int dtype) {
    if (kernel == KERNEL_AVX512) return dtype == DTYPE_FLOAT32 ? avx512_float32 : avx512_float64;
    if (kernel == KERNEL_AVX2) return dtype == DTYPE_FLOAT32 ? avx2_float32 : avx2_float64;
    return 0;
}

/* 1 if this CPU, and the OS (which must save the registers), runs `kernel`. */
int fma_kernel_supported(int kernel) {
    __builtin_cpu_init();
    if (kernel == KERNEL_AVX512) return __builtin_cpu_supports("avx512f") != 0;
    if (kernel == KERNEL_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return 0;
}

/* Vector FMA instructions issued per loop iteration and thread. */
int fma_per_iteration(void) { return ACCUMULATORS; }

/* Run the loop `iterations` times on each of `threads` threads and return
 * the wall seconds from a barrier before the loops to the end of the
 * slowest one, or -1 for an unknown kernel or dtype. The accumulators' sum
 * goes to *checksum. */
double fma_run_seconds(int kernel, int dtype, int threads, long iterations, double *checksum) {
    fma_loop loop = select_loop(kernel, dtype);
    if (!loop) return -1.0;
    double start = 0.0, total = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
#pragma omp barrier
#pragma omp master
        start = omp_get_wtime();
#pragma omp barrier
        total += loop(iterations);
    }
    *checksum = total;
    return omp_get_wtime() - start;
}
