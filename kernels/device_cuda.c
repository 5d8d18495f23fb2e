/*
 * device_cuda.c -- kernels/device.h over the CUDA runtime.
 */
#include "kernels/device.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"

int gpuring_device_built(void)
{
    return 1;
}

gpuring_status_t gpuring_device_use(int device)
{
    int cur = -1;

    if (cudaGetDevice(&cur) == cudaSuccess && cur == device) return GPURING_OK;
    GPURING_CUDA_CHECK(cudaSetDevice(device));
    return GPURING_OK;
}

gpuring_status_t gpuring_device_stream_create(void **stream_p)
{
    cudaStream_t s;

    GPURING_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *stream_p = s;
    return GPURING_OK;
}

void gpuring_device_stream_destroy(void *stream)
{
    cudaError_t err;

    if (stream == NULL) return;
    err = cudaStreamDestroy((cudaStream_t)stream);
    if (err != cudaSuccess) {
        /* at teardown the context may already be gone (cudaDeviceReset) */
        GPURING_DEBUG(GPURING_SUBSYS_KERNEL, "cudaStreamDestroy: %s", cudaGetErrorName(err));
        (void)cudaGetLastError();
    }
}

gpuring_status_t gpuring_device_alloc(size_t bytes, void **ptr_p)
{
    GPURING_CUDA_CHECK(cudaMalloc(ptr_p, bytes));
    return GPURING_OK;
}

void gpuring_device_free(void *ptr)
{
    cudaError_t err;

    if (ptr == NULL) return;
    err = cudaFree(ptr);
    if (err != cudaSuccess) {
        GPURING_DEBUG(GPURING_SUBSYS_KERNEL, "cudaFree: %s", cudaGetErrorName(err));
        (void)cudaGetLastError();
    }
}

gpuring_device_writes_t gpuring_device_remote_writes(int device)
{
    int ordering = 0, flush = 0;

    if (cudaDeviceGetAttribute(&ordering, cudaDevAttrGPUDirectRDMAWritesOrdering, device) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&flush, cudaDevAttrGPUDirectRDMAFlushWritesOptions, device) !=
            cudaSuccess) {
        (void)cudaGetLastError();
        return GPURING_DEVICE_WRITES_UNORDERED;
    }
    if (ordering >= cudaGPUDirectRDMAWritesOrderingOwner) return GPURING_DEVICE_WRITES_ORDERED;
    return (flush & cudaFlushGPUDirectRDMAWritesOptionHost) ? GPURING_DEVICE_WRITES_FLUSH
                                                            : GPURING_DEVICE_WRITES_UNORDERED;
}

gpuring_status_t gpuring_device_flush_remote_writes(void)
{
    GPURING_CUDA_CHECK(cudaDeviceFlushGPUDirectRDMAWrites(
        cudaFlushGPUDirectRDMAWritesTargetCurrentDevice, cudaFlushGPUDirectRDMAWritesToOwner));
    return GPURING_OK;
}
