/*
 * test_memkind.c -- kernels/memkind.c's look for the CUDA driver: a call on
 * host memory asks the loader's lock-free list (the watch) whether anything
 * was loaded since the last look, and looks again (under the loader's lock:
 * dl_iterate_phdr) only then.  The driver is the stand-in of the MPI tests
 * (test/mpi/fake_cuda/libcuda.so.1, loaded by path, as an application's
 * CUDA runtime would load the real one), the other object a tiny library of
 * this test (memkind_spare.so).  dl_iterate_phdr is interposed here: the
 * test counts the looks.
 *
 *   - before any driver: host memory, and after the first look none again
 *     over 100,000 calls (the watch);
 *   - an object loaded since: one look more, then none;
 *   - that object dlclosed and the driver loaded after it: found (the watch
 *     was pinned, so its link_map still says what came after it), and
 *     memory the driver calls device memory is device memory of its GPU,
 *     other memory host memory.
 *
 * The paths come from GPURING_FAKE_CUDA_DRIVER and GPURING_MEMKIND_SPARE
 * (make check sets both); without them "SKIP" and exit 77.  The last line
 * is "N passed, N failed".
 */
#define _GNU_SOURCE /* RTLD_NEXT, dl_iterate_phdr */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/memkind.h"
#include "test/unit/unit_test.h"

#define T_CALLS 100000
#define T_BYTES 4096
#define FAKE_CU_MEMORYTYPE_DEVICE 2

typedef int (*iterate_fn)(int (*)(struct dl_phdr_info *, size_t, void *), void *);

static unsigned long looks;

/* the loader's, counted */
int dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
    static iterate_fn real;

    if (real == NULL) *(void **)&real = dlsym(RTLD_NEXT, "dl_iterate_phdr");
    looks++;
    return real(cb, data);
}

/* looks made by n calls on host memory p, each of which must say host */
static unsigned long looks_over(const void *p, int n, const char *when)
{
    const unsigned long before = looks;
    int wrong = 0;

    for (int i = 0; i < n; i++) {
        int dev = 0;
        wrong += gpuring_mem_kind(p, &dev) != GPURING_MEM_HOST || dev != -1;
    }
    EXPECT(wrong == 0, "%s: %d of %d calls did not say host memory", when, wrong, n);
    return looks - before;
}

int main(void)
{
    const char *driver_path = getenv("GPURING_FAKE_CUDA_DRIVER");
    const char *spare_path = getenv("GPURING_MEMKIND_SPARE");
    char *host = malloc(T_BYTES), *fake_dev = malloc(T_BYTES);
    int (*mark)(const void *, size_t, unsigned int, int, int);
    void *spare, *driver;
    unsigned long n;
    int dev = -2;

    if (driver_path == NULL || spare_path == NULL) {
        printf("SKIP: GPURING_FAKE_CUDA_DRIVER and GPURING_MEMKIND_SPARE name no libraries\n");
        return 77;
    }
    if (host == NULL || fake_dev == NULL) return 2;

    /* no driver: one look, then the watch */
    n = looks_over(host, 1, "no driver, first call");
    EXPECT(n == 1, "the first call made %lu looks, not 1", n);
    n = looks_over(host, T_CALLS, "no driver");
    EXPECT(n == 0, "%d calls after the first made %lu looks, not 0 (no watch pinned?)",
           T_CALLS, n);
    n = looks;
    EXPECT(!gpuring_mem_any_device(), "no driver, yet some memory may be device memory");
    EXPECT(looks == n, "gpuring_mem_any_device looked again with nothing loaded since");

    /* an object loaded since: one look, then none */
    spare = dlopen(spare_path, RTLD_NOW | RTLD_LOCAL);
    EXPECT(spare != NULL, "dlopen %s: %s", spare_path, dlerror());
    n = looks_over(host, 1, "after a load");
    EXPECT(n == 1, "the call after a load made %lu looks, not 1", n);
    n = looks_over(host, T_CALLS, "after a load");
    EXPECT(n == 0, "%d calls after that made %lu looks, not 0", T_CALLS, n);

    /* it is the watch now: pinned, a dlclose leaves it loaded */
    if (spare != NULL) dlclose(spare);
    EXPECT(dlopen(spare_path, RTLD_NOW | RTLD_NOLOAD) != NULL,
           "the watched object was unloaded by dlclose (not pinned)");

    /* the driver, loaded after the watch: found at the next call */
    driver = dlopen(driver_path, RTLD_NOW | RTLD_GLOBAL);
    EXPECT(driver != NULL, "dlopen %s: %s", driver_path, dlerror());
    if (driver == NULL) return unit_report();
    EXPECT(gpuring_mem_any_device(), "the driver is loaded, yet no memory may be device "
           "memory (not found after a load behind the watch)");
    *(void **)&mark = dlsym(driver, "fake_cuda_mark");
    EXPECT(mark != NULL && mark(fake_dev, T_BYTES, FAKE_CU_MEMORYTYPE_DEVICE, 0, 0) == 0,
           "fake_cuda_mark failed");
    EXPECT(gpuring_mem_kind(fake_dev + 100, &dev) == GPURING_MEM_DEVICE && dev == 0,
           "memory the driver calls device memory of GPU 0: kind %d, device %d (driver not "
           "found after a load behind the watch)", (int)gpuring_mem_kind(fake_dev, NULL), dev);
    EXPECT(gpuring_mem_kind(host, &dev) == GPURING_MEM_HOST && dev == -1,
           "other memory is host memory: device %d", dev);
    /* found for good: no more looks */
    n = looks;
    (void)gpuring_mem_kind(host, NULL);
    EXPECT(looks == n, "a look after the driver was found");
    return unit_report();
}
