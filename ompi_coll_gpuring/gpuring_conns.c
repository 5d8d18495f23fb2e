/*
 * gpuring_conns.c -- a communicator's connections: its edges, each edge's
 * two ends, connecting a plane's rings or trees, the UCX addresses at
 * setup, and each plane made ready at its first call (see gpuring_comm.h).
 *
 * Connections are edges {peer, channel, direction, kind, plane}.  A batch
 * of edges is connected collectively: every rank creates its ends
 * (receivers own the FIFOs; NET senders their staging), the handles are
 * allgathered, each end finds its peer's matching handle, connects, and all
 * agree before the shm names go away.  A plane's ring edges are connected
 * at the first call on its memory, its tree edges at its first call whose
 * plan is a tree (every rank plans alike, so those calls are collective
 * too).
 *
 * Transport per edge: same node -> shm (host plane) or CUDA IPC (device
 * plane); another node -> net, whose ctrl page (and host slots: pinned host
 * staging) the device plane maps for the GPU, or whose slots are device
 * memory (GPU-direct).
 */
#include "kernels/devcopy.h"
#include "kernels/device.h"
#include "kernels/exec_cuda.h"
#include "ompi_coll_gpuring/gpuring_comm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *comm_edge_kind_name(gpuring_edge_kind_t kind)
{
    return kind == GPURING_EDGE_RING ? "ring" : kind == GPURING_EDGE_TREE_UP ? "tree up"
                                                                            : "tree down";
}

static void comm_edge_add(gpuring_comm_t *c, gpuring_plane_t plane, int peer, int channel,
                          gpuring_conn_dir_t dir, gpuring_edge_kind_t kind)
{
    c->edges[c->nconns++] = (gpuring_comm_edge_t){peer, channel, dir, kind, plane};
}

/* The label a handle carries so both ends match the same edge. */
static int32_t comm_edge_label(const gpuring_comm_edge_t *e)
{
    return (int32_t)e->kind | (int32_t)e->plane << 8;
}

/* The ring edges of every channel: to next, from prev. */
static void comm_edges_ring(gpuring_comm_t *c, gpuring_plane_t plane)
{
    for (int ch = 0; ch < c->plane_nch[plane]; ch++) {
        comm_edge_add(c, plane, c->graph.next[ch], ch, GPURING_CONN_SEND, GPURING_EDGE_RING);
        comm_edge_add(c, plane, c->graph.prev[ch], ch, GPURING_CONN_RECV, GPURING_EDGE_RING);
    }
}

/* The tree edges of every channel: both ways to the parent and each child. */
static void comm_edges_tree(gpuring_comm_t *c, gpuring_plane_t plane)
{
    const gpuring_graph_t *g = &c->graph;

    for (int ch = 0; ch < c->plane_nch[plane]; ch++) {
        const int parent = g->tree_parent[ch];
        if (parent >= 0) {
            comm_edge_add(c, plane, parent, ch, GPURING_CONN_SEND, GPURING_EDGE_TREE_UP);
            comm_edge_add(c, plane, parent, ch, GPURING_CONN_RECV, GPURING_EDGE_TREE_DOWN);
        }
        for (int i = 0; i < g->tree_nchild[ch]; i++) {
            const int child = g->tree_child[ch][i];
            comm_edge_add(c, plane, child, ch, GPURING_CONN_SEND, GPURING_EDGE_TREE_DOWN);
            comm_edge_add(c, plane, child, ch, GPURING_CONN_RECV, GPURING_EDGE_TREE_UP);
        }
    }
}

gpuring_conn_t *gpuring_conns_find(gpuring_comm_t *c, gpuring_plane_t plane, int peer,
                                   int channel, gpuring_conn_dir_t dir, gpuring_edge_kind_t kind)
{
    for (int i = 0; i < c->nconns; i++) {
        const gpuring_comm_edge_t *e = &c->edges[i];
        if (e->peer == peer && e->channel == channel && e->dir == dir && e->kind == kind &&
            e->plane == plane) {
            return &c->conns[i];
        }
    }
    return NULL;
}

static int comm_same_node(const gpuring_comm_t *c, int peer)
{
    return c->graph.node[peer] == c->graph.node[c->graph.rank];
}

/* This rank's end of edge i: receivers create the FIFO, NET senders staging. */
static gpuring_status_t comm_end_create(gpuring_comm_t *c, int i, gpuring_conn_handle_t *h)
{
    const gpuring_comm_edge_t *e = &c->edges[i];
    gpuring_conn_t *conn = &c->conns[i];

    if (!comm_same_node(c, e->peer)) {
        const int device = e->plane == GPURING_PLANE_DEVICE ? c->dev.net_device : -1;

        GPURING_CHECK(gpuring_conn_net_create(c->proxy, conn, e->dir, e->peer, e->channel,
                                              c->cfg.slot_bytes[e->plane], c->uid, (uint32_t)i,
                                              device, e->plane == GPURING_PLANE_DEVICE, h));
        /* the GPU writes and polls the host ctrl (and slots) the proxy serves */
        if (e->plane == GPURING_PLANE_DEVICE) GPURING_CHECK(gpuring_conn_map_device(conn));
    } else if (e->dir == GPURING_CONN_SEND) {
        return GPURING_OK; /* same-node sender: opens the receiver's FIFO at connect */
    } else if (e->plane == GPURING_PLANE_DEVICE) {
        GPURING_CHECK(gpuring_conn_ipc_recv_create(conn, e->peer, e->channel,
                                                   c->cfg.slot_bytes[GPURING_PLANE_DEVICE],
                                                   c->cfg.wait_timeout, h));
    } else {
        GPURING_CHECK(gpuring_conn_shm_recv_create(conn, e->peer, e->channel,
                                                   c->cfg.slot_bytes[GPURING_PLANE_HOST],
                                                   c->uid, h));
    }
    h->kind = comm_edge_label(e);
    return GPURING_OK;
}

/* The peer's end of edge i, from the allgathered handles. */
static const gpuring_conn_handle_t *comm_remote_end(const gpuring_comm_t *c, int i,
                                                    const gpuring_conn_handle_t *all,
                                                    int per_rank)
{
    const gpuring_comm_edge_t *e = &c->edges[i];
    const gpuring_conn_handle_t *h = all + (size_t)e->peer * (size_t)per_rank;
    const int32_t want_dir = e->dir == GPURING_CONN_SEND ? GPURING_CONN_RECV : GPURING_CONN_SEND;

    for (int k = 0; k < per_rank; k++) {
        if (h[k].type != 0 && h[k].peer == c->graph.rank && h[k].channel == e->channel &&
            h[k].dir == want_dir && h[k].kind == comm_edge_label(e)) {
            return &h[k];
        }
    }
    GPURING_ERROR(GPURING_SUBSYS_INIT, "rank %d published no %s %s %s end for channel %d",
                  e->peer, gpuring_comm_plane_name(e->plane), comm_edge_kind_name(e->kind),
                  want_dir == GPURING_CONN_RECV ? "recv" : "send", e->channel);
    return NULL;
}

/* Connect edge i to the peer's end; a shm receiver has nothing to do. */
static gpuring_status_t comm_end_connect(gpuring_comm_t *c, int i,
                                         const gpuring_conn_handle_t *all, int per_rank)
{
    const gpuring_comm_edge_t *e = &c->edges[i];
    gpuring_conn_t *conn = &c->conns[i];
    uint64_t key = gpuring_comm_peer_key(c, e->peer);
    const gpuring_conn_handle_t *remote;

    if (comm_same_node(c, e->peer) && e->dir == GPURING_CONN_RECV) return GPURING_OK;
    remote = comm_remote_end(c, i, all, per_rank);
    if (remote == NULL) return GPURING_ERR_INVALID;
    if (!comm_same_node(c, e->peer)) {
        const int same_host = c->peers[e->peer].host_hash == c->peers[c->graph.rank].host_hash;

        return gpuring_conn_net_connect(c->proxy, conn, remote, key, same_host,
                                        c->peer_addrs + c->addr_stride * (size_t)e->peer,
                                        c->addr_stride);
    }
    if (e->plane == GPURING_PLANE_DEVICE) {
        return gpuring_conn_ipc_send_connect(conn, e->peer, e->channel, remote);
    }
    return gpuring_conn_shm_send_connect(conn, e->peer, e->channel, remote);
}

/* Destroy one end.  flush_until: until when (gpuring_time_sec) the NET send ends
 * of a broken communicator may flush their queued abort steps, one deadline for
 * all of the communicator's ends. */
static void comm_conn_destroy(gpuring_comm_t *c, gpuring_conn_t *conn, double flush_until)
{
    if (conn->type == GPURING_CONN_SHM) {
        gpuring_conn_shm_destroy(conn);
    } else if (conn->type == GPURING_CONN_NET) {
        gpuring_conn_unmap_device(conn); /* before the host FIFO goes */
        /* no credit will come; the abort step still goes */
        if (c->broken) gpuring_conn_net_abandon(conn, flush_until - gpuring_time_sec());
        /* one teardown that timed out (a peer gone) abandons the rest: one timeout in all */
        if (gpuring_conn_net_destroy(c->proxy, conn) != GPURING_OK) gpuring_comm_set_broken(c);
    } else if (conn->type == GPURING_CONN_IPC) {
        gpuring_conn_ipc_destroy(conn);
    }
    conn->type = 0;
}

/* What the communicator's NET recv ends took in, for the log (verbose 3). */
static void comm_net_summary(const gpuring_comm_t *c)
{
    uint64_t steps = 0, zcopy = 0;
    int n = 0;

    for (int i = 0; i < c->nconns; i++) {
        gpuring_conn_net_stats_t st;

        if (c->conns[i].type != GPURING_CONN_NET || c->conns[i].dir != GPURING_CONN_RECV) continue;
        gpuring_conn_net_stats(&c->conns[i], &st);
        steps += st.steps;
        zcopy += st.zcopy;
        n++;
    }
    if (n > 0)
        GPURING_INFO(GPURING_SUBSYS_NET, "net connections closing: %d received %llu steps, "
                     "%llu of them straight into the output (zero copy)", n,
                     (unsigned long long)steps, (unsigned long long)zcopy);
}

void gpuring_conns_destroy(gpuring_comm_t *c)
{
    const double flush_until = gpuring_time_sec() + GPURING_NET_ABANDON_FLUSH_S;

    comm_net_summary(c);
    for (int i = 0; i < c->nconns; i++) {
        if (c->conns[i].type != GPURING_CONN_NET) continue;
        gpuring_conn_net_closing(c->proxy, c->uid);
        break;
    }
    /* peers' FIFOs this rank opened are closed before its own are freed */
    for (int i = 0; i < c->nconns; i++) {
        if (c->conns[i].type == GPURING_CONN_IPC && c->conns[i].dir == GPURING_CONN_SEND)
            comm_conn_destroy(c, &c->conns[i], flush_until);
    }
    for (int i = 0; i < c->nconns; i++) comm_conn_destroy(c, &c->conns[i], flush_until);
}

/*
 * Connect edges [first, nconns) on every rank: all-or-nothing.  A local
 * failure still takes part in every exchange; on failure the new ends are
 * destroyed and nconns goes back to first on every rank.
 */
static gpuring_status_t comm_connect(gpuring_comm_t *c, int first, gpuring_status_t local_st)
{
    gpuring_conn_handle_t *mine, *all;
    int per_rank, max_local = c->nconns - first;
    int32_t counts_mine = max_local, *counts;
    gpuring_status_t st;

    /* every rank publishes as many handles as the rank with the most edges */
    counts = malloc(sizeof(int32_t) * (size_t)c->boot.size);
    if (counts == NULL) {
        return gpuring_bootstrap_leave(&c->boot, GPURING_ERR_NO_MEMORY,
                                       "allocating the connections' counts exchange");
    }
    st = gpuring_bootstrap_allgather(&c->boot, &counts_mine, counts, sizeof(counts_mine),
                                     "setup exchange of the connection counts");
    per_rank = 1;
    for (int r = 0; st == GPURING_OK && r < c->boot.size; r++) {
        per_rank = GPURING_MAX(per_rank, counts[r]);
    }
    free(counts);
    if (st != GPURING_OK) return st;

    mine = calloc((size_t)per_rank, sizeof(*mine));
    all = calloc((size_t)per_rank * (size_t)c->boot.size, sizeof(*all));
    if (mine == NULL || all == NULL) {
        free(mine);
        free(all);
        return gpuring_bootstrap_leave(&c->boot, GPURING_ERR_NO_MEMORY,
                                       "allocating the connection handles' exchange");
    }
    for (int i = first; local_st == GPURING_OK && i < c->nconns; i++) {
        local_st = comm_end_create(c, i, &mine[i - first]);
    }
    if (local_st != GPURING_OK) memset(mine, 0, sizeof(*mine) * (size_t)per_rank);
    GPURING_CHECK_GOTO(gpuring_bootstrap_allgather(&c->boot, mine, all,
                                                   sizeof(*mine) * (size_t)per_rank,
                                                   "setup exchange of the connection handles"),
                       st, out);
    GPURING_CHECK_GOTO(gpuring_bootstrap_agree(&c->boot, local_st,
                                               "setup agreement that every rank made its "
                                               "connection ends"),
                       st, out);
    for (int i = first; local_st == GPURING_OK && i < c->nconns; i++) {
        local_st = comm_end_connect(c, i, all, per_rank);
    }
    st = gpuring_bootstrap_agree(&c->boot, local_st,
                                 "setup agreement that every rank connected");
    for (int i = first; i < c->nconns; i++) {
        if (c->conns[i].type == GPURING_CONN_SHM) gpuring_conn_shm_unlink(&c->conns[i]);
    }
out:
    if (st != GPURING_OK) {
        for (int i = first; i < c->nconns; i++) comm_conn_destroy(c, &c->conns[i], 0.0);
        c->nconns = first;
    }
    free(mine);
    free(all);
    return st;
}

/*
 * Connect the plane's ring (ring = 1) or tree edges: every rank, all or
 * nothing.  Records the outcome in the plane's ring or tree state (1 or -1).
 */
static gpuring_status_t comm_plane_connect(gpuring_comm_t *c, gpuring_plane_t plane, int ring,
                                           gpuring_status_t local_st)
{
    const int first = c->nconns;
    int *state = ring ? &c->ring_state[plane] : &c->tree_state[plane];
    int nipc = 0, nnet = 0;
    gpuring_status_t st;

    if (ring) {
        comm_edges_ring(c, plane);
    } else {
        comm_edges_tree(c, plane);
    }
    st = comm_connect(c, first, local_st);
    *state = st == GPURING_OK ? 1 : -1;
    if (st != GPURING_OK) return st;
    for (int i = first; i < c->nconns; i++) {
        nipc += c->conns[i].type == GPURING_CONN_IPC;
        nnet += c->conns[i].type == GPURING_CONN_NET;
    }
    if (!ring) {
        GPURING_INFO(GPURING_SUBSYS_INIT, "tree connections ready (%s buffers): %d, depth %d",
                     gpuring_comm_plane_name(plane), c->nconns - first, c->graph.tree_depth);
    } else if (plane == GPURING_PLANE_DEVICE) {
        GPURING_INFO(GPURING_SUBSYS_INIT, "device connections ready on GPU %d: %d cuda ipc, "
                     "%d net (%s%s%s)", c->dev.ordinal, nipc, nnet,
                     c->dev.net_device >= 0 ? "GPU-direct: slots in device memory"
                                            : "pinned host staging",
                     c->dev.net_staging_why != NULL ? ": " : "",
                     c->dev.net_staging_why != NULL ? c->dev.net_staging_why : "");
    } else {
        GPURING_INFO(GPURING_SUBSYS_INIT, "host connections ready: %d shm, %d net; outputs "
                     "of %zu B and more written around the cache, and net steps of %zu B and "
                     "more", c->nconns - first - nnet, nnet, c->stream_bytes,
                     c->net_stream_bytes);
    }
    return GPURING_OK;
}

/*
 * UCX's rendezvous threshold for the proxy's context, when
 * coll_gpuring_net_rndv_size is -1.  Every rank of the communicator that
 * creates it on one host (virtual nodes): steps up to 64 KiB go eager.
 * Across hosts with tcp the only network transport here: every step eager
 * (proxy.h; over UCX_TLS=tcp,self, 4 ranks as 2 nodes of 2, 1.85-3.17x at
 * 256 KiB-1 MiB against UCX's own choice, README).  Else UCX's own.  Between
 * two processes of one host a rendezvous step waits for the receiver's
 * progress loop to see its request and for the sender's to see the answer;
 * a ring's next step waits for that step.  2 ranks as 2 virtual nodes, host
 * buffers, -x UCX_RNDV_THRESH against UCX's own, alternating, medians of 7
 * (README): 512 KiB and 1 MiB calls (64 KiB steps) took 0.3-0.8x the
 * time; 2 MiB calls (128 KiB steps) eager took up to 1.7x, so larger steps
 * stay with the rendezvous and its single copy.  (The host test comes first:
 * there the same-host peers' shared-memory transports carry the steps.)
 */
#define GPURING_NET_RNDV_ONE_HOST (64 * 1024 + 1)

static size_t comm_net_rndv_thresh(const gpuring_comm_t *c)
{
    if (c->cfg.net_rndv_size >= 0) return (size_t)c->cfg.net_rndv_size;
    if (gpuring_comm_host_ranks(c) == c->boot.size) return GPURING_NET_RNDV_ONE_HOST;
    return gpuring_proxy_net_tcp_only() ? GPURING_PROXY_RNDV_NEVER : 0;
}

/*
 * Where the progress thread will run, into cpus (NULL: the binding it inherits) and
 * why: the CPUs of this thread's binding nearest the rank's GPU, else the NIC its
 * place chose (graph.h), unless coll_gpuring_progress_bind is off or the machine is
 * an XML file's (coll_gpuring_topo_xml).  Taken by the communicator that creates the
 * process's proxy.
 */
static const char *comm_progress_cpus(const gpuring_comm_t *c, char *cpus, size_t len,
                                      char *why, size_t why_len)
{
    const gpuring_peer_info_t *me = &c->peers[c->boot.rank];
    gpuring_topo_loc_t loc = {.numa = me->numa, .package = me->package, .nic = me->nic};
    gpuring_topo_t *topo = NULL;

    memcpy(loc.gpu_busid, me->gpu_busid, sizeof(loc.gpu_busid));
    if (!c->cfg.progress_bind) {
        snprintf(why, why_len, "coll_gpuring_progress_bind is off");
    } else if (gpuring_comm_topo_xml(c)) {
        snprintf(why, why_len, "the node is coll_gpuring_topo_xml's, not this machine");
    } else if (gpuring_graph_topo_get(NULL, &topo) != GPURING_OK) {
        snprintf(why, why_len, "this machine's topology is unknown");
    } else if (gpuring_graph_topo_thread_cpus(topo, &loc, NULL, cpus, len, why, why_len) ==
               GPURING_OK) {
        return cpus;
    }
    return NULL;
}

/* UCX addresses, when the communicator spans nodes: every rank takes part. */
gpuring_status_t gpuring_conns_net_setup(gpuring_comm_t *c, gpuring_status_t *local_st)
{
    const void *addr = NULL;
    size_t addr_len = 0;

    if (c->graph.nnodes == 1) return GPURING_OK;
    if (*local_st == GPURING_OK) {
        char cpus[GPURING_CPU_LIST_LEN], why[512];
        gpuring_proxy_config_t pcfg = {
            .wait_timeout = c->cfg.wait_timeout,
            .peer_failure = (gpuring_proxy_peer_failure_t)c->cfg.net_peer_failure,
            .rndv_thresh = comm_net_rndv_thresh(c),
            .cpus = comm_progress_cpus(c, cpus, sizeof(cpus), why, sizeof(why)),
            .cpus_why = why};
        *local_st = gpuring_proxy_get(&pcfg, &c->proxy);
        if (*local_st == GPURING_OK) *local_st = gpuring_proxy_address(c->proxy, &addr, &addr_len);
        if (*local_st != GPURING_OK) addr_len = 0;
    }
    return gpuring_bootstrap_allgather_blob(&c->boot, addr, addr_len, (void **)&c->peer_addrs,
                                            &c->addr_stride,
                                            "setup exchange of the UCX addresses");
}

/*
 * A plane's ring or tree connections failed (`what`: st).  Where every rank agreed on
 * the failure, all go on alike without them: GPURING_ERR_NOT_SUPPORTED.  Where an
 * exchange itself failed -- a rank more than coll_gpuring_wait_timeout late, an MPI
 * error -- or this rank left the exchanges (no memory for its part), the ranks may
 * have made different numbers of gpuring's exchanges (which pair by their order) and seen
 * different outcomes, so nothing that follows can be agreed: the communicator is
 * broken (each rank's call fails, the late one's at its own timeout),
 * GPURING_ERR_BROKEN.
 */
static gpuring_status_t comm_connect_failed(gpuring_comm_t *c, gpuring_plane_t plane,
                                            gpuring_status_t st, const char *what,
                                            const char *without)
{
    if (gpuring_bootstrap_in_step(&c->boot, st)) {
        char who[48] = "";

        if (c->boot.bad_rank >= 0) snprintf(who, sizeof(who), " on rank %d", c->boot.bad_rank);
        GPURING_WARN(GPURING_SUBSYS_INIT, "%s connections failed%s (%s buffers): %s", what, who,
                     gpuring_comm_plane_name(plane), without);
        return GPURING_ERR_NOT_SUPPORTED;
    }
    gpuring_comm_set_broken(c);
    GPURING_ERROR(GPURING_SUBSYS_INIT, "%s connections (%s buffers): an exchange with the "
                  "other ranks failed or was left (logged above: a rank more than "
                  "coll_gpuring_wait_timeout late?), so the ranks can no longer agree: the "
                  "communicator cannot be used by gpuring any more", what,
                  gpuring_comm_plane_name(plane));
    return GPURING_ERR_BROKEN;
}

/* Tree connections at the plane's first tree call; on a failure every rank agreed on,
 * every rank stays on rings (else the communicator is broken: the call fails). */
int gpuring_conns_trees_ready(gpuring_comm_t *c, gpuring_plane_t plane)
{
    gpuring_status_t st;

    if (c->tree_state[plane] == 0 &&
        (st = comm_plane_connect(c, plane, 0, GPURING_OK)) != GPURING_OK) {
        (void)comm_connect_failed(c, plane, st, "tree", "rings only from now on");
    }
    return c->tree_state[plane] > 0;
}

/* Where the device plane's NET slots live: this process's choice, each end its own. */
static void comm_device_net_slots(gpuring_comm_t *c)
{
    c->dev.net_device = -1;
    c->dev.net_staging_why = NULL;
    if (c->proxy == NULL) return; /* one node: no NET connection */
    if (!c->cfg.net_gpu_direct) {
        c->dev.net_staging_why = "coll_gpuring_net_gpu_direct is 0";
    } else if (gpuring_proxy_gpu_direct(c->proxy, c->dev.ordinal, &c->dev.net_staging_why)) {
        c->dev.net_device = c->dev.ordinal;
    }
}

/* The host plane's rings, at the first call on host buffers. */
static gpuring_status_t comm_host_ready(gpuring_comm_t *c)
{
    gpuring_status_t st;

    if (c->ring_state[GPURING_PLANE_HOST] < 0) return GPURING_ERR_NOT_SUPPORTED;
    if (c->ring_state[GPURING_PLANE_HOST] > 0) return GPURING_OK;
    st = comm_plane_connect(c, GPURING_PLANE_HOST, 1, GPURING_OK);
    if (st != GPURING_OK) {
        return comm_connect_failed(c, GPURING_PLANE_HOST, st, "host",
                                   "host buffers on this communicator go to the component "
                                   "below");
    }
    return GPURING_OK;
}

/*
 * The device plane's channels when coll_gpuring_device_nchannels is 0:
 * every channel of every rank on a GPU is a thread block that waits for the
 * others, so all of them must be resident at once.  Each rank tells its
 * GPU (host, PCI address) and how many FIFO-kernel blocks it holds; each
 * GPU's capacity is shared by the ranks on it, and every rank takes the
 * smallest share (at least 1, at most the graph's channels), the same
 * everywhere.  A rank whose plane is up but cannot tell its GPU or what it
 * holds may share any GPU with any rank: then one channel (a block a rank
 * fits every GPU).  Every rank takes part, whatever its local status.
 */
#define DEVICE_GPU_UNKNOWN (-2) /* the plane up, its GPU or capacity not known */
static gpuring_status_t comm_device_channels(gpuring_comm_t *c, gpuring_status_t local_st)
{
    const int n = c->boot.size;
    int64_t mine[2] = {-1, 0}, *all;
    int blocks = 0, nch = c->graph.nchannels, unknown = -1;
    gpuring_status_t st;

    if (c->cfg.device_nchannels > 0) return GPURING_OK;
    if (local_st == GPURING_OK) {
        mine[0] = DEVICE_GPU_UNKNOWN;
        if (c->dev.pci_id >= 0 && gpuring_exec_cuda_capacity(&blocks) == GPURING_OK) {
            mine[0] = c->dev.pci_id;
            mine[1] = blocks;
        }
    }
    all = malloc(sizeof(mine) * (size_t)n);
    if (all == NULL) {
        return gpuring_bootstrap_leave(&c->boot, GPURING_ERR_NO_MEMORY,
                                       "allocating the device channels' exchange");
    }
    st = gpuring_bootstrap_allgather(&c->boot, mine, all, sizeof(mine),
                                     "setup exchange of the device channels");
    for (int r = 0; st == GPURING_OK && r < n; r++) {
        int share = 0;
        if (all[2 * r] == DEVICE_GPU_UNKNOWN && unknown < 0) unknown = r;
        if (all[2 * r] < 0) continue; /* its plane fails anyway, or unknown */
        for (int q = 0; q < n; q++) {
            share += gpuring_comm_same_gpu(c, r, all[2 * r], q, all[2 * q]);
        }
        nch = GPURING_MIN(nch, (int)(all[2 * r + 1] / share));
    }
    free(all);
    if (unknown >= 0) nch = 1;
    c->plane_nch[GPURING_PLANE_DEVICE] = GPURING_MAX(nch, 1);
    if (unknown >= 0)
        GPURING_INFO(GPURING_SUBSYS_INIT, "device plane: 1 channel (rank %d cannot tell its "
                     "GPU's PCI address or how many blocks of the FIFO kernel it holds: one "
                     "block a rank fits any GPU)", unknown);
    else
        GPURING_INFO(GPURING_SUBSYS_INIT, "device plane: %d channels (this GPU holds %d blocks "
                     "of the FIFO kernel)", c->plane_nch[GPURING_PLANE_DEVICE], blocks);
    return st;
}

/* A device copy of the graph's rings: the ring position -> rank maps the
 * reduce-scatter and allgather programs read on the GPU. */
static gpuring_status_t comm_device_rings(gpuring_comm_t *c)
{
    const size_t bytes = (size_t)c->graph.nchannels * (size_t)c->graph.nranks * sizeof(int);
    const char *why = NULL;
    gpuring_status_t st = gpuring_device_alloc(bytes, (void **)&c->dev.rings);

    if (st == GPURING_OK) st = gpuring_devcopy(c->dev.rings, c->graph.rings, bytes, 0, &why);
    if (st != GPURING_OK) {
        GPURING_ERROR(GPURING_SUBSYS_INIT, "no device copy of the rings (%zu B): %s", bytes,
                      why != NULL ? why : gpuring_status_str(st));
    }
    return st;
}

/* The device plane: CUDA state, where NET slots live, its channels, then its rings. */
static gpuring_status_t comm_device_ready(gpuring_comm_t *c, int ordinal)
{
    gpuring_status_t local_st = GPURING_OK, st;

    if (c->ring_state[GPURING_PLANE_DEVICE] < 0) return GPURING_ERR_NOT_SUPPORTED;
    if (c->ring_state[GPURING_PLANE_DEVICE] > 0) {
        if (ordinal == c->dev.ordinal) return gpuring_device_use(ordinal);
        GPURING_ERROR(GPURING_SUBSYS_COLL, "device buffers on GPU %d, but this communicator's "
                      "device connections are on GPU %d: keep each rank's buffers of one "
                      "communicator on one GPU", ordinal, c->dev.ordinal);
        /* the plane's GPU current: the caller abandons the call on its connections */
        (void)gpuring_device_use(c->dev.ordinal);
        return GPURING_ERR_INVALID;
    }
    if (!gpuring_device_built()) {
        /* the same build on every rank (the same component), so the same answer */
        GPURING_INFO(GPURING_SUBSYS_COLL, "device buffers: this gpuring was built without "
                     "CUDA (configure --with-cuda)");
        c->ring_state[GPURING_PLANE_DEVICE] = -1;
        return GPURING_ERR_NOT_SUPPORTED;
    }
    /* the plane's CUDA state, then its rings; a local failure still connects (and agrees) */
    local_st = gpuring_device_use(ordinal);
    if (local_st == GPURING_OK) {
        c->dev.ordinal = ordinal; /* CUDA state from here on: destroy frees it there */
        c->dev.pci_id = gpuring_device_pci_id(ordinal);
        local_st = gpuring_device_stream_create(&c->dev.stream);
    }
    if (local_st == GPURING_OK) local_st = comm_device_rings(c);
    if (local_st == GPURING_OK) local_st = gpuring_exec_cuda_init();
    if (local_st == GPURING_OK) comm_device_net_slots(c);
    if (comm_device_channels(c, local_st) != GPURING_OK && local_st == GPURING_OK) {
        local_st = GPURING_ERR_INVALID; /* the exchange failed: so does the connection */
    }
    st = comm_plane_connect(c, GPURING_PLANE_DEVICE, 1, local_st);
    if (st != GPURING_OK) {
        return comm_connect_failed(c, GPURING_PLANE_DEVICE, st, "device",
                                   "device buffers on this communicator go to the component "
                                   "below");
    }
    return GPURING_OK;
}

gpuring_status_t gpuring_comm_plane_ready(gpuring_comm_t *c, gpuring_plane_t plane, int ordinal)
{
    if (c->boot.failed) return GPURING_ERR_BROKEN; /* (logged where it failed) */
    return plane == GPURING_PLANE_HOST ? comm_host_ready(c) : comm_device_ready(c, ordinal);
}
