//! How a binary starts: under a launcher that is not its MPI it refuses on every
//! rank before any output file exists, and `--version` names the build and the MPI.

mod common;

use common::{output_within, scratch, text, MPIRUN_BOUND};
use std::process::Command;

const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");

/// The launcher that is not this build's MPI: MPICH's for an Open MPI build,
/// Open MPI's for an MPICH build (scripts/setup.sh installs both), and what it
/// sets that the refusal names.
fn other_launcher() -> (Command, &'static str, &'static str, &'static str) {
    let built = fabricbench::job::provenance::MPI_BUILT;
    if built.starts_with("MPICH") {
        let mut cmd = common::mpirun_command();
        cmd.arg("-np");
        let fix = "cargo build with Open MPI's mpicc";
        (cmd, "Open MPI's mpirun", "(OMPI_COMM_WORLD_SIZE=2)", fix)
    } else {
        let mut cmd = Command::new("mpiexec.mpich");
        cmd.arg("-n");
        let fix = "MPICC=mpicc.mpich cargo build --target-dir target/mpich";
        (cmd, "MPICH's mpiexec (Hydra", "(PMI_SIZE=2)", fix)
    }
}

#[test]
fn another_mpis_launcher_is_refused_on_every_rank_before_any_file() {
    let dir = scratch("launcher-mismatch");
    let csv = dir.join("run.csv");
    let (mut cmd, launcher, size, fix) = other_launcher();
    cmd.args(["2", ALL_REDUCE, "-b", "8", "-e", "8", "--csv"])
        .arg(&csv)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = output_within(cmd, MPIRUN_BOUND);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("error:")).collect();
    assert_eq!(lines.len(), 2, "one line from each rank: {stderr}");
    for line in lines {
        assert!(
            line.contains(launcher)
                && line.contains(size)
                && line.contains(fabricbench::job::provenance::MPI_BUILT)
                && line.contains(fix),
            "{line}"
        );
    }
    assert!(!stdout.contains("#"), "no table: {stdout}");
    assert!(!csv.exists(), "no CSV");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn version_names_the_commit_the_build_date_and_both_mpis() {
    let built = fabricbench::job::provenance::MPI_BUILT;
    let commit = fabricbench::job::provenance::COMMIT;
    // compare starts no MPI (tests/no_mpi.rs), so it names only the one built against.
    let compare = env!("CARGO_BIN_EXE_compare");
    for (binary, running) in [(ALL_REDUCE, "; running "), (compare, "; runs without MPI)")] {
        let out = common::alone(binary, &["--version"]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stderr}");
        assert_eq!(stdout.lines().count(), 1, "{stdout}");
        let line = stdout.trim();
        assert!(
            line.contains(&format!("commit {commit}, built 20")),
            "{line}"
        );
        assert!(
            line.contains(&format!("against {built}{running}")),
            "{line}"
        );
    }
    let out = common::alone(ALL_REDUCE, &["--version"]);
    let line = text(&out).0;
    let running = line.trim().rsplit("running ").next().unwrap();
    assert!(
        running.starts_with("Open MPI v") || running.starts_with("MPICH "),
        "{line}"
    );
}

#[test]
fn the_table_header_names_the_build() {
    let out = common::alone(ALL_REDUCE, &["-b", "8", "-e", "8", "-n", "2", "-w", "1"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let build = stdout
        .lines()
        .find(|l| l.starts_with("# Build: commit "))
        .unwrap_or_else(|| panic!("no build line: {stdout}"));
    assert!(
        build.ends_with(&format!(
            "against {}",
            fabricbench::job::provenance::MPI_BUILT
        )),
        "{build}"
    );
}
