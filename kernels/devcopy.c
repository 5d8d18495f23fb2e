/*
 * devcopy.c -- device <-> host copies through the application's CUDA driver
 * (see devcopy.h).  Every function is looked up once, from the libcuda the
 * application loaded (memkind.c's gpuring_cuda_driver_sym), the first time
 * a copy is needed: by then device memory exists, so the driver is there.
 */
#include "kernels/devcopy.h"

#include <stdint.h>

#include "kernels/memkind.h"

/* driver API values (cuda.h), which the build may not have */
#define DEVCOPY_CU_POINTER_ATTRIBUTE_CONTEXT 1
#define DEVCOPY_CU_MEMHOSTREGISTER_PORTABLE 0x01

typedef struct devcopy_driver {
    int (*memcpy_)(uintptr_t dst, uintptr_t src, size_t bytes);
    int (*stream_sync)(void *stream);
    int (*ctx_get)(void **ctx);
    int (*ctx_set)(void *ctx);
    int (*pointer_attr)(void *data, int attribute, uintptr_t ptr);
    int (*host_register)(void *ptr, size_t bytes, unsigned int flags);
    int (*host_unregister)(void *ptr);
} devcopy_driver_t;

static devcopy_driver_t devcopy_drv;
static int devcopy_found; /* 1 once every function above was found */

static int devcopy_lookup(void)
{
    devcopy_driver_t d;

    if (__atomic_load_n(&devcopy_found, __ATOMIC_ACQUIRE)) return 1;
    *(void **)&d.memcpy_ = gpuring_cuda_driver_sym("cuMemcpy");
    *(void **)&d.stream_sync = gpuring_cuda_driver_sym("cuStreamSynchronize");
    *(void **)&d.ctx_get = gpuring_cuda_driver_sym("cuCtxGetCurrent");
    *(void **)&d.ctx_set = gpuring_cuda_driver_sym("cuCtxSetCurrent");
    *(void **)&d.pointer_attr = gpuring_cuda_driver_sym("cuPointerGetAttribute");
    *(void **)&d.host_register = gpuring_cuda_driver_sym("cuMemHostRegister_v2");
    *(void **)&d.host_unregister = gpuring_cuda_driver_sym("cuMemHostUnregister");
    if (d.memcpy_ == NULL || d.stream_sync == NULL || d.ctx_get == NULL || d.ctx_set == NULL ||
        d.pointer_attr == NULL || d.host_register == NULL || d.host_unregister == NULL) {
        return 0;
    }
    devcopy_drv = d; /* the same values from any racing thread */
    __atomic_store_n(&devcopy_found, 1, __ATOMIC_RELEASE);
    return 1;
}

gpuring_status_t gpuring_devcopy(void *dst, const void *src, size_t bytes, int host_pinned,
                                 const char **why_p)
{
    void *ctx = NULL, *owner = NULL;
    int rc;

    if (bytes == 0) return GPURING_OK;
    if (!devcopy_lookup()) {
        *why_p = "the process's CUDA driver lacks cuMemcpy, cuStreamSynchronize or the context "
                 "functions";
        return GPURING_ERR_NOT_SUPPORTED;
    }
    /* cuMemcpy needs a current context; a thread that allocated nothing may
     * have none: then borrow the one the device memory belongs to */
    if (devcopy_drv.ctx_get(&ctx) != 0) ctx = NULL;
    if (ctx == NULL &&
        devcopy_drv.pointer_attr(&owner, DEVCOPY_CU_POINTER_ATTRIBUTE_CONTEXT,
                                 (uintptr_t)src) != 0 &&
        devcopy_drv.pointer_attr(&owner, DEVCOPY_CU_POINTER_ATTRIBUTE_CONTEXT,
                                 (uintptr_t)dst) != 0) {
        owner = NULL;
    }
    if (owner != NULL) devcopy_drv.ctx_set(owner);
    rc = devcopy_drv.memcpy_((uintptr_t)dst, (uintptr_t)src, bytes);
    /* from pageable memory the driver may return before the data reached the
     * device: its legacy stream holds the rest */
    if (rc == 0 && !host_pinned) rc = devcopy_drv.stream_sync(NULL);
    if (owner != NULL) devcopy_drv.ctx_set(NULL);
    if (rc != 0) {
        *why_p = "cuMemcpy between device and host memory failed";
        return GPURING_ERR_CUDA;
    }
    return GPURING_OK;
}

/* cuMemAlloc and cuMemFree, looked up apart: staging needs neither */
typedef struct devcopy_mem_fns {
    int (*alloc)(uintptr_t *dptr, size_t bytes);
    int (*free_)(uintptr_t dptr);
} devcopy_mem_fns_t;

static devcopy_mem_fns_t devcopy_mem;
static int devcopy_mem_found; /* 1 once both were found */

/* Run fn in the context that owns `near` (made current, the thread's given back). */
static int devcopy_in_context(const void *near, int (*fn)(void *), void *arg)
{
    void *ctx = NULL, *owner = NULL;
    int rc;

    if (devcopy_drv.ctx_get(&ctx) != 0) ctx = NULL;
    if (devcopy_drv.pointer_attr(&owner, DEVCOPY_CU_POINTER_ATTRIBUTE_CONTEXT,
                                 (uintptr_t)near) != 0)
        owner = NULL;
    if (owner != NULL && owner != ctx) devcopy_drv.ctx_set(owner);
    rc = fn(arg);
    if (owner != NULL && owner != ctx) devcopy_drv.ctx_set(ctx);
    return rc;
}

typedef struct devcopy_mem_arg {
    uintptr_t ptr;
    size_t bytes;
} devcopy_mem_arg_t;

static int devcopy_mem_alloc(void *arg)
{
    devcopy_mem_arg_t *a = arg;
    return devcopy_mem.alloc(&a->ptr, a->bytes);
}

static int devcopy_mem_free(void *arg)
{
    return devcopy_mem.free_(((devcopy_mem_arg_t *)arg)->ptr);
}

static int devcopy_mem_lookup(void)
{
    devcopy_mem_fns_t m;

    if (__atomic_load_n(&devcopy_mem_found, __ATOMIC_ACQUIRE)) return 1;
    if (!devcopy_lookup()) return 0;
    *(void **)&m.alloc = gpuring_cuda_driver_sym("cuMemAlloc_v2");
    *(void **)&m.free_ = gpuring_cuda_driver_sym("cuMemFree_v2");
    if (m.alloc == NULL || m.free_ == NULL) return 0;
    devcopy_mem = m; /* the same values from any racing thread */
    __atomic_store_n(&devcopy_mem_found, 1, __ATOMIC_RELEASE);
    return 1;
}

gpuring_status_t gpuring_devcopy_alloc(const void *near, size_t bytes, void **ptr_p,
                                       const char **why_p)
{
    devcopy_mem_arg_t a = {.bytes = bytes > 0 ? bytes : 1};

    *ptr_p = NULL;
    if (!devcopy_mem_lookup()) {
        *why_p = "the process's CUDA driver lacks cuMemAlloc or cuMemFree";
        return GPURING_ERR_NOT_SUPPORTED;
    }
    if (devcopy_in_context(near, devcopy_mem_alloc, &a) != 0) {
        *why_p = "cuMemAlloc failed";
        return GPURING_ERR_NO_MEMORY;
    }
    *ptr_p = (void *)a.ptr;
    return GPURING_OK;
}

void gpuring_devcopy_free(const void *near, void *ptr)
{
    devcopy_mem_arg_t a = {.ptr = (uintptr_t)ptr};

    if (ptr != NULL && devcopy_mem_lookup()) (void)devcopy_in_context(near, devcopy_mem_free, &a);
}

int gpuring_devcopy_pin(void *ptr, size_t bytes)
{
    return devcopy_lookup() &&
           devcopy_drv.host_register(ptr, bytes, DEVCOPY_CU_MEMHOSTREGISTER_PORTABLE) == 0;
}

void gpuring_devcopy_unpin(void *ptr)
{
    if (devcopy_lookup()) (void)devcopy_drv.host_unregister(ptr);
}
