/*
 * gpu_test.h -- what the GPU tests share on top of test/unit/unit_test.h:
 * a check for the CUDA calls the test itself needs (failing one ends the
 * run with the count so far), and the probe that skips (exit 77) without a
 * usable device.
 */
#ifndef GPURING_TEST_GPU_TEST_H
#define GPURING_TEST_GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "test/unit/unit_test.h"

static void gpu_test_exit(void) __attribute__((noreturn, unused));
static void gpu_test_exit(void)
{
    exit(unit_report());
}

#define TEST_CUDA(_call)                                                               \
    do {                                                                               \
        cudaError_t _e = (_call);                                                      \
        if (_e != cudaSuccess) {                                                       \
            unit_result(0, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #_call,           \
                        cudaGetErrorName(_e), cudaGetErrorString(_e));                 \
            gpu_test_exit();                                                           \
        }                                                                              \
    } while (0)

/* 0 with a device; else prints "SKIP: no CUDA device (why)" and returns 77. */
static int gpu_test_device_or_skip(void) __attribute__((unused));
static int gpu_test_device_or_skip(void)
{
    int ndev = 0;
    cudaError_t err = cudaGetDeviceCount(&ndev);

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (err != cudaSuccess) {
        printf("SKIP: no CUDA device (cudaGetDeviceCount: %s: %s)\n", cudaGetErrorName(err),
               cudaGetErrorString(err));
        return 77;
    }
    if (ndev == 0) {
        printf("SKIP: no CUDA device (cudaGetDeviceCount found 0 devices)\n");
        return 77;
    }
    return 0;
}

#endif /* GPURING_TEST_GPU_TEST_H */
