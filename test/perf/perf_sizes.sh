# perf_sizes.sh -- sourced by the perf scripts (compare.sh, bench_net.sh):
# to_bytes turns a size with an optional K/M/G suffix (powers of 1024) into
# bytes: 64M -> 67108864.
to_bytes() {
    local v=$1 m=1
    case $v in
    *[kK]) m=1024; v=${v%?} ;;
    *[mM]) m=$((1024 * 1024)); v=${v%?} ;;
    *[gG]) m=$((1024 * 1024 * 1024)); v=${v%?} ;;
    esac
    echo $((v * m))
}
