/*
 * cuda_check.h -- GPURING_CUDA_CHECK and GPURING_CUDA_CHECK_GOTO, the cuda
 * runtime counterparts of GPURING_CHECK / GPURING_CHECK_GOTO (DESIGN.md,
 * convention 3): a failing cuda call is logged where it is first seen, with
 * the call's text and cuda's error name and string, and becomes
 * GPURING_ERR_CUDA.
 *
 * CUDA only: include it from sources built when the toolkit is present
 * (.cu files, or c files compiled with the cuda include path).  Usable
 * from c and c++.
 */
#ifndef GPURING_KERNELS_CUDA_CHECK_H
#define GPURING_KERNELS_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "common/gpuring_common.h"
#ifdef __cplusplus
}
#endif

/* Log a failed cuda call and take its error off this thread's last error
 * (cudaGetLastError): reported here, it must not reach the application's next
 * check as its own (PyTorch checks after every kernel it launches).  A sticky
 * error stays, as CUDA keeps it. */
#define GPURING_CUDA_LOG_FAILURE(_err, _what)                                  \
    do {                                                                       \
        (void)cudaGetLastError();                                              \
        GPURING_ERROR(GPURING_SUBSYS_KERNEL, "cuda call failed: %s: %s (%s)",  \
                      (_what), cudaGetErrorName(_err), cudaGetErrorString(_err)); \
    } while (0)

/* Return GPURING_ERR_CUDA if _call does not return cudaSuccess. */
#define GPURING_CUDA_CHECK(_call)                                              \
    do {                                                                       \
        cudaError_t _gpuring_cuerr = (_call);                                  \
        if (_gpuring_cuerr != cudaSuccess) {                                   \
            GPURING_CUDA_LOG_FAILURE(_gpuring_cuerr, #_call);                  \
            return GPURING_ERR_CUDA;                                           \
        }                                                                      \
    } while (0)

/* Store GPURING_ERR_CUDA in _st and jump to _label if _call fails. */
#define GPURING_CUDA_CHECK_GOTO(_call, _st, _label)                            \
    do {                                                                       \
        cudaError_t _gpuring_cuerr = (_call);                                  \
        if (_gpuring_cuerr != cudaSuccess) {                                   \
            GPURING_CUDA_LOG_FAILURE(_gpuring_cuerr, #_call);                  \
            (_st) = GPURING_ERR_CUDA;                                          \
            goto _label;                                                       \
        }                                                                      \
        (_st) = GPURING_OK;                                                    \
    } while (0)

#endif /* GPURING_KERNELS_CUDA_CHECK_H */
