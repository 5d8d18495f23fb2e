#!/bin/sh
# run_cudacpu_tests.sh ORDER -- gpuring's GPU tests, built on the CUDA CPU
# runtime (test/cudacpu), with each block's threads run in fiber order ORDER
# (forward, reverse or random[:SEED]: CUDACPU_FIBER_ORDER):
#   ipc_probe_cpu              two processes sharing "device" memory by IPC handle
#   test_reduce_cuda_cpu       errors, and (forward only: the reduction kernels
#                              have no barrier, so the fiber order cannot matter)
#                              the whole sweep (not the bandwidth table: no
#                              performance is measured on the CPU runtime)
#   test_exec_cuda_cpu         the whole matrix: ring, tree, gather, direct, refusals,
#                              timeout
#   test_cudacpu_driver        the stand-in libcuda.so.1 through gpuring's memkind and
#                              device save/restore
# (the sweep and the matrix only in the orders CUDACPU_EXEC_ORDERS names)
# Every program runs with the stand-in driver loaded (CUDACPU_DRIVER), as a
# CUDA runtime loads the real one.
# Each program's own "N passed, N failed" line goes to the output (make check
# sums them); a program that dies before printing one counts as 1 failed.
# From the top of the build tree; CUDACPU_TEST_BINDIR names another directory,
# CUDACPU_TEST_TIMEOUT (600 s) bounds each program, CUDACPU_EXEC_ORDERS (default
# "forward reverse") the orders test_exec_cuda_cpu and the sweep run in (they make
# no MPI call: CI runs them forward in its first job and the matrix reverse in
# the Open MPI 5 one).
order=${1:?usage: run_cudacpu_tests.sh forward|reverse|random[:SEED]}
bindir=${CUDACPU_TEST_BINDIR:-test/cudacpu}
limit=${CUDACPU_TEST_TIMEOUT:-600}
CUDACPU_FIBER_ORDER=$order
CUDACPU_DRIVER=$(cd "$bindir" && pwd)/driver/libcuda.so.1
export CUDACPU_FIBER_ORDER CUDACPU_DRIVER
failed=0

run() {
    prog=$1
    shift
    echo "== $prog $* (CUDACPU_FIBER_ORDER=$order)"
    start=$(date +%s)
    out=$(timeout "$limit" "$bindir/$prog" "$@" 2>&1)
    st=$?
    printf '%s\n' "$out"
    echo "== $prog: exit $st after $(($(date +%s) - start)) s"
    if ! printf '%s\n' "$out" | grep -q '^[0-9][0-9]* passed, [0-9][0-9]* failed'; then
        echo "0 passed, 1 failed ($prog printed no result: exit $st)"
        failed=1
    elif printf '%s\n' "$out" | grep -q '^0 passed, 0 failed'; then
        echo "0 passed, 1 failed ($prog ran no check)"
        failed=1
    elif [ "$st" -ne 0 ]; then
        failed=1
    fi
}

case " ${CUDACPU_EXEC_ORDERS:-forward reverse} " in
*" $order "*) matrices=1 ;;
*) matrices=0 ;;
esac
run ipc_probe_cpu
run test_cudacpu_driver
if [ "$order" = forward ] && [ $matrices = 1 ]; then
    run test_reduce_cuda_cpu errors sweep
else
    run test_reduce_cuda_cpu errors
fi
if [ $matrices = 1 ]; then
    run test_exec_cuda_cpu
else
    echo "== test_exec_cuda_cpu: not in the $order order (CUDACPU_EXEC_ORDERS=$CUDACPU_EXEC_ORDERS)"
fi
exit $failed
