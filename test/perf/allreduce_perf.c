/*
 * allreduce_perf.c -- MPI_Allreduce bandwidth test in the style of
 * nccl-tests' all_reduce_perf.
 *
 *   -b minbytes  (default 8)        -e maxbytes (default 64M; K/M/G suffixes;
 *                                      always measured, on the factor's grid or not)
 *   -f factor    (default 2)        -t type: float double int8 uint8 int32
 *                                      uint32 int64 uint64 (default float)
 *   -o op: sum prod min max (default sum)
 *   -n iters (default 20)           -w warmup iters (default 5)
 *   -m host|device|memcpy (default host; device loads libcudart with dlopen
 *                   at run time and exits 2 if it cannot; memcpy times no
 *                   MPI call but every rank's memcpy of the same bytes, all
 *                   ranks at once: the memory bound host paths are held
 *                   against, busbw = algbw, nothing checked)
 *   -c 0|1 check results (default 1)  -i in place (default off)
 *
 * One row per size: size(B) count type op time(us) algbw(GB/s) busbw(GB/s)
 * #wrong.  time is the average over iters of one MPI_Allreduce, taken as the
 * maximum over ranks; algbw = size / time; busbw = algbw * 2(n-1)/n.
 * #wrong counts wrong elements over all ranks after one extra checked call
 * made with fresh data (exact reference, see fill_check()).  Rank 0 prints.
 * The exit code is 1 if any element was wrong, 2 on a setup error.
 */
#include <mpi.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/cuda_dl.h"

/* ---- types and ops ---------------------------------------------------------- */
typedef enum { T_FLOAT, T_DOUBLE, T_INT8, T_UINT8, T_INT32, T_UINT32, T_INT64, T_UINT64 } tid_t;
static const struct {
    const char *name;
    tid_t id;
    size_t size;
} types[] = {
    {"float", T_FLOAT, 4}, {"double", T_DOUBLE, 8}, {"int8", T_INT8, 1},   {"uint8", T_UINT8, 1},
    {"int32", T_INT32, 4}, {"uint32", T_UINT32, 4}, {"int64", T_INT64, 8}, {"uint64", T_UINT64, 8},
};
enum { O_SUM, O_PROD, O_MIN, O_MAX };
static const char *op_names[] = {"sum", "prod", "min", "max"};

static MPI_Datatype mpi_type(tid_t t)
{
    switch (t) {
    case T_FLOAT: return MPI_FLOAT;
    case T_DOUBLE: return MPI_DOUBLE;
    case T_INT8: return MPI_INT8_T;
    case T_UINT8: return MPI_UINT8_T;
    case T_INT32: return MPI_INT32_T;
    case T_UINT32: return MPI_UINT32_T;
    case T_INT64: return MPI_INT64_T;
    default: return MPI_UINT64_T;
    }
}
static MPI_Op mpi_op(int o) { return o == O_SUM ? MPI_SUM : o == O_PROD ? MPI_PROD : o == O_MIN ? MPI_MIN : MPI_MAX; }

/* value of rank r at index i, chosen so that the result is exact and
 * representable for every type: SUM small integers whose total fits int8,
 * PROD +-1 (and 2 / 0.5 for floats, from a set closed under products),
 * MIN/MAX small integers */
static double value(int op, tid_t t, int r, size_t i, int n)
{
    int is_float = (t == T_FLOAT || t == T_DOUBLE), is_unsigned = (t == T_UINT8 || t == T_UINT32 || t == T_UINT64);
    uint64_t h = (uint64_t)(r + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)i * 0xD6E8FEB86659FD93ull);
    h ^= h >> 29;
    switch (op) {
    case O_SUM: {
        int lim = 100 / n; /* |sum| <= 100 fits int8 */
        if (lim < 1) lim = 1;
        int v = (int)(h % (uint64_t)(2 * lim + 1)) - lim;
        if (is_unsigned) v = (int)(h % (uint64_t)(200 / n + 1));
        return v;
    }
    case O_PROD:
        if (is_float) { static const double pv[4] = {1.0, -1.0, 2.0, 0.5}; return pv[h % 4]; }
        if (is_unsigned) return 1.0;
        return (h & 1) ? -1.0 : 1.0;
    default: {
        int v = (int)(h % 201) - 100;
        if (is_unsigned) v += 100;
        return v;
    }
    }
}

static void store(void *buf, tid_t t, size_t i, double v)
{
    switch (t) {
    case T_FLOAT: ((float *)buf)[i] = (float)v; break;
    case T_DOUBLE: ((double *)buf)[i] = v; break;
    case T_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case T_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case T_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case T_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case T_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case T_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    }
}
static double load(const void *buf, tid_t t, size_t i)
{
    switch (t) {
    case T_FLOAT: return ((const float *)buf)[i];
    case T_DOUBLE: return ((const double *)buf)[i];
    case T_INT8: return ((const int8_t *)buf)[i];
    case T_UINT8: return ((const uint8_t *)buf)[i];
    case T_INT32: return ((const int32_t *)buf)[i];
    case T_UINT32: return ((const uint32_t *)buf)[i];
    case T_INT64: return (double)((const int64_t *)buf)[i];
    default: return (double)((const uint64_t *)buf)[i];
    }
}

static double fold(int op, double a, double b)
{
    switch (op) {
    case O_SUM: return a + b;
    case O_PROD: return a * b;
    case O_MIN: return a < b ? a : b;
    default: return a > b ? a : b;
    }
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    }
    return (size_t)v;
}

/* What is timed: one MPI_Allreduce, or (-m memcpy) one memcpy of its bytes. */
static void timed_call(int copy_only, void *sb, void *recvbuf, size_t bytes, size_t count,
                       MPI_Datatype dt, MPI_Op mop)
{
    if (copy_only) {
        memcpy(recvbuf, sb, bytes);
        __asm__ __volatile__("" : : "r"(recvbuf) : "memory"); /* the copy is not dead */
    } else {
        MPI_Allreduce(sb, recvbuf, (int)count, dt, mop, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    size_t minb = 8, maxb = 64u << 20;
    double factor = 2.0;
    int ti = 0, op = O_SUM, iters = 20, warmup = 5, device = 0, check = 1, inplace = 0, opt, bad = 0,
        copy_only = 0;
    while ((opt = getopt(argc, argv, "b:e:f:t:o:n:w:m:c:ih")) != -1) {
        switch (opt) {
        case 'b': minb = parse_size(optarg); break;
        case 'e': maxb = parse_size(optarg); break;
        case 'f': factor = atof(optarg); break;
        case 't': {
            int found = -1;
            for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) if (!strcmp(types[k].name, optarg)) found = (int)k;
            if (found < 0) bad = 1; else ti = found;
            break;
        }
        case 'o': {
            int found = -1;
            for (int k = 0; k < 4; k++) if (!strcmp(op_names[k], optarg)) found = k;
            if (found < 0) bad = 1; else op = found;
            break;
        }
        case 'n': iters = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'm':
            if (!strcmp(optarg, "host")) device = 0;
            else if (!strcmp(optarg, "device")) device = 1;
            else if (!strcmp(optarg, "memcpy")) copy_only = 1;
            else bad = 1;
            break;
        case 'c': check = atoi(optarg); break;
        case 'i': inplace = 1; break;
        default: bad = 1; break;
        }
    }
    if (bad || iters < 1 || factor <= 1.0 || minb > maxb) {
        if (!rank)
            fprintf(stderr, "usage: allreduce_perf [-b minbytes] [-e maxbytes] [-f factor] [-t type] [-o op] "
                            "[-n iters] [-w warmup] [-m host|device|memcpy] [-c 0|1] [-i]\n");
        MPI_Finalize();
        return 2;
    }
    if (copy_only) check = inplace = 0; /* a copy has nothing to check, no place to be in */
    tid_t t = types[ti].id;
    size_t es = types[ti].size;
    MPI_Datatype dt = mpi_type(t);
    MPI_Op mop = mpi_op(op);

    /* buffers */
    size_t maxcount = maxb / es, bytes_alloc = (maxcount ? maxcount : 1) * es;
    void *sendbuf = NULL, *recvbuf = NULL;
    void *hsend = malloc(bytes_alloc), *hrecv = malloc(bytes_alloc);
    int setup_ok = hsend && hrecv;
    char err[256] = "out of host memory";
    if (setup_ok && device) {
        MPI_Comm node;
        int lrank;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &lrank);
        MPI_Comm_free(&node);
        setup_ok = test_cuda_load(lrank, err, sizeof err) == 0;
        if (setup_ok &&
            (cu.malloc_(&sendbuf, bytes_alloc) != 0 || cu.malloc_(&recvbuf, bytes_alloc) != 0)) {
            snprintf(err, sizeof err, "cudaMalloc of %zu bytes failed", bytes_alloc);
            setup_ok = 0;
        }
    } else {
        sendbuf = hsend;
        recvbuf = hrecv;
    }
    int all_ok = 0; /* agreed without MPI_Allreduce, the call under test */
    MPI_Reduce(&setup_ok, &all_ok, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Bcast(&all_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!all_ok) {
        if (!setup_ok) fprintf(stderr, "allreduce_perf: rank %d: %s\n", rank, err);
        MPI_Finalize();
        return 2;
    }

    if (rank == 0) {
        printf("# allreduce_perf: nranks %d, mode %s, type %s, op %s, %s, iters %d, warmup %d, check %d\n", nranks,
               device ? "device" : copy_only ? "memcpy" : "host", types[ti].name, op_names[op], inplace ? "in-place" : "out-of-place", iters,
               warmup, check);
        printf("# %12s %12s %8s %6s %12s %12s %12s %8s\n", "size(B)", "count", "type", "op", "time(us)", "algbw(GB/s)",
               "busbw(GB/s)", "#wrong");
        fflush(stdout);
    }

    long long total_wrong = 0;
    double sum_busbw = 0;
    int nrows = 0, nrows_wrong = 0;
    size_t last = (size_t)-1;
    /* minb, minb * factor, ... and maxb itself when the factor steps past it */
    for (double sz = (double)minb, next; sz > 0; sz = next) {
        size_t count = (size_t)sz / es, bytes = count * es;
        next = sz * factor > (double)maxb * 1.0000001 ? (sz < (double)maxb ? (double)maxb : 0)
                                                       : sz * factor;
        if (bytes == last) continue;
        last = bytes;

        /* timing data: zeros for in-place SUM/PROD would stay put anyway;
         * use values that keep repeated in-place reductions finite */
        for (size_t i = 0; i < count; i++)
            store(hsend, t, i, op == O_PROD ? 1.0 : (op == O_SUM && inplace ? 0.0 : value(op, t, rank, i, nranks)));
        if (device) {
            cu.memcpy_(sendbuf, hsend, bytes, TEST_CUDA_H2D);
            cu.memcpy_(recvbuf, hsend, bytes, TEST_CUDA_H2D);
        } else if (inplace) {
            memcpy(recvbuf, hsend, bytes);
        }
        void *sb = inplace ? MPI_IN_PLACE : sendbuf;
        for (int k = 0; k < warmup; k++) timed_call(copy_only, sb, recvbuf, bytes, count, dt, mop);
        if (device) cu.sync();
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int k = 0; k < iters; k++) timed_call(copy_only, sb, recvbuf, bytes, count, dt, mop);
        if (device) cu.sync();
        double mine = (MPI_Wtime() - t0) / iters, tmax = 0;
        MPI_Reduce(&mine, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

        long long wrong = 0, wrong_all = 0;
        if (check) { /* one more call with fresh data, checked exactly */
            for (size_t i = 0; i < count; i++) store(hsend, t, i, value(op, t, rank, i, nranks));
            for (size_t i = 0; i < count; i++) store(hrecv, t, i, -3.0); /* poison */
            if (device) {
                cu.memcpy_(sendbuf, hsend, bytes, TEST_CUDA_H2D);
                cu.memcpy_(recvbuf, inplace ? hsend : hrecv, bytes, TEST_CUDA_H2D);
            } else if (inplace) {
                memcpy(recvbuf, hsend, bytes);
            }
            MPI_Allreduce(inplace ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, dt, mop, MPI_COMM_WORLD);
            if (device) cu.memcpy_(hrecv, recvbuf, bytes, TEST_CUDA_D2H);
            for (size_t i = 0; i < count; i++) {
                double e = value(op, t, 0, i, nranks);
                for (int r = 1; r < nranks; r++) e = fold(op, e, value(op, t, r, i, nranks));
                /* store/load round trip gives the value in the element type */
                double expect;
                {
                    unsigned char tmp[8];
                    store(tmp, t, 0, e);
                    expect = load(tmp, t, 0);
                }
                if (load(hrecv, t, i) != expect) wrong++;
            }
            MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        }
        if (rank == 0) {
            double algbw = tmax > 0 ? (double)bytes / tmax / 1e9 : 0;
            double busbw = copy_only ? algbw : algbw * 2.0 * (nranks - 1) / nranks;
            char wr[32];
            if (check) snprintf(wr, sizeof wr, "%lld", wrong_all);
            else snprintf(wr, sizeof wr, "N/A");
            printf("  %12zu %12zu %8s %6s %12.2f %12.3f %12.3f %8s\n", bytes, count, types[ti].name, op_names[op],
                   tmax * 1e6, algbw, busbw, wr);
            fflush(stdout);
            total_wrong += wrong_all;
            sum_busbw += busbw;
            nrows++;
            nrows_wrong += check && wrong_all != 0;
        }
    }
    int verdict = 0;
    if (rank == 0) {
        printf("# out of bounds values : %lld %s\n", total_wrong, total_wrong ? "ERROR" : "OK");
        printf("# avg bus bandwidth    : %.3f\n", nrows ? sum_busbw / nrows : 0.0);
        if (check) /* the summary line test scripts count (test/gpu/run_gpu_tests.sh) */
            printf("%d passed, %d failed (sizes checked against the reference)\n",
                   nrows - nrows_wrong, nrows_wrong);
        verdict = total_wrong ? 1 : 0;
    }
    MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (device) {
        cu.free_(sendbuf);
        cu.free_(recvbuf);
    }
    free(hsend);
    free(hrecv);
    MPI_Finalize();
    return verdict;
}
