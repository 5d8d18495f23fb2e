/* exec_cuda_cpu.cc -- kernels/exec_cuda.cu, unchanged, compiled by the host C++
 * compiler against the CUDA CPU runtime (test/cudacpu/include). */
#include "kernels/exec_cuda.cu"
