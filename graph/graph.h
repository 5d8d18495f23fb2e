/*
 * graph.h -- who is where, and the rings over them (seed 002).
 *
 * Ranks are grouped into nodes by host hash (or into virtual nodes of
 * `ranks_per_node` consecutive ranks of a host, a test knob that makes one
 * machine look like several).  A ring visits the ranks of a node together,
 * so each node has one edge in and one edge out: intra-node edges use shared
 * memory, the node-to-node edges use the network.
 */
#ifndef GPURING_GRAPH_GRAPH_H
#define GPURING_GRAPH_GRAPH_H

#include <stddef.h>
#include "bootstrap_mpi/bootstrap.h"
#include "common/gpuring_common.h"

#define GPURING_MAX_CHANNELS 16

typedef struct gpuring_graph {
    int nranks;
    int rank;
    int nnodes;
    int *node;      /* node index of each rank, 0..nnodes-1 */
    int nchannels;
    int *rings;     /* nchannels rows of nranks: ranks in ring order */
    int ring_ix[GPURING_MAX_CHANNELS]; /* this rank's position in each ring */
    int prev[GPURING_MAX_CHANNELS];
    int next[GPURING_MAX_CHANNELS];
} gpuring_graph_t;

/* ---- topo.c: this process's place in the machine (hwloc) ----------------- */
/* NUMA node this process is bound to, -1 if not bound to one or unknown. */
int gpuring_graph_topo_local_numa(void);
void gpuring_graph_topo_finalize(void);

/* ---- graph.c -------------------------------------------------------------- */
/* Group ranks into (virtual) nodes and build nchannels rings. */
gpuring_status_t gpuring_graph_build(const gpuring_peer_info_t *peers, int nranks, int rank,
                                     int ranks_per_node, int nchannels,
                                     gpuring_graph_t *graph);
void gpuring_graph_free(gpuring_graph_t *graph);
/* Every ring holds every rank exactly once; logs what is wrong otherwise. */
gpuring_status_t gpuring_graph_rings_check(const gpuring_graph_t *graph);

/* ---- tuning.c: how to run one call ---------------------------------------- */
typedef enum {
    GPURING_ALGO_AUTO = -1,
    GPURING_ALGO_RING = 0,   /* ring allreduce: reduce-scatter + allgather */
    GPURING_ALGO_GATHER = 1, /* ring allgather + local fold: small, order-free calls */
} gpuring_algo_t;

/* The algorithm table: id, name, what it is. */
typedef struct gpuring_algo_info {
    gpuring_algo_t id;
    const char *name;
    const char *description;
} gpuring_algo_info_t;

extern const gpuring_algo_info_t gpuring_algos[];
extern const int gpuring_nalgos;
/* GPURING_ALGO_* for a name ("auto" included); -2 if unknown. */
int gpuring_algo_from_name(const char *name);

typedef struct gpuring_tuning_params {
    gpuring_algo_t algo; /* AUTO, or forced */
    int nchannels;      /* 0: auto, else forced (<= graph's) */
    size_t chunk_bytes; /* 0: auto (a slot), else forced (<= slot) */
    size_t slot_bytes;
} gpuring_tuning_params_t;

typedef struct gpuring_plan {
    gpuring_algo_t algo;
    int ordered;        /* GATHER: fold in ring order (needs nranks rows of scratch) */
    int nchannels;      /* channels used by this call */
    size_t chunk_elems; /* elements per slot step */
} gpuring_plan_t;

/*
 * order_free: the reduction gives the same bits whatever order ranks fold
 * inputs in (integer ops, MIN/MAX, or 2 ranks); otherwise GATHER folds in
 * ring order from a scratch of nranks * bytes, at most
 * GPURING_TUNING_SCRATCH_MAX.
 */
#define GPURING_TUNING_SCRATCH_MAX (1024 * 1024)
void gpuring_tuning_plan(const gpuring_graph_t *graph, const gpuring_tuning_params_t *params,
                         size_t count, size_t elem_size, int order_free, gpuring_plan_t *plan);

#endif /* GPURING_GRAPH_GRAPH_H */
