/*
 * fake_cuda.h -- for MPI test programs on machines without a GPU: load the
 * stand-in CUDA driver (fake_cuda_driver.c, built as fake_cuda/libcuda.so.1)
 * and make host buffers pass for device or managed memory, so the component
 * under test takes its device-buffer branch.  Header-only (static functions).
 *
 * Kinds (what this rank's send and receive buffers are said to be):
 *   device    both device memory of GPU 0
 *   managed   both managed memory of GPU 0
 *   nogpu     both device memory, but the driver names no GPU for it
 *   senddev   send buffer device memory, receive buffer host memory
 *   rank0     device memory on world rank 0, host memory elsewhere
 * The buffers really are host memory, so any component that treats them as
 * such computes the right result.
 */
#ifndef GPURING_TEST_FAKE_CUDA_H
#define GPURING_TEST_FAKE_CUDA_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

enum { FAKE_CU_MEMORYTYPE_DEVICE = 2 };

static struct {
    int (*mark)(const void *, size_t, unsigned int, int, int);
    int (*ctx_get)(void **);
    int (*ctx_set)(void *);
    void *app_ctx; /* what the test made current: every call must leave it so */
} fake_cu;

/*
 * spec: "PATH" or "PATH:KIND" (default kind device).  Marks [send, +bytes)
 * and [recv, +bytes) as the kind says for world rank `rank`, and makes a
 * context of the test's own current.  0, or -1 with err filled.
 */
static int fake_cuda_setup(char *spec, int rank, const void *send, const void *recv,
                           size_t bytes, char *err, size_t errlen)
{
    char *colon = strrchr(spec, ':');
    const char *kind = "device";
    void *lib;
    int send_dev = 1, recv_dev = 1, managed = 0, ordinal = 0, rc = 0;

    if (colon != NULL) {
        *colon = '\0';
        kind = colon + 1;
    }
    if (!strcmp(kind, "managed")) {
        managed = 1;
    } else if (!strcmp(kind, "nogpu")) {
        ordinal = -1;
    } else if (!strcmp(kind, "senddev")) {
        recv_dev = 0;
    } else if (!strcmp(kind, "rank0")) {
        send_dev = recv_dev = rank == 0;
    } else if (strcmp(kind, "device") != 0) {
        snprintf(err, errlen, "unknown fake memory kind %s", kind);
        return -1;
    }
    lib = dlopen(spec, RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        snprintf(err, errlen, "cannot dlopen %s (%s)", spec, dlerror());
        return -1;
    }
    *(void **)&fake_cu.mark = dlsym(lib, "fake_cuda_mark");
    *(void **)&fake_cu.ctx_get = dlsym(lib, "cuCtxGetCurrent");
    *(void **)&fake_cu.ctx_set = dlsym(lib, "cuCtxSetCurrent");
    if (fake_cu.mark == NULL || fake_cu.ctx_get == NULL || fake_cu.ctx_set == NULL) {
        snprintf(err, errlen, "%s is not the fake CUDA driver", spec);
        return -1;
    }
    if (send_dev) rc |= fake_cu.mark(send, bytes, FAKE_CU_MEMORYTYPE_DEVICE, managed, ordinal);
    if (recv_dev) rc |= fake_cu.mark(recv, bytes, FAKE_CU_MEMORYTYPE_DEVICE, managed, ordinal);
    fake_cu.app_ctx = (void *)&fake_cu; /* any value the component cannot make up */
    rc |= fake_cu.ctx_set(fake_cu.app_ctx);
    if (rc != 0) snprintf(err, errlen, "cannot mark the buffers");
    return rc != 0 ? -1 : 0;
}

/* 1 if the calling thread's current context is still the test's. */
static int fake_cuda_ctx_kept(void)
{
    void *cur = NULL;

    return fake_cu.ctx_get == NULL || (fake_cu.ctx_get(&cur) == 0 && cur == fake_cu.app_ctx);
}

#endif /* GPURING_TEST_FAKE_CUDA_H */
