/*
 * ipc_buf.h -- a peer's device buffer mapped into this process through
 * CUDA IPC, for the direct device allreduce (ompi_coll_gpuring/gpuring_comm.c):
 * ranks of one node read each other's send buffers and write each other's
 * receive buffers, with no FIFO in between.
 *
 * The exporter publishes, per buffer and call, the IPC handle of the
 * allocation holding it and the buffer's offset there (gpuring_ipc_buf_t,
 * plain bytes for bootstrap_mpi).  Opening a handle costs milliseconds and
 * a process may hold one mapping per allocation, so both sides keep a
 * process-wide cache keyed by the allocation's buffer id (unique in its
 * process for the process's life): a buffer reused call after call is
 * exported and opened once (up to gpuring_ipc_buf_set_cache's count of
 * idle mappings).  A peer allocation that overlaps a cached one
 * of the same peer means the old one was freed: its mapping is closed.
 * Mappings in use by a call are never evicted (gpuring_ipc_buf_release).
 *
 * CUDA only (proxy/ipc_buf_cuda.c); proxy/ipc_buf_none.c refuses without
 * the toolkit.  The current device must be the buffers' (kernels/device.h).
 */
#ifndef GPURING_PROXY_IPC_BUF_H
#define GPURING_PROXY_IPC_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpuring_common.h"
#include "proxy/conn.h"

typedef struct gpuring_ipc_buf {
    unsigned char handle[GPURING_IPC_HANDLE_BYTES]; /* cudaIpcMemHandle_t of the allocation */
    uint64_t buffer_id; /* the allocation's id in the exporting process */
    uint64_t base;      /* the allocation's address there */
    uint64_t bytes;     /* its size */
    uint64_t offset;    /* where the buffer starts in it */
    int32_t ok;         /* 1: exported; 0: this buffer cannot be shared by IPC */
    int32_t pad;
} gpuring_ipc_buf_t;

/* Fill *buf_p for the device buffer at ptr.  GPURING_ERR_NOT_SUPPORTED (and
 * ok = 0) where CUDA IPC cannot share it: stream-ordered pools, VMM
 * allocations, host memory. */
gpuring_status_t gpuring_ipc_buf_export(const void *ptr, gpuring_ipc_buf_t *buf_p);

/*
 * Map the buffer `buf` that peer process `peer_key` (rank `peer_rank`, for
 * messages) exported; *ptr_p points at its first byte, valid for `need`
 * bytes, until gpuring_ipc_buf_release(*token_p).
 */
gpuring_status_t gpuring_ipc_buf_open(uint64_t peer_key, int peer_rank,
                                      const gpuring_ipc_buf_t *buf, size_t need, void **ptr_p,
                                      int *token_p);
void gpuring_ipc_buf_release(int token);

/* How many mappings no call uses a process keeps (0 .. GPURING_IPC_BUF_MAPPINGS; more:
 * the most), the least recently used closed first -- a peer's memory stays allocated
 * while any process maps it, whatever the peer frees. */
#define GPURING_IPC_BUF_MAPPINGS 64
void gpuring_ipc_buf_set_cache(int mappings);

/* Close every mapping and forget every export (the component closes). */
void gpuring_ipc_buf_finalize(void);

#endif /* GPURING_PROXY_IPC_BUF_H */
