# sanitizer_report.sh -- sourced by the MPI test runners (sh or bash).
#
#   sanitizer_report LOG   prints the first line of a sanitizer report in LOG,
#                          nothing if clean: an AddressSanitizer error, UBSan's
#                          "runtime error:", ASan's warning that it lost track
#                          of a stack (as when a fiber switch is not announced),
#                          or a direct leak allocated under gpuring's code (the
#                          component, the core, the CUDA CPU runtime): Open
#                          MPI's own leaks, whose stacks hold none of its
#                          frames, do not count
# Only the sanitizer flavor's processes (test/sanitize) can write one; every
# run is checked all the same.
sanitizer_report() {
    awk '
        /ERROR: AddressSanitizer|: runtime error: |WARNING: ASan / { print; exit }
        /^Direct leak of / { leak = $0; next }
        leak != "" && /^ *#[0-9]/ {
            if ($0 ~ / (ompi_coll_gpuring|bootstrap_mpi|graph|kernels|proxy|common|test\/cudacpu)\/[A-Za-z0-9_.]+:[0-9]/ ||
                $0 ~ /mca_coll_gpuring\.so|\/test\/sanitize\/cudacpu\//) {
                sub(/^ +/, "")
                print leak " " $0
                exit
            }
            next
        }
        { leak = "" }' "$1"
}
