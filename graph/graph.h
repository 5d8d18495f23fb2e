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
typedef struct gpuring_tuning_params {
    int nchannels;      /* 0: auto, else forced (<= graph's) */
    size_t chunk_bytes; /* 0: auto (a slot), else forced (<= slot) */
    size_t slot_bytes;
} gpuring_tuning_params_t;

typedef struct gpuring_plan {
    int nchannels;      /* channels used by this call */
    size_t chunk_elems; /* elements per slot step */
} gpuring_plan_t;

void gpuring_tuning_plan(const gpuring_graph_t *graph, const gpuring_tuning_params_t *params,
                         size_t count, size_t elem_size, gpuring_plan_t *plan);

#endif /* GPURING_GRAPH_GRAPH_H */
