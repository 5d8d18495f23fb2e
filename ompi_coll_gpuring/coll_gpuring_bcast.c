/*
 * coll_gpuring_bcast.c -- the MPI_Bcast entry point: the pipelined chain
 * along the ring from the root (kernels/prog_ring_bcast.h) through the
 * shared path (coll_gpuring_entry.c).  A copy of bytes: any datatype, taken
 * by its type signature's bytes (what MPI asks to match across ranks), a
 * non-contiguous one's elements packed on this rank (coll_gpuring_pack.c).
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include "ompi/communicator/communicator.h"

int mca_coll_gpuring_bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpuring_module_t *m = mca_coll_gpuring_call_begin(module);
    mca_coll_gpuring_call_t c = {.coll = GPURING_COLL_BCAST, .root = root};
    mca_coll_gpuring_packed_t packed = {0};
    const int at_root = ompi_comm_rank(comm) == root;
    int rc = MCA_COLL_GPURING_FALLBACK, urc;

    if (count < 0) return mca_coll_gpuring_bad_count(m, c.coll, 0, count);
    c.count = mca_coll_gpuring_signature_bytes(dtype, (size_t)count);
    if (c.count == 0) return OMPI_SUCCESS;
    c.recvbuf = mca_coll_gpuring_contiguous(buf, (size_t)count, dtype);
    if (c.recvbuf == NULL) {
        rc = mca_coll_gpuring_pack(m, &packed, c.coll, buf, (size_t)count, dtype, at_root);
        if (MCA_COLL_GPURING_FELL_BACK(rc)) goto fallback;
        c.recvbuf = mca_coll_gpuring_packed_bytes(&packed, &c);
    }
    c.sendbuf = c.recvbuf;
    rc = mca_coll_gpuring_packed_fallback(&packed, mca_coll_gpuring_call_run(m, comm, &c));
    urc = mca_coll_gpuring_unpack(&packed, rc == OMPI_SUCCESS && !at_root,
                                  mca_coll_gpuring_call_may_write(&c, rc));
    if (rc == OMPI_SUCCESS) rc = urc;
    if (!MCA_COLL_GPURING_FELL_BACK(rc)) return rc;

fallback:
    mca_coll_gpuring_fallback_count(c.coll);
    if (rc == MCA_COLL_GPURING_FALLBACK_HOST) {
        return MCA_COLL_GPURING_PREV(m, bcast, buf, count, dtype, root, comm);
    }
    return mca_coll_gpuring_bcast_below(buf, count, dtype, root, comm, module);
}
