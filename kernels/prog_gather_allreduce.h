/*
 * prog_gather_allreduce.h -- the small-message allreduce step program: a
 * ring allgather of the whole (small) buffer.  n-1 transfers instead of the
 * ring allreduce's 2(n-1), so about half the latency for messages that fit
 * in one slot (NCCL's answer to the same problem is its LL protocol and, on
 * NVLink, one-shot all-reduce).
 *
 * Unordered (the result cannot depend on fold order: integer types, which
 * gpuring_enqueue.c's planning passes as order_free -- float min/max and nan
 * payloads depend on the order, even with 2 ranks), inputs are folded as they
 * arrive:
 *   op 0        send                 own input to next; output = own input
 *   op 1..n-2   recvAccumulateSend   output (op)= received; pass it on as is
 *   op n-1      recvAccumulate       output (op)= received
 * Ordered (floating point), every rank must compute the same
 * expression, so inputs are kept by ring position and folded in that order:
 *   op 0        send + stash         own input to next and to scratch[ix]
 *   op 1..n-2   recvStashSend        scratch[ix-op] = received; pass it on
 *   op n-1      recvStash            scratch[ix+1] = received
 *   op n        fold                 output = scratch[0] (op) ... scratch[n-1]
 */
#ifndef GPURING_KERNELS_PROG_GATHER_ALLREDUCE_H
#define GPURING_KERNELS_PROG_GATHER_ALLREDUCE_H

#include "kernels/prog.h"

GPURING_HOSTDEV static inline void
gpuring_gather_prog_init(gpuring_prog_t *p, size_t base, size_t count, int nranks, int ring_ix,
                         int ordered)
{
    gpuring_prog_set(p, GPURING_PROG_GATHER, base, count, count, nranks, ring_ix);
    p->ordered = ordered;
    p->nops = count > 0 ? (uint64_t)(nranks + (ordered ? 1 : 0)) : 0;
}

GPURING_HOSTDEV static inline void
gpuring_gather_prog_op(const gpuring_prog_t *p, uint64_t i, gpuring_step_t *s)
{
    const int n = p->nranks;
    const unsigned keep = p->ordered ? GPURING_PRIM_STASH : GPURING_PRIM_ACC;

    s->off = p->base;
    s->count = p->count;
    s->stash = (int)((uint64_t)p->ring_ix + (uint64_t)n - i % (uint64_t)n) % n;
    if (i == 0) {
        s->flags = GPURING_PRIM_SRC | GPURING_PRIM_SEND |
                   (p->ordered ? GPURING_PRIM_STASH : GPURING_PRIM_DST);
    } else if (i < (uint64_t)n - 1) {
        s->flags = GPURING_PRIM_RECV | GPURING_PRIM_SEND | keep;
    } else if (i == (uint64_t)n - 1) {
        s->flags = GPURING_PRIM_RECV | keep;
    } else {
        s->flags = GPURING_PRIM_FOLD;
    }
    s->recv_mask = (s->flags & GPURING_PRIM_RECV) ? 1u : 0u;
    s->send_mask = (s->flags & GPURING_PRIM_SEND) ? 1u : 0u;
}

#endif /* GPURING_KERNELS_PROG_GATHER_ALLREDUCE_H */
