/*
 * coll_gpuring_allgather.c -- the MPI_Allgather entry point: the ring
 * allgather (kernels/prog_ring_allgather.h) through the shared path
 * (coll_gpuring_entry.c).  A copy of bytes: any datatype on either side,
 * taken by its type signature's bytes (what MPI asks to match), a
 * non-contiguous one's elements packed on this rank (coll_gpuring_pack.c);
 * in place, each rank's block is already in the receive buffer.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"

int mca_coll_gpuring_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                               void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpuring_module_t *m = mca_coll_gpuring_call_begin(module);
    mca_coll_gpuring_call_t c = {.coll = GPURING_COLL_ALLGATHER};
    mca_coll_gpuring_packed_t in = {0}, out = {0};
    const size_t n = (size_t)ompi_comm_size(comm), me = (size_t)ompi_comm_rank(comm);
    int rc = MCA_COLL_GPURING_FALLBACK, urc, kept;

    if (rcount < 0 || (sbuf != MPI_IN_PLACE && scount < 0))
        return mca_coll_gpuring_bad_count(m, c.coll, 0, rcount < 0 ? rcount : scount);
    c.count = mca_coll_gpuring_signature_bytes(rdtype, (size_t)rcount);
    if (sbuf != MPI_IN_PLACE &&
        mca_coll_gpuring_signature_bytes(sdtype, (size_t)scount) != c.count) {
        mca_coll_gpuring_log_fallback("allgather fallback: %zu B sent, %zu B received per rank "
                                      "(the type signatures do not match)",
                                      mca_coll_gpuring_signature_bytes(sdtype, (size_t)scount),
                                      c.count);
        goto fallback;
    }
    if (c.count == 0) return OMPI_SUCCESS;
    /* the receive buffer's every block, packed where it is not contiguous (its values
     * too in place: this rank's block is there) */
    c.recvbuf = mca_coll_gpuring_contiguous(rbuf, (size_t)rcount * n, rdtype);
    if (c.recvbuf == NULL) {
        rc = mca_coll_gpuring_pack(m, &out, c.coll, rbuf, (size_t)rcount * n, rdtype,
                                   sbuf == MPI_IN_PLACE);
        if (MCA_COLL_GPURING_FELL_BACK(rc)) goto fallback;
        c.recvbuf = mca_coll_gpuring_packed_bytes(&out, &c);
    }
    if (sbuf == MPI_IN_PLACE) {
        /* (a failed packing's stand-in holds no blocks: itself) */
        c.sendbuf = c.fail != GPURING_OK ? c.recvbuf : (const char *)c.recvbuf + me * c.count;
    } else {
        c.sendbuf = mca_coll_gpuring_contiguous(sbuf, (size_t)scount, sdtype);
        if (c.sendbuf == NULL) {
            rc = mca_coll_gpuring_pack(m, &in, c.coll, (void *)sbuf, (size_t)scount, sdtype, 1);
            if (MCA_COLL_GPURING_FELL_BACK(rc)) {
                (void)mca_coll_gpuring_unpack(&out, 0, 0); /* nothing ran */
                goto fallback;
            }
            c.sendbuf = mca_coll_gpuring_packed_bytes(&in, &c);
        }
    }
    rc = mca_coll_gpuring_packed_fallback(
        &in, mca_coll_gpuring_packed_fallback(&out, mca_coll_gpuring_call_run(m, comm, &c)));
    /* (a call abandoned for the other side's packing ran no kernel on these bytes) */
    kept = mca_coll_gpuring_call_may_write(&c, rc);
    (void)mca_coll_gpuring_unpack(&in, 0, kept);
    urc = mca_coll_gpuring_unpack(&out, rc == OMPI_SUCCESS, kept);
    if (rc == OMPI_SUCCESS) rc = urc;
    if (!MCA_COLL_GPURING_FELL_BACK(rc)) return rc;

fallback:
    mca_coll_gpuring_fallback_count(c.coll);
    if (rc == MCA_COLL_GPURING_FALLBACK_HOST) {
        return MCA_COLL_GPURING_PREV(m, allgather, sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                     comm);
    }
    return mca_coll_gpuring_allgather_below(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                            module);
}
