/*
 * gpuring_arrivals.c -- a communicator's arrival board (gpuring_arrivals.h).
 */
#include "common/gpuring_arrivals.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The board's name opened: made here (*made_p 1) or found, another rank's (0) -- one
 * that its maker removes in between is made here then.  -1 (errno) on failure. */
static int arrivals_shm_open(const char *name, int *made_p)
{
    for (int tries = 0; tries < 16; tries++) {
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);

        *made_p = fd >= 0;
        if (fd >= 0 || errno != EEXIST) return fd;
        fd = shm_open(name, O_RDWR, 0600);
        if (fd >= 0 || errno != ENOENT) return fd;
    }
    return -1; /* (made and removed over and over: errno ENOENT) */
}

gpuring_arrivals_t *gpuring_arrivals_open(uint64_t uid, const gpuring_arrivals_owner_t *owner,
                                          const int *ranks, int nlocal, int me, double limit)
{
    gpuring_arrivals_t *b = calloc(1, sizeof(*b) + sizeof(int) * (size_t)nlocal);
    const char *what = "allocating it";
    void *base;
    int fd, made;

    if (b == NULL) goto fail;
    memcpy(b->ranks, ranks, sizeof(int) * (size_t)nlocal);
    b->nlocal = nlocal;
    b->me = me;
    b->limit = limit;
    b->bytes = sizeof(gpuring_arrivals_slot_t) * (size_t)nlocal;
    /* the scheme of every segment of gpuring's (gpuring_conn_shm_sweep removes those of
     * a dead pid): the lowest rank's pid namespace and pid, and the process's random name
     * (a pid repeats across namespaces) */
    snprintf(b->name, sizeof(b->name), "/gpuring-%llu-%d-arrivals-%016llx-%llu",
             (unsigned long long)owner->pid_ns, (int)owner->pid,
             (unsigned long long)owner->proc_id, (unsigned long long)uid);
    /* whichever rank of the host comes first creates it; each makes it its size (the
     * same on every rank: what another one wrote stays) */
    what = "shm_open";
    fd = arrivals_shm_open(b->name, &made);
    if (fd < 0) goto fail;
    if (gpuring_shm_map_fd(fd, 1, b->bytes, &base, &what) != 0) {
        /* the rank that made the name removes it again (a full /dev/shm: no rank of the
         * host can map it), so that nothing is left behind; a rank that comes after
         * makes a new board, whose line the ranks on the first never see (to them a
         * rank without the board: never late) */
        if (made) {
            const int err = errno;

            (void)shm_unlink(b->name);
            errno = err;
        }
        goto fail;
    }
    b->linked = 1;
    b->slots = base;
    b->slots[me].pid_ns = gpuring_pid_ns();
    __atomic_store_n(&b->slots[me].call, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&b->slots[me].refused, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&b->slots[me].named, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&b->slots[me].pid, (int32_t)getpid(), __ATOMIC_RELEASE);
    return b;

fail:
    GPURING_WARN(GPURING_SUBSYS_INIT, "no arrival board for this communicator (%s: %s): its "
                 "waits cannot tell a rank of this host that is late to a call from one that "
                 "stopped in it, and fail at coll_gpuring_wait_timeout either way", what,
                 b != NULL ? strerror(errno) : "no memory");
    gpuring_arrivals_close(b); /* (its name stays: the others' board, unlinked by them) */
    return NULL;
}

void gpuring_arrivals_unlink(gpuring_arrivals_t *b)
{
    if (b == NULL || !b->linked) return;
    (void)shm_unlink(b->name); /* (another rank of the host may have done it: ENOENT) */
    b->linked = 0;
}

void gpuring_arrivals_close(gpuring_arrivals_t *b)
{
    if (b == NULL) return;
    gpuring_arrivals_unlink(b);
    if (b->slots != NULL) munmap(b->slots, b->bytes);
    free(b);
}

/* Has the process of line i exited?  (Its pid means something here only in this pid
 * namespace; a line without one -- a rank without the board -- is no process.) */
static int arrivals_exited(const gpuring_arrivals_t *b, int i)
{
    const unsigned long long ns = gpuring_pid_ns();
    const int32_t pid = __atomic_load_n(&b->slots[i].pid, __ATOMIC_ACQUIRE);

    return pid > 0 && ns != 0 && b->slots[i].pid_ns == ns && kill(pid, 0) != 0 && errno == ESRCH;
}

/* A rank of this host whose process has exited (*gone_p set: before call `call` or in
 * it -- a rank that made it cannot end it without this one), else the first behind
 * the call (-1: none), and its last call in *seen_p. */
static int arrivals_late(const gpuring_arrivals_t *b, uint64_t call, uint64_t *seen_p,
                         int *gone_p)
{
    int late = -1;

    *gone_p = 0;
    for (int i = 0; i < b->nlocal; i++) {
        const gpuring_arrivals_slot_t *s = &b->slots[i];
        uint64_t seen;

        /* (a rank without the board: never late) */
        if (i == b->me || __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE) <= 0) continue;
        seen = __atomic_load_n(&s->call, __ATOMIC_ACQUIRE);
        if (arrivals_exited(b, i)) {
            *seen_p = seen;
            *gone_p = 1;
            return i;
        }
        if (seen >= call) continue;
        if (late < 0) {
            late = i;
            *seen_p = seen;
        }
    }
    return late;
}

int gpuring_arrivals_refuser(const gpuring_arrivals_t *b, uint64_t call)
{
    for (int i = 0; b != NULL && i < b->nlocal; i++) {
        const uint64_t from = __atomic_load_n(&b->slots[i].refused, __ATOMIC_ACQUIRE);

        if (i == b->me || from == 0 || call < from) continue;
        GPURING_ERROR(GPURING_SUBSYS_COLL, "call %llu waits for rank %d of this host, whose "
                      "communicator failed at an earlier call: it makes no call from %llu on "
                      "(its log says why), so this one cannot complete",
                      (unsigned long long)call, b->ranks[i], (unsigned long long)from);
        return b->ranks[i];
    }
    return -1;
}

/* The id line i names for call `call`, or 0 where it names another (or is being written) */
static uint64_t arrivals_id(const gpuring_arrivals_t *b, int i, uint64_t call)
{
    const gpuring_arrivals_slot_t *s = &b->slots[i];
    uint64_t id;

    if (__atomic_load_n(&s->named, __ATOMIC_ACQUIRE) != call) return 0;
    id = __atomic_load_n(&s->id, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE); /* (the id read before the check below) */
    return __atomic_load_n(&s->named, __ATOMIC_RELAXED) == call ? id : 0;
}

int gpuring_arrivals_differ(const gpuring_arrivals_t *b, uint64_t call)
{
    const uint64_t mine = b != NULL ? arrivals_id(b, b->me, call) : 0;

    for (int i = 0; mine != 0 && i < b->nlocal; i++) {
        const uint64_t theirs = i != b->me ? arrivals_id(b, i, call) : 0;

        if (theirs == 0 || theirs == mine) continue;
        GPURING_ERROR(GPURING_SUBSYS_COLL, "call %llu mismatch: rank %d makes another call "
                      "than this rank (this host's arrival board: another collective, count, "
                      "datatype, op or root under that number): the ranks passed different "
                      "arguments, or made their calls in a different order",
                      (unsigned long long)call, b->ranks[i]);
        return b->ranks[i];
    }
    return -1;
}

gpuring_status_t gpuring_arrivals_stop(const gpuring_arrivals_t *b, uint64_t call)
{
    if (gpuring_arrivals_refuser(b, call) >= 0) return GPURING_ERR_REMOTE;
    if (gpuring_arrivals_differ(b, call) >= 0) return GPURING_ERR_MISMATCH;
    return GPURING_OK;
}

int gpuring_arrivals_whole(const gpuring_arrivals_t *b, int size)
{
    if (b == NULL || b->nlocal != size) return 0;
    for (int i = 0; i < b->nlocal; i++)
        if (__atomic_load_n(&b->slots[i].pid, __ATOMIC_ACQUIRE) <= 0) return 0;
    return 1;
}

int gpuring_arrivals_gone(const gpuring_arrivals_t *b)
{
    for (int i = 0; b != NULL && i < b->nlocal; i++) {
        if (i == b->me || !arrivals_exited(b, i)) continue;
        GPURING_ERROR(GPURING_SUBSYS_COLL, "rank %d of this host has exited (pid %d)",
                      b->ranks[i], (int)b->slots[i].pid);
        return b->ranks[i];
    }
    return -1;
}

gpuring_status_t gpuring_arrivals_excuse(gpuring_arrivals_t *b, uint64_t call, double every,
                                         double *late_since_p)
{
    uint64_t seen = 0;
    double now, waited;
    int late, gone;

    /* (a broken communicator's rank, past every call, waits for no one as late) */
    if (b == NULL || call == UINT64_MAX || (late = arrivals_late(b, call, &seen, &gone)) < 0)
        return GPURING_ERR_TIMEOUT;
    if (gone) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "call %llu waits for rank %d of this host, whose "
                      "process (pid %d) has exited %s (its last call was %llu)",
                      (unsigned long long)call, b->ranks[late], (int)b->slots[late].pid,
                      seen >= call ? "in it" : "before making it", (unsigned long long)seen);
        return GPURING_ERR_REMOTE;
    }
    now = gpuring_time_sec();
    if (*late_since_p == 0.0) { /* idle `every` already */
        *late_since_p = now - every;
        waited = every;
    } else {
        waited = now - *late_since_p;
    }
    if (b->limit > 0 && waited >= b->limit) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "call %llu has waited %.0f s for rank %d of this "
                      "host, which has not made it (its last call is %llu): past "
                      "coll_gpuring_arrival_timeout (%.0f s)", (unsigned long long)call, waited,
                      b->ranks[late], (unsigned long long)seen, b->limit);
        return GPURING_ERR_TIMEOUT;
    }
    GPURING_WARN(GPURING_SUBSYS_COLL, "call %llu has waited %.0f s for rank %d of this host, "
                 "which has not made it yet (its last call is %llu): waiting on, up to "
                 "coll_gpuring_arrival_timeout (%.0f s; 0: no bound)", (unsigned long long)call,
                 waited, b->ranks[late], (unsigned long long)seen, b->limit);
    return GPURING_OK;
}
