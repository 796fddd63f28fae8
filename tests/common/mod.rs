//! Helpers for the integration tests: launch our binaries under mpirun, scratch
//! folders, fixtures.
#![allow(dead_code)] // each test file uses a different part of this module

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

/// Runs `binary args` on `np` ranks of this host under mpirun (root and
/// oversubscription allowed, as in CI).
pub fn mpirun(np: usize, binary: &str, args: &[&str]) -> Output {
    mpirun_env(np, binary, args, &[])
}

pub fn mpirun_env(np: usize, binary: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = mpirun_command();
    for (k, v) in env {
        // mpirun forwards to the ranks only the variables named with -x.
        cmd.args(["-x", k]).env(k, v);
    }
    cmd.args(["-np", &np.to_string(), binary]).args(args);
    output_within(cmd, MPIRUN_BOUND)
}

/// The longest a test's mpirun may take, on a loaded machine: past it the job is
/// a hang, killed and failed, never left to stall the whole test run.
pub const MPIRUN_BOUND: Duration = Duration::from_secs(600);

/// An mpirun command line to add to (for MPMD jobs: `-np 1 A : -np 1 B`),
/// root and oversubscription allowed, as in CI.
pub fn mpirun_command() -> Command {
    keep_mpi_session_folder();
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    cmd
}

/// Open MPI 4 keeps a user's job folders in one folder, `ompi.HOST.UID` in its
/// temporary folder, made by a launch and removed, when empty, as a job ends: a
/// launch starting while another job's end removes it fails (`mkdir ... File
/// exists`; 2 of 45 triples of launches at once, as a user with no job running).
/// A folder of ours in it keeps it there, so tests launching at once never race.
pub fn keep_mpi_session_folder() {
    static KEPT: Once = Once::new();
    KEPT.call_once(|| {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        let base = std::env::var_os("OMPI_MCA_orte_tmpdir_base")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = host.trim();
        // Open MPI names the folder by the short host name unless it is an address.
        let short = match host.parse::<std::net::IpAddr>() {
            Ok(_) => host,
            Err(_) => host.split('.').next().unwrap_or(host),
        };
        let uid = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
        let keep = base.join(format!("ompi.{short}.{uid}/fabricbench-tests"));
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(keep);
    });
}

/// Runs one of our binaries outside mpirun (as a singleton, root allowed).
pub fn alone(binary: &str, args: &[&str]) -> Output {
    keep_mpi_session_folder();
    Command::new(binary)
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("the binary runs")
}

/// Runs `cmd` to its end within `limit`: a hang fails the test, never stalls it.
/// Its output goes to files (a pipe nobody reads could fill and stall it) and
/// is read back at the end; past the limit its whole process group (mpirun and
/// its ranks) is killed.
pub fn output_within(mut cmd: Command, limit: Duration) -> Output {
    let dir = scratch("output-within");
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .expect("the command starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            // SAFETY: kill(2) on the process group this test made; no memory is touched.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!(
                "still running after {limit:?} (a hang): {cmd:?}\n{}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: std::fs::read(&out).unwrap(),
        stderr: std::fs::read(&err).unwrap(),
    }
}

/// stdout then stderr, for messages and searches.
pub fn log(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    format!("{stdout}\n{stderr}")
}

pub fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The data lines of an nccl-tests table, split into columns.
pub fn table_rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// A fresh directory under target/ for one test's files, unique to this call
/// (tests running at once may ask for the same name).
pub fn scratch(name: &str) -> PathBuf {
    keep_mpi_session_folder();
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, Ordering::Relaxed);
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn read_rows(path: &Path) -> Vec<fabricbench::report::Row> {
    fabricbench::report::csv::read_rows(path).unwrap_or_else(|e| panic!("{e:#}"))
}

/// A file or folder under tests/fixtures.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// The first python3 that can import `module`, as scripts/test.sh looks for one
/// (a pyenv shim on PATH may lack Debian's python3-pandas and python3-pil).
pub fn python_with(module: &str) -> &'static str {
    ["python3", "/usr/bin/python3"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .args(["-c", &format!("import {module}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .unwrap_or_else(|| panic!("no python3 with {module}: run scripts/setup.sh"))
}

/// The number of data rows `pd.read_csv(path)` loads, as a user's notebook would
/// load the file (python3 with pandas: scripts/setup.sh installs it); panics with
/// pandas' own error when the file does not load.
pub fn pandas_rows(path: &Path) -> usize {
    let python = python_with("pandas");
    let out = Command::new(python)
        .args([
            "-c",
            "import sys, pandas as pd; print(len(pd.read_csv(sys.argv[1])))",
        ])
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "pandas cannot load {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Every finished row of `path` is there for pandas, compare and plot alike.
pub fn assert_rows_load(path: &Path, expected: usize) {
    assert_eq!(
        pandas_rows(path),
        expected,
        "rows pandas loads from {}",
        path.display()
    );
    assert_eq!(
        read_rows(path).len(),
        expected,
        "rows fabricbench reads from {}",
        path.display()
    );
}

/// `stderr` without what mpirun itself printed when it crashed: Open MPI 4.1.4's
/// mpirun has died of SIGSEGV in `PMIx_server_finalize`, after a rank's error
/// exit, under load (a CI rehearsal). Its lines carry its "[host:PID]" prefix
/// and its signal report names `mpirun(+...)`; a rank's own crash names the
/// rank's binary and stays.
pub fn without_launcher_crash(stderr: &str) -> String {
    let prefix = |line: &str| line.split_once("] ").map(|(p, _)| format!("{p}] "));
    let launcher: Vec<String> = stderr
        .lines()
        .filter(|l| l.contains(" mpirun(+"))
        .filter_map(prefix)
        .collect();
    if !launcher.is_empty() {
        eprintln!("note: mpirun itself crashed ({launcher:?}): Open MPI's, not the rank's; its lines left out");
    }
    stderr
        .lines()
        .filter(|l| !launcher.iter().any(|p| l.starts_with(p.as_str())))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Asserts that a run exited `code` with one error line (printed once, no panic,
/// allocation failure or signal dump) that contains `expected`; returns the line.
pub fn one_error(out: &Output, code: i32, expected: &str) -> String {
    let stderr = without_launcher_crash(&text(out).1);
    for crash in [
        "panicked",
        "memory allocation",
        "stack backtrace",
        "Signal:",
    ] {
        assert!(!stderr.contains(crash), "{crash}: {stderr}");
    }
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error:")).collect();
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert_eq!(errors.len(), 1, "one line, printed once: {stderr}");
    assert!(
        errors[0].contains(expected),
        "{:?} lacks {expected:?}",
        errors[0]
    );
    errors[0].to_string()
}

/// A row of an all_reduce sweep on 8 ranks of 2 nodes, against ib-ndr, for the
/// tests that judge rows (compare, rack_check's checks).
pub fn sweep_row(placement: &str, size: u64, busbw: f64, p99: f64) -> fabricbench::report::Row {
    fabricbench::report::Row {
        schema_version: fabricbench::report::SCHEMA_VERSION,
        run_id: "r".into(),
        collective: "all_reduce".into(),
        datatype: "float".into(),
        redop: "sum".into(),
        root: -1,
        placement: placement.into(),
        size_bytes: size,
        nranks: 8,
        nnodes: 2,
        iters: 20,
        backend: "mpi".into(),
        busbw_gbs: busbw,
        p50_us: p99 / 2.0,
        p99_us: p99,
        p999_us: p99 * 1.1,
        min_us: p99 / 3.0,
        max_us: p99 * 1.2,
        limit_name: Some("ib-ndr".into()),
        limit_gbs: Some(50.0),
        pct_of_limit: Some(busbw / 50.0 * 100.0),
        ..fabricbench::report::Row::default()
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A tmpfs mounted for one test (root only: such tests are #[ignore]d with
/// the reason), unmounted when dropped.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(name: &str, options: &str) -> Tmpfs {
        assert!(
            is_root(),
            "mounting a tmpfs needs root: run scripts/test.sh as root"
        );
        let dir = scratch(name);
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(&dir)
            .status()
            .expect("run mount");
        assert!(status.success(), "mount -t tmpfs -o {options}: {status}");
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

// The test tiers (scripts/test.sh). Tests under `mod no_gpu` and `mod no_rdma`
// check what a host without a CUDA driver or an RDMA device does: on a host
// that has one they fail, saying so, and scripts/test.sh leaves them out there
// (`--skip no_gpu::`, `--skip no_rdma::`). Tests that need root are #[ignore]d with
// the reason; scripts/test.sh runs them as root (`--include-ignored`).

/// Fails a `no_gpu` test on a host with a CUDA driver: it could check nothing.
pub fn require_no_gpu() {
    assert!(
        fabricbench::gpu::driver().is_err(),
        "this test checks a host without a CUDA driver, and this one has one: \
         scripts/test.sh leaves the no_gpu tier out here (--skip no_gpu::)"
    );
}

/// Fails a `no_rdma` test on a host with an RDMA device: it could check nothing.
pub fn require_no_rdma() {
    let has = std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some());
    assert!(
        !has,
        "this test checks a host without an RDMA device, and this one has one \
         (/sys/class/infiniband): scripts/test.sh leaves the no_rdma tier out here (--skip no_rdma::)"
    );
}
