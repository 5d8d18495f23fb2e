/*
 * test_arrivals.c -- the arrival board (common/gpuring_arrivals.h) between
 * processes of one host: every rank's line seen by the others, a rank behind
 * the call excused (and named) until the board's limit, no excuse once every
 * rank has made the call, a rank whose process has exited named at once (behind
 * the call, or in it while another is behind), a
 * rank that never opened the board never counted late (nor the board whole), a
 * rank past every call (a broken communicator's) waiting for no one, the name gone
 * from /dev/shm once unlinked, and no name left behind where /dev/shm is full.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/gpuring_arrivals.h"
#include "test/unit/unit_test.h"

#define NLOCAL 3

/* A full /dev/shm, where fallocate_fails says: this program's posix_fallocate is the
 * one gpuring_shm_map calls (libgpuring_core is linked in statically). */
static int fallocate_fails;

int posix_fallocate(int fd, off_t offset, off_t len)
{
    int (*real)(int, off_t, off_t);

    if (fallocate_fails) return ENOSPC;
    real = (int (*)(int, off_t, off_t))dlsym(RTLD_NEXT, "posix_fallocate");
    return real != NULL ? real(fd, offset, len) : EOPNOTSUPP;
}

/* Another rank's board removed by its maker right after this process found it there:
 * where unlink_after_eexist says, this program's shm_open (the one gpuring_arrivals_open
 * calls) removes the name once a create found it existing. */
static int unlink_after_eexist;

int shm_open(const char *name, int oflag, mode_t mode)
{
    int (*real)(const char *, int, mode_t) =
        (int (*)(const char *, int, mode_t))dlsym(RTLD_NEXT, "shm_open");
    int fd = real(name, oflag, mode), err = errno;

    if (fd < 0 && err == EEXIST && unlink_after_eexist) {
        unlink_after_eexist = 0;
        (void)shm_unlink(name);
        errno = err;
    }
    return fd;
}

/* Is `name` in /dev/shm? */
static int shm_exists(const char *name)
{
    int fd = shm_open(name, O_RDWR, 0);

    if (fd >= 0) close(fd);
    return fd >= 0;
}

/* A board of three ranks (communicator ranks 4, 7, 9) as rank `me` sees it. */
static gpuring_arrivals_t *open_as(uint64_t uid, int me, double limit)
{
    static const int ranks[NLOCAL] = {4, 7, 9};
    const gpuring_arrivals_owner_t owner = {gpuring_pid_ns(), 1, 0x1234abcdull};

    return gpuring_arrivals_open(uid, &owner, ranks, NLOCAL, me, limit);
}

/* A child that opens the board as rank `me`, marks call `call`, then exits -- at once
 * (`hold` 0) or when told on fd `hold`; its pid.  `up`: written once it marked. */
static pid_t marker(uint64_t uid, int me, uint64_t call, int up, int hold)
{
    pid_t pid = fork();
    char c;

    if (pid == 0) {
        gpuring_arrivals_t *b = open_as(uid, me, 0.0);

        if (b == NULL) _exit(2);
        gpuring_arrivals_mark(b, call);
        if (write(up, "m", 1) != 1) _exit(3);
        if (hold > 0 && read(hold, &c, 1) != 1) _exit(4);
        _exit(0);
    }
    return pid;
}

/* Rank 1 dies in call 6 while rank 2, alive, is still behind it: the wait fails at once,
 * naming the dead rank (it used to pass over rank 1 -- in the call -- and excuse the
 * late one up to the board's limit, an hour by default) */
static void dead_in_call(uint64_t uid)
{
    gpuring_arrivals_t *b = open_as(uid, 0, 0.0);
    int up[2], down[2], st;
    double since = 0.0;
    pid_t in, late;
    char c = 0;

    EXPECT(b != NULL && pipe(up) == 0 && pipe(down) == 0, "dead in the call: board, pipes");
    if (b == NULL) return;
    late = marker(uid, 2, 5, up[1], down[0]);
    in = marker(uid, 1, 6, up[1], 0);
    EXPECT(read(up[0], &c, 1) == 1 && read(up[0], &c, 1) == 1, "both children marked");
    EXPECT(waitpid(in, &st, 0) == in && WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "rank 1 made call 6 and exited (status %d)", st);
    gpuring_arrivals_mark(b, 6);
    EXPECT(gpuring_arrivals_excuse(b, 6, 1.0, &since) == GPURING_ERR_REMOTE,
           "rank 1 exited in call 6, rank 2 behind it: the wait fails at once");
    EXPECT(write(down[1], "x", 1) == 1 && waitpid(late, &st, 0) == late, "rank 2 let go");
    gpuring_arrivals_unlink(b);
    gpuring_arrivals_close(b);
}

/* Rank 1's communicator fails in call 4 (it had numbered call 5 already: a queued
 * non-blocking call); rank 0 then asks for calls 4, 5, 6. */
static void refused(uint64_t uid)
{
    gpuring_arrivals_t *b0 = open_as(uid, 0, 0.0), *b1 = open_as(uid, 1, 0.0);

    EXPECT(b0 != NULL && b1 != NULL, "two views of a board");
    if (b0 == NULL || b1 == NULL) goto out;
    gpuring_arrivals_mark(b0, 4);
    gpuring_arrivals_mark(b1, 4);
    EXPECT(gpuring_arrivals_refuser(b0, 4) == -1, "no rank refuses before a failure");
    gpuring_arrivals_mark(b1, 5);
    gpuring_arrivals_refuse(b1);
    EXPECT(gpuring_arrivals_refuser(b0, 5) == -1,
           "a call the failed rank had numbered is not one it is known to refuse");
    EXPECT(gpuring_arrivals_refuser(b0, 6) == 7, "rank 7 (line 1) refuses call 6");
    EXPECT(gpuring_arrivals_refuser(b0, 100) == 7, "... and every later one");
    EXPECT(gpuring_arrivals_refuser(b1, 100) == -1, "a rank's own line does not count");
    /* again, after another thread numbered a call: the first refusal stands */
    gpuring_arrivals_mark(b1, 6);
    gpuring_arrivals_refuse(b1);
    EXPECT(gpuring_arrivals_refuser(b0, 6) == 7, "refused from 6 still");
    EXPECT(gpuring_arrivals_excuse(b0, 6, 1.0, &(double){0.0}) == GPURING_ERR_TIMEOUT,
           "a refusing rank, past every call, is never late");
    EXPECT(gpuring_arrivals_refuser(NULL, 6) == -1, "no board: no refusal");
out:
    gpuring_arrivals_close(b1);
    gpuring_arrivals_unlink(b0);
    gpuring_arrivals_close(b0);
}

/* Lines 0 and 1 (communicator ranks 4 and 7) name their calls: another call under
 * the same number is found, from either side; a number another line does not name, or
 * the same call, is not. */
static void named(uint64_t uid)
{
    gpuring_arrivals_t *b0 = open_as(uid, 0, 0.0), *b1 = open_as(uid, 1, 0.0);

    EXPECT(b0 != NULL && b1 != NULL, "named: two views of a board");
    if (b0 == NULL || b1 == NULL) goto out;
    EXPECT(gpuring_arrivals_differ(b0, 1) == -1 && gpuring_arrivals_stop(b0, 1) == GPURING_OK,
           "no line names a call yet");
    gpuring_arrivals_name(b0, 1, 0x1111);
    gpuring_arrivals_name(b1, 1, 0x1111);
    EXPECT(gpuring_arrivals_differ(b0, 1) == -1, "the same call under number 1");
    gpuring_arrivals_name(b0, 2, 0x2222);
    EXPECT(gpuring_arrivals_differ(b0, 2) == -1 && gpuring_arrivals_differ(b1, 1) == -1,
           "rank 7 has not named call 2 yet: nothing to compare");
    gpuring_arrivals_name(b1, 2, 0x2223);
    EXPECT(gpuring_arrivals_differ(b0, 2) == 7, "rank 7 makes another call 2 (seen by rank 4)");
    EXPECT(gpuring_arrivals_differ(b1, 2) == 4, "rank 4 makes another call 2 (seen by rank 7)");
    EXPECT(gpuring_arrivals_stop(b0, 2) == GPURING_ERR_MISMATCH, "the stop of a mismatch");
    EXPECT(gpuring_arrivals_differ(b0, 1) == -1, "call 1 is no line's any more");
    gpuring_arrivals_name(b1, 3, 0x3333); /* (rank 7 queued call 3 behind it) */
    EXPECT(gpuring_arrivals_differ(b0, 2) == -1, "rank 7's line names call 3 now");
    gpuring_arrivals_refuse(b1);
    EXPECT(gpuring_arrivals_stop(b0, 5) == GPURING_ERR_REMOTE, "a refusal is a stop too");
    EXPECT(gpuring_arrivals_differ(NULL, 2) == -1 && gpuring_arrivals_stop(NULL, 2) == GPURING_OK,
           "no board: no mismatch");
out:
    gpuring_arrivals_close(b1);
    gpuring_arrivals_unlink(b0);
    gpuring_arrivals_close(b0);
}

int main(void)
{
    const uint64_t uid = (uint64_t)getpid(); /* a name no other run uses */
    gpuring_arrivals_t *b0, *b1;
    double since = 0.0;
    int up[2], down[2], st; /* child to parent, parent to child */
    pid_t child;
    char c = 0;

    /* rank 0 (this process) and rank 1 (a child that makes call 5, then exits on
     * request); rank 2 never opens the board */
    b0 = open_as(uid, 0, 0.0);
    EXPECT(b0 != NULL, "rank 0 opened the board");
    if (b0 == NULL) return unit_report();
    EXPECT(pipe(up) == 0 && pipe(down) == 0, "pipes");
    child = fork();
    if (child == 0) {
        gpuring_arrivals_t *b = open_as(uid, 1, 0.0);

        if (b == NULL) _exit(2);
        gpuring_arrivals_mark(b, 5);
        if (write(up[1], "m", 1) != 1) _exit(3);
        if (read(down[0], &c, 1) != 1) _exit(4); /* until the parent says */
        _exit(0);
    }
    EXPECT(read(up[0], &c, 1) == 1 && c == 'm', "the child marked call 5");

    /* call 5: rank 1 is in it, rank 2 never opened: no one is late */
    gpuring_arrivals_mark(b0, 5);
    EXPECT(gpuring_arrivals_excuse(b0, 5, 1.0, &since) == GPURING_ERR_TIMEOUT,
           "every rank with the board made call 5: no excuse");
    EXPECT(since == 0.0, "no lateness recorded");
    EXPECT(!gpuring_arrivals_whole(b0, NLOCAL), "a rank without its line: not whole");
    EXPECT(gpuring_arrivals_excuse(b0, UINT64_MAX, 1.0, &since) == GPURING_ERR_TIMEOUT,
           "a broken communicator's rank (past every call) waits for no one as late");
    /* call 6: rank 1 (communicator rank 7) is behind it */
    gpuring_arrivals_mark(b0, 6);
    EXPECT(gpuring_arrivals_excuse(b0, 6, 1.0, &since) == GPURING_OK,
           "rank 7 behind call 6: waited for");
    EXPECT(since > 0.0, "the call's lateness began");
    /* a limit: a second board of rank 0's with a 2 s limit, lateness 1 s old, then 3 */
    b1 = open_as(uid, 0, 2.0);
    EXPECT(b1 != NULL, "a second view of the board");
    if (b1 != NULL) {
        double s1 = 0.0;

        EXPECT(gpuring_arrivals_excuse(b1, 6, 1.0, &s1) == GPURING_OK, "within the limit");
        s1 -= 2.0;
        EXPECT(gpuring_arrivals_excuse(b1, 6, 1.0, &s1) == GPURING_ERR_TIMEOUT,
               "past the limit: the wait fails");
        gpuring_arrivals_close(b1);
    }
    /* the child exits: its process gone, named at once */
    EXPECT(write(down[1], "x", 1) == 1, "tell the child");
    EXPECT(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "the child exited cleanly (status %d)", st);
    EXPECT(gpuring_arrivals_excuse(b0, 6, 1.0, &since) == GPURING_ERR_REMOTE,
           "a late rank whose process exited: the wait fails at once");

    /* unlinked: the name is gone, the mapping still works */
    gpuring_arrivals_unlink(b0);
    {
        char name[GPURING_ARRIVALS_NAME_MAX];
        int fd;

        snprintf(name, sizeof(name), "%s", b0->name);
        fd = shm_open(name, O_RDWR, 0);
        EXPECT(fd < 0 && errno == ENOENT, "the board's name left /dev/shm");
        if (fd >= 0) close(fd);
    }
    gpuring_arrivals_mark(b0, 7);
    EXPECT(__atomic_load_n(&b0->slots[0].call, __ATOMIC_RELAXED) == 7, "marks after unlink");
    gpuring_arrivals_close(b0);

    /* /dev/shm full: no board, and no name left behind by the rank that made it */
    {
        char name[GPURING_ARRIVALS_NAME_MAX];

        fallocate_fails = 1;
        b0 = open_as(uid + 1, 0, 0.0);
        fallocate_fails = 0;
        EXPECT(b0 == NULL, "no board where its pages cannot be had");
        gpuring_arrivals_close(b0);
        snprintf(name, sizeof(name), "/gpuring-%llu-1-arrivals-%016llx-%llu",
                 (unsigned long long)gpuring_pid_ns(), 0x1234abcdull,
                 (unsigned long long)(uid + 1));
        EXPECT(!shm_exists(name), "its maker removed the name %s", name);
    }
    /* ... and none by a rank that found another's name, which its maker then removed
     * (this rank makes it anew, and removes it) */
    b1 = open_as(uid + 3, 1, 0.0);
    EXPECT(b1 != NULL, "rank 1 made a board");
    if (b1 != NULL) {
        char name[GPURING_ARRIVALS_NAME_MAX];

        snprintf(name, sizeof(name), "%s", b1->name);
        unlink_after_eexist = 1;
        fallocate_fails = 1;
        b0 = open_as(uid + 3, 0, 0.0);
        fallocate_fails = 0;
        EXPECT(b0 == NULL && unlink_after_eexist == 0,
               "rank 0 found the name, which went, then could not map its own");
        gpuring_arrivals_close(b0);
        EXPECT(!shm_exists(name), "no name left behind: %s", name);
        b1->linked = 0; /* (its maker's name is gone already) */
        gpuring_arrivals_close(b1);
    }
    /* a rank that cannot map a board another rank made leaves the name to its maker */
    b1 = open_as(uid + 2, 1, 0.0);
    EXPECT(b1 != NULL, "rank 1 made a board");
    fallocate_fails = 1;
    b0 = open_as(uid + 2, 0, 0.0);
    fallocate_fails = 0;
    EXPECT(b0 == NULL, "rank 0 could not map it");
    gpuring_arrivals_close(b0);
    if (b1 != NULL) {
        EXPECT(shm_exists(b1->name), "rank 1's board stays in /dev/shm");
        gpuring_arrivals_unlink(b1);
        gpuring_arrivals_close(b1);
    }
    EXPECT(gpuring_arrivals_excuse(NULL, 1, 1.0, &since) == GPURING_ERR_TIMEOUT,
           "no board: no excuse");
    dead_in_call(uid + 4);
    refused(uid + 5);
    named(uid + 6);
    return unit_report();
}
