/*
 * mpi_verdict.h -- how the MPI test programs add up their ranks' tallies for the
 * closing "N passed, M failed" line: through MPI_Gather, a collective gpuring never
 * runs, so a fault in gpuring's own MPI_Reduce or MPI_Allreduce cannot lose another
 * rank's failures on their way to rank 0's line.  Every program also exits non-zero
 * on a rank whose own checks failed (mpirun then fails the job), whatever rank 0
 * printed.  Header-only (static functions).
 */
#ifndef GPURING_TEST_MPI_VERDICT_H
#define GPURING_TEST_MPI_VERDICT_H

#include <mpi.h>
#include <stdlib.h>

/* The n longs `mine` of every rank of `comm`, summed into `sum` at rank 0 (elsewhere
 * untouched).  MPI_SUCCESS, or the error of the gather (or MPI_ERR_NO_MEM). */
static inline int test_verdict_sum(const long *mine, long *sum, int n, MPI_Comm comm)
{
    int rank, size, rc;
    long *all = NULL;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank == 0 && (all = malloc(sizeof(long) * (size_t)n * (size_t)size)) == NULL)
        return MPI_ERR_NO_MEM; /* (the others' gather then waits: the case's timeout) */
    rc = MPI_Gather(mine, n, MPI_LONG, all, n, MPI_LONG, 0, comm);
    if (rank == 0 && rc == MPI_SUCCESS) {
        for (int k = 0; k < n; k++) {
            sum[k] = 0;
            for (int r = 0; r < size; r++) sum[k] += all[(size_t)r * (size_t)n + (size_t)k];
        }
    }
    free(all);
    return rc;
}

#endif
