/*
 * coll_gpuring_exchange.c -- gpuring's own exchanges over a communicator: an
 * allgather of a few bytes per rank (the parameters' agreement, a communicator's
 * setup, the direct allreduce's agreements, coll_gpuring_agree_memory's agreement on
 * the kind of memory), made of the PML's point-to-point messages on tags of gpuring's
 * own.
 *
 * Not the component below's MPI_Iallgather: libnbc numbers a communicator's
 * non-blocking collectives in the order each rank starts them, and Open MPI starts
 * the steps of MPI_Comm_idup's context-id agreement (MPI_Iallreduce) from its
 * progress, at points that differ between ranks.  An exchange of gpuring's made
 * while one was in flight took one number on a rank that had progressed before
 * and another on one that had not, and paired with an agreement step there
 * (MPI_ERR_TRUNCATE in libnbc, the exchange waiting to its timeout: comm_churn's
 * idup_progress case).  On tags of its own an exchange pairs only with gpuring's,
 * and one given up in flight leaves the application's non-blocking collectives in
 * step.
 *
 * The n-th exchange on a communicator (every rank makes them in one order: the
 * order of its collective calls) sends this rank's part to every other rank and
 * receives theirs on tag EXCHANGE_TAG(n): 64 tags in turn, so that a part of one
 * given up in flight is taken by none of the next 63 (the PML matches a source's
 * messages on one tag in order); every part carries its exchange's number and size,
 * and a part of another exchange is an error, not data.  The tags are negative (no
 * application's tag is), and within 24 bits (pml ucx keeps a tag's low 24 bits:
 * -2^23 + 1 .. -2^23 + 64 stay negative there, which an application's MPI_ANY_TAG
 * receive does not match).  libnbc's tags count down from about -30 and reach them
 * after about 8 million non-blocking collectives on one communicator (under pml ucx,
 * every 2^24): one of its calls in flight on such a tag while an exchange of gpuring's
 * on that tag is, on the same communicator, would pair with it.
 *
 * The PML's requests hold their communicator (ob1's, cm's), so an exchange's requests
 * are freed as they complete -- by the next look of their owner, and by gpuring's
 * progress callback, which any MPI call runs: the agreement on the parameters a call
 * leaves in flight must not keep a communicator the application freed alive (only the
 * module's cleanup, which its destruction runs, would have looked at it again).  A
 * request is freed outside the exchanges' lock: its communicator's last reference may
 * go with it, and the cleanup then looks at the module's exchange.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include "ompi/mca/pml/pml.h"
#include "ompi/request/request.h"
#include "ompi/runtime/mpiruntime.h"
#include "opal/runtime/opal_progress.h"

#define EXCHANGE_TAGS 64
#define EXCHANGE_TAG(_seq) (-(1 << 23) + EXCHANGE_TAGS - (int)((_seq) % EXCHANGE_TAGS))
#define EXCHANGE_MAGIC 0x67727865u /* "grxe" */

typedef struct exchange_head {
    uint32_t magic;
    uint32_t seq;   /* the exchange's number on its communicator */
    uint64_t bytes; /* the part's data */
} exchange_head_t;

struct mca_coll_gpuring_exchange {
    struct mca_coll_gpuring_exchange *prev, *next; /* exchanges_posted, while on it */
    int given_up;                            /* its owner gave it up (an orphan) */
    struct ompi_communicator_t *comm;
    struct ompi_communicator_t *held;        /* given up inside a call: retained, or NULL */
    uint32_t seq;
    size_t bytes, part;                      /* part: head and data, 8-byte aligned */
    int size, rank, nreqs, pending;
    int err, err_peer;                       /* the first message that failed (0: none) */
    ompi_request_t **reqs;                   /* each MPI_REQUEST_NULL once taken */
    int *peers;                              /* each request's peer */
    char *mem;                               /* size parts: rank r's at r * part */
};

/* The exchanges with messages in flight, their owners' and given up ones; the given-up
 * ones whose messages all completed, for reap to free; and the lock of their requests
 * (exchange_take) and of both lists. */
static mca_coll_gpuring_exchange_t *exchanges_posted, *exchanges_done;
static pthread_mutex_t exchanges_lock = PTHREAD_MUTEX_INITIALIZER;

#define EXCHANGE_TAKE_MAX 64
#define EXCHANGE_MISSING_LISTED 8 /* ranks a timeout's report names (then "and N more") */

/* Up to max of x's requests that have completed: their status read, taken off x into
 * done[] (exchanges_lock held; the caller frees them after unlocking).  Reads
 * completion only (no progress). */
static int exchange_take(mca_coll_gpuring_exchange_t *x, ompi_request_t **done, int max)
{
    int n = 0;

    for (int i = 0; i < x->nreqs && x->pending > 0 && n < max; i++) {
        ompi_request_t *req = x->reqs[i];

        if (req == MPI_REQUEST_NULL || !REQUEST_COMPLETE(req)) continue;
        opal_atomic_rmb(); /* its data and status before its completion */
        if (req->req_status.MPI_ERROR != OMPI_SUCCESS && x->err == 0) {
            x->err_peer = x->peers[i];
            __atomic_store_n(&x->err, req->req_status.MPI_ERROR, __ATOMIC_RELEASE);
        }
        done[n++] = req;
        x->reqs[i] = MPI_REQUEST_NULL;
        x->pending--;
    }
    return n;
}

/* Is x on exchanges_posted (exchanges_lock held)? */
static int exchange_listed(const mca_coll_gpuring_exchange_t *x)
{
    return x->prev != NULL || exchanges_posted == x;
}

/* x off exchanges_posted (exchanges_lock held); a given-up one onto exchanges_done */
static void exchange_unlink(mca_coll_gpuring_exchange_t *x)
{
    if (x->prev != NULL) x->prev->next = x->next;
    else __atomic_store_n(&exchanges_posted, x->next, __ATOMIC_RELEASE);
    if (x->next != NULL) x->next->prev = x->prev;
    x->prev = x->next = NULL;
    if (x->given_up) {
        x->next = exchanges_done;
        __atomic_store_n(&exchanges_done, x, __ATOMIC_RELEASE);
    }
}

/* The taken requests freed (outside exchanges_lock) -- not once ompi_comm_finalize has
 * run: under ob1 a request holds its communicator, and the last one's release would
 * destroy a communicator after its table (left to exit) */
static void exchange_free_reqs(ompi_request_t **done, int n)
{
    if (mca_coll_gpuring_request_comms_final()) return;
    for (int i = 0; i < n; i++) (void)ompi_request_free(&done[i]);
}

/* x's completed requests taken and freed; 1 where none is left -- x then off the list
 * (its owner's look). */
static int exchange_collect(mca_coll_gpuring_exchange_t *x)
{
    ompi_request_t *done[EXCHANGE_TAKE_MAX];
    int n, over;

    do {
        pthread_mutex_lock(&exchanges_lock);
        n = exchange_take(x, done, EXCHANGE_TAKE_MAX);
        over = x->pending == 0;
        if (over && exchange_listed(x)) exchange_unlink(x);
        pthread_mutex_unlock(&exchanges_lock);
        exchange_free_reqs(done, n);
    } while (n == EXCHANGE_TAKE_MAX && !over);
    return over;
}

/* Every listed exchange's completed requests taken (up to EXCHANGE_TAKE_MAX a pass) and
 * freed, and the ones with none left taken off the list (an owner's finds it so; a
 * given-up one goes to exchanges_done).  `wait`: for the lock, else a pass only where no
 * other thread holds it.  The requests freed. */
static int exchanges_sweep(int wait)
{
    ompi_request_t *done[EXCHANGE_TAKE_MAX];
    int n = 0;

    if (__atomic_load_n(&exchanges_posted, __ATOMIC_ACQUIRE) == NULL) return 0;
    if (wait) pthread_mutex_lock(&exchanges_lock);
    else if (pthread_mutex_trylock(&exchanges_lock) != 0) return 0;
    for (mca_coll_gpuring_exchange_t *x = exchanges_posted, *next; x != NULL; x = next) {
        next = x->next;
        n += exchange_take(x, done + n, EXCHANGE_TAKE_MAX - n);
        if (x->pending == 0) exchange_unlink(x);
    }
    pthread_mutex_unlock(&exchanges_lock);
    exchange_free_reqs(done, n);
    return n;
}

/* opal_progress's (a low-priority callback: every 8th progress) */
static int exchanges_progress(void)
{
    return exchanges_sweep(0);
}

static mca_coll_gpuring_progress_t exchanges_progress_cb = {
    .cb = exchanges_progress, .low_priority = 1, .what = "exchange"};

void mca_coll_gpuring_exchanges_finalize(void)
{
    mca_coll_gpuring_progress_off(&exchanges_progress_cb);
}

void mca_coll_gpuring_exchange_skip(mca_coll_gpuring_module_t *m)
{
    m->exchanges_made++;
}

gpuring_status_t mca_coll_gpuring_exchange_start(mca_coll_gpuring_module_t *m, const void *mine,
                                                 size_t bytes, mca_coll_gpuring_exchange_t **xp)
{
    struct ompi_communicator_t *comm = m->comm;
    const int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    const size_t part = (sizeof(exchange_head_t) + bytes + 7) & ~(size_t)7;
    const int nreqs = 2 * (size - 1);
    mca_coll_gpuring_exchange_t *x;
    exchange_head_t *head;
    int tag, rc = OMPI_SUCCESS;

    /* (its number, made or not: the next one pairs with the peers' next one) */
    const uint32_t seq = m->exchanges_made++;

    *xp = NULL;
    if (bytes > (size_t)INT_MAX / 2) {
        GPURING_ERROR(GPURING_SUBSYS_BOOTSTRAP, "comm %s: gpuring's exchange #%u of %zu bytes "
                      "per rank is larger than a message of Open MPI's",
                      mca_coll_gpuring_comm_name(m), seq, bytes);
        return GPURING_ERR_INVALID;
    }
    x = calloc(1, sizeof(*x) + (size_t)nreqs * (sizeof(ompi_request_t *) + sizeof(int)) +
                      part * (size_t)size + 8);
    if (x == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_BOOTSTRAP, "comm %s: no memory for gpuring's exchange "
                      "(%zu bytes per rank): this rank cannot make its part",
                      mca_coll_gpuring_comm_name(m), bytes);
        return GPURING_ERR_NO_MEMORY;
    }
    if (!mca_coll_gpuring_progress_on(&exchanges_progress_cb)) {
        free(x);
        return GPURING_ERR_GENERIC;
    }
    x->comm = comm;
    x->seq = seq;
    x->bytes = bytes;
    x->part = part;
    x->size = size;
    x->rank = rank;
    x->reqs = (ompi_request_t **)(x + 1);
    x->peers = (int *)(x->reqs + nreqs);
    x->mem = (char *)(((uintptr_t)(x->peers + nreqs) + 7) & ~(uintptr_t)7);
    head = (exchange_head_t *)(x->mem + (size_t)rank * part);
    head->magic = EXCHANGE_MAGIC;
    head->seq = x->seq;
    head->bytes = bytes;
    if (bytes > 0) memcpy(head + 1, mine, bytes);
    tag = EXCHANGE_TAG(x->seq);
    /* every receive posted before any send (a part that comes early finds its buffer),
     * each rank starting with the next one up (not every rank at rank 0 at once) */
    for (int k = 1; k < size && rc == OMPI_SUCCESS; k++) {
        const int peer = (rank + k) % size;

        x->peers[x->nreqs] = peer;
        rc = MCA_PML_CALL(irecv(x->mem + (size_t)peer * part, (int)part, MPI_BYTE, peer, tag,
                                comm, &x->reqs[x->nreqs]));
        if (rc == OMPI_SUCCESS) x->nreqs++;
    }
    for (int k = 1; k < size && rc == OMPI_SUCCESS; k++) {
        const int peer = (rank + k) % size;

        x->peers[x->nreqs] = peer;
        rc = MCA_PML_CALL(isend(head, (int)part, MPI_BYTE, peer, tag,
                                MCA_PML_BASE_SEND_STANDARD, comm, &x->reqs[x->nreqs]));
        if (rc == OMPI_SUCCESS) x->nreqs++;
    }
    x->pending = x->nreqs;
    if (x->nreqs > 0) {
        pthread_mutex_lock(&exchanges_lock);
        x->next = exchanges_posted;
        if (x->next != NULL) x->next->prev = x;
        __atomic_store_n(&exchanges_posted, x, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&exchanges_lock);
    }
    if (rc != OMPI_SUCCESS) {
        GPURING_ERROR(GPURING_SUBSYS_BOOTSTRAP, "comm %s: gpuring's exchange #%u could not "
                      "start a message with rank %d (Open MPI error %d)",
                      mca_coll_gpuring_comm_name(m), x->seq, x->peers[x->nreqs], rc);
        mca_coll_gpuring_exchange_orphan(x, 1); /* what it posted may still write its memory */
        return GPURING_ERR_REMOTE;
    }
    *xp = x;
    return GPURING_OK;
}

int mca_coll_gpuring_exchange_failed(const mca_coll_gpuring_module_t *m,
                                     const mca_coll_gpuring_exchange_t *x)
{
    const int err = __atomic_load_n(&x->err, __ATOMIC_ACQUIRE);

    if (err == 0) return 0;
    GPURING_ERROR(GPURING_SUBSYS_BOOTSTRAP, "comm %s: gpuring's exchange #%u: its message with "
                  "rank %d failed (Open MPI error %d%s)", mca_coll_gpuring_comm_name(m), x->seq,
                  x->err_peer, err,
                  err == MPI_ERR_TRUNCATE ? ": that rank's part was larger -- the ranks' "
                                            "exchanges are out of step"
                                          : "");
    return 1;
}

/* x complete: every part its exchange's, copied into all (GPURING_OK); else the first
 * that is not, or the first message that failed (logged). */
static gpuring_status_t exchange_finish(const mca_coll_gpuring_module_t *m,
                                        const mca_coll_gpuring_exchange_t *x, void *all)
{
    if (mca_coll_gpuring_exchange_failed(m, x)) return GPURING_ERR_REMOTE;
    for (int r = 0; r < x->size; r++) {
        const exchange_head_t *head = (const exchange_head_t *)(x->mem + (size_t)r * x->part);

        if (head->magic != EXCHANGE_MAGIC || head->seq != x->seq || head->bytes != x->bytes) {
            GPURING_ERROR(GPURING_SUBSYS_BOOTSTRAP, "comm %s: gpuring's exchange #%u of %zu "
                          "bytes got rank %d's part of exchange #%u of %llu bytes: the "
                          "ranks' exchanges are out of step", mca_coll_gpuring_comm_name(m),
                          x->seq, x->bytes, r,
                          head->magic == EXCHANGE_MAGIC ? head->seq : 0,
                          head->magic == EXCHANGE_MAGIC ? (unsigned long long)head->bytes
                                                        : 0ull);
            return GPURING_ERR_REMOTE;
        }
        if (x->bytes > 0) memcpy((char *)all + (size_t)r * x->bytes, head + 1, x->bytes);
    }
    return GPURING_OK;
}

int mca_coll_gpuring_exchange_test(const mca_coll_gpuring_module_t *m,
                                   mca_coll_gpuring_exchange_t *x, void *all)
{
    gpuring_status_t st;

    if (!exchange_collect(x)) {
        opal_progress();
        if (!exchange_collect(x)) return 0;
    }
    st = exchange_finish(m, x, all);
    free(x);
    return st == GPURING_OK ? 1 : (int)st;
}

/* x's requests [from, to) not complete (exchanges_lock held): their number, the first
 * `max` peers in listed[] (*nlisted) */
static int exchange_pending(const mca_coll_gpuring_exchange_t *x, int from, int to, int *listed,
                            int max, int *nlisted)
{
    int n = 0;

    for (int i = from; i < to; i++) {
        if (x->reqs[i] == MPI_REQUEST_NULL || REQUEST_COMPLETE(x->reqs[i])) continue;
        if (*nlisted < max) listed[(*nlisted)++] = x->peers[i];
        n++;
    }
    return n;
}

int mca_coll_gpuring_exchange_missing(const mca_coll_gpuring_exchange_t *x, char *buf,
                                      size_t size)
{
    const int nrecv = x->size - 1; /* (the first requests: every receive, then every send) */
    int listed[EXCHANGE_MISSING_LISTED], nlisted = 0, n, recvs;
    size_t at;

    /* the parts not come, else the peers this one's has not reached */
    pthread_mutex_lock(&exchanges_lock);
    n = exchange_pending(x, 0, nrecv, listed, EXCHANGE_MISSING_LISTED, &nlisted);
    recvs = n > 0;
    if (!recvs)
        n = exchange_pending(x, nrecv, x->nreqs, listed, EXCHANGE_MISSING_LISTED, &nlisted);
    pthread_mutex_unlock(&exchanges_lock);
    if (n == 0) return 0;
    for (int k = 1; k < nlisted; k++) { /* (in rank order) */
        for (int q = k; q > 0 && listed[q - 1] > listed[q]; q--) {
            const int t = listed[q];

            listed[q] = listed[q - 1];
            listed[q - 1] = t;
        }
    }
    at = (size_t)snprintf(buf, size, "%s%s", recvs ? "" : "this rank's part has not reached ",
                          n == 1 ? "rank" : "ranks");
    for (int k = 0; k < nlisted && at < size; k++)
        at += (size_t)snprintf(buf + at, size - at, "%s %d", k == 0 ? "" : ",", listed[k]);
    if (at < size && n > nlisted)
        at += (size_t)snprintf(buf + at, size - at, " and %d more", n - nlisted);
    if (at < size && recvs)
        (void)snprintf(buf + at, size - at, " %s", n == 1 ? "has not sent its part"
                                                         : "have not sent their parts");
    return n;
}

void mca_coll_gpuring_exchange_orphan(mca_coll_gpuring_exchange_t *x, int hold)
{
    int over;

    if (hold) {
        x->held = x->comm;
        OBJ_RETAIN(x->held);
    }
    pthread_mutex_lock(&exchanges_lock);
    x->given_up = 1;
    over = !exchange_listed(x); /* (never posted, or every message taken) */
    pthread_mutex_unlock(&exchanges_lock);
    if (over) {
        if (x->held != NULL) OBJ_RELEASE(x->held);
        free(x);
    }
}

void mca_coll_gpuring_exchanges_reap(void)
{
    mca_coll_gpuring_exchange_t *done;

    while (exchanges_sweep(1) == EXCHANGE_TAKE_MAX) continue;
    if (__atomic_load_n(&exchanges_done, __ATOMIC_ACQUIRE) == NULL) return;
    pthread_mutex_lock(&exchanges_lock);
    done = exchanges_done;
    __atomic_store_n(&exchanges_done, NULL, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&exchanges_lock);
    while (done != NULL) {
        mca_coll_gpuring_exchange_t *x = done;

        done = x->next;
        if (x->held != NULL && ompi_mpi_state < OMPI_MPI_STATE_FINALIZE_STARTED)
            OBJ_RELEASE(x->held);
        free(x);
    }
}
