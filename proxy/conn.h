/*
 * conn.h -- one connection: one direction, one peer, one channel.
 *
 * The connection contract of DESIGN.md.  A receiver owns NSTEPS slots of
 * slot_bytes each and two counters:
 *   tail  steps the sender has posted   (written by the sender side)
 *   head  steps the receiver consumed   (written by the receiver side)
 * The sender may write step s into slot s % NSTEPS once head + NSTEPS > s,
 * records the step's byte count in size[s % NSTEPS], then publishes
 * tail = s + 1 (release): gpuring_conn_post().  The receiver waits for tail > s
 * (acquire), uses the slot, then publishes head = s + 1 (release).
 *
 * An executor sees every connection the same way, through gpuring_conn_t:
 * `slots` and `ctrl` are where it reads/writes.  What differs is who else
 * touches them:
 *   SHM  (proxy/conn_shm.c): slots and ctrl live in the receiver's POSIX
 *        shared memory segment, mapped by the sender; no thread in between.
 *   NET  (proxy/conn_net_ucx.c): each side has local slots and ctrl; the
 *        proxy thread moves slots sender -> receiver over UCX and advances
 *        the receiver's tail and the sender's head (credits).  ctrl is host
 *        memory; the slots too (host staging), or device memory when UCX
 *        moves CUDA memory itself (GPU-direct, `slots_device`).
 *   IPC  (proxy/conn_cuda.c): slots and ctrl live in the receiver's device
 *        memory, opened by the sender through a CUDA IPC handle; only GPU
 *        kernels touch them.
 * For a GPU kernel, a NET end's host FIFO is registered with CUDA and
 * `slots`/`ctrl` point at its device view (gpuring_conn_map_device); the
 * proxy keeps using the host view.
 */
#ifndef GPURING_PROXY_CONN_H
#define GPURING_PROXY_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "common/gpuring_common.h"

#define GPURING_NSTEPS 8

typedef enum {
    GPURING_CONN_SHM = 1,
    GPURING_CONN_NET = 2,
    GPURING_CONN_IPC = 3,
} gpuring_conn_type_t;

typedef enum {
    GPURING_CONN_SEND = 0,
    GPURING_CONN_RECV = 1,
} gpuring_conn_dir_t;

/*
 * Counters on separate cache lines: the sender writes tail, the receiver
 * head.  Per slot, written by the sender before its tail: size[], the byte
 * count of the slot's latest step (the length of the UCX message on NET
 * connections), and call[], the id of the call that step belongs to
 * (gpuring_call_id: which call of the communicator, with its collective,
 * root, count, type and op).  The receiver checks both against its own call before it uses the
 * slot, so ranks that made different calls fail instead of mixing data; a
 * step posted with call id GPURING_CALL_ABORT says the sender abandoned the
 * call (gpuring_conn_post_abort).  Only the low GPURING_CALL_BITS bits are
 * compared: a NET step carries them in its UCX tag.  The other way, a
 * receiver that gave up on a call sets `refused` (gpuring_conn_refuse, on
 * head's line: never set again or cleared, as its communicator is done): a
 * sender waiting for a free slot the receiver will never give fails at
 * once instead of at its timeout (gpuring_conn_refused; a NET receiver's
 * proxy carries it to the sender's ctrl in a credit message).  A sender
 * that gave up while every slot was taken (no room for its abandon step)
 * sets `abandoned` instead (gpuring_conn_abandon_full, on tail's line, which
 * the receiver reads anyway): the receiver, once it has read every step
 * posted, fails at once (SHM and CUDA IPC, both executors; a NET end's proxy
 * posts the abandon step once a slot frees).  The ctrl
 * lives here, not in the transport, so a GPU kernel writing the FIFO records
 * it the same way.
 */
typedef struct gpuring_fifo_ctrl {
    uint64_t tail;
    uint64_t abandoned; /* the sender gave up with no slot free (gpuring_conn_abandon_full) */
    char pad0[GPURING_CACHELINE - 2 * sizeof(uint64_t)];
    uint64_t head;
    uint64_t refused;
    char pad1[GPURING_CACHELINE - 2 * sizeof(uint64_t)];
    uint64_t size[GPURING_NSTEPS];
    uint64_t call[GPURING_NSTEPS];
    /* NET recv ends run by the host executor: steps straight into the caller's
     * output (zero copy, below) */
    uint64_t land[GPURING_NSTEPS];       /* address asked for step land_step - 1 */
    uint64_t land_bytes[GPURING_NSTEPS]; /* and its exact byte count */
    uint64_t land_step[GPURING_NSTEPS];  /* step + 1 of that ask, 0: none */
    uint64_t at[GPURING_NSTEPS];         /* where the landed step is, 0: its slot */
} gpuring_fifo_ctrl_t;

#define GPURING_CALL_BITS 16
#define GPURING_CALL_MASK ((1ull << GPURING_CALL_BITS) - 1)
#define GPURING_CALL_ABORT GPURING_CALL_MASK /* never a call's id */

/* The id of a communicator's call number `seq` (every rank counts its calls
 * the same way) of collective `coll` (which one: the caller's numbering) with
 * root `root` (0 where there is none) of `count` elements of `type` with
 * `op`: a hash in [0, GPURING_CALL_ABORT). */
static inline uint64_t gpuring_call_id(uint64_t seq, uint64_t count, int type, int op, int coll,
                                       int root)
{
    uint64_t h = seq * 0x9e3779b97f4a7c15ull ^ count * 0xc2b2ae3d27d4eb4full ^
                 ((uint64_t)type << 8 | (uint64_t)op) * 0x165667b19e3779f9ull ^
                 ((uint64_t)(uint32_t)coll << 32 | (uint32_t)root) * 0x94d049bb133111ebull;

    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return (h & GPURING_CALL_MASK) % GPURING_CALL_ABORT;
}

typedef struct gpuring_conn gpuring_conn_t;

/*
 * What a connection publishes to its peer through bootstrap_mpi (one entry of
 * the connection-handle allgather).  Fixed size, plain bytes.
 */
#define GPURING_SHM_NAME_MAX 64
#define GPURING_IPC_HANDLE_BYTES 64 /* CUDA_IPC_HANDLE_SIZE */
typedef struct gpuring_conn_handle {
    int32_t peer;    /* the rank at the other end */
    int32_t channel;
    int32_t dir;     /* gpuring_conn_dir_t of the publishing side */
    int32_t type;    /* gpuring_conn_type_t */
    uint32_t net_id; /* NET: id of this end at its process (tags) */
    int32_t kind;    /* the caller's label telling apart connections of one channel to
                        one peer (ring, tree up, tree down); matched, never interpreted */
    uint64_t slot_bytes;
    union {
        char shm_name[GPURING_SHM_NAME_MAX];            /* SHM receiver: segment name */
        unsigned char ipc[GPURING_IPC_HANDLE_BYTES];    /* IPC receiver: cudaIpcMemHandle_t */
    } where;
} gpuring_conn_handle_t;

struct gpuring_net_conn; /* proxy/conn_net_ucx.c */

struct gpuring_conn {
    gpuring_conn_type_t type;
    gpuring_conn_dir_t dir;
    int peer;     /* comm rank at the other end */
    int channel;
    size_t slot_bytes;
    char *slots;               /* NSTEPS * slot_bytes, where the executor reads/writes */
    char *ll;                  /* NSTEPS * GPURING_LL_SLOT_BYTES of LL slots (NULL: NET) */
    gpuring_fifo_ctrl_t *ctrl; /* tail/head the executor waits on and publishes */
    uint64_t step;             /* executor: next step on this connection */
    uint64_t head_seen;        /* sender's executor: ctrl->head when it last read it */

    /* transport state, owned by proxy/ */
    void *shm_base;            /* SHM: the mapping (receiver's segment) */
    size_t shm_len;
    char shm_name[GPURING_SHM_NAME_MAX];
    int shm_owner;             /* 1 on the receiver, which created it */
    struct gpuring_net_conn *net;
    void *ipc_fifo;            /* IPC: the receiver's allocation, or the sender's opened view */
    void *mapped_host;         /* mapped for kernels: the registered host FIFO (NULL: not) */
    int slots_device;          /* NET GPU-direct: slots are device memory, only ctrl is host */
};

/* The slot of step `step` (slot step % NSTEPS) in this end's view. */
static inline char *gpuring_conn_slot(const gpuring_conn_t *conn, uint64_t step)
{
    return conn->slots + (step % GPURING_NSTEPS) * conn->slot_bytes;
}

/* Sender: is slot `step % NSTEPS` free?  The receiver's head is read only
 * when the value last read says the FIFO is full, so a sender that runs
 * ahead does not pull the line the receiver writes at every step. */
static inline int gpuring_conn_slot_free(gpuring_conn_t *conn)
{
    if (conn->head_seen + GPURING_NSTEPS > conn->step) return 1;
    conn->head_seen = GPURING_LOAD_ACQUIRE(&conn->ctrl->head);
    return conn->head_seen + GPURING_NSTEPS > conn->step;
}

/* Publish step `step` of a FIFO with this ctrl: its byte count and call id, then
 * tail past it (release). */
static inline void gpuring_fifo_post(gpuring_fifo_ctrl_t *ctrl, uint64_t step, size_t bytes,
                                     uint64_t call)
{
    ctrl->size[step % GPURING_NSTEPS] = bytes;
    ctrl->call[step % GPURING_NSTEPS] = call & GPURING_CALL_MASK;
    GPURING_STORE_RELEASE(&ctrl->tail, step + 1);
}

static inline void gpuring_conn_ll_clean(gpuring_conn_t *conn); /* (LL, below) */

/* Sender, once slot `step % NSTEPS` holds `bytes` bytes of this step of call
 * `call` (gpuring_call_id): post it. */
static inline void gpuring_conn_post(gpuring_conn_t *conn, size_t bytes, uint64_t call)
{
    gpuring_conn_ll_clean(conn);
    gpuring_fifo_post(conn->ctrl, conn->step++, bytes, call);
}

/*
 * Zero copy on NET recv ends (host executor only; GPU kernels never ask, so
 * their steps always land in the slots).  A receiver may ask for a future
 * step to land in its output instead of its slot: it records the ask before
 * it publishes the head that lets the proxy post that step's receive
 * (step < head + NSTEPS), so the proxy sees it when it posts; a receive
 * already posted is posted again there if nothing matched it yet
 * (gpuring_conn_net_reland), else it stays in its slot.  Either way the
 * executor finds the step where at[] says.  A step longer than the ask (a
 * mismatched call) is not written past it: it lands as one byte more than
 * asked, which the receiver's check reports.  (Sends stay in the slots: a
 * same-host peer's CMA reads the slots' huge pages 1.3-1.4x faster than a
 * caller's small ones, more than the copy into the slot costs: sent from
 * the caller's input, a 16 MiB call measured 1.1x the time -- README.)
 */

/* Receiver, before it publishes head > step - NSTEPS: step `step` lands at `dst`. */
static inline void gpuring_conn_land_at(gpuring_conn_t *conn, uint64_t step, void *dst,
                                        size_t bytes)
{
    const unsigned slot = (unsigned)(step % GPURING_NSTEPS);

    conn->ctrl->land[slot] = (uint64_t)(uintptr_t)dst;
    conn->ctrl->land_bytes[slot] = bytes;
    /* last, released: the proxy that reads this step's ask (conn_net_ucx.c's net_asked)
     * then reads its address and size too */
    __atomic_store_n(&conn->ctrl->land_step[slot], step + 1, __ATOMIC_RELEASE);
}

/* Receiver, once step conn->step landed: where its bytes are. */
static inline char *gpuring_conn_landed_at(const gpuring_conn_t *conn)
{
    const uint64_t at = conn->ctrl->at[conn->step % GPURING_NSTEPS];

    return at != 0 ? (char *)(uintptr_t)at : gpuring_conn_slot(conn, conn->step);
}

/* A landed step that says it is `got_bytes` bytes of call `got_call`, where the
 * receiver expects `bytes` of `call`: GPURING_OK, GPURING_ERR_REMOTE (the sender
 * abandoned the call) or GPURING_ERR_MISMATCH.  Both protocols, both executors. */
GPURING_HOSTDEV static inline gpuring_status_t gpuring_step_check(uint64_t got_call,
                                                                  uint64_t got_bytes,
                                                                  uint64_t bytes, uint64_t call)
{
    got_call &= GPURING_CALL_MASK;
    if (got_call == GPURING_CALL_ABORT) return GPURING_ERR_REMOTE;
    return got_call == (call & GPURING_CALL_MASK) && got_bytes == bytes ? GPURING_OK
                                                                        : GPURING_ERR_MISMATCH;
}

/* Receiver, once step `step` of a FIFO with this `ctrl` landed: gpuring_step_check of
 * what the sender recorded, its byte count in *got_bytes_p.  The host executor and the
 * CUDA kernel both check every simple step with it. */
GPURING_HOSTDEV static inline gpuring_status_t gpuring_fifo_check(
    const volatile gpuring_fifo_ctrl_t *ctrl, uint64_t step, uint64_t bytes, uint64_t call,
    uint64_t *got_bytes_p)
{
    const unsigned slot = (unsigned)(step % GPURING_NSTEPS);

    *got_bytes_p = ctrl->size[slot];
    return gpuring_step_check(ctrl->call[slot], *got_bytes_p, bytes, call);
}

/*
 * The low-latency protocol (LL, NCCL's), for small steps on SHM and IPC
 * connections.  Every such FIFO also has NSTEPS LL slots.  An LL slot is a
 * row of 8-byte units, each 4 bytes of data and the 4-byte flag of the step
 * that wrote it (gpuring_ll_flag), written with one 64-bit store: the
 * receiver waits on the data itself instead of on tail, so a small step
 * moves one cache line instead of the counter's, the ctrl's and the data's.
 * Units 0 and 1 are the header: the step's call id and its byte count (what
 * gpuring_step_check compares); the payload starts at unit 2, 16-byte
 * aligned, so a GPU thread moves two units together.  The host sender
 * writes the payload, then the header, unit 0 last with release order: a
 * host receiver that sees unit 0 sees the rest.  A GPU's threads each wait
 * for their own units' flags, once thread 0 has checked the header; the
 * CUDA executor, whose receivers are always kernels, writes the header
 * first (kernels/exec_cuda.cu).  head works as in the simple
 * protocol (the sender waits for a free slot); tail is not used.
 * Whether a step is LL is decided per call (the plan's protocol, the same
 * on every rank) and per connection (gpuring_conn_t.ll: never NET, whose
 * proxy moves simple slots), so both ends of a step always agree.
 */
#define GPURING_LL_STEP_BYTES 8192 /* payload of one LL step */
#define GPURING_LL_HDR_UNITS 2
#define GPURING_LL_SLOT_BYTES \
    (((GPURING_LL_HDR_UNITS + GPURING_LL_STEP_BYTES / 4) * 8 + 63) / 64 * 64)

/* The flag of step `step`'s units: never 0, what fresh (zeroed) memory holds. */
GPURING_HOSTDEV static inline uint32_t gpuring_ll_flag(uint64_t step)
{
    return (uint32_t)(step % 0xffffffffull) + 1u;
}

/*
 * Flags come back every 2^32 - 1 steps, rows every GPURING_NSTEPS: a unit
 * that no step overwrote for GPURING_NSTEPS * (2^32 - 1) steps (a small step
 * writes only the first units of its row) holds the flag of the step now on
 * its row -- the header's units too, where only simple steps used the row
 * since.  A kernel receiver waits on each unit's own flag after a header that
 * the kernel sender writes first, and would take such a unit for the step's
 * data; a receiver polling a row for its step's header (either protocol: the
 * simple one looks for a step posted in the other) would take such a header
 * for the step's, before the sender got there.  So every sender cleans its
 * rows (zeros: no step's flag): at the first GPURING_NSTEPS steps of every
 * GPURING_LL_CLEAN_PERIOD but the first (the rows start zeroed), each row
 * once, before the step's header and data, whatever the step's protocol
 * (gpuring_conn_ll_clean; the kernels' exec_ll_clean) -- as NCCL's LL does
 * (NCCL_LL_CLEAN_MASK).
 * A row's units then carry flags of steps made since its last clean, a
 * period back at most (two where a window's step was an abandon, which
 * cleans nothing), never that of a step to come on the row, which would
 * take about 16 periods.
 * The LL direct kernel's inboxes, two rows by the call's parity, are
 * cleaned alike by their owner (exec_cuda.h).
 */
#define GPURING_LL_CLEAN_PERIOD (1ull << 31)

/* Is step `step`, on rows used in turn (`rows` of them), one that cleans its row? */
GPURING_HOSTDEV static inline int gpuring_ll_clean_due(uint64_t step, unsigned rows)
{
    return step >= GPURING_LL_CLEAN_PERIOD && step % GPURING_LL_CLEAN_PERIOD < rows;
}

GPURING_HOSTDEV static inline uint64_t gpuring_ll_unit(uint32_t data, uint32_t flag)
{
    return (uint64_t)flag << 32 | data;
}

/* ---- LL on the host (the CUDA executor has its own, exec_cuda.cu) -------- */
static inline uint64_t *gpuring_conn_ll_slot(const gpuring_conn_t *conn)
{
    return (uint64_t *)(conn->ll + (conn->step % GPURING_NSTEPS) * GPURING_LL_SLOT_BYTES);
}

static inline void gpuring_conn_ll_header(uint64_t *row, uint64_t bytes, uint64_t call,
                                          uint32_t flag)
{
    __atomic_store_n(&row[1], gpuring_ll_unit((uint32_t)bytes, flag), __ATOMIC_RELAXED);
    __atomic_store_n(&row[0], gpuring_ll_unit((uint32_t)(call & GPURING_CALL_MASK), flag),
                     __ATOMIC_RELEASE);
}

/* Sender, its slot free, before it posts step conn->step in either protocol: the
 * step's row zeroed where it is due a clean (above; the post's release orders the
 * zeros before the step). */
static inline void gpuring_conn_ll_clean(gpuring_conn_t *conn)
{
    uint64_t *row;

    if (conn->ll == NULL || !gpuring_ll_clean_due(conn->step, GPURING_NSTEPS)) return;
    row = gpuring_conn_ll_slot(conn);
    for (size_t u = 0; u < GPURING_LL_SLOT_BYTES / 8; u++)
        __atomic_store_n(&row[u], 0, __ATOMIC_RELAXED);
}

/* Sender, once a slot is free: post `bytes` (at most GPURING_LL_STEP_BYTES) of
 * `src` as an LL step of call `call`. */
static inline void gpuring_conn_ll_post(gpuring_conn_t *conn, const void *src, size_t bytes,
                                        uint64_t call)
{
    uint64_t *row = gpuring_conn_ll_slot(conn);
    const uint32_t flag = gpuring_ll_flag(conn->step);
    const unsigned char *p = (const unsigned char *)src;
    const size_t whole = bytes / 4;
    uint32_t d;

    size_t i = 0;

    gpuring_conn_ll_clean(conn);
#if defined(__x86_64__)
    /* two units per 16-byte store: half the stores, so twice the lines in flight
     * (an x86-64 store of an aligned 16 bytes writes each 8-byte half at once;
     * processors with AVX guarantee even the whole 16) */
    for (; i + 2 <= whole; i += 2) {
        typedef unsigned long long pair_t __attribute__((vector_size(16)));
        uint32_t d2;
        pair_t pair;

        memcpy(&d, p + 4 * i, 4);
        memcpy(&d2, p + 4 * i + 4, 4);
        pair = (pair_t){gpuring_ll_unit(d, flag), gpuring_ll_unit(d2, flag)};
        *(volatile pair_t *)&row[GPURING_LL_HDR_UNITS + i] = pair;
    }
#endif
    for (; i < whole; i++) {
        memcpy(&d, p + 4 * i, 4);
        __atomic_store_n(&row[GPURING_LL_HDR_UNITS + i], gpuring_ll_unit(d, flag),
                         __ATOMIC_RELAXED);
    }
    if (bytes % 4 != 0) {
        d = 0;
        memcpy(&d, p + 4 * whole, bytes % 4);
        __atomic_store_n(&row[GPURING_LL_HDR_UNITS + whole], gpuring_ll_unit(d, flag),
                         __ATOMIC_RELAXED);
    }
    gpuring_conn_ll_header(row, bytes, call, flag);
    conn->step++;
}

/* Receiver: has the header of LL step conn->step landed? */
static inline int gpuring_conn_ll_landed(const gpuring_conn_t *conn)
{
    const uint64_t *row = gpuring_conn_ll_slot(conn);
    const uint32_t flag = gpuring_ll_flag(conn->step);

    return (uint32_t)(__atomic_load_n(&row[0], __ATOMIC_ACQUIRE) >> 32) == flag &&
           (uint32_t)(__atomic_load_n(&row[1], __ATOMIC_ACQUIRE) >> 32) == flag;
}

/*
 * Receiver waiting for step conn->step in one protocol (`ll`, the call's plan):
 * did its sender post the step in the other?  Then the sender planned its call
 * otherwise -- another byte count across the LL limit (or another kind of call)
 * -- and the step it waits for never comes: 1, the step's byte count in
 * *got_bytes_p (a mismatch, found at once, where neither end would see the
 * other's step until the timeout).  An abandon step is posted in both
 * protocols, the LL header first (gpuring_conn_post_abort; the CUDA executor's
 * exec_abandon likewise): an LL header of GPURING_CALL_ABORT is not one, nor
 * a tail past the step with the LL header there at a second look.
 */
static inline int gpuring_conn_other_protocol(const gpuring_conn_t *conn, int ll,
                                              uint64_t *got_bytes_p)
{
    const uint64_t *row;

    if (conn->ll == NULL) return 0; /* simple only (NET) */
    if (ll) {
        if (GPURING_LOAD_ACQUIRE(&conn->ctrl->tail) <= conn->step) return 0;
        if (gpuring_conn_ll_landed(conn)) return 0; /* (after tail: an abandon's) */
        *got_bytes_p = conn->ctrl->size[conn->step % GPURING_NSTEPS];
        return 1;
    }
    if (!gpuring_conn_ll_landed(conn)) return 0;
    row = gpuring_conn_ll_slot(conn);
    if (((uint32_t)__atomic_load_n(&row[0], __ATOMIC_RELAXED) & GPURING_CALL_MASK) ==
        GPURING_CALL_ABORT)
        return 0; /* its tail follows */
    *got_bytes_p = (uint32_t)__atomic_load_n(&row[1], __ATOMIC_RELAXED);
    return 1;
}

/* Receiver, once landed: gpuring_step_check of its header. */
static inline gpuring_status_t gpuring_conn_ll_check(const gpuring_conn_t *conn,
                                                     uint64_t bytes, uint64_t call,
                                                     uint64_t *got_bytes_p)
{
    const uint64_t *row = gpuring_conn_ll_slot(conn);

    *got_bytes_p = (uint32_t)__atomic_load_n(&row[1], __ATOMIC_RELAXED);
    return gpuring_step_check((uint32_t)__atomic_load_n(&row[0], __ATOMIC_RELAXED),
                              *got_bytes_p, bytes, call);
}

/* Receiver, once checked: the step's `bytes` into `dst`.  The sender wrote them
 * before the header (release), so each unit holds this step's flag; one that
 * does not is another step's (GPURING_ERR_MISMATCH, never used). */
static inline gpuring_status_t gpuring_conn_ll_read(const gpuring_conn_t *conn, void *dst,
                                                    size_t bytes)
{
    const uint64_t *row = gpuring_conn_ll_slot(conn) + GPURING_LL_HDR_UNITS;
    const uint32_t flag = gpuring_ll_flag(conn->step);
    unsigned char *p = (unsigned char *)dst;
    const size_t whole = bytes / 4;
    uint64_t u, bad = 0;
    uint32_t d;

    for (size_t i = 0; i < whole; i++) {
        u = __atomic_load_n(&row[i], __ATOMIC_RELAXED);
        bad |= (u >> 32) ^ flag;
        d = (uint32_t)u;
        memcpy(p + 4 * i, &d, 4);
    }
    if (bytes % 4 != 0) {
        u = __atomic_load_n(&row[whole], __ATOMIC_RELAXED);
        bad |= (u >> 32) ^ flag;
        d = (uint32_t)u;
        memcpy(p + 4 * whole, &d, bytes % 4); /* the low bytes: little endian */
    }
    return bad == 0 ? GPURING_OK : GPURING_ERR_MISMATCH;
}

/* Sender giving up on a call: an empty step marked GPURING_CALL_ABORT, in both
 * protocols, if a slot is free (so the receiver fails at once instead of timing
 * out); 1 if posted. */
static inline int gpuring_conn_post_abort(gpuring_conn_t *conn)
{
    if (!gpuring_conn_slot_free(conn)) return 0;
    if (conn->ll != NULL) {
        gpuring_conn_ll_header(gpuring_conn_ll_slot(conn), 0, GPURING_CALL_ABORT,
                               gpuring_ll_flag(conn->step));
    }
    gpuring_conn_post(conn, 0, GPURING_CALL_ABORT);
    return 1;
}

/* Sender giving up on a call with every slot taken (gpuring_conn_post_abort
 * found none free), on an end whose FIFO the receiver reads directly (SHM; the
 * CUDA executor marks any end it finds full so, exec_cuda.cu's exec_abandon,
 * and hands a marked NET one to its proxy): never cleared, as its communicator
 * is done. */
static inline void gpuring_conn_abandon_full(gpuring_conn_t *conn)
{
    GPURING_STORE_RELEASE(&conn->ctrl->abandoned, 1);
}

/* Receiver waiting for step conn->step: did the sender give up with its FIFO full?
 * Asked before looking for the step once more: a sender marks it after its last
 * step, so a step not seen after a yes never comes. */
static inline int gpuring_conn_abandoned(const gpuring_conn_t *conn)
{
    return GPURING_LOAD_ACQUIRE(&conn->ctrl->abandoned) != 0;
}

/* Receiver giving up on a call (its communicator failed): its senders learn
 * it once they wait for a slot it will not free. */
static inline void gpuring_conn_refuse(gpuring_conn_t *conn)
{
    GPURING_STORE_RELEASE(&conn->ctrl->refused, 1);
}

/* Sender: has the receiver given up (gpuring_conn_refuse)?  Asked where a slot
 * is not free, so it costs nothing while the FIFO moves. */
static inline int gpuring_conn_refused(const gpuring_conn_t *conn)
{
    return GPURING_LOAD_ACQUIRE(&conn->ctrl->refused) != 0;
}

/* ---- conn.c: the FIFO layout every transport uses ----------------------- */
/*
 * Where in a page the slots of host memory (SHM, NET staging) start: where
 * malloc puts the large buffers of the calls that copy into and out of them
 * (glibc: 16 bytes past a page, after its chunk header).  A large copy whose
 * destination lies 1 to 31 bytes past its source modulo a page ran several
 * times slower on AMD EPYC (kernels/reduce.h): from slots on a page into
 * malloc's buffers, every copy out of a slot did, and every CMA read of a NET
 * step into the output (zero copy).  16 bytes in, malloc's buffers are as far
 * into a page as the slots; a page-aligned buffer is 4080 bytes past them, but
 * a copy from one into a slot is skewed (README: measured both ways).
 */
#define GPURING_SLOTS_SKEW 16
/* Bytes between a `type` FIFO's zeroed head and its slots: GPURING_SLOTS_SKEW where
 * host executors copy into and out of them, none where a GPU's kernels do -- device
 * memory (IPC) and a GPU's NET staging (`gpu`), whose warps' stores stay whole lines. */
size_t gpuring_conn_slots_lead(gpuring_conn_type_t type, int gpu);
/* The leading bytes of a FIFO that must be zero before a peer opens it: the control
 * page and the LL slots (the simple slots need not be: read only up to the tail
 * posted). */
size_t gpuring_conn_fifo_zero_bytes(gpuring_conn_type_t type);
/* Bytes of one FIFO of a `type` connection in memory (a host executor's): the
 * zeroed head, the slots' lead, then NSTEPS slots. */
size_t gpuring_conn_fifo_bytes(gpuring_conn_type_t type, size_t slot_bytes);
/* Lay a connection end over a FIFO of gpuring_conn_fifo_bytes() (zeroes conn first;
 * gpuring_conn_net_create then sets the slots where it put them). */
void gpuring_conn_attach(gpuring_conn_t *conn, gpuring_conn_type_t type, gpuring_conn_dir_t dir,
                         int peer, int channel, size_t slot_bytes, void *fifo);
/* The handle of an attached end: zeroed, then its peer, channel, direction,
 * type and slot size; the transport adds what is its own. */
void gpuring_conn_handle_init(const gpuring_conn_t *conn, gpuring_conn_handle_t *handle_p);
/* Log why recv end `conn` (channel `channel`) stopped a `coll` call of `count` elements
 * of `type_name`: gpuring_fifo_check's `st` on its step conn->step, which held
 * `got_bytes` where the call expected `want_bytes`; `executor` is appended (e.g.
 * " (cuda executor)").  For an abandoned step, so does where the channel's send
 * ends send[0..nsend) stand (NULL ones skipped): each peer's next step, which
 * tells whether the two ranks agree on the steps of the call (no FIFO is read:
 * a GPU's may be device memory). */
void gpuring_conn_report_check(const gpuring_conn_t *conn, int channel, gpuring_status_t st,
                               uint64_t got_bytes, size_t want_bytes, size_t count,
                               const char *type_name, const char *coll, const char *executor,
                               gpuring_conn_t *const send[], int nsend);
/* Log why send end `conn` (channel `channel`) stopped a `coll` call: its receiver gave
 * up on the call (gpuring_conn_refused) while this rank waited for a slot it would free
 * for step conn->step; `executor` is appended. */
void gpuring_conn_report_refused(const gpuring_conn_t *conn, int channel, const char *coll,
                                 const char *executor);

/* What an LL slot's header says, for a stall report, from the flags its two units
 * carry (row[0] >> 32, row[1] >> 32): the step it is of (flag - 1), or that the
 * slot was never written. */
void gpuring_ll_describe_header(uint32_t flag0, uint32_t flag1, char *buf, size_t len);

/* A stall report about NET end `conn` goes on with the proxy's side of it
 * (gpuring_conn_net_describe, of `step`), appended to the text in buf between
 * `open` and `close`; other ends, or a build without the proxy, append nothing. */
void gpuring_conn_report_net(const gpuring_conn_t *conn, uint64_t step, const char *open,
                             const char *close, char *buf, size_t len);

/* ---- SHM (proxy/conn_shm.c) ---------------------------------------------- */
/* Receiver: create the segment, fill the handle to publish. */
gpuring_status_t gpuring_conn_shm_recv_create(gpuring_conn_t *conn, int peer, int channel,
                                              size_t slot_bytes, uint64_t comm_uid,
                                              gpuring_conn_handle_t *handle_p);
/* Sender: map the receiver's segment named in its handle. */
gpuring_status_t gpuring_conn_shm_send_connect(gpuring_conn_t *conn, int peer, int channel,
                                               const gpuring_conn_handle_t *remote);
/* Receiver, once every sender mapped (after a bootstrap agreement): unlink the name. */
void gpuring_conn_shm_unlink(gpuring_conn_t *conn);
/* Remove the segments in /dev/shm that processes of gpuring's in this pid
 * namespace, now gone, never unlinked (killed while connecting) -- this
 * process's pid's too, so only before it makes its own: its first
 * gpuring_conn_shm_recv_create does, once.  How many were removed. */
int gpuring_conn_shm_sweep(void);
void gpuring_conn_shm_destroy(gpuring_conn_t *conn);

/* ---- CUDA (proxy/conn_cuda.c; conn_cuda_none.c refuses without the toolkit) ---- */
/* Receiver: a FIFO in device memory of the current device, its counters
 * zeroed before return (waited for at most `timeout` s: gpuring_device_alloc_shared);
 * the handle carries the IPC handle. */
gpuring_status_t gpuring_conn_ipc_recv_create(gpuring_conn_t *conn, int peer, int channel,
                                              size_t slot_bytes, double timeout,
                                              gpuring_conn_handle_t *handle_p);
/* Sender (another process, same node): open the receiver's FIFO. */
gpuring_status_t gpuring_conn_ipc_send_connect(gpuring_conn_t *conn, int peer, int channel,
                                               const gpuring_conn_handle_t *remote);
void gpuring_conn_ipc_destroy(gpuring_conn_t *conn);
/* A NET end made device-accessible: its host memory (the whole FIFO, or
 * only the ctrl page when the slots are device memory) registered as mapped
 * pinned memory, `ctrl` (and host `slots`) switched to the device view.
 * unmap restores the host view; call it before the transport frees the
 * memory. */
gpuring_status_t gpuring_conn_map_device(gpuring_conn_t *conn);
void gpuring_conn_unmap_device(gpuring_conn_t *conn);

#endif /* GPURING_PROXY_CONN_H */
