/*
 * cudacpu_driver_link.h -- what the CUDA CPU runtime hands its stand-in CUDA
 * driver (cudacpu_driver.c, built as libcuda.so.1) so that the driver API's
 * pointer queries and context calls answer from this runtime's allocations
 * and current device, as a real driver answers for the real runtime's.  Plain C.
 *
 * The runtime dlopens the driver named by CUDACPU_DRIVER (a path) at its first
 * call, as CUDA's runtime loads libcuda.so.1, and calls its
 * cudacpu_driver_attach with this table.
 */
#ifndef CUDACPU_DRIVER_LINK_H
#define CUDACPU_DRIVER_LINK_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    CUDACPU_PTR_UNKNOWN = 0, /* memory the runtime never saw */
    CUDACPU_PTR_HOST,        /* cudaHostAlloc / cudaHostRegister */
    CUDACPU_PTR_DEVICE,      /* cudaMalloc, cudaMallocAsync, cudaMallocManaged */
    CUDACPU_PTR_IPC,         /* cudaIpcOpenMemHandle: device memory of another process */
} cudacpu_ptr_kind_t;

typedef struct cudacpu_ptr_info {
    cudacpu_ptr_kind_t kind;
    int device;
    uintptr_t base; /* the allocation (or registration) holding the pointer */
    size_t bytes;
    unsigned long long buffer_id; /* unique per allocation in this process */
    int ipc_capable;  /* cudaIpcGetMemHandle works on it: cudaMalloc, not cudaMallocAsync */
    int managed;      /* cudaMallocManaged */
} cudacpu_ptr_info_t;

typedef struct cudacpu_driver_link {
    void (*pointer_info)(const void *ptr, cudacpu_ptr_info_t *info_p);
    int (*get_device)(void);          /* the calling thread's current device */
    int (*set_device)(int device);    /* 0, or a cudaError_t */
    /* cudaMemcpy(cudaMemcpyDefault), then the legacy stream synchronized: 0 or a cudaError_t */
    int (*copy)(void *dst, const void *src, size_t bytes);
    int (*sync_legacy)(void);         /* cudaStreamSynchronize(legacy stream) */
    int (*alloc)(void **ptr_p, size_t bytes); /* cudaMalloc on the current device */
    int (*free_)(void *ptr);                  /* cudaFree */
    /* stream-ordered on the legacy stream: cudaMallocAsync, cudaFreeAsync */
    int (*alloc_async)(void **ptr_p, size_t bytes);
    int (*free_async)(void *ptr);
    /* a non-blocking stream, a copy queued on one, waiting for one: 0 or a cudaError_t */
    int (*stream_create)(void **stream_p);
    int (*copy_async)(void *dst, const void *src, size_t bytes, void *stream);
    int (*stream_sync)(void *stream);
} cudacpu_driver_link_t;

typedef void (*cudacpu_driver_attach_fn)(const cudacpu_driver_link_t *link);

#endif /* CUDACPU_DRIVER_LINK_H */
