/*
 * mix_check.c -- a seeded random sequence of mixed collective calls, each
 * checked against a reference computed here, to catch what the one-call-at-
 * a-time checks (allreduce_check, colls_check, iallreduce_check) miss: a plan
 * or channel memo kept from a call whose parameters differ, call ids, the
 * switch between small (LL) and large calls on one communicator, non-blocking
 * calls in flight while blocking calls of other kinds run, and several
 * communicators used in turn.
 *
 * Every rank draws the same sequence from the seed (splitmix64), so every
 * rank issues the same collectives in the same order on each communicator.
 * Call k picks:
 *   collective   MPI_Allreduce, MPI_Iallreduce, MPI_Reduce_scatter_block,
 *                MPI_Allgather, MPI_Bcast or MPI_Reduce
 *   communicator MPI_COMM_WORLD, a dup of it, or a split by rank % 2 (a split
 *                of one rank runs in the library's coll/self)
 *   type, op     int8, int32, int64, uint64 with sum, prod, min, max, bxor;
 *                float, double with sum, min, max
 *   count        0, 1, 2..100, 1..64 KiB of data, now and then 1..2 MiB
 *   root, MPI_IN_PLACE (about 1 call in 4, where MPI allows it)
 * About 1 call in 3 instead repeats the call before it (collective,
 * communicator, count) with ONE of root / op / type / in-place changed.
 * Up to MAXOUT MPI_Iallreduce calls stay in flight (on any communicators);
 * they complete at random points through MPI_Wait, MPI_Waitall,
 * MPI_Waitany, MPI_Test polling, or an MPI_Test peek that may complete one
 * early, with blocking calls of every kind between them.
 *
 * Rank r's element i of call k is a function of (seed, k, r, i), so each rank
 * computes every call's result by itself, in plain C: values small enough
 * that nothing overflows (int8 sums excepted: they must wrap, computed in
 * unsigned arithmetic; Open MPI 4.1.4's own op saturates them, so a call
 * that went below gpuring fails), floats holding small integers (exact in
 * any order).  Before each call the output holds the complement of its
 * expected value and GUARD bytes lie on both sides of every buffer; after
 * it, the output, the guards and the unchanged send buffer are checked:
 * one check per call and rank.
 *
 *   mix_check [-s SEED] [-n CALLS] [-d] [-v] [-q]
 *     -s  seed (default 1)          -n  calls (default 600)
 *     -d  device buffers: each buffer, guards included, is copied to device
 *         memory (cudaMalloc through the libcudart it dlopens: the CPU CUDA
 *         runtime in CI) before the call and back after it, and checked as
 *         above; calls on a communicator of one rank are skipped there (the
 *         library's coll/self need not read device memory)
 *     -v  rank 0 prints every call  -q  quiet: no coverage summary
 * Rank 0 prints `N passed, N failed` (the verdict gathered with MPI_Gather,
 * which gpuring does not run); exit code non-zero when a check failed.
 */
#include <malloc.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/cuda_dl.h"
#include "test/mpi_verdict.h"

#define GUARD 64
#define GUARD_BYTE 0xa5
#define MAXOUT 4
#define MAXREPORT 10

enum { SUM, PROD, MIN, MAX, BXOR, NOPS };
static const char *op_names[NOPS] = {"sum", "prod", "min", "max", "bxor"};
static MPI_Op mpi_ops[NOPS];
#define INT_OPS 0x1fu
#define FLT_OPS ((1u << SUM) | (1u << MIN) | (1u << MAX))

typedef struct {
    MPI_Datatype dt;
    const char *name;
    int size;
    int fl;  /* 0 integer, 1 float, 2 double */
    int sgn; /* signed (floats: compared as signed integers, which they hold) */
    unsigned ops;
} ty_t;
static ty_t types[6];
#define NTYPES 6

enum { ALLREDUCE, IALLREDUCE, RSB, ALLGATHER, BCAST, REDUCE, NCOLLS };
static const char *coll_names[NCOLLS] = {"allreduce", "iallreduce", "reduce_scatter_block",
                                         "allgather", "bcast", "reduce"};
enum { CH_NONE = -1, CH_ROOT, CH_OP, CH_TYPE, CH_INPLACE, NCH };
static const char *change_names[NCH] = {"root", "op", "type", "in-place"};
#define NCOMMS 3
static const char *comm_names[NCOMMS] = {"world", "dup", "split"};

static int g_rank, g_quiet, g_verbose, g_device;
static uint64_t g_seed = 1;
static long g_pass, g_fail;

/* ---- the shared sequence ------------------------------------------------------------ */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t g_rng;
static uint64_t next(void) /* splitmix64 */
{
    g_rng += 0x9e3779b97f4a7c15ull;
    return mix(g_rng);
}

/* What call k does: drawn alike on every rank. */
typedef struct {
    int coll, comm, ty, op, inplace, change;
    size_t count;
    uint64_t root_raw; /* the root is root_raw % the communicator's size */
} desc_t;

static int pick_bit(unsigned mask, int skip, uint64_t u)
{
    int n = 0, k;

    for (k = 0; k < 32; k++) n += (mask >> k & 1u) && k != skip;
    n = (int)(u % (uint64_t)n);
    for (k = 0; k < 32; k++) {
        if ((mask >> k & 1u) && k != skip && n-- == 0) break;
    }
    return k;
}

static size_t draw_count(int coll, int es, uint64_t u, uint64_t v)
{
    size_t count, bytes;

    u %= 100;
    if (u < 5) return 0;
    if (u < 15) return 1;
    if (u < 45) return 2 + v % 99;
    if (u < 97) { /* 1..64 KiB, about as many of each power of two */
        bytes = (size_t)1024 << v % 6;
        count = (bytes + (v >> 8) % bytes) / (size_t)es + (v >> 40) % 3;
    } else {
        count = ((1u << 20) + (v >> 8) % (1u << 20)) / (size_t)es;
    }
    return coll == RSB || coll == ALLGATHER ? (count + 3) / 4 : count; /* per rank */
}

static void draw(desc_t *d, const desc_t *prev)
{
    uint64_t u[8];

    for (int k = 0; k < 8; k++) u[k] = next(); /* as many every call: the ranks stay alike */
    if (prev != NULL && u[0] % 3 == 0) {
        static const unsigned can[NCOLLS] = {
            [ALLREDUCE] = 1u << CH_OP | 1u << CH_TYPE | 1u << CH_INPLACE,
            [IALLREDUCE] = 1u << CH_OP | 1u << CH_TYPE | 1u << CH_INPLACE,
            [RSB] = 1u << CH_OP | 1u << CH_TYPE | 1u << CH_INPLACE,
            [ALLGATHER] = 1u << CH_TYPE | 1u << CH_INPLACE,
            [BCAST] = 1u << CH_ROOT | 1u << CH_TYPE,
            [REDUCE] = 1u << CH_ROOT | 1u << CH_OP | 1u << CH_TYPE | 1u << CH_INPLACE};
        *d = *prev;
        d->change = pick_bit(can[d->coll], -1, u[1]);
        switch (d->change) {
        case CH_ROOT: d->root_raw++; break; /* another root in any communicator of 2+ */
        case CH_OP: d->op = pick_bit(types[d->ty].ops, d->op, u[2]); break;
        case CH_TYPE: {
            unsigned ok = 0;
            for (int t = 0; t < NTYPES; t++) {
                if (d->op < 0 || (types[t].ops >> d->op & 1u)) ok |= 1u << t;
            }
            d->ty = pick_bit(ok, d->ty, u[2]);
            break;
        }
        default: d->inplace = !d->inplace; break;
        }
        return;
    }
    d->change = CH_NONE;
    d->coll = (int)(u[1] % NCOLLS);
    d->comm = (int)(u[2] % NCOMMS);
    d->ty = (int)(u[3] % NTYPES);
    d->op = d->coll == BCAST || d->coll == ALLGATHER ? -1 : pick_bit(types[d->ty].ops, -1, u[4]);
    d->count = draw_count(d->coll, types[d->ty].size, u[5], u[6]);
    d->root_raw = u[7] % 1024;
    d->inplace = d->coll != BCAST && (u[7] >> 20) % 4 == 0;
}

/* ---- values and the reference --------------------------------------------------------- */
static uint64_t sext(const ty_t *t, uint64_t h)
{
    const int shift = 64 - 8 * t->size;

    if (shift == 0) return h;
    return t->sgn ? (uint64_t)((int64_t)(h << shift) >> shift) : h & (~0ull >> shift);
}

/* Rank r's element of a call of op (-1: a copy) on n ranks, from its hash h: an
 * integer, sign-extended to 64 bits for signed types */
static uint64_t value(const ty_t *t, int op, int n, uint64_t h)
{
    if (t->fl) return (uint64_t)(op == SUM ? (int64_t)(h % 33) - 16 : (int64_t)(h % 2001) - 1000);
    if (op == PROD) {
        static const int64_t v[4] = {1, -1, 2, 1};
        int64_t x = v[h % 4];
        if (!t->sgn && x < 0) x = 1;
        if (x == 2 && n > 6) x = 1; /* 2^6 fits int8 */
        return (uint64_t)x;
    }
    if (op == SUM && t->size == 4) return (uint64_t)((int64_t)(h % 200001) - 100000);
    if (op == SUM && t->size == 8) return t->sgn ? (uint64_t)((int64_t)(h >> 23) - (1ll << 40)) : h >> 14;
    return sext(t, h); /* int8 sums: any byte, the sum wraps; min/max/bxor/copies: any bits */
}

static uint64_t fold(int op, int sgn, uint64_t a, uint64_t b)
{
    switch (op) {
    case SUM: return a + b;
    case PROD: return a * b;
    case MIN: return (sgn ? (int64_t)a < (int64_t)b : a < b) ? a : b;
    case MAX: return (sgn ? (int64_t)a > (int64_t)b : a > b) ? a : b;
    default: return a ^ b;
    }
}

static void store(const ty_t *t, unsigned char *buf, size_t i, uint64_t v)
{
    if (t->fl == 1) {
        float f = (float)(int64_t)v;
        memcpy(buf + i * 4, &f, 4);
    } else if (t->fl == 2) {
        double d = (double)(int64_t)v;
        memcpy(buf + i * 8, &d, 8);
    } else {
        memcpy(buf + i * (size_t)t->size, &v, (size_t)t->size); /* little-endian: the low bytes */
    }
}

static void format(const ty_t *t, const unsigned char *buf, size_t i, char *out, size_t len)
{
    uint64_t v = 0;

    if (t->fl == 1) {
        float f;
        memcpy(&f, buf + i * 4, 4);
        snprintf(out, len, "%g", f);
    } else if (t->fl == 2) {
        double d;
        memcpy(&d, buf + i * 8, 8);
        snprintf(out, len, "%g", d);
    } else {
        memcpy(&v, buf + i * (size_t)t->size, (size_t)t->size);
        v = sext(t, v);
        if (t->sgn) snprintf(out, len, "%lld", (long long)(int64_t)v);
        else snprintf(out, len, "%llu", (unsigned long long)v);
    }
}

/* ---- one call ------------------------------------------------------------------------- */
typedef struct {
    int k;
    desc_t d;
    const ty_t *t;
    MPI_Comm comm;
    int n, r, root;
    uint64_t base;             /* the call's hash */
    unsigned char *send, *recv; /* GUARD bytes on both sides; NULL: not passed */
    unsigned char *exp, *send_copy;
    unsigned char *dsend, *drecv; /* -d: their device copies (GUARD bytes on both sides too) */
    size_t send_bytes, recv_bytes, cmp_bytes; /* cmp_bytes: what recv must hold after */
    MPI_Request req;
    int rc;
} call_t;

static unsigned char *guarded(size_t bytes)
{
    unsigned char *p = malloc(bytes + 2 * GUARD);

    if (p == NULL) {
        fprintf(stderr, "rank %d: no memory for %zu B\n", g_rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(p, GUARD_BYTE, GUARD);
    memset(p + GUARD + bytes, GUARD_BYTE, GUARD);
    return p + GUARD;
}

static void guarded_free(unsigned char *p)
{
    if (p != NULL) free(p - GUARD);
}

/* -d: a device copy of guarded host buffer p (NULL stays NULL) */
static unsigned char *device_copy(const unsigned char *p, size_t bytes)
{
    void *d = NULL;
    int rc;

    if (p == NULL) return NULL;
    if ((rc = test_cuda_alloc(&d, bytes + 2 * GUARD, 0)) != 0 ||
        (rc = cu.memcpy_(d, p - GUARD, bytes + 2 * GUARD, TEST_CUDA_H2D)) != 0) {
        fprintf(stderr, "rank %d: device copy of %zu B: %s\n", g_rank, bytes,
                cu.error_string(rc));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return (unsigned char *)d + GUARD;
}

/* -d: device buffer d back into host buffer p, guards included, and freed */
static void device_back(unsigned char *p, unsigned char *d, size_t bytes)
{
    int rc;

    if (d == NULL) return;
    if ((rc = cu.memcpy_(p - GUARD, d - GUARD, bytes + 2 * GUARD, TEST_CUDA_D2H)) != 0) {
        fprintf(stderr, "rank %d: device copy back of %zu B: %s\n", g_rank, bytes,
                cu.error_string(rc));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    test_cuda_free(d - GUARD, 0);
}

/* the first guard byte written, or -1 */
static long guard_hit(const unsigned char *p, size_t bytes)
{
    for (long k = 0; k < GUARD; k++) {
        if (p[k - GUARD] != GUARD_BYTE) return k - GUARD;
        if (p[bytes + (size_t)k] != GUARD_BYTE) return (long)bytes + k;
    }
    return -1;
}

/* rank r's element i (its input) */
static uint64_t in_val(const call_t *c, int r, size_t i)
{
    return value(c->t, c->d.op, c->n, mix(c->base ^ (uint64_t)r << 44 ^ i));
}

/* element i reduced over every rank */
static uint64_t red_val(const call_t *c, size_t i)
{
    uint64_t v = in_val(c, 0, i);

    for (int r = 1; r < c->n; r++) v = fold(c->d.op, c->t->sgn, v, in_val(c, r, i));
    return v;
}

/* Buffers, inputs and the expected output of call k on comm. */
static call_t *call_new(int k, const desc_t *d, MPI_Comm comm)
{
    call_t *c = calloc(1, sizeof(*c));
    const size_t es = (size_t)types[d->ty].size, count = d->count;
    unsigned char *in; /* where this rank's input goes */
    size_t nin;

    c->k = k;
    c->d = *d;
    c->t = &types[d->ty];
    c->comm = comm;
    c->req = MPI_REQUEST_NULL;
    c->rc = MPI_SUCCESS;
    MPI_Comm_size(comm, &c->n);
    MPI_Comm_rank(comm, &c->r);
    c->root = (int)(d->root_raw % (uint64_t)c->n);
    c->base = mix(g_seed * 0x2545f4914f6cdd1dull + (uint64_t)k);
    /* inputs: count elements, count * n for reduce_scatter_block; bcast: the root's */
    nin = d->coll == RSB ? count * (size_t)c->n : d->coll == BCAST ? 0 : count;
    /* outputs */
    c->recv_bytes = c->cmp_bytes = count * es;
    if (d->coll == RSB && d->inplace) c->recv_bytes = count * (size_t)c->n * es;
    if (d->coll == ALLGATHER) c->recv_bytes = c->cmp_bytes = count * (size_t)c->n * es;
    if (d->coll == REDUCE && c->r != c->root) c->recv_bytes = c->cmp_bytes = 0;
    c->exp = malloc(c->recv_bytes + 1);
    for (size_t i = 0; i < c->cmp_bytes / es; i++) {
        switch (d->coll) {
        case ALLGATHER: store(c->t, c->exp, i, in_val(c, (int)(i / count), i % count)); break;
        case BCAST: store(c->t, c->exp, i, in_val(c, c->root, i)); break;
        case RSB: store(c->t, c->exp, i, red_val(c, (size_t)c->r * count + i)); break;
        default: store(c->t, c->exp, i, red_val(c, i)); break;
        }
    }
    if (d->coll != REDUCE || c->r == c->root) {
        c->recv = guarded(c->recv_bytes);
        for (size_t b = 0; b < c->cmp_bytes; b++) c->recv[b] = (unsigned char)~c->exp[b];
    }
    if (d->coll == BCAST && c->r == c->root) memcpy(c->recv, c->exp, c->cmp_bytes);
    if (d->coll == REDUCE && c->r != c->root) c->d.inplace = 0; /* MPI_IN_PLACE: the root's */
    if (c->d.inplace || d->coll == BCAST) {
        in = d->coll == ALLGATHER ? c->recv + (size_t)c->r * count * es : c->recv;
    } else {
        c->send_bytes = nin * es;
        c->send = guarded(c->send_bytes);
        in = c->send;
    }
    for (size_t i = 0; i < nin; i++) store(c->t, in, i, in_val(c, c->r, i));
    if (c->send != NULL) {
        c->send_copy = malloc(c->send_bytes + 1);
        memcpy(c->send_copy, c->send, c->send_bytes);
    }
    if (g_device) {
        c->dsend = device_copy(c->send, c->send_bytes);
        c->drecv = device_copy(c->recv, c->recv_bytes);
    }
    return c;
}

static int call_start(call_t *c)
{
    unsigned char *recv = g_device ? c->drecv : c->recv;
    const void *s = c->d.inplace ? MPI_IN_PLACE : g_device ? (const void *)c->dsend
                                                           : (const void *)c->send;
    const int count = (int)c->d.count;
    const MPI_Datatype dt = c->t->dt;
    const MPI_Op op = c->d.op >= 0 ? mpi_ops[c->d.op] : MPI_OP_NULL;

    switch (c->d.coll) {
    case ALLREDUCE: return MPI_Allreduce(s, recv, count, dt, op, c->comm);
    case IALLREDUCE: return MPI_Iallreduce(s, recv, count, dt, op, c->comm, &c->req);
    case RSB: return MPI_Reduce_scatter_block(s, recv, count, dt, op, c->comm);
    case ALLGATHER: return MPI_Allgather(s, count, dt, recv, count, dt, c->comm);
    case BCAST: return MPI_Bcast(recv, count, dt, c->root, c->comm);
    default: return MPI_Reduce(s, recv, count, dt, op, c->root, c->comm);
    }
}

static void describe(const call_t *c, char *out, size_t len)
{
    char root[16] = "-";

    if (c->d.coll == BCAST || c->d.coll == REDUCE) snprintf(root, sizeof(root), "%d", c->root);
    snprintf(out, len, "call %d: %s on %s (%d ranks) %s %s count %zu root %s%s%s%s", c->k,
             coll_names[c->d.coll], comm_names[c->d.comm], c->n, c->t->name,
             c->d.op >= 0 ? op_names[c->d.op] : "-", c->d.count, root,
             c->d.inplace ? " in place" : "", c->d.change >= 0 ? ", repeat with another " : "",
             c->d.change >= 0 ? change_names[c->d.change] : "");
}

/* The verdict on a completed call (rc: what its start and end returned); frees it. */
static void call_check(call_t *c, int rc)
{
    const size_t es = (size_t)c->t->size;
    char what[256] = "", got[48], want[48];
    long g;

    device_back(c->send, c->dsend, c->send_bytes);
    device_back(c->recv, c->drecv, c->recv_bytes);
    if (rc == MPI_SUCCESS) rc = c->rc;
    if (rc != MPI_SUCCESS) {
        snprintf(what, sizeof(what), "returned error %d", rc);
    } else if (c->recv != NULL && memcmp(c->recv, c->exp, c->cmp_bytes) != 0) {
        size_t i = 0;
        while (memcmp(c->recv + i * es, c->exp + i * es, es) == 0) i++;
        format(c->t, c->recv, i, got, sizeof(got));
        format(c->t, c->exp, i, want, sizeof(want));
        snprintf(what, sizeof(what), "element %zu is %s, expected %s", i, got, want);
    } else if (c->recv != NULL && (g = guard_hit(c->recv, c->recv_bytes)) != -1) {
        snprintf(what, sizeof(what), "receive buffer guard byte %ld (of %zu B) written", g,
                 c->recv_bytes);
    } else if (c->send != NULL && (g = guard_hit(c->send, c->send_bytes)) != -1) {
        snprintf(what, sizeof(what), "send buffer guard byte %ld written", g);
    } else if (c->send != NULL && memcmp(c->send, c->send_copy, c->send_bytes) != 0) {
        size_t i = 0;
        while (memcmp(c->send + i * es, c->send_copy + i * es, es) == 0) i++;
        snprintf(what, sizeof(what), "send buffer element %zu changed", i);
    }
    if (what[0] == '\0') {
        g_pass++;
    } else if (++g_fail <= MAXREPORT) {
        char desc[256];
        describe(c, desc, sizeof(desc));
        fprintf(stderr, "rank %d: FAIL (seed %llu) %s: %s\n", g_rank,
                (unsigned long long)g_seed, desc, what);
    }
    guarded_free(c->send);
    guarded_free(c->recv);
    free(c->exp);
    free(c->send_copy);
    free(c);
}

/* ---- calls in flight ------------------------------------------------------------------ */
static call_t *g_out[MAXOUT];
static int g_nout;
enum { W_ONE, W_ALL, W_ANY, W_POLL, W_PEEK, NWAYS };
static const char *way_names[NWAYS] = {"wait", "waitall", "waitany", "test polling",
                                       "test peek"};
static long g_ways[NWAYS];

static void out_done(int j, int rc)
{
    call_check(g_out[j], rc);
    g_out[j] = g_out[--g_nout];
}

/* Complete calls in flight, the way u says (u2: which one). */
static void complete(int way, uint64_t u2)
{
    MPI_Request reqs[MAXOUT];
    int j = (int)(u2 % (uint64_t)g_nout), flag = 0, rc;

    g_ways[way]++;
    for (int k = 0; k < g_nout; k++) reqs[k] = g_out[k]->req;
    switch (way) {
    case W_ONE: out_done(j, MPI_Wait(&g_out[j]->req, MPI_STATUS_IGNORE)); break;
    case W_ALL:
        rc = MPI_Waitall(g_nout, reqs, MPI_STATUSES_IGNORE);
        while (g_nout > 0) out_done(g_nout - 1, rc);
        break;
    case W_ANY:
        rc = MPI_Waitany(g_nout, reqs, &j, MPI_STATUS_IGNORE);
        if (j == MPI_UNDEFINED) j = 0; /* every one already completed by a peek */
        else g_out[j]->req = reqs[j];
        out_done(j, rc);
        break;
    case W_POLL:
        rc = MPI_SUCCESS;
        while (!flag && rc == MPI_SUCCESS) rc = MPI_Test(&g_out[j]->req, &flag, MPI_STATUS_IGNORE);
        out_done(j, rc);
        break;
    default: /* one test: if it completes the call, the call is checked when it is waited for */
        rc = MPI_Test(&g_out[j]->req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) g_out[j]->rc = rc;
        break;
    }
}

static int comm_size(MPI_Comm comm)
{
    int n;

    MPI_Comm_size(comm, &n);
    return n;
}

/* ---- the run ---------------------------------------------------------------------------- */
int main(int argc, char **argv)
{
    int opt, ncalls = 600, size;
    MPI_Comm comms[NCOMMS];
    desc_t prev, d;
    long ncoll[NCOLLS] = {0}, nchange[NCH] = {0}, ninplace = 0, nbig = 0, nzero = 0;
    long mine[2], tot[2] = {0, 0};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* the calls' buffers (up to a few MiB, allocated and freed per call) are
     * reused from the heap, not mapped afresh: zero pages faulted in 4 KiB at
     * a time were a fifth of the test's time */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    while ((opt = getopt(argc, argv, "s:n:dvq")) != -1) {
        switch (opt) {
        case 's': g_seed = strtoull(optarg, NULL, 0); break;
        case 'n': ncalls = atoi(optarg); break;
        case 'd': g_device = 1; break;
        case 'v': g_verbose = 1; break;
        case 'q': g_quiet = 1; break;
        default:
            if (g_rank == 0) fprintf(stderr, "usage: mix_check [-s SEED] [-n CALLS] [-d] [-v] [-q]\n");
            MPI_Finalize();
            return 2;
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
    mpi_ops[MAX] = MPI_MAX; mpi_ops[BXOR] = MPI_BXOR;
    types[0] = (ty_t){MPI_INT8_T, "int8", 1, 0, 1, INT_OPS};
    types[1] = (ty_t){MPI_INT32_T, "int32", 4, 0, 1, INT_OPS};
    types[2] = (ty_t){MPI_INT64_T, "int64", 8, 0, 1, INT_OPS};
    types[3] = (ty_t){MPI_UINT64_T, "uint64", 8, 0, 0, INT_OPS};
    types[4] = (ty_t){MPI_FLOAT, "float", 4, 1, 1, FLT_OPS};
    types[5] = (ty_t){MPI_DOUBLE, "double", 8, 2, 1, FLT_OPS};

    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    MPI_Comm_set_name(comms[1], "mix_dup");
    MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, size - g_rank, &comms[2]); /* reversed order */
    MPI_Comm_set_name(comms[2], "mix_split");
    for (int m = 0; m < NCOMMS; m++) MPI_Comm_set_errhandler(comms[m], MPI_ERRORS_RETURN);

    g_rng = g_seed;
    for (int k = 0; k < ncalls; k++) {
        uint64_t w = next(), w2 = next(); /* drawn every call: the ranks stay alike */
        call_t *c;
        int rc;

        draw(&d, k > 0 ? &prev : NULL);
        prev = d;
        if (g_nout > 0 && w % 4 == 0) complete((int)((w >> 8) % NWAYS), w2);
        if (d.coll == IALLREDUCE && g_nout == MAXOUT) complete(W_ONE, 0); /* the oldest */
        if (g_device && comm_size(comms[d.comm]) == 1) continue; /* after the draws */
        c = call_new(k, &d, comms[d.comm]);
        if (g_verbose && g_rank == 0) {
            char desc[256];
            describe(c, desc, sizeof(desc));
            printf("%s (%d in flight)\n", desc, g_nout);
            fflush(stdout);
        }
        ncoll[d.coll]++;
        if (d.change >= 0) nchange[d.change]++;
        ninplace += c->d.inplace;
        nzero += d.count == 0;
        nbig += d.count * (size_t)c->t->size >= (1u << 19);
        rc = call_start(c);
        if (d.coll == IALLREDUCE && rc == MPI_SUCCESS) g_out[g_nout++] = c;
        else call_check(c, rc);
    }
    if (g_nout > 0) complete(W_ALL, 0);

    /* the verdict through MPI_Gather (not a gpuring collective), before the communicators
     * go */
    mine[0] = g_pass;
    mine[1] = g_fail;
    test_verdict_sum(mine, tot, 2, MPI_COMM_WORLD);
    if (g_rank == 0 && !g_quiet) {
        printf("# seed %llu, %d calls on %d ranks (rank 0's view):", (unsigned long long)g_seed,
               ncalls, size);
        for (int k = 0; k < NCOLLS; k++) printf(" %s %ld", coll_names[k], ncoll[k]);
        printf(";\n#   repeats with another");
        for (int k = 0; k < NCH; k++) printf(" %s %ld", change_names[k], nchange[k]);
        printf("; in place %ld, count 0 %ld, 512 KiB+ %ld; completed by", ninplace, nzero, nbig);
        for (int k = 0; k < NWAYS; k++) printf(" %s %ld", way_names[k], g_ways[k]);
        printf("\n");
    }
    if (g_rank == 0) {
        if (tot[1] != 0) {
            printf("# FAILED: reproduce with mix_check -s %llu -n %d (-v lists the calls)\n",
                   (unsigned long long)g_seed, ncalls);
        }
        printf("%ld passed, %ld failed\n", tot[0], tot[1]);
    }
    MPI_Comm_free(&comms[1]);
    MPI_Comm_free(&comms[2]);
    MPI_Finalize();
    return g_fail != 0 || tot[1] != 0;
}
