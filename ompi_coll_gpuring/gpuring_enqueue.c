/*
 * gpuring_enqueue.c -- one collective call, planned and launched (NCCL's
 * enqueue), in two halves:
 *   prepare  in the caller's thread, in call order: the broken-communicator
 *            check, the call id every step carries, the direct allreduces
 *            where they apply (blocking calls run there; a non-blocking one
 *            takes the LL direct allreduce's next sequence number), the
 *            plan (graph/tuning: algorithm, channels, chunk; tree
 *            connections at the plane's first tree call), and each
 *            channel's step program of the call's family over a contiguous
 *            part of the buffers, with its connections;
 *   launch   the ordered gather's scratch, the host or CUDA executor (for a
 *            call this rank cannot run, info->fail, its abandon), the
 *            statistics: in the caller's thread for a blocking call, in the
 *            communicator's worker for a non-blocking one (gpuring_async.c).
 * Only prepare touches the communicator's connection set; launch touches
 * only the connections the work names, the scratch and the LL staging,
 * which one call at a time uses.  It calls only the layers below it.
 */
#include "kernels/device.h"
#include "kernels/exec_cuda.h"
#include "ompi_coll_gpuring/gpuring_comm_internal.h"

#include <stdlib.h>
#include <string.h>

/* Host calls of at least this many bytes land their NET steps in the output
 * (coll_gpuring_net_zcopy): below it, steps are UCX's eager messages, which
 * UCX copies anyway, and the executor's look-ahead would cost more than the
 * copy it saves. */
#define GPURING_ZCOPY_MIN_BYTES (64 * 1024)

/* a call runs each of its channels as one block of one CUDA kernel */
_Static_assert(GPURING_MAX_CHANNELS <= GPURING_EXEC_CUDA_MAX_CHANNELS,
               "the CUDA executor runs fewer channels than a communicator may have");
/* a sliced ring loop opens with its slices' sends back to back, before it receives:
 * as many as a connection's slots would fill every FIFO of the ring at once (a
 * deadlock every rank sits in until its wait timeout) */
_Static_assert(GPURING_RING_NET_SLICES < GPURING_NSTEPS,
               "a sliced ring needs fewer slices than a connection has slots");

/* The channel's tree connections (kernels/prog.h: peer 0 the parent, 1 + i child i):
 * both directions on every edge, whichever way the program's data flows. */
static void enqueue_tree_conns(gpuring_comm_t *c, gpuring_plane_t plane,
                               gpuring_exec_channel_t *x, int ch)
{
    const gpuring_graph_t *g = &c->graph;

    if (g->tree_parent[ch] >= 0) {
        x->send[0] = gpuring_conns_find(c, plane, g->tree_parent[ch], ch, GPURING_CONN_SEND,
                                        GPURING_EDGE_TREE_UP);
        x->recv[0] = gpuring_conns_find(c, plane, g->tree_parent[ch], ch, GPURING_CONN_RECV,
                                        GPURING_EDGE_TREE_DOWN);
    }
    for (int i = 0; i < g->tree_nchild[ch]; i++) {
        x->send[1 + i] = gpuring_conns_find(c, plane, g->tree_child[ch][i], ch,
                                            GPURING_CONN_SEND, GPURING_EDGE_TREE_DOWN);
        x->recv[1 + i] = gpuring_conns_find(c, plane, g->tree_child[ch][i], ch,
                                            GPURING_CONN_RECV, GPURING_EDGE_TREE_UP);
    }
}

/* The allreduce's program on the channel (ring, gather or tree, as planned)
 * and the plane's connections it uses. */
static void enqueue_allreduce_channel(gpuring_comm_t *c, gpuring_plane_t plane,
                                      const gpuring_plan_t *plan, gpuring_exec_channel_t *x,
                                      int ch, size_t base, size_t n)
{
    const gpuring_graph_t *g = &c->graph;

    if (plan->algo == GPURING_ALGO_TREE) {
        gpuring_tree_prog_init(&x->prog, base, n, plan->chunk_elems, g->nranks,
                               g->tree_parent[ch] >= 0, g->tree_nchild[ch]);
        enqueue_tree_conns(c, plane, x, ch);
        return;
    }
    if (plan->algo == GPURING_ALGO_GATHER) {
        gpuring_gather_prog_init(&x->prog, base, n, g->nranks, g->ring_ix[ch], plan->ordered);
    } else {
        /* across nodes, blocks of several slot steps keep a NET connection busy */
        gpuring_ring_prog_init_sliced(&x->prog, base, n, plan->chunk_elems, g->nranks,
                                      g->ring_ix[ch], g->nnodes > 1 ? GPURING_RING_NET_SLICES : 1);
    }
    x->send[0] = gpuring_conns_find(c, plane, g->next[ch], ch, GPURING_CONN_SEND,
                                    GPURING_EDGE_RING);
    x->recv[0] = gpuring_conns_find(c, plane, g->prev[ch], ch, GPURING_CONN_RECV,
                                    GPURING_EDGE_RING);
}

/* Bcast or reduce on the channel's tree, rooted at the call's root: each rank's
 * data flows from (bcast) or to (reduce) its tree peer toward the root. */
static void enqueue_tree_channel(gpuring_comm_t *c, gpuring_plane_t plane,
                                 const gpuring_coll_info_t *info, const gpuring_plan_t *plan,
                                 gpuring_exec_channel_t *x, int ch, size_t base, size_t n)
{
    const gpuring_graph_t *g = &c->graph;
    const int toward = g->tree_toward[(size_t)ch * (size_t)g->nranks + (size_t)info->root];

    if (info->kind == GPURING_COLL_BCAST) {
        gpuring_tree_bcast_prog_init(&x->prog, base, n, plan->chunk_elems, g->nranks,
                                     g->tree_parent[ch] >= 0, g->tree_nchild[ch], toward);
    } else {
        gpuring_tree_reduce_prog_init(&x->prog, base, n, plan->chunk_elems, g->nranks,
                                      g->tree_parent[ch] >= 0, g->tree_nchild[ch], toward);
    }
    enqueue_tree_conns(c, plane, x, ch);
}

/* The ring programs of the other collectives (the call's per-rank count is
 * `stride`, for the block programs), on the ring's connections. */
static void enqueue_ring_channel(gpuring_comm_t *c, gpuring_plane_t plane,
                                 const gpuring_coll_info_t *info, const gpuring_plan_t *plan,
                                 gpuring_exec_channel_t *x, int ch, size_t base, size_t n)
{
    const gpuring_graph_t *g = &c->graph;
    const size_t row = (size_t)ch * (size_t)g->nranks;
    /* across nodes, blocks of several slot steps keep a NET connection busy */
    const int slices = g->nnodes > 1 ? GPURING_RING_NET_SLICES : 1;

    switch (info->kind) {
    case GPURING_COLL_REDUCE_SCATTER:
        gpuring_rs_prog_init(&x->prog, base, n, info->count, plan->chunk_elems, g->nranks,
                             g->ring_ix[ch], g->rings + row, slices);
        break;
    case GPURING_COLL_ALLGATHER:
        gpuring_ag_prog_init(&x->prog, base, n, info->count, plan->chunk_elems, g->nranks,
                             g->ring_ix[ch], g->rings + row, slices);
        break;
    case GPURING_COLL_BCAST:
        gpuring_bcast_prog_init(&x->prog, base, n, plan->chunk_elems, g->nranks,
                                g->ring_ix[ch], g->ring_pos[row + (size_t)info->root]);
        break;
    default:
        gpuring_reduce_prog_init(&x->prog, base, n, plan->chunk_elems, g->nranks,
                                 g->ring_ix[ch], g->ring_pos[row + (size_t)info->root]);
        break;
    }
    x->dev_ranks = plane == GPURING_PLANE_DEVICE && c->dev.rings != NULL ? c->dev.rings + row
                                                                       : NULL;
    x->send[0] = gpuring_conns_find(c, plane, g->next[ch], ch, GPURING_CONN_SEND,
                                    GPURING_EDGE_RING);
    x->recv[0] = gpuring_conns_find(c, plane, g->prev[ch], ch, GPURING_CONN_RECV,
                                    GPURING_EDGE_RING);
}

/* The channel's program, of the call's family, and the plane's connections
 * it uses: a new family adds its case. */
static void enqueue_channel_setup(gpuring_comm_t *c, gpuring_work_t *w, int ch, size_t base,
                                  size_t n)
{
    gpuring_exec_channel_t *x = &w->channels[ch];

    memset(x, 0, sizeof(*x));
    switch (w->info.kind) {
    case GPURING_COLL_ALLREDUCE:
        enqueue_allreduce_channel(c, w->plane, &w->plan, x, ch, base, n);
        break;
    case GPURING_COLL_BCAST:
    case GPURING_COLL_REDUCE:
        if (w->plan.algo == GPURING_ALGO_TREE) {
            enqueue_tree_channel(c, w->plane, &w->info, &w->plan, x, ch, base, n);
            break;
        }
        enqueue_ring_channel(c, w->plane, &w->info, &w->plan, x, ch, base, n);
        break;
    default:
        enqueue_ring_channel(c, w->plane, &w->info, &w->plan, x, ch, base, n);
        break;
    }
}

/* *buf: at least `bytes` of the plane's memory, *have of them (contents not kept),
 * grown on demand (device memory in the order of the communicator's stream: waiting
 * for no other kernel); `what` names it in the error. */
static gpuring_status_t enqueue_grow(gpuring_comm_t *c, gpuring_plane_t plane, void **buf,
                                     size_t *have, size_t bytes, const char *what)
{
    gpuring_status_t st = GPURING_OK;

    if (*have >= bytes) return GPURING_OK;
    if (plane == GPURING_PLANE_HOST) {
        free(*buf);
        *buf = malloc(bytes);
        if (*buf == NULL) st = GPURING_ERR_NO_MEMORY;
    } else {
        gpuring_device_free_ordered(*buf, c->dev.stream);
        *buf = NULL;
        st = gpuring_device_alloc_ordered(bytes, c->dev.stream, buf);
    }
    *have = st == GPURING_OK ? bytes : 0;
    if (st != GPURING_OK) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "no memory for %zu B of %s (%s): this rank's call "
                      "fails, and its peers are told", bytes, what,
                      gpuring_comm_plane_name(plane));
    }
    return st;
}

/* The ordered gather's rows, in the plane's memory (contents not kept). */
static gpuring_status_t enqueue_scratch(gpuring_comm_t *c, gpuring_plane_t plane, size_t bytes,
                                        void **scratch_p)
{
    void **buf = plane == GPURING_PLANE_HOST ? &c->scratch : &c->dev.scratch;
    size_t *have = plane == GPURING_PLANE_HOST ? &c->scratch_bytes : &c->dev.scratch_bytes;
    gpuring_status_t st = enqueue_grow(c, plane, buf, have, bytes, "gather scratch");

    *scratch_p = *buf;
    return st;
}

/* Does the plane's last planned call have this call's plan and channels?
 * (they depend on the collective, count, type and root alone: the op and
 * the buffers are the executor's arguments, and the connections, once made,
 * stay) */
static int enqueue_memo_hit(const gpuring_comm_memo_t *memo, const gpuring_coll_info_t *info)
{
    return memo->valid && memo->kind == info->kind && memo->count == info->count &&
           memo->type == info->type && memo->root == info->root;
}

static void enqueue_memo_keep(gpuring_comm_memo_t *memo, const gpuring_work_t *w)
{
    memo->valid = 1;
    memo->kind = w->info.kind;
    memo->count = w->info.count;
    memo->type = w->info.type;
    memo->root = w->info.root;
    memo->plan = w->plan;
    memcpy(memo->channels, w->channels, (size_t)w->plan.nchannels * sizeof(w->channels[0]));
}

/* The call's plan (graph/tuning) and each channel's program of its family
 * over a contiguous part of the buffers, with its connections. */
static void enqueue_plan(gpuring_comm_t *c, gpuring_work_t *w, int may_connect)
{
    const gpuring_coll_info_t *info = &w->info;
    const gpuring_plane_t plane = w->plane;
    const size_t count = info->count;
    const size_t es = gpuring_type_size(info->type);
    gpuring_tuning_params_t tp = {.coll = info->kind,
                                  .algo = c->cfg.algo,
                                  .nchannels = c->cfg.call_nchannels,
                                  .max_channels = c->plane_nch[plane],
                                  .device = plane == GPURING_PLANE_DEVICE,
                                  .chunk_bytes = c->cfg.chunk_bytes,
                                  .slot_bytes = c->cfg.slot_bytes[plane],
                                  .trees = c->tree_state[plane] > 0 ||
                                           (c->tree_state[plane] == 0 && may_connect),
                                  .proto = c->cfg.proto};
    /* the order ranks fold inputs in changes no bit of these results */
    /* (integers only: float min/max keep the first operand of equal ones, so
     * +0/-0 and nan depend on the order; float sum/prod keep the first nan's
     * payload -- even with two ranks, each folds the other's value second) */
    const int order_free = gpuring_type_is_integer(info->type);
    size_t per_channel;

    gpuring_tuning_plan(&c->graph, &tp, count, es, order_free, &w->plan);
    if (w->plan.algo == GPURING_ALGO_TREE && !gpuring_conns_trees_ready(c, plane)) {
        tp.trees = 0; /* every rank saw the same failure */
        gpuring_tuning_plan(&c->graph, &tp, count, es, order_free, &w->plan);
    }
    per_channel = GPURING_DIV_UP(GPURING_DIV_UP(count, (size_t)w->plan.nchannels),
                                 (size_t)GPURING_PROG_ALIGN_ELEMS) *
                  GPURING_PROG_ALIGN_ELEMS; /* channels start on the alignment grid */
    for (int ch = 0; ch < w->plan.nchannels; ch++) {
        size_t base = GPURING_MIN(count, (size_t)ch * per_channel);
        enqueue_channel_setup(c, w, ch, base, GPURING_MIN(per_channel, count - base));
    }
}

/*
 * Order a device call after the default stream's work queued before it: recorded
 * now, the stream made to wait for it at once for a blocking call (the queue is
 * drained); for a non-blocking one, recorded in one of the communicator's order
 * events and waited for when the worker launches it (gpuring_enqueue_launch).
 * Made on the shared stream now, the wait would hold up the calls queued before
 * this one whose kernels the worker has not launched or seen end yet: they would
 * wait for work queued after them.
 */
static gpuring_status_t enqueue_order(gpuring_comm_t *c, int nonblocking, gpuring_work_t *w)
{
    void **event = nonblocking
                       ? &c->dev.order_events[c->dev.order_next++ % GPURING_COMM_ORDER_EVENTS]
                       : &c->dev.event;

    GPURING_CHECK(gpuring_device_event_record_default(event));
    if (nonblocking) {
        w->order = *event;
        return GPURING_OK;
    }
    return gpuring_device_stream_wait(c->dev.stream, *event);
}

/* A device call its order could not be given to (enqueue_order's or the launch's
 * status): a courtesy -- the caller must have synchronised -- so it goes on, every
 * rank being in this call. */
static void enqueue_order_check(gpuring_status_t st)
{
    if (st != GPURING_OK) {
        GPURING_WARN(GPURING_SUBSYS_COLL, "cannot order the call after the default stream's "
                     "work");
    }
}

/* GPURING_ERR_BROKEN (logged) once a call failed on the communicator: its FIFOs are
 * in that call's state, so no later call may post a step on them -- one prepared
 * before the failure (a non-blocking call queued behind it) included. */
static gpuring_status_t enqueue_refuse_broken(const gpuring_comm_t *c)
{
    if (!__atomic_load_n(&c->broken, __ATOMIC_ACQUIRE)) return GPURING_OK;
    /* (a call prepared as another thread broke it may have marked its number after:
     * this refuses from that one's next on) */
    gpuring_arrivals_refuse(c->arrivals);
    GPURING_ERROR(GPURING_SUBSYS_COLL, "communicator unusable after an earlier failure");
    return GPURING_ERR_BROKEN;
}

gpuring_status_t gpuring_enqueue_prepare(gpuring_comm_t *c, gpuring_plane_t plane,
                                         const gpuring_coll_info_t *info, int nonblocking,
                                         gpuring_work_t *w)
{
    const size_t count = info->count;
    gpuring_comm_memo_t *memo = &c->memo[plane];
    gpuring_status_t st;

    w->info = *info;
    w->plane = plane;
    w->done = 1;
    w->direct_ll = 0;
    w->order = NULL;
    GPURING_CHECK(enqueue_refuse_broken(c));
    if (count == 0) return GPURING_OK;
    /* every rank numbers the calls with data alike: the id its steps carry (this rank
     * is on its host's arrival board in the call since gpuring_comm_arrive) */
    w->seq = ++c->calls;
    w->call = gpuring_call_id(w->seq, count, info->type, info->op, (int)info->kind,
                              info->root);
    gpuring_arrivals_name(c->arrivals, w->seq, w->call);
    if (c->ring_state[plane] <= 0) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "%s connections are not ready",
                      gpuring_comm_plane_name(plane));
        return GPURING_ERR_INVALID;
    }
    if (plane == GPURING_PLANE_DEVICE) {
        enqueue_order_check(enqueue_order(c, nonblocking, w));
        GPURING_PROF_MARK(GPURING_PROF_ORDER);
    }
    /* a non-blocking call: the LL direct allreduce where a blocking call set it up (the
     * worker that runs the call makes no MPI call, and the direct allreduce exchanges
     * buffer handles through MPI at every call) */
    if (info->kind == GPURING_COLL_ALLREDUCE && plane == GPURING_PLANE_DEVICE && nonblocking &&
        gpuring_direct_ll_take(c, count * gpuring_type_size(info->type), &w->direct_ll_seq)) {
        if (!c->dev.direct_ll_nonblocking) {
            c->dev.direct_ll_nonblocking = 1;
            GPURING_INFO(GPURING_SUBSYS_COLL, "non-blocking device calls of up to %zu B run LL "
                         "direct too (in the communicator's worker)", c->dev.direct_ll_bytes);
        }
        w->direct_ll = 1;
        w->done = 0;
        return GPURING_OK;
    }
    if (info->kind == GPURING_COLL_ALLREDUCE && plane == GPURING_PLANE_DEVICE && !nonblocking &&
        gpuring_direct_usable(c)) {
        st = gpuring_direct_allreduce(c, info, w->call);
        if (st != GPURING_ERR_NOT_SUPPORTED) return st;
        /* every rank saw the same: all take the FIFOs */
    }
    if (enqueue_memo_hit(memo, info)) {
        w->plan = memo->plan;
        memcpy(w->channels, memo->channels, (size_t)w->plan.nchannels * sizeof(w->channels[0]));
    } else {
        /* a non-blocking call connects no trees where coll_gpuring_nonblocking_setup is
         * off (the exchanges wait for every rank): its plan is not kept for the calls
         * that may */
        const int may_connect = !nonblocking || c->cfg.nonblocking_setup;

        enqueue_plan(c, w, may_connect);
        if (may_connect || c->tree_state[plane] != 0) enqueue_memo_keep(memo, w);
    }
    w->done = 0;
    return GPURING_OK;
}

/*
 * A failed call's NET ends: what it left on them -- sends a peer busy elsewhere has not
 * taken, a refusal credit or an abort step waiting for a slot -- owes the progress
 * thread no spinning (gpuring_conn_net_quiet).  Its own ends only, which stay while it
 * runs: the communicator's list may grow meanwhile in the application's thread (the
 * next call connecting trees while the worker ends this one).
 */
static void enqueue_quiet(gpuring_work_t *w)
{
    for (int ch = 0; ch < w->args.nchannels; ch++) {
        for (int p = 0; p < GPURING_MAX_PEERS; p++) {
            gpuring_conn_net_quiet(w->args.channels[ch].send[p]);
            gpuring_conn_net_quiet(w->args.channels[ch].recv[p]);
        }
    }
}

/*
 * This rank's call failed before its executor moved a step (no memory for its
 * scratch or aligned copies, a copy that failed, or what it needed before the call:
 * info->fail): its peers wait for its steps, or for
 * slots it would free.  Tell them as a failing executor does -- an abandon step on
 * every send connection of the call's channels, every recv connection refused -- so
 * that they fail at once ("rank N gave up on the call"), not at
 * coll_gpuring_wait_timeout; the communicator is unusable from now on.
 */
static void enqueue_abandon(gpuring_comm_t *c, gpuring_work_t *w)
{
    gpuring_comm_set_broken(c);
    if (w->plane == GPURING_PLANE_HOST) {
        gpuring_exec_host_abandon(&w->args);
    } else {
        (void)gpuring_exec_cuda_abandon(&w->args, c->dev.stream);
    }
    enqueue_quiet(w); /* (after the abandon's steps: they go out at once) */
}

gpuring_status_t gpuring_enqueue_start(gpuring_comm_t *c, gpuring_work_t *w)
{
    const gpuring_coll_info_t *info = &w->info;
    const size_t es = gpuring_type_size(info->type);
    gpuring_exec_args_t *x = &w->args;
    void *scratch = NULL;
    gpuring_status_t st = GPURING_OK;

    GPURING_CHECK(enqueue_refuse_broken(c));
    st = info->fail; /* a call this rank cannot run: abandoned below */
    if (st == GPURING_OK && w->plan.ordered)
        st = enqueue_scratch(c, w->plane, info->count * es * (size_t)c->graph.nranks, &scratch);
    /* field by field: a zero-filled compound literal compiled to a `rep stos`,
     * 7-11% of an 8-byte broadcast on the project's machines (exec_host.h) */
    x->sendbuf = info->sendbuf;
    x->recvbuf = info->recvbuf;
    x->count = info->count;
    x->type = info->type;
    x->op = info->op;
    x->nchannels = w->plan.nchannels;
    x->channels = w->channels;
    x->scratch = scratch;
    x->timeout = c->cfg.wait_timeout;
    x->arrivals = c->arrivals;
    x->call_seq = w->seq;
    x->proxy = c->proxy;
    x->spin_polls = c->spin_polls;
    x->call = w->call;
    x->ll = w->plan.ll;
    x->ll_stage = c->ll_stage;
    x->status = GPURING_OK;
    x->stream_out = info->count * es >= c->stream_bytes;
    x->net_stream_bytes = c->net_stream_bytes;
    x->zcopy = w->plane == GPURING_PLANE_HOST && c->cfg.net_zcopy && c->proxy != NULL &&
               info->count * es >= GPURING_ZCOPY_MIN_BYTES;
    x->coll = gpuring_coll_names[info->kind];
    x->idle_since = 0.0;
    x->idle_polls = 0;
    if (st != GPURING_OK) {
        enqueue_abandon(c, w);
        return st;
    }
    /* both executors run the proxy's passes while they wait (the CUDA one from
     * the host thread that polls its kernel; GPU-direct slots stay the thread's) */
    if (c->proxy != NULL) gpuring_proxy_active_begin(c->proxy, 1);
    if (w->plane == GPURING_PLANE_HOST) gpuring_exec_host_start(&w->args);
    return GPURING_OK;
}

int gpuring_enqueue_test(gpuring_comm_t *c, gpuring_work_t *w, int *moved_p)
{
    (void)c;
    return gpuring_exec_host_test(&w->args, moved_p);
}

gpuring_status_t gpuring_enqueue_finish(gpuring_comm_t *c, gpuring_work_t *w)
{
    const gpuring_coll_info_t *info = &w->info;

    if (c->proxy != NULL) gpuring_proxy_active_end(c->proxy);
    if (w->args.status != GPURING_OK) {
        gpuring_comm_set_broken(c);
        enqueue_quiet(w);
        return w->args.status;
    }
    gpuring_comm_stats_count(c, info->kind, 0, w->plan.algo, w->plane,
                             info->count * gpuring_type_size(info->type) *
                                 (gpuring_coll_blocks(info->kind) ? (size_t)c->graph.nranks : 1));
    return GPURING_OK;
}

/* A copy on the call's stream into (`in`) or out of the aligned copy landed, within the
 * wait timeout: else the timeout logged, not a peer's doing (the copy in follows the
 * application's work on the default stream; the copy out, the call's kernel that ended). */
static gpuring_status_t enqueue_bounce_landed(gpuring_comm_t *c, int in)
{
    const gpuring_status_t st = gpuring_device_stream_idle(c->dev.stream, c->cfg.wait_timeout);

    if (st == GPURING_ERR_TIMEOUT) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "the copy %s aligned copy in device memory did not "
                      "land within coll_gpuring_wait_timeout (%.0f s)%s",
                      in ? "of the send buffer into its" : "of the result out of its",
                      (double)c->cfg.wait_timeout,
                      in ? ": the call's stream follows the application's work on the default "
                           "stream -- does a kernel of the application's not end?"
                         : ": the GPU did not run it (shared with kernels that do not end?)");
    }
    return st;
}

/*
 * The CUDA executor on a device call.  Where the element size does not divide a buffer's
 * address (MPI asks no alignment: a float array carved from a byte arena), a GPU cannot
 * access the elements: that buffer is replaced by an aligned one of the communicator's
 * bounce memory, the input copied in on the call's stream and waited for before the
 * kernel (a copy that failed abandons the call on every rank), the result copied out
 * after it and waited for.  Local to the rank: its peers see its FIFOs only
 * (the direct allreduce, whose peers map the buffers, declines such calls on every rank).
 * The copy out comes after every step of the call moved: its failure is this rank's
 * result alone (*out_p), not the communicator's -- its FIFOs are in step, its peers'
 * calls succeeded.
 */
static gpuring_status_t enqueue_run_device(gpuring_comm_t *c, gpuring_work_t *w,
                                           gpuring_status_t *out_p)
{
    const gpuring_coll_info_t *info = &w->info;
    gpuring_exec_args_t *x = &w->args;
    const size_t es = gpuring_type_size(info->type);
    const size_t block = info->count * es, all = block * (size_t)c->graph.nranks;
    const size_t in_bytes = info->kind == GPURING_COLL_REDUCE_SCATTER ? all : block;
    const size_t out_bytes = info->kind == GPURING_COLL_ALLGATHER ? all : block;
    const size_t in_span = GPURING_DIV_UP(GPURING_MAX(in_bytes, out_bytes), (size_t)256) * 256;
    const int in_place = info->sendbuf == info->recvbuf;
    const int bounce_in = (uintptr_t)info->sendbuf % es != 0;
    const int bounce_out = (uintptr_t)info->recvbuf % es != 0;
    const int writes = info->kind != GPURING_COLL_REDUCE || info->root == c->graph.rank;
    const size_t want = (bounce_in ? in_span : 0) + (bounce_out && !in_place ? out_bytes : 0);
    const int first = c->dev.bounce == NULL;
    char *bounce;
    gpuring_status_t st;

    if (!bounce_in && !bounce_out) return gpuring_exec_cuda_run(x, c->dev.stream);
    st = enqueue_grow(c, GPURING_PLANE_DEVICE, &c->dev.bounce, &c->dev.bounce_bytes, want,
                      "bounce memory for buffers not aligned to their elements");
    if (st == GPURING_OK && first) {
        GPURING_INFO(GPURING_SUBSYS_COLL, "device buffers not aligned to their elements: calls "
                     "run on aligned copies in device memory (%zu B, grown as calls need)",
                     c->dev.bounce_bytes);
    }
    bounce = c->dev.bounce;
    if (st == GPURING_OK && bounce_in) {
        st = gpuring_device_copy(bounce, info->sendbuf, in_bytes, c->dev.stream);
        x->sendbuf = bounce;
        /* ... and landed: a copy that fails when the GPU runs it would leave the kernel
         * sending the aligned copy's old bytes, its peers' sums wrong with MPI_SUCCESS */
        if (st == GPURING_OK) st = enqueue_bounce_landed(c, 1);
    }
    if (st != GPURING_OK) {
        enqueue_abandon(c, w);
        return st;
    }
    if (bounce_out) x->recvbuf = in_place ? bounce : bounce + (bounce_in ? in_span : 0);
    st = gpuring_exec_cuda_run(x, c->dev.stream);
    if (st != GPURING_OK || !bounce_out || !writes) return st;
    *out_p = gpuring_device_copy(info->recvbuf, x->recvbuf, out_bytes, c->dev.stream);
    if (*out_p == GPURING_OK) *out_p = enqueue_bounce_landed(c, 0);
    if (*out_p != GPURING_OK) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "%s: this rank's result could not be copied out "
                      "of its aligned copy into the receive buffer (above): the call fails "
                      "on this rank alone", gpuring_coll_names[info->kind]);
    }
    return GPURING_OK;
}

gpuring_status_t gpuring_enqueue_launch(gpuring_comm_t *c, gpuring_work_t *w)
{
    gpuring_status_t st, out = GPURING_OK; /* out: this rank's result alone failed */

    if (w->order != NULL) {
        enqueue_order_check(gpuring_device_stream_wait(c->dev.stream, w->order));
    }
    if (w->direct_ll) {
        GPURING_CHECK(enqueue_refuse_broken(c));
        return gpuring_direct_ll_run(c, &w->info, w->seq, w->call, w->direct_ll_seq);
    }
    st = gpuring_enqueue_start(c, w);

    if (st != GPURING_OK) return st;
    GPURING_PROF_MARK(GPURING_PROF_PLAN);
    if (w->plane == GPURING_PLANE_HOST) {
        (void)gpuring_exec_host_wait(&w->args);
        GPURING_PROF_MARK(GPURING_PROF_RUN);
    } else {
        w->args.status = enqueue_run_device(c, w, &out);
    }
    st = gpuring_enqueue_finish(c, w);
    return st != GPURING_OK ? st : out;
}
