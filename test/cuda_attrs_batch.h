/*
 * cuda_attrs_batch.h -- cuPointerGetAttributes for the stand-in CUDA drivers
 * (test/mpi/fake_cuda_driver.c, test/cudacpu/cudacpu_driver.c), from their own
 * cuPointerGetAttribute: several attributes in one call; for memory the
 * driver never saw, success with every value zero (as the driver answers);
 * an attribute it cannot give fails the call.  Header-only (a static function).
 */
#ifndef GPURING_TEST_CUDA_ATTRS_BATCH_H
#define GPURING_TEST_CUDA_ATTRS_BATCH_H

#include <stdint.h>
#include <string.h>

/* `known`: the driver saw ptr's memory; `one` answers one attribute (0: success) */
static int cuda_attrs_batch(int known, unsigned int n, const int *attributes, void **data,
                            uintptr_t ptr, int (*one)(void *data, int attribute, uintptr_t ptr))
{
    for (unsigned int i = 0; i < n; i++) {
        /* 4-byte values: memory type, is-managed, ordinal, IPC-capable; else 8 */
        const int a = attributes[i];
        const int rc = known ? one(data[i], a, ptr) : 0;

        if (rc != 0) return rc;
        if (!known) memset(data[i], 0, a == 2 || a == 8 || a == 9 || a == 10 ? 4 : 8);
    }
    return 0;
}

#endif /* GPURING_TEST_CUDA_ATTRS_BATCH_H */
