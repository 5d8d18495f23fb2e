/*
 * memkind.c -- pointer classification through the CUDA driver API, looked
 * up with dlopen(RTLD_NOLOAD): if libcuda is not in the process, every
 * pointer is host memory and CUDA is never initialized by gpuring.
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "kernels/memkind.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>

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

static memkind_cu_pointer_get_attribute_fn memkind_get_attr;

void *gpuring_cuda_driver_sym(const char *name)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

    return lib != NULL ? dlsym(lib, name) : NULL;
}

/* The loader's count of objects loaded so far (glibc's dlpi_adds): read
 * from the first object alone, without walking the list. */
static int memkind_first_object(struct dl_phdr_info *info, size_t size, void *data)
{
    *(unsigned long long *)data = size >= offsetof(struct dl_phdr_info, dlpi_subs)
                                      ? info->dlpi_adds : 0;
    return 1; /* stop after the first */
}

/* Looked up until found: the application may load CUDA after its first
 * allreduce (on host memory), and its device buffers must not pass for host
 * memory then.  While it is not found, dlopen(RTLD_NOLOAD) -- which searches
 * the library path, tens of microseconds -- runs again only after the
 * process has loaded another object; a call on host memory otherwise costs
 * one dl_iterate_phdr step.  A racing second lookup finds the same function. */
static void memkind_lookup(void)
{
    static unsigned long long looked_at_adds = ~0ull;
    unsigned long long adds = 0;

    if (__atomic_load_n(&memkind_get_attr, __ATOMIC_ACQUIRE) != NULL) return;
    dl_iterate_phdr(memkind_first_object, &adds);
    if (adds != 0 && adds == __atomic_load_n(&looked_at_adds, __ATOMIC_RELAXED)) return;
    __atomic_store_n(&memkind_get_attr,
                     (memkind_cu_pointer_get_attribute_fn)gpuring_cuda_driver_sym(
                         "cuPointerGetAttribute"),
                     __ATOMIC_RELEASE);
    __atomic_store_n(&looked_at_adds, adds, __ATOMIC_RELAXED);
}

/* The kind of ptr, with the driver as memkind_lookup last found it. */
static gpuring_mem_kind_t memkind_classify(const void *ptr, int *device_p)
{
    unsigned int type = 0, managed = 0;
    int ordinal = -1;
    gpuring_mem_kind_t kind = GPURING_MEM_HOST;

    if (device_p != NULL) *device_p = -1;
    if (memkind_get_attr == NULL || ptr == NULL) return GPURING_MEM_HOST;
    /* host memory CUDA never saw makes the driver answer an error */
    if (memkind_get_attr(&type, GPURING_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (uintptr_t)ptr) != 0) {
        return GPURING_MEM_HOST;
    }
    if (memkind_get_attr(&managed, GPURING_CU_POINTER_ATTRIBUTE_IS_MANAGED, (uintptr_t)ptr) == 0 &&
        managed) {
        kind = GPURING_MEM_MANAGED;
    } else if (type == GPURING_CU_MEMORYTYPE_DEVICE || type == GPURING_CU_MEMORYTYPE_UNIFIED) {
        kind = GPURING_MEM_DEVICE;
    }
    if (kind != GPURING_MEM_HOST && device_p != NULL &&
        memkind_get_attr(&ordinal, GPURING_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                         (uintptr_t)ptr) == 0) {
        *device_p = ordinal;
    }
    return kind;
}

gpuring_mem_kind_t gpuring_mem_kind(const void *ptr, int *device_p)
{
    memkind_lookup();
    return memkind_classify(ptr, device_p);
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
