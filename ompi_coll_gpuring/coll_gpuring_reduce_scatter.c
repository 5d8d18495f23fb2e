/*
 * coll_gpuring_reduce_scatter.c -- the MPI_Reduce_scatter_block entry point,
 * and MPI_Reduce_scatter where every rank's count is the same: the ring
 * reduce-scatter (kernels/prog_ring_reduce_scatter.h) through the shared
 * path (coll_gpuring_entry.c).  In place, the input is the receive buffer
 * (every rank's block) and the result its first block.  Types and ops as
 * allreduce's; the rest goes to the component below, the reason logged.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include "ompi/communicator/communicator.h"

/* Either entry point's call: rcounts NULL for MPI_Reduce_scatter_block; else
 * MPI_Reduce_scatter's (every rank's count rcount), which falls back as itself. */
static int reduce_scatter_run(const void *sbuf, void *rbuf, int rcount, const int *rcounts,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpuring_module_t *m = mca_coll_gpuring_call_begin(module);
    mca_coll_gpuring_call_t c = {.coll = GPURING_COLL_REDUCE_SCATTER,
                                 .sendbuf = sbuf == MPI_IN_PLACE ? rbuf : sbuf,
                                 .recvbuf = rbuf, .count = (size_t)rcount};
    int rc = MCA_COLL_GPURING_FALLBACK;

    if (rcount < 0) return mca_coll_gpuring_bad_count(m, c.coll, 0, rcount);
    if (!mca_coll_gpuring_map_reduction(c.coll, dtype, op, &c.type, &c.op)) goto fallback;
    if (rcount == 0) return OMPI_SUCCESS;
    rc = mca_coll_gpuring_call_run(m, comm, &c);
    if (!MCA_COLL_GPURING_FELL_BACK(rc)) return rc;

fallback:
    mca_coll_gpuring_fallback_count(c.coll);
    if (rcounts != NULL && rc == MCA_COLL_GPURING_FALLBACK_HOST)
        return MCA_COLL_GPURING_PREV(m, reduce_scatter, sbuf, rbuf, rcounts, dtype, op, comm);
    if (rcounts != NULL)
        return mca_coll_gpuring_reduce_scatter_below(sbuf, rbuf, rcounts, dtype, op, comm,
                                                     module);
    if (rc == MCA_COLL_GPURING_FALLBACK_HOST) {
        return MCA_COLL_GPURING_PREV(m, reduce_scatter_block, sbuf, rbuf, rcount, dtype, op,
                                     comm);
    }
    return mca_coll_gpuring_reduce_scatter_block_below(sbuf, rbuf, rcount, dtype, op, comm,
                                                       module);
}

int mca_coll_gpuring_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                          struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                          struct ompi_communicator_t *comm,
                                          mca_coll_base_module_t *module)
{
    return reduce_scatter_run(sbuf, rbuf, rcount, NULL, dtype, op, comm, module);
}

int mca_coll_gpuring_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                    struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                    struct ompi_communicator_t *comm,
                                    mca_coll_base_module_t *module)
{
    /* rcounts is the same array on every rank (MPI): so is the decision */
    for (int r = 1; r < ompi_comm_size(comm); r++) {
        if (rcounts[r] != rcounts[0]) {
            mca_coll_gpuring_log_fallback("reduce_scatter fallback: the ranks' counts "
                                          "differ (%d at rank 0, %d at rank %d)",
                                          rcounts[0], rcounts[r], r);
            mca_coll_gpuring_fallback_count(GPURING_COLL_REDUCE_SCATTER);
            return mca_coll_gpuring_reduce_scatter_below(sbuf, rbuf, rcounts, dtype, op, comm,
                                                         module);
        }
    }
    /* (what gpuring does not run goes below as MPI_Reduce_scatter: the component below
     * may have no reduce_scatter_block, and its own choice for this one is the user's) */
    return reduce_scatter_run(sbuf, rbuf, rcounts[0], rcounts, dtype, op, comm, module);
}
