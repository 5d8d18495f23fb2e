# ucx_perftest_mode.sh -- sourced by the scripts that run ucx_perftest as a
# server and a client started apart (bench_net.sh, test/gpu/bench_gpu.sh):
# ucx_perftest_mode PERFTEST prints the options that make it that plain
# two-process test.  A UCX built with MPI support (Debian 13's 1.18) runs in
# MPI mode unless told -P 0, and then refuses such a pair ("This test should
# be run with exactly 2 processes in p2p case"); one without (Debian 12's
# 1.13) has no -P.
ucx_perftest_mode() {
    if "$1" -h 2>&1 | grep -q -e '-P <0|1>'; then echo "-P 0"; fi
}
