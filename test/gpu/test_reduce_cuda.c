/*
 * test_reduce_cuda.c -- gpuring_reduce_cuda() (kernels/reduce_cuda.h)
 * against gpuring_reduce_host(), bit for bit, on a real GPU.
 *
 * For every type and every op defined on it, every count in a list (0 to
 * 2^20 + 3), aligned and misaligned pointers (element offsets 0..3: the
 * same offset for all three, which takes the 16-byte path after a scalar
 * head, and mixed offsets, which take the scalar path), in-place (dst == a,
 * dst == b) and a == b: fresh random data (integers with many zeros,
 * floats with nan/inf/zeros/subnormals, 16-bit floats as random bit
 * patterns), poisoned guard bytes around dst and checks that nothing
 * outside dst[0, count) and nothing in the inputs changed.  Results must
 * equal the host primitive's bytes, with one documented exception: a nan
 * from a float/double sum or prod may differ in sign/payload (the gpu makes
 * its canonical nan, x86 propagates an input's); both must be nan.
 *
 * Then the error paths (unsupported op, bad type/op, misaligned pointer,
 * count 0), and a bandwidth table on 256 MiB buffers (GPURING_TEST_BW_MIB
 * sets another size): GB/s counting two reads and one write per element,
 * next to cudaMemcpy device to device (one read and one write); the
 * float-sum run is verified too.
 *
 * Arguments name the sections to run (errors, sweep, bandwidth; default
 * all).  Random data is seeded; the seed is printed and GPURING_TEST_SEED sets it.
 * Without a usable GPU (cudaGetDeviceCount fails or finds none) it prints
 * "SKIP: no CUDA device (reason)" and exits 77.  Otherwise the last line
 * is "N passed, N failed" and the exit status 0 when none failed.
 *
 * Run by test/gpu/run_gpu_tests.sh; make check runs its errors and sweep on
 * the CUDA CPU runtime (test/cudacpu).
 */
#define _POSIX_C_SOURCE 200809L

#include <float.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "kernels/reduce.h"
#include "kernels/reduce_cuda.h"
#include "test/gpu/gpu_test.h"

/* ---- random elements -------------------------------------------------------- */
static void test_store(void *p, size_t i, size_t es, uint64_t bits)
{
    unsigned char *c = (unsigned char *)p + i * es;
    uint8_t u8 = (uint8_t)bits;
    uint16_t u16 = (uint16_t)bits;
    uint32_t u32 = (uint32_t)bits;

    switch (es) {
    case 1: memcpy(c, &u8, 1); break;
    case 2: memcpy(c, &u16, 2); break;
    case 4: memcpy(c, &u32, 4); break;
    default: memcpy(c, &bits, 8); break;
    }
}

/* finite value of mixed magnitude, or (1 in 16) a special one */
static double test_rand_real(int is_double, int *special_p)
{
    uint64_t r = unit_rng();
    double v;

    *special_p = 0;
    if ((r & 15) == 0) {
        *special_p = 1;
        return 0.0; /* caller makes the special bit pattern */
    }
    v = (double)((int64_t)(r >> 20 & 0xfffff) - 0x80000) / 1024.0;
    switch ((r >> 8) & 3) {
    case 0: v *= 1e-3; break;
    case 1: v *= is_double ? 1e300 : 1e35; break; /* products overflow now and then */
    case 2: v *= 1e3; break;
    default: break;
    }
    return v;
}

/* nan (random payload and sign), +-inf, +-0, subnormal, max */
static uint64_t test_special_bits(int is_double)
{
    uint64_t r = unit_rng();
    uint64_t sign = is_double ? (r & 1) << 63 : (r & 1) << 31;

    switch ((r >> 1) % 5) {
    case 0: /* nan, quiet or signalling, payload never zero */
        return is_double ? sign | 0x7ff0000000000000ull | ((r >> 8) & 0xfffffffffffffull) | 1
                         : sign | 0x7f800000u | ((r >> 8) & 0x7fffffu) | 1;
    case 1: return is_double ? sign | 0x7ff0000000000000ull : sign | 0x7f800000u;
    case 2: return sign;
    case 3: /* subnormal */
        return is_double ? sign | ((r >> 8) & 0xfffffffffffffull) | 1
                         : sign | ((r >> 8) & 0x7fffffu) | 1;
    default: return is_double ? sign | 0x7fefffffffffffffull : sign | 0x7f7fffffu;
    }
}

static void test_fill_one(gpuring_type_t type, void *p, size_t i)
{
    size_t es = gpuring_type_size(type);
    uint64_t r = unit_rng();
    int special;

    if (gpuring_type_is_integer(type)) {
        test_store(p, i, es, (r & 3) == 0 ? 0 : unit_rng()); /* zeros for land/lor */
    } else if (type == GPURING_TYPE_FLOAT) {
        float f = (float)test_rand_real(0, &special);
        uint32_t u;
        memcpy(&u, &f, 4);
        test_store(p, i, 4, special ? test_special_bits(0) : u);
    } else if (type == GPURING_TYPE_DOUBLE) {
        double d = test_rand_real(1, &special);
        uint64_t u;
        memcpy(&u, &d, 8);
        test_store(p, i, 8, special ? test_special_bits(1) : u);
    } else {
        /* 16-bit floats: any bit pattern (nan, inf, subnormals included);
         * half the time a narrower exponent range so sums and products
         * land in the normal range and round */
        uint16_t h = (uint16_t)r;
        if ((r >> 16) & 1) {
            if (type == GPURING_TYPE_FLOAT16) {
                h = (uint16_t)((h & 0x83ffu) | ((10u + (unsigned)((r >> 20) % 11)) << 10));
            } else {
                h = (uint16_t)((h & 0x807fu) | ((117u + (unsigned)((r >> 20) % 21)) << 7));
            }
        }
        test_store(p, i, 2, h);
    }
}

/* a and b; about one element in eight gets b[i] == a[i] (ties, equal nans) */
static void test_fill(gpuring_type_t type, void *a, void *b, size_t count)
{
    size_t es = gpuring_type_size(type);

    for (size_t i = 0; i < count; i++) {
        test_fill_one(type, a, i);
        if ((unit_rng() & 7) == 0) {
            memcpy((char *)b + i * es, (char *)a + i * es, es);
        } else {
            test_fill_one(type, b, i);
        }
    }
}

/* ---- comparing ------------------------------------------------------------------ */
static int test_is_nan(gpuring_type_t type, const void *p)
{
    if (type == GPURING_TYPE_FLOAT) {
        uint32_t u;
        memcpy(&u, p, 4);
        return (u & 0x7fffffffu) > 0x7f800000u;
    }
    if (type == GPURING_TYPE_DOUBLE) {
        uint64_t u;
        memcpy(&u, p, 8);
        return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    }
    return 0;
}

static unsigned long test_nan_bit_diffs; /* informational */

/* index of the first element that differs, or -1; fills detail */
static long test_compare(gpuring_type_t type, gpuring_op_t op, const void *got,
                         const void *want, size_t count, char *detail, size_t len)
{
    size_t es = gpuring_type_size(type);
    int nan_ok = (type == GPURING_TYPE_FLOAT || type == GPURING_TYPE_DOUBLE) &&
                 (op == GPURING_OP_SUM || op == GPURING_OP_PROD);

    if (memcmp(got, want, count * es) == 0) {
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        const unsigned char *g = (const unsigned char *)got + i * es;
        const unsigned char *w = (const unsigned char *)want + i * es;
        uint64_t gb = 0, wb = 0;
        if (memcmp(g, w, es) == 0) {
            continue;
        }
        if (nan_ok && test_is_nan(type, g) && test_is_nan(type, w)) {
            test_nan_bit_diffs++;
            continue;
        }
        memcpy(&gb, g, es); /* little endian: the low bytes */
        memcpy(&wb, w, es);
        snprintf(detail, len, "element %zu: got 0x%0*" PRIx64 " want 0x%0*" PRIx64, i,
                 (int)(2 * es), gb, (int)(2 * es), wb);
        return (long)i;
    }
    return -1;
}

/* ---- the sweep --------------------------------------------------------------------- */
#define TEST_GUARD 256 /* bytes of poison before and after every region */
#define TEST_POISON_DST 0xa5
#define TEST_POISON_IN 0x5a
#define TEST_MAX_OFF 3

enum { ALIAS_NONE, ALIAS_DST_A, ALIAS_DST_B, ALIAS_A_B };
static const char *const test_alias_names[] = { "distinct", "dst==a", "dst==b", "a==b" };

typedef struct {
    unsigned char *dev[3];  /* dst, a, b device buffers */
    unsigned char *host[3]; /* what was uploaded */
    unsigned char *back;    /* downloads */
    unsigned char *want;
    size_t bytes;           /* each buffer */
} test_bufs_t;

static void test_bufs_alloc(test_bufs_t *t, size_t max_count)
{
    t->bytes = 2 * TEST_GUARD + (max_count + TEST_MAX_OFF) * 8;
    for (int i = 0; i < 3; i++) {
        TEST_CUDA(cudaMalloc((void **)&t->dev[i], t->bytes));
        t->host[i] = malloc(t->bytes);
    }
    t->back = malloc(t->bytes);
    t->want = malloc(t->bytes);
    if (!t->host[0] || !t->host[1] || !t->host[2] || !t->back || !t->want) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
}

static void test_bufs_free(test_bufs_t *t)
{
    for (int i = 0; i < 3; i++) {
        cudaFree(t->dev[i]);
        free(t->host[i]);
    }
    free(t->back);
    free(t->want);
}

/*
 * one case: buffers 0 (dst), 1 (a), 2 (b); aliased pointers share one
 * buffer and one offset.  only the first `used` bytes of each buffer take
 * part (guard, data at the offset, guard).
 */
static void test_case(test_bufs_t *t, gpuring_type_t type, gpuring_op_t op, size_t count,
                      const size_t off[3], int alias, cudaStream_t stream)
{
    const size_t es = gpuring_type_size(type);
    const size_t used = 2 * TEST_GUARD + (count + TEST_MAX_OFF) * es;
    int ia = alias == ALIAS_DST_A ? 0 : 1;
    int ib = alias == ALIAS_DST_B ? 0 : (alias == ALIAS_A_B ? 1 : 2);
    size_t oa = off[ia], ob = off[ib];
    unsigned char *ha, *hb;
    gpuring_status_t st;
    char what[160], detail[128] = "";
    int ok = 1;

    snprintf(what, sizeof(what), "%s %s count=%zu off=%zu/%zu/%zu %s%s", gpuring_type_name(type),
             gpuring_op_name(op), count, off[0], oa, ob, test_alias_names[alias],
             stream ? " (stream)" : "");

    /* host images: poison, then the inputs at their offsets */
    memset(t->host[0], TEST_POISON_DST, used);
    memset(t->host[1], TEST_POISON_IN, used);
    memset(t->host[2], TEST_POISON_IN, used);
    ha = t->host[ia] + TEST_GUARD + oa * es;
    hb = t->host[ib] + TEST_GUARD + ob * es;
    test_fill(type, ha, hb, count); /* a == b: b's values win, fine */
    gpuring_reduce_host(t->want, ha, hb, count, type, op);
    for (int i = 0; i < 3; i++) {
        if (i == 0 || (i == 1 && ia == 1) || (i == 2 && ib == 2)) {
            TEST_CUDA(cudaMemcpy(t->dev[i], t->host[i], used, cudaMemcpyHostToDevice));
        }
    }

    st = gpuring_reduce_cuda(t->dev[0] + TEST_GUARD + off[0] * es,
                             t->dev[ia] + TEST_GUARD + oa * es,
                             t->dev[ib] + TEST_GUARD + ob * es, count, type, op, stream);
    if (st != GPURING_OK) {
        unit_result(0, "%s: gpuring_reduce_cuda returned %d (%s)", what, (int)st,
                    gpuring_status_str(st));
        return;
    }
    TEST_CUDA(cudaStreamSynchronize(stream));

    /* dst: the result, and poison everywhere else */
    TEST_CUDA(cudaMemcpy(t->back, t->dev[0], used, cudaMemcpyDeviceToHost));
    if (test_compare(type, op, t->back + TEST_GUARD + off[0] * es, t->want, count, detail,
                     sizeof(detail)) >= 0) {
        unit_result(0, "%s: wrong result, %s", what, detail);
        ok = 0;
    }
    for (size_t i = 0; ok && i < used; i++) {
        size_t lo = TEST_GUARD + off[0] * es, hi = lo + count * es;
        if ((i < lo || i >= hi) && t->back[i] != TEST_POISON_DST) {
            unit_result(0, "%s: dst buffer byte %zu outside [%zu, %zu) written", what, i, lo,
                        hi);
            ok = 0;
        }
    }
    /* inputs that are not dst: untouched, guards included */
    for (int i = 1; ok && i < 3; i++) {
        if ((i == 1 && ia != 1) || (i == 2 && ib != 2)) {
            continue;
        }
        TEST_CUDA(cudaMemcpy(t->back, t->dev[i], used, cudaMemcpyDeviceToHost));
        if (memcmp(t->back, t->host[i], used) != 0) {
            unit_result(0, "%s: input buffer %s modified", what, i == 1 ? "a" : "b");
            ok = 0;
        }
    }
    if (ok) {
        unit_result(1, "%s", what);
    }
}

static const size_t test_counts[] = { 0,  1,  2,  3,    7,    15, 16,
                                      17, 31, 33, 1000, 4099, ((size_t)1 << 20) + 3 };
#define TEST_NCOUNTS (sizeof(test_counts) / sizeof(test_counts[0]))
#define TEST_BIG ((size_t)1 << 20)

/* offsets (dst, a, b) in elements, and aliasing */
static const struct {
    size_t off[3];
    int alias;
    int big; /* also for the largest count */
} test_layouts[] = {
    { { 0, 0, 0 }, ALIAS_NONE, 1 },  /* aligned: 16-byte path only */
    { { 1, 1, 1 }, ALIAS_NONE, 1 },  /* same misalignment: scalar head, vectors, tail */
    { { 2, 2, 2 }, ALIAS_NONE, 0 },
    { { 3, 3, 3 }, ALIAS_NONE, 0 },
    { { 0, 1, 2 }, ALIAS_NONE, 1 },  /* mixed: scalar path */
    { { 3, 2, 1 }, ALIAS_NONE, 0 },
    { { 1, 0, 0 }, ALIAS_NONE, 0 },
    { { 0, 0, 3 }, ALIAS_NONE, 0 },
    { { 0, 0, 0 }, ALIAS_DST_A, 1 }, /* in place, as the ring uses it */
    { { 1, 1, 1 }, ALIAS_DST_B, 0 },
    { { 2, 2, 1 }, ALIAS_DST_A, 0 },
    { { 3, 3, 3 }, ALIAS_A_B, 0 },
};
#define TEST_NLAYOUTS (sizeof(test_layouts) / sizeof(test_layouts[0]))

static void test_sweep(cudaStream_t stream)
{
    test_bufs_t t;
    unsigned long before = unit_failed;

    test_bufs_alloc(&t, test_counts[TEST_NCOUNTS - 1]);
    for (int ti = 0; ti < GPURING_TYPE_COUNT; ti++) {
        gpuring_type_t type = (gpuring_type_t)ti;
        unsigned long type_failed = unit_failed;
        for (int oi = 0; oi < GPURING_OP_COUNT; oi++) {
            gpuring_op_t op = (gpuring_op_t)oi;
            if (!gpuring_op_supported(type, op)) {
                continue;
            }
            for (size_t ci = 0; ci < TEST_NCOUNTS; ci++) {
                for (size_t li = 0; li < TEST_NLAYOUTS; li++) {
                    if (test_counts[ci] > TEST_BIG && !test_layouts[li].big) {
                        continue;
                    }
                    /* alternate the default stream and a created one */
                    test_case(&t, type, op, test_counts[ci], test_layouts[li].off,
                              test_layouts[li].alias, ((ci + li) & 1) ? stream : NULL);
                }
            }
        }
        printf("sweep %-8s: %s\n", gpuring_type_name(type),
               unit_failed == type_failed ? "ok" : "FAILED");
        fflush(stdout);
    }
    printf("sweep: %lu failed; float/double sum/prod nan results that differ only in nan "
           "bits (allowed): %lu\n", unit_failed - before, test_nan_bit_diffs);
    test_bufs_free(&t);
}

/* ---- error paths --------------------------------------------------------------------- */
static void test_errors(void)
{
    const size_t n = 64;
    unsigned char *d, *a, *b;
    unsigned char back[256], poison[256];

    printf("error paths (the library logs the bad calls below on purpose):\n");
    fflush(stdout);
    TEST_CUDA(cudaMalloc((void **)&d, 256));
    TEST_CUDA(cudaMalloc((void **)&a, 256));
    TEST_CUDA(cudaMalloc((void **)&b, 256));
    TEST_CUDA(cudaMemset(a, 0x11, 256));
    TEST_CUDA(cudaMemset(b, 0x22, 256));
    TEST_CUDA(cudaMemset(d, TEST_POISON_DST, 256));
    memset(poison, TEST_POISON_DST, sizeof(poison));

    unit_result(gpuring_reduce_cuda(d, a, b, n, GPURING_TYPE_FLOAT, GPURING_OP_BAND, NULL) ==
                    GPURING_ERR_NOT_SUPPORTED,
                "float band: want GPURING_ERR_NOT_SUPPORTED");
    unit_result(gpuring_reduce_cuda(d, a, b, n, GPURING_TYPE_FLOAT16, GPURING_OP_LXOR, NULL) ==
                    GPURING_ERR_NOT_SUPPORTED,
                "float16 lxor: want GPURING_ERR_NOT_SUPPORTED");
    unit_result(gpuring_reduce_cuda(d, a, b, n, GPURING_TYPE_COUNT, GPURING_OP_SUM, NULL) ==
                    GPURING_ERR_INVALID,
                "type GPURING_TYPE_COUNT: want GPURING_ERR_INVALID");
    unit_result(gpuring_reduce_cuda(d, a, b, n, (gpuring_type_t)-1, GPURING_OP_SUM, NULL) ==
                    GPURING_ERR_INVALID,
                "type -1: want GPURING_ERR_INVALID");
    unit_result(gpuring_reduce_cuda(d, a, b, n, GPURING_TYPE_INT32, GPURING_OP_COUNT, NULL) ==
                    GPURING_ERR_INVALID,
                "op GPURING_OP_COUNT: want GPURING_ERR_INVALID");
    unit_result(gpuring_reduce_cuda(d + 1, a, b, n, GPURING_TYPE_FLOAT, GPURING_OP_SUM, NULL) ==
                    GPURING_ERR_INVALID,
                "float dst at +1 byte: want GPURING_ERR_INVALID");
    unit_result(gpuring_reduce_cuda(d, a + 2, b, n, GPURING_TYPE_DOUBLE, GPURING_OP_SUM, NULL) ==
                    GPURING_ERR_INVALID,
                "double a at +2 bytes: want GPURING_ERR_INVALID");
    unit_result(gpuring_reduce_cuda(NULL, a, b, n, GPURING_TYPE_INT8, GPURING_OP_SUM, NULL) ==
                    GPURING_ERR_INVALID,
                "NULL dst: want GPURING_ERR_INVALID");
    unit_result(gpuring_reduce_cuda(NULL, NULL, NULL, 0, GPURING_TYPE_INT8, GPURING_OP_SUM,
                                    NULL) == GPURING_OK,
                "count 0 with NULL pointers: want GPURING_OK");
    unit_result(gpuring_reduce_cuda(d, a, b, 0, GPURING_TYPE_DOUBLE, GPURING_OP_MAX, NULL) ==
                    GPURING_OK,
                "count 0: want GPURING_OK");
    TEST_CUDA(cudaDeviceSynchronize());
    TEST_CUDA(cudaMemcpy(back, d, sizeof(back), cudaMemcpyDeviceToHost));
    unit_result(memcmp(back, poison, sizeof(back)) == 0, "rejected calls wrote dst");
    TEST_CUDA(cudaGetLastError()); /* no error left behind */
    cudaFree(d);
    cudaFree(a);
    cudaFree(b);
}

/* ---- bandwidth ----------------------------------------------------------------------------- */
#define TEST_BW_MIB 256 /* per buffer; GPURING_TEST_BW_MIB sets another */
#define TEST_BW_ITERS 20

static double test_time_ms(cudaEvent_t e0, cudaEvent_t e1)
{
    float ms = 0;
    TEST_CUDA(cudaEventSynchronize(e1));
    TEST_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
}

static void test_bandwidth(cudaStream_t stream)
{
    static const struct {
        gpuring_type_t type;
        gpuring_op_t op;
        int in_place;
        size_t off; /* elements, added to a only: scalar path */
        const char *what;
    } runs[] = {
        { GPURING_TYPE_FLOAT, GPURING_OP_SUM, 0, 0, "float sum" },
        { GPURING_TYPE_FLOAT, GPURING_OP_SUM, 1, 0, "float sum in place" },
        { GPURING_TYPE_FLOAT, GPURING_OP_SUM, 0, 1, "float sum, a misaligned (scalar)" },
        { GPURING_TYPE_DOUBLE, GPURING_OP_SUM, 0, 0, "double sum" },
        { GPURING_TYPE_FLOAT16, GPURING_OP_SUM, 0, 0, "float16 sum" },
        { GPURING_TYPE_BFLOAT16, GPURING_OP_SUM, 0, 0, "bfloat16 sum" },
        { GPURING_TYPE_INT8, GPURING_OP_SUM, 0, 0, "int8 sum" },
        { GPURING_TYPE_INT32, GPURING_OP_MAX, 0, 0, "int32 max" },
    };
    const char *mib_env = getenv("GPURING_TEST_BW_MIB");
    const int mib_asked = mib_env != NULL ? atoi(mib_env) : 0;
    const size_t mib = mib_asked > 0 ? (size_t)mib_asked : TEST_BW_MIB;
    const size_t bytes = mib << 20;
    unsigned char *d, *a, *b, *ha, *hb, *hd, *hw;
    cudaEvent_t e0, e1;
    double ms, memcpy_gbs;

    TEST_CUDA(cudaMalloc((void **)&d, bytes + 64));
    TEST_CUDA(cudaMalloc((void **)&a, bytes + 64));
    TEST_CUDA(cudaMalloc((void **)&b, bytes + 64));
    TEST_CUDA(cudaEventCreate(&e0));
    TEST_CUDA(cudaEventCreate(&e1));
    ha = malloc(bytes);
    hb = malloc(bytes);
    hd = malloc(bytes);
    hw = malloc(bytes);
    if (!ha || !hb || !hd || !hw) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    /* float data for the verified run; the other types just read the bytes */
    test_fill(GPURING_TYPE_FLOAT, ha, hb, bytes / 4);
    TEST_CUDA(cudaMemcpy(a, ha, bytes, cudaMemcpyHostToDevice));
    TEST_CUDA(cudaMemcpy(b, hb, bytes, cudaMemcpyHostToDevice));

    /* the reference: device-to-device copy, 1 read + 1 write */
    TEST_CUDA(cudaMemcpyAsync(d, a, bytes, cudaMemcpyDeviceToDevice, stream));
    TEST_CUDA(cudaEventRecord(e0, stream));
    for (int it = 0; it < TEST_BW_ITERS; it++) {
        TEST_CUDA(cudaMemcpyAsync(d, a, bytes, cudaMemcpyDeviceToDevice, stream));
    }
    TEST_CUDA(cudaEventRecord(e1, stream));
    ms = test_time_ms(e0, e1);
    memcpy_gbs = 2.0 * (double)bytes * TEST_BW_ITERS / (ms * 1e-3) / 1e9;
    printf("bandwidth (%zu MiB per buffer, mean of %d runs after a warm-up):\n", mib,
           TEST_BW_ITERS);
    printf("  %-34s %8.1f GB/s  (1 read + 1 write)\n", "cudaMemcpy device to device",
           memcpy_gbs);

    for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
        size_t es = gpuring_type_size(runs[r].type);
        size_t n = bytes / es - runs[r].off;
        unsigned char *x = a + runs[r].off * es;
        unsigned char *dst = runs[r].in_place ? x : d;
        double gbs;
        gpuring_status_t st;

        /* in place changes a: put it back first, and time the same data every run */
        st = gpuring_reduce_cuda(dst, x, b, n, runs[r].type, runs[r].op, stream);
        unit_result(st == GPURING_OK, "bandwidth %s: launch returned %d", runs[r].what, (int)st);
        if (st != GPURING_OK) {
            continue;
        }
        TEST_CUDA(cudaEventRecord(e0, stream));
        for (int it = 0; it < TEST_BW_ITERS; it++) {
            gpuring_reduce_cuda(dst, x, b, n, runs[r].type, runs[r].op, stream);
        }
        TEST_CUDA(cudaEventRecord(e1, stream));
        ms = test_time_ms(e0, e1);
        TEST_CUDA(cudaGetLastError());
        gbs = 3.0 * (double)(n * es) * TEST_BW_ITERS / (ms * 1e-3) / 1e9;
        printf("  %-34s %8.1f GB/s  (2 reads + 1 write; %.0f%% of memcpy)\n", runs[r].what, gbs,
               100.0 * gbs / memcpy_gbs);

        if (r == 0) {
            /* verify the largest run: every block of the grid-stride loop wrapped */
            char detail[128] = "";
            TEST_CUDA(cudaMemcpy(hd, d, bytes, cudaMemcpyDeviceToHost));
            gpuring_reduce_host(hw, ha, hb, n, runs[r].type, runs[r].op);
            unit_result(test_compare(runs[r].type, runs[r].op, hd, hw, n, detail,
                                     sizeof(detail)) < 0,
                        "bandwidth %s, %zu MiB: wrong result, %s", runs[r].what, mib, detail);
        }
        if (runs[r].in_place) {
            TEST_CUDA(cudaMemcpy(a, ha, bytes, cudaMemcpyHostToDevice));
        }
    }
    fflush(stdout);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(d);
    cudaFree(a);
    cudaFree(b);
    free(ha);
    free(hb);
    free(hd);
    free(hw);
}

int main(int argc, char **argv)
{
    enum { SEC_ERRORS, SEC_SWEEP, SEC_BANDWIDTH, SEC_COUNT };
    static const char *const sections[SEC_COUNT] = { "errors", "sweep", "bandwidth" };
    const unsigned run = gpu_test_sections(argc, argv, sections, SEC_COUNT);
    struct cudaDeviceProp prop;
    cudaStream_t stream;
    uint64_t seed;
    int ndev = 0, dev = 0, rt = 0, drv = 0;

    if (gpu_test_device_or_skip() != 0) return 77;
    TEST_CUDA(cudaGetDeviceCount(&ndev));
    seed = unit_rng_seed();
    printf("test_reduce_cuda: seed %" PRIu64 " (set GPURING_TEST_SEED to repeat)\n", seed);
    TEST_CUDA(cudaGetDevice(&dev));
    TEST_CUDA(cudaGetDeviceProperties(&prop, dev));
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    printf("device %d of %d: %s, sm_%d%d, %d SMs; runtime %d, driver %d\n", dev, ndev, prop.name,
           prop.major, prop.minor, prop.multiProcessorCount, rt, drv);
    TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    if (run & (1u << SEC_ERRORS)) test_errors();
    if (run & (1u << SEC_SWEEP)) test_sweep(stream);
    if (run & (1u << SEC_BANDWIDTH)) test_bandwidth(stream);

    TEST_CUDA(cudaStreamDestroy(stream));
    gpu_test_exit();
    return 0;
}
