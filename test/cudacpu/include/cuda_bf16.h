/*
 * cuda_bf16.h -- the CUDA CPU runtime's __nv_bfloat16 (test/cudacpu): the top
 * 16 bits of an IEEE binary32, and the conversions gpuring's kernels use
 * (float to bfloat16 rounds to nearest even; a nan stays a quiet nan).
 * C and C++.
 */
#ifndef CUDACPU_CUDA_BF16_H
#define CUDACPU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

typedef struct __attribute__((aligned(2))) __nv_bfloat16 {
    unsigned short __x;
} __nv_bfloat16;

static inline float __bfloat162float(__nv_bfloat16 b)
{
    const uint32_t u = (uint32_t)b.__x << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline __nv_bfloat16 __float2bfloat16_rn(float x)
{
    uint32_t u;
    __nv_bfloat16 b;

    memcpy(&u, &x, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        b.__x = (unsigned short)((u >> 16) | 0x40u); /* nan: keep it quiet */
    } else {
        b.__x = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    return b;
}

static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits)
{
    __nv_bfloat16 b;
    b.__x = bits;
    return b;
}

static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b)
{
    return b.__x;
}

#endif /* CUDACPU_CUDA_BF16_H */
