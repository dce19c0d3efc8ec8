/* convt's thread pool (see pool.h).
 *
 * Items are claimed from one 64-bit ticket: the job's generation in the high
 * 32 bits, the next item in the low 32.  A claim is a compare-and-swap that
 * succeeds only for the current generation and an item below `items`, so a
 * worker that wakes up after its job ended (or during a later one) cannot
 * take an item it was not posted: it reads a different generation.  The
 * caller counts finished items and returns when all have run; items in
 * flight are only ever those a running thread claimed.
 *
 * On Linux the workers are kept off the CPU the caller runs on (their affinity
 * is the caller's minus that CPU, set again only when the caller moves).  A
 * worker woken after an idle pause was otherwise often queued on the caller's
 * own CPU (in a virtual machine the scheduler passes over a halted vCPU it
 * takes for preempted) and ran only after the caller had done every item:
 * 8 items of 64 us on 2 vCPUs took 390-475 us after pauses of 2-200 ms,
 * 220-335 us with the workers kept off the caller's CPU (255 us back to back).
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE  /* sched_getcpu, CPU_* and pthread_setaffinity_np */
#endif
#include <stdint.h>

#include "pool.h"

#define MAX_WORKERS 255
/* Idle spins before a worker sleeps (a call in a loop finds it awake), and
 * before a waiting caller yields its core. */
#define WORKER_SPINS 4000
#define CALLER_SPINS 2000

#if defined(_WIN32)
#define CONVT_WINDOWS_THREADS 1
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
typedef SRWLOCK lock_t;
typedef CONDITION_VARIABLE cond_t;
#define LOCK_INIT SRWLOCK_INIT
#define COND_INIT CONDITION_VARIABLE_INIT
static void lock(lock_t *l) { AcquireSRWLockExclusive(l); }
static void unlock(lock_t *l) { ReleaseSRWLockExclusive(l); }
static int try_lock(lock_t *l) { return TryAcquireSRWLockExclusive(l) != 0; }
static void wait(cond_t *c, lock_t *l) { SleepConditionVariableSRW(c, l, INFINITE, 0); }
static void wake_all(cond_t *c) { WakeAllConditionVariable(c); }
static void yield_core(void) { SwitchToThread(); }
static int64_t load(volatile int64_t *p) { return InterlockedCompareExchange64(p, 0, 0); }
static void store(volatile int64_t *p, int64_t v) { InterlockedExchange64(p, v); }
static void add(volatile int64_t *p, int64_t v) { InterlockedExchangeAdd64(p, v); }
static int swap_if(volatile int64_t *p, int64_t expected, int64_t desired)
{
    return InterlockedCompareExchange64(p, desired, expected) == expected;
}
#else
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
typedef pthread_mutex_t lock_t;
typedef pthread_cond_t cond_t;
#define LOCK_INIT PTHREAD_MUTEX_INITIALIZER
#define COND_INIT PTHREAD_COND_INITIALIZER
static void lock(lock_t *l) { pthread_mutex_lock(l); }
static void unlock(lock_t *l) { pthread_mutex_unlock(l); }
static int try_lock(lock_t *l) { return pthread_mutex_trylock(l) == 0; }
static void wait(cond_t *c, lock_t *l) { pthread_cond_wait(c, l); }
static void wake_all(cond_t *c) { pthread_cond_broadcast(c); }
static void yield_core(void) { sched_yield(); }
static int64_t load(volatile int64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store(volatile int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static void add(volatile int64_t *p, int64_t v) { __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
static int swap_if(volatile int64_t *p, int64_t expected, int64_t desired)
{
    return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}
#endif

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#include <immintrin.h>
#define PAUSE() _mm_pause()
#elif (defined(__aarch64__) || defined(__arm__)) && (defined(__GNUC__) || defined(__clang__))
#define PAUSE() __asm__ __volatile__("yield")
#else
#define PAUSE() ((void)0)
#endif

typedef struct job {
    convt_task task;
    void *context;
    ptrdiff_t items;
    int threads;
} job_t;

static struct {
    lock_t lock;          /* guards job, generation and workers */
    cond_t wake;          /* signalled when a job is posted */
    lock_t busy;          /* held by the caller of the running job */
    job_t job;
    volatile int64_t generation;  /* of the last job posted (spinning workers read it) */
    int workers;
} pool = {LOCK_INIT, COND_INIT, LOCK_INIT, {0, 0, 0, 0}, 0, 0};

static volatile int64_t ticket;        /* generation << 32 | next item */
static volatile int64_t finished;      /* items of the current job that have run */
static volatile int64_t participants;  /* threads that ran one of its items */

/* Contention: whether a threaded call's workers would share their cores with
 * other busy threads (convt_pool_contended).  Two signals:
 * - a call whose caller, out of items, waited for the workers' last items
 *   longer than CONTENDED_SHARE of the call (and CONTENDED_MIN_SECONDS) had a
 *   worker descheduled in the middle of an item: the pool is contended for
 *   CONTENDED_SECONDS, doubled for each such call in a row (`strikes`, up to
 *   CONTENDED_MAX_STRIKES); a threaded call without a long wait starts over.
 *   Jobs of fewer than CONTENDED_MIN_ITEMS items are not judged: their last
 *   item is a large share of the call even on an idle machine.  A descheduled
 *   thread waits a scheduler slice, milliseconds, while waking a halted vCPU of
 *   an idle VM takes up to a few hundred microseconds, which must not count;
 * - where the OS tells (Linux: /proc/loadavg, read at most every
 *   RUNNABLE_CHECK_SECONDS), the threads runnable on the machine besides the
 *   caller and the pool's workers, at the last two readings: if
 *   they and the call's threads outnumber the online CPUs, a worker would wait
 *   for a core. */
#define CONTENDED_SHARE 0.3
#define CONTENDED_MIN_SECONDS 500e-6
#define CONTENDED_SECONDS 1.0
#define CONTENDED_MAX_STRIKES 5
#define CONTENDED_MIN_ITEMS 4
#define RUNNABLE_CHECK_SECONDS 0.02
static int strikes;                          /* contended calls in a row */
static volatile double contended_until = -1.0;
static double runnable_checked = -1.0;       /* when `others_runnable` was last read */
static int others_runnable[2] = {-1, -1};    /* other threads runnable at the last two
                                                readings (-1: unknown) */

/* The next item of job `generation`, or -1 when there is none left. */
static ptrdiff_t claim(int64_t generation, ptrdiff_t items)
{
    for (;;) {
        int64_t now = load(&ticket);
        ptrdiff_t item = (ptrdiff_t)(now & 0xffffffff);
        if ((now >> 32) != (generation & 0x7fffffff) || item >= items) return -1;
        if (swap_if(&ticket, now, now + 1)) return item;
    }
}

static void run_claims(const job_t *job, int64_t generation, int slot)
{
    ptrdiff_t item;
    int ran = 0;
    while ((item = claim(generation, job->items)) >= 0) {
        job->task(job->context, item, slot);
        add(&finished, 1);
        ran = 1;
    }
    if (ran) add(&participants, 1);
}

static void serve(int slot)
{
    int64_t seen = 0;
    for (;;) {
        job_t job;
        int64_t generation;
        int spins;
        for (spins = 0; spins < WORKER_SPINS && load(&pool.generation) == seen; ++spins)
            PAUSE();  /* a call in a loop posts the next job within microseconds */
        lock(&pool.lock);
        while (pool.generation == seen) wait(&pool.wake, &pool.lock);
        seen = generation = pool.generation;
        job = pool.job;
        unlock(&pool.lock);
        if (slot < job.threads) run_claims(&job, generation, slot);
    }
}

#ifdef CONVT_WINDOWS_THREADS
static DWORD WINAPI worker_main(LPVOID slot)
{
    serve((int)(intptr_t)slot);
    return 0;
}

static int start_worker(int slot)
{
    HANDLE thread = CreateThread(NULL, 0, worker_main, (LPVOID)(intptr_t)slot, 0, NULL);
    if (thread == NULL) return 0;
    CloseHandle(thread);
    return 1;
}

static void exclude_caller_cpu(void) {}
#else
static void *worker_main(void *slot)
{
    /* signals are for the caller's thread: Python runs its handlers there */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    serve((int)(intptr_t)slot);
    return NULL;
}

#if defined(__linux__)
static pthread_t worker_threads[MAX_WORKERS + 1];
static int excluded_cpu = -1;  /* the caller's CPU the workers' affinity leaves out */

/* Keep the workers off the caller's CPU; call with pool.lock held. */
static void exclude_caller_cpu(void)
{
    int cpu = sched_getcpu(), w;
    cpu_set_t allowed;
    if (cpu < 0 || cpu == excluded_cpu || pool.workers == 0) return;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || !CPU_ISSET(cpu, &allowed)) return;
    CPU_CLR(cpu, &allowed);
    if (CPU_COUNT(&allowed) == 0) return;  /* the caller may use one CPU only */
    for (w = 1; w <= pool.workers; ++w)
        pthread_setaffinity_np(worker_threads[w], sizeof allowed, &allowed);
    excluded_cpu = cpu;
}
#else
static void exclude_caller_cpu(void) {}
#endif

static int start_worker(int slot)
{
    pthread_t thread;
    pthread_attr_t attributes;
    int started;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    started = pthread_create(&thread, &attributes, worker_main, (void *)(intptr_t)slot) == 0;
#if defined(__linux__)
    if (started) {
        worker_threads[slot] = thread;
        excluded_cpu = -1;  /* the new worker has the whole mask */
    }
#endif
    pthread_attr_destroy(&attributes);
    return started;
}

/* A forked child has none of the parent's threads: it starts a pool of its own. */
static void forget_workers(void)
{
    static const lock_t fresh_lock = LOCK_INIT;
    static const cond_t fresh_cond = COND_INIT;
    pool.lock = fresh_lock;
    pool.busy = fresh_lock;
    pool.wake = fresh_cond;
    pool.workers = 0;
#if defined(__linux__)
    excluded_cpu = -1;
#endif
}
#endif

/* At least `wanted` workers (as many as could be started); call with pool.lock held. */
static void grow(int wanted)
{
#ifndef CONVT_WINDOWS_THREADS
    if (pool.workers == 0) {
        static int registered = 0;
        if (!registered) registered = pthread_atfork(NULL, NULL, forget_workers) == 0;
    }
#endif
    if (wanted > MAX_WORKERS) wanted = MAX_WORKERS;
    while (pool.workers < wanted && start_worker(pool.workers + 1)) pool.workers++;
}

int convt_run(convt_task task, void *context, ptrdiff_t items, int threads)
{
    job_t job;
    int64_t generation;
    int spins = 0;
    ptrdiff_t item;
    double start, waited;
    if (threads > items) threads = (int)items;
    if (items > 0x7fffffff) threads = 1;  /* the ticket counts items in 31 bits */
    if (threads <= 1 || !try_lock(&pool.busy)) {
        for (item = 0; item < items; ++item) task(context, item, 0);
        return 1;
    }
    job.task = task;
    job.context = context;
    job.items = items;
    lock(&pool.lock);
    grow(threads - 1);
    exclude_caller_cpu();
    job.threads = threads <= pool.workers + 1 ? threads : pool.workers + 1;
    pool.job = job;
    generation = (pool.generation + 1) & 0x7fffffff;
    generation += generation == 0;  /* workers start having seen generation 0 */
    store(&finished, 0);
    store(&participants, 0);
    store(&ticket, generation << 32);
    store(&pool.generation, generation);
    wake_all(&pool.wake);
    unlock(&pool.lock);
    start = convt_seconds();
    run_claims(&job, generation, 0);
    /* only items other threads claimed are still running */
    waited = 0.0;
    if (load(&finished) < items) {
        double out_of_items = convt_seconds();
        while (load(&finished) < items) {
            if (++spins < CALLER_SPINS) PAUSE();
            else yield_core();
        }
        waited = convt_seconds() - out_of_items;
    }
    if (items >= CONTENDED_MIN_ITEMS) {
        double end = convt_seconds();
        if (waited > CONTENDED_MIN_SECONDS && waited > CONTENDED_SHARE * (end - start)) {
            if (strikes < CONTENDED_MAX_STRIKES) ++strikes;
            contended_until = end + CONTENDED_SECONDS * (double)(1 << (strikes - 1));
        } else {
            strikes = 0;
        }
    }
    threads = (int)load(&participants);
    unlock(&pool.busy);
    return threads;
}

#if defined(__linux__)
#include <fcntl.h>
#include <unistd.h>
/* Threads runnable on the machine now, the calling one included (the fourth
 * field of /proc/loadavg, "0.52 0.58 0.59 3/151 12345"), or -1 when unknown.
 * The file stays open: one pread per reading, a few microseconds. */
static int runnable_threads(void)
{
    static int fd = -2;
    char text[128];
    ssize_t length;
    int field = 0, running = 0, digits = 0;
    const char *c;
    if (fd == -2) fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    length = pread(fd, text, sizeof text - 1, 0);
    if (length <= 0) return -1;
    text[length] = 0;
    for (c = text; *c && field < 3; ++c)
        if (*c == ' ') ++field;
    for (; *c >= '0' && *c <= '9'; ++c, ++digits) running = 10 * running + (*c - '0');
    return field == 3 && digits > 0 && *c == '/' ? running : -1;
}
static int online_cpus(void) { return (int)sysconf(_SC_NPROCESSORS_ONLN); }
#else
static int runnable_threads(void) { return -1; }
static int online_cpus(void) { return -1; }
#endif

int convt_pool_contended(int threads)
{
    double now = convt_seconds();
    int others;
    if (now < contended_until) return 1;
    if (now - runnable_checked > RUNNABLE_CHECK_SECONDS) {
        int running = runnable_threads();
        runnable_checked = now;
        others_runnable[0] = others_runnable[1];
        /* every worker counts as ours, asleep or not: a worker between waking
         * and sleeping is runnable, and must never pass for another program */
        others_runnable[1] = running < 0 ? -1 : running - 1 - pool.workers;
    }
    /* both of the last two readings: a kernel thread runnable for a moment is no load */
    others = others_runnable[0] < others_runnable[1] ? others_runnable[0] : others_runnable[1];
    return others >= 0 && others + threads > online_cpus();
}

int convt_pool_workers(void)
{
    int workers;
    lock(&pool.lock);
    workers = pool.workers;
    unlock(&pool.lock);
    return workers;
}

int convt_pool_available(void) { return 1; }

double convt_seconds(void)
{
#ifdef CONVT_WINDOWS_THREADS
    static LARGE_INTEGER frequency;
    LARGE_INTEGER now;
    if (frequency.QuadPart == 0) QueryPerformanceFrequency(&frequency);
    QueryPerformanceCounter(&now);
    return (double)now.QuadPart / (double)frequency.QuadPart;
#else
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
#endif
}
