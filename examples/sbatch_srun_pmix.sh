#!/bin/bash
# sbatch_srun_pmix.sh -- gpuring's allreduce benchmark in a Slurm batch job,
# ranks started directly by Slurm (srun --mpi=pmix, no mpirun); gpuring is
# selected for the whole job through an MCA parameter file.
#
#   cd <gpuring tree> && sbatch examples/sbatch_srun_pmix.sh
#
# srun needs Slurm's PMIx plugin (mpi/pmix, in slurm-wlm-basic-plugins on
# Debian, which dlopens the libpmix.so of libpmix-dev); Debian's Open MPI
# 4.1 starts under --mpi=pmix only, not pmi2. `srun --mpi=list` shows what
# this Slurm has.
#
# Optional environment (sbatch hands the submitting shell's environment to
# the job; relative paths are from the directory sbatch was run in):
#   GPURING_MCA_PARAMS_FILE  MCA parameter file (default
#                          examples/mca-params.conf of the submit directory)
#   GPURING_PERF           benchmark to run (default test/perf/allreduce_perf)
#   GPURING_PERF_ARGS      its arguments (default "-b 8 -e 64M -f 4")
#   GPURING_CHECK          a second program to run the same way, e.g.
#                          test/mpi/allreduce_check (default: none)
#   GPURING_CHECK_ARGS     its arguments
#   GPURING_NP             ranks (default: the job's task count)
#   GPURING_COMPONENT_DIR  directory with mca_coll_gpuring.so when it is not
#                          installed in Open MPI's component directory
#
# job name shown by squeue
#SBATCH --job-name=gpuring-srun
# one node, two ranks (more: -N 2 -n 8 --ntasks-per-node=4 at submission; -n
# too, since this --ntasks would win over --ntasks-per-node)
#SBATCH --nodes=1
#SBATCH --ntasks=2
# wall-clock limit: Slurm kills the job after this
#SBATCH --time=00:10:00
# stdout and stderr of the job (%x job name, %j job id), in the submit directory
#SBATCH --output=%x-%j.out

set -u

# Every rank reads this parameter file in MPI_Init: it selects gpuring
# (coll = gpuring,...) and lets it take host buffers. OMPI_MCA_* variables
# still override single parameters (e.g. OMPI_MCA_coll_gpuring_verbose=3).
# The job script runs from a copy in Slurm's spool, so the default path is
# taken from the submit directory, not from $0.
export OMPI_MCA_mca_base_param_files=${GPURING_MCA_PARAMS_FILE:-$SLURM_SUBMIT_DIR/examples/mca-params.conf}

# Find mca_coll_gpuring.so outside Open MPI's component directory: that
# directory first, then Open MPI's own (pkglibdir). Not needed after
# ./setup.sh, which installs into pkglibdir.
if [ -n "${GPURING_COMPONENT_DIR:-}" ]; then
    ompi_pkglibdir=$(ompi_info --path pkglibdir --parsable | cut -d: -f3)
    export OMPI_MCA_mca_base_component_path="$GPURING_COMPONENT_DIR:$ompi_pkglibdir"
fi

np=${GPURING_NP:-${SLURM_NTASKS:-2}}
perf=${GPURING_PERF:-test/perf/allreduce_perf}
read -r -a perf_args <<< "${GPURING_PERF_ARGS:--b 8 -e 64M -f 4}"
# srun options: --mpi=pmix gives each rank its PMIx server (slurmstepd), from
# which Open MPI learns rank, size and peers; -n ranks; --overcommit lets a
# step run more ranks than the allocation has CPUs (without it, such a srun
# waits for CPUs that never come); stdout/stderr of all ranks go to the job's
# output file.
srun_opts=(--mpi=pmix -n "$np" --overcommit)

echo "gpuring job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: srun ${srun_opts[*]}, params $OMPI_MCA_mca_base_param_files"
if [ ! -r "$OMPI_MCA_mca_base_param_files" ]; then
    echo "gpuring job: cannot read $OMPI_MCA_mca_base_param_files" >&2
    exit 2
fi
rc=0
# The benchmark: one row per size; #wrong counts wrong elements (0 expected).
srun "${srun_opts[@]}" "$perf" "${perf_args[@]}"
r=$?
echo "gpuring job: $perf exit $r"
[ $r != 0 ] && rc=$r

# Optional second program, e.g. the correctness test (ends "N passed, N failed").
if [ -n "${GPURING_CHECK:-}" ]; then
    read -r -a check_args <<< "${GPURING_CHECK_ARGS:-}"
    srun "${srun_opts[@]}" "$GPURING_CHECK" "${check_args[@]}"
    r=$?
    echo "gpuring job: $GPURING_CHECK exit $r"
    [ $r != 0 ] && rc=$r
fi
# The job's exit code (scontrol show job: ExitCode) is the first failure's.
exit $rc
