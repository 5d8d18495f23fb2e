/*
 * gpuring_common.c -- status strings, the log line formatter and its sink,
 * monotonic time, the timed spin used by every wait, and the call profile.
 */
#define _GNU_SOURCE /* pthread_clockjoin_np, pthread_timedjoin_np */
#include "common/gpuring_common.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

gpuring_log_config_t gpuring_log_config = {
    .level = GPURING_LOG_WARN,
    .mask = GPURING_SUBSYS_ALL,
    .rank = -1,
    .sink = NULL,
};

const char *gpuring_status_str(gpuring_status_t st)
{
    switch (st) {
    case GPURING_OK: return "success";
    case GPURING_ERR_GENERIC: return "error";
    case GPURING_ERR_NO_MEMORY: return "out of memory";
    case GPURING_ERR_NOT_SUPPORTED: return "not supported";
    case GPURING_ERR_INVALID: return "invalid argument";
    case GPURING_ERR_SYSTEM: return "system call failed";
    case GPURING_ERR_NET: return "network error";
    case GPURING_ERR_TIMEOUT: return "timed out";
    case GPURING_ERR_REMOTE: return "failure on another rank";
    case GPURING_ERR_CUDA: return "cuda error";
    case GPURING_ERR_MISMATCH: return "ranks made different calls";
    case GPURING_ERR_BROKEN: return "the communicator failed earlier";
    }
    return "unknown status";
}

void gpuring_log_set(const gpuring_log_config_t *cfg)
{
    gpuring_log_config = *cfg;
}

static const char *log_level_name(int level)
{
    switch (level) {
    case GPURING_LOG_ERROR: return "error";
    case GPURING_LOG_WARN: return "warn";
    case GPURING_LOG_INFO: return "info";
    case GPURING_LOG_DEBUG: return "debug";
    default: return "trace";
    }
}

void gpuring_log_emit(int level, unsigned subsys, const char *file, int line,
                      const char *fmt, ...)
{
    char msg[1024];
    int off;
    va_list ap;

    (void)subsys;
    off = snprintf(msg, sizeof(msg), "[gpuring rank %d] ", gpuring_log_config.rank);
    if (level != GPURING_LOG_INFO && off >= 0 && (size_t)off < sizeof(msg)) {
        /* info lines are for users; the rest say where they come from */
        const char *base = strrchr(file, '/');
        off += snprintf(msg + off, sizeof(msg) - (size_t)off, "%s %s:%d: ",
                        log_level_name(level), base ? base + 1 : file, line);
    }
    if (off >= 0 && (size_t)off < sizeof(msg)) {
        va_start(ap, fmt);
        vsnprintf(msg + off, sizeof(msg) - (size_t)off, fmt, ap);
        va_end(ap);
    }
    if (gpuring_log_config.sink != NULL) {
        /* one line at a time: the caller, the progress thread and the workers of
         * non-blocking calls all log, and Open MPI's opal_output takes no lock of its
         * own unless the application asked for MPI_THREAD_MULTIPLE */
        static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&sink_lock);
        gpuring_log_config.sink(level, msg);
        pthread_mutex_unlock(&sink_lock);
    } else {
        fprintf(stderr, "%s\n", msg);
    }
}

double gpuring_time_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if defined(HAVE_PTHREAD_MUTEX_CLOCKLOCK) && defined(HAVE_PTHREAD_CLOCKJOIN_NP)
#define COMMON_WAIT_MONOTONIC 1
#define COMMON_WAIT_CLOCK CLOCK_MONOTONIC
#else
#define COMMON_WAIT_MONOTONIC 0
#define COMMON_WAIT_CLOCK CLOCK_REALTIME
#endif

void gpuring_deadline(double seconds, struct timespec *ts)
{
    if (seconds <= 0) seconds = 100.0 * 365 * 24 * 3600;
    clock_gettime(COMMON_WAIT_CLOCK, ts);
    ts->tv_sec += (time_t)seconds;
    ts->tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

int gpuring_mutex_lock_until(pthread_mutex_t *mutex, const struct timespec *deadline)
{
#if COMMON_WAIT_MONOTONIC
    return pthread_mutex_clocklock(mutex, CLOCK_MONOTONIC, deadline);
#else
    return pthread_mutex_timedlock(mutex, deadline);
#endif
}

int gpuring_join_until(pthread_t thread, const struct timespec *deadline)
{
#if COMMON_WAIT_MONOTONIC
    return pthread_clockjoin_np(thread, NULL, CLOCK_MONOTONIC, deadline);
#else
    return pthread_timedjoin_np(thread, NULL, deadline);
#endif
}

/*
 * Polls between clock reads.  Every unsuccessful poll yields: ranks share
 * cores more often than not (oversubscribed tests, a proxy thread beside
 * each rank), and a yield with nobody else runnable costs well under the
 * latency of the peer's step (measured: no loss at 2 ranks on 2 cores, 1.3-1.5x
 * more bandwidth at 4 ranks on 2 cores than with 64 busy polls first).
 */
#define GPURING_SPIN_CLOCK_EVERY 64

/* The segment's size, its pages allocated: 0, or -1 with errno set. */
static int shm_reserve(int fd, size_t len)
{
    struct stat st;
    int rc;

    if (fstat(fd, &st) != 0 || ((size_t)st.st_size < len && ftruncate(fd, (off_t)len) != 0))
        return -1;
    rc = posix_fallocate(fd, 0, (off_t)len);
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) { /* (no fallocate there: as before) */
        errno = rc;
        return -1;
    }
    return 0;
}

int gpuring_shm_map(const char *name, int oflag, size_t len, void **base_p, const char **what_p)
{
    int fd = shm_open(name, O_RDWR | oflag, 0600);

    if (fd < 0) {
        *what_p = "shm_open";
        return -1;
    }
    return gpuring_shm_map_fd(fd, oflag & O_CREAT, len, base_p, what_p);
}

int gpuring_shm_map_fd(int fd, int reserve, size_t len, void **base_p, const char **what_p)
{
    int err;
    void *base;

    if (reserve && shm_reserve(fd, len) != 0) {
        *what_p = "its pages";
    } else {
        base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base != MAP_FAILED) {
            close(fd);
            *base_p = base;
            return 0;
        }
        *what_p = "mmap";
    }
    err = errno;
    close(fd);
    errno = err;
    return -1;
}

unsigned long long gpuring_pid_ns(void)
{
    static unsigned long long ns; /* looked up once (0 again if unknown) */
    struct stat st;

    if (ns == 0 && stat("/proc/self/ns/pid", &st) == 0)
        __atomic_store_n(&ns, (unsigned long long)st.st_ino, __ATOMIC_RELAXED);
    return __atomic_load_n(&ns, __ATOMIC_RELAXED);
}

void gpuring_spin_init(gpuring_spin_t *spin, double timeout_sec)
{
    spin->polls = 0;
    spin->start = 0.0;
    spin->timeout = timeout_sec;
}

static gpuring_wait_progress_fn wait_progress_fn;
static __thread int wait_progress_off; /* a thread of gpuring's own, or inside it */

void gpuring_wait_progress_set(gpuring_wait_progress_fn fn)
{
    __atomic_store_n(&wait_progress_fn, fn, __ATOMIC_RELEASE);
}

void gpuring_wait_progress_thread_off(void)
{
    wait_progress_off = 1;
}

void gpuring_wait_progress(void)
{
    gpuring_wait_progress_fn fn = __atomic_load_n(&wait_progress_fn, __ATOMIC_ACQUIRE);

    if (fn == NULL || wait_progress_off) return;
    wait_progress_off = 1;
    fn();
    wait_progress_off = 0;
}

gpuring_status_t gpuring_spin_tick(gpuring_spin_t *spin)
{
    spin->polls++;
    sched_yield();
    if (spin->timeout > 0 && spin->polls % GPURING_SPIN_CLOCK_EVERY == 0) {
        double now = gpuring_time_sec();
        if (spin->start == 0.0) {
            spin->start = now;
        } else if (now - spin->start > spin->timeout) {
            return GPURING_ERR_TIMEOUT;
        }
    }
    return GPURING_OK;
}

/* ---- where a call's time goes -------------------------------------------- */
int gpuring_prof_on;

static const char *const prof_names[GPURING_PROF_POINTS] = {
    "memkind", "device", "order", "publish", "map", "agree",
    "plan",    "launch", "run",   "close",   "return",
};

/* the call in progress on this thread (points on other threads are not its own) */
static __thread struct {
    int active;
    unsigned passed; /* bit per point */
    double last;
    double sec[GPURING_PROF_POINTS];
} prof_call;

/* the last PROF_KEEP calls of each plane, for medians: a communicator's first
 * call (its setup) and other one-off costs do not move them */
#define PROF_KEEP 4096
#define PROF_NOT_PASSED UINT32_MAX
static struct {
    uint64_t calls;
    uint32_t ns[PROF_KEEP][GPURING_PROF_POINTS];
} prof_kept[2];

void gpuring_prof_begin_(void)
{
    prof_call.active = 1;
    prof_call.passed = 0;
    prof_call.last = gpuring_time_sec();
}

void gpuring_prof_mark_(gpuring_prof_point_t p)
{
    double now;

    if (!prof_call.active) return;
    now = gpuring_time_sec();
    if (!(prof_call.passed & (1u << p))) prof_call.sec[p] = 0.0;
    prof_call.sec[p] += now - prof_call.last;
    prof_call.passed |= 1u << p;
    prof_call.last = now;
}

void gpuring_prof_end_(int plane)
{
    uint32_t *row;

    if (!prof_call.active) return;
    prof_call.active = 0;
    if (plane < 0 || plane > 1) return;
    row = prof_kept[plane].ns[__atomic_fetch_add(&prof_kept[plane].calls, 1, __ATOMIC_RELAXED) %
                              PROF_KEEP];
    for (int p = 0; p < GPURING_PROF_POINTS; p++) {
        const double ns = prof_call.sec[p] * 1e9;
        row[p] = !(prof_call.passed & (1u << p)) ? PROF_NOT_PASSED
                 : ns < (double)(PROF_NOT_PASSED - 1) ? (uint32_t)ns : PROF_NOT_PASSED - 1;
    }
}

static int prof_cmp(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void gpuring_prof_report(int plane, const char *what)
{
    static uint32_t v[PROF_KEEP];
    char line[768];
    int off;
    uint64_t calls;
    size_t kept;

    if (plane < 0 || plane > 1) return;
    calls = __atomic_load_n(&prof_kept[plane].calls, __ATOMIC_RELAXED);
    if (calls == 0) return;
    kept = calls < PROF_KEEP ? (size_t)calls : PROF_KEEP;
    off = snprintf(line, sizeof(line), "profile of %llu blocking calls on %s buffers (the last "
                   "%zu): median us at each point (calls that passed it, where not all):",
                   (unsigned long long)calls, what, kept);
    for (int p = 0; p < GPURING_PROF_POINTS && off > 0 && (size_t)off < sizeof(line); p++) {
        size_t n = 0;

        for (size_t k = 0; k < kept; k++) {
            if (prof_kept[plane].ns[k][p] != PROF_NOT_PASSED) v[n++] = prof_kept[plane].ns[k][p];
        }
        if (n == 0) continue;
        qsort(v, n, sizeof(v[0]), prof_cmp);
        off += snprintf(line + off, sizeof(line) - (size_t)off, " %s %.2f", prof_names[p],
                        (double)v[n / 2] / 1e3);
        if (n != kept && off > 0 && (size_t)off < sizeof(line)) {
            off += snprintf(line + off, sizeof(line) - (size_t)off, " (%zu)", n);
        }
    }
    gpuring_log_emit(GPURING_LOG_INFO, GPURING_SUBSYS_COLL, __FILE__, __LINE__, "%s", line);
}
