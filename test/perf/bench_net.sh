#!/bin/bash
# bench_net.sh -- gpuring's UCX (net) path against UCX itself, in one run.
#
# gpuring: MPI_Allreduce on host buffers, 2 ranks, every rank its own virtual
# node (coll_gpuring_ranks_per_node 1), so each ring edge is a NET connection
# moved over UCX; allreduce_perf's time (average over iters, max over ranks)
# and busbw.  Bound: ucx_perftest between two processes on this machine with
# UCX's default transports (what gpuring's same-host endpoints get: no peer
# error handling), tag_lat for the latency of one message and tag_bw for the
# bandwidth of one stream.  Each process is pinned to its own core, as mpirun
# binds the two ranks.  For every size and repetition both run back to back,
# alternating which goes first; the table gives medians and ratios:
#   8 B:       gpuring time / tag_lat (a 2-rank allreduce is one message each
#              way, so the bound is one message latency; lower is better)
#   bandwidth: gpuring busbw / tag_bw (busbw = algbw at 2 ranks: every rank
#              sends and receives the buffer size once; higher is better)
# Bandwidths in GB/s (1e9 B/s; ucx_perftest's MB/s are MiB/s, converted).
#
# Usage: bench_net.sh [-r reps] [-s "sizes"] [-N iters]
# Defaults: -r 5 -s "8 1M 16M" -N auto (10000 at 8 B, 200 at 1 MiB, 20 at 16 MiB)
# Environment: GPURING_MCA_ARGS (component path etc., as for make check),
# GPURING_PERF_BIN (default: allreduce_perf next to this script),
# GPURING_BENCH_LOGDIR (raw outputs; default mktemp -d), UCX_PERFTEST
# (default ucx_perftest), MPIRUN, GPURING_BENCH_PORT (default 13370 + pid % 500).
# Exit code 1 if a run failed or gpuring reported wrong results.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PERF=${GPURING_PERF_BIN:-$HERE/allreduce_perf}
PERFTEST=${UCX_PERFTEST:-ucx_perftest}
MPIRUN=${MPIRUN:-mpirun}
LOGDIR=${GPURING_BENCH_LOGDIR:-}
[ -z "$LOGDIR" ] && LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/gpuring-bench-net.XXXXXX")
mkdir -p "$LOGDIR" || exit 2
PORT=${GPURING_BENCH_PORT:-$((13370 + $$ % 500))}
REPS=5 SIZES="8 1M 16M" ITERS=
while getopts "r:s:N:h" opt; do
    case $opt in
    r) REPS=$OPTARG ;;
    s) SIZES=$OPTARG ;;
    N) ITERS=$OPTARG ;;
    *)
        sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//' | grep -v '^set -u'
        exit 2
        ;;
    esac
done
[ -x "$PERF" ] || { echo "allreduce_perf not found at $PERF (set GPURING_PERF_BIN)"; exit 2; }
command -v "$PERFTEST" > /dev/null || { echo "$PERFTEST not found (Debian: ucx-utils)"; exit 2; }

source "$HERE/perf_sizes.sh"
source "$HERE/ucx_perftest_mode.sh"
read -r -a PERFTEST_MODE <<< "$(ucx_perftest_mode "$PERFTEST")"
iters_for() { # iterations per run at a size
    local b=$1
    if [ -n "$ITERS" ]; then echo "$ITERS"
    elif [ "$b" -le 65536 ]; then echo 10000
    elif [ "$b" -le 4194304 ]; then echo 200
    else echo 20; fi
}

source "$HERE/../mca_args.sh"
mca_args coll_gpuring_priority 90 coll_gpuring_verbose 3 coll_gpuring_host_buffers 1 \
    coll_gpuring_ranks_per_node 1
GPU_MCA=("${MCA[@]}")
BASE=(--oversubscribe -np 2 --bind-to core)
[ "$(id -u)" = 0 ] && BASE+=(--allow-run-as-root)
NCPU=$(nproc)
CPU_B=$((NCPU > 1 ? 1 : 0))

STATUS=0
# gpuring SIZE LOG -> "time_us busbw_GBps" (empty on failure)
run_gpuring() {
    local b=$1 log=$2 n
    n=$(iters_for "$b")
    local -a cmd=(timeout -k 10 300 $MPIRUN "${BASE[@]}" "${GPU_MCA[@]}" "$PERF" -b "$b" -e "$b"
        -n "$n" -w $((n / 10 + 2)) -c 1)
    { echo "# ${cmd[*]}"; "${cmd[@]}"; } > "$log" 2> "$log.stderr"
    local rc=$?
    if [ $rc != 0 ]; then
        echo "# gpuring at $b B failed (exit $rc), see $log" >&2
        STATUS=1
        return
    fi
    if ! grep -q "\] comm .* ready:.* 2 nodes" "$log.stderr"; then
        echo "# WARNING: gpuring at $b B printed no 'ready: ... 2 nodes' line: not the net path" >&2
        STATUS=1
    fi
    awk -v b="$b" '!/^#/ && $1 == b { if ($8 != 0 && $8 != "N/A") bad = 1; print $5, $7 } END { exit bad }' "$log" || STATUS=1
}
# perftest TEST SIZE LOG -> "avg_latency_us bandwidth_GBps" (empty on failure)
run_perftest() {
    local t=$1 b=$2 log=$3 n spid rc
    n=$(iters_for "$b")
    PORT=$((PORT + 1))
    taskset -c 0 timeout -k 5 120 "$PERFTEST" "${PERFTEST_MODE[@]}" -p "$PORT" > "$log.server" 2>&1 &
    spid=$!
    sleep 0.3
    local -a cmd=(taskset -c "$CPU_B" timeout -k 5 120 "$PERFTEST" "${PERFTEST_MODE[@]}" -p "$PORT" 127.0.0.1 -t "$t"
        -s "$b" -n "$n" -w $((n / 10 + 2)))
    { echo "# ${cmd[*]}"; "${cmd[@]}"; } > "$log" 2>&1
    rc=$?
    wait $spid
    if [ $rc != 0 ]; then
        echo "# ucx_perftest $t at $b B failed (exit $rc), see $log" >&2
        STATUS=1
        return
    fi
    # Final: iters  lat50 lat_avg lat_overall  bw_avg bw_overall  rate_avg rate_overall
    awk '/^Final:/ { printf "%s %.4f\n", $4, $6 * 1048576 / 1e9 }' "$log"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# gpuring net path (host buffers, 2 ranks as 2 virtual nodes) vs ucx_perftest, $REPS pairs per size, logs $LOGDIR"
echo "# UCX: $(ucx_info -v 2>/dev/null | sed -n 's/^# *Version /UCX /p'), UCX_TLS=${UCX_TLS:-default}; $NCPU CPUs"
declare -A G_T G_BW U_LAT U_BW
g=0
for sz in $SIZES; do
    b=$(to_bytes "$sz")
    if [ "$b" -le 65536 ]; then test=tag_lat; else test=tag_bw; fi
    for ((rep = 1; rep <= REPS; rep++)); do
        if ((g++ % 2 == 0)); then order=(gpuring ucx); else order=(ucx gpuring); fi
        for who in "${order[@]}"; do
            echo "# size $b rep $rep: $who" >&2
            if [ "$who" = gpuring ]; then
                read -r t bw <<< "$(run_gpuring "$b" "$LOGDIR/gpuring.$b.$rep.log")"
                [ -n "${t:-}" ] && G_T[$b]+="$t " G_BW[$b]+="$bw "
            else
                read -r t bw <<< "$(run_perftest "$test" "$b" "$LOGDIR/ucx.$test.$b.$rep.log")"
                [ -n "${t:-}" ] && U_LAT[$b]+="$t " U_BW[$b]+="$bw "
            fi
        done
    done
done

echo
printf "%10s %12s %12s %14s %14s %12s %s\n" "size(B)" "gpuring(us)" "ucx lat(us)" "gpuring(GB/s)" \
    "ucx bw(GB/s)" "ratio" "(ratio: time/lat at <= 64 KiB, busbw/bw above)"
MD="| size (B) | gpuring time (us) | ucx_perftest (us) | gpuring busbw (GB/s) | ucx_perftest (GB/s) | ratio |
|---:|---:|---:|---:|---:|---:|"
for sz in $SIZES; do
    b=$(to_bytes "$sz")
    gt=$(tr ' ' '\n' <<< "${G_T[$b]:-}" | grep . | median)
    gb=$(tr ' ' '\n' <<< "${G_BW[$b]:-}" | grep . | median)
    ul=$(tr ' ' '\n' <<< "${U_LAT[$b]:-}" | grep . | median)
    ub=$(tr ' ' '\n' <<< "${U_BW[$b]:-}" | grep . | median)
    if [ "$b" -le 65536 ]; then
        ratio=$(awk -v a="$gt" -v c="$ul" 'BEGIN { if (a == "-" || c == "-" || c + 0 == 0) print "-"; else printf "%.2fx time", a / c }')
        ub=-
    else
        ratio=$(awk -v a="$gb" -v c="$ub" 'BEGIN { if (a == "-" || c == "-" || c + 0 == 0) print "-"; else printf "%.2fx bw", a / c }')
        ul=-
    fi
    printf "%10s %12s %12s %14s %14s %12s\n" "$b" "$gt" "$ul" "$gb" "$ub" "$ratio"
    MD+="
| $b | $gt | $ul | $gb | $ub | $ratio |"
done
echo
echo "Markdown (medians of $REPS; gpuring: allreduce_perf -m host, float sum, coll_gpuring_ranks_per_node 1; ucx_perftest tag_lat / tag_bw, two processes, default transports):"
echo
echo "$MD"
exit $STATUS
