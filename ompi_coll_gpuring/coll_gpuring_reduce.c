/*
 * coll_gpuring_reduce.c -- the MPI_Reduce entry point: the pipelined chain
 * along the ring toward the root (kernels/prog_ring_reduce.h) through the
 * shared path (coll_gpuring_entry.c).  In place at the root; the receive
 * buffer is not looked at elsewhere.  Types and ops as allreduce's; the
 * rest goes to the component below, the reason logged.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include <stdlib.h>

#include "ompi/communicator/communicator.h"

#include "kernels/devcopy.h"
#include "kernels/memkind.h"

/*
 * The root's receive buffer is another kind of memory than its send buffer (device
 * data reduced into a host array, or the reverse, or into another GPU's memory): the
 * call takes the send buffers' path, as every other rank's does, with the root's
 * result in `bytes` of its send buffer's kind, copied into rbuf after.  (Deciding on
 * both buffers, the root alone went below, to wait there for peers that ran gpuring's
 * chain.)  A call that goes below goes through the staging layer, whatever the send
 * buffers' kind: rbuf is another (device memory where they are host).  The memory for
 * the result is kept after a call that failed once its executors had it, as packed
 * bytes are (mca_coll_gpuring_call_may_write): its kernel or receives may still write it.
 */
static int reduce_apart(mca_coll_gpuring_module_t *m, struct ompi_communicator_t *comm,
                        mca_coll_gpuring_call_t *c, void *rbuf, size_t bytes)
{
    const int device = gpuring_mem_kind(c->sendbuf, NULL) != GPURING_MEM_HOST;
    const char *why = "out of memory";
    void *tmp = NULL;
    int pooled = 0, rc, kept;
    gpuring_status_t st;

    if (device) {
        if (gpuring_devcopy_alloc(c->sendbuf, bytes, &tmp, &pooled, &why) != GPURING_OK)
            tmp = NULL;
    } else {
        tmp = malloc(bytes);
    }
    if (tmp == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "reduce on comm %s (root %d): no %s memory for the "
                      "result beside the send buffer (%zu B; the receive buffer is another "
                      "kind): %s; this rank gives up on the call",
                      mca_coll_gpuring_comm_name(m), c->root, device ? "device" : "host",
                      bytes, why);
        c->fail = GPURING_ERR_NO_MEMORY; /* (recvbuf NULL: the send buffer's path) */
    }
    c->recvbuf = tmp;
    rc = mca_coll_gpuring_call_run(m, comm, c);
    kept = mca_coll_gpuring_call_may_write(c, rc);
    if (rc == OMPI_SUCCESS) {
        st = gpuring_devcopy(rbuf, tmp, bytes, 0, &why);
        if (st != GPURING_OK) {
            GPURING_ERROR(GPURING_SUBSYS_COLL, "reduce on comm %s (root %d): cannot copy the "
                          "result (%zu B) into the receive buffer at %p: %s",
                          mca_coll_gpuring_comm_name(m), c->root, bytes, rbuf, why);
            rc = mca_coll_gpuring_status_to_ompi(st);
        }
    }
    if (!kept && device) gpuring_devcopy_free(tmp, pooled); /* (NULL: nothing) */
    else if (!kept) free(tmp);
    return rc == MCA_COLL_GPURING_FALLBACK_HOST ? MCA_COLL_GPURING_FALLBACK : rc;
}

int mca_coll_gpuring_reduce(const void *sbuf, void *rbuf, int count,
                            struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpuring_module_t *m = mca_coll_gpuring_call_begin(module);
    const int at_root = ompi_comm_rank(comm) == root;
    mca_coll_gpuring_call_t c = {.coll = GPURING_COLL_REDUCE,
                                 .sendbuf = sbuf == MPI_IN_PLACE ? rbuf : sbuf,
                                 .recvbuf = at_root ? rbuf : NULL, .count = (size_t)count,
                                 .root = root};
    int rc = MCA_COLL_GPURING_FALLBACK;

    if (count < 0) return mca_coll_gpuring_bad_count(m, c.coll, 0, count);
    if (!mca_coll_gpuring_map_reduction(c.coll, dtype, op, &c.type, &c.op)) goto fallback;
    if (count == 0) return OMPI_SUCCESS;
    if (at_root && mca_coll_gpuring_out_apart(c.sendbuf, rbuf)) {
        rc = reduce_apart(m, comm, &c, rbuf, mca_coll_gpuring_signature_bytes(dtype, c.count));
    } else {
        rc = mca_coll_gpuring_call_run(m, comm, &c);
    }
    if (!MCA_COLL_GPURING_FELL_BACK(rc)) return rc;

fallback:
    mca_coll_gpuring_fallback_count(c.coll);
    if (rc == MCA_COLL_GPURING_FALLBACK_HOST) {
        return MCA_COLL_GPURING_PREV(m, reduce, sbuf, rbuf, count, dtype, op, root, comm);
    }
    return mca_coll_gpuring_reduce_below(sbuf, rbuf, count, dtype, op, root, comm, module);
}
