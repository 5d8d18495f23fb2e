/*
 * coll_gpuring_below.c -- every MPI collective that gpuring does not run
 * itself, on its way to the component below (saved at enable):
 *  - blocking calls: each buffer is described by what the call reads or
 *    writes in it on this rank (MPI's rules for roots, MPI_IN_PLACE and the
 *    v/w displacements), and coll_gpuring_stage.c stages those in device
 *    memory through host memory, unless the component below reads device
 *    memory itself;
 *  - non-blocking calls: the same spans, staged in host memory of the
 *    call's own, and what the component below wrote copied back when its
 *    request completes (coll_gpuring_stage.c);
 *  - persistent calls (MPI-4's *_init; Open MPI 4's MPIX_ ones): made below
 *    on host memory of the request's own, copied in at every start and back
 *    at every completion.
 * On an inter-communicator (where gpuring runs nothing itself) a call's blocks
 * are the other group's, and a rooted call's root passes MPI_ROOT, the rest of
 * its group MPI_PROC_NULL: see below_peers and below_is_root/below_is_member.
 *  - MPI_Reduce_local, which Open MPI (4.1, 5.0) makes through MPI_COMM_SELF's
 *    module: staged as a blocking call.
 * Host buffers cost one memory-kind check per buffer (two for a datatype with
 * holes: its span's first and last bytes; at MPI_BOTTOM its first byte and each
 * block's first and last, where the component below is not CUDA-aware), none in a
 * process without a CUDA driver.
 * MPI_Barrier has no buffers: gpuring leaves it to the component below.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include "ompi/mca/topo/base/base.h"

#define BELOW_N(_bufs) ((int)(sizeof(_bufs) / sizeof((_bufs)[0])))
#define BELOW_IN MCA_COLL_GPURING_STAGE_IN
#define BELOW_OUT MCA_COLL_GPURING_STAGE_OUT
/* a receive buffer: also read when the call is in place */
#define BELOW_RECV(_sbuf) ((_sbuf) == MPI_IN_PLACE ? MCA_COLL_GPURING_STAGE_INOUT : BELOW_OUT)
#define BELOW_MODULE(_module) ((mca_coll_gpuring_module_t *)(_module))

/* Run `_call` (using each buffer's .host) with the buffers staged around it. */
#define BELOW_STAGED(_m, _slot, _bufs, _call)                                              \
    do {                                                                                   \
        int rc_;                                                                           \
        if ((_m)->prev._slot == NULL) return OMPI_ERR_NOT_SUPPORTED;                       \
        rc_ = mca_coll_gpuring_stage_in(_m, MCA_COLL_GPURING_COLL_##_slot, _bufs,          \
                                        BELOW_N(_bufs));                                   \
        if (rc_ != OMPI_SUCCESS) return rc_;                                               \
        rc_ = (_call);                                                                     \
        return mca_coll_gpuring_stage_out(_m, MCA_COLL_GPURING_COLL_##_slot, _bufs,        \
                                          BELOW_N(_bufs), rc_);                            \
    } while (0)

/* Start `_call` (using each buffer's .host; its request in *_req) with the buffers
 * staged until the request completes; a persistent call's (its *_init) staged with its
 * request, at each start. */
#define BELOW_STAGED_NB(_m, _slot, _bufs, _nbufs, _req, _persistent, _call)               \
    do {                                                                                   \
        mca_coll_gpuring_stage_nb_t *nb_;                                                  \
        int rc_;                                                                           \
        if ((_m)->prev._slot == NULL) return OMPI_ERR_NOT_SUPPORTED;                       \
        rc_ = mca_coll_gpuring_stage_nb_in(_m, MCA_COLL_GPURING_COLL_##_slot, _bufs,       \
                                           _nbufs, _persistent, &nb_);                     \
        if (rc_ != OMPI_SUCCESS) return rc_;                                               \
        rc_ = (_call);                                                                     \
        return mca_coll_gpuring_stage_nb_out(nb_, rc_, _req);                              \
    } while (0)

#define SPAN mca_coll_gpuring_stage_span
#define SPAN_V mca_coll_gpuring_stage_span_v
#define SPAN_W mca_coll_gpuring_stage_span_w

typedef mca_coll_gpuring_stage_buf_t below_buf_t;
typedef struct ompi_datatype_t below_dt_t;
typedef struct ompi_communicator_t below_comm_t;
typedef mca_coll_base_module_t below_module_t;

/* The ranks a call has a block for, each: the communicator's, or an inter-communicator's
 * other group.  (Reduce-scatter's blocks are this rank's group's on both kinds.) */
static int below_peers(below_comm_t *comm)
{
    return OMPI_COMM_IS_INTER(comm) ? ompi_comm_remote_size(comm) : ompi_comm_size(comm);
}

/* A rooted call's parts on this rank.  The root reads or writes a block of every peer;
 * a member sends or receives a block of its own.  Intra-communicator: every rank is a
 * member, rank `root` the root as well.  Inter-communicator: the root passes MPI_ROOT
 * and is no member, the rest of its group passes MPI_PROC_NULL and takes no part, the
 * other group's ranks (passing the root's rank) are the members. */
static int below_is_root(below_comm_t *comm, int root)
{
    return OMPI_COMM_IS_INTER(comm) ? root == MPI_ROOT : ompi_comm_rank(comm) == root;
}

static int below_is_member(below_comm_t *comm, int root)
{
    return !OMPI_COMM_IS_INTER(comm) || (root != MPI_ROOT && root != MPI_PROC_NULL);
}

/* A neighborhood collective's peers: in (sources) and out (destinations). */
static void below_degrees(below_comm_t *comm, int *in_p, int *out_p)
{
    if (mca_topo_base_neighbor_count(comm, in_p, out_p) != OMPI_SUCCESS) *in_p = *out_p = 0;
}

/* ---- the buffers of each call, one shape per family -------------------------------- */
/* (the blocking call and its non-blocking form touch the same bytes) */

/* sbuf: scount of sdt; rbuf: rcount x nrecv of rdt */
static void below_gather_bufs(below_buf_t b[2], const void *sbuf, int scount, below_dt_t *sdt,
                              int send_dir, void *rbuf, size_t rcount, below_dt_t *rdt,
                              int recv_dir)
{
    SPAN(&b[0], sbuf, send_dir, (size_t)scount, sdt);
    SPAN(&b[1], rbuf, recv_dir, rcount, rdt);
}

/* one buffer of count elements in, one out (the reductions) */
static void below_reduce_bufs(below_buf_t b[2], const void *sbuf, size_t scount, int send_dir,
                              void *rbuf, size_t rcount, below_dt_t *dt, int recv_dir)
{
    SPAN(&b[0], sbuf, send_dir, scount, dt);
    SPAN(&b[1], rbuf, recv_dir, rcount, dt);
}

static void below_allgather_bufs(below_buf_t b[2], const void *sbuf, int scount,
                                 below_dt_t *sdt, void *rbuf, int rcount, below_dt_t *rdt,
                                 below_comm_t *comm)
{
    below_gather_bufs(b, sbuf, scount, sdt, BELOW_IN, rbuf, (size_t)rcount * below_peers(comm),
                      rdt, BELOW_RECV(sbuf));
}

static void below_allgatherv_bufs(below_buf_t b[2], const void *sbuf, int scount,
                                  below_dt_t *sdt, void *rbuf, const int *rcounts,
                                  const int *displs, below_dt_t *rdt, below_comm_t *comm)
{
    SPAN(&b[0], sbuf, BELOW_IN, (size_t)scount, sdt);
    SPAN_V(&b[1], rbuf, BELOW_RECV(sbuf), rcounts, displs, below_peers(comm), rdt);
}

/* MPI_Allreduce and MPI_Scan */
static void below_reduce_all_bufs(below_buf_t b[2], const void *sbuf, void *rbuf, int count,
                                  below_dt_t *dt)
{
    below_reduce_bufs(b, sbuf, (size_t)count, BELOW_IN, rbuf, (size_t)count, dt,
                      BELOW_RECV(sbuf));
}

/* MPI_Exscan: rank 0's receive buffer is not significant (its result undefined: it
 * may be any pointer), so nothing is written there -- in place it holds rank 0's
 * input, read and left as it was */
static void below_exscan_bufs(below_buf_t b[2], const void *sbuf, void *rbuf, int count,
                              below_dt_t *dt, below_comm_t *comm)
{
    const int first = ompi_comm_rank(comm) == 0;

    below_reduce_bufs(b, sbuf, (size_t)count, BELOW_IN, rbuf, (size_t)count, dt,
                      !first ? BELOW_RECV(sbuf) : sbuf == MPI_IN_PLACE ? BELOW_IN : 0);
}

static void below_alltoall_bufs(below_buf_t b[2], const void *sbuf, int scount,
                                below_dt_t *sdt, void *rbuf, int rcount, below_dt_t *rdt,
                                below_comm_t *comm)
{
    int n = below_peers(comm);

    SPAN(&b[0], sbuf, BELOW_IN, (size_t)scount * n, sdt);
    SPAN(&b[1], rbuf, BELOW_RECV(sbuf), (size_t)rcount * n, rdt);
}

static void below_alltoallv_bufs(below_buf_t b[2], const void *sbuf, const int *scounts,
                                 const int *sdispls, below_dt_t *sdt, void *rbuf,
                                 const int *rcounts, const int *rdispls, below_dt_t *rdt,
                                 below_comm_t *comm)
{
    int n = below_peers(comm);

    if (sbuf == MPI_IN_PLACE) {
        SPAN(&b[0], sbuf, 0, 0, sdt);
    } else {
        SPAN_V(&b[0], sbuf, BELOW_IN, scounts, sdispls, n, sdt);
    }
    SPAN_V(&b[1], rbuf, BELOW_RECV(sbuf), rcounts, rdispls, n, rdt);
}

static void below_alltoallw_bufs(below_buf_t b[2], const void *sbuf, const int *scounts,
                                 const int *sdispls, below_dt_t *const *sdts, void *rbuf,
                                 const int *rcounts, const int *rdispls,
                                 below_dt_t *const *rdts, below_comm_t *comm)
{
    int n = below_peers(comm);

    if (sbuf == MPI_IN_PLACE) {
        SPAN(&b[0], sbuf, 0, 0, MPI_BYTE);
    } else {
        SPAN_W(&b[0], sbuf, BELOW_IN, scounts, sdispls, 0, sdts, n);
    }
    SPAN_W(&b[1], rbuf, BELOW_RECV(sbuf), rcounts, rdispls, 0, rdts, n);
}

static void below_bcast_bufs(below_buf_t b[1], void *buf, int count, below_dt_t *dt, int root,
                             below_comm_t *comm)
{
    SPAN(&b[0], buf,
         below_is_root(comm, root)     ? BELOW_IN
         : below_is_member(comm, root) ? BELOW_OUT
                                       : 0,
         (size_t)count, dt);
}

/* a member's block in (gather, reduce) or out (scatter) */
#define BELOW_MEMBER(_comm, _root, _dir) (below_is_member(_comm, _root) ? (_dir) : 0)

/* the receive buffer counts at the root only */
static void below_rooted_gather_bufs(below_buf_t b[2], const void *sbuf, int scount,
                                     below_dt_t *sdt, void *rbuf, int rcount, below_dt_t *rdt,
                                     int root, below_comm_t *comm)
{
    below_gather_bufs(b, sbuf, scount, sdt, BELOW_MEMBER(comm, root, BELOW_IN), rbuf,
                      (size_t)rcount * below_peers(comm), rdt,
                      below_is_root(comm, root) ? BELOW_RECV(sbuf) : 0);
}

static void below_gatherv_bufs(below_buf_t b[2], const void *sbuf, int scount,
                               below_dt_t *sdt, void *rbuf, const int *rcounts,
                               const int *displs, below_dt_t *rdt, int root, below_comm_t *comm)
{
    SPAN(&b[0], sbuf, BELOW_MEMBER(comm, root, BELOW_IN), (size_t)scount, sdt);
    if (below_is_root(comm, root)) {
        SPAN_V(&b[1], rbuf, BELOW_RECV(sbuf), rcounts, displs, below_peers(comm), rdt);
    } else {
        SPAN(&b[1], rbuf, 0, 0, rdt); /* rcounts and displs are the root's alone */
    }
}

static void below_rooted_reduce_bufs(below_buf_t b[2], const void *sbuf, void *rbuf,
                                     int count, below_dt_t *dt, int root, below_comm_t *comm)
{
    below_reduce_bufs(b, sbuf, (size_t)count, BELOW_MEMBER(comm, root, BELOW_IN), rbuf,
                      (size_t)count, dt, below_is_root(comm, root) ? BELOW_RECV(sbuf) : 0);
}

/* in place, the receive buffer holds the whole input */
static void below_reduce_scatter_bufs(below_buf_t b[2], const void *sbuf, void *rbuf,
                                      const int *rcounts, below_dt_t *dt, below_comm_t *comm)
{
    size_t total = 0;

    for (int i = 0; i < ompi_comm_size(comm); i++) total += (size_t)rcounts[i];
    below_reduce_bufs(b, sbuf, total, BELOW_IN, rbuf,
                      sbuf == MPI_IN_PLACE ? total : (size_t)rcounts[ompi_comm_rank(comm)], dt,
                      BELOW_RECV(sbuf));
}

static void below_reduce_scatter_block_bufs(below_buf_t b[2], const void *sbuf, void *rbuf,
                                            int rcount, below_dt_t *dt, below_comm_t *comm)
{
    size_t total = (size_t)rcount * ompi_comm_size(comm);

    below_reduce_bufs(b, sbuf, total, BELOW_IN, rbuf,
                      sbuf == MPI_IN_PLACE ? total : (size_t)rcount, dt, BELOW_RECV(sbuf));
}

/* the send buffer counts at the root only; there, the receive buffer may be in place */
static void below_scatter_bufs(below_buf_t b[2], const void *sbuf, int scount,
                               below_dt_t *sdt, void *rbuf, int rcount, below_dt_t *rdt,
                               int root, below_comm_t *comm)
{
    SPAN(&b[0], sbuf, below_is_root(comm, root) ? BELOW_IN : 0,
         (size_t)scount * below_peers(comm), sdt);
    SPAN(&b[1], rbuf, BELOW_MEMBER(comm, root, BELOW_OUT), (size_t)rcount, rdt);
}

static void below_scatterv_bufs(below_buf_t b[2], const void *sbuf, const int *scounts,
                                const int *displs, below_dt_t *sdt, void *rbuf, int rcount,
                                below_dt_t *rdt, int root, below_comm_t *comm)
{
    if (below_is_root(comm, root)) {
        SPAN_V(&b[0], sbuf, BELOW_IN, scounts, displs, below_peers(comm), sdt);
    } else {
        SPAN(&b[0], sbuf, 0, 0, sdt);
    }
    SPAN(&b[1], rbuf, BELOW_MEMBER(comm, root, BELOW_OUT), (size_t)rcount, rdt);
}

static void below_neighbor_allgather_bufs(below_buf_t b[2], const void *sbuf, int scount,
                                          below_dt_t *sdt, void *rbuf, int rcount,
                                          below_dt_t *rdt, below_comm_t *comm)
{
    int in, out;

    below_degrees(comm, &in, &out);
    below_gather_bufs(b, sbuf, scount, sdt, BELOW_IN, rbuf, (size_t)rcount * in, rdt, BELOW_OUT);
    b[1].holes = b[1].partial = 1; /* an MPI_PROC_NULL neighbour's block is not written */
}

static void below_neighbor_allgatherv_bufs(below_buf_t b[2], const void *sbuf, int scount,
                                           below_dt_t *sdt, void *rbuf, const int *rcounts,
                                           const int *displs, below_dt_t *rdt,
                                           below_comm_t *comm)
{
    int in, out;

    below_degrees(comm, &in, &out);
    SPAN(&b[0], sbuf, BELOW_IN, (size_t)scount, sdt);
    SPAN_V(&b[1], rbuf, BELOW_OUT, rcounts, displs, in, rdt);
    b[1].partial = 1;
}

static void below_neighbor_alltoall_bufs(below_buf_t b[2], const void *sbuf, int scount,
                                         below_dt_t *sdt, void *rbuf, int rcount,
                                         below_dt_t *rdt, below_comm_t *comm)
{
    int in, out;

    below_degrees(comm, &in, &out);
    SPAN(&b[0], sbuf, BELOW_IN, (size_t)scount * out, sdt);
    SPAN(&b[1], rbuf, BELOW_OUT, (size_t)rcount * in, rdt);
    b[1].holes = b[1].partial = 1; /* an MPI_PROC_NULL neighbour's block is not written */
}

static void below_neighbor_alltoallv_bufs(below_buf_t b[2], const void *sbuf,
                                          const int *scounts, const int *sdispls,
                                          below_dt_t *sdt, void *rbuf, const int *rcounts,
                                          const int *rdispls, below_dt_t *rdt,
                                          below_comm_t *comm)
{
    int in, out;

    below_degrees(comm, &in, &out);
    SPAN_V(&b[0], sbuf, BELOW_IN, scounts, sdispls, out, sdt);
    SPAN_V(&b[1], rbuf, BELOW_OUT, rcounts, rdispls, in, rdt);
    b[1].partial = 1;
}

static void below_neighbor_alltoallw_bufs(below_buf_t b[2], const void *sbuf,
                                          const int *scounts, const MPI_Aint *sdispls,
                                          below_dt_t *const *sdts, void *rbuf,
                                          const int *rcounts, const MPI_Aint *rdispls,
                                          below_dt_t *const *rdts, below_comm_t *comm)
{
    int in, out;

    below_degrees(comm, &in, &out);
    SPAN_W(&b[0], sbuf, BELOW_IN, scounts, sdispls, 1, sdts, out);
    SPAN_W(&b[1], rbuf, BELOW_OUT, rcounts, rdispls, 1, rdts, in);
    b[1].partial = 1;
}

/* ---- blocking: staged around the call ---------------------------------------------- */

int mca_coll_gpuring_allgather_below(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                                     int rcount, below_dt_t *rdt, below_comm_t *comm,
                                     below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_allgather_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    BELOW_STAGED(m, allgather, b,
                 m->prev.allgather(b[0].host, scount, sdt, b[1].host, rcount, rdt, comm,
                                   m->prev.allgather_module));
}

static int below_allgatherv(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                            const int *rcounts, const int *displs, below_dt_t *rdt,
                            below_comm_t *comm, below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_allgatherv_bufs(b, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm);
    BELOW_STAGED(m, allgatherv, b,
                 m->prev.allgatherv(b[0].host, scount, sdt, b[1].host, rcounts, displs, rdt,
                                    comm, m->prev.allgatherv_module));
}

/* MPI_Allreduce, MPI_Scan and MPI_Exscan: one signature, on buffers b (the caller's
 * family's) */
static int below_reduce_all(mca_coll_gpuring_module_t *m, mca_coll_gpuring_coll_t coll,
                            mca_coll_base_module_allreduce_fn_t fn, below_module_t *fn_module,
                            below_buf_t b[2], int count, below_dt_t *dt, struct ompi_op_t *op,
                            below_comm_t *comm)
{
    int rc;

    if (fn == NULL) return OMPI_ERR_NOT_SUPPORTED;
    rc = mca_coll_gpuring_stage_in(m, coll, b, 2);
    if (rc != OMPI_SUCCESS) return rc;
    rc = fn(b[0].host, b[1].host, count, dt, op, comm, fn_module);
    return mca_coll_gpuring_stage_out(m, coll, b, 2, rc);
}

int mca_coll_gpuring_allreduce_below(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                                     struct ompi_op_t *op, below_comm_t *comm,
                                     below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_reduce_all_bufs(b, sbuf, rbuf, count, dt);
    return below_reduce_all(m, MCA_COLL_GPURING_COLL_allreduce, m->prev.allreduce,
                            m->prev.allreduce_module, b, count, dt, op, comm);
}

static int below_alltoall(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf, int rcount,
                          below_dt_t *rdt, below_comm_t *comm, below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_alltoall_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    BELOW_STAGED(m, alltoall, b,
                 m->prev.alltoall(b[0].host, scount, sdt, b[1].host, rcount, rdt, comm,
                                  m->prev.alltoall_module));
}

static int below_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                           below_dt_t *sdt, void *rbuf, const int *rcounts, const int *rdispls,
                           below_dt_t *rdt, below_comm_t *comm, below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_alltoallv_bufs(b, sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm);
    BELOW_STAGED(m, alltoallv, b,
                 m->prev.alltoallv(b[0].host, scounts, sdispls, sdt, b[1].host, rcounts,
                                   rdispls, rdt, comm, m->prev.alltoallv_module));
}

static int below_alltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                           below_dt_t *const *sdts, void *rbuf, const int *rcounts,
                           const int *rdispls, below_dt_t *const *rdts, below_comm_t *comm,
                           below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_alltoallw_bufs(b, sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts, comm);
    BELOW_STAGED(m, alltoallw, b,
                 m->prev.alltoallw(b[0].host, scounts, sdispls, sdts, b[1].host, rcounts,
                                   rdispls, rdts, comm, m->prev.alltoallw_module));
}

int mca_coll_gpuring_bcast_below(void *buf, int count, below_dt_t *dt, int root,
                                 below_comm_t *comm, below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[1];

    below_bcast_bufs(b, buf, count, dt, root, comm);
    BELOW_STAGED(m, bcast, b,
                 m->prev.bcast(b[0].host, count, dt, root, comm, m->prev.bcast_module));
}

static int below_exscan(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                        struct ompi_op_t *op, below_comm_t *comm, below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_exscan_bufs(b, sbuf, rbuf, count, dt, comm);
    return below_reduce_all(m, MCA_COLL_GPURING_COLL_exscan, m->prev.exscan,
                            m->prev.exscan_module, b, count, dt, op, comm);
}

static int below_gather(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf, int rcount,
                        below_dt_t *rdt, int root, below_comm_t *comm, below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_rooted_gather_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, root, comm);
    BELOW_STAGED(m, gather, b,
                 m->prev.gather(b[0].host, scount, sdt, b[1].host, rcount, rdt, root, comm,
                                m->prev.gather_module));
}

static int below_gatherv(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                         const int *rcounts, const int *displs, below_dt_t *rdt, int root,
                         below_comm_t *comm, below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_gatherv_bufs(b, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root, comm);
    BELOW_STAGED(m, gatherv, b,
                 m->prev.gatherv(b[0].host, scount, sdt, b[1].host, rcounts, displs, rdt, root,
                                 comm, m->prev.gatherv_module));
}

int mca_coll_gpuring_reduce_below(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                                  struct ompi_op_t *op, int root, below_comm_t *comm,
                                  below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_rooted_reduce_bufs(b, sbuf, rbuf, count, dt, root, comm);
    BELOW_STAGED(m, reduce, b,
                 m->prev.reduce(b[0].host, b[1].host, count, dt, op, root, comm,
                                m->prev.reduce_module));
}

int mca_coll_gpuring_reduce_scatter_below(const void *sbuf, void *rbuf, const int *rcounts,
                                          below_dt_t *dt, struct ompi_op_t *op, below_comm_t *comm,
                                          below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_reduce_scatter_bufs(b, sbuf, rbuf, rcounts, dt, comm);
    BELOW_STAGED(m, reduce_scatter, b,
                 m->prev.reduce_scatter(b[0].host, b[1].host, rcounts, dt, op, comm,
                                        m->prev.reduce_scatter_module));
}

int mca_coll_gpuring_reduce_scatter_block_below(const void *sbuf, void *rbuf, int rcount,
                                                below_dt_t *dt, struct ompi_op_t *op,
                                                below_comm_t *comm,
                                                below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_reduce_scatter_block_bufs(b, sbuf, rbuf, rcount, dt, comm);
    BELOW_STAGED(m, reduce_scatter_block, b,
                 m->prev.reduce_scatter_block(b[0].host, b[1].host, rcount, dt, op, comm,
                                              m->prev.reduce_scatter_block_module));
}

static int below_scan(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                      struct ompi_op_t *op, below_comm_t *comm, below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_reduce_all_bufs(b, sbuf, rbuf, count, dt);
    return below_reduce_all(m, MCA_COLL_GPURING_COLL_scan, m->prev.scan, m->prev.scan_module, b,
                            count, dt, op, comm);
}

static int below_scatter(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf, int rcount,
                         below_dt_t *rdt, int root, below_comm_t *comm, below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_scatter_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, root, comm);
    BELOW_STAGED(m, scatter, b,
                 m->prev.scatter(b[0].host, scount, sdt, b[1].host, rcount, rdt, root, comm,
                                 m->prev.scatter_module));
}

static int below_scatterv(const void *sbuf, const int *scounts, const int *displs,
                          below_dt_t *sdt, void *rbuf, int rcount, below_dt_t *rdt, int root,
                          below_comm_t *comm, below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_scatterv_bufs(b, sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root, comm);
    BELOW_STAGED(m, scatterv, b,
                 m->prev.scatterv(b[0].host, scounts, displs, sdt, b[1].host, rcount, rdt, root,
                                  comm, m->prev.scatterv_module));
}

static int below_neighbor_allgather(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                                    int rcount, below_dt_t *rdt, below_comm_t *comm,
                                    below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_neighbor_allgather_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    BELOW_STAGED(m, neighbor_allgather, b,
                 m->prev.neighbor_allgather(b[0].host, scount, sdt, b[1].host, rcount, rdt,
                                            comm, m->prev.neighbor_allgather_module));
}

static int below_neighbor_allgatherv(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                                     const int *rcounts, const int *displs, below_dt_t *rdt,
                                     below_comm_t *comm, below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_neighbor_allgatherv_bufs(b, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm);
    BELOW_STAGED(m, neighbor_allgatherv, b,
                 m->prev.neighbor_allgatherv(b[0].host, scount, sdt, b[1].host, rcounts, displs,
                                             rdt, comm, m->prev.neighbor_allgatherv_module));
}

static int below_neighbor_alltoall(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                                   int rcount, below_dt_t *rdt, below_comm_t *comm,
                                   below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_neighbor_alltoall_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    BELOW_STAGED(m, neighbor_alltoall, b,
                 m->prev.neighbor_alltoall(b[0].host, scount, sdt, b[1].host, rcount, rdt, comm,
                                           m->prev.neighbor_alltoall_module));
}

static int below_neighbor_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                                    below_dt_t *sdt, void *rbuf, const int *rcounts,
                                    const int *rdispls, below_dt_t *rdt, below_comm_t *comm,
                                    below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_neighbor_alltoallv_bufs(b, sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt,
                                  comm);
    BELOW_STAGED(m, neighbor_alltoallv, b,
                 m->prev.neighbor_alltoallv(b[0].host, scounts, sdispls, sdt, b[1].host,
                                            rcounts, rdispls, rdt, comm,
                                            m->prev.neighbor_alltoallv_module));
}

static int below_neighbor_alltoallw(const void *sbuf, const int *scounts, const MPI_Aint *sdispls,
                                    below_dt_t *const *sdts, void *rbuf, const int *rcounts,
                                    const MPI_Aint *rdispls, below_dt_t *const *rdts,
                                    below_comm_t *comm, below_module_t *module)
{
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    below_buf_t b[2];

    below_neighbor_alltoallw_bufs(b, sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts,
                                  comm);
    BELOW_STAGED(m, neighbor_alltoallw, b,
                 m->prev.neighbor_alltoallw(b[0].host, scounts, sdispls, sdts, b[1].host,
                                            rcounts, rdispls, rdts, comm,
                                            m->prev.neighbor_alltoallw_module));
}

/* MPI_Reduce_local (MPI_COMM_SELF's module): no communication, but the op below reads
 * both buffers and writes the second.  It names no communicator, so threads may make it
 * at once, and during MPI_COMM_SELF's collectives: a host area of the call's own. */
static int below_reduce_local(const void *inbuf, void *inoutbuf, int count, below_dt_t *dt,
                              struct ompi_op_t *op, below_module_t *module)
{
    const mca_coll_gpuring_coll_t coll = MCA_COLL_GPURING_COLL_reduce_local;
    mca_coll_gpuring_module_t *m = BELOW_MODULE(module);
    mca_coll_gpuring_stage_area_t area = {0};
    below_buf_t b[2];
    int rc;

    if (m->prev.reduce_local == NULL) return OMPI_ERR_NOT_SUPPORTED;
    SPAN(&b[0], inbuf, BELOW_IN, (size_t)count, dt);
    SPAN(&b[1], inoutbuf, MCA_COLL_GPURING_STAGE_INOUT, (size_t)count, dt);
    rc = mca_coll_gpuring_stage_in_area(&area, 0, coll, "(none)", b, 2);
    if (rc == OMPI_SUCCESS) {
        rc = m->prev.reduce_local(b[0].host, b[1].host, count, dt, op,
                                  m->prev.reduce_local_module);
        rc = mca_coll_gpuring_stage_out_area(&area, coll, "(none)", b, 2, rc);
    }
    mca_coll_gpuring_stage_area_free(&area);
    return rc;
}

/* ---- non-blocking: staged until the request completes ------------------------------ */

/* the family's buffers as `_bufs_call` finds them, then the call on their .host copies */
#define BELOW_NB_OR_P(_slot, _persistent, _nbufs, _bufs_call, _call)                       \
    do {                                                                                   \
        mca_coll_gpuring_module_t *m_ = BELOW_MODULE(module);                              \
        below_buf_t b[_nbufs];                                                             \
        _bufs_call;                                                                        \
        BELOW_STAGED_NB(m_, _slot, b, BELOW_N(b), req, _persistent, m_->prev._slot _call); \
    } while (0)
#define BELOW_NB(_slot, _nbufs, _bufs_call, _call)                                         \
    BELOW_NB_OR_P(_slot, 0, _nbufs, _bufs_call, _call)
#define BELOW_P(_slot, _nbufs, _bufs_call, _call)                                          \
    BELOW_NB_OR_P(_slot, 1, _nbufs, _bufs_call, _call)

static int below_iallgather(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                            int rcount, below_dt_t *rdt, below_comm_t *comm,
                            ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(iallgather, 2, below_allgather_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, comm),
             (b[0].host, scount, sdt, b[1].host, rcount, rdt, comm, req,
              m_->prev.iallgather_module));
}

static int below_iallgatherv(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                             const int *rcounts, const int *displs, below_dt_t *rdt,
                             below_comm_t *comm, ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(iallgatherv, 2,
             below_allgatherv_bufs(b, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm),
             (b[0].host, scount, sdt, b[1].host, rcounts, displs, rdt, comm, req,
              m_->prev.iallgatherv_module));
}

static int below_iallreduce(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                            struct ompi_op_t *op, below_comm_t *comm, ompi_request_t **req,
                            below_module_t *module)
{
    BELOW_NB(iallreduce, 2, below_reduce_all_bufs(b, sbuf, rbuf, count, dt),
             (b[0].host, b[1].host, count, dt, op, comm, req, m_->prev.iallreduce_module));
}

int mca_coll_gpuring_iallreduce_below(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                                      struct ompi_op_t *op, below_comm_t *comm,
                                      ompi_request_t **req, below_module_t *module)
{
    return below_iallreduce(sbuf, rbuf, count, dt, op, comm, req, module);
}

static int below_ialltoall(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf, int rcount,
                           below_dt_t *rdt, below_comm_t *comm, ompi_request_t **req,
                           below_module_t *module)
{
    BELOW_NB(ialltoall, 2, below_alltoall_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, comm),
             (b[0].host, scount, sdt, b[1].host, rcount, rdt, comm, req,
              m_->prev.ialltoall_module));
}

static int below_ialltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                            below_dt_t *sdt, void *rbuf, const int *rcounts, const int *rdispls,
                            below_dt_t *rdt, below_comm_t *comm, ompi_request_t **req,
                            below_module_t *module)
{
    BELOW_NB(ialltoallv, 2,
             below_alltoallv_bufs(b, sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt,
                                  comm),
             (b[0].host, scounts, sdispls, sdt, b[1].host, rcounts, rdispls, rdt, comm, req,
              m_->prev.ialltoallv_module));
}

static int below_ialltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                            below_dt_t *const *sdts, void *rbuf, const int *rcounts,
                            const int *rdispls, below_dt_t *const *rdts, below_comm_t *comm,
                            ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(ialltoallw, 2,
             below_alltoallw_bufs(b, sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts,
                                  comm),
             (b[0].host, scounts, sdispls, sdts, b[1].host, rcounts, rdispls, rdts, comm, req,
              m_->prev.ialltoallw_module));
}

static int below_ibcast(void *buf, int count, below_dt_t *dt, int root, below_comm_t *comm,
                        ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(ibcast, 1, below_bcast_bufs(b, buf, count, dt, root, comm),
             (b[0].host, count, dt, root, comm, req, m_->prev.ibcast_module));
}

static int below_iexscan(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                         struct ompi_op_t *op, below_comm_t *comm, ompi_request_t **req,
                         below_module_t *module)
{
    BELOW_NB(iexscan, 2, below_exscan_bufs(b, sbuf, rbuf, count, dt, comm),
             (b[0].host, b[1].host, count, dt, op, comm, req, m_->prev.iexscan_module));
}

static int below_igather(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf, int rcount,
                         below_dt_t *rdt, int root, below_comm_t *comm, ompi_request_t **req,
                         below_module_t *module)
{
    BELOW_NB(igather, 2,
             below_rooted_gather_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, root, comm),
             (b[0].host, scount, sdt, b[1].host, rcount, rdt, root, comm, req,
              m_->prev.igather_module));
}

static int below_igatherv(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                          const int *rcounts, const int *displs, below_dt_t *rdt, int root,
                          below_comm_t *comm, ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(igatherv, 2,
             below_gatherv_bufs(b, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root, comm),
             (b[0].host, scount, sdt, b[1].host, rcounts, displs, rdt, root, comm, req,
              m_->prev.igatherv_module));
}

static int below_ireduce(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                         struct ompi_op_t *op, int root, below_comm_t *comm,
                         ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(ireduce, 2, below_rooted_reduce_bufs(b, sbuf, rbuf, count, dt, root, comm),
             (b[0].host, b[1].host, count, dt, op, root, comm, req, m_->prev.ireduce_module));
}

static int below_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                 below_dt_t *dt, struct ompi_op_t *op, below_comm_t *comm,
                                 ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(ireduce_scatter, 2, below_reduce_scatter_bufs(b, sbuf, rbuf, rcounts, dt, comm),
             (b[0].host, b[1].host, rcounts, dt, op, comm, req,
              m_->prev.ireduce_scatter_module));
}

static int below_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount, below_dt_t *dt,
                                       struct ompi_op_t *op, below_comm_t *comm,
                                       ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(ireduce_scatter_block, 2,
             below_reduce_scatter_block_bufs(b, sbuf, rbuf, rcount, dt, comm),
             (b[0].host, b[1].host, rcount, dt, op, comm, req,
              m_->prev.ireduce_scatter_block_module));
}

static int below_iscan(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                       struct ompi_op_t *op, below_comm_t *comm, ompi_request_t **req,
                       below_module_t *module)
{
    BELOW_NB(iscan, 2, below_reduce_all_bufs(b, sbuf, rbuf, count, dt),
             (b[0].host, b[1].host, count, dt, op, comm, req, m_->prev.iscan_module));
}

static int below_iscatter(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf, int rcount,
                          below_dt_t *rdt, int root, below_comm_t *comm, ompi_request_t **req,
                          below_module_t *module)
{
    BELOW_NB(iscatter, 2,
             below_scatter_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, root, comm),
             (b[0].host, scount, sdt, b[1].host, rcount, rdt, root, comm, req,
              m_->prev.iscatter_module));
}

static int below_iscatterv(const void *sbuf, const int *scounts, const int *displs,
                           below_dt_t *sdt, void *rbuf, int rcount, below_dt_t *rdt, int root,
                           below_comm_t *comm, ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(iscatterv, 2,
             below_scatterv_bufs(b, sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root, comm),
             (b[0].host, scounts, displs, sdt, b[1].host, rcount, rdt, root, comm, req,
              m_->prev.iscatterv_module));
}

static int below_ineighbor_allgather(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                                     int rcount, below_dt_t *rdt, below_comm_t *comm,
                                     ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(ineighbor_allgather, 2,
             below_neighbor_allgather_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, comm),
             (b[0].host, scount, sdt, b[1].host, rcount, rdt, comm, req,
              m_->prev.ineighbor_allgather_module));
}

static int below_ineighbor_allgatherv(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                                      const int *rcounts, const int *displs, below_dt_t *rdt,
                                      below_comm_t *comm, ompi_request_t **req,
                                      below_module_t *module)
{
    BELOW_NB(ineighbor_allgatherv, 2,
             below_neighbor_allgatherv_bufs(b, sbuf, scount, sdt, rbuf, rcounts, displs, rdt,
                                            comm),
             (b[0].host, scount, sdt, b[1].host, rcounts, displs, rdt, comm, req,
              m_->prev.ineighbor_allgatherv_module));
}

static int below_ineighbor_alltoall(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                                    int rcount, below_dt_t *rdt, below_comm_t *comm,
                                    ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(ineighbor_alltoall, 2,
             below_neighbor_alltoall_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, comm),
             (b[0].host, scount, sdt, b[1].host, rcount, rdt, comm, req,
              m_->prev.ineighbor_alltoall_module));
}

static int below_ineighbor_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                                     below_dt_t *sdt, void *rbuf, const int *rcounts,
                                     const int *rdispls, below_dt_t *rdt, below_comm_t *comm,
                                     ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(ineighbor_alltoallv, 2,
             below_neighbor_alltoallv_bufs(b, sbuf, scounts, sdispls, sdt, rbuf, rcounts,
                                           rdispls, rdt, comm),
             (b[0].host, scounts, sdispls, sdt, b[1].host, rcounts, rdispls, rdt, comm, req,
              m_->prev.ineighbor_alltoallv_module));
}

static int below_ineighbor_alltoallw(const void *sbuf, const int *scounts,
                                     const MPI_Aint *sdispls, below_dt_t *const *sdts,
                                     void *rbuf, const int *rcounts, const MPI_Aint *rdispls,
                                     below_dt_t *const *rdts, below_comm_t *comm,
                                     ompi_request_t **req, below_module_t *module)
{
    BELOW_NB(ineighbor_alltoallw, 2,
             below_neighbor_alltoallw_bufs(b, sbuf, scounts, sdispls, sdts, rbuf, rcounts,
                                           rdispls, rdts, comm),
             (b[0].host, scounts, sdispls, sdts, b[1].host, rcounts, rdispls, rdts, comm, req,
              m_->prev.ineighbor_alltoallw_module));
}

/* ---- persistent: staged with the request, at every start ----------------------------- */

typedef struct ompi_info_t below_info_t;

static int below_allgather_init(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                                int rcount, below_dt_t *rdt, below_comm_t *comm,
                                below_info_t *info, ompi_request_t **req, below_module_t *module)
{
    BELOW_P(allgather_init, 2, below_allgather_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, comm),
            (b[0].host, scount, sdt, b[1].host, rcount, rdt, comm, info, req,
             m_->prev.allgather_init_module));
}

static int below_allgatherv_init(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                                 const int *rcounts, const int *displs, below_dt_t *rdt,
                                 below_comm_t *comm, below_info_t *info, ompi_request_t **req,
                                 below_module_t *module)
{
    BELOW_P(allgatherv_init, 2,
            below_allgatherv_bufs(b, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm),
            (b[0].host, scount, sdt, b[1].host, rcounts, displs, rdt, comm, info, req,
             m_->prev.allgatherv_init_module));
}

static int below_allreduce_init(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                                struct ompi_op_t *op, below_comm_t *comm, below_info_t *info,
                                ompi_request_t **req, below_module_t *module)
{
    BELOW_P(allreduce_init, 2, below_reduce_all_bufs(b, sbuf, rbuf, count, dt),
            (b[0].host, b[1].host, count, dt, op, comm, info, req,
             m_->prev.allreduce_init_module));
}

static int below_alltoall_init(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                               int rcount, below_dt_t *rdt, below_comm_t *comm,
                               below_info_t *info, ompi_request_t **req, below_module_t *module)
{
    BELOW_P(alltoall_init, 2, below_alltoall_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, comm),
            (b[0].host, scount, sdt, b[1].host, rcount, rdt, comm, info, req,
             m_->prev.alltoall_init_module));
}

static int below_alltoallv_init(const void *sbuf, const int *scounts, const int *sdispls,
                                below_dt_t *sdt, void *rbuf, const int *rcounts,
                                const int *rdispls, below_dt_t *rdt, below_comm_t *comm,
                                below_info_t *info, ompi_request_t **req, below_module_t *module)
{
    BELOW_P(alltoallv_init, 2,
            below_alltoallv_bufs(b, sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt,
                                 comm),
            (b[0].host, scounts, sdispls, sdt, b[1].host, rcounts, rdispls, rdt, comm, info,
             req, m_->prev.alltoallv_init_module));
}

static int below_alltoallw_init(const void *sbuf, const int *scounts, const int *sdispls,
                                below_dt_t *const *sdts, void *rbuf, const int *rcounts,
                                const int *rdispls, below_dt_t *const *rdts,
                                below_comm_t *comm, below_info_t *info, ompi_request_t **req,
                                below_module_t *module)
{
    BELOW_P(alltoallw_init, 2,
            below_alltoallw_bufs(b, sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts,
                                 comm),
            (b[0].host, scounts, sdispls, sdts, b[1].host, rcounts, rdispls, rdts, comm, info,
             req, m_->prev.alltoallw_init_module));
}

static int below_bcast_init(void *buf, int count, below_dt_t *dt, int root, below_comm_t *comm,
                            below_info_t *info, ompi_request_t **req, below_module_t *module)
{
    BELOW_P(bcast_init, 1, below_bcast_bufs(b, buf, count, dt, root, comm),
            (b[0].host, count, dt, root, comm, info, req, m_->prev.bcast_init_module));
}

static int below_exscan_init(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                             struct ompi_op_t *op, below_comm_t *comm, below_info_t *info,
                             ompi_request_t **req, below_module_t *module)
{
    BELOW_P(exscan_init, 2, below_exscan_bufs(b, sbuf, rbuf, count, dt, comm),
            (b[0].host, b[1].host, count, dt, op, comm, info, req,
             m_->prev.exscan_init_module));
}

static int below_gather_init(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                             int rcount, below_dt_t *rdt, int root, below_comm_t *comm,
                             below_info_t *info, ompi_request_t **req, below_module_t *module)
{
    BELOW_P(gather_init, 2,
            below_rooted_gather_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, root, comm),
            (b[0].host, scount, sdt, b[1].host, rcount, rdt, root, comm, info, req,
             m_->prev.gather_init_module));
}

static int below_gatherv_init(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                              const int *rcounts, const int *displs, below_dt_t *rdt, int root,
                              below_comm_t *comm, below_info_t *info, ompi_request_t **req,
                              below_module_t *module)
{
    BELOW_P(gatherv_init, 2,
            below_gatherv_bufs(b, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root, comm),
            (b[0].host, scount, sdt, b[1].host, rcounts, displs, rdt, root, comm, info, req,
             m_->prev.gatherv_init_module));
}

static int below_reduce_init(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                             struct ompi_op_t *op, int root, below_comm_t *comm,
                             below_info_t *info, ompi_request_t **req, below_module_t *module)
{
    BELOW_P(reduce_init, 2, below_rooted_reduce_bufs(b, sbuf, rbuf, count, dt, root, comm),
            (b[0].host, b[1].host, count, dt, op, root, comm, info, req,
             m_->prev.reduce_init_module));
}

static int below_reduce_scatter_init(const void *sbuf, void *rbuf, const int *rcounts,
                                     below_dt_t *dt, struct ompi_op_t *op, below_comm_t *comm,
                                     below_info_t *info, ompi_request_t **req,
                                     below_module_t *module)
{
    BELOW_P(reduce_scatter_init, 2, below_reduce_scatter_bufs(b, sbuf, rbuf, rcounts, dt, comm),
            (b[0].host, b[1].host, rcounts, dt, op, comm, info, req,
             m_->prev.reduce_scatter_init_module));
}

static int below_reduce_scatter_block_init(const void *sbuf, void *rbuf, int rcount,
                                           below_dt_t *dt, struct ompi_op_t *op,
                                           below_comm_t *comm, below_info_t *info,
                                           ompi_request_t **req, below_module_t *module)
{
    BELOW_P(reduce_scatter_block_init, 2,
            below_reduce_scatter_block_bufs(b, sbuf, rbuf, rcount, dt, comm),
            (b[0].host, b[1].host, rcount, dt, op, comm, info, req,
             m_->prev.reduce_scatter_block_init_module));
}

static int below_scan_init(const void *sbuf, void *rbuf, int count, below_dt_t *dt,
                           struct ompi_op_t *op, below_comm_t *comm, below_info_t *info,
                           ompi_request_t **req, below_module_t *module)
{
    BELOW_P(scan_init, 2, below_reduce_all_bufs(b, sbuf, rbuf, count, dt),
            (b[0].host, b[1].host, count, dt, op, comm, info, req, m_->prev.scan_init_module));
}

static int below_scatter_init(const void *sbuf, int scount, below_dt_t *sdt, void *rbuf,
                              int rcount, below_dt_t *rdt, int root, below_comm_t *comm,
                              below_info_t *info, ompi_request_t **req, below_module_t *module)
{
    BELOW_P(scatter_init, 2,
            below_scatter_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, root, comm),
            (b[0].host, scount, sdt, b[1].host, rcount, rdt, root, comm, info, req,
             m_->prev.scatter_init_module));
}

static int below_scatterv_init(const void *sbuf, const int *scounts, const int *displs,
                               below_dt_t *sdt, void *rbuf, int rcount, below_dt_t *rdt,
                               int root, below_comm_t *comm, below_info_t *info,
                               ompi_request_t **req, below_module_t *module)
{
    BELOW_P(scatterv_init, 2,
            below_scatterv_bufs(b, sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root, comm),
            (b[0].host, scounts, displs, sdt, b[1].host, rcount, rdt, root, comm, info, req,
             m_->prev.scatterv_init_module));
}

static int below_neighbor_allgather_init(const void *sbuf, int scount, below_dt_t *sdt,
                                         void *rbuf, int rcount, below_dt_t *rdt,
                                         below_comm_t *comm, below_info_t *info,
                                         ompi_request_t **req, below_module_t *module)
{
    BELOW_P(neighbor_allgather_init, 2,
            below_neighbor_allgather_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, comm),
            (b[0].host, scount, sdt, b[1].host, rcount, rdt, comm, info, req,
             m_->prev.neighbor_allgather_init_module));
}

static int below_neighbor_allgatherv_init(const void *sbuf, int scount, below_dt_t *sdt,
                                          void *rbuf, const int *rcounts, const int *displs,
                                          below_dt_t *rdt, below_comm_t *comm,
                                          below_info_t *info, ompi_request_t **req,
                                          below_module_t *module)
{
    BELOW_P(neighbor_allgatherv_init, 2,
            below_neighbor_allgatherv_bufs(b, sbuf, scount, sdt, rbuf, rcounts, displs, rdt,
                                           comm),
            (b[0].host, scount, sdt, b[1].host, rcounts, displs, rdt, comm, info, req,
             m_->prev.neighbor_allgatherv_init_module));
}

static int below_neighbor_alltoall_init(const void *sbuf, int scount, below_dt_t *sdt,
                                        void *rbuf, int rcount, below_dt_t *rdt,
                                        below_comm_t *comm, below_info_t *info,
                                        ompi_request_t **req, below_module_t *module)
{
    BELOW_P(neighbor_alltoall_init, 2,
            below_neighbor_alltoall_bufs(b, sbuf, scount, sdt, rbuf, rcount, rdt, comm),
            (b[0].host, scount, sdt, b[1].host, rcount, rdt, comm, info, req,
             m_->prev.neighbor_alltoall_init_module));
}

static int below_neighbor_alltoallv_init(const void *sbuf, const int *scounts,
                                         const int *sdispls, below_dt_t *sdt, void *rbuf,
                                         const int *rcounts, const int *rdispls,
                                         below_dt_t *rdt, below_comm_t *comm,
                                         below_info_t *info, ompi_request_t **req,
                                         below_module_t *module)
{
    BELOW_P(neighbor_alltoallv_init, 2,
            below_neighbor_alltoallv_bufs(b, sbuf, scounts, sdispls, sdt, rbuf, rcounts,
                                          rdispls, rdt, comm),
            (b[0].host, scounts, sdispls, sdt, b[1].host, rcounts, rdispls, rdt, comm, info,
             req, m_->prev.neighbor_alltoallv_init_module));
}

static int below_neighbor_alltoallw_init(const void *sbuf, const int *scounts,
                                         const MPI_Aint *sdispls, below_dt_t *const *sdts,
                                         void *rbuf, const int *rcounts,
                                         const MPI_Aint *rdispls, below_dt_t *const *rdts,
                                         below_comm_t *comm, below_info_t *info,
                                         ompi_request_t **req, below_module_t *module)
{
    BELOW_P(neighbor_alltoallw_init, 2,
            below_neighbor_alltoallw_bufs(b, sbuf, scounts, sdispls, sdts, rbuf, rcounts,
                                          rdispls, rdts, comm),
            (b[0].host, scounts, sdispls, sdts, b[1].host, rcounts, rdispls, rdts, comm, info,
             req, m_->prev.neighbor_alltoallw_init_module));
}

/* No buffers: nothing staged, but the start's check all the same (stage_nb_in: a rank
 * whose non-blocking collectives may be apart from its peers' makes none). */
static int below_ibarrier(below_comm_t *comm, ompi_request_t **req, below_module_t *module)
{
    mca_coll_gpuring_module_t *m_ = BELOW_MODULE(module);

    BELOW_STAGED_NB(m_, ibarrier, NULL, 0, req, 0,
                    m_->prev.ibarrier(comm, req, m_->prev.ibarrier_module));
}

static int below_barrier_init(below_comm_t *comm, below_info_t *info, ompi_request_t **req,
                              below_module_t *module)
{
    mca_coll_gpuring_module_t *m_ = BELOW_MODULE(module);

    BELOW_STAGED_NB(m_, barrier_init, NULL, 0, req, 1,
                    m_->prev.barrier_init(comm, info, req, m_->prev.barrier_init_module));
}

/* ---- registration ------------------------------------------------------------------ */

#define below_allreduce mca_coll_gpuring_allreduce_below
#define below_allgather mca_coll_gpuring_allgather_below
#define below_bcast mca_coll_gpuring_bcast_below
#define below_reduce mca_coll_gpuring_reduce_below
#define below_reduce_scatter mca_coll_gpuring_reduce_scatter_below
#define below_reduce_scatter_block mca_coll_gpuring_reduce_scatter_block_below
#define below_barrier NULL /* no buffers, no tags in the non-blocking sequence: its own */

void mca_coll_gpuring_below_install(mca_coll_base_module_t *module)
{
#define BELOW_INSTALL(_slot, _type) module->coll_##_slot = below_##_slot;
    MCA_COLL_GPURING_COLLS(BELOW_INSTALL)
#undef BELOW_INSTALL
}
