/*
 * devcopy.c -- device <-> host copies through the application's CUDA driver
 * (see devcopy.h).  Every function is looked up once, from the libcuda the
 * application loaded (memkind.c's gpuring_cuda_driver_sym), the first time
 * a copy is needed: by then device memory exists, so the driver is there.
 */
#include "kernels/devcopy.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "kernels/cuda_memcpy2d.h"
#include "kernels/memkind.h"

/* driver API values (cuda.h), which the build may not have */
#define DEVCOPY_CU_POINTER_ATTRIBUTE_CONTEXT 1
#define DEVCOPY_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define DEVCOPY_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define DEVCOPY_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED 115
#define DEVCOPY_CU_MEMHOSTREGISTER_PORTABLE 0x01
#define DEVCOPY_CU_STREAM_LEGACY ((void *)0x1)
#define DEVCOPY_CU_STREAM_NON_BLOCKING 0x1
#define DEVCOPY_CUDA_ERROR_OUT_OF_MEMORY 2
#define DEVCOPY_CUDA_ERROR_INVALID_CONTEXT 201
#define DEVCOPY_CUDA_ERROR_INVALID_HANDLE 400
#define DEVCOPY_CUDA_ERROR_CONTEXT_IS_DESTROYED 709
#define DEVCOPY_CUDA_ERROR_NOT_READY 600
#define DEVCOPY_CU_EVENT_DISABLE_TIMING 0x2
#define DEVCOPY_MAX_DEVICES 64

typedef struct devcopy_driver {
    int (*memcpy_)(uintptr_t dst, uintptr_t src, size_t bytes);
    int (*stream_sync)(void *stream);
    int (*pointer_attr)(void *data, int attribute, uintptr_t ptr);
    int (*host_register)(void *ptr, size_t bytes, unsigned int flags);
    int (*host_unregister)(void *ptr);
    int (*device_get)(int *dev, int ordinal); /* may be missing: then no pools */
    /* may be missing: results then go back on the legacy stream */
    int (*stream_create)(void **stream, unsigned int flags);
    int (*memcpy_async)(uintptr_t dst, uintptr_t src, size_t bytes, void *stream);
    /* may be missing: rows then one by one */
    int (*memcpy_2d_async)(const gpuring_cuda_memcpy2d_t *copy, void *stream);
    int (*error_name)(int rc, const char **name); /* may be missing: the number alone */
    /* CUDA 12: may be missing -- results then go back on the legacy stream */
    int (*ctx_get_id)(void *ctx, unsigned long long *id);
    /* may be missing (all four or none used): a copy then waits for the legacy
     * stream without saying so (devcopy_legacy_drain) */
    int (*event_create)(void **event, unsigned int flags);
    int (*event_record)(void *event, void *stream);
    int (*event_query)(void *event);
    int (*event_destroy)(void *event);
    int events; /* all four event calls found */
} devcopy_driver_t;

static devcopy_driver_t devcopy_drv;
static int devcopy_found; /* 1 once every function above was found */

static int devcopy_lookup(void)
{
    devcopy_driver_t d;

    if (__atomic_load_n(&devcopy_found, __ATOMIC_ACQUIRE)) return 1;
    *(void **)&d.memcpy_ = gpuring_cuda_driver_sym("cuMemcpy");
    *(void **)&d.stream_sync = gpuring_cuda_driver_sym("cuStreamSynchronize");
    *(void **)&d.pointer_attr = gpuring_cuda_driver_sym("cuPointerGetAttribute");
    *(void **)&d.host_register = gpuring_cuda_driver_sym("cuMemHostRegister_v2");
    *(void **)&d.host_unregister = gpuring_cuda_driver_sym("cuMemHostUnregister");
    *(void **)&d.device_get = gpuring_cuda_driver_sym("cuDeviceGet");
    *(void **)&d.stream_create = gpuring_cuda_driver_sym("cuStreamCreate");
    *(void **)&d.memcpy_async = gpuring_cuda_driver_sym("cuMemcpyAsync");
    *(void **)&d.memcpy_2d_async = gpuring_cuda_driver_sym("cuMemcpy2DAsync_v2");
    *(void **)&d.error_name = gpuring_cuda_driver_sym("cuGetErrorName");
    *(void **)&d.ctx_get_id = gpuring_cuda_driver_sym("cuCtxGetId");
    *(void **)&d.event_create = gpuring_cuda_driver_sym("cuEventCreate");
    *(void **)&d.event_record = gpuring_cuda_driver_sym("cuEventRecord");
    *(void **)&d.event_query = gpuring_cuda_driver_sym("cuEventQuery");
    *(void **)&d.event_destroy = gpuring_cuda_driver_sym("cuEventDestroy_v2");
    d.events = d.event_create != NULL && d.event_record != NULL && d.event_query != NULL &&
               d.event_destroy != NULL;
    /* (the context calls are memkind.c's: gpuring_cuda_ctx_enter) */
    if (d.memcpy_ == NULL || d.stream_sync == NULL || d.pointer_attr == NULL ||
        d.host_register == NULL || d.host_unregister == NULL ||
        gpuring_cuda_driver_sym("cuCtxGetCurrent") == NULL ||
        gpuring_cuda_driver_sym("cuCtxSetCurrent") == NULL) {
        return 0;
    }
    devcopy_drv = d; /* the same values from any racing thread */
    __atomic_store_n(&devcopy_found, 1, __ATOMIC_RELEASE);
    return 1;
}

/* ---- the legacy stream ----------------------------------------------------------- */

static int devcopy_wait_timeout = 300; /* coll_gpuring_wait_timeout (gpuring_devcopy_set_wait) */

void gpuring_devcopy_set_wait(int timeout)
{
    __atomic_store_n(&devcopy_wait_timeout, timeout, __ATOMIC_RELAXED);
}

/*
 * The work queued so far on the current context's legacy stream (every blocking
 * stream's before it: the application's kernels and copies), which a copy on that
 * stream follows, waited for on an event, warned about every wait timeout it is not
 * done.  Waited on, not given up: the copy that follows must not start before the
 * application's work it reads is done (a CUDA-aware MPI waits alike), and a kernel may
 * run that long -- but a rank whose staging waits for one that does not end says so.
 * Without the driver's events, or with no timeout: left to the copy.
 */
static void devcopy_legacy_drain(void)
{
    const int timeout = __atomic_load_n(&devcopy_wait_timeout, __ATOMIC_RELAXED);
    void *event = NULL;
    double start, warn_at;

    if (timeout <= 0 || !devcopy_drv.events ||
        devcopy_drv.event_create(&event, DEVCOPY_CU_EVENT_DISABLE_TIMING) != 0)
        return;
    if (devcopy_drv.event_record(event, DEVCOPY_CU_STREAM_LEGACY) == 0) {
        start = gpuring_time_sec();
        warn_at = start + timeout;
        /* (asleep between looks: a long kernel's wait keeps no core busy, as cuMemcpy's
         * under a blocking-sync context would not) */
        while (devcopy_drv.event_query(event) == DEVCOPY_CUDA_ERROR_NOT_READY) {
            usleep(50);
            if (gpuring_time_sec() < warn_at) continue;
            GPURING_WARN(GPURING_SUBSYS_COLL, "a copy of this rank's device memory (staging "
                         "for the component below, or packing) waits for the work queued "
                         "before it on the CUDA default stream -- the application's kernels "
                         "and copies -- not done after %.0f s: waiting on, as a CUDA-aware "
                         "MPI would (warned every coll_gpuring_wait_timeout, %d s)",
                         gpuring_time_sec() - start, timeout);
            warn_at = gpuring_time_sec() + timeout;
        }
    }
    (void)devcopy_drv.event_destroy(event);
}

/* ---- contexts ---------------------------------------------------------------- */

/*
 * The context device memory at ptr is used in: the one it was allocated in, or
 * -- memory of no context, as the driver says of stream-ordered pools'
 * (cudaMallocAsync) and of cuMemCreate's mappings -- its device's primary one.
 * NULL where ptr is not device memory (or none can be had).
 */
static void *devcopy_owner(const void *ptr)
{
    unsigned int type = 0;
    void *owner = NULL;
    int ordinal = -1;

    if (ptr == NULL ||
        devcopy_drv.pointer_attr(&type, DEVCOPY_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 (uintptr_t)ptr) != 0 ||
        type != GPURING_CU_MEMORYTYPE_DEVICE) {
        return NULL;
    }
    if (devcopy_drv.pointer_attr(&owner, DEVCOPY_CU_POINTER_ATTRIBUTE_CONTEXT,
                                 (uintptr_t)ptr) == 0 &&
        owner != NULL) {
        return owner;
    }
    if (devcopy_drv.pointer_attr(&ordinal, DEVCOPY_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 (uintptr_t)ptr) != 0) {
        return NULL;
    }
    return gpuring_cuda_primary_ctx(ordinal, 1);
}

/* The copy-back stream of context ctx (current): non-blocking -- it waits for none of
 * the application's streams -- made at first need and kept while the context lives;
 * NULL where it cannot be had.  A context is known by its handle and its id
 * (cuCtxGetId): a context destroyed takes its streams along, and the next one made may
 * get its handle (as may a primary context reset) -- a stream kept under the handle
 * alone would be used after it died.  A driver without cuCtxGetId (before CUDA 12)
 * keeps none: results go back on the legacy stream. */
static struct {
    void *ctx, *stream;
    unsigned long long id;
} devcopy_streams[DEVCOPY_MAX_DEVICES];
static pthread_mutex_t devcopy_ctx_lock = PTHREAD_MUTEX_INITIALIZER;

static void *devcopy_back_stream(void *ctx)
{
    unsigned long long id = 0;
    void *stream = NULL;
    int i;

    if (ctx == NULL || devcopy_drv.stream_create == NULL || devcopy_drv.memcpy_async == NULL ||
        devcopy_drv.ctx_get_id == NULL || devcopy_drv.ctx_get_id(ctx, &id) != 0)
        return NULL;
    pthread_mutex_lock(&devcopy_ctx_lock);
    for (i = 0; i < DEVCOPY_MAX_DEVICES && devcopy_streams[i].ctx != NULL; i++) {
        if (devcopy_streams[i].ctx == ctx) break;
    }
    if (i < DEVCOPY_MAX_DEVICES && devcopy_streams[i].ctx == ctx &&
        devcopy_streams[i].id == id && devcopy_streams[i].stream != NULL) {
        stream = devcopy_streams[i].stream;
    } else if (i < DEVCOPY_MAX_DEVICES &&
               devcopy_drv.stream_create(&stream, DEVCOPY_CU_STREAM_NON_BLOCKING) == 0) {
        /* (one of a context gone with it is not destroyed again) */
        devcopy_streams[i].ctx = ctx;
        devcopy_streams[i].id = id;
        devcopy_streams[i].stream = stream;
    } else {
        stream = NULL;
    }
    pthread_mutex_unlock(&devcopy_ctx_lock);
    return stream;
}

/* Forget ctx's copy-back stream where error rc says it is gone with its context (reset:
 * cudaDeviceReset), which destroyed it; after another error it stays (forgotten, it
 * would be made again at the next call, and this one never destroyed). */
static void devcopy_forget_stream(void *ctx, int rc)
{
    if (rc != DEVCOPY_CUDA_ERROR_INVALID_HANDLE && rc != DEVCOPY_CUDA_ERROR_INVALID_CONTEXT &&
        rc != DEVCOPY_CUDA_ERROR_CONTEXT_IS_DESTROYED)
        return;
    pthread_mutex_lock(&devcopy_ctx_lock);
    for (int i = 0; i < DEVCOPY_MAX_DEVICES; i++) {
        if (devcopy_streams[i].ctx == ctx) devcopy_streams[i].stream = NULL;
    }
    pthread_mutex_unlock(&devcopy_ctx_lock);
}

/* ---- copies ------------------------------------------------------------------ */

/* gpuring_devcopy_blocks's rows and copies, in ([0]) and back ([1]) (atomic) */
static unsigned long long devcopy_block_rows[2], devcopy_block_copies[2];

/* Why a driver call failed, for the caller's log (before this thread's next copy):
 * `what`, the driver's name for rc and rc. */
static const char *devcopy_why(const char *what, int rc)
{
    static __thread char why[160];
    const char *name = NULL;

    if (devcopy_drv.error_name == NULL || devcopy_drv.error_name(rc, &name) != 0 ||
        name == NULL)
        name = "error";
    snprintf(why, sizeof(why), "%s failed: %s%s %d", what,
             rc == DEVCOPY_CUDA_ERROR_INVALID_CONTEXT ? "no CUDA context, " : "", name, rc);
    return why;
}

/* Block b's rows one copy each: queued on `stream`, or (NULL) on the legacy stream with
 * cuMemcpy; counted into *copies.  A driver error. */
static int devcopy_rows(const gpuring_devcopy_block_t *b, void *stream,
                        unsigned long long *copies)
{
    int rc = 0;

    for (size_t r = 0; r < b->rows && rc == 0; r++, (*copies)++) {
        const uintptr_t dst = (uintptr_t)b->dst + r * b->pitch;
        const uintptr_t src = (uintptr_t)b->src + r * b->pitch;

        rc = stream != NULL ? devcopy_drv.memcpy_async(dst, src, b->bytes, stream)
                            : devcopy_drv.memcpy_(dst, src, b->bytes);
    }
    return rc;
}

/* Does block b go as one 2D copy (rows of it, where the driver has them)?  Queued on
 * its stream: the legacy one too must be synchronized for it. */
static int devcopy_2d(const gpuring_devcopy_block_t *b)
{
    return b->rows > 1 && devcopy_drv.memcpy_2d_async != NULL;
}

/* Block b queued on `stream` (NULL: the legacy stream), `back` from host memory into
 * device memory, else the other way: one 2D copy (devcopy_2d), else one copy per row
 * (on the legacy stream with cuMemcpy); the driver's copies counted into *copies.  A
 * driver error. */
static int devcopy_queue(const gpuring_devcopy_block_t *b, void *stream, int back,
                         unsigned long long *copies)
{
    if (devcopy_2d(b)) {
        gpuring_cuda_memcpy2d_t copy = {.src_pitch = b->pitch,
                                        .dst_pitch = b->pitch,
                                        .width = b->bytes,
                                        .height = b->rows};

        copy.src_type = back ? GPURING_CU_MEMORYTYPE_HOST : GPURING_CU_MEMORYTYPE_DEVICE;
        copy.dst_type = back ? GPURING_CU_MEMORYTYPE_DEVICE : GPURING_CU_MEMORYTYPE_HOST;
        if (back) copy.src_host = b->src, copy.dst_device = (uintptr_t)b->dst;
        else copy.src_device = (uintptr_t)b->src, copy.dst_host = b->dst;
        (*copies)++;
        return devcopy_drv.memcpy_2d_async(&copy, stream);
    }
    return devcopy_rows(b, stream, copies);
}

/* Copies of blocks blk[0 .. n) in the owner's context (that of blk[0]'s device memory):
 * on the legacy stream, or (`back`, into device memory) on the context's copy-back
 * stream, all queued before one synchronization; the driver's copies counted into
 * *copies. */
static gpuring_status_t devcopy_run(const gpuring_devcopy_block_t *blk, int n, int host_pinned,
                                    int back, const char **why_p, unsigned long long *copies)
{
    gpuring_cuda_scope_t scope;
    void *owner, *stream = NULL;
    int rc, from_device;

    if (n == 0 || (n == 1 && blk[0].bytes == 0)) return GPURING_OK;
    if (!devcopy_lookup()) {
        *why_p = "the process's CUDA driver lacks cuMemcpy, cuStreamSynchronize or the context "
                 "functions";
        return GPURING_ERR_NOT_SUPPORTED;
    }
    /* in the context of the device memory's GPU: its legacy stream is the one the copy
     * follows, and a thread that never used CUDA has none of its own */
    owner = devcopy_owner(blk[0].src);
    from_device = owner != NULL;
    if (owner == NULL) owner = devcopy_owner(blk[0].dst);
    gpuring_cuda_ctx_enter(owner, &scope);
    if (back) stream = devcopy_back_stream(owner);
    rc = -1;
    if (stream != NULL) {
        /* from pageable memory the driver returns once it holds the bytes: the stream's
         * synchronization waits for them to land */
        rc = 0;
        for (int i = 0; i < n && rc == 0; i++)
            rc = devcopy_queue(&blk[i], stream, back, copies);
        /* (a queue that failed part way: what it queued must not land after the
         * retry below, once the call returned -- over the application's next writes) */
        if (rc == 0) rc = devcopy_drv.stream_sync(stream);
        else (void)devcopy_drv.stream_sync(stream);
        if (rc != 0) devcopy_forget_stream(owner, rc); /* (then the legacy stream) */
    }
    if (rc != 0) { /* (every block again: the same bytes, where some landed) */
        int queued = 0, landed;

        if (from_device && !back) devcopy_legacy_drain();
        rc = 0;
        for (int i = 0; i < n && rc == 0; i++) {
            queued |= devcopy_2d(&blk[i]);
            rc = devcopy_queue(&blk[i], NULL, back, copies);
        }
        /* cuMemcpy returns with the data in place only from device memory into host
         * memory, or from page-locked host memory: from pageable memory into device
         * memory it may return before the data reached the device, and between device
         * memories it does not wait at all; a 2D copy is queued.  Otherwise the legacy
         * stream holds the rest -- after a copy that failed part way too: nothing queued
         * before it may land after the return */
        landed = !queued && (from_device ? devcopy_owner(blk[0].dst) == NULL : host_pinned);
        if (!landed) {
            const int synced = devcopy_drv.stream_sync(NULL);

            if (rc == 0) rc = synced;
        }
    }
    gpuring_cuda_ctx_leave(&scope);
    if (rc != 0) {
        *why_p = devcopy_why(!from_device ? "a copy from host into device memory"
                             : devcopy_owner(blk[0].dst) != NULL
                                 ? "a copy between device memories"
                                 : "a copy from device into host memory", rc);
        return GPURING_ERR_CUDA;
    }
    return GPURING_OK;
}

gpuring_status_t gpuring_devcopy(void *dst, const void *src, size_t bytes, int host_pinned,
                                 const char **why_p)
{
    const gpuring_devcopy_block_t blk = {.dst = dst, .src = src, .bytes = bytes, .rows = 1};
    unsigned long long copies = 0;

    return devcopy_run(&blk, 1, host_pinned, 0, why_p, &copies);
}

gpuring_status_t gpuring_devcopy_back(void *dst, const void *src, size_t bytes, int host_pinned,
                                      const char **why_p)
{
    const gpuring_devcopy_block_t blk = {.dst = dst, .src = src, .bytes = bytes, .rows = 1};
    unsigned long long copies = 0;

    return devcopy_run(&blk, 1, host_pinned, 1, why_p, &copies);
}

gpuring_status_t gpuring_devcopy_blocks(const gpuring_devcopy_block_t *blocks, int n, int back,
                                        int host_pinned, const char **why_p)
{
    unsigned long long rows = 0, copies = 0;
    gpuring_status_t st = devcopy_run(blocks, n, host_pinned, back != 0, why_p, &copies);

    for (int i = 0; i < n; i++) rows += blocks[i].rows;
    __atomic_fetch_add(&devcopy_block_rows[back != 0], rows, __ATOMIC_RELAXED);
    __atomic_fetch_add(&devcopy_block_copies[back != 0], copies, __ATOMIC_RELAXED);
    return st;
}

void gpuring_devcopy_block_counts(int back, unsigned long long *rows_p,
                                  unsigned long long *copies_p)
{
    *rows_p = __atomic_load_n(&devcopy_block_rows[back != 0], __ATOMIC_RELAXED);
    *copies_p = __atomic_load_n(&devcopy_block_copies[back != 0], __ATOMIC_RELAXED);
}

gpuring_status_t gpuring_devcopy_order(const void *ptr, const char **why_p)
{
    gpuring_cuda_scope_t scope;
    int rc;

    if (!devcopy_lookup()) {
        *why_p = "the process's CUDA driver lacks cuStreamSynchronize or the context functions";
        return GPURING_ERR_NOT_SUPPORTED;
    }
    gpuring_cuda_ctx_enter(devcopy_owner(ptr), &scope);
    devcopy_legacy_drain();
    rc = devcopy_drv.stream_sync(NULL);
    gpuring_cuda_ctx_leave(&scope);
    if (rc != 0) {
        *why_p = "cuStreamSynchronize of the legacy stream failed";
        return GPURING_ERR_CUDA;
    }
    return GPURING_OK;
}

/* ---- device memory ----------------------------------------------------------- */

/* cuMemAlloc and cuMemFree, looked up apart: staging needs neither; the
 * stream-ordered pair and the device attribute may be missing (an old driver) */
typedef struct devcopy_mem_fns {
    int (*alloc)(uintptr_t *dptr, size_t bytes);
    int (*free_)(uintptr_t dptr);
    int (*alloc_async)(uintptr_t *dptr, size_t bytes, void *stream);
    int (*free_async)(uintptr_t dptr, void *stream);
    int (*device_attr)(int *value, int attribute, int dev);
} devcopy_mem_fns_t;

static devcopy_mem_fns_t devcopy_mem;
static int devcopy_mem_found; /* 1 once alloc and free were found */

static int devcopy_mem_lookup(void)
{
    devcopy_mem_fns_t m;

    if (__atomic_load_n(&devcopy_mem_found, __ATOMIC_ACQUIRE)) return 1;
    if (!devcopy_lookup()) return 0;
    *(void **)&m.alloc = gpuring_cuda_driver_sym("cuMemAlloc_v2");
    *(void **)&m.free_ = gpuring_cuda_driver_sym("cuMemFree_v2");
    *(void **)&m.alloc_async = gpuring_cuda_driver_sym("cuMemAllocAsync");
    *(void **)&m.free_async = gpuring_cuda_driver_sym("cuMemFreeAsync");
    *(void **)&m.device_attr = gpuring_cuda_driver_sym("cuDeviceGetAttribute");
    if (m.alloc == NULL || m.free_ == NULL) return 0;
    devcopy_mem = m; /* the same values from any racing thread */
    __atomic_store_n(&devcopy_mem_found, 1, __ATOMIC_RELEASE);
    return 1;
}

/* Device `ordinal` allocates from its stream-ordered pool: an allocation or a free
 * there waits for nothing -- cuMemFree waits for the whole device, gpuring's own
 * kernels of other calls included, which may be waiting for this rank's peers. */
static int devcopy_pools(int ordinal)
{
    int dev = -1, pools = 0;

    return devcopy_mem.alloc_async != NULL && devcopy_mem.free_async != NULL &&
           devcopy_mem.device_attr != NULL && devcopy_drv.device_get != NULL &&
           devcopy_drv.device_get(&dev, ordinal) == 0 &&
           devcopy_mem.device_attr(&pools, DEVCOPY_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                   dev) == 0 &&
           pools != 0;
}

gpuring_status_t gpuring_devcopy_alloc(const void *near, size_t bytes, void **ptr_p,
                                       int *pooled_p, const char **why_p)
{
    const size_t want = bytes > 0 ? bytes : 1;
    gpuring_cuda_scope_t scope;
    uintptr_t ptr = 0;
    int ordinal = -1, rc;

    *ptr_p = NULL;
    *pooled_p = 0;
    if (!devcopy_mem_lookup()) {
        *why_p = "the process's CUDA driver lacks cuMemAlloc or cuMemFree";
        return GPURING_ERR_NOT_SUPPORTED;
    }
    if (devcopy_drv.pointer_attr(&ordinal, DEVCOPY_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 (uintptr_t)near) != 0) {
        ordinal = -1;
    }
    gpuring_cuda_ctx_enter(devcopy_owner(near), &scope);
    /* on the legacy stream, as the copies into it and out of it are */
    *pooled_p = ordinal >= 0 && devcopy_pools(ordinal);
    rc = *pooled_p ? devcopy_mem.alloc_async(&ptr, want, DEVCOPY_CU_STREAM_LEGACY)
                   : devcopy_mem.alloc(&ptr, want);
    gpuring_cuda_ctx_leave(&scope);
    if (rc != 0) {
        *why_p = devcopy_why(*pooled_p ? "cuMemAllocAsync" : "cuMemAlloc", rc);
        return rc == DEVCOPY_CUDA_ERROR_OUT_OF_MEMORY ? GPURING_ERR_NO_MEMORY : GPURING_ERR_CUDA;
    }
    *ptr_p = (void *)ptr;
    return GPURING_OK;
}

void gpuring_devcopy_free(void *ptr, int pooled)
{
    gpuring_cuda_scope_t scope;

    if (ptr == NULL || !devcopy_mem_lookup()) return;
    gpuring_cuda_ctx_enter(devcopy_owner(ptr), &scope);
    (void)(pooled ? devcopy_mem.free_async((uintptr_t)ptr, DEVCOPY_CU_STREAM_LEGACY)
                  : devcopy_mem.free_((uintptr_t)ptr));
    gpuring_cuda_ctx_leave(&scope);
}

/* ---- page-locked host memory ------------------------------------------------- */

void *gpuring_devcopy_pin(void *ptr, size_t bytes, const void *near)
{
    void *owner, *ctx;
    gpuring_cuda_scope_t scope;
    int rc;

    if (!devcopy_lookup()) return NULL;
    owner = devcopy_owner(near);
    gpuring_cuda_ctx_enter(owner, &scope);
    ctx = scope.switched ? owner : scope.saved; /* the one current now */
    rc = ctx != NULL
             ? devcopy_drv.host_register(ptr, bytes, DEVCOPY_CU_MEMHOSTREGISTER_PORTABLE)
             : -1;
    gpuring_cuda_ctx_leave(&scope);
    return rc == 0 ? ctx : NULL;
}

void gpuring_devcopy_unpin(void *ptr, void *pin)
{
    gpuring_cuda_scope_t scope;

    if (pin == NULL || !devcopy_lookup()) return;
    gpuring_cuda_ctx_enter(pin, &scope);
    (void)devcopy_drv.host_unregister(ptr);
    gpuring_cuda_ctx_leave(&scope);
}
