/*
 * coll_gpuring_pack.c -- the bytes of the elements a call moves as a copy of
 * bytes (MPI_Bcast, MPI_Allgather), whatever the datatype.
 *
 * MPI asks only that the ranks' type signatures match: one rank may pass 4
 * MPI_INT where another passes 1 of a contiguous type of 4 ints, or a vector
 * with holes.  Whether gpuring runs the call must then not depend on the
 * datatype (the ranks would part ways: some in gpuring, some below), so every
 * rank takes it by its signature's bytes.  Where the elements are one
 * contiguous run, gpuring runs on them in place; otherwise this rank packs them
 * into contiguous memory of the same kind (Open MPI's convertor; device memory,
 * and managed memory that gpuring runs as device memory, through a host copy of
 * the span, the holes' bytes kept, into device memory the application's CUDA
 * driver allocates, as staging copies through it), the call runs there, and
 * what it received is unpacked.  A rank that cannot pack (no
 * memory) still takes part: its peers run the call, so it abandons it to them
 * (call_run), and all fail at once.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "opal/datatype/opal_convertor.h"

#include "kernels/devcopy.h"
#include "kernels/memkind.h"

size_t mca_coll_gpuring_signature_bytes(struct ompi_datatype_t *dt, size_t count)
{
    size_t size;

    ompi_datatype_type_size(dt, &size);
    return count * size;
}

void *mca_coll_gpuring_contiguous(const void *buf, size_t count, struct ompi_datatype_t *dt)
{
    ptrdiff_t true_lb, true_extent;

    /* Open MPI's test is the same for every count from 2 (contiguous, without gaps):
     * asked for at most 2, so that a count past INT32_MAX (an allgather's receive
     * count times the ranks) is taken in place too, not packed through a copy */
    if (!ompi_datatype_is_contiguous_memory_layout(dt, count > 2 ? 2 : (int32_t)count))
        return NULL;
    ompi_datatype_get_true_extent(dt, &true_lb, &true_extent);
    return mca_coll_gpuring_at(buf, true_lb);
}

/* count elements of dt at base to or from len packed bytes at bytes */
static int pack_convert(int pack, struct ompi_datatype_t *dt, size_t count, void *base,
                        void *bytes, size_t len)
{
    opal_convertor_t conv;
    struct iovec iov = {.iov_base = bytes, .iov_len = len};
    uint32_t n = 1;
    size_t moved = len;
    int32_t rc;

    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    rc = pack ? opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor, &dt->super,
                                                         count, base, 0, &conv)
              : opal_convertor_copy_and_prepare_for_recv(ompi_mpi_local_convertor, &dt->super,
                                                         count, base, 0, &conv);
    if (rc == OPAL_SUCCESS)
        rc = pack ? opal_convertor_pack(&conv, &iov, &n, &moved)
                  : opal_convertor_unpack(&conv, &iov, &n, &moved);
    OBJ_DESTRUCT(&conv);
    return rc >= 0 && moved == len ? OMPI_SUCCESS : OMPI_ERROR;
}

/* Elements of this kind are packed into device memory of their GPU: device
 * memory, and managed memory where gpuring runs it as device memory
 * (coll_gpuring_managed_buffers), so that the packed bytes take the plane the
 * elements themselves would where another rank's datatype is contiguous. */
static int pack_on_device(gpuring_mem_kind_t kind)
{
    return kind == GPURING_MEM_DEVICE ||
           (kind == GPURING_MEM_MANAGED && mca_coll_gpuring_component.managed_buffers);
}

/* Everything but the call's bytes where `keep` (they may still be written): device
 * memory, or the host bytes themselves where the elements are packed on the host. */
static void pack_free(mca_coll_gpuring_packed_t *p, int keep)
{
    if (p->device >= 0 && !keep) gpuring_devcopy_free(p->bytes, p->pooled);
    if (!mca_coll_gpuring_span_own_image(&p->span)) free(p->image);
    mca_coll_gpuring_span_release(&p->span, p->image);
    if (p->device >= 0 || !keep) free(p->host);
    memset(p, 0, sizeof(*p));
}

/* Where the convertor finds the elements: in the host image of their span where they
 * have one, else at p->buf itself */
static void *pack_elements(const mca_coll_gpuring_packed_t *p)
{
    return p->image != NULL ? mca_coll_gpuring_at(p->image, -p->span.lo) : p->buf;
}

int mca_coll_gpuring_pack(mca_coll_gpuring_module_t *m, mca_coll_gpuring_packed_t *p,
                          gpuring_coll_kind_t coll, void *buf, size_t count,
                          struct ompi_datatype_t *dt, int in)
{
    mca_coll_gpuring_stage_buf_t *span = &p->span;
    const char *why = "no memory";
    gpuring_status_t fail = GPURING_ERR_NO_MEMORY;
    void *first;
    int device = -1, pieced;

    memset(p, 0, sizeof(*p));
    p->m = m;
    p->coll = coll;
    p->buf = buf;
    p->count = count;
    p->dt = dt;
    p->device = -1;
    p->len = mca_coll_gpuring_signature_bytes(dt, count);
    /* the bytes the elements span (holes included), and whose memory they are */
    mca_coll_gpuring_stage_span(span, buf, MCA_COLL_GPURING_STAGE_INOUT, count, dt);
    /* the elements' memory (no span: the process has no device memory, buf is host
     * memory) */
    first = span->dir != 0 ? mca_coll_gpuring_at(buf, span->lo) : buf;
    /* packed bytes that call_run would hand below (it tells from their kind, which is
     * the elements'): the component below takes the elements as they are */
    if (mca_coll_gpuring_kind_declined(m, coll, first)) return MCA_COLL_GPURING_FALLBACK;
    if (span->dir != 0 && pack_on_device(gpuring_mem_kind(first, &device))) p->device = device;
    /* blocks in several allocations (MPI_BOTTOM with absolute addresses): in pieces */
    if (span->dir != 0 && mca_coll_gpuring_span_classify(span, &why) != 0) {
        fail = GPURING_ERR_INVALID;
        goto fail;
    }
    p->pieced = span->npieces > 0;
    p->host = malloc(p->len);
    if (p->host == NULL) goto fail;
    if (p->device >= 0 || span->npieces > 0) {
        /* a host image of the span: packed from (its bytes copied in where they are read),
         * and unpacked into -- the copy back writes only the datatype's blocks, so a
         * receiver's image needs none of the span's bytes (a hull far larger than its
         * blocks is never touched but at the blocks): it waits instead for the
         * application's work queued on the span before the call */
        p->image = mca_coll_gpuring_span_own_image(span) ? mca_coll_gpuring_span_image_new(span)
                                                         : malloc(span->bytes);
        if (p->image == NULL) goto fail;
        fail = mca_coll_gpuring_span_take(span, p->image, 0, in, &why);
        if (fail != GPURING_OK) goto fail;
    }
    if (in && pack_convert(1, dt, count, pack_elements(p), p->host, p->len) != OMPI_SUCCESS)
        goto bad;
    if (p->device < 0) {
        p->bytes = p->host;
    } else {
        fail = gpuring_devcopy_alloc(first, p->len, &p->bytes, &p->pooled, &why);
        if (fail != GPURING_OK) goto fail;
        why = "cannot copy the packed bytes to the device";
        if (in) fail = gpuring_devcopy(p->bytes, p->host, p->len, 0, &why);
        if (fail != GPURING_OK) goto fail;
    }
    GPURING_DEBUG(GPURING_SUBSYS_COLL, "%s: %zu elements of a non-contiguous datatype packed "
                  "into %zu bytes of %s memory", gpuring_coll_names[coll], count, p->len,
                  p->device >= 0 ? "device" : "host");
    return OMPI_SUCCESS;

bad:
    why = "Open MPI's convertor failed";
    fail = GPURING_ERR_INVALID;
fail:
    GPURING_ERROR(GPURING_SUBSYS_COLL, "%s on comm %s: cannot pack %zu elements of datatype "
                  "%s (%zu bytes of %s memory) into contiguous bytes: %s",
                  gpuring_coll_names[coll], mca_coll_gpuring_comm_name(m), count,
                  mca_coll_gpuring_dt_name(dt), p->len, p->device >= 0 ? "device" : "host", why);
    /* memory of the kind the packed bytes would be of, which picks the call's plane: the
     * elements' own where they would be packed into device memory (the same GPU and
     * context), this descriptor (host memory) where the bytes would be host memory */
    first = p->device >= 0 ? first : (void *)p;
    /* (elements in host and device memory whose walk failed: pieced too) */
    pieced = p->pieced || (span->dir != 0 && span->device && p->device < 0);
    pack_free(p, 0);
    p->pieced = pieced;
    p->fail = fail;
    p->first = first;
    return OMPI_SUCCESS;
}

int mca_coll_gpuring_packed_fallback(const mca_coll_gpuring_packed_t *p, int rc)
{
    return rc == MCA_COLL_GPURING_FALLBACK_HOST && p->pieced ? MCA_COLL_GPURING_FALLBACK : rc;
}

void *mca_coll_gpuring_packed_bytes(const mca_coll_gpuring_packed_t *p,
                                    mca_coll_gpuring_call_t *call)
{
    if (p->fail == GPURING_OK) return p->bytes;
    if (call->fail == GPURING_OK) call->fail = p->fail;
    return p->first;
}

int mca_coll_gpuring_unpack(mca_coll_gpuring_packed_t *p, int out, int may_write)
{
    const char *why = "the datatype's elements";
    int rc = OMPI_SUCCESS;

    if (p->bytes == NULL) return OMPI_SUCCESS;
    if (out && p->device >= 0 && gpuring_devcopy(p->host, p->bytes, p->len, 0, &why) != GPURING_OK)
        rc = OMPI_ERROR;
    if (out && rc == OMPI_SUCCESS &&
        pack_convert(0, p->dt, p->count, pack_elements(p), p->host, p->len) != OMPI_SUCCESS) {
        why = "Open MPI's convertor failed";
        rc = OMPI_ERROR;
    }
    if (out && rc == OMPI_SUCCESS && p->image != NULL &&
        mca_coll_gpuring_span_copy_back(&p->span, p->image, 0, &why) != GPURING_OK)
        rc = OMPI_ERROR;
    if (rc != OMPI_SUCCESS) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "%s on comm %s: cannot unpack %zu bytes received into "
                      "%zu elements of datatype %s at %p: %s", gpuring_coll_names[p->coll],
                      mca_coll_gpuring_comm_name(p->m), p->len, p->count,
                      mca_coll_gpuring_dt_name(p->dt), p->buf, why);
    }
    pack_free(p, may_write);
    return rc;
}
