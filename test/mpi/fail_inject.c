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
 *       component for one communicator fails at once with UCS_ERR_IO_ERROR
 *       (as a transfer over a broken link does): the communicator of the
 *       first data step sent while it is set (its tag's uid), every send of
 *       it, data and credits.  The endpoint itself stays sound: only the
 *       connections that send then fail, and another communicator's credit
 *       that the progress thread sends meanwhile (what an earlier call still
 *       owed) goes through.  mismatch_check's "netfail" fault sets it to 1
 *       on one rank around one call, and to 0 before MPI_Init (every thread
 *       of gpuring's reads it: see mismatch_check's `valued`).
 *   GPURING_TEST_FAIL_MALLOC=R:N: on world rank R, the first malloc or calloc
 *       of exactly N bytes called from gpuring's component after MPI_Init
 *       (MPI_Init_thread) returned gives NULL (as when memory runs out at that
 *       moment); every other goes through.  (Before: the CUDA runtime linked
 *       into the component registers its kernels as it loads, and does not
 *       check its allocations.)
 *   GPURING_TEST_FAIL_MEMALIGN=R:N: the same for posix_memalign (ENOMEM): the
 *       host area that stages device buffers for the component below.
 * And one answer a test cannot otherwise get from Debian's Open MPI:
 *   GPURING_TEST_CUDA_AWARE=1: MPIX_Query_cuda_support says 1, as a CUDA-aware
 *       Open MPI's does.
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

#include "proxy/proxy_internal.h" /* gpuring's tag layout */

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

/* GPURING_TEST_FAIL_NET: the uid of the communicator whose sends fail (0: none yet) */
static uint64_t failing_uid;

ucs_status_ptr_t ucp_tag_send_nbx(ucp_ep_h ep, const void *buffer, size_t count, ucp_tag_t tag,
                                  const ucp_request_param_t *param)
{
    static void *cache;
    tag_send_fn next;
    Dl_info info;
    const char *on = getenv("GPURING_TEST_FAIL_NET");

    *(void **)&next = next_fn(&cache, "ucp_tag_send_nbx");
    if (next == NULL) return UCS_STATUS_PTR(UCS_ERR_NO_ELEM);
    if (on == NULL || strcmp(on, "1") != 0) {
        __atomic_store_n(&failing_uid, 0, __ATOMIC_RELAXED); /* disarmed */
    } else if (dladdr(__builtin_return_address(0), &info) != 0 && info.dli_fname != NULL &&
               strstr(info.dli_fname, "mca_coll_gpuring") != NULL) {
        gpuring_net_tag_fields_t f = gpuring_net_tag_fields(tag);
        uint64_t none = 0;

        if (f.kind == GPURING_TAG_KIND_DATA && f.comm_uid != GPURING_TAG_UID_WARMUP)
            __atomic_compare_exchange_n(&failing_uid, &none, f.comm_uid, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED);
        if (f.comm_uid == __atomic_load_n(&failing_uid, __ATOMIC_RELAXED) && f.comm_uid != 0)
            return UCS_STATUS_PTR(UCS_ERR_IO_ERROR);
    }
    return next(ep, buffer, count, tag, param);
}

/* MPI_Init and MPI_Init_thread have returned: GPURING_TEST_FAIL_MALLOC applies */
static int malloc_armed;

typedef int (*init_fn)(int *, char ***);
typedef int (*init_thread_fn)(int *, char ***, int, int *);

int MPI_Init(int *argc, char ***argv)
{
    static void *cache;
    init_fn next;
    int rc;

    *(void **)&next = next_fn(&cache, "MPI_Init");
    rc = next(argc, argv);
    __atomic_store_n(&malloc_armed, 1, __ATOMIC_RELEASE);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    static void *cache;
    init_thread_fn next;
    int rc;

    *(void **)&next = next_fn(&cache, "MPI_Init_thread");
    rc = next(argc, argv, required, provided);
    __atomic_store_n(&malloc_armed, 1, __ATOMIC_RELEASE);
    return rc;
}

/* Is this allocation of `size` bytes, made from `caller`, the one the R:N in
 * environment variable `var` names (this world rank R, size N, from gpuring's
 * component, after MPI_Init), and the first such (*failed)? */
static int alloc_fails(const char *var, size_t size, void *caller, int *failed)
{
    const char *spec = getenv(var), *me, *colon;
    Dl_info info;

    return spec != NULL && __atomic_load_n(&malloc_armed, __ATOMIC_ACQUIRE) &&
           (colon = strchr(spec, ':')) != NULL &&
           (size_t)strtoull(colon + 1, NULL, 10) == size &&
           (me = getenv("OMPI_COMM_WORLD_RANK")) != NULL &&
           strncmp(spec, me, (size_t)(colon - spec)) == 0 && me[colon - spec] == '\0' &&
           dladdr(caller, &info) != 0 && info.dli_fname != NULL &&
           strstr(info.dli_fname, "mca_coll_gpuring") != NULL &&
           !__atomic_exchange_n(failed, 1, __ATOMIC_RELAXED);
}

/* glibc's own: looking the next malloc up with dlsym could itself allocate */
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);

/* GPURING_TEST_FAIL_MALLOC's one failure, malloc's or calloc's */
static int malloc_failed;

void *malloc(size_t size)
{
    if (alloc_fails("GPURING_TEST_FAIL_MALLOC", size, __builtin_return_address(0),
                    &malloc_failed))
        return NULL;
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
    /* (n * size: gpuring's callocs are far from overflowing) */
    if (alloc_fails("GPURING_TEST_FAIL_MALLOC", n * size, __builtin_return_address(0),
                    &malloc_failed))
        return NULL;
    return __libc_calloc(n, size);
}

typedef int (*memalign_fn)(void **, size_t, size_t);

int posix_memalign(void **p, size_t align, size_t size)
{
    static void *cache;
    static int failed;
    memalign_fn next;

    if (alloc_fails("GPURING_TEST_FAIL_MEMALIGN", size, __builtin_return_address(0), &failed))
        return ENOMEM;
    *(void **)&next = next_fn(&cache, "posix_memalign");
    return next != NULL ? next(p, align, size) : ENOMEM;
}

/* GPURING_TEST_CUDA_AWARE=1: this Open MPI says it is CUDA-aware, as one built
 * --with-cuda does (the real answer otherwise) */
int MPIX_Query_cuda_support(void)
{
    static void *cache;
    int (*next)(void) = (int (*)(void))next_fn(&cache, "MPIX_Query_cuda_support");
    const char *v = getenv("GPURING_TEST_CUDA_AWARE");

    if (v != NULL && strcmp(v, "1") == 0) return 1;
    return next != NULL ? next() : 0;
}
