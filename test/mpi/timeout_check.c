/*
 * timeout_check.c -- a stuck collective must report, not hang.
 *
 * Every rank runs one MPI_Allreduce (so gpuring sets the communicator up),
 * then the last rank skips the second one.  With coll_gpuring_wait_timeout
 * set to a few seconds, every other rank must get an error back from
 * MPI_Allreduce (MPI_ERRORS_RETURN) within a bounded time; the driver checks
 * that stderr names what was waited for (rank, step).  A later call on the
 * same communicator must fail at once instead of running on broken state.
 * With a second argument "setup", the last rank skips the first call
 * instead, so the others wait in gpuring's setup exchanges: those must time
 * out the same way (and the call after them fail at once).
 * Prints `N passed, N failed` on rank 0.
 *
 * usage: timeout_check [LIMIT_SECONDS [setup]]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 100000

int main(int argc, char **argv)
{
    int rank, size, rc, passed = 0, failed = 0, all_failed = 0;
    int *in, *out;
    double t0, elapsed, limit = argc > 1 ? atof(argv[1]) : 60.0;
    int setup = argc > 2 && strcmp(argv[2], "setup") == 0;
    MPI_Comm comm;

    MPI_Init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    in = malloc(sizeof(int) * COUNT);
    out = malloc(sizeof(int) * COUNT);
    for (int i = 0; i < COUNT; i++) in[i] = rank + i;

    if (!setup) {
        rc = MPI_Allreduce(in, out, COUNT, MPI_INT, MPI_SUM, comm);
        if (rc == MPI_SUCCESS && out[7] == size * 7 + size * (size - 1) / 2) {
            passed++;
        } else {
            failed++;
            fprintf(stderr, "rank %d: first allreduce rc %d out[7] %d\n", rank, rc, out[7]);
        }
    }

    if (rank != size - 1) {
        t0 = MPI_Wtime();
        rc = MPI_Allreduce(in, out, COUNT, MPI_INT, MPI_SUM, comm);
        elapsed = MPI_Wtime() - t0;
        if (rc != MPI_SUCCESS && elapsed < limit) {
            passed++;
        } else {
            failed++;
            fprintf(stderr, "rank %d: stuck allreduce returned %d after %.1f s\n", rank, rc,
                    elapsed);
        }
        /* the communicator's gpuring state is broken now: refuse at once (well
         * under the 3 s wait timeout the driver sets), don't wait or hang */
        t0 = MPI_Wtime();
        rc = MPI_Allreduce(in, out, COUNT, MPI_INT, MPI_SUM, comm);
        if (rc != MPI_SUCCESS && MPI_Wtime() - t0 < 2.5) {
            passed++;
        } else {
            failed++;
            fprintf(stderr, "rank %d: call after failure returned %d\n", rank, rc);
        }
    }
    /* the verdict travels over MPI_COMM_WORLD, which is healthy */
    MPI_Reduce(&failed, &all_failed, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : &passed, &passed, 1, MPI_INT, MPI_SUM, 0,
               MPI_COMM_WORLD);
    if (rank == 0) printf("%d passed, %d failed\n", passed, all_failed);
    free(in);
    free(out);
    MPI_Finalize();
    return all_failed != 0;
}
