# mca_args.sh -- sourced by the MPI test driver and the perf comparison.
#
# USER_MCA holds the mpirun arguments from GPURING_MCA_ARGS.  mpirun refuses
# a parameter given twice, so a script that sets its own parameters drops
# those from USER_MCA first:
#   mca_args NAME VALUE ...   sets MCA to USER_MCA without the named params,
#                             followed by --mca NAME VALUE for each pair.
read -r -a USER_MCA <<< "${GPURING_MCA_ARGS:-}"

mca_args() {
    local -A drop=()
    local -a set=("$@")
    local k
    for ((k = 0; k < ${#set[@]}; k += 2)); do drop[${set[k]}]=1; done
    MCA=()
    local w=("${USER_MCA[@]}") n=${#USER_MCA[@]}
    for ((k = 0; k < n; k++)); do
        case "${w[k]}" in
        --mca | -mca | --gmca | -gmca)
            if ((k + 2 < n)) && [ -n "${drop[${w[k + 1]}]+x}" ]; then
                k=$((k + 2))
                continue
            fi
            ;;
        esac
        MCA+=("${w[k]}")
    done
    for ((k = 0; k < ${#set[@]}; k += 2)); do MCA+=(--mca "${set[k]}" "${set[k + 1]}"); done
}
