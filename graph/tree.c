/*
 * tree.c -- NCCL's binary tree and double binary tree over nodes
 * (seed 004: ncclGetBtree / ncclGetDtree).  Written from the seed's
 * description, not from NCCL's source.
 *
 * Btree: node 0 is the root.  A node other than 0 is placed by its lowest
 * set bit b (its level: b = 1 for the leaves, the odd nodes):
 *   parent:  clear b and set 2b (xx01[0] -> xx10[0], xx11[0] -> xx10[0]);
 *            if that is >= n, just clear b (xx01[0] -> xx00[0]).
 *   child 0: node - b/2 (always in range), none when b = 1.
 *   child 1: node + h for the largest h in b/2, b/4, ..., 1 with
 *            node + h < n; none if there is no such h.
 * The root has a single child, stored as child 1: P/2 where P is the
 * smallest power of two >= n (the largest power of two below n, or n/2
 * when n is a power of two); none when n == 1.
 *
 * Dtree: tree 0 is the btree.  Tree 1 relabels it: n even, mirror (node x
 * of tree 1 plays btree node n-1-x); n odd, shift (node x plays btree node
 * (x-1) mod n), and the btree's answers are mapped back the same way.
 */
#include "graph/graph.h"

void gpuring_graph_btree(int n, int node, int *parent_p, int *child0_p, int *child1_p)
{
    int bit, half, up, down0, down1;

    *parent_p = -1;
    *child0_p = -1;
    *child1_p = -1;
    if (n <= 0 || node < 0 || node >= n) return; /* not a node of this tree */

    if (node == 0) {
        /* root: one child, the top of the rest, P/2 with P = pow2 >= n */
        for (bit = 1; bit < n; bit <<= 1) {
        }
        *child1_p = (n > 1) ? bit >> 1 : -1;
        return;
    }

    /* level: the lowest set bit */
    bit = node & -node;

    /* parent: xx?1[0] -> xx10[0], or xx00[0] when that is out of range */
    up = (node ^ bit) | (bit << 1);
    if (up >= n) up = node ^ bit;

    /* children: half a level down on each side, the right one clipped to n */
    half = bit >> 1;
    down0 = (half != 0) ? node - half : -1;
    while (half != 0 && node + half >= n) half >>= 1;
    down1 = (half != 0) ? node + half : -1;

    *parent_p = up;
    *child0_p = down0;
    *child1_p = down1;
}

void gpuring_graph_dtree(int n, int node, int parent_p[2], int child0_p[2], int child1_p[2])
{
    int role, up, d0, d1;

    /* tree 0: the btree itself */
    gpuring_graph_btree(n, node, &parent_p[0], &child0_p[0], &child1_p[0]);

    parent_p[1] = -1;
    child0_p[1] = -1;
    child1_p[1] = -1;
    if (n <= 0 || node < 0 || node >= n) return;

    if (n % 2 == 1) {
        /* odd n: shift, node plays btree node node-1 (mod n); map back with +1 */
        role = (node - 1 + n) % n;
        gpuring_graph_btree(n, role, &up, &d0, &d1);
        parent_p[1] = (up < 0) ? -1 : (up + 1) % n;
        child0_p[1] = (d0 < 0) ? -1 : (d0 + 1) % n;
        child1_p[1] = (d1 < 0) ? -1 : (d1 + 1) % n;
    } else {
        /* even n: mirror, node plays btree node n-1-node; map back the same way */
        role = n - 1 - node;
        gpuring_graph_btree(n, role, &up, &d0, &d1);
        parent_p[1] = (up < 0) ? -1 : n - 1 - up;
        child0_p[1] = (d0 < 0) ? -1 : n - 1 - d0;
        child1_p[1] = (d1 < 0) ? -1 : n - 1 - d1;
    }
}
