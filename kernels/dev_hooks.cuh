/*
 * dev_hooks.cuh -- the only three places where gpuring's CUDA sources differ
 * between nvcc and the CUDA CPU runtime of test/cudacpu (DESIGN.md, "Device
 * code, with and without a GPU"), whose cuda_runtime_api.h defines CUDACPU:
 *
 *  GPURING_DEV_KERNEL(k)     the `func` argument of cudaLaunchKernel for
 *                            kernel k (a template instance may be given, commas
 *                            and all).  nvcc: k's host stub.  CPU runtime: an
 *                            object that knows k's parameter list.
 *  GPURING_DEV_GRID_PARAM(T) a kernel parameter of type T that the grid only
 *                            reads, one copy for the whole grid.  nvcc:
 *                            const __grid_constant__ T, read in place from the
 *                            parameter space.  CPU runtime: const T &, a
 *                            reference to the launch's copy (by value, each of a
 *                            block's threads would copy it onto its fiber stack:
 *                            13 KiB for exec_cuda_desc_t).
 *  GPURING_DEV_POLL_PAUSE()  called once per trip of a device loop that polls
 *                            memory another block, GPU or process writes.
 *                            nvcc: nothing.  CPU runtime: gives up the core now
 *                            and then (blocks are OS threads there, and more
 *                            of them spin than there are cores).
 */
#ifndef GPURING_KERNELS_DEV_HOOKS_CUH
#define GPURING_KERNELS_DEV_HOOKS_CUH

#ifdef CUDACPU
#define GPURING_DEV_KERNEL(...) CUDACPU_KERNEL(__VA_ARGS__)
#define GPURING_DEV_GRID_PARAM(T) const T &
#define GPURING_DEV_POLL_PAUSE() cudacpu_poll_pause()
#else
#define GPURING_DEV_KERNEL(...) ((const void *)(__VA_ARGS__))
#define GPURING_DEV_GRID_PARAM(T) const __grid_constant__ T
#define GPURING_DEV_POLL_PAUSE() ((void)0)
#endif

#endif /* GPURING_KERNELS_DEV_HOOKS_CUH */
