#!/bin/bash
# run_sanitize_tests.sh -- a few representative MPI cases on the sanitizer flavor
# (gpuring built with -fsanitize=address,undefined: test/sanitize/sanitize.am):
#   host      test/mpi/run_mpi_tests.sh's cases on host buffers with the
#             instrumented component (test/sanitize/host): shm, virtual nodes
#             (shm and UCX), all-UCX small slots, the tree, a timeout, threads,
#             communicator churn, device buffers staged (stand-in driver; non-blocking
#             with a second thread completing the requests below), the
#             other collectives, MPI_Iallreduce and its timeout; and calls left to
#             MPI_Finalize (unwaited_*, without the leak check)
#   cudacpu   test/cudacpu/run_cudacpu_mpi.sh's device-buffer cases with the
#             instrumented component and CUDA CPU runtime (test/sanitize/cudacpu):
#             direct, LL direct (and its timeout), FIFO, LL trees over virtual
#             nodes (LL shm and simple net connections in one kernel), churn,
#             one fiber order; direct, LL direct and FIFO on one type of each
#             width (ASan makes every type slow)
# mpirun and the test programs are not instrumented: only the ranks preload
# the compiler's libasan (GPURING_LIBASAN, from configure; make check sets it),
# through mpirun -x.  A sanitizer report fails its case: the runners grep
# every log (test/sanitize/sanitizer_report.sh), and ASan and UBSan halt at
# the first error.  Leaks are checked at exit, but only those allocated under
# gpuring's frames count: Open MPI leaks by design, and a suppression by
# library would hide gpuring's allocations too, all made under libmpi's
# frames -- but for libnbc's (lsan.supp: what it leaks of the persistent
# requests gpuring makes through it).  So that the stacks are whole: malloc unwinds without frame
# pointers (fast_unwind_on_malloc=0: the libraries have none), and dlclose
# does nothing (nodlclose.so: Open MPI unloads its components before the
# report).  Exit codes are the runs' own (exitcode=0: Open MPI's leaks would
# fail every rank): the reports decide.
#
# Prints the runners' lines, then the sum of their counts as "N passed, N
# failed"; a runner that prints no count counts as 1 failed.  Without
# libasan, says SKIP (exit 77).  From the top of the build tree; logs go to
# test/sanitize/logs/.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(pwd)
logs=$top/test/sanitize/logs

if [ -z "${GPURING_LIBASAN:-}" ] || [ ! -f "$GPURING_LIBASAN" ]; then
    echo "SKIP sanitizer flavor: no libasan to preload (configure found none: ${GPURING_LIBASAN:-unset})"
    echo "0 passed, 0 failed"
    exit 77
fi
if [ "$(id -u)" = 0 ]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
# for the ranks only (one line: run_mpi_tests.sh reads one)
SAN_X="-x LD_PRELOAD=$GPURING_LIBASAN:$top/test/sanitize/nodlclose.so"
SAN_X="$SAN_X -x ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:fast_unwind_on_malloc=0:exitcode=0"
SAN_X="$SAN_X -x UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1"
SAN_X="$SAN_X -x LSAN_OPTIONS=suppressions=$here/lsan.supp"
passed=0 failed=0

# runner NAME "CASES" COMMAND...: runs a runner, its closing line renamed (make check
# sums every "N passed, N failed" line of this log: only the total may read so); each
# of CASES (names) must have passed in it -- a name the runner no longer knows would
# otherwise run nothing, silently
runner() {
    local name=$1 cases=$2 out last c
    shift 2
    out=$logs/$name.out
    echo "# $name: $*"
    "$@" > "$out" 2>&1
    sed -E 's/^([0-9]+ passed, [0-9]+ failed)$/# '"$name"': \1/' "$out"
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
    if [ -z "$last" ]; then
        echo "FAIL $name: no result line; log $out"
        failed=$((failed + 1))
        return
    fi
    for c in $cases; do
        if ! grep -q "^PASS $c" "$out"; then
            echo "FAIL $name: case $c did not pass (or did not run); log $out"
            failed=$((failed + 1))
        fi
    done
    passed=$((passed + ${last%% *}))
    last=${last#* passed, }
    failed=$((failed + ${last%% *}))
}

mkdir -p "$logs/host" "$logs/cudacpu"
t0=$SECONDS
# persistent collectives staged through libnbc (device_colls_persistent): only where
# libnbc is a module of its own, which lsan.supp can name (Open MPI 5 builds it into
# libmpi, under whose frames gpuring's own allocations are made too)
persistent=""
if [ -f "$pkglibdir/mca_coll_libnbc.so" ]; then
    persistent="device_colls_persistent_np2_rpn0"
else
    echo "# device_colls_persistent_np2_rpn0 not run here: libnbc is inside libmpi (its leaks of persistent requests cannot be suppressed apart from gpuring's)"
fi
host_cases="allreduce_reduced_np2_rpn0 allreduce_reduced_np4_rpn2 allreduce_slot4k_np2_rpn1
tree_np4_rpn2 timeout_np3_rpn1 threads_np3_rpn1 device_colls_np3_rpn1
device_colls_nonblocking_np2_rpn0 device_colls_nonblocking_progress_np3_rpn0 $persistent churn_np2_rpn0 churn_np2_rpn1 colls_np3_rpn1
iallreduce_np4_rpn2 timeout_nonblocking_np3_rpn1 mix_np3_rpn1 allreduce_hosts_np3_rpn0
mismatch_refused_np5_rpn1 mismatch_iallreduce_np3_rpn0 late2_np3_rpn0"
# the cases GPURING_TEST_SKIP leaves out (the Open MPI 5 job's) are not expected
host_want=""
for c in $host_cases; do
    [ -n "${GPURING_TEST_SKIP:-}" ] && [[ $c =~ $GPURING_TEST_SKIP ]] && continue
    host_want+=" $c"
done
if [ -f "$top/test/sanitize/host/.libs/mca_coll_gpuring.so" ]; then
    GPURING_MCA_ARGS="--mca mca_base_component_path $top/test/sanitize/host/.libs:$pkglibdir \
--mca coll_gpuring_host_buffers 1 --mca coll_gpuring_verbose 3 $SAN_X" \
    GPURING_TEST_LOGDIR=$logs/host GPURING_CHURN_N=100 \
    GPURING_TEST_FILTER="^($(echo $host_cases | tr ' ' '|'))\$" \
        runner host "$host_want" "$here/../mpi/run_mpi_tests.sh"
    # calls left to MPI_Finalize (unwaited_*): their requests leak by design (nothing can
    # free them after it), so without the leak check
    GPURING_MCA_ARGS="--mca mca_base_component_path $top/test/sanitize/host/.libs:$pkglibdir \
--mca coll_gpuring_host_buffers 1 --mca coll_gpuring_verbose 3 ${SAN_X/detect_leaks=1/detect_leaks=0}" \
    GPURING_TEST_LOGDIR=$logs/host_unwaited \
    GPURING_TEST_FILTER="^unwaited_np3_rpn[01]\$" \
        runner host_unwaited "unwaited_np3_rpn0 unwaited_np3_rpn1" "$here/../mpi/run_mpi_tests.sh"
else
    echo "FAIL host: test/sanitize/host/.libs/mca_coll_gpuring.so not built"
    failed=$((failed + 1))
fi
cudacpu_cases="direct_np2 direct_ll_np3 fifo_np3 ll_tree_vnodes_np4 mix_np3 churn
timeout_direct_ll_np3 own_ctx_np3 colls_managed_np3 nomem_bounce_np3 nolaunch_direct_np3
othergpu_np3 mismatch_refused_vnodes_np5 nomem_refused_vnodes_np5 late2_fifo_np3"
if [ -f "$top/test/sanitize/cudacpu/component/.libs/mca_coll_gpuring.so" ]; then
    CUDACPU_FLAVOR_DIR=$top/test/sanitize/cudacpu CUDACPU_MPI_LOGDIR=$logs/cudacpu \
    CUDACPU_MPIRUN_ARGS=$SAN_X CUDACPU_FIBER_ORDERS=forward \
    CUDACPU_CASE_TYPES=int8,int16,int32,int64,float,double \
    CUDACPU_MPI_CASES=$cudacpu_cases \
        runner cudacpu "$cudacpu_cases" "$here/../cudacpu/run_cudacpu_mpi.sh"
else
    echo "INFO cudacpu: skipped (no CUDA toolkit at configure: the sanitizer's CPU-runtime flavor is built with it only)"
fi
echo "# sanitizer flavor: $((SECONDS - t0)) s, logs in $logs"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
