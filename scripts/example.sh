#!/usr/bin/env bash
# The main job on this host: all_reduce_perf on 4 ranks of the mpi backend, 8 B to
# 128 MiB, the table on stdout and a CSV under results/.
#   scripts/example.sh [extra all_reduce_perf flags]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin all_reduce_perf
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mkdir -p results
csv="results/all_reduce-np4-$(date -u +%Y%m%dT%H%M%SZ).csv"
mpirun -np 4 target/release/all_reduce_perf -b 8 -e 128M -f 2 --backend mpi --csv "$csv" "$@"
echo "# rows written to $csv"
