/*
 * coll_gpuring_stage.c -- device buffers on their way to the component
 * below, which may not read GPU memory (Debian's Open MPI is not CUDA-aware:
 * handed a device pointer, it crashes).  A call's buffers are described by
 * the bytes the call touches in each (the span of its datatype and counts);
 * those in device memory are copied into host memory -- one area per
 * communicator for blocking calls (page-locked when the driver allows), an
 * area of its own for a non-blocking call; a span whose blocks lie in several
 * allocations (MPI_BOTTOM with absolute addresses) allocation by allocation
 * into a host image of its own -- the component below runs on the
 * host copies, and what it wrote is copied back: when the call returns, or
 * when a non-blocking call's request completes.  Copies go through the
 * application's CUDA driver (kernels/devcopy.h), so staging works whether or
 * not gpuring's own CUDA executor can run.
 *
 * Staging is a safety net, not a fast path: every staged call is counted
 * per collective and shown in the finalize summary.
 *
 * A rank that cannot stage a call (no host memory, a device copy the driver
 * refuses, blocks it cannot place) before it has entered the component
 * below's would leave its peers waiting there for it, and no component below
 * gpuring bounds that wait: on a communicator with peers it ends the job
 * (stage_failed), naming the call and the cause.  Where the component below
 * has run (a copy back that fails), or no peer waits yet (a persistent call's
 * *_init, which only allocates), the error is this rank's own.
 */
#include "ompi_coll_gpuring/coll_gpuring.h"

#include <ctype.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/base/base.h"
#include "ompi/runtime/mpiruntime.h"
#include "opal/datatype/opal_convertor.h"

#include "kernels/devcopy.h"
#include "kernels/memkind.h"

#define STAGE_ALIGN 64          /* each staged span starts on a cache line */
#define STAGE_GROW (64 << 10)   /* the host area grows in these steps at least */
#define STAGE_MAX_BUFS 2        /* no call has more buffers */
#define STAGE_SPARSE_MIN (1 << 20) /* a span this wide whose blocks hold under a quarter
                                    * of it is sparse (mca_coll_gpuring_span_own_image) */
/* room for each span in the area to move off another buffer's pointer (stage_fill) */
#define STAGE_SLACK ((STAGE_MAX_BUFS - 1) * STAGE_ALIGN)

static uint64_t stage_calls[MCA_COLL_GPURING_NCOLLS]; /* atomic */

static char stage_names[MCA_COLL_GPURING_NCOLLS][32];
static pthread_once_t stage_names_once = PTHREAD_ONCE_INIT;

/* "MPI_" and the slot's name with a capital: "MPI_Reduce_scatter_block" */
static void stage_names_make(void)
{
    static const char *slots[MCA_COLL_GPURING_NCOLLS] = {
#define STAGE_COLL_NAME(_slot, _type) [MCA_COLL_GPURING_COLL_##_slot] = #_slot,
        MCA_COLL_GPURING_COLLS(STAGE_COLL_NAME)
#undef STAGE_COLL_NAME
    };
    for (int i = 0; i < MCA_COLL_GPURING_NCOLLS; i++) {
        snprintf(stage_names[i], sizeof(stage_names[i]), "MPI_%c%s",
                 toupper((unsigned char)slots[i][0]), slots[i] + 1);
    }
}

const char *mca_coll_gpuring_coll_name(mca_coll_gpuring_coll_t coll)
{
    pthread_once(&stage_names_once, stage_names_make);
    return coll < MCA_COLL_GPURING_NCOLLS ? stage_names[coll] : "MPI_?";
}

uint64_t mca_coll_gpuring_stage_count(mca_coll_gpuring_coll_t coll)
{
    return __atomic_load_n(&stage_calls[coll], __ATOMIC_RELAXED);
}

/* The priority of coll component `name` (its coll_<name>_priority), or INT_MIN where it
 * has none. */
static int stage_coll_priority(const char *name)
{
    const int *value = NULL;
    int idx = mca_base_var_find("ompi", "coll", name, "priority");

    if (idx < 0 || mca_base_var_get_value(idx, (const void *)&value, NULL, NULL) != OPAL_SUCCESS ||
        value == NULL)
        return INT_MIN;
    return *value;
}

/* Is a collective component that reduces device buffers open in this job (Open MPI
 * 4.1's coll/cuda, 5.0's coll/accelerator), and below gpuring (a lower priority: one
 * above wraps its calls before gpuring sees them, and what it does not wrap reaches
 * gpuring, and then the components below, with its device pointers)?  A CUDA-aware
 * Open MPI moves device memory in its point-to-point layer, but tuned, libnbc and basic
 * reduce with the CPU: without that component under gpuring, they would read device
 * pointers. */
static int stage_device_coll_below(void)
{
    mca_base_component_list_item_t *cli;

    OPAL_LIST_FOREACH (cli, &ompi_coll_base_framework.framework_components,
                       mca_base_component_list_item_t) {
        const char *name = cli->cli_component->mca_component_name;

        if ((strcmp(name, "cuda") == 0 || strcmp(name, "accelerator") == 0) &&
            stage_coll_priority(name) < mca_coll_gpuring_component.priority)
            return 1;
    }
    return 0;
}

/* The reductions Open MPI's device component wraps in every version (4.1's cuda:
 * these blocking ones; 5.0's accelerator a few more), staging their buffers itself.
 * The other reductions -- non-blocking, persistent, MPI_Reduce_scatter, MPI_Reduce_local
 * -- reach libnbc, tuned or the op framework, which reduce with the CPU. */
static int stage_device_coll_wraps(mca_coll_gpuring_coll_t coll)
{
    switch (coll) {
    case MCA_COLL_GPURING_COLL_allreduce:
    case MCA_COLL_GPURING_COLL_reduce:
    case MCA_COLL_GPURING_COLL_reduce_scatter_block:
    case MCA_COLL_GPURING_COLL_scan:
    case MCA_COLL_GPURING_COLL_exscan:
        return 1;
    default:
        return 0;
    }
}

/* Whether `coll` reduces (an op applied to the buffers' elements). */
static int stage_reduces(mca_coll_gpuring_coll_t coll)
{
    switch (coll) {
    case MCA_COLL_GPURING_COLL_allreduce: case MCA_COLL_GPURING_COLL_iallreduce:
    case MCA_COLL_GPURING_COLL_allreduce_init: case MCA_COLL_GPURING_COLL_reduce:
    case MCA_COLL_GPURING_COLL_ireduce: case MCA_COLL_GPURING_COLL_reduce_init:
    case MCA_COLL_GPURING_COLL_reduce_scatter: case MCA_COLL_GPURING_COLL_ireduce_scatter:
    case MCA_COLL_GPURING_COLL_reduce_scatter_init:
    case MCA_COLL_GPURING_COLL_reduce_scatter_block:
    case MCA_COLL_GPURING_COLL_ireduce_scatter_block:
    case MCA_COLL_GPURING_COLL_reduce_scatter_block_init: case MCA_COLL_GPURING_COLL_scan:
    case MCA_COLL_GPURING_COLL_iscan: case MCA_COLL_GPURING_COLL_scan_init:
    case MCA_COLL_GPURING_COLL_exscan: case MCA_COLL_GPURING_COLL_iexscan:
    case MCA_COLL_GPURING_COLL_exscan_init: case MCA_COLL_GPURING_COLL_reduce_local:
        return 1;
    default:
        return 0;
    }
}

/*
 * coll_gpuring_stage_device_buffers: 1 stage, 0 hand device pointers below,
 * -1 ask Open MPI once whether it is CUDA-aware (MPIX_Query_cuda_support,
 * looked up at run time: not every build has the extension) and whether the
 * job's collective components include its device one; then hand below as they
 * are what the component below reads: a collective that does not reduce (the
 * point-to-point layer moves device memory), a reduction the device component
 * wraps.
 */
int mca_coll_gpuring_below_reads_device(mca_coll_gpuring_coll_t coll)
{
    static int answer = -1;
    int param = mca_coll_gpuring_component.stage_device_buffers;
    int a = __atomic_load_n(&answer, __ATOMIC_RELAXED);

    if (param >= 0) return param == 0;
    if (a < 0) {
        int (*query)(void) = NULL;
        int aware;

        *(void **)&query = dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
        aware = query != NULL && query() == 1;
        a = aware && stage_device_coll_below();
        GPURING_INFO(GPURING_SUBSYS_COLL,
                     "device buffers on their way to the component below: %s",
                     a ? "handed over as they are (this Open MPI is CUDA-aware), but for the "
                         "reductions its coll cuda / accelerator component does not wrap "
                         "(non-blocking, persistent, MPI_Reduce_scatter, MPI_Reduce_local), "
                         "which are staged through host memory"
                     : aware ? "staged through host memory (this Open MPI is CUDA-aware, but "
                               "its coll cuda / accelerator component is not in the job's "
                               "coll list, or not below gpuring (its priority not under "
                               "coll_gpuring_priority): the others reduce on the CPU)"
                             : "staged through host memory (this Open MPI is not CUDA-aware)");
        __atomic_store_n(&answer, a, __ATOMIC_RELAXED);
    }
    return a && (!stage_reduces(coll) || stage_device_coll_wraps(coll));
}

/* ---- spans ------------------------------------------------------------------ */

/* A buffer the call touches in direction `dir`, its span still to be found;
 * none (dir 0) where nothing can be staged: MPI_IN_PLACE, or no CUDA driver in
 * the process, so no device memory (a call handed below on host buffers
 * then skips the datatype's extents and the per-buffer memory-kind looks:
 * 90 of the ~640 instructions gpuring added to an 8-byte allreduce there,
 * callgrind) */
static void stage_buf_init(mca_coll_gpuring_stage_buf_t *b, const void *buf, int dir)
{
    b->buf = (void *)buf;
    b->lo = 0;
    b->bytes = 0;
    b->data = 0;
    /* (NULL is MPI_BOTTOM where the buffer counts: its datatype's addresses absolute;
     * the callers give a buffer that does not count on this rank dir 0) */
    b->dir = buf == MPI_IN_PLACE || !gpuring_mem_any_device() ? 0 : dir;
    b->holes = 0;
    b->partial = 0;
    b->host = (void *)buf;
    b->staged = NULL;
    memset(&b->shape, 0, sizeof(b->shape));
    b->npieces = 0;
    b->pieces = NULL;
}

/* Widen [*lo, *hi) by count elements of dt starting `at` bytes from buf, whose blocks
 * hold count * size bytes more of *data (0: none yet, [*lo, *hi) unset). */
static void stage_hull_add(ptrdiff_t *lo, ptrdiff_t *hi, size_t *data, ptrdiff_t at, size_t count,
                           struct ompi_datatype_t *dt)
{
    ptrdiff_t lb, extent, true_lb, true_extent, first, last;
    size_t size;

    ompi_datatype_type_size(dt, &size);
    if (count == 0 || size == 0) return; /* (an empty type's elements touch no byte) */
    ompi_datatype_get_extent(dt, &lb, &extent);
    ompi_datatype_get_true_extent(dt, &true_lb, &true_extent);
    /* element k occupies [at + k*extent + true_lb, ... + true_extent) */
    first = at + true_lb + (extent < 0 ? (ptrdiff_t)(count - 1) * extent : 0);
    last = at + true_lb + true_extent + (extent > 0 ? (ptrdiff_t)(count - 1) * extent : 0);
    if (*data == 0 || first < *lo) *lo = first;
    if (*data == 0 || last > *hi) *hi = last;
    *data += count * size;
}

static void stage_buf_hull(mca_coll_gpuring_stage_buf_t *b, ptrdiff_t lo, ptrdiff_t hi,
                           size_t data)
{
    if (b->dir == 0 || data == 0 || hi <= lo) {
        b->dir = 0;
        return;
    }
    b->lo = lo;
    b->bytes = (size_t)(hi - lo);
    b->data = data;
}

void mca_coll_gpuring_stage_span(mca_coll_gpuring_stage_buf_t *b, const void *buf, int dir,
                                 size_t count, struct ompi_datatype_t *dt)
{
    ptrdiff_t lo = 0, hi = 0;
    size_t data = 0;

    stage_buf_init(b, buf, dir);
    if (b->dir == 0) return; /* counts and types may be meaningless here (MPI allows it) */
    stage_hull_add(&lo, &hi, &data, 0, count, dt);
    stage_buf_hull(b, lo, hi, data);
    b->holes = count > INT32_MAX ||
               !ompi_datatype_is_contiguous_memory_layout(dt, (int32_t)(count ? count : 1));
    b->shape = (mca_coll_gpuring_shape_t){.form = 0, .count = count, .dt = dt};
}

void mca_coll_gpuring_stage_span_v(mca_coll_gpuring_stage_buf_t *b, const void *buf, int dir,
                                   const int *counts, const int *displs, int n,
                                   struct ompi_datatype_t *dt)
{
    ptrdiff_t lo = 0, hi = 0, lb, extent;
    size_t data = 0;

    stage_buf_init(b, buf, dir);
    if (b->dir == 0) return;
    ompi_datatype_get_extent(dt, &lb, &extent);
    for (int i = 0; i < n; i++) {
        if (counts[i] > 0) stage_hull_add(&lo, &hi, &data, displs[i] * extent, counts[i], dt);
    }
    stage_buf_hull(b, lo, hi, data);
    b->holes = 1; /* blocks need not tile their hull */
    b->shape = (mca_coll_gpuring_shape_t){
        .form = 1, .counts = counts, .displs = displs, .n = n, .dt = dt};
}

void mca_coll_gpuring_stage_span_w(mca_coll_gpuring_stage_buf_t *b, const void *buf, int dir,
                                   const int *counts, const void *displs, int aint,
                                   struct ompi_datatype_t *const *types, int n)
{
    ptrdiff_t lo = 0, hi = 0;
    size_t data = 0;

    stage_buf_init(b, buf, dir);
    if (b->dir == 0) return;
    for (int i = 0; i < n; i++) {
        ptrdiff_t at = aint ? (ptrdiff_t)((const MPI_Aint *)displs)[i]
                            : (ptrdiff_t)((const int *)displs)[i];
        if (counts[i] > 0) stage_hull_add(&lo, &hi, &data, at, counts[i], types[i]);
    }
    stage_buf_hull(b, lo, hi, data);
    b->holes = 1;
    b->shape = (mca_coll_gpuring_shape_t){
        .form = 2, .counts = counts, .displs = displs, .n = n, .aint = aint, .types = types};
}

/* ---- pieces: a span over several allocations ---------------------------------------- */

/* A copy block by block (stage_span_copy: a result back, a sparse span's input in):
 * device blocks queued, up to STAGE_COPY_BATCH of one piece (allocation) at a time, for
 * one gpuring_devcopy_blocks; blocks of one size at one stride as one entry of rows (a
 * vector type's: one 2D copy) */
#define STAGE_COPY_BATCH 64
typedef struct {
    const char *image; /* the span's host image: its first byte is the span's */
    int back;          /* into the span's blocks from the image, else out of them */
    int count_only;    /* no copy: the driver's copies the blocks would take, counted */
    size_t copies;     /* ... into this */
    int pinned;
    int piece;         /* that of the queued blocks (-1: the span is one piece) */
    int n;
    gpuring_devcopy_block_t q[STAGE_COPY_BATCH];
    gpuring_status_t st;
} stage_copy_t;

/* The walk of a span's blocks, in the order its datatype lists them. */
typedef struct {
    mca_coll_gpuring_stage_buf_t *b;
    stage_copy_t *copy;       /* the walk copies the blocks: it makes no pieces */
    int cap;
    int cur;                  /* the piece of the device allocation `range`; -1: none */
    gpuring_mem_range_t range;
    int host;                 /* the last host piece; -1: none */
    int device;               /* a piece is device memory (not managed) */
    int probe;                /* only whether a block is device memory: no pieces */
    const char *why;
} stage_walk_t;

/* [lo, lo + len) of the span into piece k, or into a new one where k is npieces. */
static int stage_walk_piece(stage_walk_t *w, int k, ptrdiff_t lo, size_t len, uintptr_t alloc)
{
    mca_coll_gpuring_stage_buf_t *b = w->b;
    mca_coll_gpuring_piece_t *p;

    if (k == b->npieces) {
        if (k == w->cap) {
            int cap = w->cap ? 2 * w->cap : 8;
            p = realloc(b->pieces, (size_t)cap * sizeof(*p));
            if (p == NULL) {
                w->why = "no memory";
                return -1;
            }
            b->pieces = p;
            w->cap = cap;
        }
        b->pieces[k] = (mca_coll_gpuring_piece_t){.lo = lo, .bytes = len, .alloc = alloc};
        b->npieces++;
        return 0;
    }
    p = &b->pieces[k];
    if (lo + (ptrdiff_t)len > p->lo + (ptrdiff_t)p->bytes)
        p->bytes = (size_t)(lo + (ptrdiff_t)len - p->lo);
    if (lo < p->lo) {
        p->bytes += (size_t)(p->lo - lo);
        p->lo = lo;
    }
    return 0;
}

/* The last queued block folded into the entry before it, where it is that entry's next
 * row (the image mirrors the span: one stride in both). */
static void stage_copy_fold(stage_copy_t *c)
{
    gpuring_devcopy_block_t *run, *last;
    uintptr_t next;

    if (c->n < 2) return;
    run = &c->q[c->n - 2];
    last = &c->q[c->n - 1];
    if (last->rows != 1 || last->bytes != run->bytes) return;
    if (run->rows == 1) {
        uintptr_t pitch = (uintptr_t)last->dst - (uintptr_t)run->dst;

        if ((uintptr_t)last->dst <= (uintptr_t)run->dst || pitch <= run->bytes ||
            pitch > GPURING_DEVCOPY_MAX_PITCH ||
            (uintptr_t)last->src - (uintptr_t)run->src != pitch)
            return;
        run->pitch = pitch;
    } else {
        next = run->rows * run->pitch;
        if ((uintptr_t)last->dst != (uintptr_t)run->dst + next ||
            (uintptr_t)last->src != (uintptr_t)run->src + next)
            return;
    }
    run->rows++;
    c->n--;
}

static int stage_copy_flush(stage_walk_t *w)
{
    stage_copy_t *c = w->copy;

    stage_copy_fold(c);
    if (c->count_only) c->copies += (size_t)c->n;
    else if (c->n > 0) c->st = gpuring_devcopy_blocks(c->q, c->n, c->back, c->pinned, &w->why);
    c->n = 0;
    return c->st == GPURING_OK ? 0 : -1;
}

/* [at, at + len) of the span, all in piece k (-1: the span is one), between it and the
 * image: host memory at once, device memory queued (joined to the block before where it
 * goes on from it; the block before, complete then, folded into the rows before it) */
static int stage_copy_part(stage_walk_t *w, int k, uintptr_t at, size_t len)
{
    stage_copy_t *c = w->copy;
    const mca_coll_gpuring_stage_buf_t *b = w->b;
    char *in = (char *)c->image + ((ptrdiff_t)(at - (uintptr_t)b->buf) - b->lo);
    gpuring_devcopy_block_t *last = c->n > 0 ? &c->q[c->n - 1] : NULL;
    void *dst = c->back ? (void *)at : in;
    const void *src = c->back ? (const void *)in : (const void *)at;

    if (k >= 0 && b->pieces[k].alloc == 0) {
        if (!c->count_only) memcpy(dst, src, len);
        return 0;
    }
    if (last != NULL && c->piece == k && last->rows == 1 &&
        (const char *)last->dst + last->bytes == dst &&
        (const char *)last->src + last->bytes == src) {
        last->bytes += len;
        return 0;
    }
    if (c->n > 0 && c->piece == k) stage_copy_fold(c);
    if ((c->n == STAGE_COPY_BATCH || (c->n > 0 && c->piece != k)) && stage_copy_flush(w) != 0)
        return -1;
    c->piece = k;
    c->q[c->n++] = (gpuring_devcopy_block_t){.dst = dst, .src = src, .bytes = len, .rows = 1};
    return 0;
}

/* The block [at, at + len) to or from the image: its part in each piece */
static int stage_copy_block(stage_walk_t *w, uintptr_t at, size_t len)
{
    const mca_coll_gpuring_stage_buf_t *b = w->b;

    if (b->npieces == 0) return stage_copy_part(w, -1, at, len);
    for (int k = 0; k < b->npieces; k++) {
        uintptr_t lo = (uintptr_t)mca_coll_gpuring_at(b->buf, b->pieces[k].lo);
        uintptr_t from = GPURING_MAX(at, lo), to = GPURING_MIN(at + len, lo + b->pieces[k].bytes);

        if (from < to && stage_copy_part(w, k, from, to - from) != 0) return -1;
    }
    return 0;
}

/* The block [at, at + len) into pieces: each part of it in one device allocation into
 * that allocation's piece (a block may run on into the next mapping); host memory into
 * the last host piece where the block meets it, else a new one. */
static int stage_walk_block(stage_walk_t *w, uintptr_t at, size_t len)
{
    mca_coll_gpuring_stage_buf_t *b = w->b;

    if (w->copy != NULL) return stage_copy_block(w, at, len);
    if (w->probe) { /* its first and last bytes tell; the first device block ends the walk */
        if (gpuring_mem_kind((const void *)at, NULL) != GPURING_MEM_DEVICE &&
            (len < 2 ||
             gpuring_mem_kind((const void *)(at + len - 1), NULL) != GPURING_MEM_DEVICE))
            return 0;
        w->device = 1;
        return -1;
    }
    while (len > 0) {
        ptrdiff_t lo = (ptrdiff_t)(at - (uintptr_t)b->buf);
        size_t part;
        int k;

        if (!(w->cur >= 0 && at >= w->range.base && at - w->range.base < w->range.bytes)) {
            w->cur = -1;
            if (gpuring_mem_range((const void *)at, &w->range) == 0) {
                for (k = 0; k < b->npieces && b->pieces[k].alloc != w->range.base; k++)
                    continue;
                if (k == b->npieces && gpuring_mem_kind((const void *)at, NULL) ==
                                           GPURING_MEM_DEVICE)
                    w->device = 1;
                w->cur = k;
            } else if (gpuring_mem_kind((const void *)at, NULL) == GPURING_MEM_DEVICE) {
                w->why = "the CUDA driver does not say which allocation a block's device "
                         "memory belongs to";
                return -1;
            }
        }
        if (w->cur < 0) { /* host memory: the rest of the block, or up to the allocation
                           * its last byte lies in (blocks of adjacent objects may come
                           * merged into one) */
            const mca_coll_gpuring_piece_t *h = w->host >= 0 ? &b->pieces[w->host] : NULL;
            gpuring_mem_range_t r;

            part = len;
            if (len > 1 && gpuring_mem_range((const void *)(at + len - 1), &r) == 0 &&
                r.base > at)
                part = r.base - at;
            k = h != NULL && lo >= h->lo && lo <= h->lo + (ptrdiff_t)h->bytes ? w->host
                                                                               : b->npieces;
            w->host = k;
            if (stage_walk_piece(w, k, lo, part, 0) != 0) return -1;
            at += part;
            len -= part;
            continue;
        }
        part = GPURING_MIN(len, w->range.bytes - (at - w->range.base));
        if (stage_walk_piece(w, w->cur, lo, part, w->range.base) != 0) return -1;
        at += part;
        len -= part;
    }
    return 0;
}

/* count elements of dt at base, block by block (Open MPI's convertor lists them) */
static int stage_walk_type(stage_walk_t *w, const void *base, size_t count,
                           struct ompi_datatype_t *dt)
{
    opal_convertor_t conv;
    int32_t done = 0;
    int rc = 0;

    if (count == 0) return 0;
    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    if (opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor, &dt->super, count,
                                                 base, 0, &conv) != OPAL_SUCCESS) {
        w->why = "Open MPI's convertor failed";
        rc = -1;
    }
    while (rc == 0 && !done) {
        struct iovec iov[32];
        uint32_t n = 32;
        size_t len = 0;

        done = opal_convertor_raw(&conv, iov, &n, &len);
        if (done < 0) {
            w->why = "Open MPI's convertor failed";
            rc = -1;
        }
        for (uint32_t k = 0; rc == 0 && k < n; k++)
            rc = stage_walk_block(w, (uintptr_t)iov[k].iov_base, iov[k].iov_len);
    }
    OBJ_DESTRUCT(&conv);
    return rc;
}

/* Every block of the shape b's span was made from, through w */
static int stage_walk_shape(stage_walk_t *w)
{
    mca_coll_gpuring_stage_buf_t *b = w->b;
    const mca_coll_gpuring_shape_t *sh = &b->shape;
    ptrdiff_t lb, extent;
    int rc = 0;

    if (sh->form == 0) return stage_walk_type(w, b->buf, sh->count, sh->dt);
    if (sh->form == 1) {
        ompi_datatype_get_extent(sh->dt, &lb, &extent);
        for (int i = 0; rc == 0 && i < sh->n; i++) {
            if (sh->counts[i] > 0)
                rc = stage_walk_type(
                    w, mca_coll_gpuring_at(b->buf, ((const int *)sh->displs)[i] * extent),
                    (size_t)sh->counts[i], sh->dt);
        }
        return rc;
    }
    for (int i = 0; rc == 0 && i < sh->n; i++) {
        ptrdiff_t at = sh->aint ? (ptrdiff_t)((const MPI_Aint *)sh->displs)[i]
                                : (ptrdiff_t)((const int *)sh->displs)[i];
        if (sh->counts[i] > 0)
            rc = stage_walk_type(w, mca_coll_gpuring_at(b->buf, at), (size_t)sh->counts[i],
                                 sh->types[i]);
    }
    return rc;
}

/* b's pieces, from the blocks of the shape its span was made from */
static int stage_walk(mca_coll_gpuring_stage_buf_t *b, const char **why_p)
{
    stage_walk_t w = {.b = b, .cur = -1, .host = -1};
    int rc = stage_walk_shape(&w);

    if (rc != 0) {
        *why_p = w.why;
        free(b->pieces);
        b->pieces = NULL;
        b->npieces = 0;
    }
    b->device |= w.device;
    return rc;
}

/* Must b's span be walked for pieces: does a block of its shape lie in device memory
 * (its first and last bytes asked, up to the first block that does; no memory of
 * gpuring's allocated), or did the walk fail (the walk for pieces then says why)? */
static int stage_probe(mca_coll_gpuring_stage_buf_t *b)
{
    stage_walk_t w = {.b = b, .cur = -1, .host = -1, .probe = 1};

    return stage_walk_shape(&w) != 0;
}

#define STAGE_SPAN_PROBE 2 /* stage_span_kind: at MPI_BOTTOM, for stage_probe to tell */

/* Whether b's span holds device memory (b->device, as far as its first byte tells), and
 * 1 where its blocks must be walked for pieces (which may show device memory too): a
 * datatype with holes whose span leaves the allocation of its first byte (device or
 * managed memory), or starts in host memory and ends in device memory;
 * STAGE_SPAN_PROBE where it starts in host memory at MPI_BOTTOM (absolute addresses:
 * its blocks may be any objects of the process, host ones around device ones), which
 * stage_probe tells, once it is known to matter.  A datatype with holes relative to a
 * host buffer is host memory as far as its first and last bytes tell. */
static int stage_span_kind(mca_coll_gpuring_stage_buf_t *b)
{
    gpuring_mem_kind_t kind;
    gpuring_mem_range_t r;
    void *first;

    b->device = 0;
    b->blockwise_in = 0;
    b->npieces = 0;
    b->pieces = NULL;
    if (b->dir == 0 || b->bytes == 0) return 0;
    first = mca_coll_gpuring_at(b->buf, b->lo);
    kind = gpuring_mem_kind(first, NULL);
    if (kind == GPURING_MEM_DEVICE || kind == GPURING_MEM_MANAGED) {
        b->device = kind == GPURING_MEM_DEVICE;
        /* one run, blocks inside the allocation of the first, or an allocation the driver
         * does not describe: one piece */
        return b->holes && gpuring_mem_range(first, &r) == 0 &&
               b->bytes > r.bytes - ((uintptr_t)first - r.base);
    }
    if (!b->holes) return 0;
    if (b->buf == MPI_BOTTOM) return STAGE_SPAN_PROBE;
    return gpuring_mem_kind(mca_coll_gpuring_at(first, (ptrdiff_t)b->bytes - 1), NULL) ==
           GPURING_MEM_DEVICE;
}

/* Are b's blocks sparse in their span: under a quarter of a wide one's bytes (one column
 * of a matrix)?  Its host image is then mapped, only the blocks' pages ever touched. */
static int stage_span_sparse(const mca_coll_gpuring_stage_buf_t *b)
{
    return b->holes && b->bytes >= STAGE_SPARSE_MIN && b->data < b->bytes / 4;
}

int mca_coll_gpuring_span_own_image(const mca_coll_gpuring_stage_buf_t *b)
{
    return b->npieces > 0 || stage_span_sparse(b);
}

void *mca_coll_gpuring_span_image_new(const mca_coll_gpuring_stage_buf_t *b)
{
    void *p = mmap(NULL, b->bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    return p == MAP_FAILED ? NULL : p;
}

void mca_coll_gpuring_span_image_free(const mca_coll_gpuring_stage_buf_t *b, void *image)
{
    if (image != NULL && mca_coll_gpuring_span_own_image(b)) munmap(image, b->bytes);
}

void mca_coll_gpuring_span_release(mca_coll_gpuring_stage_buf_t *b, void *image)
{
    mca_coll_gpuring_span_image_free(b, image);
    free(b->pieces);
    b->pieces = NULL;
    b->npieces = 0;
}

/* A sparse span's blocks copied in one by one cost the driver this many copies at most
 * (a vector's rows are one 2D copy), and at least one per this many bytes of the span:
 * irregular blocks (an indexed type's scattered elements) would take a synchronous copy
 * each, and the span comes in whole instead (one copy at the copy rate) */
#define STAGE_SPARSE_COPIES 64
#define STAGE_SPARSE_COPY_BYTES (128 << 10)

/* Does a sparse span of device or managed memory in one allocation, read by the call,
 * come in block by block: how many copies its blocks take, counted by a walk of its
 * datatype that copies nothing (the image mirrors the span: the span itself stands for
 * it)?  (A span in pieces comes in piece by piece.)  Asked once, where the span is
 * classified. */
static int stage_span_blockwise_in(mca_coll_gpuring_stage_buf_t *b)
{
    void *first = mca_coll_gpuring_at(b->buf, b->lo);
    stage_copy_t count = {.image = first, .count_only = 1, .st = GPURING_OK};
    stage_walk_t w = {.b = b, .copy = &count, .cur = -1, .host = -1};

    if (!((b->dir & MCA_COLL_GPURING_STAGE_IN) || b->partial) || b->npieces > 0 ||
        !stage_span_sparse(b) ||
        (!b->device && gpuring_mem_kind(first, NULL) != GPURING_MEM_MANAGED) ||
        stage_walk_shape(&w) != 0 || stage_copy_flush(&w) != 0)
        return 0;
    return count.copies <= GPURING_MAX((size_t)STAGE_SPARSE_COPIES,
                                       b->bytes / STAGE_SPARSE_COPY_BYTES);
}

int mca_coll_gpuring_span_classify(mca_coll_gpuring_stage_buf_t *b, const char **why_p)
{
    int walk = stage_span_kind(b);

    if (walk == STAGE_SPAN_PROBE) walk = stage_probe(b);
    if (walk && stage_walk(b, why_p) != 0) return -1;
    b->blockwise_in = stage_span_blockwise_in(b);
    return 0;
}

/* Copy the span's bytes at buf into its host image (back: from the image to buf): in
 * one copy, or piece by piece; back, where its datatype has holes, block by block -- the
 * bytes between the blocks are not the call's: the application may write them while it
 * runs (another thread, a kernel, before a non-blocking call's wait) -- and in too where
 * its blocks are sparse and few copies take them (only they read, only their pages of
 * the image written) */
static gpuring_status_t stage_span_copy(const mca_coll_gpuring_stage_buf_t *b, void *image,
                                        int pinned, int back, const char **why_p)
{
    if (back ? b->holes : b->blockwise_in) {
        stage_copy_t copy = {.image = image, .back = back, .pinned = pinned, .st = GPURING_OK};
        /* (a walk that copies reads b: it makes no pieces) */
        stage_walk_t w = {.b = (mca_coll_gpuring_stage_buf_t *)b, .copy = &copy, .cur = -1,
                          .host = -1};

        if (stage_walk_shape(&w) == 0 && stage_copy_flush(&w) == 0) return GPURING_OK;
        *why_p = w.why;
        return copy.st != GPURING_OK ? copy.st : GPURING_ERR_INVALID;
    }
    if (b->npieces == 0) {
        void *at = mca_coll_gpuring_at(b->buf, b->lo);
        return back ? gpuring_devcopy_back(at, image, b->bytes, pinned, why_p)
                    : gpuring_devcopy(image, at, b->bytes, pinned, why_p);
    }
    for (int k = 0; k < b->npieces; k++) {
        const mca_coll_gpuring_piece_t *p = &b->pieces[k];
        char *at = mca_coll_gpuring_at(b->buf, p->lo), *in = (char *)image + (p->lo - b->lo);
        gpuring_status_t st = GPURING_OK;

        if (p->alloc == 0) memcpy(back ? at : in, back ? in : at, p->bytes);
        else if (back) st = gpuring_devcopy_back(at, in, p->bytes, 0, why_p);
        else st = gpuring_devcopy(in, at, p->bytes, 0, why_p);
        if (st != GPURING_OK) return st;
    }
    return GPURING_OK;
}

/* A span the call only writes: its result must land after the application's earlier
 * work on it (gpuring_devcopy_back's stream waits for none) -- in each device piece's
 * context where it is pieced (its first byte may be host memory). */
static gpuring_status_t stage_span_order(const mca_coll_gpuring_stage_buf_t *b,
                                         const char **why_p)
{
    gpuring_status_t st = GPURING_OK;

    if (b->npieces == 0) return gpuring_devcopy_order(mca_coll_gpuring_at(b->buf, b->lo), why_p);
    for (int k = 0; k < b->npieces && st == GPURING_OK; k++) {
        if (b->pieces[k].alloc != 0)
            st = gpuring_devcopy_order(mca_coll_gpuring_at(b->buf, b->pieces[k].lo), why_p);
    }
    return st;
}

gpuring_status_t mca_coll_gpuring_span_take(const mca_coll_gpuring_stage_buf_t *b, void *image,
                                            int pinned, int reads, const char **why_p)
{
    return reads ? stage_span_copy(b, image, pinned, 0, why_p) : stage_span_order(b, why_p);
}

gpuring_status_t mca_coll_gpuring_span_copy_back(const mca_coll_gpuring_stage_buf_t *b,
                                                 void *image, int pinned, const char **why_p)
{
    return stage_span_copy(b, image, pinned, 1, why_p);
}

/* ---- staging ---------------------------------------------------------------- */

void mca_coll_gpuring_stage_area_free(mca_coll_gpuring_stage_area_t *area)
{
    if (area->host != NULL) {
        gpuring_devcopy_unpin(area->host, area->pin);
        free(area->host);
    }
    area->host = NULL;
    area->bytes = 0;
    area->pin = NULL;
}

/* At least `bytes` of host area, page-locked where `pin` and the driver allow (in the
 * context of device memory `near` on a thread without one); its old contents need not
 * survive. */
static int stage_area_reserve(mca_coll_gpuring_stage_area_t *area, size_t bytes, int pin,
                              const void *near)
{
    size_t want;
    void *p = NULL;

    if (bytes <= area->bytes) return OMPI_SUCCESS;
    want = GPURING_DIV_UP(bytes > 2 * area->bytes ? bytes : 2 * area->bytes,
                          (size_t)STAGE_GROW) * STAGE_GROW;
    mca_coll_gpuring_stage_area_free(area);
    if (posix_memalign(&p, 4096, want) != 0) return OMPI_ERR_OUT_OF_RESOURCE;
    area->host = p;
    area->bytes = want;
    area->pin = pin ? gpuring_devcopy_pin(p, want, near) : NULL;
    return OMPI_SUCCESS;
}

/* Give back the images of pieced spans, and their pieces. */
static void stage_release(mca_coll_gpuring_stage_buf_t *bufs, int n)
{
    for (int i = 0; i < n; i++) {
        mca_coll_gpuring_span_release(&bufs[i], bufs[i].staged);
        if (bufs[i].staged != NULL) bufs[i].host = bufs[i].buf;
        bufs[i].staged = NULL;
    }
}

/* Which buffers are device memory (one driver query each, a few more for a datatype
 * with holes, two per block at MPI_BOTTOM: bufs[i].device), each handed below as it
 * is for now.  1 where any is to
 * be staged, with *total_p the host bytes the area must hold for the spans in one
 * piece (a pieced span gets an image of its own); 0 where none is (no device buffer,
 * or the component below reads them); -1 where a span's pieces cannot be told (logged). */
static int stage_plan(mca_coll_gpuring_stage_buf_t *bufs, int n, mca_coll_gpuring_coll_t coll,
                      const char *comm, size_t *total_p)
{
    int any = 0, walk[STAGE_MAX_BUFS];

    *total_p = 0;
    if (n > STAGE_MAX_BUFS) return -1; /* no call has more */
    for (int i = 0; i < n; i++) {
        bufs[i].staged = NULL;
        bufs[i].host = bufs[i].buf;
        bufs[i].device = 0;
        bufs[i].blockwise_in = 0;
        bufs[i].npieces = 0;
        bufs[i].pieces = NULL;
    }
    for (int i = 0; i < n; i++) {
        walk[i] = stage_span_kind(&bufs[i]);
        any |= bufs[i].device || walk[i];
    }
    if (!any || mca_coll_gpuring_below_reads_device(coll)) return 0;
    any = 0;
    for (int i = 0; i < n; i++) {
        mca_coll_gpuring_stage_buf_t *b = &bufs[i];
        const char *why = NULL;

        if (walk[i] == STAGE_SPAN_PROBE) walk[i] = stage_probe(b);
        if (walk[i] && stage_walk(b, &why) != 0) {
            GPURING_ERROR(GPURING_SUBSYS_COLL,
                          "%s on comm %s: cannot stage the %zu bytes at %p its datatype spans "
                          "(blocks in several allocations): %s",
                          mca_coll_gpuring_coll_name(coll), comm, b->bytes,
                          mca_coll_gpuring_at(b->buf, b->lo), why);
            stage_release(bufs, n);
            return -1;
        }
        /* (managed and host memory only: the component below reads it as it is) */
        if (!b->device) mca_coll_gpuring_span_release(b, NULL);
        b->blockwise_in = b->device && stage_span_blockwise_in(b);
        if (b->device && !mca_coll_gpuring_span_own_image(b))
            *total_p += GPURING_DIV_UP(b->bytes, (size_t)STAGE_ALIGN) * STAGE_ALIGN +
                        STAGE_SLACK;
        any |= b->device;
    }
    return any;
}

/* Copy what the call reads of the staged spans (its inputs, and written spans it may not
 * fill: a neighbor collective's blocks of MPI_PROC_NULL neighbors) from device memory.
 * A span it only writes, every block, is not copied: its copy back writes only the
 * blocks (the bytes between them, and a datatype's hull may be far larger than its
 * blocks, neither read nor written). */
static int stage_copy_in(const mca_coll_gpuring_stage_area_t *area, mca_coll_gpuring_coll_t coll,
                         const char *comm, const mca_coll_gpuring_stage_buf_t *bufs, int n)
{
    const char *why = NULL;

    for (int i = 0; i < n; i++) {
        const mca_coll_gpuring_stage_buf_t *b = &bufs[i];
        void *at = mca_coll_gpuring_at(b->buf, b->lo);
        gpuring_status_t st;

        if (b->staged == NULL) continue;
        st = mca_coll_gpuring_span_take(
            b, b->staged, !mca_coll_gpuring_span_own_image(b) && area->pin != NULL,
            (b->dir & MCA_COLL_GPURING_STAGE_IN) || b->partial, &why);
        if (st != GPURING_OK) {
            GPURING_ERROR(GPURING_SUBSYS_COLL,
                          "%s on comm %s: cannot copy the %zu bytes at %p its datatype spans "
                          "(device memory%s) to host memory: %s",
                          mca_coll_gpuring_coll_name(coll), comm, b->bytes, at,
                          b->npieces > 0 ? ", in pieces" : "", why);
            return OMPI_ERROR;
        }
    }
    return OMPI_SUCCESS;
}

/* Would buffer i's pointer for the component below, `host`, equal another buffer's?
 * (Open MPI's libnbc takes a send and a receive buffer at one address for MPI_IN_PLACE:
 * two spans staged `lo` bytes apart from where their datatypes start would be one.) */
static int stage_aliases_at(const mca_coll_gpuring_stage_buf_t *bufs, int n, int i,
                            const void *host)
{
    for (int k = 0; k < n; k++) {
        if (k != i && bufs[k].host == host) return 1;
    }
    return 0;
}

/* ... at its pointer now */
static int stage_aliases(const mca_coll_gpuring_stage_buf_t *bufs, int n, int i)
{
    return stage_aliases_at(bufs, n, i, bufs[i].host);
}

/* Copy the device buffers' spans into `area` (stage_plan's `total` bytes) or, pieced,
 * into images of their own, each buffer's .host pointing into its copy (`copy` 0: the
 * room only, for a persistent call whose every start copies); on failure (logged) the
 * images are given back.  No two buffers' pointers end up equal (stage_aliases). */
static int stage_fill(mca_coll_gpuring_stage_area_t *area, int pin, size_t total, int copy,
                      mca_coll_gpuring_coll_t coll, const char *comm,
                      mca_coll_gpuring_stage_buf_t *bufs, int n)
{
    const void *near = NULL;
    size_t off = 0;
    int own = 0;

    for (int i = 0; i < n && near == NULL; i++) {
        if (bufs[i].device && !mca_coll_gpuring_span_own_image(&bufs[i]))
            near = mca_coll_gpuring_at(bufs[i].buf, bufs[i].lo);
    }
    if (stage_area_reserve(area, total, pin, near) != OMPI_SUCCESS) {
        GPURING_ERROR(GPURING_SUBSYS_COLL,
                      "%s on comm %s: cannot allocate %zu bytes of host memory to stage "
                      "its device buffers through", mca_coll_gpuring_coll_name(coll), comm,
                      total);
        stage_release(bufs, n);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    /* spans with images of their own first (they lie where mmap puts them), then the
     * area's, each moved on (into stage_plan's slack) while its pointer is another's */
    for (int i = 0; i < n; i++) {
        mca_coll_gpuring_stage_buf_t *b = &bufs[i];

        if (!b->device || !mca_coll_gpuring_span_own_image(b)) continue;
        own++;
        b->staged = mca_coll_gpuring_span_image_new(b);
        if (b->staged != NULL &&
            stage_aliases_at(bufs, n, i, mca_coll_gpuring_at(b->staged, -b->lo))) {
            /* another image's pointer (mmap put this one a span's length below it, and the
             * two spans start that far apart): mapped again elsewhere, this one kept till
             * then */
            void *first = b->staged;

            b->staged = mca_coll_gpuring_span_image_new(b);
            mca_coll_gpuring_span_image_free(b, first);
        }
        if (b->staged == NULL) {
            GPURING_ERROR(GPURING_SUBSYS_COLL,
                          "%s on comm %s: cannot map %zu bytes of address space for a host "
                          "image of the span of a datatype whose blocks hold %zu bytes%s",
                          mca_coll_gpuring_coll_name(coll), comm, b->bytes, b->data,
                          b->npieces > 0 ? " in several allocations" : "");
            stage_release(bufs, n);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        b->host = mca_coll_gpuring_at(b->staged, -b->lo);
    }
    for (int i = 0; i < n; i++) {
        mca_coll_gpuring_stage_buf_t *b = &bufs[i];

        if (!b->device || mca_coll_gpuring_span_own_image(b)) continue;
        for (;;) {
            b->staged = (char *)area->host + off;
            b->host = mca_coll_gpuring_at(b->staged, -b->lo);
            if (!stage_aliases(bufs, n, i)) break;
            off += STAGE_ALIGN;
        }
        off += GPURING_DIV_UP(b->bytes, (size_t)STAGE_ALIGN) * STAGE_ALIGN;
    }
    /* (a written span the call may not fill keeps the device's bytes) */
    if (copy && stage_copy_in(area, coll, comm, bufs, n) != OMPI_SUCCESS) {
        stage_release(bufs, n);
        return OMPI_ERROR;
    }
    if (copy) __atomic_fetch_add(&stage_calls[coll], 1, __ATOMIC_RELAXED); /* (else: starts) */
    GPURING_DEBUG(GPURING_SUBSYS_COLL, "%s on comm %s: device buffers staged: %zu bytes in "
                  "the host area, %d spans in images of their own",
                  mca_coll_gpuring_coll_name(coll), comm, total, own);
    return OMPI_SUCCESS;
}

/* Copy back what the call wrote in its staged spans. */
static int stage_drain(const mca_coll_gpuring_stage_area_t *area, mca_coll_gpuring_coll_t coll,
                       const char *comm, const mca_coll_gpuring_stage_buf_t *bufs, int n)
{
    const char *why = NULL;

    for (int i = 0; i < n; i++) {
        const mca_coll_gpuring_stage_buf_t *b = &bufs[i];

        if (b->staged == NULL || !(b->dir & MCA_COLL_GPURING_STAGE_OUT)) continue;
        if (stage_span_copy(b, b->staged,
                            !mca_coll_gpuring_span_own_image(b) && area->pin != NULL, 1,
                            &why) != GPURING_OK) {
            GPURING_ERROR(GPURING_SUBSYS_COLL,
                          "%s on comm %s: cannot copy the result (%zu bytes) back to "
                          "device memory at %p: %s", mca_coll_gpuring_coll_name(coll), comm,
                          b->bytes, mca_coll_gpuring_at(b->buf, b->lo), why);
            return OMPI_ERROR;
        }
    }
    return OMPI_SUCCESS;
}

int mca_coll_gpuring_stage_in_area(mca_coll_gpuring_stage_area_t *area, int pin,
                                   mca_coll_gpuring_coll_t coll, const char *comm,
                                   mca_coll_gpuring_stage_buf_t *bufs, int n)
{
    size_t total;
    int any = stage_plan(bufs, n, coll, comm, &total);

    if (any <= 0) return any < 0 ? OMPI_ERROR : OMPI_SUCCESS;
    return stage_fill(area, pin, total, 1, coll, comm, bufs, n);
}

int mca_coll_gpuring_stage_out_area(mca_coll_gpuring_stage_area_t *area,
                                    mca_coll_gpuring_coll_t coll, const char *comm,
                                    mca_coll_gpuring_stage_buf_t *bufs, int n, int rc)
{
    /* (a failed call's error is the component below's) */
    if (rc == OMPI_SUCCESS) rc = stage_drain(area, coll, comm, bufs, n);
    stage_release(bufs, n);
    return rc;
}

/* Does a call on comm have peers that wait for this rank in the component below? */
static int stage_has_peers(const struct ompi_communicator_t *comm)
{
    return OMPI_COMM_IS_INTER(comm) || ompi_comm_size((struct ompi_communicator_t *)comm) > 1;
}

/* This rank could not stage call `coll` (`rc`; the cause logged) before it entered the
 * component below's: where peers wait there for it without a bound (`peers`), the job
 * ends the way MPI_Abort on `comm` ends it (its processes, and the rest of the job);
 * alone, the error is returned.  (`name`: the communicator's, for the log.) */
static int stage_failed(struct ompi_communicator_t *comm, int peers, const char *name,
                        mca_coll_gpuring_coll_t coll, int rc)
{
    if (!peers) return rc;
    GPURING_ERROR(GPURING_SUBSYS_COLL,
                  "%s on comm %s: this rank cannot make the call (above), and its peers "
                  "would wait for it in the component below, which has no timeout: "
                  "aborting the job", mca_coll_gpuring_coll_name(coll), name);
    ompi_mpi_abort(comm, rc == OMPI_ERR_OUT_OF_RESOURCE ? MPI_ERR_NO_MEM : MPI_ERR_INTERN);
    return rc; /* (only where an abort is already under way) */
}

int mca_coll_gpuring_stage_in(mca_coll_gpuring_module_t *m, mca_coll_gpuring_coll_t coll,
                              mca_coll_gpuring_stage_buf_t *bufs, int n)
{
    const char *name = mca_coll_gpuring_comm_name(m);
    int rc = mca_coll_gpuring_stage_in_area(&m->stage, 1, coll, name, bufs, n);

    return rc == OMPI_SUCCESS ? rc
                              : stage_failed(m->comm, stage_has_peers(m->comm), name, coll, rc);
}

int mca_coll_gpuring_stage_out(mca_coll_gpuring_module_t *m, mca_coll_gpuring_coll_t coll,
                               mca_coll_gpuring_stage_buf_t *bufs, int n, int rc)
{
    return mca_coll_gpuring_stage_out_area(&m->stage, coll, mca_coll_gpuring_comm_name(m), bufs,
                                           n, rc);
}

/* ---- non-blocking calls ------------------------------------------------------------- */

#define STAGE_NB_MAGIC 0x6770727374616765ull /* "gprstage" */

/* A non-blocking call's staging, alive until its request completes; a persistent one's,
 * until its request is freed. */
struct mca_coll_gpuring_stage_nb {
    uint64_t magic; /* first: tells this record from a request (stage_nb_complete) */
    ompi_request_t *req;
    mca_coll_gpuring_coll_t coll;
    int n;
    mca_coll_gpuring_stage_buf_t bufs[STAGE_MAX_BUFS];
    mca_coll_gpuring_stage_area_t area; /* its own: calls overlap (page-locked if persistent) */
    ompi_request_complete_fn_t prev_cb; /* the request's callback before ours, chained */
    void *prev_cb_data;
    /* persistent: the request's start and free, which ours wrap; a start's completion to
     * come (armed); freed by the application while one was to come */
    int persistent, armed, freed;
    int peers;  /* stage_has_peers of the communicator: what a start that fails does */
    int failed; /* persistent, alone: this start's copy in failed (its completion says so) */
    ompi_request_start_fn_t start;
    ompi_request_free_fn_t free_;
    struct mca_coll_gpuring_stage_nb *next; /* stage_persistent's list */
    mca_coll_gpuring_request_t *over; /* not persistent: the application's request, made
                                       * before the call below starts */
    char comm[MPI_MAX_OBJECT_NAME]; /* for the log: the communicator may be freed first */
    void *shape_mem[STAGE_MAX_BUFS]; /* bufs[i].shape's arrays (stage_nb_keep_shapes) */
};

/* The persistent requests gpuring stages, each with its record. */
static struct {
    pthread_mutex_t lock;
    mca_coll_gpuring_stage_nb_t *head;
} stage_persistent = {PTHREAD_MUTEX_INITIALIZER, NULL};

/* The record of a persistent request; taken off the list where `take`. */
static mca_coll_gpuring_stage_nb_t *stage_persistent_find(ompi_request_t *req, int take)
{
    mca_coll_gpuring_stage_nb_t **at, *nb = NULL;

    pthread_mutex_lock(&stage_persistent.lock);
    for (at = &stage_persistent.head; *at != NULL; at = &(*at)->next) {
        if ((*at)->req != req) continue;
        nb = *at;
        if (take) *at = nb->next;
        break;
    }
    pthread_mutex_unlock(&stage_persistent.lock);
    return nb;
}

/*
 * The counts, displacements and datatypes a v or w span was made from, kept with the
 * record (bufs[i].shape then points at the copies): its copy back walks them when the
 * call completes, and the application's arrays need not live that long -- Open MPI
 * 4.1's Fortran bindings free the ones they convert (datatype handles; counts where
 * INTEGER is wider than int) as soon as the C call returns.  Space first (0, or -1
 * without memory), then the copies.
 */
static size_t stage_shape_displ_size(const mca_coll_gpuring_shape_t *sh)
{
    return sh->form == 2 && sh->aint ? sizeof(MPI_Aint) : sizeof(int);
}

static size_t stage_shape_bytes(const mca_coll_gpuring_shape_t *sh)
{
    const size_t n = (size_t)sh->n;

    if (sh->form == 0) return 0;
    return n * ((sh->form == 2 ? sizeof(sh->types[0]) : 0) + stage_shape_displ_size(sh) +
                sizeof(int));
}

static int stage_nb_shape_space(mca_coll_gpuring_stage_nb_t *nb,
                                const mca_coll_gpuring_stage_buf_t *bufs, int n)
{
    for (int i = 0; i < n; i++) {
        const size_t bytes = bufs[i].dir != 0 ? stage_shape_bytes(&bufs[i].shape) : 0;

        if (bytes == 0) continue;
        nb->shape_mem[i] = malloc(bytes);
        if (nb->shape_mem[i] == NULL) return -1;
    }
    return 0;
}

static void stage_nb_keep_shapes(mca_coll_gpuring_stage_nb_t *nb)
{
    for (int i = 0; i < nb->n; i++) {
        mca_coll_gpuring_shape_t *sh = &nb->bufs[i].shape;
        const size_t n = (size_t)sh->n;
        char *at = nb->shape_mem[i];

        if (at == NULL) continue;
        if (sh->form == 2) { /* (pointers, then MPI_Aints: each aligned where it starts) */
            sh->types = memcpy(at, sh->types, n * sizeof(sh->types[0]));
            at += n * sizeof(sh->types[0]);
        }
        sh->displs = memcpy(at, sh->displs, n * stage_shape_displ_size(sh));
        at += n * stage_shape_displ_size(sh);
        sh->counts = memcpy(at, sh->counts, n * sizeof(int));
    }
}

static void stage_nb_free(mca_coll_gpuring_stage_nb_t *nb)
{
    mca_coll_gpuring_request_over_drop(nb->over);
    stage_release(nb->bufs, nb->n);
    mca_coll_gpuring_stage_area_free(&nb->area);
    for (int i = 0; i < STAGE_MAX_BUFS; i++) free(nb->shape_mem[i]);
    nb->magic = 0;
    free(nb);
}

int mca_coll_gpuring_stage_nb_in(mca_coll_gpuring_module_t *m, mca_coll_gpuring_coll_t coll,
                                 mca_coll_gpuring_stage_buf_t *bufs, int n, int persistent,
                                 mca_coll_gpuring_stage_nb_t **nb_p)
{
    const char *name = mca_coll_gpuring_comm_name(m);
    const int comm_peers = stage_has_peers(m->comm);
    /* (a persistent call's *_init: no peer waits for this rank yet) */
    const int peers = !persistent && comm_peers;
    size_t total;
    int any, rc;
    mca_coll_gpuring_stage_nb_t *nb;

    *nb_p = NULL;
    any = stage_plan(bufs, n, coll, name, &total);
    if (any <= 0)
        return any < 0 ? stage_failed(m->comm, peers, name, coll, OMPI_ERROR) : OMPI_SUCCESS;
    nb = calloc(1, sizeof(*nb));
    if (nb != NULL && stage_nb_shape_space(nb, bufs, n) != 0) {
        stage_nb_free(nb);
        nb = NULL;
    }
    if (nb != NULL && !persistent) { /* (the application's request: made before the call) */
        nb->over = mca_coll_gpuring_request_over_new(m->comm);
        if (nb->over == NULL) {
            stage_nb_free(nb);
            nb = NULL;
        }
    }
    if (nb == NULL) {
        GPURING_ERROR(GPURING_SUBSYS_COLL, "%s on comm %s: no memory to stage its device "
                      "buffers", mca_coll_gpuring_coll_name(coll), name);
        stage_release(bufs, n);
        return stage_failed(m->comm, peers, name, coll, OMPI_ERR_OUT_OF_RESOURCE);
    }
    nb->magic = STAGE_NB_MAGIC;
    nb->coll = coll;
    nb->n = n;
    nb->persistent = persistent;
    nb->peers = comm_peers;
    snprintf(nb->comm, sizeof(nb->comm), "%s", name);
    rc = stage_fill(&nb->area, persistent, total, !persistent, coll, nb->comm, bufs, n);
    if (rc != OMPI_SUCCESS) {
        stage_nb_free(nb);
        return stage_failed(m->comm, peers, name, coll, rc);
    }
    memcpy(nb->bufs, bufs, (size_t)n * sizeof(bufs[0]));
    stage_nb_keep_shapes(nb);
    *nb_p = nb;
    return OMPI_SUCCESS;
}

/*
 * A persistent request's start completed: what it wrote goes back to device memory
 * before the request reads as complete, then the callback it had before ours runs.
 * Open MPI calls a request's callback with the request, but the one it chains ours
 * under (the MPI layer's, which keeps a derived datatype or user op alive:
 * ompi_coll_base_retain_*) calls ours with our data: the record, told apart by its
 * first word.
 */
static int stage_nb_complete(ompi_request_t *arg)
{
    mca_coll_gpuring_stage_nb_t *nb = ((mca_coll_gpuring_stage_nb_t *)(void *)arg)->magic ==
                                              STAGE_NB_MAGIC
                                          ? (mca_coll_gpuring_stage_nb_t *)(void *)arg
                                          : arg->req_complete_cb_data;
    ompi_request_t *req = nb->req;
    ompi_request_complete_fn_t prev = nb->prev_cb;
    int gone;

    if (nb->failed) { /* its inputs never came in: nothing goes back */
        nb->failed = 0;
        req->req_status.MPI_ERROR = MPI_ERR_OTHER;
    } else if (req->req_status.MPI_ERROR == MPI_SUCCESS &&
               stage_drain(&nb->area, nb->coll, nb->comm, nb->bufs, nb->n) != OMPI_SUCCESS) {
        req->req_status.MPI_ERROR = MPI_ERR_INTERN;
    }
    if (req->req_complete_cb_data == nb) req->req_complete_cb_data = nb->prev_cb_data;
    /* kept for the next start, unless freed while this one ran */
    pthread_mutex_lock(&stage_persistent.lock);
    nb->armed = 0;
    gone = nb->freed;
    pthread_mutex_unlock(&stage_persistent.lock);
    if (gone) stage_nb_free(nb);
    return prev != NULL ? prev(req) : 0;
}

/* A started (non-persistent) call's end, through gpuring's request over the one below
 * (coll_gpuring_request.c): the results go back unless the call failed. */
static int stage_nb_end(void *ctx, int error)
{
    mca_coll_gpuring_stage_nb_t *nb = ctx;

    if (error == MPI_SUCCESS &&
        stage_drain(&nb->area, nb->coll, nb->comm, nb->bufs, nb->n) != OMPI_SUCCESS)
        error = MPI_ERR_INTERN;
    stage_nb_free(nb);
    return error;
}

/* MPI_Start / MPI_Startall of persistent requests gpuring stages: each one's inputs
 * copied in anew, its completion armed -- before the component below's start: the
 * request is inactive, so no thread can complete it before our callback is in place
 * -- and then started.  One still active (its
 * last start not completed: erroneous, which Open MPI 4.1's MPI_Start does not check)
 * is refused, MPI_ERR_REQUEST: a second start would overwrite the staged inputs the
 * running one reads, and chain our completion to itself. */
static int stage_persistent_start(size_t count, ompi_request_t **reqs)
{
    for (size_t i = 0; i < count; i++) {
        ompi_request_t *req = reqs[i];
        mca_coll_gpuring_stage_nb_t *nb = stage_persistent_find(req, 0);
        int rc, active;

        if (nb == NULL) return OMPI_ERR_BAD_PARAM; /* not ours: cannot be */
        pthread_mutex_lock(&stage_persistent.lock);
        active = nb->armed;
        pthread_mutex_unlock(&stage_persistent.lock);
        if (active) {
            GPURING_ERROR(GPURING_SUBSYS_COLL,
                          "%s on comm %s: started while its last start is still "
                          "active (complete it first: MPI_Wait, MPI_Test)",
                          mca_coll_gpuring_coll_name(nb->coll), nb->comm);
            return MPI_ERR_REQUEST;
        }
        rc = stage_copy_in(&nb->area, nb->coll, nb->comm, nb->bufs, nb->n);
        __atomic_fetch_add(&stage_calls[nb->coll], 1, __ATOMIC_RELAXED);
        /* with peers, the job ends (the communicator may be gone: the request holds its
         * name only); alone, the request runs and its completion carries the error
         * (Open MPI 4's MPI_Startall drops a start's) */
        if (rc != OMPI_SUCCESS)
            (void)stage_failed(&ompi_mpi_comm_world.comm, nb->peers, nb->comm, nb->coll, rc);
        nb->failed = rc != OMPI_SUCCESS;
        pthread_mutex_lock(&stage_persistent.lock);
        nb->armed = 1;
        pthread_mutex_unlock(&stage_persistent.lock);
        nb->prev_cb = req->req_complete_cb;
        nb->prev_cb_data = req->req_complete_cb_data;
        req->req_complete_cb_data = nb;
        req->req_complete_cb = stage_nb_complete;
        rc = nb->start(1, &reqs[i]);
        if (rc != OMPI_SUCCESS) {
            req->req_complete_cb = nb->prev_cb; /* not started: nothing to complete */
            req->req_complete_cb_data = nb->prev_cb_data;
            nb->armed = 0;
            return rc;
        }
    }
    return OMPI_SUCCESS;
}

/* MPI_Request_free of one: the component below's free, then (where it freed it) its
 * staging -- at once, or by the completion of a start still running.  The request gets
 * its own start and free back first: the component below recycles its request objects
 * (libnbc's free list), which set them only when first made. */
static int stage_persistent_free(ompi_request_t **rptr)
{
    ompi_request_t *req = *rptr;
    mca_coll_gpuring_stage_nb_t *nb = stage_persistent_find(req, 0);
    /* what the request held: ours, or a wrapper of the MPI layer's around ours (its
     * release of the datatypes and op it retained) -- restored where the free fails */
    const ompi_request_start_fn_t start_was = req->req_start;
    const ompi_request_free_fn_t free_was = req->req_free;
    int rc, now;

    if (nb == NULL) return OMPI_ERR_BAD_PARAM;
    req->req_start = nb->start;
    req->req_free = nb->free_;
    rc = nb->free_(rptr);
    if (rc != OMPI_SUCCESS) { /* still the application's: kept, as it was */
        req->req_start = start_was;
        req->req_free = free_was;
        return rc;
    }
    pthread_mutex_lock(&stage_persistent.lock);
    for (mca_coll_gpuring_stage_nb_t **at = &stage_persistent.head; *at != NULL;
         at = &(*at)->next) {
        if (*at == nb) {
            *at = nb->next;
            break;
        }
    }
    now = !nb->armed;
    nb->freed = 1;
    pthread_mutex_unlock(&stage_persistent.lock);
    if (now) stage_nb_free(nb);
    return OMPI_SUCCESS;
}

int mca_coll_gpuring_stage_nb_out(mca_coll_gpuring_stage_nb_t *nb, int rc, ompi_request_t **reqp)
{
    ompi_request_t *req = rc == OMPI_SUCCESS ? *reqp : NULL;
    mca_coll_gpuring_request_t *over;

    if (nb == NULL) return rc;
    if (rc != OMPI_SUCCESS || req == NULL) {
        stage_nb_free(nb);
        return rc != OMPI_SUCCESS ? rc : OMPI_ERR_BAD_PARAM;
    }
    nb->req = req;
    if (nb->persistent && (req->req_start == NULL || req->req_type == OMPI_REQUEST_NOOP)) {
        stage_nb_free(nb); /* a call with nothing to move: a no-op, never started */
        return OMPI_SUCCESS;
    }
    if (nb->persistent) { /* made, not started: its starts and free are ours to wrap */
        nb->start = req->req_start;
        nb->free_ = req->req_free;
        req->req_start = stage_persistent_start;
        req->req_free = stage_persistent_free;
        pthread_mutex_lock(&stage_persistent.lock);
        nb->next = stage_persistent.head;
        stage_persistent.head = nb;
        pthread_mutex_unlock(&stage_persistent.lock);
        return OMPI_SUCCESS;
    }
    if (!REQUEST_COMPLETE(req)) {
        /* running: the application gets gpuring's request, complete once this one is and
         * the results are back (a callback armed on this one now could be missed by a
         * thread completing it meanwhile).  The request leaves nb before it is
         * published: from then on another thread's progress may end it -- stage_nb_end
         * frees nb, which must not release the request a second time (it did: the
         * application's MPI_Wait then freed it again, and its communicator lost a
         * reference each time) -- and nb is not touched again here. */
        over = nb->over;
        nb->over = NULL;
        *reqp = mca_coll_gpuring_request_over(over, req, stage_nb_end, nb);
        return OMPI_SUCCESS;
    }
    /* done inside the call (or a shared, completed request) -- perhaps by another
     * thread's progress: its status and results read after its completion */
    opal_atomic_rmb();
    rc = req->req_status.MPI_ERROR == MPI_SUCCESS
             ? stage_drain(&nb->area, nb->coll, nb->comm, nb->bufs, nb->n)
             : OMPI_SUCCESS;
    stage_nb_free(nb);
    /* results that did not come back fail the call: no request goes to the application,
     * which would never free this one */
    if (rc != OMPI_SUCCESS) (void)ompi_request_free(reqp);
    return rc;
}
