/*
 * fail_thread.c -- LD_PRELOADed into a test's ranks: while the process has
 * GPURING_TEST_FAIL_THREAD set, pthread_create fails with EAGAIN (as it does
 * at a cgroup's pids limit or RLIMIT_NPROC) for a thread whose start routine
 * lies in gpuring's component (an object whose path names mca_coll_gpuring);
 * every other thread starts as usual.  mismatch_check's "nothread" fault sets
 * the variable on one rank around one call.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                   void *arg)
{
    static create_fn real;
    create_fn next = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    Dl_info info;

    if (next == NULL) {
        *(void **)&next = dlsym(RTLD_NEXT, "pthread_create");
        if (next == NULL) return EAGAIN;
        __atomic_store_n(&real, next, __ATOMIC_RELEASE);
    }
    if (getenv("GPURING_TEST_FAIL_THREAD") != NULL && dladdr((void *)start, &info) != 0 &&
        info.dli_fname != NULL && strstr(info.dli_fname, "mca_coll_gpuring") != NULL)
        return EAGAIN;
    return next(thread, attr, start, arg);
}
