#!/bin/sh
# bench_gpu.sh -- gpuring's device paths against their bounds, on one GPU, in
# one run (issue 17, item 4).  A benchmark, not a test: nothing fails on a
# time; a run fails only when it breaks or reports wrong elements.
#
# 1. The GPU's device-to-device copy rate M (GB/s of HBM traffic: one read and
#    one write per byte copied): test/gpu/test_reduce_cuda's bandwidth table
#    ("cudaMemcpy device to device"), the median of REPS runs.
# 2. test/perf/allreduce_perf -m device (float sum, 8 B to 256 MiB, factor 2,
#    results checked) through gpuring, REPS runs per path and rank count
#    (ranks share the one GPU; under MPS where there is one, see gpu_env.sh);
#    per size the median over the runs of allreduce_perf's time (its average
#    over iters, max over ranks) and busbw, next to the path's bound:
#      direct        M (n-1) / n^2: each rank reads and writes its share of
#                    every rank's buffer once, 2 n S bytes of HBM traffic
#                    per call for all ranks on the one GPU
#      fifo, tree    M (n-1) / (2 n^2): about 4 bytes of HBM traffic per
#                    rank per byte (read input and slot, write slot and
#                    output); approximate for the tree
#      vnodes        ucx_perftest tag_bw between two processes at 16 MiB
#                    (host memory, default transports; the median of REPS),
#                    when ucx_perftest is found (pack_for_gpu.sh carries
#                    Debian's ucx-utils); else none
#    and their ratio busbw / bound for sizes >= 1 MiB.
#    Paths: direct (the default on one node: the LL direct allreduce up to
#    64 KiB, the direct one above), direct_ipc (the direct one at every size:
#    coll_gpuring_direct_ll_size 0), direct_ll_max (the LL direct allreduce
#    up to 1 MiB, its most: where it should stop; on request), fifo (coll_gpuring_direct 0,
#    channels chosen per call by the tuning model), fifo_max (the same, every
#    call on coll_gpuring_device_nchannels channels: 32), fifo_2ch (2
#    channels: what the FIFO ring had by default before), fifo_simple and
#    fifo_ll (coll_gpuring_protocol simple / ll at every size: where LL
#    should stop on device FIFOs; with BENCH_GPU_MAXBYTES=1M), tree
#    (coll_gpuring_algorithm tree), vnodes (every rank its own virtual node:
#    coll_gpuring_ranks_per_node 1, UCX net connections, pinned host staging
#    or GPU-direct), vnodes_4ch (the same on 4 channels at every size: larger
#    net steps than the model's, which the host plane's net rings found
#    faster; on request).  Every gpuring run must say (coll_gpuring_verbose 3) that
#    it ran its device calls in gpuring, direct or not as the path wants.
#    After each path's table, one more run of 8-byte calls only (-n 2000,
#    BENCH_GPU_PROFILE_ITERS) with coll_gpuring_profile 1: each rank's median
#    microseconds at each point of a call's path (memory kind, device, order,
#    the direct allreduce's exchanges, launch, run, ...), where a small
#    call's time goes.
# 3. A summary table (markdown) at 8 B and 64 KiB (time), 1 MiB, 16 MiB and
#    256 MiB (busbw, bound, ratio), then the machine (nvidia-smi, MPS or not).
#
# Without a GPU (no nvidia-smi): "SKIP: no GPU (...)", exit 0.  A GPU that
# nvidia-smi cannot list, or no Open MPI (no .gpu-carry/debs and no mpirun
# here: the copy rate only), or a bound that could not be measured: FAIL,
# exit 1.  Runs the deadline leaves no time for (GPURING_GPU_DEADLINE, default
# 540 s from the start: gpu_env.sh) are not started (FAIL), and the tables of
# what ran are printed.
#
# On the device tool's GPU machine, after `make check && test/gpu/pack_for_gpu.sh`
# here (one command gets 600 s; split the paths over calls):
#   run(command="GPURING_GPU_OUT=$OUT BENCH_GPU_PATHS=direct,fifo,fifo_max \
#                test/gpu/bench_gpu.sh", carry=[".gpu-carry"])
#   run(command="GPURING_GPU_OUT=$OUT BENCH_GPU_PATHS=fifo_2ch,tree,vnodes \
#                test/gpu/bench_gpu.sh", carry=[".gpu-carry"])
# Environment: BENCH_GPU_PATHS (default: direct,direct_ipc,fifo,fifo_max,fifo_2ch,tree,vnodes;
# fifo_simple, fifo_ll, direct_ll_max and vnodes_4ch on request), BENCH_GPU_NP (rank counts,
# default "2 4"), BENCH_GPU_REPS (default 5), BENCH_GPU_MAXBYTES (default
# 256M; K/M/G), BENCH_GPU_ITERS (allreduce_perf -n, default 20),
# BENCH_GPU_TIMEOUT (seconds per mpirun, default 300), GPURING_GPU_OUT (logs
# and the tables, as they are made; default $OUT, the device machine's), GPURING_GPU_MPS=0 (no MPS),
# GPURING_BUILDDIR (build tree, when not the source tree), GPURING_GPU_CUDACPU
# (the CPU CUDA runtime stands in for a GPU: gpu_env.sh).
# Usage: test/gpu/bench_gpu.sh   (from anywhere)

top=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${GPURING_BUILDDIR:-$top}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuring_bench_gpu.XXXXXX") || exit 1
# gpu_detect, gpu_find_bin, gpu_mpi_setup, gpu_mps_start/stop (shared with run_gpu_tests.sh)
. "$top/test/gpu/gpu_env.sh"
. "$top/test/perf/perf_sizes.sh"
. "$top/test/perf/ucx_perftest_mode.sh"
cleanup() {
    gpu_mps_stop
    rm -rf "$tmp"
}
gpu_traps

paths=${BENCH_GPU_PATHS:-direct,direct_ipc,fifo,fifo_max,fifo_2ch,tree,vnodes}
nps=${BENCH_GPU_NP:-2 4}
reps=${BENCH_GPU_REPS:-5}
maxbytes=$(to_bytes "${BENCH_GPU_MAXBYTES:-256M}")
iters=${BENCH_GPU_ITERS:-20}
profile_iters=${BENCH_GPU_PROFILE_ITERS:-2000}
limit=${BENCH_GPU_TIMEOUT:-300}
out=${GPURING_GPU_OUT:-${OUT:-$tmp/out}}
mkdir -p "$out" || exit 1
logs="$out/bench_gpu_logs"
mkdir -p "$logs"
summary="$out/bench_gpu_summary.md"
export LD_LIBRARY_PATH="${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0

# median of the numbers on stdin, one per line ("-" when none)
median() {
    sort -g | awk '{ v[NR] = $1 }
        END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
              else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

gpu_detect
if [ -z "$smi" ] && [ -n "$smi_err" ]; then
    echo "FAIL: nvidia-smi cannot list the GPU: $smi_err"
    exit 1
elif [ -z "$smi" ]; then
    echo "SKIP: no GPU (nvidia-smi: not found)"
    exit 0
fi
echo "# gpuring device paths vs bounds on $smi; logs in $logs"

# ---- 1. the copy rate ------------------------------------------------------------------
gpu_find_bin test_reduce_cuda
if [ ! -x "$bin" ]; then
    echo "FAIL: $bin is not built (make check here, then test/gpu/pack_for_gpu.sh and carry .gpu-carry)"
    exit 1
fi
: >"$tmp/copy"
rep=1
while [ "$rep" -le "$reps" ]; do
    gpu_limit "$limit"
    [ "$limit_now" -eq 0 ] && break
    timeout -k 10 "$limit_now" "$bin" bandwidth >"$logs/copy.$rep.log" 2>&1
    sed -n 's/^ *cudaMemcpy device to device *\([0-9.][0-9.]*\) GB\/s.*/\1/p' \
        "$logs/copy.$rep.log" >>"$tmp/copy"
    rep=$((rep + 1))
done
copy=$(median <"$tmp/copy")
if [ "$copy" = - ]; then
    echo "FAIL: test_reduce_cuda printed no copy rate (see $logs/copy.1.log)"
    exit 1
fi
echo "# device-to-device copy rate: $copy GB/s of HBM traffic (median of $reps)"

# ---- 2. the paths ----------------------------------------------------------------------
gpu_mpi_setup
if [ -z "$mpirun" ] || [ "$mpi_setup_failed" -ne 0 ]; then
    echo "FAIL: the allreduce paths need Open MPI (test/gpu/pack_for_gpu.sh here, carry" \
         ".gpu-carry; $mpi_setup_failed .debs did not unpack)"
    exit 1
fi
perf="$mpibin/allreduce_perf"
[ -x "$perf" ] || perf="$builddir/test/perf/allreduce_perf"
gpu_mps_start

# the vnodes bound: ucx_perftest tag_bw at 16 MiB between two local processes
tagbw=-
case ",$paths," in *,vnodes,* | *,vnodes_4ch,*)
    if command -v ucx_perftest >/dev/null 2>&1; then
        : >"$tmp/tagbw"
        mode=$(ucx_perftest_mode ucx_perftest)
        rep=1
        while [ "$rep" -le "$reps" ]; do
            gpu_limit 60
            [ "$limit_now" -lt 40 ] && break
            port=$((13370 + $$ % 500 + rep))
            # shellcheck disable=SC2086 # $mode: no option, or two words
            timeout -k 5 "$limit_now" ucx_perftest $mode -p "$port" \
                >"$logs/tag_bw.$rep.server" 2>&1 &
            spid=$!
            # (the client again while the server is not listening yet: up to 5 tries)
            try=1
            while [ "$try" -le 5 ]; do
                sleep 0.5
                # shellcheck disable=SC2086
                timeout -k 5 30 ucx_perftest $mode -p "$port" 127.0.0.1 -t tag_bw -s 16777216 \
                    -n 50 >"$logs/tag_bw.$rep.log" 2>&1
                grep -q '^Final:' "$logs/tag_bw.$rep.log" && break
                try=$((try + 1))
            done
            # (no client got through: the server would wait out its limit)
            grep -q '^Final:' "$logs/tag_bw.$rep.log" || kill "$spid" 2>/dev/null
            wait "$spid"
            grep -q '^Final:' "$logs/tag_bw.$rep.log" || break
            # Final: iters lat50 lat_avg lat_overall bw_avg(MiB/s) ...
            awk '/^Final:/ { printf "%.4f\n", $6 * 1048576 / 1e9 }' "$logs/tag_bw.$rep.log" \
                >>"$tmp/tagbw"
            rep=$((rep + 1))
        done
        tagbw=$(median <"$tmp/tagbw")
        if [ "$tagbw" = - ]; then
            echo "FAIL: ucx_perftest tag_bw measured nothing (see $logs/tag_bw.1.log): the" \
                 "vnodes path is printed without a bound"
            status=1
        fi
        echo "# ucx_perftest tag_bw, 16 MiB, two processes: $tagbw GB/s (median of $reps)"
    else
        echo "# no ucx_perftest: the vnodes path is printed without a bound"
    fi
    ;;
esac

# path_mca PATH -> its MCA parameters; path_want PATH -> direct|fifo
path_mca() {
    case $1 in
    direct) echo "" ;;
    direct_ipc) echo "coll_gpuring_direct_ll_size 0" ;;
    direct_ll_max) echo "coll_gpuring_direct_ll_size 1048576" ;;
    fifo) echo "coll_gpuring_direct 0" ;;
    fifo_max) echo "coll_gpuring_direct 0 coll_gpuring_device_nchannels 32 coll_gpuring_channels_per_call 32" ;;
    fifo_2ch) echo "coll_gpuring_direct 0 coll_gpuring_device_nchannels 2" ;;
    fifo_simple) echo "coll_gpuring_direct 0 coll_gpuring_protocol simple" ;;
    fifo_ll) echo "coll_gpuring_direct 0 coll_gpuring_protocol ll" ;;
    tree) echo "coll_gpuring_direct 0 coll_gpuring_algorithm tree" ;;
    vnodes) echo "coll_gpuring_ranks_per_node 1" ;;
    vnodes_4ch) echo "coll_gpuring_ranks_per_node 1 coll_gpuring_channels_per_call 4" ;;
    esac
}
# path_bound PATH NP -> GB/s ("-" when unknown)
path_bound() {
    case $1 in
    direct*) awk -v m="$copy" -v n="$2" 'BEGIN { printf "%.1f\n", m * (n - 1) / (n * n) }' ;;
    vnodes*) echo "$tagbw" ;;
    *) awk -v m="$copy" -v n="$2" 'BEGIN { printf "%.1f\n", m * (n - 1) / (2 * n * n) }' ;;
    esac
}

# perf_run LOG ARGS...: allreduce_perf -m device ARGS on $np ranks through gpuring
# with the MCA parameters in $mca (name value ...), results checked, into LOG
perf_run() {
    log=$1
    shift
    gpu_limit "$limit"
    if [ "$limit_now" -eq 0 ]; then
        echo "FAIL: not started, the run's deadline is near (GPURING_GPU_DEADLINE" \
             "${gpu_deadline}s): $log" | tee "$log"
        status=1
        return 124
    fi
    # shellcheck disable=SC2046,SC2086
    gpu_run env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout -k 10 "$limit_now" "$mpirun" -n "$np" --oversubscribe --bind-to none \
        --mca mca_base_component_path "$component_dir:$pkglibdir" \
        --mca mca_base_component_show_load_errors 0 \
        --mca coll gpuring,tuned,basic,libnbc,self $(printf -- '--mca %s %s ' $mca) \
        "$perf" -m device -c 1 "$@" >"$log" 2>&1
}

printf '| path | ranks | 8 B (us) | 64 KiB (us) | 1 MiB busbw | 16 MiB busbw | 256 MiB busbw | bound (GB/s) | ratio at 256 MiB |\n' >"$summary"
printf '|---|---|---|---|---|---|---|---|---|\n' >>"$summary"
for np in $nps; do
    for path in $(echo "$paths" | tr ',' ' '); do
        mca=""
        for p in coll_gpuring_verbose 3 coll_gpuring_wait_timeout 120 $(path_mca "$path"); do
            mca="$mca $p"
        done
        case $path in direct*) want=direct ;; *) want=fifo ;; esac
        bound=$(path_bound "$path" "$np")
        : >"$tmp/rows"
        rep=1
        while [ "$rep" -le "$reps" ]; do
            log="$logs/$path.np$np.$rep.log"
            perf_run "$log" -b 8 -e "$maxbytes" -f 2 -n "$iters" -w 5
            rc=$?
            ondev=$(grep -c "allreduce summary: .*; [1-9][0-9]* on device buffers" "$log")
            if [ "$want" = direct ]; then
                ours=$(grep -c "allreduce summary: [0-9]* calls in gpuring (ring 0, tree 0, gather 0," "$log")
            else
                ours=$(grep -c "allreduce summary: .*, LL direct 0, direct 0;" "$log")
            fi
            if [ "$rc" -ne 0 ] || [ "$ondev" -ne "$np" ] || [ "$ours" -ne "$np" ]; then
                echo "FAIL: $path, $np ranks, run $rep: exit $rc, $ondev of $np ranks ran" \
                     "device calls in gpuring, $ours of $np every call $want; log $log"
                status=1
            fi
            # size count type op time algbw busbw #wrong
            awk -v r="$rep" '!/^#/ && NF == 8 && $1 ~ /^[0-9]+$/ {
                    if ($8 != 0) bad = 1; print $1, $5, $7, r }
                END { exit bad }' "$log" >>"$tmp/rows" || {
                echo "FAIL: $path, $np ranks, run $rep: wrong elements; log $log"
                status=1
            }
            rep=$((rep + 1))
        done
        echo
        echo "## $path, $np ranks: $(path_mca "$path" | sed 's/^$/defaults/')"
        printf '%12s %12s %12s %10s %8s\n' "size(B)" "time(us)" "busbw(GB/s)" "bound" "ratio"
        for b in $(cut -d' ' -f1 "$tmp/rows" | sort -n -u); do
            t=$(awk -v b="$b" '$1 == b { print $2 }' "$tmp/rows" | median)
            bw=$(awk -v b="$b" '$1 == b { print $3 }' "$tmp/rows" | median)
            ratio=-
            if [ "$b" -ge 1048576 ] && [ "$bound" != - ] && [ "$bw" != - ]; then
                ratio=$(awk -v x="$bw" -v y="$bound" 'BEGIN { printf "%.0f%%", 100 * x / y }')
            fi
            printf '%12s %12s %12s %10s %8s\n' "$b" "$t" "$bw" "$bound" "$ratio"
        done | tee "$logs/$path.np$np.table"
        # where an 8-byte call's time goes (a run of its own: the profile's clock reads
        # stay out of the table)
        log="$logs/$path.np$np.profile.log"
        mca="$mca coll_gpuring_profile 1"
        perf_run "$log" -b 8 -e 8 -n "$profile_iters" -w 50
        echo "8 B calls, coll_gpuring_profile 1 (median us per point; $(awk '!/^#/ && NF == 8 && $1 == 8 { print $5 " us a call" }' "$log")):"
        if grep -q 'profile of .* device buffers' "$log"; then
            grep 'profile of .* device buffers' "$log" | sed 's/^.*\(\[gpuring rank\)/\1/'
        else
            echo "  (no profile line: see $log)"
        fi
        pick() { awk -v b="$1" -v c="$2" '$1 == b { print $c }' "$logs/$path.np$np.table"; }
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$path" "$np" "$(pick 8 2)" \
            "$(pick 65536 2)" "$(pick 1048576 3)" "$(pick 16777216 3)" "$(pick 268435456 3)" "$bound" \
            "$(pick 268435456 5)" >>"$summary"
    done
done

echo
echo "Summary (medians of $reps; allreduce_perf -m device, float sum, -n $iters; busbw in GB/s;"
echo "bounds from the copy rate $copy GB/s, vnodes from ucx_perftest tag_bw; $smi;"
echo "MPS $([ "$mps_started" = 1 ] && echo on || echo off)):"
cat "$summary"
exit $status
