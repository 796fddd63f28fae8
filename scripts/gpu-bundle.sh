#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs on a GPU machine that has no MPI and no
# network, into gpu-bundle/ and packed as gpu-bundle.tar.xz (both git-ignored):
#   gpu-bundle/bin/  the *_perf binaries and copy_bw (release, stripped)
#   gpu-bundle/usr/  Open MPI's run-time libraries and components, and the hwloc,
#                    libevent and PMIx libraries they load, copied from this host's
#                    Debian packages (dpkg -L: the files `dpkg -x` of the same .deb
#                    unpacks), found there through LD_LIBRARY_PATH and OPAL_PREFIX.
# What travels must stay under the 64 MiB a device run carries; this script
# checks. Unpacked the bundle is larger (each collective binary holds the whole
# library, ~5.5 MiB), packed its near-identical binaries shrink to ~6 MiB.
# NCCL is not in it (its library alone is 190-450 MiB): the GPU machine needs its
# own, which scripts/gpu-check.sh's first step reports.
# Usage: scripts/gpu-bundle.sh    (then carry gpu-bundle.tar.xz to the GPU machine:
#                                  scripts/gpu-check.sh gpu-bundle.tar.xz)
set -euo pipefail
cd "$(dirname "$0")/.."

binaries=(all_reduce_perf all_gather_perf broadcast_perf reduce_perf reduce_scatter_perf
          alltoall_perf gather_perf scatter_perf sendrecv_perf copy_bw)
# The collectives of nccl-tests 2.19 added for #12, once their binaries exist.
for extra in alltoallv_perf hypercube_perf; do
    [ -f "bin/$extra.rs" ] && binaries+=("$extra")
done
packages=(libopenmpi3 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libpmix2)
limit_mib=64

cargo build --release --locked "${binaries[@]/#/--bin=}"

rm -rf gpu-bundle
mkdir -p gpu-bundle/bin
for b in "${binaries[@]}"; do
    cp "target/release/$b" gpu-bundle/bin/
done

for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || { echo "gpu-bundle.sh: package $p is not installed (run scripts/setup.sh)" >&2; exit 1; }
    # Shared objects and Open MPI's help texts; not the Fortran, Java, C++ and
    # OpenSHMEM bindings, which nothing here loads.
    dpkg -L "$p" | while read -r f; do
        [ -f "$f" ] || [ -L "$f" ] || continue
        case "$f" in
            */share/doc/*|*/man/*|*mpifh*|*usempi*|*java*|*oshmem*|*libmpi_cxx*|*ompitrace*) continue ;;
            *.so|*.so.*|/usr/share/openmpi/*|/usr/share/pmix/*) ;;
            *) continue ;;
        esac
        mkdir -p "gpu-bundle$(dirname "$f")"
        cp -P "$f" "gpu-bundle$f"
    done
done

# One xz stream over the tar: its 8 MiB window spans whole binaries, so the
# copies of the library compress to little.
tar -cf - gpu-bundle | xz -6 > gpu-bundle.tar.xz
mib() { echo $(( ($1 + 1048575) / 1048576 )); }
unpacked=$(mib "$(du -sb gpu-bundle | cut -f1)")
packed=$(mib "$(stat -c %s gpu-bundle.tar.xz)")
echo "gpu-bundle.sh: gpu-bundle.tar.xz is ${packed} MiB (gpu-bundle/ ${unpacked} MiB: ${#binaries[@]} binaries, Open MPI $(dpkg-query -W -f='${Version}' libopenmpi3)); no NCCL: the GPU machine needs its own (libnccl2, or pip's nvidia-nccl-cu12/-cu13)"
if [ "$packed" -ge "$limit_mib" ]; then
    echo "gpu-bundle.sh: gpu-bundle.tar.xz is over the ${limit_mib} MiB a device run carries" >&2
    exit 1
fi
