/*
 * memkind.c -- pointer classification through the CUDA driver API, looked
 * up with dlopen(RTLD_NOLOAD): if libcuda is not in the process, every
 * pointer is host memory and CUDA is never initialized by gpuring.
 */
#define _GNU_SOURCE /* dl_iterate_phdr, dladdr1, dlinfo, RTLD_NODELETE */
#include "kernels/memkind.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

/* From the CUDA driver API (cuda.h), which the build may not have. */
#define GPURING_CU_POINTER_ATTRIBUTE_CONTEXT 1
#define GPURING_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define GPURING_CU_POINTER_ATTRIBUTE_DEVICE_POINTER 3
#define GPURING_CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define GPURING_CU_POINTER_ATTRIBUTE_BUFFER_ID 7
#define GPURING_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define GPURING_CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE 10
#define GPURING_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR 11
#define GPURING_CU_POINTER_ATTRIBUTE_RANGE_SIZE 12
#define GPURING_CU_MEMORYTYPE_DEVICE 2
#define GPURING_CU_MEMORYTYPE_UNIFIED 4

typedef int (*memkind_cu_pointer_get_attribute_fn)(void *data, int attribute, uintptr_t ptr);
/* cuPointerGetAttributes: several attributes in one driver call (success, zeros, for
 * memory the driver never saw); may be missing */
typedef int (*memkind_cu_pointer_get_attributes_fn)(unsigned int n, int *attributes, void **data,
                                                    uintptr_t ptr);

static memkind_cu_pointer_get_attribute_fn memkind_get_attr;
static memkind_cu_pointer_get_attributes_fn memkind_get_attrs; /* set before memkind_get_attr */

/* the primary-context calls (gpuring_cuda_primary_ctx), set before memkind_get_attr; the
 * state query may be missing (then no memory is told from another context's) */
typedef int (*memkind_device_get_fn)(int *dev, int ordinal);
typedef int (*memkind_primary_state_fn)(int dev, unsigned int *flags, int *active);
typedef int (*memkind_primary_retain_fn)(void **ctx, int dev);
typedef int (*memkind_ctx_fn)(void **ctx);
typedef int (*memkind_ctx_set_fn)(void *ctx);
static memkind_device_get_fn memkind_device_get;
static memkind_primary_state_fn memkind_primary_state;
static memkind_primary_retain_fn memkind_primary_retain;
static memkind_ctx_fn memkind_ctx_get;
static memkind_ctx_set_fn memkind_ctx_set;

void *gpuring_cuda_driver_sym(const char *name)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

    return lib != NULL ? dlsym(lib, name) : NULL;
}

/*
 * Has the process loaded an object since the driver was last looked for?
 * The loader links each object it loads at the end of its list (struct
 * link_map, <link.h>), so the object that was last at the look -- the watch
 * -- has a successor once anything is loaded after it.  Its l_next is read
 * without the loader's lock: dl_iterate_phdr, the locked way to ask, cost a
 * small call on host memory a tenth of its time (a lock and an unlock, each
 * a locked instruction that waits for the call's last stores to drain).
 * The watch is pinned (dlopen RTLD_NOLOAD | RTLD_NODELETE: a dlclose no
 * longer unloads that one object), so its link_map is never freed or
 * unlinked under the reader.  Where no watch can be pinned (the last object
 * is the program or the vDSO, which have no path to open), every call looks
 * under the lock, as before.
 */
static struct link_map *memkind_watch;

typedef struct memkind_tail {
    struct link_map *from; /* an object of the list: this file's */
    struct link_map *last; /* out: the list's last object */
    char name[4096];       /* out: its path */
} memkind_tail_t;

/* Under the loader's list lock (a dl_iterate_phdr callback): walk to the end. */
static int memkind_tail_find(struct dl_phdr_info *info, size_t size, void *data)
{
    memkind_tail_t *t = data;
    struct link_map *l = t->from;

    (void)info;
    (void)size;
    while (l->l_next != NULL) l = l->l_next;
    t->last = l;
    snprintf(t->name, sizeof(t->name), "%s", l->l_name != NULL ? l->l_name : "");
    return 1; /* once is enough */
}

/* The list's last object, pinned; NULL if it cannot be (then no watch). */
static struct link_map *memkind_watch_pin(void)
{
    memkind_tail_t t = {NULL, NULL, ""};
    struct link_map *pinned = NULL;
    Dl_info info;
    void *h;

    if (dladdr1((void *)&memkind_watch_pin, &info, (void **)&t.from, RTLD_DL_LINKMAP) == 0 ||
        t.from == NULL) {
        return NULL;
    }
    dl_iterate_phdr(memkind_tail_find, &t);
    if (t.last == NULL || t.name[0] == '\0') return NULL;
    /* outside the callback: dlopen takes the loader's locks itself */
    h = dlopen(t.name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    if (h == NULL) return NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &pinned) != 0 || pinned != t.last) pinned = NULL;
    dlclose(h); /* the reference dlopen took; RTLD_NODELETE keeps the object */
    return pinned;
}

/* Looked up until found: the application may load CUDA after its first
 * allreduce (on host memory), and its device buffers must not pass for host
 * memory then.  While it is not found, the lookup (dlopen(RTLD_NOLOAD),
 * which searches the library path: tens of microseconds) runs again only
 * once the process has loaded another object: the watch is pinned first, so
 * an object loaded after the lookup is linked after the watch.  A racing
 * second lookup finds the same function; the watch is published only by a
 * lookup that found nothing after pinning it. */
static void memkind_lookup(void)
{
    struct link_map *w;
    memkind_cu_pointer_get_attribute_fn fn;

    if (__atomic_load_n(&memkind_get_attr, __ATOMIC_ACQUIRE) != NULL) return;
    w = __atomic_load_n(&memkind_watch, __ATOMIC_ACQUIRE);
    if (w != NULL && __atomic_load_n(&w->l_next, __ATOMIC_ACQUIRE) == NULL) return;
    w = memkind_watch_pin();
    fn = (memkind_cu_pointer_get_attribute_fn)gpuring_cuda_driver_sym("cuPointerGetAttribute");
    if (fn != NULL) {
        __atomic_store_n(&memkind_get_attrs,
                         (memkind_cu_pointer_get_attributes_fn)gpuring_cuda_driver_sym(
                             "cuPointerGetAttributes"),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&memkind_device_get,
                         (memkind_device_get_fn)gpuring_cuda_driver_sym("cuDeviceGet"),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&memkind_primary_state,
                         (memkind_primary_state_fn)gpuring_cuda_driver_sym(
                             "cuDevicePrimaryCtxGetState"),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&memkind_primary_retain,
                         (memkind_primary_retain_fn)gpuring_cuda_driver_sym(
                             "cuDevicePrimaryCtxRetain"),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&memkind_ctx_get,
                         (memkind_ctx_fn)gpuring_cuda_driver_sym("cuCtxGetCurrent"),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&memkind_ctx_set,
                         (memkind_ctx_set_fn)gpuring_cuda_driver_sym("cuCtxSetCurrent"),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&memkind_get_attr, fn, __ATOMIC_RELEASE);
    } else {
        __atomic_store_n(&memkind_watch, w, __ATOMIC_RELEASE);
    }
}

/* The kind the driver's answers make of memory: managed, device (or unified), else host. */
static gpuring_mem_kind_t memkind_of(unsigned int type, unsigned int managed)
{
    if (managed) return GPURING_MEM_MANAGED;
    return type == GPURING_CU_MEMORYTYPE_DEVICE || type == GPURING_CU_MEMORYTYPE_UNIFIED
               ? GPURING_MEM_DEVICE
               : GPURING_MEM_HOST;
}

/* ---- contexts --------------------------------------------------------------------- */
#define MEMKIND_MAX_DEVICES 64

/* Each device's primary context, retained at first need and kept for the process
 * (as the CUDA runtime keeps it). */
static void *memkind_primaries[MEMKIND_MAX_DEVICES];
static pthread_mutex_t memkind_primary_lock = PTHREAD_MUTEX_INITIALIZER;

void *gpuring_cuda_primary_ctx(int ordinal, int make)
{
    unsigned int flags = 0;
    int dev = -1, active = 0;
    void *ctx;

    if (ordinal < 0 || ordinal >= MEMKIND_MAX_DEVICES) return NULL;
    ctx = __atomic_load_n(&memkind_primaries[ordinal], __ATOMIC_ACQUIRE);
    if (ctx != NULL) return ctx;
    memkind_lookup();
    if (memkind_get_attr == NULL || memkind_device_get == NULL ||
        memkind_primary_retain == NULL || memkind_device_get(&dev, ordinal) != 0) {
        return NULL;
    }
    /* an inactive primary context is not made only to be compared */
    if (!make && (memkind_primary_state == NULL ||
                  memkind_primary_state(dev, &flags, &active) != 0 || !active)) {
        return NULL;
    }
    pthread_mutex_lock(&memkind_primary_lock);
    ctx = memkind_primaries[ordinal];
    if (ctx == NULL && memkind_primary_retain(&ctx, dev) != 0) ctx = NULL;
    __atomic_store_n(&memkind_primaries[ordinal], ctx, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&memkind_primary_lock);
    return ctx;
}

void gpuring_cuda_ctx_enter(void *ctx, gpuring_cuda_scope_t *scope)
{
    memkind_lookup();
    scope->saved = NULL;
    scope->switched = 0;
    if (memkind_ctx_get == NULL || memkind_ctx_set == NULL) return;
    if (memkind_ctx_get(&scope->saved) != 0) scope->saved = NULL;
    if (ctx != NULL && ctx != scope->saved && memkind_ctx_set(ctx) == 0) scope->switched = 1;
}

void gpuring_cuda_ctx_leave(const gpuring_cuda_scope_t *scope)
{
    if (scope->switched) (void)memkind_ctx_set(scope->saved);
}

/*
 * Is device memory at ptr, of context ctx (the driver's answer; NULL: of no context,
 * as stream-ordered pools' and cuMemCreate's memory) on GPU `ordinal`, out of reach
 * of kernels of that GPU's primary context -- memory of a context the application
 * made (cuCtxCreate: PyCUDA's make_context), or of one made current before the CUDA
 * runtime's first call, which the runtime then took for its own?  Such a context
 * has an address space of its own: a kernel of another faults on its memory.  Memory
 * of the primary context, or of none, is in reach at once; of any other context the
 * driver is asked, with the primary context current, where kernels there see ptr
 * (CU_POINTER_ATTRIBUTE_DEVICE_POINTER: an error where they cannot), so that a
 * context sharing the primary's address space passes.  0 where the driver cannot
 * say (no primary-context calls: the old answer).
 */
static int memkind_other_ctx(const void *ptr, void *ctx, int ordinal)
{
    gpuring_cuda_scope_t scope;
    uintptr_t seen = 0;
    void *primary;
    int rc = -1;

    if (ctx == NULL || ordinal < 0 || memkind_primary_state == NULL) return 0;
    primary = gpuring_cuda_primary_ctx(ordinal, 0);
    if (ctx == primary) return 0;
    /* NULL: the primary context is not active (or cannot be had): not of it */
    if (primary == NULL) return 1;
    gpuring_cuda_ctx_enter(primary, &scope);
    if (scope.switched || scope.saved == primary)
        rc = memkind_get_attr(&seen, GPURING_CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                              (uintptr_t)ptr);
    gpuring_cuda_ctx_leave(&scope);
    return rc != 0 || seen != (uintptr_t)ptr;
}

/* The kind of ptr, with the driver as memkind_lookup last found it; *other_p (may be
 * NULL) 1 for device memory its GPU's primary context cannot reach. */
static gpuring_mem_kind_t memkind_classify(const void *ptr, int *device_p, int *other_p)
{
    unsigned int type = 0, managed = 0;
    int ordinal = -1, batched = 0;
    void *ctx = NULL;
    gpuring_mem_kind_t kind;

    if (device_p != NULL) *device_p = -1;
    if (other_p != NULL) *other_p = 0;
    if (memkind_get_attr == NULL || ptr == NULL) return GPURING_MEM_HOST;
    if (memkind_get_attrs != NULL) { /* one driver call (a call's path asks twice) */
        int attrs[4] = {GPURING_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                        GPURING_CU_POINTER_ATTRIBUTE_IS_MANAGED,
                        GPURING_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                        GPURING_CU_POINTER_ATTRIBUTE_CONTEXT};
        void *data[4] = {&type, &managed, &ordinal, &ctx};

        batched = memkind_get_attrs(4, attrs, data, (uintptr_t)ptr) == 0;
    }
    if (!batched) { /* one by one (an attribute the batch cannot give: memory of no GPU) */
        type = managed = 0;
        ordinal = -1;
        ctx = NULL;
        /* host memory CUDA never saw makes the driver answer an error */
        if (memkind_get_attr(&type, GPURING_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (uintptr_t)ptr) != 0)
            return GPURING_MEM_HOST;
        if (memkind_get_attr(&managed, GPURING_CU_POINTER_ATTRIBUTE_IS_MANAGED,
                             (uintptr_t)ptr) != 0) {
            managed = 0;
        }
    }
    kind = memkind_of(type, managed);
    if (kind == GPURING_MEM_HOST || (device_p == NULL && other_p == NULL)) return kind;
    if (!batched && memkind_get_attr(&ordinal, GPURING_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                     (uintptr_t)ptr) != 0) {
        ordinal = -1;
    }
    /* a context the driver cannot name: none (the old answer) */
    if (!batched && other_p != NULL &&
        memkind_get_attr(&ctx, GPURING_CU_POINTER_ATTRIBUTE_CONTEXT, (uintptr_t)ptr) != 0) {
        ctx = NULL;
    }
    if (device_p != NULL) *device_p = ordinal;
    if (other_p != NULL)
        *other_p = kind == GPURING_MEM_DEVICE && memkind_other_ctx(ptr, ctx, ordinal);
    return kind;
}

gpuring_mem_kind_t gpuring_mem_kind(const void *ptr, int *device_p)
{
    memkind_lookup();
    return memkind_classify(ptr, device_p, NULL);
}

int gpuring_mem_any_device(void)
{
    memkind_lookup();
    return memkind_get_attr != NULL;
}

void gpuring_mem_kind_both(const void *a, const void *b, gpuring_mem_kind_t kinds[2],
                           int devices[2], int other_ctx[2])
{
    memkind_lookup();
    kinds[0] = memkind_classify(a, &devices[0], &other_ctx[0]);
    if (b == a) {
        kinds[1] = kinds[0];
        devices[1] = devices[0];
        other_ctx[1] = other_ctx[0];
    } else {
        kinds[1] = memkind_classify(b, &devices[1], &other_ctx[1]);
    }
}

int gpuring_mem_range(const void *ptr, gpuring_mem_range_t *range_p)
{
    unsigned long long buffer_id = 0;
    uintptr_t base = 0;
    size_t bytes = 0;
    int capable = 0;

    memkind_lookup();
    if (memkind_get_attr == NULL || ptr == NULL) return -1;
    if (memkind_get_attr(&base, GPURING_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, (uintptr_t)ptr) !=
            0 ||
        memkind_get_attr(&bytes, GPURING_CU_POINTER_ATTRIBUTE_RANGE_SIZE, (uintptr_t)ptr) != 0 ||
        memkind_get_attr(&buffer_id, GPURING_CU_POINTER_ATTRIBUTE_BUFFER_ID, (uintptr_t)ptr) != 0) {
        return -1;
    }
    /* older drivers do not know the attribute: then only IPC itself can tell */
    if (memkind_get_attr(&capable, GPURING_CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                         (uintptr_t)ptr) != 0) {
        capable = 1;
    }
    range_p->base = base;
    range_p->bytes = bytes;
    range_p->buffer_id = buffer_id;
    range_p->ipc_capable = capable != 0;
    return 0;
}

const char *gpuring_mem_kind_name(gpuring_mem_kind_t kind)
{
    switch (kind) {
    case GPURING_MEM_HOST: return "host";
    case GPURING_MEM_DEVICE: return "device";
    case GPURING_MEM_MANAGED: return "managed";
    default: return "unknown";
    }
}
