/*
 * test_trees.c -- the binary tree and double binary tree of graph/tree.c
 * against seed 004 (NCCL's ncclGetBtree / ncclGetDtree).
 *
 * For n = 1..1024, each of: the btree, tree 0 and tree 1 of the dtree:
 *   - every node and every link in range, no self links, two distinct
 *     children at most (the interface has two slots; c0 != c1 unless -1);
 *   - exactly one root (parent -1), and the right one: 0 for the btree and
 *     tree 0; tree 1's root is btree node 0 relabelled, n-1 (n even, mirror)
 *     or 1 (n odd, shift; 0 when n == 1);
 *   - links agree both ways: a child's parent is the node, a non-root
 *     node is a child of its parent, and of no other node;
 *   - from the root, following children reaches every node exactly once
 *     (no cycle, no node twice), and the longest root-to-leaf path has at
 *     most ceil(log2 n) edges, i.e. at most ceil(log2 n) + 1 levels.
 * Btree only: in order (child0 < node < child1), as the seed's figures draw
 * it; dtree tree 0 equals the btree; tree 1 is tree 0 mirrored (n even) or
 * shifted by one (n odd), as seed 004 lines 110-112 and 151-181 define it.
 * Double tree, seed 004's claims (lines 44, 50, 52); see check_dtree_roles.
 * Literal trees: the figures of seed 004 for 12 ranks (mirror, lines
 * 121-127), 13 ranks (shift, lines 131-137) and the 14-rank btree
 * (lines 217-223), transcribed as parent tables.
 */
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "test/unit/unit_test.h"

#define NMAX 1024

typedef struct {
    int parent[NMAX];
    int c0[NMAX];
    int c1[NMAX];
} tree_t;

static tree_t bt, t0, t1;

static int ceil_log2(int n)
{
    int k = 0;
    while ((1 << k) < n) k++;
    return k;
}

static int nchildren(const tree_t *t, int x) { return (t->c0[x] >= 0) + (t->c1[x] >= 0); }

/* The structural checks every tree must pass. */
static void check_tree(int n, const tree_t *t, int want_root, const char *name)
{
    static int seen_as_child[NMAX], visited[NMAX], depth[NMAX], stack[NMAX];
    int bad, nroots, root, sp, nvisited, maxdepth, revisit;

    /* ranges, no self links, distinct children */
    bad = -1;
    for (int x = 0; x < n && bad < 0; x++) {
        int p = t->parent[x], a = t->c0[x], b = t->c1[x];
        if (p < -1 || p >= n || a < -1 || a >= n || b < -1 || b >= n) bad = x;
        else if (p == x || a == x || b == x) bad = x;
        else if (a >= 0 && a == b) bad = x;
    }
    EXPECT(bad < 0, "n=%d %s: node %d has a bad link (parent %d, children %d %d)", n, name,
           bad, bad < 0 ? 0 : t->parent[bad], bad < 0 ? 0 : t->c0[bad],
           bad < 0 ? 0 : t->c1[bad]);
    if (bad >= 0) return; /* the rest would index out of range */

    /* exactly one root, the expected one */
    nroots = 0;
    root = -1;
    for (int x = 0; x < n; x++) {
        if (t->parent[x] == -1) {
            nroots++;
            root = x;
        }
    }
    EXPECT(nroots == 1, "n=%d %s: %d roots", n, name, nroots);
    EXPECT(root == want_root, "n=%d %s: root %d, want %d", n, name, root, want_root);

    /* child -> parent */
    bad = -1;
    for (int x = 0; x < n && bad < 0; x++) {
        if (t->c0[x] >= 0 && t->parent[t->c0[x]] != x) bad = x;
        if (t->c1[x] >= 0 && t->parent[t->c1[x]] != x) bad = x;
    }
    EXPECT(bad < 0, "n=%d %s: a child of node %d does not name it as parent", n, name, bad);

    /* parent -> child, and each node a child of at most one node */
    memset(seen_as_child, 0, sizeof(int) * (size_t)n);
    for (int x = 0; x < n; x++) {
        if (t->c0[x] >= 0) seen_as_child[t->c0[x]]++;
        if (t->c1[x] >= 0) seen_as_child[t->c1[x]]++;
    }
    bad = -1;
    for (int x = 0; x < n && bad < 0; x++) {
        int p = t->parent[x];
        if (p < 0) {
            if (seen_as_child[x] != 0) bad = x;
        } else if (seen_as_child[x] != 1 || (t->c0[p] != x && t->c1[p] != x)) {
            bad = x;
        }
    }
    EXPECT(bad < 0, "n=%d %s: node %d is not exactly once a child of its parent (%d times a "
           "child)", n, name, bad, bad < 0 ? 0 : seen_as_child[bad]);

    /* walk down from the root: every node once, depth bounded */
    if (nroots != 1) return;
    memset(visited, 0, sizeof(int) * (size_t)n);
    sp = 0;
    nvisited = 0;
    maxdepth = 0;
    revisit = -1;
    stack[sp++] = root;
    visited[root] = 1;
    depth[root] = 0;
    nvisited = 1;
    while (sp > 0) {
        int x = stack[--sp];
        int ch[2] = {t->c0[x], t->c1[x]};
        if (depth[x] > maxdepth) maxdepth = depth[x];
        for (int i = 0; i < 2; i++) {
            int c = ch[i];
            if (c < 0) continue;
            if (visited[c]) {
                if (revisit < 0) revisit = c;
                continue;
            }
            visited[c] = 1;
            depth[c] = depth[x] + 1;
            nvisited++;
            stack[sp++] = c;
        }
    }
    EXPECT(revisit < 0, "n=%d %s: node %d reached twice from the root (cycle)", n, name,
           revisit);
    EXPECT(nvisited == n, "n=%d %s: %d of %d nodes reachable from root %d", n, name, nvisited,
           n, root);
    EXPECT(maxdepth <= ceil_log2(n), "n=%d %s: depth %d edges (%d levels) > ceil(log2 n)=%d "
           "edges (%d levels)", n, name, maxdepth, maxdepth + 1, ceil_log2(n),
           ceil_log2(n) + 1);
}

/*
 * Seed 004, line 44: "there may be one rank that is a leaf in both trees,
 * but no rank is a node [inner node] in both trees"; line 50: "each rank
 * is at most a node in one tree and a leaf in the other"; line 52: each
 * rank receives at most twice and sends at most twice half the data.
 *
 * The construction the seed itself gives (lines 110-112, 151-181) keeps
 * the inner-node claim only for even n (mirror: tree 0's inner nodes are
 * the even nodes, tree 1's the odd ones).  For odd n >= 3 (shift) node 0
 * is inner in both: it is the root of tree 0 (one child) and plays btree
 * node n-1, an even node, in tree 1 (one child, the right side clipped).
 * The seed's own 13-rank figure (lines 131-137) shows exactly that:
 * 0 -> 8 in the first tree and 0 -> 11 in the second.  So encoded:
 *   n even:     no node inner in both;
 *   n odd >= 3: node 0 and only node 0 inner in both, one child in each;
 *   n == 1:     no inner node at all;
 *   all n:      at most one node a leaf in both (line 44), and at most two
 *               children over both trees together (line 52's "sends at
 *               most twice half the data" per direction: that holds for
 *               node 0 as well, 1 + 1).
 */
static void check_dtree_roles(int n)
{
    int both_inner = 0, first_both = -1, both_leaf = 0, bad_deg = -1;

    for (int x = 0; x < n; x++) {
        int k0 = nchildren(&t0, x), k1 = nchildren(&t1, x);
        if (k0 > 0 && k1 > 0) {
            both_inner++;
            if (first_both < 0) first_both = x;
        }
        if (k0 == 0 && k1 == 0) both_leaf++;
        if (k0 + k1 > 2 && bad_deg < 0) bad_deg = x;
    }
    if (n % 2 == 0) {
        EXPECT(both_inner == 0, "n=%d (even): %d nodes inner in both trees, first %d", n,
               both_inner, first_both);
    } else if (n >= 3) {
        EXPECT(both_inner == 1 && first_both == 0,
               "n=%d (odd): want node 0 alone inner in both trees, got %d such, first %d", n,
               both_inner, first_both);
        EXPECT(nchildren(&t0, 0) == 1 && nchildren(&t1, 0) == 1,
               "n=%d (odd): node 0 has %d + %d children, want 1 + 1", n, nchildren(&t0, 0),
               nchildren(&t1, 0));
    } else {
        EXPECT(both_inner == 0 && nchildren(&t0, 0) == 0 && nchildren(&t1, 0) == 0,
               "n=1: node 0 must be a leaf in both trees");
    }
    EXPECT(both_leaf <= 1, "n=%d: %d nodes are leaves in both trees", n, both_leaf);
    EXPECT(bad_deg < 0, "n=%d: node %d has more than 2 children over both trees", n, bad_deg);
}

/* Tree 1 is tree 0 relabelled: mirror for even n, shift by one for odd n. */
static void check_relabel(int n)
{
    int bad = -1;

    for (int x = 0; x < n && bad < 0; x++) {
        int role = (n % 2 == 0) ? n - 1 - x : (x - 1 + n) % n;
        int want[3] = {t0.parent[role], t0.c0[role], t0.c1[role]};
        int got[3] = {t1.parent[x], t1.c0[x], t1.c1[x]};
        for (int i = 0; i < 3; i++) {
            int w = want[i] < 0 ? -1 : (n % 2 == 0) ? n - 1 - want[i] : (want[i] + 1) % n;
            if (got[i] != w) bad = x;
        }
    }
    EXPECT(bad < 0, "n=%d: tree 1 at node %d is not tree 0 %s", n, bad,
           n % 2 == 0 ? "mirrored" : "shifted by one");
}

static void build(int n)
{
    for (int x = 0; x < n; x++) {
        int p[2], a[2], b[2];
        gpuring_graph_btree(n, x, &bt.parent[x], &bt.c0[x], &bt.c1[x]);
        gpuring_graph_dtree(n, x, p, a, b);
        t0.parent[x] = p[0];
        t0.c0[x] = a[0];
        t0.c1[x] = b[0];
        t1.parent[x] = p[1];
        t1.c0[x] = a[1];
        t1.c1[x] = b[1];
    }
}

static void check_n(int n)
{
    int bad;

    build(n);
    check_tree(n, &bt, 0, "btree");
    check_tree(n, &t0, 0, "dtree[0]");
    check_tree(n, &t1, n == 1 ? 0 : (n % 2 == 0 ? n - 1 : 1), "dtree[1]");

    /* btree in order, as drawn: child0 < node < child1 */
    bad = -1;
    for (int x = 0; x < n && bad < 0; x++) {
        if (bt.c0[x] >= 0 && bt.c0[x] > x) bad = x;
        if (bt.c1[x] >= 0 && bt.c1[x] < x) bad = x;
    }
    EXPECT(bad < 0, "n=%d btree: children of node %d out of order", n, bad);

    /* NCCL's root keeps its single child in the second slot */
    EXPECT(bt.c0[0] == -1 && (n == 1 ? bt.c1[0] == -1 : bt.c1[0] > 0),
           "n=%d btree: root children %d %d", n, bt.c0[0], bt.c1[0]);

    /* dtree tree 0 is the btree */
    EXPECT(memcmp(bt.parent, t0.parent, sizeof(int) * (size_t)n) == 0 &&
               memcmp(bt.c0, t0.c0, sizeof(int) * (size_t)n) == 0 &&
               memcmp(bt.c1, t0.c1, sizeof(int) * (size_t)n) == 0,
           "n=%d: dtree tree 0 differs from the btree", n);

    check_relabel(n);
    check_dtree_roles(n);
}

/* Compare the parents of a built tree with a table transcribed from the seed. */
static void check_literal(int n, const tree_t *t, const int *want, const char *name)
{
    for (int x = 0; x < n; x++) {
        EXPECT(t->parent[x] == want[x], "%s: parent of %d is %d, seed draws %d", name, x,
               t->parent[x], want[x]);
    }
}

static void check_seed_figures(void)
{
    /*
     * Seed 004 lines 121-127, 12 ranks (even: mirror).
     * First tree: 0-8; 8 -> 4, 10; 4 -> 2, 6; 10 -> 9, 11; 2 -> 1, 3; 6 -> 5, 7.
     * Second tree: "3---11" with 3 -> 1, 7; 1 -> 0, 2; 7 -> 5, 9; 5 -> 4, 6;
     * 9 -> 8, 10.  The figure does not say which end of 3---11 is the root;
     * 11 is: it has no other edge (as 0 in the first tree), and it is the
     * mirror of 0 (line 112, and line 179 maps parent -1 to -1).
     */
    static const int p12_0[12] = {-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 8, 10};
    static const int p12_1[12] = {1, 3, 1, 11, 5, 7, 5, 3, 9, 7, 9, -1};
    /*
     * Seed 004 lines 131-137, 13 ranks (odd: shift).
     * First tree: 0-8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10; 2 -> 1, 3; 6 -> 5, 7;
     * 10 -> 9, 11.
     * Second tree: 1-9; 9 -> 5, 0; 5 -> 3, 7; 0 -> 11; 3 -> 2, 4; 7 -> 6, 8;
     * 11 -> 10, 12.  Root 1 (the shift of 0, line 110).
     */
    static const int p13_0[13] = {-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8};
    static const int p13_1[13] = {9, -1, 3, 5, 3, 9, 7, 5, 7, 1, 11, 0, 11};
    /*
     * Seed 004 lines 217-223, the btree of 14 ranks: 0-8; 8 -> 4, 12;
     * 4 -> 2, 6; 12 -> 10, 13; 2 -> 1, 3; 6 -> 5, 7; 10 -> 9, 11.
     * (Line 210: 13 = xx01 goes to xx00 = 12 since xx10 = 14 is out of range.)
     */
    static const int p14[14] = {-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 12};

    build(12);
    check_literal(12, &t0, p12_0, "seed figure n=12 tree 0");
    check_literal(12, &t1, p12_1, "seed figure n=12 tree 1 (mirror)");
    build(13);
    check_literal(13, &t0, p13_0, "seed figure n=13 tree 0");
    check_literal(13, &t1, p13_1, "seed figure n=13 tree 1 (shift)");
    build(14);
    check_literal(14, &bt, p14, "seed figure n=14 btree");
}

/* Outside 0..n-1 (or n <= 0) there is no node: every link -1. */
static void check_out_of_range(void)
{
    static const int cases[][2] = {{0, 0}, {-1, 0}, {5, 5}, {5, -1}, {1, 1}};

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int n = cases[i][0], x = cases[i][1], p, a, b, pp[2], aa[2], bb[2];
        gpuring_graph_btree(n, x, &p, &a, &b);
        gpuring_graph_dtree(n, x, pp, aa, bb);
        EXPECT(p == -1 && a == -1 && b == -1 && pp[0] == -1 && aa[0] == -1 && bb[0] == -1 &&
                   pp[1] == -1 && aa[1] == -1 && bb[1] == -1,
               "n=%d node=%d: want no links", n, x);
    }
}

int main(void)
{
    for (int n = 1; n <= NMAX; n++) check_n(n);
    check_seed_figures();
    check_out_of_range();
    return unit_report();
}
