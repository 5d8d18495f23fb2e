/*
 * ipc_buf_cuda.c -- proxy/ipc_buf.h over the CUDA runtime.
 *
 * Two small process-wide tables under one lock, each entry stamped with
 * the time of its last use: the exports (buffer id -> IPC handle of this
 * process's allocation) and the mappings (peer process, buffer id -> the
 * opened base, with a count of the calls using it).  When a table is full
 * the least recently used entry goes -- for mappings, only one no call
 * uses; if every mapping is in use the open is refused and the caller
 * takes its other path.  Mappings no call uses beyond the cache's count
 * (gpuring_ipc_buf_set_cache) are closed as calls release them.
 */
#include <assert.h>
#include <pthread.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"
#include "kernels/memkind.h"
#include "proxy/ipc_buf.h"

#define IPC_BUF_EXPORTS 64
#define IPC_BUF_MAPPINGS GPURING_IPC_BUF_MAPPINGS

typedef struct ipc_export {
    int used;
    uint64_t buffer_id;
    uint64_t last_use;
    cudaIpcMemHandle_t handle;
} ipc_export_t;

typedef struct ipc_mapping {
    int used;
    int refs;   /* calls using it now */
    int device; /* current device when it was opened (closed on the same) */
    uint64_t peer_key, buffer_id, base, bytes;
    uint64_t last_use;
    char *mapped;
} ipc_mapping_t;

static pthread_mutex_t ipc_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t ipc_clock;
static int ipc_cache = IPC_BUF_MAPPINGS; /* idle mappings kept */
static ipc_export_t ipc_exports[IPC_BUF_EXPORTS];
static ipc_mapping_t ipc_maps[IPC_BUF_MAPPINGS];

static_assert(sizeof(cudaIpcMemHandle_t) == GPURING_IPC_HANDLE_BYTES, "IPC handle size");

gpuring_status_t gpuring_ipc_buf_export(const void *ptr, gpuring_ipc_buf_t *buf_p)
{
    gpuring_mem_range_t r;
    ipc_export_t *e = NULL, *lru = &ipc_exports[0];
    cudaError_t err = cudaSuccess;

    memset(buf_p, 0, sizeof(*buf_p));
    if (gpuring_mem_range(ptr, &r) != 0 || !r.ipc_capable) return GPURING_ERR_NOT_SUPPORTED;

    pthread_mutex_lock(&ipc_lock);
    for (int i = 0; i < IPC_BUF_EXPORTS; i++) {
        ipc_export_t *x = &ipc_exports[i];
        if (x->used && x->buffer_id == r.buffer_id) {
            e = x;
            break;
        }
        if (!x->used || (lru->used && x->last_use < lru->last_use)) lru = x;
    }
    if (e == NULL) {
        e = lru;
        err = cudaIpcGetMemHandle(&e->handle, (void *)r.base);
        e->used = err == cudaSuccess;
        e->buffer_id = r.buffer_id;
    }
    if (err == cudaSuccess) {
        e->last_use = ++ipc_clock;
        memcpy(buf_p->handle, &e->handle, sizeof(e->handle));
    }
    pthread_mutex_unlock(&ipc_lock);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        GPURING_DEBUG(GPURING_SUBSYS_PROXY, "cudaIpcGetMemHandle(%p, the allocation of %p): %s",
                      (void *)r.base, ptr, cudaGetErrorName(err));
        return GPURING_ERR_NOT_SUPPORTED;
    }
    buf_p->buffer_id = r.buffer_id;
    buf_p->base = r.base;
    buf_p->bytes = r.bytes;
    buf_p->offset = (uint64_t)((uintptr_t)ptr - r.base);
    buf_p->ok = 1;
    return GPURING_OK;
}

/* Close mapping m (lock held, no call uses it). */
static void ipc_mapping_close(ipc_mapping_t *m)
{
    int cur = -1;
    cudaError_t err;

    if (cudaGetDevice(&cur) == cudaSuccess && cur != m->device) (void)cudaSetDevice(m->device);
    err = cudaIpcCloseMemHandle(m->mapped);
    if (cur >= 0 && cur != m->device) (void)cudaSetDevice(cur);
    if (err != cudaSuccess) {
        /* at teardown the context may already be gone (cudaDeviceReset) */
        (void)cudaGetLastError();
        GPURING_DEBUG(GPURING_SUBSYS_PROXY, "cudaIpcCloseMemHandle: %s", cudaGetErrorName(err));
    }
    memset(m, 0, sizeof(*m));
}

/* The least recently used mapping no call uses (-1: none), and how many there are
 * (lock held). */
static int ipc_lru_idle(int *idle_p)
{
    int lru = -1, idle = 0;

    for (int i = 0; i < IPC_BUF_MAPPINGS; i++) {
        if (!ipc_maps[i].used || ipc_maps[i].refs > 0) continue;
        idle++;
        if (lru < 0 || ipc_maps[i].last_use < ipc_maps[lru].last_use) lru = i;
    }
    if (idle_p != NULL) *idle_p = idle;
    return lru;
}

/* m maps an allocation of the peer's that b's, at some of the same addresses, replaced */
static int ipc_stale(const ipc_mapping_t *m, uint64_t peer_key, const gpuring_ipc_buf_t *b)
{
    return m->used && m->peer_key == peer_key && m->buffer_id != b->buffer_id &&
           m->base < b->base + b->bytes && b->base < m->base + m->bytes;
}

gpuring_status_t gpuring_ipc_buf_open(uint64_t peer_key, int peer_rank,
                                      const gpuring_ipc_buf_t *buf, size_t need, void **ptr_p,
                                      int *token_p)
{
    cudaIpcMemHandle_t handle;
    ipc_mapping_t *m = NULL;
    cudaError_t err;
    void *mapped = NULL;
    int ix = -1, device = -1;

    if (!buf->ok || buf->offset > buf->bytes || need > buf->bytes - buf->offset) {
        GPURING_ERROR(GPURING_SUBSYS_PROXY, "rank %d's buffer does not fit its allocation "
                      "(offset %llu + %zu bytes of %llu)", peer_rank,
                      (unsigned long long)buf->offset, need, (unsigned long long)buf->bytes);
        return GPURING_ERR_INVALID;
    }
    GPURING_CUDA_CHECK(cudaGetDevice(&device)); /* (logged: a mapping needs a device) */
    /* a mapping belongs to the context it was opened in, the device current then
     * (a process driving two GPUs maps a peer's buffer once for each) */
    pthread_mutex_lock(&ipc_lock);
    for (int i = 0; i < IPC_BUF_MAPPINGS; i++) {
        ipc_mapping_t *x = &ipc_maps[i];
        if (x->used && x->peer_key == peer_key && x->device == device &&
            x->buffer_id == buf->buffer_id) {
            ix = i;
            break;
        }
    }
    if (ix < 0) {
        /* a new allocation over an old one's addresses: the old one is gone (its
         * mappings closed on every device) */
        for (int i = 0; i < IPC_BUF_MAPPINGS; i++) {
            if (ipc_stale(&ipc_maps[i], peer_key, buf) && ipc_maps[i].refs == 0)
                ipc_mapping_close(&ipc_maps[i]);
        }
        for (int i = 0; i < IPC_BUF_MAPPINGS && ix < 0; i++) {
            if (!ipc_maps[i].used) ix = i;
        }
        if (ix < 0) ix = ipc_lru_idle(NULL);
        if (ix < 0) {
            pthread_mutex_unlock(&ipc_lock);
            GPURING_DEBUG(GPURING_SUBSYS_PROXY, "all %d CUDA IPC mappings are in use",
                          IPC_BUF_MAPPINGS);
            return GPURING_ERR_NOT_SUPPORTED;
        }
        if (ipc_maps[ix].used) ipc_mapping_close(&ipc_maps[ix]);
        memcpy(&handle, buf->handle, sizeof(handle));
        err = cudaIpcOpenMemHandle(&mapped, handle, cudaIpcMemLazyEnablePeerAccess);
        if (err != cudaSuccess) {
            pthread_mutex_unlock(&ipc_lock);
            (void)cudaGetLastError();
            GPURING_WARN(GPURING_SUBSYS_PROXY, "cannot map rank %d's device buffer through CUDA "
                         "IPC: %s (%s)", peer_rank, cudaGetErrorName(err),
                         cudaGetErrorString(err));
            return GPURING_ERR_CUDA;
        }
        m = &ipc_maps[ix];
        *m = (ipc_mapping_t){.used = 1, .device = device, .peer_key = peer_key,
                             .buffer_id = buf->buffer_id, .base = buf->base,
                             .bytes = buf->bytes, .mapped = mapped};
    }
    m = &ipc_maps[ix];
    m->refs++;
    m->last_use = ++ipc_clock;
    *ptr_p = m->mapped + buf->offset;
    *token_p = ix;
    pthread_mutex_unlock(&ipc_lock);
    return GPURING_OK;
}

void gpuring_ipc_buf_set_cache(int mappings)
{
    pthread_mutex_lock(&ipc_lock);
    ipc_cache = mappings < 0 ? 0 : mappings > IPC_BUF_MAPPINGS ? IPC_BUF_MAPPINGS : mappings;
    pthread_mutex_unlock(&ipc_lock);
}

void gpuring_ipc_buf_release(int token)
{
    if (token < 0 || token >= IPC_BUF_MAPPINGS) return;
    pthread_mutex_lock(&ipc_lock);
    if (ipc_maps[token].refs > 0) ipc_maps[token].refs--;
    for (;;) { /* over the cache's count of idle mappings: the least recently used go */
        int idle, lru = ipc_lru_idle(&idle);

        if (idle <= ipc_cache) break;
        GPURING_DEBUG(GPURING_SUBSYS_PROXY, "a peer's buffer no call uses unmapped (%d mappings "
                      "kept idle at most: coll_gpuring_ipc_cache)", ipc_cache);
        ipc_mapping_close(&ipc_maps[lru]);
    }
    pthread_mutex_unlock(&ipc_lock);
}

void gpuring_ipc_buf_finalize(void)
{
    pthread_mutex_lock(&ipc_lock);
    for (int i = 0; i < IPC_BUF_MAPPINGS; i++) {
        if (ipc_maps[i].used) ipc_mapping_close(&ipc_maps[i]);
    }
    memset(ipc_exports, 0, sizeof(ipc_exports));
    pthread_mutex_unlock(&ipc_lock);
}
