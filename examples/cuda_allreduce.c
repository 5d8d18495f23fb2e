/*
 * cuda_allreduce.c -- an MPI program written for a GPU: every rank fills a
 * cudaMalloc'd buffer, MPI_Allreduce sums it across ranks in place, and
 * each rank checks the result it copies back.  It uses nothing but plain
 * MPI and the CUDA runtime (cudaGetDeviceCount, cudaSetDevice, cudaMalloc,
 * cudaMemset, cudaMemcpy, cudaDeviceSynchronize, cudaFree, cudaGetErrorString).
 *
 * On a GPU machine:   mpicc cuda_allreduce.c -I/usr/local/cuda/include \
 *                       -L/usr/local/cuda/lib64 -lcudart -o cuda_allreduce
 *                     (the toolkit's directories where it lies elsewhere)
 * Without a GPU:      test/cudacpu/run cc examples/cuda_allreduce.c -o cuda_allreduce
 *                     test/cudacpu/run mpirun -np 3 ./cuda_allreduce
 * Ends with "N passed, N failed" (ranks whose result was right) on rank 0.
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                    \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                \
            MPI_Abort(MPI_COMM_WORLD, 1);                                              \
        }                                                                              \
    } while (0)

int main(int argc, char **argv)
{
    int rank, size, local, ndev = 1, count = argc > 1 ? atoi(argv[1]) : 1 << 20, bad = 0, ok,
        nok;
    float *host, *dev;
    MPI_Comm node;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* one GPU per rank of the node (ranks beyond the GPUs share them: MPS) */
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    CHECK(cudaGetDeviceCount(&ndev));
    CHECK(cudaSetDevice(local % ndev));
    host = malloc((size_t)count * sizeof(float));
    CHECK(cudaMalloc((void **)&dev, (size_t)count * sizeof(float)));
    CHECK(cudaMemset(dev, 0, (size_t)count * sizeof(float)));
    for (int i = 0; i < count; i++) host[i] = (float)(rank + 1) * (float)(i % 1000);
    CHECK(cudaMemcpy(dev, host, (size_t)count * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaDeviceSynchronize());

    MPI_Allreduce(MPI_IN_PLACE, dev, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

    CHECK(cudaMemcpy(host, dev, (size_t)count * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < count && !bad; i++) {
        float want = (float)(size * (size + 1) / 2) * (float)(i % 1000);
        if (host[i] != want) {
            fprintf(stderr, "rank %d: element %d is %g, want %g\n", rank, i, host[i], want);
            bad = 1;
        }
    }
    ok = !bad;
    MPI_Reduce(&ok, &nok, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%d passed, %d failed\n", nok, size - nok);
    CHECK(cudaFree(dev));
    free(host);
    MPI_Finalize();
    return rank == 0 && nok != size;
}
