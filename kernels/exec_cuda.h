/*
 * exec_cuda.h -- the CUDA executor: the step programs of kernels/prog_ops.h
 * run by one GPU kernel, one thread block per channel, over the same
 * connections (proxy/conn.h) and the same arguments as the host executor
 * (kernels/exec_host.h), whose semantics it follows op for op.
 *
 * Plain C; needs no CUDA header.  Built when configure found the toolkit
 * (kernels/device_none.c refuses otherwise).  gpuring_comm_allreduce calls it
 * for device buffers, over the device plane's connections.
 *
 * What the caller guarantees:
 *  - sendbuf, recvbuf and scratch are device-accessible memory of the
 *    current device (device, managed or mapped pinned host memory).  The
 *    scratch (ordered GATHER: FOLD reads it) is best device memory.
 *  - every connection a program uses has device-accessible `slots` and
 *    `ctrl`: SHM or IPC FIFOs in device memory or mapped host memory, and
 *    NET ends mapped with gpuring_conn_map_device (their proxy reads the
 *    sizes and tails the kernel posts; args->proxy names it, and its
 *    failures abort the kernel like a timeout does).
 *  - with args->ll, steps on connections with LL slots (conn->ll: SHM and
 *    IPC) use the LL protocol (proxy/conn.h), steps of at most
 *    GPURING_LL_STEP_BYTES; NET ends stay simple.  The peers' executors at
 *    both ends of such a connection are CUDA executors (the kernel writes
 *    an LL step's header before its data, not after as the host does).
 *  - no connection serves two channels (each block owns its connections),
 *    and nothing else uses these connections while the call runs.
 *  - every peer's executor (host or CUDA) runs at the same time: the kernel
 *    blocks on its FIFOs.  Co-residency is the caller's concern when peers
 *    share a GPU (one block per channel, GPURING_EXEC_CUDA_THREADS threads).
 */
#ifndef GPURING_KERNELS_EXEC_CUDA_H
#define GPURING_KERNELS_EXEC_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/exec_host.h"

/* threads of the block that runs one channel */
#define GPURING_EXEC_CUDA_THREADS 512
/* channels one call runs (the descriptor is a kernel parameter: exec_cuda.cu
 * checks that 32 of them fit CUDA's 32 KiB); NCCL's count on an H100 */
#define GPURING_EXEC_CUDA_MAX_CHANNELS 32

/*
 * Run every channel's program to completion on `stream` (a cudaStream_t;
 * NULL: the calling thread's default stream) and wait for it: launches one
 * kernel (one block per channel), then polls the stream with
 * cudaStreamQuery.  args->timeout is the time without progress (no channel
 * finishing an operation) after which the kernel is told to stop (a
 * host-mapped abort flag its waits poll): GPURING_ERR_TIMEOUT, with one
 * GPURING_ERROR line per unfinished channel naming what it waits for.
 *
 * On return (any status) every used connection's `step` and every
 * channel's `next_op` say how far the kernel got, as after the host
 * executor.  After anything but GPURING_OK the FIFOs' state is the peers'
 * business (an aborted collective: tear the connections down).  A channel
 * that stops tells its peers as the host executor does (exec_host.h): an
 * abandon step on every send connection with a free slot (one with every
 * slot taken marked abandoned, proxy/conn.h; a NET one handed to its proxy),
 * every recv connection refused; a recv whose sender marked its FIFO
 * abandoned reads what is there, then stops: GPURING_ERR_REMOTE, logged.
 *
 * Returns GPURING_OK, GPURING_ERR_INVALID (bad arguments, NULL or shared
 * connection, a NET end not mapped for the device, no scratch for a FOLD,
 * an LL step over GPURING_LL_STEP_BYTES),
 * GPURING_ERR_NOT_SUPPORTED (op undefined on the type, too many channels),
 * GPURING_ERR_TIMEOUT, or GPURING_ERR_CUDA (a fault in the kernel; or launch
 * failure, or no status entry left -- kernels that never stopped hold them --
 * where the call is abandoned to the peers, gpuring_exec_cuda_abandon; logged).
 */
gpuring_status_t gpuring_exec_cuda_run(const gpuring_exec_args_t *args, void *stream);

/*
 * A call this rank gives up on before gpuring_exec_cuda_run launched its kernel
 * (no memory for a copy it needed, a copy that failed; gpuring_exec_cuda_run
 * itself, where its kernel does not launch): a one-thread block per
 * channel posts an abandon step (proxy/conn.h) on each of the channel's send
 * connections (or marks a full one abandoned) and refuses its recv
 * connections, as the kernel does when it
 * stops, so that the peers fail at
 * once rather than at their timeout.  Waits for it up to a second (queued
 * behind the application's work the call waits for, it posts when that ends);
 * GPURING_OK, or GPURING_ERR_CUDA (it did not launch, logged: the peers then
 * learn of the failure at their timeout).
 */
gpuring_status_t gpuring_exec_cuda_abandon(const gpuring_exec_args_t *args, void *stream);

/*
 * The direct allreduce's kernel (no FIFO, no program): this rank's share
 * of the call, `count` elements, reduced from every rank's send buffer and
 * written to every rank's receive buffer, all mapped here (CUDA IPC, see
 * proxy/ipc_buf.h):
 *     out[r][i] = in[0][i] (op) in[1][i] (op) ... (op) in[nranks-1][i]
 * for every r, left to right in rank order, so every rank's result has the
 * same bits.  in[r] and out[r] point at the share's first element; they may
 * be equal (in place).  The kernel waits on nothing, fills the GPU (as many
 * blocks as the share keeps busy), and the call returns once the stream
 * drained (GPURING_ERR_TIMEOUT if that takes longer than `timeout`: a GPU
 * the ranks time-slice may be slow, never stuck).
 */
#define GPURING_EXEC_DIRECT_MAX_RANKS 8
typedef struct gpuring_exec_direct_args {
    int nranks;
    const void *in[GPURING_EXEC_DIRECT_MAX_RANKS];
    void *out[GPURING_EXEC_DIRECT_MAX_RANKS];
    size_t count;
    gpuring_type_t type;
    gpuring_op_t op;
    double timeout; /* seconds; 0: forever */
} gpuring_exec_direct_args_t;

gpuring_status_t gpuring_exec_cuda_direct(const gpuring_exec_direct_args_t *args, void *stream);

/*
 * The LL direct allreduce's kernel, for small calls (NCCL's one-shot LL
 * allreduce): no host exchange at all, the units' flags are the only
 * synchronisation.  Every rank has an inbox in its device memory, mapped
 * by the others through CUDA IPC: 2 rows (the call's parity) of `nranks`
 * slots of slot_bytes, one per sender.  The kernel
 *   1. stores this rank's input as LL units (proxy/conn.h: 4 data bytes and
 *      the call's flag, gpuring_ll_flag(seq), in each 8-byte unit) into its
 *      slot of the row in every peer's inbox, then (block 0, once its own
 *      units are out) the header (call id, bytes: gpuring_step_check) -- the
 *      call's abandon instead where the kernel started only after its host
 *      had given the call up: a peer uses no unit before the header;
 *   2. waits for every peer's header in its own inbox row (a header of
 *      another call stops it at once: GPURING_ERR_MISMATCH; a peer's abandon
 *      header, GPURING_ERR_REMOTE), then for each
 *      unit it reduces, and writes
 *          out[i] = in_0[i] (op) in_1[i] (op) ... (op) in_{nranks-1}[i]
 *      left to right in rank order, so every rank's result has the same bits.
 * A rank stores into a peer's row for call seq + 2 only after its kernel of
 * call seq + 1 saw all of that peer's call-(seq + 1) units, which the peer
 * stored after its own call-seq kernel, on the same stream, had read all of
 * row seq: so every rank runs these kernels on one stream per communicator,
 * in call order, seq counting them from 0 alike on every rank.  The kernels
 * of all ranks wait for each other, so they must run at the same time: one
 * rank per GPU, or the ranks sharing a GPU under MPS (not time-sliced).
 * Their blocks are not checked to fit the GPU together, as the FIFO kernel's
 * are (gpuring_exec_cuda_capacity): at most 16 blocks of 40 registers per
 * thread per rank, 8 ranks' fit an H100 several times over, and every block
 * stores before it waits.  The inboxes start zeroed (flag 0 is no call's); as
 * flags come back (proxy/conn.h), the kernel of call seq zeroes the row of
 * call seq + 1 in its own inbox where that call is due a clean
 * (gpuring_ll_clean_due(seq + 1, 2)): block 0, before its headers, without
 * which no peer goes on to call seq + 1.  Calls of up to
 * GPURING_EXEC_DIRECT_LL_MAX_BYTES; a peer that never comes is
 * GPURING_ERR_TIMEOUT after `timeout` seconds, naming it.  Where this rank's
 * kernel does not launch (or no status entry is left), a one-thread kernel
 * stores an abandon header (GPURING_CALL_ABORT) into its slot of every peer's
 * row instead, and the call is GPURING_ERR_CUDA here, GPURING_ERR_REMOTE there.
 */
#define GPURING_EXEC_DIRECT_LL_MAX_BYTES (1024 * 1024)
/* bytes of one sender's slot for calls of up to `bytes` bytes: the header's
 * 2 units, 2 units per 8 data bytes, 64-byte lines */
#define GPURING_EXEC_DIRECT_LL_SLOT_BYTES(bytes) \
    ((((size_t)(bytes) + 7) / 8 * 16 + 16 + 63) / 64 * 64)
typedef struct gpuring_exec_direct_ll_args {
    int nranks, rank;
    const void *sendbuf; /* at any address, aligned to its element size or not */
    void *recvbuf; /* may be sendbuf (in place); at any address too */
    size_t count;
    gpuring_type_t type;
    gpuring_op_t op;
    uint64_t call;    /* gpuring_call_id: every rank must be making the same call */
    uint64_t seq;     /* the communicator's LL direct calls before this one */
    size_t slot_bytes;                                   /* of every inbox */
    void *inbox;                                         /* this rank's */
    void *peer_inbox[GPURING_EXEC_DIRECT_MAX_RANKS];     /* rank r's, mapped (r != rank) */
    double timeout; /* seconds; 0: forever */
    gpuring_arrivals_t *arrivals; /* asked at each timeout (gpuring_exec_args_t's) */
    uint64_t call_seq; /* the call's number on its communicator (the board's) */
} gpuring_exec_direct_ll_args_t;

gpuring_status_t gpuring_exec_cuda_direct_ll(const gpuring_exec_direct_ll_args_t *args,
                                             void *stream);

/* An LL direct call this rank gives up on before its kernel (the caller has no
 * buffers for it: sendbuf and recvbuf unused): only the abandon header into its slot
 * of every peer's row, as where the kernel does not launch; waits for it as
 * gpuring_exec_cuda_abandon does.  GPURING_OK, GPURING_ERR_INVALID, GPURING_ERR_CUDA
 * (logged: the peers then learn of it at their timeout). */
gpuring_status_t gpuring_exec_cuda_direct_ll_abandon(const gpuring_exec_direct_ll_args_t *args,
                                                     void *stream);

/*
 * Allocate the executor's process-wide mapped host memory (the per-call
 * abort flag and progress counters), and load every kernel into the
 * current device's context, now rather than on the first run.  Idempotent
 * and thread-safe.  Page-locked allocation and module loading may
 * synchronise the device, so call it before kernels that wait on each
 * other are in flight (communicator creation; a test, before launching its
 * ranks).
 */
gpuring_status_t gpuring_exec_cuda_init(void);

/*
 * What the current GPU holds of gpuring_exec_cuda_run's kernel at once: its
 * blocks (channels) resident together, SMs times the blocks per SM of the
 * kernel's most demanding variant, in *blocks_p.  Every channel of every
 * rank on a GPU must be resident together -- they wait for each other -- so
 * the communicator keeps the device plane's channels within this.
 */
gpuring_status_t gpuring_exec_cuda_capacity(int *blocks_p);

#ifdef __cplusplus
}
#endif

#endif /* GPURING_KERNELS_EXEC_CUDA_H */
