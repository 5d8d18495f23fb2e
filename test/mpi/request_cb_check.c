/*
 * request_cb_check.c -- gpuring's MPI_Iallreduce requests under the completion
 * callback Open MPI runs as a request completes (ompi_request_t's
 * req_complete_cb: what a layer above a collective sets on the request a call
 * returned -- a non-blocking schedule, continuations).  From inside the callback
 * the request frees itself (MPI_Request_free, as a fire-and-forget layer does)
 * and the next call starts on the same communicator.  gpuring completed its
 * requests holding the lock its free and its new calls take: the first such
 * callback deadlocked the process.
 *
 * Each round, on MPI_COMM_WORLD and on a dup: call A (the callback set on it, the
 * one it had run from it), calls C and D, MPI_Wait(D) -- A completes first
 * (gpuring's requests complete in the order their calls end; the component below's
 * need not: progress until A's callback ran); its callback waits for C, which ended
 * with it (MPI_Wait inside the callback: completing it needs the progress that wait
 * makes), and starts B -- then MPI_Wait(B); A's, B's and C's results checked against values computed
 * here (int32 sums), the callback counted (once per A).  An alarm ends a
 * process that hangs, saying where it was.  Rank 0 prints "N passed, N failed".
 *
 * The callback is Open MPI's internal field: this program builds with Open MPI's
 * devel headers, as the component does.
 *
 *   request_cb_check [-d] [-u] [-r ROUNDS] [-c COUNT] [-q]
 *     -d  device buffers (cuda_dl.h)
 *     -u  a user op (an int32 sum of the program's own): gpuring hands such a call
 *         to the component below, on device buffers staged through host memory --
 *         gpuring's request over the component below's
 *     -r  rounds (default 20); -c elements per call (default: 1, 1000 and 70001 in
 *         turn -- gpuring's small-call, gather and ring programs)
 */
#include "ompi_config.h"

#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ompi/request/request.h"

#include "test/cuda_dl.h"
#include "test/mpi_verdict.h"

static int g_rank, g_size, g_quiet, g_device, g_count;
static long g_passed, g_failed, g_calls;
static MPI_Op g_op;
static volatile const char *g_where = "MPI_Init";

/* one call's buffers: host images, and their device copies with -d */
typedef struct {
    int32_t *send, *recv;
    void *dsend, *drecv;
    unsigned seed;
    MPI_Request req;
} call_t;

/* what A's callback does: runs the callback it replaced (the MPI layer's: with a
 * user op, the one that releases the op and datatype the request holds), frees A,
 * starts B on A's communicator */
static struct {
    MPI_Comm comm;
    call_t *b, *c;
    ompi_request_complete_fn_t prev; /* the callback A had */
    int ran;    /* callbacks run this round */
    int rc;     /* MPI_Request_free's, MPI_Wait(C)'s and B's start's */
} g_cb;

static void on_alarm(int sig)
{
    char line[256];
    int n = snprintf(line, sizeof(line), "FAILED rank %d: hung in %s (alarm)\n", g_rank,
                     (const char *)g_where);
    (void)sig;
    if (n > 0) (void)!write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
    _exit(3);
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    for (int i = 0; i < *len; i++)
        ((int32_t *)inout)[i] = (int32_t)((uint32_t)((int32_t *)inout)[i] + (uint32_t)((int32_t *)in)[i]);
}

static int32_t value(unsigned seed, int r, int i)
{
    return (int32_t)((seed * 2654435761u ^ (unsigned)r * 40503u ^ (unsigned)i * 97u) % 20001u) - 10000;
}

static void check(int ok, const char *what, unsigned seed)
{
    if (ok) {
        g_passed++;
        return;
    }
    g_failed++;
    fprintf(stderr, "FAILED rank %d: %s (seed %u)\n", g_rank, what, seed);
}

static void call_init(call_t *c, unsigned seed)
{
    size_t bytes = sizeof(int32_t) * (size_t)(g_count ? g_count : 1);

    c->seed = seed;
    c->send = malloc(bytes);
    c->recv = malloc(bytes);
    if (c->send == NULL || c->recv == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", g_rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < g_count; i++) {
        c->send[i] = value(seed, g_rank, i);
        c->recv[i] = ~0;
    }
    c->dsend = c->drecv = NULL;
    if (g_device && (test_cuda_alloc(&c->dsend, bytes, TEST_CUDA_MALLOC) != 0 ||
                     test_cuda_alloc(&c->drecv, bytes, TEST_CUDA_MALLOC) != 0 ||
                     cu.memcpy_(c->dsend, c->send, bytes, TEST_CUDA_H2D) != 0 ||
                     cu.memcpy_(c->drecv, c->recv, bytes, TEST_CUDA_H2D) != 0)) {
        fprintf(stderr, "rank %d: -d: device buffers refused\n", g_rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    c->req = MPI_REQUEST_NULL;
}

static int call_start(call_t *c, MPI_Comm comm)
{
    g_calls++;
    return MPI_Iallreduce(g_device ? c->dsend : c->send, g_device ? c->drecv : c->recv,
                          g_count, MPI_INT32_T, g_op, comm, &c->req);
}

/* its result, checked; its buffers freed */
static void call_end(call_t *c, const char *name)
{
    char what[96];
    int bad = -1;

    if (g_device && cu.memcpy_(c->recv, c->drecv, sizeof(int32_t) * (size_t)g_count,
                               TEST_CUDA_D2H) != 0) {
        snprintf(what, sizeof(what), "call %s: its result could not be read back", name);
        check(0, what, c->seed);
    } else {
        for (int i = 0; i < g_count && bad < 0; i++) {
            uint32_t want = 0;

            for (int r = 0; r < g_size; r++) want += (uint32_t)value(c->seed, r, i);
            if (c->recv[i] != (int32_t)want) bad = i;
        }
        snprintf(what, sizeof(what), "call %s: element %d of %d wrong", name, bad, g_count);
        check(bad < 0, what, c->seed);
    }
    if (g_device) {
        test_cuda_free(c->dsend, TEST_CUDA_MALLOC);
        test_cuda_free(c->drecv, TEST_CUDA_MALLOC);
    }
    free(c->send);
    free(c->recv);
}

/* A's completion: A freed from inside it, C waited for (ended with A: it completes
 * through the progress this wait makes), B started on its communicator */
static int on_complete(ompi_request_t *req)
{
    MPI_Request self = (MPI_Request)req;

    g_cb.ran++;
    if (g_cb.prev != NULL) (void)g_cb.prev(req);
    g_where = "MPI_Request_free inside the completion callback";
    g_cb.rc = MPI_Request_free(&self);
    g_where = "MPI_Wait (C) inside the completion callback";
    if (g_cb.rc == MPI_SUCCESS) g_cb.rc = MPI_Wait(&g_cb.c->req, MPI_STATUS_IGNORE);
    g_where = "MPI_Iallreduce inside the completion callback";
    if (g_cb.rc == MPI_SUCCESS) g_cb.rc = call_start(g_cb.b, g_cb.comm);
    g_where = "the completion callback's return";
    return 0;
}

static void round_on(MPI_Comm comm, unsigned seed)
{
    call_t a, b, c, d;
    int rc;

    call_init(&a, seed);
    call_init(&b, seed + 1);
    call_init(&c, seed + 2);
    call_init(&d, seed + 3);
    g_cb.comm = comm;
    g_cb.b = &b;
    g_cb.c = &c;
    g_cb.ran = 0;
    g_cb.rc = MPI_SUCCESS;
    g_where = "MPI_Iallreduce (A)";
    rc = call_start(&a, comm);
    check(rc == MPI_SUCCESS, "call A did not start", seed);
    g_cb.prev = NULL;
    if (rc == MPI_SUCCESS) {
        /* (this thread's MPI calls are where requests complete: none has run since A's
         * start, so the callback is in place before A can complete) */
        g_cb.prev = ((ompi_request_t *)a.req)->req_complete_cb;
        ((ompi_request_t *)a.req)->req_complete_cb = on_complete;
    }
    g_where = "MPI_Iallreduce (C)";
    rc = call_start(&c, comm);
    check(rc == MPI_SUCCESS, "call C did not start", seed);
    if (rc != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 1); /* (A's callback waits for it) */
    g_where = "MPI_Iallreduce (D)";
    rc = call_start(&d, comm);
    check(rc == MPI_SUCCESS, "call D did not start", seed);
    g_where = "MPI_Wait (D, with A's completion before it)";
    if (rc == MPI_SUCCESS) check(MPI_Wait(&d.req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "call D failed", seed);
    /* gpuring's own requests complete in their calls' order: A's with D's at the latest;
     * the component below's (a user op) need not -- progress until A's has run */
    g_where = "progress until A's completion (MPI_Iprobe)";
    for (double t0 = MPI_Wtime(); g_cb.ran == 0 && MPI_Wtime() - t0 < 60;) {
        int flag;

        (void)MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE);
    }
    if (g_cb.ran == 0) { /* (A still runs: its buffers cannot go) */
        fprintf(stderr, "FAILED rank %d: A's completion callback did not run in 60 s (seed "
                "%u)\n", g_rank, seed);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    check(g_cb.ran == 1, "A's completion callback ran more than once", seed);
    check(g_cb.rc == MPI_SUCCESS,
          "MPI_Request_free, MPI_Wait (C) or call B's start failed in the callback", seed);
    check(c.req == MPI_REQUEST_NULL, "C's request not freed by the callback's MPI_Wait", seed);
    call_end(&a, "A");
    call_end(&c, "C");
    call_end(&d, "D");
    if (g_cb.ran == 1 && g_cb.rc == MPI_SUCCESS) {
        g_where = "MPI_Wait (B)";
        check(MPI_Wait(&b.req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "call B failed", seed);
        call_end(&b, "B");
    }
    g_where = "between rounds";
}

int main(int argc, char **argv)
{
    static const int sizes[] = {1, 1000, 70001};
    int rounds = 20, user = 0, count = 0, opt;
    long counts[2], sums[2] = {0, 0};
    MPI_Comm dup;

    signal(SIGALRM, on_alarm);
    alarm(240);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    while ((opt = getopt(argc, argv, "dur:c:q")) != -1) {
        switch (opt) {
        case 'd': g_device = 1; break;
        case 'u': user = 1; break;
        case 'r': rounds = atoi(optarg); break;
        case 'c': count = atoi(optarg); break;
        case 'q': g_quiet = 1; break;
        default:
            if (g_rank == 0)
                fprintf(stderr, "usage: request_cb_check [-d] [-u] [-r ROUNDS] [-c COUNT] [-q]\n");
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
    g_op = MPI_SUM;
    if (user) MPI_Op_create(user_sum, 1, &g_op);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (int k = 0; k < rounds; k++) {
        g_count = count > 0 ? count : sizes[k % 3];
        round_on(MPI_COMM_WORLD, 100u * (unsigned)k + 1);
        round_on(dup, 100u * (unsigned)k + 51);
    }
    alarm(0);
    if (!g_quiet || g_failed > 0)
        printf("request_cb_check rank %d: %ld checks, %ld failed\n", g_rank, g_passed + g_failed,
               g_failed);
    /* (the runner's allcalls check: gpuring must have run them all) */
    if (!user)
        printf("request_cb_check rank %d: %ld allreduce calls on communicators of 2 or more ranks\n",
               g_rank, g_size > 1 ? g_calls : 0L);
    fflush(stdout);
    counts[0] = g_passed;
    counts[1] = g_failed;
    test_verdict_sum(counts, sums, 2, MPI_COMM_WORLD);
    if (g_rank == 0) printf("%ld passed, %ld failed\n", sums[0], sums[1]);
    MPI_Comm_free(&dup);
    if (user) MPI_Op_free(&g_op);
    MPI_Finalize();
    return g_failed > 0;
}
