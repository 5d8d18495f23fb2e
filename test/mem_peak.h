/*
 * mem_peak.h -- how much a call grows this process's resident memory at its peak, for
 * tests of what staging a sparse datatype costs in host memory (a span of many MiB
 * whose blocks hold a few KiB must not take memory like the span).  Linux's
 * /proc/self/status and clear_refs (5: VmHWM restarts from VmRSS, since 4.0).
 * Header-only (static functions).
 */
#ifndef GPURING_TEST_MEM_PEAK_H
#define GPURING_TEST_MEM_PEAK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* This process's resident memory in KiB: now ("VmRSS"), or its peak ("VmHWM"); -1
 * where /proc does not say. */
static inline long test_mem_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    size_t n = strlen(field);

    if (f == NULL) return -1;
    while (kib < 0 && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, field, n) == 0 && line[n] == ':') kib = strtol(line + n + 1, NULL, 10);
    }
    fclose(f);
    return kib;
}

/* Start a measure: VmHWM restarted from VmRSS; the resident KiB now, or -1 where the
 * peak cannot be restarted. */
static inline long test_mem_peak_start(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    int bad;

    if (f == NULL) return -1;
    bad = fputs("5", f) < 0;
    if (fclose(f) != 0 || bad) return -1;
    return test_mem_kib("VmRSS");
}

/* KiB the resident memory grew by at its peak since test_mem_peak_start gave `start`;
 * -1 where it was not measured. */
static inline long test_mem_peak_growth(long start)
{
    long peak = start < 0 ? -1 : test_mem_kib("VmHWM");

    return peak < 0 ? -1 : peak - start;
}

#endif /* GPURING_TEST_MEM_PEAK_H */
