/*
 * cuda_dl.h -- the CUDA runtime for the MPI test programs, opened with
 * dlopen at run time: the programs build and run without CUDA, and need it
 * only when asked for device buffers.  Header-only (static functions).
 *
 * test_cuda_load() opens libcudart and picks the GPU of local rank
 * `local_rank` (round robin: several ranks may share one GPU).
 * test_cuda_alloc() / test_cuda_free(): cudaMalloc, or with `pool` the
 * device's stream-ordered pool (cudaMallocAsync on the legacy stream, then
 * synchronized): memory CUDA IPC cannot share.
 */
#ifndef GPURING_TEST_CUDA_DL_H
#define GPURING_TEST_CUDA_DL_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

enum { TEST_CUDA_H2D = 1, TEST_CUDA_D2H = 2, TEST_CUDA_D2D = 3 }; /* cudaMemcpyKind */
enum { TEST_CUDA_NOT_READY = 600 };                            /* cudaErrorNotReady */

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
    int (*set_device)(int);
    int (*get_device_count)(int *);
    const char *(*error_string)(int);
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
#undef TEST_CUDA_SYM
    *(void **)&cu.malloc_async = dlsym(cu.lib, "cudaMallocAsync");
    *(void **)&cu.free_async = dlsym(cu.lib, "cudaFreeAsync");
    rc = cu.get_device_count(&ndev);
    if (rc != 0 || ndev < 1) {
        snprintf(err, errlen, "no CUDA device (cudaGetDeviceCount: %d %s, count %d)", rc,
                 cu.error_string(rc), ndev);
        return -1;
    }
    rc = cu.set_device(local_rank % ndev);
    if (rc != 0) {
        snprintf(err, errlen, "cudaSetDevice(%d): %s", local_rank % ndev, cu.error_string(rc));
        return -1;
    }
    return 0;
}

/* test_cuda_load for this process's local rank as mpirun names it
 * (OMPI_COMM_WORLD_LOCAL_RANK; `rank` where it does not) */
static inline int test_cuda_load_local(int rank, char *err, size_t errlen)
{
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");

    return test_cuda_load(lr != NULL ? atoi(lr) : rank, err, errlen);
}

/* 0, or a cudaError_t (-1: this libcudart has no pool) */
static inline int test_cuda_alloc(void **p, size_t bytes, int pool)
{
    int rc;

    if (!pool) return cu.malloc_(p, bytes);
    if (!cu.malloc_async) return -1;
    rc = cu.malloc_async(p, bytes, NULL);
    return rc != 0 ? rc : cu.sync();
}

static inline void test_cuda_free(void *p, int pool)
{
    if (pool && cu.free_async) {
        (void)cu.free_async(p, NULL);
        (void)cu.sync();
    } else {
        (void)cu.free_(p);
    }
}

#endif /* GPURING_TEST_CUDA_DL_H */
