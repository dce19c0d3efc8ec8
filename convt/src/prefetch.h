/* Cache hints: a hint to fetch the cache line at p into every cache level, one
 * to fetch it for writing (nothing where the compiler has no such builtin), and
 * the fence after non-temporal stores. */
#ifndef CONVT_PREFETCH_H
#define CONVT_PREFETCH_H

#if defined(__GNUC__) || defined(__clang__)
#define convt_prefetch(p) __builtin_prefetch((const void *)(p), 0, 2)
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#include <xmmintrin.h>
#define convt_prefetch(p) _mm_prefetch((const char *)(p), _MM_HINT_T1)
#else
#define convt_prefetch(p) ((void)(p))
#endif

/* A hint for the weights a kernel reads CONVT_WEIGHT_PREFETCH_BYTES further on
 * (every x86 kernel family: the weights are the broadcast rows of gemm, the
 * vectors of gemm_t).  A kernel call reads its row block's weights front to
 * back, and the next call (the next row block) continues where it stopped, so
 * the packed weights form one stream.  Where that stream comes from memory
 * (weights beyond the caches, each used by few positions) the hardware
 * prefetchers ran too little ahead and the gemm kernels waited on its lines: a
 * bound DCGAN 1024 -> 512 k4s2 layer on a 4x4 map (32 MiB of weights) ran 1.52x
 * faster with the hint on 1 and 2 Zen 4 cores (1.16x with avx512_wide's
 * kernels, 1.61x with AVX2's), its 512 -> 256 twin on 8x8 1.15x and a batched
 * k16s8 vocoder layer (8 MiB) 1.05x on 1 core; 21 layers whose weights stay in
 * the caches (gemm_t's small maps among them) moved within the noise (+-3%).
 * 1.5 KiB ahead gained a third as much, 4.5-12 KiB all the same.  A build may
 * override it (-DCONVT_WEIGHT_PREFETCH_BYTES=...) to measure another distance. */
#ifndef CONVT_WEIGHT_PREFETCH_BYTES
#define CONVT_WEIGHT_PREFETCH_BYTES 6144
#endif
/* Only kernels of at least this many rows per step (gemm_t: positions) hint: a
 * hint per step costs a load slot, and a step of fewer rows has too few FMAs to
 * hide it (1 Zen 4 core: Conv to 2 output channels 7% slower, to 4 float64
 * channels 5%).  The few-row kernels serve the last rows of a block and layers of
 * few output channels, whose weights are small; with the limit both layers
 * ran as without hints.  ROWS is a compile-time constant in every kernel, so the
 * test folds away. */
#define CONVT_WEIGHT_HINT_MIN_ROWS 6
#define convt_prefetch_weights(a, rows)                                       \
    do {                                                                      \
        if ((rows) >= CONVT_WEIGHT_HINT_MIN_ROWS)                             \
            convt_prefetch((const char *)(a) + CONVT_WEIGHT_PREFETCH_BYTES); \
    } while (0)

/* How far along a B row gemm_stream's hint reaches (kernel_set.h): col2im reads
 * w's rows in place, a line of each of a chunk's rows per kernel call, rows KiBs
 * apart, so the hardware prefetchers, which follow a few streams, leave each
 * step waiting on memory (reading in place without hints ran 1.5-2x slower than
 * copying the rows first).  A kernel call reads line q of every row, the call
 * for the panel after it line q + 1: hinting 8 lines on keeps the rows' lines
 * coming while the FMAs run, where the copy made them wait.  On 1 / 2 Zen 4
 * cores, against copying: DCGAN 1024 -> 512 k4s2 on 4x4 1.16-1.28x faster
 * (avx512_wide's kernels 1.7x), its 512 -> 256 twin on 8x8 1.03-1.13x (level).
 * 4 lines ahead ran within the noise of 8 (4.40 / 2.24 ms against 4.10 / 2.32),
 * 16 lines 1.1x / 1.2x slower.  AVX2's kernels read in place were slower than
 * copying on 8x8 (0.75x): that set has no gemm_stream. */
#ifndef CONVT_STREAM_AHEAD_BYTES
#define CONVT_STREAM_AHEAD_BYTES 512
#endif

/* A hint to fetch the cache line at p for writing (into L1, owned): kernels
 * that store into y ask for the lines of a later call's panel, whose read for
 * ownership would otherwise stall the stores when y is not cached. */
#if defined(__GNUC__) || defined(__clang__)
#define convt_prefetch_write(p) __builtin_prefetch((const void *)(p), 1, 3)
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#define convt_prefetch_write(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#else
#define convt_prefetch_write(p) ((void)(p))
#endif

/* Orders this thread's non-temporal stores (interleave_stream) before its later
 * stores, such as the pool's count of finished items: a thread that then sees
 * the count sees the data.  Nothing where no kernel streams. */
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#include <xmmintrin.h>
#define convt_store_fence() _mm_sfence()
#else
#define convt_store_fence() ((void)0)
#endif

#endif
