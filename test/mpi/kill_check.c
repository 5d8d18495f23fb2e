/*
 * kill_check.c -- a peer dies in the middle of a call: the survivors must get
 * an error back, within the wait timeout, and leave nothing in /dev/shm.
 *
 * Every rank runs one checked MPI_Allreduce (gpuring sets the communicator
 * up), then all loop on large calls; the last rank kills itself (SIGKILL,
 * from a timer, so it dies inside a call, as a crashed rank would) a few
 * tens of milliseconds in.  Every other rank must see a call fail
 * (MPI_ERRORS_RETURN) no later than `limit` seconds after that call began,
 * then a call on the same communicator refused at once, and its process idle
 * (under 0.3 s of CPU in the next second: gpuring's progress thread does not spin
 * on the broken communicator's connections).  With every rank its
 * own virtual node the survivors' connections to the dead rank are NET
 * connections: on the same host they have no UCX failure detection, so the
 * wait timeout (coll_gpuring_wait_timeout, a few seconds in the driver) ends
 * the call; with UCX detection (coll_gpuring_net_peer_failure all) UCX's
 * report may end it sooner.
 *
 * mpirun must keep the survivors running after the death
 * (--mca orte_enable_recovery 1).  The world is then broken, so the
 * survivors do not call MPI_Finalize: rank 0 reports through a file the
 * others write (argv[2], a directory) and prints `N passed, N failed`;
 * every survivor then exits with _exit (nonzero where its checks failed).
 *
 * Usage: kill_check LIMIT_SECONDS DIR
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "test/cpu_seconds.h"
#include "test/shm_segments.h"

#define COUNT (4 * 1024 * 1024) /* 16 MiB of floats: a call of a few ms */
#define MAX_CALLS 100000

int main(int argc, char **argv)
{
    double limit = argc > 1 ? atof(argv[1]) : 30.0;
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    int rank, size, rc, passed = 0, failed = 0, calls = 0, victim_pid = 0;
    float *in, *out;
    double t0 = 0, elapsed = 0;
    char path[4096];
    MPI_Comm comm;
    FILE *f;

    MPI_Init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    in = malloc(sizeof(float) * COUNT);
    out = malloc(sizeof(float) * COUNT);
    for (int i = 0; i < COUNT; i++) in[i] = (float)(rank + i % 100);
    /* no verdict of an earlier run in DIR (every rank's is gone before the first call
     * ends anywhere, long before any is written) */
    snprintf(path, sizeof(path), "%s/kill_check.%d", dir, rank);
    (void)unlink(path);

    rc = MPI_Allreduce(in, out, COUNT, MPI_FLOAT, MPI_SUM, comm);
    if (rc == MPI_SUCCESS && out[7] == (float)(7 * size + size * (size - 1) / 2)) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "rank %d: first allreduce rc %d out[7] %g\n", rank, rc, out[7]);
    }
    if (rank == size - 1) victim_pid = (int)getpid();
    MPI_Bcast(&victim_pid, 1, MPI_INT, size - 1, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == size - 1) {
        /* die inside a call: SIGKILL, no handler, no teardown */
        struct itimerval it = {.it_value = {.tv_sec = 0, .tv_usec = 30 * 1000}};
        signal(SIGALRM, SIG_DFL); /* SIGALRM's default kills too, but say it plainly */
        setitimer(ITIMER_REAL, &it, NULL);
        for (;;) MPI_Allreduce(in, out, COUNT, MPI_FLOAT, MPI_SUM, comm);
    }

    for (rc = MPI_SUCCESS; rc == MPI_SUCCESS && calls < MAX_CALLS; calls++) {
        t0 = MPI_Wtime();
        rc = MPI_Allreduce(in, out, COUNT, MPI_FLOAT, MPI_SUM, comm);
        elapsed = MPI_Wtime() - t0;
    }
    if (rc != MPI_SUCCESS && elapsed < limit) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "rank %d: after %d calls the last returned %d after %.1f s (limit %.0f)\n",
                rank, calls, rc, elapsed, limit);
    }
    fprintf(stderr, "rank %d: the call the peer died in failed after %.2f s (call %d)\n", rank,
            elapsed, calls);
    /* broken communicator: refused at once */
    t0 = MPI_Wtime();
    rc = MPI_Allreduce(in, out, COUNT, MPI_FLOAT, MPI_SUM, comm);
    if (rc != MPI_SUCCESS && MPI_Wtime() - t0 < 1.0) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "rank %d: the call after the failure returned %d\n", rank, rc);
    }
    /* the broken communicator, still allocated, costs no CPU: nothing of its calls is
     * left for gpuring's progress thread to spin on (a send waiting for the dead rank's
     * credit, or for one from a rank that gave up on the call) */
    {
        double cpu = test_cpu_seconds();

        usleep(1000 * 1000);
        cpu = test_cpu_seconds() - cpu;
        fprintf(stderr, "rank %d: %.3f s of CPU over 1 s idle after the failure\n", rank, cpu);
        if (cpu < 0.3) {
            passed++;
        } else {
            failed++;
            fprintf(stderr, "rank %d: the process spins after the failure\n", rank);
        }
    }
    /* the dead rank's segments are unlinked by its peers' setup; ours too */
    if (shm_segments_of(victim_pid) + shm_segments_of((int)getpid()) == 0) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "rank %d: gpuring segments left in /dev/shm\n", rank);
    }

    /* the verdict: no collective over a world with a dead member; files instead */
    snprintf(path, sizeof(path), "%s/kill_check.%d", dir, rank);
    if ((f = fopen(path, "w")) != NULL) {
        fprintf(f, "%d %d\n", passed, failed);
        fclose(f);
    }
    if (rank == 0) {
        double wait0 = MPI_Wtime();
        int all_passed = 0, all_failed = 0, got = 0;

        while (got < size - 1 && MPI_Wtime() - wait0 < limit) {
            got = 0;
            all_passed = all_failed = 0;
            for (int r = 0; r < size - 1; r++) {
                int p = 0, q = 0;
                snprintf(path, sizeof(path), "%s/kill_check.%d", dir, r);
                if ((f = fopen(path, "r")) == NULL) continue;
                if (fscanf(f, "%d %d", &p, &q) == 2) {
                    got++;
                    all_passed += p;
                    all_failed += q;
                }
                fclose(f);
            }
            if (got < size - 1) usleep(50 * 1000);
        }
        if (got < size - 1) all_failed++;
        printf("%d passed, %d failed\n", all_passed, all_failed);
        fflush(stdout);
    }
    fflush(stderr);
    _exit(failed != 0);
}
