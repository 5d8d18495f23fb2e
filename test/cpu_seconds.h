/*
 * cpu_seconds.h -- the CPU time this process has used (user and system, every
 * thread): for tests that a process stays idle while it waits (a progress thread
 * must nap, not spin).  Header-only (a static function).
 */
#ifndef GPURING_TEST_CPU_SECONDS_H
#define GPURING_TEST_CPU_SECONDS_H

#include <sys/resource.h>

static double test_cpu_seconds(void)
{
    struct rusage u;

    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

#endif /* GPURING_TEST_CPU_SECONDS_H */
