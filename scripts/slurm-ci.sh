#!/usr/bin/env bash
# Slurm for real on the virtual rack (root): munged, slurmctld on the rack's head
# and one slurmd per node (scripts/virtual-rack.sh: network namespaces with
# their own host names, addresses from 198.18.0.0/15), then
#   1. srun --mpi=pmix of all_reduce_perf across every node: #wrong 0, and the
#      CSV's nnodes is the node count;
#   2. srun -O of more tasks than CPUs on one node: the binaries see it and
#      tell Open MPI to yield (the header's WARNING), and the run is right;
#   3. rack_check with launcher = "srun": its verdict line and exit status;
#   4. sbatch --wait of scripts/slurm/rack-acceptance.sbatch, its GPU
#      directives overridden from the command line: its verdict.
# Every daemon is stopped by the PID in its pid file, the rack taken down and
# the temporary folder removed, also on failure and Ctrl-C; it fails if any
# slurm or munge process remains. Every wait is bounded.
#
#   scripts/slurm-ci.sh [NODES]     (default 2; binaries from $FABRICBENCH_BIN,
#                                    default target/debug: cargo build --bins first)
#
# It holds the rack's lock (/run/fabricbench-rack.lock, as tests/virtual_rack.rs
# does) while the rack is up.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "slurm-ci.sh: $*"; }
die() { echo "slurm-ci.sh: $*" >&2; exit 1; }

nodes=${1:-2}
[[ $nodes =~ ^[0-9]+$ ]] && [ "$nodes" -ge 2 ] && [ "$nodes" -le 16 ] ||
    die "NODES '$nodes': give a node count from 2 to 16"
[ "$(id -u)" = 0 ] || die "run as root (network namespaces and Slurm's daemons)"
for tool in munged slurmctld slurmd srun sbatch sinfo scontrol timeout nsenter; do
    command -v "$tool" >/dev/null || die "$tool not found: run scripts/setup.sh (slurm-wlm, munge)"
done
bin=$(readlink -f "${FABRICBENCH_BIN:-target/debug}")
for b in all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf sendrecv_perf doctor rack_check; do
    [ -x "$bin/$b" ] || die "$bin/$b not found: cargo build --bins first (or set FABRICBENCH_BIN)"
done
# Slurm's and munge's processes, by name (pgrep -x of each: one pattern of
# alternatives would pass 15 characters, which pgrep never matches).
daemons() {
    local name
    for name in slurmctld slurmd slurmstepd munged; do pgrep -a -x "$name" || true; done
}
rack=scripts/virtual-rack.sh
exec 9>/run/fabricbench-rack.lock
flock -w 900 9 || die "the virtual rack stayed in use 15 minutes (/run/fabricbench-rack.lock): is a test hung?"
# Ones running before (a site's own munged) are not this script's to stop, nor
# to count as left behind.
before=$(daemons | awk '{print $1}')
started=$(date +%s)
work=$(mktemp -d /tmp/fabricbench-slurm.XXXXXX)
chmod 755 "$work" # munged: its socket needs execute permission on every folder above
rack_up=0

# Stops a daemon by the PID in its pid file: TERM, then KILL after 10 s.
stop_pidfile() {
    local pid
    [ -s "$1" ] || return 0
    pid=$(cat "$1")
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    echo "slurm-ci.sh: pid $pid ($1) outlived TERM by 10 s: KILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
    local status=$? f
    trap - EXIT INT TERM
    if [ "$status" != 0 ] && [ -d "$work" ]; then
        # What the daemons said, for the failure's cause.
        for f in "$work"/*.log; do
            [ -s "$f" ] || continue
            echo "--- $f (last 15 lines)" >&2
            tail -n 15 "$f" >&2
        done
    fi
    for f in "$work"/slurmd-*.pid "$work/slurmctld.pid"; do
        [ -e "$f" ] && stop_pidfile "$f"
    done
    # Steps and tasks left in a node (a killed job): the rack's down ends them.
    [ "$rack_up" = 0 ] || "$rack" down
    stop_pidfile "$work/munged.pid"
    rm -rf "$work"
    local left
    left=$(daemons | awk -v before=" $(echo $before) " 'index(before, " " $1 " ") == 0')
    if [ -n "$left" ]; then
        echo "slurm-ci.sh: processes remain after cleanup:" >&2
        echo "$left" >&2
        status=1
    else
        echo "slurm-ci.sh: cleanup: no slurmctld, slurmd, slurmstepd or munged left, rack down, $work removed ($(($(date +%s) - started)) s in all)"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$rack" up "$nodes" >/dev/null
rack_up=1
head_addr=$("$rack" hosts | awk '$2 == "head" {print $1}')
node_list=$("$rack" hosts | awk '$2 != "head" {print $2}' | paste -sd,)
cpus=$(nproc)

# munge: its own key, socket, pid, log and seed (--force: as root, in /tmp).
dd if=/dev/urandom of="$work/munge.key" bs=1 count=1024 status=none
chmod 0400 "$work/munge.key"
timeout 30 munged --force --socket="$work/munge.sock" --key-file="$work/munge.key" \
    --pid-file="$work/munged.pid" --log-file="$work/munged.log" --seed-file="$work/munged.seed"

# One TmpFS per node: two slurmd's sharing /tmp collide in the pmix plugin's
# directories ("Cannot create directory /tmp/spmix_appdir_0_2.0: File exists").
mkdir -p "$work/state"
{
    cat <<EOF
ClusterName=fabricbench
SlurmctldHost=head($head_addr)
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge.sock
CredType=cred/munge
StateSaveLocation=$work/state
SlurmctldPidFile=$work/slurmctld.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdSpoolDir=$work/spool-%n
SlurmdPidFile=$work/slurmd-%n.pid
SlurmdLogFile=$work/slurmd-%n.log
TmpFS=$work/tmp-%n
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
ReturnToService=2
# A task that dies ends its step: with Slurm's default (0) the others wait for
# it in MPI for ever (Open MPI 4.1.4's TCP BTL crashed a task in MPI_Init about
# once in 10 launches of 3 nodes here, about once in 150 of 2: docs/launching.md).
KillOnBadExit=1
KillWait=5
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
EOF
    "$rack" hosts | awk -v cpus="$cpus" '$2 != "head" {print "NodeName=" $2 " NodeAddr=" $1 " CPUs=" cpus " State=UNKNOWN"}'
    echo "PartitionName=rack Nodes=$node_list Default=YES MaxTime=30 State=UP"
} >"$work/slurm.conf"
export SLURM_CONF=$work/slurm.conf

# Each daemon forks into the background once ready: the start itself is bounded.
timeout 30 "$rack" daemon head -- slurmctld -f "$work/slurm.conf"
for node in ${node_list//,/ }; do
    mkdir -p "$work/tmp-$node" "$work/spool-$node"
    timeout 30 "$rack" daemon "$node" -- slurmd -f "$work/slurm.conf" -N "$node"
done
# Every node idle within 60 s.
idle=0
deadline=$((SECONDS + 60))
while [ "$SECONDS" -lt "$deadline" ]; do
    idle=$(timeout 10 "$rack" exec -- sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l) || idle=0
    [ "$idle" -ge "$nodes" ] && break
    sleep 0.5
done
[ "$idle" -ge "$nodes" ] || die "the nodes did not come up idle in 60 s: $(timeout 10 "$rack" exec -- sinfo -N 2>&1 | tr '\n' ';')"
say "munged, slurmctld on head ($head_addr), slurmd on $node_list: $nodes nodes idle ($(($(date +%s) - started)) s)"

# On the rack's head: srun and sbatch reach slurmctld, and the rack's MCA
# settings (the TCP BTL on the rack's network) travel with the job's environment.
# In the background and waited for: a Ctrl-C interrupts the wait at once (a
# foreground command would hold the trap until it ends), and the command's
# timeout is ended with it.
on_head() {
    trap 'kill $! 2>/dev/null; exit 130' INT TERM
    timeout -k 5 "$1" "$rack" exec -- "${@:2}" &
    wait $!
}

# 1. srun --mpi=pmix across every node.
t=$(date +%s)
out=$(on_head 120 srun --mpi=pmix -N "$nodes" --ntasks-per-node=1 --time=5 \
    "$bin/all_reduce_perf" -b 8 -e 64K -f 8 -n 5 -w 1 --csv "$work/srun.csv" 2>&1) ||
    die "srun --mpi=pmix of all_reduce_perf on $nodes nodes failed: $out"
grep -q '^# Out of bounds values : 0 OK$' <<<"$out" ||
    die "srun's all_reduce_perf: #wrong is not 0: $out"
[ "$(grep -c '^#  Rank .* Pid .* on *node' <<<"$out")" = "$nodes" ] ||
    die "srun's all_reduce_perf: not one rank per node: $out"
grep -E '^#  Rank|^# Transport' <<<"$out" | sed 's/^/slurm-ci.sh:   /'
nnodes=$(awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "nnodes") c = i; next} c {print $c}' "$work/srun.csv" | sort -u | paste -sd' ')
[ "$nnodes" = "$nodes" ] || die "srun's CSV: nnodes is '$nnodes', not $nodes"
say "srun --mpi=pmix -N $nodes: all_reduce_perf #wrong 0 (Out of bounds values : 0 OK), CSV nnodes $nnodes ($(($(date +%s) - t)) s)"

# 2. More tasks than CPUs on one node (srun -O): Open MPI told to yield.
t=$(date +%s)
tasks=$((cpus + 2))
out=$(on_head 120 env -u OMPI_MCA_mpi_yield_when_idle srun --mpi=pmix -O -N 1 -n "$tasks" --time=5 \
    "$bin/all_reduce_perf" -b 8 -e 8 -n 20 -w 2 2>&1) ||
    die "srun -O of $tasks tasks on one node failed: $out"
grep -q '^# Out of bounds values : 0 OK$' <<<"$out" || die "srun -O's all_reduce_perf: #wrong is not 0: $out"
warning=$(grep '^# WARNING: .*OMPI_MCA_mpi_yield_when_idle=1' <<<"$out") ||
    die "srun -O of $tasks tasks on $cpus CPUs: no yield warning in the header: $out"
time8=$(awk '$1 == 8 && $2 == 2 {print $6; exit}' <<<"$out")
say "srun -O -n $tasks on one node of $cpus CPUs: 8 B in $time8 us; ${warning#\# } ($(($(date +%s) - t)) s)"

# 3. rack_check with launcher = "srun".
t=$(date +%s)
cat >"$work/rack-srun.toml" <<EOF
name = "virtual rack under Slurm: $nodes nodes (scripts/slurm-ci.sh)"

[launch]
launcher = "srun"
nodes = $nodes
ranks_per_node = 1
args = ["--time=5"]
timeout_s = 120

[rounds]
count = 3
max = 6
max_seconds = 60

[doctor]
args = []

[[test]]
name = "all_reduce"
binary = "all_reduce_perf"
args = ["-b", "16", "-e", "256K", "-f", "4", "-n", "5", "-w", "1"]

# Sanity floors, as scripts/rack-virtual.toml's: nodes sharing a small host's cores.
[[check]]
test = "all_reduce"
metric = "busbw"
size = "256K"
min = 0.005

[[check]]
test = "all_reduce"
metric = "time"
size = "16"
max = 100000
EOF
rc=0
out=$(on_head 420 "$bin/rack_check" --spec "$work/rack-srun.toml" --out "$work/rack" 2>&1) || rc=$?
verdict=$(grep '^rack_check: .*; report: ' <<<"$out" | tail -1)
grep -q '^rack_check: doctor: srun --mpi=pmix ' <<<"$out" || die "rack_check did not launch through srun: $out"
[ "$rc" = 0 ] || die "rack_check with launcher = \"srun\" exited $rc: $out"
say "rack_check, launcher = \"srun\", exit 0: $verdict ($(($(date +%s) - t)) s)"

# 4. sbatch --wait of the rack acceptance recipe, CPU-only: its GPU directives
# overridden on the command line, its steps' flags by its variables.
t=$(date +%s)
rc=0
out=$(FABRICBENCH_BIN=$bin FABRICBENCH_OUT=$work/sbatch-report FABRICBENCH_BACKEND=mpi \
    FABRICBENCH_DOCTOR_ARGS= FABRICBENCH_COLL_ARGS="-b 8 -e 64K -f 8 -n 5 -w 1" \
    FABRICBENCH_PAIRS_ARGS="-b 8 -e 64K -f 64 -n 5 -w 1" \
    on_head 420 sbatch --wait --nodes="$nodes" --ntasks-per-node=1 --gpus-per-node=0 --time=10 \
    --output="$work/sbatch-%j.out" scripts/slurm/rack-acceptance.sbatch 2>&1) || rc=$?
job_out=$(cat "$work"/sbatch-*.out 2>/dev/null || true)
verdict=$(grep '^fabricbench rack acceptance: ' <<<"$job_out" | tail -1)
[ "$rc" = 0 ] && [[ $verdict == *": PASS"* ]] ||
    die "sbatch --wait of scripts/slurm/rack-acceptance.sbatch exited $rc ($out): $job_out"
say "sbatch --wait rack-acceptance.sbatch (--gpus-per-node=0), exit 0: $verdict ($(($(date +%s) - t)) s)"
