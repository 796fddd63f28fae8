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
    assert!(
        summary.contains("**PASS: 6 of 6 steps and checks passed**"),
        "{summary}"
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
    assert!(
        summary.contains("**FAIL: 3 of 5 steps and checks failed**"),
        "{summary}"
    );
    // doctor read the port-down fixture: the node and port are named.
    assert!(
        summary
            .contains("- doctor: gpu-a mlx5_1:1: state DOWN, physical state Polling (port-state)"),
        "{summary}"
    );
    // A threshold no host reaches: the measured value and the limit are shown.
    let busbw = summary
        .lines()
        .find(|l| l.starts_with("| 3 | all_reduce busbw at 32 KiB (out-of-place) |"))
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(
        busbw.contains(" GB/s | >= 58320.000 GB/s (90% of nvlink5 x 72")
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
            .any(|l| l.starts_with("| 5 | all_reduce time at 8 B") && l.ends_with("| PASS |")),
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
            "- test stuck: timed out after 5 s (timeout_s) and was stopped (see [stuck.log](stuck.log))"
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
        "name = \"x\"\n[launch]\nnodes = 1\n[[check]]\ntest = \"ar\"\nmetric = \"busbw\"\n",
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
