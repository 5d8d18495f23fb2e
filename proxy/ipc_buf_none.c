/*
 * ipc_buf_none.c -- proxy/ipc_buf.h in a build without the CUDA toolkit:
 * nothing can be exported or mapped (device buffers never get this far,
 * see kernels/device.h).
 */
#include <string.h>

#include "proxy/ipc_buf.h"

gpuring_status_t gpuring_ipc_buf_export(const void *ptr, gpuring_ipc_buf_t *buf_p)
{
    memset(buf_p, 0, sizeof(*buf_p));
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_ipc_buf_open(uint64_t peer_key, int peer_rank,
                                      const gpuring_ipc_buf_t *buf, size_t need, void **ptr_p,
                                      int *token_p)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

void gpuring_ipc_buf_release(int token)
{
}

void gpuring_ipc_buf_set_cache(int mappings)
{
}

void gpuring_ipc_buf_finalize(void)
{
}
