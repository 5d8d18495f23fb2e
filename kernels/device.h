/*
 * device.h -- the few CUDA runtime services the communicator layer needs
 * around the CUDA executor: which device a call runs on, a private stream,
 * device memory for scratch.  Plain C, no CUDA header.
 *
 * kernels/device_cuda.c implements them when configure found the toolkit;
 * kernels/device_none.c otherwise, where gpuring_device_built() is 0 and
 * every call returns GPURING_ERR_NOT_SUPPORTED (the communicator then never
 * offers device buffers to gpuring: they go to the component below).
 *
 * gpuring's CUDA runtime is its own static copy (Makefile.am): its notion of
 * the current device is per thread and separate from the application's, so
 * every entry point that touches the GPU first makes the buffer's device
 * current with gpuring_device_use().
 */
#ifndef GPURING_KERNELS_DEVICE_H
#define GPURING_KERNELS_DEVICE_H

#include <stddef.h>
#include "common/gpuring_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build has the CUDA executor. */
int gpuring_device_built(void);

/*
 * The calling thread's current CUDA context, as the driver holds it for
 * every runtime in the process (the application's too): gpuring_device_use
 * changes it, so every entry point that may call it saves the application's
 * first and restores it on the way out.
 */
typedef struct gpuring_device_saved {
    int valid;
    void *ctx; /* CUcontext; NULL: none was current */
} gpuring_device_saved_t;
gpuring_device_saved_t gpuring_device_save(void);
void gpuring_device_restore(gpuring_device_saved_t saved);

/* Make `device` (an ordinal, as memkind reports it) current for this thread. */
gpuring_status_t gpuring_device_use(int device);

/* A non-blocking stream (no implicit sync with the legacy default stream). */
gpuring_status_t gpuring_device_stream_create(void **stream_p);
void gpuring_device_stream_destroy(void *stream);
/* Wait until `stream` has no work left, at most `timeout` seconds (GPURING_ERR_TIMEOUT):
 * before memory its kernels may touch is freed, or to know its copies landed (NULL:
 * nothing to wait for).  Work that failed on it is GPURING_ERR_CUDA (logged): the stream
 * is idle then too, but what it was to write may not be there. */
gpuring_status_t gpuring_device_stream_idle(void *stream, double timeout);

/*
 * Order a stream after the work queued so far on the current device's
 * legacy default stream -- what a plain cudaMemcpy or <<<>>> launch of the
 * application queues: record_default records that work in *event_p
 * (created on first use; destroy with gpuring_device_event_destroy), when
 * the call is made; stream_wait makes `stream` wait for it, when the call
 * is launched (at once for a blocking call, later in MPI_Iallreduce's
 * worker).  Re-recording the event before the wait only makes the wait
 * cover more.
 */
gpuring_status_t gpuring_device_event_record_default(void **event_p);
gpuring_status_t gpuring_device_stream_wait(void *stream, void *event);
/* Wait until that work is done (NULL: nothing to wait for), at most timeout_sec
 * seconds (<= 0: no bound): GPURING_ERR_TIMEOUT past it. */
gpuring_status_t gpuring_device_event_wait(void *event, double timeout_sec);
void gpuring_device_event_destroy(void *event);

/*
 * Device memory of the current device; free takes NULL.  cudaFree waits for every
 * kernel of the device, and a kernel of gpuring's may be waiting for a peer that
 * waits for this process (its MPI_Send after an MPI_Comm_free, say): while one is
 * in flight (gpuring_device_waiting_begin .. _end, the executor's), a free is
 * deferred, with its device, and the last one's end makes the deferred ones --
 * none where a kernel never left (its communicator keeps its memory too).
 */
gpuring_status_t gpuring_device_alloc(size_t bytes, void **ptr_p);
void gpuring_device_free(void *ptr);
void gpuring_device_waiting_begin(void);
void gpuring_device_waiting_end(void);
/*
 * The same for the work of one stream (a communicator's memory that only its
 * calls' kernels use), allocated and freed in stream order on `stream` where
 * the current device has memory pools (cudaMallocAsync / cudaFreeAsync): neither
 * waits for kernels running meanwhile -- cudaFree waits for the whole device,
 * gpuring's kernels of other calls included, which may be waiting for this
 * rank's peers.  Free with the same device current.
 */
gpuring_status_t gpuring_device_alloc_ordered(size_t bytes, void *stream, void **ptr_p);
void gpuring_device_free_ordered(void *ptr, void *stream);
/* Queue a copy of `bytes` from src to dst (device memory, or any the driver maps) on
 * `stream`, after the work queued there so far. */
gpuring_status_t gpuring_device_copy(void *dst, const void *src, size_t bytes, void *stream);

/*
 * Device memory other processes of the node map (CUDA IPC): alloc_shared
 * makes `bytes` of the current device's memory, its first `zero_bytes`
 * (<= bytes) zeroed (on a stream of its own, waited for at most `timeout`
 * seconds: nothing of the application's, which a stream of gpuring's may be
 * ordered after, holds it up) before its handle --
 * GPURING_DEVICE_SHARE_BYTES of plain bytes for bootstrap_mpi -- goes out
 * (an IPC FIFO zeroes its counters, not its slots); open_shared maps another
 * process's (peer access enabled where the allocation is on another GPU);
 * close_shared unmaps one (NULL: nothing); gpuring_device_free frees one's own.
 */
#define GPURING_DEVICE_SHARE_BYTES 64 /* CUDA_IPC_HANDLE_SIZE */
gpuring_status_t gpuring_device_alloc_shared(size_t bytes, size_t zero_bytes, double timeout,
                                             void **ptr_p,
                                             unsigned char handle[GPURING_DEVICE_SHARE_BYTES]);
gpuring_status_t gpuring_device_open_shared(const unsigned char handle[GPURING_DEVICE_SHARE_BYTES],
                                            void **ptr_p);
void gpuring_device_close_shared(void *ptr);

/*
 * 1 when the contexts made on `device` are shared through MPS, whose
 * clients' kernels run at once; 0 otherwise (or unknown): processes sharing
 * the GPU without it time-slice it, and a kernel that waits for another
 * process's waits a time slice.
 */
int gpuring_device_mps(int device);

/*
 * The PCI address of `device` as one number (domain << 16 | bus << 8 |
 * device << 3), what tells two ranks' GPUs on one host apart: a bus number
 * alone repeats across PCI domains (VMs that give each GPU a domain of its
 * own put every GPU on bus 0).  -1 if unknown.
 */
int64_t gpuring_device_pci_id(int device);

/*
 * The device of the calling thread's current CUDA context -- the application's,
 * through the driver it loaded -- or -1 where none is current, the driver is not
 * loaded or this build has no CUDA.  Makes no context, loads nothing.
 */
int gpuring_device_current(void);

/*
 * GPUDirect RDMA (a NIC writing device memory, NET slots in device memory):
 * the NIC's writes may become visible to a kernel out of order with the
 * completion the proxy saw.  remote_writes tells, for `device`, whether its
 * kernels see them in order natively (GPURING_DEVICE_WRITES_ORDERED), only
 * after gpuring_device_flush_remote_writes() (GPURING_DEVICE_WRITES_FLUSH),
 * or not reliably at all (GPURING_DEVICE_WRITES_UNORDERED: do not land data
 * there).  The flush acts on the current device.
 */
typedef enum {
    GPURING_DEVICE_WRITES_UNORDERED = 0,
    GPURING_DEVICE_WRITES_FLUSH = 1,
    GPURING_DEVICE_WRITES_ORDERED = 2,
} gpuring_device_writes_t;
gpuring_device_writes_t gpuring_device_remote_writes(int device);
gpuring_status_t gpuring_device_flush_remote_writes(void);

#ifdef __cplusplus
}
#endif

#endif /* GPURING_KERNELS_DEVICE_H */
