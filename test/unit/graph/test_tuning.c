/*
 * test_tuning.c -- the cost model's decisions: trees for small messages on
 * many nodes, the choice flipping to the ring as messages grow and never
 * back, the gather only where it may run (one slot, scratch limit), forced
 * algorithms honoured when possible, channels growing with the size (the
 * device plane's by bytes per slot step, up to its own count; on one node its
 * own costs, which keep the gather to one LL step), the protocol
 * (LL for small calls on either plane, where a node has several ranks);
 * and the other collectives' plans (always their ring program, channels and
 * protocol from the bytes they move, forced algorithms ignored).
 */
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "proxy/conn.h" /* GPURING_LL_STEP_BYTES */
#include "test/unit/unit_test.h"

static void build(int nranks, int per_node, gpuring_graph_t *g)
{
    gpuring_peer_info_t *peers = calloc((size_t)nranks, sizeof(*peers));
    for (int r = 0; r < nranks; r++) peers[r].host_hash = (uint64_t)(r / per_node) + 1;
    EXPECT(gpuring_graph_build(peers, nranks, 0, 0, 2, g) == GPURING_OK, "build %d", nranks);
    free(peers);
}

static gpuring_plan_t plan(const gpuring_graph_t *g, gpuring_algo_t algo, size_t bytes,
                          int order_free, int trees)
{
    gpuring_tuning_params_t p = {.algo = algo, .trees = trees, .nchannels = 0,
                                 .chunk_bytes = 0, .slot_bytes = 512 * 1024};
    gpuring_plan_t out;
    gpuring_tuning_plan(g, &p, bytes / 4, 4, order_free, &out);
    return out;
}

/* a plan for collective `coll`: `bytes` is the count argument's bytes (one
 * rank's block for reduce-scatter and allgather) */
static gpuring_plan_t cplan(const gpuring_graph_t *g, gpuring_coll_kind_t coll, gpuring_algo_t algo,
                            int device, gpuring_proto_t proto, size_t bytes)
{
    gpuring_tuning_params_t p = {.coll = coll, .algo = algo, .trees = 1, .device = device,
                                 .max_channels = device ? GPURING_MAX_CHANNELS : 0,
                                 .slot_bytes = 512 * 1024, .proto = proto};
    gpuring_plan_t out;
    gpuring_tuning_plan(g, &p, bytes / 4, 4, 0, &out);
    return out;
}

/*
 * Bcast and reduce: the ring chain or the rooted tree.  Forced ring (or
 * gather, which they have not) runs the chain, forced tree the tree where
 * trees are usable; auto takes the tree for small calls across nodes (the
 * chain's n-1 hops against the tree's depth), the chain for large ones (the
 * tree's inner ranks send to two peers) and inside one node (the tree is a
 * chain there), and keeps the tree to larger sizes the more nodes there are.
 */
static void test_rooted_colls(void)
{
    static const gpuring_coll_kind_t rooted[] = {GPURING_COLL_BCAST, GPURING_COLL_REDUCE};
    gpuring_graph_t g4, g8, g64, g1;
    gpuring_plan_t out;

    build(4, 1, &g4);   /* 4 nodes of one rank */
    build(8, 1, &g8);   /* 8 nodes of one rank */
    build(64, 8, &g64); /* 8 nodes of 8 */
    build(4, 4, &g1);   /* one node */
    for (size_t c = 0; c < 2; c++) {
        const char *name = gpuring_coll_names[rooted[c]];

        for (size_t b = 8; b <= (size_t)1 << 26; b *= 64) {
            for (int dev = 0; dev <= 1; dev++) {
                out = cplan(&g4, rooted[c], GPURING_ALGO_RING, dev, GPURING_PROTO_AUTO, b);
                EXPECT(out.algo == GPURING_ALGO_RING, "%s, %zu B, ring forced: the chain", name, b);
                out = cplan(&g4, rooted[c], GPURING_ALGO_GATHER, dev, GPURING_PROTO_AUTO, b);
                EXPECT(out.algo == GPURING_ALGO_RING && !out.ordered,
                       "%s, %zu B, gather forced: the chain (got %d)", name, b, (int)out.algo);
                out = cplan(&g1, rooted[c], GPURING_ALGO_TREE, dev, GPURING_PROTO_AUTO, b);
                EXPECT(out.algo == GPURING_ALGO_TREE, "%s, one node, %zu B, tree forced: the "
                       "tree (got %d)", name, b, (int)out.algo);
                out = cplan(&g1, rooted[c], GPURING_ALGO_AUTO, dev, GPURING_PROTO_AUTO, b);
                EXPECT(out.algo == GPURING_ALGO_RING, "%s, one node, %zu B, auto: the chain "
                       "(got %d)", name, b, (int)out.algo);
            }
        }
        /* across nodes: the tree for small calls, the chain for large ones; on 4 nodes
         * of one rank the tree is barely shallower (2 steps + the second peer's against
         * 3), and the chain keeps them */
        EXPECT(cplan(&g8, rooted[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, 8).algo ==
                   GPURING_ALGO_TREE, "%s, 8 nodes, 8 B: the tree", name);
        EXPECT(cplan(&g8, rooted[c], GPURING_ALGO_AUTO, 1, GPURING_PROTO_AUTO, 1024).algo ==
                   GPURING_ALGO_TREE, "%s, 8 nodes, 1 KiB, device: the tree", name);
        EXPECT(cplan(&g64, rooted[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, 8).algo ==
                   GPURING_ALGO_TREE, "%s, 8 nodes of 8, 8 B: the tree", name);
        EXPECT(cplan(&g4, rooted[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, 8).algo ==
                   GPURING_ALGO_RING, "%s, 4 nodes of 1, 8 B: the chain", name);
        EXPECT(cplan(&g8, rooted[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, 16 << 20).algo ==
                   GPURING_ALGO_RING, "%s, 8 nodes, 16 MiB: the chain", name);
        EXPECT(cplan(&g64, rooted[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, 16 << 20).algo ==
                   GPURING_ALGO_RING, "%s, 8 nodes of 8, 16 MiB: the chain", name);
        {
            gpuring_graph_t g256;
            size_t b8 = 8, b256 = 8; /* the smallest size where the chain wins */

            build(256, 1, &g256);
            while (cplan(&g8, rooted[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, b8).algo ==
                   GPURING_ALGO_TREE)
                b8 *= 2;
            while (cplan(&g256, rooted[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, b256).algo ==
                   GPURING_ALGO_TREE)
                b256 *= 2;
            EXPECT(8 < b8 && b8 < b256 && b256 < ((size_t)1 << 30),
                   "%s: the tree up to larger calls on 256 nodes (%zu B) than on 8 (%zu B)",
                   name, b256, b8);
            gpuring_graph_free(&g256);
        }
        /* no usable trees: the chain, forced or not */
        {
            gpuring_tuning_params_t p = {.coll = rooted[c], .algo = GPURING_ALGO_TREE,
                                         .trees = 0, .slot_bytes = 512 * 1024};
            gpuring_tuning_plan(&g4, &p, 2, 4, 0, &out);
            EXPECT(out.algo == GPURING_ALGO_RING, "%s, tree forced, no trees: the chain", name);
            p.algo = GPURING_ALGO_AUTO;
            gpuring_tuning_plan(&g4, &p, 2, 4, 0, &out);
            EXPECT(out.algo == GPURING_ALGO_RING, "%s, auto, no trees: the chain", name);
        }
    }
    /* the model: one way, so half the allreduce tree's steps; the chain n-1 steps */
    EXPECT(gpuring_tuning_cost(&g4, GPURING_COLL_BCAST, GPURING_ALGO_TREE, 8) <
               gpuring_tuning_cost(&g4, GPURING_COLL_ALLREDUCE, GPURING_ALGO_TREE, 8) &&
           gpuring_tuning_cost(&g4, GPURING_COLL_REDUCE, GPURING_ALGO_RING, 8) <
               gpuring_tuning_cost(&g4, GPURING_COLL_ALLREDUCE, GPURING_ALGO_RING, 8),
           "bcast and reduce cost less than allreduce");
    gpuring_graph_free(&g4);
    gpuring_graph_free(&g8);
    gpuring_graph_free(&g64);
    gpuring_graph_free(&g1);
}

/* reduce-scatter and allgather: their ring program whatever the size, the
 * shape or the forced algorithm; bcast and reduce too where the algorithm
 * forces the ring or a gather (test_rooted_colls); channels and protocol of
 * all four from the bytes they move (every rank's block for reduce-scatter
 * and allgather) */
static void test_other_colls(void)
{
    static const gpuring_coll_kind_t others[] = {GPURING_COLL_REDUCE_SCATTER, GPURING_COLL_ALLGATHER,
                                                 GPURING_COLL_BCAST, GPURING_COLL_REDUCE};
    static const int shapes[][2] = {{4, 1}, {64, 8}, {4, 4}};
    static const gpuring_algo_t algos[] = {GPURING_ALGO_AUTO, GPURING_ALGO_RING, GPURING_ALGO_GATHER,
                                           GPURING_ALGO_TREE};
    gpuring_peer_info_t peers[2];
    gpuring_graph_t g;
    gpuring_plan_t out;

    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        build(shapes[i][0], shapes[i][1], &g);
        for (size_t c = 0; c < sizeof(others) / sizeof(others[0]); c++) {
            for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
                const int rooted = others[c] == GPURING_COLL_BCAST ||
                                   others[c] == GPURING_COLL_REDUCE;
                /* bcast, reduce: auto and tree are test_rooted_colls' */
                if (rooted && (algos[a] == GPURING_ALGO_AUTO || algos[a] == GPURING_ALGO_TREE))
                    continue;
                for (size_t b = 8; b <= (size_t)1 << 26; b *= 64) {
                    for (int dev = 0; dev <= 1; dev++) {
                        out = cplan(&g, others[c], algos[a], dev, GPURING_PROTO_AUTO, b);
                        EXPECT(out.algo == GPURING_ALGO_RING && !out.ordered,
                               "%s, %d ranks on %d nodes, algorithm %d forced, %zu B, %s: "
                               "its ring program (got %d, ordered %d)",
                               gpuring_coll_names[others[c]], shapes[i][0], g.nnodes, (int)algos[a],
                               b, dev ? "device" : "host", (int)out.algo, out.ordered);
                    }
                }
            }
        }
        /* the same shape's allreduce does take the tree or the gather at 8 B */
        if (shapes[i][1] == 1)
            EXPECT(plan(&g, GPURING_ALGO_AUTO, 8, 1, 1).algo != GPURING_ALGO_RING,
                   "%d nodes, allreduce of 8 B: not the ring", g.nnodes);
        gpuring_graph_free(&g);
    }

    /* channels, 2 ranks on a 32-channel graph.  Host plane: one per 256 KiB moved */
    memset(peers, 0, sizeof(peers));
    EXPECT(gpuring_graph_build(peers, 2, 0, 0, GPURING_MAX_CHANNELS, &g) == GPURING_OK,
           "build 2 ranks, %d channels", GPURING_MAX_CHANNELS);
    for (size_t c = 0; c < sizeof(others) / sizeof(others[0]); c++) {
        const char *name = gpuring_coll_names[others[c]];
        int blocks = gpuring_coll_blocks(others[c]);
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, 4096);
        EXPECT(out.nchannels == 1, "%s, host, 4 KiB: 1 channel (got %d)", name, out.nchannels);
        /* 1 MiB moved: bcast/reduce's count of 1 MiB, reduce-scatter/allgather's 512 KiB block */
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, blocks ? 512 << 10 : 1 << 20);
        EXPECT(out.nchannels == 4, "%s, host, 1 MiB moved: 4 channels (got %d)", name, out.nchannels);
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, 1 << 20);
        EXPECT(out.nchannels == (blocks ? 8 : 4), "%s, host, count of 1 MiB: %d channels (got %d)",
               name, blocks ? 8 : 4, out.nchannels);
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, 256u << 20);
        EXPECT(out.nchannels == GPURING_MAX_CHANNELS && out.chunk_elems == 512 * 1024 / 4,
               "%s, host, 256 MiB: all %d channels, slot steps (got %d, %zu elems)", name,
               GPURING_MAX_CHANNELS, out.nchannels, out.chunk_elems);
        /* device plane, one node: a slot step moves 32 KiB; a ring channel's step is a
         * block of its region (reduce-scatter, allgather: 1 MiB moved -> 16), a chain's
         * all of it (bcast, reduce: 1 MiB -> 32) */
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 1, GPURING_PROTO_AUTO, blocks ? 512 << 10 : 1 << 20);
        EXPECT(out.nchannels == (blocks ? 16 : 32), "%s, device, 1 MiB moved: %d channels (got %d)",
               name, blocks ? 16 : 32, out.nchannels);
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 1, GPURING_PROTO_AUTO, 256u << 20);
        EXPECT(out.nchannels == GPURING_MAX_CHANNELS, "%s, device, 256 MiB: all %d channels (got %d)",
               name, GPURING_MAX_CHANNELS, out.nchannels);
        /* forced channels honoured, up to the plane's */
        {
            gpuring_tuning_params_t p = {.coll = others[c], .algo = GPURING_ALGO_AUTO, .trees = 1,
                                         .nchannels = 3, .slot_bytes = 512 * 1024};
            gpuring_tuning_plan(&g, &p, 8 / 4, 4, 0, &out);
            EXPECT(out.nchannels == 3, "%s, forced 3 channels, 8 B: 3 (got %d)", name, out.nchannels);
            p.nchannels = 40;
            p.max_channels = 2;
            gpuring_tuning_plan(&g, &p, (64u << 20) / 4, 4, 0, &out);
            EXPECT(out.nchannels == 2, "%s, forced 40 on a plane of 2: 2 (got %d)", name, out.nchannels);
        }
    }
    gpuring_graph_free(&g);

    /* the protocol, 4 ranks on one node: LL up to 64 B moved (host), 64 KiB (device) */
    build(4, 4, &g);
    for (size_t c = 0; c < sizeof(others) / sizeof(others[0]); c++) {
        const char *name = gpuring_coll_names[others[c]];
        size_t per = gpuring_coll_blocks(others[c]) ? 4 : 1; /* count = bytes moved / per */
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, 64 / per);
        EXPECT(out.ll && out.chunk_elems * 4 <= GPURING_LL_STEP_BYTES,
               "%s, host, 64 B moved: LL (got %d)", name, out.ll);
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_AUTO, 128 / per);
        EXPECT(!out.ll, "%s, host, 128 B moved: simple", name);
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 1, GPURING_PROTO_AUTO, (64 << 10) / per);
        EXPECT(out.ll, "%s, device, 64 KiB moved: LL", name);
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 1, GPURING_PROTO_AUTO, (128 << 10) / per);
        EXPECT(!out.ll, "%s, device, 128 KiB moved: simple", name);
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_LL, 64 << 20);
        EXPECT(out.ll && out.chunk_elems * 4 <= GPURING_LL_STEP_BYTES,
               "%s, forced LL, 64 MiB: LL steps (got %d, %zu elems)", name, out.ll, out.chunk_elems);
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_SIMPLE, 8);
        EXPECT(!out.ll, "%s, forced simple, 8 B: simple", name);
    }
    gpuring_graph_free(&g);
    /* every rank its own node: no shm edge, never LL, not even forced */
    build(4, 1, &g);
    for (size_t c = 0; c < sizeof(others) / sizeof(others[0]); c++) {
        out = cplan(&g, others[c], GPURING_ALGO_AUTO, 0, GPURING_PROTO_LL, 8);
        EXPECT(!out.ll, "%s, 4 nodes of one rank, forced LL: simple", gpuring_coll_names[others[c]]);
    }
    gpuring_graph_free(&g);
}

int main(void)
{
    static const int shapes[][2] = {{4, 1}, {8, 1}, {64, 1}, {64, 8}, {1024, 4}};
    gpuring_graph_t g;

    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        int n = shapes[i][0], k = shapes[i][1], flipped = 0, back = 0;

        build(n, k, &g);
        EXPECT(plan(&g, GPURING_ALGO_AUTO, 64, 0, 1).algo == GPURING_ALGO_TREE || n <= 8,
               "%d ranks on %d nodes: 64 B should use a tree", n, g.nnodes);
        for (size_t b = 4; b <= (size_t)1 << 30; b *= 2) {
            gpuring_algo_t a = plan(&g, GPURING_ALGO_AUTO, b, 0, 1).algo;
            if (a == GPURING_ALGO_GATHER) continue;
            if (a == GPURING_ALGO_RING) flipped = 1;
            if (flipped && a == GPURING_ALGO_TREE) back = 1;
        }
        EXPECT(flipped && !back, "%d ranks: tree -> ring as size grows (flipped %d, back %d)", n,
               flipped, back);
        EXPECT(plan(&g, GPURING_ALGO_AUTO, (size_t)1 << 30, 0, 1).algo == GPURING_ALGO_RING,
               "%d ranks: 1 GiB is a ring", n);
        /* trees unusable (their connections failed): never chosen, not even forced */
        EXPECT(plan(&g, GPURING_ALGO_AUTO, 64, 0, 0).algo != GPURING_ALGO_TREE &&
                   plan(&g, GPURING_ALGO_TREE, 64, 0, 0).algo == GPURING_ALGO_RING,
               "%d ranks: no trees without tree connections", n);
        gpuring_graph_free(&g);
    }

    /* gather: chosen for tiny calls on few nodes, only where it may run */
    build(4, 1, &g);
    EXPECT(plan(&g, GPURING_ALGO_AUTO, 8, 1, 1).algo == GPURING_ALGO_GATHER,
           "4 nodes, 8 B: the gather's 3 steps beat the tree's 4");
    EXPECT(plan(&g, GPURING_ALGO_GATHER, 1 << 20, 1, 1).algo == GPURING_ALGO_RING,
           "a forced gather larger than a slot runs as a ring");
    EXPECT(plan(&g, GPURING_ALGO_GATHER, 64, 0, 1).ordered, "order-sensitive gather is ordered");
    EXPECT(!plan(&g, GPURING_ALGO_GATHER, 64, 1, 1).ordered, "order-free gather is not");
    EXPECT(plan(&g, GPURING_ALGO_GATHER, 64, 1, 1).nchannels == 1, "gather uses one channel");
    EXPECT(plan(&g, GPURING_ALGO_TREE, 1 << 24, 0, 1).algo == GPURING_ALGO_TREE,
           "forced tree honoured");
    EXPECT(plan(&g, GPURING_ALGO_RING, 8, 1, 1).algo == GPURING_ALGO_RING, "forced ring honoured");
    /* channels: one for small calls, all of them for large ones */
    EXPECT(plan(&g, GPURING_ALGO_RING, 4096, 0, 1).nchannels == 1, "4 KiB: one channel");
    EXPECT(plan(&g, GPURING_ALGO_RING, 64 << 20, 0, 1).nchannels == 2, "64 MiB: both channels");
    EXPECT(plan(&g, GPURING_ALGO_RING, 64 << 20, 0, 1).chunk_elems == 512 * 1024 / 4,
           "chunk = one slot");
    /* across nodes a ring channel takes nranks * GPURING_RING_NET_SLICES slots' worth
     * (its slices fill a slot: 4 x 4 x 512 KiB), inside one node one per 256 KiB */
    EXPECT(plan(&g, GPURING_ALGO_RING, 8 << 20, 0, 1).nchannels == 1,
           "4 nodes, 8 MiB: one channel of full-slot slices (got %d)",
           plan(&g, GPURING_ALGO_RING, 8 << 20, 0, 1).nchannels);
    EXPECT(plan(&g, GPURING_ALGO_RING, (8 << 20) + 4096, 0, 1).nchannels == 2,
           "4 nodes, 8 MiB + 4 KiB: two channels (got %d)",
           plan(&g, GPURING_ALGO_RING, (8 << 20) + 4096, 0, 1).nchannels);
    {
        gpuring_tuning_params_t p = {.coll = GPURING_COLL_REDUCE_SCATTER, .trees = 1,
                                     .chunk_bytes = 64 * 1024, .slot_bytes = 512 * 1024};
        gpuring_plan_t out;

        /* a forced chunk is the slice's size; reduce-scatter moves every rank's block */
        gpuring_tuning_plan(&g, &p, (256 * 1024) / 4, 4, 0, &out);
        EXPECT(out.nchannels == 1, "4 nodes, reduce-scatter of 4 x 256 KiB, 64 KiB chunks: 1 "
               "channel (got %d)", out.nchannels);
        gpuring_tuning_plan(&g, &p, (512 * 1024) / 4, 4, 0, &out);
        EXPECT(out.nchannels == 2, "4 nodes, reduce-scatter of 4 x 512 KiB, 64 KiB chunks: 2 "
               "channels (got %d)", out.nchannels);
    }
    gpuring_graph_free(&g);
    build(4, 4, &g);
    EXPECT(plan(&g, GPURING_ALGO_RING, 1 << 20, 0, 1).nchannels == 2,
           "one node, 1 MiB: a channel per 256 KiB, both (got %d)",
           plan(&g, GPURING_ALGO_RING, 1 << 20, 0, 1).nchannels);
    gpuring_graph_free(&g);
    /* device plane (one thread block per channel): channels until each slot step moves
     * 128 KiB (ring: a channel's region / nranks), at most what the plane connected;
     * the host plane keeps its own count on the same graph */
    {
        gpuring_peer_info_t peers[4];
        gpuring_tuning_params_t p = {.algo = GPURING_ALGO_AUTO, .trees = 1, .device = 1,
                                     .max_channels = GPURING_MAX_CHANNELS,
                                     .slot_bytes = 512 * 1024};
        gpuring_plan_t out;

        memset(peers, 0, sizeof(peers));
        EXPECT(gpuring_graph_build(peers, 2, 0, 0, GPURING_MAX_CHANNELS, &g) == GPURING_OK,
               "build 2 ranks, %d channels", GPURING_MAX_CHANNELS);
        gpuring_tuning_plan(&g, &p, (256u << 20) / 4, 4, 0, &out);
        EXPECT(out.algo == GPURING_ALGO_RING && out.nchannels == GPURING_MAX_CHANNELS,
               "device, 2 ranks, 256 MiB: a ring on all %d channels (got %d)",
               GPURING_MAX_CHANNELS, out.nchannels);
        gpuring_tuning_plan(&g, &p, (8u << 20) / 4, 4, 0, &out);
        EXPECT(out.nchannels == 32, "device, 2 ranks, 8 MiB: 32 channels (got %d)",
               out.nchannels);
        gpuring_tuning_plan(&g, &p, (1u << 20) / 4, 4, 0, &out);
        EXPECT(out.nchannels == 16, "device, 2 ranks, 1 MiB: 16 channels (got %d)", out.nchannels);
        gpuring_tuning_plan(&g, &p, 4096 / 4, 4, 0, &out);
        EXPECT(out.nchannels == 1, "device, 4 KiB: 1 channel (got %d)", out.nchannels);
        /* one node: the gather runs on one block, the ring on a channel per 32 KiB
         * step (LL: 4 KiB), so the ring takes what the gather's one block would
         * move slowly (measured on an H100: the gather 73.7 us at 512 KiB, the
         * ring 47.1 at 1 MiB); the gather keeps the calls of one LL step */
        {
            static const struct {
                size_t bytes;
                gpuring_algo_t algo;
                int nch;
            } want[] = {{8, GPURING_ALGO_GATHER, 1},          {8192, GPURING_ALGO_GATHER, 1},
                        {16384, GPURING_ALGO_RING, 2},        {65536, GPURING_ALGO_RING, 8},
                        {131072, GPURING_ALGO_RING, 2},       {262144, GPURING_ALGO_RING, 4},
                        {524288, GPURING_ALGO_RING, 8}};
            p.proto = GPURING_PROTO_AUTO; /* LL up to 64 KiB */
            for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                gpuring_tuning_plan(&g, &p, want[i].bytes / 4, 4, 1, &out);
                EXPECT(out.algo == want[i].algo && out.nchannels == want[i].nch,
                       "device, 2 ranks on one node, %zu B: %s on %d channels (got %s on %d)",
                       want[i].bytes, gpuring_algos[want[i].algo].name, want[i].nch,
                       gpuring_algos[out.algo].name, out.nchannels);
            }
            /* the host plane's model keeps the gather up to a slot */
            p.device = 0;
            gpuring_tuning_plan(&g, &p, (512u << 10) / 4, 4, 1, &out);
            EXPECT(out.algo == GPURING_ALGO_GATHER, "host, 2 ranks, 512 KiB: the gather (got %s)",
                   gpuring_algos[out.algo].name);
            p.device = 1;
            /* 32 channels forced: the ring's cost counts them, and at 8 KiB it takes
             * the call from the gather (H100: 26.0 against 26.4 us) */
            p.nchannels = 32;
            gpuring_tuning_plan(&g, &p, 8192 / 4, 4, 1, &out);
            EXPECT(out.algo == GPURING_ALGO_RING && out.nchannels == 32,
                   "device, 32 channels forced, 8 KiB: the ring on 32 (got %s on %d)",
                   gpuring_algos[out.algo].name, out.nchannels);
            p.nchannels = 0;
        }
        p.max_channels = 12;
        gpuring_tuning_plan(&g, &p, (256u << 20) / 4, 4, 0, &out);
        EXPECT(out.nchannels == 12, "device plane of 12 channels: 12 (got %d)", out.nchannels);
        p.nchannels = 20;
        gpuring_tuning_plan(&g, &p, 4096 / 4, 4, 0, &out);
        EXPECT(out.nchannels == 12 || out.algo == GPURING_ALGO_GATHER,
               "forced 20 on a plane of 12: 12 (got %d)", out.nchannels);
        p.nchannels = 0;
        p.algo = GPURING_ALGO_TREE;
        p.max_channels = GPURING_MAX_CHANNELS;
        gpuring_tuning_plan(&g, &p, (1u << 20) / 4, 4, 0, &out);
        EXPECT(out.nchannels == 32, "device tree, 1 MiB: 32 channels (got %d)", out.nchannels);
        gpuring_graph_free(&g);
        /* across nodes a device step is a network message: 128 KiB per step */
        {
            gpuring_peer_info_t npeers[2] = {{.host_hash = 1}, {.host_hash = 2}};
            EXPECT(gpuring_graph_build(npeers, 2, 0, 0, GPURING_MAX_CHANNELS, &g) == GPURING_OK,
                   "build 2 ranks on 2 nodes, %d channels", GPURING_MAX_CHANNELS);
            p.algo = GPURING_ALGO_RING;
            gpuring_tuning_plan(&g, &p, (1u << 20) / 4, 4, 0, &out);
            EXPECT(out.nchannels == 4, "device, 2 nodes, 1 MiB ring: 4 channels (got %d)",
                   out.nchannels);
            gpuring_graph_free(&g);
        }
        memset(peers, 0, sizeof(peers));
        EXPECT(gpuring_graph_build(peers, 2, 0, 0, GPURING_MAX_CHANNELS, &g) == GPURING_OK,
               "build 2 ranks, %d channels", GPURING_MAX_CHANNELS);
        /* the protocol: auto picks LL up to 64 KiB on the device plane (16 KiB on
         * the host plane), in steps of at most one LL slot; forced either way */
        p = (gpuring_tuning_params_t){.algo = GPURING_ALGO_AUTO, .trees = 1, .device = 1,
                                      .max_channels = GPURING_MAX_CHANNELS,
                                      .slot_bytes = 512 * 1024, .proto = GPURING_PROTO_AUTO};
        gpuring_tuning_plan(&g, &p, (64u << 10) / 4, 4, 0, &out);
        EXPECT(out.ll && out.chunk_elems * 4 <= GPURING_LL_STEP_BYTES,
               "device, auto, 64 KiB: LL in steps of <= %d B (got ll %d, %zu elems)",
               GPURING_LL_STEP_BYTES, out.ll, out.chunk_elems);
        gpuring_tuning_plan(&g, &p, (64u << 10) / 4 + 1, 4, 0, &out);
        EXPECT(!out.ll, "device, auto, 64 KiB + 4 B: simple");
        p.proto = GPURING_PROTO_LL;
        gpuring_tuning_plan(&g, &p, (64u << 20) / 4, 4, 0, &out);
        EXPECT(out.ll, "device, forced LL, 64 MiB: LL");
        p.proto = GPURING_PROTO_SIMPLE;
        gpuring_tuning_plan(&g, &p, 64 / 4, 4, 0, &out);
        EXPECT(!out.ll, "device, forced simple, 64 B: simple");
        p.device = 0; /* the host plane's threshold: below */
        /* the host plane: 256 KiB per channel, at most its own 2 */
        p = (gpuring_tuning_params_t){.algo = GPURING_ALGO_RING, .trees = 1, .max_channels = 2,
                                      .slot_bytes = 512 * 1024};
        gpuring_tuning_plan(&g, &p, (64u << 20) / 4, 4, 0, &out);
        EXPECT(out.nchannels == 2, "host plane of 2 on a 32-channel graph: 2 (got %d)",
               out.nchannels);
        gpuring_graph_free(&g);
    }
    /* the protocol: LL for small calls on graphs with shm edges (each plane its
     * own threshold), never on a net-only graph; forced LL caps the step at an
     * LL step, and the gather must fit one */
    {
        gpuring_tuning_params_t p = {.algo = GPURING_ALGO_AUTO, .trees = 1,
                                     .slot_bytes = 256 * 1024, .proto = GPURING_PROTO_AUTO};
        gpuring_plan_t out;

        build(4, 4, &g);
        gpuring_tuning_plan(&g, &p, 8 / 4, 4, 0, &out);
        EXPECT(out.ll == 1, "auto, 8 B on one node: LL");
        gpuring_tuning_plan(&g, &p, 64 / 4, 4, 0, &out);
        EXPECT(out.ll == 1, "auto, 64 B: LL");
        gpuring_tuning_plan(&g, &p, 128 / 4, 4, 0, &out);
        EXPECT(out.ll == 0 && out.chunk_elems == 256 * 1024 / 4, "auto, 128 B: simple, slot steps");
        p.device = 1;
        gpuring_tuning_plan(&g, &p, 8192 / 4, 4, 0, &out);
        EXPECT(out.ll == 1, "device plane, 8 KiB: LL (its own threshold)");
        gpuring_tuning_plan(&g, &p, (1u << 20) / 4, 4, 0, &out);
        EXPECT(out.ll == 0, "device plane, 1 MiB: simple");
        p.device = 0;
        p.proto = GPURING_PROTO_LL;
        gpuring_tuning_plan(&g, &p, (1u << 20) / 4, 4, 0, &out);
        EXPECT(out.ll == 1 && out.chunk_elems * 4 <= GPURING_LL_STEP_BYTES,
               "forced LL, 1 MiB: LL steps of at most %d B (got %zu elems)",
               GPURING_LL_STEP_BYTES, out.chunk_elems);
        p.algo = GPURING_ALGO_GATHER;
        gpuring_tuning_plan(&g, &p, 16384 / 4, 4, 1, &out);
        EXPECT(out.algo == GPURING_ALGO_RING, "forced LL: a 16 KiB gather does not fit a step");
        gpuring_tuning_plan(&g, &p, 4096 / 4, 4, 1, &out);
        EXPECT(out.algo == GPURING_ALGO_GATHER && out.ll == 1, "forced LL: a 4 KiB gather does");
        p.algo = GPURING_ALGO_AUTO;
        p.proto = GPURING_PROTO_SIMPLE;
        gpuring_tuning_plan(&g, &p, 8 / 4, 4, 0, &out);
        EXPECT(out.ll == 0, "forced simple, 8 B: simple");
        gpuring_graph_free(&g);
        build(4, 1, &g);
        p.proto = GPURING_PROTO_AUTO;
        gpuring_tuning_plan(&g, &p, 8 / 4, 4, 0, &out);
        EXPECT(out.ll == 0, "every rank its own node: no shm edge, simple");
        gpuring_graph_free(&g);
    }
    /* every rank its own node: no edge has LL slots, so never LL */
    build(4, 1, &g);
    {
        gpuring_tuning_params_t p = {.algo = GPURING_ALGO_AUTO, .trees = 1, .device = 1,
                                     .slot_bytes = 512 * 1024, .proto = GPURING_PROTO_LL};
        gpuring_plan_t out;
        gpuring_tuning_plan(&g, &p, 64 / 4, 4, 0, &out);
        EXPECT(!out.ll, "4 nodes of one rank, forced LL: simple");
    }
    gpuring_graph_free(&g);
    /* the model's costs: latency counts steps, bandwidth counts bytes */
    build(64, 1, &g);
    EXPECT(gpuring_tuning_cost(&g, GPURING_COLL_ALLREDUCE, GPURING_ALGO_TREE, 8) <
               gpuring_tuning_cost(&g, GPURING_COLL_ALLREDUCE, GPURING_ALGO_RING, 8),
           "64 nodes, 8 B: tree cheaper");
    EXPECT(gpuring_tuning_cost(&g, GPURING_COLL_ALLREDUCE, GPURING_ALGO_RING, 1 << 30) <
               gpuring_tuning_cost(&g, GPURING_COLL_ALLREDUCE, GPURING_ALGO_TREE, 1 << 30),
           "64 nodes, 1 GiB: ring cheaper");
    gpuring_graph_free(&g);
    test_other_colls();
    test_rooted_colls();
    return unit_report();
}
