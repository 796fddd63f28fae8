#!/usr/bin/env bash
# doctor against real RDMA devices: in the Soft-RoCE VM (shared/tools/softroce-vm),
# rxe1 on veth0 and rxe2 on veth1 act as two nodes. veth1's MTU is raised to 4200,
# so the kernel runs rxe2 at an RDMA MTU of 4096 while rxe1 (veth0, MTU 1500)
# stays at 1024: the RoCE MTU mismatch that only shows between nodes. doctor runs
# as two ranks (mpirun's MPMD form, one --node-name and --hca each) and must find
# it on both nodes, with the MTUs the kernel reports (ibv_devinfo).
#
# Usage: scripts/softroce-doctor.sh        (root; the VM takes about a minute)
# Prints doctor's table, the kernel's MTUs, then PASS or FAIL; exits 0 on PASS.
set -euo pipefail
cd "$(dirname "$0")/.."
vm=${SOFTROCE_VM:-$PWD/../shared/tools/softroce-vm/run-in-vm.sh}
[ -x "$vm" ] || { echo "softroce-doctor: $vm not found: set SOFTROCE_VM to run-in-vm.sh" >&2; exit 2; }
cargo build --quiet --bin doctor --bin doctor-mpi
out=target/softroce-doctor
rm -rf "$out" && mkdir -p "$out"

# The VM mounts this folder read-write at the same path, so the guest writes into $out.
set +e
"$vm" -t 600 bash -c '
    set -u
    out='"$out"'
    ip link set veth1 mtu 4200
    sleep 1
    for d in rxe1 rxe2; do
        echo "$d $(ibv_devinfo -d $d | awk "/active_mtu/ {print \$2}")" >> $out/kernel-mtu.txt
    done
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    mpirun -np 1 target/debug/doctor --node-name node-a --hca rxe1 --json $out/doctor.json --csv $out/doctor.csv \
         : -np 1 target/debug/doctor --node-name node-b --hca rxe2 > $out/doctor.txt 2> $out/mpirun.err
    echo $? > $out/doctor.rc
'
vm_rc=$?
set -e
cat "$out/doctor.txt" 2>/dev/null || true
echo "kernel (ibv_devinfo active_mtu):"
cat "$out/kernel-mtu.txt" 2>/dev/null || true
[ "$vm_rc" -eq 0 ] || { echo "FAIL: the VM exited $vm_rc"; exit 1; }

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rc = int(open(f"{out}/doctor.rc").read())
report = json.load(open(f"{out}/doctor.json"))
kernel = dict(line.split() for line in open(f"{out}/kernel-mtu.txt"))
derived = {h["name"]: h["ports"][0]["active_mtu"] for n in report["nodes"] for h in n["hcas"]}
mismatch = sorted(f["node"] for f in report["findings"] if f["check"] == "mtu-mismatch")
problems = []
if rc != 1:
    problems.append(f"doctor exited {rc}, expected 1 (errors found)")
if mismatch != ["node-a", "node-b"]:
    problems.append(f"mtu-mismatch findings on {mismatch}, expected node-a and node-b")
for dev, mtu in kernel.items():
    if str(derived.get(dev)) != mtu:
        problems.append(f"{dev}: doctor derived active MTU {derived.get(dev)}, the kernel says {mtu}")
if set(kernel.values()) != {"1024", "4096"}:
    problems.append(f"the VM did not set up different MTUs: {kernel}")
print(f"doctor exit {rc}; mtu-mismatch on {', '.join(mismatch)}; doctor's MTUs {derived} match the kernel's {kernel}"
      if not problems else "\n".join(problems))
print("PASS" if not problems else "FAIL")
sys.exit(1 if problems else 0)
PY
