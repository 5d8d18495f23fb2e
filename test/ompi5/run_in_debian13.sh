#!/bin/bash
# run_in_debian13.sh -- gpuring's two README commands on Debian 13 (Open MPI
# 5.0, UCX 1.18, hwloc 2.12, gcc 14, Slurm 24.11), in a debootstrap root made
# from Debian's archive on this machine: CI's second job, and the way a
# developer checks Open MPI 5 by hand.
#
#   test/ompi5/run_in_debian13.sh              ./setup.sh, then make check
#   test/ompi5/run_in_debian13.sh CMD ...      run CMD in the copied tree instead
#   test/ompi5/run_in_debian13.sh --prepare    only make the root and install the
#                                              packages the two commands use
#                                              (setup.sh --deps, Slurm's), so a
#                                              later run starts building at once:
#                                              .ci/run does this while the first
#                                              job builds
#
# The root (GPURING_DEB13_ROOT, default /var/tmp/gpuring-debian13) is made
# once (debootstrap --variant=minbase trixie, about 40 s) and reused; the
# source tree (what git tracks, plus untracked files it does not ignore) is
# copied fresh into it every run, so no build of the host leaks in.  /proc,
# /sys (with /sys/fs/cgroup, which slurmd needs), /dev, /dev/pts and /dev/shm
# are bound in, /etc/hosts and /etc/resolv.conf copied, and a policy-rc.d
# keeps packages from starting services; everything is unmounted on exit,
# whatever happens.  Needs root and debootstrap (installed if missing).
# GPURING_DEB13_MIRROR names the archive (default http://deb.debian.org/debian).
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
root=${GPURING_DEB13_ROOT:-/var/tmp/gpuring-debian13}
mirror=${GPURING_DEB13_MIRROR:-http://deb.debian.org/debian}

if [ "$(id -u)" -ne 0 ]; then
    echo "run_in_debian13: needs root (debootstrap, chroot, mounts)" >&2
    exit 2
fi

mounted=()
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -R "${mounted[$i]}" 2>/dev/null || umount -R -l "${mounted[$i]}" 2>/dev/null || true
    done
}
trap cleanup EXIT INT TERM

if [ ! -x "$root/usr/bin/apt-get" ] || [ ! -f "$root/.gpuring-debootstrap-done" ]; then
    if ! command -v debootstrap >/dev/null 2>&1; then
        echo "run_in_debian13: installing debootstrap"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    fi
    echo "run_in_debian13: debootstrap trixie into $root"
    rm -rf "$root"
    mkdir -p "$root"
    debootstrap --variant=minbase trixie "$root" "$mirror" >"$root.debootstrap.log" 2>&1 || {
        tail -n 20 "$root.debootstrap.log" >&2
        echo "run_in_debian13: debootstrap failed (log: $root.debootstrap.log)" >&2
        exit 1
    }
    touch "$root/.gpuring-debootstrap-done"
fi
cp /etc/hosts /etc/resolv.conf "$root/etc/"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"

bind() { # bind SRC DST [--rbind]
    mkdir -p "$root$2"
    mount "${3:---bind}" "$1" "$root$2"
    [ "${3:-}" = --rbind ] && mount --make-rslave "$root$2"
    mounted+=("$root$2")
}
bind /proc /proc --rbind
bind /sys /sys --rbind
bind /dev /dev --bind
bind /dev/pts /dev/pts --bind
bind /dev/shm /dev/shm --bind

# a fresh copy of the tree
rm -rf "$root/build/gpuring"
mkdir -p "$root/build/gpuring"
(cd "$top" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - 2>/dev/null) |
    tar -xf - -C "$root/build/gpuring"

if [ $# -eq 0 ]; then
    set -- bash -c './setup.sh && make --no-print-directory check'
elif [ "$1" = --prepare ]; then
    set -- bash -c './setup.sh --deps && test/slurm/install_slurm_deps.sh'
fi
echo "run_in_debian13: in Debian 13 ($root): $*"
# (the CUDA executor's matrix on the CPU runtime makes no MPI call: by hand,
# after a make check that ran it in both fiber orders, forward only -- 1.6
# min less; CI gives each job one order: CUDACPU_EXEC_ORDERS; VERBOSE=1 makes
# make check print the failed tests' logs, as automake's harness does;
# CUDACPU_MPI_CASES and GPURING_TEST_SKIP choose cases, as CI's second job does)
chroot "$root" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" CI="${CI:-}" \
    CUDACPU_EXEC_ORDERS="${CUDACPU_EXEC_ORDERS:-forward}" VERBOSE="${VERBOSE:-}" \
    CUDACPU_MPI_CASES="${CUDACPU_MPI_CASES:-}" GPURING_TEST_SKIP="${GPURING_TEST_SKIP:-}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c 'cd /build/gpuring && exec "$@"' run_in_debian13 "$@"
