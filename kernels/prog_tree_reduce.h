/*
 * prog_tree_reduce.h -- the tree reduce step program, for any root: the
 * reverse of prog_tree_bcast.h over the same undirected tree, as the up
 * half of NCCL's runTreeUpDown (seed 004) ending at any rank.
 *
 * Each rank receives the partial results of its peers away from the root,
 * reduces them with its own input and sends the sum to its peer toward the
 * root (`toward`); the root writes it:
 *   leaf    send             its input toward the root
 *   inner   recvReduceSend   the peers' partial results + its input
 *   root    recvReduceCopy   the result, to the output
 * one operation per slot step.  Each rank's input is folded in once, on
 * its way to the root.  Only the root writes the output.  One rank: a copy.
 */
#ifndef GPURING_KERNELS_PROG_TREE_REDUCE_H
#define GPURING_KERNELS_PROG_TREE_REDUCE_H

#include "kernels/prog_tree_bcast.h" /* gpuring_tree_rooted_init */

GPURING_HOSTDEV static inline void gpuring_tree_reduce_prog_init(gpuring_prog_t *p, size_t base,
                                                                 size_t count, size_t chunk,
                                                                 int nranks, int has_parent,
                                                                 int nchildren, int toward)
{
    gpuring_tree_rooted_init(p, GPURING_PROG_TREE_REDUCE, base, count, chunk, nranks,
                             has_parent, nchildren, toward);
}

GPURING_HOSTDEV static inline void gpuring_tree_reduce_prog_op(const gpuring_prog_t *p,
                                                               uint64_t i, gpuring_step_t *s)
{
    const unsigned up = p->toward >= 0 ? 1u << p->toward : 0u;

    s->recv_mask = gpuring_prog_tree_peers(p) & ~up;
    s->send_mask = up;
    s->flags = GPURING_PRIM_SRC | (up ? GPURING_PRIM_SEND : GPURING_PRIM_DST);
    if (s->recv_mask) s->flags |= GPURING_PRIM_RECV;
    s->stash = 0;
    s->off = s->in_off = p->base + gpuring_prog_step_span(p, i, &s->count);
}

#endif /* GPURING_KERNELS_PROG_TREE_REDUCE_H */
