#!/usr/bin/env bash
# GPU check: on a machine with one or more NVIDIA GPUs, runs the nine collectives
# on the nccl backend (every datatype, every op, a few sizes, -c 1), a sweep of
# all_reduce_perf to 1 GiB, the -G / -z / -C modes, --backend auto, -g when there
# are several GPUs, each GPU-only flag of nccl-tests 2.19 once (-R 1/2, -y, -p, the
# -t refusal, -x, -D/-V, -M, -u, NCCL_TESTS_DEVICE, the nccl_algo/nccl_proto columns
# and what NCCL's tuning log costs, f8 types, mulsum, alltoallv, hypercube,
# --all-pairs), and copy_bw; then prints a summary table, last.
#
# Needs nothing from the network. Every binary runs as a single rank without
# mpirun (Open MPI's isolated singleton). NCCL must be on the GPU machine (the
# bundle cannot carry it: its library alone is 190-450 MiB); the first step
# says whether the binaries' own search found it, else uses the pip wheel
# python3 sees, and GPU_CHECK_STOP_AFTER=nccl-discovery stops after that step.
#
# Usage: scripts/gpu-check.sh [BUNDLE]
#   BUNDLE  gpu-bundle.tar.xz or gpu-bundle/ made by scripts/gpu-bundle.sh (the
#           default: whichever is here): binaries in bin/, Open MPI's libraries in
#           usr/; or a directory holding the binaries (e.g. target/release) where
#           MPI is installed.
# Logs and CSVs go to $OUT/gpu-check when OUT is set, else ./gpu-check-out.
# Fits in 10 minutes on one GPU: each step has a time limit and the whole run a
# budget (GPU_CHECK_BUDGET_S, default 540 s); steps that no longer fit are skipped.
set -uo pipefail
cd "$(dirname "$0")/.."

bundle=${1:-gpu-bundle}
[ -n "${1:-}" ] || [ -d "$bundle" ] || bundle=gpu-bundle.tar.xz
bundle=$(realpath "$bundle")
# A packed bundle (what a device run carries) is unpacked first.
if [ -f "$bundle" ]; then
    unpacked=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bundle.XXXXXX")
    trap 'rm -rf "$unpacked"' EXIT
    tar -C "$unpacked" -xJf "$bundle" || { echo "gpu-check.sh: cannot unpack $bundle" >&2; exit 1; }
    bundle=$unpacked/gpu-bundle
fi
bin=$bundle
[ -d "$bundle/bin" ] && bin=$bundle/bin
if [ -d "$bundle/usr" ]; then
    export LD_LIBRARY_PATH="$bundle/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export OPAL_PREFIX="$bundle/usr"
fi
# A single rank without mpirun starts no orted; transports this host lacks stay quiet.
export OMPI_MCA_ess_singleton_isolated=1 OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

out="${OUT:+$OUT/gpu-check}"
out="${out:-$PWD/gpu-check-out}"
rm -rf "$out"
mkdir -p "$out"
steps="$out/steps.tsv"
: > "$steps"
budget=${GPU_CHECK_BUDGET_S:-540}
started=$(date +%s)

echo "# gpu-check: binaries from $bin, results in $out"
echo "# host $(hostname), $(uname -r), $(ldd --version 2>&1 | head -1)"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv,noheader \
        | sed 's/^/# GPU /'
else
    echo "# nvidia-smi not found"
fi
missing=$(ldd "$bin/all_reduce_perf" 2>&1 | grep "not found" || true)
[ -n "$missing" ] && echo "# WARNING: libraries the binaries need are missing: $missing"
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
ngpus=${ngpus:-0}

# Where Python's pip put NCCL, to compare with what the binaries find themselves.
wheel_nccl=$(python3 - 2>/dev/null <<'EOF'
import glob, site, sys
dirs = list(dict.fromkeys(site.getsitepackages() + [site.getusersitepackages()] + sys.path))
for d in dirs:
    for f in glob.glob(d + "/nvidia/nccl/lib/libnccl.so.2"):
        print(f)
        raise SystemExit
EOF
)
echo "# pip's NCCL: ${wheel_nccl:-none found by python3}"

# run_step NAME LIMIT_S CSV_OR_- COMMAND...: runs COMMAND with a time limit, logs to
# $out/NAME.log, and appends "name rc seconds log csv" to the step list.
run_step() {
    local name=$1 limit=$2 csv=$3
    shift 3
    local left=$(( budget - ($(date +%s) - started) ))
    if [ "$left" -lt 15 ]; then
        printf '%s\t%s\t%s\t%s\t%s\n' "$name" "skipped" 0 "-" "$csv" >> "$steps"
        echo "# $name: skipped (time budget spent)"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "# $name: $*"
    local t0 rc
    t0=$(date +%s.%N)
    timeout --kill-after=10 "$limit" "$@" > "$out/$name.log" 2>&1
    rc=$?
    local dt
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$dt" "$out/$name.log" "$csv" >> "$steps"
    tail -n 3 "$out/$name.log" | sed 's/^/#   /'
}

# 1. NCCL found without help: no --nccl-lib, no FABRICBENCH_NCCL_LIB. The binary
# opens NCCL before the driver and names what it found either way: in its header
# ("# NCCL library: NCCL 2.32.3 at PATH (symbols: ...)"), in its error ("NCCL
# 2.32.3 found at PATH; ...") or "NCCL not found: ..."; anything else is reported
# as it is, with no conclusion about a search it does not show.
unset FABRICBENCH_NCCL_LIB
run_step nccl-discovery 60 - "$bin/all_reduce_perf" --backend nccl -b 8 -e 8 -n 1 -w 0 -T 50
discovery_log="$out/nccl-discovery.log"
found=$(sed -n -e 's/^# NCCL library: NCCL \([0-9.]*\) at \(.*\) (symbols: .*/\2 by the binary (NCCL \1)/p' \
               -e 's/.*: NCCL \([0-9.]*\) found at \([^;]*\);.*/\2 by the binary (NCCL \1)/p' "$discovery_log" | head -n 1)
if [ -n "$found" ]; then
    echo "# NCCL found at $found"
elif grep -q "NCCL not found" "$discovery_log"; then
    if [ -n "$wheel_nccl" ]; then
        echo "# NCCL not found by the binary's search; the remaining steps use the wheel python3 sees at $wheel_nccl (FABRICBENCH_NCCL_LIB)"
        export FABRICBENCH_NCCL_LIB=$wheel_nccl
    else
        echo "# NCCL not found by the binary's search, nor a wheel by python3: the nccl steps will fail"
    fi
else
    echo "# NCCL: the binary did not say where it looked: $(grep -m 1 'error' "$discovery_log" || tail -n 1 "$discovery_log")"
fi
[ "${GPU_CHECK_STOP_AFTER:-}" = nccl-discovery ] && exit 0

# 2. The nine collectives, every datatype (and op), with validation.
for coll in all_reduce reduce_scatter reduce broadcast all_gather alltoall gather scatter sendrecv; do
    ops=()
    case $coll in all_reduce|reduce_scatter|reduce) ops=(-o all) ;; esac
    run_step "$coll" 90 "$out/$coll.csv" "$bin/${coll}_perf" --backend nccl -d all "${ops[@]}" \
        -b 8 -e 1M -f 32 -n 5 -w 1 -c 1 -T 60 --csv "$out/$coll.csv"
done

# 3. all_reduce sweep to 1 GiB.
run_step all_reduce-sweep 150 "$out/all_reduce-sweep.csv" "$bin/all_reduce_perf" --backend nccl \
    -b 8 -e 1G -f 2 -n 20 -w 5 -c 1 -T 120 --csv "$out/all_reduce-sweep.csv"

# 4. Launch modes: CUDA graph replays; blocking calls with CPU launch time.
run_step all_reduce-graph 60 "$out/all_reduce-graph.csv" "$bin/all_reduce_perf" --backend nccl \
    -b 8 -e 64M -f 8 -n 20 -G 10 -c 1 -T 50 --csv "$out/all_reduce-graph.csv"
run_step all_reduce-blocking 60 "$out/all_reduce-blocking.csv" "$bin/all_reduce_perf" --backend nccl \
    -b 8 -e 64M -f 8 -n 20 -z 1 -C 1 -c 1 -T 50 --csv "$out/all_reduce-blocking.csv"

# NCCL_TESTS_SPLIT on NCCL: two groups of one rank, one communicator each (needs two
# GPUs: one rank per GPU).
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
    run_step nccl-split 90 "$out/nccl-split.csv" mpirun --allow-run-as-root -np 2 -x NCCL_TESTS_SPLIT="MOD 2" \
        "$bin/all_reduce_perf" --backend nccl -b 8 -e 1M -f 32 -n 5 -c 1 -T 60 --csv "$out/nccl-split.csv"
else
    echo "# nccl-split: skipped (one GPU: a split needs a GPU per rank)"
fi

# 5. --backend auto picks nccl here.
run_step backend-auto 60 "$out/backend-auto.csv" "$bin/broadcast_perf" -b 8 -e 1K -f 4 -c 1 -T 50 \
    --csv "$out/backend-auto.csv"

# 6. Several GPUs driven by one process, when there are several.
if [ "$ngpus" -ge 2 ]; then
    run_step all_reduce-g"$ngpus" 90 "$out/all_reduce-g.csv" "$bin/all_reduce_perf" --backend nccl \
        -g "$ngpus" -b 8 -e 256M -f 4 -c 1 -T 60 --csv "$out/all_reduce-g.csv"
fi

# 7. nccl-tests 2.19's GPU-only flags (#12), each once. A "-refusal" step passes when
# it exits 2 with one error line; the summary says what each proved.
small=(-b 8 -e 16M -f 16 -n 5 -w 1 -c 1 -T 50)
ar=$bin/all_reduce_perf
run_step register-local 60 "$out/register-local.csv" "$ar" --backend nccl -R 1 "${small[@]}" \
    --csv "$out/register-local.csv"
run_step register-window 60 "$out/register-window.csv" "$ar" --backend nccl -R 2 "${small[@]}" \
    --csv "$out/register-window.csv"
run_step stream-null 60 "$out/stream-null.csv" "$ar" --backend nccl -y 1 "${small[@]}" \
    --csv "$out/stream-null.csv"
run_step parallel-init 60 "$out/parallel-init.csv" "$ar" --backend nccl -p 1 -g "$(( ngpus > 1 ? ngpus : 1 ))" \
    "${small[@]}" --csv "$out/parallel-init.csv"
run_step nthreads-refusal 30 - "$ar" --backend nccl -t 2 -b 8 -e 8
run_step cta-policy 60 "$out/cta-policy.csv" "$ar" --backend nccl -x 1 "${small[@]}" --csv "$out/cta-policy.csv"
run_step device-api 60 "$out/device-api.csv" "$ar" --backend nccl -D 0 -V 16 -R 2 "${small[@]}" \
    --csv "$out/device-api.csv"
run_step device-impl-refusal 30 - "$ar" --backend nccl -D 1 -R 2 -b 8 -e 8
run_step memory-report 60 "$out/memory-report.csv" "$ar" --backend nccl -M 1 "${small[@]}" \
    --csv "$out/memory-report.csv"
run_step unalign 60 "$out/unalign.csv" "$ar" --backend nccl -u 1 -d all "${small[@]}" --csv "$out/unalign.csv"
run_step tests-device 60 "$out/tests-device.csv" env NCCL_TESTS_DEVICE=0 "$ar" --backend nccl "${small[@]}" \
    --csv "$out/tests-device.csv"
run_step graph-register 60 "$out/graph-register.csv" "$ar" --backend nccl -G 5 -R 1 "${small[@]}" \
    --csv "$out/graph-register.csv"
# NCCL's algorithm and protocol per size, and what its TUNING log line costs:
# the same small sizes with and without it.
run_step algo-proto 90 "$out/algo-proto.csv" "$ar" --backend nccl -b 8 -e 256M -f 4 -n 20 -c 1 -T 60 \
    --csv "$out/algo-proto.csv"
run_step tuning-on 60 "$out/tuning-on.csv" "$ar" --backend nccl -b 8 -e 64K -f 8 -n 500 -w 50 -c 0 -T 50 \
    --csv "$out/tuning-on.csv"
run_step tuning-off 60 "$out/tuning-off.csv" env NCCL_DEBUG_SUBSYS=INIT,NET,ENV "$ar" --backend nccl \
    -b 8 -e 64K -f 8 -n 500 -w 50 -c 0 -T 50 --csv "$out/tuning-off.csv"
# What other #12 work adds on NCCL (a step fails with a usage error until it is merged).
run_step f8-types 60 "$out/f8-types.csv" "$ar" --backend nccl -d f8e4m3 -o all "${small[@]}" \
    --csv "$out/f8-types.csv"
run_step f8e5m2 60 "$out/f8e5m2.csv" "$bin/reduce_scatter_perf" --backend nccl -d f8e5m2 "${small[@]}" \
    --csv "$out/f8e5m2.csv"
run_step mulsum 60 "$out/mulsum.csv" "$ar" --backend nccl -o mulsum -d all "${small[@]}" --csv "$out/mulsum.csv"
for extra in alltoallv hypercube; do
    [ -x "$bin/${extra}_perf" ] && run_step "$extra" 60 "$out/$extra.csv" "$bin/${extra}_perf" --backend nccl \
        "${small[@]}" --csv "$out/$extra.csv"
done
run_step all-pairs 60 - "$bin/sendrecv_perf" --backend nccl --all-pairs -b 1M -e 1M -n 5 -T 50

# 8. Copy bandwidth against the PCIe, NVLink and memory limits.
run_step copy_bw 180 "$out/copy_bw.csv" "$bin/copy_bw" --csv "$out/copy_bw.csv"

# Summary, last.
python3 - "$steps" <<'EOF'
import csv, re, sys

def rows(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []

def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None

def figure(name, log, table):
    """One line saying what the step measured."""
    if name == "nccl-discovery":
        m = re.search(r"# NCCL library: (NCCL \S+) at (.*) \(symbols: (.*)\)$", log, re.M)
        return f"{m.group(1)} at {m.group(2)} ({m.group(3)})" if m else ""
    if name == "backend-auto":
        m = re.search(r"^# Backend: (.*)$", log, re.M)
        return m.group(1) if m else "no # Backend: line"
    if name == "copy_bw":
        best = {}
        for r in table:
            key = (r["collective"].replace("copy_", ""), r["placement"])
            g = num(r["busbw_gbs"]) or 0
            if key not in best or g > (num(best[key]["busbw_gbs"]) or 0):
                best[key] = r
        parts = []
        for (kind, path), r in sorted(best.items()):
            pct = num(r["pct_of_limit"])
            limit = f" = {pct:.0f}% of {r['limit_name']}" if pct is not None else ""
            parts.append(f"{kind} {path} {num(r['busbw_gbs']):.1f} GB/s{limit}")
        return "; ".join(parts)
    if name.endswith("-refusal"):
        errors = [l for l in log.splitlines() if "error:" in l]
        return errors[0][:160] if errors else "no error line"
    if name == "memory-report":
        m = re.search(r"^# GPU memory usage .*$", log, re.M)
        return m.group(0)[2:] if m else "no # GPU memory usage line"
    if name in ("register-local", "register-window", "stream-null", "parallel-init", "cta-policy", "device-api"):
        said = [l[2:] for l in log.splitlines() if re.match(r"# (Communicators|Buffers|Streams|WARNING|Parallel)", l)]
        head = "; ".join(said)[:200]
        return head if not table else head + " | " + figure("", "", table)
    if name == "algo-proto":
        m = re.search(r"^# NCCL algo/proto .*$", log, re.M)
        filled = sum(1 for r in table if r.get("nccl_algo"))
        return (m.group(0)[2:] if m else "no NCCL algo/proto footer") + f" ({filled}/{len(table)} rows with nccl_algo)"
    if name in ("tuning-on", "tuning-off"):
        out = [r for r in table if r["placement"] == "out-of-place"]
        return ", ".join(f"{r['size_bytes']} B {num(r['time_us']):.2f} us" for r in out)
    if not table:
        return ""
    out = [r for r in table if r["placement"] == "out-of-place"]
    big = max(out or table, key=lambda r: int(r["size_bytes"]))
    small = min(out or table, key=lambda r: int(r["size_bytes"]))
    text = (f"{int(big['size_bytes'])} B: {num(big['time_us']):.1f} us, algbw {num(big['algbw_gbs']):.1f} GB/s, "
            f"busbw {num(big['busbw_gbs']):.1f} GB/s; {int(small['size_bytes'])} B: {num(small['time_us']):.2f} us")
    if small.get("cpu_us") and name.endswith("blocking"):
        text += f" (CPU {num(small['cpu_us']):.2f} us)"
    return text

steps = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
results = []
first_row = None
for name, rc, seconds, log_path, csv_path in steps:
    log = open(log_path, errors="replace").read() if log_path != "-" else ""
    table = rows(csv_path) if csv_path != "-" else []
    first_row = first_row or (table[0] if table and not name.startswith("copy") else None)
    wrong = sum(int(r["wrong"]) for r in table if r.get("wrong") not in (None, ""))
    failed_verdict = "FAILED" in log
    if rc == "skipped":
        verdict = "SKIP"
    elif name.endswith("-refusal"):
        one = sum("error:" in l for l in log.splitlines()) == 1
        verdict = "PASS" if rc == "2" and one and "panicked" not in log else "FAIL"
    elif name == "memory-report" and rc == "0" and "# GPU memory usage" not in log:
        verdict = "FAIL"
    elif name == "algo-proto" and rc == "0" and "not logged by NCCL < 2.22" not in log \
            and not any(r.get("nccl_algo") for r in table):
        verdict = "FAIL"
    elif rc == "0" and wrong == 0 and not failed_verdict and (name != "backend-auto" or "(nccl backend)" in log):
        verdict = "PASS"
    else:
        verdict = "FAIL"
    note = figure(name, log, table)
    if verdict == "FAIL" and rc not in ("0", "skipped"):
        errors = [l for l in log.splitlines() if "error" in l.lower()]
        note = (errors[-1] if errors else f"exit status {rc}" + (" (time limit)" if rc in ("124", "137") else ""))[:160]
    results.append((name, rc, seconds, len(table), wrong, verdict, note))

print("#")
print("# gpu-check summary")
if first_row:
    print(f"# {first_row['library_version']} | device: {first_row['device']} | transport: {first_row['transport']}")
print(f"# {'step':<22} {'result':<6} {'exit':>4} {'time(s)':>8} {'rows':>5} {'#wrong':>6}  measured")
for name, rc, seconds, nrows, wrong, verdict, note in results:
    print(f"  {name:<22} {verdict:<6} {rc:>4} {seconds:>8} {nrows:>5} {wrong:>6}  {note}")
passed = sum(r[5] == "PASS" for r in results)
print(f"# {passed} of {len(results)} steps passed")
sys.exit(0 if all(r[5] != "FAIL" for r in results) else 1)
EOF
