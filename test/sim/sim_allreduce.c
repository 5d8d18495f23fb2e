/*
 * sim_allreduce.c -- the ring, tree and gather schedules for thousands of
 * ranks in one process (allreduce; with -C, bcast and reduce: the chain and
 * the rooted tree, rooted at rank n/3), no MPI: every rank's graph comes from
 * gpuring_graph_build() on fake peer info, every rank runs the real host
 * executor over the real step programs, and the connections are in-memory
 * FIFOs joined by a synchronous "network": once per round every posted step
 * is delivered and every freed slot is credited back.  A round is one
 * communication step on the critical path, so the rounds to completion show
 * how each schedule's latency grows with the number of nodes.
 *
 * Every rank's result is checked against a reference computed here.
 *
 *   sim_allreduce [-n N,N,...] [-k ranks_per_node] [-c count] [-s slot_elems]
 *                 [-C allreduce|bcast|reduce] [-q]
 * (the gather runs only where count fits one slot: -c 16 -s 16, say)
 * Prints one row per (N, algorithm) and a closing "N passed, N failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "graph/graph.h"
#include "kernels/exec_host.h"
#include "test/unit/unit_test.h"

#define SIM_MAX_CH 2

/* One direction of one edge: the sender's FIFO and the receiver's FIFO. */
typedef struct sim_link {
    gpuring_conn_t *s, *r;
    void *fifo_s, *fifo_r;
} sim_link_t;

typedef struct sim_rank {
    int ring_ix[SIM_MAX_CH], next[SIM_MAX_CH], prev[SIM_MAX_CH];
    int root_ix[SIM_MAX_CH], toward[SIM_MAX_CH]; /* bcast, reduce: the root's ring
                                                    position, the tree peer toward it */
    int parent[SIM_MAX_CH], child[SIM_MAX_CH][3], nchild[SIM_MAX_CH];
    gpuring_conn_t ring_send[SIM_MAX_CH], ring_recv[SIM_MAX_CH];
    gpuring_conn_t tree_send[SIM_MAX_CH][GPURING_MAX_PEERS];
    gpuring_conn_t tree_recv[SIM_MAX_CH][GPURING_MAX_PEERS];
    gpuring_exec_channel_t exec[SIM_MAX_CH];
    gpuring_exec_args_t args;
    int32_t *in, *out;
    void *scratch;
} sim_rank_t;

typedef struct sim {
    gpuring_coll_kind_t coll; /* ALLREDUCE, BCAST or REDUCE */
    int n, k, nch, root;
    size_t count, slot_elems;
    sim_rank_t *ranks;
    sim_link_t *links;
    int nlinks, maxlinks;
} sim_t;

/* A FIFO's memory, zeroed: fresh pages of its own, as a shared-memory connection's, so
 * that only what the run touches is ever faulted in (most of a FIFO is LL lines the
 * sim never uses; calloc zeroed every byte of them from the heap: half the sim's
 * time at 2048 ranks). */
static void *sim_fifo_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    return p == MAP_FAILED ? NULL : p;
}

static void sim_fifo_free(void *fifo, size_t bytes)
{
    if (fifo != NULL) munmap(fifo, bytes);
}

static size_t sim_fifo_bytes(const sim_t *sim)
{
    return gpuring_conn_fifo_bytes(GPURING_CONN_SHM, sim->slot_elems * sizeof(int32_t));
}

static int sim_link(sim_t *sim, gpuring_conn_t *s, int sender, gpuring_conn_t *r, int receiver,
                    int ch)
{
    const size_t slot = sim->slot_elems * sizeof(int32_t), bytes = sim_fifo_bytes(sim);
    sim_link_t *l = &sim->links[sim->nlinks++];

    l->fifo_s = sim_fifo_alloc(bytes);
    l->fifo_r = sim_fifo_alloc(bytes);
    if (l->fifo_s == NULL || l->fifo_r == NULL) return -1;
    /* each end has its own FIFO, as over a network: the round delivers */
    gpuring_conn_attach(s, GPURING_CONN_SHM, GPURING_CONN_SEND, receiver, ch, slot, l->fifo_s);
    gpuring_conn_attach(r, GPURING_CONN_SHM, GPURING_CONN_RECV, sender, ch, slot, l->fifo_r);
    l->s = s;
    l->r = r;
    return 0;
}

/* The network: posted steps land, consumed slots are credited. */
static void sim_deliver(sim_t *sim)
{
    for (int i = 0; i < sim->nlinks; i++) {
        sim_link_t *l = &sim->links[i];
        uint64_t tail = l->s->ctrl->tail;
        for (uint64_t st = l->r->ctrl->tail; st < tail; st++) {
            /* only the bytes the sender said it wrote, as the UCX proxy sends */
            const unsigned slot = (unsigned)(st % GPURING_NSTEPS);
            const size_t off = slot * l->s->slot_bytes, bytes = l->s->ctrl->size[slot];
            memcpy(l->r->slots + off, l->s->slots + off, GPURING_MIN(bytes, l->s->slot_bytes));
            l->r->ctrl->size[slot] = bytes;
        }
        l->r->ctrl->tail = tail;
        l->s->ctrl->head = l->r->ctrl->head;
    }
}

static int sim_setup(sim_t *sim)
{
    gpuring_peer_info_t *peers = calloc((size_t)sim->n, sizeof(*peers));
    gpuring_graph_t g;

    sim->ranks = calloc((size_t)sim->n, sizeof(sim_rank_t));
    sim->maxlinks = sim->n * sim->nch * 8;
    sim->links = calloc((size_t)sim->maxlinks, sizeof(sim_link_t));
    if (peers == NULL || sim->ranks == NULL || sim->links == NULL) return -1;
    for (int r = 0; r < sim->n; r++) {
        peers[r].host_hash = (uint64_t)(r / sim->k) * 0x9e3779b97f4a7c15ull + 1;
        peers[r].pid = r;
    }
    for (int r = 0; r < sim->n; r++) {
        sim_rank_t *x = &sim->ranks[r];
        if (gpuring_graph_build(peers, sim->n, r, 0, sim->nch, &g) != GPURING_OK) return -1;
        for (int c = 0; c < sim->nch; c++) {
            x->ring_ix[c] = g.ring_ix[c];
            x->next[c] = g.next[c];
            x->prev[c] = g.prev[c];
            x->root_ix[c] = g.ring_pos[(size_t)c * (size_t)sim->n + (size_t)sim->root];
            x->toward[c] = g.tree_toward[(size_t)c * (size_t)sim->n + (size_t)sim->root];
            x->parent[c] = g.tree_parent[c];
            x->nchild[c] = g.tree_nchild[c];
            memcpy(x->child[c], g.tree_child[c], sizeof(x->child[c]));
        }
        gpuring_graph_free(&g);
        x->in = malloc(sim->count * sizeof(int32_t));
        x->out = malloc(sim->count * sizeof(int32_t));
        x->scratch = malloc(sim->count * sizeof(int32_t) * (size_t)sim->n);
        if (x->in == NULL || x->out == NULL || x->scratch == NULL) return -1;
        for (size_t i = 0; i < sim->count; i++) x->in[i] = (int32_t)((r * 7 + i * 13) % 1001);
    }
    /* links: ring to next; tree to parent and back */
    for (int r = 0; r < sim->n; r++) {
        for (int c = 0; c < sim->nch; c++) {
            sim_rank_t *x = &sim->ranks[r], *nx = &sim->ranks[x->next[c]];
            if (sim_link(sim, &x->ring_send[c], r, &nx->ring_recv[c], x->next[c], c)) return -1;
            if (x->parent[c] >= 0) {
                sim_rank_t *p = &sim->ranks[x->parent[c]];
                int slot = -1;
                for (int i = 0; i < p->nchild[c]; i++) {
                    if (p->child[c][i] == r) slot = 1 + i;
                }
                if (slot < 0) {
                    EXPECT(0, "n=%d: rank %d's parent %d does not list it", sim->n, r,
                           x->parent[c]);
                    return -1;
                }
                if (sim_link(sim, &x->tree_send[c][0], r, &p->tree_recv[c][slot], x->parent[c], c) ||
                    sim_link(sim, &p->tree_send[c][slot], x->parent[c], &x->tree_recv[c][0], r, c)) {
                    return -1;
                }
            }
        }
    }
    free(peers);
    return 0;
}

static void sim_free(sim_t *sim)
{
    const size_t bytes = sim_fifo_bytes(sim);

    for (int i = 0; i < sim->nlinks; i++) {
        sim_fifo_free(sim->links[i].fifo_s, bytes);
        sim_fifo_free(sim->links[i].fifo_r, bytes);
    }
    for (int r = 0; r < sim->n && sim->ranks != NULL; r++) {
        free(sim->ranks[r].in);
        free(sim->ranks[r].out);
        free(sim->ranks[r].scratch);
    }
    free(sim->links);
    free(sim->ranks);
}

/* Channel c's program of the sim's collective with `algo` on rank x. */
static void sim_prog(const sim_t *sim, const sim_rank_t *x, gpuring_algo_t algo, int c,
                     size_t base, size_t cnt, gpuring_prog_t *p)
{
    const int parent = x->parent[c] >= 0;

    switch (sim->coll) {
    case GPURING_COLL_BCAST:
        if (algo == GPURING_ALGO_TREE) {
            gpuring_tree_bcast_prog_init(p, base, cnt, sim->slot_elems, sim->n, parent,
                                         x->nchild[c], x->toward[c]);
        } else {
            gpuring_bcast_prog_init(p, base, cnt, sim->slot_elems, sim->n, x->ring_ix[c],
                                    x->root_ix[c]);
        }
        return;
    case GPURING_COLL_REDUCE:
        if (algo == GPURING_ALGO_TREE) {
            gpuring_tree_reduce_prog_init(p, base, cnt, sim->slot_elems, sim->n, parent,
                                          x->nchild[c], x->toward[c]);
        } else {
            gpuring_reduce_prog_init(p, base, cnt, sim->slot_elems, sim->n, x->ring_ix[c],
                                     x->root_ix[c]);
        }
        return;
    default:
        break;
    }
    if (algo == GPURING_ALGO_TREE) {
        gpuring_tree_prog_init(p, base, cnt, sim->slot_elems, sim->n, parent, x->nchild[c]);
    } else if (algo == GPURING_ALGO_GATHER) {
        gpuring_gather_prog_init(p, base, cnt, sim->n, x->ring_ix[c], 1);
    } else {
        gpuring_ring_prog_init(p, base, cnt, sim->slot_elems, sim->n, x->ring_ix[c]);
    }
}

/* Run one call of the sim's collective with `algo` on every rank; rounds to
 * completion, -1 on a stall. */
static long sim_run(sim_t *sim, gpuring_algo_t algo, uint64_t *ops_p)
{
    size_t per = GPURING_DIV_UP(sim->count, (size_t)sim->nch);
    int nch = algo == GPURING_ALGO_GATHER ? 1 : sim->nch;
    long rounds = 0, limit = 64L * sim->n + 100000;
    int done_all = 0;

    *ops_p = 0;
    for (int r = 0; r < sim->n; r++) {
        sim_rank_t *x = &sim->ranks[r];
        for (int c = 0; c < nch; c++) {
            size_t base = algo == GPURING_ALGO_GATHER ? 0 : GPURING_MIN(sim->count, c * per);
            size_t cnt = algo == GPURING_ALGO_GATHER ? sim->count
                                                     : GPURING_MIN(per, sim->count - base);
            gpuring_exec_channel_t *e = &x->exec[c];
            memset(e->send, 0, sizeof(e->send));
            memset(e->recv, 0, sizeof(e->recv));
            sim_prog(sim, x, algo, c, base, cnt, &e->prog);
            if (algo == GPURING_ALGO_TREE) {
                for (int i = 0; i < GPURING_MAX_PEERS; i++) {
                    e->send[i] = &x->tree_send[c][i];
                    e->recv[i] = &x->tree_recv[c][i];
                }
            } else {
                e->send[0] = &x->ring_send[c];
                e->recv[0] = &x->ring_recv[c];
            }
            *ops_p = GPURING_MAX(*ops_p, e->prog.nops);
        }
        memset(x->out, 0xff, sim->count * sizeof(int32_t));
        /* bcast: one buffer, the root's holds the data */
        if (sim->coll == GPURING_COLL_BCAST && r == sim->root)
            memcpy(x->out, x->in, sim->count * sizeof(int32_t));
        x->args = (gpuring_exec_args_t){.sendbuf = sim->coll == GPURING_COLL_BCAST ? x->out : x->in,
                                        .recvbuf = x->out,
                                        .count = sim->count, .type = GPURING_TYPE_INT32,
                                        .op = GPURING_OP_SUM, .nchannels = nch,
                                        .channels = x->exec, .scratch = x->scratch};
        gpuring_exec_host_start(&x->args);
    }
    while (!done_all) {
        if (++rounds > limit) return -1;
        done_all = 1;
        for (int r = 0; r < sim->n; r++) {
            int done = 0;
            while (gpuring_exec_host_progress(&sim->ranks[r].args, &done) && !done) {
            }
            done_all &= done;
        }
        sim_deliver(sim);
    }
    return rounds;
}

/* Wrong elements: the sum everywhere (allreduce), at the root (reduce; the
 * others' outputs untouched), the root's input everywhere (bcast). */
static size_t sim_check(const sim_t *sim)
{
    size_t bad = 0;
    for (size_t i = 0; i < sim->count; i++) {
        int32_t want = 0;
        for (int r = 0; r < sim->n; r++) want += sim->ranks[r].in[i];
        if (sim->coll == GPURING_COLL_BCAST) want = sim->ranks[sim->root].in[i];
        for (int r = 0; r < sim->n; r++) {
            const int untouched = sim->coll == GPURING_COLL_REDUCE && r != sim->root;
            bad += sim->ranks[r].out[i] != (untouched ? -1 : want);
        }
    }
    return bad;
}

static void sim_sweep(gpuring_coll_kind_t coll, char *list, int k, size_t count,
                      size_t slot_elems, int quiet)
{
    static const gpuring_algo_t algos[] = {GPURING_ALGO_RING, GPURING_ALGO_TREE,
                                           GPURING_ALGO_GATHER};

    printf("# %s, %zu int32 per rank, %zu-element slots, 2 channels, %d ranks per node%s; "
           "rounds = communication steps on the critical path\n", gpuring_coll_names[coll],
           count, slot_elems, k, coll == GPURING_COLL_ALLREDUCE ? "" : ", root n/3 (ring: the chain)");
    printf("%8s %8s %8s %10s %10s %s\n", "ranks", "nodes", "algo", "rounds", "ops/rank",
           "result");
    for (char *tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
        sim_t sim = {.coll = coll, .n = atoi(tok), .k = k, .nch = SIM_MAX_CH, .count = count,
                     .slot_elems = slot_elems, .root = atoi(tok) / 3};
        if (sim.n < 2 || sim_setup(&sim) != 0) {
            EXPECT(0, "setup of %s ranks", tok);
            sim_free(&sim);
            continue;
        }
        for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
            uint64_t ops;
            long rounds;
            size_t bad;
            /* the gather moves the whole buffer in one slot, and keeps n rows */
            if (algos[a] == GPURING_ALGO_GATHER &&
                (coll != GPURING_COLL_ALLREDUCE || sim.count > sim.slot_elems || sim.n > 257)) {
                continue;
            }
            rounds = sim_run(&sim, algos[a], &ops);
            bad = rounds < 0 ? sim.count : sim_check(&sim);
            EXPECT(rounds > 0 && bad == 0, "%d ranks %s: %s, %zu wrong", sim.n,
                   gpuring_algos[algos[a]].name, rounds < 0 ? "stalled" : "finished", bad);
            if (!quiet || bad) {
                printf("%8d %8d %8s %10ld %10llu %s\n", sim.n, GPURING_DIV_UP(sim.n, k),
                       gpuring_algos[algos[a]].name, rounds, (unsigned long long)ops,
                       rounds < 0 ? "STALLED" : bad ? "WRONG" : "ok");
            }
        }
        sim_free(&sim);
    }
}

int main(int argc, char **argv)
{
    char list[256] = "";
    int k = 1, quiet = 0, opt;
    size_t count = 1000, slot_elems = 16;
    gpuring_coll_kind_t coll = GPURING_COLL_ALLREDUCE;

    while ((opt = getopt(argc, argv, "n:k:c:s:C:q")) != -1) {
        switch (opt) {
        case 'C':
            coll = strcmp(optarg, "bcast") == 0    ? GPURING_COLL_BCAST
                   : strcmp(optarg, "reduce") == 0 ? GPURING_COLL_REDUCE
                                                   : GPURING_COLL_ALLREDUCE;
            break;
        case 'n': snprintf(list, sizeof(list), "%s", optarg); break;
        case 'k': k = atoi(optarg); break;
        case 'c': count = strtoul(optarg, NULL, 0); break;
        case 's': slot_elems = strtoul(optarg, NULL, 0); break;
        case 'q': quiet = 1; break;
        default: return 2;
        }
    }
    if (list[0] != '\0') {
        sim_sweep(coll, list, k, count, slot_elems, quiet);
    } else {
        /* the test suite's run: pipelined sizes to 2048 ranks, then one slot per
         * rank on 4-rank nodes, where the gather runs too */
        char a[] = "2,3,5,8,13,64,257,1000,2048", b[] = "2,3,4,7,16,61,256,1024";
        char c[] = "2,3,5,8,64,257", d[] = "2,3,5,8,64,257";
        sim_sweep(GPURING_COLL_ALLREDUCE, a, 1, 1000, 16, quiet);
        sim_sweep(GPURING_COLL_ALLREDUCE, b, 4, 16, 16, quiet);
        /* bcast and reduce rooted off the tree's root: chain and tree, a few slots */
        sim_sweep(GPURING_COLL_BCAST, c, 1, 64, 16, quiet);
        sim_sweep(GPURING_COLL_REDUCE, d, 1, 64, 16, quiet);
    }
    return unit_report();
}
