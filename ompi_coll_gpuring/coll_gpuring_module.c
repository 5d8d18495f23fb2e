/*
 * coll_gpuring_module.c -- the coll/gpuring module of one communicator:
 * comm_query (who we refuse), enable (save and retain what the component
 * below provides: our fallback and our bootstrap transport), disable, and
 * the lazy per-communicator setup at the first call gpuring handles.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"
#include "kernels/exec_cuda.h"

#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include "ompi/errhandler/errcode.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/request/request.h"

static int gpuring_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);
static void params_abandon(mca_coll_gpuring_module_t *m);
static void exchanges_reap(void);
static void exchanges_forget(mca_coll_gpuring_module_t *m);
static int gpuring_module_disable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);

static void gpuring_module_construct(mca_coll_gpuring_module_t *m)
{
    m->comm = NULL;
    memset(&m->prev, 0, sizeof(m->prev));
    m->state = MCA_COLL_GPURING_COMM_NEW;
    m->params = MCA_COLL_GPURING_PARAMS_UNSEEN;
    m->params_req = NULL;
    m->params_all = NULL;
    m->gcomm = NULL;
    memset(&m->stage, 0, sizeof(m->stage));
    m->boot_area = NULL;
    m->boot_area_bytes = 0;
    m->boot_blocking_said = 0;
    m->call_exchanges = 0;
    m->exchanges_adrift = 0;
}

/* Free gpuring's communicator and drop what enable retained.  Idempotent. */
static void gpuring_module_cleanup(mca_coll_gpuring_module_t *m)
{
    params_abandon(m); /* before the component below goes */
    exchanges_reap();
    exchanges_forget(m);
    if (m->gcomm != NULL) {
        gpuring_comm_destroy(m->gcomm); /* (its calls run to their end) */
        m->gcomm = NULL;
    }
    /* the communicator goes (disable) or never had a call (enable): a request left on it
     * is one whose hold MPI_Finalize released */
    if (m->comm != NULL) mca_coll_gpuring_request_comm_gone(m->comm);
#define GPURING_RELEASE_PREV(_slot, _type) \
    if (m->prev._slot##_module != NULL) OBJ_RELEASE(m->prev._slot##_module);
    MCA_COLL_GPURING_COLLS(GPURING_RELEASE_PREV)
#undef GPURING_RELEASE_PREV
    memset(&m->prev, 0, sizeof(m->prev));
    mca_coll_gpuring_stage_area_free(&m->stage);
    free(m->boot_area);
    m->boot_area = NULL;
    m->boot_area_bytes = 0;
}

static void gpuring_module_destruct(mca_coll_gpuring_module_t *m)
{
    gpuring_module_cleanup(m);
}

OBJ_CLASS_INSTANCE(mca_coll_gpuring_module_t, mca_coll_base_module_t, gpuring_module_construct,
                   gpuring_module_destruct);

int mca_coll_gpuring_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return OMPI_SUCCESS;
}

static void gpuring_mpi_errors_ready(void);

mca_coll_base_module_t *mca_coll_gpuring_comm_query(struct ompi_communicator_t *comm,
                                                    int *priority)
{
    mca_coll_gpuring_component_t *c = &mca_coll_gpuring_component;
    mca_coll_gpuring_module_t *m;

    if (gpuring_log_config.rank < 0) { /* the first communicator (MPI_Init's) */
        gpuring_log_config.rank = ompi_comm_rank(&ompi_mpi_comm_world.comm);
        mca_coll_gpuring_own_params();
        gpuring_mpi_errors_ready();
    }
    if (c->priority < 0) return NULL;
    m = OBJ_NEW(mca_coll_gpuring_module_t);
    if (m == NULL) return NULL;
    m->comm = comm;
    mca_coll_gpuring_comm_unnamed(comm, m->unnamed, sizeof(m->unnamed));
    m->super.coll_module_enable = gpuring_module_enable;
    m->super.coll_module_disable = gpuring_module_disable;
    /* every collective goes below, device buffers staged; allreduce,
     * iallreduce, reduce-scatter, allgather, bcast and reduce gpuring runs, except on a
     * single rank (coll/self's memcpy then must not meet device memory either) and on
     * an inter-communicator (coll/inter's and libnbc's neither) */
    mca_coll_gpuring_below_install(&m->super);
    if (OMPI_COMM_IS_INTER(comm)) {
        GPURING_INFO(GPURING_SUBSYS_INIT, "comm %s: an inter-communicator: only device "
                      "buffers staged for the component below", mca_coll_gpuring_comm_name(m));
    } else if (ompi_comm_size(comm) > 1) {
        m->super.coll_allreduce = mca_coll_gpuring_allreduce;
        m->super.coll_iallreduce = mca_coll_gpuring_iallreduce;
        m->super.coll_reduce_scatter_block = mca_coll_gpuring_reduce_scatter_block;
        m->super.coll_reduce_scatter = mca_coll_gpuring_reduce_scatter;
        m->super.coll_allgather = mca_coll_gpuring_allgather;
        m->super.coll_bcast = mca_coll_gpuring_bcast;
        m->super.coll_reduce = mca_coll_gpuring_reduce;
    } else {
        GPURING_DEBUG(GPURING_SUBSYS_INIT, "comm %s: a single rank: only device buffers "
                      "staged for the component below", mca_coll_gpuring_comm_name(m));
    }
    *priority = c->priority;
    return &m->super;
}

#define GPURING_SAVE_PREV(_slot, _type)                                        \
    m->prev._slot = comm->c_coll->coll_##_slot;                                \
    m->prev._slot##_module = comm->c_coll->coll_##_slot##_module;              \
    if (m->prev._slot##_module != NULL) OBJ_RETAIN(m->prev._slot##_module);

static int gpuring_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_gpuring_module_t *m = (mca_coll_gpuring_module_t *)module;

    /* modules are enabled in increasing priority: what is installed now is
     * what gpuring falls back to (allgather: its bootstrap too) */
    MCA_COLL_GPURING_COLLS(GPURING_SAVE_PREV)
    if (m->prev.allreduce == NULL || m->prev.allgather == NULL) {
        GPURING_INFO(GPURING_SUBSYS_INIT,
                     "comm %s: no component below gpuring provides allreduce and allgather; "
                     "gpuring disabled on it",
                     mca_coll_gpuring_comm_name(m));
        gpuring_module_cleanup(m);
        return OMPI_ERROR;
    }
    return OMPI_SUCCESS;
}

/* Called once per function slot gpuring owns before release. */
static int gpuring_module_disable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    (void)comm;
    gpuring_module_cleanup((mca_coll_gpuring_module_t *)module);
    return OMPI_SUCCESS;
}

/* The default slot of each plane: host steps small enough to stay in cache between
 * the copy into a slot and the reduction out of it (measured: 256 KiB moved 1.3x
 * what 512 KiB did at 16 MiB, 2 ranks); device steps large against their fences. */
#define GPURING_HOST_SLOT_BYTES (256 * 1024)
#define GPURING_DEVICE_SLOT_BYTES (512 * 1024)
/* the largest coll_gpuring_slot_size: 8 slots of it per connection and channel is
 * already 512 MiB (and far larger would wrap the FIFO's size) */
#define GPURING_MAX_SLOT_BYTES ((size_t)64 * 1024 * 1024)

/* coll_gpuring_slot_size as a plane's slot: whole 128-byte lines, 0 the default */
static size_t gpuring_slot_bytes(size_t param, size_t plane_default)
{
    return GPURING_DIV_UP(param != 0 ? param : plane_default, (size_t)128) * 128;
}

/*
 * The failures a user can act on get MPI error codes of their own (made once,
 * at the first failure): each in the standard class that fits, with a text
 * MPI_Error_string returns, so an application that prints the error of a
 * failed MPI_Allreduce says what happened even without gpuring's log.
 */
static struct gpuring_mpi_error {
    gpuring_status_t st;
    int mpi_class;
    const char *text;
    int code; /* made by gpuring_mpi_errors_make: the class itself if that failed */
} gpuring_mpi_errors[] = {
    {GPURING_ERR_TIMEOUT, MPI_ERR_OTHER,
     "gpuring: a peer did not make the matching call within coll_gpuring_wait_timeout "
     "(the log names rank, peer, channel and step)", 0},
    {GPURING_ERR_MISMATCH, MPI_ERR_COUNT,
     "gpuring: the ranks' calls differ (count, datatype or op, or the order of calls); "
     "no data of another call was used", 0},
    {GPURING_ERR_REMOTE, MPI_ERR_OTHER,
     "gpuring: another rank gave up on the call (its log says why)", 0},
    {GPURING_ERR_NET, MPI_ERR_OTHER,
     "gpuring: a network operation failed (a peer may have died)", 0},
    {GPURING_ERR_CUDA, MPI_ERR_OTHER, "gpuring: a CUDA operation failed", 0},
    {GPURING_ERR_NO_MEMORY, MPI_ERR_NO_MEM,
     "gpuring: this rank ran out of memory for the call (the log says which memory)", 0},
    {GPURING_ERR_BROKEN, MPI_ERR_OTHER,
     "gpuring: this communicator failed in gpuring (in this call's setup or an earlier "
     "call: the log says why); gpuring refuses further calls on it, on every rank (create "
     "a new communicator to go on)", 0},
};

static void gpuring_mpi_errors_make(void)
{
    for (size_t i = 0; i < sizeof(gpuring_mpi_errors) / sizeof(gpuring_mpi_errors[0]); i++) {
        struct gpuring_mpi_error *e = &gpuring_mpi_errors[i];
        int code = ompi_mpi_errcode_add(e->mpi_class);

        e->code = e->mpi_class;
        if (code > 0 &&
            ompi_mpi_errnum_add_string(code, e->text, (int)strlen(e->text) + 1) == OMPI_SUCCESS)
            e->code = code;
    }
}

/* gpuring's error codes, made once: in MPI_Init (the first communicator's query), on
 * one thread, beside no application's MPI_Add_error_code, and long before MPI_Finalize
 * tears Open MPI's table of codes down (4.1 does so before it closes the coll
 * components: a request that fails inside MPI_Finalize must find its code made) */
static void gpuring_mpi_errors_ready(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, gpuring_mpi_errors_make);
}

int mca_coll_gpuring_status_to_ompi(gpuring_status_t st)
{
    switch (st) {
    case GPURING_OK: return OMPI_SUCCESS;
    case GPURING_ERR_NOT_SUPPORTED: return OMPI_ERR_NOT_SUPPORTED;
    case GPURING_ERR_INVALID: return OMPI_ERR_BAD_PARAM;
    default: break;
    }
    gpuring_mpi_errors_ready();
    for (size_t i = 0; i < sizeof(gpuring_mpi_errors) / sizeof(gpuring_mpi_errors[0]); i++) {
        if (gpuring_mpi_errors[i].st == st) return gpuring_mpi_errors[i].code;
    }
    return OMPI_ERROR;
}

/* ---- bootstrap_mpi transport: the component below and the PML ------------ */
/* An Open MPI result as the bootstrap layer wants it (the MPI error logged). */
static int gpuring_boot_status(mca_coll_gpuring_module_t *m, int rc, const char *what)
{
    if (rc == OMPI_SUCCESS) return GPURING_OK;
    GPURING_ERROR(GPURING_SUBSYS_BOOTSTRAP, "comm %s: %s through the component below "
                  "failed (Open MPI error %d)", mca_coll_gpuring_comm_name(m), what, rc);
    return GPURING_ERR_REMOTE;
}

/*
 * An exchange that has waited `timeout` s (since `start`) for a rank: 1 to wait
 * on (warned), 0 to fail.  A rank of this host that has not made the call yet (the
 * communicator's arrival board: *late_since_p is the board's) is waited for, up to
 * coll_gpuring_arrival_timeout; one whose process has exited, or every rank of this
 * host in the call where the communicator has no other host, is not.  Otherwise an
 * MPI call's first exchange (`first`; the agreement on the parameters is one: it
 * waits for every rank's first call) waits for a rank that has not made the call yet
 * -- every rank that has made it has joined the exchange -- up to the same timeout;
 * a later one has every rank in the call, and waits for a rank that stopped or left
 * the exchanges.
 */
static int boot_wait_on(const mca_coll_gpuring_module_t *m, int first, double start,
                        int timeout, const char *what, double *late_since_p)
{
    const int limit = mca_coll_gpuring_component.arrival_timeout;
    const double waited = gpuring_time_sec() - start;
    const int here = gpuring_comm_exchange_late(m->gcomm, timeout, late_since_p);

    if (here >= 0) return here; /* (a late rank of this host: warned, naming it) */
    if (!first || (limit > 0 && waited >= limit)) return 0;
    GPURING_WARN(GPURING_SUBSYS_BOOTSTRAP, "comm %s: %s has waited %.0f s for a rank that "
                 "has not made this collective call yet: waiting on, up to "
                 "coll_gpuring_arrival_timeout (%d s; 0: no bound), warned every %d s",
                 mca_coll_gpuring_comm_name(m), what, waited, limit, timeout);
    return 1;
}

/*
 * Exchanges given up in flight (the parameters' agreement, a setup exchange or a
 * direct allreduce's agreement: its communicator went, its wait timed out, or a rank
 * of it refuses every call): the component below may still write their memory, so
 * each is kept with its request until that completes, then both freed -- by the next
 * agreement posted or communicator gone (exchanges_reap; the communicators
 * MPI_Finalize frees are the last).  One that never completes (a rank never joined
 * it) stays while the component is loaded.  Until it completes, its communicator's
 * module counts it (exchanges_adrift): this rank has made one MPI_Iallgather more
 * through the component below than some peer.  One given up inside a call holds its
 * communicator till then: a pml whose requests do not (ucx) would free it at
 * MPI_Comm_free, and the next communicator would get its context id -- the stale
 * request would take that one's messages (its setup exchanges timed out, seen), or a
 * peer's stale message would be taken for that one's.
 */
typedef struct exchange_orphan {
    struct exchange_orphan *next;
    ompi_request_t *req;
    void *mem;
    mca_coll_gpuring_module_t *m; /* the module that counts it; NULL once it is gone */
    struct ompi_communicator_t *held; /* retained for it, or NULL */
} exchange_orphan_t;

static exchange_orphan_t *exchange_orphans;
static pthread_mutex_t exchange_orphans_lock = PTHREAD_MUTEX_INITIALIZER;

/* m's exchange given up: its request and memory go to the list (the caller keeps
 * neither); `hold`: inside a call, its communicator is retained till it completes (not
 * as the communicator goes: its last reference is gone). */
static void exchange_orphan(mca_coll_gpuring_module_t *m, ompi_request_t *req, void *mem,
                            int hold)
{
    exchange_orphan_t *o = malloc(sizeof(*o));
    struct ompi_communicator_t *held = hold ? m->comm : NULL;

    if (held != NULL) OBJ_RETAIN(held);
    if (o == NULL) { /* all left to the request, unfreed (held too); m counts it for good */
        __atomic_add_fetch(&m->exchanges_adrift, 1, __ATOMIC_RELEASE);
        return;
    }
    o->req = req;
    o->mem = mem;
    o->m = m;
    o->held = held;
    pthread_mutex_lock(&exchange_orphans_lock);
    o->next = exchange_orphans;
    __atomic_store_n(&exchange_orphans, o, __ATOMIC_RELEASE);
    __atomic_add_fetch(&m->exchanges_adrift, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&exchange_orphans_lock);
}

/* Free the given-up exchanges whose request has completed, and release the
 * communicators they held -- outside the lock: a communicator's last reference runs its
 * modules' cleanup, which reaps too; not once MPI_Finalize began, whose one release of
 * each communicator left may already have destroyed it (one the application freed; a
 * held one it did not free stays at exit).  Reads completion only (no progress: this
 * may run inside the component below's progress, where a communicator's last reference
 * goes). */
static void exchanges_reap(void)
{
    exchange_orphan_t **pp, *done = NULL;

    if (__atomic_load_n(&exchange_orphans, __ATOMIC_ACQUIRE) == NULL) return;
    pthread_mutex_lock(&exchange_orphans_lock);
    for (pp = &exchange_orphans; *pp != NULL;) {
        exchange_orphan_t *o = *pp;

        if (!REQUEST_COMPLETE(o->req)) {
            pp = &o->next;
            continue;
        }
        opal_atomic_rmb(); /* its data before its completion */
        (void)ompi_request_free(&o->req);
        free(o->mem);
        if (o->m != NULL) __atomic_sub_fetch(&o->m->exchanges_adrift, 1, __ATOMIC_RELEASE);
        *pp = o->next;
        o->next = done;
        done = o;
    }
    pthread_mutex_unlock(&exchange_orphans_lock);
    while (done != NULL) {
        exchange_orphan_t *o = done;

        done = o->next;
        if (o->held != NULL && ompi_mpi_state < OMPI_MPI_STATE_FINALIZE_STARTED)
            OBJ_RELEASE(o->held);
        free(o);
    }
}

/* m goes: its exchanges still in flight stay on the list, counted by nobody. */
static void exchanges_forget(mca_coll_gpuring_module_t *m)
{
    if (__atomic_load_n(&m->exchanges_adrift, __ATOMIC_ACQUIRE) == 0) return;
    pthread_mutex_lock(&exchange_orphans_lock);
    for (exchange_orphan_t *o = exchange_orphans; o != NULL; o = o->next) {
        if (o->m == m) o->m = NULL;
    }
    __atomic_store_n(&m->exchanges_adrift, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&exchange_orphans_lock);
}

/* Is one of m's exchanges given up still in flight (a peer has not joined it)? */
static int exchanges_unjoined(mca_coll_gpuring_module_t *m)
{
    if (__atomic_load_n(&m->exchanges_adrift, __ATOMIC_ACQUIRE) == 0) return 0;
    opal_progress(); /* (an MPI call's entry: a peer's late part may be in) */
    exchanges_reap();
    return __atomic_load_n(&m->exchanges_adrift, __ATOMIC_ACQUIRE) > 0;
}

const char *mca_coll_gpuring_below_nb_unpaired(mca_coll_gpuring_module_t *m)
{
    if (exchanges_unjoined(m))
        return "an exchange of gpuring's through the component below (an MPI_Iallgather "
               "of an earlier call that failed here) still waits for a rank that never "
               "joined it";
    if (m->params == MCA_COLL_GPURING_PARAMS_FAILED || m->state == MCA_COLL_GPURING_COMM_FAILED ||
        (m->gcomm != NULL && __atomic_load_n(&m->gcomm->broken, __ATOMIC_ACQUIRE)))
        return "gpuring failed an earlier call on it here, so a peer may have made an "
               "exchange of gpuring's through the component below (an MPI_Iallgather) "
               "that this rank did not, or the other way round";
    return NULL;
}

/* m's agreement on its parameters, given up (m keeps neither request nor memory;
 * `hold`: exchange_orphan's). */
static void params_orphan(mca_coll_gpuring_module_t *m, int hold)
{
    exchange_orphan(m, m->params_req, m->params_all, hold);
    m->params_req = NULL;
    m->params_all = NULL;
}

/* m's setup exchange in its area, given up: the area goes with the request (the next
 * exchange makes a new one). */
static void boot_area_orphan(mca_coll_gpuring_module_t *m, ompi_request_t *req)
{
    exchange_orphan(m, req, m->boot_area, 1); /* the request may still write it */
    m->boot_area = NULL;
    m->boot_area_bytes = 0;
}

/*
 * The setup exchanges (and the direct allreduce's agreements) are the
 * component below's MPI_Iallgather, waited for at most
 * coll_gpuring_wait_timeout (0: without a bound) -- an MPI call's first, for a
 * rank late to the call, coll_gpuring_arrival_timeout (boot_wait_on): a member
 * that never makes the call produces an error on the others, not a hang.  The same
 * collective on every rank whatever its own timeout, so that the timeout may
 * differ between ranks.  A timed-out exchange stays in flight, so it works on
 * a copy of the data that is left to it (with no memory for the copy, on the
 * caller's buffers, without the timeout).
 */
static int gpuring_boot_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes)
{
    mca_coll_gpuring_module_t *m = ctx;
    int timeout = mca_coll_gpuring_component.wait_timeout, size = ompi_comm_size(m->comm);
    const int first = m->call_exchanges++ == 0;
    ompi_request_t *req = MPI_REQUEST_NULL;
    int done = 0, rc;
    double start, deadline, late_since = 0.0;
    char *area;

    if (bytes > INT_MAX) return GPURING_ERR_INVALID;
    /* the area is kept for the next exchange (the direct allreduce makes some per call) */
    if (m->prev.iallgather != NULL && m->boot_area_bytes < bytes * (size_t)(size + 1)) {
        free(m->boot_area);
        m->boot_area_bytes = bytes * (size_t)(size + 1);
        m->boot_area = malloc(m->boot_area_bytes);
        if (m->boot_area == NULL) m->boot_area_bytes = 0;
    }
    if (m->prev.iallgather == NULL) {
        static int warned; /* (once a process; each communicator at verbose 3) */

        if (!m->boot_blocking_said) {
            m->boot_blocking_said = 1;
            if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
                GPURING_WARN(GPURING_SUBSYS_BOOTSTRAP, "comm %s: the component below has no "
                             "MPI_Iallgather (is libnbc in the coll list?): gpuring's setup "
                             "exchanges are its blocking MPI_Allgather, without "
                             "coll_gpuring_wait_timeout: a rank that never comes is waited "
                             "for without a bound", mca_coll_gpuring_comm_name(m));
            else
                GPURING_INFO(GPURING_SUBSYS_BOOTSTRAP, "comm %s: the component below has no "
                             "MPI_Iallgather: gpuring's setup exchanges are its blocking "
                             "MPI_Allgather, without coll_gpuring_wait_timeout",
                             mca_coll_gpuring_comm_name(m));
        }
        return gpuring_boot_status(m, m->prev.allgather(sbuf, (int)bytes, MPI_BYTE, rbuf,
                                                        (int)bytes, MPI_BYTE, m->comm,
                                                        m->prev.allgather_module),
                                   "MPI_Allgather");
    }
    area = m->boot_area;
    if (area == NULL) {
        /* no memory for the copy: the same exchange as the others' (a blocking
         * allgather would not match theirs), on the caller's buffers, which it
         * may write until it completes -- so without the timeout */
        GPURING_WARN(GPURING_SUBSYS_BOOTSTRAP, "comm %s: no memory for a copy of gpuring's "
                     "setup exchange (%zu bytes): it waits without coll_gpuring_wait_timeout",
                     mca_coll_gpuring_comm_name(m), bytes * (size_t)(size + 1));
        timeout = 0;
    } else {
        memcpy(area, sbuf, bytes);
    }
    rc = m->prev.iallgather(area != NULL ? area : sbuf, (int)bytes, MPI_BYTE,
                            area != NULL ? area + bytes : rbuf, (int)bytes, MPI_BYTE, m->comm,
                            &req, m->prev.iallgather_module);
    if (rc != OMPI_SUCCESS) return gpuring_boot_status(m, rc, "MPI_Iallgather");
    start = gpuring_time_sec();
    deadline = start + timeout;
    for (unsigned polls = 1; !done; polls++) {
        rc = ompi_request_test(&req, &done, MPI_STATUS_IGNORE);
        if (rc != OMPI_SUCCESS) {
            /* a request completed in error is left to its caller to free */
            if (req != MPI_REQUEST_NULL) (void)ompi_request_free(&req);
            return gpuring_boot_status(m, rc, "MPI_Iallgather");
        }
        /* (a rank of this host that makes no call any more will not join it either) */
        if (!done && area != NULL && polls % 64 == 0 &&
            gpuring_comm_exchange_refused(m->gcomm) >= 0) {
            boot_area_orphan(m, req);
            return GPURING_ERR_REMOTE;
        }
        if (!done && timeout > 0 && gpuring_time_sec() > deadline) {
            if (boot_wait_on(m, first, start, timeout, "gpuring's exchange", &late_since)) {
                deadline = gpuring_time_sec() + timeout;
                continue;
            }
            GPURING_ERROR(GPURING_SUBSYS_BOOTSTRAP,
                          "comm %s: gpuring's setup exchange (an allgather of %zu bytes "
                          "through the component below) timed out after %.0f s: some rank of "
                          "the communicator has not made this collective call "
                          "(coll_gpuring_%s)", mca_coll_gpuring_comm_name(m), bytes,
                          gpuring_time_sec() - start, first ? "arrival_timeout" : "wait_timeout");
            boot_area_orphan(m, req);
            return GPURING_ERR_TIMEOUT;
        }
    }
    if (area != NULL) memcpy(rbuf, area + bytes, bytes * (size_t)size);
    return GPURING_OK;
}

static const gpuring_bootstrap_ops_t gpuring_boot_ops = {
    .allgather = gpuring_boot_allgather,
};

/* ---- the parameters every rank must share -------------------------------- */
/*
 * Which calls gpuring takes (host_buffers, managed_buffers, agree_memory,
 * nonblocking_setup, direct, direct_ll_size) and how its ranks meet in them
 * (the rest: the exchanges' sizes, the programs, the FIFOs' slots) must be
 * the same on every rank: a rank whose call went below while another's set
 * up gpuring, or ran another program, would wait for it.  The others are each
 * rank's own: logging, wait_timeout, the stream sizes, UCX's thresholds and
 * failure detection, zero copy, where NET slots live, the IPC cache, staging.
 */
static const char *const params_names[] = {
    "host_buffers", "managed_buffers", "agree_memory", "nonblocking_setup", "direct",
    "direct_ll_size", "algorithm", "protocol", "nchannels", "device_nchannels",
    "channels_per_call", "chunk_size", "slot_size", "ranks_per_node", "topo_xml",
};
#define PARAMS_N (sizeof(params_names) / sizeof(params_names[0]))

static uint64_t params_hash(const void *p, size_t bytes)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < bytes; i++) h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
    return h;
}

/* This rank's values, in params_names' order (strings as their parsed value, the
 * topology file as its name's hash). */
static void params_values(int64_t v[PARAMS_N])
{
    const mca_coll_gpuring_component_t *c = &mca_coll_gpuring_component;
    const char *xml = c->topo_xml != NULL ? c->topo_xml : "";
    int i = 0;

    v[i++] = c->host_buffers;
    v[i++] = c->managed_buffers;
    v[i++] = c->agree_memory;
    v[i++] = c->nonblocking_setup;
    v[i++] = c->direct;
    v[i++] = (int64_t)c->direct_ll_size;
    v[i++] = gpuring_algo_from_name(c->algorithm);
    v[i++] = gpuring_proto_from_name(c->protocol);
    v[i++] = c->nchannels;
    v[i++] = c->device_nchannels;
    v[i++] = c->channels_per_call;
    v[i++] = (int64_t)c->chunk_size;
    v[i++] = (int64_t)c->slot_size;
    v[i++] = c->ranks_per_node;
    v[i++] = (int64_t)(params_hash(xml, strlen(xml)) >> 1);
}

/* Is parameter k a string (its value sent as a number that names nothing)? */
static int params_is_string(size_t k)
{
    return strcmp(params_names[k], "algorithm") == 0 ||
           strcmp(params_names[k], "protocol") == 0 || strcmp(params_names[k], "topo_xml") == 0;
}

/* Parameter k's value on this rank, as its user gave it. */
static const char *params_value_str(size_t k, const int64_t v[PARAMS_N], char *buf,
                                    size_t len)
{
    const mca_coll_gpuring_component_t *c = &mca_coll_gpuring_component;
    const char *str = strcmp(params_names[k], "algorithm") == 0  ? c->algorithm
                      : strcmp(params_names[k], "protocol") == 0 ? c->protocol
                                                                  : c->topo_xml;

    if (params_is_string(k)) snprintf(buf, len, "'%s'", str != NULL ? str : "");
    else snprintf(buf, len, "%lld", (long long)v[k]);
    return buf;
}

/* The first parameter in which b differs from a. */
static size_t params_first_diff(const int64_t *a, const int64_t *b)
{
    size_t k = 0;

    while (k < PARAMS_N - 1 && a[k] == b[k]) k++;
    return k;
}

/* The ranks' values differ (`all`: every rank's, rank by rank): rank 0 says so
 * as a warning (once per process, then at info level: the parameters are the
 * process's, alike on all its communicators) naming the first rank that
 * differs from it and the parameter; each rank that differs, at info level,
 * its own value. */
static void params_report(mca_coll_gpuring_module_t *m, const int64_t *all)
{
    static int warned;
    const int me = ompi_comm_rank(m->comm), n = ompi_comm_size(m->comm);
    int first = -1, ndiff = 0;
    char mine[80], other[40];
    size_t k;

    for (int r = 1; r < n; r++) {
        if (memcmp(all + (size_t)r * PARAMS_N, all, PARAMS_N * sizeof(int64_t)) == 0) continue;
        ndiff++;
        if (first < 0) first = r;
    }
    if (first < 0) return; /* (cannot be: the caller found a difference) */
    if (me == 0) {
        const int warn = !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED);

        k = params_first_diff(all, all + (size_t)first * PARAMS_N);
        if (params_is_string(k)) snprintf(other, sizeof(other), "another value");
        else snprintf(other, sizeof(other), "%lld", (long long)all[(size_t)first * PARAMS_N + k]);
        GPURING_LOG(warn ? GPURING_LOG_WARN : GPURING_LOG_INFO, GPURING_SUBSYS_INIT,
                    "comm %s: the ranks' coll_gpuring parameters differ: coll_gpuring_%s is "
                    "%s on rank %d of the communicator, %s on this rank (its rank 0); %d of "
                    "its %d ranks differ from rank 0.  Every rank hands all of the "
                    "communicator's collectives to the component below: give every rank the "
                    "same coll_gpuring parameters", mca_coll_gpuring_comm_name(m),
                    params_names[k], other, first, params_value_str(k, all, mine, sizeof(mine)),
                    ndiff, n);
    } else if (memcmp(all + (size_t)me * PARAMS_N, all, PARAMS_N * sizeof(int64_t)) != 0) {
        k = params_first_diff(all, all + (size_t)me * PARAMS_N);
        GPURING_INFO(GPURING_SUBSYS_INIT, "comm %s: this rank (%d of the communicator) has "
                     "coll_gpuring_%s %s, unlike its rank 0: gpuring hands the communicator's "
                     "collectives to the component below", mca_coll_gpuring_comm_name(m), me,
                     params_names[k],
                     params_value_str(k, all + (size_t)me * PARAMS_N, mine, sizeof(mine)));
    }
}

/* The exchange ended (st): ALIKE, DIFFER (reported) or FAILED (logged). */
static void params_settle(mca_coll_gpuring_module_t *m, gpuring_status_t st)
{
    const int n = ompi_comm_size(m->comm);

    if (st != GPURING_OK) {
        GPURING_ERROR(GPURING_SUBSYS_INIT,
                      "comm %s: gpuring's agreement on its parameters failed (%s): %s; every "
                      "later call on the communicator that gpuring would run fails",
                      mca_coll_gpuring_comm_name(m), gpuring_status_str(st),
                      st == GPURING_ERR_NO_MEMORY
                          ? "no memory for it (the other ranks wait for this rank's part)"
                          : "a rank did not join it -- it made another call, or Open MPI "
                            "did not select coll gpuring for it (coll_gpuring_priority, a "
                            "--mca coll list)");
        m->params = MCA_COLL_GPURING_PARAMS_FAILED;
    } else {
        const int64_t *all = m->params_all + PARAMS_N;

        m->params = MCA_COLL_GPURING_PARAMS_ALIKE;
        for (int r = 1; r < n && m->params == MCA_COLL_GPURING_PARAMS_ALIKE; r++) {
            if (memcmp(all + (size_t)r * PARAMS_N, all, PARAMS_N * sizeof(int64_t)) != 0)
                m->params = MCA_COLL_GPURING_PARAMS_DIFFER;
        }
        if (m->params == MCA_COLL_GPURING_PARAMS_DIFFER) params_report(m, all);
    }
    m->params_req = NULL;
    free(m->params_all);
    m->params_all = NULL;
}

/*
 * The exchange is every rank's values (PARAMS_N of 8 bytes: one exchange, so that no
 * rank waits in a second one that a rank which finishes the first at a later call
 * would make only then), through the component below's MPI_Iallgather, which the
 * call that posts it leaves in flight.  Without one, the blocking MPI_Allgather, made
 * only where the caller may wait (`may_wait`).  Posted: one test (progress), the
 * answer settled once it is there.
 */
static void params_start(mca_coll_gpuring_module_t *m, int may_wait)
{
    const int n = ompi_comm_size(m->comm);
    const size_t bytes = PARAMS_N * sizeof(int64_t);
    int rc, done = 0;

    if (m->params == MCA_COLL_GPURING_PARAMS_POSTED) {
        rc = ompi_request_test(&m->params_req, &done, MPI_STATUS_IGNORE);
        if (rc != OMPI_SUCCESS && m->params_req != MPI_REQUEST_NULL)
            (void)ompi_request_free(&m->params_req); /* completed in error: ours to free */
        if (rc != OMPI_SUCCESS || done)
            params_settle(m, gpuring_boot_status(m, rc, "MPI_Iallgather"));
        return;
    }
    if (m->params != MCA_COLL_GPURING_PARAMS_UNSEEN) return;
    exchanges_reap();
    if (n == 1) {
        m->params = MCA_COLL_GPURING_PARAMS_ALIKE;
        return;
    }
    if (m->prev.iallgather == NULL && !may_wait) return;
    m->params_all = malloc(bytes * (size_t)(n + 1));
    if (m->params_all == NULL) { /* a local failure skips the exchange (Left: the others') */
        params_settle(m, GPURING_ERR_NO_MEMORY);
        return;
    }
    params_values(m->params_all);
    if (m->prev.iallgather == NULL) {
        rc = m->prev.allgather(m->params_all, (int)bytes, MPI_BYTE, m->params_all + PARAMS_N,
                               (int)bytes, MPI_BYTE, m->comm, m->prev.allgather_module);
        params_settle(m, gpuring_boot_status(m, rc, "MPI_Allgather"));
        return;
    }
    rc = m->prev.iallgather(m->params_all, (int)bytes, MPI_BYTE, m->params_all + PARAMS_N,
                            (int)bytes, MPI_BYTE, m->comm, &m->params_req,
                            m->prev.iallgather_module);
    if (rc != OMPI_SUCCESS) {
        params_settle(m, gpuring_boot_status(m, rc, "MPI_Iallgather"));
        return;
    }
    m->params = MCA_COLL_GPURING_PARAMS_POSTED;
    m->call_exchanges++; /* (every rank's first call: the first exchange of this one) */
}

void mca_coll_gpuring_params_post(mca_coll_gpuring_module_t *m, int blocking)
{
    params_start(m, blocking);
}

mca_coll_gpuring_params_t mca_coll_gpuring_params_agree(mca_coll_gpuring_module_t *m)
{
    const int timeout = mca_coll_gpuring_component.wait_timeout;
    const double start = gpuring_time_sec();
    double deadline = start + timeout, late_since = 0.0;

    params_start(m, 1);
    while (m->params == MCA_COLL_GPURING_PARAMS_POSTED) {
        if (timeout > 0 && gpuring_time_sec() > deadline) {
            if (boot_wait_on(m, 1, start, timeout, "gpuring's agreement on its parameters",
                             &late_since)) {
                deadline = gpuring_time_sec() + timeout;
                continue;
            }
            GPURING_ERROR(GPURING_SUBSYS_BOOTSTRAP,
                          "comm %s: gpuring's setup exchange (the agreement on its "
                          "parameters: an allgather of %zu bytes through the component "
                          "below) timed out after %.0f s: some rank of the communicator has "
                          "not made its first collective call that reaches gpuring "
                          "(coll_gpuring_arrival_timeout)", mca_coll_gpuring_comm_name(m),
                          PARAMS_N * sizeof(int64_t), gpuring_time_sec() - start);
            params_orphan(m, 1); /* the request may still write its memory */
            params_settle(m, GPURING_ERR_TIMEOUT);
            break;
        }
        params_start(m, 1);
    }
    return m->params;
}

/* The communicator goes: a posted exchange is settled where its answer is there, and
 * otherwise given up in flight (params_orphan: its completion may be what frees the
 * communicator -- the last reference of a request inside the component below's
 * progress, which does not run again while it runs: a wait here would never end). */
static void params_abandon(mca_coll_gpuring_module_t *m)
{
    if (m->params != MCA_COLL_GPURING_PARAMS_POSTED) return;
    params_start(m, 0);
    if (m->params != MCA_COLL_GPURING_PARAMS_POSTED) return;
    GPURING_DEBUG(GPURING_SUBSYS_INIT, "comm %s goes with gpuring's agreement on its "
                  "parameters in flight: its request and memory are freed once it completes",
                  mca_coll_gpuring_comm_name(m));
    params_orphan(m, 0);
    m->params = MCA_COLL_GPURING_PARAMS_FAILED;
}

/* One agreed parameter outside its documented range: said, naming it. */
static int param_bad(const mca_coll_gpuring_module_t *m, const char *name, const char *value,
                     const char *range)
{
    GPURING_ERROR(GPURING_SUBSYS_INIT, "comm %s: coll_gpuring_%s is %s, not %s: gpuring "
                  "disabled on it (its collectives go to the component below)",
                  mca_coll_gpuring_comm_name(m), name, value, range);
    return 0;
}

/* The agreed parameters (params_names: the same on every rank, else the call went below)
 * in their documented ranges; otherwise every rank disables gpuring alike. */
static int params_in_range(const mca_coll_gpuring_module_t *m, const gpuring_comm_config_t *cfg)
{
    const mca_coll_gpuring_component_t *c = &mca_coll_gpuring_component;
    const int max = GPURING_MAX_CHANNELS;
    char v[32];
    int ok = 1;

#define PARAM_INT(_ok, _name, _value, _range)                                            \
    if (!(_ok)) {                                                                        \
        snprintf(v, sizeof(v), "%lld", (long long)(_value));                             \
        ok = param_bad(m, _name, v, _range);                                             \
    }
    if ((int)cfg->algo == -2)
        ok = param_bad(m, "algorithm", c->algorithm, "auto, ring, gather or tree");
    if ((int)cfg->proto == -2) ok = param_bad(m, "protocol", c->protocol, "auto, simple or ll");
    PARAM_INT(c->nchannels >= 1 && c->nchannels <= max, "nchannels", c->nchannels, "1-32");
    PARAM_INT(c->device_nchannels >= 0 && c->device_nchannels <= max, "device_nchannels",
              c->device_nchannels, "0-32");
    PARAM_INT(c->channels_per_call >= 0, "channels_per_call", c->channels_per_call,
              "0 or more");
    if (c->slot_size != 0 && (c->slot_size < 64 || c->slot_size > GPURING_MAX_SLOT_BYTES)) {
        snprintf(v, sizeof(v), "%zu", c->slot_size);
        ok = param_bad(m, "slot_size", v, "0 or 64 B to 64 MiB");
    }
    PARAM_INT(c->ranks_per_node >= 0, "ranks_per_node", c->ranks_per_node, "0 or more");
    PARAM_INT(c->direct_ll_size <= GPURING_EXEC_DIRECT_LL_MAX_BYTES, "direct_ll_size",
              c->direct_ll_size, "0-1048576");
#undef PARAM_INT
    return ok;
}

/* The communicator's first gpuring call sets it up (collective: every rank
 * calls it at the same call). */
static gpuring_comm_t *comm_setup(mca_coll_gpuring_module_t *m)
{
    mca_coll_gpuring_component_t *c = &mca_coll_gpuring_component;
    gpuring_bootstrap_t boot = {.ops = &gpuring_boot_ops, .ctx = m,
                                .rank = ompi_comm_rank(m->comm),
                                .size = ompi_comm_size(m->comm), .bad_rank = -1};
    gpuring_comm_config_t cfg = {
        .algo = gpuring_algo_from_name(c->algorithm),
        .proto = gpuring_proto_from_name(c->protocol),
        .nchannels = c->nchannels,
        .device_nchannels = c->device_nchannels,
        .call_nchannels = c->channels_per_call,
        /* whole 128-byte lines: every slot of a FIFO then starts 16-byte aligned,
         * which the kernels' vector accesses need; 0: each plane's default */
        .slot_bytes = {[GPURING_PLANE_HOST] = gpuring_slot_bytes(c->slot_size,
                                                                 GPURING_HOST_SLOT_BYTES),
                       [GPURING_PLANE_DEVICE] = gpuring_slot_bytes(c->slot_size,
                                                                   GPURING_DEVICE_SLOT_BYTES)},
        .chunk_bytes = c->chunk_size,
        .wait_timeout = c->wait_timeout,
        .arrival_timeout = c->arrival_timeout,
        .ranks_per_node = c->ranks_per_node,
        .net_gpu_direct = c->net_gpu_direct,
        .direct = c->direct,
        .direct_ll_bytes = c->direct_ll_size,
        .topo_xml = c->topo_xml,
        .net_peer_failure = c->net_peer_failure,
        .net_rndv_size = c->net_rndv_size,
        .nonblocking_setup = c->nonblocking_setup,
        .stream_bytes = c->stream_size,
        .net_stream_bytes = c->net_stream_size,
        .net_zcopy = c->net_zcopy,
    };
    gpuring_status_t st;
    char desc[256];

    if (!params_in_range(m, &cfg)) {
        m->state = MCA_COLL_GPURING_COMM_DISABLED;
        return NULL;
    }
    st = gpuring_comm_create(&cfg, &boot, &m->gcomm);
    if (st == GPURING_ERR_TIMEOUT || st == GPURING_ERR_BROKEN) {
        GPURING_ERROR(GPURING_SUBSYS_INIT,
                      "comm %s: gpuring setup %s: this call and every later one on the "
                      "communicator fail", mca_coll_gpuring_comm_name(m),
                      st == GPURING_ERR_TIMEOUT
                          ? "timed out waiting for a member (the component below would wait "
                            "for it too)"
                          : "left this rank out of step with the others, logged above (they "
                            "wait in gpuring's setup, not in the component below)");
        m->state = MCA_COLL_GPURING_COMM_FAILED;
        return NULL;
    }
    if (st != GPURING_OK) {
        char why[64];

        if (st == GPURING_ERR_REMOTE && boot.bad_rank >= 0)
            snprintf(why, sizeof(why), "failure on rank %d, whose log says why", boot.bad_rank);
        else
            snprintf(why, sizeof(why), "%s", gpuring_status_str(st));
        GPURING_WARN(GPURING_SUBSYS_INIT,
                     "comm %s: gpuring setup failed (%s); its collectives fall back to the "
                     "component below",
                     mca_coll_gpuring_comm_name(m), why);
        m->state = MCA_COLL_GPURING_COMM_DISABLED;
        return NULL;
    }
    m->state = MCA_COLL_GPURING_COMM_READY;
    gpuring_comm_describe(m->gcomm, desc, sizeof(desc));
    GPURING_INFO(GPURING_SUBSYS_INIT, "comm %s ready: %s", mca_coll_gpuring_comm_name(m), desc);
    return m->gcomm;
}

/* Collective: every rank of the communicator calls it at the same call. */
gpuring_comm_t *mca_coll_gpuring_comm_get(mca_coll_gpuring_module_t *m)
{
    if (m->state != MCA_COLL_GPURING_COMM_NEW) return m->gcomm; /* NULL unless ready */
    return comm_setup(m);
}
