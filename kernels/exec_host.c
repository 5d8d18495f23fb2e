/*
 * exec_host.c -- the host executor (see exec_host.h).
 *
 * One operation of a program: wait until the recv slot is posted (tail) and
 * the send slot is free (head), then
 *     value = [recv slot] (op) [input block]      (whichever are present)
 * written to [output block] and/or [send slot]; or, for ACC operations,
 *     [output block] (op)= [recv slot], [send slot] = [recv slot];
 * or, for STASH operations, [scratch row] = [send slot] = the block; FOLD
 * operations reduce the scratch rows in order into the output.
 * then publish head on the recv connection and tail on the send connection.
 */
#include "kernels/exec_host.h"

#include <string.h>

#include "proxy/proxy.h"

static inline char *conn_slot(const gpuring_conn_t *conn)
{
    return conn->slots + (conn->step % GPURING_NSTEPS) * conn->slot_bytes;
}

/* Can operation `s` run now without blocking? */
static inline int exec_op_ready(const gpuring_exec_channel_t *ch, const gpuring_step_t *s)
{
    if ((s->flags & GPURING_PRIM_RECV) &&
        GPURING_LOAD_ACQUIRE(&ch->recv->ctrl->tail) <= ch->recv->step) {
        return 0;
    }
    if ((s->flags & GPURING_PRIM_SEND) &&
        GPURING_LOAD_ACQUIRE(&ch->send->ctrl->head) + GPURING_NSTEPS <= ch->send->step) {
        return 0;
    }
    return 1;
}

/* Row `row` of the scratch at the step's offset: rows span the whole call. */
static inline char *exec_scratch(const gpuring_exec_args_t *a, int row, const gpuring_step_t *s)
{
    return (char *)a->scratch + ((size_t)row * a->count + s->off) * gpuring_type_size(a->type);
}

/* output = row 0 (op) row 1 (op) ... (op) row n-1: the same on every rank */
static void exec_fold(const gpuring_exec_args_t *a, const gpuring_exec_channel_t *ch,
                      const gpuring_step_t *s)
{
    char *dst = (char *)a->recvbuf + s->off * gpuring_type_size(a->type);

    memcpy(dst, exec_scratch(a, 0, s), s->count * gpuring_type_size(a->type));
    for (int r = 1; r < ch->prog.nranks; r++) {
        gpuring_reduce_host(dst, dst, exec_scratch(a, r, s), s->count, a->type, a->op);
    }
}

static void exec_op_run(const gpuring_exec_args_t *a, gpuring_exec_channel_t *ch,
                        const gpuring_step_t *s)
{
    const size_t es = gpuring_type_size(a->type);
    const size_t bytes = s->count * es;
    const char *in = (s->flags & GPURING_PRIM_RECV) ? conn_slot(ch->recv) : NULL;
    const char *src = (s->flags & GPURING_PRIM_SRC) ? (const char *)a->sendbuf + s->off * es : NULL;
    char *dst = (s->flags & (GPURING_PRIM_DST | GPURING_PRIM_ACC)) ? (char *)a->recvbuf + s->off * es
                                                                  : NULL;
    char *out = (s->flags & GPURING_PRIM_SEND) ? conn_slot(ch->send) : NULL;
    /* the first output gets the value, the second a copy of it */
    char *first = dst != NULL ? dst : out;
    char *second = dst != NULL ? out : NULL;

    if (s->flags & GPURING_PRIM_FOLD) {
        exec_fold(a, ch, s);
        return;
    }
    if (bytes > 0 && (s->flags & GPURING_PRIM_STASH)) {
        const char *v = in != NULL ? in : src;
        memcpy(exec_scratch(a, s->stash, s), v, bytes);
        if (out != NULL) memcpy(out, v, bytes);
    } else if (bytes > 0 && (s->flags & GPURING_PRIM_ACC)) {
        if (out != NULL) memcpy(out, in, bytes);
        gpuring_reduce_host(dst, dst, in, s->count, a->type, a->op);
    } else if (bytes > 0) {
        if (in != NULL && src != NULL) {
            gpuring_reduce_host(first, in, src, s->count, a->type, a->op);
        } else if (first != (in != NULL ? in : src)) {
            memcpy(first, in != NULL ? in : src, bytes); /* in place: already there */
        }
        if (second != NULL) {
            memcpy(second, first, bytes);
        }
    }
    if (in != NULL) {
        GPURING_STORE_RELEASE(&ch->recv->ctrl->head, ++ch->recv->step);
    }
    if (out != NULL) {
        if (ch->send->type == GPURING_CONN_NET) {
            gpuring_conn_net_set_step_bytes(ch->send, ch->send->step, bytes);
        }
        GPURING_STORE_RELEASE(&ch->send->ctrl->tail, ++ch->send->step);
    }
}

/* Name what a stalled channel waits for, and for whom. */
static void exec_report_stall(const gpuring_exec_args_t *a)
{
    for (int c = 0; c < a->nchannels; c++) {
        const gpuring_exec_channel_t *ch = &a->channels[c];
        gpuring_step_t s;

        if (ch->next_op >= ch->prog.nops) continue;
        gpuring_prog_op(&ch->prog, ch->next_op, &s);
        if ((s.flags & GPURING_PRIM_RECV) &&
            GPURING_LOAD_ACQUIRE(&ch->recv->ctrl->tail) <= ch->recv->step) {
            GPURING_ERROR(GPURING_SUBSYS_KERNEL,
                          "allreduce timed out after %.0f s: channel %d waits for step %llu "
                          "from rank %d (%s connection, op %llu of %llu)",
                          a->timeout, c, (unsigned long long)ch->recv->step, ch->recv->peer,
                          ch->recv->type == GPURING_CONN_NET ? "net" : "shm",
                          (unsigned long long)ch->next_op, (unsigned long long)ch->prog.nops);
        } else {
            GPURING_ERROR(GPURING_SUBSYS_KERNEL,
                          "allreduce timed out after %.0f s: channel %d waits for rank %d to "
                          "free a slot for step %llu (%s connection, op %llu of %llu)",
                          a->timeout, c, ch->send->peer, (unsigned long long)ch->send->step,
                          ch->send->type == GPURING_CONN_NET ? "net" : "shm",
                          (unsigned long long)ch->next_op, (unsigned long long)ch->prog.nops);
        }
    }
}

gpuring_status_t gpuring_exec_host_run(gpuring_exec_args_t *a)
{
    gpuring_spin_t spin;
    int remaining = 0;

    for (int c = 0; c < a->nchannels; c++) {
        a->channels[c].next_op = 0;
        remaining += a->channels[c].prog.nops > 0;
    }
    gpuring_spin_init(&spin, a->timeout);
    while (remaining > 0) {
        int progressed = 0;

        /* advance every channel as far as its FIFOs allow */
        for (int c = 0; c < a->nchannels; c++) {
            gpuring_exec_channel_t *ch = &a->channels[c];
            gpuring_step_t s;

            while (ch->next_op < ch->prog.nops) {
                gpuring_prog_op(&ch->prog, ch->next_op, &s);
                if (!exec_op_ready(ch, &s)) break;
                exec_op_run(a, ch, &s);
                progressed = 1;
                if (++ch->next_op == ch->prog.nops) remaining--;
            }
        }
        if (progressed) {
            gpuring_spin_init(&spin, a->timeout);
            continue;
        }
        /* nothing could move: is the proxy in trouble, or are we stuck? */
        if (a->proxy != NULL) {
            char msg[256];
            gpuring_status_t st = gpuring_proxy_error(a->proxy, msg, sizeof(msg));
            if (st != GPURING_OK) {
                GPURING_ERROR(GPURING_SUBSYS_KERNEL, "allreduce aborted: %s", msg);
                return st;
            }
        }
        if (gpuring_spin_tick(&spin) != GPURING_OK) {
            exec_report_stall(a);
            return GPURING_ERR_TIMEOUT;
        }
    }
    return GPURING_OK;
}
