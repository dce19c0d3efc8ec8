/* A hint to fetch the cache line at p into every cache level; nothing where the
 * compiler has no such builtin. */
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

#endif
