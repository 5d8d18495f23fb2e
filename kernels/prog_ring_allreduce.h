/*
 * prog_ring_allreduce.h -- the ring allreduce step program: reduce-scatter
 * then allgather, 2(n-1) transfers per loop, as NCCL's runRing (seed 003,
 * "ring allreduce" in DESIGN.md).
 *
 * One channel owns a contiguous region of the buffers.  The region is cut
 * into loops of n blocks of at most `chunk` elements (one FIFO slot each);
 * a loop is 2n-1 operations:
 *   op 0          send            block ix-1     (own input to next)
 *   op 1..n-2     recvReduceSend  block ix-1-op  (add own input, pass on)
 *   op n-1        recvReduceCopySend block ix    (final: write output, pass on)
 *   op n..2n-3    recvCopySend    block ix+n-1-op (final values, pass on)
 *   op 2n-2       recv            block ix+1     (last final block)
 * where ix is this rank's position in the ring and blocks are modulo n.
 * Every operation but the first receives one slot from prev and every one
 * but the last sends one slot to next, so each loop moves 2n-2 slots each
 * way.  An executor asks for operation i and gets flags, offset and count;
 * the same program runs on the host executor and the CUDA executor, which
 * is why it is a pure function in a header.
 */
#ifndef GPURING_KERNELS_PROG_RING_ALLREDUCE_H
#define GPURING_KERNELS_PROG_RING_ALLREDUCE_H

#include "kernels/prog.h"

GPURING_HOSTDEV static inline void
gpuring_ring_prog_init(gpuring_prog_t *p, size_t base, size_t count, size_t chunk,
                       int nranks, int ring_ix)
{
    size_t loop_elems;
    uint64_t nloops;

    chunk = gpuring_prog_chunk(chunk);
    loop_elems = (size_t)nranks * chunk;
    nloops = (count + loop_elems - 1) / loop_elems;

    gpuring_prog_set(p, GPURING_PROG_RING, base, count, chunk, nranks, ring_ix);
    p->nops = nloops * (uint64_t)(2 * nranks - 1);
}

GPURING_HOSTDEV static inline void
gpuring_ring_prog_op(const gpuring_prog_t *p, uint64_t i, gpuring_step_t *s)
{
    const int n = p->nranks;
    const uint64_t per_loop = (uint64_t)(2 * n - 1);
    const uint64_t loop = i / per_loop;
    const int op = (int)(i % per_loop);
    const size_t loop_start = (size_t)loop * (size_t)n * p->chunk;
    const size_t loop_count =
        (p->count - loop_start < (size_t)n * p->chunk) ? p->count - loop_start : (size_t)n * p->chunk;
    /* blocks of the loop: equal, on the alignment grid (never past a slot), the
     * last ones shorter or empty */
    const size_t even = (loop_count + (size_t)n - 1) / (size_t)n;
    const size_t grid = (even + GPURING_PROG_ALIGN_ELEMS - 1) / GPURING_PROG_ALIGN_ELEMS *
                        GPURING_PROG_ALIGN_ELEMS;
    const size_t blk = grid < p->chunk ? grid : p->chunk;
    int block;
    size_t first;

    if (op == 0) {
        block = p->ring_ix + n - 1;
        s->flags = GPURING_PRIM_SRC | GPURING_PRIM_SEND;
    } else if (op < n - 1) {
        block = p->ring_ix + n - 1 - op;
        s->flags = GPURING_PRIM_RECV | GPURING_PRIM_SRC | GPURING_PRIM_SEND;
    } else if (op == n - 1) {
        block = p->ring_ix;
        s->flags = GPURING_PRIM_RECV | GPURING_PRIM_SRC | GPURING_PRIM_DST | GPURING_PRIM_SEND;
    } else if (op < 2 * n - 2) {
        block = p->ring_ix + 2 * n - 1 - op;
        s->flags = GPURING_PRIM_RECV | GPURING_PRIM_DST | GPURING_PRIM_SEND;
    } else {
        block = p->ring_ix + 1;
        s->flags = GPURING_PRIM_RECV | GPURING_PRIM_DST;
    }
    block %= n;
    s->recv_mask = (s->flags & GPURING_PRIM_RECV) ? 1u : 0u;
    s->send_mask = (s->flags & GPURING_PRIM_SEND) ? 1u : 0u;
    first = (size_t)block * blk;
    s->off = p->base + loop_start + first;
    s->count = first >= loop_count ? 0 : (loop_count - first < blk ? loop_count - first : blk);
}

#endif /* GPURING_KERNELS_PROG_RING_ALLREDUCE_H */
