//! Unclear messages and crashes: each bad input gets one line that names the
//! flag, what was typed and the fix, printed once per job, with a non-zero exit;
//! a count that would not fit in memory is refused before anything is allocated
//! (never a Rust allocation failure and an MPI signal dump).

mod common;

use common::{mpirun, mpirun_command, one_error, text};
use std::process::{Command, Output};

const ALL_REDUCE: &str = env!("CARGO_BIN_EXE_all_reduce_perf");

fn alone(binary: &str, args: &[&str]) -> Output {
    Command::new(binary).args(args).output().unwrap()
}

#[test]
fn negative_and_fractional_numbers_name_their_flag() {
    for (args, expected) in [
        (&["-n", "-1"][..], "-n/--iters -1: use a whole number >= 1"),
        (
            &["-w", "-1"],
            "-w/--warmup_iters -1: use a whole number >= 0",
        ),
        (&["-c", "-1"], "-c/--check -1: use a whole number >= 0"),
        (&["-T", "-1"], "-T/--timeout -1: use a whole number >= 0"),
        (&["-N", "-1"], "-N/--run_cycles -1: use a whole number >= 0"),
        (
            &["-b", "-8"],
            "-b/--minbytes: '-8' is negative: a size is a whole number of bytes, e.g. 8 or 1K",
        ),
        (
            &["-b", "1.9"],
            "-b/--minbytes: '1.9' is not a whole number of bytes (1.9 B); use e.g. 2",
        ),
    ] {
        one_error(&mpirun(2, ALL_REDUCE, args), 2, expected);
    }
    // 1.5K is a whole number of bytes.
    let out = mpirun(2, ALL_REDUCE, &["-b", "1.5K", "-e", "1.5K", "-n", "2"]);
    assert!(out.status.success(), "{}", text(&out).1);
    assert!(text(&out).0.contains("        1536 "), "{}", text(&out).0);
}

#[test]
fn verbs_and_copy_bw_numbers_name_their_flag() {
    let write_bw = env!("CARGO_BIN_EXE_ib_write_bw");
    for (args, expected) in [
        (&["-n", "-1"][..], "-n/--iters -1: use a whole number >= 5"),
        (
            &["-s", "1.9"],
            "-s/--size: '1.9' is not a whole number of bytes",
        ),
        (&["-D", "-1"], "-D/--duration -1: use a whole number >= 1"),
        (&["-q", "-2"], "-q/--qp -2: use a whole number from 1"),
        (
            &["--timeout", "-1"],
            "--timeout -1: use a whole number >= 1",
        ),
    ] {
        one_error(&alone(write_bw, args), 2, expected);
    }
    let copy_bw = env!("CARGO_BIN_EXE_copy_bw");
    one_error(
        &alone(copy_bw, &["-n", "-1"]),
        2,
        "-n/--iters -1: use a whole number >= 1",
    );
    one_error(
        &alone(copy_bw, &["-e", "0.5"]),
        2,
        "-e/--maxbytes: '0.5' is not a whole number of bytes",
    );
}

#[test]
fn a_parse_error_on_one_rank_of_an_mpmd_job_is_one_short_line() {
    let out = mpirun_command()
        .args([
            "-np", "1", ALL_REDUCE, ":", "-np", "1", ALL_REDUCE, "-n", "x",
        ])
        .output()
        .unwrap();
    let line = one_error(
        &out,
        2,
        "all_reduce_perf: error: -n/--iters: 'x' is not a number; use a whole number >= 1 (on rank 1); start every rank with the same flags",
    );
    assert!(line.len() < 160, "{line}");
}

#[test]
fn counts_beyond_memory_are_refused_before_allocating() {
    let line = one_error(
        &mpirun(2, ALL_REDUCE, &["-b", "8", "-e", "8", "-n", "10000000000000"]),
        1,
        "all_reduce_perf: error: -n/--iters 10000000000000: the per-iteration times need 291.0 TiB of host memory on each rank (654.8 TiB on rank 0, which gathers every rank's)",
    );
    assert!(
        line.contains("is available to each rank") && line.ends_with("; lower -n/--iters"),
        "{line}"
    );
    one_error(
        &mpirun(2, ALL_REDUCE, &["-b", "8", "-e", "8", "-n", "18446744073709551615"]),
        2,
        "-n/--iters 18446744073709551615: the per-iteration times of so many iterations exceed any memory",
    );
    // 2^31 sizes of all-pairs results.
    one_error(
        &mpirun(
            2,
            env!("CARGO_BIN_EXE_sendrecv_perf"),
            &["--all-pairs", "-b", "1", "-e", "2147483647", "-i", "1"],
        ),
        1,
        "--all-pairs: each rank needs ",
    );
    one_error(
        &alone(env!("CARGO_BIN_EXE_ib_write_lat"), &["-n", "10000000000000"]),
        1,
        "-n/--iters 10000000000000: the latency samples need 218.3 TiB of host memory (24 B a round trip)",
    );
    one_error(
        &alone(env!("CARGO_BIN_EXE_copy_bw"), &["-n", "10000000000000"]),
        1,
        "-n/--iters 10000000000000: timing the copies needs ",
    );
}

#[test]
fn csv_targets_that_cannot_be_written_are_one_line_each() {
    let dir = common::scratch("csv-targets");
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("run.csv");
    let under_file = under_file.to_str().unwrap();
    one_error(
        &mpirun(2, ALL_REDUCE, &["--csv", under_file]),
        2,
        &format!(
            "--csv {under_file}: {} is not a directory; give a path in a folder",
            file.display()
        ),
    );
    // A missing folder is created, one under a folder nobody can write is refused.
    let nested = dir.join("new/deeper/run.csv");
    let out = mpirun(
        2,
        ALL_REDUCE,
        &[
            "-b",
            "8",
            "-e",
            "8",
            "-n",
            "2",
            "--csv",
            nested.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out).1);
    common::assert_rows_load(&nested, 2);
    one_error(
        &mpirun(2, ALL_REDUCE, &["--csv", "/proc/fabricbench/run.csv"]),
        2,
        "--csv /proc/fabricbench/run.csv: cannot create files in /proc (No such file or directory); choose a folder you can write",
    );
}
