/*
 * topo.c -- where ranks sit in a node, from hwloc: GPUs, NICs, NUMA nodes,
 * and NCCL's path classes between them (seed 002; NCCL's LOC/PIX/PXB/PHB/SYS).
 *
 * A topology is this machine (loaded once, with its I/O devices) or an hwloc
 * XML file (tests and tools describe machines that are not here).  Loaded
 * topologies are kept per path, process-wide, behind one mutex, until
 * gpuring_graph_topo_finalize().
 *
 * Definitions used throughout:
 *   GPU  a PCI device of class 0x03xx (display) from NVIDIA (vendor 0x10de),
 *        or any PCI device of class 0x0302 (3D controller).  GPUs are indexed
 *        in PCI bus id order (domain, bus, device, function).
 *   NIC  a PCI device of class 0x02xx (network: 0x0200 Ethernet, 0x0207
 *        InfiniBand, ...) or 0x0c06 (InfiniBand as a serial bus controller,
 *        older HCAs).  NICs are indexed in bus id order too.
 *   NUMA node numbers are hwloc os indexes (what numactl calls them).
 *
 * Path classes (gpuring_graph_topo_path), exactly:
 *   Both ranks have a GPU found in the topology (compare their PCI devices):
 *     LOC  same device (same bus id).
 *     PIX  the lowest common ancestor is a PCI-to-PCI bridge and each device
 *          sits at most one bridge below it: one PCIe switch (hwloc shows a
 *          switch as its upstream-port bridge, with one downstream-port bridge
 *          above each device), or functions of one slot.
 *     PXB  the lowest common ancestor is a PCI-to-PCI bridge, but at least
 *          one device is two or more bridges below it: nested switches, below
 *          one host bridge.
 *     PHB  the lowest common ancestor is a host bridge (two root ports of one
 *          CPU root complex), or a CPU-side object inside one package (two
 *          host bridges of the same socket), or the machine when it has at
 *          most one package.
 *     SYS  otherwise: the devices hang below different packages (or below a
 *          machine-level host bridge of a machine with several packages).
 *   Otherwise (a rank without GPU, or a GPU the topology does not show),
 *   compare where the ranks' CPUs are: the NUMA node that holds a rank's whole
 *   CPU binding, else the package that does (a binding to a package of several
 *   NUMA nodes: Open MPI's --bind-to package, sub-NUMA clustering or NPS>1):
 *     LOC  same NUMA node;
 *     PHB  one package (different NUMA nodes of it, or either rank bound to
 *          the package as a whole);
 *     SYS  different packages, or neither known (-1) on either side.
 *   Two non-empty equal bus ids are LOC even when the topology lacks them.
 *
 * Nearest NIC (gpuring_graph_topo_local): for a GPU, the NIC with the lowest
 * path class to it by the PCI rule above; without a GPU, the NIC whose
 * CPU-side attachment holds exactly the rank's NUMA node (LOC), else one in
 * the rank's package (PHB), else any (SYS).  Ties go to the lowest NIC index.
 */
#define _POSIX_C_SOURCE 200809L /* strdup, strnlen under -std=c11 */
#include "graph/graph.h"

#include <errno.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct gpuring_topo {
    struct gpuring_topo *next;
    char *path;            /* "" for this machine */
    int from_xml;
    hwloc_topology_t hw;
    int ngpus;
    int nnics;
    hwloc_obj_t *gpus;     /* PCI devices, bus id order */
    hwloc_obj_t *nics;
    char (*gpu_busids)[GPURING_BUSID_LEN];
    gpuring_status_t failed; /* its load's failure (said then, once), GPURING_OK: loaded */
};

static pthread_mutex_t topo_lock = PTHREAD_MUTEX_INITIALIZER;
static gpuring_topo_t *topo_list;

const char *gpuring_path_name(gpuring_path_t path)
{
    switch (path) {
    case GPURING_PATH_LOC: return "LOC";
    case GPURING_PATH_PIX: return "PIX";
    case GPURING_PATH_PXB: return "PXB";
    case GPURING_PATH_PHB: return "PHB";
    case GPURING_PATH_SYS: return "SYS";
    default: return "???";
    }
}

/* ---- PCI helpers -------------------------------------------------------- */

static int pci_is_gpu(hwloc_obj_t o)
{
    unsigned cls = o->attr->pcidev.class_id;

    return ((cls >> 8) == 0x03 && o->attr->pcidev.vendor_id == 0x10de) || cls == 0x0302;
}

static int pci_is_nic(hwloc_obj_t o)
{
    unsigned cls = o->attr->pcidev.class_id;

    return (cls >> 8) == 0x02 || cls == 0x0c06;
}

static int pci_cmp(const void *a, const void *b)
{
    const struct hwloc_pcidev_attr_s *x = &(*(const hwloc_obj_t *)a)->attr->pcidev;
    const struct hwloc_pcidev_attr_s *y = &(*(const hwloc_obj_t *)b)->attr->pcidev;

    if (x->domain != y->domain) return x->domain < y->domain ? -1 : 1;
    if (x->bus != y->bus) return x->bus < y->bus ? -1 : 1;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    if (x->func != y->func) return x->func < y->func ? -1 : 1;
    return 0;
}

static void pci_busid_str(hwloc_obj_t o, char *buf)
{
    snprintf(buf, GPURING_BUSID_LEN, "%04x:%02x:%02x.%x", (unsigned)o->attr->pcidev.domain,
             (unsigned)o->attr->pcidev.bus, (unsigned)o->attr->pcidev.dev,
             (unsigned)o->attr->pcidev.func);
}

/*
 * Parse "dddd:bb:dd.f" (any case, any domain width: CUDA gives
 * "0000:B7:00.0", NVML "00000000:b7:00.0") or "bb:dd.f" (domain 0).
 */
static int busid_parse(const char *s, unsigned *dom, unsigned *bus, unsigned *dev, unsigned *fn)
{
    char tail;

    if (s == NULL || s[0] == '\0') return 0;
    if (sscanf(s, "%x:%x:%x.%x%c", dom, bus, dev, fn, &tail) == 4) return 1;
    *dom = 0;
    return sscanf(s, "%x:%x.%x%c", bus, dev, fn, &tail) == 3;
}

/* in: at most GPURING_BUSID_LEN bytes, not necessarily terminated (peer data) */
static void busid_canon(const char *in, char *out)
{
    char s[GPURING_BUSID_LEN + 1];
    unsigned d, b, v, f;

    memcpy(s, in, strnlen(in, GPURING_BUSID_LEN));
    s[strnlen(in, GPURING_BUSID_LEN)] = '\0';
    in = s;

    if (busid_parse(in, &d, &b, &v, &f) && d <= 0xffff && b <= 0xff && v <= 0x1f && f <= 7) {
        snprintf(out, GPURING_BUSID_LEN, "%04x:%02x:%02x.%x", d, b, v, f);
    } else {
        snprintf(out, GPURING_BUSID_LEN, "%.*s", GPURING_BUSID_LEN - 1, in);
    }
}

static hwloc_obj_t topo_find_pci(gpuring_topo_t *topo, const char *busid)
{
    unsigned d, b, v, f;

    if (topo == NULL || !busid_parse(busid, &d, &b, &v, &f)) return NULL;
    return hwloc_get_pcidev_by_busid(topo->hw, d, b, v, f);
}

/* ---- CPU-side helpers --------------------------------------------------- */

static hwloc_obj_t package_of(hwloc_obj_t o)
{
    for (; o != NULL; o = o->parent) {
        if (o->type == HWLOC_OBJ_PACKAGE) return o;
    }
    return NULL;
}

/*
 * Two CPU-side objects (NUMA nodes, or where host bridges attach) are in one
 * socket: same package, or the machine has at most one package and one of
 * them is above it (hwloc attached a host bridge to the machine).
 */
static int same_socket(hwloc_topology_t hw, hwloc_obj_t a, hwloc_obj_t b)
{
    hwloc_obj_t pa = package_of(a), pb = package_of(b);

    if (pa != NULL && pb != NULL) return pa == pb;
    return hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PACKAGE) <= 1;
}

/* hwloc_get_common_ancestor_obj() does not take I/O objects: walk by hand. */
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
    for (hwloc_obj_t x = a; x != NULL; x = x->parent) {
        for (hwloc_obj_t y = b; y != NULL; y = y->parent) {
            if (x == y) return x;
        }
    }
    return NULL;
}

static int bridges_between(hwloc_obj_t dev, hwloc_obj_t anc)
{
    int n = 0;

    for (hwloc_obj_t o = dev->parent; o != NULL && o != anc; o = o->parent) n++;
    return n;
}

/* Path class between two PCI devices (the rule in the header comment). */
static gpuring_path_t pci_path(hwloc_topology_t hw, hwloc_obj_t a, hwloc_obj_t b)
{
    hwloc_obj_t anc;

    if (a == b) return GPURING_PATH_LOC;
    anc = common_ancestor(a, b);
    if (anc == NULL) return GPURING_PATH_SYS;
    if (anc->type == HWLOC_OBJ_BRIDGE &&
        anc->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
        return (bridges_between(a, anc) <= 1 && bridges_between(b, anc) <= 1)
                   ? GPURING_PATH_PIX
                   : GPURING_PATH_PXB;
    }
    if (anc->type == HWLOC_OBJ_PCI_DEVICE) return GPURING_PATH_PIX; /* not for leaves */
    if (anc->type == HWLOC_OBJ_BRIDGE) return GPURING_PATH_PHB;     /* host bridge */
    return same_socket(hw, hwloc_get_non_io_ancestor_obj(hw, a),
                       hwloc_get_non_io_ancestor_obj(hw, b))
               ? GPURING_PATH_PHB
               : GPURING_PATH_SYS;
}

static hwloc_obj_t numa_obj(hwloc_topology_t hw, int numa)
{
    return numa < 0 ? NULL : hwloc_get_numanode_obj_by_os_index(hw, (unsigned)numa);
}

/* The package of os index `package`, NULL if none */
static hwloc_obj_t package_obj(hwloc_topology_t hw, int package)
{
    hwloc_obj_t p = NULL;

    while (package >= 0 && (p = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_PACKAGE, p)) != NULL) {
        if (p->os_index == (unsigned)package) return p;
    }
    return NULL;
}

/* A package's os index, -1 where hwloc does not know it */
static int package_index(hwloc_obj_t p)
{
    return p != NULL && p->os_index != HWLOC_UNKNOWN_INDEX && p->os_index <= INT32_MAX
               ? (int)p->os_index
               : -1;
}

/* Where a rank without a GPU sits: its NUMA node, else its package, NULL if neither */
static hwloc_obj_t loc_cpu_obj(hwloc_topology_t hw, const gpuring_topo_loc_t *l)
{
    hwloc_obj_t o;

    if (hw == NULL) return NULL;
    o = numa_obj(hw, l->numa);
    return o != NULL ? o : package_obj(hw, l->package);
}

/* Path class between two ranks by their CPUs (the rule in the header comment) */
static gpuring_path_t cpu_path(hwloc_topology_t hw, const gpuring_topo_loc_t *a,
                               const gpuring_topo_loc_t *b)
{
    hwloc_obj_t oa, ob;

    if (a->numa >= 0 && a->numa == b->numa) return GPURING_PATH_LOC;
    oa = loc_cpu_obj(hw, a);
    ob = loc_cpu_obj(hw, b);
    if (oa == NULL || ob == NULL) return GPURING_PATH_SYS;
    return package_of(oa) != NULL && package_of(oa) == package_of(ob) ? GPURING_PATH_PHB
                                                                     : GPURING_PATH_SYS;
}

/* Path class between a rank's CPUs and a PCI device (nearest NIC without GPU). */
static gpuring_path_t cpu_pci_path(hwloc_topology_t hw, const gpuring_topo_loc_t *l,
                                   hwloc_obj_t dev)
{
    hwloc_obj_t n = loc_cpu_obj(hw, l), at;

    if (n == NULL) return GPURING_PATH_SYS;
    at = hwloc_get_non_io_ancestor_obj(hw, dev);
    if (at == NULL) return GPURING_PATH_SYS;
    if (n->type == HWLOC_OBJ_NUMANODE && at->nodeset != NULL &&
        hwloc_bitmap_isequal(at->nodeset, n->nodeset)) {
        return GPURING_PATH_LOC;
    }
    return same_socket(hw, n, at) ? GPURING_PATH_PHB : GPURING_PATH_SYS;
}

/* The NUMA node of a device's CPU-side attachment, -1 if not exactly one. */
static int pci_numa(hwloc_topology_t hw, hwloc_obj_t dev)
{
    hwloc_obj_t at = hwloc_get_non_io_ancestor_obj(hw, dev);

    if (at == NULL || at->nodeset == NULL || hwloc_bitmap_weight(at->nodeset) != 1) return -1;
    return hwloc_bitmap_first(at->nodeset);
}

/* The package a device attaches to (its os index), -1 if none. */
static int pci_package(hwloc_topology_t hw, hwloc_obj_t dev)
{
    return package_index(package_of(hwloc_get_non_io_ancestor_obj(hw, dev)));
}

/*
 * Where a process bound to `set` sits: the NUMA node whose CPUs hold all of it,
 * and the package that does; -1 where none does (an empty set, a binding across
 * packages).  Of the NUMA nodes whose CPUs hold it, the one with the fewest CPUs
 * (HBM beside DRAM: the first of the two), and none that lies outside every package
 * of a machine of several: hwloc gives a node without CPUs of its own (CXL memory,
 * a GPU's memory) the CPUs of the object it hangs from, so one hanging from the
 * machine holds every binding, and ranks bound to different packages would all be
 * "in" it.
 */
static void cpuset_place(hwloc_topology_t hw, hwloc_const_cpuset_t set, gpuring_topo_loc_t *loc)
{
    const int packages = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PACKAGE);
    hwloc_obj_t o = NULL, best = NULL;

    loc->numa = -1;
    loc->package = -1;
    if (hwloc_bitmap_iszero(set)) return;
    while ((o = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_NUMANODE, o)) != NULL) {
        if (o->cpuset == NULL || !hwloc_bitmap_isincluded(set, o->cpuset) ||
            (packages > 1 && package_of(o) == NULL))
            continue;
        if (best == NULL || hwloc_bitmap_weight(o->cpuset) < hwloc_bitmap_weight(best->cpuset))
            best = o;
    }
    if (best != NULL) loc->numa = (int)best->os_index;
    loc->package = package_index(package_of(hwloc_get_obj_covering_cpuset(hw, set)));
}

/* This process's place by its CPU binding (cpuset_place), -1s if unreadable. */
static void binding_place(hwloc_topology_t hw, gpuring_topo_loc_t *loc)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();

    loc->numa = -1;
    loc->package = -1;
    if (set != NULL && hwloc_get_cpubind(hw, set, HWLOC_CPUBIND_PROCESS) == 0)
        cpuset_place(hw, set, loc);
    hwloc_bitmap_free(set);
}

/* ---- loading ------------------------------------------------------------ */

/* What a failed load leaves (said with it: the callers go on without a topology) */
#define TOPO_WITHOUT                                                                      \
    "; going on without it (NUMA and GPU locality unknown: rings in rank order; said "   \
    "once per process)"

static void topo_free(gpuring_topo_t *t)
{
    if (t == NULL) return;
    if (t->hw != NULL) hwloc_topology_destroy(t->hw);
    free(t->gpus);
    free(t->nics);
    free(t->gpu_busids);
    free(t->path);
    free(t);
}

/* List GPUs and NICs, each in bus id order. */
static gpuring_status_t topo_scan(gpuring_topo_t *t)
{
    int n = 0;
    hwloc_obj_t o = NULL;

    while ((o = hwloc_get_next_pcidev(t->hw, o)) != NULL) n++;
    t->gpus = calloc((size_t)n + 1, sizeof(*t->gpus));
    t->nics = calloc((size_t)n + 1, sizeof(*t->nics));
    t->gpu_busids = calloc((size_t)n + 1, sizeof(*t->gpu_busids));
    if (t->gpus == NULL || t->nics == NULL || t->gpu_busids == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_GRAPH, "out of memory listing %d pci devices%s", n,
                      TOPO_WITHOUT);
        return GPURING_ERR_NO_MEMORY;
    }
    while ((o = hwloc_get_next_pcidev(t->hw, o)) != NULL) {
        if (pci_is_gpu(o)) {
            t->gpus[t->ngpus++] = o;
        } else if (pci_is_nic(o)) {
            t->nics[t->nnics++] = o;
        }
    }
    qsort(t->gpus, (size_t)t->ngpus, sizeof(*t->gpus), pci_cmp);
    qsort(t->nics, (size_t)t->nnics, sizeof(*t->nics), pci_cmp);
    for (int i = 0; i < t->ngpus; i++) pci_busid_str(t->gpus[i], t->gpu_busids[i]);
    return GPURING_OK;
}

static gpuring_status_t topo_load(const char *key, gpuring_topo_t **topo_p)
{
    gpuring_topo_t *t = calloc(1, sizeof(*t));
    gpuring_status_t st;

    if (t == NULL || (t->path = strdup(key)) == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_GRAPH, "out of memory loading a topology%s", TOPO_WITHOUT);
        free(t);
        return GPURING_ERR_NO_MEMORY;
    }
    t->from_xml = key[0] != '\0';
    if (t->from_xml && access(key, R_OK) != 0) {
        GPURING_WARN(GPURING_SUBSYS_GRAPH, "cannot read hwloc xml topology file '%s': %s%s", key,
                     strerror(errno), TOPO_WITHOUT);
        topo_free(t);
        return GPURING_ERR_INVALID;
    }
    if (hwloc_topology_init(&t->hw) != 0) {
        t->hw = NULL;
        GPURING_ERROR(GPURING_SUBSYS_GRAPH, "hwloc_topology_init failed: %s%s", strerror(errno),
                      TOPO_WITHOUT);
        topo_free(t);
        return GPURING_ERR_SYSTEM;
    }
    /* GPUs and NICs are I/O objects, which hwloc drops by default: their PCI devices and
     * bridges are what locality needs; not the OS devices, whose discovery runs hwloc's
     * gl, opencl, cuda and nvml plugins wherever installed (each rank probing X displays
     * :0..:9 and the OpenCL drivers, a known cause of slow topology loads) */
    hwloc_topology_set_io_types_filter(t->hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    /* the whole machine, not the part this process's cgroup allows (Slurm's task/cgroup,
     * a container per rank): hwloc would leave the rest out, and each rank of a node
     * would order the node's rings from its own part of it */
#if HWLOC_API_VERSION >= 0x00020100
    (void)hwloc_topology_set_flags(t->hw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
#else /* (hwloc 2.0's name for it) */
    (void)hwloc_topology_set_flags(t->hw, HWLOC_TOPOLOGY_FLAG_WHOLE_SYSTEM);
#endif
    hwloc_topology_set_type_filter(t->hw, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (t->from_xml && hwloc_topology_set_xml(t->hw, key) != 0) {
        GPURING_WARN(GPURING_SUBSYS_GRAPH, "hwloc cannot use '%s' as an xml topology: %s%s", key,
                     strerror(errno), TOPO_WITHOUT);
        topo_free(t);
        return GPURING_ERR_INVALID;
    }
    if (hwloc_topology_load(t->hw) != 0) {
        int from_xml = t->from_xml;

        if (from_xml) {
            GPURING_WARN(GPURING_SUBSYS_GRAPH,
                         "hwloc failed to load the xml topology '%s' (not hwloc xml?): %s%s",
                         key, strerror(errno), TOPO_WITHOUT);
        } else {
            GPURING_WARN(GPURING_SUBSYS_GRAPH,
                         "hwloc failed to load this machine's topology: %s%s", strerror(errno),
                         TOPO_WITHOUT);
        }
        topo_free(t);
        return from_xml ? GPURING_ERR_INVALID : GPURING_ERR_SYSTEM;
    }
    st = topo_scan(t);
    if (st != GPURING_OK) {
        topo_free(t);
        return st;
    }
    GPURING_DEBUG(GPURING_SUBSYS_GRAPH, "topology %s: %d gpus, %d nics, %d numa nodes",
                  t->from_xml ? key : "of this machine", t->ngpus, t->nnics,
                  hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_NUMANODE));
    *topo_p = t;
    return GPURING_OK;
}

gpuring_status_t gpuring_graph_topo_get(const char *xml_path, gpuring_topo_t **topo_p)
{
    const char *key = xml_path != NULL ? xml_path : "";
    gpuring_topo_t *t;
    gpuring_status_t st = GPURING_OK;

    if (topo_p == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_GRAPH, "gpuring_graph_topo_get: NULL topo_p");
        return GPURING_ERR_INVALID;
    }
    *topo_p = NULL;
    pthread_mutex_lock(&topo_lock);
    for (t = topo_list; t != NULL; t = t->next) {
        if (strcmp(t->path, key) == 0) break;
    }
    if (t == NULL) {
        st = topo_load(key, &t);
        /* a failure is kept too: said once, not again at every communicator's setup (not
         * a lack of memory, which may pass) */
        if (st != GPURING_OK && st != GPURING_ERR_NO_MEMORY &&
            (t = calloc(1, sizeof(*t))) != NULL) {
            t->failed = st;
            if ((t->path = strdup(key)) == NULL) {
                free(t);
                t = NULL;
            }
        }
        if (t != NULL) {
            t->next = topo_list;
            topo_list = t;
        }
    } else {
        st = t->failed;
    }
    pthread_mutex_unlock(&topo_lock);
    if (st == GPURING_OK) *topo_p = t;
    return st;
}

void gpuring_graph_topo_finalize(void)
{
    pthread_mutex_lock(&topo_lock);
    while (topo_list != NULL) {
        gpuring_topo_t *t = topo_list;

        topo_list = t->next;
        topo_free(t);
    }
    pthread_mutex_unlock(&topo_lock);
}

/* ---- queries ------------------------------------------------------------ */

/* The NIC nearest a rank's GPU (gpu), else its CPUs (loc); ties to the lowest index;
 * -1 without NICs. */
static int nearest_nic(gpuring_topo_t *topo, hwloc_obj_t gpu, const gpuring_topo_loc_t *loc)
{
    gpuring_path_t best = GPURING_PATH_COUNT;
    int nic = -1;

    for (int i = 0; i < topo->nnics; i++) {
        gpuring_path_t p = gpu != NULL ? pci_path(topo->hw, gpu, topo->nics[i])
                                       : cpu_pci_path(topo->hw, loc, topo->nics[i]);

        if (p < best) {
            best = p;
            nic = i;
        }
    }
    return nic;
}

void gpuring_graph_topo_local(gpuring_topo_t *topo, const char *gpu_busid, int fake_gpu,
                              gpuring_topo_loc_t *loc)
{
    hwloc_obj_t gpu = NULL;

    if (loc == NULL) return;
    memset(loc, 0, sizeof(*loc));
    loc->numa = -1;
    loc->package = -1;
    loc->nic = -1;
    if (gpu_busid != NULL && gpu_busid[0] != '\0') {
        busid_canon(gpu_busid, loc->gpu_busid);
    } else if (fake_gpu >= 0 && topo != NULL && topo->ngpus > 0) {
        memcpy(loc->gpu_busid, topo->gpu_busids[fake_gpu % topo->ngpus], GPURING_BUSID_LEN);
    }
    if (topo == NULL) { /* this machine's binding, if it loads */
        if (gpuring_graph_topo_get(NULL, &topo) == GPURING_OK) binding_place(topo->hw, loc);
        return;
    }
    gpu = topo_find_pci(topo, loc->gpu_busid);

    /* NUMA node and package: this machine: the process binding; XML: where the GPU
     * attaches */
    if (!topo->from_xml) {
        binding_place(topo->hw, loc);
    } else if (gpu != NULL) {
        loc->numa = pci_numa(topo->hw, gpu);
        loc->package = pci_package(topo->hw, gpu);
    }

    loc->nic = nearest_nic(topo, gpu, loc);
}

gpuring_status_t gpuring_graph_topo_cpus_place(gpuring_topo_t *topo, const char *cpus,
                                               gpuring_topo_loc_t *loc)
{
    hwloc_bitmap_t set;
    gpuring_status_t st = GPURING_ERR_INVALID;

    if (topo == NULL || topo->hw == NULL || cpus == NULL || loc == NULL) return st;
    set = hwloc_bitmap_alloc();
    if (set == NULL) return GPURING_ERR_NO_MEMORY;
    if (hwloc_bitmap_list_sscanf(set, cpus) == 0) {
        memset(loc, 0, sizeof(*loc));
        cpuset_place(topo->hw, set, loc);
        loc->nic = nearest_nic(topo, NULL, loc);
        st = GPURING_OK;
    }
    hwloc_bitmap_free(set);
    return st;
}

/* set as a CPU list into buf, "..." at its end where it does not fit (logs) */
static void cpus_said(hwloc_const_bitmap_t set, char *buf, size_t len)
{
    if (hwloc_bitmap_list_snprintf(buf, len, set) >= (int)len && len > 4)
        snprintf(buf + len - 4, 4, "...");
}

gpuring_status_t gpuring_graph_topo_thread_cpus(gpuring_topo_t *topo,
                                                const gpuring_topo_loc_t *loc,
                                                const char *binding, char *cpus, size_t len,
                                                char *why, size_t why_len)
{
    hwloc_obj_t dev, above;
    const char *kind = "GPU";
    char busid[GPURING_BUSID_LEN], bound[128];
    hwloc_bitmap_t set;
    gpuring_status_t st = GPURING_ERR_NOT_SUPPORTED;

    if (len > 0) cpus[0] = '\0';
    if (topo == NULL || topo->hw == NULL || loc == NULL) {
        snprintf(why, why_len, "no topology");
        return GPURING_ERR_INVALID;
    }
    if (topo->from_xml && binding == NULL) {
        snprintf(why, why_len, "the topology is an xml file's, not this machine's");
        return st;
    }
    /* the NIC only where the rank's place chose it: an unbound rank's "nearest" NIC
     * on a machine of several packages is a tie, NIC 0 (a management port, as often) */
    dev = topo_find_pci(topo, loc->gpu_busid);
    if (dev == NULL && loc->nic >= 0 && loc->nic < topo->nnics &&
        (loc->numa >= 0 || loc->package >= 0)) {
        dev = topo->nics[loc->nic];
        kind = "NIC";
    }
    if (dev == NULL) {
        snprintf(why, why_len, "no GPU, and no NIC near its binding, in the topology");
        return st;
    }
    pci_busid_str(dev, busid);
    above = hwloc_get_non_io_ancestor_obj(topo->hw, dev);
    set = hwloc_bitmap_alloc();
    if (set == NULL) {
        snprintf(why, why_len, "no memory");
        return GPURING_ERR_NO_MEMORY;
    }
    if (binding != NULL ? hwloc_bitmap_list_sscanf(set, binding) != 0
                        : hwloc_get_cpubind(topo->hw, set, HWLOC_CPUBIND_THREAD) != 0) {
        if (binding != NULL)
            snprintf(why, why_len, "its binding ('%s') is unreadable", binding);
        else
            snprintf(why, why_len, "its binding is unreadable (%s)", strerror(errno));
        st = GPURING_ERR_INVALID;
        goto out;
    }
    cpus_said(set, bound, sizeof(bound));
    if (above == NULL || above->cpuset == NULL || !hwloc_bitmap_intersects(set, above->cpuset)) {
        snprintf(why, why_len, "none of its binding's CPUs (%s) is near its %s %s", bound, kind,
                 busid);
    } else if (hwloc_bitmap_isincluded(set, above->cpuset)) {
        snprintf(why, why_len, "its binding (%s) is all near its %s %s", bound, kind, busid);
    } else {
        hwloc_bitmap_and(set, set, above->cpuset);
        if (len == 0 || hwloc_bitmap_list_snprintf(cpus, len, set) >= (int)len) {
            snprintf(why, why_len, "the CPUs near its %s %s make too long a list", kind, busid);
            if (len > 0) cpus[0] = '\0';
        } else {
            snprintf(why, why_len, "near its %s %s, inside its binding %s", kind, busid, bound);
            st = GPURING_OK;
        }
    }
out:
    hwloc_bitmap_free(set);
    return st;
}

gpuring_path_t gpuring_graph_topo_path(gpuring_topo_t *topo, const gpuring_topo_loc_t *a,
                                       const gpuring_topo_loc_t *b)
{
    char ca[GPURING_BUSID_LEN], cb[GPURING_BUSID_LEN];

    if (a == NULL || b == NULL) return GPURING_PATH_SYS;
    if (a->gpu_busid[0] != '\0' && b->gpu_busid[0] != '\0') {
        hwloc_obj_t ga, gb;

        busid_canon(a->gpu_busid, ca);
        busid_canon(b->gpu_busid, cb);
        if (strncmp(ca, cb, GPURING_BUSID_LEN) == 0) return GPURING_PATH_LOC;
        ga = topo_find_pci(topo, ca);
        gb = topo_find_pci(topo, cb);
        if (ga != NULL && gb != NULL) return pci_path(topo->hw, ga, gb);
    }
    return cpu_path(topo != NULL ? topo->hw : NULL, a, b);
}

int gpuring_graph_topo_ngpus(gpuring_topo_t *topo)
{
    return topo != NULL ? topo->ngpus : 0;
}

int gpuring_graph_topo_nnics(gpuring_topo_t *topo)
{
    return topo != NULL ? topo->nnics : 0;
}

const char *gpuring_graph_topo_gpu_busid(gpuring_topo_t *topo, int i)
{
    if (topo == NULL || i < 0 || i >= topo->ngpus) return "";
    return topo->gpu_busids[i];
}
