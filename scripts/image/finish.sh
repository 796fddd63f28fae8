#!/bin/sh
# finish.sh ROOT: the last step of both image recipes (scripts/image.sh's
# mmdebstrap hook, the Containerfile's RUN), on the root filesystem at ROOT:
# the entrypoint and ssh settings installed, /run/sshd made, the SSH host keys
# openssh-server's postinst generated removed (each container makes its own),
# and apt's downloads and lists dropped.
set -eu
root=${1:?usage: finish.sh ROOT}
here=$(dirname "$0")
install -D -m 0755 "$here/entrypoint.sh" "$root/usr/local/bin/fabricbench-entrypoint"
install -D -m 0644 "$here/sshd.conf" "$root/etc/ssh/sshd_config.d/fabricbench.conf"
install -D -m 0644 "$here/ssh.conf" "$root/etc/ssh/ssh_config.d/fabricbench.conf"
mkdir -p "$root/run/sshd"
chmod 0755 "$root/run/sshd"
rm -f "$root"/etc/ssh/ssh_host_*
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/archives/partial/* \
    "$root"/var/lib/apt/lists/*
