#!/bin/sh
# The image's entrypoint (/usr/local/bin/fabricbench-entrypoint): makes what the
# image must not hold, then runs its arguments. The SSH host keys are generated
# here, in each container, so no two pods share them (the image never stores
# any); sshd -De (an MPIJob worker) also needs /run/sshd, which a runtime that
# mounts a fresh /run would leave out.
set -eu
mkdir -p /run/sshd
chmod 0755 /run/sshd
# -A makes only the key types that are missing: a restart keeps its keys.
ssh-keygen -A >/dev/null
exec "$@"
