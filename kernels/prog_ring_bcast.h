/*
 * prog_ring_bcast.h -- the ring broadcast step program: a pipelined chain
 * along the ring from the root, as NCCL's runRing for ncclBroadcast
 * (seed 003).  A copy: nothing is reduced.
 *
 * The buffer (input and output alike) is cut into slot steps; each step
 * goes root -> next -> ... -> the root's prev, which does not send on.  By
 * distance d = ix - root_ix along the ring:
 *   d = 0        copySend     (the root: its buffer to next)
 *   0 < d < n-1  recvCopySend (into the buffer, and on)
 *   d = n-1      recvCopy
 * one operation per slot step, so a connection has up to its slots in
 * flight.  One rank: nothing to do.
 */
#ifndef GPURING_KERNELS_PROG_RING_BCAST_H
#define GPURING_KERNELS_PROG_RING_BCAST_H

#include "kernels/prog_ring_reduce_scatter.h" /* gpuring_ring_chain_* */

GPURING_HOSTDEV static inline void gpuring_bcast_prog_init(gpuring_prog_t *p, size_t base,
                                                           size_t count, size_t chunk,
                                                           int nranks, int ring_ix,
                                                           int root_ix)
{
    gpuring_ring_chain_init(p, GPURING_PROG_RING_BCAST, base, count, chunk, nranks, ring_ix, 1,
                            1);
    p->root_ix = root_ix;
    if (nranks == 1) p->nops = 0;
}

GPURING_HOSTDEV static inline void gpuring_bcast_prog_op(const gpuring_prog_t *p, uint64_t i,
                                                         gpuring_step_t *s)
{
    const int n = p->nranks;
    const int d = (p->ring_ix - p->root_ix + n) % n;

    if (d == 0) {
        gpuring_prog_ring_flags(s, GPURING_PRIM_SRC | GPURING_PRIM_SEND);
    } else if (d < n - 1) {
        gpuring_prog_ring_flags(s, GPURING_PRIM_RECV | GPURING_PRIM_DST |
                                       GPURING_PRIM_SEND);
    } else {
        gpuring_prog_ring_flags(s, GPURING_PRIM_RECV | GPURING_PRIM_DST);
    }
    s->off = s->in_off = p->base + gpuring_prog_step_span(p, i, &s->count);
}

#endif /* GPURING_KERNELS_PROG_RING_BCAST_H */
