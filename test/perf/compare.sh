#!/bin/bash
# compare.sh -- one collective (MPI_Allreduce unless -C names another, with
# allreduce_perf's nccl-tests names) through gpuring vs. Open MPI's default
# (tuned), and both against the memory bound (memcpy of the same bytes on
# every rank at once: allreduce_perf -m memcpy), measured with allreduce_perf
# in one invocation of this script.
#
# Sizes are split into groups of G consecutive sizes; for each group the two
# configurations run back to back (alternating which goes first), so slow
# drift of the machine hits both columns alike, then the memcpy bound (host
# mode).  The whole sweep is repeated R times (R pairs per size) and each
# column is the median over the R runs of allreduce_perf's time (its average
# over iters, max over ranks) and busbw.  Ratios: gpuring/tuned is the
# busbw ratio (> 1: gpuring faster), taken from the median times (the same
# bytes each: busbw printed with 3 decimals would round small calls' ratios);
# gpuring/memcpy is gpuring's busbw over the memcpy rate.  Run it with GPURING_MCA_ARGS empty once to see the noise:
# both columns are then the same plain Open MPI.
#
#   gpuring: mpirun $GPURING_MCA_ARGS --mca coll_gpuring_priority 90 ...
#   tuned:   mpirun $GPURING_MCA_ARGS --mca coll ^gpuring ...
# (params named here are dropped from GPURING_MCA_ARGS first: mpirun refuses
# a param given twice).  The gpuring runs also get coll_gpuring_verbose 3 and
# must print gpuring's `ready:` line and a finalize summary counting at least
# N calls of the collective in gpuring; the tuned runs must print neither.  With GPURING_MCA_ARGS empty both columns are plain
# Open MPI, which measures the noise of the comparison.
#
# -T "NAME VALUE ...": the baseline column is gpuring too, with these params
# on top (named "base" in the tables, and held to the gpuring runs' checks),
# to compare two gpuring settings alternating, e.g. the tree against the
# chain:  GPURING_MCA_ARGS="$M --mca coll_gpuring_algorithm tree"
#         compare.sh -C broadcast -T "coll_gpuring_algorithm ring"
#
# Usage: compare.sh [-C coll] [-n np] [-b minbytes] [-e maxbytes] [-f factor]
#                   [-t type] [-o op] [-N iters] [-w warmup] [-m host|device]
#                   [-i] [-g sizes-per-group] [-r repetitions] [-c 0|1]
#                   [-x sizes] [-B 0|1] [-T "param value ..."]
# Defaults: -C all_reduce -n 2 -b 8 -e 64M -f 2 -t float -o sum -N auto -w 10
#           -m host -g 4 -r 5 -c 1 -B 1  (-N auto: iterations by the run's
#           largest size, 2000 up to 64 KiB, 200 up to 4 MiB, 50 above --
#           a call of a microsecond needs thousands to average out the first
#           ones'; the warmup is then at least a tenth; -e is measured even when -f steps
#           past it; -x adds sizes off the -f grid, comma-separated, e.g.
#           -x 64K; -B 0 skips the memcpy bound)
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

COLL=all_reduce BOUND=1 NP=2 MINB=8 MAXB=64M FACTOR=2 TYPE=float OP=sum ITERS=auto WARMUP=10 MODE=host INPLACE=() GROUP=4 CHECK=1 REPS=5
EXTRA= BASELINE= BL=tuned
while getopts "C:B:n:b:e:f:t:o:N:w:m:ig:r:c:x:T:h" opt; do
    case $opt in
    C) COLL=$OPTARG ;;
    B) BOUND=$OPTARG ;;
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
    x) EXTRA=$OPTARG ;;
    T) BASELINE=$OPTARG BL=base ;;
    *)
        sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//' | grep -v '^set -u'
        exit 2
        ;;
    esac
done
[ -x "$PERF" ] || { echo "allreduce_perf not found at $PERF (set GPURING_PERF_BIN)"; exit 2; }

# the name of the collective in gpuring's finalize summary
case $COLL in
all_reduce | iall_reduce) SUMMARY_NAME=allreduce ;;
reduce_scatter) SUMMARY_NAME=reduce_scatter ;;
all_gather) SUMMARY_NAME=allgather ;;
broadcast) SUMMARY_NAME=bcast ;;
reduce) SUMMARY_NAME=reduce ;;
*) echo "unknown collective $COLL"; exit 2 ;;
esac

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
if [ -n "$BASELINE" ]; then
    read -r -a base_params <<< "$BASELINE"
    mca_args coll_gpuring_priority 90 coll_gpuring_verbose 3 "${base_params[@]}"
    TUNED_MCA=("${MCA[@]}")
    echo "# the baseline column is gpuring with $BASELINE"
fi

if [ ${#USER_MCA[@]} = 0 ]; then
    # an installed gpuring would load in the first column (and log every reason it
    # hands the calls below): keep it out of both
    GPU_MCA=("${TUNED_MCA[@]}")
    echo "# NOTE: GPURING_MCA_ARGS is empty: both columns are plain Open MPI (noise baseline)"
fi
echo "# $COLL, np $NP, type $TYPE, op $OP, mode $MODE, iters $ITERS, warmup $WARMUP${INPLACE:+, in-place}, median of $REPS, logs $LOGDIR"

SIZES=()
for ((s = MINB; s <= MAXB; s *= FACTOR)); do SIZES+=("$s"); done
[ ${#SIZES[@]} -gt 0 ] && [ "${SIZES[-1]}" != "$MAXB" ] && SIZES+=("$MAXB")
[ ${#SIZES[@]} = 0 ] && { echo "no sizes"; exit 2; }
# the runs: groups of GROUP grid sizes, then each extra size alone
RUNS=()
for ((i = 0; i < ${#SIZES[@]}; i += GROUP)); do
    j=$((i + GROUP - 1))
    ((j >= ${#SIZES[@]})) && j=$((${#SIZES[@]} - 1))
    RUNS+=("${SIZES[i]} ${SIZES[j]}")
done
for x in ${EXTRA//,/ }; do
    x=$(to_bytes "$x")
    [[ " ${SIZES[*]} " == *" $x "* ]] && continue
    SIZES+=("$x")
    RUNS+=("$x $x")
done
mapfile -t SIZES < <(printf '%s\n' "${SIZES[@]}" | sort -n)

# per configuration and size: every run's time and busbw (space-separated lists)
declare -A TIMES BWS WRONG
STATUS=0
run_perf() { # run_perf CONFIG LOG MIN MAX -> appends to TIMES/BWS
    local cfg=$1 log=$2 lo=$3 hi=$4
    local -a mca mode=(-m "$MODE" -c "$CHECK" "${INPLACE[@]}")
    case $cfg in
    gpuring) mca=("${GPU_MCA[@]}") ;;
    tuned) mca=("${TUNED_MCA[@]}") ;;
    memcpy) mca=("${TUNED_MCA[@]}") mode=(-m memcpy) ;;
    esac
    local iters=$ITERS warmup=$WARMUP
    if [ "$iters" = auto ]; then
        iters=$(auto_iters "$hi")
        warmup=$((warmup > iters / 10 ? warmup : iters / 10))
    fi
    local -a cmd=(timeout -k 10 "$TIMEOUT" $MPIRUN "${BASE[@]}" "${mca[@]}" "$PERF" -C "$COLL" -b "$lo" -e "$hi" -f "$FACTOR"
        -t "$TYPE" -o "$OP" -n "$iters" -w "$warmup" "${mode[@]}")
    { echo "# ${cmd[*]}"; "${cmd[@]}"; } > "$log" 2> "$log.stderr"
    local rc=$?
    if [ $rc != 0 ]; then
        echo "# $cfg run for sizes $lo..$hi failed (exit $rc), see $log and $log.stderr"
        STATUS=1
    fi
    if [ ${#USER_MCA[@]} -gt 0 ]; then # prove which collective ran
        local ncalls
        ncalls=$(sed -n "s/.* $SUMMARY_NAME summary: \([0-9]*\) calls in gpuring.*/\1/p" "$log.stderr" | head -1)
        local ran=gpuring
        [ -n "$BASELINE" ] && [ "$cfg" = tuned ] && ran=tuned
        if [ "$cfg" = $ran ] && ! grep -q "\] comm .* ready:" "$log.stderr"; then
            echo "# WARNING: gpuring run for sizes $lo..$hi printed no 'ready:' line: gpuring did not run"
            STATUS=1
        elif [ "$cfg" = $ran ] && [ "${ncalls:-0}" -lt "$iters" ]; then
            echo "# WARNING: gpuring run for sizes $lo..$hi: ${ncalls:-no} $SUMMARY_NAME calls in gpuring (< $iters)"
            STATUS=1
        elif [ "$cfg" = tuned ] && [ -z "$BASELINE" ] && grep -q "\] comm .* ready:" "$log.stderr"; then
            echo "# WARNING: tuned run for sizes $lo..$hi printed a gpuring 'ready:' line"
            STATUS=1
        fi
    fi
    local size count type op time algbw busbw wrong
    while read -r size count type op time algbw busbw wrong; do
        [[ $size =~ ^[0-9]+$ && $count =~ ^[0-9]+$ ]] || continue # result rows only
        if [ "$wrong" != 0 ] && [ "$wrong" != N/A ]; then
            STATUS=1
            WRONG[$cfg.$size]=$wrong
        fi
        TIMES[$cfg.$size]+=" $time"
        BWS[$cfg.$size]+=" $busbw"
    done < <(grep -v '^#' "$log")
}

median() { # median of a space-separated list of numbers ("-" if empty)
    [ -z "${1// /}" ] && { echo -; return; }
    printf '%s\n' $1 | sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
        else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

g=0
for ((rep = 1; rep <= REPS; rep++)); do
    for run in "${RUNS[@]}"; do
        read -r lo hi <<< "$run"
        if ((g % 2 == 0)); then order=(tuned gpuring); else order=(gpuring tuned); fi
        [ "$MODE" = host ] && [ "$BOUND" = 1 ] && order+=(memcpy) # the bound, in the same conditions
        for cfg in "${order[@]}"; do
            echo "# rep $rep: running $cfg, sizes $lo..$hi" >&2
            run_perf "$cfg" "$LOGDIR/$cfg.$lo-$hi.rep$rep.log" "$lo" "$hi"
        done
        g=$((g + 1))
    done
done

ratio() { # a / b: busbw values, or times the other way round
    awk -v g="$1" -v t="$2" 'BEGIN { if (g == "" || g == "-" || t == "" || t == "-" || t + 0 == 0) print "-"; else printf "%.2f", g / t }'
}
declare -A MED
for s in "${SIZES[@]}"; do
    for cfg in tuned gpuring memcpy; do
        MED[$cfg.t.$s]=$(median "${TIMES[$cfg.$s]:-}")
        MED[$cfg.bw.$s]=$(median "${BWS[$cfg.$s]:-}")
    done
done
note_of() { # what is wrong or missing at size $1
    local s=$1 note= cfg
    for cfg in tuned gpuring; do
        [ -n "${WRONG[$cfg.$s]:-}" ] && note+="$cfg #wrong=${WRONG[$cfg.$s]} "
        [ -z "${TIMES[$cfg.$s]:-}" ] && note+="$cfg missing "
    done
    echo "$note"
}
echo
printf "%12s %12s %12s %12s %12s %8s %12s %8s %s\n" "size(B)" "$BL(us)" "gpuring(us)" \
    "$BL busbw" "gpuring bw" "g/$BL" "memcpy GB/s" "g/memcpy" "note"
for s in "${SIZES[@]}"; do
    printf "%12s %12s %12s %12s %12s %8s %12s %8s %s\n" "$s" "${MED[tuned.t.$s]}" "${MED[gpuring.t.$s]}" \
        "${MED[tuned.bw.$s]}" "${MED[gpuring.bw.$s]}" \
        "$(ratio "${MED[tuned.t.$s]}" "${MED[gpuring.t.$s]}")" "${MED[memcpy.bw.$s]}" \
        "$(ratio "${MED[gpuring.bw.$s]}" "${MED[memcpy.bw.$s]}")" "$(note_of "$s")"
done
echo
echo "Markdown ($COLL, np $NP, $TYPE $OP, $MODE buffers, busbw in GB/s, medians of $REPS runs each):"
echo
echo "| size (B) | $BL time (us) | gpuring time (us) | $BL busbw | gpuring busbw | gpuring/$BL | memcpy (GB/s) | gpuring/memcpy |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
for s in "${SIZES[@]}"; do
    echo "| $s | ${MED[tuned.t.$s]} | ${MED[gpuring.t.$s]} | ${MED[tuned.bw.$s]} | ${MED[gpuring.bw.$s]} | $(ratio "${MED[tuned.t.$s]}" "${MED[gpuring.t.$s]}") | ${MED[memcpy.bw.$s]} | $(ratio "${MED[gpuring.bw.$s]}" "${MED[memcpy.bw.$s]}") |"
done
exit $STATUS
