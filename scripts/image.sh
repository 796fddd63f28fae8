#!/usr/bin/env bash
# Builds fabricbench's container image from Debian bookworm packages and the
# release binaries, with no container engine and no registry: an OCI image
# layout (umoci; push it with skopeo) and a root filesystem tar (what
# `docker import` and `podman import` take). Run as root (mmdebstrap's root mode).
#
#   scripts/image.sh [-o DIR] [-t NAME:TAG] [-b BINDIR] [-c CACHE]
#
#   -o DIR       output folder (default target/image): DIR/NAME is the OCI
#                layout (tag TAG), DIR/NAME-TAG.rootfs.tar the root filesystem
#   -t NAME:TAG  default fabricbench:<the crate's version>
#   -b BINDIR    take the binaries from BINDIR (stripped on the way in) instead of
#                building them with `cargo build --release --locked --bins`
#   -c CACHE     keep the downloaded .deb files here between runs (default
#                $FABRICBENCH_IMAGE_CACHE or /var/cache/fabricbench-image); apt
#                checks each against the fresh package lists before using it
#
# The packages are scripts/image/packages.txt (Open MPI, rdma-core, libibverbs and
# its providers, openssh-server and -client); scripts/image/finish.sh installs
# the entrypoint, which generates the SSH host keys when a container starts
# (the image holds none) and makes /run/sshd. NCCL is not in the image: it comes
# from the host through the NVIDIA Container Toolkit, or from a layer the user
# adds (docs/launching.md). The mirror is $FABRICBENCH_DEBIAN_MIRROR or
# http://deb.debian.org/debian (its -security twin is derived from it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
usage="usage: image.sh [-o DIR] [-t NAME:TAG] [-b BINDIR] [-c CACHE]"

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n 1)
out=$repo/target/image
ref=fabricbench:$version
bindir=""
cache=${FABRICBENCH_IMAGE_CACHE:-/var/cache/fabricbench-image}
while getopts "o:t:b:c:h" opt; do
    case $opt in
        o) out=$OPTARG ;;
        t) ref=$OPTARG ;;
        b) bindir=$OPTARG ;;
        c) cache=$OPTARG ;;
        h) echo "$usage"; exit 0 ;;
        *) echo "image.sh: $usage" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "image.sh: unexpected argument '$1': $usage" >&2; exit 2; }
case $ref in
    *:*:* | :* | *: | *[!A-Za-z0-9._:-]*) echo "image.sh: -t '$ref' is not NAME:TAG (letters, digits, '.', '_', '-'): e.g. -t fabricbench:$version" >&2; exit 2 ;;
    *:*) name=${ref%%:*}; tag=${ref#*:} ;;
    *) echo "image.sh: -t '$ref' has no tag: e.g. -t $ref:$version" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "image.sh: run as root (mmdebstrap's root mode keeps file owners)" >&2; exit 1; }
for tool in mmdebstrap umoci strip; do
    command -v "$tool" >/dev/null || { echo "image.sh: $tool not found: run scripts/setup.sh" >&2; exit 1; }
done

# The crate's binaries, by the [[bin]] names of Cargo.toml.
mapfile -t bins < <(awk '/^\[\[bin\]\]/ {b = 1; next} b && /^name *=/ {gsub(/^name *= *"|".*$/, ""); print; b = 0}' "$repo/Cargo.toml")
[ ${#bins[@]} -gt 0 ] || { echo "image.sh: no [[bin]] in $repo/Cargo.toml" >&2; exit 1; }
if [ -z "$bindir" ]; then
    (cd "$repo" && cargo build --release --locked --bins)
    bindir=$repo/target/release
fi
bindir=$(cd "$bindir" && pwd) || { echo "image.sh: -b '$bindir' is not a folder" >&2; exit 2; }
missing=()
for b in "${bins[@]}"; do [ -x "$bindir/$b" ] || missing+=("$b"); done
[ ${#missing[@]} -eq 0 ] || { echo "image.sh: $bindir lacks ${missing[*]}: build them (cargo build --release --locked --bins) or give -b" >&2; exit 1; }

mkdir -p "$out" "$cache"
out=$(cd "$out" && pwd)
cache=$(cd "$cache" && pwd)
work=$(mktemp -d "$out/.image.XXXXXX")
trap 'rm -rf "$work"' EXIT

packages=$(sed 's/#.*//' "$here/image/packages.txt" | xargs | tr ' ' ',')
mirror=${FABRICBENCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The binaries go in stripped (a debug build's line tables are ~30 MB a binary).
mkdir "$work/bin"
for b in "${bins[@]}"; do strip -o "$work/bin/$b" "$bindir/$b"; done

start=$SECONDS
tar=$work/rootfs.tar
# --skip=download/empty and essential/unlink keep the .deb files for the cache
# (sync-out), finish.sh then drops them from the image. mmdebstrap's own
# cleanup of /run would remove finish.sh's /run/sshd: the hook before it empties
# /run instead. The dpkg options leave
# out documentation and translations (copyright files stay) and skip fsync.
mmdebstrap --quiet --variant=apt --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='force-unsafe-io' \
    --skip=download/empty --skip=essential/unlink --skip=cleanup/run \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
    --setup-hook="sync-in '$cache' /var/cache/apt/archives/" \
    --customize-hook="sync-out /var/cache/apt/archives '$cache'" \
    --customize-hook="cp -a '$work/bin/.' \"\$1/usr/local/bin/\"" \
    --customize-hook='find "$1/run" -mindepth 1 -maxdepth 1 ! -name lock -exec rm -rf --one-file-system {} +' \
    --customize-hook="'$here/image/finish.sh' \"\$1\"" \
    bookworm "$tar" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb $mirror-security bookworm-security main" </dev/null
echo "image.sh: root filesystem in $((SECONDS - start)) s"

start=$SECONDS
layout=$work/$name
umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci raw add-layer --image "$layout:$tag" "$tar"
umoci config --image "$layout:$tag" \
    --config.entrypoint /usr/local/bin/fabricbench-entrypoint --config.cmd /bin/bash \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.workingdir /root \
    --config.label org.opencontainers.image.title=fabricbench \
    --config.label "org.opencontainers.image.version=$version"
umoci gc --layout "$layout"
echo "image.sh: OCI layout in $((SECONDS - start)) s"

# In place whole: a failed build leaves the previous image as it was.
final_tar=$out/$name-$tag.rootfs.tar
rm -rf "$out/$name.old"
[ ! -e "$out/$name" ] || mv "$out/$name" "$out/$name.old"
mv "$layout" "$out/$name"
rm -rf "$out/$name.old"
mv "$tar" "$final_tar"

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "image.sh: $out/$name (OCI layout, tag $tag): $(mib "$(du -sb "$out/$name" | cut -f1)")"
echo "image.sh: $final_tar (root filesystem): $(mib "$(stat -c %s "$final_tar")")"
echo "image.sh: push: skopeo copy oci:$out/$name:$tag docker://REGISTRY/$name:$tag"
echo "image.sh: or: docker import --change 'ENTRYPOINT [\"/usr/local/bin/fabricbench-entrypoint\"]' --change 'CMD [\"/bin/bash\"]' $final_tar $name:$tag"
