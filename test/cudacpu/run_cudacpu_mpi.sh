#!/bin/sh
# run_cudacpu_mpi.sh -- gpuring's device path through mpirun without a GPU:
# allreduce_check -d (device buffers, from the libcudart.so it dlopens) with
# the component built on the CUDA CPU runtime (test/cudacpu/component), the
# runtime as that libcudart.so (test/cudacpu/runtime) and its stand-in driver
# (CUDACPU_DRIVER), each case in one fiber order, forward and reverse in turn
# (CUDACPU_FIBER_ORDERS="forward reverse" runs every case in both):
#   direct_np2      the direct allreduce over IPC-mapped buffers (the LL one off)
#   direct_ll_np3   the LL direct allreduce (calls up to 64 KiB) and the direct
#                   one (larger calls) on one communicator, in turn
#   direct_ll_max_np2  the LL direct allreduce up to its most, 1 MiB
#   direct_ll_nomps_np2  the GPU shared without MPS (CUDACPU_MPS=0): the LL
#                   direct allreduce stays off, saying why; the direct one runs
#   direct_ll_domains_np2  two GPUs without MPS on PCI domains of their own, both
#                   bus 0 (CUDACPU_PCI_DOMAINS=1): told apart, so LL direct runs
#   fifo_np3        the FIFO programs (coll_gpuring_direct=0) over CUDA IPC FIFOs
#   misaligned_np4  buffers off their element grid (allreduce_check -A: rank r's
#                   r % 4 bytes off, its output (r + 1) % 4): the LL direct
#                   allreduce takes them as they are; where a rank's are off, the
#                   direct one declines on every rank and the FIFO programs run
#                   that rank's call on aligned copies
#   misaligned_fifo_np3  the same on the FIFO programs, blocking and non-blocking
#                   (the worker's calls), and over two virtual nodes (np4)
#   colls_misaligned_np3  colls_check -d -A: reduce-scatter and reduce (allgather
#                   and bcast move bytes)
#   pool_np3        buffers from cudaMallocAsync's pool, which CUDA IPC cannot
#                   share: the direct path is on, yet every call above 64 KiB
#                   must take the FIFOs, smaller ones the LL direct allreduce
#                   (which maps only its inboxes; coll_gpuring_agree_memory=1:
#                   all ranks agree on device); after declines in a row the
#                   next calls skip the direct path's exchange (up to 63:
#                   every rank must log it)
#   mixed_np3       device buffers on ranks 0 and 2, host on rank 1, with
#                   coll_gpuring_agree_memory=1: every call goes below, the
#                   device ranks' staged through host memory
#   own_ctx_np3     buffers of a CUDA context the program made (allreduce_check
#                   -C: cuCtxCreate, cuMemAlloc, the context left current, as
#                   PyCUDA does), which gpuring's kernels in the primary context
#                   could not reach on a GPU: every call goes below, staged in
#                   that context, every rank saying why
#   own_ctx_shared_np3  the same where the driver says the primary context's
#                   kernels reach that memory (CUDACPU_CTX_SHARED: one address
#                   space, as a green context shares its primary one's): every
#                   call runs in gpuring
#   fifo32_np2      the same on 32 channels (GPURING_MAX_CHANNELS): every call
#                   spread over all of them, up to 4 MiB (4 types, sum and max:
#                   32 spinning blocks per rank are slow on 2 cores)
#   ll_fifo_np3     the FIFO programs with the LL protocol forced at every size
#                   (coll_gpuring_protocol ll: steps of at most 8 KiB, so 65537
#                   elements are many), every type and op
#   ll_tree_vnodes_np4  LL forced on trees over two virtual nodes: the CUDA IPC
#                   edges LL, the net edges simple, in the same operations
#   colls_np3       colls_check -d: reduce-scatter, allgather, bcast and reduce
#   colls_tree_vnodes_np4  the same with the tree forced over two virtual nodes:
#                   bcast and reduce rooted at every rank (prog_tree_bcast.h,
#                   prog_tree_reduce.h), CUDA IPC and net edges
#   colls_managed_np3, managed_np3  managed memory (colls_check -d -U,
#                   allreduce_check -d -U) with coll_gpuring_managed_buffers 1:
#                   datatypes packed on some ranks and not on others, managed
#                   and cudaMalloc'd buffers in one call: one plane everywhere
#   vnodes_np4      two virtual nodes: net connections, pinned host staging
#                   through the progress thread and UCX, rings and trees
#   mix_np3, mix_vnodes_np4  mix_check -d: a seeded random sequence of every
#                   collective gpuring takes, MPI_Iallreduce in flight among them
#   direct_mapfail_np2  one mapping of a peer's buffers fails, once: that call takes
#                   the FIFOs on every rank, later ones run direct again
#   nopci_np3       GPUs that cannot say their PCI address: one device channel
#   direct_nocache_np3  the direct allreduce with coll_gpuring_ipc_cache 0: every
#                   peer buffer unmapped when its call ends
#   iallreduce_first_np3  iallreduce_check -d -F, coll_gpuring_nonblocking_setup 0:
#                   a fresh communicator's first MPI_Iallreduce goes below staged
#   iallreduce_np3  iallreduce_check -d: MPI_Iallreduce calls in flight (the
#                   FIFO programs and, once a blocking call set it up, the LL
#                   direct allreduce, in gpuring's worker thread) mixed with
#                   blocking ones (direct)
#   request_cb_np3, request_cb_staged_np3  request_cb_check -d (-u): a request's
#                   completion callback frees it and starts the next call, on
#                   gpuring's own requests and (a user op) on those over the
#                   component below's staged calls
#   churn_np2/np3   comm_churn -d: 60 communicators made and freed on device
#                   buffers (direct, and FIFO), nothing leaked
#   timeout_np3     a rank skips a call on device buffers (FIFO path): the
#                   others' kernels time out naming step and peer
#   timeout_direct_ll_np3  the same for a small call (LL direct): naming the peer
#   mismatch_*      a rank passes another count or datatype on device buffers
#                   (direct, FIFO, FIFO under LL, virtual nodes; LL direct against
#                   direct: found on the arrival board)
#                   every rank fails at once, none returns unreduced data;
#                   mismatch_refused_*: on trees, children blocked sending to
#                   the parent that gave up are told by it (IPC, net)
#   nomem_*         one rank's device memory runs out for a call: it abandons
#                   the call before its kernel runs (aligned copies, scratch;
#                   as an inner tree node it refuses the child pushing to it)
#   nolaunch_*      one rank's kernel does not launch: it abandons the call
#                   (FIFO over IPC and net, LL direct; the direct allreduce's
#                   agreement) and its peers fail at once
#   latekernel_np3, latekernel_ll_np3  one rank's kernel starts after its abort's
#                   grace: its status entry comes back when it has left, and the LL
#                   direct kernel does not write the receive buffer then
#   latekernel_grace_ll_np3  ... inside the grace: the LL direct kernel leaves
#                   without writing, and its rank fails the call
#   latekernel_peer_ll_np2  ... while a peer still waits in the call: the late
#                   kernel sends it nothing to complete the call with
#   copyout_*, copyrun_np3  one rank's result cannot be copied out of its aligned copy
#                   (the copy refused; or failing on the GPU)
#                   (after every step moved): its call alone fails, the others'
#                   sums are right, the next call works everywhere (IPC, net)
#   copyin_np3      one rank's input cannot be copied into its aligned copy (failing
#                   on the GPU): every rank fails the call at once
#   bcast_refused_np3, bcast_refused_host_np3  one rank fails an MPI_Bcast its peers
#                   completed: their next call (device; host, the host plane's first)
#                   fails at once (the arrival board: it refuses every call)
#   setdevice_np3   one rank's worker cannot make the GPU current for an
#                   MPI_Iallreduce: every rank fails the call at once
#   othergpu_np3    one rank's call on another GPU's buffers than its device
#                   connections': it abandons the call, its peers fail at once
#   late2_*_np3     a rank 7 s late to a call (wait timeout 3): waited for, on the
#                   FIFO, LL direct and direct paths, every result right
#   late_connect_np3  one rank more than the wait timeout late to the call that
#                   connects the device plane: every rank fails it, none falls back
#                   (_window_: between one and two wait timeouts late)
#   cuda_app        examples/cuda_allreduce.c, a plain CUDA + MPI program, built
#                   and run unchanged with test/cudacpu/run (direct and FIFO)
# world, dup and split communicators, in place and not.  A case passes when
# mpirun exits 0, allreduce_check says "N passed, 0 failed", every rank's
# finalize summary matches what the case expects (by default: it ran its
# calls on device buffers in gpuring), no rank staged device calls of the
# collectives gpuring runs for the component below but those the case expects
# ($staged ranks' allreduces, $below_ok's collectives, colls_check's unequal
# reduce_scatters: test/below_check.sh), and no process left a shared-memory
# segment behind (and, where $want is set, every rank's log has a line matching
# that extended regex).  Prints one line per case, then the sum of allreduce_check's
# counts as "N passed, N failed".  A case whose log holds a sanitizer report
# fails.  From the top of the build tree.  Environment:
#   CUDACPU_TEST_TIMEOUT   seconds per mpirun (300; cases that set no
#                          coll_gpuring_wait_timeout get 2/5 of it)
#   CUDACPU_MPI_LOGDIR     where the logs go (test/cudacpu/mpi-logs)
#   CUDACPU_FLAVOR_DIR     the build of the component (component/.libs), runtime
#                          (runtime/libcudart.so) and driver (driver/libcuda.so.1)
#                          to run (test/cudacpu; the sanitizer flavor's is
#                          test/sanitize/cudacpu: test/sanitize/run_sanitize_tests.sh)
#   CUDACPU_MPIRUN_ARGS    more mpirun arguments (e.g. -x LD_PRELOAD=...)
#   CUDACPU_MPI_CASES      the cases to run, by name (e.g. "direct_np2 churn";
#                          unset: all of them)
#   CUDACPU_FIBER_ORDERS   the fiber orders each allreduce_check and failure case
#                          runs in (unset: one each, forward and reverse in turn)
#   CUDACPU_CASE_TYPES     direct_np2 and fifo_np3 on these types only
#                          (allreduce_check -t; unset: every type and MPI alias,
#                          Fortran's too;
#                          the sanitizer flavor's: each width once)
top=$(pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../sanitize/sanitizer_report.sh"
. "$here/../log_errors.sh"
. "$here/../below_check.sh"
limit=${CUDACPU_TEST_TIMEOUT:-300}
logs=${CUDACPU_MPI_LOGDIR:-$top/test/cudacpu/mpi-logs}
flavor=${CUDACPU_FLAVOR_DIR:-$top/test/cudacpu}
extra=${CUDACPU_MPIRUN_ARGS:-}
cases=$(echo ${CUDACPU_MPI_CASES:-}) # (one space between names, whatever separated them)
orders=${CUDACPU_FIBER_ORDERS:-}
case_types="-t ${CUDACPU_CASE_TYPES:-all,fortran}"
turn=0 # unset orders: the cases take the two in turn
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
LD_LIBRARY_PATH=$flavor/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CUDACPU_DRIVER=$flavor/driver/libcuda.so.1
export LD_LIBRARY_PATH CUDACPU_DRIVER
if [ "$(id -u)" = 0 ]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
mkdir -p "$logs"
. "$here/../mpi/known_ompi_bugs.sh" # the mixed case's calls all go below
passed=0 failed=0 bad=0

# the segments of processes that are gone: the CPU runtime's (cudacpu-PID-...) and
# gpuring's own (gpuring-NS-PID-...: test/shm_segments.h), made since segments_before
# took its list (what another suite or an earlier run left is not the case's)
segments() {
    for f in /dev/shm/cudacpu-* /dev/shm/gpuring-*; do
        [ -e "$f" ] && echo "$f"
    done
}
segments_before() {
    before_segs=$(segments)
}
before_segs=
orphans() {
    segments | grep -vxF -e "$before_segs" | while read -r f; do
        case $f in
        /dev/shm/cudacpu-*) pid=${f#/dev/shm/cudacpu-} ;;
        *) pid=${f#/dev/shm/gpuring-*-} ;;
        esac
        pid=${pid%%-*}
        case $pid in '' | *[!0-9]*) continue ;; esac
        [ -d "/proc/$pid" ] || echo "$f"
    done
}

# wanted NAME: whether CUDACPU_MPI_CASES names the case (unset: every case); every
# name asked about is kept (known), for the check at the end that each named case exists
known=" "
wanted() {
    known="$known$1 "
    [ -z "$cases" ] && return 0
    case " $cases " in *" $1 "*) return 0 ;; esac
    return 1
}

# mpirun_cpu NP ARGS...: mpirun (bounded) on the flavor's component and runtime
mpirun_cpu() {
    np=$1
    shift
    # shellcheck disable=SC2086
    timeout -k 10 "$limit" mpirun --oversubscribe -np "$np" \
        --mca mca_base_component_path "$flavor/component/.libs:$pkglibdir" \
        -x LD_LIBRARY_PATH -x CUDACPU_DRIVER $extra "$@"
}

# with_arrival "MCA PARAMS": the params, and coll_gpuring_arrival_timeout as long as
# their wait timeout (2/5 of the limit without one) where they set none: a call that
# waits for a rank that never makes it (a case's skipped call) fails at that timeout
with_arrival() {
    case " $1 " in
    *" coll_gpuring_arrival_timeout "*) echo "$1"; return ;;
    esac
    wt=$(echo " $1 " | sed -n 's/.* coll_gpuring_wait_timeout \([0-9][0-9]*\) .*/\1/p')
    echo "$1 coll_gpuring_arrival_timeout ${wt:-$((limit * 2 / 5))}"
}

# what case_run expects of every rank's allreduce summary, and how many ranks must
# report allreduces staged for the component below
SUMMARY_ON_DEVICE='allreduce summary: [1-9][0-9]* calls in gpuring.*[1-9][0-9]* on device buffers'
# ... of a case whose every device call goes to the component below
SUMMARY_BELOW='allreduce summary: .* 0 on device buffers;.* [1-9][0-9]* handed to the component below'
summary=$SUMMARY_ON_DEVICE staged=0 want="" verbose=3 bin=allreduce_check below_ok=""
xenv="" # more mpirun arguments before the program (-x VAR=value)

# ranks_matching ERE LOG: how many ranks logged a line matching ERE
ranks_matching() {
    grep -E "$1" "$2" | sed -n 's/.*\[gpuring rank \([0-9]*\)\].*/\1/p' | sort -u | wc -l
}

# next_orders: $case_orders, the fiber orders of the next case
next_orders() {
    turn=$((turn + 1))
    if [ -n "$orders" ]; then
        case_orders=$orders
    elif [ $((turn % 2)) = 1 ]; then
        case_orders=forward
    else
        case_orders=reverse
    fi
}

# case NAME NP "MCA PARAMS" ARGS...: $prog (allreduce_check) with ARGS (and $summary,
# $staged, $want, $verbose: coll_gpuring_verbose)
case_run() {
    name=$1 np=$2 params=$3
    shift 3
    wanted "$name" || return 0
    next_orders
    for order in $case_orders; do
        log=$logs/$name-$order.log
        mca=""
        for p in coll_gpuring_verbose $verbose $(with_arrival "$params"); do mca="$mca $p"; done
        # a stalled call names what it waits for before the limit kills the job
        case " $params " in
        *" coll_gpuring_wait_timeout "*) ;;
        *) mca="$mca coll_gpuring_wait_timeout $((limit * 2 / 5))" ;;
        esac
        start=$(date +%s)
        segments_before
        CUDACPU_FIBER_ORDER=$order mpirun_cpu "$np" $(printf -- '--mca %s %s ' $mca) \
            -x CUDACPU_FIBER_ORDER $xenv "$top/test/mpi/$bin" "$@" > "$log" 2>&1
        rc=$?
        counts=$(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1 \2/p' "$log" | tail -1)
        ondev=$(grep -c "$summary" "$log")
        nstaged=$(grep -c 'staged through host memory for the component below: .*MPI_Allreduce [1-9]' "$log")
        left=$(orphans)
        # (allreduces staged where the case says so: `staged`)
        below=$(below_check "$log" "$np" "$below_ok$([ "$staged" -eq 0 ] || echo " allreduce")" staged)
        report=$(sanitizer_report "$log")
        why=""
        [ -z "$report" ] || why="sanitizer: $report"
        [ "$rc" -eq 0 ] || why="${why:+$why, }exit $rc"
        [ -n "$counts" ] || why="${why:+$why, }no result line"
        [ "$ondev" -eq "$np" ] || why="${why:+$why, }$ondev of $np ranks' summaries match '$summary'"
        [ "$nstaged" -eq "$staged" ] || why="${why:+$why, }$nstaged ranks staged allreduces, want $staged"
        [ -z "$left" ] || why="${why:+$why, }segments left: $left"
        [ -z "$below" ] || why="${why:+$why, }$below"
        if [ -n "$want" ] && [ "$(ranks_matching "$want" "$log")" -ne "$np" ]; then
            why="${why:+$why, }$(ranks_matching "$want" "$log") of $np ranks logged '$want'"
        fi
        if [ -n "$counts" ]; then
            passed=$((passed + ${counts% *}))
            failed=$((failed + ${counts#* }))
            [ "${counts#* }" = 0 ] || why="${why:+$why, }${counts#* } cases failed"
            [ "${counts% *}" -ge 1 ] || why="${why:+$why, }no check ran"
        fi
        if [ -z "$why" ]; then
            echo "PASS $name ($order, $(($(date +%s) - start)) s)"
        else
            echo "FAIL $name ($order): $why; log $log"
            log_errors "$log"
            sed 's/^/    /' "$log" | tail -20
            bad=1
        fi
    done
}

# with coll_gpuring_profile: every rank's line names the points of its path, in
# order (a rank whose share of a small call is empty launches nothing)
n='[0-9]+\.[0-9]{2}( \([0-9]+\))?'
PROFILE='profile of [1-9][0-9]* blocking calls on device buffers \(the last [0-9]+\): median us at each point \(calls that passed it, where not all\): memkind '"$n device $n order $n"
summary='allreduce summary: [1-9][0-9]* calls in gpuring.*LL direct 0, direct [1-9][0-9]*; [1-9][0-9]* on device buffers'
want="$PROFILE publish $n map $n agree $n launch $n run $n close $n return $n\$"
case_run direct_np2 2 "coll_gpuring_profile 1 coll_gpuring_direct_ll_size 0" -d -q -i \
    -m world,dup,split -c 0,1,17,4099 $case_types
# a mapping of a peer's buffers that fails once (CUDACPU_FAIL_IPC_OPEN_NTH: out of
# memory for it, a failure that passes): that call takes the FIFOs on every rank, and
# later ones run direct again (it used to turn the direct allreduce off for good)
want='direct allreduce: rank [0-9] could not map its peers. buffers .*: FIFO path \(for the next 1 calls too\)'
xenv="-x CUDACPU_FAIL_IPC_OPEN_NTH=2"
case_run direct_mapfail_np2 2 "coll_gpuring_direct_ll_size 0 coll_gpuring_device_nchannels 1" -d -q -m world -c 1,17,4099 -t int,float -o sum,max
xenv=""
# GPUs that cannot say their PCI address (CUDACPU_NO_PCI): no rank knows which ranks
# share a GPU, so the device plane takes one channel (every rank's block fits any GPU)
# -- it took the graph's 32 (no GPU known, no bound): more blocks than a full GPU holds
# at once wait for each other forever -- and the FIFOs run right on it
want='device plane: 1 channel \(rank 0 cannot tell its GPU.s PCI address'
xenv="-x CUDACPU_NO_PCI=1" saved_summary=$summary summary=$SUMMARY_ON_DEVICE
case_run nopci_np3 3 "coll_gpuring_direct 0" -d -q -m world -c 1,17,4099,65537 -t int,float -o sum,max
xenv="" summary=$saved_summary
# no idle mapping kept (coll_gpuring_ipc_cache 0): each call maps its peers' buffers
# and unmaps them when it ends (the runtime unmaps at once: a use after fails)
want='unmapped \(0 mappings kept idle at most: coll_gpuring_ipc_cache\)' verbose=4
case_run direct_nocache_np3 3 "coll_gpuring_direct_ll_size 0 coll_gpuring_ipc_cache 0" -d -q \
    -m world,dup -c 1,17,4099 -t int,float -o sum,max
verbose=3
# calls of up to 64 KiB LL direct (no exchange: the profile's points are the
# launch and the run), larger ones direct, on every communicator in turn
summary='allreduce summary: [1-9][0-9]* calls in gpuring.*LL direct [1-9][0-9]*, direct [1-9][0-9]*; [1-9][0-9]* on device buffers'
want='device calls of up to 65536 B run LL direct: 3 ranks'
case_run direct_ll_np3 3 "" -d -q -i -m world,dup,split -c 1,17,4099,20000 $case_types
summary='allreduce summary: [1-9][0-9]* calls in gpuring.*LL direct [1-9][0-9]*, direct 0;'
want="$PROFILE launch $n run $n return $n\$"
case_run direct_ll_profile_np2 2 "coll_gpuring_profile 1" -d -q -m world -c 1,17 -t int,float
# its most, 1 MiB calls (every block of the kernel busy), on inboxes sized for them
want='device calls of up to 1048576 B run LL direct: 2 ranks'
case_run direct_ll_max_np2 2 "coll_gpuring_direct_ll_size 1048576" -d -q -i -m world \
    -c 3,262143,262144 -t int,float
# one GPU, no MPS: the ranks would time-slice it, so the LL direct allreduce stays off
summary='allreduce summary: [1-9][0-9]* calls in gpuring.*LL direct 0, direct [1-9][0-9]*;'
want='LL direct allreduce off: ranks 0 and 1 share a GPU without MPS' xenv="-x CUDACPU_MPS=0"
case_run direct_ll_nomps_np2 2 "" -d -q -m world -c 1,17 -t int,float
# two GPUs without MPS, each on a PCI domain of its own and bus 0 (as VMs give
# them): not one shared GPU, so the LL direct allreduce runs
summary='allreduce summary: [1-9][0-9]* calls in gpuring.*LL direct [1-9][0-9]*, direct 0;'
want='device calls of up to 65536 B run LL direct: 2 ranks'
xenv="-x CUDACPU_MPS=0 -x CUDACPU_DEVICES=2 -x CUDACPU_PCI_DOMAINS=1"
case_run direct_ll_domains_np2 2 "" -d -q -m world -c 1,17 -t int,float
xenv=""
summary=$SUMMARY_ON_DEVICE
want="$PROFILE plan $n launch $n run $n return $n\$"
case_run fifo_np3 3 "coll_gpuring_direct 0 coll_gpuring_profile 1" -d -q -i -m world,dup,split \
    -c 0,1,17,4099 $case_types
# each rank's place in its node is its GPU's (the device its program made current before
# its first call: local rank r's of 3 GPUs, PCI bus 0x18 + r on the CPU runtime), for the
# rings to follow the PCI tree between the GPUs (debug, subsystem graph)
place='\] debug .* this rank.s place in its node: NUMA node -?[0-9]+, package -?[0-9]+, NIC -?[0-9]+, GPU 0000'
want="rank 0$place:18:00\.0\$|rank 1$place:19:00\.0\$|rank 2$place:1a:00\.0\$" verbose=4
xenv="-x CUDACPU_DEVICES=3"
case_run gpu_place_np3 3 "coll_gpuring_verbose_subsys coll,graph" -d -q -m world -c 1,4099 -t int,float
want="" verbose=3 xenv=""
# buffers off their element grid: every rank's log says once that it ran calls on
# aligned copies (a rank whose buffers are all aligned -- rank 3 in place -- says it
# where it is not in place)
want='device buffers not aligned to their elements: calls run on aligned copies'
case_run misaligned_np4 4 "" -d -q -i -A -m world,split -c 1,17,4099,20000 \
    -t int,short,double,float -o sum,max,prod
case_run misaligned_fifo_np3 3 "coll_gpuring_direct 0" -d -q -i -A -m world,dup \
    -c 1,17,4099,65537 -t int,short,double,float,long -o sum,max
case_run misaligned_fifo_nonblocking_np3 3 "coll_gpuring_direct 0" -d -q -i -B -A -m world,dup \
    -c 1,17,4099,65537 -t int,short,double -o sum,min
case_run misaligned_vnodes_np4 4 "coll_gpuring_direct 0 coll_gpuring_ranks_per_node 2" -d -q -i -A \
    -m world,rev -c 1,17,4099,65537 -t int,double -o sum,max
# (a decline makes the next calls take the FIFOs without the exchange: up to 63)
want='FIFO path \(for the next 63 calls too\)' verbose=4
summary='allreduce summary: [1-9][0-9]* calls in gpuring.*LL direct [1-9][0-9]*, direct 0; [1-9][0-9]* on device buffers'
case_run pool_np3 3 "coll_gpuring_agree_memory 1" -d -P -q -i -m world,split -c 1,17,4099,20000
want="" verbose=3
summary=$SUMMARY_BELOW
staged=2
case_run mixed_np3 3 "coll_gpuring_agree_memory 1 coll_gpuring_host_buffers 1" -d -M -q -i \
    -m world,dup -c 1,17,4099 -x "$KNOWN_OMPI_BUGS"
staged=3 want="allreduce fallback: device memory of a CUDA context other than its GPU's primary one"
case_run own_ctx_np3 3 "" -d -C -q -i -m world,split -c 1,17,4099 -x "$KNOWN_OMPI_BUGS"
# ... unless the driver says the primary context's kernels reach that memory (a context
# sharing its address space, as a green context does: CUDACPU_CTX_SHARED): gpuring
summary=$SUMMARY_ON_DEVICE staged=0 want="" xenv="-x CUDACPU_CTX_SHARED=1"
case_run own_ctx_shared_np3 3 "" -d -C -q -i -m world,split -c 1,17,4099
xenv=""
# no rank can map another's device memory (CUDACPU_FAIL_IPC_OPEN: as where a device
# cgroup per task keeps the peers' GPUs away): every communicator's device connections
# fail at setup on every rank alike, and its device calls go below, staged, right
summary=$SUMMARY_BELOW
staged=3 xenv="-x CUDACPU_FAIL_IPC_OPEN=1"
want='device connections failed on rank 0 \(device buffers\): device buffers on this communicator go to the component below'
case_run ipc_refused_np3 3 "" -d -q -i -m world,split -c 1,17,4099 -t int,float \
    -x "$KNOWN_OMPI_BUGS"
summary=$SUMMARY_ON_DEVICE staged=0 want="" xenv=""
case_run fifo32_np2 2 "coll_gpuring_direct 0 coll_gpuring_device_nchannels 32 coll_gpuring_channels_per_call 32" \
    -d -q -i -m world -t int,float,double,short -o sum,max -c 17,4099,65537,1048579
# the node leaders' NET steps: the host thread waiting for the kernel runs the
# proxy's passes (its finalize line counts them, debug, subsystem proxy)
want='proxy finalized: [0-9]+ passes \([1-9][0-9]* run by waiting executors' verbose=4
# (each element width, integer and floating point, a bitwise op: the net steps move
# bytes; the kernels reducing what they staged are fifo_np3's, run there on every type)
case_run vnodes_np4 4 "coll_gpuring_direct 0 coll_gpuring_ranks_per_node 2 coll_gpuring_verbose_subsys coll,proxy" \
    -d -q -i -c 1,17,4099,65537 -t schar,short,int,long,float,double -o sum,prod,max,bxor
want="" verbose=3
# the LL protocol forced on the FIFO kernels; every rank's plans (debug, subsystem
# tuning) must say LL on device buffers
LL="coll_gpuring_direct 0 coll_gpuring_protocol ll coll_gpuring_verbose_subsys coll,tuning"
want='plan: [0-9]+ B \(device\) -> [a-z]+( \(ordered\))? LL,' verbose=4
# (every gpuring type once, not its MPI aliases: LL steps are many and the CPU runtime slow)
case_run ll_fifo_np3 3 "$LL" -d -q -i -m world,split -c 1,17,4099,65537 \
    -t int8,uint8,int16,uint16,int32,uint32,int64,uint64,float,double
case_run ll_tree_vnodes_np4 4 "$LL coll_gpuring_ranks_per_node 2 coll_gpuring_algorithm tree" \
    -d -q -i -m world,rev -t int8,int16,int32,float,double -c 1,17,4099,65537
# reduce-scatter, allgather, bcast and reduce on device buffers (colls_check -f: a
# few type x op pairs, every root, in place, world/dup/split, 64 Ki elements)
summary='bcast summary: [1-9][0-9]* calls in gpuring ([1-9][0-9]* on device buffers'
want='reduce_scatter summary: [1-9][0-9]* calls in gpuring \([1-9][0-9]* on device buffers' verbose=3
bin=colls_check
case_run colls_np3 3 "coll_gpuring_direct 0" -d -f -q -L 65536
want='device buffers not aligned to their elements: calls run on aligned copies'
case_run colls_misaligned_np3 3 "coll_gpuring_direct 0" -d -f -A -q -L 4099
want='reduce_scatter summary: [1-9][0-9]* calls in gpuring \([1-9][0-9]* on device buffers'
# bcast and reduce on the trees (forced), rooted anywhere, over two virtual nodes:
# CUDA IPC and net edges in one program, data going up and down the tree
summary='bcast summary: [1-9][0-9]* calls in gpuring ([1-9][0-9]* on device buffers.*tree [1-9]'
want='reduce summary: [1-9][0-9]* calls in gpuring \([1-9][0-9]* on device buffers.*tree [1-9]'
case_run colls_tree_vnodes_np4 4 "coll_gpuring_direct 0 coll_gpuring_ranks_per_node 2 \
coll_gpuring_algorithm tree" -d -f -q -L 4099
# managed memory (cudaMallocManaged) run as device memory of its GPU
# (coll_gpuring_managed_buffers 1): each rank's own datatype of one signature, so
# some ranks pack their elements (into device memory) and some run on them in place,
# all on the device plane
summary='bcast summary: [1-9][0-9]* calls in gpuring ([1-9][0-9]* on device buffers'
want='allgather summary: [1-9][0-9]* calls in gpuring \([1-9][0-9]* on device buffers'
# (the unequal reduce_scatters go below unstaged: the host reaches managed memory)
below_ok=reduce_scatter
case_run colls_managed_np3 3 "coll_gpuring_managed_buffers 1" -d -U -f -q -L 4099
below_ok=""
summary=$SUMMARY_ON_DEVICE want="" bin=allreduce_check
# ... and an allreduce whose send buffer is managed memory and receive buffer
# cudaMalloc'd on even ranks, both managed on odd ones: one plane, the device
# one, on every rank (CUDA IPC cannot share managed memory: the FIFO programs
# above 64 KiB)
case_run managed_np3 3 "coll_gpuring_managed_buffers 1" -d -U -q -i -m world,split \
    -c 1,17,4099,65537 -t int,float,double -o sum,max
want="" verbose=3

# a seeded random sequence of every collective on device buffers (mix_check -d):
# plans kept and changed, MPI_Iallreduce in flight between blocking calls (direct
# and FIFO on one communicator), world/dup/split
want='(reduce_scatter|allgather|bcast|reduce) summary: [1-9][0-9]* calls in gpuring \([1-9][0-9]* on device buffers'
bin=mix_check
case_run mix_np3 3 "" -d -q -n "${CUDACPU_MIX_CALLS:-1000}" -s "${CUDACPU_SEED:-1}"
case_run mix_vnodes_np4 4 "coll_gpuring_ranks_per_node 2" -d -q -n "${CUDACPU_MIX_CALLS:-1000}" \
    -s "${CUDACPU_SEED:-1}"
summary=$SUMMARY_ON_DEVICE want="" bin=allreduce_check

# MPI_Iallreduce on device buffers: calls in flight, blocking ones (direct) between
# them, world and dup at once, in place, a large call that must end while its caller
# makes no MPI call (iallreduce_check -d)
bin=iallreduce_check
# (the blocking calls set the LL direct allreduce up: small calls in flight take it)
want='non-blocking device calls of up to 65536 B run LL direct too'
case_run iallreduce_np3 3 "" -d -q
# a fresh communicator's first collective an MPI_Iallreduce on device buffers whose
# caller then needs a send another rank makes before its own call: with the setup
# left to blocking calls (coll_gpuring_nonblocking_setup 0) it goes below, staged
# (the component below cannot read device memory), and completes; so do the calls
# after, the communicator never set up by a device call (iallreduce_check -d -F;
# op ^avx: Open MPI 4.1.4's op/avx saturates the 8-bit sums below, known_ompi_bugs.sh)
summary=$SUMMARY_BELOW
want='staged through host memory for the component below: .*MPI_Iallreduce [1-9]'
below_ok=allreduce
case_run iallreduce_first_np3 3 "coll_gpuring_nonblocking_setup 0 op ^avx" -d -F -q
summary=$SUMMARY_ON_DEVICE
want="" bin=allreduce_check below_ok=""

# a request's completion callback (Open MPI's, as a layer above sets it) frees the
# request and starts the next call on its communicator: gpuring completed its requests
# holding the lock both take (deadlock); on gpuring's own requests, and on those over
# the component below's (a user op: staged through host memory)
bin=request_cb_check
case_run request_cb_np3 3 "" -d -q
summary=$SUMMARY_BELOW
want='staged through host memory for the component below: .*MPI_Iallreduce [1-9]'
below_ok=allreduce
case_run request_cb_staged_np3 3 "op ^avx" -d -u -q
summary=$SUMMARY_ON_DEVICE
want="" bin=allreduce_check below_ok=""

# communicator churn on device buffers: every communicator's device plane (IPC
# FIFOs, streams, mappings) made and freed; nothing may leak (fds, threads, the
# runtime's and gpuring's /dev/shm segments); split at np 2 makes one-rank
# communicators, whose device buffers are staged for coll/self.  The runtime
# does not poison what cudaMalloc returns here (CUDACPU_POISON=0): every other
# case does, and filling the ends of each communicator's FIFOs (32 channels,
# each peer's 4 MiB) takes as long as the rest of the churn
wanted churn && for churn in "2 1" "3 0"; do
    np=${churn% *} direct=${churn#* }
    log=$logs/churn_np$np-direct$direct.log
    (CUDACPU_POISON=0 && export CUDACPU_POISON &&
        mpirun_cpu "$np" -x CUDACPU_POISON --mca coll_gpuring_verbose 3 \
            --mca coll_gpuring_direct "$direct" "$top/test/mpi/comm_churn" -d -n 60 -q) \
        > "$log" 2>&1
    rc=$?
    counts=$(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1 \2/p' "$log" | tail -1)
    ondev=$(grep -c 'allreduce summary: [1-9][0-9]* calls in gpuring.*[1-9][0-9]* on device buffers' "$log")
    report=$(sanitizer_report "$log")
    if [ "$rc" -eq 0 ] && [ -n "$counts" ] && [ "${counts#* }" = 0 ] && [ "${counts% *}" -ge 1 ] &&
        [ "$ondev" -eq "$np" ] && [ -z "$report" ]; then
        echo "PASS churn_np$np (device buffers, direct $direct)"
        passed=$((passed + ${counts% *}))
    else
        echo "FAIL churn_np$np (device buffers, direct $direct): exit $rc, ${counts:-no result}, $ondev of $np ranks in gpuring${report:+, sanitizer: $report}; log $log"
        sed 's/^/    /' "$log" | tail -20
        bad=1
    fi
done

# failure_case NAME NP WANT REPORT "MCA PARAMS" PROGRAM ARGS...: a failure on device
# buffers, in the fiber orders of next_orders; passes when mpirun exits 0, the
# program says "WANT passed, 0 failed" and some rank's log line matches REPORT
failure_case() {
    name=$1 np=$2 want=$3 pattern=$4 params=$5
    shift 5
    wanted "$name" || return 0
    next_orders
    for order in $case_orders; do
        log=$logs/$name-$order.log
        segments_before
        CUDACPU_FIBER_ORDER=$order mpirun_cpu "$np" \
            $(printf -- '--mca %s %s ' coll_gpuring_verbose 3 $(with_arrival "$params")) \
            -x CUDACPU_FIBER_ORDER "$@" > "$log" 2>&1
        rc=$?
        report=$(sanitizer_report "$log")
        left=$(orphans) # (a failed call's processes leave nothing in /dev/shm either)
        if [ "$rc" -eq 0 ] && grep -q "^$want passed, 0 failed\$" "$log" && [ -z "$report" ] &&
            grep -qE "$pattern" "$log" && [ -z "$left" ]; then
            echo "PASS $name ($order, device buffers)"
            passed=$((passed + want))
        else
            echo "FAIL $name ($order, device buffers): exit $rc${report:+, sanitizer: $report}${left:+, segments left: $left}; log $log"
            sed 's/^/    /' "$log" | tail -20
            bad=1
        fi
    done
}

# a peer that never makes a call on device buffers: the CUDA executor's wait times
# out, the report names step and peer, and the next call fails at once
failure_case timeout_np3 3 7 \
    '\[gpuring rank [0-9]+\].*timed out after .* waits for step [0-9]+ from rank [0-9]+' \
    "coll_gpuring_direct 0 coll_gpuring_wait_timeout 3" "$top/test/mpi/timeout_check" 60 device
failure_case timeout_direct_ll_np3 3 7 \
    '\[gpuring rank [0-9]+\].*timed out after .* the LL direct allreduce .* waits for rank 2' \
    "coll_gpuring_wait_timeout 3" "$top/test/mpi/timeout_check" 60 device,small
# the last rank passes more elements (or another datatype) on device buffers: every
# rank fails at once (wait_timeout 60, limit 20 s), none succeeds, the next call
# fails everywhere, a new communicator works -- the direct allreduce (7 elements:
# the LL one, whose kernels check every peer's header)
failure_case mismatch_direct_np3 3 4 \
    '\[gpuring rank [0-9]+\].*allreduce mismatch: rank [0-9]+ makes another call' \
    "coll_gpuring_wait_timeout 60" "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:4096 device
failure_case mismatch_direct_type_np2 2 4 \
    '\[gpuring rank [0-9]+\].*allreduce mismatch: rank [0-9]+ makes another call' \
    "coll_gpuring_wait_timeout 60" "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:4096 type device
# ... 16384 ints against 16385, once a 64 KiB call set up the LL direct allreduce: two
# ranks wait in its one kernel for the last rank's part, the last rank in the direct
# allreduce's handle exchange for theirs, and no step of either call reaches the
# other -- each finds the other call under the same number on the host's arrival board
failure_case mismatch_ll_direct_np3 3 2 \
    '\[gpuring rank [0-9]+\].*call [0-9]+ mismatch: rank [0-9]+ makes another call' \
    "coll_gpuring_wait_timeout 60" "$top/test/mpi/mismatch_check" 20 16384:1 device
# ... the CUDA executor over IPC FIFOs, and over net connections (virtual nodes): the
# kernel checks each step's size and call id, and abandons the call to its peers
MISMATCH_REPORT='\[gpuring rank [0-9]+\].*allreduce mismatch: rank [0-9]+ sent a step of another call .*cuda executor'
# (16384 ints against 16385: 64 KiB take the LL protocol on IPC FIFOs, one int more
# the simple one: each kernel finds its step posted in the other protocol)
failure_case mismatch_fifo_np3 3 5 "$MISMATCH_REPORT" \
    "coll_gpuring_wait_timeout 60 coll_gpuring_direct 0" \
    "$top/test/mpi/mismatch_check" 20 7:1,16384:1,131072:1,1048576:4096 device
failure_case mismatch_vnodes_type_np3 3 4 "$MISMATCH_REPORT" \
    "coll_gpuring_wait_timeout 60 coll_gpuring_direct 0 coll_gpuring_ranks_per_node 2" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:4096 type device
# ... on trees of one channel with small slots: the mismatched rank's parent gives up
# while its children still push steps up to it; a child's kernel waiting for a slot the
# parent will not free is told (the parent's kernel refuses its recv ends; over net the
# proxy carries it in a credit) instead of waiting out the 60 s timeout; IPC and net
REFUSED_REPORT='\[gpuring rank [0-9]+\].*abandoned: rank [0-9]+ gave up on the call .* reads no more of this rank.s steps; .*cuda executor'
REFUSED="coll_gpuring_wait_timeout 60 coll_gpuring_direct 0 coll_gpuring_algorithm tree \
coll_gpuring_device_nchannels 1 coll_gpuring_slot_size 8192"
failure_case mismatch_refused_np5 5 4 "$REFUSED_REPORT" "$REFUSED" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:4096 device
failure_case mismatch_refused_vnodes_np5 5 4 "$REFUSED_REPORT" \
    "$REFUSED coll_gpuring_ranks_per_node 1" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:4096 device
# ... and under LL: the kernel checks each LL step's header before any thread waits
# for its data
failure_case mismatch_fifo_ll_np3 3 4 "$MISMATCH_REPORT" \
    "coll_gpuring_wait_timeout 60 coll_gpuring_direct 0 coll_gpuring_protocol ll" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:4096 device
# one rank's device memory runs out for a call (mismatch_check nomem: the runtime's
# cudaMallocAsync fails on the last rank while it makes the call): its aligned copies
# of buffers off their element grid, or a small float call's ordered-gather scratch,
# cannot be had; it abandons the call to its peers before any step moves, and they
# fail at once (wait_timeout 60, limit 20), the next call fails everywhere, a new
# communicator works
GAVE_UP_REPORT='\[gpuring rank [0-9]+\].*allreduce abandoned: rank 2 gave up on the call'
failure_case nomem_bounce_np3 3 4 "$GAVE_UP_REPORT" \
    "coll_gpuring_wait_timeout 60 coll_gpuring_direct 0" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:1 device nomem
failure_case nomem_scratch_np3 3 2 "$GAVE_UP_REPORT" \
    "coll_gpuring_wait_timeout 60 coll_gpuring_direct 0" \
    "$top/test/mpi/mismatch_check" 20 7:1 device nomem type
# ... the rank out of memory an inner node of a tree over virtual nodes (5 ranks: rank
# 4 is rank 2's parent on tree 0), of one channel with small slots: its abandon kernel
# refuses its recv ends, so rank 2, blocked pushing its share up to it, is told
failure_case nomem_refused_vnodes_np5 5 4 "$REFUSED_REPORT" \
    "$REFUSED coll_gpuring_ranks_per_node 1" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:1 device nomem
# ... or the device memory its receive buffer's elements are packed into
# (mismatch_check allgather nomem: an MPI_Allgather into a datatype with holes, the
# packing's cuMemAllocAsync fails): it gives up before the call could start, but
# still numbers and plans the call and abandons it on the connections it would use,
# and its peers fail at once -- over IPC FIFOs and over net connections
failure_case nomem_pack_np3 3 4 '\[gpuring rank [0-9]+\].*allgather abandoned: rank 2 gave up on the call' \
    "coll_gpuring_wait_timeout 60" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:1 allgather device nomem
failure_case nomem_pack_vnodes_np3 3 4 '\[gpuring rank [0-9]+\].*allgather abandoned: rank 2 gave up on the call' \
    "coll_gpuring_wait_timeout 60 coll_gpuring_ranks_per_node 1" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:1 allgather device nomem
# one rank's kernels do not launch for a call (mismatch_check nolaunch: the runtime
# refuses blocks of more than one thread, as a GPU does a kernel that asks too many
# registers): it abandons the call with one-thread blocks and its peers fail at once --
# the FIFO kernel over IPC and over net connections, the LL direct kernel (7
# elements; the direct one's closing agreement carries the failure: the larger calls)
failure_case nolaunch_fifo_np3 3 4 "$GAVE_UP_REPORT" \
    "coll_gpuring_wait_timeout 60 coll_gpuring_direct 0" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:1 device nolaunch
failure_case nolaunch_vnodes_np3 3 4 "$GAVE_UP_REPORT" \
    "coll_gpuring_wait_timeout 60 coll_gpuring_direct 0 coll_gpuring_ranks_per_node 1" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:1 device nolaunch
failure_case nolaunch_direct_np3 3 4 "$GAVE_UP_REPORT" \
    "coll_gpuring_wait_timeout 60" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:1 device nolaunch
# one rank's kernel for a call starts 5 s late (mismatch_check latekernel: queued behind
# long work), past its wait timeout (2 s) and the second's grace after the abort: it
# leaves at its first look, and the rank's next device call (a new communicator's)
# takes its status entry back -- before, the entry stayed taken for good, and with it
# the count of kernels in flight that holds back every device free of the process
failure_case latekernel_np3 3 2 \
    '\[gpuring rank 2\].*the kernel of a call aborted [0-9.]+ s ago has left: its status entry is back' \
    "coll_gpuring_wait_timeout 2 coll_gpuring_direct 0" \
    "$top/test/mpi/mismatch_check" 20 131072:1 device latekernel
# ... the LL direct kernel (7 ints): it finds every peer's units in its row when it
# starts, and used to write its result into the receive buffer seconds after the call
# had returned (mismatch_check checks the pattern written there then); it looks at the
# host's abort as it starts now
failure_case latekernel_ll_np3 3 2 \
    '\[gpuring rank 2\].*the kernel of a call aborted [0-9.]+ s ago has left: its status entry is back' \
    "coll_gpuring_wait_timeout 2" "$top/test/mpi/mismatch_check" 20 7:1 device latekernel
# ... 2.5 s late: inside the grace after the abort (2 s), where the LL direct kernel
# leaves at once without writing -- its rank took that for a kernel that finished in
# the grace, and returned MPI_SUCCESS with its receive buffer unwritten; it fails now
# ("started only after its host had given the call up"), or, where its kernel started
# before its host gave up after all (a loaded machine), succeeds with its sums right
failure_case latekernel_grace_ll_np3 3 2 \
    '\[gpuring rank [01]\].*timed out after' \
    "coll_gpuring_wait_timeout 2" "$top/test/mpi/mismatch_check" 20 7:1 device latekernel_grace
# ... and rank 0 a second late to the call, so still in it when the late kernel
# starts (2 ranks: no third one whose failure the arrival board would tell rank 0 of
# first): the kernel sent it the late rank's units, and rank 0 completed the call
# (MPI_SUCCESS) that its peer had failed; it stores the call's abandon instead now,
# and rank 0 fails too (or, on a loaded machine, every rank succeeds, sums right)
failure_case latekernel_peer_ll_np2 2 2 'comm .* ready' \
    "coll_gpuring_wait_timeout 2" "$top/test/mpi/mismatch_check" 20 7:1 device latekernel_peer
# one rank's receive buffer off its element grid (its call runs on an aligned copy), and
# the copy of its result out of it fails (mismatch_check copyout: every device copy of
# its runtime refused during the call), after every step moved: its call fails, the
# others' succeed with the right sums, and the next call works on every rank (the old
# code broke the communicator there alone: the others' next call waited out the wait
# timeout); the ring's IPC FIFOs (calls past the LL direct allreduce's 64 KiB, which
# takes buffers off their grid as they are; the direct one declines them) and net
# connections
COPYOUT_REPORT='\[gpuring rank 2\].*failed: .*this rank.s failure alone'
failure_case copyout_np3 3 4 "$COPYOUT_REPORT" "coll_gpuring_wait_timeout 10" \
    "$top/test/mpi/mismatch_check" 20 20000:1,131072:1,1048576:1 device copyout
failure_case copyout_vnodes_np3 3 4 "$COPYOUT_REPORT" \
    "coll_gpuring_wait_timeout 10 coll_gpuring_ranks_per_node 1" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:1 device copyout
# ... the copy queued and failing when the GPU runs it (mismatch_check copyrun): the wait
# for it must say so (the old wait took a failed stream for a finished one: MPI_SUCCESS,
# the receive buffer unwritten)
failure_case copyrun_np3 3 4 "$COPYOUT_REPORT" "coll_gpuring_wait_timeout 10" \
    "$top/test/mpi/mismatch_check" 20 20000:1,131072:1,1048576:1 device copyrun
# ... a copy of one rank's input into its aligned copy failing when the GPU runs it
# (mismatch_check copyin): waited for before the kernel, so that the rank gives the
# call up on every rank at once (its kernel used to send the aligned copy's old bytes:
# the peers' sums wrong, with MPI_SUCCESS)
failure_case copyin_np3 3 4 "$GAVE_UP_REPORT" "coll_gpuring_wait_timeout 60" \
    "$top/test/mpi/mismatch_check" 20 20000:1,131072:1,1048576:1 device copyin
# an MPI_Bcast from rank 0 whose last rank cannot launch its kernel (mismatch_check bcast
# nolaunch): the ranks whose part ended may return MPI_SUCCESS, but their next call
# must fail at once -- the failed rank makes no step of it, and the arrival board says
# so (they used to wait out their wait timeout); LL direct and the direct allreduce
failure_case bcast_refused_np3 3 3 \
    'waits for rank 2 of this host, whose communicator failed at an earlier call' \
    "coll_gpuring_wait_timeout 60" "$top/test/mpi/mismatch_check" 20 7:1,131072:1 device \
    bcast nolaunch
# ... the call after it the first on host buffers (host_buffers 1): the failed rank still
# makes the host plane's connections with the others (the exchanges must not part the
# ranks: only a numbered call's exchange asks the board), then refuses the call
failure_case bcast_refused_host_np3 3 3 \
    'waits for rank 2 of this host, whose communicator failed at an earlier call' \
    "coll_gpuring_wait_timeout 60 coll_gpuring_host_buffers 1" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1 device bcast laterhost nolaunch
# ... one rank's worker thread unable to make the GPU current for a non-blocking call
# (mismatch_check setdevice): it gives the call up on its connections, its peers fail
# at once (they used to wait out their wait timeout)
failure_case setdevice_np3 3 5 "$GAVE_UP_REPORT" "coll_gpuring_wait_timeout 60" \
    "$top/test/mpi/mismatch_check" 20 7:1,20000:1,131072:1,1048576:1 device iallreduce setdevice
# one rank's call on buffers of another GPU than the one its device connections were
# made on (mismatch_check othergpu, two GPUs): it cannot run the call there and
# abandons it, so that its peers fail at once and the call is numbered everywhere
failure_case othergpu_np3 3 4 "$GAVE_UP_REPORT" "coll_gpuring_wait_timeout 60" \
    -x CUDACPU_DEVICES=2 "$top/test/mpi/mismatch_check" 20 7:1,131072:1,1048576:1 device othergpu
# a rank late to a call on device buffers (timeout_check late2: 7 s, past the wait
# timeout, within coll_gpuring_arrival_timeout) is waited for, and every rank's result
# is right: the FIFO kernels' and the LL direct kernel's waits ask the arrival board
# (a rank of this host behind the call), the direct allreduce's first exchange waits
# as such (run as failure_case: exit 0, every check passed, a rank said so)
LATE_WAIT='(which has not made it yet|for a rank that has not made this collective call yet)'
failure_case late2_fifo_np3 3 6 "$LATE_WAIT" \
    "coll_gpuring_direct 0 coll_gpuring_wait_timeout 3 coll_gpuring_arrival_timeout 60" \
    "$top/test/mpi/timeout_check" 60 device,late2=7
failure_case late2_direct_ll_np3 3 6 "$LATE_WAIT" \
    "coll_gpuring_wait_timeout 3 coll_gpuring_arrival_timeout 60" \
    "$top/test/mpi/timeout_check" 60 device,small,late2=7
failure_case late2_direct_np3 3 6 "$LATE_WAIT" \
    "coll_gpuring_wait_timeout 3 coll_gpuring_arrival_timeout 60" \
    "$top/test/mpi/timeout_check" 60 device,late2=7
# the communicator's first device call made by one rank more than the wait timeout
# late (mismatch_check late): the device plane's exchanges time out on the others,
# then on it; every rank fails the call and refuses the next (no fallback: the ranks
# made different numbers of gpuring's exchanges, which pair by their order)
failure_case late_connect_np3 3 3 \
    'device connections \(device buffers\): an exchange with the other ranks failed' \
    "coll_gpuring_wait_timeout 2 coll_gpuring_host_buffers 1" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1 device late
# ... and one between one and two wait timeouts late (5 s, wait timeout 4): it
# completes the first exchange against what the others left in flight when they
# timed out; the others must post no further exchange (the late rank's next one
# then finds no one: it fails too), where they used to go on to the connection's
# exchanges, which the late rank then matched, and whose failed agreement sent it
# below (its peers having failed), to wait for them there forever
failure_case late_connect_window_np3 3 3 \
    'device connections \(device buffers\): an exchange with the other ranks failed' \
    "coll_gpuring_wait_timeout 4 coll_gpuring_host_buffers 1" \
    "$top/test/mpi/mismatch_check" 20 7:1,131072:1 device late

# an outside program written for a GPU (examples/cuda_allreduce.c), built and run
# unchanged through test/cudacpu/run: direct and FIFO paths
app=$logs/cuda_allreduce
if ! wanted cuda_app; then
    :
elif ! "$top/test/cudacpu/run" cc "$(dirname "$0")/../../examples/cuda_allreduce.c" -o "$app" \
        > "$logs/cuda_app-build.log" 2>&1; then
    echo "FAIL cuda_app: test/cudacpu/run cc failed; log $logs/cuda_app-build.log"
    bad=1
else
    for direct in 1 0; do
        log=$logs/cuda_app-direct$direct.log
        timeout -k 10 "$limit" "$top/test/cudacpu/run" mpirun --oversubscribe -np 3 \
            --mca coll_gpuring_verbose 3 --mca coll_gpuring_direct $direct "$app" 70001 \
            > "$log" 2>&1
        rc=$?
        ondev=$(grep -c 'allreduce summary: 1 calls in gpuring.* 1 on device buffers' "$log")
        if [ "$rc" -eq 0 ] && grep -q '^3 passed, 0 failed$' "$log" && [ "$ondev" -eq 3 ] &&
            [ -z "$(sanitizer_report "$log")" ]; then
            echo "PASS cuda_app (direct $direct)"
            passed=$((passed + 3))
        else
            echo "FAIL cuda_app (direct $direct): exit $rc, $ondev of 3 ranks in gpuring; log $log"
            bad=1
        fi
    done
fi
# a case CUDACPU_MPI_CASES names that does not exist (a typo in .ci/run's list) ran
# nothing: a failure, as is a run with no check passed at all
for name in $cases; do
    case "$known" in
    *" $name "*) ;;
    *) echo "FAIL $name: CUDACPU_MPI_CASES names it, and there is no such case"; bad=1 ;;
    esac
done
if [ "$passed" -eq 0 ]; then
    echo "FAIL: no check passed (no case ran?)"
    bad=1
fi
[ "$bad" = 0 ] || failed=$((failed + 1))
echo "$passed passed, $failed failed"
exit $bad
