/*
 * cuda_runtime.h -- the CUDA CPU runtime's umbrella header (test/cudacpu): the
 * host API, and in C++ the kernel language (cudacpu_kernel.h), so a .cu file
 * compiles with g++ -x c++ -I test/cudacpu/include.
 */
#ifndef CUDACPU_CUDA_RUNTIME_H
#define CUDACPU_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include "cudacpu_kernel.h"
#endif

#endif /* CUDACPU_CUDA_RUNTIME_H */
