/*
 * cudacpu_kernel.h -- the CUDA kernel language on the CPU runtime
 * (test/cudacpu), for C++ sources (cuda_runtime.h includes it).
 *
 * A kernel is an ordinary function.  Each block of a launch runs on one OS
 * thread; its threads are fibers of that OS thread, switched by
 * __syncthreads / __syncthreads_or (and at exit), never preempted.  So:
 *  - threadIdx / blockIdx / blockDim / gridDim are per-OS-thread variables the
 *    runtime sets before it switches to a fiber;
 *  - __shared__ is a function-local static of the OS thread (one block at a
 *    time runs there): per block, uninitialised as on a GPU;
 *  - a fiber that polls memory another block or process writes must call
 *    cudacpu_poll_pause() in its loop (through the product's poll hook), or
 *    it keeps the core the writer needs;
 *  - cudaLaunchKernel needs the kernel's parameter list, which a function
 *    address does not carry: CUDACPU_KERNEL(f) names kernel f as a launchable
 *    object (the product's kernel-address hook).
 */
#ifndef CUDACPU_KERNEL_H
#define CUDACPU_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include <type_traits>
#include <utility>

#include "vector_types.h"

/* ---- qualifiers --------------------------------------------------------------- */
/* CUDACPU_UNCHECKED_DEVICE (with AddressSanitizer): device code -- kernels, __device__
 * functions and the kernel language's own below -- is not instrumented, so that with
 * CUDACPU_POISON_DEVICE=1 (device memory poisoned whole for the host: cudacpu_memory.cc)
 * a host access to device memory is reported, where a GPU would fault, and the kernels'
 * are not.  Host code keeps every check.  (The sanitizer flavor as CI builds it checks the
 * kernels instead: their accesses past a buffer's end.) */
#if defined(__SANITIZE_ADDRESS__) && defined(CUDACPU_UNCHECKED_DEVICE)
#define CUDACPU_DEVICE_CODE __attribute__((no_sanitize_address))
#else
#define CUDACPU_DEVICE_CODE
#endif
/* (product headers mark their host-and-device functions as for nvcc where this is set) */
#define CUDACPU_KERNEL_LANGUAGE 1
#define __global__ CUDACPU_DEVICE_CODE
#define __device__ CUDACPU_DEVICE_CODE
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__
#define __restrict__ __restrict
#define __shared__ static __thread

/* ---- built-in variables ----------------------------------------------------------- */
extern __thread uint3 threadIdx;
extern __thread uint3 blockIdx;
extern __thread dim3 blockDim;
extern __thread dim3 gridDim;

extern "C" {
void cudacpu_syncthreads(void);
int cudacpu_syncthreads_or(int pred);
void cudacpu_poll_pause(void);
}

/* ---- synchronisation --------------------------------------------------------------- */
static inline void __syncthreads(void)
{
    cudacpu_syncthreads();
}

static inline int __syncthreads_or(int pred)
{
    return cudacpu_syncthreads_or(pred);
}

static inline void __threadfence_block(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void __threadfence(void)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static inline void __threadfence_system(void)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* ---- arithmetic --------------------------------------------------------------------- */
/* one IEEE operation, rounded to nearest (x86-64 SSE; nothing fuses without -mfma) */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }

#define CUDACPU_MINMAX(_T)                                                 \
    static inline _T min(_T a, _T b) { return a < b ? a : b; }            \
    static inline _T max(_T a, _T b) { return a > b ? a : b; }
CUDACPU_MINMAX(int)
CUDACPU_MINMAX(unsigned int)
CUDACPU_MINMAX(long)
CUDACPU_MINMAX(unsigned long)
CUDACPU_MINMAX(long long)
CUDACPU_MINMAX(unsigned long long)
CUDACPU_MINMAX(float)
CUDACPU_MINMAX(double)
#undef CUDACPU_MINMAX

/* ---- atomics (device scope = system scope here) ------------------------------------------ */
template <typename T> CUDACPU_DEVICE_CODE static inline T atomicAdd(T *p, T v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
template <typename T> CUDACPU_DEVICE_CODE static inline T atomicExch(T *p, T v)
{
    return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}
template <typename T> CUDACPU_DEVICE_CODE static inline T atomicCAS(T *p, T expected, T desired)
{
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return expected;
}

/* ---- kernels as launchable objects ------------------------------------------------------ */
namespace cudacpu {

#define CUDACPU_KERNEL_MAGIC 0x6b65726e656c2121ull /* "kernel!!" */

/* what cudaLaunchKernel gets as `func`: the parameter layout and a call */
struct kernel {
    uint64_t magic;
    unsigned nparams;
    const size_t *sizes;  /* of each parameter, in order */
    const size_t *aligns;
    void (*invoke)(void *const *params); /* params[i] points at parameter i */
};

template <typename F, F f> struct kernel_of;

/* A kernel parameter is a value, or a const reference: a __grid_constant__ one
 * (GPURING_DEV_GRID_PARAM), which binds to the launch's copy, shared by every
 * thread of the grid as on a GPU, instead of a copy per thread */
template <typename A> using param_t = std::remove_cv_t<std::remove_reference_t<A>>;
template <typename A>
constexpr bool param_ok = !std::is_reference_v<A> ||
                          (std::is_lvalue_reference_v<A> &&
                           std::is_const_v<std::remove_reference_t<A>>);

template <typename... A, void (*F)(A...)> struct kernel_of<void (*)(A...), F> {
    static_assert((param_ok<A> && ...), "a kernel parameter is a value or a const reference");
    template <size_t... I> static void call(void *const *p, std::index_sequence<I...>)
    {
        F(*static_cast<param_t<A> *>(p[I])...);
    }
    static void invoke(void *const *p)
    {
        call(p, std::index_sequence_for<A...>{});
    }
    static constexpr size_t sizes[sizeof...(A) + 1] = { sizeof(param_t<A>)..., 0 };
    static constexpr size_t aligns[sizeof...(A) + 1] = { alignof(param_t<A>)..., 1 };
    static inline const kernel desc = { CUDACPU_KERNEL_MAGIC, sizeof...(A), sizes, aligns,
                                        invoke };
};

} /* namespace cudacpu */

/* the `func` argument of cudaLaunchKernel & co. for kernel f (a function or a
 * template instance; commas allowed) */
#define CUDACPU_KERNEL(...)                                                              \
    ((const void *)&::cudacpu::kernel_of<decltype(&__VA_ARGS__), &__VA_ARGS__>::desc)

#endif /* CUDACPU_KERNEL_H */
