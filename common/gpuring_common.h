/*
 * gpuring_common.h -- what every gpuring layer shares: the status type, the
 * check macros, logging with a subsystem mask, monotonic time, and the
 * timed spin-wait used by every wait in the library.
 *
 * Nothing here knows about Open MPI: ompi_coll_gpuring/ installs a log sink
 * that forwards to its opal_output stream; unit tests keep the stderr sink.
 */
#ifndef GPURING_COMMON_H
#define GPURING_COMMON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* a function both the host and the CUDA executors call (nvcc compiles it for both; so
 * does the CUDA CPU runtime's kernel language, test/cudacpu, which marks device code) */
#if defined(__CUDACC__) || defined(CUDACPU_KERNEL_LANGUAGE)
#define GPURING_HOSTDEV __host__ __device__
#else
#define GPURING_HOSTDEV
#endif

/* ---- status ------------------------------------------------------------ */
typedef enum {
    GPURING_OK = 0,
    GPURING_ERR_GENERIC = -1,
    GPURING_ERR_NO_MEMORY = -2,
    GPURING_ERR_NOT_SUPPORTED = -3, /* caller should fall back */
    GPURING_ERR_INVALID = -4,
    GPURING_ERR_SYSTEM = -5,        /* a libc/OS call failed */
    GPURING_ERR_NET = -6,           /* UCX reported an error */
    GPURING_ERR_TIMEOUT = -7,       /* a wait ran past the wait timeout */
    GPURING_ERR_REMOTE = -8,        /* another rank reported a failure */
    GPURING_ERR_CUDA = -9,
    GPURING_ERR_MISMATCH = -10,     /* a peer's step is of another call (count, type, op) */
    GPURING_ERR_BROKEN = -11,       /* an earlier call on the communicator failed (a call
                                     * refused so ran nothing: no kernel, no receive) */
} gpuring_status_t;

const char *gpuring_status_str(gpuring_status_t st);

/* ---- logging ----------------------------------------------------------- */
typedef enum {
    GPURING_LOG_ERROR = 1,
    GPURING_LOG_WARN = 2,
    GPURING_LOG_INFO = 3,
    GPURING_LOG_DEBUG = 4,
    GPURING_LOG_TRACE = 5,
} gpuring_log_level_t;

typedef enum {
    GPURING_SUBSYS_INIT = 1 << 0,
    GPURING_SUBSYS_BOOTSTRAP = 1 << 1,
    GPURING_SUBSYS_GRAPH = 1 << 2,
    GPURING_SUBSYS_TUNING = 1 << 3,
    GPURING_SUBSYS_COLL = 1 << 4,
    GPURING_SUBSYS_KERNEL = 1 << 5,
    GPURING_SUBSYS_PROXY = 1 << 6,
    GPURING_SUBSYS_NET = 1 << 7,
    GPURING_SUBSYS_ALL = 0xff,
} gpuring_subsys_t;

/* A sink receives one finished line (no trailing newline). */
typedef void (*gpuring_log_sink_fn_t)(int level, const char *line);

typedef struct gpuring_log_config {
    int level;                  /* messages at or below this level are emitted */
    unsigned mask;              /* gpuring_subsys_t bits of the info/debug/trace lines
                                   printed (errors and warnings ignore it) */
    int rank;                   /* world rank for the prefix, -1 if unknown */
    gpuring_log_sink_fn_t sink; /* NULL: stderr */
} gpuring_log_config_t;

extern gpuring_log_config_t gpuring_log_config;

void gpuring_log_set(const gpuring_log_config_t *cfg);
void gpuring_log_emit(int level, unsigned subsys, const char *file, int line,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define GPURING_LOG_ENABLED(_lvl, _subsys)                                   \
    ((_lvl) <= gpuring_log_config.level &&                                   \
     ((_lvl) <= GPURING_LOG_WARN || (gpuring_log_config.mask & (_subsys))))

#define GPURING_LOG(_lvl, _subsys, ...)                                      \
    do {                                                                     \
        if (GPURING_LOG_ENABLED(_lvl, _subsys))                              \
            gpuring_log_emit(_lvl, _subsys, __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

#define GPURING_ERROR(_s, ...) GPURING_LOG(GPURING_LOG_ERROR, _s, __VA_ARGS__)
#define GPURING_WARN(_s, ...)  GPURING_LOG(GPURING_LOG_WARN, _s, __VA_ARGS__)
#define GPURING_INFO(_s, ...)  GPURING_LOG(GPURING_LOG_INFO, _s, __VA_ARGS__)
#define GPURING_DEBUG(_s, ...) GPURING_LOG(GPURING_LOG_DEBUG, _s, __VA_ARGS__)
#define GPURING_TRACE(_s, ...) GPURING_LOG(GPURING_LOG_TRACE, _s, __VA_ARGS__)

/* ---- checks ------------------------------------------------------------ */
/* Return the status of _call if it failed (the callee already logged). */
#define GPURING_CHECK(_call)                                                 \
    do {                                                                     \
        gpuring_status_t _st = (_call);                                      \
        if (_st != GPURING_OK) return _st;                                   \
    } while (0)

/* Store the failure in _st and jump to _label. */
#define GPURING_CHECK_GOTO(_call, _st, _label)                               \
    do {                                                                     \
        (_st) = (_call);                                                     \
        if ((_st) != GPURING_OK) goto _label;                                \
    } while (0)

/* ---- time and waits ---------------------------------------------------- */
double gpuring_time_sec(void); /* CLOCK_MONOTONIC seconds */

/* This process's pid namespace (its inode): a pid means something only there (a
 * shared-memory segment's name carries it).  0 if unknown. */
unsigned long long gpuring_pid_ns(void);

/* A POSIX shared-memory segment mapped read-write, len bytes: shm_open(name, oflag)
 * (O_RDWR is implied; O_CREAT, with or without O_EXCL, makes it), and where oflag
 * creates, its pages allocated now -- tmpfs takes any size, and a page it cannot give
 * later, when it is first written, kills the process (SIGBUS); never shrunk, what is
 * written stays.  0 with *base_p; or -1 with errno set and *what_p naming the step
 * that failed ("shm_open", "its pages", "mmap").  The name is never unlinked here:
 * whether it is the caller's to remove is the caller's to say. */
int gpuring_shm_map(const char *name, int oflag, size_t len, void **base_p, const char **what_p);
/* The same on an open segment's fd (closed here either way), its pages allocated now
 * where `reserve`. */
int gpuring_shm_map_fd(int fd, int reserve, size_t len, void **base_p, const char **what_p);

/*
 * Bounded waits for a mutex and for a thread's end, until a deadline of
 * gpuring_deadline (`seconds` from now; seconds <= 0, no bound: a century away):
 * on the monotonic clock (a step of the wall clock neither ends them early nor
 * makes them last), or the wall clock where the C library has no such waits
 * (glibc < 2.31).  0, or the error (ETIMEDOUT).
 */
struct timespec;
void gpuring_deadline(double seconds, struct timespec *ts);
int gpuring_mutex_lock_until(pthread_mutex_t *mutex, const struct timespec *deadline);
int gpuring_join_until(pthread_t thread, const struct timespec *deadline);

/*
 * A timed spin: call gpuring_spin_init() before a wait loop and
 * gpuring_spin_tick() once per unsuccessful poll.  Ticks yield the CPU
 * (ranks are often oversubscribed) and check the clock now and then.  tick() returns GPURING_ERR_TIMEOUT once the timeout has passed;
 * the caller reports who it was waiting for.  timeout <= 0 waits forever.
 */
typedef struct gpuring_spin {
    uint64_t polls;
    double start;
    double timeout;
} gpuring_spin_t;

void gpuring_spin_init(gpuring_spin_t *spin, double timeout_sec);
gpuring_status_t gpuring_spin_tick(gpuring_spin_t *spin);

/*
 * The MPI library's progress while a blocking gpuring call waits for its peers: they
 * may be waiting for this rank's other MPI operations -- a non-blocking call handed to
 * the component below, whose next round only this rank's progress posts; a rendezvous
 * send -- before they make the call (MPI's progress rule: a blocking call in one rank
 * must not keep another's pending operations from completing).  The component sets
 * the function (NULL: none); the waits of an application's thread call
 * gpuring_wait_progress() when they would yield.  Threads of gpuring's own (the worker
 * of non-blocking calls, the progress thread) never drive the MPI library's progress
 * (gpuring_wait_progress_thread_off: the application's thread level may not allow it),
 * and a wait inside it (its callbacks run gpuring's own passes) does not again.
 */
typedef void (*gpuring_wait_progress_fn)(void);
void gpuring_wait_progress_set(gpuring_wait_progress_fn fn);
void gpuring_wait_progress_thread_off(void);
void gpuring_wait_progress(void);

/* ---- where a call's time goes (coll_gpuring_profile) -------------------
 * Points down a blocking call's path, in the order a call passes them; each
 * is charged the time since the point before it in the same call on the
 * same thread; finalize prints the median of each point over the last calls
 * (gpuring_common.c keeps 4096).  Off unless gpuring_prof_on: one load and a
 * branch per point.  A call that returns early (a fallback, an error) is not
 * counted. */
typedef enum gpuring_prof_point {
    GPURING_PROF_MEMKIND, /* the buffers' memory kind (the entry's classification) */
    GPURING_PROF_DEVICE,  /* the communicator and plane ready (set up by a first call),
                             the plane's GPU current */
    GPURING_PROF_ORDER,   /* device: the call ordered after the default stream */
    GPURING_PROF_PUBLISH, /* direct: IPC handles of the buffers exported, allgathered */
    GPURING_PROF_MAP,     /* direct: the peers' buffers mapped, default stream waited for */
    GPURING_PROF_AGREE,   /* direct: every rank ready (an agreement) */
    GPURING_PROF_PLAN,    /* the programs: the plan and the executor's arguments */
    GPURING_PROF_LAUNCH,  /* device: the kernel launched */
    GPURING_PROF_RUN,     /* the data moved: the kernel seen finished, or the host executor */
    GPURING_PROF_CLOSE,   /* direct: the closing agreement */
    GPURING_PROF_RETURN,  /* back to the application (context restored) */
    GPURING_PROF_POINTS
} gpuring_prof_point_t;

extern int gpuring_prof_on;
void gpuring_prof_begin_(void);
void gpuring_prof_mark_(gpuring_prof_point_t p);
void gpuring_prof_end_(int plane);
/* One line for `plane` (0 host, 1 device; named `what`), through the log at
 * info level whatever its verbosity; nothing if no call was counted. */
void gpuring_prof_report(int plane, const char *what);

#define GPURING_PROF_BEGIN()                                                 \
    do {                                                                     \
        if (__builtin_expect(gpuring_prof_on, 0)) gpuring_prof_begin_();     \
    } while (0)
#define GPURING_PROF_MARK(_p)                                                \
    do {                                                                     \
        if (__builtin_expect(gpuring_prof_on, 0)) gpuring_prof_mark_(_p);    \
    } while (0)
#define GPURING_PROF_END(_plane)                                             \
    do {                                                                     \
        if (__builtin_expect(gpuring_prof_on, 0)) gpuring_prof_end_(_plane); \
    } while (0)

/* ---- atomics on the connection counters ---------------------------------- */
#define GPURING_LOAD_ACQUIRE(_p)      __atomic_load_n((_p), __ATOMIC_ACQUIRE)
#define GPURING_STORE_RELEASE(_p, _v) __atomic_store_n((_p), (_v), __ATOMIC_RELEASE)

#define GPURING_CACHELINE 64
#define GPURING_MIN(_a, _b) ((_a) < (_b) ? (_a) : (_b))
#define GPURING_MAX(_a, _b) ((_a) > (_b) ? (_a) : (_b))
#define GPURING_DIV_UP(_a, _b) (((_a) + (_b) - 1) / (_b))

#endif /* GPURING_COMMON_H */
