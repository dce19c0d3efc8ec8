/* OpenMP queries, with serial stand-ins when the compiler has no OpenMP, so
 * the drivers compile (and run on one thread) either way. */
#ifndef CONVT_OPENMP_H
#define CONVT_OPENMP_H

#ifdef _OPENMP
#include <omp.h>
#define CONVT_HAVE_OPENMP 1
static inline int convt_thread_num(void) { return omp_get_thread_num(); }
static inline int convt_max_threads(void) { return omp_get_max_threads(); }
/* Wall-clock seconds (OpenMP 2.0's timer, on every compiler that has OpenMP). */
static inline double convt_seconds(void) { return omp_get_wtime(); }
#else
#include <time.h>
#define CONVT_HAVE_OPENMP 0
static inline int convt_thread_num(void) { return 0; }
static inline int convt_max_threads(void) { return 1; }
/* Serial builds run on one thread: its processor time stands in for wall time. */
static inline double convt_seconds(void) { return (double)clock() / CLOCKS_PER_SEC; }
#endif

/* A flag one thread raises and the others read between work items. */
typedef struct convt_stop {
    volatile int raised;
} convt_stop;

static inline int convt_stop_raised(const convt_stop *stop) { return stop->raised; }
static inline void convt_raise_stop(convt_stop *stop) { stop->raised = 1; }

#endif /* CONVT_OPENMP_H */
