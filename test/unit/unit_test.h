/*
 * unit_test.h -- the few lines every unit test shares: EXPECT counts a
 * check and prints where it failed; unit_report prints the closing
 * "N passed, N failed" line and gives the exit status.
 */
#ifndef GPURING_TEST_UNIT_TEST_H
#define GPURING_TEST_UNIT_TEST_H

#include <stdio.h>

static int unit_passed, unit_failed;

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

static inline int unit_report(void)
{
    printf("%d passed, %d failed\n", unit_passed, unit_failed);
    return unit_failed != 0;
}

#endif /* GPURING_TEST_UNIT_TEST_H */
