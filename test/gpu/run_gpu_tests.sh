#!/bin/sh
# run_gpu_tests.sh -- gpuring's GPU tests: test/gpu/test_reduce_cuda (the CUDA
# reduction kernels against the host primitive, plus a bandwidth table) and
# test/gpu/test_exec_cuda (the CUDA executor: n ranks on one GPU);
# the MPI tests on device buffers go here later.  Not run by make check: CI has
# no GPU.  The last line sums every test: "N passed, N failed"; exit 0 when
# none failed.  Without a GPU: "SKIP: no GPU (...)", "0 passed, 0 failed",
# exit 0.
#
# On the GPU machine.  The device tool copies the working tree (tracked files
# and untracked ones git does not ignore), not the build, so either
#   a) build here and carry the binaries: `make check` (or
#      `make test/gpu/test_reduce_cuda test/gpu/test_exec_cuda`) builds them;
#      they need nothing but libc there (the CUDA runtime is linked
#      statically; no MPI, UCX or hwloc); then run
#          run(command="test/gpu/run_gpu_tests.sh",
#              carry=["test/gpu/test_reduce_cuda", "test/gpu/test_exec_cuda"])
#   b) or let it build there: when no built binary is found (or
#      GPURING_GPU_REBUILD=1), this script compiles standalone ones
#      with that machine's nvcc, from the sources alone (no
#      configure: that machine has no Open MPI headers, UCX or hwloc), for the
#      GPU's own architecture (GPURING_CUDA_ARCH=90 to choose), into a
#      temporary directory.  run(command="test/gpu/run_gpu_tests.sh").
# Logs: GPURING_GPU_OUT=DIR (e.g. $OUT on the device machine) gets a copy of
# each test's output.  GPURING_TEST_SEED is passed on to the tests.
#
# Usage: test/gpu/run_gpu_tests.sh   (from anywhere; GPURING_BUILDDIR names the
# build tree when it is not the source tree)

top=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${GPURING_BUILDDIR:-$top}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuring_gpu.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

total_pass=0
total_fail=0

finish() {
    echo "$total_pass passed, $total_fail failed"
    [ "$total_fail" -eq 0 ]
    exit $?
}

skip() {
    echo "SKIP: no GPU ($1)"
    finish
}

# ---- is there a GPU? (the test program asks cudaGetDeviceCount itself too) -----
smi=""
if command -v nvidia-smi >/dev/null 2>&1; then
    if nvidia-smi -L >"$tmp/smi" 2>&1; then
        smi=$(head -n 1 "$tmp/smi")
    else
        smi_err=$(head -n 1 "$tmp/smi")
    fi
fi

# ---- find or build test_reduce_cuda -----------------------------------------------
find_nvcc() {
    if command -v nvcc >/dev/null 2>&1; then
        command -v nvcc
    elif [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
        echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
    fi
}

# find_or_build NAME SOURCES...: sets $bin to the built NAME, or to a standalone build
find_or_build() {
    name=$1
    shift
    bin="$builddir/test/gpu/$name"
    if [ "${GPURING_GPU_REBUILD:-0}" != 1 ] && [ -x "$bin" ]; then
        return 0
    fi
    nvcc=$(find_nvcc)
    if [ -z "$nvcc" ]; then
        if [ -z "$smi" ]; then
            skip "nvidia-smi: ${smi_err:-not found}; no test binary at $bin and no nvcc to build one"
        fi
        echo "FAIL: a GPU is present ($smi) but $bin is not built and no nvcc was found"
        total_fail=$((total_fail + 1))
        finish
    fi
    arch=${GPURING_CUDA_ARCH:-}
    if [ -z "$arch" ] && [ -n "$smi" ]; then
        arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
               head -n 1 | tr -d ' .')
    fi
    arch=${arch:-90}
    echo "building a standalone $name for sm_$arch with $nvcc"
    srcs=""
    for s in "$@"; do srcs="$srcs $top/$s"; done
    # shellcheck disable=SC2086
    if ! "$nvcc" -O3 -I"$top" -DGPURING_HAVE_CUDA=1 \
            -gencode "arch=compute_$arch,code=sm_$arch" \
            -o "$tmp/$name" $srcs -lpthread >"$tmp/build-$name.log" 2>&1; then
        cat "$tmp/build-$name.log"
        echo "FAIL: building $name"
        total_fail=$((total_fail + 1))
        finish
    fi
    bin="$tmp/$name"
}

find_or_build test_reduce_cuda test/gpu/test_reduce_cuda.c kernels/reduce_host.c \
    common/gpuring_common.c kernels/reduce_cuda.cu
bin_reduce=$bin
find_or_build test_exec_cuda test/gpu/test_exec_cuda.c kernels/reduce_host.c \
    common/gpuring_common.c proxy/conn.c kernels/exec_cuda.cu
bin_exec=$bin

# ---- run one test program, add its "N passed, N failed" line to the totals -------
# exit 77 from a test means no usable CUDA device: the whole run is a SKIP
run_test() {
    name=$1
    shift
    echo "=== $name"
    "$@" >"$tmp/$name.log" 2>&1
    rc=$?
    cat "$tmp/$name.log"
    if [ -n "${GPURING_GPU_OUT:-}" ]; then
        mkdir -p "$GPURING_GPU_OUT" && cp "$tmp/$name.log" "$GPURING_GPU_OUT/$name.log"
    fi
    if [ $rc -eq 77 ]; then
        reason=$(sed -n 's/^SKIP: no CUDA device (\(.*\))$/\1/p' "$tmp/$name.log" | head -n 1)
        skip "nvidia-smi: ${smi:-${smi_err:-not found}}; ${reason:-$name exited 77}"
    fi
    counts=$(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed.*/\1 \2/p' "$tmp/$name.log" | tail -n 1)
    if [ -z "$counts" ]; then
        echo "FAIL: $name ended (exit $rc) without its 'N passed, N failed' line"
        total_fail=$((total_fail + 1))
        return
    fi
    set -- $counts
    total_pass=$((total_pass + $1))
    total_fail=$((total_fail + $2))
    if [ $rc -ne 0 ] && [ "$2" -eq 0 ]; then
        echo "FAIL: $name exited $rc"
        total_fail=$((total_fail + 1))
    fi
}

run_test test_reduce_cuda "$bin_reduce"
run_test test_exec_cuda "$bin_exec"
# later: MPI tests on device buffers (test/mpi/... with --mca coll_gpuring_...)

finish
