#!/usr/bin/env bash
# The fabric counters against real RDMA verbs, in the Soft-RoCE VM
# (shared/tools/softroce-vm): rxe1 on veth0 and rxe2 on veth1 act as two hosts.
#   1. clean: ib_write_bw rxe1 -> rxe2 (-W, --csv, --counters), a collective
#      over the veth pair (Open MPI's TCP BTL, one rank on each veth: MPI over
#      rxe is not possible with this Open MPI: its openib BTL has no rdmacm CPC,
#      UCX finds no auxiliary transport), and rack_check with max_retransmits = 0;
#   2. lossy: the same with netem dropping 2% of veth0's packets (a tbf too
#      small for the burst where sch_netem is missing).
#   3. all-pairs, clean and lossy: ib_write_bw --all-pairs, 3 ranks under
#      mpirun on rxe1, rxe2, rxe2: the pairs with rank 0 cross the veth wire,
#      the pair of ranks 1 and 2 stays on rxe2 (loopback); the footer must name
#      only the pairs whose round moved a retransmit.
# Prints each run's footer, -W lines, the CSV's counter columns and rack_check's
# verdicts, then PASS or FAIL (exit 0 on PASS).
#
# Usage: scripts/softroce-counters.sh [pairs]   (root; the VM takes a few minutes;
#        "pairs": the all-pairs case alone)
set -euo pipefail
cd "$(dirname "$0")/.."
vm=${SOFTROCE_VM:-$PWD/../shared/tools/softroce-vm/run-in-vm.sh}
[ -x "$vm" ] || { echo "softroce-counters: $vm not found: set SOFTROCE_VM to run-in-vm.sh" >&2; exit 2; }
case "${1:-all}" in
    all|pairs) only=${1:-all} ;;
    *) echo "softroce-counters: '$1': give no argument (every case) or 'pairs' (all-pairs alone)" >&2; exit 2 ;;
esac
cargo build --quiet --bin ib_write_bw --bin all_reduce_perf --bin rack_check --bin doctor --bin doctor-mpi
out=target/softroce-counters
rm -rf "$out" && mkdir -p "$out"

set +e
"$vm" -t 900 bash -c '
    set -u
    out='"$out"' only='"$only"'
    B=$PWD/target/debug
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    verbs() {
        timeout 300 $B/ib_write_bw -d rxe2 -s 65536 -n 200 -u 18 -F > $out/$1-server.log 2>&1 &
        sleep 1
        timeout 300 $B/ib_write_bw -d rxe1 -s 65536 -n 200 -u 18 -F \
            -W hw_counters/sent_pkts,hw_counters/completer_retry_err \
            --csv $out/$1.csv --counters $out/$1-counters.csv 10.99.0.2 > $out/$1-client.log 2>&1
        wait
    }
    collective() {
        timeout 300 mpirun --mca pml ob1 --mca btl tcp,self \
            -np 1 -x OMPI_MCA_btl_tcp_if_include=veth0 $B/all_reduce_perf -b 1K -e 256K -f 16 -n 5 -w 1 --csv $out/$1-coll.csv : \
            -np 1 -x OMPI_MCA_btl_tcp_if_include=veth1 $B/all_reduce_perf -b 1K -e 256K -f 16 -n 5 -w 1 --csv $out/$1-coll.csv \
            > $out/$1-coll.log 2>&1
    }
    rack() {
        cat > $out/rack.toml <<TOML
name = "softroce counters"
[launch]
launcher = "mpirun"
nodes = 1
ranks_per_node = 2
args = ["--oversubscribe", "--allow-run-as-root", "--mca", "btl", "self,vader"]
timeout_s = 300
[doctor]
skip = true
[[test]]
name = "write"
binary = "ib_write_bw"
args = ["-d", "rxe1,rxe2", "-s", "65536", "-n", "200", "-u", "18", "-F"]
[[check]]
test = "write"
metric = "counters"
max_retransmits = 0
max_errors = 0
TOML
        timeout 400 $B/rack_check --spec $out/rack.toml --out $out/$1-rack > $out/$1-rack.log 2>&1
        echo "rack_check exit $?" >> $out/$1-rack.log
    }
    # All-pairs: ranks 0, 1, 2 on rxe1, rxe2, rxe2 (one host: MPI over shared memory).
    pairs() {
        timeout 400 mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca btl self,vader -np 3 \
            $B/ib_write_bw --all-pairs -d rxe1,rxe2,rxe2 -s 65536 -n 100 -u 18 -F \
            --csv $out/$1-pairs.csv --counters $out/$1-pairs-counters.csv > $out/$1-pairs.log 2>&1
        echo "all-pairs exit $?" >> $out/$1-pairs.log
    }
    impair() {
        if modprobe sch_netem 2>/dev/null; then
            tc qdisc add dev veth0 root netem loss 2%
            echo "netem loss 2% on veth0" > $out/impairment.txt
        else
            tc qdisc add dev veth0 root tbf rate 20mbit burst 2k limit 4k
            echo "tbf 20mbit burst 2k on veth0 (no sch_netem)" > $out/impairment.txt
        fi
    }
    if [ "$only" = pairs ]; then
        pairs clean; impair; pairs lossy
    else
        verbs clean; collective clean; rack clean; pairs clean
        impair
        verbs lossy; rack lossy; pairs lossy
    fi
    tc -s qdisc show dev veth0 >> $out/impairment.txt
'
vm_rc=$?
set -e

show() { echo "== $1"; sed -n "$2" "$out/$3" 2>/dev/null || echo "(missing $out/$3)"; }
# The all-pairs case: clean, no retransmit in any pair's column; lossy, the
# footer warns of a pair with rank 0 (its rounds cross veth0) and never of
# the loopback pair of ranks 1 and 2.
pairs_checks() {
    local ok=1 loop="softroce-vm/1 <-> softroce-vm/2"
    show "clean: ib_write_bw --all-pairs, 3 ranks on rxe1, rxe2, rxe2" '/# Fabric counters/,$p' clean-pairs.log
    cat "$out/impairment.txt" 2>/dev/null | head -1
    show "lossy: ib_write_bw --all-pairs" '/# Fabric counters/,$p' lossy-pairs.log
    for run in clean lossy; do
        echo "== $run: the matrix CSV's counter_retransmits rows"
        grep "^counter_retransmits," "$out/$run-pairs.csv" || echo "(none)"
    done
    echo "== lossy: --counters rows that moved (retransmits)"
    grep -h ",retransmits,[1-9]" "$out/lossy-pairs-counters.csv" | head -6 || true
    pair_retrans() { /usr/bin/python3 -c "
import pandas as pd, sys
d = pd.read_csv(sys.argv[1])
print(int(d[d.metric == 'counter_retransmits'].iloc[:, 3:].sum().sum()))" "$1"; }
    grep -q "all-pairs exit [01]$" "$out/clean-pairs.log" || { echo "clean all-pairs: did not finish"; ok=0; }
    [ "$(pair_retrans "$out/clean-pairs.csv" 2>/dev/null)" = 0 ] || { echo "clean all-pairs: retransmits moved"; ok=0; }
    grep -q "# WARNING: pair" "$out/clean-pairs.log" && { echo "clean all-pairs: a pair was warned of"; ok=0; }
    grep -q "# WARNING: pair softroce-vm/0 <-> softroce-vm/[12] (round [23] of 3): retransmits" "$out/lossy-pairs.log" \
        || { echo "lossy all-pairs: the footer names no pair with rank 0"; ok=0; }
    grep -q "# WARNING: pair $loop" "$out/lossy-pairs.log" && { echo "lossy all-pairs: the loopback pair was blamed"; ok=0; }
    [ "$(/usr/bin/python3 -c "import pandas as pd,sys; print(len(pd.read_csv(sys.argv[1])))" "$out/lossy-pairs-counters.csv" 2>/dev/null || echo 0)" -gt 0 ] \
        || { echo "lossy all-pairs: --counters does not load"; ok=0; }
    [ $ok = 1 ]
}
if [ "$only" = pairs ]; then
    if [ "$vm_rc" = 0 ] && pairs_checks; then echo PASS; else echo "FAIL (the VM exited $vm_rc)"; exit 1; fi
    exit 0
fi
show "clean: ib_write_bw rxe1 -> rxe2 (client)" '/#bytes/,$p' clean-client.log
show "clean: all_reduce_perf, 2 ranks over veth0/veth1 (TCP)" '/Collective test concluded/,$p' clean-coll.log
show "clean: rack_check" '/rack_check: test /!p' clean-rack.log
cat "$out/impairment.txt" 2>/dev/null | head -3
show "lossy: ib_write_bw rxe1 -> rxe2 (client)" '/#bytes/,$p' lossy-client.log
show "lossy: rack_check" '/rack_check: test /!p' lossy-rack.log
cols() { /usr/bin/python3 -c "
import pandas as pd, sys
d = pd.read_csv(sys.argv[1])
print(d[['size_bytes','rdma_packets','counter_errors','counter_retransmits','counter_congestion','counter_pauses']].to_string(index=False))
" "$1"; }
for run in clean lossy; do echo "== $run: CSV counter columns"; cols "$out/$run.csv" || true; done
echo "== lossy: --counters rows that moved (retransmits)"
grep -h ",retransmits," "$out/lossy-counters.csv" | head -8 || true

retrans() { /usr/bin/python3 -c "import pandas as pd,sys; print(int(pd.read_csv(sys.argv[1]).counter_retransmits.sum()))" "$1"; }
ok=1
[ "$vm_rc" = 0 ] || { echo "the VM exited $vm_rc"; ok=0; }
grep -q "data on RDMA ports.*rxe1:1 [0-9]* packets" "$out/clean-client.log" || { echo "clean: no packets on rxe1 in the footer"; ok=0; }
[ "$(retrans "$out/clean.csv" 2>/dev/null)" = 0 ] || { echo "clean: retransmits moved on a clean run"; ok=0; }
grep -q "data on netdevs.*veth" "$out/clean-coll.log" || { echo "clean collective: no bytes on the veth pair"; ok=0; }
grep -q "rack_check exit 0" "$out/clean-rack.log" || { echo "clean: rack_check did not pass"; ok=0; }
[ "$(retrans "$out/lossy.csv" 2>/dev/null || echo 0)" -gt 0 ] || { echo "lossy: no retransmits in the CSV"; ok=0; }
grep -q "retransmits rxe" "$out/lossy-client.log" || { echo "lossy: the footer names no retransmit"; ok=0; }
grep -q "rack_check exit 1" "$out/lossy-rack.log" || { echo "lossy: rack_check did not fail"; ok=0; }
pairs_checks || ok=0
if [ $ok = 1 ]; then echo PASS; else echo FAIL; exit 1; fi
