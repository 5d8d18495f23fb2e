/*
 * topo.c -- this process's place in the machine, from hwloc.  The topology
 * is loaded once per process and kept until the component closes.
 */
#include "graph/graph.h"

#include <hwloc.h>
#include <pthread.h>

static pthread_mutex_t topo_lock = PTHREAD_MUTEX_INITIALIZER;
static hwloc_topology_t topo;
static int topo_loaded;

static int topo_load(void)
{
    if (topo_loaded) return topo_loaded > 0;
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
        GPURING_WARN(GPURING_SUBSYS_GRAPH, "hwloc could not load the topology; NUMA unknown");
        topo_loaded = -1;
        return 0;
    }
    topo_loaded = 1;
    return 1;
}

int gpuring_graph_topo_local_numa(void)
{
    int numa = -1;
    hwloc_bitmap_t set;

    pthread_mutex_lock(&topo_lock);
    if (topo_load() && (set = hwloc_bitmap_alloc()) != NULL) {
        if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0) {
            /* bound inside one NUMA node: that node; else unknown */
            int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
            for (int i = 0; i < n; i++) {
                hwloc_obj_t obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
                if (obj != NULL && hwloc_bitmap_isincluded(set, obj->cpuset)) {
                    numa = (int)obj->os_index;
                    break;
                }
            }
        }
        hwloc_bitmap_free(set);
    }
    pthread_mutex_unlock(&topo_lock);
    return numa;
}

void gpuring_graph_topo_finalize(void)
{
    pthread_mutex_lock(&topo_lock);
    if (topo_loaded > 0) hwloc_topology_destroy(topo);
    topo_loaded = 0;
    pthread_mutex_unlock(&topo_lock);
}
