/*
 * exec_cuda.cu -- the CUDA executor (kernels/exec_cuda.h).
 *
 * One kernel per call, one block per channel.  A block runs its channel's
 * program op by op (gpuring_prog_op, the same pure function as the host
 * executor), with the FIFO contract of proxy/conn.h:
 *
 *   thread 0   wait: every recv in the op's mask has tail > step, every send
 *              has head + NSTEPS > step (volatile loads, polling the
 *              host-mapped abort flag now and then), then a system fence so
 *              the slots are read/written after the counters were seen;
 *              check every step received (its call id and byte count)
 *   barrier
 *   all        compute (one function per flag family, below)
 *   barrier
 *   thread 0   system fence (every thread's slot and output writes, made
 *              visible to thread 0 by the barrier, are ordered before the
 *              counters), then head = ++step on each recv, tail = ++step on
 *              each send, then the channel's progress counter (next op)
 *
 * On the connections where the call uses the LL protocol (args->ll, and the
 * connection has LL slots: not NET) a recv waits for its step's header
 * instead of tail, a send writes its header right after the first barrier,
 * and the compute is exec_ll_reduce_copy: every thread waits for the flags
 * of its own units and stores its own with the step's flag, so no tail and
 * no fence for them (see "the LL protocol" below).
 *
 * Step counters live in shared memory, start from the connections' `step`
 * values (kernel parameter) and are only written by thread 0 between the
 * two barriers' far sides.  The host never reads them back: it walks the
 * programs itself (exec_cuda_walk, the same rules) to know the final steps.
 *
 * The compute of one op, as exec_host.c's exec_op_run:
 *   plain   value = [input] (op) recv slot (op) ...   (peer order, left to right)
 *           written to [output] and every send slot   -- exec_reduce_copy
 *   ACC     output (op)= recv slot; send slot = recv slot   -- exec_accumulate
 *   STASH   scratch row = send slot = recv slot or input    -- exec_reduce_copy
 *   FOLD    output = row 0 (op) row 1 ... (op) row n-1      -- exec_fold
 * Each is a fused loop: every element is read from all inputs and written
 * to all outputs by one thread, so an output may alias an input (in place).
 * 16-byte packs where every pointer shares its offset modulo 16, else
 * element by element; the packs EXEC_UNROLL per thread per trip, all loads
 * issued before the first use (below); the per-element operators are
 * reduce_dev.cuh's.
 *
 * The host side validates (every connection device-reachable, see exec_cuda.h), launches
 * with cudaLaunchKernel, polls cudaStreamQuery under a gpuring_spin_t that
 * restarts whenever a channel's progress counter moves, and on timeout sets
 * the abort flag, waits briefly for the kernel to leave, and reports what
 * each unfinished channel was waiting for (the kernel records it on abort).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime.h>

#include "kernels/cuda_check.h"
#include "kernels/device.h"
#include "kernels/dev_hooks.cuh"
#include "kernels/exec_cuda.h"
#include "kernels/reduce_dev.cuh"

/*
 * The proxy, while NET connections are in use: the waiting host thread runs
 * its passes (the kernel's steps go out without a hand-off to the progress
 * thread, which backs off while passes run; GPU-direct slots stay the
 * thread's: gpuring_proxy_progress declines them) and polls the call's NET
 * connections for a failure (exec_host.c); a failed call's NET send end
 * with every slot taken is handed to it (gpuring_conn_net_abort_later).
 * Weak references: test/gpu/test_exec_cuda links this file without the
 * proxy (and never sets args->proxy; it stands in for the hand-over); in
 * the component they resolve to the proxy's definitions (proxy/proxy.h).
 */
extern "C" int gpuring_proxy_progress(struct gpuring_proxy *proxy) __attribute__((weak));
extern "C" gpuring_status_t gpuring_exec_net_error(const gpuring_exec_args_t *args, char *msg,
                                                   size_t len) __attribute__((weak));
extern "C" void gpuring_conn_net_abort_later(gpuring_conn_t *conn) __attribute__((weak));

#define EXEC_CUDA_ABORT_POLLS 64      /* FIFO polls between reads of the abort flag */
/* ops between a channel's reads of it outside its waits: one whose steps keep coming
 * waits too little to read it there (a rank behind its peers finds every step in and
 * every slot free), and would run its program out -- writing an output its host gave
 * back to the application -- past EXEC_CUDA_ABORT_WAIT_SEC.  One read of host memory
 * per 64 ops, where each op already writes its progress there (exec_publish). */
#define EXEC_CUDA_ABORT_OPS 64
/* a wait every thread runs (an LL pair's) reads the host's flag after as many polls,
 * then only every EXEC_CUDA_ABORT_POLLS_LONG: a block's threads spinning on a late
 * peer would otherwise send a stream of reads over PCIe */
#define EXEC_CUDA_ABORT_POLLS_LONG 4096
#define EXEC_CUDA_ABORT_WAIT_SEC 1.0  /* after abort: how long the kernel gets to leave */
#define EXEC_CUDA_POOL 64             /* concurrent calls per process */

#define EXEC_FOR_PEERS(_mask, _i) \
    for (int _i = 0; _i < GPURING_MAX_PEERS; _i++) if ((_mask) & (1u << _i))

/* ---- what the kernel gets ------------------------------------------------------ */
typedef struct exec_cuda_conn {
    char *slots;                        /* device-accessible */
    char *ll;                           /* its LL slots (device-accessible); NULL: none (NET) */
    volatile gpuring_fifo_ctrl_t *ctrl; /* device-accessible */
    uint64_t step;                      /* the connection's step at launch */
    uint64_t slot_bytes;
} exec_cuda_conn_t;

typedef struct exec_cuda_chan {
    gpuring_prog_t prog;
    exec_cuda_conn_t send[GPURING_MAX_PEERS];
    exec_cuda_conn_t recv[GPURING_MAX_PEERS];
} exec_cuda_chan_t;

/* why a channel stopped early: kind << 8 | peer (waiting when the host aborted; or the
 * recv step it found was of another call, or one its sender abandoned; or the receiver
 * of a send waiting for a slot refused the call; or -- the LL direct kernel, its own
 * rank -- it started after its host had aborted the call, and wrote no output) */
enum {
    EXEC_WAIT_RECV = 1,
    EXEC_WAIT_SEND = 2,
    EXEC_STOP_MISMATCH = 3,
    EXEC_STOP_ABANDONED = 4,
    EXEC_STOP_REFUSED = 5,
    EXEC_STOP_LATE = 6
};

/* what a waiting channel last saw (exec_cuda_status_t.seen), for the stall report:
 * a simple recv the tail, a send the head; an LL recv the flags of the two units it
 * waited on (header or data), first << 32 | second, EXEC_SEEN_LL_DATA set for data */
#define EXEC_SEEN_LL_DATA (1ull << 63)
#define EXEC_SEEN_FLAGS(u0, u1) ((uint64_t)(uint32_t)((u0) >> 32) << 32 | (uint32_t)((u1) >> 32))

/* host-mapped, one per call in flight (a slab entry, see the pool below) */
typedef struct exec_cuda_status {
    volatile int abort;                                  /* host -> kernel */
    volatile uint32_t wait[GPURING_EXEC_CUDA_MAX_CHANNELS];     /* kernel, on abort or stop */
    volatile uint64_t progress[GPURING_EXEC_CUDA_MAX_CHANNELS]; /* kernel: next op */
    volatile uint64_t got_bytes;                                /* kernel: a mismatched step's */
    volatile uint64_t seen[GPURING_EXEC_CUDA_MAX_CHANNELS];     /* kernel, on abort: EXEC_SEEN */
} exec_cuda_status_t;

#define EXEC_CUDA_STATUS_STRIDE 1024 /* bytes per slab entry */

typedef struct exec_cuda_desc {
    const char *sendbuf;
    char *recvbuf;
    char *scratch;
    size_t count;               /* elements of the whole call: scratch row length */
    exec_cuda_status_t *status; /* device pointer of the call's status entry */
    uint64_t call;              /* gpuring_call_id (proxy/conn.h), masked */
    int ll;                     /* the LL protocol on every connection that has it */
    int nchannels;
    exec_cuda_chan_t ch[GPURING_EXEC_CUDA_MAX_CHANNELS];
} exec_cuda_desc_t;

static_assert(sizeof(exec_cuda_status_t) <= EXEC_CUDA_STATUS_STRIDE, "status entry too large");
/* kernel parameters: 4 KiB, or 32 KiB since CUDA 12.1 (Volta and newer) */
#if CUDART_VERSION >= 12010
static_assert(sizeof(exec_cuda_desc_t) <= 32764, "exec_cuda_desc_t exceeds the parameter space");
#else
static_assert(sizeof(exec_cuda_desc_t) <= 4096, "exec_cuda_desc_t exceeds the parameter space");
#endif

/* ---- device: the FIFO protocol (thread 0) ------------------------------------------ */
/*
 * Why system-scope fences (fence.sc.sys), once per operation per block, on
 * every connection kind.  The pattern is message passing: slot writes ->
 * release fence -> tail store; tail load -> acquire fence -> slot reads (and
 * the same with head for slot reuse).  Under the PTX memory model the two
 * fences synchronise only if their scope includes both threads:
 *  - NET ends: the proxy thread on the host reads size[] and the slots after
 *    the tail: only .sys includes a CPU thread.
 *  - IPC ends to a rank on another GPU (one rank per GPU, the normal
 *    deployment, NVLink or PCIe peer access): the peer's block runs on
 *    another device; .gpu (__threadfence) covers only threads of this GPU,
 *    so .sys is required there too (NCCL posts with fence.acq_rel.sys).
 *  - SHM ends (mapped host memory): the peer may be a host executor.
 * Only IPC ends whose peer shares this GPU (ranks under MPS) could use
 * __threadfence(); a connection does not record where its peer runs, and
 * that case is a test setup, so it is not special-cased.  The cost is one
 * fence by thread 0 per slot step (hundreds of KiB moved by 512 threads),
 * not per element; the bandwidth of the steps is what the unrolled pack
 * loops below address.  A lighter fence.acq_rel.sys would also be correct
 * (no store-buffering pattern: each side only reads the other's counter
 * before writing the slots that counter protects) but needs inline PTX,
 * which the CPU runtime cannot compile; unmeasured either way.
 */
/* ---- device: the LL protocol (proxy/conn.h) ------------------------------------------ */
/*
 * On a connection where this call uses LL (exec_ll: exec_host.h's
 * gpuring_exec_ll), a step is not announced by tail: every 8-byte unit of
 * the LL slot carries the step's flag next to its 4 data bytes, written and
 * read with one 64-bit volatile access.  The block moves 16-byte pairs of
 * units, 8 data bytes each: thread t the pairs t, t + nth, ...
 *   sender    thread 0 waits for a free slot (head, as simple) and the block
 *             agrees (the first barrier); thread 0 writes the header (call
 *             id, byte count: exec_ll_header) and every thread stores its
 *             own pairs, all at once: no barrier, no fence, no tail.
 *   receiver  thread 0 waits for the header's two units to carry the flag,
 *             checks it (gpuring_step_check) and the block agrees on the
 *             result as for a simple step (the first barrier); then each
 *             thread waits for its own pairs' flags (exec_ll_pair_wait) and
 *             uses the data at once, from registers (exec_ll_reduce_copy).
 *             head is published as in the simple protocol.
 * So a receiver never waits on data it was not sent: a step whose header
 * says another byte count or call stops the block before any thread waits
 * for a unit.  The header goes first, not last as the host sender writes it
 * (release order, for host receivers): a device plane connection has a
 * kernel at both ends, whose threads each check their own units.  A thread
 * that gave up on its units (the host's abort) stores nothing; the block
 * then abandons the call, whose abort header (exec_abandon) replaces the
 * step's header: a receiver that has not read it stops at it, one whose
 * threads already wait for the step's units finds it there (each thread
 * looks as often as at the host's abort), so neither waits for its timeout.
 * No system fence orders LL data: each unit carries its own validity.  The
 * fences of exec_wait and exec_publish are there for simple connections,
 * and skipped by an operation that has none (NCCL's LL primitives read
 * head and the flags with volatile accesses alone).  A pair is two 8-byte
 * accesses, not one 16-byte one: that needs inline PTX, which the CPU
 * runtime cannot compile (DESIGN.md: no #ifdef beyond the two hooks).
 */
#define EXEC_LL_PAIR_BYTES 8 /* data bytes of a pair of units */

static __device__ __forceinline__ bool exec_ll(const exec_cuda_desc_t &d, const exec_cuda_conn_t &c)
{
    return d.ll && c.ll != NULL;
}

/* The LL slot of `step` on connection c: its header units, then the data units. */
static __device__ __forceinline__ volatile uint64_t *exec_ll_row(const exec_cuda_conn_t &c,
                                                                  uint64_t step)
{
    return reinterpret_cast<volatile uint64_t *>(c.ll + (step % GPURING_NSTEPS) *
                                                             GPURING_LL_SLOT_BYTES);
}

/* The header of an LL step: byte count, then call id (gpuring_conn_ll_header's order). */
static __device__ __forceinline__ void exec_ll_header(volatile uint64_t *row, uint64_t bytes,
                                                      uint64_t call, uint32_t flag)
{
    row[1] = gpuring_ll_unit((uint32_t)bytes, flag);
    row[0] = gpuring_ll_unit((uint32_t)(call & GPURING_CALL_MASK), flag);
}

/*
 * The abandon of an LL step (exec_abandon) over the header the step may
 * already carry, under the same flag: call id GPURING_CALL_ABORT, then (after
 * a system fence) 0 bytes -- the reverse of exec_ll_header's order, so that a
 * receiver that read the step's call id and then the abort's byte count
 * (a mismatch, read from two headers) finds the abort at a second look at
 * the call id (exec_wait); and a receiver already waiting for the step's
 * data units finds it there too (exec_ll_pair_wait).
 */
static __device__ __forceinline__ void exec_ll_abort_header(volatile uint64_t *row,
                                                            uint32_t flag)
{
    row[0] = gpuring_ll_unit((uint32_t)GPURING_CALL_ABORT, flag);
    __threadfence_system();
    row[1] = gpuring_ll_unit(0, flag);
}

/* Does `row` hold the abandon of the LL step of this flag (exec_ll_abort_header)? */
static __device__ __forceinline__ bool exec_ll_abandoned(const volatile uint64_t *row,
                                                         uint32_t flag)
{
    return row[0] == gpuring_ll_unit((uint32_t)GPURING_CALL_ABORT, flag);
}

/* Has the header of the LL step of this flag landed in `row`?  Its units in *hdr_p. */
static __device__ __forceinline__ bool exec_ll_landed(const volatile uint64_t *row,
                                                      uint32_t flag, uint64_t *hdr_p)
{
    hdr_p[0] = row[0];
    hdr_p[1] = row[1];
    return (uint32_t)(hdr_p[0] >> 32) == flag && (uint32_t)(hdr_p[1] >> 32) == flag;
}

/* A stop recorded for channel (or block) c, the host's to read while the kernel runs:
 * its detail (seen, got_bytes) stored first, visible before the word that says why */
static __device__ void exec_stop(exec_cuda_status_t *st, int c, unsigned word)
{
    __threadfence_system();
    st->wait[c] = word;
}

/* A send of op s waiting for a slot whose receiver refused the call (proxy/conn.h):
 * recorded as a stop the host reports; false if none. */
static __device__ bool exec_refused(const exec_cuda_chan_t *ch, const gpuring_step_t &s,
                                    const uint64_t *sstep, exec_cuda_status_t *st, int c)
{
    EXEC_FOR_PEERS(s.send_mask, i) {
        if (ch->send[i].ctrl->refused && ch->send[i].ctrl->head + GPURING_NSTEPS <= sstep[i]) {
            exec_stop(st, c, (EXEC_STOP_REFUSED << 8) | (unsigned)i);
            return true;
        }
    }
    return false;
}

/* Has recv i's step rstep landed: its LL header (units in hdr), or tail past it? */
static __device__ __forceinline__ bool exec_recv_landed(const exec_cuda_desc_t &d,
                                                        const exec_cuda_chan_t *ch, int i,
                                                        uint64_t rstep, uint64_t *hdr)
{
    if (!exec_ll(d, ch->recv[i])) return ch->recv[i].ctrl->tail > rstep;
    return exec_ll_landed(exec_ll_row(ch->recv[i], rstep), gpuring_ll_flag(rstep), hdr);
}

/* A recv waiting on connection i whose sender gave up with every slot taken
 * (proxy/conn.h: abandoned), and whose step is not there at a second look
 * after the mark was seen (the sender marks after its last step): recorded as
 * a stop the host reports; false otherwise. */
static __device__ bool exec_abandoned(const exec_cuda_desc_t &d, const exec_cuda_chan_t *ch,
                                      int i, uint64_t rstep, exec_cuda_status_t *st, int c)
{
    uint64_t hdr[2];

    if (!ch->recv[i].ctrl->abandoned) return false;
    __threadfence_system(); /* acquire: the mark, then the second look */
    if (exec_recv_landed(d, ch, i, rstep, hdr)) return false;
    exec_stop(st, c, (EXEC_STOP_ABANDONED << 8) | (unsigned)i);
    return true;
}

/* A recv waiting on connection i whose sender posted the step in the other protocol
 * (proxy/conn.h's gpuring_conn_other_protocol: it planned its call otherwise, and the
 * step waited for never comes): recorded as a mismatch stop the host reports (the
 * step's byte count in got_bytes); false otherwise.  An abandon step, in both
 * protocols with the LL header first (exec_abandon), is not one. */
static __device__ bool exec_other_protocol(const exec_cuda_desc_t &d, const exec_cuda_chan_t *ch,
                                           int i, uint64_t rstep, exec_cuda_status_t *st, int c)
{
    const exec_cuda_conn_t &r = ch->recv[i];
    const uint32_t flag = gpuring_ll_flag(rstep);
    const volatile uint64_t *row;
    uint64_t hdr[2], got;

    if (r.ll == NULL) return false; /* simple only (NET) */
    row = exec_ll_row(r, rstep);
    if (exec_ll(d, r)) {
        if (r.ctrl->tail <= rstep) return false;
        __threadfence_system(); /* acquire: tail, then a second look at the header */
        if (exec_ll_landed(row, flag, hdr)) return false; /* an abandon's */
        got = r.ctrl->size[rstep % GPURING_NSTEPS];
    } else {
        if (!exec_ll_landed(row, flag, hdr) || exec_ll_abandoned(row, flag)) return false;
        got = (uint32_t)hdr[1];
    }
    st->got_bytes = got;
    exec_stop(st, c, (EXEC_STOP_MISMATCH << 8) | (unsigned)i);
    return true;
}

/*
 * Wait until op s may run; 0 if it must not: the host aborted (the reason
 * is recorded), a step received is not one of this call's `bytes`-byte
 * steps of call d.call, a send's receiver refused the call (exec_refused)
 * or a recv's sender gave up with its FIFO full (exec_abandoned) or posted
 * the step in the other protocol (exec_other_protocol) -- these looked at as
 * often as the host's abort, while any of the op's waits
 * lasts; all recorded as a stop the host reports.  A recv waits for tail
 * (simple) or its LL header; a send for head (both).
 */
static __device__ int exec_wait(const exec_cuda_desc_t &d, const exec_cuda_chan_t *ch,
                                const gpuring_step_t &s, const uint64_t *rstep,
                                const uint64_t *sstep, exec_cuda_status_t *st, int c,
                                uint64_t bytes)
{
    uint64_t hdr[GPURING_MAX_PEERS][2]; /* LL recvs: the header's units */
    unsigned polls = 0;
    bool simple = false;

    EXEC_FOR_PEERS(s.recv_mask, i) {
        const bool ll = exec_ll(d, ch->recv[i]);

        while (!exec_recv_landed(d, ch, i, rstep[i], hdr[i])) {
            GPURING_DEV_POLL_PAUSE();
            if (++polls % EXEC_CUDA_ABORT_POLLS != 0) continue;
            if (exec_refused(ch, s, sstep, st, c) || exec_abandoned(d, ch, i, rstep[i], st, c) ||
                exec_other_protocol(d, ch, i, rstep[i], st, c))
                return 0;
            if (st->abort) {
                st->seen[c] = ll ? EXEC_SEEN_FLAGS(hdr[i][0], hdr[i][1]) : ch->recv[i].ctrl->tail;
                exec_stop(st, c, (EXEC_WAIT_RECV << 8) | (unsigned)i);
                return 0;
            }
        }
        simple |= !ll;
    }
    EXEC_FOR_PEERS(s.send_mask, i) {
        while (ch->send[i].ctrl->head + GPURING_NSTEPS <= sstep[i]) {
            GPURING_DEV_POLL_PAUSE();
            if (++polls % EXEC_CUDA_ABORT_POLLS != 0) continue;
            if (exec_refused(ch, s, sstep, st, c)) return 0;
            if (st->abort) {
                st->seen[c] = ch->send[i].ctrl->head;
                exec_stop(st, c, (EXEC_WAIT_SEND << 8) | (unsigned)i);
                return 0;
            }
        }
        simple |= !exec_ll(d, ch->send[i]);
    }
    /* acquire: slot accesses come after the counters were seen (simple slots) */
    if (simple) __threadfence_system();
    EXEC_FOR_PEERS(s.recv_mask, i) { /* each landed step is one of this call's */
        uint64_t got_bytes = 0;
        gpuring_status_t chk;

        if (exec_ll(d, ch->recv[i])) {
            got_bytes = (uint32_t)hdr[i][1];
            chk = gpuring_step_check((uint32_t)hdr[i][0], got_bytes, bytes, d.call);
            /* the step's call id and its abandon's byte count (exec_ll_abort_header)? */
            if (chk == GPURING_ERR_MISMATCH) {
                __threadfence_system(); /* acquire: the byte count read, then the call id */
                if (exec_ll_abandoned(exec_ll_row(ch->recv[i], rstep[i]), gpuring_ll_flag(rstep[i])))
                    chk = GPURING_ERR_REMOTE;
            }
        } else {
            chk = gpuring_fifo_check(ch->recv[i].ctrl, rstep[i], bytes, d.call, &got_bytes);
        }
        if (chk == GPURING_OK) continue;
        if (chk == GPURING_ERR_MISMATCH) st->got_bytes = got_bytes;
        exec_stop(st, c,
                  ((chk == GPURING_ERR_REMOTE ? EXEC_STOP_ABANDONED : EXEC_STOP_MISMATCH) << 8) |
                      (unsigned)i);
        return 0;
    }
    return 1;
}

/* Op s may run (thread 0, its send slots free, before the block's barrier): the LL
 * rows of its sends due a clean (proxy/conn.h, gpuring_ll_clean_due) zeroed, in either
 * protocol, and fenced before the step's header and data, which the barrier orders
 * after this. */
static __device__ void exec_ll_clean(const exec_cuda_chan_t *ch, const gpuring_step_t &s,
                                     const uint64_t *sstep)
{
    bool cleaned = false;

    EXEC_FOR_PEERS(s.send_mask, i) {
        if (ch->send[i].ll == NULL || !gpuring_ll_clean_due(sstep[i], GPURING_NSTEPS)) continue;
        volatile uint64_t *row = exec_ll_row(ch->send[i], sstep[i]);
        for (unsigned u = 0; u < GPURING_LL_SLOT_BYTES / 8; u++) row[u] = 0;
        cleaned = true;
    }
    if (cleaned) __threadfence_system();
}

/* Op s may run: the headers of its LL sends (exec_ll_header: before the data). */
static __device__ void exec_ll_post(const exec_cuda_desc_t &d, const exec_cuda_chan_t *ch,
                                    const gpuring_step_t &s, const uint64_t *sstep,
                                    uint64_t bytes)
{
    EXEC_FOR_PEERS(s.send_mask, i) {
        if (exec_ll(d, ch->send[i])) {
            exec_ll_header(exec_ll_row(ch->send[i], sstep[i]), bytes, d.call,
                           gpuring_ll_flag(sstep[i]));
        }
    }
}

/* Publish op s: the slots were consumed (head) and filled (simple: size, call, tail,
 * gpuring_conn_post's order, which the NET proxy relies on; LL: nothing left). */
static __device__ void exec_publish(const exec_cuda_desc_t &d, const exec_cuda_chan_t *ch,
                                    const gpuring_step_t &s, uint64_t bytes, uint64_t *rstep,
                                    uint64_t *sstep, exec_cuda_status_t *st, int c,
                                    uint64_t next_op)
{
    bool simple = false;

    EXEC_FOR_PEERS(s.send_mask, i) {
        if (exec_ll(d, ch->send[i])) continue;
        ch->send[i].ctrl->size[sstep[i] % GPURING_NSTEPS] = bytes;
        ch->send[i].ctrl->call[sstep[i] % GPURING_NSTEPS] = d.call;
        simple = true;
    }
    EXEC_FOR_PEERS(s.recv_mask, i) simple |= !exec_ll(d, ch->recv[i]);
    /* release: the block's writes (seen through the barrier) first (simple slots) */
    if (simple) __threadfence_system();
    EXEC_FOR_PEERS(s.recv_mask, i) {
        ch->recv[i].ctrl->head = ++rstep[i];
    }
    EXEC_FOR_PEERS(s.send_mask, i) {
        if (exec_ll(d, ch->send[i])) {
            ++sstep[i];
        } else {
            ch->send[i].ctrl->tail = ++sstep[i];
        }
    }
    st->progress[c] = next_op;
}

/* The channel gives up on the call: an abandon step (proxy/conn.h) on every send
 * connection it has with a free slot, so the peers fail at once, not at their timeout;
 * in both protocols, as gpuring_conn_post_abort; one with every slot taken marked
 * abandoned instead (gpuring_conn_abandon_full: its receiver reads what is there,
 * then fails; a NET end's proxy posts the step once a slot frees,
 * exec_cuda_net_abort_later); and every recv connection refused
 * (gpuring_conn_refuse), for peers waiting for a slot. */
static __device__ void exec_abandon(const exec_cuda_chan_t *ch, uint64_t *sstep)
{
    for (int i = 0; i < GPURING_MAX_PEERS; i++) {
        volatile gpuring_fifo_ctrl_t *ctrl = ch->send[i].ctrl;

        if (ch->recv[i].ctrl != NULL) ch->recv[i].ctrl->refused = 1; /* orders nothing */
        if (ctrl == NULL) continue;
        if (ctrl->head + GPURING_NSTEPS <= sstep[i]) {
            __threadfence_system(); /* release: after the last step's tail */
            ctrl->abandoned = 1;
            continue;
        }
        if (ch->send[i].ll != NULL) exec_ll_abort_header(exec_ll_row(ch->send[i], sstep[i]),
                                                         gpuring_ll_flag(sstep[i]));
        ctrl->size[sstep[i] % GPURING_NSTEPS] = 0;
        ctrl->call[sstep[i] % GPURING_NSTEPS] = GPURING_CALL_ABORT;
        __threadfence_system();
        ctrl->tail = ++sstep[i];
    }
}

/* ---- device: element loops ----------------------------------------------------------- */
/*
 * [0, count) as a scalar head, 16-byte packs and a scalar tail: packs only
 * when all n pointers sit at the same offset modulo 16 (a multiple of the
 * element size); otherwise all scalar (head = body_end = count).
 */
typedef struct exec_split {
    size_t head, npacks, body_end;
} exec_split_t;

template <typename T>
static __device__ __forceinline__ exec_split_t exec_split(const void *const *ptrs, int n,
                                                          size_t count)
{
    const uintptr_t mis = (uintptr_t)ptrs[0] & 15u;
    exec_split_t sp = { count, 0, count };
    size_t head;

    if (mis % sizeof(T) != 0) return sp;
    for (int k = 1; k < n; k++) {
        if (((uintptr_t)ptrs[k] & 15u) != mis) return sp;
    }
    head = mis == 0 ? 0 : (16u - mis) / sizeof(T);
    if (head > count) head = count;
    sp.head = head;
    sp.npacks = (count - head) / (sizeof(uint4) / sizeof(T));
    sp.body_end = head + sp.npacks * (sizeof(uint4) / sizeof(T));
    return sp;
}

/* scalar index j of the split (0 .. head + tail - 1) -> element index */
static __device__ __forceinline__ size_t exec_scalar_ix(const exec_split_t &sp, size_t j)
{
    return j < sp.head ? j : sp.body_end + (j - sp.head);
}

static __device__ __forceinline__ size_t exec_nscalar(const exec_split_t &sp, size_t count)
{
    return sp.head + (count - sp.body_end);
}

template <typename T>
static __device__ __forceinline__ const uint4 *exec_pk(const T *p, const exec_split_t &sp)
{
    return reinterpret_cast<const uint4 *>(p + sp.head);
}

template <typename T>
static __device__ __forceinline__ uint4 *exec_pk(T *p, const exec_split_t &sp)
{
    return reinterpret_cast<uint4 *>(p + sp.head);
}

/* inputs or outputs of one reduce-copy: a FIFO op's, or a direct call's ranks */
#define EXEC_MAX_IO GPURING_MAX(1 + GPURING_MAX_PEERS, GPURING_EXEC_DIRECT_MAX_RANKS)

/*
 * The pack loops below move EXEC_UNROLL packs per thread per trip: every
 * load of an input for the trip is issued before any of them is used
 * (NCCL's COLL_UNROLL in reduceCopyPacks).  A block has 512 threads; with
 * one 16-byte load in flight per thread it holds 8 KiB in flight, which at
 * ~1 us of HBM latency is ~8 GB/s per block -- what one channel measured
 * before (issue 17).  EXEC_UNROLL packs per input per thread multiply that;
 * the first two inputs' loads (a ring step's input and recv slot) are all
 * in flight together.  Adjacent threads take adjacent packs (the u-th pack
 * of a trip is nth packs after the (u-1)-th), so every warp load is 512
 * contiguous bytes.  The packs left after the last whole trip (fewer than
 * EXEC_UNROLL * nth) go one per thread per trip, then the scalar head and
 * tail.  Registers: 2 * EXEC_UNROLL packs, 8 * EXEC_UNROLL registers, well
 * inside the 128 per thread that __launch_bounds__(512) leaves.
 */
#ifndef GPURING_EXEC_UNROLL
#define GPURING_EXEC_UNROLL 4
#endif
#define EXEC_UNROLL GPURING_EXEC_UNROLL

/* packs [0, npacks) of one loop, thread tid of nth: where the unrolled trips stop */
static __device__ __forceinline__ size_t exec_unrolled_end(size_t tid, size_t nth, size_t npacks)
{
    const size_t trip = (size_t)EXEC_UNROLL * nth;
    const size_t whole = npacks / trip * trip; /* packs covered by whole trips */
    return whole + tid; /* first pack of this thread after them */
}

/*
 * out[*] = in[0] (op) in[1] (op) ... (op) in[nin-1], left to right, for
 * count elements.  NCCL's reduceCopy behind its send / recvReduceSend /
 * recvReduceCopySend / recvCopySend / recv primitives (and copySend for
 * STASH); nin 1 is a copy.  An output may alias an input: each element is
 * read, from every input, before it is written, by one thread.
 */
template <typename T, typename Op>
static __device__ void exec_reduce_copy(const T *const *in, int nin, T *const *out, int nout,
                                        size_t count)
{
    const void *ptrs[2 * EXEC_MAX_IO];
    const size_t tid = threadIdx.x, nth = blockDim.x;

    for (int k = 0; k < nin; k++) ptrs[k] = in[k];
    for (int k = 0; k < nout; k++) ptrs[nin + k] = out[k];
    const exec_split_t sp = exec_split<T>(ptrs, nin + nout, count);
    const size_t stop = exec_unrolled_end(tid, nth, sp.npacks);
    size_t p = tid;

    for (; p < stop; p += EXEC_UNROLL * nth) {
        uint4 acc[EXEC_UNROLL], x[EXEC_UNROLL];
        const uint4 *a = exec_pk(in[0], sp) + p;
#pragma unroll
        for (int u = 0; u < EXEC_UNROLL; u++) acc[u] = a[u * nth];
        for (int k = 1; k < nin; k++) {
            const uint4 *b = exec_pk(in[k], sp) + p;
#pragma unroll
            for (int u = 0; u < EXEC_UNROLL; u++) x[u] = b[u * nth];
#pragma unroll
            for (int u = 0; u < EXEC_UNROLL; u++) acc[u] = gpuring_dev_pack_apply<T, Op>(acc[u], x[u]);
        }
        for (int k = 0; k < nout; k++) {
            uint4 *o = exec_pk(out[k], sp) + p;
#pragma unroll
            for (int u = 0; u < EXEC_UNROLL; u++) o[u * nth] = acc[u];
        }
    }
    for (; p < sp.npacks; p += nth) {
        uint4 v = exec_pk(in[0], sp)[p];
        for (int k = 1; k < nin; k++) v = gpuring_dev_pack_apply<T, Op>(v, exec_pk(in[k], sp)[p]);
        for (int k = 0; k < nout; k++) exec_pk(out[k], sp)[p] = v;
    }
    for (size_t j = tid; j < exec_nscalar(sp, count); j += nth) {
        const size_t i = exec_scalar_ix(sp, j);
        T v = in[0][i];
        for (int k = 1; k < nin; k++) v = Op::apply(v, in[k][i]);
        for (int k = 0; k < nout; k++) out[k][i] = v;
    }
}

/*
 * dst (op)= recv; fwd (if any) = recv, unchanged.  The gather's
 * recvAccumulate(Send): NCCL has no such primitive (its one-shot allreduce
 * reduces all peers' buffers at once); closest is recvReduceCopySend with
 * the received value, not the sum, forwarded.  Unrolled as exec_reduce_copy.
 */
template <typename T, typename Op>
static __device__ void exec_accumulate(T *dst, const T *recv, T *fwd, size_t count)
{
    const void *ptrs[3] = { dst, recv, fwd != NULL ? fwd : dst };
    const size_t tid = threadIdx.x, nth = blockDim.x;
    const exec_split_t sp = exec_split<T>(ptrs, 3, count);
    const size_t stop = exec_unrolled_end(tid, nth, sp.npacks);
    const uint4 *pr = exec_pk(recv, sp);
    const uint4 *pd = exec_pk((const T *)dst, sp);
    size_t p = tid;

    for (; p < stop; p += EXEC_UNROLL * nth) {
        uint4 r[EXEC_UNROLL], v[EXEC_UNROLL];
#pragma unroll
        for (int u = 0; u < EXEC_UNROLL; u++) {
            r[u] = pr[p + u * nth];
            v[u] = pd[p + u * nth];
        }
        if (fwd != NULL) {
#pragma unroll
            for (int u = 0; u < EXEC_UNROLL; u++) exec_pk(fwd, sp)[p + u * nth] = r[u];
        }
#pragma unroll
        for (int u = 0; u < EXEC_UNROLL; u++)
            exec_pk(dst, sp)[p + u * nth] = gpuring_dev_pack_apply<T, Op>(v[u], r[u]);
    }
    for (; p < sp.npacks; p += nth) {
        const uint4 r = pr[p];
        if (fwd != NULL) exec_pk(fwd, sp)[p] = r;
        exec_pk(dst, sp)[p] = gpuring_dev_pack_apply<T, Op>(pd[p], r);
    }
    for (size_t j = tid; j < exec_nscalar(sp, count); j += nth) {
        const size_t i = exec_scalar_ix(sp, j);
        const T r = recv[i];
        if (fwd != NULL) fwd[i] = r;
        dst[i] = Op::apply(dst[i], r);
    }
}

/*
 * dst = row 0 (op) row 1 (op) ... (op) row nrows-1, rows `stride` elements
 * apart: the ordered gather's final fold, the same expression on every
 * rank.  No connection; NCCL's nearest is a local multi-source reduceCopy.
 * Packs when dst, row 0 and row 1 share their offset modulo 16 (then every
 * row does: the stride is a multiple of 16 bytes), unrolled as
 * exec_reduce_copy.
 */
template <typename T, typename Op>
static __device__ void exec_fold(T *dst, const T *rows, size_t stride, int nrows, size_t count)
{
    const void *ptrs[3] = { dst, rows, rows + (nrows > 1 ? stride : 0) };
    const size_t tid = threadIdx.x, nth = blockDim.x;
    const exec_split_t sp = exec_split<T>(ptrs, 3, count);
    const size_t stop = exec_unrolled_end(tid, nth, sp.npacks);
    uint4 *pd = exec_pk(dst, sp);
    size_t p = tid;

    for (; p < stop; p += EXEC_UNROLL * nth) {
        uint4 acc[EXEC_UNROLL], x[EXEC_UNROLL];
        const uint4 *a = exec_pk(rows, sp) + p;
#pragma unroll
        for (int u = 0; u < EXEC_UNROLL; u++) acc[u] = a[u * nth];
        for (int r = 1; r < nrows; r++) {
            const uint4 *b = exec_pk(rows + (size_t)r * stride, sp) + p;
#pragma unroll
            for (int u = 0; u < EXEC_UNROLL; u++) x[u] = b[u * nth];
#pragma unroll
            for (int u = 0; u < EXEC_UNROLL; u++) acc[u] = gpuring_dev_pack_apply<T, Op>(acc[u], x[u]);
        }
#pragma unroll
        for (int u = 0; u < EXEC_UNROLL; u++) pd[p + u * nth] = acc[u];
    }
    for (; p < sp.npacks; p += nth) {
        uint4 v = exec_pk(rows, sp)[p];
        for (int r = 1; r < nrows; r++)
            v = gpuring_dev_pack_apply<T, Op>(v, exec_pk(rows + (size_t)r * stride, sp)[p]);
        pd[p] = v;
    }
    for (size_t j = tid; j < exec_nscalar(sp, count); j += nth) {
        const size_t i = exec_scalar_ix(sp, j);
        T v = rows[i];
        for (int r = 1; r < nrows; r++) v = Op::apply(v, rows[(size_t)r * stride + i]);
        dst[i] = v;
    }
}

template <typename T>
static __device__ __forceinline__ T *exec_slot(const exec_cuda_conn_t &c, uint64_t step)
{
    return reinterpret_cast<T *>(c.slots + (step % GPURING_NSTEPS) * c.slot_bytes);
}

/*
 * One input or output of an op: memory of T elements (a buffer, a scratch
 * row, a simple slot), or an LL slot's data units (mem NULL) with the
 * step's flag and, for a recv, the peer (what a thread that gives up waits
 * for).
 */
template <typename T> struct exec_io {
    T *mem;
    volatile uint64_t *ll;
    uint32_t flag;
    int peer;
};

template <typename T> static __device__ __forceinline__ exec_io<T> exec_mem_io(const T *p)
{
    exec_io<T> io = { const_cast<T *>(p), NULL, 0, 0 };
    return io;
}

/* Connection c's slot of `step` (peer i's): its simple slot, or its LL row (this call's
 * protocol on c). */
template <typename T>
static __device__ __forceinline__ exec_io<T> exec_conn_io(const exec_cuda_desc_t &d,
                                                          const exec_cuda_conn_t &c,
                                                          uint64_t step, int i)
{
    exec_io<T> io = { NULL, NULL, gpuring_ll_flag(step), i };

    if (exec_ll(d, c)) {
        io.ll = exec_ll_row(c, step) + GPURING_LL_HDR_UNITS;
    } else {
        io.mem = exec_slot<T>(c, step);
    }
    return io;
}

/*
 * A pair's 8 data bytes hold up to 8 / sizeof(T) elements, little endian, as
 * the units hold them.  Elements move in and out of the 64-bit value by
 * shifts of their bit patterns (an unsigned integer of their size), which
 * stay in registers; a byte copy into the middle of the value would send it
 * through local memory one byte at a time.
 */
template <int S> struct exec_ll_bits;
template <> struct exec_ll_bits<1> { typedef uint8_t type; };
template <> struct exec_ll_bits<2> { typedef uint16_t type; };
template <> struct exec_ll_bits<4> { typedef uint32_t type; };
template <> struct exec_ll_bits<8> { typedef uint64_t type; };

/* element k of a pair's data */
template <typename T> static __device__ __forceinline__ T exec_ll_elem(uint64_t v, int k)
{
    const typename exec_ll_bits<sizeof(T)>::type b =
        (typename exec_ll_bits<sizeof(T)>::type)(v >> (8 * sizeof(T) * k));
    T x;

    memcpy(&x, &b, sizeof(T)); /* a bit cast: register to register */
    return x;
}

/* the pair's data with element k set to x */
template <typename T>
static __device__ __forceinline__ uint64_t exec_ll_with(uint64_t v, int k, T x)
{
    const unsigned shift = 8 * sizeof(T) * k;
    const uint64_t ones = sizeof(T) == 8 ? ~0ull : (1ull << (8 * (sizeof(T) & 7))) - 1;
    typename exec_ll_bits<sizeof(T)>::type b;

    memcpy(&b, &x, sizeof(T));
    return (v & ~(ones << shift)) | ((uint64_t)b << shift);
}

/*
 * The n elements at p (at most a pair's) as a pair's data bytes, and back.
 * Buffers need not be aligned to their element size (MPI does not ask it, and
 * the LL direct allreduce takes the caller's buffers as they come): at an
 * address that is not, the bytes move one by one -- a typed access there
 * would stop the kernel with a misaligned address on a GPU.
 */
template <typename T>
static __device__ __forceinline__ uint64_t exec_ll_mem_load(const T *p, int n)
{
    const volatile unsigned char *b = reinterpret_cast<const unsigned char *>(p);
    uint64_t v = 0;

    if (n * sizeof(T) == EXEC_LL_PAIR_BYTES && ((uintptr_t)p & 7u) == 0)
        return *reinterpret_cast<const uint64_t *>(p);
    if ((uintptr_t)p % sizeof(T) != 0) {
        for (int k = 0; k < n * (int)sizeof(T); k++) v |= (uint64_t)b[k] << (8 * k);
        return v;
    }
#pragma unroll
    for (int k = 0; k < (int)(EXEC_LL_PAIR_BYTES / sizeof(T)); k++) {
        if (k < n) v = exec_ll_with<T>(v, k, p[k]);
    }
    return v;
}

template <typename T>
static __device__ __forceinline__ void exec_ll_mem_store(T *p, uint64_t v, int n)
{
    volatile unsigned char *b = reinterpret_cast<unsigned char *>(p);

    if (n * sizeof(T) == EXEC_LL_PAIR_BYTES && ((uintptr_t)p & 7u) == 0) {
        *reinterpret_cast<uint64_t *>(p) = v;
        return;
    }
    if ((uintptr_t)p % sizeof(T) != 0) {
        for (int k = 0; k < n * (int)sizeof(T); k++) b[k] = (unsigned char)(v >> (8 * k));
        return;
    }
#pragma unroll
    for (int k = 0; k < (int)(EXEC_LL_PAIR_BYTES / sizeof(T)); k++) {
        if (k < n) p[k] = exec_ll_elem<T>(v, k);
    }
}

/* a (op) b, element by element, for the first n elements of a pair */
template <typename T, typename Op>
static __device__ __forceinline__ uint64_t exec_ll_apply(uint64_t a, uint64_t b, int n)
{
#pragma unroll
    for (int k = 0; k < (int)(EXEC_LL_PAIR_BYTES / sizeof(T)); k++) {
        if (k < n) {
            a = exec_ll_with<T>(a, k, Op::apply(exec_ll_elem<T>(a, k), exec_ll_elem<T>(b, k)));
        }
    }
    return a;
}

/* Wait for a pair of units to carry `flag` (the second one only if it holds data:
 * `two`): 1, its data bytes in *v_p; or, the flags last seen in *v_p
 * (EXEC_SEEN_FLAGS), 0 if the host aborted first, -1 if the sender abandoned the
 * step after its header (exec_ll_abort_header, in `row`, the step's row: NULL for
 * none), looked at as often as the host's abort. */
static __device__ int exec_ll_pair_wait(const volatile uint64_t *u, const volatile uint64_t *row,
                                        uint32_t flag, bool two, const exec_cuda_status_t *st,
                                        uint64_t *v_p)
{
    unsigned polls = 0;

    for (;;) {
        const uint64_t lo = u[0], hi = two ? u[1] : gpuring_ll_unit(0, flag);

        if ((uint32_t)(lo >> 32) == flag && (uint32_t)(hi >> 32) == flag) {
            *v_p = (lo & 0xffffffffull) | hi << 32;
            return 1;
        }
        GPURING_DEV_POLL_PAUSE();
        ++polls;
        if (polls == EXEC_CUDA_ABORT_POLLS || polls % EXEC_CUDA_ABORT_POLLS_LONG == 0) {
            const int why = st->abort ? 0 : row != NULL && exec_ll_abandoned(row, flag) ? -1 : 1;

            if (why <= 0) {
                *v_p = EXEC_SEEN_FLAGS(lo, hi);
                return why;
            }
        }
    }
}

static __device__ __forceinline__ void exec_ll_pair_store(volatile uint64_t *u, uint64_t v,
                                                          uint32_t flag, bool two)
{
    u[0] = gpuring_ll_unit((uint32_t)v, flag);
    if (two) u[1] = gpuring_ll_unit((uint32_t)(v >> 32), flag);
}

/*
 * exec_reduce_copy for an op with an LL connection, pair by pair, from and
 * into registers: each thread loads its pair of every input (waiting for
 * an LL one's flags), reduces them left to right, and stores the value to
 * every output (an LL one with the step's flag); outputs from `nvalue` on
 * get the last input unchanged (the gather's accumulate forwards what it
 * received).  The units of the data, and no more, are written and waited
 * for (a step of b bytes has ceil(b / 4)).  A thread whose units do not
 * come before the host aborts, or before their sender abandons the step,
 * records what it waits for (or the abandon), sets *aborted_p and stores
 * nothing more.
 */
template <typename T, typename Op>
static __device__ void exec_ll_reduce_copy(const exec_io<T> *in, int nin, const exec_io<T> *out,
                                           int nout, int nvalue, size_t count,
                                           exec_cuda_status_t *st, int c, int *aborted_p)
{
    const size_t per_pair = EXEC_LL_PAIR_BYTES / sizeof(T);
    const size_t npairs = GPURING_DIV_UP(count, per_pair);
    const size_t units = GPURING_DIV_UP(count * sizeof(T), 4);

    for (size_t p = threadIdx.x; p < npairs; p += blockDim.x) {
        const size_t first = p * per_pair;
        const int n = (int)(count - first < per_pair ? count - first : per_pair);
        const bool two = 2 * p + 1 < units;
        uint64_t x[EXEC_MAX_IO], v;

        for (int k = 0; k < nin; k++) {
            if (in[k].mem != NULL) {
                x[k] = exec_ll_mem_load(in[k].mem + first, n);
            } else {
                const int got = exec_ll_pair_wait(in[k].ll + 2 * p, in[k].ll - GPURING_LL_HDR_UNITS,
                                                  in[k].flag, two, st, &x[k]);

                if (got <= 0) {
                    st->seen[c] = EXEC_SEEN_LL_DATA | x[k];
                    exec_stop(st, c,
                              ((got < 0 ? EXEC_STOP_ABANDONED : EXEC_WAIT_RECV) << 8) |
                                  (unsigned)in[k].peer);
                    *aborted_p = 1;
                    return;
                }
            }
        }
        v = x[0];
        for (int k = 1; k < nin; k++) v = exec_ll_apply<T, Op>(v, x[k], n);
        for (int k = 0; k < nout; k++) {
            const uint64_t o = k < nvalue ? v : x[nin - 1];
            if (out[k].mem != NULL) {
                exec_ll_mem_store(out[k].mem + first, o, n);
            } else {
                exec_ll_pair_store(out[k].ll + 2 * p, o, out[k].flag, two);
            }
        }
    }
}

/*
 * The compute of one op (all threads), as exec_host.c's exec_op_run: its
 * inputs and outputs, then the loop that moves them -- exec_ll_reduce_copy
 * when a connection of the op is LL this call, else the pack loops.
 */
template <typename T, typename Op>
static __device__ void exec_op(const exec_cuda_desc_t &d, const exec_cuda_chan_t *ch,
                               const gpuring_step_t &s, const uint64_t *rstep,
                               const uint64_t *sstep, exec_cuda_status_t *st, int c,
                               int *aborted_p)
{
    const T *src = (s.flags & GPURING_PRIM_SRC) ? (const T *)d.sendbuf + s.in_off
                   : (s.flags & GPURING_PRIM_OUT_SRC) ? (const T *)d.recvbuf + s.off
                                                      : NULL;
    T *dst = (s.flags & (GPURING_PRIM_DST | GPURING_PRIM_ACC)) ? (T *)d.recvbuf + s.off : NULL;
    exec_io<T> in[EXEC_MAX_IO], out[EXEC_MAX_IO];
    const T *pin[EXEC_MAX_IO];
    T *pout[EXEC_MAX_IO];
    int nin = 0, nout = 0, nvalue = EXEC_MAX_IO;
    bool ll = false;

    if (s.count == 0) return;
    if (s.flags & GPURING_PRIM_FOLD) {
        exec_fold<T, Op>((T *)d.recvbuf + s.off, (const T *)d.scratch + s.off, d.count,
                         ch->prog.nranks, s.count);
        return;
    }
    if (s.flags & GPURING_PRIM_STASH) {
        /* recvCopySend / copySend into the scratch row: keep the block, forward it */
        in[nin++] = (s.flags & GPURING_PRIM_RECV) ? exec_conn_io<T>(d, ch->recv[0], rstep[0], 0)
                                                  : exec_mem_io(src);
        out[nout++] = exec_mem_io((T *)d.scratch + (size_t)s.stash * d.count + s.off);
        if (s.flags & GPURING_PRIM_SEND) out[nout++] = exec_conn_io<T>(d, ch->send[0], sstep[0], 0);
    } else if (s.flags & GPURING_PRIM_ACC) {
        /* output (op)= recv; the send gets recv unchanged (nvalue) */
        in[nin++] = exec_mem_io(dst);
        in[nin++] = exec_conn_io<T>(d, ch->recv[0], rstep[0], 0);
        out[nout++] = exec_mem_io(dst);
        if (s.flags & GPURING_PRIM_SEND) out[nout++] = exec_conn_io<T>(d, ch->send[0], sstep[0], 0);
        nvalue = 1;
    } else {
        /* plain: input first, then the recv slots in peer order; output, then send slots */
        if (src != NULL) in[nin++] = exec_mem_io(src);
        EXEC_FOR_PEERS(s.recv_mask, i) in[nin++] = exec_conn_io<T>(d, ch->recv[i], rstep[i], i);
        /* a lone input copied onto itself (in-place gather op 0): no write */
        if (dst != NULL && !(nin == 1 && (const T *)dst == in[0].mem)) {
            out[nout++] = exec_mem_io(dst);
        }
        EXEC_FOR_PEERS(s.send_mask, i) out[nout++] = exec_conn_io<T>(d, ch->send[i], sstep[i], i);
    }
    if (nin == 0 || nout == 0) return;
    for (int k = 0; k < nin; k++) ll |= (pin[k] = in[k].mem) == NULL;
    for (int k = 0; k < nout; k++) ll |= (pout[k] = out[k].mem) == NULL;
    if (ll) {
        exec_ll_reduce_copy<T, Op>(in, nin, out, nout, nvalue, s.count, st, c, aborted_p);
    } else if (s.flags & GPURING_PRIM_ACC) {
        exec_accumulate<T, Op>(pout[0], pin[1], nout > 1 ? pout[1] : NULL, s.count);
    } else {
        exec_reduce_copy<T, Op>(pin, nin, pout, nout, s.count);
    }
}

/* One block per channel: the channel's whole program. */
template <typename T, typename Op>
__global__ void __launch_bounds__(GPURING_EXEC_CUDA_THREADS)
    exec_cuda_kernel(GPURING_DEV_GRID_PARAM(exec_cuda_desc_t) d)
{
    __shared__ uint64_t rstep[GPURING_MAX_PEERS], sstep[GPURING_MAX_PEERS];
    const int c = blockIdx.x;
    const exec_cuda_chan_t *ch = &d.ch[c];
    const gpuring_prog_t prog = ch->prog;
    exec_cuda_status_t *st = d.status;
    /* the host's abort as the kernel starts: one that starts late (queued behind long
     * work) after its host gave the call up and returned finds its peers' first steps
     * in its FIFOs all the same, and must neither write an output that is no longer the
     * call's nor let a peer still in the call complete it (the call fails on every rank
     * or on none): a late rank whose program writes no output (a bcast's root, a
     * reduce's non-roots) would otherwise run it all, sending an input the application
     * has back.  Read here, looked at before the first op that writes the output and
     * before the last op, whichever comes first (a ring's come after its first steps:
     * the load has returned by then; a one-op program waits for it) */
    const int aborted_at_start = threadIdx.x == 0 ? st->abort : 0;

    if (threadIdx.x == 0) {
        for (int i = 0; i < GPURING_MAX_PEERS; i++) {
            rstep[i] = ch->recv[i].step;
            sstep[i] = ch->send[i].step;
        }
    }
    __syncthreads();
    /* a thread that must stop says so at the next barrier, which tells every thread
     * (__syncthreads_or): the whole block leaves together, no barrier left half met */
    for (uint64_t op = 0; op < prog.nops; op++) {
        gpuring_step_t s;
        int aborted = 0;

        gpuring_prog_op(&prog, op, &s);
        if (threadIdx.x == 0) {
            if ((aborted_at_start &&
                 ((s.flags & (GPURING_PRIM_DST | GPURING_PRIM_ACC | GPURING_PRIM_FOLD)) ||
                  op + 1 == prog.nops)) ||
                (op % EXEC_CUDA_ABORT_OPS == EXEC_CUDA_ABORT_OPS - 1 && st->abort) ||
                !exec_wait(d, ch, s, rstep, sstep, st, c, s.count * sizeof(T))) {
                exec_abandon(ch, sstep);
                aborted = 1;
            } else {
                exec_ll_clean(ch, s, sstep);
            }
        }
        if (__syncthreads_or(aborted)) return;
        if (threadIdx.x == 0) exec_ll_post(d, ch, s, sstep, s.count * sizeof(T));
        exec_op<T, Op>(d, ch, s, rstep, sstep, st, c, &aborted);
        if (__syncthreads_or(aborted)) { /* a thread's LL units did not come (the host aborted) */
            if (threadIdx.x == 0) exec_abandon(ch, sstep);
            return;
        }
        if (threadIdx.x == 0)
            exec_publish(d, ch, s, s.count * sizeof(T), rstep, sstep, st, c, op + 1);
    }
}

/* A call given up before its kernel (gpuring_exec_cuda_abandon): block c posts the
 * abandon step on channel c's send connections, at their steps, and refuses its recv
 * connections. */
static __global__ void exec_cuda_abandon_kernel(GPURING_DEV_GRID_PARAM(exec_cuda_desc_t) d)
{
    const exec_cuda_chan_t *ch = &d.ch[blockIdx.x];
    uint64_t sstep[GPURING_MAX_PEERS];

    for (int i = 0; i < GPURING_MAX_PEERS; i++) sstep[i] = ch->send[i].step;
    exec_abandon(ch, sstep);
}

/* ---- the direct allreduce's kernel (exec_cuda.h) ---------------------------------- */
typedef struct exec_direct_desc {
    const char *in[GPURING_EXEC_DIRECT_MAX_RANKS];
    char *out[GPURING_EXEC_DIRECT_MAX_RANKS];
    int nranks;
    size_t count;     /* elements of the share */
    size_t per_block; /* elements per block: a multiple of 16 bytes */
} exec_direct_desc_t;

/* Block b: elements [b * per_block, +per_block) of the share, all ranks in, all out. */
template <typename T, typename Op>
__global__ void __launch_bounds__(GPURING_EXEC_CUDA_THREADS)
    exec_direct_kernel(GPURING_DEV_GRID_PARAM(exec_direct_desc_t) d)
{
    const size_t first = (size_t)blockIdx.x * d.per_block;
    const T *in[GPURING_EXEC_DIRECT_MAX_RANKS];
    T *out[GPURING_EXEC_DIRECT_MAX_RANKS];

    if (first >= d.count) return;
    for (int r = 0; r < d.nranks; r++) {
        in[r] = reinterpret_cast<const T *>(d.in[r]) + first;
        out[r] = reinterpret_cast<T *>(d.out[r]) + first;
    }
    exec_reduce_copy<T, Op>(in, d.nranks, out, d.nranks, min(d.per_block, d.count - first));
}

/* ---- the LL direct allreduce's kernel (exec_cuda.h) ------------------------------- */
typedef struct exec_direct_ll_desc {
    const char *sendbuf;
    char *recvbuf;
    volatile uint64_t *row;                                 /* this rank's inbox row */
    volatile uint64_t *to[GPURING_EXEC_DIRECT_MAX_RANKS];   /* its slot in rank r's row */
    volatile uint64_t *clean; /* the next call's row, due a clean (exec_cuda.h); or NULL */
    exec_cuda_status_t *status;
    size_t count;
    size_t slot_units;    /* 8-byte units per slot */
    size_t per_block;     /* pairs per block */
    uint64_t call;
    uint32_t flag;
    int nranks, rank;
} exec_direct_ll_desc_t;

/*
 * Block b: pairs [b * per_block, +per_block) of every rank's input.  Each
 * thread stores its own pairs to every peer, then (thread 0 having checked
 * every peer's header) waits for the same pairs of every peer and reduces
 * them: a thread reads its pairs of the input before it writes them to the
 * output, so in place needs nothing more.  On the host's abort, or a header
 * of another call, the block records the peer (status wait[b]) and leaves.
 */
template <typename T, typename Op>
__global__ void __launch_bounds__(GPURING_EXEC_CUDA_THREADS)
    exec_direct_ll_kernel(GPURING_DEV_GRID_PARAM(exec_direct_ll_desc_t) d)
{
    const size_t per_pair = EXEC_LL_PAIR_BYTES / sizeof(T);
    const size_t npairs = GPURING_DIV_UP(d.count, per_pair);
    const size_t p0 = (size_t)blockIdx.x * d.per_block;
    const size_t p1 = min(npairs, p0 + d.per_block);
    const T *in = reinterpret_cast<const T *>(d.sendbuf);
    exec_cuda_status_t *st = d.status;
    __shared__ int go;
    /* the host's abort as the kernel starts: one that starts late (queued behind long
     * work) after its host gave the call up and returned finds every peer's units in
     * its row all the same, and must neither write an output that is no longer the
     * call's nor let a peer still in the call complete it (the call fails on every
     * rank or on none).  Read here; looked at by block 0 once its own units are out --
     * the header it then stores to every peer is the call's, or the abandon (peers
     * take no unit before a header: a late rank's units are never used) -- and by
     * every block once the headers are in */
    const int aborted_at_start = threadIdx.x == 0 ? st->abort : 0;

    for (size_t p = p0 + threadIdx.x; p < p1; p += blockDim.x) {
        const size_t first = p * per_pair;
        const int n = (int)min(per_pair, d.count - first);
        const uint64_t v = exec_ll_mem_load(in + first, n);

        for (int r = 0; r < d.nranks; r++) {
            if (r != d.rank) {
                exec_ll_pair_store(d.to[r] + GPURING_LL_HDR_UNITS + 2 * p, v, d.flag, true);
            }
        }
    }
    if (blockIdx.x == 0 && d.clean != NULL) { /* before the headers that let peers on */
        for (size_t u = threadIdx.x; u < d.nranks * d.slot_units; u += blockDim.x) d.clean[u] = 0;
        __threadfence_system();
        __syncthreads();
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (int r = 0; r < d.nranks; r++) {
            if (r != d.rank)
                exec_ll_header(d.to[r], aborted_at_start ? 0 : d.count * sizeof(T),
                               aborted_at_start ? GPURING_CALL_ABORT : d.call, d.flag);
        }
    }
    if (threadIdx.x == 0) {
        go = 1;
        for (int r = 0; r < d.nranks && go; r++) {
            const volatile uint64_t *hdr = d.row + (size_t)r * d.slot_units;
            uint64_t units[2];
            unsigned polls = 0;

            if (r == d.rank) continue;
            while (go && !exec_ll_landed(hdr, d.flag, units)) {
                GPURING_DEV_POLL_PAUSE();
                if (++polls % EXEC_CUDA_ABORT_POLLS == 0 && st->abort) {
                    st->seen[blockIdx.x] = EXEC_SEEN_FLAGS(units[0], units[1]);
                    exec_stop(st, blockIdx.x, (EXEC_WAIT_RECV << 8) | (unsigned)r);
                    go = 0;
                }
            }
            const gpuring_status_t chk =
                go ? gpuring_step_check((uint32_t)units[0], (uint32_t)units[1],
                                        d.count * sizeof(T), d.call)
                   : GPURING_OK;
            if (chk != GPURING_OK) { /* another call's header, or the peer's abandon */
                st->got_bytes = (uint32_t)units[1];
                exec_stop(st, blockIdx.x,
                          ((chk == GPURING_ERR_REMOTE ? EXEC_STOP_ABANDONED
                                                      : EXEC_STOP_MISMATCH) << 8) |
                              (unsigned)r);
                go = 0;
            }
        }
        if (aborted_at_start && go) {
            /* said, so that the host does not take a kernel that left in its grace
             * period for one that finished */
            exec_stop(st, blockIdx.x, (EXEC_STOP_LATE << 8) | (unsigned)d.rank);
            go = 0;
        }
    }
    __syncthreads();
    if (!go) return;
    for (size_t p = p0 + threadIdx.x; p < p1; p += blockDim.x) {
        const size_t first = p * per_pair;
        const int n = (int)min(per_pair, d.count - first);
        uint64_t acc = 0, x;

        for (int r = 0; r < d.nranks; r++) {
            if (r == d.rank) {
                x = exec_ll_mem_load(in + first, n);
            } else if (exec_ll_pair_wait(d.row + (size_t)r * d.slot_units +
                                             GPURING_LL_HDR_UNITS + 2 * p,
                                         NULL, d.flag, true, st, &x) <= 0) {
                st->seen[blockIdx.x] = EXEC_SEEN_LL_DATA | x;
                exec_stop(st, blockIdx.x, (EXEC_WAIT_RECV << 8) | (unsigned)r);
                return;
            }
            acc = r == 0 ? x : exec_ll_apply<T, Op>(acc, x, n);
        }
        exec_ll_mem_store(reinterpret_cast<T *>(d.recvbuf) + first, acc, n);
    }
}

/* An LL direct call given up before its kernel ran (gpuring_exec_cuda_direct_ll): one
 * thread stores an abandon header (GPURING_CALL_ABORT, with the call's flag) into this
 * rank's slot of every peer's row, so the peers' kernels stop at it ("gave up on the
 * call") instead of waiting for its units until their timeout. */
static __global__ void exec_direct_ll_abandon_kernel(GPURING_DEV_GRID_PARAM(exec_direct_ll_desc_t) d)
{
    for (int r = 0; r < d.nranks; r++) {
        if (r != d.rank) exec_ll_header(d.to[r], 0, GPURING_CALL_ABORT, d.flag);
    }
}

/* ---- host: kernel choice (signed integers folded as in reduce_cuda.cu) ------------- */
/* K::fn<T, Op>() names one instance of a kernel template: the FIFO executor's, the
 * direct one's or the LL direct one's */
struct exec_fifo_kernels {
    static constexpr const char *name = "FIFO";
    template <typename T, typename Op> static const void *fn()
    {
        return GPURING_DEV_KERNEL(exec_cuda_kernel<T, Op>);
    }
};
struct exec_direct_kernels {
    static constexpr const char *name = "direct";
    template <typename T, typename Op> static const void *fn()
    {
        return GPURING_DEV_KERNEL(exec_direct_kernel<T, Op>);
    }
};
struct exec_direct_ll_kernels {
    static constexpr const char *name = "LL direct";
    template <typename T, typename Op> static const void *fn()
    {
        return GPURING_DEV_KERNEL(exec_direct_ll_kernel<T, Op>);
    }
};

template <typename K, typename S, typename U> static const void *exec_cuda_int_fn(gpuring_op_t op)
{
    switch (op) {
    case GPURING_OP_SUM: return K::template fn<U, gpuring_dev_op_sum<U> >();
    case GPURING_OP_PROD: return K::template fn<U, gpuring_dev_op_prod<U> >();
    case GPURING_OP_MIN: return K::template fn<S, gpuring_dev_op_min<S> >();
    case GPURING_OP_MAX: return K::template fn<S, gpuring_dev_op_max<S> >();
    case GPURING_OP_BAND: return K::template fn<U, gpuring_dev_op_band<U> >();
    case GPURING_OP_BOR: return K::template fn<U, gpuring_dev_op_bor<U> >();
    case GPURING_OP_BXOR: return K::template fn<U, gpuring_dev_op_bxor<U> >();
    case GPURING_OP_LAND: return K::template fn<U, gpuring_dev_op_land<U> >();
    case GPURING_OP_LOR: return K::template fn<U, gpuring_dev_op_lor<U> >();
    case GPURING_OP_LXOR: return K::template fn<U, gpuring_dev_op_lxor<U> >();
    default: return NULL;
    }
}

template <typename K, typename T> static const void *exec_cuda_float_fn(gpuring_op_t op)
{
    switch (op) {
    case GPURING_OP_SUM: return K::template fn<T, gpuring_dev_op_sum<T> >();
    case GPURING_OP_PROD: return K::template fn<T, gpuring_dev_op_prod<T> >();
    case GPURING_OP_MIN: return K::template fn<T, gpuring_dev_op_min<T> >();
    case GPURING_OP_MAX: return K::template fn<T, gpuring_dev_op_max<T> >();
    default: return NULL;
    }
}

template <typename K> static const void *exec_cuda_fn(gpuring_type_t type, gpuring_op_t op)
{
    switch (type) {
    case GPURING_TYPE_INT8: return exec_cuda_int_fn<K, int8_t, uint8_t>(op);
    case GPURING_TYPE_UINT8: return exec_cuda_int_fn<K, uint8_t, uint8_t>(op);
    case GPURING_TYPE_INT16: return exec_cuda_int_fn<K, int16_t, uint16_t>(op);
    case GPURING_TYPE_UINT16: return exec_cuda_int_fn<K, uint16_t, uint16_t>(op);
    case GPURING_TYPE_INT32: return exec_cuda_int_fn<K, int32_t, uint32_t>(op);
    case GPURING_TYPE_UINT32: return exec_cuda_int_fn<K, uint32_t, uint32_t>(op);
    case GPURING_TYPE_INT64: return exec_cuda_int_fn<K, int64_t, uint64_t>(op);
    case GPURING_TYPE_UINT64: return exec_cuda_int_fn<K, uint64_t, uint64_t>(op);
    case GPURING_TYPE_FLOAT: return exec_cuda_float_fn<K, float>(op);
    case GPURING_TYPE_DOUBLE: return exec_cuda_float_fn<K, double>(op);
    case GPURING_TYPE_FLOAT16: return exec_cuda_float_fn<K, __half>(op);
    case GPURING_TYPE_BFLOAT16: return exec_cuda_float_fn<K, __nv_bfloat16>(op);
    default: return NULL;
    }
}

/* Kernel K of (type, op), NULL logged: the tables hold every pair gpuring_op_supported
 * says yes to (the loader checks it: exec_cuda_load_one), so a hole is a defect of
 * the build -- GPURING_ERR_INVALID to the caller, never NOT_SUPPORTED (which the direct
 * path reads as "every rank takes the FIFOs"). */
template <typename K>
static const void *exec_cuda_kernel_of(gpuring_type_t type, gpuring_op_t op)
{
    const void *fn = exec_cuda_fn<K>(type, op);

    if (fn == NULL)
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: no %s kernel for %s on %s (a defect "
                      "of this build: gpuring_op_supported says yes)", K::name,
                      gpuring_op_name(op), gpuring_type_name(type));
    return fn;
}

/*
 * ---- host: the status pool (mapped, pinned, allocated once, never freed) -----------
 * gpuring_exec_cuda_init makes it and loads the kernels under a lock, once per device;
 * a call finds both ready without the lock (exec_cuda_ready) and takes and gives back
 * its entry with one atomic exchange each.
 */
static pthread_mutex_t exec_cuda_init_lock = PTHREAD_MUTEX_INITIALIZER;
static char *exec_cuda_pool_host;  /* EXEC_CUDA_POOL entries */
static char *exec_cuda_pool_dev;   /* the same, as the device sees it */
static unsigned char exec_cuda_pool_used[EXEC_CUDA_POOL];

/*
 * Load every kernel variant (and the abandon kernels) into the current device's
 * context now.  With
 * lazy loading (CUDA's default since 12.2) the first launch of a variant
 * loads it, which may wait for the whole context to go idle -- forever, if
 * a kernel of another call is spinning on a peer at that moment.  Lock held.
 */
static uint64_t exec_cuda_loaded; /* devices (bit per ordinal < 64) loaded, the pool made */

/* Load kernel K of (type, op), if the tables hold one; one of a pair gpuring_op_supported
 * says yes to that they lack fails (exec_cuda_kernel_of logs it). */
template <typename K> static gpuring_status_t exec_cuda_load_one(gpuring_type_t type,
                                                                 gpuring_op_t op)
{
    const int supported = gpuring_op_supported(type, op);
    const void *fn = supported ? exec_cuda_kernel_of<K>(type, op) : exec_cuda_fn<K>(type, op);
    cudaFuncAttributes attr;

    if (fn == NULL) return supported ? GPURING_ERR_INVALID : GPURING_OK;
    GPURING_CUDA_CHECK(cudaFuncGetAttributes(&attr, fn));
    return GPURING_OK;
}

static gpuring_status_t exec_cuda_load_kernels(void)
{
    for (int t = 0; t < GPURING_TYPE_COUNT; t++) {
        for (int o = 0; o < GPURING_OP_COUNT; o++) {
            const gpuring_type_t type = (gpuring_type_t)t;
            const gpuring_op_t op = (gpuring_op_t)o;

            GPURING_CHECK(exec_cuda_load_one<exec_fifo_kernels>(type, op));
            GPURING_CHECK(exec_cuda_load_one<exec_direct_kernels>(type, op));
            GPURING_CHECK(exec_cuda_load_one<exec_direct_ll_kernels>(type, op));
        }
    }
    {
        cudaFuncAttributes attr; /* (their launch comes when other calls' kernels may spin) */
        GPURING_CUDA_CHECK(
            cudaFuncGetAttributes(&attr, GPURING_DEV_KERNEL(exec_cuda_abandon_kernel)));
        GPURING_CUDA_CHECK(
            cudaFuncGetAttributes(&attr, GPURING_DEV_KERNEL(exec_direct_ll_abandon_kernel)));
    }
    return GPURING_OK;
}

extern "C" gpuring_status_t gpuring_exec_cuda_capacity(int *blocks_p)
{
    int device = 0, sms = 0, per_sm = -1;

    GPURING_CUDA_CHECK(cudaGetDevice(&device));
    GPURING_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    for (int t = 0; t < GPURING_TYPE_COUNT; t++) {
        for (int o = 0; o < GPURING_OP_COUNT; o++) {
            const void *fn = exec_cuda_fn<exec_fifo_kernels>((gpuring_type_t)t, (gpuring_op_t)o);
            int n = 0;
            if (fn == NULL) continue;
            GPURING_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &n, fn, GPURING_EXEC_CUDA_THREADS, 0));
            per_sm = per_sm < 0 ? n : GPURING_MIN(per_sm, n);
        }
    }
    *blocks_p = sms * GPURING_MAX(per_sm, 0);
    return GPURING_OK;
}

/* Whether gpuring_exec_cuda_init is done for `device` (devices past 64: never said). */
static int exec_cuda_inited(int device)
{
    return device >= 0 && device < 64 &&
           (GPURING_LOAD_ACQUIRE(&exec_cuda_loaded) >> device & 1u) != 0;
}

extern "C" gpuring_status_t gpuring_exec_cuda_init(void)
{
    gpuring_status_t st = GPURING_OK;
    void *host = NULL, *dev = NULL;
    int device = 0;

    GPURING_CUDA_CHECK(cudaGetDevice(&device));
    pthread_mutex_lock(&exec_cuda_init_lock);
    if (exec_cuda_inited(device)) goto out;
    st = exec_cuda_load_kernels();
    if (st != GPURING_OK) goto out;
    if (exec_cuda_pool_host == NULL) {
        GPURING_CUDA_CHECK_GOTO(cudaHostAlloc(&host, (size_t)EXEC_CUDA_POOL *
                                                         EXEC_CUDA_STATUS_STRIDE,
                                              cudaHostAllocMapped | cudaHostAllocPortable),
                                st, out);
        memset(host, 0, (size_t)EXEC_CUDA_POOL * EXEC_CUDA_STATUS_STRIDE);
        GPURING_CUDA_CHECK_GOTO(cudaHostGetDevicePointer(&dev, host, 0), st, out_free);
        exec_cuda_pool_host = (char *)host;
        exec_cuda_pool_dev = (char *)dev;
    }
    if (device < 64) { /* the pool's pointers are written before the bit (release) */
        GPURING_STORE_RELEASE(&exec_cuda_loaded, exec_cuda_loaded | (uint64_t)1 << device);
    }
    goto out;
out_free:
    (void)cudaFreeHost(host);
out:
    pthread_mutex_unlock(&exec_cuda_init_lock);
    return st;
}

/* Before a call's launch: gpuring_exec_cuda_init done for the current device (at the
 * communicator's creation, normally: then no lock). */
static gpuring_status_t exec_cuda_ready(void)
{
    int device = 0;

    GPURING_CUDA_CHECK(cudaGetDevice(&device));
    return exec_cuda_inited(device) ? GPURING_OK : gpuring_exec_cuda_init();
}

/* An entry for one call: host view in *host_p, device view in *dev_p; -1 if none left. */
static int exec_cuda_pool_get(exec_cuda_status_t **host_p, exec_cuda_status_t **dev_p)
{
    int ix = -1;

    for (int i = 0; i < EXEC_CUDA_POOL && ix < 0; i++) {
        if (GPURING_LOAD_ACQUIRE(&exec_cuda_pool_used[i]) == 0 &&
            __atomic_exchange_n(&exec_cuda_pool_used[i], 1, __ATOMIC_ACQUIRE) == 0) {
            ix = i;
        }
    }
    if (ix < 0) return -1;
    *host_p = (exec_cuda_status_t *)(exec_cuda_pool_host + (size_t)ix * EXEC_CUDA_STATUS_STRIDE);
    *dev_p = (exec_cuda_status_t *)(exec_cuda_pool_dev + (size_t)ix * EXEC_CUDA_STATUS_STRIDE);
    return ix;
}

/* (an entry is taken for a kernel that waits for peers: device.h's count of them) */
static void exec_cuda_pool_put(int ix)
{
    GPURING_STORE_RELEASE(&exec_cuda_pool_used[ix], (unsigned char)0);
    gpuring_device_waiting_end();
}

/*
 * The entries of kernels that did not leave within EXEC_CUDA_ABORT_WAIT_SEC of their
 * abort (exec_cuda_status_give), each with an event recorded behind its kernel: such a
 * kernel may only have started late (queued behind the application's work, or behind
 * other kernels on a GPU that runs them in turn) and leave at its first look at the
 * abort.  Until it has, its entry is kept, and with it device.h's count of kernels in
 * flight, which holds back every gpuring_device_free of the process; once its event
 * has completed, the next status take gives the entry back.
 */
static struct {
    int ix;
    cudaEvent_t left;
    double since;
} exec_cuda_orphans[EXEC_CUDA_POOL];
static int exec_cuda_norphans; /* atomic for the look without the lock */
static pthread_mutex_t exec_cuda_orphan_lock = PTHREAD_MUTEX_INITIALIZER;

static void exec_cuda_orphans_reclaim(void)
{
    if (GPURING_LOAD_ACQUIRE(&exec_cuda_norphans) == 0) return;
    pthread_mutex_lock(&exec_cuda_orphan_lock);
    for (int i = 0; i < exec_cuda_norphans;) {
        const cudaError_t err = cudaEventQuery(exec_cuda_orphans[i].left);

        if (err == cudaErrorNotReady) {
            i++;
            continue;
        }
        /* (a failed kernel was reported: it has left too; a success leaves the
         * application's own last error where it is) */
        if (err != cudaSuccess) (void)cudaGetLastError();
        GPURING_INFO(GPURING_SUBSYS_KERNEL, "exec_cuda: the kernel of a call aborted %.1f s "
                     "ago has left: its status entry is back", gpuring_time_sec() -
                     exec_cuda_orphans[i].since);
        (void)cudaEventDestroy(exec_cuda_orphans[i].left);
        exec_cuda_pool_put(exec_cuda_orphans[i].ix);
        exec_cuda_orphans[i] = exec_cuda_orphans[exec_cuda_norphans - 1];
        GPURING_STORE_RELEASE(&exec_cuda_norphans, exec_cuda_norphans - 1);
    }
    pthread_mutex_unlock(&exec_cuda_orphan_lock);
}

/* A reset entry for the call `who` launches (exec_cuda_pool_get's views); -1 (logged) when
 * EXEC_CUDA_POOL calls are in flight. */
static int exec_cuda_status_take(const char *who, exec_cuda_status_t **st_p,
                                 exec_cuda_status_t **dev_p)
{
    int ix;

    exec_cuda_orphans_reclaim();
    ix = exec_cuda_pool_get(st_p, dev_p);

    if (ix < 0) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "%s: more than %d calls in flight", who,
                      EXEC_CUDA_POOL);
        return -1;
    }
    gpuring_device_waiting_begin();
    (*st_p)->abort = 0;
    (*st_p)->got_bytes = 0;
    for (int c = 0; c < GPURING_EXEC_CUDA_MAX_CHANNELS; c++) {
        (*st_p)->wait[c] = 0;
        (*st_p)->progress[c] = 0; /* seen[c]: written before wait[c], read only where it is set */
    }
    __sync_synchronize();
    return ix;
}

/* Entry ix back to the pool once its kernel (the last work on `stream`) `exited`; one
 * still running is an orphan until it leaves (exec_cuda_orphans_reclaim) -- or for good,
 * where no event can follow it. */
static void exec_cuda_status_give(const char *who, int ix, int exited, cudaStream_t stream)
{
    cudaEvent_t left = NULL;

    if (exited) {
        exec_cuda_pool_put(ix);
        return;
    }
    if (cudaEventCreateWithFlags(&left, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventRecord(left, stream) != cudaSuccess) {
        (void)cudaGetLastError();
        if (left != NULL) (void)cudaEventDestroy(left);
        GPURING_WARN(GPURING_SUBSYS_KERNEL, "%s: the kernel did not stop %.1f s after the "
                     "abort; the stream stays busy", who, EXEC_CUDA_ABORT_WAIT_SEC);
        return;
    }
    GPURING_WARN(GPURING_SUBSYS_KERNEL, "%s: the kernel did not stop %.1f s after the abort "
                 "(it may not have started: queued behind other work); the stream stays "
                 "busy until it does", who, EXEC_CUDA_ABORT_WAIT_SEC);
    pthread_mutex_lock(&exec_cuda_orphan_lock);
    exec_cuda_orphans[exec_cuda_norphans].ix = ix; /* (at most one per entry) */
    exec_cuda_orphans[exec_cuda_norphans].left = left;
    exec_cuda_orphans[exec_cuda_norphans].since = gpuring_time_sec();
    GPURING_STORE_RELEASE(&exec_cuda_norphans, exec_cuda_norphans + 1);
    pthread_mutex_unlock(&exec_cuda_orphan_lock);
}

/* ---- host: walking a program (the kernel's step rules) ------------------------------ */
typedef struct exec_cuda_walk {
    uint64_t recv_steps[GPURING_MAX_PEERS]; /* slots taken from each recv connection */
    uint64_t send_steps[GPURING_MAX_PEERS]; /* slots posted to each send connection */
    unsigned recv_used, send_used;          /* peers whose connections any op uses */
    size_t max_slot_count;                  /* largest op count that moves a slot */
    int folds;                              /* a FOLD or STASH op: the scratch is read */
} exec_cuda_walk_t;

static void exec_cuda_walk(const gpuring_prog_t *p, uint64_t upto, exec_cuda_walk_t *w)
{
    memset(w, 0, sizeof(*w));
    for (uint64_t op = 0; op < upto; op++) {
        gpuring_step_t s;

        gpuring_prog_op(p, op, &s);
        EXEC_FOR_PEERS(s.recv_mask, i) w->recv_steps[i]++;
        EXEC_FOR_PEERS(s.send_mask, i) w->send_steps[i]++;
        w->recv_used |= s.recv_mask;
        w->send_used |= s.send_mask;
        if ((s.recv_mask | s.send_mask) != 0) w->max_slot_count = GPURING_MAX(w->max_slot_count, s.count);
        if (s.flags & (GPURING_PRIM_FOLD | GPURING_PRIM_STASH)) w->folds = 1;
    }
}

/* Is connection end `conn` (peer i of channel c) usable by the kernel for call a? */
static gpuring_status_t exec_cuda_check_conn(const gpuring_exec_args_t *a,
                                             const gpuring_conn_t *conn, const char *dir, int c,
                                             int i, size_t need_bytes)
{
    if (conn == NULL || conn->slots == NULL || conn->ctrl == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: channel %d has no %s connection to "
                      "peer %d, which its program uses", c, dir, i);
        return GPURING_ERR_INVALID;
    }
    if (conn->type == GPURING_CONN_NET && conn->mapped_host == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: channel %d's %s net connection to rank "
                      "%d is not mapped for the device (gpuring_conn_map_device)", c, dir,
                      conn->peer);
        return GPURING_ERR_INVALID;
    }
    if (((uintptr_t)conn->slots | (uintptr_t)conn->ll | conn->slot_bytes) % 16 != 0) {
        /* a misaligned access would kill the application's CUDA context */
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: channel %d's %s connection to rank %d "
                      "has slots at %p of %zu bytes (LL slots at %p): not 16-byte aligned", c,
                      dir, conn->peer, (void *)conn->slots, conn->slot_bytes, (void *)conn->ll);
        return GPURING_ERR_INVALID;
    }
    if (gpuring_exec_ll(a, conn) && need_bytes > GPURING_LL_STEP_BYTES) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: channel %d's %s connection to rank %d "
                      "runs LL steps of at most %d bytes, the program moves %zu (a planning "
                      "bug)", c, dir, conn->peer, GPURING_LL_STEP_BYTES, need_bytes);
        return GPURING_ERR_INVALID;
    }
    if (conn->slot_bytes < need_bytes) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: channel %d's %s connection to rank %d "
                      "has %zu-byte slots, the program moves %zu bytes", c, dir, conn->peer,
                      conn->slot_bytes, need_bytes);
        return GPURING_ERR_INVALID;
    }
    return GPURING_OK;
}

static void exec_cuda_fill_conn(exec_cuda_conn_t *d, const gpuring_conn_t *conn)
{
    d->slots = conn->slots;
    d->ll = conn->ll;
    d->ctrl = conn->ctrl;
    d->step = conn->step;
    d->slot_bytes = conn->slot_bytes;
}

/* Validate args; fill the kernel's descriptor and each channel's full walk. */
static gpuring_status_t exec_cuda_prepare(const gpuring_exec_args_t *a, exec_cuda_desc_t *d,
                                          exec_cuda_walk_t *walks, uint64_t *total_ops_p)
{
    const size_t es = gpuring_type_size(a->type);
    const gpuring_conn_t *seen[GPURING_EXEC_CUDA_MAX_CHANNELS * 2 * GPURING_MAX_PEERS];
    int nseen = 0;

    if (es == 0 || (unsigned)a->op >= (unsigned)GPURING_OP_COUNT || a->nchannels < 0 ||
        (a->nchannels > 0 && a->channels == NULL)) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: invalid type %d, op %d or %d channels",
                      (int)a->type, (int)a->op, a->nchannels);
        return GPURING_ERR_INVALID;
    }
    if (!gpuring_op_supported(a->type, a->op)) {
        GPURING_DEBUG(GPURING_SUBSYS_KERNEL, "exec_cuda: op %s not defined on type %s",
                      gpuring_op_name(a->op), gpuring_type_name(a->type));
        return GPURING_ERR_NOT_SUPPORTED;
    }
    if (a->nchannels > GPURING_EXEC_CUDA_MAX_CHANNELS) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: %d channels, at most %d", a->nchannels,
                      GPURING_EXEC_CUDA_MAX_CHANNELS);
        return GPURING_ERR_NOT_SUPPORTED;
    }
    if (((uintptr_t)a->sendbuf | (uintptr_t)a->recvbuf | (uintptr_t)a->scratch) % es != 0) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: buffers %p, %p, %p not aligned to "
                      "%zu-byte %s elements", a->sendbuf, a->recvbuf, a->scratch, es,
                      gpuring_type_name(a->type));
        return GPURING_ERR_INVALID;
    }

    memset(d, 0, sizeof(*d));
    d->sendbuf = (const char *)a->sendbuf;
    d->recvbuf = (char *)a->recvbuf;
    d->scratch = (char *)a->scratch;
    d->count = a->count;
    d->call = a->call & GPURING_CALL_MASK;
    d->ll = a->ll;
    d->nchannels = a->nchannels;
    *total_ops_p = 0;
    for (int c = 0; c < a->nchannels; c++) {
        const gpuring_exec_channel_t *ch = &a->channels[c];
        exec_cuda_walk_t *w = &walks[c];

        exec_cuda_walk(&ch->prog, ch->prog.nops, w);
        *total_ops_p += ch->prog.nops;
        if (ch->prog.nops > 0 && (a->recvbuf == NULL || (a->sendbuf == NULL && a->count > 0))) {
            GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: NULL buffer");
            return GPURING_ERR_INVALID;
        }
        if (w->folds && a->scratch == NULL) {
            GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: channel %d folds in order but "
                          "there is no scratch", c);
            return GPURING_ERR_INVALID;
        }
        d->ch[c].prog = ch->prog;
        if (ch->prog.ranks != NULL) {
            /* the kernel reads ring positions' ranks from the device copy */
            if (ch->dev_ranks == NULL) {
                GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: channel %d's program maps "
                              "ring positions to ranks but has no device copy of them", c);
                return GPURING_ERR_INVALID;
            }
            d->ch[c].prog.ranks = ch->dev_ranks;
        }
        for (int i = 0; i < GPURING_MAX_PEERS; i++) {
            const gpuring_conn_t *pair[2] = { (w->recv_used >> i & 1u) ? ch->recv[i] : NULL,
                                              (w->send_used >> i & 1u) ? ch->send[i] : NULL };
            for (int k = 0; k < 2; k++) {
                if (!((k == 0 ? w->recv_used : w->send_used) >> i & 1u)) continue;
                GPURING_CHECK(exec_cuda_check_conn(a, pair[k], k == 0 ? "recv" : "send", c, i,
                                                   w->max_slot_count * es));
                for (int j = 0; j < nseen; j++) {
                    if (seen[j] == pair[k]) {
                        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: a connection to rank "
                                      "%d is used twice (channel %d, peer %d)", pair[k]->peer,
                                      c, i);
                        return GPURING_ERR_INVALID;
                    }
                }
                seen[nseen++] = pair[k];
                exec_cuda_fill_conn(k == 0 ? &d->ch[c].recv[i] : &d->ch[c].send[i], pair[k]);
            }
        }
    }
    return GPURING_OK;
}

/* Channel c of the call ended at op n (of its program): steps and next_op follow. */
static void exec_cuda_account(const gpuring_exec_args_t *a, int c, uint64_t n,
                              const exec_cuda_walk_t *full)
{
    gpuring_exec_channel_t *ch = &a->channels[c];
    exec_cuda_walk_t part;
    const exec_cuda_walk_t *w = full;

    if (n != ch->prog.nops) {
        exec_cuda_walk(&ch->prog, n, &part);
        w = &part;
    }
    EXEC_FOR_PEERS(full->recv_used, i) ch->recv[i]->step += w->recv_steps[i];
    EXEC_FOR_PEERS(full->send_used, i) ch->send[i]->step += w->send_steps[i];
    ch->next_op = n;
}

static const char *exec_cuda_conn_name(const gpuring_conn_t *conn)
{
    return conn->type == GPURING_CONN_NET ? "net" : conn->type == GPURING_CONN_IPC ? "cuda ipc"
                                                                                 : "shm";
}

/* What a recv that waited found (exec_cuda_status_t.seen), in words. */
static void exec_cuda_describe_seen(const gpuring_exec_args_t *a, const gpuring_conn_t *r,
                                    uint64_t seen, char *buf, size_t len)
{
    const uint32_t f0 = (uint32_t)(seen >> 32) & 0x7fffffffu, f1 = (uint32_t)seen;

    if (!gpuring_exec_ll(a, r)) {
        snprintf(buf, len, "simple protocol; tail %llu", (unsigned long long)seen);
    } else if ((seen & EXEC_SEEN_LL_DATA) && f0 == 0 && f1 == 0) {
        snprintf(buf, len, "LL protocol, its header landed; a data pair waited on was never "
                 "written");
    } else if (seen & EXEC_SEEN_LL_DATA) {
        snprintf(buf, len, "LL protocol, its header landed; a data pair waited on holds "
                 "units of steps %lld and %lld", (long long)f0 - 1, (long long)f1 - 1);
    } else {
        const size_t n = (size_t)snprintf(buf, len, "LL protocol; ");

        if (n < len)
            gpuring_ll_describe_header(f0, f1, buf + n, len - n);
    }
    gpuring_conn_report_net(r, r->step, "; ", "", buf, len);
}

/* Name what each unfinished channel waits for (after accounting: steps are current),
 * and what it last saw there. */
static void exec_cuda_report_stall(const gpuring_exec_args_t *a, const exec_cuda_status_t *st)
{
    char seen[512];

    for (int c = 0; c < a->nchannels; c++) {
        const gpuring_exec_channel_t *ch = &a->channels[c];
        const uint32_t w = st->wait[c];
        const int i = (int)(w & 0xffu);
        const unsigned long long op = ch->next_op, nops = ch->prog.nops;

        __atomic_thread_fence(__ATOMIC_ACQUIRE); /* (seen after its word: exec_stop) */
        if (ch->next_op >= ch->prog.nops) continue;
        if ((w >> 8) == EXEC_WAIT_RECV && i < GPURING_MAX_PEERS) {
            exec_cuda_describe_seen(a, ch->recv[i], st->seen[c], seen, sizeof(seen));
            GPURING_ERROR(GPURING_SUBSYS_KERNEL,
                          "%s timed out after %.0f s: channel %d waits for step %llu "
                          "from rank %d (%s connection, op %llu of %llu, cuda executor; %s)",
                          gpuring_exec_coll_name(a), a->timeout, c, (unsigned long long)ch->recv[i]->step,
                          ch->recv[i]->peer, exec_cuda_conn_name(ch->recv[i]), op, nops, seen);
        } else if ((w >> 8) == EXEC_WAIT_SEND && i < GPURING_MAX_PEERS) {
            snprintf(seen, sizeof(seen), "head %llu", (unsigned long long)st->seen[c]);
            gpuring_conn_report_net(ch->send[i], st->seen[c], "; ", "", seen,
                                    sizeof(seen)); /* the step not yet freed */
            GPURING_ERROR(GPURING_SUBSYS_KERNEL,
                          "%s timed out after %.0f s: channel %d waits for rank %d to "
                          "free a slot for step %llu (%s connection, op %llu of %llu, cuda "
                          "executor; %s)", gpuring_exec_coll_name(a), a->timeout, c,
                          ch->send[i]->peer, (unsigned long long)ch->send[i]->step,
                          exec_cuda_conn_name(ch->send[i]), op, nops, seen);
        } else {
            GPURING_ERROR(GPURING_SUBSYS_KERNEL,
                          "%s timed out after %.0f s: channel %d stopped at op %llu of "
                          "%llu (cuda executor; the kernel did not say what it waits for)",
                          gpuring_exec_coll_name(a), a->timeout, c, op, nops);
        }
    }
}

/* A channel that stopped on a step of another call, or an abandoned one: the
 * call's status (GPURING_OK: none), logged once by exec_cuda_report_stop. */
static gpuring_status_t exec_cuda_stopped(const exec_cuda_status_t *st, int nchannels)
{
    gpuring_status_t rc = GPURING_OK;

    for (int c = 0; st != NULL && c < nchannels && rc != GPURING_ERR_MISMATCH; c++) {
        if ((st->wait[c] >> 8) == EXEC_STOP_MISMATCH) rc = GPURING_ERR_MISMATCH;
        if ((st->wait[c] >> 8) == EXEC_STOP_ABANDONED || (st->wait[c] >> 8) == EXEC_STOP_REFUSED)
            rc = GPURING_ERR_REMOTE;
    }
    return rc;
}

/* Name the peer of each channel that stopped on a step of another call or an abandoned one. */
static void exec_cuda_report_stop(const gpuring_exec_args_t *a, const exec_cuda_status_t *st)
{
    for (int c = 0; c < a->nchannels; c++) {
        const uint32_t w = st->wait[c];
        const uint32_t kind = w >> 8;
        const int i = (int)(w & 0xffu);
        gpuring_step_t s;

        __atomic_thread_fence(__ATOMIC_ACQUIRE); /* (got_bytes after its word: exec_stop) */
        if (kind < EXEC_STOP_MISMATCH || i >= GPURING_MAX_PEERS) continue;
        if (kind == EXEC_STOP_REFUSED) {
            gpuring_conn_report_refused(a->channels[c].send[i], c, gpuring_exec_coll_name(a),
                                        " (cuda executor)");
            continue;
        }
        gpuring_prog_op(&a->channels[c].prog, a->channels[c].next_op, &s);
        gpuring_conn_report_check(a->channels[c].recv[i], c,
                                  kind == EXEC_STOP_ABANDONED ? GPURING_ERR_REMOTE
                                                              : GPURING_ERR_MISMATCH,
                                  st->got_bytes, s.count * gpuring_type_size(a->type), a->count,
                                  gpuring_type_name(a->type), gpuring_exec_coll_name(a),
                                  " (cuda executor)", a->channels[c].send, GPURING_MAX_PEERS);
    }
}

static uint64_t exec_cuda_progress_sum(const exec_cuda_status_t *st, int nchannels)
{
    uint64_t sum = 0;
    if (st == NULL) return 0; /* a kernel that reports no progress */
    for (int c = 0; c < nchannels; c++) sum += st->progress[c];
    return sum;
}

/*
 * Poll the stream until it is idle, `timeout` passes without progress and no
 * rank of this host is late to call `seq` (the arrival board, which may be NULL:
 * *stop_p = its verdict, GPURING_ERR_TIMEOUT), a channel stopped on a step of another call
 * or an abandoned one (*stop_p = exec_cuda_stopped's), or, where the call has
 * a proxy (a->proxy) and this is its kernel (st), one of its NET connections
 * failed (*stop_p = its status, logged): those peers never answer then.  With a
 * proxy, every poll also runs one of its passes (an abandon kernel's wait, st
 * NULL, wants those alone: its steps go out from them, and a connection that
 * failed before must not cut short the wait of those that did not).
 */
/* the MPI library's other operations (gpuring_wait_progress) every this many idle polls:
 * a small call's short wait pays nothing for them */
#define EXEC_CUDA_PROGRESS_EVERY 16
static cudaError_t exec_cuda_poll(cudaStream_t stream, const exec_cuda_status_t *st,
                                  int nchannels, double timeout, gpuring_arrivals_t *arrivals,
                                  uint64_t seq, const gpuring_exec_args_t *a,
                                  gpuring_status_t *stop_p)
{
    struct gpuring_proxy *proxy = a != NULL ? a->proxy : NULL;

    gpuring_spin_t spin;
    uint64_t seen = exec_cuda_progress_sum(st, nchannels);
    double late_since = 0.0;
    unsigned idle = 0;

    *stop_p = GPURING_OK;
    gpuring_spin_init(&spin, timeout);
    for (;;) {
        cudaError_t err = cudaStreamQuery(stream);
        uint64_t now;

        if (err != cudaErrorNotReady) return err;
        if (proxy != NULL && gpuring_proxy_progress != NULL) (void)gpuring_proxy_progress(proxy);
        *stop_p = exec_cuda_stopped(st, nchannels);
        if (*stop_p != GPURING_OK) return cudaErrorNotReady; /* the others must leave too */
        now = exec_cuda_progress_sum(st, nchannels);
        if (now != seen) {
            seen = now;
            gpuring_spin_init(&spin, timeout);
            continue;
        }
        if (st != NULL && proxy != NULL && gpuring_exec_net_error != NULL) {
            char msg[256];
            *stop_p = gpuring_exec_net_error(a, msg, sizeof(msg));
            if (*stop_p != GPURING_OK) {
                GPURING_ERROR(GPURING_SUBSYS_KERNEL, "call aborted: %s", msg);
                return cudaErrorNotReady;
            }
        }
        if (++idle % EXEC_CUDA_PROGRESS_EVERY == 0) {
            gpuring_wait_progress();
            /* a rank of this host that makes no call any more (its communicator failed),
             * or another call under this one's number */
            *stop_p = gpuring_arrivals_stop(arrivals, seq);
            if (*stop_p != GPURING_OK) return cudaErrorNotReady;
        }
        if (gpuring_spin_tick(&spin) != GPURING_OK) {
            /* a rank of this host that has not made the call yet: waited for */
            *stop_p = gpuring_arrivals_excuse(arrivals, seq, timeout, &late_since);
            if (*stop_p != GPURING_OK) return cudaErrorNotReady;
            gpuring_spin_init(&spin, timeout);
        }
    }
}

/*
 * Wait for the kernel just launched on `stream` with status entry st and n blocks
 * (exec_cuda_poll, *stop_p its stop); where a stop ends the wait, tell the kernel to leave
 * its waits and give it EXEC_CUDA_ABORT_WAIT_SEC (no status then: the stops recorded so
 * far would end that wait at once): *exited_p 0 if it did not leave.  The stream's status.
 */
static cudaError_t exec_cuda_watch(cudaStream_t stream, exec_cuda_status_t *st, int n,
                                   double timeout, gpuring_arrivals_t *arrivals, uint64_t seq,
                                   const gpuring_exec_args_t *a, gpuring_status_t *stop_p,
                                   int *exited_p)
{
    gpuring_status_t abort_stop;
    cudaError_t err = exec_cuda_poll(stream, st, n, timeout, arrivals, seq, a, stop_p);

    GPURING_PROF_MARK(GPURING_PROF_RUN);
    *exited_p = 1;
    if (*stop_p == GPURING_OK) return err;
    st->abort = 1;
    __sync_synchronize();
    err = exec_cuda_poll(stream, NULL, n, EXEC_CUDA_ABORT_WAIT_SEC, NULL, 0, NULL, &abort_stop);
    *exited_p = abort_stop == GPURING_OK;
    return err;
}

/*
 * A failed call's kernel (or abandon kernel) has left: each NET send end it
 * marked abandoned (every slot taken, no room for the abort step: exec_abandon)
 * goes to the proxy, which posts the step once a send completes, as the host
 * executor's do (gpuring_conn_net_abort_later; the step is conn->step, accounted
 * by now).  Its receiver then fails at once, not at its timeout.
 */
static void exec_cuda_net_abort_later(const gpuring_exec_args_t *a)
{
    if (gpuring_conn_net_abort_later == NULL) return; /* no proxy linked: no NET ends */
    for (int c = 0; c < a->nchannels; c++) {
        for (int i = 0; i < GPURING_MAX_PEERS; i++) {
            gpuring_conn_t *w = a->channels[c].send[i];
            const gpuring_fifo_ctrl_t *host; /* the ctrl's host view: w->ctrl is the GPU's */

            if (w == NULL || w->type != GPURING_CONN_NET || w->mapped_host == NULL) continue;
            host = (const gpuring_fifo_ctrl_t *)w->mapped_host;
            if (GPURING_LOAD_ACQUIRE(&host->abandoned)) gpuring_conn_net_abort_later(w);
        }
    }
}

extern "C" gpuring_status_t gpuring_exec_cuda_run(const gpuring_exec_args_t *a, void *stream_v)
{
    cudaStream_t stream = (cudaStream_t)stream_v;
    exec_cuda_desc_t desc; /* about 11 KiB at 32 channels; host threads have the stack */
    exec_cuda_walk_t walks[GPURING_EXEC_CUDA_MAX_CHANNELS];
    exec_cuda_status_t *st, *st_dev;
    uint64_t total_ops;
    const void *fn;
    void *params[1] = { &desc };
    gpuring_status_t rc, stop, stopped;
    cudaError_t err;
    int ix, exited;

    if (a == NULL) return GPURING_ERR_INVALID;
    GPURING_CHECK(exec_cuda_prepare(a, &desc, walks, &total_ops));
    fn = exec_cuda_kernel_of<exec_fifo_kernels>(a->type, a->op);
    if (fn == NULL) return GPURING_ERR_INVALID;
    if (total_ops == 0) {
        for (int c = 0; c < a->nchannels; c++) a->channels[c].next_op = 0;
        return GPURING_OK;
    }

    GPURING_CHECK(exec_cuda_ready());
    ix = exec_cuda_status_take("exec_cuda", &st, &st_dev);
    if (ix < 0) {
        /* (held by kernels that never left): the peers are told, as on a failed launch */
        (void)gpuring_exec_cuda_abandon(a, stream);
        return GPURING_ERR_CUDA;
    }
    desc.status = st_dev;

    err = cudaLaunchKernel(fn, dim3((unsigned)a->nchannels), dim3(GPURING_EXEC_CUDA_THREADS),
                           params, 0, stream);
    if (err != cudaSuccess) {
        GPURING_CUDA_LOG_FAILURE(err, "cudaLaunchKernel(exec_cuda)");
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: %s %s, %d channels failed to launch",
                      gpuring_type_name(a->type), gpuring_op_name(a->op), a->nchannels);
        exec_cuda_pool_put(ix);
        /* no step moved: the peers wait for this rank's steps or slots -- tell them (the
         * one-thread abandon blocks launch where a failure of these blocks' size did
         * not: too many registers, say) */
        (void)gpuring_exec_cuda_abandon(a, stream);
        return GPURING_ERR_CUDA;
    }
    GPURING_PROF_MARK(GPURING_PROF_LAUNCH);

    err = exec_cuda_watch(stream, st, a->nchannels, a->timeout, a->arrivals, a->call_seq, a, &stop,
                          &exited);
    rc = stop;
    if (err != cudaSuccess && err != cudaErrorNotReady) {
        GPURING_CUDA_LOG_FAILURE(err, "cudaStreamQuery(exec_cuda)");
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: the %s %s kernel failed",
                      gpuring_type_name(a->type), gpuring_op_name(a->op));
        rc = GPURING_ERR_CUDA;
    }
    int finished = exited && err == cudaSuccess;
    for (int c = 0; c < a->nchannels; c++) {
        uint64_t n = st->progress[c];
        exec_cuda_account(a, c, n <= a->channels[c].prog.nops ? n : 0, &walks[c]);
        finished = finished && n == a->channels[c].prog.nops;
    }
    if (stop == GPURING_ERR_TIMEOUT && finished) {
        /* the last steps came in during the grace period: the call is complete */
        GPURING_WARN(GPURING_SUBSYS_KERNEL, "exec_cuda: the kernel finished just after the "
                     "%.0f s timeout", a->timeout);
        rc = GPURING_OK;
    } else if (stop == GPURING_ERR_TIMEOUT) {
        exec_cuda_report_stall(a, st);
    }
    stopped = exec_cuda_stopped(st, a->nchannels);
    if (stopped != GPURING_OK) {
        exec_cuda_report_stop(a, st); /* after accounting: the steps are current */
        /* the kernel may have ended before the poll saw the stop; after a timeout of
         * this rank's, its own channels' abandoned steps are what its peers see */
        if (rc == GPURING_OK) rc = stopped;
    }
    if (rc != GPURING_OK && exited) exec_cuda_net_abort_later(a);
    exec_cuda_status_give("exec_cuda", ix, exited, stream);
    return rc;
}

/*
 * Launch an abandon kernel (fn: `blocks` blocks of one thread, its descriptor in params)
 * on `stream` and wait for it up to EXEC_CUDA_ABORT_WAIT_SEC, running the proxy's passes
 * where there is one (NET ends' steps go out from them, and from the last).  Queued
 * behind the application's legacy-stream work that the call waits for, it stores when
 * that ends (a NET end's step then goes out at a pass of the proxy): GPURING_OK.  A
 * failure is logged, GPURING_ERR_CUDA: the peers wait for their timeout.
 */
static gpuring_status_t exec_cuda_abandon_launch(const void *fn, unsigned blocks,
                                                 void **params, cudaStream_t stream,
                                                 const gpuring_exec_args_t *a)
{
    struct gpuring_proxy *proxy = a != NULL ? a->proxy : NULL;
    gpuring_status_t stop;
    cudaError_t err = cudaLaunchKernel(fn, dim3(blocks), dim3(1), params, 0, stream);

    if (err == cudaSuccess) {
        err = exec_cuda_poll(stream, NULL, (int)blocks, EXEC_CUDA_ABORT_WAIT_SEC, NULL, 0, a,
                             &stop);
        if (proxy != NULL && gpuring_proxy_progress != NULL) (void)gpuring_proxy_progress(proxy);
    }
    if (err == cudaErrorNotReady) {
        GPURING_DEBUG(GPURING_SUBSYS_KERNEL, "exec_cuda: the abandon is queued behind earlier "
                      "work on the stream");
        return GPURING_OK;
    }
    if (err != cudaSuccess) {
        GPURING_CUDA_LOG_FAILURE(err, "exec_cuda_abandon");
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda: cannot tell the peers that this rank "
                      "gave up on the call: they wait for it until their timeout");
        return GPURING_ERR_CUDA;
    }
    return GPURING_OK;
}

extern "C" gpuring_status_t gpuring_exec_cuda_abandon(const gpuring_exec_args_t *a,
                                                      void *stream_v)
{
    cudaStream_t stream = (cudaStream_t)stream_v;
    exec_cuda_desc_t desc; /* the channels' connections alone */
    void *params[1] = { &desc };

    if (a == NULL || a->nchannels <= 0 || a->channels == NULL) return GPURING_OK;
    if (a->nchannels > GPURING_EXEC_CUDA_MAX_CHANNELS) return GPURING_ERR_INVALID;
    memset(&desc, 0, sizeof(desc));
    desc.nchannels = a->nchannels;
    for (int c = 0; c < a->nchannels; c++) {
        for (int i = 0; i < GPURING_MAX_PEERS; i++) {
            if (a->channels[c].send[i] != NULL)
                exec_cuda_fill_conn(&desc.ch[c].send[i], a->channels[c].send[i]);
            if (a->channels[c].recv[i] != NULL) /* refused */
                exec_cuda_fill_conn(&desc.ch[c].recv[i], a->channels[c].recv[i]);
        }
    }
    GPURING_CHECK(exec_cuda_ready());
    GPURING_CHECK(exec_cuda_abandon_launch(GPURING_DEV_KERNEL(exec_cuda_abandon_kernel),
                                           (unsigned)a->nchannels, params, stream, a));
    /* (still queued behind the application's work: a full NET end's step is left to
     * its receiver's timeout) */
    if (cudaStreamQuery(stream) == cudaSuccess) exec_cuda_net_abort_later(a);
    return GPURING_OK;
}

/* ---- host: the direct allreduce ------------------------------------------------------ */
#define EXEC_DIRECT_MIN_BLOCK_BYTES (64 * 1024) /* less per block is not worth a block */

extern "C" gpuring_status_t gpuring_exec_cuda_direct(const gpuring_exec_direct_args_t *a,
                                                     void *stream_v)
{
    cudaStream_t stream = (cudaStream_t)stream_v;
    const size_t es = a != NULL ? gpuring_type_size(a->type) : 0;
    exec_direct_desc_t d;
    void *params[1] = { &d };
    const void *fn;
    size_t blocks, pack_elems;
    int device = 0, sms = 0, per_sm = 0;
    gpuring_status_t stop;
    cudaError_t err;

    if (a == NULL || es == 0 || a->nranks < 1 || a->nranks > GPURING_EXEC_DIRECT_MAX_RANKS) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda_direct: invalid type or %d ranks",
                      a != NULL ? a->nranks : 0);
        return GPURING_ERR_INVALID;
    }
    fn = exec_cuda_kernel_of<exec_direct_kernels>(a->type, a->op);
    if (fn == NULL) return GPURING_ERR_INVALID;
    if (a->count == 0) return GPURING_OK;

    memset(&d, 0, sizeof(d));
    d.nranks = a->nranks;
    d.count = a->count;
    for (int r = 0; r < a->nranks; r++) {
        if (a->in[r] == NULL || a->out[r] == NULL ||
            ((uintptr_t)a->in[r] | (uintptr_t)a->out[r]) % es != 0) {
            GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda_direct: rank %d's buffers %p, %p "
                          "are NULL or not aligned to %zu-byte elements", r, a->in[r],
                          a->out[r], es);
            return GPURING_ERR_INVALID;
        }
        d.in[r] = (const char *)a->in[r];
        d.out[r] = (char *)a->out[r];
    }
    /* blocks: enough to fill the GPU, none with less than a worthwhile share
     * (a call of one share asks the device nothing: small calls are latency) */
    pack_elems = sizeof(uint4) / es;
    blocks = GPURING_DIV_UP(a->count * es, (size_t)EXEC_DIRECT_MIN_BLOCK_BYTES);
    if (blocks > 1) {
        GPURING_CUDA_CHECK(cudaGetDevice(&device));
        GPURING_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        /* one wave: as many blocks as fit on the SMs at once (registers decide) */
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, GPURING_EXEC_CUDA_THREADS,
                                                          0) != cudaSuccess) {
            (void)cudaGetLastError();
            per_sm = 1;
        }
        per_sm = GPURING_MAX(per_sm, 1);
        blocks = GPURING_MAX((size_t)1, GPURING_MIN(blocks, (size_t)sms * (size_t)per_sm));
    }
    d.per_block = GPURING_DIV_UP(GPURING_DIV_UP(a->count, blocks), pack_elems) * pack_elems;
    blocks = GPURING_DIV_UP(a->count, d.per_block);

    err = cudaLaunchKernel(fn, dim3((unsigned)blocks), dim3(GPURING_EXEC_CUDA_THREADS), params, 0,
                           stream);
    if (err != cudaSuccess) {
        GPURING_CUDA_LOG_FAILURE(err, "cudaLaunchKernel(exec_direct)");
        return GPURING_ERR_CUDA;
    }
    GPURING_PROF_MARK(GPURING_PROF_LAUNCH);
    err = exec_cuda_poll(stream, NULL, 0, a->timeout, NULL, 0, NULL, &stop);
    GPURING_PROF_MARK(GPURING_PROF_RUN);
    if (stop == GPURING_ERR_TIMEOUT) {
        /* it waits for nobody, so it ends; until then it writes every rank's buffers,
         * which must not be freed under it: the error is returned once it has */
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "allreduce timed out after %.0f s: the direct "
                      "kernel (%zu %s, %d ranks) did not finish (a GPU shared with long "
                      "kernels?); waiting for it before returning the error", a->timeout,
                      a->count, gpuring_type_name(a->type), a->nranks);
        if (cudaStreamSynchronize(stream) != cudaSuccess) (void)cudaGetLastError();
        return GPURING_ERR_TIMEOUT;
    }
    if (err != cudaSuccess) {
        GPURING_CUDA_LOG_FAILURE(err, "cudaStreamQuery(exec_direct)");
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda_direct: the %s %s kernel failed",
                      gpuring_type_name(a->type), gpuring_op_name(a->op));
        return GPURING_ERR_CUDA;
    }
    return GPURING_OK;
}

/* ---- host: the LL direct allreduce --------------------------------------------------- */
/* blocks of the LL direct kernel: 2 pairs (16 data bytes) per thread and trip, at most 16
 * blocks (64 KiB: 8 blocks, 1 MiB: 16 of 8,192 pairs) */
#define EXEC_DIRECT_LL_PAIRS_PER_THREAD 2
#define EXEC_DIRECT_LL_MAX_BLOCKS 16

/* What stopped the LL direct kernel (rc), logged: a header of another call or a peer's
 * abandon, or (timeout) the peers its blocks were still waiting for, each once; a
 * stop the poll logged itself (a rank of this host that makes no call any more) names
 * no wait again. */
static void exec_direct_ll_report(const gpuring_exec_direct_ll_args_t *a,
                                  const exec_cuda_status_t *st, int blocks, gpuring_status_t rc)
{
    unsigned named = 0;

    for (int b = 0; b < blocks; b++) {
        const uint32_t w = st->wait[b];
        const uint32_t kind = w >> 8;
        const int r = (int)(w & 0xffu);

        __atomic_thread_fence(__ATOMIC_ACQUIRE); /* (seen, got_bytes after its word) */
        if (kind == 0 || r >= GPURING_EXEC_DIRECT_MAX_RANKS || (named >> r & 1u)) continue;
        named |= 1u << r;
        if (kind == EXEC_STOP_ABANDONED) {
            GPURING_ERROR(GPURING_SUBSYS_COLL, "allreduce abandoned: rank %d gave up on the call "
                          "(LL direct allreduce, %zu %s; that rank's log says why)", r, a->count,
                          gpuring_type_name(a->type));
        } else if (kind == EXEC_STOP_MISMATCH) {
            GPURING_ERROR(GPURING_SUBSYS_COLL, "allreduce mismatch: rank %d makes another call "
                          "than this rank's %zu %s (LL direct allreduce; that rank's call is %llu "
                          "bytes): the ranks passed different counts, datatypes or ops, or made "
                          "their calls in a different order", r, a->count, gpuring_type_name(a->type),
                          (unsigned long long)st->got_bytes);
        } else if (kind == EXEC_STOP_LATE) {
            GPURING_ERROR(GPURING_SUBSYS_KERNEL, "allreduce given up: this rank's LL direct "
                          "kernel (%zu %s, its call %llu) started only after its host had "
                          "given the call up (%s), queued behind other work on its stream "
                          "(the application's, on the default stream?): it wrote no output",
                          a->count, gpuring_type_name(a->type), (unsigned long long)a->seq,
                          gpuring_status_str(rc));
        } else if (kind == EXEC_WAIT_RECV && rc == GPURING_ERR_TIMEOUT) {
            GPURING_ERROR(GPURING_SUBSYS_KERNEL, "allreduce timed out after %.0f s: the LL "
                          "direct allreduce (%zu %s, its call %llu) waits for rank %d's %s (flags "
                          "seen %#x, %#x; want %#x): that rank died, or makes another call or "
                          "none", a->timeout, a->count, gpuring_type_name(a->type),
                          (unsigned long long)a->seq, r,
                          (st->seen[b] & EXEC_SEEN_LL_DATA) ? "data" : "header",
                          (unsigned)(st->seen[b] >> 32 & 0x7fffffffu), (unsigned)st->seen[b],
                          gpuring_ll_flag(a->seq));
        }
    }
}

/* The LL direct call's descriptor (its kernel's, or its abandon kernel's; status and
 * blocks left to the launch), its arguments checked: GPURING_ERR_INVALID (logged). */
static gpuring_status_t exec_direct_ll_desc(const gpuring_exec_direct_ll_args_t *a,
                                            exec_direct_ll_desc_t *d)
{
    const size_t es = a != NULL ? gpuring_type_size(a->type) : 0;
    size_t row_units;

    if (a == NULL || es == 0 || a->nranks < 1 || a->nranks > GPURING_EXEC_DIRECT_MAX_RANKS ||
        a->rank < 0 || a->rank >= a->nranks || a->count * es > GPURING_EXEC_DIRECT_LL_MAX_BYTES ||
        a->slot_bytes < GPURING_EXEC_DIRECT_LL_SLOT_BYTES(a->count * es) ||
        a->slot_bytes % 64 != 0 || a->inbox == NULL || (uintptr_t)a->inbox % 16 != 0) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda_direct_ll: invalid arguments (%zu "
                      "elements, %d ranks, %zu B slots)", a != NULL ? a->count : 0,
                      a != NULL ? a->nranks : 0, a != NULL ? a->slot_bytes : 0);
        return GPURING_ERR_INVALID;
    }
    memset(d, 0, sizeof(*d));
    row_units = (size_t)a->nranks * a->slot_bytes / 8;
    d->slot_units = a->slot_bytes / 8;
    d->row = (volatile uint64_t *)a->inbox + (a->seq & 1) * row_units;
    if (gpuring_ll_clean_due(a->seq + 1, 2))
        d->clean = (volatile uint64_t *)a->inbox + ((a->seq + 1) & 1) * row_units;
    for (int r = 0; r < a->nranks; r++) {
        if (r == a->rank) continue;
        if (a->peer_inbox[r] == NULL || (uintptr_t)a->peer_inbox[r] % 16 != 0) {
            GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda_direct_ll: rank %d's inbox %p is "
                          "not mapped or not aligned", r, a->peer_inbox[r]);
            return GPURING_ERR_INVALID;
        }
        d->to[r] = (volatile uint64_t *)a->peer_inbox[r] + (a->seq & 1) * row_units +
                   (size_t)a->rank * d->slot_units;
    }
    d->sendbuf = (const char *)a->sendbuf;
    d->recvbuf = (char *)a->recvbuf;
    d->count = a->count;
    d->call = a->call;
    d->flag = gpuring_ll_flag(a->seq);
    d->nranks = a->nranks;
    d->rank = a->rank;
    return GPURING_OK;
}

extern "C" gpuring_status_t gpuring_exec_cuda_direct_ll_abandon(
    const gpuring_exec_direct_ll_args_t *a, void *stream_v)
{
    exec_direct_ll_desc_t d;
    void *params[1] = { &d };

    GPURING_CHECK(exec_direct_ll_desc(a, &d));
    GPURING_CHECK(exec_cuda_ready());
    return exec_cuda_abandon_launch(GPURING_DEV_KERNEL(exec_direct_ll_abandon_kernel), 1, params,
                                    (cudaStream_t)stream_v, NULL);
}

extern "C" gpuring_status_t gpuring_exec_cuda_direct_ll(const gpuring_exec_direct_ll_args_t *a,
                                                        void *stream_v)
{
    cudaStream_t stream = (cudaStream_t)stream_v;
    const size_t es = a != NULL ? gpuring_type_size(a->type) : 0;
    exec_direct_ll_desc_t d;
    void *params[1] = { &d };
    exec_cuda_status_t *st, *st_dev;
    gpuring_status_t stop, rc;
    const void *fn;
    size_t npairs;
    int blocks, ix, exited;
    cudaError_t err;

    GPURING_CHECK(exec_direct_ll_desc(a, &d));
    fn = exec_cuda_kernel_of<exec_direct_ll_kernels>(a->type, a->op);
    if (fn == NULL) return GPURING_ERR_INVALID;
    if (a->count == 0) return GPURING_OK;
    npairs = GPURING_DIV_UP(a->count * es, (size_t)EXEC_LL_PAIR_BYTES);
    blocks = (int)GPURING_MIN(GPURING_DIV_UP(npairs, (size_t)EXEC_DIRECT_LL_PAIRS_PER_THREAD *
                                                         GPURING_EXEC_CUDA_THREADS),
                              (size_t)EXEC_DIRECT_LL_MAX_BLOCKS);
    d.per_block = GPURING_DIV_UP(npairs, (size_t)blocks);

    GPURING_CHECK(exec_cuda_ready());
    ix = exec_cuda_status_take("exec_cuda_direct_ll", &st, &st_dev);
    if (ix < 0) { /* (held by kernels that never left): the peers are told */
        (void)exec_cuda_abandon_launch(GPURING_DEV_KERNEL(exec_direct_ll_abandon_kernel), 1,
                                       params, stream, NULL);
        return GPURING_ERR_CUDA;
    }
    d.status = st_dev;

    err = cudaLaunchKernel(fn, dim3((unsigned)blocks), dim3(GPURING_EXEC_CUDA_THREADS), params, 0,
                           stream);
    if (err != cudaSuccess) {
        GPURING_CUDA_LOG_FAILURE(err, "cudaLaunchKernel(exec_direct_ll)");
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda_direct_ll: %s %s, %d blocks failed to "
                      "launch", gpuring_type_name(a->type), gpuring_op_name(a->op), blocks);
        exec_cuda_pool_put(ix);
        (void)exec_cuda_abandon_launch(GPURING_DEV_KERNEL(exec_direct_ll_abandon_kernel), 1,
                                       params, stream, NULL);
        return GPURING_ERR_CUDA;
    }
    GPURING_PROF_MARK(GPURING_PROF_LAUNCH);
    err = exec_cuda_watch(stream, st, blocks, a->timeout, a->arrivals, a->call_seq, NULL, &stop,
                          &exited);
    rc = stop;
    /* a block that stopped on another call's header may have left before the poll looked */
    if (rc == GPURING_OK && err == cudaSuccess) rc = exec_cuda_stopped(st, blocks);
    int complete = rc == GPURING_ERR_TIMEOUT && exited && err == cudaSuccess;
    for (int b = 0; b < blocks; b++) complete = complete && st->wait[b] == 0;
    if (complete) {
        /* every block had all its units (one that gave up says what it waited for):
         * the last came in during the grace period, the call is complete */
        GPURING_WARN(GPURING_SUBSYS_KERNEL, "exec_cuda_direct_ll: the kernel finished just "
                     "after the %.0f s timeout", a->timeout);
        rc = GPURING_OK;
    }
    if (rc != GPURING_OK) exec_direct_ll_report(a, st, blocks, rc);
    if (err != cudaSuccess && err != cudaErrorNotReady) {
        GPURING_CUDA_LOG_FAILURE(err, "cudaStreamQuery(exec_direct_ll)");
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "exec_cuda_direct_ll: the %s %s kernel failed",
                      gpuring_type_name(a->type), gpuring_op_name(a->op));
        rc = GPURING_ERR_CUDA;
    }
    exec_cuda_status_give("exec_cuda_direct_ll", ix, exited, stream);
    return rc;
}
