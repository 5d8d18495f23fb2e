#!/bin/sh
# the CPU runtime tests, threads of a block in reverse index order
exec "$(dirname "$0")/run_cudacpu_tests.sh" reverse
