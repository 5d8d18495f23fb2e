/*
 * prog_gather_allreduce.h -- the small-message allreduce step program: a
 * ring allgather of the whole (small) buffer, each rank folding every input
 * it receives into its output.  n-1 transfers instead of the ring
 * allreduce's 2(n-1), so about half the latency for messages that fit in
 * one slot (NCCL's answer to the same problem is its LL protocol and, on
 * NVLink, one-shot all-reduce).
 *
 *   op 0        send                 own input to next; output = own input
 *   op 1..n-2   recvAccumulateSend   output (op)= received; pass it on as is
 *   op n-1      recvAccumulate       output (op)= received
 *
 * Ranks fold the inputs in different orders, so the tuning model uses this
 * program only where order cannot change a bit of the result: 2 ranks
 * (a op b == b op a), integer ops, MIN and MAX.
 */
#ifndef GPURING_KERNELS_PROG_GATHER_ALLREDUCE_H
#define GPURING_KERNELS_PROG_GATHER_ALLREDUCE_H

#include "kernels/prog.h"

GPURING_HOSTDEV static inline void
gpuring_gather_prog_init(gpuring_prog_t *p, size_t base, size_t count, int nranks)
{
    p->algo = GPURING_PROG_GATHER;
    p->base = base;
    p->count = count;
    p->chunk = count;
    p->nranks = nranks;
    p->ring_ix = 0; /* the program is the same at every ring position */
    p->nops = count > 0 ? (uint64_t)nranks : 0;
}

GPURING_HOSTDEV static inline void
gpuring_gather_prog_op(const gpuring_prog_t *p, uint64_t i, gpuring_step_t *s)
{
    if (i == 0) {
        s->flags = GPURING_PRIM_SRC | GPURING_PRIM_SEND | GPURING_PRIM_DST;
    } else if (i < (uint64_t)p->nranks - 1) {
        s->flags = GPURING_PRIM_RECV | GPURING_PRIM_ACC | GPURING_PRIM_SEND;
    } else {
        s->flags = GPURING_PRIM_RECV | GPURING_PRIM_ACC;
    }
    s->off = p->base;
    s->count = p->count;
}

#endif /* GPURING_KERNELS_PROG_GATHER_ALLREDUCE_H */
