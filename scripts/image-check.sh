#!/usr/bin/env bash
# Checks the container image itself, not only its recipe: builds it with
# scripts/image.sh from the binaries in BINDIR (default target/debug, the build
# scripts/test.sh already made), then
#   - neither the root filesystem tar nor the OCI layout's layer holds an SSH
#     host key, both hold /run/sshd and the entrypoint, and the layout's config
#     starts the entrypoint;
#   - inside the root filesystem (unpacked, with /proc, /sys, /dev and a fresh
#     /dev/shm mounted in a private mount namespace, so they go when it ends):
#     `mpirun -np 2 all_reduce_perf` validates (#wrong 0), and the entrypoint
#     generates host keys after which `sshd -t` passes.
# Everything goes in a temporary folder removed at the end, also on failure.
# Fails (non-zero, one line saying what) when any check fails. Run as root.
#
#   scripts/image-check.sh [-b BINDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
bindir=$repo/target/debug
while getopts "b:" opt; do
    case $opt in
        b) bindir=$OPTARG ;;
        *) echo "image-check.sh: usage: image-check.sh [-b BINDIR]" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "image-check.sh: run as root (mmdebstrap, chroot, mounts)" >&2; exit 1; }
for tool in python3 unshare chroot; do
    command -v "$tool" >/dev/null || { echo "image-check.sh: $tool not found: run scripts/setup.sh" >&2; exit 1; }
done
fail() { echo "image-check.sh: FAILED: $*" >&2; exit 1; }

start=$SECONDS
work=$(mktemp -d /tmp/fabricbench-image-check.XXXXXX)
# --one-file-system: were a mount of the check ever left behind, the host's
# /dev would not be emptied through it.
trap 'rm -rf --one-file-system "$work"' EXIT
tag=check
"$here/image.sh" -o "$work/out" -t "fabricbench:$tag" -b "$bindir" >"$work/image.log" 2>&1 \
    || { cat "$work/image.log" >&2; fail "scripts/image.sh did not build the image (its output above)"; }
grep '^image.sh: ' "$work/image.log"
tar=$work/out/fabricbench-$tag.rootfs.tar
layout=$work/out/fabricbench

# The contents every listing must show, and what none may.
check_listing() { # WHAT LISTING-FILE
    local what=$1 list=$2 path
    if grep -E '^(\./)?etc/ssh/ssh_host_' "$list" >&2; then fail "$what holds SSH host keys (above): they must be made when a container starts"; fi
    for path in run/sshd/ usr/local/bin/fabricbench-entrypoint usr/local/bin/all_reduce_perf usr/sbin/sshd usr/bin/mpirun; do
        grep -qxE "(\./)?$path" "$list" || fail "$what lacks /$path"
    done
}
tar -tf "$tar" >"$work/tar.list"
check_listing "the root filesystem tar" "$work/tar.list"
# The layout: index -> manifest -> its layers and config.
python3 - "$layout" "$tag" >"$work/layout.txt" <<'EOF' || fail "the OCI layout $layout has no manifest for tag $2"
import json, sys
layout, tag = sys.argv[1], sys.argv[2]
blob = lambda d: f"{layout}/blobs/{d['digest'].replace(':', '/')}"
index = json.load(open(f"{layout}/index.json"))
manifest = next(m for m in index["manifests"]
                if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag)
manifest = json.load(open(blob(manifest)))
config = json.load(open(blob(manifest["config"])))
print("entrypoint", " ".join(config["config"].get("Entrypoint") or []))
for layer in manifest["layers"]:
    print("layer", blob(layer))
EOF
grep -qx 'entrypoint /usr/local/bin/fabricbench-entrypoint' "$work/layout.txt" \
    || fail "the layout's config does not start /usr/local/bin/fabricbench-entrypoint: $(grep entrypoint "$work/layout.txt")"
layers=$(sed -n 's/^layer //p' "$work/layout.txt")
[ "$(wc -l <<<"$layers")" = 1 ] || fail "the layout has $(wc -l <<<"$layers") layers, expected the one of the root filesystem"
tar -tzf "$layers" >"$work/layer.list"
check_listing "the OCI layout's layer" "$work/layer.list"
echo "image-check.sh: no SSH host key in the tar or the layout; /run/sshd and the entrypoint in both"

# Inside the image's root filesystem.
root=$work/root
mkdir "$root"
tar -xpf "$tar" -C "$root" --numeric-owner
inside() { # COMMAND...: in the image's root, with /proc, /sys, /dev, /dev/shm
    timeout 300 unshare --mount --propagation private -- sh -c '
        root=$1; shift
        mount --bind /proc "$root/proc" && mount --bind /sys "$root/sys" &&
        mount --bind /dev "$root/dev" && mount -t tmpfs -o size=256m shm "$root/dev/shm" &&
        exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            HOME=/root sh -c "cd /root && exec \"\$@\"" sh "$@"' sh "$root" "$@"
}
mpi_out=$(inside mpirun --allow-run-as-root --oversubscribe -np 2 all_reduce_perf -b 8 -e 1M -f 4 2>&1) \
    || { echo "$mpi_out" >&2; fail "mpirun -np 2 all_reduce_perf in the image exited non-zero (output above)"; }
grep -qx '# Out of bounds values : 0 OK' <<<"$mpi_out" \
    || { echo "$mpi_out" >&2; fail "all_reduce_perf in the image did not validate: no '# Out of bounds values : 0 OK' (output above)"; }
grep -E "^#( +Rank| (Build|Transport|Out of bounds|Avg bus))" <<<"$mpi_out" | sed "s/^/image-check.sh: in the image: /"

! ls "$root"/etc/ssh/ssh_host_* >/dev/null 2>&1 || fail "the unpacked image holds SSH host keys"
ssh_out=$(inside /usr/local/bin/fabricbench-entrypoint /usr/sbin/sshd -t 2>&1) \
    || { echo "$ssh_out" >&2; fail "sshd -t after the entrypoint failed in the image (output above)"; }
keys=$(cd "$root/etc/ssh" && ls ssh_host_*_key 2>/dev/null | xargs)
[ -n "$keys" ] || fail "the entrypoint generated no SSH host key"
echo "image-check.sh: entrypoint made $keys; sshd -t passed"
echo "image-check.sh: ok in $((SECONDS - start)) s"
