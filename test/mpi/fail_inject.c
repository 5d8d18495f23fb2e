/*
 * fail_inject.c -- LD_PRELOADed into a test's ranks: failures of the system
 * calls gpuring makes that a test cannot otherwise bring about, each while an
 * environment variable says so (every other call goes through):
 *   GPURING_TEST_FAIL_THREAD set: pthread_create fails with EAGAIN (as at a
 *       cgroup's pids limit or RLIMIT_NPROC) for a thread whose start routine
 *       lies in gpuring's component (an object whose path names
 *       mca_coll_gpuring).  mismatch_check's "nothread" fault sets it on one
 *       rank around one call.
 *   GPURING_TEST_FAIL_SHM=R (a world rank, OMPI_COMM_WORLD_RANK): on that
 *       rank, posix_fallocate of a gpuring segment in /dev/shm fails with
 *       ENOSPC (as in a container whose /dev/shm is full).
 *   GPURING_TEST_FAIL_NET=1: ucp_tag_send_nbx called from gpuring's
 *       component fails at once with UCS_ERR_IO_ERROR (as a transfer over a
 *       broken link does).  The endpoint itself stays sound: only the
 *       connections that send then fail.  mismatch_check's "netfail" fault
 *       sets it to 1 on one rank around one call, and to 0 before MPI_Init
 *       (every thread of gpuring's reads it: see mismatch_check's `valued`).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

/* the next definition of `name` (the real one), looked up once */
static void *next_fn(void **cache, const char *name)
{
    void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);

    if (fn == NULL) {
        fn = dlsym(RTLD_NEXT, name);
        __atomic_store_n(cache, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                   void *arg)
{
    static void *cache;
    create_fn next;
    Dl_info info;

    *(void **)&next = next_fn(&cache, "pthread_create");
    if (next == NULL) return EAGAIN;
    if (getenv("GPURING_TEST_FAIL_THREAD") != NULL && dladdr((void *)start, &info) != 0 &&
        info.dli_fname != NULL && strstr(info.dli_fname, "mca_coll_gpuring") != NULL)
        return EAGAIN;
    return next(thread, attr, start, arg);
}

typedef int (*fallocate_fn)(int, off_t, off_t);

int posix_fallocate(int fd, off_t offset, off_t len)
{
    static void *cache;
    const char *rank = getenv("GPURING_TEST_FAIL_SHM"), *me = getenv("OMPI_COMM_WORLD_RANK");
    fallocate_fn next;
    char link[64], path[256];
    ssize_t n;

    *(void **)&next = next_fn(&cache, "posix_fallocate");
    if (rank != NULL && me != NULL && strcmp(rank, me) == 0) {
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        n = readlink(link, path, sizeof(path) - 1);
        if (n > 0) {
            path[n] = '\0';
            if (strncmp(path, "/dev/shm/gpuring-", 17) == 0) return ENOSPC;
        }
    }
    return next != NULL ? next(fd, offset, len) : ENOSYS;
}

typedef ucs_status_ptr_t (*tag_send_fn)(ucp_ep_h, const void *, size_t, ucp_tag_t,
                                        const ucp_request_param_t *);

ucs_status_ptr_t ucp_tag_send_nbx(ucp_ep_h ep, const void *buffer, size_t count, ucp_tag_t tag,
                                  const ucp_request_param_t *param)
{
    static void *cache;
    tag_send_fn next;
    Dl_info info;
    const char *on = getenv("GPURING_TEST_FAIL_NET");

    *(void **)&next = next_fn(&cache, "ucp_tag_send_nbx");
    if (next == NULL) return UCS_STATUS_PTR(UCS_ERR_NO_ELEM);
    if (on != NULL && strcmp(on, "1") == 0 &&
        dladdr(__builtin_return_address(0), &info) != 0 && info.dli_fname != NULL &&
        strstr(info.dli_fname, "mca_coll_gpuring") != NULL)
        return UCS_STATUS_PTR(UCS_ERR_IO_ERROR);
    return next(ep, buffer, count, tag, param);
}
