#!/usr/bin/env bash
# Runs a command while busy loops keep the machine loaded: timing bounds in the
# tests must hold on a shared CI host, not only on an idle one.
#
#   with-load.sh [-n LOOPS] [-r REPEAT] -- CMD ...
#
# LOOPS busy processes (default: 4 per core, so the load average sits near five
# times the core count with the command's own work) at the command's priority,
# started before CMD and stopped by PID when it ends, also on failure or Ctrl-C.
# REPEAT runs CMD that many times in a row (default 1) and stops at the first
# failure, printing which run failed. The exit status is CMD's.
set -euo pipefail

cores=$(nproc)
loops=$((4 * cores))
repeat=1
while [ $# -gt 0 ]; do
    case "$1" in
        -n) loops=${2:?-n needs a number}; shift 2 ;;
        -r) repeat=${2:?-r needs a number}; shift 2 ;;
        --) shift; break ;;
        *) echo "with-load.sh: unknown argument '$1': usage: with-load.sh [-n LOOPS] [-r REPEAT] -- CMD ..." >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "with-load.sh: no command: usage: with-load.sh [-n LOOPS] [-r REPEAT] -- CMD ..." >&2; exit 2; }
case "$loops$repeat" in *[!0-9]*) echo "with-load.sh: -n and -r take whole numbers (got -n '$loops' -r '$repeat')" >&2; exit 2 ;; esac

pids=()
stop() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap stop EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$loops"); do
    ( while :; do :; done ) &
    pids+=($!)
done
echo "with-load.sh: $loops busy loops on $cores cores (pids ${pids[0]}..${pids[-1]})" >&2

for run in $(seq "$repeat"); do
    start=$(date +%s)
    status=0
    "$@" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "with-load.sh: run $run of $repeat failed (exit $status) after $(( $(date +%s) - start )) s; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        exit "$status"
    fi
    echo "with-load.sh: run $run of $repeat passed in $(( $(date +%s) - start )) s; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
