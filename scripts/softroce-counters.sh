#!/usr/bin/env bash
# The fabric counters against real RDMA verbs, in the Soft-RoCE VM
# (shared/tools/softroce-vm): rxe1 on veth0 and rxe2 on veth1 act as two hosts.
#   1. clean: ib_write_bw rxe1 -> rxe2 (-W, --csv, --counters), a collective
#      over the veth pair (Open MPI's TCP BTL, one rank on each veth: MPI over
#      rxe is not possible with this Open MPI: its openib BTL has no rdmacm CPC,
#      UCX finds no auxiliary transport), and rack_check with max_retransmits = 0;
#   2. lossy: the same with netem dropping 2% of veth0's packets (a tbf too
#      small for the burst where sch_netem is missing).
# Prints each run's footer, -W lines, the CSV's counter columns and rack_check's
# verdicts, then PASS or FAIL (exit 0 on PASS).
#
# Usage: scripts/softroce-counters.sh        (root; the VM takes a few minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
vm=${SOFTROCE_VM:-$PWD/../shared/tools/softroce-vm/run-in-vm.sh}
[ -x "$vm" ] || { echo "softroce-counters: $vm not found: set SOFTROCE_VM to run-in-vm.sh" >&2; exit 2; }
cargo build --quiet --bin ib_write_bw --bin all_reduce_perf --bin rack_check --bin doctor
out=target/softroce-counters
rm -rf "$out" && mkdir -p "$out"

set +e
"$vm" -t 900 bash -c '
    set -u
    out='"$out"'
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
    verbs clean; collective clean; rack clean
    if modprobe sch_netem 2>/dev/null; then
        tc qdisc add dev veth0 root netem loss 2%
        echo "netem loss 2% on veth0" > $out/impairment.txt
    else
        tc qdisc add dev veth0 root tbf rate 20mbit burst 2k limit 4k
        echo "tbf 20mbit burst 2k on veth0 (no sch_netem)" > $out/impairment.txt
    fi
    verbs lossy; rack lossy
    tc -s qdisc show dev veth0 >> $out/impairment.txt
'
vm_rc=$?
set -e

show() { echo "== $1"; sed -n "$2" "$out/$3" 2>/dev/null || echo "(missing $out/$3)"; }
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
if [ $ok = 1 ]; then echo PASS; else echo FAIL; exit 1; fi
