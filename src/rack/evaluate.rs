//! Checks against results: a spec check reads its test's CSV (rows of
//! `report::Row`, or the all-pairs matrices) and passes or fails with the value
//! it measured, the threshold, and which nodes or pairs failed.

use super::check::{Check, CheckKind, Threshold};
pub use super::check_result::{CheckResult, Rounds, Verdict};
use super::steps::{file_name, TestStep};
use crate::allpairs::alone::{judge_launches, Judged};
use crate::allpairs::{read_csv as read_pairs, PairResults, Thresholds};
use crate::cli::shown;
use crate::report::csv::read_rows;
use crate::report::{Placement, Row};
use crate::sizes::human_bytes;
use crate::stats::interval::{Estimate, Side, MIN_SAMPLES};
use crate::sysfs::counters::Class;
use std::path::PathBuf;

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

/// Evaluates one check from the CSVs its test wrote, one per round (the
/// first round's first). Row and all-pairs checks are judged on all rounds
/// (all-pairs with each round's re-measurements alone); counters checks on the
/// first round's CSV.
/// `remeasured`: how many of the rounds were re-measures.
pub fn evaluate(check: &Check, csvs: &[PathBuf], remeasured: usize) -> CheckResult {
    let no_results = |e: anyhow::Error| {
        CheckResult::failed(
            check,
            threshold_text(check),
            format!("no results to check: {e:#}"),
        )
    };
    let Some(first) = csvs.first() else {
        return CheckResult::failed(check, threshold_text(check), "no round ran".into());
    };
    match &check.kind {
        CheckKind::Row { .. } => match csvs
            .iter()
            .map(|c| read_rows(c))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(rounds) => evaluate_rows(check, &rounds, remeasured),
            Err(e) => no_results(e),
        },
        // An all-pairs test writes its matrices, with the counters of each pair's round.
        CheckKind::Counters { max, .. } => match read_rows(first) {
            Ok(rows) => evaluate_counters(check, &rows),
            Err(e) => match read_pairs(first) {
                Ok(results) => evaluate_pair_counters(check, max, &results),
                Err(_) => no_results(e),
            },
        },
        CheckKind::AllPairs(t) => match judge_launches(csvs, t) {
            Ok(judged) => evaluate_pairs(check, t, &judged),
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

/// One round of a row check: its figure (the worst of the rows at the size:
/// several datatypes, ops or -N cycles may match), or what makes it no
/// measurement at all.
struct RoundFigure {
    low: f64,
    high: f64,
    rows: usize,
    /// "slowest rank 3 of 4 on a, b" of the worst row, for each side.
    slowest_low: String,
    slowest_high: String,
}

fn round_figure(check: &Check, rows: &[Row]) -> Result<RoundFigure, Vec<String>> {
    let CheckKind::Row {
        metric,
        size,
        placement,
        ..
    } = &check.kind
    else {
        unreachable!("round_figure is called for row checks")
    };
    let at = rows_at(rows, *size, *placement);
    if at.is_empty() {
        let sizes: Vec<String> = rows
            .iter()
            .filter(|r| r.placement == placement.name())
            .map(|r| human_bytes(r.size_bytes))
            .collect();
        return Err(vec![format!(
            "no {} row at {} (measured: {})",
            placement.name(),
            human_bytes(*size),
            if sizes.is_empty() {
                "nothing".to_string()
            } else {
                sizes.join(", ")
            }
        )]);
    }
    let values: Vec<f64> = at.iter().map(|r| metric.value(r)).collect();
    let slowest = |pick: &dyn Fn(f64, f64) -> bool| {
        let worst = at
            .iter()
            .copied()
            .reduce(|w, r| match pick(metric.value(r), metric.value(w)) {
                true => r,
                false => w,
            })
            .expect("rows at the size");
        slowest_rank(worst)
    };
    let mut problems = Vec::new();
    // A value that is not a number (NaN, inf) is no measurement.
    let unmeasured = values.iter().filter(|v| !v.is_finite()).count();
    if unmeasured > 0 {
        let bad = values.iter().find(|v| !v.is_finite()).expect("counted");
        problems.push(format!(
            "{} is {bad} in {unmeasured} of {} rows: not a measurement",
            metric.name(),
            values.len()
        ));
        problems.push(slowest(&|v, _| !v.is_finite()));
    }
    let wrong: u64 = at.iter().filter_map(|r| r.wrong).sum();
    if wrong > 0 {
        problems.push(format!("{wrong} wrong elements: the data is corrupted"));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(RoundFigure {
        low: values.iter().copied().fold(f64::INFINITY, f64::min),
        high: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        rows: values.len(),
        slowest_low: slowest(&|v, w| v < w),
        slowest_high: slowest(&|v, w| v > w),
    })
}

/// The slowest rank of a row, and where to look. Its host is named only where
/// the row tells it (one node); in a collective of more than two ranks every
/// rank waits on the slowest link, so the slowest rank may be that link's
/// victim on another node: all-pairs, which times each pair alone, names the node.
fn slowest_rank(row: &Row) -> String {
    let hosts: Vec<&str> = row.hosts.split(';').filter(|h| !h.is_empty()).collect();
    let rank = format!("slowest rank {} of {}", row.slowest_rank, row.nranks);
    match hosts[..] {
        [one] => format!("{rank} on {one}"),
        _ if row.nranks > 2 => format!(
            "{rank}, on one of {} nodes; in {} every rank waits on the slowest link, so the \
             slowest rank may be its victim: all-pairs (sendrecv_perf --all-pairs) names the node",
            hosts.len(),
            row.collective
        ),
        _ => format!("{rank}, between {}", hosts.join(" and ")),
    }
}

/// A row check over rounds (one set of rows per round): each round's worst
/// row is a sample; PASS when the 95% interval of their median is wholly on
/// the right side of every threshold, FAIL when wholly on the wrong side of
/// one, INCONCLUSIVE when it lies across one or there are too few rounds to
/// estimate the noise. A round with wrong data or no measurement fails it.
pub fn evaluate_rows(check: &Check, rounds: &[Vec<Row>], remeasured: usize) -> CheckResult {
    let CheckKind::Row {
        metric, min, max, ..
    } = &check.kind
    else {
        unreachable!("evaluate_rows is called for row checks")
    };
    let threshold = describe(min, max);
    let mut figures = Vec::new();
    for (i, rows) in rounds.iter().enumerate() {
        match round_figure(check, rows) {
            Ok(f) => figures.push(f),
            Err(problems) => {
                let mut r = CheckResult::failed(check, threshold, String::new());
                r.details = problems
                    .into_iter()
                    .map(|p| match rounds.len() {
                        1 => p,
                        _ => format!("round {}: {p}", i + 1),
                    })
                    .collect();
                return r;
            }
        }
    }
    // Each side judged on its own figures: the lowest row against a minimum,
    // the highest against a maximum.
    let sides = [
        min.as_ref().map(|t| {
            let lows: Vec<f64> = figures.iter().map(|f| f.low).collect();
            (Estimate::median_of(&lows), t, Side::Below, "below")
        }),
        max.as_ref().map(|t| {
            let highs: Vec<f64> = figures.iter().map(|f| f.high).collect();
            (Estimate::median_of(&highs), t, Side::Above, "above")
        }),
    ];
    let judged: Vec<(Verdict, Estimate, &Threshold, &str)> = sides
        .into_iter()
        .flatten()
        .map(|(e, t, wrong, word)| {
            let side = match wrong {
                Side::Below => e.against(t.value, f64::INFINITY),
                _ => e.against(f64::NEG_INFINITY, t.value),
            };
            let verdict = match side {
                _ if e.interval.is_none() => Verdict::Inconclusive,
                Side::Inside => Verdict::Pass,
                Side::Straddles => Verdict::Inconclusive,
                _ => Verdict::Fail,
            };
            (verdict, e, t, word)
        })
        .collect();
    // The deciding side: a failing one, else an inconclusive one, else the first.
    let (verdict, estimate, edge, word) = judged
        .iter()
        .find(|j| j.0 == Verdict::Fail)
        .or_else(|| judged.iter().find(|j| j.0 == Verdict::Inconclusive))
        .or(judged.first())
        .copied()
        .expect("a row check has min or max");
    let rounds = Rounds {
        estimate,
        unit: metric.unit(),
        edge: edge.value,
        remeasured,
    };
    let mut details = Vec::new();
    match verdict {
        Verdict::Pass => {}
        Verdict::Fail => {
            details.push(format!(
                "{} {}: wholly {word} {}",
                metric.name(),
                rounds.text(),
                shown(edge.value)
            ));
            // The round whose figure is the median's (or nearest it) names the rank.
            let nearest = figures
                .iter()
                .min_by(|a, b| {
                    let v = |f: &RoundFigure| if word == "below" { f.low } else { f.high };
                    (v(a) - estimate.value)
                        .abs()
                        .total_cmp(&(v(b) - estimate.value).abs())
                })
                .expect("rounds");
            details.push(match word {
                "below" => nearest.slowest_low.clone(),
                _ => nearest.slowest_high.clone(),
            });
        }
        Verdict::Inconclusive => details.push(inconclusive_note(&rounds, metric.name())),
    }
    let worst_of = match figures.iter().map(|f| f.rows).max() {
        Some(n) if n > 1 => format!(" (worst of {n} rows each round)"),
        _ => String::new(),
    };
    CheckResult {
        label: check.label.clone(),
        measured: format!("{}{worst_of}", rounds.text()),
        threshold,
        verdict,
        details,
        rounds: Some(rounds),
        suspects: Vec::new(),
    }
}

/// Why a figure could not be judged, and what would tell.
fn inconclusive_note(r: &Rounds, metric: &str) -> String {
    if r.estimate.interval.is_none() {
        return format!(
            "{metric}: {} rounds are too few to estimate the noise (at least {MIN_SAMPLES}); \
             give [rounds] count = {MIN_SAMPLES} or more",
            r.estimate.rounds
        );
    }
    let more = match r.to_resolve() {
        Some(n) => format!("about {n} rounds would resolve it"),
        None => "the median is on the threshold: no number of rounds resolves it".into(),
    };
    format!(
        "{metric} {}: the interval lies across {}; {more}",
        r.text(),
        shown(r.edge)
    )
}

/// How far above every other pair a node's pairs must have moved a counter
/// for the node to be named: a lossy link's retransmits are hundreds of times
/// its neighbours' on the virtual rack, where a loaded host's noise is a few.
const STANDOUT: f64 = 10.0;

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
        verdict: Verdict::of(passed),
        details,
        rounds: None,
        suspects: Vec::new(),
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
    let mut suspects = Vec::new();
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
            if let Some(node) = matrix.standout(STANDOUT) {
                let why = format!(
                    "{} is at one end of every pair whose rounds moved {} most, each at least \
                     {STANDOUT}x any other pair: the suspect",
                    results.labels[node],
                    class.name()
                );
                details.push(why.clone());
                suspects.push((results.labels[node].clone(), why));
            }
        }
    }
    CheckResult {
        label: check.label.clone(),
        measured: format!("{} over {pairs} pairs", measured.join(", ")),
        threshold,
        verdict: Verdict::of(passed),
        details,
        rounds: None,
        suspects,
    }
}

fn pairs_threshold(t: &Thresholds) -> String {
    format!(
        "every pair >= {} x median algbw and <= {} x lowest median time",
        shown(t.bw_fraction),
        shown(t.latency_factor)
    )
}

/// An all-pairs check on its test's launches judged together: FAIL on a pair
/// confirmed slow (alone, or over the whole interval of the launches), wrong
/// data or a pair figure that is not a measurement; INCONCLUSIVE when a pair's
/// interval lies across its limit; else PASS.
pub fn evaluate_pairs(check: &Check, t: &Thresholds, judged: &Judged) -> CheckResult {
    let Judged {
        results,
        verdict,
        confirmation,
    } = judged;
    let n = results.labels.len();
    let mut details = verdict.lines(&results.labels, t);
    details.extend(confirmation.lines(&results.labels));
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
    let passed = verdict.passed() && unmeasured == 0;
    CheckResult {
        label: check.label.clone(),
        measured: format!(
            "{} pairs of {n} nodes: {}, {}",
            n * n.saturating_sub(1) / 2,
            verdict.bandwidth(human_bytes),
            verdict.latency(human_bytes)
        ),
        threshold: pairs_threshold(t),
        verdict: match (passed, confirmation.inconclusive()) {
            (false, _) => Verdict::Fail,
            (true, true) => Verdict::Inconclusive,
            (true, false) => Verdict::Pass,
        },
        details,
        rounds: None,
        suspects: Vec::new(),
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
            collective: "all_reduce".into(),
            ..Row::default()
        }
    }

    /// Three rounds of the same rows: a point interval at the figure.
    fn thrice(check: &Check, rows: &[Row]) -> CheckResult {
        evaluate_rows(check, &[rows.to_vec(), rows.to_vec(), rows.to_vec()], 0)
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
        let r = thrice(&c[0], &rows);
        assert!(r.passed(), "{r:?}");
        assert_eq!(
            r.measured,
            "41.000 GB/s, 95% interval 41.000 to 41.000, 3 rounds"
        );
        assert!(r.threshold.starts_with(">= 40.000 GB/s (80% of ib-ndr"));
        // In-place at 8 B is slow, but the check reads out-of-place.
        assert!(thrice(&c[1], &rows).passed());
        let slow = vec![row(1 << 20, "out-of-place", 39.9, 30.0)];
        let r = thrice(&c[0], &slow);
        assert!(!r.passed());
        assert_eq!(
            r.details,
            vec![
                "busbw 39.900 GB/s, 95% interval 39.900 to 39.900, 3 rounds: wholly below 40"
                    .to_string(),
                "slowest rank 3 of 4, on one of 2 nodes; in all_reduce every rank waits on the \
                 slowest link, so the slowest rank may be its victim: all-pairs (sendrecv_perf \
                 --all-pairs) names the node"
                    .to_string()
            ]
        );
        let r = thrice(&c[1], &[row(8, "out-of-place", 0.0, 10.5)]);
        assert!(!r.passed());
        assert!(r.details[0].ends_with("3 rounds: wholly above 10"), "{r:?}");
    }

    #[test]
    fn the_worst_row_decides_and_wrong_data_fails() {
        let c = checks();
        let mut rows = vec![
            row(1 << 20, "out-of-place", 45.0, 1.0),
            row(1 << 20, "out-of-place", 30.0, 1.0),
        ];
        let r = thrice(&c[0], &rows);
        assert!(!r.passed());
        assert!(
            r.measured
                .ends_with("3 rounds (worst of 2 rows each round)"),
            "{r:?}"
        );
        rows[1].busbw_gbs = 45.0;
        rows[1].wrong = Some(7);
        let r = thrice(&c[0], &rows);
        assert!(!r.passed());
        assert_eq!(
            r.details[0],
            "round 1: 7 wrong elements: the data is corrupted"
        );
    }

    #[test]
    fn missing_sizes_fail_with_what_was_measured() {
        let c = checks();
        // 3 ranks round 1 MiB down to 1048560 B: still the 1 MiB row.
        assert!(thrice(&c[0], &[row(1048560, "out-of-place", 45.0, 1.0)]).passed());
        let r = thrice(&c[0], &[row(512 << 10, "out-of-place", 45.0, 1.0)]);
        assert!(!r.passed());
        assert_eq!(
            r.details,
            vec!["round 1: no out-of-place row at 1 MiB (measured: 512 KiB)".to_string()]
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
            let r = thrice(&c[0], &rows);
            assert!(!r.passed(), "{bad}: {r:?}");
            assert_eq!(r.measured, "-");
            assert_eq!(
                r.details[0],
                format!("round 1: busbw is {bad} in 1 of 2 rows: not a measurement")
            );
            assert!(
                r.details[1].starts_with("round 1: slowest rank 3 of 4, on one of 2 nodes; in "),
                "{r:?}"
            );
            let r = thrice(&c[1], &[row(8, "out-of-place", 1.0, bad)]);
            assert!(!r.passed(), "{bad}: {r:?}");
            assert_eq!(
                r.details[0],
                format!("round 1: time is {bad} in 1 of 1 rows: not a measurement")
            );
        }
    }

    /// Rounds with the busbw figures `busbw`, against the 40 GB/s minimum.
    fn judged(busbw: &[f64]) -> CheckResult {
        let rounds: Vec<Vec<Row>> = busbw
            .iter()
            .map(|&b| vec![row(1 << 20, "out-of-place", b, 1.0)])
            .collect();
        evaluate_rows(&checks()[0], &rounds, 2)
    }

    #[test]
    fn the_interval_decides_pass_fail_or_inconclusive() {
        // Wholly above the 40 GB/s minimum, wholly below it, across it.
        let pass = judged(&[44.0, 45.0, 46.0, 45.5, 44.5]);
        assert_eq!(pass.verdict, Verdict::Pass, "{pass:?}");
        let fail = judged(&[20.0, 21.0, 19.0, 20.5, 19.5]);
        assert_eq!(fail.verdict, Verdict::Fail, "{fail:?}");
        assert!(fail.details[0].contains("wholly below 40"), "{fail:?}");
        let open = judged(&[36.0, 44.0, 39.0, 42.0, 41.0]);
        assert_eq!(open.verdict, Verdict::Inconclusive, "{open:?}");
        let r = open.rounds.as_ref().unwrap();
        let i = r.estimate.interval.unwrap();
        assert!(i.lo < 40.0 && 40.0 < i.hi, "{r:?}");
        assert_eq!((r.estimate.rounds, r.remeasured), (5, 2));
        assert!(
            open.measured.ends_with(", 5 rounds (2 re-measured)"),
            "{open:?}"
        );
        let n = r.to_resolve().unwrap();
        assert!(n > 5, "{n}");
        assert!(
            open.details[0].ends_with(&format!(
                "the interval lies across 40; about {n} rounds would resolve it"
            )),
            "{open:?}"
        );
        // A single low round among high ones does not fail the check.
        assert_eq!(
            judged(&[45.0, 46.0, 10.0, 45.5, 44.5, 46.5, 45.2]).verdict,
            Verdict::Pass
        );
    }

    #[test]
    fn too_few_rounds_are_inconclusive_whatever_the_figures() {
        for figures in [&[45.0][..], &[45.0, 46.0], &[10.0, 11.0]] {
            let r = judged(figures);
            assert_eq!(r.verdict, Verdict::Inconclusive, "{r:?}");
            assert!(
                r.details[0].contains("too few to estimate the noise"),
                "{r:?}"
            );
        }
        // ...unless one round is no measurement: that fails.
        let r = judged(&[45.0, f64::NAN]);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
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
            rail: None,
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
        let judged = Judged {
            verdict: results.judge(&Thresholds::default()),
            results,
            confirmation: Default::default(),
        };
        let r = evaluate_pairs(&check, &Thresholds::default(), &judged);
        assert!(!r.passed(), "{r:?}");
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
        assert!(r.passed(), "{r:?}");
        assert_eq!(r.measured, "errors 0, retransmits 0 over 2 sizes");
        // 12 retransmits during 1 MiB: on both its rows, counted once.
        let lossy = vec![
            counter_row(8, "out-of-place", Some(0)),
            counter_row(8, "in-place", Some(0)),
            counter_row(1 << 20, "out-of-place", Some(12)),
            counter_row(1 << 20, "in-place", Some(12)),
        ];
        let r = evaluate_counters(&clean, &lossy);
        assert!(!r.passed());
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
        assert!(evaluate_counters(&at_8, &lossy).passed());
        assert!(evaluate_counters(&counter_check("max_congestion = 6"), &lossy).passed());
        assert!(!evaluate_counters(&counter_check("max_congestion = 5"), &lossy).passed());
        // A CSV without counter columns is never a pass.
        let old = vec![counter_row(8, "out-of-place", None)];
        let r = evaluate_counters(&clean, &old);
        assert!(
            !r.passed() && r.details[0].contains("the run read no fabric counters"),
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
            rail: None,
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
        assert!(!r.passed());
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
        assert!(!r.passed() && r.measured == "retransmits not read, errors not read over 0 pairs");
    }

    /// 5% loss on one node of four: its three pairs retransmit hundreds, the
    /// others a few; the check fails and lays it on that node alone.
    #[test]
    fn a_node_whose_pairs_alone_retransmit_is_the_suspect() {
        // node3's pairs hundreds, the others one each.
        let mut retransmits = crate::allpairs::Matrix::empty(4);
        for a in 0..4 {
            for b in a + 1..4 {
                let lossy = a == 2 || b == 2;
                retransmits.set(a, b, if lossy { 100.0 * (a + b) as f64 } else { 1.0 });
            }
        }
        let results = PairResults {
            labels: ["node1", "node2", "node3", "node4"]
                .map(String::from)
                .to_vec(),
            sizes: Vec::new(),
            counters: vec![(crate::report::counters::Column::Retransmits, retransmits)],
        };
        let max = [(Class::Retransmits, 50)];
        let r = evaluate_pair_counters(&pair_check(), &max, &results);
        assert!(!r.passed());
        let why = "node3 is at one end of every pair whose rounds moved retransmits most, each \
                   at least 10x any other pair: the suspect";
        assert_eq!(r.suspects, [("node3".to_string(), why.to_string())]);
        assert_eq!(r.details.last().map(String::as_str), Some(why));
        // Within the limit: no suspect, whatever stands out.
        let r = evaluate_pair_counters(&pair_check(), &[(Class::Retransmits, 2000)], &results);
        assert!(r.passed() && r.suspects.is_empty(), "{r:?}");
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
        let e = format!(
            "{:#}",
            crate::rack::spec::Spec::parse(&spec("size = \"1M\"")).unwrap_err()
        );
        assert!(
            e.ends_with(
                "size with test 'pairs': an all-pairs test reads the counters around each \
                 pair's round, which spans every size; drop size"
            ),
            "{e}"
        );
    }
}
