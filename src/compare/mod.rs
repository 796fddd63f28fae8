//! Comparing runs: a baseline and candidates matched row by row on collective,
//! datatype, op, placement, size and rank count, with busbw and p99 deltas and
//! a verdict against thresholds; `cli` is the `compare` binary.

pub mod cli;
pub mod judge;

use crate::report::Row;
use crate::sizes::exact_bytes;
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

/// The rows of one key (several with -N cycles, -r -1 roots or appended runs),
/// averaged; a row that is NaN or inf makes its average so (but for a p99 that is
/// NaN: not measured, `--percentiles 0`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    pub busbw_gbs: f64,
    pub p99_us: f64,
    /// Wrong elements over the rows (validation on).
    pub wrong: u64,
}

fn aggregate(rows: &[Row]) -> BTreeMap<Key, Figures> {
    // Rows and, apart, rows with a p99: a row of a loop timed whole (--percentiles 0,
    // p99 NaN) appended to timed ones leaves their p99 standing (inf still spreads).
    let mut sums: BTreeMap<Key, (Figures, usize, usize)> = BTreeMap::new();
    for r in rows {
        let (s, n, timed) = sums.entry(Key::of(r)).or_default();
        s.busbw_gbs += r.busbw_gbs;
        if !r.p99_us.is_nan() {
            s.p99_us += r.p99_us;
            *timed += 1;
        }
        s.wrong = s.wrong.saturating_add(r.wrong.unwrap_or(0));
        *n += 1;
    }
    sums.into_iter()
        .map(|(k, (s, n, timed))| {
            (
                k,
                Figures {
                    busbw_gbs: s.busbw_gbs / n as f64,
                    p99_us: if timed == 0 {
                        f64::NAN
                    } else {
                        s.p99_us / timed as f64
                    },
                    wrong: s.wrong,
                },
            )
        })
        .collect()
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
    /// Change in percent of the baseline; None where the baseline is 0 or
    /// either figure is not a number.
    pub busbw_pct: Option<f64>,
    pub p99_pct: Option<f64>,
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

/// Matches `candidate` against `base`; an error when no row matches.
pub fn compare(
    base: &[Row],
    candidate: &[Row],
    thresholds: Thresholds,
) -> anyhow::Result<Comparison> {
    let base = aggregate(base);
    let cand = aggregate(candidate);
    let mut deltas = Vec::new();
    for (key, b) in &base {
        let Some(c) = cand.get(key) else { continue };
        let (busbw_pct, busbw) = judge(
            Figure::Busbw,
            b.busbw_gbs,
            c.busbw_gbs,
            thresholds.busbw_drop_pct,
        );
        let (p99_pct, p99) = judge(Figure::P99, b.p99_us, c.p99_us, thresholds.p99_rise_pct);
        let figures: Vec<(Figure, Judgement)> = [(Figure::Busbw, busbw), (Figure::P99, p99)]
            .into_iter()
            .filter_map(|(f, j)| Some((f, j?)))
            .collect();
        let (verdict, text) = verdict_text(&figures, c.wrong);
        deltas.push(Delta {
            key: key.clone(),
            base: *b,
            candidate: *c,
            busbw_pct,
            p99_pct,
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
            .map(|(k, f)| (k.clone(), f.wrong))
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

fn pct(p: Option<f64>) -> String {
    p.map_or("n/a".to_string(), |p| format!("{p:+.1}%"))
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
    /// Figures not judged, by why ("p99 not measured in candidate"): how many rows.
    pub unjudged_figures: BTreeMap<String, usize>,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.regressed += o.regressed;
        self.failed += o.failed;
        self.rows += o.rows;
        self.not_judged += o.not_judged;
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
            "busbw base",
            "busbw new",
            "Δbusbw",
            "p99 base",
            "p99 new",
            "Δp99",
            "verdict",
        ];
        let mut lines: Vec<Vec<String>> = vec![
            header.iter().map(|h| h.to_string()).collect(),
            vec![
                "", "", "", "", "(B)", "", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "", "",
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
                format!("{:.3}", d.base.busbw_gbs),
                format!("{:.3}", d.candidate.busbw_gbs),
                pct(d.busbw_pct),
                format!("{:.2}", d.base.p99_us),
                format!("{:.2}", d.candidate.p99_us),
                pct(d.p99_pct),
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
        let c = compare(&base, &cand, STRICT).unwrap();
        assert_eq!(c.deltas.len(), 3);
        assert!((c.deltas[0].busbw_pct.unwrap() + 4.0).abs() < 1e-9);
        let texts: Vec<&str> = c.deltas.iter().map(|d| d.verdict_text.as_str()).collect();
        assert_eq!(texts, ["ok", "REGRESSED (busbw)", "REGRESSED (p99)"]);
        assert_eq!(c.counts().rows, 2);
        // Without thresholds nothing is judged, and no row says ok.
        let c = compare(&base, &cand, Thresholds::default()).unwrap();
        assert_eq!(c.counts().rows, 0);
        assert!(c
            .deltas
            .iter()
            .all(|d| d.verdict_text == "not judged: no --threshold"));
    }

    #[test]
    fn repeated_rows_are_averaged_and_unmatched_listed() {
        let base = [row(8, 10.0, 1.0), row(8, 20.0, 3.0), row(64, 1.0, 1.0)];
        let mut other = row(8, 15.0, 2.0);
        other.nranks = 8;
        let cand = [row(8, 15.0, 2.0), other];
        let c = compare(&base, &cand, STRICT).unwrap();
        assert_eq!(c.deltas.len(), 1);
        assert_eq!(c.deltas[0].busbw_pct, Some(0.0));
        assert_eq!(c.deltas[0].p99_pct, Some(0.0));
        assert_eq!(c.only_in_base.len(), 1);
        assert_eq!(c.only_in_base[0].size_bytes, 64);
        assert_eq!(c.only_in_candidate[0].0.nranks, 8);
        let text = c.render("a.csv", "b.csv");
        assert!(text.contains("# unmatched: 1 rows only in a.csv:\n#   all_reduce float sum out-of-place 64 B 4 ranks"));
        assert!(text.contains("8 ranks"));
    }

    #[test]
    fn no_overlap_is_an_error() {
        let err = compare(&[row(8, 1.0, 1.0)], &[row(16, 1.0, 1.0)], STRICT).unwrap_err();
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
        let c = compare(&base, &cand, STRICT).unwrap();
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
            let c = compare(&base[..1], &[bad.clone()], t).unwrap();
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
        let c = compare(&[whole(10.0)], &[whole(9.9)], STRICT).unwrap();
        assert_eq!(
            c.deltas[0].verdict_text,
            "ok on busbw; not judged: p99 not measured in either file"
        );
        let c = compare(&[whole(10.0)], &[whole(5.0)], STRICT).unwrap();
        assert_eq!(c.deltas[0].verdict, RowVerdict::Regressed);
        // The reported case: +97% busbw against a timed run is no regression.
        let c = compare(&[row(8, 10.0, 1.0)], &[whole(19.7)], STRICT).unwrap();
        assert_eq!(
            c.deltas[0].verdict_text,
            "ok on busbw; not judged: p99 not measured in candidate"
        );
        assert_eq!(c.counts().rows, 0);
        // Appended to a timed row of the same key, the p99 of the timed one stands.
        let c = compare(
            &[row(8, 10.0, 1.0)],
            &[row(8, 10.0, 1.5), whole(10.0)],
            STRICT,
        )
        .unwrap();
        assert_eq!(c.deltas[0].p99_pct, Some(50.0));
        assert_eq!(c.deltas[0].verdict_text, "REGRESSED (p99)");
    }
}
