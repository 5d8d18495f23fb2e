/*
 * ring_order.c -- the order of a node's ranks in each channel's ring
 * (seed 002: NCCL searches intra-node rings per channel, then joins the
 * nodes' rings into one; ringIntra[0] is the node's recv rank, the one the
 * previous node sends to, and ringIntra[nlocal-1] its send rank).
 *
 * 1. One best ring over the nlocal ranks.  A ring's cost is compared as:
 *    its worst edge class first (the ring runs at the speed of its slowest
 *    link), then the sum of its edge classes, then how many edges it has in
 *    each class from SYS down (fewer slow edges).  An edge's class is
 *    max(dist[i][j], dist[j][i]).
 *      nlocal <= 8: exact, over every ring starting at rank 0, in
 *                   lexicographic order; the first best one wins.
 *      nlocal > 8:  greedy nearest-neighbour tours (ties to the lowest index)
 *                   from several starts, each improved by 2-opt and or-opt
 *                   (move 1..3 ranks elsewhere) moves until none helps, then
 *                   systematic double-bridge kicks on the best one until
 *                   nlocal kicks in a row find nothing better (or the ring
 *                   reaches a lower bound); the first best ring wins.  A
 *                   fixed budget of looked-at moves bounds the time for
 *                   large nodes (deterministic: counted, not timed).
 *    The ring is then written from rank 0, in the direction whose second
 *    element is the smaller index.
 * 2. Channels: every channel runs that same ring, cut open at a different
 *    place.  Channel c is written from position p of the ring, forwards for
 *    even c and backwards for odd c (NCCL runs alternate channels in the
 *    other direction, so a node's send and recv ranks, hence its NICs,
 *    differ between them).  p is chosen, in this order of preference:
 *      a. its recv rank has been the recv rank of the fewest channels so far
 *         (all different while nchannels <= nlocal);
 *      b. the edge the cut removes is as slow as possible: in a multi-node
 *         ring that intra-node edge is replaced by the network, so cutting a
 *         SYS edge leaves the channel crossing sockets once instead of twice;
 *      c. its send rank has been the send rank of the fewest channels;
 *      d. it is as far along the ring as possible from the recv ranks
 *         already chosen;
 *      e. the lowest position.
 * Everything is deterministic: every rank of a node computes the same order.
 */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

#define EXACT_MAX 8       /* exact search up to this many ranks */
#define NN_ALL_STARTS 32  /* greedy from every start up to this many ranks */
#define NN_STARTS 8       /* else from this many evenly spaced starts */
#define SEARCH_BUDGET 4000000L /* moves the heuristic looks at: 50 ms at most here */

typedef struct ring_cost {
    int hist[GPURING_PATH_COUNT]; /* edges per class */
} ring_cost_t;

static int cost_worst(const ring_cost_t *c)
{
    for (int k = GPURING_PATH_COUNT - 1; k > 0; k--) {
        if (c->hist[k] > 0) return k;
    }
    return 0;
}

static int cost_sum(const ring_cost_t *c)
{
    int s = 0;

    for (int k = 0; k < GPURING_PATH_COUNT; k++) s += k * c->hist[k];
    return s;
}

/* Fewer edges of the slowest class, then of the next one, ...; <0: a is better. */
static int cost_cmp_hist(const ring_cost_t *a, const ring_cost_t *b)
{
    for (int k = GPURING_PATH_COUNT - 1; k >= 0; k--) {
        if (a->hist[k] != b->hist[k]) return a->hist[k] - b->hist[k];
    }
    return 0;
}

/* The ring order's objective: worst class, then sum, then the histogram. */
static int cost_cmp(const ring_cost_t *a, const ring_cost_t *b)
{
    int d = cost_worst(a) - cost_worst(b);

    if (d != 0) return d;
    d = cost_sum(a) - cost_sum(b);
    if (d != 0) return d;
    return cost_cmp_hist(a, b);
}

typedef int (*cost_cmp_fn_t)(const ring_cost_t *a, const ring_cost_t *b);

typedef struct ring_search {
    int n;
    const int *edge;   /* n x n symmetric edge classes */
    int *perm;         /* exact: current permutation */
    int *used;
    int *best;         /* best ring so far */
    ring_cost_t cur;
    ring_cost_t best_cost;
    int have_best;
    long budget;       /* heuristic: candidate moves left to look at */
} ring_search_t;

#define EDGE(_s, _i, _j) ((_s)->edge[(_i) * (_s)->n + (_j)])

static void ring_cost_of(const ring_search_t *s, const int *ring, ring_cost_t *c)
{
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < s->n; i++) c->hist[EDGE(s, ring[i], ring[(i + 1) % s->n])]++;
}

static void offer(ring_search_t *s, const int *ring, const ring_cost_t *c)
{
    if (!s->have_best || cost_cmp(c, &s->best_cost) < 0) {
        memcpy(s->best, ring, (size_t)s->n * sizeof(int));
        s->best_cost = *c;
        s->have_best = 1;
    }
}

/* Exact: position pos of perm to fill, perm[0] = 0 fixed. */
static void exact_rec(ring_search_t *s, int pos)
{
    if (pos == s->n) {
        ring_cost_t c = s->cur;

        c.hist[EDGE(s, s->perm[s->n - 1], s->perm[0])]++;
        offer(s, s->perm, &c);
        return;
    }
    for (int j = 1; j < s->n; j++) {
        int e;

        if (s->used[j]) continue;
        e = EDGE(s, s->perm[pos - 1], j);
        /* prune: an edge worse than the best ring's worst cannot help */
        if (s->have_best && e > cost_worst(&s->best_cost)) continue;
        s->used[j] = 1;
        s->perm[pos] = j;
        s->cur.hist[e]++;
        exact_rec(s, pos + 1);
        s->cur.hist[e]--;
        s->used[j] = 0;
    }
}

static void reverse(int *a, int i, int k)
{
    for (; i < k; i++, k--) {
        int t = a[i];

        a[i] = a[k];
        a[k] = t;
    }
}

/*
 * 2-opt: replace edges (a,b), (d,e) by (a,d), (b,e), reversing b..d.  One
 * pass, applying every improving move met; 1 if any.
 */
static int two_opt(ring_search_t *s, int *tour, ring_cost_t *c, cost_cmp_fn_t cmp)
{
    int n = s->n, improved = 0;

    for (int i = 0; i < n - 2 && s->budget > 0; i++) {
        s->budget -= n;
        for (int k = i + 2; k < n; k++) {
            int a = tour[i], b = tour[i + 1], d = tour[k], e = tour[(k + 1) % n];
            ring_cost_t t = *c;

            if (i == 0 && k == n - 1) continue; /* the two edges touch */
            t.hist[EDGE(s, a, b)]--;
            t.hist[EDGE(s, d, e)]--;
            t.hist[EDGE(s, a, d)]++;
            t.hist[EDGE(s, b, e)]++;
            if (cmp(&t, c) < 0) {
                reverse(tour, i + 1, k);
                *c = t;
                improved = 1;
            }
        }
    }
    return improved;
}

/*
 * Or-opt: move a segment of 1..3 ranks between two other neighbours, in
 * either direction.  One pass, applying every improving move met; 1 if any.
 */
static int or_opt(ring_search_t *s, int *tour, int *tmp, ring_cost_t *c, cost_cmp_fn_t cmp)
{
    int n = s->n, improved = 0;

    for (int len = 1; len <= 3 && len <= n - 3; len++) {
        for (int i = 0; i < n && s->budget > 0; i++) {
            s->budget -= 2 * n;
            /* insert between tour[j] and tour[j+1], both outside the segment */
            for (int m = 0; m < n - len - 1; m++) {
                int prev = tour[(i - 1 + n) % n], f = tour[i], l = tour[(i + len - 1) % n];
                int next = tour[(i + len) % n];
                int j = (i + len + m) % n, a = tour[j], b = tour[(j + 1) % n];

                for (int rev = 0; rev < 2; rev++) {
                    ring_cost_t t = *c;
                    int k = 0;

                    t.hist[EDGE(s, prev, f)]--;
                    t.hist[EDGE(s, l, next)]--;
                    t.hist[EDGE(s, a, b)]--;
                    t.hist[EDGE(s, prev, next)]++;
                    t.hist[EDGE(s, a, rev ? l : f)]++;
                    t.hist[EDGE(s, rev ? f : l, b)]++;
                    if (cmp(&t, c) >= 0) continue;
                    /* rebuild: the ranks from next round to prev, the segment after a */
                    for (int q = 0; q < n - len; q++) {
                        int x = tour[(i + len + q) % n];

                        tmp[k++] = x;
                        if (x == a) {
                            for (int r = 0; r < len; r++) {
                                tmp[k++] = tour[(i + (rev ? len - 1 - r : r)) % n];
                            }
                        }
                    }
                    memcpy(tour, tmp, (size_t)n * sizeof(int));
                    *c = t;
                    improved = 1;
                    break;
                }
            }
        }
    }
    return improved;
}

static void local_search(ring_search_t *s, int *tour, ring_cost_t *c)
{
    /* first fewest slow edges (a move trading one slow edge for several
     * medium ones is a step towards removing the slow class), then the
     * objective, which never gives back the worst class */
    while (two_opt(s, tour, c, cost_cmp_hist) || or_opt(s, tour, s->perm, c, cost_cmp_hist)) {
    }
    while (two_opt(s, tour, c, cost_cmp) || or_opt(s, tour, s->perm, c, cost_cmp)) {
    }
}

/* Greedy nearest-neighbour tour from start (ties to the lowest index). */
static void nearest_neighbour(ring_search_t *s, int start, int *tour)
{
    int n = s->n;

    memset(s->used, 0, (size_t)n * sizeof(int));
    tour[0] = start;
    s->used[start] = 1;
    for (int i = 1; i < n; i++) {
        int from = tour[i - 1], pick = -1;

        for (int j = 0; j < n; j++) {
            if (!s->used[j] && (pick < 0 || EDGE(s, from, j) < EDGE(s, from, pick))) pick = j;
        }
        tour[i] = pick;
        s->used[pick] = 1;
    }
}

/*
 * A bound no ring beats: every rank has two neighbours, so the worst edge
 * is at least any rank's second-best edge, and the sum at least half the
 * total of every rank's two best edges.
 */
static int at_lower_bound(const ring_search_t *s)
{
    int n = s->n, lb_worst = 0, lb_twice_sum = 0;

    for (int i = 0; i < n; i++) {
        int b1 = GPURING_PATH_COUNT, b2 = GPURING_PATH_COUNT;

        for (int j = 0; j < n; j++) {
            int e = EDGE(s, i, j);

            if (j == i) continue;
            if (e < b1) {
                b2 = b1;
                b1 = e;
            } else if (e < b2) {
                b2 = e;
            }
        }
        if (b2 > lb_worst) lb_worst = b2;
        lb_twice_sum += b1 + b2;
    }
    return cost_worst(&s->best_cost) == lb_worst &&
           cost_sum(&s->best_cost) == (lb_twice_sum + 1) / 2;
}

/*
 * The heuristic: nearest-neighbour tours from several starts, each improved
 * by local search; then kicks on the best: kick k rotates it by k, cuts it
 * in quarters A B C D and reconnects A C B D (a "double bridge", which
 * 2-opt and or-opt cannot undo), searches again and keeps it when better.
 * Stops at the lower bound, after n kicks in a row that found nothing
 * better, or when the budget of looked-at moves is spent (deterministic).
 */
static void heuristic(ring_search_t *s, int *tour, int *kick)
{
    int n = s->n, nstarts = n <= NN_ALL_STARTS ? n : NN_STARTS, last = 0;
    ring_cost_t c;

    for (int k = 0; k < nstarts && (k == 0 || s->budget > 0); k++) {
        nearest_neighbour(s, n <= NN_ALL_STARTS ? k : k * n / NN_STARTS, tour);
        ring_cost_of(s, tour, &c);
        local_search(s, tour, &c);
        offer(s, tour, &c);
    }
    for (int k = 0; k - last < n && s->budget > 0 && !at_lower_bound(s); k++) {
        int q1 = n / 4, q2 = n / 2, q3 = 3 * n / 4, m = 0;

        for (int i = 0; i < q1; i++) kick[m++] = s->best[(k + i) % n];
        for (int i = q2; i < q3; i++) kick[m++] = s->best[(k + i) % n];
        for (int i = q1; i < q2; i++) kick[m++] = s->best[(k + i) % n];
        for (int i = q3; i < n; i++) kick[m++] = s->best[(k + i) % n];
        ring_cost_of(s, kick, &c);
        local_search(s, kick, &c);
        if (cost_cmp(&c, &s->best_cost) < 0) last = k + 1;
        offer(s, kick, &c);
    }
}

/* Rotate ring to start at rank 0, oriented so ring[1] < ring[n-1]. */
static void canonical(int *ring, int n, int *tmp)
{
    int z = 0;

    while (ring[z] != 0) z++;
    for (int i = 0; i < n; i++) tmp[i] = ring[(z + i) % n];
    if (n >= 3 && tmp[1] > tmp[n - 1]) reverse(tmp, 1, n - 1);
    memcpy(ring, tmp, (size_t)n * sizeof(int));
}

static int circ_dist(int a, int b, int n)
{
    int d = a > b ? a - b : b - a;

    return d < n - d ? d : n - d;
}

/* Part 2 of the header comment: cut the ring open for each channel. */
static void choose_channels(const ring_search_t *s, const int *ring, int nchannels, int *order,
                            int *recv_uses, int *send_uses, int *recv_pos, int nrecv_pos)
{
    int n = s->n;

    for (int c = 0; c < nchannels; c++) {
        int back = c & 1, bp = -1;
        int bkey[4] = {0, 0, 0, 0};

        for (int p = 0; p < n; p++) {
            int recv = ring[p];
            int send = ring[back ? (p + 1) % n : (p - 1 + n) % n];
            int spread = n, key[4];

            for (int q = 0; q < nrecv_pos; q++) {
                int d = circ_dist(p, recv_pos[q], n);

                if (d < spread) spread = d;
            }
            /* smaller is better, compared in order; ties: lowest p */
            key[0] = recv_uses[recv];
            key[1] = -EDGE(s, recv, send);
            key[2] = send_uses[send];
            key[3] = -spread;
            if (bp >= 0) {
                int q = 0;

                while (q < 4 && key[q] == bkey[q]) q++;
                if (q == 4 || key[q] > bkey[q]) continue;
            }
            bp = p;
            memcpy(bkey, key, sizeof(key));
        }
        for (int i = 0; i < n; i++) {
            order[c * n + i] = ring[back ? (bp - i + n) % n : (bp + i) % n];
        }
        recv_uses[order[c * n]]++;
        send_uses[order[c * n + n - 1]]++;
        recv_pos[nrecv_pos++] = bp;
    }
}

gpuring_status_t gpuring_graph_ring_order(const gpuring_path_t *dist, int nlocal, int nchannels,
                                          int *order)
{
    ring_search_t s;
    int *mem, *edge, *tour, *kick, *recv_uses, *send_uses, *recv_pos;
    size_t n;

    if (dist == NULL || order == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_GRAPH, "ring order: NULL %s", dist == NULL ? "dist" : "order");
        return GPURING_ERR_INVALID;
    }
    if (nlocal < 1 || nchannels < 1 || nchannels > GPURING_MAX_CHANNELS) {
        GPURING_ERROR(GPURING_SUBSYS_GRAPH,
                      "ring order: %d local ranks and %d channels (need >= 1 and 1..%d)", nlocal,
                      nchannels, GPURING_MAX_CHANNELS);
        return GPURING_ERR_INVALID;
    }
    for (int i = 0; i < nlocal; i++) {
        for (int j = 0; j < nlocal; j++) {
            int d = (int)dist[(size_t)i * (size_t)nlocal + (size_t)j];

            if (i != j && (d < GPURING_PATH_LOC || d >= GPURING_PATH_COUNT)) {
                GPURING_ERROR(GPURING_SUBSYS_GRAPH,
                              "ring order: path class %d between local ranks %d and %d is not "
                              "a gpuring_path_t",
                              d, i, j);
                return GPURING_ERR_INVALID;
            }
        }
    }
    if (nlocal == 1) {
        for (int c = 0; c < nchannels; c++) order[c] = 0;
        return GPURING_OK;
    }

    n = (size_t)nlocal;
    mem = calloc(n * n + 8 * n + GPURING_MAX_CHANNELS, sizeof(int));
    if (mem == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_GRAPH, "ring order: out of memory for %d ranks", nlocal);
        return GPURING_ERR_NO_MEMORY;
    }
    edge = mem;
    memset(&s, 0, sizeof(s));
    s.n = nlocal;
    s.edge = edge;
    s.perm = edge + n * n;
    s.used = s.perm + n;
    s.best = s.used + n;
    tour = s.best + n;
    kick = tour + n;
    recv_uses = kick + n;
    send_uses = recv_uses + n;
    recv_pos = send_uses + n; /* n + GPURING_MAX_CHANNELS left */

    for (int i = 0; i < nlocal; i++) {
        for (int j = 0; j < nlocal; j++) {
            int a = (int)dist[(size_t)i * n + (size_t)j], b = (int)dist[(size_t)j * n + (size_t)i];

            edge[(size_t)i * n + (size_t)j] = i == j ? 0 : (a > b ? a : b);
        }
    }

    /* 1. the best ring */
    if (nlocal <= EXACT_MAX) {
        s.perm[0] = 0;
        s.used[0] = 1;
        exact_rec(&s, 1);
    } else {
        s.budget = SEARCH_BUDGET;
        heuristic(&s, tour, kick);
    }
    canonical(s.best, nlocal, tour);
    GPURING_DEBUG(GPURING_SUBSYS_GRAPH, "ring order: %d ranks, worst edge class %d, sum %d",
                  nlocal, cost_worst(&s.best_cost), cost_sum(&s.best_cost));

    /* 2. one cut per channel */
    choose_channels(&s, s.best, nchannels, order, recv_uses, send_uses, recv_pos, 0);
    free(mem);
    return GPURING_OK;
}
