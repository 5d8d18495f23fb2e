/*
 * coll_gpuring_allreduce.c -- the MPI_Allreduce entry point.
 *
 * checks (datatype, op, memory) -> lazy communicator setup -> the plane of
 * the buffers' memory (host executor, or the CUDA executor with the device
 * connections made at the first device call) -> gpuring allreduce; anything
 * gpuring does not handle goes to the saved allreduce of the component
 * below, with the reason logged at verbose level 3.  Every check depends
 * only on arguments MPI requires to match across ranks, and on the memory
 * kind, which CUDA-aware MPI users keep alike on every rank -- or which the
 * ranks agree on first (coll_gpuring_agree_memory) -- so all ranks take the
 * same path.  The way below stages device buffers through host memory
 * (coll_gpuring_below.c).
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include <limits.h>

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"

#include "kernels/device.h"
#include "kernels/memkind.h"

/* MPI's C integer and floating types gpuring reduces, by size.  MPI_CHAR is
 * the platform's char (signed on x86); MPI_C_BOOL takes only the logical ops
 * (MPI allows no others on it), whose 0/1 results are the bool's. */
static int gpuring_map_type(struct ompi_datatype_t *dt, gpuring_op_t op, gpuring_type_t *type_p)
{
    static const gpuring_type_t sint[9] = {
        [1] = GPURING_TYPE_INT8, [2] = GPURING_TYPE_INT16,
        [4] = GPURING_TYPE_INT32, [8] = GPURING_TYPE_INT64};
    static const gpuring_type_t uint[9] = {
        [1] = GPURING_TYPE_UINT8, [2] = GPURING_TYPE_UINT16,
        [4] = GPURING_TYPE_UINT32, [8] = GPURING_TYPE_UINT64};
    size_t size;

    if (!ompi_datatype_is_predefined(dt)) return 0;
    ompi_datatype_type_size(dt, &size);
    if (size > 8) return 0;
    if (dt == MPI_SIGNED_CHAR || dt == MPI_SHORT || dt == MPI_INT || dt == MPI_LONG ||
        dt == MPI_LONG_LONG_INT || dt == MPI_INT8_T || dt == MPI_INT16_T ||
        dt == MPI_INT32_T || dt == MPI_INT64_T || dt == MPI_AINT || dt == MPI_OFFSET ||
        dt == MPI_COUNT || (dt == MPI_CHAR && CHAR_MIN < 0)) {
        *type_p = sint[size];
    } else if (dt == MPI_UNSIGNED_CHAR || dt == MPI_UNSIGNED_SHORT || dt == MPI_UNSIGNED ||
               dt == MPI_UNSIGNED_LONG || dt == MPI_UNSIGNED_LONG_LONG || dt == MPI_UINT8_T ||
               dt == MPI_UINT16_T || dt == MPI_UINT32_T || dt == MPI_UINT64_T ||
               (dt == MPI_CHAR && CHAR_MIN == 0)) {
        *type_p = uint[size];
    } else if (dt == MPI_C_BOOL && size == 1 &&
               (op == GPURING_OP_LAND || op == GPURING_OP_LOR || op == GPURING_OP_LXOR)) {
        *type_p = GPURING_TYPE_UINT8;
    } else if (dt == MPI_BYTE && (op == GPURING_OP_BAND || op == GPURING_OP_BOR ||
                                  op == GPURING_OP_BXOR)) {
        *type_p = GPURING_TYPE_UINT8; /* MPI allows only the bitwise ops on bytes */
    } else if (dt == MPI_FLOAT && size == 4) {
        *type_p = GPURING_TYPE_FLOAT;
    } else if (dt == MPI_DOUBLE && size == 8) {
        *type_p = GPURING_TYPE_DOUBLE;
    } else {
        return 0;
    }
    return 1;
}

static int gpuring_map_op(struct ompi_op_t *op, gpuring_op_t *op_p)
{
    static struct {
        struct ompi_op_t *mpi;
        gpuring_op_t op;
    } ops[] = {
        {MPI_SUM, GPURING_OP_SUM},   {MPI_PROD, GPURING_OP_PROD}, {MPI_MIN, GPURING_OP_MIN},
        {MPI_MAX, GPURING_OP_MAX},   {MPI_BAND, GPURING_OP_BAND}, {MPI_BOR, GPURING_OP_BOR},
        {MPI_BXOR, GPURING_OP_BXOR}, {MPI_LAND, GPURING_OP_LAND}, {MPI_LOR, GPURING_OP_LOR},
        {MPI_LXOR, GPURING_OP_LXOR},
    };

    if (!ompi_op_is_intrinsic(op)) return 0;
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        if (op == ops[i].mpi) {
            *op_p = ops[i].op;
            return 1;
        }
    }
    return 0;
}

/*
 * The plane this rank's buffers would run on, or -1 (the component below,
 * with *why_p saying why): the buffers' memory kind and the parameters.
 */
static int gpuring_allreduce_plane(const void *src, void *rbuf, int *device_p, const char **why_p)
{
    gpuring_mem_kind_t kind = gpuring_mem_kind(src, device_p);
    int rdevice;

    if (kind != gpuring_mem_kind(rbuf, &rdevice) || *device_p != rdevice) {
        *why_p = "send and receive buffers are different kinds of memory or on different GPUs";
    } else if (kind == GPURING_MEM_MANAGED && !mca_coll_gpuring_component.managed_buffers) {
        *why_p = "managed memory (set coll_gpuring_managed_buffers=1 to run it in gpuring)";
    } else if (kind == GPURING_MEM_HOST && !mca_coll_gpuring_component.host_buffers) {
        *why_p = "host buffers (set coll_gpuring_host_buffers=1 to run them in gpuring)";
    } else if (kind != GPURING_MEM_HOST && *device_p < 0) {
        *why_p = "the CUDA driver names no GPU for this memory";
    } else {
        return kind == GPURING_MEM_HOST ? GPURING_PLANE_HOST : GPURING_PLANE_DEVICE;
    }
    return -1;
}

/* coll_gpuring_agree_memory: 1 if every rank chose `plane` (one small allreduce below). */
static int gpuring_allreduce_planes_agree(mca_coll_gpuring_module_t *m,
                                          struct ompi_communicator_t *comm, int plane)
{
    int v[2] = {plane, -plane}; /* max and -min */

    return m->prev.allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MAX, comm,
                             m->prev.allreduce_module) == OMPI_SUCCESS &&
           v[0] == -v[1];
}

/* A call gpuring runs: its communicator, plane and types, the application's
 * CUDA context to give back. */
typedef struct allreduce_call {
    gpuring_comm_t *gcomm;
    gpuring_plane_t plane;
    gpuring_type_t type;
    gpuring_op_t op;
    gpuring_device_saved_t app;
} allreduce_call_t;

enum { ALLREDUCE_RUN, ALLREDUCE_NOTHING, ALLREDUCE_FALLBACK, ALLREDUCE_ERROR };

/*
 * What MPI_Allreduce and MPI_Iallreduce do before the call: the checks, the
 * plane, the communicator and its plane's connections.  ALLREDUCE_RUN: the
 * call is gpuring's (for device buffers gpuring's GPU is current until
 * allreduce_end); ALLREDUCE_NOTHING: gpuring's, with no element (nothing set
 * up, nothing to do); ALLREDUCE_FALLBACK: the component below's (the reason
 * logged); ALLREDUCE_ERROR: *rc_p fails the call.
 */
static int allreduce_begin(mca_coll_gpuring_module_t *m, const char *name, const void *src,
                           void *rbuf, int count, struct ompi_datatype_t *dtype,
                           struct ompi_op_t *op, struct ompi_communicator_t *comm,
                           allreduce_call_t *call, int *rc_p)
{
    const char *why = NULL;
    gpuring_status_t ready;
    int plane, device;

    if (count < 0) {
        /* only reaches here with mpi_param_check 0: no component should see it */
        GPURING_ERROR(GPURING_SUBSYS_COLL, "%s on comm %s with count %d (MPI_ERR_COUNT)", name,
                      comm->c_name, count);
        *rc_p = MPI_ERR_COUNT;
        return ALLREDUCE_ERROR;
    }
    if (!gpuring_map_op(op, &call->op)) {
        GPURING_INFO(GPURING_SUBSYS_COLL, "%s fallback: op %s is not handled", name, op->o_name);
        return ALLREDUCE_FALLBACK;
    }
    if (!gpuring_map_type(dtype, call->op, &call->type) ||
        !gpuring_op_supported(call->type, call->op)) {
        GPURING_INFO(GPURING_SUBSYS_COLL, "%s fallback: datatype %s with op %s is not "
                     "handled", name, dtype->name, op->o_name);
        return ALLREDUCE_FALLBACK;
    }
    if (count == 0) return ALLREDUCE_NOTHING;
    plane = gpuring_allreduce_plane(src, rbuf, &device, &why);
    if (mca_coll_gpuring_component.agree_memory &&
        !gpuring_allreduce_planes_agree(m, comm, plane)) {
        plane = -1;
        why = "ranks passed different kinds of memory (host on some, device on others) or "
              "not all can run it";
    }
    if (plane < 0) {
        GPURING_INFO(GPURING_SUBSYS_COLL, "%s fallback: %s", name, why);
        return ALLREDUCE_FALLBACK;
    }
    call->gcomm = mca_coll_gpuring_comm_get(m);
    if (call->gcomm == NULL && m->state == MCA_COLL_GPURING_COMM_FAILED) {
        *rc_p = mca_coll_gpuring_status_to_ompi(GPURING_ERR_BROKEN); /* setup failed: logged */
        return ALLREDUCE_ERROR;
    }
    if (call->gcomm == NULL) {
        return ALLREDUCE_FALLBACK; /* setup failed or disabled: logged there */
    }
    call->plane = (gpuring_plane_t)plane;
    /* the device calls below make gpuring's GPU current: give the application back its own */
    call->app = (gpuring_device_saved_t){0, NULL};
    if (plane == GPURING_PLANE_DEVICE) call->app = gpuring_device_save();
    ready = gpuring_comm_plane_ready(call->gcomm, call->plane, device);
    if (ready == GPURING_OK) return ALLREDUCE_RUN;
    if (plane == GPURING_PLANE_DEVICE) gpuring_device_restore(call->app);
    if (ready == GPURING_ERR_NOT_SUPPORTED) {
        GPURING_INFO(GPURING_SUBSYS_COLL, "%s fallback: no %s connections on comm %s", name,
                     plane == GPURING_PLANE_HOST ? "host" : "device", comm->c_name);
        return ALLREDUCE_FALLBACK;
    }
    *rc_p = mca_coll_gpuring_allreduce_failed(name, ready, count, call->type, call->plane,
                                              comm);
    return ALLREDUCE_ERROR;
}

/* After the call (or its start): the application's CUDA context back. */
static void allreduce_end(allreduce_call_t *call)
{
    if (call->plane == GPURING_PLANE_DEVICE) gpuring_device_restore(call->app);
}

int mca_coll_gpuring_allreduce_failed(const char *name, gpuring_status_t st, int count,
                                      gpuring_type_t type, gpuring_plane_t plane,
                                      struct ompi_communicator_t *comm)
{
    GPURING_ERROR(GPURING_SUBSYS_COLL,
                  "%s of %d %s on %s buffers on comm %s failed: %s; the "
                  "communicator cannot be used by gpuring any more%s",
                  name, count, gpuring_type_name(type),
                  plane == GPURING_PLANE_HOST ? "host" : "device", comm->c_name,
                  gpuring_status_str(st),
                  st != GPURING_ERR_TIMEOUT ? ""
                  : " (a peer that did not make the matching call, or made it with "
                    "buffers of another memory kind -- host on some ranks, device on "
                    "others -- is waited for until the timeout; "
                    "coll_gpuring_agree_memory=1 makes such calls fall back)");
    return mca_coll_gpuring_status_to_ompi(st);
}

int mca_coll_gpuring_allreduce(const void *sbuf, void *rbuf, int count,
                               struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpuring_module_t *m = (mca_coll_gpuring_module_t *)module;
    const void *src = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    allreduce_call_t call;
    gpuring_status_t st;
    int rc = OMPI_SUCCESS;

    switch (allreduce_begin(m, "allreduce", src, rbuf, count, dtype, op, comm, &call, &rc)) {
    case ALLREDUCE_NOTHING:
        return OMPI_SUCCESS;
    case ALLREDUCE_ERROR:
        return rc;
    case ALLREDUCE_FALLBACK:
        __atomic_fetch_add(&mca_coll_gpuring_component.fallbacks, 1, __ATOMIC_RELAXED);
        return mca_coll_gpuring_allreduce_below(sbuf, rbuf, count, dtype, op, comm, module);
    }
    st = gpuring_comm_allreduce(call.gcomm, call.plane, src, rbuf, (size_t)count, call.type,
                                call.op);
    allreduce_end(&call);
    if (st != GPURING_OK) {
        return mca_coll_gpuring_allreduce_failed("allreduce", st, count, call.type, call.plane,
                                                 comm);
    }
    return OMPI_SUCCESS;
}

int mca_coll_gpuring_iallreduce(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, ompi_request_t **request,
                                mca_coll_base_module_t *module)
{
    mca_coll_gpuring_module_t *m = (mca_coll_gpuring_module_t *)module;
    const void *src = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    mca_coll_gpuring_request_t *req;
    allreduce_call_t call;
    gpuring_status_t st;
    int rc = OMPI_SUCCESS;

    switch (allreduce_begin(m, "iallreduce", src, rbuf, count, dtype, op, comm, &call, &rc)) {
    case ALLREDUCE_NOTHING:
        *request = &ompi_request_empty; /* complete, and never freed */
        return OMPI_SUCCESS;
    case ALLREDUCE_ERROR:
        return rc;
    case ALLREDUCE_FALLBACK:
        __atomic_fetch_add(&mca_coll_gpuring_component.fallbacks, 1, __ATOMIC_RELAXED);
        return mca_coll_gpuring_iallreduce_below(sbuf, rbuf, count, dtype, op, comm, request,
                                                 module);
    }
    req = mca_coll_gpuring_request_new(comm, "iallreduce", count, call.type, call.plane);
    if (req == NULL) {
        allreduce_end(&call);
        return OMPI_ERR_OUT_OF_RESOURCE; /* before the call: no rank has begun it */
    }
    st = gpuring_comm_iallreduce(call.gcomm, call.plane, src, rbuf, (size_t)count, call.type,
                                 call.op, mca_coll_gpuring_request_done, req);
    allreduce_end(&call);
    if (st != GPURING_OK) {
        mca_coll_gpuring_request_drop(req);
        return mca_coll_gpuring_allreduce_failed("iallreduce", st, count, call.type,
                                                 call.plane, comm);
    }
    *request = &req->super;
    return OMPI_SUCCESS;
}
