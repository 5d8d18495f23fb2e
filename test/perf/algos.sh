#!/bin/bash
# algos.sh -- gpuring's algorithms against each other in one run: the same
# allreduce_perf sweep with coll_gpuring_algorithm ring, tree and auto,
# interleaved, best of R, and the checks of issue #3 (a benchmark, not a test):
#   auto is never slower than the worse of ring and tree by more than 10%;
#   up to 4 KiB the tree beats the ring.
#
# Usage: algos.sh [-n np] [-v ranks_per_node] [-b min] [-e max] [-f factor] [-r reps]
# (-f an integer; each size runs alone, 2000 calls up to 64 KiB, 200 up to
# 4 MiB, 50 above, as compare.sh -N auto)
# Environment: GPURING_MCA_ARGS (as for the tests: component path, host buffers),
#              GPURING_PERF_BIN (default: allreduce_perf next to this script)
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NP=4 RPN=1 MINB=8 MAXB=64M FACTOR=8 REPS=8
while getopts "n:v:b:e:f:r:" o; do
    case $o in
    n) NP=$OPTARG ;; v) RPN=$OPTARG ;; b) MINB=$OPTARG ;; e) MAXB=$OPTARG ;;
    f) FACTOR=$OPTARG ;; r) REPS=$OPTARG ;; *) exit 2 ;;
    esac
done
PERF=${GPURING_PERF_BIN:-$HERE/allreduce_perf}
source "$HERE/../mca_args.sh"
source "$HERE/perf_sizes.sh"
ROOT=()
[ "$(id -u)" = 0 ] && ROOT=(--allow-run-as-root)
ALGOS=(ring tree auto)
SIZES=()
for ((s = $(to_bytes "$MINB"); s <= $(to_bytes "$MAXB"); s = s * FACTOR)); do SIZES+=("$s"); done
[ "${SIZES[-1]}" = "$(to_bytes "$MAXB")" ] || SIZES+=("$(to_bytes "$MAXB")") # -e even off the grid
declare -A BEST PICK
PLANS=$(mktemp)
trap 'rm -f "$PLANS"' EXIT

for ((rep = 1; rep <= REPS; rep++)); do
    for ((k = 0; k < ${#ALGOS[@]}; k++)); do
        a=${ALGOS[(k + rep) % ${#ALGOS[@]}]} # rotate who goes first
        mca_args coll_gpuring_algorithm "$a" coll_gpuring_ranks_per_node "$RPN" \
            coll_gpuring_verbose 5 coll_gpuring_verbose_subsys tuning
        for s in "${SIZES[@]}"; do
            iters=$(auto_iters "$s") # as compare.sh -N auto
            while read -r size count _ _ time _; do
                [[ $size =~ ^[0-9]+$ && $count =~ ^[0-9]+$ ]] || continue # result rows only
                key="$a.$size"
                if [ -z "${BEST[$key]:-}" ] || awk -v x="$time" -v y="${BEST[$key]}" 'BEGIN{exit !(x < y)}'; then
                    BEST[$key]=$time
                fi
            done < <(timeout 600 mpirun "${ROOT[@]}" --oversubscribe -np "$NP" "${MCA[@]}" "$PERF" \
                         -b "$s" -e "$s" -n "$iters" -w $((iters / 10)) 2>"$PLANS" | grep -v '^#')
            # what auto ran: rank 0's plan of the call (graph/tuning.c's debug line)
            [ "$a" = auto ] && PICK[$s]=$(sed -n "s/.*\[gpuring rank 0\].*plan: $s B ([a-z]*) -> \([^,]*\), \([0-9]*\) of.*, allreduce$/\1 x\2/p" "$PLANS" | head -1)
        done
    done
done

echo "# np $NP, $RPN ranks per virtual node, float sum, host buffers, time in us, best of $REPS"
echo "# (runs of 2000 calls up to 64 KiB, 200 up to 4 MiB, 50 above)"
printf "%12s %12s %12s %12s  %-20s %s\n" "size(B)" ring tree auto "auto ran" check
fails=0
for key in "${!BEST[@]}"; do :; done
for size in $(printf '%s\n' "${!BEST[@]}" | sed 's/^[a-z]*\.//' | sort -n | uniq); do
    r=${BEST[ring.$size]:-} t=${BEST[tree.$size]:-} u=${BEST[auto.$size]:-}
    verdict=$(awk -v r="$r" -v t="$t" -v u="$u" -v s="$size" 'BEGIN {
        if (r == "" || t == "" || u == "") { print "missing"; exit }
        worse = r > t ? r : t; msg = (u <= 1.10 * worse) ? "ok" : "AUTO SLOW";
        if (s <= 4096) msg = msg ((t < r) ? ", tree<ring" : ", TREE NOT FASTER");
        print msg }')
    [[ $verdict == *SLOW* || $verdict == *NOT* || $verdict == missing ]] && fails=$((fails + 1))
    printf "%12s %12s %12s %12s  %-20s %s\n" "$size" "$r" "$t" "$u" "${PICK[$size]:--}" "$verdict"
done
echo "# $fails size(s) miss the checks"
