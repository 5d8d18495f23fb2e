/*
 * gpuring_graph.c -- print the rings and trees gpuring builds for N nodes of
 * a machine (an hwloc XML file, or this machine), as text or Graphviz DOT.
 * It runs exactly the setup code of a communicator (graph/: locations, the
 * intra-node ring orders, rings joined across nodes, the double binary
 * trees), with one rank per GPU of the machine.
 *
 *   gpuring_graph [-x topo.xml] [-N nodes] [-c channels] [-k ranks_per_node] [-d]
 *     -k  ranks per node (default: the machine's GPU count, at least 1)
 *     -d  Graphviz DOT instead of text (render: dot -Tpng -o graph.png)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/graph.h"

typedef struct tool_rank {
    int parent[GPURING_MAX_CHANNELS], child[GPURING_MAX_CHANNELS][3], nchild[GPURING_MAX_CHANNELS];
} tool_rank_t;

static const char *tool_colors[] = {"red", "blue", "darkgreen", "orange", "purple", "brown"};

int main(int argc, char **argv)
{
    const char *xml = NULL;
    int nodes = 2, nch = 2, k = 0, dot = 0, opt, n;
    gpuring_topo_t *topo;
    gpuring_peer_info_t *peers;
    gpuring_topo_loc_t *locs;
    int32_t *pos;
    tool_rank_t *ranks;
    gpuring_graph_t g;

    while ((opt = getopt(argc, argv, "x:N:c:k:d")) != -1) {
        switch (opt) {
        case 'x': xml = optarg; break;
        case 'N': nodes = atoi(optarg); break;
        case 'c': nch = atoi(optarg); break;
        case 'k': k = atoi(optarg); break;
        case 'd': dot = 1; break;
        default:
            fprintf(stderr, "usage: %s [-x topo.xml] [-N nodes] [-c channels] [-k ranks_per_node] [-d]\n",
                    argv[0]);
            return 2;
        }
    }
    if (gpuring_graph_topo_get(xml, &topo) != GPURING_OK) {
        fprintf(stderr, "cannot load the topology %s\n", xml ? xml : "of this machine");
        return 1;
    }
    if (k <= 0) k = GPURING_MAX(1, gpuring_graph_topo_ngpus(topo));
    if (nodes < 1 || nch < 1 || nch > GPURING_MAX_CHANNELS || (long)nodes * k < 2) {
        fprintf(stderr, "need 2+ ranks and 1-%d channels\n", GPURING_MAX_CHANNELS);
        return 2;
    }
    n = nodes * k;
    peers = calloc((size_t)n, sizeof(*peers));
    locs = calloc((size_t)n, sizeof(*locs));
    pos = calloc((size_t)n * (size_t)nch, sizeof(int32_t));
    ranks = calloc((size_t)n, sizeof(*ranks));
    if (peers == NULL || locs == NULL || pos == NULL || ranks == NULL) return 1;

    /* every node is the same machine: the i-th rank of a node uses its i-th GPU */
    for (int r = 0; r < n; r++) {
        peers[r].host_hash = (uint64_t)(r / k) + 1;
        peers[r].pid = r;
    }
    if (gpuring_graph_init(peers, n, 0, 0, nch, &g) != GPURING_OK ||
        gpuring_graph_xml_locs(&g, topo, locs) != GPURING_OK) {
        fprintf(stderr, "graph setup failed\n");
        return 1;
    }
    gpuring_graph_free(&g);
    /* each node's ring orders, as its first rank computes them */
    for (int r = 0; r < n; r++) {
        if (gpuring_graph_init(peers, n, r, 0, nch, &g) != GPURING_OK ||
            gpuring_graph_local_order(&g, topo, locs, pos + (size_t)r * nch) != GPURING_OK) {
            fprintf(stderr, "graph setup failed for rank %d\n", r);
            return 1;
        }
        gpuring_graph_free(&g);
    }
    /* every rank's view: rings (identical everywhere) and its tree links */
    for (int r = n - 1; r >= 0; r--) {
        if (gpuring_graph_init(peers, n, r, 0, nch, &g) != GPURING_OK ||
            gpuring_graph_connect(&g, pos) != GPURING_OK) {
            fprintf(stderr, "ring setup failed for rank %d\n", r);
            return 1;
        }
        memcpy(ranks[r].parent, g.tree_parent, sizeof(ranks[r].parent));
        memcpy(ranks[r].child, g.tree_child, sizeof(ranks[r].child));
        memcpy(ranks[r].nchild, g.tree_nchild, sizeof(ranks[r].nchild));
        if (r > 0) gpuring_graph_free(&g);
    }

    if (!dot) {
        printf("# %d nodes x %d ranks of %s, %d channels\n", nodes, k, xml ? xml : "this machine",
               nch);
        for (int r = 0; r < k; r++) {
            printf("# rank %d: numa %d, package %d, nic %d, gpu %s\n", r, locs[r].numa,
                   locs[r].package, locs[r].nic, locs[r].gpu_busid[0] ? locs[r].gpu_busid : "-");
        }
        for (int c = 0; c < nch; c++) {
            const int *ring = g.rings + (size_t)c * n;
            printf("channel %d ring: ", c);
            for (int i = 0; i < n; i++) {
                int a = ring[i], b = ring[(i + 1) % n];
                const char *how = g.node[a] != g.node[b]
                                      ? "NET"
                                      : gpuring_path_name(gpuring_graph_topo_path(topo, &locs[a], &locs[b]));
                printf("%d -%s-> ", a, how);
            }
            printf("%d\n", ring[0]);
            printf("channel %d tree %d:", c, c % 2);
            for (int r = 0; r < n; r++) {
                if (ranks[r].parent[c] < 0) printf(" root %d;", r);
            }
            for (int r = 0; r < n; r++) {
                for (int i = 0; i < ranks[r].nchild[c]; i++) {
                    printf(" %d->%d", r, ranks[r].child[c][i]);
                }
            }
            printf("\n");
        }
    } else {
        printf("digraph gpuring {\n  rankdir=LR; node [shape=box, fontsize=10];\n");
        for (int nd = 0; nd < nodes; nd++) {
            printf("  subgraph cluster_%d { label=\"node %d\";", nd, nd);
            for (int r = 0; r < n; r++) {
                if (g.node[r] == nd) {
                    printf(" r%d [label=\"rank %d\\n%s\"];", r, r,
                           locs[r].gpu_busid[0] ? locs[r].gpu_busid : "cpu");
                }
            }
            printf(" }\n");
        }
        for (int c = 0; c < nch; c++) {
            const int *ring = g.rings + (size_t)c * n;
            const char *color = tool_colors[c % (sizeof(tool_colors) / sizeof(tool_colors[0]))];
            for (int i = 0; i < n; i++) {
                printf("  r%d -> r%d [color=%s, label=\"ring %d\", fontsize=8];\n", ring[i],
                       ring[(i + 1) % n], color, c);
            }
            if (c < 2) {
                for (int r = 0; r < n; r++) {
                    for (int i = 0; i < ranks[r].nchild[c]; i++) {
                        printf("  r%d -> r%d [style=dashed, color=%s, label=\"tree %d\", "
                               "fontsize=8];\n",
                               r, ranks[r].child[c][i], color, c);
                    }
                }
            }
        }
        printf("}\n");
    }
    gpuring_graph_free(&g);
    free(peers);
    free(locs);
    free(pos);
    free(ranks);
    gpuring_graph_topo_finalize();
    return 0;
}
