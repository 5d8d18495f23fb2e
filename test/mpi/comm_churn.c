/*
 * comm_churn.c -- create and free many communicators, one small
 * MPI_Allreduce on each, and check that nothing leaks.
 *
 * Iteration i makes a communicator (even i: MPI_Comm_dup of MPI_COMM_WORLD;
 * odd i: MPI_Comm_split, alternately by rank parity and over all ranks with
 * the order reversed), runs MPI_Allreduce(MPI_INT, MPI_SUM, count 5),
 * checks the result against a reference computed here, and frees it.
 *
 * After one warm-up dup/allreduce/free (so that process-wide state such as a
 * progress thread or caches exists) and again at the end, each rank counts
 * its open file descriptors (/proc/self/fd), its threads (/proc/self/status
 * "Threads:") and the entries of /dev/shm it made (test/shm_segments.h:
 * gpuring's and the CUDA CPU runtime's, named with its pid -- every segment
 * has one owner, a rank of the job, so the ranks' counts together cover the
 * job's, and another job's segments (make check runs two suites at once) never
 * count).  None of them may grow.  Resources released asynchronously get a
 * grace period of up to 3 s before the final count.
 *
 * Cases: one per iteration (the allreduce result) plus one each for fds,
 * threads and shm.  The verdict is gathered with MPI_Gather; rank 0 prints
 * `N passed, N failed`; the exit code is non-zero if anything failed.
 *
 * With -l SEC, one more case: a communicator with one MPI_Allreduce on it,
 * freed by the last rank SEC seconds after the others: their MPI_Comm_free
 * must not wait for it (each must return within SEC / 2).  Over net
 * connections a send end's teardown waits for the receiver's last credit,
 * which the receiver must not hold back until its own teardown.  With -b too
 * (3 ranks or more), every rank but rank 0 is late, and busy meanwhile: it
 * runs MPI_Allreduce calls on a communicator of the late ranks for the SEC
 * seconds, so gpuring's progress thread there is never idle; rank 0's free
 * must still return within SEC / 2.
 *
 * One more case, always: MPI_Comm_idup of a communicator, then three MPI_Allreduce
 * calls on it before the wait, the last rank 0.3 s late to them: Open MPI starts its
 * agreement on the new communicator's context id (MPI_Iallreduce calls of one int)
 * from its progress, inside those calls on some ranks, after them on others (with
 * coll_gpuring_host_buffers 1 gpuring ran those and failed: steps of another call).
 * Each result must be right, and the new communicator's first call's.
 *
 * One more case, always: MPI_Comm_idup of a new communicator, then its first
 * MPI_Allreduce before the wait -- the odd ranks test the idup's request for 0.1 s
 * first (the agreement's first steps start in that progress), the even ranks sleep
 * 0.05 s (theirs start inside the MPI_Allreduce).  gpuring's exchanges in that call
 * (its parameters' agreement, its setup) must not pair with the agreement's steps:
 * through the component below's MPI_Iallgather they took libnbc's numbers in another
 * order on each side (MPI_ERR_TRUNCATE there, the exchange timing out).  Each result
 * must be right, and the new communicator's first call's.
 *
 * One more case, always: 32 communicators, each made, given one MPI_Bcast of a host
 * int (which goes below without waiting: gpuring's agreement on its parameters is
 * left in flight), and freed; each must be destroyed -- Open MPI's Fortran handle of a
 * communicator (MPI_Comm_c2f) is its place in a table that its destruction gives back,
 * and the last one's must be within 8 of the first one's.  (The PML's requests of the
 * agreement hold the communicator: while only the module's next look freed them, every
 * such communicator lived until MPI_Finalize, and the handles went on counting.)
 *
 * One more case, always: a communicator freed by rank 0 while gpuring's agreement
 * on its parameters (posted by its first call, which went below without waiting:
 * an MPI_Bcast of one host int, root 0) is still in flight -- the other ranks make
 * their call 0.2 s later.  The values must arrive; under the sanitizer flavor, the
 * exchange's memory must be freed once it completes (LeakSanitizer at exit).
 *
 * Options: -n N (communicators, default 1000), -q quiet, -l SEC [-b], -d device buffers
 * (libcudart, dlopen'ed: a GPU or the CUDA CPU runtime, whose device memory
 * segments in /dev/shm, "cudacpu*", are counted too: every communicator then
 * makes and frees its device connections).
 */
#include <mpi.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/cuda_dl.h"
#include "test/shm_segments.h"

#define COUNT 5

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the descriptor of the directory stream itself */
}

static int count_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "Threads:", 8)) { n = atoi(line + 8); break; }
    fclose(f);
    return n;
}

/* -d: the call's buffers are device memory, data copied in and out around it */
static int *dsend, *drecv;

static int churn_allreduce(int *s, int *r, MPI_Comm c)
{
    int rc;

    if (dsend == NULL) return MPI_Allreduce(s, r, COUNT, MPI_INT, MPI_SUM, c);
    cu.memcpy_(dsend, s, COUNT * sizeof(int), TEST_CUDA_H2D);
    cu.memcpy_(drecv, r, (COUNT + 1) * sizeof(int), TEST_CUDA_H2D);
    rc = MPI_Allreduce(dsend, drecv, COUNT, MPI_INT, MPI_SUM, c);
    cu.memcpy_(r, drecv, (COUNT + 1) * sizeof(int), TEST_CUDA_D2H);
    return rc;
}

typedef struct {
    int fds, threads, shm;
} res_t;

static res_t measure(void)
{
    res_t r = {count_fds(), count_threads(), shm_segments_of((int)getpid())};
    return r;
}

/* value rank w (world rank) contributes at index j in iteration it */
static int val(int w, int j, int it) { return (w + 1) * (j + 1) + it % 1000; }

/* The freed communicators destroyed (the usage above): 0 where they are */
static int freed_destroyed_check(int rank)
{
    MPI_Fint first = 0, last = 0;

    for (int k = 0; k <= 32; k++) {
        MPI_Comm c;
        int v = rank == 0 ? 7 : 0;

        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        last = MPI_Comm_c2f(c);
        if (k == 0) first = last;
        MPI_Bcast(&v, 1, MPI_INT, 0, c);
        MPI_Comm_free(&c);
        MPI_Barrier(MPI_COMM_WORLD); /* (progress: every rank's part of the agreement in) */
    }
    if (last - first < 8) return 0;
    fprintf(stderr, "rank %d: 32 communicators freed after one call each that left gpuring's "
            "agreement in flight: their handles went from %d to %d, none destroyed\n", rank,
            (int)first, (int)last);
    return 1;
}

/* The new communicator of an MPI_Comm_idup that ended with rc (MPI_SUCCESS): its first
 * call, checked against e (*bad), then freed.  The call's rc (else rc). */
static int idup_child_call(int rc, MPI_Comm *child, int *s, int *r, const int *e, int *bad)
{
    if (rc != MPI_SUCCESS) return rc;
    MPI_Comm_set_errhandler(*child, MPI_ERRORS_RETURN);
    r[0] = -1;
    rc = churn_allreduce(s, r, *child);
    *bad |= memcmp(r, e, sizeof(int) * COUNT) != 0;
    MPI_Comm_free(child);
    return rc;
}

/* MPI_Comm_idup of a new communicator, its agreement's first steps started from
 * progress on the odd ranks only, then the new communicator's first MPI_Allreduce
 * (the usage above): 0 where every result is right */
static int idup_progress_check(int rank, int size)
{
    MPI_Comm parent, child;
    MPI_Request req;
    int s[COUNT], r[COUNT + 1], e[COUNT], bad = 0, rc, done = 0;

    MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &parent);
    MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
    for (int j = 0; j < COUNT; j++) {
        s[j] = val(rank, j, 11);
        e[j] = 0;
        for (int w = 0; w < size; w++) e[j] += val(w, j, 11);
    }
    rc = MPI_Comm_idup(parent, &child, &req);
    if (rank % 2 == 1) {
        for (int k = 0; k < 100 && rc == MPI_SUCCESS && !done; k++) {
            rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            usleep(1000);
        }
    } else {
        usleep(50000);
    }
    r[0] = -1;
    if (rc == MPI_SUCCESS) rc = churn_allreduce(s, r, parent);
    bad |= memcmp(r, e, sizeof(e)) != 0;
    if (!done) rc |= MPI_Wait(&req, MPI_STATUS_IGNORE);
    rc = idup_child_call(rc, &child, s, r, e, &bad);
    MPI_Comm_free(&parent);
    if (rc != MPI_SUCCESS || bad)
        fprintf(stderr, "rank %d: a new communicator's first MPI_Allreduce with its "
                "MPI_Comm_idup's agreement in flight: rc %d%s\n", rank, rc,
                bad ? ", a wrong result" : "");
    return rc != MPI_SUCCESS || bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, n = 1000, quiet = 0, opt;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int device = 0;
    double lag = 0.0;
    int busy = 0;
    while ((opt = getopt(argc, argv, "n:ql:bd")) != -1) {
        if (opt == 'n') n = atoi(optarg);
        else if (opt == 'q') quiet = 1;
        else if (opt == 'l') lag = atof(optarg);
        else if (opt == 'b') busy = 1;
        else if (opt == 'd') device = 1;
        else {
            if (!rank) fprintf(stderr, "usage: comm_churn [-n communicators] [-q] [-l sec [-b]] [-d]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (device) {
        char err[256];
        if (test_cuda_load(rank, err, sizeof err) != 0 ||
            cu.malloc_((void **)&dsend, COUNT * sizeof(int)) != 0 ||
            cu.malloc_((void **)&drecv, (COUNT + 1) * sizeof(int)) != 0) {
            fprintf(stderr, "rank %d: device buffers: %s\n", rank, cu.lib ? "CUDA failed" : err);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* warm-up: one communicator of each kind the loop makes, so that what a process makes
     * once (gpuring's copy-back stream for calls staged on a one-rank split, ...) is
     * there before the count */
    for (int kind = 0; kind < 3; kind++) {
        MPI_Comm c;
        int s[COUNT] = {1, 2, 3, 4, 5}, r[COUNT + 1];
        if (kind == 0) MPI_Comm_dup(MPI_COMM_WORLD, &c);
        else MPI_Comm_split(MPI_COMM_WORLD, kind == 1 ? rank % 2 : 0, kind == 1 ? rank : size - rank, &c);
        churn_allreduce(s, r, c);
        MPI_Comm_free(&c);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    res_t before = measure();
    MPI_Barrier(MPI_COMM_WORLD);

    unsigned char *fail = calloc((size_t)n + 8, 1);
    int printed = 0;
    double t0 = MPI_Wtime();
    for (int it = 0; it < n; it++) {
        MPI_Comm c;
        int kind; /* 0 dup, 1 split by parity, 2 split reversed */
        if (it % 2 == 0) {
            kind = 0;
            MPI_Comm_dup(MPI_COMM_WORLD, &c);
        } else if ((it / 2) % 2 == 0) {
            kind = 1;
            MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &c);
        } else {
            kind = 2;
            MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &c);
        }
        int s[COUNT], r[COUNT + 1], e[COUNT];
        for (int j = 0; j < COUNT; j++) {
            s[j] = val(rank, j, it);
            r[j] = -12345;
            e[j] = 0;
            for (int w = 0; w < size; w++)
                if (kind != 1 || w % 2 == rank % 2) e[j] += val(w, j, it);
        }
        r[COUNT] = 0x5a5a5a5a;
        int rc = churn_allreduce(s, r, c);
        int bad = rc != MPI_SUCCESS || r[COUNT] != 0x5a5a5a5a;
        for (int j = 0; j < COUNT; j++) bad |= r[j] != e[j];
        if (bad) {
            fail[it] = 1;
            if (printed++ < 20)
                fprintf(stderr,
                        "MISMATCH rank %d iteration %d (%s): rc %d got [%d %d %d %d %d] expected [%d %d %d %d %d]%s\n",
                        rank, it, kind == 0 ? "dup" : kind == 1 ? "split parity" : "split reversed", rc, r[0], r[1],
                        r[2], r[3], r[4], e[0], e[1], e[2], e[3], e[4], r[COUNT] != 0x5a5a5a5a ? " (guard overwritten)" : "");
        }
        MPI_Comm_free(&c);
        if (!quiet && rank == 0 && (it + 1) % 250 == 0)
            printf("rank 0: %d communicators (%.2f ms each)\n", it + 1, 1e3 * (MPI_Wtime() - t0) / (it + 1));
    }
    double t_loop = MPI_Wtime() - t0;

    /* the agreement abandoned in flight: rank 0 frees the communicator before the
     * others have made their first call on it */
    {
        MPI_Comm c;
        int v = rank == 0 ? 4242 : -1;

        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        if (rank != 0) usleep(200000);
        int rc = MPI_Bcast(&v, 1, MPI_INT, 0, c);
        MPI_Comm_free(&c);
        fail[n + 3] = rc != MPI_SUCCESS || v != 4242;
        if (fail[n + 3])
            fprintf(stderr, "rank %d: MPI_Bcast on a communicator freed at once by its root: "
                    "rc %d, value %d, expected 4242\n", rank, rc, v);
    }

    /* MPI_Comm_idup, then MPI_Allreduce calls on the parent before its wait, the last
     * rank late to them: Open MPI's agreement on the new communicator's context id
     * (MPI_Iallreduce calls of one int) starts from its progress -- inside those calls
     * on the punctual ranks, after them on the late one */
    {
        MPI_Comm parent, child;
        MPI_Request req;
        int s[COUNT], r[COUNT + 1], e[COUNT], bad = 0, rc;

        MPI_Comm_dup(MPI_COMM_WORLD, &parent);
        MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
        for (int j = 0; j < COUNT; j++) {
            s[j] = val(rank, j, 7);
            e[j] = 0;
            for (int w = 0; w < size; w++) e[j] += val(w, j, 7);
        }
        rc = churn_allreduce(s, r, parent); /* (its setup) */
        rc |= MPI_Comm_idup(parent, &child, &req);
        if (rank == size - 1) usleep(300000);
        for (int k = 0; k < 3 && rc == MPI_SUCCESS; k++) {
            r[0] = -1;
            rc = churn_allreduce(s, r, parent);
            bad |= memcmp(r, e, sizeof(e)) != 0;
        }
        rc |= MPI_Wait(&req, MPI_STATUS_IGNORE);
        rc = idup_child_call(rc, &child, s, r, e, &bad);
        MPI_Comm_free(&parent);
        fail[n + 4] = rc != MPI_SUCCESS || bad;
        if (fail[n + 4])
            fprintf(stderr, "rank %d: MPI_Allreduce calls before an MPI_Comm_idup's wait: "
                    "rc %d%s\n", rank, rc, bad ? ", a wrong result" : "");
    }

    fail[n + 5] = idup_progress_check(rank, size);
    fail[n + 6] = freed_destroyed_check(rank);

    /* -l: the last rank (-b: every rank but 0, calling on a communicator of theirs
     * meanwhile) frees a used communicator `lag` seconds after the others */
    if (lag > 0) {
        MPI_Comm c, late_comm;
        int s[COUNT] = {1, 2, 3, 4, 5}, r[COUNT + 1];
        const int late = busy ? rank != 0 : rank == size - 1;
        double took;

        MPI_Comm_split(MPI_COMM_WORLD, late, rank, &late_comm);
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        churn_allreduce(s, r, c);
        if (late && busy) { /* (the late ranks agree when to stop: the same calls on each) */
            int done = 0;

            for (took = MPI_Wtime(); !done;) {
                int mine;

                for (int k = 0; k < 100; k++) churn_allreduce(s, r, late_comm);
                mine = MPI_Wtime() - took >= lag;
                MPI_Allreduce(&mine, &done, 1, MPI_INT, MPI_MAX, late_comm);
            }
        } else if (late) {
            usleep((useconds_t)(lag * 1e6));
        }
        took = MPI_Wtime();
        MPI_Comm_free(&c);
        took = MPI_Wtime() - took;
        fail[n + 7] = !late && took > lag / 2;
        if (fail[n + 7])
            fprintf(stderr, "rank %d: MPI_Comm_free took %.2f s, waiting for rank %d%s, which "
                    "freed the communicator %.2f s later%s\n", rank, took, size - 1,
                    busy ? " and the others" : "", lag,
                    busy ? " (calling MPI_Allreduce meanwhile)" : "");
        MPI_Comm_free(&late_comm);
    }

    /* final counts, with a grace period for asynchronous release */
    res_t after;
    double tg = MPI_Wtime();
    for (;;) {
        MPI_Barrier(MPI_COMM_WORLD);
        after = measure();
        int grew = after.fds > before.fds || after.threads > before.threads || after.shm > before.shm, any = 0;
        MPI_Reduce(&grew, &any, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD); /* MPI_Reduce: not the call under test */
        MPI_Bcast(&any, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!any || MPI_Wtime() - tg > 3.0) break;
        usleep(100000);
    }
    fail[n] = after.fds > before.fds;
    fail[n + 1] = after.threads > before.threads;
    fail[n + 2] = after.shm > before.shm;
    printf("rank %d: fds %d -> %d, threads %d -> %d, gpuring shm entries %d -> %d%s\n", rank, before.fds, after.fds,
           before.threads, after.threads, before.shm, after.shm,
           (fail[n] || fail[n + 1] || fail[n + 2]) ? "  <-- GREW" : "");
    fflush(stdout);

    int ncases = n + 7 + (lag > 0);
    unsigned char *all = rank == 0 ? malloc((size_t)ncases * size) : NULL;
    MPI_Gather(fail, ncases, MPI_UNSIGNED_CHAR, all, ncases, MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD);
    int verdict = 0;
    if (rank == 0) {
        int npass = 0, nfail = 0;
        static const char *res_names[8] = {"fds", "threads", "gpuring shm entries",
                                           "MPI_Bcast on a communicator its root freed at once",
                                           "MPI_Allreduce calls before an MPI_Comm_idup's wait",
                                           "a first MPI_Allreduce with an MPI_Comm_idup's "
                                           "agreement in flight",
                                           "freed communicators destroyed (their handles given "
                                           "back)",
                                           "MPI_Comm_free's time: it waited for a peer"};
        for (int k = 0; k < ncases; k++) {
            int f = 0;
            for (int r = 0; r < size; r++) f |= all[(size_t)r * ncases + k];
            if (f) {
                if (k >= n) printf("FAILED case: %s%s\n", res_names[k - n], k < n + 3 ? " grew" : "");
                else if (nfail < 20) printf("FAILED case: allreduce on communicator %d\n", k);
                nfail++;
            } else {
                npass++;
            }
        }
        printf("comm_churn: np %d, %d communicators, %.2f s (%.2f ms per communicator)\n", size, n, t_loop,
               n ? 1e3 * t_loop / n : 0.0);
        printf("%d passed, %d failed\n", npass, nfail);
        fflush(stdout);
        verdict = nfail ? 1 : 0;
        free(all);
    }
    MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);
    /* (and this rank's own failures, whatever the broadcast -- gpuring's -- said) */
    for (int k = 0; k < ncases; k++) verdict |= fail[k] != 0;
    if (device) {
        cu.free_(dsend);
        cu.free_(drecv);
    }
    free(fail);
    MPI_Finalize();
    return verdict;
}
