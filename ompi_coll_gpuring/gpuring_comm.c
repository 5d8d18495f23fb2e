/*
 * gpuring_comm.c -- communicator setup, teardown and the allreduce path
 * (see gpuring_comm.h).
 */
#include "ompi_coll_gpuring/gpuring_comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Next communicator uid of this process; agreed as a max at each setup. */
static uint64_t comm_uid_next = 1;

/* Connection ids inside one communicator and process (part of UCX tags). */
static uint32_t comm_net_id(int channel, gpuring_conn_dir_t dir)
{
    return (uint32_t)(2 * channel + (int)dir);
}

static const gpuring_conn_handle_t *comm_find_handle(const gpuring_conn_handle_t *all,
                                                     int per_rank, int owner, int peer,
                                                     int channel, gpuring_conn_dir_t dir)
{
    const gpuring_conn_handle_t *h = all + (size_t)owner * (size_t)per_rank;
    for (int i = 0; i < per_rank; i++) {
        if (h[i].type != 0 && h[i].peer == peer && h[i].channel == channel &&
            h[i].dir == (int32_t)dir) {
            return &h[i];
        }
    }
    return NULL;
}

/* Create this rank's ends: every recv, and the local half of NET sends. */
static gpuring_status_t comm_conns_create(gpuring_comm_t *c, gpuring_conn_handle_t *mine)
{
    const gpuring_graph_t *g = &c->graph;

    for (int ch = 0; ch < g->nchannels; ch++) {
        int prev = g->prev[ch], next = g->next[ch];
        gpuring_conn_handle_t *hr = &mine[2 * ch], *hs = &mine[2 * ch + 1];

        if (g->node[prev] == g->node[g->rank]) {
            GPURING_CHECK(gpuring_conn_shm_recv_create(&c->recv[ch], prev, ch, c->cfg.slot_bytes,
                                                       c->uid, hr));
        } else {
            GPURING_CHECK(gpuring_conn_net_create(c->proxy, &c->recv[ch], GPURING_CONN_RECV,
                                                  prev, ch, c->cfg.slot_bytes, c->uid,
                                                  comm_net_id(ch, GPURING_CONN_RECV), hr));
        }
        if (g->node[next] != g->node[g->rank]) {
            GPURING_CHECK(gpuring_conn_net_create(c->proxy, &c->send[ch], GPURING_CONN_SEND,
                                                  next, ch, c->cfg.slot_bytes, c->uid,
                                                  comm_net_id(ch, GPURING_CONN_SEND), hs));
        }
    }
    return GPURING_OK;
}

static gpuring_status_t comm_conns_connect(gpuring_comm_t *c, const gpuring_conn_handle_t *all,
                                           const gpuring_peer_info_t *peers,
                                           const char *addrs, size_t addr_stride)
{
    const gpuring_graph_t *g = &c->graph;
    const int per_rank = 2 * g->nchannels;

    for (int ch = 0; ch < g->nchannels; ch++) {
        int prev = g->prev[ch], next = g->next[ch];
        const gpuring_conn_handle_t *to_next =
            comm_find_handle(all, per_rank, next, g->rank, ch, GPURING_CONN_RECV);

        if (to_next == NULL) {
            GPURING_ERROR(GPURING_SUBSYS_INIT, "rank %d published no connection for channel %d",
                          next, ch);
            return GPURING_ERR_INVALID;
        }
        if (to_next->type == GPURING_CONN_SHM) {
            GPURING_CHECK(gpuring_conn_shm_send_connect(&c->send[ch], next, ch, to_next));
        } else {
            GPURING_CHECK(gpuring_conn_net_connect(
                c->proxy, &c->send[ch], to_next,
                peers[next].host_hash ^ (uint64_t)peers[next].pid, addrs + addr_stride * next,
                addr_stride));
        }
        if (c->recv[ch].type == GPURING_CONN_NET) {
            const gpuring_conn_handle_t *from_prev =
                comm_find_handle(all, per_rank, prev, g->rank, ch, GPURING_CONN_SEND);
            if (from_prev == NULL) {
                GPURING_ERROR(GPURING_SUBSYS_INIT,
                              "rank %d published no net send for channel %d", prev, ch);
                return GPURING_ERR_INVALID;
            }
            GPURING_CHECK(gpuring_conn_net_connect(
                c->proxy, &c->recv[ch], from_prev,
                peers[prev].host_hash ^ (uint64_t)peers[prev].pid, addrs + addr_stride * prev,
                addr_stride));
        }
    }
    return GPURING_OK;
}

static void comm_conn_destroy(gpuring_comm_t *c, gpuring_conn_t *conn)
{
    if (conn->type == GPURING_CONN_SHM) {
        gpuring_conn_shm_destroy(conn);
    } else if (conn->type == GPURING_CONN_NET) {
        gpuring_conn_net_destroy(c->proxy, conn);
    }
    conn->type = 0;
}

/*
 * Exchange UCX addresses if any rank crosses nodes.  Ranks with no NET
 * connection take part with an empty address and never start the proxy.
 */
static gpuring_status_t comm_net_setup(gpuring_comm_t *c, gpuring_status_t *local_st,
                                       char **addrs_p, size_t *stride_p)
{
    const gpuring_graph_t *g = &c->graph;
    const void *addr = NULL;
    size_t addr_len = 0;
    int need = 0;

    if (g->nnodes == 1) return GPURING_OK;
    for (int ch = 0; ch < g->nchannels; ch++) {
        need |= g->node[g->prev[ch]] != g->node[g->rank] ||
                g->node[g->next[ch]] != g->node[g->rank];
    }
    if (need && *local_st == GPURING_OK) {
        gpuring_proxy_config_t pcfg = {.wait_timeout = c->cfg.wait_timeout};
        *local_st = gpuring_proxy_get(&pcfg, &c->proxy);
        if (*local_st == GPURING_OK) {
            *local_st = gpuring_proxy_address(c->proxy, &addr, &addr_len);
        }
        if (*local_st != GPURING_OK) addr_len = 0;
    }
    return gpuring_bootstrap_allgather_blob(&c->boot, addr, addr_len, (void **)addrs_p, stride_p);
}

gpuring_status_t gpuring_comm_create(const gpuring_comm_config_t *cfg,
                                     const gpuring_bootstrap_t *boot, gpuring_comm_t **comm_p)
{
    gpuring_comm_t *c = calloc(1, sizeof(*c));
    gpuring_peer_info_t me, *peers = NULL;
    gpuring_conn_handle_t *mine = NULL, *all = NULL;
    char *addrs = NULL;
    size_t addr_stride = 0;
    gpuring_status_t st, local_st = GPURING_OK;
    int bad_rank = -1, per_rank;

    if (c == NULL) return GPURING_ERR_NO_MEMORY;
    c->cfg = *cfg;
    c->boot = *boot;
    peers = calloc((size_t)boot->size, sizeof(*peers));
    if (peers == NULL) {
        free(c);
        return GPURING_ERR_NO_MEMORY;
    }

    /* 1. peer info; the uid is the largest proposal, so unused by all */
    gpuring_bootstrap_peer_info_local(&me, gpuring_graph_topo_local_numa(),
                                      __atomic_load_n(&comm_uid_next, __ATOMIC_RELAXED));
    GPURING_CHECK_GOTO(gpuring_bootstrap_allgather(&c->boot, &me, peers, sizeof(me)), st, out);
    for (int r = 0; r < boot->size; r++) c->uid = GPURING_MAX(c->uid, peers[r].uid_next);
    __atomic_store_n(&comm_uid_next, c->uid + 1, __ATOMIC_RELAXED);

    /* 2. graph: every rank computes the same one from the same peer info */
    GPURING_CHECK_GOTO(gpuring_graph_build(peers, boot->size, boot->rank, cfg->ranks_per_node,
                                           cfg->nchannels, &c->graph),
                       st, out);

    /* 3. UCX addresses, when the rings cross nodes */
    GPURING_CHECK_GOTO(comm_net_setup(c, &local_st, &addrs, &addr_stride), st, out);

    /* 4. connection handles: two per channel and rank (recv end, net send end) */
    per_rank = 2 * c->graph.nchannels;
    mine = calloc((size_t)per_rank, sizeof(*mine));
    all = calloc((size_t)per_rank * (size_t)boot->size, sizeof(*all));
    if (mine == NULL || all == NULL) {
        st = GPURING_ERR_NO_MEMORY;
        goto out;
    }
    if (local_st == GPURING_OK) local_st = comm_conns_create(c, mine);
    if (local_st != GPURING_OK) memset(mine, 0, sizeof(*mine) * (size_t)per_rank);
    GPURING_CHECK_GOTO(gpuring_bootstrap_allgather(&c->boot, mine, all,
                                                   sizeof(*mine) * (size_t)per_rank),
                       st, out);

    /* 5. everyone has its ends: connect, agree, then drop the shm names */
    GPURING_CHECK_GOTO(gpuring_bootstrap_agree(&c->boot, local_st, &bad_rank), st, failed);
    local_st = comm_conns_connect(c, all, peers, addrs, addr_stride);
    st = gpuring_bootstrap_agree(&c->boot, local_st, &bad_rank);
    for (int ch = 0; ch < c->graph.nchannels; ch++) {
        if (c->recv[ch].type == GPURING_CONN_SHM) gpuring_conn_shm_unlink(&c->recv[ch]);
    }
failed:
    if (st == GPURING_ERR_REMOTE) {
        GPURING_INFO(GPURING_SUBSYS_INIT, "communicator setup failed on rank %d", bad_rank);
    }
out:
    free(mine);
    free(all);
    free(addrs);
    free(peers);
    if (st != GPURING_OK) {
        gpuring_comm_destroy(c);
        return st;
    }
    *comm_p = c;
    return GPURING_OK;
}

void gpuring_comm_destroy(gpuring_comm_t *c)
{
    if (c == NULL) return;
    for (int ch = 0; ch < GPURING_MAX_CHANNELS; ch++) {
        comm_conn_destroy(c, &c->send[ch]);
        comm_conn_destroy(c, &c->recv[ch]);
    }
    gpuring_graph_free(&c->graph);
    free(c->scratch);
    free(c);
}

gpuring_status_t gpuring_comm_allreduce(gpuring_comm_t *c, const void *sendbuf, void *recvbuf,
                                        size_t count, gpuring_type_t type, gpuring_op_t op)
{
    const gpuring_graph_t *g = &c->graph;
    const size_t es = gpuring_type_size(type);
    gpuring_tuning_params_t tp = {.algo = c->cfg.algo,
                                  .nchannels = c->cfg.call_nchannels,
                                  .chunk_bytes = c->cfg.chunk_bytes,
                                  .slot_bytes = c->cfg.slot_bytes};
    gpuring_plan_t plan;
    gpuring_exec_args_t args;
    size_t per_channel;
    int order_free;
    gpuring_status_t st;

    if (c->broken) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "communicator unusable after an earlier failure");
        return GPURING_ERR_INVALID;
    }
    if (count == 0) return GPURING_OK;
    /* the order ranks fold inputs in changes no bit of these results */
    order_free = g->nranks == 2 || type < GPURING_TYPE_FLOAT || op == GPURING_OP_MIN ||
                 op == GPURING_OP_MAX;
    gpuring_tuning_plan(g, &tp, count, es, order_free, &plan);
    if (plan.ordered && c->scratch_bytes < count * es * (size_t)g->nranks) {
        void *grown = realloc(c->scratch, count * es * (size_t)g->nranks);
        if (grown == NULL) {
            /* every rank planned the same: fail rather than diverge */
            GPURING_ERROR(GPURING_SUBSYS_COLL, "out of memory for %zu B of gather scratch",
                          count * es * (size_t)g->nranks);
            c->broken = 1;
            return GPURING_ERR_NO_MEMORY;
        }
        c->scratch = grown;
        c->scratch_bytes = count * es * (size_t)g->nranks;
    }

    /* each channel runs the program over a contiguous part of the buffers */
    per_channel = GPURING_DIV_UP(count, (size_t)plan.nchannels);
    for (int ch = 0; ch < plan.nchannels; ch++) {
        size_t base = GPURING_MIN(count, (size_t)ch * per_channel);
        size_t n = GPURING_MIN(per_channel, count - base);
        if (plan.algo == GPURING_ALGO_GATHER) {
            gpuring_gather_prog_init(&c->exec[ch].prog, base, n, g->nranks, g->ring_ix[ch],
                                     plan.ordered);
        } else {
            gpuring_ring_prog_init(&c->exec[ch].prog, base, n, plan.chunk_elems, g->nranks,
                                   g->ring_ix[ch]);
        }
        c->exec[ch].send = &c->send[ch];
        c->exec[ch].recv = &c->recv[ch];
    }
    args = (gpuring_exec_args_t){.sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                                 .type = type, .op = op,
                                 .nchannels = plan.nchannels, .channels = c->exec,
                                 .scratch = c->scratch,
                                 .timeout = c->cfg.wait_timeout, .proxy = c->proxy};
    if (c->proxy != NULL) gpuring_proxy_active_begin(c->proxy);
    st = gpuring_exec_host_run(&args);
    if (c->proxy != NULL) gpuring_proxy_active_end(c->proxy);
    if (st != GPURING_OK) c->broken = 1;
    return st;
}

void gpuring_comm_describe(const gpuring_comm_t *c, char *buf, size_t len)
{
    int nnet = 0;
    for (int ch = 0; ch < c->graph.nchannels; ch++) {
        nnet += c->send[ch].type == GPURING_CONN_NET;
        nnet += c->recv[ch].type == GPURING_CONN_NET;
    }
    snprintf(buf, len, "%d ranks, %d nodes, %d channels, ring prev %d next %d, %d net conns, "
             "%zu B slots", c->graph.nranks, c->graph.nnodes, c->graph.nchannels,
             c->graph.prev[0], c->graph.next[0], nnet, c->cfg.slot_bytes);
}
