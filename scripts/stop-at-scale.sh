#!/usr/bin/env bash
# -T at scale, a check rather than a test: NP ranks (128) oversubscribed on this
# host, rank VICTIM (77) stops itself (SIGSTOP, FABRICBENCH_FAULT_SIGNAL) inside
# the 512 B calls of an all_reduce_perf sweep. Prints when it stopped (seen in
# /proc), when the job ended, the time between them beside -T (60: MPI_Init of
# 128 ranks on two loaded cores takes 20 s and more, and the setup is watched
# too), and the verdict lines. With RACK=NODES the job runs on the virtual rack's
# NODES nodes (up already, as root), NP/NODES ranks a node.
# Usage: [NP=128 VICTIM=77 T=60 RACK=4] stop-at-scale.sh [BIN_DIR]
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/debug}; T=${T:-60}; np=${NP:-128}; victim=${VICTIM:-77}
log=$(mktemp /tmp/stop-at-scale.XXXXXX.log)
echo "load at start: $(cut -d' ' -f1 /proc/loadavg)"
start=$(date +%s.%N)
launch=(mpirun -np "$np")
if [ -n "${RACK:-}" ]; then
  [[ $RACK =~ ^[0-9]+$ ]] && [ "$RACK" -ge 2 ] && [ $((np % RACK)) -eq 0 ] || { echo "stop-at-scale.sh: RACK=$RACK: give 2 nodes or more, dividing NP=$np" >&2; exit 2; }
  launch=("$root/scripts/virtual-rack.sh" run -N $((np / RACK)) --)
  echo "on the virtual rack's $RACK nodes, $((np / RACK)) ranks each"
fi
"${launch[@]}" -x FABRICBENCH_FAULT_SIGNAL="$victim:512:stop" -x OMPI_MCA_mpi_yield_when_idle=1 "$bin/all_reduce_perf" -b 8 -e 1K -f 4 -n 40 -w 1 -T "$T" >"$log" 2>&1 &
job=$!
stopped=""
while kill -0 $job 2>/dev/null; do
  if [ -z "$stopped" ]; then
    for p in $(pgrep -x all_reduce_perf); do
      if { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$victim" && grep -q '^State:.*T (stopped)' /proc/$p/status 2>/dev/null; then
        stopped=$(date +%s.%N); echo "rank $victim (pid $p) stopped at +$(echo "$stopped - $start" | bc) s"; break
      fi
    done
  fi
  sleep 0.2
done
wait $job; rc=$?
end=$(date +%s.%N)
echo "mpirun exit $rc at +$(echo "$end - $start" | bc) s; from the stop to the end: $(echo "$end - ${stopped:-$start}" | bc) s (-T $T)"
echo "load at end: $(cut -d' ' -f1 /proc/loadavg)"
grep -- "-T/--timeout" "$log" | sort | uniq -c | head -5
echo "whole output: $log"
