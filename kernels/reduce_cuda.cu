/*
 * reduce_cuda.cu -- gpuring_reduce_cuda() (kernels/reduce_cuda.h): the
 * elementwise reduction of kernels/reduce.h as one grid-stride kernel per
 * (element type, op), on a caller's stream.
 *
 * The loop itself is gpuring_reduce_dev() (kernels/reduce_dev.cuh), which
 * the cuda executor shares.  Here: the kernel templates, the dispatch from
 * the (type, op) enums to a kernel, and the launch geometry.
 *
 * Dispatch folds the signed integer types onto the unsigned ones of the
 * same width for every op but min/max: two's-complement sum and product
 * wrap to the same bits, and the bitwise and logical ops do not look at a
 * sign.  64 kernels instead of 96, same results.
 *
 * Geometry: 512 threads a block; as many blocks as the data needs (about
 * UNROLL 16-byte packs per thread), at most as many as the device keeps
 * resident at once (the grid-stride loop covers the rest).  The resident
 * count is asked once per device and cached.
 */
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda_check.h"
#include "kernels/dev_hooks.cuh"
#include "kernels/reduce_cuda.h"
#include "kernels/reduce_dev.cuh"

#define GPURING_REDUCE_CUDA_THREADS 512
#define GPURING_REDUCE_CUDA_MAX_DEVICES 64

/* one thread index over the whole grid */
template <typename T, typename Op>
__global__ void __launch_bounds__(GPURING_REDUCE_CUDA_THREADS)
    gpuring_reduce_cuda_kernel(T *dst, const T *a, const T *b, size_t count)
{
    gpuring_reduce_dev<T, Op>(dst, a, b, count,
                              (size_t)blockIdx.x * blockDim.x + threadIdx.x,
                              (size_t)gridDim.x * blockDim.x);
}

typedef cudaError_t (*gpuring_reduce_cuda_launch_fn_t)(void *dst, const void *a,
                                                       const void *b, size_t count,
                                                       unsigned max_blocks,
                                                       cudaStream_t stream);

/* launch one (T, Op) kernel; cudaLaunchKernel returns this launch's own error */
template <typename T, typename Op>
static cudaError_t gpuring_reduce_cuda_launch(void *dst, const void *a, const void *b,
                                              size_t count, unsigned max_blocks,
                                              cudaStream_t stream)
{
    const size_t per_thread = (sizeof(uint4) / sizeof(T)) * GPURING_REDUCE_DEV_UNROLL;
    const size_t want = GPURING_DIV_UP(GPURING_DIV_UP(count, per_thread),
                                       (size_t)GPURING_REDUCE_CUDA_THREADS);
    const unsigned blocks = (unsigned)GPURING_MAX((size_t)1, GPURING_MIN(want, (size_t)max_blocks));
    T *d = static_cast<T *>(dst);
    const T *x = static_cast<const T *>(a);
    const T *y = static_cast<const T *>(b);
    void *args[] = { &d, &x, &y, &count };

    return cudaLaunchKernel(GPURING_DEV_KERNEL(gpuring_reduce_cuda_kernel<T, Op>), dim3(blocks),
                            dim3(GPURING_REDUCE_CUDA_THREADS), args, 0, stream);
}

/* S: the type min/max compare in (signed or not); U: same width, unsigned */
template <typename S, typename U>
static gpuring_reduce_cuda_launch_fn_t gpuring_reduce_cuda_int_fn(gpuring_op_t op)
{
    switch (op) {
    case GPURING_OP_SUM: return gpuring_reduce_cuda_launch<U, gpuring_dev_op_sum<U> >;
    case GPURING_OP_PROD: return gpuring_reduce_cuda_launch<U, gpuring_dev_op_prod<U> >;
    case GPURING_OP_MIN: return gpuring_reduce_cuda_launch<S, gpuring_dev_op_min<S> >;
    case GPURING_OP_MAX: return gpuring_reduce_cuda_launch<S, gpuring_dev_op_max<S> >;
    case GPURING_OP_BAND: return gpuring_reduce_cuda_launch<U, gpuring_dev_op_band<U> >;
    case GPURING_OP_BOR: return gpuring_reduce_cuda_launch<U, gpuring_dev_op_bor<U> >;
    case GPURING_OP_BXOR: return gpuring_reduce_cuda_launch<U, gpuring_dev_op_bxor<U> >;
    case GPURING_OP_LAND: return gpuring_reduce_cuda_launch<U, gpuring_dev_op_land<U> >;
    case GPURING_OP_LOR: return gpuring_reduce_cuda_launch<U, gpuring_dev_op_lor<U> >;
    case GPURING_OP_LXOR: return gpuring_reduce_cuda_launch<U, gpuring_dev_op_lxor<U> >;
    default: return NULL;
    }
}

template <typename T>
static gpuring_reduce_cuda_launch_fn_t gpuring_reduce_cuda_float_fn(gpuring_op_t op)
{
    switch (op) {
    case GPURING_OP_SUM: return gpuring_reduce_cuda_launch<T, gpuring_dev_op_sum<T> >;
    case GPURING_OP_PROD: return gpuring_reduce_cuda_launch<T, gpuring_dev_op_prod<T> >;
    case GPURING_OP_MIN: return gpuring_reduce_cuda_launch<T, gpuring_dev_op_min<T> >;
    case GPURING_OP_MAX: return gpuring_reduce_cuda_launch<T, gpuring_dev_op_max<T> >;
    default: return NULL; /* bitwise/logical: integers only */
    }
}

static gpuring_reduce_cuda_launch_fn_t gpuring_reduce_cuda_fn(gpuring_type_t type,
                                                              gpuring_op_t op)
{
    switch (type) {
    case GPURING_TYPE_INT8: return gpuring_reduce_cuda_int_fn<int8_t, uint8_t>(op);
    case GPURING_TYPE_UINT8: return gpuring_reduce_cuda_int_fn<uint8_t, uint8_t>(op);
    case GPURING_TYPE_INT16: return gpuring_reduce_cuda_int_fn<int16_t, uint16_t>(op);
    case GPURING_TYPE_UINT16: return gpuring_reduce_cuda_int_fn<uint16_t, uint16_t>(op);
    case GPURING_TYPE_INT32: return gpuring_reduce_cuda_int_fn<int32_t, uint32_t>(op);
    case GPURING_TYPE_UINT32: return gpuring_reduce_cuda_int_fn<uint32_t, uint32_t>(op);
    case GPURING_TYPE_INT64: return gpuring_reduce_cuda_int_fn<int64_t, uint64_t>(op);
    case GPURING_TYPE_UINT64: return gpuring_reduce_cuda_int_fn<uint64_t, uint64_t>(op);
    case GPURING_TYPE_FLOAT: return gpuring_reduce_cuda_float_fn<float>(op);
    case GPURING_TYPE_DOUBLE: return gpuring_reduce_cuda_float_fn<double>(op);
    case GPURING_TYPE_FLOAT16: return gpuring_reduce_cuda_float_fn<__half>(op);
    case GPURING_TYPE_BFLOAT16: return gpuring_reduce_cuda_float_fn<__nv_bfloat16>(op);
    default: return NULL;
    }
}

/* blocks the current device keeps resident at once; cached per device */
static unsigned gpuring_reduce_cuda_cache[GPURING_REDUCE_CUDA_MAX_DEVICES];

static gpuring_status_t gpuring_reduce_cuda_max_blocks(unsigned *max_blocks_p)
{
    int dev, sms = 0, threads_per_sm = 0;
    unsigned cached;

    GPURING_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev >= 0 && dev < GPURING_REDUCE_CUDA_MAX_DEVICES) {
        cached = __atomic_load_n(&gpuring_reduce_cuda_cache[dev], __ATOMIC_RELAXED);
        if (cached != 0) {
            *max_blocks_p = cached;
            return GPURING_OK;
        }
    }
    GPURING_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    GPURING_CUDA_CHECK(cudaDeviceGetAttribute(&threads_per_sm,
                                              cudaDevAttrMaxThreadsPerMultiProcessor, dev));
    cached = (unsigned)GPURING_MAX(1, sms) *
             (unsigned)GPURING_MAX(1, threads_per_sm / GPURING_REDUCE_CUDA_THREADS);
    if (dev >= 0 && dev < GPURING_REDUCE_CUDA_MAX_DEVICES) {
        __atomic_store_n(&gpuring_reduce_cuda_cache[dev], cached, __ATOMIC_RELAXED);
    }
    *max_blocks_p = cached;
    return GPURING_OK;
}

extern "C" gpuring_status_t gpuring_reduce_cuda(void *dst, const void *a, const void *b,
                                                size_t count, gpuring_type_t type,
                                                gpuring_op_t op, void *stream)
{
    gpuring_reduce_cuda_launch_fn_t fn;
    size_t es = gpuring_type_size(type);
    unsigned max_blocks;
    cudaError_t err;

    if (es == 0 || (unsigned)op >= (unsigned)GPURING_OP_COUNT) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "reduce_cuda: invalid type %d or op %d", (int)type,
                      (int)op);
        return GPURING_ERR_INVALID;
    }
    fn = gpuring_reduce_cuda_fn(type, op);
    if (fn == NULL) {
        GPURING_DEBUG(GPURING_SUBSYS_KERNEL, "reduce_cuda: op %s not defined on type %s",
                      gpuring_op_name(op), gpuring_type_name(type));
        return GPURING_ERR_NOT_SUPPORTED;
    }
    if (count == 0) {
        return GPURING_OK;
    }
    if (dst == NULL || a == NULL || b == NULL ||
        ((uintptr_t)dst | (uintptr_t)a | (uintptr_t)b) % es != 0) {
        GPURING_ERROR(GPURING_SUBSYS_KERNEL,
                      "reduce_cuda: dst %p, a %p, b %p not all non-null and aligned to "
                      "%zu-byte %s elements", dst, a, b, es, gpuring_type_name(type));
        return GPURING_ERR_INVALID;
    }
    GPURING_CHECK(gpuring_reduce_cuda_max_blocks(&max_blocks));

    err = fn(dst, a, b, count, max_blocks, (cudaStream_t)stream);
    if (err != cudaSuccess) {
        GPURING_CUDA_LOG_FAILURE(err, "cudaLaunchKernel(reduce)");
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "reduce_cuda: %s %s count %zu failed to launch",
                      gpuring_type_name(type), gpuring_op_name(op), count);
        return GPURING_ERR_CUDA;
    }
    return GPURING_OK;
}
