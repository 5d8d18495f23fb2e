/*
 * cuda_memcpy2d.h -- cuMemcpy2DAsync's argument for the stand-in CUDA drivers
 * (test/mpi/fake_cuda_driver.c, test/cudacpu/cudacpu_driver.c): CUDA_MEMCPY2D
 * as cuda.h lays it out (the _v2 API's), and where each side's first byte is.
 * Header-only (a static function).
 */
#ifndef GPURING_TEST_CUDA_MEMCPY2D_H
#define GPURING_TEST_CUDA_MEMCPY2D_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t src_x, src_y;
    int src_type; /* CUmemorytype: 1 host, 2 device, 3 array, 4 unified */
    const void *src_host;
    uintptr_t src_device;
    void *src_array;
    size_t src_pitch;
    size_t dst_x, dst_y;
    int dst_type;
    void *dst_host;
    uintptr_t dst_device;
    void *dst_array;
    size_t dst_pitch;
    size_t width, height;
} cuda_memcpy2d_t;

/* A side's first byte: host memory's from its host pointer, device and unified memory's
 * from its device pointer; 0 for an array (no stand-in has any) or no pointer. */
static uintptr_t cuda_memcpy2d_at(int type, const void *host, uintptr_t device, size_t x,
                                  size_t y, size_t pitch)
{
    uintptr_t at = type == 1 ? (uintptr_t)host : type == 2 || type == 4 ? device : 0;

    return at == 0 ? 0 : at + y * pitch + x;
}

#endif /* GPURING_TEST_CUDA_MEMCPY2D_H */
