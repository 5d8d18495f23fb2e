/*
 * tuning.c -- how one call runs: algorithm, channels and chunk size for a
 * message size, from a latency + bytes/bandwidth cost model; and the
 * algorithm table.
 *
 * Each algorithm is a number of sequential steps, each costing a link
 * latency, plus the bytes that cross the slowest link it uses:
 *   ring    2(n-1) steps on its slowest link    2(n-1)/n * S bytes
 *   gather  n-1 steps on its slowest link       (n-1) * S bytes
 *   tree    2(depth over nodes) net steps       2 * S bytes (up, then down)
 *           + 2(longest chain) intra-node steps
 * and for bcast and reduce, whose data goes one way from or to the root:
 *   chain   n-1 steps on its slowest link       S bytes (pipelined)
 *   tree    depth over nodes net steps          2 * S bytes (an inner rank sends
 *           + longest chain intra-node steps    to, or reduces from, two peers)
 *           + 1 step on its slowest link        (that second peer's step)
 * (the tree's depth from its own root: a root elsewhere may have farther
 * to go, up to twice that, but the depth is what every rank knows alike
 * and it orders the two where it matters, many nodes against few).  So
 * across nodes the tree takes small messages, the chain large ones; inside
 * one node the tree is a chain too, and the chain keeps it.  On 4 nodes of
 * one rank the two tie (2 + 1 against 3 steps) and the chain keeps them:
 * measured there, the tree is no faster (README, "gpuring's algorithms
 * against each other"); from 8 nodes (3 + 1 against 7) the tree takes them.
 * Links are shared memory inside a node and the network between nodes
 * (virtual nodes included).  The constants are what the host executor
 * measured on the project's 2-core machines; they only need to order the
 * algorithms, not predict times.  GATHER needs the buffer in one slot and,
 * where fold order changes the bits, a scratch of nranks * bytes.  The
 * decision is logged at debug level (subsystem tuning).
 *
 * Channels per call (unless forced), at most what the plane connected:
 *   host    one per GPURING_TUNING_BYTES_PER_CHANNEL of the call: the host
 *           executor's channels share the calling thread, so more only
 *           help when each has a good amount to move.  Across nodes a ring
 *           cuts each block into GPURING_RING_NET_SLICES slot steps, each a
 *           network message with its fixed cost (a rendezvous, a round trip
 *           between the two ranks' progress loops), so a ring channel is
 *           only worth it when its slices fill a slot: nranks * slices *
 *           slot bytes each.  2 ranks as 2 virtual nodes (README): 1 MiB on
 *           one channel (128 KiB steps) took 0.6x the time of two (64 KiB
 *           steps), 2 MiB on one (256 KiB steps) 0.8-0.95x that of two,
 *           512 KiB 1.1x; over UCX's tcp 1 MiB 1.3x, 2 MiB 0.67x.
 *   device  each channel is one thread block, and a block moves what its
 *           memory-level parallelism allows, so a large call needs many
 *           channels to fill the GPU; but every operation of a channel
 *           pays a fixed cost (a wait on the FIFO counters, two barriers,
 *           a system fence and the publish), so a channel is only worth it
 *           when each of its slot steps moves at least a step's worth:
 *           GPURING_TUNING_DEVICE_STEP_BYTES (simple) or
 *           GPURING_TUNING_DEVICE_LL_STEP_BYTES (LL) on one node, about
 *           what a block moves in that fixed cost; across nodes, where a
 *           step is a network message, GPURING_TUNING_DEVICE_NET_STEP_BYTES.
 *           A ring channel with a region of R bytes moves R / nranks per
 *           step (one block of the loop; the slot caps it), a tree channel
 *           min(R, slot): so ring calls take bytes / (nranks * STEP)
 *           channels, tree calls bytes / STEP.
 *
 * On one node the device plane's algorithms are costed with its own
 * constants (device_cost): a step's fixed cost, and a block's rate times
 * the channels the algorithm gets -- the gather runs on one block, the ring
 * on many, so the gather only takes calls a step's fixed costs dominate.
 * Measured on an H100 (2026-11-28, test/gpu/bench_gpu.sh, 2 ranks): the
 * gather on one block took 38.8, 50.3 and 73.7 us at 128, 256 and 512
 * KiB (about 11 GB/s per block), the ring 47.1 us at 1 MiB on 4 channels
 * and 44.0 on 32; LL on one channel 47.1 and 76.7 us at 32 and 64 KiB
 * (about 1.1 GB/s per block), 35.2 and 36.3 on 32 channels.
 */
#include "graph/graph.h"
#include "kernels/prog_ring_allreduce.h" /* GPURING_RING_NET_SLICES */
#include "proxy/conn.h" /* GPURING_LL_STEP_BYTES */

#include <string.h>

#define GPURING_TUNING_BYTES_PER_CHANNEL (256 * 1024)
/* protocol auto: LL for calls up to this size (host plane).  The crossover is the
 * host's (README, Protocols): on an Intel Xeon VM LL took 0.29-0.31 us against
 * simple's 0.43 up to 64 B and was still 1.27x and 1.07x faster at 128 and 256 B;
 * on an AMD EPYC VM LL is 1.07-1.14x faster to 16 B, ties at 32 B and is 0.89,
 * 0.69 and 0.58x simple's speed at 64, 128 and 256 B.  64 B keeps both hosts'
 * largest gains and the smallest losses (0.89x on the EPYC at 64 B, 0.79-0.93x on
 * the Xeon at 128-256 B, against 0.58x on the EPYC at 256 B before) */
#define GPURING_TUNING_LL_MAX_BYTES 64
/* ... and on the device plane (the CUDA executor's LL, IPC FIFOs): NCCL's LL
 * range inside a node.  UNMEASURED: no GPU has run this protocol yet; set it
 * from test/gpu/bench_gpu.sh (coll_gpuring_protocol simple against ll) */
#define GPURING_TUNING_LL_DEVICE_MAX_BYTES (64 * 1024)
/* device plane, one node: a step's fixed cost (us), a block's rate (bytes/us) with
 * each protocol, and the bytes per step that make a channel worth it (about the rate
 * times the fixed cost); between nodes, where a step is a network message */
#define GPURING_TUNING_DEVICE_STEP_LAT 1.5
#define GPURING_TUNING_DEVICE_BLOCK_BW 10000.0
#define GPURING_TUNING_DEVICE_LL_BLOCK_BW 1100.0
#define GPURING_TUNING_DEVICE_STEP_BYTES (32 * 1024)
#define GPURING_TUNING_DEVICE_LL_STEP_BYTES (4 * 1024)
#define GPURING_TUNING_DEVICE_NET_STEP_BYTES (128 * 1024)

/* microseconds per step and bytes per microsecond, per link class */
#define GPURING_TUNING_SHM_LAT 0.6
#define GPURING_TUNING_SHM_BW 6000.0
#define GPURING_TUNING_NET_LAT 6.0
#define GPURING_TUNING_NET_BW 2000.0
/* the tree reduces up to three inputs per step and does not overlap its phases */
#define GPURING_TUNING_TREE_BW_PENALTY 1.2

const gpuring_algo_info_t gpuring_algos[] = {
    {GPURING_ALGO_RING, "ring",
     "ring allreduce: reduce-scatter then allgather, 2(n-1) pipelined steps per channel"},
    {GPURING_ALGO_GATHER, "gather",
     "ring allgather of the whole buffer, folded on arrival (or in ring order where order "
     "matters): n-1 steps, for small messages"},
    {GPURING_ALGO_TREE, "tree",
     "reduce up then broadcast down a binary tree over nodes with a chain inside each node; "
     "even channels use tree 0, odd channels tree 1 of the double binary tree"},
};
const int gpuring_nalgos = sizeof(gpuring_algos) / sizeof(gpuring_algos[0]);

const char *const gpuring_coll_names[GPURING_COLL_COUNT] = {
    "allreduce", "reduce_scatter", "allgather", "bcast", "reduce"};

int gpuring_proto_from_name(const char *name)
{
    if (name == NULL || strcmp(name, "auto") == 0) return GPURING_PROTO_AUTO;
    if (strcmp(name, "simple") == 0) return GPURING_PROTO_SIMPLE;
    if (strcmp(name, "ll") == 0) return GPURING_PROTO_LL;
    return -2;
}

int gpuring_algo_from_name(const char *name)
{
    if (name == NULL || strcmp(name, "auto") == 0) return GPURING_ALGO_AUTO;
    for (int i = 0; i < gpuring_nalgos; i++) {
        if (strcmp(name, gpuring_algos[i].name) == 0) return gpuring_algos[i].id;
    }
    return -2;
}

/* The model's formula: `lat` us per step and `bw` bytes/us on the slowest link the
 * algorithm uses, `inner_lat` per step on a link inside a node (the tree's chains). */
static double model_cost(const gpuring_graph_t *g, gpuring_coll_kind_t coll, gpuring_algo_t algo,
                         double s, double lat, double bw, double inner_lat)
{
    const int n = g->nranks;
    /* bcast and reduce go one way: half the allreduce's steps */
    const double ways = coll == GPURING_COLL_BCAST || coll == GPURING_COLL_REDUCE ? 1.0 : 2.0;
    int node_depth = 0, chain = 0;

    switch (algo) {
    case GPURING_ALGO_GATHER:
        return (n - 1) * lat + (n - 1) * s / bw;
    case GPURING_ALGO_TREE:
        for (int d = 1; d < g->nnodes; d <<= 1) node_depth++;
        chain = g->tree_depth - node_depth > 0 ? g->tree_depth - node_depth : 0;
        return ways * (node_depth * GPURING_TUNING_NET_LAT + chain * inner_lat) +
               (ways == 1.0 ? lat : 0.0) + GPURING_TUNING_TREE_BW_PENALTY * 2.0 * s / bw;
    case GPURING_ALGO_RING:
    default:
        if (ways == 1.0) return (n - 1) * lat + s / bw; /* the chain */
        return 2.0 * (n - 1) * lat + 2.0 * (n - 1) / n * s / bw;
    }
}

double gpuring_tuning_cost(const gpuring_graph_t *g, gpuring_coll_kind_t coll, gpuring_algo_t algo,
                           size_t bytes)
{
    const int net = g->nnodes > 1;

    return model_cost(g, coll, algo, (double)bytes,
                      net ? GPURING_TUNING_NET_LAT : GPURING_TUNING_SHM_LAT,
                      net ? GPURING_TUNING_NET_BW : GPURING_TUNING_SHM_BW, GPURING_TUNING_SHM_LAT);
}

/* The device plane on one node: each of the algorithm's nch channels a block. */
static double device_cost(const gpuring_graph_t *g, gpuring_coll_kind_t coll, gpuring_algo_t algo,
                          size_t bytes, int nch, int ll)
{
    const double bw = (ll ? GPURING_TUNING_DEVICE_LL_BLOCK_BW : GPURING_TUNING_DEVICE_BLOCK_BW) * nch;

    return model_cost(g, coll, algo, (double)bytes, GPURING_TUNING_DEVICE_STEP_LAT, bw,
                      GPURING_TUNING_DEVICE_STEP_LAT);
}

/* The channels `algo` gets for `bytes` moved: the gather one, forced counts as
 * forced, else one per step's worth (the file's header), at most max_ch. */
static int plan_channels(const gpuring_graph_t *graph, const gpuring_tuning_params_t *params,
                         gpuring_algo_t algo, size_t bytes, int ll, int max_ch)
{
    size_t per = GPURING_TUNING_BYTES_PER_CHANNEL;

    if (algo == GPURING_ALGO_GATHER) return 1; /* the whole buffer is one step */
    if (params->nchannels > 0) return GPURING_MIN(params->nchannels, max_ch);
    if (!params->device && graph->nnodes > 1 && algo == GPURING_ALGO_RING &&
        (params->coll == GPURING_COLL_ALLREDUCE || gpuring_coll_blocks(params->coll))) {
        const size_t step = params->chunk_bytes > 0
                                ? GPURING_MIN(params->chunk_bytes, params->slot_bytes)
                                : params->slot_bytes;
        per = GPURING_MAX(per, step * GPURING_RING_NET_SLICES * (size_t)graph->nranks);
    } else if (params->device) {
        per = graph->nnodes > 1 ? GPURING_TUNING_DEVICE_NET_STEP_BYTES
              : ll              ? GPURING_TUNING_DEVICE_LL_STEP_BYTES
                                : GPURING_TUNING_DEVICE_STEP_BYTES;
        /* a slot step of a ring channel moves a block of its region (a region of
         * one rank's block for reduce-scatter and allgather, all of it for the
         * chains) */
        if (algo == GPURING_ALGO_RING &&
            (params->coll == GPURING_COLL_ALLREDUCE || gpuring_coll_blocks(params->coll)))
            per *= (size_t)graph->nranks;
    }
    return (int)GPURING_MAX(1, GPURING_MIN((size_t)max_ch, GPURING_DIV_UP(bytes, per)));
}

void gpuring_tuning_plan(const gpuring_graph_t *graph, const gpuring_tuning_params_t *params,
                         size_t count, size_t elem_size, int order_free, gpuring_plan_t *plan)
{
    const int blocks = gpuring_coll_blocks(params->coll);
    /* the bytes the call moves: every rank's block for reduce-scatter and allgather */
    size_t bytes = count * elem_size * (blocks ? (size_t)graph->nranks : 1);
    const int allreduce = params->coll == GPURING_COLL_ALLREDUCE;
    /* bcast and reduce: their ring chain, or the tree rooted at the call's root */
    const int rooted = params->coll == GPURING_COLL_BCAST || params->coll == GPURING_COLL_REDUCE;
    /* LL: on a graph with edges inside a node (shm or CUDA IPC: net edges stay simple) */
    const int ll_ok = graph->nnodes < graph->nranks;
    const size_t ll_max = params->device ? GPURING_TUNING_LL_DEVICE_MAX_BYTES
                                         : GPURING_TUNING_LL_MAX_BYTES;
    const int ll = ll_ok && (params->proto == GPURING_PROTO_AUTO
                                 ? bytes <= ll_max
                                 : params->proto == GPURING_PROTO_LL);
    size_t chunk_bytes = ll ? GPURING_MIN(params->slot_bytes, GPURING_LL_STEP_BYTES)
                            : params->slot_bytes;
    int gather_ok = bytes <= chunk_bytes &&
                    (order_free || bytes * (size_t)graph->nranks <= GPURING_TUNING_SCRATCH_MAX);
    const int max_ch = params->max_channels > 0
                           ? GPURING_MIN(params->max_channels, graph->nchannels)
                           : graph->nchannels;
    /* one node on the device plane: its own costs, by the channels each algorithm gets */
    const int device_node = params->device && graph->nnodes == 1;
    double cost[3] = {0, 0, 0};

    if (rooted) gather_ok = 0; /* no gather program: forced gather runs the chain */
    if (!allreduce && !rooted) {
        plan->algo = GPURING_ALGO_RING; /* the collective's ring program */
    } else if (params->algo == GPURING_ALGO_AUTO) {
        plan->algo = GPURING_ALGO_RING;
        for (int a = GPURING_ALGO_RING; a <= GPURING_ALGO_TREE; a++) {
            if ((a == GPURING_ALGO_GATHER && !gather_ok) || (a == GPURING_ALGO_TREE && !params->trees)) {
                continue;
            }
            cost[a] = device_node
                          ? device_cost(graph, params->coll, (gpuring_algo_t)a, bytes,
                                        plan_channels(graph, params, (gpuring_algo_t)a, bytes, ll,
                                                      max_ch),
                                        ll)
                          : gpuring_tuning_cost(graph, params->coll, (gpuring_algo_t)a, bytes);
            if (cost[a] < cost[plan->algo]) plan->algo = (gpuring_algo_t)a;
        }
    } else if ((params->algo == GPURING_ALGO_GATHER && !gather_ok) ||
               (params->algo == GPURING_ALGO_TREE && !params->trees)) {
        plan->algo = GPURING_ALGO_RING; /* forced, but impossible for this call */
    } else {
        plan->algo = params->algo;
    }
    if (params->chunk_bytes > 0) chunk_bytes = GPURING_MIN(params->chunk_bytes, chunk_bytes);
    plan->ordered = plan->algo == GPURING_ALGO_GATHER && !order_free;
    plan->ll = ll;
    plan->nchannels = plan_channels(graph, params, plan->algo, bytes, ll, max_ch);
    plan->chunk_elems = GPURING_MAX(1, chunk_bytes / elem_size);
    GPURING_DEBUG(GPURING_SUBSYS_TUNING,
                  "plan: %zu B (%s) -> %s%s%s, %d of %d channels, %zu elems/step (model us: "
                  "ring %.1f gather %.1f tree %.1f; 0 = not considered), %s",
                  bytes, params->device ? "device" : "host", gpuring_algos[plan->algo].name,
                  plan->ordered ? " (ordered)" : "", plan->ll ? " LL" : "", plan->nchannels,
                  max_ch, plan->chunk_elems,
                  cost[0], cost[1], cost[2], gpuring_coll_names[params->coll]);
}
