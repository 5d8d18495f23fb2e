#!/bin/bash
# compare.sh -- MPI_Allreduce through gpuring vs. Open MPI's default (tuned),
# measured with allreduce_perf in one invocation of this script.
#
# Sizes are split into groups of G consecutive sizes; for each group the two
# configurations run back to back (alternating which goes first), so slow
# drift of the machine hits both columns alike.  The whole sweep is repeated
# R times and each column keeps, per size, the run with the lowest time
# (the time printed is still allreduce_perf's average over iters, max over
# ranks).  Run it with GPURING_MCA_ARGS empty once to see the noise: both
# columns are then the same plain Open MPI.
#
#   gpuring: mpirun $GPURING_MCA_ARGS --mca coll_gpuring_priority 90 ...
#   tuned:   mpirun $GPURING_MCA_ARGS --mca coll ^gpuring ...
# (params named here are dropped from GPURING_MCA_ARGS first: mpirun refuses
# a param given twice).  The gpuring runs also get coll_gpuring_verbose 3 and
# must print gpuring's `ready:` line; the tuned runs must not.  With GPURING_MCA_ARGS empty both columns are plain
# Open MPI, which measures the noise of the comparison.
#
# Usage: compare.sh [-n np] [-b minbytes] [-e maxbytes] [-f factor] [-t type]
#                   [-o op] [-N iters] [-w warmup] [-m host|device] [-i]
#                   [-g sizes-per-group] [-r repetitions] [-c 0|1]
# Defaults: -n 2 -b 8 -e 64M -f 2 -t float -o sum -N 50 -w 10 -m host -g 4 -r 3
#           -c 1
# Environment: GPURING_PERF_BIN (default: allreduce_perf next to this
# script), GPURING_PERF_LOGDIR (raw outputs; default mktemp -d),
# GPURING_PERF_TIMEOUT (seconds per mpirun, default 600), MPIRUN.
# Output: a text table, then the same as markdown.  Exit code 1 if any run
# failed or reported wrong results.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PERF=${GPURING_PERF_BIN:-$HERE/allreduce_perf}
LOGDIR=${GPURING_PERF_LOGDIR:-}
[ -z "$LOGDIR" ] && LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/gpuring-perf.XXXXXX")
mkdir -p "$LOGDIR" || exit 2
TIMEOUT=${GPURING_PERF_TIMEOUT:-600}
MPIRUN=${MPIRUN:-mpirun}

NP=2 MINB=8 MAXB=64M FACTOR=2 TYPE=float OP=sum ITERS=50 WARMUP=10 MODE=host INPLACE=() GROUP=4 CHECK=1 REPS=3
while getopts "n:b:e:f:t:o:N:w:m:ig:r:c:h" opt; do
    case $opt in
    n) NP=$OPTARG ;;
    b) MINB=$OPTARG ;;
    e) MAXB=$OPTARG ;;
    f) FACTOR=$OPTARG ;;
    t) TYPE=$OPTARG ;;
    o) OP=$OPTARG ;;
    N) ITERS=$OPTARG ;;
    w) WARMUP=$OPTARG ;;
    m) MODE=$OPTARG ;;
    i) INPLACE=(-i) ;;
    g) GROUP=$OPTARG ;;
    r) REPS=$OPTARG ;;
    c) CHECK=$OPTARG ;;
    *)
        sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//' | grep -v '^set -u'
        exit 2
        ;;
    esac
done
[ -x "$PERF" ] || { echo "allreduce_perf not found at $PERF (set GPURING_PERF_BIN)"; exit 2; }

source "$HERE/perf_sizes.sh"
MINB=$(to_bytes "$MINB")
MAXB=$(to_bytes "$MAXB")
if ! [[ $FACTOR =~ ^[0-9]+$ ]] || [ "$FACTOR" -lt 2 ]; then echo "factor must be an integer >= 2"; exit 2; fi

source "$HERE/../mca_args.sh"
BASE=(--oversubscribe -np "$NP")
[ "$(id -u)" = 0 ] && BASE+=(--allow-run-as-root)
mca_args coll_gpuring_priority 90 coll_gpuring_verbose 3
GPU_MCA=("${MCA[@]}")
mca_args coll ^gpuring
TUNED_MCA=("${MCA[@]}")

if [ ${#USER_MCA[@]} = 0 ]; then
    echo "# NOTE: GPURING_MCA_ARGS is empty: both columns are plain Open MPI (noise baseline)"
fi
echo "# np $NP, type $TYPE, op $OP, mode $MODE, iters $ITERS, warmup $WARMUP${INPLACE:+, in-place}, best of $REPS, logs $LOGDIR"

SIZES=()
for ((s = MINB; s <= MAXB; s *= FACTOR)); do SIZES+=("$s"); done
[ ${#SIZES[@]} = 0 ] && { echo "no sizes"; exit 2; }

declare -A T_TIME T_BW G_TIME G_BW T_WRONG G_WRONG
STATUS=0
run_perf() { # run_perf CONFIG LOG MIN MAX -> fills arrays
    local cfg=$1 log=$2 lo=$3 hi=$4
    local -a mca
    if [ "$cfg" = gpuring ]; then mca=("${GPU_MCA[@]}"); else mca=("${TUNED_MCA[@]}"); fi
    local -a cmd=(timeout -k 10 "$TIMEOUT" $MPIRUN "${BASE[@]}" "${mca[@]}" "$PERF" -b "$lo" -e "$hi" -f "$FACTOR"
        -t "$TYPE" -o "$OP" -n "$ITERS" -w "$WARMUP" -m "$MODE" -c "$CHECK" "${INPLACE[@]}")
    { echo "# ${cmd[*]}"; "${cmd[@]}"; } > "$log" 2> "$log.stderr"
    local rc=$?
    if [ $rc != 0 ]; then
        echo "# $cfg run for sizes $lo..$hi failed (exit $rc), see $log and $log.stderr"
        STATUS=1
    fi
    if [ ${#USER_MCA[@]} -gt 0 ]; then # prove which allreduce ran
        if [ "$cfg" = gpuring ] && ! grep -q "\] comm .* ready:" "$log.stderr"; then
            echo "# WARNING: gpuring run for sizes $lo..$hi printed no 'ready:' line: gpuring did not run"
            STATUS=1
        elif [ "$cfg" = tuned ] && grep -q "\] comm .* ready:" "$log.stderr"; then
            echo "# WARNING: tuned run for sizes $lo..$hi printed a gpuring 'ready:' line"
            STATUS=1
        fi
    fi
    local size count type op time algbw busbw wrong
    while read -r size count type op time algbw busbw wrong; do
        [[ $size =~ ^[0-9]+$ && $count =~ ^[0-9]+$ ]] || continue # result rows only
        if [ "$wrong" != 0 ] && [ "$wrong" != N/A ]; then
            STATUS=1
            if [ "$cfg" = gpuring ]; then G_WRONG[$size]=$wrong; else T_WRONG[$size]=$wrong; fi
        fi
        if [ "$cfg" = gpuring ]; then
            if [ -z "${G_TIME[$size]:-}" ] || awk -v a="$time" -v b="${G_TIME[$size]}" 'BEGIN { exit !(a < b) }'; then
                G_TIME[$size]=$time G_BW[$size]=$busbw
            fi
        else
            if [ -z "${T_TIME[$size]:-}" ] || awk -v a="$time" -v b="${T_TIME[$size]}" 'BEGIN { exit !(a < b) }'; then
                T_TIME[$size]=$time T_BW[$size]=$busbw
            fi
        fi
    done < <(grep -v '^#' "$log")
}

g=0
for ((rep = 1; rep <= REPS; rep++)); do
    for ((i = 0; i < ${#SIZES[@]}; i += GROUP)); do
        lo=${SIZES[i]}
        j=$((i + GROUP - 1))
        ((j >= ${#SIZES[@]})) && j=$((${#SIZES[@]} - 1))
        hi=${SIZES[j]}
        if ((g % 2 == 0)); then order=(tuned gpuring); else order=(gpuring tuned); fi
        for cfg in "${order[@]}"; do
            echo "# rep $rep: running $cfg, sizes $lo..$hi" >&2
            run_perf "$cfg" "$LOGDIR/$cfg.$lo-$hi.rep$rep.log" "$lo" "$hi"
        done
        g=$((g + 1))
    done
done

ratio() { # gpuring busbw / tuned busbw
    awk -v g="$1" -v t="$2" 'BEGIN { if (g == "" || t == "" || t + 0 == 0) print "-"; else printf "%.2f", g / t }'
}
echo
printf "%12s %14s %14s %14s %14s %8s %s\n" "size(B)" "tuned(us)" "gpuring(us)" "tuned busbw" "gpuring busbw" "ratio" "note"
for s in "${SIZES[@]}"; do
    note=
    [ "${G_WRONG[$s]:-0}" != 0 ] && [ "${G_WRONG[$s]:-0}" != N/A ] && note+="gpuring #wrong=${G_WRONG[$s]} "
    [ "${T_WRONG[$s]:-0}" != 0 ] && [ "${T_WRONG[$s]:-0}" != N/A ] && note+="tuned #wrong=${T_WRONG[$s]} "
    [ -z "${G_TIME[$s]:-}" ] && note+="gpuring missing "
    [ -z "${T_TIME[$s]:-}" ] && note+="tuned missing "
    printf "%12s %14s %14s %14s %14s %8s %s\n" "$s" "${T_TIME[$s]:--}" "${G_TIME[$s]:--}" "${T_BW[$s]:--}" \
        "${G_BW[$s]:--}" "$(ratio "${G_BW[$s]:-}" "${T_BW[$s]:-}")" "$note"
done
echo
echo "Markdown (np $NP, $TYPE $OP, $MODE buffers, busbw in GB/s, best of $REPS):"
echo
echo "| size (B) | tuned time (us) | gpuring time (us) | tuned busbw | gpuring busbw | gpuring/tuned |"
echo "|---:|---:|---:|---:|---:|---:|"
for s in "${SIZES[@]}"; do
    echo "| $s | ${T_TIME[$s]:--} | ${G_TIME[$s]:--} | ${T_BW[$s]:--} | ${G_BW[$s]:--} | $(ratio "${G_BW[$s]:-}" "${T_BW[$s]:-}") |"
done
exit $STATUS
