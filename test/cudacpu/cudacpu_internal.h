/*
 * cudacpu_internal.h -- what the CUDA CPU runtime's parts share (test/cudacpu):
 * the knobs, the per-thread error state, the current device, the pointer
 * query of the stand-in driver, and stream enqueueing.
 */
#ifndef CUDACPU_INTERNAL_H
#define CUDACPU_INTERNAL_H

#include <stdint.h>

#include <functional>

#include "include/cuda_runtime.h"
#include "test/cudacpu/cudacpu_driver_link.h"

/* built with AddressSanitizer (the sanitizer flavor, test/sanitize): the fibers
 * announce their switches, device memory gets a poisoned tail */
#if defined(__SANITIZE_ADDRESS__)
#define CUDACPU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDACPU_ASAN 1
#endif
#endif
#ifdef CUDACPU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace cudacpu {

/* ---- knobs (environment, read once) --------------------------------------------- */
enum fiber_order { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM };

struct knobs {
    fiber_order order;    /* CUDACPU_FIBER_ORDER=forward|reverse|random[:SEED] */
    uint64_t seed;        /* of random */
    unsigned max_blocks;  /* CUDACPU_MAX_BLOCKS: blocks of one launch running at once */
    unsigned poll_yield;  /* CUDACPU_POLL_YIELD: yield every Nth poll pause (0 never) */
    int devices;          /* CUDACPU_DEVICES: device count */
    size_t fiber_stack;   /* CUDACPU_FIBER_STACK_KB, in bytes */
    int poison;           /* CUDACPU_POISON: new device memory's ends 0xa5 (default 1) */
    int poison_device;    /* CUDACPU_POISON_DEVICE: under ASan, device memory poisoned whole
                             for the host (default 0; cudacpu_kernel.h) */
    int mps;              /* CUDACPU_MPS: cudaDevAttrMpsEnabled (default 1: the fibers of
                             every process run at once, as MPS clients' kernels do) */
    int pci_domains;      /* CUDACPU_PCI_DOMAINS: 1 puts device d on PCI domain d + 1, bus 0
                             (VMs that give each GPU a domain of its own); default 0: domain
                             0, bus 0x18 + d */
    const char *driver;   /* CUDACPU_DRIVER: path of the stand-in libcuda.so.1 to load */
    int no_pci;           /* CUDACPU_NO_PCI: 1 refuses the PCI attributes (cudaDeviceGetAttribute:
                             a device that cannot say where it sits) */
};
const knobs &knobs_get();
/* once, at the first device call or allocation: loads CUDACPU_DRIVER */
void runtime_init();

/* ---- errors: every entry point returns through this -------------------------------- */
cudaError_t fail(cudaError_t err);
inline cudaError_t ok()
{
    return cudaSuccess;
}

/* ---- devices ---------------------------------------------------------------------- */
int current_device();
/* a complaint on stderr, once per message text, for misuse the API cannot return */
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- memory ---------------------------------------------------------------------- */
void pointer_info(const void *ptr, cudacpu_ptr_info_t *info_p);

/* ---- streams --------------------------------------------------------------------- */
/* Queue fn on stream s (NULL, cudaStreamLegacy, cudaStreamPerThread: the current
 * device's legacy default stream). */
cudaError_t stream_enqueue(cudaStream_t s, std::function<void()> fn);
/* From an operation running on its stream: it failed (err), as a GPU's copy or kernel
 * may after it was queued -- the stream's next cudaStreamQuery or cudaStreamSynchronize
 * once it is idle returns err (then the stream is clean again). */
void stream_op_fail(cudaError_t err);
/* Queue fn on the legacy default stream and wait until it ran. */
cudaError_t stream_run_sync(std::function<void()> fn);
/* Wait until every stream of `device` is idle. */
void device_drain(int device);

} /* namespace cudacpu */

#endif /* CUDACPU_INTERNAL_H */
