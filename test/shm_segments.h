/*
 * shm_segments.h -- the /dev/shm segments a process of gpuring's made, by the pid
 * in their names: gpuring's (gpuring-NS-PID-..., NS its pid namespace:
 * proxy/conn_shm.c, common/gpuring_arrivals.c) and the CUDA CPU runtime's
 * (cudacpu-PID-...: test/cudacpu/cudacpu_memory.cc).  Every segment has one
 * owner, so what other processes (another test suite's) made never counts.
 * Header-only (a static function).
 */
#ifndef GPURING_TEST_SHM_SEGMENTS_H
#define GPURING_TEST_SHM_SEGMENTS_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>

/* How many segments in /dev/shm are named with `pid`. */
static int shm_segments_of(int pid)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    char mid[32];
    int n = 0;

    if (d == NULL) return 0;
    snprintf(mid, sizeof(mid), "-%d-", pid);
    while ((e = readdir(d)) != NULL) {
        const char *p = e->d_name;

        if (strncmp(p, "gpuring-", 8) == 0)
            for (p += 8; *p >= '0' && *p <= '9'; p++) continue; /* the namespace */
        else if (strncmp(p, "cudacpu", 7) == 0)
            p += 7;
        else
            continue;
        n += strncmp(p, mid, strlen(mid)) == 0;
    }
    closedir(d);
    return n;
}

#endif /* GPURING_TEST_SHM_SEGMENTS_H */
