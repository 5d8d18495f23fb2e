/*
 * fake_cuda_driver.c -- a stand-in libcuda.so.1 for machines without a GPU,
 * so that CI can drive gpuring's device-buffer branch.
 *
 * It plays a CUDA driver too old for the runtime gpuring was built with
 * (cuDriverGetVersion says 12.0, cuGetProcAddress finds nothing), the way a
 * CUDA 12 node meets a component built with CUDA 13: pointer queries work,
 * every CUDA runtime call fails with cudaErrorInsufficientDriver.  The test
 * program marks ordinary host memory as device or managed memory
 * (fake_cuda_mark); cuPointerGetAttribute answers for marked ranges and
 * refuses any other pointer, as the real driver does for host memory it
 * never saw.  cuCtxGetCurrent / cuCtxSetCurrent keep a per-thread current
 * context, so the test can check that gpuring gives its caller's back.
 *
 * Built as test/mpi/fake_cuda/libcuda.so.1 (soname libcuda.so.1): a program
 * that dlopens it by path is, to dlopen("libcuda.so.1", RTLD_NOLOAD), a
 * process that loaded the CUDA driver.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* driver API values (cuda.h) */
enum {
    FAKE_CUDA_SUCCESS = 0,
    FAKE_CUDA_ERROR_INVALID_VALUE = 1,
    FAKE_CUDA_ERROR_NOT_FOUND = 500,
    FAKE_ATTR_MEMORY_TYPE = 2,
    FAKE_ATTR_BUFFER_ID = 7,
    FAKE_ATTR_IS_MANAGED = 8,
    FAKE_ATTR_DEVICE_ORDINAL = 9,
    FAKE_ATTR_IS_LEGACY_CUDA_IPC_CAPABLE = 10,
    FAKE_ATTR_RANGE_START_ADDR = 11,
    FAKE_ATTR_RANGE_SIZE = 12,
    FAKE_DRIVER_VERSION = 12000,
};

#define FAKE_MAX_RANGES 64

typedef struct {
    uintptr_t base;
    size_t bytes;
    unsigned int memtype; /* CU_MEMORYTYPE_* */
    unsigned int managed;
    int ordinal;
    unsigned long long id;
} fake_range_t;

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static fake_range_t fake_ranges[FAKE_MAX_RANGES];
static unsigned long long fake_next_id = 1;
static __thread void *fake_ctx;

/* ---- the test's side ------------------------------------------------------ */

/* Make [base, base + bytes) answer as memory of CU_MEMORYTYPE `memtype`
 * (2 device, 4 unified), managed or not, on GPU `ordinal` (-1: the driver
 * names none).  0, or -1 when the table is full. */
int fake_cuda_mark(const void *base, size_t bytes, unsigned int memtype, int managed, int ordinal)
{
    int rc = -1;

    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < FAKE_MAX_RANGES; i++) {
        if (fake_ranges[i].bytes == 0) {
            fake_ranges[i] = (fake_range_t){(uintptr_t)base, bytes, memtype,
                                            managed != 0, ordinal, fake_next_id++};
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

/* ---- the driver API --------------------------------------------------------- */

int cuDriverGetVersion(int *version)
{
    if (version == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    *version = FAKE_DRIVER_VERSION;
    return FAKE_CUDA_SUCCESS;
}

int cuInit(unsigned int flags)
{
    (void)flags;
    return FAKE_CUDA_SUCCESS;
}

/* No entry point is found: the CUDA runtime reports an insufficient driver. */
int cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags)
{
    (void)symbol, (void)version, (void)flags;
    if (pfn != NULL) *pfn = NULL;
    return FAKE_CUDA_ERROR_NOT_FOUND;
}

int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                        int *status)
{
    if (status != NULL) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return cuGetProcAddress(symbol, pfn, version, flags);
}

int cuPointerGetAttribute(void *data, int attribute, uintptr_t ptr)
{
    fake_range_t r = {0};
    int found = 0;

    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < FAKE_MAX_RANGES && !found; i++) {
        if (fake_ranges[i].bytes != 0 && ptr >= fake_ranges[i].base &&
            ptr - fake_ranges[i].base < fake_ranges[i].bytes) {
            r = fake_ranges[i];
            found = 1;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    if (!found || data == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
    case FAKE_ATTR_MEMORY_TYPE: memcpy(data, &r.memtype, sizeof(r.memtype)); break;
    case FAKE_ATTR_IS_MANAGED: memcpy(data, &r.managed, sizeof(r.managed)); break;
    case FAKE_ATTR_DEVICE_ORDINAL:
        if (r.ordinal < 0) return FAKE_CUDA_ERROR_INVALID_VALUE;
        memcpy(data, &r.ordinal, sizeof(r.ordinal));
        break;
    case FAKE_ATTR_BUFFER_ID: memcpy(data, &r.id, sizeof(r.id)); break;
    case FAKE_ATTR_IS_LEGACY_CUDA_IPC_CAPABLE: {
        int capable = !r.managed;
        memcpy(data, &capable, sizeof(capable));
        break;
    }
    case FAKE_ATTR_RANGE_START_ADDR: memcpy(data, &r.base, sizeof(r.base)); break;
    case FAKE_ATTR_RANGE_SIZE: memcpy(data, &r.bytes, sizeof(r.bytes)); break;
    default: return FAKE_CUDA_ERROR_INVALID_VALUE;
    }
    return FAKE_CUDA_SUCCESS;
}

int cuCtxGetCurrent(void **ctx)
{
    if (ctx == NULL) return FAKE_CUDA_ERROR_INVALID_VALUE;
    *ctx = fake_ctx;
    return FAKE_CUDA_SUCCESS;
}

int cuCtxSetCurrent(void *ctx)
{
    fake_ctx = ctx;
    return FAKE_CUDA_SUCCESS;
}
