#!/usr/bin/env bash
# verdict-bench.sh: how often `compare` tells a real slowdown from noise, on this
# machine, quiet and under a load this script creates (one busy process, one core).
# A benchmark, not a test: it prints counts and whether the targets are met.
#
# Per condition, PAIRS comparisons of identical configurations and PAIRS against a
# configuration that is really slower, never a multiplied number. Two ways to slow it
# (SLOWER):
#   tbf (default)  both sides run in a network namespace of their own, over TCP on its
#                  loopback, shaped by a tc tbf token bucket: the baseline at RATE, the
#                  slower candidate at RATE x FRACTION. A calibrated slowdown: the
#                  bucket, not the CPU, sets the rate, so it holds on a loaded machine.
#   mca            the same binary with an MPI setting that costs bandwidth (SLOW_MCA;
#                  Open MPI's shared-memory BTL without its single-copy mechanism, so
#                  every message is copied through fragments); what it costs depends on
#                  the machine (about 40% here), so it is not calibrated. Each comparison: LAUNCHES launches a side of --rounds RUNS each
# (RUNS launches when the binary has no --rounds), baseline and candidate alternating
# and which goes first alternating from one comparison to the next; then
# `compare base.csv cand.csv --threshold THRESHOLD`, whose exit status is the verdict:
# 0 OK, 1 REGRESSION, 4 INCONCLUSIVE.
#
# Targets (issue 32): a false REGRESSION in at most 1 of 20 identical pairs, and
# REGRESSION in at least 19 of 20 slower pairs, in both conditions.
#
# Environment:
#   PAIRS       comparisons of each kind per condition (default 20)
#   RUNS        rounds a launch with --rounds (default 3), or launches a side without it (5)
#   LAUNCHES    launches a side when the binary has --rounds (default 3): rounds within
#               one launch miss what differs from one launch to the next (placement,
#               page cache, the other jobs of the moment), which is most of the noise
#   BIN         the collective binary (default sendrecv_perf)
#   SIZES       its size flags (default "-b 1M -e 4M -f 4")
#   ITERS       timed iterations per size (default 20)
#   NP          ranks (default 2)
#   SLOWER      tbf (default; needs root and tc) or mca
#   RATE        tbf: the baseline's rate, in tc's units (default 400mbit: well below what
#               TCP on loopback reaches on a loaded 2-core machine)
#   FRACTION    tbf: the slower candidate's rate as a fraction of RATE (default 0.75)
#   SLOW_MCA    mca: the candidate's extra mpirun flags (default
#               "--mca btl_vader_single_copy_mechanism none")
#   THRESHOLD   compare --threshold in percent (default 10: compare has no default)
#   P99_THRESHOLD  compare --p99-threshold (default 100: a slower side costs bandwidth; the
#               tail of a 2-core box at load is judged loosely)
#   CONDITIONS  "quiet load" (default), or one of them
#   FABRICBENCH_BIN  the binaries (default target/release, else target/debug)
set -euo pipefail
cd "$(dirname "$0")/.."

pairs=${PAIRS:-20}
runs=${RUNS:-}
bin_name=${BIN:-sendrecv_perf}
sizes=${SIZES:-"-b 1M -e 4M -f 4"}
iters=${ITERS:-20}
np=${NP:-2}
slower=${SLOWER:-tbf}
rate=${RATE:-400mbit}
fraction=${FRACTION:-0.75}
slow_mca=${SLOW_MCA:-"--mca btl_vader_single_copy_mechanism none"}
threshold=${THRESHOLD:-10}
p99_threshold=${P99_THRESHOLD:-100}
conditions=${CONDITIONS:-"quiet load"}
bindir=${FABRICBENCH_BIN:-}
if [ -z "$bindir" ]; then
    bindir=target/release
    [ -x "$bindir/compare" ] || bindir=target/debug
fi
for b in "$bin_name" compare; do
    if [ ! -x "$bindir/$b" ]; then
        echo "verdict-bench.sh: $bindir/$b is missing; build it: cargo build --release --bin $b" >&2
        exit 2
    fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

work=$(mktemp -d)
load_pid=
netns=
cleanup() {
    if [ -n "$load_pid" ]; then kill "$load_pid" 2>/dev/null || true; fi
    if [ -n "$netns" ]; then ip netns delete "$netns" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

case $slower in
    tbf)
        # tc's rate with its unit: the candidate's is the same unit times FRACTION.
        if ! [[ $rate =~ ^([0-9]+)([a-z]*)$ ]]; then
            echo "verdict-bench.sh: RATE=$rate is not a tc rate such as 400mbit" >&2
            exit 2
        fi
        rate_number=${BASH_REMATCH[1]} rate_unit=${BASH_REMATCH[2]}
        if ! [[ $fraction =~ ^0?\.[0-9]+$ ]]; then
            echo "verdict-bench.sh: FRACTION=$fraction is not a fraction between 0 and 1 such as 0.75" >&2
            exit 2
        fi
        slow_rate=$(awk -v r="$rate_number" -v f="$fraction" 'BEGIN { printf "%d", r * f }')$rate_unit
        netns=fbvb-$$
        ip netns add "$netns"
        ip -n "$netns" link set lo mtu 1500 up
        slower_what="the same run at a tbf rate of $slow_rate instead of $rate (TCP on the loopback of namespace $netns)"
        ;;
    mca) slower_what="mpirun $slow_mca" ;;
    *)
        echo "verdict-bench.sh: SLOWER=$slower is not tbf or mca" >&2
        exit 2
        ;;
esac

# Rounds in one launch when the binary has them; else RUNS launches appended.
if "$bindir/$bin_name" --help 2>&1 | grep -q -- '--rounds'; then
    runs=${runs:-3}
    per_launch="--rounds $runs"
    launches=${LAUNCHES:-3}
    how="$launches launches a side, --rounds $runs each, appended"
else
    runs=${runs:-5}
    per_launch=
    launches=$runs
    how="$runs launches a side appended (--csv --append; no --rounds in $bin_name)"
fi

# launch CSV SIDE: one run of the binary as the baseline (base) or the slower
# candidate (slow), its rows added to CSV.
launch() {
    local csv=$1 side=$2 append=
    [ -f "$csv" ] && append=--append
    local -a pre=() mca=()
    if [ "$slower" = tbf ]; then
        local r=$rate
        [ "$side" = slow ] && r=$slow_rate
        tc -n "$netns" qdisc replace dev lo root tbf rate "$r" burst 64kb latency 50ms
        pre=(ip netns exec "$netns")
        mca=(--mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
    elif [ "$side" = slow ]; then
        # shellcheck disable=SC2206
        mca=($slow_mca)
    fi
    # shellcheck disable=SC2086
    "${pre[@]}" mpirun -np "$np" "${mca[@]}" "$bindir/$bin_name" $sizes -n "$iters" -w 5 -c 0 \
        $per_launch --csv "$csv" $append >/dev/null 2>>"$work/launch.err"
}

# one KIND INDEX: one comparison; prints the verdict word and compare's lines.
one() {
    local kind=$1 i=$2 base=$work/base.csv cand=$work/cand.csv
    rm -f "$base" "$cand"
    local cand_side=base
    [ "$kind" = slower ] && cand_side=slow
    for ((r = 0; r < launches; r++)); do
        if (((i + r) % 2 == 0)); then
            launch "$base" base
            launch "$cand" "$cand_side"
        else
            launch "$cand" "$cand_side"
            launch "$base" base
        fi
    done
    local rc=0
    "$bindir/compare" "$base" "$cand" --threshold "$threshold" --p99-threshold "$p99_threshold" \
        >"$work/compare.out" 2>&1 || rc=$?
    case $rc in
        0) echo OK ;;
        1) echo REGRESSION ;;
        4) echo INCONCLUSIVE ;;
        *) echo "ERROR($rc)"; cat "$work/compare.out" >&2 ;;
    esac
}

# The change of each row and its interval, from compare's table: "-24.1% [-27.0%..-21.3%]".
changes() {
    awk '/^  [a-z]/ { for (i = 1; i <= NF; i++) if ($i ~ /%\.\./) { printf "%s [%s] ", $(i-1), $i; break } }' \
        "$work/compare.out"
}

echo "# verdict-bench: $bin_name $sizes, $np ranks, -n $iters, $how;" \
    "slower = $slower_what; compare --threshold $threshold; $pairs pairs of each kind"
echo "# machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
all_met=1
for cond in $conditions; do
    start=$(date +%s)
    if [ "$cond" = load ]; then
        # One process keeping one core busy; killed on exit.
        (while :; do :; done) &
        load_pid=$!
    fi
    declare -A count=()
    for kind in identical slower; do
        for v in OK REGRESSION INCONCLUSIVE; do count[$kind.$v]=0; done
        for ((i = 0; i < pairs; i++)); do
            v=$(one "$kind" "$i")
            count[$kind.$v]=$((${count[$kind.$v]:-0} + 1))
            extra=
            if [ "$v" = INCONCLUSIVE ]; then
                extra=$(grep -o 'about [0-9]* rounds a side' "$work/compare.out" | sort -t' ' -k2 -n | tail -1 || true)
                [ -n "$extra" ] && extra="; at most $extra would resolve it"
            fi
            printf '%-5s %-9s %2d  %-12s  %s%s\n' "$cond" "$kind" "$((i + 1))" "$v" "$(changes)" "$extra"
        done
    done
    if [ -n "$load_pid" ]; then
        kill "$load_pid" 2>/dev/null || true
        wait "$load_pid" 2>/dev/null || true
        load_pid=
    fi
    secs=$(($(date +%s) - start))
    false_reg=${count[identical.REGRESSION]}
    caught=${count[slower.REGRESSION]}
    # Targets scaled to PAIRS: at most 1 in 20 false, at least 19 in 20 caught.
    ok_false=$((false_reg * 20 <= pairs))
    ok_caught=$((caught * 20 >= 19 * pairs))
    echo "# $cond: identical: ${count[identical.OK]} OK, $false_reg REGRESSION, ${count[identical.INCONCLUSIVE]} INCONCLUSIVE;" \
        "slower: $caught REGRESSION, ${count[slower.OK]} OK, ${count[slower.INCONCLUSIVE]} INCONCLUSIVE; ${secs} s"
    echo "# $cond: target false REGRESSION <= 1 in 20 identical: $([ $ok_false = 1 ] && echo met || echo NOT met);" \
        "target REGRESSION >= 19 in 20 slower: $([ $ok_caught = 1 ] && echo met || echo NOT met)"
    [ $ok_false = 1 ] && [ $ok_caught = 1 ] || all_met=0
    unset count
done
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
[ $all_met = 1 ]
