/*
 * gpuring_comm.c -- the communicator's life cycle (see gpuring_comm.h): the
 * uid every member agrees on, setup (peer info, graph, UCX addresses),
 * teardown, the "ready" line, and the process's call statistics.
 * Connections are gpuring_conns.c's, calls gpuring_enqueue.c's.
 */
#include "kernels/device.h"
#include "ompi_coll_gpuring/gpuring_comm_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Communicator uids (20 bits of every UCX tag) must differ between any two
 * live communicators a process belongs to.  Each setup reserves a fresh
 * proposal here (fetch-add), takes the largest proposal of all members,
 * and raises every member's floor past it, so later setups never meet it
 * again.  Setups running at the same time in several threads
 * (MPI_THREAD_MULTIPLE) can still pick the same largest proposal, and 2^20
 * communicators later a uid wraps: so each rank claims the uid in a registry
 * of live uids, the members agree whether every claim held, and if one did
 * not they all let go and try again with fresh proposals, each reserved
 * with a random stride so that two colliding setups part ways.
 */
#define COMM_UID_BITS 20
#define COMM_UID_ATTEMPTS 16
static uint64_t comm_uid_next = 1;
/* uid 0 is never claimed: it tags the proxy's endpoint warm-up (proxy_internal.h) */
static unsigned char comm_uid_live[(1u << COMM_UID_BITS) / 8] = {1};
static pthread_mutex_t comm_uid_lock = PTHREAD_MUTEX_INITIALIZER;

/* Claim (claim = 1) or release the uid; claiming a live uid fails. */
static int comm_uid_mark(uint64_t uid, int claim)
{
    unsigned slot = (unsigned)(uid & ((1u << COMM_UID_BITS) - 1));
    unsigned char bit = (unsigned char)(1u << (slot % 8));
    int ok = 1;

    pthread_mutex_lock(&comm_uid_lock);
    if (claim && (comm_uid_live[slot / 8] & bit)) {
        ok = 0;
    } else if (claim) {
        comm_uid_live[slot / 8] |= bit;
    } else {
        comm_uid_live[slot / 8] &= (unsigned char)~bit;
    }
    pthread_mutex_unlock(&comm_uid_lock);
    return ok;
}

static void comm_uid_floor(uint64_t uid)
{
    uint64_t cur = __atomic_load_n(&comm_uid_next, __ATOMIC_RELAXED);
    while (cur <= uid && !__atomic_compare_exchange_n(&comm_uid_next, &cur, uid + 1, 0,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* A fresh proposal; `stride` > 0: skip a random 0..stride-1 more. */
static uint64_t comm_uid_propose(unsigned stride)
{
    static __thread unsigned seed;
    uint64_t skip = 0;

    if (stride > 0) {
        if (seed == 0) seed = (unsigned)getpid() ^ (unsigned)(uintptr_t)&seed;
        skip = (uint64_t)(rand_r(&seed) % stride);
    }
    return __atomic_fetch_add(&comm_uid_next, 1 + skip, __ATOMIC_RELAXED);
}

/*
 * Agree on c->uid, starting from `uid` (the largest first proposal): claim
 * it, agree that every member claimed it, or let go and retry with the
 * largest of fresh proposals.
 */
static gpuring_status_t comm_uid_agree(gpuring_comm_t *c, uint64_t uid)
{
    struct {
        uint64_t next;
        int32_t claimed;
        int32_t pad;
    } mine, *all = calloc((size_t)c->boot.size, sizeof(mine));
    gpuring_status_t st = GPURING_ERR_GENERIC;

    if (all == NULL) {
        return gpuring_bootstrap_leave(&c->boot, GPURING_ERR_NO_MEMORY,
                                       "allocating the communicator uid's exchange");
    }
    for (int attempt = 0; attempt < COMM_UID_ATTEMPTS; attempt++) {
        int every = 1;

        comm_uid_floor(uid);
        mine.claimed = comm_uid_mark(uid, 1);
        mine.next = comm_uid_propose(16);
        mine.pad = 0;
        st = gpuring_bootstrap_allgather(&c->boot, &mine, all, sizeof(mine),
                                         "setup exchange of the communicator's id");
        if (st != GPURING_OK) {
            if (mine.claimed) comm_uid_mark(uid, 0);
            break;
        }
        for (int r = 0; r < c->boot.size; r++) every &= all[r].claimed != 0;
        if (every) {
            c->uid = uid & ((1u << COMM_UID_BITS) - 1); /* the slot claimed: tags hold it */
            c->uid_claimed = 1;
            break;
        }
        if (mine.claimed) comm_uid_mark(uid, 0);
        GPURING_DEBUG(GPURING_SUBSYS_INIT, "communicator uid %llu is taken on some member "
                      "(concurrent setups): trying again", (unsigned long long)uid);
        uid = 0;
        for (int r = 0; r < c->boot.size; r++) uid = GPURING_MAX(uid, all[r].next);
        st = GPURING_ERR_GENERIC;
    }
    if (st == GPURING_ERR_GENERIC) {
        gpuring_bootstrap_end_alike(&c->boot); /* every member holds the same claims */
        GPURING_WARN(GPURING_SUBSYS_INIT, "no communicator uid free on every member after %d "
                     "attempts (2^%d live communicators?): this communicator falls back",
                     COMM_UID_ATTEMPTS, COMM_UID_BITS);
    }
    free(all);
    return st;
}

/* process-wide counters: each communicator's, added at its destroy (atomics:
 * communicators may be destroyed in several threads) */
static gpuring_comm_stats_t comm_stats[GPURING_COLL_COUNT];

static void comm_stats_add(const gpuring_comm_t *c)
{
    for (int coll = 0; coll < GPURING_COLL_COUNT; coll++) {
        const gpuring_comm_stats_t *from = &c->stats[coll];
        gpuring_comm_stats_t *to = &comm_stats[coll];

        for (int a = 0; a < 3; a++) __atomic_fetch_add(&to->calls[a], from->calls[a], __ATOMIC_RELAXED);
        __atomic_fetch_add(&to->direct_calls, from->direct_calls, __ATOMIC_RELAXED);
        __atomic_fetch_add(&to->direct_ll_calls, from->direct_ll_calls, __ATOMIC_RELAXED);
        __atomic_fetch_add(&to->device_calls, from->device_calls, __ATOMIC_RELAXED);
        __atomic_fetch_add(&to->bytes, from->bytes, __ATOMIC_RELAXED);
    }
}

void gpuring_comm_stats_get(gpuring_coll_kind_t coll, gpuring_comm_stats_t *stats)
{
    const gpuring_comm_stats_t *cs = &comm_stats[coll];

    for (int a = 0; a < 3; a++) stats->calls[a] = __atomic_load_n(&cs->calls[a], __ATOMIC_RELAXED);
    stats->direct_calls = __atomic_load_n(&cs->direct_calls, __ATOMIC_RELAXED);
    stats->direct_ll_calls = __atomic_load_n(&cs->direct_ll_calls, __ATOMIC_RELAXED);
    stats->device_calls = __atomic_load_n(&cs->device_calls, __ATOMIC_RELAXED);
    stats->bytes = __atomic_load_n(&cs->bytes, __ATOMIC_RELAXED);
}

/* Empty polls between yields in the host executor's waits: a short spin when
 * this host has a core for each of the communicator's ranks on it, none when
 * they share cores (a yield then lets the peer run). */
#define GPURING_COMM_SPIN_POLLS 200
static int comm_spin_polls(const gpuring_comm_t *c)
{
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    return cpus > 0 && gpuring_comm_host_ranks(c) <= cpus ? GPURING_COMM_SPIN_POLLS : 0;
}

/*
 * From what output size a host call writes its output around the cache
 * (coll_gpuring_stream_size, else from the cache): when the call's inputs
 * and outputs on this host -- 2 x output x the ranks here -- overflow half
 * the last-level cache (the rest holds the slots, the application's data,
 * and what a cache that is not perfectly LRU keeps), the output would only
 * push the inputs out of it, and a plain store reads each line first; below
 * that, plain stores leave the result in the cache for the application.
 * Measured (2 ranks, 300 MiB L3, A/B against streaming from 8 MiB):
 * all_gather, all_reduce and broadcast 1.03-1.26x faster at 16 MiB without
 * streaming, all_gather and all_reduce 0.70-0.84x at 64 MiB: the rule gives
 * 37.5 MiB there; 32 MiB of cache and 2 ranks give 4 MiB.  Unknown cache
 * size: 8 MiB.
 */
#define GPURING_COMM_STREAM_BYTES_UNKNOWN (8u << 20)
static size_t comm_stream_bytes(const gpuring_comm_t *c)
{
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);

    if (c->cfg.stream_bytes > 0) return c->cfg.stream_bytes;
    if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (llc <= 0) return GPURING_COMM_STREAM_BYTES_UNKNOWN;
    return (size_t)llc / (4 * (size_t)GPURING_MAX(gpuring_comm_host_ranks(c), 1));
}

/* The PCI bus id of the GPU of the calling thread's current CUDA context (the GPU an
 * application that set its device before its first call uses: its device buffers' one,
 * as a rule) into busid, "" where none is current. */
static void comm_gpu_busid(char busid[GPURING_BUSID_LEN])
{
    const int device = gpuring_device_current();
    const int64_t pci = device >= 0 ? gpuring_device_pci_id(device) : -1;

    busid[0] = '\0';
    if (pci >= 0 && pci >> 16 <= 0xffff) { /* (a wider domain, VMD's: none, as unknown) */
        snprintf(busid, GPURING_BUSID_LEN, "%04x:%02x:%02x.0", (unsigned)(pci >> 16 & 0xffff),
                 (unsigned)(pci >> 8 & 0xff), (unsigned)(pci >> 3 & 0x1f));
    }
}

/* This rank's peer info: host, pid, uid proposal, and its place in the node -- its
 * GPU's where one is current (the rings then follow the PCI tree between the GPUs of
 * a node, as NCCL's do), else its CPU binding's: its NUMA node's, or its package's. */
static gpuring_status_t comm_peer_info(gpuring_comm_t *c, gpuring_peer_info_t *me)
{
    gpuring_topo_t *topo = NULL;
    gpuring_topo_loc_t loc = {.numa = -1, .package = -1, .nic = -1, .gpu_busid = ""};
    char busid[GPURING_BUSID_LEN] = "";

    gpuring_bootstrap_peer_info_local(me, comm_uid_propose(0));
    /* without a topology the ranks still run, in rank order; on an XML machine each
     * rank's place is the GPU its place in its node gives it (comm_graph_connect) */
    if (!gpuring_comm_topo_xml(c) && gpuring_graph_topo_get(NULL, &topo) == GPURING_OK) {
        comm_gpu_busid(busid);
        gpuring_graph_topo_local(topo, busid, -1, &loc);
    }
    me->numa = loc.numa;
    me->package = loc.package;
    me->nic = loc.nic;
    memcpy(me->gpu_busid, loc.gpu_busid, sizeof(me->gpu_busid));
    GPURING_DEBUG(GPURING_SUBSYS_GRAPH, "this rank's place in its node: NUMA node %d, "
                  "package %d, NIC %d, GPU %s", loc.numa, loc.package, loc.nic,
                  loc.gpu_busid[0] != '\0' ? loc.gpu_busid : "none current");
    return GPURING_OK;
}

/* The arrival board of this communicator's ranks on this host (the peers' host hash:
 * real hosts, whatever coll_gpuring_ranks_per_node cuts them into); none if it fails. */
static void comm_arrivals_open(gpuring_comm_t *c)
{
    const uint64_t host = c->peers[c->boot.rank].host_hash;
    int few[64], *local = c->boot.size <= 64 ? few : malloc(sizeof(int) * (size_t)c->boot.size);
    int n = 0, me = 0;

    if (local == NULL) return;
    for (int r = 0; r < c->boot.size; r++) {
        if (c->peers[r].host_hash != host) continue;
        if (r == c->boot.rank) me = n;
        local[n++] = r;
    }
    if (n > 1) { /* (a rank alone on its host waits for none of it) */
        const gpuring_peer_info_t *p = &c->peers[local[0]];
        const gpuring_arrivals_owner_t owner = {p->pid_ns, p->pid, p->proc_id};

        c->arrivals = gpuring_arrivals_open(c->uid, &owner, local, n, me,
                                            c->cfg.arrival_timeout);
    }
    if (local != few) free(local);
}

/*
 * Everyone's position in its node's ring per channel (nch), then rings and trees.
 * Every rank takes part in the exchange and the agreement whatever happened here
 * (`local`: the graph's own status; all fail alike if one rank could not build its
 * graph or order its node).
 */
static gpuring_status_t comm_graph_connect(gpuring_comm_t *c, int nch, gpuring_status_t local)
{
    const int n = c->boot.size;
    gpuring_topo_t *topo = NULL;
    gpuring_topo_loc_t *locs = calloc((size_t)n, sizeof(*locs));
    int32_t *mine = calloc((size_t)nch, sizeof(int32_t));
    int32_t *pos = calloc((size_t)n * (size_t)nch, sizeof(int32_t));
    const char *what = "build this rank's graph of the communicator's nodes";
    gpuring_status_t st;

    if (pos == NULL || mine == NULL) {
        free(locs);
        free(mine);
        free(pos);
        return gpuring_bootstrap_leave(&c->boot, GPURING_ERR_NO_MEMORY,
                                       "allocating the ring positions' exchange");
    }
    if (local == GPURING_OK) {
        what = "order this node's ranks into rings";
        if (locs == NULL) local = GPURING_ERR_NO_MEMORY;
    }
    if (local == GPURING_OK) {
        if (gpuring_graph_topo_get(c->cfg.topo_xml, &topo) != GPURING_OK) topo = NULL;
        for (int r = 0; r < n; r++) {
            locs[r].numa = c->peers[r].numa;
            locs[r].package = c->peers[r].package;
            locs[r].nic = c->peers[r].nic;
            memcpy(locs[r].gpu_busid, c->peers[r].gpu_busid, sizeof(locs[r].gpu_busid));
        }
        if (topo != NULL && gpuring_comm_topo_xml(c)) local = gpuring_graph_xml_locs(&c->graph, topo, locs);
        if (local == GPURING_OK) local = gpuring_graph_local_order(&c->graph, topo, locs, mine);
    }
    if (local != GPURING_OK) {
        GPURING_ERROR(GPURING_SUBSYS_GRAPH, "cannot %s: %s", what, gpuring_status_str(local));
    }
    GPURING_CHECK_GOTO(gpuring_bootstrap_allgather(&c->boot, mine, pos,
                                                   sizeof(int32_t) * (size_t)nch,
                                                   "setup exchange of the ring positions"),
                       st, out);
    if (local == GPURING_OK) {
        local = gpuring_graph_connect(&c->graph, pos);
        if (local != GPURING_OK) {
            GPURING_ERROR(GPURING_SUBSYS_GRAPH, "cannot make the rings and trees: %s",
                          gpuring_status_str(local));
        }
    }
    st = gpuring_bootstrap_agree(&c->boot, local,
                                 "setup agreement that every rank made the rings and trees");
out:
    free(locs);
    free(mine);
    free(pos);
    return st;
}

gpuring_status_t gpuring_comm_create(const gpuring_comm_config_t *cfg,
                                     gpuring_bootstrap_t *boot, gpuring_comm_t **comm_p)
{
    gpuring_comm_t *c = calloc(1, sizeof(*c));
    gpuring_peer_info_t me;
    gpuring_status_t st, local_st = GPURING_OK;
    int nch;

    if (c != NULL) c->peers = calloc((size_t)boot->size, sizeof(*c->peers));
    if (c == NULL || c->peers == NULL) {
        gpuring_bootstrap_t b = *boot;

        free(c);
        (void)gpuring_bootstrap_leave(&b, GPURING_ERR_NO_MEMORY,
                                      "allocating the communicator's state");
        return GPURING_ERR_BROKEN;
    }
    c->cfg = *cfg;
    c->boot = *boot;
    c->dev.ordinal = -1;
    c->dev.pci_id = -1;
    c->dev.net_device = -1;

    /* 1. peer info, with where this rank sits in its node; the uid starts
     *    from the largest proposal, and is claimed on every member */
    GPURING_CHECK_GOTO(comm_peer_info(c, &me), st, out);
    GPURING_CHECK_GOTO(gpuring_bootstrap_allgather(&c->boot, &me, c->peers, sizeof(me),
                                                   "setup exchange of the peer info"),
                       st, out);
    {
        uint64_t uid = 0;
        for (int r = 0; r < boot->size; r++) uid = GPURING_MAX(uid, c->peers[r].uid_next);
        GPURING_CHECK_GOTO(comm_uid_agree(c, uid), st, out);
    }
    comm_arrivals_open(c);
    c->spin_polls = comm_spin_polls(c);
    c->stream_bytes = comm_stream_bytes(c);
    c->net_stream_bytes = cfg->net_stream_bytes > 0 ? cfg->net_stream_bytes
                                                    : GPURING_NET_STREAM_BYTES;

    /* 2. graph: nodes, this node's ring orders, everyone's positions (the
     *    graph info exchange), rings and trees -- the same on every rank */
    c->plane_nch[GPURING_PLANE_HOST] = cfg->nchannels;
    c->plane_nch[GPURING_PLANE_DEVICE] =
        cfg->device_nchannels > 0 ? cfg->device_nchannels : GPURING_MAX_CHANNELS;
    nch = GPURING_MAX(c->plane_nch[GPURING_PLANE_HOST], c->plane_nch[GPURING_PLANE_DEVICE]);
    GPURING_CHECK_GOTO(comm_graph_connect(c, nch, gpuring_graph_init(c->peers, boot->size,
                                                                     boot->rank,
                                                                     cfg->ranks_per_node, nch,
                                                                     &c->graph)),
                       st, out);

    /* 3. UCX addresses when there is more than one node; 4. all agree.
     *    Connections come with each plane's first call. */
    GPURING_CHECK_GOTO(gpuring_conns_net_setup(c, &local_st), st, out);
    st = gpuring_bootstrap_agree(&c->boot, local_st,
                                 "setup agreement that every rank set the communicator up");
    /* every rank of this host opened the board before the graph's exchange */
    gpuring_arrivals_unlink(c->arrivals);

out:
    if (st != GPURING_OK) {
        /* an outcome every member shares: all go on alike (below); any other leaves
         * this rank out of step with them */
        if (!gpuring_bootstrap_in_step(&c->boot, st) && st != GPURING_ERR_TIMEOUT)
            st = GPURING_ERR_BROKEN;
        boot->bad_rank = c->boot.bad_rank;
        gpuring_comm_destroy(c);
        return st;
    }
    *comm_p = c;
    return GPURING_OK;
}

void gpuring_comm_destroy(gpuring_comm_t *c)
{
    gpuring_device_saved_t app = {0, NULL};
    int busy = 0;

    if (c == NULL) return;
    gpuring_async_destroy(c); /* its queued calls end first */
    comm_stats_add(c);
    if (c->dev.ordinal >= 0) {
        app = gpuring_device_save();
        (void)gpuring_device_use(c->dev.ordinal);
    }
    /* a kernel told to abort may still be leaving: it must be gone before its FIFOs are */
    if (gpuring_device_stream_idle(c->dev.stream, c->cfg.wait_timeout) == GPURING_ERR_TIMEOUT) {
        GPURING_WARN(GPURING_SUBSYS_KERNEL, "a kernel of this communicator still runs %.0f s "
                     "after its call failed: the communicator's memory and connections are "
                     "kept", c->cfg.wait_timeout);
        c->nconns = 0;
        busy = 1;
    }
    gpuring_conns_destroy(c);
    gpuring_direct_destroy(c, busy);
    if (busy) {
        /* the rest is kept whole too: a free would wait for the kernel (cudaFree: the
         * device), the proxy still drives the net ends (registered, pointing into
         * c->conns), and their receives stay posted under the uid, still claimed */
        if (c->dev.ordinal >= 0) gpuring_device_restore(app);
        return;
    }
    gpuring_device_free_ordered(c->dev.scratch, c->dev.stream);
    gpuring_device_free_ordered(c->dev.bounce, c->dev.stream);
    gpuring_device_free(c->dev.rings);
    gpuring_device_event_destroy(c->dev.event);
    for (int k = 0; k < GPURING_COMM_ORDER_EVENTS; k++)
        gpuring_device_event_destroy(c->dev.order_events[k]);
    gpuring_device_stream_destroy(c->dev.stream);
    if (c->dev.ordinal >= 0) gpuring_device_restore(app);
    /* a broken communicator's uid stays claimed for the process: its failed calls may
     * have left messages under it in UCX's queues (a refusal credit, an abort step, a
     * rendezvous request no receive will match), which a later communicator on the same
     * uid and edges would take for its own */
    if (c->uid_claimed && !__atomic_load_n(&c->broken, __ATOMIC_ACQUIRE))
        comm_uid_mark(c->uid, 0);
    gpuring_arrivals_close(c->arrivals);
    gpuring_graph_free(&c->graph);
    free(c->peer_addrs);
    free(c->peers);
    free(c->scratch);
    free(c);
}

void gpuring_comm_describe(const gpuring_comm_t *c, char *buf, size_t len)
{
    snprintf(buf, len, "%d ranks, %d nodes, %d host channels, up to %d device channels, ring "
             "prev %d next %d, %zu B host slots, %zu B device slots", c->graph.nranks,
             c->graph.nnodes, c->plane_nch[GPURING_PLANE_HOST], c->plane_nch[GPURING_PLANE_DEVICE],
             c->graph.prev[0], c->graph.next[0], c->cfg.slot_bytes[GPURING_PLANE_HOST],
             c->cfg.slot_bytes[GPURING_PLANE_DEVICE]);
}

gpuring_status_t gpuring_comm_exchange_stop(gpuring_comm_t *comm)
{
    gpuring_arrivals_t *board = comm != NULL ? comm->arrivals : NULL;
    uint64_t mine;

    if (board == NULL) return GPURING_OK;
    /* only an exchange of a numbered call (the direct allreduce's): a plane's connection
     * exchanges come before the numbering, and a broken rank still makes them -- leaving
     * one early would part the ranks' exchanges (they pair by their order) */
    mine = gpuring_arrivals_mine(board);
    return mine == comm->calls ? gpuring_arrivals_stop(board, mine) : GPURING_OK;
}

int gpuring_comm_exchange_late(gpuring_comm_t *comm, int timeout, double *late_since_p)
{
    gpuring_arrivals_t *board = comm != NULL ? comm->arrivals : NULL;
    gpuring_status_t st;

    if (board == NULL) return -1;
    st = gpuring_arrivals_excuse(board, gpuring_arrivals_mine(board), timeout, late_since_p);
    if (st == GPURING_OK) return 1;
    if (st != GPURING_ERR_TIMEOUT || gpuring_arrivals_whole(board, comm->boot.size) ||
        gpuring_arrivals_gone(board) >= 0)
        return 0;
    return -1;
}
