/*
 * proxy_internal.h -- what proxy_thread.c and conn_net_ucx.c share and nobody
 * else sees: the proxy object, the per-connection NET state, and the calls
 * between the two files.
 *
 * Locking: one proxy mutex (proxy->lock) serializes every UCX call (the
 * worker is UCS_THREAD_MODE_SERIALIZED) and guards the connection list, the
 * endpoint cache and all gpuring_net_conn_t fields except `sizes` (written
 * by the send executor, read by the thread after an acquire load of tail).
 * UCX callbacks run inside ucp_worker_progress()/ucp_request_cancel(), which
 * are only called with the lock held, so they see the same rule.  The lock
 * is held by the thread for a pass, by a waiting executor for a pass
 * (gpuring_proxy_progress, trylock), or by create/connect/destroy.
 * A failure is the connection's (net->err) or its endpoint's (pe->failed):
 * written under the lock, read by executors without it (acquire loads,
 * gpuring_conn_net_error), so that a failure fails the calls that use that
 * connection or endpoint and no other.  The proxy's record of the first
 * failure (gpuring_proxy_error) has its own small lock (proxy->err_lock),
 * always taken after proxy->lock when both are held.
 */
#ifndef GPURING_PROXY_INTERNAL_H
#define GPURING_PROXY_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

#include "common/gpuring_common.h"
#include "proxy/conn.h"
#include "proxy/proxy.h"

/* ---- tags -----------------------------------------------------------------
 * [63..44] comm_uid (20 bits)  [43] kind  [42..32] net_id of the landing end
 * [31..0]  data: the step's low 16 bits, then its call id (conn.h; the
 *          receive matches any, the receiver checks it); credits: the low
 *          32 bits of the head                                           */
#define GPURING_TAG_UID_BITS 20
#define GPURING_TAG_NETID_BITS 11
#define GPURING_TAG_UID_SHIFT 44
#define GPURING_TAG_KIND_SHIFT 43
#define GPURING_TAG_NETID_SHIFT 32
#define GPURING_TAG_UID_MAX ((1ull << GPURING_TAG_UID_BITS) - 1)
#define GPURING_TAG_NETID_MAX ((1u << GPURING_TAG_NETID_BITS) - 1)
#define GPURING_TAG_KIND_DATA 0ull
#define GPURING_TAG_KIND_CREDIT 1ull
#define GPURING_TAG_MASK_NOSTEP (~(ucp_tag_t)0xffffffffull)
/* comm uid 0 belongs to no communicator (gpuring_comm.c never claims it): its
 * tag (data kind, net id 0, this low field) is an endpoint's warm-up message */
#define GPURING_TAG_UID_WARMUP 0ull
#define GPURING_TAG_WARMUP_LOW 0x77a2u

#define GPURING_TAG_MASK_NOCALL (~(ucp_tag_t)GPURING_CALL_MASK)

/* the [31..0] field of a data step's tag */
static inline uint64_t gpuring_net_data_field(uint64_t step, uint64_t call)
{
    return (step & 0xffffull) << GPURING_CALL_BITS | (call & GPURING_CALL_MASK);
}

static inline ucp_tag_t gpuring_net_tag(uint64_t comm_uid, uint64_t kind, uint32_t net_id,
                                        uint64_t step)
{
    return ((comm_uid & GPURING_TAG_UID_MAX) << GPURING_TAG_UID_SHIFT) |
           ((kind & 1ull) << GPURING_TAG_KIND_SHIFT) |
           ((uint64_t)(net_id & GPURING_TAG_NETID_MAX) << GPURING_TAG_NETID_SHIFT) |
           (step & 0xffffffffull);
}

/* A tag's fields (the inverse of gpuring_net_tag; `low` is its [31..0]) */
typedef struct gpuring_net_tag_fields {
    uint64_t comm_uid;
    uint64_t kind;
    uint32_t net_id;
    uint32_t low;
} gpuring_net_tag_fields_t;

static inline gpuring_net_tag_fields_t gpuring_net_tag_fields(ucp_tag_t tag)
{
    gpuring_net_tag_fields_t f;

    f.comm_uid = (tag >> GPURING_TAG_UID_SHIFT) & GPURING_TAG_UID_MAX;
    f.kind = (tag >> GPURING_TAG_KIND_SHIFT) & 1ull;
    f.net_id = (uint32_t)(tag >> GPURING_TAG_NETID_SHIFT) & GPURING_TAG_NETID_MAX;
    f.low = (uint32_t)tag;
    return f;
}

/* ---- one UCX operation of a connection ----------------------------------- */
typedef struct gpuring_net_op {
    struct gpuring_net_conn *net;
    void *req;           /* UCX request to free; NULL if none / immediate */
    uint64_t step;
    int busy;            /* posted, not yet retired */
    int done;            /* completion seen (callback or immediate) */
    ucs_status_t status; /* completion status */
    size_t length;       /* data receive: bytes that landed */
    ucp_tag_t tag;       /* data receive: the sender's tag (its call id) */
    char *at;            /* data receive: the caller's memory it lands in (NULL: the slot) */
    size_t cap;          /* data receive: bytes it may take */
    int repost;          /* data receive: cancelled to be posted again where the executor
                            asked for its step (gpuring_conn_net_reland) */
} gpuring_net_op_t;

/* a credit's flag: the receiver gave up on its call (gpuring_conn_refuse) */
#define GPURING_NET_CREDIT_REFUSED (1ull << 63)

/* ---- the NET state of one connection (conn->net) ------------------------- */
typedef struct gpuring_net_conn {
    gpuring_proxy_t *proxy;
    struct gpuring_net_conn *next, *prev; /* proxy->conns or proxy->orphans */
    int registered; /* on proxy->conns, progressed by the thread */
    int connected;  /* connect() ran: ep set, receives posted */
    int detached;   /* the proxy was finalized under it: touch no UCX */
    int stuck;      /* ... with UCX operations unfinished: its memory is kept to the exit */
    int failed;     /* a UCX operation failed: counters are frozen */
    int err;        /* atomic (release after err_msg): the connection's first failure, a
                       gpuring_status_t (GPURING_OK: none; net_fail) */
    char err_msg[200];
    int draining;   /* it, or its communicator, is being torn down (gpuring_conn_net_closing):
                     * credits go at once */
    int settling;   /* the process is idle (gpuring_net_conns_settle): a credit owed goes */
    int abandoned;  /* its communicator failed: teardown waits for no credit */
    int quiet;      /* atomic: its call failed (gpuring_conn_net_quiet): no spinning */
    double abandon_flush_s; /* abandoned send end: how long teardown may wait for the
                               steps already in its FIFO (the abort step) to go out */
    double abandon_until;   /* ... and the communicator's deadline for all its ends
                               (gpuring_time_sec), its cancelled operations' too */
    int abort_due;  /* atomic (release after abort_step); send end: the executor's abort
                       step found every slot busy, and handed the connection over
                       (gpuring_conn_net_abort_later) */
    uint64_t abort_step; /* ... the step that abort step is (its conn's step then) */
    int refused;    /* send end: the receiver gave up (a refusal credit came; ctrl->refused
                       is set); recv end: this end's refusal went out */

    gpuring_conn_dir_t dir;
    int peer;
    int channel;
    size_t slot_bytes;
    uint64_t comm_uid;
    uint32_t net_id;        /* this end (tags landing here) */
    uint32_t remote_net_id; /* the other end */

    void *mem; /* ctrl + slots, one mapping of mem_bytes (GPU-direct: ctrl only) */
    size_t mem_bytes;
    char *slots;    /* in mem, or device memory of `device` */
    int device;     /* GPU-direct: the slots' device ordinal; -1: host slots */
    int device_counted; /* in proxy->device_conns */
    int flush;      /* GPU-direct: flush RDMA writes before publishing tail */
    gpuring_fifo_ctrl_t *ctrl;
    struct gpuring_proxy_ep *pe; /* the peer process's cached endpoint, not owned */

    uint64_t sent;        /* steps handed to UCX */
    uint64_t done;        /* steps whose send completed, in order (= ctrl->head) */
    uint64_t remote_head; /* latest credit from the receiver */
    uint64_t seen_tail;   /* the tail the last progress call read, and the proxy's */
    uint64_t seen_pass;   /* pass count then (a stall report's evidence) */

    /* recv side */
    uint64_t posted;   /* receives posted for steps < posted */
    uint64_t landed;   /* steps landed in order (= ctrl->tail) */
    uint64_t credited; /* the head value last handed to UCX as a credit */
    uint64_t credits;  /* statistics: credit messages sent (recv) / received (send) */
    uint64_t inflight_max; /* statistics, send: most steps posted and not completed at a pass */
    uint64_t zcopy;        /* statistics, recv: steps landed in the caller's memory */

    gpuring_net_op_t data[GPURING_NSTEPS]; /* send: sends; recv: receives */
    gpuring_net_op_t credit; /* send: the credit receive; recv: the credit send */
    uint64_t credit_buf;     /* landing / source buffer of that credit: a head, or'd with
                                GPURING_NET_CREDIT_REFUSED once the receiver gave up */
} gpuring_net_conn_t;

/* ---- the endpoint cache ---------------------------------------------------- */
/* An endpoint's warm-up message: larger than any UCX shared-memory FIFO
 * element (its first send that is not inline), smaller than its rendezvous */
#define GPURING_NET_WARMUP_BYTES 1024

typedef struct gpuring_proxy_ep {
    struct gpuring_proxy_ep *next;
    gpuring_proxy_t *proxy;
    uint64_t peer_key;
    int peer_rank; /* rank named when it was created, for messages */
    ucp_ep_h ep;
    int failed;              /* atomic (release after fail_status): UCX reported it failed;
                                every connection over it has failed (gpuring_conn_net_error) */
    ucs_status_t fail_status;
    int reported;        /* a failure over it was logged as an error (the rest: debug) */
    int detects_failure; /* created with UCP_ERR_HANDLING_MODE_PEER */
    void *warm_recv;     /* the warm-up receive while in flight (proxy_ep_warm_up) */
    char warm_buf[GPURING_NET_WARMUP_BYTES]; /* where it lands */
} gpuring_proxy_ep_t;

/* ---- the proxy -------------------------------------------------------------- */
struct gpuring_proxy {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC; the thread sleeps on it */
    pthread_t thread;
    int thread_started;
    int stop;
    int active; /* atomic: operations between active_begin and active_end */
    int napping; /* atomic: the thread is in (or entering) its idle sleep */
    uint64_t drives; /* atomic: passes run by executors (gpuring_proxy_progress) */
    uint64_t tries;  /* atomic, approximate: executors' calls to run one; the thread
                      * leaves the passes to them while it changes (proxy_main) */
    int handoff;     /* under the lock: an operation ended with work left: the
                      * thread's from now on (gpuring_proxy_active_end) */
    int stuck;       /* atomic: a wait for the lock ran out (gpuring_proxy_lock_within);
                      * cleared when the lock is next taken */
    int leaked;      /* atomic: a teardown left a connection with UCX operations in
                      * flight outside every list (stuck): UCX stays to the exit */
    uint64_t wait_timeout_ms; /* atomic (any thread reads it, a new communicator's setup
                               * may set it): gpuring_proxy_wait_timeout */
    gpuring_proxy_peer_failure_t peer_failure;

    ucp_context_h context;
    int cuda_memory; /* the context moves CUDA memory (a CUDA transport is loaded) */
    int device;        /* GPU of the last GPU-direct connection registered, or -1 once
                        * none is left (device_conns: registered, not yet torn down) */
    int device_conns;
    int thread_device; /* the GPU current on the proxy thread (UCX's CUDA transports and
                          the flush need its context there), or -1 */
    ucp_worker_h worker;
    ucp_address_t *address;
    size_t address_len;

    gpuring_net_conn_t *conns;   /* registered connections */
    gpuring_net_conn_t *orphans; /* destroyed with UCX ops still out */
    gpuring_proxy_ep_t *eps;

    /* what the lock's holder does under it, for a report on a pass that does
     * not end (gpuring_proxy_lock_for_report); relaxed atomics */
    int holder;          /* its thread id (gettid), 0: none */
    int thread_tid;      /* the progress thread's */
    const char *doing;   /* a static string */
    int doing_peer;      /* the connection it progresses: peer rank, or -1 */
    int doing_channel;
    int doing_dir;
    uint64_t report_gave_up; /* passes + 1 when a report last gave up on the lock (0:
                              * none): until another pass ends, reports do not wait */
    int report_holder;       /* ... on the lock of this holder (its thread id) */

    uint64_t passes; /* statistics; atomic (relaxed) where read unlocked */
    uint64_t polls;  /* ucp_worker_progress calls of the passes (under the lock) */
    uint64_t sleeps;

    /* the first failure on any connection or endpoint (gpuring_proxy_error) */
    int err_set; /* atomic fast path */
    pthread_mutex_t err_lock;
    gpuring_status_t err_status;
    char err_msg[256];
};

/* The proxy's wait timeout in seconds, 0: no bound. */
static inline double gpuring_proxy_wait_timeout(const gpuring_proxy_t *proxy)
{
    return (double)__atomic_load_n(&proxy->wait_timeout_ms, __ATOMIC_RELAXED) / 1e3;
}

/* The proxy's wait timeout, but at least `floor` seconds; 0 (no bound) stays 0. */
static inline double gpuring_proxy_wait_floor(const gpuring_proxy_t *proxy, double floor)
{
    const double t = gpuring_proxy_wait_timeout(proxy);

    return t > 0 ? GPURING_MAX(t, floor) : 0;
}

/* proxy_thread.c ----------------------------------------------------------- */
/* Note a failure of a connection or an endpoint in the proxy's record
 * (gpuring_proxy_error: the first one is kept).  Logs nothing.  Any lock. */
void gpuring_proxy_note_failure(gpuring_proxy_t *proxy, gpuring_status_t st, const char *msg);
/* One poll of the worker in a bounded wait (lock held): the wait's clock ticks
 * whether or not the poll moved anything, so that a worker kept busy by other
 * traffic cannot make the wait endless. */
static inline gpuring_status_t gpuring_proxy_poll_tick(gpuring_proxy_t *proxy,
                                                       gpuring_spin_t *spin)
{
    (void)ucp_worker_progress(proxy->worker);
    return gpuring_spin_tick(spin);
}

/* The cached endpoint to a peer process, created on first use (a failed one stays:
 * the connections made over it fail at once).  Lock held. */
gpuring_status_t gpuring_proxy_get_ep(gpuring_proxy_t *proxy, uint64_t peer_key,
                                      int same_host, const void *addr, size_t addr_len,
                                      int peer_rank, gpuring_proxy_ep_t **pe_p);
/* Add / remove a connection from the thread's list.  Lock held. */
void gpuring_proxy_register(gpuring_proxy_t *proxy, gpuring_net_conn_t *net);
void gpuring_proxy_deregister(gpuring_proxy_t *proxy, gpuring_net_conn_t *net);
/* A GPU-direct connection's UCX operations all ended (its teardown, or an orphan's
 * reap): the last one gives the passes back to the callers (proxy->device -1).
 * Lock held. */
void gpuring_proxy_device_conn_gone(gpuring_proxy_t *proxy, gpuring_net_conn_t *net);
/* Keep a destroyed connection whose UCX operations did not finish (proxy->orphans);
 * gpuring_net_orphans_reap frees it once they have.  Lock held. */
void gpuring_proxy_adopt_orphan(gpuring_proxy_t *proxy, gpuring_net_conn_t *net);
/* Wake the thread (it may be asleep).  Lock not held (this takes it). */
void gpuring_proxy_wake(gpuring_proxy_t *proxy);
/* Take / try / release proxy->lock, saying what the holder does under it (a
 * static string), which gpuring_proxy_doing updates as it goes (net: the
 * connection it works on, or NULL). */
void gpuring_proxy_lock(gpuring_proxy_t *proxy, const char *doing);
int gpuring_proxy_trylock(gpuring_proxy_t *proxy, const char *doing); /* 1: taken */
void gpuring_proxy_unlock(gpuring_proxy_t *proxy);
void gpuring_proxy_doing(gpuring_proxy_t *proxy, const char *doing,
                         const gpuring_net_conn_t *net);
/*
 * Take the lock where the caller is not the progress thread's pass (a
 * connection's setup or teardown, a call's end, finalize): waits at most the
 * wait timeout with no pass ending (a lock passes keep taking is waited for
 * again), and not at all while the proxy is stuck.  1: taken.  0: the proxy
 * is stuck -- a pass that does not end holds the lock
 * (inside UCX) -- logged once, naming the holder and what its thread does;
 * the caller leaves its work undone, keeping whatever UCX may still touch.
 * Calls over the proxy's connections fail meanwhile (gpuring_conn_net_error);
 * the next taking of the lock ends the state.
 */
int gpuring_proxy_lock_within(gpuring_proxy_t *proxy, const char *doing);
/* Take the lock for a report, waiting at most a second -- not at all where an
 * earlier report gave up and no pass ended since (the same holder); 1: taken.
 * 0: the holder did not let go, and buf says who holds it, what it does there,
 * and what its thread is doing in the kernel (from /proc). */
int gpuring_proxy_lock_for_report(gpuring_proxy_t *proxy, const char *doing, char *buf,
                                  size_t len);
/* The progress thread as a report sees it, appended to buf: the passes run
 * (and how many more ran while this looked, GPURING_PROXY_LOOK_NS), the
 * operations active, whether it naps, and its state in the kernel.  Lock
 * NOT held: it sleeps. */
#define GPURING_PROXY_LOOK_NS (20 * 1000 * 1000)
/* the most the endpoints' flush before their forced close waits, all together (a live
 * peer's takes a round trip; a dead one's never ends) */
#define GPURING_PROXY_CLOSE_FLUSH_S 1.0
void gpuring_proxy_describe_thread(gpuring_proxy_t *proxy, char *buf, size_t len);

/* conn_net_ucx.c ----------------------------------------------------------- */
/* One pass of send/recv/credit work.  Lock held.  Returns GPURING_NET_PENDING
 * while the connection has work pending (unsent steps, sends in flight,
 * credits owed), or'ed with GPURING_NET_MOVED if a counter moved. */
#define GPURING_NET_PENDING 1
#define GPURING_NET_MOVED 2
/* a send end with half its window or more not yet credited: a credit may wait
 * in UCX for a poll of the worker (gpuring_proxy_post polls then) */
#define GPURING_NET_POLL 4
int gpuring_net_conn_progress(gpuring_net_conn_t *net);
/* No operation is on and nothing moves (the progress thread, about to nap):
 * every credit owed goes now, due or not, so that a peer's teardown, which
 * waits for the last credit of its sends, never waits for this rank's own
 * teardown (MPI_Comm_free is local in practice).  Lock held. */
void gpuring_net_conns_settle(gpuring_proxy_t *proxy);
/* Finalize with the connection still registered: cancel what can be
 * cancelled and mark it detached; the UCX operations left unfinished (then
 * it is stuck: UCX is not torn down, its memory kept).  Lock held, thread
 * stopped. */
int gpuring_net_conn_detach(gpuring_net_conn_t *net);
/* Free the orphans whose UCX operations have all finished (at every connection's
 * teardown and at finalize): their memory, and their hold on GPU-direct passes
 * (gpuring_proxy_device_conn_gone).  Lock held. */
void gpuring_net_orphans_reap(gpuring_proxy_t *proxy);
/* Free a connection's memory. */
void gpuring_net_conn_free(gpuring_net_conn_t *net);

#endif /* GPURING_PROXY_INTERNAL_H */
