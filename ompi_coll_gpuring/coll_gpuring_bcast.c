/*
 * coll_gpuring_bcast.c -- the MPI_Bcast entry point: the pipelined chain
 * along the ring from the root (kernels/prog_ring_bcast.h) through the
 * shared path (coll_gpuring_entry.c).  A copy of bytes: any contiguous
 * predefined type; derived types go to the component below, the reason
 * logged.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

int mca_coll_gpuring_bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpuring_call_t c = {.coll = GPURING_COLL_BCAST, .sendbuf = buf, .recvbuf = buf,
                                 .root = root};
    int rc;

    if (count < 0) return MPI_ERR_COUNT; /* mpi_param_check 0 only */
    if (!mca_coll_gpuring_map_bytes(c.coll, dtype, (size_t)count, &c.count)) goto fallback;
    if (c.count == 0) return OMPI_SUCCESS;
    rc = mca_coll_gpuring_call_run((mca_coll_gpuring_module_t *)module, comm, &c);
    if (rc != MCA_COLL_GPURING_FALLBACK) return rc;

fallback:
    mca_coll_gpuring_fallback_count(c.coll);
    return mca_coll_gpuring_bcast_below(buf, count, dtype, root, comm, module);
}
