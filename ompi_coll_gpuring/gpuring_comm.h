/*
 * gpuring_comm.h -- gpuring's per-communicator state and its collectives,
 * with no Open MPI type in sight: coll_gpuring_*.c translate MPI to this.
 *
 * Setup (gpuring_comm_create) is NCCL's initTransportsRank over
 * bootstrap_mpi: peer info allgather -> graph (nodes, rings) -> UCX address
 * allgather when there is more than one node -> connection handle allgather
 * -> connect -> agreement.  Every rank takes part in every exchange even
 * after a local failure, and the final agreement makes the result
 * all-or-nothing, so a failed setup never leaves a rank waiting.
 */
#ifndef GPURING_COMM_H
#define GPURING_COMM_H

#include "bootstrap_mpi/bootstrap.h"
#include "graph/graph.h"
#include "kernels/exec_host.h"
#include "kernels/reduce.h"
#include "proxy/conn.h"
#include "proxy/proxy.h"

typedef struct gpuring_comm_config {
    gpuring_algo_t algo;   /* AUTO or forced */
    int nchannels;         /* channels set up (each call may use fewer) */
    int call_nchannels;    /* 0: tuned per call, else forced */
    size_t slot_bytes;
    size_t chunk_bytes;    /* 0: one slot */
    double wait_timeout;   /* seconds */
    int ranks_per_node;    /* 0: real hosts */
} gpuring_comm_config_t;

typedef struct gpuring_comm {
    gpuring_comm_config_t cfg;
    gpuring_bootstrap_t boot;
    gpuring_graph_t graph;
    uint64_t uid;            /* unique among this process's communicators: tags */
    gpuring_proxy_t *proxy;  /* set when this rank has a NET connection */
    int broken;              /* a collective failed midway: refuse further calls */
    gpuring_conn_t send[GPURING_MAX_CHANNELS];
    gpuring_conn_t recv[GPURING_MAX_CHANNELS];
    gpuring_exec_channel_t exec[GPURING_MAX_CHANNELS];
    void *scratch;           /* ordered GATHER rows, grown on demand */
    size_t scratch_bytes;
} gpuring_comm_t;

gpuring_status_t gpuring_comm_create(const gpuring_comm_config_t *cfg,
                                     const gpuring_bootstrap_t *boot, gpuring_comm_t **comm_p);
void gpuring_comm_destroy(gpuring_comm_t *comm);

/* Blocking allreduce; sendbuf == recvbuf means in place. */
gpuring_status_t gpuring_comm_allreduce(gpuring_comm_t *comm, const void *sendbuf,
                                        void *recvbuf, size_t count, gpuring_type_t type,
                                        gpuring_op_t op);

/* One line describing the communicator, for the "ready" log. */
void gpuring_comm_describe(const gpuring_comm_t *comm, char *buf, size_t len);

#endif /* GPURING_COMM_H */
