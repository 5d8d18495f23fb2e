# shellcheck shell=sh disable=SC2154,SC2034
# gpu_env.sh -- sourced (POSIX sh) by test/gpu/run_gpu_tests.sh and
# test/gpu/bench_gpu.sh: what both need on the GPU machine.  The caller sets
# $top (source tree), $builddir (build tree) and $tmp (a private temporary
# directory it removes at exit, after gpu_mps_stop).
#
#   gpu_detect      $smi: the first line of `nvidia-smi -L`, or empty with the
#                   reason in $smi_err
#   gpu_find_bin NAME
#                   $bin: NAME from .gpu-carry/bin (test/gpu/pack_for_gpu.sh),
#                   else $builddir/test/gpu/NAME (may not exist)
#   gpu_mpi_setup   Open MPI: Debian's from .gpu-carry/debs unpacked into
#                   $tmp/root (OPAL_PREFIX and friends exported), or this
#                   machine's mpirun when the MPI programs are built here.
#                   Sets $mpirun (empty: none), $pkglibdir, $component_dir
#                   (mca_coll_gpuring.so), $mpibin (allreduce_check,
#                   allreduce_perf, ...) and $mpi_setup_failed (.debs that
#                   did not unpack)
#   gpu_mps_start   an MPS daemon, its pipes in ${TMPDIR:-/tmp}/gpuring-mps (one
#                   place: a daemon left by a run that was killed is told to quit
#                   first), where nvidia-cuda-mps-control exists and
#                   GPURING_GPU_MPS is not 0: ranks sharing the one GPU then run
#                   at once, like one rank per GPU (without it they time-slice
#                   it).  Sets $mps_started (1: started), $mps_logs
#   gpu_mps_stop    quits the daemon gpu_mps_start started
#   gpu_traps       the caller's `cleanup` at exit; INT and TERM end the script
#                   at once, killing the command gpu_run runs
#   gpu_run CMD...  CMD in the background, waited for: its exit status (dash
#                   holds a trap until a foreground command ends, and timeout(1)
#                   keeps signals sent to the group off its command)
#   gpu_limit SEC   $limit_now: the seconds the next command may take -- SEC, or
#                   what is left before the deadline less 15 s for the report;
#                   0 where under 20 s are left.  The deadline:
#                   GPURING_GPU_DEADLINE seconds after the script started
#                   (default 540: the device tool gives one command 600 s, and
#                   a command it kills reports nothing)
# GPURING_GPU_CUDACPU=DIR: the CPU CUDA runtime built in DIR (test/cudacpu: its
# runtime, stand-in driver, component and *_cpu programs) stands in for a GPU,
# so that the scripts themselves run where there is none -- what they measure
# there means nothing (test/cudacpu/run_cudacpu_bench_gpu.sh, in make check)
carry="$top/.gpu-carry"
cudacpu=${GPURING_GPU_CUDACPU:-}
mps_started=0
mps_logs=""
gpu_start=$(date +%s)
gpu_deadline=${GPURING_GPU_DEADLINE:-540}

running=""

gpu_traps() {
    trap cleanup EXIT
    trap '[ -n "$running" ] && kill "$running" 2>/dev/null; exit 143' INT TERM
}

gpu_run() {
    "$@" &
    running=$!
    wait "$running"
    set -- $?
    running=""
    return "$1"
}

gpu_limit() {
    left=$((gpu_deadline - ($(date +%s) - gpu_start) - 15))
    if [ "$left" -lt 20 ]; then
        limit_now=0
    elif [ "$1" -lt "$left" ]; then
        limit_now=$1
    else
        limit_now=$left
    fi
}

gpu_detect() {
    smi=""
    smi_err=""
    if [ -n "$cudacpu" ]; then
        smi="the CPU CUDA runtime in $cudacpu (no GPU: no figure means anything)"
        export LD_LIBRARY_PATH="$cudacpu/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        export CUDACPU_DRIVER="$cudacpu/driver/libcuda.so.1"
        return
    fi
    if command -v nvidia-smi >/dev/null 2>&1; then
        timeout -k 5 30 nvidia-smi -L >"$tmp/smi" 2>&1
        rc=$?
        if [ "$rc" -eq 0 ]; then
            smi=$(head -n 1 "$tmp/smi")
        else # (a hung one, killed, prints nothing: still a GPU that does not answer)
            smi_err=$(head -n 1 "$tmp/smi")
            smi_err=${smi_err:-"nvidia-smi -L failed (exit $rc)"}
        fi
    fi
}

gpu_find_bin() {
    bin="$builddir/test/gpu/$1"
    [ -x "$carry/bin/$1" ] && bin="$carry/bin/$1"
    [ -n "$cudacpu" ] && bin="$cudacpu/$1_cpu"
}

gpu_mpi_setup() {
    mpirun=""
    mpi_setup_failed=0
    component_dir="$builddir/.libs"
    mpibin="$builddir/test"
    if [ -d "$carry/debs" ] && [ -z "$cudacpu" ]; then
        root="$tmp/root"
        mkdir -p "$root"
        for d in "$carry"/debs/*.deb; do
            dpkg-deb -x "$d" "$root" || mpi_setup_failed=$((mpi_setup_failed + 1))
        done
        lib="$root/usr/lib/x86_64-linux-gnu"
        export OPAL_PREFIX="$root/usr" OPAL_SYSCONFDIR="$root/etc/openmpi"
        export OPAL_LIBDIR="$lib/openmpi/lib" OPAL_PKGLIBDIR="$lib/openmpi/lib/openmpi3"
        export OPAL_DATADIR="$root/usr/share" OPAL_PKGDATADIR="$root/usr/share/openmpi"
        export PMIX_INSTALL_PREFIX="$lib/pmix2" PMIX_MCA_mca_base_component_path="$lib/pmix2/lib/pmix"
        export UCX_MODULE_DIR="$lib/ucx"
        export HWLOC_PLUGINS_PATH="$lib/hwloc" # (its PCI discovery: not this machine's hwloc's)
        export LD_LIBRARY_PATH="$lib:$root/lib/x86_64-linux-gnu:$lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        export PATH="$root/usr/bin${PATH:+:$PATH}" # ucx_perftest, when carried
        mpirun="$root/usr/bin/mpiexec.openmpi"
        pkglibdir="$lib/openmpi/lib/openmpi3"
        component_dir="$carry/component"
        mpibin="$carry/bin"
    elif command -v mpirun >/dev/null 2>&1 && [ -x "$builddir/test/mpi/allreduce_check" ]; then
        mpirun=$(command -v mpirun)
        pkglibdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
        mpibin="$builddir/test/mpi"
        [ -n "$cudacpu" ] && component_dir="$cudacpu/component/.libs"
    fi
}

gpu_mps_start() {
    if [ "${GPURING_GPU_MPS:-1}" = 1 ] && [ -z "$cudacpu" ] &&
        command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
        export CUDA_MPS_PIPE_DIRECTORY="${TMPDIR:-/tmp}/gpuring-mps"
        export CUDA_MPS_LOG_DIRECTORY="${TMPDIR:-/tmp}/gpuring-mps-log"
        mps_logs=$CUDA_MPS_LOG_DIRECTORY
        mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
        echo quit | timeout -k 5 10 nvidia-cuda-mps-control >/dev/null 2>&1 && sleep 1
        if timeout -k 5 30 nvidia-cuda-mps-control -d; then
            mps_started=1
            echo "MPS daemon started"
        else
            echo "the MPS daemon did not start: running without (ranks time-slice the GPU)"
        fi
    fi
}

gpu_mps_stop() {
    if [ "$mps_started" = 1 ]; then
        echo quit | timeout -k 5 30 nvidia-cuda-mps-control >/dev/null 2>&1
    fi
    mps_started=0
}
