/*
 * device_cuda.c -- kernels/device.h over the CUDA runtime.
 */
#include "kernels/device.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"
#include "kernels/memkind.h"

int gpuring_device_built(void)
{
    return 1;
}

/* cuCtxGetCurrent / cuCtxSetCurrent of the driver the application loaded */
typedef int (*device_ctx_get_fn)(void **ctx);
typedef int (*device_ctx_set_fn)(void *ctx);
static pthread_once_t device_ctx_once = PTHREAD_ONCE_INIT;
static device_ctx_get_fn device_ctx_get;
static device_ctx_set_fn device_ctx_set;

/* only device buffers bring us here, and they need the driver loaded */
static void device_ctx_lookup(void)
{
    device_ctx_get = (device_ctx_get_fn)gpuring_cuda_driver_sym("cuCtxGetCurrent");
    device_ctx_set = (device_ctx_set_fn)gpuring_cuda_driver_sym("cuCtxSetCurrent");
    if (device_ctx_get == NULL || device_ctx_set == NULL) device_ctx_get = NULL;
}

gpuring_device_saved_t gpuring_device_save(void)
{
    gpuring_device_saved_t s = {0, NULL};

    pthread_once(&device_ctx_once, device_ctx_lookup);
    if (device_ctx_get != NULL && device_ctx_get(&s.ctx) == 0) s.valid = 1;
    return s;
}

void gpuring_device_restore(gpuring_device_saved_t saved)
{
    void *cur = NULL;

    if (!saved.valid || device_ctx_get == NULL) return;
    if (device_ctx_get(&cur) == 0 && cur == saved.ctx) return;
    (void)device_ctx_set(saved.ctx);
}

/* Always cudaSetDevice: it also makes the device's primary context current
 * (CUDA 12 on), which a thread that never used CUDA lacks even where
 * cudaGetDevice already says `device`, and which the driver API needs. */
gpuring_status_t gpuring_device_use(int device)
{
    const cudaError_t err = cudaSetDevice(device);
    char what[48];

    if (err == cudaSuccess) return GPURING_OK;
    snprintf(what, sizeof(what), "cudaSetDevice(%d)", device); /* (which device) */
    GPURING_CUDA_LOG_FAILURE(err, what);
    return GPURING_ERR_CUDA;
}

gpuring_status_t gpuring_device_stream_create(void **stream_p)
{
    cudaStream_t s;

    GPURING_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *stream_p = s;
    return GPURING_OK;
}

void gpuring_device_stream_destroy(void *stream)
{
    cudaError_t err;

    if (stream == NULL) return;
    err = cudaStreamDestroy((cudaStream_t)stream);
    if (err != cudaSuccess) {
        /* at teardown the context may already be gone (cudaDeviceReset) */
        GPURING_DEBUG(GPURING_SUBSYS_KERNEL, "cudaStreamDestroy: %s", cudaGetErrorName(err));
        (void)cudaGetLastError();
    }
}

/* Poll until the work before `event` (NULL: all of `stream`'s) is done, at most
 * timeout seconds (<= 0: no bound): the last query's result (cudaErrorNotReady past
 * the timeout). */
static cudaError_t device_poll_done(void *stream, void *event, double timeout)
{
    gpuring_spin_t spin;
    cudaError_t err;

    gpuring_spin_init(&spin, timeout);
    while ((err = event != NULL ? cudaEventQuery((cudaEvent_t)event)
                                : cudaStreamQuery((cudaStream_t)stream)) == cudaErrorNotReady) {
        if (gpuring_spin_tick(&spin) != GPURING_OK) break;
    }
    return err;
}

gpuring_status_t gpuring_device_stream_idle(void *stream, double timeout)
{
    cudaError_t err;

    if (stream == NULL) return GPURING_OK;
    err = device_poll_done(stream, NULL, timeout);
    if (err == cudaErrorNotReady) return GPURING_ERR_TIMEOUT;
    if (err != cudaSuccess) {
        GPURING_CUDA_LOG_FAILURE(err, "cudaStreamQuery (the stream's work)");
        return GPURING_ERR_CUDA;
    }
    return GPURING_OK;
}

gpuring_status_t gpuring_device_event_record_default(void **event_p)
{
    if (*event_p == NULL) {
        cudaEvent_t ev;
        GPURING_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        *event_p = ev;
    }
    GPURING_CUDA_CHECK(cudaEventRecord((cudaEvent_t)*event_p, cudaStreamLegacy));
    return GPURING_OK;
}

gpuring_status_t gpuring_device_stream_wait(void *stream, void *event)
{
    GPURING_CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0));
    return GPURING_OK;
}

gpuring_status_t gpuring_device_event_wait(void *event, double timeout_sec)
{
    cudaError_t err;

    if (event == NULL) return GPURING_OK;
    err = device_poll_done(NULL, event, timeout_sec);
    if (err == cudaErrorNotReady) return GPURING_ERR_TIMEOUT;
    GPURING_CUDA_CHECK(err);
    return GPURING_OK;
}

void gpuring_device_event_destroy(void *event)
{
    if (event != NULL && cudaEventDestroy((cudaEvent_t)event) != cudaSuccess)
        (void)cudaGetLastError(); /* at teardown the context may already be gone */
}

/* An allocation's result: out of memory is GPURING_ERR_NO_MEMORY (not a sticky
 * error: the context goes on), anything else GPURING_ERR_CUDA; logged. */
static gpuring_status_t device_alloc_status(cudaError_t err, const char *what)
{
    if (err == cudaSuccess) return GPURING_OK;
    GPURING_CUDA_LOG_FAILURE(err, what);
    return err == cudaErrorMemoryAllocation ? GPURING_ERR_NO_MEMORY : GPURING_ERR_CUDA;
}

gpuring_status_t gpuring_device_alloc(size_t bytes, void **ptr_p)
{
    return device_alloc_status(cudaMalloc(ptr_p, bytes), "cudaMalloc");
}

/* The current device allocates from its stream-ordered pool (the same answer at
 * every call for one device: ordered memory is freed as it was allocated). */
static int device_pools(void)
{
    int dev = 0, pools = 0;

    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return pools != 0;
}

gpuring_status_t gpuring_device_alloc_ordered(size_t bytes, void *stream, void **ptr_p)
{
    if (!device_pools()) return gpuring_device_alloc(bytes, ptr_p);
    return device_alloc_status(cudaMallocAsync(ptr_p, bytes, (cudaStream_t)stream),
                               "cudaMallocAsync");
}

void gpuring_device_free_ordered(void *ptr, void *stream)
{
    cudaError_t err;

    if (ptr == NULL) return;
    if (!device_pools()) {
        gpuring_device_free(ptr);
        return;
    }
    err = cudaFreeAsync(ptr, (cudaStream_t)stream);
    if (err != cudaSuccess) {
        GPURING_DEBUG(GPURING_SUBSYS_KERNEL, "cudaFreeAsync: %s", cudaGetErrorName(err));
        (void)cudaGetLastError();
    }
}

gpuring_status_t gpuring_device_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    GPURING_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream));
    return GPURING_OK;
}

/*
 * The frees deferred while kernels that wait for peers are in flight (device.h).  The
 * executor's side is lock-free (every device call passes it): a kernel's begin counts
 * itself, then looks whether a free is under way (`device_freeing`, set around every
 * cudaFree under the lock); a free sets that flag, then looks at the count.  Both
 * sequentially consistent: at least one sees the other -- the free defers, or the
 * launch waits for the lock, which the free holds through its cudaFree.
 */
typedef struct device_deferred {
    void *ptr;
    int device;
    struct device_deferred *next;
} device_deferred_t;

static pthread_mutex_t device_free_lock = PTHREAD_MUTEX_INITIALIZER;
static int device_waiting;                 /* atomic: kernels that wait for peers, in flight */
static int device_freeing;                 /* atomic: a cudaFree is under way (lock held) */
static device_deferred_t *device_deferred; /* frees they hold back (changed under the
                                            * lock; looked at without it by a kernel's end) */

static void device_free_now(void *ptr)
{
    cudaError_t err = cudaFree(ptr);

    if (err != cudaSuccess) {
        GPURING_DEBUG(GPURING_SUBSYS_KERNEL, "cudaFree: %s", cudaGetErrorName(err));
        (void)cudaGetLastError();
    }
}

/* Lock held: 1 with device_freeing set where no such kernel is in flight (the caller
 * frees, then device_frees_end), 0 where one is (defer). */
static int device_frees_begin(void)
{
    __atomic_store_n(&device_freeing, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&device_waiting, __ATOMIC_SEQ_CST) == 0) return 1;
    __atomic_store_n(&device_freeing, 0, __ATOMIC_SEQ_CST);
    return 0;
}

static void device_frees_end(void)
{
    __atomic_store_n(&device_freeing, 0, __ATOMIC_SEQ_CST);
}

/* Lock held: the deferred frees, where no such kernel is in flight any more. */
static void device_drain_locked(void)
{
    device_deferred_t *d = device_deferred;
    gpuring_device_saved_t app;

    if (d == NULL || !device_frees_begin()) return;
    app = gpuring_device_save();
    __atomic_store_n(&device_deferred, NULL, __ATOMIC_SEQ_CST);
    while (d != NULL) {
        device_deferred_t *next = d->next;

        if (gpuring_device_use(d->device) == GPURING_OK) device_free_now(d->ptr);
        free(d);
        d = next;
    }
    gpuring_device_restore(app);
    device_frees_end();
}

void gpuring_device_free(void *ptr)
{
    device_deferred_t *d;
    int device = 0;

    if (ptr == NULL) return;
    pthread_mutex_lock(&device_free_lock);
    if (device_frees_begin()) {
        device_free_now(ptr);
        device_frees_end();
        pthread_mutex_unlock(&device_free_lock);
        return;
    }
    if (cudaGetDevice(&device) != cudaSuccess || (d = malloc(sizeof(*d))) == NULL) {
        (void)cudaGetLastError();
        pthread_mutex_unlock(&device_free_lock);
        device_free_now(ptr); /* (no memory to remember it: as before, at once) */
        return;
    }
    d->ptr = ptr;
    d->device = device;
    d->next = device_deferred;
    __atomic_store_n(&device_deferred, d, __ATOMIC_SEQ_CST);
    /* the last kernel may have ended since, before it could see this one (its end
     * looks at the list after its count, this looks at the count after the list) */
    device_drain_locked();
    if (device_deferred != NULL)
        GPURING_DEBUG(GPURING_SUBSYS_KERNEL, "device memory %p of GPU %d freed once no "
                      "kernel waits for a peer", ptr, device);
    pthread_mutex_unlock(&device_free_lock);
}

void gpuring_device_waiting_begin(void)
{
    __atomic_fetch_add(&device_waiting, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&device_freeing, __ATOMIC_SEQ_CST)) {
        /* a cudaFree that saw no such kernel: this one launches after it */
        pthread_mutex_lock(&device_free_lock);
        pthread_mutex_unlock(&device_free_lock);
    }
}

void gpuring_device_waiting_end(void)
{
    if (__atomic_sub_fetch(&device_waiting, 1, __ATOMIC_SEQ_CST) != 0 ||
        __atomic_load_n(&device_deferred, __ATOMIC_SEQ_CST) == NULL)
        return;
    pthread_mutex_lock(&device_free_lock);
    device_drain_locked();
    pthread_mutex_unlock(&device_free_lock);
}

gpuring_device_writes_t gpuring_device_remote_writes(int device)
{
    int ordering = 0, flush = 0;

    if (cudaDeviceGetAttribute(&ordering, cudaDevAttrGPUDirectRDMAWritesOrdering, device) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&flush, cudaDevAttrGPUDirectRDMAFlushWritesOptions, device) !=
            cudaSuccess) {
        (void)cudaGetLastError();
        return GPURING_DEVICE_WRITES_UNORDERED;
    }
    if (ordering >= cudaGPUDirectRDMAWritesOrderingOwner) return GPURING_DEVICE_WRITES_ORDERED;
    return (flush & cudaFlushGPUDirectRDMAWritesOptionHost) ? GPURING_DEVICE_WRITES_FLUSH
                                                            : GPURING_DEVICE_WRITES_UNORDERED;
}

gpuring_status_t gpuring_device_flush_remote_writes(void)
{
    GPURING_CUDA_CHECK(cudaDeviceFlushGPUDirectRDMAWrites(
        cudaFlushGPUDirectRDMAWritesTargetCurrentDevice, cudaFlushGPUDirectRDMAWritesToOwner));
    return GPURING_OK;
}

static_assert(sizeof(cudaIpcMemHandle_t) == GPURING_DEVICE_SHARE_BYTES, "IPC handle size");

gpuring_status_t gpuring_device_alloc_shared(size_t bytes, size_t zero_bytes, double timeout,
                                             void **ptr_p,
                                             unsigned char handle[GPURING_DEVICE_SHARE_BYTES])
{
    cudaIpcMemHandle_t ipc;
    cudaStream_t zeroing = NULL;
    void *ptr = NULL;
    gpuring_status_t st;

    GPURING_CUDA_CHECK(cudaMalloc(&ptr, bytes));
    /* (not a stream of the call's: one ordered after the application's default stream
     * would wait here for whatever the application queued, without a bound) */
    GPURING_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&zeroing, cudaStreamNonBlocking), st,
                            out_free);
    GPURING_CUDA_CHECK_GOTO(cudaMemsetAsync(ptr, 0, zero_bytes, zeroing), st, out_free);
    st = gpuring_device_stream_idle(zeroing, timeout);
    if (st == GPURING_ERR_TIMEOUT) { /* (the memory stays: freeing it would wait on) */
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "zeroing %zu B of new device memory for the "
                      "ranks of this node did not end within coll_gpuring_wait_timeout "
                      "(%.0f s): the GPU did not run it (shared with kernels that do not "
                      "end?); the memory is left allocated", zero_bytes, timeout);
        (void)cudaStreamDestroy(zeroing);
        return st;
    }
    if (st != GPURING_OK) goto out_free;
    GPURING_CUDA_CHECK_GOTO(cudaIpcGetMemHandle(&ipc, ptr), st, out_free);
    (void)cudaStreamDestroy(zeroing);
    memcpy(handle, &ipc, sizeof(ipc));
    *ptr_p = ptr;
    return GPURING_OK;

out_free:
    if (zeroing != NULL) {
        (void)cudaStreamSynchronize(zeroing); /* (its memset, before the memory goes) */
        (void)cudaStreamDestroy(zeroing);
    }
    gpuring_device_free(ptr);
    return st;
}

gpuring_status_t gpuring_device_open_shared(const unsigned char handle[GPURING_DEVICE_SHARE_BYTES],
                                            void **ptr_p)
{
    cudaIpcMemHandle_t ipc;

    memcpy(&ipc, handle, sizeof(ipc));
    GPURING_CUDA_CHECK(cudaIpcOpenMemHandle(ptr_p, ipc, cudaIpcMemLazyEnablePeerAccess));
    return GPURING_OK;
}

void gpuring_device_close_shared(void *ptr)
{
    if (ptr != NULL && cudaIpcCloseMemHandle(ptr) != cudaSuccess) {
        (void)cudaGetLastError(); /* at teardown the context may already be gone */
    }
}

int gpuring_device_mps(int device)
{
    int on = 0;

    if (cudaDeviceGetAttribute(&on, cudaDevAttrMpsEnabled, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return on != 0;
}

int64_t gpuring_device_pci_id(int device)
{
    int domain = 0, bus = 0, slot = 0;

    if (cudaDeviceGetAttribute(&domain, cudaDevAttrPciDomainId, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&slot, cudaDevAttrPciDeviceId, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return (int64_t)domain << 16 | (int64_t)(bus & 0xff) << 8 | (int64_t)(slot & 0x1f) << 3;
}

/* Looked up at each call (a communicator's setup: rare), not with device_ctx_lookup,
 * whose answer stays for good: the application may load the driver later. */
int gpuring_device_current(void)
{
    int (*ctx_get)(void **ctx), (*ctx_device)(int *device);
    void *ctx = NULL;
    int device = -1;

    *(void **)&ctx_get = gpuring_cuda_driver_sym("cuCtxGetCurrent");
    *(void **)&ctx_device = gpuring_cuda_driver_sym("cuCtxGetDevice");
    if (ctx_get == NULL || ctx_device == NULL || ctx_get(&ctx) != 0 || ctx == NULL ||
        ctx_device(&device) != 0)
        return -1;
    return device;
}
