/*
 * cudacpu_launch.cc -- kernel launches on the CUDA CPU runtime (test/cudacpu):
 * cudaLaunchKernel copies the parameters and queues the grid on the stream;
 * the stream's thread runs it with up to CUDACPU_MAX_BLOCKS blocks at once,
 * itself and block workers (OS threads kept in a pool) each taking the next
 * block index until none is left, every block's threads as fibers
 * (cudacpu_fiber.cc).  Also the function attributes, the occupancy query and
 * the device-side poll pause.
 */
#include <sched.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "test/cudacpu/cudacpu_fiber.h"
#include "test/cudacpu/cudacpu_internal.h"

__thread uint3 blockIdx;
__thread dim3 blockDim;
__thread dim3 gridDim;

namespace cudacpu {
namespace {

#define CUDACPU_MAX_THREADS_PER_BLOCK 1024
#define CUDACPU_MAX_THREADS_PER_SM 2048
#define CUDACPU_MAX_BLOCKS_PER_SM 32

/* One launch: the kernel, its geometry, and its own copy of the parameters. */
struct launch {
    const kernel *k;
    dim3 grid, block;
    uint64_t nblocks;
    uint64_t id;                          /* salts the random fiber order */
    std::unique_ptr<unsigned char[]> storage; /* the parameters' copies */
    std::vector<void *> params;
    std::atomic<uint64_t> next{0};        /* the next block to run */
    std::mutex mu;
    std::condition_variable cv;
    unsigned helpers = 0;                 /* block workers still on it */
};

/* every block of l this thread can take */
void launch_take_blocks(launch *l)
{
    for (;;) {
        const uint64_t b = l->next.fetch_add(1, std::memory_order_relaxed);
        if (b >= l->nblocks) return;
        blockIdx.x = (unsigned)(b % l->grid.x);
        blockIdx.y = (unsigned)(b / l->grid.x % l->grid.y);
        blockIdx.z = (unsigned)(b / ((uint64_t)l->grid.x * l->grid.y));
        blockDim = l->block;
        gridDim = l->grid;
        fibers_run_block(
            l->block, [](void *arg) {
                launch *x = static_cast<launch *>(arg);
                x->k->invoke(x->params.data());
            },
            l, l->id * 0x100000001b3ull + b);
    }
}

/* ---- block workers ---------------------------------------------------------------- */
struct block_worker {
    std::mutex mu;
    std::condition_variable cv;
    launch *job = nullptr;
};

/* never destroyed: at exit, idle workers may still wait */
std::mutex &pool_mu = *new std::mutex;
std::vector<block_worker *> &pool_idle = *new std::vector<block_worker *>;

void block_worker_main(block_worker *w)
{
    for (;;) {
        launch *l;
        {
            std::unique_lock<std::mutex> g(w->mu);
            w->cv.wait(g, [w] { return w->job != nullptr; });
            l = w->job;
            w->job = nullptr;
        }
        launch_take_blocks(l);
        {
            std::lock_guard<std::mutex> g(l->mu);
            if (--l->helpers == 0) l->cv.notify_all();
        }
        std::lock_guard<std::mutex> g(pool_mu);
        pool_idle.push_back(w);
    }
}

void block_worker_assign(launch *l)
{
    block_worker *w = nullptr;
    {
        std::lock_guard<std::mutex> g(pool_mu);
        if (!pool_idle.empty()) {
            w = pool_idle.back();
            pool_idle.pop_back();
        }
    }
    if (w == nullptr) {
        w = new block_worker;
        std::thread(block_worker_main, w).detach();
    }
    std::lock_guard<std::mutex> g(w->mu);
    w->job = l;
    w->cv.notify_one();
}

const kernel *kernel_check(const void *func)
{
    const kernel *k = static_cast<const kernel *>(func);
    return k != nullptr && k->magic == CUDACPU_KERNEL_MAGIC ? k : nullptr;
}

/* Run every block of l, on this thread (the stream's) and block workers; return
 * when all are done. */
void grid_run(launch *l)
{
    const uint64_t nworkers = std::min<uint64_t>(l->nblocks, knobs_get().max_blocks);

    l->helpers = (unsigned)(nworkers - 1);
    for (uint64_t i = 1; i < nworkers; i++) block_worker_assign(l);
    launch_take_blocks(l);
    std::unique_lock<std::mutex> g(l->mu);
    l->cv.wait(g, [l] { return l->helpers == 0; });
}

} /* namespace */
} /* namespace cudacpu */

using namespace cudacpu;

extern "C" cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
                                        size_t sharedMem, cudaStream_t stream)
{
    static std::atomic<uint64_t> launches{0};
    const kernel *k = kernel_check(func);
    const uint64_t threads = (uint64_t)block.x * block.y * block.z;
    size_t bytes = 0;

    if (k == nullptr) return fail(cudaErrorInvalidDeviceFunction);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 ||
        threads > CUDACPU_MAX_THREADS_PER_BLOCK || sharedMem > 0)
        return fail(cudaErrorInvalidConfiguration);
    if (k->nparams > 0 && args == nullptr) return fail(cudaErrorInvalidValue);
    /* CUDACPU_FAIL_LAUNCH set, read at every launch (a test sets it around one MPI call of
     * one rank): blocks of more than one thread do not fit, as on a GPU whose SM has
     * fewer registers than the block asks */
    if (threads > 1 && getenv("CUDACPU_FAIL_LAUNCH") != nullptr)
        return fail(cudaErrorLaunchOutOfResources);
    /* CUDACPU_LATE_LAUNCH_MS (read the same way): the kernel starts that long after its
     * stream reaches it, as one queued on a GPU behind work that runs long (the stream
     * waits with it) */
    const char *late = getenv("CUDACPU_LATE_LAUNCH_MS");
    const long late_ms = late != nullptr ? atol(late) : 0;

    auto l = std::make_shared<launch>();
    l->k = k;
    l->grid = grid;
    l->block = block;
    l->nblocks = (uint64_t)grid.x * grid.y * grid.z;
    l->id = launches.fetch_add(1, std::memory_order_relaxed);
    /* the parameters are copied now: the caller may reuse args when this returns */
    for (unsigned i = 0; i < k->nparams; i++) bytes = (bytes + 15) / 16 * 16 + k->sizes[i];
    l->storage.reset(new unsigned char[bytes + 16]);
    unsigned char *base = l->storage.get();
    base += (16 - (uintptr_t)base % 16) % 16;
    bytes = 0;
    for (unsigned i = 0; i < k->nparams; i++) {
        bytes = (bytes + 15) / 16 * 16;
        memcpy(base + bytes, args[i], k->sizes[i]);
        l->params.push_back(base + bytes);
        bytes += k->sizes[i];
    }
    return stream_enqueue(stream, [l, late_ms] {
        if (late_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
        grid_run(l.get());
    });
}

extern "C" cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    const kernel *k = kernel_check(func);

    if (attr == nullptr) return fail(cudaErrorInvalidValue);
    if (k == nullptr) return fail(cudaErrorInvalidDeviceFunction);
    memset(attr, 0, sizeof(*attr));
    attr->maxThreadsPerBlock = CUDACPU_MAX_THREADS_PER_BLOCK;
    attr->numRegs = 32;
    attr->ptxVersion = 90;
    attr->binaryVersion = 90;
    for (unsigned i = 0; i < k->nparams; i++) attr->constSizeBytes += k->sizes[i];
    return ok();
}

extern "C" cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks,
                                                                     const void *func,
                                                                     int blockSize,
                                                                     size_t dynamicSMemSize)
{
    if (numBlocks == nullptr || blockSize <= 0 || blockSize > CUDACPU_MAX_THREADS_PER_BLOCK)
        return fail(cudaErrorInvalidValue);
    if (kernel_check(func) == nullptr) return fail(cudaErrorInvalidDeviceFunction);
    *numBlocks = std::min(CUDACPU_MAX_BLOCKS_PER_SM, CUDACPU_MAX_THREADS_PER_SM / blockSize);
    return ok();
}

/*
 * Inside device poll loops (the product's poll hook): let the writer have the
 * core.  Every CUDACPU_POLL_YIELD-th pause yields; a poller that has paused
 * CUDACPU_POLL_SLEEP_AFTER times since its block's last barrier sleeps a little
 * instead, so that long waits (a peer that is late, or never comes) leave the
 * cores to the blocks that have work.
 */
#define CUDACPU_POLL_SLEEP_AFTER 256
#define CUDACPU_POLL_SLEEP_NS 50000

__thread unsigned cudacpu_polls_since_barrier;

extern "C" void cudacpu_poll_pause(void)
{
    static __thread unsigned polls;
    const unsigned every = knobs_get().poll_yield;

    if (every == 0 || ++polls % every != 0) return;
    if (++cudacpu_polls_since_barrier < CUDACPU_POLL_SLEEP_AFTER) {
        sched_yield();
    } else {
        const struct timespec ts = { 0, CUDACPU_POLL_SLEEP_NS };
        nanosleep(&ts, nullptr);
    }
}
