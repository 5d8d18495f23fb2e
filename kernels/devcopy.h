/*
 * devcopy.h -- copies between device memory and host memory through the
 * application's own CUDA driver (libcuda, which any process holding device
 * memory has loaded), for staging device buffers through host memory.
 *
 * It does not use gpuring's CUDA runtime: staging must work wherever device
 * memory exists -- also when gpuring was built without CUDA, or when the
 * driver is too old for gpuring's runtime -- because it is what keeps the
 * component below (which may not read GPU memory) from being handed device
 * pointers.  Plain C, no CUDA header.
 */
#ifndef GPURING_KERNELS_DEVCOPY_H
#define GPURING_KERNELS_DEVCOPY_H

#include <stddef.h>

#include "common/gpuring_common.h"

/*
 * Every function works in the CUDA context the device memory it is given is
 * used in -- the one it was allocated in, or its GPU's primary context for
 * memory of no context (stream-ordered pools, cuMemCreate) -- made current for
 * the call on a thread that has another or none, the thread's own given back.
 */

/*
 * Copy `bytes` from src to dst, either of which may be device memory (the
 * driver tells by the address), and return when the data is in place at dst
 * for every later use, from the host or from any stream.  `host_pinned`:
 * the host side was page-locked with gpuring_devcopy_pin (a faster copy, no
 * extra synchronization).  GPURING_OK, or an error with *why_p saying what
 * failed.
 */
gpuring_status_t gpuring_devcopy(void *dst, const void *src, size_t bytes, int host_pinned,
                                 const char **why_p);

/*
 * The same for a call's result into device memory dst, which the call holds
 * until it returns (no work of the application's may touch it meanwhile): on a
 * non-blocking stream of gpuring's own, waiting for none of the application's
 * streams -- a copy on the legacy stream waits for all their work queued so far,
 * inside whatever MPI_Test or MPI_Wait completes the call.  The legacy stream
 * where the driver lacks cuStreamCreate or cuMemcpyAsync.
 */
gpuring_status_t gpuring_devcopy_back(void *dst, const void *src, size_t bytes, int host_pinned,
                                      const char **why_p);

/* A block of a copy: `bytes` from src to dst; or (rows > 1) `rows` such rows, each the
 * last's `pitch` bytes on in both (pitch > bytes, at most GPURING_DEVCOPY_MAX_PITCH):
 * one 2D copy, where a datatype repeats a block at a stride. */
typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
    size_t rows;  /* 1: a block alone */
    size_t pitch; /* rows > 1 */
} gpuring_devcopy_block_t;
#define GPURING_DEVCOPY_MAX_PITCH ((size_t)2147483647) /* a GPU's CU_DEVICE_ATTRIBUTE_MAX_PITCH */

/* n blocks of one context's device memory (that of blocks[0]'s): `back` from host
 * memory into device memory as gpuring_devcopy_back copies -- a result whose datatype
 * has holes goes back block by block, leaving the bytes between them (not the call's:
 * the application may write them while the call runs) as they are -- else from device
 * memory into host memory as gpuring_devcopy does (the blocks of a datatype whose span
 * is far larger than they are: only they are read, only their pages written); queued
 * together, one synchronization. */
gpuring_status_t gpuring_devcopy_blocks(const gpuring_devcopy_block_t *blocks, int n, int back,
                                        int host_pinned, const char **why_p);
/* What gpuring_devcopy_blocks moved so far in this process, in (back 0) or back: rows
 * (blocks), and the copies the driver was asked for (a 2D copy moves many rows). */
void gpuring_devcopy_block_counts(int back, unsigned long long *rows_p,
                                  unsigned long long *copies_p);

/* The wait timeout (coll_gpuring_wait_timeout; 0: none) after which, and every such
 * time again, a copy waiting for the application's work on the legacy stream says so
 * (and waits on). */
void gpuring_devcopy_set_wait(int timeout);

/* Wait for the work queued so far on the legacy stream of device memory ptr's context
 * (every blocking stream's before it): what a copy out of ptr does first, for memory a
 * call writes without reading -- its result, copied back by gpuring_devcopy_back, must
 * land after the application's earlier work on it. */
gpuring_status_t gpuring_devcopy_order(const void *ptr, const char **why_p);

/*
 * `bytes` of device memory on the GPU of device memory `near`, in stream order
 * on the legacy stream where that GPU has memory pools (cuMemAllocAsync: neither
 * it nor gpuring_devcopy_free waits for kernels running meanwhile -- cuMemFree
 * waits for the whole device), else cuMemAlloc; free it with
 * gpuring_devcopy_free, with *pooled_p (which of the two it was).  GPURING_OK, or an
 * error with *why_p saying what failed.
 */
gpuring_status_t gpuring_devcopy_alloc(const void *near, size_t bytes, void **ptr_p,
                                       int *pooled_p, const char **why_p);
void gpuring_devcopy_free(void *ptr, int pooled);

/* Page-lock [ptr, ptr + bytes) for the driver's DMA (portable: for every
 * context), in the context of device memory `near` (the thread's own where near
 * is none): what gpuring_devcopy_unpin needs back, or NULL (not pinned: copies
 * then still work, more slowly). */
void *gpuring_devcopy_pin(void *ptr, size_t bytes, const void *near);
void gpuring_devcopy_unpin(void *ptr, void *pin);

#endif /* GPURING_KERNELS_DEVCOPY_H */
