/*
 * prog_tree_bcast.h -- the tree broadcast step program, for any root: the
 * channel's tree (graph/graph.c: a chain inside each node, node heads
 * joined by the double binary tree) seen as undirected, so the root need
 * not be the tree's.  NCCL runs ncclBroadcast on its ring only; this is the
 * down half of its runTreeUpDown (seed 004) started from any rank.  A copy:
 * nothing is reduced.
 *
 * Each rank receives from its peer toward the root (`toward`: the parent,
 * or the child whose subtree holds the root) and sends to every other tree
 * peer; the root sends to all of its peers:
 *   root    copySend      its buffer to every peer
 *   inner   recvCopySend  into the buffer, and on to the peers away from the root
 *   leaf    recvCopy
 * one operation per slot step (chunk), so every edge has up to its slots in
 * flight and a step reaches the farthest rank after (distance) hops, not
 * n - 1 as on the ring chain.  Data flows away from the root only: no
 * cycle, no deadlock.  One rank: nothing to do.
 */
#ifndef GPURING_KERNELS_PROG_TREE_BCAST_H
#define GPURING_KERNELS_PROG_TREE_BCAST_H

#include "kernels/prog.h"

/* The rooted tree programs' shape (bcast, reduce): one operation per slot step. */
GPURING_HOSTDEV static inline void
gpuring_tree_rooted_init(gpuring_prog_t *p, gpuring_prog_algo_t algo, size_t base, size_t count,
                         size_t chunk, int nranks, int has_parent, int nchildren, int toward)
{
    chunk = gpuring_prog_chunk(chunk);
    if (chunk == 0) chunk = 1;
    gpuring_prog_set(p, algo, base, count, chunk, nranks, 0);
    p->has_parent = has_parent;
    p->nchildren = nchildren;
    p->toward = toward;
    p->nops = (count + chunk - 1) / chunk;
}

GPURING_HOSTDEV static inline void gpuring_tree_bcast_prog_init(gpuring_prog_t *p, size_t base,
                                                                size_t count, size_t chunk,
                                                                int nranks, int has_parent,
                                                                int nchildren, int toward)
{
    gpuring_tree_rooted_init(p, GPURING_PROG_TREE_BCAST, base, count, chunk, nranks, has_parent,
                             nchildren, toward);
    if (nranks == 1) p->nops = 0;
}

GPURING_HOSTDEV static inline void gpuring_tree_bcast_prog_op(const gpuring_prog_t *p,
                                                              uint64_t i, gpuring_step_t *s)
{
    const unsigned up = p->toward >= 0 ? 1u << p->toward : 0u;

    s->recv_mask = up;
    s->send_mask = gpuring_prog_tree_peers(p) & ~up;
    s->flags = up ? GPURING_PRIM_RECV | GPURING_PRIM_DST : GPURING_PRIM_SRC;
    if (s->send_mask) s->flags |= GPURING_PRIM_SEND;
    s->stash = 0;
    s->off = s->in_off = p->base + gpuring_prog_step_span(p, i, &s->count);
}

#endif /* GPURING_KERNELS_PROG_TREE_BCAST_H */
