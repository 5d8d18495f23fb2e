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
 *
 * Sliced (NCCL's chunk steps): each block is cut into `slices` slot steps,
 * and every operation above becomes that many, slice after slice, so a loop
 * of n blocks of up to slices * chunk elements is (2n-1) * slices
 * operations.  An executor running the program in order then posts the
 * slices of a send back to back: a connection has up to `slices` steps in
 * flight inside one operation instead of one per round trip (with 2 ranks,
 * op 0 sends and op 1 waits for the peer's op 0, so unsliced a connection
 * never holds more than two).  Small blocks get fewer slices
 * (GPURING_RING_MIN_SLICE elements each at least).
 */
#ifndef GPURING_KERNELS_PROG_RING_ALLREDUCE_H
#define GPURING_KERNELS_PROG_RING_ALLREDUCE_H

#include "kernels/prog.h"

/* Elements a slice has at least (blocks smaller than slices * this get fewer). */
#define GPURING_RING_MIN_SLICE 2048
/* Slices of a ring that crosses nodes (gpuring_comm.c): NCCL's chunk steps,
 * half a connection's 8 slots, so a NET connection has 4 steps in flight
 * while the other half is being credited back. */
#define GPURING_RING_NET_SLICES 4

GPURING_HOSTDEV static inline void
gpuring_ring_prog_init_sliced(gpuring_prog_t *p, size_t base, size_t count, size_t chunk,
                              int nranks, int ring_ix, int slices)
{
    size_t loop_elems, block;
    uint64_t nloops;

    chunk = gpuring_prog_chunk(chunk);
    if (slices < 1) slices = 1;
    /* the first loop's block decides, the same on every rank */
    loop_elems = (size_t)nranks * chunk * (size_t)slices;
    block = (count < loop_elems ? count : loop_elems) / (size_t)nranks;
    if ((size_t)slices > block / GPURING_RING_MIN_SLICE)
        slices = block / GPURING_RING_MIN_SLICE > 1 ? (int)(block / GPURING_RING_MIN_SLICE) : 1;
    loop_elems = (size_t)nranks * chunk * (size_t)slices;
    nloops = (count + loop_elems - 1) / loop_elems;

    gpuring_prog_set(p, GPURING_PROG_RING, base, count, chunk, nranks, ring_ix);
    p->slices = slices;
    p->nops = nloops * (uint64_t)(2 * nranks - 1) * (uint64_t)slices;
}

GPURING_HOSTDEV static inline void
gpuring_ring_prog_init(gpuring_prog_t *p, size_t base, size_t count, size_t chunk,
                       int nranks, int ring_ix)
{
    gpuring_ring_prog_init_sliced(p, base, count, chunk, nranks, ring_ix, 1);
}

GPURING_HOSTDEV static inline void
gpuring_ring_prog_op(const gpuring_prog_t *p, uint64_t i, gpuring_step_t *s)
{
    const int n = p->nranks;
    const uint64_t slices = (uint64_t)p->slices;
    const uint64_t per_loop = (uint64_t)(2 * n - 1) * slices;
    const uint64_t loop = i / per_loop;
    const uint64_t in_loop = i - loop * per_loop;
    /* unsliced (one node): no division by slices -- every executor decodes
     * each operation of a small call on its path */
    const int op = (int)(slices == 1 ? in_loop : in_loop / slices);
    const size_t slice = slices == 1 ? 0 : (size_t)(in_loop - (uint64_t)op * slices);
    const size_t max_blk = p->chunk * (size_t)slices;
    const size_t loop_start = (size_t)loop * (size_t)n * max_blk;
    const size_t loop_count =
        (p->count - loop_start < (size_t)n * max_blk) ? p->count - loop_start : (size_t)n * max_blk;
    /* blocks of the loop: equal, on the alignment grid (never past `slices`
     * slots), the last ones shorter or empty; slices of a block likewise */
    const size_t even = (loop_count + (size_t)n - 1) / (size_t)n;
    const size_t grid = (even + GPURING_PROG_ALIGN_ELEMS - 1) / GPURING_PROG_ALIGN_ELEMS *
                        GPURING_PROG_ALIGN_ELEMS;
    const size_t blk = grid < max_blk ? grid : max_blk;
    const size_t per_slice = slices == 1 ? blk : (blk + (size_t)slices - 1) / (size_t)slices;
    const size_t slice_grid = (per_slice + GPURING_PROG_ALIGN_ELEMS - 1) /
                              GPURING_PROG_ALIGN_ELEMS * GPURING_PROG_ALIGN_ELEMS;
    const size_t sl = slice_grid < p->chunk ? slice_grid : p->chunk;
    int block;
    size_t first, blk_count, sfirst;

    if (n == 1) { /* its own input is the result (no caller makes one today) */
        block = 0;
        s->flags = GPURING_PRIM_SRC | GPURING_PRIM_DST;
    } else if (op == 0) {
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
    if (block >= n) block -= n; /* block < 2n in every case above */
    s->recv_mask = (s->flags & GPURING_PRIM_RECV) ? 1u : 0u;
    s->send_mask = (s->flags & GPURING_PRIM_SEND) ? 1u : 0u;
    first = (size_t)block * blk;
    blk_count = first >= loop_count ? 0 : (loop_count - first < blk ? loop_count - first : blk);
    sfirst = slice * sl;
    s->off = p->base + loop_start + first + sfirst;
    s->count = sfirst >= blk_count ? 0 : (blk_count - sfirst < sl ? blk_count - sfirst : sl);
}

#endif /* GPURING_KERNELS_PROG_RING_ALLREDUCE_H */
