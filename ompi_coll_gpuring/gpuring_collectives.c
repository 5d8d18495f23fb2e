/*
 * gpuring_collectives.c -- the collectives gpuring runs (gpuring_comm.h),
 * one thin function each (NCCL's collectives.cc): it names its program
 * family and hands the call to gpuring_enqueue_coll, which plans and
 * launches it.
 */
#include "ompi_coll_gpuring/gpuring_comm_internal.h"

gpuring_status_t gpuring_comm_allreduce(gpuring_comm_t *c, gpuring_plane_t plane,
                                        const void *sendbuf, void *recvbuf, size_t count,
                                        gpuring_type_t type, gpuring_op_t op)
{
    const gpuring_coll_info_t info = {.kind = GPURING_COLL_ALLREDUCE, .sendbuf = sendbuf,
                                      .recvbuf = recvbuf, .count = count, .type = type,
                                      .op = op};

    return gpuring_enqueue_coll(c, plane, &info);
}
