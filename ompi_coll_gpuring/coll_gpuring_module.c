/*
 * coll_gpuring_module.c -- the coll/gpuring module of one communicator:
 * comm_query (who we refuse), enable (save and retain what the component
 * below provides: our fallback), disable, and the lazy per-communicator setup
 * at the first call gpuring handles -- its exchanges (coll_gpuring_exchange.c)
 * waited for, the parameters' agreement.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"
#include "kernels/exec_cuda.h"

#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include "ompi/errhandler/errcode-internal.h"
#include "ompi/errhandler/errcode.h"

static int gpuring_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);
static void params_abandon(mca_coll_gpuring_module_t *m);
static int gpuring_module_disable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);

static void gpuring_module_construct(mca_coll_gpuring_module_t *m)
{
    m->comm = NULL;
    memset(&m->prev, 0, sizeof(m->prev));
    m->state = MCA_COLL_GPURING_COMM_NEW;
    m->params = MCA_COLL_GPURING_PARAMS_UNSEEN;
    m->params_x = NULL;
    m->params_all = NULL;
    m->gcomm = NULL;
    memset(&m->stage, 0, sizeof(m->stage));
    m->exchanges_made = 0;
    m->call_exchanges = 0;
}

/* Free gpuring's communicator and drop what enable retained.  Idempotent. */
static void gpuring_module_cleanup(mca_coll_gpuring_module_t *m)
{
    params_abandon(m); /* before the component below goes */
    mca_coll_gpuring_exchanges_reap();
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
     * what gpuring falls back to */
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

int mca_coll_gpuring_mpi_code(int rc)
{
    switch (rc) {
    case OMPI_ERR_NOT_SUPPORTED: return MPI_ERR_UNSUPPORTED_OPERATION;
    case OMPI_ERR_BAD_PARAM: return MPI_ERR_ARG;
    case OMPI_ERROR: return MPI_ERR_OTHER;
    default: return ompi_errcode_get_mpi_code(rc);
    }
}

/* ---- bootstrap_mpi transport: gpuring's exchanges, waited for -------------- */
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
    GPURING_WARN(GPURING_SUBSYS_BOOTSTRAP, "comm %s: gpuring's %s has waited %.0f s for a "
                 "rank that has not made this collective call yet: waiting on, up to "
                 "coll_gpuring_arrival_timeout (%d s; 0: no bound), warned every %d s",
                 mca_coll_gpuring_comm_name(m), what, waited, limit, timeout);
    return 1;
}

/* m's agreement on its parameters, given up in flight (m keeps neither the exchange
 * nor its memory; `hold`: mca_coll_gpuring_exchange_orphan's). */
static void params_orphan(mca_coll_gpuring_module_t *m, int hold)
{
    mca_coll_gpuring_exchange_orphan(m->params_x, hold);
    m->params_x = NULL;
    free(m->params_all);
    m->params_all = NULL;
}

/* A wait on one of m's exchanges: what it is ("gpuring's" comes before it in the
 * messages) and where the ranks it waits for would be
 * (its messages), whether it is its call's first (boot_wait_on's `first`) and a step of
 * the numbered call the arrival board names (`of_call`), its clock. */
typedef struct {
    const char *what, *absent;
    int first, of_call;
    unsigned looks;
    double start, deadline, late_since;
} exchange_wait_t;

static exchange_wait_t exchange_wait_begin(const char *what, const char *absent, int first,
                                           int of_call)
{
    const double now = gpuring_time_sec();

    return (exchange_wait_t){.what = what, .absent = absent, .first = first,
                             .of_call = of_call, .start = now,
                             .deadline = now + mca_coll_gpuring_component.wait_timeout};
}

/*
 * The wait on x (of `bytes` per rank), looked at once more after a test found it not
 * complete: GPURING_OK to test again; GPURING_ERR_REMOTE where a message of x failed
 * (it will not complete) or, for a step of the numbered call (`of_call`), a rank of this
 * host refuses the call (a rank that makes no call any more will not join it either),
 * GPURING_ERR_MISMATCH where one makes another call under its number (it waits
 * elsewhere: checked every 64 looks);
 * GPURING_ERR_TIMEOUT, logged naming the missing ranks, past a deadline boot_wait_on
 * does not move on.  On an error the caller gives x up in flight.
 */
static gpuring_status_t exchange_wait_look(mca_coll_gpuring_module_t *m,
                                           mca_coll_gpuring_exchange_t *x, size_t bytes,
                                           exchange_wait_t *w)
{
    const int timeout = mca_coll_gpuring_component.wait_timeout;
    char missing[128];

    if (++w->looks % 64 == 0) {
        gpuring_status_t st = w->of_call ? gpuring_comm_exchange_stop(m->gcomm) : GPURING_OK;

        if (st == GPURING_OK && mca_coll_gpuring_exchange_failed(m, x)) st = GPURING_ERR_REMOTE;
        if (st != GPURING_OK) return st;
    }
    if (timeout <= 0 || gpuring_time_sec() <= w->deadline) return GPURING_OK;
    if (!mca_coll_gpuring_exchange_missing(x, missing, sizeof(missing)))
        return GPURING_OK; /* (complete since the test: the next one ends it) */
    if (boot_wait_on(m, w->first, w->start, timeout, w->what, &w->late_since)) {
        w->deadline = gpuring_time_sec() + timeout;
        return GPURING_OK;
    }
    GPURING_ERROR(GPURING_SUBSYS_BOOTSTRAP,
                  "comm %s: gpuring's %s (an allgather of %zu bytes) timed out after %.0f s: "
                  "%s -- %s (coll_gpuring_%s)", mca_coll_gpuring_comm_name(m), w->what, bytes,
                  gpuring_time_sec() - w->start, missing, w->absent,
                  w->first ? "arrival_timeout" : "wait_timeout");
    return GPURING_ERR_TIMEOUT;
}

int mca_coll_gpuring_exchange_wait(mca_coll_gpuring_module_t *m, const void *mine, void *all,
                                   size_t bytes, const char *what, int of_call)
{
    exchange_wait_t w = exchange_wait_begin(what, "not in this collective call, or stopped "
                                            "in it", m->call_exchanges++ == 0, of_call);
    mca_coll_gpuring_exchange_t *x;
    gpuring_status_t st;

    mca_coll_gpuring_exchanges_reap();
    if ((st = mca_coll_gpuring_exchange_start(m, mine, bytes, &x)) != GPURING_OK) return st;
    for (;;) {
        const int done = mca_coll_gpuring_exchange_test(m, x, all);

        if (done != 0) return done > 0 ? GPURING_OK : done;
        if ((st = exchange_wait_look(m, x, bytes, &w)) != GPURING_OK) {
            mca_coll_gpuring_exchange_orphan(x, 1);
            return st;
        }
    }
}

/* bootstrap_mpi's allgather: a setup exchange, or the direct allreduce's agreement */
static int gpuring_boot_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes,
                                  const char *what)
{
    return mca_coll_gpuring_exchange_wait(ctx, sbuf, rbuf, bytes, what, 1);
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
 * rank's own: logging, profiling, wait_timeout and arrival_timeout, the stream
 * sizes, UCX's thresholds and failure detection, zero copy, where NET slots live,
 * where the progress thread runs, the IPC cache, staging.
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
                      : st == GPURING_ERR_TIMEOUT
                          ? "a rank did not join it -- it made another call, or Open MPI "
                            "did not select coll gpuring for it (coll_gpuring_priority, a "
                            "--mca coll list)"
                          : "a message of it failed, or was another exchange's (above)");
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
    free(m->params_all);
    m->params_all = NULL;
}

/*
 * The exchange is every rank's values (PARAMS_N of 8 bytes: one exchange, so that no
 * rank waits in a second one that a rank which finishes the first at a later call
 * would make only then): gpuring's exchange (coll_gpuring_exchange.c), which the call
 * that posts it leaves in flight.  Posted: one test (progress), the answer settled
 * once it is there.
 */
static void params_start(mca_coll_gpuring_module_t *m)
{
    const int n = ompi_comm_size(m->comm);
    const size_t bytes = PARAMS_N * sizeof(int64_t);
    gpuring_status_t st;

    if (m->params == MCA_COLL_GPURING_PARAMS_POSTED) {
        const int done = mca_coll_gpuring_exchange_test(m, m->params_x, m->params_all + PARAMS_N);

        if (done != 0) {
            m->params_x = NULL; /* (freed) */
            params_settle(m, done > 0 ? GPURING_OK : done);
        }
        return;
    }
    if (m->params != MCA_COLL_GPURING_PARAMS_UNSEEN) return;
    mca_coll_gpuring_exchanges_reap();
    if (n == 1) {
        m->params = MCA_COLL_GPURING_PARAMS_ALIKE;
        return;
    }
    m->params_all = malloc(bytes * (size_t)(n + 1));
    if (m->params_all == NULL) { /* a local failure skips the exchange (Left: the others') */
        mca_coll_gpuring_exchange_skip(m);
        params_settle(m, GPURING_ERR_NO_MEMORY);
        return;
    }
    params_values(m->params_all);
    st = mca_coll_gpuring_exchange_start(m, m->params_all, bytes, &m->params_x);
    if (st != GPURING_OK) {
        params_settle(m, st);
        return;
    }
    m->params = MCA_COLL_GPURING_PARAMS_POSTED;
    m->call_exchanges++; /* (every rank's first call: the first exchange of this one) */
}

void mca_coll_gpuring_params_post(mca_coll_gpuring_module_t *m)
{
    params_start(m);
}

mca_coll_gpuring_params_t mca_coll_gpuring_params_agree(mca_coll_gpuring_module_t *m)
{
    exchange_wait_t w = exchange_wait_begin("setup exchange that agrees on its parameters",
                                            "not in its first collective "
                                            "call that reaches gpuring", 1, 0);

    for (params_start(m); m->params == MCA_COLL_GPURING_PARAMS_POSTED; params_start(m)) {
        const gpuring_status_t st =
            exchange_wait_look(m, m->params_x, PARAMS_N * sizeof(int64_t), &w);

        if (st != GPURING_OK) {
            params_orphan(m, 1);
            params_settle(m, st);
        }
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
    params_start(m);
    if (m->params != MCA_COLL_GPURING_PARAMS_POSTED) return;
    GPURING_DEBUG(GPURING_SUBSYS_INIT, "comm %s goes with gpuring's agreement on its "
                  "parameters in flight: it is freed once it completes",
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
        .progress_bind = c->progress_bind,
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
                          : "failed on this rank, logged above (the others may wait in "
                            "gpuring's setup, not in the component below)");
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
