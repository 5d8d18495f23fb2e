/*
 * exec_host.h -- the host executor: runs step programs on host memory with
 * the host reduction primitive, over the connections of proxy/.
 *
 * Each channel is an independent program on its own pair of connections.
 * The host has one calling thread, so the executor interleaves the channels:
 * it advances every channel as far as its FIFOs allow, round-robin, and only
 * spins (timed, reporting) when no channel can move.
 *
 * With NET connections (args->proxy) the executor moves its own steps: after
 * an operation that posted or consumed a NET step it hands it to UCX
 * (gpuring_proxy_post: the step or the credit, no poll of the worker), and
 * on every empty poll it runs a proxy pass (gpuring_proxy_progress), so a
 * step goes out and a landed step is seen without waiting for the proxy
 * thread.  An empty poll yields the CPU only every spin_polls polls (0:
 * every time, for ranks that share cores).
 *
 * With args->zcopy, a NET step that an operation would only copy into the
 * output is asked, NSTEPS steps ahead, to land there instead of in its slot
 * (proxy/conn.h: zero copy; the executor looks ahead in the program for
 * it).  A call that fails cancels the receives it asked into its output.
 *
 * With args->ll, steps on SHM connections use the LL protocol (proxy/conn.h):
 * a received step is unpacked into the staging before the operation uses it,
 * and a sent one is packed from it.
 *
 * Every step received is checked against the call (proxy/conn.h: its byte
 * count and call id): a step of another call fails the call with
 * GPURING_ERR_MISMATCH, one its sender abandoned with GPURING_ERR_REMOTE.  A
 * call that fails here for any reason (those, a timeout, a NET error) posts
 * an abandon step on every send connection with a free slot (a full SHM one
 * is marked abandoned instead; a full NET one's proxy posts it later) and
 * refuses every recv connection (proxy/conn.h), so the ranks waiting for a
 * step from this one, or for a slot it would free, fail at once and pass it
 * on, instead of timing out; a channel waiting for a slot its receiver
 * refused, or for a step from a sender that marked its FIFO abandoned, fails
 * with GPURING_ERR_REMOTE.
 */
#ifndef GPURING_KERNELS_EXEC_HOST_H
#define GPURING_KERNELS_EXEC_HOST_H

#include "common/gpuring_arrivals.h"
#include "common/gpuring_common.h"
#include "kernels/prog_ops.h"
#include "kernels/reduce.h"
#include "proxy/conn.h"

struct gpuring_proxy;

typedef struct gpuring_exec_channel {
    gpuring_prog_t prog;
    /* peer i's connections (prog.h: ring peer 0 = next/prev; tree peer 0 = parent) */
    gpuring_conn_t *send[GPURING_MAX_PEERS];
    gpuring_conn_t *recv[GPURING_MAX_PEERS];
    const int *dev_ranks; /* CUDA executor: device memory copy of prog.ranks (or NULL) */
    uint64_t next_op;     /* executor state: next operation of prog */
    gpuring_step_t step;  /* host executor: operation next_op, while it waits for it */
    uint64_t step_op;     /* which operation `step` is (UINT64_MAX: none yet) */
    /* host executor, args->zcopy: per peer, the look-ahead of the recv end: the next
     * operation to look at, and the step the next one receiving from that peer takes */
    uint64_t land_op[GPURING_MAX_PEERS];
    uint64_t land_step[GPURING_MAX_PEERS];
} gpuring_exec_channel_t;

/* gpuring_enqueue_start sets every field one by one (no zero-filling
 * literal on the per-call path): a field added here is set there too. */
typedef struct gpuring_exec_args {
    const void *sendbuf; /* == recvbuf for in place */
    void *recvbuf;
    size_t count;        /* elements of the whole call */
    gpuring_type_t type;
    gpuring_op_t op;
    int nchannels;
    gpuring_exec_channel_t *channels;
    void *scratch;               /* ordered GATHER: nranks rows of count elements */
    double timeout;              /* seconds without progress before reporting */
    gpuring_arrivals_t *arrivals; /* asked at each timeout: a rank of this host late to
                                    the call? (NULL: none; common/gpuring_arrivals.h) */
    uint64_t call_seq;           /* the call's number on its communicator (the board's) */
    double late_since;           /* when the call first found such a rank (0: not yet) */
    struct gpuring_proxy *proxy; /* NULL when no channel uses a NET connection */
    int spin_polls;              /* empty polls between yields (0: yield every time) */
    uint64_t call;               /* gpuring_call_id of this call: posted with every step,
                                    checked on every step received (proxy/conn.h) */
    int ll;                      /* the low-latency protocol on every connection that has
                                    it (proxy/conn.h; steps of at most
                                    GPURING_LL_STEP_BYTES) */
    void *ll_stage;              /* host executor, ll: GPURING_EXEC_LL_STAGE_BYTES where LL
                                    steps are unpacked and packed */
    gpuring_status_t status;     /* out: GPURING_OK, or why the call failed */
    int stream_out;              /* the call's output is written around the cache
                                    (non-temporal stores): too large for the caches, and
                                    not read again during the call (the caller decides) */
    size_t net_stream_bytes;     /* host executor: steps of at least this many bytes are
                                    written into a NET send slot around the cache
                                    (non-temporal stores; exec_host.c; 0: every step) */
    int zcopy;                   /* host executor: steps on NET connections land straight
                                    in the output where the program only copies them
                                    there (proxy/conn.h: zero copy; the caller decides) */
    const char *coll;            /* the collective, for messages (NULL: "allreduce") */
    double idle_since;           /* test: when the call last stopped moving (0: moving) */
    unsigned idle_polls;         /* test: passes since it last moved */
} gpuring_exec_args_t;

/* The collective's name in the executors' messages. */
static inline const char *gpuring_exec_coll_name(const gpuring_exec_args_t *a)
{
    return a->coll != NULL ? a->coll : "allreduce";
}

/* Does this call's step on `conn` use the LL protocol?  The same on both ends (the
 * call's plan, and a property of the connection); both executors ask it. */
static inline int gpuring_exec_ll(const gpuring_exec_args_t *a, const gpuring_conn_t *conn)
{
    return a->ll && conn->ll != NULL;
}

/* NET steps of at least this many bytes are written into their send slot
 * around the cache by default (exec_host.c; coll_gpuring_net_stream_size):
 * above UCX's own eager sizes, where the transport reads the slot itself.
 * (On one host coll_gpuring_net_rndv_size makes 64 KiB steps eager: UCX
 * then copies them from the slot on this core; streamed or not, 512 KiB
 * and 1 MiB calls measured the same within the host's spread.)
 * Measured, 2 ranks as 2 virtual nodes on 2 cores, 16 MiB allreduce: copies
 * into the send slots took 31-44% of a rank's perf samples before, 9-16%
 * after (the reduction now writes its slot in its own pass); the call took
 * 0.83x the time (medians of 9 alternating pairs; 64 MiB 0.81x, 4 ranks
 * 0.92x).  An hour later, the two virtual CPUs handing a line across in
 * 49-81 ns, the same time with and without (7 and 11 pairs): the gain is
 * where that hand-off is slow, as between sockets or a NIC and a core. */
#define GPURING_NET_STREAM_BYTES (64u << 10)

/* The host executor's LL staging: one step per peer received, one sent. */
#define GPURING_EXEC_LL_STAGE_BYTES ((GPURING_MAX_PEERS + 1) * GPURING_LL_STEP_BYTES)

/* Run every channel's program to completion (timed, reporting waits):
 * start, then wait. */
gpuring_status_t gpuring_exec_host_run(gpuring_exec_args_t *args);

/*
 * The same in pieces, for callers that must not block: start, then test
 * until it returns 1 (the call ended: args->status says how; its output is
 * complete, or a failed call's abandon steps are posted).  A test is one
 * pass: every channel as far as its FIFOs allow, then (nothing moved) a
 * proxy pass; *moved_p says whether anything moved.  The call fails with
 * GPURING_ERR_TIMEOUT in the test that finds it `timeout` seconds without
 * progress, so any thread may test it, at any rate.  wait tests until the
 * end, yielding the CPU after spin_polls empty passes.
 */
void gpuring_exec_host_start(gpuring_exec_args_t *args);
int gpuring_exec_host_test(gpuring_exec_args_t *args, int *moved_p);
gpuring_status_t gpuring_exec_host_wait(gpuring_exec_args_t *args);

/* A call this rank gives up on: an abandon step (proxy/conn.h) on every send
 * connection of its channels and every recv connection refused, so that its
 * peers fail at once rather than at their timeout -- as a failing executor
 * does, for a caller whose call fails before its executor moved a step. */
void gpuring_exec_host_abandon(gpuring_exec_args_t *args);

/* Has a NET connection of the call's channels failed (proxy.h:
 * gpuring_conn_net_error)?  Its status and message (the first such
 * connection's); GPURING_OK if none.  The CUDA executor asks it too. */
gpuring_status_t gpuring_exec_net_error(const gpuring_exec_args_t *args, char *msg, size_t len);

/* The channels' operations alone, for a caller that drives many executors
 * from one thread (the simulation): progress until *done_p or a failure
 * (args->status); returns 1 if any operation ran. */
int gpuring_exec_host_progress(gpuring_exec_args_t *args, int *done_p);

#endif /* GPURING_KERNELS_EXEC_HOST_H */
