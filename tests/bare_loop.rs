//! scripts/compare-osu.sh's pieces that run without OSU: the bare loop builds with
//! mpicc and times every call it knows both ways, the script refuses to start
//! without OSU, or with a binding or PERCENTILES it does not know, in one line; and
//! our side of its PERCENTILES=0, a loop timed whole (`--percentiles 0`).

mod common;

use common::{assert_rows_load, mpirun, read_rows, scratch, text};
use std::process::Command;

#[test]
fn the_bare_loop_times_every_call_both_ways() {
    let dir = scratch("bare_loop");
    let exe = dir.join("bare-loop");
    let built = Command::new("mpicc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg("scripts/bare-loop.c")
        .output()
        .expect("mpicc runs (install libopenmpi-dev)");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let exe = exe.to_str().unwrap();
    for (call, dtype) in [
        ("allreduce", "float"),
        ("bcast", "char"),
        ("reduce", "float"),
        ("reduce_scatter", "float"),
        ("allgather", "char"),
        ("alltoall", "char"),
        ("gather", "char"),
        ("scatter", "char"),
    ] {
        for mode in ["b2b", "barrier"] {
            let out = mpirun(3, exe, &[call, dtype, "48,3072", "20", "2", mode]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{call} {mode}: {stdout}");
            let lines: Vec<Vec<&str>> = stdout.lines().map(|l| l.split(' ').collect()).collect();
            assert_eq!(lines.len(), 2, "{call} {mode}: one line per size: {stdout}");
            for (line, size) in lines.iter().zip(["48", "3072"]) {
                assert_eq!(line[0], size, "{call} {mode}: {stdout}");
                let us: f64 = line[1].parse().unwrap();
                assert!(us.is_finite() && us > 0.0, "{call} {mode}: {stdout}");
            }
        }
    }
    let bad = mpirun(2, exe, &["allreduce", "double", "8", "10", "1", "b2b"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("usage: bare-loop"));
}

#[test]
fn compare_osu_without_osu_is_one_line_and_exit_2() {
    let out = Command::new("bash")
        .arg("scripts/compare-osu.sh")
        .env_remove("OSU_COLLECTIVE_DIR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("set OSU_COLLECTIVE_DIR"), "{stderr}");
}

#[test]
fn compare_osu_refuses_an_unknown_setting_in_one_line() {
    // A folder that passes the OSU check; the binding is refused before anything runs.
    let dir = scratch("compare_osu_bind");
    let fake = dir.join("osu_allreduce");
    std::fs::write(&fake, "#!/bin/sh\nexit 1\n").unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    for (name, value, expected) in [
        ("BIND", "socket", "BIND=socket: use core"),
        ("PERCENTILES", "2", "PERCENTILES=2: use 1"),
    ] {
        let out = Command::new("bash")
            .arg("scripts/compare-osu.sh")
            .env("OSU_COLLECTIVE_DIR", &dir)
            .env(name, value)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
}

/// --percentiles 0 on 2 ranks: every size timed (the loop whole), rows that load, and
/// no percentile made up: NaN in the CSV, N/A in the table.
#[test]
fn a_loop_timed_whole_reports_its_time_and_no_percentiles() {
    let dir = scratch("timed_whole");
    let csv = dir.join("whole.csv");
    let out = mpirun(
        2,
        env!("CARGO_BIN_EXE_all_reduce_perf"),
        &[
            "-b",
            "8",
            "-e",
            "512",
            "-f",
            "4",
            "-n",
            "200",
            "--percentiles",
            "0",
            "--csv",
            csv.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_rows_load(&csv, 8);
    for row in read_rows(&csv) {
        assert!(row.time_us > 0.0 && row.busbw_gbs > 0.0, "{row:?}");
        assert!(
            [row.min_us, row.p50_us, row.p99_us, row.p999_us, row.max_us]
                .iter()
                .all(|v| v.is_nan())
        );
    }
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("512 "))
        .expect("the 512 B line");
    assert_eq!(line.matches("N/A").count(), 8, "{line}");
    assert!(
        stdout.contains("# Per-iteration columns: N/A: --percentiles 0 timed each loop whole"),
        "{stdout}"
    );
}
