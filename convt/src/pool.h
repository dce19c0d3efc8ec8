/* convt's thread pool: work items shared by claiming, no barrier.
 *
 * A job is `items` work items; each is run once, by task(context, item, slot),
 * where slot < threads names the thread's workspace (0 is the caller).  The
 * caller posts the job, wakes the workers and claims items itself with the
 * others; it returns once every item has run.  A worker that has not woken up
 * by then claims nothing and is never waited for: on a busy machine, where a
 * worker may not be scheduled for milliseconds, the caller does the work
 * itself instead of waiting at a barrier (OpenMP's fork-join waits for every
 * thread of the team, which made calls 20-70x slower under load).
 *
 * Workers are created on first use and live for the process.  A child forked
 * while the pool existed starts with no workers and creates its own.  Calls
 * from several threads at once are safe: a job that finds the pool busy runs
 * on its caller alone.
 */
#ifndef CONVT_POOL_H
#define CONVT_POOL_H

#include <stddef.h>

typedef void (*convt_task)(void *context, ptrdiff_t item, int slot);

/* Run items 0 .. items - 1 with up to `threads` threads, the caller included;
 * return the number of threads that ran at least one item. */
int convt_run(convt_task task, void *context, ptrdiff_t items, int threads);

/* Whether a call on `threads` threads would share cores with other busy
 * threads: a recent threaded call waited long for a descheduled worker, or (on
 * Linux) the threads runnable on the machine leave fewer free CPUs (pool.c). */
int convt_pool_contended(int threads);

/* Worker threads created so far (0 in a child forked since). */
int convt_pool_workers(void);

/* Whether this build has threads at all (POSIX threads or Windows threads). */
int convt_pool_available(void);

/* Monotonic wall-clock seconds. */
double convt_seconds(void);

/* A flag one thread raises and the others read between work items. */
typedef struct convt_stop {
    volatile int raised;
} convt_stop;

static inline int convt_stop_raised(const convt_stop *stop) { return stop->raised; }
static inline void convt_raise_stop(convt_stop *stop) { stop->raised = 1; }

#endif /* CONVT_POOL_H */
