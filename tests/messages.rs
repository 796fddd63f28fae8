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

/// A run of one size on 2 ranks with --csv `csv`; its 2 rows load.
fn small_run_to(csv: &std::path::Path) {
    let csv_arg = csv.to_str().unwrap();
    let out = mpirun(
        2,
        ALL_REDUCE,
        &["-b", "8", "-e", "8", "-n", "2", "--csv", csv_arg],
    );
    assert!(out.status.success(), "{}", text(&out).1);
    common::assert_rows_load(csv, 2);
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
    small_run_to(&nested);
    one_error(
        &mpirun(2, ALL_REDUCE, &["--csv", "/proc/fabricbench/run.csv"]),
        2,
        "--csv /proc/fabricbench/run.csv: cannot create files in /proc (No such file or directory); choose a folder you can write",
    );
}

/// Values a hostile user types for a number, each with whether it is a number
/// too large for any flag.
const HOSTILE: [&str; 12] = [
    "1e23",
    "1e300",
    "99999999999999999999999",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "-0",
    "1e-300",
    "0x10",
    "",
    "1e999999",
];

/// Clap's and Rust's own words, which name no fix (a flag taking "-inf" for a
/// flag, a parse error of the standard library).
const NOT_OURS: [&str; 6] = [
    "a value is required",
    "unexpected argument",
    "invalid digit",
    "invalid float literal",
    "cannot parse",
    "too large to fit in target type",
];

/// Every flag of `P` that takes a value, fed each hostile value after `base`:
/// a refusal is one line with none of clap's or Rust's words, echoes the
/// value as typed, and writes no number longer than the user did (1e300 is
/// not 301 digits). Returns how many refusals were checked.
fn sweep<P: clap::Parser>(program: &str, base: &[&str]) -> usize {
    let mut refused = 0;
    for arg in P::command().get_arguments() {
        if arg.is_positional() || !arg.get_action().takes_values() {
            continue;
        }
        let flag = match (arg.get_short(), arg.get_long()) {
            (_, Some(long)) => format!("--{long}"),
            (Some(short), None) => format!("-{short}"),
            (None, None) => continue,
        };
        for value in HOSTILE {
            // A flag of names or paths takes "-inf" for a flag and says nothing
            // was given for "", as clap says; every number flag takes both.
            if (value.starts_with('-') || value.is_empty()) && !arg.is_allow_hyphen_values_set() {
                continue;
            }
            let argv = std::iter::once(program)
                .chain(base.iter().copied())
                .chain([flag.as_str(), value]);
            let Err(e) = fabricbench::cli::parse_one_line::<P, _, _>(argv) else {
                continue;
            };
            let line = e.0;
            let at = format!("{program} {flag} '{value}'");
            assert_eq!(line.lines().count(), 1, "{at}: {line}");
            for words in NOT_OURS {
                assert!(!line.contains(words), "{at}: {line}");
            }
            let longest_run = line
                .split(|c: char| !c.is_ascii_digit())
                .map(str::len)
                .max()
                .unwrap_or(0);
            assert!(
                longest_run <= 23,
                "{at}: a number longer than typed: {line}"
            );
            if line.contains(&flag) && !value.is_empty() {
                assert!(line.contains(value), "{at}: not echoed as typed: {line}");
            }
            refused += 1;
        }
    }
    refused
}

#[test]
fn every_number_flag_of_every_binary_says_what_is_wrong() {
    use fabricbench::{driver::args::CollArgs, verbs::flags::VerbsArgs};
    let checked = sweep::<CollArgs>("all_reduce_perf", &[])
        + sweep::<VerbsArgs>("ib_write_bw", &[])
        + sweep::<fabricbench::doctor::cli::DoctorArgs>("doctor", &[])
        + sweep::<fabricbench::plot::cli::PlotArgs>("plot", &["a.csv"])
        + sweep::<fabricbench::compare::cli::CompareArgs>("compare", &["a.csv", "b.csv"]);
    assert!(checked > 400, "{checked} refusals checked");
    // The binaries themselves: the examples, one line each, exit 2,
    // printed once per job on 2 ranks.
    let whole =
        |least: u64| format!("too large; use a whole number from {least} to 18446744073709551615");
    for (args, expected) in [
        (["-f", "1e23"], format!("all_reduce_perf: error: -f/--stepfactor 1e23: {}", whole(2))),
        (["-n", "1e300"], format!("all_reduce_perf: error: -n/--iters 1e300: {}", whole(1))),
        (
            ["-b", "1e300"],
            "all_reduce_perf: error: -b/--minbytes: '1e300' is out of range: sizes stop at 2^64-1 bytes"
                .to_string(),
        ),
        (
            ["--slow-fraction", "1e300"],
            "all_reduce_perf: error: --slow-fraction 1e300: too large; give a fraction of the median, \
             more than 0 and at most 1, e.g. 0.9"
                .to_string(),
        ),
    ] {
        let line = one_error(&mpirun(2, ALL_REDUCE, &args), 2, &expected);
        assert_eq!(line, expected);
    }
    for (binary, args, expected) in [
        (
            env!("CARGO_BIN_EXE_copy_bw"),
            ["-n", "1e23"],
            format!("copy_bw: error: -n/--iters 1e23: {}", whole(1)),
        ),
        (
            env!("CARGO_BIN_EXE_ib_write_bw"),
            ["-D", "1e300"],
            format!("ib_write_bw: error: -D/--duration 1e300: {}", whole(1)),
        ),
        (
            env!("CARGO_BIN_EXE_doctor"),
            ["--port-rate", "1e300"],
            "doctor: error: --port-rate 1e300: too large; give the expected rate in Gb/s, from 1 to \
             10000, e.g. 400"
                .to_string(),
        ),
        (
            env!("CARGO_BIN_EXE_copy_bw"),
            ["-w", "nan"],
            "copy_bw: error: -w/--warmup_iters: 'nan' is not a number; use a whole number >= 0".to_string(),
        ),
    ] {
        let line = one_error(&alone(binary, &args), 2, &expected);
        assert_eq!(line, expected);
    }
    // A threshold that is accepted is said back as typed, not in 301 digits.
    let dir = common::scratch("huge-threshold");
    let csv = dir.join("run.csv");
    small_run_to(&csv);
    let csv = csv.to_str().unwrap();
    let out = alone(
        env!("CARGO_BIN_EXE_compare"),
        &[csv, csv, "--threshold", "1e300"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
    assert!(
        text(&out)
            .0
            .ends_with("# 2 matched rows; 0 regressed beyond busbw -1e300% or p99 +1e300%\n"),
        "{}",
        text(&out).0
    );
}
