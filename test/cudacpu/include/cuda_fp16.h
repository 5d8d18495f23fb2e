/*
 * cuda_fp16.h -- the CUDA CPU runtime's __half (test/cudacpu): IEEE binary16
 * storage and the conversions gpuring's kernels use.  Narrowing goes through
 * the compiler's _Float16, which rounds to nearest even as the GPU's
 * __float2half_rn does; widening is exact bit work.  C and C++.
 */
#ifndef CUDACPU_CUDA_FP16_H
#define CUDACPU_CUDA_FP16_H

#include <stdint.h>
#include <string.h>

typedef struct __attribute__((aligned(2))) __half {
    unsigned short __x;
} __half;

/* exact, by the bits (the compiler's _Float16 widening is a library call) */
static inline float __half2float(__half h)
{
    const uint32_t sign = (uint32_t)(h.__x & 0x8000u) << 16;
    const uint32_t exp = (h.__x >> 10) & 0x1fu, mant = h.__x & 0x3ffu;
    uint32_t u;
    float f;

    if (exp == 0x1f) {
        u = sign | 0x7f800000u | mant << 13; /* inf, nan (payload kept) */
    } else if (exp != 0) {
        u = sign | (exp + 112) << 23 | mant << 13;
    } else {
        f = (float)mant * 5.9604644775390625e-8f; /* subnormal or zero: mant * 2^-24 */
        return sign ? -f : f;
    }
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline __half __float2half_rn(float x)
{
    _Float16 f = (_Float16)x;
    __half h;
    memcpy(&h.__x, &f, sizeof(f));
    return h;
}

static inline __half __ushort_as_half(unsigned short bits)
{
    __half h;
    h.__x = bits;
    return h;
}

static inline unsigned short __half_as_ushort(__half h)
{
    return h.__x;
}

#endif /* CUDACPU_CUDA_FP16_H */
