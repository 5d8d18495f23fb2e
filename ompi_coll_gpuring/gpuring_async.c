/*
 * gpuring_async.c -- the order of a communicator's calls, blocking and
 * non-blocking, and the worker thread that runs the non-blocking ones.
 *
 * A non-blocking call is prepared in the caller's thread (gpuring_enqueue.c:
 * numbered, planned, its channels set up -- everything that must happen in
 * call order on every rank, and everything that may touch MPI or connect)
 * and queued; the communicator's worker, started at its first non-blocking
 * call, launches the queued calls one after another (the executor, which
 * calls no MPI) and reports each one's end through its done function.  A
 * blocking call waits until the queue is empty and the worker idle, then
 * runs in the caller's thread: calls end in the order they were made, and
 * one call at a time uses the communicator's scratch, LL staging and CUDA
 * stream.  Every executor wait has its timeout, so every queued call ends.
 * A thread that waits for a request may run the oldest queued call itself
 * while the worker is idle (gpuring_comm_async_help): where ranks and their
 * workers outnumber the cores, the waiter would otherwise spin while the
 * worker waits to be scheduled.
 */
#include "kernels/device.h"
#include "ompi_coll_gpuring/gpuring_comm_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct gpuring_async {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t queued;  /* work queued, or stop */
    pthread_cond_t idle;    /* the queue is empty and the worker between calls */
    gpuring_work_t *head, *tail;
    int busy;               /* the worker is running a call */
    int stop;
};

static void *async_worker(void *arg)
{
    gpuring_comm_t *c = arg;
    struct gpuring_async *q = c->async;
    gpuring_work_t *w;
    gpuring_status_t st;

    pthread_mutex_lock(&q->lock);
    for (;;) {
        /* (busy here: a waiting thread runs a call -- gpuring_comm_async_help) */
        while ((q->head == NULL || q->busy) && !q->stop) pthread_cond_wait(&q->queued, &q->lock);
        while (q->busy) pthread_cond_wait(&q->idle, &q->lock); /* stop: after the helper */
        if (q->head == NULL) break; /* stop, nothing left */
        w = q->head;
        q->head = w->next;
        if (q->head == NULL) q->tail = NULL;
        q->busy = 1;
        pthread_mutex_unlock(&q->lock);

        /* CUDA's current device is per thread: this one's, for the plane's GPU */
        st = w->plane == GPURING_PLANE_DEVICE ? gpuring_device_use(c->dev.ordinal) : GPURING_OK;
        if (st != GPURING_OK) __atomic_store_n(&c->broken, 1, __ATOMIC_RELEASE);
        if (st == GPURING_OK) st = gpuring_enqueue_launch(c, w);
        w->done_fn(w->done_ctx, st);
        free(w);

        pthread_mutex_lock(&q->lock);
        q->busy = 0;
        if (q->head == NULL) pthread_cond_broadcast(&q->idle);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

/* The worker, started at the first non-blocking call. */
static gpuring_status_t async_start(gpuring_comm_t *c)
{
    struct gpuring_async *q;
    int rc;

    if (c->async != NULL) return GPURING_OK;
    q = calloc(1, sizeof(*q));
    if (q == NULL) return GPURING_ERR_NO_MEMORY;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->queued, NULL);
    pthread_cond_init(&q->idle, NULL);
    c->async = q;
    rc = pthread_create(&q->thread, NULL, async_worker, c);
    if (rc != 0) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "cannot start the worker thread of non-blocking "
                      "calls: %s", strerror(rc));
        c->async = NULL;
        pthread_cond_destroy(&q->idle);
        pthread_cond_destroy(&q->queued);
        pthread_mutex_destroy(&q->lock);
        free(q);
        return GPURING_ERR_SYSTEM;
    }
    return GPURING_OK;
}

/* Until every queued call has ended. */
static void async_drain(gpuring_comm_t *c)
{
    struct gpuring_async *q = c->async;

    if (q == NULL) return;
    pthread_mutex_lock(&q->lock);
    while (q->head != NULL || q->busy) pthread_cond_wait(&q->idle, &q->lock);
    pthread_mutex_unlock(&q->lock);
}

gpuring_status_t gpuring_async_run(gpuring_comm_t *c, gpuring_plane_t plane,
                                   const gpuring_coll_info_t *info)
{
    gpuring_work_t w; /* a few KiB: the caller's stack holds it */
    gpuring_status_t st;

    async_drain(c);
    st = gpuring_enqueue_prepare(c, plane, info, 0, &w);
    if (st != GPURING_OK || w.done) return st;
    return gpuring_enqueue_launch(c, &w);
}

gpuring_status_t gpuring_async_submit(gpuring_comm_t *c, gpuring_plane_t plane,
                                      const gpuring_coll_info_t *info,
                                      gpuring_comm_done_fn_t done, void *ctx)
{
    struct gpuring_async *q;
    gpuring_work_t *w;
    gpuring_status_t st;

    st = async_start(c);
    if (st != GPURING_OK) return st; /* before the call is numbered: no rank diverges yet */
    w = malloc(sizeof(*w));
    if (w == NULL) {
        /* the call would be numbered on the other ranks: this communicator cannot go on */
        __atomic_store_n(&c->broken, 1, __ATOMIC_RELEASE);
        GPURING_ERROR(GPURING_SUBSYS_COLL, "no memory for a non-blocking call");
        return GPURING_ERR_NO_MEMORY;
    }
    st = gpuring_enqueue_prepare(c, plane, info, 1, w);
    if (st != GPURING_OK || w->done) {
        free(w);
        if (st == GPURING_OK) done(ctx, GPURING_OK);
        return st;
    }
    w->done_fn = done;
    w->done_ctx = ctx;
    w->next = NULL;
    q = c->async;
    pthread_mutex_lock(&q->lock);
    if (q->tail != NULL) {
        q->tail->next = w;
    } else {
        q->head = w;
    }
    q->tail = w;
    pthread_cond_signal(&q->queued);
    pthread_mutex_unlock(&q->lock);
    return GPURING_OK;
}

int gpuring_comm_async_help(gpuring_comm_t *c)
{
    struct gpuring_async *q = c->async;
    gpuring_device_saved_t app = {0, NULL};
    gpuring_work_t *w;
    gpuring_status_t st = GPURING_OK;

    if (q == NULL) return 0;
    pthread_mutex_lock(&q->lock);
    if (q->busy || q->head == NULL) {
        pthread_mutex_unlock(&q->lock);
        return 0;
    }
    w = q->head; /* the oldest, and nothing else runs: the order holds */
    q->head = w->next;
    if (q->head == NULL) q->tail = NULL;
    q->busy = 1;
    pthread_mutex_unlock(&q->lock);

    if (w->plane == GPURING_PLANE_DEVICE) {
        app = gpuring_device_save(); /* the caller's thread: its CUDA context back after */
        st = gpuring_device_use(c->dev.ordinal);
        if (st != GPURING_OK) __atomic_store_n(&c->broken, 1, __ATOMIC_RELEASE);
    }
    if (st == GPURING_OK) st = gpuring_enqueue_launch(c, w);
    if (w->plane == GPURING_PLANE_DEVICE) gpuring_device_restore(app);
    w->done_fn(w->done_ctx, st);
    free(w);

    pthread_mutex_lock(&q->lock);
    q->busy = 0;
    pthread_cond_broadcast(&q->idle);  /* a drain, or a stopping worker */
    pthread_cond_signal(&q->queued);   /* the worker takes the next */
    pthread_mutex_unlock(&q->lock);
    return 1;
}

void gpuring_async_destroy(gpuring_comm_t *c)
{
    struct gpuring_async *q = c->async;

    if (q == NULL) return;
    pthread_mutex_lock(&q->lock);
    q->stop = 1; /* the worker leaves once the queue is empty */
    pthread_cond_signal(&q->queued);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->thread, NULL);
    pthread_cond_destroy(&q->idle);
    pthread_cond_destroy(&q->queued);
    pthread_mutex_destroy(&q->lock);
    free(q);
    c->async = NULL;
}
