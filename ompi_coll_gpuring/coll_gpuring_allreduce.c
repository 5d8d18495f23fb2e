/*
 * coll_gpuring_allreduce.c -- the MPI_Allreduce and MPI_Iallreduce entry
 * points: one path, the non-blocking call ending through its request.
 *
 * checks (datatype, op) -> the shared path (coll_gpuring_entry.c: plane,
 * lazy setup, connections, the call) -> gpuring allreduce; anything gpuring
 * does not handle goes to the saved (i)allreduce of the component below,
 * with the reason logged at verbose level 3 (through the staging layer unless
 * the call found its buffers to be host memory).
 */
#include "ompi_coll_gpuring/coll_gpuring.h"
#include "kernels/memkind.h"

/*
 * Open MPI's agreement on a new communicator's context id (MPI_Comm_dup, _split,
 * _idup, ...) is an MPI_Iallreduce of one MPI_INT, with MPI_MAX then MPI_MIN, that
 * its progress starts: for MPI_Comm_idup at a point that differs between ranks --
 * inside another call on the parent communicator on one, after it on another,
 * gpuring's own calls included.  The component below tells calls apart by tags;
 * gpuring orders a communicator's calls by their arrival, so such a call would run
 * beside the one it came inside, or pair with another call on a peer (seen: calls
 * failed with steps of another call).  Every call of that shape on host memory goes
 * below, on every rank alike (the user's too: one int is no work for gpuring; every
 * rank passes memory of one kind -- where kinds may differ, coll_gpuring_agree_memory,
 * every non-blocking call goes below).
 */
static int allreduce_is_cid_agreement(const void *sbuf, const void *rbuf, int count,
                                      struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                      ompi_request_t **request)
{
    return request != NULL && count == 1 && dtype == MPI_INT &&
           (op == MPI_MAX || op == MPI_MIN) && gpuring_mem_kind(rbuf, NULL) == GPURING_MEM_HOST &&
           (sbuf == MPI_IN_PLACE || gpuring_mem_kind(sbuf, NULL) == GPURING_MEM_HOST);
}

static int allreduce_entry(const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    mca_coll_gpuring_module_t *m;
    mca_coll_gpuring_call_t c = {.coll = GPURING_COLL_ALLREDUCE,
                                 .sendbuf = sbuf == MPI_IN_PLACE ? rbuf : sbuf,
                                 .recvbuf = rbuf, .count = (size_t)count, .request = request};
    int rc = MCA_COLL_GPURING_FALLBACK;

    /* (before call_begin: it may come inside another call of this module's) */
    if (allreduce_is_cid_agreement(sbuf, rbuf, count, dtype, op, request)) {
        __atomic_fetch_add(&mca_coll_gpuring_component.cid_agreements, 1, __ATOMIC_RELAXED);
        mca_coll_gpuring_log_fallback("iallreduce fallback: one MPI_INT with %s, the shape of "
                                      "Open MPI's agreement on a new communicator's context "
                                      "id", op->o_name);
        return mca_coll_gpuring_iallreduce_below(sbuf, rbuf, count, dtype, op, comm, request,
                                                 module);
    }
    m = mca_coll_gpuring_call_begin(module);
    if (count < 0) return mca_coll_gpuring_bad_count(m, c.coll, request != NULL, count);
    if (!mca_coll_gpuring_map_reduction(c.coll, dtype, op, &c.type, &c.op)) goto fallback;
    if (count == 0) {
        /* nothing to reduce, nothing to set up */
        if (request != NULL) *request = &ompi_request_empty; /* complete; never freed */
        return OMPI_SUCCESS;
    }
    rc = mca_coll_gpuring_call_run(m, comm, &c);
    if (!MCA_COLL_GPURING_FELL_BACK(rc)) return rc;

fallback:
    mca_coll_gpuring_fallback_count(c.coll);
    if (rc == MCA_COLL_GPURING_FALLBACK_HOST) {
        return request == NULL
                   ? MCA_COLL_GPURING_PREV(m, allreduce, sbuf, rbuf, count, dtype, op, comm)
                   : MCA_COLL_GPURING_PREV(m, iallreduce, sbuf, rbuf, count, dtype, op, comm,
                                           request);
    }
    return request == NULL
               ? mca_coll_gpuring_allreduce_below(sbuf, rbuf, count, dtype, op, comm, module)
               : mca_coll_gpuring_iallreduce_below(sbuf, rbuf, count, dtype, op, comm, request,
                                                   module);
}

int mca_coll_gpuring_allreduce(const void *sbuf, void *rbuf, int count,
                               struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return allreduce_entry(sbuf, rbuf, count, dtype, op, comm, NULL, module);
}

int mca_coll_gpuring_iallreduce(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, ompi_request_t **request,
                                mca_coll_base_module_t *module)
{
    return allreduce_entry(sbuf, rbuf, count, dtype, op, comm, request, module);
}
