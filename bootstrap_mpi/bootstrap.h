/*
 * bootstrap.h -- the exchanges gpuring needs at communicator setup, over the
 * MPI communicator itself.  This replaces NCCL's unique id, root thread and
 * TCP bootstrap ring (seeds 000/001): the communicator already exists, so
 * every exchange is an allgather on it.
 *
 * The transport is a table of byte-level operations that ompi_coll_gpuring/
 * fills with its exchanges over the PML, on tags of gpuring's own
 * (coll_gpuring_exchange.c; never a collective: not gpuring's, nor the
 * component below's, whose non-blocking calls pair by their order), so this
 * layer needs no Open MPI header.
 */
#ifndef GPURING_BOOTSTRAP_MPI_BOOTSTRAP_H
#define GPURING_BOOTSTRAP_MPI_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>
#include "common/gpuring_common.h"

typedef struct gpuring_bootstrap_ops {
    /* every rank contributes `bytes` bytes; rbuf gets size * bytes in rank order.
       Returns a gpuring_status_t: GPURING_OK, GPURING_ERR_TIMEOUT (a member did
       not join within the wait timeout), or another error the op logged -- naming
       the exchange by `what` ("setup exchange of the ring positions"). */
    int (*allgather)(void *ctx, const void *sbuf, void *rbuf, size_t bytes, const char *what);
} gpuring_bootstrap_ops_t;

typedef struct gpuring_bootstrap {
    const gpuring_bootstrap_ops_t *ops;
    void *ctx;
    int rank;
    int size;
    /* this rank is out of step with the others: an exchange failed (a member did
     * not join in time, or MPI failed), or this rank left the sequence of
     * exchanges its members are in (gpuring_bootstrap_leave).  The members may
     * have made different numbers of exchanges since -- gpuring's exchanges
     * pair by their order -- so no later outcome is
     * agreed */
    int failed;
    /* the last exchange ended every member's sequence alike: an agreement that
     * failed, or data every member holds said so (gpuring_bootstrap_end_alike);
     * cleared by each exchange */
    int ended_alike;
    /* the first member whose part of the last agreement was a failure, -1 if none
     * (gpuring_bootstrap_agree): for the other members' logs */
    int bad_rank;
} gpuring_bootstrap_t;

/* Once b->failed, returns GPURING_ERR_BROKEN and posts nothing: a member that went
 * on exchanging would pair its next exchange with a late member's earlier one (the
 * late one's matches what this one left in flight), so that the two could reach
 * different outcomes -- one falling back below while the other fails. */
gpuring_status_t gpuring_bootstrap_allgather(gpuring_bootstrap_t *b, const void *mine,
                                             void *all, size_t bytes, const char *what);

/*
 * Sequences of exchanges (a communicator's setup, a plane's connections) and how
 * they end.  Every member makes every exchange of a sequence: one that stops where
 * the others go on leaves them waiting in the next one, and itself (falling back
 * below) waiting for them there.  A sequence may end early only where every member
 * ends it alike; anything else puts this rank out of step, and the communicator is
 * then unusable by gpuring on every rank (the others at their wait timeout).
 *
 * gpuring_bootstrap_leave: this rank cannot make its part of the next exchange
 *   (`what` failed: st, logged here with the consequence); marks b failed and
 *   returns st.
 * gpuring_bootstrap_end_alike: the sequence ends here on every member, on data
 *   every member received in the last exchange.
 * gpuring_bootstrap_in_step: whether a sequence that ended with st (GPURING_OK or
 *   the error it ended with) leaves this rank in step with the others -- st is
 *   GPURING_OK or every member ended it alike; else 0, and a rank not yet marked
 *   failed left the sequence on a local failure: marked and logged here.
 */
gpuring_status_t gpuring_bootstrap_leave(gpuring_bootstrap_t *b, gpuring_status_t st,
                                         const char *what);
void gpuring_bootstrap_end_alike(gpuring_bootstrap_t *b);
int gpuring_bootstrap_in_step(gpuring_bootstrap_t *b, gpuring_status_t st);

/*
 * Every rank contributes its local status; all get GPURING_OK only if every
 * rank succeeded, else GPURING_ERR_REMOTE (or the local error) and
 * b->bad_rank names the first rank that failed (-1: none, or the exchange failed).  This keeps
 * collective setup all-or-nothing: no rank goes on while another gave up.  A
 * failed outcome ends the sequence alike on every member.
 */
gpuring_status_t gpuring_bootstrap_agree(gpuring_bootstrap_t *b, gpuring_status_t local,
                                         const char *what);

/* ---- peer info: the first exchange (initTransportsRank's peer info) ------ */
typedef struct gpuring_peer_info {
    uint64_t host_hash; /* hash of the host name (+ boot id): groups ranks into hosts */
    uint64_t machine_hash; /* hash of the boot id alone: one kernel, one machine -- the
                            * same for containers of a machine that host_hash tells
                            * apart by name (their GPUs are the machine's); host_hash
                            * where the boot id cannot be read */
    uint64_t proc_id;   /* this process's random name: the key of its NET endpoints and
                         * IPC mappings (a pid repeats across pid namespaces on a host) */
    int32_t pid;
    int32_t package;    /* package it is bound to (os index), -1 unknown (here, where pid
                         * left 4 bytes of padding: the struct keeps its 72 bytes, which
                         * run_mpi_tests' setup_leave_216 injects a failure by) */
    uint64_t pid_ns;    /* its pid namespace (gpuring_pid_ns): where pid means something */
    int32_t numa;       /* NUMA node the process is bound to, -1 if unknown/unbound */
    int32_t nic;        /* nearest NIC in its node's topology, -1 if none */
    char gpu_busid[16]; /* its GPU's PCI bus id, "" without one */
    uint64_t uid_next;  /* this process's next free communicator uid (for tags) */
} gpuring_peer_info_t;

/*
 * Fill this process's host hash, name, pid and uid proposal; where it sits in the
 * node (numa, package, nic, gpu_busid) is filled by the caller from graph/'s hwloc.
 */
void gpuring_bootstrap_peer_info_local(gpuring_peer_info_t *info, uint64_t uid_next);

/*
 * Exchange variable-length blobs (UCX worker addresses): everyone
 * contributes `len` bytes; *all_p gets size * stride bytes, blob i at
 * i * stride, *stride_p = max len.  Free *all_p with free().
 */
gpuring_status_t gpuring_bootstrap_allgather_blob(gpuring_bootstrap_t *b, const void *blob,
                                                  size_t len, void **all_p, size_t *stride_p,
                                                  const char *what);

#endif /* GPURING_BOOTSTRAP_MPI_BOOTSTRAP_H */
