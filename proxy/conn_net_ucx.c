/*
 * conn_net_ucx.c -- NET connections: host staging slots moved by the proxy
 * thread over UCX tagged messages.
 *
 * Send end: the executor writes slot s % NSTEPS, records the byte count in
 * ctrl->size[] and the call id in ctrl->call[] and publishes ctrl->tail
 * (gpuring_conn_post).  The thread sends step s, its call id in the tag
 * (proxy_internal.h), once tail > s and the receiver's credit allows it
 * (s < remote_head + NSTEPS); when sends complete (in order) it publishes
 * ctrl->head = completed steps, so the executor may reuse the slot.
 *
 * Recv end: receives for steps s < head + NSTEPS are always posted into their
 * slots (posted before the credit that lets the sender send them goes out, so
 * data never arrives unexpected), matching any call id.  Landed steps are
 * published in order as ctrl->tail, with their length and the sender's call
 * id in ctrl->size[] and ctrl->call[], for the executor to check.  When the executor has advanced ctrl->head by a batch of
 * steps, the pass sends the new head to the sender as a credit: at most one
 * credit in flight, always the latest value.  A batch is half the window
 * (the sender still has half the window while the credit travels); a credit
 * also goes as soon as every step the sender was allowed has landed (it may
 * be waiting for the credit), at once while the communicator is torn down
 * (its sender's teardown waits for the last one), and when the process is
 * idle (the progress thread's nap: so that a sender's teardown need not wait
 * for this rank to tear down too).  Once the executor
 * refused the connection (gpuring_conn_refuse: its call failed) a credit
 * carries GPURING_NET_CREDIT_REFUSED, and the sender's pass sets its own
 * ctrl->refused from it: a sender waiting for a slot fails at once.
 *
 * Slots in device memory (GPU-direct, created with a device ordinal): UCX
 * sends from and receives into them itself; ctrl stays host memory the
 * thread reads.  Where the GPU does not order a NIC's writes natively, the
 * thread flushes them (gpuring_device_flush_remote_writes) before it
 * publishes the tail that lets the kernel read them.
 *
 * Everything here runs with the proxy lock held (the thread's pass, an
 * executor's pass, or create/connect/destroy taking it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/device.h"
#include "proxy/proxy_internal.h"

#define GPURING_PAGE 4096
#define GPURING_NET_HUGE_PAGE (2u << 20) /* x86-64's and most arm64 kernels' PMD size */
/* steps consumed per credit message */
#define GPURING_NET_CREDIT_BATCH (GPURING_NSTEPS / 2)

static const char *dir_str(gpuring_conn_dir_t dir)
{
    return dir == GPURING_CONN_SEND ? "send" : "recv";
}

/* The op params every data send/recv shares: its callback, and the memory
 * type of the slots so UCX need not detect it. */
static void data_param(gpuring_net_op_t *op, ucp_request_param_t *param)
{
    memset(param, 0, sizeof(*param));
    param->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                          UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param->user_data = op;
    param->memory_type = op->net->device >= 0 ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}

/* The abort step handed over (gpuring_conn_net_abort_later) into the FIFO once a
 * slot frees, as gpuring_conn_post_abort posts it, through the host view of the
 * ctrl (the executor's gpuring_conn_t may be gone by now, and a GPU's sees the
 * device view); 1 if posted. */
static int net_post_abort(gpuring_net_conn_t *net)
{
    const uint64_t step = net->abort_step;

    if (GPURING_LOAD_ACQUIRE(&net->ctrl->head) + GPURING_NSTEPS <= step) return 0;
    gpuring_fifo_post(net->ctrl, step, 0, GPURING_CALL_ABORT);
    return 1;
}

/* ---- failures ---------------------------------------------------------------- */

/* Record the connection's first failure (what follows is mostly its echo) for the
 * executors that use it (gpuring_conn_net_error) and the proxy's record.  The first
 * failure seen over an endpoint is an error line; the rest (every send to a dead peer
 * fails, on each of its connections) debug lines.  Lock held. */
static void net_fail(gpuring_net_conn_t *net, gpuring_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void net_fail(gpuring_net_conn_t *net, gpuring_status_t st, const char *fmt, ...)
{
    char msg[sizeof(net->err_msg)];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (__atomic_load_n(&net->err, __ATOMIC_RELAXED) == GPURING_OK) {
        memcpy(net->err_msg, msg, sizeof(msg));
        __atomic_store_n(&net->err, (int)(st == GPURING_OK ? GPURING_ERR_NET : st),
                         __ATOMIC_RELEASE);
        gpuring_proxy_note_failure(net->proxy, st, msg);
    }
    if (net->pe != NULL && !net->pe->reported) {
        net->pe->reported = 1;
        GPURING_ERROR(GPURING_SUBSYS_NET, "%s", msg);
    } else {
        GPURING_DEBUG(GPURING_SUBSYS_NET, "%s (after an earlier failure)", msg);
    }
}

/* Has the endpoint to the connection's peer process failed (UCX's error callback: the
 * process gone, or its connection)?  Nothing more comes from it then; an error of
 * one of the connection's own operations says nothing of that. */
static int net_peer_failed(const gpuring_net_conn_t *net)
{
    return net->pe != NULL && __atomic_load_n(&net->pe->failed, __ATOMIC_ACQUIRE);
}

/* gpuring_conn_net_error of the connection's NET state (NULL: none). */
static gpuring_status_t net_error(const gpuring_net_conn_t *net, char *msg, size_t len)
{
    gpuring_status_t st;

    if (msg != NULL && len > 0) msg[0] = '\0';
    /* (detached: the proxy and its endpoints are gone, and no call uses it any more) */
    if (net == NULL || net->detached) return GPURING_OK;
    st = (gpuring_status_t)__atomic_load_n(&net->err, __ATOMIC_ACQUIRE);
    if (st != GPURING_OK) {
        if (msg != NULL && len > 0) snprintf(msg, len, "%s", net->err_msg);
        return st;
    }
    if (net->proxy != NULL && __atomic_load_n(&net->proxy->stuck, __ATOMIC_ACQUIRE)) {
        if (msg != NULL && len > 0)
            snprintf(msg, len, "net %s rank %d channel %d: the proxy is stuck (a pass that does "
                     "not end holds its lock; logged above)",
                     net->dir == GPURING_CONN_SEND ? "send to" : "recv from", net->peer,
                     net->channel);
        return GPURING_ERR_TIMEOUT;
    }
    if (net->pe == NULL || !__atomic_load_n(&net->pe->failed, __ATOMIC_ACQUIRE))
        return GPURING_OK;
    if (msg != NULL && len > 0)
        snprintf(msg, len, "net %s rank %d channel %d: the endpoint to that process failed: %s",
                 net->dir == GPURING_CONN_SEND ? "send to" : "recv from", net->peer,
                 net->channel, ucs_status_string(net->pe->fail_status));
    return GPURING_ERR_NET;
}

gpuring_status_t gpuring_conn_net_error(const gpuring_conn_t *conn, char *msg, size_t len)
{
    return net_error(conn != NULL ? conn->net : NULL, msg, len);
}

/* ---- completion callbacks (lock held: they run inside progress/cancel) ---- */

/* Record a finished operation; a failure (not a cancel) is the connection's. */
static void net_op_finish(gpuring_net_op_t *op, ucs_status_t status, const char *what)
{
    gpuring_net_conn_t *net = op->net;

    op->status = status;
    op->done = 1;
    if (status != UCS_OK && status != UCS_ERR_CANCELED)
        net_fail(net, GPURING_ERR_NET, "net %s rank %d channel %d step %llu failed: %s", what,
                 net->peer, net->channel, (unsigned long long)op->step,
                 ucs_status_string(status));
}

static void net_send_cb(void *request, ucs_status_t status, void *user_data)
{
    gpuring_net_op_t *op = user_data;
    gpuring_net_conn_t *net = op->net;

    (void)request;
    net_op_finish(op, status, op == &net->credit ? "credit send to" : "send to");
}

static void net_recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                        void *user_data)
{
    gpuring_net_op_t *op = user_data;
    gpuring_net_conn_t *net = op->net;

    (void)request;
    if (status == UCS_OK && info != NULL) { /* what the executor checks the step by */
        op->length = info->length;
        op->tag = info->sender_tag;
    } else if (status == UCS_ERR_MESSAGE_TRUNCATED && op->at != NULL) {
        /* longer than the output asked for it (conn.h): the step of another call,
         * which the executor's check reports; the connection stays sound */
        op->length = op->cap + 1;
        op->tag = info != NULL ? info->sender_tag : 0;
        status = UCS_OK;
    }
    net_op_finish(op, status, op == &net->credit ? "credit recv from" : "recv from");
}

/* ---- posting ---------------------------------------------------------------- */

static void op_begin(gpuring_net_op_t *op, uint64_t step)
{
    op->req = NULL;
    op->step = step;
    op->busy = 1;
    op->done = 0;
    op->status = UCS_INPROGRESS;
    op->length = 0;
    op->tag = GPURING_CALL_ABORT; /* a data receive's callback sets them */
    op->at = NULL;
    op->cap = 0;
    op->repost = 0;
}

/* Common handling of what a *_nbx call returned. */
static void op_posted(gpuring_net_op_t *op, ucs_status_ptr_t ret, const char *what)
{
    gpuring_net_conn_t *net = op->net;

    if (ret == NULL) { /* completed immediately */
        op->status = UCS_OK;
        op->done = 1;
    } else if (UCS_PTR_IS_ERR(ret)) {
        op->status = UCS_PTR_STATUS(ret);
        op->done = 1;
        net_fail(net, GPURING_ERR_NET, "net %s rank %d channel %d step %llu failed: %s", what,
                 net->peer, net->channel, (unsigned long long)op->step,
                 ucs_status_string(op->status));
    } else {
        op->req = ret; /* the callback may already have run: it only sets done */
    }
}

static void post_data_send(gpuring_net_conn_t *net, uint64_t step)
{
    unsigned slot = (unsigned)(step % GPURING_NSTEPS);
    gpuring_net_op_t *op = &net->data[slot];
    size_t bytes = (size_t)net->ctrl->size[slot]; /* written before the tail we saw */
    ucp_request_param_t param;

    if (bytes > net->slot_bytes) {
        net_fail(net, GPURING_ERR_INVALID,
                 "net send to rank %d channel %d step %llu: %zu bytes exceed the %zu byte slot",
                 net->peer, net->channel, (unsigned long long)step, bytes, net->slot_bytes);
        bytes = net->slot_bytes;
    }
    data_param(op, &param);
    param.cb.send = net_send_cb;
    op_begin(op, step);
    op_posted(op,
              ucp_tag_send_nbx(net->pe->ep, net->slots + (size_t)slot * net->slot_bytes, bytes,
                               gpuring_net_tag(net->comm_uid, GPURING_TAG_KIND_DATA,
                                               net->remote_net_id,
                                               gpuring_net_data_field(step,
                                                                      net->ctrl->call[slot])),
                               &param),
              "send to");
}

/* Has the executor asked for step `step` in its output, in at most `cap` bytes
 * (conn.h: zero copy)?  Its address and size are then read after the ask. */
static int net_asked(const gpuring_net_conn_t *net, uint64_t step, size_t cap)
{
    const unsigned slot = (unsigned)(step % GPURING_NSTEPS);

    return __atomic_load_n(&net->ctrl->land_step[slot], __ATOMIC_ACQUIRE) == step + 1 &&
           net->ctrl->land_bytes[slot] <= cap;
}

static void post_data_recv(gpuring_net_conn_t *net, uint64_t step)
{
    unsigned slot = (unsigned)(step % GPURING_NSTEPS);
    gpuring_net_op_t *op = &net->data[slot];
    ucp_request_param_t param;
    ucs_status_ptr_t ret;

    data_param(op, &param);
    /* the callback always runs: it records the length and the sender's tag */
    param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = net_recv_cb;
    op_begin(op, step);
    op->cap = net->slot_bytes;
    if (net_asked(net, step, op->cap)) {
        /* the executor asked for this step in its output (conn.h: zero copy) */
        op->at = (char *)(uintptr_t)net->ctrl->land[slot];
        op->cap = (size_t)net->ctrl->land_bytes[slot];
    }
    ret = ucp_tag_recv_nbx(net->proxy->worker,
                           op->at != NULL ? op->at : net->slots + (size_t)slot * net->slot_bytes,
                           op->cap,
                           gpuring_net_tag(net->comm_uid, GPURING_TAG_KIND_DATA, net->net_id,
                                           gpuring_net_data_field(step, 0)),
                           GPURING_TAG_MASK_NOCALL, &param);
    op_posted(op, ret, "recv from");
}

static void post_credit_recv(gpuring_net_conn_t *net)
{
    gpuring_net_op_t *op = &net->credit;
    ucp_request_param_t param;

    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.recv = net_recv_cb;
    param.user_data = op;
    op_begin(op, net->remote_head);
    op_posted(op,
              ucp_tag_recv_nbx(net->proxy->worker, &net->credit_buf, sizeof(net->credit_buf),
                               gpuring_net_tag(net->comm_uid, GPURING_TAG_KIND_CREDIT,
                                               net->net_id, 0),
                               GPURING_TAG_MASK_NOSTEP, &param),
              "credit recv from");
}

/* Recv end: has this side's executor refused the connection (gpuring_conn_refuse, on the
 * ctrl the proxy sees: conn->ctrl may be the device's view)? */
static int net_refusing(const gpuring_net_conn_t *net)
{
    return GPURING_LOAD_ACQUIRE(&net->ctrl->refused) != 0;
}

static void post_credit_send(gpuring_net_conn_t *net, uint64_t head)
{
    gpuring_net_op_t *op = &net->credit;
    ucp_request_param_t param;

    net->refused = net_refusing(net);
    net->credit_buf = head | (net->refused ? GPURING_NET_CREDIT_REFUSED : 0);
    net->credited = head;
    net->credits++;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = net_send_cb;
    param.user_data = op;
    op_begin(op, head);
    op_posted(op,
              ucp_tag_send_nbx(net->pe->ep, &net->credit_buf, sizeof(net->credit_buf),
                               gpuring_net_tag(net->comm_uid, GPURING_TAG_KIND_CREDIT,
                                               net->remote_net_id, head),
                               &param),
              "credit send to");
}

/* Release a completed op's request; returns its status. */
static ucs_status_t op_retire(gpuring_net_op_t *op)
{
    if (op->req != NULL) ucp_request_free(op->req);
    op->req = NULL;
    op->busy = 0;
    return op->status;
}

/* ---- the per-connection pass ---------------------------------------------------- */

static int send_progress(gpuring_net_conn_t *net, int closing)
{
    uint64_t tail, done0 = net->done, sent0 = net->sent, remote0 = net->remote_head;
    int pending, live;

    /* sends completed, in order: the executor may reuse those slots */
    while (net->done < net->sent) {
        unsigned slot = (unsigned)(net->done % GPURING_NSTEPS);
        gpuring_net_op_t *op = &net->data[slot];

        if (!op->done) break;
        if (op_retire(op) != UCS_OK) net->failed = 1;
        net->done++;
    }
    if (net->done != done0 && !net->failed) GPURING_STORE_RELEASE(&net->ctrl->head, net->done);

    /* credits: keep the receive posted, remember the latest head */
    while (net->credit.busy && net->credit.done) {
        if (op_retire(&net->credit) == UCS_OK) {
            const uint64_t head = net->credit_buf & ~GPURING_NET_CREDIT_REFUSED;

            if (head > net->remote_head) net->remote_head = head;
            if ((net->credit_buf & GPURING_NET_CREDIT_REFUSED) && !net->refused) {
                net->refused = 1;
                GPURING_STORE_RELEASE(&net->ctrl->refused, 1); /* for this side's executor */
            }
            net->credits++;
        } else if (net->credit.status != UCS_ERR_CANCELED) {
            net->failed = 1;
        }
        if (!closing && !net->failed) post_credit_recv(net);
    }

    /* an abort step the executor could not post (gpuring_conn_net_abort_later):
     * the connection is the proxy's now; a receiver that refused the call needs
     * none (and frees no slot for it) */
    if (__atomic_load_n(&net->abort_due, __ATOMIC_ACQUIRE) && !net->failed &&
        (net->refused || net_post_abort(net)))
        __atomic_store_n(&net->abort_due, 0, __ATOMIC_RELAXED);
    tail = GPURING_LOAD_ACQUIRE(&net->ctrl->tail);
    net->seen_tail = tail;
    net->seen_pass = net->proxy->passes;
    if (tail - net->done > net->inflight_max) net->inflight_max = tail - net->done;
    while (!net->failed && !net->refused && net->sent < tail &&
           net->sent < net->remote_head + GPURING_NSTEPS) {
        post_data_send(net, net->sent);
        net->sent++;
    }
    /* a receiver that refused the call takes nothing more and sends no more credits, nor
     * does one whose endpoint failed (a process gone, net_error): nothing more is sent,
     * and the sends under way (which may never complete: a rendezvous the receiver no
     * longer matches) owe no pass -- the thread's backstop looks at them -- where they
     * would keep it spinning until the communicator goes; nor do those of a failed call
     * (quiet: a receiver busy elsewhere, or gone unseen on a transport without failure
     * detection) */
    live = !net->failed && !net->refused && !__atomic_load_n(&net->quiet, __ATOMIC_RELAXED) &&
           net_error(net, NULL, 0) == GPURING_OK;
    pending = live && (tail > net->sent || __atomic_load_n(&net->abort_due, __ATOMIC_RELAXED) ||
                       net->done < net->sent);
    return (pending ? GPURING_NET_PENDING : 0) |
           (live && net->sent >= net->remote_head + GPURING_NET_CREDIT_BATCH
                ? GPURING_NET_POLL
                : 0) |
           (net->done != done0 || net->sent != sent0 || net->remote_head != remote0
                ? GPURING_NET_MOVED
                : 0);
}

/* Is a credit for `head` worth a message now?  (the file's header says when; a refusal
 * not yet sent always is, unless the connection itself failed (net_error): one failed
 * by a receive of its own cancelled -- gpuring_conn_net_unland_cancel's, the failed call's --
 * still tells its sender, which may be waiting for a slot) */
static int credit_due(const gpuring_net_conn_t *net, uint64_t head, int closing)
{
    if (!net->refused && net_refusing(net)) return net_error(net, NULL, 0) == GPURING_OK;
    if (net->failed) return 0;
    if (head <= net->credited) return 0;
    return head - net->credited >= GPURING_NET_CREDIT_BATCH ||
           net->landed >= net->credited + GPURING_NSTEPS || closing || net->draining ||
           net->settling;
}

static int recv_progress(gpuring_net_conn_t *net, int closing)
{
    uint64_t head, landed0 = net->landed, credited0 = net->credited;
    int pending;

    /* steps landed, in order, with what the executor checks them by */
    while (net->landed < net->posted) {
        const unsigned slot = (unsigned)(net->landed % GPURING_NSTEPS);
        gpuring_net_op_t *op = &net->data[slot];

        if (!op->done) break;
        if (op->repost && op->status == UCS_ERR_CANCELED) { /* reland's, completed late */
            (void)op_retire(op);
            post_data_recv(net, net->landed);
            break;
        }
        net->ctrl->size[slot] = op->length;
        net->ctrl->call[slot] = op->tag & GPURING_CALL_MASK;
        net->ctrl->at[slot] = (uint64_t)(uintptr_t)op->at;
        if (op->at != NULL) net->zcopy++;
        if (op_retire(op) != UCS_OK) net->failed = 1;
        net->landed++;
    }
    if (net->landed != landed0 && !net->failed && net->flush) {
        /* the NIC's writes into device slots, visible to the kernel before the tail */
        const int used = gpuring_device_use(net->device) == GPURING_OK;

        /* (on the proxy thread: what its passes take as current from now on) */
        if (used && pthread_equal(pthread_self(), net->proxy->thread))
            net->proxy->thread_device = net->device;
        if (!used || gpuring_device_flush_remote_writes() != GPURING_OK) {
            net_fail(net, GPURING_ERR_CUDA,
                     "net recv from rank %d channel %d: cannot flush GPUDirect RDMA writes on "
                     "GPU %d",
                     net->peer, net->channel, net->device);
            net->failed = 1;
        }
    }
    if (net->landed != landed0 && !net->failed)
        GPURING_STORE_RELEASE(&net->ctrl->tail, net->landed);

    /* receives for the slots the executor released, before the credit goes */
    head = GPURING_LOAD_ACQUIRE(&net->ctrl->head);
    while (!closing && !net->failed && net->posted < head + GPURING_NSTEPS) {
        if (net->data[net->posted % GPURING_NSTEPS].busy) break; /* executor ran ahead */
        post_data_recv(net, net->posted);
        net->posted++;
    }

    /* credit: one in flight, always the latest head */
    if (net->credit.busy && net->credit.done) {
        if (op_retire(&net->credit) != UCS_OK) net->failed = 1;
    }
    if (!net->credit.busy && credit_due(net, head, closing)) post_credit_send(net, head);
    if (net->credit.busy && net->credit.done && op_retire(&net->credit) != UCS_OK)
        net->failed = 1; /* immediate completion */

    /* a credit owed but not due is no work: it waits for more steps or the teardown (and a
     * failed call's, due or not, the backstop: quiet) */
    pending = !__atomic_load_n(&net->quiet, __ATOMIC_RELAXED) &&
              (credit_due(net, head, closing) || net->credit.busy);
    return (pending ? GPURING_NET_PENDING : 0) |
           (net->landed != landed0 || net->credited != credited0 ? GPURING_NET_MOVED : 0);
}

int gpuring_net_conn_progress(gpuring_net_conn_t *net)
{
    if (!net->connected || net->detached) return 0;
    gpuring_proxy_doing(net->proxy, "a connection's progress", net);
    return net->dir == GPURING_CONN_SEND ? send_progress(net, 0) : recv_progress(net, 0);
}

void gpuring_conn_net_stats(const gpuring_conn_t *conn, gpuring_conn_net_stats_t *stats_p)
{
    const gpuring_net_conn_t *net = conn != NULL ? conn->net : NULL;

    memset(stats_p, 0, sizeof(*stats_p));
    if (net == NULL) return;
    stats_p->steps = net->dir == GPURING_CONN_SEND ? net->sent : net->landed;
    stats_p->credits = net->credits;
    stats_p->inflight_max = net->inflight_max;
    stats_p->zcopy = net->zcopy;
}

/* What the UCX operation of `step` on this end does, in words.  Lock held. */
static void net_op_describe(const gpuring_net_conn_t *net, uint64_t step, char *buf, size_t len)
{
    const gpuring_net_op_t *op = &net->data[step % GPURING_NSTEPS];
    const int send = net->dir == GPURING_CONN_SEND;
    const char *what = send ? "send" : "receive";

    if (step < (send ? net->done : net->landed)) {
        snprintf(buf, len, "step %llu's %s completed", (unsigned long long)step, what);
    } else if (step >= (send ? net->sent : net->posted) || !op->busy || op->step != step) {
        snprintf(buf, len, "step %llu's %s is not posted", (unsigned long long)step, what);
    } else if (!op->done) {
        snprintf(buf, len, "step %llu's %s is in flight (UCX: %s)", (unsigned long long)step,
                 what, op->req != NULL ? ucs_status_string(ucp_request_check_status(op->req))
                                       : "no request");
    } else {
        snprintf(buf, len, "step %llu's %s is done (%s), not yet retired",
                 (unsigned long long)step, what, ucs_status_string(op->status));
    }
}

/* A recv end's data message that no receive took, if UCX holds one (its step, or -1). */
static long long net_unexpected_step(const gpuring_net_conn_t *net)
{
    ucp_tag_recv_info_t info;

    if (ucp_tag_probe_nb(net->proxy->worker,
                         gpuring_net_tag(net->comm_uid, GPURING_TAG_KIND_DATA, net->net_id, 0),
                         GPURING_TAG_MASK_NOSTEP, 0, &info) == NULL)
        return -1;
    return (long long)(gpuring_net_tag_fields(info.sender_tag).low >> GPURING_CALL_BITS);
}

/* A recv end's first step after `landed` whose message landed while an earlier
 * one's receive is still posted (-1: none).  UCX matches steps in order, but a large
 * message (rendezvous) ends only once its data has moved, after a later small one:
 * such a gap is an earlier message still moving, or one lost below gpuring.  Lock
 * held. */
static long long net_landed_past_gap(const gpuring_net_conn_t *net)
{
    for (uint64_t s = net->landed + 1; s < net->posted; s++) {
        const gpuring_net_op_t *op = &net->data[s % GPURING_NSTEPS];

        if (op->busy && op->step == s && op->done && op->status == UCS_OK) return (long long)s;
    }
    return -1;
}

/* The first message on the worker that no receive took, if it is not one of
 * this end's (then net_unexpected_step names it): its tag's fields, in words. */
static void net_foreign_unexpected(const gpuring_net_conn_t *net, char *buf, size_t len)
{
    ucp_tag_recv_info_t info;
    gpuring_net_tag_fields_t f;

    buf[0] = '\0';
    if (ucp_tag_probe_nb(net->proxy->worker, 0, 0, 0, &info) == NULL) return;
    if ((info.sender_tag & GPURING_TAG_MASK_NOSTEP) ==
        gpuring_net_tag(net->comm_uid, GPURING_TAG_KIND_DATA, net->net_id, 0))
        return;
    f = gpuring_net_tag_fields(info.sender_tag);
    snprintf(buf, len, "; another message waits unmatched on this process's worker (comm uid "
             "%llu, %s, net id %u, low bits 0x%x)",
             (unsigned long long)f.comm_uid, f.kind == GPURING_TAG_KIND_CREDIT ? "credit" : "data",
             f.net_id, f.low);
}

void gpuring_conn_net_describe(const gpuring_conn_t *conn, uint64_t step, char *buf, size_t len)
{
    gpuring_net_conn_t *net = conn != NULL ? conn->net : NULL;
    char op[128], unmatched[64], later[128], foreign[160];
    long long unexpected, past;
    int stuck = 0;

    if (net == NULL || len == 0) {
        if (len > 0) buf[0] = '\0';
        return;
    }
    if (net->detached) { /* (the proxy, finalized, is gone: its lock too) */
        snprintf(buf, len, "proxy: the connection is detached (the proxy was finalized)");
        return;
    }
    if (!gpuring_proxy_lock_for_report(net->proxy, "describing a connection", buf, len))
        return;
    if (net->dir == GPURING_CONN_SEND) {
        const uint64_t tail = GPURING_LOAD_ACQUIRE(&net->ctrl->tail);

        net_op_describe(net, step, op, sizeof(op));
        snprintf(buf, len, "proxy: %stail %llu, sent %llu, completed %llu, credit %llu%s; %s; "
                 "the last pass over it (pass %llu) read tail %llu",
                 net->connected ? "" : "not connected, ", (unsigned long long)tail,
                 (unsigned long long)net->sent, (unsigned long long)net->done,
                 (unsigned long long)net->remote_head, net->failed ? ", failed" : "", op,
                 (unsigned long long)net->seen_pass, (unsigned long long)net->seen_tail);
        /* a step a pass would send at once: are passes running at all? */
        stuck = !net->failed && net->connected && net->sent < tail &&
                net->sent < net->remote_head + GPURING_NSTEPS;
    } else {
        net_op_describe(net, step, op, sizeof(op));
        unexpected = net_unexpected_step(net);
        if (unexpected < 0)
            snprintf(unmatched, sizeof(unmatched), "no message of this end waits unmatched");
        else
            snprintf(unmatched, sizeof(unmatched),
                     "a message of step %lld (low 16 bits) waits unmatched", unexpected);
        past = net_landed_past_gap(net);
        later[0] = '\0';
        if (past >= 0)
            snprintf(later, sizeof(later),
                     "; step %lld landed past it (a large message still moving, or one lost "
                     "below)", past);
        net_foreign_unexpected(net, foreign, sizeof(foreign));
        snprintf(buf, len,
                 "proxy: %sreceives posted below step %llu, landed %llu, head %llu, credited "
                 "%llu%s; %s%s; %s%s",
                 net->connected ? "" : "not connected, ", (unsigned long long)net->posted,
                 (unsigned long long)net->landed,
                 (unsigned long long)GPURING_LOAD_ACQUIRE(&net->ctrl->head),
                 (unsigned long long)net->credited, net->failed ? ", failed" : "", op, later,
                 unmatched, foreign);
    }
    gpuring_proxy_unlock(net->proxy);
    if (stuck) gpuring_proxy_describe_thread(net->proxy, buf, len);
}

void gpuring_conn_net_closing(gpuring_proxy_t *proxy, uint64_t comm_uid)
{
    gpuring_net_conn_t *net;

    if (proxy == NULL || !gpuring_proxy_lock_within(proxy, "a communicator's teardown")) return;
    for (net = proxy->conns; net != NULL; net = net->next) {
        if (net->comm_uid != comm_uid || net->draining) continue;
        net->draining = 1;
        (void)gpuring_net_conn_progress(net); /* the owed credit, now */
    }
    pthread_cond_signal(&proxy->cond); /* the thread finishes what is in flight */
    gpuring_proxy_unlock(proxy);
}

void gpuring_net_conns_settle(gpuring_proxy_t *proxy)
{
    gpuring_net_conn_t *net;

    for (net = proxy->conns; net != NULL; net = net->next) {
        if (net->dir != GPURING_CONN_RECV) continue;
        net->settling = 1; /* (credit_due: any credit owed) */
        (void)gpuring_net_conn_progress(net); /* receives for the released slots, the credit */
        net->settling = 0;
    }
}

/* ---- create / connect -------------------------------------------------------------- */

/*
 * The FIFO's host memory (`bytes`: the ctrl page, then `slots_bytes` of
 * slots, conn.c's few bytes before them in their page included; 0 for
 * GPU-direct), mapped on its own: the device plane registers it with CUDA, so
 * no other object may share its pages.  Slots that fill a huge page start on
 * one (those few bytes into it) and ask for transparent huge pages (the
 * default 8 x 256 KiB slots are one, but for their last few bytes): a
 * same-host peer's UCX reads them with CMA, which pins every page of a step
 * in the kernel, and a 256 KiB step is 64 small pages but an eighth of a huge
 * one (measured in the README's net path table).  Zero-filled, as mmap gives
 * it.
 */
static int net_fifo_map(gpuring_net_conn_t *net, size_t bytes, size_t slots_bytes)
{
    const size_t huge = GPURING_NET_HUGE_PAGE;
    const size_t ctrl = bytes - slots_bytes;
    const size_t len = GPURING_DIV_UP(bytes, GPURING_PAGE) * GPURING_PAGE;
    /* huge slots: room to start them on a huge page boundary, the rest unmapped again */
    const size_t room = slots_bytes >= huge ? huge : 0;
    char *base, *mem;

    base = mmap(NULL, len + room, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return -1;
    mem = base;
    if (room > 0) {
        mem = (char *)(GPURING_DIV_UP((uintptr_t)base + ctrl, huge) * huge) - ctrl;
        if (mem > base) munmap(base, (size_t)(mem - base));
        if (mem < base + room) munmap(mem + len, (size_t)(base + room - mem));
        /* advice only: without THP the slots are small pages, as before */
        (void)madvise(mem + ctrl, slots_bytes / huge * huge, MADV_HUGEPAGE);
    }
    net->mem = mem;
    net->mem_bytes = len;
    return 0;
}

/* The slots in `device`'s memory; only the ctrl page stays in net->mem. */
static gpuring_status_t net_slots_on_device(gpuring_net_conn_t *net, int device)
{
    void *slots = NULL;
    gpuring_device_writes_t writes;

    GPURING_CHECK(gpuring_device_use(device));
    writes = gpuring_device_remote_writes(device);
    if (writes == GPURING_DEVICE_WRITES_UNORDERED) {
        GPURING_ERROR(GPURING_SUBSYS_NET, "net %s conn to rank %d channel %d: GPU %d can neither "
                      "order nor flush GPUDirect RDMA writes; its slots must be host memory",
                      dir_str(net->dir), net->peer, net->channel, device);
        return GPURING_ERR_INVALID;
    }
    GPURING_CHECK(gpuring_device_alloc(GPURING_NSTEPS * net->slot_bytes, &slots));
    net->device = device;
    net->flush = writes == GPURING_DEVICE_WRITES_FLUSH;
    net->slots = slots;
    return GPURING_OK;
}

gpuring_status_t gpuring_conn_net_create(gpuring_proxy_t *proxy, gpuring_conn_t *conn,
                                         gpuring_conn_dir_t dir, int peer, int channel,
                                         size_t slot_bytes, uint64_t comm_uid, uint32_t net_id,
                                         int device, int gpu, gpuring_conn_handle_t *handle_p)
{
    gpuring_net_conn_t *net;
    gpuring_status_t st;
    size_t bytes, slots_bytes;
    int i;

    if (proxy == NULL || conn == NULL || handle_p == NULL || slot_bytes == 0 ||
        (dir != GPURING_CONN_SEND && dir != GPURING_CONN_RECV)) {
        GPURING_ERROR(GPURING_SUBSYS_NET, "invalid arguments to gpuring_conn_net_create");
        return GPURING_ERR_INVALID;
    }
    if (comm_uid > GPURING_TAG_UID_MAX || net_id > GPURING_TAG_NETID_MAX) {
        GPURING_ERROR(GPURING_SUBSYS_NET,
                      "net conn to rank %d channel %d: comm uid %llu or net id %u do not fit "
                      "the tag (%d and %d bits)",
                      peer, channel, (unsigned long long)comm_uid, net_id, GPURING_TAG_UID_BITS,
                      GPURING_TAG_NETID_BITS);
        return GPURING_ERR_INVALID;
    }

    net = calloc(1, sizeof(*net));
    if (net == NULL) return GPURING_ERR_NO_MEMORY;
    net->device = -1;
    /* host staging: ctrl + the slots' lead + slots; GPU-direct: the ctrl page alone */
    bytes = device >= 0 ? GPURING_PAGE
                        : gpuring_conn_fifo_zero_bytes(GPURING_CONN_NET) +
                              gpuring_conn_slots_lead(GPURING_CONN_NET, gpu) +
                              GPURING_NSTEPS * slot_bytes;
    if (device < 0 && bytes < sizeof(gpuring_fifo_ctrl_t) + GPURING_NSTEPS * slot_bytes) {
        GPURING_ERROR(GPURING_SUBSYS_NET, "a net FIFO of %zu bytes is too small for %zu B "
                      "slots", bytes, slot_bytes);
        free(net);
        return GPURING_ERR_INVALID;
    }
    /* host staging: the slots with the bytes before them in their page */
    slots_bytes = device >= 0 ? 0 : bytes - gpuring_conn_fifo_zero_bytes(GPURING_CONN_NET);
    if (net_fifo_map(net, bytes, slots_bytes) != 0) {
        GPURING_ERROR(GPURING_SUBSYS_NET, "cannot map %zu bytes of net slots: %s", bytes,
                      strerror(errno));
        free(net);
        return GPURING_ERR_NO_MEMORY;
    }

    net->proxy = proxy;
    net->dir = dir;
    net->peer = peer;
    net->channel = channel;
    net->slot_bytes = slot_bytes;
    net->comm_uid = comm_uid;
    net->net_id = net_id;
    net->ctrl = (gpuring_fifo_ctrl_t *)net->mem; /* first, as gpuring_conn_attach() has it */
    net->slots = (char *)net->mem + (bytes - GPURING_NSTEPS * slot_bytes);
    for (i = 0; i < GPURING_NSTEPS; i++) net->data[i].net = net;
    net->credit.net = net;
    if (device >= 0) {
        st = net_slots_on_device(net, device);
        if (st != GPURING_OK) {
            gpuring_net_conn_free(net);
            return st;
        }
    }

    gpuring_conn_attach(conn, GPURING_CONN_NET, dir, peer, channel, slot_bytes, net->mem);
    conn->slots = net->slots;
    conn->slots_device = net->device >= 0;
    conn->net = net;

    gpuring_conn_handle_init(conn, handle_p);
    handle_p->net_id = net_id;
    return GPURING_OK;
}

gpuring_status_t gpuring_conn_net_connect(gpuring_proxy_t *proxy, gpuring_conn_t *conn,
                                          const gpuring_conn_handle_t *remote, uint64_t peer_key,
                                          int peer_same_host, const void *peer_addr,
                                          size_t peer_addr_len)
{
    gpuring_net_conn_t *net;
    gpuring_status_t st;

    if (proxy == NULL || conn == NULL || conn->net == NULL || remote == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_NET, "invalid arguments to gpuring_conn_net_connect");
        return GPURING_ERR_INVALID;
    }
    net = conn->net;
    if (net->connected) return GPURING_ERR_INVALID;
    if (remote->type != GPURING_CONN_NET || remote->dir == (int32_t)net->dir ||
        remote->channel != net->channel || remote->slot_bytes != net->slot_bytes ||
        remote->net_id > GPURING_TAG_NETID_MAX) {
        GPURING_ERROR(GPURING_SUBSYS_NET,
                      "net %s conn to rank %d channel %d: the peer's handle does not match "
                      "(type %d dir %d channel %d slot %llu B, net id %u)",
                      dir_str(net->dir), net->peer, net->channel, remote->type, remote->dir,
                      remote->channel, (unsigned long long)remote->slot_bytes, remote->net_id);
        return GPURING_ERR_INVALID;
    }
    net->remote_net_id = remote->net_id;

    if (!gpuring_proxy_lock_within(proxy, "connecting")) return GPURING_ERR_TIMEOUT;
    st = gpuring_proxy_get_ep(proxy, peer_key, peer_same_host, peer_addr, peer_addr_len,
                              net->peer, &net->pe);
    if (st != GPURING_OK) {
        gpuring_proxy_unlock(proxy);
        return st;
    }
    net->connected = 1;
    if (net->dir == GPURING_CONN_RECV) {
        for (; net->posted < GPURING_NSTEPS; net->posted++) post_data_recv(net, net->posted);
    } else {
        post_credit_recv(net);
    }
    gpuring_proxy_register(proxy, net);
    gpuring_proxy_unlock(proxy);

    GPURING_DEBUG(GPURING_SUBSYS_NET,
                  "net %s conn to rank %d channel %d connected: %s, %d x %zu B slots, comm uid "
                  "%llu, net id %u -> %u",
                  dir_str(net->dir), net->peer, net->channel,
                  net->device < 0 ? "host slots"
                  : net->flush    ? "GPU-direct (device slots, RDMA writes flushed)"
                                  : "GPU-direct (device slots)",
                  GPURING_NSTEPS, net->slot_bytes,
                  (unsigned long long)net->comm_uid, net->net_id, net->remote_net_id);
    return GPURING_OK;
}

/* ---- teardown ------------------------------------------------------------------------ */

void gpuring_net_conn_free(gpuring_net_conn_t *net)
{
    if (net->device >= 0 && gpuring_device_use(net->device) == GPURING_OK)
        gpuring_device_free(net->slots);
    munmap(net->mem, net->mem_bytes);
    free(net);
}

static int ops_outstanding(gpuring_net_conn_t *net)
{
    int i, n = 0;

    for (i = 0; i < GPURING_NSTEPS; i++) n += net->data[i].busy && !net->data[i].done;
    return n + (net->credit.busy && !net->credit.done);
}

/* Cancel everything still posted and release what completed.  Lock held. */
static void cancel_all(gpuring_net_conn_t *net, int cancel_sends)
{
    int i;

    for (i = 0; i < GPURING_NSTEPS; i++) {
        gpuring_net_op_t *op = &net->data[i];

        if (op->busy && !op->done && op->req != NULL &&
            (net->dir == GPURING_CONN_RECV || cancel_sends))
            ucp_request_cancel(net->proxy->worker, op->req);
    }
    if (net->credit.busy && !net->credit.done && net->credit.req != NULL &&
        (net->dir == GPURING_CONN_SEND || cancel_sends))
        ucp_request_cancel(net->proxy->worker, net->credit.req);
}

static void release_done(gpuring_net_conn_t *net)
{
    int i;

    for (i = 0; i < GPURING_NSTEPS; i++)
        if (net->data[i].busy && net->data[i].done) op_retire(&net->data[i]);
    if (net->credit.busy && net->credit.done) op_retire(&net->credit);
}

void gpuring_net_orphans_reap(gpuring_proxy_t *proxy)
{
    gpuring_device_saved_t caller = {0, NULL};

    for (gpuring_net_conn_t **pp = &proxy->orphans; *pp != NULL;) {
        gpuring_net_conn_t *net = *pp;

        if (ops_outstanding(net) > 0) {
            pp = &net->next;
            continue;
        }
        release_done(net);
        gpuring_proxy_device_conn_gone(proxy, net); /* UCX is done with its slots */
        *pp = net->next;
        GPURING_DEBUG(GPURING_SUBSYS_NET, "net %s conn to rank %d channel %d: its last UCX "
                      "operations finished after its teardown: its memory freed",
                      dir_str(net->dir), net->peer, net->channel);
        /* (device slots: their GPU made current to free them, the caller's given back) */
        if (net->device >= 0 && !caller.valid) caller = gpuring_device_save();
        gpuring_net_conn_free(net);
    }
    if (caller.valid) gpuring_device_restore(caller);
}

int gpuring_net_conn_detach(gpuring_net_conn_t *net)
{
    gpuring_proxy_t *proxy = net->proxy;
    gpuring_spin_t spin;
    int left;

    cancel_all(net, 1);
    gpuring_spin_init(&spin, 1.0);
    while ((left = ops_outstanding(net)) > 0) {
        if (gpuring_proxy_poll_tick(proxy, &spin) != GPURING_OK)
            break;
    }
    release_done(net);
    net->detached = 1;
    if (left > 0) {
        /* UCX may still touch the operations and the slots: neither it nor they go */
        GPURING_WARN(GPURING_SUBSYS_NET, "net %s conn to rank %d channel %d: %d UCX operations "
                     "did not finish at finalize: its memory is kept to the exit",
                     dir_str(net->dir), net->peer, net->channel, left);
        net->stuck = 1;
    }
    return left;
}

/* Is the connection drained (nothing left to hand over)?  Lock held. */
static int drained(gpuring_net_conn_t *net)
{
    int give_up_remote;

    give_up_remote = net->failed || net_error(net, NULL, 0) != GPURING_OK;
    /* abandoned: no credit is waited for (what is in flight is cancelled), but a
     * send end's steps already in its FIFO -- the abort step -- go out first, and a
     * recv end's refusal */
    if (net->abandoned && net->dir == GPURING_CONN_RECV) {
        /* (as credit_due: a receive cancelled keeps no refusal back) */
        if (net_error(net, NULL, 0) != GPURING_OK || !net_refusing(net)) return 1;
        /* posted, and done (every credit from then on carries it) */
        return net->refused && !(net->credit.busy && !net->credit.done);
    }
    if (net->abandoned && give_up_remote) return 1;

    if (net->dir == GPURING_CONN_SEND) {
        uint64_t tail = GPURING_LOAD_ACQUIRE(&net->ctrl->tail);

        if (net->refused) return 1; /* the receiver gave up: it takes nothing more */
        if (net->done < net->sent) return 0; /* sends in flight */
        if (give_up_remote) return 1;
        if (net->sent < tail || __atomic_load_n(&net->abort_due, __ATOMIC_ACQUIRE)) return 0;
        return net->abandoned || net->remote_head >= net->sent;
    }
    if (net->credit.busy && !net->credit.done) return 0; /* credit in flight */
    if (give_up_remote) return 1;
    return net->credited >= GPURING_LOAD_ACQUIRE(&net->ctrl->head) && !net->credit.busy;
}

void gpuring_conn_net_reland(gpuring_conn_t *conn)
{
    gpuring_net_conn_t *net = conn != NULL ? conn->net : NULL;

    if (net == NULL || net->dir != GPURING_CONN_RECV || net->detached || !net->connected) return;
    /* (not had: the steps land in their slots, as posted) */
    if (!gpuring_proxy_lock_within(net->proxy, "reposting receives (reland)")) return;
    for (uint64_t step = net->landed; step < net->posted && !net->failed; step++) {
        const unsigned slot = (unsigned)(step % GPURING_NSTEPS);
        gpuring_net_op_t *op = &net->data[slot];

        if (!op->busy || op->done || op->at != NULL || op->req == NULL ||
            !net_asked(net, step, op->cap))
            continue;
        /* unmatched: no progress runs under the lock, so nothing matches it before
         * it is posted again (matched already: it lands in its slot, as posted) */
        op->repost = 1;
        ucp_request_cancel(net->proxy->worker, op->req);
        if (op->done && op->status == UCS_ERR_CANCELED) {
            (void)op_retire(op);
            post_data_recv(net, step);
        } else if (op->done) {
            op->repost = 0; /* it had landed after all */
        }
    }
    gpuring_proxy_unlock(net->proxy);
}

/* A receive into the caller's memory not ended yet (lock held): its op, or NULL. */
static gpuring_net_op_t *unland_pending(gpuring_net_conn_t *net)
{
    for (int i = 0; i < GPURING_NSTEPS; i++) {
        gpuring_net_op_t *op = &net->data[i];

        if (op->busy && !op->done && op->at != NULL) return op;
    }
    return NULL;
}

/* Unland without the lock (the proxy is stuck): nothing cancelled, said once. */
static void unland_stuck(const gpuring_net_conn_t *net)
{
    GPURING_WARN(GPURING_SUBSYS_NET, "net recv conn from rank %d channel %d: the failed call's "
                 "receives into its output cannot be cancelled (the proxy is stuck): one still "
                 "posted may write there after the call returned", net->peer, net->channel);
}

/* The recv end of a failed call with zero copy, NULL where nothing is to unland there */
static gpuring_net_conn_t *unland_conn(gpuring_conn_t *conn)
{
    gpuring_net_conn_t *net = conn != NULL ? conn->net : NULL;

    if (net == NULL || net->dir != GPURING_CONN_RECV || net->detached || !net->connected)
        return NULL;
    return net;
}

/* Its asks dropped and its receives into the output cancelled (where the proxy is stuck:
 * said) */
static void unland_cancel(gpuring_net_conn_t *net)
{
    gpuring_proxy_t *proxy = net->proxy;

    /* asks not posted yet stay unposted (no lock: the executor writes them so too,
     * and a stuck proxy must not post them when it goes on) */
    for (int i = 0; i < GPURING_NSTEPS; i++)
        __atomic_store_n(&net->ctrl->land_step[i], 0, __ATOMIC_RELEASE);
    if (!gpuring_proxy_lock_within(proxy, "cancelling receives (unland)")) {
        unland_stuck(net);
        return;
    }
    for (int i = 0; i < GPURING_NSTEPS; i++) {
        const gpuring_net_op_t *op = &net->data[i];

        if (op->busy && !op->done && op->at != NULL && op->req != NULL)
            ucp_request_cancel(proxy->worker, op->req);
    }
    gpuring_proxy_unlock(proxy);
}

void gpuring_conn_net_unland_cancel(gpuring_conn_t *conn)
{
    gpuring_net_conn_t *net = unland_conn(conn);

    if (net != NULL) unland_cancel(net);
}

void gpuring_conn_net_unland_wait(gpuring_conn_t *conn, double *until_p)
{
    gpuring_net_conn_t *net = unland_conn(conn);
    gpuring_proxy_t *proxy;
    gpuring_net_op_t *op;
    gpuring_spin_t spin;
    double timeout;

    if (net == NULL) return;
    proxy = net->proxy;
    timeout = gpuring_proxy_wait_timeout(proxy);
    /* one UCX had matched goes on writing into the caller's memory until it ends: the
     * call returns after it (the lock let go between polls: the proxy thread's passes)
     * -- or once the peer's endpoint failed: nothing more comes from it, and UCX never
     * ends a receive its sender left half sent */
    if (*until_p == 0.0 && timeout > 0) *until_p = gpuring_time_sec() + timeout;
    gpuring_spin_init(&spin, timeout > 0
                                 ? GPURING_MAX(1e-3, *until_p - gpuring_time_sec())
                                 : 0.0 /* (no bound) */);
    for (;;) {
        if (!gpuring_proxy_lock_within(proxy, "waiting for receives into a failed call's "
                                              "output (unland)")) {
            unland_stuck(net);
            return;
        }
        ucp_worker_progress(proxy->worker);
        op = unland_pending(net);
        if (op != NULL && net_peer_failed(net)) {
            GPURING_DEBUG(GPURING_SUBSYS_NET,
                          "net recv conn from rank %d channel %d: step %llu's receive into the "
                          "failed call's output is left to UCX: the peer's endpoint failed, "
                          "nothing more comes from it", net->peer, net->channel,
                          (unsigned long long)op->step);
            op = NULL;
        } else if (op != NULL && gpuring_spin_tick(&spin) != GPURING_OK) {
            GPURING_ERROR(GPURING_SUBSYS_NET,
                          "net recv conn from rank %d channel %d: step %llu's receive into the "
                          "failed call's output at %p did not end within %.0f s of the "
                          "call's cancels: UCX may still write there after the call "
                          "returned", net->peer, net->channel, (unsigned long long)op->step,
                          op->at, timeout);
            op = NULL;
        }
        gpuring_proxy_unlock(proxy);
        if (op == NULL) return;
    }
}

void gpuring_conn_net_abandon(gpuring_conn_t *conn, double flush_s)
{
    if (conn != NULL && conn->net != NULL) {
        conn->net->abandoned = 1;
        conn->net->abandon_flush_s = GPURING_MAX(0.0, flush_s);
        conn->net->abandon_until = gpuring_time_sec() + conn->net->abandon_flush_s;
    }
}

void gpuring_conn_net_quiet(gpuring_conn_t *conn)
{
    if (conn != NULL && conn->net != NULL) __atomic_store_n(&conn->net->quiet, 1, __ATOMIC_RELAXED);
}

void gpuring_conn_net_abort_later(gpuring_conn_t *conn)
{
    if (conn != NULL && conn->net != NULL && conn->net->dir == GPURING_CONN_SEND) {
        conn->net->abort_step = conn->step;
        __atomic_store_n(&conn->net->abort_due, 1, __ATOMIC_RELEASE);
    }
}

gpuring_status_t gpuring_conn_net_destroy(gpuring_proxy_t *proxy, gpuring_conn_t *conn)
{
    gpuring_net_conn_t *net;
    gpuring_spin_t spin;
    gpuring_status_t st = GPURING_OK;
    double timeout;
    long long gap;
    int ok = 0;

    if (conn == NULL || conn->net == NULL) return GPURING_OK;
    net = conn->net;
    if (proxy == NULL) proxy = net->proxy;
    timeout = gpuring_proxy_wait_timeout(proxy);

    if (net->detached || !net->connected) {
        /* never connected, or the proxy is gone: no UCX state left -- but what UCX
         * never finished may still touch the memory (the proxy kept UCX for it) */
        if (net->stuck) goto out_clear;
        goto out_free;
    }

    if (!gpuring_proxy_lock_within(proxy, "a connection's teardown")) goto out_stuck;
    gpuring_proxy_deregister(proxy, net);
    net->draining = 1;
    gpuring_proxy_unlock(proxy);

    /* bounded wait: sends in flight, the final credit both ways (abandoned: the
     * send end's queued steps, for its flush time) */
    gpuring_spin_init(&spin, net->abandoned ? net->abandon_flush_s : timeout);
    for (;;) {
        if (!gpuring_proxy_lock_within(proxy, "a connection's teardown (its last steps and "
                                              "credits)"))
            goto out_stuck;
        if (net->dir == GPURING_CONN_SEND)
            send_progress(net, 0); /* keeps the credit receive posted */
        else
            recv_progress(net, 1); /* posts no new receives */
        ucp_worker_progress(proxy->worker);
        ok = drained(net);
        gpuring_proxy_unlock(proxy);
        if (ok) break;
        if (net->abandoned && net->abandon_flush_s <= 0) { /* no time given: a spin would not end */
            st = GPURING_ERR_TIMEOUT;
            break;
        }
        if (gpuring_spin_tick(&spin) != GPURING_OK) {
            if (net->abandoned && net->dir == GPURING_CONN_RECV)
                GPURING_INFO(GPURING_SUBSYS_NET,
                             "net recv conn from rank %d channel %d: the failed call's "
                             "refusal did not go out in %.1f s: a peer still sending to this "
                             "rank waits out its timeout",
                             net->peer, net->channel, net->abandon_flush_s);
            else if (net->abandoned)
                GPURING_INFO(GPURING_SUBSYS_NET,
                             "net send conn to rank %d channel %d: the failed call's last "
                             "steps did not go out in %.1f s (sent %llu of %llu, %llu "
                             "complete, credit %llu): a peer still in the call waits out "
                             "its timeout",
                             net->peer, net->channel, net->abandon_flush_s,
                             (unsigned long long)net->sent,
                             (unsigned long long)GPURING_LOAD_ACQUIRE(&net->ctrl->tail),
                             (unsigned long long)net->done,
                             (unsigned long long)net->remote_head);
            else
                GPURING_WARN(GPURING_SUBSYS_NET,
                             "net %s conn to rank %d channel %d: teardown timed out after %.1f "
                             "s (sent %llu done %llu credit %llu / landed %llu credited %llu)",
                             dir_str(net->dir), net->peer, net->channel, timeout,
                             (unsigned long long)net->sent, (unsigned long long)net->done,
                             (unsigned long long)net->remote_head,
                             (unsigned long long)net->landed,
                             (unsigned long long)net->credited);
            st = GPURING_ERR_TIMEOUT;
            break;
        }
    }

    /* cancel the pre-posted receives (and, after a timeout or a failure, whatever is left;
     * a refused send end's sends too) */
    if (net->abandoned || (net->dir == GPURING_CONN_SEND && net->refused)) ok = 0;
    if (!gpuring_proxy_lock_within(proxy, "a connection's teardown (cancelling)")) goto out_stuck;
    /* a failed endpoint: a receive UCX matched from it never ends (its sender left it half
     * sent), and cancelled ones end in a pass -- no wait timeout for it */
    if (net_peer_failed(net)) ok = 0;
    gap = net->dir == GPURING_CONN_RECV ? net_landed_past_gap(net) : -1;
    if (gap >= 0)
        GPURING_WARN(GPURING_SUBSYS_NET,
                     "net recv conn from rank %d channel %d: step %lld landed while step %llu's "
                     "receive had not ended: that message was still moving (a large one, "
                     "cut short by the failure) or was lost below gpuring (UCX)",
                     net->peer, net->channel, gap, (unsigned long long)net->landed);
    cancel_all(net, !ok);
    gpuring_proxy_unlock(proxy);
    /* an abandoned end: what is left of the communicator's one deadline (at least a
     * few passes), not a second of its own -- UCX cannot cancel a send, nor a receive it
     * matched to a rendezvous a dead peer left half sent, and a communicator has dozens
     * of ends; cancelled receives complete in a pass or two.  What does not end in time
     * is kept (an orphan) until it does */
    gpuring_spin_init(&spin, ok ? gpuring_proxy_wait_floor(proxy, 1.0)
                             : net->abandoned
                                 ? GPURING_MAX(0.01, net->abandon_until - gpuring_time_sec())
                                 : 1.0);
    for (;;) {
        int left;

        if (!gpuring_proxy_lock_within(proxy, "a connection's teardown (its cancelled "
                                              "operations)"))
            goto out_stuck;
        ucp_worker_progress(proxy->worker);
        left = ops_outstanding(net);
        if (left == 0) {
            release_done(net);
            gpuring_proxy_device_conn_gone(proxy, net); /* UCX is done with its slots */
            gpuring_net_orphans_reap(proxy);            /* (and those of ends gone before) */
        }
        gpuring_proxy_unlock(proxy);
        if (left == 0) break;
        if (gpuring_spin_tick(&spin) != GPURING_OK) {
            /* UCX may still write into the slots: keep them until it is done */
            GPURING_WARN(GPURING_SUBSYS_NET,
                         "net %s conn to rank %d channel %d: %d UCX operations did not finish; "
                         "its memory is kept until they do",
                         dir_str(net->dir), net->peer, net->channel, left);
            if (!gpuring_proxy_lock_within(proxy, "a connection's teardown (keeping its "
                                                  "memory)"))
                goto out_stuck;
            release_done(net);
            gpuring_proxy_adopt_orphan(proxy, net);
            gpuring_proxy_unlock(proxy);
            st = GPURING_ERR_TIMEOUT; /* the caller's other ends wait no more */
            goto out_clear;
        }
    }
    GPURING_DEBUG(GPURING_SUBSYS_NET,
                  "net %s conn to rank %d channel %d destroyed (%llu steps, %llu of them zero "
                  "copy, %llu credits, at most %llu steps in flight)",
                  dir_str(net->dir), net->peer, net->channel,
                  (unsigned long long)(net->dir == GPURING_CONN_SEND ? net->sent : net->landed),
                  (unsigned long long)net->zcopy, (unsigned long long)net->credits,
                  (unsigned long long)net->inflight_max);

out_free:
    gpuring_net_conn_free(net);
    goto out_clear;
out_stuck:
    /* the proxy is stuck (logged): its pass, or UCX once it goes on, may still touch
     * the connection -- still registered (finalize closes it), or with operations
     * in flight (UCX then stays to the exit) -- so its memory is left, and the
     * caller's other ends wait no more */
    if (!net->registered) __atomic_store_n(&proxy->leaked, 1, __ATOMIC_RELEASE);
    st = GPURING_ERR_TIMEOUT;
out_clear:
    conn->net = NULL;
    conn->slots = NULL;
    conn->ctrl = NULL;
    return st;
}
