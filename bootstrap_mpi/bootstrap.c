/*
 * bootstrap.c -- exchanges over the MPI communicator (see bootstrap.h).
 */
#include "bootstrap_mpi/bootstrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static gpuring_status_t bootstrap_result(int rc, const char *what)
{
    if (rc != GPURING_OK) {
        GPURING_ERROR(GPURING_SUBSYS_BOOTSTRAP, "gpuring's %s failed: %s", what,
                      gpuring_status_str((gpuring_status_t)rc));
    }
    return (gpuring_status_t)rc;
}

gpuring_status_t gpuring_bootstrap_allgather(gpuring_bootstrap_t *b, const void *mine,
                                             void *all, size_t bytes, const char *what)
{
    gpuring_status_t st;

    if (b->failed) return GPURING_ERR_BROKEN; /* (bootstrap.h: nothing more is posted) */
    b->ended_alike = 0;
    st = bootstrap_result(b->ops->allgather(b->ctx, mine, all, bytes, what), what);
    if (st != GPURING_OK) b->failed = 1;
    return st;
}

gpuring_status_t gpuring_bootstrap_leave(gpuring_bootstrap_t *b, gpuring_status_t st,
                                         const char *what)
{
    if (!b->failed) {
        GPURING_ERROR(GPURING_SUBSYS_BOOTSTRAP, "%s failed (%s), so this rank (%d of the "
                      "communicator's %d) leaves gpuring's exchanges with the others: they "
                      "wait for it until their wait timeout (coll_gpuring_wait_timeout), "
                      "then fail; gpuring cannot use the communicator any more", what,
                      gpuring_status_str(st), b->rank, b->size);
        b->failed = 1;
    }
    return st;
}

void gpuring_bootstrap_end_alike(gpuring_bootstrap_t *b)
{
    b->ended_alike = 1;
}

int gpuring_bootstrap_in_step(gpuring_bootstrap_t *b, gpuring_status_t st)
{
    if (b->failed) return 0;
    if (st == GPURING_OK || b->ended_alike) return 1;
    (void)gpuring_bootstrap_leave(b, st, "a step of this rank's setup");
    return 0;
}

gpuring_status_t gpuring_bootstrap_agree(gpuring_bootstrap_t *b, gpuring_status_t local,
                                         const char *what)
{
    int32_t mine = (int32_t)local;
    int32_t *all = malloc(sizeof(int32_t) * (size_t)b->size);
    gpuring_status_t st;
    int bad = -1;

    b->bad_rank = -1;
    if (all == NULL) {
        return gpuring_bootstrap_leave(b, GPURING_ERR_NO_MEMORY,
                                       "allocating an agreement's exchange");
    }
    st = gpuring_bootstrap_allgather(b, &mine, all, sizeof(mine), what);
    for (int r = 0; st == GPURING_OK && r < b->size && bad < 0; r++) {
        if (all[r] != GPURING_OK) bad = r;
    }
    free(all);
    b->bad_rank = bad;
    if (st != GPURING_OK) return st;
    if (bad >= 0) gpuring_bootstrap_end_alike(b); /* every member saw the same failure */
    if (local != GPURING_OK) return local;
    return bad >= 0 ? GPURING_ERR_REMOTE : GPURING_OK;
}

/* FNV-1a: a stable hash of the host name (and boot id, so containers with
 * the same host name on different machines stay apart). */
static uint64_t bootstrap_hash(uint64_t h, const char *s, size_t len)
{
    for (size_t i = 0; i < len && s[i] != '\0'; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* The host's hash (its name, its kernel's boot id, then the file system of /dev/shm,
 * where shm_open puts the segments its ranks share: containers of one machine with one
 * host name but a /dev/shm each -- pods on the host's network -- cannot) and the
 * machine's (the boot id alone; the host's where it cannot be read). */
static void bootstrap_host_hashes(uint64_t *host_p, uint64_t *machine_p)
{
    char buf[256] = {0};
    uint64_t h = 14695981039346656037ull;
    struct stat shm;
    FILE *f;

    gethostname(buf, sizeof(buf) - 1);
    h = bootstrap_hash(h, buf, sizeof(buf));
    *machine_p = 0;
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        memset(buf, 0, sizeof(buf));
        if (fgets(buf, sizeof(buf), f) != NULL) {
            h = bootstrap_hash(h, buf, sizeof(buf));
            *machine_p = bootstrap_hash(14695981039346656037ull, buf, sizeof(buf));
        }
        fclose(f);
    }
    if (stat("/dev/shm", &shm) == 0) {
        memset(buf, 0, sizeof(buf));
        snprintf(buf, sizeof(buf), "%llx:%llx", (unsigned long long)shm.st_dev,
                 (unsigned long long)shm.st_ino);
        h = bootstrap_hash(h, buf, sizeof(buf));
    }
    *host_p = h;
    if (*machine_p == 0) *machine_p = h;
}

/* This process's random name, drawn once (getrandom; else the clock, pid and address
 * space mixed: unique enough for the processes of one host). */
static uint64_t bootstrap_proc_id(void)
{
    static uint64_t id; /* 0: not drawn yet */
    uint64_t v = __atomic_load_n(&id, __ATOMIC_ACQUIRE), expect = 0;

    if (v != 0) return v;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v)) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        v = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        v ^= (uint64_t)getpid() << 40 ^ (uint64_t)(uintptr_t)&ts;
        v = (v ^ v >> 30) * 0xbf58476d1ce4e5b9ull; /* (splitmix64's finalizer) */
        v = (v ^ v >> 27) * 0x94d049bb133111ebull;
        v ^= v >> 31;
    }
    if (v == 0) v = 1;
    if (!__atomic_compare_exchange_n(&id, &expect, v, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        v = expect; /* another thread drew it first */
    return v;
}

void gpuring_bootstrap_peer_info_local(gpuring_peer_info_t *info, uint64_t uid_next)
{
    memset(info, 0, sizeof(*info));
    bootstrap_host_hashes(&info->host_hash, &info->machine_hash);
    info->proc_id = bootstrap_proc_id();
    info->pid = (int32_t)getpid();
    info->pid_ns = gpuring_pid_ns();
    info->numa = -1;
    info->package = -1;
    info->nic = -1;
    info->uid_next = uid_next;
}

gpuring_status_t gpuring_bootstrap_allgather_blob(gpuring_bootstrap_t *b, const void *blob,
                                                  size_t len, void **all_p, size_t *stride_p,
                                                  const char *what)
{
    uint64_t mine = len, *lens;
    size_t stride = 0;
    char *padded = NULL, *all = NULL;
    gpuring_status_t st;

    lens = malloc(sizeof(uint64_t) * (size_t)b->size);
    if (lens == NULL) {
        return gpuring_bootstrap_leave(b, GPURING_ERR_NO_MEMORY,
                                       "allocating the lengths of a blob exchange");
    }
    GPURING_CHECK_GOTO(gpuring_bootstrap_allgather(b, &mine, lens, sizeof(mine), what), st, out);
    for (int r = 0; r < b->size; r++) stride = GPURING_MAX(stride, (size_t)lens[r]);
    padded = calloc(1, stride ? stride : 1);
    all = malloc((stride ? stride : 1) * (size_t)b->size);
    if (padded == NULL || all == NULL) {
        st = gpuring_bootstrap_leave(b, GPURING_ERR_NO_MEMORY,
                                     "allocating a blob exchange");
        goto out;
    }
    if (len > 0) memcpy(padded, blob, len); /* a rank whose setup failed has no blob */
    GPURING_CHECK_GOTO(gpuring_bootstrap_allgather(b, padded, all, stride, what), st, out);
    *all_p = all;
    *stride_p = stride;
    all = NULL;
out:
    free(padded);
    free(all);
    free(lens);
    return st;
}
