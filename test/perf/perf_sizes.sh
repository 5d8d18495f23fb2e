# perf_sizes.sh -- sourced by the perf scripts (compare.sh, bench_net.sh,
# algos.sh): to_bytes turns a size with an optional K/M/G suffix (powers of
# 1024) into bytes: 64M -> 67108864; auto_iters gives the calls a run whose
# largest size is BYTES makes (compare.sh -N auto): a call of microseconds
# needs thousands to average out the scheduler of a shared core.
to_bytes() {
    local v=$1 m=1
    case $v in
    *[kK]) m=1024; v=${v%?} ;;
    *[mM]) m=$((1024 * 1024)); v=${v%?} ;;
    *[gG]) m=$((1024 * 1024 * 1024)); v=${v%?} ;;
    esac
    echo $((v * m))
}

auto_iters() {
    local b=$1
    echo $((b <= 65536 ? 2000 : b <= 4194304 ? 200 : 50))
}
