/*
 * colls_check.c -- MPI-level correctness test for the collectives gpuring
 * runs besides allreduce: MPI_Reduce_scatter_block, MPI_Reduce_scatter,
 * MPI_Allgather, MPI_Bcast and MPI_Reduce.
 *
 * Every rank fills its input from (seed, case, rank, index), so each rank
 * computes every expected value on its own, in plain C (no MPI call):
 * integers over the type's whole range in uint64_t, truncated to its width (sums
 * and products wrap: Open MPI 4.1.4's op/avx saturates 8/16-bit sums, which
 * known_ompi_bugs.sh lists for the runs through it; gpuring wraps), floats from
 * small integers of either sign (exact in any order).
 * Outputs are poisoned before each call and checked whole, with guard
 * bytes after them.  Covered: every type x op gpuring takes, counts 0, 1,
 * odd, one large count, every root, MPI_IN_PLACE, world / dup / split
 * communicators, equal and unequal reduce_scatter counts, allgather with
 * different send and receive types of the same bytes, a derived contiguous
 * type, and bcast and allgather with each rank's own datatype of one type
 * signature (int32, a contiguous type of 4 of them, an int32 every 8 bytes:
 * holes that must stay untouched), and bcast at MPI_BOTTOM of a datatype whose
 * blocks lie in two allocations and host memory; with -d, bcast of one column of a
 * matrix (a span of 16 MiB, 1 KiB of blocks) must not grow resident memory by a
 * quarter of the span.
 *
 * Options: -s SEED, -L ELEMS (large count, default 1 << 20; 0: none),
 * -f (fast: every type x op pair at one count of each, for the LL and device cases),
 * -d (buffers in device memory, through libcudart: the CPU CUDA runtime in
 * CI), -U (with -d: managed memory, cudaMallocManaged), -A (byte-misaligned buffers: rank r's input sits r % 4 bytes and its
 * output (r + 1) % 4 bytes off the allocation, so no element size above 1
 * divides their addresses on most ranks), -B (each communicator's first collective is
 * an MPI_Bcast of each rank's own datatype of one signature, rank 0's with holes,
 * so that it packs the elements first and the others do not; the last rank the
 * root), -I (rank 0's MPI_Bcast calls run 1 s ahead of the others': its process must
 * stay idle in the second after them), -x TYPE:OP,... (reductions left out: where the
 * component below runs them wrong, known_ompi_bugs.sh; test/mpi/type_op_list.h), -q (quiet).  Rank 0 prints `N passed, N failed`; exit
 * code non-zero when a check failed on any rank.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test/cuda_dl.h"
#include "test/mpi/type_op_list.h"
#include "test/mem_peak.h"
#include "test/cpu_seconds.h"
#include "test/mpi_verdict.h"

enum { SUM, PROD, MIN, MAX, BAND, BOR, BXOR, LAND, LOR, LXOR, NOPS };
static const char *op_names[NOPS] = {"sum", "prod", "min", "max", "band",
                                     "bor", "bxor", "land", "lor", "lxor"};
static MPI_Op mpi_ops[NOPS];

#define INT_OPS 0x3ffu
#define FLT_OPS ((1u << SUM) | (1u << PROD) | (1u << MIN) | (1u << MAX))
typedef struct {
    MPI_Datatype dt;
    const char *name;
    int size;
    int fl; /* 0 integer, 1 float, 2 double */
    unsigned ops;
} ty_t;

static ty_t types[] = {
    {MPI_INT8_T, "int8", 1, 0, INT_OPS},     {MPI_UINT8_T, "uint8", 1, 0, INT_OPS},
    {MPI_INT16_T, "int16", 2, 0, INT_OPS},   {MPI_UINT16_T, "uint16", 2, 0, INT_OPS},
    {MPI_INT32_T, "int32", 4, 0, INT_OPS},   {MPI_UINT32_T, "uint32", 4, 0, INT_OPS},
    {MPI_INT64_T, "int64", 8, 0, INT_OPS},   {MPI_UINT64_T, "uint64", 8, 0, INT_OPS},
    {MPI_INT, "int", 4, 0, INT_OPS},         {MPI_UNSIGNED_LONG, "ulong", 8, 0, INT_OPS},
    {MPI_FLOAT, "float", 4, 1, FLT_OPS},     {MPI_DOUBLE, "double", 8, 2, FLT_OPS},
    {MPI_C_BOOL, "bool", 1, 0, (1u << LAND) | (1u << LOR) | (1u << LXOR)},
    {MPI_BYTE, "byte", 1, 0, (1u << BAND) | (1u << BOR) | (1u << BXOR)},
};
#define NTYPES ((int)(sizeof(types) / sizeof(types[0])))
enum { T_INT32 = 4, T_FLOAT = 10, T_DOUBLE = 11 };

static int g_rank, g_quiet, g_device, g_mem = TEST_CUDA_MALLOC, g_seed = 1;
static test_type_op_list_t g_exclude; /* -x: not checked */
static long g_pass, g_fail;
static long g_rsv_unequal; /* reduce_scatters with unequal counts, on 2 ranks or more */

/* ---- buffers: host, or device memory with a host mirror ---------------------------- */
#define GUARD 64
static void *buf_alloc(size_t bytes)
{
    void *p = NULL;

    if (g_device) {
        if (test_cuda_alloc(&p, bytes + GUARD, g_mem) != 0) p = NULL;
    } else {
        p = malloc(bytes + GUARD);
    }
    if (p == NULL) {
        fprintf(stderr, "rank %d: no memory for %zu B\n", g_rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}
static void buf_free(void *p)
{
    if (g_device) test_cuda_free(p, g_mem); else free(p);
}
static void buf_put(void *dst, const void *src, size_t bytes)
{
    if (g_device) cu.memcpy_(dst, src, bytes, TEST_CUDA_H2D); else memcpy(dst, src, bytes);
}
static void buf_get(void *dst, const void *src, size_t bytes)
{
    if (g_device) cu.memcpy_(dst, src, bytes, TEST_CUDA_D2H); else memcpy(dst, src, bytes);
}

/* ---- values ------------------------------------------------------------------------ */
static uint64_t trunc_to(const ty_t *t, uint64_t v)
{
    return t->fl || t->size == 8 ? v : v & ((1ull << (8 * t->size)) - 1);
}

static int is_signed(const ty_t *t)
{
    return t->fl || t->dt == MPI_INT8_T || t->dt == MPI_INT16_T || t->dt == MPI_INT32_T ||
           t->dt == MPI_INT64_T || t->dt == MPI_INT;
}

/* an integer of t's width as a signed one */
static int64_t sext(const ty_t *t, uint64_t v)
{
    const int shift = t->fl ? 0 : 64 - 8 * t->size; /* (a float's: an int64_t) */

    return shift == 0 ? (int64_t)v : (int64_t)(v << shift) >> shift;
}

/*
 * Element i of rank `rank`'s input of case cs, for op on type t: integers over the
 * type's whole range (sums and products wrap; MIN and MAX compare a signed type as
 * signed, so a reduction of the wrong width or signedness shows), logical ops' truths
 * any non-zero value of the type -- 2, a sign bit, a zero low byte -- (bool: 0 or 1,
 * whatever the op), floating point small integers, held as int64_t (exact in any
 * order; -20..20, so that MIN and MAX see negative values; PROD's factors 1 or 2).
 */
static uint64_t val(const ty_t *t, int op, int cs, int rank, size_t i)
{
    static const uint64_t truths[] = {1, 2, 0x80, 0x100, 0x8000, 0x10000, 0x80000000u,
                                      0x100000000ull, 1ull << 63};
    uint64_t h = (uint64_t)g_seed * 2654435761u + (uint64_t)cs * 40503u + (uint64_t)rank * 977u +
                 (uint64_t)i * 7919u;
    size_t ntruths = 0;

    h ^= h >> 13;
    h *= 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    if (t->dt == MPI_C_BOOL) return h % 5 < 3;
    if (t->fl) return op == PROD ? 1 + h % 2 : (uint64_t)((int64_t)(h % 41) - 20);
    if (op != LAND && op != LOR && op != LXOR) return trunc_to(t, h);
    if (h % 5 >= 3) return 0;
    while (ntruths < sizeof(truths) / sizeof(truths[0]) &&
           trunc_to(t, truths[ntruths]) == truths[ntruths])
        ntruths++;
    return truths[(h >> 8) % ntruths];
}

static uint64_t fold(const ty_t *t, int op, uint64_t a, uint64_t b)
{
    const int s = is_signed(t);

    switch (op) {
    case SUM: return t->fl ? a + b : trunc_to(t, a + b);
    case PROD: return t->fl ? a * b : trunc_to(t, a * b);
    case MIN: return (s ? sext(t, a) < sext(t, b) : a < b) ? a : b;
    case MAX: return (s ? sext(t, a) > sext(t, b) : a > b) ? a : b;
    case BAND: return a & b;
    case BOR: return a | b;
    case BXOR: return a ^ b;
    case LAND: return a && b;
    case LOR: return a || b;
    default: return !a != !b;
    }
}

static void put(void *buf, const ty_t *t, size_t i, uint64_t v)
{
    if (t->fl == 1) ((float *)buf)[i] = (float)(int64_t)v;
    else if (t->fl == 2) ((double *)buf)[i] = (double)(int64_t)v;
    else memcpy((char *)buf + i * t->size, &v, t->size); /* little-endian: the low bytes */
}

/* a float's value as the integer put() stored (every float value here is one, an
 * int64_t: anything else -- a fraction, a NaN -- reads as INT64_MIN, which no expected
 * value is, rather than truncating to one) */
static uint64_t get_integral(double d)
{
    return d >= -9223372036854775808.0 && d < 9223372036854775808.0 &&
                   d == (double)(int64_t)d
               ? (uint64_t)(int64_t)d
               : (uint64_t)INT64_MIN;
}

static uint64_t get(const void *buf, const ty_t *t, size_t i)
{
    uint64_t v = 0;

    if (t->fl == 1) return get_integral(((const float *)buf)[i]);
    if (t->fl == 2) return get_integral(((const double *)buf)[i]);
    memcpy(&v, (const char *)buf + i * t->size, t->size);
    return v;
}

/* an int32 element (the layouts' copies) */
static uint64_t ival(int cs, int rank, size_t i)
{
    return val(&types[T_INT32], SUM, cs, rank, i);
}

/* The reduction over every rank of element i of the input of case cs. */
static uint64_t expect_red(const ty_t *t, int op, int cs, int n, size_t i)
{
    uint64_t v = val(t, op, cs, 0, i);

    for (int r = 1; r < n; r++) v = fold(t, op, v, val(t, op, cs, r, i));
    return v;
}

static void verdict(int ok, const char *what, MPI_Comm comm, const ty_t *t, int op, size_t count,
                    int root, int inplace, size_t bad_i, uint64_t got, uint64_t want)
{
    if (ok) {
        g_pass++;
        return;
    }
    g_fail++;
    if (g_fail <= 20) {
        char cname[MPI_MAX_OBJECT_NAME];
        int len;
        MPI_Comm_get_name(comm, cname, &len);
        fprintf(stderr, "rank %d: FAIL %s %s %s count %zu root %d%s on %s: element %zu is "
                "%llu, expected %llu\n", g_rank, what, t->name, op >= 0 ? op_names[op] : "-",
                count, root, inplace ? " in place" : "", cname, bad_i,
                (unsigned long long)got, (unsigned long long)want);
    }
}

/* Compare host[0..count) with want(i) and the guard bytes after them. */
#define CHECK_OUT(_what, _comm, _t, _op, _count, _root, _inplace, _host, _want)            \
    do {                                                                                   \
        size_t bad_ = (size_t)-1;                                                          \
        uint64_t g_ = 0, w_ = 0;                                                           \
        for (size_t i = 0; i < (_count); i++) {                                            \
            w_ = trunc_to(_t, (_want));                                                    \
            g_ = get(_host, _t, i);                                                        \
            if (g_ != w_) { bad_ = i; break; }                                             \
        }                                                                                  \
        for (size_t k = 0; bad_ == (size_t)-1 && k < GUARD; k++) {                         \
            if (((unsigned char *)(_host))[(_count) * (_t)->size + k] != 0xa5) {           \
                bad_ = (_count) + k / (_t)->size; g_ = 0xa5a5; w_ = 0xa5;                   \
            }                                                                              \
        }                                                                                  \
        verdict(bad_ == (size_t)-1, _what, _comm, _t, _op, _count, _root, _inplace, bad_,  \
                g_, w_);                                                                   \
    } while (0)

/* host scratch: inputs built and outputs read back here */
static unsigned char *h_in, *h_out;
static void *d_in, *d_out;

static void poison_out(size_t bytes)
{
    memset(h_out, 0x5a, bytes);
    memset(h_out + bytes, 0xa5, GUARD);
    buf_put(d_out, h_out, bytes + GUARD);
}

/* ---- the collectives ---------------------------------------------------------------- */
static void check_rs(MPI_Comm comm, const ty_t *t, int op, size_t count, int inplace, int cs,
                     int v)
{
    int n, r;
    const size_t es = (size_t)t->size;

    if (test_type_op_listed(&g_exclude, t->name, op_names[op])) return;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    for (size_t i = 0; i < count * n; i++) put(h_in, t, i, val(t, op, cs, r, i));
    if (inplace) {
        memcpy(h_out, h_in, count * n * es);
        memset(h_out + count * n * es, 0xa5, GUARD);
        buf_put(d_out, h_out, count * n * es + GUARD);
    } else {
        buf_put(d_in, h_in, count * n * es);
        poison_out(count * es);
    }
    if (v) {
        int *counts = malloc(sizeof(int) * n);
        for (int k = 0; k < n; k++) counts[k] = (int)count;
        MPI_Reduce_scatter(inplace ? MPI_IN_PLACE : d_in, d_out, counts, t->dt, mpi_ops[op], comm);
        free(counts);
    } else {
        MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : d_in, d_out, (int)count, t->dt,
                                 mpi_ops[op], comm);
    }
    buf_get(h_out, d_out, count * es + (inplace ? 0 : GUARD));
    if (inplace) memset(h_out + count * es, 0xa5, GUARD); /* the rest of the input: undefined */
    CHECK_OUT(v ? "reduce_scatter" : "reduce_scatter_block", comm, t, op, count, -1, inplace,
              h_out, expect_red(t, op, cs, n, (size_t)r * count + i));
}

/* MPI_Reduce_scatter with unequal counts (rank k gets k + 1 + base): the fallback */
static void check_rsv_unequal(MPI_Comm comm, int cs)
{
    const ty_t *t = &types[T_INT32];
    int n, r, *counts;
    size_t total = 0, first = 0;

    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    counts = malloc(sizeof(int) * n);
    for (int k = 0; k < n; k++) {
        counts[k] = k + 3;
        if (k < r) first += (size_t)counts[k];
        total += (size_t)counts[k];
    }
    for (size_t i = 0; i < total; i++) put(h_in, t, i, val(t, SUM, cs, r, i));
    buf_put(d_in, h_in, total * 4);
    poison_out((size_t)counts[r] * 4);
    MPI_Reduce_scatter(d_in, d_out, counts, t->dt, MPI_SUM, comm);
    g_rsv_unequal += n > 1; /* (the calls gpuring hands below: test/below_check.sh) */
    buf_get(h_out, d_out, (size_t)counts[r] * 4 + GUARD);
    CHECK_OUT("reduce_scatter(unequal)", comm, t, SUM, (size_t)counts[r], -1, 0, h_out,
              expect_red(t, SUM, cs, n, first + i));
    free(counts);
}

/* -d: MPI_Reduce's root receives into host memory (h_out), every rank sending from device
 * memory -- device data reduced into a host array (not in place) */
static int g_root_host;

static void check_reduce(MPI_Comm comm, const ty_t *t, int op, size_t count, int root,
                         int inplace, int cs)
{
    int n, r;
    const size_t es = (size_t)t->size;

    if (test_type_op_listed(&g_exclude, t->name, op_names[op])) return;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    inplace = inplace && r == root;
    for (size_t i = 0; i < count; i++) put(h_in, t, i, val(t, op, cs, r, i));
    if (inplace) {
        memcpy(h_out, h_in, count * es);
        memset(h_out + count * es, 0xa5, GUARD);
        buf_put(d_out, h_out, count * es + GUARD);
    } else {
        buf_put(d_in, h_in, count * es);
        poison_out(count * es);
    }
    /* (a non-root's receive buffer, which MPI ignores: it must stay as it was) */
    MPI_Reduce(inplace ? MPI_IN_PLACE : d_in,
               r == root && g_root_host ? (void *)h_out : d_out, (int)count, t->dt,
               mpi_ops[op], root, comm);
    if (!(g_root_host && r == root)) buf_get(h_out, d_out, count * es + GUARD);
    if (r == root) {
        CHECK_OUT(g_root_host ? "reduce(into host memory at the root)" : "reduce", comm, t, op,
                  count, root, inplace, h_out,
                  expect_red(t, op, cs, n, i));
    } else { /* untouched */
        CHECK_OUT("reduce(non-root untouched)", comm, &types[1], -1, count * es, root, 0,
                  h_out, 0x5a);
    }
}

/* allgather of count elements of t (sent as scount of st when st != NULL) */
static void check_ag(MPI_Comm comm, const ty_t *t, size_t count, int inplace, int cs,
                     MPI_Datatype st, int scount)
{
    int n, r;
    const size_t es = (size_t)t->size;

    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    for (size_t i = 0; i < count; i++) put(h_in, t, i, val(t, SUM, cs, r, i));
    poison_out(count * n * es);
    if (inplace) {
        memcpy(h_out + (size_t)r * count * es, h_in, count * es);
        buf_put(d_out, h_out, count * n * es + GUARD);
    } else {
        buf_put(d_in, h_in, count * es);
    }
    MPI_Allgather(inplace ? MPI_IN_PLACE : d_in, st != MPI_DATATYPE_NULL ? scount : (int)count,
                  st != MPI_DATATYPE_NULL ? st : t->dt, d_out, (int)count, t->dt, comm);
    buf_get(h_out, d_out, count * n * es + GUARD);
    CHECK_OUT("allgather", comm, t, -1, count * n, -1, inplace, h_out,
              val(t, SUM, cs, (int)(i / count), i % count));
}

static void check_bcast(MPI_Comm comm, const ty_t *t, MPI_Datatype dt, size_t count, int root,
                        int cs)
{
    int r;
    const size_t es = (size_t)t->size;

    MPI_Comm_rank(comm, &r);
    if (r == root) {
        for (size_t i = 0; i < count; i++) put(h_out, t, i, val(t, SUM, cs, root, i));
        memset(h_out + count * es, 0xa5, GUARD);
        buf_put(d_out, h_out, count * es + GUARD);
    } else {
        poison_out(count * es);
    }
    MPI_Bcast(d_out, (int)count, dt, root, comm);
    buf_get(h_out, d_out, count * es + GUARD);
    CHECK_OUT("bcast", comm, t, -1, count, root, 0, h_out, val(t, SUM, cs, root, i));
}

/* -I: rank 0 makes 8 MPI_Bcast calls of 4096 int32 before the others reach theirs (they
 * sleep 1 s first), then sleeps 1 s itself: its process must use less than half that
 * second's CPU -- gpuring's progress thread, with nothing left to send, naps until the
 * receivers' credits come instead of spinning for them */
static void check_idle_root(MPI_Comm comm, int cs)
{
    int r;

    MPI_Comm_rank(comm, &r);
    MPI_Barrier(comm);
    if (r != 0) sleep(1);
    for (int k = 0; k < 8; k++) check_bcast(comm, &types[T_INT32], MPI_INT32_T, 4096, 0, cs + k);
    if (r == 0) {
        double cpu = test_cpu_seconds();

        sleep(1);
        cpu = test_cpu_seconds() - cpu;
        if (cpu < 0.5) {
            g_pass++;
        } else {
            g_fail++;
            fprintf(stderr, "rank 0: FAIL idle root: %.2f s of CPU in the second after its "
                    "MPI_Bcast calls, the receivers not in them yet\n", cpu);
        }
    }
}

/* ---- per-rank datatypes of one signature ------------------------------------------- */
/* MPI asks only that the ranks' type signatures match: each rank describes the same
 * int32 values with a layout of its own (by rank and case), contiguous or not, and the
 * results are compared byte for byte with the image they must leave (holes untouched) */
enum { LAY_INT, LAY_CONTIG4, LAY_GAP, LAY_N };
static MPI_Datatype lay_types[LAY_N]; /* int32; 4 int32 as one; an int32 every 8 bytes */

static void lay_make(void)
{
    lay_types[LAY_INT] = MPI_INT32_T;
    MPI_Type_contiguous(4, MPI_INT32_T, &lay_types[LAY_CONTIG4]);
    MPI_Type_create_resized(MPI_INT32_T, 0, 8, &lay_types[LAY_GAP]);
    MPI_Type_commit(&lay_types[LAY_CONTIG4]);
    MPI_Type_commit(&lay_types[LAY_GAP]);
}

static void lay_free(void)
{
    MPI_Type_free(&lay_types[LAY_CONTIG4]);
    MPI_Type_free(&lay_types[LAY_GAP]);
}

static int lay_count(int lay, size_t nints) { return (int)(lay == LAY_CONTIG4 ? nints / 4 : nints); }

/* where int i of a buffer of that layout sits (bytes) */
static size_t lay_at(int lay, size_t i) { return lay == LAY_GAP ? 8 * i : 4 * i; }

static void lay_put(unsigned char *img, int lay, size_t i, uint64_t v)
{
    uint32_t w = (uint32_t)v;

    memcpy(img + lay_at(lay, i), &w, 4);
}

/* bytes bytes of poison 0x5a, then the guard */
static void lay_blank(unsigned char *img, size_t bytes)
{
    memset(img, 0x5a, bytes);
    memset(img + bytes, 0xa5, GUARD);
}

static void lay_check(const char *what, MPI_Comm comm, int root, int inplace,
                      const unsigned char *want, size_t bytes)
{
    size_t bad = (size_t)-1;

    buf_get(h_out, d_out, bytes + GUARD);
    for (size_t i = 0; bad == (size_t)-1 && i < bytes + GUARD; i++)
        if (h_out[i] != want[i]) bad = i;
    verdict(bad == (size_t)-1, what, comm, &types[1], -1, bytes, root, inplace, bad,
            bad == (size_t)-1 ? 0 : h_out[bad], bad == (size_t)-1 ? 0 : want[bad]);
}

static void check_bcast_layouts(MPI_Comm comm, size_t nints, int root, int cs)
{
    int r;

    MPI_Comm_rank(comm, &r);
    const int lay = (r + cs) % LAY_N;
    const size_t span = lay_at(lay, nints);
    unsigned char *want = malloc(span + GUARD);

    lay_blank(want, span);
    for (size_t i = 0; i < nints; i++) lay_put(want, lay, i, ival(cs, root, i));
    if (r == root) memcpy(h_out, want, span + GUARD);
    else lay_blank(h_out, span);
    buf_put(d_out, h_out, span + GUARD);
    MPI_Bcast(d_out, lay_count(lay, nints), lay_types[lay], root, comm);
    lay_check("bcast(per-rank datatypes)", comm, root, 0, want, span);
    free(want);
}

static void check_ag_layouts(MPI_Comm comm, size_t nints, int inplace, int cs)
{
    int r, n;

    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    const int slay = (r + cs) % LAY_N, rlay = (r + cs + 1) % LAY_N;
    const size_t rspan = lay_at(rlay, nints * (size_t)n), sspan = lay_at(slay, nints);
    unsigned char *want = malloc(rspan + GUARD);

    lay_blank(want, rspan);
    for (size_t k = 0; k < (size_t)n; k++)
        for (size_t j = 0; j < nints; j++) lay_put(want, rlay, k * nints + j, ival(cs, (int)k, j));
    lay_blank(h_in, sspan);
    for (size_t j = 0; j < nints; j++) lay_put(h_in, slay, j, ival(cs, r, j));
    buf_put(d_in, h_in, sspan);
    lay_blank(h_out, rspan);
    if (inplace) {
        for (size_t j = 0; j < nints; j++)
            lay_put(h_out, rlay, (size_t)r * nints + j, ival(cs, r, j));
    }
    buf_put(d_out, h_out, rspan + GUARD);
    MPI_Allgather(inplace ? MPI_IN_PLACE : d_in, lay_count(slay, nints), lay_types[slay], d_out,
                  lay_count(rlay, nints), lay_types[rlay], comm);
    lay_check("allgather(per-rank datatypes)", comm, -1, inplace, want, rspan);
    free(want);
}

/* MPI_Bcast at MPI_BOTTOM of a datatype whose three blocks of nints int32 lie in two
 * buffers of the run's memory (device memory with -d: two allocations) and in host
 * memory (from mmap, as a large malloc's), in that order: the elements are packed from
 * and unpacked into every block (with -d, gpuring's image of a span in pieces), every
 * byte of each buffer checked */
static void check_bcast_bottom(MPI_Comm comm, size_t nints, int root, int cs)
{
    const size_t bytes = nints * 4;
    unsigned char *h = mmap(NULL, bytes + GUARD, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *want = malloc(3 * (bytes + GUARD));
    void *d[2] = {buf_alloc(bytes), buf_alloc(bytes)};
    int r, len[3] = {(int)nints, (int)nints, (int)nints};
    MPI_Aint at[3] = {(MPI_Aint)(uintptr_t)d[0], (MPI_Aint)(uintptr_t)d[1], 0};
    MPI_Datatype abs;
    size_t bad = (size_t)-1;

    MPI_Comm_rank(comm, &r);
    if (h == MAP_FAILED || want == NULL) {
        fprintf(stderr, "rank %d: no memory\n", g_rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    at[2] = (MPI_Aint)(uintptr_t)h;
    /* want: the three blocks' images, each with its guard */
    for (int k = 0; k < 3; k++) {
        unsigned char *img = want + (size_t)k * (bytes + GUARD);

        lay_blank(img, bytes);
        for (size_t i = 0; i < nints; i++)
            lay_put(img, LAY_INT, i, ival(cs, root, (size_t)k * nints + i));
    }
    for (int k = 0; k < 3; k++) {
        unsigned char *img = want + (size_t)k * (bytes + GUARD);

        if (r == root) memcpy(h_out, img, bytes + GUARD);
        else lay_blank(h_out, bytes);
        if (k < 2) buf_put(d[k], h_out, bytes + GUARD);
        else memcpy(h, h_out, bytes + GUARD);
    }
    MPI_Type_create_hindexed(3, len, at, MPI_INT32_T, &abs);
    MPI_Type_commit(&abs);
    MPI_Bcast(MPI_BOTTOM, 1, abs, root, comm);
    for (int k = 0; k < 3 && bad == (size_t)-1; k++) {
        const unsigned char *img = want + (size_t)k * (bytes + GUARD);

        if (k < 2) buf_get(h_out, d[k], bytes + GUARD);
        else memcpy(h_out, h, bytes + GUARD);
        for (size_t i = 0; bad == (size_t)-1 && i < bytes + GUARD; i++)
            if (h_out[i] != img[i]) bad = (size_t)k * (bytes + GUARD) + i;
    }
    verdict(bad == (size_t)-1, "bcast(MPI_BOTTOM, blocks in 2 buffers and host memory)", comm,
            &types[T_INT32], -1, nints, root, 0, bad, bad == (size_t)-1 ? 0 : h_out[bad % (bytes + GUARD)],
            bad == (size_t)-1 ? 0 : want[bad]);
    MPI_Type_free(&abs);
    buf_free(d[0]);
    buf_free(d[1]);
    munmap(h, bytes + GUARD);
    free(want);
}

/* MPI_Bcast of one column of a SPARSE_ROWS x SPARSE_COLS matrix of int32 (a vector
 * type: one a row, a span of 16 MiB whose blocks hold about 1 KiB) in device memory
 * (-d): gpuring packs the column from a host image of its span and unpacks it there --
 * only the blocks copied, only their pages of the image touched: the call's peak
 * resident memory grows by under a quarter of the span (an image copied in whole grew
 * it by the span).  Every byte of the matrix checked. */
#define SPARSE_ROWS 257
#define SPARSE_COLS 16384
static void check_bcast_sparse(MPI_Comm comm, int root, int cs)
{
    const size_t span = ((size_t)(SPARSE_ROWS - 1) * SPARSE_COLS + 1) * 4;
    unsigned char *want = malloc(span + GUARD), *got = malloc(span + GUARD);
    void *d = buf_alloc(span + GUARD);
    MPI_Datatype col;
    size_t bad = (size_t)-1;
    long start, grew;
    int r;

    MPI_Comm_rank(comm, &r);
    if (want == NULL || got == NULL) {
        fprintf(stderr, "rank %d: no memory\n", g_rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    lay_blank(want, span);
    for (size_t i = 0; i < SPARSE_ROWS; i++)
        lay_put(want, LAY_INT, i * SPARSE_COLS, ival(cs, root, i));
    if (r == root) memcpy(got, want, span + GUARD);
    else lay_blank(got, span);
    buf_put(d, got, span + GUARD);
    MPI_Type_vector(SPARSE_ROWS, 1, SPARSE_COLS, MPI_INT32_T, &col);
    MPI_Type_commit(&col);
    start = test_mem_peak_start();
    MPI_Bcast(d, 1, col, root, comm);
    grew = test_mem_peak_growth(start);
    buf_get(got, d, span + GUARD);
    for (size_t i = 0; bad == (size_t)-1 && i < span + GUARD; i++)
        if (got[i] != want[i]) bad = i;
    verdict(bad == (size_t)-1, "bcast(a matrix column: 1 KiB of blocks in a 16 MiB span)", comm,
            &types[T_INT32], -1, SPARSE_ROWS, root, 0, bad, bad == (size_t)-1 ? 0 : got[bad],
            bad == (size_t)-1 ? 0 : want[bad]);
    if (grew >= 0) {
        char what[128];

        snprintf(what, sizeof(what), "bcast(a matrix column): the peak resident memory grew "
                 "by %ld KiB (the span is %zu KiB)", grew, span / 1024);
        verdict((size_t)grew * 1024 < span / 4, what, comm, &types[T_INT32], -1, SPARSE_ROWS,
                root, 0, 0, 0, 0);
    }
    MPI_Type_free(&col);
    buf_free(d);
    free(want);
    free(got);
}

/* ---- the sweep -------------------------------------------------------------------- */
static int g_bcast_first; /* -B */

static void sweep(MPI_Comm comm, int full, size_t large)
{
    static const size_t counts[] = {0, 1, 7, 33, 1000};
    const int nc = sizeof(counts) / sizeof(counts[0]);
    int n, cs = 0;
    MPI_Datatype contig;
    int32_t one = 1;

    MPI_Comm_size(comm, &n);
    if (g_bcast_first) {
        /* rank r's layout is (r + cs) % LAY_N: rank 0's the one with holes; it
         * receives (a root would return once its message left, agreed or not) */
        cs = LAY_GAP;
        check_bcast_layouts(comm, 28, n - 1, cs);
    }
    /* one allreduce: the communicator's setup shows in the log as for allreduce */
    MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT32_T, MPI_SUM, comm);
    /* reductions: every type x op, at every count (fast: every pair still, at one count
     * of 1-1000 each, taken in turn, and at count 0 one pair in five) */
    for (int ti = 0; ti < NTYPES; ti++) {
        for (int op = 0; op < NOPS; op++) {
            if (!(types[ti].ops >> op & 1u)) continue;
            for (int ci = 0; ci < nc; ci++) {
                size_t c = counts[ci];
                int ip = (ti + op + ci) % 2, root = (ti + op + ci) % n;
                if (!full && (ci == 0 ? (ti + op) % 5 != 0 : ci != 1 + (ti + op) % (nc - 1)))
                    continue;
                check_rs(comm, &types[ti], op, c, ip, ++cs, 0);
                check_reduce(comm, &types[ti], op, c, root, ip, ++cs);
            }
        }
    }
    /* both forms and every root, on one type */
    for (int ip = 0; ip < 2; ip++) {
        check_rs(comm, &types[T_INT32], SUM, 17, ip, ++cs, 1);
        for (int root = 0; root < n; root++) {
            check_reduce(comm, &types[T_DOUBLE], MAX, 33, root, ip, ++cs);
            check_bcast(comm, &types[T_INT32], MPI_INT32_T, 1 + 37 * (size_t)root, root, ++cs);
        }
    }
    check_rsv_unequal(comm, ++cs);
    /* back to back with the same count and one argument changed each time
     * (the root, the op, the type): a plan kept from the call before
     * (gpuring_enqueue.c) must be this call's own */
    for (int root = 0; root < n; root++) {
        check_bcast(comm, &types[T_INT32], MPI_INT32_T, 64, root, ++cs);
    }
    for (int root = 0; root < n; root++) check_reduce(comm, &types[T_INT32], SUM, 64, root, 0, ++cs);
    /* device send buffers, the root's receive buffer host memory: the send buffers --
     * all the other ranks have -- decide every rank's path (the root's alone went below
     * while the others ran gpuring's chain, and waited there forever) */
    if (g_device) {
        g_root_host = 1;
        for (int root = 0; root < n; root++) {
            check_reduce(comm, &types[T_INT32], SUM, 64, root, 0, ++cs);
        }
        check_reduce(comm, &types[T_DOUBLE], MAX, 1999, n - 1, 0, ++cs);
        g_root_host = 0;
    }
    for (int op = 0; op < NOPS; op++) {
        if (types[T_INT32].ops >> op & 1u) check_reduce(comm, &types[T_INT32], op, 64, 0, 0, ++cs);
    }
    for (int ti = 0; ti < NTYPES; ti++) {
        if (types[ti].ops >> SUM & 1u) check_rs(comm, &types[ti], SUM, 64, 0, ++cs, 0);
    }
    /* copies: byte sizes of every kind */
    for (int ti = 0; ti < NTYPES; ti += full ? 1 : 5) {
        for (int ci = 0; ci < nc; ci++) {
            check_ag(comm, &types[ti], counts[ci], (ti + ci) % 2, ++cs, MPI_DATATYPE_NULL, 0);
            check_bcast(comm, &types[ti], types[ti].dt, counts[ci], (ti + ci) % n, ++cs);
        }
    }
    /* allgather: ints sent, bytes received (the same bytes) */
    check_ag(comm, &types[13], 4 * 9, 0, ++cs, MPI_INT32_T, 9);
    /* a derived contiguous type on every rank: its bytes */
    MPI_Type_contiguous(2, MPI_INT32_T, &contig);
    MPI_Type_commit(&contig);
    check_ag(comm, &types[T_INT32], 10, 0, ++cs, contig, 5);
    check_bcast(comm, &types[T_INT32], contig, 10, n - 1, ++cs); /* 10 int32 = 5 contig */
    MPI_Type_free(&contig);
    /* per-rank datatypes of one signature, every root, in place or not */
    for (int root = 0; root < n; root++) check_bcast_layouts(comm, 28, root, ++cs);
    check_bcast_layouts(comm, 1000, n - 1, ++cs);
    for (int root = 0; root < n; root++) check_bcast_bottom(comm, 1 + 33 * (size_t)root, root, ++cs);
    for (int ip = 0; ip < 2; ip++) {
        check_ag_layouts(comm, 4, ip, ++cs);
        check_ag_layouts(comm, 1000, ip, ++cs);
    }
    if (g_device) check_bcast_sparse(comm, n - 1, ++cs);
    if (large > 0) {
        check_bcast_layouts(comm, large / 4 * 4, 0, ++cs);
        check_ag_layouts(comm, large / (size_t)n / 4 * 4, 1, ++cs);
    }
    if (large > 0) {
        size_t per = large / (size_t)n;
        check_rs(comm, &types[T_FLOAT], SUM, per, 0, ++cs, 0);
        check_rs(comm, &types[T_INT32], SUM, per + 1, 1, ++cs, 0);
        check_ag(comm, &types[T_INT32], per + 3, 0, ++cs, MPI_DATATYPE_NULL, 0);
        check_bcast(comm, &types[T_INT32], MPI_INT32_T, large, n - 1, ++cs);
        check_reduce(comm, &types[T_INT32], SUM, large, n / 2, 0, ++cs);
        check_reduce(comm, &types[T_FLOAT], MAX, large + 5, 0, 1, ++cs);
    }
}

int main(int argc, char **argv)
{
    size_t large = 1 << 20, bytes, shift_in = 0, shift_out = 0;
    int opt, full = 1, n, bad = 0, idle_root = 0;
    long tot[2];
    MPI_Comm dup, split;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    while ((opt = getopt(argc, argv, "s:L:fdUABIx:q")) != -1) {
        switch (opt) {
        case 's': g_seed = atoi(optarg); break;
        case 'L': large = strtoul(optarg, NULL, 0); break;
        case 'f': full = 0; break;
        case 'd': g_device = 1; break;
        case 'U': g_mem = TEST_CUDA_MANAGED; break;
        case 'A': shift_in = (size_t)g_rank % 4, shift_out = (size_t)(g_rank + 1) % 4; break;
        case 'B': g_bcast_first = 1; break;
        case 'I': idle_root = 1; break;
        case 'x':
            if (test_type_op_list_add(&g_exclude, optarg, g_rank == 0) != 0)
                MPI_Abort(MPI_COMM_WORLD, 2);
            break;
        case 'q': g_quiet = 1; break;
        default:
            if (g_rank == 0) fprintf(stderr, "usage: colls_check [-s seed] [-L elems] [-f] [-d] [-A] [-B] [-I] [-x type:op,...] [-q]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (g_device) {
        char err[256];

        if (test_cuda_load_local(g_rank, err, sizeof(err)) != 0) {
            fprintf(stderr, "rank %d: %s\n", g_rank, err);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    mpi_ops[SUM] = MPI_SUM; mpi_ops[PROD] = MPI_PROD; mpi_ops[MIN] = MPI_MIN;
    mpi_ops[MAX] = MPI_MAX; mpi_ops[BAND] = MPI_BAND; mpi_ops[BOR] = MPI_BOR;
    mpi_ops[BXOR] = MPI_BXOR; mpi_ops[LAND] = MPI_LAND; mpi_ops[LOR] = MPI_LOR;
    mpi_ops[LXOR] = MPI_LXOR;
    bytes = ((large > 2000 ? large : 2000) + 64) * 8 * (size_t)n;
    h_in = malloc(bytes + GUARD);
    h_out = malloc(bytes + GUARD);
    lay_make();
    d_in = (char *)buf_alloc(bytes + 4) + shift_in;
    d_out = (char *)buf_alloc(bytes + 4) + shift_out;

    sweep(MPI_COMM_WORLD, full, large);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_name(dup, "dup");
    sweep(dup, 0, 0);
    /* reversed order; even and odd ranks apart -- but for device buffers below 4 ranks:
     * one rank alone hands every call below, staged, where the runners count the device
     * calls staged for the component below (test/below_check.sh) */
    MPI_Comm_split(MPI_COMM_WORLD, n >= 4 || !g_device ? g_rank % 2 : 0, n - g_rank, &split);
    MPI_Comm_set_name(split, "split");
    sweep(split, 0, 0);
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
    if (idle_root) check_idle_root(MPI_COMM_WORLD, 1 << 20);

    /* the verdict through MPI_Gather, which gpuring does not run */
    {
        long mine[2] = {g_pass, g_fail};
        /* (on a line of its own, as the verdict below) */
        printf("\ncolls_check rank %d: %ld reduce_scatter calls with unequal counts\n", g_rank,
               g_rsv_unequal);
        fflush(stdout);
        tot[0] = tot[1] = 0;
        test_verdict_sum(mine, tot, 2, MPI_COMM_WORLD);
        /* on a line of its own even when mpirun forwards another rank's log line in
         * pieces around it (verbose 4 logs every call: colls_hostoff_np3_rpn0 once
         * read "...coll_gpuring_entry.c:5294 passed, 0 failed") */
        if (g_rank == 0) printf("\n%ld passed, %ld failed\n", tot[0], tot[1]);
    }
    bad = g_fail != 0 || (g_rank == 0 && tot[1] != 0);
    lay_free();
    buf_free((char *)d_in - shift_in);
    buf_free((char *)d_out - shift_out);
    free(h_in);
    free(h_out);
    MPI_Finalize();
    return bad;
}
