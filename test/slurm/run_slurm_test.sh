#!/bin/bash
# run_slurm_test.sh -- gpuring in real Slurm jobs, on a private one-node
# Slurm cluster started from Debian's packages for the length of the test.
#
# What it does:
#   1. installs munge, slurmctld, slurmd, slurm-client, libpmix-dev when
#      missing (install_slurm_deps.sh; exit 77 = skipped if apt fails);
#   2. starts munged, slurmctld and slurmd directly (no systemd), with every
#      file they use (slurm.conf, munge key, sockets, spool, state, logs, pid
#      files) under one `mktemp -d` directory and TCP ports found free at run
#      time; /etc and any system munge/Slurm are left alone;
#   3. submits examples/sbatch_mpirun.sh (mpirun, gpuring selected by
#      OMPI_MCA_* variables) and examples/sbatch_srun_pmix.sh (srun
#      --mpi=pmix, gpuring selected by examples/mca-params.conf), each
#      running allreduce_perf and allreduce_check over 2 ranks, with
#      OMPI_MCA_coll_gpuring_host_buffers=1 OMPI_MCA_coll_gpuring_verbose=3;
#      and examples/sbatch_mpirun.sh once more on device buffers
#      (allreduce_perf -m device, allreduce_check -d) through the CUDA CPU
#      runtime (GPURING_MPIRUN="test/cudacpu/run mpirun": the example's GPU
#      job without a GPU; left out, with an INFO line, where the runtime is
#      not built);
#   4. checks each job: state COMPLETED with exit code 0, a "ready:" line
#      from both ranks for each program (gpuring ran), allreduce_perf rows
#      all with #wrong 0, allreduce_check's "N passed, 0 failed"; the device
#      job also every rank's allreduce summary with calls on device buffers;
#   5. always (normal end, failure, SIGINT/SIGTERM): cancels the jobs, stops
#      every daemon it started by PID (TERM, bounded wait, KILL), kills what
#      those daemons left (slurmstepd, job tasks: found by a tag variable
#      only they carry), checks that nothing is left, removes the directory.
#
# Environment:
#   GPURING_BUILDDIR        top build directory (default: GPURING_TEST_BINDIR/../..
#                           when that is set, as make check does, else this tree)
#   GPURING_COMPONENT_DIR   load mca_coll_gpuring.so from this directory
#                           (default: the one installed in Open MPI's pkglibdir)
#   GPURING_SLURM_JOB_TIMEOUT  seconds to wait for the jobs (default 120)
#   GPURING_SLURM_INJECT    failure injection, to test this test:
#                           nogpuring (host_buffers=0: gpuring does not run),
#                           badarg (allreduce_perf gets an unknown option),
#                           hang (the jobs sleep past the timeout)
#   GPURING_TEST_KEEP=1     keep the temporary directory after a failure
#   TMPDIR                  where the temporary directory is made (default /tmp)
#
# Interrupting it (Ctrl-C, SIGINT, SIGTERM, SIGHUP) stops everything as above
# and exits 130. (bash ignores SIGINT in a script started with `&` from a
# non-interactive shell; send SIGTERM there.)
#
# Output: `PASS name` / `FAIL name (reason)` lines, INFO lines, job output
# (indented) on failure, and a last line `N passed, N failed`. Exit code 0 iff
# every check passed; 77 (skipped) if Slurm cannot be installed or we are not
# root.
set -u
set +m    # no job control: `setsid cmd &` then execs cmd itself, so $! is the daemon

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRCDIR=$(cd "$HERE/../.." && pwd)
if [ -n "${GPURING_BUILDDIR:-}" ]; then
    BUILDDIR=$GPURING_BUILDDIR
elif [ -n "${GPURING_TEST_BINDIR:-}" ]; then
    BUILDDIR=$(cd "$GPURING_TEST_BINDIR/../.." && pwd)
else
    BUILDDIR=$SRCDIR
fi
PERF=$BUILDDIR/test/perf/allreduce_perf
CHECK=$BUILDDIR/test/mpi/allreduce_check
JOB_TIMEOUT=${GPURING_SLURM_JOB_TIMEOUT:-120}
START_TIMEOUT=30
INJECT=${GPURING_SLURM_INJECT:-}
PERF_ARGS="-b 8 -e 1M -f 4 -n 5 -w 1 -c 1"
CHECK_ARGS="-t int32,float -o sum,max -c 0,1,17,4099 -i -s 1"
CUDACPU_RUN=$SRCDIR/test/cudacpu/run
NP=2

NPASS=0
NFAIL=0
T=""             # the temporary directory: everything of this cluster
PIDS=()          # daemons we started (munged, slurmctld, slurmd)
PIDNAMES=()
JOBIDS=()
T0=$SECONDS
CLEANING=0

pass() { echo "PASS $1"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL $1 ($2)"; NFAIL=$((NFAIL + 1)); }
info() { echo "INFO $*"; }
# show a file indented (so that its own "N passed, N failed" lines are not
# taken for this test's summary), last $2 lines
show() {
    [ -f "$1" ] || { echo "    | ($1 does not exist)"; return; }
    echo "    | --- $1 (last ${2:-60} lines)"
    tail -n "${2:-60}" "$1" | sed 's/^/    | /'
}

# ---- cleanup: runs on every exit ------------------------------------------------

# alive PID: running (a zombie, dead but not yet reaped, is not)
alive() {
    [ -n "$1" ] && kill -0 "$1" 2>/dev/null || return 1
    local st
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null)
    [ "${st%% *}" != Z ]
}

# wait_gone SECONDS PID...: until every PID is gone or the time is up
wait_gone() {
    local limit=$1 p any
    shift
    local end=$((SECONDS + limit))
    while :; do
        any=0
        for p in "$@"; do alive "$p" && any=1; done
        [ $any = 0 ] && return 0
        [ $SECONDS -ge $end ] && return 1
        sleep 0.2
    done
}

# processes left by our daemons and jobs: slurmstepd, job scripts, mpirun,
# ranks. Only they carry GPURING_SLURM_TEST_TAG=$T in their environment (the
# daemons and sbatch get it, this script never exports it).
tagged_pids() {
    [ -n "$T" ] || return 0
    local d pid
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        [ "$pid" = $$ ] && continue
        [[ " ${PIDS[*]} " == *" $pid "* ]] && continue    # our daemons: stopped by PID
        if tr '\0' '\n' 2>/dev/null < "$d/environ" | grep -qxF "GPURING_SLURM_TEST_TAG=$T"; then
            echo "$pid"
        fi
    done
}

# daemons whose command line names our directory
leftover_daemons() {
    [ -n "$T" ] || return 0
    ps -eo pid=,args= 2>/dev/null | grep -F -- "$T" | grep -E 'slurmctld|slurmd|munged|slurmstepd' | grep -v grep
}

# ours PID: PID is alive and still one of ours (its command line or its
# environment names our directory), never a reused PID
ours() {
    alive "$1" || return 1
    tr '\0' ' ' 2>/dev/null < "/proc/$1/cmdline" | grep -qF -- "$T" && return 0
    tr '\0' '\n' 2>/dev/null < "/proc/$1/environ" | grep -qxF "GPURING_SLURM_TEST_TAG=$T"
}

stop_pids() {    # stop_pids WAIT PID...: TERM, bounded wait, KILL, bounded wait
    local limit=$1 p
    shift
    local -a mine=()
    for p in "$@"; do ours "$p" && mine+=("$p"); done
    set -- "${mine[@]}"
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null
    if ! wait_gone "$limit" "$@"; then
        for p in "$@"; do
            if alive "$p"; then
                info "pid $p ($(cat /proc/$p/comm 2>/dev/null)) ignored SIGTERM for ${limit}s: SIGKILL"
                kill -KILL "$p" 2>/dev/null
            fi
        done
        wait_gone 5 "$@"
    fi
}

cleanup() {
    local rc=$?
    [ $CLEANING = 1 ] && return
    CLEANING=1
    trap '' INT TERM HUP    # a second Ctrl-C must not cut the cleanup short
    if [ -n "$T" ]; then
        local k
        # 1. cancel our jobs while slurmctld still runs, so slurmstepd ends them
        if [ ${#JOBIDS[@]} -gt 0 ] && alive "${SLURMCTLD_PID:-}"; then
            SLURM_CONF=$T/slurm.conf timeout 5 scancel "${JOBIDS[@]}" 2>/dev/null
            local end=$((SECONDS + 10))
            while [ $SECONDS -lt $end ] &&
                [ -n "$(SLURM_CONF=$T/slurm.conf timeout 5 squeue -h -o %i 2>/dev/null)" ]; do
                sleep 0.3
            done
        fi
        # 2. the Slurm daemons we started (slurmd first), then their leftovers,
        #    then munged (the others authenticate through it until the end)
        local -a slurm=() munge=()
        for k in "${!PIDS[@]}"; do
            case ${PIDNAMES[k]} in
            munged) munge+=("${PIDS[k]}") ;;
            *) slurm+=("${PIDS[k]}") ;;
            esac
        done
        stop_pids 10 "${slurm[@]}"
        local -a left
        mapfile -t left < <(tagged_pids)
        if [ ${#left[@]} -gt 0 ]; then
            local desc="" p
            for p in "${left[@]}"; do desc+=" $p($(cat /proc/$p/comm 2>/dev/null))"; done
            info "stopping ${#left[@]} process(es) left by the jobs:$desc"
            stop_pids 5 "${left[@]}"
        fi
        stop_pids 10 "${munge[@]}"
        # reap our daemons (only those gone: wait never blocks here)
        for k in "${PIDS[@]}"; do alive "$k" || wait "$k" 2>/dev/null; done
        # 3. nothing of ours may remain
        local still tagged
        still=$(leftover_daemons)
        tagged=$(tagged_pids | tr '\n' ' ')
        if [ -n "$still" ] || [ -n "$tagged" ]; then
            fail cleanup "processes left running: ${still//$'\n'/; } ${tagged:+tagged pids $tagged}"
        else
            pass "cleanup (no slurmctld/slurmd/munged/slurmstepd/job process left)"
        fi
        if [ $NFAIL -gt 0 ] && [ "${GPURING_TEST_KEEP:-0}" = 1 ]; then
            info "kept $T (GPURING_TEST_KEEP=1)"
        else
            rm -rf -- "$T"
        fi
    fi
    echo "# total $((SECONDS - T0))s"
    echo "$NPASS passed, $NFAIL failed"
    if [ "${SKIPPED:-0}" = 1 ]; then exit 77; fi
    if [ -n "${SIGNALLED:-}" ]; then exit 130; fi
    if [ $NFAIL -gt 0 ] || [ $NPASS = 0 ] || [ $rc != 0 ]; then exit 1; fi
    exit 0
}
on_signal() {
    SIGNALLED=$1
    fail interrupted "got SIG$1 after $((SECONDS - T0))s"
    exit 130
}
trap cleanup EXIT
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP

# give up: the case NAME failed for REASON, the rest cannot run
abort() { fail "$1" "$2"; exit 1; }
skip() { echo "SKIP slurm ($1)"; SKIPPED=1; exit 77; }

# ---- 0. prerequisites --------------------------------------------------------------

echo "# gpuring Slurm test: build dir $BUILDDIR, sources $SRCDIR"
[ "$(id -u)" = 0 ] || skip "needs root: slurmd launches jobs, and the cluster runs as SlurmUser=root"
for b in "$PERF" "$CHECK"; do
    [ -x "$b" ] || abort prerequisites "$b is missing: run 'make' and 'make check' (or make ${b#$BUILDDIR/}) first"
done
for f in "$SRCDIR/examples/sbatch_mpirun.sh" "$SRCDIR/examples/sbatch_srun_pmix.sh" "$SRCDIR/examples/mca-params.conf"; do
    [ -r "$f" ] || abort prerequisites "$f is missing"
done
need_install=0
for c in munged mungekey slurmctld slurmd sbatch srun squeue scontrol sinfo mpirun ps; do
    command -v "$c" >/dev/null 2>&1 || need_install=1
done
ls /usr/lib/*/libpmix.so >/dev/null 2>&1 || need_install=1
if [ $need_install = 1 ]; then
    info "installing Slurm's Debian packages (test/slurm/install_slurm_deps.sh)"
    timeout 900 "$HERE/install_slurm_deps.sh" || skip "apt could not install munge/slurmctld/slurmd/slurm-client/libpmix-dev"
fi
if [ -n "${GPURING_COMPONENT_DIR:-}" ]; then
    [ -f "$GPURING_COMPONENT_DIR/mca_coll_gpuring.so" ] ||
        abort prerequisites "GPURING_COMPONENT_DIR=$GPURING_COMPONENT_DIR has no mca_coll_gpuring.so"
    export GPURING_COMPONENT_DIR
    info "component from $GPURING_COMPONENT_DIR"
else
    timeout 60 ompi_info 2>/dev/null | grep -q 'MCA coll: gpuring' ||
        abort prerequisites "Open MPI does not find coll/gpuring: run ./setup.sh (installs it) or set GPURING_COMPONENT_DIR"
    info "component: the installed one ($(timeout 60 ompi_info --path pkglibdir --parsable | cut -d: -f3)/mca_coll_gpuring.so)"
fi

# ---- 1. the private cluster's files ---------------------------------------------

T=$(mktemp -d "${TMPDIR:-/tmp}/gpuring-slurm.XXXXXX") || { T=""; abort setup "mktemp -d failed"; }
chmod 755 "$T"    # munged wants no group/other-writable directory above its files
mkdir -p "$T/munge/etc" "$T/munge/run" "$T/munge/log" "$T/munge/lib" \
    "$T/slurm/state" "$T/slurm/spool" "$T/slurm/log" "$T/jobs" "$T/tmp" || abort setup "mkdir under $T failed"
chmod 700 "$T/munge/etc" "$T/munge/lib" "$T/munge/log"
chmod 755 "$T/munge/run"    # munged: socket directory must be 0755 (clients need it)
MUNGE_SOCKET=$T/munge/run/munge.socket.2
CONF=$T/slurm.conf
export SLURM_CONF=$CONF    # every Slurm client command of this script reads our conf
info "cluster directory $T"

# the node as slurmd sees it (name, CPUs, sockets, cores, threads; not the
# memory: a RealMemory above what slurmd finds would drain the node)
NODE=$(hostname -s)
NCPU=$(nproc)
HW=$(timeout 10 slurmd -C 2>/dev/null | head -n 1)
NODE_HW="CPUs=$NCPU"
if [[ $HW =~ NodeName=([^ ]+)\ CPUs=([0-9]+)\ Boards=([0-9]+)\ SocketsPerBoard=([0-9]+)\ CoresPerSocket=([0-9]+)\ ThreadsPerCore=([0-9]+) ]]; then
    NODE=${BASH_REMATCH[1]}
    NCPU=${BASH_REMATCH[2]}
    NODE_HW="CPUs=$NCPU Boards=${BASH_REMATCH[3]} SocketsPerBoard=${BASH_REMATCH[4]} CoresPerSocket=${BASH_REMATCH[5]} ThreadsPerCore=${BASH_REMATCH[6]}"
fi

# free_port: a TCP port nothing uses (no socket in any state in /proc/net/tcp*,
# nothing answers on 127.0.0.1), not in $1 (ports already picked)
free_port() {
    local p hex k
    for ((k = 0; k < 200; k++)); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        [[ " $1 " == *" $p "* ]] && continue
        printf -v hex ':%04X ' "$p"
        if cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '{print $2, $3}' | grep -qF -- "$hex"; then
            continue
        fi
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
        echo "$p"
        return 0
    done
    return 1
}

write_conf() {    # write_conf CTLD_PORT SLURMD_PORT
    cat > "$CONF" <<EOF
# one-node test cluster of gpuring's test/slurm/run_slurm_test.sh
ClusterName=gpuringtest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$T/slurm/state
SlurmdSpoolDir=$T/slurm/spool
SlurmctldPidFile=$T/slurm/slurmctld.pid
SlurmdPidFile=$T/slurm/slurmd.pid
SlurmctldLogFile=$T/slurm/log/slurmctld.log
SlurmdLogFile=$T/slurm/log/slurmd.log
# job temporary files (mpi/pmix's directories) stay in our directory too
TmpFS=$T/tmp
SlurmctldDebug=info
SlurmdDebug=info
# cgroups do not work on these machines: track processes through /proc
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# finished jobs stay visible to scontrol show job for the length of the test
MinJobAge=600
MailProg=/bin/true
SlurmctldTimeout=30
SlurmdTimeout=30
KillWait=5
NodeName=$NODE NodeAddr=127.0.0.1 $NODE_HW State=UNKNOWN
PartitionName=gpuringtest Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

# start_daemon NAME LOG CMD...: in its own session (setsid: a Ctrl-C on the
# terminal reaches this script, which then stops it in order), with the tag
# that marks everything it will start; records its PID
start_daemon() {
    local name=$1 log=$2
    shift 2
    GPURING_SLURM_TEST_TAG=$T setsid "$@" > "$log" 2>&1 < /dev/null &
    local pid=$!
    PIDS+=("$pid")
    PIDNAMES+=("$name")
    eval "${name^^}_PID=$pid"    # MUNGED_PID, SLURMCTLD_PID, SLURMD_PID
}

pid_name() {
    local k
    for k in "${!PIDS[@]}"; do [ "${PIDS[k]}" = "$1" ] && echo "${PIDNAMES[k]}"; done
}

# wait_for SECONDS PID WHAT CMD...: until CMD succeeds; fails early when the
# daemon PID died
wait_for() {
    local limit=$1 pid=$2 what=$3
    shift 3
    local end=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if ! alive "$pid"; then WAIT_WHY="daemon exited ($(pid_name "$pid") pid $pid) while waiting for $what"; return 1; fi
        if [ $SECONDS -ge $end ]; then WAIT_WHY="$what not within ${limit}s"; return 1; fi
        sleep 0.2
    done
}

# ---- 2. munged -------------------------------------------------------------------

T_UP=$SECONDS
# a random key, 0400 in a 0700 directory (munged refuses anything looser)
dd if=/dev/urandom of="$T/munge/etc/munge.key" bs=1024 count=1 status=none &&
    chmod 400 "$T/munge/etc/munge.key" || abort munged "cannot write the munge key"
start_daemon munged "$T/munge/log/munged.out" munged -F \
    --socket="$MUNGE_SOCKET" --key-file="$T/munge/etc/munge.key" \
    --pid-file="$T/munge/run/munged.pid" --log-file="$T/munge/log/munged.log" \
    --seed-file="$T/munge/lib/munged.seed"
munge_ok() { timeout 5 munge -n -S "$MUNGE_SOCKET" | timeout 5 unmunge -S "$MUNGE_SOCKET"; }
if ! wait_for 10 "$MUNGED_PID" "a munge credential round trip" munge_ok; then
    show "$T/munge/log/munged.out" 20
    show "$T/munge/log/munged.log" 20
    abort cluster_up "munged: $WAIT_WHY"
fi

# ---- 3. slurmctld and slurmd, on free ports (retried if a port was taken meanwhile)

node_idle() {
    local s
    s=$(timeout 5 sinfo -h -n "$NODE" -o %T 2>/dev/null)
    [[ $s == idle* ]]
}
up=0
for attempt in 1 2 3; do
    CTLD_PORT=$(free_port "") && SLURMD_PORT=$(free_port "$CTLD_PORT") ||
        abort cluster_up "no free TCP port found"
    write_conf "$CTLD_PORT" "$SLURMD_PORT"
    # -D: foreground (the PID is ours); -c: no state from a previous run
    start_daemon slurmctld "$T/slurm/log/slurmctld.out" slurmctld -D -c -f "$CONF"
    if wait_for "$START_TIMEOUT" "$SLURMCTLD_PID" "slurmctld answering" timeout 5 scontrol ping; then
        start_daemon slurmd "$T/slurm/log/slurmd.out" slurmd -D -f "$CONF" -N "$NODE"
        if wait_for "$START_TIMEOUT" "$SLURMD_PID" "node $NODE idle" node_idle; then
            up=1
            break
        fi
    fi
    info "attempt $attempt (ports $CTLD_PORT, $SLURMD_PORT): $WAIT_WHY"
    stop_pids 10 "${SLURMD_PID:-}" "$SLURMCTLD_PID"
    # a daemon that exited may have lost a race for its port: try new ports;
    # one that runs but does not come up will not do better a second time
    [[ $WAIT_WHY == "daemon exited"* ]] || attempt=3
    if [ $attempt = 3 ]; then
        show "$T/slurm/log/slurmctld.log" 30
        show "$T/slurm/log/slurmd.log" 30
        show "$T/slurm/log/slurmctld.out" 10
        show "$T/slurm/log/slurmd.out" 10
    fi
    [ $attempt = 3 ] && break
    SLURMD_PID=""
done
[ $up = 1 ] || abort cluster_up "slurm: $WAIT_WHY"
pass "cluster_up (munged, slurmctld :$CTLD_PORT, slurmd :$SLURMD_PORT, node $NODE with $NCPU CPUs idle after $((SECONDS - T_UP))s)"

# ---- 4. the jobs: the examples themselves ------------------------------------------

# submit NAME SCRIPT VAR=VALUE...: sbatch from the source tree, with the given
# variables in the job's environment (sbatch --export=ALL default: values may
# hold commas). Prints the job id.
submit() {
    local name=$1 script=$2
    shift 2
    (
        cd "$SRCDIR" || exit 1
        # only the parameters given here: none inherited from the caller
        for v in $(compgen -e | grep '^OMPI_MCA_'); do unset "$v"; done
        # shellcheck disable=SC2163 # the arguments are VAR=VALUE words
        export "$@"
        export GPURING_SLURM_TEST_TAG=$T
        export TMPDIR=$T/tmp    # Open MPI's session directories
        timeout 20 sbatch --parsable --job-name="$name" --output="$T/jobs/$name-%j.out" \
            --chdir="$SRCDIR" "$script"
    )
}

common=(GPURING_PERF="$PERF" GPURING_PERF_ARGS="$PERF_ARGS" GPURING_CHECK="$CHECK"
    GPURING_CHECK_ARGS="$CHECK_ARGS" GPURING_NP="$NP"
    OMPI_MCA_coll_gpuring_host_buffers=1 OMPI_MCA_coll_gpuring_verbose=3)
# the device job's own (job 3): device buffers, the injection reaching it too
device=(GPURING_MPIRUN="$CUDACPU_RUN mpirun" GPURING_BUILDDIR="$BUILDDIR"
    GPURING_PERF_ARGS="-m device $PERF_ARGS" GPURING_CHECK_ARGS="-d $CHECK_ARGS")
case $INJECT in
"") ;;
nogpuring)
    common+=(OMPI_MCA_coll_gpuring_host_buffers=0)
    device+=(OMPI_MCA_coll=tuned,libnbc,basic,self) # (device buffers ignore host_buffers)
    info "injected: host_buffers=0 (the device job: coll without gpuring)" ;;
badarg)
    common+=(GPURING_PERF_ARGS="$PERF_ARGS -Z")
    device+=(GPURING_PERF_ARGS="-m device $PERF_ARGS -Z")
    info "injected: unknown allreduce_perf option" ;;
hang)
    common+=(GPURING_PERF=/bin/sleep GPURING_PERF_ARGS=3600)
    device+=(GPURING_PERF_ARGS=3600)
    info "injected: jobs sleep 3600s" ;;
*) abort prerequisites "unknown GPURING_SLURM_INJECT=$INJECT" ;;
esac

declare -A JOB_OF=()
NAMES=(mpirun srun_pmix)
SCRIPTS=("$SRCDIR/examples/sbatch_mpirun.sh" "$SRCDIR/examples/sbatch_srun_pmix.sh")
# the GPU job, on the CUDA CPU runtime where it is built (the test's builds make it
# with or without the CUDA toolkit, on x86-64)
if [ -f "$BUILDDIR/test/cudacpu/runtime/libcudart.so" ] &&
    [ -f "$BUILDDIR/test/cudacpu/driver/libcuda.so.1" ] &&
    [ -f "$BUILDDIR/test/cudacpu/component/.libs/mca_coll_gpuring.so" ]; then
    NAMES+=(mpirun_device)
    SCRIPTS+=("$SRCDIR/examples/sbatch_mpirun.sh")
else
    info "job_mpirun_device not run: the CUDA CPU runtime is not built in $BUILDDIR"
fi
for k in "${!NAMES[@]}"; do
    name=${NAMES[k]}
    vars=("${common[@]}")
    # job 3: device buffers through the example's GPURING_MPIRUN (later values win)
    [ "$name" = mpirun_device ] && vars+=("${device[@]}")
    # job 1: OMPI_MCA_coll from the environment (the example's default);
    # job 2: selection and host_buffers from examples/mca-params.conf, only
    #        verbose (and the injection) from the environment
    if [ "$name" = srun_pmix ]; then
        vars+=(GPURING_MCA_PARAMS_FILE="$SRCDIR/examples/mca-params.conf")
        [ "$INJECT" = nogpuring ] || vars=("${vars[@]/OMPI_MCA_coll_gpuring_host_buffers=1/}")
    fi
    local_vars=()
    for v in "${vars[@]}"; do [ -n "$v" ] && local_vars+=("$v"); done
    if id=$(submit "gpuring-$name" "${SCRIPTS[k]}" "${local_vars[@]}" 2> "$T/jobs/$name.sbatch.err") &&
        [[ $id =~ ^[0-9]+$ ]]; then
        JOBIDS+=("$id")
        JOB_OF[$name]=$id
        info "submitted job $id: ${SCRIPTS[k]#$SRCDIR/}"
    else
        fail "job_$name" "sbatch failed: $(head -c 300 "$T/jobs/$name.sbatch.err") $id"
    fi
done

# poll squeue ourselves (sbatch --wait polls slowly), bounded
T_JOBS=$SECONDS
end=$((SECONDS + JOB_TIMEOUT))
while [ ${#JOBIDS[@]} -gt 0 ]; do
    q=$(timeout 5 squeue -h -o '%i %T' 2>/dev/null) || q="?"
    if [ -z "$q" ]; then
        info "jobs done after $((SECONDS - T_JOBS))s"
        break
    fi
    if [ $SECONDS -ge $end ]; then
        info "jobs still in the queue after ${JOB_TIMEOUT}s (GPURING_SLURM_JOB_TIMEOUT): ${q//$'\n'/, }"
        break
    fi
    sleep 0.5
done

# ---- 5. checks on each job's output -------------------------------------------------

# check_job NAME ID: prints PASS/FAIL; the output on failure
check_job() {
    local name=$1 id=$2
    local out
    out=$(ls "$T/jobs/gpuring-$name-$id.out" 2>/dev/null)
    local why=""
    local info_line state exitcode
    info_line=$(timeout 5 scontrol show job -o "$id" 2>&1)
    state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<< "$info_line")
    exitcode=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<< "$info_line")
    if [ "$state" != COMPLETED ] || [ "$exitcode" != 0:0 ]; then
        why="job $id state ${state:-unknown} exit ${exitcode:-?}"
        [ "$state" = RUNNING ] || [ "$state" = PENDING ] && why="$why after ${JOB_TIMEOUT}s (timeout)"
    elif [ -z "$out" ]; then
        why="no output file $T/jobs/gpuring-$name-$id.out"
    else
        # split the output at the job script's "gpuring job: PROG exit N" lines:
        # part 1 is allreduce_perf's, part 2 allreduce_check's
        local p1 p2 r rows bad npc pat note=""
        p1=$(awk '/^gpuring job: .* exit [0-9]+$/ {exit} {print}' "$out")
        p2=$(awk 'n == 1 && /^gpuring job: .* exit [0-9]+$/ {exit} n == 1 {print} /^gpuring job: .* exit [0-9]+$/ {n++}' "$out")
        # every rank's summary: its calls ran in gpuring (the device job's: on device
        # buffers); a "ready:" line alone is printed at setup, before any call
        pat='\[gpuring rank [0-9]+\] allreduce summary: [1-9][0-9]* calls in gpuring'
        if [ "$name" = mpirun_device ]; then
            pat+=' .*[1-9][0-9]* on device buffers'
            note=" on device buffers (the CUDA CPU runtime)"
        fi
        for part in perf check; do
            local txt=$p1
            [ $part = check ] && txt=$p2
            for ((r = 0; r < NP; r++)); do
                if ! grep -qE "\[gpuring rank $r\] comm MPI_COMM_WORLD ready:" <<< "$txt"; then
                    why="gpuring did not run in allreduce_$part: no 'ready:' line from rank $r"
                    break 2
                fi
            done
            if [ "$(grep -cE "$pat" <<< "$txt")" -lt "$NP" ]; then
                why="allreduce_$part: $(grep -cE "$pat" <<< "$txt") of $NP ranks' allreduce summaries show calls in gpuring$note"
                break
            fi
        done
        if [ -z "$why" ]; then
            # allreduce_perf rows: size count type op time algbw busbw #wrong
            rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9]+$' <<< "$p1")
            bad=$(grep -E '^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9]+$' <<< "$p1" |
                awk '$8 != 0' | wc -l)
            npc=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<< "$p2" | tail -n 1)
            if [ "$rows" -lt 1 ]; then
                why="no allreduce_perf result row"
            elif [ "$bad" != 0 ]; then
                why="$bad allreduce_perf row(s) with #wrong != 0"
            elif ! grep -q '^# out of bounds values : 0 OK' <<< "$p1"; then
                why="allreduce_perf did not report '# out of bounds values : 0 OK'"
            elif ! [[ $npc =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
                why="allreduce_check: ${npc:-no 'N passed, N failed' line}"
            fi
        fi
    fi
    if [ -z "$why" ]; then
        pass "job_$name (job $id COMPLETED: gpuring ready on ranks 0-$((NP - 1)) in both programs$note, $rows allreduce_perf rows #wrong 0, allreduce_check $npc)"
    else
        fail "job_$name" "$why"
        echo "    | scontrol: $info_line" | head -c 2000
        echo
        show "$T/jobs/gpuring-$name-$id.out" 60
    fi
}

for name in "${NAMES[@]}"; do
    [ -n "${JOB_OF[$name]:-}" ] && check_job "$name" "${JOB_OF[$name]}"
done
if [ $NFAIL -gt 0 ]; then
    show "$T/slurm/log/slurmd.log" 25
fi
exit 0    # the EXIT trap stops everything and prints the summary
