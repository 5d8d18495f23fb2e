# sanitizer_report.sh -- sourced by the MPI test runners (sh or bash).
#
#   sanitizer_report LOG   prints the first line of a sanitizer report in LOG
#                          (AddressSanitizer, UBSan "runtime error:", or ASan's
#                          warning that it lost track of a stack, as it does when
#                          a fiber switch is not announced), nothing if clean
# Only the sanitizer flavor's processes (test/sanitize) can write one; every
# run is checked all the same.
sanitizer_report() {
    grep -m 1 -E 'ERROR: (Address|Leak)Sanitizer|: runtime error: |WARNING: ASan ' "$1"
}
