/*
 * prog_ops.h -- operation i of any step program: the one entry executors
 * call.  Adding an algorithm is a header and a case here.  The allreduce
 * programs read their input where they write their output (in_off = off).
 */
#ifndef GPURING_KERNELS_PROG_OPS_H
#define GPURING_KERNELS_PROG_OPS_H

#include "kernels/prog.h"
#include "kernels/prog_gather_allreduce.h"
#include "kernels/prog_ring_allgather.h"
#include "kernels/prog_ring_allreduce.h"
#include "kernels/prog_ring_bcast.h"
#include "kernels/prog_ring_reduce.h"
#include "kernels/prog_ring_reduce_scatter.h"
#include "kernels/prog_tree_allreduce.h"
#include "kernels/prog_tree_bcast.h"
#include "kernels/prog_tree_reduce.h"

GPURING_HOSTDEV static inline void gpuring_prog_op(const gpuring_prog_t *p, uint64_t i,
                                                   gpuring_step_t *s)
{
    switch (p->algo) {
    case GPURING_PROG_RING_RS:
        gpuring_rs_prog_op(p, i, s);
        return;
    case GPURING_PROG_RING_AG:
        gpuring_ag_prog_op(p, i, s);
        return;
    case GPURING_PROG_RING_BCAST:
        gpuring_bcast_prog_op(p, i, s);
        return;
    case GPURING_PROG_RING_REDUCE:
        gpuring_reduce_prog_op(p, i, s);
        return;
    case GPURING_PROG_TREE_BCAST:
        gpuring_tree_bcast_prog_op(p, i, s);
        return;
    case GPURING_PROG_TREE_REDUCE:
        gpuring_tree_reduce_prog_op(p, i, s);
        return;
    case GPURING_PROG_GATHER:
        gpuring_gather_prog_op(p, i, s);
        break;
    case GPURING_PROG_TREE:
        gpuring_tree_prog_op(p, i, s);
        break;
    case GPURING_PROG_RING:
    default:
        gpuring_ring_prog_op(p, i, s);
        break;
    }
    s->in_off = s->off; /* the allreduce programs: input and output alike */
}

/* Does every operation that writes an output element write its final value, once
 * per call?  All programs but the gather's, which accumulates into the output
 * (ACC).  Then a peer's step may land in the output before the operation that
 * consumes it runs (the host executor's zero copy on NET connections). */
GPURING_HOSTDEV static inline int gpuring_prog_out_once(const gpuring_prog_t *p)
{
    return p->algo != GPURING_PROG_GATHER;
}

#endif /* GPURING_KERNELS_PROG_OPS_H */
