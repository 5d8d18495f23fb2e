/*
 * conn_cuda_none.c -- the CUDA connection ends of proxy/conn.h in a build
 * without the CUDA toolkit: refused (device buffers never reach them, see
 * kernels/device.h).
 */
#include "proxy/conn.h"

gpuring_status_t gpuring_conn_ipc_recv_create(gpuring_conn_t *conn, int peer, int channel,
                                              size_t slot_bytes, double timeout,
                                              gpuring_conn_handle_t *handle_p)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

gpuring_status_t gpuring_conn_ipc_send_connect(gpuring_conn_t *conn, int peer, int channel,
                                               const gpuring_conn_handle_t *remote)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

void gpuring_conn_ipc_destroy(gpuring_conn_t *conn)
{
}

gpuring_status_t gpuring_conn_map_device(gpuring_conn_t *conn)
{
    return GPURING_ERR_NOT_SUPPORTED;
}

void gpuring_conn_unmap_device(gpuring_conn_t *conn)
{
}
