//! Comparing runs: a baseline and candidates matched key by key on collective,
//! datatype, op, placement, size and rank count; each key judged on the ratio
//! candidate/baseline of the medians of its samples (rows: rounds, cycles,
//! appended runs, several files a side) with its 95% interval, against
//! thresholds; `cli` is the `compare` binary, `figures` the `fabricbench-stats`
//! binary (the same statistics for figures measured by any program).

pub mod cli;
pub mod figures;
pub mod judge;

use crate::report::Row;
use crate::sizes::exact_bytes;
use crate::stats::interval::{Estimate, MIN_SAMPLES};
use anyhow::bail;
use judge::{judge, verdict_text, Figure, Judgement, RowVerdict};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What a row is matched on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub collective: String,
    pub datatype: String,
    pub redop: String,
    pub placement: String,
    pub size_bytes: u64,
    pub nranks: usize,
}

impl Key {
    fn of(row: &Row) -> Key {
        Key {
            collective: row.collective.clone(),
            datatype: row.datatype.clone(),
            redop: row.redop.clone(),
            placement: row.placement.clone(),
            size_bytes: row.size_bytes,
            nranks: row.nranks,
        }
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "{} {} {} {} {} {} ranks",
            self.collective,
            self.datatype,
            self.redop,
            self.placement,
            exact_bytes(self.size_bytes),
            self.nranks
        )
    }
}

/// The figures of one key on one side: every row of it (rounds, -N cycles,
/// -r -1 roots, appended runs, several files) gives one sample. Only these
/// are kept, never whole rows, so a file of a million rows streams.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Samples {
    pub busbw_gbs: Vec<f64>,
    pub p99_us: Vec<f64>,
    /// Wrong elements over the rows (validation on).
    pub wrong: u64,
}

impl Samples {
    fn rounds(&self) -> usize {
        self.busbw_gbs.len()
    }
}

/// Every key of one side, with its samples.
pub type Tally = BTreeMap<Key, Samples>;

/// Adds one row's figures to its key.
pub fn tally_row(tally: &mut Tally, row: &Row) {
    let s = tally.entry(Key::of(row)).or_default();
    s.busbw_gbs.push(row.busbw_gbs);
    s.p99_us.push(row.p99_us);
    s.wrong = s.wrong.saturating_add(row.wrong.unwrap_or(0));
}

/// What a side shows of a key: the medians of its samples (a NaN or inf
/// sample spreads; a p99 not measured among timed ones does not).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    pub busbw_gbs: f64,
    pub p99_us: f64,
    /// Wrong elements over the rows (validation on).
    pub wrong: u64,
    /// Samples behind the medians.
    pub rounds: usize,
}

impl Figures {
    fn of(s: &Samples) -> Figures {
        Figures {
            busbw_gbs: Figure::Busbw.shown(&s.busbw_gbs),
            p99_us: Figure::P99.shown(&s.p99_us),
            wrong: s.wrong,
            rounds: s.rounds(),
        }
    }
}

/// How much worse a candidate may be before it counts as a regression, in percent.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Thresholds {
    /// busbw lower than the baseline by more than this.
    pub busbw_drop_pct: Option<f64>,
    /// p99 higher than the baseline by more than this.
    pub p99_rise_pct: Option<f64>,
}

/// One matched key.
#[derive(Clone, Debug, PartialEq)]
pub struct Delta {
    pub key: Key,
    pub base: Figures,
    pub candidate: Figures,
    /// The ratio candidate/baseline of the medians, with its 95% interval
    /// from 3 samples a side on; None where the baseline is 0 or either
    /// figure is not a number.
    pub busbw_ratio: Option<Estimate>,
    pub p99_ratio: Option<Estimate>,
    /// The figures a threshold asked about, and what it said of each.
    pub figures: Vec<(Figure, Judgement)>,
    pub verdict: RowVerdict,
    /// "ok", "REGRESSED (busbw)", "ok on busbw; not judged: p99 not measured in candidate".
    pub verdict_text: String,
}

/// A candidate against the baseline.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub deltas: Vec<Delta>,
    pub only_in_base: Vec<Key>,
    /// With the candidate's wrong elements there: wrong data fails a row even
    /// with nothing to compare it with.
    pub only_in_candidate: Vec<(Key, u64)>,
}

/// Matches `candidate` against `base`; an error when no key matches.
pub fn compare(base: &Tally, cand: &Tally, thresholds: Thresholds) -> anyhow::Result<Comparison> {
    let mut deltas = Vec::new();
    for (key, b) in base {
        let Some(c) = cand.get(key) else { continue };
        let (busbw_ratio, busbw) = judge(
            Figure::Busbw,
            &b.busbw_gbs,
            &c.busbw_gbs,
            thresholds.busbw_drop_pct,
        );
        let (p99_ratio, p99) = judge(Figure::P99, &b.p99_us, &c.p99_us, thresholds.p99_rise_pct);
        let figures: Vec<(Figure, Judgement)> = [(Figure::Busbw, busbw), (Figure::P99, p99)]
            .into_iter()
            .filter_map(|(f, j)| Some((f, j?)))
            .collect();
        let (verdict, text) = verdict_text(&figures, c.wrong);
        deltas.push(Delta {
            key: key.clone(),
            base: Figures::of(b),
            candidate: Figures::of(c),
            busbw_ratio,
            p99_ratio,
            figures,
            verdict,
            verdict_text: text,
        });
    }
    if deltas.is_empty() {
        bail!(
            "no row matches the baseline on collective, datatype, op, placement, size and nranks \
             (baseline has {}, candidate has {}); compare runs of the same sweep",
            summarize(base.keys()),
            summarize(cand.keys())
        );
    }
    Ok(Comparison {
        deltas,
        only_in_base: base
            .keys()
            .filter(|k| !cand.contains_key(k))
            .cloned()
            .collect(),
        only_in_candidate: cand
            .iter()
            .filter(|(k, _)| !base.contains_key(k))
            .map(|(k, s)| (k.clone(), s.wrong))
            .collect(),
    })
}

/// "all_reduce float sum, 8 B..1 MiB, 2 ranks" per distinct collective setting.
fn summarize<'a>(keys: impl Iterator<Item = &'a Key>) -> String {
    let mut groups: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for k in keys {
        let g = groups
            .entry(format!(
                "{} {} {} {} ranks",
                k.collective, k.datatype, k.redop, k.nranks
            ))
            .or_insert((u64::MAX, 0));
        g.0 = g.0.min(k.size_bytes);
        g.1 = g.1.max(k.size_bytes);
    }
    groups
        .into_iter()
        .map(|(name, (lo, hi))| format!("{name} {}..{}", exact_bytes(lo), exact_bytes(hi)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The change in percent of the baseline: "-12.0%", "n/a".
fn pct(r: Option<Estimate>) -> String {
    r.map_or("n/a".to_string(), |r| {
        format!("{:+.1}%", (r.value - 1.0) * 100.0)
    })
}

/// The 95% interval of the change: "-31.0%..-27.2%"; "-" where fewer than 3
/// samples a side left the noise unestimated, "n/a" where there is no change.
fn interval(r: Option<Estimate>) -> String {
    match r {
        None => "n/a".into(),
        Some(Estimate { interval: None, .. }) => "-".into(),
        Some(Estimate {
            interval: Some(i), ..
        }) => format!(
            "{:+.1}%..{:+.1}%",
            (i.lo - 1.0) * 100.0,
            (i.hi - 1.0) * 100.0
        ),
    }
}

/// How many rows count against a candidate, and why; and what was not judged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Matched rows beyond a threshold.
    pub regressed: usize,
    /// Rows that fail whatever the thresholds: wrong data.
    pub failed: usize,
    /// Rows that count against the candidate (one may be both).
    pub rows: usize,
    /// Matched rows a threshold asked about with no figure it could judge.
    pub not_judged: usize,
    /// Matched rows with an interval across a threshold and none beyond.
    pub inconclusive: usize,
    /// Matched rows with fewer than 3 samples on a side: noise not estimated;
    /// and the most samples any such side had.
    pub unestimated: usize,
    pub unestimated_most: usize,
    /// Figures not judged, by why ("p99 not measured in candidate"): how many rows.
    pub unjudged_figures: BTreeMap<String, usize>,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.regressed += o.regressed;
        self.failed += o.failed;
        self.rows += o.rows;
        self.not_judged += o.not_judged;
        self.inconclusive += o.inconclusive;
        self.unestimated += o.unestimated;
        self.unestimated_most = self.unestimated_most.max(o.unestimated_most);
        for (why, n) in o.unjudged_figures {
            *self.unjudged_figures.entry(why).or_default() += n;
        }
    }
}

impl Comparison {
    pub fn counts(&self) -> Counts {
        let crossed = |d: &&Delta| d.figures.iter().any(|(_, j)| *j == Judgement::Regressed);
        let wrong_unmatched = self
            .only_in_candidate
            .iter()
            .filter(|(_, w)| *w > 0)
            .count();
        let verdicts = |v: RowVerdict| self.deltas.iter().filter(|d| d.verdict == v).count();
        let unestimated: Vec<usize> = self
            .deltas
            .iter()
            .map(|d| d.base.rounds.min(d.candidate.rounds))
            .filter(|&n| n < MIN_SAMPLES)
            .collect();
        let mut unjudged_figures = BTreeMap::new();
        for (_, j) in self.deltas.iter().flat_map(|d| &d.figures) {
            if let Judgement::NotJudged(why) = j {
                *unjudged_figures.entry(why.clone()).or_default() += 1;
            }
        }
        Counts {
            regressed: self.deltas.iter().filter(crossed).count(),
            failed: self.deltas.iter().filter(|d| d.candidate.wrong > 0).count() + wrong_unmatched,
            rows: verdicts(RowVerdict::Regressed) + wrong_unmatched,
            not_judged: verdicts(RowVerdict::NotJudged),
            inconclusive: verdicts(RowVerdict::Inconclusive),
            unestimated: unestimated.len(),
            unestimated_most: unestimated.iter().copied().max().unwrap_or(0),
            unjudged_figures,
        }
    }

    /// The table of deltas, then the unmatched rows.
    pub fn render(&self, base_name: &str, candidate_name: &str) -> String {
        let mut out = String::new();
        let header = [
            "collective",
            "type",
            "redop",
            "placement",
            "size",
            "ranks",
            "rounds",
            "busbw base",
            "busbw new",
            "Δbusbw",
            "95% interval",
            "p99 base",
            "p99 new",
            "Δp99",
            "95% interval",
            "verdict",
        ];
        let mut lines: Vec<Vec<String>> = vec![
            header.iter().map(|h| h.to_string()).collect(),
            vec![
                "",
                "",
                "",
                "",
                "(B)",
                "",
                "(base/new)",
                "(median GB/s)",
                "(median GB/s)",
                "(ratio-1)",
                "(of Δbusbw)",
                "(median us)",
                "(median us)",
                "(ratio-1)",
                "(of Δp99)",
                "",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
        ];
        for d in &self.deltas {
            lines.push(vec![
                d.key.collective.clone(),
                d.key.datatype.clone(),
                d.key.redop.clone(),
                d.key.placement.clone(),
                d.key.size_bytes.to_string(),
                d.key.nranks.to_string(),
                format!("{}/{}", d.base.rounds, d.candidate.rounds),
                format!("{:.3}", d.base.busbw_gbs),
                format!("{:.3}", d.candidate.busbw_gbs),
                pct(d.busbw_ratio),
                interval(d.busbw_ratio),
                format!("{:.2}", d.base.p99_us),
                format!("{:.2}", d.candidate.p99_us),
                pct(d.p99_ratio),
                interval(d.p99_ratio),
                d.verdict_text.clone(),
            ]);
        }
        let widths: Vec<usize> = (0..header.len())
            .map(|c| {
                lines
                    .iter()
                    .map(|l| l[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let _ = writeln!(out, "# baseline {base_name}, candidate {candidate_name}");
        for (i, line) in lines.iter().enumerate() {
            let cells: Vec<String> = line
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (cell, w))| {
                    // Names left-aligned, numbers right-aligned.
                    if c < 4 || c == header.len() - 1 {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            let lead = if i < 2 { "# " } else { "  " };
            let _ = writeln!(out, "{lead}{}", cells.join("  ").trim_end());
        }
        let in_base: Vec<String> = self.only_in_base.iter().map(Key::to_string).collect();
        let in_candidate: Vec<String> = self
            .only_in_candidate
            .iter()
            .map(|(k, wrong)| match wrong {
                0 => k.to_string(),
                n => format!("{k}: REGRESSED (wrong data: {n} elements)"),
            })
            .collect();
        for (name, keys) in [(base_name, in_base), (candidate_name, in_candidate)] {
            if !keys.is_empty() {
                let _ = writeln!(out, "# unmatched: {} rows only in {name}:", keys.len());
                for k in keys {
                    let _ = writeln!(out, "#   {k}");
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(size: u64, busbw: f64, p99: f64) -> Row {
        Row {
            collective: "all_reduce".into(),
            datatype: "float".into(),
            redop: "sum".into(),
            placement: "out-of-place".into(),
            size_bytes: size,
            nranks: 4,
            busbw_gbs: busbw,
            p99_us: p99,
            ..Row::default()
        }
    }

    /// The rows of each side tallied, then compared.
    fn cmp(base: &[Row], cand: &[Row], t: Thresholds) -> anyhow::Result<Comparison> {
        let tally = |rows: &[Row]| {
            let mut tally = Tally::new();
            rows.iter().for_each(|r| tally_row(&mut tally, r));
            tally
        };
        compare(&tally(base), &tally(cand), t)
    }

    fn change(r: Option<Estimate>) -> Option<f64> {
        r.map(|r| (r.value - 1.0) * 100.0)
    }

    const STRICT: Thresholds = Thresholds {
        busbw_drop_pct: Some(5.0),
        p99_rise_pct: Some(20.0),
    };

    #[test]
    fn deltas_and_verdicts() {
        let base = [
            row(8, 10.0, 100.0),
            row(16, 10.0, 100.0),
            row(32, 10.0, 100.0),
        ];
        let cand = [
            row(8, 9.6, 110.0),
            row(16, 9.0, 100.0),
            row(32, 10.0, 130.0),
        ];
        let c = cmp(&base, &cand, STRICT).unwrap();
        assert_eq!(c.deltas.len(), 3);
        assert!((change(c.deltas[0].busbw_ratio).unwrap() + 4.0).abs() < 1e-9);
        let texts: Vec<&str> = c.deltas.iter().map(|d| d.verdict_text.as_str()).collect();
        assert_eq!(texts, ["ok", "REGRESSED (busbw)", "REGRESSED (p99)"]);
        assert_eq!(c.counts().rows, 2);
        // Without thresholds nothing is judged, and no row says ok.
        let c = cmp(&base, &cand, Thresholds::default()).unwrap();
        assert_eq!(c.counts().rows, 0);
        assert!(c
            .deltas
            .iter()
            .all(|d| d.verdict_text == "not judged: no --threshold"));
    }

    #[test]
    fn repeated_rows_are_samples_and_unmatched_listed() {
        let base = [row(8, 10.0, 1.0), row(8, 20.0, 3.0), row(64, 1.0, 1.0)];
        let mut other = row(8, 15.0, 2.0);
        other.nranks = 8;
        let cand = [row(8, 15.0, 2.0), other];
        let c = cmp(&base, &cand, STRICT).unwrap();
        assert_eq!(c.deltas.len(), 1);
        assert_eq!(change(c.deltas[0].busbw_ratio), Some(0.0));
        assert_eq!(change(c.deltas[0].p99_ratio), Some(0.0));
        assert_eq!(c.only_in_base.len(), 1);
        assert_eq!(c.only_in_base[0].size_bytes, 64);
        assert_eq!(c.only_in_candidate[0].0.nranks, 8);
        let text = c.render("a.csv", "b.csv");
        assert!(text.contains("# unmatched: 1 rows only in a.csv:\n#   all_reduce float sum out-of-place 64 B 4 ranks"));
        assert!(text.contains("8 ranks"));
    }

    #[test]
    fn no_overlap_is_an_error() {
        let err = cmp(&[row(8, 1.0, 1.0)], &[row(16, 1.0, 1.0)], STRICT).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("no row matches the baseline"), "{msg}");
        assert!(
            msg.contains("all_reduce float sum 4 ranks 8 B..8 B"),
            "{msg}"
        );
    }

    /// A figure that is NaN or inf in either file is not judged: neither worse
    /// (REGRESSED) nor ok; a row with no figure judged is not judged; wrong data
    /// fails a row whatever the thresholds.
    #[test]
    fn no_number_is_not_judged_and_wrong_data_fails() {
        let base = [
            row(8, 10.0, 1.0),
            row(16, f64::NAN, 1.0),
            row(32, 10.0, 1.0),
            row(64, f64::NAN, f64::NAN),
        ];
        let mut cand = [
            row(8, f64::NAN, 1.0),
            row(16, 10.0, 1.0),
            row(32, 10.0, f64::INFINITY),
            row(64, 10.0, 1.0),
            row(128, 10.0, 1.0),
        ];
        cand[4].wrong = Some(3);
        let c = cmp(&base, &cand, STRICT).unwrap();
        let texts: Vec<&str> = c.deltas.iter().map(|d| d.verdict_text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "ok on p99; not judged: busbw NaN in candidate",
                "ok on p99; not judged: busbw NaN in baseline",
                "ok on busbw; not judged: p99 inf in candidate",
                "not judged: busbw NaN in baseline; p99 not measured in baseline",
            ]
        );
        let counts = c.counts();
        assert_eq!(
            (
                counts.regressed,
                counts.failed,
                counts.rows,
                counts.not_judged
            ),
            (0, 1, 1, 1)
        );
        assert_eq!(counts.unjudged_figures.len(), 4);
        assert!(c
            .render("a", "b")
            .contains("128 B 4 ranks: REGRESSED (wrong data: 3 elements)"));
        // Wrong data in a matched row, as fast as the baseline, with or without thresholds.
        let mut bad = row(8, 10.0, 1.0);
        bad.wrong = Some(7);
        for t in [STRICT, Thresholds::default()] {
            let c = cmp(&base[..1], &[bad.clone()], t).unwrap();
            assert_eq!(c.deltas[0].verdict, RowVerdict::Regressed);
            assert_eq!(c.counts().failed, 1);
            assert!(c
                .render("a", "b")
                .contains("REGRESSED (wrong data: 7 elements)"));
        }
    }

    /// A run with --percentiles 0 has no p99 (NaN): against another such run or a
    /// timed one, busbw alone is judged and p99 is said to be not judged.
    #[test]
    fn no_p99_on_either_side_is_judged_on_busbw() {
        let whole = |busbw| row(8, busbw, f64::NAN);
        let c = cmp(&[whole(10.0)], &[whole(9.9)], STRICT).unwrap();
        assert_eq!(
            c.deltas[0].verdict_text,
            "ok on busbw; not judged: p99 not measured in either file"
        );
        let c = cmp(&[whole(10.0)], &[whole(5.0)], STRICT).unwrap();
        assert_eq!(c.deltas[0].verdict, RowVerdict::Regressed);
        // The reported case: +97% busbw against a timed run is no regression.
        let c = cmp(&[row(8, 10.0, 1.0)], &[whole(19.7)], STRICT).unwrap();
        assert_eq!(
            c.deltas[0].verdict_text,
            "ok on busbw; not judged: p99 not measured in candidate"
        );
        assert_eq!(c.counts().rows, 0);
        // Appended to a timed row of the same key, the p99 of the timed one stands.
        let c = cmp(
            &[row(8, 10.0, 1.0)],
            &[row(8, 10.0, 1.5), whole(10.0)],
            STRICT,
        )
        .unwrap();
        assert_eq!(change(c.deltas[0].p99_ratio), Some(50.0));
        assert_eq!(c.deltas[0].verdict_text, "REGRESSED (p99)");
    }
}
