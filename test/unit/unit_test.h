/*
 * unit_test.h -- the few lines every unit test shares: EXPECT counts a
 * check and prints where it failed; unit_result does the same for tests
 * that make thousands of checks (only the first UNIT_MAX_MSGS failures are
 * printed); unit_rng is a seeded splitmix64; unit_report prints the closing
 * "N passed, N failed" line and gives the exit status (a failure where no check
 * ran); unit_write_all and
 * unit_read_all move whole messages over a pipe or socket between the
 * processes of a test (reads bounded in time).
 */
#ifndef GPURING_TEST_UNIT_TEST_H
#define GPURING_TEST_UNIT_TEST_H

#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static unsigned long unit_passed, unit_failed, unit_msgs;
static uint64_t unit_rng_state;

#define UNIT_MAX_MSGS 40

static void unit_result(int ok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), unused));

static void unit_result(int ok, const char *fmt, ...)
{
    va_list ap;

    if (ok) {
        unit_passed++;
        return;
    }
    unit_failed++;
    if (unit_msgs++ < UNIT_MAX_MSGS) {
        printf("FAIL: ");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
    } else if (unit_msgs == UNIT_MAX_MSGS + 1) {
        printf("(further failure messages suppressed)\n");
    }
    fflush(stdout);
}

/* Seed unit_rng from GPURING_TEST_SEED, else from the clock; returns the seed. */
static uint64_t unit_rng_seed(void) __attribute__((unused));
static uint64_t unit_rng_seed(void)
{
    const char *env = getenv("GPURING_TEST_SEED");
    unit_rng_state = (env != NULL && *env != '\0')
                         ? strtoull(env, NULL, 0)
                         : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    return unit_rng_state;
}

static inline uint64_t unit_rng(void)
{
    uint64_t z = (unit_rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define EXPECT(_cond, ...)                                                     \
    do {                                                                       \
        if (_cond) {                                                           \
            unit_passed++;                                                     \
        } else {                                                               \
            unit_failed++;                                                     \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                        \
            printf(__VA_ARGS__);                                               \
            printf("\n");                                                      \
        }                                                                      \
    } while (0)

/* (a test that made no check fails: something skipped all of it) */
static inline int unit_report(void)
{
    if (unit_passed + unit_failed == 0) {
        printf("FAIL: no check ran\n");
        unit_failed = 1;
    }
    printf("%lu passed, %lu failed\n", unit_passed, unit_failed);
    return unit_failed != 0;
}

/* 0 once all len bytes are written; -1 if the other end went away. */
static int unit_write_all(int fd, const void *buf, size_t len) __attribute__((unused));
static int unit_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* 0 once all len bytes are read; -1 on EOF, error, or timeout_ms without data. */
static int unit_read_all(int fd, void *buf, size_t len, int timeout_ms) __attribute__((unused));
static int unit_read_all(int fd, void *buf, size_t len, int timeout_ms)
{
    char *p = buf;

    while (len > 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&pfd, 1, timeout_ms) != 1) return -1;
        n = read(fd, p, len);
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

#endif /* GPURING_TEST_UNIT_TEST_H */
