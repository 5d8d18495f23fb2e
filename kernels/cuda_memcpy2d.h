/*
 * cuda_memcpy2d.h -- CUDA_MEMCPY2D as cuda.h lays it out for the driver's _v2 API
 * (cuMemcpy2DAsync_v2), for code built without cuda.h: kernels/devcopy.c, which
 * calls the application's driver, and the test stand-in drivers that answer it
 * (test/cuda_memcpy2d.h).
 */
#ifndef GPURING_KERNELS_CUDA_MEMCPY2D_H
#define GPURING_KERNELS_CUDA_MEMCPY2D_H

#include <stddef.h>
#include <stdint.h>

#define GPURING_CU_MEMORYTYPE_HOST 1
#define GPURING_CU_MEMORYTYPE_DEVICE 2
#define GPURING_CU_MEMORYTYPE_UNIFIED 4

typedef struct {
    size_t src_x, src_y;
    int src_type; /* CUmemorytype: host, device, array (3), unified */
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
} gpuring_cuda_memcpy2d_t;

#endif /* GPURING_KERNELS_CUDA_MEMCPY2D_H */
