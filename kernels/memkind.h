/*
 * memkind.h -- what kind of memory a pointer is, asked of the CUDA driver
 * only if the application already loaded it (no CUDA in the process means
 * no device memory), so gpuring loads and runs without a CUDA driver.
 */
#ifndef GPURING_KERNELS_MEMKIND_H
#define GPURING_KERNELS_MEMKIND_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    GPURING_MEM_HOST,    /* ordinary or pinned host memory */
    GPURING_MEM_DEVICE,  /* cudaMalloc / cudaMallocAsync */
    GPURING_MEM_MANAGED, /* cudaMallocManaged */
} gpuring_mem_kind_t;

/* The kind of memory at ptr; for device and managed memory, the CUDA device
 * ordinal it belongs to in *device_p (may be NULL; -1 for host memory). */
gpuring_mem_kind_t gpuring_mem_kind(const void *ptr, int *device_p);
/* The kinds of a call's two buffers, a and b (b may be a), in kinds[0] and
 * kinds[1], with their devices: one look for the driver for both.  other_ctx[i]
 * is 1 for device memory of a CUDA context other than its GPU's primary one
 * (cuCtxCreate's): gpuring's kernels, which run in the primary context, cannot
 * reach it. */
void gpuring_mem_kind_both(const void *a, const void *b, gpuring_mem_kind_t kinds[2],
                           int devices[2], int other_ctx[2]);
const char *gpuring_mem_kind_name(gpuring_mem_kind_t kind);
/* May any pointer of this process be device or managed memory now?  0 while
 * the application has loaded no CUDA driver (the same look as
 * gpuring_mem_kind's, without classifying anything). */
int gpuring_mem_any_device(void);

/* The device allocation ptr lies in, as CUDA IPC needs it. */
typedef struct gpuring_mem_range {
    uintptr_t base;     /* start of the allocation */
    size_t bytes;       /* its size */
    uint64_t buffer_id; /* unique in this process for the process's life */
    int ipc_capable;    /* cudaIpcGetMemHandle works on it (cudaMalloc; not pools, not VMM) */
} gpuring_mem_range_t;

/* 0 and *range_p filled, or -1: not device memory the driver can describe. */
int gpuring_mem_range(const void *ptr, gpuring_mem_range_t *range_p);

/* A function of the CUDA driver (libcuda) the application loaded; NULL
 * while it has loaded none (gpuring never loads it itself). */
void *gpuring_cuda_driver_sym(const char *name);
/* GPU `ordinal`'s primary context (CUcontext), retained once and kept for the
 * process; with make 0, NULL while it is not active (it is not made for a
 * comparison); NULL where the driver cannot give it. */
void *gpuring_cuda_primary_ctx(int ordinal, int make);
/* The calling thread's CUDA context while gpuring works in another: entered with
 * ctx (NULL, or one the driver will not make current: the thread's own stays;
 * .switched says which), left with the thread's own given back. */
typedef struct gpuring_cuda_scope {
    void *saved; /* the thread's own (NULL: none) */
    int switched;
} gpuring_cuda_scope_t;
void gpuring_cuda_ctx_enter(void *ctx, gpuring_cuda_scope_t *scope);
void gpuring_cuda_ctx_leave(const gpuring_cuda_scope_t *scope);

#endif /* GPURING_KERNELS_MEMKIND_H */
