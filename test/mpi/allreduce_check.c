/*
 * allreduce_check.c -- MPI-level correctness test for MPI_Allreduce.
 *
 * For every type x op (valid pairs) x count x (in-place or not) x communicator
 * kind, each rank fills its send buffer deterministically from
 * (seed, case, rank, index), so every rank can compute the result of ALL
 * ranks on its own.  The reference is written here (no MPI_Reduce_local):
 *   - integers: values are held in uint64_t (sign-extended for signed types)
 *     and combined with unsigned arithmetic, then truncated to the type's
 *     width: that is two's-complement wrap, i.e. what C gives for unsigned
 *     types.  SUM inputs of 8- and 16-bit types, signed ones too, span the
 *     whole type, so their sums wrap (C promotes them to int: no overflow;
 *     a saturating add fails).  For wider signed types the generated values
 *     never overflow (SUM magnitudes bounded by max/n, PROD magnitudes by the
 *     n-th root of max), so the implementation under test never hits
 *     signed-overflow UB.
 *     uint16 PROD uses 15-bit values (uint16*uint16 is promoted to int).
 *   - floats: SUM uses integers in [-8,8], PROD uses {1,2,0.5,-1}, MIN/MAX
 *     arbitrary finite values: every result is exact in any order, so the
 *     comparison is exact.
 * Before each call recvbuf is poisoned with the bitwise complement of the
 * expected value (so an element that is never written is always caught) and
 * is surrounded by guard elements that must stay untouched; buffers are
 * deliberately misaligned.  The send buffer must come back unchanged.
 *
 * The verdict is gathered with MPI_Gather (never with the MPI_Allreduce under
 * test).  Rank 0 prints `N passed, N failed`; the exit code is non-zero if
 * any case failed on any rank.
 *
 * Options:
 *   -c LIST   counts (default 0,1,2,3,7,17,31,64,1000,4099,65537)
 *   -t LIST   types or "all" (default all): schar uchar short ushort int uint
 *             long ulong longlong ulonglong int8 uint8 int16 uint16 int32
 *             uint32 int64 uint64 float double char aint offset count, bool
 *             (C's: the logical ops alone) byte (MPI_BYTE: the bitwise ops alone), and
 *             float16 where the MPI library names it (MPIX_C_FLOAT16: Open
 *             MPI 5) and the compiler has _Float16; and by name or as
 *             "fortran" (not in "all"), Fortran's where this Open MPI has
 *             them: finteger freal fdouble (DOUBLE PRECISION) flogical (the
 *             logical ops alone; finteger none of them) finteger8 freal8, and
 *             the sized finteger1 finteger2 finteger4 freal4 flogical1
 *             flogical2 flogical4 flogical8
 *   -o LIST   ops or "all" (default all): sum prod min max band bor bxor land
 *             lor lxor
 *   -i        also run every case in place (MPI_IN_PLACE)
 *   -I        only in place
 *   -B        non-blocking: every call is MPI_Iallreduce, then MPI_Wait (its
 *             status must not say cancelled)
 *   -m LIST   communicator kinds (default world): world, dup, half (split by
 *             rank%2, reversed key), rev (all ranks, reversed key), split
 *             (= half + rev)
 *   -L        large: add count 16777219 for (float,sum) and (int32,sum) only
 *   -x LIST   exclude type:op pairs (e.g. ulong:min,uchar:sum; type or op may
 *             be *); used by the driver to skip known bugs of the MPI library
 *             underneath when it tests that library alone
 *   -s SEED   seed (default 1)
 *   -r N      repeat the whole matrix N times (default 1)
 *   -q        quiet: mismatches and the final line only
 *   -d        device buffers: send and receive buffers (with their guards and
 *             misalignment) are cudaMalloc'd copies of the host ones, copied
 *             in (then cudaDeviceSynchronize) before and back after each
 *             call; the checks run on the copies.  Needs libcudart and a GPU
 *             (local rank i uses GPU i mod count); a rank that cannot set it
 *             up fails the run.  Communicators of one rank are skipped: they
 *             are the library's own (coll/self), which need not be
 *             CUDA-aware.
 *   -P        with -d: the device buffers come from the device's stream-ordered
 *             pool (cudaMallocAsync), which CUDA IPC cannot share
 *   -C        with -d: the device buffers come from a CUDA context of the
 *             program's own (cuCtxCreate, then cuMemAlloc; current for the rest
 *             of the run, as PyCUDA's make_context leaves it), which the device's
 *             primary context cannot reach
 *   -U        with -d: managed memory (cudaMallocManaged): the send buffer
 *             on every rank, the receive buffer on odd world ranks (even ones
 *             cudaMalloc: two kinds of memory of one GPU in one call on some
 *             ranks, one kind on others; for coll_gpuring_managed_buffers=1,
 *             which must run every such call on the device plane)
 *   -M        with -d: mixed memory kinds, device buffers on even world
 *             ranks and host buffers on odd ones (for
 *             coll_gpuring_agree_memory=1, which must hand every such call to
 *             the component below)
 *   -F PATH[:KIND]  fake device buffers, for machines without a GPU: load
 *             the stand-in CUDA driver at PATH (fake_cuda/libcuda.so.1) and
 *             have it call the (host) send and receive buffers KIND memory
 *             (device, managed, nogpu, senddev, rank0: see fake_cuda.h), so
 *             the component takes its device-buffer branch; the checks are
 *             the usual ones.  Also checks after every call that the calling
 *             thread's current CUDA context is the one it had before.
 *   -A        byte-misaligned buffers: world rank r's send buffer sits r % 4 bytes
 *             and its receive buffer (r + 1) % 4 bytes further on, so the size of
 *             every type wider than a byte fails to divide their addresses on
 *             most ranks (MPI does not ask for alignment; a GPU cannot access an
 *             element at such an address)
 *   -a BYTES  host buffers: every receive buffer (its first element) starts BYTES
 *             (0-4095) past a page; not with -A, -d, -F or -Z.  Where a copy into it runs
 *             against its source matters to gpuring (kernels/reduce.h): a NET
 *             step lands in the output only where UCX's copy from a slot runs
 *             fast (the driver's zcopy cases)
 *   -Z        signed zeros: for each communicator, float and double MIN and
 *             MAX (those selected) on inputs that are +0.0 or -0.0, per rank
 *             and element, at every count: MPI does not say which zero wins,
 *             but every rank must get the same bits (results gathered to the
 *             communicator's rank 0 and compared).  Cases marked "zeros".
 */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/cuda_dl.h"
#include "test/mpi/fake_cuda.h"
#include "test/mpi/type_op_list.h"
#include "test/mpi_verdict.h"

/* fp16: MPI's name for it is an extension (Open MPI 5's shortfloat) */
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif
#if defined(MPIX_C_FLOAT16) && defined(__FLT16_MAX__)
#define TEST_FLOAT16 1
#endif

#define MAX_LIST 64
#define GUARD 3 /* guard elements before and after recvbuf (misaligns it) */
#define SEND_OFF 1 /* sendbuf misalignment, in elements */
#define GUARD_BYTE 0xA5
#define MAX_PRINT_PER_CASE 4
#define MAX_PRINT_TOTAL 60
#define CASE_NOT_RUN 2    /* a case this rank did not run (fail[]) */
#define LARGE_COUNT (16777216 + 3)

typedef struct {
    const char *name;
    MPI_Datatype dt;
    int size;
    int is_signed;
    int is_float;
    int family; /* the ops MPI defines on it: FAMILY_FINTEGER no logical ones,
                 * FAMILY_LOGICAL (Fortran's LOGICAL, C's bool) only those,
                 * FAMILY_BYTE (MPI_BYTE) only the bitwise ones */
} type_t;

enum { FAMILY_PLAIN, FAMILY_FINTEGER, FAMILY_FREAL, FAMILY_LOGICAL, FAMILY_BYTE };

enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_BAND, OP_BOR, OP_BXOR, OP_LAND, OP_LOR, OP_LXOR, OP_N };

typedef struct {
    const char *name;
    MPI_Op op;
    int int_only;
} op_t;

typedef struct {
    const char *name;
    MPI_Comm comm;
} comm_kind_t;

#define MAX_TYPES 48
static type_t g_types[MAX_TYPES];
static int g_ntypes, g_nctypes; /* types; the C ones (the first g_nctypes) */
static op_t g_ops[OP_N];
static int g_world_rank, g_world_size;
static int g_printed;
static int g_quiet;
static int g_nonblocking; /* -B */
static double g_pow2[61];  /* 2^e for gen_float's MIN/MAX exponents, e in [-30, 30] */

/* The call under test: MPI_Allreduce, or (-B) MPI_Iallreduce and MPI_Wait, whose
 * status must not say the call was cancelled (a collective never is); a successful
 * call leaves no CUDA error pending on this thread. */
static long g_calls_shared; /* allreduce()'s calls of count > 0 on communicators of 2+ ranks */

static int allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                     MPI_Comm comm)
{
    MPI_Request req;
    MPI_Status st;
    int rc, cancelled = 1, err;

    MPI_Comm_size(comm, &err);
    if (err > 1 && count > 0) g_calls_shared++;
    if (!g_nonblocking) {
        rc = MPI_Allreduce(sendbuf, recvbuf, count, dt, op, comm);
    } else {
        rc = MPI_Iallreduce(sendbuf, recvbuf, count, dt, op, comm, &req);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, &st);
        if (rc == MPI_SUCCESS && (MPI_Test_cancelled(&st, &cancelled), cancelled)) {
            fprintf(stderr, "rank %d: MPI_Test_cancelled says the MPI_Iallreduce was cancelled "
                    "(the status from MPI_Wait)\n", g_world_rank);
            rc = MPI_ERR_OTHER;
        }
    }
    if (rc == MPI_SUCCESS && (err = test_cuda_pending_error()) != 0) {
        fprintf(stderr, "rank %d: the call returned MPI_SUCCESS and left CUDA error %d (%s) "
                "for the application's next cudaGetLastError\n", g_world_rank, err,
                cu.error_string(err));
        rc = MPI_ERR_OTHER;
    }
    return rc;
}

/* One more type in the table (a full one aborts the job: never a write past it). */
static void type_add(type_t t)
{
    if (g_ntypes == MAX_TYPES) {
        fprintf(stderr, "allreduce_check: more than %d types\n", MAX_TYPES);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    g_types[g_ntypes++] = t;
}

static void init_tables(void)
{
    g_pow2[30] = 1.0;
    for (int e = 1; e <= 30; e++) {
        g_pow2[30 + e] = g_pow2[29 + e] * 2.0;
        g_pow2[30 - e] = g_pow2[31 - e] * 0.5;
    }
#define T(n, d, s, sg, f) type_add((type_t){n, d, s, sg, f, FAMILY_PLAIN})
    T("schar", MPI_SIGNED_CHAR, sizeof(signed char), 1, 0);
    T("uchar", MPI_UNSIGNED_CHAR, sizeof(unsigned char), 0, 0);
    T("short", MPI_SHORT, sizeof(short), 1, 0);
    T("ushort", MPI_UNSIGNED_SHORT, sizeof(unsigned short), 0, 0);
    T("int", MPI_INT, sizeof(int), 1, 0);
    T("uint", MPI_UNSIGNED, sizeof(unsigned), 0, 0);
    T("long", MPI_LONG, sizeof(long), 1, 0);
    T("ulong", MPI_UNSIGNED_LONG, sizeof(unsigned long), 0, 0);
    T("longlong", MPI_LONG_LONG, sizeof(long long), 1, 0);
    T("ulonglong", MPI_UNSIGNED_LONG_LONG, sizeof(unsigned long long), 0, 0);
    T("int8", MPI_INT8_T, 1, 1, 0);
    T("uint8", MPI_UINT8_T, 1, 0, 0);
    T("int16", MPI_INT16_T, 2, 1, 0);
    T("uint16", MPI_UINT16_T, 2, 0, 0);
    T("int32", MPI_INT32_T, 4, 1, 0);
    T("uint32", MPI_UINT32_T, 4, 0, 0);
    T("int64", MPI_INT64_T, 8, 1, 0);
    T("uint64", MPI_UINT64_T, 8, 0, 0);
    T("float", MPI_FLOAT, sizeof(float), 1, 1);
    T("double", MPI_DOUBLE, sizeof(double), 1, 1);
#ifdef TEST_FLOAT16
    T("float16", MPIX_C_FLOAT16, 2, 1, 1);
#endif
    /* char: signed in Open MPI's ops whatever the platform's char (unsigned on
     * aarch64); and MPI's address-sized integers */
    T("char", MPI_CHAR, sizeof(char), 1, 0);
    T("aint", MPI_AINT, sizeof(MPI_Aint), 1, 0);
    T("offset", MPI_OFFSET, sizeof(MPI_Offset), 1, 0);
    T("count", MPI_COUNT, sizeof(MPI_Count), 1, 0);
#undef T
    /* C's bool (the logical ops alone, values 0 and 1) and MPI_BYTE (the bitwise ones) */
    type_add((type_t){"bool", MPI_C_BOOL, sizeof(_Bool), 0, 0, FAMILY_LOGICAL});
    type_add((type_t){"byte", MPI_BYTE, 1, 0, 0, FAMILY_BYTE});
    /* Fortran's, by their sizes in this Open MPI's Fortran (none where it has none);
     * named with -t only, not by "all" */
    g_nctypes = g_ntypes;
    {
        const struct { const char *name; MPI_Datatype dt; int family; } f[] = {
            {"finteger", MPI_INTEGER, FAMILY_FINTEGER},
            {"freal", MPI_REAL, FAMILY_FREAL},
            {"fdouble", MPI_DOUBLE_PRECISION, FAMILY_FREAL},
            {"flogical", MPI_LOGICAL, FAMILY_LOGICAL},
#ifdef MPI_INTEGER8
            {"finteger8", MPI_INTEGER8, FAMILY_FINTEGER},
#endif
#ifdef MPI_REAL8
            {"freal8", MPI_REAL8, FAMILY_FREAL},
#endif
            /* the sized ones (Fortran's INTEGER*1 ...; size 0 where its compiler
             * has none) */
#ifdef MPI_INTEGER1
            {"finteger1", MPI_INTEGER1, FAMILY_FINTEGER},
            {"finteger2", MPI_INTEGER2, FAMILY_FINTEGER},
            {"finteger4", MPI_INTEGER4, FAMILY_FINTEGER},
            {"freal4", MPI_REAL4, FAMILY_FREAL},
#endif
#ifdef MPI_LOGICAL1
            {"flogical1", MPI_LOGICAL1, FAMILY_LOGICAL},
            {"flogical2", MPI_LOGICAL2, FAMILY_LOGICAL},
            {"flogical4", MPI_LOGICAL4, FAMILY_LOGICAL},
            {"flogical8", MPI_LOGICAL8, FAMILY_LOGICAL},
#endif
        };
        for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++) {
            int size = 0;
            MPI_Type_size(f[k].dt, &size);
            if (size != 1 && size != 2 && size != 4 && size != 8) continue;
            if (f[k].family == FAMILY_FREAL && size != 4 && size != 8) continue;
            type_add((type_t){f[k].name, f[k].dt, size, 1, f[k].family == FAMILY_FREAL,
                              f[k].family});
        }
    }
    g_ops[OP_SUM] = (op_t){"sum", MPI_SUM, 0};
    g_ops[OP_PROD] = (op_t){"prod", MPI_PROD, 0};
    g_ops[OP_MIN] = (op_t){"min", MPI_MIN, 0};
    g_ops[OP_MAX] = (op_t){"max", MPI_MAX, 0};
    g_ops[OP_BAND] = (op_t){"band", MPI_BAND, 1};
    g_ops[OP_BOR] = (op_t){"bor", MPI_BOR, 1};
    g_ops[OP_BXOR] = (op_t){"bxor", MPI_BXOR, 1};
    g_ops[OP_LAND] = (op_t){"land", MPI_LAND, 1};
    g_ops[OP_LOR] = (op_t){"lor", MPI_LOR, 1};
    g_ops[OP_LXOR] = (op_t){"lxor", MPI_LXOR, 1};
}

/* ---- deterministic values ------------------------------------------------ */

static inline uint64_t mix64(uint64_t x)
{ /* splitmix64 finalizer */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Element i of the rank whose values start from rank_base: a Weyl step per
 * index, then a xorshift-multiply finalizer.  One multiply, where mix64 takes
 * two: every rank generates every rank's values (n per element per case), so
 * this is most of the test's own time at large counts. */
static inline uint64_t elem_hash(uint64_t rank_base, size_t i)
{
    uint64_t x = rank_base + (uint64_t)i * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 32)) * 0xD6E8FEB86659FD93ull;
    return x ^ (x >> 32);
}

/* a second value from the first, where an op needs more bits (one multiply) */
static inline uint64_t rehash(uint64_t h)
{
    uint64_t x = (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 32);
}

/* h scaled onto [0, m): the high half of h * m (no division) */
static inline uint64_t scale(uint64_t h, uint64_t m)
{
    return (uint64_t)(((unsigned __int128)h * m) >> 64);
}

static inline uint64_t width_mask(int size)
{
    return size >= 8 ? ~0ull : ((1ull << (8 * size)) - 1);
}

/* sign- or zero-extend the low `size` bytes of v */
static inline uint64_t extend(uint64_t v, const type_t *t)
{
    if (t->size >= 8) return v;
    v &= width_mask(t->size);
    if (t->is_signed && (v >> (8 * t->size - 1)) & 1) v |= ~width_mask(t->size);
    return v;
}

/* per-case parameters for integer generation */
typedef struct {
    uint64_t sum_lim;  /* signed SUM: |v| <= sum_lim */
    uint64_t prod_mag; /* signed PROD: |v| <= prod_mag */
} gen_param_t;

/* 1 if c^n <= lim */
static int pow_fits(uint64_t c, int n, uint64_t lim)
{
    uint64_t acc = 1;
    for (int k = 0; k < n; k++) {
        if (acc > lim / c) return 0;
        acc *= c;
    }
    return 1;
}

static gen_param_t gen_params(const type_t *t, int n)
{
    gen_param_t p;
    uint64_t smax = (t->size >= 8) ? (uint64_t)INT64_MAX : ((1ull << (8 * t->size - 1)) - 1);
    p.sum_lim = smax / (uint64_t)(n > 0 ? n : 1);
    /* largest m (capped at 2^20) with m^n <= smax */
    uint64_t lo = 1, hi = 1ull << 20; /* invariant: lo fits */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (pow_fits(mid, n, smax)) lo = mid;
        else hi = mid - 1;
    }
    uint64_t m = lo;
    p.prod_mag = m;
    return p;
}

/* a non-zero value for the logical ops; sometimes with a zero low byte, to
 * catch an implementation that tests the wrong width */
static inline uint64_t logical_nonzero(const type_t *t, uint64_t h, uint64_t h2)
{
    uint64_t v = extend(h, t);
    if (t->size > 1 && ((h2 >> 8) & 3) == 0) v &= ~0xffull;
    return v ? v : 1;
}

/* integer value (sign-extended to 64 bits for signed types); inlined into
 * values_op(), where the op is a constant and the switch folds away */
static inline __attribute__((always_inline)) uint64_t gen_int(const type_t *t, int op,
                                                              const gen_param_t *p, uint64_t h)
{
    uint64_t h2, v;
    switch (op) {
    case OP_SUM:
        if (t->is_signed && t->size > 2) /* in [-lim, lim], two's complement */
            return scale(h, 2 * p->sum_lim + 1) - p->sum_lim;
        return extend(h, t); /* any value: sums wrap (8 and 16 bits signed too) */
    case OP_PROD:
        h2 = rehash(h);
        if (t->is_signed) {
            if ((h2 & 63) == 0) return 0; /* an occasional zero */
            v = 1 + scale(h, p->prod_mag);
            return (h2 & 64) ? (uint64_t)(-(int64_t)v) : v;
        }
        v = h & width_mask(t->size);
        if ((h2 & 7) != 0) v |= 1; /* mostly odd, so products stay non-zero */
        if (t->size == 2) v &= 0x7fff; /* uint16*uint16 promotes to int */
        return v;
    case OP_MIN:
    case OP_MAX:
    case OP_BXOR:
        return extend(h, t);
    case OP_BAND:
        return extend(h | rehash(h), t); /* dense bits */
    case OP_BOR:
        h2 = rehash(h);
        return extend(h & h2 & rehash(h2), t); /* sparse bits */
    case OP_LAND: /* mostly non-zero */
        h2 = rehash(h);
        if (h2 % 4 == 0) return 0;
        return logical_nonzero(t, h, h2);
    case OP_LOR: /* mostly zero */
        h2 = rehash(h);
        if (h2 % 4 != 0) return 0;
        return logical_nonzero(t, h, h2);
    case OP_LXOR:
        h2 = rehash(h);
        if (h2 & 1) return 0;
        return logical_nonzero(t, h, h2);
    }
    return 0;
}

static inline __attribute__((always_inline)) double gen_float(const type_t *t, int op, uint64_t h)
{
    static const double prodv[4] = {1.0, 2.0, 0.5, -1.0};
    switch (op) {
    case OP_SUM:
        return (double)((int)(h % 17) - 8);
    case OP_PROD:
        return prodv[h & 3];
    default: { /* MIN / MAX: any finite value exactly representable in the type
                * (float16: 10 mantissa bits, normal exponents) */
        const int half = t->size == 2;
        double mant = half ? 1.0 + (double)((h >> 8) & 0x3ff) / (double)(1 << 10)
                           : 1.0 + (double)((h >> 8) & 0xfffff) / (double)(1 << 20);
        int e = half ? (int)((h >> 32) % 29) - 14 : (int)((h >> 32) % 61) - 30;
        double v = mant * g_pow2[e + 30];
        return (h & 1) ? -v : v;
    }
    }
}

/* ---- typed memory access (unaligned-safe) -------------------------------- */

static inline uint64_t load_int(const void *p, const type_t *t)
{
    uint64_t v = 0;
    switch (t->size) {
    case 1: { uint8_t x; memcpy(&x, p, 1); v = x; break; }
    case 2: { uint16_t x; memcpy(&x, p, 2); v = x; break; }
    case 4: { uint32_t x; memcpy(&x, p, 4); v = x; break; }
    default: { uint64_t x; memcpy(&x, p, 8); v = x; break; }
    }
    return extend(v, t);
}

static inline void store_int(void *p, const type_t *t, uint64_t v)
{
    switch (t->size) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

static inline double load_flt(const void *p, const type_t *t)
{
#ifdef TEST_FLOAT16
    if (t->size == 2) { _Float16 h; memcpy(&h, p, sizeof h); return (double)h; }
#endif
    if (t->size == sizeof(float)) { float f; memcpy(&f, p, sizeof f); return f; }
    double d; memcpy(&d, p, sizeof d); return d;
}

static inline void store_flt(void *p, const type_t *t, double v)
{
#ifdef TEST_FLOAT16
    if (t->size == 2) { _Float16 h = (_Float16)v; memcpy(p, &h, sizeof h); return; }
#endif
    if (t->size == sizeof(float)) { float f = (float)v; memcpy(p, &f, sizeof f); }
    else memcpy(p, &v, sizeof v);
}

/* ---- reference ------------------------------------------------------------ */

static inline uint64_t fold_int(const type_t *t, int op, uint64_t a, uint64_t b)
{
    switch (op) {
    case OP_SUM: return extend(a + b, t);
    case OP_PROD: return extend(a * b, t);
    case OP_MIN:
        if (t->is_signed) return (int64_t)a < (int64_t)b ? a : b;
        return a < b ? a : b;
    case OP_MAX:
        if (t->is_signed) return (int64_t)a > (int64_t)b ? a : b;
        return a > b ? a : b;
    case OP_BAND: return a & b;
    case OP_BOR: return a | b;
    case OP_BXOR: return a ^ b;
    case OP_LAND: return (a != 0) && (b != 0);
    case OP_LOR: return (a != 0) || (b != 0);
    case OP_LXOR: return (a != 0) != (b != 0);
    }
    return 0;
}

static inline double fold_flt(int op, double a, double b)
{
    switch (op) {
    case OP_SUM: return a + b;
    case OP_PROD: return a * b;
    case OP_MIN: return a < b ? a : b;
    case OP_MAX: return a > b ? a : b;
    }
    return 0;
}

/* Note for the logical ops: with one rank the result is the input itself
 * (nothing is combined, so nothing is normalized to 0/1), which is what the
 * reference below gives too. */

/* out[i] = v_0[i] op v_1[i] op ... op v_{n-1}[i], where rank r's values
 * start from bases[r]: one rank's values are its send buffer, every rank's
 * the reference.  Inlined into values() once per type and op, constants there
 * (the type's fields and the generator's parameters are copies, which the
 * stores through `out` cannot alias), so the loop carries no per-element
 * dispatch on either: most of the test's own time is here. */
static inline __attribute__((always_inline)) void values_op(char *out, int size, int is_signed,
                                                            int is_float, int op,
                                                            const gen_param_t *gp,
                                                            const uint64_t *bases, int n,
                                                            size_t count)
{
    const type_t k = {.size = size, .is_signed = is_signed, .is_float = is_float};
    const gen_param_t g = *gp;
    for (size_t i = 0; i < count; i++) {
        if (is_float) {
            double acc = gen_float(&k, op, elem_hash(bases[0], i));
            for (int r = 1; r < n; r++)
                acc = fold_flt(op, acc, gen_float(&k, op, elem_hash(bases[r], i)));
            store_flt(out + i * size, &k, acc);
        } else {
            uint64_t acc = gen_int(&k, op, &g, elem_hash(bases[0], i));
            for (int r = 1; r < n; r++)
                acc = fold_int(&k, op, acc, gen_int(&k, op, &g, elem_hash(bases[r], i)));
            store_int(out + i * size, &k, acc);
        }
    }
}

/* values_op for each op, the type's kind a constant; floating-point types
 * take the arithmetic ops alone */
static inline __attribute__((always_inline)) void values_kind(char *out, int size, int is_signed,
                                                              int is_float, int op,
                                                              const gen_param_t *gp,
                                                              const uint64_t *bases, int n,
                                                              size_t count)
{
#define VALUES_OP(o) values_op(out, size, is_signed, is_float, o, gp, bases, n, count)
    switch (op) {
    case OP_SUM: VALUES_OP(OP_SUM); return;
    case OP_PROD: VALUES_OP(OP_PROD); return;
    case OP_MIN: VALUES_OP(OP_MIN); return;
    case OP_MAX: VALUES_OP(OP_MAX); return;
    }
    if (is_float) return;
    switch (op) {
    case OP_BAND: VALUES_OP(OP_BAND); return;
    case OP_BOR: VALUES_OP(OP_BOR); return;
    case OP_BXOR: VALUES_OP(OP_BXOR); return;
    case OP_LAND: VALUES_OP(OP_LAND); return;
    case OP_LOR: VALUES_OP(OP_LOR); return;
    case OP_LXOR: VALUES_OP(OP_LXOR); return;
    }
#undef VALUES_OP
}

static void values_kinds(void *out, const type_t *t, int op, const gen_param_t *gp,
                         const uint64_t *bases, int n, size_t count);

static void values(void *out, const type_t *t, int op, const gen_param_t *gp,
                   const uint64_t *bases, int n, size_t count)
{
    values_kinds(out, t, op, gp, bases, n, count);
    /* a C bool holds 0 or 1 (another byte is no bool: an op on it is undefined); the
     * logical ops' results depend on their operands being non-zero alone */
    if (t->dt == MPI_C_BOOL) {
        for (size_t i = 0; i < count; i++) ((unsigned char *)out)[i] = ((unsigned char *)out)[i] != 0;
    }
}

static void values_kinds(void *out, const type_t *t, int op, const gen_param_t *gp,
                         const uint64_t *bases, int n, size_t count)
{
    if (t->is_float) {
        switch (t->size) {
        case 2: values_kind(out, 2, 1, 1, op, gp, bases, n, count); return;
        case 4: values_kind(out, 4, 1, 1, op, gp, bases, n, count); return;
        default: values_kind(out, 8, 1, 1, op, gp, bases, n, count); return;
        }
    }
    switch (t->size * 2 + !!t->is_signed) {
    case 2: values_kind(out, 1, 0, 0, op, gp, bases, n, count); return;
    case 3: values_kind(out, 1, 1, 0, op, gp, bases, n, count); return;
    case 4: values_kind(out, 2, 0, 0, op, gp, bases, n, count); return;
    case 5: values_kind(out, 2, 1, 0, op, gp, bases, n, count); return;
    case 8: values_kind(out, 4, 0, 0, op, gp, bases, n, count); return;
    case 9: values_kind(out, 4, 1, 0, op, gp, bases, n, count); return;
    case 17: values_kind(out, 8, 1, 0, op, gp, bases, n, count); return;
    default: values_kind(out, 8, 0, 0, op, gp, bases, n, count); return;
    }
}

/* the send buffer of the rank whose values start from rank_base */
static void fill_send(void *buf, const type_t *t, int op, const gen_param_t *gp,
                      uint64_t rank_base, size_t count)
{
    values(buf, t, op, gp, &rank_base, 1, count);
}

static uint64_t rank_base_of(uint64_t case_base, int r)
{
    return mix64(case_base ^ (0xA24BAED4963EE407ull * (uint64_t)(r + 1)));
}

/* the reference: every rank's values combined; bases holds n entries */
static void compute_expected(void *exp, const type_t *t, int op, const gen_param_t *gp,
                             uint64_t case_base, int n, size_t count, uint64_t *bases)
{
    for (int r = 0; r < n; r++) bases[r] = rank_base_of(case_base, r);
    values(exp, t, op, gp, bases, n, count);
}

/* dst = the bitwise complement of src, n bytes (a word at a time) */
static void complement(char *dst, const char *src, size_t n)
{
    size_t b = 0;
    for (; b + 8 <= n; b += 8) {
        uint64_t w;
        memcpy(&w, src + b, 8);
        w = ~w;
        memcpy(dst + b, &w, 8);
    }
    for (; b < n; b++) dst[b] = (char)~src[b];
}

/* ---- reporting ------------------------------------------------------------ */

static void fmt_val(char *s, size_t len, const void *p, const type_t *t)
{
    if (t->is_float) {
        snprintf(s, len, "%.9g", load_flt(p, t));
    } else {
        uint64_t v = load_int(p, t);
        if (t->is_signed) snprintf(s, len, "%lld (0x%llx)", (long long)(int64_t)v, (unsigned long long)(v & width_mask(t->size)));
        else snprintf(s, len, "%llu (0x%llx)", (unsigned long long)v, (unsigned long long)v);
    }
}

static int elem_equal(const void *a, const void *b, const type_t *t)
{
    if (t->is_float) return load_flt(a, t) == load_flt(b, t);
    return memcmp(a, b, t->size) == 0;
}

/* ---- option parsing ------------------------------------------------------- */

static int split_list(char *s, char **out, int max)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ",")) out[n++] = tok;
    return n;
}

static void usage(void)
{
    if (g_world_rank == 0)
        fprintf(stderr, "usage: allreduce_check [-c counts] [-t types|all] [-o ops|all] [-i] [-I] "
                        "[-m world,dup,half,rev,split] [-L] [-s seed] [-r reps] [-q] [-d [-P | -C | -U] [-M]] [-F path[:kind]] [-A | -a bytes] [-Z] [-N]\n");
}

typedef struct {
    int comm, type, op, inplace; /* inplace 2: a -Z (signed zeros) case */
    size_t count;
} case_desc_t;

/*
 * -Z, one case: inputs +0.0 / -0.0 from (seed, rank, index); the result must
 * be a zero, and the same bits on every rank of comm.  buf/dbuf: at least
 * count elements (dbuf: the device copy, or NULL).  1 if it failed here.
 */
static int zeros_case(MPI_Comm comm, const char *cname, const type_t *t, int oi, size_t count,
                      uint64_t seed, char *buf, char *dbuf)
{
    const size_t es = (size_t)t->size, bytes = count * es;
    int crank, csize, rc, failed = 0;
    char *all = NULL;

    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    for (size_t i = 0; i < count; i++)
        store_flt(buf + i * es, t, (elem_hash(mix64(seed ^ (uint64_t)crank), i) & 1) ? -0.0 : 0.0);
    if (dbuf != NULL) {
        cu.memcpy_(dbuf, buf, bytes, TEST_CUDA_H2D);
        cu.sync();
    }
    rc = MPI_Allreduce(MPI_IN_PLACE, dbuf != NULL ? dbuf : buf, (int)count, t->dt, g_ops[oi].op,
                       comm);
    if (dbuf != NULL && cu.memcpy_(buf, dbuf, bytes, TEST_CUDA_D2H) != 0) {
        fprintf(stderr, "rank %d: cudaMemcpy back failed (a fault in the allreduce?)\n",
                g_world_rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "FAILED zeros rank %d comm %s type %s op %s count %zu: MPI_Allreduce "
                "returned %d\n", g_world_rank, cname, t->name, g_ops[oi].name, count, rc);
        failed = 1;
    }
    for (size_t i = 0; i < count && !failed; i++) {
        if (load_flt(buf + i * es, t) != 0.0) {
            fprintf(stderr, "MISMATCH zeros rank %d comm %s type %s op %s count %zu index %zu: "
                    "not a zero\n", g_world_rank, cname, t->name, g_ops[oi].name, count, i);
            failed = 1;
        }
    }
    if (crank == 0) all = malloc(bytes * (size_t)csize + 1);
    MPI_Gather(buf, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, 0, comm);
    if (crank == 0) {
        for (int r = 1; r < csize && !failed; r++) {
            if (memcmp(all, all + (size_t)r * bytes, bytes) != 0) {
                fprintf(stderr, "MISMATCH zeros comm %s type %s op %s count %zu: rank %d's "
                        "zeros differ from rank 0's\n", cname, t->name, g_ops[oi].name, count,
                        r);
                failed = 1;
            }
        }
        free(all);
    }
    return failed;
}

static test_type_op_list_t g_excl; /* -x */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world_size);
    init_tables();

    size_t counts[MAX_LIST];
    int ncounts = 0;
    int type_sel[MAX_TYPES] = {0}, op_sel[OP_N] = {0};
    int any_type = 0, any_op = 0;
    int inplace_mode = 0; /* 0: not in place, 1: both, 2: in place only */
    int zeros = 0;        /* -Z */
    int negative = 0;     /* -N */
    size_t shift_send = 0, shift_recv = 0; /* -A: bytes off the element grid */
    int recv_page = -1;                       /* -a: where in a page recvbuf starts */
    const char *recv_page_arg = NULL;
    int large = 0, reps = 1;
    uint64_t seed = 1;
    int want_world = 0, want_dup = 0, want_half = 0, want_rev = 0;
    int bad = 0, opt, device = 0, mem = TEST_CUDA_MALLOC, mixed = 0;
    char *fake_spec = NULL; /* -F */

    while ((opt = getopt(argc, argv, "c:t:o:iIBm:Lx:s:r:qdPCUMF:ZNAa:h")) != -1) {
        char *list[MAX_LIST];
        int n;
        switch (opt) {
        case 'c':
            n = split_list(optarg, list, MAX_LIST);
            for (int k = 0; k < n; k++) counts[ncounts++] = (size_t)strtoull(list[k], NULL, 0);
            break;
        case 't':
            n = split_list(optarg, list, MAX_LIST);
            for (int k = 0; k < n; k++) {
                int found = 0;
                for (int j = 0; j < g_ntypes; j++)
                    if ((!strcmp(list[k], "all") && j < g_nctypes) || !strcmp(list[k], g_types[j].name) ||
                        (!strcmp(list[k], "fortran") && j >= g_nctypes))
                        type_sel[j] = found = 1;
                if (!strcmp(list[k], "fortran")) found = 1; /* (none where Open MPI has no Fortran) */
                if (!found) { if (!g_world_rank) fprintf(stderr, "unknown type %s\n", list[k]); bad = 1; }
            }
            any_type = 1;
            break;
        case 'o':
            n = split_list(optarg, list, MAX_LIST);
            for (int k = 0; k < n; k++) {
                int found = 0;
                for (int j = 0; j < OP_N; j++)
                    if (!strcmp(list[k], "all") || !strcmp(list[k], g_ops[j].name)) op_sel[j] = found = 1;
                if (!found) { if (!g_world_rank) fprintf(stderr, "unknown op %s\n", list[k]); bad = 1; }
            }
            any_op = 1;
            break;
        case 'i': inplace_mode = 1; break;
        case 'I': inplace_mode = 2; break;
        case 'B': g_nonblocking = 1; break;
        case 'm':
            n = split_list(optarg, list, MAX_LIST);
            for (int k = 0; k < n; k++) {
                if (!strcmp(list[k], "world")) want_world = 1;
                else if (!strcmp(list[k], "dup")) want_dup = 1;
                else if (!strcmp(list[k], "half")) want_half = 1;
                else if (!strcmp(list[k], "rev")) want_rev = 1;
                else if (!strcmp(list[k], "split")) want_half = want_rev = 1;
                else { if (!g_world_rank) fprintf(stderr, "unknown comm kind %s\n", list[k]); bad = 1; }
            }
            break;
        case 'L': large = 1; break;
        case 'Z': zeros = 1; break;
        case 'A':
            shift_send = (size_t)g_world_rank % 4;
            shift_recv = (size_t)(g_world_rank + 1) % 4;
            break;
        case 'N': negative = 1; break;
        case 'a': recv_page_arg = optarg; break;
        case 'x':
            if (test_type_op_list_add(&g_excl, optarg, g_world_rank == 0) != 0) bad = 1;
            break;
        case 's': seed = strtoull(optarg, NULL, 0); break;
        case 'r': reps = atoi(optarg); break;
        case 'q': g_quiet = 1; break;
        case 'd': device = 1; break;
        case 'P': mem = TEST_CUDA_POOL; break;
        case 'C': mem = TEST_CUDA_OWN_CTX; break;
        case 'U': mem = TEST_CUDA_MANAGED; break;
        case 'M': mixed = 1; break;
        case 'F': fake_spec = optarg; break;
        default: bad = 1; break;
        }
    }
    if (recv_page_arg != NULL) {
        char *end;
        long v = strtol(recv_page_arg, &end, 10);
        recv_page = (int)v;
        if (*end != '\0' || v < 0 || v >= 4096 || device || fake_spec != NULL || zeros ||
            (shift_send | shift_recv) != 0)
            bad = 1;
    }
    if (bad) {
        usage();
        MPI_Finalize();
        return 2;
    }
    if (!ncounts) {
        static const size_t dflt[] = {0, 1, 2, 3, 7, 17, 31, 64, 1000, 4099, 65537};
        for (size_t k = 0; k < sizeof dflt / sizeof dflt[0]; k++) counts[ncounts++] = dflt[k];
    }
    if (large && ncounts < MAX_LIST) counts[ncounts++] = LARGE_COUNT;
    if (!any_type) for (int j = 0; j < g_nctypes; j++) type_sel[j] = 1;
    if (!any_op) for (int j = 0; j < OP_N; j++) op_sel[j] = 1;
    if (!(want_world | want_dup | want_half | want_rev)) want_world = 1;

    /* communicators */
    comm_kind_t comms[4];
    int ncomms = 0;
    if (want_world) comms[ncomms++] = (comm_kind_t){"world", MPI_COMM_WORLD};
    if (want_dup) {
        comms[ncomms].name = "dup";
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[ncomms++].comm);
    }
    if (want_half) { /* two halves by parity, ranks in reverse order inside */
        comms[ncomms].name = "half";
        MPI_Comm_split(MPI_COMM_WORLD, g_world_rank % 2, g_world_size - g_world_rank, &comms[ncomms++].comm);
    }
    if (want_rev) { /* everyone, rank order reversed */
        comms[ncomms].name = "rev";
        MPI_Comm_split(MPI_COMM_WORLD, 0, g_world_size - g_world_rank, &comms[ncomms++].comm);
    }
    for (int c = 0; c < ncomms; c++) MPI_Comm_set_errhandler(comms[c].comm, MPI_ERRORS_RETURN);

    /* enumerate cases: identical on every rank (every rank is in every kind) */
    size_t ncases_max = (size_t)reps * ncomms * g_ntypes * OP_N * ncounts * 3 + 1;
    /* per case: 0 passed here, 1 failed, CASE_NOT_RUN (a one-rank communicator's in
     * device mode: a case no rank ran is no pass) */
    unsigned char *fail = calloc(ncases_max, 1);
    case_desc_t *desc = calloc(ncases_max, sizeof *desc);
    size_t ncases = 0, nexcluded = 0;
    size_t maxcount = 0;
    for (int k = 0; k < ncounts; k++) if (counts[k] > maxcount) maxcount = counts[k];
    size_t maxbytes = (maxcount + 2 * GUARD + 8) * 8;
    char *sendraw = malloc(maxbytes), *recvraw = NULL, *expbuf = malloc(maxbytes);
    if (recv_page < 0) {
        recvraw = malloc(maxbytes);
    } else if (posix_memalign((void **)&recvraw, 4096, maxbytes + 4096) != 0) {
        recvraw = NULL;
    }
    char *sentbuf = malloc(maxbytes); /* what the send buffer held before the call */
    uint64_t *bases = malloc(sizeof(*bases) * (size_t)g_world_size); /* compute_expected's */
    if (!fail || !desc || !sendraw || !recvraw || !expbuf || !sentbuf || !bases) {
        fprintf(stderr, "rank %d: out of memory\n", g_world_rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    /* device mode: the call sees these; every case copies in and back */
    char *dsendraw = NULL, *drecvraw = NULL;
    const int dev_here = device && (!mixed || g_world_rank % 2 == 0); /* this rank's buffers */
    const int recv_mem = mem == TEST_CUDA_MANAGED && g_world_rank % 2 == 0 ? TEST_CUDA_MALLOC : mem;
    if (device) {
        MPI_Comm node;
        int lrank;
        char err[256];
        /* every rank: the split is collective */
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world_rank, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &lrank);
        MPI_Comm_free(&node);
        if (dev_here && (test_cuda_load(lrank, err, sizeof err) != 0 ||
                         test_cuda_alloc((void **)&dsendraw, maxbytes, mem) != 0 ||
                         test_cuda_alloc((void **)&drecvraw, maxbytes, recv_mem) != 0)) {
            fprintf(stderr, "rank %d: device buffers: %s\n", g_world_rank,
                    !cu.lib                    ? err
                    : mem == TEST_CUDA_POOL    ? "cudaMallocAsync failed"
                    : mem == TEST_CUDA_OWN_CTX ? "cuCtxCreate or cuMemAlloc failed"
                    : mem == TEST_CUDA_MANAGED ? "cudaMallocManaged or cudaMalloc failed"
                                               : "cudaMalloc failed");
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    if (fake_spec != NULL) {
        char err[512];
        if (device || fake_cuda_setup(fake_spec, g_world_rank, sendraw, recvraw, maxbytes, err,
                                      sizeof err) != 0) {
            fprintf(stderr, "rank %d: -F: %s\n", g_world_rank, device ? "not with -d" : err);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    double t_start = MPI_Wtime();
    /* -N: a negative count (run with --mca mpi_param_check 0, so that MPI itself
     * does not catch it) must fail with MPI_ERR_COUNT and write nothing */
    size_t nneg = 0, negfail = 0;
    for (int c = 0; negative && c < ncomms; c++) {
        int sendv[4] = {1, 2, 3, 4}, recvv[4] = {-7, -7, -7, -7}, rc, cls = -1;
        rc = MPI_Allreduce(sendv, recvv, -1, MPI_INT, MPI_SUM, comms[c].comm);
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
        nneg++;
        if (cls != MPI_ERR_COUNT || recvv[0] != -7 || recvv[3] != -7) {
            negfail++;
            fprintf(stderr, "FAIL rank %d: count -1 on %s: error class %d (want MPI_ERR_COUNT %d), "
                    "receive buffer %s\n", g_world_rank, comms[c].name, cls, MPI_ERR_COUNT,
                    recvv[0] != -7 || recvv[3] != -7 ? "written" : "untouched");
        }
    }

    for (int rep = 0; rep < reps; rep++)
    for (int c = 0; c < ncomms; c++) {
        MPI_Comm comm = comms[c].comm;
        int crank, csize;
        MPI_Comm_rank(comm, &crank);
        MPI_Comm_size(comm, &csize);
        /* device mode, a one-rank comm: its cases are counted (every rank
         * enumerates the same) but not run (coll/self need not be CUDA-aware) */
        const int skip_comm = device && csize < 2;
        for (int ti = 0; ti < g_ntypes; ti++) {
            if (!type_sel[ti]) continue;
            const type_t *t = &g_types[ti];
            size_t ncases_type = ncases;
            for (int oi = 0; oi < OP_N; oi++) {
                if (!op_sel[oi] || (g_ops[oi].int_only && t->is_float)) continue;
                /* MPI's: no logical ops on Fortran INTEGER, only those on LOGICAL */
                if ((t->family == FAMILY_FINTEGER && oi >= OP_LAND) ||
                    (t->family == FAMILY_LOGICAL && oi < OP_LAND) ||
                    (t->family == FAMILY_BYTE && (oi < OP_BAND || oi > OP_BXOR)))
                    continue;
                if (test_type_op_listed(&g_excl, t->name, g_ops[oi].name)) { nexcluded++; continue; }
                gen_param_t gp = gen_params(t, csize);
                for (int k = 0; k < ncounts; k++) {
                    size_t count = counts[k];
                    if (count == LARGE_COUNT && large &&
                        !(oi == OP_SUM && (!strcmp(t->name, "float") || !strcmp(t->name, "int32"))))
                        continue;
                    for (int ip = (inplace_mode == 2); ip <= (inplace_mode >= 1); ip++) {
                        size_t case_id = ncases++;
                        desc[case_id] = (case_desc_t){c, ti, oi, ip, count};
                        if (skip_comm) {
                            fail[case_id] = CASE_NOT_RUN;
                            continue;
                        }
                        uint64_t case_base = mix64(seed * 0x100000001B3ull ^ mix64(case_id + 1));
                        size_t es = (size_t)t->size;
                        char *sendbuf = sendraw + SEND_OFF * es + shift_send;
                        if (recv_page >= 0) shift_recv = ((size_t)recv_page + 4096 - GUARD * es) % 4096;
                        char *recvbuf = recvraw + GUARD * es + shift_recv;
                        int failed = 0, nprint = 0;

                        compute_expected(expbuf, t, oi, &gp, case_base, csize, count, bases);
                        uint64_t my_base = rank_base_of(case_base, crank);
                        /* poison: guards get GUARD_BYTE, data gets ~expected */
                        memset(recvraw, GUARD_BYTE, (count + 2 * GUARD) * es + shift_recv);
                        complement(recvbuf, expbuf, count * es);
                        if (ip) {
                            fill_send(recvbuf, t, oi, &gp, my_base, count);
                        } else {
                            fill_send(sendbuf, t, oi, &gp, my_base, count);
                            memcpy(sentbuf, sendbuf, count * es);
                        }

                        int rc;
                        if (dev_here) {
                            const size_t span = (count + 2 * GUARD) * es + 4; /* -A's shifts */
                            cu.memcpy_(dsendraw, sendraw, span, TEST_CUDA_H2D);
                            cu.memcpy_(drecvraw, recvraw, span, TEST_CUDA_H2D);
                            cu.sync(); /* a copy from pageable memory may still be landing */
                            rc = allreduce(ip ? MPI_IN_PLACE : dsendraw + (sendbuf - sendraw),
                                           drecvraw + (recvbuf - recvraw), (int)count, t->dt,
                                           g_ops[oi].op, comm);
                            if (cu.memcpy_(sendraw, dsendraw, span, TEST_CUDA_D2H) != 0 ||
                                cu.memcpy_(recvraw, drecvraw, span, TEST_CUDA_D2H) != 0) {
                                fprintf(stderr, "rank %d: cudaMemcpy back failed (a fault in the "
                                        "allreduce?)\n", g_world_rank);
                                MPI_Abort(MPI_COMM_WORLD, 3);
                            }
                        } else {
                            rc = allreduce(ip ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, t->dt,
                                           g_ops[oi].op, comm);
                        }
                        char where[200];
                        snprintf(where, sizeof where, "rank %d comm %s(%d/%d) type %s op %s count %zu%s",
                                 g_world_rank, comms[c].name, crank, csize, t->name, g_ops[oi].name, count,
                                 ip ? " in-place" : "");
                        if (!fake_cuda_ctx_kept()) {
                            fprintf(stderr, "FAILED %s: the calling thread's CUDA context changed\n",
                                    where);
                            failed = 1;
                        }
                        if (rc != MPI_SUCCESS) {
                            char es_[MPI_MAX_ERROR_STRING];
                            int len = 0;
                            MPI_Error_string(rc, es_, &len);
                            fprintf(stderr, "FAILED %s: %s returned %d (%s)\n", where,
                                    g_nonblocking ? "MPI_Iallreduce/MPI_Wait" : "MPI_Allreduce", rc, es_);
                            failed = 1;
                        } else if (memcmp(recvbuf, expbuf, count * es) != 0) {
                            /* equal bits are equal values; the rest one by one
                             * (floats: -0.0 == +0.0) */
                            for (size_t i = 0; i < count; i++) {
                                if (!elem_equal(recvbuf + i * es, expbuf + i * es, t)) {
                                    failed = 1;
                                    if (nprint < MAX_PRINT_PER_CASE && g_printed < MAX_PRINT_TOTAL) {
                                        char g[64], e[64];
                                        fmt_val(g, sizeof g, recvbuf + i * es, t);
                                        fmt_val(e, sizeof e, expbuf + i * es, t);
                                        fprintf(stderr, "MISMATCH %s index %zu got %s expected %s\n", where, i, g, e);
                                        nprint++;
                                        g_printed++;
                                    }
                                }
                            }
                        }
                        for (size_t b = 0; b < GUARD * es; b++) {
                            const int before = (unsigned char)recvbuf[-1 - (ptrdiff_t)b] != GUARD_BYTE;
                            if (before || (unsigned char)recvbuf[count * es + b] != GUARD_BYTE) {
                                failed = 1;
                                if (g_printed++ < MAX_PRINT_TOTAL)
                                    fprintf(stderr, "GUARD %s: recvbuf guard byte %s+%zu overwritten\n", where,
                                            before ? "before" : "after", b);
                                break;
                            }
                        }
                        if (!ip) { /* the send buffer must be left unchanged */
                            if (memcmp(sentbuf, sendbuf, count * es) != 0) {
                                failed = 1;
                                if (g_printed++ < MAX_PRINT_TOTAL)
                                    fprintf(stderr, "SENDBUF %s: send buffer was modified\n", where);
                            }
                        }
                        fail[case_id] = (unsigned char)failed;
                    }
                }
            }
            if (!g_quiet && g_world_rank == 0)
                printf("rank 0: comm %-5s type %-9s %4zu cases done (%.1f s)\n", comms[c].name, t->name,
                       ncases - ncases_type, MPI_Wtime() - t_start);
        }
        for (int ti = 0; zeros && ti < g_ntypes; ti++) {
            if (!type_sel[ti] || !g_types[ti].is_float) continue;
            for (int oi = OP_MIN; oi <= OP_MAX; oi++) {
                if (!op_sel[oi]) continue;
                for (int k = 0; k < ncounts; k++) {
                    size_t case_id;
                    if (counts[k] == LARGE_COUNT && large) continue;
                    case_id = ncases++;
                    desc[case_id] = (case_desc_t){c, ti, oi, 2, counts[k]};
                    if (skip_comm) {
                        fail[case_id] = CASE_NOT_RUN;
                        continue;
                    }
                    fail[case_id] = (unsigned char)zeros_case(
                        comm, comms[c].name, &g_types[ti], oi, counts[k],
                        mix64(seed ^ mix64(case_id + 7)), recvraw, dev_here ? drecvraw : NULL);
                }
            }
        }
    }
    fflush(stdout);

    /* for the runner: at least this many must show in gpuring's allreduce summary */
    if (g_calls_shared > 0) {
        printf("allreduce_check rank %d: %ld allreduce calls on communicators of 2 or more "
               "ranks\n", g_world_rank, g_calls_shared);
        fflush(stdout);
    }
    /* verdict: gather the per-case flags (not through MPI_Allreduce) */
    unsigned char *all = NULL;
    if (g_world_rank == 0) all = malloc(ncases * (size_t)g_world_size + 1);
    MPI_Gather(fail, (int)ncases, MPI_UNSIGNED_CHAR, all, (int)ncases, MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD);
    int verdict = 0, own_failed = negfail != 0; /* (this rank's exit status) */
    for (size_t k = 0; k < ncases; k++) own_failed |= fail[k] == 1;
    long negs[2] = {(long)nneg, (long)negfail}, negsum[2] = {0, 0};
    test_verdict_sum(negs, negsum, 2, MPI_COMM_WORLD);
    if (g_world_rank == 0) {
        size_t npass = (size_t)(negsum[0] - negsum[1]), nfail = (size_t)negsum[1], nskip = 0;
        for (size_t k = 0; k < ncases; k++) {
            int f = 0, first = -1, ran = 0;
            for (int r = 0; r < g_world_size; r++) {
                const unsigned char v = all[(size_t)r * ncases + k];

                ran |= v != CASE_NOT_RUN;
                if (v == 1) { f = 1; if (first < 0) first = r; }
            }
            if (!ran) {
                nskip++;
            } else if (f) {
                if (nfail < 40)
                    printf("FAILED case: comm %s type %s op %s count %zu%s (first failing rank %d)\n",
                           comms[desc[k].comm].name, g_types[desc[k].type].name, g_ops[desc[k].op].name,
                           desc[k].count,
                           desc[k].inplace == 2 ? " zeros" : desc[k].inplace ? " in-place" : "",
                           first);
                else if (nfail == 40)
                    printf("FAILED case: ... (more not listed)\n");
                nfail++;
            } else {
                npass++;
            }
        }
        if (nexcluded)
            printf("allreduce_check: %zu type/op pairs excluded by -x (per comm and repetition)\n", nexcluded);
        printf("allreduce_check: np %d, %zu cases (%zu run by no rank: one-rank communicators "
               "of device mode), %.2f s\n", g_world_size, ncases, nskip, MPI_Wtime() - t_start);
        printf("%zu passed, %zu failed\n", npass, nfail);
        fflush(stdout);
        verdict = nfail ? 1 : 0;
        free(all);
    }
    MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);

    for (int c = 0; c < ncomms; c++)
        if (comms[c].comm != MPI_COMM_WORLD) MPI_Comm_free(&comms[c].comm);
    free(fail);
    free(desc);
    free(sendraw);
    free(recvraw);
    if (dev_here) {
        test_cuda_free(dsendraw, mem);
        test_cuda_free(drecvraw, recv_mem);
    }
    free(expbuf);
    free(sentbuf);
    free(bases);
    MPI_Finalize();
    return verdict || own_failed;
}
