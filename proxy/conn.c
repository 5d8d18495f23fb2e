/*
 * conn.c -- what every transport shares: the memory layout of one FIFO
 * (the ctrl counters on their own page, the LL slots but on NET (whole
 * pages), then NSTEPS slots -- in host memory 16 bytes into a page (conn.h),
 * in device memory (IPC) on one, when the slot size is a multiple of a page)
 * and how a connection end is laid over it.
 */
#include "proxy/conn.h"

#include <stdio.h>
#include <string.h>

#define GPURING_CTRL_BYTES 4096 /* a page */

/* proxy/proxy.h's, for the stall reports of NET ends; weak: the CUDA executor's
 * GPU test links this file without the proxy (and has no NET ends) */
void gpuring_conn_net_describe(const gpuring_conn_t *conn, uint64_t step, char *buf, size_t len)
    __attribute__((weak));

/* The LL slots, whole pages: the simple slots' page starts after them. */
static size_t conn_ll_bytes(gpuring_conn_type_t type)
{
    return type == GPURING_CONN_NET
               ? 0
               : GPURING_DIV_UP(GPURING_NSTEPS * GPURING_LL_SLOT_BYTES, GPURING_CTRL_BYTES) *
                     GPURING_CTRL_BYTES;
}

size_t gpuring_conn_slots_lead(gpuring_conn_type_t type, int gpu)
{
    return type == GPURING_CONN_IPC || gpu ? 0 : GPURING_SLOTS_SKEW;
}

size_t gpuring_conn_fifo_zero_bytes(gpuring_conn_type_t type)
{
    return GPURING_CTRL_BYTES + conn_ll_bytes(type);
}

size_t gpuring_conn_fifo_bytes(gpuring_conn_type_t type, size_t slot_bytes)
{
    return gpuring_conn_fifo_zero_bytes(type) + gpuring_conn_slots_lead(type, 0) +
           GPURING_NSTEPS * slot_bytes;
}

void gpuring_conn_attach(gpuring_conn_t *conn, gpuring_conn_type_t type, gpuring_conn_dir_t dir,
                         int peer, int channel, size_t slot_bytes, void *fifo)
{
    memset(conn, 0, sizeof(*conn));
    conn->type = type;
    conn->dir = dir;
    conn->peer = peer;
    conn->channel = channel;
    conn->slot_bytes = slot_bytes;
    conn->ctrl = (gpuring_fifo_ctrl_t *)fifo;
    conn->ll = conn_ll_bytes(type) > 0 ? (char *)fifo + GPURING_CTRL_BYTES : NULL;
    conn->slots =
        (char *)fifo + gpuring_conn_fifo_zero_bytes(type) + gpuring_conn_slots_lead(type, 0);
    conn->step = 0;
}

void gpuring_conn_handle_init(const gpuring_conn_t *conn, gpuring_conn_handle_t *handle_p)
{
    memset(handle_p, 0, sizeof(*handle_p));
    handle_p->peer = conn->peer;
    handle_p->channel = conn->channel;
    handle_p->dir = conn->dir;
    handle_p->type = conn->type;
    handle_p->slot_bytes = conn->slot_bytes;
}

void gpuring_conn_report_check(const gpuring_conn_t *conn, int channel, gpuring_status_t st,
                               uint64_t got_bytes, size_t want_bytes, size_t count,
                               const char *type_name, const char *coll, const char *executor,
                               gpuring_conn_t *const send[], int nsend)
{
    if (st == GPURING_ERR_REMOTE) {
        char sends[1024];
        size_t used = 0;

        sends[0] = '\0';
        for (int i = 0; i < nsend && used + 1 < sizeof(sends); i++) {
            if (send[i] == NULL) continue;
            snprintf(sends + used, sizeof(sends) - used, " to rank %d next step %llu",
                     send[i]->peer, (unsigned long long)send[i]->step);
            /* did the last step posted go out? */
            if (send[i]->step > 0)
                gpuring_conn_report_net(send[i], send[i]->step - 1, " (", ")", sends,
                                        sizeof(sends));
            used = strlen(sends);
        }
        GPURING_ERROR(GPURING_SUBSYS_KERNEL,
                      "%s abandoned: rank %d gave up on the call (its log says why); "
                      "channel %d step %llu%s; this rank's sends on the channel:%s",
                      coll, conn->peer, channel, (unsigned long long)conn->step, executor,
                      used > 0 ? sends : " none");
    } else if (st != GPURING_OK) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL,
                      "%s mismatch: rank %d sent a step of another call (channel %d "
                      "step %llu: %llu bytes%s, where this rank's call of %zu %s expects %zu "
                      "bytes): the ranks passed different counts, datatypes or ops, or made "
                      "their calls in a different order%s",
                      coll, conn->peer, channel, (unsigned long long)conn->step,
                      (unsigned long long)got_bytes,
                      got_bytes == want_bytes ? " of another call id" : "", count, type_name,
                      want_bytes, executor);
    }
}

void gpuring_conn_report_refused(const gpuring_conn_t *conn, int channel, const char *coll,
                                 const char *executor)
{
    GPURING_ERROR(GPURING_SUBSYS_KERNEL,
                  "%s abandoned: rank %d gave up on the call (its log says why) and reads "
                  "no more of this rank's steps; channel %d, waiting to send step %llu%s",
                  coll, conn->peer, channel, (unsigned long long)conn->step, executor);
}

void gpuring_conn_report_net(const gpuring_conn_t *conn, uint64_t step, const char *open,
                             const char *close, char *buf, size_t len)
{
    size_t n = strlen(buf);

    if (conn->type != GPURING_CONN_NET || gpuring_conn_net_describe == NULL ||
        n + strlen(open) + 1 >= len)
        return;
    n += (size_t)snprintf(buf + n, len - n, "%s", open);
    gpuring_conn_net_describe(conn, step, buf + n, len - n);
    n += strlen(buf + n);
    snprintf(buf + n, len - n, "%s", close);
}

void gpuring_ll_describe_header(uint32_t flag0, uint32_t flag1, char *buf, size_t len)
{
    if (flag0 == 0 && flag1 == 0) {
        snprintf(buf, len, "its LL slot was never written");
    } else if (flag0 == flag1) {
        snprintf(buf, len, "its LL slot holds step %llu's header",
                 (unsigned long long)flag0 - 1ull);
    } else {
        snprintf(buf, len, "its LL slot's header units are of steps %lld and %lld",
                 (long long)flag0 - 1ll, (long long)flag1 - 1ll);
    }
}
