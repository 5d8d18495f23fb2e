#!/bin/bash
# sbatch_mpirun.sh -- gpuring's allreduce benchmark in a Slurm batch job,
# ranks started by Open MPI's mpirun inside the allocation; gpuring is
# selected for the whole job through OMPI_MCA_* environment variables.
#
#   cd <gpuring tree> && sbatch examples/sbatch_mpirun.sh
#   sbatch -N 2 -n 8 --ntasks-per-node=4 examples/sbatch_mpirun.sh   (options on
#                                   the command line override the #SBATCH ones)
#   sbatch -N 2 -n 8 --ntasks-per-node=4 --gpus-per-node=4 \
#       --export=ALL,GPURING_PERF_ARGS="-m device -b 8 -e 256M -f 4" \
#       examples/sbatch_mpirun.sh   device buffers, one rank per GPU (README:
#                                   "GPU jobs")
#
# Optional environment (sbatch hands the submitting shell's environment to
# the job; relative paths are from the directory sbatch was run in):
#   GPURING_PERF           benchmark to run (default test/perf/allreduce_perf)
#   GPURING_PERF_ARGS      its arguments (default "-b 8 -e 64M -f 4")
#   GPURING_CHECK          a second program to run the same way, e.g.
#                          test/mpi/allreduce_check (default: none)
#   GPURING_CHECK_ARGS     its arguments
#   GPURING_NP             ranks (default: the job's task count)
#   GPURING_MPIRUN         the command that starts the ranks, split into words
#                          at spaces (default mpirun; e.g. a site's wrapper, or
#                          "test/cudacpu/run mpirun": device buffers on the
#                          CUDA CPU runtime, no GPU)
#   GPURING_COMPONENT_DIR  directory with mca_coll_gpuring.so when it is not
#                          installed in Open MPI's component directory
#
# Slurm reads #SBATCH lines up to the first command; a comment inside an
# #SBATCH line is not allowed, hence the comment lines above each one.
#
# job name shown by squeue
#SBATCH --job-name=gpuring-mpirun
# one node, two ranks (more: -N 2 -n 8 --ntasks-per-node=4 at submission; -n
# too, since this --ntasks would win over --ntasks-per-node)
#SBATCH --nodes=1
#SBATCH --ntasks=2
# wall-clock limit: Slurm kills the job after this
#SBATCH --time=00:10:00
# stdout and stderr of the job (%x job name, %j job id), in the submit directory
#SBATCH --output=%x-%j.out

set -u

# Find mca_coll_gpuring.so outside Open MPI's component directory (a build
# tree's .libs, --with-component-dir=DIR): that directory first, then Open
# MPI's own (pkglibdir), or the other components are lost. Not needed after
# ./setup.sh, which installs into pkglibdir.
if [ -n "${GPURING_COMPONENT_DIR:-}" ]; then
    ompi_pkglibdir=$(ompi_info --path pkglibdir --parsable | cut -d: -f3)
    export OMPI_MCA_mca_base_component_path="$GPURING_COMPONENT_DIR:$ompi_pkglibdir"
fi

# Select gpuring for every communicator of the job. The list names the
# components that may be used; gpuring (priority 90) takes MPI_Allreduce,
# MPI_Iallreduce, MPI_Reduce_scatter(_block), MPI_Allgather, MPI_Bcast and
# MPI_Reduce, and falls back to tuned for what it does not handle.
export OMPI_MCA_coll=${OMPI_MCA_coll:-gpuring,tuned,libnbc,basic,self}
# The benchmark reduces host memory: let gpuring run those calls (by default
# it only takes device buffers).
export OMPI_MCA_coll_gpuring_host_buffers=${OMPI_MCA_coll_gpuring_host_buffers:-1}
# Verbosity 3: each rank prints "[gpuring rank R] comm ... ready: ..." on
# stderr when gpuring sets up a communicator, which proves it ran.
export OMPI_MCA_coll_gpuring_verbose=${OMPI_MCA_coll_gpuring_verbose:-3}

# mpirun refuses to run as root unless told twice (containers, test clusters).
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# Ranks: the job's task count. mpirun also learns the nodes and slots from
# Slurm by itself; --oversubscribe allows more ranks than slots when asked.
np=${GPURING_NP:-${SLURM_NTASKS:-2}}
read -r -a mpirun <<< "${GPURING_MPIRUN:-}" # (words: no spaces inside one)
[ ${#mpirun[@]} -gt 0 ] || mpirun=(mpirun)
perf=${GPURING_PERF:-test/perf/allreduce_perf}
read -r -a perf_args <<< "${GPURING_PERF_ARGS:--b 8 -e 64M -f 4}"

echo "gpuring job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: ${mpirun[*]} -np $np, OMPI_MCA_coll=$OMPI_MCA_coll"
rc=0
# The benchmark: one row per size; #wrong counts wrong elements (0 expected).
"${mpirun[@]}" -np "$np" --oversubscribe "$perf" "${perf_args[@]}"
r=$?
echo "gpuring job: $perf exit $r"
[ $r != 0 ] && rc=$r

# Optional second program, e.g. the correctness test (ends "N passed, N failed").
if [ -n "${GPURING_CHECK:-}" ]; then
    read -r -a check_args <<< "${GPURING_CHECK_ARGS:-}"
    "${mpirun[@]}" -np "$np" --oversubscribe "$GPURING_CHECK" "${check_args[@]}"
    r=$?
    echo "gpuring job: $GPURING_CHECK exit $r"
    [ $r != 0 ] && rc=$r
fi
# The job's exit code (scontrol show job: ExitCode) is the first failure's.
exit $rc
