//! plot, compare, fabricbench-stats and doctor (on one node) start on a host without any MPI
//! library: they never start MPI (doctor hands a launched run to doctor-mpi), so their binaries
//! do not name libmpi, and with every libmpi on this host hidden (an empty file mounted over
//! each, in a private mount namespace) they still run, where a collective binary cannot start.

mod common;

use std::process::Command;

const TOOLS: [&str; 4] = [
    env!("CARGO_BIN_EXE_compare"),
    env!("CARGO_BIN_EXE_plot"),
    env!("CARGO_BIN_EXE_fabricbench-stats"),
    DOCTOR,
];
const DOCTOR: &str = env!("CARGO_BIN_EXE_doctor");
const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");

/// The libraries `ldd` resolves for `binary`, one "name => path" line each.
fn ldd(binary: &str) -> String {
    let out = Command::new("ldd").arg(binary).output().expect("ldd runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_tools_and_one_node_doctor_do_not_link_mpi() {
    assert!(ldd(ALL_REDUCE).contains("libmpi"), "the control links MPI");
    let twin = ldd(env!("CARGO_BIN_EXE_doctor-mpi"));
    assert!(
        twin.contains("libmpi"),
        "doctor's MPI twin links MPI: {twin}"
    );
    for tool in TOOLS {
        let libs = ldd(tool);
        assert!(!libs.contains("libmpi"), "{tool}: {libs}");
    }
}

/// Every libmpi file the loader could find here (ldconfig's cache, resolved).
fn mpi_libraries() -> Vec<String> {
    let out = Command::new("ldconfig")
        .arg("-p")
        .output()
        .expect("ldconfig -p runs");
    let mut files: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("libmpi"))
        .filter_map(|l| l.rsplit("=> ").next())
        .filter_map(|p| std::fs::canonicalize(p.trim()).ok())
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    files.dedup();
    files
}

#[test]
#[ignore = "needs root (a mount namespace hides the MPI libraries): scripts/test.sh runs it as root"]
fn the_tools_and_one_node_doctor_run_with_every_mpi_library_hidden() {
    assert!(
        common::is_root(),
        "hiding the MPI libraries needs a mount namespace: run scripts/test.sh as root"
    );
    let libs = mpi_libraries();
    assert!(!libs.is_empty(), "no libmpi on this host to hide");
    let dir = common::scratch("no-mpi");
    let empty = dir.join("empty");
    std::fs::write(&empty, b"").unwrap();
    // $1: the empty file; $2: the command; then the libraries to hide.
    let script = r#"e=$1; cmd=$2; shift 2
        for lib; do mount --bind "$e" "$lib" || exit 90; done
        eval "$cmd""#;
    let run = |cmd: String| {
        Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
                "sh",
            ])
            .arg(&empty)
            .arg(cmd)
            .args(&libs)
            .output()
            .expect("unshare runs")
    };
    let control = run(format!("{ALL_REDUCE} --version"));
    let (_, stderr) = common::text(&control);
    assert!(
        !control.status.success() && stderr.contains("libmpi"),
        "the control starts with MPI hidden: {stderr}"
    );
    for tool in TOOLS {
        for args in ["--help", "--version"] {
            let out = run(format!("{tool} {args}"));
            let (stdout, stderr) = common::text(&out);
            assert!(out.status.success(), "{tool} {args}: {stderr}");
            assert!(!stdout.is_empty(), "{tool} {args}");
        }
    }
    let version = run(format!("{} --version", TOOLS[0]));
    let line = String::from_utf8_lossy(&version.stdout).into_owned();
    assert!(line.contains("runs without MPI"), "{line}");
    // doctor on one node reads it and prints its findings, here of a healthy fixture node.
    let root = common::fixture("doctor/healthy");
    let out = run(format!("{DOCTOR} --sysfs-root {}", root.display()));
    let (stdout, stderr) = common::text(&out);
    assert!(out.status.success(), "doctor: {stderr}");
    assert!(
        stdout.contains("doctor: 0 errors, 0 warnings, 0 notes on 1 node (gpu-a)"),
        "{stdout}"
    );
}
