/*
 * reduce_dev.cuh -- the device side of kernels/reduce.h: per-element
 * operators for every (type, op) gpuring runs, and gpuring_reduce_dev(),
 * the elementwise dst = a (op) b that a group of threads runs together.
 * kernels/reduce_cuda.cu launches it as a stand-alone kernel; the cuda
 * executor (later) calls it from its own kernels on each received chunk,
 * the way NCCL's reduceCopy is called by its primitives.
 *
 * CUDA only (include from .cu files).  Semantics are those of
 * gpuring_reduce_host() (kernels/reduce_host.c), bit for bit:
 *  - integer sum/prod wrap modulo 2^bits: computed in an unsigned type of
 *    at least 32 bits (so 16-bit operands never promote to signed int).
 *  - min/max are (a < b ? a : b) and (a > b ? a : b), the same nan and
 *    signed-zero behaviour as the host; the chosen operand's bits are kept.
 *  - float/double sum/prod are one ieee round-to-nearest operation
 *    (__fadd_rn & co., which the compiler never contracts into an fma).
 *    a nan result is the gpu's canonical nan, where the host (x86) would
 *    propagate an input nan's payload: the only bits that can differ.
 *  - float16 (__half) and bfloat16 (__nv_bfloat16): widen to float, one
 *    float op, round to nearest even; a nan result is 0x7fff.  min/max
 *    compare as float and keep the operand's bits.
 *  - land/lor/lxor give 0 or 1; band/bor/bxor are bitwise.
 *
 * Element types are the storage types: uint8_t .. uint64_t, int8_t ..
 * int64_t, float, double, __half, __nv_bfloat16.  Pointers must be aligned
 * to the element size; 16-byte vector accesses are used where dst, a and b
 * sit at the same offset modulo 16.
 */
#ifndef GPURING_KERNELS_REDUCE_DEV_CUH
#define GPURING_KERNELS_REDUCE_DEV_CUH

#include <stddef.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef GPURING_DEV_INLINE
#define GPURING_DEV_INLINE __device__ __forceinline__
#endif

/* 16-byte packs in flight per thread per loop trip (loads issued together) */
#ifndef GPURING_REDUCE_DEV_UNROLL
#define GPURING_REDUCE_DEV_UNROLL 4
#endif

/* ---- arithmetic type of the integer sum/prod (wraps, never signed) ------ */
template <typename T> struct gpuring_dev_uarith;
template <> struct gpuring_dev_uarith<uint8_t> { typedef unsigned int type; };
template <> struct gpuring_dev_uarith<int8_t> { typedef unsigned int type; };
template <> struct gpuring_dev_uarith<uint16_t> { typedef unsigned int type; };
template <> struct gpuring_dev_uarith<int16_t> { typedef unsigned int type; };
template <> struct gpuring_dev_uarith<uint32_t> { typedef unsigned int type; };
template <> struct gpuring_dev_uarith<int32_t> { typedef unsigned int type; };
template <> struct gpuring_dev_uarith<uint64_t> { typedef unsigned long long type; };
template <> struct gpuring_dev_uarith<int64_t> { typedef unsigned long long type; };

/* ---- 16-bit floats: widen exactly, narrow to nearest even, nan 0x7fff --- */
GPURING_DEV_INLINE float gpuring_dev_to_float(__half x) { return __half2float(x); }
GPURING_DEV_INLINE float gpuring_dev_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> GPURING_DEV_INLINE T gpuring_dev_from_float(float f);

template <> GPURING_DEV_INLINE __half gpuring_dev_from_float<__half>(float f)
{
    /* the nan bits are written out, not left to the conversion instruction */
    return f != f ? __ushort_as_half((unsigned short)0x7fffu) : __float2half_rn(f);
}

template <>
GPURING_DEV_INLINE __nv_bfloat16 gpuring_dev_from_float<__nv_bfloat16>(float f)
{
    return f != f ? __ushort_as_bfloat16((unsigned short)0x7fffu) : __float2bfloat16_rn(f);
}

/* ---- per-element operators: Op::apply(a, b) ------------------------------ */
/* generic (integer) forms; the float types are specialised below */
template <typename T> struct gpuring_dev_op_sum {
    static GPURING_DEV_INLINE T apply(T a, T b)
    {
        typedef typename gpuring_dev_uarith<T>::type U;
        return (T)((U)a + (U)b);
    }
};

template <typename T> struct gpuring_dev_op_prod {
    static GPURING_DEV_INLINE T apply(T a, T b)
    {
        typedef typename gpuring_dev_uarith<T>::type U;
        return (T)((U)a * (U)b);
    }
};

template <typename T> struct gpuring_dev_op_min {
    static GPURING_DEV_INLINE T apply(T a, T b) { return a < b ? a : b; }
};

template <typename T> struct gpuring_dev_op_max {
    static GPURING_DEV_INLINE T apply(T a, T b) { return a > b ? a : b; }
};

template <typename T> struct gpuring_dev_op_band {
    static GPURING_DEV_INLINE T apply(T a, T b) { return (T)(a & b); }
};

template <typename T> struct gpuring_dev_op_bor {
    static GPURING_DEV_INLINE T apply(T a, T b) { return (T)(a | b); }
};

template <typename T> struct gpuring_dev_op_bxor {
    static GPURING_DEV_INLINE T apply(T a, T b) { return (T)(a ^ b); }
};

template <typename T> struct gpuring_dev_op_land {
    static GPURING_DEV_INLINE T apply(T a, T b) { return (T)((a != 0) & (b != 0)); }
};

template <typename T> struct gpuring_dev_op_lor {
    static GPURING_DEV_INLINE T apply(T a, T b) { return (T)((a != 0) | (b != 0)); }
};

template <typename T> struct gpuring_dev_op_lxor {
    static GPURING_DEV_INLINE T apply(T a, T b) { return (T)((a != 0) ^ (b != 0)); }
};

/* float/double: explicit round-to-nearest intrinsics, no fma contraction */
template <> struct gpuring_dev_op_sum<float> {
    static GPURING_DEV_INLINE float apply(float a, float b) { return __fadd_rn(a, b); }
};
template <> struct gpuring_dev_op_prod<float> {
    static GPURING_DEV_INLINE float apply(float a, float b) { return __fmul_rn(a, b); }
};
template <> struct gpuring_dev_op_sum<double> {
    static GPURING_DEV_INLINE double apply(double a, double b) { return __dadd_rn(a, b); }
};
template <> struct gpuring_dev_op_prod<double> {
    static GPURING_DEV_INLINE double apply(double a, double b) { return __dmul_rn(a, b); }
};

/* 16-bit floats: computed in float */
#define GPURING_DEV_F16_OPS(_T)                                                      \
    template <> struct gpuring_dev_op_sum<_T> {                                      \
        static GPURING_DEV_INLINE _T apply(_T a, _T b)                               \
        {                                                                            \
            return gpuring_dev_from_float<_T>(                                       \
                __fadd_rn(gpuring_dev_to_float(a), gpuring_dev_to_float(b)));        \
        }                                                                            \
    };                                                                               \
    template <> struct gpuring_dev_op_prod<_T> {                                     \
        static GPURING_DEV_INLINE _T apply(_T a, _T b)                               \
        {                                                                            \
            return gpuring_dev_from_float<_T>(                                       \
                __fmul_rn(gpuring_dev_to_float(a), gpuring_dev_to_float(b)));        \
        }                                                                            \
    };                                                                               \
    template <> struct gpuring_dev_op_min<_T> {                                      \
        static GPURING_DEV_INLINE _T apply(_T a, _T b)                               \
        {                                                                            \
            return gpuring_dev_to_float(a) < gpuring_dev_to_float(b) ? a : b;        \
        }                                                                            \
    };                                                                               \
    template <> struct gpuring_dev_op_max<_T> {                                      \
        static GPURING_DEV_INLINE _T apply(_T a, _T b)                               \
        {                                                                            \
            return gpuring_dev_to_float(a) > gpuring_dev_to_float(b) ? a : b;        \
        }                                                                            \
    };

GPURING_DEV_F16_OPS(__half)
GPURING_DEV_F16_OPS(__nv_bfloat16)
#undef GPURING_DEV_F16_OPS

/* ---- 16-byte packs --------------------------------------------------------- */
template <typename T> union gpuring_dev_pack {
    uint4 v;
    T e[sizeof(uint4) / sizeof(T)];
};

template <typename T, typename Op>
GPURING_DEV_INLINE uint4 gpuring_dev_pack_apply(uint4 x, uint4 y)
{
    gpuring_dev_pack<T> px, py, pr;
    px.v = x;
    py.v = y;
#pragma unroll
    for (int k = 0; k < (int)(sizeof(uint4) / sizeof(T)); k++) {
        pr.e[k] = Op::apply(px.e[k], py.e[k]);
    }
    return pr.v;
}

/*
 * dst[i] = Op::apply(a[i], b[i]) for i < count, by threads tid = 0 ..
 * nthreads-1 of the caller's choosing (a block: threadIdx.x, blockDim.x; a
 * grid: global index, total threads).  Every participating thread must call
 * it with the same arguments but its own tid; no synchronisation inside.
 * dst may equal a or b (each element is read before it is written, by the
 * same thread); no other overlap.  Plain (coherent) loads, never the
 * read-only path, since dst may alias an input.
 *
 * When a, b and dst share their offset modulo 16, a scalar head brings
 * them to 16-byte alignment, the body moves 16-byte packs (UNROLL of them
 * per thread per trip, adjacent threads on adjacent packs), and a scalar
 * tail finishes; otherwise every element is scalar.
 */
template <typename T, typename Op>
GPURING_DEV_INLINE void gpuring_reduce_dev(T *dst, const T *a, const T *b, size_t count,
                                           size_t tid, size_t nthreads)
{
    const size_t per_pack = sizeof(uint4) / sizeof(T);
    const uintptr_t mis = (uintptr_t)dst & 15u;

    if (((uintptr_t)a & 15u) != mis || ((uintptr_t)b & 15u) != mis || mis % sizeof(T) != 0) {
        /* no common alignment: scalar, coalesced */
        for (size_t i = tid; i < count; i += nthreads) {
            dst[i] = Op::apply(a[i], b[i]);
        }
        return;
    }

    size_t head = mis == 0 ? 0 : (16u - mis) / sizeof(T);
    if (head > count) head = count;
    const size_t npacks = (count - head) / per_pack;
    const size_t body_end = head + npacks * per_pack;

    const uint4 *pa = reinterpret_cast<const uint4 *>(a + head);
    const uint4 *pb = reinterpret_cast<const uint4 *>(b + head);
    uint4 *pd = reinterpret_cast<uint4 *>(dst + head);

    /* body: UNROLL packs per trip, all loads before the first store */
    const size_t U = GPURING_REDUCE_DEV_UNROLL;
    size_t p = tid;
    for (; p + (U - 1) * nthreads < npacks; p += U * nthreads) {
        uint4 xa[GPURING_REDUCE_DEV_UNROLL], xb[GPURING_REDUCE_DEV_UNROLL];
#pragma unroll
        for (int u = 0; u < GPURING_REDUCE_DEV_UNROLL; u++) {
            xa[u] = pa[p + u * nthreads];
            xb[u] = pb[p + u * nthreads];
        }
#pragma unroll
        for (int u = 0; u < GPURING_REDUCE_DEV_UNROLL; u++) {
            pd[p + u * nthreads] = gpuring_dev_pack_apply<T, Op>(xa[u], xb[u]);
        }
    }
    for (; p < npacks; p += nthreads) {
        pd[p] = gpuring_dev_pack_apply<T, Op>(pa[p], pb[p]);
    }

    /* head [0, head) and tail [body_end, count): fewer than 2 packs' worth */
    const size_t nscalar = head + (count - body_end);
    for (size_t j = tid; j < nscalar; j += nthreads) {
        const size_t i = j < head ? j : body_end + (j - head);
        dst[i] = Op::apply(a[i], b[i]);
    }
}

#endif /* GPURING_KERNELS_REDUCE_DEV_CUH */
