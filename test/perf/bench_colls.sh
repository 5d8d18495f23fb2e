#!/bin/bash
# bench_colls.sh -- every collective gpuring runs, through gpuring vs. tuned
# (test/perf/compare.sh -C COLL, alternating, medians), then one summary
# against issue 14's targets: at 8 B gpuring's time within 1.5x of tuned's
# (g/t time <= 1.5), at 16 MiB gpuring's busbw at least 1.5x tuned's (g/t
# busbw >= 1.5); 64 MiB shown too.  A benchmark: nothing fails on a time.
#
# Usage: bench_colls.sh [compare.sh options]
# Default options: -n 2 -b 8 -e 64M -f 8 -B 0 (no memcpy bound); later ones
# override them (e.g. -r 9).  Environment: BENCH_COLLS (default "all_reduce
# reduce_scatter all_gather broadcast reduce iall_reduce"), and compare.sh's
# (GPURING_MCA_ARGS, GPURING_PERF_BIN, ...).  Exit code 1 if a compare.sh run
# failed or reported wrong results.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
COLLS=${BENCH_COLLS:-all_reduce reduce_scatter all_gather broadcast reduce iall_reduce}
STATUS=0
declare -A T8 B16 B64

ratio() { # a / b ("-" when either is missing)
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || a == "-" || b == "" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'
}

for coll in $COLLS; do
    echo "## $coll"
    out=$("$HERE/compare.sh" -C "$coll" -n 2 -b 8 -e 64M -f 8 -B 0 "$@" 2>/dev/null) || STATUS=1
    echo "$out"
    # the text table: size tuned(us) gpuring(us) tuned-busbw gpuring-busbw g/tuned ...
    while read -r size tt gt tb gb _; do
        case $size in
        8) T8[$coll]=$(ratio "$gt" "$tt") ;;
        16777216) B16[$coll]=$(ratio "$gb" "$tb") ;;
        67108864) B64[$coll]=$(ratio "$gb" "$tb") ;;
        esac
    done < <(echo "$out" | sed -n '/^ *size(B)/,/^$/p' | grep -E '^ *[0-9]+ ')
done

verdict() { # verdict RATIO OP TARGET -> met / NOT met
    awk -v r="$1" -v op="$2" -v t="$3" 'BEGIN { if (r == "-" || r == "") print "-";
        else if ((op == "le" && r + 0 <= t + 0) || (op == "ge" && r + 0 >= t + 0)) print "met";
        else print "NOT met" }'
}
echo
echo "Summary (gpuring / tuned, medians; 8 B: time ratio, target <= 1.5; 16 MiB and 64 MiB: busbw ratio, target >= 1.5):"
echo
echo "| collective | 8 B time g/t | 16 MiB busbw g/t | 64 MiB busbw g/t | 8 B target | 16 MiB target |"
echo "|---|---:|---:|---:|---|---|"
for coll in $COLLS; do
    t8=${T8[$coll]:--} b16=${B16[$coll]:--} b64=${B64[$coll]:--}
    echo "| $coll | $t8 | $b16 | $b64 | $(verdict "$t8" le 1.5) | $(verdict "$b16" ge 1.5) |"
done
exit $STATUS
