/*
 * coll_gpuring_entry.c -- what every MPI entry point of gpuring shares
 * (coll_gpuring_<coll>.c): MPI types and ops to gpuring's, the plane of the
 * buffers' memory, the parameters' agreement at the communicator's first
 * call, the coll_gpuring_agree_memory agreement, the lazy communicator
 * setup, the plane's connections, the call (with the application's GPU given
 * back), the error report, and the counts of calls handed to the component
 * below.
 *
 * Every check depends only on arguments MPI requires to match across ranks,
 * on parameters the ranks have found alike (mca_coll_gpuring_params_agree),
 * and on the memory kind, which CUDA-aware MPI users keep alike on every
 * rank -- or which the ranks agree on first (coll_gpuring_agree_memory) --
 * so all ranks take the same path.  The way below stages device buffers
 * through host memory (coll_gpuring_below.c).
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include <stdarg.h>
#include <stdio.h>

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"

#include "kernels/device.h"
#include "kernels/memkind.h"

static const gpuring_type_t entry_sint[9] = {
    [1] = GPURING_TYPE_INT8, [2] = GPURING_TYPE_INT16,
    [4] = GPURING_TYPE_INT32, [8] = GPURING_TYPE_INT64};
static const gpuring_type_t entry_uint[9] = {
    [1] = GPURING_TYPE_UINT8, [2] = GPURING_TYPE_UINT16,
    [4] = GPURING_TYPE_UINT32, [8] = GPURING_TYPE_UINT64};

static int entry_op_logical(gpuring_op_t op)
{
    return op == GPURING_OP_LAND || op == GPURING_OP_LOR || op == GPURING_OP_LXOR;
}

/* Fortran's predefined types, which a Fortran program's calls (CUDA Fortran, OpenACC)
 * bring as these C handles, by their size in this Open MPI's Fortran: INTEGER with
 * the ops MPI allows on it (not the logical ones), REAL and DOUBLE PRECISION, LOGICAL
 * with the logical ops only -- 0 false, anything else true, the result 0 or 1, as
 * Open MPI's own reductions take it.  `size` is 1, 2, 4 or 8 (entry_map_type
 * refuses the others: size 0 where Open MPI was built without Fortran). */
static int entry_map_fortran(struct ompi_datatype_t *dt, gpuring_op_t op, size_t size,
                             gpuring_type_t *type_p)
{
    const int integer = dt == MPI_INTEGER
#ifdef MPI_INTEGER1
                        || dt == MPI_INTEGER1
#endif
#ifdef MPI_INTEGER2
                        || dt == MPI_INTEGER2
#endif
#ifdef MPI_INTEGER4
                        || dt == MPI_INTEGER4
#endif
#ifdef MPI_INTEGER8
                        || dt == MPI_INTEGER8
#endif
        ;
    const int logical = dt == MPI_LOGICAL
#ifdef MPI_LOGICAL1
                        || dt == MPI_LOGICAL1
#endif
#ifdef MPI_LOGICAL2
                        || dt == MPI_LOGICAL2
#endif
#ifdef MPI_LOGICAL4
                        || dt == MPI_LOGICAL4
#endif
#ifdef MPI_LOGICAL8
                        || dt == MPI_LOGICAL8
#endif
        ;
    const int real = dt == MPI_REAL || dt == MPI_DOUBLE_PRECISION
#ifdef MPI_REAL4
                     || dt == MPI_REAL4
#endif
#ifdef MPI_REAL8
                     || dt == MPI_REAL8
#endif
        ;

    if ((integer && !entry_op_logical(op)) || (logical && entry_op_logical(op))) {
        *type_p = entry_sint[size];
    } else if (real && (size == 4 || size == 8)) {
        *type_p = size == 4 ? GPURING_TYPE_FLOAT : GPURING_TYPE_DOUBLE;
    } else {
        return 0;
    }
    return 1;
}

/* MPI's C integer and floating types gpuring reduces, by size.  MPI_CHAR is a
 * signed integer of its size, as in Open MPI's ops, whatever the platform's char
 * (aarch64's and POWER's is unsigned); MPI_C_BOOL takes only the logical ops
 * (MPI allows no others on it), whose 0/1 results are the bool's; fp16 where
 * the MPI library names it (coll_gpuring_compat.h); then Fortran's. */
static int entry_map_type(struct ompi_datatype_t *dt, gpuring_op_t op, gpuring_type_t *type_p)
{
    size_t size;

    if (!ompi_datatype_is_predefined(dt)) return 0;
    ompi_datatype_type_size(dt, &size);
    /* (a predefined handle the compiler had no type for has size 0) */
    if (size != 1 && size != 2 && size != 4 && size != 8) return 0;
    if (dt == MPI_FLOAT && size == 4) { /* the common ones first: every call asks */
        *type_p = GPURING_TYPE_FLOAT;
    } else if (dt == MPI_DOUBLE && size == 8) {
        *type_p = GPURING_TYPE_DOUBLE;
#if defined(MCA_COLL_GPURING_MPI_FLOAT16)
    } else if (dt == MCA_COLL_GPURING_MPI_FLOAT16 && size == 2) {
        *type_p = GPURING_TYPE_FLOAT16;
#endif
    } else if (dt == MPI_SIGNED_CHAR || dt == MPI_SHORT || dt == MPI_INT || dt == MPI_LONG ||
        dt == MPI_LONG_LONG_INT || dt == MPI_INT8_T || dt == MPI_INT16_T ||
        dt == MPI_INT32_T || dt == MPI_INT64_T || dt == MPI_AINT || dt == MPI_OFFSET ||
        dt == MPI_COUNT || dt == MPI_CHAR) {
        *type_p = entry_sint[size];
    } else if (dt == MPI_UNSIGNED_CHAR || dt == MPI_UNSIGNED_SHORT || dt == MPI_UNSIGNED ||
               dt == MPI_UNSIGNED_LONG || dt == MPI_UNSIGNED_LONG_LONG || dt == MPI_UINT8_T ||
               dt == MPI_UINT16_T || dt == MPI_UINT32_T || dt == MPI_UINT64_T) {
        *type_p = entry_uint[size];
    } else if (dt == MPI_C_BOOL && size == 1 && entry_op_logical(op)) {
        *type_p = GPURING_TYPE_UINT8;
    } else if (dt == MPI_BYTE && (op == GPURING_OP_BAND || op == GPURING_OP_BOR ||
                                  op == GPURING_OP_BXOR)) {
        *type_p = GPURING_TYPE_UINT8; /* MPI allows only the bitwise ops on bytes */
    } else {
        return entry_map_fortran(dt, op, size, type_p);
    }
    return 1;
}

static int entry_map_op(struct ompi_op_t *op, gpuring_op_t *op_p)
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

int mca_coll_gpuring_map_reduction(gpuring_coll_kind_t coll, struct ompi_datatype_t *dtype,
                                   struct ompi_op_t *op, gpuring_type_t *type_p,
                                   gpuring_op_t *op_p)
{
    if (!entry_map_op(op, op_p)) {
        mca_coll_gpuring_log_fallback("%s fallback: op %s is not handled",
                                      gpuring_coll_names[coll], op->o_name);
        return 0;
    }
    if (!entry_map_type(dtype, *op_p, type_p) || !gpuring_op_supported(*type_p, *op_p)) {
        mca_coll_gpuring_log_fallback("%s fallback: datatype %s with op %s is not handled",
                                      gpuring_coll_names[coll],
                                      mca_coll_gpuring_dt_name(dtype),
                                      op->o_name);
        return 0;
    }
    return 1;
}

const char *mca_coll_gpuring_dt_name(const struct ompi_datatype_t *dt)
{
    return dt->name[0] != '\0' ? dt->name : "(unnamed)";
}

const char *mca_coll_gpuring_comm_name(const mca_coll_gpuring_module_t *m)
{
    return m->comm->c_name[0] != '\0' ? m->comm->c_name : m->unnamed;
}

void mca_coll_gpuring_comm_unnamed(const struct ompi_communicator_t *comm, char *buf,
                                   size_t size)
{
    snprintf(buf, size, "(unnamed, cid %u)", (unsigned)MCA_COLL_GPURING_COMM_CID(comm));
}

const char *mca_coll_gpuring_comm_label(const struct ompi_communicator_t *comm, char *buf,
                                        size_t size)
{
    if (comm->c_name[0] != '\0') return comm->c_name;
    mca_coll_gpuring_comm_unnamed(comm, buf, size);
    return buf;
}

int mca_coll_gpuring_bad_count(const mca_coll_gpuring_module_t *m, gpuring_coll_kind_t coll,
                               int nonblocking, int count)
{
    GPURING_ERROR(GPURING_SUBSYS_COLL, "%s%s on comm %s (rank %d) with count %d "
                  "(MPI_ERR_COUNT)", nonblocking ? "non-blocking " : "",
                  gpuring_coll_names[coll], mca_coll_gpuring_comm_name(m),
                  ompi_comm_rank(m->comm), count);
    return MPI_ERR_COUNT;
}

void mca_coll_gpuring_fallback_count(gpuring_coll_kind_t coll)
{
    __atomic_fetch_add(&mca_coll_gpuring_component.fallbacks[coll], 1, __ATOMIC_RELAXED);
}

/* The fallback lines this process has logged at verbose 3, by a hash of
 * their text (0: a free entry).  An application that passes host buffers
 * with gpuring loaded hands every call below: one line per reason, not per
 * call.  Past this many distinct lines, the rest only at verbose 4. */
#define ENTRY_FALLBACK_SEEN 256
static uint64_t entry_fallback_seen[ENTRY_FALLBACK_SEEN];

/* Is this the first time the line hashed to `h` (not 0) is logged?  (lock-free:
 * MPI_THREAD_MULTIPLE callers may fall back at once) */
static int entry_fallback_first(uint64_t h)
{
    for (unsigned i = 0; i < ENTRY_FALLBACK_SEEN; i++) {
        uint64_t *e = &entry_fallback_seen[(h + i) % ENTRY_FALLBACK_SEEN];
        uint64_t v = __atomic_load_n(e, __ATOMIC_ACQUIRE);

        if (v == 0 &&
            __atomic_compare_exchange_n(e, &v, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return 1;
        if (v == h) return 0; /* (a failed exchange left the winner's hash in v) */
    }
    return 0; /* full */
}

void mca_coll_gpuring_log_fallback(const char *fmt, ...)
{
    char msg[512];
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    va_list ap;

    if (!GPURING_LOG_ENABLED(GPURING_LOG_INFO, GPURING_SUBSYS_COLL)) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    for (const char *p = msg; *p != '\0'; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    if (entry_fallback_first(h | 1)) {
        GPURING_INFO(GPURING_SUBSYS_COLL, "%s (this line once; each such call at "
                     "coll_gpuring_verbose 4)", msg);
    } else {
        GPURING_DEBUG(GPURING_SUBSYS_COLL, "%s", msg);
    }
}

/*
 * The plane this rank's buffers would run on, or -1 (the component below,
 * with *why_p saying why): the buffers' memory kind and the parameters.
 * out NULL: only in is significant on this rank.  *host_p: every significant
 * buffer is host memory (a fallback then needs no staging).  Managed memory
 * (with coll_gpuring_managed_buffers) is device memory of its GPU: a call may
 * pass it beside cudaMalloc'd memory of that GPU, and does on one plane.
 */
static int entry_plane(const void *in, const void *out, int *device_p, const char **why_p,
                       int *host_p)
{
    gpuring_mem_kind_t kinds[2];
    int devices[2], other_ctx[2], managed;

    gpuring_mem_kind_both(in, out != NULL ? out : in, kinds, devices, other_ctx);
    *device_p = devices[0];
    *host_p = kinds[0] == GPURING_MEM_HOST && kinds[1] == GPURING_MEM_HOST;
    managed = kinds[0] == GPURING_MEM_MANAGED || kinds[1] == GPURING_MEM_MANAGED;
    if ((kinds[0] == GPURING_MEM_HOST) != (kinds[1] == GPURING_MEM_HOST) ||
        devices[1] != devices[0]) {
        *why_p = "send and receive buffers are different kinds of memory (host and device) or "
                 "on different GPUs";
    } else if (other_ctx[0] || other_ctx[1]) {
        *why_p = "device memory of a CUDA context other than its GPU's primary one "
                 "(cuCtxCreate, as PyCUDA's make_context): gpuring's kernels run in the "
                 "primary context, which cannot reach it";
    } else if (managed && !mca_coll_gpuring_component.managed_buffers) {
        *why_p = "managed memory (set coll_gpuring_managed_buffers=1 to run it in gpuring)";
    } else if (*host_p && !mca_coll_gpuring_component.host_buffers) {
        *why_p = "host buffers (set coll_gpuring_host_buffers=1 to run them in gpuring)";
    } else if (!*host_p && *device_p < 0) {
        *why_p = "the CUDA driver names no GPU for this memory";
    } else {
        return *host_p ? GPURING_PLANE_HOST : GPURING_PLANE_DEVICE;
    }
    return -1;
}

int mca_coll_gpuring_out_apart(const void *in, const void *out)
{
    const char *why = NULL;
    int device, host;

    /* both buffers first: the common case (one kind) takes one look */
    return out != NULL && out != in && entry_plane(in, out, &device, &why, &host) < 0 &&
           entry_plane(in, NULL, &device, &why, &host) >= 0;
}

/* The communicator's ranks have different parameters: every call falls back. */
static void entry_params_differ(mca_coll_gpuring_module_t *m, gpuring_coll_kind_t coll)
{
    mca_coll_gpuring_log_fallback("%s fallback: comm %s's ranks have different coll_gpuring "
                                  "parameters", gpuring_coll_names[coll],
                                  mca_coll_gpuring_comm_name(m));
}

/*
 * Does this rank's call wait for the parameters' agreement (every rank's first call
 * starts it)?  Where the answer decides it: its buffers are gpuring's (`plane`), or a
 * blocking call agrees on the kinds of memory (coll_gpuring_agree_memory: ranks make
 * that exchange only where their parameters are alike).  Elsewhere the call goes
 * below whatever the answer and waits for no rank: a rank late to a job's first
 * collective on host buffers (gpuring's default) is not a failure of gpuring's.
 */
static int entry_needs_params(int plane, int blocking)
{
    return plane >= 0 || (blocking && mca_coll_gpuring_component.agree_memory);
}

int mca_coll_gpuring_kind_declined(mca_coll_gpuring_module_t *m, gpuring_coll_kind_t coll,
                                   const void *buf)
{
    const char *why = NULL;
    int device, host, plane = entry_plane(buf, NULL, &device, &why, &host);

    mca_coll_gpuring_params_post(m);
    if (!entry_needs_params(plane, 1)) {
        mca_coll_gpuring_log_fallback("%s fallback: %s", gpuring_coll_names[coll], why);
        return 1;
    }
    switch (mca_coll_gpuring_params_agree(m)) {
    case MCA_COLL_GPURING_PARAMS_DIFFER:
        entry_params_differ(m, coll);
        return 1;
    default:
        return 0; /* alike, or the agreement failed: call_run fails the call */
    }
}

/* coll_gpuring_agree_memory: did every rank choose `plane` (*alike)?  One exchange of
 * gpuring's, waited for as its setup's are, on every rank at every blocking call (a
 * communicator gpuring failed too: ranks whose buffers go below anyway must learn that
 * the others' do not): GPURING_OK, or the error (logged) that fails the call -- a rank
 * that fell back there would wait below for a rank that came late and found the answer.
 * (The late rank's call then fails at its own timeout, in gpuring; the next call's
 * agreement pairs again.) */
static gpuring_status_t entry_planes_agree(mca_coll_gpuring_module_t *m, int plane, int *alike)
{
    const int n = ompi_comm_size(m->comm);
    int32_t mine = plane, *all = malloc(sizeof(int32_t) * (size_t)n);
    gpuring_status_t st;

    *alike = 0;
    if (all == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "comm %s: no memory for gpuring's agreement on the "
                      "kind of memory (coll_gpuring_agree_memory)",
                      mca_coll_gpuring_comm_name(m));
        mca_coll_gpuring_exchange_skip(m);
        st = GPURING_ERR_NO_MEMORY;
    } else {
        st = mca_coll_gpuring_exchange_wait(m, &mine, all, sizeof(mine),
                                            "agreement on the kind of memory "
                                            "(coll_gpuring_agree_memory)", 0);
    }
    if (st == GPURING_OK) {
        *alike = 1;
        for (int r = 1; r < n; r++) *alike &= all[r] == all[0];
    }
    free(all);
    return st;
}

/* A non-blocking call's communicator setup failed: what may have held it up. */
static void entry_setup_hint(const mca_coll_gpuring_module_t *m)
{
    GPURING_ERROR(GPURING_SUBSYS_COLL, "comm %s's setup was made by a non-blocking call "
                  "(MPI_Iallreduce, rank %d), and it waits for every rank to make that call: a "
                  "rank held up in point-to-point traffic that this rank serves only after "
                  "starting the call cannot join it.  Make a blocking collective on the "
                  "communicator first, or set coll_gpuring_nonblocking_setup=0",
                  mca_coll_gpuring_comm_name(m), ompi_comm_rank(m->comm));
}

/* The communicator's first call that needs the answer (entry_needs_params): its
 * ranks' parameters agree (mca_coll_gpuring_params_agree) before any rank decides
 * anything by its own (call_run says what a non-blocking call decides first).  OMPI_SUCCESS:
 * they do; `fallback` where they differ; the MPI error where the agreement failed
 * (logged; with the setup hint where this non-blocking call is the communicator's
 * `first`). */
static int entry_params_alike(mca_coll_gpuring_module_t *m, struct ompi_communicator_t *comm,
                              const mca_coll_gpuring_call_t *c, int fallback, int first)
{
    switch (mca_coll_gpuring_params_agree(m)) {
    case MCA_COLL_GPURING_PARAMS_ALIKE:
        return OMPI_SUCCESS;
    case MCA_COLL_GPURING_PARAMS_DIFFER:
        entry_params_differ(m, c->coll);
        return fallback;
    default:
        if (c->request != NULL && first) entry_setup_hint(m);
        return mca_coll_gpuring_status_to_ompi(GPURING_ERR_BROKEN); /* logged there */
    }
}

/* The call on the plane's connections (gpuring_comm.h); a non-blocking one
 * started, ending through `req`. */
static gpuring_status_t entry_call(gpuring_comm_t *gcomm, gpuring_plane_t plane,
                                   const mca_coll_gpuring_call_t *c,
                                   mca_coll_gpuring_request_t *req)
{
    if (req != NULL) {
        return gpuring_comm_iallreduce(gcomm, plane, c->sendbuf, c->recvbuf, c->count, c->type,
                                       c->op, mca_coll_gpuring_request_done, req);
    }
    switch (c->coll) {
    case GPURING_COLL_REDUCE_SCATTER:
        return gpuring_comm_reduce_scatter(gcomm, plane, c->sendbuf, c->recvbuf, c->count,
                                           c->type, c->op);
    case GPURING_COLL_ALLGATHER:
        return gpuring_comm_allgather(gcomm, plane, c->sendbuf, c->recvbuf, c->count);
    case GPURING_COLL_BCAST:
        return gpuring_comm_bcast(gcomm, plane, c->recvbuf, c->count, c->root);
    case GPURING_COLL_REDUCE:
        return gpuring_comm_reduce(gcomm, plane, c->sendbuf, c->recvbuf, c->count, c->type,
                                   c->op, c->root);
    case GPURING_COLL_ALLREDUCE:
    default:
        return gpuring_comm_allreduce(gcomm, plane, c->sendbuf, c->recvbuf, c->count, c->type,
                                      c->op);
    }
}

int mca_coll_gpuring_call_run(mca_coll_gpuring_module_t *m, struct ompi_communicator_t *comm,
                              mca_coll_gpuring_call_t *c)
{
    const char *name = gpuring_coll_names[c->coll];
    const char *why = NULL;
    gpuring_device_saved_t app = {0, NULL};
    mca_coll_gpuring_request_t *req = NULL;
    gpuring_comm_t *gcomm;
    gpuring_status_t ready, st, fail = c->fail;
    int plane, device, host, fallback, was_new, defer, first;

    GPURING_PROF_BEGIN();
    c->ran = 0;
    plane = entry_plane(c->sendbuf, c->recvbuf, &device, &why, &host);
    fallback = host ? MCA_COLL_GPURING_FALLBACK_HOST : MCA_COLL_GPURING_FALLBACK;
    /* A call goes below without waiting for any other rank where this rank hands it
     * below anyway (its buffers' kind, entry_needs_params); a non-blocking one also
     * where agreeing on the kind of memory would wait (coll_gpuring_agree_memory),
     * and where it would make the communicator's setup with
     * coll_gpuring_nonblocking_setup off.  It starts the parameters' agreement all
     * the same, as every rank's first call does, and leaves it in flight; the next
     * call that needs its answer waits for it. */
    first = m->params == MCA_COLL_GPURING_PARAMS_UNSEEN;
    mca_coll_gpuring_params_post(m);
    defer = c->request != NULL && !mca_coll_gpuring_component.nonblocking_setup;
    if (c->request != NULL && mca_coll_gpuring_component.agree_memory) {
        plane = -1;
        why = "a non-blocking call cannot agree on the kind of memory without waiting for "
              "every rank (coll_gpuring_agree_memory 1)";
    } else if (c->request != NULL && plane >= 0 && defer &&
               m->state == MCA_COLL_GPURING_COMM_NEW) {
        mca_coll_gpuring_log_fallback("%s fallback: comm %s is not set up yet, and a "
                                      "non-blocking call does not set it up "
                                      "(coll_gpuring_nonblocking_setup 0): its first "
                                      "blocking gpuring call will", name,
                                      mca_coll_gpuring_comm_name(m));
        return fallback;
    } else if (entry_needs_params(plane, c->request == NULL) &&
               m->params != MCA_COLL_GPURING_PARAMS_ALIKE) {
        /* before any decision by this rank's own parameters */
        int rc = entry_params_alike(m, comm, c, fallback, first);
        if (rc != OMPI_SUCCESS) return rc;
    }
    /* (a blocking call: every rank agrees, whatever its own plane) */
    if (c->request == NULL && mca_coll_gpuring_component.agree_memory) {
        int alike;

        st = entry_planes_agree(m, plane, &alike);
        if (st != GPURING_OK) return mca_coll_gpuring_status_to_ompi(st);
        if (!alike) {
            plane = -1;
            why = "ranks passed different kinds of memory (host on some, device on others) or "
                  "not all can run it";
        }
    }
    GPURING_PROF_MARK(GPURING_PROF_MEMKIND);
    if (plane < 0) {
        mca_coll_gpuring_log_fallback("%s fallback: %s", name, why);
        return fallback;
    }
    was_new = m->state == MCA_COLL_GPURING_COMM_NEW;
    gcomm = mca_coll_gpuring_comm_get(m);
    if (gcomm == NULL && m->state == MCA_COLL_GPURING_COMM_FAILED) {
        if (c->request != NULL && was_new) entry_setup_hint(m);
        return mca_coll_gpuring_status_to_ompi(GPURING_ERR_BROKEN); /* setup failed: logged there */
    }
    if (gcomm == NULL) {
        /* (why: logged once, at the setup) */
        mca_coll_gpuring_log_fallback("%s fallback: comm %s: gpuring's setup left it to the "
                                      "component below", name, mca_coll_gpuring_comm_name(m));
        return fallback;
    }
    gpuring_comm_arrive(gcomm, c->count);
    if (defer && !gpuring_comm_plane_tried(gcomm, (gpuring_plane_t)plane)) {
        mca_coll_gpuring_log_fallback("%s fallback: no %s connections on comm %s yet, "
                                      "and a non-blocking call does not make them "
                                      "(coll_gpuring_nonblocking_setup 0): its first "
                                      "blocking call on such buffers will", name,
                                      plane == GPURING_PLANE_HOST ? "host" : "device",
                                      mca_coll_gpuring_comm_name(m));
        return fallback;
    }
    if (c->request != NULL && fail == GPURING_OK) {
        req = mca_coll_gpuring_request_new(m, gcomm, c, (gpuring_plane_t)plane);
        if (req == NULL) {
            GPURING_ERROR(GPURING_SUBSYS_COLL, "non-blocking %s on comm %s (rank %d): no memory "
                          "for its request: this rank gives up on the call", name,
                          mca_coll_gpuring_comm_name(m), ompi_comm_rank(comm));
            fail = GPURING_ERR_NO_MEMORY;
        }
    }
    /* the device calls below make gpuring's GPU current: give the application back its own */
    if (plane == GPURING_PLANE_DEVICE) app = gpuring_device_save();
    ready = gpuring_comm_plane_ready(gcomm, plane, device);
    GPURING_PROF_MARK(GPURING_PROF_DEVICE);
    /* the plane cannot run this rank's call though its peers' may (its buffers are
     * another GPU's memory; or the communicator broke in the plane's exchanges): it
     * abandons the call as one it cannot start, and its peers are told */
    if (ready != GPURING_OK && ready != GPURING_ERR_NOT_SUPPORTED && fail == GPURING_OK)
        fail = ready;
    if (ready == GPURING_ERR_NOT_SUPPORTED) {
        st = ready;
    } else if (fail != GPURING_OK) { /* the peers run it: they are told */
        st = gpuring_comm_abandon(gcomm, plane, c->coll, c->count, c->type, c->op, c->root,
                                  c->request != NULL, fail);
    } else {
        st = entry_call(gcomm, plane, c, req);
        c->ran = st != GPURING_ERR_BROKEN; /* (refused: the communicator failed before) */
    }
    if (plane == GPURING_PLANE_DEVICE) gpuring_device_restore(app);
    if (st != GPURING_OK && req != NULL) mca_coll_gpuring_request_drop(req); /* not started */
    if (ready == GPURING_ERR_NOT_SUPPORTED) {
        mca_coll_gpuring_log_fallback("%s fallback: no %s connections on comm %s", name,
                                      plane == GPURING_PLANE_HOST ? "host" : "device",
                                      mca_coll_gpuring_comm_name(m));
        return fallback;
    }
    if (st != GPURING_OK)
        return mca_coll_gpuring_call_failed(c, plane, mca_coll_gpuring_comm_name(m),
                                            ompi_comm_rank(comm),
                                            __atomic_load_n(&gcomm->broken, __ATOMIC_ACQUIRE),
                                            st);
    if (req != NULL) *c->request = &req->super.super;
    GPURING_PROF_MARK(GPURING_PROF_RETURN);
    GPURING_PROF_END(req == NULL ? plane : -1);
    return OMPI_SUCCESS;
}

int mca_coll_gpuring_call_failed(const mca_coll_gpuring_call_t *c, gpuring_plane_t plane,
                                 const char *comm_name, int rank, int broken,
                                 gpuring_status_t st)
{
    /* the copies (bcast, allgather) count bytes */
    const int bytes = c->coll == GPURING_COLL_BCAST || c->coll == GPURING_COLL_ALLGATHER;

    GPURING_ERROR(GPURING_SUBSYS_COLL,
                  "%s%s of %zu %s on %s buffers on comm %s (rank %d) failed: %s; %s%s",
                  c->request != NULL ? "non-blocking " : "", gpuring_coll_names[c->coll],
                  c->count, bytes ? "bytes" : gpuring_type_name(c->type),
                  plane == GPURING_PLANE_HOST ? "host" : "device",
                  comm_name, rank,
                  gpuring_status_str(st),
                  broken ? "the communicator cannot be used by gpuring any more"
                         : "this rank's failure alone: its peers' calls stand, and the "
                           "communicator goes on",
                  st != GPURING_ERR_TIMEOUT ? ""
                  : " (a peer that did not make the matching call, or made it with "
                    "buffers of another memory kind -- host on some ranks, device on "
                    "others -- is waited for until the timeout; "
                    "coll_gpuring_agree_memory=1 makes such calls fall back)");
    return mca_coll_gpuring_status_to_ompi(st);
}
