/*
 * reduce_cuda.h -- gpuring_reduce_host() on the GPU: one kernel launch that
 * computes dst[i] = a[i] (op) b[i] for i < count on a CUDA stream.
 *
 * Plain C; needs no CUDA header.  Built only when configure found the
 * toolkit (the build then defines GPURING_HAVE_CUDA); the CUDA runtime is
 * linked statically and loads the driver on first use, so a build with
 * CUDA still loads on a machine without a GPU or driver.
 */
#ifndef GPURING_KERNELS_REDUCE_CUDA_H
#define GPURING_KERNELS_REDUCE_CUDA_H

#include <stddef.h>

#include "kernels/reduce.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Enqueue dst[i] = a[i] (op) b[i], i < count, on stream (a cudaStream_t;
 * NULL is the default stream of the calling thread's current device).
 * Asynchronous: returns after the launch; synchronise on the stream to see
 * the result or a fault.  dst, a and b are device-accessible memory on the
 * current device (device, managed or mapped pinned host memory), aligned
 * to the element size; dst may equal a or b, no other overlap.  Results
 * are bit-identical to gpuring_reduce_host() (kernels/reduce.h), except
 * that a float/double sum/prod yielding nan gives the gpu's canonical nan
 * where the host keeps an input nan's sign and payload.
 *
 * Fastest when dst, a and b share their offset modulo 16 (16-byte vector
 * accesses); any other alignment runs element by element.
 *
 * Returns GPURING_OK (count 0: nothing launched), GPURING_ERR_INVALID
 * (unknown type or op, NULL or misaligned pointer), GPURING_ERR_NOT_SUPPORTED
 * (op not defined on the type, see gpuring_op_supported()), or
 * GPURING_ERR_CUDA (the launch failed; logged).
 */
gpuring_status_t gpuring_reduce_cuda(void *dst, const void *a, const void *b, size_t count,
                                     gpuring_type_t type, gpuring_op_t op, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* GPURING_KERNELS_REDUCE_CUDA_H */
