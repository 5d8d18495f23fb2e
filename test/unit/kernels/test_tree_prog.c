/*
 * test_tree_prog.c -- the rooted tree programs (prog_tree_bcast.h,
 * prog_tree_reduce.h) on the trees graph/graph.c builds, without MPI: every
 * rank's graph is built as that rank would build it, and all n ranks'
 * programs run together, op by op, over a queue per directed tree edge of
 * at most GPURING_NSTEPS slots (the connection contract's flow control).
 *
 * For 1..8 ranks, several node layouts (one node, every rank its own node,
 * nodes of 2 and 3, two hosts with interleaved ranks, scrambled orders
 * inside the nodes), every root, both trees (channel 0 and 1), odd counts
 * and many slot steps:
 *   - the tree itself, from all ranks' graphs: every edge named by both of
 *     its ends, n - 1 edges, connected; and each rank's peer toward the
 *     root (graph.h: tree_toward) is its parent in a breadth-first search
 *     from the root done here, independently of graph.c;
 *   - the programs: no operation names a peer the rank does not have, none
 *     moves more than a slot, none stalls, no slot is left unread;
 *   - the results: element e of rank r's input is (1 << 4r) + (e << 32),
 *     so a reduce result holds, in its low nibbles, how many times each
 *     rank's input was folded in (each exactly once, at the root) and, in
 *     its high word, from which element; a bcast leaves the root's buffer
 *     on every rank; ranks that must not write the output do not, and the
 *     ones that must write each element exactly once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "kernels/prog_ops.h"
#include "proxy/conn.h" /* GPURING_NSTEPS */
#include "test/unit/unit_test.h"

#define MAXR 8
#define NCH 2
#define POISON 0xdeadbeefcafef00dull

typedef enum { ONE_NODE, RPN1, RPN2, RPN3, INTERLEAVED, SCRAMBLED, NLAYOUTS } layout_t;
static const char *layout_names[NLAYOUTS] = {"one node", "rpn 1", "rpn 2", "rpn 3",
                                             "two hosts interleaved", "scrambled, nodes of 3"};

/* Every rank's graph of n ranks in the layout, 2 channels (trees 0 and 1). */
static int build_graphs(int n, layout_t layout, gpuring_graph_t *g)
{
    gpuring_peer_info_t peers[MAXR];
    int32_t pos[MAXR * NCH];
    static const int rpn[NLAYOUTS] = {0, 1, 2, 3, 0, 0};

    memset(peers, 0, sizeof(peers));
    for (int r = 0; r < n; r++) {
        peers[r].host_hash = layout == INTERLEAVED ? 1 + (uint64_t)(r % 2)
                             : layout == SCRAMBLED ? 1 + (uint64_t)(r / 3)
                                                   : 1;
        for (int c = 0; c < NCH; c++) {
            /* any integers: ranks sort by them inside their node */
            pos[r * NCH + c] = layout == SCRAMBLED ? (r * 5 + c * 3) % 7 : r;
        }
    }
    for (int r = 0; r < n; r++) {
        if (gpuring_graph_init(peers, n, r, rpn[layout], NCH, &g[r]) != GPURING_OK ||
            gpuring_graph_connect(&g[r], pos) != GPURING_OK) {
            EXPECT(0, "graph of rank %d, %d ranks, %s", r, n, layout_names[layout]);
            return -1;
        }
    }
    return 0;
}

/* The rank behind peer i of rank r's tree on channel c (-1: no such peer). */
static int peer_rank(const gpuring_graph_t *g, int c, int i)
{
    if (i == 0) return g->tree_parent[c];
    return i <= g->tree_nchild[c] ? g->tree_child[c][i - 1] : -1;
}

/* The tree as an undirected graph is a tree, and tree_toward agrees with a BFS from root. */
static void check_tree(int n, layout_t layout, const gpuring_graph_t *g, int c)
{
    int adj[MAXR][MAXR] = {{0}}, edges = 0, bad_sym = 0;

    for (int r = 0; r < n; r++) {
        for (int i = 0; i < GPURING_MAX_PEERS; i++) {
            int q = peer_rank(&g[r], c, i);
            if (q < 0) continue;
            adj[r][q]++;
        }
    }
    for (int r = 0; r < n; r++) {
        for (int q = 0; q < n; q++) {
            bad_sym += adj[r][q] != adj[q][r] || adj[r][q] > 1 || (r == q && adj[r][q]);
            edges += r < q && adj[r][q];
        }
    }
    EXPECT(bad_sym == 0 && edges == n - 1, "%d ranks, %s, channel %d: %d one-sided or repeated "
           "edges, %d edges", n, layout_names[layout], c, bad_sym, edges);
    for (int root = 0; root < n; root++) {
        int from[MAXR], queue[MAXR], head = 0, tail = 0, bad = 0;

        for (int r = 0; r < n; r++) from[r] = -2;
        from[root] = -1;
        queue[tail++] = root;
        while (head < tail) {
            int r = queue[head++];
            for (int q = 0; q < n; q++) {
                if (!adj[r][q] || from[q] != -2) continue;
                from[q] = r;
                queue[tail++] = q;
            }
        }
        for (int r = 0; r < n; r++) {
            int t = g[r].tree_toward[(size_t)c * (size_t)n + (size_t)root];
            bad += tail != n || (r == root ? t != -1 : t < 0 || peer_rank(&g[r], c, t) != from[r]);
        }
        EXPECT(bad == 0, "%d ranks, %s, channel %d, root %d: %d ranks with the wrong peer "
               "toward the root (or the tree is not connected: %d of %d reached)", n,
               layout_names[layout], c, root, bad, tail, n);
    }
}

/* One directed edge's slots in flight (at most GPURING_NSTEPS). */
typedef struct {
    size_t count[GPURING_NSTEPS];
    uint64_t *v[GPURING_NSTEPS];
    uint64_t head, tail;
} edge_q_t;

/*
 * Run every rank's program of `algo` (TREE_BCAST or TREE_REDUCE) rooted at
 * `root` on the channels in `chans` (bit c: channel c, tree c % 2), the
 * buffer cut into one region per channel as gpuring_enqueue.c does.
 */
static void run_rooted(gpuring_prog_algo_t algo, int n, layout_t layout,
                       const gpuring_graph_t *g, unsigned chans, size_t count, size_t chunk,
                       int root)
{
    const int nch = __builtin_popcount(chans);
    const int bcast = algo == GPURING_PROG_TREE_BCAST;
    const size_t per = GPURING_DIV_UP(GPURING_DIV_UP(count, (size_t)nch),
                                      (size_t)GPURING_PROG_ALIGN_ELEMS) *
                       GPURING_PROG_ALIGN_ELEMS;
    uint64_t *in[MAXR], *out[MAXR];
    unsigned char *hits[MAXR];
    int bad_prog = 0, bad_val = 0, bad_cover = 0, stalled = 0;

    for (int r = 0; r < n; r++) {
        in[r] = malloc(count * sizeof(uint64_t));
        out[r] = malloc((count + 1) * sizeof(uint64_t));
        hits[r] = calloc(count, 1);
        for (size_t e = 0; e < count; e++) {
            in[r][e] = ((uint64_t)1 << (4 * r)) + ((uint64_t)e << 32);
            out[r][e] = POISON;
        }
        out[r][count] = POISON; /* guard */
        /* bcast: one buffer, the root's holds the data */
        if (bcast) memcpy(out[r], in[r], r == root ? count * sizeof(uint64_t) : 0);
        if (bcast) {
            free(in[r]);
            in[r] = out[r];
        }
    }
    for (int k = 0, c = 0; k < nch; k++, c++) {
        while (!(chans & (1u << c))) c++;
        const size_t base = GPURING_MIN(count, (size_t)k * per);
        const size_t len = GPURING_MIN(per, count - base);
        gpuring_prog_t p[MAXR];
        uint64_t next[MAXR];
        edge_q_t q[MAXR][MAXR]; /* q[a][b]: from rank a to rank b */
        int moved = 1, done = 0;

        memset(q, 0, sizeof(q));
        for (int r = 0; r < n; r++) {
            const gpuring_graph_t *gr = &g[r];
            const int toward = gr->tree_toward[(size_t)c * (size_t)n + (size_t)root];

            if (bcast) {
                gpuring_tree_bcast_prog_init(&p[r], base, len, chunk, n, gr->tree_parent[c] >= 0,
                                             gr->tree_nchild[c], toward);
            } else {
                gpuring_tree_reduce_prog_init(&p[r], base, len, chunk, n, gr->tree_parent[c] >= 0,
                                              gr->tree_nchild[c], toward);
            }
            next[r] = 0;
        }
        while (moved && !done) {
            moved = 0;
            done = 1;
            for (int r = 0; r < n; r++) {
                gpuring_step_t s;
                uint64_t *v;
                int ready = 1;

                if (next[r] >= p[r].nops) continue;
                done = 0;
                gpuring_prog_op(&p[r], next[r], &s);
                for (int i = 0; i < GPURING_MAX_PEERS; i++) {
                    const unsigned bit = 1u << i;
                    const int peer = peer_rank(&g[r], c, i);

                    if (!((s.recv_mask | s.send_mask) & bit)) continue;
                    if (peer < 0) { /* a peer it does not have */
                        bad_prog++;
                        next[r] = p[r].nops;
                        ready = 0;
                        break;
                    }
                    if ((s.recv_mask & bit) && q[peer][r].head == q[peer][r].tail) ready = 0;
                    if ((s.send_mask & bit) && q[r][peer].tail - q[r][peer].head >= GPURING_NSTEPS)
                        ready = 0;
                }
                if (!ready) continue;
                moved = 1;
                next[r]++;
                bad_prog += s.count > gpuring_prog_chunk(chunk) ||
                            (s.count > 0 && s.off + s.count > count) ||
                            (s.count > 0 && s.in_off + s.count > count) ||
                            !!(s.flags & GPURING_PRIM_RECV) != !!s.recv_mask ||
                            !!(s.flags & GPURING_PRIM_SEND) != !!s.send_mask;
                if (s.count > 0 && (s.off + s.count > count || s.in_off + s.count > count))
                    continue;
                v = calloc(s.count + 1, sizeof(uint64_t));
                if (s.flags & GPURING_PRIM_SRC) {
                    for (size_t e = 0; e < s.count; e++) v[e] += in[r][s.in_off + e];
                }
                for (int i = 0; i < GPURING_MAX_PEERS; i++) {
                    edge_q_t *e;
                    if (!(s.recv_mask & (1u << i))) continue;
                    e = &q[peer_rank(&g[r], c, i)][r];
                    bad_prog += e->count[e->head % GPURING_NSTEPS] != s.count;
                    for (size_t k = 0; k < s.count && k < e->count[e->head % GPURING_NSTEPS]; k++)
                        v[k] += e->v[e->head % GPURING_NSTEPS][k];
                    free(e->v[e->head % GPURING_NSTEPS]);
                    e->head++;
                }
                if (s.flags & GPURING_PRIM_DST) {
                    memcpy(out[r] + s.off, v, s.count * sizeof(uint64_t));
                    for (size_t e = 0; e < s.count; e++) hits[r][s.off + e]++;
                }
                for (int i = 0; i < GPURING_MAX_PEERS; i++) {
                    edge_q_t *e;
                    if (!(s.send_mask & (1u << i))) continue;
                    e = &q[r][peer_rank(&g[r], c, i)];
                    e->count[e->tail % GPURING_NSTEPS] = s.count;
                    e->v[e->tail % GPURING_NSTEPS] = malloc((s.count + 1) * sizeof(uint64_t));
                    memcpy(e->v[e->tail % GPURING_NSTEPS], v, s.count * sizeof(uint64_t));
                    e->tail++;
                }
                free(v);
            }
        }
        for (int a = 0; a < n; a++) {
            stalled += next[a] != p[a].nops;
            for (int b = 0; b < n; b++) {
                stalled += q[a][b].head != q[a][b].tail; /* slots nobody read */
                for (uint64_t k = q[a][b].head; k < q[a][b].tail; k++)
                    free(q[a][b].v[k % GPURING_NSTEPS]);
            }
        }
    }
    /* the reference */
    for (int r = 0; r < n; r++) {
        const int writes = bcast ? r != root : r == root;

        for (size_t e = 0; e < count; e++) {
            uint64_t want = POISON;
            if (bcast) {
                want = ((uint64_t)1 << (4 * root)) + ((uint64_t)e << 32);
            } else if (r == root) {
                want = (uint64_t)n * ((uint64_t)e << 32);
                for (int x = 0; x < n; x++) want += (uint64_t)1 << (4 * x);
            }
            bad_val += out[r][e] != want;
            bad_cover += hits[r][e] != (writes ? 1 : 0);
        }
        bad_val += out[r][count] != POISON;
        if (!bcast) free(in[r]);
        free(out[r]);
        free(hits[r]);
    }
    EXPECT(bad_prog == 0 && stalled == 0 && bad_val == 0 && bad_cover == 0,
           "%s %d ranks, %s, channels 0x%x, count %zu, chunk %zu, root %d: %d program errors, "
           "%d stalled ranks or unread edges, %d wrong values, %d elements not written once",
           bcast ? "bcast" : "reduce", n, layout_names[layout], chans, count, chunk, root,
           bad_prog, stalled, bad_val, bad_cover);
}

int main(void)
{
    /* counts x chunks: one slot step, odd tails, many steps (more than GPURING_NSTEPS) */
    static const size_t shapes[][2] = {{1, 16}, {7, 5}, {33, 16}, {1000, 64}, {4099, 4096},
                                       {333, 1}};
    const int nshapes = (int)(sizeof(shapes) / sizeof(shapes[0]));

    for (int n = 1; n <= MAXR; n++) {
        for (int layout = 0; layout < NLAYOUTS; layout++) {
            gpuring_graph_t g[MAXR];

            if (build_graphs(n, (layout_t)layout, g) != 0) continue;
            for (int c = 0; c < NCH; c++) check_tree(n, (layout_t)layout, g, c);
            for (int root = 0; root < n; root++) {
                for (int k = 0; k < nshapes; k++) {
                    /* tree 0 alone, tree 1 alone, or both splitting the buffer */
                    const unsigned chans = 1u + (unsigned)(k + root) % 3;
                    for (int algo = GPURING_PROG_TREE_BCAST; algo <= GPURING_PROG_TREE_REDUCE;
                         algo++) {
                        run_rooted((gpuring_prog_algo_t)algo, n, (layout_t)layout, g, chans,
                                   shapes[k][0], shapes[k][1], root);
                    }
                }
            }
            for (int r = 0; r < n; r++) gpuring_graph_free(&g[r]);
        }
    }
    return unit_report();
}
