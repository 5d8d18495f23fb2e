/*
 * test_reduce_host.c -- unit test for kernels/reduce_host.c: names, sizes,
 * the op support table, and gpuring_reduce_host() for every supported
 * (type, op) against an independent scalar reference, over many counts,
 * misaligned pointers, in-place aliasing, guard bytes around dst, and
 * fixed wrap-around / logical / signedness cases.  float16 and bfloat16
 * are checked against the test's own reference (exact decode to double,
 * one round-to-nearest-even encode, written independently of the library's
 * bit tricks), on random bit patterns, fixed rounding / overflow /
 * subnormal / nan cases, and every 16-bit pattern against a set of
 * operands.  gpuring_reduce_host_stream (the reduction stored twice, once
 * around the cache) against the same reference.  ends with an
 * informational float-sum throughput line.
 *
 * random data is seeded; the seed is printed and GPURING_TEST_SEED sets it.
 * exit status 0 on pass; the last line is "N passed, N failed".
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */

#include <float.h>
#include <inttypes.h>
#include <math.h> /* INFINITY, NAN, signbit: macros only, no libm */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/reduce.h"
#include "test/unit/unit_test.h"

/* ---- the test's own view of the types (not taken from the library) ----- */
enum { KIND_SINT, KIND_UINT, KIND_FLOAT, KIND_DOUBLE, KIND_HALF, KIND_BF16 };

static const struct {
    gpuring_type_t type;
    const char *name;
    size_t size;
    int kind;
} test_types[] = {
    { GPURING_TYPE_INT8, "int8", 1, KIND_SINT },
    { GPURING_TYPE_UINT8, "uint8", 1, KIND_UINT },
    { GPURING_TYPE_INT16, "int16", 2, KIND_SINT },
    { GPURING_TYPE_UINT16, "uint16", 2, KIND_UINT },
    { GPURING_TYPE_INT32, "int32", 4, KIND_SINT },
    { GPURING_TYPE_UINT32, "uint32", 4, KIND_UINT },
    { GPURING_TYPE_INT64, "int64", 8, KIND_SINT },
    { GPURING_TYPE_UINT64, "uint64", 8, KIND_UINT },
    { GPURING_TYPE_FLOAT, "float", 4, KIND_FLOAT },
    { GPURING_TYPE_DOUBLE, "double", 8, KIND_DOUBLE },
    { GPURING_TYPE_FLOAT16, "float16", 2, KIND_HALF },
    { GPURING_TYPE_BFLOAT16, "bfloat16", 2, KIND_BF16 },
};
#define TEST_NTYPES (sizeof(test_types) / sizeof(test_types[0]))

static const struct {
    gpuring_op_t op;
    const char *name;
    int int_only;
} test_ops[] = {
    { GPURING_OP_SUM, "sum", 0 },   { GPURING_OP_PROD, "prod", 0 },
    { GPURING_OP_MIN, "min", 0 },   { GPURING_OP_MAX, "max", 0 },
    { GPURING_OP_BAND, "band", 1 }, { GPURING_OP_BOR, "bor", 1 },
    { GPURING_OP_BXOR, "bxor", 1 }, { GPURING_OP_LAND, "land", 1 },
    { GPURING_OP_LOR, "lor", 1 },   { GPURING_OP_LXOR, "lxor", 1 },
};
#define TEST_NOPS (sizeof(test_ops) / sizeof(test_ops[0]))

/* ---- scalar reference ---------------------------------------------------- */
/* integers travel as uint64 bit patterns, sign-extended for signed types */
static uint64_t ref_load_int(const void *p, size_t i, size_t size, int kind)
{
    const unsigned char *c = (const unsigned char *)p + i * size;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;

    switch (size) {
    case 1:
        memcpy(&u8, c, 1);
        return kind == KIND_SINT ? (uint64_t)(int64_t)(int8_t)u8 : u8;
    case 2:
        memcpy(&u16, c, 2);
        return kind == KIND_SINT ? (uint64_t)(int64_t)(int16_t)u16 : u16;
    case 4:
        memcpy(&u32, c, 4);
        return kind == KIND_SINT ? (uint64_t)(int64_t)(int32_t)u32 : u32;
    default:
        memcpy(&u64, c, 8);
        return u64;
    }
}

/* store the low size*8 bits of v (modulo 2^bits, no signed conversion) */
static void ref_store_int(void *p, size_t i, size_t size, uint64_t v)
{
    unsigned char *c = (unsigned char *)p + i * size;
    uint8_t u8 = (uint8_t)v;
    uint16_t u16 = (uint16_t)v;
    uint32_t u32 = (uint32_t)v;

    switch (size) {
    case 1: memcpy(c, &u8, 1); break;
    case 2: memcpy(c, &u16, 2); break;
    case 4: memcpy(c, &u32, 4); break;
    default: memcpy(c, &v, 8); break;
    }
}

static uint64_t ref_int_op(gpuring_op_t op, int kind, uint64_t a, uint64_t b)
{
    int sgn = kind == KIND_SINT;
    int lt = sgn ? (int64_t)a < (int64_t)b : a < b;
    int gt = sgn ? (int64_t)a > (int64_t)b : a > b;

    switch (op) {
    case GPURING_OP_SUM: return a + b;   /* low bits are the wrapped sum */
    case GPURING_OP_PROD: return a * b;  /* low bits are the wrapped product */
    case GPURING_OP_MIN: return lt ? a : b;
    case GPURING_OP_MAX: return gt ? a : b;
    case GPURING_OP_BAND: return a & b;
    case GPURING_OP_BOR: return a | b;
    case GPURING_OP_BXOR: return a ^ b;
    case GPURING_OP_LAND: return (a != 0 && b != 0) ? 1 : 0;
    case GPURING_OP_LOR: return (a != 0 || b != 0) ? 1 : 0;
    case GPURING_OP_LXOR: return ((a != 0) != (b != 0)) ? 1 : 0;
    default: abort();
    }
}

static float ref_float_op(gpuring_op_t op, float a, float b)
{
    switch (op) {
    case GPURING_OP_SUM: return a + b;
    case GPURING_OP_PROD: return a * b;
    case GPURING_OP_MIN: return a < b ? a : b;
    case GPURING_OP_MAX: return a > b ? a : b;
    default: abort();
    }
}

static double ref_double_op(gpuring_op_t op, double a, double b)
{
    switch (op) {
    case GPURING_OP_SUM: return a + b;
    case GPURING_OP_PROD: return a * b;
    case GPURING_OP_MIN: return a < b ? a : b;
    case GPURING_OP_MAX: return a > b ? a : b;
    default: abort();
    }
}

/*
 * 16-bit floats: decode exactly to double, operate in double, round once to
 * nearest even.  the double sum is exact for binary16 and correctly rounded
 * for bfloat16 (53 >= 2*8+2 bits, so rounding twice changes nothing);
 * products are exact for both.  any nan result encodes as 0x7fff.  only
 * double arithmetic and integer rounding, no libm.
 */
typedef struct {
    int mbits; /* stored significand bits */
    int ebits; /* exponent bits */
} ref_f16_fmt_t;

static const ref_f16_fmt_t ref_fmt_half = { 10, 5 };
static const ref_f16_fmt_t ref_fmt_bf16 = { 7, 8 };

/* 2^e, exact for any e a double can hold (square and multiply) */
static double ref_pow2(int e)
{
    double r = 1.0, f = e >= 0 ? 2.0 : 0.5;
    unsigned n = (unsigned)(e >= 0 ? e : -e);

    while (n != 0) {
        if (n & 1) {
            r *= f;
        }
        f *= f;
        n >>= 1;
    }
    return r;
}

static double ref_f16_decode(uint16_t h, ref_f16_fmt_t fmt)
{
    const int emask = (1 << fmt.ebits) - 1, bias = emask >> 1;
    const int e = (h >> fmt.mbits) & emask;
    const int m = h & ((1 << fmt.mbits) - 1);
    double v;

    if (e == emask) {
        v = m != 0 ? NAN : INFINITY;
    } else if (e == 0) {
        v = (double)m * ref_pow2(1 - bias - fmt.mbits);
    } else {
        v = (double)(m + (1 << fmt.mbits)) * ref_pow2(e - bias - fmt.mbits);
    }
    return (h & 0x8000) ? -v : v;
}

static uint16_t ref_f16_encode(double v, ref_f16_fmt_t fmt)
{
    const int emask = (1 << fmt.ebits) - 1, bias = emask >> 1;
    const int64_t one = (int64_t)1 << fmt.mbits;
    const uint16_t sign = signbit(v) ? 0x8000 : 0;
    const uint16_t inf = (uint16_t)(sign | (emask << fmt.mbits));
    double a = v < 0 ? -v : v, s, frac;
    uint64_t bits;
    int de, qexp, efield;
    int64_t n;

    if (v != v) {
        return 0x7fff;
    }
    if (a > DBL_MAX) {
        return inf;
    }
    if (a == 0) {
        return sign;
    }
    memcpy(&bits, &a, sizeof(bits)); /* a is a normal double here */
    de = (int)((bits >> 52) & 0x7ff) - 1023;
    /* quantum 2^qexp: an ulp at a's binade, never below the subnormal ulp */
    qexp = (de > 1 - bias ? de : 1 - bias) - fmt.mbits;
    s = a * ref_pow2(-qexp); /* < 2^(mbits+1), exact */
    n = (int64_t)s;
    frac = s - (double)n;
    if (frac > 0.5 || (frac == 0.5 && (n & 1))) {
        n++;
    }
    if (n == 0) {
        return sign;
    }
    if (n == 2 * one) { /* rounded up into the next binade */
        n = one;
        qexp++;
    }
    efield = n >= one ? qexp + fmt.mbits + bias : 0;
    if (efield >= emask) {
        return inf;
    }
    return (uint16_t)(sign | (efield << fmt.mbits) | (int)(n & (one - 1)));
}

static uint16_t ref_f16_op(gpuring_op_t op, ref_f16_fmt_t fmt, uint16_t a, uint16_t b)
{
    double x = ref_f16_decode(a, fmt), y = ref_f16_decode(b, fmt);

    switch (op) {
    case GPURING_OP_SUM: return ref_f16_encode(x + y, fmt);
    case GPURING_OP_PROD: return ref_f16_encode(x * y, fmt);
    case GPURING_OP_MIN: return x < y ? a : b;
    case GPURING_OP_MAX: return x > y ? a : b;
    default: abort();
    }
}

/* out[i] = a[i] op b[i] with type index ti, for i < count */
static void ref_reduce(void *out, const void *a, const void *b, size_t count,
                       size_t ti, gpuring_op_t op)
{
    size_t size = test_types[ti].size;
    int kind = test_types[ti].kind;

    for (size_t i = 0; i < count; i++) {
        if (kind == KIND_FLOAT) {
            float x, y, r;
            memcpy(&x, (const char *)a + i * 4, 4);
            memcpy(&y, (const char *)b + i * 4, 4);
            r = ref_float_op(op, x, y);
            memcpy((char *)out + i * 4, &r, 4);
        } else if (kind == KIND_DOUBLE) {
            double x, y, r;
            memcpy(&x, (const char *)a + i * 8, 8);
            memcpy(&y, (const char *)b + i * 8, 8);
            r = ref_double_op(op, x, y);
            memcpy((char *)out + i * 8, &r, 8);
        } else if (kind == KIND_HALF || kind == KIND_BF16) {
            uint16_t x, y, r;
            memcpy(&x, (const char *)a + i * 2, 2);
            memcpy(&y, (const char *)b + i * 2, 2);
            r = ref_f16_op(op, kind == KIND_HALF ? ref_fmt_half : ref_fmt_bf16, x, y);
            memcpy((char *)out + i * 2, &r, 2);
        } else {
            uint64_t x = ref_load_int(a, i, size, kind);
            uint64_t y = ref_load_int(b, i, size, kind);
            ref_store_int(out, i, size, ref_int_op(op, kind, x, y));
        }
    }
}

/* ---- random data ---------------------------------------------------------- */
/* finite, no nan; mixed magnitudes, some zeros of either sign */
static double test_rand_real(void)
{
    uint64_t r = unit_rng();
    double v;

    if ((r & 31) == 0) {
        return (r & 32) ? -0.0 : 0.0;
    }
    v = (double)((int64_t)(r >> 20 & 0xfffff) - 0x80000) / 1024.0;
    switch ((r >> 8) & 3) {
    case 0: v *= 1e-3; break;
    case 1: v *= 1e3; break;
    default: break;
    }
    return v;
}

static void test_fill_one(void *p, size_t i, size_t ti)
{
    size_t size = test_types[ti].size;
    int kind = test_types[ti].kind;
    uint64_t r = unit_rng();

    if (kind == KIND_FLOAT) {
        float f = (float)test_rand_real();
        memcpy((char *)p + i * 4, &f, 4);
    } else if (kind == KIND_DOUBLE) {
        double d = test_rand_real();
        memcpy((char *)p + i * 8, &d, 8);
    } else if (kind == KIND_HALF || kind == KIND_BF16) {
        /* any bit pattern (nan, inf, subnormals too); half of them with a
         * narrower exponent so that sums and products mostly round */
        uint16_t h = (uint16_t)r;
        if ((r >> 16) & 1) {
            if (kind == KIND_HALF) {
                h = (uint16_t)((h & 0x83ffu) | ((10u + (unsigned)((r >> 20) % 11)) << 10));
            } else {
                h = (uint16_t)((h & 0x807fu) | ((117u + (unsigned)((r >> 20) % 21)) << 7));
            }
        }
        memcpy((char *)p + i * 2, &h, 2);
    } else {
        /* a quarter zeros so the logical ops see both truth values */
        if ((r & 3) == 0) {
            r = 0;
        } else {
            r = unit_rng();
        }
        ref_store_int(p, i, size, r);
    }
}

/* fill a and b; about one element in eight gets b[i] == a[i] (ties) */
static void test_fill(void *a, void *b, size_t count, size_t ti)
{
    size_t size = test_types[ti].size;

    for (size_t i = 0; i < count; i++) {
        test_fill_one(a, i, ti);
        if ((unit_rng() & 7) == 0) {
            memcpy((char *)b + i * size, (char *)a + i * size, size);
        } else {
            test_fill_one(b, i, ti);
        }
    }
}

/* ---- the randomized sweep ------------------------------------------------- */
#define TEST_GUARD 64 /* poison bytes on each side of every buffer */
#define TEST_POISON 0xa5

enum {
    ALIAS_NONE,   /* dst, a, b distinct */
    ALIAS_DST_A,  /* dst == a */
    ALIAS_DST_B,  /* dst == b */
    ALIAS_ALL,    /* dst == a == b */
    ALIAS_A_B,    /* a == b, dst distinct */
    ALIAS_COUNT
};
static const char *const test_alias_names[ALIAS_COUNT] = {
    "distinct", "dst==a", "dst==b", "dst==a==b", "a==b",
};

typedef struct {
    unsigned char *mem; /* guard + (max count + 1) elements + guard */
    size_t bytes;
} test_buf_t;

static void test_buf_alloc(test_buf_t *buf, size_t max_count)
{
    buf->bytes = 2 * TEST_GUARD + (max_count + 1) * 8;
    buf->mem = malloc(buf->bytes);
    if (buf->mem == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
}

/* index of the first byte outside [lo, hi) that is not poison, or -1 */
static long test_guard_check(const test_buf_t *buf, size_t lo, size_t hi)
{
    for (size_t i = 0; i < buf->bytes; i++) {
        if ((i < lo || i >= hi) && buf->mem[i] != TEST_POISON) {
            return (long)i;
        }
    }
    return -1;
}

static void test_describe_mismatch(size_t ti, const void *got,
                                   const void *want, size_t count,
                                   char *out, size_t outlen)
{
    size_t size = test_types[ti].size;
    int kind = test_types[ti].kind;

    for (size_t i = 0; i < count; i++) {
        if (memcmp((const char *)got + i * size, (const char *)want + i * size,
                   size) == 0) {
            continue;
        }
        if (kind == KIND_FLOAT) {
            float g, w;
            memcpy(&g, (const char *)got + i * 4, 4);
            memcpy(&w, (const char *)want + i * 4, 4);
            snprintf(out, outlen, "element %zu: got %a want %a", i, g, w);
        } else if (kind == KIND_DOUBLE) {
            double g, w;
            memcpy(&g, (const char *)got + i * 8, 8);
            memcpy(&w, (const char *)want + i * 8, 8);
            snprintf(out, outlen, "element %zu: got %a want %a", i, g, w);
        } else {
            snprintf(out, outlen, "element %zu: got 0x%" PRIx64
                     " want 0x%" PRIx64, i,
                     ref_load_int(got, i, size, KIND_UINT),
                     ref_load_int(want, i, size, KIND_UINT));
        }
        return;
    }
    snprintf(out, outlen, "(no differing element)");
}

/*
 * one case: fresh random inputs at the given element offsets (0 or 1) and
 * aliasing, run the library, compare dst with the reference, check guard
 * bytes and that inputs not aliased with dst are unchanged.
 */
static void test_case(size_t ti, size_t oi, size_t count, const size_t off[3],
                      int alias, test_buf_t bufs[3], unsigned char *saved_a,
                      unsigned char *saved_b, unsigned char *want)
{
    size_t size = test_types[ti].size;
    gpuring_op_t op = test_ops[oi].op;
    test_buf_t *bd = &bufs[0], *ba = &bufs[1], *bb = &bufs[2];
    unsigned char *d, *a, *b;
    size_t lo, hi;
    long bad;
    char msg[160];
    int ok = 1;

    /* which buffer backs which pointer */
    if (alias == ALIAS_DST_A || alias == ALIAS_ALL) {
        ba = bd;
    }
    if (alias == ALIAS_DST_B || alias == ALIAS_ALL) {
        bb = bd;
    }
    if (alias == ALIAS_A_B) {
        bb = ba;
    }
    for (int i = 0; i < 3; i++) {
        memset(bufs[i].mem, TEST_POISON, bufs[i].bytes);
    }
    d = bd->mem + TEST_GUARD + off[0];
    a = ba->mem + TEST_GUARD + off[ba == bd ? 0 : 1];
    b = bb->mem + TEST_GUARD + off[bb == bd ? 0 : (bb == ba ? 1 : 2)];

    test_fill(a, b, count, ti);  /* a == b: b's values win, fine */
    memcpy(saved_a, a, count * size);
    memcpy(saved_b, b, count * size);
    ref_reduce(want, saved_a, saved_b, count, ti, op);
    /* save the input buffers whole, to check they are not written */
    unsigned char *a_whole = malloc(ba->bytes), *b_whole = malloc(bb->bytes);
    if (a_whole == NULL || b_whole == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    memcpy(a_whole, ba->mem, ba->bytes);
    memcpy(b_whole, bb->mem, bb->bytes);

    gpuring_reduce_host(d, a, b, count, test_types[ti].type, op);

    snprintf(msg, sizeof(msg), "%s %s count=%zu byte offsets %zu/%zu/%zu %s",
             test_types[ti].name, test_ops[oi].name, count, off[0], off[1],
             off[2], test_alias_names[alias]);
    if (memcmp(d, want, count * size) != 0) {
        char detail[128];
        test_describe_mismatch(ti, d, want, count, detail, sizeof(detail));
        unit_result(0, "%s: wrong result, %s", msg, detail);
        ok = 0;
    }
    lo = (size_t)(d - bd->mem);
    hi = lo + count * size;
    bad = test_guard_check(bd, lo, hi);
    if (ok && bad >= 0) {
        unit_result(0, "%s: dst buffer byte %ld outside [%zu, %zu) written",
                    msg, bad, lo, hi);
        ok = 0;
    }
    if (ok && ba != bd && memcmp(a_whole, ba->mem, ba->bytes) != 0) {
        unit_result(0, "%s: input a modified", msg);
        ok = 0;
    }
    if (ok && bb != bd && memcmp(b_whole, bb->mem, bb->bytes) != 0) {
        unit_result(0, "%s: input b modified", msg);
        ok = 0;
    }
    if (ok) {
        unit_result(1, "%s", msg);
    }
    free(a_whole);
    free(b_whole);
}

static void test_sweep(void)
{
    static const size_t counts[] = { 0, 1, 2, 3, 7, 15, 16, 17, 31, 33,
                                     1000, 4099 };
    const size_t ncounts = sizeof(counts) / sizeof(counts[0]);
    const size_t max_count = 4099;
    test_buf_t bufs[3];
    unsigned char *saved_a = malloc(max_count * 8 + 8);
    unsigned char *saved_b = malloc(max_count * 8 + 8);
    unsigned char *want = malloc(max_count * 8 + 8);

    if (saved_a == NULL || saved_b == NULL || want == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (int i = 0; i < 3; i++) {
        test_buf_alloc(&bufs[i], max_count);
    }
    for (size_t ti = 0; ti < TEST_NTYPES; ti++) {
        int is_int = test_types[ti].kind == KIND_SINT ||
                     test_types[ti].kind == KIND_UINT;
        for (size_t oi = 0; oi < TEST_NOPS; oi++) {
            if (test_ops[oi].int_only && !is_int) {
                continue;
            }
            for (size_t ci = 0; ci < ncounts; ci++) {
                for (int alias = 0; alias < ALIAS_COUNT; alias++) {
                    /* m < 8: each pointer at element offset 0 or 1 (bits of m);
                     * m == 8: all three one byte off their element alignment,
                     * as MPI lets user buffers be (defined behaviour required:
                     * the UBSan build of this test checks it) */
                    for (unsigned m = 0; m < 9; m++) {
                        size_t size = test_types[ti].size;
                        size_t off[3] = { (m & 1) * size, ((m >> 1) & 1) * size,
                                          ((m >> 2) & 1) * size };
                        if (m == 8) {
                            if (size == 1) continue;
                            off[0] = off[1] = off[2] = 1;
                        }
                        /* aliased pointers share one offset: skip repeats */
                        if ((alias == ALIAS_DST_A || alias == ALIAS_ALL) &&
                            off[1] != 0) {
                            continue;
                        }
                        if ((alias == ALIAS_DST_B || alias == ALIAS_ALL ||
                             alias == ALIAS_A_B) && off[2] != 0) {
                            continue;
                        }
                        test_case(ti, oi, counts[ci], off, alias, bufs,
                                  saved_a, saved_b, want);
                    }
                }
            }
        }
    }
    for (int i = 0; i < 3; i++) {
        free(bufs[i].mem);
    }
    free(saved_a);
    free(saved_b);
    free(want);
}

/* ---- fixed cases ---------------------------------------------------------- */
/* run op on n given elements (dst distinct and in place) and compare */
static void test_fixed(const char *what, gpuring_type_t type, gpuring_op_t op,
                       const void *a, const void *b, const void *want,
                       size_t n, size_t size)
{
    unsigned char dst[64], inplace[64];

    memset(dst, TEST_POISON, sizeof(dst));
    gpuring_reduce_host(dst, a, b, n, type, op);
    unit_result(memcmp(dst, want, n * size) == 0, "fixed %s", what);

    memcpy(inplace, a, n * size);
    gpuring_reduce_host(inplace, inplace, b, n, type, op);
    unit_result(memcmp(inplace, want, n * size) == 0, "fixed %s (in place)",
                what);
}

#define FIXED(_what, _type, _op, _t, _a, _b, _w)                             \
    do {                                                                     \
        const _t fa[] = _a, fb[] = _b, fw[] = _w;                            \
        _Static_assert(sizeof(fa) == sizeof(fb) && sizeof(fa) == sizeof(fw), \
                       "fixed case arrays differ");                          \
        test_fixed(_what, _type, _op, fa, fb, fw, sizeof(fa) / sizeof(_t),   \
                   sizeof(_t));                                              \
    } while (0)
#define L(...) { __VA_ARGS__ }

static void test_fixed_cases(void)
{
    /* signed sum wraps like two's complement */
    FIXED("int8 sum wrap", GPURING_TYPE_INT8, GPURING_OP_SUM, int8_t,
          L(127, -128, 100, -100), L(1, -1, 100, -100),
          L(-128, 127, -56, 56));
    FIXED("uint8 sum wrap", GPURING_TYPE_UINT8, GPURING_OP_SUM, uint8_t,
          L(255, 200, 0), L(1, 100, 0), L(0, 44, 0));
    FIXED("int16 sum wrap", GPURING_TYPE_INT16, GPURING_OP_SUM, int16_t,
          L(32767, -32768), L(1, -1), L(-32768, 32767));
    FIXED("uint16 sum wrap", GPURING_TYPE_UINT16, GPURING_OP_SUM, uint16_t,
          L(65535, 65535), L(1, 65535), L(0, 65534));
    FIXED("int32 sum wrap", GPURING_TYPE_INT32, GPURING_OP_SUM, int32_t,
          L(INT32_MAX, INT32_MIN), L(1, -1), L(INT32_MIN, INT32_MAX));
    FIXED("uint32 sum wrap", GPURING_TYPE_UINT32, GPURING_OP_SUM, uint32_t,
          L(UINT32_MAX), L(2), L(1));
    FIXED("int64 sum wrap", GPURING_TYPE_INT64, GPURING_OP_SUM, int64_t,
          L(INT64_MAX, INT64_MIN), L(1, -1), L(INT64_MIN, INT64_MAX));
    FIXED("uint64 sum wrap", GPURING_TYPE_UINT64, GPURING_OP_SUM, uint64_t,
          L(UINT64_MAX), L(2), L(1));

    /* products wrap, including the int-promotion traps of 8/16 bits */
    FIXED("int8 prod wrap", GPURING_TYPE_INT8, GPURING_OP_PROD, int8_t,
          L(64, -128, 16, -3), L(2, -1, 16, 5), L(-128, -128, 0, -15));
    FIXED("uint8 prod wrap", GPURING_TYPE_UINT8, GPURING_OP_PROD, uint8_t,
          L(255, 16), L(255, 16), L(1, 0));
    FIXED("int16 prod wrap", GPURING_TYPE_INT16, GPURING_OP_PROD, int16_t,
          L(-32768, 256, 181, 182), L(-1, 256, 181, 182),
          L(-32768, 0, 32761, -32412));
    FIXED("uint16 prod wrap", GPURING_TYPE_UINT16, GPURING_OP_PROD, uint16_t,
          L(65535, 256, 3), L(65535, 256, 5), L(1, 0, 15));
    FIXED("int32 prod wrap", GPURING_TYPE_INT32, GPURING_OP_PROD, int32_t,
          L(INT32_MIN, 65536, 46341, -7), L(-1, 65536, 46341, 6),
          L(INT32_MIN, 0, -2147479015, -42));
    FIXED("uint32 prod wrap", GPURING_TYPE_UINT32, GPURING_OP_PROD, uint32_t,
          L(UINT32_MAX, 65536), L(UINT32_MAX, 65536), L(1, 0));
    FIXED("int64 prod wrap", GPURING_TYPE_INT64, GPURING_OP_PROD, int64_t,
          L(INT64_MIN, INT64_C(1) << 32, -7), L(-1, INT64_C(1) << 32, 6),
          L(INT64_MIN, 0, -42));
    FIXED("uint64 prod wrap", GPURING_TYPE_UINT64, GPURING_OP_PROD, uint64_t,
          L(UINT64_MAX, UINT64_C(1) << 32), L(UINT64_MAX, UINT64_C(1) << 32),
          L(1, 0));

    /* min/max honour signedness */
    FIXED("int8 min", GPURING_TYPE_INT8, GPURING_OP_MIN, int8_t,
          L(-1, 1, -128), L(1, -1, 127), L(-1, -1, -128));
    FIXED("uint8 min", GPURING_TYPE_UINT8, GPURING_OP_MIN, uint8_t,
          L(255, 1), L(1, 255), L(1, 1));
    FIXED("int16 max", GPURING_TYPE_INT16, GPURING_OP_MAX, int16_t,
          L(-1, -32768), L(1, 32767), L(1, 32767));
    FIXED("uint16 max", GPURING_TYPE_UINT16, GPURING_OP_MAX, uint16_t,
          L(65535, 0), L(1, 1), L(65535, 1));
    FIXED("int32 min", GPURING_TYPE_INT32, GPURING_OP_MIN, int32_t,
          L(INT32_MIN, -1), L(INT32_MAX, 0), L(INT32_MIN, -1));
    FIXED("uint32 max", GPURING_TYPE_UINT32, GPURING_OP_MAX, uint32_t,
          L(UINT32_MAX, 0), L(0, 1), L(UINT32_MAX, 1));
    FIXED("int64 min", GPURING_TYPE_INT64, GPURING_OP_MIN, int64_t,
          L(INT64_MIN, -1), L(INT64_MAX, 0), L(INT64_MIN, -1));
    FIXED("int64 max", GPURING_TYPE_INT64, GPURING_OP_MAX, int64_t,
          L(INT64_MIN, -1), L(INT64_MAX, 0), L(INT64_MAX, 0));
    FIXED("uint64 min", GPURING_TYPE_UINT64, GPURING_OP_MIN, uint64_t,
          L(UINT64_MAX, 0), L(1, 1), L(1, 0));
    FIXED("uint64 max", GPURING_TYPE_UINT64, GPURING_OP_MAX, uint64_t,
          L(UINT64_MAX, 0), L(1, 1), L(UINT64_MAX, 1));

    /* logical ops give 0/1 and use truth, not bits */
    FIXED("int32 land", GPURING_TYPE_INT32, GPURING_OP_LAND, int32_t,
          L(2, 0, -5, 0), L(4, 3, -1, 0), L(1, 0, 1, 0));
    FIXED("int32 band", GPURING_TYPE_INT32, GPURING_OP_BAND, int32_t,
          L(2, 6, -1), L(4, 3, 0x1234), L(0, 2, 0x1234));
    FIXED("int32 lor", GPURING_TYPE_INT32, GPURING_OP_LOR, int32_t,
          L(0, 0, 8, -7), L(0, -7, 0, 9), L(0, 1, 1, 1));
    FIXED("int32 lxor", GPURING_TYPE_INT32, GPURING_OP_LXOR, int32_t,
          L(2, 0, 0, -1), L(4, 5, 0, 0), L(0, 1, 0, 1));
    FIXED("uint8 land", GPURING_TYPE_UINT8, GPURING_OP_LAND, uint8_t,
          L(0x80, 0x80, 0), L(0x01, 0, 0xff), L(1, 0, 0));
    FIXED("int8 lxor", GPURING_TYPE_INT8, GPURING_OP_LXOR, int8_t,
          L(-128, -128, 0), L(1, 0, 0), L(0, 1, 0));
    FIXED("int16 lor", GPURING_TYPE_INT16, GPURING_OP_LOR, int16_t,
          L(0, 0x100, 0), L(0x4000, 0, 0), L(1, 1, 0));
    /* high bits only: a narrowing to int would see zero */
    FIXED("int64 land high bits", GPURING_TYPE_INT64, GPURING_OP_LAND,
          int64_t, L(INT64_C(1) << 40, INT64_MIN, 0),
          L(INT64_C(1) << 33, INT64_C(1) << 62, INT64_C(1) << 50),
          L(1, 1, 0));
    FIXED("uint64 lor high bits", GPURING_TYPE_UINT64, GPURING_OP_LOR,
          uint64_t, L(UINT64_C(1) << 63, 0), L(0, 0), L(1, 0));
    FIXED("uint64 lxor high bits", GPURING_TYPE_UINT64, GPURING_OP_LXOR,
          uint64_t, L(UINT64_C(1) << 63, UINT64_C(1) << 32),
          L(UINT64_C(1) << 40, 0), L(0, 1));
    FIXED("uint16 bxor", GPURING_TYPE_UINT16, GPURING_OP_BXOR, uint16_t,
          L(0xff00, 0xffff), L(0x0ff0, 0xffff), L(0xf0f0, 0));
    FIXED("uint32 bor", GPURING_TYPE_UINT32, GPURING_OP_BOR, uint32_t,
          L(0xf0000000u, 0), L(0x0000000fu, 0), L(0xf000000fu, 0));

    /* floating point: one ieee op per element, overflow to inf */
    FIXED("float prod overflow", GPURING_TYPE_FLOAT, GPURING_OP_PROD, float,
          L(FLT_MAX, -FLT_MAX, 0.5f), L(2.0f, 2.0f, 0.25f),
          L(1.0f / 0.0f, -1.0f / 0.0f, 0.125f));
    FIXED("float sum", GPURING_TYPE_FLOAT, GPURING_OP_SUM, float,
          L(1.0f, 16777216.0f, -2.5f), L(2.0f, 1.0f, 2.5f),
          L(3.0f, 16777216.0f, 0.0f));
    FIXED("double sum", GPURING_TYPE_DOUBLE, GPURING_OP_SUM, double,
          L(1.0, 9007199254740992.0, 0.5), L(2.0, 1.0, 0.25),
          L(3.0, 9007199254740992.0, 0.75));
    FIXED("double min", GPURING_TYPE_DOUBLE, GPURING_OP_MIN, double,
          L(-1e300, 3.0, -0.0), L(1e300, 2.0, -1.0), L(-1e300, 2.0, -1.0));
    FIXED("float max", GPURING_TYPE_FLOAT, GPURING_OP_MAX, float,
          L(-1e30f, 3.0f), L(1e30f, 2.0f), L(1e30f, 3.0f));

    /* float16 bit patterns: 0x3c00 = 1, 0x1000 = 2^-11 (half an ulp of 1),
     * 0x7bff = 65504 (max), 0x4c00 = 16, 0x4800 = 8, 0x0001 = 2^-24,
     * 0x3800 = 0.5, 0x7c00 = inf, 0x7e00 = nan */
    FIXED("float16 sum ties to even", GPURING_TYPE_FLOAT16, GPURING_OP_SUM, uint16_t,
          L(0x3c00, 0x3c01, 0x3c00, 0xbc01), L(0x1000, 0x1000, 0x1001, 0x9000),
          L(0x3c00, 0x3c02, 0x3c01, 0xbc02));
    FIXED("float16 sum overflow", GPURING_TYPE_FLOAT16, GPURING_OP_SUM, uint16_t,
          L(0x7bff, 0x7bff, 0xfbff, 0x7bff), L(0x4c00, 0x4800, 0xcc00, 0x7bff),
          L(0x7c00, 0x7bff, 0xfc00, 0x7c00));
    FIXED("float16 sum subnormal", GPURING_TYPE_FLOAT16, GPURING_OP_SUM, uint16_t,
          L(0x0001, 0x03ff, 0x8001, 0x0001, 0x8000),
          L(0x0001, 0x0001, 0x0001, 0x8002, 0x8000),
          L(0x0002, 0x0400, 0x0000, 0x8001, 0x8000));
    FIXED("float16 prod subnormal rounding", GPURING_TYPE_FLOAT16, GPURING_OP_PROD, uint16_t,
          L(0x0001, 0x0003, 0x0001, 0x0400, 0x0005),
          L(0x3800, 0x3800, 0xb800, 0x0400, 0x3800),
          L(0x0000, 0x0002, 0x8000, 0x0000, 0x0002));
    FIXED("float16 nan results are 0x7fff", GPURING_TYPE_FLOAT16, GPURING_OP_SUM, uint16_t,
          L(0x7e00, 0xfc01, 0x7c00, 0x3c00), L(0x3c00, 0x0000, 0xfc00, 0xfe12),
          L(0x7fff, 0x7fff, 0x7fff, 0x7fff));
    FIXED("float16 prod inf * 0", GPURING_TYPE_FLOAT16, GPURING_OP_PROD, uint16_t,
          L(0x7c00, 0x7bff), L(0x8000, 0x4000), L(0x7fff, 0x7c00));
    FIXED("float16 min keeps operand bits", GPURING_TYPE_FLOAT16, GPURING_OP_MIN, uint16_t,
          L(0x7e01, 0x3c00, 0x8000, 0x0000, 0xbc00, 0x0001),
          L(0x3c00, 0x7e01, 0x0000, 0x8000, 0x3c00, 0x0002),
          L(0x3c00, 0x7e01, 0x0000, 0x8000, 0xbc00, 0x0001));
    FIXED("float16 max keeps operand bits", GPURING_TYPE_FLOAT16, GPURING_OP_MAX, uint16_t,
          L(0xfe01, 0x3c00, 0x0000, 0x7c00), L(0x3c00, 0xfe01, 0x8000, 0x7bff),
          L(0x3c00, 0xfe01, 0x8000, 0x7c00));

    /* bfloat16: 0x3f80 = 1, 0x3b80 = 2^-8 (half an ulp of 1), 0x7f7f =
     * max, 0x7b00 = 2^119 (half an ulp of max), 0x0001 = 2^-133,
     * 0x3f00 = 0.5, 0x7f80 = inf */
    FIXED("bfloat16 sum ties to even", GPURING_TYPE_BFLOAT16, GPURING_OP_SUM, uint16_t,
          L(0x3f80, 0x3f81, 0x3f80), L(0x3b80, 0x3b80, 0x3b81), L(0x3f80, 0x3f82, 0x3f81));
    FIXED("bfloat16 sum overflow", GPURING_TYPE_BFLOAT16, GPURING_OP_SUM, uint16_t,
          L(0x7f7f, 0x7f7f, 0xff7f, 0x7f7f), L(0x7b00, 0x7a80, 0xfb00, 0x7300),
          L(0x7f80, 0x7f7f, 0xff80, 0x7f7f));
    FIXED("bfloat16 prod subnormal rounding", GPURING_TYPE_BFLOAT16, GPURING_OP_PROD, uint16_t,
          L(0x0001, 0x0003, 0x0001, 0x0080, 0x007f),
          L(0x3f00, 0x3f00, 0xbf00, 0x0080, 0x4000),
          L(0x0000, 0x0002, 0x8000, 0x0000, 0x00fe));
    FIXED("bfloat16 nan results are 0x7fff", GPURING_TYPE_BFLOAT16, GPURING_OP_PROD, uint16_t,
          L(0x7fc1, 0xffc0, 0x7f80, 0xff81), L(0x3f80, 0x0000, 0x0000, 0x3f80),
          L(0x7fff, 0x7fff, 0x7fff, 0x7fff));
    FIXED("bfloat16 max keeps operand bits", GPURING_TYPE_BFLOAT16, GPURING_OP_MAX, uint16_t,
          L(0x7fc1, 0x3f80, 0x8000, 0x0001), L(0x3f80, 0x7fc1, 0x0000, 0x0000),
          L(0x3f80, 0x7fc1, 0x0000, 0x0001));
}

/* ---- every 16-bit pattern against a set of operands ----------------------- */
static void test_f16_all_patterns(void)
{
    static const uint16_t half_ops[] = {
        0x0000, 0x8000, 0x3c00, 0xbc00, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff,
        0x7c00, 0xfc00, 0x7e00, 0xfd55, 0x3800, 0x4200, 0x1000, 0x1400, 0x5bff, 0x2e66,
    };
    static const uint16_t bf16_ops[] = {
        0x0000, 0x8000, 0x3f80, 0xbf80, 0x0001, 0x8001, 0x007f, 0x0080, 0x7f7f, 0xff7f,
        0x7f80, 0xff80, 0x7fc0, 0xffa5, 0x3f00, 0x4040, 0x3b80, 0x7b00, 0x5f7f, 0x2e66,
    };
    enum { NOPS = sizeof(half_ops) / sizeof(half_ops[0]), NRAND = 6, N = 65536 };
    uint16_t *all = malloc(N * 2), *same = malloc(N * 2), *got = malloc(N * 2);
    static const gpuring_op_t ops[] = { GPURING_OP_SUM, GPURING_OP_PROD, GPURING_OP_MIN,
                                        GPURING_OP_MAX };

    _Static_assert(sizeof(half_ops) == sizeof(bf16_ops), "operand lists differ");
    if (all == NULL || same == NULL || got == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < N; i++) {
        all[i] = (uint16_t)i;
    }
    for (int t = 0; t < 2; t++) {
        gpuring_type_t type = t ? GPURING_TYPE_BFLOAT16 : GPURING_TYPE_FLOAT16;
        ref_f16_fmt_t fmt = t ? ref_fmt_bf16 : ref_fmt_half;
        for (size_t oi = 0; oi < sizeof(ops) / sizeof(ops[0]); oi++) {
            for (size_t k = 0; k < NOPS + NRAND; k++) {
                uint16_t y = k < NOPS ? (t ? bf16_ops[k] : half_ops[k]) : (uint16_t)unit_rng();
                for (int order = 0; order < 2; order++) {
                    size_t bad = N;
                    for (size_t i = 0; i < N; i++) {
                        same[i] = y;
                    }
                    /* order 0: pattern op y; order 1: y op pattern */
                    gpuring_reduce_host(got, order ? same : all, order ? all : same, N, type,
                                        ops[oi]);
                    for (size_t i = 0; i < N && bad == N; i++) {
                        uint16_t x = (uint16_t)i;
                        uint16_t w = order ? ref_f16_op(ops[oi], fmt, y, x)
                                           : ref_f16_op(ops[oi], fmt, x, y);
                        if (got[i] != w) {
                            bad = i;
                        }
                    }
                    if (bad == N) {
                        unit_result(1, "all patterns");
                        continue;
                    }
                    uint16_t x = (uint16_t)bad;
                    unit_result(0, "%s %s all patterns: 0x%04x %s 0x%04x = 0x%04x, want 0x%04x",
                                gpuring_type_name(type), gpuring_op_name(ops[oi]),
                                order ? y : x, gpuring_op_name(ops[oi]), order ? x : y,
                                got[bad],
                                order ? ref_f16_op(ops[oi], fmt, y, x)
                                      : ref_f16_op(ops[oi], fmt, x, y));
                }
            }
        }
    }
    free(all);
    free(same);
    free(got);
}

/* ---- names, sizes, support table, no-op paths ---------------------------- */
static void test_tables(void)
{
    for (size_t ti = 0; ti < TEST_NTYPES; ti++) {
        gpuring_type_t t = test_types[ti].type;
        const char *name = gpuring_type_name(t);
        unit_result(gpuring_type_size(t) == test_types[ti].size,
                    "gpuring_type_size(%s) = %zu, want %zu",
                    test_types[ti].name, gpuring_type_size(t),
                    test_types[ti].size);
        unit_result(name != NULL && strcmp(name, test_types[ti].name) == 0,
                    "gpuring_type_name(%d) = %s, want %s", (int)t,
                    name ? name : "(null)", test_types[ti].name);
    }
    for (size_t oi = 0; oi < TEST_NOPS; oi++) {
        const char *name = gpuring_op_name(test_ops[oi].op);
        unit_result(name != NULL && strcmp(name, test_ops[oi].name) == 0,
                    "gpuring_op_name(%d) = %s, want %s", (int)test_ops[oi].op,
                    name ? name : "(null)", test_ops[oi].name);
    }
    unit_result(gpuring_type_size(GPURING_TYPE_COUNT) == 0,
                "gpuring_type_size(GPURING_TYPE_COUNT) != 0");
    unit_result(gpuring_type_name(GPURING_TYPE_COUNT) != NULL &&
                gpuring_type_name((gpuring_type_t)-1) != NULL,
                "gpuring_type_name(invalid) returned NULL");
    unit_result(gpuring_op_name(GPURING_OP_COUNT) != NULL &&
                gpuring_op_name((gpuring_op_t)-1) != NULL,
                "gpuring_op_name(invalid) returned NULL");

    /* support truth table: every op on integers, arithmetic on floats */
    for (size_t ti = 0; ti < TEST_NTYPES; ti++) {
        int is_int = test_types[ti].kind == KIND_SINT ||
                     test_types[ti].kind == KIND_UINT;
        for (size_t oi = 0; oi < TEST_NOPS; oi++) {
            int want = is_int || !test_ops[oi].int_only;
            int got = gpuring_op_supported(test_types[ti].type,
                                           test_ops[oi].op);
            unit_result(got == want, "gpuring_op_supported(%s, %s) = %d, "
                        "want %d", test_types[ti].name, test_ops[oi].name,
                        got, want);
        }
    }
    for (size_t ti = 0; ti < TEST_NTYPES; ti++) {
        int want = test_types[ti].kind == KIND_SINT || test_types[ti].kind == KIND_UINT;
        unit_result(gpuring_type_is_integer(test_types[ti].type) == want,
                    "gpuring_type_is_integer(%s) != %d", test_types[ti].name, want);
    }
    unit_result(!gpuring_type_is_integer(GPURING_TYPE_COUNT) &&
                !gpuring_type_is_integer((gpuring_type_t)-1),
                "gpuring_type_is_integer(out of range) != 0");
    unit_result(!gpuring_op_supported(GPURING_TYPE_COUNT, GPURING_OP_SUM) &&
                !gpuring_op_supported(GPURING_TYPE_INT32, GPURING_OP_COUNT) &&
                !gpuring_op_supported((gpuring_type_t)-1, GPURING_OP_SUM) &&
                !gpuring_op_supported(GPURING_TYPE_INT32, (gpuring_op_t)-1),
                "gpuring_op_supported(out of range) != 0");
}

static void test_noops(void)
{
    float fa[4] = { 1, 2, 3, 4 }, fb[4] = { 5, 6, 7, 8 }, fd[4];
    int32_t ia[4] = { 1, 2, 3, 4 }, ib[4] = { 5, 6, 7, 8 }, id[4];
    const unsigned char poison[16] = {
        TEST_POISON, TEST_POISON, TEST_POISON, TEST_POISON,
        TEST_POISON, TEST_POISON, TEST_POISON, TEST_POISON,
        TEST_POISON, TEST_POISON, TEST_POISON, TEST_POISON,
        TEST_POISON, TEST_POISON, TEST_POISON, TEST_POISON,
    };
    static const gpuring_op_t int_only[] = {
        GPURING_OP_BAND, GPURING_OP_BOR, GPURING_OP_BXOR,
        GPURING_OP_LAND, GPURING_OP_LOR, GPURING_OP_LXOR,
    };

    for (size_t i = 0; i < sizeof(int_only) / sizeof(int_only[0]); i++) {
        double da[2] = { 1, 2 }, db[2] = { 3, 4 }, dd[2];
        memset(fd, TEST_POISON, sizeof(fd));
        gpuring_reduce_host(fd, fa, fb, 4, GPURING_TYPE_FLOAT, int_only[i]);
        unit_result(memcmp(fd, poison, sizeof(fd)) == 0,
                    "float %s (unsupported) wrote dst", test_ops[4 + i].name);
        memset(dd, TEST_POISON, sizeof(dd));
        gpuring_reduce_host(dd, da, db, 2, GPURING_TYPE_DOUBLE, int_only[i]);
        unit_result(memcmp(dd, poison, sizeof(dd)) == 0,
                    "double %s (unsupported) wrote dst", test_ops[4 + i].name);
        for (int t = 0; t < 2; t++) {
            uint16_t ha[4] = { 0x3c00, 1, 2, 3 }, hb[4] = { 0x3c00, 4, 5, 6 }, hd[4];
            gpuring_type_t ty = t ? GPURING_TYPE_BFLOAT16 : GPURING_TYPE_FLOAT16;
            memset(hd, TEST_POISON, sizeof(hd));
            gpuring_reduce_host(hd, ha, hb, 4, ty, int_only[i]);
            unit_result(memcmp(hd, poison, sizeof(hd)) == 0, "%s %s (unsupported) wrote dst",
                        gpuring_type_name(ty), test_ops[4 + i].name);
        }
    }
    memset(id, TEST_POISON, sizeof(id));
    gpuring_reduce_host(id, ia, ib, 4, GPURING_TYPE_COUNT, GPURING_OP_SUM);
    gpuring_reduce_host(id, ia, ib, 4, GPURING_TYPE_INT32, GPURING_OP_COUNT);
    gpuring_reduce_host(id, ia, ib, 4, (gpuring_type_t)-1, GPURING_OP_SUM);
    unit_result(memcmp(id, poison, sizeof(id)) == 0,
                "invalid type/op wrote dst");

    /* count 0 touches nothing, not even the pointers */
    gpuring_reduce_host(NULL, NULL, NULL, 0, GPURING_TYPE_INT32,
                        GPURING_OP_SUM);
    gpuring_reduce_host(id, ia, ib, 0, GPURING_TYPE_INT32, GPURING_OP_SUM);
    unit_result(memcmp(id, poison, sizeof(id)) == 0, "count 0 wrote dst");
}

/* ---- informational throughput --------------------------------------------- */
static double test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_throughput(void)
{
    const size_t bytes = (size_t)64 << 20;
    const size_t n = bytes / sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes), *d = malloc(bytes);
    double best = 1e30, best_inplace = 1e30;

    if (a == NULL || b == NULL || d == NULL) {
        printf("throughput: skipped (out of memory)\n");
        free(a);
        free(b);
        free(d);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)(i & 1023);
        b[i] = 1.0f;
        d[i] = 0.0f;
    }
    for (int it = 0; it < 6; it++) {
        double t0 = test_now();
        gpuring_reduce_host(d, a, b, n, GPURING_TYPE_FLOAT, GPURING_OP_SUM);
        double t1 = test_now();
        gpuring_reduce_host(a, a, b, n, GPURING_TYPE_FLOAT, GPURING_OP_SUM);
        double t2 = test_now();
        if (t1 - t0 < best) best = t1 - t0;
        if (t2 - t1 < best_inplace) best_inplace = t2 - t1;
    }
    /* bytes counted: two 64 MiB reads and one 64 MiB write per call */
    printf("throughput (informational): float sum 64 MiB: %.2f GB/s "
           "(dst distinct), %.2f GB/s (in place), counting 3 x 64 MiB "
           "per call, best of 6\n",
           3.0 * (double)bytes / best / 1e9,
           3.0 * (double)bytes / best_inplace / 1e9);
    free(a);
    free(b);
    free(d);
}

/* ---- the reduction stored twice (gpuring_reduce_host_stream) ------------- */
/* Both copies against the reference, for every (type, op), counts around
 * the 64-byte lines, stream at each alignment within a line (those off the
 * element grid refused, untouched), stream distinct from or equal to a;
 * poison around both stores. */
static void test_stream(void)
{
    enum { MAXC = 1100, LINE = 64, SPAN = MAXC * 8 + 2 * LINE };
    static const size_t counts[] = { 0, 1, 3, 7, 16, 17, 33, 100, 257, 1000, MAXC };
    static unsigned char sbuf[SPAN + 2 * LINE] __attribute__((aligned(64)));
    static unsigned char dbuf[SPAN], abuf[MAXC * 8], bbuf[MAXC * 8], want[MAXC * 8];
    unsigned long refused = 0, streamed = 0;

    for (size_t ti = 0; ti < TEST_NTYPES; ti++) {
        const size_t es = test_types[ti].size;
        const int has = test_types[ti].kind != KIND_HALF && test_types[ti].kind != KIND_BF16;

        for (size_t oi = 0; oi < TEST_NOPS; oi++) {
            const gpuring_op_t op = test_ops[oi].op;

            if (!gpuring_op_supported(test_types[ti].type, op)) continue;
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                const size_t n = counts[ci], bytes = n * es;

                for (size_t off = 0; off < LINE; off += (off % 8 == 0 ? 1 : 7)) {
                    for (int alias = 0; alias < 2; alias++) {
                        unsigned char *stream = sbuf + LINE + off, *dst = dbuf + 8;
                        const void *a = alias ? (const void *)stream : (const void *)abuf;
                        const int ok = has && off % es == 0;
                        long bad = -1;
                        int rc;

                        memset(sbuf, TEST_POISON, sizeof(sbuf));
                        memset(dbuf, TEST_POISON, sizeof(dbuf));
                        test_fill(abuf, bbuf, n, ti);
                        if (alias) memcpy(stream, abuf, bytes);
                        ref_reduce(want, abuf, bbuf, n, ti, op);
                        rc = gpuring_reduce_host_stream(stream, dst, a, bbuf, n,
                                                        test_types[ti].type, op);
                        for (size_t i = 0; i < sizeof(sbuf) && bad < 0; i++) {
                            const int in = sbuf + i >= stream && sbuf + i < stream + bytes;
                            if (!in || !rc) {
                                if (!(alias && in) && sbuf[i] != TEST_POISON) bad = (long)i;
                            }
                        }
                        for (size_t i = 0; i < sizeof(dbuf) && bad < 0; i++) {
                            const int in = dbuf + i >= dst && dbuf + i < dst + bytes;
                            if ((!in || !rc) && dbuf[i] != TEST_POISON) bad = (long)(SPAN + i);
                        }
                        EXPECT(rc == ok && bad < 0 &&
                                   (!rc || (memcmp(stream, want, bytes) == 0 &&
                                            memcmp(dst, want, bytes) == 0)),
                               "stream %s %s count %zu stream at line + %zu%s: returned %d "
                               "(want %d), poison changed at %ld, stream %s, dst %s",
                               test_types[ti].name, test_ops[oi].name, n, off,
                               alias ? " (== a)" : "", rc, ok, bad,
                               rc && memcmp(stream, want, bytes) ? "WRONG" : "ok",
                               rc && memcmp(dst, want, bytes) ? "WRONG" : "ok");
                        rc ? streamed++ : refused++;
                    }
                }
            }
        }
    }
    printf("stream: %lu reductions stored twice, %lu refused as asked\n", streamed, refused);
}

/* gpuring_copy_host and gpuring_copy_host_stream: every size around their thresholds
 * (2 KiB, 64-byte blocks or lines, the stream's 16-byte head, its two lines a step,
 * and their tails), the destination at every skew past its source modulo a page that
 * takes the block loop (1-31) and some that do not, at several alignments; the bytes
 * around the destination untouched */
static void test_copy(void)
{
    enum { PAGE = 4096, MAXB = 3 * PAGE + 300, GUARDB = 64 };
    static const size_t sizes[] = {0,    1,    15,   16,   17,   63,   64,       65,  79,
                                   127,  128,  129,  143,  144,  191,  192,      193, 207,
                                   208,  2047, 2048, 2049, 2111, PAGE + 17, MAXB};
    static const size_t skews[] = {0, 1, 7, 16, 31, 32, 48, 63, 64, 2048, 4095};
    static unsigned char src[MAXB + 2 * PAGE] __attribute__((aligned(4096)));
    static unsigned char dst[MAXB + 3 * PAGE + GUARDB] __attribute__((aligned(4096)));
    unsigned long ok = 0;

    for (size_t i = 0; i < sizeof(src); i++) src[i] = (unsigned char)(i * 131u + 7u);
    for (int stream = 0; stream < 2; stream++) {
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
            for (size_t ki = 0; ki < sizeof(skews) / sizeof(skews[0]); ki++) {
                for (size_t soff = 0; soff < 40; soff += 13) {
                    /* (a page before it: poison, and the skew kept) */
                    const size_t n = sizes[si], doff = PAGE + soff + skews[ki];
                    long bad = -1;

                    memset(dst, TEST_POISON, sizeof(dst));
                    if (stream) /* (its own thread reads it: no fence) */
                        gpuring_copy_host_stream(dst + doff, src + soff, n);
                    else
                        gpuring_copy_host(dst + doff, src + soff, n);
                    for (size_t i = 0; i < sizeof(dst) && bad < 0; i++) {
                        const int in = i >= doff && i < doff + n;
                        if (in ? dst[i] != src[soff + i - doff] : dst[i] != TEST_POISON)
                            bad = (long)i;
                    }
                    EXPECT(bad < 0, "%s %zu bytes, source at page + %zu, destination %zu "
                           "past it modulo a page: byte %ld wrong",
                           stream ? "gpuring_copy_host_stream" : "gpuring_copy_host", n, soff,
                           skews[ki], bad);
                    if (bad < 0) ok++;
                }
            }
        }
    }
    printf("copy: %lu copies right\n", ok);
}

int main(void)
{
    uint64_t seed = unit_rng_seed();

    printf("test_reduce_host: seed %" PRIu64 " (set GPURING_TEST_SEED to "
           "repeat)\n", seed);

    test_tables();
    test_noops();
    test_fixed_cases();
    test_f16_all_patterns();
    test_sweep();
    test_stream();
    test_copy();
    test_throughput();

    printf("%lu passed, %lu failed\n", unit_passed, unit_failed);
    return unit_failed == 0 ? 0 : 1;
}
