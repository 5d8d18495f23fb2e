#!/bin/bash
# run_mpi_tests.sh -- the MPI-level test driver for coll/gpuring.
#
# Runs allreduce_check, colls_check, mix_check, fallback_check and comm_churn
# under mpirun for np = 2, 3, 4 and coll_gpuring_ranks_per_node = 0 (real
# hosts), 1 (every rank its own virtual node: all traffic over UCX) and 2
# (np 3, 4 only; at np 3 the virtual nodes are uneven), plus channel-count
# and slot-size variants and the large-count case.
#
# Environment:
#   GPURING_MCA_ARGS      mpirun arguments that load gpuring (component path,
#                         params).  Empty: plain Open MPI is tested and the
#                         gpuring-only log checks are skipped.
#   GPURING_TEST_BINDIR   where the test binaries are (default: this folder)
#   GPURING_TEST_LOGDIR   where the logs go (default: a new mktemp -d folder)
#   GPURING_TEST_TIMEOUT  seconds per mpirun (default 300); cases that set no
#                         coll_gpuring_wait_timeout get 2/5 of it, so a stalled
#                         call names what it waits for before the job is killed
#   GPURING_TEST_SEED     seed for allreduce_check / fallback_check (default 1)
#   GPURING_TEST_EXCLUDE  type:op pairs allreduce_check skips (its -x).
#                         Default: empty with gpuring; with plain Open MPI the
#                         known Open MPI 4.1.4 bugs (see KNOWN_OMPI_BUGS).
#   GPURING_CHURN_N       communicators for comm_churn (default 1000)
#   GPURING_CHURN_N_UCX   communicators for comm_churn with ranks_per_node=1
#                         (default: GPURING_CHURN_N)
#   GPURING_TEST_FILTER   run only cases whose name matches this bash regex
#                         (the sanitizer flavor runs a few this way:
#                         test/sanitize/run_sanitize_tests.sh)
#   GPURING_TEST_SKIP     skip cases whose name matches this bash regex (CI's
#                         Open MPI 5 job leaves out the transport and algorithm
#                         matrix, which the Open MPI 4 job runs: .ci/run)
#   MPIRUN                mpirun command (default mpirun)
#
# Output: `PASS name` / `FAIL name (reason, log)` per case, INFO lines, and a
# last line `N passed, N failed`.  Exit code 0 iff every case passed.  A case
# whose log holds a sanitizer report fails, whatever its exit code.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BINDIR=${GPURING_TEST_BINDIR:-$HERE}
LOGDIR=${GPURING_TEST_LOGDIR:-}
if [ -z "$LOGDIR" ]; then
    LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/gpuring-mpi-tests.XXXXXX")
fi
mkdir -p "$LOGDIR" || { echo "cannot create log dir $LOGDIR"; exit 2; }
TIMEOUT=${GPURING_TEST_TIMEOUT:-300}
WAIT=$((TIMEOUT * 2 / 5)) # coll_gpuring_wait_timeout of cases that set none
# what a call that waits for a rank late to it says (EREs): the arrival board's
# warning, naming the rank (between the two), and an MPI call's first exchange's
LATE_BOARD='call [0-9]+ has waited [0-9]+ s for rank '
LATE_BOARD_END=' of this host, which has not made it yet'
LATE_EXCHANGE='has waited [0-9]+ s for a rank that has not made this collective call yet'
# what a rank that read a peer's step of another call says (mismatch, mismatch_any)
MISMATCH_STEP='[a-z_]+ mismatch: rank [0-9]+ sent a step of another call \(channel [0-9]+ step [0-9]+: [0-9]+ bytes.*expects [0-9]+ bytes'

SEED=${GPURING_TEST_SEED:-1}
MPIRUN=${MPIRUN:-mpirun}
CHURN_N=${GPURING_CHURN_N:-1000}
CHURN_N_UCX=${GPURING_CHURN_N_UCX:-$CHURN_N}
FILTER=${GPURING_TEST_FILTER:-}
SKIP=${GPURING_TEST_SKIP:-}

# wanted NAME: whether the case runs (GPURING_TEST_FILTER, GPURING_TEST_SKIP)
wanted() {
    if [ -n "$FILTER" ] && ! [[ $1 =~ $FILTER ]]; then return 1; fi
    if [ -n "$SKIP" ] && [[ $1 =~ $SKIP ]]; then return 1; fi
    return 0
}

# Known wrong results of Open MPI 4.1.4 itself (not of gpuring): KNOWN_OMPI_BUGS
source "$HERE/known_ompi_bugs.sh"

# GPURING_MCA_ARGS split on whitespace (paths with spaces are not supported)
source "$HERE/../mca_args.sh"
source "$HERE/../sanitize/sanitizer_report.sh"
source "$HERE/../log_errors.sh"
source "$HERE/../below_check.sh"
if [ ${#USER_MCA[@]} -gt 0 ]; then ACTIVE=1; else ACTIVE=0; fi
if [ -n "${GPURING_TEST_EXCLUDE+set}" ]; then
    EXCLUDE=$GPURING_TEST_EXCLUDE
elif [ $ACTIVE = 0 ]; then
    EXCLUDE=$KNOWN_OMPI_BUGS
else
    EXCLUDE=
fi

BASE=(--oversubscribe)
[ "$(id -u)" = 0 ] && BASE+=(--allow-run-as-root)

NPASS=0
NFAIL=0
FIRST_RANK_ENV=
PARAMS_DIFFER=
PARAMS_FIRST=
PRELOAD=
PRELOAD_ENV=
FAKE_HOSTS=
FALLBACK_WHY=
EXPECT_ABORT=
EXPECT_ABORT_RC=
EXPECT_EVERY=
EXPECT_LINES=
PID_NAMESPACES=
RANK_PREFIX=
BELOW=
FAILED_NAMES=()


pass() {
    echo "PASS $1"
    NPASS=$((NPASS + 1))
    CASE_OPEN=
}
fail() {
    echo "FAIL $1 ($2, $3)"
    log_errors "$3"
    NFAIL=$((NFAIL + 1))
    FAILED_NAMES+=("$1")
    CASE_OPEN=
}
# a case run_case left with neither verdict -- bash abandons a function at an error of
# its own (a division by zero in a check, an operand that is not a number) -- fails
CASE_OPEN=
case_closed() {
    [ -z "$CASE_OPEN" ] && return
    fail "$CASE_OPEN" "the runner left the case without a verdict (an error in its checks: see above)" "$LOGDIR/$CASE_OPEN.log"
}

# run_case NAME NP RPN CHECKS "PARAM VALUE ..." BINARY ARGS...
#   CHECKS: comma list of gpuring-only log checks: ready (every world rank
#   printed a `comm ... ready:` line, ran allreduces in gpuring and handed no
#   call of any collective below, but those of the collectives in BELOW, a
#   fallback case's allreduces and colls_check's unequal reduce_scatters:
#   test/below_check.sh), fallback (some rank printed
#   `allreduce fallback:`, and no process printed one fallback line twice);
#   skipped when GPURING_MCA_ARGS is empty.
run_case() {
    local name=$1 np=$2 rpn=$3 checks=$4 params=$5
    shift 5
    local bin=$1
    shift
    wanted "$name" || return
    case_closed
    CASE_OPEN=$name
    local log="$LOGDIR/$name.log"
    if [ ! -x "$BINDIR/$bin" ]; then
        fail "$name" "binary $BINDIR/$bin missing" "$log"
        return
    fi
    local -a p
    read -r -a p <<< "$params"
    # the defaults a case's params may override; a stalled call reports what it
    # waits for (gpuring's wait timeout) before the case's timeout kills the job
    # silently -- and a call that waits for a rank that never makes it (a case's
    # skipped call) fails at the same time (coll_gpuring_arrival_timeout: as long as
    # the case's wait timeout)
    local wt=$WAIT
    [[ " $params " =~ \ coll_gpuring_wait_timeout\ ([0-9]+)\  ]] && wt=${BASH_REMATCH[1]}
    local -a d=(coll_gpuring_verbose 3 coll_gpuring_host_buffers 1
                coll_gpuring_ranks_per_node "$rpn" coll_gpuring_wait_timeout "$WAIT"
                coll_gpuring_arrival_timeout "$wt")
    local k
    for ((k = 0; k < ${#d[@]}; k += 2)); do
        [[ " $params " == *" ${d[k]} "* ]] || p+=("${d[k]}" "${d[k + 1]}")
    done
    mca_args "${p[@]}"
    # what each rank runs in front of the test program, if anything
    local -a wrap=()
    if [ -n "$FIRST_RANK_ENV" ]; then
        # rank 0 runs with one more environment variable than the others; set by a
        # wrapper, not an MPMD ':' command line (Open MPI 5.0.7's mpirun crashes on those)
        wrap=(/bin/sh -c 'if [ "${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-}}" = 0 ]; then export "$0"; fi; exec "$@"'
              "$FIRST_RANK_ENV")
    elif [ -n "$PRELOAD" ]; then
        # one more object preloaded into every rank (after any already there: a
        # sanitizer's runtime must come first), and PRELOAD_ENV (VAR=value) set
        wrap=(/bin/sh -c 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0"; export LD_PRELOAD; [ -z "$1" ] || export "$1"; shift; exec "$@"'
              "$PRELOAD" "${PRELOAD_ENV:-}")
    elif [ -n "$RANK_PREFIX" ]; then
        # a command every rank runs in front of the test program (words, no quoting)
        read -r -a wrap <<< "$RANK_PREFIX"
    elif [ -n "$PID_NAMESPACES" ]; then
        # every rank in a pid namespace of its own, as pid 1 there: equal pids on one
        # host (containers that share the host's name but not its pids)
        wrap=(unshare -p -f)
    elif [ -n "$FAKE_HOSTS" ]; then
        # every rank a host of its own: a UTS namespace with its own host name, so
        # gpuring (and UCX) see peers on other hosts -- real NET connections, UCX
        # over tcp, as between nodes -- while Open MPI still runs them on one
        wrap=(unshare -u /bin/sh -c 'echo "gpuring-host-${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-x}}" > /proc/sys/kernel/hostname && exec "$@"'
              sh)
    fi
    local -a cmd=(timeout -k 10 "$TIMEOUT" $MPIRUN "${BASE[@]}" -np "$np" "${MCA[@]}"
                  "${wrap[@]}" "$BINDIR/$bin" "$@")
    local t0=$SECONDS
    {
        echo "# ${cmd[*]}"
        "${cmd[@]}"
    } > "$log" 2>&1
    local rc=$?
    local dt=$((SECONDS - t0))
    echo "# exit $rc after ${dt}s" >> "$log"
    local last report
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    report=$(sanitizer_report "$log")
    if [ -n "$report" ]; then
        fail "$name" "sanitizer: $report" "$log"
        return
    fi
    if [ -n "$EXPECT_ABORT" ]; then
        # a case whose job must end (an abort), neither hang nor run on: a non-zero
        # exit (EXPECT_ABORT_RC where given: the abort's error code, which mpirun
        # passes on) before the case's timeout, a line matching EXPECT_ABORT, no FAIL
        # line, and from every rank a line matching EXPECT_EVERY (its @ the rank;
        # empty: any line)
        local r
        if [ $rc = 124 ] || [ $rc = 137 ]; then
            fail "$name" "timeout after ${TIMEOUT}s (the job was to end)" "$log"
        elif [ $rc = 0 ]; then
            fail "$name" "exit 0 (the job was to end with an error)" "$log"
        elif [ -n "$EXPECT_ABORT_RC" ] && [ $rc != "$EXPECT_ABORT_RC" ]; then
            fail "$name" "exit $rc (the job was to end with $EXPECT_ABORT_RC)" "$log"
        elif ! grep -qE "$EXPECT_ABORT" "$log"; then
            fail "$name" "no line matching '$EXPECT_ABORT'" "$log"
        elif grep -q '^FAIL' "$log"; then
            fail "$name" "$(grep -m 1 '^FAIL' "$log")" "$log"
        else
            for ((r = 0; r < np; r++)); do
                grep -qE "${EXPECT_EVERY//@/$r}" "$log" || break
            done
            if [ $r -lt $np ]; then
                fail "$name" "rank $r printed no line matching '$EXPECT_EVERY'" "$log"
            else
                pass "$name (${dt}s, exit $rc as it should)"
            fi
        fi
        return
    fi
    if [ $rc = 124 ] || [ $rc = 137 ]; then
        fail "$name" "timeout after ${TIMEOUT}s" "$log"
        return
    fi
    if [ $rc != 0 ]; then
        fail "$name" "exit $rc${last:+, $last}" "$log"
        return
    fi
    if [ -z "$last" ] || ! [[ $last =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
        fail "$name" "no clean 'N passed, 0 failed' line, N at least 1${last:+ ($last)}" "$log"
        return
    fi
    if [ $ACTIVE = 1 ]; then
        local c r missing
        # every_rank PATTERN: the first rank whose log has no line "[gpuring rank R]PATTERN"
        every_rank() {
            for ((r = 0; r < np; r++)); do
                grep -qE "\[gpuring rank $r\]$1" "$log" || { echo "$r"; return; }
            done
        }
        # need_every_rank PATTERN WHY: fail the case (WHY, its @ the rank) unless every
        # rank logged the line
        need_every_rank() {
            missing=$(every_rank "$1")
            [ -z "$missing" ] && return 0
            fail "$name" "${2//@/$missing}" "$log"
            return 1
        }
        for c in ${checks//,/ }; do
            case $c in
            lines)
                # every rank logged a line "[gpuring rank R]" + each of EXPECT_LINES' (one
                # regex a line; an error's or warning's level and source line first)
                local want
                while IFS= read -r want; do
                    [ -z "$want" ] && continue
                    need_every_rank "$want" "rank @ logged no line matching '$want'" || return 0
                done <<< "$EXPECT_LINES"
                ;;
            ready)
                need_every_rank " comm .* ready:" "gpuring did not run: no 'ready:' line from rank @" || return 0
                # and ran calls: the closing summary counts them
                need_every_rank " allreduce summary: [1-9][0-9]* calls in gpuring" "rank @ ran no allreduce in gpuring (summary line)" || return 0
                # ... by the algorithm the case forces, and on as many channels
                local forced
                case " $params " in
                *" coll_gpuring_algorithm ring "*) forced="ring [1-9][0-9]*, tree 0, gather 0," ;;
                *" coll_gpuring_algorithm tree "*) forced="ring 0, tree [1-9][0-9]*, gather 0," ;;
                # (the gather takes calls up to its scratch's size, the ring the rest)
                *" coll_gpuring_algorithm gather "*) forced="ring [0-9]+, tree 0, gather [1-9][0-9]*," ;;
                *) forced="" ;;
                esac
                if [ -n "$forced" ]; then
                    need_every_rank " allreduce summary: [0-9]+ calls in gpuring \\($forced" "rank @'s allreduces did not all run the forced algorithm ($forced)" || return 0
                fi
                if [[ " $params " =~ \ coll_gpuring_nchannels\ ([0-9]+)\  ]]; then
                    need_every_rank " comm [^:]+ ready: .*, ${BASH_REMATCH[1]} host channels," "rank @'s communicators have not the ${BASH_REMATCH[1]} host channels asked for" || return 0
                fi
                # and handed none below but where the case says (BELOW: collectives
                # that may; a fallback case's allreduce; colls_check's unequal
                # reduce_scatters)
                local below allow=$BELOW
                [[ ,$checks, == *,fallback,* ]] && allow+=" allreduce"
                below=$(below_check "$log" "$np" "$allow")
                if [ -n "$below" ]; then
                    fail "$name" "$below" "$log"
                    return
                fi
                # the call profile is off unless asked for
                if [[ " $params " != *" coll_gpuring_profile 1 "* ]] && grep -q "\] profile of " "$log"; then
                    fail "$name" "a profile line without coll_gpuring_profile" "$log"
                    return
                fi
                ;;
            profile)
                # every rank timed its blocking calls on host buffers at the host path's
                # points, in the order a call passes them (a count-0 call plans nothing)
                local n='[0-9]+\.[0-9]{2}( \([0-9]+\))?'
                need_every_rank " profile of [1-9][0-9]* blocking calls on host buffers \(the last [0-9]+\): median us at each point \(calls that passed it, where not all\): memkind $n device $n plan $n run $n return $n\$" "rank @ printed no host profile with the points memkind, device, plan, run, return" || return 0
                ;;
            fallback)
                if ! grep -q "allreduce fallback:" "$log"; then
                    fail "$name" "no 'allreduce fallback:' line" "$log"
                    return
                fi
                # FALLBACK_WHY (a regex): every rank gave that reason
                if [ -n "$FALLBACK_WHY" ]; then
                    need_every_rank " allreduce fallback: ($FALLBACK_WHY)" "rank @ gave no fallback reason matching '$FALLBACK_WHY'" || return 0
                fi
                # at verbose 3 a process logs each distinct reason once, however many
                # calls it hands below (the lines carry the process's host:pid)
                local again
                again=$(grep -E '^\[[^]]*\] \[gpuring rank [0-9]+\] [a-z_]+ fallback: ' "$log" |
                    sort | uniq -d | head -n 1)
                if [ -n "$again" ]; then
                    fail "$name" "a fallback line logged more than once by one process: $again" "$log"
                    return
                fi
                ;;
            timeout)
                # the report names what was waited for: channel, step, peer rank (the
                # first waiting rank to time out reports it; it abandons the call, so
                # the others may fail at once as told, not time out themselves)
                if ! grep -qE "\[gpuring rank [0-9]+\].*timed out after .* waits for step [0-9]+ from rank [0-9]+" "$log"; then
                    fail "$name" "no timeout report naming step and peer" "$log"
                    return
                fi
                ;;
            latewait)
                # every rank but the last, which came late to a call, waited for it,
                # saying so (the arrival board: a rank of its host behind the call; or
                # the call's first exchange)
                for ((r = 0; r < np - 1; r++)); do
                    if ! grep -qE "\[gpuring rank $r\].* ($LATE_BOARD$((np - 1))$LATE_BOARD_END|$LATE_EXCHANGE)" "$log"; then
                        fail "$name" "rank $r did not say it waited for late rank $((np - 1))" "$log"
                        return
                    fi
                done
                ;;
            mismatch)
                # a rank names the peer whose step was of another call, with both sizes
                if ! grep -qE "\[gpuring rank [0-9]+\].*$MISMATCH_STEP" "$log"; then
                    fail "$name" "no mismatch report naming peer, channel, step and sizes" "$log"
                    return
                fi
                ;;
            mismatch_any)
                # as mismatch, or the arrival board's report naming the peer: where five
                # ranks share two cores, a rank idle long enough looks at the board first
                if ! grep -qE "\[gpuring rank [0-9]+\].*($MISMATCH_STEP|call [0-9]+ mismatch: rank [0-9]+ makes another call than this rank \(this host's arrival board)" "$log"; then
                    fail "$name" "no mismatch report naming the peer" "$log"
                    return
                fi
                ;;
            netfail)
                # the rank whose UCX sends failed names the connection: peer, channel
                if ! grep -qE "\[gpuring rank [0-9]+\].*aborted: net (credit )?send to rank [0-9]+ channel [0-9]+ step [0-9]+ failed: " "$log"; then
                    fail "$name" "no report of the failed net send naming peer and channel" "$log"
                    return
                fi
                ;;
            gaveup)
                # a rank names the peer that gave up on the call before it started
                if ! grep -qE "\[gpuring rank [0-9]+\].*[a-z_]+ abandoned: rank [0-9]+ gave up on the call" "$log"; then
                    fail "$name" "no report of a rank that gave up on the call" "$log"
                    return
                fi
                ;;
            refused)
                # a rank that waited for a slot was told its receiver gave up on the call
                if ! grep -qE "\[gpuring rank [0-9]+\].*allreduce abandoned: rank [0-9]+ gave up on the call .* reads no more of this rank's steps; channel [0-9]+, waiting to send step [0-9]+" "$log"; then
                    fail "$name" "no report of a receiver that refused the call" "$log"
                    return
                fi
                ;;
            setuptimeout)
                # every rank that waited names the setup exchange that timed out (which
                # one: "of the peer info", ...), and the rank it waited for (the last)
                missing=$(every_rank ".*setup (exchange|agreement) (of|that) [a-zA-Z' ]+ \(an allgather of .* timed out after [0-9]+ s: rank $((np - 1)) has not sent its part")
                if [ "$missing" != "$((np - 1))" ]; then
                    fail "$name" "rank ${missing:-?} reported no setup timeout (the last rank never calls)" "$log"
                    return
                fi
                ;;
            setuphint)
                # every rank whose non-blocking call made the timed-out setup says what
                # may have held it up and what to do
                missing=$(every_rank ".*setup was made by a non-blocking call .*coll_gpuring_nonblocking_setup=0")
                if [ "$missing" != "$((np - 1))" ]; then
                    fail "$name" "rank ${missing:-?} gave no non-blocking setup hint" "$log"
                    return
                fi
                ;;
            stream1000)
                # every rank took coll_gpuring_stream_size (the outputs it streams)
                need_every_rank " host connections ready: .* outputs of 1000 B and more written around the cache" "rank @ does not stream outputs from 1000 B" || return 0
                ;;
            netstream1)
                # every rank took coll_gpuring_net_stream_size 1 (every net step is
                # written into its send slot around the cache)
                need_every_rank " host connections ready: .* and net steps of 1 B and more" "rank @ does not stream every net step" || return 0
                ;;
            rndv65537|rndvucx)
                # gpuring's UCX context took the rendezvous threshold for one host
                # (coll_gpuring_net_rndv_size -1), or left UCX's (0)
                local rv="rendezvous from 65537 B"
                [ "$c" = rndvucx ] && rv="UCX's own rendezvous threshold"
                need_every_rank " gpuring's UCX context: $rv" "rank @: not '$rv'" || return 0
                ;;
            rndvtcp)
                # ranks on hosts of their own: gpuring's UCX context sends every step
                # eager where tcp is UCX's only network transport (ucx_info -d, the
                # reference), else leaves UCX its own threshold; every edge a NET one
                local rv="UCX's own rendezvous threshold"
                if ucx_info -d 2>/dev/null | awk '/Transport:/ { tl = $NF } /Type: network/ { n++; if (tl != "tcp") o++ } END { exit !(n > 0 && o == 0) }'; then
                    rv="rendezvous from inf B \\(never: tcp is the only network transport here\\)"
                fi
                need_every_rank " gpuring's UCX context: $rv" "rank @: not '$rv'" || return 0
                need_every_rank " comm MPI_COMM_WORLD ready: $np ranks, $np nodes" "rank @ did not see $np hosts" || return 0
                ;;
            zcopy|nozcopy)
                # every rank's net steps landed straight in the output (zero copy:
                # coll_gpuring_net_zcopy), or none did (turned off)
                local zc="[1-9][0-9]*"
                [ "$c" = nozcopy ] && zc=0
                need_every_rank " net connections closing: .* $zc of them straight into the output" "rank @: net steps in the output not $zc (closing line)" || return 0
                ;;
            zcopysome)
                # the tree: its broadcast half lands in the output on the ranks that
                # receive it from another (virtual) node
                if ! grep -qE "\[gpuring rank [0-9]+\] net connections closing: .* [1-9][0-9]* of them straight into the output" "$log"; then
                    fail "$name" "no rank landed a net step straight in the output" "$log"
                    return
                fi
                ;;
            tree)
                # the tree really ran: its connections came up on every rank
                need_every_rank " tree connections ready" "rank @ did not connect its trees" || return 0
                ;;
            colls)
                # every rank ran reduce-scatter, allgather, bcast and reduce in gpuring
                local k
                for k in reduce_scatter allgather bcast reduce; do
                    need_every_rank " $k summary: [1-9][0-9]* calls in gpuring" "rank @ ran no $k in gpuring (summary line)" || return 0
                done
                # gave the reason for the fallback colls_check provokes (unequal counts)
                if ! grep -qE "\[gpuring rank 0\] reduce_scatter fallback: the ranks' counts differ" "$log"; then
                    fail "$name" "no 'reduce_scatter fallback: the ranks' counts differ' line from rank 0" "$log"
                    return
                fi
                # and ran every allgather and bcast, whatever each rank's datatype
                for k in allgather bcast; do
                    need_every_rank " $k summary: [1-9][0-9]* calls in gpuring .*, 0 handed to the component below" "rank @ handed some $k below (summary line)" || return 0
                done
                ;;
            nopack)
                # with host buffers off (coll_gpuring_host_buffers 0), every rank handed
                # allgather and bcast below on them and, at verbose 4, packed none of
                # their datatypes' elements first (the component below takes them as
                # they are)
                local k
                for k in allgather bcast; do
                    need_every_rank " $k summary: 0 calls in gpuring" "rank @ ran some $k in gpuring (summary line)" || return 0
                    need_every_rank " $k fallback: host buffers" "rank @ gave no '$k fallback: host buffers' line" || return 0
                done
                if grep -q "packed into" "$log"; then
                    fail "$name" "a rank packed a datatype's elements for a call that went below: $(grep -m 1 'packed into' "$log")" "$log"
                    return
                fi
                ;;
            treecolls|ringcolls|autocolls)
                # every rank ran bcast and reduce on the tree only, the chain only, or both
                local k want
                case $c in
                treecolls) want="ring 0, tree [1-9][0-9]*\\)" ;;
                ringcolls) want="ring [1-9][0-9]*, tree 0\\)" ;;
                autocolls) want="ring [1-9][0-9]*, tree [1-9][0-9]*\\)" ;;
                esac
                for k in bcast reduce; do
                    need_every_rank " $k summary: .*; $want" "rank @'s $k summary does not match '$want'" || return 0
                done
                ;;
            allcolls)
                # every rank ran each of the five collectives in gpuring, none handed below
                local k
                for k in allreduce reduce_scatter allgather bcast reduce; do
                    need_every_rank " $k summary: [1-9][0-9]* calls in gpuring .*, 0 handed to the component below" "rank @ ran no $k in gpuring or handed some below (summary line)" || return 0
                done
                ;;
            allcalls)
                # every rank ran every allreduce in gpuring: none handed below, and at
                # least as many in gpuring as the program made on communicators of 2+
                # ranks (a dup or split communicator gpuring left to the component below
                # would hand nothing below, and its calls would be missing here)
                need_every_rank " allreduce summary: [1-9][0-9]* calls in gpuring .*, 0 handed to the component below" "rank @ handed calls to the component below" || return 0
                local r made ran
                for ((r = 0; r < np; r++)); do
                    made=$(sed -nE "s/^[a-z_]+ rank $r: ([0-9]+) allreduce calls on communicators of 2 or more ranks$/\1/p" "$log" | tail -n 1)
                    ran=$(sed -nE "s/.*\[gpuring rank $r\] allreduce summary: ([0-9]+) calls in gpuring.*/\1/p" "$log" | tail -n 1)
                    if [ -z "$made" ] || [ "${ran:-0}" -lt "$made" ]; then
                        fail "$name" "rank $r: ${ran:-no} allreduce calls in gpuring, the program made ${made:-an unknown number of} them" "$log"
                        return
                    fi
                done
                ;;
            staged)
                # every rank staged device buffers, and rank 0 every collective in STAGED_ALL
                need_every_rank " device buffers staged through host memory" "rank @ staged no device buffer" || return 0
                local coll line
                line=$(grep -E "\[gpuring rank 0\] device buffers staged" "$log")
                for coll in $STAGED_ALL; do
                    if ! [[ $line =~ $coll\ [1-9] ]]; then
                        fail "$name" "rank 0 staged no $coll" "$log"
                        return
                    fi
                done
                ;;
            legacywait)
                # the last rank's staging copy waited for the work on its default stream
                # (device_coll_check -W: 2.5 s, past the 1 s wait timeout) and said so
                if ! grep -qE "\[gpuring rank $((np - 1))\] warn .* waits for the work queued before it on the CUDA default stream .* not done after [0-9]+ s: waiting on" "$log"; then
                    fail "$name" "rank $((np - 1)) did not say its staging copy waited for its default stream" "$log"
                    return
                fi
                ;;
            rows)
                # every rank copied staged results back block by block (device_coll_check's
                # vector types have holes), and its matrix column in as a root (a sparse
                # span), a vector's blocks as rows of 2D copies: at least 8 blocks a copy
                # (one copy each: 25-2000 times more copies)
                local r blocks copies way
                for way in "results copied back" "inputs copied in"; do
                    need_every_rank " staged $way block by block" "rank @: no staged $way block by block" || return 0
                    for ((r = 0; r < np; r++)); do
                        read -r blocks copies < <(sed -nE "s/.*\[gpuring rank $r\] staged $way block by block .*: ([0-9]+) blocks in ([0-9]+) copies$/\1 \2/p" "$log" | tail -n 1)
                        if ! [[ $blocks =~ ^[0-9]+$ && $copies =~ ^[1-9][0-9]*$ ]] ||
                            [ $((blocks / copies)) -lt 8 ]; then
                            fail "$name" "rank $r: staged $way: $blocks blocks in $copies copies (a 2D copy per vector expected)" "$log"
                            return
                        fi
                    done
                done
                ;;
            setupfail)
                # one rank's failure must make every rank fall back, the others naming it
                # (the first rank of the case's environment, or graphnomem's rank 1)
                need_every_rank ".*gpuring setup failed" "rank @ did not report the failed setup" || return 0
                local bad=0 r
                [[ ",$checks," == *,graphnomem,* ]] && bad=1
                for ((r = 0; r < np; r++)); do
                    [ "$r" -eq "$bad" ] && continue
                    if ! grep -qE "\[gpuring rank $r\] warn [^ ]+: comm MPI_COMM_WORLD: gpuring setup failed \(failure on rank $bad, whose log says why\)" "$log"; then
                        fail "$name" "rank $r did not name rank $bad as the one whose setup failed" "$log"
                        return
                    fi
                done
                ;;
            unwaited)
                # every rank said which communicators MPI_Finalize found kept alive by
                # calls never waited for (and still ended cleanly: exit 0, checked above)
                # (rank 0: 2, the communicator the application never freed, on which its
                # lone call ran, too)
                need_every_rank " warn [^ ]+: MPI_Finalize with (1 communicator|2 communicators) kept alive by non-blocking calls never completed" "rank @ did not report the calls never waited for" || return 0
                if ! grep -qE "\[gpuring rank 0\] warn [^ ]+: MPI_Finalize with 2 communicators kept alive" "$log"; then
                    fail "$name" "rank 0 did not count 2 communicators kept alive" "$log"
                    return
                fi
                # and rank 0 its lone calls on the communicators MPI_Finalize destroyed
                # under them, by the names they had (read before they went), and on the
                # one it released as the application's (the request's reference left)
                for c in unwaited_kept unwaited_freed unwaited_held; do
                    if ! grep -qE "\[gpuring rank 0\] error [^ ]+: non-blocking allreduce of 4096 int32 on host buffers on comm $c \(rank 0\) failed" "$log"; then
                        fail "$name" "rank 0 did not report its lone call on $c" "$log"
                        return
                    fi
                done
                ;;
            setupleft)
                # the last rank, without memory for its part of a setup exchange, left them
                if ! grep -qE "\[gpuring rank $((np - 1))\] error [^ ]+: allocating .* failed \(out of memory\), so this rank \($((np - 1)) of the communicator's $np\) leaves gpuring's exchanges with the others" "$log"; then
                    fail "$name" "rank $((np - 1)) did not report leaving the setup's exchanges" "$log"
                    return
                fi
                ;;
            graphnomem)
                # rank 1 had no memory for its graph, and said so
                if ! grep -qE "\[gpuring rank 1\] error [^ ]+: cannot build this rank's graph of the communicator's nodes: out of memory" "$log"; then
                    fail "$name" "rank 1 did not report the graph it had no memory for" "$log"
                    return
                fi
                ;;
            exchangenomem)
                # the last rank had no memory for its part of a setup exchange, said so,
                # and left the setup
                if ! grep -qE "\[gpuring rank $((np - 1))\] error [^ ]+: comm [^:]+: no memory for gpuring's exchange \(4 bytes per rank\): this rank cannot make its part" "$log" ||
                   ! grep -qE "\[gpuring rank $((np - 1))\] error [^ ]+: comm [^:]+: gpuring setup failed on this rank, logged above" "$log"; then
                    fail "$name" "rank $((np - 1)) did not report the exchange it had no memory for, and leaving the setup" "$log"
                    return
                fi
                ;;
            paramsdiffer)
                # rank 0 (given another PARAMS_DIFFER than the others) warns, naming rank 1
                # and the parameter; rank 1 says what it has
                if ! grep -qE "\[gpuring rank 0\] warn [^ ]+: comm MPI_COMM_WORLD: the ranks' coll_gpuring parameters differ: coll_gpuring_$PARAMS_DIFFER is .* on rank 1 of the communicator, .* on this rank \\(its rank 0\\); $((np - 1)) of its $np ranks differ from rank 0" "$log"; then
                    fail "$name" "no warning from rank 0 naming rank 1's coll_gpuring_$PARAMS_DIFFER" "$log"
                    return
                fi
                if ! grep -qE "\[gpuring rank 1\] comm MPI_COMM_WORLD: this rank \(1 of the communicator\) has coll_gpuring_$PARAMS_DIFFER .*, unlike its rank 0" "$log"; then
                    fail "$name" "rank 1 did not say its coll_gpuring_$PARAMS_DIFFER differs" "$log"
                    return
                fi
                # PARAMS_FIRST: the first collective, which every rank handed below for
                # that reason -- but a rank whose call went below whatever the answer
                # (rank 0's host buffers with coll_gpuring_host_buffers 0), which does
                # not wait for it
                if [ -n "$PARAMS_FIRST" ]; then
                    need_every_rank " $PARAMS_FIRST fallback: (comm MPI_COMM_WORLD's ranks have different coll_gpuring parameters|host buffers)" "rank @ did not hand its first $PARAMS_FIRST below for the parameters" || return 0
                    if ! grep -qE "\[gpuring rank 1\] $PARAMS_FIRST fallback: comm MPI_COMM_WORLD's ranks have different coll_gpuring parameters" "$log"; then
                        fail "$name" "rank 1 did not hand its first $PARAMS_FIRST below for the parameters" "$log"
                        return
                    fi
                fi
                ;;
            esac
        done
        local fb
        fb=$(grep -o 'allreduce fallback: .*' "$log" | sort | uniq -c | sort -rn | head -n 5)
        if [ -n "$fb" ] && [[ $checks != *fallback* ]]; then
            echo "INFO $name: fallbacks seen:"
            echo "$fb" | sed 's/^/INFO     /'
        fi
        local nerr
        # (a `lines` case's expected lines are not counted, nor a `latewait` case's
        # warnings that it waits for the late rank)
        nerr=$(grep -iE '\[gpuring rank [0-9]+\].*(error|warn)' "$log" |
            { if [[ $checks == *lines* ]]; then grep -vE -e "$EXPECT_LINES"
              elif [[ $checks == *latewait* ]]; then grep -vE "$LATE_BOARD[0-9]+$LATE_BOARD_END|$LATE_EXCHANGE"
              else cat; fi; } |
            grep -c .)
        if [[ $checks == *ready* && $checks != *timeout* && $checks != *mismatch* && $checks != *gaveup* && $checks != *exchangenomem* && $checks != *unwaited* && $nerr != 0 ]]; then
            # a healthy run logs no gpuring warning: a fallback would hide a bug
            fail "$name" "$nerr gpuring error/warn lines" "$log"
            return
        fi
        [ "$nerr" != 0 ] && echo "INFO $name: $nerr gpuring error/warn lines in log"
    fi
    pass "$name (${dt}s, $last)"
}

echo "# gpuring MPI tests: bindir $BINDIR, logs $LOGDIR, timeout ${TIMEOUT}s"
if [ $ACTIVE = 1 ]; then
    echo "# GPURING_MCA_ARGS: ${GPURING_MCA_ARGS}"
else
    echo "# GPURING_MCA_ARGS is empty: testing plain Open MPI, gpuring log checks skipped"
fi
[ -n "$EXCLUDE" ] && echo "# allreduce_check excludes: $EXCLUDE"
T_START=$SECONDS

XARG=()
[ -n "$EXCLUDE" ] && XARG=(-x "$EXCLUDE")
# how long a call stuck on a peer (gone, or never making it) may take to fail, with a
# wait timeout of 3 s: its timeout and room for a loaded machine -- not the 30-60 s
# that let a call taking ten times its timeout pass
STUCK_LIMIT=15
FULL=(-t all,fortran -o all -i -Z -m world,dup,split -s "$SEED" -q "${XARG[@]}")
REDUCED=(-t int8,uint8,int16,uint16,int32,uint32,int64,uint64,float,double -o all -i -Z -m world,dup,split -s "$SEED" -q "${XARG[@]}")
MEDIUM=(-t int8,uint16,int32,int64,float,double -o sum,prod,max,bxor,land -i -m world,rev -s "$SEED" -q "${XARG[@]}")
LARGE=(-t float,int32 -o sum -c 1 -L -i -m world -s "$SEED" -q "${XARG[@]}")

# --- allreduce_check: full type x op matrix at np 3 (shm), reduced elsewhere
# (every MPI type once, on shm -- Fortran's too: INTEGER, REAL, DOUBLE PRECISION,
# LOGICAL, went below; the UCX paths with each gpuring type once: the MPI aliases
# differ only in the entry's type mapping)
run_case "allreduce_full_np3_rpn0" 3 0 ready "" allreduce_check "${FULL[@]}"
# fp16 by name where Open MPI 5 has it (MPIX_C_FLOAT16): -t all takes it only where
# allreduce_check was built with it, and names it here, so that a build without it
# fails ("unknown type") instead of leaving it out
if ! $MPIRUN --version 2>/dev/null | grep -q "(Open MPI) 4\."; then
    run_case "allreduce_float16_np3_rpn1" 3 1 ready "" allreduce_check -t float16 -o all -i \
        -m world,split -s "$SEED" -q "${XARG[@]}"
fi
for rpn in 1 2; do
    run_case "allreduce_reduced_np3_rpn$rpn" 3 $rpn ready "" allreduce_check "${REDUCED[@]}"
done
for rpn in 0 1; do
    run_case "allreduce_reduced_np2_rpn$rpn" 2 $rpn ready "" allreduce_check "${REDUCED[@]}"
done
for rpn in 0 1 2; do
    run_case "allreduce_reduced_np4_rpn$rpn" 4 $rpn ready "" allreduce_check "${REDUCED[@]}"
done

# --- large count (16777219 elements, float and int32 sum)
run_case "allreduce_large_np2_rpn0" 2 0 ready "" allreduce_check "${LARGE[@]}"
# (zero copy: receive buffers placed on a page -- a step lands in the output only
# where UCX's copy into it runs fast, kernels/reduce.h and test_net_ring, and
# allreduce_check's guard elements put them a few bytes on from where malloc does)
run_case "allreduce_large_np4_rpn2" 4 2 ready,zcopy "" allreduce_check "${LARGE[@]}" -a 0
run_case "allreduce_large_nozcopy_np3_rpn1" 3 1 ready,nozcopy "coll_gpuring_net_zcopy 0" \
    allreduce_check "${LARGE[@]}"

# --- channels, small slots (many pipeline steps, slot wrap-around), algorithm
run_case "allreduce_nch1_np4_rpn2" 4 2 ready "coll_gpuring_nchannels 1" allreduce_check "${MEDIUM[@]}"
run_case "allreduce_nch3_np4_rpn2" 4 2 ready "coll_gpuring_nchannels 3" allreduce_check "${MEDIUM[@]}"
run_case "allreduce_slot4k_np4_rpn2" 4 2 ready "coll_gpuring_slot_size 4096" allreduce_check "${MEDIUM[@]}"
run_case "allreduce_slot4k_nch3_np3_rpn2" 3 2 ready "coll_gpuring_slot_size 4096 coll_gpuring_nchannels 3" \
    allreduce_check "${MEDIUM[@]}"
run_case "allreduce_slot4k_np2_rpn1" 2 1 ready "coll_gpuring_slot_size 4096" allreduce_check "${MEDIUM[@]}"
run_case "allreduce_slot100_np3_rpn0" 3 0 ready "coll_gpuring_slot_size 100" allreduce_check "${MEDIUM[@]}"
# a slot size past the 64 MiB limit (2^61: 8 slots of it wrapped the FIFO's size):
# gpuring disabled on every rank, every call below, results right (no 8/16-bit
# sums: Open MPI 4.1.4's op/avx saturates them); the old code segfaulted.  Each call
# that goes below then says so at verbose 3 (once; every call at 4), as every other
# fallback does
EXPECT_LINES=".* comm MPI_COMM_WORLD: coll_gpuring_slot_size is 2305843009213693952, not 0 or 64 B to 64 MiB: gpuring disabled
.* allreduce fallback: comm MPI_COMM_WORLD: gpuring's setup left it to the component below" \
    run_case "allreduce_slot_huge_np3_rpn0" 3 0 lines "coll_gpuring_slot_size 2305843009213693952" \
    allreduce_check -t int32,double -o sum,max -c 0,1,17,4099,1048576 -i -m world,dup -s "$SEED" -q
# agreed parameters out of their documented ranges: every rank says which, disables
# gpuring alike, every call below, results right
EXPECT_LINES=".* comm MPI_COMM_WORLD: coll_gpuring_channels_per_call is -1, not 0 or more: gpuring disabled
.* comm MPI_COMM_WORLD: coll_gpuring_ranks_per_node is -2, not 0 or more: gpuring disabled
.* comm MPI_COMM_WORLD: coll_gpuring_direct_ll_size is 2000000, not 0-1048576: gpuring disabled" \
    run_case "params_agreed_range_np3_rpn0" 3 0 lines \
    "coll_gpuring_channels_per_call -1 coll_gpuring_ranks_per_node -2 coll_gpuring_direct_ll_size 2000000" \
    allreduce_check -t int32,double -o sum,max -c 0,1,17,4099 -m world,dup -s "$SEED" -q
# each rank's own parameters out of their ranges: every rank says which and takes the
# default (a wait without a bound, a UCX threshold, a staging choice or IPC cache it did
# not ask for would be no better), and gpuring runs on virtual nodes
EXPECT_LINES=".* coll_gpuring_wait_timeout is -5, not 0 \(no bound\) or seconds: 300 \(its default\) used instead
.* coll_gpuring_net_rndv_size is -9, not -1 \(by where the ranks are\), 0 \(UCX's\) or bytes: -1 \(its default\) used instead
.* coll_gpuring_stage_device_buffers is 7, not -1, 0 or 1: -1 \(its default\) used instead
.* coll_gpuring_ipc_cache is 100, not 0-64: 64 \(its default\) used instead
.* coll_gpuring_arrival_timeout is -3, not 0 \(no bound\) or seconds: 3600 \(its default\) used instead
.* coll_gpuring_verbose_subsys: 'nonsense' is no subsystem .*: ignored" \
    run_case "params_own_range_np3_rpn1" 3 1 ready,rndv65537,lines \
    "coll_gpuring_wait_timeout -5 coll_gpuring_arrival_timeout -3 coll_gpuring_net_rndv_size -9 coll_gpuring_stage_device_buffers 7 coll_gpuring_ipc_cache 100 coll_gpuring_verbose_subsys init,coll,net,nonsense" \
    allreduce_check -t int32,double -o sum,max -c 0,1,17,4099,300000 -m world,dup -s "$SEED" -q
# a misspelt subsystem in verbose_subsys: no info line prints, but the warning does
# (warnings pass whatever the subsystems; it used to be silenced with the rest)
EXPECT_LINES=".* coll_gpuring_verbose_subsys: 'tunning' is no subsystem .*: ignored" \
    run_case "verbose_subsys_typo_np2_rpn0" 2 0 lines "coll_gpuring_verbose_subsys tunning" \
    allreduce_check -t int32 -o sum -c 1,17 -m world -s "$SEED" -q
# outputs written around the cache (non-temporal stores) from 1000 B on: odd heads and
# tails of every step, on shm and UCX connections (by default only calls too large for
# the host's cache stream, which these tests' sizes may never reach)
run_case "allreduce_stream_np3_rpn0" 3 0 ready,stream1000 "coll_gpuring_stream_size 1000" allreduce_check "${MEDIUM[@]}"
run_case "allreduce_stream_np4_rpn2" 4 2 ready,stream1000 "coll_gpuring_stream_size 1000" allreduce_check "${MEDIUM[@]}"
# buffers off their element grid (allreduce_check -A, colls_check -A: rank r's input r % 4
# bytes off, its output (r + 1) % 4), with outputs streamed: shm and UCX connections
run_case "allreduce_misaligned_np4_rpn2" 4 2 ready,stream1000 "coll_gpuring_stream_size 1000" \
    allreduce_check -A "${MEDIUM[@]}"
run_case "colls_misaligned_np3_rpn1" 3 1 ready,colls "" colls_check -A -s "$SEED" -q
# every net step written into its send slot around the cache (by default only steps of
# 64 KiB and more): odd heads and tails, each operation of the ring (send, reduce and
# send, reduce into the output and send, copy and send), with streamed outputs too, the
# tree (a step sent to several peers) and the gather programs (stash and fold)
run_case "allreduce_netstream_np3_rpn1" 3 1 ready,netstream1 "coll_gpuring_net_stream_size 1" \
    allreduce_check "${MEDIUM[@]}"
run_case "allreduce_netstream_stream_np4_rpn2" 4 2 ready,netstream1,stream1000 \
    "coll_gpuring_net_stream_size 1 coll_gpuring_stream_size 1000" allreduce_check "${MEDIUM[@]}"
run_case "tree_netstream_np5_rpn1" 5 1 ready,tree,netstream1 \
    "coll_gpuring_algorithm tree coll_gpuring_net_stream_size 1" allreduce_check "${MEDIUM[@]}"
run_case "allreduce_gather_netstream_np3_rpn1" 3 1 ready,netstream1 \
    "coll_gpuring_algorithm gather coll_gpuring_net_stream_size 1" allreduce_check "${MEDIUM[@]}"
# gpuring's UCX context on one host: steps up to 64 KiB eager, larger ones by
# rendezvous (coll_gpuring_net_rndv_size -1, the default), or UCX's own threshold
# (0); calls whose steps fall on both sides of it
RNDV=(-t int8,int32,float,double -o sum,max -i -m world,rev -c 1,4099,65537,262147,300001,1048583 -s "$SEED" -q "${XARG[@]}")
run_case "allreduce_rndv_np3_rpn1" 3 1 ready,rndv65537 "" allreduce_check "${RNDV[@]}"
run_case "allreduce_rndvucx_np2_rpn1" 2 1 ready,rndvucx "coll_gpuring_net_rndv_size 0" \
    allreduce_check "${RNDV[@]}"
# ranks on hosts of their own (FAKE_HOSTS: UTS namespaces), so UCX runs them over tcp
# as between nodes, with peer failure detection: every step eager where tcp is the
# only network transport
FAKE_HOSTS=1 run_case "allreduce_hosts_np3_rpn0" 3 0 ready,rndvtcp "" allreduce_check "${RNDV[@]}"
# every rank as pid 1 of a pid namespace of its own, on one host (containers that share
# the host's name but not its pids): gpuring tells the processes apart by a random name,
# not host and pid -- each peer gets its own UCX endpoint (virtual nodes), results right
# and no teardown waits (Open MPI's own shared memory names its segments by pid: btl
# tcp here)
PID_NAMESPACES=1 run_case "pidns_np3_rpn1" 3 1 ready "btl self,tcp" \
    allreduce_check -t int32,float -o sum,max -c 1,17,4099,300000 -m world,dup -s "$SEED" -q
run_case "allreduce_ring_np3_rpn0" 3 0 ready "coll_gpuring_algorithm ring" allreduce_check "${MEDIUM[@]}"
# (its non-blocking calls go below: a non-blocking call cannot agree on the memory)
BELOW=allreduce run_case "allreduce_agree_memory_np3_rpn1" 3 1 ready "coll_gpuring_agree_memory 1" \
    allreduce_check "${MEDIUM[@]}"
# coll_gpuring_profile: where each call's time goes, every rank's line at finalize
run_case "allreduce_profile_np3_rpn1" 3 1 ready,profile "coll_gpuring_profile 1" \
    allreduce_check "${MEDIUM[@]}"
# a negative count that MPI's own check (turned off) does not catch: MPI_ERR_COUNT
if [ $ACTIVE = 1 ]; then
    run_case "allreduce_negative_count_np3_rpn1" 3 1 "" "mpi_param_check 0" \
        allreduce_check -N -t int32 -o sum -c 1,7 -m world,dup -s "$SEED" -q
fi

# --- tree and ring forced, 2-6 ranks on 1-3 (virtual) nodes, uneven ones too
run_case "tree_reduced_np3_rpn2" 3 2 ready,tree "coll_gpuring_algorithm tree" allreduce_check "${REDUCED[@]}"
run_case "tree_np2_rpn0" 2 0 ready,tree "coll_gpuring_algorithm tree" allreduce_check "${MEDIUM[@]}"
run_case "tree_np4_rpn2" 4 2 ready,tree "coll_gpuring_algorithm tree" allreduce_check "${REDUCED[@]}"
run_case "tree_np5_rpn2_slot4k_nch4" 5 2 ready,tree \
    "coll_gpuring_algorithm tree coll_gpuring_slot_size 4096 coll_gpuring_nchannels 4" \
    allreduce_check "${MEDIUM[@]}"
run_case "tree_np6_rpn2" 6 2 ready,tree "coll_gpuring_algorithm tree" allreduce_check "${MEDIUM[@]}"
run_case "tree_np6_rpn4" 6 4 ready,tree "coll_gpuring_algorithm tree" allreduce_check "${MEDIUM[@]}"
run_case "tree_large_np4_rpn2" 4 2 ready,tree,zcopysome "coll_gpuring_algorithm tree" allreduce_check "${LARGE[@]}" -a 0
run_case "ring_np5_rpn2" 5 2 ready "coll_gpuring_algorithm ring" allreduce_check "${MEDIUM[@]}"
run_case "ring_np6_rpn3" 6 3 ready "coll_gpuring_algorithm ring" allreduce_check "${MEDIUM[@]}"
# topology-aware rings: 8 ranks as two virtual DGX-like nodes (test/fixtures)
run_case "topo_dgx_np8_rpn4" 8 4 ready,tree \
    "coll_gpuring_topo_xml $HERE/../fixtures/dgx_like.xml coll_gpuring_algorithm tree" \
    allreduce_check -t int32,float,double -o sum,max -i -m world,rev -s "$SEED" -q "${XARG[@]}"
run_case "allreduce_gather_np4_rpn1" 4 1 ready "coll_gpuring_algorithm gather" allreduce_check "${MEDIUM[@]}"
# a rank bound to a package of several NUMA nodes has a place: its package (hwloc reads
# test/fixtures/package_2numa.xml as this machine -- one package, a NUMA node per CPU
# 0 and 1, a NIC hanging from NUMA node 1's group -- and each rank is bound to both
# CPUs): the two ranks' edge is PHB (3), not SYS (4) as when such a rank had no place
PACKAGE_2NUMA="taskset -c 0-1 env HWLOC_XMLFILE=$HERE/../fixtures/package_2numa.xml HWLOC_THISSYSTEM=1"
EXPECT_LINES=" debug gpuring_comm.c:[0-9]+: this rank.s place in its node: NUMA node -1, package 0, NIC 0, GPU none current
 debug ring_order.c:[0-9]+: ring order: 2 ranks, worst edge class 3," \
RANK_PREFIX="$PACKAGE_2NUMA" \
    run_case "package_place_np2_rpn0" 2 0 ready,lines \
    "coll_gpuring_verbose 4 coll_gpuring_verbose_subsys init,coll,graph" \
    allreduce_check -t int32,double -o sum,max -c 0,1,17,4099 -i -m world,dup -s "$SEED" -q
# the progress thread runs on the CPUs of the rank's binding near its GPU, else its NIC
# (coll_gpuring_progress_bind): on the same machine, 2 virtual nodes (so a progress
# thread), each rank's thread on CPU 1, its NIC's (as read back from the thread); off,
# on the binding
EXPECT_LINES=" debug proxy_thread.c:[0-9]+: progress thread on CPUs 1: near its NIC 0000:01:00.0, inside its binding 0-1$" \
RANK_PREFIX="$PACKAGE_2NUMA" \
    run_case "progress_bind_np2_rpn1" 2 1 ready,lines \
    "coll_gpuring_verbose 4 coll_gpuring_verbose_subsys init,coll,proxy" \
    allreduce_check -t int32,double -o sum -c 0,1,17,4099 -i -m world,dup -s "$SEED" -q
EXPECT_LINES=" debug proxy_thread.c:[0-9]+: progress thread on the rank.s binding: coll_gpuring_progress_bind is off$" \
RANK_PREFIX="$PACKAGE_2NUMA" \
    run_case "progress_bind_off_np2_rpn1" 2 1 ready,lines \
    "coll_gpuring_verbose 4 coll_gpuring_verbose_subsys init,coll,proxy coll_gpuring_progress_bind 0" \
    allreduce_check -t int32 -o sum -c 1,4099 -m world -s "$SEED" -q

# --- reduce-scatter, allgather, bcast, reduce (colls_check): every type x op, counts
# 0, 1, odd, 1 Mi elements, every root, in place, world/dup/split, real hosts and
# virtual nodes (net edges), forced LL; each collective ran in gpuring (summary)
# (auto on 3 nodes of 2 and 2 nodes of 2: bcast and reduce take the tree for small
# calls, the chain for large ones; on 3 nodes of 1 the tree over nodes is a chain of
# the same depth, and the chain keeps them)
run_case "colls_np2_rpn0" 2 0 ready,colls "" colls_check -s "$SEED" -q
# (zero copy on some rank, not every: colls_check's few calls of 64 KiB and more
# have most of their steps among a call's first 8, which land in the output only
# when the rank asks for them before they arrive -- under the sanitizer one rank
# was late for all of them; allreduce_large_np4_rpn2 checks every rank); -I: rank 0's
# process stays idle while the receivers of its MPI_Bcast calls are not in them yet
# (its progress thread spun for their credits, a core's whole second)
run_case "colls_np3_rpn1" 3 1 ready,colls,ringcolls,zcopysome "" colls_check -s "$SEED" -I -q
run_case "colls_np5_rpn2" 5 2 ready,colls,autocolls "" colls_check -s "$SEED" -q
run_case "colls_np6_rpn0" 6 0 ready,colls "" colls_check -s "$SEED" -q
# host buffers left to the component below (the default): what colls_check gives in
# non-contiguous datatypes goes there unpacked
# (op ^avx: Open MPI 4.1.4's op/avx saturates 8- and 16-bit sums, signed ones too, and
# -x: where else it reduces wrong, known_ompi_bugs.sh)
run_case "colls_hostoff_np3_rpn0" 3 0 nopack "coll_gpuring_host_buffers 0 coll_gpuring_verbose 4 op ^avx" \
    colls_check -s "$SEED" -x "$KNOWN_OMPI_BUGS" -q
run_case "colls_ll_np4_rpn0" 4 0 ready,colls "coll_gpuring_protocol ll" colls_check -s "$SEED" -q
run_case "colls_stream_np3_rpn1" 3 1 ready,colls,stream1000 "coll_gpuring_stream_size 1000" colls_check -s "$SEED" -q
run_case "colls_netstream_np4_rpn1" 4 1 ready,colls,netstream1 "coll_gpuring_net_stream_size 1" \
    colls_check -s "$SEED" -q
run_case "colls_ll_np4_rpn2" 4 2 ready,colls,autocolls "coll_gpuring_protocol ll coll_gpuring_nchannels 3" \
    colls_check -s "$SEED" -f -q
# bcast and reduce forced onto the tree (rooted at every rank, across virtual nodes:
# odd and even node counts, both trees of the double tree, many slot steps, LL on the
# edges inside a node) or onto the chain
run_case "colls_tree_np5_rpn2" 5 2 ready,colls,treecolls "coll_gpuring_algorithm tree" \
    colls_check -s "$SEED" -f -q -L 20000
run_case "colls_tree_slot4k_nch2_np4_rpn1" 4 1 ready,colls,treecolls \
    "coll_gpuring_algorithm tree coll_gpuring_slot_size 4096 coll_gpuring_nchannels 2" \
    colls_check -s "$SEED" -f -q -L 20000
run_case "colls_tree_ll_np6_rpn2" 6 2 ready,colls,treecolls \
    "coll_gpuring_algorithm tree coll_gpuring_protocol ll" colls_check -s "$SEED" -f -q -L 20000
run_case "colls_ring_np4_rpn1" 4 1 ready,colls,ringcolls "coll_gpuring_algorithm ring" \
    colls_check -s "$SEED" -f -q -L 20000

# --- the LL protocol (flag in every 8 bytes) forced at every size, so calls of up to
# 65537 elements run as many LL steps of at most 8 KiB: every type and op, odd counts,
# in place; ring, tree and gather; shm alone, and shm mixed with net (virtual nodes,
# whose net edges stay simple); a wrong step under LL fails the call as under simple
LL="coll_gpuring_protocol ll"
run_case "ll_reduced_np3_rpn0" 3 0 ready "$LL" allreduce_check "${REDUCED[@]}"
run_case "ll_ring_nch3_np4_rpn2" 4 2 ready "$LL coll_gpuring_algorithm ring coll_gpuring_nchannels 3" \
    allreduce_check "${MEDIUM[@]}"
run_case "ll_tree_np5_rpn2" 5 2 ready,tree "$LL coll_gpuring_algorithm tree" allreduce_check "${MEDIUM[@]}"
run_case "ll_tree_np6_rpn0" 6 0 ready,tree "$LL coll_gpuring_algorithm tree" allreduce_check "${MEDIUM[@]}"
run_case "ll_gather_np5_rpn0" 5 0 ready "$LL coll_gpuring_algorithm gather" allreduce_check "${MEDIUM[@]}"
run_case "ll_large_np2_rpn0" 2 0 ready "$LL" allreduce_check "${LARGE[@]}"

# --- MPI_Iallreduce: several calls in flight, mixed with blocking ones, on world, dup
# and split at once; a large call that must finish while its caller makes no MPI call;
# the type x op matrix one non-blocking call at a time (allreduce_check -B); a stuck
# call's error through MPI_Wait; one with a user op (libnbc's, below) in flight while
# one rank makes a blocking gpuring call that the others make only once it completed
# (gpuring's waits drive Open MPI's progress: its later rounds need that rank's; every
# other allreduce in gpuring: below_check counts the user op's calls, each rank's
# "iallreduce_check rank R: N allreduce calls with a user op").  gpuring-only: plain
# Open MPI's libnbc moves data only inside MPI calls, and 4.1's 8-bit sums saturate
if [ $ACTIVE = 1 ]; then
    run_case "iallreduce_np2_rpn0" 2 0 ready "" iallreduce_check -q
    run_case "iallreduce_np4_rpn2" 4 2 ready "" iallreduce_check -q
    run_case "iallreduce_tree_np5_rpn2" 5 2 ready,tree "coll_gpuring_algorithm tree" \
        iallreduce_check -q
    run_case "iallreduce_ll_np3_rpn0" 3 0 ready "$LL" iallreduce_check -q
    run_case "iallreduce_matrix_np3_rpn1" 3 1 ready,allcalls "" allreduce_check -B "${MEDIUM[@]}"
    # a fresh communicator's first collective is an MPI_Iallreduce whose caller then
    # needs a rank's send that rank makes before the call: with the setup left to
    # blocking calls, it goes below (and completes); the calls after a blocking one
    # run in gpuring
    FALLBACK_WHY="comm .* is not set up yet" run_case "iallreduce_first_np4_rpn0" 4 0 \
        ready,fallback "coll_gpuring_nonblocking_setup 0" iallreduce_check -q -F
    # ... and, with host buffers off (the default), on host buffers, which go below on
    # every rank: the call waits for no rank (no agreement on the parameters either;
    # op ^avx: Open MPI 4.1.4's op/avx saturates the 8-bit sums below, known_ompi_bugs.sh)
    FALLBACK_WHY="host buffers" run_case "iallreduce_first_hostoff_np3_rpn0" 3 0 \
        fallback "coll_gpuring_host_buffers 0 coll_gpuring_wait_timeout 20 op ^avx" iallreduce_check -q -F
    run_case "timeout_nonblocking_np3_rpn1" 3 1 ready,timeout "coll_gpuring_wait_timeout 3" \
        timeout_check "$STUCK_LIMIT" nonblocking
    # with coll_gpuring_agree_memory, a non-blocking call would wait for every rank to
    # agree on the kind of memory: it goes below instead, so a rank that makes it and
    # then serves a peer's send, which that peer makes before its own call, goes on
    FALLBACK_WHY="a non-blocking call cannot agree" run_case "iallreduce_agree_memory_np2_rpn0" \
        2 0 ready,fallback "coll_gpuring_agree_memory 1" iallreduce_check -q -P
    # calls never waited for at MPI_Finalize (one freed while it ran): the communicator
    # outlives MPI_Finalize's release, and with it gpuring's worker thread, which still
    # ran when the component was unloaded -- every rank segfaulted (exit 139); now
    # each ends cleanly and says why (shm connections; net ones, whose proxy closes
    # with them still open).  And a call that fails in MPI_Finalize on a communicator
    # the application freed: MPI_Finalize's release destroyed the communicator under
    # the request, whose report then read its name, and whose release (MPI_Request_free
    # before) released it again: use after free (the sanitizer flavor runs these)
    run_case "unwaited_np3_rpn0" 3 0 ready,unwaited "coll_gpuring_wait_timeout 3" \
        iallreduce_check -q -U
    run_case "unwaited_np3_rpn1" 3 1 ready,unwaited "coll_gpuring_wait_timeout 3" \
        iallreduce_check -q -U
    # a request's completion callback (Open MPI's, as a layer above sets it) frees the
    # request and starts the next call on its communicator: gpuring completed its
    # requests holding the lock both take -- the process hung (the program's alarm)
    run_case "request_cb_np3_rpn0" 3 0 ready,allcalls "" request_cb_check -q
    run_case "request_cb_np3_rpn1" 3 1 ready,allcalls "" request_cb_check -q
fi

# --- a seeded random sequence of mixed calls (mix_check): allreduce, iallreduce (up to 4
# in flight, completed at random points), reduce_scatter_block, allgather, bcast, reduce
# on world, dup and split in turn; every type x op, counts 0 to 2 MiB, roots, in place,
# and calls that repeat the one before with one of root, op, type, in place changed
# (a plan kept from it must not be reused).  gpuring-only: 4.1's 8-bit sums saturate
if [ $ACTIVE = 1 ]; then
    run_case "mix_np3_rpn1" 3 1 ready,allcolls "" mix_check -s "$SEED" -n 2000 -q
    run_case "mix_np4_rpn0" 4 0 ready,allcolls "" mix_check -s "$SEED" -n 2000 -q
    run_case "mix_ll_np5_rpn2" 5 2 ready,allcolls "$LL" mix_check -s "$SEED" -n 2000 -q
    run_case "mix_tree_np4_rpn2" 4 2 ready,allcolls,tree "coll_gpuring_algorithm tree" \
        mix_check -s "$SEED" -n 2000 -q
fi

# --- failures: gpuring-only (plain Open MPI has no timeout: the stuck call would hang)
if [ $ACTIVE = 1 ]; then
    # the last rank skips a call: the others report rank and step, and return
    run_case "timeout_np3_rpn0" 3 0 ready,timeout "coll_gpuring_wait_timeout 3" \
        timeout_check "$STUCK_LIMIT"
    run_case "timeout_np3_rpn1" 3 1 ready,timeout "coll_gpuring_wait_timeout 3" \
        timeout_check "$STUCK_LIMIT"
    # ... and a non-blocking collective after it, which gpuring hands below, runs there
    # on every rank (gpuring's exchanges are on tags of its own, apart from the
    # component below's sequence of non-blocking calls)
    run_case "timeout_ibarrier_np3_rpn0" 3 0 "" "coll_gpuring_wait_timeout 3" \
        timeout_check "$STUCK_LIMIT" ibarrier
    # ... but a rank late to a call gpuring runs -- past the wait timeout, within
    # coll_gpuring_arrival_timeout -- is waited for: the others say so, and every
    # rank's result is right (shm; net between virtual nodes; a non-blocking call)
    LATE2="coll_gpuring_wait_timeout 3 coll_gpuring_arrival_timeout 60"
    run_case "late2_np3_rpn0" 3 0 ready,latewait "$LATE2" timeout_check 60 late2=7
    run_case "late2_np3_rpn1" 3 1 ready,latewait "$LATE2" timeout_check 60 late2=7
    run_case "late2_nonblocking_np3_rpn1" 3 1 ready,latewait "$LATE2" \
        timeout_check 60 nonblocking,late2=7
    # ... and to the communicator's first call (its agreement on the parameters waits)
    run_case "late1_np3_rpn1" 3 1 ready,latewait "$LATE2" timeout_check 60 late1=7
    # ... but a call gpuring hands below (host buffers, gpuring's default) waits for no
    # rank: the last rank 5 s late to the first collective, past the wait timeout, and
    # every call right (gpuring's agreement on its parameters timed out there, and
    # failed the calls on the punctual ranks and every later one on the communicator)
    FALLBACK_WHY="host buffers" run_case "late_hostoff_np3_rpn0" 3 0 fallback \
        "coll_gpuring_host_buffers 0 coll_gpuring_wait_timeout 2" timeout_check 60 late=5
    # ... and to a call gpuring runs, past coll_gpuring_arrival_timeout: every rank's
    # call fails, the punctual ranks left with an exchange of gpuring's the late rank
    # had not joined; their MPI_Ibcast after it (handed below) must end on every rank,
    # right (through the component below's MPI_Iallgather, the exchange paired with the
    # late rank's MPI_Ibcast there)
    run_case "adrift_np3_rpn0" 3 0 "" "coll_gpuring_wait_timeout 2" timeout_check 60 \
        adrift=10
    # ... MPI_Comm_dup of it after a host call that failed (its wait for the parameters'
    # agreement, coll_gpuring_agree_memory 1; the late rank's call waits for the
    # agreement on the kind of memory, to its timeout): the dup's MPI_Iallreduce, host
    # ints that go below unstaged (coll_gpuring_host_buffers 0), and the copy's calls
    # succeed
    run_case "adrift_dup_np3_rpn0" 3 0 "" \
        "coll_gpuring_wait_timeout 2 coll_gpuring_host_buffers 0 coll_gpuring_agree_memory 1" \
        timeout_check 60 adrift=10,dup
    # ... free the failed communicator and make new ones from MPI_COMM_WORLD, whose
    # calls must all succeed -- under pml ucx too, whose
    # requests do not hold their communicator: gpuring's exchange given up on it does
    # (else the first new one got its context id, and the punctual ranks' stale
    # exchange took its setup's messages: every call on it failed)
    run_case "adrift_free_np3_rpn0" 3 0 "" "coll_gpuring_wait_timeout 2" timeout_check 60 \
        adrift=10,free
    if ompi_info --parsable 2>/dev/null | grep -q '^mca:pml:ucx:'; then
        run_case "adrift_free_ucx_np3_rpn0" 3 0 "" "coll_gpuring_wait_timeout 2 pml ucx \
pml_ucx_tls any pml_ucx_devices any btl ^vader,sm,tcp" timeout_check 60 adrift=10,free
    else
        echo "INFO adrift_free_ucx_np3_rpn0: skipped (this Open MPI has no pml ucx)"
    fi
    # the same while another communicator's calls keep UCX busy in a thread of the
    # waiting ranks: what moves on other connections is not the stuck call's progress
    run_case "timeout_busy_np3_rpn1" 3 1 ready,timeout "coll_gpuring_wait_timeout 3" \
        timeout_check "$STUCK_LIMIT" busy
    # the last rank passes more elements (or another datatype): every rank fails
    # promptly (well inside the 60 s timeout) with an MPI error naming gpuring, none
    # succeeds with data of another call, the next call fails the same way everywhere,
    # and a new communicator works; a few elements, one slot, many slots; shm, net, both;
    # 16 ints against 17 on one node: 64 bytes take the LL protocol, 68 the simple
    # one, so neither end sees the other's steps -- each finds the step it waits for
    # posted in the other protocol (a mismatch at once, not the timeout)
    MISMATCH_COUNTS=7:1,16:1,131072:1,1048576:4096
    run_case "mismatch_np2_rpn0" 2 0 ready,mismatch "coll_gpuring_wait_timeout 60" \
        mismatch_check 20 "$MISMATCH_COUNTS"
    run_case "mismatch_type_np3_rpn0" 3 0 ready,mismatch "coll_gpuring_wait_timeout 60" \
        mismatch_check 20 "$MISMATCH_COUNTS" type
    # (idle: after the failed calls over net connections no progress thread spins on
    # them -- a send end whose receiver refused the call kept it busy until the free)
    run_case "mismatch_np3_rpn1" 3 1 ready,mismatch "coll_gpuring_wait_timeout 60" \
        mismatch_check 20 "$MISMATCH_COUNTS" idle
    # ... an MPI_Allgather of a larger count, into a datatype with holes (packed)
    run_case "mismatch_allgather_np3_rpn1" 3 1 ready,mismatch "coll_gpuring_wait_timeout 60" \
        mismatch_check 20 "$MISMATCH_COUNTS" allgather
    # the last rank cannot start the worker thread of non-blocking calls (its
    # pthread_create fails, as at a pids limit): it abandons its MPI_Iallreduce to the
    # peers, which fail at once, not at the timeout; on shm and net connections
    PRELOAD="$BINDIR/fail_inject.so" run_case "nothread_iallreduce_np3_rpn0" 3 0 ready,gaveup \
        "coll_gpuring_wait_timeout 60" mismatch_check 20 7:1,131072:1 iallreduce nothread
    PRELOAD="$BINDIR/fail_inject.so" run_case "nothread_iallreduce_np3_rpn1" 3 1 ready,gaveup \
        "coll_gpuring_wait_timeout 60" mismatch_check 20 7:1,131072:1 iallreduce nothread
    # every UCX send of the last rank's gpuring fails during one call (fail_inject.so):
    # that communicator fails on every rank (the peers, never told, time out), and a
    # new communicator over the same UCX endpoints works on every rank: the failure is
    # the connections', not the process's
    PRELOAD="$BINDIR/fail_inject.so" run_case "netfail_np3_rpn1" 3 1 ready,netfail,timeout \
        "coll_gpuring_wait_timeout 3" mismatch_check 20 7:1,131072:1 netfail
    # /dev/shm full on one rank (fail_inject.so: posix_fallocate of its segments fails
    # with ENOSPC): the host connections fail on every rank alike and every call goes
    # below with the right result, where a step's first write to a page tmpfs could not
    # give used to kill the rank (SIGBUS)
    PRELOAD="$BINDIR/fail_inject.so" PRELOAD_ENV=GPURING_TEST_FAIL_SHM=1 \
        FALLBACK_WHY="no host connections" run_case "shmfull_np3_rpn0" 3 0 fallback "" \
        allreduce_check -m world,dup -c 1,17,4099 -t int,float -o sum,max
    # ... and MPI_Iallreduce of a larger count on the last rank is caught as a mismatch
    run_case "mismatch_iallreduce_np3_rpn0" 3 0 ready,mismatch "coll_gpuring_wait_timeout 60" \
        mismatch_check 20 "$MISMATCH_COUNTS" iallreduce
    run_case "mismatch_np4_rpn2" 4 2 ready,mismatch \
        "coll_gpuring_wait_timeout 60 coll_gpuring_algorithm tree" \
        mismatch_check 20 "$MISMATCH_COUNTS"
    # ... on trees of one channel with small slots: the mismatched rank's parent gives
    # up while its children still push steps up to it; a child waiting for a slot the
    # parent will not free is told (the parent refuses its recv ends, over net through
    # the proxy's credit) instead of waiting out the 60 s timeout; shm and net
    REFUSED=(coll_gpuring_wait_timeout 60 coll_gpuring_algorithm tree coll_gpuring_nchannels 1
             coll_gpuring_slot_size 8192)
    run_case "mismatch_refused_np5_rpn0" 5 0 ready,mismatch_any,refused "${REFUSED[*]}" \
        mismatch_check 20 "$MISMATCH_COUNTS"
    run_case "mismatch_refused_np5_rpn1" 5 1 ready,mismatch_any,refused "${REFUSED[*]}" \
        mismatch_check 20 "$MISMATCH_COUNTS"
    run_case "mismatch_ll_np3_rpn0" 3 0 ready,mismatch "coll_gpuring_wait_timeout 60 $LL" \
        mismatch_check 20 "$MISMATCH_COUNTS"
    run_case "timeout_ll_np3_rpn0" 3 0 ready,timeout "coll_gpuring_wait_timeout 3 $LL" \
        timeout_check "$STUCK_LIMIT"
    # the last rank dies (SIGKILL) inside a 16 MiB call; mpirun keeps the others
    # running: each returns an error within the wait timeout, refuses the next call
    # at once, and no gpuring segment is left in /dev/shm.  Every rank its own
    # virtual node, and two virtual nodes of two (the dead rank's shm neighbour
    # too).  With UCX's failure detection on the same-host endpoints (tcp): without
    # it, UCX 1.13's CMA transport aborts a survivor whose rendezvous read meets
    # the dead process (a UCX limit; real same-host peers use gpuring's shm FIFOs,
    # and remote peers keep detection by default)
    # (Open MPI 4's mpirun: orte_enable_recovery; Open MPI 5's runtime has no such
    # parameter and ends the job at the first death, so there the cases are skipped)
    if $MPIRUN --version 2>/dev/null | grep -q "(Open MPI) 4\."; then
        KILL=(orte_enable_recovery 1 coll_gpuring_wait_timeout 3 coll_gpuring_net_peer_failure all)
        mkdir -p "$LOGDIR/kill.1" "$LOGDIR/kill.2" # the survivors' verdicts
        run_case "kill_np2_rpn1" 2 1 "" "${KILL[*]}" kill_check "$STUCK_LIMIT" "$LOGDIR/kill.1"
        run_case "kill_np4_rpn2" 4 2 "" "${KILL[*]}" kill_check "$STUCK_LIMIT" "$LOGDIR/kill.2"
        # ranks on hosts of their own (UCX over tcp, as between nodes), with the
        # default failure detection (remote peers only)
        mkdir -p "$LOGDIR/kill.3"
        FAKE_HOSTS=1 run_case "kill_hosts_np3_rpn0" 3 0 "" \
            "orte_enable_recovery 1 coll_gpuring_wait_timeout 3" kill_check "$STUCK_LIMIT" \
            "$LOGDIR/kill.3"
    else
        echo "INFO kill_*: skipped (they need Open MPI 4's orte_enable_recovery)"
    fi
    # the last rank skips a communicator's first call: setup must time out, not hang
    run_case "timeout_setup_np3_rpn1" 3 1 setuptimeout "coll_gpuring_wait_timeout 3" \
        timeout_check "$STUCK_LIMIT" setup
    run_case "timeout_setup_nonblocking_np3_rpn1" 3 1 setuptimeout,setuphint \
        "coll_gpuring_wait_timeout 3" timeout_check "$STUCK_LIMIT" setup,nonblocking
    # the last rank has no memory for its part of a setup exchange (fail_inject.so, set
    # around its first call: the communicator's state, the uid's exchange, the UCX
    # addresses' lengths): it leaves the exchanges, and every rank's call fails -- none
    # falls back below, where it would wait for the others forever -- and a new
    # communicator works
    # (216: 3 ranks' peer info of 72 B)
    for b in 216 48 24; do
        PRELOAD="$BINDIR/fail_inject.so" run_case "setup_leave_${b}_np3_rpn1" 3 1 \
            setuptimeout,setupleft "coll_gpuring_wait_timeout 3" timeout_check 30 "leave=$b"
    done
    # ... and for gpuring's exchange itself (240 B: an exchange of 4 bytes from each of 3
    # ranks -- its record, requests, messages' heads and parts, coll_gpuring_exchange.c's
    # one allocation; a change of its layout moves the size, and this case then fails
    # for want of the line)
    PRELOAD="$BINDIR/fail_inject.so" run_case "setup_leave_exchange_np3_rpn1" 3 1 \
        setuptimeout,exchangenomem "coll_gpuring_wait_timeout 3" timeout_check 30 "leave=240"
    # ... and one without memory for its graph (the first 12-byte allocation: 3 ranks'
    # nodes) takes part in the exchanges all the same: every rank falls back alike
    PRELOAD="$BINDIR/fail_inject.so" PRELOAD_ENV=GPURING_TEST_FAIL_MALLOC=1:12 \
        run_case "graph_nomem_np3_rpn1" 3 1 setupfail,graphnomem "" \
        allreduce_check -t int32,double -o sum,max -c 0,1,17,4099 -i -m world -s "$SEED" -q "${XARG[@]}"
    # rank 0 cannot start UCX: every rank falls back, results still right
    FIRST_RANK_ENV="UCX_TLS=" run_case "setupfail_np3_rpn1" 3 1 setupfail "" \
        allreduce_check -t int32,double -o sum,max -c 0,1,17,4099 -i -m world -s "$SEED" -q "${XARG[@]}"
    # rank 0 given other coll_gpuring parameters than the rest: one that decides which
    # calls gpuring takes (host buffers), one that decides how (the algorithm; a string),
    # one that sizes the setup's exchanges (channels): every rank sees the difference at
    # the communicator's first call and hands its collectives below, results right (not
    # a hang until the wait timeout); colls_check -B makes that first call a bcast
    # whose elements rank 0 alone packs first, as a receiver (the agreement comes
    # before that decision too)
    PDIFF=(allreduce_check -t int32,double -o sum,max -c 0,1,17,4099 -i -s "$SEED" -q "${XARG[@]}")
    # (host buffers on dup and split communicators too: their parent's first call is
    # Open MPI's own MPI_Iallreduce inside MPI_Comm_dup, which goes below at once on
    # rank 0 -- its host buffers do -- and starts the agreement there without waiting
    # for it, while the others wait for it and follow rank 0 below; rank 0's blocking
    # calls go below for its host buffers alike)
    PARAMS_DIFFER=host_buffers FIRST_RANK_ENV="OMPI_MCA_coll_gpuring_host_buffers=0" \
        FALLBACK_WHY="comm .*'s ranks have different coll_gpuring parameters|host buffers" \
        run_case "params_differ_host_np3_rpn1" 3 1 fallback,paramsdiffer "" "${PDIFF[@]}" -m world,dup,split
    PARAMS_DIFFER=algorithm FIRST_RANK_ENV="OMPI_MCA_coll_gpuring_algorithm=tree" \
        FALLBACK_WHY="comm .*'s ranks have different coll_gpuring parameters" \
        run_case "params_differ_algorithm_np4_rpn2" 4 2 fallback,paramsdiffer "" "${PDIFF[@]}" -m world,dup,split
    # (every call below: Open MPI 4.1.4's own wrong reductions left out, as for
    # colls_hostoff_np3_rpn0)
    PARAMS_DIFFER=host_buffers PARAMS_FIRST=bcast FIRST_RANK_ENV="OMPI_MCA_coll_gpuring_host_buffers=0" \
        run_case "params_differ_colls_np3_rpn0" 3 0 paramsdiffer "op ^avx" colls_check -B -s "$SEED" \
        -x "$KNOWN_OMPI_BUGS" -q
    PARAMS_DIFFER=nchannels FIRST_RANK_ENV="OMPI_MCA_coll_gpuring_nchannels=32" \
        run_case "params_differ_nch_np3_rpn1" 3 1 paramsdiffer "" "${PDIFF[@]}" -m world,dup,split
    # ... and one that is each rank's own (the wait timeout, 0: no bound, where the
    # setup's exchanges are still the others'): every call runs in gpuring
    FIRST_RANK_ENV="OMPI_MCA_coll_gpuring_wait_timeout=0" \
        run_case "params_own_timeout_np3_rpn1" 3 1 ready,allcalls "" "${PDIFF[@]}" -m world,dup,split
fi

# --- MPI_THREAD_MULTIPLE: 4 threads per rank make their communicators' first calls at
# once; every setup must succeed (no uid collision), every call run in gpuring
run_case "threads_np2_rpn0" 2 0 ready,allcalls "" thread_check -t 4 -n 10 -q
run_case "threads_np3_rpn1" 3 1 ready,allcalls "" thread_check -t 4 -n 10 -q
run_case "threads_np4_rpn2" 4 2 ready,allcalls "" thread_check -t 3 -n 10 -q

# --- fallback paths
run_case "fallback_np2_rpn0" 2 0 fallback "" fallback_check -s "$SEED" -q
run_case "fallback_np3_rpn2" 3 2 fallback "" fallback_check -s "$SEED" -q

# --- device buffers without a GPU: the stand-in CUDA driver (fake_cuda_driver.c) calls
# host buffers device or managed memory, and is too old for gpuring's CUDA runtime.
# gpuring must take its device branch, fall back on every rank for the right reason,
# and every result must be right (the component below computes it: its own known
# bugs are skipped here, as when plain Open MPI is tested).
FAKE_CUDA="$BINDIR/fake_cuda/libcuda.so.1"
FAKE=(-t all -o all -c 0,1,2,7,1000,65537 -i -s "$SEED" -q -x "$KNOWN_OMPI_BUGS")
FALLBACK_WHY="no device connections" run_case "fakecuda_device_np3_rpn0" 3 0 fallback "" \
    allreduce_check -F "$FAKE_CUDA:device" -m world,split "${FAKE[@]}"
FALLBACK_WHY="no device connections" run_case "fakecuda_device_np4_rpn2" 4 2 fallback "" \
    allreduce_check -F "$FAKE_CUDA:device" -m world,rev "${FAKE[@]}"
FALLBACK_WHY="managed memory" run_case "fakecuda_managed_np2_rpn0" 2 0 fallback "" \
    allreduce_check -F "$FAKE_CUDA:managed" -m world "${FAKE[@]}"
FALLBACK_WHY="no device connections" run_case "fakecuda_managed_on_np2_rpn0" 2 0 fallback \
    "coll_gpuring_managed_buffers 1" allreduce_check -F "$FAKE_CUDA:managed" -m world "${FAKE[@]}"
FALLBACK_WHY="the CUDA driver names no GPU" run_case "fakecuda_nogpu_np2_rpn0" 2 0 fallback "" \
    allreduce_check -F "$FAKE_CUDA:nogpu" -m world "${FAKE[@]}"
FALLBACK_WHY="send and receive buffers are different kinds" run_case "fakecuda_senddev_np3_rpn0" \
    3 0 fallback "" allreduce_check -F "$FAKE_CUDA:senddev" -m world,rev "${FAKE[@]}"
# device buffers on rank 0 only: with coll_gpuring_agree_memory every rank must see it
FALLBACK_WHY="ranks passed different kinds of memory" run_case "fakecuda_rank0_agree_np3_rpn0" \
    3 0 fallback "coll_gpuring_agree_memory 1" \
    allreduce_check -F "$FAKE_CUDA:rank0" -m world,split "${FAKE[@]}"
# ... with host buffers off too: the ranks whose host buffers go below agree as well
FALLBACK_WHY="ranks passed different kinds of memory" run_case "fakecuda_rank0_agree_hostoff_np3_rpn0" \
    3 0 fallback "coll_gpuring_agree_memory 1 coll_gpuring_host_buffers 0" \
    allreduce_check -F "$FAKE_CUDA:rank0" -m world,split "${FAKE[@]}"

# --- every MPI collective on device buffers the host cannot touch (the stand-in driver's
# cuMemAlloc): gpuring stages them through host memory for the component below (not
# CUDA-aware), non-blocking ones until their request completes (device_coll_check -i:
# every call in its non-blocking form), persistent ones at every start (-p), and every
# result is right; pool memory on threads without a CUDA context too (-a); and on
# inter-communicators (mode inter: coll/inter's and libnbc's calls, MPI_ROOT and
# MPI_PROC_NULL roots, groups of unequal size at np 3).  -H: the MPI_BOTTOM case with
# host blocks either side of a device block must run (the stand-in driver's device
# memory is mapped as host memory is, so that address order can be had).
if [ $ACTIVE = 1 ]; then
    STAGED_ALL="MPI_Allgather MPI_Allgatherv MPI_Allreduce MPI_Alltoall MPI_Alltoallv
        MPI_Alltoallw MPI_Bcast MPI_Exscan MPI_Gather MPI_Gatherv MPI_Reduce MPI_Reduce_scatter
        MPI_Reduce_scatter_block MPI_Scan MPI_Scatter MPI_Scatterv"
    STAGED_BLOCKING=$STAGED_ALL
    # MPI_Reduce_local too where Open MPI makes it through MPI_COMM_SELF's coll module
    # (5.0; 4.x reduces in its op framework, out of any component's reach)
    if ! $MPIRUN --version 2>/dev/null | grep -q "(Open MPI) 4\."; then
        STAGED_ALL="$STAGED_ALL MPI_Reduce_local"
    fi
    run_case "device_colls_np2_rpn0" 2 0 staged "" device_coll_check -D "$FAKE_CUDA" -H -q
    # ... on an Open MPI that says it is CUDA-aware (fail_inject.so) but runs without
    # its device collective component (coll/cuda, coll/accelerator: none here): tuned
    # and the rest would reduce device pointers on the CPU, so they are staged all the
    # same (they were handed down: every rank faulted, as in the control below)
    PRELOAD="$BINDIR/fail_inject.so" PRELOAD_ENV=GPURING_TEST_CUDA_AWARE=1 \
        EXPECT_LINES=".* device buffers on their way to the component below: staged through host memory \(this Open MPI is CUDA-aware, but its coll cuda / accelerator component is not in the job's coll list" \
        run_case "device_colls_aware_nocoll_np2_rpn0" 2 0 staged,lines "" \
        device_coll_check -D "$FAKE_CUDA" -H -q
    # gpuring disabled on every communicator (an agreed parameter out of its range):
    # calls on host buffers go below too -- an MPI_Reduce from host memory into the
    # root's device memory must still be staged there (the root handed its device
    # receive buffer to the component below, which crashed on it)
    EXPECT_LINES=".* comm MPI_COMM_WORLD: coll_gpuring_nchannels is 0, not 1-32: gpuring disabled" \
        run_case "device_colls_disabled_np3_rpn0" 3 0 staged,lines "coll_gpuring_nchannels 0" \
        device_coll_check -D "$FAKE_CUDA" -H -q
    # stream-ordered pool memory (of no context), every call on a thread with no current
    # context: staged in its GPU's primary context (-a; the forms below likewise)
    run_case "device_colls_pool_np2_rpn0" 2 0 staged "" device_coll_check -D "$FAKE_CUDA" -H -a -q
    STAGED_ALL="$STAGED_ALL MPI_Neighbor_allgather MPI_Neighbor_alltoall"
    run_case "device_colls_np3_rpn1" 3 1 staged "" device_coll_check -D "$FAKE_CUDA" -H -q
    run_case "device_colls_np4_rpn2" 4 2 staged "" \
        device_coll_check -D "$FAKE_CUDA" -H -c 0,1,7,1000,65537 -m world,split,inter -q
    # the non-blocking forms: MPI_Ibcast, MPI_Igather, ... (a user op and a derived
    # datatype among them: Open MPI's MPI layer keeps them alive on gpuring's request)
    STAGED_ALL=""
    for coll in $STAGED_BLOCKING; do STAGED_ALL="$STAGED_ALL MPI_I${coll#MPI_}"; done
    STAGED_ALL=$(echo "$STAGED_ALL" | sed 's/MPI_I\([A-Z]\)/MPI_I\L\1/g')
    run_case "device_colls_nonblocking_np2_rpn0" 2 0 staged,rows "" \
        device_coll_check -D "$FAKE_CUDA" -H -i -q
    run_case "device_colls_pool_nonblocking_np2_rpn0" 2 0 staged "" \
        device_coll_check -D "$FAKE_CUDA" -H -i -a -q
    # ... with a second thread driving Open MPI's progress all along (-T): a request
    # below that this thread completes as it starts still has its results copied back,
    # and gpuring's request over it is released once (a race that freed it twice, and
    # dropped a reference to the communicator each time, crashed about 1 run in 50;
    # the sanitizer flavor runs this case too, where a use after free is reported)
    run_case "device_colls_nonblocking_progress_np3_rpn0" 3 0 staged "" \
        device_coll_check -D "$FAKE_CUDA" -H -i -T -m world,split,inter -q
    # MPI_Finalize with staged non-blocking calls never waited for (one on a communicator
    # freed meanwhile): a warning where one is still running below, a clean end
    run_case "device_unwaited_np3_rpn0" 3 0 "" "" \
        device_coll_check -D "$FAKE_CUDA" -c 7 -m world -U -q
    # a device copy that fails in staging (the stand-in driver's): alone on
    # MPI_COMM_SELF the call returns an error, copy in or back, and the next one
    # runs; a copy back on MPI_COMM_WORLD is that rank's error alone (the others'
    # results right); a copy in there, where the other ranks wait for this one in the
    # component below (without a timeout), makes gpuring end the job, naming the
    # call -- blocking, non-blocking (the copy at the call) and persistent (at
    # MPI_Start: its *_init copies nothing)
    ABORTED=": this rank cannot make the call \(above\), and its peers would wait for it in the component below, which has no timeout: aborting the job"
    SELF_FAILED="^device_coll_check rank @: self alltoall count 7, its staging copy back failed: MPI_ERR"
    # (the exit status: MPI_ERR_INTERN, the abort's code for a failed copy)
    EXPECT_ABORT_RC=17
    EXPECT_ABORT="\[gpuring rank 2\] error [^ ]+: MPI_Alltoall on comm MPI_COMM_WORLD$ABORTED" \
        EXPECT_EVERY=$SELF_FAILED \
        run_case "device_copyfail_np3_rpn0" 3 0 "" "" device_coll_check -D "$FAKE_CUDA" -F -q
    # (here every rank's log line for its failed copy back, which names the driver's error)
    EXPECT_ABORT="\[gpuring rank 1\] error [^ ]+: MPI_Ialltoall on comm MPI_COMM_WORLD$ABORTED" \
        EXPECT_EVERY="\[gpuring rank @\] error [^ ]+: MPI_Ialltoall on comm MPI_COMM_SELF: cannot copy the result .* back to device memory at .*: a copy from host into device memory failed: CUDA_ERROR_ILLEGAL_ADDRESS 700\$" \
        run_case "device_copyfail_nonblocking_np2_rpn1" 2 1 "" "" \
        device_coll_check -D "$FAKE_CUDA" -F -i -q
    EXPECT_ABORT="\[gpuring rank 2\] error [^ ]+: MPI_Alltoall_init on comm MPI_COMM_WORLD$ABORTED" \
        EXPECT_EVERY=$SELF_FAILED run_case "device_copyfail_persistent_np3_rpn1" 3 1 "" "" \
        device_coll_check -D "$FAKE_CUDA" -F -p -q
    # ... and a rank without host memory to stage through (fail_inject.so: the last
    # rank's first staging area, 64 KiB, refused) ends the job with MPI_ERR_NO_MEM's
    # code: a blocking call, a non-blocking one, and a call on an inter-communicator
    # (the abort reaches the other group too; the communicator, which Open MPI leaves
    # unnamed, named by its context id)
    EXPECT_ABORT_RC=39
    NOMEM="cannot allocate [0-9]+ bytes of host memory to stage its device buffers through"
    PRELOAD="$BINDIR/fail_inject.so" PRELOAD_ENV=GPURING_TEST_FAIL_MEMALIGN=2:65536 \
        EXPECT_ABORT="\[gpuring rank 2\] error [^ ]+: MPI_[A-Za-z_]+ on comm MPI_COMM_WORLD: $NOMEM" \
        run_case "device_nomem_np3_rpn0" 3 0 "" "" device_coll_check -D "$FAKE_CUDA" -q
    PRELOAD="$BINDIR/fail_inject.so" PRELOAD_ENV=GPURING_TEST_FAIL_MEMALIGN=1:65536 \
        EXPECT_ABORT="\[gpuring rank 1\] error [^ ]+: MPI_I[a-z_]+ on comm MPI_COMM_WORLD: $NOMEM" \
        run_case "device_nomem_nonblocking_np2_rpn1" 2 1 "" "" \
        device_coll_check -D "$FAKE_CUDA" -i -q
    PRELOAD="$BINDIR/fail_inject.so" PRELOAD_ENV=GPURING_TEST_FAIL_MEMALIGN=2:65536 \
        EXPECT_ABORT="\[gpuring rank 2\] error [^ ]+: MPI_[A-Za-z_]+ on comm \(unnamed, cid [0-9]+\)$ABORTED" \
        run_case "device_nomem_inter_np3_rpn0" 3 0 "" "" \
        device_coll_check -D "$FAKE_CUDA" -m inter -q
    EXPECT_ABORT_RC=
    # a rank whose staging copy follows 2.5 s of the application's work on its default
    # stream says so at the wait timeout (1 s here) and waits on (as a CUDA-aware MPI
    # does): every result right
    run_case "device_legacy_wait_np3_rpn0" 3 0 legacywait "coll_gpuring_wait_timeout 1" \
        device_coll_check -D "$FAKE_CUDA" -W -q
    STAGED_ALL="$STAGED_ALL MPI_Ineighbor_allgather MPI_Ineighbor_alltoall"
    run_case "device_colls_nonblocking_np3_rpn1" 3 1 staged,rows "" \
        device_coll_check -D "$FAKE_CUDA" -H -i -c 0,1,7,1000,65537 -m world,split,inter -q
    # the persistent forms (MPI_Bcast_init, ...; Open MPI 4's MPIX_ ones), each started
    # twice: staged with the request, copied in at every start and back at every
    # completion
    STAGED_ALL=""
    for coll in $STAGED_BLOCKING; do STAGED_ALL="$STAGED_ALL ${coll}_init"; done
    run_case "device_colls_persistent_np2_rpn0" 2 0 staged,rows "" \
        device_coll_check -D "$FAKE_CUDA" -H -p -q
    run_case "device_colls_pool_persistent_np2_rpn0" 2 0 staged "" \
        device_coll_check -D "$FAKE_CUDA" -H -p -a -q
    STAGED_ALL="$STAGED_ALL MPI_Neighbor_allgather_init MPI_Neighbor_alltoall_init"
    run_case "device_colls_persistent_np3_rpn1" 3 1 staged,rows "" \
        device_coll_check -D "$FAKE_CUDA" -H -p -c 0,1,7,1000 -m world,split,inter -q
    # the control: handed down unstaged, the same device memory kills the component below
    if wanted device_colls_unstaged_crash; then
        case_closed # (its own verdict, outside run_case)
        log="$LOGDIR/device_colls_unstaged_crash.log"
        mca_args coll_gpuring_verbose 3 coll_gpuring_stage_device_buffers 0
        timeout -k 10 "$TIMEOUT" $MPIRUN "${BASE[@]}" -np 2 "${MCA[@]}" \
            "$BINDIR/device_coll_check" -D "$FAKE_CUDA" -c 7 -m world -q > "$log" 2>&1
        rc=$?
        if [ $rc != 0 ] && [ $rc != 124 ] && [ $rc != 137 ] && grep -q "Segmentation fault" "$log"; then
            pass "device_colls_unstaged_crash (exit $rc: the component below faulted on device memory)"
        else
            fail "device_colls_unstaged_crash" "exit $rc without a segmentation fault" "$log"
        fi
    fi
fi

# --- communicator churn (leaks of fds, threads, /dev/shm/gpuring*)
run_case "churn_np2_rpn0" 2 0 ready "" comm_churn -n "$CHURN_N" -q
[ "$CHURN_N_UCX" != "$CHURN_N" ] && echo "INFO churn_np2_rpn1 uses $CHURN_N_UCX communicators (GPURING_CHURN_N_UCX)"
# (and over net connections: a rank's MPI_Comm_free does not wait for a peer that frees
# the communicator 4 s later -- its last credit comes from its idle progress thread)
run_case "churn_np2_rpn1" 2 1 ready "" comm_churn -n "$CHURN_N_UCX" -q -l 4
# ... where the late ranks call MPI_Allreduce on a communicator of theirs meanwhile: their
# progress threads are never idle, and still send the credits a teardown waits for
run_case "churn_busy_np3_rpn1" 3 1 ready "" comm_churn -n 20 -q -l 4 -b

case_closed
echo "# total $((SECONDS - T_START))s, logs in $LOGDIR"
if [ $NFAIL -gt 0 ]; then
    echo "# failed: ${FAILED_NAMES[*]}"
fi
if [ "$NPASS" -eq 0 ]; then # (GPURING_TEST_FILTER or _SKIP left no case, or none passed)
    echo "# no case passed"
    NFAIL=$((NFAIL + 1))
fi
echo "$NPASS passed, $NFAIL failed"
[ $NFAIL = 0 ]
