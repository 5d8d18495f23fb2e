/*
 * device_none.c -- kernels/device.h and kernels/exec_cuda.h in a build
 * without the CUDA toolkit: gpuring_device_built() is 0 and the rest is
 * refused, so device buffers go to the component below.
 */
#include "kernels/device.h"
#include "kernels/exec_cuda.h"

int gpuring_device_built(void)
{
    return 0;
}

gpuring_device_saved_t gpuring_device_save(void)
{
    gpuring_device_saved_t s = {0, NULL};
    return s;
}

void gpuring_device_restore(gpuring_device_saved_t saved)
{
}

gpuring_status_t gpuring_device_event_record_default(void **event_p)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_device_stream_wait(void *stream, void *event)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_device_event_wait(void *event, double timeout_sec)
{
    (void)timeout_sec;
    return GPURING_ERR_NOT_SUPPORTED;
}

void gpuring_device_event_destroy(void *event)
{
}

gpuring_status_t gpuring_device_use(int device)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_device_stream_create(void **stream_p)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_device_stream_idle(void *stream, double timeout)
{
    (void)stream;
    (void)timeout;
    return GPURING_OK;
}

void gpuring_device_stream_destroy(void *stream)
{
}

gpuring_status_t gpuring_device_alloc(size_t bytes, void **ptr_p)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_device_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

void gpuring_device_free(void *ptr)
{
}

gpuring_status_t gpuring_device_alloc_ordered(size_t bytes, void *stream, void **ptr_p)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

void gpuring_device_free_ordered(void *ptr, void *stream)
{
}

gpuring_status_t gpuring_device_alloc_shared(size_t bytes, size_t zero_bytes, double timeout,
                                             void **ptr_p,
                                             unsigned char handle[GPURING_DEVICE_SHARE_BYTES])
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_device_open_shared(const unsigned char handle[GPURING_DEVICE_SHARE_BYTES],
                                            void **ptr_p)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

void gpuring_device_close_shared(void *ptr)
{
}

int gpuring_device_mps(int device)
{
    return 0;
}

int64_t gpuring_device_pci_id(int device)
{
    return -1;
}

int gpuring_device_current(void)
{
    return -1;
}

gpuring_device_writes_t gpuring_device_remote_writes(int device)
{
    return GPURING_DEVICE_WRITES_UNORDERED;
}

gpuring_status_t gpuring_device_flush_remote_writes(void)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_exec_cuda_run(const gpuring_exec_args_t *args, void *stream)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_exec_cuda_abandon(const gpuring_exec_args_t *args, void *stream)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_exec_cuda_direct(const gpuring_exec_direct_args_t *args, void *stream)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_exec_cuda_direct_ll(const gpuring_exec_direct_ll_args_t *args,
                                             void *stream)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_exec_cuda_direct_ll_abandon(const gpuring_exec_direct_ll_args_t *args,
                                                     void *stream)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_exec_cuda_capacity(int *blocks_p)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_exec_cuda_init(void)
{
    return GPURING_ERR_NOT_SUPPORTED;
}
