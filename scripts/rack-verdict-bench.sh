#!/usr/bin/env bash
# rack_check's verdicts on the virtual rack under load: a benchmark of how
# often the interval judging gets it right, not a test. RUNS times each,
# alternating: with NODE slowed by a tc tbf to RATE (FAIL naming NODE
# expected), and without a fault (PASS expected, directly or after
# re-measuring). It creates its own load (scripts/with-load.sh, LOOPS busy
# loops), brings the rack up and down, and holds /tmp/vrack.lock throughout.
#
#   sudo scripts/rack-verdict-bench.sh [RUNS]      (default 10)
#
# Environment: NODE (node3), RATE (5mbit), LOOPS (1 busy loop: one core kept
# busy), BIN_DIR (target/debug: build rack_check, doctor, all_reduce_perf and
# sendrecv_perf first). Reports are kept under a /tmp/rack-verdict-bench.*
# folder, printed at the end.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-10}
node=${NODE:-node3}
rate=${RATE:-5mbit}
loops=${LOOPS:-1}
bin=${BIN_DIR:-$root/target/debug}
case "$runs$loops" in *[!0-9]*) echo "rack-verdict-bench.sh: RUNS and LOOPS are whole numbers (got '$runs' '$loops')" >&2; exit 2 ;; esac
for b in rack_check doctor doctor-mpi all_reduce_perf sendrecv_perf; do
    [ -x "$bin/$b" ] || { echo "rack-verdict-bench.sh: $bin/$b is missing: cargo build --bins (or set BIN_DIR)" >&2; exit 2; }
done

if [ -z "${RACK_VERDICT_BENCH_LOADED:-}" ]; then
    export RACK_VERDICT_BENCH_LOADED=1
    exec "$root/scripts/with-load.sh" -n "$loops" -- "$0" "$@"
fi

rack="$root/scripts/virtual-rack.sh"
spec="$root/scripts/rack-virtual.toml"
work=$(mktemp -d /tmp/rack-verdict-bench.XXXXXX)
exec 9>/tmp/vrack.lock
flock 9
"$rack" up >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; exit 1; }
trap '"$rack" down >/dev/null 2>&1 || true' EXIT

started=$(date +%s)
faulty_ok=0 healthy_ok=0 healthy_after=0
# One rack_check; prints "exit S, T s" and leaves its output in $work/NAME.log.
check() {
    local name=$1 t0 status=0
    t0=$(date +%s)
    "$rack" exec -- "$bin/rack_check" --spec "$spec" --out "$work/$name" >"$work/$name.log" 2>&1 || status=$?
    echo "exit $status, $(( $(date +%s) - t0 )) s"
    return "$status"
}
for i in $(seq "$runs"); do
    "$rack" fault slow "$node" "$rate" >/dev/null
    said=$(check "faulty-$i") && status=0 || status=$?
    named=no
    grep -q "^rack_check: node $node: FAIL" "$work/faulty-$i.log" && named=yes
    others=$(grep -c "^rack_check: node .*: FAIL" "$work/faulty-$i.log" || true)
    busbw=$(grep -o "^rack_check: all_reduce busbw at [^:]*: [A-Z]*" "$work/faulty-$i.log" | awk '{print $NF}' || true)
    if [ "$status" = 1 ] && [ "$named" = yes ] && [ "$others" = 1 ]; then faulty_ok=$((faulty_ok + 1)); fi
    echo "run $i, $node at $rate: $said; $node named FAIL: $named (nodes failing: $others); busbw check: ${busbw:-?}"
    "$rack" clear >/dev/null
    said=$(check "healthy-$i") && status=0 || status=$?
    again=""
    if grep -q "re-measured" "$work/healthy-$i/summary.md" 2>/dev/null; then again=" after re-measuring"; fi
    if [ "$status" = 0 ]; then
        healthy_ok=$((healthy_ok + 1))
        [ -z "$again" ] || healthy_after=$((healthy_after + 1))
    fi
    echo "run $i, no fault: $said; $(grep -o '^rack_check: \(PASS\|FAIL\|INCONCLUSIVE\)[^;]*' "$work/healthy-$i.log" | sed 's/^rack_check: //')$again"
done
echo "with $node slowed to $rate: FAIL naming $node (and only it) in $faulty_ok of $runs runs"
echo "without a fault: PASS in $healthy_ok of $runs runs ($healthy_after of them after re-measuring)"
echo "load: $loops busy loops on $(nproc) cores; $(( $(date +%s) - started )) s in all; reports in $work"
[ "$faulty_ok" = "$runs" ] && [ "$healthy_ok" = "$runs" ]
