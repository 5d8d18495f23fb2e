/*
 * coll_gpuring_request.c -- the MPI request of a non-blocking call gpuring
 * runs (MPI_Iallreduce).
 *
 * The communicator's worker thread (gpuring_async.c) runs the call and says
 * it ended through mca_coll_gpuring_request_done, which only files the
 * request on a list: Open MPI's request completion is not safe from a
 * thread outside MPI when the application asked for less than
 * MPI_THREAD_MULTIPLE.  An opal_progress callback, registered at the first
 * request, completes the filed requests in the thread that tests or waits
 * (MPI_Test and MPI_Wait progress), with the call's status as the
 * request's error; a failed call's error is logged there, naming the rank
 * and the cause, like a blocking call's.  The data moves without any of
 * this: the worker runs the call whether or not the application polls.
 * While the application polls, the callback runs queued calls itself when
 * the worker is between calls, or yields the core to it.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include "opal/runtime/opal_progress.h"

#include <pthread.h>
#include <sched.h>

static pthread_mutex_t request_lock = PTHREAD_MUTEX_INITIALIZER;
static mca_coll_gpuring_request_t *request_ended; /* filed by the workers */
static int request_nended;                        /* atomic: the list is not empty */
static int request_nrunning;                      /* atomic: started, not ended */
static mca_coll_gpuring_request_t *request_running, *request_running_tail; /* oldest first */
static int request_progress_on;                   /* opal_progress calls request_progress */

OBJ_CLASS_INSTANCE(mca_coll_gpuring_request_t, ompi_request_t, NULL, NULL);

/* The request's end, and with it its hold on the communicator (taken at the call: MPI
 * lets the application free the communicator while the request is pending, and the
 * last release may destroy it here -- so never under request_lock). */
static void request_release(mca_coll_gpuring_request_t *req)
{
    struct ompi_communicator_t *comm = req->super.req_mpi_object.comm;

    OMPI_REQUEST_FINI(&req->super);
    OBJ_RELEASE(req);
    OBJ_RELEASE(comm);
}

/* MPI_Request_free (or the end of MPI_Wait/MPI_Test): a request still
 * running is released when it ends. */
static int request_free(ompi_request_t **rptr)
{
    mca_coll_gpuring_request_t *req = (mca_coll_gpuring_request_t *)*rptr;
    int release;

    pthread_mutex_lock(&request_lock);
    release = REQUEST_COMPLETE(&req->super);
    req->user_freed = !release;
    pthread_mutex_unlock(&request_lock);
    if (release) request_release(req);
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

/* A collective cannot be cancelled (MPI 4.0, 6.12: erroneous): it runs on. */
static int request_cancel(ompi_request_t *request, int complete)
{
    (void)request;
    (void)complete;
    return OMPI_SUCCESS;
}

/* Complete what the workers filed; in an MPI thread (opal_progress). */
static int request_progress(void)
{
    mca_coll_gpuring_request_t *req, *next, *release = NULL;
    int n = 0;

    if (__atomic_load_n(&request_nended, __ATOMIC_ACQUIRE) == 0 &&
        __atomic_load_n(&request_nrunning, __ATOMIC_RELAXED) > 0) {
        /* a caller polling (MPI_Wait spins on opal_progress) must not keep the worker
         * that runs its call off the core: where ranks and their workers outnumber
         * the cores, a spinning wait cost a scheduler slice per call (8 B: 130 us).
         * So it steps the oldest call's communicator itself (one pass, never
         * waiting: this may be any MPI call's progress; the worker naps while MPI
         * threads step), or yields where another thread has the call. */
        gpuring_comm_t *gcomm = NULL;
        struct ompi_communicator_t *comm = NULL;

        /* the communicator held across the step: the call may end meanwhile, its
         * request complete in another thread, and the application free the
         * communicator, which would destroy gcomm under the step */
        pthread_mutex_lock(&request_lock);
        if (request_running != NULL) {
            gcomm = request_running->gcomm;
            comm = request_running->super.req_mpi_object.comm;
            OBJ_RETAIN(comm);
        }
        pthread_mutex_unlock(&request_lock);
        if (gcomm == NULL || gpuring_comm_async_step(gcomm) < 0) sched_yield();
        if (comm != NULL) OBJ_RELEASE(comm);
    }
    if (__atomic_load_n(&request_nended, __ATOMIC_ACQUIRE) == 0) return 0;
    /* one critical section for the batch (request_free reads what completion sets);
     * a failed call's error is logged in it: failures only */
    pthread_mutex_lock(&request_lock);
    req = request_ended;
    request_ended = NULL;
    __atomic_store_n(&request_nended, 0, __ATOMIC_RELEASE);
    for (; req != NULL; req = next, n++) {
        next = req->next;
        if (req->st != GPURING_OK) {
            req->super.req_status.MPI_ERROR =
                mca_coll_gpuring_call_failed(&req->call, req->plane,
                                             req->super.req_mpi_object.comm, req->st);
        }
        if (req->user_freed) { /* MPI_Request_free came first: nobody waits for it */
            req->next = release;
            release = req;
        }
        ompi_request_complete(&req->super, true);
    }
    pthread_mutex_unlock(&request_lock);
    for (; release != NULL; release = next) {
        next = release->next;
        request_release(release);
    }
    return n;
}

/* Off the list of running requests (request_lock held). */
static void request_unlink(mca_coll_gpuring_request_t *req)
{
    if (req->run_prev != NULL) req->run_prev->run_next = req->run_next;
    else request_running = req->run_next;
    if (req->run_next != NULL) req->run_next->run_prev = req->run_prev;
    else request_running_tail = req->run_prev;
    req->run_prev = req->run_next = NULL;
}

mca_coll_gpuring_request_t *mca_coll_gpuring_request_new(const mca_coll_gpuring_module_t *m,
                                                         gpuring_comm_t *gcomm,
                                                         const mca_coll_gpuring_call_t *call,
                                                         gpuring_plane_t plane)
{
    mca_coll_gpuring_request_t *req;
    int on;

    pthread_mutex_lock(&request_lock);
    on = request_progress_on;
    request_progress_on = 1;
    pthread_mutex_unlock(&request_lock);
    if (!on && opal_progress_register(request_progress) != OPAL_SUCCESS) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "cannot register gpuring's request progress with "
                      "Open MPI");
        pthread_mutex_lock(&request_lock);
        request_progress_on = 0;
        pthread_mutex_unlock(&request_lock);
        return NULL;
    }
    req = OBJ_NEW(mca_coll_gpuring_request_t);
    if (req == NULL) return NULL;
    OMPI_REQUEST_INIT(&req->super, false);
    req->super.req_type = OMPI_REQUEST_COLL;
    req->super.req_state = OMPI_REQUEST_ACTIVE;
    req->super.req_free = request_free;
    req->super.req_cancel = request_cancel;
    req->super.req_mpi_object.comm = m->comm;
    OBJ_RETAIN(m->comm); /* (request_release lets go) */
    /* the whole status: MPI_Wait copies it out (a collective is never cancelled,
     * MPI_Test_cancelled must say so) */
    req->super.req_status = ompi_status_empty;
    req->super.req_status.MPI_ERROR = OMPI_SUCCESS;
    req->call = *call;
    req->plane = plane;
    req->st = GPURING_OK;
    req->user_freed = 0;
    req->next = NULL;
    req->gcomm = gcomm;
    pthread_mutex_lock(&request_lock);
    req->run_next = NULL;
    req->run_prev = request_running_tail;
    if (request_running_tail != NULL) request_running_tail->run_next = req;
    else request_running = req;
    request_running_tail = req;
    pthread_mutex_unlock(&request_lock);
    __atomic_fetch_add(&request_nrunning, 1, __ATOMIC_RELAXED);
    return req;
}

void mca_coll_gpuring_request_done(void *ctx, gpuring_status_t st)
{
    mca_coll_gpuring_request_t *req = ctx;

    req->st = st;
    __atomic_fetch_sub(&request_nrunning, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&request_lock);
    request_unlink(req);
    req->next = request_ended;
    request_ended = req;
    __atomic_store_n(&request_nended, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&request_lock);
}

void mca_coll_gpuring_request_drop(mca_coll_gpuring_request_t *req)
{
    __atomic_fetch_sub(&request_nrunning, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&request_lock);
    request_unlink(req);
    pthread_mutex_unlock(&request_lock);
    request_release(req);
}

void mca_coll_gpuring_request_finalize(void)
{
    int on;

    request_progress(); /* (nothing should be left: MPI_Finalize after every wait) */
    pthread_mutex_lock(&request_lock);
    on = request_progress_on;
    request_progress_on = 0;
    pthread_mutex_unlock(&request_lock);
    if (on) opal_progress_unregister(request_progress);
}
