#!/usr/bin/env bash
# gpuring, command 1: install what is missing (Debian packages), build,
# install the component where Open MPI finds it, and run the main job: a real
# 4-rank MPI_Allreduce benchmark through gpuring.
#
#   ./setup.sh                 everything
#   ./setup.sh --no-demo       install + build + install the component only
#   ./setup.sh --deps          install the missing packages only
#   CONFIGURE_FLAGS="--with-component-dir=$HOME/.openmpi/components" ./setup.sh
set -euo pipefail
cd "$(dirname "$0")"

demo=1 deps_only=0
case "${1:-}" in
--no-demo) demo=0 ;;
--deps) deps_only=1 ;;
"") ;;
*) echo "setup: unknown option $1 (--no-demo, --deps)" >&2; exit 2 ;;
esac

# ---- 1. Debian packages ----------------------------------------------------------
pkgs="gcc g++ make autoconf automake libtool pkg-config libopenmpi-dev openmpi-bin libucx-dev libhwloc-dev ucx-utils"
missing=""
for p in $pkgs; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing missing packages:$missing"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
[ "$deps_only" = 1 ] && exit 0

# ---- 2. build and install --------------------------------------------------------
[ -x configure ] || autoreconf -fi
# configured anew where CONFIGURE_FLAGS differ from the tree's last configure's
if [ ! -f Makefile ] || { [ -n "${CONFIGURE_FLAGS:-}" ] &&
        [ "$(./config.status --config 2>/dev/null | tr -d "'")" != "$CONFIGURE_FLAGS" ]; }; then
    ./configure ${CONFIGURE_FLAGS:-}
fi
# the component and the test suite's programs in one make, so the longest
# compiles (nvcc's kernels, the sanitizer flavor's) share the CPUs; make check
# then only runs the suite
make -j"$(nproc)" all check-build
make install

# ---- 3. the main job ---------------------------------------------------------------
if [ "$demo" = 1 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
    echo
    echo "setup: 4-rank MPI_Allreduce through gpuring (host buffers; the '[gpuring rank N] ... ready' lines show gpuring set up the communicator)"
    timeout 300 mpirun -np 4 --oversubscribe \
        --mca coll_gpuring_host_buffers 1 --mca coll_gpuring_verbose 3 \
        test/perf/allreduce_perf -b 8 -e 16M -f 8 -n 10 -w 2
fi
