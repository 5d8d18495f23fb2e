/*
 * test_net_ring.c -- the ring allreduce over NET connections, as two virtual
 * nodes run it: two "ranks" of this process, each a thread running the host
 * executor (gpuring_exec_host_run, which drives the proxy itself) on the
 * sliced ring program gpuring_comm.c makes for rings that cross nodes, over
 * NET connections through this process's UCX worker.  No MPI.
 *
 * What it checks, from the FIFO counters:
 *   held back   rank 1 does not run yet: the steps rank 0 puts on each of
 *               its connections before it needs anything back (rank 1's
 *               recv tail - head: landed, not consumed) must be at least 4
 *               -- a connection that has work has at least 4 steps in
 *               flight (NCCL keeps its 8 slots busy; an unsliced 2-rank ring
 *               posts one step, then waits a round trip).  Deterministic:
 *               in this process UCX's self transport completes a send at
 *               once, so only a receiver that does not consume shows how
 *               far the sender's program runs ahead;
 *   running     both ranks run; the most steps a proxy pass found posted
 *               and not completed on a send end is printed (not checked:
 *               here sends complete as soon as they are posted);
 *   credits     batched: a credit message per half window (4 steps)
 *               consumed, sooner only when the whole window landed -- at
 *               most one per two steps (unbatched: one per step);
 *   results     every element right on both ranks, several calls in a row
 *               (steps continue across calls), 1 and 2 channels, in place;
 *   zero copy   with args.zcopy, every step an operation only copies into
 *               the output lands there, counted from the program and
 *               compared with the recv ends' counters -- all of them past
 *               the first NSTEPS of a call on its connection, and those
 *               among the first whose receive (posted during the call
 *               before) nothing had matched when the call started; without
 *               zcopy, none.  Except where UCX's copy into the output would
 *               run 1 to 31 bytes past its source modulo a page (kernels/
 *               reduce.h; the slots start GPURING_SLOTS_SKEW = 16 bytes into
 *               one, proxy/conn.h): with every step of the ring starting on a
 *               page of its buffer, an output placed 32 bytes into a page
 *               takes none, one 16 bytes in (as malloc places large buffers)
 *               or on a page all.
 * Prints one line per check and "N passed, N failed".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/gpuring_common.h"
#include "kernels/exec_host.h"
#include "proxy/conn.h"
#include "proxy/proxy.h"
#include "test/unit/unit_test.h"

#define NRANKS 2
#define MAXCH 2
#define PEER_KEY 0x2a11ull
#define MIN_INFLIGHT 4

typedef struct ring_rank {
    int rank, nch;
    size_t count, chunk;
    int in_place, zcopy;
    float *send, *recv;
    void *send_mem, *recv_mem; /* page-aligned; recv is recv_off bytes in */
    gpuring_conn_t sendc[MAXCH], recvc[MAXCH];
    gpuring_exec_channel_t exec[MAXCH];
    gpuring_proxy_t *proxy;
    gpuring_status_t st;
} ring_rank_t;

static ring_rank_t ranks[NRANKS];

static void *rank_main(void *arg)
{
    ring_rank_t *r = arg;
    size_t per = GPURING_DIV_UP(GPURING_DIV_UP(r->count, (size_t)r->nch), (size_t)16) * 16;
    gpuring_exec_args_t a = {.sendbuf = r->in_place ? r->recv : r->send, .recvbuf = r->recv,
                             .count = r->count, .type = GPURING_TYPE_FLOAT,
                             .op = GPURING_OP_SUM, .nchannels = r->nch, .channels = r->exec,
                             .timeout = 10.0, .proxy = r->proxy, .spin_polls = 0,
                             .zcopy = r->zcopy};

    for (int c = 0; c < r->nch; c++) {
        size_t base = GPURING_MIN(r->count, (size_t)c * per);
        /* as gpuring_comm.c makes it for a ring that crosses nodes */
        gpuring_ring_prog_init_sliced(&r->exec[c].prog, base, GPURING_MIN(per, r->count - base),
                                      r->chunk, NRANKS, r->rank, GPURING_RING_NET_SLICES);
        r->exec[c].send[0] = &r->sendc[c];
        r->exec[c].recv[0] = &r->recvc[c];
    }
    gpuring_proxy_active_begin(r->proxy, 1);
    r->st = gpuring_exec_host_run(&a);
    gpuring_proxy_active_end(r->proxy);
    return NULL;
}

/* Steps of one call on a recv end that zero copy lands in the output: those
 * only copied there (RECV | DST, maybe SEND) whose place in `recv` is not 1 to
 * 31 bytes past the slots' place in a page; *early_p of them among the first
 * NSTEPS (which land there only if not matched when the call starts). */
static uint64_t zcopy_expected(const gpuring_prog_t *p, const float *recv, uint64_t *early_p)
{
    uint64_t k = 0, n = 0;
    gpuring_step_t s;

    *early_p = 0;
    for (uint64_t i = 0; i < p->nops; i++) {
        gpuring_prog_op(p, i, &s);
        if (!(s.flags & GPURING_PRIM_RECV)) continue;
        const size_t past = ((uintptr_t)(recv + s.off) - GPURING_SLOTS_SKEW) % 4096;
        if (s.count > 0 && !(past >= 1 && past <= 31) &&
            (s.flags & ~(unsigned)GPURING_PRIM_SEND) == (GPURING_PRIM_RECV | GPURING_PRIM_DST)) {
            n++;
            *early_p += k < GPURING_NSTEPS;
        }
        k++;
    }
    return n;
}

/* rank r's input at i: small integers, so float sums are exact */
static float input(int r, size_t i, int iter) { return (float)((i * 7 + (size_t)r * 3 + (size_t)iter) % 1000); }

static void fill(int iter)
{
    for (int r = 0; r < NRANKS; r++) {
        float *in = ranks[r].in_place ? ranks[r].recv : ranks[r].send;
        for (size_t i = 0; i < ranks[r].count; i++) {
            in[i] = input(r, i, iter);
            if (!ranks[r].in_place) ranks[r].recv[i] = -1;
        }
    }
}

static size_t wrong(int iter)
{
    size_t bad = 0;

    for (int r = 0; r < NRANKS; r++) {
        for (size_t i = 0; i < ranks[r].count; i++) {
            float want = input(0, i, iter) + input(1, i, iter);
            if (ranks[r].recv[i] != want && bad++ < 3)
                printf("  rank %d [%zu]: %g, want %g\n", r, i, ranks[r].recv[i], want);
        }
    }
    return bad;
}

/* Rank r's connections on every channel: r sends to the other rank. */
static int connect_ranks(gpuring_proxy_t *proxy, int nch, size_t slot_bytes, uint64_t uid)
{
    const void *addr;
    size_t len;

    if (gpuring_proxy_address(proxy, &addr, &len) != GPURING_OK) return -1;
    for (int c = 0; c < nch; c++) {
        for (int r = 0; r < NRANKS; r++) {
            ring_rank_t *me = &ranks[r], *peer = &ranks[(r + 1) % NRANKS];
            gpuring_conn_handle_t hs, hr;
            uint32_t id = (uint32_t)(4 * c + 2 * r);

            if (gpuring_conn_net_create(proxy, &me->sendc[c], GPURING_CONN_SEND, peer->rank, c,
                                        slot_bytes, uid, id, -1, 0, &hs) != GPURING_OK ||
                gpuring_conn_net_create(proxy, &peer->recvc[c], GPURING_CONN_RECV, me->rank, c,
                                        slot_bytes, uid, id + 1, -1, 0, &hr) != GPURING_OK ||
                gpuring_conn_net_connect(proxy, &peer->recvc[c], &hs, PEER_KEY, 1, addr, len) !=
                    GPURING_OK ||
                gpuring_conn_net_connect(proxy, &me->sendc[c], &hr, PEER_KEY, 1, addr, len) !=
                    GPURING_OK)
                return -1;
        }
    }
    return 0;
}

static void disconnect_ranks(gpuring_proxy_t *proxy, int nch)
{
    for (int c = 0; c < nch; c++) {
        for (int r = 0; r < NRANKS; r++) {
            gpuring_conn_net_destroy(proxy, &ranks[r].sendc[c]);
            gpuring_conn_net_destroy(proxy, &ranks[r].recvc[c]);
        }
    }
}

static void run_case(gpuring_proxy_t *proxy, int nch, size_t count, size_t slot_bytes,
                     int in_place, int zcopy, size_t recv_off, int calls, uint64_t uid)
{
    pthread_t th[NRANKS];
    uint64_t running = ~0ull, steps = 0, credits = 0, zc = 0, zc_max = 0, zc_min = 0;
    size_t bad = 0;
    uint64_t held = 0, prev = ~0ull;
    gpuring_spin_t spin;

    memset(ranks, 0, sizeof(ranks));
    for (int r = 0; r < NRANKS; r++) {
        ranks[r] = (ring_rank_t){.rank = r, .nch = nch, .count = count,
                                 .chunk = slot_bytes / sizeof(float), .in_place = in_place,
                                 .zcopy = zcopy, .proxy = proxy};
        if (posix_memalign(&ranks[r].send_mem, 4096, count * sizeof(float)) != 0 ||
            posix_memalign(&ranks[r].recv_mem, 4096, count * sizeof(float) + recv_off) != 0) {
            EXPECT(0, "%zu floats: out of memory", count);
            goto out;
        }
        ranks[r].send = ranks[r].send_mem;
        ranks[r].recv = (float *)((char *)ranks[r].recv_mem + recv_off);
    }
    if (connect_ranks(proxy, nch, slot_bytes, uid) != 0) {
        EXPECT(0, "connect %d channels", nch);
        goto out;
    }

    /* 1. rank 1 held back: what rank 0 puts on channel 0 before needing an answer */
    fill(0);
    pthread_create(&th[0], NULL, rank_main, &ranks[0]);
    gpuring_spin_init(&spin, 5.0);
    for (;;) {
        uint64_t landed = GPURING_LOAD_ACQUIRE(&ranks[1].recvc[0].ctrl->tail);
        if (landed == prev || gpuring_spin_tick(&spin) != GPURING_OK) break;
        prev = landed;
        usleep(50 * 1000); /* quiet for 50 ms: rank 0 waits for rank 1 */
    }
    for (int c = 0; c < nch; c++) { /* the least over the channels */
        uint64_t n = GPURING_LOAD_ACQUIRE(&ranks[1].recvc[c].ctrl->tail) -
                     GPURING_LOAD_ACQUIRE(&ranks[1].recvc[c].ctrl->head);
        held = c == 0 ? n : GPURING_MIN(held, n);
    }
    pthread_create(&th[1], NULL, rank_main, &ranks[1]);
    for (int r = 0; r < NRANKS; r++) pthread_join(th[r], NULL);
    EXPECT(held >= MIN_INFLIGHT,
           "%d ch, %zu floats, %zu B slots: rank 0 put %llu steps on its connection before it "
           "needed its peer (want >= %d)",
           nch, count, slot_bytes, (unsigned long long)held, MIN_INFLIGHT);
    EXPECT(ranks[0].st == GPURING_OK && ranks[1].st == GPURING_OK, "held-back call: status %d %d",
           ranks[0].st, ranks[1].st);
    bad += wrong(0);

    /* 2. both running, several calls */
    for (int it = 1; it <= calls; it++) {
        fill(it);
        for (int r = 0; r < NRANKS; r++) pthread_create(&th[r], NULL, rank_main, &ranks[r]);
        for (int r = 0; r < NRANKS; r++) pthread_join(th[r], NULL);
        EXPECT(ranks[0].st == GPURING_OK && ranks[1].st == GPURING_OK, "call %d: status %d %d",
               it, ranks[0].st, ranks[1].st);
        bad += wrong(it);
    }
    for (int r = 0; r < NRANKS; r++) {
        for (int c = 0; c < nch; c++) {
            gpuring_conn_net_stats_t ss, rs;

            gpuring_conn_net_stats(&ranks[r].sendc[c], &ss);
            gpuring_conn_net_stats(&ranks[r].recvc[c], &rs);
            running = GPURING_MIN(running, ss.inflight_max);
            steps += rs.steps;
            credits += rs.credits;
            zc += rs.zcopy;
            if (zcopy) {
                uint64_t early, all = zcopy_expected(&ranks[r].exec[c].prog, ranks[r].recv, &early);

                zc_max += all * (uint64_t)(calls + 1);
                zc_min += (all - early) * (uint64_t)(calls + 1);
            }
        }
    }
    /* credits batched: one per half window consumed, sooner only when the
     * whole window has landed; one per step is what an unbatched proxy sends */
    EXPECT(steps > 0 && credits * 2 <= steps,
           "%d ch: %llu credit messages for %llu steps landed (batched: <= 1 per 2)", nch,
           (unsigned long long)credits, (unsigned long long)steps);
    EXPECT(zc >= zc_min && zc <= zc_max && (zc_max == 0 || zc > 0),
           "%d ch%s, output %zu B into a page: %llu steps landed in the output, want %llu to %llu",
           nch, zcopy ? ", zero copy" : "", recv_off, (unsigned long long)zc,
           (unsigned long long)zc_min, (unsigned long long)zc_max);
    printf("  %d ch, %zu floats, %zu B slots%s%s, output %zu B into a page: held back %llu; "
           "running, a pass saw up to %llu posted and not completed on every send end; %llu "
           "credits for %llu steps, %llu landed in the output\n",
           nch, count, slot_bytes, in_place ? ", in place" : "", zcopy ? ", zero copy" : "", recv_off,
           (unsigned long long)held, (unsigned long long)running, (unsigned long long)credits,
           (unsigned long long)steps, (unsigned long long)zc);
    EXPECT(bad == 0, "%d ch, %zu floats: %zu wrong elements over %d calls", nch, count, bad,
           calls + 1);
    disconnect_ranks(proxy, nch);
out:
    for (int r = 0; r < NRANKS; r++) {
        free(ranks[r].send_mem);
        free(ranks[r].recv_mem);
    }
}

int main(void)
{
    gpuring_proxy_config_t cfg = {.wait_timeout = 5.0};
    gpuring_proxy_t *proxy = NULL;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("GPURING_TEST_DEBUG") != NULL) {
        gpuring_log_config_t lc = gpuring_log_config;
        lc.level = GPURING_LOG_DEBUG;
        gpuring_log_set(&lc);
    }
    EXPECT(gpuring_proxy_get(&cfg, &proxy) == GPURING_OK, "gpuring_proxy_get");
    if (proxy != NULL) {
        /* 1 MiB over 1 channel of 64 KiB slots; 4 MiB over 2 channels, in place;
         * an odd size whose blocks are shorter than 4 full slots; each through
         * the slots and zero copy (outputs on a page, or 8 bytes short of one) */
        for (int zcopy = 0; zcopy <= 1; zcopy++) {
            run_case(proxy, 1, 256 * 1024, 64 * 1024, 0, zcopy, 0, 3, 1 + 3 * (uint64_t)zcopy);
            run_case(proxy, 2, 1024 * 1024, 128 * 1024, 1, zcopy, 4088, 2,
                     2 + 3 * (uint64_t)zcopy);
            run_case(proxy, 1, 100003, 64 * 1024, 0, zcopy, 0, 2, 3 + 3 * (uint64_t)zcopy);
        }
        /* zero copy on an odd size whose last loop's blocks are short */
        run_case(proxy, 1, 300007, 64 * 1024, 0, 1, 0, 2, 7);
        /* zero copy into outputs where UCX's copy would be skewed (20, 32 and 44
         * bytes into a page: none lands there), as far in as the slots (16: all
         * do) and just past the skew (48: all do) */
        run_case(proxy, 1, 256 * 1024, 64 * 1024, 0, 1, 32, 2, 8);
        run_case(proxy, 2, 1024 * 1024, 128 * 1024, 1, 1, 32, 2, 9);
        run_case(proxy, 1, 256 * 1024, 64 * 1024, 0, 1, 20, 2, 12);
        run_case(proxy, 1, 256 * 1024, 64 * 1024, 0, 1, 44, 2, 13);
        run_case(proxy, 1, 256 * 1024, 64 * 1024, 0, 1, 16, 2, 10);
        run_case(proxy, 1, 256 * 1024, 64 * 1024, 0, 1, 48, 2, 11);
        EXPECT(gpuring_proxy_error(proxy, NULL, 0) == GPURING_OK, "no async error");
        gpuring_proxy_finalize();
    }
    return unit_report();
}
