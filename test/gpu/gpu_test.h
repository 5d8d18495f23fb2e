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
#include <string.h>

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

/*
 * The sections of a test to run, as a bit mask over names[] (nnames of them):
 * every one without arguments, else those named on the command line (how
 * the CPU runtime's CI runs leave out what only a GPU measures).  An unknown
 * name prints the usage and exits 2.
 */
static unsigned gpu_test_sections(int argc, char **argv, const char *const *names,
                                  unsigned nnames) __attribute__((unused));
static unsigned gpu_test_sections(int argc, char **argv, const char *const *names,
                                  unsigned nnames)
{
    unsigned mask = argc > 1 ? 0u : (1u << nnames) - 1u;

    for (int i = 1; i < argc; i++) {
        unsigned k = 0;
        while (k < nnames && strcmp(argv[i], names[k]) != 0) k++;
        if (k == nnames) {
            fprintf(stderr, "usage: %s [section...]; sections:", argv[0]);
            for (k = 0; k < nnames; k++) fprintf(stderr, " %s", names[k]);
            fprintf(stderr, " (default: all)\n");
            exit(2);
        }
        mask |= 1u << k;
    }
    return mask;
}

#endif /* GPURING_TEST_GPU_TEST_H */
