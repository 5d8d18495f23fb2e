# log_errors.sh -- sourced by the MPI test runners (sh or bash).
#
#   log_errors LOG   prints, indented, the first lines of LOG in which gpuring
#                    says why a call stopped: a timeout (what the FIFO held),
#                    an abandoned call (where the rank's own sends stood), a
#                    mismatch -- so a failed case's output in CI, whose logs
#                    stay on the CI machine, still tells what happened
log_errors() {
    grep -E '\[gpuring rank [0-9]+\] error .*(timed out after|abandoned: |mismatch: )' "$1" 2>/dev/null |
        head -n "${LOG_ERRORS_MAX:-12}" | cut -c1-400 | sed 's/^/    /'
}
