/*
 * conn_cuda.c -- connection ends a GPU kernel drives (proxy/conn.h).
 *
 * IPC: the receiver's FIFO (ctrl page, then slots: gpuring_conn_attach's
 * layout) is one cudaMalloc allocation of its current device; the sender,
 * another process of the node, opens it from the IPC handle published in
 * the connection handle (cudaIpcMemLazyEnablePeerAccess: a different GPU
 * of the node is reached peer to peer).  The kernel on each side writes
 * and polls it directly -- NCCL's P2P transport with the slots in the
 * receiver's memory.
 *
 * Mapped: a NET end's FIFO is host memory the proxy thread reads and UCX
 * writes; registered with cudaHostRegister(Mapped) the kernel reaches it
 * over PCIe/C2C, which is NCCL's pinned host staging (seed 003).  With
 * GPU-direct slots (conn->slots_device) only the ctrl page is host memory,
 * and only it is mapped.
 */
#include <assert.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"
#include "kernels/device.h"
#include "proxy/conn.h"

static_assert(sizeof(cudaIpcMemHandle_t) == GPURING_IPC_HANDLE_BYTES, "IPC handle size");
static_assert(GPURING_DEVICE_SHARE_BYTES == GPURING_IPC_HANDLE_BYTES, "IPC handle size");

gpuring_status_t gpuring_conn_ipc_recv_create(gpuring_conn_t *conn, int peer, int channel,
                                              size_t slot_bytes, double timeout,
                                              gpuring_conn_handle_t *handle_p)
{
    const size_t bytes = gpuring_conn_fifo_bytes(GPURING_CONN_IPC, slot_bytes);
    unsigned char ipc[GPURING_DEVICE_SHARE_BYTES];
    void *fifo = NULL;

    /* zeroed where it must be before any sender can open it (the handle goes out later) */
    GPURING_CHECK(gpuring_device_alloc_shared(bytes, gpuring_conn_fifo_zero_bytes(GPURING_CONN_IPC),
                                              timeout, &fifo, ipc));
    gpuring_conn_attach(conn, GPURING_CONN_IPC, GPURING_CONN_RECV, peer, channel, slot_bytes,
                        fifo);
    conn->ipc_fifo = fifo;
    gpuring_conn_handle_init(conn, handle_p);
    memcpy(handle_p->where.ipc, ipc, sizeof(ipc));
    GPURING_DEBUG(GPURING_SUBSYS_PROXY, "ipc recv from rank %d channel %d: %zu B device FIFO",
                  peer, channel, bytes);
    return GPURING_OK;
}

gpuring_status_t gpuring_conn_ipc_send_connect(gpuring_conn_t *conn, int peer, int channel,
                                               const gpuring_conn_handle_t *remote)
{
    cudaIpcMemHandle_t ipc;
    void *fifo = NULL;
    cudaError_t err;

    if (remote->type != GPURING_CONN_IPC || remote->slot_bytes == 0) {
        GPURING_ERROR(GPURING_SUBSYS_PROXY, "rank %d channel %d published no CUDA IPC FIFO "
                      "(type %d)", peer, channel, (int)remote->type);
        return GPURING_ERR_INVALID;
    }
    memcpy(&ipc, remote->where.ipc, sizeof(ipc));
    err = cudaIpcOpenMemHandle(&fifo, ipc, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        GPURING_ERROR(GPURING_SUBSYS_PROXY, "cannot open rank %d's CUDA IPC FIFO (channel %d): "
                      "%s (%s); may this process reach that rank's GPU (a device cgroup "
                      "per task hides it), and is peer access possible between them?", peer,
                      channel, cudaGetErrorName(err),
                      cudaGetErrorString(err));
        return GPURING_ERR_CUDA;
    }
    gpuring_conn_attach(conn, GPURING_CONN_IPC, GPURING_CONN_SEND, peer, channel,
                        (size_t)remote->slot_bytes, fifo);
    conn->ipc_fifo = fifo;
    GPURING_DEBUG(GPURING_SUBSYS_PROXY, "ipc send to rank %d channel %d: opened its FIFO", peer,
                  channel);
    return GPURING_OK;
}

void gpuring_conn_ipc_destroy(gpuring_conn_t *conn)
{
    if (conn->ipc_fifo == NULL) return;
    /* (the free waits for no kernel of gpuring's that waits for a peer: device.h) */
    if (conn->dir == GPURING_CONN_RECV)
        gpuring_device_free(conn->ipc_fifo);
    else
        gpuring_device_close_shared(conn->ipc_fifo);
    conn->ipc_fifo = NULL;
    conn->slots = NULL;
    conn->ctrl = NULL;
}

gpuring_status_t gpuring_conn_map_device(gpuring_conn_t *conn)
{
    void *host = conn->ctrl, *dev = NULL; /* the FIFO starts with its ctrl page */
    /* through its slots' end, wherever its transport put them (a GPU's NET staging
     * starts on a page: gpuring_conn_net_create) */
    const size_t bytes = conn->slots_device ? sizeof(gpuring_fifo_ctrl_t)
                                            : (size_t)(conn->slots - (char *)host) +
                                                  GPURING_NSTEPS * conn->slot_bytes;
    gpuring_status_t st;

    if (conn->mapped_host != NULL) return GPURING_OK;
    GPURING_CUDA_CHECK(cudaHostRegister(host, bytes,
                                        cudaHostRegisterMapped | cudaHostRegisterPortable));
    GPURING_CUDA_CHECK_GOTO(cudaHostGetDevicePointer(&dev, host, 0), st, out_unregister);
    conn->mapped_host = host;
    conn->ctrl = (gpuring_fifo_ctrl_t *)dev;
    if (!conn->slots_device) conn->slots = (char *)dev + ((char *)conn->slots - (char *)host);
    return GPURING_OK;

out_unregister:
    (void)cudaHostUnregister(host);
    return st;
}

void gpuring_conn_unmap_device(gpuring_conn_t *conn)
{
    char *host = conn->mapped_host;
    cudaError_t err;

    if (host == NULL) return;
    if (!conn->slots_device) conn->slots = host + (conn->slots - (char *)conn->ctrl);
    conn->ctrl = (gpuring_fifo_ctrl_t *)host;
    conn->mapped_host = NULL;
    err = cudaHostUnregister(host);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        GPURING_DEBUG(GPURING_SUBSYS_PROXY, "cudaHostUnregister (rank %d channel %d): %s",
                      conn->peer, conn->channel, cudaGetErrorName(err));
    }
}
