#!/bin/sh
# pack_for_gpu.sh -- run HERE (the build machine, with Debian's package
# archive), before calling the GPU machine: fills .gpu-carry/ (ignored by
# git) with what test/gpu/run_gpu_tests.sh and test/gpu/bench_gpu.sh need
# there and cannot get there (the GPU machine has no package registry and no
# Open MPI):
#   .gpu-carry/debs/        Debian 12's Open MPI 4.1.4, UCX (and ucx-utils:
#                           ucx_perftest, bench_gpu.sh's bound for the net
#                           path), hwloc, PMIx and
#                           the libraries they load (apt-get download; no
#                           libc, libstdc++ or other base packages: the GPU
#                           machine's own are newer and compatible)
#   .gpu-carry/component/   mca_coll_gpuring.so, as built here
#   .gpu-carry/bin/         allreduce_check, device_coll_check, allreduce_perf, test_reduce_cuda,
#                           test_exec_cuda, ipc_probe, as built here
# About 40 MB.  Then, with the device tool:
#   run(command="GPURING_GPU_OUT=$OUT test/gpu/run_gpu_tests.sh", carry=[".gpu-carry"])
# run_gpu_tests.sh unpacks the .debs with dpkg-deb -x into a temporary root
# and points Open MPI at it (OPAL_PREFIX and friends, LD_LIBRARY_PATH).
#
# Usage: test/gpu/pack_for_gpu.sh   (after make check; GPURING_BUILDDIR names the
# build tree when it is not the source tree)
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${GPURING_BUILDDIR:-$top}
out="$top/.gpu-carry"

# the runtime closure of Debian 12's libopenmpi3 + openmpi-bin, less base packages
pkgs="openmpi-bin libopenmpi3 openmpi-common libucx0 ucx-utils libgomp1 libhwloc15 libhwloc-plugins libpmix2
      libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libpsm-infinipath1 libpsm2-2
      libibverbs1 ibverbs-providers librdmacm1 libnl-3-200 libnl-route-3-200 libnuma1
      libpciaccess0 libxnvctrl0 libmunge2 libxml2 libicu72 libx11-6 libx11-data libxext6
      libxcb1 libxau6 libxdmcp6 libbsd0 libmd0 ocl-icd-libopencl1 libltdl7"

for f in .libs/mca_coll_gpuring.so test/mpi/allreduce_check test/mpi/device_coll_check \
         test/mpi/colls_check test/mpi/iallreduce_check test/mpi/mix_check test/perf/allreduce_perf \
         test/gpu/test_reduce_cuda test/gpu/test_exec_cuda test/gpu/ipc_probe; do
    if [ ! -f "$builddir/$f" ]; then
        echo "pack_for_gpu: $builddir/$f is not built (run make check first)" >&2
        exit 1
    fi
done

# the GPU machine's architecture (H100, H200: sm_90) among those the kernels were built
# for: else its driver would JIT-compile PTX in every rank of every run (a build for
# this machine's quick checks, --with-cuda-arch=75, has none of it)
want_arch=${GPURING_GPU_ARCH:-90}
archs=$(sed -n 's/^GPURING_CUDA_ARCHS = //p' "$builddir/Makefile" 2>/dev/null || true)
case " $archs " in
*" $want_arch "*) ;;
*)
    echo "pack_for_gpu: the build in $builddir is for sm_${archs:-?} (GPURING_CUDA_ARCHS), not" \
         "sm_$want_arch: ./configure --with-cuda-arch=$want_arch (or the default list) and" \
         "make check first (GPURING_GPU_ARCH names another)" >&2
    exit 1
    ;;
esac

rm -rf "$out"
mkdir -p "$out/debs" "$out/component" "$out/bin"
# shellcheck disable=SC2086
(cd "$out/debs" && apt-get download $pkgs >/dev/null 2>"$out/debs.err") || {
    cat "$out/debs.err" >&2
    echo "pack_for_gpu: apt-get download failed (run apt-get update?)" >&2
    exit 1
}
rm -f "$out/debs.err"
cp "$builddir/.libs/mca_coll_gpuring.so" "$out/component/"
cp "$builddir/test/mpi/allreduce_check" "$builddir/test/mpi/device_coll_check" \
   "$builddir/test/mpi/colls_check" "$builddir/test/mpi/iallreduce_check" \
   "$builddir/test/mpi/mix_check" "$builddir/test/perf/allreduce_perf" \
   "$builddir/test/gpu/test_reduce_cuda" "$builddir/test/gpu/test_exec_cuda" \
   "$builddir/test/gpu/ipc_probe" "$out/bin/"
echo "pack_for_gpu: $(du -sh "$out" | cut -f1) in $out"
