/*
 * gpuring_collectives.c -- the collectives gpuring runs (gpuring_comm.h),
 * one thin function each (NCCL's collectives.cc): it names its program
 * family and hands the call to gpuring_async.c, which orders it among the
 * communicator's calls and has gpuring_enqueue.c plan and launch it.
 */
#include "ompi_coll_gpuring/gpuring_comm_internal.h"

gpuring_status_t gpuring_comm_allreduce(gpuring_comm_t *c, gpuring_plane_t plane,
                                        const void *sendbuf, void *recvbuf, size_t count,
                                        gpuring_type_t type, gpuring_op_t op)
{
    const gpuring_coll_info_t info = {.kind = GPURING_COLL_ALLREDUCE, .sendbuf = sendbuf,
                                      .recvbuf = recvbuf, .count = count, .type = type,
                                      .op = op};

    return gpuring_async_run(c, plane, &info);
}

gpuring_status_t gpuring_comm_iallreduce(gpuring_comm_t *c, gpuring_plane_t plane,
                                         const void *sendbuf, void *recvbuf, size_t count,
                                         gpuring_type_t type, gpuring_op_t op,
                                         gpuring_comm_done_fn_t done, void *ctx)
{
    const gpuring_coll_info_t info = {.kind = GPURING_COLL_ALLREDUCE, .sendbuf = sendbuf,
                                      .recvbuf = recvbuf, .count = count, .type = type,
                                      .op = op};

    return gpuring_async_submit(c, plane, &info, done, ctx);
}

gpuring_status_t gpuring_comm_reduce_scatter(gpuring_comm_t *c, gpuring_plane_t plane,
                                             const void *sendbuf, void *recvbuf, size_t count,
                                             gpuring_type_t type, gpuring_op_t op)
{
    const gpuring_coll_info_t info = {.kind = GPURING_COLL_REDUCE_SCATTER, .sendbuf = sendbuf,
                                      .recvbuf = recvbuf, .count = count, .type = type,
                                      .op = op};

    return gpuring_async_run(c, plane, &info);
}

/* allgather and bcast copy bytes: one element type serves every MPI type */
gpuring_status_t gpuring_comm_allgather(gpuring_comm_t *c, gpuring_plane_t plane,
                                        const void *sendbuf, void *recvbuf, size_t bytes)
{
    const gpuring_coll_info_t info = {.kind = GPURING_COLL_ALLGATHER, .sendbuf = sendbuf,
                                      .recvbuf = recvbuf, .count = bytes,
                                      .type = GPURING_TYPE_UINT8, .op = GPURING_OP_SUM};

    return gpuring_async_run(c, plane, &info);
}

gpuring_status_t gpuring_comm_bcast(gpuring_comm_t *c, gpuring_plane_t plane, void *buf,
                                    size_t bytes, int root)
{
    const gpuring_coll_info_t info = {.kind = GPURING_COLL_BCAST, .sendbuf = buf,
                                      .recvbuf = buf, .count = bytes,
                                      .type = GPURING_TYPE_UINT8, .op = GPURING_OP_SUM,
                                      .root = root};

    return gpuring_async_run(c, plane, &info);
}

gpuring_status_t gpuring_comm_reduce(gpuring_comm_t *c, gpuring_plane_t plane,
                                     const void *sendbuf, void *recvbuf, size_t count,
                                     gpuring_type_t type, gpuring_op_t op, int root)
{
    /* non-roots write nothing: the executors want a buffer all the same */
    const gpuring_coll_info_t info = {.kind = GPURING_COLL_REDUCE, .sendbuf = sendbuf,
                                      .recvbuf = recvbuf != NULL ? recvbuf : (void *)sendbuf,
                                      .count = count, .type = type, .op = op, .root = root};

    return gpuring_async_run(c, plane, &info);
}

gpuring_status_t gpuring_comm_abandon(gpuring_comm_t *c, gpuring_plane_t plane,
                                      gpuring_coll_kind_t kind, size_t count,
                                      gpuring_type_t type, gpuring_op_t op, int root,
                                      int nonblocking, gpuring_status_t why)
{
    /* no buffers: the call never moves a byte; the copies' type as above */
    const int copy = kind == GPURING_COLL_ALLGATHER || kind == GPURING_COLL_BCAST;
    const gpuring_coll_info_t info = {.kind = kind, .count = count,
                                      .type = copy ? GPURING_TYPE_UINT8 : type,
                                      .op = copy ? GPURING_OP_SUM : op, .root = root,
                                      .fail = why};

    return gpuring_async_abandon(c, plane, &info, nonblocking);
}
