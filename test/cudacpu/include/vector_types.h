/*
 * vector_types.h -- the CUDA CPU runtime's built-in vector types (test/cudacpu):
 * dim3 and the 16-byte vector types gpuring's kernels use, with CUDA's sizes and
 * alignments (a uint4 access at an address that is not a multiple of 16 is a
 * fault on a GPU; here -fsanitize=alignment reports it).  C and C++.
 */
#ifndef CUDACPU_VECTOR_TYPES_H
#define CUDACPU_VECTOR_TYPES_H

struct __attribute__((aligned(16))) uint4 {
    unsigned int x, y, z, w;
};
struct __attribute__((aligned(16))) int4 {
    int x, y, z, w;
};
struct __attribute__((aligned(16))) float4 {
    float x, y, z, w;
};
struct __attribute__((aligned(16))) ulonglong2 {
    unsigned long long x, y;
};
#ifndef __cplusplus
typedef struct uint4 uint4;
typedef struct int4 int4;
typedef struct float4 float4;
typedef struct ulonglong2 ulonglong2;
#endif

struct uint3 {
    unsigned int x, y, z;
};
#ifndef __cplusplus
typedef struct uint3 uint3;
#endif

struct dim3 {
    unsigned int x, y, z;
#ifdef __cplusplus
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
        : x(vx), y(vy), z(vz) {}
#endif
};
#ifndef __cplusplus
typedef struct dim3 dim3;
#endif

#endif /* CUDACPU_VECTOR_TYPES_H */
