/*
 * memkind.c -- pointer classification through the CUDA driver API, looked
 * up with dlopen(RTLD_NOLOAD): if libcuda is not in the process, every
 * pointer is host memory and CUDA is never initialized by gpuring.
 */
#define _GNU_SOURCE /* dl_iterate_phdr, dladdr1, dlinfo, RTLD_NODELETE */
#include "kernels/memkind.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>

/* From the CUDA driver API (cuda.h), which the build may not have. */
#define GPURING_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
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

/* The kind of ptr, with the driver as memkind_lookup last found it. */
static gpuring_mem_kind_t memkind_classify(const void *ptr, int *device_p)
{
    unsigned int type = 0, managed = 0;
    int ordinal = -1, batched = 0;
    gpuring_mem_kind_t kind;

    if (device_p != NULL) *device_p = -1;
    if (memkind_get_attr == NULL || ptr == NULL) return GPURING_MEM_HOST;
    if (memkind_get_attrs != NULL) { /* one driver call (a call's path asks twice) */
        int attrs[3] = {GPURING_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                        GPURING_CU_POINTER_ATTRIBUTE_IS_MANAGED,
                        GPURING_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
        void *data[3] = {&type, &managed, &ordinal};

        batched = memkind_get_attrs(3, attrs, data, (uintptr_t)ptr) == 0;
    }
    if (!batched) { /* one by one (an attribute the batch cannot give: memory of no GPU) */
        type = managed = 0;
        ordinal = -1;
        /* host memory CUDA never saw makes the driver answer an error */
        if (memkind_get_attr(&type, GPURING_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (uintptr_t)ptr) != 0)
            return GPURING_MEM_HOST;
        if (memkind_get_attr(&managed, GPURING_CU_POINTER_ATTRIBUTE_IS_MANAGED,
                             (uintptr_t)ptr) != 0) {
            managed = 0;
        }
    }
    kind = memkind_of(type, managed);
    if (kind != GPURING_MEM_HOST && device_p != NULL) {
        if (!batched && memkind_get_attr(&ordinal, GPURING_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                         (uintptr_t)ptr) != 0) {
            ordinal = -1;
        }
        *device_p = ordinal;
    }
    return kind;
}

gpuring_mem_kind_t gpuring_mem_kind(const void *ptr, int *device_p)
{
    memkind_lookup();
    return memkind_classify(ptr, device_p);
}

int gpuring_mem_any_device(void)
{
    memkind_lookup();
    return memkind_get_attr != NULL;
}

void gpuring_mem_kind_both(const void *a, const void *b, gpuring_mem_kind_t kinds[2],
                           int devices[2])
{
    memkind_lookup();
    kinds[0] = memkind_classify(a, &devices[0]);
    if (b == a) {
        kinds[1] = kinds[0];
        devices[1] = devices[0];
    } else {
        kinds[1] = memkind_classify(b, &devices[1]);
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
