//! Bad input and faults: one line naming the flag and the fix, a non-zero exit on
//! every rank, no hang, and rows already measured kept on disk.

mod common;

use common::{
    assert_rows_load, mpirun, mpirun_command, mpirun_env, one_error, output_within, read_rows,
    scratch, text,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");

/// Runs on 2 ranks and returns (exit code, the error lines on stderr).
fn fails(args: &[&str]) -> (Option<i32>, Vec<String>) {
    let out = mpirun(2, ALL_REDUCE, args);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{args:?} should fail:\n{stdout}");
    assert!(
        !stderr.contains("panicked"),
        "{args:?}: no panic trace:\n{stderr}"
    );
    let errors = stderr
        .lines()
        .filter(|l| l.contains("error:"))
        .map(str::to_string)
        .collect();
    (out.status.code(), errors)
}

fn usage_error(args: &[&str], expected: &str) {
    let (code, errors) = fails(args);
    assert_eq!(code, Some(2), "{args:?}: usage errors exit 2; {errors:?}");
    assert_eq!(
        errors.len(),
        1,
        "{args:?}: one line, printed once: {errors:?}"
    );
    assert!(
        errors[0].contains(expected),
        "{args:?}: {:?} lacks {expected:?}",
        errors[0]
    );
}

#[test]
fn sizes() {
    usage_error(
        &["-b", "1M", "-e", "1K"],
        "-b/--minbytes 1048576 is larger than -e/--maxbytes 1024: give -b <= -e",
    );
    usage_error(
        &["-b", "0"],
        "-b/--minbytes 0: sizes must be at least 1 byte",
    );
    usage_error(
        &["-e", "12Q"],
        "'12Q' is not a size: use a number with an optional K, M or G suffix",
    );
    usage_error(&["-f", "1"], "-f/--stepfactor 1: must be an integer > 1");
}

#[test]
fn types_ops_roots() {
    usage_error(
        &["-d", "int7"],
        "-d/--datatype int7: use int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2 or all",
    );
    usage_error(
        &["-o", "xor"],
        "-o/--op xor: use sum, prod, max, min, avg, mulsum or all",
    );
    let (code, errors) = {
        let out = mpirun(2, env!("CARGO_BIN_EXE_broadcast_perf"), &["-r", "5"]);
        let (_, stderr) = text(&out);
        (
            out.status.code(),
            stderr
                .lines()
                .filter(|l| l.contains("error:"))
                .map(str::to_string)
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(code, Some(2));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("-r/--root 5: out of range for 2 ranks; use 0..1 or -1 for every rank"),
        "{errors:?}"
    );
}

#[test]
fn percentiles_off_against_what_needs_every_call() {
    usage_error(
        &["--percentiles", "0", "-I", "1"],
        "--percentiles 0 and -I/--per_iter_timing 1: the i_* columns need every call's time",
    );
    usage_error(
        &["--percentiles", "0", "-z", "3"],
        "--percentiles 0 and -z/--blocking 3: -z 3 times every call on its own",
    );
    usage_error(
        &["--percentiles", "0", "--hist", "target"],
        "--percentiles 0 and --hist: the histograms are of every call's time",
    );
    usage_error(
        &["--percentiles", "5"],
        "--percentiles 5: use 1 (time every call",
    );
}

fn mem_available_bytes() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = meminfo
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

#[test]
fn buffers_that_do_not_fit_are_refused_before_allocating_once_per_job() {
    // Three ranks of doubles at size S need 4 S each (send, receive and their host
    // staging): S = a quarter of this host's available memory cannot fit.
    let size = (mem_available_bytes() / 4).next_multiple_of(1 << 30);
    let arg = size.to_string();
    let out = mpirun(3, ALL_REDUCE, &["-b", &arg, "-e", &arg, "-d", "double"]);
    let line = one_error(
        &out,
        1,
        &format!(
            "all_reduce_perf: ranks 0-2 ({}): error: -e/--maxbytes {size}: each rank needs {} GiB (buffers",
            fabricbench::job::hostname(),
            (4 * size) >> 30
        ),
    );
    assert!(
        line.contains("of available host memory shared by 3 ranks on this node")
            && line.ends_with("; lower -e/--maxbytes"),
        "{line}"
    );
    // The one line is the whole of it: no rank repeats it.
    let stderr = text(&out).1;
    assert_eq!(stderr.matches("each rank needs").count(), 1, "{stderr}");
}

#[test]
fn ranks_with_different_arguments_are_caught() {
    common::keep_mpi_session_folder();
    let out = Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "1",
            ALL_REDUCE,
            "-e",
            "1M",
            ":",
            "-np",
            "1",
            ALL_REDUCE,
            "-e",
            "2M",
        ])
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("ranks were started with different arguments (--maxbytes is 2097152 on rank 1 but 1048576 on rank 0)"),
        "{stderr}"
    );
}

#[test]
fn an_existing_csv_is_never_overwritten() {
    let dir = scratch("existing-csv");
    let csv = dir.join("keep.csv");
    std::fs::write(&csv, "precious\n").unwrap();
    usage_error(
        &["--csv", csv.to_str().unwrap()],
        "the file exists and runs are never overwritten",
    );
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), "precious\n");
}

#[test]
fn append_adds_rows_of_the_same_schema() {
    let dir = scratch("append-csv");
    let csv = dir.join("runs.csv");
    let path = csv.to_str().unwrap();
    for _ in 0..2 {
        let out = mpirun(
            2,
            ALL_REDUCE,
            &["-b", "8", "-e", "8", "-n", "2", "--csv", path, "--append"],
        );
        assert!(out.status.success(), "{}", text(&out).1);
    }
    assert_eq!(read_rows(&csv).len(), 4);
    std::fs::write(&csv, "other,columns\n1,2\n").unwrap();
    let (code, errors) = fails(&["-b", "8", "-e", "8", "--csv", path, "--append"]);
    assert_eq!(code, Some(1));
    assert!(
        errors
            .iter()
            .any(|e| e.contains("the file has other columns")),
        "{errors:?}"
    );
}

#[test]
fn a_hang_times_out_naming_the_rank_that_did_not_arrive() {
    let dir = scratch("timeout");
    let csv = dir.join("partial.csv");
    // Rank 2 stalls before the 8 KiB size; sizes 8 B to 2 KiB finish first.
    let started = std::time::Instant::now();
    let out = mpirun_env(
        3,
        ALL_REDUCE,
        &[
            "-b",
            "8",
            "-e",
            "64K",
            "-f",
            "4",
            "-n",
            "2",
            "-T",
            "3",
            "--csv",
            csv.to_str().unwrap(),
        ],
        &[("FABRICBENCH_FAULT_STALL_RANK", "2:4096")],
    );
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        started.elapsed().as_secs() < 60,
        "the watchdog ended the job"
    );
    let line = stderr
        .lines()
        .find(|l| l.contains("-T/--timeout 3"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.contains("AllReduce float sum out-of-place root 0 8192 B"),
        "{line}"
    );
    assert!(line.contains("ranks waiting in it: 0,1;"), "{line}");
    assert!(
        line.contains("ranks that had not arrived: 2 (on "),
        "{line}"
    );
    // The sizes measured before the hang are on disk.
    let rows = read_rows(&csv);
    assert_eq!(
        rows.iter().map(|r| r.size_bytes).collect::<Vec<_>>(),
        [8, 8, 32, 32, 128, 128, 512, 512, 2048, 2048]
    );
}

/// alltoallv_perf on 2 ranks with `matrix` as NCCL_TESTS_ALLTOALLV_MATRIX_FILE
/// and -T 3, bounded in time: a file that never ends or never opens is a hang.
fn alltoallv_with_matrix(matrix: &Path, csv: &Path) -> std::process::Output {
    let mut cmd = mpirun_command();
    cmd.args(["-x", "NCCL_TESTS_ALLTOALLV_MATRIX_FILE"])
        .env("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", matrix)
        .args(["-np", "2", env!("CARGO_BIN_EXE_alltoallv_perf")])
        .args(["-b", "1K", "-e", "1K", "-n", "2", "-T", "3", "--csv"])
        .arg(csv);
    output_within(cmd, Duration::from_secs(120))
}

/// In a new scratch folder: a FIFO no one writes, and a regular file of 1 MiB
/// and a byte (past the bound of a matrix for 2 ranks and of a spec), sparse.
fn hostile_files(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = scratch(name);
    let fifo = dir.join("named.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let huge = dir.join("huge.txt");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len((1 << 20) + 1)
        .unwrap();
    (dir, fifo, huge)
}

#[test]
fn a_matrix_file_that_never_ends_or_never_opens_is_refused_at_once() {
    let (dir, fifo, huge) = hostile_files("matrix-files");
    let fix = "give a file of 2 rows of 2 byte counts";
    for (matrix, why) in [
        (
            Path::new("/dev/zero"),
            "is a character device, not a regular file".to_string(),
        ),
        (fifo.as_path(), "is a FIFO, not a regular file".to_string()),
        (
            huge.as_path(),
            "holds more than 1 MiB, the most read for 2 ranks (32 bytes an entry of a 2x2 matrix, \
             and at least 1 MiB)"
                .to_string(),
        ),
        (dir.join("absent.txt").as_path(), "no such file".to_string()),
    ] {
        let csv = dir.join("rows.csv");
        let started = Instant::now();
        let out = alltoallv_with_matrix(matrix, &csv);
        one_error(
            &out,
            2,
            &format!(
                "alltoallv_perf: error: NCCL_TESTS_ALLTOALLV_MATRIX_FILE={}: {why}; {fix}",
                matrix.display()
            ),
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{matrix:?} took {:?}",
            started.elapsed()
        );
        assert!(!csv.exists(), "refused before any file is made");
    }
    // A matrix within the bound runs, and its rows load.
    let good = dir.join("good.txt");
    std::fs::write(&good, "0 512\n512 0\n").unwrap();
    let csv = dir.join("good.csv");
    let out = alltoallv_with_matrix(&good, &csv);
    assert!(out.status.success(), "{}", text(&out).1);
    assert_rows_load(&csv, 2);
}

/// `binary args` alone, within 60 s.
fn alone_within(binary: &str, args: &[&Path]) -> std::process::Output {
    let mut cmd = Command::new(binary);
    cmd.args(args);
    output_within(cmd, Duration::from_secs(60))
}

#[test]
fn every_file_a_flag_names_is_read_only_when_regular_and_bounded() {
    let (_, fifo, big_spec) = hostile_files("named-files");
    let spec_fix = "give the path of a rack spec (.toml, see scripts/rack-*.toml)";
    let rack_check = env!("CARGO_BIN_EXE_rack_check");
    for (spec, why) in [
        (fifo.as_path(), "is a FIFO, not a regular file"),
        (
            Path::new("/dev/zero"),
            "is a character device, not a regular file",
        ),
        (big_spec.as_path(), "holds more than 1 MiB"),
    ] {
        let out = alone_within(rack_check, &[Path::new("--spec"), spec]);
        one_error(
            &out,
            2,
            &format!(
                "rack_check: error: --spec {}: {why}; {spec_fix}",
                spec.display()
            ),
        );
    }
    let csv_fix = "not a regular file; give a fabricbench CSV";
    let out = alone_within(env!("CARGO_BIN_EXE_plot"), &[&fifo]);
    one_error(
        &out,
        2,
        &format!("plot: error: {}: is a FIFO, {csv_fix}", fifo.display()),
    );
    let out = alone_within(
        env!("CARGO_BIN_EXE_compare"),
        &[Path::new("/dev/zero"), &fifo],
    );
    one_error(
        &out,
        2,
        &format!("compare: error: /dev/zero: is a character device, {csv_fix}"),
    );
}
