/*
 * fallback_check.c -- MPI_Allreduce cases gpuring does not run itself and
 * must hand to the component below (fallback), which must still give the
 * right answer.
 *
 *   usersum_int      user-defined commutative op (sum) on MPI_INT
 *   usersum_double   user-defined commutative op (sum) on MPI_DOUBLE
 *   firstnz_int      user-defined NON-commutative op ("first non-zero in rank
 *                    order") on MPI_INT: catches a reordered reduction
 *   matmul_c4u       non-commutative 2x2 matrix product (mod 2^32) on a
 *                    derived type MPI_Type_contiguous(4, MPI_UNSIGNED)
 *   contig3_usersum  derived type MPI_Type_contiguous(3, MPI_INT), user sum
 *   vector_usermax   derived type MPI_Type_vector(2,1,2,MPI_INT) (a hole in
 *                    every element), user max that honours the stride; the
 *                    holes in recvbuf must stay untouched
 *   longdouble_sum / longdouble_max      MPI_LONG_DOUBLE
 *   dcomplex_sum / dcomplex_prod          MPI_C_DOUBLE_COMPLEX
 *   fcomplex_sum                          MPI_C_FLOAT_COMPLEX
 *   maxloc_2int / minloc_2int             MPI_MAXLOC / MPI_MINLOC on MPI_2INT
 *   maxloc_double_int                     MPI_MAXLOC on MPI_DOUBLE_INT
 *   cbool_lor / cbool_land                MPI_C_BOOL  (gpuring runs these natively since #16)
 *   byte_bxor                             MPI_BYTE with MPI_BXOR
 *   intercomm_sum    MPI_INT sum on an inter-communicator (each group gets
 *                    the reduction of the other group)
 *
 * Every case runs on MPI_COMM_WORLD and on a communicator with the rank order
 * reversed, with several counts, in place and not.  The reference is
 * computed here from (seed, case, rank, index), folding rank 0..n-1 in order.
 * The verdict is gathered with MPI_Gather; rank 0 prints `N passed, N failed`
 * and the exit code is non-zero if anything failed.
 *
 * Options: -c counts (default 0,1,2,7,1000,65537), -s seed, -q quiet.
 */
#include <mpi.h>
#include <complex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_COUNTS 32
#define MAX_CASES 4096
#define GUARD_BYTES 16
#define POISON 0xA5
#define MAX_PRINT 40

static int g_rank, g_size, g_quiet, g_printed;
static uint64_t g_seed = 1;

static inline uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static inline uint64_t H(uint64_t case_base, int rank, size_t i)
{
    return mix64(mix64(case_base ^ (0xA24BAED4963EE407ull * (uint64_t)(rank + 1))) ^
                 ((uint64_t)i * 0xD6E8FEB86659FD93ull));
}

/* ---- element kinds ---------------------------------------------------------- */

typedef struct {
    int v, loc;
} int2_t;
typedef struct {
    double v;
    int loc;
} dblint_t;

typedef struct kind kind_t;
struct kind {
    const char *name;
    MPI_Datatype dt;
    MPI_Op op;
    size_t extent;                       /* bytes per element */
    void (*gen)(void *e, uint64_t h, int rank);
    void (*fold)(void *acc, const void *next); /* acc = acc (op) next; acc holds lower ranks */
    int (*eq)(const void *a, const void *b);
    void (*fmt)(char *s, size_t n, const void *e);
    int (*is_data)(size_t byte); /* 0 for bytes in holes (must stay untouched) */
};

/* --- MPI_INT */
static void gen_int_small(void *e, uint64_t h, int r) { (void)r; int v = (int)(h % 2001) - 1000; memcpy(e, &v, 4); }
static void fold_int_sum(void *a, const void *b) { int x, y; memcpy(&x, a, 4); memcpy(&y, b, 4); x += y; memcpy(a, &x, 4); }
static int eq_int(const void *a, const void *b) { return memcmp(a, b, sizeof(int)) == 0; }
static void fmt_int(char *s, size_t n, const void *e) { int v; memcpy(&v, e, 4); snprintf(s, n, "%d", v); }
static void gen_int_sparse(void *e, uint64_t h, int r)
{
    (void)r;
    int v = (h % 3 == 0) ? (int)((h >> 8) % 1000) + 1 : 0;
    memcpy(e, &v, 4);
}
static void fold_int_firstnz(void *a, const void *b)
{
    int x, y;
    memcpy(&x, a, 4); memcpy(&y, b, 4);
    if (x == 0) memcpy(a, &y, 4);
}

static void user_sum_int(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] += a[i];
}
static void user_firstnz_int(void *in, void *inout, int *len, MPI_Datatype *dt)
{ /* inout = in (op) inout, `in` comes from the lower ranks */
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) if (a[i] != 0) b[i] = a[i];
}

/* --- MPI_DOUBLE, user sum */
static void gen_dbl_small(void *e, uint64_t h, int r) { (void)r; double v = (double)((int)(h % 17) - 8); memcpy(e, &v, 8); }
static void fold_dbl_sum(void *a, const void *b) { double x, y; memcpy(&x, a, 8); memcpy(&y, b, 8); x += y; memcpy(a, &x, 8); }
static int eq_dbl(const void *a, const void *b) { double x, y; memcpy(&x, a, 8); memcpy(&y, b, 8); return x == y; }
static void fmt_dbl(char *s, size_t n, const void *e) { double v; memcpy(&v, e, 8); snprintf(s, n, "%.17g", v); }
static void user_sum_dbl(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    double *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] += a[i];
}

/* --- 2x2 matrices of unsigned, MPI_Type_contiguous(4, MPI_UNSIGNED) */
static void gen_mat(void *e, uint64_t h, int r)
{
    (void)r;
    unsigned m[4];
    for (int k = 0; k < 4; k++) m[k] = (unsigned)(mix64(h + (uint64_t)k) & 0xffffffffu);
    memcpy(e, m, sizeof m);
}
static void matmul(unsigned *out, const unsigned *x, const unsigned *y)
{ /* out = x * y (row major), mod 2^32 */
    unsigned t[4];
    t[0] = x[0] * y[0] + x[1] * y[2];
    t[1] = x[0] * y[1] + x[1] * y[3];
    t[2] = x[2] * y[0] + x[3] * y[2];
    t[3] = x[2] * y[1] + x[3] * y[3];
    memcpy(out, t, sizeof t);
}
static void fold_mat(void *a, const void *b)
{
    unsigned x[4], y[4];
    memcpy(x, a, sizeof x); memcpy(y, b, sizeof y);
    matmul(x, x, y);
    memcpy(a, x, sizeof x);
}
static int eq_mat(const void *a, const void *b) { return memcmp(a, b, 4 * sizeof(unsigned)) == 0; }
static void fmt_mat(char *s, size_t n, const void *e)
{
    unsigned m[4];
    memcpy(m, e, sizeof m);
    snprintf(s, n, "[%u %u; %u %u]", m[0], m[1], m[2], m[3]);
}
static void user_matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{ /* inout = in * inout */
    (void)dt;
    unsigned *a = in, *b = inout;
    for (int i = 0; i < *len; i++) matmul(b + 4 * i, a + 4 * i, b + 4 * i);
}

/* --- MPI_Type_contiguous(3, MPI_INT), user sum */
static void gen_c3(void *e, uint64_t h, int r)
{
    (void)r;
    int v[3];
    for (int k = 0; k < 3; k++) v[k] = (int)(mix64(h + (uint64_t)k) % 200001) - 100000;
    memcpy(e, v, sizeof v);
}
static void fold_c3(void *a, const void *b)
{
    int x[3], y[3];
    memcpy(x, a, sizeof x); memcpy(y, b, sizeof y);
    for (int k = 0; k < 3; k++) x[k] += y[k];
    memcpy(a, x, sizeof x);
}
static int eq_c3(const void *a, const void *b) { return memcmp(a, b, 3 * sizeof(int)) == 0; }
static void fmt_c3(char *s, size_t n, const void *e)
{
    int v[3];
    memcpy(v, e, sizeof v);
    snprintf(s, n, "(%d,%d,%d)", v[0], v[1], v[2]);
}
static MPI_Datatype g_c3;
static void user_sum_c3(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int *a = in, *b = inout;
    int per = (*dt == g_c3) ? 3 : 1; /* the library passes the user's datatype */
    for (int i = 0; i < *len * per; i++) b[i] += a[i];
}

/* --- MPI_Type_vector(2,1,2,MPI_INT): ints 0 and 2 of a 3-int extent */
static MPI_Datatype g_vec;
static void gen_vec(void *e, uint64_t h, int r)
{ /* writes the data ints only; the hole keeps whatever the buffer had */
    (void)r;
    int v0 = (int)(h % 100001) - 50000, v2 = (int)(mix64(h) % 100001) - 50000;
    memcpy((char *)e, &v0, 4);
    memcpy((char *)e + 8, &v2, 4);
}
static void fold_vec(void *a, const void *b)
{
    for (int k = 0; k <= 8; k += 8) {
        int x, y;
        memcpy(&x, (char *)a + k, 4); memcpy(&y, (const char *)b + k, 4);
        if (y > x) memcpy((char *)a + k, &y, 4);
    }
}
static int eq_vec(const void *a, const void *b)
{
    return memcmp(a, b, 4) == 0 && memcmp((const char *)a + 8, (const char *)b + 8, 4) == 0;
}
static void fmt_vec(char *s, size_t n, const void *e)
{
    int v0, v2;
    memcpy(&v0, e, 4); memcpy(&v2, (const char *)e + 8, 4);
    snprintf(s, n, "(%d,_,%d)", v0, v2);
}
static int data_vec(size_t byte) { return byte < 4 || byte >= 8; }
static void user_max_vec(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int *a = in, *b = inout;
    if (*dt != g_vec) { /* unexpected: treat as plain ints */
        for (int i = 0; i < *len; i++) if (a[i] > b[i]) b[i] = a[i];
        return;
    }
    for (int i = 0; i < *len; i++) {
        if (a[3 * i] > b[3 * i]) b[3 * i] = a[3 * i];
        if (a[3 * i + 2] > b[3 * i + 2]) b[3 * i + 2] = a[3 * i + 2];
    }
}

/* --- long double */
static void gen_ld_small(void *e, uint64_t h, int r) { (void)r; long double v = (long double)((int)(h % 17) - 8); memcpy(e, &v, sizeof v); }
static void gen_ld_any(void *e, uint64_t h, int r)
{
    (void)r;
    long double v = ((long double)(int64_t)(h >> 1)) / 1048576.0L;
    memcpy(e, &v, sizeof v);
}
static void fold_ld_sum(void *a, const void *b) { long double x, y; memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y); x += y; memcpy(a, &x, sizeof x); }
static void fold_ld_max(void *a, const void *b) { long double x, y; memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y); if (y > x) memcpy(a, &y, sizeof y); }
static int eq_ld(const void *a, const void *b) { long double x, y; memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y); return x == y; }
static void fmt_ld(char *s, size_t n, const void *e) { long double v; memcpy(&v, e, sizeof v); snprintf(s, n, "%.21Lg", v); }

/* --- complex */
static void gen_dc_small(void *e, uint64_t h, int r)
{
    (void)r;
    double complex v = (double)((int)(h % 17) - 8) + (double)((int)((h >> 8) % 17) - 8) * I;
    memcpy(e, &v, sizeof v);
}
static void gen_dc_unit(void *e, uint64_t h, int r)
{ /* products of these stay small Gaussian integers: exact in any order */
    static const double re[6] = {1, -1, 0, 0, 1, 1}, im[6] = {0, 0, 1, -1, 1, -1};
    (void)r;
    double complex v = re[h % 6] + im[h % 6] * I;
    memcpy(e, &v, sizeof v);
}
static void fold_dc_sum(void *a, const void *b) { double complex x, y; memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y); x += y; memcpy(a, &x, sizeof x); }
static void fold_dc_prod(void *a, const void *b) { double complex x, y; memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y); x *= y; memcpy(a, &x, sizeof x); }
static int eq_dc(const void *a, const void *b) { double complex x, y; memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y); return x == y; }
static void fmt_dc(char *s, size_t n, const void *e) { double complex v; memcpy(&v, e, sizeof v); snprintf(s, n, "%g%+gi", creal(v), cimag(v)); }
static void gen_fc_small(void *e, uint64_t h, int r)
{
    (void)r;
    float complex v = (float)((int)(h % 17) - 8) + (float)((int)((h >> 8) % 17) - 8) * I;
    memcpy(e, &v, sizeof v);
}
static void fold_fc_sum(void *a, const void *b) { float complex x, y; memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y); x += y; memcpy(a, &x, sizeof x); }
static int eq_fc(const void *a, const void *b) { float complex x, y; memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y); return x == y; }
static void fmt_fc(char *s, size_t n, const void *e) { float complex v; memcpy(&v, e, sizeof v); snprintf(s, n, "%g%+gi", crealf(v), cimagf(v)); }

/* --- MAXLOC / MINLOC: value in a small range (many ties), loc = rank */
static void gen_2int(void *e, uint64_t h, int r) { int2_t v = {(int)(h % 6), r}; memcpy(e, &v, sizeof v); }
static void fold_maxloc_2int(void *a, const void *b)
{
    int2_t x, y;
    memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y);
    if (y.v > x.v || (y.v == x.v && y.loc < x.loc)) memcpy(a, &y, sizeof y);
}
static void fold_minloc_2int(void *a, const void *b)
{
    int2_t x, y;
    memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y);
    if (y.v < x.v || (y.v == x.v && y.loc < x.loc)) memcpy(a, &y, sizeof y);
}
static int eq_2int(const void *a, const void *b) { return memcmp(a, b, sizeof(int2_t)) == 0; }
static void fmt_2int(char *s, size_t n, const void *e) { int2_t v; memcpy(&v, e, sizeof v); snprintf(s, n, "(%d,loc %d)", v.v, v.loc); }
static void gen_dblint(void *e, uint64_t h, int r)
{
    dblint_t v;
    memset(&v, 0, sizeof v);
    v.v = (double)(h % 5) * 0.25;
    v.loc = r;
    memcpy(e, &v, sizeof v);
}
static void fold_maxloc_dblint(void *a, const void *b)
{
    dblint_t x, y;
    memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y);
    if (y.v > x.v || (y.v == x.v && y.loc < x.loc)) { x.v = y.v; x.loc = y.loc; memcpy(a, &x, sizeof x); }
}
static int eq_dblint(const void *a, const void *b)
{
    dblint_t x, y;
    memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y);
    return x.v == y.v && x.loc == y.loc;
}
static void fmt_dblint(char *s, size_t n, const void *e) { dblint_t v; memcpy(&v, e, sizeof v); snprintf(s, n, "(%g,loc %d)", v.v, v.loc); }

/* --- C bool */
static void gen_bool_mostly_true(void *e, uint64_t h, int r) { (void)r; bool v = (h % 5) != 0; memcpy(e, &v, 1); }
static void gen_bool_mostly_false(void *e, uint64_t h, int r) { (void)r; bool v = (h % 5) == 0; memcpy(e, &v, 1); }
static void fold_bool_or(void *a, const void *b) { bool x, y; memcpy(&x, a, 1); memcpy(&y, b, 1); x = x || y; memcpy(a, &x, 1); }
static void fold_bool_and(void *a, const void *b) { bool x, y; memcpy(&x, a, 1); memcpy(&y, b, 1); x = x && y; memcpy(a, &x, 1); }
static int eq_bool(const void *a, const void *b) { bool x, y; memcpy(&x, a, 1); memcpy(&y, b, 1); return x == y; }
static void fmt_bool(char *s, size_t n, const void *e) { bool v; memcpy(&v, e, 1); snprintf(s, n, "%d", (int)v); }

/* --- MPI_BYTE */
static void gen_byte(void *e, uint64_t h, int r) { (void)r; unsigned char v = (unsigned char)h; memcpy(e, &v, 1); }
static void fold_byte_xor(void *a, const void *b) { *(unsigned char *)a ^= *(const unsigned char *)b; }
static int eq_byte(const void *a, const void *b) { return *(const unsigned char *)a == *(const unsigned char *)b; }
static void fmt_byte(char *s, size_t n, const void *e) { snprintf(s, n, "0x%02x", *(const unsigned char *)e); }

static int data_all(size_t byte) { (void)byte; return 1; }

/* ---- running one case -------------------------------------------------------- */

static void report(const char *what, const char *where, size_t idx, const kind_t *k, const void *got, const void *exp)
{
    if (g_printed >= MAX_PRINT) return;
    g_printed++;
    char g[96], e[96];
    if (got) {
        k->fmt(g, sizeof g, got);
        k->fmt(e, sizeof e, exp);
        fprintf(stderr, "%s %s index %zu got %s expected %s\n", what, where, idx, g, e);
    } else {
        fprintf(stderr, "%s %s\n", what, where);
    }
}

/* returns 1 if the case failed on this rank */
static int run_case(const kind_t *k, MPI_Comm comm, const char *comm_name, size_t count, int inplace,
                    uint64_t case_base)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    size_t ext = k->extent, bytes = count * ext;
    char *sendraw = malloc(bytes + 2 * GUARD_BYTES), *recvraw = malloc(bytes + 2 * GUARD_BYTES);
    char *exp = malloc(bytes + ext), *tmp = malloc(ext + 16);
    char *sendbuf = sendraw + GUARD_BYTES, *recvbuf = recvraw + GUARD_BYTES;
    char where[512];
    int failed = 0, nbad = 0;
    snprintf(where, sizeof where, "rank %d comm %s(%d/%d) case %s count %zu%s", g_rank, comm_name, crank, csize,
             k->name, count, inplace ? " in-place" : "");

    /* reference: fold ranks 0..n-1 in order */
    for (size_t i = 0; i < count; i++) {
        char *e = exp + i * ext;
        memset(e, 0, ext);
        k->gen(e, H(case_base, 0, i), 0);
        for (int r = 1; r < csize; r++) {
            memset(tmp, 0, ext);
            k->gen(tmp, H(case_base, r, i), r);
            k->fold(e, tmp);
        }
    }
    /* recvbuf: guards and holes POISON, data bytes ~expected */
    memset(recvraw, POISON, bytes + 2 * GUARD_BYTES);
    for (size_t b = 0; b < bytes; b++)
        if (k->is_data(b % ext)) recvbuf[b] = (char)~exp[b];
    memset(sendraw, 0x5C, bytes + 2 * GUARD_BYTES);
    char *mine = inplace ? recvbuf : sendbuf;
    for (size_t i = 0; i < count; i++) k->gen(mine + i * ext, H(case_base, crank, i), crank);

    int rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, k->dt, k->op, comm);
    if (rc != MPI_SUCCESS) {
        char es[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, es, &len);
        snprintf(where + strlen(where), sizeof where - strlen(where), ": MPI_Allreduce returned %d (%s)", rc, es);
        report("FAILED", where, 0, k, NULL, NULL);
        failed = 1;
    } else {
        for (size_t i = 0; i < count; i++) {
            if (!k->eq(recvbuf + i * ext, exp + i * ext)) {
                failed = 1;
                if (nbad++ < 4) report("MISMATCH", where, i, k, recvbuf + i * ext, exp + i * ext);
            }
        }
        for (size_t b = 0; b < bytes; b++) {
            if (!k->is_data(b % ext) && (unsigned char)recvbuf[b] != POISON) {
                failed = 1;
                report("HOLE byte overwritten:", where, 0, k, NULL, NULL);
                break;
            }
        }
        for (size_t b = 0; b < GUARD_BYTES; b++) {
            if ((unsigned char)recvraw[b] != POISON || (unsigned char)recvbuf[bytes + b] != POISON) {
                failed = 1;
                report("GUARD byte overwritten:", where, 0, k, NULL, NULL);
                break;
            }
        }
        if (!inplace) { /* send buffer unchanged */
            for (size_t i = 0; i < count && !failed; i++) {
                memset(tmp, 0x5C, ext);
                k->gen(tmp, H(case_base, crank, i), crank);
                if (!k->eq(tmp, sendbuf + i * ext)) {
                    failed = 1;
                    report("SENDBUF modified:", where, 0, k, NULL, NULL);
                }
            }
        }
    }
    free(sendraw);
    free(recvraw);
    free(exp);
    free(tmp);
    return failed;
}

/* inter-communicator: group A (even world ranks) and group B (odd world
 * ranks); each process gets the sum over the OTHER group's send buffers */
static int run_intercomm(MPI_Comm inter, int color, size_t count, uint64_t case_base)
{
    int *sendbuf = malloc((count + 1) * sizeof(int)), *recvbuf = malloc((count + 2) * sizeof(int));
    int failed = 0, nbad = 0;
    for (size_t i = 0; i < count; i++) {
        int v;
        gen_int_small(&v, H(case_base, g_rank, i), g_rank);
        sendbuf[i] = v;
        recvbuf[i] = 0x5a5a5a5a;
    }
    recvbuf[count] = 0x5a5a5a5a;
    int rc = MPI_Allreduce(sendbuf, recvbuf, (int)count, MPI_INT, MPI_SUM, inter);
    char where[160];
    snprintf(where, sizeof where, "rank %d comm intercomm(group %d) case intercomm_sum count %zu", g_rank, color,
             count);
    if (rc != MPI_SUCCESS) {
        report("FAILED (MPI error):", where, 0, NULL, NULL, NULL);
        failed = 1;
    } else {
        for (size_t i = 0; i < count; i++) {
            int e = 0;
            for (int r = 0; r < g_size; r++) {
                if (r % 2 == color) continue;
                int v;
                gen_int_small(&v, H(case_base, r, i), r);
                e += v;
            }
            if (recvbuf[i] != e) {
                failed = 1;
                if (nbad++ < 4 && g_printed++ < MAX_PRINT)
                    fprintf(stderr, "MISMATCH %s index %zu got %d expected %d\n", where, i, recvbuf[i], e);
            }
        }
        if (recvbuf[count] != 0x5a5a5a5a) {
            failed = 1;
            report("GUARD overwritten:", where, 0, NULL, NULL, NULL);
        }
    }
    free(sendbuf);
    free(recvbuf);
    return failed;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);

    size_t counts[MAX_COUNTS];
    int ncounts = 0, opt;
    while ((opt = getopt(argc, argv, "c:s:q")) != -1) {
        switch (opt) {
        case 'c':
            for (char *t = strtok(optarg, ","); t && ncounts < MAX_COUNTS; t = strtok(NULL, ","))
                counts[ncounts++] = (size_t)strtoull(t, NULL, 0);
            break;
        case 's': g_seed = strtoull(optarg, NULL, 0); break;
        case 'q': g_quiet = 1; break;
        default:
            if (!g_rank) fprintf(stderr, "usage: fallback_check [-c counts] [-s seed] [-q]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (!ncounts) {
        static const size_t d[] = {0, 1, 2, 7, 1000, 65537};
        for (size_t j = 0; j < sizeof d / sizeof d[0]; j++) counts[ncounts++] = d[j];
    }

    MPI_Op op_usersum_int, op_usersum_dbl, op_firstnz, op_matmul, op_sum_c3, op_max_vec;
    MPI_Op_create(user_sum_int, 1, &op_usersum_int);
    MPI_Op_create(user_sum_dbl, 1, &op_usersum_dbl);
    MPI_Op_create(user_firstnz_int, 0, &op_firstnz);
    MPI_Op_create(user_matmul, 0, &op_matmul);
    MPI_Op_create(user_sum_c3, 1, &op_sum_c3);
    MPI_Op_create(user_max_vec, 1, &op_max_vec);
    MPI_Datatype t_mat;
    MPI_Type_contiguous(4, MPI_UNSIGNED, &t_mat);
    MPI_Type_commit(&t_mat);
    MPI_Type_contiguous(3, MPI_INT, &g_c3);
    MPI_Type_commit(&g_c3);
    MPI_Type_vector(2, 1, 2, MPI_INT, &g_vec);
    MPI_Type_commit(&g_vec);
    MPI_Aint lb, vec_extent;
    MPI_Type_get_extent(g_vec, &lb, &vec_extent);

    kind_t kinds[] = {
        {"usersum_int", MPI_INT, op_usersum_int, sizeof(int), gen_int_small, fold_int_sum, eq_int, fmt_int, data_all},
        {"usersum_double", MPI_DOUBLE, op_usersum_dbl, sizeof(double), gen_dbl_small, fold_dbl_sum, eq_dbl, fmt_dbl, data_all},
        {"firstnz_int", MPI_INT, op_firstnz, sizeof(int), gen_int_sparse, fold_int_firstnz, eq_int, fmt_int, data_all},
        {"matmul_c4u", t_mat, op_matmul, 4 * sizeof(unsigned), gen_mat, fold_mat, eq_mat, fmt_mat, data_all},
        {"contig3_usersum", g_c3, op_sum_c3, 3 * sizeof(int), gen_c3, fold_c3, eq_c3, fmt_c3, data_all},
        {"vector_usermax", g_vec, op_max_vec, (size_t)vec_extent, gen_vec, fold_vec, eq_vec, fmt_vec, data_vec},
        {"longdouble_sum", MPI_LONG_DOUBLE, MPI_SUM, sizeof(long double), gen_ld_small, fold_ld_sum, eq_ld, fmt_ld, data_all},
        {"longdouble_max", MPI_LONG_DOUBLE, MPI_MAX, sizeof(long double), gen_ld_any, fold_ld_max, eq_ld, fmt_ld, data_all},
        {"dcomplex_sum", MPI_C_DOUBLE_COMPLEX, MPI_SUM, sizeof(double complex), gen_dc_small, fold_dc_sum, eq_dc, fmt_dc, data_all},
        {"dcomplex_prod", MPI_C_DOUBLE_COMPLEX, MPI_PROD, sizeof(double complex), gen_dc_unit, fold_dc_prod, eq_dc, fmt_dc, data_all},
        {"fcomplex_sum", MPI_C_FLOAT_COMPLEX, MPI_SUM, sizeof(float complex), gen_fc_small, fold_fc_sum, eq_fc, fmt_fc, data_all},
        {"maxloc_2int", MPI_2INT, MPI_MAXLOC, sizeof(int2_t), gen_2int, fold_maxloc_2int, eq_2int, fmt_2int, data_all},
        {"minloc_2int", MPI_2INT, MPI_MINLOC, sizeof(int2_t), gen_2int, fold_minloc_2int, eq_2int, fmt_2int, data_all},
        {"maxloc_double_int", MPI_DOUBLE_INT, MPI_MAXLOC, sizeof(dblint_t), gen_dblint, fold_maxloc_dblint, eq_dblint, fmt_dblint, data_all},
        {"cbool_lor", MPI_C_BOOL, MPI_LOR, sizeof(bool), gen_bool_mostly_false, fold_bool_or, eq_bool, fmt_bool, data_all},
        {"cbool_land", MPI_C_BOOL, MPI_LAND, sizeof(bool), gen_bool_mostly_true, fold_bool_and, eq_bool, fmt_bool, data_all},
        {"byte_bxor", MPI_BYTE, MPI_BXOR, 1, gen_byte, fold_byte_xor, eq_byte, fmt_byte, data_all},
    };
    int nkinds = (int)(sizeof kinds / sizeof kinds[0]);

    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, g_size - g_rank, &rev);
    struct {
        const char *name;
        MPI_Comm comm;
    } comms[2] = {{"world", MPI_COMM_WORLD}, {"rev", rev}};
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(rev, MPI_ERRORS_RETURN);

    static unsigned char fail[MAX_CASES];
    static char names[MAX_CASES][96];
    size_t ncases = 0;
    double t0 = MPI_Wtime();

    for (int c = 0; c < 2; c++) {
        for (int k = 0; k < nkinds; k++) {
            for (int j = 0; j < ncounts; j++) {
                for (int ip = 0; ip <= 1; ip++) {
                    if (ncases >= MAX_CASES) break;
                    size_t id = ncases++;
                    uint64_t base = mix64(g_seed * 0x100000001B3ull ^ mix64(id + 7));
                    snprintf(names[id], sizeof names[id], "%s comm %s count %zu%s", kinds[k].name, comms[c].name,
                             counts[j], ip ? " in-place" : "");
                    fail[id] = (unsigned char)run_case(&kinds[k], comms[c].comm, comms[c].name, counts[j], ip, base);
                }
            }
            if (!g_quiet && g_rank == 0)
                printf("rank 0: comm %-5s case %-18s done (%.2f s)\n", comms[c].name, kinds[k].name, MPI_Wtime() - t0);
        }
    }

    /* inter-communicator (needs two groups) */
    if (g_size >= 2) {
        MPI_Comm local, inter;
        int color = g_rank % 2;
        MPI_Comm_split(MPI_COMM_WORLD, color, g_rank, &local);
        MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, color == 0 ? 1 : 0, 77, &inter);
        MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
        static const size_t icounts[] = {1, 7, 1000, 65537};
        for (size_t j = 0; j < sizeof icounts / sizeof icounts[0] && ncases < MAX_CASES; j++) {
            size_t id = ncases++;
            uint64_t base = mix64(g_seed * 0x100000001B3ull ^ mix64(id + 7));
            snprintf(names[id], sizeof names[id], "intercomm_sum count %zu", icounts[j]);
            fail[id] = (unsigned char)run_intercomm(inter, color, icounts[j], base);
        }
        MPI_Comm_free(&inter);
        MPI_Comm_free(&local);
    }
    fflush(stdout);

    unsigned char *all = g_rank == 0 ? malloc(ncases * (size_t)g_size + 1) : NULL;
    MPI_Gather(fail, (int)ncases, MPI_UNSIGNED_CHAR, all, (int)ncases, MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD);
    int verdict = 0;
    if (g_rank == 0) {
        size_t npass = 0, nfail = 0;
        for (size_t id = 0; id < ncases; id++) {
            int f = 0;
            for (int r = 0; r < g_size; r++) f |= all[(size_t)r * ncases + id];
            if (f) {
                if (nfail < 40) printf("FAILED case: %s\n", names[id]);
                nfail++;
            } else {
                npass++;
            }
        }
        printf("fallback_check: np %d, %zu cases, %.2f s\n", g_size, ncases, MPI_Wtime() - t0);
        printf("%zu passed, %zu failed\n", npass, nfail);
        fflush(stdout);
        verdict = nfail ? 1 : 0;
        free(all);
    }
    MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);
    /* (and this rank's own failures, whatever the broadcast -- gpuring's -- said) */
    for (size_t id = 0; id < ncases; id++) verdict |= fail[id] != 0;

    MPI_Comm_free(&rev);
    MPI_Type_free(&t_mat);
    MPI_Type_free(&g_c3);
    MPI_Type_free(&g_vec);
    MPI_Op_free(&op_usersum_int);
    MPI_Op_free(&op_usersum_dbl);
    MPI_Op_free(&op_firstnz);
    MPI_Op_free(&op_matmul);
    MPI_Op_free(&op_sum_c3);
    MPI_Op_free(&op_max_vec);
    MPI_Finalize();
    return verdict;
}
