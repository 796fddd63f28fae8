#!/usr/bin/env python3
"""How what fabricbench holds grows with the job: a benchmark, not a test.

For each rank count (default 4 16 64 128, oversubscribed on this host) and each
mode (a collective sweep with -T, and sendrecv_perf --all-pairs with -T), runs
the job under mpirun with every rank wrapped in /usr/bin/time, and samples
/proc every SAMPLE_S seconds meanwhile. Per job it keeps, for rank 0 and for the
worst non-zero rank:

- peak RSS (MiB) and CPU time (user+system, s) of the process (/usr/bin/time);
- sockets the process holds (most seen at once in /proc/PID/fd): the
  watchdog's connections, plus MPI's own (its TCP connections between nodes
  on the rack); and the watchdog's alone: the same rank's sockets less those
  of the same job run with -T 0 just before (each N is run twice);
- CPU time of the watchdog thread ("fabricbench-wat" in /proc/PID/task).

Then it fits each quantity against N twice, by least squares: a power law
(log y = a + b log N: b is the growth exponent) and a line (y = c + d N), and
extrapolates both to 1,024 and 16,384 ranks. Below y's noise floor a fit is
only as good as its points: the table prints them all.

    scripts/growth-bench.py [--ranks 4,16,64,128] [--modes sweep,allpairs]
                            [--bin-dir target/debug] [--timeout 60] [--out DIR]
                            [--rack NODES]

With --rack NODES the jobs run on the virtual rack's nodes (`virtual-rack.sh up
NODES` first, as root), N/NODES ranks a node: the watchdog's connections cross
the rack's network, and all-pairs pairs the nodes (its default on several nodes).

The host's load average is printed at each job's start and end (128 ranks on
two cores are heavy: compare runs made at similar loads). Exit status 0, or 1
when a job failed (its output is kept in DIR).
"""

import argparse
import csv
import math
import os
import subprocess
import sys
import tempfile
import time

SAMPLE_S = 0.2
WATCHDOG_THREAD = "fabricbench-wat"  # "fabricbench-watchdog", cut to 15 bytes
EXTRAPOLATE = (1024, 16384)
# -T: MPI_Init alone of 128 ranks on two loaded cores passes 20 s (the setup is
# watched by -T too).
TIMEOUT_S = 60

# Small sizes and few iterations: the structures, not the bandwidth, are measured.
MODES = {
    "sweep": ("all_reduce_perf", ["-b", "8", "-e", "1K", "-f", "4", "-n", "3", "-w", "1"]),
    # One size below 64 KiB (bandwidth not judged) and no latency bound that a
    # loaded host could cross: no pair is re-measured alone, only the rounds run.
    "allpairs": (
        "sendrecv_perf",
        ["--all-pairs", "-b", "8", "-e", "8", "-n", "3", "-w", "1", "--slow-latency", "1e6"],
    ),
}


def load():
    return os.getloadavg()[0]


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                    return int(item.split(b"=", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def sockets(pid):
    n = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    n += 1
            except OSError:
                pass
    except OSError:
        pass
    return n


def watchdog_cpu(pid):
    """CPU seconds of the watchdog thread (0 when it has none)."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != WATCHDOG_THREAD:
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def processes(program):
    comm = program[:15]
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == comm:
                    yield int(pid)
        except OSError:
            pass


def run_job(bin_dir, mode, n, timeout_s, out_dir, rack=None):
    """One job: its per-rank figures and wall time, or None when it failed.
    rack: (virtual-rack.sh, its node count), to run there instead of here."""
    program, args = MODES[mode]
    job_dir = os.path.join(out_dir, f"{mode}-np{n}-T{timeout_s}")
    os.makedirs(job_dir, exist_ok=True)
    wrap = 'exec /usr/bin/time -f "%M %U %S" -o "$D/time.$OMPI_COMM_WORLD_RANK" "$@"'
    launch = ["mpirun", "-np", str(n)]
    if rack:
        launch = [rack[0], "run", "-N", str(n // rack[1]), "--"]
    cmd = [
        *launch, "-x", f"D={job_dir}", "-x", "OMPI_MCA_mpi_yield_when_idle=1",
        "sh", "-c", wrap, "sh", os.path.join(bin_dir, program),
        *args, "-T", str(timeout_s), "--csv", os.path.join(job_dir, "out.csv"),
    ]
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1")
    before = load()
    start = time.monotonic()
    with open(os.path.join(job_dir, "log"), "wb") as log:
        job = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=job_dir)
        seen = {}  # pid -> rank
        socks = {}  # rank -> most sockets seen
        wd = {}  # rank -> watchdog thread CPU, last seen
        while job.poll() is None:
            for pid in processes(program):
                if pid not in seen:
                    seen[pid] = rank_of(pid)
                rank = seen[pid]
                if rank is None:
                    continue
                socks[rank] = max(socks.get(rank, 0), sockets(pid))
                wd[rank] = max(wd.get(rank, 0.0), watchdog_cpu(pid))
            time.sleep(SAMPLE_S)
    wall = time.monotonic() - start
    after = load()
    if job.returncode != 0:
        print(f"# {mode} np={n}: mpirun exited {job.returncode}; see {job_dir}/log", flush=True)
        return None
    ranks = {}
    for r in range(n):
        with open(os.path.join(job_dir, f"time.{r}")) as f:
            rss_kib, user, system = f.read().split()[-3:]
        ranks[r] = {
            "rss_mib": int(rss_kib) / 1024,
            "cpu_s": float(user) + float(system),
            "sockets": socks.get(r, 0),
            "watchdog_cpu_s": wd.get(r, 0.0),
        }
    return {"ranks": ranks, "wall_s": wall, "load": (before, after)}


QUANTITIES = ["rss_mib", "cpu_s", "sockets", "watchdog_cpu_s"]


def summary(job, base):
    """rank 0's figures and the worst other rank's; with `base` (the same job
    at -T 0), the sockets the watchdog adds to each."""
    ranks = job["ranks"]
    row = {f"rank0_{q}": ranks[0][q] for q in QUANTITIES}
    for q in QUANTITIES:
        row[f"other_{q}"] = max(ranks[r][q] for r in ranks if r != 0)
    if base:
        added = {r: ranks[r]["sockets"] - base["ranks"].get(r, {"sockets": 0})["sockets"] for r in ranks}
        row["rank0_watchdog_sockets"] = added[0]
        row["other_watchdog_sockets"] = max(added[r] for r in ranks if r != 0)
    row["wall_s"] = job["wall_s"]
    return row


def least_squares(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - slope * mx, slope


def fits(ns, ys):
    """(exponent b, power-law extrapolations, slope d, intercept c, line extrapolations)."""
    c, d = least_squares(ns, ys)
    line = [c + d * x for x in EXTRAPOLATE]
    if all(y > 0 for y in ys):
        a, b = least_squares([math.log(x) for x in ns], [math.log(y) for y in ys])
        power = [math.exp(a) * x**b for x in EXTRAPOLATE]
    else:
        b, power = float("nan"), [float("nan")] * len(EXTRAPOLATE)
    return b, power, d, c, line


def fmt(v):
    if math.isnan(v):
        return "-"
    return f"{v:.3g}" if abs(v) < 1e5 else f"{v:.3e}"


def report(mode, rows, timeout_s):
    ns = sorted(rows)
    print(f"\n## {mode}: {MODES[mode][0]} {' '.join(MODES[mode][1])} -T {timeout_s}")
    print("# N      load(start,end)  wall_s  " + "  ".join(f"{k:>18}" for k in rows[ns[0]] if k != "wall_s" and not k.startswith("_")))
    for n in ns:
        r = rows[n]
        vals = "  ".join(f"{fmt(v):>18}" for k, v in r.items() if k != "wall_s" and not k.startswith("_"))
        print(f"{n:<6} {r['_load'][0]:5.1f},{r['_load'][1]:5.1f}  {r['wall_s']:7.1f}  {vals}")
    print("# *_watchdog_sockets: the sockets less those of the same rank in the same job at -T 0")
    if len(ns) < 2:
        return
    print(f"# fits over N = {','.join(map(str, ns))}: power law y = a N^b, line y = c + d N")
    print(f"# {'quantity':<22} {'b':>6} {'@1024':>10} {'@16384':>10}   {'d (per rank)':>12} {'c':>9} {'@1024':>10} {'@16384':>10}")
    for key in rows[ns[0]]:
        if key.startswith("_"):
            continue
        b, power, d, c, line = fits(ns, [rows[n][key] for n in ns])
        print(f"  {key:<22} {fmt(b):>6} {fmt(power[0]):>10} {fmt(power[1]):>10}   "
              f"{fmt(d):>12} {fmt(c):>9} {fmt(line[0]):>10} {fmt(line[1]):>10}")


def usage(message):
    """Bad input: one line and exit status 2, as argparse's own."""
    print(message, file=sys.stderr)
    sys.exit(2)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--ranks", default="4,16,64,128")
    p.add_argument("--modes", default="sweep,allpairs")
    p.add_argument("--bin-dir", default=os.path.join(root, "target", "debug"))
    p.add_argument("--timeout", type=int, default=TIMEOUT_S, help="-T for every job (0 is the baseline's)")
    p.add_argument("--out", default=None, help="folder for each job's log, CSV and timings")
    p.add_argument("--rack", type=int, default=None, metavar="NODES",
                   help="run on the virtual rack's NODES nodes (up already), N/NODES ranks each")
    a = p.parse_args()
    try:
        ns = [int(x) for x in a.ranks.split(",")]
        if min(ns) < 2:
            raise ValueError
    except ValueError:
        usage(f"growth-bench.py: --ranks takes rank counts of 2 or more, comma-separated (got '{a.ranks}'); e.g. --ranks 4,16,64")
    rack = None
    if a.rack is not None:
        if a.rack < 2 or any(n % a.rack for n in ns):
            usage(f"growth-bench.py: --rack {a.rack}: give 2 nodes or more, and --ranks that are multiples of it (got '{a.ranks}')")
        rack = (os.path.join(root, "scripts", "virtual-rack.sh"), a.rack)
    modes = a.modes.split(",")
    for m in modes:
        if m not in MODES:
            usage(f"growth-bench.py: --modes takes {','.join(MODES)} (got '{m}')")
        if not os.access(os.path.join(a.bin_dir, MODES[m][0]), os.X_OK):
            usage(f"growth-bench.py: {a.bin_dir}/{MODES[m][0]} is missing: cargo build --bin {MODES[m][0]} (or --bin-dir)")
    out = a.out or tempfile.mkdtemp(prefix="growth-bench.")
    os.makedirs(out, exist_ok=True)
    where = f"the virtual rack's {a.rack} nodes" if rack else "this host"
    print(f"# growth-bench: {os.uname().nodename}, {os.cpu_count()} cores, on {where}, binaries {a.bin_dir}, jobs kept in {out}")
    failed = False
    with open(os.path.join(out, "growth.csv"), "w", newline="") as f:
        table = csv.writer(f)
        table.writerow(["mode", "ranks", "rank", *QUANTITIES, "sockets_at_T0"])
        for m in modes:
            rows = {}
            for n in ns:
                base = run_job(a.bin_dir, m, n, 0, out, rack)
                job = run_job(a.bin_dir, m, n, a.timeout, out, rack)
                if job is None or base is None:
                    failed = True
                    continue
                for r, fig in sorted(job["ranks"].items()):
                    base_sockets = base["ranks"].get(r, {"sockets": ""})["sockets"]
                    table.writerow([m, n, r, *(fig[q] for q in QUANTITIES), base_sockets])
                rows[n] = summary(job, base)
                rows[n]["_load"] = job["load"]
                print(f"# {m} np={n}: {job['wall_s']:.1f} s, load {job['load'][0]:.1f} -> {job['load'][1]:.1f}", flush=True)
            if rows:
                report(m, rows, a.timeout)
    print(f"\n# every rank's figures: {out}/growth.csv")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
