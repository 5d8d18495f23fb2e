/* reduce_cuda_cpu.cc -- kernels/reduce_cuda.cu, unchanged, compiled by the host C++
 * compiler against the CUDA CPU runtime (test/cudacpu/include). */
#include "kernels/reduce_cuda.cu"
