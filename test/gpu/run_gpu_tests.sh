#!/bin/sh
# run_gpu_tests.sh -- gpuring's GPU tests: test/gpu/test_reduce_cuda (the CUDA
# reduction kernels against the host primitive, plus a bandwidth table),
# test/gpu/test_exec_cuda (the CUDA executor: n ranks on one GPU), then
# test/gpu/ipc_probe (two processes sharing GPU memory, as the device path
# needs; the MPI parts are skipped, as failed, without it) and the MPI
# tests on device buffers (test/mpi/allreduce_check -d through gpuring at 2-4
# ranks on the one GPU, with and without virtual nodes, ring/tree/auto;
# colls_check -d, iallreduce_check -d and mix_check -d: the other
# collectives, MPI_Iallreduce, and a random sequence of all of them on device
# buffers) and test/perf/allreduce_perf -m device.  Not run by make check: CI
# has no GPU.  The last line sums every test: "N passed, N failed"; exit 0 when
# none failed.  Without a GPU: "SKIP: no GPU (...)", "0 passed, 0 failed",
# exit 0.  With a GPU, MPI parts that cannot run (no Open MPI, ipc_probe
# failing, a GPURING_GPU_ONLY that names no test) count as failed.
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
# The MPI tests need Open MPI there: test/gpu/pack_for_gpu.sh (run here first)
# fills .gpu-carry/ with Debian's Open MPI/UCX/hwloc .debs, the component and
# the test binaries; carry it:
#          run(command="GPURING_GPU_OUT=$OUT test/gpu/run_gpu_tests.sh",
#              carry=[".gpu-carry"])
# (the kernel tests then come from .gpu-carry/bin too).  Without .gpu-carry and
# without an mpirun on the PATH, the MPI tests are skipped with a message.
# Logs: GPURING_GPU_OUT=DIR (default $OUT, the device machine's) gets files
# that grow as the tests run, so a call cut off at its time limit still
# returns them: running.log (the output of the test running now),
# gpu_tests.log (every finished test's output) and verdicts.log (this
# script's own lines: each FAIL, the totals).  A test's output goes to stdout
# too where it failed, or where there is no DIR.  GPURING_TEST_SEED is passed
# on to the tests.
#
# Each test has GPURING_GPU_TEST_TIMEOUT seconds (default 200), less where the
# run's deadline is nearer (GPURING_GPU_DEADLINE, default 540 s from the start:
# gpu_env.sh); a test the deadline leaves no time for is not started and counts
# as failed, and the totals are still printed.  The device tool gives one
# command 600 s, so run the suite in parts, one call each:
# GPURING_GPU_PARTS=kernels (test_reduce_cuda, test_exec_cuda), mpi (the
# allreduce_check runs), perf (allreduce_perf); default all three.
# The MPI parts run under an MPS daemon (its pipes in /tmp/gpuring-mps: gpu_env.sh)
# where nvidia-cuda-mps-control exists: ranks sharing the one GPU then behave
# like one rank per GPU; without MPS they time-slice it (FIFO calls ~2.5 ms).
# GPURING_GPU_MPS=0 runs them without.
#
# Usage: test/gpu/run_gpu_tests.sh   (from anywhere; GPURING_BUILDDIR names the
# build tree when it is not the source tree)

top=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${GPURING_BUILDDIR:-$top}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuring_gpu.XXXXXX") || exit 1
# gpu_detect, gpu_find_bin, gpu_mpi_setup, gpu_mps_start/stop (shared with bench_gpu.sh)
. "$top/test/gpu/gpu_env.sh"
cleanup() {
    gpu_mps_stop
    [ -n "$outdir" ] && [ -n "$mps_logs" ] && [ -d "$mps_logs" ] &&
        cp -r "$mps_logs" "$outdir/mps-log" 2>/dev/null
    rm -rf "$tmp"
}
gpu_traps
parts=${GPURING_GPU_PARTS:-kernels,mpi,perf}
test_timeout=${GPURING_GPU_TEST_TIMEOUT:-200}
want_part() {
    case ",$parts," in *",$1,"*) return 0 ;; *) return 1 ;; esac
}
outdir=${GPURING_GPU_OUT:-${OUT:-}}
if [ -n "$outdir" ]; then
    mkdir -p "$outdir" && : >"$outdir/gpu_tests.log" && : >"$outdir/verdicts.log"
fi
# the runtime for allreduce_check/allreduce_perf -d (dlopen libcudart)
export LD_LIBRARY_PATH="${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

total_pass=0
total_fail=0

# say LINE: this script's verdict line, on stdout and in verdicts.log
say() {
    echo "$*"
    [ -n "$outdir" ] && echo "$*" >>"$outdir/verdicts.log"
    return 0
}

# fail LINE: a failure of the suite's, said (with the output of the test it is about,
# once, where one ran)
name=""
shown=""
fail() {
    say "FAIL: $*"
    total_fail=$((total_fail + 1))
    if [ -n "$name" ] && [ -f "$tmp/$name.log" ]; then show_log; fi
}

finish() {
    say "$total_pass passed, $total_fail failed"
    [ "$total_fail" -eq 0 ]
    exit $?
}

skip() {
    say "SKIP: no GPU ($1)"
    finish
}

# ---- is there a GPU? (the test program asks cudaGetDeviceCount itself too) -----
gpu_detect

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
    gpu_find_bin "$name"
    if [ "${GPURING_GPU_REBUILD:-0}" != 1 ] && [ -x "$bin" ]; then
        return 0
    fi
    nvcc=$(find_nvcc)
    if [ -z "$nvcc" ]; then
        if [ -z "$smi" ]; then
            skip "nvidia-smi: ${smi_err:-not found}; no test binary at $bin and no nvcc to build one"
        fi
        fail "a GPU is present ($smi) but $bin is not built and no nvcc was found"
        finish
    fi
    arch=${GPURING_CUDA_ARCH:-}
    if [ -z "$arch" ] && [ -n "$smi" ]; then
        arch=$(timeout -k 5 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
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
        fail "building $name"
        finish
    fi
    bin="$tmp/$name"
}

find_or_build test_reduce_cuda test/gpu/test_reduce_cuda.c kernels/reduce_host.c \
    common/gpuring_common.c kernels/reduce_cuda.cu
bin_reduce=$bin
find_or_build test_exec_cuda test/gpu/test_exec_cuda.c kernels/reduce_host.c \
    common/gpuring_common.c common/gpuring_arrivals.c proxy/conn.c kernels/memkind.c \
    kernels/device_cuda.c proxy/conn_cuda.c proxy/ipc_buf_cuda.c kernels/reduce_cuda.cu \
    kernels/exec_cuda.cu
bin_exec=$bin
find_or_build ipc_probe test/gpu/ipc_probe.c
bin_probe=$bin

# ---- run one test program, add its "N passed, N failed" line to the totals -------
# exit 77 from a test means no usable CUDA device: the whole run is a SKIP
run_test() {
    name=$1
    shift
    fails_at_start=$total_fail
    echo "=== $name"
    gpu_limit "$test_timeout"
    if [ "$limit_now" -eq 0 ]; then
        fail "$name not started: the run's deadline is near (GPURING_GPU_DEADLINE ${gpu_deadline}s)"
        return 1
    fi
    log="$tmp/$name.log"
    [ -n "$outdir" ] && log="$outdir/running.log"
    echo "=== $name: $*" >"$log"
    gpu_run timeout -k 10 "$limit_now" "$@" >>"$log" 2>&1
    rc=$?
    [ "$log" != "$tmp/$name.log" ] && cp "$log" "$tmp/$name.log"
    [ -n "$outdir" ] && cat "$log" >>"$outdir/gpu_tests.log"
    shown=""
    run_test_verdict "$@"
    if [ -z "$outdir" ] || [ "$total_fail" -ne "$fails_at_start" ]; then
        show_log
    fi
    # (timed out: no summary lines for the callers' checks)
    [ $rc -ne 124 ] && [ $rc -ne 137 ]
}

# show_log: $name's output on stdout, once (a failure its caller's checks find later)
show_log() {
    [ "$shown" = "$name" ] && return 0
    shown=$name
    cat "$tmp/$name.log"
}

# run_test's verdict on $name's log and exit code $rc
run_test_verdict() {
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        fail "$name did not finish in ${limit_now}s (GPURING_GPU_TEST_TIMEOUT, GPURING_GPU_DEADLINE)"
        return
    fi
    if [ $rc -eq 77 ]; then
        reason=$(sed -n 's/^SKIP: no CUDA device (\(.*\))$/\1/p' "$tmp/$name.log" | head -n 1)
        if [ -n "$smi" ]; then
            # nvidia-smi sees a GPU the runtime cannot use (driver too old?): a failure
            fail "$name found no usable CUDA device (${reason:-exit 77}) although" \
                 "nvidia-smi lists $smi"
            cat "$tmp/$name.log"
            finish
        fi
        skip "nvidia-smi: ${smi_err:-not found}; ${reason:-$name exited 77}"
    fi
    counts=$(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed.*/\1 \2/p' "$tmp/$name.log" | tail -n 1)
    if [ -z "$counts" ]; then
        fail "$name ended (exit $rc) without its 'N passed, N failed' line"
        return
    fi
    set -- $counts
    total_pass=$((total_pass + $1))
    total_fail=$((total_fail + $2))
    [ "$2" -eq 0 ] || say "FAIL: $name: $2 failed"
    if [ $rc -ne 0 ] && [ "$2" -eq 0 ]; then
        fail "$name exited $rc"
    fi
}

if want_part kernels; then
    run_test test_reduce_cuda "$bin_reduce"
    # more hardware queues than streams for its 8 ranks in one process.  Only
    # there: under MPS, 4 MPI ranks with 32 each fail to create their contexts
    # ("out of memory", H100, driver 580)
    run_test test_exec_cuda env CUDA_DEVICE_MAX_CONNECTIONS=32 "$bin_exec"
fi

# ---- MPI on device buffers ---------------------------------------------------------
# Open MPI: the carried .debs unpacked into a private root, or the machine's own
gpu_mpi_setup
total_fail=$((total_fail + mpi_setup_failed))
check_bin="$mpibin/allreduce_check"
perf_bin="$mpibin/allreduce_perf"
[ -x "$check_bin" ] || check_bin="$builddir/test/mpi/allreduce_check"
[ -x "$perf_bin" ] || perf_bin="$builddir/test/perf/allreduce_perf"

# mpi_run NAME NP "MCA ARGS" PROGRAM ARGS...: the program through gpuring on NP
# ranks of the one GPU (verbose 3: the finalize summaries), its log $tmp/NAME.log.
# Returns 1 without running when GPURING_GPU_ONLY (an extended regular
# expression) is set and does not match NAME, or when the deadline is near
mpi_runs=0
mpi_run() {
    name=$1 np=$2 mca=$3
    shift 3
    if [ -n "${GPURING_GPU_ONLY:-}" ] && ! echo "$name" | grep -Eq "$GPURING_GPU_ONLY"; then
        return 1
    fi
    mpi_runs=$((mpi_runs + 1))
    # shellcheck disable=SC2086 # (not started: no log to check)
    run_test "$name" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        "$mpirun" -n "$np" --oversubscribe --bind-to none \
        --mca mca_base_component_path "$component_dir:$pkglibdir" \
        --mca mca_base_component_show_load_errors 0 \
        --mca coll gpuring,tuned,basic,libnbc,self --mca coll_gpuring_verbose 3 \
        --mca coll_gpuring_wait_timeout 60 $mca "$@"
}

# mpi_test NAME NP WANT "MCA ARGS" PROGRAM ARGS...: gpuring must have run on
# device buffers on every rank (its finalize summary says how many device
# calls), handed none to the component below, and run them through the
# direct allreduces (WANT=direct: every call, LL or not) or the FIFO programs
# (WANT=fifo: no direct call)
mpi_test() {
    name=$1 np=$2 want=$3 mca=$4
    shift 4
    mpi_run "$name" "$np" "$mca" "$@" || return 0
    ran=$(grep -c "allreduce summary: .*; [1-9][0-9]* on device buffers" "$tmp/$name.log")
    if [ "$ran" -ne "$np" ]; then
        fail "$name: $ran of $np ranks ran device calls in gpuring (see the log)"
    fi
    # every device allreduce of these tests is one gpuring runs: none staged for the
    # component below (the programs' own host-buffer allreduces do go there)
    ran=$(grep -c "device buffers staged .*MPI_Allreduce [1-9]" "$tmp/$name.log")
    if [ "$ran" -ne 0 ]; then
        fail "$name: $ran ranks handed device allreduces to the component below"
    fi
    if [ "$want" = direct ]; then
        ran=$(grep -c "allreduce summary: [0-9]* calls in gpuring (ring 0, tree 0, gather 0," "$tmp/$name.log")
    else
        ran=$(grep -c "allreduce summary: .*, LL direct 0, direct 0;" "$tmp/$name.log")
    fi
    if [ "$ran" -ne "$np" ]; then
        fail "$name: $ran of $np ranks ran every call $want (see the summary lines)"
    fi
}

name="" # (the failures below are no test's)
if [ -z "$mpirun" ]; then
    if { want_part mpi || want_part perf; } && [ -z "$smi" ]; then
        skip "nvidia-smi: ${smi_err:-not found}; and no Open MPI for the MPI parts"
    elif want_part mpi || want_part perf; then
        fail "MPI tests on device buffers not run: no .gpu-carry/debs (run" \
             "test/gpu/pack_for_gpu.sh here and carry .gpu-carry) and no mpirun on this machine"
    fi
elif ! want_part mpi && ! want_part perf; then
    :
else
    gpu_mps_start
fi
# the device path needs cross-process CUDA IPC and mapped host memory: without
# them every MPI run below would fail, so say so once instead
if [ -n "$mpirun" ] && { want_part mpi || want_part perf; }; then
    fails_before=$total_fail
    run_test ipc_probe "$bin_probe"
    if [ "$total_fail" -ne "$fails_before" ]; then
        fail "MPI tests on device buffers not run: ipc_probe failed (see above)"
        finish
    fi
fi
# colls_test NAME NP "COLLS" "MCA ARGS" PROGRAM ARGS...: every rank's finalize
# summary of each collective in COLLS counts calls on device buffers run by
# gpuring
colls_test() {
    name=$1 np=$2 colls=$3 mca=$4
    shift 4
    mpi_run "$name" "$np" "$mca" "$@" || return 0
    for coll in $colls; do
        ran=$(grep -c "\] $coll summary: .*[ (][1-9][0-9]* on device buffers" "$tmp/$name.log")
        if [ "$ran" -ne "$np" ]; then
            fail "$name: $ran of $np ranks ran $coll calls on device buffers in gpuring"
        fi
    done
}

# staged_test NAME NP ARGS...: device_coll_check ARGS, every rank staging device buffers
# through host memory for the component below
staged_test() {
    name=$1 np=$2
    shift 2
    mpi_run "$name" "$np" "" "$coll_bin" -D libcuda.so.1 "$@" -q || return 0
    ran=$(grep -c "device buffers staged through host memory" "$tmp/$name.log")
    if [ "$ran" -ne "$np" ]; then
        fail "$name: $ran of $np ranks staged device buffers"
    fi
}

if [ -n "$mpirun" ] && want_part mpi; then
    # every type and op, counts 0 .. 65537, in place, dup and split communicators:
    # one node, so the direct allreduce; then the same over the cuda ipc FIFOs
    mpi_test mpi_2ranks 2 direct "" "$check_bin" -q -i -Z -d -m world,dup,rev
    mpi_test mpi_2ranks_fifo 2 fifo "--mca coll_gpuring_direct 0" "$check_bin" -q -i -Z -d -m world,rev
    # non-power-of-two, one node and two virtual nodes (net: staging or GPU-direct)
    mpi_test mpi_3ranks 3 direct "" "$check_bin" -q -i -Z -d -m world,rev
    mpi_test mpi_3ranks_fifo 3 fifo "--mca coll_gpuring_direct 0" "$check_bin" -q -i -Z -d -m world,rev
    # cudaMallocAsync's pool memory: CUDA IPC cannot share it, so the FIFOs, direct on
    # (the LL direct allreduce, which never maps the callers' buffers, off: small
    # pool calls take it otherwise, as run_cudacpu_mpi.sh's pool_np3 checks)
    mpi_test mpi_3ranks_pool 3 fifo "--mca coll_gpuring_direct_ll_size 0" "$check_bin" -q -i -d -P -m world,rev
    mpi_test mpi_3ranks_2nodes 3 fifo "--mca coll_gpuring_ranks_per_node 2" "$check_bin" -q -i -Z -d
    # every other collective on device memory: staged through host memory for
    # Debian's Open MPI (not CUDA-aware), results compared with the expected ones
    coll_bin="$mpibin/device_coll_check"
    [ -x "$coll_bin" ] || coll_bin="$builddir/test/mpi/device_coll_check"
    # (and every call in its non-blocking form: -i, the results copied back when the
    # request completes; and persistent: -p, copied in at every start)
    staged_test device_colls_2ranks 2
    staged_test device_colls_3ranks 3
    staged_test device_colls_2ranks_nonblocking 2 -i
    staged_test device_colls_2ranks_persistent 2 -p
    # buffers of a CUDA context the program made (-C: cuCtxCreate, as PyCUDA's
    # make_context), which gpuring's kernels in the primary context would fault on:
    # every call staged for the component below, in that context (the types and ops
    # Open MPI's own reductions get right)
    mpi_run mpi_3ranks_own_ctx 3 "" "$check_bin" -q -i -d -C -m world,rev \
        -t int32,float,double -o sum,max,min && {
        ran=$(grep -c "device buffers staged through host memory" "$tmp/mpi_3ranks_own_ctx.log")
        if [ "$ran" -ne 3 ]; then
            fail "mpi_3ranks_own_ctx: $ran of 3 ranks staged device buffers"
        fi
    }
    for algo in ring tree; do
        mpi_test "mpi_4ranks_2nodes_$algo" 4 fifo \
            "--mca coll_gpuring_ranks_per_node 2 --mca coll_gpuring_algorithm $algo" \
            "$check_bin" -q -d -t int32,float,double,uint8 -L
    done
    # gpuring's other collectives and MPI_Iallreduce on device buffers: their
    # programs run by the CUDA executor (every type, op, root, in place; one node,
    # then ranks as virtual nodes on the tree), each collective on device buffers
    # on every rank
    colls_bin="$mpibin/colls_check"
    [ -x "$colls_bin" ] || colls_bin="$builddir/test/mpi/colls_check"
    iall_bin="$mpibin/iallreduce_check"
    [ -x "$iall_bin" ] || iall_bin="$builddir/test/mpi/iallreduce_check"
    colls_test colls_3ranks 3 "reduce_scatter allgather bcast reduce" \
        "--mca coll_gpuring_direct 0" "$colls_bin" -d -q -L 65536
    colls_test colls_4ranks_2nodes_tree 4 "reduce_scatter allgather bcast reduce" \
        "--mca coll_gpuring_ranks_per_node 2 --mca coll_gpuring_algorithm tree" \
        "$colls_bin" -d -q -f -L 65536
    colls_test iallreduce_3ranks 3 allreduce "" "$iall_bin" -d -q
    # buffers off their element grid (-A: rank r's input r % 4 bytes off, its output
    # (r + 1) % 4), where a GPU stops a kernel that accesses a whole element: the LL
    # direct allreduce takes them as they are, the other paths run on aligned copies
    colls_test mpi_4ranks_misaligned 4 allreduce "" "$check_bin" -q -i -A -d -m world,rev \
        -t int,short,double,float -o sum,max
    colls_test colls_3ranks_misaligned 3 "reduce_scatter reduce" "--mca coll_gpuring_direct 0" \
        "$colls_bin" -d -A -q -f -L 65536
    mix_bin="$mpibin/mix_check"
    [ -x "$mix_bin" ] || mix_bin="$builddir/test/mpi/mix_check"
    colls_test mix_4ranks 4 "allreduce reduce_scatter allgather bcast reduce" "" \
        "$mix_bin" -d -q -n 2000
fi
if [ -n "$mpirun" ] && want_part perf; then
    # bandwidth on device memory (a benchmark; its rows are checked too): the
    # direct allreduce and the FIFO ring.  Debian's Open MPI is not CUDA-aware,
    # so there is no tuned column: compare with test_reduce_cuda's copy bandwidth
    mpi_test perf_2ranks_direct 2 direct "" "$perf_bin" -m device -b 8 -e 268435456
    mpi_test perf_2ranks_fifo 2 fifo "--mca coll_gpuring_direct 0" \
        "$perf_bin" -m device -b 8 -e 268435456
fi

name=""
if [ -n "$mpirun" ] && { want_part mpi || want_part perf; } && [ "$mpi_runs" -eq 0 ]; then
    fail "no MPI test ran (GPURING_GPU_ONLY='${GPURING_GPU_ONLY:-}' names none)"
fi
finish
