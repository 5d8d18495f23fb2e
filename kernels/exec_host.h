/*
 * exec_host.h -- the host executor: runs step programs on host memory with
 * the host reduction primitive, over the connections of proxy/.
 *
 * Each channel is an independent program on its own pair of connections.
 * The host has one calling thread, so the executor interleaves the channels:
 * it advances every channel as far as its FIFOs allow, round-robin, and only
 * spins (timed, reporting) when no channel can move.
 */
#ifndef GPURING_KERNELS_EXEC_HOST_H
#define GPURING_KERNELS_EXEC_HOST_H

#include "common/gpuring_common.h"
#include "kernels/prog_ops.h"
#include "kernels/reduce.h"
#include "proxy/conn.h"

struct gpuring_proxy;

typedef struct gpuring_exec_channel {
    gpuring_prog_t prog;
    gpuring_conn_t *send; /* to the next rank in this channel's ring */
    gpuring_conn_t *recv; /* from the previous rank */
    uint64_t next_op;     /* executor state: next operation of prog */
} gpuring_exec_channel_t;

typedef struct gpuring_exec_args {
    const void *sendbuf; /* == recvbuf for in place */
    void *recvbuf;
    size_t count;        /* elements of the whole call */
    gpuring_type_t type;
    gpuring_op_t op;
    int nchannels;
    gpuring_exec_channel_t *channels;
    void *scratch;               /* ordered GATHER: nranks rows of count elements */
    double timeout;              /* seconds without progress before reporting */
    struct gpuring_proxy *proxy; /* NULL when no channel uses a NET connection */
} gpuring_exec_args_t;

/* Run every channel's program to completion. */
gpuring_status_t gpuring_exec_host_run(gpuring_exec_args_t *args);

#endif /* GPURING_KERNELS_EXEC_HOST_H */
