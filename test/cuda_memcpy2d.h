/*
 * cuda_memcpy2d.h -- cuMemcpy2DAsync's argument for the stand-in CUDA drivers
 * (test/mpi/fake_cuda_driver.c, test/cudacpu/cudacpu_driver.c): where its two sides
 * start, and whether its geometry holds.  The struct is kernels/cuda_memcpy2d.h's,
 * the one gpuring's devcopy.c passes.  Header-only (static functions).
 */
#ifndef GPURING_TEST_CUDA_MEMCPY2D_H
#define GPURING_TEST_CUDA_MEMCPY2D_H

#include "kernels/cuda_memcpy2d.h"

/* A side's first byte: host memory's from its host pointer, device and unified memory's
 * from its device pointer; 0 for an array (no stand-in has any) or no pointer. */
static uintptr_t cuda_memcpy2d_at(int type, const void *host, uintptr_t device, size_t x,
                                  size_t y, size_t pitch)
{
    uintptr_t at = type == GPURING_CU_MEMORYTYPE_HOST ? (uintptr_t)host
                   : type == GPURING_CU_MEMORYTYPE_DEVICE || type == GPURING_CU_MEMORYTYPE_UNIFIED
                       ? device
                       : 0;

    return at == 0 ? 0 : at + y * pitch + x;
}

/* The copy's two first bytes into *src_p and *dst_p: 0, or -1 where a row is wider than a
 * pitch or a side has no address (the driver's CUDA_ERROR_INVALID_VALUE). */
static int cuda_memcpy2d_ends(const gpuring_cuda_memcpy2d_t *c, uintptr_t *src_p,
                              uintptr_t *dst_p)
{
    if (c == NULL || c->width > c->src_pitch || c->width > c->dst_pitch) return -1;
    *src_p = cuda_memcpy2d_at(c->src_type, c->src_host, c->src_device, c->src_x, c->src_y,
                              c->src_pitch);
    *dst_p = cuda_memcpy2d_at(c->dst_type, c->dst_host, c->dst_device, c->dst_x, c->dst_y,
                              c->dst_pitch);
    return *src_p != 0 && *dst_p != 0 ? 0 : -1;
}

#endif /* GPURING_TEST_CUDA_MEMCPY2D_H */
