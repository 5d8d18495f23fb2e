/*
 * fake_cuda_driver.c -- a stand-in libcuda.so.1 for machines without a GPU,
 * so that CI can drive gpuring's device-buffer branch.
 *
 * It plays a CUDA driver too old for the runtime gpuring was built with
 * (cuDriverGetVersion says 12.0, cuGetProcAddress finds nothing), the way a
 * CUDA 12 node meets a component built with CUDA 13: pointer queries work,
 * every CUDA runtime call fails with cudaErrorInsufficientDriver.  The test
 * program marks ordinary host memory as device or managed memory
 * (fake_cuda_mark); cuPointerGetAttribute answers for marked ranges and
 * refuses any other pointer, as the real driver does for host memory it
 * never saw (cuPointerGetAttributes, several at once, answers zeros for it).  cuCtxGetCurrent / cuCtxSetCurrent keep a per-thread current
 * context, so the test can check that gpuring gives its caller's back.
 *
 * It also has device memory the host cannot touch, as on a real GPU:
 * cuMemAlloc maps a shared-memory segment twice, once without any access
 * (the "device pointer" the program gets: a component that dereferences it
 * crashes, as a non-CUDA-aware MPI does on GPU memory) and once readable
 * and writable for the driver itself; cuMemcpy copies through that second
 * view.  cuMemAllocAsync's memory is of the device's pool: of no context, as
 * the driver says of it (a thread without a current context must borrow its
 * GPU's primary one), freed by cuMemFreeAsync only, and cuMemFree only frees
 * cuMemAlloc's.  cuMemcpy2DAsync checks what its memory types say of each side and
 * each row's range.  cuMemHostRegister'ed memory answers as host memory.  cuMemcpy
 * returns as a real driver's does: with the data in place from device memory into host
 * memory and from page-locked host memory, but into device memory from pageable host
 * memory (the source taken, the copy still to land) and between device memories (no
 * host-side wait at all) it leaves the copy on the legacy stream, to land at that
 * stream's next synchronization (cuStreamSynchronize of it, cuCtxSynchronize), at the
 * next copy that follows it there, or at a free; fake_cuda_peek reads device memory as
 * another stream's kernel would, without waiting for them.  A test may
 * make the next device copies fail (fake_cuda_fail_copies).  Enough of
 * device and context management (cuInit, cuDeviceGet, primary context) for
 * a test written against the driver API to run unchanged on a real GPU.
 *
 * Events (cuEventCreate, cuEventRecord, cuEventQuery, cuEventDestroy) complete when
 * their stream's work queued before them does: at once, but where the test has the
 * legacy stream hold work of the application's (fake_cuda_hold_legacy), which a copy
 * on that stream, or its synchronization, waits for too.
 *
 * Built as test/mpi/fake_cuda/libcuda.so.1 (soname libcuda.so.1): a program
 * that dlopens it by path is, to dlopen("libcuda.so.1", RTLD_NOLOAD), a
 * process that loaded the CUDA driver.
 */
#define _GNU_SOURCE /* memfd_create */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "test/cuda_attrs_batch.h"
#include "test/cuda_memcpy2d.h"

/* driver API values (cuda.h) */
enum {
    FAKE_CUDA_SUCCESS = 0,
    FAKE_CUDA_ERROR_INVALID_VALUE = 1,
    FAKE_CUDA_ERROR_OUT_OF_MEMORY = 2,
    FAKE_CUDA_ERROR_INVALID_CONTEXT = 201,
    FAKE_CUDA_ERROR_NOT_READY = 600,
    FAKE_CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    FAKE_ATTR_CONTEXT = 1,
    FAKE_CU_MEMORYTYPE_HOST = 1,
    FAKE_CU_MEMORYTYPE_DEVICE = 2,
    FAKE_CUDA_ERROR_NOT_FOUND = 500,
    FAKE_ATTR_MEMORY_TYPE = 2,
    FAKE_ATTR_BUFFER_ID = 7,
    FAKE_ATTR_IS_MANAGED = 8,
    FAKE_ATTR_DEVICE_ORDINAL = 9,
    FAKE_ATTR_IS_LEGACY_CUDA_IPC_CAPABLE = 10,
    FAKE_ATTR_RANGE_START_ADDR = 11,
    FAKE_ATTR_RANGE_SIZE = 12,
    FAKE_ATTR_MEMPOOL_HANDLE = 17,
    FAKE_DEV_ATTR_MEMORY_POOLS_SUPPORTED = 115,
    FAKE_DRIVER_VERSION = 12000,
};

#define FAKE_MAX_RANGES 256

typedef struct {
    uintptr_t base;
    size_t bytes;
    unsigned int memtype; /* CU_MEMORYTYPE_* */
    unsigned int managed;
    int ordinal;
    unsigned long long id;
    char *shadow; /* cuMemAlloc'ed memory: the driver's own view of it */
    int pool;     /* cuMemAllocAsync'ed: of the device's pool, no context's */
} fake_range_t;

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static fake_range_t fake_ranges[FAKE_MAX_RANGES];
static int fake_nranges; /* slots at and above it are free: the scans stop there */
static unsigned long long fake_next_id = 1;
static __thread void *fake_ctx;
static int fake_primary_ctx; /* its address is the primary context */
static int fake_stream;      /* its address is cuStreamCreate's stream */

/* ---- the test's side ------------------------------------------------------ */

/* Make [base, base + bytes) answer as memory of CU_MEMORYTYPE `memtype`
 * (2 device, 4 unified), managed or not, on GPU `ordinal` (-1: the driver
 * names none).  0, or -1 when the table is full. */
int fake_cuda_mark(const void *base, size_t bytes, unsigned int memtype, int managed, int ordinal)
{
    int rc = -1;

    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < FAKE_MAX_RANGES; i++) {
        if (fake_ranges[i].bytes == 0) {
            fake_ranges[i] = (fake_range_t){(uintptr_t)base, bytes, memtype,
                                            managed != 0, ordinal, fake_next_id++, NULL, 0};
            if (i >= fake_nranges) fake_nranges = i + 1;
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

/* After the next `skip` device copies (cuMemcpy, cuMemcpyAsync), `n` fail with
 * CUDA_ERROR_ILLEGAL_ADDRESS, as on a GPU that met a fault (n 0: none does). */
static int fake_skip_copies, fake_fail_copies;

void fake_cuda_fail_copies(int skip, int n)
{
    pthread_mutex_lock(&fake_lock);
    fake_skip_copies = skip;
    fake_fail_copies = n;
    pthread_mutex_unlock(&fake_lock);
}

/* The legacy stream holds work of the application's that ends `seconds` from now
 * (fake_cuda_hold_legacy): an event recorded there before then completes then, and a
 * copy on it, or its synchronization, returns only then. */
static double fake_legacy_until; /* CLOCK_MONOTONIC seconds (under fake_lock) */

static double fake_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void fake_cuda_hold_legacy(double seconds)
{
    pthread_mutex_lock(&fake_lock);
    fake_legacy_until = fake_now() + seconds;
    pthread_mutex_unlock(&fake_lock);
}

/* When the legacy stream's work queued so far ends (0: done) */
static double fake_legacy_end(void)
{
    double until;

    pthread_mutex_lock(&fake_lock);
    until = fake_legacy_until;
    pthread_mutex_unlock(&fake_lock);
    return until > fake_now() ? until : 0.0;
}

/* A host wait on the legacy stream: until its work queued so far ended */
static void fake_legacy_wait(void)
{
    const double until = fake_legacy_end();

    while (until > 0.0 && fake_now() < until) usleep(1000);
}

/* Does this copy fail (fake_cuda_fail_copies)? */
static int fake_copy_fails(void)
{
    int fails = 0;

    pthread_mutex_lock(&fake_lock);
    if (fake_fail_copies > 0 && fake_skip_copies > 0) fake_skip_copies--;
    else if (fake_fail_copies > 0) fails = fake_fail_copies--;
    pthread_mutex_unlock(&fake_lock);
    return fails;
}

/* The range holding ptr (a copy; bytes 0: none). */
static fake_range_t fake_find(uintptr_t ptr)
{
    fake_range_t r = {0};

    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < fake_nranges; i++) {
        if (fake_ranges[i].bytes != 0 && ptr >= fake_ranges[i].base &&
            ptr - fake_ranges[i].base < fake_ranges[i].bytes) {
            r = fake_ranges[i];
            break;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return r;
}

/* Forget the range starting at base; its shadow back in *shadow_p. 0 or -1. */
static int fake_forget(uintptr_t base, char **shadow_p)
{
    int rc = -1;

    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < fake_nranges; i++) {
        if (fake_ranges[i].bytes != 0 && fake_ranges[i].base == base) {
            if (shadow_p != NULL) *shadow_p = fake_ranges[i].shadow;
            fake_ranges[i].bytes = 0;
            while (fake_nranges > 0 && fake_ranges[fake_nranges - 1].bytes == 0) fake_nranges--;
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

/* Copies left on the legacy stream (the header), in order: where each lands (the
 * driver's view), what it takes (the source as it was), how much. */
typedef struct {
    char *dst;
    char *data;
    size_t bytes;
} fake_pending_t;
static fake_pending_t *fake_pending;
static int fake_npending, fake_pending_room;
static pthread_mutex_t fake_pending_lock = PTHREAD_MUTEX_INITIALIZER;

/* The legacy stream's copies land. */
static void fake_land(void)
{
    pthread_mutex_lock(&fake_pending_lock);
    for (int i = 0; i < fake_npending; i++) {
        memcpy(fake_pending[i].dst, fake_pending[i].data, fake_pending[i].bytes);
        free(fake_pending[i].data);
    }
    fake_npending = 0;
    pthread_mutex_unlock(&fake_pending_lock);
}

/* Leave a copy on the legacy stream: 0, or -1 without memory for it. */
static int fake_leave(char *dst, const char *src, size_t bytes)
{
    char *data = malloc(bytes ? bytes : 1);
    int rc = -1;

    if (data == NULL) return -1;
    memcpy(data, src, bytes);
    pthread_mutex_lock(&fake_pending_lock);
    if (fake_npending == fake_pending_room) {
        int room = fake_pending_room ? 2 * fake_pending_room : 16;
        fake_pending_t *p = realloc(fake_pending, sizeof(*p) * (size_t)room);

        if (p != NULL) fake_pending = p, fake_pending_room = room;
    }
    if (fake_npending < fake_pending_room) {
        fake_pending[fake_npending++] = (fake_pending_t){dst, data, bytes};
        rc = 0;
    }
    pthread_mutex_unlock(&fake_pending_lock);
    if (rc != 0) free(data);
    return rc;
}

/* ---- the driver API --------------------------------------------------------- */

int cuDriverGetVersion(int *version)
{
    if (version == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    *version = FAKE_DRIVER_VERSION;
    return FAKE_CUDA_SUCCESS;
}

int cuInit(unsigned int flags)
{
    (void)flags;
    return FAKE_CUDA_SUCCESS;
}

/* No entry point is found: the CUDA runtime reports an insufficient driver. */
int cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags)
{
    (void)symbol, (void)version, (void)flags;
    if (pfn != NULL) *pfn = NULL;
    return FAKE_CUDA_ERROR_NOT_FOUND;
}

int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                        int *status)
{
    if (status != NULL) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return cuGetProcAddress(symbol, pfn, version, flags);
}

/* the names of the codes this driver returns (the real one names them all) */
int cuGetErrorName(int error, const char **name)
{
    switch (error) {
    case FAKE_CUDA_SUCCESS: *name = "CUDA_SUCCESS"; break;
    case FAKE_CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case FAKE_CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case FAKE_CUDA_ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case FAKE_CUDA_ERROR_ILLEGAL_ADDRESS: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case FAKE_CUDA_ERROR_NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; break;
    default: *name = NULL; return FAKE_CUDA_ERROR_INVALID_VALUE;
    }
    return FAKE_CUDA_SUCCESS;
}

int cuPointerGetAttribute(void *data, int attribute, uintptr_t ptr)
{
    fake_range_t r = fake_find(ptr);

    if (r.bytes == 0 || data == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
    case FAKE_ATTR_CONTEXT: { /* pool memory: none, as the driver says (its ordinal tells) */
        void *ctx = r.memtype == FAKE_CU_MEMORYTYPE_HOST || r.pool ? NULL
                                                                    : (void *)&fake_primary_ctx;
        memcpy(data, &ctx, sizeof(ctx));
        break;
    }
    case FAKE_ATTR_MEMPOOL_HANDLE: {
        void *pool = r.pool ? (void *)&fake_primary_ctx : NULL;
        memcpy(data, &pool, sizeof(pool));
        break;
    }
    case FAKE_ATTR_MEMORY_TYPE: memcpy(data, &r.memtype, sizeof(r.memtype)); break;
    case FAKE_ATTR_IS_MANAGED: memcpy(data, &r.managed, sizeof(r.managed)); break;
    case FAKE_ATTR_DEVICE_ORDINAL:
        if (r.ordinal < 0) return FAKE_CUDA_ERROR_INVALID_VALUE;
        memcpy(data, &r.ordinal, sizeof(r.ordinal));
        break;
    case FAKE_ATTR_BUFFER_ID: memcpy(data, &r.id, sizeof(r.id)); break;
    case FAKE_ATTR_IS_LEGACY_CUDA_IPC_CAPABLE: {
        int capable = !r.managed;
        memcpy(data, &capable, sizeof(capable));
        break;
    }
    case FAKE_ATTR_RANGE_START_ADDR: memcpy(data, &r.base, sizeof(r.base)); break;
    case FAKE_ATTR_RANGE_SIZE: memcpy(data, &r.bytes, sizeof(r.bytes)); break;
    default: return FAKE_CUDA_ERROR_INVALID_VALUE;
    }
    return FAKE_CUDA_SUCCESS;
}

/* Several attributes in one call (test/cuda_attrs_batch.h) */
int cuPointerGetAttributes(unsigned int n, int *attributes, void **data, uintptr_t ptr)
{
    return cuda_attrs_batch(fake_find(ptr).bytes != 0, n, attributes, data, ptr,
                            cuPointerGetAttribute);
}

int cuCtxGetCurrent(void **ctx)
{
    if (ctx == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    *ctx = fake_ctx;
    return FAKE_CUDA_SUCCESS;
}

int cuCtxSetCurrent(void *ctx)
{
    fake_ctx = ctx;
    return FAKE_CUDA_SUCCESS;
}

/* ---- devices, contexts ---------------------------------------------------------- */

int cuDeviceGetCount(int *count)
{
    if (count == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    *count = 1;
    return FAKE_CUDA_SUCCESS;
}

int cuDeviceGet(int *device, int ordinal)
{
    if (device == NULL || ordinal != 0) return FAKE_CUDA_ERROR_INVALID_VALUE;
    *device = 0;
    return FAKE_CUDA_SUCCESS;
}

int cuDeviceGetAttribute(int *value, int attribute, int device)
{
    if (value == NULL || device != 0) return FAKE_CUDA_ERROR_INVALID_VALUE;
    *value = attribute == FAKE_DEV_ATTR_MEMORY_POOLS_SUPPORTED;
    return FAKE_CUDA_SUCCESS;
}

int cuDevicePrimaryCtxRetain(void **ctx, int device)
{
    if (ctx == NULL || device != 0) return FAKE_CUDA_ERROR_INVALID_VALUE;
    *ctx = &fake_primary_ctx;
    return FAKE_CUDA_SUCCESS;
}

/* the one context there is (the primary one), which lives as long as the process */
int cuCtxGetId(void *ctx, unsigned long long *id)
{
    if (id == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    if (ctx == NULL) ctx = fake_ctx;
    if (ctx != &fake_primary_ctx) return FAKE_CUDA_ERROR_INVALID_CONTEXT;
    *id = 1;
    return FAKE_CUDA_SUCCESS;
}

int cuDevicePrimaryCtxRelease_v2(int device)
{
    return device == 0 ? FAKE_CUDA_SUCCESS : FAKE_CUDA_ERROR_INVALID_VALUE;
}

int cuStreamSynchronize(void *stream)
{
    if (fake_ctx == NULL) return FAKE_CUDA_ERROR_INVALID_CONTEXT;
    if (stream != &fake_stream) { /* (a stream of its own does not wait) */
        fake_legacy_wait();
        fake_land();
    }
    return FAKE_CUDA_SUCCESS;
}

/* Events: each the time its stream's work queued before it ends (0: done) */
int cuEventCreate(void **event, unsigned int flags)
{
    (void)flags;
    if (event == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    if (fake_ctx == NULL) return FAKE_CUDA_ERROR_INVALID_CONTEXT;
    *event = calloc(1, sizeof(double));
    return *event != NULL ? FAKE_CUDA_SUCCESS : FAKE_CUDA_ERROR_OUT_OF_MEMORY;
}

int cuEventRecord(void *event, void *stream)
{
    if (event == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    *(double *)event = stream != &fake_stream ? fake_legacy_end() : 0.0;
    return FAKE_CUDA_SUCCESS;
}

int cuEventQuery(void *event)
{
    if (event == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    return fake_now() >= *(double *)event ? FAKE_CUDA_SUCCESS : FAKE_CUDA_ERROR_NOT_READY;
}

int cuEventDestroy_v2(void *event)
{
    free(event);
    return FAKE_CUDA_SUCCESS;
}

int cuCtxSynchronize(void)
{
    return cuStreamSynchronize(NULL);
}

/* ---- device memory the host cannot touch ------------------------------------------ */

static int fake_alloc(uintptr_t *dptr, size_t bytes, int pool)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len;
    void *dev, *shadow;
    int fd;

    if (dptr == NULL || bytes == 0) return FAKE_CUDA_ERROR_INVALID_VALUE;
    if (fake_ctx == NULL) return FAKE_CUDA_ERROR_INVALID_CONTEXT;
    len = (bytes + page - 1) / page * page;
    fd = memfd_create("fake_cuda_device_memory", MFD_CLOEXEC);
    if (fd < 0) return FAKE_CUDA_ERROR_OUT_OF_MEMORY;
    if (ftruncate(fd, (off_t)len) != 0) {
        close(fd);
        return FAKE_CUDA_ERROR_OUT_OF_MEMORY;
    }
    dev = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, 0);
    shadow = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (dev == MAP_FAILED || shadow == MAP_FAILED ||
        fake_cuda_mark(dev, len, FAKE_CU_MEMORYTYPE_DEVICE, 0, 0) != 0) {
        if (dev != MAP_FAILED) munmap(dev, len);
        if (shadow != MAP_FAILED) munmap(shadow, len);
        return FAKE_CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < fake_nranges; i++) {
        if (fake_ranges[i].bytes != 0 && fake_ranges[i].base == (uintptr_t)dev) {
            fake_ranges[i].shadow = shadow;
            fake_ranges[i].pool = pool;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    *dptr = (uintptr_t)dev;
    return FAKE_CUDA_SUCCESS;
}

int cuMemAlloc_v2(uintptr_t *dptr, size_t bytes)
{
    return fake_alloc(dptr, bytes, 0);
}

/* The device's pool, on any stream (all work here is done when queued). */
int cuMemAllocAsync(uintptr_t *dptr, size_t bytes, void *stream)
{
    (void)stream;
    return fake_alloc(dptr, bytes, 1);
}

static int fake_free(uintptr_t dptr, int pool)
{
    fake_range_t r = fake_find(dptr);
    char *shadow = NULL;

    if (fake_ctx == NULL) return FAKE_CUDA_ERROR_INVALID_CONTEXT;
    fake_land(); /* (a free waits for the copies into it) */
    if (r.bytes == 0 || r.base != dptr || r.shadow == NULL || r.pool != pool ||
        fake_forget(dptr, &shadow) != 0) {
        return FAKE_CUDA_ERROR_INVALID_VALUE;
    }
    munmap((void *)r.base, r.bytes);
    munmap(shadow, r.bytes);
    return FAKE_CUDA_SUCCESS;
}

int cuMemFree_v2(uintptr_t dptr)
{
    return fake_free(dptr, 0);
}

int cuMemFreeAsync(uintptr_t dptr, void *stream)
{
    (void)stream;
    return fake_free(dptr, 1);
}

/* Where the driver reads or writes [ptr, ptr + bytes) of range r (fake_find(ptr)): the
 * shadow of device memory, or the host memory itself; NULL: a device range overrun. */
static char *fake_view_in(fake_range_t r, uintptr_t ptr, size_t bytes)
{
    if (r.bytes == 0 || r.shadow == NULL) return (char *)ptr;
    if (bytes > r.bytes - (ptr - r.base)) return NULL;
    return r.shadow + (ptr - r.base);
}

static char *fake_view(uintptr_t ptr, size_t bytes)
{
    return fake_view_in(fake_find(ptr), ptr, bytes);
}

/* For tests: read device memory [src, src + bytes) into dst as a kernel on another
 * stream would -- what the legacy stream still holds has not landed.  0, or -1 (a range
 * overrun). */
int fake_cuda_peek(void *dst, uintptr_t src, size_t bytes)
{
    const char *s = fake_view(src, bytes);

    if (s == NULL) return -1;
    memcpy(dst, s, bytes);
    return 0;
}

/* A copy on the legacy stream (`legacy`) or on cuStreamCreate's. */
static int fake_copy(uintptr_t dst, uintptr_t src, size_t bytes, int legacy)
{
    const fake_range_t dr = fake_find(dst), sr = fake_find(src);
    char *d = fake_view_in(dr, dst, bytes), *s = fake_view_in(sr, src, bytes);

    if (fake_ctx == NULL) return FAKE_CUDA_ERROR_INVALID_CONTEXT;
    if (d == NULL || s == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    if (legacy) fake_legacy_wait(); /* (the application's work before it) */
    if (fake_copy_fails()) return FAKE_CUDA_ERROR_ILLEGAL_ADDRESS;
    if (legacy && dr.bytes != 0 && dr.memtype == FAKE_CU_MEMORYTYPE_DEVICE && !dr.managed &&
        (sr.bytes == 0 || (sr.memtype == FAKE_CU_MEMORYTYPE_DEVICE && !sr.managed)) &&
        fake_leave(d, s, bytes) == 0)
        return FAKE_CUDA_SUCCESS; /* into device memory, from pageable or device memory */
    if (legacy) fake_land(); /* (it follows what the stream holds) */
    memmove(d, s, bytes);
    return FAKE_CUDA_SUCCESS;
}

int cuMemcpy(uintptr_t dst, uintptr_t src, size_t bytes)
{
    return fake_copy(dst, src, bytes, 1);
}

/* Streams: cuStreamCreate's is a name, fake_stream's address (one per context is all
 * a test needs), whose copies are done when queued; the legacy stream's are cuMemcpy's. */
int cuStreamCreate(void **stream, unsigned int flags)
{
    (void)flags;
    if (stream == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    if (fake_ctx == NULL) return FAKE_CUDA_ERROR_INVALID_CONTEXT;
    *stream = &fake_stream;
    return FAKE_CUDA_SUCCESS;
}

static int fake_stream_ok(const void *stream)
{ /* one of this driver's: its own, the default, legacy or per-thread */
    return stream == NULL || stream == &fake_stream || stream == (void *)0x1 ||
           stream == (void *)0x2;
}

int cuMemcpyAsync(uintptr_t dst, uintptr_t src, size_t bytes, void *stream)
{
    if (!fake_stream_ok(stream)) return FAKE_CUDA_ERROR_INVALID_VALUE;
    return fake_copy(dst, src, bytes, stream != &fake_stream);
}

/* Does the memory at `at` (a 2D copy's side) say what its memory type does (host: no
 * device memory; device: device memory; unified: either)? */
static int fake_2d_type_ok(int type, uintptr_t at)
{
    fake_range_t r = fake_find(at);

    if (type == FAKE_CU_MEMORYTYPE_HOST)
        return r.bytes == 0 || r.memtype == FAKE_CU_MEMORYTYPE_HOST;
    if (type == FAKE_CU_MEMORYTYPE_DEVICE)
        return r.bytes != 0 && r.memtype != FAKE_CU_MEMORYTYPE_HOST;
    return 1;
}

/* Rows of `width` bytes, each a pitch on from the last: one device copy (one failure
 * of fake_cuda_fail_copies), row by row through the driver's views, every row's range
 * checked as cuMemcpy's is. */
int cuMemcpy2DAsync_v2(const gpuring_cuda_memcpy2d_t *c, void *stream)
{
    uintptr_t src, dst;

    if (!fake_stream_ok(stream)) return FAKE_CUDA_ERROR_INVALID_VALUE;
    if (fake_ctx == NULL) return FAKE_CUDA_ERROR_INVALID_CONTEXT;
    if (cuda_memcpy2d_ends(c, &src, &dst) != 0 || !fake_2d_type_ok(c->src_type, src) ||
        !fake_2d_type_ok(c->dst_type, dst))
        return FAKE_CUDA_ERROR_INVALID_VALUE;
    for (size_t r = 0; r < c->height; r++) {
        if (fake_view(dst + r * c->dst_pitch, c->width) == NULL ||
            fake_view(src + r * c->src_pitch, c->width) == NULL) {
            return FAKE_CUDA_ERROR_INVALID_VALUE;
        }
    }
    if (fake_copy_fails()) return FAKE_CUDA_ERROR_ILLEGAL_ADDRESS;
    if (stream != &fake_stream) fake_land(); /* (on the legacy stream: after what it holds) */
    for (size_t r = 0; r < c->height; r++) {
        memmove(fake_view(dst + r * c->dst_pitch, c->width),
                fake_view(src + r * c->src_pitch, c->width), c->width);
    }
    return FAKE_CUDA_SUCCESS;
}

int cuMemHostRegister_v2(void *ptr, size_t bytes, unsigned int flags)
{
    (void)flags;
    if (fake_ctx == NULL) return FAKE_CUDA_ERROR_INVALID_CONTEXT;
    if (ptr == NULL || bytes == 0 || fake_find((uintptr_t)ptr).bytes != 0) {
        return FAKE_CUDA_ERROR_INVALID_VALUE;
    }
    return fake_cuda_mark(ptr, bytes, FAKE_CU_MEMORYTYPE_HOST, 0, -1) == 0
               ? FAKE_CUDA_SUCCESS
               : FAKE_CUDA_ERROR_OUT_OF_MEMORY;
}

int cuMemHostUnregister(void *ptr)
{
    fake_range_t r = fake_find((uintptr_t)ptr);

    if (r.bytes == 0 || r.memtype != FAKE_CU_MEMORYTYPE_HOST || r.base != (uintptr_t)ptr) {
        return FAKE_CUDA_ERROR_INVALID_VALUE;
    }
    return fake_forget(r.base, NULL) == 0 ? FAKE_CUDA_SUCCESS : FAKE_CUDA_ERROR_INVALID_VALUE;
}

/* For tests: ranges cuMemHostRegister'ed and not unregistered (leaks). */
int fake_cuda_host_registered(void)
{
    int n = 0;

    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < fake_nranges; i++) {
        n += fake_ranges[i].bytes != 0 && fake_ranges[i].memtype == FAKE_CU_MEMORYTYPE_HOST;
    }
    pthread_mutex_unlock(&fake_lock);
    return n;
}
