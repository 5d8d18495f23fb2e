/*
 * graph.c -- nodes and rings (seed 002).
 *
 * Nodes: ranks with the same host hash share a host; with ranks_per_node =
 * k > 0, the ranks of a host are cut, in rank order, into virtual nodes of k.
 * Nodes are numbered by their lowest rank.
 *
 * Rings: the ranks of each node in rank order, nodes one after the other, so
 * the recv rank of a node follows the send rank of the previous node.
 * (Topology-aware intra-node orders per channel come with the hwloc graph.)
 *
 * Trees (seed 004): inside a node, a chain in the channel's ring order; its
 * first rank (the head) is the node in the binary tree over nodes: its
 * parent is the parent node's head, its children the child nodes' heads and
 * the next rank of the chain.  Channel c uses tree c % 2 of the double
 * binary tree, so with an even channel count each tree carries half of the
 * data.  Bcast and reduce run on a tree rooted at any rank: every rank keeps,
 * per channel, its peer toward each rank (tree_toward), computed here from
 * every rank's place in the tree, as it keeps each rank's ring position
 * (ring_pos): a call looks its root up instead of searching.
 */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

/* Ranks sorted by (host hash, rank): each host's ranks are then consecutive. */
typedef struct graph_host_rank {
    uint64_t host_hash;
    int rank;
} graph_host_rank_t;

static int graph_cmp_host(const void *a, const void *b)
{
    const graph_host_rank_t *x = a, *y = b;
    if (x->host_hash != y->host_hash) return x->host_hash < y->host_hash ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static gpuring_status_t graph_nodes(const gpuring_peer_info_t *peers, int nranks,
                                    int ranks_per_node, gpuring_graph_t *g)
{
    graph_host_rank_t *order = malloc(sizeof(*order) * (size_t)nranks);
    int *leader = malloc(sizeof(int) * (size_t)nranks); /* first rank of the same node */

    if (order == NULL || leader == NULL) {
        free(order);
        free(leader);
        return GPURING_ERR_NO_MEMORY;
    }
    for (int r = 0; r < nranks; r++) order[r] = (graph_host_rank_t){peers[r].host_hash, r};
    qsort(order, (size_t)nranks, sizeof(*order), graph_cmp_host);
    for (int i = 0, local = 0; i < nranks; i++) {
        int r = order[i].rank;
        int same_host = i > 0 && order[i - 1].host_hash == order[i].host_hash;
        local = same_host ? local + 1 : 0;
        /* a new node at each host, and every ranks_per_node ranks of a host */
        leader[r] = same_host && (ranks_per_node <= 0 || local % ranks_per_node != 0)
                        ? leader[order[i - 1].rank]
                        : r;
    }
    /* nodes numbered by their lowest rank */
    g->nnodes = 0;
    for (int r = 0; r < nranks; r++) {
        g->node[r] = leader[r] == r ? g->nnodes++ : g->node[leader[r]];
    }
    free(order);
    free(leader);
    return GPURING_OK;
}

/*
 * Ring c lists each node's ranks together, starting at a node boundary: a
 * node's head is its first rank there, and its chain follows the ring.
 */
static void graph_chains(const gpuring_graph_t *g, int c, int *head, int *chain_next,
                         int *chain_prev)
{
    const int *ring = g->rings + (size_t)c * (size_t)g->nranks;

    for (int n = 0; n < g->nnodes; n++) head[n] = -1;
    for (int i = 0; i < g->nranks; i++) {
        int r = ring[i];
        if (head[g->node[r]] < 0) head[g->node[r]] = r;
        chain_prev[r] = i > 0 && g->node[ring[i - 1]] == g->node[r] ? ring[i - 1] : -1;
        chain_next[r] = i + 1 < g->nranks && g->node[ring[i + 1]] == g->node[r] ? ring[i + 1] : -1;
    }
}

/* The tree parent of every rank on channel c (-1 at the tree's root), from its chains. */
static void graph_tree_parents(const gpuring_graph_t *g, int c, const int *head,
                               const int *chain_prev, int *parent_of)
{
    for (int r = 0; r < g->nranks; r++) {
        int parent[2], child0[2], child1[2];

        if (head[g->node[r]] != r) {
            parent_of[r] = chain_prev[r];
            continue;
        }
        gpuring_graph_dtree(g->nnodes, g->node[r], parent, child0, child1);
        parent_of[r] = parent[c % 2] >= 0 ? head[parent[c % 2]] : -1;
    }
}

/*
 * This rank's peer toward every rank x on channel c (graph.h: tree_toward):
 * the child whose subtree holds x, else the parent.  Walks up from x to the
 * first rank whose answer is known (this rank's children and the tree's
 * root are), then fills the path: O(nranks) per channel.
 */
static void graph_tree_toward(gpuring_graph_t *g, int c, const int *parent_of, int *path)
{
    signed char *toward = g->tree_toward + (size_t)c * (size_t)g->nranks;
    const signed char unknown = -2;

    for (int x = 0; x < g->nranks; x++) toward[x] = unknown;
    toward[g->rank] = -1;
    for (int i = 0; i < g->tree_nchild[c]; i++) toward[g->tree_child[c][i]] = (signed char)(1 + i);
    for (int x = 0; x < g->nranks; x++) {
        int len = 0, y = x;
        signed char answer;

        while (toward[y] == unknown && parent_of[y] >= 0) {
            path[len++] = y;
            y = parent_of[y];
        }
        /* stopped at a known rank, or at the tree's root: then x is not below this rank */
        if (toward[y] == unknown) toward[y] = 0;
        answer = toward[y];
        while (len > 0) toward[path[--len]] = answer;
    }
}

static gpuring_status_t graph_trees(gpuring_graph_t *g)
{
    int *head = malloc(sizeof(int) * (size_t)g->nnodes);
    int *next = malloc(sizeof(int) * (size_t)g->nranks);
    int *prev = malloc(sizeof(int) * (size_t)g->nranks);
    int *parent_of = malloc(sizeof(int) * (size_t)g->nranks);
    int *path = malloc(sizeof(int) * (size_t)g->nranks);
    const int me = g->rank, mynode = g->node[me];

    if (head == NULL || next == NULL || prev == NULL || parent_of == NULL || path == NULL) {
        free(head); free(next); free(prev); free(parent_of); free(path);
        return GPURING_ERR_NO_MEMORY;
    }
    g->tree_depth = 0;
    for (int c = 0; c < g->nchannels; c++) {
        int parent[2], child0[2], child1[2], t = c % 2;
        int *kids = g->tree_child[c];

        graph_chains(g, c, head, next, prev);
        gpuring_graph_dtree(g->nnodes, mynode, parent, child0, child1);
        g->tree_nchild[c] = 0;
        if (head[mynode] == me) {
            g->tree_parent[c] = parent[t] >= 0 ? head[parent[t]] : -1;
            if (child0[t] >= 0) kids[g->tree_nchild[c]++] = head[child0[t]];
            if (child1[t] >= 0) kids[g->tree_nchild[c]++] = head[child1[t]];
        } else {
            g->tree_parent[c] = prev[me];
        }
        if (next[me] >= 0) kids[g->tree_nchild[c]++] = next[me];
        graph_tree_parents(g, c, head, prev, parent_of);
        graph_tree_toward(g, c, parent_of, path);
    }
    /* depth: the node tree's depth plus the longest chain (tuning) */
    {
        int maxchain = 0, depth = 0;
        int *len = head; /* (done with: the ranks per node, one pass) */

        memset(len, 0, sizeof(int) * (size_t)g->nnodes);
        for (int r = 0; r < g->nranks; r++) len[g->node[r]]++;
        for (int n = 0; n < g->nnodes; n++) maxchain = GPURING_MAX(maxchain, len[n] - 1);
        for (int n = 0; n < g->nnodes; n++) {
            int d = 0, x = n, p[2], c0[2], c1[2];
            for (;;) {
                gpuring_graph_dtree(g->nnodes, x, p, c0, c1);
                if (p[0] < 0) break;
                x = p[0];
                d++;
            }
            depth = GPURING_MAX(depth, d);
        }
        g->tree_depth = depth + maxchain;
    }
    free(head); free(next); free(prev); free(parent_of); free(path);
    return GPURING_OK;
}

gpuring_status_t gpuring_graph_init(const gpuring_peer_info_t *peers, int nranks, int rank,
                                    int ranks_per_node, int nchannels, gpuring_graph_t *g)
{
    gpuring_status_t st;

    memset(g, 0, sizeof(*g));
    if (nchannels < 1 || nchannels > GPURING_MAX_CHANNELS) {
        GPURING_ERROR(GPURING_SUBSYS_GRAPH, "channel count %d outside 1..%d", nchannels,
                      GPURING_MAX_CHANNELS);
        return GPURING_ERR_INVALID;
    }
    g->nranks = nranks;
    g->rank = rank;
    g->nchannels = nchannels;
    g->node = malloc(sizeof(int) * (size_t)nranks);
    g->rings = malloc(sizeof(int) * (size_t)nranks * (size_t)nchannels);
    g->ring_pos = malloc(sizeof(int) * (size_t)nranks * (size_t)nchannels);
    g->tree_toward = malloc((size_t)nranks * (size_t)nchannels);
    if (g->node == NULL || g->rings == NULL || g->ring_pos == NULL || g->tree_toward == NULL) {
        gpuring_graph_free(g);
        return GPURING_ERR_NO_MEMORY;
    }
    st = graph_nodes(peers, nranks, ranks_per_node, g);
    if (st != GPURING_OK) gpuring_graph_free(g);
    return st;
}

gpuring_status_t gpuring_graph_xml_locs(const gpuring_graph_t *g, gpuring_topo_t *topo,
                                        gpuring_topo_loc_t *locs)
{
    int *played = calloc((size_t)g->nnodes, sizeof(int)); /* GPUs each node gave out */

    if (played == NULL) return GPURING_ERR_NO_MEMORY;
    for (int r = 0; r < g->nranks; r++)
        gpuring_graph_topo_local(topo, NULL, played[g->node[r]]++, &locs[r]);
    free(played);
    return GPURING_OK;
}

gpuring_status_t gpuring_graph_local_order(const gpuring_graph_t *g, gpuring_topo_t *topo,
                                           const gpuring_topo_loc_t *locs, int32_t *pos)
{
    int nlocal = 0, me = -1;
    int *local = malloc(sizeof(int) * (size_t)g->nranks);
    gpuring_path_t *dist = NULL;
    int *order = NULL;
    gpuring_status_t st = GPURING_OK;

    if (local == NULL) return GPURING_ERR_NO_MEMORY;
    for (int r = 0; r < g->nranks; r++) {
        if (g->node[r] != g->node[g->rank]) continue;
        if (r == g->rank) me = nlocal;
        local[nlocal++] = r;
    }
    /* default: rank order inside the node */
    for (int c = 0; c < g->nchannels; c++) pos[c] = me;
    if (topo == NULL || nlocal < 2) goto out;
    dist = malloc(sizeof(*dist) * (size_t)nlocal * (size_t)nlocal);
    order = malloc(sizeof(int) * (size_t)nlocal * (size_t)g->nchannels);
    if (dist == NULL || order == NULL) {
        st = GPURING_ERR_NO_MEMORY;
        goto out;
    }
    for (int i = 0; i < nlocal; i++) {
        for (int j = 0; j < nlocal; j++) {
            dist[i * nlocal + j] = gpuring_graph_topo_path(topo, &locs[local[i]], &locs[local[j]]);
        }
    }
    GPURING_CHECK_GOTO(gpuring_graph_ring_order(dist, nlocal, g->nchannels, order), st, out);
    for (int c = 0; c < g->nchannels; c++) {
        for (int k = 0; k < nlocal; k++) {
            if (order[c * nlocal + k] == me) pos[c] = k;
        }
    }
out:
    free(local);
    free(dist);
    free(order);
    return st;
}

typedef struct graph_ring_key {
    int node, pos, rank;
} graph_ring_key_t;

static int graph_cmp_ring(const void *a, const void *b)
{
    const graph_ring_key_t *x = a, *y = b;
    if (x->node != y->node) return x->node - y->node;
    if (x->pos != y->pos) return x->pos - y->pos;
    return x->rank - y->rank;
}

gpuring_status_t gpuring_graph_connect(gpuring_graph_t *g, const int32_t *pos)
{
    const int nranks = g->nranks;
    graph_ring_key_t *keys = malloc(sizeof(*keys) * (size_t)nranks);
    gpuring_status_t st;

    if (keys == NULL) return GPURING_ERR_NO_MEMORY;
    /* ring c: node by node, a node's ranks by their position in its order */
    for (int c = 0; c < g->nchannels; c++) {
        int *ring = g->rings + (size_t)c * (size_t)nranks;
        for (int r = 0; r < nranks; r++) {
            keys[r] = (graph_ring_key_t){g->node[r], pos ? pos[(size_t)r * g->nchannels + c] : r, r};
        }
        qsort(keys, (size_t)nranks, sizeof(*keys), graph_cmp_ring);
        for (int i = 0; i < nranks; i++) {
            ring[i] = keys[i].rank;
            g->ring_pos[(size_t)c * (size_t)nranks + (size_t)ring[i]] = i;
        }
        for (int i = 0; i < nranks; i++) {
            if (ring[i] == g->rank) {
                g->ring_ix[c] = i;
                g->prev[c] = ring[(i + nranks - 1) % nranks];
                g->next[c] = ring[(i + 1) % nranks];
            }
        }
    }
    free(keys);
    GPURING_CHECK(gpuring_graph_rings_check(g));
    st = graph_trees(g);
    GPURING_DEBUG(GPURING_SUBSYS_GRAPH, "%d ranks on %d nodes, %d channels, prev %d next %d",
                  nranks, g->nnodes, g->nchannels, g->prev[0], g->next[0]);
    return st;
}

gpuring_status_t gpuring_graph_build(const gpuring_peer_info_t *peers, int nranks, int rank,
                                     int ranks_per_node, int nchannels, gpuring_graph_t *g)
{
    gpuring_status_t st;

    GPURING_CHECK(gpuring_graph_init(peers, nranks, rank, ranks_per_node, nchannels, g));
    st = gpuring_graph_connect(g, NULL);
    if (st != GPURING_OK) gpuring_graph_free(g);
    return st;
}

gpuring_status_t gpuring_graph_rings_check(const gpuring_graph_t *g)
{
    char *seen = calloc((size_t)g->nranks, 1);

    if (seen == NULL) return GPURING_ERR_NO_MEMORY;
    for (int c = 0; c < g->nchannels; c++) {
        const int *ring = g->rings + (size_t)c * (size_t)g->nranks;
        memset(seen, 0, (size_t)g->nranks);
        for (int i = 0; i < g->nranks; i++) {
            if (ring[i] < 0 || ring[i] >= g->nranks || seen[ring[i]]) {
                GPURING_ERROR(GPURING_SUBSYS_GRAPH,
                              "ring of channel %d is broken at position %d (rank %d %s)", c, i,
                              ring[i], ring[i] < 0 || ring[i] >= g->nranks ? "out of range"
                                                                          : "appears twice");
                free(seen);
                return GPURING_ERR_INVALID;
            }
            seen[ring[i]] = 1;
        }
    }
    free(seen);
    return GPURING_OK;
}

void gpuring_graph_free(gpuring_graph_t *g)
{
    free(g->node);
    free(g->rings);
    free(g->ring_pos);
    free(g->tree_toward);
    g->node = NULL;
    g->rings = NULL;
    g->ring_pos = NULL;
    g->tree_toward = NULL;
}
