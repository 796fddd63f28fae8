//! The compare binary on synthetic CSVs: exit statuses, the delta table,
//! unmatched rows, bad input, and the overlay plots.

mod common;

use fabricbench::report::{Row, SCHEMA_VERSION};
use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fb-compare-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn row(placement: &str, size: u64, busbw: f64, p99: f64) -> Row {
    common::sweep_row(placement, size, busbw, p99)
}

fn write(path: &Path, rows: &[Row]) {
    let mut w = csv::Writer::from_path(path).unwrap();
    for r in rows {
        w.serialize(r).unwrap();
    }
    w.flush().unwrap();
}

/// A baseline over 1K..1M, both placements.
fn baseline() -> Vec<Row> {
    let mut rows = Vec::new();
    for (i, size) in [1u64 << 10, 1 << 14, 1 << 17, 1 << 20]
        .into_iter()
        .enumerate()
    {
        for placement in ["out-of-place", "in-place"] {
            rows.push(row(placement, size, 5.0 + 10.0 * i as f64, 10.0 + i as f64));
        }
    }
    rows
}

fn compare(args: &[&Path], flags: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_compare"))
        .args(args)
        .args(flags)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_regression_beyond_the_threshold_fails() {
    let dir = scratch("regression");
    let (base, cand) = (dir.join("base.csv"), dir.join("repaired.csv"));
    write(&base, &baseline());
    // The candidate: 1 MiB out-of-place loses 12% of its busbw; an extra size is unmatched.
    let mut rows = baseline();
    rows[6].busbw_gbs *= 0.88;
    rows.push(row("out-of-place", 4 << 20, 40.0, 20.0));
    write(&cand, &rows);

    let (code, out, err) = compare(&[&base, &cand], &["--threshold", "10"]);
    assert_eq!(code, Some(1), "{out}{err}");
    let regressed: Vec<&str> = out.lines().filter(|l| l.contains("REGRESSED")).collect();
    assert_eq!(regressed.len(), 1, "{out}");
    assert!(regressed[0].contains("out-of-place") && regressed[0].contains("1048576"));
    assert!(regressed[0].contains("-12.0%"), "{}", regressed[0]);
    assert!(out.contains("# unmatched: 1 rows only in repaired:\n#   all_reduce float sum out-of-place 4 MiB 8 ranks"), "{out}");
    assert!(
        out.contains("# 8 matched rows; 1 regressed beyond busbw -10% or p99 +10%"),
        "{out}"
    );

    // Within a looser threshold, or with none, the same runs pass.
    let (code, out, _) = compare(&[&base, &cand], &["--threshold", "15"]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out, _) = compare(&[&base, &cand], &[]);
    assert_eq!(code, Some(0));
    assert!(out.contains("no --threshold given: nothing judged"));

    // A p99 rise counts too, with its own bound.
    let mut slow = baseline();
    slow[0].p99_us *= 1.5;
    let slow_path = dir.join("slow.csv");
    write(&slow_path, &slow);
    let (code, _, _) = compare(&[&base, &slow_path], &["--threshold", "10"]);
    assert_eq!(code, Some(1));
    let (code, _, _) = compare(
        &[&base, &slow_path],
        &["--threshold", "10", "--p99-threshold", "60"],
    );
    assert_eq!(code, Some(0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Not measured is not worse: a candidate run with `--percentiles 0` (p99 NaN,
/// the loop timed whole) is judged on busbw alone, and its p99 is said to be not
/// judged, never REGRESSED nor ok. With only a p99 threshold nothing can be
/// judged: no verdict, exit 4.
#[test]
fn a_run_without_percentiles_is_not_judged_on_p99() {
    let dir = scratch("whole");
    let (base, cand) = (dir.join("base.csv"), dir.join("whole.csv"));
    write(&base, &baseline());
    let mut rows = baseline();
    for r in &mut rows {
        r.busbw_gbs *= 1.97;
        (r.p50_us, r.p99_us, r.p999_us, r.min_us, r.max_us) =
            (f64::NAN, f64::NAN, f64::NAN, f64::NAN, f64::NAN);
    }
    write(&cand, &rows);
    let (code, out, err) = compare(&[&base, &cand], &["--threshold", "5"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let verdicts: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(verdicts.len(), 8, "{out}");
    for line in verdicts {
        assert!(
            line.contains("+97.0%")
                && line.ends_with("ok on busbw; not judged: p99 not measured in candidate"),
            "{line}"
        );
    }
    assert_eq!(
        out.lines().last().unwrap(),
        "# 8 matched rows; 0 regressed beyond busbw -5% or p99 +5%; not judged: p99 not \
         measured in candidate (8 rows)"
    );
    // A busbw drop still regresses beside a p99 that is not judged.
    rows[6].busbw_gbs = baseline()[6].busbw_gbs * 0.5;
    write(&cand, &rows);
    let (code, out, _) = compare(&[&base, &cand], &["--threshold", "5"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("REGRESSED (busbw); not judged: p99 not measured in candidate"),
        "{out}"
    );
    // Only p99 asked for, and it was not measured: no row is judged.
    let (code, out, _) = compare(&[&base, &cand], &["--p99-threshold", "5"]);
    assert_eq!(code, Some(4), "{out}");
    assert!(
        out.lines().last().unwrap().ends_with(
            "not judged: p99 not measured in candidate (8 rows); 8 rows judged on no figure: no verdict"
        ),
        "{out}"
    );
    for csv in [&base, &cand] {
        common::assert_rows_load(csv, 8);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The same with real runs: all_reduce_perf timed per iteration against
/// `--percentiles 0`, p99 judged alone, so no timing noise decides.
#[test]
fn real_runs_with_and_without_percentiles() {
    let dir = scratch("real-whole");
    let (timed, whole) = (dir.join("timed.csv"), dir.join("whole.csv"));
    for (csv, extra) in [(&timed, &[][..]), (&whole, &["--percentiles", "0"][..])] {
        let mut args = vec!["-b", "8", "-e", "64", "-f", "8", "-n", "5", "-w", "1"];
        args.extend(extra);
        args.extend(["--csv", csv.to_str().unwrap()]);
        let run = common::mpirun(2, env!("CARGO_BIN_EXE_all_reduce_perf"), &args);
        assert!(run.status.success(), "{}", common::log(&run));
        common::assert_rows_load(csv, 4);
    }
    let (code, out, err) = compare(&[&timed, &whole], &["--p99-threshold", "5"]);
    assert_eq!(code, Some(4), "{out}{err}");
    assert!(!out.contains("REGRESSED") && !out.contains(" ok"), "{out}");
    assert!(
        out.lines().last().unwrap().ends_with(
            "not judged: p99 not measured in candidate (4 rows); 4 rows judged on no figure: no verdict"
        ),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn overlay_plots() {
    let dir = scratch("plot");
    let (a, b) = (dir.join("a.csv"), dir.join("b.csv"));
    write(&a, &baseline());
    let mut rows = baseline();
    for r in &mut rows {
        r.busbw_gbs *= 1.1;
    }
    write(&b, &rows);
    let plots = dir.join("plots");
    let (code, out, err) = compare(&[&a, &b], &["--plot", plots.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("# 6 plots in"), "{out}");
    let svg = std::fs::read_to_string(plots.join("all_reduce_busbw.svg")).unwrap();
    // One legend entry per run and placement, and the limit line.
    for label in ["a out-of-place", "b in-place", "limit: ib-ndr 50 GB/s"] {
        assert!(svg.contains(label), "{label}");
    }
    let png = std::fs::metadata(plots.join("all_reduce_busbw.png")).unwrap();
    assert!(png.len() > 20_000);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_is_named() {
    let dir = scratch("bad");
    let base = dir.join("base.csv");
    write(&base, &baseline());

    let missing = dir.join("missing.csv");
    let (code, _, err) = compare(&[&base, &missing], &[]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        format!("compare: error: {}: no such file", missing.display())
    );

    let future = dir.join("future.csv");
    let mut rows = baseline();
    rows[0].schema_version = SCHEMA_VERSION + 1;
    write(&future, &rows);
    let (code, _, err) = compare(&[&base, &future], &[]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains(&format!(
            "future.csv:2: schema_version {}, but this fabricbench reads schema_version {SCHEMA_VERSION}",
            SCHEMA_VERSION + 1
        )),
        "{err}"
    );

    let other = dir.join("other.csv");
    let mut rows = baseline();
    for r in &mut rows {
        r.nranks = 16;
    }
    write(&other, &rows);
    let (code, _, err) = compare(&[&base, &other], &[]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("other against base: no row matches the baseline"),
        "{err}"
    );
    assert!(
        err.contains("all_reduce float sum 16 ranks 1 KiB..1 MiB"),
        "{err}"
    );

    let (code, _, err) = compare(&[&base, &base], &["--threshold=-3"]);
    assert_eq!(code, Some(2));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--threshold") && err.contains("percentage"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sizes_a_rounded_label_would_merge_are_told_apart() {
    let dir = scratch("exact-sizes");
    let (base, cand, other) = (
        dir.join("base.csv"),
        dir.join("cand.csv"),
        dir.join("other.csv"),
    );
    write(&base, &[row("out-of-place", 1536, 5.0, 10.0)]);
    // 1537 bytes rounds to "1.5 KiB" as 1536 does.
    write(
        &cand,
        &[
            row("out-of-place", 1536, 5.0, 10.0),
            row("out-of-place", 1537, 5.0, 10.0),
        ],
    );
    common::assert_rows_load(&cand, 2);
    let (code, stdout, stderr) = compare(&[&base, &cand], &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(
            "# unmatched: 1 rows only in cand:\n#   all_reduce float sum out-of-place 1537 B 8 ranks\n"
        ),
        "{stdout}"
    );
    // Nothing matches: the sizes each side has, told apart.
    write(&other, &[row("out-of-place", 1537, 5.0, 10.0)]);
    let (code, _, stderr) = compare(&[&base, &other], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "compare: error: other against base: no row matches the baseline on collective, \
         datatype, op, placement, size and nranks (baseline has all_reduce float sum 8 ranks \
         1.5 KiB..1.5 KiB, candidate has all_reduce float sum 8 ranks 1537 B..1537 B); compare \
         runs of the same sweep"
    );
}

/// `rounds` rows a size (round 1..=rounds, one run), busbw spread evenly over
/// ±spread around `busbw` in a fixed scrambled order: real-looking rounds
/// with fixed figures.
fn rounds(run: &str, busbw: f64, spread: f64, rounds: u32) -> Vec<Row> {
    let mut rows = Vec::new();
    for round in 1..=rounds {
        // 7 is prime to every count used here: each offset once, out of order.
        let k = (round * 7 % rounds) as f64;
        let offset = if rounds == 1 {
            0.0
        } else {
            spread * (2.0 * k / (rounds - 1) as f64 - 1.0)
        };
        for size in [1u64 << 20, 1 << 24] {
            let mut r = row("out-of-place", size, busbw + offset, 100.0 + offset);
            r.run_id = run.into();
            r.round = Some(round);
            rows.push(r);
        }
    }
    rows
}

/// The verdict cells of the table's rows.
fn verdicts(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.starts_with("  all_reduce"))
        .map(|l| {
            l.split("  ")
                .filter(|c| !c.is_empty())
                .last()
                .unwrap()
                .trim()
                .to_string()
        })
        .collect()
}

#[test]
fn rounds_in_one_file_give_the_three_verdicts() {
    let dir = scratch("rounds");
    let base = dir.join("base.csv");
    write(&base, &rounds("b", 10.0, 0.4, 10));
    let run = |name: &str, rows: Vec<Row>| {
        let path = dir.join(name);
        write(&path, &rows);
        compare(
            &[&base, &path],
            &["--threshold", "10", "--p99-threshold", "1000"],
        )
    };
    // 10 rounds around 7 GB/s against 10 around 10: the whole interval below -10%.
    let (code, out, err) = run("slow.csv", rounds("s", 7.0, 0.4, 10));
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(verdicts(&out), ["REGRESSED (busbw)"; 2], "{out}");
    assert!(out.contains("10/10") && out.contains("-30.0%"), "{out}");
    assert!(!out.contains("noise not estimated"), "{out}");
    // Around 10 again: the whole interval within -10%.
    let (code, out, err) = run("same.csv", rounds("c", 10.1, 0.4, 10));
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(verdicts(&out), ["ok"; 2], "{out}");
    // Around 8.6 with a wide spread: the interval across -10%, exit 4, and how
    // many rounds would tell.
    let (code, out, err) = run("near.csv", rounds("n", 8.6, 2.5, 10));
    assert_eq!(code, Some(4), "{out}{err}");
    for v in verdicts(&out) {
        assert!(
            v.starts_with("INCONCLUSIVE (busbw: about ")
                && v.ends_with(" rounds a side would resolve it)"),
            "{out}"
        );
    }
    assert!(
        out.contains("2 inconclusive (an interval across the threshold"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn several_files_a_side_are_pooled() {
    let dir = scratch("pooled");
    // Three launches a side, one round each, as `--append` or separate files give.
    let side = |name: &str, busbw: [f64; 3]| -> Vec<PathBuf> {
        busbw
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let path = dir.join(format!("{name}{i}.csv"));
                write(&path, &rounds(&format!("{name}{i}"), *b, 0.0, 1));
                path
            })
            .collect()
    };
    let base = side("base", [10.0, 10.3, 9.8]);
    let slow = side("slow", [7.4, 7.6, 7.5]);
    let mut args: Vec<&Path> = base.iter().map(PathBuf::as_path).collect();
    let vs: Vec<&str> = slow
        .iter()
        .flat_map(|p| ["--vs", p.to_str().unwrap()])
        .collect();
    let flags = [&["--threshold", "10"][..], &vs].concat();
    let (code, out, err) = compare(&args, &flags);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains("# baseline base0+base1+base2, candidate slow0+slow1+slow2"),
        "{out}"
    );
    assert!(out.contains("3/3"), "{out}");
    assert_eq!(verdicts(&out), ["REGRESSED (busbw)"; 2], "{out}");
    // The same three runs appended to one file: the same table.
    let appended = dir.join("appended.csv");
    write(
        &appended,
        &slow
            .iter()
            .flat_map(|p| fabricbench::report::csv::read_rows(p).unwrap())
            .collect::<Vec<_>>(),
    );
    let (code, again, _) = compare(
        &args,
        &["--threshold", "10", "--vs", appended.to_str().unwrap()],
    );
    assert_eq!(code, Some(1));
    let table = |o: &str| {
        o.lines()
            .filter(|l| l.starts_with("  "))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(table(&again), table(&out));
    // A baseline alone is a usage error naming both forms.
    args.truncate(1);
    let (code, _, err) = compare(&args, &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--vs CAND1.csv --vs CAND2.csv"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn too_few_rounds_are_judged_on_medians_and_say_so() {
    let dir = scratch("few");
    let (base, cand) = (dir.join("base.csv"), dir.join("cand.csv"));
    // Two rounds a side that overlap: no interval, the medians decide, said once.
    write(&base, &rounds("b", 10.0, 0.5, 2));
    write(&cand, &rounds("c", 9.8, 0.5, 2));
    let (code, out, err) = compare(&[&base, &cand], &["--threshold", "10"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(
        out.matches("# noise not estimated for 2 rows: fewer than 3 samples a side (use --rounds 3 or several runs per side)").count(),
        1,
        "{out}"
    );
    assert!(out.contains("2/2") && out.contains("  -  "), "{out}");
    // The one-run case is unchanged but for that line.
    write(&base, &rounds("b", 10.0, 0.0, 1));
    write(&cand, &rounds("c", 8.5, 0.0, 1));
    let (code, out, _) = compare(&[&base, &cand], &["--threshold", "10"]);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(verdicts(&out), ["REGRESSED (busbw)"; 2], "{out}");
    assert!(
        out.contains("# noise not estimated: one run per side"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// fabricbench-stats, as the benchmark scripts call it: figures in files, the
/// line they parse, and the exit status they branch on.
#[test]
fn fabricbench_stats_judges_figures_of_any_program() {
    let dir = scratch("stats");
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let ours = file("ours", "9.0 9.1 8.9 9.05 8.95\n");
    let peer = file("peer", "10.0\n10.1\n9.9\n10.05\n9.95\n");
    let two = file("two", "10 11");
    let bad = file("bad", "10 inf 11");
    let stats = |args: &[&Path], band: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_fabricbench-stats"))
            .args(["--band", band])
            .args(args)
            .output()
            .unwrap();
        let (stdout, stderr) = common::text(&out);
        (out.status.code(), stdout, stderr)
    };
    let (code, line, _) = stats(&[&ours, &peer], "0.95:1.05");
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        (code, words[0], words[3], words[4]),
        (Some(1), "0.900000", "below", "5"),
        "{line}"
    );
    assert_eq!(stats(&[&ours, &peer], "0.85:1.05").0, Some(0));
    let (code, line, _) = stats(&[&ours, &peer], "0.89:1.05");
    assert_eq!(code, Some(4), "{line}");
    assert!(line.contains(" unresolved 5 "), "{line}");
    let (code, line, stderr) = stats(&[&ours, &two], "0.5:");
    assert_eq!(code, Some(4));
    assert!(line.contains("NaN NaN not-judged 2 -"), "{line}");
    assert!(stderr.contains("at least 3 a side"), "{stderr}");
    let (code, _, stderr) = stats(&[&ours, &bad], "0.5:");
    assert_eq!(code, Some(2));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("'inf' is not a figure"), "{stderr}");
    let (code, _, stderr) = stats(&[&ours, &peer, &ours], "0.5:");
    assert_eq!(code, Some(2), "{stderr}");
}
