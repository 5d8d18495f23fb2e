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
 * Copy `bytes` from src to dst, either of which may be device memory (the
 * driver tells by the address), and return when the data is in place at dst
 * for every later use, from the host or from any stream.  `host_pinned`:
 * the host side was page-locked with gpuring_devcopy_pin (a faster copy, no
 * extra synchronization).  The calling thread's current CUDA context is the
 * same afterwards.  GPURING_OK, or an error with *why_p saying what failed.
 */
gpuring_status_t gpuring_devcopy(void *dst, const void *src, size_t bytes, int host_pinned,
                                 const char **why_p);

/*
 * `bytes` of device memory in the context that holds device memory `near`
 * (cuMemAlloc, that context made current for it, the thread's given back);
 * free it with gpuring_devcopy_free(near, ptr).  GPURING_OK, or an error with
 * *why_p saying what failed.
 */
gpuring_status_t gpuring_devcopy_alloc(const void *near, size_t bytes, void **ptr_p,
                                       const char **why_p);
void gpuring_devcopy_free(const void *near, void *ptr);

/* Page-lock [ptr, ptr + bytes) for the driver's DMA: 1 done, 0 not (copies
 * then still work, more slowly).  Undo with gpuring_devcopy_unpin. */
int gpuring_devcopy_pin(void *ptr, size_t bytes);
void gpuring_devcopy_unpin(void *ptr);

#endif /* GPURING_KERNELS_DEVCOPY_H */
