/*
 * proxy.h -- the process's proxy: one UCX (ucp) context and worker, and one
 * progress thread that drives every inter-node (NET) connection of every
 * communicator in this process.  Seed 003 describes NCCL's equivalent.
 *
 * Only the proxy thread moves data over UCX.  The executors (host, CUDA)
 * never call UCX: they write a slot and post it (size, tail) on a send
 * connection, or wait for tail and publish head on a receive connection,
 * exactly as on a shared-memory connection (proxy/conn.h).  The thread:
 *   send side: sees ctrl->tail move past what it sent and the receiver's
 *              credit allow it, sends the slot (tag: comm uid, remote id,
 *              step); when the UCX send completes, publishes ctrl->head so
 *              the executor can reuse the slot;
 *   recv side: keeps receives pre-posted for steps < head + NSTEPS into their
 *              slots; when step s lands (in order), publishes ctrl->tail =
 *              s + 1; when the executor advances ctrl->head it sends the new
 *              head to the sender as a credit.
 * The thread spins (with sched_yield) while any operation is active or any
 * connection has work pending, and sleeps otherwise.  A failure is
 * recorded where it happened: a UCX operation's on its connection, an
 * endpoint's (a dead peer) on the endpoint; executors poll their call's
 * connections in their waits (gpuring_conn_net_error) and report it.
 *
 * A waiting host executor may run the same pass itself
 * (gpuring_proxy_progress: a trylock, never a wait): a step then goes out
 * and lands without a hand-off between threads.  While executors keep
 * trying to, the thread only checks every GPURING_PROXY_BACKSTOP_US that
 * somebody still does, and takes over when nobody has; an operation that
 * ends with work left (sends in flight, a credit owed) hands it to the
 * thread at once (gpuring_proxy_active_end).
 *
 * Peer failure detection (UCP_ERR_HANDLING_MODE_PEER) is asked for by
 * gpuring_proxy_peer_failure_t: by default only for peers on other hosts.
 * UCX 1.13's shared-memory transports cannot detect a dead peer, so an
 * endpoint that asks for it runs same-host peers (virtual nodes) over
 * tcp/lo; without it they get posix/sysv/cma.  A same-host peer that dies
 * is then caught by the executors' wait timeout, which names it.
 */
#ifndef GPURING_PROXY_PROXY_H
#define GPURING_PROXY_PROXY_H

#include <stddef.h>
#include <stdint.h>
#include "common/gpuring_common.h"
#include "proxy/conn.h"

typedef struct gpuring_proxy gpuring_proxy_t;

/* Which endpoints ask UCX to detect the peer's failure (coll_gpuring_net_peer_failure). */
typedef enum {
    GPURING_PROXY_PEER_FAILURE_REMOTE = 0, /* peers on other hosts (the default) */
    GPURING_PROXY_PEER_FAILURE_NONE = 1,   /* none: wait timeouts catch dead peers */
    GPURING_PROXY_PEER_FAILURE_ALL = 2,    /* every peer (same host: UCX 1.13 uses tcp) */
} gpuring_proxy_peer_failure_t;

typedef struct gpuring_proxy_config {
    double wait_timeout; /* seconds, for the bounded waits inside the proxy (teardown);
                            0: no bound */
    gpuring_proxy_peer_failure_t peer_failure; /* for endpoints created from now on */
    size_t rndv_thresh; /* UCX's eager/rendezvous switch for the proxy's own context, in
                           bytes (0: UCX's choice; GPURING_PROXY_RNDV_NEVER: every message
                           eager); taken when the proxy is created, and never over
                           UCX_RNDV_THRESH set in the environment */
    const char *cpus;     /* the CPUs the progress thread runs on, a list ("8-15"), where
                             the thread creating the proxy runs while it does (UCX's
                             threads and first touches there too); NULL: that thread's
                             binding (graph.h, gpuring_graph_topo_thread_cpus).  The
                             first call's, which creates the proxy */
    const char *cpus_why; /* where those are, or why none, for the log line */
} gpuring_proxy_config_t;
#define GPURING_PROXY_RNDV_NEVER SIZE_MAX

/*
 * Is tcp the only network transport UCX has here?  (UCT's resources: every
 * transport whose device is a network one is "tcp": no RDMA device.)  Between
 * hosts a step then goes over tcp, where UCX's rendezvous adds a round trip
 * per message and saves no copy, while an eager step lands straight in the
 * receive posted ahead for it.  Asked once (it opens every UCT memory domain
 * to list its transports), before the proxy exists; UCX_TLS and
 * UCX_NET_DEVICES are not consulted.
 */
int gpuring_proxy_net_tcp_only(void);

/* The thread checks this often whether executors still drive progress: a
 * safety net only (a call hands its leftovers over when it ends).  Every look
 * is a timer wake on the executor's core: at 100 us, where it was until
 * 2026-11-29, they cost 1.2-1.5x on every size of a 2-rank call over UCX on
 * a 2-CPU virtual machine (README, "What the code does"). */
#define GPURING_PROXY_BACKSTOP_US 10000

/*
 * The process singleton: created (UCX init + thread start) on the first
 * call, reused after.  Thread safe with respect to the calling threads.
 */
gpuring_status_t gpuring_proxy_get(const gpuring_proxy_config_t *cfg,
                                   gpuring_proxy_t **proxy_p);
/* Stop the thread, close endpoints, release UCX.  Idempotent. */
void gpuring_proxy_finalize(void);

/* This process's UCX worker address, published to peers through bootstrap_mpi. */
gpuring_status_t gpuring_proxy_address(gpuring_proxy_t *proxy, const void **addr_p,
                                       size_t *len_p);

/*
 * Can NET slots live in GPU `device`'s memory (GPU-direct)?  Yes when this
 * process's UCX context moves CUDA memory (ucp_context_query memory types)
 * and the GPU orders or can flush the NIC's writes into it
 * (kernels/device.h).  Otherwise *why_p says why not, for the log.
 */
int gpuring_proxy_gpu_direct(gpuring_proxy_t *proxy, int device, const char **why_p);

/*
 * Create this end of a NET connection: local ctrl (page aligned, zeroed
 * counters) and slots -- host memory with it when device < 0, else in
 * `device`'s memory (only where gpuring_proxy_gpu_direct() said yes) --
 * net_id chosen by the caller (unique among this comm's connections in this
 * process), handle filled for the peer.  The two ends choose their slots'
 * memory independently.  `gpu`: a GPU's kernels fill and drain the slots
 * (the device plane), so host ones start on a page, as its 128-byte lines
 * want; 0: the host executor's copies do, GPURING_SLOTS_SKEW bytes in
 * (proxy/conn.h).
 */
gpuring_status_t gpuring_conn_net_create(gpuring_proxy_t *proxy, gpuring_conn_t *conn,
                                         gpuring_conn_dir_t dir, int peer, int channel,
                                         size_t slot_bytes, uint64_t comm_uid,
                                         uint32_t net_id, int device, int gpu,
                                         gpuring_conn_handle_t *handle_p);
/*
 * Connect to the other end, given its handle and its process's worker
 * address.  peer_key identifies the peer process (endpoints are cached per
 * process and live until gpuring_proxy_finalize); peer_same_host says it
 * runs on this host (the endpoint's failure detection follows from it).
 * Registers the connection with the thread (receives are pre-posted from
 * here on).
 */
gpuring_status_t gpuring_conn_net_connect(gpuring_proxy_t *proxy, gpuring_conn_t *conn,
                                          const gpuring_conn_handle_t *remote,
                                          uint64_t peer_key, int peer_same_host,
                                          const void *peer_addr, size_t peer_addr_len);
/*
 * The endpoint to a peer process (connected before): whether it detects the
 * peer's failure, and the transports of its lanes as UCX prints them (e.g.
 * "posix/memory cma/memory"), for the log and the tests.
 */
gpuring_status_t gpuring_proxy_peer_describe(gpuring_proxy_t *proxy, uint64_t peer_key,
                                             int *detects_failure_p, char *lanes, size_t len);
/*
 * Deregister and free.  Waits, bounded by the wait timeout, for posted sends
 * and owed credits to complete; cancels pre-posted receives.  GPURING_OK, or
 * GPURING_ERR_TIMEOUT when that wait ran out (the peer is gone or stuck: its
 * communicator's other connections should be abandoned, not waited for), or
 * when the proxy is stuck (its lock not had within the wait timeout: the
 * connection's memory is left to the proxy, which closes it at finalize if
 * it is still registered then).  Setup, teardown, a call's end and connect
 * wait for the proxy's lock so, bounded (gpuring_proxy_lock_within).
 */
gpuring_status_t gpuring_conn_net_destroy(gpuring_proxy_t *proxy, gpuring_conn_t *conn);
/*
 * Communicator comm_uid is closing: each of its connections sends the credit it owes
 * at once, unbatched, from now on.  Before destroying them (a peer that tears the same
 * connections down in another order waits for those credits); not before destroying
 * some (a failed connect's new ends): the others would send a credit per step.
 */
void gpuring_conn_net_closing(gpuring_proxy_t *proxy, uint64_t comm_uid);
/*
 * Before destroy, when the connection's communicator failed (its peers'
 * counters are out of step: owed credits never come): destroy then waits
 * for no credit owed, and cancels every operation (at most a second for
 * UCX).  Only on a send end, and for at most flush_s seconds, it first lets
 * the steps already in the FIFO go out and complete: the failed call's
 * abort step (posted by the executor, or left to the proxy by
 * gpuring_conn_net_abort_later), which the receiver waits for when an
 * application frees the communicator right after the error.  A flush that
 * runs out makes destroy return GPURING_ERR_TIMEOUT (the peer is gone or
 * stuck: give the communicator's other ends none, GPURING_NET_ABANDON_FLUSH_S
 * in all).
 */
#define GPURING_NET_ABANDON_FLUSH_S 0.25 /* a live peer credits within ms; one that
                                            failed the call too never does */
void gpuring_conn_net_abandon(gpuring_conn_t *conn, double flush_s);
/*
 * The connection's call failed (its communicator is broken): what that call left in
 * flight -- sends a peer still busy elsewhere has not taken, a credit or an abort step
 * waiting for a slot -- keeps the progress thread from napping no longer; its backstop
 * and the teardown's own passes still move them.  Any thread.
 */
void gpuring_conn_net_quiet(gpuring_conn_t *conn);
/*
 * A send end's call failed, and its abort step (gpuring_conn_post_abort)
 * found every slot busy: sends in flight whose completions have not come
 * in yet.  The proxy posts the abort step as soon as one completes, so a
 * receiver waiting for the next step learns the call was given up instead
 * of waiting out its timeout.  The executor hands the connection over: it
 * posts nothing on it again (its communicator is broken).
 */
void gpuring_conn_net_abort_later(gpuring_conn_t *conn);
/*
 * A recv end's call failed: _cancel cancels the receives it asked into the
 * caller's memory (conn.h: zero copy) and drops the asks not yet posted, so
 * nothing lands there after the call returned -- every connection of the call
 * first, so that none matches more in the output while another's is waited
 * for.  A receive UCX has matched already (a rendezvous under way, an eager
 * step's first fragments in) cannot be cancelled: _wait waits for it until
 * *until_p (then an error says UCX may still write there) -- one deadline for
 * all of a failed call's connections: the first that waits sets it, the
 * proxy's wait_timeout on (0: not set yet; stays 0 where wait_timeout is, no
 * bound).  A cancelled receive fails the connection (its communicator is
 * broken already).
 */
void gpuring_conn_net_unland_cancel(gpuring_conn_t *conn);
void gpuring_conn_net_unland_wait(gpuring_conn_t *conn, double *until_p);
/*
 * A recv end's call starts with asks (conn.h: zero copy) for steps whose
 * receives were posted into the slots before (during the call before): each
 * such receive nothing has matched yet is cancelled and posted again where
 * its step was asked, so a call's first NSTEPS steps may land in its output
 * too.  One that matched already lands in its slot.
 */
void gpuring_conn_net_reland(gpuring_conn_t *conn);

/* What a NET end has done (for the log and the tests). */
typedef struct gpuring_conn_net_stats {
    uint64_t steps;        /* send: steps handed to UCX; recv: steps landed */
    uint64_t credits;      /* send: credit messages received; recv: sent */
    uint64_t inflight_max; /* send: the most steps a pass found posted by the executor
                              (ctrl->tail) and not yet sent and completed (ctrl->head) */
    uint64_t zcopy;        /* recv: steps landed in the caller's output instead of the
                              slot (proxy/conn.h: zero copy) */
} gpuring_conn_net_stats_t;
void gpuring_conn_net_stats(const gpuring_conn_t *conn, gpuring_conn_net_stats_t *stats_p);

/*
 * A NET end's side of a stall report, in words: the proxy's counters (send:
 * the tail it read, steps sent and completed, the receiver's credit; recv:
 * receives posted, steps landed, the executor's head, the credit sent) and
 * what the UCX operation of `step` does (not posted, in flight, done with its
 * status); a recv end also looks whether a message of its own waits in UCX
 * unmatched (a step no receive took).  A send end names the last pass over
 * it and the tail that pass read; where a step is posted and credited but
 * not sent (any pass would send it), it also describes the progress thread:
 * the passes that ran while the report looked (GPURING_PROXY_LOOK_NS), the
 * operations active, the thread's state in the kernel.  Takes the proxy
 * lock, for at most a second: a lock held longer is reported as such (a
 * pass that does not end).
 */
void gpuring_conn_net_describe(const gpuring_conn_t *conn, uint64_t step, char *buf, size_t len);

/* An operation using NET connections starts / ends: keeps the thread spinning.
 * `driven`: the caller runs passes itself while it waits
 * (gpuring_proxy_progress); the thread then stays asleep (GPU-direct slots,
 * which only it moves, excepted), from its backstop's sleep takes over on its
 * own within GPURING_PROXY_BACKSTOP_US when no pass was tried, and is woken
 * at the end if the operation left work (its last sends in flight, a credit
 * owed).  A wake per call (a futex call and a thread scheduled on the
 * caller's cores) was most of an 8-byte call over UCX. */
void gpuring_proxy_active_begin(gpuring_proxy_t *proxy, int driven);
void gpuring_proxy_active_end(gpuring_proxy_t *proxy);

/*
 * From a waiting executor (inside active_begin/end: the host executor, or
 * the CUDA executor's host thread polling its kernel): one pass over every
 * connection and the UCX worker, if the proxy lock is free (trylock: never
 * waits).  Returns 1 if a counter moved.  Does nothing where a connection
 * has GPU-direct slots (UCX needs the proxy thread's CUDA context for them).
 */
int gpuring_proxy_progress(gpuring_proxy_t *proxy);

/*
 * From an executor that just posted a NET step or released one's slot: the
 * connections' part of a pass only (the step handed to UCX, the credit or
 * the receive posted), without polling the UCX worker -- whoever waits next
 * polls it, and a poll is a system call per transport on some (tcp: an
 * epoll_wait per interface) -- unless a send end has half its window or
 * more uncredited (GPURING_NET_POLL): a credit may wait in UCX, and a
 * sender that never waits would see it only with its window full; then the
 * whole pass.  Same rules and result as gpuring_proxy_progress.
 */
int gpuring_proxy_post(gpuring_proxy_t *proxy);

/*
 * Has this NET connection failed?  Its own first failure (a UCX operation of
 * it that failed, a step larger than its slot, a flush of its GPU-direct
 * writes), or its endpoint's (UCX found the peer process gone: every
 * connection to that process fails), with a message naming the peer rank
 * and channel (and the step, for an operation's); GPURING_ERR_TIMEOUT while
 * the proxy is stuck (a pass that does not end holds its lock past the wait
 * timeout: every connection waits for it); GPURING_OK if none, or
 * if conn is not NET or its proxy was finalized.  A failure
 * is confined to the calls that use the connection: the process's other
 * communicators, and its connections to other processes, go on.  No lock (an
 * executor asks it while it waits).  msg may be NULL.
 */
gpuring_status_t gpuring_conn_net_error(const gpuring_conn_t *conn, char *msg, size_t len);

/*
 * The first failure of any of the proxy's connections or endpoints (an
 * endpoint's only if an operation was active), with its message; GPURING_OK
 * if none.  For reports and tests: a call asks its own connections
 * (gpuring_conn_net_error).  msg may be NULL.
 */
gpuring_status_t gpuring_proxy_error(gpuring_proxy_t *proxy, char *msg, size_t len);

#endif /* GPURING_PROXY_PROXY_H */
