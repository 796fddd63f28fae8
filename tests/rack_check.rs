//! rack_check end to end on this host's MPI backend: the local spec passes, the
//! failing spec fails for each of its reasons, a hung test is stopped, and spec
//! mistakes are one-line usage errors.

mod common;

use common::{fixture, log, scratch};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const RACK_CHECK: &str = env!("CARGO_BIN_EXE_rack_check");

fn rack_check(spec: &Path, out: &Path) -> Output {
    Command::new(RACK_CHECK)
        .arg("--spec")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("run rack_check")
}

#[test]
fn local_spec_passes() {
    let out = scratch("rack-local").join("report");
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/rack-local.toml");
    let run = rack_check(&spec, &out);
    assert_eq!(run.status.code(), Some(0), "{}", log(&run));
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    // doctor, three rounds of all_reduce (more if a check was re-measured),
    // pairs once, three checks.
    let headline = summary.lines().find(|l| l.starts_with("**")).unwrap();
    let total: usize = headline
        .strip_prefix("**PASS: ")
        .and_then(|h| h.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(
        total >= 8 && headline.ends_with(&format!(" of {total} steps and checks passed**")),
        "{summary}"
    );
    assert!(
        summary.contains("| test all_reduce (round 3) ran |"),
        "{summary}"
    );
    assert!(
        summary.contains(" 95% interval ") && summary.contains(" rounds"),
        "{summary}"
    );
    let json = std::fs::read_to_string(out.join("checks.json")).unwrap();
    assert!(
        json.contains("\"verdict\": \"PASS\"") && json.contains("\"interval_lo\": "),
        "{json}"
    );
    assert!(
        summary.contains("| all_reduce busbw at 1 MiB (out-of-place) |"),
        "{summary}"
    );
    assert!(!summary.contains("FAIL"), "{summary}");
    for f in [
        "spec.toml",
        "doctor.csv",
        "doctor.json",
        "doctor.log",
        "all_reduce.csv",
        "all_reduce.log",
        "pairs.csv",
        "pairs.png",
    ] {
        assert!(out.join(f).is_file(), "{f} missing from the report");
    }
    assert!(summary.contains("![pairs](pairs.png)"));
    // The report is never overwritten.
    let again = rack_check(&spec, &out);
    assert_eq!(again.status.code(), Some(2));
    assert!(log(&again).contains("exists, and reports are never overwritten"));
}

#[test]
fn failing_spec_fails_for_each_reason() {
    let out = scratch("rack-fail").join("report");
    let run = rack_check(&fixture("rack/fail.toml"), &out);
    assert_eq!(run.status.code(), Some(1), "{}", log(&run));
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    // doctor and two checks; the third passes, directly or after re-measuring.
    assert!(summary.contains("**FAIL: 3 of "), "{summary}");
    // doctor read the port-down fixture: the node and port are named.
    assert!(
        summary
            .contains("- doctor: gpu-a mlx5_1:1: state DOWN, physical state Polling (port-state)"),
        "{summary}"
    );
    // A threshold no host reaches: the measured value and the limit are shown.
    let busbw = summary
        .lines()
        .find(|l| l.contains(" | all_reduce busbw at 32 KiB (out-of-place) |"))
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(
        busbw.contains(" GB/s, 95% interval ")
            && busbw.contains(" | >= 58320.000 GB/s (90% of nvlink5 x 72")
            && busbw.ends_with("**FAIL** |"),
        "{busbw}"
    );
    assert!(
        summary
            .contains("no out-of-place row at 1 GiB (measured: 8 B, 64 B, 512 B, 4 KiB, 32 KiB)"),
        "{summary}"
    );
    // The check that can pass does.
    assert!(
        summary
            .lines()
            .any(|l| l.contains(" | all_reduce time at 8 B") && l.ends_with("| PASS |")),
        "{summary}"
    );
}

#[test]
fn a_hung_test_is_stopped_and_fails() {
    let dir = scratch("rack-hang");
    let spec = dir.join("hang.toml");
    // Rank 1 never reaches the timed loop, and -T 0 turns the benchmark's own
    // watchdog off: only rack_check's timeout can end it.
    std::fs::write(
        &spec,
        r#"
name = "hang"
[launch]
ranks_per_node = 2
args = ["--oversubscribe", "--allow-run-as-root", "-x", "FABRICBENCH_FAULT_STALL_RANK=1"]
timeout_s = 5
[doctor]
skip = true
[[test]]
name = "stuck"
binary = "sendrecv_perf"
args = ["-b", "8", "-e", "8", "-T", "0"]
"#,
    )
    .unwrap();
    let started = Instant::now();
    let run = rack_check(&spec, &dir.join("report"));
    assert_eq!(run.status.code(), Some(1), "{}", log(&run));
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    let summary = std::fs::read_to_string(dir.join("report/summary.md")).unwrap();
    assert!(
        summary.contains(
            "- test stuck: timed out after 5 s (timeout_s) and was killed with its process group (SIG"
        ),
        "{summary}"
    );
}

#[test]
fn spec_mistakes_are_usage_errors() {
    let dir = scratch("rack-usage");
    let spec = dir.join("bad.toml");
    std::fs::write(
        &spec,
        "name = \"x\"\n[launch]\nnodes = 1\n[[test]]\nname = \"t\"\nbinary = \"all_reduce_perf\"\n\
         [[check]]\ntest = \"ar\"\nmetric = \"busbw\"\n",
    )
    .unwrap();
    let run = rack_check(&spec, &dir.join("report"));
    assert_eq!(run.status.code(), Some(2));
    let text = log(&run);
    assert!(
        text.trim().lines().count() == 1
            && text.contains("[[check]] 1 (ar busbw): test 'ar' is not a [[test]] name"),
        "{text}"
    );
    assert!(
        !dir.join("report").exists(),
        "nothing is written for a bad spec"
    );
    std::fs::write(
        &spec,
        "name = \"x\"\n[launch]\n[[test]]\nname = \"t\"\nbinary = \"ib_nothing\"\n",
    )
    .unwrap();
    let run = rack_check(&spec, &dir.join("report"));
    assert_eq!(run.status.code(), Some(2));
    assert!(log(&run).contains("ib_nothing is not in"), "{}", log(&run));
}

#[test]
fn example_specs_parse() {
    for name in [
        "scripts/rack-8x400g.toml",
        "scripts/rack-local.toml",
        "tests/fixtures/rack/fail.toml",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
        if let Err(e) = fabricbench::rack::spec::Spec::load(&path) {
            panic!("{name}: {e}");
        }
    }
}

/// rack_check with `--bin-dir bin`, where the test must find its own fakes.
fn rack_check_with(spec: &Path, out: &Path, bin: &Path) -> Output {
    Command::new(RACK_CHECK)
        .arg("--spec")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .arg("--bin-dir")
        .arg(bin)
        .output()
        .expect("run rack_check")
}

/// An executable shell script `bin/name`.
fn script(bin: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = bin.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A CSV of two all_reduce rows at 8 B that pass `time <= 50000`, hosts "vm".
fn passing_rows(path: &Path) {
    let mut w = csv::Writer::from_path(path).unwrap();
    for placement in ["out-of-place", "in-place"] {
        let row = fabricbench::report::Row {
            time_us: 5.0,
            hosts: "vm".into(),
            wrong: Some(0),
            nranks: 1,
            ..common::sweep_row(placement, 8, 0.001, 10.0)
        };
        w.serialize(row).unwrap();
    }
    w.flush().unwrap();
}

/// The lines of a summary.md table whose first cell is `first`.
fn table_row<'a>(summary: &'a str, first: &str) -> &'a str {
    summary
        .lines()
        .find(|l| l.starts_with(&format!("| {first} |")))
        .unwrap_or_else(|| panic!("no row {first} in:\n{summary}"))
}

/// A node that never answered (mpirun cannot start anything on an unknown
/// host: exit 255) fails in the terminal, summary.md and report.html, named,
/// and so does the node beside it that nothing checked; rack_check exits 1.
#[test]
fn a_node_that_never_answered_is_never_a_pass() {
    let dir = scratch("rack-unknown-host");
    let spec = dir.join("unknown.toml");
    std::fs::write(
        &spec,
        r#"name = "unknown host"
[launch]
nodes = 2
ranks_per_node = 1
hosts = ["localhost", "no-such-host.invalid"]
args = ["--oversubscribe", "--allow-run-as-root"]
timeout_s = 120
[[test]]
name = "ar"
binary = "all_reduce_perf"
args = ["-b", "8", "-e", "64", "-n", "2"]
[[check]]
test = "ar"
metric = "time"
size = "8"
max = 50000
"#,
    )
    .unwrap();
    let out = dir.join("report");
    let run = rack_check(&spec, &out);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{}", log(&run));
    // The node ssh could not reach is named from doctor's log; the other was not
    // checked for it, and the test launched on both was not started.
    for line in [
        "rack_check: node localhost: FAIL: doctor did not check this node (exit 255; see \
         doctor.log); the launch stopped at no-such-host.invalid, which did not answer",
        "rack_check: node no-such-host.invalid: FAIL: did not answer the launch: doctor.log: \
         ssh: Could not resolve hostname no-such-host",
        "rack_check: test ar: did not start: no-such-host.invalid did not answer when doctor \
         was launched (doctor.log)",
    ] {
        assert!(stdout.contains(line), "{line}\n{stdout}");
    }
    assert!(
        stdout.contains(
            "rack_check: ar time at 8 B (out-of-place): FAIL - (threshold <= 50000 us)\n\
             rack_check:     not judged: test ar did not finish with its results (did not start: "
        ),
        "{stdout}"
    );
    assert!(!stdout.contains(": PASS"), "{stdout}");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for (node, first) in [
        ("localhost", "doctor did not check this node"),
        ("no-such-host.invalid", "did not answer the launch"),
    ] {
        let row = table_row(&summary, node);
        assert!(
            row.starts_with(&format!("| {node} | **FAIL** | {first}")),
            "{row}"
        );
        assert!(
            row.contains("test ar did not finish with its results"),
            "{row}"
        );
    }
    assert!(!summary.contains("nothing found"), "{summary}");
    assert!(
        table_row(&summary, "1").starts_with("| 1 | doctor (exit ")
            && table_row(&summary, "1").ends_with("| no findings read | no error | **FAIL** |"),
        "{summary}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains(
            "<tr><td rowspan=\"2\">no-such-host.invalid</td><td rowspan=\"2\" class=\"fail\">FAIL</td>"
        ),
        "{html}"
    );
    assert!(
        html.contains("2 nodes, failing: localhost, no-such-host.invalid."),
        "{html}"
    );
    assert!(!html.contains("class=\"pass\""), "{html}");
}

/// A step that ended badly, or well without its results, passes nothing: a test
/// killed after writing rows that would pass (its check is not judged), a test
/// that exits 0 with a CSV of no rows, and a doctor that exits 0 and writes nothing.
#[test]
fn a_step_without_its_results_fails_its_checks() {
    let dir = scratch("rack-no-results");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let rows = dir.join("rows.csv");
    passing_rows(&rows);
    let csv_arg = "while [ \"$1\" != --csv ]; do shift; done";
    script(&bin, "doctor", "exit 0");
    script(
        &bin,
        "all_reduce_perf",
        &format!("{csv_arg}\ncp {} \"$2\"\nkill -9 $$", rows.display()),
    );
    script(
        &bin,
        "sendrecv_perf",
        &format!("{csv_arg}\nhead -n 1 {} > \"$2\"\nexit 0", rows.display()),
    );
    let spec = dir.join("spec.toml");
    std::fs::write(
        &spec,
        r#"name = "no results"
[launch]
timeout_s = 60
[[test]]
name = "killed"
binary = "all_reduce_perf"
[[test]]
name = "empty"
binary = "sendrecv_perf"
[[check]]
test = "killed"
metric = "time"
size = "8"
max = 50000
[[check]]
test = "empty"
metric = "time"
size = "8"
max = 50000
"#,
    )
    .unwrap();
    let out = dir.join("report");
    let run = rack_check_with(&spec, &out, &bin);
    assert_eq!(run.status.code(), Some(1), "{}", log(&run));
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains("**FAIL: 5 of 5 steps and checks failed**"),
        "{summary}"
    );
    for (first, want) in [
        (
            "1",
            "| 1 | doctor (exit 0, but cannot read doctor.csv: no such file) | no findings read | no error |",
        ),
        ("2", "| 2 | test killed ran | killed by a signal in "),
        (
            "3",
            "| 3 | test empty ran | exit 0, but empty.csv: no rows in ",
        ),
    ] {
        let row = table_row(&summary, first);
        assert!(
            row.starts_with(want) && row.ends_with("| **FAIL** |"),
            "{row}"
        );
    }
    for (test, status) in [
        ("killed", "killed by a signal"),
        ("empty", "exit 0, but empty.csv: no rows"),
    ] {
        assert!(
            summary.contains(&format!(
                "- {test} time at 8 B (out-of-place): not judged: test {test} did not finish with \
                 its results ({status}; see {test}.log)"
            )),
            "{summary}"
        );
    }
    // Every node nothing checked fails: here the one the killed test's rows name.
    let row = table_row(&summary, "vm");
    assert!(
        row.starts_with(
            "| vm | **FAIL** | doctor did not check this node (exit 0, but cannot read"
        ),
        "{row}"
    );
    // The rows the killed test finished are kept, and load.
    common::assert_rows_load(&out.join("killed.csv"), 2);
}

/// A spec that measures nothing is refused before anything runs: one line
/// naming the spec file and the fix, exit 2.
#[test]
fn a_spec_without_tests_is_refused() {
    let dir = scratch("rack-no-test");
    let spec = dir.join("doctor-only.toml");
    std::fs::write(&spec, "name = \"x\"\n[launch]\n").unwrap();
    let run = rack_check(&spec, &dir.join("report"));
    assert_eq!(run.status.code(), Some(2), "{}", log(&run));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        stderr.trim(),
        format!(
            "rack_check: error: --spec {}: no [[test]]: rack_check accepts a rack by measuring it; \
             add a [[test]] (e.g. name = \"all_reduce\", binary = \"all_reduce_perf\"), or run \
             doctor alone to check the configuration (mpirun -np NODES --map-by ppr:1:node doctor)",
            spec.display()
        )
    );
    assert!(run.stdout.is_empty());
    assert!(!dir.join("report").exists(), "nothing is run or written");
}
