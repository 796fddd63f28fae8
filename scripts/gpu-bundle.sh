#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs on a GPU machine that has no MPI and no
# network, into gpu-bundle/ (git-ignored):
#   gpu-bundle/bin/  the *_perf binaries and copy_bw (release, stripped)
#   gpu-bundle/usr/  Open MPI's run-time libraries and components, and the hwloc,
#                    libevent and PMIx libraries they load, copied from this host's
#                    Debian packages (dpkg -L: the files `dpkg -x` of the same .deb
#                    unpacks), found there through LD_LIBRARY_PATH and OPAL_PREFIX.
# The bundle must stay under the 64 MiB a device run carries; this script checks.
# Usage: scripts/gpu-bundle.sh            (then carry gpu-bundle to the GPU machine)
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

size=$(du -sb gpu-bundle | cut -f1)
mib=$(( (size + 1048575) / 1048576 ))
echo "gpu-bundle.sh: gpu-bundle/ is ${mib} MiB (${#binaries[@]} binaries, Open MPI $(dpkg-query -W -f='${Version}' libopenmpi3))"
if [ "$mib" -ge "$limit_mib" ]; then
    echo "gpu-bundle.sh: over the ${limit_mib} MiB a device run carries" >&2
    exit 1
fi
