/*
 * test_bootstrap.c -- the rules of gpuring's exchanges (bootstrap_mpi/bootstrap.c),
 * on members that are threads of this process, over an allgather of their own
 * (rounds in order, each waited for at most a while: a member that does not come is
 * a timeout, as gpuring's MPI transport reports it):
 *   - allgather: every member gets every part in rank order;
 *   - agree: all OK, or every member learns the first rank that failed
 *     (bad_rank), the failed one its own error and the others REMOTE, and the
 *     sequence ends alike (in step: the members go on exchanging);
 *   - an exchange that failed (a member gone), or leave, puts a member out of
 *     step: its later exchanges return BROKEN and post nothing (the transport
 *     is not called), and in_step says 0;
 *   - in_step on a local error no agreement covered leaves the sequence;
 *   - allgather_blob: blobs of different lengths (0 too) at a common stride,
 *     zero-padded.
 *
 * Prints `N passed, N failed`.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "bootstrap_mpi/bootstrap.h"
#include "test/unit/unit_test.h"

#define MAX_MEMBERS 8
/* how long a round waits for a member: long where every member comes (a loaded
 * machine may hold a thread back), short where one is meant not to */
#define MEMBER_WAIT_S 10.0
#define MEMBER_GONE_WAIT_S 0.3
#define PART_MAX 64

/* the members' shared exchange: round r is complete once `size` parts are in */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int size;
    double wait_s;               /* MEMBER_WAIT_S or MEMBER_GONE_WAIT_S */
    uint64_t round[MAX_MEMBERS]; /* the round each member is in */
    uint64_t filled;             /* parts of the open round */
    uint64_t open;               /* the open round's number */
    unsigned char parts[MAX_MEMBERS][PART_MAX];
    unsigned char done[MAX_MEMBERS][PART_MAX]; /* the last complete round's */
} group_t;

typedef struct {
    group_t *g;
    int rank;
    int calls; /* allgathers that reached the transport */
    const char *what; /* the last one's name */
} member_t;

static double now_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One round: put this member's part in, wait for the others' (at most MEMBER_WAIT_S);
 * a round that misses a member ends with a timeout for everyone in it. */
static int group_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes,
                           const char *what)
{
    member_t *m = ctx;
    group_t *g = m->g;
    const double until = now_s() + g->wait_s;
    uint64_t mine;
    int st = GPURING_OK;

    m->calls++;
    m->what = what;
    if (bytes > PART_MAX) return GPURING_ERR_INVALID;
    pthread_mutex_lock(&g->lock);
    mine = g->round[m->rank]++;
    /* a member ahead of a timed-out round never meets its rounds again: the test's
     * members leave only where every other member's rounds then time out */
    while (mine != g->open && st == GPURING_OK) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&g->cond, &g->lock, &ts);
        if (now_s() > until) st = GPURING_ERR_TIMEOUT;
    }
    if (st == GPURING_OK) {
        memcpy(g->parts[m->rank], sbuf, bytes);
        if (++g->filled == (uint64_t)g->size) {
            memcpy(g->done, g->parts, sizeof(g->done));
            g->filled = 0;
            g->open++;
            pthread_cond_broadcast(&g->cond);
        } else {
            while (g->open == mine && st == GPURING_OK) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 10 * 1000 * 1000;
                if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
                pthread_cond_timedwait(&g->cond, &g->lock, &ts);
                if (g->open == mine && now_s() > until) st = GPURING_ERR_TIMEOUT;
            }
        }
    }
    if (st == GPURING_OK) {
        for (int r = 0; r < g->size; r++)
            memcpy((char *)rbuf + (size_t)r * bytes, g->done[r], bytes);
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

static const gpuring_bootstrap_ops_t group_ops = {group_allgather};

/* ---- scenarios: each member's thread runs one, its results kept per rank ---------- */
typedef struct {
    member_t m;
    gpuring_bootstrap_t b;
    int scenario;
    int arg; /* the scenario's rank(s) */
    /* results */
    gpuring_status_t st[4];
    int bad_rank[4];
    int in_step[4];
    int calls_after; /* transport calls the last step made */
    unsigned char data[MAX_MEMBERS * 8];
    void *blob;
    size_t stride;
} run_t;

enum { SC_GATHER, SC_AGREE_OK, SC_AGREE_FAIL, SC_AGREE_TWO, SC_LEAVE, SC_LOCAL, SC_BLOB };

static size_t blob_len(int rank) { return rank == 1 ? 0 : (size_t)(5 + 6 * rank); }

static void *member_main(void *arg)
{
    run_t *x = arg;
    const int me = x->m.rank;

    switch (x->scenario) {
    case SC_GATHER: {
        uint64_t mine = 0x1000u * (uint64_t)(me + 1) + 7u;
        x->st[0] = gpuring_bootstrap_allgather(&x->b, &mine, x->data, sizeof(mine), "test gather");
        break;
    }
    case SC_AGREE_OK:
        x->st[0] = gpuring_bootstrap_agree(&x->b, GPURING_OK, "test agreement");
        x->bad_rank[0] = x->b.bad_rank;
        x->in_step[0] = gpuring_bootstrap_in_step(&x->b, x->st[0]);
        break;
    case SC_AGREE_FAIL:
    case SC_AGREE_TWO: {
        const int fails = me == x->arg || (x->scenario == SC_AGREE_TWO && me == x->arg + 2);
        uint64_t mine = (uint64_t)me;
        x->st[0] = gpuring_bootstrap_agree(&x->b, fails ? GPURING_ERR_NO_MEMORY : GPURING_OK,
                                          "test agreement");
        x->bad_rank[0] = x->b.bad_rank;
        x->in_step[0] = gpuring_bootstrap_in_step(&x->b, x->st[0]);
        /* in step: the next exchange is made, and meets every member */
        x->st[1] = gpuring_bootstrap_allgather(&x->b, &mine, x->data, sizeof(mine), "test gather");
        break;
    }
    case SC_LEAVE: {
        uint64_t mine = (uint64_t)me;
        int before;
        if (me == x->arg) {
            x->st[0] = gpuring_bootstrap_leave(&x->b, GPURING_ERR_NO_MEMORY, "a test's part");
        } else {
            x->st[0] = gpuring_bootstrap_allgather(&x->b, &mine, x->data, sizeof(mine), "test gather");
        }
        x->in_step[0] = gpuring_bootstrap_in_step(&x->b, x->st[0]);
        before = x->m.calls;
        x->st[1] = gpuring_bootstrap_allgather(&x->b, &mine, x->data, sizeof(mine), "test gather");
        x->st[2] = gpuring_bootstrap_agree(&x->b, GPURING_OK, "test agreement");
        x->calls_after = x->m.calls - before;
        break;
    }
    case SC_LOCAL: {
        /* a local failure between exchanges, no agreement on it: in_step leaves */
        uint64_t mine = (uint64_t)me;
        int before;
        x->st[0] = gpuring_bootstrap_allgather(&x->b, &mine, x->data, sizeof(mine), "test gather");
        x->in_step[0] = gpuring_bootstrap_in_step(&x->b, me == x->arg ? GPURING_ERR_CUDA
                                                                       : x->st[0]);
        before = x->m.calls;
        x->st[1] = gpuring_bootstrap_allgather(&x->b, &mine, x->data, sizeof(mine), "test gather");
        x->calls_after = x->m.calls - before;
        x->in_step[1] = gpuring_bootstrap_in_step(&x->b, x->st[1]);
        break;
    }
    case SC_BLOB: {
        unsigned char b[64];
        for (size_t i = 0; i < sizeof(b); i++) b[i] = (unsigned char)(0x40 + me * 16 + i);
        x->st[0] = gpuring_bootstrap_allgather_blob(&x->b, b, blob_len(me), &x->blob, &x->stride,
                                                    "test blob");
        break;
    }
    }
    return NULL;
}

/* Run scenario sc on n members; results in x[0..n). */
static void run(run_t *x, int n, int sc, int arg)
{
    static group_t g;
    pthread_t th[MAX_MEMBERS];

    memset(&g, 0, sizeof(g));
    pthread_mutex_init(&g.lock, NULL);
    pthread_cond_init(&g.cond, NULL);
    g.size = n;
    g.wait_s = sc == SC_LEAVE || sc == SC_LOCAL ? MEMBER_GONE_WAIT_S : MEMBER_WAIT_S;
    memset(x, 0, sizeof(*x) * (size_t)n);
    for (int r = 0; r < n; r++) {
        x[r].m.g = &g;
        x[r].m.rank = r;
        x[r].b.ops = &group_ops;
        x[r].b.ctx = &x[r].m;
        x[r].b.rank = r;
        x[r].b.size = n;
        x[r].b.bad_rank = -1;
        x[r].scenario = sc;
        x[r].arg = arg;
        pthread_create(&th[r], NULL, member_main, &x[r]);
    }
    for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
    pthread_mutex_destroy(&g.lock);
    pthread_cond_destroy(&g.cond);
}

int main(void)
{
    run_t x[MAX_MEMBERS];

    for (int n = 1; n <= 5; n += 2) {
        run(x, n, SC_GATHER, 0);
        for (int r = 0; r < n; r++) {
            EXPECT(x[r].st[0] == GPURING_OK, "gather n=%d rank %d: %d", n, r, x[r].st[0]);
            /* the transport names the exchange in its errors (a timeout's report) */
            EXPECT(x[r].m.what != NULL && strcmp(x[r].m.what, "test gather") == 0,
                   "gather n=%d rank %d: the transport got the name '%s'", n, r,
                   x[r].m.what ? x[r].m.what : "(null)");
            for (int q = 0; q < n; q++) {
                uint64_t v;
                memcpy(&v, x[r].data + 8 * q, 8);
                EXPECT(v == 0x1000u * (uint64_t)(q + 1) + 7u,
                       "gather n=%d: rank %d holds %#llx for rank %d", n, r,
                       (unsigned long long)v, q);
            }
        }
        run(x, n, SC_AGREE_OK, 0);
        for (int r = 0; r < n; r++)
            EXPECT(x[r].st[0] == GPURING_OK && x[r].bad_rank[0] == -1 && x[r].in_step[0] == 1 &&
                       x[r].m.what != NULL && strcmp(x[r].m.what, "test agreement") == 0,
                   "agree ok n=%d rank %d: st %d bad %d in_step %d", n, r, x[r].st[0],
                   x[r].bad_rank[0], x[r].in_step[0]);
    }

    /* one member fails: it gets its own error, the others REMOTE; all name it, stay in
     * step and meet in the next exchange */
    for (int bad = 0; bad < 4; bad++) {
        run(x, 4, SC_AGREE_FAIL, bad);
        for (int r = 0; r < 4; r++) {
            EXPECT(x[r].st[0] == (r == bad ? GPURING_ERR_NO_MEMORY : GPURING_ERR_REMOTE),
                   "agree fail (rank %d): rank %d got %d", bad, r, x[r].st[0]);
            EXPECT(x[r].bad_rank[0] == bad, "agree fail (rank %d): rank %d names rank %d",
                   bad, r, x[r].bad_rank[0]);
            EXPECT(x[r].in_step[0] == 1 && x[r].b.failed == 0,
                   "agree fail (rank %d): rank %d out of step", bad, r);
            EXPECT(x[r].st[1] == GPURING_OK, "agree fail (rank %d): rank %d's next exchange %d",
                   bad, r, x[r].st[1]);
        }
    }
    /* two fail (ranks 1 and 3): the first is named everywhere */
    run(x, 5, SC_AGREE_TWO, 1);
    for (int r = 0; r < 5; r++)
        EXPECT(x[r].bad_rank[0] == 1 && x[r].in_step[0] == 1 &&
                   x[r].st[0] == (r == 1 || r == 3 ? GPURING_ERR_NO_MEMORY : GPURING_ERR_REMOTE),
               "agree two: rank %d got %d naming %d", r, x[r].st[0], x[r].bad_rank[0]);

    /* rank 2 leaves: the others' exchange times out; everyone is out of step and posts
     * nothing more */
    run(x, 4, SC_LEAVE, 2);
    for (int r = 0; r < 4; r++) {
        EXPECT(x[r].st[0] == (r == 2 ? GPURING_ERR_NO_MEMORY : GPURING_ERR_TIMEOUT),
               "leave: rank %d's exchange %d", r, x[r].st[0]);
        EXPECT(x[r].in_step[0] == 0 && x[r].b.failed == 1, "leave: rank %d still in step", r);
        EXPECT(x[r].st[1] == GPURING_ERR_BROKEN && x[r].st[2] == GPURING_ERR_BROKEN,
               "leave: rank %d's later exchanges %d %d (BROKEN wanted)", r, x[r].st[1],
               x[r].st[2]);
        EXPECT(x[r].calls_after == 0, "leave: rank %d posted %d exchanges out of step", r,
               x[r].calls_after);
    }

    /* a local error no agreement saw: in_step leaves on that rank; the others' next
     * exchange times out */
    run(x, 3, SC_LOCAL, 0);
    for (int r = 0; r < 3; r++) {
        EXPECT(x[r].st[0] == GPURING_OK, "local: rank %d's first exchange %d", r, x[r].st[0]);
        EXPECT(x[r].in_step[0] == (r != 0), "local: rank %d in_step %d", r, x[r].in_step[0]);
        EXPECT(x[r].st[1] == (r == 0 ? GPURING_ERR_BROKEN : GPURING_ERR_TIMEOUT),
               "local: rank %d's next exchange %d", r, x[r].st[1]);
        EXPECT(x[r].calls_after == (r == 0 ? 0 : 1), "local: rank %d made %d exchanges", r,
               x[r].calls_after);
        EXPECT(x[r].in_step[1] == 0, "local: rank %d in step after a failed exchange", r);
    }

    /* blobs of 5, 0, 17, 23 bytes: a stride of 23, each blob at its place, the rest 0 */
    run(x, 4, SC_BLOB, 0);
    for (int r = 0; r < 4; r++) {
        const unsigned char *all = x[r].blob;
        int ok = x[r].st[0] == GPURING_OK && x[r].stride == blob_len(3) && all != NULL;
        for (int q = 0; ok && q < 4; q++) {
            for (size_t i = 0; i < x[r].stride; i++) {
                unsigned char want = i < blob_len(q) ? (unsigned char)(0x40 + q * 16 + i) : 0;
                if (all[(size_t)q * x[r].stride + i] != want) ok = 0;
            }
        }
        EXPECT(ok, "blob: rank %d: st %d stride %zu", r, x[r].st[0], x[r].stride);
        EXPECT(x[r].m.calls == 2 && x[r].m.what != NULL && strcmp(x[r].m.what, "test blob") == 0,
               "blob: rank %d: %d exchanges, the last named '%s'", r, x[r].m.calls,
               x[r].m.what ? x[r].m.what : "(null)");
        free(x[r].blob);
    }
    return unit_report();
}
