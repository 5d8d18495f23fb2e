/*
 * ipc_probe.c -- can two processes of this machine share GPU memory the way
 * gpuring's device path does?  Run by test/gpu/run_gpu_tests.sh before the
 * MPI tests on device buffers, whose failures would otherwise say little
 * (sandboxes such as gVisor may refuse cross-process CUDA IPC).
 *
 * A child process (forked before either process touches CUDA) allocates
 * device memory, zeroes it and sends its cudaIpcGetMemHandle through a
 * pipe; the parent opens it (cudaIpcMemLazyEnablePeerAccess, as
 * proxy/conn_cuda.c and proxy/ipc_buf_cuda.c do), writes a pattern, closes
 * it and tells the child, which checks every byte.  Then the parent
 * registers ordinary host memory as mapped (cudaHostRegister, as NET
 * staging does) and has the GPU write it.
 *
 * "SKIP: no CUDA device (...)" and exit 77 without a usable GPU; else the
 * last line is "N passed, N failed".  Every wait is bounded (alarm).
 */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/gpu/gpu_test.h"

#define PROBE_BYTES (1u << 20)
#define PROBE_PATTERN 0x5a
#define PROBE_ALARM_SEC 60

/* what the child sends first: its verdict on CUDA, then the handle */
typedef struct probe_msg {
    int32_t status; /* 0: handle follows; 77: no device; else a cudaError_t */
    cudaIpcMemHandle_t handle;
} probe_msg_t;

/* The exporter.  Exit 0: every byte came back as the parent wrote it. */
static int child_main(int to_parent, int from_parent)
{
    probe_msg_t msg;
    unsigned char *host = malloc(PROBE_BYTES);
    void *dev = NULL;
    char go;
    int ndev = 0;
    cudaError_t err;

    memset(&msg, 0, sizeof(msg));
    alarm(PROBE_ALARM_SEC);
    err = cudaGetDeviceCount(&ndev);
    if (err != cudaSuccess || ndev == 0) {
        msg.status = 77;
        unit_write_all(to_parent, &msg, sizeof(msg));
        return 77;
    }
    if ((err = cudaSetDevice(0)) != cudaSuccess ||
        (err = cudaMalloc(&dev, PROBE_BYTES)) != cudaSuccess ||
        (err = cudaMemset(dev, 0, PROBE_BYTES)) != cudaSuccess ||
        (err = cudaDeviceSynchronize()) != cudaSuccess ||
        (err = cudaIpcGetMemHandle(&msg.handle, dev)) != cudaSuccess) {
        msg.status = (int32_t)err;
        unit_write_all(to_parent, &msg, sizeof(msg));
        return 1;
    }
    if (unit_write_all(to_parent, &msg, sizeof(msg)) != 0 ||
        unit_read_all(from_parent, &go, 1, PROBE_ALARM_SEC * 1000) != 0 || host == NULL)
        return 1;
    if (cudaMemcpy(host, dev, PROBE_BYTES, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
    for (size_t i = 0; i < PROBE_BYTES; i++)
        if (host[i] != PROBE_PATTERN) return 2;
    return 0;
}

int main(void)
{
    int to_child[2], to_parent[2], status = 0;
    probe_msg_t msg;
    pid_t pid;
    void *peer = NULL, *hostmem = NULL, *hostdev = NULL;
    char go = 1;
    cudaError_t err;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pipe(to_child) != 0 || pipe(to_parent) != 0) {
        unit_result(0, "pipe");
        gpu_test_exit();
    }
    pid = fork(); /* before any CUDA call: a forked CUDA process is unusable */
    if (pid < 0) {
        unit_result(0, "fork");
        gpu_test_exit();
    }
    if (pid == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        _exit(child_main(to_parent[1], to_child[0]));
    }
    close(to_child[0]);
    close(to_parent[1]);
    alarm(PROBE_ALARM_SEC);

    if (unit_read_all(to_parent[0], &msg, sizeof(msg), PROBE_ALARM_SEC * 1000) != 0) {
        unit_result(0, "the exporting process sent no handle (it died?)");
        gpu_test_exit();
    }
    if (msg.status == 77 || gpu_test_device_or_skip() != 0) {
        waitpid(pid, NULL, 0);
        if (msg.status == 77) printf("SKIP: no CUDA device (the exporting process found none)\n");
        return 77;
    }
    unit_result(msg.status == 0, "exporter: cudaMalloc + cudaIpcGetMemHandle: %s",
                cudaGetErrorName((cudaError_t)msg.status));
    if (msg.status != 0) {
        waitpid(pid, NULL, 0);
        gpu_test_exit();
    }

    TEST_CUDA(cudaSetDevice(0));
    err = cudaIpcOpenMemHandle(&peer, msg.handle, cudaIpcMemLazyEnablePeerAccess);
    unit_result(err == cudaSuccess, "cudaIpcOpenMemHandle of another process's memory: %s (%s)%s",
                cudaGetErrorName(err), cudaGetErrorString(err),
                err == cudaSuccess ? "" : " -- gpuring's device path needs CUDA IPC between the "
                                          "ranks of a node; is this a sandbox that refuses it?");
    if (err == cudaSuccess) {
        TEST_CUDA(cudaMemset(peer, PROBE_PATTERN, PROBE_BYTES));
        TEST_CUDA(cudaDeviceSynchronize());
        TEST_CUDA(cudaIpcCloseMemHandle(peer));
    }
    unit_write_all(to_child[1], &go, 1);
    waitpid(pid, &status, 0);
    if (err == cudaSuccess) {
        unit_result(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                    "the exporter sees the bytes the importer wrote (child status %d)", status);
    }

    /* NET staging: ordinary host memory, registered as mapped, written by the GPU */
    if (posix_memalign(&hostmem, 4096, PROBE_BYTES) != 0) {
        unit_result(0, "posix_memalign");
        gpu_test_exit();
    }
    memset(hostmem, 0, PROBE_BYTES);
    err = cudaHostRegister(hostmem, PROBE_BYTES, cudaHostRegisterMapped | cudaHostRegisterPortable);
    unit_result(err == cudaSuccess, "cudaHostRegister(mapped) of malloc'd memory: %s (%s)",
                cudaGetErrorName(err), cudaGetErrorString(err));
    if (err == cudaSuccess) {
        TEST_CUDA(cudaHostGetDevicePointer(&hostdev, hostmem, 0));
        TEST_CUDA(cudaMemset(hostdev, PROBE_PATTERN, PROBE_BYTES));
        TEST_CUDA(cudaDeviceSynchronize());
        unit_result(((unsigned char *)hostmem)[0] == PROBE_PATTERN &&
                        ((unsigned char *)hostmem)[PROBE_BYTES - 1] == PROBE_PATTERN,
                    "the GPU writes registered host memory through its mapped address");
        TEST_CUDA(cudaHostUnregister(hostmem));
    }
    free(hostmem);
    return unit_report();
}
