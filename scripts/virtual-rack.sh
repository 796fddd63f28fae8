#!/usr/bin/env bash
# A virtual rack on one host (root): N "nodes", each a network namespace with its
# own host name (a UTS namespace), one veth into one bridge and an address from
# the benchmarking range 198.18.0.0/15. mpirun runs on a head namespace on the
# same bridge and starts real orted daemons on the nodes through an rsh agent
# (this script, `agent`), so ranks on different nodes talk TCP over the veths.
# Nothing is created in the host's own network namespace, no namespace has a
# route beyond 198.18.0.0/24 (and the rails' 198.18.R.0/24), and everything
# lives under $STATE and the namespaces named fbrack-*, which `down` removes.
# With --rails K each node also has K rail interfaces eth1..ethK, rail R a
# bridge railR of its own and addresses 198.18.R.I/24 (the management
# network, eth0 on br0, keeps carrying mpirun and its daemons).
#
#   virtual-rack.sh up [N] [--rails K]     create N nodes (default 4): node1..nodeN,
#                                          with K rails (1-9) beside the management network
#   virtual-rack.sh run [-N K] -- CMD ...  mpirun CMD on every node (K ranks each, default 1)
#   virtual-rack.sh exec -- CMD ...        CMD on the head, where a plain `mpirun -H node1,...`
#                                          (rack_check with scripts/rack-virtual.toml) reaches the rack
#   virtual-rack.sh agent NODE CMD ...     CMD on NODE (Open MPI's plm_rsh_agent)
#   virtual-rack.sh daemon NODE -- CMD ... CMD in NODE's (or head's) network and UTS namespaces
#                                          only: the host's /sys, mounts and /etc/hosts, as
#                                          slurmd's cgroup setup needs; no faults (scripts/slurm-ci.sh)
#   virtual-rack.sh hosts                  the rack's /etc/hosts: ADDRESS NAME, the head's and each node's
#   virtual-rack.sh fault slow NODE RATE   tc tbf on both ends of NODE's veth (RATE: 200mbit, 1gbit)
#   virtual-rack.sh fault mtu NODE MTU     NODE's interface MTU
#   virtual-rack.sh fault switch-mtu NODE MTU  the MTU of NODE's port on the bridge (the
#                                          switch side); the node keeps its own
#   virtual-rack.sh fault duphost NODE OTHER  NODE answers with OTHER's host name
#   virtual-rack.sh fault memlock NODE KIB RLIMIT_MEMLOCK of what starts on NODE, without CAP_IPC_LOCK
#   virtual-rack.sh fault env NODE VAR=VALUE  a variable set for what starts on NODE
#   virtual-rack.sh fault cut NODE         NODE's veth down (the cable pulled)
#   virtual-rack.sh fault down NODE        NODE powered off: its link down both ends, its
#                                          processes killed, and the agent fails as ssh does
#   virtual-rack.sh fault loss NODE PCT    drop PCT% (1-50) of the packets NODE receives and
#                                          sends (nftables; this kernel has no netem)
#   virtual-rack.sh fault slow-rail NODE RAIL RATE  tc tbf on both ends of NODE's rail RAIL
#   virtual-rack.sh fault cross-cables NODE   NODE's rail 1 and rail 2 cables swapped between
#                                          the rail bridges (its ethR answers on the other rail)
#   virtual-rack.sh clear                  remove every fault
#   virtual-rack.sh status                 nodes, addresses and faults
#   virtual-rack.sh down                   remove everything
#   virtual-rack.sh with [N] -- CMD ...    up, CMD on the head, down (also on failure or Ctrl-C)
set -euo pipefail

STATE=/run/fabricbench-rack
PREFIX=fbrack
NET=198.18.0
HEAD_ADDR=$NET.254
SELF=$(readlink -f "$0")

die() { echo "virtual-rack.sh: $*" >&2; exit 1; }
usage() { sed -n '14,42s/^# \{0,1\}//p' "$SELF" >&2; exit 2; }

need_root() { [ "$(id -u)" = 0 ] || die "run as root (it creates network namespaces)"; }
need_up() { [ -f "$STATE/nodes" ] || die "no rack is up: run '$0 up' first"; }
nodes() { cat "$STATE/nodes"; }
node_ns() { echo "$PREFIX-$1"; }
# The namespaces whose eth0 is on the bridge: every node's and the head's.
all_ns_with_eth0() {
    for node in $(nodes) head; do node_ns "$node"; done
}
check_node() {
    need_up
    grep -qx "$1" "$STATE/nodes" || die "no node '$1' (the rack has: $(nodes | tr '\n' ' '))"
}

# The MCA settings every job on the rack gets: the TCP BTL between nodes (vader
# within one), the rack's network only, and mpirun launching every orted itself.
# The nodes share this host's cores, which Open MPI cannot see: each orted would
# bind its first rank to "its" core 0, so two ranks of two nodes spin on one CPU
# and every message waits for the scheduler tick (4-8 ms at HZ=250, measured).
# So no binding, and, when the rack has more nodes than the host has cores,
# ranks that yield the CPU while they wait instead of spinning through a tick.
# TCP keepalive on mpirun's connections to the daemons: a node cut off is
# noticed within about 10 s ("lost communication with a remote daemon ... on
# node nodeN") instead of TCP's 15 minutes; probes 2 s apart outlast the second
# of queueing a `fault slow` link may add.
mca_env() {
    local yield=0
    [ "$1" -le "$(nproc)" ] || yield=1
    cat <<EOF
OMPI_MCA_plm_rsh_agent=$SELF agent
OMPI_MCA_plm_rsh_no_tree_spawn=1
OMPI_MCA_pml=ob1
OMPI_MCA_btl=tcp,vader,self
OMPI_MCA_btl_tcp_if_include=$NET.0/24
OMPI_MCA_oob_tcp_if_include=$NET.0/24
OMPI_MCA_oob_tcp_keepalive_time=3
OMPI_MCA_oob_tcp_keepalive_intvl=2
OMPI_MCA_oob_tcp_keepalive_probes=3
OMPI_MCA_hwloc_base_binding_policy=none
OMPI_MCA_mpi_yield_when_idle=$yield
OMPI_MCA_rmaps_base_oversubscribe=1
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
EOF
}

down() {
    # Everything this script made, found by name: namespaces fbrack-*, the UTS
    # namespace files under $STATE, then $STATE itself.
    local ns
    for ns in $(ip netns list 2>/dev/null | awk -v p="$PREFIX-" 'index($1, p) == 1 {print $1}'); do
        # Processes left in a node (a killed job's orted) hold nothing we need.
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns delete "$ns" 2>/dev/null || true
    done
    if [ -d "$STATE" ]; then
        local f
        for f in "$STATE"/uts/*; do
            [ -e "$f" ] || continue
            umount "$f" 2>/dev/null || true
        done
        rm -rf "$STATE"
    fi
}

hosts_file() {
    echo "127.0.0.1 localhost"
    echo "$HEAD_ADDR head"
    local i=1 node
    for node in $(nodes); do
        echo "$NET.$i $node"
        i=$((i + 1))
    done
}

up() {
    local n=4 rails=0
    while [ $# -gt 0 ]; do
        case $1 in
        --rails) rails=${2:-}; shift 2 || die "up --rails: give a rail count from 1 to 9" ;;
        *) n=$1; shift ;;
        esac
    done
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] ||
        die "up $n: give a node count from 1 to 200"
    [[ $rails =~ ^[0-9]$ ]] || die "up --rails $rails: give a rail count from 1 to 9"
    [ ! -e "$STATE" ] || die "a rack is already up ($STATE exists): run '$0 down' first"
    for tool in ip tc nsenter unshare setpriv; do
        command -v "$tool" >/dev/null || die "$tool not found: run scripts/setup.sh (iproute2, util-linux)"
    done
    trap 'down; exit 130' INT TERM
    trap 'status=$?; [ $status = 0 ] || { echo "virtual-rack.sh: up failed; removing what it made" >&2; down; }' EXIT
    mkdir -p "$STATE/uts" "$STATE/faults"
    seq 1 "$n" | sed 's/^/node/' >"$STATE/nodes"
    mca_env "$n" >"$STATE/mca"
    hosts_file >"$STATE/hosts"
    local sw head
    sw=$(node_ns sw)
    head=$(node_ns head)
    # IPv4 only: no IPv6 link-local address appears anywhere on the rack.
    no_ipv6() { ip netns exec "$1" sh -c 'for k in all default; do echo 1 >/proc/sys/net/ipv6/conf/$k/disable_ipv6; done'; }
    ip netns add "$sw"
    no_ipv6 "$sw"
    ip -n "$sw" link set lo up
    ip -n "$sw" link add name br0 type bridge
    # No STP: ports forward at once; the bridge itself has no address.
    ip -n "$sw" link set br0 type bridge stp_state 0 forward_delay 0
    ip -n "$sw" link set br0 up
    attach() { # namespace, port name on the bridge, address
        ip netns add "$1"
        no_ipv6 "$1"
        ip -n "$1" link set lo up
        ip -n "$sw" link add name "$2" type veth peer name eth0 netns "$1"
        ip -n "$sw" link set "$2" master br0 up
        ip -n "$1" addr add "$3/24" dev eth0
        ip -n "$1" link set eth0 up
        touch "$STATE/uts/$2"
        unshare --uts="$STATE/uts/$2" hostname "$2"
    }
    attach "$head" head "$HEAD_ADDR"
    local i=1
    for node in $(nodes); do
        attach "$(node_ns "$node")" "$node" "$NET.$i"
        i=$((i + 1))
    done
    # Wait until every bridge port forwards (veths take a moment to carry).
    local node
    for node in head $(nodes); do
        for _ in $(seq 50); do
            bridge -n "$sw" link show dev "$node" | grep -q 'state forwarding' && break
            sleep 0.1
        done
        bridge -n "$sw" link show dev "$node" | grep -q 'state forwarding' ||
            die "up: the bridge port of $node does not forward: $(bridge -n "$sw" link show dev "$node")"
    done
    add_rails "$rails"
    trap - INT TERM EXIT
    echo "virtual-rack.sh: $n nodes up: $(nodes | tr '\n' ' ')(addresses $NET.1-$n, head $HEAD_ADDR)"
    [ "$rails" = 0 ] || echo "virtual-rack.sh: $rails rail(s): eth1..eth$rails on bridges rail1..rail$rails, addresses ${NET%.*}.R.1-$n"
}

# Rails: bridge railR in the switch namespace, and on each node ethR (the
# switch side is NODErR) with 198.18.R.I/24; no route joins two rails, as on
# a rail-optimised fabric where rail R of every node meets on leaf R. Each
# node answers ARP only on the interface that holds the address asked for
# (arp_ignore=1, arp_announce=2, as multi-rail hosts are set): with Linux's
# default a crossed cable is hidden, the other rail's interface answering.
add_rails() {
    local k=$1 sw r i node
    sw=$(node_ns sw)
    echo "$k" >"$STATE/rails"
    [ "$k" = 0 ] && return 0
    for node in $(nodes); do
        ip netns exec "$(node_ns "$node")" sh -c \
            'echo 1 >/proc/sys/net/ipv4/conf/all/arp_ignore; echo 2 >/proc/sys/net/ipv4/conf/all/arp_announce'
    done
    for r in $(seq 1 "$k"); do
        ip -n "$sw" link add name "rail$r" type bridge
        ip -n "$sw" link set "rail$r" type bridge stp_state 0 forward_delay 0
        ip -n "$sw" link set "rail$r" up
        i=1
        for node in $(nodes); do
            ip -n "$sw" link add name "${node}r$r" type veth peer name "eth$r" netns "$(node_ns "$node")"
            ip -n "$sw" link set "${node}r$r" master "rail$r" up
            ip -n "$(node_ns "$node")" addr add "${NET%.*}.$r.$i/24" dev "eth$r"
            ip -n "$(node_ns "$node")" link set "eth$r" up
            i=$((i + 1))
        done
    done
    for r in $(seq 1 "$k"); do
        for node in $(nodes); do
            rail_port_forwards "${node}r$r"
        done
    done
}

# Waits until a rail port of the switch forwards (after it joins a bridge).
rail_port_forwards() {
    local sw
    sw=$(node_ns sw)
    for _ in $(seq 50); do
        bridge -n "$sw" link show dev "$1" | grep -q 'state forwarding' && return 0
        sleep 0.1
    done
    die "the switch port $1 does not forward: $(bridge -n "$sw" link show dev "$1")"
}

# A node's neighbour entries on its rails, forgotten after a cable moves (a
# failed ARP entry would hold for seconds).
forget_rail_neighbours() {
    local r
    for r in $(seq 1 "$(rails)"); do
        ip -n "$(node_ns "$1")" neigh flush dev "eth$r" 2>/dev/null || true
    done
}

rails() { cat "$STATE/rails" 2>/dev/null || echo 0; }

# fault slow-rail NODE RAIL RATE and fault cross-cables NODE.
rail_fault() {
    local kind=$1 node=$2 rail=${3:-} rate=${4:-}
    local ns sw
    ns=$(node_ns "$node")
    sw=$(node_ns sw)
    case $kind in
    slow-rail)
        [[ $rail =~ ^[0-9]+$ ]] && [ "$rail" -ge 1 ] && [ "$rail" -le "$(rails)" ] ||
            die "fault slow-rail $node '$rail': give a rail from 1 to $(rails) (up --rails K makes rails)"
        local burst
        burst=$(tbf_burst "$rate") || die "fault slow-rail $node $rail '$rate': give a rate as tc writes it: 200mbit, 1gbit"
        tc -n "$ns" qdisc replace dev "eth$rail" root tbf rate "$rate" burst "$burst" latency 1s
        tc -n "$sw" qdisc replace dev "${node}r$rail" root tbf rate "$rate" burst "$burst" latency 1s
        echo "$rail $rate" >>"$STATE/faults/$node.slow-rail"
        ;;
    cross-cables)
        [ "$(rails)" -ge 2 ] || die "fault cross-cables $node: the rack has $(rails) rail(s); up --rails 2 makes two"
        # Rail 1's cable into leaf 2 and rail 2's into leaf 1: each interface
        # keeps its address, on the other rail's network.
        ip -n "$sw" link set "${node}r1" master rail2
        ip -n "$sw" link set "${node}r2" master rail1
        rail_port_forwards "${node}r1"
        rail_port_forwards "${node}r2"
        echo "rail 1 on rail2, rail 2 on rail1" >"$STATE/faults/$node.cross-cables"
        ;;
    esac
}

# Every rail of every node back as `up` made it.
clear_rail_faults() {
    local sw node r
    sw=$(node_ns sw)
    for node in $(nodes); do
        for r in $(seq 1 "$(rails)"); do
            tc -n "$(node_ns "$node")" qdisc del dev "eth$r" root 2>/dev/null || true
            tc -n "$sw" qdisc del dev "${node}r$r" root 2>/dev/null || true
            ip -n "$sw" link set "${node}r$r" master "rail$r"
            rail_port_forwards "${node}r$r"
        done
    done
    # Every node's: the others' entries for a moved node failed too.
    for node in $(nodes); do
        forget_rail_neighbours "$node"
    done
}

# Enters a node (or the head): its network namespace with /sys of that
# namespace (ip netns exec), its host name, the rack's /etc/hosts, then the
# node's faults, then CMD.
enter() {
    local node=$1
    shift
    exec ip netns exec "$(node_ns "$node")" nsenter --uts="$STATE/uts/$node" -- "$SELF" _inside "$node" "$@"
}

inside() {
    local node=$1
    shift
    # ip netns exec gave this process a mount namespace of its own (slave to
    # the host's): this bind mount is seen by the node's processes only.
    mount --bind "$STATE/hosts" /etc/hosts
    # Open MPI's session directory, as on a node of its own: the nodes share this
    # host's /tmp, where it is /tmp/ompi.HOSTNAME.UID/jf.JOB, so under `fault
    # duphost` two daemons of one name would share (and each remove at its end)
    # one job directory, the other's PMIx store in it.
    if [ "$node" != head ]; then
        mkdir -p "$STATE/tmp/$node"
        export OMPI_MCA_orte_tmpdir_base=$STATE/tmp/$node
    fi
    local f=$STATE/faults/$node
    if [ -f "$f.env" ]; then
        while IFS= read -r kv; do export "${kv?}"; done <"$f.env"
    fi
    if [ -f "$f.memlock" ]; then
        # Root holds CAP_IPC_LOCK, which lifts the limit: drop it, as a user's
        # job on a real node runs without it.
        ulimit -l "$(cat "$f.memlock")"
        exec setpriv --bounding-set -ipc_lock --inh-caps -ipc_lock -- "$@"
    fi
    exec "$@"
}

agent() {
    [ $# -ge 2 ] || die "agent NODE CMD...: mpirun's plm_rsh_agent"
    local node=$1
    shift
    check_node "$node"
    # A node powered off answers nothing: ssh gives up with 255, as here.
    if [ -e "$STATE/faults/$node.down" ]; then
        echo "ssh: connect to host $node port 22: No route to host" >&2
        exit 255
    fi
    # rsh semantics: the remote command is one shell line (mpirun quotes for it).
    enter "$node" sh -c "$*"
}

# A daemon's way in: nsenter into the namespaces alone. `ip netns exec` (enter)
# remounts /sys for the namespace, and slurmd 22.05 then finds no
# /sys/fs/cgroup and dies initialising its cgroup plugin, even with task/none.
daemon() {
    local node=${1:-}
    [ -n "$node" ] || die "daemon NODE -- CMD ...: give the node (or head)"
    shift
    [ "${1:-}" = -- ] && shift
    [ $# -ge 1 ] || die "daemon $node -- CMD ...: give the command"
    [ "$node" = head ] || check_node "$node"
    need_up
    exec nsenter --net="/run/netns/$(node_ns "$node")" --uts="$STATE/uts/$node" -- "$@"
}

head_env() {
    while IFS= read -r kv; do export "${kv?}"; done <"$STATE/mca"
}

run() {
    need_up
    local per_node=1
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        case $1 in
        -N) per_node=$2; shift 2 ;;
        *) die "run: unknown option $1 (run [-N K] -- CMD ...)" ;;
        esac
    done
    [ "${1:-}" = -- ] && shift
    [ $# -ge 1 ] || die "run [-N K] -- CMD ...: give the command to start on every node"
    local hosts count
    hosts=$(nodes | sed "s/\$/:$per_node/" | paste -sd,)
    count=$(($(nodes | wc -l) * per_node))
    head_env
    # More ranks than cores: they must yield while they wait (see mca_env).
    [ "$count" -le "$(nproc)" ] || export OMPI_MCA_mpi_yield_when_idle=1
    enter head mpirun -np "$count" --host "$hosts" --map-by "ppr:$per_node:node" "$@"
}

exec_head() {
    need_up
    [ "${1:-}" = -- ] && shift
    [ $# -ge 1 ] || die "exec -- CMD ...: give the command to run on the head"
    head_env
    enter head "$@"
}

# tbf's bucket must hold at least one timer tick of traffic (HZ 250 here) and a
# full frame, or the configured rate is not reached.
tbf_burst() {
    awk -v r="$1" 'BEGIN {
        n = r + 0; u = tolower(substr(r, length(n "") + 1))
        m["bit"] = 1; m["kbit"] = 1e3; m["mbit"] = 1e6; m["gbit"] = 1e9
        if (n <= 0 || !(u in m)) exit 1
        b = n * m[u] / 8 / 250 * 2; if (b < 16384) b = 16384
        printf "%d\n", b }'
}

fault() {
    need_up
    local kind=${1:-} node=${2:-} value=${3:-}
    [ -n "$kind" ] && [ -n "$node" ] || usage
    check_node "$node"
    local ns sw
    ns=$(node_ns "$node")
    sw=$(node_ns sw)
    case $kind in
    slow)
        local burst
        burst=$(tbf_burst "$value") || die "fault slow $node '$value': give a rate as tc writes it: 200mbit, 1gbit"
        # Both directions: the node's egress and the bridge's egress toward it.
        tc -n "$ns" qdisc replace dev eth0 root tbf rate "$value" burst "$burst" latency 1s
        tc -n "$sw" qdisc replace dev "$node" root tbf rate "$value" burst "$burst" latency 1s
        echo "$value" >"$STATE/faults/$node.slow"
        ;;
    mtu)
        [[ $value =~ ^[0-9]+$ ]] && [ "$value" -ge 576 ] && [ "$value" -le 65535 ] ||
            die "fault mtu $node '$value': give an MTU from 576 to 65535"
        ip -n "$ns" link set eth0 mtu "$value"
        echo "$value" >"$STATE/faults/$node.mtu"
        ;;
    switch-mtu)
        [[ $value =~ ^[0-9]+$ ]] && [ "$value" -ge 576 ] && [ "$value" -le 65535 ] ||
            die "fault switch-mtu $node '$value': give an MTU from 576 to 65535"
        # The bridge forwards no frame larger than the egress port's MTU: what
        # the node sends above it toward others passes, what comes back is dropped.
        ip -n "$sw" link set "$node" mtu "$value"
        # A veth carries a sender's TCP segments as one GSO packet, which the
        # bridge forwards whatever its size: a bulk send then passes and only
        # a lone full-size segment is dropped, so the fault came and went with
        # timing. One segment per packet from every sender, as on a wire.
        for ns in $(all_ns_with_eth0); do ip -n "$ns" link set eth0 gso_max_segs 1; done
        echo "$value" >"$STATE/faults/$node.switch-mtu"
        ;;
    duphost)
        [ -n "$value" ] && [ "$value" != "$node" ] || die "fault duphost $node: give another node's name"
        check_node "$value"
        # The node's own UTS namespace: what its processes' gethostname says.
        nsenter --uts="$STATE/uts/$node" hostname "$value"
        echo "$value" >"$STATE/faults/$node.duphost"
        ;;
    memlock)
        [[ $value =~ ^[0-9]+$ ]] || die "fault memlock $node '$value': give the limit in KiB"
        echo "$value" >"$STATE/faults/$node.memlock"
        ;;
    env)
        [[ $value =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "fault env $node '$value': give VAR=VALUE"
        echo "$value" >>"$STATE/faults/$node.env"
        ;;
    cut)
        ip -n "$sw" link set "$node" down
        touch "$STATE/faults/$node.cut"
        ;;
    down)
        echo "powered off" >"$STATE/faults/$node.down"
        ip -n "$sw" link set "$node" down
        ip -n "$ns" link set eth0 down
        # What ran there stops with the power (a job's orted, a rank).
        ip netns pids "$ns" | xargs -r kill -9 2>/dev/null || true
        ;;
    loss)
        [[ $value =~ ^[0-9]+$ ]] && [ "$value" -ge 1 ] && [ "$value" -le 50 ] ||
            die "fault loss $node '$value': give a whole percentage from 1 to 50"
        command -v nft >/dev/null || die "fault loss: nft not found: apt-get install nftables"
        # Both directions of the node's interface, at random (numgen), as a lossy
        # link or a switch dropping; the table is the node's own and goes with clear.
        ip netns exec "$ns" nft -f - <<NFT
table inet fabricbench_loss
delete table inet fabricbench_loss
table inet fabricbench_loss {
    chain in { type filter hook input priority 0; iifname "eth0" numgen random mod 100 < $value drop; }
    chain out { type filter hook output priority 0; oifname "eth0" numgen random mod 100 < $value drop; }
}
NFT
        # One segment per packet on the node's link, as on a wire (see switch-mtu):
        # a veth carries a 64 KiB GSO burst as one packet, and a drop of one lost a
        # whole burst, so a pair's loss came as a few retransmit timeouts or none.
        # The node's sends and the bridge's toward it only: segmenting every
        # sender overflowed the loaded host's receive backlog on healthy pairs.
        ip -n "$ns" link set eth0 gso_max_segs 1
        ip -n "$(node_ns sw)" link set "$node" gso_max_segs 1
        echo "$value" >"$STATE/faults/$node.loss"
        ;;
    slow-rail | cross-cables) rail_fault "$kind" "$node" "$value" "${4:-}" ;;
    *) die "fault $kind: one of slow, mtu, switch-mtu, duphost, memlock, env, cut, down, loss, slow-rail, cross-cables" ;;
    esac
}

clear_faults() {
    need_up
    local sw
    sw=$(node_ns sw)
    for node in $(nodes); do
        local ns
        ns=$(node_ns "$node")
        tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
        tc -n "$sw" qdisc del dev "$node" root 2>/dev/null || true
        ip -n "$ns" link set eth0 mtu 1500
        ip -n "$sw" link set "$node" mtu 1500 gso_max_segs 65535
        nsenter --uts="$STATE/uts/$node" hostname "$node"
        ip -n "$sw" link set "$node" up
        ip -n "$ns" link set eth0 up
        ! command -v nft >/dev/null || ip netns exec "$ns" nft delete table inet fabricbench_loss 2>/dev/null || true
    done
    for ns in $(all_ns_with_eth0); do ip -n "$ns" link set eth0 gso_max_segs 65535; done
    clear_rail_faults
    rm -f "$STATE"/faults/*
}

status() {
    need_up
    local sw
    sw=$(node_ns sw)
    for node in $(nodes); do
        local ns addr faults
        ns=$(node_ns "$node")
        addr=$(awk -v n="$node" '$2 == n {print $1}' "$STATE/hosts")
        faults=$(cd "$STATE/faults" && for f in "$node".*; do
            if [ -e "$f" ]; then printf '%s=%s ' "${f#"$node".}" "$(paste -sd, "$f")"; fi
        done)
        printf '%-8s %-13s mtu %-5s link %-4s %s\n' "$node" "$addr" \
            "$(ip -n "$ns" -o link show eth0 | sed -n 's/.* mtu \([0-9]*\).*/\1/p')" \
            "$(ip -n "$sw" -o link show "$node" | grep -q 'state UP\|,UP' && echo up || echo down)" \
            "${faults:-no faults}"
        for r in $(seq 1 "$(rails)"); do
            printf '  rail %s eth%s %-13s on bridge %s\n' "$r" "$r" \
                "$(ip -n "$ns" -o -4 addr show "eth$r" | awk '{print $4}')" \
                "$(ip -n "$sw" -o link show "${node}r$r" | sed -n 's/.* master \([^ ]*\).*/\1/p')"
        done
    done
}

with() {
    local n=4
    if [ $# -gt 0 ] && [ "$1" != -- ]; then n=$1; shift; fi
    [ "${1:-}" = -- ] && shift
    [ $# -ge 1 ] || die "with [N] -- CMD ...: give the command to run on the head"
    up "$n"
    trap 'down' EXIT
    trap 'exit 130' INT TERM
    local status=0
    (head_env; enter head "$@") || status=$?
    return $status
}

cmd=${1:-}
[ -n "$cmd" ] || usage
shift
case $cmd in
up) need_root; up "$@" ;;
down) need_root; down ;;
run) need_root; run "$@" ;;
exec) need_root; exec_head "$@" ;;
agent) agent "$@" ;;
daemon) need_root; daemon "$@" ;;
hosts) need_up; grep -v ' localhost$' "$STATE/hosts" ;;
_inside) inside "$@" ;;
fault) need_root; fault "$@" ;;
clear) need_root; clear_faults ;;
status) status ;;
with) need_root; with "$@" ;;
-h | --help | help) usage ;;
*) die "unknown command '$cmd' (up, run, exec, agent, daemon, hosts, fault, clear, status, down, with)" ;;
esac
