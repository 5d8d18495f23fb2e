/*
 * cuda_fp16.h -- the CUDA CPU runtime's __half (test/cudacpu): IEEE binary16
 * storage and the conversions gpuring's kernels use.  Conversions go through
 * the compiler's _Float16, which rounds to nearest even as the GPU's
 * __float2half_rn does.  C and C++.
 */
#ifndef CUDACPU_CUDA_FP16_H
#define CUDACPU_CUDA_FP16_H

#include <string.h>

typedef struct __attribute__((aligned(2))) __half {
    unsigned short __x;
} __half;

static inline float __half2float(__half h)
{
    _Float16 f;
    memcpy(&f, &h.__x, sizeof(f));
    return (float)f;
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
