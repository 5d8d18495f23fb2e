#!/bin/sh
# run_cudacpu_mpi.sh -- gpuring's device path through mpirun without a GPU:
# allreduce_check -d (device buffers, from the libcudart.so it dlopens) with
# the component built on the CUDA CPU runtime (test/cudacpu/component), the
# runtime as that libcudart.so (test/cudacpu/runtime) and its stand-in driver
# (CUDACPU_DRIVER), every case in forward and in reverse fiber order:
#   direct_np2      the direct allreduce over IPC-mapped buffers
#   fifo_np3        the FIFO programs (coll_gpuring_direct=0) over CUDA IPC FIFOs
#   vnodes_np4      two virtual nodes: net connections, pinned host staging
#                   through the progress thread and UCX, rings and trees
#   churn_np2/np3   comm_churn -d: 60 communicators made and freed on device
#                   buffers (direct, and FIFO), nothing leaked
#   timeout_np3     a rank skips a call on device buffers (FIFO path): the
#                   others' kernels time out naming step and peer
#   cuda_app        examples/cuda_allreduce.c, a plain CUDA + MPI program, built
#                   and run unchanged with test/cudacpu/run (direct and FIFO)
# world, dup and split communicators, in place and not.  A case passes when
# mpirun exits 0, allreduce_check says "N passed, 0 failed", every rank ran
# its calls on device buffers in gpuring, and no process left a shared-memory
# segment behind.  Prints one line per case, then the sum of allreduce_check's
# counts as "N passed, N failed".  A case whose log holds a sanitizer report
# fails.  From the top of the build tree.  Environment:
#   CUDACPU_TEST_TIMEOUT   seconds per mpirun (300)
#   CUDACPU_MPI_LOGDIR     where the logs go (test/cudacpu/mpi-logs)
#   CUDACPU_FLAVOR_DIR     the build of the component (component/.libs), runtime
#                          (runtime/libcudart.so) and driver (driver/libcuda.so.1)
#                          to run (test/cudacpu; the sanitizer flavor's is
#                          test/sanitize/cudacpu: test/sanitize/run_sanitize_tests.sh)
#   CUDACPU_MPIRUN_ARGS    more mpirun arguments (e.g. -x LD_PRELOAD=...)
#   CUDACPU_MPI_CASES      the cases to run, by name: direct_np2 fifo_np3
#                          vnodes_np4 churn timeout_np3 cuda_app (all of them)
#   CUDACPU_FIBER_ORDERS   the fiber orders of the allreduce_check cases
#                          (forward reverse)
top=$(pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../sanitize/sanitizer_report.sh"
limit=${CUDACPU_TEST_TIMEOUT:-300}
logs=${CUDACPU_MPI_LOGDIR:-$top/test/cudacpu/mpi-logs}
flavor=${CUDACPU_FLAVOR_DIR:-$top/test/cudacpu}
extra=${CUDACPU_MPIRUN_ARGS:-}
cases=${CUDACPU_MPI_CASES:-direct_np2 fifo_np3 vnodes_np4 churn timeout_np3 cuda_app}
orders=${CUDACPU_FIBER_ORDERS:-forward reverse}
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
LD_LIBRARY_PATH=$flavor/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CUDACPU_DRIVER=$flavor/driver/libcuda.so.1
export LD_LIBRARY_PATH CUDACPU_DRIVER
if [ "$(id -u)" = 0 ]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
mkdir -p "$logs"
passed=0 failed=0 bad=0

# the segments of processes that are gone
orphans() {
    for f in /dev/shm/cudacpu-*; do
        [ -e "$f" ] || continue
        pid=${f#/dev/shm/cudacpu-}
        pid=${pid%%-*}
        kill -0 "$pid" 2>/dev/null || echo "$f"
    done
}

# wanted NAME: whether CUDACPU_MPI_CASES names the case
wanted() {
    case " $cases " in *" $1 "*) return 0 ;; esac
    return 1
}

# mpirun_cpu NP ARGS...: mpirun (bounded) on the flavor's component and runtime
mpirun_cpu() {
    np=$1
    shift
    # shellcheck disable=SC2086
    timeout -k 10 "$limit" mpirun --oversubscribe -np "$np" \
        --mca mca_base_component_path "$flavor/component/.libs:$pkglibdir" \
        -x LD_LIBRARY_PATH -x CUDACPU_DRIVER $extra "$@"
}

# case NAME NP "MCA PARAMS" ALLREDUCE_CHECK_ARGS...
case_run() {
    name=$1 np=$2 params=$3
    shift 3
    wanted "$name" || return 0
    for order in $orders; do
        log=$logs/$name-$order.log
        mca=""
        for p in coll_gpuring_verbose 3 $params; do mca="$mca $p"; done
        start=$(date +%s)
        CUDACPU_FIBER_ORDER=$order mpirun_cpu "$np" $(printf -- '--mca %s %s ' $mca) \
            -x CUDACPU_FIBER_ORDER "$top/test/mpi/allreduce_check" "$@" > "$log" 2>&1
        rc=$?
        counts=$(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1 \2/p' "$log" | tail -1)
        ondev=$(grep -c 'allreduce summary: [1-9][0-9]* calls in gpuring.*[1-9][0-9]* on device buffers' "$log")
        left=$(orphans)
        report=$(sanitizer_report "$log")
        why=""
        [ -z "$report" ] || why="sanitizer: $report"
        [ "$rc" -eq 0 ] || why="${why:+$why, }exit $rc"
        [ -n "$counts" ] || why="${why:+$why, }no result line"
        [ "$ondev" -eq "$np" ] || why="${why:+$why, }$ondev of $np ranks ran device calls in gpuring"
        [ -z "$left" ] || why="${why:+$why, }segments left: $left"
        if [ -n "$counts" ]; then
            passed=$((passed + ${counts% *}))
            failed=$((failed + ${counts#* }))
            [ "${counts#* }" = 0 ] || why="${why:+$why, }${counts#* } cases failed"
        fi
        if [ -z "$why" ]; then
            echo "PASS $name ($order, $(($(date +%s) - start)) s)"
        else
            echo "FAIL $name ($order): $why; log $log"
            sed 's/^/    /' "$log" | tail -20
            bad=1
        fi
    done
}

case_run direct_np2 2 "" -d -q -i -m world,dup,split -c 1,17,4099
case_run fifo_np3 3 "coll_gpuring_direct 0" -d -q -i -m world,dup,split -c 1,17,4099
case_run vnodes_np4 4 "coll_gpuring_direct 0 coll_gpuring_ranks_per_node 2" -d -q -i \
    -c 1,17,4099,65537

# communicator churn on device buffers: every communicator's device plane (IPC
# FIFOs, streams, mappings) made and freed; nothing may leak (fds, threads, the
# runtime's and gpuring's /dev/shm segments); split at np 2 makes one-rank
# communicators, whose device buffers are staged for coll/self
wanted churn && for churn in "2 1" "3 0"; do
    np=${churn% *} direct=${churn#* }
    log=$logs/churn_np$np-direct$direct.log
    mpirun_cpu "$np" --mca coll_gpuring_verbose 3 --mca coll_gpuring_direct "$direct" \
        "$top/test/mpi/comm_churn" -d -n 60 -q > "$log" 2>&1
    rc=$?
    counts=$(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1 \2/p' "$log" | tail -1)
    ondev=$(grep -c 'allreduce summary: [1-9][0-9]* calls in gpuring.*[1-9][0-9]* on device buffers' "$log")
    report=$(sanitizer_report "$log")
    if [ "$rc" -eq 0 ] && [ "${counts#* }" = 0 ] && [ "$ondev" -eq "$np" ] && [ -z "$report" ]; then
        echo "PASS churn_np$np (device buffers, direct $direct)"
        passed=$((passed + ${counts% *}))
    else
        echo "FAIL churn_np$np (device buffers, direct $direct): exit $rc, ${counts:-no result}, $ondev of $np ranks in gpuring${report:+, sanitizer: $report}; log $log"
        sed 's/^/    /' "$log" | tail -20
        bad=1
    fi
done

# a peer that never makes a call on device buffers: the CUDA executor's wait times
# out, the report names step and peer, and the next call fails at once
log=$logs/timeout_np3.log
if wanted timeout_np3; then
    mpirun_cpu 3 --mca coll_gpuring_verbose 3 --mca coll_gpuring_direct 0 \
        --mca coll_gpuring_wait_timeout 3 "$top/test/mpi/timeout_check" 60 device > "$log" 2>&1
    rc=$?
    report=$(sanitizer_report "$log")
    if [ "$rc" -eq 0 ] && grep -q '^7 passed, 0 failed$' "$log" && [ -z "$report" ] &&
        grep -qE '\[gpuring rank 0\].*timed out after .* waits for step [0-9]+ from rank [0-9]+' "$log"; then
        echo "PASS timeout_np3 (device buffers)"
        passed=$((passed + 7))
    else
        echo "FAIL timeout_np3 (device buffers): exit $rc${report:+, sanitizer: $report}; log $log"
        sed 's/^/    /' "$log" | tail -20
        bad=1
    fi
fi

# an outside program written for a GPU (examples/cuda_allreduce.c), built and run
# unchanged through test/cudacpu/run: direct and FIFO paths
app=$logs/cuda_allreduce
if ! wanted cuda_app; then
    :
elif ! "$top/test/cudacpu/run" cc "$(dirname "$0")/../../examples/cuda_allreduce.c" -o "$app" \
        > "$logs/cuda_app-build.log" 2>&1; then
    echo "FAIL cuda_app: test/cudacpu/run cc failed; log $logs/cuda_app-build.log"
    bad=1
else
    for direct in 1 0; do
        log=$logs/cuda_app-direct$direct.log
        timeout -k 10 "$limit" "$top/test/cudacpu/run" mpirun --oversubscribe -np 3 \
            --mca coll_gpuring_verbose 3 --mca coll_gpuring_direct $direct "$app" 70001 \
            > "$log" 2>&1
        rc=$?
        ondev=$(grep -c 'allreduce summary: 1 calls in gpuring.* 1 on device buffers' "$log")
        if [ "$rc" -eq 0 ] && grep -q '^3 passed, 0 failed$' "$log" && [ "$ondev" -eq 3 ] &&
            [ -z "$(sanitizer_report "$log")" ]; then
            echo "PASS cuda_app (direct $direct)"
            passed=$((passed + 3))
        else
            echo "FAIL cuda_app (direct $direct): exit $rc, $ondev of 3 ranks in gpuring; log $log"
            bad=1
        fi
    done
fi
[ "$bad" = 0 ] || failed=$((failed + 1))
echo "$passed passed, $failed failed"
exit $bad
