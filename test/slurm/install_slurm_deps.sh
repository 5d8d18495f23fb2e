#!/bin/bash
# install_slurm_deps.sh -- install the Debian packages that the Slurm test
# (test/slurm/run_slurm_test.sh) needs, if any is missing.
#
#   munge          munged, the authentication daemon Slurm talks through
#   slurmctld      the controller
#   slurmd         the node daemon (pulls in slurm-wlm-basic-plugins, which
#                  holds mpi/pmix and proctrack/linuxproc)
#   slurm-client   sbatch, srun, squeue, scontrol
#   libpmix-dev    the unversioned libpmix.so that Slurm's mpi/pmix plugin
#                  dlopens (without it `srun --mpi=pmix` cannot work)
#   openmpi-bin    mpirun (normally there already: ./setup.sh installs it)
#   procps         pgrep/ps, used to check that no daemon is left behind
#
# apt-get update runs only when something is missing; sudo is used only when
# not root.  Exit 0: everything is installed; exit 1: apt failed (the message
# says which packages).  Nothing is configured or started here: the test
# brings up its own private cluster under a temporary directory.
set -u

pkgs="munge slurmctld slurmd slurm-client libpmix-dev openmpi-bin procps"
missing=""
for p in $pkgs; do
    # "install ok installed" only: a removed-but-configured package is missing
    if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "install_slurm_deps: missing:$missing, and not root and no sudo" >&2
        exit 1
    fi
    SUDO="sudo -n"
fi
echo "install_slurm_deps: installing missing packages:$missing" >&2
log=$(mktemp "${TMPDIR:-/tmp}/install_slurm_deps.XXXXXX.log") || exit 1
if ! $SUDO apt-get update -qq </dev/null >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "install_slurm_deps: apt-get update failed (log $log)" >&2
    exit 1
fi
# noninteractive: no debconf question may wait on stdin (CI has none); no
# recommends (slurm-wlm-basic-plugins, a dependency, has all the test uses).
# Debian's maintainer scripts may try to start the system munge/slurm
# services; the test does not use them (own sockets, ports and key).
if ! $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        $missing </dev/null >>"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "install_slurm_deps: apt-get install$missing failed (log $log)" >&2
    exit 1
fi
rm -f "$log"
exit 0
