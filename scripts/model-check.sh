#!/usr/bin/env bash
# The performance model against the virtual rack (docs/model.md): every node's
# link limited by a tc tbf to RATE, the mpi backend on one rank a node, and for
# each node count, rate and collective the model's expected busbw beside the
# measured median over --rounds; prints one table line per size (out of place),
# with the algorithm the model assumed (the run's -J document), how many lines
# of each algorithm are within TOLERANCE percent, and exits 1 when a line is
# off by more.
#
#   sudo scripts/model-check.sh                (root: the rack is network namespaces)
#
# Environment: NODES ("2 4"), RATES ("500mbit 1gbit"), COLLS ("all_reduce
# all_gather reduce_scatter alltoall"), SIZES ("-b 4M -e 16M -f 2"), ROUNDS (3),
# TOLERANCE (15), MCA (Open MPI settings, see below), BIN_DIR (target/debug: cargo build --bin all_reduce_perf
# --bin all_gather_perf --bin reduce_scatter_perf --bin alltoall_perf first).
# /tmp/vrack.lock is held for one measuring run at a time (up, one collective,
# down), so others using the rack get their turns. CSVs are kept in a
# /tmp/model-check.* folder, printed at the end.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
nodes_list=${NODES:-2 4}
rates=${RATES:-500mbit 1gbit}
colls=${COLLS:-all_reduce all_gather reduce_scatter alltoall}
sizes=${SIZES:--b 4M -e 16M -f 2}
rounds=${ROUNDS:-3}
tolerance=${TOLERANCE:-15}
bin=${BIN_DIR:-$root/target/debug}
rack="$root/scripts/virtual-rack.sh"
for c in $colls; do
    [ -x "$bin/${c}_perf" ] || { echo "model-check.sh: $bin/${c}_perf is missing: cargo build --bin ${c}_perf (or set BIN_DIR)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/model-check.XXXXXX)
# Open MPI's TCP BTL sends a large message by rendezvous over the one socket
# it keeps per peer, so in an exchange each side's handshake waits behind the
# data it is sending: both directions serialise and every collective ran at
# half the link (measured: alltoall on 2 nodes at 500mbit, 34 of 62.5 MB/s;
# raw TCP both ways 59.8). Messages sent eagerly stream both ways at once, as
# an RDMA fabric's do, which is what the model assumes; MCA="" runs with
# Open MPI's defaults (the explanation lines then point at MPI's settings).
# Socket buffers of 64 KiB: TCP's autotuning otherwise grows a window to
# megabytes, which the tbf's queue holds (up to 1 s of data), so a step's data
# sent to a peer still receiving the step before waits behind all of it, and
# the algorithms that change peer at each step ran at 60-98% of their links
# (recursive doubling on 4 nodes at 500mbit, 61-90%; with 256 KiB, 92-98% at
# 500mbit but 71-97% at 250mbit; with 64 KiB, 94-104% from 250mbit to 1gbit).
# A fabric bounds the data in flight (credits, pause frames, shallow queues).
export MCA=${MCA---mca mpi_yield_when_idle 1 --mca btl_tcp_eager_limit 67108864 --mca btl_tcp_rndv_eager_limit 67108864 --mca btl_tcp_max_send_size 67108864 --mca btl_tcp_sndbuf 65536 --mca btl_tcp_rcvbuf 65536}

# tc's rate ("500mbit", "1gbit") as --limit takes it, in Gb/s.
gbits() {
    awk -v r="$1" 'BEGIN { n = r + 0; u = tolower(substr(r, length(n "") + 1))
        m["kbit"] = 1e-6; m["mbit"] = 1e-3; m["gbit"] = 1
        if (n <= 0 || !(u in m)) exit 1; printf "%g\n", n * m[u] }'
}

# One measuring run under the lock: the rack up with every link slowed, one
# collective, the rack down (also when the run fails).
measure() { # nodes rate collective csv
    local n=$1 rate=$2 coll=$3 csv=$4 limit
    limit=$(gbits "$rate") || { echo "model-check.sh: RATES: '$rate' is not a tc rate (500mbit, 1gbit)" >&2; exit 2; }
    flock /tmp/vrack.lock bash -c '
        set -e
        rack=$1; n=$2; rate=$3; shift 3
        "$rack" up "$n" >/dev/null
        trap "\"$rack\" down >/dev/null 2>&1 || true" EXIT
        for i in $(seq 1 "$n"); do "$rack" fault slow "node$i" "$rate"; done
        "$rack" run -- $MCA "$@"
    ' _ "$rack" "$n" "$rate" "$bin/${coll}_perf" $sizes -n 5 -w 2 -c 0 \
        --rounds "$rounds" --limit "${limit}Gb/s" --expected --csv "$csv" -J "${csv%.csv}.json" >"${csv%.csv}.log" 2>&1 ||
        { echo "model-check.sh: $coll on $n nodes at $rate failed; see ${csv%.csv}.log" >&2; tail -5 "${csv%.csv}.log" >&2; return 1; }
}

for n in $nodes_list; do
    for rate in $rates; do
        for coll in $colls; do
            measure "$n" "$rate" "$coll" "$work/$n-$rate-$coll.csv"
        done
    done
done

# The model's line of each run; its last part says where the MPI algorithm
# comes from (Open MPI's fixed rules, a forced one, or the bandwidth-optimal one).
grep -h -m1 '^# Expected' "$work"/*.log | sort | uniq -c
python3 - "$work" "$tolerance" <<'PY'
import collections, csv, glob, json, math, os, statistics, sys
work, tolerance = sys.argv[1], float(sys.argv[2])


def number(text):
    """A CSV cell as a number; NaN where it holds none (an empty cell: no model)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def algorithms(path):
    """size -> the algorithm the model assumed (the run's -J document)."""
    try:
        results = json.load(open(path))["results"]
        return {r["size"]: ((r.get("fabricbench") or {}).get("expected") or {}).get("algorithm", "-") for r in results}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


print(f"{'nodes':>5} {'rate':>8} {'collective':<15} {'size':>9} {'rounds':>6} {'expected':>12} {'measured':>12} {'meas/exp':>8}  algorithm")
worst = 0.0
within = collections.defaultdict(lambda: [0, 0])
for path in sorted(glob.glob(os.path.join(work, "*.csv")), key=lambda p: (int(os.path.basename(p).split("-")[0]), p)):
    n, rate, coll = os.path.basename(path)[:-4].split("-", 2)
    rows = [r for r in csv.DictReader(open(path)) if r["placement"] == "out-of-place"]
    assumed = algorithms(path[:-4] + ".json")
    for size in sorted({int(r["size_bytes"]) for r in rows}):
        same = [r for r in rows if int(r["size_bytes"]) == size]
        busbw = [number(r["busbw_gbs"]) for r in same]
        # A round without a figure leaves the line without one: never within.
        measured = statistics.median(busbw) if all(math.isfinite(b) for b in busbw) else math.nan
        expected = number(same[0]["expected_busbw_gbs"])
        ratio = measured / expected if expected > 0 else math.nan
        off = abs(ratio - 1) * 100 if math.isfinite(ratio) else math.inf
        worst = max(worst, off)
        algorithm = assumed.get(size, "-")
        within[algorithm][0] += off <= tolerance
        within[algorithm][1] += 1
        print(f"{n:>5} {rate:>8} {coll:<15} {size >> 20:>5} MiB {len(same):>6} {expected*1e3:>7.2f} MB/s {measured*1e3:>7.2f} MB/s {ratio:>8.3f}  {algorithm}")
print(f"within {tolerance:g}%, by the algorithm the model assumed: " + ", ".join(f"{a} {k} of {t}" for a, (k, t) in sorted(within.items())))
worst_text = f"{worst:.1f}% off" if math.isfinite(worst) else "a line without a measured or expected figure (nan)"
print(f"worst: {worst_text} (tolerance {tolerance:g}%); CSVs in {work}")
sys.exit(0 if worst <= tolerance else 1)
PY
