/*
 * allreduce_perf.c -- bandwidth test of one MPI collective in the style of
 * nccl-tests (all_reduce_perf, reduce_scatter_perf, ...); MPI_Allreduce
 * unless -C names another.
 *
 *   -C coll: all_reduce (default), reduce_scatter (MPI_Reduce_scatter_block),
 *            all_gather (MPI_Allgather), broadcast (MPI_Bcast), reduce
 *            (MPI_Reduce), iall_reduce (MPI_Iallreduce + MPI_Wait)
 *   -r root  (broadcast, reduce; default 0)
 *   -b minbytes  (default 8)        -e maxbytes (default 64M; K/M/G suffixes;
 *                                      always measured, on the factor's grid or not)
 *   -f factor    (default 2)        -t type: float double int8 uint8 int32
 *                                      uint32 int64 uint64 (default float)
 *   -o op: sum prod min max (default sum; ignored by all_gather, broadcast)
 *   -n iters (default 20)           -w warmup iters (default 5)
 *   -m host|device|memcpy (default host; device loads libcudart with dlopen
 *                   at run time and exits 2 if it cannot; memcpy times no
 *                   MPI call but every rank's memcpy of the same bytes, all
 *                   ranks at once: the memory bound host paths are held
 *                   against, busbw = algbw, nothing checked; both buffers
 *                   on a page unless -a says otherwise: malloc placed small
 *                   ones 16 bytes apart modulo a page, the copy rep movsb
 *                   runs slowest on some machines -- kernels/reduce.h)
 *   -c 0|1 check results (default 1)  -i in place (default off; MPI's
 *                   MPI_IN_PLACE form: reduce at the root only, none for
 *                   broadcast)
 *   -a offset  host buffers start this many bytes past a page (default: where
 *                   malloc puts them, 16 bytes past one for large sizes with
 *                   glibc); how far a copy's destination lies past its source
 *                   modulo a page can matter (kernels/reduce.h)
 *
 * One row per size: size(B) count type op time(us) algbw(GB/s) busbw(GB/s)
 * #wrong, with nccl-tests' meanings: size is the largest buffer of the call
 * (reduce_scatter's send buffer, all_gather's receive buffer: nranks blocks,
 * so the size is rounded down to a multiple of nranks elements), count is the
 * count argument (one rank's block for reduce_scatter and all_gather).  time
 * is the average over iters of one call, taken as the maximum over ranks;
 * algbw = size / time; busbw = algbw * 2(n-1)/n (all_reduce, iall_reduce),
 * (n-1)/n (reduce_scatter, all_gather), 1 (broadcast, reduce).  #wrong counts
 * wrong elements over all ranks (the root only for reduce) after one extra
 * checked call made with fresh data, against a reference each rank computes
 * from every rank's inputs (exact, see value()).  Rank 0 prints.  The exit
 * code is 1 if any element was wrong, 2 on a setup error.
 */
#include <mpi.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/cuda_dl.h"
#include "test/mpi_verdict.h"

#define PAGE_BYTES 4096

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

/* ---- collectives ---------------------------------------------------------- */
enum { C_ALLREDUCE, C_REDUCE_SCATTER, C_ALLGATHER, C_BCAST, C_REDUCE, C_IALLREDUCE };
static const struct {
    const char *name;
    int reduces; /* takes an op */
    int blocks;  /* count is one rank's block of a buffer of nranks blocks */
} colls[] = {
    {"all_reduce", 1, 0}, {"reduce_scatter", 1, 1}, {"all_gather", 0, 1},
    {"broadcast", 0, 0},  {"reduce", 1, 0},         {"iall_reduce", 1, 0},
};
#define NCOLLS ((int)(sizeof colls / sizeof colls[0]))

/* nccl-tests' bus bandwidth factor */
static double busbw_factor(int coll, int n)
{
    switch (coll) {
    case C_ALLREDUCE: case C_IALLREDUCE: return 2.0 * (n - 1) / n;
    case C_REDUCE_SCATTER: case C_ALLGATHER: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

typedef struct {
    int coll, root, rank, nranks, inplace;
    tid_t t;
    MPI_Datatype dt;
    MPI_Op mop;
} call_t;

/* One call of the collective: `count` as MPI takes it (a block for
 * reduce_scatter and all_gather); the input is in sendbuf, or where MPI
 * wants it in recvbuf for MPI_IN_PLACE (see fill()). */
static void mpi_call(const call_t *c, void *sendbuf, void *recvbuf, size_t count)
{
    int ip = c->inplace, n = (int)count;
    MPI_Request req;
    switch (c->coll) {
    case C_ALLREDUCE:
        MPI_Allreduce(ip ? MPI_IN_PLACE : sendbuf, recvbuf, n, c->dt, c->mop, MPI_COMM_WORLD);
        break;
    case C_IALLREDUCE:
        MPI_Iallreduce(ip ? MPI_IN_PLACE : sendbuf, recvbuf, n, c->dt, c->mop, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        break;
    case C_REDUCE_SCATTER:
        MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : sendbuf, recvbuf, n, c->dt, c->mop, MPI_COMM_WORLD);
        break;
    case C_ALLGATHER:
        if (ip) MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvbuf, n, c->dt, MPI_COMM_WORLD);
        else MPI_Allgather(sendbuf, n, c->dt, recvbuf, n, c->dt, MPI_COMM_WORLD);
        break;
    case C_BCAST:
        MPI_Bcast(recvbuf, n, c->dt, c->root, MPI_COMM_WORLD);
        break;
    case C_REDUCE:
        MPI_Reduce(ip && c->rank == c->root ? MPI_IN_PLACE : sendbuf, recvbuf, n, c->dt, c->mop, c->root,
                   MPI_COMM_WORLD);
        break;
    }
}

/* What is timed: one call, or (-m memcpy) one memcpy of its bytes. */
static void timed_call(int copy_only, const call_t *c, void *sendbuf, void *recvbuf, size_t bytes,
                       size_t count)
{
    if (copy_only) {
        memcpy(recvbuf, sendbuf, bytes);
        __asm__ __volatile__("" : : "r"(recvbuf) : "memory"); /* the copy is not dead */
    } else {
        mpi_call(c, sendbuf, recvbuf, count);
    }
}

/* Elements of this rank's input and of its receive buffer for a call of
 * `count` (a block for reduce_scatter and all_gather). */
static size_t input_elems(const call_t *c, size_t count)
{
    return c->coll == C_REDUCE_SCATTER ? count * (size_t)c->nranks : count;
}
static size_t recv_elems(const call_t *c, size_t count)
{
    return c->coll == C_ALLGATHER ? count * (size_t)c->nranks : count;
}

/* Lay out this rank's input for one call of `count` in the host buffers
 * hsend / hrecv (the MPI buffers themselves in host mode) and copy them to
 * the device buffers in device mode.  checked: value()'s data and a poisoned
 * receive buffer; otherwise timing data that keeps repeated in-place
 * reductions finite (PROD: ones; in-place SUM: zeros).  In place, the input
 * is where MPI wants it: the receive buffer (all_gather: this rank's block of
 * it; reduce: at the root only).  broadcast: the root's receive buffer. */
static void fill(const call_t *c, int op, int checked, int device, void *hsend, void *hrecv,
                 void *sendbuf, void *recvbuf, size_t count, size_t es)
{
    size_t nin = input_elems(c, count), nrecv = recv_elems(c, count);
    size_t at = c->coll == C_ALLGATHER ? (size_t)c->rank * count : 0; /* in-place input's place */
    int in_recv = c->coll == C_BCAST ? c->rank == c->root
                  : c->inplace && (c->coll != C_REDUCE || c->rank == c->root);
    int reduces = colls[c->coll].reduces;

    for (size_t i = 0; i < nin; i++) {
        double v = value(op, c->t, c->rank, i, c->nranks);
        if (!checked && reduces && op == O_PROD) v = 1.0;
        if (!checked && reduces && op == O_SUM && c->inplace) v = 0.0;
        store(hsend, c->t, i, v);
    }
    if (checked)
        for (size_t i = 0; i < nrecv; i++) store(hrecv, c->t, i, -3.0); /* poison */
    if (in_recv) memcpy((char *)hrecv + at * es, hsend, nin * es);
    if (device) {
        cu.memcpy_(sendbuf, hsend, nin * es, TEST_CUDA_H2D);
        cu.memcpy_(recvbuf, hrecv, nrecv * es, TEST_CUDA_H2D);
    }
}

/* Wrong elements in this rank's result (host copy), against a reference
 * computed here from every rank's value()s. */
static long long check_result(const call_t *c, int op, const void *hrecv, size_t count)
{
    const int n = c->nranks;
    size_t nres = recv_elems(c, count);
    long long wrong = 0;

    if (c->coll == C_REDUCE && c->rank != c->root) return 0; /* no result here */
    for (size_t i = 0; i < nres; i++) {
        double e;
        switch (c->coll) {
        case C_ALLGATHER: /* block q is rank q's input */
            e = value(op, c->t, (int)(i / count), i % count, n);
            break;
        case C_BCAST:
            e = value(op, c->t, c->root, i, n);
            break;
        default: { /* reductions; reduce_scatter: this rank's block */
            size_t j = c->coll == C_REDUCE_SCATTER ? (size_t)c->rank * count + i : i;
            e = value(op, c->t, 0, j, n);
            for (int r = 1; r < n; r++) e = fold(op, e, value(op, c->t, r, j, n));
        }
        }
        /* store/load round trip gives the value in the element type */
        unsigned char tmp[8];
        store(tmp, c->t, 0, e);
        if (load(hrecv, c->t, i) != load(tmp, c->t, 0)) wrong++;
    }
    return wrong;
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
        copy_only = 0, coll = C_ALLREDUCE, root = 0, offset = -1;
    while ((opt = getopt(argc, argv, "C:r:b:e:f:t:o:n:w:m:c:ia:h")) != -1) {
        switch (opt) {
        case 'C': {
            int found = -1;
            for (int k = 0; k < NCOLLS; k++) if (!strcmp(colls[k].name, optarg)) found = k;
            if (found < 0) bad = 1; else coll = found;
            break;
        }
        case 'r': root = atoi(optarg); break;
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
        case 'a':
            offset = atoi(optarg);
            if (offset < 0) bad = 1;
            break;
        default: bad = 1; break;
        }
    }
    if (bad || iters < 1 || factor <= 1.0 || minb > maxb || root < 0 || root >= nranks ||
        offset < -1 || offset >= PAGE_BYTES) {
        if (!rank)
            fprintf(stderr, "usage: allreduce_perf [-C all_reduce|reduce_scatter|all_gather|broadcast|reduce|"
                            "iall_reduce] [-r root] [-b minbytes] [-e maxbytes] [-f factor] [-t type] [-o op] "
                            "[-n iters] [-w warmup] [-m host|device|memcpy] [-c 0|1] [-i] [-a offset]\n");
        MPI_Finalize();
        return 2;
    }
    if (copy_only) check = inplace = 0; /* a copy has nothing to check, no place to be in */
    if (copy_only && offset < 0) offset = 0; /* the bound: the copy at its fastest */
    if (coll == C_BCAST) inplace = 0;    /* MPI_Bcast has one buffer */
    tid_t t = types[ti].id;
    size_t es = types[ti].size;
    call_t call = {.coll = coll, .root = root, .rank = rank, .nranks = nranks, .inplace = inplace,
                   .t = t, .dt = mpi_type(t), .mop = mpi_op(op)};
    const char *opname = colls[coll].reduces ? op_names[op] : "none";

    /* buffers: both of the largest size (a call's send or receive buffer) */
    size_t maxcount = maxb / es, bytes_alloc = (maxcount ? maxcount : 1) * es;
    void *sendbuf = NULL, *recvbuf = NULL;
    void *hsend_mem = NULL, *hrecv_mem = NULL, *hsend, *hrecv;
    if (offset < 0) {
        hsend = hsend_mem = malloc(bytes_alloc);
        hrecv = hrecv_mem = malloc(bytes_alloc);
    } else {
        if (posix_memalign(&hsend_mem, PAGE_BYTES, bytes_alloc + PAGE_BYTES)) hsend_mem = NULL;
        if (posix_memalign(&hrecv_mem, PAGE_BYTES, bytes_alloc + PAGE_BYTES)) hrecv_mem = NULL;
        hsend = hsend_mem ? (char *)hsend_mem + offset : NULL;
        hrecv = hrecv_mem ? (char *)hrecv_mem + offset : NULL;
    }
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
        printf("# allreduce_perf: coll %s, nranks %d, mode %s, type %s, op %s, %s", colls[coll].name, nranks,
               device ? "device" : copy_only ? "memcpy" : "host", types[ti].name, opname,
               inplace ? "in-place" : "out-of-place");
        if (coll == C_BCAST || coll == C_REDUCE) printf(", root %d", root);
        printf(", iters %d, warmup %d, check %d\n", iters, warmup, check);
        printf("# %12s %12s %8s %6s %12s %12s %12s %8s\n", "size(B)", "count", "type", "op", "time(us)", "algbw(GB/s)",
               "busbw(GB/s)", "#wrong");
        fflush(stdout);
    }

    const int blocks = colls[coll].blocks;
    long long total_wrong = 0, own_wrong = 0; /* (own: this rank's exit status) */
    double sum_busbw = 0;
    int nrows = 0, nrows_wrong = 0;
    size_t last = (size_t)-1;
    /* minb, minb * factor, ... and maxb itself when the factor steps past it */
    for (double sz = (double)minb, next; sz > 0; sz = next) {
        /* count: MPI's count argument (reduce_scatter, all_gather: a block);
         * bytes: the largest buffer, nccl-tests' size */
        size_t count = (size_t)sz / es / (blocks ? (size_t)nranks : 1);
        size_t bytes = count * es * (blocks ? (size_t)nranks : 1);
        next = sz * factor > (double)maxb * 1.0000001 ? (sz < (double)maxb ? (double)maxb : 0)
                                                       : sz * factor;
        if (bytes == last) continue;
        last = bytes;

        fill(&call, op, 0, device, hsend, hrecv, sendbuf, recvbuf, count, es);
        for (int k = 0; k < warmup; k++) timed_call(copy_only, &call, sendbuf, recvbuf, bytes, count);
        if (device) cu.sync();
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int k = 0; k < iters; k++) timed_call(copy_only, &call, sendbuf, recvbuf, bytes, count);
        if (device) cu.sync();
        double mine = (MPI_Wtime() - t0) / iters, tmax = 0;
        MPI_Reduce(&mine, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

        long wrong = 0, wrong_all = 0;
        if (check) { /* one more call with fresh data, checked exactly */
            fill(&call, op, 1, device, hsend, hrecv, sendbuf, recvbuf, count, es);
            mpi_call(&call, sendbuf, recvbuf, count);
            if (device) cu.memcpy_(hrecv, recvbuf, recv_elems(&call, count) * es, TEST_CUDA_D2H);
            wrong = check_result(&call, op, hrecv, count);
            test_verdict_sum(&wrong, &wrong_all, 1, MPI_COMM_WORLD);
            own_wrong += wrong;
        }
        if (rank == 0) {
            double algbw = tmax > 0 ? (double)bytes / tmax / 1e9 : 0;
            double busbw = copy_only ? algbw : algbw * busbw_factor(coll, nranks);
            char wr[32];
            if (check) snprintf(wr, sizeof wr, "%ld", wrong_all);
            else snprintf(wr, sizeof wr, "N/A");
            printf("  %12zu %12zu %8s %6s %12.3f %12.3f %12.3f %8s\n", bytes, count, types[ti].name, opname,
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
    free(hsend_mem);
    free(hrecv_mem);
    MPI_Finalize();
    return verdict || own_wrong != 0;
}
