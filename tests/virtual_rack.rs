//! The multi-node path end to end on the virtual rack of scripts/virtual-rack.sh:
//! 4 nodes (network namespaces with their own host names) of this host, mpirun
//! starting real daemons on each through the rack's rsh agent, ranks talking TCP
//! over veths. Faults are real: tc tbf, an MTU, a memlock limit, a variable in a
//! node's environment, a killed rank, a link set down.
//!
//! Needs root, ip and tc (iproute2), and chromium and python3's PIL for the HTML
//! report (scripts/setup.sh installs them). Each test brings the rack up and a
//! guard takes it down when the test ends, passed or failed; a lock file keeps
//! every test (of this and any other run on the host) on a rack of its own.

mod common;

use common::{assert_rows_load, log, python_with, read_rows, scratch, table_rows};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const NODES: [&str; 4] = ["node1", "node2", "node3", "node4"];
const STATE: &str = "/run/fabricbench-rack";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/virtual-rack.sh")
}

fn bin(name: &str) -> String {
    Path::new(env!("CARGO_BIN_EXE_all_reduce_perf"))
        .with_file_name(name)
        .display()
        .to_string()
}

/// The rack, up while this value lives: dropping it (also when an assertion
/// panics) runs `virtual-rack.sh down`, which removes every namespace and file.
struct Rack {
    _lock: File,
}

impl Rack {
    fn up() -> Rack {
        Rack::up_as(&["up", "4"])
    }

    /// `virtual-rack.sh ARGS` (an `up` with its options) under the lock.
    fn up_as(args: &[&str]) -> Rack {
        // SAFETY: geteuid has no preconditions.
        assert!(
            unsafe { libc::geteuid() } == 0,
            "the virtual rack tests need root (network namespaces): run scripts/test.sh as root"
        );
        let lock = File::create("/run/fabricbench-rack.lock").expect("create the rack lock");
        // SAFETY: flock on a file descriptor this function owns.
        assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
        assert!(
            !Path::new(STATE).exists(),
            "a virtual rack is already up ({STATE}): take it down with scripts/virtual-rack.sh down"
        );
        let rack = Rack { _lock: lock };
        let up = rack.sh(args);
        assert!(up.status.success(), "virtual-rack.sh up: {}", log(&up));
        rack
    }

    fn sh(&self, args: &[&str]) -> Output {
        Command::new(script())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/virtual-rack.sh")
    }

    fn fault(&self, args: &[&str]) {
        let mut all = vec!["fault"];
        all.extend(args);
        let out = self.sh(&all);
        assert!(out.status.success(), "fault {args:?}: {}", log(&out));
    }

    fn clear(&self) {
        let out = self.sh(&["clear"]);
        assert!(out.status.success(), "clear: {}", log(&out));
    }

    /// `virtual-rack.sh run -- BIN ARGS`: one rank on each node.
    fn run(&self, binary: &str, args: &[&str]) -> Output {
        self.run_per_node(1, binary, args)
    }

    /// `virtual-rack.sh run -N K -- BIN ARGS`: K ranks on each node.
    fn run_per_node(&self, ranks: usize, binary: &str, args: &[&str]) -> Output {
        let (bin, ranks) = (bin(binary), ranks.to_string());
        let mut all = vec!["run", "-N", ranks.as_str(), "--", bin.as_str()];
        all.extend(args);
        self.sh(&all)
    }
}

impl Drop for Rack {
    fn drop(&mut self) {
        let down = self.sh(&["down"]);
        if !down.status.success() {
            eprintln!("virtual-rack.sh down: {}", log(&down));
        }
    }
}

/// The ranks' host names in the "Using devices" lines, in rank order.
fn rank_hosts(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.starts_with("#  Rank "))
        .filter_map(|l| {
            let after = l.split(" on ").nth(1)?;
            Some(after.split_whitespace().next()?.to_string())
        })
        .collect()
}

#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn every_collective_runs_across_four_nodes_over_tcp() {
    let rack = Rack::up();
    let dir = scratch("rack-collectives");
    for collective in [
        "all_reduce",
        "all_gather",
        "broadcast",
        "reduce",
        "reduce_scatter",
        "alltoall",
        "gather",
        "scatter",
        "sendrecv",
    ] {
        let csv = dir.join(format!("{collective}.csv"));
        let csv_arg = csv.display().to_string();
        let binary = format!("{collective}_perf");
        let out = rack.run(
            &binary,
            &[
                "-b", "8", "-e", "64K", "-f", "8", "-n", "5", "-w", "1", "--csv", &csv_arg,
            ],
        );
        let text = log(&out);
        assert!(out.status.success(), "{binary}: {text}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(rank_hosts(&stdout), NODES, "{binary}: {stdout}");
        assert!(
            stdout.contains(
                "# Transport: mpi/inter-node: Open MPI TCP BTL between nodes (pml ob1; btl "
            ),
            "{binary}: {stdout}"
        );
        let rows = table_rows(&stdout);
        assert_eq!(rows.len(), 5, "{binary}: 8 B to 64 KiB by 8: {stdout}");
        for r in &rows {
            // #wrong of out-of-place and in-place.
            assert_eq!(
                (r[8].as_str(), r[12].as_str()),
                ("0", "0"),
                "{binary}: {r:?}"
            );
        }
        assert_rows_load(&csv, rows.len() * 2);
        for row in read_rows(&csv) {
            assert_eq!(row.nnodes, 4, "{binary}");
            assert_eq!(row.hosts, NODES.join(";"), "{binary}");
            assert_eq!(row.wrong, Some(0), "{binary}");
            assert!(
                row.transport.contains("TCP BTL"),
                "{binary}: {}",
                row.transport
            );
        }
    }
}

/// The nodes an all-pairs run names as suspects.
fn suspects(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("# suspect node "))
        .filter_map(|l| l.split(':').next().map(str::to_string))
        .collect()
}

#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn all_pairs_names_the_slowed_node_and_only_it() {
    let rack = Rack::up();
    // 5 Mbit/s is over 50x below a healthy veth on an idle host, but under load
    // a healthy pair runs at ~0.004 GB/s, under 10x the slowed node's 0.0003-0.0004:
    // at scripts/rack-virtual.toml's 0.1 x median the slowed pairs measured alone
    // lie across the limit (cannot tell, exit 4). 0.3 leaves them 3x below it.
    rack.fault(&["slow", "node3", "5mbit"]);
    let args = [
        "--all-pairs",
        "-b",
        "64K",
        "-e",
        "64K",
        "-n",
        "10",
        "-w",
        "1",
        "--slow-fraction",
        "0.3",
        "--slow-latency",
        "100",
    ];
    for attempt in 1..=3 {
        let out = rack.run("sendrecv_perf", &args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(1), "run {attempt}: {}", log(&out));
        assert_eq!(suspects(&stdout), ["node3"], "run {attempt}: {stdout}");
        assert!(stdout.contains("slow pair node1 <-> node3"), "{stdout}");
    }
    rack.clear();
    let out = rack.run("sendrecv_perf", &args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(suspects(&stdout).is_empty(), "{}", log(&out));
    assert!(stdout.contains("node3"), "{stdout}");
}

#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn doctor_names_each_node_by_its_fault() {
    let rack = Rack::up();
    rack.fault(&["mtu", "node1", "9000"]);
    rack.fault(&["memlock", "node2", "64"]);
    rack.fault(&["env", "node3", "NCCL_DEBUG=INFO"]);
    let dir = scratch("rack-doctor");
    let csv = dir.join("doctor.csv");
    let out = rack.run("doctor", &["--csv", &csv.display().to_string()]);
    let text = log(&out);
    // The MTU is an error: doctor exits 1.
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("doctor: 1 error, 1 warning,")
            && text.contains("on 4 nodes (node1, node2, node3, node4)"),
        "{text}"
    );
    let findings = fabricbench::doctor::output::read_csv(&csv).unwrap();
    let on = |check: &str| -> Vec<(String, String)> {
        findings
            .iter()
            .filter(|f| f.check == check)
            .map(|f| (f.node.clone(), f.seen.clone()))
            .collect()
    };
    assert_eq!(
        on("netdev-mtu"),
        [("node1".to_string(), "MTU 9000".to_string())],
        "{text}"
    );
    let memlock = on("memlock");
    assert_eq!(memlock.len(), 1, "{text}");
    assert_eq!(memlock[0].0, "node2");
    assert!(memlock[0].1.contains("soft 64 KiB"), "{:?}", memlock[0]);
    assert_eq!(
        on("nccl-env"),
        [("node3".to_string(), "NCCL_DEBUG=INFO".to_string())],
        "{text}"
    );
}

#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn doctor_counts_nodes_by_identity_and_names_a_duplicate_host() {
    let rack = Rack::up();
    rack.fault(&["duphost", "node4", "node3"]);
    rack.fault(&["mtu", "node4", "1400"]);
    let dir = scratch("rack-duphost");
    let csv = dir.join("doctor.csv");
    let out = rack.run("doctor", &["--csv", &csv.display().to_string()]);
    let text = log(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("on 4 nodes (node1, node2, node3 (rank 2), node3 (rank 3))"),
        "{text}"
    );
    let findings = fabricbench::doctor::output::read_csv(&csv).unwrap();
    let dup: Vec<_> = findings
        .iter()
        .filter(|f| f.check == "duplicate-host")
        .collect();
    assert_eq!(dup.len(), 1, "{text}");
    assert_eq!(dup[0].node, "node3");
    assert!(
        dup[0].seen.contains("rank 2 from ") && dup[0].seen.contains("rank 3 from "),
        "{:?}",
        dup[0]
    );
    // node4's own fault is its own, not blamed on node3.
    assert!(
        findings
            .iter()
            .any(|f| f.check == "netdev-mtu" && f.node == "node3 (rank 3)" && f.seen == "MTU 1400"),
        "{text}"
    );
    // A collective counts the nodes by identity too: four, one name twice.
    let sweep = dir.join("sweep.csv");
    let out = rack.run(
        "all_reduce_perf",
        &[
            "-b",
            "8",
            "-e",
            "8",
            "-n",
            "2",
            "-T",
            "20",
            "--csv",
            &sweep.display().to_string(),
        ],
    );
    assert!(out.status.success(), "{}", log(&out));
    for row in read_rows(&sweep) {
        assert_eq!(row.nnodes, 4);
        assert_eq!(row.hosts, "node1;node2;node3;node3");
    }
    rack.clear();
    let out = rack.run("doctor", &[]);
    let text = log(&out);
    assert!(
        text.contains("on 4 nodes (node1, node2, node3, node4)")
            && !text.contains("duplicate-host"),
        "{text}"
    );
}

/// The page's text as a reader sees it: chromium's DOM with the tags taken out.
fn page_text(html: &Path) -> String {
    let dom = chromium(&["--dump-dom".into(), format!("file://{}", html.display())]);
    let mut text = String::new();
    let mut in_tag = false;
    for c in String::from_utf8_lossy(&dom.stdout).chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Headless chromium in a network namespace of its own: the page is a local
/// file, and the browser reaches nothing else. Its profile goes under target/.
fn chromium(args: &[String]) -> Output {
    let profile = scratch("rack-chromium-profile");
    let out = Command::new("unshare")
        .args([
            "--net",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .arg("--hide-scrollbars")
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("chromium runs (scripts/setup.sh installs Debian's chromium)");
    assert!(out.status.success(), "chromium {args:?}: {}", log(&out));
    out
}

#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn rack_check_fails_on_the_faults_and_passes_once_cleared() {
    let rack = Rack::up();
    rack.fault(&["slow", "node3", "5mbit"]);
    rack.fault(&["mtu", "node1", "9000"]);
    let dir = scratch("rack-check");
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/rack-virtual.toml");
    let rack_check = |out: &Path| rack_check_on(&rack, &spec, out).0;
    let failing = dir.join("failing");
    let run = rack_check(&failing);
    let text = log(&run);
    assert_eq!(run.status.code(), Some(1), "{text}");
    assert!(
        text.contains("rack_check: node node1: FAIL: doctor netdev-mtu (eth0): MTU 9000"),
        "{text}"
    );
    assert!(
        text.contains("rack_check: node node3: FAIL: pairs all pairs: node3 is the suspect"),
        "{text}"
    );
    for healthy in ["node2", "node4"] {
        assert!(
            text.contains(&format!("rack_check: node {healthy}: PASS")),
            "{text}"
        );
    }
    let summary = std::fs::read_to_string(failing.join("summary.md")).unwrap();
    assert!(summary.contains("**FAIL: "), "{summary}");
    // The bandwidth floor, judged on the interval of three launches: wholly below.
    assert!(
        text.contains("rack_check: all_reduce busbw at 256 KiB (out-of-place): FAIL "),
        "{text}"
    );
    assert!(text.contains(" rounds: wholly below 0.005\n"), "{text}");
    for (node, verdict) in [
        ("node1", "**FAIL**"),
        ("node2", "PASS"),
        ("node3", "**FAIL**"),
        ("node4", "PASS"),
    ] {
        assert!(
            summary.contains(&format!("| {node} | {verdict} |")),
            "{summary}"
        );
    }

    // The HTML report, as a browser draws it.
    let html = failing.join("report.html");
    let shot = dir.join("report.png");
    chromium(&[
        format!("--screenshot={}", shot.display()),
        "--window-size=1200,2600".into(),
        format!("file://{}", html.display()),
    ]);
    let pixels = Command::new(python_with("PIL"))
        .args([
            "-c",
            "import sys; from PIL import Image; im = Image.open(sys.argv[1]).convert('RGB'); \
             px = list(im.getdata()); print(sum(p != (255, 255, 255) for p in px) / len(px), \
             sum(p[0] > 180 and p[1] < 90 for p in px))",
        ])
        .arg(&shot)
        .output()
        .expect("python3 with PIL (scripts/setup.sh installs python3-pil)");
    let counts = String::from_utf8_lossy(&pixels.stdout).into_owned();
    let (inked, red) = counts.trim().split_once(' ').expect("two numbers");
    let (inked, red): (f64, u64) = (inked.parse().unwrap(), red.parse().unwrap());
    assert!(
        inked > 0.05,
        "the screenshot is blank ({inked} of its pixels drawn)"
    );
    assert!(
        red > 1000,
        "no red heatmap cell in the screenshot ({red} red pixels)"
    );
    let text = page_text(&html);
    assert!(text.contains("4 nodes, failing: node1, node3."), "{text}");
    assert!(text.contains("node3 is the suspect"), "{text}");
    assert!(text.contains("suspect node: node3"), "{text}");

    rack.clear();
    let passing = dir.join("passing");
    let run = rack_check(&passing);
    // PASS, directly or after re-measuring an inconclusive check.
    assert_eq!(run.status.code(), Some(0), "{}", log(&run));
    let summary = std::fs::read_to_string(passing.join("summary.md")).unwrap();
    assert!(summary.contains("**PASS: "), "{summary}");
    assert!(
        summary.contains("| all_reduce busbw at 256 KiB (out-of-place) | ")
            && summary.contains(" GB/s, 95% interval "),
        "{summary}"
    );
    for node in NODES {
        assert!(
            summary.contains(&format!("| {node} | PASS | nothing found |")),
            "{summary}"
        );
    }
}

/// Waits, at most 120 s, until `ready` while `child` runs (the job must not end first).
fn wait_running(child: &mut std::process::Child, what: &str, ready: impl Fn() -> bool) {
    let started = Instant::now();
    while !ready() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no {what} after 120 s"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the job ended before the fault"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts a long sweep with -T on every node, waits until it has written
/// `rows` rows, then applies `fault` and waits for the job to end.
fn fault_mid_run(
    rack: &Rack,
    name: &str,
    fault: impl FnOnce(&Rack),
) -> (Output, Duration, PathBuf) {
    let dir = scratch(name);
    let csv = dir.join("rows.csv");
    let stdout_path = dir.join("stdout");
    let mut child = Command::new(script())
        .args(["run", "--", &bin("all_reduce_perf")])
        .args([
            "-b", "8", "-e", "64M", "-f", "2", "-n", "20", "-w", "1", "-T", "10",
        ])
        .arg("--csv")
        .arg(&csv)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_running(&mut child, "rows", || {
        std::fs::read_to_string(&csv).map_or(0, |t| t.lines().count()) >= 9
    });
    fault(rack);
    let faulted = Instant::now();
    let deadline = Duration::from_secs(10 + 15);
    while child.try_wait().unwrap().is_none() {
        if faulted.elapsed() > deadline + Duration::from_secs(30) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = faulted.elapsed();
    let out = child.wait_with_output().unwrap();
    let out = Output {
        stdout: std::fs::read(&stdout_path).unwrap(),
        ..out
    };
    assert!(
        took <= deadline,
        "the job outlived -T 10 by {took:?}: {}",
        log(&out)
    );
    (out, took, csv)
}

/// Every row the table printed is in the CSV.
fn assert_finished_rows_kept(out: &Output, csv: &Path) {
    let printed = table_rows(&String::from_utf8_lossy(&out.stdout)).len();
    assert!(printed >= 4, "{}", log(out));
    assert_rows_load(csv, printed * 2);
}

/// The processes in `node`'s network namespace.
fn node_pids(node: &str) -> Vec<String> {
    let pids = Command::new("ip")
        .args(["netns", "pids", &format!("fbrack-{node}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&pids.stdout)
        .split_whitespace()
        .map(String::from)
        .collect()
}

#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn a_killed_rank_and_a_cut_link_end_the_job_naming_the_node() {
    let rack = Rack::up();
    let (out, took, csv) = fault_mid_run(&rack, "rack-kill", |_| {
        let rank = node_pids("node3")
            .into_iter()
            .find(|p| {
                std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .is_ok_and(|c| c.trim() == "all_reduce_perf")
            })
            .expect("the rank on node3");
        let rank: i32 = rank.parse().unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(rank),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    });
    let text = log(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("on node node3 exited on signal 9"),
        "after {took:?}: {text}"
    );
    assert_finished_rows_kept(&out, &csv);

    let (out, took, csv) = fault_mid_run(&rack, "rack-cut", |rack| rack.fault(&["cut", "node3"]));
    let text = log(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("Remote daemon: ") && text.contains(" on node node3"),
        "after {took:?}: {text}"
    );
    assert_finished_rows_kept(&out, &csv);
}

/// The fault tests' steps: a small sweep and all-pairs, each with a check.
const QUICK_TESTS: &str = r#"
[[test]]
name = "all_reduce"
binary = "all_reduce_perf"
args = ["-b", "16", "-e", "64K", "-f", "8", "-n", "3", "-w", "1"]
[[test]]
name = "pairs"
binary = "sendrecv_perf"
args = ["--all-pairs", "-b", "64K", "-e", "64K", "-n", "5", "-w", "1"]
[[check]]
test = "all_reduce"
metric = "time"
size = "16"
max = 100000
[[check]]
test = "pairs"
metric = "all-pairs"
slow_fraction = 0.1
slow_latency = 1000000
"#;

/// A short spec for the fault tests: doctor and `tests`, each step stopped
/// after `timeout_s`; written into `dir`.
fn quick_spec(dir: &Path, timeout_s: u64, tests: &str) -> PathBuf {
    let spec = dir.join("spec.toml");
    let text = format!(
        r#"name = "virtual rack, a fault"
[launch]
launcher = "mpirun"
nodes = 4
ranks_per_node = 1
hosts = ["node1", "node2", "node3", "node4"]
timeout_s = {timeout_s}
[rounds]
count = 3
max = 3
max_seconds = 0
{tests}"#
    );
    std::fs::write(&spec, text).unwrap();
    spec
}

/// rack_check with `spec` on the rack's head, into `out`: its output and how long it took.
fn rack_check_on(rack: &Rack, spec: &Path, out: &Path) -> (Output, Duration) {
    let argv = [
        "exec".to_string(),
        "--".into(),
        bin("rack_check"),
        "--spec".into(),
        spec.display().to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    let started = Instant::now();
    let run = rack.sh(&argv.iter().map(String::as_str).collect::<Vec<_>>());
    (run, started.elapsed())
}

/// rack_check with `tests` on the rack (steps stopped after `timeout_s`), in
/// `dir`, which must fail (exit 1): what it printed and how long it took.
fn failing_rack_check(rack: &Rack, dir: &Path, timeout_s: u64, tests: &str) -> (String, Duration) {
    let spec = quick_spec(dir, timeout_s, tests);
    let (run, took) = rack_check_on(rack, &spec, &dir.join("report"));
    let text = log(&run);
    assert_eq!(run.status.code(), Some(1), "after {took:?}: {text}");
    eprintln!("{}: rack_check failed in {took:?}", dir.display());
    (text, took)
}

/// The processes of a job still alive (zombies aside: this host's init may not
/// reap what a killed mpirun leaves).
fn job_processes() -> Vec<String> {
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let Some((name, rest)) = stat.split_once(" (").and_then(|(_, r)| r.rsplit_once(") "))
        else {
            continue;
        };
        let ours = ["orted", "all_reduce_perf", "sendrecv_perf", "doctor"].contains(&name);
        // Only the rack's: a process in one of its namespaces or started under it.
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let on_rack = name == "orted"
            || String::from_utf8_lossy(&cmdline).contains(env!("CARGO_MANIFEST_DIR"));
        if ours && on_rack && !rest.starts_with('Z') {
            left.push(format!("{} {name}", entry.file_name().to_string_lossy()));
        }
    }
    left
}

/// No process of the job is left, `within` after it ended (a daemon cut off
/// from mpirun notices by TCP keepalive, in seconds).
fn assert_nothing_left(what: &str, within: Duration) {
    let since = Instant::now();
    let mut left = job_processes();
    while !left.is_empty() && since.elapsed() < within {
        std::thread::sleep(Duration::from_millis(200));
        left = job_processes();
    }
    assert!(
        left.is_empty(),
        "{what}: processes left after {within:?}: {left:?}"
    );
    eprintln!("{what}: nothing left after {:?}", since.elapsed());
}

#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn rack_check_names_a_node_that_is_down_without_waiting_for_it() {
    let rack = Rack::up();
    rack.fault(&["down", "node3"]);
    let dir = scratch("rack-down");
    let (text, took) = failing_rack_check(&rack, &dir, 60, QUICK_TESTS);
    assert!(
        text.contains(
            "rack_check: node node3: FAIL: did not answer the launch: doctor.log: ssh: connect to host node3"
        ),
        "{text}"
    );
    assert!(
        text.contains("rack_check: test pairs: did not start: node3 did not answer"),
        "{text}"
    );
    assert!(!text.contains(": PASS"), "{text}");
    // Each step would have waited timeout_s: none did.
    assert!(took < Duration::from_secs(60), "{took:?}: {text}");
    // The daemon mpirun started on node1 before node3's ssh failed left the
    // launcher's process group (orted --daemonize): it ends itself once it
    // notices mpirun gone, within a second or two (left at 0 s in 2 of 5 runs).
    assert_nothing_left("down", Duration::from_secs(15));
}

#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn rack_check_counts_nodes_by_identity() {
    let rack = Rack::up();
    rack.fault(&["duphost", "node4", "node3"]);
    let dir = scratch("rack-duphost-check");
    let (text, _) = failing_rack_check(&rack, &dir, 30, QUICK_TESTS);
    // Open MPI itself may hang on two daemons of one name: doctor times out,
    // and no node passes; when doctor answers, the duplicate is named.
    for node in ["node3", "node4"] {
        assert!(
            text.contains(&format!("rack_check: node {node}: FAIL: ")),
            "{text}"
        );
    }
    if text.contains("rack_check: doctor: FAIL (exit 1)") {
        assert!(
            text.contains("rack_check: node node4: FAIL: no machine answered as node4, while 2 nodes answer as node3: rank 2 from "),
            "{text}"
        );
        assert!(
            text.contains(
                "rack_check: node node3 (rank 3): FAIL: one of several machines answering as node3"
            ),
            "{text}"
        );
    } else {
        assert!(
            text.contains("rack_check: doctor: FAIL (timed out after 30 s"),
            "{text}"
        );
    }
    assert_nothing_left("duphost", Duration::ZERO);
}

/// A step that outlives timeout_s (all-pairs behind a switch port whose MTU
/// drops the large frames; doctor's launch may hang there too) fails its
/// checks, says it was killed, and leaves no daemon or rank behind; the path
/// probe that follows names node3, whose port it is, and only it: the other
/// nodes, left unchecked by the hang, are INCONCLUSIVE, neither failed nor passed.
#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn a_step_that_times_out_fails_and_is_killed_with_its_daemons() {
    let rack = Rack::up();
    rack.fault(&["switch-mtu", "node3", "1280"]);
    let dir = scratch("rack-timeout");
    let report = dir.join("report");
    let (text, took) = failing_rack_check(&rack, &dir, 15, QUICK_TESTS);
    let killed = "timed out after 15 s (timeout_s) and was killed with its process group";
    assert!(
        text.contains(&format!("rack_check: test pairs: {killed}")),
        "{text}"
    );
    assert!(
        text.contains("rack_check: pairs all pairs: FAIL - ")
            && text.contains("not judged: test pairs did not finish with its results"),
        "{text}"
    );
    assert!(!text.contains("pairs all pairs: PASS"), "{text}");
    assert!(
        text.contains("rack_check: probe: 3 of 6 pairs lost full-size frames; the suspect: node3"),
        "{text}"
    );
    assert!(
        text.contains("rack_check: node node3: FAIL: ")
            && text.contains("test pairs did not finish with its results")
            && text.contains(
                "path probe: full-size frames were lost between node3 and every other node"
            ),
        "{text}"
    );
    for healthy in ["node1", "node2", "node4"] {
        assert!(
            text.lines().any(|l| l
                .starts_with(&format!("rack_check: node {healthy}: INCONCLUSIVE: "))
                && l.ends_with("the path probe lays the hang on node3: this node's paths to the others carried full-size frames")),
            "{text}"
        );
    }
    for file in ["summary.md", "report.html", "checks.json"] {
        let body = std::fs::read_to_string(report.join(file)).unwrap();
        assert!(body.contains(killed), "{file}: {body}");
    }
    // Doctor, three rounds of the sweep, the hung step (15 s and its grace),
    // the probe (a lost pair waits 3 s at most): well within 3 minutes.
    assert!(took < Duration::from_secs(180), "{took:?}: {text}");
    // node3's daemon alone may outlive the job: the launcher's kernel queues
    // the closing FIN behind the launch message node3's port drops, and keeps
    // that orphaned connection alive, answering the daemon's keepalives, until
    // tcp_orphan_retries gives up (80 s here). Every other daemon is gone at once.
    let on_node3 = node_pids("node3");
    let elsewhere: Vec<String> = job_processes()
        .into_iter()
        .filter(|p| !on_node3.iter().any(|n| p.split(' ').next() == Some(n)))
        .collect();
    assert!(elsewhere.is_empty(), "switch-mtu: left: {elsewhere:?}");
    assert_nothing_left("switch-mtu", Duration::from_secs(150));
}

/// A link cut during all-pairs: the job ends within -T and a bound, naming
/// node3, and the CSV keeps every pair measured before the cut, the others
/// empty (not measured); nothing of the job is left running.
#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn a_cut_during_all_pairs_keeps_the_pairs_measured_before_it() {
    let rack = Rack::up();
    let dir = scratch("rack-cut-pairs");
    let csv = dir.join("pairs.csv");
    let stdout_path = dir.join("stdout");
    let stderr_path = dir.join("stderr");
    let mut child = Command::new(script())
        .args(["run", "--", &bin("sendrecv_perf")])
        .args([
            "--all-pairs",
            "-b",
            "256K",
            "-e",
            "256K",
            "-n",
            "200",
            "-w",
            "1",
            "-T",
            "10",
        ])
        .arg("--csv")
        .arg(&csv)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).unwrap())
        .stderr(File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    // The first round's pairs written: cut node3.
    wait_running(&mut child, "pairs", || {
        std::fs::metadata(&csv).is_ok_and(|m| m.len() > 0)
    });
    rack.fault(&["cut", "node3"]);
    let cut = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if cut.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("the job outlived the cut by 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = cut.elapsed();
    let text = format!(
        "{}{}",
        std::fs::read_to_string(&stdout_path).unwrap(),
        std::fs::read_to_string(&stderr_path).unwrap()
    );
    assert!(!status.success(), "{text}");
    assert!(text.contains("node3"), "after {took:?}: {text}");
    let results = fabricbench::allpairs::read_csv(&csv).expect("the pairs before the cut");
    let measured = results.sizes[0].time_us.pairs().len();
    let verdict = results.judge(&fabricbench::allpairs::Thresholds::default());
    assert!(measured >= 2, "{measured} pairs kept: {text}");
    assert!(
        measured + verdict.unmeasured.len() == 6,
        "{measured} measured, {:?} not",
        verdict.unmeasured
    );
    eprintln!(
        "cut: ended {took:?} after the cut, {measured} of 6 pairs kept, exit {:?}",
        status.code()
    );
    assert_nothing_left("cut", Duration::from_secs(60));
}

/// 2% loss on node3 (nftables, both ways), judged by the shipped spec
/// (scripts/rack-virtual.toml): never a PASS, and node3 named. Over TCP the
/// loss hides in retransmits; the spec's retransmits test reads them around
/// each round of all-pairs, so node3's pairs retransmit hundreds and the others
/// a few (a loaded host's noise): its counters check lays the failure on node3.
#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn the_shipped_spec_names_a_lossy_node_by_its_pairs_retransmits() {
    let rack = Rack::up();
    rack.fault(&["loss", "node3", "2"]);
    let dir = scratch("rack-loss");
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/rack-virtual.toml");
    let (run, took) = rack_check_on(&rack, &spec, &dir.join("report"));
    let text = log(&run);
    assert_eq!(run.status.code(), Some(1), "after {took:?}: {text}");
    assert!(
        text.contains("rack_check: retransmits fabric counters retransmits <= ")
            && text.contains(" over every pair's round: FAIL "),
        "{text}"
    );
    let suspect = "is at one end of every pair whose rounds moved retransmits most";
    let named: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("rack_check: node ") && l.contains(suspect))
        .collect();
    assert_eq!(named.len(), 1, "{text}");
    assert!(
        named[0].starts_with("rack_check: node node3: FAIL: "),
        "{text}"
    );
    // Any slow pair has node3 at one end.
    assert!(
        text.lines()
            .filter(|l| l.starts_with("rack_check:     slow pair "))
            .all(|l| l.contains("node3")),
        "{text}"
    );
    eprintln!("loss: rack_check failed in {took:?}");
    assert!(took < Duration::from_secs(300), "{took:?}: {text}");
    assert_nothing_left("loss", Duration::ZERO);
}

/// Whether `node`'s rail `rail` interface reaches `addr` (one ping).
fn reaches(rack: &Rack, node: &str, rail: usize, addr: &str) -> bool {
    let ping = format!("ping -c 1 -W 1 -I eth{rail} {addr}");
    rack.sh(&["agent", node, &ping]).status.success()
}

/// Which (node, rail) of the rack reach the same rail of every other node,
/// by ping from each interface to each other node's address on its rail.
fn rail_reach(rack: &Rack) -> Vec<String> {
    let mut out = Vec::new();
    for (i, node) in NODES.iter().enumerate() {
        for rail in 1..=2 {
            let missed: Vec<String> = (1..=NODES.len())
                .filter(|&j| j != i + 1)
                .filter(|j| !reaches(rack, node, rail, &format!("198.18.{rail}.{j}")))
                .map(|j| format!("node{j}"))
                .collect();
            if !missed.is_empty() {
                out.push(format!("{node} rail {rail} misses {}", missed.join(",")));
            }
        }
    }
    out
}

/// The two-rail rack and its two faults at the network level (what all-pairs
/// --rails is to find; that layer is not built yet): a clean rack's rails
/// each reach across every node, crossed cables cut a node's rails off
/// their own networks, a slow rail carries its tbf on both ends.
#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn two_rails_and_their_faults() {
    let rack = Rack::up_as(&["up", "4", "--rails", "2"]);
    assert_eq!(rail_reach(&rack), Vec::<String>::new(), "a clean rack");
    rack.fault(&["cross-cables", "node2"]);
    assert_eq!(
        rail_reach(&rack),
        [
            "node1 rail 1 misses node2",
            "node1 rail 2 misses node2",
            "node2 rail 1 misses node1,node3,node4",
            "node2 rail 2 misses node1,node3,node4",
            "node3 rail 1 misses node2",
            "node3 rail 2 misses node2",
            "node4 rail 1 misses node2",
            "node4 rail 2 misses node2",
        ]
    );
    let status = String::from_utf8_lossy(&rack.sh(&["status"]).stdout).to_string();
    assert!(
        status.contains("rail 1 eth1 198.18.1.2/24 on bridge rail2"),
        "{status}"
    );
    rack.clear();
    assert_eq!(rail_reach(&rack), Vec::<String>::new(), "cleared");
    rack.fault(&["slow-rail", "node3", "2", "10mbit"]);
    let status = String::from_utf8_lossy(&rack.sh(&["status"]).stdout).to_string();
    assert!(status.contains("slow-rail=2 10mbit"), "{status}");
    let qdisc = rack.sh(&[
        "agent",
        "node3",
        "tc qdisc show dev eth2; tc qdisc show dev eth1",
    ]);
    let qdisc = String::from_utf8_lossy(&qdisc.stdout).to_string();
    assert!(
        qdisc
            .lines()
            .next()
            .is_some_and(|l| l.contains("tbf") && l.contains("10Mbit"))
            && !qdisc.lines().nth(1).is_some_and(|l| l.contains("tbf")),
        "{qdisc}"
    );
    // A rail the rack lacks is refused by name.
    let out = rack.sh(&["fault", "slow-rail", "node3", "3", "10mbit"]);
    assert!(!out.status.success());
    assert!(
        log(&out).contains("give a rail from 1 to 2"),
        "{}",
        log(&out)
    );
}

/// The text of rail `rail`'s block in a `--rails` run's output.
fn rail_block(stdout: &str, rail: usize) -> String {
    let start = format!("# rail {rail} of ");
    stdout
        .split_inclusive('\n')
        .skip_while(|l| !l.starts_with(&start))
        .enumerate()
        .take_while(|(i, l)| *i == 0 || !l.starts_with("# rail "))
        .map(|(_, l)| l)
        .collect()
}

/// The cells of `node`'s row of a matrix CSV's `metric`, as written.
fn matrix_row(csv: &Path, metric: &str, node: &str) -> Vec<String> {
    let text = std::fs::read_to_string(csv).unwrap_or_else(|e| panic!("{}: {e}", csv.display()));
    let row = text
        .lines()
        .find(|l| l.starts_with(&format!("{metric},")) && l.split(',').nth(2) == Some(node))
        .unwrap_or_else(|| panic!("no {metric} row of {node} in {text}"));
    row.split(',').skip(3).map(str::to_string).collect()
}

/// `--rails`: each rail's pairs over TCP on its own netdev, one matrix a rail.
/// A slow rail is named by node on its rail alone; crossed cables are found as
/// a node that reaches no other on either rail; a clean rack has no finding.
#[test]
#[ignore = "needs root (network namespaces): scripts/test.sh runs it as root"]
fn all_pairs_over_rails_names_the_slow_rail_and_the_crossed_cables() {
    let rack = Rack::up_as(&["up", "4", "--rails", "2"]);
    let dir = scratch("rack-rails");
    // 2 Mbit/s: a slowed pair is over 15x below a healthy one even on a loaded host.
    let args = |csv: &str| {
        let csv = dir.join(csv).display().to_string();
        let flags = "--all-pairs --rails eth1,eth2 -b 64K -e 64K -n 10 -w 1 --slow-fraction 0.3 --slow-latency 100";
        let mut all: Vec<String> = flags.split(' ').map(str::to_string).collect();
        all.extend(["--csv".to_string(), csv]);
        all
    };
    let run = |csv: &str| {
        let args = args(csv);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = rack.run_per_node(2, "sendrecv_perf", &args);
        (String::from_utf8_lossy(&out.stdout).into_owned(), out)
    };

    let (stdout, out) = run("clean.csv");
    assert!(
        matches!(out.status.code(), Some(0 | 4)),
        "clean: {}",
        log(&out)
    );
    assert!(
        stdout.contains("# rail 1 of 2: eth1") && stdout.contains("# rail 2 of 2: eth2"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("unreachable:") && suspects(&stdout).is_empty(),
        "{stdout}"
    );
    assert!(dir.join("clean.rail1.csv").exists() && dir.join("clean.rail2.csv").exists());

    // Without --rails, two ranks a node pair node with node: the first rank of each.
    let out = rack.run_per_node(
        2,
        "sendrecv_perf",
        &["--all-pairs", "-b", "64K", "-e", "64K", "-n", "5"],
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        matches!(out.status.code(), Some(0 | 4)),
        "node pairs: {}",
        log(&out)
    );
    assert!(
        text.contains("--all-pairs: 4 nodes (the first rank of each, of 8 ranks; --rank-pairs pairs every rank), 3 rounds"),
        "{text}"
    );
    assert!(text.contains("     node1          -"), "{text}");

    rack.fault(&["slow-rail", "node3", "2", "2mbit"]);
    let (stdout, out) = run("slow.csv");
    assert_eq!(out.status.code(), Some(1), "slow rail: {}", log(&out));
    assert_eq!(suspects(&rail_block(&stdout, 2)), ["node3"], "{stdout}");
    assert!(suspects(&rail_block(&stdout, 1)).is_empty(), "{stdout}");
    assert!(!stdout.contains("unreachable:"), "{stdout}");
    // In the rail's CSV: node3's pairs far below the others'.
    let figure =
        |cells: Vec<String>| -> Vec<f64> { cells.iter().filter_map(|c| c.parse().ok()).collect() };
    let slow = figure(matrix_row(
        &dir.join("slow.rail2.csv"),
        "algbw_gbs",
        "node3",
    ));
    let healthy = figure(matrix_row(
        &dir.join("slow.rail2.csv"),
        "algbw_gbs",
        "node1",
    ));
    assert_eq!(slow.len(), 3, "{slow:?}");
    let fastest_slow = slow.iter().cloned().fold(0.0, f64::max);
    assert!(
        healthy.iter().filter(|&&v| v > 5.0 * fastest_slow).count() == 2,
        "{slow:?} {healthy:?}"
    );

    rack.clear();
    rack.fault(&["cross-cables", "node2"]);
    let (stdout, out) = run("crossed.csv");
    assert_eq!(out.status.code(), Some(1), "crossed cables: {}", log(&out));
    for (rail, netdev, ip) in [(1, "eth1", "198.18.1.2"), (2, "eth2", "198.18.2.2")] {
        let block = rail_block(&stdout, rail);
        let found: Vec<&str> = block
            .lines()
            .filter(|l| l.starts_with("# unreachable:"))
            .collect();
        assert_eq!(found.len(), 1, "{block}");
        assert!(
            found[0].starts_with(&format!(
                "# unreachable: node2's {netdev} ({ip}) reaches none of the other 3 nodes on rail {rail}"
            )),
            "{block}"
        );
        // Its pairs are not measured, not called slow.
        assert!(suspects(&block).is_empty(), "{block}");
        let csv = dir.join(format!("crossed.rail{rail}.csv"));
        assert!(matrix_row(&csv, "algbw_gbs", "node2")
            .iter()
            .all(String::is_empty));
    }

    // rack_check's rails test: one all-pairs check a rail, in its console and HTML report.
    let spec = dir.join("rails.toml");
    std::fs::write(
        &spec,
        r#"name = "virtual rack, rails"
[launch]
launcher = "mpirun"
nodes = 4
ranks_per_node = 2
hosts = ["node1", "node2", "node3", "node4"]
timeout_s = 300
[doctor]
skip = true
[[test]]
name = "pairs"
binary = "sendrecv_perf"
args = ["--all-pairs", "--rails", "eth1,eth2", "-b", "64K", "-e", "64K", "-n", "10", "-w", "1"]
[[check]]
test = "pairs"
metric = "all-pairs"
slow_fraction = 0.3
slow_latency = 100
"#,
    )
    .unwrap();
    let checked = |name: &str| {
        let out = dir.join(name);
        let (run, took) = rack_check_on(&rack, &spec, &out);
        eprintln!("rack_check {name}: {took:?}");
        (
            log(&run),
            run.status.code(),
            page_text(&out.join("report.html")),
        )
    };
    let (text, code, html) = checked("crossed-report");
    assert_eq!(code, Some(1), "{text}");
    let node_line = |node: &str| {
        let start = format!("rack_check: node {node}: ");
        text.lines()
            .find(|l| l.starts_with(&start))
            .unwrap_or_else(|| panic!("no line for {node}: {text}"))
            .to_string()
    };
    for rail in ["rail 1 (eth1)", "rail 2 (eth2)"] {
        let found = format!(
            "pairs all pairs, {rail}: node2 was measured with none of the other 3 nodes, which were measured together: it reaches none of them"
        );
        assert!(
            node_line("node2").starts_with("rack_check: node node2: FAIL: "),
            "{text}"
        );
        assert!(node_line("node2").contains(&found), "{text}");
        assert!(html.contains(&found), "{html}");
    }
    for healthy in ["node1", "node3", "node4"] {
        assert_eq!(
            node_line(healthy),
            format!("rack_check: node {healthy}: PASS"),
            "{text}"
        );
    }
    rack.clear();
    rack.fault(&["slow-rail", "node3", "2", "2mbit"]);
    let (text, code, html) = checked("slow-report");
    assert_eq!(code, Some(1), "{text}");
    let found = "pairs all pairs, rail 2 (eth2): node3 is the suspect";
    assert!(
        text.contains(&format!("rack_check: node node3: FAIL: {found}")),
        "{text}"
    );
    assert!(html.contains(found), "{html}");
    assert!(!text.contains("rail 1 (eth1): node"), "{text}");
    for healthy in ["node1", "node2", "node4"] {
        assert!(
            text.contains(&format!("rack_check: node {healthy}: PASS\n")),
            "{text}"
        );
    }
}
