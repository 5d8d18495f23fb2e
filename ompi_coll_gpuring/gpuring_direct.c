/*
 * gpuring_direct.c -- the direct allreduce: device buffers, every rank on
 * one node.  Each rank maps every other rank's send and receive buffers
 * through CUDA IPC and reduces its share of the call straight from all
 * send buffers into all receive buffers (gpuring_exec_cuda_direct), so no
 * kernel waits for another's steps.  gpuring_enqueue.c picks it.
 */
#include "kernels/device.h"
#include "kernels/exec_cuda.h"
#include "ompi_coll_gpuring/gpuring_comm_internal.h"
#include "proxy/ipc_buf.h"

#include <string.h>

typedef struct comm_direct_pub {
    gpuring_ipc_buf_t send, recv;
    uint64_t call; /* gpuring_call_id: every rank must be making the same call */
} comm_direct_pub_t;

int gpuring_direct_usable(const gpuring_comm_t *c)
{
    return c->cfg.direct && c->dev.direct_state >= 0 && c->graph.nnodes == 1 &&
           c->graph.nranks <= GPURING_EXEC_DIRECT_MAX_RANKS;
}

/*
 * Every rank publishes its buffers' IPC handles (allgather); if one cannot
 * be shared, every rank sees it and returns GPURING_ERR_NOT_SUPPORTED (the
 * FIFO path).  Each rank maps the others' buffers and waits for its own
 * legacy-stream work (the kernels write every rank's buffers, so each
 * rank's ordering after its default stream must hold before anyone's
 * kernel starts: the FIFO path gets it from its stream), all agree, each reduces
 * its share (a multiple of 16 bytes) into everyone's receive buffer, and
 * the closing agreement keeps any rank from returning -- and reusing its
 * buffers -- while another's kernel may still touch them.
 */
gpuring_status_t gpuring_direct_allreduce(gpuring_comm_t *c, const void *sendbuf,
                                          void *recvbuf, size_t count, gpuring_type_t type,
                                          gpuring_op_t op, uint64_t call)
{
    const int n = c->graph.nranks, me = c->graph.rank;
    const size_t es = gpuring_type_size(type), pack = GPURING_MAX((size_t)1, 16 / es);
    const size_t share = GPURING_DIV_UP(GPURING_DIV_UP(count, (size_t)n), pack) * pack;
    const size_t first = GPURING_MIN(count, (size_t)me * share);
    gpuring_exec_direct_args_t args = {.nranks = n, .count = GPURING_MIN(share, count - first),
                                       .type = type, .op = op, .timeout = c->cfg.wait_timeout};
    comm_direct_pub_t pub, all[GPURING_EXEC_DIRECT_MAX_RANKS];
    int tokens[2 * GPURING_EXEC_DIRECT_MAX_RANKS], ntokens = 0, bad = -1;
    gpuring_status_t local = GPURING_OK, st;

    memset(&pub, 0, sizeof(pub));
    (void)gpuring_ipc_buf_export(sendbuf, &pub.send);
    if (recvbuf == sendbuf) {
        pub.recv = pub.send;
    } else {
        (void)gpuring_ipc_buf_export(recvbuf, &pub.recv);
    }
    pub.call = call;
    GPURING_CHECK(gpuring_bootstrap_allgather(&c->boot, &pub, all, sizeof(pub)));
    GPURING_PROF_MARK(GPURING_PROF_PUBLISH);
    for (int r = 0; r < n; r++) { /* every rank sees the same: all fail alike */
        if (all[r].call == pub.call) continue;
        GPURING_ERROR(GPURING_SUBSYS_COLL, "allreduce mismatch: rank %d makes another call than "
                      "this rank's %zu %s (direct allreduce): the ranks passed different "
                      "counts, datatypes or ops, or made their calls in a different order",
                      r, count, gpuring_type_name(type));
        c->broken = 1;
        return GPURING_ERR_MISMATCH;
    }
    for (int r = 0; r < n; r++) {
        if (all[r].send.ok && all[r].recv.ok) continue;
        GPURING_DEBUG(GPURING_SUBSYS_COLL, "direct allreduce: rank %d's buffers cannot be "
                      "shared through CUDA IPC (stream-ordered pool or VMM memory?): FIFO path",
                      r);
        return GPURING_ERR_NOT_SUPPORTED;
    }

    for (int r = 0; r < n && local == GPURING_OK; r++) {
        void *in = (void *)sendbuf, *out = recvbuf;

        if (r != me) {
            local = gpuring_ipc_buf_open(gpuring_comm_peer_key(c, r), r, &all[r].send,
                                         count * es, &in, &tokens[ntokens]);
            if (local != GPURING_OK) break;
            ntokens++;
            if (all[r].recv.buffer_id == all[r].send.buffer_id) { /* one allocation: one mapping */
                out = (char *)in + (all[r].recv.offset - all[r].send.offset);
            } else {
                local = gpuring_ipc_buf_open(gpuring_comm_peer_key(c, r), r, &all[r].recv,
                                             count * es, &out, &tokens[ntokens]);
                if (local != GPURING_OK) break;
                ntokens++;
            }
        }
        args.in[r] = (const char *)in + first * es;
        args.out[r] = (char *)out + first * es;
    }
    if (local == GPURING_OK) local = gpuring_device_event_wait(c->dev.event);
    GPURING_PROF_MARK(GPURING_PROF_MAP);
    st = gpuring_bootstrap_agree(&c->boot, local, &bad);
    GPURING_PROF_MARK(GPURING_PROF_AGREE);
    if (st == GPURING_OK) {
        local = gpuring_exec_cuda_direct(&args, c->dev.stream);
        st = gpuring_bootstrap_agree(&c->boot, local, &bad);
        GPURING_PROF_MARK(GPURING_PROF_CLOSE);
        if (st != GPURING_OK && local == GPURING_OK) {
            GPURING_ERROR(GPURING_SUBSYS_COLL, "direct allreduce: rank %d's kernel failed",
                          bad);
        }
        if (st != GPURING_OK) c->broken = 1; /* results are partial on every rank */
    } else {
        /* a mapping failed somewhere, before any data moved: never again on this comm */
        GPURING_INFO(GPURING_SUBSYS_COLL, "direct allreduce: rank %d could not map its peers' "
                     "buffers (or wait for its default stream); device calls use the FIFOs "
                     "from now on", bad);
        c->dev.direct_state = -1;
        st = GPURING_ERR_NOT_SUPPORTED;
    }
    for (int k = 0; k < ntokens; k++) gpuring_ipc_buf_release(tokens[k]);
    if (st == GPURING_OK && c->dev.direct_state == 0) {
        c->dev.direct_state = 1;
        GPURING_INFO(GPURING_SUBSYS_COLL, "device calls run direct: %d ranks' buffers mapped "
                     "through CUDA IPC, each rank reduces 1/%d into all", n, n);
    }
    return st;
}
