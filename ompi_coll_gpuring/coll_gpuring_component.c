/*
 * coll_gpuring_component.c -- the coll/gpuring component: its MCA
 * parameters (all registered here, each with help text, shown by
 * `ompi_info --param coll gpuring --level 9`), its output stream, and
 * process-wide setup/teardown.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

#include "graph/graph.h"
#include "kernels/devcopy.h"
#include "kernels/device.h"
#include "proxy/ipc_buf.h"
#include "proxy/proxy.h"

#define GPURING_WAIT_TIMEOUT_DEFAULT 300 /* seconds */
#define GPURING_ARRIVAL_TIMEOUT_DEFAULT 3600 /* seconds */

const char *mca_coll_gpuring_component_version_string =
    "Open MPI gpuring collective MCA component version 0.1.0";

static int gpuring_register(void);
static int gpuring_open(void);
static int gpuring_close(void);

mca_coll_gpuring_component_t mca_coll_gpuring_component = {
    .super = {
        .collm_version = {
            MCA_COLL_GPURING_BASE_VERSION,
            .mca_component_name = "gpuring",
            MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
            .mca_open_component = gpuring_open,
            .mca_close_component = gpuring_close,
            .mca_register_component_params = gpuring_register,
        },
        .collm_data = {
            MCA_BASE_METADATA_PARAM_CHECKPOINT
        },
        .collm_init_query = mca_coll_gpuring_init_query,
        .collm_comm_query = mca_coll_gpuring_comm_query,
    },
    .priority = 90,
    .verbose = 0,
    .verbose_subsys = NULL,
    .host_buffers = false,
    .agree_memory = false,
    .nonblocking_setup = true,
    .net_gpu_direct = true,
    .direct = true,
    .direct_ll_size = 65536,
    .ipc_cache = GPURING_IPC_BUF_MAPPINGS,
    .net_zcopy = true,
    .progress_bind = true,
    .algorithm = NULL,
    .protocol = NULL,
    .nchannels = 2,
    .device_nchannels = 0,
    .channels_per_call = 0,
    .chunk_size = 0,
    .slot_size = 0, /* each plane's default */
    .wait_timeout = GPURING_WAIT_TIMEOUT_DEFAULT,
    .arrival_timeout = GPURING_ARRIVAL_TIMEOUT_DEFAULT,
    .ranks_per_node = 0,
    .topo_xml = NULL,
    .net_peer_failure = GPURING_PROXY_PEER_FAILURE_REMOTE,
    .net_rndv_size = -1,
    .stage_device_buffers = -1,
    .profile = false,
    .output = -1,
};

static void gpuring_register_int(const char *name, const char *help, int level, int *storage)
{
    (void)mca_base_component_var_register(&mca_coll_gpuring_component.super.collm_version, name,
                                          help, MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, level,
                                          MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static int gpuring_register(void)
{
    mca_coll_gpuring_component_t *c = &mca_coll_gpuring_component;
    const mca_base_component_t *v = &c->super.collm_version;

    gpuring_register_int("priority",
                         "Priority of coll/gpuring (it takes the collectives above the "
                         "component it replaces when higher than that one's; a negative value "
                         "disables it)",
                         OPAL_INFO_LVL_6, &c->priority);
    gpuring_register_int("verbose",
                         "Verbosity: 0-2 errors and warnings, 3 info (setup, and each "
                         "distinct fallback reason once), 4 debug (every fallback call), "
                         "5 trace",
                         OPAL_INFO_LVL_9, &c->verbose);
    c->verbose_subsys = "all";
    (void)mca_base_component_var_register(
        v, "verbose_subsys",
        "Subsystems whose info/debug/trace lines are printed: 'all' or a comma list of init, "
        "bootstrap, graph, tuning, coll, kernel, proxy, net",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_READONLY,
        &c->verbose_subsys);
    (void)mca_base_component_var_register(
        v, "profile",
        "Time the points of every blocking call's path in gpuring (memory kind, device, "
        "ordering after the default stream, the direct allreduce's exchanges and "
        "agreements, plan, kernel launch, the data's move) and print each rank's median "
        "microseconds per point over its last 4096 calls at MPI_Finalize, one line per kind "
        "of buffer: where a small call's time goes.  Two clock reads per point when on",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_READONLY,
        &c->profile);
    (void)mca_base_component_var_register(
        v, "host_buffers",
        "Also run the collectives gpuring takes (MPI_Allreduce, MPI_Iallreduce, MPI_Reduce, "
        "MPI_Reduce_scatter(_block), MPI_Allgather, MPI_Bcast) on host (non-GPU) buffers with "
        "gpuring's host executor, instead of handing them to the component below (needed on "
        "machines without a GPU and for host benchmarks)",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY,
        &c->host_buffers);
    (void)mca_base_component_var_register(
        v, "managed_buffers",
        "Run the collectives gpuring takes on CUDA managed memory (cudaMallocManaged) with the "
        "CUDA kernels, as device memory of the GPU it belongs to (also next to cudaMalloc'd "
        "memory of that GPU in one call), instead of handing it to the component below (off "
        "by default: pages may migrate to the GPU on every call)",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY,
        &c->managed_buffers);
    (void)mca_base_component_var_register(
        v, "agree_memory",
        "Before every call, agree across ranks on the kind of memory passed (one small "
        "exchange of gpuring's, an integer from each rank): ranks passing different kinds -- host "
        "buffers on some, device buffers on others, which MPI allows -- then all hand the "
        "call to the component below instead of waiting for each other.  MPI_Iallreduce, "
        "which may not wait for the other ranks, then always goes below.  Off by default: "
        "gpuring trusts the rule of CUDA-aware MPI users that every rank passes the same "
        "kind, and small calls stay as fast as they can",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY,
        &c->agree_memory);
    (void)mca_base_component_var_register(
        v, "nonblocking_setup",
        "Let a non-blocking call (MPI_Iallreduce) make the setup it needs when it is the "
        "communicator's first gpuring call, its first on that kind of memory, or its first "
        "on the tree: collective exchanges that wait inside the call for every rank to make "
        "it.  On by default, so that a program whose calls are all non-blocking runs them "
        "in gpuring.  A program in which a rank, between starting such a call and waiting "
        "for it, needs point-to-point traffic that another rank sends only before making "
        "the call (valid MPI) then fails with a setup timeout; false hands such calls to "
        "the component below (device buffers staged where it cannot read them), and a "
        "blocking call makes the setup",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY,
        &c->nonblocking_setup);
    (void)mca_base_component_var_register(
        v, "net_gpu_direct",
        "Device buffers across nodes: keep the UCX slots in GPU memory (GPU-direct) when this "
        "process's UCX moves CUDA memory and the GPU orders or can flush a NIC's writes; "
        "false (or either missing) stages them in pinned host memory the kernels reach "
        "directly.  The verbose log says which mode each communicator uses",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &c->net_gpu_direct);
    (void)mca_base_component_var_register(
        v, "progress_bind",
        "Bind gpuring's progress thread (the one that moves steps between nodes over UCX) "
        "to the CPUs of the rank's binding nearest its GPU, else the NIC nearest the NUMA "
        "node or package its binding lies in, as NCCL binds its proxy thread: those of "
        "the object (NUMA node, package) the device hangs from.  Only "
        "inside the binding: a rank bound to CPUs none of which is near, or all of which "
        "are, keeps the thread on its binding.  false: the thread keeps the rank's "
        "binding.  The verbose log (subsystem proxy) says where it runs",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &c->progress_bind);
    (void)mca_base_component_var_register(
        v, "direct",
        "Device buffers with every rank on one node: each rank reduces its share of the buffer "
        "straight from every rank's send buffer, mapped through CUDA IPC, into every rank's "
        "receive buffer (no FIFOs; no kernel waits for another, which ranks sharing a GPU "
        "need).  false, or buffers CUDA IPC cannot share (stream-ordered pools, VMM): the "
        "ring/tree programs over the FIFOs",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &c->direct);
    (void)mca_base_component_var_register(
        v, "direct_ll_size",
        "Device buffers with every rank on one node: MPI_Allreduce calls of at most this many "
        "bytes (up to 1048576) take the LL direct allreduce (NCCL's one-shot LL): each rank "
        "writes its input, a flag in every 8 bytes, into a slot of its own in every other "
        "rank's inbox (device memory mapped through CUDA IPC at the first such call) and "
        "reduces all of them itself; no exchange between the host threads, one kernel.  "
        "Its kernels wait for each other, so it stays off where ranks share a GPU without "
        "MPS (time-sliced; the verbose log says why).  0: off (the direct allreduce)",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &c->direct_ll_size);
    (void)mca_base_component_var_register(
        v, "ipc_cache",
        "The direct allreduce: how many peer buffers a process keeps mapped (CUDA IPC) while "
        "no call uses them, up to 64, the least recently used closed first.  A mapping holds "
        "the peer's memory: what the peer frees (cudaFree, PyTorch's empty_cache or its "
        "free-and-retry on out-of-memory) returns to the GPU only when every process has "
        "closed it (or the peer allocates over its addresses).  0 closes each mapping when "
        "its call ends: every direct call then opens its peers' buffers anew (milliseconds)",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &c->ipc_cache);
    (void)mca_base_component_var_register(
        v, "net_zcopy",
        "Host buffers across nodes: UCX receives a step that would only be copied into the "
        "output straight there (zero copy: the allgather half of a ring allreduce, "
        "allgather, broadcast, the tree's way down), instead of into the connection's slot; "
        "calls of 64 KiB and more; not where the step's place in the output lies 1 to 31 bytes "
        "past its slot's modulo a page (UCX's copy there ran 5x slower on AMD EPYC; host slots "
        "start 16 bytes into a page, as malloc's large buffers do).  false: "
        "always the slots.  A call that fails cancels what was to land in its output",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &c->net_zcopy);
    c->algorithm = "auto";
    (void)mca_base_component_var_register(
        v, "algorithm",
        "Allreduce algorithm: auto (a latency + bandwidth model decides per call), ring "
        "(reduce-scatter + allgather), tree (reduce up, broadcast down the double binary "
        "tree), or gather (ring allgather of the whole buffer; only for calls that fit one "
        "slot, others use ring).  Also MPI_Bcast and MPI_Reduce: auto (the model: the tree "
        "for small calls across nodes, else the chain), ring (a pipelined chain along the "
        "ring; gather means ring for them), or tree (the double binary tree rooted at the "
        "call's root)",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &c->algorithm);
    c->protocol = "auto";
    (void)mca_base_component_var_register(
        v, "protocol",
        "How steps move between ranks of a node (shm FIFOs for host buffers, CUDA IPC FIFOs "
        "for device buffers): auto (LL for calls up to 64 B on host buffers and 64 KiB on "
        "device buffers, simple above), simple (data in the slot, then a counter), or ll (NCCL's "
        "low-latency protocol: a flag in every 8 bytes, half the bandwidth, no counter round "
        "trip; steps of at most 8 KiB).  Connections between nodes are always simple",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &c->protocol);
    gpuring_register_int("nchannels",
                         "Channels (independent rings, each with its own connections) set up "
                         "per communicator for host buffers, 1-32; each call uses as many as "
                         "its size makes worthwhile",
                         OPAL_INFO_LVL_5, &c->nchannels);
    gpuring_register_int("device_nchannels",
                         "Channels set up for device buffers (the FIFO rings and trees; each "
                         "is one thread block of the CUDA kernel), 1-32, or 0: as many as "
                         "every GPU can hold resident at once for all the ranks using it, at "
                         "most 32 (NCCL's count on an H100).  Each call uses as many as its "
                         "size makes worthwhile (a slot step of at least 32 KiB on one "
                         "node, 4 KiB with LL, 128 KiB across nodes)",
                         OPAL_INFO_LVL_5, &c->device_nchannels);
    gpuring_register_int("channels_per_call",
                         "Channels every call uses, at most the channels set up for its "
                         "buffers (0: as many as the call's size makes worthwhile, decided "
                         "by the tuning model)",
                         OPAL_INFO_LVL_5, &c->channels_per_call);
    (void)mca_base_component_var_register(
        v, "chunk_size",
        "Bytes moved per pipeline step (0: one FIFO slot; larger: capped at one slot, or "
        "one 8 KiB step of an LL call); smaller chunks pipeline more finely",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &c->chunk_size);
    (void)mca_base_component_var_register(
        v, "slot_size",
        "Bytes of one FIFO slot, 64 B to 64 MiB; each connection has 8 slots "
        "(receiver-owned buffer); 0: 256 KiB for host buffers' connections (cache-sized "
        "steps), 512 KiB for device buffers'",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &c->slot_size);
    (void)mca_base_component_var_register(
        v, "stream_size",
        "Host buffers: calls whose output is at least this many bytes write it with "
        "non-temporal stores, around the cache (0: from this host's last-level cache, "
        "where the call's inputs and outputs on the host -- 2 x output x its ranks there -- "
        "would overflow half of it; 8 MiB if the cache size is unknown)",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &c->stream_size);
    (void)mca_base_component_var_register(
        v, "net_stream_size",
        "Host buffers: steps of at least this many bytes are written into a NET connection's "
        "send slot with non-temporal stores, around the cache: only the transport reads them "
        "(a same-host peer's single copy, a NIC), and a plain store would first fetch each "
        "line back from where that transport's last read left it (0: 65536, above UCX's "
        "own eager sizes; on one host coll_gpuring_net_rndv_size makes 64 KiB steps eager, "
        "and streaming them or not measured the same)",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &c->net_stream_size);
    gpuring_register_int("wait_timeout",
                         "Seconds any wait (for a peer's step, a connection, teardown) may last "
                         "before gpuring reports what it waited for and fails the call (a wait "
                         "for a rank that has not made the call yet: coll_gpuring_arrival_timeout); "
                         "0 waits forever",
                         OPAL_INFO_LVL_5, &c->wait_timeout);
    gpuring_register_int("arrival_timeout",
                         "Seconds a call waits for a rank that has not made it yet: a "
                         "communicator's first call, or a call's first exchange, for any rank; "
                         "a step of a peer, for a rank on the same host (its arrival board). "
                         "Meanwhile a warning every coll_gpuring_wait_timeout names what it "
                         "waits for; 0 waits without a bound",
                         OPAL_INFO_LVL_5, &c->arrival_timeout);
    gpuring_register_int("ranks_per_node",
                         "Testing: cut each host's ranks, in rank order, into virtual nodes of "
                         "this many ranks, which talk over UCX as separate nodes would (0: real "
                         "hosts)",
                         OPAL_INFO_LVL_9, &c->ranks_per_node);
    {
        static const mca_base_var_enum_value_t peer_failure[] = {
            {GPURING_PROXY_PEER_FAILURE_REMOTE, "remote"},
            {GPURING_PROXY_PEER_FAILURE_NONE, "none"},
            {GPURING_PROXY_PEER_FAILURE_ALL, "all"},
            {0, NULL}};
        mca_base_var_enum_t *e = NULL;

        (void)mca_base_var_enum_create("coll_gpuring_net_peer_failure", peer_failure, &e);
        (void)mca_base_component_var_register(
            v, "net_peer_failure",
            "Which UCX endpoints ask UCX to detect a dead peer (UCP_ERR_HANDLING_MODE_PEER): "
            "remote (peers on other hosts), none, or all.  UCX 1.13's shared-memory transports "
            "cannot, so a same-host peer (virtual nodes) that asks for it runs over tcp/lo; "
            "without it, a dead peer is caught by coll_gpuring_wait_timeout",
            MCA_BASE_VAR_TYPE_INT, e, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
            &c->net_peer_failure);
        if (e != NULL) OBJ_RELEASE(e);
    }
    gpuring_register_int("net_rndv_size",
                         "NET steps of at least this many bytes go by UCX's rendezvous "
                         "(RNDV_THRESH of gpuring's own UCX context), shorter ones eager: -1 "
                         "(default) 65537 when every rank of the first communicator that "
                         "connects across nodes is on one host (virtual nodes: a same-host "
                         "rendezvous costs a round trip between the ranks' progress loops per "
                         "step, more than the eager copy of a 64 KiB step); across hosts, "
                         "never (every step eager) where tcp is UCX's only network transport "
                         "on this node (a rendezvous over tcp adds a round trip per step and "
                         "saves no copy: gpuring's receives are posted ahead), else UCX's own "
                         "choice; 0 UCX's own choice.  UCX_RNDV_THRESH in the environment "
                         "wins",
                         OPAL_INFO_LVL_5, &c->net_rndv_size);
    c->topo_xml = "";
    (void)mca_base_component_var_register(
        v, "topo_xml",
        "hwloc XML file describing the node, used instead of this machine's topology to "
        "order the ranks of a node in each channel's ring (testing; '' = this machine). "
        "Ranks without a GPU then play the node's GPUs in order",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_READONLY,
        &c->topo_xml);
    gpuring_register_int("stage_device_buffers",
                         "Calls on device buffers that go to the component below -- the "
                         "collectives gpuring does not run itself, and the calls of those it "
                         "runs that it hands down: -1 stage them through host memory unless "
                         "this Open MPI is CUDA-aware (MPIX_Query_cuda_support) and its coll "
                         "cuda / accelerator component is in the job below gpuring (a lower "
                         "priority), 1 always "
                         "stage, 0 hand the device pointers to the component below (only "
                         "right for a CUDA-aware Open MPI: others crash on them).  "
                         "A non-blocking call's results are copied back when its request "
                         "completes; a persistent call's inputs are copied in at every start "
                         "and its results back at every completion",
                         OPAL_INFO_LVL_5, &c->stage_device_buffers);
    return OMPI_SUCCESS;
}

/* One line listing the collectives staged, if any; one more where results whose datatype
 * has holes went back block by block, and one where sparse inputs came in so. */
static void gpuring_stage_summary(void)
{
    char line[1024];
    size_t len = 0;
    unsigned long long rows, copies;

    line[0] = '\0';
    for (int i = 0; i < MCA_COLL_GPURING_NCOLLS && len < sizeof(line); i++) {
        uint64_t n = mca_coll_gpuring_stage_count((mca_coll_gpuring_coll_t)i);
        if (n == 0) continue;
        len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s %llu",
                                len ? ", " : "",
                                mca_coll_gpuring_coll_name((mca_coll_gpuring_coll_t)i),
                                (unsigned long long)n);
    }
    if (len == 0) return;
    GPURING_INFO(GPURING_SUBSYS_COLL, "device buffers staged through host memory for the "
                 "component below: %s", line);
    gpuring_devcopy_block_counts(1, &rows, &copies);
    if (rows > 0) {
        GPURING_INFO(GPURING_SUBSYS_COLL, "staged results copied back block by block (their "
                     "datatypes have holes): %llu blocks in %llu copies", rows, copies);
    }
    gpuring_devcopy_block_counts(0, &rows, &copies);
    if (rows > 0) {
        GPURING_INFO(GPURING_SUBSYS_COLL, "staged inputs copied in block by block (their "
                     "datatypes span far more than their blocks): %llu blocks in %llu copies",
                     rows, copies);
    }
}

/* The gpuring log sink: one line on our opal_output stream. */
static void gpuring_log_sink(int level, const char *line)
{
    (void)level;
    opal_output(mca_coll_gpuring_component.output, "%s", line);
}

/* The subsystems `list` names (`warn`: each name that is none of them said). */
static unsigned gpuring_parse_subsys(const char *list, int warn)
{
    static const char *names[] = {"init", "bootstrap", "graph", "tuning",
                                  "coll", "kernel",    "proxy", "net"};
    unsigned mask = 0;
    char buf[256], *save = NULL;

    if (list == NULL || strcmp(list, "all") == 0) return GPURING_SUBSYS_ALL;
    strncpy(buf, list, sizeof(buf) - 1);
    buf[sizeof(buf) - 1] = '\0';
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        unsigned i = 0;

        while (i < sizeof(names) / sizeof(names[0]) && strcmp(tok, names[i]) != 0) i++;
        if (i < sizeof(names) / sizeof(names[0])) mask |= 1u << i;
        else if (warn)
            GPURING_WARN(GPURING_SUBSYS_INIT, "coll_gpuring_verbose_subsys: '%s' is no "
                         "subsystem (all, or a comma list of init, bootstrap, graph, tuning, "
                         "coll, kernel, proxy, net): ignored", tok);
    }
    return mask;
}

/* One of the parameters a rank uses on its own held to its documented range: outside
 * it, an error naming it, and its default used instead. */
static void gpuring_own_param(const char *name, int *value, int min, int max, int dflt,
                              const char *range)
{
    if (*value >= min && *value <= max) return;
    GPURING_ERROR(GPURING_SUBSYS_INIT, "coll_gpuring_%s is %d, not %s: %d (its default) used "
                  "instead", name, *value, range, dflt);
    *value = dflt;
}

void mca_coll_gpuring_own_params(void)
{
    mca_coll_gpuring_component_t *c = &mca_coll_gpuring_component;

    gpuring_own_param("wait_timeout", &c->wait_timeout, 0, INT_MAX,
                      GPURING_WAIT_TIMEOUT_DEFAULT, "0 (no bound) or seconds");
    gpuring_own_param("arrival_timeout", &c->arrival_timeout, 0, INT_MAX,
                      GPURING_ARRIVAL_TIMEOUT_DEFAULT, "0 (no bound) or seconds");
    gpuring_own_param("net_rndv_size", &c->net_rndv_size, -1, INT_MAX, -1,
                      "-1 (by where the ranks are), 0 (UCX's) or bytes");
    gpuring_own_param("stage_device_buffers", &c->stage_device_buffers, -1, 1, -1,
                      "-1, 0 or 1");
    gpuring_own_param("ipc_cache", &c->ipc_cache, 0, GPURING_IPC_BUF_MAPPINGS,
                      GPURING_IPC_BUF_MAPPINGS, "0-64");
    gpuring_ipc_buf_set_cache(c->ipc_cache);
    gpuring_devcopy_set_wait(c->wait_timeout);
    (void)gpuring_parse_subsys(c->verbose_subsys, 1);
}

/* What a blocking gpuring call's waits run now and then (gpuring_wait_progress): Open
 * MPI's progress, which the component's own waits would otherwise be without */
static void gpuring_wait_progress_opal(void)
{
    (void)opal_progress();
}

/* Registration and its undoing, one thread at a time: a thread that finds the callback
 * being registered waits for the outcome (had it gone on while the registration failed,
 * its request would never complete). */
static pthread_mutex_t progress_lock = PTHREAD_MUTEX_INITIALIZER;

int mca_coll_gpuring_progress_on(mca_coll_gpuring_progress_t *p)
{
    int rc = OPAL_SUCCESS;

    if (__atomic_load_n(&p->on, __ATOMIC_ACQUIRE)) return 1;
    pthread_mutex_lock(&progress_lock);
    if (!p->on) {
        rc = p->low_priority ? opal_progress_register_lp(p->cb) : opal_progress_register(p->cb);
        if (rc == OPAL_SUCCESS) __atomic_store_n(&p->on, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&progress_lock);
    if (rc != OPAL_SUCCESS) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "cannot register gpuring's %s progress with Open "
                      "MPI (error %d)", p->what, rc);
        return 0;
    }
    return 1;
}

void mca_coll_gpuring_progress_off(mca_coll_gpuring_progress_t *p)
{
    pthread_mutex_lock(&progress_lock);
    if (p->on) (void)opal_progress_unregister(p->cb);
    __atomic_store_n(&p->on, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&progress_lock);
}

static int gpuring_open(void)
{
    mca_coll_gpuring_component_t *c = &mca_coll_gpuring_component;
    gpuring_log_config_t cfg = {
        .level = c->verbose > GPURING_LOG_WARN ? c->verbose : GPURING_LOG_WARN,
        .mask = gpuring_parse_subsys(c->verbose_subsys, 0),
        .rank = -1, /* known once MPI_COMM_WORLD exists (comm_query) */
        .sink = gpuring_log_sink,
    };

    c->output = opal_output_open(NULL);
    opal_output_set_verbosity(c->output, 100); /* gpuring filters by itself */
    gpuring_log_set(&cfg);
    gpuring_prof_on = c->profile;
    gpuring_wait_progress_set(gpuring_wait_progress_opal);
    return OMPI_SUCCESS;
}

static int gpuring_close(void)
{
    mca_coll_gpuring_component_t *c = &mca_coll_gpuring_component;
    gpuring_device_saved_t app;
    int n;

    /* what this process did, as NCCL_DEBUG=INFO users expect to see */
    for (int coll = 0; coll < GPURING_COLL_COUNT; coll++) {
        gpuring_comm_stats_t st;
        uint64_t calls, below = __atomic_load_n(&c->fallbacks[coll], __ATOMIC_RELAXED);
        uint64_t cids = coll == GPURING_COLL_ALLREDUCE
                            ? __atomic_load_n(&c->cid_agreements, __ATOMIC_RELAXED)
                            : 0;

        gpuring_comm_stats_get((gpuring_coll_kind_t)coll, &st);
        calls = st.calls[0] + st.calls[1] + st.calls[2] + st.direct_ll_calls + st.direct_calls;
        if (calls + below + cids == 0) continue;
        if (coll == GPURING_COLL_ALLREDUCE) {
            GPURING_INFO(GPURING_SUBSYS_COLL,
                         "allreduce summary: %llu calls in gpuring (ring %llu, tree %llu, "
                         "gather %llu, LL direct %llu, direct %llu; %llu on device buffers; "
                         "%.3f GB), %llu handed to the component below, and %llu "
                         "context-id agreements (one MPI_INT, MPI_MAX or MPI_MIN, "
                         "non-blocking: Open MPI's) passed to it",
                         (unsigned long long)calls,
                         (unsigned long long)st.calls[GPURING_ALGO_RING],
                         (unsigned long long)st.calls[GPURING_ALGO_TREE],
                         (unsigned long long)st.calls[GPURING_ALGO_GATHER],
                         (unsigned long long)st.direct_ll_calls,
                         (unsigned long long)st.direct_calls,
                         (unsigned long long)st.device_calls, st.bytes / 1e9,
                         (unsigned long long)below, (unsigned long long)cids);
        } else {
            GPURING_INFO(GPURING_SUBSYS_COLL,
                         "%s summary: %llu calls in gpuring (%llu on device buffers; %.3f GB; "
                         "ring %llu, tree %llu), %llu handed to the component below",
                         gpuring_coll_names[coll], (unsigned long long)calls,
                         (unsigned long long)st.device_calls, st.bytes / 1e9,
                         (unsigned long long)st.calls[GPURING_ALGO_RING],
                         (unsigned long long)st.calls[GPURING_ALGO_TREE],
                         (unsigned long long)below);
        }
    }
    gpuring_stage_summary();
    gpuring_prof_report(GPURING_PLANE_HOST, "host");
    gpuring_prof_report(GPURING_PLANE_DEVICE, "device");

    n = gpuring_comm_async_finalize();
    if (n > 0) {
        GPURING_WARN(GPURING_SUBSYS_COLL, "MPI_Finalize with %d communicator%s kept alive by "
                     "non-blocking calls never completed with MPI_Wait or MPI_Test (or freed "
                     "with MPI_Request_free while they ran): their calls were run to their end "
                     "here; complete every request before MPI_Finalize", n, n > 1 ? "s" : "");
    }
    mca_coll_gpuring_request_finalize();
    mca_coll_gpuring_exchanges_finalize();
    app = gpuring_device_save(); /* CUDA teardown below may switch devices */
    gpuring_ipc_buf_finalize();
    gpuring_proxy_finalize();
    gpuring_device_restore(app);
    gpuring_graph_topo_finalize();
    gpuring_wait_progress_set(NULL);
    gpuring_log_config.sink = NULL;
    if (c->output >= 0) {
        opal_output_close(c->output);
        c->output = -1;
    }
    return OMPI_SUCCESS;
}
