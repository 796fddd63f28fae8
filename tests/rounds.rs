//! `--rounds`, `--rounds auto` and `--min-busbw` on all_reduce_perf under mpirun:
//! `--rounds 1` is today's run, more rounds are interleaved in the CSV (one row
//! per round) and summarized as medians in the table, auto reports its rounds,
//! and the interval-aware minimum gives its three verdicts. Structure only:
//! nothing here depends on how fast the machine is.

mod common;

use common::{assert_rows_load, mpirun, one_error, read_rows, scratch, table_rows, text};

const BIN: &str = env!("CARGO_BIN_EXE_all_reduce_perf");

/// Sizes 8, 32 and 128 B, few iterations: fast under load.
const SWEEP: [&str; 8] = ["-b", "8", "-e", "128", "-f", "4", "-n", "3"];

fn run(extra: &[&str]) -> std::process::Output {
    let mut args: Vec<&str> = SWEEP.to_vec();
    args.extend_from_slice(extra);
    mpirun(2, BIN, &args)
}

/// A comment line with its figures masked: what stays the same from run to run.
fn shape(line: &str) -> String {
    line.chars()
        .map(|c| if c.is_ascii_digit() { '0' } else { c })
        .collect()
}

/// The comment lines that carry no measured figure, a run id, a pid or a counter.
fn fixed_comments(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.starts_with('#'))
        .filter(|l| {
            !["run id", "Pid", "bandwidth", "netdevs", "Fabric counters"]
                .iter()
                .any(|v| l.contains(v))
        })
        .map(shape)
        .collect()
}

#[test]
fn rounds_1_is_the_run_without_the_flag() {
    let dir = scratch("rounds-one");
    let (plain, one) = (dir.join("plain.csv"), dir.join("one.csv"));
    let a = run(&["--csv", plain.to_str().unwrap()]);
    let b = run(&["--rounds", "1", "--csv", one.to_str().unwrap()]);
    assert!(a.status.success() && b.status.success(), "{:?}", text(&b));
    let (a_out, b_out) = (text(&a).0, text(&b).0);
    assert_eq!(fixed_comments(&a_out), fixed_comments(&b_out));
    let (a_rows, b_rows) = (table_rows(&a_out), table_rows(&b_out));
    assert_eq!(a_rows.len(), 3);
    assert_eq!(a_rows.len(), b_rows.len());
    for (x, y) in a_rows.iter().zip(&b_rows) {
        assert_eq!(x.len(), y.len(), "{x:?} {y:?}");
        assert_eq!(x[..5], y[..5]);
    }
    assert!(!b_out.contains("Round") && !b_out.contains("rounds"));
    let header = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(header(&plain), header(&one));
    assert!(header(&one).ends_with(",round,expected_busbw_gbs,pct_of_expected"));
    let rows = read_rows(&one);
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().all(|r| r.round == Some(1)));
}

#[test]
fn rounds_3_are_interleaved_rows_and_a_median_table() {
    let dir = scratch("rounds-three");
    let csv = dir.join("r.csv");
    let out = run(&["--rounds", "3", "--csv", csv.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    // 3 sizes x 2 placements x 3 rounds, as measured: all of round 1 first.
    assert_rows_load(&csv, 18);
    let rows = read_rows(&csv);
    let rounds: Vec<u32> = rows.iter().map(|r| r.round.unwrap()).collect();
    assert_eq!(rounds, [[1; 6], [2; 6], [3; 6]].concat());
    let sizes: Vec<u64> = rows.iter().map(|r| r.size_bytes).collect();
    assert_eq!(sizes[..6], sizes[6..12]);
    assert_eq!(sizes[..6], [8, 8, 32, 32, 128, 128]);
    // One line per size, after the last round: its rounds and busbw's spread.
    assert!(
        stdout.contains("# Round 3\n# Median over rounds"),
        "{stdout}"
    );
    assert!(stdout.contains("rounds   ±busbw   ±busbw"), "{stdout}");
    let lines = table_rows(&stdout);
    assert_eq!(lines.len(), 3, "{stdout}");
    for line in &lines {
        let n = line.len();
        assert_eq!(line[n - 3], "3", "{line:?}");
        for spread in &line[n - 2..] {
            assert!(spread.starts_with('±') && spread.ends_with('%'), "{line:?}");
        }
    }
    assert!(stdout.contains("# Avg bus bandwidth"));
}

#[test]
fn two_rounds_say_the_spread_is_not_estimated() {
    let out = mpirun(2, BIN, &["-b", "8", "-e", "8", "-n", "3", "--rounds", "2"]);
    let stdout = text(&out).0;
    assert!(out.status.success());
    let lines = table_rows(&stdout);
    assert_eq!(lines.len(), 1);
    let n = lines[0].len();
    assert_eq!(lines[0][n - 3..], ["2", "n/a", "n/a"]);
}

#[test]
fn auto_reports_each_lines_rounds() {
    let dir = scratch("rounds-auto");
    let csv = dir.join("auto.csv");
    let max = 5;
    let out = run(&[
        "--rounds",
        "auto",
        "--rounds-tolerance",
        "50",
        "--max-rounds",
        &max.to_string(),
        "--rounds-time",
        "600",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let footer = stdout
        .lines()
        .find(|l| l.starts_with("# Rounds "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        footer.contains("auto to ±50%:") && footer.contains("of 3 lines settled"),
        "{footer}"
    );
    let rows = read_rows(&csv);
    for line in table_rows(&stdout) {
        let size: u64 = line[0].parse().unwrap();
        let rounds: usize = line[line.len() - 3].parse().unwrap();
        assert!((3..=max).contains(&rounds), "{line:?}");
        // Every round of the line is a row of each placement.
        let of_size = rows.iter().filter(|r| r.size_bytes == size).count();
        assert_eq!(of_size, 2 * rounds, "{size} B");
        // A line stopped before the cap had settled: only the cap leaves one unsettled.
        let named = footer.contains(&format!(" {size} B float sum"));
        assert!(!named || rounds == max, "{footer}");
    }
    // Later rounds only measure lines not yet settled: never more than round 1's.
    let in_round = |n| rows.iter().filter(|r| r.round == Some(n)).count();
    assert_eq!(in_round(1), 6);
    assert!((2..=max as u32).all(|n| in_round(n) <= in_round(n - 1)));
}

#[test]
fn min_busbw_passes_fails_and_cannot_tell() {
    let pass = run(&["--rounds", "3", "--min-busbw", "1e-9"]);
    let stdout = text(&pass).0;
    assert_eq!(pass.status.code(), Some(0), "{:?}", text(&pass));
    assert!(
        stdout.contains("# Min bus bandwidth    : average busbw"),
        "{stdout}"
    );
    assert!(stdout.contains(": PASS"));

    let fail = run(&["--rounds", "3", "--min-busbw", "1e9"]);
    let (_, stderr) = text(&fail);
    assert_eq!(fail.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is below --min-busbw 1000000000 GB/s: FAIL"),
        "{stderr}"
    );
    assert!(
        stderr.contains("median of 3 rounds, 95% interval"),
        "{stderr}"
    );

    // One round estimates no noise: never a pass or a fail, whatever the figure.
    let unsure = run(&["--min-busbw", "1e-9"]);
    let (_, stderr) = text(&unsure);
    assert_eq!(unsure.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("INCONCLUSIVE: noise not estimated: use --rounds 3 or more"),
        "{stderr}"
    );
}

#[test]
fn bad_values_name_the_flag_and_the_fix() {
    for (flags, expected) in [
        (
            &["--rounds", "0"][..],
            "--rounds 0: every line needs at least one round",
        ),
        (&["--rounds", "nan"], "--rounds: 'nan' is not a number"),
        (&["--rounds", "-3"], "--rounds"),
        (
            &["--rounds", "auto", "--rounds-tolerance", "inf"],
            "--rounds-tolerance: 'inf' is not a number",
        ),
        (
            &["--rounds", "auto", "--rounds-tolerance", "0"],
            "--rounds-tolerance 0: too small",
        ),
        (
            &["--rounds", "auto", "--rounds-time", "-1"],
            "--rounds-time -1: too small",
        ),
        (
            &["--rounds", "auto", "--max-rounds", "2"],
            "--max-rounds 2: auto needs 3 rounds",
        ),
        (
            &["--rounds-tolerance", "5"],
            "--rounds-tolerance: only --rounds auto uses it",
        ),
        (&["--min-busbw", "0"], "--min-busbw 0: too small"),
        (&["--min-busbw", "-5"], "--min-busbw -5: too small"),
        (
            &["--min-busbw", "NaN"],
            "--min-busbw: 'NaN' is not a number",
        ),
        (
            &["--rounds", "3", "-N", "0"],
            "--rounds 3 with -N/--run_cycles 0",
        ),
    ] {
        let out = mpirun(2, BIN, &[&["-b", "8", "-e", "8"][..], flags].concat());
        one_error(&out, 2, expected);
    }
}
