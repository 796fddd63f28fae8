#!/usr/bin/env bash
# The test command: unit tests and multi-rank integration tests (they launch
# mpirun themselves). Runs as root too, on any core count.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
cargo test --locked -- --test-threads=2
