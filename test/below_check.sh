# below_check.sh -- sourced by the MPI test runners (sh or bash).
#
#   below_check LOG NP ALLOW [staged]
#                    prints why some of a case's calls of the collectives gpuring
#                    runs went to the component below where the case expected
#                    none (nothing when none did).  Each of the NP ranks must have
#                    handed 0 calls below for every collective not in ALLOW (a
#                    space list of allreduce reduce bcast allgather
#                    reduce_scatter) -- but a collective of a rank whose test
#                    program said "PROG rank R: N COLL calls with unequal
#                    counts" (colls_check's reduce_scatter) or "... with a user
#                    op" (iallreduce_check's allreduce): exactly N (that
#                    fallback and no other).  The count is the rank's closing summary's "handed
#                    to the component below" (host buffers' runs), or with
#                    `staged` (device buffers' runs, where host calls go below
#                    by design) its "device buffers staged through host memory"
#                    line's count of MPI_Allreduce and MPI_Iallreduce,
#                    MPI_Reduce, MPI_Bcast, MPI_Allgather, MPI_Reduce_scatter
#                    and MPI_Reduce_scatter_block (what gpuring runs).  A change
#                    that sent calls below would still get right answers there
#                    (the component below computes them): only this count shows
#                    it.  A rank with no closing summary at all is reported.
below_check() {
    _bc_log=$1 _bc_np=$2 _bc_allow=" $3 " _bc_staged=${4:-} _bc_r=0
    while [ "$_bc_r" -lt "$_bc_np" ]; do
        # (no closing summary at all: its wording changed, or the rank never got
        # there -- nothing below could be counted)
        if ! grep -q "\[gpuring rank $_bc_r\] [a-z_]* summary: .*, [0-9][0-9]* handed to the component below" "$_bc_log"; then
            echo "rank $_bc_r printed no closing summary of its calls (coll_gpuring_verbose 3): nothing handed below could be counted"
            return 0
        fi
        for _bc_k in allreduce reduce bcast allgather reduce_scatter; do
            case $_bc_allow in *" $_bc_k "*) continue ;; esac
            if [ -n "$_bc_staged" ]; then
                case $_bc_k in
                allreduce) _bc_mpis="MPI_Allreduce MPI_Iallreduce" ;;
                reduce) _bc_mpis=MPI_Reduce ;;
                bcast) _bc_mpis=MPI_Bcast ;;
                allgather) _bc_mpis=MPI_Allgather ;;
                reduce_scatter) _bc_mpis="MPI_Reduce_scatter MPI_Reduce_scatter_block" ;;
                esac
                _bc_n=0
                for _bc_mpi in $_bc_mpis; do
                    _bc_c=$(sed -n "s/.*\[gpuring rank $_bc_r\] device buffers staged through host memory for the component below: .*\<$_bc_mpi \([0-9][0-9]*\).*/\1/p" "$_bc_log" | tail -n 1)
                    _bc_n=$((_bc_n + ${_bc_c:-0}))
                done
            else
                _bc_n=$(sed -n "s/.*\[gpuring rank $_bc_r\] $_bc_k summary: .*, \([0-9][0-9]*\) handed to the component below.*/\1/p" "$_bc_log" | tail -n 1)
                [ -n "$_bc_n" ] || continue
            fi
            _bc_want=0
            _bc_w=$(sed -n "s/^[a-z_]* rank $_bc_r: \([0-9][0-9]*\) $_bc_k calls with \(unequal counts\|a user op\)\$/\1/p" "$_bc_log" | tail -n 1)
            [ -z "$_bc_w" ] || _bc_want=$_bc_w
            if [ "$_bc_n" != "$_bc_want" ]; then
                echo "rank $_bc_r handed $_bc_n $_bc_k calls to the component below${_bc_staged:+ (staged)}, not $_bc_want"
                return 0
            fi
        done
        _bc_r=$((_bc_r + 1))
    done
}
