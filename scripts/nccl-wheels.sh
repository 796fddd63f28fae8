#!/usr/bin/env bash
# Fetches the NCCL wheels of scripts/nccl-wheels.txt from PyPI into a cache that
# later runs reuse, keeping only what the ABI check (tests/nccl_library.rs) needs:
#   $FABRICBENCH_NCCL_CACHE/<package>-<version>/lib/libnccl.so.2
#   $FABRICBENCH_NCCL_CACHE/<package>-<version>/include/nccl.h
# FABRICBENCH_NCCL_CACHE defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/fabricbench/nccl.
# A fetch prints what it downloaded and how long it took; a wheel that cannot be
# fetched is one line on stderr and exit status 1, never a cache that looks filled.
# Usage: scripts/nccl-wheels.sh        (prints each wheel's cached directory)
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${FABRICBENCH_NCCL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fabricbench/nccl}
python=${PYTHON:-python3}
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.fetch-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# fetch PACKAGE VERSION DIR: downloads the wheel, keeps its library and header in
# DIR (moved there whole, so an interrupted fetch leaves nothing that looks cached).
fetch() {
    local package=$1 version=$2 dir=$3 t0 wheel
    "$python" -m pip --version >/dev/null 2>&1 \
        || { echo "nccl-wheels.sh: $python has no pip: run scripts/setup.sh (python3-pip)" >&2; return 1; }
    t0=$(date +%s)
    rm -rf "$tmp/wheel" "$tmp/out"
    if ! "$python" -m pip download --no-cache-dir --progress-bar off --no-deps --only-binary=:all: --dest "$tmp/wheel" \
            "$package==$version" > "$tmp/pip.log" 2>&1; then
        # pip's last error, and why it could not connect when that was the cause.
        local why cause
        why=$(grep -v '^\s*$' "$tmp/pip.log" | tail -n 1)
        cause=$(grep -m 1 -o "Failed to establish a new connection: [^')]*\|Read timed out\|SSLError([^)]*" "$tmp/pip.log" || true)
        echo "nccl-wheels.sh: cannot download $package==$version from PyPI (${PIP_INDEX_URL:-the default index}): $why${cause:+ ($cause)}" >&2
        return 1
    fi
    wheel=$(ls "$tmp"/wheel/*.whl)
    "$python" - "$wheel" "$tmp/out" <<'PY' || return 1
import os, sys, zipfile
wanted = {"nvidia/nccl/lib/libnccl.so.2": "lib/libnccl.so.2",
          "nvidia/nccl/include/nccl.h": "include/nccl.h"}
with zipfile.ZipFile(sys.argv[1]) as z:
    for member, target in wanted.items():
        if member not in z.namelist():
            sys.exit(f"nccl-wheels.sh: {os.path.basename(sys.argv[1])} has no {member}")
        path = os.path.join(sys.argv[2], target)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(member) as src, open(path, "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
PY
    mv "$tmp/out" "$dir"
    echo "nccl-wheels.sh: fetched $package $version ($(du -m "$wheel" | cut -f1) MiB wheel) in $(( $(date +%s) - t0 )) s; kept $(du -sm "$dir" | cut -f1) MiB in $dir" >&2
}

while read -r package version; do
    dir="$cache/$package-$version"
    if [ ! -s "$dir/lib/libnccl.so.2" ] || [ ! -s "$dir/include/nccl.h" ]; then
        rm -rf "$dir"
        fetch "$package" "$version" "$dir"
    fi
    echo "$dir"
done < <(grep -v '^\s*\(#\|$\)' scripts/nccl-wheels.txt)
