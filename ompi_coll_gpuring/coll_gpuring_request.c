/*
 * coll_gpuring_request.c -- the MPI request of a non-blocking call gpuring
 * runs (MPI_Iallreduce), or answers for (one it hands the component below
 * with its device buffers staged).
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
 *
 * A staged call's request is gpuring's too, over the component below's:
 * the same callback sees the one below complete, frees it, has the results
 * copied back (the caller's end function), and only then completes gpuring's
 * -- so the copy back can never be missed, whichever thread completes the
 * request below (a callback chained on a running request can be: Open MPI
 * reads a request's callback, then marks it complete, without a lock).
 *
 * Both kinds are Open MPI's collective requests (ompi_coll_base_nbc_request_t):
 * the MPI layer keeps a derived datatype or a user op alive on the request a
 * non-blocking collective returns, in that type's fields.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include "ompi/runtime/mpiruntime.h"
#include "opal/runtime/opal_progress.h"

#include <pthread.h>
#include <sched.h>

static pthread_mutex_t request_lock = PTHREAD_MUTEX_INITIALIZER;
static mca_coll_gpuring_request_t *request_ended; /* filed by the workers, newest first */
static mca_coll_gpuring_request_t *request_ready; /* ... taken from there, oldest first */
static int request_nended;                        /* atomic: either list is not empty */
static int request_nrunning;                      /* atomic: started, not ended */
static mca_coll_gpuring_request_t *request_running, *request_running_tail; /* oldest first */
static mca_coll_gpuring_request_t *request_over; /* over the component below's, running */
static int request_nover;                        /* atomic: the list is not empty */

OBJ_CLASS_INSTANCE(mca_coll_gpuring_request_t, ompi_coll_base_nbc_request_t, NULL, NULL);

#define REQ(_r) (&(_r)->super.super) /* its ompi_request_t */

/* ompi_comm_finalize has begun (it destroys MPI_COMM_WORLD first: request_comm_gone) */
static int request_comms_final; /* atomic */

/* The request's end, and with it its hold on the communicator (taken at the call: MPI
 * lets the application free the communicator while the request is pending, and the
 * last release may destroy it here -- so never under request_lock); none where the
 * communicator went first (request_comm_gone).  Once ompi_comm_finalize has run the
 * hold is left: it released the application's reference to a communicator never
 * freed, and the request's, released after that -- as a call ends in gpuring's close
 * -- would destroy it after the communicator table and the PML are gone (and
 * OMPI_REQUEST_FINI would clear a Fortran handle in a table destroyed too). */
static void request_release(mca_coll_gpuring_request_t *req)
{
    struct ompi_communicator_t *comm = REQ(req)->req_mpi_object.comm;
    const int final = __atomic_load_n(&request_comms_final, __ATOMIC_ACQUIRE);
    int gone = req->comm_gone;

    if (final) REQ(req)->req_f_to_c_index = MPI_UNDEFINED;
    OMPI_REQUEST_FINI(REQ(req));
    OBJ_RELEASE(req);
    if (!gone && !final) OBJ_RELEASE(comm);
}

/* A request given to the application has two ends -- its completion, and
 * MPI_Request_free (or the end of MPI_Wait/MPI_Test), in either order and
 * possibly in two threads -- and each marks it once: the second releases it.
 * No lock is held at either: completion runs the request's completion
 * callback (Open MPI's, or one a layer above set), which may free this
 * request or start another one on gpuring. */
static void request_end_mark(mca_coll_gpuring_request_t *req)
{
    if (__atomic_fetch_add(&req->ends, 1, __ATOMIC_ACQ_REL) == 1) request_release(req);
}

static int request_free(ompi_request_t **rptr)
{
    mca_coll_gpuring_request_t *req = (mca_coll_gpuring_request_t *)*rptr;

    *rptr = MPI_REQUEST_NULL;
    request_end_mark(req);
    return OMPI_SUCCESS;
}

/* A collective cannot be cancelled (MPI 4.0, 6.12: erroneous): it runs on. */
static int request_cancel(ompi_request_t *request, int complete)
{
    (void)request;
    (void)complete;
    return OMPI_SUCCESS;
}

/* Complete one (no lock held: request_end_mark); the status set before. */
static void request_complete(mca_coll_gpuring_request_t *req)
{
    ompi_request_complete(REQ(req), true);
    request_end_mark(req);
}

/* The requests over the component below's whose own completed: each one's freed, its
 * end function run (the staged results copied back), then gpuring's completed.  One
 * taken off the list at a time, and finished outside the lock: a completion callback
 * may itself wait for another of them (the progress it makes finds the rest listed). */
static int request_over_progress(void)
{
    mca_coll_gpuring_request_t **at, *req;
    int n = 0, error;

    for (;;) {
        pthread_mutex_lock(&request_lock);
        for (at = &request_over; (req = *at) != NULL && !REQUEST_COMPLETE(req->below);)
            at = &req->next;
        if (req != NULL) *at = req->next;
        __atomic_store_n(&request_nover, request_over != NULL, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&request_lock);
        if (req == NULL) return n;
        /* (its status and the data it wrote read after this: ordered where the CPU would
         * not, as Open MPI's own wait does) */
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        error = req->below->req_status.MPI_ERROR;
        (void)ompi_request_free(&req->below); /* complete: the component below's to reuse */
        error = req->end(req->end_ctx, error);
        REQ(req)->req_status.MPI_ERROR = mca_coll_gpuring_mpi_code(error);
        request_complete(req);
        n++;
    }
}

/* The oldest ended request the workers filed (NULL: none), off the lists: the workers
 * file newest first (request_ended), moved oldest first onto request_ready here, so
 * that requests complete in the order their calls ended -- a communicator's in its
 * calls' order (MPI_Waitany, MPI_Testsome see the older first). */
static mca_coll_gpuring_request_t *request_ended_next(void)
{
    mca_coll_gpuring_request_t *req, *next;

    pthread_mutex_lock(&request_lock);
    if (request_ready == NULL) {
        for (req = request_ended; req != NULL; req = next) {
            next = req->next;
            req->next = request_ready;
            request_ready = req;
        }
        request_ended = NULL;
    }
    req = request_ready;
    if (req != NULL) request_ready = req->next;
    __atomic_store_n(&request_nended, request_ready != NULL || request_ended != NULL,
                     __ATOMIC_RELEASE);
    pthread_mutex_unlock(&request_lock);
    return req;
}

/* Complete what the workers filed (a failed call's error logged: failures only), one
 * at a time outside the lock: a completion callback may wait for the next one. */
static int request_ended_progress(void)
{
    mca_coll_gpuring_request_t *req;
    int n = 0;

    if (__atomic_load_n(&request_nended, __ATOMIC_ACQUIRE) == 0) return 0;
    while ((req = request_ended_next()) != NULL) {
        if (req->st != GPURING_OK) {
            struct ompi_communicator_t *comm = REQ(req)->req_mpi_object.comm;
            char unnamed[MPI_MAX_OBJECT_NAME];

            /* an MPI code: MPI_Waitall and kin hand the status to the application as
             * it is (a blocking call's return the MPI layer translates itself) */
            REQ(req)->req_status.MPI_ERROR = mca_coll_gpuring_mpi_code(mca_coll_gpuring_call_failed(
                &req->call, req->plane,
                req->comm_gone ? req->comm_name
                               : mca_coll_gpuring_comm_label(comm, unnamed, sizeof(unnamed)),
                req->comm_gone ? req->comm_rank : ompi_comm_rank(comm), req->broken, req->st));
        }
        request_complete(req);
        n++;
    }
    return n;
}

/* Complete what the workers filed, and the requests over the component below's that
 * are done; in an MPI thread (opal_progress). */
static int request_progress(void)
{
    int n = 0;

    if (__atomic_load_n(&request_nover, __ATOMIC_ACQUIRE)) n = request_over_progress();

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
            comm = REQ(request_running)->req_mpi_object.comm;
            OBJ_RETAIN(comm);
        }
        pthread_mutex_unlock(&request_lock);
        if (gcomm == NULL || gpuring_comm_async_step(gcomm) < 0) sched_yield();
        if (comm != NULL) OBJ_RELEASE(comm);
    }
    return n + request_ended_progress();
}

static mca_coll_gpuring_progress_t request_progress_cb = {
    .cb = request_progress, .low_priority = 0, .what = "request"};

/* Off the list of running requests (request_lock held). */
static void request_unlink(mca_coll_gpuring_request_t *req)
{
    if (req->run_prev != NULL) req->run_prev->run_next = req->run_next;
    else request_running = req->run_next;
    if (req->run_next != NULL) req->run_next->run_prev = req->run_prev;
    else request_running_tail = req->run_prev;
    req->run_prev = req->run_next = NULL;
}

/* A request, active, on comm (held until its release), with opal_progress calling
 * request_progress from now on; NULL: no memory, or no progress callback. */
static mca_coll_gpuring_request_t *request_make(struct ompi_communicator_t *comm)
{
    mca_coll_gpuring_request_t *req;

    if (!mca_coll_gpuring_progress_on(&request_progress_cb)) return NULL;
    req = OBJ_NEW(mca_coll_gpuring_request_t);
    if (req == NULL) return NULL;
    OMPI_REQUEST_INIT(REQ(req), false);
    REQ(req)->req_type = OMPI_REQUEST_COLL;
    REQ(req)->req_state = OMPI_REQUEST_ACTIVE;
    REQ(req)->req_free = request_free;
    REQ(req)->req_cancel = request_cancel;
    REQ(req)->req_mpi_object.comm = comm;
    OBJ_RETAIN(comm); /* (request_release lets go) */
    /* the whole status: MPI_Wait copies it out (a collective is never cancelled,
     * MPI_Test_cancelled must say so) */
    REQ(req)->req_status = ompi_status_empty;
    REQ(req)->req_status.MPI_ERROR = OMPI_SUCCESS;
    req->ends = 0;
    req->next = NULL;
    req->run_prev = req->run_next = NULL;
    req->below = NULL;
    req->comm_gone = 0;
    return req;
}

mca_coll_gpuring_request_t *mca_coll_gpuring_request_new(const mca_coll_gpuring_module_t *m,
                                                         gpuring_comm_t *gcomm,
                                                         const mca_coll_gpuring_call_t *call,
                                                         gpuring_plane_t plane)
{
    mca_coll_gpuring_request_t *req = request_make(m->comm);

    if (req == NULL) return NULL;
    req->call = *call;
    req->plane = plane;
    req->st = GPURING_OK;
    req->gcomm = gcomm;
    pthread_mutex_lock(&request_lock);
    req->run_prev = request_running_tail;
    if (request_running_tail != NULL) request_running_tail->run_next = req;
    else request_running = req;
    request_running_tail = req;
    pthread_mutex_unlock(&request_lock);
    __atomic_fetch_add(&request_nrunning, 1, __ATOMIC_RELAXED);
    return req;
}

mca_coll_gpuring_request_t *mca_coll_gpuring_request_over_new(struct ompi_communicator_t *comm)
{
    return request_make(comm);
}

void mca_coll_gpuring_request_over_drop(mca_coll_gpuring_request_t *req)
{
    if (req != NULL) request_release(req);
}

ompi_request_t *mca_coll_gpuring_request_over(mca_coll_gpuring_request_t *req,
                                              ompi_request_t *below,
                                              mca_coll_gpuring_request_end_fn_t end, void *ctx)
{
    req->below = below;
    req->end = end;
    req->end_ctx = ctx;
    pthread_mutex_lock(&request_lock);
    req->next = request_over;
    request_over = req;
    __atomic_store_n(&request_nover, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&request_lock);
    return REQ(req);
}

void mca_coll_gpuring_request_done(void *ctx, gpuring_status_t st)
{
    mca_coll_gpuring_request_t *req = ctx;

    req->st = st;
    /* (read now: the communicator may be gone when the request completes) */
    req->broken = __atomic_load_n(&req->gcomm->broken, __ATOMIC_ACQUIRE);
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
    int n = 0;

    /* the calls gpuring ran, ended (gpuring_comm_async_finalize ran them to their end);
     * not those over the component below's, which may be closed by now: they are only
     * counted (nothing should be left: MPI_Finalize after every wait) */
    request_ended_progress();
    pthread_mutex_lock(&request_lock);
    for (mca_coll_gpuring_request_t *req = request_over; req != NULL; req = req->next) n++;
    pthread_mutex_unlock(&request_lock);
    mca_coll_gpuring_progress_off(&request_progress_cb);
    /* (their requests stay: the application may still hold them) */
    if (n > 0) {
        GPURING_WARN(GPURING_SUBSYS_COLL, "MPI_Finalize with %d non-blocking call%s on device "
                     "buffers still running in the component below (never completed with "
                     "MPI_Wait or MPI_Test): %s results never reach device memory; complete "
                     "every request before MPI_Finalize", n, n > 1 ? "s" : "",
                     n > 1 ? "their" : "its");
    }
}

/* Each request on comm in `list` (linked by next, or by run_next): marked gone. */
static void request_list_gone(mca_coll_gpuring_request_t *list, int running,
                              struct ompi_communicator_t *comm)
{
    char unnamed[MPI_MAX_OBJECT_NAME];

    for (mca_coll_gpuring_request_t *req = list; req != NULL;
         req = running ? req->run_next : req->next) {
        if (REQ(req)->req_mpi_object.comm != comm) continue;
        req->comm_gone = 1;
        req->comm_rank = ompi_comm_rank(comm);
        snprintf(req->comm_name, sizeof(req->comm_name), "%s",
                 mca_coll_gpuring_comm_label(comm, unnamed, sizeof(unnamed)));
    }
}

int mca_coll_gpuring_request_comms_final(void)
{
    return __atomic_load_n(&request_comms_final, __ATOMIC_ACQUIRE);
}

void mca_coll_gpuring_request_comm_gone(struct ompi_communicator_t *comm)
{
    if (comm == &ompi_mpi_comm_world.comm && ompi_mpi_state >= OMPI_MPI_STATE_FINALIZE_STARTED)
        __atomic_store_n(&request_comms_final, 1, __ATOMIC_RELEASE);
    /* (a request that completed, and that the application holds, is on no list: after
     * MPI_Finalize nothing can free it) */
    pthread_mutex_lock(&request_lock);
    request_list_gone(request_ended, 0, comm);
    request_list_gone(request_ready, 0, comm);
    request_list_gone(request_over, 0, comm);
    request_list_gone(request_running, 1, comm);
    pthread_mutex_unlock(&request_lock);
}
