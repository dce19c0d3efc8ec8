/* OpenMP queries, with serial stand-ins when the compiler has no OpenMP, so
 * the drivers compile (and run on one thread) either way. */
#ifndef CONVT_OPENMP_H
#define CONVT_OPENMP_H

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

#endif /* CONVT_OPENMP_H */
