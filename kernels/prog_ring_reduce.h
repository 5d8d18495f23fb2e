/*
 * prog_ring_reduce.h -- the ring reduce step program: a pipelined chain
 * along the ring toward the root, as NCCL's runRing for ncclReduce
 * (seed 003).
 *
 * Each slot step starts at the rank after the root and is reduced by every
 * rank on its way round to the root, which writes the result.  By distance
 * d = ix - root_ix - 1 along the ring:
 *   d = 0        send             (its input to next)
 *   0 < d < n-1  recvReduceSend
 *   d = n-1      recvReduceCopy   (the root: the result to its output)
 * one operation per slot step.  Only the root writes the output.  One
 * rank: a copy.
 */
#ifndef GPURING_KERNELS_PROG_RING_REDUCE_H
#define GPURING_KERNELS_PROG_RING_REDUCE_H

#include "kernels/prog_ring_reduce_scatter.h" /* gpuring_ring_chain_* */

GPURING_HOSTDEV static inline void gpuring_reduce_prog_init(gpuring_prog_t *p, size_t base,
                                                            size_t count, size_t chunk,
                                                            int nranks, int ring_ix,
                                                            int root_ix)
{
    gpuring_ring_chain_init(p, GPURING_PROG_RING_REDUCE, base, count, chunk, nranks, ring_ix,
                            1, 1);
    p->root_ix = root_ix;
}

GPURING_HOSTDEV static inline void gpuring_reduce_prog_op(const gpuring_prog_t *p, uint64_t i,
                                                          gpuring_step_t *s)
{
    const int n = p->nranks;
    const int d = (p->ring_ix - p->root_ix - 1 + 2 * n) % n;

    if (n == 1) {
        gpuring_prog_ring_flags(s, GPURING_PRIM_SRC | GPURING_PRIM_DST);
    } else if (d == 0) {
        gpuring_prog_ring_flags(s, GPURING_PRIM_SRC | GPURING_PRIM_SEND);
    } else if (d < n - 1) {
        gpuring_prog_ring_flags(s, GPURING_PRIM_RECV | GPURING_PRIM_SRC |
                                       GPURING_PRIM_SEND);
    } else {
        gpuring_prog_ring_flags(s, GPURING_PRIM_RECV | GPURING_PRIM_SRC |
                                       GPURING_PRIM_DST);
    }
    s->off = s->in_off = p->base + gpuring_prog_step_span(p, i, &s->count);
}

#endif /* GPURING_KERNELS_PROG_RING_REDUCE_H */
