/*
 * coll_gpuring_allgather.c -- the MPI_Allgather entry point: the ring
 * allgather (kernels/prog_ring_allgather.h) through the shared path
 * (coll_gpuring_entry.c).  A copy of bytes, so any contiguous predefined
 * type on either side, as long as both sides are the same bytes (MPI's
 * matching signatures); in place, each rank's block is already in the
 * receive buffer.  Derived types go to the component below, the reason
 * logged.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"

int mca_coll_gpuring_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                               void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpuring_call_t c = {.coll = GPURING_COLL_ALLGATHER, .recvbuf = rbuf};
    size_t sbytes;
    int rc;

    if (rcount < 0 || (sbuf != MPI_IN_PLACE && scount < 0)) return MPI_ERR_COUNT;
    if (!mca_coll_gpuring_map_bytes(c.coll, rdtype, (size_t)rcount, &c.count)) goto fallback;
    if (sbuf != MPI_IN_PLACE) {
        if (!mca_coll_gpuring_map_bytes(c.coll, sdtype, (size_t)scount, &sbytes)) goto fallback;
        if (sbytes != c.count) {
            mca_coll_gpuring_log_fallback("allgather fallback: %zu B sent, %zu B received "
                                          "per rank", sbytes, c.count);
            goto fallback;
        }
    }
    if (c.count == 0) return OMPI_SUCCESS;
    c.sendbuf = sbuf != MPI_IN_PLACE ? sbuf
                                     : (const char *)rbuf + (size_t)ompi_comm_rank(comm) * c.count;
    rc = mca_coll_gpuring_call_run((mca_coll_gpuring_module_t *)module, comm, &c);
    if (rc != MCA_COLL_GPURING_FALLBACK) return rc;

fallback:
    mca_coll_gpuring_fallback_count(c.coll);
    return mca_coll_gpuring_allgather_below(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                            module);
}
