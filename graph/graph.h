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

#define GPURING_MAX_CHANNELS 32

typedef struct gpuring_graph {
    int nranks;
    int rank;
    int nnodes;
    int *node;      /* node index of each rank, 0..nnodes-1 */
    int nchannels;
    int *rings;     /* nchannels rows of nranks: ranks in ring order */
    int *ring_pos;  /* nchannels rows of nranks: each rank's position in the ring (the
                       rings' inverse: a root's position without a scan per call) */
    int ring_ix[GPURING_MAX_CHANNELS]; /* this rank's position in each ring */
    int prev[GPURING_MAX_CHANNELS];
    int next[GPURING_MAX_CHANNELS];
    /* trees (seed 004): a chain inside each node in the channel's ring order,
     * node heads joined by the double binary tree, tree (channel % 2) */
    int tree_parent[GPURING_MAX_CHANNELS];   /* rank, -1 at the root */
    int tree_child[GPURING_MAX_CHANNELS][3]; /* ranks, nchild of them */
    int tree_nchild[GPURING_MAX_CHANNELS];
    int tree_depth;                          /* longest root-to-leaf path, in edges */
    /* nchannels rows of nranks: the tree peer toward each rank (kernels/prog.h's peer
     * index: 0 the parent, 1 + i child i), -1 at this rank itself.  A bcast or reduce
     * rooted at r flows over the channel's tree seen as undirected: each rank receives
     * from (bcast) or sends to (reduce) its peer toward r.  Every rank derives its row
     * from the same rings and nodes, so the rows agree. */
    signed char *tree_toward;
} gpuring_graph_t;

/* ---- topo.c: the machine, from hwloc (seed 002's topology, NCCL's paths) --- */

/* How far apart two ranks of a node are: NCCL's path classes. */
typedef enum {
    GPURING_PATH_LOC = 0, /* same device (several ranks on one GPU, or the same NUMA
                             node for ranks without a GPU) */
    GPURING_PATH_PIX = 1, /* through one PCI switch */
    GPURING_PATH_PXB = 2, /* through several PCI switches, same host bridge */
    GPURING_PATH_PHB = 3, /* through a host bridge (the CPU) of one socket */
    GPURING_PATH_SYS = 4, /* across sockets (the SMP interconnect) */
    GPURING_PATH_COUNT
} gpuring_path_t;

const char *gpuring_path_name(gpuring_path_t path);

/* Where a rank sits in its node, as it publishes it (fixed size, plain bytes). */
#define GPURING_BUSID_LEN 16
typedef struct gpuring_topo_loc {
    int32_t numa;                    /* NUMA node holding its CPU binding, -1 unknown */
    int32_t package;                 /* package holding it (os index), -1 unknown;
                                        known where numa is not for a binding to a
                                        package of several NUMA nodes */
    int32_t nic;                     /* index of the nearest NIC in the topology, -1 none */
    char gpu_busid[GPURING_BUSID_LEN]; /* "0000:07:00.0", "" without a GPU */
} gpuring_topo_loc_t;

typedef struct gpuring_topo gpuring_topo_t;

/*
 * Load the topology: from an hwloc XML file when xml_path is non-NULL and
 * non-empty (tests describe machines that are not here), else this machine.
 * The process keeps one loaded topology per path; gpuring_graph_topo_finalize()
 * frees them.
 */
gpuring_status_t gpuring_graph_topo_get(const char *xml_path, gpuring_topo_t **topo_p);
void gpuring_graph_topo_finalize(void);

/*
 * This process's location.  gpu_busid: the GPU the rank uses, NULL or "" for
 * none; with a topology loaded from XML and no GPU given, fake_gpu >= 0
 * picks the fake_gpu-th GPU of the XML (tests: local rank i -> GPU i).
 */
void gpuring_graph_topo_local(gpuring_topo_t *topo, const char *gpu_busid, int fake_gpu,
                              gpuring_topo_loc_t *loc);
/*
 * Where a process without a GPU bound to the CPUs `cpus` (a list as "0-3,8") would
 * sit: loc's numa, package and nic, by the rules gpuring_graph_topo_local applies to
 * this process's binding (tests: bindings on an XML machine).  INVALID for a string
 * hwloc's list syntax refuses (one it reads as no CPUs, as "", places nowhere: -1s).
 */
gpuring_status_t gpuring_graph_topo_cpus_place(gpuring_topo_t *topo, const char *cpus,
                                               gpuring_topo_loc_t *loc);
/*
 * Where a rank's progress thread should run (DESIGN: near the GPU/NIC, as NCCL's
 * proxy thread): the CPUs of `binding` (a CPU list; NULL: the calling thread's, which
 * a thread it starts inherits) that hwloc places near the rank's GPU (loc->gpu_busid),
 * else its NIC (loc->nic, where its place -- loc->numa or package -- chose one) --
 * those of the first CPU-side object above the device: its NUMA node's, package's,
 * or the machine's.  GPURING_OK with that list in cpus (len bytes) where it is a part
 * of the binding; else GPURING_ERR_NOT_SUPPORTED (the thread stays on the binding:
 * none of it is near, all of it is, no device is known, or the topology is an XML
 * file's and binding NULL), INVALID for an unreadable binding.  why (why_len bytes)
 * says which, for the log: "near its GPU 0000:07:00.0, inside its binding 0-15".
 * Inside the binding only, as NCCL: a rank bound away from its GPU (Slurm's cgroup,
 * an explicit --cpu-bind) keeps its threads where it was put.
 */
#define GPURING_CPU_LIST_LEN 1024 /* room for a CPU list (cpus above) */
gpuring_status_t gpuring_graph_topo_thread_cpus(gpuring_topo_t *topo,
                                                const gpuring_topo_loc_t *loc,
                                                const char *binding, char *cpus, size_t len,
                                                char *why, size_t why_len);
/* The path class between two locations on the same node. */
gpuring_path_t gpuring_graph_topo_path(gpuring_topo_t *topo, const gpuring_topo_loc_t *a,
                                       const gpuring_topo_loc_t *b);
/* Number of GPUs / NICs the topology has (fixtures, tools). */
int gpuring_graph_topo_ngpus(gpuring_topo_t *topo);
int gpuring_graph_topo_nnics(gpuring_topo_t *topo);
/* The busid of the i-th GPU, "" if none. */
const char *gpuring_graph_topo_gpu_busid(gpuring_topo_t *topo, int i);

/* ---- ring_order.c: intra-node ring orders per channel (seed 002) ---------- */
/*
 * Order the nlocal ranks of one node into a ring for each channel: neighbours
 * as close as the path classes allow (dist is nlocal x nlocal, row-major),
 * channels starting from different ranks so their recv/send ranks (the
 * node's edges to the network) differ.  order: nchannels rows of nlocal
 * local indices.  Deterministic: every rank of the node computes the same.
 */
gpuring_status_t gpuring_graph_ring_order(const gpuring_path_t *dist, int nlocal, int nchannels,
                                          int *order);

/* ---- tree.c: binary trees over nodes (seed 004, NCCL's btree/dtree) ------- */
/*
 * The btree of n nodes: node's parent (-1 for the root) and up to two
 * children (-1 where absent).
 */
void gpuring_graph_btree(int n, int node, int *parent_p, int *child0_p, int *child1_p);
/*
 * The double binary tree: tree 0 is the btree; tree 1 is its mirror
 * (n even) or shift (n odd), so that a node is an inner node in at most one
 * of the two (for odd n, except node 0, with one child in each).
 * parent/child as for the btree, [tree] indexed.
 */
void gpuring_graph_dtree(int n, int node, int parent_p[2], int child0_p[2], int child1_p[2]);

/* ---- graph.c -------------------------------------------------------------- */
/*
 * Setup runs in three steps, the middle one exchanged between them (NCCL's
 * graph info allgather):
 *   init          group ranks into (virtual) nodes
 *   local_order   this rank's position in its node's ring, per channel, from
 *                 the path classes between the node's ranks (pos[nchannels])
 *   connect       rings and trees from every rank's positions (nranks rows of
 *                 nchannels; NULL: rank order)
 * build = init + connect(NULL), for tests and the simulation.
 */
gpuring_status_t gpuring_graph_init(const gpuring_peer_info_t *peers, int nranks, int rank,
                                    int ranks_per_node, int nchannels, gpuring_graph_t *graph);
/* On a machine from an XML file (coll_gpuring_topo_xml: tests), where no rank has a GPU
 * of it: every rank's location (nranks), the i-th rank of its node in the
 * communicator's order playing the XML's i-th GPU (modulo their number). */
gpuring_status_t gpuring_graph_xml_locs(const gpuring_graph_t *graph, gpuring_topo_t *topo,
                                        gpuring_topo_loc_t *locs);
gpuring_status_t gpuring_graph_local_order(const gpuring_graph_t *graph, gpuring_topo_t *topo,
                                           const gpuring_topo_loc_t *locs, int32_t *pos);
gpuring_status_t gpuring_graph_connect(gpuring_graph_t *graph, const int32_t *pos);
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
    GPURING_ALGO_GATHER = 1, /* ring allgather folded on arrival: small calls */
    GPURING_ALGO_TREE = 2,   /* reduce up, broadcast down the (double) binary tree */
} gpuring_algo_t;

/* How steps move on shared-memory connections (proxy/conn.h). */
typedef enum {
    GPURING_PROTO_AUTO = -1,
    GPURING_PROTO_SIMPLE = 0, /* data in the slot, then the tail counter */
    GPURING_PROTO_LL = 1,     /* a flag in every 8-byte unit: small steps */
} gpuring_proto_t;
/* GPURING_PROTO_* for a name (auto, simple, ll); -2 if unknown. */
int gpuring_proto_from_name(const char *name);

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

/* Which collective a call is: its family of step programs and, here, the
 * bytes it moves.  `count` is the whole buffer's elements, but for
 * reduce-scatter and allgather each rank's block's. */
typedef enum {
    GPURING_COLL_ALLREDUCE = 0,      /* ring, gather, tree: prog_*_allreduce.h */
    GPURING_COLL_REDUCE_SCATTER = 1, /* prog_ring_reduce_scatter.h */
    GPURING_COLL_ALLGATHER = 2,      /* prog_ring_allgather.h */
    GPURING_COLL_BCAST = 3,          /* prog_ring_bcast.h, prog_tree_bcast.h */
    GPURING_COLL_REDUCE = 4,         /* prog_ring_reduce.h, prog_tree_reduce.h */
    GPURING_COLL_COUNT
} gpuring_coll_kind_t;

/* Does the collective's count name each rank's block (reduce-scatter, allgather)? */
static inline int gpuring_coll_blocks(gpuring_coll_kind_t coll)
{
    return coll == GPURING_COLL_REDUCE_SCATTER || coll == GPURING_COLL_ALLGATHER;
}

/* Lowercase names, for logs ("reduce_scatter"). */
extern const char *const gpuring_coll_names[GPURING_COLL_COUNT];

typedef struct gpuring_tuning_params {
    gpuring_coll_kind_t coll; /* which collective (zero: allreduce) */
    gpuring_algo_t algo; /* AUTO, or forced (allreduce; bcast and reduce: ring or tree;
                            reduce-scatter and allgather run on rings) */
    int trees;           /* tree connections usable (not failed) */
    int nchannels;      /* 0: auto, else forced (<= max_channels) */
    int max_channels;   /* channels the plane has connections for (0: the graph's) */
    int device;         /* the device plane (CUDA executor, one block per channel) */
    size_t chunk_bytes; /* 0: auto (a slot), else forced (<= slot) */
    size_t slot_bytes;
    gpuring_proto_t proto; /* AUTO, or forced (LL only where the executor has it) */
} gpuring_tuning_params_t;

typedef struct gpuring_plan {
    gpuring_algo_t algo;
    int ordered;        /* GATHER: fold in ring order (needs nranks rows of scratch) */
    int nchannels;      /* channels used by this call */
    size_t chunk_elems; /* elements per slot step */
    int ll;             /* GPURING_PROTO_LL on the connections that have it */
} gpuring_plan_t;

/*
 * Allreduce: the algorithm of least modelled cost; bcast and reduce: the
 * cheaper of their ring chain and the tree rooted at the call's root
 * (prog_tree_bcast.h, prog_tree_reduce.h; a forced gather runs the chain).
 * Reduce-scatter and allgather run their ring program; their channels
 * follow the bytes they move (reduce-scatter and allgather: every rank's
 * block), and the protocol the same size limits as allreduce's.
 * order_free: the reduction gives the same bits whatever order ranks fold
 * inputs in (integer types: a float MIN/MAX keeps its first operand on a tie
 * of +0 and -0, even with 2 ranks); otherwise GATHER folds in
 * ring order from a scratch of nranks * bytes, at most
 * GPURING_TUNING_SCRATCH_MAX.
 */
#define GPURING_TUNING_SCRATCH_MAX (1024 * 1024)
void gpuring_tuning_plan(const gpuring_graph_t *graph, const gpuring_tuning_params_t *params,
                         size_t count, size_t elem_size, int order_free, gpuring_plan_t *plan);
/* The model's estimate, in microseconds, of one algorithm of collective `coll` (allreduce,
 * or bcast and reduce: RING their chain) for `bytes` (tools, tests). */
double gpuring_tuning_cost(const gpuring_graph_t *graph, gpuring_coll_kind_t coll,
                           gpuring_algo_t algo, size_t bytes);

#endif /* GPURING_GRAPH_GRAPH_H */
