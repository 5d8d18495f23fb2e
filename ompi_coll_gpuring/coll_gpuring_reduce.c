/*
 * coll_gpuring_reduce.c -- the MPI_Reduce entry point: the pipelined chain
 * along the ring toward the root (kernels/prog_ring_reduce.h) through the
 * shared path (coll_gpuring_entry.c).  In place at the root; the receive
 * buffer is not looked at elsewhere.  Types and ops as allreduce's; the
 * rest goes to the component below, the reason logged.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include "ompi/communicator/communicator.h"

int mca_coll_gpuring_reduce(const void *sbuf, void *rbuf, int count,
                            struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpuring_module_t *m = (mca_coll_gpuring_module_t *)module;
    const int at_root = ompi_comm_rank(comm) == root;
    mca_coll_gpuring_call_t c = {.coll = GPURING_COLL_REDUCE,
                                 .sendbuf = sbuf == MPI_IN_PLACE ? rbuf : sbuf,
                                 .recvbuf = at_root ? rbuf : NULL, .count = (size_t)count,
                                 .root = root};
    int rc = MCA_COLL_GPURING_FALLBACK;

    if (count < 0) return mca_coll_gpuring_bad_count(m, c.coll, 0, count);
    if (!mca_coll_gpuring_map_reduction(c.coll, dtype, op, &c.type, &c.op)) goto fallback;
    if (count == 0) return OMPI_SUCCESS;
    rc = mca_coll_gpuring_call_run(m, comm, &c);
    if (!MCA_COLL_GPURING_FELL_BACK(rc)) return rc;

fallback:
    mca_coll_gpuring_fallback_count(c.coll);
    if (rc == MCA_COLL_GPURING_FALLBACK_HOST) {
        return MCA_COLL_GPURING_PREV(m, reduce, sbuf, rbuf, count, dtype, op, root, comm);
    }
    return mca_coll_gpuring_reduce_below(sbuf, rbuf, count, dtype, op, root, comm, module);
}
