/*
 * coll_gpuring.h -- the Open MPI face of gpuring: component (MCA
 * parameters), module (query, enable, fallback) and the MPI entry points.
 * Only this folder includes Open MPI's internal headers.
 */
#ifndef MCA_COLL_GPURING_H
#define MCA_COLL_GPURING_H

#include "ompi_config.h"

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/mca/coll/base/coll_base_util.h"

#include "ompi_coll_gpuring/coll_gpuring_compat.h"

#include "ompi_coll_gpuring/gpuring_comm.h"

BEGIN_C_DECLS

typedef struct mca_coll_gpuring_component {
    mca_coll_base_component_t super;

    /* MCA parameters (coll_gpuring_*), registered in coll_gpuring_component.c */
    int priority;
    int verbose;
    char *verbose_subsys;
    bool host_buffers;
    bool managed_buffers;
    bool agree_memory;
    bool nonblocking_setup;
    bool net_gpu_direct;
    bool direct;
    bool net_zcopy;
    bool progress_bind;
    char *algorithm;
    char *protocol;
    int nchannels;
    int device_nchannels;
    int channels_per_call;
    size_t chunk_size;
    size_t slot_size;
    size_t stream_size;
    size_t net_stream_size;
    size_t direct_ll_size;
    int ipc_cache;
    int wait_timeout;
    int arrival_timeout;
    int ranks_per_node;
    char *topo_xml;
    int net_peer_failure; /* gpuring_proxy_peer_failure_t */
    int net_rndv_size;    /* -1: by where the ranks are; 0: UCX's; else bytes */

    int stage_device_buffers;
    bool profile;

    int output; /* opal_output stream */
    uint64_t fallbacks[GPURING_COLL_COUNT]; /* calls of each collective gpuring takes
                                                 handed to the component below (atomic) */
    uint64_t cid_agreements; /* Open MPI's, handed below (coll_gpuring_allreduce.c) */
} mca_coll_gpuring_component_t;

OMPI_MODULE_DECLSPEC extern mca_coll_gpuring_component_t mca_coll_gpuring_component;

/*
 * Every collective slot gpuring registers, as X(slot, function type): all of
 * them go to the component below (saved at enable) except what gpuring runs
 * itself (MPI_Allreduce, MPI_Iallreduce, MPI_Reduce_scatter(_block),
 * MPI_Allgather, MPI_Bcast and MPI_Reduce, when it can).  Calls on device buffers are
 * staged through host memory on the way down, the results of non-blocking and
 * persistent ones copied back when their request completes (coll_gpuring_below.c).
 */
#define MCA_COLL_GPURING_BLOCKING(X)                                                      \
    X(allgather, allgather) X(allgatherv, allgatherv) X(allreduce, allreduce)             \
    X(alltoall, alltoall) X(alltoallv, alltoallv) X(alltoallw, alltoallw)                 \
    X(barrier, barrier) X(bcast, bcast) X(exscan, exscan) X(gather, gather)               \
    X(gatherv, gatherv) X(reduce, reduce) X(reduce_scatter, reduce_scatter)               \
    X(reduce_scatter_block, reduce_scatter_block) X(scan, scan) X(scatter, scatter)       \
    X(scatterv, scatterv) X(neighbor_allgather, allgather)                                \
    X(neighbor_allgatherv, allgatherv) X(neighbor_alltoall, alltoall)                     \
    X(neighbor_alltoallv, alltoallv) X(neighbor_alltoallw, neighbor_alltoallw)
#define MCA_COLL_GPURING_NONBLOCKING(X)                                                   \
    X(iallgather, iallgather) X(iallgatherv, iallgatherv) X(iallreduce, iallreduce)       \
    X(ialltoall, ialltoall) X(ialltoallv, ialltoallv) X(ialltoallw, ialltoallw)           \
    X(ibarrier, ibarrier) X(ibcast, ibcast) X(iexscan, iexscan) X(igather, igather)       \
    X(igatherv, igatherv) X(ireduce, ireduce) X(ireduce_scatter, ireduce_scatter)         \
    X(ireduce_scatter_block, ireduce_scatter_block) X(iscan, iscan)                       \
    X(iscatter, iscatter) X(iscatterv, iscatterv)                                         \
    X(ineighbor_allgather, iallgather) X(ineighbor_allgatherv, iallgatherv)               \
    X(ineighbor_alltoall, ialltoall) X(ineighbor_alltoallv, ialltoallv)                   \
    X(ineighbor_alltoallw, ineighbor_alltoallw)
/* MPI-4's persistent collectives (Open MPI 4: the MPIX_ pcollreq extension) */
#define MCA_COLL_GPURING_PERSISTENT(X)                                                    \
    X(allgather_init, allgather_init) X(allgatherv_init, allgatherv_init)                 \
    X(allreduce_init, allreduce_init) X(alltoall_init, alltoall_init)                     \
    X(alltoallv_init, alltoallv_init) X(alltoallw_init, alltoallw_init)                   \
    X(barrier_init, barrier_init) X(bcast_init, bcast_init) X(exscan_init, exscan_init)   \
    X(gather_init, gather_init) X(gatherv_init, gatherv_init) X(reduce_init, reduce_init) \
    X(reduce_scatter_init, reduce_scatter_init)                                           \
    X(reduce_scatter_block_init, reduce_scatter_block_init) X(scan_init, scan_init)       \
    X(scatter_init, scatter_init) X(scatterv_init, scatterv_init)                         \
    X(neighbor_allgather_init, allgather_init)                                            \
    X(neighbor_allgatherv_init, allgatherv_init) X(neighbor_alltoall_init, alltoall_init) \
    X(neighbor_alltoallv_init, alltoallv_init)                                            \
    X(neighbor_alltoallw_init, neighbor_alltoallw_init)
/* MPI_Reduce_local: a slot of MPI_COMM_SELF's module (Open MPI 4.1 and 5.0 make the
 * call through it) */
#define MCA_COLL_GPURING_LOCAL(X) X(reduce_local, reduce_local)
#define MCA_COLL_GPURING_COLLS(X)                                                         \
    MCA_COLL_GPURING_BLOCKING(X) MCA_COLL_GPURING_NONBLOCKING(X)                          \
    MCA_COLL_GPURING_PERSISTENT(X) MCA_COLL_GPURING_LOCAL(X)

typedef enum {
#define MCA_COLL_GPURING_COLL_ID(_slot, _type) MCA_COLL_GPURING_COLL_##_slot,
    MCA_COLL_GPURING_COLLS(MCA_COLL_GPURING_COLL_ID)
#undef MCA_COLL_GPURING_COLL_ID
    MCA_COLL_GPURING_NCOLLS
} mca_coll_gpuring_coll_t;

/* The MPI name of a collective slot ("MPI_Bcast"). */
const char *mca_coll_gpuring_coll_name(mca_coll_gpuring_coll_t coll);

/* What the component below gpuring provides; retained while we use it. */
typedef struct mca_coll_gpuring_prev {
#define MCA_COLL_GPURING_PREV_FIELD(_slot, _type)                                         \
    mca_coll_base_module_##_type##_fn_t _slot;                                            \
    mca_coll_base_module_t *_slot##_module;
    MCA_COLL_GPURING_COLLS(MCA_COLL_GPURING_PREV_FIELD)
#undef MCA_COLL_GPURING_PREV_FIELD
} mca_coll_gpuring_prev_t;

/* Host memory that device buffers are staged through (one per communicator:
 * MPI orders the collectives of one communicator). */
typedef struct mca_coll_gpuring_stage_area {
    void *host;
    size_t bytes;
    void *pin; /* page-locked: what gpuring_devcopy_unpin needs (NULL: not) */
} mca_coll_gpuring_stage_area_t;

typedef enum {
    MCA_COLL_GPURING_COMM_NEW,      /* set up at the first call we handle */
    MCA_COLL_GPURING_COMM_READY,
    MCA_COLL_GPURING_COMM_DISABLED, /* setup failed: everything falls back */
    MCA_COLL_GPURING_COMM_FAILED,   /* setup timed out (a member never joined):
                                       falling back would wait for it too, so
                                       every call fails */
} mca_coll_gpuring_comm_state_t;

/* Whether the ranks share the parameters that decide which calls gpuring takes
 * and how its ranks meet (mca_coll_gpuring_params_agree). */
typedef enum {
    MCA_COLL_GPURING_PARAMS_UNSEEN, /* agreed at the communicator's first call */
    MCA_COLL_GPURING_PARAMS_POSTED, /* its exchange is in flight (params_x) */
    MCA_COLL_GPURING_PARAMS_ALIKE,
    MCA_COLL_GPURING_PARAMS_DIFFER, /* every rank saw it: every call falls back */
    MCA_COLL_GPURING_PARAMS_FAILED, /* the exchange failed (a member never joined):
                                       every call fails, as after a setup timeout */
} mca_coll_gpuring_params_t;

typedef struct mca_coll_gpuring_exchange mca_coll_gpuring_exchange_t;

typedef struct mca_coll_gpuring_module {
    mca_coll_base_module_t super;
    struct ompi_communicator_t *comm;
    char unnamed[32]; /* the log's name for comm while it has none (comm_name) */
    mca_coll_gpuring_prev_t prev;
    mca_coll_gpuring_comm_state_t state;
    mca_coll_gpuring_params_t params;
    mca_coll_gpuring_exchange_t *params_x; /* POSTED: the exchange */
    int64_t *params_all;               /* its data: this rank's values, then every rank's */
    gpuring_comm_t *gcomm;
    mca_coll_gpuring_stage_area_t stage;
    uint32_t exchanges_made;  /* gpuring's exchanges started on comm (each one's number) */
    int call_exchanges;       /* exchanges the current MPI call has made (call_begin: 0) */
} mca_coll_gpuring_module_t;

OBJ_CLASS_DECLARATION(mca_coll_gpuring_module_t);

/* coll_gpuring_module.c */
int mca_coll_gpuring_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_gpuring_comm_query(struct ompi_communicator_t *comm,
                                                    int *priority);
/* The ready gpuring communicator, set up on first use; NULL: fall back, or
 * fail the call when module->state is MCA_COLL_GPURING_COMM_FAILED. */
gpuring_comm_t *mca_coll_gpuring_comm_get(mca_coll_gpuring_module_t *module);
/* Collective, at the communicator's first call that reaches gpuring, before any
 * decision of a rank's own: do all ranks give the parameters that decide which
 * calls gpuring takes, and how, the same values (a difference is logged, naming
 * a rank and the parameter)?  The result, also kept in module->params.  params_post
 * starts the exchange and waits for nothing (a call that goes below whatever the
 * answer makes it so, and leaves it to the next call that needs the answer: every
 * rank started it at the same call); params_agree starts it where no call has, and
 * waits for it (coll_gpuring_wait_timeout). */
void mca_coll_gpuring_params_post(mca_coll_gpuring_module_t *module);
mca_coll_gpuring_params_t mca_coll_gpuring_params_agree(mca_coll_gpuring_module_t *module);
int mca_coll_gpuring_status_to_ompi(gpuring_status_t st);
/* The MPI code of an Open MPI code `rc` for a request's status (MPI_Waitall and kin hand
 * it to the application as it is): the codes mca_coll_gpuring_status_to_ompi returns
 * mapped here, as Open MPI maps them, without its table of internal codes
 * (ompi_errcode_get_mpi_code) -- which 4.1's MPI_Finalize frees before it closes the
 * coll components, where a request the application never completed ends; other codes
 * through that table. */
int mca_coll_gpuring_mpi_code(int rc);
/*
 * coll_gpuring_exchange.c: gpuring's own exchanges over a communicator -- an allgather
 * of `bytes` per rank through the PML, on tags of gpuring's own (why, there), the
 * module's n-th exchange on its n-th tag.
 * _start: this rank's part posted (`mine` copied): GPURING_OK and *x, or an error
 *   (logged; nothing left to the caller).
 * _test: one look (progress once): 1 complete -- every rank's part in `all`, rank by
 *   rank, and x freed; 0 in flight; a gpuring_status_t < 0 (logged; x freed).
 *   Completed messages are also freed by gpuring's progress callback (their requests
 *   hold the communicator).
 * _orphan: x given up in flight (the caller keeps nothing): kept until its messages
 *   complete (a late rank joins it), then freed.  `hold`: inside a call, its
 *   communicator retained till then -- a pml whose requests do not hold it (ucx) would
 *   free it at MPI_Comm_free, and the next communicator would get its context id: the
 *   stale receives would take that one's setup messages (its calls timed out, seen).
 *   One that never completes (a rank never joined it) stays while the component is
 *   loaded.
 * _reap: free the given-up exchanges that completed, and release the communicators
 *   they held -- outside its lock (a communicator's last reference runs its modules'
 *   cleanup, which reaps too), and not once MPI_Finalize began, whose one release of
 *   each communicator left may already have destroyed it (a held one the application
 *   did not free stays at exit).  Reads completion only, no progress: this may run
 *   inside progress, where a communicator's last reference goes.
 */
gpuring_status_t mca_coll_gpuring_exchange_start(mca_coll_gpuring_module_t *m, const void *mine,
                                                 size_t bytes, mca_coll_gpuring_exchange_t **x);
int mca_coll_gpuring_exchange_test(const mca_coll_gpuring_module_t *m,
                                   mca_coll_gpuring_exchange_t *x, void *all);
/* This rank cannot make m's next exchange (its own failure, logged): its number
 * passes, so that this rank's next exchange pairs with its peers' next one. */
void mca_coll_gpuring_exchange_skip(mca_coll_gpuring_module_t *m);
/* _failed: one of x's messages failed (a peer gone, under a PML that says so): 1, logged
 *   naming the peer -- x can only fail; the caller gives it up -- else 0.
 * _missing: for the log of an exchange given up, who it waits for, into buf: "rank 2
 *   has not sent its part", "ranks 2, 5 have not sent their parts", or where every part
 *   came, "this rank's part has not reached rank 3"; the number of such messages (0:
 *   none is pending any more -- the next _test ends x -- and buf untouched). */
int mca_coll_gpuring_exchange_failed(const mca_coll_gpuring_module_t *m,
                                     const mca_coll_gpuring_exchange_t *x);
int mca_coll_gpuring_exchange_missing(const mca_coll_gpuring_exchange_t *x, char *buf,
                                      size_t size);
void mca_coll_gpuring_exchange_orphan(mca_coll_gpuring_exchange_t *x, int hold);
void mca_coll_gpuring_exchanges_reap(void);
/* MPI_Finalize: the exchanges' progress callback unregistered (what is left in flight
 * stays; reap still frees what completes) */
void mca_coll_gpuring_exchanges_finalize(void);
/* An exchange made and waited for (coll_gpuring_module.c): at most
 * coll_gpuring_wait_timeout (0: without a bound) -- an MPI call's first, for a rank late
 * to the call, coll_gpuring_arrival_timeout (on this host: the arrival board) -- so that
 * a member that never makes the call produces an error on the others, not a hang; the
 * same collective on every rank whatever its own timeout.  One that times out (logged,
 * naming it "gpuring's `what`", and the ranks it waits for) is given up in flight,
 * holding the communicator; so is one whose message failed, at once:
 * GPURING_ERR_REMOTE; and, where the exchange is a step of the numbered call the
 * arrival board names (`of_call`: the direct allreduce's, the connections a call makes
 * -- not the agreement on the memory kind, made before the call's number), one that a
 * rank of this host refuses (GPURING_ERR_REMOTE) or meets with another call under that
 * number (GPURING_ERR_MISMATCH).  GPURING_OK: every rank's part in `all`. */
int mca_coll_gpuring_exchange_wait(mca_coll_gpuring_module_t *m, const void *mine, void *all,
                                   size_t bytes, const char *what, int of_call);

/*
 * coll_gpuring_entry.c: what the entry points share.  A call as its entry
 * point hands it over (MPI's arguments made gpuring's), run on the plane of
 * its buffers' memory: OMPI_SUCCESS, an MPI error (logged: the collective,
 * the rank, the cause), or a fallback (the reason logged: the entry calls the
 * component below): MCA_COLL_GPURING_FALLBACK_HOST where the call found its
 * buffers to be host memory (they go below as they are: a CUDA process pays its
 * driver's pointer query, a few hundred ns, once per buffer, not again in the
 * staging layer), MCA_COLL_GPURING_FALLBACK otherwise (through the staging layer).
 * (Values no MPI error code or class and no OMPI_ERR_* takes: MPI_ERR_BUFFER is 1 and
 * MPI_ERR_COUNT 2, which an error of gpuring's -- a mismatch, where no code of its own
 * could be made -- would have read as a fallback.)
 */
#define MCA_COLL_GPURING_FALLBACK (-0x67720001)
#define MCA_COLL_GPURING_FALLBACK_HOST (-0x67720002)
#define MCA_COLL_GPURING_FELL_BACK(_rc)                                                     \
    ((_rc) == MCA_COLL_GPURING_FALLBACK || (_rc) == MCA_COLL_GPURING_FALLBACK_HOST)
/* The component below's _slot on the call's buffers as they are (MCA_COLL_GPURING_FALLBACK_HOST;
 * OMPI_ERR_NOT_SUPPORTED where it has none, as the staging layer says) */
#define MCA_COLL_GPURING_PREV(_m, _slot, ...)                                               \
    ((_m)->prev._slot == NULL ? OMPI_ERR_NOT_SUPPORTED                                      \
                              : (_m)->prev._slot(__VA_ARGS__, (_m)->prev._slot##_module))
typedef struct mca_coll_gpuring_call {
    gpuring_coll_kind_t coll;
    const void *sendbuf; /* the input (in place: where it is in the receive buffer) */
    void *recvbuf;       /* NULL: not significant on this rank (reduce off the root) */
    size_t count;        /* elements (reduce-scatter: each rank's); allgather, bcast: bytes */
    gpuring_type_t type; /* reductions */
    gpuring_op_t op;
    int root;            /* bcast, reduce */
    ompi_request_t **request; /* non-NULL: a non-blocking call (MPI_Iallreduce), whose
                                 request call_run sets when it starts it */
    gpuring_status_t fail; /* GPURING_OK; else why this rank cannot run the call its peers
                              run (a packing that failed: sendbuf or recvbuf then only
                              tells the memory's kind, never touched): call_run takes the
                              plane's path and abandons it there (gpuring_comm_abandon) */
    int ran;             /* set by call_run: the call reached its plane's executors, whose
                            kernel or receives may still write its buffers after a failure
                            (mca_coll_gpuring_call_may_write) */
} mca_coll_gpuring_call_t;
/* An MPI call begins on gpuring's module (every entry point's first step): the module,
 * its call's exchanges counted from none -- the call's first waits for a rank late to
 * it (coll_gpuring_arrival_timeout), whichever step of the call makes it (the agreement
 * on the parameters, packing a datatype's elements, or call_run's). */
static inline mca_coll_gpuring_module_t *
mca_coll_gpuring_call_begin(mca_coll_base_module_t *module)
{
    mca_coll_gpuring_module_t *m = (mca_coll_gpuring_module_t *)module;

    m->call_exchanges = 0;
    return m;
}
int mca_coll_gpuring_call_run(mca_coll_gpuring_module_t *m, struct ompi_communicator_t *comm,
                              mca_coll_gpuring_call_t *call);
/* Whether memory call_run's call was given may still be written after it returned rc:
 * the call failed after its executors had it (call->ran) -- a late kernel, a receive
 * UCX had matched.  Memory gpuring allocated for such a call is kept, never freed. */
static inline int mca_coll_gpuring_call_may_write(const mca_coll_gpuring_call_t *call, int rc)
{
    return call->ran && rc != OMPI_SUCCESS && !MCA_COLL_GPURING_FELL_BACK(rc);
}
/* Whether memory of buf's kind goes below on this rank whatever the call (host buffers
 * under coll_gpuring_host_buffers 0, managed memory, ...): call_run's first check, made
 * before a (blocking) call packs its elements into bytes of that kind (the reason
 * logged); the communicator's first such call agrees on the parameters first, as
 * call_run would.  0 with coll_gpuring_agree_memory on: call_run's agreement decides,
 * on every rank. */
int mca_coll_gpuring_kind_declined(mca_coll_gpuring_module_t *m, gpuring_coll_kind_t coll,
                                   const void *buf);
/* MPI_Reduce's root: whether its receive buffer `out` could not run beside its send
 * buffer `in` (another kind of memory, another GPU's, managed memory gpuring does not
 * take, another CUDA context's) while `in` alone could -- the send buffers being the
 * only ones every rank passes, and so the ones every rank decides its path on. */
int mca_coll_gpuring_out_apart(const void *in, const void *out);
/* A call gpuring took failed: logged (the collective, the communicator's name for the
 * log and this rank in it, the cause, and whether the communicator is `broken` -- or the
 * failure this rank's alone); the MPI error.  From the name, not the module: a request
 * may end after MPI_Finalize has destroyed its communicator's module, or the
 * communicator itself (coll_gpuring_request.c). */
int mca_coll_gpuring_call_failed(const mca_coll_gpuring_call_t *call, gpuring_plane_t plane,
                                 const char *comm_name, int rank, int broken,
                                 gpuring_status_t st);
/* A reduction's MPI type and op as gpuring's; 0 (the reason logged): not handled. */
int mca_coll_gpuring_map_reduction(gpuring_coll_kind_t coll, struct ompi_datatype_t *dtype,
                                   struct ompi_op_t *op, gpuring_type_t *type_p,
                                   gpuring_op_t *op_p);

/*
 * coll_gpuring_stage.c: a call's buffers on the way to the component below.
 * Each buffer is described by the bytes the call touches in it and whether
 * it is read (IN) or written (OUT); stage_in copies those of them that are
 * device memory into host memory (unless the component below reads device
 * memory itself) and gives every buffer the pointer to pass below in
 * `host`; stage_out copies the written ones back after a successful call.
 */
enum { MCA_COLL_GPURING_STAGE_IN = 1, MCA_COLL_GPURING_STAGE_OUT = 2,
       MCA_COLL_GPURING_STAGE_INOUT = 3 };
/* Part of a span in one memory: [buf + lo, buf + lo + bytes) */
typedef struct mca_coll_gpuring_piece {
    ptrdiff_t lo;
    size_t bytes;
    uintptr_t alloc; /* the device allocation's start; 0: host memory */
} mca_coll_gpuring_piece_t;
/* The datatype and counts a span was made from, for a walk of its blocks. */
typedef struct mca_coll_gpuring_shape {
    int form;                              /* 0: count of dt; 1: the v form; 2: the w form */
    size_t count;
    const int *counts;                     /* v, w */
    const void *displs;                    /* v: int extents; w: int or MPI_Aint bytes */
    int n, aint;
    struct ompi_datatype_t *dt;            /* plain, v */
    struct ompi_datatype_t *const *types;  /* w */
} mca_coll_gpuring_shape_t;
typedef struct mca_coll_gpuring_stage_buf {
    void *buf;        /* as the application passed it */
    ptrdiff_t lo;     /* the call touches [buf + lo, buf + lo + bytes) */
    size_t bytes;     /* 0: nothing (or buf is MPI_IN_PLACE / not significant here) */
    size_t data;      /* the bytes its blocks hold (bytes: their hull) */
    int dir;          /* MCA_COLL_GPURING_STAGE_*; 0: not touched on this rank */
    int holes;        /* written, but perhaps not every byte of the span */
    int partial;      /* written, but perhaps not every block of its datatype: a neighbor
                       * collective's MPI_PROC_NULL neighbors' (copied in too) */
    int device;       /* set by stage_in: the span is device memory (all or part of it) */
    int blockwise_in; /* ... sparse in one allocation, its blocks copied in one by one
                       * (few driver copies take them), not the span whole */
    void *host;       /* what the component below gets */
    void *staged;     /* the host copy of the span; NULL: not staged */
    mca_coll_gpuring_shape_t shape; /* valid while the call that made the span runs */
    /* blocks in several allocations (MPI_BOTTOM with absolute addresses): the span's
     * pieces, each in one device allocation or in host memory, copied one by one into
     * a host image of the whole span of its own (mmap'd: only its pieces' pages are
     * ever touched); npieces 0: the span is one piece */
    int npieces;
    mca_coll_gpuring_piece_t *pieces;
} mca_coll_gpuring_stage_buf_t;

/* coll_gpuring_pack.c: the calls gpuring runs as a copy of bytes, by their type
 * signature's bytes (the same on every rank), whatever each rank's datatype. */
size_t mca_coll_gpuring_signature_bytes(struct ompi_datatype_t *dt, size_t count);
/* Where count elements of dt at buf are one contiguous run of those bytes: its start;
 * NULL: they must be packed. */
void *mca_coll_gpuring_contiguous(const void *buf, size_t count, struct ompi_datatype_t *dt);
/* The elements packed into `len` contiguous bytes of their memory's kind (.bytes); `in`:
 * their values packed (a sender's), else only the space made; MCA_COLL_GPURING_FALLBACK,
 * nothing packed, where that kind goes below (mca_coll_gpuring_kind_declined: the
 * caller hands the call below as it is).  Where packing fails (no memory; logged),
 * OMPI_SUCCESS with .fail set: packed_bytes hands the call the elements' own memory,
 * whose kind still picks its path, and sets the call's fail -- the peers make the call,
 * and call_run tells them that this rank gave up on it.  unpack writes the bytes
 * back into the elements where `out` (a receiver's) and frees them -- but the call's
 * bytes where `may_write` (mca_coll_gpuring_call_may_write: a failed call's kernel or
 * receives may still write them), which are kept.  Errors logged. */
typedef struct mca_coll_gpuring_packed {
    void *bytes; /* NULL: nothing packed */
    gpuring_status_t fail; /* packing failed (bytes NULL) */
    void *first; /* ... memory of the kind the bytes would be of (never touched) */
    size_t len;
    void *buf;
    size_t count;
    struct ompi_datatype_t *dt;
    int device;  /* the GPU of buf's memory; -1: host memory */
    mca_coll_gpuring_stage_buf_t span; /* the bytes the elements span, their pieces */
    char *image; /* device memory, or pieces: a host image of the span */
    char *host;  /* the packed bytes in host memory */
    int pooled;  /* .bytes from the GPU's stream-ordered pool (gpuring_devcopy_alloc) */
    int pieced;  /* the elements lie in several allocations (kept when packing failed) */
    const mca_coll_gpuring_module_t *m; /* the call's, and its collective: for the errors */
    gpuring_coll_kind_t coll;
} mca_coll_gpuring_packed_t;
int mca_coll_gpuring_pack(mca_coll_gpuring_module_t *m, mca_coll_gpuring_packed_t *p,
                          gpuring_coll_kind_t coll, void *buf, size_t count,
                          struct ompi_datatype_t *dt, int in);
void *mca_coll_gpuring_packed_bytes(const mca_coll_gpuring_packed_t *p,
                                    mca_coll_gpuring_call_t *call);
int mca_coll_gpuring_unpack(mca_coll_gpuring_packed_t *p, int out, int may_write);
/* The way below for a call on packed elements that fell back (before unpack): one that
 * found host memory (MCA_COLL_GPURING_FALLBACK_HOST: the component below gets the
 * elements as they are) goes the staged way (MCA_COLL_GPURING_FALLBACK) where its
 * elements lie in several allocations, device memory among them. */
int mca_coll_gpuring_packed_fallback(const mca_coll_gpuring_packed_t *p, int rc);
/* A negative count, which only mpi_param_check 0 lets through: logged; MPI_ERR_COUNT. */
int mca_coll_gpuring_bad_count(const mca_coll_gpuring_module_t *m, gpuring_coll_kind_t coll,
                               int nonblocking, int count);
/* One call of coll handed to the component below (the finalize summary). */
void mca_coll_gpuring_fallback_count(gpuring_coll_kind_t coll);
/* Why a call goes to the component below ("<coll> fallback: <reason>"): at
 * coll_gpuring_verbose 3 the first time this process meets that line, every
 * time at 4 (the finalize summary counts every call). */
void mca_coll_gpuring_log_fallback(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* the entry points: coll_gpuring_<coll>.c */
int mca_coll_gpuring_allreduce(const void *sbuf, void *rbuf, int count,
                               struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpuring_iallreduce(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, ompi_request_t **request,
                                mca_coll_base_module_t *module);
int mca_coll_gpuring_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                          struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                          struct ompi_communicator_t *comm,
                                          mca_coll_base_module_t *module);
int mca_coll_gpuring_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                    struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                    struct ompi_communicator_t *comm,
                                    mca_coll_base_module_t *module);
int mca_coll_gpuring_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                               void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpuring_bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpuring_reduce(const void *sbuf, void *rbuf, int count,
                            struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module);

/* coll_gpuring_component.c: the parameters each rank uses on its own (no agreement:
 * wait_timeout, net_rndv_size, stage_device_buffers, ipc_cache, verbose_subsys) checked
 * against their documented ranges -- outside, an error and the default -- and applied;
 * once, at the first communicator's query (the rank then known to the log). */
void mca_coll_gpuring_own_params(void);

/* coll_gpuring_component.c: a progress callback of gpuring's (the requests', the
 * exchanges'), registered with opal_progress at its first use -- the fast test an atomic
 * load -- and unregistered at MPI_Finalize.  _on: 1 once registered (a thread that
 * comes while another registers it waits for that); 0 where Open MPI refused it
 * (logged, naming `what`; the next use tries again). */
typedef struct mca_coll_gpuring_progress {
    int (*cb)(void);  /* opal_progress_callback_t */
    int low_priority; /* opal_progress_register_lp: every 8th progress */
    const char *what; /* for the log */
    int on;           /* atomic */
} mca_coll_gpuring_progress_t;
int mca_coll_gpuring_progress_on(mca_coll_gpuring_progress_t *p);
void mca_coll_gpuring_progress_off(mca_coll_gpuring_progress_t *p);

/*
 * coll_gpuring_request.c: the request of a non-blocking call gpuring runs.
 * request_new makes it (active; NULL: no memory) for `call` on `plane`; the
 * call's done function is request_done (ctx: the request), from any thread;
 * the request completes at the next opal_progress after that (a failed
 * call's error logged then, with mca_coll_gpuring_call_failed).
 * request_drop: the call was not started after all.
 * request_over_new: gpuring's request (active; NULL: no memory) for a call of
 * the component below on comm, made before that call starts; request_over
 * hands it the started request `below` (returned as the application's): an
 * opal_progress after `below` completed frees it, calls end(ctx, its error)
 * once, and completes gpuring's with the error end returns; request_over_drop:
 * the call below was never started, or is over already.  request_finalize: at
 * component close (requests still over one below are counted, not touched).
 */
typedef int (*mca_coll_gpuring_request_end_fn_t)(void *ctx, int error);
typedef struct mca_coll_gpuring_request {
    ompi_coll_base_nbc_request_t super; /* Open MPI's collective request (the MPI layer
                                         * keeps datatypes and ops alive in its fields) */
    gpuring_status_t st;  /* the call's end, from the worker */
    int broken;           /* ... and whether it left the communicator broken */
    int ends;             /* atomic: its completion and its free, marked as each comes
                           * (request_end_mark: the second releases it) */
    mca_coll_gpuring_call_t call; /* for the error report */
    gpuring_plane_t plane;        /* (the communicator: super's req_mpi_object.comm) */
    gpuring_comm_t *gcomm;               /* whose queue runs it (gpuring_comm_async_step) */
    struct mca_coll_gpuring_request *next; /* ended, not yet completed; or over one below */
    struct mca_coll_gpuring_request *run_prev, *run_next; /* started, not ended */
    ompi_request_t *below; /* request_over's: the component below's, and its end */
    mca_coll_gpuring_request_end_fn_t end;
    void *end_ctx;
    /* its communicator destroyed under it (mca_coll_gpuring_request_comm_gone): its hold
     * gone, and the communicator's name and this rank in it, for the error report */
    int comm_gone;
    int comm_rank;
    char comm_name[MPI_MAX_OBJECT_NAME];
} mca_coll_gpuring_request_t;
OBJ_CLASS_DECLARATION(mca_coll_gpuring_request_t);

mca_coll_gpuring_request_t *mca_coll_gpuring_request_new(const mca_coll_gpuring_module_t *m,
                                                         gpuring_comm_t *gcomm,
                                                         const mca_coll_gpuring_call_t *call,
                                                         gpuring_plane_t plane);
void mca_coll_gpuring_request_done(void *ctx, gpuring_status_t st);
void mca_coll_gpuring_request_drop(mca_coll_gpuring_request_t *req);
mca_coll_gpuring_request_t *mca_coll_gpuring_request_over_new(struct ompi_communicator_t *comm);
ompi_request_t *mca_coll_gpuring_request_over(mca_coll_gpuring_request_t *req,
                                              ompi_request_t *below,
                                              mca_coll_gpuring_request_end_fn_t end, void *ctx);
void mca_coll_gpuring_request_over_drop(mca_coll_gpuring_request_t *req);
void mca_coll_gpuring_request_finalize(void);
/* comm is being destroyed (its coll modules go first), with requests still on it: ended
 * or running calls (MPI_Finalize releases a communicator the application freed as the
 * application's, when its last hold is a request's) -- they let go of nothing more, and
 * report with the name they read now. */
void mca_coll_gpuring_request_comm_gone(struct ompi_communicator_t *comm);
/* Has ompi_comm_finalize run (MPI_COMM_WORLD gone in MPI_Finalize)?  A request freed
 * from then on must release no communicator: the table it would leave is gone. */
int mca_coll_gpuring_request_comms_final(void);

/* coll_gpuring_stage.c, continued */

/* A datatype's name for the log (derived ones may have none). */
const char *mca_coll_gpuring_dt_name(const struct ompi_datatype_t *dt);
/* The module's communicator's name for the log: its MPI name, or while it has none (Open
 * MPI names none it makes by MPI_Intercomm_create) m->unnamed. */
const char *mca_coll_gpuring_comm_name(const mca_coll_gpuring_module_t *m);
/* A communicator's name for the log while it has none, "(unnamed, cid N)" (N its context
 * id), into buf. */
void mca_coll_gpuring_comm_unnamed(const struct ompi_communicator_t *comm, char *buf,
                                   size_t size);
/* Any communicator's name for the log: its MPI name, or the unnamed one written into buf. */
const char *mca_coll_gpuring_comm_label(const struct ompi_communicator_t *comm, char *buf,
                                        size_t size);

/* buf + off in address arithmetic: buf may be MPI_BOTTOM (NULL) with an absolute
 * offset, or a host copy standing in for a span that starts far from it. */
static inline void *mca_coll_gpuring_at(const void *buf, ptrdiff_t off)
{
    return (void *)((uintptr_t)buf + (uintptr_t)off);
}

/* The span of `count` elements of dt at buf. */
void mca_coll_gpuring_stage_span(mca_coll_gpuring_stage_buf_t *b, const void *buf, int dir,
                                 size_t count, struct ompi_datatype_t *dt);
/* The hull of n blocks: counts[i] elements of dt at buf + displs[i] extents. */
void mca_coll_gpuring_stage_span_v(mca_coll_gpuring_stage_buf_t *b, const void *buf, int dir,
                                   const int *counts, const int *displs, int n,
                                   struct ompi_datatype_t *dt);
/* The hull of n blocks: counts[i] elements of types[i] at buf + displs[i] bytes
 * (displs int, or MPI_Aint when `aint`). */
void mca_coll_gpuring_stage_span_w(mca_coll_gpuring_stage_buf_t *b, const void *buf, int dir,
                                   const int *counts, const void *displs, int aint,
                                   struct ompi_datatype_t *const *types, int n);
/* Whether the span holds device memory (b->device), and where its blocks lie in
 * several allocations (or in host and device memory) its pieces (b->pieces, walked
 * from its shape): told by its first byte's kind, for a datatype with holes by whether
 * the span leaves the allocation of its first byte (device or managed memory), ends
 * in device memory after a first byte in host memory, or lies at MPI_BOTTOM with a
 * block in device memory (each block's first and last bytes asked, whatever the
 * span's ends are; a datatype relative to a buffer that starts and ends in host
 * memory is taken as host memory); and whether a sparse span of device or managed
 * memory comes in block by block (b->blockwise_in).  0, or -1 with *why_p where the
 * pieces cannot be told. */
int mca_coll_gpuring_span_classify(mca_coll_gpuring_stage_buf_t *b, const char **why_p);
/* Does b's span get a host image of its own rather than room in a staging area: its
 * blocks lie in several allocations (pieces), or they are sparse -- a span of at least
 * 1 MiB whose blocks hold under a quarter of it (one column of a matrix), copied back
 * block by block, and in too where few driver copies take them (b->blockwise_in)?
 * Such an image is b->bytes of address space whose pages are touched only where blocks
 * or pieces are copied, never page-locked: mca_coll_gpuring_span_image_new, NULL where
 * it cannot be mapped; span_image_free gives it back (where b has one of its own);
 * span_release does too and frees the pieces (image NULL: the pieces only). */
int mca_coll_gpuring_span_own_image(const mca_coll_gpuring_stage_buf_t *b);
void *mca_coll_gpuring_span_image_new(const mca_coll_gpuring_stage_buf_t *b);
void mca_coll_gpuring_span_image_free(const mca_coll_gpuring_stage_buf_t *b, void *image);
void mca_coll_gpuring_span_release(mca_coll_gpuring_stage_buf_t *b, void *image);
/* The span before the call: where the call reads it (`reads`), its bytes copied into
 * its host image; where it only writes it, the application's work queued so far on the
 * legacy stream of each of its device pieces' contexts waited for -- the copy back
 * waits for none of the application's streams, and its result must land after their
 * earlier work on the span (a cudaMemcpy from pageable memory may still be moving bytes
 * into it when it returns).  And the copy back out of the image.  One copy, or one per
 * piece (`pinned`: the image is page-locked; of a span in one piece only). */
gpuring_status_t mca_coll_gpuring_span_take(const mca_coll_gpuring_stage_buf_t *b, void *image,
                                            int pinned, int reads, const char **why_p);
gpuring_status_t mca_coll_gpuring_span_copy_back(const mca_coll_gpuring_stage_buf_t *b,
                                                 void *image, int pinned, const char **why_p);
/* 1 when the component below is handed `coll`'s device buffers as they are. */
int mca_coll_gpuring_below_reads_device(mca_coll_gpuring_coll_t coll);
int mca_coll_gpuring_stage_in(mca_coll_gpuring_module_t *m, mca_coll_gpuring_coll_t coll,
                              mca_coll_gpuring_stage_buf_t *bufs, int n);
int mca_coll_gpuring_stage_out(mca_coll_gpuring_module_t *m, mca_coll_gpuring_coll_t coll,
                               mca_coll_gpuring_stage_buf_t *bufs, int n, int rc);
/* The same in a host area the caller holds (page-locked where `pin`; `comm` names the
 * call's communicator in errors): for a call on no communicator (MPI_Reduce_local),
 * which other threads may make at the same time. */
int mca_coll_gpuring_stage_in_area(mca_coll_gpuring_stage_area_t *area, int pin,
                                   mca_coll_gpuring_coll_t coll, const char *comm,
                                   mca_coll_gpuring_stage_buf_t *bufs, int n);
int mca_coll_gpuring_stage_out_area(mca_coll_gpuring_stage_area_t *area,
                                    mca_coll_gpuring_coll_t coll, const char *comm,
                                    mca_coll_gpuring_stage_buf_t *bufs, int n, int rc);
void mca_coll_gpuring_stage_area_free(mca_coll_gpuring_stage_area_t *area);
/*
 * A non-blocking call: nb_in stages its buffers in host memory of its own (*nb_p NULL:
 * nothing to stage; not persistent: gpuring's request for the call made too, so that
 * no memory for it fails the call before it starts); the caller hands the component
 * below the .host pointers, then nb_out(nb, that call's status, where its request is)
 * gives the caller gpuring's request over the one below (mca_coll_gpuring_request_over):
 * the results go back when the call completes, before that request reads as complete,
 * and the staging is freed (at once where the call failed or already completed: the
 * request below is kept).  A persistent call (`persistent`: its *_init) keeps
 * the staging with its request: every start copies the inputs in anew, every completion
 * copies the results back, and freeing the request frees it.
 */
typedef struct mca_coll_gpuring_stage_nb mca_coll_gpuring_stage_nb_t;
int mca_coll_gpuring_stage_nb_in(mca_coll_gpuring_module_t *m, mca_coll_gpuring_coll_t coll,
                                 mca_coll_gpuring_stage_buf_t *bufs, int n, int persistent,
                                 mca_coll_gpuring_stage_nb_t **nb_p);
int mca_coll_gpuring_stage_nb_out(mca_coll_gpuring_stage_nb_t *nb, int rc, ompi_request_t **reqp);
/* Calls staged in this process, per collective. */
uint64_t mca_coll_gpuring_stage_count(mca_coll_gpuring_coll_t coll);

/* coll_gpuring_below.c: point every collective slot of a module at its way
 * to the component below (the module then puts its own allreduce over it) */
void mca_coll_gpuring_below_install(mca_coll_base_module_t *module);
/* the collectives gpuring runs, through the component below, device buffers staged */
int mca_coll_gpuring_allreduce_below(const void *sbuf, void *rbuf, int count,
                                     struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                     struct ompi_communicator_t *comm,
                                     mca_coll_base_module_t *module);
int mca_coll_gpuring_reduce_scatter_block_below(const void *sbuf, void *rbuf, int rcount,
                                                struct ompi_datatype_t *dtype,
                                                struct ompi_op_t *op,
                                                struct ompi_communicator_t *comm,
                                                mca_coll_base_module_t *module);
int mca_coll_gpuring_reduce_scatter_below(const void *sbuf, void *rbuf, const int *rcounts,
                                          struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                          struct ompi_communicator_t *comm,
                                          mca_coll_base_module_t *module);
int mca_coll_gpuring_allgather_below(const void *sbuf, int scount,
                                     struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                     struct ompi_datatype_t *rdtype,
                                     struct ompi_communicator_t *comm,
                                     mca_coll_base_module_t *module);
int mca_coll_gpuring_bcast_below(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                                 struct ompi_communicator_t *comm,
                                 mca_coll_base_module_t *module);
int mca_coll_gpuring_reduce_below(const void *sbuf, void *rbuf, int count,
                                  struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                                  struct ompi_communicator_t *comm,
                                  mca_coll_base_module_t *module);
/* MPI_Iallreduce through the component below (device buffers staged) */
int mca_coll_gpuring_iallreduce_below(const void *sbuf, void *rbuf, int count,
                                      struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                      struct ompi_communicator_t *comm, ompi_request_t **req,
                                      mca_coll_base_module_t *module);


END_C_DECLS

#endif /* MCA_COLL_GPURING_H */
