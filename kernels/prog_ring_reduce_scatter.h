/*
 * prog_ring_reduce_scatter.h -- the ring reduce-scatter step program: the
 * first half of the ring allreduce (prog_ring_allreduce.h), as NCCL's
 * runRing for ncclReduceScatter (seed 003).
 *
 * The input holds one block per rank, `stride` elements apart (rank r's at
 * r * stride); the output is this rank's block, reduced over every rank.
 * A channel owns elements [base, base + count) of every block.  The ring
 * position p carries the block of rank ranks[p] (NCCL's ring->userRanks):
 * ring order and rank order differ.  Each loop moves one slot step of
 * every block (`slices` steps where a connection crosses nodes); a loop is
 * n operations, each slice after slice:
 *   op 0         send             block of position ix-1   (own input to next)
 *   op 1..n-2    recvReduceSend   block of position ix-1-op
 *   op n-1       recvReduceCopy   block of position ix     (own: the result)
 * so the block of position q starts at position q+1 and ends, reduced by
 * every rank once, at position q.  One rank: a copy.
 */
#ifndef GPURING_KERNELS_PROG_RING_REDUCE_SCATTER_H
#define GPURING_KERNELS_PROG_RING_REDUCE_SCATTER_H

#include "kernels/prog.h"

/* The chained ring programs' shape: loops of ops_per_loop operations, each
 * `slices` slot steps (fewer where the region has fewer steps). */
GPURING_HOSTDEV static inline void
gpuring_ring_chain_init(gpuring_prog_t *p, gpuring_prog_algo_t algo, size_t base, size_t count,
                        size_t chunk, int nranks, int ring_ix, int slices, int ops_per_loop)
{
    size_t steps;

    chunk = gpuring_prog_chunk(chunk);
    if (chunk == 0) chunk = 1;
    steps = (count + chunk - 1) / chunk;
    if (slices < 1) slices = 1;
    if ((size_t)slices > steps) slices = steps > 0 ? (int)steps : 1;
    gpuring_prog_set(p, algo, base, count, chunk, nranks, ring_ix);
    p->slices = slices;
    p->nops = (uint64_t)((steps + (size_t)slices - 1) / (size_t)slices) *
              (uint64_t)ops_per_loop * (uint64_t)slices;
}

/* Operation i of such a program: its op in the loop; its slot step in *step_p. */
GPURING_HOSTDEV static inline int gpuring_ring_chain_op(const gpuring_prog_t *p, uint64_t i,
                                                        int ops_per_loop, uint64_t *step_p)
{
    const uint64_t slices = (uint64_t)p->slices;
    const uint64_t per_loop = (uint64_t)ops_per_loop * slices;

    *step_p = i / per_loop * slices + i % slices;
    return (int)(i % per_loop / slices);
}

/* A program over every rank's block (RING_RS, RING_AG): n operations a loop. */
GPURING_HOSTDEV static inline void
gpuring_ring_blocks_init(gpuring_prog_t *p, gpuring_prog_algo_t algo, size_t base, size_t count,
                         size_t stride, size_t chunk, int nranks, int ring_ix, const int *ranks,
                         int slices)
{
    gpuring_ring_chain_init(p, algo, base, count, chunk, nranks, ring_ix, slices, nranks);
    p->stride = stride;
    p->ranks = ranks;
}

GPURING_HOSTDEV static inline void
gpuring_rs_prog_init(gpuring_prog_t *p, size_t base, size_t count, size_t stride, size_t chunk,
                     int nranks, int ring_ix, const int *ranks, int slices)
{
    gpuring_ring_blocks_init(p, GPURING_PROG_RING_RS, base, count, stride, chunk, nranks,
                             ring_ix, ranks, slices);
}

GPURING_HOSTDEV static inline void gpuring_rs_prog_op(const gpuring_prog_t *p, uint64_t i,
                                                      gpuring_step_t *s)
{
    const int n = p->nranks;
    uint64_t step;
    const int op = gpuring_ring_chain_op(p, i, n, &step);
    const size_t x = p->base + gpuring_prog_step_span(p, step, &s->count);
    const int pos = (p->ring_ix + n - 1 - op) % n;

    if (n == 1) {
        gpuring_prog_ring_flags(s, GPURING_PRIM_SRC | GPURING_PRIM_DST);
    } else if (op == 0) {
        gpuring_prog_ring_flags(s, GPURING_PRIM_SRC | GPURING_PRIM_SEND);
    } else if (op < n - 1) {
        gpuring_prog_ring_flags(s, GPURING_PRIM_RECV | GPURING_PRIM_SRC |
                                       GPURING_PRIM_SEND);
    } else {
        gpuring_prog_ring_flags(s, GPURING_PRIM_RECV | GPURING_PRIM_SRC |
                                       GPURING_PRIM_DST);
    }
    s->in_off = (size_t)p->ranks[pos] * p->stride + x;
    s->off = x;
}

#endif /* GPURING_KERNELS_PROG_RING_REDUCE_SCATTER_H */
