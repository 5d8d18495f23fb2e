/*
 * test_topo.c -- graph/topo.c and graph/ring_order.c on machines that are
 * not here (hwloc XML fixtures, see test/fixtures/make_fixtures.py) and on
 * this one:
 *   - GPU / NIC counts, bus ids, NUMA and nearest NIC per GPU, path classes
 *     between every GPU pair of dgx_like.xml and workstation_4gpu.xml;
 *     NUMA-only paths (LOC / PHB / SYS) on an inline sub-NUMA-cluster XML;
 *   - errors: a missing file and a non-XML file are GPURING_ERR_INVALID;
 *   - this machine's topology loads and the binding's NUMA node is found;
 *   - ring orders for nchannels 1..16: permutations, the best worst edge and
 *     sum (checked against brute force), pairs behind one switch adjacent,
 *     channels starting from different ranks, odd channels reversed, the
 *     greedy + 2-opt search beyond 8 ranks;
 *   - seed 002's ring joining (2 nodes x 8 GPUs): the per-node orders of a
 *     channel joined node to node hold every rank exactly once.
 *
 * Fixtures folder: argv[1], else $GPURING_FIXTURES_DIR, else
 * GPURING_FIXTURES_DIR_DEFAULT (-D), else ../../fixtures from this source.
 */
#define _GNU_SOURCE
#include <hwloc.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/graph.h"
#include "test/unit/unit_test.h"

static char fixtures[4096];

static void fixtures_dir(int argc, char **argv)
{
    const char *env = getenv("GPURING_FIXTURES_DIR");

    if (argc > 1) {
        snprintf(fixtures, sizeof(fixtures), "%s", argv[1]);
    } else if (env != NULL && env[0] != '\0') {
        snprintf(fixtures, sizeof(fixtures), "%s", env);
    } else {
#ifdef GPURING_FIXTURES_DIR_DEFAULT
        snprintf(fixtures, sizeof(fixtures), "%s", GPURING_FIXTURES_DIR_DEFAULT);
#else
        const char *slash = strrchr(__FILE__, '/');
        int len = slash != NULL ? (int)(slash - __FILE__) : 1;

        snprintf(fixtures, sizeof(fixtures), "%.*s/../../fixtures", len,
                 slash != NULL ? __FILE__ : ".");
#endif
    }
}

static gpuring_topo_t *load_fixture(const char *name)
{
    char path[4200];
    gpuring_topo_t *t = NULL;
    gpuring_status_t st;

    snprintf(path, sizeof(path), "%s/%s", fixtures, name);
    st = gpuring_graph_topo_get(path, &t);
    EXPECT(st == GPURING_OK && t != NULL, "load %s: %s", path, gpuring_status_str(st));
    return st == GPURING_OK ? t : NULL;
}

/* ---- ring helpers (independent of ring_order.c) --------------------------- */

static int edge_class(const gpuring_path_t *d, int n, int i, int j)
{
    int a = (int)d[i * n + j], b = (int)d[j * n + i];

    return a > b ? a : b;
}

static int is_perm(const int *o, int n)
{
    int seen[512] = {0};

    for (int i = 0; i < n; i++) {
        if (o[i] < 0 || o[i] >= n || seen[o[i]]) return 0;
        seen[o[i]] = 1;
    }
    return 1;
}

/* closed ring: worst class, sum, count of edges of class k */
static void ring_stats(const gpuring_path_t *d, int n, const int *o, int *worst, int *sum,
                       int hist[GPURING_PATH_COUNT])
{
    *worst = 0;
    *sum = 0;
    for (int k = 0; k < GPURING_PATH_COUNT; k++) hist[k] = 0;
    for (int i = 0; i < n; i++) {
        int e = edge_class(d, n, o[i], o[(i + 1) % n]);

        if (e > *worst) *worst = e;
        *sum += e;
        hist[e]++;
    }
}

/* brute force over every ring: the least worst edge, then the least sum */
static void brute_best(const gpuring_path_t *d, int n, int *worst_p, int *sum_p)
{
    int p[16], c[16] = {0}, w, s, h[GPURING_PATH_COUNT], i = 1;

    for (int k = 0; k < n; k++) p[k] = k;
    ring_stats(d, n, p, worst_p, sum_p, h);
    /* Heap's algorithm over p[1..n-1] (p[0] fixed: rings are rotations) */
    while (i < n - 1) {
        if (c[i] < i) {
            int a = (i % 2 == 0) ? 1 : c[i] + 1, t = p[a];

            p[a] = p[i + 1];
            p[i + 1] = t;
            ring_stats(d, n, p, &w, &s, h);
            if (w < *worst_p || (w == *worst_p && s < *sum_p)) {
                *worst_p = w;
                *sum_p = s;
            }
            c[i]++;
            i = 1;
        } else {
            c[i] = 0;
            i++;
        }
    }
}

static int adjacent(const int *o, int n, int a, int b)
{
    for (int i = 0; i < n; i++) {
        int x = o[i], y = o[(i + 1) % n];

        if ((x == a && y == b) || (x == b && y == a)) return 1;
    }
    return 0;
}

static void build_dist(gpuring_topo_t *t, const gpuring_topo_loc_t *locs, int n,
                       gpuring_path_t *d)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) d[i * n + j] = gpuring_graph_topo_path(t, &locs[i], &locs[j]);
    }
}

/*
 * Generic checks on the orders of nch channels: permutations, every
 * channel's closed ring as good as brute force (if brute), recv ranks all
 * different while nch <= n, odd channels run channel 0's ring backwards.
 */
static void check_orders(const char *what, const gpuring_path_t *d, int n, int nch,
                         const int *order, int brute)
{
    int bw = -1, bs = -1, pos0[512];

    if (brute) brute_best(d, n, &bw, &bs);
    for (int i = 0; i < n; i++) pos0[order[i]] = i;
    for (int c = 0; c < nch; c++) {
        const int *o = order + c * n;
        int w, s, h[GPURING_PATH_COUNT];

        EXPECT(is_perm(o, n), "%s nch %d: channel %d is not a permutation", what, nch, c);
        if (!is_perm(o, n)) continue;
        ring_stats(d, n, o, &w, &s, h);
        if (brute) {
            EXPECT(w == bw && s == bs, "%s nch %d ch %d: worst %d sum %d, best is %d / %d",
                   what, nch, c, w, s, bw, bs);
        }
        for (int i = 0; i + 1 < n && n >= 3; i++) {
            /* the same ring as channel 0, forwards (even c) or backwards (odd c) */
            int step = (c & 1) ? n - 1 : 1;

            EXPECT(pos0[o[i + 1]] == (pos0[o[i]] + step) % n,
                   "%s nch %d ch %d: not channel 0's ring %s at %d", what, nch, c,
                   (c & 1) ? "backwards" : "forwards", i);
        }
        for (int c2 = 0; c2 < c && nch <= n; c2++) {
            EXPECT(order[c2 * n] != o[0], "%s nch %d: channels %d and %d both start at %d",
                   what, nch, c2, c, o[0]);
        }
    }
}

/* ---- topology: dgx_like.xml ---------------------------------------------- */

static const char *dgx_busid[8] = {"0000:05:00.0", "0000:06:00.0", "0000:0a:00.0",
                                   "0000:0b:00.0", "0000:85:00.0", "0000:86:00.0",
                                   "0000:8a:00.0", "0000:8b:00.0"};

static gpuring_path_t dgx_expected(int i, int j)
{
    if (i == j) return GPURING_PATH_LOC;
    if (i / 2 == j / 2) return GPURING_PATH_PIX; /* one switch */
    if (i / 4 == j / 4) return GPURING_PATH_PXB; /* two switches below the top switch */
    return GPURING_PATH_SYS;                     /* two sockets */
}

static void test_dgx(gpuring_topo_t *t, gpuring_topo_loc_t *locs, gpuring_path_t *dist)
{
    gpuring_topo_loc_t l, m;

    EXPECT(gpuring_graph_topo_ngpus(t) == 8, "dgx: %d gpus", gpuring_graph_topo_ngpus(t));
    EXPECT(gpuring_graph_topo_nnics(t) == 4, "dgx: %d nics", gpuring_graph_topo_nnics(t));
    for (int i = 0; i < 8; i++) {
        EXPECT(strcmp(gpuring_graph_topo_gpu_busid(t, i), dgx_busid[i]) == 0,
               "dgx: gpu %d busid '%s', want %s", i, gpuring_graph_topo_gpu_busid(t, i),
               dgx_busid[i]);
        gpuring_graph_topo_local(t, NULL, i, &locs[i]);
        EXPECT(strcmp(locs[i].gpu_busid, dgx_busid[i]) == 0, "dgx: fake gpu %d -> '%s'", i,
               locs[i].gpu_busid);
        EXPECT(locs[i].numa == i / 4, "dgx: gpu %d numa %d, want %d", i, locs[i].numa, i / 4);
        EXPECT(locs[i].nic == i / 2, "dgx: gpu %d nearest nic %d, want %d", i, locs[i].nic,
               i / 2);
    }
    EXPECT(gpuring_graph_topo_gpu_busid(t, 8)[0] == '\0', "dgx: gpu 8 exists");
    EXPECT(gpuring_graph_topo_gpu_busid(t, -1)[0] == '\0', "dgx: gpu -1 exists");

    /* fake gpu wraps modulo the count; given bus ids are canonicalized */
    gpuring_graph_topo_local(t, NULL, 9, &l);
    EXPECT(strcmp(l.gpu_busid, dgx_busid[1]) == 0, "dgx: fake gpu 9 -> '%s'", l.gpu_busid);
    gpuring_graph_topo_local(t, "0000:8A:00.0", 0, &l);
    EXPECT(strcmp(l.gpu_busid, "0000:8a:00.0") == 0 && l.numa == 1 && l.nic == 3,
           "dgx: busid 0000:8A:00.0 -> '%s' numa %d nic %d", l.gpu_busid, l.numa, l.nic);
    gpuring_graph_topo_local(t, "00000000:0b:00.0", -1, &l);
    EXPECT(strcmp(l.gpu_busid, dgx_busid[3]) == 0 && l.numa == 0 && l.nic == 1,
           "dgx: nvml busid -> '%s' numa %d nic %d", l.gpu_busid, l.numa, l.nic);

    /* every GPU pair */
    build_dist(t, locs, 8, dist);
    for (int i = 0; i < 8; i++) {
        for (int j = 0; j < 8; j++) {
            EXPECT(dist[i * 8 + j] == dgx_expected(i, j), "dgx: gpu %d - gpu %d is %s, want %s",
                   i, j, gpuring_path_name(dist[i * 8 + j]),
                   gpuring_path_name(dgx_expected(i, j)));
        }
    }

    /* no GPU: the XML gives no binding, so no NUMA node: SYS, first NIC */
    gpuring_graph_topo_local(t, NULL, -1, &l);
    EXPECT(l.gpu_busid[0] == '\0' && l.numa == -1 && l.nic == 0,
           "dgx: no gpu -> '%s' numa %d nic %d", l.gpu_busid, l.numa, l.nic);
    EXPECT(gpuring_graph_topo_path(t, &l, &l) == GPURING_PATH_SYS, "dgx: unknown numa not SYS");
    /* ranks without GPU: by NUMA node */
    l.numa = 0;
    m = l;
    EXPECT(gpuring_graph_topo_path(t, &l, &m) == GPURING_PATH_LOC, "dgx: numa 0-0 not LOC");
    m.numa = 1;
    EXPECT(gpuring_graph_topo_path(t, &l, &m) == GPURING_PATH_SYS, "dgx: numa 0-1 not SYS");
    EXPECT(gpuring_graph_topo_path(t, &locs[5], &l) == GPURING_PATH_SYS,
           "dgx: gpu 5 (numa 1) - cpu rank numa 0 not SYS");
    EXPECT(gpuring_graph_topo_path(t, &locs[1], &l) == GPURING_PATH_LOC,
           "dgx: gpu 1 (numa 0) - cpu rank numa 0 not LOC");
    /* the same GPU the topology lacks is still the same device */
    snprintf(l.gpu_busid, sizeof(l.gpu_busid), "0000:ff:00.0");
    snprintf(m.gpu_busid, sizeof(m.gpu_busid), "0000:FF:00.0");
    EXPECT(gpuring_graph_topo_path(t, &l, &m) == GPURING_PATH_LOC, "dgx: same unknown gpu");
}

/* ---- topology: workstation_4gpu.xml -------------------------------------- */

static void test_workstation(gpuring_topo_t *t, gpuring_topo_loc_t *locs, gpuring_path_t *dist)
{
    static const char *busid[4] = {"0000:03:00.0", "0000:04:00.0", "0000:05:00.0",
                                   "0000:06:00.0"};

    /* not GPUs: the NVIDIA HDMI audio 05:00.1 and the ASPEED BMC VGA 08:00.0 */
    EXPECT(gpuring_graph_topo_ngpus(t) == 4, "ws: %d gpus", gpuring_graph_topo_ngpus(t));
    EXPECT(gpuring_graph_topo_nnics(t) == 1, "ws: %d nics", gpuring_graph_topo_nnics(t));
    for (int i = 0; i < 4; i++) {
        EXPECT(strcmp(gpuring_graph_topo_gpu_busid(t, i), busid[i]) == 0,
               "ws: gpu %d busid '%s', want %s", i, gpuring_graph_topo_gpu_busid(t, i), busid[i]);
        gpuring_graph_topo_local(t, NULL, i, &locs[i]);
        EXPECT(locs[i].numa == 0 && locs[i].nic == 0, "ws: gpu %d numa %d nic %d", i,
               locs[i].numa, locs[i].nic);
    }
    build_dist(t, locs, 4, dist);
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 4; j++) {
            gpuring_path_t want = i == j ? GPURING_PATH_LOC
                                  : (i < 2 && j < 2) ? GPURING_PATH_PIX /* the PLX switch */
                                                     : GPURING_PATH_PHB; /* root ports */

            EXPECT(dist[i * 4 + j] == want, "ws: gpu %d - gpu %d is %s, want %s", i, j,
                   gpuring_path_name(dist[i * 4 + j]), gpuring_path_name(want));
        }
    }
}

/* ---- NUMA-only paths: package 0 split in two NUMA nodes, package 1 one --- */

static const char snc_xml[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<topology version=\"2.0\">\n"
    "<object type=\"Machine\" os_index=\"0\" cpuset=\"0x3f\" complete_cpuset=\"0x3f\" "
    "allowed_cpuset=\"0x3f\" nodeset=\"0x7\" complete_nodeset=\"0x7\" allowed_nodeset=\"0x7\">\n"
    "<object type=\"Package\" os_index=\"0\" cpuset=\"0xf\" complete_cpuset=\"0xf\" "
    "nodeset=\"0x3\" complete_nodeset=\"0x3\">\n"
    "<object type=\"Group\" cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" "
    "complete_nodeset=\"0x1\">\n"
    "<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x3\" complete_cpuset=\"0x3\" "
    "nodeset=\"0x1\" complete_nodeset=\"0x1\" local_memory=\"1073741824\"/>\n"
    "<object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" nodeset=\"0x1\" "
    "complete_nodeset=\"0x1\"/>\n"
    "<object type=\"PU\" os_index=\"1\" cpuset=\"0x2\" complete_cpuset=\"0x2\" nodeset=\"0x1\" "
    "complete_nodeset=\"0x1\"/>\n</object>\n"
    "<object type=\"Group\" cpuset=\"0xc\" complete_cpuset=\"0xc\" nodeset=\"0x2\" "
    "complete_nodeset=\"0x2\">\n"
    "<object type=\"NUMANode\" os_index=\"1\" cpuset=\"0xc\" complete_cpuset=\"0xc\" "
    "nodeset=\"0x2\" complete_nodeset=\"0x2\" local_memory=\"1073741824\"/>\n"
    "<object type=\"PU\" os_index=\"2\" cpuset=\"0x4\" complete_cpuset=\"0x4\" nodeset=\"0x2\" "
    "complete_nodeset=\"0x2\"/>\n"
    "<object type=\"PU\" os_index=\"3\" cpuset=\"0x8\" complete_cpuset=\"0x8\" nodeset=\"0x2\" "
    "complete_nodeset=\"0x2\"/>\n</object>\n</object>\n"
    "<object type=\"Package\" os_index=\"1\" cpuset=\"0x30\" complete_cpuset=\"0x30\" "
    "nodeset=\"0x4\" complete_nodeset=\"0x4\">\n"
    "<object type=\"NUMANode\" os_index=\"2\" cpuset=\"0x30\" complete_cpuset=\"0x30\" "
    "nodeset=\"0x4\" complete_nodeset=\"0x4\" local_memory=\"1073741824\"/>\n"
    "<object type=\"PU\" os_index=\"4\" cpuset=\"0x10\" complete_cpuset=\"0x10\" "
    "nodeset=\"0x4\" complete_nodeset=\"0x4\"/>\n"
    "<object type=\"PU\" os_index=\"5\" cpuset=\"0x20\" complete_cpuset=\"0x20\" "
    "nodeset=\"0x4\" complete_nodeset=\"0x4\"/>\n</object>\n</object>\n</topology>\n";

static int write_temp(const char *text, char *path, size_t len)
{
    int fd;
    FILE *f;

    snprintf(path, len, "/tmp/gpuring_test_topo_XXXXXX");
    fd = mkstemp(path);
    if (fd < 0 || (f = fdopen(fd, "w")) == NULL) return -1;
    fputs(text, f);
    fclose(f);
    return 0;
}

/* The paths between snc_xml's NUMA nodes, as loaded from `xml` (`what`: its name) */
static void check_numa_paths(const char *xml, const char *what)
{
    char path[64];
    gpuring_topo_t *t = NULL;
    gpuring_topo_loc_t a, b;

    if (write_temp(xml, path, sizeof(path)) != 0) {
        EXPECT(0, "cannot write a temporary xml");
        return;
    }
    EXPECT(gpuring_graph_topo_get(path, &t) == GPURING_OK, "%s: xml does not load", what);
    unlink(path);
    if (t == NULL) return;
    EXPECT(gpuring_graph_topo_ngpus(t) == 0 && gpuring_graph_topo_nnics(t) == 0,
           "%s: %d gpus %d nics", what, gpuring_graph_topo_ngpus(t), gpuring_graph_topo_nnics(t));
    gpuring_graph_topo_local(t, NULL, 0, &a);
    EXPECT(a.gpu_busid[0] == '\0' && a.nic == -1, "%s: fake gpu without gpus '%s' nic %d", what,
           a.gpu_busid, a.nic);
    b = a;
    a.numa = 1;
    b.numa = 1;
    EXPECT(gpuring_graph_topo_path(t, &a, &b) == GPURING_PATH_LOC, "%s: numa 1-1 not LOC", what);
    b.numa = 0;
    EXPECT(gpuring_graph_topo_path(t, &a, &b) == GPURING_PATH_PHB, "%s: numa 1-0 not PHB", what);
    b.numa = 2;
    EXPECT(gpuring_graph_topo_path(t, &a, &b) == GPURING_PATH_SYS, "%s: numa 1-2 not SYS", what);
    a.numa = 0;
    EXPECT(gpuring_graph_topo_path(t, &a, &b) == GPURING_PATH_SYS, "%s: numa 0-2 not SYS", what);
    b.numa = 7;
    EXPECT(gpuring_graph_topo_path(t, &a, &b) == GPURING_PATH_SYS, "%s: numa 0-7 not SYS", what);
}

/*
 * snc_xml, and the same machine seen by a process its cgroup keeps to NUMA node 0's
 * cores (Slurm's task/cgroup, a container per rank): hwloc leaves the rest out by
 * default, so each rank of a node would see another part of it and order the node's
 * rings from another distance matrix.  gpuring loads the whole machine.
 */
static void test_numa_paths(void)
{
    const char *from = "allowed_cpuset=\"0x3f\"", *nodes = "allowed_nodeset=\"0x7\"";
    char restricted[sizeof(snc_xml)];
    char *at;

    check_numa_paths(snc_xml, "snc");
    memcpy(restricted, snc_xml, sizeof(snc_xml));
    at = strstr(restricted, from);
    EXPECT(at != NULL && strstr(restricted, nodes) != NULL, "snc xml has no allowed sets");
    if (at == NULL || strstr(restricted, nodes) == NULL) return;
    memcpy(at, "allowed_cpuset=\"0x03\"", strlen(from));
    memcpy(strstr(restricted, nodes), "allowed_nodeset=\"0x1\"", strlen(nodes));
    check_numa_paths(restricted, "snc restricted to numa 0");
}

/* Where a rank bound to `cpus` of topology t sits: numa, package, nic */
static void check_place(gpuring_topo_t *t, const char *cpus, int numa, int package, int nic,
                        const char *what)
{
    gpuring_topo_loc_t l;

    memset(&l, 0x5a, sizeof(l));
    EXPECT(gpuring_graph_topo_cpus_place(t, cpus, &l) == GPURING_OK &&
               l.numa == numa && l.package == package && l.nic == nic &&
               l.gpu_busid[0] == '\0',
           "%s: bound to cpus '%s': numa %d package %d nic %d, want %d %d %d", what, cpus,
           l.numa, l.package, l.nic, numa, package, nic);
}

/*
 * Bindings wider than a NUMA node (Open MPI 4's --bind-to package above 2 ranks, on
 * machines with sub-NUMA clustering / NPS>1): a rank's place is its package, so two
 * such ranks of one package are PHB, not SYS, and a node whose ranks alternate
 * packages (--map-by package) gets rings that cross between packages twice, not at
 * every edge.
 */
static void test_package_bindings(gpuring_topo_t *dgx)
{
    static const char *binding[4] = {"0-3", "4-5", "1-2", "4-5"}; /* packages 0 1 0 1 */
    char path[64];
    gpuring_topo_t *t = NULL;
    gpuring_topo_loc_t l[4], whole;
    gpuring_path_t d[16];
    int order[4], w, sum, h[GPURING_PATH_COUNT];

    if (write_temp(snc_xml, path, sizeof(path)) != 0) {
        EXPECT(0, "cannot write a temporary xml");
        return;
    }
    EXPECT(gpuring_graph_topo_get(path, &t) == GPURING_OK, "snc: xml does not load");
    unlink(path);
    if (t == NULL) return;
    check_place(t, "0-1", 0, 0, -1, "snc");
    check_place(t, "1", 0, 0, -1, "snc");
    check_place(t, "2-3", 1, 0, -1, "snc");
    check_place(t, "0-3", -1, 0, -1, "snc");
    check_place(t, "1-2", -1, 0, -1, "snc");
    check_place(t, "4-5", 2, 1, -1, "snc");
    check_place(t, "3-4", -1, -1, -1, "snc");
    check_place(t, "0-5", -1, -1, -1, "snc");
    check_place(t, "", -1, -1, -1, "snc");
    EXPECT(gpuring_graph_topo_cpus_place(t, "zero", &whole) == GPURING_ERR_INVALID,
           "snc: cpu list 'zero' taken");
    EXPECT(gpuring_graph_topo_cpus_place(NULL, "0", &whole) == GPURING_ERR_INVALID,
           "no topology: taken");

    for (int i = 0; i < 4; i++) gpuring_graph_topo_cpus_place(t, binding[i], &l[i]);
    gpuring_graph_topo_cpus_place(t, "0-5", &whole);
    EXPECT(gpuring_graph_topo_path(t, &l[0], &l[2]) == GPURING_PATH_PHB,
           "snc: two ranks bound to package 0 not PHB");
    EXPECT(gpuring_graph_topo_path(t, &l[0], &l[0]) == GPURING_PATH_PHB,
           "snc: a rank bound to package 0 with itself not PHB");
    EXPECT(gpuring_graph_topo_path(t, &l[1], &l[3]) == GPURING_PATH_LOC,
           "snc: two ranks of NUMA node 2 not LOC");
    EXPECT(gpuring_graph_topo_path(t, &l[0], &l[1]) == GPURING_PATH_SYS,
           "snc: packages 0 and 1 not SYS");
    gpuring_graph_topo_cpus_place(t, "2-3", &whole);
    EXPECT(gpuring_graph_topo_path(t, &l[0], &whole) == GPURING_PATH_PHB &&
               gpuring_graph_topo_path(t, &whole, &l[2]) == GPURING_PATH_PHB,
           "snc: package 0 and its NUMA node 1 not PHB");
    gpuring_graph_topo_cpus_place(t, "0-5", &whole);
    EXPECT(gpuring_graph_topo_path(t, &l[0], &whole) == GPURING_PATH_SYS &&
               gpuring_graph_topo_path(t, &whole, &whole) == GPURING_PATH_SYS,
           "snc: a rank bound across packages not SYS");

    build_dist(t, l, 4, d);
    EXPECT(gpuring_graph_ring_order(d, 4, 1, order) == GPURING_OK && is_perm(order, 4),
           "snc: no ring order for 4 ranks on alternating packages");
    ring_stats(d, 4, order, &w, &sum, h);
    EXPECT(h[GPURING_PATH_SYS] == 2 && adjacent(order, 4, 0, 2) && adjacent(order, 4, 1, 3),
           "snc: ranks alternating packages: ring %d %d %d %d crosses packages %d times, "
           "want 2", order[0], order[1], order[2], order[3], h[GPURING_PATH_SYS]);

    /* a NUMA node without CPUs of its own hanging from the machine (CXL memory): hwloc
     * gives it every CPU; it is no rank's place */
    {
        static const char *from = "allowed_nodeset=\"0x7\">\n";
        const char *cxl = "allowed_nodeset=\"0xf\">\n<object type=\"NUMANode\" os_index=\"3\" "
                          "cpuset=\"0x3f\" complete_cpuset=\"0x3f\" nodeset=\"0x8\" "
                          "complete_nodeset=\"0x8\" local_memory=\"1073741824\"/>\n";
        char xml[sizeof(snc_xml) + 256];
        const char *at = strstr(snc_xml, from);
        gpuring_topo_t *c = NULL;

        EXPECT(at != NULL, "snc xml has no machine nodeset");
        if (at == NULL) return;
        snprintf(xml, sizeof(xml), "%.*s%s%s", (int)(at - snc_xml), snc_xml, cxl,
                 at + strlen(from));
        /* the machine's nodesets (before its first package) hold node 3 too */
        const char *first_package = strstr(xml, "<object type=\"Package\"");

        for (char *m = strstr(xml, "nodeset=\"0x7\""); m != NULL && m < first_package;
             m = strstr(m + 1, "nodeset=\"0x7\""))
            m[strlen("nodeset=\"0x")] = 'f';
        if (write_temp(xml, path, sizeof(path)) != 0) {
            EXPECT(0, "cannot write a temporary xml");
            return;
        }
        EXPECT(gpuring_graph_topo_get(path, &c) == GPURING_OK, "snc+cxl: xml does not load");
        unlink(path);
        if (c != NULL) {
            check_place(c, "0-1", 0, 0, -1, "snc+cxl");
            check_place(c, "0-3", -1, 0, -1, "snc+cxl");
            check_place(c, "4-5", 2, 1, -1, "snc+cxl");
            check_place(c, "0-5", -1, -1, -1, "snc+cxl");
            gpuring_graph_topo_cpus_place(c, "0-3", &l[0]);
            gpuring_graph_topo_cpus_place(c, "4-5", &l[1]);
            EXPECT(gpuring_graph_topo_path(c, &l[0], &l[1]) == GPURING_PATH_SYS,
                   "snc+cxl: packages 0 and 1 not SYS");
        }
    }

    /* nearest NIC by package or NUMA node: dgx_like's NICs 0-1 in package 0, 2-3 in 1 */
    if (dgx == NULL) return;
    check_place(dgx, "8-15", 1, 1, 2, "dgx");
    check_place(dgx, "3", 0, 0, 0, "dgx");
    check_place(dgx, "0-15", -1, -1, 0, "dgx");
}

/* The failed loads' warnings (what a log sink is given) */
/* The progress thread's CPUs for a rank at loc bound to `binding` on t: status st, and
 * for GPURING_OK the list want; why holds `says` */
static void check_thread_cpus(gpuring_topo_t *t, const gpuring_topo_loc_t *loc,
                              const char *binding, size_t len, gpuring_status_t st,
                              const char *want, const char *says)
{
    char cpus[64], why[256];
    gpuring_status_t got;

    memset(cpus, 'x', sizeof(cpus));
    got = gpuring_graph_topo_thread_cpus(t, loc, binding, cpus, len, why, sizeof(why));
    EXPECT(got == st && (st != GPURING_OK || strcmp(cpus, want) == 0) &&
               (st == GPURING_OK || len == 0 || cpus[0] == '\0') && strstr(why, says) != NULL,
           "thread cpus of a rank (gpu '%s', nic %d) bound to %s: %d '%s' (%s), want %d '%s' "
           "(... %s ...)", loc->gpu_busid, loc->nic, binding != NULL ? binding : "(this thread)",
           got, got == GPURING_OK ? cpus : "", why, st, want, says);
}

/*
 * Where a rank's progress thread runs (DESIGN: near the GPU/NIC, as NCCL's proxy): the
 * CPUs of its binding under the package its GPU hangs from (dgx_like: GPUs 0-3 and NICs
 * 0-1 on package 0, CPUs 0-7; the rest on package 1, CPUs 8-15), else its NIC's where
 * its place chose one; never outside the binding.
 */
static void test_thread_cpus(gpuring_topo_t *dgx)
{
    gpuring_topo_loc_t gpu0 = {.numa = -1, .package = -1, .nic = 0}, nic2 = gpu0, none = gpu0;

    snprintf(gpu0.gpu_busid, sizeof(gpu0.gpu_busid), "%s", dgx_busid[0]);
    nic2.nic = 2;
    nic2.package = 1; /* (a rank with a place there: its NIC is package 1's) */
    none.nic = -1;
    check_thread_cpus(dgx, &gpu0, "0-15", 64, GPURING_OK, "0-7",
                      "near its GPU 0000:05:00.0, inside its binding 0-15");
    check_thread_cpus(dgx, &gpu0, "6-9,12", 64, GPURING_OK, "6-7", "binding 6-9,12");
    check_thread_cpus(dgx, &gpu0, "8-15", 64, GPURING_ERR_NOT_SUPPORTED, "",
                      "none of its binding's CPUs (8-15) is near its GPU 0000:05:00.0");
    check_thread_cpus(dgx, &gpu0, "2-3", 64, GPURING_ERR_NOT_SUPPORTED, "",
                      "its binding (2-3) is all near its GPU");
    /* the GPU before the NIC: GPU 0 with NIC 2 (package 1) is still package 0's */
    gpu0.nic = 2;
    check_thread_cpus(dgx, &gpu0, "0-15", 64, GPURING_OK, "0-7", "GPU 0000:05:00.0");
    check_thread_cpus(dgx, &nic2, "0-15", 64, GPURING_OK, "8-15",
                      "near its NIC 0000:87:00.0");
    check_thread_cpus(dgx, &nic2, "0-15", 4, GPURING_ERR_NOT_SUPPORTED, "", "too long");
    check_thread_cpus(dgx, &nic2, "0-15", 0, GPURING_ERR_NOT_SUPPORTED, "", "too long");
    check_thread_cpus(dgx, &none, "0-15", 64, GPURING_ERR_NOT_SUPPORTED, "", "no GPU, and no NIC");
    snprintf(none.gpu_busid, sizeof(none.gpu_busid), "0000:ff:00.0"); /* not in the xml */
    check_thread_cpus(dgx, &none, "0-15", 64, GPURING_ERR_NOT_SUPPORTED, "", "no GPU, and no NIC");
    /* a NIC its place did not choose (an unbound rank on two packages: a tie) is none */
    nic2.package = -1;
    check_thread_cpus(dgx, &nic2, "0-15", 64, GPURING_ERR_NOT_SUPPORTED, "", "no GPU, and no NIC");
    nic2.numa = 1;
    check_thread_cpus(dgx, &nic2, "0-15", 64, GPURING_OK, "8-15", "NIC 0000:87:00.0");
    check_thread_cpus(dgx, &nic2, "zero", 64, GPURING_ERR_INVALID, "", "unreadable");
    check_thread_cpus(dgx, &nic2, NULL, 64, GPURING_ERR_NOT_SUPPORTED, "", "xml file's");
    check_thread_cpus(NULL, &nic2, "0-15", 64, GPURING_ERR_INVALID, "", "no topology");
}

static int topo_failures_said;

static void topo_failures_sink(int level, const char *line)
{
    (void)level;
    if (strstr(line, "going on without it") != NULL) topo_failures_said++;
    fprintf(stderr, "%s\n", line);
}

static void test_errors_and_cache(gpuring_topo_t *dgx)
{
    char path[64], fpath[4200];
    gpuring_topo_t *t = (gpuring_topo_t *)1;
    const gpuring_log_config_t saved = gpuring_log_config;
    gpuring_log_config_t lc = saved;

    /* a failed load is said once, and answered alike at every later setup */
    lc.sink = topo_failures_sink;
    gpuring_log_set(&lc);
    for (int k = 0; k < 3; k++) {
        t = (gpuring_topo_t *)1;
        EXPECT(gpuring_graph_topo_get("/nonexistent/gpuring.xml", &t) == GPURING_ERR_INVALID &&
                   t == NULL,
               "a missing xml file is not GPURING_ERR_INVALID (get %d)", k);
    }
    gpuring_log_set(&saved);
    EXPECT(topo_failures_said == 1, "a missing xml file said %d times in 3 gets, not once",
           topo_failures_said);
    if (write_temp("this is not xml\n", path, sizeof(path)) == 0) {
        fprintf(stderr, "(hwloc may print a parser error about %s here)\n", path);
        EXPECT(gpuring_graph_topo_get(path, &t) == GPURING_ERR_INVALID,
               "a non-xml file is not GPURING_ERR_INVALID");
        unlink(path);
    }
    EXPECT(gpuring_graph_topo_get(NULL, NULL) == GPURING_ERR_INVALID, "NULL topo_p accepted");
    snprintf(fpath, sizeof(fpath), "%s/dgx_like.xml", fixtures);
    EXPECT(gpuring_graph_topo_get(fpath, &t) == GPURING_OK && t == dgx,
           "the dgx topology is not cached");
    EXPECT(strcmp(gpuring_path_name(GPURING_PATH_PXB), "PXB") == 0 &&
               strcmp(gpuring_path_name(GPURING_PATH_SYS), "SYS") == 0,
           "path names");
}

/* ---- ranks playing an XML machine's GPUs ---------------------------------- */

/*
 * 8 ranks on 2 hosts, interleaved (--map-by node: ranks 0, 2, 4, 6 on one), whole or
 * cut into virtual nodes of 2: the i-th rank of a node, in the communicator's order,
 * plays the XML's i-th GPU -- not its rank's (rank 2 is its host's second rank).
 */
static void test_xml_locs(gpuring_topo_t *dgx)
{
    static const struct { int rpn; int gpu[8]; } want[] = {
        {0, {0, 0, 1, 1, 2, 2, 3, 3}}, /* hosts {0 2 4 6}, {1 3 5 7} */
        {2, {0, 0, 1, 1, 0, 0, 1, 1}}, /* virtual nodes {0 2}, {4 6}, {1 3}, {5 7} */
        {4, {0, 0, 1, 1, 2, 2, 3, 3}},
    };
    gpuring_peer_info_t peers[8];
    gpuring_topo_loc_t locs[8];

    memset(peers, 0, sizeof(peers));
    for (int r = 0; r < 8; r++) {
        peers[r].host_hash = 1 + (uint64_t)(r % 2);
        peers[r].pid = 100 + r;
    }
    for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
        gpuring_graph_t g;

        if (gpuring_graph_init(peers, 8, 3, want[k].rpn, 2, &g) != GPURING_OK) {
            EXPECT(0, "xml locs: graph init, ranks_per_node %d", want[k].rpn);
            continue;
        }
        EXPECT(gpuring_graph_xml_locs(&g, dgx, locs) == GPURING_OK, "xml locs: failed");
        for (int r = 0; r < 8; r++) {
            const char *busid = gpuring_graph_topo_gpu_busid(dgx, want[k].gpu[r]);

            EXPECT(strcmp(locs[r].gpu_busid, busid) == 0 && locs[r].numa >= 0,
                   "xml locs, ranks_per_node %d: rank %d plays %s (numa %d), not GPU %d (%s)",
                   want[k].rpn, r, locs[r].gpu_busid, locs[r].numa, want[k].gpu[r], busid);
        }
        gpuring_graph_free(&g);
    }
}

/* ---- this machine -------------------------------------------------------- */

static int pu_numa(int cpu)
{
    hwloc_topology_t hw;
    hwloc_obj_t pu, n = NULL;
    int numa = -1;

    if (hwloc_topology_init(&hw) != 0) return -2;
    if (hwloc_topology_load(hw) == 0 &&
        (pu = hwloc_get_pu_obj_by_os_index(hw, (unsigned)cpu)) != NULL) {
        while ((n = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_NUMANODE, n)) != NULL) {
            if (hwloc_bitmap_isset(n->cpuset, pu->os_index)) numa = (int)n->os_index;
        }
    }
    hwloc_topology_destroy(hw);
    return numa;
}

/* This process's NUMA node as gpuring_graph_topo_local finds it without a topology
 * given (it loads this machine's) */
static int binding_numa_untold(void)
{
    gpuring_topo_loc_t m;

    gpuring_graph_topo_local(NULL, NULL, -1, &m);
    return m.numa;
}

static void test_this_machine(void)
{
    gpuring_topo_t *t = NULL, *t2 = NULL;
    gpuring_topo_loc_t l;
    cpu_set_t saved, one;
    int numa, cpu = -1;

    EXPECT(gpuring_graph_topo_get(NULL, &t) == GPURING_OK && t != NULL,
           "this machine's topology does not load");
    EXPECT(gpuring_graph_topo_get("", &t2) == GPURING_OK && t2 == t, "\"\" is not this machine");
    if (t == NULL) return;
    printf("this machine: %d gpus, %d nics, local numa %d\n", gpuring_graph_topo_ngpus(t),
           gpuring_graph_topo_nnics(t), binding_numa_untold());
    gpuring_graph_topo_local(t, NULL, -1, &l);
    EXPECT(l.gpu_busid[0] == '\0' && l.numa == binding_numa_untold() &&
               l.nic >= -1 && l.nic < gpuring_graph_topo_nnics(t),
           "this machine, no gpu: '%s' numa %d nic %d", l.gpu_busid, l.numa, l.nic);
    if (gpuring_graph_topo_ngpus(t) > 0) {
        gpuring_graph_topo_local(t, NULL, 0, &l);
        EXPECT(strcmp(l.gpu_busid, gpuring_graph_topo_gpu_busid(t, 0)) == 0,
               "this machine: fake gpu 0 -> '%s'", l.gpu_busid);
    }

    /* bound to one CPU: its NUMA node */
    if (sched_getaffinity(0, sizeof(saved), &saved) == 0) {
        for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++) {
            if (CPU_ISSET(c, &saved)) cpu = c;
        }
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (cpu >= 0 && sched_setaffinity(0, sizeof(one), &one) == 0) {
            numa = binding_numa_untold();
            EXPECT(numa == pu_numa(cpu), "bound to cpu %d: numa %d, hwloc says %d", cpu, numa,
                   pu_numa(cpu));
            gpuring_graph_topo_local(t, NULL, -1, &l);
            EXPECT(l.numa == numa, "bound: topo_local numa %d, want %d", l.numa, numa);
            sched_setaffinity(0, sizeof(saved), &saved);
        }
    }
}

/* ---- ring orders --------------------------------------------------------- */

static void test_ring_args(void)
{
    gpuring_path_t d[9] = {0};
    int order[GPURING_MAX_CHANNELS * 3];

    EXPECT(gpuring_graph_ring_order(NULL, 3, 1, order) == GPURING_ERR_INVALID, "NULL dist");
    EXPECT(gpuring_graph_ring_order(d, 3, 1, NULL) == GPURING_ERR_INVALID, "NULL order");
    EXPECT(gpuring_graph_ring_order(d, 0, 1, order) == GPURING_ERR_INVALID, "nlocal 0");
    EXPECT(gpuring_graph_ring_order(d, 3, 0, order) == GPURING_ERR_INVALID, "nchannels 0");
    EXPECT(gpuring_graph_ring_order(d, 3, GPURING_MAX_CHANNELS + 1, order) ==
               GPURING_ERR_INVALID,
           "nchannels above the maximum");
    d[1] = (gpuring_path_t)7;
    EXPECT(gpuring_graph_ring_order(d, 3, 1, order) == GPURING_ERR_INVALID, "path class 7");
    d[1] = GPURING_PATH_SYS;
    d[4] = (gpuring_path_t)-3; /* the diagonal is not looked at */
    EXPECT(gpuring_graph_ring_order(d, 3, 1, order) == GPURING_OK && is_perm(order, 3),
           "3 ranks with a junk diagonal");

    /* trivial sizes */
    EXPECT(gpuring_graph_ring_order(d, 1, 4, order) == GPURING_OK && order[0] == 0 &&
               order[1] == 0 && order[2] == 0 && order[3] == 0,
           "1 rank");
    memset(d, 0, sizeof(d));
    d[1] = d[2] = GPURING_PATH_PIX;
    EXPECT(gpuring_graph_ring_order(d, 2, 2, order) == GPURING_OK && order[0] == 0 &&
               order[1] == 1 && order[2] == 1 && order[3] == 0,
           "2 ranks, 2 channels: %d %d / %d %d", order[0], order[1], order[2], order[3]);
}

static void test_ring_dgx(const gpuring_path_t *dist)
{
    int order[GPURING_MAX_CHANNELS * 8], again[GPURING_MAX_CHANNELS * 8];
    static const int nchs[] = {1, 2, 3, 4, 8, 16};

    for (size_t k = 0; k < sizeof(nchs) / sizeof(nchs[0]); k++) {
        int nch = nchs[k];

        EXPECT(gpuring_graph_ring_order(dist, 8, nch, order) == GPURING_OK, "dgx nch %d", nch);
        check_orders("dgx", dist, 8, nch, order, nch <= 4);
        EXPECT(gpuring_graph_ring_order(dist, 8, nch, again) == GPURING_OK &&
                   memcmp(order, again, sizeof(int) * 8 * (size_t)nch) == 0,
               "dgx nch %d: not deterministic", nch);
        for (int c = 0; c < nch; c++) {
            const int *o = order + c * 8;
            int w, s, h[GPURING_PATH_COUNT], open_sys = 0;

            ring_stats(dist, 8, o, &w, &s, h);
            EXPECT(w == GPURING_PATH_SYS && h[GPURING_PATH_SYS] == 2,
                   "dgx nch %d ch %d: %d SYS edges, want 2 (one each way)", nch, c,
                   h[GPURING_PATH_SYS]);
            for (int g = 0; g < 8; g += 2) {
                EXPECT(adjacent(o, 8, g, g + 1), "dgx nch %d ch %d: gpus %d,%d of one switch "
                       "not adjacent", nch, c, g, g + 1);
            }
            /* the cut (send -> recv, replaced by the network) drops a SYS edge */
            for (int i = 0; i + 1 < 8; i++) {
                open_sys += edge_class(dist, 8, o[i], o[i + 1]) == GPURING_PATH_SYS;
            }
            if (nch <= 4) {
                EXPECT(open_sys == 1, "dgx nch %d ch %d: node path crosses sockets %d times",
                       nch, c, open_sys);
            }
        }
    }
    /* recv ranks all differ for 8 and sends too for 4 channels */
    gpuring_graph_ring_order(dist, 8, 4, order);
    for (int c = 0; c < 4; c++) {
        for (int c2 = 0; c2 < c; c2++) {
            EXPECT(order[c * 8 + 7] != order[c2 * 8 + 7], "dgx 4 ch: channels %d and %d both "
                   "send from %d", c2, c, order[c * 8 + 7]);
        }
    }
}

static void test_ring_workstation(const gpuring_path_t *dist)
{
    int order[GPURING_MAX_CHANNELS * 4];

    for (int nch = 1; nch <= 4; nch++) {
        EXPECT(gpuring_graph_ring_order(dist, 4, nch, order) == GPURING_OK, "ws nch %d", nch);
        check_orders("ws", dist, 4, nch, order, 1);
        for (int c = 0; c < nch; c++) {
            int w, s, h[GPURING_PATH_COUNT];

            ring_stats(dist, 4, order + c * 4, &w, &s, h);
            EXPECT(w == GPURING_PATH_PHB && adjacent(order + c * 4, 4, 0, 1),
                   "ws nch %d ch %d: worst %s, gpus 0,1 adjacent %d", nch, c,
                   gpuring_path_name((gpuring_path_t)w), adjacent(order + c * 4, 4, 0, 1));
        }
    }
}

/* beyond 8 ranks: greedy + 2-opt */
static void test_ring_large(gpuring_topo_t *dgx)
{
    gpuring_topo_loc_t locs[16];
    gpuring_path_t d[16 * 16];
    int order[GPURING_MAX_CHANNELS * 16];

    /* 2 ranks per GPU on the dgx: local rank i on GPU i/2 */
    for (int i = 0; i < 16; i++) gpuring_graph_topo_local(dgx, NULL, i / 2, &locs[i]);
    build_dist(dgx, locs, 16, d);
    EXPECT(d[0 * 16 + 1] == GPURING_PATH_LOC, "two ranks on one gpu are not LOC");
    for (int nch = 1; nch <= 16; nch *= 2) {
        EXPECT(gpuring_graph_ring_order(d, 16, nch, order) == GPURING_OK, "dgx16 nch %d", nch);
        check_orders("dgx16", d, 16, nch, order, 0);
        for (int c = 0; c < nch; c++) {
            int w, s, h[GPURING_PATH_COUNT], pairs = 1;

            ring_stats(d, 16, order + c * 16, &w, &s, h);
            for (int i = 0; i < 16; i += 2) pairs &= adjacent(order + c * 16, 16, i, i + 1);
            /* 8 LOC + 4 PIX + 2 PXB + 2 SYS */
            EXPECT(w == GPURING_PATH_SYS && h[GPURING_PATH_SYS] == 2 && s == 16 && pairs,
                   "dgx16 nch %d ch %d: %d SYS edges, sum %d, co-located adjacent %d", nch, c,
                   h[GPURING_PATH_SYS], s, pairs);
        }
    }

    /* 9 and 10 ranks in clusters of 3 (PIX inside; PXB, PHB, SYS between),
     * against brute force */
    for (int n = 9; n <= 10; n++) {
        gpuring_path_t e[10 * 10];

        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                int ci = (i * 7) % n / 3, cj = (j * 7) % n / 3; /* scattered clusters */

                e[i * n + j] = i == j     ? GPURING_PATH_LOC
                               : ci == cj ? GPURING_PATH_PIX
                               : (ci + cj == 1) ? GPURING_PATH_PXB
                               : (ci == 3 || cj == 3) ? GPURING_PATH_SYS
                                                      : GPURING_PATH_PHB;
            }
        }
        EXPECT(gpuring_graph_ring_order(e, n, 3, order) == GPURING_OK, "clusters %d", n);
        check_orders(n == 9 ? "clusters9" : "clusters10", e, n, 3, order, 1);
    }

    /* 9 and 10 ranks, arbitrary symmetric classes (a fixed LCG): as good
     * as brute force (lcg9.12 and lcg10.19 need the kicks) */
    {
        unsigned x = 12345;

        for (int n = 9; n <= 10; n++) {
            for (int rep = 0; rep < 40; rep++) {
                gpuring_path_t e[10 * 10];
                char what[32];

                for (int i = 0; i < n; i++) {
                    for (int j = i; j < n; j++) {
                        x = x * 1103515245u + 12345u;
                        e[i * n + j] = e[j * n + i] =
                            i == j ? GPURING_PATH_LOC : (gpuring_path_t)(1 + (x >> 16) % 4);
                    }
                }
                snprintf(what, sizeof(what), "lcg%d.%d", n, rep);
                EXPECT(gpuring_graph_ring_order(e, n, 2, order) == GPURING_OK, "%s", what);
                check_orders(what, e, n, 2, order, 1);
            }
        }
    }

    /* 32 and 128 ranks on a PCI-like tree (class from the highest differing
     * bit of two leaf ids), ranks scrambled: as good as the tree's order */
    {
        static gpuring_path_t t[128 * 128];
        int leaf[128], inv[128], big[4 * 128];
        unsigned x = 7;

        for (int n = 32; n <= 128; n *= 4) {
            int w, s, h[GPURING_PATH_COUNT], w2, s2;

            for (int i = 0; i < n; i++) leaf[i] = i;
            for (int i = n - 1; i > 0; i--) {
                int j, tmp;

                x = x * 1103515245u + 12345u;
                j = (int)((x >> 16) % (unsigned)(i + 1));
                tmp = leaf[i];
                leaf[i] = leaf[j];
                leaf[j] = tmp;
            }
            for (int i = 0; i < n; i++) {
                inv[leaf[i]] = i;
                for (int j = 0; j < n; j++) {
                    int a = leaf[i] ^ leaf[j];

                    t[i * n + j] = a < 2 ? GPURING_PATH_LOC
                                   : a < 4 ? GPURING_PATH_PIX
                                   : a < 16 ? GPURING_PATH_PXB
                                   : a < n / 2 ? GPURING_PATH_PHB : GPURING_PATH_SYS;
                }
            }
            EXPECT(gpuring_graph_ring_order(t, n, 4, big) == GPURING_OK, "tree %d", n);
            check_orders(n == 32 ? "tree32" : "tree128", t, n, 4, big, 0);
            ring_stats(t, n, big, &w, &s, h);
            ring_stats(t, n, inv, &w2, &s2, h);
            EXPECT(w == w2 && s == s2, "tree %d: worst %d sum %d, the tree order has %d / %d", n,
                   w, s, w2, s2);
        }
    }
}

/* local ranks not in bus id order: local rank i on GPU map[i] */
static void test_ring_scrambled(gpuring_topo_t *dgx)
{
    static const int map[8] = {5, 2, 7, 0, 3, 6, 1, 4};
    gpuring_topo_loc_t locs[8];
    gpuring_path_t d[64];
    int order[4 * 8];

    for (int i = 0; i < 8; i++) gpuring_graph_topo_local(dgx, NULL, map[i], &locs[i]);
    build_dist(dgx, locs, 8, d);
    for (int nch = 1; nch <= 4; nch++) {
        EXPECT(gpuring_graph_ring_order(d, 8, nch, order) == GPURING_OK, "scrambled nch %d", nch);
        check_orders("dgx scrambled", d, 8, nch, order, 1);
        for (int c = 0; c < nch; c++) {
            /* GPUs 0,1 (ranks 3,6), 2,3 (1,4), 4,5 (7,0), 6,7 (5,2) behind one switch */
            EXPECT(adjacent(order + c * 8, 8, 3, 6) && adjacent(order + c * 8, 8, 1, 4) &&
                       adjacent(order + c * 8, 8, 7, 0) && adjacent(order + c * 8, 8, 5, 2),
                   "dgx scrambled nch %d ch %d: a switch pair is split", nch, c);
        }
    }
}

/* ---- seed 002: joining the nodes' rings ---------------------------------- */

/*
 * connectRings + ncclBuildRings for one channel: intra[node][i] are global
 * ranks; next of node n's send rank is node n+1's recv rank.  Writes the
 * ring seen from rank `from`; 1 if every rank appears exactly once.
 */
static int join_rings(int nnodes, int nlocal, const int *intra, int from, int *ring)
{
    int nranks = nnodes * nlocal, next[64], seen[64] = {0}, cur = from;

    for (int r = 0; r < nranks; r++) next[r] = -1;
    for (int n = 0; n < nnodes; n++) {
        const int *o = intra + n * nlocal;

        for (int i = 0; i + 1 < nlocal; i++) next[o[i]] = o[i + 1];
        next[o[nlocal - 1]] = intra[((n + 1) % nnodes) * nlocal]; /* send -> next recv */
    }
    for (int i = 0; i < nranks; i++) {
        if (cur < 0 || cur >= nranks || seen[cur]) return 0;
        seen[cur] = 1;
        ring[i] = cur;
        cur = next[cur];
    }
    return cur == from;
}

static void test_join(const gpuring_path_t *dist)
{
    /* the seed's example: ring seen from rank 6 */
    static const int seed_intra[16] = {0, 7, 6, 3, 2, 5, 4, 1, 10, 9, 8, 13, 12, 15, 14, 11};
    static const int seed_ring[16] = {6, 3, 2, 5, 4, 1, 10, 9, 8, 13, 12, 15, 14, 11, 0, 7};
    int ring[16], order[4 * 8], intra[16];

    EXPECT(join_rings(2, 8, seed_intra, 6, ring) && memcmp(ring, seed_ring, sizeof(ring)) == 0,
           "seed 002 example ring from rank 6 differs");

    /* our orders, two dgx nodes: node 1 holds ranks 8..15 */
    for (int nch = 1; nch <= 4; nch++) {
        EXPECT(gpuring_graph_ring_order(dist, 8, nch, order) == GPURING_OK, "join nch %d", nch);
        for (int c = 0; c < nch; c++) {
            int ok, pos_send0 = -1;

            for (int i = 0; i < 8; i++) {
                intra[i] = order[c * 8 + i];
                intra[8 + i] = 8 + order[c * 8 + i];
            }
            ok = join_rings(2, 8, intra, intra[0], ring);
            EXPECT(ok, "join nch %d ch %d: a rank is missing or twice", nch, c);
            for (int i = 0; i < 16; i++) {
                if (ring[i] == intra[7]) pos_send0 = i;
            }
            EXPECT(ok && pos_send0 >= 0 && ring[(pos_send0 + 1) % 16] == intra[8],
                   "join nch %d ch %d: node 1's recv rank does not follow node 0's send rank",
                   nch, c);
        }
    }
}

int main(int argc, char **argv)
{
    gpuring_topo_loc_t dgx_locs[8], ws_locs[4];
    gpuring_path_t dgx_dist[64], ws_dist[16];
    gpuring_topo_t *dgx, *ws;

    fixtures_dir(argc, argv);
    printf("fixtures: %s\n", fixtures);
    dgx = load_fixture("dgx_like.xml");
    ws = load_fixture("workstation_4gpu.xml");
    if (dgx != NULL) test_dgx(dgx, dgx_locs, dgx_dist);
    if (ws != NULL) test_workstation(ws, ws_locs, ws_dist);
    test_numa_paths();
    test_package_bindings(dgx);
    if (dgx != NULL) test_thread_cpus(dgx);
    if (dgx != NULL) test_errors_and_cache(dgx);
    if (dgx != NULL) test_xml_locs(dgx);
    test_this_machine();

    test_ring_args();
    if (dgx != NULL) {
        test_ring_dgx(dgx_dist);
        test_ring_scrambled(dgx);
        test_ring_large(dgx);
        test_join(dgx_dist);
    }
    if (ws != NULL) test_ring_workstation(ws_dist);

    gpuring_graph_topo_finalize();
    /* loads again after finalize */
    EXPECT(load_fixture("workstation_4gpu.xml") != NULL, "no load after finalize");
    gpuring_graph_topo_finalize();
    return unit_report();
}
