//! False verdicts, misleading charts and unclear messages of issue #10, on the
//! binaries: rack_check refuses thresholds that pass everything and fails a
//! value that is no number; compare fails NaN rows and wrong data whatever the
//! threshold; doctor reports what it cannot read and checks its outputs first;
//! limit detection skips only the link it cannot read; plot and compare --plot
//! leave out rows no axis can hold, label every axis, always draw the limit and
//! say in words when a picture cannot be written.

mod common;

use common::{fixture, log, mpirun, scratch, text};
use fabricbench::report::Row;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const RACK_CHECK: &str = env!("CARGO_BIN_EXE_rack_check");
const COMPARE: &str = env!("CARGO_BIN_EXE_compare");
const DOCTOR: &str = env!("CARGO_BIN_EXE_doctor");
const PLOT: &str = env!("CARGO_BIN_EXE_plot");
const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");
const SENDRECV: &str = env!("CARGO_BIN_EXE_sendrecv_perf");

use common::alone as run;

/// Runs `binary args`, killed after `limit`: a spin is a failure, not a hung test.
fn run_within(binary: &str, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(binary)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            panic!("{binary} {args:?} still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Asserts that `text` holds `want`, showing both when it does not.
fn has(text: &str, want: impl AsRef<str>) {
    let want = want.as_ref();
    assert!(text.contains(want), "{want}\nis not in:\n{text}");
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A row of an all_reduce sweep on 2 ranks, against ib-ndr.
fn row(placement: &str, size: u64, busbw: f64, p99: f64) -> Row {
    Row {
        nranks: 2,
        nnodes: 1,
        hosts: "a".into(),
        time_us: p99 / 2.0,
        wrong: Some(0),
        ..common::sweep_row(placement, size, busbw, p99)
    }
}

/// 8 B .. 512 KiB, both placements, busbw up to about 5 GB/s (a tenth of ib-ndr).
fn sweep() -> Vec<Row> {
    let mut rows = Vec::new();
    for i in 0..9u32 {
        for placement in ["out-of-place", "in-place"] {
            rows.push(row(
                placement,
                8 << (2 * i),
                0.02 * 2f64.powi(i as i32),
                90.0 + i as f64,
            ));
        }
    }
    rows
}

fn write(path: &Path, rows: &[Row]) {
    let mut w = csv::Writer::from_path(path).unwrap();
    for r in rows {
        w.serialize(r).unwrap();
    }
    w.flush().unwrap();
}

fn one_line_error(out: &Output, program: &str) -> String {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("{program}: error: ")),
        "{stderr}"
    );
    stderr.trim().to_string()
}

const SPEC: &str = r#"name = "verdicts"
[launch]
nodes = 1
ranks_per_node = 1
timeout_s = 120
[doctor]
skip = true
[[test]]
name = "ar"
binary = "all_reduce_perf"
args = ["-b", "8", "-e", "1K"]
[[check]]
test = "ar"
metric = "busbw"
size = "1K"
min = 1
"#;

#[test]
fn rack_specs_that_would_pass_anything_are_refused() {
    let dir = scratch("verdict-spec");
    let spec = dir.join("spec.toml");
    for (edit, want) in [
        (
            "min = nan",
            "[[check]] 1 (ar busbw): min NaN: a threshold is a number of GB/s above 0",
        ),
        (
            "min = -1",
            "[[check]] 1 (ar busbw): min -1: a threshold is a number",
        ),
        (
            "min = \"85% of ib-ndr x 0\"",
            "min '85% of ib-ndr x 0': x N counts links",
        ),
        (
            "min = \"150% of ib-ndr\"",
            "min '150% of ib-ndr': give a percentage above 0 and at most 100%",
        ),
        (
            "min = 40\nmax = 30",
            "min 40 GB/s is above max 30 GB/s: no value can pass",
        ),
    ] {
        std::fs::write(&spec, SPEC.replace("min = 1\n", &format!("{edit}\n"))).unwrap();
        let out = run(
            RACK_CHECK,
            &["--spec", path(&spec), "--out", path(&dir.join("r"))],
        );
        let e = one_line_error(&out, "rack_check");
        has(&e, want);
        assert!(!dir.join("r").exists());
    }
    std::fs::write(&spec, SPEC.replace("timeout_s = 120", "timeout_s = 0")).unwrap();
    let out = run(
        RACK_CHECK,
        &["--spec", path(&spec), "--out", path(&dir.join("r"))],
    );
    let e = one_line_error(&out, "rack_check");
    assert!(e.ends_with("line 5: timeout_s = 0: give the whole seconds each step may run, from 1 to 604800 (e.g. 3600)"), "{e}");
}

/// A benchmark that wrote NaN (or inf) busbw: no threshold passes it.
#[test]
fn rack_check_fails_a_value_that_is_no_number() {
    let dir = scratch("verdict-nan-row");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for bad in [f64::NAN, f64::INFINITY] {
        let template = dir.join("rows.csv");
        write(&template, &[row("out-of-place", 1024, bad, 5.0)]);
        // Stands in for all_reduce_perf: writes the rows to its --csv.
        let fake = bin.join("all_reduce_perf");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\nwhile [ \"$1\" != --csv ]; do shift; done\ncp {} \"$2\"\n",
                template.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let spec = dir.join("spec.toml");
        std::fs::write(&spec, SPEC).unwrap();
        let report = dir.join(format!("report-{bad}"));
        let out = run(
            RACK_CHECK,
            &[
                "--spec",
                path(&spec),
                "--out",
                path(&report),
                "--bin-dir",
                path(&bin),
            ],
        );
        assert_eq!(out.status.code(), Some(1), "{}", log(&out));
        let stdout = text(&out).0;
        // Every round is a figure; a round that is no number fails the check.
        has(
            &stdout,
            "rack_check: ar busbw at 1 KiB (out-of-place): FAIL - (threshold >= 1 GB/s)",
        );
        has(
            &stdout,
            format!("rack_check:     round 1: busbw is {bad} in 1 of 1 rows: not a measurement"),
        );
        has(&stdout, "rack_check: FAIL: 1 of 4 steps and checks failed");
    }
}

/// A figure that is NaN or inf is not measured: never REGRESSED, never ok; a row
/// with no figure judged makes no verdict (exit 4). Wrong data fails whatever
/// the threshold.
#[test]
fn compare_judges_no_number_as_not_judged_and_fails_wrong_data() {
    let dir = scratch("verdict-compare");
    let base = dir.join("base.csv");
    write(&base, &sweep());
    let mut nan = sweep();
    nan[4].busbw_gbs = f64::NAN;
    nan[4].p99_us = f64::NAN;
    nan[6].busbw_gbs = f64::INFINITY;
    let nan_path = dir.join("nan.csv");
    write(&nan_path, &nan);
    let mut wrong = sweep();
    wrong[10].wrong = Some(7);
    let wrong_path = dir.join("wrong.csv");
    write(&wrong_path, &wrong);

    for (files, flags, code, flagged, summary) in [
        (
            [&base, &nan_path],
            &["--threshold", "5"][..],
            4,
            vec![
                "not judged: busbw NaN in candidate; p99 not measured in candidate",
                "ok on p99; not judged: busbw inf in candidate",
            ],
            "# 18 matched rows; 0 regressed beyond busbw -5% or p99 +5%; not judged: busbw NaN \
             in candidate (1 row), busbw inf in candidate (1 row), p99 not measured in candidate \
             (1 row); 1 row judged on no figure: no verdict",
        ),
        (
            [&nan_path, &base],
            &[][..],
            0,
            vec![],
            "# 18 matched rows; no --threshold given: nothing judged",
        ),
        (
            [&base, &wrong_path],
            &["--threshold", "50"][..],
            1,
            vec!["REGRESSED (wrong data: 7 elements)"],
            "# 18 matched rows; 0 regressed beyond busbw -50% or p99 +50%; 1 failed whatever the \
             threshold (wrong data)",
        ),
        (
            [&base, &wrong_path],
            &[][..],
            1,
            vec!["REGRESSED (wrong data: 7 elements)"],
            "# 18 matched rows; no --threshold given: deltas not judged; 1 failed whatever the \
             threshold (wrong data)",
        ),
    ] {
        let out = Command::new(COMPARE)
            .args(files)
            .args(flags)
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(code), "{flags:?}: {stdout}{stderr}");
        let verdicts: Vec<&str> = stdout
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                ["REGRESSED", "ok on", "not judged: busbw"]
                    .iter()
                    .find_map(|v| l.find(v).map(|at| &l[at..]))
            })
            .collect();
        assert_eq!(verdicts, flagged, "{stdout}");
        assert_eq!(stdout.lines().last().unwrap(), summary, "{stdout}");
    }
    // The same runs without the bad rows pass.
    let out = Command::new(COMPARE)
        .args([&base, &base])
        .arg("--threshold=5")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", log(&out));
    for csv in [&base, &nan_path, &wrong_path] {
        common::assert_rows_load(csv, 18);
    }
}

/// A copy of the fixture tree `name` in `dir` (links kept), to edit.
fn copy_tree(name: &str, dir: &Path) -> PathBuf {
    let root = dir.join(name.replace('/', "-"));
    let copied = Command::new("cp")
        .arg("-a")
        .arg(fixture(name))
        .arg(&root)
        .status()
        .unwrap();
    assert!(copied.success());
    root
}

#[test]
fn doctor_reports_what_it_cannot_read() {
    let dir = scratch("verdict-doctor");
    let root = copy_tree("doctor/healthy", &dir);
    let rate = root.join("sys/class/infiniband/mlx5_0/ports/1/rate");
    std::fs::write(&rate, "fast (4X NDR)\n").unwrap();
    let out = run(DOCTOR, &["--sysfs-root", path(&root)]);
    let stdout = text(&out).0;
    assert_eq!(out.status.code(), Some(1), "{}", log(&out));
    let finding = stdout
        .lines()
        .find(|l| l.starts_with("error") && l.contains("unreadable"))
        .unwrap_or_else(|| panic!("{stdout}"));
    has(
        finding,
        format!("could not read {}: 'fast (4X NDR)'", rate.display()),
    );
    has(
        &stdout,
        "    fix: doctor cannot judge this port's speed: read it by hand (ibstat DEV",
    );
    has(&stdout, "doctor: 1 error, 0 warnings");

    // A GPU link the kernel cannot tell the speed of is unread, not "not trained".
    let root = copy_tree("doctor/pcie-downgrade", &dir);
    let speed = root.join("sys/bus/pci/devices/0000:18:00.0/current_link_speed");
    std::fs::write(&speed, "Unknown\n").unwrap();
    let out = run(DOCTOR, &["--sysfs-root", path(&root)]);
    let stdout = text(&out).0;
    has(
        &stdout,
        format!("could not read {}: 'Unknown'", speed.display()),
    );
    assert!(!stdout.contains("not trained"), "{stdout}");
}

#[test]
fn doctor_checks_its_outputs_before_it_runs() {
    let dir = scratch("verdict-doctor-out");
    let root = fixture("doctor/healthy");
    let existing = dir.join("old.csv");
    std::fs::write(&existing, "kept\n").unwrap();
    let folder = dir.join("folder");
    std::fs::create_dir_all(&folder).unwrap();
    let inside_file = existing.join("x.csv");
    let same = dir.join("same");
    for (flags, want) in [
        (
            vec!["--csv", path(&folder)],
            format!("--csv {}: is a directory", folder.display()),
        ),
        (
            vec!["--json", path(&existing)],
            format!(
                "--json {}: the file exists and findings are never overwritten",
                existing.display()
            ),
        ),
        (
            vec!["--csv", path(&inside_file)],
            format!(
                "--csv {}: {} is not a directory; give a path in a folder",
                inside_file.display(),
                existing.display()
            ),
        ),
        (
            vec!["--csv", path(&same), "--json", path(&same)],
            format!("--csv and --json both name {}", same.display()),
        ),
        (
            vec!["--port-rate", "inf"],
            "--port-rate: 'inf' is not a number; give the expected rate in Gb/s, from 1 to 10000, e.g. 400".to_string(),
        ),
    ] {
        let mut args = vec!["--sysfs-root", path(&root)];
        args.extend(flags);
        let out = run(DOCTOR, &args);
        let e = one_line_error(&out, "doctor");
        has(&e, &want);
        // Refused before anything ran: no table, and nothing written or lost.
        assert_eq!(text(&out).0, "", "{}", log(&out));
    }
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "kept\n");
    assert!(!same.exists());
    // Where no file can be created (root included): said before the run.
    if std::fs::File::create("/sys/fabricbench-probe").is_err() {
        let out = run(
            DOCTOR,
            &["--sysfs-root", path(&root), "--json", "/sys/doctor.json"],
        );
        let e = one_line_error(&out, "doctor");
        has(&e, "--json /sys/doctor.json: cannot create files in /sys (");
    }
}

#[test]
fn limit_detection_skips_only_the_link_it_cannot_read() {
    let dir = scratch("verdict-limits");
    let root = copy_tree("sysfs-ndr", &dir);
    let speed = root.join("sys/devices/pci0000:16/0000:17:00.0/current_link_speed");
    std::fs::write(&speed, "inf GT/s PCIe\n").unwrap();
    let rate = root.join("sys/class/infiniband/mlx5_0/ports/1/rate");
    std::fs::write(&rate, "8000000000000000000 Gb/sec (4X NDR)\n").unwrap();
    let out = mpirun(
        1,
        ALL_REDUCE,
        &[
            "-b",
            "8",
            "-e",
            "8",
            "-n",
            "2",
            "-w",
            "1",
            "--sysfs-root",
            path(&root),
        ],
    );
    let stdout = text(&out).0;
    assert!(out.status.success(), "{}", log(&out));
    let limits = stdout
        .lines()
        .find(|l| l.starts_with("# Limits: "))
        .unwrap();
    assert_eq!(
        limits,
        "# Limits: nic-pcie gen5 x16 63.02 GB/s, gpu-pcie gen5 x16 63.02 GB/s (detected); \
         pct_of_limit against nic-pcie gen5 x16 63.02 GB/s"
    );
    let link = root.join("sys/class/infiniband/mlx5_0/device/current_link_speed");
    for line in [
        format!(
            "#   detected: mlx5_0 port 1: could not read {}: '8000000000000000000 Gb/sec (4X NDR)'; no limit from this port",
            rate.display()
        ),
        format!(
            "#   detected: mlx5_0 (0000:17:00.0): could not read {}: 'inf GT/s PCIe'; no PCIe limit from this link",
            link.display()
        ),
    ] {
        assert!(stdout.lines().any(|l| l.starts_with(&line)), "{line}\n{stdout}");
    }
}

#[test]
fn charts_leave_out_what_no_axis_can_hold() {
    let dir = scratch("verdict-plot-inf");
    let csv = dir.join("inf.csv");
    let mut rows = sweep();
    rows[3].busbw_gbs = f64::INFINITY;
    rows[6].p99_us = f64::NAN;
    write(&csv, &rows);
    let plots = dir.join("plots");
    let out = run_within(
        PLOT,
        &[path(&csv), "-o", path(&plots)],
        Duration::from_secs(120),
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        stderr.trim(),
        "plot: warning: left out 2 rows no chart can draw (a value that is NaN, inf or negative, \
         or a size of 0): inf all_reduce in-place 32 B (busbw_gbs inf); inf all_reduce out-of-place 512 B (p99_us NaN)"
    );
    assert_eq!(stdout.lines().count(), 6, "{stdout}");
    // compare --plot draws the same runs, and says the same.
    let base = dir.join("base.csv");
    write(&base, &sweep());
    let out = run_within(
        COMPARE,
        &[path(&base), path(&csv), "--plot", path(&dir.join("cmp"))],
        Duration::from_secs(120),
    );
    let (stdout, stderr) = text(&out);
    assert!(
        stderr.starts_with("compare: warning: --plot: left out 2 rows"),
        "{stderr}"
    );
    has(&stdout, "# 6 plots in");
}

/// Tick labels of an SVG's text that are plain numbers (the value axes').
fn numeric_labels(svg: &str) -> Vec<f64> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            t.split_once('>')
                .and_then(|(_, rest)| rest.split_once("</text>"))
        })
        .filter_map(|(content, _)| content.trim().parse().ok())
        .collect()
}

#[test]
fn charts_label_their_axes_and_always_draw_the_limit() {
    let dir = scratch("verdict-plot-axes");
    let csv = dir.join("run.csv");
    // One placement; at 512 KiB the iteration times span a factor of 4, within
    // which a log axis labelled at its decades alone has one label.
    let rows: Vec<Row> = sweep()
        .into_iter()
        .filter(|r| r.placement == "out-of-place")
        .collect();
    write(&csv, &rows);
    let plots = dir.join("plots");
    let out = run_within(
        PLOT,
        &[path(&csv), "-o", path(&plots)],
        Duration::from_secs(120),
    );
    assert_eq!(out.status.code(), Some(0), "{}", log(&out));
    let dist = std::fs::read_to_string(plots.join("all_reduce_latency_dist_524288B.svg")).unwrap();
    let ticks = numeric_labels(&dist);
    assert!(
        ticks.len() >= 3,
        "the distribution's y axis has values: {ticks:?}"
    );
    // busbw tops out at 5 GB/s, a tenth of ib-ndr: the limit is drawn on a log axis.
    let busbw = std::fs::read_to_string(plots.join("all_reduce_busbw.svg")).unwrap();
    for want in [
        "limit: ib-ndr 50 GB/s",
        "busbw (GB/s, 1 GB/s = 1e9 B/s, log scale)",
        "log y axis: the highest limit is 10x the best busbw",
    ] {
        has(&busbw, want);
    }
    assert!(
        numeric_labels(&busbw).contains(&10.0),
        "{:?}",
        numeric_labels(&busbw)
    );
}

#[test]
fn a_picture_that_cannot_be_written_is_said_in_words() {
    let dir = scratch("verdict-plot-write");
    let csv = dir.join("run.csv");
    write(&csv, &sweep());
    let plots = dir.join("plots");
    std::fs::create_dir_all(plots.join("all_reduce_busbw.png")).unwrap();
    let out = run(PLOT, &[path(&csv), "-o", path(&plots)]);
    let e = one_line_error(&out, "plot");
    assert_eq!(
        e,
        format!(
            "plot: error: -o {0}: cannot write {0}/all_reduce_busbw.png: Is a directory (os error 21)",
            plots.display()
        )
    );
    let out = run(PLOT, &[path(&csv), "-o", path(&csv)]);
    let e = one_line_error(&out, "plot");
    assert_eq!(
        e,
        format!(
            "plot: error: -o {}: is a file, not a folder; give a folder for the pictures",
            csv.display()
        )
    );
    let out = run(COMPARE, &[path(&csv), path(&csv), "--plot", path(&csv)]);
    let e = one_line_error(&out, "compare");
    assert!(
        e.ends_with("is a file, not a folder; give a folder for the pictures"),
        "{e}"
    );
}

/// All-pairs judges bandwidth at 64 KiB and more, latency at 64 KiB and less:
/// a run with only small (or only large) sizes says which criterion it did not
/// judge, instead of "median algbw NaN" or "lowest median time inf us" as if judged.
#[test]
fn all_pairs_says_what_it_did_not_judge() {
    let dir = scratch("verdict-pairs");
    for (sizes, flags, said, judged) in [
        (
            ["8", "8"],
            ["--slow-latency", "1000"],
            "# bandwidth not judged (no size of 64 KiB or more); lowest median time ",
            ": pairs above 1000 x lowest are slow",
        ),
        (
            ["1M", "1M"],
            ["--slow-fraction", "0.001"],
            "# median algbw ",
            "; latency not judged (no size of 64 KiB or less)",
        ),
    ] {
        let csv = dir.join(format!("pairs-{}.csv", sizes[0]));
        let out = mpirun(
            3,
            SENDRECV,
            &[
                "--all-pairs",
                "-b",
                sizes[0],
                "-e",
                sizes[1],
                "-n",
                "3",
                "-w",
                "1",
                flags[0],
                flags[1],
                "--csv",
                path(&csv),
            ],
        );
        let stdout = text(&out).0;
        assert_eq!(out.status.code(), Some(0), "{}", log(&out));
        let criteria = stdout
            .lines()
            .find(|l| l.starts_with(said))
            .unwrap_or_else(|| panic!("{said}\n{stdout}"));
        assert!(criteria.ends_with(judged), "{criteria}");
        assert!(
            !criteria.contains("NaN") && !criteria.contains(" inf "),
            "{criteria}"
        );
        has(&stdout, "# all-pairs: no slow pair");
        // The matrices load in pandas: 3 nodes x 3 or 4 metrics at one size.
        assert!(common::pandas_rows(&csv) >= 9);
    }
}

/// `-m` calls per timed iteration are `-m` calls to the watchdog: a healthy
/// iteration that outlasts `-T` (each call far within it) finishes, exit 0. The
/// watchdog once counted one call per iteration and ended such a run with exit 3,
/// "the library itself is stuck".
#[test]
fn a_long_aggregated_iteration_is_not_called_stuck() {
    let dir = scratch("verdict-agg");
    let time_per_call = |m: &str, timeout: &str, csv: &Path| {
        let out = mpirun(
            2,
            ALL_REDUCE,
            &[
                "-b",
                "8",
                "-e",
                "8",
                "-n",
                "1",
                "-w",
                "0",
                "-m",
                m,
                "-T",
                timeout,
                "--csv",
                path(csv),
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "-m {m} -T {timeout}: {}",
            log(&out)
        );
        common::assert_rows_load(csv, 2);
        let rows = common::read_rows(csv);
        rows.iter().map(|r| r.time_us).fold(0.0, f64::max)
    };
    // This machine's time per call, then enough calls for an iteration of about
    // 3 s. A short call warms up (a long run's calls are faster than the
    // calibration's), so a run that fell short is retried at its own rate.
    let mut us = time_per_call("2000", "60", &dir.join("calibrate.csv"));
    for attempt in 0..4 {
        let m = ((3e6 / us) as u64).clamp(1000, 200_000_000);
        let csv = dir.join(format!("long-{attempt}.csv"));
        us = time_per_call(&m.to_string(), "1", &csv);
        if us * m as f64 > 1.5e6 {
            return;
        }
    }
    panic!("no -m gave an iteration longer than -T 1 (last: {us} us per call): the test proves nothing");
}

/// cpu_us is nccl-tests' -C figure, the CPU time to issue one call, on every
/// backend the collectives run on: on the mpi backend a call returns when it has
/// completed, so it is the call's time (time_us, to the clocks' difference).
#[test]
fn cpu_us_on_the_mpi_backend_is_the_time_to_issue_a_blocking_call() {
    let dir = scratch("verdict-cpu-us");
    let csv = dir.join("run.csv");
    let out = mpirun(
        2,
        ALL_REDUCE,
        &[
            "-b",
            "8",
            "-e",
            "64K",
            "-f",
            "32",
            "-n",
            "5",
            "-w",
            "1",
            "--csv",
            path(&csv),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", log(&out));
    common::assert_rows_load(&csv, 6);
    for r in common::read_rows(&csv) {
        let cpu = r.cpu_us.unwrap_or_else(|| panic!("no cpu_us: {r:?}"));
        assert!(
            (cpu - r.time_us).abs() <= 0.05 * r.time_us + 1.0,
            "{} B {}: cpu_us {cpu} against time_us {}",
            r.size_bytes,
            r.placement,
            r.time_us
        );
    }
}

/// A directory doctor lists that is there but cannot be listed (doctor run as a
/// user who may not read it) is an error naming it, never the "no GPU" note an
/// empty bus gives, and never exit 0: nothing in it was checked.
#[test]
fn doctor_fails_what_it_could_not_list() {
    let dir = scratch("verdict-doctor-unlisted");
    let root = copy_tree("doctor/healthy", &dir);
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    // Readable (and the output folder writable) by the user doctor runs as.
    for (p, mode) in [(&dir, "755"), (&out_dir, "777")] {
        let done = Command::new("chmod").args(["-R", mode]).arg(p).status();
        assert!(done.unwrap().success());
    }
    let bus = root.join("sys/bus/pci/devices");
    std::fs::set_permissions(&bus, std::fs::Permissions::from_mode(0o000)).unwrap();
    let csv = out_dir.join("findings.csv");
    let args = ["--sysfs-root", path(&root), "--csv", path(&csv)];
    // Root reads every directory: run as nobody where this test runs as root.
    let euid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
    let out = if euid == 0 {
        Command::new("setpriv")
            .args([
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                DOCTOR,
            ])
            .args(args)
            .output()
            .expect("setpriv (util-linux) runs")
    } else {
        run(DOCTOR, &args)
    };
    let stdout = text(&out).0;
    assert_eq!(out.status.code(), Some(1), "{}", log(&out));
    has(
        &stdout,
        format!(
            "could not list {}: Permission denied (os error 13)",
            bus.display()
        ),
    );
    has(
        &stdout,
        "doctor: 1 error, 0 warnings, 0 notes on 1 node (gpu-a)",
    );
    assert!(!stdout.contains("no-gpu"), "{stdout}");
    assert_eq!(common::pandas_rows(&csv), 1);
}
