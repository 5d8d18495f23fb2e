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
    const char *topo_xml;  /* hwloc XML to use instead of this machine ("" or NULL: this one) */
} gpuring_comm_config_t;

/* What a connection is for; together with peer, channel and direction it
 * names the connection on both ends. */
typedef enum {
    GPURING_EDGE_RING = 0,      /* ring: to next / from prev */
    GPURING_EDGE_TREE_UP = 1,   /* tree: child -> parent (reduce) */
    GPURING_EDGE_TREE_DOWN = 2, /* tree: parent -> child (broadcast) */
} gpuring_edge_kind_t;

typedef struct gpuring_comm_edge {
    int peer;
    int channel;
    gpuring_conn_dir_t dir;
    gpuring_edge_kind_t kind;
} gpuring_comm_edge_t;

/* Edges one rank can have per channel: ring next and prev, tree parent both
 * ways, and up to three children both ways. */
#define GPURING_COMM_EDGES_PER_CHANNEL (2 + 2 + 2 * 3)

typedef struct gpuring_comm {
    gpuring_comm_config_t cfg;
    gpuring_bootstrap_t boot;
    gpuring_graph_t graph;
    uint64_t uid;            /* unique among this process's communicators: tags */
    int uid_claimed;         /* uid registered as live in this process */
    gpuring_proxy_t *proxy;  /* set when this rank has a NET connection */
    int broken;              /* a collective failed midway: refuse further calls */
    /* connections, one per edge; ring edges at setup, tree edges at first use */
    int nconns;
    gpuring_comm_edge_t edges[GPURING_MAX_CHANNELS * GPURING_COMM_EDGES_PER_CHANNEL];
    gpuring_conn_t conns[GPURING_MAX_CHANNELS * GPURING_COMM_EDGES_PER_CHANNEL];
    int tree_state;          /* 0 not connected, 1 connected, -1 failed: ring only */
    char *peer_addrs;        /* UCX worker addresses (stride apart), for later edges */
    size_t addr_stride;
    gpuring_peer_info_t *peers;
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

/* What this process ran through gpuring, for the closing summary. */
typedef struct gpuring_comm_stats {
    uint64_t calls[3]; /* per gpuring_algo_t: ring, gather, tree */
    uint64_t bytes;
} gpuring_comm_stats_t;

void gpuring_comm_stats_get(gpuring_comm_stats_t *stats);

/* One line describing the communicator, for the "ready" log. */
void gpuring_comm_describe(const gpuring_comm_t *comm, char *buf, size_t len);

#endif /* GPURING_COMM_H */
