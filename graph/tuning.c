/*
 * tuning.c -- how one call runs: channels and chunk size for a message size.
 *
 * A channel is worth its synchronization only when it carries enough data:
 * below GPURING_TUNING_BYTES_PER_CHANNEL per channel the call uses fewer
 * channels.  The chunk is one slot unless forced smaller.  (The latency +
 * bandwidth cost model that picks between algorithms comes with the trees.)
 */
#include "graph/graph.h"

#define GPURING_TUNING_BYTES_PER_CHANNEL (256 * 1024)

void gpuring_tuning_plan(const gpuring_graph_t *graph, const gpuring_tuning_params_t *params,
                         size_t count, size_t elem_size, gpuring_plan_t *plan)
{
    size_t bytes = count * elem_size;
    size_t chunk_bytes = params->slot_bytes;
    int nch = params->nchannels > 0 ? GPURING_MIN(params->nchannels, graph->nchannels)
                                    : graph->nchannels;

    if (params->nchannels <= 0) {
        size_t useful = GPURING_DIV_UP(bytes, GPURING_TUNING_BYTES_PER_CHANNEL);
        nch = (int)GPURING_MAX(1, GPURING_MIN((size_t)nch, useful));
    }
    if (params->chunk_bytes > 0) chunk_bytes = GPURING_MIN(params->chunk_bytes, chunk_bytes);
    plan->nchannels = nch;
    plan->chunk_elems = GPURING_MAX(1, chunk_bytes / elem_size);
    GPURING_TRACE(GPURING_SUBSYS_TUNING, "plan: %zu B -> ring, %d channels, %zu elems/step",
                  bytes, plan->nchannels, plan->chunk_elems);
}
