//! Checks against results: a spec check reads its test's CSV (rows of
//! `report::Row`, or the all-pairs matrices) and passes or fails with the value
//! it measured, the threshold, and which nodes or pairs failed.

use super::check::{Check, CheckKind, Threshold};
use super::steps::{file_name, TestStep};
use crate::allpairs::{read_csv as read_pairs, PairResults, Thresholds};
use crate::cli::shown;
use crate::report::csv::read_rows;
use crate::report::{Placement, Row};
use crate::sizes::human_bytes;
use crate::sysfs::counters::Class;
use std::path::Path;

#[derive(Clone, Debug, PartialEq)]
pub struct CheckResult {
    pub label: String,
    pub measured: String,
    pub threshold: String,
    pub passed: bool,
    /// Why it failed, naming nodes, ranks or pairs; notes on a pass.
    pub details: Vec<String>,
}

impl CheckResult {
    fn failed(check: &Check, threshold: String, why: String) -> CheckResult {
        CheckResult {
            label: check.label.clone(),
            measured: "-".into(),
            threshold,
            passed: false,
            details: vec![why],
        }
    }
}

fn describe(min: &Option<Threshold>, max: &Option<Threshold>) -> String {
    let mut parts = Vec::new();
    if let Some(t) = min {
        parts.push(format!(">= {}", t.text));
    }
    if let Some(t) = max {
        parts.push(format!("<= {}", t.text));
    }
    parts.join(" and ")
}

/// What a check asks, in words: ">= 40 GB/s", "retransmits <= 0", ...
pub fn threshold_text(check: &Check) -> String {
    match &check.kind {
        CheckKind::Row { min, max, .. } => describe(min, max),
        CheckKind::Counters { max, .. } => counters_threshold(max),
        CheckKind::AllPairs(t) => pairs_threshold(t),
    }
}

/// A check whose test did not finish with its results: not judged, so failed,
/// whatever rows a partial run left behind.
pub fn not_run(check: &Check, test: &TestStep) -> CheckResult {
    CheckResult::failed(
        check,
        threshold_text(check),
        format!(
            "not judged: test {} did not finish with its results ({}; see {})",
            test.name,
            test.status(),
            file_name(&test.outcome.log)
        ),
    )
}

/// Evaluates one check from the CSV its test wrote.
pub fn evaluate(check: &Check, csv: &Path) -> CheckResult {
    let no_results = |e: anyhow::Error| {
        CheckResult::failed(
            check,
            threshold_text(check),
            format!("no results to check: {e:#}"),
        )
    };
    match &check.kind {
        CheckKind::Row { .. } => match read_rows(csv) {
            Ok(rows) => evaluate_rows(check, &rows),
            Err(e) => no_results(e),
        },
        // An all-pairs test writes its matrices, with the counters of each pair's round.
        CheckKind::Counters { max, .. } => match read_rows(csv) {
            Ok(rows) => evaluate_counters(check, &rows),
            Err(e) => match read_pairs(csv) {
                Ok(results) => evaluate_pair_counters(check, max, &results),
                Err(_) => no_results(e),
            },
        },
        CheckKind::AllPairs(t) => match read_pairs(csv) {
            Ok(results) => evaluate_pairs(check, t, &results),
            Err(e) => no_results(e),
        },
    }
}

/// The rows at the check's size: the CSV's size closest to it, within 1% (the
/// collectives that split a buffer across ranks round sizes down a little).
fn rows_at(rows: &[Row], size: u64, placement: Placement) -> Vec<&Row> {
    let distance = |r: &Row| r.size_bytes.abs_diff(size);
    let candidates: Vec<&Row> = rows
        .iter()
        .filter(|r| r.placement == placement.name() && distance(r) <= size / 100)
        .collect();
    let best = candidates.iter().map(|r| distance(r)).min();
    candidates
        .into_iter()
        .filter(|r| Some(distance(r)) == best)
        .collect()
}

pub fn evaluate_rows(check: &Check, rows: &[Row]) -> CheckResult {
    let CheckKind::Row {
        metric,
        size,
        placement,
        min,
        max,
    } = &check.kind
    else {
        unreachable!("evaluate_rows is called for row checks")
    };
    let threshold = describe(min, max);
    let at = rows_at(rows, *size, *placement);
    if at.is_empty() {
        let sizes: Vec<String> = rows
            .iter()
            .filter(|r| r.placement == placement.name())
            .map(|r| human_bytes(r.size_bytes))
            .collect();
        return CheckResult::failed(
            check,
            threshold,
            format!(
                "no {} row at {} (measured: {})",
                placement.name(),
                human_bytes(*size),
                if sizes.is_empty() {
                    "nothing".to_string()
                } else {
                    sizes.join(", ")
                }
            ),
        );
    }
    let values: Vec<f64> = at.iter().map(|r| metric.value(r)).collect();
    // The worst row decides (several datatypes, ops or -N cycles may match); a
    // value that is not a number (NaN, inf) is no measurement and is the worst.
    let unmeasured = values.iter().copied().find(|v| !v.is_finite());
    let measured = || values.iter().copied().filter(|v| v.is_finite());
    let low = unmeasured.unwrap_or_else(|| measured().fold(f64::INFINITY, f64::min));
    let high = unmeasured.unwrap_or_else(|| measured().fold(f64::NEG_INFINITY, f64::max));
    let mut details = Vec::new();
    let mut passed = true;
    if let Some(v) = unmeasured {
        passed = false;
        details.push(format!(
            "{} is {v} in {} of {} rows: not a measurement",
            metric.name(),
            values.iter().filter(|v| !v.is_finite()).count(),
            values.len()
        ));
    }
    if let Some(t) = min.as_ref().filter(|t| low.is_finite() && low < t.value) {
        passed = false;
        details.push(format!(
            "{} {low:.3} {} is below {:.3}",
            metric.name(),
            metric.unit(),
            t.value
        ));
    }
    if let Some(t) = max.as_ref().filter(|t| high.is_finite() && high > t.value) {
        passed = false;
        details.push(format!(
            "{} {high:.3} {} is above {:.3}",
            metric.name(),
            metric.unit(),
            t.value
        ));
    }
    let wrong: u64 = at.iter().filter_map(|r| r.wrong).sum();
    if wrong > 0 {
        passed = false;
        details.push(format!("{wrong} wrong elements: the data is corrupted"));
    }
    if !passed {
        let worst = if min.is_some() { low } else { high };
        let is_worst = |v: f64| v == worst || (v.is_nan() && worst.is_nan());
        if let Some(r) = at.iter().find(|r| is_worst(metric.value(r))) {
            details.push(format!(
                "slowest rank {} of {} on {}",
                r.slowest_rank,
                r.nranks,
                r.hosts.replace(';', ", ")
            ));
        }
    }
    let shown = if values.len() == 1 || min.is_some() {
        low
    } else {
        high
    };
    CheckResult {
        label: check.label.clone(),
        measured: format!(
            "{shown:.3} {}{}",
            metric.unit(),
            if values.len() > 1 {
                format!(" (worst of {} rows)", values.len())
            } else {
                String::new()
            }
        ),
        threshold,
        passed,
        details,
    }
}

fn counters_threshold(max: &[(Class, u64)]) -> String {
    let parts: Vec<String> = max
        .iter()
        .map(|(c, v)| format!("{} <= {v}", c.name()))
        .collect();
    parts.join(", ")
}

/// A row's sum of `class` (None where the run read no counters).
fn class_value(row: &Row, class: Class) -> Option<u64> {
    match class {
        Class::Errors => row.counter_errors,
        Class::Retransmits => row.counter_retransmits,
        Class::Congestion => row.counter_congestion,
        Class::Pauses => row.counter_pauses,
        _ => None,
    }
}

/// What to look at when a class moved.
fn counters_hint(class: Class) -> &'static str {
    match class {
        Class::Errors => "link or receive errors: doctor's port-errors, the cables (mlxlink, ibdiagnet)",
        Class::Retransmits => "packets lost or reordered: PFC/ECN on RoCE, a lossy link, or a QP timeout (-u) too short",
        Class::Congestion => "ECN marks and CNPs: the fabric is congested; check the switch buffers and the ECN/DCQCN settings",
        Class::Pauses => "PFC or link pauses: a receiver or switch could not keep up; check the PFC priority and the buffers",
        _ => "",
    }
}

/// Counter thresholds: each class summed over the test's sizes (a size's
/// counters are on both its placements' rows: counted once).
pub fn evaluate_counters(check: &Check, rows: &[Row]) -> CheckResult {
    let CheckKind::Counters { size, max } = &check.kind else {
        unreachable!("evaluate_counters is called for counter checks")
    };
    let threshold = counters_threshold(max);
    let mut seen = std::collections::BTreeSet::new();
    let sizes: Vec<&Row> = rows
        .iter()
        .filter(|r| size.is_none_or(|s| r.size_bytes.abs_diff(s) <= s / 100))
        .filter(|r| {
            seen.insert((
                r.collective.clone(),
                r.datatype.clone(),
                r.redop.clone(),
                r.root,
                r.size_bytes,
                r.cycle,
                r.pair.clone(),
            ))
        })
        .collect();
    if sizes.is_empty() {
        return CheckResult::failed(check, threshold, "no rows at that size".into());
    }
    let mut details = Vec::new();
    let mut measured = Vec::new();
    let mut passed = true;
    for &(class, limit) in max {
        let values: Vec<(u64, Option<u64>)> = sizes
            .iter()
            .map(|r| (r.size_bytes, class_value(r, class)))
            .collect();
        if values.iter().any(|(_, v)| v.is_none()) {
            passed = false;
            measured.push(format!("{} not read", class.name()));
            details.push(format!(
                "{}: the CSV has no counter columns for some sizes (the run read no fabric counters); \
                 rerun the test with this fabricbench",
                class.name()
            ));
            continue;
        }
        let total: u64 = values.iter().filter_map(|(_, v)| *v).sum();
        measured.push(format!("{} {total}", class.name()));
        if total > limit {
            passed = false;
            let moved: Vec<String> = values
                .iter()
                .filter(|(_, v)| v.is_some_and(|v| v > 0))
                .take(8)
                .map(|(s, v)| format!("{} (+{})", human_bytes(*s), v.unwrap_or(0)))
                .collect();
            details.push(format!(
                "{} {total} is above {limit}: moved during {}; {}",
                class.name(),
                moved.join(", "),
                counters_hint(class)
            ));
        }
    }
    CheckResult {
        label: check.label.clone(),
        measured: format!("{} over {} sizes", measured.join(", "), sizes.len()),
        threshold,
        passed,
        details,
    }
}

/// A counters check on an all-pairs test: each class summed over the pairs of
/// the matrix CSV (a pair's cell holds its two nodes' deltas over its round),
/// failing with the pairs whose round moved it.
pub fn evaluate_pair_counters(
    check: &Check,
    max: &[(Class, u64)],
    results: &PairResults,
) -> CheckResult {
    let threshold = counters_threshold(max);
    let mut details = Vec::new();
    let mut measured = Vec::new();
    let mut passed = true;
    let mut pairs = 0;
    for &(class, limit) in max {
        let column = results
            .counters
            .iter()
            .find(|(c, _)| c.class() == Some(class));
        let Some((_, matrix)) = column else {
            passed = false;
            measured.push(format!("{} not read", class.name()));
            details.push(format!(
                "{}: the matrix CSV has no counter columns (the run read no fabric counters); \
                 rerun the test with this fabricbench",
                class.name()
            ));
            continue;
        };
        let moved = matrix.pairs();
        pairs = moved.len();
        let total: u64 = moved.iter().map(|&(_, _, v)| v as u64).sum();
        measured.push(format!("{} {total}", class.name()));
        if total > limit {
            passed = false;
            let named: Vec<String> = moved
                .iter()
                .filter(|&&(_, _, v)| v > 0.0)
                .take(8)
                .map(|&(a, b, v)| {
                    format!(
                        "{} <-> {} (+{})",
                        results.labels[a], results.labels[b], v as u64
                    )
                })
                .collect();
            details.push(format!(
                "{} {total} is above {limit}: moved during the rounds of pairs {}; {}",
                class.name(),
                named.join(", "),
                counters_hint(class)
            ));
        }
    }
    CheckResult {
        label: check.label.clone(),
        measured: format!("{} over {pairs} pairs", measured.join(", ")),
        threshold,
        passed,
        details,
    }
}

fn pairs_threshold(t: &Thresholds) -> String {
    format!(
        "every pair >= {} x median algbw and <= {} x lowest median time",
        shown(t.bw_fraction),
        shown(t.latency_factor)
    )
}

pub fn evaluate_pairs(check: &Check, t: &Thresholds, results: &PairResults) -> CheckResult {
    let verdict = results.judge(t);
    let n = results.labels.len();
    let mut details = verdict.lines(&results.labels, t);
    // A NaN compares false with every threshold: the judging would pass it.
    let unmeasured = results
        .sizes
        .iter()
        .flat_map(|s| {
            [&s.time_us, &s.p50_us, &s.algbw_gbs]
                .into_iter()
                .chain(&s.wrong_bytes)
        })
        .flat_map(|m| m.pairs())
        .filter(|p| !p.2.is_finite())
        .count();
    if unmeasured > 0 {
        details.insert(
            0,
            format!("{unmeasured} pair figures are NaN or inf: not a measurement"),
        );
    }
    CheckResult {
        label: check.label.clone(),
        measured: format!(
            "{} pairs of {n} nodes: {}, {}",
            n * n.saturating_sub(1) / 2,
            verdict.bandwidth(human_bytes),
            verdict.latency(human_bytes)
        ),
        threshold: pairs_threshold(t),
        passed: verdict.passed() && unmeasured == 0,
        details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rack::spec::Spec;

    fn row(size: u64, placement: &str, busbw: f64, time: f64) -> Row {
        Row {
            size_bytes: size,
            placement: placement.into(),
            busbw_gbs: busbw,
            time_us: time,
            wrong: Some(0),
            nranks: 4,
            hosts: "a;b".into(),
            slowest_rank: 3,
            ..Row::default()
        }
    }

    fn checks() -> Vec<Check> {
        Spec::parse(
            r#"
name = "t"
[launch]
[[test]]
name = "ar"
binary = "all_reduce_perf"
[[check]]
test = "ar"
metric = "busbw"
size = "1M"
min = "80% of ib-ndr"
[[check]]
test = "ar"
metric = "time"
size = "8"
max = 10
"#,
        )
        .unwrap()
        .checks
    }

    #[test]
    fn thresholds_pass_and_fail() {
        let c = checks();
        let rows = vec![
            row(8, "out-of-place", 0.0, 4.0),
            row(8, "in-place", 0.0, 40.0),
            row(1 << 20, "out-of-place", 41.0, 30.0),
        ];
        let r = evaluate_rows(&c[0], &rows);
        assert!(r.passed, "{r:?}");
        assert_eq!(r.measured, "41.000 GB/s");
        assert!(r.threshold.starts_with(">= 40.000 GB/s (80% of ib-ndr"));
        // In-place at 8 B is slow, but the check reads out-of-place.
        assert!(evaluate_rows(&c[1], &rows).passed);
        let slow = vec![row(1 << 20, "out-of-place", 39.9, 30.0)];
        let r = evaluate_rows(&c[0], &slow);
        assert!(!r.passed);
        assert_eq!(
            r.details,
            vec![
                "busbw 39.900 GB/s is below 40.000".to_string(),
                "slowest rank 3 of 4 on a, b".to_string()
            ]
        );
        let r = evaluate_rows(&c[1], &[row(8, "out-of-place", 0.0, 10.5)]);
        assert!(!r.passed);
        assert_eq!(r.details[0], "time 10.500 us is above 10.000");
    }

    #[test]
    fn the_worst_row_decides_and_wrong_data_fails() {
        let c = checks();
        let mut rows = vec![
            row(1 << 20, "out-of-place", 45.0, 1.0),
            row(1 << 20, "out-of-place", 30.0, 1.0),
        ];
        let r = evaluate_rows(&c[0], &rows);
        assert!(!r.passed);
        assert_eq!(r.measured, "30.000 GB/s (worst of 2 rows)");
        rows[1].busbw_gbs = 45.0;
        rows[1].wrong = Some(7);
        let r = evaluate_rows(&c[0], &rows);
        assert!(!r.passed);
        assert_eq!(r.details[0], "7 wrong elements: the data is corrupted");
    }

    #[test]
    fn missing_sizes_fail_with_what_was_measured() {
        let c = checks();
        // 3 ranks round 1 MiB down to 1048560 B: still the 1 MiB row.
        assert!(evaluate_rows(&c[0], &[row(1048560, "out-of-place", 45.0, 1.0)]).passed);
        let r = evaluate_rows(&c[0], &[row(512 << 10, "out-of-place", 45.0, 1.0)]);
        assert!(!r.passed);
        assert_eq!(
            r.details,
            vec!["no out-of-place row at 1 MiB (measured: 512 KiB)".to_string()]
        );
    }

    /// NaN compares false with every threshold, and an endless busbw passes any
    /// minimum: neither is a measurement, and neither passes a check.
    #[test]
    fn a_value_that_is_no_number_never_passes() {
        let c = checks();
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let rows = [
                row(1 << 20, "out-of-place", 45.0, 1.0),
                row(1 << 20, "out-of-place", bad, 1.0),
            ];
            let r = evaluate_rows(&c[0], &rows);
            assert!(!r.passed, "{bad}: {r:?}");
            assert_eq!(r.measured, format!("{bad:.3} GB/s (worst of 2 rows)"));
            assert_eq!(
                r.details[0],
                format!("busbw is {bad} in 1 of 2 rows: not a measurement")
            );
            assert_eq!(r.details[1], "slowest rank 3 of 4 on a, b");
            let r = evaluate_rows(&c[1], &[row(8, "out-of-place", 1.0, bad)]);
            assert!(!r.passed, "{bad}: {r:?}");
            assert_eq!(
                r.details[0],
                format!("time is {bad} in 1 of 1 rows: not a measurement")
            );
        }
    }

    /// The all-pairs judging compares with a median: a matrix of NaN has a NaN
    /// median, no pair below it, and would pass.
    #[test]
    fn pairs_that_are_no_number_fail() {
        use crate::allpairs::{Matrix, SizeMatrices};
        let check = Check {
            label: "pairs all pairs".into(),
            test: "pairs".into(),
            kind: CheckKind::AllPairs(Thresholds::default()),
        };
        let mut size = SizeMatrices::empty(1 << 30, 2, true);
        size.algbw_gbs = Matrix::empty(2);
        size.algbw_gbs.set(0, 1, f64::NAN);
        size.p50_us.set(0, 1, 5.0);
        size.time_us.set(0, 1, 5.0);
        size.wrong_bytes.as_mut().unwrap().set(0, 1, 0.0);
        let results = PairResults {
            labels: vec!["a".into(), "b".into()],
            sizes: vec![size],
            counters: Vec::new(),
        };
        let r = evaluate_pairs(&check, &Thresholds::default(), &results);
        assert!(!r.passed, "{r:?}");
        assert_eq!(
            r.details[0],
            "1 pair figures are NaN or inf: not a measurement"
        );
    }

    fn counter_row(size: u64, placement: &str, retransmits: Option<u64>) -> Row {
        Row {
            collective: "all_reduce".into(),
            size_bytes: size,
            placement: placement.into(),
            counter_errors: retransmits.map(|_| 0),
            counter_retransmits: retransmits,
            counter_congestion: retransmits.map(|_| 3),
            counter_pauses: retransmits.map(|_| 0),
            ..Row::default()
        }
    }

    fn counter_check(limits: &str) -> Check {
        let text = format!(
            "name = \"t\"\n[launch]\n[[test]]\nname = \"ar\"\nbinary = \"all_reduce_perf\"\n\
             [[check]]\ntest = \"ar\"\nmetric = \"counters\"\n{limits}\n"
        );
        Spec::parse(&text).unwrap().checks.remove(0)
    }

    #[test]
    fn counter_thresholds_sum_each_size_once() {
        let clean = counter_check("max_retransmits = 0\nmax_errors = 0");
        assert_eq!(
            clean.label,
            "ar fabric counters errors <= 0, retransmits <= 0 over every size"
        );
        let rows = vec![
            counter_row(8, "out-of-place", Some(0)),
            counter_row(8, "in-place", Some(0)),
            counter_row(1 << 20, "out-of-place", Some(0)),
            counter_row(1 << 20, "in-place", Some(0)),
        ];
        let r = evaluate_counters(&clean, &rows);
        assert!(r.passed, "{r:?}");
        assert_eq!(r.measured, "errors 0, retransmits 0 over 2 sizes");
        // 12 retransmits during 1 MiB: on both its rows, counted once.
        let lossy = vec![
            counter_row(8, "out-of-place", Some(0)),
            counter_row(8, "in-place", Some(0)),
            counter_row(1 << 20, "out-of-place", Some(12)),
            counter_row(1 << 20, "in-place", Some(12)),
        ];
        let r = evaluate_counters(&clean, &lossy);
        assert!(!r.passed);
        assert_eq!(r.measured, "errors 0, retransmits 12 over 2 sizes");
        assert_eq!(r.details.len(), 1, "{r:?}");
        assert!(
            r.details[0]
                .starts_with("retransmits 12 is above 0: moved during 1 MiB (+12); packets lost"),
            "{}",
            r.details[0]
        );
        // At one size, and a limit above what moved.
        let at_8 = counter_check("max_retransmits = 0\nsize = \"8\"");
        assert!(evaluate_counters(&at_8, &lossy).passed);
        assert!(evaluate_counters(&counter_check("max_congestion = 6"), &lossy).passed);
        assert!(!evaluate_counters(&counter_check("max_congestion = 5"), &lossy).passed);
        // A CSV without counter columns is never a pass.
        let old = vec![counter_row(8, "out-of-place", None)];
        let r = evaluate_counters(&clean, &old);
        assert!(
            !r.passed && r.details[0].contains("the run read no fabric counters"),
            "{r:?}"
        );
    }

    fn pair_check() -> Check {
        Check {
            label: "pairs fabric counters retransmits <= 0 over every pair's round".into(),
            test: "pairs".into(),
            kind: CheckKind::Counters {
                size: None,
                max: vec![(Class::Retransmits, 0), (Class::Errors, 0)],
            },
        }
    }

    #[test]
    fn the_pairs_whose_round_moved_a_class_fail_it() {
        let mut retransmits = crate::allpairs::Matrix::empty(3);
        retransmits.set(0, 1, 7.0);
        retransmits.set(0, 2, 0.0);
        retransmits.set(1, 2, 0.0);
        let mut errors = crate::allpairs::Matrix::empty(3);
        for (a, b) in [(0, 1), (0, 2), (1, 2)] {
            errors.set(a, b, 0.0);
        }
        let results = PairResults {
            labels: ["a", "b", "c"].map(String::from).to_vec(),
            sizes: Vec::new(),
            counters: vec![
                (crate::report::counters::Column::Errors, errors),
                (crate::report::counters::Column::Retransmits, retransmits),
            ],
        };
        let CheckKind::Counters { max, .. } = pair_check().kind else {
            unreachable!()
        };
        let r = evaluate_pair_counters(&pair_check(), &max, &results);
        assert!(!r.passed);
        assert_eq!(r.measured, "retransmits 7, errors 0 over 3 pairs");
        assert_eq!(r.details.len(), 1, "{:?}", r.details);
        assert!(
            r.details[0].starts_with(
                "retransmits 7 is above 0: moved during the rounds of pairs a <-> b (+7); packets lost"
            ),
            "{}",
            r.details[0]
        );
        // An older matrix CSV, without the counters: never a pass.
        let bare = PairResults {
            counters: Vec::new(),
            ..results
        };
        let r = evaluate_pair_counters(&pair_check(), &max, &bare);
        assert!(!r.passed && r.measured == "retransmits not read, errors not read over 0 pairs");
    }

    #[test]
    fn a_counters_check_on_an_all_pairs_test_spans_the_rounds() {
        let spec = |check: &str| {
            format!(
                "name = \"r\"\n[launch]\nnodes = 2\nranks_per_node = 1\n[[test]]\nname = \"pairs\"\n\
                 binary = \"sendrecv_perf\"\nargs = [\"--all-pairs\"]\n[[check]]\ntest = \"pairs\"\n\
                 metric = \"counters\"\nmax_retransmits = 0\n{check}"
            )
        };
        let s = crate::rack::spec::Spec::parse(&spec("")).unwrap();
        assert_eq!(
            s.checks[0].label,
            "pairs fabric counters retransmits <= 0 over every pair's round"
        );
        let e = crate::rack::spec::Spec::parse(&spec("size = \"1M\"")).unwrap_err();
        assert!(
            e.ends_with(
                "size with test 'pairs': an all-pairs test reads the counters around each \
                 pair's round, which spans every size; drop size"
            ),
            "{e}"
        );
    }
}
