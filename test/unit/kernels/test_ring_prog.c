/*
 * test_ring_prog.c -- the ring and gather allreduce step programs and the
 * host executor, without MPI: n "ranks" are threads of this process joined by
 * shared-memory connections, each running gpuring_exec_host_run exactly as
 * a rank would.  Results are checked against a reference computed here.
 *
 * Also checks the program itself: every element of the buffer is written to
 * the output exactly once per rank, every operation but the first
 * receives and every one but the last sends, and with chunks above one
 * alignment step every block starts on the alignment grid.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/exec_host.h"
#include "test/unit/unit_test.h"



#define MAXR 8
#define MAXC 3

/* ---- the program alone -------------------------------------------------------- */
/* slot steps per block the ring programs are made with (sliced: NET rings) */
static int ring_slices = 1;

static void check_program(int n, size_t count, size_t chunk, int slices)
{
    for (int ix = 0; ix < n; ix++) {
        gpuring_prog_t p;
        unsigned char *hits = calloc(count + 1, 1);
        int bad_cover = 0, bad_flags = 0, bad_align = 0;

        gpuring_ring_prog_init_sliced(&p, 0, count, chunk, n, ix, slices);
        for (uint64_t i = 0; i < p.nops; i++) {
            gpuring_step_t s;
            uint64_t op = i % ((uint64_t)(2 * n - 1) * (uint64_t)p.slices) / (uint64_t)p.slices;
            gpuring_prog_op(&p, i, &s);
            if (((s.flags & GPURING_PRIM_RECV) != 0) != (op != 0)) bad_flags++;
            if (((s.flags & GPURING_PRIM_SEND) != 0) != (op != (uint64_t)(2 * n - 2))) bad_flags++;
            if (s.count > chunk || (s.count > 0 && s.off + s.count > count)) bad_cover++;
            /* chunks above one grid step: every block starts on the alignment grid */
            if (chunk > GPURING_PROG_ALIGN_ELEMS && s.count > 0 &&
                s.off % GPURING_PROG_ALIGN_ELEMS != 0)
                bad_align++;
            if (s.flags & GPURING_PRIM_DST) {
                for (size_t e = s.off; e < s.off + s.count && e < count; e++) hits[e]++;
            }
        }
        for (size_t e = 0; e < count; e++) bad_cover += hits[e] != 1;
        EXPECT(bad_cover == 0 && bad_flags == 0 && bad_align == 0 && p.slices >= 1 &&
                   p.slices <= slices,
               "program n=%d ix=%d count=%zu chunk=%zu slices=%d (%d): %d coverage, %d flag, "
               "%d alignment errors",
               n, ix, count, chunk, slices, p.slices, bad_cover, bad_flags, bad_align);
        free(hits);
    }
}

/* ---- n threads running the executor over shm connections ------------------- */

/* A shm connection on `channel` from rank `sender` (its end *send) to rank `receiver`
 * (its end *recv), slots of slot_bytes; its name unlinked.  0, or -1 (counted as a
 * failed check). */
static int shm_link(gpuring_conn_t *send, int sender, gpuring_conn_t *recv, int receiver,
                    int channel, size_t slot_bytes, int id)
{
    gpuring_conn_handle_t h;

    if (gpuring_conn_shm_recv_create(recv, sender, channel, slot_bytes, id, &h) != GPURING_OK ||
        gpuring_conn_shm_send_connect(send, receiver, channel, &h) != GPURING_OK) {
        EXPECT(0, "connection setup");
        return -1;
    }
    gpuring_conn_shm_unlink(recv);
    return 0;
}
typedef struct rank_ctx {
    int rank, n, nch;
    size_t count, chunk;
    int in_place;
    int gather; /* GATHER program instead of RING: 1 unordered, 2 ordered */
    gpuring_type_t type;
    void *scratch;
    int32_t *send, *recv;
    gpuring_conn_t sendc[MAXC], recvc[MAXC];
    gpuring_exec_channel_t exec[MAXC];
    gpuring_status_t st;
} rank_ctx_t;

static void *rank_main(void *arg)
{
    rank_ctx_t *r = arg;
    size_t per = GPURING_DIV_UP(r->count, (size_t)r->nch);
    gpuring_exec_args_t a = {
        .sendbuf = r->in_place ? r->recv : r->send, .recvbuf = r->recv, .count = r->count,
        .type = r->type, .op = GPURING_OP_SUM, .nchannels = r->nch,
        .channels = r->exec, .scratch = r->scratch, .timeout = 20.0, .proxy = NULL};

    for (int c = 0; c < r->nch; c++) {
        size_t base = GPURING_MIN(r->count, (size_t)c * per);
        /* channel c's ring runs backwards on odd channels: other neighbours */
        int ix = c % 2 ? r->n - 1 - r->rank : r->rank;
        if (r->gather) {
            gpuring_gather_prog_init(&r->exec[c].prog, base, GPURING_MIN(per, r->count - base),
                                     r->n, ix, r->gather == 2);
        } else {
            gpuring_ring_prog_init_sliced(&r->exec[c].prog, base,
                                          GPURING_MIN(per, r->count - base), r->chunk, r->n, ix,
                                          ring_slices);
        }
        r->exec[c].send[0] = &r->sendc[c];
        r->exec[c].recv[0] = &r->recvc[c];
    }
    r->st = gpuring_exec_host_run(&a);
    return NULL;
}

static void run_ring(int n, int nch, size_t count, size_t chunk, int in_place, int reuse,
                     int gather)
{
    rank_ctx_t *ranks = calloc((size_t)n, sizeof(*ranks));
    pthread_t th[MAXR];
    size_t slot = chunk * sizeof(int32_t);
    size_t bad = 0;

    for (int r = 0; r < n; r++) {
        ranks[r] = (rank_ctx_t){.rank = r, .n = n, .nch = nch, .count = count, .chunk = chunk,
                                .in_place = in_place, .gather = gather,
                                .type = GPURING_TYPE_INT32};
        ranks[r].scratch = malloc(count * sizeof(int32_t) * (size_t)n);
        ranks[r].send = malloc(count * sizeof(int32_t) + 4);
        ranks[r].recv = malloc(count * sizeof(int32_t) + 4);
    }
    /* connections: on channel c, rank at ring position ix sends to ix+1 */
    for (int c = 0; c < nch; c++) {
        for (int r = 0; r < n; r++) {
            int ix = c % 2 ? n - 1 - r : r;
            int next_ix = (ix + 1) % n;
            int next = c % 2 ? n - 1 - next_ix : next_ix;
            if (shm_link(&ranks[r].sendc[c], r, &ranks[next].recvc[c], next, c, slot, 7) != 0)
                return;
        }
    }
    for (int iter = 0; iter < reuse; iter++) {
        for (int r = 0; r < n; r++) {
            for (size_t i = 0; i < count; i++) {
                ranks[r].send[i] = (int32_t)((r + 1) * 1000003 + i * 7 + iter);
                ranks[r].recv[i] = in_place ? ranks[r].send[i] : -1;
            }
            ranks[r].recv[count] = 0x5a5a5a5a; /* guard */
        }
        for (int r = 0; r < n; r++) pthread_create(&th[r], NULL, rank_main, &ranks[r]);
        for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
        for (int r = 0; r < n; r++) {
            EXPECT(ranks[r].st == GPURING_OK, "rank %d status %d", r, ranks[r].st);
            for (size_t i = 0; i < count; i++) {
                int64_t want = 0;
                for (int q = 0; q < n; q++) want += (int32_t)((q + 1) * 1000003 + i * 7 + iter);
                if (ranks[r].recv[i] != (int32_t)want && bad++ < 3) {
                    printf("n=%d nch=%d count=%zu chunk=%zu rank %d [%zu]: %d want %d\n", n,
                           nch, count, chunk, r, i, ranks[r].recv[i], (int32_t)want);
                }
            }
            if (ranks[r].recv[count] != 0x5a5a5a5a) bad++;
        }
    }
    EXPECT(bad == 0, "%s n=%d nch=%d count=%zu chunk=%zu in_place=%d slices=%d: %zu wrong",
           gather ? "gather" : "ring", n, nch, count, chunk, in_place, ring_slices, bad);
    for (int r = 0; r < n; r++) {
        for (int c = 0; c < nch; c++) {
            gpuring_conn_shm_destroy(&ranks[r].sendc[c]);
            gpuring_conn_shm_destroy(&ranks[r].recvc[c]);
        }
        free(ranks[r].send);
        free(ranks[r].recv);
        free(ranks[r].scratch);
    }
    free(ranks);
}

/*
 * Ordered gather on floats, where fold order shows in the bits: every rank
 * must produce exactly ((x0 + x1) + x2) + ... in ring order.
 */
static void run_gather_ordered_float(int n, size_t count, int in_place)
{
    rank_ctx_t *ranks = calloc((size_t)n, sizeof(*ranks));
    pthread_t th[MAXR];
    size_t bad = 0;

    for (int r = 0; r < n; r++) {
        float *in;
        ranks[r] = (rank_ctx_t){.rank = r, .n = n, .nch = 1, .count = count, .chunk = count,
                                .in_place = in_place, .gather = 2, .type = GPURING_TYPE_FLOAT};
        ranks[r].send = malloc(count * sizeof(float));
        ranks[r].recv = malloc(count * sizeof(float));
        ranks[r].scratch = malloc(count * sizeof(float) * (size_t)n);
        in = (float *)(in_place ? ranks[r].recv : ranks[r].send);
        /* magnitudes far apart: a different order gives different bits */
        for (size_t i = 0; i < count; i++) in[i] = (r % 2 ? 1e8f : 1.0f / 3) * (float)(i + r + 1);
    }
    for (int r = 0; r < n; r++) {
        int next = (r + 1) % n;
        if (shm_link(&ranks[r].sendc[0], r, &ranks[next].recvc[0], next, 0,
                     count * sizeof(float), 9) != 0)
            return;
    }
    for (int r = 0; r < n; r++) pthread_create(&th[r], NULL, rank_main, &ranks[r]);
    for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int q = 0; q < n; q++) {
            float x = (q % 2 ? 1e8f : 1.0f / 3) * (float)(i + q + 1);
            want = q == 0 ? x : want + x;
        }
        for (int r = 0; r < n; r++) {
            float got = ((float *)ranks[r].recv)[i];
            if (memcmp(&got, &want, sizeof(float)) != 0 && bad++ < 3) {
                printf("ordered gather n=%d rank %d [%zu]: %.9g want %.9g\n", n, r, i, got, want);
            }
        }
    }
    EXPECT(bad == 0, "ordered float gather n=%d count=%zu in_place=%d: %zu not bit-identical",
           n, count, in_place, bad);
    for (int r = 0; r < n; r++) {
        EXPECT(ranks[r].st == GPURING_OK, "rank %d status %d", r, ranks[r].st);
        gpuring_conn_shm_destroy(&ranks[r].sendc[0]);
        gpuring_conn_shm_destroy(&ranks[r].recvc[0]);
        free(ranks[r].send);
        free(ranks[r].recv);
        free(ranks[r].scratch);
    }
    free(ranks);
}

/* gather: n ops, output written first then accumulated n-1 times */
static void check_gather_program(int n, size_t count)
{
    gpuring_prog_t p;
    int recvs = 0, sends = 0, acc = 0, bad = 0;

    gpuring_gather_prog_init(&p, 5, count, n, 1, 0);
    for (uint64_t i = 0; i < p.nops; i++) {
        gpuring_step_t s;
        gpuring_prog_op(&p, i, &s);
        recvs += !!(s.flags & GPURING_PRIM_RECV);
        sends += !!(s.flags & GPURING_PRIM_SEND);
        acc += !!(s.flags & GPURING_PRIM_ACC);
        bad += s.off != 5 || s.count != count;
        bad += i == 0 && (s.flags != (GPURING_PRIM_SRC | GPURING_PRIM_SEND | GPURING_PRIM_DST));
    }
    EXPECT(p.nops == (uint64_t)n && recvs == n - 1 && sends == n - 1 && acc == n - 1 && !bad,
           "gather program n=%d: %llu ops, %d recvs, %d sends, %d acc, %d bad", n,
           (unsigned long long)p.nops, recvs, sends, acc, bad);
}

/* ---- reduce-scatter, allgather, bcast, reduce: every rank's program run together --- */
/*
 * n ranks on a ring in a scrambled rank order, nch channels splitting the
 * per-rank count; each rank runs its program op by op (round robin, a queue
 * per ring edge).  Values are sums: element e of rank r's input block b is
 * (1 << r) + ((b * count + e) << 8), so a result holds which ranks were
 * folded in (each exactly once) and from which block and element.
 */
typedef struct q_slot { size_t count; uint64_t *v; } q_slot_t;
static void check_chain(int kind, int n, size_t count, size_t chunk, int nch, int slices, int root)
{
    const size_t in_len = kind == GPURING_PROG_RING_RS ? count * n : count;
    const size_t out_len = kind == GPURING_PROG_RING_AG ? count * n : count;
    int ranks[MAXR], pos_of[MAXR], bad = 0;
    uint64_t *in[MAXR], *out[MAXR];
    size_t per = GPURING_DIV_UP(GPURING_DIV_UP(count, (size_t)nch), 16) * 16;

    for (int p = 0; p < n; p++) ranks[p] = (p * 3 + 1) % n; /* a permutation for n != 3k */
    if (n % 3 == 0) for (int p = 0; p < n; p++) ranks[p] = n - 1 - p;
    for (int p = 0; p < n; p++) pos_of[ranks[p]] = p;
    for (int r = 0; r < n; r++) {
        in[r] = calloc(in_len + 1, sizeof(uint64_t));
        out[r] = calloc(out_len + 1, sizeof(uint64_t));
        for (size_t e = 0; e < in_len; e++) {
            in[r][e] = kind == GPURING_PROG_RING_BCAST ? (r == root ? (e << 8) + 1 : 0)
                                                       : ((uint64_t)1 << r) + ((uint64_t)e << 8);
            if (kind == GPURING_PROG_RING_AG) in[r][e] = ((uint64_t)1 << r) + ((uint64_t)(r * count + e) << 8);
        }
        if (kind == GPURING_PROG_RING_BCAST) memcpy(out[r], in[r], count * sizeof(uint64_t));
    }
    for (int ch = 0; ch < nch; ch++) {
        size_t base = GPURING_MIN(count, (size_t)ch * per), len = GPURING_MIN(per, count - base);
        gpuring_prog_t pr[MAXR];
        uint64_t next[MAXR] = {0};
        q_slot_t *q[MAXR]; /* q[p]: into ring position p */
        size_t qh[MAXR] = {0}, qt[MAXR] = {0};
        int moved = 1, done = 0;

        for (int p = 0; p < n; p++) {
            if (kind == GPURING_PROG_RING_RS)
                gpuring_rs_prog_init(&pr[p], base, len, count, chunk, n, p, ranks, slices);
            else if (kind == GPURING_PROG_RING_AG)
                gpuring_ag_prog_init(&pr[p], base, len, count, chunk, n, p, ranks, slices);
            else if (kind == GPURING_PROG_RING_BCAST)
                gpuring_bcast_prog_init(&pr[p], base, len, chunk, n, p, pos_of[root]);
            else
                gpuring_reduce_prog_init(&pr[p], base, len, chunk, n, p, pos_of[root]);
            q[p] = calloc(pr[p].nops + 1, sizeof(q_slot_t));
        }
        while (moved && !done) {
            moved = 0;
            done = 1;
            for (int p = 0; p < n; p++) {
                const int r = ranks[p];
                gpuring_step_t st;
                uint64_t *v;
                if (next[p] >= pr[p].nops) continue;
                done = 0;
                gpuring_prog_op(&pr[p], next[p], &st);
                if ((st.flags & GPURING_PRIM_RECV) && qh[p] == qt[p]) continue;
                moved = 1;
                next[p]++;
                if (st.count > chunk) bad++;
                if ((st.flags & GPURING_PRIM_SRC) && st.count > 0 && st.in_off + st.count > in_len) { bad++; continue; }
                if ((st.flags & GPURING_PRIM_DST) && st.count > 0 && st.off + st.count > out_len) { bad++; continue; }
                v = calloc(st.count + 1, sizeof(uint64_t));
                for (size_t e = 0; e < st.count; e++) {
                    if (st.flags & GPURING_PRIM_SRC) v[e] += in[r][st.in_off + e];
                }
                if (st.flags & GPURING_PRIM_RECV) {
                    q_slot_t *sl = &q[p][qh[p]++];
                    if (sl->count != st.count) bad++;
                    for (size_t e = 0; e < st.count && e < sl->count; e++) v[e] += sl->v[e];
                    free(sl->v);
                }
                if (st.flags & GPURING_PRIM_DST) memcpy(out[r] + st.off, v, st.count * sizeof(uint64_t));
                if (st.flags & GPURING_PRIM_SEND) {
                    q[(p + 1) % n][qt[(p + 1) % n]++] = (q_slot_t){st.count, v};
                } else {
                    free(v);
                }
            }
        }
        for (int p = 0; p < n; p++) {
            bad += next[p] != pr[p].nops || qh[p] != qt[p]; /* stalled, or slots left over */
            for (size_t k = qh[p]; k < qt[p]; k++) free(q[p][k].v);
            free(q[p]);
        }
    }
    /* the reference */
    for (int r = 0; r < n; r++) {
        for (size_t e = 0; e < out_len; e++) {
            uint64_t want = 0;
            if (kind == GPURING_PROG_RING_RS) {
                for (int q2 = 0; q2 < n; q2++) want += ((uint64_t)1 << q2) + ((uint64_t)(r * count + e) << 8);
            } else if (kind == GPURING_PROG_RING_AG) {
                want = ((uint64_t)1 << (e / count)) + ((uint64_t)e << 8);
            } else if (kind == GPURING_PROG_RING_BCAST) {
                want = ((uint64_t)e << 8) + 1;
            } else if (r == root) {
                for (int q2 = 0; q2 < n; q2++) want += ((uint64_t)1 << q2) + ((uint64_t)e << 8);
            }
            bad += out[r][e] != want;
        }
        free(in[r]);
        free(out[r]);
    }
    EXPECT(bad == 0, "program %d n=%d count=%zu chunk=%zu nch=%d slices=%d root=%d: %d errors",
           kind, n, count, chunk, nch, slices, root, bad);
}

/* A program that names a peer the channel has no connection for (a planning
 * bug) fails the call with GPURING_ERR_INVALID instead of crashing. */
static void check_unconnected_peer(void)
{
    int32_t in[64] = {0}, out[64];
    gpuring_exec_channel_t ch;
    gpuring_exec_args_t a = {.sendbuf = in, .recvbuf = out, .count = 64,
                             .type = GPURING_TYPE_INT32, .op = GPURING_OP_SUM,
                             .nchannels = 1, .channels = &ch, .timeout = 5.0};

    memset(&ch, 0, sizeof(ch));
    /* a tree rank with a parent and one child, and no connection at all */
    gpuring_tree_prog_init(&ch.prog, 0, 64, 16, 3, 1, 1);
    EXPECT(gpuring_exec_host_run(&a) == GPURING_ERR_INVALID,
           "a program naming unconnected peers fails as a planning bug");
}

/*
 * A sender that gives up with its FIFO full: a 3-rank ring broadcast over shm, whose
 * root runs 8 steps ahead of its next rank (the next rank starts 2 s late) and gives
 * up on the call after 0.3 s without a free slot -- no room for its abandon step.  The
 * next rank, whose timeout is 20 s, must read the 8 steps, pass them on, and fail at
 * once when it waits for the 9th (the FIFO's `abandoned`), not at its timeout; so must
 * the last rank (the abandon step its sender then posts).
 */
typedef struct late_rank {
    gpuring_exec_args_t a;
    gpuring_exec_channel_t ch;
    double delay, took;
} late_rank_t;

static void *late_rank_main(void *arg)
{
    late_rank_t *l = arg;
    double t0;

    usleep((useconds_t)(l->delay * 1e6));
    t0 = gpuring_time_sec();
    (void)gpuring_exec_host_run(&l->a);
    l->took = gpuring_time_sec() - t0;
    return NULL;
}

static void check_abandon_full_fifo(void)
{
    enum { N = 3, COUNT = 4096, CHUNK = 16 }; /* 256 steps */
    gpuring_conn_t sendc[N], recvc[N];
    late_rank_t l[N];
    int32_t *buf[N];
    pthread_t th[N];

    memset(l, 0, sizeof(l));
    for (int r = 0; r < N; r++) {
        const int next = (r + 1) % N;

        buf[r] = calloc(COUNT, sizeof(int32_t));
        if (shm_link(&sendc[r], r, &recvc[next], next, 0, CHUNK * sizeof(int32_t), 7) != 0)
            return;
    }
    for (int r = 0; r < N; r++) {
        for (int e = 0; e < COUNT; e++) buf[r][e] = r == 0 ? e : -1;
        gpuring_bcast_prog_init(&l[r].ch.prog, 0, COUNT, CHUNK, N, r, 0);
        l[r].ch.send[0] = &sendc[r];
        l[r].ch.recv[0] = &recvc[r];
        l[r].a = (gpuring_exec_args_t){.sendbuf = buf[r], .recvbuf = buf[r], .count = COUNT,
                                       .type = GPURING_TYPE_INT32, .op = GPURING_OP_SUM,
                                       .nchannels = 1, .channels = &l[r].ch,
                                       .timeout = r == 0 ? 0.3 : 20.0, .call = 5,
                                       .coll = "broadcast"};
        l[r].delay = r == 1 ? 2.0 : 0.0;
    }
    for (int r = 0; r < N; r++) pthread_create(&th[r], NULL, late_rank_main, &l[r]);
    for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
    EXPECT(l[0].a.status == GPURING_ERR_TIMEOUT && sendc[0].step == GPURING_NSTEPS,
           "full FIFO: the root gave up after its timeout with %llu steps posted (%s)",
           (unsigned long long)sendc[0].step, gpuring_status_str(l[0].a.status));
    EXPECT(l[1].a.status == GPURING_ERR_REMOTE && recvc[1].step == GPURING_NSTEPS &&
               l[1].took < 5.0,
           "full FIFO: the next rank read the %d steps, then failed at once as told "
           "(%s after %.2f s, at step %llu)",
           GPURING_NSTEPS, gpuring_status_str(l[1].a.status), l[1].took,
           (unsigned long long)recvc[1].step);
    EXPECT(l[2].a.status == GPURING_ERR_REMOTE && l[2].took < 7.0,
           "full FIFO: the last rank failed as told (%s after %.2f s)",
           gpuring_status_str(l[2].a.status), l[2].took);
    for (int e = 0; e < GPURING_NSTEPS * CHUNK; e++) {
        if (buf[1][e] != e || buf[2][e] != e) {
            EXPECT(0, "full FIFO: the steps read before the failure are the root's (element "
                   "%d: %d, %d)", e, buf[1][e], buf[2][e]);
            break;
        }
    }
    for (int r = 0; r < N; r++) {
        gpuring_conn_shm_destroy(&sendc[r]);
        gpuring_conn_shm_destroy(&recvc[r]);
        free(buf[r]);
    }
}

/* Is /dev/shm segment `name` there? */
static int shm_there(const char *name)
{
    int fd = shm_open(name, O_RDONLY, 0);

    if (fd < 0) return errno != ENOENT;
    close(fd);
    return 1;
}

/*
 * Segments a process of gpuring's left in /dev/shm when it was killed while
 * connecting (named /gpuring-<pid namespace>-<pid>-...) go at the next sweep
 * (gpuring_conn_shm_sweep, which a process's first shm connection runs): a
 * dead pid's in this pid namespace only -- never a live process's, nor those
 * of another namespace, where the pid means another process -- and this
 * process's own pid's (a dead process had it: this one's names would collide),
 * but for its own pid's arrival board, which it may have opened already on
 * another thread as its host's lowest rank.
 */
static void check_shm_sweep(void)
{
    const char *what[5] = {"a dead process's", "a live process's", "another namespace's",
                           "this pid's (a dead holder's)", "this process's arrival board"};
    char names[5][96];
    struct stat st;
    pid_t dead = fork();
    int removed;

    if (dead == 0) _exit(0);
    unit_result(dead > 0 && waitpid(dead, NULL, 0) == dead, "a process that exits");
    if (stat("/proc/self/ns/pid", &st) != 0) {
        printf("shm sweep: no /proc/self/ns/pid: skipped\n");
        return;
    }
    snprintf(names[0], sizeof(names[0]), "/gpuring-%llu-%d-7-0", (unsigned long long)st.st_ino,
             (int)dead);
    snprintf(names[1], sizeof(names[1]), "/gpuring-%llu-%d-7-0", (unsigned long long)st.st_ino,
             (int)getppid());
    snprintf(names[2], sizeof(names[2]), "/gpuring-%llu-%d-7-0",
             (unsigned long long)st.st_ino + 1, (int)dead);
    snprintf(names[3], sizeof(names[3]), "/gpuring-%llu-%d-1-0", (unsigned long long)st.st_ino,
             (int)getpid());
    /* (gpuring_arrivals_open's scheme) */
    snprintf(names[4], sizeof(names[4]), "/gpuring-%llu-%d-arrivals-%016llx-%llu",
             (unsigned long long)st.st_ino, (int)getpid(), 0x1234ull, 5ull);
    for (int k = 0; k < 5; k++) {
        int fd = shm_open(names[k], O_RDWR | O_CREAT | O_EXCL, 0600);

        unit_result(fd >= 0, "shm sweep: create %s: %s", names[k], strerror(errno));
        if (fd >= 0) close(fd);
    }
    /* (another process's first shm connection -- make check runs two suites at
     * once -- may sweep the dead pid's first: this one's own pid's is its alone) */
    removed = gpuring_conn_shm_sweep();
    for (int k = 0; k < 4; k += 3) {
        unit_result(removed >= 1 && !shm_there(names[k]),
                    "shm sweep: %s segment removed (%d removed in all)", what[k], removed);
    }
    for (int k = 1; k < 5; k++) {
        if (k == 3) continue;
        unit_result(shm_there(names[k]), "shm sweep: %s segment kept", what[k]);
        shm_unlink(names[k]);
    }
}

int main(void)
{
    static const size_t ccounts[] = {1, 2, 7, 33, 1000, 4099};
    static const size_t cchunks[] = {1, 5, 16, 64, 4096};

    for (int kind = GPURING_PROG_RING_RS; kind <= GPURING_PROG_RING_REDUCE; kind++) {
        for (int n = 1; n <= MAXR; n++) {
            for (size_t i = 0; i < sizeof(ccounts) / sizeof(ccounts[0]); i++) {
                for (size_t j = 0; j < sizeof(cchunks) / sizeof(cchunks[0]); j++) {
                    check_chain(kind, n, ccounts[i], cchunks[j], 1 + (int)(i + j) % MAXC,
                                (i + j) % 2 ? 4 : 1, (int)(i * 7 + j) % n);
                }
            }
            for (int root = 0; root < n; root++) check_chain(kind, n, 77, 16, 2, 1, root);
        }
    }

    static const size_t counts[] = {1, 2, 3, 7, 64, 1000, 4099, 65537};
    static const size_t chunks[] = {1, 5, 16, 64, 100, 4096};

    for (int n = 1; n <= MAXR; n++) {
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
            for (size_t j = 0; j < sizeof(chunks) / sizeof(chunks[0]); j++) {
                check_program(n, counts[i], chunks[j], 1);
                check_program(n, counts[i], chunks[j], 4);
            }
        }
    }
    for (int n = 2; n <= MAXR; n++) check_gather_program(n, 17);
    check_unconnected_peer();
    check_abandon_full_fifo();
    check_shm_sweep();
    for (int n = 2; n <= 5; n++) {
        for (int nch = 1; nch <= MAXC; nch++) {
            run_ring(n, nch, 1, 16, 0, 1, 0);
            run_ring(n, nch, 4099, 64, nch == 2, 2, 0);   /* many steps: slot wrap-around */
            run_ring(n, nch, 65537, 1024, 0, 1, 0);
            /* gather: the whole channel region in one slot */
            run_ring(n, nch, 1, 16, 0, 1, 1);
            run_ring(n, nch, 1000, 1000, nch != 2, 12, 1); /* > NSTEPS calls: wrap-around */
            run_ring(n, nch, 333, 333, nch == 1, 10, 2);   /* ordered: stash and fold */
        }
    }
    run_ring(7, 2, 100003, 333, 1, 3, 0);                 /* odd sizes everywhere */
    run_ring(8, 1, 2047, 2047, 1, 3, 1);
    run_ring(2, 1, 4 << 20, 128 * 1024, 0, 1, 0);         /* 16 MiB */
    /* sliced, as NET rings run: blocks of several slot steps */
    for (int n = 2; n <= 5; n++) {
        check_program(n, 1 << 20, 16384, 4); /* 4 slices of a full slot */
        check_program(n, 100003, 1000, 3);
    }
    ring_slices = 4;
    for (int n = 2; n <= 5; n++) {
        run_ring(n, 2, 65537, 1024, 0, 1, 0);             /* 2 slices per block */
        run_ring(n, 1, 100003, 4096, 1, 3, 0);            /* 4 slices, in place, reused */
    }
    run_ring(2, 2, 4 << 20, 128 * 1024, 1, 1, 0);         /* 16 MiB, 4 slices */
    ring_slices = 1;
    for (int n = 3; n <= MAXR; n++) {
        run_gather_ordered_float(n, 257, 0);
        run_gather_ordered_float(n, 31, 1);
    }

    return unit_report();
}
