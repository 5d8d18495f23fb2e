/*
 * cudacpu_device.cc -- devices, errors and knobs of the CUDA CPU runtime
 * (test/cudacpu): CUDACPU_DEVICES devices shaped like an H100 SXM (132 SMs,
 * 2048 threads each, compute capability 9.0, 80 GB), the calling thread's
 * current device and last error, CUDA's error names and strings, and the
 * environment knobs read once.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>

#include "test/cudacpu/cudacpu_internal.h"

namespace cudacpu {
namespace {

__thread cudaError_t tls_last_error = cudaSuccess;
__thread int tls_device = 0;

unsigned long env_ulong(const char *name, unsigned long dflt, unsigned long lo,
                        unsigned long hi)
{
    const char *v = getenv(name);
    char *end;
    unsigned long x;

    if (v == nullptr || *v == '\0') return dflt;
    x = strtoul(v, &end, 0);
    if (*end != '\0' || x < lo || x > hi) {
        fprintf(stderr, "cudacpu: %s=%s is not a number in [%lu, %lu]; using %lu\n", name, v,
                lo, hi, dflt);
        return dflt;
    }
    return x;
}

knobs knobs_read()
{
    knobs k;
    const char *order = getenv("CUDACPU_FIBER_ORDER");

    k.order = ORDER_FORWARD;
    k.seed = 1;
    if (order != nullptr && strcmp(order, "reverse") == 0) {
        k.order = ORDER_REVERSE;
    } else if (order != nullptr && strncmp(order, "random", 6) == 0 &&
               (order[6] == '\0' || order[6] == ':')) {
        k.order = ORDER_RANDOM;
        if (order[6] == ':') k.seed = strtoull(order + 7, nullptr, 0);
    } else if (order != nullptr && *order != '\0' && strcmp(order, "forward") != 0) {
        fprintf(stderr, "cudacpu: CUDACPU_FIBER_ORDER=%s: want forward, reverse or "
                "random[:SEED]; using forward\n", order);
    }
    k.max_blocks = (unsigned)env_ulong("CUDACPU_MAX_BLOCKS", 16, 1, 4096);
    k.poll_yield = (unsigned)env_ulong("CUDACPU_POLL_YIELD", 1, 0, 1u << 30);
    k.devices = (int)env_ulong("CUDACPU_DEVICES", 1, 0, 64);
    k.fiber_stack = env_ulong("CUDACPU_FIBER_STACK_KB", 64, 16, 1u << 20) * 1024;
    k.poison = (int)env_ulong("CUDACPU_POISON", 1, 0, 1);
    k.poison_device = (int)env_ulong("CUDACPU_POISON_DEVICE", 0, 0, 1);
    k.mps = (int)env_ulong("CUDACPU_MPS", 1, 0, 1);
    k.pci_domains = (int)env_ulong("CUDACPU_PCI_DOMAINS", 0, 0, 1);
    k.no_pci = (int)env_ulong("CUDACPU_NO_PCI", 0, 0, 1);
    k.driver = getenv("CUDACPU_DRIVER");
    return k;
}

int link_get_device()
{
    return tls_device;
}

int link_set_device(int device)
{
    return (int)cudaSetDevice(device);
}

int link_copy(void *dst, const void *src, size_t bytes)
{
    return (int)cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
}

int link_sync_legacy()
{
    return (int)cudaStreamSynchronize(cudaStreamLegacy);
}

int link_alloc(void **ptr_p, size_t bytes)
{
    return (int)cudaMalloc(ptr_p, bytes);
}

int link_free(void *ptr)
{
    return (int)cudaFree(ptr);
}

int link_alloc_async(void **ptr_p, size_t bytes)
{
    return (int)cudaMallocAsync(ptr_p, bytes, cudaStreamLegacy);
}

int link_free_async(void *ptr)
{
    return (int)cudaFreeAsync(ptr, cudaStreamLegacy);
}

int link_stream_create(void **stream_p)
{
    return (int)cudaStreamCreateWithFlags((cudaStream_t *)stream_p, cudaStreamNonBlocking);
}

int link_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    return (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream);
}

int link_stream_sync(void *stream)
{
    return (int)cudaStreamSynchronize((cudaStream_t)stream);
}

/* As CUDA's runtime loads libcuda.so.1: the stand-in driver, if one is named, so
 * that code asking the driver about pointers (dlopen RTLD_NOLOAD) finds it. */
void driver_load(const char *path)
{
    static const cudacpu_driver_link_t link = { pointer_info,       link_get_device,
                                                link_set_device,    link_copy,
                                                link_sync_legacy,   link_alloc,
                                                link_free,          link_alloc_async,
                                                link_free_async,    link_stream_create,
                                                link_copy_async,    link_stream_sync };
    void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    cudacpu_driver_attach_fn attach =
        lib != nullptr ? (cudacpu_driver_attach_fn)dlsym(lib, "cudacpu_driver_attach") : nullptr;

    if (attach == nullptr) {
        fprintf(stderr, "cudacpu: CUDACPU_DRIVER=%s: %s\n", path,
                lib == nullptr ? dlerror() : "no cudacpu_driver_attach in it");
        return;
    }
    attach(&link);
}

struct error_text {
    cudaError_t err;
    const char *name, *text;
};
const error_text error_texts[] = {
    { cudaSuccess, "cudaSuccess", "no error" },
    { cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument" },
    { cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory" },
    { cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error" },
    { cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
      "invalid configuration argument" },
    { cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer" },
    { cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
      "invalid copy direction for memcpy" },
    { cudaErrorDevicesUnavailable, "cudaErrorDevicesUnavailable",
      "CUDA-capable device(s) is/are busy or unavailable" },
    { cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction",
      "invalid device function" },
    { cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected" },
    { cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal" },
    { cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context" },
    { cudaErrorMapBufferObjectFailed, "cudaErrorMapBufferObjectFailed",
      "mapping of buffer object failed" },
    { cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
      "invalid resource handle" },
    { cudaErrorNotReady, "cudaErrorNotReady", "device not ready" },
    { cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
      "an illegal memory access was encountered" },
    { cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
      "too many resources requested for launch" },
    { cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
      "part or all of the requested memory range is already mapped" },
    { cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
      "pointer does not correspond to a registered memory region" },
    { cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure" },
    { cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported" },
    { cudaErrorUnknown, "cudaErrorUnknown", "unknown error" },
};

const error_text *error_find(cudaError_t err)
{
    for (const error_text &e : error_texts)
        if (e.err == err) return &e;
    return nullptr;
}

bool device_ok(int device)
{
    return device >= 0 && device < knobs_get().devices;
}

} /* namespace */

const knobs &knobs_get()
{
    static const knobs k = knobs_read();
    return k;
}

/* the runtime's first use (device queries and selection, allocations) */
void runtime_init()
{
    static std::once_flag once;
    std::call_once(once, [] {
        if (knobs_get().driver != nullptr && *knobs_get().driver != '\0')
            driver_load(knobs_get().driver);
    });
}

cudaError_t fail(cudaError_t err)
{
    tls_last_error = err;
    return err;
}

int current_device()
{
    return tls_device;
}

void warn(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

} /* namespace cudacpu */

using namespace cudacpu;

extern "C" const char *cudaGetErrorName(cudaError_t error)
{
    const error_text *e = error_find(error);
    return e != nullptr ? e->name : "cudaErrorUnknown";
}

extern "C" const char *cudaGetErrorString(cudaError_t error)
{
    const error_text *e = error_find(error);
    return e != nullptr ? e->text : "unrecognized error code";
}

extern "C" cudaError_t cudaGetLastError(void)
{
    const cudaError_t e = tls_last_error;
    tls_last_error = cudaSuccess;
    return e;
}

extern "C" cudaError_t cudaPeekAtLastError(void)
{
    return tls_last_error;
}

extern "C" cudaError_t cudaGetDeviceCount(int *count)
{
    runtime_init();
    if (count == nullptr) return fail(cudaErrorInvalidValue);
    *count = knobs_get().devices;
    if (*count == 0) return fail(cudaErrorNoDevice);
    return ok();
}

extern "C" cudaError_t cudaGetDevice(int *device)
{
    runtime_init();
    if (device == nullptr) return fail(cudaErrorInvalidValue);
    if (knobs_get().devices == 0) return fail(cudaErrorNoDevice);
    *device = tls_device;
    return ok();
}

extern "C" cudaError_t cudaSetDevice(int device)
{
    runtime_init();
    if (!device_ok(device)) return fail(knobs_get().devices == 0 ? cudaErrorNoDevice
                                                                 : cudaErrorInvalidDevice);
    /* CUDACPU_FAIL_SET_DEVICE_OFF_MAIN=1, read at every call (set to 0 before any thread
     * starts, then overwritten: a test sets it around one MPI call of one rank): the call
     * fails in every thread but the process's first -- gpuring's worker of non-blocking
     * device calls -- as where the device went unavailable */
    const char *off_main = getenv("CUDACPU_FAIL_SET_DEVICE_OFF_MAIN");
    if (off_main != nullptr && strcmp(off_main, "1") == 0 &&
        (pid_t)syscall(SYS_gettid) != getpid())
        return fail(cudaErrorDevicesUnavailable);
    tls_device = device;
    return ok();
}

extern "C" cudaError_t cudaDeviceReset(void)
{
    device_drain(tls_device); /* allocations stay: nothing here frees them behind a caller */
    return ok();
}

extern "C" cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (prop == nullptr) return fail(cudaErrorInvalidValue);
    if (!device_ok(device)) return fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof(*prop));
    snprintf(prop->name, sizeof(prop->name), "cudacpu H100-like device %d (CPU runtime)", device);
    prop->totalGlobalMem = (size_t)80 << 30;
    prop->sharedMemPerBlock = 48 << 10;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = 1024;
    prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 0x7fffffff;
    prop->maxGridSize[1] = 65535;
    prop->maxGridSize[2] = 65535;
    prop->totalConstMem = 64 << 10;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 132;
    prop->maxThreadsPerMultiProcessor = 2048;
    prop->maxBlocksPerMultiProcessor = 32;
    prop->canMapHostMemory = 1;
    prop->unifiedAddressing = 1;
    prop->concurrentKernels = 1;
    prop->asyncEngineCount = 3;
    prop->l2CacheSize = 50 << 20;
    prop->memoryBusWidth = 5120;
    prop->pciDomainID = knobs_get().pci_domains ? device + 1 : 0;
    prop->pciBusID = knobs_get().pci_domains ? 0 : 0x18 + device;
    prop->pciDeviceID = 0;
    return ok();
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    struct cudaDeviceProp p;

    if (value == nullptr) return fail(cudaErrorInvalidValue);
    if (!device_ok(device)) return fail(cudaErrorInvalidDevice);
    (void)cudaGetDeviceProperties(&p, device);
    if (knobs_get().no_pci &&
        (attr == cudaDevAttrPciBusId || attr == cudaDevAttrPciDeviceId ||
         attr == cudaDevAttrPciDomainId))
        return fail(cudaErrorNotSupported);
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrCanMapHostMemory: *value = 1; break;
    case cudaDevAttrPciBusId: *value = p.pciBusID; break;
    case cudaDevAttrPciDeviceId: *value = p.pciDeviceID; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrUnifiedAddressing: *value = 1; break;
    case cudaDevAttrMemoryPoolsSupported: *value = 1; break; /* cudaMallocAsync's pool */
    case cudaDevAttrPciDomainId: *value = p.pciDomainID; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrGPUDirectRDMASupported: *value = 1; break;
    case cudaDevAttrGPUDirectRDMAFlushWritesOptions:
        *value = cudaFlushGPUDirectRDMAWritesOptionHost | cudaFlushGPUDirectRDMAWritesOptionMemOps;
        break;
    case cudaDevAttrGPUDirectRDMAWritesOrdering:
        *value = cudaGPUDirectRDMAWritesOrderingOwner;
        break;
    case cudaDevAttrMpsEnabled: *value = knobs_get().mps; break;
    default: return fail(cudaErrorInvalidValue);
    }
    return ok();
}

extern "C" cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (version == nullptr) return fail(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return ok();
}

extern "C" cudaError_t cudaDriverGetVersion(int *version)
{
    if (version == nullptr) return fail(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return ok();
}

/* a NIC's writes into "device" memory are ordinary stores of another thread: a fence */
extern "C" cudaError_t cudaDeviceFlushGPUDirectRDMAWrites(
    enum cudaFlushGPUDirectRDMAWritesTarget target, enum cudaFlushGPUDirectRDMAWritesScope scope)
{
    if (target != cudaFlushGPUDirectRDMAWritesTargetCurrentDevice ||
        (scope != cudaFlushGPUDirectRDMAWritesToOwner &&
         scope != cudaFlushGPUDirectRDMAWritesToAllDevices))
        return fail(cudaErrorInvalidValue);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return ok();
}
