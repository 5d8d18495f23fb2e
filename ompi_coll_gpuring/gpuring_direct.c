/*
 * gpuring_direct.c -- the direct allreduces: device buffers, every rank on
 * one node, no FIFOs.  gpuring_enqueue.c picks them for blocking calls.
 *   LL direct  calls of at most coll_gpuring_direct_ll_size bytes: each
 *              rank stores its input as LL units into every peer's inbox
 *              and reduces all of them itself (gpuring_exec_cuda_direct_ll:
 *              one kernel, no exchange between the host threads).  The
 *              inboxes are set up at the communicator's first such call.
 *   direct     each rank maps every other rank's send and receive buffers
 *              through CUDA IPC and reduces its share of the call straight
 *              from all send buffers into all receive buffers
 *              (gpuring_exec_cuda_direct), so no kernel waits for another.
 */
#include "kernels/device.h"
#include "kernels/exec_cuda.h"
#include "ompi_coll_gpuring/gpuring_comm_internal.h"
#include "proxy/ipc_buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct comm_direct_pub {
    gpuring_ipc_buf_t send, recv;
    uint64_t call;    /* gpuring_call_id: every rank must be making the same call */
    uint32_t aligned; /* both buffers at addresses their element size divides */
    int32_t timeout;  /* its coll_gpuring_wait_timeout (each rank's own) */
} comm_direct_pub_t;

/* Half the shortest wait timeout of the ranks (0: none has one): what a rank may wait
 * for its default stream before the agreement, so that its failure reaches every peer
 * waiting there before that peer gives up on it and returns -- after which this rank's
 * kernel would write buffers the peer's application has back. */
static double direct_stream_bound(const comm_direct_pub_t *all, int n)
{
    int32_t shortest = 0;

    for (int r = 0; r < n; r++) {
        if (all[r].timeout > 0 && (shortest == 0 || all[r].timeout < shortest))
            shortest = all[r].timeout;
    }
    return shortest / 2.0;
}

int gpuring_direct_usable(const gpuring_comm_t *c)
{
    return c->cfg.direct && c->graph.nnodes == 1 &&
           c->graph.nranks <= GPURING_EXEC_DIRECT_MAX_RANKS;
}

/* ---- the LL direct allreduce ----------------------------------------------------------- */
typedef struct comm_direct_ll_pub {
    unsigned char inbox[GPURING_DEVICE_SHARE_BYTES];
    uint64_t bytes; /* the calls this rank's inbox takes; 0: it has none */
    int64_t pci_id; /* its GPU's PCI address (gpuring_device_pci_id); -1 unknown */
    int32_t mps;    /* its GPU shared through MPS */
    int32_t pad;    /* zero: the struct goes out whole, no unnamed padding */
} comm_direct_ll_pub_t;

/* Whether the LL direct allreduce cannot run with these ranks, and why, in msg: an
 * inbox missing, or two ranks time-slicing one GPU. */
static int direct_ll_refused(const gpuring_comm_t *c, const comm_direct_ll_pub_t *all,
                             char *msg, size_t len)
{
    const int n = c->graph.nranks;

    for (int r = 0; r < n; r++) {
        if (all[r].bytes == 0 || all[r].pci_id < 0) {
            snprintf(msg, len, "rank %d has no inbox or cannot tell its GPU (its log says "
                     "why)", r);
            return 1;
        }
        for (int q = r + 1; q < n; q++) {
            if (gpuring_comm_same_gpu(c, r, all[r].pci_id, q, all[q].pci_id) &&
                !(all[r].mps && all[q].mps)) {
                snprintf(msg, len, "ranks %d and %d share a GPU without MPS (time-sliced: a "
                         "kernel waiting for the other process's would wait a time slice)",
                         r, q);
                return 1;
            }
        }
    }
    return 0;
}

/*
 * At the communicator's first call the LL direct allreduce may take: every
 * rank makes its inbox (2 rows of nranks slots for the calls it takes),
 * tells its GPU and whether MPS shares it; the calls every inbox takes
 * (the smallest) are the limit; every rank maps the others' inboxes, and
 * all agree.  Every rank takes part whatever its local state, and all see
 * the same refusals; a refusal or a local failure anywhere turns it off on
 * every rank for good (*ready_p 0: the direct allreduce), a failed exchange
 * fails the call.
 */
static gpuring_status_t direct_ll_ready(gpuring_comm_t *c, int *ready_p)
{
    const int n = c->graph.nranks, me = c->graph.rank;
    const size_t mine = GPURING_MIN(c->cfg.direct_ll_bytes,
                                    (size_t)GPURING_EXEC_DIRECT_LL_MAX_BYTES);
    comm_direct_ll_pub_t pub, all[GPURING_EXEC_DIRECT_MAX_RANKS];
    gpuring_status_t local = GPURING_OK, st;
    size_t bytes = mine;
    int bad = -1;
    char why[192];

    *ready_p = c->dev.direct_ll_state > 0;
    if (c->dev.direct_ll_state != 0) return GPURING_OK;
    memset(&pub, 0, sizeof(pub));
    c->dev.ll_peers = calloc((size_t)n, sizeof(void *));
    if (c->dev.ll_peers == NULL) local = GPURING_ERR_NO_MEMORY;
    if (local == GPURING_OK) {
        const size_t inbox = 2 * (size_t)n * GPURING_EXEC_DIRECT_LL_SLOT_BYTES(mine);

        /* all of it: a flag in every line */
        local = gpuring_device_alloc_shared(inbox, inbox, c->cfg.wait_timeout, &c->dev.ll_inbox,
                                            pub.inbox);
    }
    pub.pci_id = c->dev.pci_id;
    if (local == GPURING_OK) {
        pub.bytes = mine;
        pub.mps = gpuring_device_mps(c->dev.ordinal);
    }
    st = gpuring_bootstrap_allgather(&c->boot, &pub, all, sizeof(pub),
                                     "setup exchange of the LL direct inboxes");
    if (st == GPURING_OK && !direct_ll_refused(c, all, why, sizeof(why))) {
        for (int r = 0; r < n; r++) bytes = GPURING_MIN(bytes, (size_t)all[r].bytes);
        for (int r = 0; r < n && local == GPURING_OK; r++) {
            if (r != me) local = gpuring_device_open_shared(all[r].inbox, &c->dev.ll_peers[r]);
        }
        st = gpuring_bootstrap_agree(&c->boot, local,
                                     "setup agreement that every rank mapped the LL direct "
                                     "inboxes");
        bad = c->boot.bad_rank;
        if (st == GPURING_OK) {
            c->dev.direct_ll_bytes = bytes;
            c->dev.direct_ll_slot = GPURING_EXEC_DIRECT_LL_SLOT_BYTES(bytes);
            c->dev.direct_ll_state = *ready_p = 1;
            GPURING_INFO(GPURING_SUBSYS_COLL, "device calls of up to %zu B run LL direct: %d "
                         "ranks' inboxes mapped through CUDA IPC, each rank reduces every "
                         "rank's input", bytes, n);
            return GPURING_OK;
        }
        snprintf(why, sizeof(why), "rank %d could not make or map the inboxes", bad);
    }
    gpuring_direct_destroy(c, 0);
    c->dev.direct_ll_state = -1;
    if (st != GPURING_OK && bad < 0) { /* an exchange failed: so does the call, and the */
        gpuring_comm_set_broken(c);                   /* ranks can no longer agree */
        return st;
    }
    GPURING_INFO(GPURING_SUBSYS_COLL, "LL direct allreduce off: %s; small device calls take "
                 "the direct allreduce", why);
    return GPURING_OK;
}

void gpuring_direct_destroy(gpuring_comm_t *c, int busy)
{
    for (int r = 0; c->dev.ll_peers != NULL && !busy && r < c->graph.nranks; r++) {
        gpuring_device_close_shared(c->dev.ll_peers[r]);
    }
    if (!busy) gpuring_device_free(c->dev.ll_inbox);
    free(c->dev.ll_peers);
    c->dev.ll_peers = NULL;
    c->dev.ll_inbox = NULL;
}

int gpuring_direct_ll_take(gpuring_comm_t *c, size_t bytes, uint64_t *seq_p)
{
    if (!gpuring_direct_usable(c) || c->dev.direct_ll_state <= 0 ||
        bytes > c->dev.direct_ll_bytes) {
        return 0;
    }
    *seq_p = c->dev.ll_seq++;
    return 1;
}

gpuring_status_t gpuring_direct_ll_run(gpuring_comm_t *c, const gpuring_coll_info_t *info,
                                       uint64_t call_seq, uint64_t call, uint64_t ll_seq)
{
    gpuring_exec_direct_ll_args_t a = {
        .nranks = c->graph.nranks, .rank = c->graph.rank, .sendbuf = info->sendbuf,
        .recvbuf = info->recvbuf, .count = info->count, .type = info->type, .op = info->op,
        .call = call, .seq = ll_seq, .slot_bytes = c->dev.direct_ll_slot,
        .inbox = c->dev.ll_inbox, .timeout = c->cfg.wait_timeout,
        .arrivals = c->arrivals, .call_seq = call_seq};
    gpuring_status_t st;

    for (int r = 0; r < a.nranks; r++) a.peer_inbox[r] = c->dev.ll_peers[r];
    if (info->fail != GPURING_OK) { /* (a call this rank cannot run: the peers are told) */
        (void)gpuring_exec_cuda_direct_ll_abandon(&a, c->dev.stream);
        st = info->fail;
    } else {
        st = gpuring_exec_cuda_direct_ll(&a, c->dev.stream);
    }
    if (st != GPURING_OK) {
        /* the inboxes' rows are out of step: never again on this communicator */
        gpuring_comm_set_broken(c);
        return st;
    }
    gpuring_comm_stats_count(c, GPURING_COLL_ALLREDUCE, 2, GPURING_ALGO_AUTO,
                             GPURING_PLANE_DEVICE, info->count * gpuring_type_size(info->type));
    return GPURING_OK;
}

/* ---- the direct allreduce ---------------------------------------------------------------- */
#define DIRECT_MAX_BACKOFF 6 /* declines in a row: at most 2^6 - 1 calls skip the exchange */

/* The k-th decline in a row (some rank's buffers cannot be shared, or a mapping
 * failed): the next 2^k - 1 calls take the FIFOs without the exchange, then ask again.
 * Every rank counts alike (from what every rank received). */
static void direct_back_off(gpuring_comm_t *c)
{
    c->dev.direct_declines = GPURING_MIN(c->dev.direct_declines + 1, DIRECT_MAX_BACKOFF);
    c->dev.direct_skip = (1 << c->dev.direct_declines) - 1;
}

/*
 * Every rank publishes its buffers' IPC handles (allgather); if one cannot
 * be shared, or is not aligned to its elements (the kernel reads whole ones
 * from every rank's buffers), every rank sees it and returns
 * GPURING_ERR_NOT_SUPPORTED (the FIFO path), as it does without asking for the
 * next 2^k - 1 calls after k such declines in a row (k up to
 * DIRECT_MAX_BACKOFF: an application's buffers rarely change kind, and the
 * exchange is an allgather over MPI), and where a
 * rank could not map its peers' buffers (direct_back_off).  Each rank maps
 * the others' buffers and waits for its own legacy-stream work (the kernels
 * write every rank's buffers, so each rank's ordering after its default stream
 * must hold before anyone's kernel starts: the FIFO path gets it from its
 * stream), all agree, each reduces its share (a multiple of 16 bytes) into
 * everyone's receive buffer, and
 * the closing agreement keeps any rank from returning -- and reusing its
 * buffers -- while another's kernel may still touch them.
 */
gpuring_status_t gpuring_direct_allreduce(gpuring_comm_t *c, const gpuring_coll_info_t *info,
                                          uint64_t call)
{
    const void *sendbuf = info->sendbuf;
    void *recvbuf = info->recvbuf;
    const size_t count = info->count;
    const gpuring_type_t type = info->type;
    const gpuring_op_t op = info->op;
    const int n = c->graph.nranks, me = c->graph.rank;
    const size_t es = gpuring_type_size(type), pack = GPURING_MAX((size_t)1, 16 / es);
    const size_t share = GPURING_DIV_UP(GPURING_DIV_UP(count, (size_t)n), pack) * pack;
    const size_t first = GPURING_MIN(count, (size_t)me * share);
    gpuring_exec_direct_args_t args = {.nranks = n, .count = GPURING_MIN(share, count - first),
                                       .type = type, .op = op, .timeout = c->cfg.wait_timeout};
    comm_direct_pub_t pub, all[GPURING_EXEC_DIRECT_MAX_RANKS];
    int tokens[2 * GPURING_EXEC_DIRECT_MAX_RANKS], ntokens = 0;
    gpuring_status_t local = GPURING_OK, st;

    if (count * es <= c->cfg.direct_ll_bytes) {
        uint64_t seq;
        int ready = 0;

        GPURING_CHECK(direct_ll_ready(c, &ready));
        if (ready && gpuring_direct_ll_take(c, count * es, &seq)) {
            return gpuring_direct_ll_run(c, info, c->calls, call, seq);
        }
    }
    if (c->dev.direct_skip > 0) {
        c->dev.direct_skip--;
        return GPURING_ERR_NOT_SUPPORTED;
    }
    memset(&pub, 0, sizeof(pub));
    if (info->fail == GPURING_OK) { /* (else no buffers: every rank takes the FIFOs) */
        (void)gpuring_ipc_buf_export(sendbuf, &pub.send);
        if (recvbuf == sendbuf) {
            pub.recv = pub.send;
        } else {
            (void)gpuring_ipc_buf_export(recvbuf, &pub.recv);
        }
    }
    pub.call = call;
    pub.aligned = ((uintptr_t)sendbuf | (uintptr_t)recvbuf) % es == 0;
    pub.timeout = c->cfg.wait_timeout;
    st = gpuring_bootstrap_allgather(&c->boot, &pub, all, sizeof(pub),
                                     "direct allreduce's exchange of its buffers");
    if (st != GPURING_OK) { /* the ranks can no longer agree: the communicator is unusable */
        gpuring_comm_set_broken(c);
        return st;
    }
    GPURING_PROF_MARK(GPURING_PROF_PUBLISH);
    for (int r = 0; r < n; r++) { /* every rank sees the same: all fail alike */
        if (all[r].call == pub.call) continue;
        GPURING_ERROR(GPURING_SUBSYS_COLL, "allreduce mismatch: rank %d makes another call than "
                      "this rank's %zu %s (direct allreduce): the ranks passed different "
                      "counts, datatypes or ops, or made their calls in a different order",
                      r, count, gpuring_type_name(type));
        gpuring_comm_set_broken(c);
        return GPURING_ERR_MISMATCH;
    }
    for (int r = 0; r < n; r++) {
        if (all[r].send.ok && all[r].recv.ok && all[r].aligned) continue;
        /* buffers stay what they are: backed off */
        direct_back_off(c);
        GPURING_DEBUG(GPURING_SUBSYS_COLL, "direct allreduce: rank %d's buffers %s: FIFO path "
                      "(for the next %d calls too)", r,
                      !all[r].aligned ? "are not aligned to their elements (the FIFO path "
                                        "runs that rank's call on aligned copies)"
                                      : "cannot be shared through CUDA IPC (stream-ordered "
                                        "pool or VMM memory?)",
                      c->dev.direct_skip);
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
    if (local == GPURING_OK) {
        const double bound = direct_stream_bound(all, n);

        local = gpuring_device_event_wait(c->dev.event, bound);
        if (local == GPURING_ERR_TIMEOUT)
            GPURING_ERROR(GPURING_SUBSYS_COLL, "direct allreduce: the work this rank queued on "
                          "the default stream before the call has not finished after %g s "
                          "(half the shortest coll_gpuring_wait_timeout of the ranks); the "
                          "call does not start", bound);
    }
    GPURING_PROF_MARK(GPURING_PROF_MAP);
    st = gpuring_bootstrap_agree(&c->boot, local,
                                 "direct allreduce's agreement that every rank can start");
    GPURING_PROF_MARK(GPURING_PROF_AGREE);
    if (st == GPURING_OK) {
        local = gpuring_exec_cuda_direct(&args, c->dev.stream);
        st = gpuring_bootstrap_agree(&c->boot, local,
                                     "direct allreduce's agreement that every kernel ended");
        GPURING_PROF_MARK(GPURING_PROF_CLOSE);
        if (st != GPURING_OK && local == GPURING_OK && c->boot.bad_rank >= 0) {
            GPURING_ERROR(GPURING_SUBSYS_COLL, "direct allreduce: rank %d's kernel failed",
                          c->boot.bad_rank);
        } else if (st != GPURING_OK && local == GPURING_OK) {
            GPURING_ERROR(GPURING_SUBSYS_COLL, "direct allreduce: the agreement after the "
                          "kernels failed (%s): a peer's kernel may still run",
                          gpuring_status_str(st));
        }
        if (st != GPURING_OK) gpuring_comm_set_broken(c); /* results are partial on every rank */
    } else if (!gpuring_bootstrap_in_step(&c->boot, st)) {
        /* the agreement's exchange failed (or was left): so does the call; the ranks
         * can no longer agree, so the communicator is unusable */
        gpuring_comm_set_broken(c);
    } else {
        /* a mapping failed somewhere (all mappings in use, a GPU out of memory for one:
         * both may pass), or a default stream did not drain, before any data moved: the
         * FIFOs, backed off as for buffers declined */
        direct_back_off(c);
        GPURING_INFO(GPURING_SUBSYS_COLL, "direct allreduce: rank %d could not map its peers' "
                     "buffers (or wait for its default stream): FIFO path (for the next %d "
                     "calls too)", c->boot.bad_rank, c->dev.direct_skip);
        st = GPURING_ERR_NOT_SUPPORTED;
    }
    for (int k = 0; k < ntokens; k++) gpuring_ipc_buf_release(tokens[k]);
    if (st == GPURING_OK) c->dev.direct_declines = 0;
    if (st == GPURING_OK && c->dev.direct_state == 0) {
        c->dev.direct_state = 1;
        GPURING_INFO(GPURING_SUBSYS_COLL, "device calls run direct: %d ranks' buffers mapped "
                     "through CUDA IPC, each rank reduces 1/%d into all", n, n);
    }
    if (st == GPURING_OK) {
        gpuring_comm_stats_count(c, GPURING_COLL_ALLREDUCE, 1, GPURING_ALGO_AUTO,
                                 GPURING_PLANE_DEVICE, count * es);
    }
    return st;
}
