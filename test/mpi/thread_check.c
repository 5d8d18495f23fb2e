/*
 * thread_check.c -- MPI_THREAD_MULTIPLE: T threads per rank, each with its
 * own communicator (a dup of MPI_COMM_WORLD, made beforehand), start
 * together and make their communicator's first MPI_Allreduce at the same
 * moment, then a few more.  Every result is compared with the sum computed
 * here; the run script checks that gpuring took every call (its finalize
 * summary: nothing handed to the component below), which concurrent setups
 * that collide on a communicator identity would break.
 *
 * usage: thread_check [-t threads] [-n calls] [-c count] [-q]
 * Ends with "N passed, N failed" on rank 0 (calls checked, over all ranks).
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/mpi_verdict.h"

#define MAX_THREADS 16

static int world_rank, world_size, ncalls = 20, count = 1000;
static pthread_barrier_t start;

typedef struct {
    int id;
    MPI_Comm comm;
    int passed, failed;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    int *in = malloc((size_t)count * sizeof(int)), *out = malloc((size_t)count * sizeof(int));

    pthread_barrier_wait(&start); /* every thread's first call at once */
    for (int k = 0; k < ncalls; k++) {
        int ok = 1, rc;
        for (int i = 0; i < count; i++) in[i] = world_rank * 1000 + w->id * 100 + k + i % 7;
        memset(out, 0xA5, (size_t)count * sizeof(int));
        rc = MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, w->comm);
        for (int i = 0; i < count && rc == MPI_SUCCESS; i++) {
            int want = 0;
            for (int r = 0; r < world_size; r++) want += r * 1000 + w->id * 100 + k + i % 7;
            if (out[i] != want) {
                ok = 0;
                fprintf(stderr, "FAIL rank %d thread %d call %d: element %d is %d, want %d\n",
                        world_rank, w->id, k, i, out[i], want);
                break;
            }
        }
        if (rc != MPI_SUCCESS) {
            ok = 0;
            fprintf(stderr, "FAIL rank %d thread %d call %d: MPI error %d\n", world_rank, w->id,
                    k, rc);
        }
        if (ok) w->passed++;
        else w->failed++;
    }
    free(in);
    free(out);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, nthreads = 4, quiet = 0, opt;
    long mine[2] = {0, 0}, sum[2] = {0, 0};
    worker_t w[MAX_THREADS];
    pthread_t t[MAX_THREADS];

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    while ((opt = getopt(argc, argv, "t:n:c:q")) != -1) {
        switch (opt) {
        case 't': nthreads = atoi(optarg); break;
        case 'n': ncalls = atoi(optarg); break;
        case 'c': count = atoi(optarg); break;
        case 'q': quiet = 1; break;
        default:
            if (world_rank == 0) fprintf(stderr, "usage: thread_check [-t T] [-n N] [-c C] [-q]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (provided < MPI_THREAD_MULTIPLE || nthreads < 1 || nthreads > MAX_THREADS) {
        if (world_rank == 0) {
            fprintf(stderr, "thread_check: %s\n", provided < MPI_THREAD_MULTIPLE
                                                      ? "MPI_THREAD_MULTIPLE not provided"
                                                      : "1-16 threads");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < nthreads; i++) {
        w[i] = (worker_t){.id = i};
        MPI_Comm_dup(MPI_COMM_WORLD, &w[i].comm);
    }
    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, worker_main, &w[i]);
    for (int i = 0; i < nthreads; i++) {
        pthread_join(t[i], NULL);
        mine[0] += w[i].passed;
        mine[1] += w[i].failed;
        MPI_Comm_free(&w[i].comm);
    }
    pthread_barrier_destroy(&start);
    /* for the runner: at least this many must show in gpuring's allreduce summary */
    if (world_size > 1) {
        printf("thread_check rank %d: %d allreduce calls on communicators of 2 or more ranks\n",
               world_rank, nthreads * ncalls);
        fflush(stdout);
    }
    test_verdict_sum(mine, sum, 2, MPI_COMM_WORLD);
    if (world_rank == 0) {
        if (!quiet) printf("thread_check: %d ranks x %d threads x %d calls\n", world_size, nthreads, ncalls);
        printf("%ld passed, %ld failed\n", sum[0], sum[1]);
    }
    MPI_Finalize();
    return mine[1] > 0 || (world_rank == 0 && sum[1] > 0) ? 1 : 0;
}
