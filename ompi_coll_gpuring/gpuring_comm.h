/*
 * gpuring_comm.h -- gpuring's per-communicator state and its collectives,
 * with no Open MPI type in sight: coll_gpuring_*.c translate MPI to this.
 *
 * Setup (gpuring_comm_create) is the first half of NCCL's
 * initTransportsRank over bootstrap_mpi: peer info allgather -> graph
 * (nodes, rings, trees) -> UCX address allgather when there is more than one
 * node -> agreement.  Every rank takes part in every exchange even after a
 * local failure, and the final agreement makes the result all-or-nothing,
 * so a failed setup never leaves a rank waiting.  A rank that cannot make its
 * part of an exchange at all (no memory for it) leaves the exchanges
 * (bootstrap.h): it and the others then fail, never fall back.
 *
 * Connections (the second half: connection handle allgather -> connect ->
 * agreement) come in two planes, one per executor, each connected at the
 * communicator's first call on its memory (gpuring_comm_plane_ready): the
 * host plane (shm and net FIFOs in host memory, the host executor) and the
 * device plane (CUDA IPC FIFOs in device memory inside a node, net FIFOs
 * the GPU reaches between nodes, the CUDA executor, the communicator's CUDA
 * stream).  Trees of either plane at the plane's first tree call.  Each of
 * those calls is collective (every rank plans alike), and all-or-nothing in
 * the same way; a communicator only ever used on device buffers never makes
 * host FIFOs.
 *
 * The life cycle is gpuring_comm.c's, connections and planes
 * gpuring_conns.c's, the collectives gpuring_collectives.c's (ordered by
 * gpuring_async.c, each planned and launched by gpuring_enqueue.c);
 * gpuring_comm_internal.h maps the layers.
 */
#ifndef GPURING_COMM_H
#define GPURING_COMM_H

#include "bootstrap_mpi/bootstrap.h"
#include "common/gpuring_arrivals.h"
#include "graph/graph.h"
#include "kernels/exec_host.h"
#include "kernels/reduce.h"
#include "proxy/conn.h"
#include "proxy/proxy.h"

/* Which executor, and so which memory, a connection serves. */
typedef enum {
    GPURING_PLANE_HOST = 0,   /* host buffers: shm, net */
    GPURING_PLANE_DEVICE = 1, /* device buffers: cuda ipc, net mapped for the GPU */
    GPURING_PLANE_COUNT = 2,
} gpuring_plane_t;

typedef struct gpuring_comm_config {
    gpuring_algo_t algo;   /* AUTO or forced */
    int nchannels;         /* host plane: channels set up (each call may use fewer) */
    int device_nchannels;  /* device plane: the same, 0: what the GPUs hold (agreed) */
    int call_nchannels;    /* 0: tuned per call, else forced */
    size_t slot_bytes[GPURING_PLANE_COUNT]; /* bytes per FIFO slot, per plane */
    size_t chunk_bytes;    /* 0: one slot */
    gpuring_proto_t proto; /* AUTO or forced (graph.h) */
    double wait_timeout;   /* seconds */
    double arrival_timeout; /* seconds a call waits for a rank of its host that has not
                               made it yet (0: no bound; gpuring_arrivals.h) */
    int ranks_per_node;    /* 0: real hosts */
    int net_gpu_direct;    /* device plane: NET slots in device memory where UCX and the GPU allow */
    int direct;            /* device buffers, one node: the direct allreduce through CUDA IPC */
    size_t direct_ll_bytes; /* ... calls up to this size by the LL direct allreduce (0: never) */
    const char *topo_xml;  /* hwloc XML to use instead of this machine ("" or NULL: this one) */
    int net_peer_failure;  /* gpuring_proxy_peer_failure_t: which endpoints detect dead peers */
    int net_rndv_size;     /* NET steps this large go by UCX's rendezvous: -1 by where the
                              ranks are (gpuring_conns.c), 0 UCX's own threshold */
    int nonblocking_setup; /* a non-blocking call may connect trees (it waits for every rank) */
    size_t stream_bytes;   /* host buffers: outputs this large are streamed (0: by the cache) */
    size_t net_stream_bytes; /* host buffers: NET steps this large are streamed into their
                                send slot (0: GPURING_NET_STREAM_BYTES) */
    int net_zcopy;         /* host buffers: NET steps land straight in the call's output */
    int progress_bind;     /* the progress thread's CPUs: those of the binding nearest the
                              rank's GPU or NIC (gpuring_conns.c) */
} gpuring_comm_config_t;

/* What a connection is for; together with peer, channel and direction it
 * names the connection on both ends. */
typedef enum {
    GPURING_EDGE_RING = 0,      /* ring: to next / from prev */
    GPURING_EDGE_TREE_UP = 1,   /* tree: child -> parent (reduce) */
    GPURING_EDGE_TREE_DOWN = 2, /* tree: parent -> child (broadcast) */
} gpuring_edge_kind_t;

typedef struct gpuring_comm_edge {
    int peer;
    int channel;
    gpuring_conn_dir_t dir;
    gpuring_edge_kind_t kind;
    gpuring_plane_t plane;
} gpuring_comm_edge_t;

/* Edges one rank can have per channel and plane: ring next and prev, tree
 * parent both ways, and up to three children both ways. */
#define GPURING_COMM_EDGES_PER_CHANNEL (2 + 2 + 2 * 3)
#define GPURING_COMM_MAX_EDGES \
    (GPURING_PLANE_COUNT * GPURING_MAX_CHANNELS * GPURING_COMM_EDGES_PER_CHANNEL)

/* Events a communicator's non-blocking device calls record the default stream's order
 * in, in turn (gpuring_enqueue_prepare): more calls queued than this only wait longer. */
#define GPURING_COMM_ORDER_EVENTS 64

/* The device plane's CUDA state. */
typedef struct gpuring_comm_device {
    int ordinal;        /* the GPU the plane was connected on, -1 before */
    int64_t pci_id;     /* its PCI address (gpuring_device_pci_id): which ranks share it */
    void *stream;       /* private non-blocking stream: every device call runs on it */
    void *event;        /* orders the stream after the legacy default stream's work */
    void *order_events[GPURING_COMM_ORDER_EVENTS]; /* ... for calls launched later */
    unsigned order_next;                           /* the next of them to record */
    void *scratch;      /* ordered GATHER rows in device memory, grown on demand */
    int *rings;         /* a device copy of graph.rings (the RS/AG programs' ranks) */
    size_t scratch_bytes;
    void *bounce;       /* aligned copies of buffers not aligned to their elements, grown on
                         * demand (gpuring_enqueue.c) */
    size_t bounce_bytes;
    int net_device;     /* NET slots: this GPU's ordinal (GPU-direct), or -1 (pinned host staging) */
    const char *net_staging_why; /* why not GPU-direct, for the log */
    int direct_state;   /* direct allreduce: 0 not run yet, 1 ran */
    /* the direct allreduce's declines in a row (some rank's buffers could not be shared,
     * or mapped), and the calls left that take the FIFOs without asking (every rank
     * counts alike) */
    int direct_declines, direct_skip;
    int direct_ll_state; /* LL direct allreduce: 0 not set up, 1 ready, -1 off for good (agreed) */
    size_t direct_ll_bytes; /* agreed: the calls it takes, at most */
    size_t direct_ll_slot;  /* agreed: bytes per sender slot of every inbox */
    void *ll_inbox;         /* this rank's inbox (gpuring_exec_cuda_direct_ll) */
    void **ll_peers;        /* every rank's, mapped here (NULL at this rank) */
    uint64_t ll_seq;        /* LL direct calls made: the next one's sequence number */
    int direct_ll_nonblocking; /* a non-blocking call took it (said once) */
} gpuring_comm_device_t;

/* What a communicator (and, summed at destroy, this process) ran through gpuring, per collective, for the closing summary. */
typedef struct gpuring_comm_stats {
    uint64_t calls[3]; /* per gpuring_algo_t: ring, gather, tree */
    uint64_t direct_calls; /* device buffers, one node: the direct allreduce */
    uint64_t direct_ll_calls; /* ... and the LL direct allreduce */
    uint64_t device_calls; /* of all those, on device buffers */
    uint64_t bytes;        /* the calls' buffers (reduce-scatter, allgather: all blocks) */
} gpuring_comm_stats_t;

/* A plane's last planned call (gpuring_enqueue.c): the next call with the
 * same collective, count, type and root -- an application's loop --
 * takes its plan and channels as they are. */
typedef struct gpuring_comm_memo {
    int valid;
    gpuring_coll_kind_t kind;
    size_t count;
    gpuring_type_t type;
    int root;
    gpuring_plan_t plan;
    gpuring_exec_channel_t channels[GPURING_MAX_CHANNELS]; /* plan.nchannels of them */
} gpuring_comm_memo_t;

typedef struct gpuring_comm {
    gpuring_comm_config_t cfg;
    gpuring_bootstrap_t boot;
    gpuring_graph_t graph;
    uint64_t uid;            /* unique among this process's communicators: tags */
    int uid_claimed;         /* uid registered as live in this process */
    gpuring_proxy_t *proxy;  /* set when this rank has a NET connection */
    int broken;              /* a collective failed midway: refuse further calls (atomic:
                                the worker of non-blocking calls sets it too) */
    uint64_t calls;          /* calls with data begun here: the next call's number (call ids) */
    gpuring_arrivals_t *arrivals; /* which call each rank of this host is in (NULL: none) */
    /* what its calls ran: plain counters (its calls end one at a time), added to
     * the process's at destroy -- no locked instruction on a call's path */
    gpuring_comm_stats_t stats[GPURING_COLL_COUNT];
    /* connections, one per edge, connected plane by plane (see above) */
    int nconns;
    gpuring_comm_edge_t edges[GPURING_COMM_MAX_EDGES];
    gpuring_conn_t conns[GPURING_COMM_MAX_EDGES];
    /* per plane: 0 not connected, 1 connected, -1 failed (rings: the plane
     * falls back; trees: rings only) */
    int ring_state[GPURING_PLANE_COUNT];
    int tree_state[GPURING_PLANE_COUNT];
    /* channels each plane connects (<= graph.nchannels, which has the most) */
    int plane_nch[GPURING_PLANE_COUNT];
    gpuring_comm_device_t dev;
    char *peer_addrs;        /* UCX worker addresses (stride apart), for later edges */
    size_t addr_stride;
    gpuring_peer_info_t *peers;
    int spin_polls;          /* host executor: empty polls between yields */
    size_t stream_bytes;     /* host executor: outputs of at least this many bytes are
                                written around the cache (gpuring_exec_args_t.stream_out) */
    size_t net_stream_bytes; /* host executor: NET steps of at least this many bytes are
                                written into their send slot around the cache */
    struct gpuring_async *async; /* non-blocking calls' queue and worker, from the first */
    gpuring_comm_memo_t memo[GPURING_PLANE_COUNT];
    void *scratch;           /* ordered GATHER rows, grown on demand */
    size_t scratch_bytes;
    /* the host executor's LL staging (gpuring_exec_args_t.ll_stage) */
    _Alignas(GPURING_CACHELINE) char ll_stage[GPURING_EXEC_LL_STAGE_BYTES];
} gpuring_comm_t;

/*
 * Collective.  GPURING_OK; GPURING_ERR_TIMEOUT (a member did not join within the
 * wait timeout) or GPURING_ERR_BROKEN (this rank out of step with the others:
 * an exchange failed, or it left them on a local failure; logged): the
 * communicator is unusable by gpuring, every call on it fails; another error:
 * every rank failed alike, and falls back (GPURING_ERR_REMOTE: boot->bad_rank
 * names the first rank that failed, for the log).
 */
gpuring_status_t gpuring_comm_create(const gpuring_comm_config_t *cfg,
                                     gpuring_bootstrap_t *boot, gpuring_comm_t **comm_p);
void gpuring_comm_destroy(gpuring_comm_t *comm);

/*
 * Collective, at a call on the plane's memory (device buffers: of GPU
 * `ordinal`, memkind's; host buffers: ordinal unused): connect the plane if
 * it is not yet.  GPURING_OK: the call runs (gpuring_comm_allreduce on that
 * plane).  GPURING_ERR_NOT_SUPPORTED: such calls fall back, on every rank
 * alike (no CUDA in this build, or the plane failed on some rank: logged).
 * GPURING_ERR_INVALID: this rank's device buffers are on another GPU than
 * the plane's (logged; the plane's GPU made current) -- a rank-local
 * condition, so the caller abandons the call on the plane
 * (gpuring_comm_abandon): the other ranks, which run it, fail at once rather
 * than wait, and the call is numbered on every rank alike.
 * GPURING_ERR_BROKEN: an exchange of the communicator's through the component
 * below failed (a rank late past the wait timeout: logged), here or earlier,
 * so no rank can fall back in step with the others; the communicator is broken
 * and the call fails.  Any other error: the plane's GPU cannot be made current.
 * The caller abandons the call on every error but GPURING_ERR_NOT_SUPPORTED.
 */
gpuring_status_t gpuring_comm_plane_ready(gpuring_comm_t *comm, gpuring_plane_t plane,
                                          int ordinal);

/*
 * This rank makes the communicator's next call, of `count` elements: published on
 * its host's arrival board (common/gpuring_arrivals.h) before any exchange or step of
 * the call, so that its host's peers waiting in them see it in the call.  The number
 * is the one the call then gets (gpuring_enqueue_prepare: calls with data are numbered
 * alike on every rank); a call that does not get it (handed below on every rank)
 * leaves this rank counted in it -- never late, at worst.  A broken communicator's
 * line stays past every call.  The caller's thread: the calls' order.
 */
static inline void gpuring_comm_arrive(gpuring_comm_t *comm, size_t count)
{
    if (count > 0 && !__atomic_load_n(&comm->broken, __ATOMIC_ACQUIRE))
        gpuring_arrivals_mark(comm->arrivals, comm->calls + 1);
}

/* What the arrival board says of this rank's current call, for an exchange of it that
 * waits (gpuring_arrivals_stop: GPURING_ERR_REMOTE, a rank of this host makes none of
 * the communicator's calls from it on -- its communicator failed; GPURING_ERR_MISMATCH,
 * one makes another call under its number; logged, naming it), else GPURING_OK: the
 * exchange would wait in vain.  Only for an exchange of a numbered call (the direct
 * allreduce's): a plane's connection exchanges, before the numbering, are made by a
 * broken rank too. */
gpuring_status_t gpuring_comm_exchange_stop(gpuring_comm_t *comm);

/*
 * An exchange of the communicator's current call (an allgather of gpuring's over MPI,
 * which the MCA module makes) idle for `timeout` s, asked of its host's arrival board: 1 to
 * wait on -- a rank of this host has not made the call yet (warned, naming it; since
 * *late_since_p, over the call's waits, up to the board's limit) --, 0 to fail -- the
 * late rank's process exited, the limit passed, or the communicator's ranks are all on
 * this host, every one in the call --, -1 where the board cannot tell: none on this
 * host (comm NULL, or a rank alone there), or a rank on another host may be the late
 * one.
 */
int gpuring_comm_exchange_late(gpuring_comm_t *comm, int timeout, double *late_since_p);

/* Has the plane's first call been made (connected, or failed for good)?  0:
 * gpuring_comm_plane_ready would connect it, exchanges every rank must join. */
static inline int gpuring_comm_plane_tried(const gpuring_comm_t *comm, gpuring_plane_t plane)
{
    return comm->ring_state[plane] != 0;
}

/*
 * Blocking allreduce on buffers of the plane's memory (host, or device
 * memory of the GPU the device plane was made on); sendbuf == recvbuf means
 * in place.  Device calls run on the communicator's stream and return when
 * the result is in recvbuf; the caller's streams must have finished writing
 * sendbuf.  Device calls with every rank on one node take the LL direct
 * allreduce up to cfg.direct_ll_bytes (each rank pushes its input into
 * every peer's inbox and reduces all of them: one kernel, no exchange; off
 * where ranks share a GPU without MPS), and above that the direct
 * allreduce when every rank's buffers can be shared by CUDA IPC: each rank
 * reduces its share of the buffer straight from all ranks' send buffers
 * into all ranks' receive buffers, so no kernel ever waits for another
 * (ranks sharing one GPU time-slice it, and a kernel waiting for another
 * process's would wait a time slice per step).  Otherwise the step programs
 * over the plane's FIFOs.  Waits first for the communicator's non-blocking
 * calls made before it.
 */
gpuring_status_t gpuring_comm_allreduce(gpuring_comm_t *comm, gpuring_plane_t plane,
                                        const void *sendbuf, void *recvbuf, size_t count,
                                        gpuring_type_t type, gpuring_op_t op);

/* A non-blocking call's end: called once, with its status, from the thread
 * that ended it -- the communicator's worker, or one in
 * gpuring_comm_async_step (or, for a call with nothing to run, the caller's,
 * before gpuring_comm_iallreduce returns). */
typedef void (*gpuring_comm_done_fn_t)(void *ctx, gpuring_status_t st);

/*
 * Non-blocking allreduce (MPI_Iallreduce), the same collective as
 * gpuring_comm_allreduce: checked, numbered and planned now, in the
 * caller's thread (trees may connect: collective), then run by the
 * communicator's worker thread -- started at the first such call -- or
 * stepped by threads that progress MPI (gpuring_comm_async_step), after
 * every call begun before it, so the caller's thread is free until it
 * needs the result (device buffers: the kernel runs while it works).
 * Calls of one communicator end in the order they were made, blocking
 * ones included: a blocking call first waits for the non-blocking calls
 * before it.  GPURING_OK: done(ctx, status) will be called exactly once;
 * until then the buffers belong to the call.  Anything else: nothing was
 * started (done is never called).  Never the direct allreduce, which
 * exchanges buffer handles through MPI at every call (the worker calls no
 * MPI): device calls take the FIFO programs, or the LL direct allreduce
 * where a blocking call has set it up (no exchange per call).
 */
gpuring_status_t gpuring_comm_iallreduce(gpuring_comm_t *comm, gpuring_plane_t plane,
                                         const void *sendbuf, void *recvbuf, size_t count,
                                         gpuring_type_t type, gpuring_op_t op,
                                         gpuring_comm_done_fn_t done, void *ctx);

/*
 * For any thread that progresses MPI (opal_progress): one pass over the
 * communicator's oldest non-blocking call on host buffers -- start it if
 * none runs, move what its connections allow, end it (its done function is
 * called here) -- without waiting for anything.  1 if anything moved or
 * ended; 0 if the call waits for its peers; -1 if no pass could be made
 * (another thread is in one, the worker runs a device call, or nothing is
 * queued): the caller may yield the core.  Makes no MPI call.
 */
int gpuring_comm_async_step(gpuring_comm_t *comm);

/*
 * The process's gpuring closes (MPI_Finalize) with communicators still alive --
 * kept by non-blocking calls the application never waited for (MPI_Finalize
 * releases its communicators, not their requests' hold): their workers finish
 * what is queued (each call within its wait timeout) and are joined here, so
 * that no thread of gpuring's runs once its code is unloaded.  Returns how
 * many there were.
 */
int gpuring_comm_async_finalize(void);


/*
 * The other collectives, with the same rules (blocking, the plane's memory,
 * collective, in place as noted), each on the ring (chains for bcast and
 * reduce):
 *  - reduce-scatter (MPI_Reduce_scatter_block): sendbuf holds nranks blocks
 *    of `count`; recvbuf gets this rank's block reduced.  In place: sendbuf
 *    == recvbuf, the result in its first block.
 *  - allgather: sendbuf's `bytes` to every rank's recvbuf at rank * bytes.
 *    In place: sendbuf == recvbuf + rank * bytes.
 *  - bcast: root's `bytes` of buf to every rank's buf.
 *  - reduce: the reduction of every rank's sendbuf into root's recvbuf (not
 *    touched elsewhere; may be NULL there).  In place at root: sendbuf ==
 *    recvbuf.
 */
gpuring_status_t gpuring_comm_reduce_scatter(gpuring_comm_t *comm, gpuring_plane_t plane,
                                             const void *sendbuf, void *recvbuf, size_t count,
                                             gpuring_type_t type, gpuring_op_t op);
gpuring_status_t gpuring_comm_allgather(gpuring_comm_t *comm, gpuring_plane_t plane,
                                        const void *sendbuf, void *recvbuf, size_t bytes);
gpuring_status_t gpuring_comm_bcast(gpuring_comm_t *comm, gpuring_plane_t plane, void *buf,
                                    size_t bytes, int root);
gpuring_status_t gpuring_comm_reduce(gpuring_comm_t *comm, gpuring_plane_t plane,
                                     const void *sendbuf, void *recvbuf, size_t count,
                                     gpuring_type_t type, gpuring_op_t op, int root);

/*
 * A call this rank cannot make while its peers make it (`kind`, count, type, op and
 * root as they pass them; `nonblocking` as they make it): no memory for what the
 * call needed before it could start -- a non-contiguous datatype's packed bytes, a
 * non-blocking call's request.  The call is numbered and planned here as there, and
 * abandoned on the connections it would use before any step moves (as an executor
 * abandons a call that fails), so that the peers fail at once ("rank N gave up on the
 * call") and not at coll_gpuring_wait_timeout; the communicator is broken from now
 * on.  Returns `why` (or the failure that kept it from telling them, logged).
 */
gpuring_status_t gpuring_comm_abandon(gpuring_comm_t *comm, gpuring_plane_t plane,
                                      gpuring_coll_kind_t kind, size_t count,
                                      gpuring_type_t type, gpuring_op_t op, int root,
                                      int nonblocking, gpuring_status_t why);

/* The process's, summed over its destroyed communicators (all of them at MPI_Finalize). */
void gpuring_comm_stats_get(gpuring_coll_kind_t coll, gpuring_comm_stats_t *stats);

/* One line describing the communicator, for the "ready" log. */
void gpuring_comm_describe(const gpuring_comm_t *comm, char *buf, size_t len);

#endif /* GPURING_COMM_H */
