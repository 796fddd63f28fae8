#!/usr/bin/env bash
# The virtual rack over real RDMA verbs, inside the Soft-RoCE VM (guest only: it
# changes the guest's root namespace, which the VM throws away):
#   ../shared/tools/softroce-vm/run-in-vm.sh -t 900 scripts/softroce-rack.sh
# The guest kernel (6.1) runs rxe only in its root namespace (an rxe made in a
# node namespace moves no data: its UDP socket lives in the root namespace, and
# `rdma dev set ... netns` is not supported), so each "node" is one veth with
# its own rxe, all on one bridge, and per-source policy routing (iif lo) sends
# node a's traffic to node b out of a's veth, across the bridge. ib_write_bw
# --all-pairs runs healthy, then with node 3's veth slowed by tbf, then perftest
# over the slowed link for comparison. Needs target/debug built.
set -u
N=4
ip link add fbrbr type bridge && ip link set fbrbr type bridge stp_state 0 forward_delay 0 && ip link set fbrbr up
for i in $(seq $N); do
  ip link add rvn$i type veth peer name rvb$i
  ip link set rvb$i master fbrbr up
  for k in accept_local=1 rp_filter=0 arp_ignore=1 arp_announce=2; do sysctl -qw net.ipv4.conf.rvn$i.${k%=*}=${k#*=}; done
  ip addr add 198.18.1.$i/24 dev rvn$i noprefixroute
  ip link set rvn$i up
done
sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2
for i in $(seq $N); do
  for j in $(seq $N); do [ $i = $j ] || ip route add 198.18.1.$j/32 dev rvn$i src 198.18.1.$i table $((110 + i)); done
  ip rule add pref $((110 + i)) iif lo from 198.18.1.$i lookup $((110 + i))
done
ip rule show
sleep 2
for i in $(seq $N); do rdma link add rxv$i type rxe netdev rvn$i; done
rdma link show | grep rxv
B=$PWD/target/debug
devs=$(seq -s, -f rxv%g $N)
pairs() { timeout 400 mpirun --allow-run-as-root --oversubscribe -np $N --bind-to none --mca btl self,vader \
   $B/ib_write_bw --all-pairs -d $devs -s 65536 -n 50 -u 18 -F --slow-fraction 0.5 --slow-latency 100 "$@" 2>&1 | grep -v "^\[" ; }
echo "== healthy"; time pairs
tc qdisc replace dev rvn3 root tbf rate 20mbit burst 16384 latency 1s
tc qdisc replace dev rvb3 root tbf rate 20mbit burst 16384 latency 1s
echo "== rvn3 (rank 2) slowed to 20mbit"; time pairs
echo "== perftest over the slowed link for comparison"
timeout 90 ib_write_bw -d rxv3 -n 50 -u 18 -s 65536 -F > /tmp/pt.log 2>&1 &
sleep 2; timeout 80 ib_write_bw -d rxv1 -n 50 -u 18 -s 65536 -F 198.18.1.3 2>&1 | tail -3; wait
ip neigh show | grep 198.18.1
