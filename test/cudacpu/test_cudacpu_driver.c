/*
 * test_cudacpu_driver.c -- the CUDA CPU runtime's stand-in driver
 * (cudacpu_driver.c, libcuda.so.1) seen through gpuring's own driver
 * queries: kernels/memkind.c must classify the runtime's memory as it
 * classifies a real driver's, and kernels/device_cuda.c must save and restore
 * the current device through cuCtxGetCurrent / cuCtxSetCurrent.
 *
 * Before the first CUDA call no driver is loaded and everything is host
 * memory; after it, cudaMalloc memory is device memory of the device that
 * was current (two devices: CUDACPU_DEVICES=2 is set here), with its range,
 * a buffer id of its own and IPC capability; cudaHostAlloc, cudaHostRegister
 * and malloc memory is host memory; another process's cudaMalloc memory
 * opened by IPC handle is device memory that cannot be exported again;
 * cudaMallocAsync memory is device memory and cudaMallocManaged memory managed
 * memory, neither exportable; freed or closed memory is host memory again.
 * A failed CUDA call of gpuring's leaves no error for the application's next
 * cudaGetLastError; a copy back into a context made, destroyed and made again at
 * the same handle uses no stream of the dead one.  And kernels/devcopy.c's block copies (staging) through it, a result's back into
 * device memory and a sparse input's out of it: a run of equal blocks at one stride
 * is one 2D copy (cuMemcpy2DAsync), the bytes between the rows untouched.
 *
 * CUDACPU_DRIVER must name the stand-in (run_cudacpu_tests.sh sets it); else
 * "SKIP" and exit 77.  The last line is "N passed, N failed".
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/devcopy.h"
#include "kernels/device.h"
#include "kernels/memkind.h"
#include "test/gpu/gpu_test.h"

#define T_BYTES 100000
#define T_ALARM_SEC 60

/* the child: exports one allocation, waits for the parent to have looked at it */
static int exporter_main(int to_parent, int from_parent)
{
    cudaIpcMemHandle_t h;
    void *d = NULL;
    char go;

    alarm(T_ALARM_SEC);
    if (cudaMalloc(&d, T_BYTES) != cudaSuccess || cudaIpcGetMemHandle(&h, d) != cudaSuccess)
        memset(&h, 0, sizeof(h));
    if (unit_write_all(to_parent, &h, sizeof(h)) != 0) return 1;
    if (unit_read_all(from_parent, &go, 1, T_ALARM_SEC * 1000) != 0) return 1;
    return cudaFree(d) == cudaSuccess ? 0 : 1;
}

static void expect_kind(const void *p, gpuring_mem_kind_t want, int want_dev, const char *what)
{
    int dev = -2;
    gpuring_mem_kind_t k = gpuring_mem_kind(p, &dev);

    unit_result(k == want && dev == want_dev, "%s: %s on device %d, want %s on %d", what,
                gpuring_mem_kind_name(k), dev, gpuring_mem_kind_name(want), want_dev);
}

/* gpuring_devcopy_blocks between device memory d (T_BYTES) and a host image: 100 rows of
 * 8 bytes at a 24-byte pitch and a block of 5 bytes alone, `back` into d (every other
 * byte of d keeps what it had) or out of it (every other byte of the image keeps its) */
static void test_copy_rows(char *d, int back)
{
    enum { ROWS = 100, WIDTH = 8, PITCH = 24, LONE = 4000, LONE_BYTES = 5 };
    static char img[T_BYTES], got[T_BYTES], src[T_BYTES];
    const char *way = back ? "copy back" : "copy in";
    gpuring_devcopy_block_t blk[2] = {
        {.dst = d + 8, .src = img + 8, .bytes = WIDTH, .rows = ROWS, .pitch = PITCH},
        {.dst = d + LONE, .src = img + LONE, .bytes = LONE_BYTES, .rows = 1},
    };
    unsigned long long rows0, copies0, rows1, copies1;
    const char *why = "";
    gpuring_status_t st;
    int wrong = 0;

    for (int i = 0; i < T_BYTES; i++) src[i] = (char)(i * 7 + 3);
    if (back) {
        memcpy(img, src, T_BYTES);
        TEST_CUDA(cudaMemset(d, 0x11, T_BYTES));
    } else {
        memset(img, 0x11, T_BYTES);
        TEST_CUDA(cudaMemcpy(d, src, T_BYTES, cudaMemcpyHostToDevice));
        for (int i = 0; i < 2; i++) {
            void *dst = blk[i].dst;

            blk[i].dst = (void *)blk[i].src;
            blk[i].src = dst;
        }
    }
    gpuring_devcopy_block_counts(back, &rows0, &copies0);
    st = gpuring_devcopy_blocks(blk, 2, back, 0, &why);
    gpuring_devcopy_block_counts(back, &rows1, &copies1);
    unit_result(st == GPURING_OK, "gpuring_devcopy_blocks (%s): %s (%s)", way,
                gpuring_status_str(st), why);
    unit_result(rows1 - rows0 == ROWS + 1 && copies1 - copies0 == 2,
                "%s of %d rows and a block: %llu rows in %llu copies, want %d in 2", way, ROWS,
                rows1 - rows0, copies1 - copies0, ROWS + 1);
    if (back) TEST_CUDA(cudaMemcpy(got, d, T_BYTES, cudaMemcpyDeviceToHost));
    else memcpy(got, img, T_BYTES);
    for (int i = 0; i < T_BYTES; i++) {
        int in_row = i >= 8 && i < 8 + ROWS * PITCH && (i - 8) % PITCH < WIDTH;
        int in_lone = i >= LONE && i < LONE + LONE_BYTES;

        wrong += got[i] != (in_row || in_lone ? src[i] : 0x11);
    }
    unit_result(wrong == 0, "%s of rows: %d bytes wrong (rows, the block, or between)", way,
                wrong);
}

/* A context of the application's own (cuCtxCreate, as PyCUDA makes), a result copied
 * back into memory allocated there, the context destroyed -- twice, the second context
 * getting the first one's handle (the stand-in driver's, as a real driver's heap may):
 * the copy back must not use the first context's stream, which died with it (the
 * stand-in driver aborts on such a use). */
static void test_ctx_reuse(void)
{
    int (*ctx_create)(void **, unsigned int, int);
    int (*ctx_destroy)(void *);
    int (*mem_alloc)(uintptr_t *, size_t);
    int (*mem_free)(uintptr_t);
    char img[256], got[256];
    void *ctx[2] = {NULL, NULL};

    *(void **)&ctx_create = gpuring_cuda_driver_sym("cuCtxCreate_v2");
    *(void **)&ctx_destroy = gpuring_cuda_driver_sym("cuCtxDestroy_v2");
    *(void **)&mem_alloc = gpuring_cuda_driver_sym("cuMemAlloc_v2");
    *(void **)&mem_free = gpuring_cuda_driver_sym("cuMemFree_v2");
    if (ctx_create == NULL || ctx_destroy == NULL || mem_alloc == NULL || mem_free == NULL) {
        unit_result(0, "the stand-in driver lacks the context calls");
        return;
    }
    for (int round = 0; round < 2; round++) {
        const char *why = "";
        uintptr_t d = 0;

        for (int i = 0; i < (int)sizeof(img); i++) img[i] = (char)(i * 3 + round);
        unit_result(ctx_create(&ctx[round], 0, 0) == 0 && mem_alloc(&d, sizeof(img)) == 0,
                    "round %d: a context of its own and memory in it", round);
        unit_result(gpuring_devcopy_back((void *)d, img, sizeof(img), 0, &why) == GPURING_OK &&
                        gpuring_devcopy(got, (void *)d, sizeof(got), 0, &why) == GPURING_OK &&
                        memcmp(img, got, sizeof(img)) == 0,
                    "round %d: the copy back into it and out again (%s)", round, why);
        (void)mem_free(d);
        (void)ctx_destroy(ctx[round]);
    }
    unit_result(ctx[0] == ctx[1], "the second context got the first one's handle (%p, %p)",
                ctx[0], ctx[1]);
    TEST_CUDA(cudaSetDevice(0));
}

int main(void)
{
    int to_child[2], to_parent[2], status = -1, dev = -1, n = 0;
    char *d0, *d1, *dd, *pool, *managed, *host, *pinned, go = 1;
    cudaIpcMemHandle_t h;
    gpuring_mem_range_t r, r1;
    gpuring_device_saved_t saved;
    void *peer = NULL;
    pid_t pid;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("CUDACPU_DRIVER") == NULL) {
        printf("SKIP: CUDACPU_DRIVER does not name the stand-in libcuda.so.1\n");
        return 77;
    }
    setenv("CUDACPU_DEVICES", "2", 1);
    host = malloc(T_BYTES);
    if (host == NULL || pipe(to_child) != 0 || pipe(to_parent) != 0) gpu_test_exit();
    pid = fork(); /* before any CUDA call, as with a real runtime */
    if (pid == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        _exit(exporter_main(to_parent[1], to_child[0]));
    }
    close(to_child[0]);
    close(to_parent[1]);
    alarm(T_ALARM_SEC);

    /* no CUDA call yet: no driver in the process */
    unit_result(gpuring_cuda_driver_sym("cuPointerGetAttribute") == NULL,
                "the driver is loaded before the first CUDA call");
    expect_kind(host, GPURING_MEM_HOST, -1, "malloc memory, no driver");

    TEST_CUDA(cudaGetDeviceCount(&n));
    unit_result(n == 2, "%d devices, want 2", n);
    unit_result(gpuring_cuda_driver_sym("cuPointerGetAttribute") != NULL,
                "the runtime did not load the stand-in driver");

    TEST_CUDA(cudaSetDevice(0));
    TEST_CUDA(cudaMalloc((void **)&d0, T_BYTES));
    TEST_CUDA(cudaMalloc((void **)&dd, T_BYTES));
    TEST_CUDA(cudaSetDevice(1));
    TEST_CUDA(cudaMalloc((void **)&d1, T_BYTES));
    TEST_CUDA(cudaHostAlloc((void **)&pinned, T_BYTES, cudaHostAllocMapped));
    TEST_CUDA(cudaHostRegister(host, T_BYTES, cudaHostRegisterMapped));

    expect_kind(d0, GPURING_MEM_DEVICE, 0, "cudaMalloc on device 0");
    expect_kind(d0 + T_BYTES - 1, GPURING_MEM_DEVICE, 0, "cudaMalloc on device 0, last byte");
    expect_kind(d1 + 17, GPURING_MEM_DEVICE, 1, "cudaMalloc on device 1");
    expect_kind(pinned, GPURING_MEM_HOST, -1, "cudaHostAlloc memory");
    expect_kind(host, GPURING_MEM_HOST, -1, "cudaHostRegister memory");
    expect_kind(&n, GPURING_MEM_HOST, -1, "a stack variable");

    unit_result(gpuring_mem_range(d0 + 1000, &r) == 0 && r.base == (uintptr_t)d0 &&
                    r.bytes == T_BYTES && r.ipc_capable && r.buffer_id != 0,
                "range of d0 + 1000: base %#lx (want %p), %zu bytes, ipc %d, id %llu",
                (unsigned long)r.base, (void *)d0, r.bytes, r.ipc_capable,
                (unsigned long long)r.buffer_id);
    unit_result(gpuring_mem_range(dd, &r1) == 0 && r1.buffer_id != r.buffer_id,
                "two allocations share buffer id %llu", (unsigned long long)r1.buffer_id);

    /* stream-ordered pool memory: device memory that CUDA IPC cannot share */
    TEST_CUDA(cudaMallocAsync((void **)&pool, T_BYTES, 0));
    TEST_CUDA(cudaStreamSynchronize(0));
    expect_kind(pool + 3, GPURING_MEM_DEVICE, 1, "cudaMallocAsync on device 1");
    unit_result(gpuring_mem_range(pool + 3, &r1) == 0 && r1.base == (uintptr_t)pool &&
                    r1.bytes == T_BYTES && !r1.ipc_capable,
                "range of pool memory: base %#lx (want %p), %zu bytes, ipc %d",
                (unsigned long)r1.base, (void *)pool, r1.bytes, r1.ipc_capable);
    unit_result(cudaIpcGetMemHandle(&h, pool) != cudaSuccess,
                "cudaIpcGetMemHandle shares pool memory");
    (void)cudaGetLastError();
    TEST_CUDA(cudaFreeAsync(pool, 0));
    TEST_CUDA(cudaStreamSynchronize(0));
    expect_kind(pool, GPURING_MEM_HOST, -1, "freed pool memory");

    /* managed memory: its own kind, of the device current at the allocation, which
     * CUDA IPC cannot share */
    TEST_CUDA(cudaMallocManaged((void **)&managed, T_BYTES, cudaMemAttachGlobal));
    expect_kind(managed + T_BYTES - 1, GPURING_MEM_MANAGED, 1, "cudaMallocManaged on device 1");
    unit_result(gpuring_mem_range(managed, &r1) == 0 && r1.base == (uintptr_t)managed &&
                    !r1.ipc_capable,
                "range of managed memory: base %#lx (want %p), ipc %d",
                (unsigned long)r1.base, (void *)managed, r1.ipc_capable);
    unit_result(cudaIpcGetMemHandle(&h, managed) != cudaSuccess,
                "cudaIpcGetMemHandle shares managed memory");
    (void)cudaGetLastError();
    TEST_CUDA(cudaFree(managed));
    expect_kind(managed, GPURING_MEM_HOST, -1, "freed managed memory");

    /* the application's device survives gpuring's switch */
    TEST_CUDA(cudaSetDevice(0));
    saved = gpuring_device_save();
    unit_result(saved.valid, "gpuring_device_save: no context");
    unit_result(gpuring_device_use(1) == GPURING_OK, "gpuring_device_use(1)");
    TEST_CUDA(cudaGetDevice(&dev));
    unit_result(dev == 1, "after gpuring_device_use(1): device %d", dev);
    gpuring_device_restore(saved);
    TEST_CUDA(cudaGetDevice(&dev));
    unit_result(dev == 0, "after gpuring_device_restore: device %d, want 0", dev);

    /* a CUDA call of gpuring's that fails is reported by gpuring, and taken off the
     * thread's last error: the application's next cudaGetLastError must not see it */
    {
        unsigned char junk[GPURING_DEVICE_SHARE_BYTES];
        void *mapped = NULL;
        cudaError_t left;

        memset(junk, 0x5c, sizeof(junk));
        unit_result(gpuring_device_open_shared(junk, &mapped) != GPURING_OK,
                    "gpuring_device_open_shared opened a handle of junk");
        left = cudaGetLastError();
        unit_result(left == cudaSuccess, "a failed call of gpuring's left %s for the "
                    "application's next cudaGetLastError", cudaGetErrorName(left));
    }

    /* another process's allocation */
    if (unit_read_all(to_parent[0], &h, sizeof(h), T_ALARM_SEC * 1000) != 0) {
        unit_result(0, "the exporting process sent no handle");
        gpu_test_exit();
    }
    TEST_CUDA(cudaIpcOpenMemHandle(&peer, h, cudaIpcMemLazyEnablePeerAccess));
    expect_kind((char *)peer + 5, GPURING_MEM_DEVICE, 0, "IPC-mapped memory");
    unit_result(gpuring_mem_range(peer, &r) == 0 && r.base == (uintptr_t)peer &&
                    r.bytes == T_BYTES && !r.ipc_capable,
                "range of the IPC mapping: %zu bytes, ipc %d", r.bytes, r.ipc_capable);
    TEST_CUDA(cudaIpcCloseMemHandle(peer));
    expect_kind(peer, GPURING_MEM_HOST, -1, "a closed IPC mapping");
    unit_write_all(to_child[1], &go, 1);
    waitpid(pid, &status, 0);
    unit_result(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exporter status %d", status);

    test_copy_rows(d0, 1);
    test_copy_rows(d0, 0);
    test_ctx_reuse();
    TEST_CUDA(cudaFree(d0));
    expect_kind(d0, GPURING_MEM_HOST, -1, "freed device memory");
    TEST_CUDA(cudaFree(d1));
    TEST_CUDA(cudaFree(dd));
    TEST_CUDA(cudaFreeHost(pinned));
    TEST_CUDA(cudaHostUnregister(host));
    free(host);
    return unit_report();
}
