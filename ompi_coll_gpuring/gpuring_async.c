/*
 * gpuring_async.c -- the order of a communicator's calls, blocking and
 * non-blocking, and the worker thread that runs the non-blocking ones.
 *
 * A non-blocking call is prepared in the caller's thread (gpuring_enqueue.c:
 * numbered, planned, its channels set up -- everything that must happen in
 * call order on every rank, and everything that may touch MPI or connect)
 * and queued.  The queue's calls run one at a time, in order:
 *   host buffers: the oldest is started and then stepped, one non-blocking
 *     pass at a time (gpuring_enqueue_test), by whichever thread gets to it
 *     first -- the communicator's worker, or an MPI thread that progresses
 *     (gpuring_comm_async_step, from opal_progress: where ranks and their
 *     workers outnumber the cores, the waiter would otherwise spin while the
 *     worker waits to be scheduled).  No thread ever waits inside a pass, so
 *     stepping a call from an unrelated MPI call (an MPI_Recv whose sender
 *     reaches this collective only after that receive) holds nothing up.
 *   device buffers: the worker runs the call to its end (the CUDA executor
 *     waits for its kernel); MPI threads leave it alone.
 * Whoever ends a call reports it through its done function.  A blocking call
 * steps the queue itself until it is empty, then runs in the caller's
 * thread: calls end in the order they were made, and one call at a time
 * uses the communicator's scratch, LL staging and CUDA stream.  Every call
 * has its timeout (a test fails a host call idle that long), so every
 * queued call ends.
 */
#include "kernels/device.h"
#include "ompi_coll_gpuring/gpuring_comm_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gpuring_async {
    gpuring_comm_t *comm;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t queued;  /* work queued, or stop */
    pthread_cond_t idle;    /* the worker ended a device call */
    gpuring_work_t *head, *tail;
    /* the token (atomic): held by the thread in a pass, or by the worker while
     * it runs a device call; only its holder changes `active` (under the lock,
     * so that readers holding the lock see it whole) */
    int stepping;
    gpuring_work_t *active; /* the host call being stepped, off the queue (NULL: none) */
    int busy;               /* the worker runs a device call */
    int stop;
    int sleeping;           /* the worker waits for a signal: nothing to do for a while */
    unsigned long mpi_passes; /* atomic: passes MPI threads tried (gpuring_comm_async_step) */
    gpuring_work_t *spare;  /* atomic: a queue entry for a non-blocking call abandoned for
                             * want of its own (gpuring_async_abandon); taken once, as the
                             * communicator is broken after it (NULL: taken) */
    struct gpuring_async *live_next; /* the process's live workers (async_live_lock) */
};

/* every worker started and not yet joined, for gpuring_comm_async_finalize */
static pthread_mutex_t async_live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gpuring_async *async_live;

/*
 * The worker leaves a host call to the MPI threads that step it (a waiter
 * in MPI_Wait does it at once, with no thread hand-over) and looks again
 * every GPURING_ASYNC_NAP_SEC: when none has tried a pass during its nap,
 * it steps the call itself -- so a call progresses within a nap of its
 * caller going off to compute.  Idle for GPURING_ASYNC_LINGER_SEC, it sleeps
 * until a call is queued; a call queued while it naps wakes nobody.
 */
#define GPURING_ASYNC_NAP_SEC 100e-6
#define GPURING_ASYNC_LINGER_SEC 10e-3

/* Is nothing queued or running?  (lock held) */
static int async_empty(const struct gpuring_async *q)
{
    return q->head == NULL && q->active == NULL && !q->busy;
}

/* Take the oldest queued call off the queue (lock held). */
static gpuring_work_t *async_pop(struct gpuring_async *q)
{
    gpuring_work_t *w = q->head;

    q->head = w->next;
    if (q->head == NULL) q->tail = NULL;
    return w;
}

/* The token: 1 if this thread now holds it. */
static int async_token_take(struct gpuring_async *q)
{
    return !__atomic_exchange_n(&q->stepping, 1, __ATOMIC_ACQUIRE);
}

static void async_token_give(struct gpuring_async *q)
{
    __atomic_store_n(&q->stepping, 0, __ATOMIC_RELEASE);
}

/*
 * One pass on the calling thread, never waiting: start the oldest host call
 * if none runs, test the running one, end it if it ended.  1 if anything
 * moved or ended; 0 if the call waits for its peers; -1 if no pass could be
 * made (another thread is in one or runs a device call, the oldest call is
 * a device call, or nothing is queued).  A pass over a running call takes
 * no lock: only the token.
 */
static int async_step(gpuring_comm_t *c, int by_mpi)
{
    struct gpuring_async *q = c->async;
    gpuring_work_t *w;
    gpuring_status_t st = GPURING_OK;
    int moved = 0, ended = 0;

    if (by_mpi) __atomic_fetch_add(&q->mpi_passes, 1, __ATOMIC_RELAXED);
    if (!async_token_take(q)) return -1;
    w = q->active;
    if (w == NULL) { /* the oldest, if a host call: nothing else runs, the order holds */
        pthread_mutex_lock(&q->lock);
        w = q->head;
        if (w != NULL && w->plane == GPURING_PLANE_HOST) q->active = async_pop(q);
        pthread_mutex_unlock(&q->lock);
        if (q->active == NULL) {
            async_token_give(q);
            return -1;
        }
        moved = 1;
        st = gpuring_enqueue_start(c, w);
        ended = st != GPURING_OK; /* nothing started: nothing to finish */
    }
    if (!ended) {
        int m;

        ended = gpuring_enqueue_test(c, w, &m);
        moved |= m;
        if (ended) st = gpuring_enqueue_finish(c, w);
    }
    if (ended) {
        w->done_fn(w->done_ctx, st);
        free(w);
        pthread_mutex_lock(&q->lock);
        q->active = NULL;
        /* the worker, where it would not look by itself: a device call next, or stop */
        if (q->stop || (q->head != NULL && (q->sleeping || q->head->plane == GPURING_PLANE_DEVICE)))
            pthread_cond_signal(&q->queued);
        pthread_mutex_unlock(&q->lock);
    }
    async_token_give(q);
    return moved || ended;
}

/* The worker runs the oldest call if it is a device call: to its end.  Lock held
 * on entry and return; 1 if it ran one. */
static int async_run_device(gpuring_comm_t *c)
{
    struct gpuring_async *q = c->async;
    gpuring_work_t *w = q->head;
    gpuring_status_t st;

    if (w == NULL || w->plane != GPURING_PLANE_DEVICE || q->active != NULL || !async_token_take(q))
        return 0;
    async_pop(q);
    q->busy = 1;
    pthread_mutex_unlock(&q->lock);

    /* CUDA's current device is per thread: this one's, for the plane's GPU (where it
     * cannot be, the call is one this rank cannot run: launched as abandoned, so that
     * its peers are told -- the abandon kernel reaches them where the thread's device
     * is the plane's still, from its earlier calls; else they wait their timeout) */
    st = gpuring_device_use(c->dev.ordinal);
    if (st != GPURING_OK) w->info.fail = st;
    st = gpuring_enqueue_launch(c, w);
    w->done_fn(w->done_ctx, st);
    free(w);

    pthread_mutex_lock(&q->lock);
    q->busy = 0;
    async_token_give(q);
    pthread_cond_broadcast(&q->idle);
    return 1;
}

/* The worker waits for a signal, at most `sec` seconds (0: no limit).  Lock held. */
static void async_nap(struct gpuring_async *q, double sec)
{
    struct timespec ts;
    double t;

    if (sec <= 0) {
        q->sleeping = 1;
        pthread_cond_wait(&q->queued, &q->lock);
        q->sleeping = 0;
        return;
    }
    t = gpuring_time_sec() + sec;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&q->queued, &q->lock, &ts); /* the cond's clock: monotonic */
}

static void *async_worker(void *arg)
{
    struct gpuring_async *q = arg;
    gpuring_comm_t *c = q->comm; /* (c->async is q by the time a call is queued) */
    double busy_at = gpuring_time_sec(); /* when it last had a call */
    unsigned long passes = 0;            /* MPI threads' passes, at the last look */
    int idle = 0;

    gpuring_wait_progress_thread_off(); /* (the application's thread level may not allow it) */
    pthread_mutex_lock(&q->lock);
    for (;;) {
        const double now = gpuring_time_sec();

        if (q->head == NULL && q->active == NULL) {
            if (q->stop) break;
            async_nap(q, now - busy_at < GPURING_ASYNC_LINGER_SEC ? GPURING_ASYNC_NAP_SEC : 0);
            continue;
        }
        busy_at = now;
        if (async_run_device(c)) continue;
        if (__atomic_load_n(&q->mpi_passes, __ATOMIC_RELAXED) != passes) {
            /* an MPI thread steps it: look again after a nap */
            passes = __atomic_load_n(&q->mpi_passes, __ATOMIC_RELAXED);
            async_nap(q, GPURING_ASYNC_NAP_SEC);
            continue;
        }
        pthread_mutex_unlock(&q->lock);
        if (async_step(c, 0) > 0) {
            idle = 0;
        } else if (++idle > c->spin_polls) { /* the call waits for its peers */
            idle = 0;
            sched_yield();
        }
        pthread_mutex_lock(&q->lock);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

/*
 * The waits for the worker.  Its calls end within their wait timeout, and the arrival
 * timeout they may wait for a late rank (a kernel that will not stop is left running:
 * exec_cuda), so a wait much longer than that means the worker is stuck in a CUDA or
 * UCX call that no timeout of gpuring's reaches: each such wait says so at every
 * ASYNC_REPORT_SEC past the bound, and goes on waiting (the worker owns the
 * communicator's state until it is out).  Where either timeout is 0, a call has no
 * bound, and nothing is said.
 */
#define ASYNC_REPORT_SEC 30.0

/* Seconds after which a wait reports; 0: never. */
static double async_report_after(const gpuring_comm_t *c)
{
    if (c->cfg.wait_timeout <= 0 || c->cfg.arrival_timeout <= 0) return 0;
    return c->cfg.wait_timeout + c->cfg.arrival_timeout + ASYNC_REPORT_SEC;
}

static void async_report(const gpuring_comm_t *c, const char *what, double since)
{
    GPURING_WARN(GPURING_SUBSYS_COLL, "comm uid %llu: %s for %.0f s, past every bound of "
                 "its calls (coll_gpuring_wait_timeout %.0f s, coll_gpuring_arrival_timeout "
                 "%.0f s): the worker thread of its non-blocking calls is stuck in a CUDA or "
                 "UCX call; still waiting", (unsigned long long)c->uid, what,
                 gpuring_time_sec() - since, c->cfg.wait_timeout, c->cfg.arrival_timeout);
}

/* Until the worker's device call ends (lock held; the cond's clock is monotonic), in
 * slices of ASYNC_PROGRESS_SEC between which the MPI library's progress runs (lock
 * open: its callbacks step the queues): the call may wait for peers that wait for this
 * rank's other MPI operations. */
#define ASYNC_PROGRESS_SEC 0.001
static void async_wait_idle(gpuring_comm_t *c, struct gpuring_async *q)
{
    const double since = gpuring_time_sec(), after = async_report_after(c);
    double report = since + (after > 0 ? after : 1e9); /* (no bound: a report never due) */

    while (q->busy) {
        const double until = GPURING_MIN(report, gpuring_time_sec() + ASYNC_PROGRESS_SEC);
        struct timespec ts;

        ts.tv_sec = (time_t)until;
        ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
        if (pthread_cond_timedwait(&q->idle, &q->lock, &ts) != ETIMEDOUT || !q->busy) continue;
        if (gpuring_time_sec() >= report) {
            async_report(c, "a blocking call waits for the device call the worker runs",
                         since);
            report += ASYNC_REPORT_SEC;
        }
        pthread_mutex_unlock(&q->lock);
        gpuring_wait_progress();
        pthread_mutex_lock(&q->lock);
    }
}

/* Stop q's worker once its queue is empty, and join it. */
static void async_join(struct gpuring_async *q)
{
    const double since = gpuring_time_sec();
    double report = async_report_after(q->comm); /* (0: gpuring_deadline's no bound) */

    pthread_mutex_lock(&q->lock);
    q->stop = 1; /* the worker leaves once the queue is empty */
    pthread_cond_signal(&q->queued);
    pthread_mutex_unlock(&q->lock);
    for (;;) {
        struct timespec deadline;

        gpuring_deadline(report, &deadline);
        if (gpuring_join_until(q->thread, &deadline) != ETIMEDOUT) return;
        async_report(q->comm, "the communicator's end waits for its worker thread", since);
        report = ASYNC_REPORT_SEC;
    }
}

/* Off the live list: 1 if it was on it (0: gpuring_comm_async_finalize joined it). */
static int async_unlive(struct gpuring_async *q)
{
    struct gpuring_async **p;
    int found = 0;

    pthread_mutex_lock(&async_live_lock);
    for (p = &async_live; *p != NULL; p = &(*p)->live_next) {
        if (*p == q) {
            *p = q->live_next;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&async_live_lock);
    return found;
}

/* The worker, started at the first non-blocking call. */
static gpuring_status_t async_start(gpuring_comm_t *c)
{
    struct gpuring_async *q;
    pthread_condattr_t attr;
    int rc;

    if (c->async != NULL) return GPURING_OK;
    q = calloc(1, sizeof(*q));
    if (q != NULL) q->spare = malloc(sizeof(*q->spare));
    if (q == NULL || q->spare == NULL) {
        free(q);
        return GPURING_ERR_NO_MEMORY; /* (the caller abandons the call at once) */
    }
    pthread_mutex_init(&q->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* gpuring_time_sec's, for naps */
    pthread_cond_init(&q->queued, &attr);
    pthread_cond_init(&q->idle, &attr);
    pthread_condattr_destroy(&attr);
    q->comm = c;
    rc = pthread_create(&q->thread, NULL, async_worker, q);
    if (rc != 0) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "cannot start the worker thread of non-blocking "
                      "calls: %s", strerror(rc));
        free(q->spare);
        pthread_cond_destroy(&q->idle);
        pthread_cond_destroy(&q->queued);
        pthread_mutex_destroy(&q->lock);
        free(q);
        return GPURING_ERR_SYSTEM;
    }
    pthread_mutex_lock(&async_live_lock);
    q->live_next = async_live;
    async_live = q;
    pthread_mutex_unlock(&async_live_lock);
    /* seen by other MPI threads' passes (gpuring_comm_async_step) only once whole */
    __atomic_store_n(&c->async, q, __ATOMIC_RELEASE);
    return GPURING_OK;
}

/* Until every queued call has ended: the caller steps them itself (the
 * worker may be waiting for a core), and waits while the worker runs a
 * device call. */
static void async_drain(gpuring_comm_t *c)
{
    struct gpuring_async *q = c->async;
    int idle = 0;

    if (q == NULL) return;
    for (;;) {
        pthread_mutex_lock(&q->lock);
        async_wait_idle(c, q);
        if (async_empty(q)) {
            pthread_mutex_unlock(&q->lock);
            return;
        }
        pthread_mutex_unlock(&q->lock);
        if (async_step(c, 1) > 0) {
            idle = 0;
        } else if (++idle > c->spin_polls) {
            idle = 0;
            gpuring_wait_progress(); /* the MPI library's other operations */
            sched_yield(); /* the worker's turn (a device call) or the stepping thread's */
        }
    }
}

/* The call in the caller's thread, once the queue is empty. */
static gpuring_status_t async_run_here(gpuring_comm_t *c, gpuring_plane_t plane,
                                       const gpuring_coll_info_t *info, int nonblocking)
{
    gpuring_work_t w; /* a few KiB: the caller's stack holds it */
    gpuring_status_t st;

    async_drain(c);
    st = gpuring_enqueue_prepare(c, plane, info, nonblocking, &w);
    if (st != GPURING_OK || w.done) return st;
    return gpuring_enqueue_launch(c, &w);
}

gpuring_status_t gpuring_async_run(gpuring_comm_t *c, gpuring_plane_t plane,
                                   const gpuring_coll_info_t *info)
{
    return async_run_here(c, plane, info, 0);
}

/* The prepared call w after every call queued before it: its done function is
 * called once it ended. */
static void async_queue(struct gpuring_async *q, gpuring_work_t *w,
                        gpuring_comm_done_fn_t done, void *ctx)
{
    w->done_fn = done;
    w->done_ctx = ctx;
    w->next = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->tail != NULL) {
        q->tail->next = w;
    } else {
        q->head = w;
    }
    q->tail = w;
    /* a napping worker looks by itself; a device call is only the worker's */
    if (q->sleeping || w->plane == GPURING_PLANE_DEVICE) pthread_cond_signal(&q->queued);
    pthread_mutex_unlock(&q->lock);
}

static void async_abandoned(void *ctx, gpuring_status_t st)
{
    (void)ctx; /* the caller returned the failure when it queued the call */
    (void)st;
}

/*
 * A blocking call is abandoned in the caller's thread, after the calls before it
 * (as its peers run it).  A non-blocking one must not wait for them -- they may
 * need a peer that waits for this rank's next message -- so it goes into the
 * queue behind them, in the spare entry (the worker abandons it in its turn);
 * only where no call can be queued yet (no worker) does it run at once.
 */
gpuring_status_t gpuring_async_abandon(gpuring_comm_t *c, gpuring_plane_t plane,
                                       const gpuring_coll_info_t *info, int nonblocking)
{
    gpuring_work_t *w;
    gpuring_status_t st;

    if (!nonblocking || c->async == NULL) {
        st = async_run_here(c, plane, info, nonblocking);
        return st != GPURING_OK ? st : info->fail; /* (count 0: nothing to tell) */
    }
    w = __atomic_exchange_n(&c->async->spare, NULL, __ATOMIC_ACQ_REL);
    if (w == NULL) return info->fail; /* taken: a call abandoned before this one, still
                                       * queued, fails it on the peers (and here) */
    st = gpuring_enqueue_prepare(c, plane, info, 1, w);
    if (st != GPURING_OK || w->done) {
        free(w);
        return st != GPURING_OK ? st : info->fail;
    }
    async_queue(c->async, w, async_abandoned, NULL);
    return info->fail;
}

/* A non-blocking call this rank cannot queue (`why`): abandoned at once. */
static gpuring_status_t async_submit_failed(gpuring_comm_t *c, gpuring_plane_t plane,
                                            const gpuring_coll_info_t *info,
                                            gpuring_status_t why)
{
    gpuring_coll_info_t failed = *info;

    failed.fail = why;
    return gpuring_async_abandon(c, plane, &failed, 1);
}

gpuring_status_t gpuring_async_submit(gpuring_comm_t *c, gpuring_plane_t plane,
                                      const gpuring_coll_info_t *info,
                                      gpuring_comm_done_fn_t done, void *ctx)
{
    gpuring_work_t *w;
    gpuring_status_t st;

    /* the peers run the call: without a worker or the memory to queue it, this rank
     * abandons it (the worker's failure logged there) */
    st = async_start(c);
    if (st != GPURING_OK) return async_submit_failed(c, plane, info, st);
    w = malloc(sizeof(*w));
    if (w == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "no memory for a non-blocking call: this rank "
                      "gives up on it");
        return async_submit_failed(c, plane, info, GPURING_ERR_NO_MEMORY);
    }
    st = gpuring_enqueue_prepare(c, plane, info, 1, w);
    if (st != GPURING_OK || w->done) {
        free(w);
        if (st == GPURING_OK) done(ctx, GPURING_OK);
        return st;
    }
    async_queue(c->async, w, done, ctx);
    return GPURING_OK;
}

int gpuring_comm_async_step(gpuring_comm_t *c)
{
    return __atomic_load_n(&c->async, __ATOMIC_ACQUIRE) != NULL ? async_step(c, 1) : -1;
}

void gpuring_async_destroy(gpuring_comm_t *c)
{
    struct gpuring_async *q = c->async;

    if (q == NULL) return;
    if (async_unlive(q)) async_join(q);
    pthread_cond_destroy(&q->idle);
    pthread_cond_destroy(&q->queued);
    pthread_mutex_destroy(&q->lock);
    free(q->spare);
    free(q);
    c->async = NULL;
}

int gpuring_comm_async_finalize(void)
{
    struct gpuring_async *q;
    int n = 0;

    for (;;) {
        pthread_mutex_lock(&async_live_lock);
        q = async_live;
        if (q != NULL) async_live = q->live_next;
        pthread_mutex_unlock(&async_live_lock);
        if (q == NULL) return n;
        async_join(q);
        n++;
    }
}
