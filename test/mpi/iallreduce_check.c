/*
 * iallreduce_check.c -- MPI_Iallreduce as applications use it, against a
 * reference computed here (allreduce_check -B covers every type, op, count
 * and communicator one call at a time):
 *   outstanding  NREQ calls started back to back on one communicator (each
 *                its own size, type and op), completed with MPI_Waitall (whose
 *                statuses must not say cancelled), MPI_Testall polling, or
 *                MPI_Waitany in whatever order
 *   mixed        non-blocking calls with blocking MPI_Allreduce calls between
 *                them on the same communicator, and calls on world, a dup and
 *                a split communicator in flight at once
 *   overlap      one large call started, then no MPI call at all until its
 *                result is in the receive buffer (read by this thread while
 *                it waits, bounded by a deadline): the call must progress
 *                without the caller polling; then MPI_Wait
 *   inplace      MPI_IN_PLACE calls in flight together
 *   freed        calls in flight on a communicator the caller frees before
 *                waiting for them (MPI allows it: they complete normally)
 *   p2p          a call in flight while its caller receives a large message
 *                from a rank that starts the call only after sending it
 *   below        a call the component below runs (a user op) in flight on every
 *                rank; rank 0 makes a blocking call (gpuring's) before it waits for
 *                it, the others after: the others' waits need rank 0's progress (the
 *                below call's later rounds, its rendezvous), which its blocking call
 *                must drive while it waits for them (MPI's progress rule)
 *   freeother    the same, where the receiver frees another communicator, one
 *                that ran a device call, between its call and the receive: its
 *                device memory goes, and cudaFree waits for every kernel of the
 *                device -- the call's too, which waits for the sender
 *   stream (-d)  the default stream's order: call A, then copies queued on
 *                the default stream (cudaMemcpyAsync, about 0.3 s of them;
 *                the last one writes call B's input), then call B.  A waits
 *                only for the default stream's work before it, so MPI_Wait(A)
 *                must return while the copies still run (cudaStreamQuery:
 *                not ready); B waits for them, so its result is right only
 *                if it read its input after the last copy
 *   p2p only (-P, alone): the p2p case on a communicator a blocking call set
 *                up, int32 sums only (for runs whose non-blocking calls go to the
 *                component below: coll_gpuring_agree_memory 1)
 *   first (-F, alone: the other cases' communicators would take the
 *                component below, whose 8-bit sums saturate in Open MPI 4.1)
 *                the p2p case as a fresh communicator's first collective, so the
 *                call is the one its setup would come with (run with
 *                coll_gpuring_nonblocking_setup 0: the call goes below and
 *                completes), then a blocking call sets the communicator up and
 *                calls in flight on it follow (outstanding)
 *   unwaited (-U, alone) a blocking call sets a communicator up (checked), then
 *                calls are left in flight at MPI_Finalize: one freed with
 *                MPI_Request_free (MPI allows it), two never waited for (an
 *                erroneous program, which Open MPI alone ends cleanly): the
 *                process must exit cleanly too (gpuring's workers still ran when
 *                its code was unloaded: a segfault in MPI_Finalize); and on two
 *                communicators the application freed, a call of rank 0's alone,
 *                which fails at MPI_Finalize (one request kept, one freed): the
 *                request's hold is the communicator's last, and MPI_Finalize
 *                releases it as the application's; and on a communicator the
 *                application never frees, rank 0's lone call freed with
 *                MPI_Request_free (MPI_Finalize releases the application's
 *                reference; the request's, the last, must not destroy it after
 *                Open MPI's tables are gone)
 * Values: rank r's element i of call k is a function of (k, r, i), so each
 * rank computes every rank's contribution: int32 sums of small values,
 * int8 sums that wrap (computed in unsigned arithmetic), doubles holding
 * small integers (exact in any order), uint64 bitwise xor, and float max.
 * Before each call the receive buffer holds the complement of the result;
 * after it, every element and the guard elements around it are checked, and
 * so is the send buffer.  Rank 0 prints "N passed, N failed" (verdict
 * gathered with MPI_Gather).
 *
 *   iallreduce_check [-d] [-F|-P|-U] [-r REPS] [-q]
 *     -d   device buffers (cudaMalloc through the libcudart.so it dlopens;
 *          the overlap case reads its buffer with cudaMemcpy); communicators
 *          of one rank are skipped (the library's coll/self need not read
 *          device memory)
 *     -F   the first case only
 *     -r   repeat everything REPS times (default 1)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test/cuda_dl.h"
#include "test/mpi_verdict.h"

#define NREQ 8
#define GUARD 8
#define GUARD_BYTE 0x5a

typedef enum { K_INT32_SUM, K_INT8_SUM, K_DOUBLE_SUM, K_UINT64_BXOR, K_FLOAT_MAX, K_N } kind_t;

static const struct {
    const char *name;
    size_t size;
} g_kinds[K_N] = {{"int32 sum", 4}, {"int8 sum", 1}, {"double sum", 8}, {"uint64 bxor", 8},
                  {"float max", 4}};

static int g_rank, g_quiet, g_device;
static long g_passed, g_failed;
static int g_user_op_calls; /* the calls below's: every rank says how many (the runners' below_check) */

/* One call: its buffers (host images; device copies with -d) and what it reduces. */
typedef struct call {
    kind_t kind;
    size_t count;
    int inplace;
    unsigned seed;
    int rank;              /* this rank's, in the call's communicator */
    char *send, *recv;     /* host: GUARD elements each side of the data */
    char *dsend, *drecv;   /* -d: the device copies */
    MPI_Request req;
} call_t;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    return x ^ (x >> 33);
}

/* Rank r's element i of a call with this seed, into *out (the kind's type). */
static void value(kind_t k, unsigned seed, int r, size_t i, void *out)
{
    uint64_t h = mix((uint64_t)seed << 40 ^ (uint64_t)r << 32 ^ i);

    switch (k) {
    case K_INT32_SUM: { int32_t v = (int32_t)(h % 2001) - 1000; memcpy(out, &v, 4); break; }
    case K_INT8_SUM: { uint8_t v = (uint8_t)h; memcpy(out, &v, 1); break; } /* wraps */
    case K_DOUBLE_SUM: { double v = (double)((int)(h % 17) - 8); memcpy(out, &v, 8); break; }
    case K_UINT64_BXOR: memcpy(out, &h, 8); break;
    case K_FLOAT_MAX: { float v = (float)((int64_t)(h % 100001) - 50000) / 8.0f; memcpy(out, &v, 4); break; }
    default: break;
    }
}

/* The result at i over n ranks. */
static void expected(kind_t k, unsigned seed, int n, size_t i, void *out)
{
    int32_t s32 = 0;
    uint8_t s8 = 0;
    double sd = 0;
    uint64_t x = 0;
    float fm = 0;

    for (int r = 0; r < n; r++) {
        union { int32_t i32; uint8_t u8; double d; uint64_t u64; float f; } v;
        value(k, seed, r, i, &v);
        switch (k) {
        case K_INT32_SUM: s32 += v.i32; break;
        case K_INT8_SUM: s8 = (uint8_t)(s8 + v.u8); break;
        case K_DOUBLE_SUM: sd += v.d; break;
        case K_UINT64_BXOR: x ^= v.u64; break;
        case K_FLOAT_MAX: fm = r == 0 || v.f > fm ? v.f : fm; break;
        default: break;
        }
    }
    switch (k) {
    case K_INT32_SUM: memcpy(out, &s32, 4); break;
    case K_INT8_SUM: memcpy(out, &s8, 1); break;
    case K_DOUBLE_SUM: memcpy(out, &sd, 8); break;
    case K_UINT64_BXOR: memcpy(out, &x, 8); break;
    case K_FLOAT_MAX: memcpy(out, &fm, 4); break;
    default: break;
    }
}

static MPI_Datatype mpi_type(kind_t k)
{
    static MPI_Datatype t[K_N];
    t[K_INT32_SUM] = MPI_INT32_T;
    t[K_INT8_SUM] = MPI_INT8_T;
    t[K_DOUBLE_SUM] = MPI_DOUBLE;
    t[K_UINT64_BXOR] = MPI_UINT64_T;
    t[K_FLOAT_MAX] = MPI_FLOAT;
    return t[k];
}

static MPI_Op mpi_op(kind_t k)
{
    return k == K_UINT64_BXOR ? MPI_BXOR : k == K_FLOAT_MAX ? MPI_MAX : MPI_SUM;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", g_rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void *dev_copy(const void *host, size_t bytes)
{
    void *d = NULL;
    if (cu.malloc_(&d, bytes ? bytes : 1) != 0 || cu.memcpy_(d, host, bytes, TEST_CUDA_H2D) != 0) {
        fprintf(stderr, "rank %d: cudaMalloc/cudaMemcpy of %zu B failed\n", g_rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return d;
}

/* Fill call c's buffers for communicator rank r of n and set its buffers up. */
static void call_init(call_t *c, kind_t k, size_t count, int inplace, unsigned seed, int r,
                      int n)
{
    const size_t es = g_kinds[k].size, bytes = (count + 2 * GUARD) * es;
    char e[8];

    c->kind = k;
    c->rank = r;
    c->count = count;
    c->inplace = inplace;
    c->seed = seed;
    c->send = xmalloc(bytes);
    c->recv = xmalloc(bytes);
    memset(c->send, GUARD_BYTE, bytes);
    memset(c->recv, GUARD_BYTE, bytes);
    for (size_t i = 0; i < count; i++) {
        char *s = (inplace ? c->recv : c->send) + (GUARD + i) * es;
        value(k, seed, r, i, s);
        if (!inplace) {
            expected(k, seed, n, i, e);
            for (size_t b = 0; b < es; b++) c->recv[(GUARD + i) * es + b] = (char)~e[b];
        }
    }
    c->dsend = c->drecv = NULL;
    if (g_device) {
        cu.sync();
        c->dsend = dev_copy(c->send, bytes);
        c->drecv = dev_copy(c->recv, bytes);
        cu.sync();
    }
}

static int call_start(call_t *c, MPI_Comm comm)
{
    const size_t off = GUARD * g_kinds[c->kind].size;
    char *s = g_device ? c->dsend : c->send, *r = g_device ? c->drecv : c->recv;

    return MPI_Iallreduce(c->inplace ? MPI_IN_PLACE : s + off, r + off, (int)c->count,
                          mpi_type(c->kind), mpi_op(c->kind), comm, &c->req);
}

/* Check call c (after it completed with rc) and free its buffers: one case. */
static void call_check(call_t *c, int rc, int n, const char *what)
{
    const size_t es = g_kinds[c->kind].size, bytes = (c->count + 2 * GUARD) * es;
    char e[8];
    int bad = 0;

    if (g_device) {
        if (cu.memcpy_(c->recv, c->drecv, bytes, TEST_CUDA_D2H) != 0 ||
            cu.memcpy_(c->send, c->dsend, bytes, TEST_CUDA_D2H) != 0) {
            fprintf(stderr, "rank %d: cudaMemcpy back failed\n", g_rank);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "FAILED rank %d %s: %s count %zu returned %d\n", g_rank, what,
                g_kinds[c->kind].name, c->count, rc);
        bad = 1;
    }
    for (size_t i = 0; !bad && i < c->count; i++) {
        expected(c->kind, c->seed, n, i, e);
        if (memcmp(c->recv + (GUARD + i) * es, e, es) != 0) {
            fprintf(stderr, "MISMATCH rank %d %s: %s count %zu%s index %zu\n", g_rank, what,
                    g_kinds[c->kind].name, c->count, c->inplace ? " in place" : "", i);
            bad = 1;
        }
    }
    for (size_t b = 0; b < GUARD * es; b++) {
        if ((unsigned char)c->recv[b] != GUARD_BYTE ||
            (unsigned char)c->recv[(GUARD + c->count) * es + b] != GUARD_BYTE) {
            fprintf(stderr, "GUARD rank %d %s: %s count %zu: a guard byte was written\n",
                    g_rank, what, g_kinds[c->kind].name, c->count);
            bad = 1;
            break;
        }
    }
    for (size_t i = 0; !c->inplace && !bad && i < c->count; i++) {
        value(c->kind, c->seed, c->rank, i, e); /* the send buffer comes back unchanged */
        if (memcmp(c->send + (GUARD + i) * es, e, es) != 0) {
            fprintf(stderr, "SENDBUF rank %d %s: %s count %zu: element %zu changed\n", g_rank,
                    what, g_kinds[c->kind].name, c->count, i);
            bad = 1;
        }
    }
    if (g_device) {
        cu.free_(c->dsend);
        cu.free_(c->drecv);
    }
    free(c->send);
    free(c->recv);
    if (bad) g_failed++;
    else g_passed++;
}

/* -d: communicators of one rank are the library's own (coll/self), which need not
 * read device memory: skipped */
static int skipped(MPI_Comm comm)
{
    int n;

    MPI_Comm_size(comm, &n);
    return g_device && n < 2;
}

static const size_t g_counts[NREQ] = {1, 17, 4099, 0, 65537, 3, 1000, 262147};

/* m calls started back to back on comm (this rank r of n), into c and reqs: call k of
 * kind k % K_N and count g_counts[(k + shift) % NREQ], in place or not; a start that
 * fails ends the run */
static void calls_start(call_t *c, MPI_Request *reqs, int m, int shift, int inplace,
                        unsigned seed, MPI_Comm comm, int r, int n)
{
    for (int k = 0; k < m; k++) {
        int rc;

        call_init(&c[k], (kind_t)(k % K_N), g_counts[(k + shift) % NREQ], inplace, seed + k,
                  r, n);
        rc = call_start(&c[k], comm);
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "FAILED rank %d: MPI_Iallreduce returned %d\n", g_rank, rc);
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
        reqs[k] = c[k].req;
    }
}

/* outstanding: NREQ calls in flight, completed by `how` (0 waitall, 1 testall, 2 waitany). */
static void case_outstanding(MPI_Comm comm, int how, unsigned seed)
{
    call_t c[NREQ];
    MPI_Request reqs[NREQ];
    int r, n, rc = MPI_SUCCESS, done = 0;
    static const char *names[3] = {"outstanding/waitall", "outstanding/testall",
                                   "outstanding/waitany"};

    if (skipped(comm)) return;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    calls_start(c, reqs, NREQ, 0, 0, seed, comm, r, n);
    if (how == 0) {
        MPI_Status st[NREQ];

        rc = MPI_Waitall(NREQ, reqs, st);
        /* a collective is never cancelled: the statuses must say so */
        for (int k = 0; k < NREQ && rc == MPI_SUCCESS; k++) {
            int cancelled = 1;

            MPI_Test_cancelled(&st[k], &cancelled);
            if (cancelled) {
                fprintf(stderr, "FAILED rank %d: MPI_Test_cancelled: call %d cancelled, says "
                        "its status from MPI_Waitall\n", g_rank, k);
                rc = MPI_ERR_OTHER;
            }
        }
    } else if (how == 1) {
        while (!done && rc == MPI_SUCCESS) rc = MPI_Testall(NREQ, reqs, &done, MPI_STATUSES_IGNORE);
    } else {
        for (int left = NREQ; left > 0 && rc == MPI_SUCCESS; left--) {
            int ix;
            rc = MPI_Waitany(NREQ, reqs, &ix, MPI_STATUS_IGNORE);
        }
    }
    for (int k = 0; k < NREQ; k++) call_check(&c[k], rc, n, names[how]);
}

/* mixed: non-blocking and blocking calls interleaved on one communicator, and
 * three communicators' calls in flight at once. */
static void case_mixed(MPI_Comm comms[3], unsigned seed)
{
    call_t c[3][3];
    int r[3], n[3], rc = MPI_SUCCESS;
    MPI_Request reqs[9];

    for (int m = 0; m < 3; m++) {
        MPI_Comm_rank(comms[m], &r[m]);
        MPI_Comm_size(comms[m], &n[m]);
    }
    for (int k = 0; k < 9; k++) reqs[k] = MPI_REQUEST_NULL;
    for (int k = 0; k < 3; k++) {
        for (int m = 0; m < 3; m++) {
            call_t b;
            if (skipped(comms[m])) continue;
            call_init(&c[m][k], (kind_t)((k + m) % K_N), g_counts[(k * 3 + m) % NREQ], k == 1,
                      seed + 10 * k + m, r[m], n[m]);
            if (call_start(&c[m][k], comms[m]) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 4);
            reqs[k * 3 + m] = c[m][k].req;
            /* a blocking call behind it on the same communicator */
            call_init(&b, (kind_t)((k + m + 2) % K_N), 4099, 0, seed + 100 + 10 * k + m, r[m],
                      n[m]);
            {
                const size_t off = GUARD * g_kinds[b.kind].size;
                char *s = g_device ? b.dsend : b.send, *d = g_device ? b.drecv : b.recv;
                call_check(&b, MPI_Allreduce(s + off, d + off, (int)b.count, mpi_type(b.kind),
                                             mpi_op(b.kind), comms[m]),
                           n[m], "mixed/blocking");
            }
        }
    }
    rc = MPI_Waitall(9, reqs, MPI_STATUSES_IGNORE);
    for (int k = 0; k < 3; k++) {
        for (int m = 0; m < 3; m++) {
            if (!skipped(comms[m])) call_check(&c[m][k], rc, n[m], "mixed/non-blocking");
        }
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* overlap: a large call must complete while this thread makes no MPI call. */
static void case_overlap(MPI_Comm comm, unsigned seed)
{
    const size_t count = 1 << 20;
    call_t c;
    int r, n, arrived = 0;
    double deadline;
    int32_t e;

    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    call_init(&c, K_INT32_SUM, count, 0, seed, r, n);
    if (call_start(&c, comm) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 4);
    /* the last element is written last by no rule: wait for all of them */
    deadline = now() + 60;
    while (!arrived && now() < deadline) {
        const char *res = c.recv + GUARD * 4;
        if (g_device) {
            if (cu.memcpy_(c.recv, c.drecv, (count + 2 * GUARD) * 4, TEST_CUDA_D2H) != 0)
                MPI_Abort(MPI_COMM_WORLD, 3);
        }
        arrived = 1;
        for (size_t i = 0; arrived && i < count; i += 997) {
            expected(K_INT32_SUM, seed, n, i, &e);
            arrived = memcmp(res + i * 4, &e, 4) == 0;
        }
        expected(K_INT32_SUM, seed, n, count - 1, &e);
        arrived = arrived && memcmp(res + (count - 1) * 4, &e, 4) == 0;
        if (!arrived) usleep(1000);
    }
    if (!arrived) {
        fprintf(stderr, "FAILED rank %d overlap: the result did not arrive in 60 s without "
                "MPI calls (the call is not progressed by gpuring)\n", g_rank);
        g_failed++;
    } else {
        g_passed++;
    }
    call_check(&c, MPI_Wait(&c.req, MPI_STATUS_IGNORE), n, "overlap");
}

/* stream: see the header. */
static void case_stream(MPI_Comm comm, unsigned seed)
{
    const size_t big = 64u << 20;
    call_t a, b;
    void *x = NULL, *y = NULL, *input = NULL;
    size_t bbytes;
    double t0, one;
    int r, n, copies, rca, rcb, busy;

    if (!g_device || skipped(comm)) return;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    if (cu.malloc_(&x, big) != 0 || cu.malloc_(&y, big) != 0) {
        fprintf(stderr, "rank %d: cudaMalloc of %zu B failed\n", g_rank, big);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* the copies: about 0.3 s on this device, by the time of one (at most 5000), the
     * pages already touched by a first */
    if (cu.memcpy_(y, x, big, TEST_CUDA_D2D) != 0) MPI_Abort(MPI_COMM_WORLD, 3);
    t0 = now();
    if (cu.memcpy_(y, x, big, TEST_CUDA_D2D) != 0) MPI_Abort(MPI_COMM_WORLD, 3);
    one = now() - t0;
    copies = one > 0 ? (int)(0.3 / one) + 1 : 5000;
    copies = copies > 5000 ? 5000 : copies;
    MPI_Allreduce(MPI_IN_PLACE, &copies, 1, MPI_INT, MPI_MAX, comm);

    call_init(&a, K_INT32_SUM, 17, 0, seed, r, n);
    call_init(&b, K_DOUBLE_SUM, 4099, 0, seed + 1, r, n);
    bbytes = (b.count + 2 * GUARD) * g_kinds[b.kind].size;
    /* B's input aside; its send buffer holds something else until the last copy */
    input = dev_copy(b.send, bbytes);
    memset(b.send, 0x77, bbytes);
    if (cu.memcpy_(b.dsend, b.send, bbytes, TEST_CUDA_H2D) != 0) MPI_Abort(MPI_COMM_WORLD, 3);
    cu.sync();
    MPI_Barrier(comm);

    if (call_start(&a, comm) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 4);
    for (int k = 0; k < copies; k++) {
        if (cu.memcpy_async(y, x, big, TEST_CUDA_D2D, NULL) != 0) MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (cu.memcpy_async(b.dsend, input, bbytes, TEST_CUDA_D2D, NULL) != 0)
        MPI_Abort(MPI_COMM_WORLD, 3);
    if (call_start(&b, comm) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 4);
    rca = MPI_Wait(&a.req, MPI_STATUS_IGNORE);
    busy = cu.stream_query(NULL) == TEST_CUDA_NOT_READY;
    rcb = MPI_Wait(&b.req, MPI_STATUS_IGNORE);
    cu.sync();
    if (!busy) {
        fprintf(stderr, "FAILED rank %d stream: MPI_Wait of a call returned only after the "
                "default stream's work queued after the call (%d copies of %zu B) was done\n",
                g_rank, copies, big);
        g_failed++;
    } else {
        g_passed++;
    }
    call_check(&a, rca, n, "stream (before the copies)");
    call_check(&b, rcb, n, "stream (after the copies)");
    cu.free_(input);
    cu.free_(x);
    cu.free_(y);
}

/* inplace: MPI_IN_PLACE calls in flight together. */
static void case_inplace(MPI_Comm comm, unsigned seed)
{
    call_t c[4];
    MPI_Request reqs[4];
    int r, n, rc;

    if (skipped(comm)) return;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    calls_start(c, reqs, 4, 2, 1, seed, comm, r, n);
    rc = MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE);
    for (int k = 0; k < 4; k++) call_check(&c[k], rc, n, "inplace");
}

/* freed: calls in flight on a fresh communicator (set up by a blocking call), which
 * the caller frees before it waits for them */
static void case_freed(unsigned seed)
{
    call_t c[3];
    MPI_Request reqs[3];
    MPI_Comm comm;
    int32_t one = 1;
    int r, n, rc;

    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (skipped(comm)) {
        MPI_Comm_free(&comm);
        return;
    }
    if (MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT32_T, MPI_SUM, comm) != MPI_SUCCESS) {
        fprintf(stderr, "FAILED rank %d freed: the blocking call before it failed\n", g_rank);
        g_failed++;
        MPI_Comm_free(&comm);
        return;
    }
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    calls_start(c, reqs, 3, 4, 0, seed, comm, r, n);
    MPI_Comm_free(&comm);
    rc = MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE);
    for (int k = 0; k < 3; k++) call_check(&c[k], rc, n, "freed");
}

/* p2p: a call in flight while its caller receives a large message whose sender
 * starts the same call only after sending it (a valid program: the call may
 * not hold up the receive).  Even rank e receives from e+1, which sends after
 * a pause, so the receiver's progress runs while its call waits for e+1; a
 * rank without a partner only makes the call. */
static void case_p2p(MPI_Comm comm, unsigned seed, MPI_Comm *freed)
{
    const size_t bytes = 4u << 20; /* above the shared-memory eager limits: rendezvous */
    unsigned char *msg = xmalloc(bytes);
    call_t c;
    int r, n, rc = MPI_SUCCESS, bad = 0;

    if (skipped(comm)) {
        free(msg);
        return;
    }
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    call_init(&c, K_INT32_SUM, 1000, 0, seed, r, n);
    if (r % 2 == 1) {
        for (size_t i = 0; i < bytes; i++) msg[i] = (unsigned char)(i * 7 + seed);
        usleep(200 * 1000);
        rc = MPI_Send(msg, (int)bytes, MPI_BYTE, r - 1, 77, comm);
    }
    if (call_start(&c, comm) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 4);
    if (freed != NULL && r % 2 == 0) {
        /* freeother, the receivers: once the call's kernel runs (the worker launches it;
         * the sender sends after 200 ms) */
        usleep(50 * 1000);
        MPI_Comm_free(freed);
    }
    if (r % 2 == 0 && r + 1 < n) {
        rc = MPI_Recv(msg, (int)bytes, MPI_BYTE, r + 1, 77, comm, MPI_STATUS_IGNORE);
        for (size_t i = 0; rc == MPI_SUCCESS && !bad && i < bytes; i++)
            bad = msg[i] != (unsigned char)(i * 7 + seed);
    }
    if (rc != MPI_SUCCESS || bad) {
        fprintf(stderr, "FAILED rank %d p2p: the message %s\n", g_rank,
                rc != MPI_SUCCESS ? "failed" : "arrived wrong");
        g_failed++;
    }
    call_check(&c, MPI_Wait(&c.req, MPI_STATUS_IGNORE), n, freed != NULL ? "freeother" : "p2p");
    if (freed != NULL && *freed != MPI_COMM_NULL) MPI_Comm_free(freed);
    free(msg);
}

static void user_sum_int32(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++) ((int32_t *)inout)[i] += ((const int32_t *)in)[i];
}

/* below: the usage above */
static void case_below(MPI_Comm comm, unsigned seed)
{
    const size_t off = GUARD * g_kinds[K_INT32_SUM].size;
    call_t c, b;
    MPI_Op op;
    int r, n, rc;

    if (skipped(comm)) return;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    MPI_Op_create(user_sum_int32, 1, &op);
    g_user_op_calls++;
    call_init(&c, K_INT32_SUM, 1u << 20, 0, seed, r, n); /* 4 MiB: rendezvous */
    call_init(&b, K_INT32_SUM, 1000, 0, seed + 1, r, n);
    if (MPI_Iallreduce((g_device ? c.dsend : c.send) + off, (g_device ? c.drecv : c.recv) + off,
                       (int)c.count, MPI_INT32_T, op, comm, &c.req) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 4);
    if (r == 0) {
        rc = MPI_Allreduce((g_device ? b.dsend : b.send) + off,
                           (g_device ? b.drecv : b.recv) + off, (int)b.count, MPI_INT32_T,
                           MPI_SUM, comm);
        call_check(&c, MPI_Wait(&c.req, MPI_STATUS_IGNORE), n, "below (rank 0: after)");
    } else {
        call_check(&c, MPI_Wait(&c.req, MPI_STATUS_IGNORE), n, "below");
        rc = MPI_Allreduce((g_device ? b.dsend : b.send) + off,
                           (g_device ? b.drecv : b.recv) + off, (int)b.count, MPI_INT32_T,
                           MPI_SUM, comm);
    }
    call_check(&b, rc, n, "below (the blocking call)");
    MPI_Op_free(&op);
}

/* freeother: the usage above; `other` is set up by a call on device buffers first */
static void case_freeother(MPI_Comm comm, unsigned seed)
{
    MPI_Comm other;
    call_t c;
    int r, n;

    if (skipped(comm)) return;
    MPI_Comm_dup(comm, &other);
    MPI_Comm_set_errhandler(other, MPI_ERRORS_RETURN);
    MPI_Comm_rank(other, &r);
    MPI_Comm_size(other, &n);
    call_init(&c, K_INT32_SUM, 1000, 0, seed, r, n);
    if (call_start(&c, other) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 4);
    call_check(&c, MPI_Wait(&c.req, MPI_STATUS_IGNORE), n, "freeother (its setup)");
    case_p2p(comm, seed + 1, &other);
}

/* first: case_p2p as a fresh communicator's first collective, then a blocking call
 * (the communicator's setup, where calls that would make it are non-blocking
 * only with coll_gpuring_nonblocking_setup 1), then calls in flight on it. */
static void case_first(unsigned seed)
{
    MPI_Comm fresh;
    int32_t one = 1;

    MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
    MPI_Comm_set_errhandler(fresh, MPI_ERRORS_RETURN);
    case_p2p(fresh, seed, NULL);
    if (MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT32_T, MPI_SUM, fresh) != MPI_SUCCESS) {
        fprintf(stderr, "FAILED rank %d first: the blocking call after it failed\n", g_rank);
        g_failed++;
    }
    case_outstanding(fresh, 0, seed + 1);
    MPI_Comm_free(&fresh);
}

/* unwaited: the usage above (the communicator, buffers and requests are left to
 * MPI_Finalize) */
static void case_unwaited(void)
{
    static int32_t in[4096], out[3][4096], lone_out[2][4096];
    MPI_Comm u;
    MPI_Request req[3];
    int n, one = 1;

    MPI_Comm_dup(MPI_COMM_WORLD, &u);
    MPI_Comm_set_errhandler(u, MPI_ERRORS_RETURN);
    MPI_Comm_size(u, &n);
    if (MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, u) == MPI_SUCCESS && one == n) {
        g_passed++;
    } else {
        fprintf(stderr, "FAILED rank %d unwaited: the blocking call gave %d\n", g_rank, one);
        g_failed++;
    }
    for (int i = 0; i < 4096; i++) in[i] = i;
    for (int k = 0; k < 3; k++) {
        if (MPI_Iallreduce(in, out[k], 4096, MPI_INT32_T, MPI_SUM, u, &req[k]) != MPI_SUCCESS) {
            fprintf(stderr, "FAILED rank %d unwaited: call %d did not start\n", g_rank, k);
            g_failed++;
            return;
        }
    }
    MPI_Request_free(&req[0]);

    /* a communicator freed with one call in flight that MPI_Finalize finds: rank 0
     * alone starts it (nothing matches it: it can only fail, at coll_gpuring_wait_timeout),
     * so the request holds the communicator's last reference, which MPI_Finalize
     * releases as if it were the application's; on "unwaited_kept" the request is
     * kept, on "unwaited_freed" freed with MPI_Request_free */
    for (int k = 0; k < 2; k++) {
        MPI_Comm lone;
        MPI_Request r;

        MPI_Comm_dup(MPI_COMM_WORLD, &lone);
        MPI_Comm_set_errhandler(lone, MPI_ERRORS_RETURN);
        MPI_Comm_set_name(lone, k == 0 ? "unwaited_kept" : "unwaited_freed");
        one = 1;
        if (MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, lone) != MPI_SUCCESS ||
            one != n) {
            fprintf(stderr, "FAILED rank %d unwaited: the blocking call on %d gave %d\n",
                    g_rank, k, one);
            g_failed++;
        }
        if (g_rank == 0) {
            if (MPI_Iallreduce(in, lone_out[k], 4096, MPI_INT32_T, MPI_SUM, lone, &r) !=
                MPI_SUCCESS) {
                fprintf(stderr, "FAILED rank %d unwaited: the lone call %d did not start\n",
                        g_rank, k);
                g_failed++;
            } else if (k == 1) {
                MPI_Request_free(&r);
            }
        }
        MPI_Comm_free(&lone);
    }
    /* ... and on one the application never frees, rank 0's lone call freed with
     * MPI_Request_free: MPI_Finalize releases the application's reference, and the
     * request's is the last -- released as the call fails in gpuring's close, it
     * destroyed the communicator after Open MPI's tables and PML were gone */
    {
        MPI_Comm held;
        MPI_Request r;

        MPI_Comm_dup(MPI_COMM_WORLD, &held);
        MPI_Comm_set_errhandler(held, MPI_ERRORS_RETURN);
        MPI_Comm_set_name(held, "unwaited_held");
        one = 1;
        if (MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, held) != MPI_SUCCESS ||
            one != n) {
            fprintf(stderr, "FAILED rank %d unwaited: the blocking call on held gave %d\n",
                    g_rank, one);
            g_failed++;
        }
        if (g_rank == 0) {
            if (MPI_Iallreduce(in, lone_out[0], 4096, MPI_INT32_T, MPI_SUM, held, &r) !=
                MPI_SUCCESS) {
                fprintf(stderr, "FAILED rank %d unwaited: the lone call on held did not "
                        "start\n", g_rank);
                g_failed++;
            } else {
                MPI_Request_free(&r);
            }
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Comm comms[3];
    int opt, reps = 1, size, first = 0, p2p_only = 0, unwaited = 0;
    long counts[2], sums[2] = {0, 0};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "dFPUr:q")) != -1) {
        switch (opt) {
        case 'd': g_device = 1; break;
        case 'F': first = 1; break;
        case 'U': unwaited = 1; break;
        case 'P': p2p_only = 1; break;
        case 'r': reps = atoi(optarg); break;
        case 'q': g_quiet = 1; break;
        default:
            if (g_rank == 0) fprintf(stderr, "usage: iallreduce_check [-d] [-F|-P|-U] [-r REPS] [-q]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (g_device) {
        char err[256];

        if (test_cuda_load_local(g_rank, err, sizeof(err)) != 0) {
            fprintf(stderr, "rank %d: -d: %s\n", g_rank, err);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (first) {
        for (int rep = 0; rep < reps; rep++) case_first(1000u * (unsigned)rep + 7);
        reps = 0; /* and nothing else */
    }
    for (int rep = 0; p2p_only && rep < reps; rep++) {
        MPI_Comm dup;
        int32_t one = 1;

        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
        /* set up by a blocking call first, as any program's communicator may be */
        if (MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT32_T, MPI_SUM, dup) != MPI_SUCCESS) {
            fprintf(stderr, "FAILED rank %d p2p: the blocking call before it failed\n", g_rank);
            g_failed++;
        }
        case_p2p(dup, 1000u * (unsigned)rep + 3, NULL);
        MPI_Comm_free(&dup);
    }
    if (p2p_only) reps = 0; /* and nothing else */
    if (unwaited) {
        case_unwaited();
        reps = 0; /* and nothing else */
    }
    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    /* (the split's halves have 2+ ranks from 4 ranks up; from 2, each half is one rank:
     * the component below then runs them) */
    MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, size - g_rank, &comms[2]);
    for (int m = 0; m < 3; m++) MPI_Comm_set_errhandler(comms[m], MPI_ERRORS_RETURN);

    for (int rep = 0; rep < reps; rep++) {
        unsigned seed = 1000u * (unsigned)rep + 1;
        for (int m = 0; m < 3; m++) {
            for (int how = 0; how < 3; how++) case_outstanding(comms[m], how, seed + 20 * how);
        }
        case_mixed(comms, seed + 200);
        case_overlap(comms[1], seed + 300);
        case_inplace(comms[0], seed + 400);
        case_inplace(comms[2], seed + 500);
        case_p2p(comms[0], seed + 600, NULL);
        case_freeother(comms[0], seed + 900);
        case_below(comms[1], seed + 1000);
        case_stream(comms[0], seed + 700);
        case_freed(seed + 800);
    }

    if (g_user_op_calls > 0) {
        printf("iallreduce_check rank %d: %d allreduce calls with a user op\n", g_rank,
               g_user_op_calls);
        fflush(stdout);
    }
    counts[0] = g_passed;
    counts[1] = g_failed;
    test_verdict_sum(counts, sums, 2, MPI_COMM_WORLD);
    if (g_rank == 0) printf("%ld passed, %ld failed\n", sums[0], sums[1]);
    MPI_Comm_free(&comms[1]);
    MPI_Comm_free(&comms[2]);
    MPI_Finalize();
    return g_failed > 0;
}
