/*
 * test_exec_cuda.c -- the CUDA executor (kernels/exec_cuda.h) on a real GPU:
 * n "ranks" (2..8) in one process, on one GPU, each rank's executor called
 * from its own thread on its own stream (every kernel is a few blocks, so
 * all ranks' kernels are resident together).  The FIFOs are mapped pinned
 * host memory laid out by gpuring_conn_attach, one per receiver, seen by
 * both ends as with shared memory.
 *
 * Ring, gather (ordered and unordered) and tree programs over 1..3
 * channels (rings: identity or reversed order; trees: heaps of arity 2 or
 * 3 rooted at different ranks), int32 sum, float sum (integer values, so
 * every summation order gives the same bits) and float16 max (normal
 * numbers only: no zeros or nans, whose max depends on order); counts 1,
 * 17, 4099 and 2^20 (gather: what fits one slot), in place and not; each
 * configuration runs twice over the same FIFOs, so the second run starts
 * from the first one's step counters.  Every rank's result must equal the
 * gpuring_reduce_host() reference bit for bit.
 *
 * The direct kernel (no FIFOs): n ranks' buffers, each rank's share in
 * turn, every output checked against the same reference, in place or not,
 * aligned, misaligned alike and misaligned per rank.  The LL direct kernel:
 * n ranks' inboxes, calls in a row over them up to 64 KiB (and the most a
 * call may be, 1 MiB), buffers at addresses their element size does not
 * divide, a call of another id, a rank that never comes and one that gives
 * up on the call before it (test_direct_ll); and calls across the LL flags'
 * wrap and clean window, their inbox rows poisoned with the flags of calls
 * to come, which the kernels must clean (run_direct_ll_clean; rings
 * likewise, test_ll_clean).
 *
 * The unrolled pack loops (exec_cuda.cu, GPURING_EXEC_UNROLL packs per
 * thread per trip): direct calls of one block whose counts are whole trips
 * plus every number of leftover packs class (none, one, a warp's, all but
 * one) plus every tail length, aligned, shifted alike (a scalar head) and
 * misaligned per rank; and FIFO programs over slots of several trips
 * (T_BIG_SLOT_BYTES), whose ring, accumulate (gather) and fold (ordered
 * gather) operations run the unrolled body, leftovers and tail, with the
 * buffers aligned or all shifted by one element.  32 channels
 * (GPURING_EXEC_CUDA_MAX_CHANNELS; fewer on the CPU runtime, see
 * test_max_channels): rings, trees and gathers.
 *
 * The other collectives' programs (test_colls): reduce-scatter and
 * allgather on the ring, bcast and reduce on the ring's chain and on the
 * tree, every root of three (first, last, middle), simple and LL, in place
 * where MPI has it, 2, 3 and 5 ranks, against references built from every
 * rank's input.
 *
 * Then: a NET connection not mapped for the device is refused
 * (GPURING_ERR_INVALID), mapped ones run (sizes recorded), a new CUDA
 * IPC FIFO (gpuring_conn_ipc_recv_create) holds only zeros before its
 * slots, whatever its memory held, and a
 * timeout: one rank is never launched, every other one must return within
 * its timeout + 2 s: GPURING_ERR_TIMEOUT, or GPURING_ERR_REMOTE when a peer
 * timed out first and abandoned the call to it; at least one times out.
 * And a sender that times out with its FIFO full (a chain bcast whose
 * second rank starts late): the late receiver reads the steps posted, then
 * fails at once, as does the rank after it; over a NET end, the sender's
 * executor hands it to the proxy, which posts the abandon step once a slot
 * frees (test_abandon_full).  An LL sender that gives up after its step's
 * header, before its data: the receiver already waiting for the data fails
 * at once (test_ll_abandon_midstep).
 *
 * Without a usable GPU: "SKIP: no CUDA device (reason)", exit 77.
 * Otherwise the last line is "N passed, N failed".  GPURING_TEST_SEED sets
 * the seed.  Run by test/gpu/run_gpu_tests.sh, not by make check.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "kernels/exec_cuda.h"
#include "kernels/reduce.h"
#include "test/gpu/gpu_test.h"
#include "test/ll_rows.h"

#define T_MAXR 8
#define T_MAXCH GPURING_EXEC_CUDA_MAX_CHANNELS
#define T_MATRIX_CH 3 /* the main matrix: 1..3 channels */
#define T_SLOT_BYTES (32u * 1024u)
/* packs one trip of the unrolled loops covers: GPURING_EXEC_UNROLL (4) per thread */
#define T_TRIP_PACKS (4u * GPURING_EXEC_CUDA_THREADS)
/* big slots (channels 0..T_BIGCH-1 only): 3.5 trips, so one operation runs the
 * unrolled body three times, then leftovers */
#define T_BIG_SLOT_BYTES (T_TRIP_PACKS * 16u * 7u / 2u)
#define T_BIGCH 2
#define T_MAXCOUNT ((size_t)1 << 20)
#define T_TIMEOUT 20.0 /* seconds without progress: a hang fails, slowly */

typedef enum { T_RING, T_TREE, T_GATHER_U, T_GATHER_O } t_algo_t;
static const char *t_algo_name[] = { "ring", "tree", "gather", "gather-ordered" };

/* one FIFO (receiver-owned), mapped: host view and device view */
typedef struct t_fifo {
    char *host, *dev;
} t_fifo_t;

typedef struct t_rank {
    /* connections: ring peer 0; tree peer 0 = parent, 1..3 = children */
    gpuring_conn_t ring_send[T_MAXCH], ring_recv[T_MAXCH];
    gpuring_conn_t tree_send[T_MAXCH][GPURING_MAX_PEERS], tree_recv[T_MAXCH][GPURING_MAX_PEERS];
    gpuring_exec_channel_t ch[T_MAXCH];
    gpuring_exec_args_t args;
    cudaStream_t stream;
    void *d_in, *d_out, *d_scratch;
    gpuring_status_t st;
    const int *start_after; /* its call starts once this is set (test_abandon_full) */
    int done;               /* atomic: its call returned */
    double secs, end;       /* its call's, from its start; when it returned */
} t_rank_t;

static t_rank_t ranks[T_MAXR];
static t_fifo_t ring_fifo[T_MAXCH][T_MAXR];      /* into rank r on ring c */
static t_fifo_t up_fifo[T_MAXCH][T_MAXR];        /* r -> its parent, at the parent */
static t_fifo_t down_fifo[T_MAXCH][T_MAXR];      /* parent -> r, at r */
/* the same with T_BIG_SLOT_BYTES slots, for channels < T_BIGCH */
static t_fifo_t big_ring_fifo[T_BIGCH][T_MAXR], big_up_fifo[T_BIGCH][T_MAXR],
    big_down_fifo[T_BIGCH][T_MAXR];
static unsigned char *h_in[T_MAXR], *h_ref, *h_out;

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- topology: ring positions and heap trees, per channel ------------------------- */
static int ring_pos(int n, int c, int r) { return c % 2 == 0 ? r : (n - r) % n; }
static int ring_rank(int n, int c, int pos) { return c % 2 == 0 ? pos : (n - pos) % n; }
static int tree_arity(int c) { return c % 2 == 0 ? 2 : 3; }
static int tree_v(int n, int c, int r) { return (r + c) % n; } /* heap index of rank r */
static int tree_rank(int n, int c, int v) { return (v - c % n + n) % n; }
static int tree_parent(int n, int c, int r)
{
    int v = tree_v(n, c, r);
    return v == 0 ? -1 : tree_rank(n, c, (v - 1) / tree_arity(c));
}
static int tree_nchildren(int n, int c, int r)
{
    int k = tree_arity(c), first = tree_v(n, c, r) * k + 1, nc = n - first;
    return nc < 0 ? 0 : (nc > k ? k : nc);
}
/* peer slot (1..) of child r at its parent */
static int tree_slot(int n, int c, int r) { return 1 + (tree_v(n, c, r) - 1) % tree_arity(c); }

static void fifo_alloc(t_fifo_t *f, size_t slot_bytes)
{
    void *h, *d;
    size_t bytes = gpuring_conn_fifo_bytes(GPURING_CONN_SHM, slot_bytes);

    TEST_CUDA(cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    TEST_CUDA(cudaHostGetDevicePointer(&d, h, 0));
    memset(h, 0, bytes);
    f->host = h;
    f->dev = d;
}

static void fifo_link(t_fifo_t *f, gpuring_conn_t *s, int sender, gpuring_conn_t *r,
                      int receiver, int c, size_t slot_bytes)
{
    /* the ctrl page (tail = head = 0) and the LL slots (no flag) */
    memset(f->host, 0, gpuring_conn_fifo_bytes(GPURING_CONN_SHM, slot_bytes) -
                           GPURING_NSTEPS * slot_bytes);
    gpuring_conn_attach(s, GPURING_CONN_SHM, GPURING_CONN_SEND, receiver, c, slot_bytes,
                        f->dev);
    gpuring_conn_attach(r, GPURING_CONN_SHM, GPURING_CONN_RECV, sender, c, slot_bytes,
                        f->dev);
}

/* Fresh FIFOs and connections (step 0) for n ranks, slots of T_SLOT_BYTES or
 * (big) T_BIG_SLOT_BYTES on channels < T_BIGCH. */
static void links_reset_slots(int n, int big)
{
    const size_t slot_bytes = big ? T_BIG_SLOT_BYTES : T_SLOT_BYTES;
    const int nch = big ? T_BIGCH : T_MAXCH;

    for (int r = 0; r < T_MAXR; r++) { /* no connection left from an earlier n */
        memset(ranks[r].ring_send, 0, sizeof(ranks[r].ring_send));
        memset(ranks[r].ring_recv, 0, sizeof(ranks[r].ring_recv));
        memset(ranks[r].tree_send, 0, sizeof(ranks[r].tree_send));
        memset(ranks[r].tree_recv, 0, sizeof(ranks[r].tree_recv));
    }
    for (int r = 0; r < n; r++) {
        for (int c = 0; c < nch; c++) {
            int next = ring_rank(n, c, (ring_pos(n, c, r) + 1) % n), p = tree_parent(n, c, r);
            fifo_link(big ? &big_ring_fifo[c][next] : &ring_fifo[c][next],
                      &ranks[r].ring_send[c], r, &ranks[next].ring_recv[c], next, c, slot_bytes);
            if (p >= 0) {
                int slot = tree_slot(n, c, r);
                fifo_link(big ? &big_up_fifo[c][r] : &up_fifo[c][r], &ranks[r].tree_send[c][0],
                          r, &ranks[p].tree_recv[c][slot], p, c, slot_bytes);
                fifo_link(big ? &big_down_fifo[c][r] : &down_fifo[c][r],
                          &ranks[p].tree_send[c][slot], p, &ranks[r].tree_recv[c][0], r, c,
                          slot_bytes);
            }
        }
    }
}

static void links_reset(int n) { links_reset_slots(n, 0); }

/* ---- one configuration ------------------------------------------------------------- */
typedef struct t_cfg {
    t_algo_t algo;
    int n, nch, inplace;
    gpuring_type_t type;
    gpuring_op_t op;
    size_t count, chunk;
    double timeout;
    int skip_rank; /* -1: all run */
    int big;       /* T_BIG_SLOT_BYTES slots (nch <= T_BIGCH) */
    int mis;       /* send, receive and scratch buffers start this many elements late */
    int ll;        /* the LL protocol (steps of at most GPURING_LL_STEP_BYTES) */
    int mixed;     /* ll: the connections into rank 0 have no LL slots (simple, as NET) */
    uint64_t step0; /* ring: the connections' first step, their LL rows poisoned (0: fresh) */
} t_cfg_t;

/* rank r's send / receive buffer of the configuration (shifted by cfg->mis) */
static char *cfg_in(const t_cfg_t *cfg, int r)
{
    const size_t shift = (size_t)cfg->mis * gpuring_type_size(cfg->type);
    return (char *)(cfg->inplace ? ranks[r].d_out : ranks[r].d_in) + shift;
}

static char *cfg_out(const t_cfg_t *cfg, int r)
{
    return (char *)ranks[r].d_out + (size_t)cfg->mis * gpuring_type_size(cfg->type);
}

static void setup_channels(const t_cfg_t *cfg)
{
    size_t per = GPURING_DIV_UP(cfg->count, (size_t)cfg->nch);

    for (int r = 0; r < cfg->n; r++) {
        t_rank_t *x = &ranks[r];
        for (int c = 0; c < cfg->nch; c++) {
            gpuring_exec_channel_t *e = &x->ch[c];
            size_t base = GPURING_MIN(cfg->count, (size_t)c * per);
            size_t cnt = GPURING_MIN(per, cfg->count - base);

            memset(e, 0, sizeof(*e));
            switch (cfg->algo) {
            case T_RING:
                gpuring_ring_prog_init(&e->prog, base, cnt, cfg->chunk, cfg->n,
                                       ring_pos(cfg->n, c, r));
                break;
            case T_GATHER_U:
            case T_GATHER_O:
                gpuring_gather_prog_init(&e->prog, base, cnt, cfg->n, ring_pos(cfg->n, c, r),
                                         cfg->algo == T_GATHER_O);
                break;
            case T_TREE:
                gpuring_tree_prog_init(&e->prog, base, cnt, cfg->chunk, cfg->n,
                                       tree_parent(cfg->n, c, r) >= 0,
                                       tree_nchildren(cfg->n, c, r));
                break;
            }
            if (cfg->algo == T_TREE) {
                for (int i = 0; i < GPURING_MAX_PEERS; i++) {
                    e->send[i] = &x->tree_send[c][i];
                    e->recv[i] = &x->tree_recv[c][i];
                }
            } else {
                e->send[0] = &x->ring_send[c];
                e->recv[0] = &x->ring_recv[c];
            }
        }
        x->args = (gpuring_exec_args_t){
            .sendbuf = cfg_in(cfg, r), .recvbuf = cfg_out(cfg, r),
            .count = cfg->count, .type = cfg->type, .op = cfg->op, .nchannels = cfg->nch,
            .channels = x->ch,
            .scratch = (char *)x->d_scratch + (size_t)cfg->mis * gpuring_type_size(cfg->type),
            .timeout = cfg->timeout, .ll = cfg->ll};
    }
}

static void *rank_main(void *arg)
{
    t_rank_t *x = arg;
    double t0;

    if (cudaSetDevice(0) != cudaSuccess) {
        x->st = GPURING_ERR_CUDA;
        return NULL;
    }
    while (x->start_after != NULL && !__atomic_load_n(x->start_after, __ATOMIC_ACQUIRE))
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    t0 = now_sec();
    x->st = gpuring_exec_cuda_run(&x->args, x->stream);
    x->end = now_sec();
    x->secs = x->end - t0;
    __atomic_store_n(&x->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Run every rank but cfg->skip_rank, each on its own thread; wait for all. */
static void run_ranks(const t_cfg_t *cfg)
{
    pthread_t th[T_MAXR];

    for (int r = 0; r < cfg->n; r++) {
        ranks[r].done = 0;
        if (r == cfg->skip_rank) continue;
        if (pthread_create(&th[r], NULL, rank_main, &ranks[r]) != 0) {
            unit_result(0, "pthread_create");
            gpu_test_exit();
        }
    }
    for (int r = 0; r < cfg->n; r++) {
        if (r != cfg->skip_rank) pthread_join(th[r], NULL);
    }
}

/* random inputs and their reduction, rank 0 (op) rank 1 (op) ... */
static void make_inputs(const t_cfg_t *cfg)
{
    const size_t es = gpuring_type_size(cfg->type);

    for (int r = 0; r < cfg->n; r++) {
        for (size_t i = 0; i < cfg->count; i++) {
            uint64_t z = unit_rng();
            unsigned char *p = h_in[r] + i * es;
            if (cfg->type == GPURING_TYPE_FLOAT) {
                float f = (float)((int)(z % 1001) - 500);
                memcpy(p, &f, 4);
            } else if (cfg->type == GPURING_TYPE_DOUBLE) {
                double f = (double)((int)(z % 100001) - 50000);
                memcpy(p, &f, 8);
            } else if (cfg->type == GPURING_TYPE_FLOAT16) {
                /* normal numbers: exponent 1..30 */
                uint16_t h = (uint16_t)(((z & 1) << 15) | ((1 + (z >> 1) % 30) << 10) |
                                        ((z >> 8) & 0x3ff));
                memcpy(p, &h, 2);
            } else { /* integers: the low es bytes (little endian) */
                memcpy(p, &z, es);
            }
        }
    }
    memcpy(h_ref, h_in[0], cfg->count * es);
    for (int r = 1; r < cfg->n; r++) {
        gpuring_reduce_host(h_ref, h_ref, h_in[r], cfg->count, cfg->type, cfg->op);
    }
}

static void upload(const t_cfg_t *cfg)
{
    const size_t bytes = cfg->count * gpuring_type_size(cfg->type);

    for (int r = 0; r < cfg->n; r++) {
        TEST_CUDA(cudaMemcpy(cfg_in(cfg, r), h_in[r], bytes, cudaMemcpyHostToDevice));
        if (!cfg->inplace) TEST_CUDA(cudaMemset(cfg_out(cfg, r), 0xa5, bytes));
    }
    TEST_CUDA(cudaDeviceSynchronize());
}

static void describe(const t_cfg_t *cfg, char *buf, size_t len)
{
    snprintf(buf, len, "%s n=%d ch=%d %s %s count=%zu chunk=%zu %s%s mis=%d%s",
             t_algo_name[cfg->algo], cfg->n, cfg->nch, gpuring_type_name(cfg->type),
             gpuring_op_name(cfg->op), cfg->count, cfg->chunk,
             cfg->inplace ? "in-place" : "out-of-place", cfg->big ? " big-slots" : "", cfg->mis,
             !cfg->ll ? "" : cfg->mixed ? " LL (simple into rank 0)" : " LL");
}

static void check_results(const t_cfg_t *cfg, int pass)
{
    const size_t es = gpuring_type_size(cfg->type), bytes = cfg->count * es;
    char what[200];

    describe(cfg, what, sizeof(what));
    for (int r = 0; r < cfg->n; r++) {
        size_t bad = 0, first = 0;

        unit_result(ranks[r].st == GPURING_OK, "%s run %d: rank %d returned %s", what, pass, r,
                    gpuring_status_str(ranks[r].st));
        if (ranks[r].st != GPURING_OK) continue;
        TEST_CUDA(cudaMemcpy(h_out, cfg_out(cfg, r), bytes, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < cfg->count; i++) {
            if (memcmp(h_out + i * es, h_ref + i * es, es) != 0) {
                if (bad++ == 0) first = i;
            }
        }
        unit_result(bad == 0, "%s run %d: rank %d: %zu wrong elements, first at %zu", what,
                    pass, r, bad, first);
        if (!cfg->inplace) {
            TEST_CUDA(cudaMemcpy(h_out, cfg_in(cfg, r), bytes, cudaMemcpyDeviceToHost));
            unit_result(memcmp(h_out, h_in[r], bytes) == 0, "%s run %d: rank %d's input changed",
                        what, pass, r);
        }
    }
}

/* The connections into rank 0 without LL slots, as a NET edge has none: its steps
 * stay simple while the others' are LL, so operations mix the two. */
static void links_simple_into_rank0(int n)
{
    for (int r = 0; r < n; r++) {
        for (int c = 0; c < T_MAXCH; c++) {
            if (ranks[r].ring_send[c].peer == 0) ranks[r].ring_send[c].ll = NULL;
            if (r == 0) ranks[r].ring_recv[c].ll = NULL;
            for (int i = 0; i < GPURING_MAX_PEERS; i++) {
                if (ranks[r].tree_send[c][i].peer == 0) ranks[r].tree_send[c][i].ll = NULL;
                if (r == 0) ranks[r].tree_recv[c][i].ll = NULL;
            }
        }
    }
}

/*
 * LL flags come back (proxy/conn.h): the ring's connections start at cfg->step0, as
 * if that many steps had gone before, and every unit of every LL row (headers
 * included) holds the flag of a step to come on the row, T_POISON_AHEAD steps on
 * (what units left there for GPURING_NSTEPS * (2^32 - 1) steps would hold), over data
 * the call never sent.  A run that makes its row's step of a clean window
 * (gpuring_ll_clean_due) must leave no such unit: a kernel receiver would take one
 * before its sender's data, a receiver polling for that step's header such a header.
 */
#define T_POISON_AHEAD 256u

static uint32_t ll_poison_flag(uint64_t step0, unsigned row)
{
    return gpuring_ll_flag(test_ll_row_step(step0 + T_POISON_AHEAD, row));
}

/* LL row `row` of the ring FIFO into rank r on channel c, at its host address */
static uint64_t *ll_row_host(int r, int c, unsigned row)
{
    const t_fifo_t *f = &ring_fifo[c][r];

    return (uint64_t *)((char *)f->host + (ranks[r].ring_recv[c].ll - (char *)f->dev) +
                        (size_t)row * GPURING_LL_SLOT_BYTES);
}

static void links_start_at(const t_cfg_t *cfg)
{
    for (int r = 0; r < cfg->n; r++) {
        for (int c = 0; c < cfg->nch; c++) {
            gpuring_fifo_ctrl_t *ctrl = (gpuring_fifo_ctrl_t *)ring_fifo[c][r].host;

            ranks[r].ring_send[c].step = ranks[r].ring_recv[c].step = cfg->step0;
            ctrl->head = ctrl->tail = cfg->step0;
            for (unsigned k = 0; k < GPURING_NSTEPS; k++) {
                uint64_t *row = ll_row_host(r, c, k);
                for (unsigned u = 0; u < GPURING_LL_SLOT_BYTES / 8; u++)
                    row[u] = gpuring_ll_unit(0xdeadbeefu, ll_poison_flag(cfg->step0, k));
            }
        }
    }
}

static void ll_clean_check(const t_cfg_t *cfg)
{
    char what[200];

    describe(cfg, what, sizeof(what));
    for (int r = 0; r < cfg->n; r++) {
        for (int c = 0; c < cfg->nch; c++) {
            const uint64_t end = ranks[r].ring_recv[c].step;
            size_t left = 0;

            for (unsigned k = 0; k < GPURING_NSTEPS; k++) {
                const uint64_t *row = ll_row_host(r, c, k);
                for (unsigned u = 0; u < GPURING_LL_SLOT_BYTES / 8; u++)
                    left += (uint32_t)(row[u] >> 32) == ll_poison_flag(cfg->step0, k);
            }
            /* the window's steps made, and no poisoned unit taken */
            unit_result(end >= (cfg->step0 / GPURING_LL_CLEAN_PERIOD + 1) *
                                       GPURING_LL_CLEAN_PERIOD + GPURING_NSTEPS &&
                            end < cfg->step0 + T_POISON_AHEAD,
                        "%s from step %llu: rank %d channel %d ended at step %llu", what,
                        (unsigned long long)cfg->step0, r, c, (unsigned long long)end);
            unit_result(left == 0, "%s from step %llu: %zu units of rank %d's LL rows on "
                        "channel %d still carry a flag to come", what,
                        (unsigned long long)cfg->step0, left, r, c);
        }
    }
}

static void run_config(const t_cfg_t *cfg)
{
    links_reset_slots(cfg->n, cfg->big);
    if (cfg->mixed) links_simple_into_rank0(cfg->n);
    if (cfg->step0 != 0) links_start_at(cfg);
    make_inputs(cfg);
    for (int pass = 0; pass < 2; pass++) { /* the second one continues the steps */
        setup_channels(cfg);
        upload(cfg);
        run_ranks(cfg);
        check_results(cfg, pass);
    }
    if (cfg->step0 != 0) ll_clean_check(cfg);
}

/* ---- the direct kernel (gpuring_exec_cuda_direct) ---------------------------------------- */
/*
 * n ranks' buffers in one process: rank r's call reduces its share (split
 * as gpuring_comm.c splits it: multiples of 16 bytes) from every input into
 * every output.  The calls run one after another: the direct kernel waits
 * on nothing.  `mis` shifts rank r's buffers by (r * mis) elements: 0 keeps
 * them 16-byte aligned (packs), 1 misaligns them differently per rank
 * (element by element), -1 shifts every rank alike by one element (a
 * scalar head, then packs).
 */
static void run_direct(int n, gpuring_type_t type, gpuring_op_t op, size_t count, int inplace,
                       int mis)
{
    const size_t es = gpuring_type_size(type), bytes = count * es;
    const size_t pack = 16 / es, share = GPURING_DIV_UP(GPURING_DIV_UP(count, (size_t)n), pack) * pack;
    t_cfg_t cfg = {.n = n, .type = type, .op = op, .count = count, .inplace = inplace};
    char *in[T_MAXR], *out[T_MAXR], what[160];

    snprintf(what, sizeof(what), "direct n=%d %s %s count=%zu %s mis=%d", n,
             gpuring_type_name(type), gpuring_op_name(op), count,
             inplace ? "in-place" : "out-of-place", mis);
    make_inputs(&cfg);
    for (int r = 0; r < n; r++) {
        const size_t off = (mis < 0 ? 1 : (size_t)(r * mis) % pack) * es;
        out[r] = (char *)ranks[r].d_out + off;
        in[r] = inplace ? out[r] : (char *)ranks[r].d_in + off;
        TEST_CUDA(cudaMemcpy(in[r], h_in[r], bytes, cudaMemcpyHostToDevice));
        if (!inplace) TEST_CUDA(cudaMemset(out[r], 0xa5, bytes));
    }
    TEST_CUDA(cudaDeviceSynchronize());
    for (int me = 0; me < n; me++) {
        const size_t first = GPURING_MIN(count, (size_t)me * share);
        gpuring_exec_direct_args_t a = {.nranks = n, .count = GPURING_MIN(share, count - first),
                                        .type = type, .op = op, .timeout = T_TIMEOUT};
        gpuring_status_t st;

        for (int r = 0; r < n; r++) {
            a.in[r] = in[r] + first * es;
            a.out[r] = out[r] + first * es;
        }
        st = gpuring_exec_cuda_direct(&a, ranks[me].stream);
        unit_result(st == GPURING_OK, "%s: rank %d returned %s", what, me,
                    gpuring_status_str(st));
    }
    for (int r = 0; r < n; r++) {
        size_t bad = 0, firstbad = 0;

        TEST_CUDA(cudaMemcpy(h_out, out[r], bytes, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < count; i++) {
            if (memcmp(h_out + i * es, h_ref + i * es, es) != 0 && bad++ == 0) firstbad = i;
        }
        unit_result(bad == 0, "%s: rank %d: %zu wrong elements, first at %zu", what, r, bad,
                    firstbad);
        if (!inplace) {
            TEST_CUDA(cudaMemcpy(h_out, in[r], bytes, cudaMemcpyDeviceToHost));
            unit_result(memcmp(h_out, h_in[r], bytes) == 0, "%s: rank %d's input changed", what,
                        r);
        }
    }
}

static void test_direct(void)
{
    static const int ns[] = { 2, 3, 5, 8 };
    static const size_t counts[] = { 1, 17, 4099, T_MAXCOUNT - 8 };
    static const struct { gpuring_type_t type; gpuring_op_t op; } tops[] = {
        { GPURING_TYPE_INT32, GPURING_OP_SUM },
        { GPURING_TYPE_FLOAT, GPURING_OP_SUM },
        { GPURING_TYPE_FLOAT16, GPURING_OP_MAX },
    };
    unsigned long idx = 0;

    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++)
        for (size_t ti = 0; ti < sizeof(tops) / sizeof(tops[0]); ti++)
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++, idx++)
                for (int inplace = 0; inplace < 2; inplace++)
                    run_direct(ns[ni], tops[ti].type, tops[ti].op, counts[ci], inplace,
                               (int)(idx % 3) - 1);
    printf("direct done: %lu passed, %lu failed so far\n", unit_passed, unit_failed);
}

/* ---- the LL direct kernel (gpuring_exec_cuda_direct_ll) ---------------------------------- */
/*
 * n ranks' inboxes in one process (each rank's zeroed device memory, which
 * the others write directly), each rank's call on its own thread and
 * stream: the kernels wait for each other's units.  A run makes T_LL_CALLS
 * calls in a row over the same inboxes, fresh inputs each, so both rows
 * are used and reused; every output is checked against the reference and
 * the inputs must stay as they were.  `mis` shifts rank r's buffers by
 * (r * mis) elements (1: misaligned per rank, element by element; 0:
 * 8-byte units whole).  Faults, on the last call: T_LL_MISMATCH, the last
 * rank's call id differs (every rank GPURING_ERR_MISMATCH, long before the
 * timeout); T_LL_SKIP, the last rank makes no call (every other one
 * GPURING_ERR_TIMEOUT within its timeout + 2 s); T_LL_ABANDON, the last rank
 * gives up on the call before it (gpuring_exec_cuda_direct_ll_abandon, no
 * buffers: GPURING_OK there, every other rank GPURING_ERR_REMOTE long before
 * the timeout).  After a fault the inboxes are zeroed again and the sequence
 * starts over.
 */
#define T_LL_CALLS 3
#define T_LL_DEFAULT (64u * 1024u) /* coll_gpuring_direct_ll_size's default */
#define T_LL_SLOT GPURING_EXEC_DIRECT_LL_SLOT_BYTES(GPURING_EXEC_DIRECT_LL_MAX_BYTES)
#define T_LL_INBOX (2u * T_MAXR * T_LL_SLOT)
enum { T_LL_OK, T_LL_MISMATCH, T_LL_SKIP, T_LL_ABANDON };

typedef struct t_ll_rank {
    gpuring_exec_direct_ll_args_t a;
    cudaStream_t stream;
    gpuring_status_t st;
    double secs;
    int abandon; /* gives up on the call instead */
} t_ll_rank_t;

static void *t_ll_inbox[T_MAXR];
static uint64_t t_ll_seq; /* calls since the inboxes were zeroed */

static void ll_inboxes_zero(void)
{
    for (int r = 0; r < T_MAXR; r++) TEST_CUDA(cudaMemset(t_ll_inbox[r], 0, T_LL_INBOX));
    TEST_CUDA(cudaDeviceSynchronize());
    t_ll_seq = 0;
}

static void *ll_rank_main(void *arg)
{
    t_ll_rank_t *x = arg;
    double t0 = now_sec();

    if (cudaSetDevice(0) != cudaSuccess) {
        x->st = GPURING_ERR_CUDA;
        return NULL;
    }
    x->st = x->abandon ? gpuring_exec_cuda_direct_ll_abandon(&x->a, x->stream)
                       : gpuring_exec_cuda_direct_ll(&x->a, x->stream);
    x->secs = now_sec() - t0;
    return NULL;
}

static void run_direct_ll(int n, gpuring_type_t type, gpuring_op_t op, size_t count,
                          int inplace, int mis, int fault)
{
    const size_t es = gpuring_type_size(type), bytes = count * es;
    t_cfg_t cfg = {.n = n, .type = type, .op = op, .count = count, .inplace = inplace};
    t_ll_rank_t x[T_MAXR];
    pthread_t th[T_MAXR];
    char *in[T_MAXR], *out[T_MAXR], what[160];

    for (int call = 0; call < T_LL_CALLS; call++) {
        const int last = call == T_LL_CALLS - 1, f = last ? fault : T_LL_OK;

        snprintf(what, sizeof(what), "direct LL n=%d %s %s count=%zu %s mis=%d call %d%s", n,
                 gpuring_type_name(type), gpuring_op_name(op), count,
                 inplace ? "in-place" : "out-of-place", mis, call,
                 f == T_LL_MISMATCH ? " (mismatch)" : f == T_LL_SKIP ? " (a rank skips)"
                 : f == T_LL_ABANDON ? " (a rank gives up)" : "");
        make_inputs(&cfg);
        for (int r = 0; r < n; r++) {
            /* mis 1: rank r's buffers r elements off (mod 8); 2: 1 + r bytes off, not
             * aligned to their elements at all (a GPU faults on a typed access there) */
            const size_t off = mis == 2 ? (size_t)(1 + r) : (size_t)(r * mis) % 8 * es;
            out[r] = (char *)ranks[r].d_out + off;
            in[r] = inplace ? out[r] : (char *)ranks[r].d_in + off + (mis == 2 ? 2 : 0);
            TEST_CUDA(cudaMemcpy(in[r], h_in[r], bytes, cudaMemcpyHostToDevice));
            if (!inplace) TEST_CUDA(cudaMemset(out[r], 0xa5, bytes));
        }
        TEST_CUDA(cudaDeviceSynchronize());
        for (int r = 0; r < n; r++) {
            x[r] = (t_ll_rank_t){.stream = ranks[r].stream, .st = GPURING_OK};
            x[r].a = (gpuring_exec_direct_ll_args_t){
                .nranks = n, .rank = r, .sendbuf = in[r], .recvbuf = out[r], .count = count,
                .type = type, .op = op, .call = 1000 + t_ll_seq, .seq = t_ll_seq,
                .slot_bytes = T_LL_SLOT, .inbox = t_ll_inbox[r],
                .timeout = f == T_LL_SKIP ? 1.0 : T_TIMEOUT};
            for (int q = 0; q < n; q++) x[r].a.peer_inbox[q] = q == r ? NULL : t_ll_inbox[q];
        }
        if (f == T_LL_MISMATCH) x[n - 1].a.call++;
        if (f == T_LL_ABANDON) {
            x[n - 1].abandon = 1;
            x[n - 1].a.sendbuf = NULL;
            x[n - 1].a.recvbuf = NULL;
        }
        for (int r = 0; r < n; r++) {
            if (f == T_LL_SKIP && r == n - 1) continue;
            if (pthread_create(&th[r], NULL, ll_rank_main, &x[r]) != 0) {
                unit_result(0, "pthread_create");
                gpu_test_exit();
            }
        }
        for (int r = 0; r < n; r++) {
            if (!(f == T_LL_SKIP && r == n - 1)) pthread_join(th[r], NULL);
        }
        t_ll_seq++;
        if (f != T_LL_OK) {
            for (int r = 0; r < n - (f == T_LL_SKIP); r++) {
                const gpuring_status_t want = f == T_LL_SKIP      ? GPURING_ERR_TIMEOUT
                                              : f == T_LL_MISMATCH ? GPURING_ERR_MISMATCH
                                              : r == n - 1         ? GPURING_OK
                                                                   : GPURING_ERR_REMOTE;
                unit_result(x[r].st == want, "%s: rank %d returned %s, want %s", what, r,
                            gpuring_status_str(x[r].st), gpuring_status_str(want));
                unit_result(x[r].secs < (f == T_LL_SKIP ? 3.0 : T_TIMEOUT / 2),
                            "%s: rank %d took %.2f s", what, r, x[r].secs);
            }
            TEST_CUDA(cudaDeviceSynchronize()); /* the aborted kernels are gone */
            ll_inboxes_zero();
            return;
        }
        for (int r = 0; r < n; r++) {
            size_t bad = 0, firstbad = 0;

            unit_result(x[r].st == GPURING_OK, "%s: rank %d returned %s", what, r,
                        gpuring_status_str(x[r].st));
            TEST_CUDA(cudaMemcpy(h_out, out[r], bytes, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < count; i++) {
                if (memcmp(h_out + i * es, h_ref + i * es, es) != 0 && bad++ == 0) firstbad = i;
            }
            unit_result(bad == 0, "%s: rank %d: %zu wrong elements, first at %zu", what, r,
                        bad, firstbad);
            if (!inplace) {
                TEST_CUDA(cudaMemcpy(h_out, in[r], bytes, cudaMemcpyDeviceToHost));
                unit_result(memcmp(h_out, h_in[r], bytes) == 0, "%s: rank %d's input changed",
                            what, r);
            }
        }
    }
}

/*
 * LL flags coming back (proxy/conn.h): calls from seq 2^32 - 2, whose flags
 * run 2^32 - 1, 1, 2, the rows of the next two calls holding their flags
 * (what units left there for 2 (2^32 - 1) calls would hold) over data the
 * calls never sent.  The last two kernels clean the rows of the calls after
 * them (seq 2^32 and 2^32 + 1 are due): no such unit may be left.
 */
static void run_direct_ll_clean(int n)
{
    const size_t row_bytes = (size_t)n * T_LL_SLOT, units = row_bytes / 8;
    const uint64_t seq0 = (1ull << 32) - 2, next = seq0 + T_LL_CALLS;
    uint64_t *row = malloc(row_bytes);

    if (row == NULL) {
        unit_result(0, "malloc");
        gpu_test_exit();
    }
    ll_inboxes_zero();
    for (int k = 0; k < 2; k++) { /* row k: call next or next + 1, whichever is k's */
        const uint32_t flag = gpuring_ll_flag(next + ((next & 1) != (uint64_t)k));
        for (size_t u = 0; u < units; u++) row[u] = gpuring_ll_unit(0xdeadbeefu, flag);
        for (int r = 0; r < n; r++)
            TEST_CUDA(cudaMemcpy((char *)t_ll_inbox[r] + k * row_bytes, row, row_bytes,
                                 cudaMemcpyHostToDevice));
    }
    t_ll_seq = seq0;
    run_direct_ll(n, GPURING_TYPE_INT32, GPURING_OP_SUM, 5, 0, 0, T_LL_OK);
    for (int k = 0; k < 2; k++) {
        const uint32_t flag = gpuring_ll_flag(next + ((next & 1) != (uint64_t)k));
        for (int r = 0; r < n; r++) {
            size_t left = 0;

            TEST_CUDA(cudaMemcpy(row, (char *)t_ll_inbox[r] + k * row_bytes, row_bytes,
                                 cudaMemcpyDeviceToHost));
            for (size_t u = 0; u < units; u++) left += (uint32_t)(row[u] >> 32) == flag;
            unit_result(left == 0, "direct LL n=%d from call %llu: %zu units of rank %d's row "
                        "%d still carry flag %u, a call's to come", n,
                        (unsigned long long)seq0, left, r, k, flag);
        }
    }
    free(row);
    ll_inboxes_zero();
}

static void test_direct_ll(void)
{
    static const int ns[] = { 1, 2, 3, 8 };
    static const struct { gpuring_type_t type; gpuring_op_t op; } tops[] = {
        { GPURING_TYPE_INT8, GPURING_OP_SUM },  /* wraps */
        { GPURING_TYPE_INT32, GPURING_OP_SUM },
        { GPURING_TYPE_FLOAT16, GPURING_OP_MAX },
        { GPURING_TYPE_DOUBLE, GPURING_OP_SUM },
    };
    unsigned long idx = 0;

    for (int r = 0; r < T_MAXR; r++) TEST_CUDA(cudaMalloc(&t_ll_inbox[r], T_LL_INBOX));
    ll_inboxes_zero();
    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
        for (size_t ti = 0; ti < sizeof(tops) / sizeof(tops[0]); ti++) {
            const size_t es = gpuring_type_size(tops[ti].type);
            /* 1, a partial unit pair, odd, and the default limit (and one less) */
            const size_t counts[] = { 1, 3, 17, 4099 / es, T_LL_DEFAULT / es - 1,
                                      T_LL_DEFAULT / es };
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++, idx++) {
                /* the largest calls on one rank count only: the CPU runtime is slow */
                if (ci >= 4 && ns[ni] == 8 && ti != 0) continue;
                run_direct_ll(ns[ni], tops[ti].type, tops[ti].op, counts[ci], (int)(idx % 2),
                              (int)(idx % 3 == 0), T_LL_OK);
            }
        }
    }
    /* the most a call may be: every block of the kernel busy */
    run_direct_ll(2, GPURING_TYPE_INT32, GPURING_OP_SUM, GPURING_EXEC_DIRECT_LL_MAX_BYTES / 4, 1,
                  0, T_LL_OK);
    run_direct_ll(3, GPURING_TYPE_FLOAT16, GPURING_OP_MAX,
                  GPURING_EXEC_DIRECT_LL_MAX_BYTES / 2 - 1, 0, 1, T_LL_OK);
    /* buffers at addresses their elements do not divide (bytes moved one by one) */
    run_direct_ll(2, GPURING_TYPE_INT32, GPURING_OP_SUM, 4099, 0, 2, T_LL_OK);
    run_direct_ll(3, GPURING_TYPE_DOUBLE, GPURING_OP_SUM, 17, 1, 2, T_LL_OK);
    run_direct_ll(2, GPURING_TYPE_FLOAT16, GPURING_OP_MAX, 3, 0, 2, T_LL_OK);
    /* faults, then a clean run over the same inboxes */
    run_direct_ll(3, GPURING_TYPE_INT32, GPURING_OP_SUM, 17, 0, 0, T_LL_MISMATCH);
    run_direct_ll(2, GPURING_TYPE_FLOAT, GPURING_OP_SUM, 4099, 1, 0, T_LL_MISMATCH);
    run_direct_ll(3, GPURING_TYPE_INT32, GPURING_OP_SUM, 17, 0, 0, T_LL_SKIP);
    run_direct_ll(3, GPURING_TYPE_INT32, GPURING_OP_SUM, 17, 0, 0, T_LL_ABANDON);
    run_direct_ll(2, GPURING_TYPE_DOUBLE, GPURING_OP_SUM, 4099, 1, 0, T_LL_ABANDON);
    run_direct_ll(3, GPURING_TYPE_FLOAT, GPURING_OP_SUM, 4099, 0, 1, T_LL_OK);
    run_direct_ll_clean(2);
    run_direct_ll_clean(3);
    for (int r = 0; r < T_MAXR; r++) TEST_CUDA(cudaFree(t_ll_inbox[r]));
    printf("direct LL done: %lu passed, %lu failed so far\n", unit_passed, unit_failed);
}

/* ---- the unrolled pack loops and 32 channels --------------------------------------------- */
/*
 * Direct calls of one block (at most 64 KiB: EXEC_DIRECT_MIN_BLOCK_BYTES) by
 * one rank (n = 1: a copy) or 3 (a 3-input reduction, each rank's share a
 * third): whole trips, then none, one, 31 (a partial warp), 32 (a warp) or
 * all but one of a trip's packs left over, then every tail length (0 ..
 * pack - 1 elements), aligned (mis 0), shifted alike (-1: a scalar head) and
 * misaligned per rank (1: all scalar).
 */
static void test_unroll_direct(void)
{
    static const struct { gpuring_type_t type; gpuring_op_t op; } tops[] = {
        { GPURING_TYPE_INT32, GPURING_OP_SUM },
        { GPURING_TYPE_FLOAT16, GPURING_OP_MAX },
    };
    static const size_t left[] = { 0, 1, 31, 32, T_TRIP_PACKS - 1 };
    unsigned long idx = 0;

    for (size_t ti = 0; ti < sizeof(tops) / sizeof(tops[0]); ti++) {
        const size_t es = gpuring_type_size(tops[ti].type), pe = 16 / es;
        /* one block: at most 64 KiB, so at most 2 whole trips of 32 KiB */
        for (size_t trips = 0; trips <= 1; trips++) {
            for (size_t li = 0; li < sizeof(left) / sizeof(left[0]); li++) {
                for (size_t tail = 0; tail < pe; tail++) {
                    const size_t count = (trips * T_TRIP_PACKS + left[li]) * pe + tail;
                    if (count == 0) continue;
                    for (int n = 1; n <= 3; n += 2, idx++) {
                        run_direct(n, tops[ti].type, tops[ti].op, count * (size_t)n,
                                   (int)(idx % 2), (int)(idx % 3) - 1);
                    }
                }
            }
        }
        /* exactly two trips, the most one block gets */
        run_direct(1, tops[ti].type, tops[ti].op, 2 * T_TRIP_PACKS * pe, 0, 0);
        run_direct(1, tops[ti].type, tops[ti].op, 2 * T_TRIP_PACKS * pe - 1, 0, -1);
    }
    printf("unrolled direct done: %lu passed, %lu failed so far\n", unit_passed, unit_failed);
}

/*
 * FIFO programs whose operations are several trips long: slots of 3.5 trips
 * (T_BIG_SLOT_BYTES), counts that leave each channel's blocks whole trips,
 * leftover packs and tails.  Ring (reduce_copy), gather (accumulate),
 * ordered gather (fold over the scratch rows), tree; aligned, and every
 * buffer shifted by one element (then operations between a buffer and a
 * slot run scalar; the fold, receive buffer from scratch rows, keeps packs
 * after a scalar head where the rows' stride is a multiple of 16 bytes).
 */
static void test_unroll_fifo(void)
{
    static const struct { gpuring_type_t type; gpuring_op_t op; } tops[] = {
        { GPURING_TYPE_INT32, GPURING_OP_SUM },
        { GPURING_TYPE_FLOAT, GPURING_OP_SUM },
        { GPURING_TYPE_FLOAT16, GPURING_OP_MAX },
    };
    unsigned long idx = 0;

    for (int algo = T_RING; algo <= T_GATHER_O; algo++) {
        for (size_t ti = 0; ti < sizeof(tops) / sizeof(tops[0]); ti++) {
            const size_t es = gpuring_type_size(tops[ti].type), pe = 16 / es;
            const size_t slot_elems = T_BIG_SLOT_BYTES / es;
            /* n 3: the gather forwards what it accumulates; odd: counts that are not
             * whole packs (the ordered gather's rows then lose their common offset) */
            for (int n = 2; n <= 3; n++) {
                for (int mis = 0; mis < 2; mis++) {
                    for (int odd = 0; odd < 2; odd++, idx++) {
                        t_cfg_t cfg = {.algo = (t_algo_t)algo, .n = n,
                                       .nch = 1 + (int)(idx % T_BIGCH),
                                       .inplace = (int)(idx % 3 == 0), .type = tops[ti].type,
                                       .op = tops[ti].op, .chunk = slot_elems,
                                       .timeout = T_TIMEOUT, .skip_rank = -1, .big = 1,
                                       .mis = mis};
                        const size_t extra = odd ? 1 + idx % pe : 0;
                        /* the gather: each channel's region in one slot; others: several
                         * loops of blocks of 3.5 trips, then a shorter one */
                        const size_t per = algo >= T_GATHER_U
                                               ? slot_elems - 3 * pe - extra
                                               : 3 * slot_elems + T_TRIP_PACKS * pe / 2 + extra;
                        cfg.count = per * (size_t)cfg.nch;
                        run_config(&cfg);
                    }
                }
            }
        }
    }
    printf("unrolled fifo done: %lu passed, %lu failed so far\n", unit_passed, unit_failed);
}

/*
 * Every channel the executor allows, on rings, trees and the gather, 2 and 4
 * ranks.  On the CUDA CPU runtime a launch runs at most CUDACPU_MAX_BLOCKS
 * (16) blocks at once (channels are independent, so later ones wait their
 * turn), each a thread with 512 fiber stacks and their guard pages, about
 * 1024 memory mappings; a process may have vm.max_map_count (65530 by
 * default).  There 4 ranks in one process get 12 channels; 2 ranks get 32.
 */
#ifdef CUDACPU
#define T_BLOCKS_IN_PROCESS 48 /* blocks running at once, all ranks */
#define T_BLOCKS_PER_LAUNCH 16
#else
#define T_BLOCKS_IN_PROCESS (T_MAXR * T_MAXCH)
#define T_BLOCKS_PER_LAUNCH T_MAXCH
#endif
static int max_channels_for(int n)
{
    return n * GPURING_MIN(T_MAXCH, T_BLOCKS_PER_LAUNCH) <= T_BLOCKS_IN_PROCESS
               ? T_MAXCH
               : T_BLOCKS_IN_PROCESS / n;
}

static void test_max_channels(void)
{
    static const t_algo_t algos[] = { T_RING, T_TREE, T_GATHER_U, T_GATHER_O };

    for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
        for (int n = 2; n <= 4; n += 2) {
            const int nch = max_channels_for(n);
            t_cfg_t cfg = {.algo = algos[a], .n = n, .nch = nch, .inplace = n == 4,
                           .type = GPURING_TYPE_FLOAT, .op = GPURING_OP_SUM,
                           .count = T_MAXCOUNT - 5, .chunk = T_SLOT_BYTES / 4,
                           .timeout = T_TIMEOUT, .skip_rank = -1};
            if (algos[a] >= T_GATHER_U) cfg.count = (size_t)nch * 1000 + 7; /* a slot each */
            if (n == 4) cfg.chunk = 1000;
            run_config(&cfg);
        }
    }
    printf("max channels (%d at 2 ranks, %d at 4) done: %lu passed, %lu failed so far\n",
           max_channels_for(2), max_channels_for(4), unit_passed, unit_failed);
}

/* ---- the LL protocol (proxy/conn.h) --------------------------------------------------------- */
/*
 * Every algorithm under LL: 1-, 2-, 4- and 8-byte elements (int8 and int32
 * sum, float16 max, float and double sum), so a pair of units (8 data
 * bytes) holds 8, 4, 2 or 1 elements; counts of one element, odd ones and
 * many LL steps per channel; steps of a whole LL slot (8 KiB) or of 1001
 * elements (an odd number of units: the last pair has one); in place and
 * not; 1-3 channels; every third configuration with the connections into
 * rank 0 simple (operations that receive one protocol and send the other).
 * Each configuration runs twice over the same FIFOs, so the second run's
 * flags are those of later steps over slots the first one filled.
 */
static void test_ll(void)
{
    static const int ns[] = { 2, 3, 5 };
    static const size_t counts[] = { 1, 17, 4099, 65537 };
    static const struct { gpuring_type_t type; gpuring_op_t op; } tops[] = {
        { GPURING_TYPE_INT8, GPURING_OP_SUM },    { GPURING_TYPE_INT32, GPURING_OP_SUM },
        { GPURING_TYPE_FLOAT16, GPURING_OP_MAX }, { GPURING_TYPE_FLOAT, GPURING_OP_SUM },
        { GPURING_TYPE_DOUBLE, GPURING_OP_SUM },
    };
    unsigned long idx = 0;

    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
        for (int algo = T_RING; algo <= T_GATHER_O; algo++) {
            for (size_t ti = 0; ti < sizeof(tops) / sizeof(tops[0]); ti++) {
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++, idx++) {
                    const size_t es = gpuring_type_size(tops[ti].type);
                    t_cfg_t cfg = {.algo = (t_algo_t)algo, .n = ns[ni],
                                   .nch = 1 + (int)(idx % T_MATRIX_CH),
                                   .inplace = (int)(idx / 2 % 2), .type = tops[ti].type,
                                   .op = tops[ti].op, .count = counts[ci],
                                   .chunk = idx % 2 ? 1001 : GPURING_LL_STEP_BYTES / es,
                                   .timeout = T_TIMEOUT, .skip_rank = -1, .ll = 1,
                                   .mixed = idx % 3 == 0};

                    /* the gather moves a channel's whole region in one LL step */
                    if (algo >= T_GATHER_U &&
                        GPURING_DIV_UP(cfg.count, (size_t)cfg.nch) * es > GPURING_LL_STEP_BYTES) {
                        continue;
                    }
                    run_config(&cfg);
                }
            }
        }
        printf("LL n=%d done: %lu passed, %lu failed so far\n", ns[ni], unit_passed,
               unit_failed);
    }
}

/* LL flags coming back: rings from just before flag 2^32 - 1 through the clean window
 * at 2^32 (run_config's step0), LL and simple (whose steps clean the rows too). */
static void test_ll_clean(void)
{
    for (int ll = 0; ll <= 1; ll++) {
        for (int n = 2; n <= 3; n++) {
            t_cfg_t cfg = {.algo = T_RING, .n = n, .nch = 2, .type = GPURING_TYPE_INT32,
                           .op = GPURING_OP_SUM, .count = 400, .chunk = 16,
                           .timeout = T_TIMEOUT, .skip_rank = -1, .ll = ll,
                           .step0 = (1ull << 32) - 5};
            run_config(&cfg);
        }
    }
    printf("LL clean done: %lu passed, %lu failed so far\n", unit_passed, unit_failed);
}

/* ---- the other collectives' programs -------------------------------------------------- */
/*
 * Reduce-scatter and allgather (ring), bcast and reduce on the ring's chain
 * and on the tree, rooted at different ranks: the programs gpuring_enqueue.c
 * gives those collectives, set up the same way (each channel a part of each
 * rank's block of `count`; ring positions mapped to ranks through a device
 * copy, as the CUDA executor wants; the tree peer toward the root), simple
 * and LL, in place where MPI allows it.  References: reduce-scatter, rank r
 * gets block r of every input's reduction; allgather, every input in rank
 * order; bcast, the root's input everywhere; reduce, the reduction at the
 * root, and a non-root's buffer (its input: gpuring_comm_reduce gives the
 * executor no other) unchanged.
 */
typedef enum { C_RS, C_AG, C_BCAST, C_REDUCE, C_TREE_BCAST, C_TREE_REDUCE, C_COUNT } t_coll_t;
static const char *t_coll_name[] = { "reduce-scatter", "allgather", "bcast (chain)",
                                     "reduce (chain)", "bcast (tree)", "reduce (tree)" };
static int h_ring_ranks[T_MAXCH][T_MAXR]; /* rank at each ring position, per channel */
static int *d_ring_ranks;                 /* their device copy, T_MAXR per channel */

typedef struct t_ccfg {
    t_coll_t coll;
    int n, nch, root, inplace, ll;
    gpuring_type_t type;
    gpuring_op_t op;
    size_t count, chunk; /* count: one rank's block (RS, AG) or the buffer */
} t_ccfg_t;

/* The peer of rank r toward `root` in channel c's heap tree: 0 its parent, 1 + i
 * its child i, -1 at the root. */
static int tree_toward(int n, int c, int r, int root)
{
    const int k = tree_arity(c), v = tree_v(n, c, r);
    int u = tree_v(n, c, root), below = -1;

    while (u > v) { /* up from the root: does the walk meet r? */
        below = u;
        u = (u - 1) / k;
    }
    if (u != v) return 0;
    return below < 0 ? -1 : 1 + (below - 1) % k;
}

static int coll_rooted(t_coll_t coll) { return coll >= C_BCAST; }
static int coll_tree(t_coll_t coll) { return coll >= C_TREE_BCAST; }
static int coll_reduces(t_coll_t coll)
{
    return coll == C_RS || coll == C_REDUCE || coll == C_TREE_REDUCE;
}

/* rank r's send and receive buffers of the configuration */
static char *ccfg_out(const t_ccfg_t *cfg, int r)
{
    (void)cfg;
    return (char *)ranks[r].d_out;
}
static char *ccfg_in(const t_ccfg_t *cfg, int r)
{
    const size_t es = gpuring_type_size(cfg->type);

    switch (cfg->coll) {
    case C_RS: return cfg->inplace ? ccfg_out(cfg, r) : (char *)ranks[r].d_in;
    case C_AG: return cfg->inplace ? ccfg_out(cfg, r) + (size_t)r * cfg->count * es
                                   : (char *)ranks[r].d_in;
    case C_BCAST:
    case C_TREE_BCAST: return ccfg_out(cfg, r);
    default: return cfg->inplace && r == cfg->root ? ccfg_out(cfg, r) : (char *)ranks[r].d_in;
    }
}
/* where the executor writes: a reduce's non-root has no output of its own */
static char *ccfg_dst(const t_ccfg_t *cfg, int r)
{
    return (cfg->coll == C_REDUCE || cfg->coll == C_TREE_REDUCE) && r != cfg->root
               ? ccfg_in(cfg, r) : ccfg_out(cfg, r);
}
/* elements of one rank's input, and of its output */
static size_t ccfg_in_elems(const t_ccfg_t *cfg)
{
    return cfg->coll == C_RS ? cfg->count * (size_t)cfg->n : cfg->count;
}
static size_t ccfg_out_elems(const t_ccfg_t *cfg)
{
    return cfg->coll == C_AG ? cfg->count * (size_t)cfg->n : cfg->count;
}

static void coll_setup_channels(const t_ccfg_t *cfg)
{
    const int n = cfg->n;
    const size_t per = GPURING_DIV_UP(GPURING_DIV_UP(cfg->count, (size_t)cfg->nch),
                                      (size_t)GPURING_PROG_ALIGN_ELEMS) *
                       GPURING_PROG_ALIGN_ELEMS;

    for (int r = 0; r < n; r++) {
        t_rank_t *x = &ranks[r];
        for (int c = 0; c < cfg->nch; c++) {
            gpuring_exec_channel_t *e = &x->ch[c];
            const size_t base = GPURING_MIN(cfg->count, (size_t)c * per);
            const size_t cnt = GPURING_MIN(per, cfg->count - base);
            const int ix = ring_pos(n, c, r), root_ix = ring_pos(n, c, cfg->root);
            const int parent = tree_parent(n, c, r) >= 0, nchild = tree_nchildren(n, c, r);
            const int toward = tree_toward(n, c, r, cfg->root);

            memset(e, 0, sizeof(*e));
            switch (cfg->coll) {
            case C_RS:
                gpuring_rs_prog_init(&e->prog, base, cnt, cfg->count, cfg->chunk, n, ix,
                                     h_ring_ranks[c], 1);
                break;
            case C_AG:
                gpuring_ag_prog_init(&e->prog, base, cnt, cfg->count, cfg->chunk, n, ix,
                                     h_ring_ranks[c], 1);
                break;
            case C_BCAST:
                gpuring_bcast_prog_init(&e->prog, base, cnt, cfg->chunk, n, ix, root_ix);
                break;
            case C_REDUCE:
                gpuring_reduce_prog_init(&e->prog, base, cnt, cfg->chunk, n, ix, root_ix);
                break;
            case C_TREE_BCAST:
                gpuring_tree_bcast_prog_init(&e->prog, base, cnt, cfg->chunk, n, parent, nchild,
                                             toward);
                break;
            default:
                gpuring_tree_reduce_prog_init(&e->prog, base, cnt, cfg->chunk, n, parent,
                                              nchild, toward);
                break;
            }
            e->dev_ranks = d_ring_ranks + (size_t)c * T_MAXR;
            for (int i = 0; i < GPURING_MAX_PEERS; i++) {
                e->send[i] = coll_tree(cfg->coll) ? &x->tree_send[c][i]
                             : i == 0             ? &x->ring_send[c] : NULL;
                e->recv[i] = coll_tree(cfg->coll) ? &x->tree_recv[c][i]
                             : i == 0             ? &x->ring_recv[c] : NULL;
            }
        }
        x->args = (gpuring_exec_args_t){
            .sendbuf = ccfg_in(cfg, r), .recvbuf = ccfg_dst(cfg, r), .count = cfg->count,
            .type = cfg->type, .op = cfg->op, .nchannels = cfg->nch, .channels = x->ch,
            .scratch = x->d_scratch, .timeout = T_TIMEOUT, .ll = cfg->ll};
    }
}

/* every rank's input (the bcast's root's alone), every output poisoned */
static void coll_upload(const t_ccfg_t *cfg)
{
    const size_t es = gpuring_type_size(cfg->type);

    for (int r = 0; r < cfg->n; r++) {
        TEST_CUDA(cudaMemset(ccfg_out(cfg, r), 0xa5, ccfg_out_elems(cfg) * es));
        if (coll_rooted(cfg->coll) && !coll_reduces(cfg->coll) && r != cfg->root) continue;
        TEST_CUDA(cudaMemcpy(ccfg_in(cfg, r), h_in[r], ccfg_in_elems(cfg) * es,
                             cudaMemcpyHostToDevice));
    }
    TEST_CUDA(cudaDeviceSynchronize());
}

/* the elements `got` must hold, as [from, from + elems) of `want` */
static void coll_expect(const char *what, int r, const char *buf, const unsigned char *want,
                        size_t elems, size_t es)
{
    size_t bad = 0, first = 0;

    TEST_CUDA(cudaMemcpy(h_out, buf, elems * es, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < elems; i++) {
        if (memcmp(h_out + i * es, want + i * es, es) != 0 && bad++ == 0) first = i;
    }
    unit_result(bad == 0, "%s: rank %d: %zu wrong elements, first at %zu", what, r, bad, first);
}

static void coll_check(const t_ccfg_t *cfg, int pass)
{
    const size_t es = gpuring_type_size(cfg->type), count = cfg->count;
    char what[200];

    snprintf(what, sizeof(what), "%s n=%d ch=%d %s %s count=%zu chunk=%zu root=%d%s%s run %d",
             t_coll_name[cfg->coll], cfg->n, cfg->nch, gpuring_type_name(cfg->type),
             gpuring_op_name(cfg->op), count, cfg->chunk, cfg->root,
             cfg->inplace ? " in-place" : "", cfg->ll ? " LL" : "", pass);
    for (int r = 0; r < cfg->n; r++) {
        unit_result(ranks[r].st == GPURING_OK, "%s: rank %d returned %s", what, r,
                    gpuring_status_str(ranks[r].st));
        if (ranks[r].st != GPURING_OK) continue;
        switch (cfg->coll) {
        case C_RS:
            coll_expect(what, r, ccfg_out(cfg, r), h_ref + (size_t)r * count * es, count, es);
            break;
        case C_AG:
            for (int q = 0; q < cfg->n; q++) {
                coll_expect(what, r, ccfg_out(cfg, r) + (size_t)q * count * es, h_in[q], count,
                            es);
            }
            break;
        case C_BCAST:
        case C_TREE_BCAST:
            coll_expect(what, r, ccfg_out(cfg, r), h_in[cfg->root], count, es);
            break;
        default: /* the root's reduction; a non-root's input untouched */
            coll_expect(what, r, ccfg_dst(cfg, r), r == cfg->root ? h_ref : h_in[r], count, es);
            break;
        }
        if (!cfg->inplace && cfg->coll != C_BCAST && cfg->coll != C_TREE_BCAST) {
            coll_expect(what, r, ccfg_in(cfg, r), h_in[r], ccfg_in_elems(cfg), es);
        }
    }
}

/* Fresh FIFOs, the ring's ranks on the device, every rank's input (h_in[]) and
 * their reduction (h_ref). */
static void coll_reset(const t_ccfg_t *cfg)
{
    t_cfg_t inputs = {.n = cfg->n, .type = cfg->type, .op = cfg->op,
                      .count = ccfg_in_elems(cfg)};

    links_reset(cfg->n);
    for (int c = 0; c < cfg->nch; c++) {
        for (int pos = 0; pos < cfg->n; pos++) h_ring_ranks[c][pos] = ring_rank(cfg->n, c, pos);
    }
    TEST_CUDA(cudaMemcpy(d_ring_ranks, h_ring_ranks, sizeof(h_ring_ranks),
                         cudaMemcpyHostToDevice));
    make_inputs(&inputs);
}

static void run_coll(const t_ccfg_t *cfg)
{
    coll_reset(cfg);
    for (int pass = 0; pass < 2; pass++) { /* the second one continues the steps */
        coll_setup_channels(cfg);
        coll_upload(cfg);
        run_ranks(&(t_cfg_t){.n = cfg->n, .skip_rank = -1});
        coll_check(cfg, pass);
    }
}

static void test_colls(void)
{
    static const int ns[] = { 2, 3, 5 };
    static const size_t counts[] = { 1, 17, 4099 };
    static const struct { gpuring_type_t type; gpuring_op_t op; } tops[] = {
        { GPURING_TYPE_INT32, GPURING_OP_SUM },
        { GPURING_TYPE_FLOAT16, GPURING_OP_MAX },
    };
    unsigned long idx = 0;

    for (int coll = 0; coll < C_COUNT; coll++) {
        for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
            const int n = ns[ni], roots[] = { 0, n - 1, n / 2 };
            for (size_t ti = 0; ti < sizeof(tops) / sizeof(tops[0]); ti++) {
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                    for (int k = 0; k < 3; k++, idx++) {
                        const size_t es = gpuring_type_size(tops[ti].type);
                        t_ccfg_t cfg = {.coll = (t_coll_t)coll, .n = n,
                                        .nch = 1 + (int)(idx % T_MATRIX_CH),
                                        .root = coll_rooted((t_coll_t)coll) ? roots[k] : 0,
                                        .inplace = (int)(idx / 3 % 2), .ll = idx % 4 == 1,
                                        .type = tops[ti].type, .op = tops[ti].op,
                                        .count = counts[ci]};

                        /* RS and AG: in place or not; rooted: the three roots */
                        if (!coll_rooted(cfg.coll) && k == 2) continue;
                        if (!coll_rooted(cfg.coll)) cfg.inplace = k;
                        cfg.chunk = cfg.ll ? (idx % 8 < 4 ? 1001 : GPURING_LL_STEP_BYTES / es)
                                           : (idx % 2 ? 1000 : T_SLOT_BYTES / es);
                        run_coll(&cfg);
                    }
                }
            }
        }
        printf("%s done: %lu passed, %lu failed so far\n", t_coll_name[coll], unit_passed,
               unit_failed);
    }
}

/* ---- error paths ----------------------------------------------------------------------- */
static void test_refusals(void)
{
    t_cfg_t cfg = {.algo = T_RING, .n = 2, .nch = 1, .type = GPURING_TYPE_INT32,
                   .op = GPURING_OP_SUM, .count = 17, .chunk = 8192, .timeout = T_TIMEOUT,
                   .skip_rank = -1};
    gpuring_status_t st;

    links_reset(cfg.n);
    setup_channels(&cfg);
    ranks[0].ring_send[0].type = GPURING_CONN_NET;
    st = gpuring_exec_cuda_run(&ranks[0].args, ranks[0].stream);
    unit_result(st == GPURING_ERR_INVALID, "NET connection not mapped for the device: %s, want "
                "invalid", gpuring_status_str(st));
    ranks[0].ring_send[0].type = GPURING_CONN_SHM;
    ranks[0].ch[0].recv[0] = NULL;
    st = gpuring_exec_cuda_run(&ranks[0].args, ranks[0].stream);
    unit_result(st == GPURING_ERR_INVALID, "missing connection: %s, want invalid",
                gpuring_status_str(st));
    ranks[0].args.type = GPURING_TYPE_FLOAT;
    ranks[0].args.op = GPURING_OP_BXOR;
    st = gpuring_exec_cuda_run(&ranks[0].args, ranks[0].stream);
    unit_result(st == GPURING_ERR_NOT_SUPPORTED, "float bxor: %s, want not supported",
                gpuring_status_str(st));

    /* NET ends mapped for the device (these FIFOs are mapped host memory,
     * as gpuring_conn_map_device leaves a NET end): accepted, and the
     * kernel records each step's size for the proxy */
    links_reset(cfg.n);
    make_inputs(&cfg);
    setup_channels(&cfg);
    for (int r = 0; r < cfg.n; r++) {
        ranks[r].ring_send[0].type = GPURING_CONN_NET;
        ranks[r].ring_send[0].mapped_host = ring_fifo[0][(r + 1) % cfg.n].host;
        ranks[r].ring_recv[0].type = GPURING_CONN_NET;
        ranks[r].ring_recv[0].mapped_host = ring_fifo[0][r].host;
    }
    upload(&cfg);
    run_ranks(&cfg);
    check_results(&cfg, 0);
    for (int r = 0; r < cfg.n; r++) {
        const gpuring_fifo_ctrl_t *ctrl = (const gpuring_fifo_ctrl_t *)ring_fifo[0][r].host;
        unit_result(ctrl->tail == ranks[(r + cfg.n - 1) % cfg.n].ring_send[0].step && ctrl->tail > 0 &&
                        ctrl->size[0] > 0 && ctrl->size[0] <= cfg.count * sizeof(int32_t),
                    "mapped NET end into rank %d: tail %llu, step 0 size %llu B", r,
                    (unsigned long long)ctrl->tail, (unsigned long long)ctrl->size[0]);
    }
}

/* A CUDA IPC FIFO as the device plane makes it (gpuring_conn_ipc_recv_create):
 * its counters, call ids, sizes and LL flags all zero, whatever the allocation
 * held -- garbage on a GPU (first a freed block of the same size is filled with
 * 0xa5, likely what the FIFO gets), 0xa5 from the CPU runtime */
static void test_ipc_fifo_fresh(void)
{
    const size_t slot = T_SLOT_BYTES;
    const size_t bytes = gpuring_conn_fifo_bytes(GPURING_CONN_IPC, slot);
    const size_t head = bytes - GPURING_NSTEPS * slot; /* all but the simple slots */
    unsigned char *buf = malloc(head);
    gpuring_conn_handle_t h;
    gpuring_conn_t conn;
    gpuring_status_t st;
    void *junk = NULL;
    size_t at = 0;

    if (buf == NULL) gpu_test_exit();
    TEST_CUDA(cudaMalloc(&junk, bytes));
    TEST_CUDA(cudaMemset(junk, 0xa5, bytes));
    TEST_CUDA(cudaFree(junk));
    memset(&conn, 0, sizeof(conn));
    st = gpuring_conn_ipc_recv_create(&conn, 1, 0, slot, 10.0, &h);
    unit_result(st == GPURING_OK, "gpuring_conn_ipc_recv_create: %s", gpuring_status_str(st));
    if (st != GPURING_OK) {
        free(buf);
        return;
    }
    TEST_CUDA(cudaMemcpy(buf, conn.ipc_fifo, head, cudaMemcpyDeviceToHost));
    while (at < head && buf[at] == 0) at++;
    unit_result(at == head, "a new CUDA IPC FIFO: byte %zu of its %zu of counters and LL slots "
                "is %#x, want 0", at, head, at < head ? buf[at] : 0);
    gpuring_conn_ipc_destroy(&conn);
    free(buf);
}

static void test_timeout(int ll)
{
    t_cfg_t cfg = {.algo = T_RING, .n = 4, .nch = 2, .type = GPURING_TYPE_INT32,
                   .op = GPURING_OP_SUM, .count = 4099, .chunk = 1000, .timeout = 1.0,
                   .skip_rank = 2, .ll = ll};
    const char *proto = ll ? "LL" : "simple";

    links_reset(cfg.n);
    make_inputs(&cfg);
    setup_channels(&cfg);
    upload(&cfg);
    run_ranks(&cfg);
    int timed_out = 0;
    for (int r = 0; r < cfg.n; r++) {
        if (r == cfg.skip_rank) continue;
        timed_out += ranks[r].st == GPURING_ERR_TIMEOUT;
        unit_result(ranks[r].st == GPURING_ERR_TIMEOUT || ranks[r].st == GPURING_ERR_REMOTE,
                    "timeout (%s): rank %d returned %s", proto, r,
                    gpuring_status_str(ranks[r].st));
        unit_result(ranks[r].secs < cfg.timeout + 2.0, "timeout (%s): rank %d took %.2f s",
                    proto, r, ranks[r].secs);
    }
    unit_result(timed_out > 0, "timeout (%s): no rank timed out", proto);
    /* the aborted kernels are gone: the GPU still works */
    TEST_CUDA(cudaDeviceSynchronize());
}

/*
 * The last rank makes another call: another call id (`count_too`: 0), or 8
 * more elements (1: every step it sends says other bytes than its receiver
 * expects, and expects other bytes than it receives).  Every rank must fail
 * (GPURING_ERR_MISMATCH where it saw the wrong step, GPURING_ERR_REMOTE where
 * a peer abandoned the call), at least one with a mismatch, and long before
 * the timeout: abandon steps pass the failure on.  Under LL the header check
 * is all that keeps a receiver from waiting for units that never come.
 */
static void test_mismatch(int ll, int count_too)
{
    t_cfg_t cfg = {.algo = T_RING, .n = 3, .nch = 2, .type = GPURING_TYPE_INT32,
                   .op = GPURING_OP_SUM, .count = 4099, .chunk = 1000, .timeout = T_TIMEOUT,
                   .skip_rank = -1, .ll = ll};
    const char *what = count_too ? "8 more elements" : "another call id";
    const char *proto = ll ? "LL" : "simple";
    int mismatched = 0;

    links_reset(cfg.n);
    make_inputs(&cfg);
    if (count_too) { /* the last rank's programs of count + 8 elements, the others' of count */
        t_cfg_t other = cfg;
        gpuring_exec_channel_t ch[T_MAXCH];
        gpuring_exec_args_t args;

        other.count += 8;
        setup_channels(&other);
        memcpy(ch, ranks[cfg.n - 1].ch, sizeof(ch));
        args = ranks[cfg.n - 1].args;
        setup_channels(&cfg);
        memcpy(ranks[cfg.n - 1].ch, ch, sizeof(ch));
        ranks[cfg.n - 1].args = args;
    } else {
        setup_channels(&cfg);
        ranks[cfg.n - 1].args.call = 1;
    }
    upload(&cfg);
    run_ranks(&cfg);
    for (int r = 0; r < cfg.n; r++) {
        mismatched += ranks[r].st == GPURING_ERR_MISMATCH;
        unit_result(ranks[r].st == GPURING_ERR_MISMATCH || ranks[r].st == GPURING_ERR_REMOTE,
                    "mismatch (%s, %s): rank %d returned %s", what, proto, r,
                    gpuring_status_str(ranks[r].st));
        unit_result(ranks[r].secs < cfg.timeout / 2, "mismatch (%s, %s): rank %d took %.2f s",
                    what, proto, r, ranks[r].secs);
    }
    unit_result(mismatched > 0, "mismatch (%s, %s): no rank saw a mismatch", what, proto);
    TEST_CUDA(cudaDeviceSynchronize());
}

/*
 * One channel fails while the other streams: rank 1's channel 0 runs its part in
 * steps of 96 elements, not 64 (a mismatch both ranks find at their first
 * received step), channel 1 the right program, thousands of 256-byte steps.
 * Each host aborts its call at channel 0's stop, and channel 1 -- whose steps
 * keep coming, so that it may never wait long enough to read the abort in a
 * wait -- must leave long before its program's end (exec_cuda.cu:
 * EXEC_CUDA_ABORT_OPS), not write its output for as long as its program runs
 * after its host returned.
 */
static void test_mismatch_one_channel(void)
{
    t_cfg_t cfg = {.algo = T_RING, .n = 2, .nch = 2, .type = GPURING_TYPE_INT32,
                   .op = GPURING_OP_SUM, .count = T_MAXCOUNT - 16, .chunk = 64,
                   .timeout = T_TIMEOUT, .skip_rank = -1};
    t_cfg_t other = cfg;
    gpuring_exec_channel_t ch0;

    other.chunk = 96;
    links_reset(cfg.n);
    make_inputs(&cfg);
    setup_channels(&other);
    ch0 = ranks[1].ch[0];
    setup_channels(&cfg);
    ranks[1].ch[0] = ch0;
    upload(&cfg);
    run_ranks(&cfg);
    for (int r = 0; r < cfg.n; r++) {
        const gpuring_exec_channel_t *ch = &ranks[r].ch[1];

        unit_result(ranks[r].st == GPURING_ERR_MISMATCH || ranks[r].st == GPURING_ERR_REMOTE,
                    "mismatch on one channel: rank %d returned %s", r,
                    gpuring_status_str(ranks[r].st));
        unit_result(ranks[r].secs < cfg.timeout / 2, "mismatch on one channel: rank %d took "
                    "%.2f s", r, ranks[r].secs);
        unit_result(ch->next_op < ch->prog.nops / 2, "mismatch on one channel: rank %d's "
                    "streaming channel ran op %llu of %llu after the abort", r,
                    (unsigned long long)ch->next_op, (unsigned long long)ch->prog.nops);
    }
    TEST_CUDA(cudaDeviceSynchronize());
}

/*
 * test_abandon_full's stand-in for the proxy (proxy/proxy.h; exec_cuda.cu calls
 * it through a weak reference, which the component resolves to
 * proxy/conn_net_ucx.c's): the NET send ends handed to it, and their step then.
 */
static gpuring_conn_t *t_handed[T_MAXR];
static uint64_t t_handed_step[T_MAXR];
static int t_nhanded;

void gpuring_conn_net_abort_later(gpuring_conn_t *conn);
void gpuring_conn_net_abort_later(gpuring_conn_t *conn)
{
    const int k = __atomic_fetch_add(&t_nhanded, 1, __ATOMIC_RELAXED);

    if (k >= T_MAXR) return;
    t_handed[k] = conn;
    t_handed_step[k] = conn->step;
}

/*
 * A sender that gives up with every slot of its FIFO taken (its receiver is
 * late) marks the FIFO abandoned (proxy/conn.h): the receiver, once it runs,
 * reads the steps that are there and then fails at once (GPURING_ERR_REMOTE),
 * and so does the rank after it, told by its abandon -- neither waits for its
 * timeout (T_TIMEOUT).  A chain bcast of 3 ranks from rank 0, more than
 * GPURING_NSTEPS steps: the root posts GPURING_NSTEPS of them and times out
 * after T_ABANDON_ROOT_SEC; rank 1 starts once the root returned.  With
 * `net`, the root's connection to rank 1 is a NET end mapped for the device
 * (simple protocol): the root's executor must hand it, marked, to the proxy
 * at the step it stopped at (gpuring_conn_net_abort_later), once and no
 * other; without, it hands none.
 */
#define T_ABANDON_ROOT_SEC 1.0
/* "at once": well under T_TIMEOUT, the 20 s a rank that missed the abandon waits (a
 * GPU takes milliseconds; the CPU runtime under two test suites' load on 2 cores took
 * 1.7-2.1 s, past the 1.5 s this was) */
#define T_ABANDON_PROMPT_SEC 5.0
static void test_abandon_full(int ll, int net)
{
    const t_ccfg_t cfg = {.coll = C_BCAST, .n = 3, .nch = 1, .root = 0, .ll = ll && !net,
                          .type = GPURING_TYPE_INT32, .op = GPURING_OP_SUM,
                          .count = 256 * (GPURING_NSTEPS + 12), .chunk = 256};
    const size_t es = gpuring_type_size(cfg.type);
    char what[64];

    snprintf(what, sizeof(what), "abandoned full FIFO (%s%s)", cfg.ll ? "LL" : "simple",
             net ? ", NET end" : "");
    coll_reset(&cfg);
    coll_setup_channels(&cfg);
    if (net) {
        ranks[0].ring_send[0].type = GPURING_CONN_NET;
        ranks[0].ring_send[0].mapped_host = ring_fifo[0][1].host;
        ranks[1].ring_recv[0].type = GPURING_CONN_NET;
        ranks[1].ring_recv[0].mapped_host = ring_fifo[0][1].host;
    }
    coll_upload(&cfg);
    ranks[0].args.timeout = T_ABANDON_ROOT_SEC;
    ranks[1].start_after = &ranks[0].done;
    t_nhanded = 0;
    run_ranks(&(t_cfg_t){.n = cfg.n, .skip_rank = -1});
    ranks[1].start_after = NULL;
    unit_result(ranks[0].st == GPURING_ERR_TIMEOUT, "%s: the root returned %s, want %s", what,
                gpuring_status_str(ranks[0].st), gpuring_status_str(GPURING_ERR_TIMEOUT));
    unit_result(net ? t_nhanded == 1 && t_handed[0] == &ranks[0].ring_send[0] &&
                          t_handed_step[0] == GPURING_NSTEPS
                    : t_nhanded == 0,
                "%s: %d ends handed to the proxy, want %s (the first: %s, at step %llu)", what,
                t_nhanded, net ? "the root's send end at step 8" : "none",
                t_nhanded == 0                               ? "none"
                : t_handed[0] == &ranks[0].ring_send[0] ? "it"
                                                             : "another",
                t_nhanded == 0 ? 0ull : (unsigned long long)t_handed_step[0]);
    for (int r = 1; r < cfg.n; r++) {
        /* rank 1 from its start, rank 2 (waiting from the start) from rank 1's end */
        const double took = r == 1 ? ranks[1].secs : ranks[2].end - ranks[1].end;

        unit_result(ranks[r].st == GPURING_ERR_REMOTE, "%s: rank %d returned %s, want %s", what,
                    r, gpuring_status_str(ranks[r].st), gpuring_status_str(GPURING_ERR_REMOTE));
        unit_result(took < T_ABANDON_PROMPT_SEC, "%s: rank %d took %.2f s %s, want < %.1f", what,
                    r, took, r == 1 ? "from its start" : "after rank 1 returned",
                    T_ABANDON_PROMPT_SEC);
        /* the steps the root posted before it gave up are read, and passed on */
        coll_expect(what, r, ccfg_out(&cfg, r), h_in[0], GPURING_NSTEPS * cfg.chunk, es);
    }
    TEST_CUDA(cudaDeviceSynchronize());
}

/*
 * An LL sender that gives up in the middle of a step: its header is out, its
 * data units are not (its own upstream's never came).  A ring of 3 on one
 * channel, LL: rank 0 makes no call, but the header of its first step lands
 * in rank 1's FIFO (written here, as its kernel would: exec_ll_post), so
 * rank 1 posts its next step's header to rank 2, waits for rank 0's units
 * and times out after T_ABANDON_ROOT_SEC.  Rank 2's threads already wait
 * for that step's units: they must find the abandon rank 1 writes over the
 * header (exec_ll_abort_header) and fail at once (GPURING_ERR_REMOTE), not
 * at their own timeout (T_TIMEOUT) -- before exec_ll_pair_wait looked at the
 * header, they waited for it.
 */
static void test_ll_abandon_midstep(void)
{
    t_cfg_t cfg = {.algo = T_RING, .n = 3, .nch = 1, .type = GPURING_TYPE_INT32,
                   .op = GPURING_OP_SUM, .count = 4099, .chunk = 1000, .timeout = T_TIMEOUT,
                   .skip_rank = 0, .ll = 1};
    const char *what = "LL step abandoned after its header";
    const gpuring_conn_t *in1 = &ranks[1].ring_recv[0];
    gpuring_step_t s = {0};
    uint64_t *row;

    links_reset(cfg.n);
    make_inputs(&cfg);
    setup_channels(&cfg);
    upload(&cfg);
    ranks[1].args.timeout = T_ABANDON_ROOT_SEC;
    /* rank 0's first send: its header alone, where rank 1's recv end reads step 0 */
    for (uint64_t op = 0; op < ranks[0].ch[0].prog.nops && s.send_mask == 0; op++)
        gpuring_prog_op(&ranks[0].ch[0].prog, op, &s);
    row = (uint64_t *)(ring_fifo[0][1].host + (in1->ll - ring_fifo[0][1].dev) +
                       (in1->step % GPURING_NSTEPS) * GPURING_LL_SLOT_BYTES);
    gpuring_conn_ll_header(row, s.count * gpuring_type_size(cfg.type), ranks[0].args.call,
                           gpuring_ll_flag(in1->step));
    run_ranks(&cfg);
    unit_result(ranks[1].st == GPURING_ERR_TIMEOUT, "%s: rank 1 returned %s, want %s", what,
                gpuring_status_str(ranks[1].st), gpuring_status_str(GPURING_ERR_TIMEOUT));
    unit_result(ranks[2].st == GPURING_ERR_REMOTE, "%s: rank 2 returned %s, want %s", what,
                gpuring_status_str(ranks[2].st), gpuring_status_str(GPURING_ERR_REMOTE));
    unit_result(ranks[2].end - ranks[1].end < T_ABANDON_PROMPT_SEC,
                "%s: rank 2 returned %.2f s after rank 1, want < %.1f", what,
                ranks[2].end - ranks[1].end, T_ABANDON_PROMPT_SEC);
    TEST_CUDA(cudaDeviceSynchronize());
}

int main(void)
{
    static const int ns[] = { 2, 3, 4, 5, 8 };
    static const size_t counts[] = { 1, 17, 4099, T_MAXCOUNT };
    static const struct { gpuring_type_t type; gpuring_op_t op; } tops[] = {
        { GPURING_TYPE_INT32, GPURING_OP_SUM },
        { GPURING_TYPE_FLOAT, GPURING_OP_SUM },
        { GPURING_TYPE_FLOAT16, GPURING_OP_MAX },
    };
    uint64_t seed;
    unsigned long idx = 0;

    if (gpu_test_device_or_skip() != 0) return 77;
    seed = unit_rng_seed();
    printf("seed %llu (GPURING_TEST_SEED)\n", (unsigned long long)seed);

    /* everything allocated before any rank runs: allocations may synchronise */
    TEST_CUDA(cudaSetDevice(0));
    if (gpuring_exec_cuda_init() != GPURING_OK) {
        unit_result(0, "gpuring_exec_cuda_init failed");
        gpu_test_exit();
    }
    for (int c = 0; c < T_MAXCH; c++) {
        for (int r = 0; r < T_MAXR; r++) {
            fifo_alloc(&ring_fifo[c][r], T_SLOT_BYTES);
            fifo_alloc(&up_fifo[c][r], T_SLOT_BYTES);
            fifo_alloc(&down_fifo[c][r], T_SLOT_BYTES);
            if (c >= T_BIGCH) continue;
            fifo_alloc(&big_ring_fifo[c][r], T_BIG_SLOT_BYTES);
            fifo_alloc(&big_up_fifo[c][r], T_BIG_SLOT_BYTES);
            fifo_alloc(&big_down_fifo[c][r], T_BIG_SLOT_BYTES);
        }
    }
    for (int r = 0; r < T_MAXR; r++) {
        /* 64 bytes more than the largest call: room for the shifted (mis) cases */
        TEST_CUDA(cudaStreamCreateWithFlags(&ranks[r].stream, cudaStreamNonBlocking));
        TEST_CUDA(cudaMalloc(&ranks[r].d_in, T_MAXCOUNT * 4 + 64));
        TEST_CUDA(cudaMalloc(&ranks[r].d_out, T_MAXCOUNT * 4 + 64));
        TEST_CUDA(cudaMalloc(&ranks[r].d_scratch,
                             (size_t)T_MAXR * T_SLOT_BYTES * T_MAXCH + 64));
        h_in[r] = malloc(T_MAXCOUNT * 4);
        if (h_in[r] == NULL) gpu_test_exit();
    }
    TEST_CUDA(cudaMalloc((void **)&d_ring_ranks, sizeof(h_ring_ranks)));
    h_ref = malloc(T_MAXCOUNT * 4);
    h_out = malloc(T_MAXCOUNT * 4);
    if (h_ref == NULL || h_out == NULL) gpu_test_exit();

    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
        for (int algo = T_RING; algo <= T_GATHER_O; algo++) {
            for (size_t ti = 0; ti < sizeof(tops) / sizeof(tops[0]); ti++) {
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                    for (int inplace = 0; inplace < 2; inplace++, idx++) {
                        t_cfg_t cfg = {.algo = (t_algo_t)algo, .n = ns[ni],
                                       .nch = 1 + (int)(idx % T_MATRIX_CH), .inplace = inplace,
                                       .type = tops[ti].type, .op = tops[ti].op,
                                       .count = counts[ci], .timeout = T_TIMEOUT,
                                       .skip_rank = -1};
                        const size_t es = gpuring_type_size(cfg.type);
                        size_t per = GPURING_DIV_UP(cfg.count, (size_t)cfg.nch);

                        cfg.chunk = (idx / T_MATRIX_CH) % 2 ? 1000 : T_SLOT_BYTES / es;
                        /* the gather moves a channel's whole region in one slot */
                        if ((algo == T_GATHER_U || algo == T_GATHER_O) &&
                            per * es > T_SLOT_BYTES) {
                            continue;
                        }
                        run_config(&cfg);
                    }
                }
            }
        }
        printf("n=%d done: %lu passed, %lu failed so far\n", ns[ni], unit_passed, unit_failed);
    }
    test_direct();
    test_direct_ll();
    test_unroll_direct();
    test_unroll_fifo();
    test_max_channels();
    test_refusals();
    test_ipc_fifo_fresh();
    test_ll();
    test_ll_clean();
    test_colls();
    for (int ll = 0; ll < 2; ll++) {
        test_mismatch(ll, 0);
        test_mismatch(ll, 1);
        test_timeout(ll);
        test_abandon_full(ll, 0);
    }
    test_abandon_full(0, 1);
    test_ll_abandon_midstep();
    test_mismatch_one_channel();
    /* and after the timeout, a normal run still works */
    {
        t_cfg_t cfg = {.algo = T_TREE, .n = 8, .nch = 3, .type = GPURING_TYPE_INT32,
                       .op = GPURING_OP_SUM, .count = 4099, .chunk = 1000,
                       .timeout = T_TIMEOUT, .skip_rank = -1};
        run_config(&cfg);
    }
    return unit_report();
}
