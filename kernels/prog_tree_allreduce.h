/*
 * prog_tree_allreduce.h -- the tree allreduce step program: reduce up the
 * tree, then broadcast down, pipelined per chunk (NCCL's runTreeUpDown,
 * seed 004; the trees themselves come from graph/tree.c).
 *
 * The channel's region is cut into chunks of at most `chunk` elements (one
 * slot).  First every chunk goes up, then every chunk comes down:
 *   up    leaf   send            own input to the parent
 *         inner  recvReduceSend  children's partial sums + own input, to parent
 *         root   recvReduceCopy  children's + own input: the final value, to output
 *   down  leaf   recv            final value from the parent, to output
 *         inner  recvCopySend    final value from the parent, to output and children
 *         root   sendFromOutput  final value from the output, to the children
 * Each element is reduced once, at the root, and copied everywhere else, so
 * every rank ends with the same bits.  Reading a chunk's input (up) always
 * precedes writing its output (down), so in-place buffers are safe.
 * Peer 0 is the parent, peers 1..nchildren the children.
 */
#ifndef GPURING_KERNELS_PROG_TREE_ALLREDUCE_H
#define GPURING_KERNELS_PROG_TREE_ALLREDUCE_H

#include "kernels/prog.h"

GPURING_HOSTDEV static inline void
gpuring_tree_prog_init(gpuring_prog_t *p, size_t base, size_t count, size_t chunk, int nranks,
                       int has_parent, int nchildren)
{
    uint64_t nchunks;

    chunk = gpuring_prog_chunk(chunk);
    nchunks = (count + chunk - 1) / chunk;
    gpuring_prog_set(p, GPURING_PROG_TREE, base, count, chunk, nranks, 0);
    p->has_parent = has_parent;
    p->nchildren = nchildren;
    p->nops = 2 * nchunks;
}

GPURING_HOSTDEV static inline void
gpuring_tree_prog_op(const gpuring_prog_t *p, uint64_t i, gpuring_step_t *s)
{
    const uint64_t nchunks = p->nops / 2;
    const uint64_t chunk = i < nchunks ? i : i - nchunks;
    const unsigned parent = p->has_parent ? 1u : 0u;
    const unsigned children = gpuring_prog_tree_peers(p) & ~parent;
    const size_t first = (size_t)chunk * p->chunk;

    s->off = p->base + first;
    s->count = p->count - first < p->chunk ? p->count - first : p->chunk;
    s->stash = 0;
    if (i < nchunks) { /* up: children's partial results + own input */
        s->recv_mask = children;
        s->send_mask = parent;
        s->flags = GPURING_PRIM_SRC | (parent ? GPURING_PRIM_SEND : GPURING_PRIM_DST);
    } else if (parent) { /* down: the final value from the parent */
        s->recv_mask = parent;
        s->send_mask = children;
        s->flags = GPURING_PRIM_RECV | GPURING_PRIM_DST;
    } else { /* down, at the root: the final value it computed */
        s->recv_mask = 0;
        s->send_mask = children;
        s->flags = GPURING_PRIM_OUT_SRC;
    }
    if (s->recv_mask) s->flags |= GPURING_PRIM_RECV;
    if (s->send_mask) s->flags |= GPURING_PRIM_SEND;
}

#endif /* GPURING_KERNELS_PROG_TREE_ALLREDUCE_H */
