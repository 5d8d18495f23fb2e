/*
 * coll_gpuring_allreduce.c -- the MPI_Allreduce entry point.
 *
 * checks (datatype, op) -> the shared path (coll_gpuring_entry.c: plane,
 * lazy setup, connections, the call) -> gpuring allreduce; anything gpuring
 * does not handle goes to the saved allreduce of the component below, with
 * the reason logged at verbose level 3.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

int mca_coll_gpuring_allreduce(const void *sbuf, void *rbuf, int count,
                               struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpuring_call_t c = {.coll = GPURING_COLL_ALLREDUCE,
                                 .sendbuf = sbuf == MPI_IN_PLACE ? rbuf : sbuf,
                                 .recvbuf = rbuf, .count = (size_t)count};
    int rc;

    if (count < 0) {
        /* only reaches here with mpi_param_check 0: no component should see it */
        GPURING_ERROR(GPURING_SUBSYS_COLL, "allreduce on comm %s with count %d (MPI_ERR_COUNT)",
                      comm->c_name, count);
        return MPI_ERR_COUNT;
    }
    if (!mca_coll_gpuring_map_reduction(c.coll, dtype, op, &c.type, &c.op)) goto fallback;
    if (count == 0) return OMPI_SUCCESS; /* nothing to reduce, nothing to set up */
    rc = mca_coll_gpuring_call_run((mca_coll_gpuring_module_t *)module, comm, &c);
    if (rc != MCA_COLL_GPURING_FALLBACK) return rc;

fallback:
    mca_coll_gpuring_fallback_count(c.coll);
    return mca_coll_gpuring_allreduce_below(sbuf, rbuf, count, dtype, op, comm, module);
}
