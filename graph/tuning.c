/*
 * tuning.c -- how one call runs: algorithm, channels and chunk size for a
 * message size, and the algorithm table.
 *
 * GATHER moves the whole buffer n-1 times but in n-1 steps; RING moves 1/n
 * of it 2(n-1) times.  Per step a transfer costs a latency; below
 * GPURING_TUNING_GATHER_MAX bytes the latency dominates and GATHER wins
 * (at 2 ranks both move the same bytes, but RING pipelines).  GATHER needs the
 * buffer in one slot; where fold order matters it keeps every input and folds
 * them in ring order, which costs a scratch of nranks * bytes.
 * A channel is worth its synchronization only when it carries enough
 * data: below GPURING_TUNING_BYTES_PER_CHANNEL per channel the call uses
 * fewer.  The chunk is one slot unless forced smaller.  (The latency +
 * bandwidth model over link classes comes with the trees.)
 */
#include "graph/graph.h"

#include <string.h>

#define GPURING_TUNING_BYTES_PER_CHANNEL (256 * 1024)
#define GPURING_TUNING_GATHER_MAX (8 * 1024)

const gpuring_algo_info_t gpuring_algos[] = {
    {GPURING_ALGO_RING, "ring",
     "ring allreduce: reduce-scatter then allgather, 2(n-1) pipelined steps per channel"},
    {GPURING_ALGO_GATHER, "gather",
     "ring allgather of the whole buffer, folded on arrival (or in ring order where order "
     "matters): n-1 steps, for small messages"},
};
const int gpuring_nalgos = sizeof(gpuring_algos) / sizeof(gpuring_algos[0]);

int gpuring_algo_from_name(const char *name)
{
    if (name == NULL || strcmp(name, "auto") == 0) return GPURING_ALGO_AUTO;
    for (int i = 0; i < gpuring_nalgos; i++) {
        if (strcmp(name, gpuring_algos[i].name) == 0) return gpuring_algos[i].id;
    }
    return -2;
}

void gpuring_tuning_plan(const gpuring_graph_t *graph, const gpuring_tuning_params_t *params,
                         size_t count, size_t elem_size, int order_free, gpuring_plan_t *plan)
{
    size_t bytes = count * elem_size;
    size_t chunk_bytes = params->slot_bytes;
    int gather_ok = bytes <= params->slot_bytes &&
                    (order_free || bytes * (size_t)graph->nranks <= GPURING_TUNING_SCRATCH_MAX);
    int nch = params->nchannels > 0 ? GPURING_MIN(params->nchannels, graph->nchannels)
                                    : graph->nchannels;

    if (params->algo == GPURING_ALGO_GATHER && gather_ok) {
        plan->algo = GPURING_ALGO_GATHER;
    } else if (params->algo == GPURING_ALGO_AUTO && gather_ok &&
               bytes <= GPURING_TUNING_GATHER_MAX) {
        plan->algo = GPURING_ALGO_GATHER;
    } else {
        plan->algo = GPURING_ALGO_RING;
    }
    if (plan->algo == GPURING_ALGO_GATHER) {
        nch = 1; /* the whole buffer is one step */
    } else if (params->nchannels <= 0) {
        size_t useful = GPURING_DIV_UP(bytes, GPURING_TUNING_BYTES_PER_CHANNEL);
        nch = (int)GPURING_MAX(1, GPURING_MIN((size_t)nch, useful));
    }
    if (params->chunk_bytes > 0) chunk_bytes = GPURING_MIN(params->chunk_bytes, chunk_bytes);
    plan->ordered = plan->algo == GPURING_ALGO_GATHER && !order_free;
    plan->nchannels = nch;
    plan->chunk_elems = GPURING_MAX(1, chunk_bytes / elem_size);
    GPURING_TRACE(GPURING_SUBSYS_TUNING, "plan: %zu B -> %s, %d channels, %zu elems/step",
                  bytes, gpuring_algos[plan->algo].name, plan->nchannels, plan->chunk_elems);
}
