#!/bin/bash
# run_device_access_check.sh -- gpuring's device path may not touch device memory from
# the host: on a GPU that faults (or reads garbage through a mapping), on the CUDA CPU
# runtime (test/cudacpu) device memory is host memory, and every case passes anyway.
# Here the sanitizer flavor's runtime poisons device memory whole for the host
# (CUDACPU_POISON_DEVICE=1: cudaMalloc'd, pool and IPC-mapped memory; managed memory
# stays open, as on a GPU), its copies and sets go around the checks, and the kernels
# are built unchecked (CUDACPU_UNCHECKED_DEVICE, test/cudacpu/include/cudacpu_kernel.h):
# every case of test/cudacpu/run_cudacpu_mpi.sh then runs, and any access by host code
# -- gpuring's, instrumented -- to device memory is an ASan report, which fails its case.
# Leaks are not looked for here (run_sanitize_tests.sh does).
#
# `make check-device-access` builds the flavor's kernels that way, runs this, and builds
# them back (the flavor make check runs checks the kernels' own accesses instead); not
# part of make check (CI's time).  Usage, from the top of the build tree:
#   GPURING_LIBASAN=/path/to/libasan.so test/sanitize/run_device_access_check.sh [CASES]
# CASES: run_cudacpu_mpi.sh's case names (CUDACPU_MPI_CASES; default every case).
# Prints the runner's lines and its "N passed, N failed"; exit 0 iff every case passed.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(pwd)
logs=$top/test/sanitize/logs/device-access
if [ -z "${GPURING_LIBASAN:-}" ] || [ ! -f "$GPURING_LIBASAN" ]; then
    echo "SKIP device access check: no libasan to preload (${GPURING_LIBASAN:-unset})"
    exit 77
fi
if [ ! -f "$top/test/sanitize/cudacpu/component/.libs/mca_coll_gpuring.so" ]; then
    echo "SKIP device access check: the sanitizer flavor's CPU-runtime component is not built"
    exit 77
fi
if [ "$(id -u)" = 0 ]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
mkdir -p "$logs"
SAN_X="-x LD_PRELOAD=$GPURING_LIBASAN:$top/test/sanitize/nodlclose.so"
SAN_X="$SAN_X -x ASAN_OPTIONS=halt_on_error=1:detect_leaks=0:exitcode=0"
SAN_X="$SAN_X -x UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 -x CUDACPU_POISON_DEVICE=1"
CUDACPU_FLAVOR_DIR=$top/test/sanitize/cudacpu CUDACPU_MPI_LOGDIR=$logs \
    CUDACPU_MPIRUN_ARGS=$SAN_X CUDACPU_FIBER_ORDERS=forward \
    CUDACPU_CASE_TYPES=int8,int16,int32,int64,float,double CUDACPU_MPI_CASES="${1:-}" \
    sh "$here/../cudacpu/run_cudacpu_mpi.sh"
