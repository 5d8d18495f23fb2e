#!/bin/sh
# run_cudacpu_bench_gpu.sh -- test/gpu/bench_gpu.sh, the GPU benchmark, run
# through to its summary on the CPU CUDA runtime (GPURING_GPU_CUDACPU: the
# runtime, driver, component and test_reduce_cuda_cpu built in test/cudacpu
# stand in for a GPU), so that the script a GPU session runs in its few
# minutes of device time is known to work: every path's table and profile
# lines parse, the summary has its rows.  Tiny settings (2 ranks, one run,
# 8 B to 64 KiB, 4 MiB copy buffers); nothing it measures means anything.
# Checks, one each:
#   the script exits 0 and prints no FAIL line
#   it prints the copy rate, and the tag_bw bound where ucx_perftest exists
#   each path (direct, direct_ipc, fifo, vnodes) has a table row for every size
#   each path prints one profile line per rank, with the points that path's
#   8-byte calls pass, in their order (every rank a calling rank; where a
#   rank's share of the direct allreduce is empty it launches nothing; the
#   LL direct allreduce, direct's up to 64 KiB, exchanges nothing)
#   the summary has one row per path
# The last line: "N passed, N failed".  From the top of the build tree;
# CUDACPU_FLAVOR_DIR names another build of the CPU runtime (test/cudacpu).
top=$(pwd)
here=$(cd "$(dirname "$0")" && pwd)
flavor=${CUDACPU_FLAVOR_DIR:-$top/test/cudacpu}
out=$(mktemp -d "${TMPDIR:-/tmp}/gpuring-cudacpu-bench.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT INT TERM
passed=0 failed=0

check() { # check OK MESSAGE
    if [ "$1" = 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $2"
    fi
}

paths=direct,direct_ipc,fifo,vnodes
GPURING_GPU_CUDACPU=$flavor GPURING_TEST_BW_MIB=4 GPURING_GPU_OUT=$out/out \
    BENCH_GPU_PATHS=$paths BENCH_GPU_NP=2 BENCH_GPU_REPS=1 BENCH_GPU_MAXBYTES=64K \
    BENCH_GPU_ITERS=2 BENCH_GPU_PROFILE_ITERS=100 BENCH_GPU_TIMEOUT=120 GPURING_GPU_DEADLINE=585 \
    timeout -k 10 600 "$here/../gpu/bench_gpu.sh" >"$out/bench.log" 2>&1
rc=$?
cat "$out/bench.log"
echo "---- checks"
check "$rc" "bench_gpu.sh exited $rc"
! grep -q '^FAIL' "$out/bench.log"
check $? "bench_gpu.sh printed a FAIL line"
grep -q '^# device-to-device copy rate: [0-9.]* GB/s' "$out/bench.log"
check $? "no copy rate"
if command -v ucx_perftest >/dev/null 2>&1; then
    grep -q '^# ucx_perftest tag_bw, 16 MiB, two processes: [0-9.]* GB/s' "$out/bench.log"
    check $? "ucx_perftest is here, yet no tag_bw bound"
fi

# the points of an 8-byte call's profile line, in order, as an extended regex
points() {
    n='[0-9.]+'
    case $1 in
    direct) echo "memkind $n device $n order $n launch $n run $n return $n\$" ;;
    direct_ipc) echo "memkind $n device $n order $n publish $n map $n agree $n (launch $n run $n )?close $n return $n\$" ;;
    *) echo "memkind $n device $n order $n plan $n launch $n run $n return $n\$" ;;
    esac
}
for path in $(echo "$paths" | tr ',' ' '); do
    # the table: from "## PATH" to the blank line or the profile's header
    sed -n "/^## $path, 2 ranks/,/^8 B calls/p" "$out/bench.log" >"$out/$path.table"
    for size in 8 16 1024 65536; do
        grep -Eq "^ +$size +[0-9.]+ +[0-9.]+ +" "$out/$path.table"
        check $? "$path: no table row for $size B"
    done
    re=$(points "$path")
    lines=$(sed -n "/^## $path, 2 ranks/,/^## \|^Summary/p" "$out/bench.log" |
            grep -E "^\[gpuring rank [01]\] profile of [0-9]+ blocking calls on device buffers .*: $re" |
            sed 's/^\[gpuring rank \([01]\)\].*/\1/' | sort -u | wc -l)
    check $((lines != 2)) "$path: $lines of 2 ranks printed a profile line matching $re"
    grep -Eq "^\| $path \| 2 \| [0-9.]+ \| [0-9.]+ \|" "$out/bench.log"
    check $? "$path: no row in the summary"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
