/*
 * gpuring_arrivals.h -- a communicator's arrival board: which call each of its
 * ranks on this host has made.
 *
 * A wait for a peer cannot tell a rank that has not made the call yet (an
 * application that writes a checkpoint on one rank while the others go on to
 * the next MPI_Allreduce: a valid program, which Open MPI alone waits for)
 * from one that stopped inside it -- in a ring, a late rank stalls the rank
 * two steps on as surely as a dead one.  Only every rank's call count can, so
 * each rank of a host publishes the number of the call it is in (one relaxed
 * store per call, in a shared-memory page per communicator and host), and a
 * wait that has been idle for its wait timeout asks the board before it
 * fails: a rank of this host behind the call -> warn, naming it, and go on
 * waiting (up to the board's limit, coll_gpuring_arrival_timeout); a rank of
 * this host whose process is gone -> fail at once, naming it; every rank of
 * this host in the call -> fail as the wait would without the board (a stall,
 * or a rank on another host: gpuring cannot see its count).
 *
 * A rank whose communicator failed makes no later call (each returns an error at
 * once, posting no step): its line says from which call on
 * (gpuring_arrivals_refuse), and a wait of a later call on this host, idle, fails
 * at once, naming it (gpuring_arrivals_refuser) -- a rank whose part of the failed
 * call had ended (one that only sent) would otherwise wait out its timeout there.
 *
 * Each line also says what the rank's numbered call is (gpuring_arrivals_name: its
 * gpuring_call_id), so that a wait finds a rank of this host that makes another call
 * under the same number (gpuring_arrivals_differ): ranks whose calls take different
 * paths -- 64 KiB on some, the LL direct allreduce's one kernel, 64 KiB + 4 on
 * another, the direct allreduce's handle exchange -- wait in different places and
 * see no step of the other call, and would meet only at their timeouts.
 *
 * The page is named after the communicator's uid and its lowest rank on the
 * host (that process's pid namespace, pid and random name: the scheme of every
 * segment of gpuring's, so the sweep of a dead pid's segments removes it);
 * every rank of the host opens (creates) it before the setup's exchanges and
 * unlinks it once they agreed (all have opened it by then), so nothing stays in
 * /dev/shm.  A rank that could not
 * open it (or a host whose ranks do not share /dev/shm) is never counted late.
 */
#ifndef GPURING_COMMON_ARRIVALS_H
#define GPURING_COMMON_ARRIVALS_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpuring_common.h"

#define GPURING_ARRIVALS_NAME_MAX 96

/* One rank's line: written by its owner only. */
typedef struct gpuring_arrivals_slot {
    uint64_t call;    /* the number of the call it is in or made last (atomic) */
    uint64_t refused; /* 0, or the first call it will not make (atomic): its
                       * communicator failed (gpuring_arrivals_refuse) */
    uint64_t pid_ns;  /* its pid namespace (gpuring_pid_ns): where pid means something */
    uint64_t named;   /* the call `id` is of (atomic; 0 while it is written) */
    uint64_t id;      /* that call's gpuring_call_id (atomic) */
    int32_t pid;      /* 0 until it opened the board */
    char pad[GPURING_CACHELINE - 5 * sizeof(uint64_t) - sizeof(int32_t)];
} gpuring_arrivals_slot_t;
#ifndef __cplusplus /* (C++ sources see the layout the C ones checked) */
_Static_assert(sizeof(gpuring_arrivals_slot_t) == GPURING_CACHELINE,
               "a rank's line of the arrival board is one cache line");
#endif

typedef struct gpuring_arrivals {
    gpuring_arrivals_slot_t *slots; /* the shared page(s): one line per rank of the host */
    size_t bytes;
    int nlocal, me;                 /* the host's ranks, and which of them this one is */
    double limit;                   /* seconds a call waits for a late rank (0: no bound) */
    char name[GPURING_ARRIVALS_NAME_MAX];
    int linked;                     /* name still in /dev/shm (this rank's view) */
    int ranks[];                    /* the communicator rank of each */
} gpuring_arrivals_t;

/* The process of a host's lowest rank, which names the board. */
typedef struct gpuring_arrivals_owner {
    uint64_t pid_ns;  /* its pid namespace (gpuring_pid_ns) */
    int32_t pid;
    uint64_t proc_id; /* its random name */
} gpuring_arrivals_owner_t;

/*
 * Open (or create) the board of the communicator with uid `uid` for the ranks
 * `ranks[0..nlocal)` of this host (communicator ranks, ascending: ranks[me] is
 * this one; `owner`, ranks[0]'s process), and publish this rank in it.
 * `limit`: coll_gpuring_arrival_timeout.  NULL (logged at warn level) when it
 * cannot: the communicator then waits as without it.
 */
gpuring_arrivals_t *gpuring_arrivals_open(uint64_t uid, const gpuring_arrivals_owner_t *owner,
                                          const int *ranks, int nlocal, int me, double limit);
/* Remove its name from /dev/shm (every rank of the host has opened it). */
void gpuring_arrivals_unlink(gpuring_arrivals_t *board);
void gpuring_arrivals_close(gpuring_arrivals_t *board);

/* This rank makes call number `call` of the communicator now. */
static inline void gpuring_arrivals_mark(gpuring_arrivals_t *board, uint64_t call)
{
    if (board != NULL) __atomic_store_n(&board->slots[board->me].call, call, __ATOMIC_RELEASE);
}

/* This rank's call number `call` is the call `id` (gpuring_call_id): the caller's thread,
 * once the call has its number (a call queued behind may name itself before an earlier
 * one ends: a wait compares only lines that name its own number). */
static inline void gpuring_arrivals_name(gpuring_arrivals_t *board, uint64_t call, uint64_t id)
{
    gpuring_arrivals_slot_t *mine;

    if (board == NULL) return;
    mine = &board->slots[board->me];
    __atomic_store_n(&mine->named, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE); /* (a reader that sees the new id sees 0 here) */
    __atomic_store_n(&mine->id, id, __ATOMIC_RELAXED);
    __atomic_store_n(&mine->named, call, __ATOMIC_RELEASE);
}

/* This rank's communicator failed: it makes none of the calls after the one it is in
 * (its line's; a call it numbered already -- a non-blocking call queued behind --
 * included), and is never again one its host's peers wait for as late (past every
 * call).  Idempotent. */
static inline void gpuring_arrivals_refuse(gpuring_arrivals_t *board)
{
    gpuring_arrivals_slot_t *mine;
    uint64_t call;

    if (board == NULL) return;
    mine = &board->slots[board->me];
    call = __atomic_load_n(&mine->call, __ATOMIC_RELAXED);
    /* (the first time only: a call another thread numbers after it, refused too, does
     * not move it on) */
    if (call != UINT64_MAX && __atomic_load_n(&mine->refused, __ATOMIC_RELAXED) == 0)
        __atomic_store_n(&mine->refused, call + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&mine->call, UINT64_MAX, __ATOMIC_RELEASE);
}

/* A rank of this host that will not make call number `call` (its communicator failed
 * before it: logged, naming it), or -1 (none, or no board).  A few loads: asked by idle
 * waits. */
int gpuring_arrivals_refuser(const gpuring_arrivals_t *board, uint64_t call);

/* A rank of this host that makes another call than this rank under number `call` (both
 * lines name it, with different ids: logged, naming it), or -1 (none, or no board).  A
 * few loads: asked by idle waits. */
int gpuring_arrivals_differ(const gpuring_arrivals_t *board, uint64_t call);

/* What an idle wait of call `call` finds on the board: GPURING_ERR_REMOTE, a rank of
 * this host refuses it (gpuring_arrivals_refuser); GPURING_ERR_MISMATCH, one makes
 * another call under its number (gpuring_arrivals_differ); else GPURING_OK.  Logged. */
gpuring_status_t gpuring_arrivals_stop(const gpuring_arrivals_t *board, uint64_t call);

/* The call this rank is in (its own line). */
static inline uint64_t gpuring_arrivals_mine(const gpuring_arrivals_t *board)
{
    return __atomic_load_n(&board->slots[board->me].call, __ATOMIC_RELAXED);
}

/* Does the board hold every one of the communicator's `size` ranks, each with its line
 * (the communicator is on this host alone)? */
int gpuring_arrivals_whole(const gpuring_arrivals_t *board, int size);

/* A rank of this host whose process has exited (logged), or -1 (none, or no board). */
int gpuring_arrivals_gone(const gpuring_arrivals_t *board);

/*
 * A wait of call number `call` has been idle for its whole timeout (`every`
 * seconds, its wait_timeout).  GPURING_OK: a rank of this host has not made
 * the call yet -- warned, naming it and how long the call has waited for it;
 * the caller restarts its clock and waits on.  GPURING_ERR_TIMEOUT: every rank
 * of this host has made it (or no board), or the board's limit has passed
 * (logged): the wait fails as it would without the board.  GPURING_ERR_REMOTE:
 * the late rank's process has exited (logged).  *late_since_p is the caller's
 * (0.0 at the start of its wait): when the call first found a rank late.
 */
gpuring_status_t gpuring_arrivals_excuse(gpuring_arrivals_t *board, uint64_t call, double every,
                                         double *late_since_p);

#endif /* GPURING_COMMON_ARRIVALS_H */
