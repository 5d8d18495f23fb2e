/*
 * gpuring_comm_internal.h -- what the files behind gpuring_comm.h share
 * with each other, and the map of them.  A call reads down these layers;
 * each file calls only those below it:
 *
 *   coll_gpuring_<coll>.c   the MCA entry (Open MPI types): checks, fallback,
 *                           the plane ready (gpuring_comm_plane_ready), the call
 *   gpuring_collectives.c   one thin function per collective: its program family
 *   gpuring_async.c         blocking calls after the non-blocking ones before
 *                           them; the worker thread that runs non-blocking calls
 *   gpuring_enqueue.c       one collective, prepared (the call id, the plan,
 *                           channels) and launched (scratch, an executor, stats)
 *   gpuring_direct.c        the direct allreduce (device buffers, one node)
 *   gpuring_comm.c          the communicator's life cycle: uid, create,
 *                           destroy, describe, the process's stats
 *   gpuring_conns.c         edges, connection ends, connecting the planes
 *
 * and under them bootstrap_mpi/, graph/, kernels/ and proxy/.  None of this
 * is for the MCA face: it includes gpuring_comm.h only.
 */
#ifndef GPURING_COMM_INTERNAL_H
#define GPURING_COMM_INTERNAL_H

#include "ompi_coll_gpuring/gpuring_comm.h"

static inline const char *gpuring_comm_plane_name(gpuring_plane_t plane)
{
    return plane == GPURING_PLANE_HOST ? "host" : "device";
}

/* Who peer r is, process-wide (its random name: bootstrap.h): the key of its NET and
 * IPC mappings. */
static inline uint64_t gpuring_comm_peer_key(const gpuring_comm_t *c, int r)
{
    return c->peers[r].proc_id;
}

/* The node is an XML file's (coll_gpuring_topo_xml: tests), not this machine */
static inline int gpuring_comm_topo_xml(const gpuring_comm_t *c)
{
    return c->cfg.topo_xml != NULL && c->cfg.topo_xml[0] != '\0';
}

/* The communicator's ranks on this rank's host (virtual nodes included). */
static inline long gpuring_comm_host_ranks(const gpuring_comm_t *c)
{
    long local = 0;

    for (int r = 0; r < c->boot.size; r++)
        local += c->peers[r].host_hash == c->peers[c->boot.rank].host_hash;
    return local;
}

/* Whether ranks r and q, whose GPUs have the PCI addresses gpu_r and gpu_q (c->dev.pci_id,
 * as each told it), share one GPU: the same address on the same machine (containers of
 * one machine with names of their own, as pods sharing a GPU through MPS, included). */
static inline int gpuring_comm_same_gpu(const gpuring_comm_t *c, int r, int64_t gpu_r, int q,
                                        int64_t gpu_q)
{
    return gpu_r == gpu_q && c->peers[r].machine_hash == c->peers[q].machine_hash;
}

/* ---- gpuring_enqueue.c: one collective, planned and launched ------------------------ */

/* One call, as its collective hands it over (NCCL's ncclInfo). */
/* Which collective (graph.h's gpuring_coll_kind_t) picks the channels'
 * family of step programs: a new collective adds its family there and its
 * programs' case in gpuring_enqueue.c's channel setup. */
typedef struct gpuring_coll_info {
    gpuring_coll_kind_t kind;
    const void *sendbuf; /* == recvbuf for in place; bcast: the buffer */
    void *recvbuf;       /* reduce: significant at the root only */
    size_t count;        /* elements; reduce-scatter and allgather: of each rank's block */
    gpuring_type_t type; /* allgather, bcast: UINT8 (a copy of bytes) */
    gpuring_op_t op;     /* unused by the copies (allgather, bcast) */
    int root;            /* bcast, reduce: the root's rank; 0 otherwise */
    /* GPURING_OK; else why this rank cannot run the call (gpuring_comm_abandon: no
     * buffers): it is numbered and planned as on its peers and abandoned on the
     * connections it would use before any step moves -- the executors' abandon, the
     * LL direct allreduce's abandon header, or, for the direct allreduce (which no
     * such call takes today: it is a blocking allreduce's), buffers no rank can map,
     * which sends every rank to the FIFOs -- so that the peers fail at once; the call
     * returns it, the communicator is broken */
    gpuring_status_t fail;
} gpuring_coll_info_t;

/* One call, prepared and ready to launch: a blocking call's on its caller's
 * stack, a non-blocking one's in the communicator's queue until its worker
 * runs it. */
typedef struct gpuring_work {
    gpuring_coll_info_t info;
    gpuring_plane_t plane;
    uint64_t seq;        /* the call's number on the communicator */
    uint64_t call;       /* gpuring_call_id */
    gpuring_plan_t plan;
    int done;            /* prepare did all of it (no data; the direct allreduce) */
    int direct_ll;       /* a non-blocking call the LL direct allreduce runs ... */
    uint64_t direct_ll_seq; /* ... its sequence number (gpuring_direct_ll_take) */
    void *order;         /* a non-blocking device call: the default stream's work before
                          * it, which its launch makes the stream wait for (NULL: none) */
    gpuring_exec_channel_t channels[GPURING_MAX_CHANNELS]; /* plan.nchannels of them */
    gpuring_exec_args_t args; /* from start on: the executor's call */
    /* gpuring_async.c: a non-blocking call's completion, and the queue */
    gpuring_comm_done_fn_t done_fn;
    void *done_ctx;
    struct gpuring_work *next;
} gpuring_work_t;

/*
 * The first half of a call, in the caller's thread and in call order on
 * every rank (it numbers the call, and may connect trees: collective).
 * GPURING_OK with w->done set: nothing left to launch (count 0, or the
 * direct allreduce ran it -- never for a nonblocking call).  Any other
 * status: the call failed (nothing to launch).
 */
gpuring_status_t gpuring_enqueue_prepare(gpuring_comm_t *c, gpuring_plane_t plane,
                                         const gpuring_coll_info_t *info, int nonblocking,
                                         gpuring_work_t *w);

/*
 * The second half: run the prepared call to its end on the plane's executor
 * (gpuring_comm_allreduce tells what that means for device buffers).  One
 * call of a communicator at a time, in the order they were prepared.  Any
 * failure midway marks the communicator broken (GPURING_ERR_BROKEN from then
 * on).  launch is start, the executor's wait, finish.
 */
gpuring_status_t gpuring_enqueue_launch(gpuring_comm_t *c, gpuring_work_t *w);

/*
 * The same without blocking, host buffers only: start, then test until it
 * returns 1, then finish (its status).  A test is one pass of the host
 * executor (gpuring_exec_host_test): any thread may make it, one at a time,
 * and none waits in it -- so an MPI thread can step a non-blocking call from
 * inside any MPI call without holding up that call's own progress.  A start
 * that fails needs no finish.
 */
gpuring_status_t gpuring_enqueue_start(gpuring_comm_t *c, gpuring_work_t *w);
int gpuring_enqueue_test(gpuring_comm_t *c, gpuring_work_t *w, int *moved_p);
gpuring_status_t gpuring_enqueue_finish(gpuring_comm_t *c, gpuring_work_t *w);

/* ---- gpuring_async.c: the order of blocking and non-blocking calls ------------------- */

/* A blocking call: after every non-blocking call begun before it has ended. */
gpuring_status_t gpuring_async_run(gpuring_comm_t *c, gpuring_plane_t plane,
                                   const gpuring_coll_info_t *info);

/* A call this rank cannot run (info->fail; gpuring_comm_abandon tells the contract),
 * prepared as a blocking or a non-blocking call is on its peers and abandoned after
 * every call begun before it: a blocking one in the caller's thread, a non-blocking one
 * queued (it returns at once).  Returns info->fail. */
gpuring_status_t gpuring_async_abandon(gpuring_comm_t *c, gpuring_plane_t plane,
                                       const gpuring_coll_info_t *info, int nonblocking);

/* A non-blocking call: prepared now, launched by the communicator's worker
 * (gpuring_comm_iallreduce tells the contract). */
gpuring_status_t gpuring_async_submit(gpuring_comm_t *c, gpuring_plane_t plane,
                                      const gpuring_coll_info_t *info,
                                      gpuring_comm_done_fn_t done, void *ctx);

/* At destroy: wait for the queued calls, stop the worker. */
void gpuring_async_destroy(gpuring_comm_t *c);

/* ---- gpuring_direct.c: the direct allreduce ------------------------------------------ */

/* The communicator may take the direct allreduce (one node, not turned off). */
int gpuring_direct_usable(const gpuring_comm_t *c);

/* The LL direct allreduce for small calls, else the direct one (counted in the
 * stats); GPURING_ERR_NOT_SUPPORTED: on every rank alike, the call takes the FIFOs. */
gpuring_status_t gpuring_direct_allreduce(gpuring_comm_t *c, const gpuring_coll_info_t *info,
                                          uint64_t call);

/* A call of `bytes` may take the LL direct allreduce, set up by an earlier blocking call
 * (a non-blocking call makes no exchange): 1, and its sequence number in *seq_p, taken
 * now, in call order; 0 if not (the same on every rank: they made the same calls). */
int gpuring_direct_ll_take(gpuring_comm_t *c, size_t bytes, uint64_t *seq_p);

/* Run a call (number call_seq, id `call`) that took the LL direct allreduce as its
 * `ll_seq`-th (on the communicator's stream, after every call taken before it; counted
 * in the stats). */
gpuring_status_t gpuring_direct_ll_run(gpuring_comm_t *c, const gpuring_coll_info_t *info,
                                       uint64_t call_seq, uint64_t call, uint64_t ll_seq);

/* At destroy (the device current): the inboxes unmapped and freed -- kept where a
 * kernel of the communicator still runs (`busy`). */
void gpuring_direct_destroy(gpuring_comm_t *c, int busy);

/* The communicator is unusable from now on (a call failed midway, or its ranks can no
 * longer agree): every later call is refused -- and its host's peers learn from the
 * arrival board that this rank makes none of them (gpuring_arrivals_refuse). */
static inline void gpuring_comm_set_broken(gpuring_comm_t *c)
{
    __atomic_store_n(&c->broken, 1, __ATOMIC_RELEASE);
    gpuring_arrivals_refuse(c->arrivals);
}

/* ---- gpuring_comm.c: the life cycle, the process's stats ---------------------------- */

/* One call of collective `coll` done on communicator c: the direct allreduce ran it (direct =
 * 1, the LL one 2; algo unused), or the plan's algorithm; the device count; the bytes. */
static inline void gpuring_comm_stats_count(gpuring_comm_t *c, gpuring_coll_kind_t coll,
                                            int direct, gpuring_algo_t algo,
                                            gpuring_plane_t plane, size_t bytes)
{
    gpuring_comm_stats_t *cs = &c->stats[coll];

    if (direct == 2) {
        cs->direct_ll_calls++;
    } else if (direct) {
        cs->direct_calls++;
    } else {
        cs->calls[algo]++;
    }
    cs->device_calls += plane == GPURING_PLANE_DEVICE;
    cs->bytes += bytes;
}

/* ---- gpuring_conns.c: connections ---------------------------------------------------- */

/* The connection of that edge, or NULL if the plane has none. */
gpuring_conn_t *gpuring_conns_find(gpuring_comm_t *c, gpuring_plane_t plane, int peer,
                                   int channel, gpuring_conn_dir_t dir, gpuring_edge_kind_t kind);

/* At create, collective: the proxy and every rank's UCX address when the
 * communicator spans nodes (a local failure in *local_st, still exchanging). */
gpuring_status_t gpuring_conns_net_setup(gpuring_comm_t *c, gpuring_status_t *local_st);

/* At the plane's calls planned as trees, collective: 1 when its tree
 * connections are (or now get) connected, 0 when every rank stays on rings. */
int gpuring_conns_trees_ready(gpuring_comm_t *c, gpuring_plane_t plane);

/* At destroy: every connection, peers' IPC FIFOs this rank opened first. */
void gpuring_conns_destroy(gpuring_comm_t *c);

#endif /* GPURING_COMM_INTERNAL_H */
