#!/bin/bash
# algos.sh -- gpuring's algorithms against each other in one run: the same
# allreduce_perf sweep with coll_gpuring_algorithm ring, tree and auto,
# interleaved, best of R, and the checks of issue #3 (a benchmark, not a test):
#   auto is never slower than the worse of ring and tree by more than 10%;
#   up to 4 KiB the tree beats the ring.
#
# Usage: algos.sh [-n np] [-v ranks_per_node] [-b min] [-e max] [-f factor] [-r reps]
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
ROOT=()
[ "$(id -u)" = 0 ] && ROOT=(--allow-run-as-root)
ALGOS=(ring tree auto)
declare -A BEST

for ((rep = 1; rep <= REPS; rep++)); do
    for ((k = 0; k < ${#ALGOS[@]}; k++)); do
        a=${ALGOS[(k + rep) % ${#ALGOS[@]}]} # rotate who goes first
        mca_args coll_gpuring_algorithm "$a" coll_gpuring_ranks_per_node "$RPN"
        while read -r size count _ _ time _; do
            [[ $size =~ ^[0-9]+$ && $count =~ ^[0-9]+$ ]] || continue # result rows only
            key="$a.$size"
            if [ -z "${BEST[$key]:-}" ] || awk -v x="$time" -v y="${BEST[$key]}" 'BEGIN{exit !(x < y)}'; then
                BEST[$key]=$time
            fi
        done < <(timeout 600 mpirun "${ROOT[@]}" --oversubscribe -np "$NP" "${MCA[@]}" "$PERF" \
                     -b "$MINB" -e "$MAXB" -f "$FACTOR" -n 20 -w 5 2>/dev/null | grep -v '^#')
    done
done

echo "# np $NP, $RPN ranks per virtual node, float sum, host buffers, time in us, best of $REPS"
printf "%12s %12s %12s %12s  %s\n" "size(B)" ring tree auto check
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
    printf "%12s %12s %12s %12s  %s\n" "$size" "$r" "$t" "$u" "$verdict"
done
echo "# $fails size(s) miss the checks"
