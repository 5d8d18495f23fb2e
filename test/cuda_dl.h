/*
 * cuda_dl.h -- the CUDA runtime for the MPI test programs, opened with
 * dlopen at run time: the programs build and run without CUDA, and need it
 * only when asked for device buffers.  Header-only (static functions).
 *
 * test_cuda_load() opens libcudart and picks the GPU of local rank
 * `local_rank` (round robin: several ranks may share one GPU).
 * test_cuda_alloc() / test_cuda_free(): by `mode`, cudaMalloc
 * (TEST_CUDA_MALLOC), the device's stream-ordered pool (TEST_CUDA_POOL:
 * cudaMallocAsync on the legacy stream, then synchronized: memory CUDA IPC
 * cannot share), or cuMemAlloc in a context of the program's own
 * (TEST_CUDA_OWN_CTX: cuCtxCreate on the device, made current for the rest of
 * the program, as PyCUDA's make_context does: memory that the device's
 * primary context, where the CUDA runtime's kernels run, cannot reach), or
 * cudaMallocManaged (TEST_CUDA_MANAGED: managed memory, attached globally).
 */
#ifndef GPURING_TEST_CUDA_DL_H
#define GPURING_TEST_CUDA_DL_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { TEST_CUDA_H2D = 1, TEST_CUDA_D2H = 2, TEST_CUDA_D2D = 3 }; /* cudaMemcpyKind */
enum { TEST_CUDA_NOT_READY = 600 };                            /* cudaErrorNotReady */
enum { TEST_CUDA_MALLOC = 0, TEST_CUDA_POOL = 1, TEST_CUDA_OWN_CTX = 2, TEST_CUDA_MANAGED = 3 };
enum { TEST_CUDA_MEM_ATTACH_GLOBAL = 1 }; /* cudaMemAttachGlobal */

static struct {
    void *lib;
    int (*malloc_)(void **, size_t);
    int (*free_)(void *);
    int (*memcpy_)(void *, const void *, size_t, int);
    int (*memcpy_async)(void *, const void *, size_t, int, void *); /* NULL: legacy stream */
    int (*stream_query)(void *);
    int (*sync)(void);
    int (*malloc_async)(void **, size_t, void *); /* optional: CUDA 11.2 and newer */
    int (*free_async)(void *, void *);
    int (*malloc_managed)(void **, size_t, unsigned int);
    int (*mem_get_info)(size_t *, size_t *); /* optional */
    int (*set_device)(int);
    int (*get_device_count)(int *);
    const char *(*error_string)(int);
    int (*get_last_error)(void);
    int device; /* the one test_cuda_load picked */
    /* TEST_CUDA_OWN_CTX: the driver (libcuda.so.1, loaded by the runtime) */
    void *own_ctx;
    int (*cu_mem_alloc)(uintptr_t *, size_t);
    int (*cu_mem_free)(uintptr_t);
} cu;

static int test_cuda_load(int local_rank, char *err, size_t errlen)
{
    static const char *names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                  "libcudart.so.11.0", NULL};
    int ndev = 0, rc;

    for (int k = 0; names[k] && !cu.lib; k++) cu.lib = dlopen(names[k], RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib) {
        snprintf(err, errlen, "cannot dlopen libcudart.so (%s)", dlerror());
        return -1;
    }
#define TEST_CUDA_SYM(field, name)                                                          \
    do {                                                                                    \
        *(void **)&cu.field = dlsym(cu.lib, name);                                          \
        if (!cu.field) {                                                                    \
            snprintf(err, errlen, "libcudart lacks %s", name);                              \
            return -1;                                                                      \
        }                                                                                   \
    } while (0)
    TEST_CUDA_SYM(malloc_, "cudaMalloc");
    TEST_CUDA_SYM(free_, "cudaFree");
    TEST_CUDA_SYM(memcpy_, "cudaMemcpy");
    TEST_CUDA_SYM(memcpy_async, "cudaMemcpyAsync");
    TEST_CUDA_SYM(stream_query, "cudaStreamQuery");
    TEST_CUDA_SYM(sync, "cudaDeviceSynchronize");
    TEST_CUDA_SYM(set_device, "cudaSetDevice");
    TEST_CUDA_SYM(get_device_count, "cudaGetDeviceCount");
    TEST_CUDA_SYM(error_string, "cudaGetErrorString");
    TEST_CUDA_SYM(get_last_error, "cudaGetLastError");
#undef TEST_CUDA_SYM
    *(void **)&cu.malloc_async = dlsym(cu.lib, "cudaMallocAsync");
    *(void **)&cu.free_async = dlsym(cu.lib, "cudaFreeAsync");
    *(void **)&cu.malloc_managed = dlsym(cu.lib, "cudaMallocManaged");
    *(void **)&cu.mem_get_info = dlsym(cu.lib, "cudaMemGetInfo");
    rc = cu.get_device_count(&ndev);
    if (rc != 0 || ndev < 1) {
        snprintf(err, errlen, "no CUDA device (cudaGetDeviceCount: %d %s, count %d)", rc,
                 cu.error_string(rc), ndev);
        return -1;
    }
    cu.device = local_rank % ndev;
    rc = cu.set_device(cu.device);
    if (rc != 0) {
        snprintf(err, errlen, "cudaSetDevice(%d): %s", local_rank % ndev, cu.error_string(rc));
        return -1;
    }
    return 0;
}

/* The error this thread's next cudaGetLastError would return (and clears it): an MPI
 * call must leave none behind -- an application that checks cudaGetLastError after its
 * kernels (PyTorch does) would take it as its own.  0 before test_cuda_load. */
static inline int test_cuda_pending_error(void)
{
    return cu.get_last_error != NULL ? cu.get_last_error() : 0;
}

/* test_cuda_load for this process's local rank as mpirun names it
 * (OMPI_COMM_WORLD_LOCAL_RANK; `rank` where it does not) */
static inline int test_cuda_load_local(int rank, char *err, size_t errlen)
{
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");

    return test_cuda_load(lr != NULL ? atoi(lr) : rank, err, errlen);
}

/* TEST_CUDA_OWN_CTX: the program's own context on its device, made current once;
 * 0, or -1 (the driver lacks the calls) or a CUresult */
static inline int test_cuda_own_ctx(void)
{
    void *drv;
    int (*device_get)(int *, int);
    int (*ctx_create)(void **, unsigned int, int);
    int dev = -1, rc;

    if (cu.own_ctx != NULL) return 0;
    drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD); /* the runtime's */
    if (drv == NULL) return -1;
    *(void **)&device_get = dlsym(drv, "cuDeviceGet");
    *(void **)&ctx_create = dlsym(drv, "cuCtxCreate_v2"); /* (CUDA 13's cuCtxCreate is _v4) */
    *(void **)&cu.cu_mem_alloc = dlsym(drv, "cuMemAlloc_v2");
    *(void **)&cu.cu_mem_free = dlsym(drv, "cuMemFree_v2");
    if (device_get == NULL || ctx_create == NULL || cu.cu_mem_alloc == NULL ||
        cu.cu_mem_free == NULL)
        return -1;
    if ((rc = device_get(&dev, cu.device)) != 0) return rc;
    return ctx_create(&cu.own_ctx, 0, dev); /* current from now on */
}

/* 0, or a cudaError_t or CUresult (-1: this CUDA lacks the mode's calls) */
static inline int test_cuda_alloc(void **p, size_t bytes, int mode)
{
    uintptr_t d = 0;
    int rc;

    switch (mode) {
    case TEST_CUDA_POOL:
        if (!cu.malloc_async) return -1;
        rc = cu.malloc_async(p, bytes, NULL);
        return rc != 0 ? rc : cu.sync();
    case TEST_CUDA_MANAGED:
        if (!cu.malloc_managed) return -1;
        return cu.malloc_managed(p, bytes, TEST_CUDA_MEM_ATTACH_GLOBAL);
    case TEST_CUDA_OWN_CTX:
        if ((rc = test_cuda_own_ctx()) != 0 || (rc = cu.cu_mem_alloc(&d, bytes)) != 0) return rc;
        *p = (void *)d;
        return 0;
    default:
        return cu.malloc_(p, bytes);
    }
}

static inline void test_cuda_free(void *p, int mode)
{
    if (mode == TEST_CUDA_POOL && cu.free_async) {
        (void)cu.free_async(p, NULL);
        (void)cu.sync();
    } else if (mode == TEST_CUDA_OWN_CTX && cu.cu_mem_free) {
        (void)cu.cu_mem_free((uintptr_t)p);
    } else {
        (void)cu.free_(p);
    }
}

#endif /* GPURING_TEST_CUDA_DL_H */
