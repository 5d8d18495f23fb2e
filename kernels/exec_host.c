/*
 * exec_host.c -- the host executor (see exec_host.h).
 *
 * One operation of a program: wait until every recv connection in the
 * operation's mask has its slot posted (tail) and every send connection has
 * a free slot (head), then
 *     value = [input block] (op) [recv slots...]     (whichever are present)
 * written to [output block] and/or every [send slot]; or, for ACC operations,
 *     [output block] (op)= [recv slot], [send slot] = [recv slot];
 * or, for STASH operations, [scratch row] = [send slot] = the block; FOLD
 * operations reduce the scratch rows in order into the output.  Then publish
 * head on each recv connection and tail on each send connection.
 */
#include "kernels/exec_host.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "proxy/proxy.h"

/* idle passes between two looks at the clock (the timeout) */
#define GPURING_EXEC_CLOCK_EVERY 64

/* each peer _i (unsigned) whose bit is set in _mask, lowest first: a step
 * names one or two peers of GPURING_MAX_PEERS, and an 8-byte call walks its
 * masks a dozen times */
#define EXEC_FOR_PEERS(_mask, _i)                                          \
    for (unsigned _m##_i = (_mask), _i = 0;                                \
         _m##_i != 0 && ((_i = (unsigned)__builtin_ctz(_m##_i)), 1); _m##_i &= _m##_i - 1)

/* Does `mask` name more than one peer?  (no popcount instruction on the
 * x86-64 baseline: a library call) */
static inline int exec_several(unsigned mask)
{
    return (mask & (mask - 1)) != 0;
}

/* Does operation `s` post or consume a step of a NET connection? */
static inline int exec_op_uses_net(const gpuring_exec_channel_t *ch, const gpuring_step_t *s)
{
    EXEC_FOR_PEERS(s->recv_mask, i) {
        if (ch->recv[i]->type == GPURING_CONN_NET) return 1;
    }
    EXEC_FOR_PEERS(s->send_mask, i) {
        if (ch->send[i]->type == GPURING_CONN_NET) return 1;
    }
    return 0;
}

/* Has operation `s` a connection for every peer it names?  (the CUDA executor
 * checks the same when it walks the programs) */
static int exec_op_connected(const gpuring_exec_channel_t *ch, const gpuring_step_t *s)
{
    EXEC_FOR_PEERS(s->recv_mask, i) {
        if (ch->recv[i] == NULL) return 0;
    }
    EXEC_FOR_PEERS(s->send_mask, i) {
        if (ch->send[i] == NULL) return 0;
    }
    return 1;
}

/* Has recv end `r`'s next step landed? */
static inline int exec_landed(const gpuring_exec_args_t *a, const gpuring_conn_t *r)
{
    return gpuring_exec_ll(a, r) ? gpuring_conn_ll_landed(r)
                         : GPURING_LOAD_ACQUIRE(&r->ctrl->tail) > r->step;
}

/* Can operation `s` run now without blocking? */
static inline int exec_op_ready(const gpuring_exec_args_t *a, const gpuring_exec_channel_t *ch,
                                const gpuring_step_t *s)
{
    EXEC_FOR_PEERS(s->recv_mask, i) {
        if (!exec_landed(a, ch->recv[i])) return 0;
    }
    EXEC_FOR_PEERS(s->send_mask, i) {
        if (!gpuring_conn_slot_free(ch->send[i])) return 0;
    }
    return 1;
}

/* Operation `s` cannot run: does it wait for a slot whose receiver gave up on the
 * call (gpuring_conn_refused), or for a step whose sender gave up with its FIFO full
 * (gpuring_conn_abandoned)?  GPURING_ERR_REMOTE, logged, if so.  Or for a step its
 * sender posted in the other protocol (gpuring_conn_other_protocol)?
 * GPURING_ERR_MISMATCH, logged. */
static gpuring_status_t exec_op_never_ready(const gpuring_exec_args_t *a,
                                            gpuring_exec_channel_t *ch, const gpuring_step_t *s)
{
    EXEC_FOR_PEERS(s->recv_mask, i) {
        const gpuring_conn_t *r = ch->recv[i];
        gpuring_status_t st = GPURING_OK;
        uint64_t got = 0;

        if (gpuring_conn_abandoned(r) && !exec_landed(a, r)) { /* (in this order) */
            st = GPURING_ERR_REMOTE;
        } else if (gpuring_conn_other_protocol(r, gpuring_exec_ll(a, r), &got)) {
            st = GPURING_ERR_MISMATCH;
        } else {
            continue;
        }
        gpuring_conn_report_check(r, (int)(ch - a->channels), st, got,
                                  s->count * gpuring_type_size(a->type), a->count,
                                  gpuring_type_name(a->type), gpuring_exec_coll_name(a), "",
                                  ch->send, GPURING_MAX_PEERS);
        return st;
    }
    EXEC_FOR_PEERS(s->send_mask, i) {
        gpuring_conn_t *w = ch->send[i];

        if (gpuring_conn_slot_free(w) || !gpuring_conn_refused(w)) continue;
        gpuring_conn_report_refused(w, (int)(ch - a->channels), gpuring_exec_coll_name(a), "");
        return GPURING_ERR_REMOTE;
    }
    return GPURING_OK;
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

    gpuring_copy_host(dst, exec_scratch(a, 0, s), s->count * gpuring_type_size(a->type));
    for (int r = 1; r < ch->prog.nranks; r++) {
        gpuring_reduce_host(dst, dst, exec_scratch(a, r, s), s->count, a->type, a->op);
    }
}

/* The value of a plain operation: input (op) every received step, built in
 * `home`; with home NULL (a single input: nothing to reduce) the input itself.
 * With `stream` (a destination written around the cache: a streamed output
 * or a NET send slot; not home), the last reduction also writes it there, in
 * the same pass (gpuring_reduce_host_stream), and *streamed_p
 * says so.  Returns where the value is. */
static const char *exec_value(const gpuring_exec_args_t *a, const gpuring_step_t *s,
                              const char *const in[], const char *src, char *home,
                              char *stream, int *streamed_p)
{
    const size_t bytes = s->count * gpuring_type_size(a->type);
    const char *acc = src; /* where the value so far is, NULL if nothing yet */

    *streamed_p = 0;
    EXEC_FOR_PEERS(s->recv_mask, i) {
        if (acc == NULL) {
            acc = in[i];
            continue;
        }
        if (stream != NULL && (s->recv_mask >> i) == 1u) /* the last one */
            *streamed_p = gpuring_reduce_host_stream(stream, home, acc, in[i], s->count,
                                                     a->type, a->op);
        if (!*streamed_p) gpuring_reduce_host(home, acc, in[i], s->count, a->type, a->op);
        acc = home;
    }
    if (home != NULL && acc != home) gpuring_copy_host(home, acc, bytes); /* in place: there */
    return home != NULL ? home : acc;
}

/* A NET connection's send slot is read by its transport only -- the peer
 * process's single copy on one host (CMA), a NIC's DMA between hosts --
 * never by this rank.  A plain store reads each line first, and the line is
 * typically in the peer's cache still, from its read of this slot's previous
 * step: every store of the step waits for a cross-core invalidation.  So a
 * step of at least a->net_stream_bytes is written into it around the cache
 * (non-temporal stores, fenced before the step is posted).  Small steps stay
 * plain: the transport copies them itself (eager), from this core's cache.
 * GPURING_NET_STREAM_BYTES (exec_host.h) says what was measured.
 *
 * Is a step of `bytes` through send end `w` written around the cache? */
static inline int exec_send_streamed(const gpuring_exec_args_t *a, const gpuring_conn_t *w,
                                     size_t bytes)
{
    return w->type == GPURING_CONN_NET && bytes >= a->net_stream_bytes &&
           !gpuring_exec_ll(a, w);
}

/* `bytes` of `src` into send end `w`'s slot `out`; *streamed_p set when the
 * stores went around the cache (a fence is then due before the post) */
static void exec_copy_send(const gpuring_exec_args_t *a, const gpuring_conn_t *w, char *out,
                           const char *src, size_t bytes, int *streamed_p)
{
    if (exec_send_streamed(a, w, bytes)) {
        gpuring_copy_host_stream(out, src, bytes);
        *streamed_p = 1;
    } else {
        gpuring_copy_host(out, src, bytes);
    }
}

/* A large call's output, written around the cache (non-temporal stores): it
 * is not read again during the call, and a write that first reads the line
 * (what a plain store costs) is a third of the memory traffic of a step. */
static void exec_copy_out(const gpuring_exec_args_t *a, char *dst, const char *src, size_t bytes)
{
    if (a->stream_out) {
        gpuring_copy_host_stream(dst, src, bytes);
    } else {
        gpuring_copy_host(dst, src, bytes);
    }
}

/* Where operation `s` finds each received step and builds each sent one: the
 * slot itself, or for an LL step the staging (unpacked here; packed when
 * posted).  Fails only on an LL unit of another step. */
static gpuring_status_t exec_op_buffers(const gpuring_exec_args_t *a,
                                        const gpuring_exec_channel_t *ch,
                                        const gpuring_step_t *s, const char *in[], char *out[])
{
    const size_t bytes = s->count * gpuring_type_size(a->type);
    char *stage = (char *)a->ll_stage;

    EXEC_FOR_PEERS(s->recv_mask, i) {
        const gpuring_conn_t *r = ch->recv[i];

        in[i] = r->type == GPURING_CONN_NET ? gpuring_conn_landed_at(r)
                                             : gpuring_conn_slot(r, r->step);
        if (gpuring_exec_ll(a, r)) {
            gpuring_status_t st = gpuring_conn_ll_read(r, stage + i * GPURING_LL_STEP_BYTES, bytes);
            if (st != GPURING_OK) {
                gpuring_conn_report_check(r, (int)(ch - a->channels), st, bytes, bytes,
                                          a->count, gpuring_type_name(a->type), gpuring_exec_coll_name(a),
                                          " (LL unit)", ch->send, GPURING_MAX_PEERS);
                return st;
            }
            in[i] = stage + i * GPURING_LL_STEP_BYTES;
        }
    }
    EXEC_FOR_PEERS(s->send_mask, i) {
        out[i] = gpuring_exec_ll(a, ch->send[i])
                     ? stage + GPURING_MAX_PEERS * GPURING_LL_STEP_BYTES
                     : gpuring_conn_slot(ch->send[i], ch->send[i]->step);
    }
    return GPURING_OK;
}

/* Are the landed steps of operation `s` steps of this call?  (logs why not) */
static gpuring_status_t exec_op_check(const gpuring_exec_args_t *a,
                                      const gpuring_exec_channel_t *ch, const gpuring_step_t *s)
{
    const size_t bytes = s->count * gpuring_type_size(a->type);

    EXEC_FOR_PEERS(s->recv_mask, i) {
        const gpuring_conn_t *r = ch->recv[i];
        uint64_t got = 0;
        gpuring_status_t st = gpuring_exec_ll(a, r)
                                  ? gpuring_conn_ll_check(r, bytes, a->call, &got)
                                  : gpuring_fifo_check(r->ctrl, r->step, bytes, a->call, &got);

        if (st != GPURING_OK) {
            gpuring_conn_report_check(r, (int)(ch - a->channels), st, got, bytes, a->count,
                                      gpuring_type_name(a->type), gpuring_exec_coll_name(a), "",
                                      ch->send, GPURING_MAX_PEERS);
            return st;
        }
    }
    return GPURING_OK;
}

/* ---- zero copy on NET connections (exec_host.h) ---- */

/* Would operation `s` only copy its one received step into the output? */
static inline int exec_lands_in_output(const gpuring_exec_channel_t *ch, const gpuring_step_t *s)
{
    return (s->flags & ~(unsigned)GPURING_PRIM_SEND) == (GPURING_PRIM_RECV | GPURING_PRIM_DST) &&
           s->recv_mask != 0 && !exec_several(s->recv_mask) && s->count > 0 &&
           gpuring_prog_out_once(&ch->prog);
}

/* Recv peer i's steps up to `target` not looked at yet (NSTEPS past the one
 * being consumed, whose receive is not posted yet; at the call's start, its
 * first NSTEPS): each that an operation of this call only copies into the
 * output is asked to land there -- unless UCX's copy into it would be a skewed
 * one (reduce.h): from the sender's slot, at the page offset of this end's
 * slot for the step (both ends lay their slots out alike).  Such a step stays
 * in the slot, which the CMA read fills at full speed, and is copied out
 * (measured: 1 MiB over 2 virtual nodes into malloc's buffers 2x faster). */
static void exec_land_ahead(const gpuring_exec_args_t *a, gpuring_exec_channel_t *ch, int i,
                            uint64_t target)
{
    const size_t es = gpuring_type_size(a->type);
    gpuring_conn_t *r = ch->recv[i];
    gpuring_step_t s;

    while (ch->land_op[i] < ch->prog.nops && ch->land_step[i] <= target) {
        gpuring_prog_op(&ch->prog, ch->land_op[i]++, &s);
        if (!(s.recv_mask & (1u << i))) continue;
        if (exec_lands_in_output(ch, &s)) { /* (an output: recvbuf is not NULL) */
            char *dst = (char *)a->recvbuf + s.off * es;
            if (!gpuring_copy_host_skewed(dst, gpuring_conn_slot(r, ch->land_step[i])))
                gpuring_conn_land_at(r, ch->land_step[i], dst, s.count * es);
        }
        ch->land_step[i]++;
    }
}

/* Is the one step operation `s` received already in its output (landed there)? */
static inline int exec_landed_in_output(const gpuring_step_t *s, const char *const in[],
                                        const char *dst)
{
    EXEC_FOR_PEERS(s->recv_mask, i) {
        if (in[i] == dst) return 1;
    }
    return 0;
}

static gpuring_status_t exec_op_run(const gpuring_exec_args_t *a, gpuring_exec_channel_t *ch,
                                    const gpuring_step_t *s)
{
    const size_t es = gpuring_type_size(a->type);
    const size_t bytes = s->count * es;
    const char *src = (s->flags & GPURING_PRIM_SRC) ? (const char *)a->sendbuf + s->in_off * es
                      : (s->flags & GPURING_PRIM_OUT_SRC) ? (const char *)a->recvbuf + s->off * es
                                                          : NULL;
    char *dst = (s->flags & (GPURING_PRIM_DST | GPURING_PRIM_ACC)) ? (char *)a->recvbuf + s->off * es
                                                                  : NULL;
    char *first = dst;
    const char *in[GPURING_MAX_PEERS];
    char *out[GPURING_MAX_PEERS];
    int fence = 0; /* a send slot was written around the cache */
    gpuring_status_t st;

    if (s->flags & GPURING_PRIM_FOLD) {
        exec_fold(a, ch, s);
        return GPURING_OK;
    }
    st = exec_op_buffers(a, ch, s, in, out);
    if (st != GPURING_OK) return st;
    if (first == NULL) {
        EXEC_FOR_PEERS(s->send_mask, i) {
            if (first == NULL) first = out[i];
        }
    }
    if (bytes > 0 && (s->flags & GPURING_PRIM_STASH)) {
        /* gather, one peer: keep the block, forward it unchanged */
        const char *v = (s->flags & GPURING_PRIM_RECV) ? in[0] : src;
        gpuring_copy_host(exec_scratch(a, s->stash, s), v, bytes);
        if (s->flags & GPURING_PRIM_SEND) exec_copy_send(a, ch->send[0], out[0], v, bytes, &fence);
    } else if (bytes > 0 && (s->flags & GPURING_PRIM_ACC)) {
        /* gather, one peer: fold the block in, forward it unchanged */
        if (s->flags & GPURING_PRIM_SEND)
            exec_copy_send(a, ch->send[0], out[0], in[0], bytes, &fence);
        gpuring_reduce_host(dst, dst, in[0], s->count, a->type, a->op);
    } else if (bytes > 0) {
        /* the value is built in the output, else where it is sent from; a
         * streamed destination (a NET send slot, else a streamed output)
         * gets it last, from the reduction that builds the value, in the
         * same pass, or by a copy */
        const int reduces = exec_several(s->recv_mask) || (src != NULL && s->recv_mask != 0);
        char *home = first, *stream = NULL;
        const char *v;
        int streamed = 0;

        EXEC_FOR_PEERS(s->send_mask, i) {
            if (stream == NULL && exec_send_streamed(a, ch->send[i], bytes)) stream = out[i];
        }
        if (stream != NULL) {
            /* a value that is only copied stays where it is */
            home = !reduces ? NULL : dst != NULL ? dst : stream;
            if (home == stream) stream = NULL;
        } else if (a->stream_out && dst != NULL && !exec_landed_in_output(s, in, dst)) {
            home = NULL;
            EXEC_FOR_PEERS(s->send_mask, i) {
                if (home == NULL) home = out[i];
            }
            if (home == NULL && reduces) home = dst;
            if (home != dst) stream = dst;
        }
        v = exec_value(a, s, in, src, home, stream, &streamed);
        fence |= streamed && stream != dst;
        EXEC_FOR_PEERS(s->send_mask, i) {
            if (out[i] != v && !(streamed && out[i] == stream))
                exec_copy_send(a, ch->send[i], out[i], v, bytes, &fence);
        }
        if (dst != NULL && dst != v && !(streamed && dst == stream))
            exec_copy_out(a, dst, v, bytes);
    }
#if defined(__x86_64__)
    if (fence) _mm_sfence(); /* the streamed slots' stores before their posts */
#else
    (void)fence; /* plain stores there (gpuring_copy_host_stream) */
#endif
    EXEC_FOR_PEERS(s->recv_mask, i) {
        gpuring_conn_t *r = ch->recv[i];

        if (a->zcopy && r->type == GPURING_CONN_NET)
            exec_land_ahead(a, ch, i, r->step + GPURING_NSTEPS);
        GPURING_STORE_RELEASE(&r->ctrl->head, ++r->step);
    }
    EXEC_FOR_PEERS(s->send_mask, i) {
        if (gpuring_exec_ll(a, ch->send[i])) {
            gpuring_conn_ll_post(ch->send[i], out[i], bytes, a->call);
        } else {
            gpuring_conn_post(ch->send[i], bytes, a->call);
        }
    }
    return GPURING_OK;
}

/* A failed call: tell the ranks this one sends to (proxy/conn.h's abandon
 * step) and those it receives from (refused: one waiting for a slot this
 * rank will not free fails at once; a NET end's proxy sends it on).  A NET
 * send end whose slots are all in flight (their completions not in yet)
 * goes to the proxy, which posts the step once one completes; a full shm
 * one is marked abandoned (its receiver fails once it has read every step
 * in it). */
void gpuring_exec_host_abandon(gpuring_exec_args_t *a)
{
    int posted = 0;

    for (int c = 0; c < a->nchannels; c++) {
        gpuring_exec_channel_t *ch = &a->channels[c];

        for (int i = 0; i < GPURING_MAX_PEERS; i++) {
            gpuring_conn_t *w = ch->send[i];

            if (ch->recv[i] != NULL) {
                gpuring_conn_refuse(ch->recv[i]);
                posted |= ch->recv[i]->type == GPURING_CONN_NET;
            }
            if (w == NULL) continue;
            if (gpuring_conn_post_abort(w)) {
                posted = 1;
            } else if (w->type == GPURING_CONN_NET) {
                gpuring_conn_net_abort_later(w);
                posted = 1;
            } else {
                gpuring_conn_abandon_full(w);
            }
        }
    }
    if (posted && a->proxy != NULL) gpuring_proxy_progress(a->proxy);
}

/* What recv end `r`, waiting for its step, finds in its FIFO (for the stall report):
 * the tail the sender published, or for an LL step the step its slot's header is of. */
static void exec_recv_seen(const gpuring_exec_args_t *a, const gpuring_conn_t *r, char *buf,
                           size_t len)
{
    if (gpuring_exec_ll(a, r)) {
        const uint64_t *row = gpuring_conn_ll_slot(r);

        gpuring_ll_describe_header((uint32_t)(__atomic_load_n(&row[0], __ATOMIC_ACQUIRE) >> 32),
                                   (uint32_t)(__atomic_load_n(&row[1], __ATOMIC_ACQUIRE) >> 32),
                                   buf, len);
    } else {
        snprintf(buf, len, "tail %llu",
                 (unsigned long long)GPURING_LOAD_ACQUIRE(&r->ctrl->tail));
    }
    gpuring_conn_report_net(r, r->step, "; ", "", buf, len);
}

/* Name what a stalled channel waits for, and for whom, and what the FIFO holds. */
static void exec_report_stall(const gpuring_exec_args_t *a)
{
    char seen[512];

    for (int c = 0; c < a->nchannels; c++) {
        const gpuring_exec_channel_t *ch = &a->channels[c];
        gpuring_step_t s;

        if (ch->next_op >= ch->prog.nops) continue;
        gpuring_prog_op(&ch->prog, ch->next_op, &s);
        EXEC_FOR_PEERS(s.recv_mask, i) {
            const gpuring_conn_t *r = ch->recv[i];
            if (exec_landed(a, r)) continue;
            exec_recv_seen(a, r, seen, sizeof(seen));
            GPURING_ERROR(GPURING_SUBSYS_KERNEL,
                          "%s timed out after %.0f s: channel %d waits for step %llu "
                          "from rank %d (%s connection, %s protocol, op %llu of %llu; %s)",
                          gpuring_exec_coll_name(a), a->timeout, c, (unsigned long long)r->step, r->peer,
                          r->type == GPURING_CONN_NET ? "net" : "shm",
                          gpuring_exec_ll(a, r) ? "LL" : "simple",
                          (unsigned long long)ch->next_op, (unsigned long long)ch->prog.nops, seen);
        }
        EXEC_FOR_PEERS(s.send_mask, i) {
            gpuring_conn_t *w = ch->send[i];
            if (gpuring_conn_slot_free(w)) continue;
            snprintf(seen, sizeof(seen), "head %llu", (unsigned long long)w->head_seen);
            /* the step not yet freed */
            gpuring_conn_report_net(w, w->head_seen, "; ", "", seen, sizeof(seen));
            GPURING_ERROR(GPURING_SUBSYS_KERNEL,
                          "%s timed out after %.0f s: channel %d waits for rank %d to "
                          "free a slot for step %llu (%s connection, op %llu of %llu; %s)",
                          gpuring_exec_coll_name(a), a->timeout, c, w->peer, (unsigned long long)w->step,
                          w->type == GPURING_CONN_NET ? "net" : "shm",
                          (unsigned long long)ch->next_op, (unsigned long long)ch->prog.nops,
                          seen);
        }
    }
}

void gpuring_exec_host_start(gpuring_exec_args_t *a)
{
    a->status = GPURING_OK;
    a->idle_since = 0.0;
    a->idle_polls = 0;
    a->late_since = 0.0;
    for (int c = 0; c < a->nchannels; c++) {
        gpuring_exec_channel_t *ch = &a->channels[c];

        for (int i = 0; i < GPURING_MAX_PEERS; i++) {
            gpuring_conn_t *r = ch->recv[i];

            ch->land_op[i] = 0;
            ch->land_step[i] = r != NULL ? r->step : 0;
            if (!a->zcopy || r == NULL || r->type != GPURING_CONN_NET) continue;
            /* the call's first NSTEPS steps: their receives are posted already */
            exec_land_ahead(a, ch, i, r->step + GPURING_NSTEPS - 1);
            gpuring_conn_net_reland(r);
        }
        a->channels[c].next_op = 0;
        a->channels[c].step_op = UINT64_MAX;
        if (a->ll && (a->ll_stage == NULL || a->channels[c].prog.chunk *
                                                     gpuring_type_size(a->type) >
                                                 GPURING_LL_STEP_BYTES)) {
            GPURING_ERROR(GPURING_SUBSYS_KERNEL, "LL call without staging or with steps "
                          "over %d B (channel %d): a planning bug", GPURING_LL_STEP_BYTES, c);
            a->status = GPURING_ERR_INVALID;
        }
    }
}

int gpuring_exec_host_progress(gpuring_exec_args_t *a, int *done_p)
{
    int progressed = 0, done = 1;

    /* advance every channel as far as its FIFOs allow */
    for (int c = 0; c < a->nchannels; c++) {
        gpuring_exec_channel_t *ch = &a->channels[c];
        const gpuring_step_t *s = &ch->step;

        while (ch->next_op < ch->prog.nops) {
            if (ch->step_op != ch->next_op) { /* once per operation, not per poll */
                gpuring_prog_op(&ch->prog, ch->next_op, &ch->step);
                ch->step_op = ch->next_op;
                if (!exec_op_connected(ch, s)) {
                    GPURING_ERROR(GPURING_SUBSYS_KERNEL, "channel %d op %llu names a peer "
                                  "without a connection (recv mask 0x%x, send mask 0x%x): a "
                                  "planning bug", c, (unsigned long long)ch->next_op,
                                  s->recv_mask, s->send_mask);
                    a->status = GPURING_ERR_INVALID;
                    *done_p = 0;
                    return progressed;
                }
            }
            if (!exec_op_ready(a, ch, s)) {
                const gpuring_status_t never = exec_op_never_ready(a, ch, s);

                if (never == GPURING_OK) break;
                a->status = never;
                *done_p = 0;
                return progressed;
            }
            a->status = exec_op_check(a, ch, s);
            if (a->status == GPURING_OK) a->status = exec_op_run(a, ch, s);
            if (a->status != GPURING_OK) {
                *done_p = 0;
                return progressed;
            }
            ch->next_op++;
            progressed = 1;
            /* the step goes out (or its slot is credited) while we compute the next */
            if (a->proxy != NULL && exec_op_uses_net(ch, s)) gpuring_proxy_post(a->proxy);
        }
        done &= ch->next_op == ch->prog.nops;
    }
    *done_p = done;
    return progressed;
}

/* A failed call with zero copy: nothing may land in its output after it
 * returns (the receives asked there are cancelled; those under way waited for,
 * within one wait timeout for all of them). */
static void exec_unland(gpuring_exec_args_t *a)
{
    double until = 0.0;

    for (int wait = 0; wait < 2; wait++) { /* every one's cancelled, then each waited for */
        for (int c = 0; c < a->nchannels; c++) {
            for (int i = 0; i < GPURING_MAX_PEERS; i++) {
                gpuring_conn_t *r = a->channels[c].recv[i];

                if (r == NULL || r->type != GPURING_CONN_NET) continue;
                if (wait) gpuring_conn_net_unland_wait(r, &until);
                else gpuring_conn_net_unland_cancel(r);
            }
        }
    }
}

gpuring_status_t gpuring_exec_net_error(const gpuring_exec_args_t *a, char *msg, size_t len)
{
    for (int c = 0; c < a->nchannels; c++) {
        for (int i = 0; i < GPURING_MAX_PEERS; i++) {
            const gpuring_conn_t *ends[2] = {a->channels[c].send[i], a->channels[c].recv[i]};

            for (int e = 0; e < 2; e++) {
                gpuring_status_t st;

                if (ends[e] == NULL || ends[e]->type != GPURING_CONN_NET) continue;
                if ((st = gpuring_conn_net_error(ends[e], msg, len)) != GPURING_OK) return st;
            }
        }
    }
    return GPURING_OK;
}

/* The end of a call, however it ended: its streamed output stores before the
 * caller's, and a failed call's abandon steps.  Returns 1 (ended). */
static int exec_host_end(gpuring_exec_args_t *a)
{
#if defined(__x86_64__)
    if (a->stream_out) _mm_sfence();
#endif
    if (a->status != GPURING_OK) {
        gpuring_exec_host_abandon(a);
        if (a->zcopy) exec_unland(a);
    }
    return 1;
}

int gpuring_exec_host_test(gpuring_exec_args_t *a, int *moved_p)
{
    int done = 0, moved = 0;

    *moved_p = 0;
    if (a->status != GPURING_OK) return exec_host_end(a); /* start refused it */
    moved = gpuring_exec_host_progress(a, &done);
    if (a->status != GPURING_OK || done) return exec_host_end(a);
    if (!moved && a->proxy != NULL) {
        char msg[256];

        /* move the NET steps ourselves (a pass covers every communicator's connections:
         * what it moves may be another call's, so it tells the caller's spin only, not
         * this call's idle clock); has a connection of this call failed? */
        *moved_p = gpuring_proxy_progress(a->proxy);
        if (a->idle_polls % GPURING_EXEC_CLOCK_EVERY == 0 && /* (as often as the clock) */
            (a->status = gpuring_exec_net_error(a, msg, sizeof(msg))) != GPURING_OK) {
            GPURING_ERROR(GPURING_SUBSYS_KERNEL, "%s aborted: %s", gpuring_exec_coll_name(a),
                          msg);
            return exec_host_end(a);
        }
    }
    if (moved) {
        a->idle_since = 0.0;
        a->idle_polls = 0;
#if defined(__x86_64__)
        /* its output stores streamed around the cache are weakly ordered: out of this
         * thread's write-combining buffers before the next pass, which another thread
         * may run (a non-blocking call's worker and MPI threads take turns) and end */
        if (a->stream_out) _mm_sfence();
#endif
    } else if (++a->idle_polls % GPURING_EXEC_CLOCK_EVERY == 0) {
        const double now = a->timeout > 0 ? gpuring_time_sec() : 0.0;

        /* a rank of this host that makes no call any more (its communicator failed), or
         * another call under this one's number */
        a->status = gpuring_arrivals_stop(a->arrivals, a->call_seq);
        if (a->status != GPURING_OK) return exec_host_end(a);
        if (a->timeout <= 0) {
            /* (no clock: the wait is unbounded) */
        } else if (a->idle_since == 0.0) {
            a->idle_since = now;
        } else if (now - a->idle_since > a->timeout) {
            /* a rank of this host that has not made the call yet: waited for */
            a->status = gpuring_arrivals_excuse(a->arrivals, a->call_seq, a->timeout, &a->late_since);
            if (a->status == GPURING_OK) {
                a->idle_since = now;
            } else {
                exec_report_stall(a);
                return exec_host_end(a);
            }
        }
    }
    *moved_p |= moved;
    return 0;
}

gpuring_status_t gpuring_exec_host_wait(gpuring_exec_args_t *a)
{
    int moved, idle = 0;

    while (!gpuring_exec_host_test(a, &moved)) {
        if (moved) {
            idle = 0;
        } else if (++idle > a->spin_polls) { /* a short spin before yielding */
            idle = 0;
            gpuring_wait_progress(); /* the MPI library's other operations */
            sched_yield();
        }
    }
    return a->status;
}

gpuring_status_t gpuring_exec_host_run(gpuring_exec_args_t *a)
{
    gpuring_exec_host_start(a);
    return gpuring_exec_host_wait(a);
}
