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
