/*
 * cudacpu_memory.cc -- memory on the CUDA CPU runtime (test/cudacpu).
 *
 * Device memory: one POSIX shared-memory segment per cudaMalloc, named
 * /cudacpu-<pid>-<n> and mapped at the address cudaMalloc returns (its first
 * MiB and last 64 KiB filled with 0xa5 bytes, as uninitialised GPU memory is
 * garbage, where a missing initialisation or a wrong offset lands; the pages
 * between stay unwritten, so a large allocation costs nothing until used: the
 * device plane's FIFOs are 4 MiB per channel and peer; CUDACPU_POISON=0 leaves
 * zeros everywhere).  cudaIpcGetMemHandle writes the name into the handle;
 * cudaIpcOpenMemHandle in another process maps the segment.  The name is
 * unlinked by cudaFree, or at exit for what was never freed, or (a process
 * that died without exit handlers) by the next process's first cudaMalloc.
 * Built with AddressSanitizer, every mapping of device or pinned memory has
 * one more page, and the bytes past the buffer's end are poisoned in each
 * process that maps it: an access past the end is reported, as
 * compute-sanitizer would on a GPU.  With CUDACPU_POISON_DEVICE=1 too, device
 * memory (not managed) is poisoned whole, in every process that maps it, and the
 * runtime's copies and sets go around the checks: with device code built
 * unchecked (CUDACPU_UNCHECKED_DEVICE, cudacpu_kernel.h), any other access --
 * the host's, where a GPU would fault -- is reported.
 *
 * Managed memory (cudaMallocManaged) is made the same way too; CUDA IPC
 * cannot share it either, and the driver says IS_MANAGED.
 *
 * cudaMallocAsync's memory (the device's default pool, stream-ordered) is
 * made the same way, but CUDA IPC cannot share it, as with a real pool
 * without an IPC handle type: cudaIpcGetMemHandle fails and the driver's
 * IS_LEGACY_CUDA_IPC_CAPABLE says 0.  It is there as soon as cudaMallocAsync
 * returns (earlier than stream order needs); cudaFreeAsync frees it in
 * stream order.
 *
 * Pinned host memory (cudaHostAlloc) and registered host memory
 * (cudaHostRegister: mapped pages only, none pinned already, as the driver
 * pins whole pages) are recorded so that cudaHostGetDevicePointer can answer
 * (the device pointer is the host pointer).  Copies and sets are memcpy and
 * memset, queued on a stream like any other operation.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>

#include "test/cudacpu/cudacpu_internal.h"

namespace cudacpu {
namespace {

enum mem_kind {
    MEM_DEVICE,
    MEM_POOL,
    MEM_MANAGED,
    MEM_HOST_ALLOC,
    MEM_HOST_REGISTERED,
    MEM_IPC_MAPPED
};

struct mem_range {
    size_t bytes;
    size_t map_bytes;  /* what was mapped (whole pages) */
    mem_kind kind;
    int device;
    int refs;          /* IPC mappings: opens of the same segment */
    uint64_t buffer_id;
    char name[40];     /* device memory and IPC mappings: the segment */

    bool is_device() const { return kind == MEM_DEVICE || kind == MEM_POOL || kind == MEM_MANAGED; }
};

/* what a cudaIpcMemHandle_t holds */
struct ipc_handle {
    char magic[8];
    int32_t pid;
    int32_t device;
    uint64_t bytes;
    char name[40];
};
static_assert(sizeof(ipc_handle) <= sizeof(cudaIpcMemHandle_t), "IPC handle too large");
const char ipc_magic[8] = { 'c', 'u', 'd', 'a', 'c', 'p', 'u', 0 };

/* never destroyed: other threads may still use them at exit */
std::mutex &mu = *new std::mutex;
std::map<uintptr_t, mem_range> &ranges = *new std::map<uintptr_t, mem_range>; /* by base */
uint64_t buffers_made; /* buffer ids */
uint64_t segments_made;

/* the range holding p (lock held), or ranges.end() */
std::map<uintptr_t, mem_range>::iterator range_find(const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    auto it = ranges.upper_bound(a);
    if (it == ranges.begin()) return ranges.end();
    --it;
    return a < it->first + std::max<size_t>(it->second.bytes, 1) ? it : ranges.end();
}

size_t page_round(size_t n)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (std::max<size_t>(n, 1) + page - 1) / page * page;
}

/* what a buffer of `bytes` maps: whole pages, and under ASan a redzone page */
size_t map_round(size_t bytes)
{
#ifdef CUDACPU_ASAN
    return page_round(bytes) + page_round(1);
#else
    return page_round(bytes);
#endif
}

/* new device memory at p, `bytes`: its two ends filled with garbage (the header) */
static void poison_new(void *p, size_t bytes)
{
    const size_t head = (size_t)1 << 20, tail = (size_t)64 << 10;

    if (bytes <= head + tail) {
        memset(p, 0xa5, bytes);
        return;
    }
    memset(p, 0xa5, head);
    memset((char *)p + bytes - tail, 0xa5, tail);
}

/* a new mapping p of map_bytes for a buffer of `bytes`: under ASan, its tail is
 * poisoned, and with CUDACPU_POISON_DEVICE device memory (`device`) whole (unmap lifts
 * that, so that a later mapping at p starts clean) */
void map_poison_tail(void *p, size_t bytes, size_t map_bytes, bool device = false)
{
#ifdef CUDACPU_ASAN
    if (device && knobs_get().poison_device) bytes = 0;
    ASAN_POISON_MEMORY_REGION((char *)p + bytes, map_bytes - bytes);
#else
    (void)p, (void)bytes, (void)map_bytes, (void)device;
#endif
}

/* The runtime's copies and sets, which device memory may take part in: around ASan's
 * checks where CUDACPU_POISON_DEVICE poisons it (memmove's and memset's interceptors
 * check every byte); word by word, no library call. */
#ifdef CUDACPU_ASAN
__attribute__((no_sanitize_address, optimize("no-tree-loop-distribute-patterns")))
void unchecked_move(void *dst, const void *src, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;

    if (d == s) return;
    if (d < s || d >= s + n) {
        if ((uintptr_t)d % 8 == (uintptr_t)s % 8) {
            for (; n > 0 && (uintptr_t)d % 8 != 0; n--) *d++ = *s++;
            for (; n >= 8; n -= 8, d += 8, s += 8) *(uint64_t *)d = *(const uint64_t *)s;
        }
        for (; n > 0; n--) *d++ = *s++;
    } else {
        while (n > 0) {
            n--;
            d[n] = s[n];
        }
    }
}

__attribute__((no_sanitize_address, optimize("no-tree-loop-distribute-patterns")))
void unchecked_set(void *dst, int value, size_t n)
{
    unsigned char *d = (unsigned char *)dst;

    for (; n > 0; n--) *d++ = (unsigned char)value;
}

#endif

void device_move(void *dst, const void *src, size_t n)
{
#ifdef CUDACPU_ASAN
    if (knobs_get().poison_device) return unchecked_move(dst, src, n);
#endif
    memmove(dst, src, n);
}

void device_set(void *dst, int value, size_t n)
{
#ifdef CUDACPU_ASAN
    if (knobs_get().poison_device) return unchecked_set(dst, value, n);
#endif
    memset(dst, value, n);
}

void unmap(void *p, size_t map_bytes)
{
#ifdef CUDACPU_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, map_bytes);
#endif
    munmap(p, map_bytes);
}

void unlink_leftovers()
{
    std::lock_guard<std::mutex> g(mu);
    for (auto &r : ranges)
        if (r.second.is_device()) shm_unlink(r.second.name);
}

/* segments of processes that died without cudaFree or exit handlers (_exit, a
 * crash): unlinked at this process's first cudaMalloc */
void unlink_orphans()
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;

    if (d == nullptr) return;
    while ((e = readdir(d)) != nullptr) {
        int pid = 0;
        unsigned long long n = 0;
        char name[300];
        if (sscanf(e->d_name, "cudacpu-%d-%llu", &pid, &n) != 2 || pid <= 0) continue;
        if (kill(pid, 0) == 0 || errno != ESRCH) continue;
        snprintf(name, sizeof(name), "/%s", e->d_name);
        shm_unlink(name);
    }
    closedir(d);
}

void *segment_map(const char *name, int oflag, size_t map_bytes, int *err_p)
{
    const int fd = shm_open(name, oflag, 0600);
    void *p = MAP_FAILED;

    if (fd < 0) {
        *err_p = errno;
        return nullptr;
    }
    if ((oflag & O_CREAT) && ftruncate(fd, (off_t)map_bytes) != 0) {
        *err_p = errno;
    } else {
        p = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        *err_p = p == MAP_FAILED ? errno : 0;
    }
    close(fd);
    return p == MAP_FAILED ? nullptr : p;
}

/* Does [a, a + n) share a page with pinned host memory?  (The driver pins whole
 * pages: a second registration of one fails.) */
bool overlaps(uintptr_t a, size_t n)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = a & ~(page - 1), hi = (a + n + page - 1) & ~(page - 1);

    for (auto &r : ranges) {
        if (r.second.kind != MEM_HOST_REGISTERED && r.second.kind != MEM_HOST_ALLOC) continue;
        const uintptr_t rlo = r.first & ~(page - 1);
        const uintptr_t rhi = (r.first + r.second.bytes + page - 1) & ~(page - 1);
        if (lo < rhi && rlo < hi) return true;
    }
    return false;
}

} /* namespace */

/* the stand-in driver's pointer query (cudacpu_driver_link.h) */
void pointer_info(const void *ptr, cudacpu_ptr_info_t *info_p)
{
    memset(info_p, 0, sizeof(*info_p));
    std::lock_guard<std::mutex> g(mu);
    auto it = range_find(ptr);
    if (it == ranges.end()) return;
    const mem_range &r = it->second;
    info_p->kind = r.is_device() ? CUDACPU_PTR_DEVICE
                   : r.kind == MEM_IPC_MAPPED ? CUDACPU_PTR_IPC
                                              : CUDACPU_PTR_HOST;
    info_p->ipc_capable = r.kind == MEM_DEVICE;
    info_p->managed = r.kind == MEM_MANAGED;
    info_p->device = r.device;
    info_p->base = it->first;
    info_p->bytes = r.bytes;
    info_p->buffer_id = r.buffer_id;
}

} /* namespace cudacpu */

using namespace cudacpu;

namespace {

/* a device allocation of `kind` (MEM_DEVICE, MEM_POOL or MEM_MANAGED): a new segment */
cudaError_t device_alloc(void **devPtr, size_t size, mem_kind kind, const char *what)
{
    static std::once_flag at_exit;
    mem_range r{};
    int err = 0;

    if (devPtr == nullptr) return fail(cudaErrorInvalidValue);
    *devPtr = nullptr;
    if (size == 0) return ok();
    runtime_init();
    std::call_once(at_exit, [] {
        unlink_orphans();
        atexit(unlink_leftovers);
    });
    r.bytes = size;
    r.map_bytes = map_round(size);
    r.kind = kind;
    r.device = current_device();
    {
        std::lock_guard<std::mutex> g(mu);
        snprintf(r.name, sizeof(r.name), "/cudacpu-%d-%llu", (int)getpid(),
                 (unsigned long long)++segments_made);
    }
    void *p = segment_map(r.name, O_CREAT | O_EXCL | O_RDWR, r.map_bytes, &err);
    if (p == nullptr) {
        shm_unlink(r.name);
        warn("cudacpu: %s(%zu): shared memory segment: %s", what, size, strerror(err));
        return fail(cudaErrorMemoryAllocation);
    }
    if (knobs_get().poison) poison_new(p, size);
    map_poison_tail(p, size, r.map_bytes, kind != MEM_MANAGED);
    std::lock_guard<std::mutex> g(mu);
    r.buffer_id = ++buffers_made;
    ranges[(uintptr_t)p] = r;
    *devPtr = p;
    return ok();
}

/* the device allocation at p, taken out of the table (false: none there) */
bool device_take(void *p, mem_range *r_p)
{
    std::lock_guard<std::mutex> g(mu);
    auto it = ranges.find((uintptr_t)p);
    if (it == ranges.end() || !it->second.is_device()) return false;
    *r_p = it->second;
    ranges.erase(it);
    return true;
}

void device_unmap(void *p, const mem_range &r)
{
    unmap(p, r.map_bytes);
    shm_unlink(r.name);
}

} /* namespace */

extern "C" cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    return device_alloc(devPtr, size, MEM_DEVICE, "cudaMalloc");
}

/* CUDACPU_FAIL_MALLOC_ASYNC set, read at every call (a test sets it around one MPI
 * call of one rank): the pool is out of memory */
extern "C" cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream)
{
    (void)stream; /* usable at once: earlier than stream order asks */
    if (getenv("CUDACPU_FAIL_MALLOC_ASYNC") != nullptr) return fail(cudaErrorMemoryAllocation);
    return device_alloc(devPtr, size, MEM_POOL, "cudaMallocAsync");
}

/* managed memory: the host reaches it as any (one address space), kernels too */
extern "C" cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)
        return fail(cudaErrorInvalidValue);
    return device_alloc(devPtr, size, MEM_MANAGED, "cudaMallocManaged");
}

/* The current device's memory: a nominal total (80 GiB, an H100's), less the bytes of
 * this process's live allocations on it -- what a test reads to see memory kept */
extern "C" cudaError_t cudaMemGetInfo(size_t *free_p, size_t *total_p)
{
    const size_t total = (size_t)80 << 30;
    size_t used = 0;

    if (free_p == nullptr || total_p == nullptr) return fail(cudaErrorInvalidValue);
    runtime_init();
    const int dev = current_device();
    {
        std::lock_guard<std::mutex> g(mu);
        for (auto &r : ranges) {
            if (r.second.is_device() && r.second.device == dev) used += r.second.bytes;
        }
    }
    *free_p = used < total ? total - used : 0;
    *total_p = total;
    return ok();
}

/* as CUDA: cudaFree (of any kind) waits for the device's work */
extern "C" cudaError_t cudaFree(void *devPtr)
{
    mem_range r;

    if (devPtr == nullptr) return ok();
    {
        std::lock_guard<std::mutex> g(mu);
        auto it = ranges.find((uintptr_t)devPtr);
        if (it == ranges.end() || !it->second.is_device()) return fail(cudaErrorInvalidValue);
        r = it->second;
    }
    device_drain(r.device);
    if (!device_take(devPtr, &r)) return fail(cudaErrorInvalidValue);
    device_unmap(devPtr, r);
    return ok();
}

/* freed when the stream's earlier work is done; gone from the table at once */
extern "C" cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream)
{
    mem_range r;

    if (devPtr == nullptr) return ok();
    if (!device_take(devPtr, &r)) return fail(cudaErrorInvalidValue);
    return stream_enqueue(stream, [devPtr, r] { device_unmap(devPtr, r); });
}

extern "C" cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    mem_range r{};

    if (pHost == nullptr || size == 0 ||
        (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped |
                             cudaHostAllocWriteCombined)))
        return fail(cudaErrorInvalidValue);
    runtime_init();
    r.bytes = size;
    r.map_bytes = map_round(size);
    r.kind = MEM_HOST_ALLOC;
    r.device = current_device();
    void *p = mmap(nullptr, r.map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) return fail(cudaErrorMemoryAllocation);
    map_poison_tail(p, size, r.map_bytes);
    std::lock_guard<std::mutex> g(mu);
    r.buffer_id = ++buffers_made;
    ranges[(uintptr_t)p] = r;
    *pHost = p;
    return ok();
}

extern "C" cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

extern "C" cudaError_t cudaFreeHost(void *ptr)
{
    mem_range r;

    if (ptr == nullptr) return ok();
    {
        std::lock_guard<std::mutex> g(mu);
        auto it = ranges.find((uintptr_t)ptr);
        if (it == ranges.end() || it->second.kind != MEM_HOST_ALLOC)
            return fail(cudaErrorInvalidValue);
        r = it->second;
        ranges.erase(it);
    }
    device_drain(r.device);
    unmap(ptr, r.map_bytes);
    return ok();
}

extern "C" cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    mem_range r{};

    if (ptr == nullptr || size == 0 ||
        (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped)))
        return fail(cudaErrorInvalidValue);
    /* the driver pins every page of the range: all must be mapped (msync: ENOMEM) */
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = (uintptr_t)ptr & ~(page - 1);
    if (msync((void *)lo, (uintptr_t)ptr + size - lo, MS_ASYNC) != 0)
        return fail(cudaErrorInvalidValue);
    r.bytes = size;
    r.kind = MEM_HOST_REGISTERED;
    r.device = current_device();
    std::lock_guard<std::mutex> g(mu);
    if (overlaps((uintptr_t)ptr, size)) return fail(cudaErrorHostMemoryAlreadyRegistered);
    r.buffer_id = ++buffers_made;
    ranges[(uintptr_t)ptr] = r;
    return ok();
}

extern "C" cudaError_t cudaHostUnregister(void *ptr)
{
    std::lock_guard<std::mutex> g(mu);
    auto it = ranges.find((uintptr_t)ptr);
    if (it == ranges.end() || it->second.kind != MEM_HOST_REGISTERED)
        return fail(cudaErrorHostMemoryNotRegistered);
    ranges.erase(it);
    return ok();
}

extern "C" cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    if (pDevice == nullptr || pHost == nullptr || flags != 0) return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> g(mu);
    auto it = range_find(pHost);
    if (it == ranges.end() ||
        (it->second.kind != MEM_HOST_ALLOC && it->second.kind != MEM_HOST_REGISTERED))
        return fail(cudaErrorInvalidValue);
    *pDevice = pHost; /* one address space */
    return ok();
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                       enum cudaMemcpyKind kind, cudaStream_t stream)
{
    if (count == 0) return ok();
    /* CUDACPU_FAIL_COPY set, read at every copy (a test sets it around one MPI call of one
     * rank): the copy is refused, as a driver error would */
    if (getenv("CUDACPU_FAIL_COPY") != nullptr) return fail(cudaErrorInvalidValue);
    if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
    if ((unsigned)kind > (unsigned)cudaMemcpyDefault) return fail(cudaErrorInvalidMemcpyDirection);
    /* CUDACPU_FAIL_COPY_RUN set (read the same way): the copy is queued, and fails when
     * its stream reaches it -- nothing moves, the stream's next query says so */
    if (getenv("CUDACPU_FAIL_COPY_RUN") != nullptr)
        return stream_enqueue(stream, [] { stream_op_fail(cudaErrorLaunchFailure); });
    return stream_enqueue(stream, [dst, src, count] { device_move(dst, src, count); });
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                                  enum cudaMemcpyKind kind)
{
    if (count == 0) return ok();
    if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
    if ((unsigned)kind > (unsigned)cudaMemcpyDefault) return fail(cudaErrorInvalidMemcpyDirection);
    return stream_run_sync([dst, src, count] { device_move(dst, src, count); });
}

extern "C" cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    if (count == 0) return ok();
    if (devPtr == nullptr) return fail(cudaErrorInvalidValue);
    return stream_enqueue(stream, [devPtr, value, count] { device_set(devPtr, value, count); });
}

extern "C" cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    if (count == 0) return ok();
    if (devPtr == nullptr) return fail(cudaErrorInvalidValue);
    return stream_run_sync([devPtr, value, count] { device_set(devPtr, value, count); });
}

extern "C" cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    ipc_handle h{};

    if (handle == nullptr || devPtr == nullptr) return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> g(mu);
    auto it = range_find(devPtr);
    if (it == ranges.end() || it->second.kind != MEM_DEVICE) return fail(cudaErrorInvalidValue);
    memcpy(h.magic, ipc_magic, sizeof(h.magic));
    h.pid = (int32_t)getpid();
    h.device = it->second.device;
    h.bytes = it->second.bytes;
    memcpy(h.name, it->second.name, sizeof(h.name));
    memset(handle, 0, sizeof(*handle));
    memcpy(handle->reserved, &h, sizeof(h));
    return ok();
}

/* CUDACPU_FAIL_IPC_OPEN set: every handle of another process fails to open, as where
 * the process may not reach the peer's GPU (a device cgroup per task; CUDA opens
 * handles of GPUs CUDA_VISIBLE_DEVICES hides); CUDACPU_FAIL_IPC_OPEN_NTH=N: the N-th
 * open of another process's handle in this process fails, once (out of memory for
 * the mapping: a failure that passes) */
static int ipc_open_fails_now(void)
{
    static std::atomic<long> opens{0};
    const char *nth = getenv("CUDACPU_FAIL_IPC_OPEN_NTH");

    return nth != nullptr && ++opens == atol(nth);
}

extern "C" cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle,
                                            unsigned int flags)
{
    ipc_handle h;
    mem_range r{};
    int err = 0;

    if (devPtr == nullptr || (flags & ~(unsigned)cudaIpcMemLazyEnablePeerAccess))
        return fail(cudaErrorInvalidValue);
    memcpy(&h, handle.reserved, sizeof(h));
    h.name[sizeof(h.name) - 1] = '\0';
    if (memcmp(h.magic, ipc_magic, sizeof(h.magic)) != 0) return fail(cudaErrorInvalidValue);
    if (h.pid == (int32_t)getpid()) /* as CUDA: not in the exporting process */
        return fail(cudaErrorDeviceUninitialized);
    if (getenv("CUDACPU_FAIL_IPC_OPEN") != nullptr) return fail(cudaErrorInvalidDevice);
    if (ipc_open_fails_now()) return fail(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> g(mu);
    for (auto &x : ranges) { /* opened before: the same mapping, counted */
        if (x.second.kind == MEM_IPC_MAPPED && strcmp(x.second.name, h.name) == 0) {
            x.second.refs++;
            *devPtr = (void *)x.first;
            return ok();
        }
    }
    r.bytes = h.bytes;
    r.map_bytes = map_round(h.bytes);
    r.kind = MEM_IPC_MAPPED;
    r.device = current_device();
    r.refs = 1;
    memcpy(r.name, h.name, sizeof(r.name));
    void *p = segment_map(r.name, O_RDWR, r.map_bytes, &err);
    if (p == nullptr) {
        warn("cudacpu: cudaIpcOpenMemHandle(%s): %s", r.name, strerror(err));
        return fail(cudaErrorMapBufferObjectFailed);
    }
    map_poison_tail(p, r.bytes, r.map_bytes, true);
    r.buffer_id = ++buffers_made;
    ranges[(uintptr_t)p] = r;
    *devPtr = p;
    return ok();
}

extern "C" cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
    std::lock_guard<std::mutex> g(mu);
    auto it = ranges.find((uintptr_t)devPtr);
    if (it == ranges.end() || it->second.kind != MEM_IPC_MAPPED)
        return fail(cudaErrorInvalidValue);
    if (--it->second.refs == 0) {
        unmap(devPtr, it->second.map_bytes);
        ranges.erase(it);
    }
    return ok();
}
