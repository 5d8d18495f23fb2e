/*
 * cudacpu_driver.c -- the CUDA CPU runtime's stand-in CUDA driver, built as
 * libcuda.so.1 (soname libcuda.so.1): the driver API calls gpuring makes
 * (kernels/memkind.c, kernels/device_cuda.c), answered from the CPU runtime
 * that loaded it (CUDACPU_DRIVER; see cudacpu_driver_link.h), so that gpuring
 * classifies the runtime's memory exactly as it does with a real driver:
 *
 *  cuPointerGetAttribute  memory type (cudaMalloc and IPC mappings: device;
 *                         cudaHostAlloc and cudaHostRegister: host; anything
 *                         else: CUDA_ERROR_INVALID_VALUE, as for host memory the
 *                         driver never saw), device ordinal, range start and
 *                         size, buffer id, legacy IPC capability (cudaMalloc
 *                         only), is-managed (cudaMallocManaged), owning
 *                         context (a device's primary one, or the context
 *                         cuCtxCreate made that cuMemAlloc allocated in;
 *                         none for cudaMallocAsync's pool memory, as the
 *                         driver says), the device pointer the current
 *                         context's kernels see it at (the pointer itself;
 *                         CUDA_ERROR_INVALID_VALUE for device memory of
 *                         another context than the current one -- pool memory
 *                         is every context's; with CUDACPU_CTX_SHARED set, every
 *                         context shares one address space, as a green context
 *                         shares its primary one's)
 *  cuPointerGetAttributes the same, several in one call (zeros, success, for
 *                         memory the runtime never saw)
 *  cuDeviceGet, cuDevicePrimaryCtxRetain   ordinal in, primary context out
 *  cuDevicePrimaryCtxGetState   active (the runtime is attached)
 *  cuCtxCreate, cuCtxDestroy   contexts of the application's own on a device:
 *                         the runtime runs every kernel in its one address
 *                         space, so they differ only in what the driver says
 *                         of the memory cuMemAlloc allocates while one is
 *                         current (a thread's current one until it sets
 *                         another; the runtime's cudaSetDevice does not); a
 *                         destroyed one's handle is the next one made (as a
 *                         real driver's heap may give it), and the streams made
 *                         while it was current die with it: one used after
 *                         aborts the process (a real driver's behaviour is
 *                         undefined)
 *  cuCtxGetId             a created context's own id; a primary one's ordinal + 1
 *  cuCtxGetCurrent        the thread's created context, else the current
 *                         device's primary one
 *  cuCtxSetCurrent        makes that context (and its device) current
 *  cuCtxGetDevice         the current context's device
 *  cuMemcpy, cuStreamSynchronize   through the runtime (gpuring stages
 *                         device buffers for the component below with them)
 *  cuMemAlloc, cuMemFree  cudaMalloc, cudaFree (gpuring packs a non-contiguous
 *                         datatype's elements into such memory)
 *  cuMemAllocAsync, cuMemFreeAsync   cudaMallocAsync, cudaFreeAsync on the
 *                         legacy stream (the pool the device says it has:
 *                         cuDeviceGetAttribute)
 *  cuStreamCreate, cuMemcpyAsync   a non-blocking stream of the runtime's, a copy
 *                         queued on it (gpuring's copies back to device memory);
 *                         cuMemcpy2DAsync one such copy per row
 *  cuMemHostRegister      not supported: staging then copies unpinned
 *  cuInit, cuDriverGetVersion
 *
 * Until a runtime attaches, every call answers CUDA_ERROR_NOT_INITIALIZED.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/cuda_attrs_batch.h"
#include "test/cuda_memcpy2d.h"

#include "test/cudacpu/cudacpu_driver_link.h"

/* driver API values (cuda.h) */
enum {
    DRV_SUCCESS = 0,
    DRV_ERROR_INVALID_VALUE = 1,
    DRV_ERROR_OUT_OF_MEMORY = 2,
    DRV_ERROR_NOT_INITIALIZED = 3,
    DRV_ERROR_INVALID_CONTEXT = 201,
    DRV_ERROR_NOT_SUPPORTED = 801,
    DRV_MEMORYTYPE_HOST = 1,
    DRV_MEMORYTYPE_DEVICE = 2,
    DRV_ATTR_CONTEXT = 1,
    DRV_ATTR_MEMORY_TYPE = 2,
    DRV_ATTR_DEVICE_POINTER = 3,
    DRV_ATTR_BUFFER_ID = 7,
    DRV_ATTR_IS_MANAGED = 8,
    DRV_ATTR_DEVICE_ORDINAL = 9,
    DRV_ATTR_IS_LEGACY_CUDA_IPC_CAPABLE = 10,
    DRV_ATTR_RANGE_START_ADDR = 11,
    DRV_ATTR_RANGE_SIZE = 12,
    DRV_VERSION = 13000,
    DRV_DEV_ATTR_MEMORY_POOLS_SUPPORTED = 115,
    DRV_STREAM_NON_BLOCKING = 1,
};
#define DRV_STREAM_LEGACY ((void *)0x1)

static const cudacpu_driver_link_t *drv_link;

/* ---- contexts cuCtxCreate made: handles are the entries' addresses (a primary
 * context's handle is its device's ordinal + 1) ---- */
#define DRV_MAX_CTXS 16
#define DRV_MAX_CTX_ALLOCS 256
typedef struct drv_ctx {
    int used, device;
    unsigned long long id; /* cuCtxGetId's: each context made has its own */
} drv_ctx_t;
static drv_ctx_t drv_ctxs[DRV_MAX_CTXS]; /* a destroyed one's slot (address) made anew */
static unsigned long long drv_ctx_ids;  /* (lock held) */
/* streams made while a created context was current: destroyed with it */
#define DRV_MAX_STREAMS 64
static struct {
    void *stream;
    drv_ctx_t *ctx;
    int dead;
} drv_streams[DRV_MAX_STREAMS];
static struct {
    uintptr_t base;
    drv_ctx_t *ctx;
} drv_ctx_allocs[DRV_MAX_CTX_ALLOCS]; /* cuMemAlloc'ed while a created context was current */
static pthread_mutex_t drv_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread drv_ctx_t *drv_current; /* NULL: the current device's primary context */

static drv_ctx_t *drv_created(const void *ctx)
{
    for (int i = 0; i < DRV_MAX_CTXS; i++) {
        if (ctx == &drv_ctxs[i]) return &drv_ctxs[i];
    }
    return NULL;
}

/* the created context the allocation at base was made in, or NULL */
static drv_ctx_t *drv_alloc_ctx(uintptr_t base)
{
    drv_ctx_t *ctx = NULL;

    pthread_mutex_lock(&drv_ctx_lock);
    for (int i = 0; i < DRV_MAX_CTX_ALLOCS && ctx == NULL; i++) {
        if (drv_ctx_allocs[i].ctx != NULL && drv_ctx_allocs[i].base == base)
            ctx = drv_ctx_allocs[i].ctx;
    }
    pthread_mutex_unlock(&drv_ctx_lock);
    return ctx;
}

/* base was allocated in ctx (NULL: forget it) */
static int drv_alloc_ctx_set(uintptr_t base, drv_ctx_t *ctx)
{
    int done = ctx == NULL;

    pthread_mutex_lock(&drv_ctx_lock);
    for (int i = 0; i < DRV_MAX_CTX_ALLOCS; i++) {
        if (ctx == NULL && drv_ctx_allocs[i].ctx != NULL && drv_ctx_allocs[i].base == base) {
            drv_ctx_allocs[i].ctx = NULL;
        } else if (ctx != NULL && !done && drv_ctx_allocs[i].ctx == NULL) {
            drv_ctx_allocs[i].base = base;
            drv_ctx_allocs[i].ctx = ctx;
            done = 1;
        }
    }
    pthread_mutex_unlock(&drv_ctx_lock);
    return done;
}

/* A stream that died with its context is used: a real driver's behaviour is undefined
 * (a crash inside libcuda, or work in whatever context now has the handle) -- here
 * the process aborts, saying so. */
static void drv_stream_check(const void *stream)
{
    pthread_mutex_lock(&drv_ctx_lock);
    for (int i = 0; i < DRV_MAX_STREAMS; i++) {
        if (drv_streams[i].stream == stream && drv_streams[i].dead) {
            fprintf(stderr, "cudacpu driver: stream %p used after its context was destroyed\n",
                    stream);
            abort();
        }
    }
    pthread_mutex_unlock(&drv_ctx_lock);
}

void cudacpu_driver_attach(const cudacpu_driver_link_t *link)
{
    __atomic_store_n(&drv_link, link, __ATOMIC_RELEASE);
}

static const cudacpu_driver_link_t *drv_get_link(void)
{
    return __atomic_load_n(&drv_link, __ATOMIC_ACQUIRE);
}

int cuInit(unsigned int flags)
{
    (void)flags;
    return drv_get_link() != NULL ? DRV_SUCCESS : DRV_ERROR_NOT_INITIALIZED;
}

int cuDriverGetVersion(int *version)
{
    if (version == NULL) return DRV_ERROR_INVALID_VALUE;
    *version = DRV_VERSION;
    return DRV_SUCCESS;
}

int cuPointerGetAttribute(void *data, int attribute, uintptr_t ptr)
{
    const cudacpu_driver_link_t *link = drv_get_link();
    cudacpu_ptr_info_t info;

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (data == NULL) return DRV_ERROR_INVALID_VALUE;
    link->pointer_info((const void *)ptr, &info);
    if (info.kind == CUDACPU_PTR_UNKNOWN) return DRV_ERROR_INVALID_VALUE;
    switch (attribute) {
    case DRV_ATTR_CONTEXT: /* a device's primary context is its ordinal + 1 (cuCtxGetCurrent) */
        if (info.kind == CUDACPU_PTR_DEVICE && drv_alloc_ctx(info.base) != NULL) {
            *(void **)data = drv_alloc_ctx(info.base);
        } else {
            *(void **)data = info.kind == CUDACPU_PTR_DEVICE && !info.ipc_capable &&
                                     !info.managed
                                 ? NULL
                                 : (void *)(uintptr_t)(info.device + 1);
        }
        return DRV_SUCCESS;
    case DRV_ATTR_MEMORY_TYPE:
        *(unsigned int *)data = info.kind == CUDACPU_PTR_HOST ? DRV_MEMORYTYPE_HOST
                                                              : DRV_MEMORYTYPE_DEVICE;
        return DRV_SUCCESS;
    case DRV_ATTR_DEVICE_POINTER: /* where the current context's kernels see it, if they can */
        if (info.kind != CUDACPU_PTR_HOST && !(info.kind == CUDACPU_PTR_DEVICE &&
                                               !info.ipc_capable) && /* (pool: any context) */
            drv_alloc_ctx(info.base) != drv_current && getenv("CUDACPU_CTX_SHARED") == NULL)
            return DRV_ERROR_INVALID_VALUE;
        *(uintptr_t *)data = ptr;
        return DRV_SUCCESS;
    case DRV_ATTR_BUFFER_ID: *(unsigned long long *)data = info.buffer_id; return DRV_SUCCESS;
    case DRV_ATTR_IS_MANAGED: *(unsigned int *)data = (unsigned)info.managed; return DRV_SUCCESS;
    case DRV_ATTR_DEVICE_ORDINAL: *(int *)data = info.device; return DRV_SUCCESS;
    case DRV_ATTR_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(int *)data = info.ipc_capable;
        return DRV_SUCCESS;
    case DRV_ATTR_RANGE_START_ADDR: *(uintptr_t *)data = info.base; return DRV_SUCCESS;
    case DRV_ATTR_RANGE_SIZE: *(size_t *)data = info.bytes; return DRV_SUCCESS;
    default: return DRV_ERROR_INVALID_VALUE;
    }
}

/* Several attributes in one call (test/cuda_attrs_batch.h) */
int cuPointerGetAttributes(unsigned int n, int *attributes, void **data, uintptr_t ptr)
{
    const cudacpu_driver_link_t *link = drv_get_link();
    cudacpu_ptr_info_t info;

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    link->pointer_info((const void *)ptr, &info);
    return cuda_attrs_batch(info.kind != CUDACPU_PTR_UNKNOWN, n, attributes, data, ptr,
                            cuPointerGetAttribute);
}

int cuDeviceGet(int *device, int ordinal)
{
    if (drv_get_link() == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (device == NULL || ordinal < 0) return DRV_ERROR_INVALID_VALUE;
    *device = ordinal;
    return DRV_SUCCESS;
}

int cuDevicePrimaryCtxRetain(void **ctx, int device)
{
    if (drv_get_link() == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (ctx == NULL || device < 0) return DRV_ERROR_INVALID_VALUE;
    *ctx = (void *)(uintptr_t)(device + 1);
    return DRV_SUCCESS;
}

int cuDevicePrimaryCtxGetState(int device, unsigned int *flags, int *active)
{
    if (drv_get_link() == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (flags == NULL || active == NULL || device < 0) return DRV_ERROR_INVALID_VALUE;
    *flags = 0;
    *active = 1; /* the runtime attached: it uses them */
    return DRV_SUCCESS;
}

/* a context of the caller's own on `device`, made current */
int cuCtxCreate_v2(void **ctx, unsigned int flags, int device)
{
    const cudacpu_driver_link_t *link = drv_get_link();
    drv_ctx_t *c = NULL;

    (void)flags;
    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (ctx == NULL || device < 0) return DRV_ERROR_INVALID_VALUE;
    if (link->set_device(device) != 0) return DRV_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&drv_ctx_lock);
    for (int i = 0; i < DRV_MAX_CTXS && c == NULL; i++) {
        if (!drv_ctxs[i].used) c = &drv_ctxs[i];
    }
    if (c != NULL) {
        c->used = 1;
        c->device = device;
        c->id = ++drv_ctx_ids;
    }
    pthread_mutex_unlock(&drv_ctx_lock);
    if (c == NULL) return DRV_ERROR_OUT_OF_MEMORY;
    drv_current = c;
    *ctx = c;
    return DRV_SUCCESS;
}

int cuCtxDestroy_v2(void *ctx)
{
    drv_ctx_t *c = drv_created(ctx);

    if (c == NULL) return DRV_ERROR_INVALID_CONTEXT;
    if (drv_current == c) drv_current = NULL;
    pthread_mutex_lock(&drv_ctx_lock);
    c->used = 0;
    for (int i = 0; i < DRV_MAX_STREAMS; i++) {
        if (drv_streams[i].ctx == c) drv_streams[i].dead = 1, drv_streams[i].ctx = NULL;
    }
    pthread_mutex_unlock(&drv_ctx_lock);
    return DRV_SUCCESS;
}

/* a created context's own id; a primary context's (its ordinal + 1) the ordinal + 1 */
int cuCtxGetId(void *ctx, unsigned long long *id)
{
    drv_ctx_t *c;

    if (id == NULL) return DRV_ERROR_INVALID_VALUE;
    if (ctx == NULL) ctx = drv_current;
    c = drv_created(ctx);
    if (c != NULL && !c->used) return DRV_ERROR_INVALID_CONTEXT;
    *id = c != NULL ? c->id | 1ull << 32 : (unsigned long long)(uintptr_t)ctx;
    return ctx != NULL ? DRV_SUCCESS : DRV_ERROR_INVALID_CONTEXT;
}

/* the thread's created context, else its device's primary one: its ordinal + 1, never
 * NULL */
int cuCtxGetCurrent(void **ctx)
{
    const cudacpu_driver_link_t *link = drv_get_link();

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (ctx == NULL) return DRV_ERROR_INVALID_VALUE;
    *ctx = drv_current != NULL ? (void *)drv_current : (void *)(uintptr_t)(link->get_device() + 1);
    return DRV_SUCCESS;
}

int cuCtxGetDevice(int *device)
{
    const cudacpu_driver_link_t *link = drv_get_link();

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (device == NULL) return DRV_ERROR_INVALID_VALUE;
    *device = drv_current != NULL ? drv_current->device : link->get_device();
    return DRV_SUCCESS;
}

int cuCtxSetCurrent(void *ctx)
{
    const cudacpu_driver_link_t *link = drv_get_link();
    drv_ctx_t *c = drv_created(ctx);

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (ctx == NULL) { /* no context: the runtime keeps its device */
        drv_current = NULL;
        return DRV_SUCCESS;
    }
    if (link->set_device(c != NULL ? c->device : (int)((uintptr_t)ctx - 1)) != 0)
        return DRV_ERROR_INVALID_CONTEXT;
    drv_current = c;
    return DRV_SUCCESS;
}

int cuMemcpy(uintptr_t dst, uintptr_t src, size_t bytes)
{
    const cudacpu_driver_link_t *link = drv_get_link();

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    return link->copy((void *)dst, (const void *)src, bytes) == 0 ? DRV_SUCCESS
                                                                   : DRV_ERROR_INVALID_VALUE;
}

int cuStreamSynchronize(void *stream)
{
    const cudacpu_driver_link_t *link = drv_get_link();

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (stream == NULL || stream == DRV_STREAM_LEGACY)
        return link->sync_legacy() == 0 ? DRV_SUCCESS : DRV_ERROR_INVALID_VALUE;
    drv_stream_check(stream);
    return link->stream_sync(stream) == 0 ? DRV_SUCCESS : DRV_ERROR_INVALID_VALUE;
}

/* a non-blocking stream of the runtime's (the flag must say so: all gpuring asks for) */
int cuStreamCreate(void **stream, unsigned int flags)
{
    const cudacpu_driver_link_t *link = drv_get_link();

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (stream == NULL || flags != DRV_STREAM_NON_BLOCKING) return DRV_ERROR_INVALID_VALUE;
    if (link->stream_create(stream) != 0) return DRV_ERROR_INVALID_VALUE;
    if (drv_current != NULL) { /* (a table full: the stream outlives its context) */
        pthread_mutex_lock(&drv_ctx_lock);
        for (int i = 0; i < DRV_MAX_STREAMS; i++) {
            if (drv_streams[i].stream != NULL) continue; /* (a dead one is kept: its uses) */
            drv_streams[i].stream = *stream;
            drv_streams[i].ctx = drv_current;
            break;
        }
        pthread_mutex_unlock(&drv_ctx_lock);
    }
    return DRV_SUCCESS;
}

int cuMemcpyAsync(uintptr_t dst, uintptr_t src, size_t bytes, void *stream)
{
    const cudacpu_driver_link_t *link = drv_get_link();

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (stream == NULL || stream == DRV_STREAM_LEGACY)
        return link->copy((void *)dst, (const void *)src, bytes) == 0 ? DRV_SUCCESS
                                                                      : DRV_ERROR_INVALID_VALUE;
    drv_stream_check(stream);
    return link->copy_async((void *)dst, (const void *)src, bytes, stream) == 0
               ? DRV_SUCCESS
               : DRV_ERROR_INVALID_VALUE;
}

/* its rows queued on the stream one by one, in order: what the stream then does */
int cuMemcpy2DAsync_v2(const gpuring_cuda_memcpy2d_t *c, void *stream)
{
    uintptr_t src, dst;

    if (cuda_memcpy2d_ends(c, &src, &dst) != 0) return DRV_ERROR_INVALID_VALUE;
    for (size_t r = 0; r < c->height; r++) {
        int rc = cuMemcpyAsync(dst + r * c->dst_pitch, src + r * c->src_pitch, c->width, stream);

        if (rc != DRV_SUCCESS) return rc;
    }
    return DRV_SUCCESS;
}

int cuDeviceGetAttribute(int *value, int attribute, int device)
{
    if (drv_get_link() == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (value == NULL || device < 0) return DRV_ERROR_INVALID_VALUE;
    if (attribute != DRV_DEV_ATTR_MEMORY_POOLS_SUPPORTED) return DRV_ERROR_INVALID_VALUE;
    *value = 1;
    return DRV_SUCCESS;
}

/* the device's pool, in the order of the legacy stream (the only one gpuring names) */
int cuMemAllocAsync(uintptr_t *dptr, size_t bytes, void *stream)
{
    const cudacpu_driver_link_t *link = drv_get_link();
    void *p = NULL;

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (dptr == NULL || stream != DRV_STREAM_LEGACY) return DRV_ERROR_INVALID_VALUE;
    if (link->alloc_async(&p, bytes) != 0) return DRV_ERROR_OUT_OF_MEMORY;
    *dptr = (uintptr_t)p;
    return DRV_SUCCESS;
}

int cuMemFreeAsync(uintptr_t dptr, void *stream)
{
    const cudacpu_driver_link_t *link = drv_get_link();

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (stream != DRV_STREAM_LEGACY) return DRV_ERROR_INVALID_VALUE;
    return link->free_async((void *)dptr) == 0 ? DRV_SUCCESS : DRV_ERROR_INVALID_VALUE;
}

int cuMemAlloc_v2(uintptr_t *dptr, size_t bytes)
{
    const cudacpu_driver_link_t *link = drv_get_link();
    void *p = NULL;

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    if (dptr == NULL) return DRV_ERROR_INVALID_VALUE;
    if (link->alloc(&p, bytes) != 0) return DRV_ERROR_OUT_OF_MEMORY;
    if (drv_current != NULL && !drv_alloc_ctx_set((uintptr_t)p, drv_current)) {
        (void)link->free_(p);
        return DRV_ERROR_OUT_OF_MEMORY;
    }
    *dptr = (uintptr_t)p;
    return DRV_SUCCESS;
}

int cuMemFree_v2(uintptr_t dptr)
{
    const cudacpu_driver_link_t *link = drv_get_link();

    if (link == NULL) return DRV_ERROR_NOT_INITIALIZED;
    (void)drv_alloc_ctx_set(dptr, NULL);
    return link->free_((void *)dptr) == 0 ? DRV_SUCCESS : DRV_ERROR_INVALID_VALUE;
}

int cuMemHostRegister_v2(void *ptr, size_t bytes, unsigned int flags)
{
    (void)ptr, (void)bytes, (void)flags;
    return DRV_ERROR_NOT_SUPPORTED;
}

int cuMemHostUnregister(void *ptr)
{
    (void)ptr;
    return DRV_ERROR_INVALID_VALUE;
}
