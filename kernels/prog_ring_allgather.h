/*
 * prog_ring_allgather.h -- the ring allgather step program: the second
 * half of the ring allreduce (prog_ring_allreduce.h), as NCCL's runRing
 * for ncclAllGather (seed 003).  A copy: nothing is reduced.
 *
 * The input is this rank's block; the output holds one block per rank,
 * `stride` elements apart (rank r's at r * stride).  A channel owns
 * elements [base, base + count) of every block; ring position p carries
 * the block of rank ranks[p].  A loop is n operations (each `slices` slot
 * steps, as in prog_ring_reduce_scatter.h):
 *   op 0         copySend   own block: input -> own place in the output, to next
 *   op 1..n-2    recvCopySend block of position ix-op
 *   op n-1       recvCopy     block of position ix+1
 * In place (the input is the output's own block) op 0 reads and writes the
 * same elements, which both executors skip.  One rank: a copy.
 */
#ifndef GPURING_KERNELS_PROG_RING_ALLGATHER_H
#define GPURING_KERNELS_PROG_RING_ALLGATHER_H

#include "kernels/prog_ring_reduce_scatter.h" /* gpuring_ring_chain_* */

GPURING_HOSTDEV static inline void
gpuring_ag_prog_init(gpuring_prog_t *p, size_t base, size_t count, size_t stride, size_t chunk,
                     int nranks, int ring_ix, const int *ranks, int slices)
{
    gpuring_ring_blocks_init(p, GPURING_PROG_RING_AG, base, count, stride, chunk, nranks,
                             ring_ix, ranks, slices);
}

GPURING_HOSTDEV static inline void gpuring_ag_prog_op(const gpuring_prog_t *p, uint64_t i,
                                                      gpuring_step_t *s)
{
    const int n = p->nranks;
    uint64_t step;
    const int op = gpuring_ring_chain_op(p, i, n, &step);
    const size_t x = p->base + gpuring_prog_step_span(p, step, &s->count);
    const int pos = (p->ring_ix + n - op) % n;

    if (op == 0) {
        gpuring_prog_ring_flags(s, GPURING_PRIM_SRC | GPURING_PRIM_DST |
                                       (n > 1 ? (unsigned)GPURING_PRIM_SEND : 0u));
    } else if (op < n - 1) {
        gpuring_prog_ring_flags(s, GPURING_PRIM_RECV | GPURING_PRIM_DST |
                                       GPURING_PRIM_SEND);
    } else {
        gpuring_prog_ring_flags(s, GPURING_PRIM_RECV | GPURING_PRIM_DST);
    }
    s->off = (size_t)p->ranks[pos] * p->stride + x;
    s->in_off = op == 0 ? x : s->off;
}

#endif /* GPURING_KERNELS_PROG_RING_ALLGATHER_H */
