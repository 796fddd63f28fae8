#!/usr/bin/env bash
# Installs what fabricbench needs on a fresh Debian/Ubuntu machine (run as root):
# Open MPI (build and run), MPICH beside it (mpicc.mpich, mpiexec.mpich: the
# MPICH build of scripts/test.sh and the launcher-mismatch test; Debian keeps
# mpicc and mpirun on Open MPI), libclang and cmake (bindings), libibverbs (verbs
# binaries, loaded at run time), perftest (side-by-side checks), Python's
# pandas and matplotlib (the notebook checks), nbconvert, nbclient and ipykernel
# (scripts/compare.ipynb executed headless), pip (scripts/nccl-wheels.sh fetches
# the NCCL wheels of the ABI check), and for the virtual rack and its
# tests (scripts/virtual-rack.sh, tests/virtual_rack.rs): iproute2 (ip, tc), nftables
# (`fault loss`), iputils-ping (rack_check's path probe after a hung test),
# util-linux (nsenter, unshare, setpriv), and Debian's chromium with python3-pil
# (report.html rendered and its screenshot checked); man-db (tests/docs_drift.rs
# reads every generated man page with `man -l`); mmdebstrap and umoci (the
# container image of scripts/image.sh and its check, scripts/image-check.sh);
# Slurm with munge (slurmctld, slurmd, slurm-client, munge: scripts/slurm-ci.sh
# starts them on the virtual rack; no service of theirs is enabled or started here).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(openmpi-bin libopenmpi-dev mpich libmpich-dev libclang-dev clang cmake pkg-config
          libibverbs1 ibverbs-providers libibverbs-dev rdma-core perftest
          python3 python3-pip python3-pandas python3-matplotlib
          python3-nbconvert python3-nbclient python3-ipykernel
          iproute2 nftables iputils-ping util-linux chromium python3-pil man-db mmdebstrap umoci
          slurmctld slurmd slurm-client munge)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "setup.sh: cargo not found: install Rust (rustup or Debian's cargo) first" >&2; exit 1; }
echo "setup.sh: ready (${#missing[@]} packages installed)"
