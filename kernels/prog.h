/*
 * prog.h -- what a step program is: a pure function from an operation index
 * to {flags, offsets, count} on one channel, which the host executor and the
 * CUDA executor both run.  Each algorithm is one header
 * (prog_<algo>_<collective>.h); prog_ops.h dispatches between them.
 */
#ifndef GPURING_KERNELS_PROG_H
#define GPURING_KERNELS_PROG_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpuring_common.h" /* GPURING_HOSTDEV */

/*
 * A channel talks to up to GPURING_MAX_PEERS peers, each through one send and
 * one recv connection: a ring uses peer 0 (send to next, recv from prev), a
 * tree uses peer 0 for its parent and peers 1..3 for its children.
 */
#define GPURING_MAX_PEERS 4

/*
 * Block and channel boundaries fall on multiples of this many elements where
 * the geometry allows: 16 elements are a multiple of 16 bytes for every type,
 * so a block of an aligned buffer starts aligned, as a slot does, and the
 * CUDA executor moves it in 16-byte vectors (a boundary off that grid makes
 * every copy of the block element-wise).
 */
#define GPURING_PROG_ALIGN_ELEMS 16

/* What one operation does; executors combine these. */
enum {
    GPURING_PRIM_RECV = 1 << 0, /* read the next slot from each recv connection in recv_mask */
    GPURING_PRIM_SRC = 1 << 1,  /* read (and reduce with) the input at in_off */
    GPURING_PRIM_SEND = 1 << 2, /* write the result into the next slot of each send
                                   connection in send_mask */
    GPURING_PRIM_DST = 1 << 3,  /* write the result to the output at off */
    GPURING_PRIM_ACC = 1 << 4,  /* output (op)= received; SEND forwards the received
                                   slot unchanged */
    GPURING_PRIM_STASH = 1 << 5, /* keep the received (or input) block in scratch row
                                    `stash`; SEND forwards it unchanged */
    GPURING_PRIM_FOLD = 1 << 6,  /* output = scratch row 0 (op) row 1 (op) ... row n-1,
                                    left to right; no connection */
    GPURING_PRIM_OUT_SRC = 1 << 7, /* the input is the output buffer at off (a value this
                                      rank finished earlier) */
};

typedef struct gpuring_step {
    unsigned flags;
    size_t off;   /* element offset in the output (DST, ACC, OUT_SRC, scratch rows) */
    size_t in_off; /* element offset in the input (SRC): off, except where the input and
                      output are shaped differently (reduce-scatter, allgather) */
    size_t count; /* elements, may be 0 (the slot still moves, to keep steps aligned) */
    int stash;    /* STASH: scratch row (a ring position) */
    unsigned recv_mask; /* RECV: which peers' connections (bit i: peer i) */
    unsigned send_mask; /* SEND: likewise */
} gpuring_step_t;

/* One channel's program: which algorithm, and its geometry. */
typedef enum {
    GPURING_PROG_RING = 0,   /* prog_ring_allreduce.h */
    GPURING_PROG_GATHER = 1, /* prog_gather_allreduce.h */
    GPURING_PROG_TREE = 2,   /* prog_tree_allreduce.h */
    GPURING_PROG_RING_RS = 3,   /* prog_ring_reduce_scatter.h */
    GPURING_PROG_RING_AG = 4,   /* prog_ring_allgather.h */
    GPURING_PROG_RING_BCAST = 5,  /* prog_ring_bcast.h */
    GPURING_PROG_RING_REDUCE = 6, /* prog_ring_reduce.h */
    GPURING_PROG_TREE_BCAST = 7,  /* prog_tree_bcast.h */
    GPURING_PROG_TREE_REDUCE = 8, /* prog_tree_reduce.h */
} gpuring_prog_algo_t;

typedef struct gpuring_prog {
    gpuring_prog_algo_t algo;
    size_t base;    /* element offset of this channel's region */
    size_t count;   /* elements in the region */
    size_t chunk;   /* max elements per slot */
    int nranks;
    int ring_ix;    /* this rank's position in the ring */
    int ordered;    /* GATHER: stash and fold in ring order (scratch of nranks rows) */
    int has_parent; /* TREE*: peer 0 is this rank's parent */
    int nchildren;  /* TREE*: peers 1..nchildren are its children */
    int toward;     /* TREE_BCAST, TREE_REDUCE: the peer toward the root, -1 at the root */
    int slices;     /* RING, RING_RS, RING_AG: slot steps each block of a loop is cut into */
    int root_ix;    /* RING_BCAST, RING_REDUCE: the root's position in the ring */
    size_t stride;  /* RING_RS, RING_AG: elements between two ranks' blocks of the whole
                       call (the input's for RS, the output's for AG) */
    const int *ranks; /* RING_RS, RING_AG: the rank at each ring position (this channel's
                         ring), in host memory; the CUDA executor runs the program
                         with a device copy (gpuring_exec_channel_t.dev_ranks) */
    uint64_t nops;  /* operations in the whole program */
} gpuring_prog_t;

/* The fields every program has; each init sets the rest. */
GPURING_HOSTDEV static inline void
gpuring_prog_set(gpuring_prog_t *p, gpuring_prog_algo_t algo, size_t base, size_t count,
                 size_t chunk, int nranks, int ring_ix)
{
    p->algo = algo;
    p->base = base;
    p->count = count;
    p->chunk = chunk;
    p->nranks = nranks;
    p->ring_ix = ring_ix;
    p->ordered = 0;
    p->has_parent = 0;
    p->nchildren = 0;
    p->toward = -1;
    p->slices = 1;
    p->root_ix = 0;
    p->stride = 0;
    p->ranks = NULL;
}

/* A ring step's flags, and the ring's one peer for its RECV and SEND. */
GPURING_HOSTDEV static inline void gpuring_prog_ring_flags(gpuring_step_t *s, unsigned flags)
{
    s->flags = flags;
    s->recv_mask = (flags & GPURING_PRIM_RECV) ? 1u : 0u;
    s->send_mask = (flags & GPURING_PRIM_SEND) ? 1u : 0u;
}

/* A tree's peers as a mask (bit 0 the parent, bits 1..nchildren the children). */
GPURING_HOSTDEV static inline unsigned gpuring_prog_tree_peers(const gpuring_prog_t *p)
{
    return (p->has_parent ? 1u : 0u) | ((1u << p->nchildren) - 1u) << 1;
}

/*
 * The chained programs (reduce-scatter, allgather, bcast, reduce) cut their
 * region into slot steps of `chunk` elements: step k is elements
 * [k * chunk, +chunk) of the region, the last one shorter, steps past the
 * end empty (they still move a slot).  Returns the step's first element;
 * its count in *count_p.
 */
GPURING_HOSTDEV static inline size_t gpuring_prog_step_span(const gpuring_prog_t *p, uint64_t k,
                                                            size_t *count_p)
{
    const size_t first = (size_t)k * p->chunk;

    *count_p = first >= p->count ? 0 : (p->count - first < p->chunk ? p->count - first : p->chunk);
    return first;
}

/* A step's element count on the alignment grid, where it is more than one grid step. */
GPURING_HOSTDEV static inline size_t gpuring_prog_chunk(size_t chunk)
{
    return chunk > GPURING_PROG_ALIGN_ELEMS ? chunk - chunk % GPURING_PROG_ALIGN_ELEMS : chunk;
}

#endif /* GPURING_KERNELS_PROG_H */

