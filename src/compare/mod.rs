//! Comparing runs: a baseline and candidates matched row by row on collective,
//! datatype, op, placement, size and rank count, with busbw and p99 deltas and
//! a verdict against thresholds; `cli` is the `compare` binary.

pub mod cli;

use crate::report::Row;
use crate::sizes::human_bytes;
use anyhow::bail;
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
            human_bytes(self.size_bytes),
            self.nranks
        )
    }
}

/// The rows of one key (several with -N cycles, -r -1 roots or appended runs), averaged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    pub busbw_gbs: f64,
    pub p99_us: f64,
}

fn aggregate(rows: &[Row]) -> BTreeMap<Key, Figures> {
    let mut sums: BTreeMap<Key, (f64, f64, usize)> = BTreeMap::new();
    for r in rows {
        let s = sums.entry(Key::of(r)).or_default();
        s.0 += r.busbw_gbs;
        s.1 += r.p99_us;
        s.2 += 1;
    }
    sums.into_iter()
        .map(|(k, (busbw, p99, n))| {
            (
                k,
                Figures {
                    busbw_gbs: busbw / n as f64,
                    p99_us: p99 / n as f64,
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
    /// Change in percent of the baseline; None where the baseline is 0.
    pub busbw_pct: Option<f64>,
    pub p99_pct: Option<f64>,
    /// What regressed beyond the thresholds ("busbw", "p99").
    pub regressed: Vec<&'static str>,
}

/// A candidate against the baseline.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub deltas: Vec<Delta>,
    pub only_in_base: Vec<Key>,
    pub only_in_candidate: Vec<Key>,
}

fn change_pct(base: f64, candidate: f64) -> Option<f64> {
    (base != 0.0).then(|| (candidate - base) / base * 100.0)
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
        let busbw_pct = change_pct(b.busbw_gbs, c.busbw_gbs);
        let p99_pct = change_pct(b.p99_us, c.p99_us);
        let mut regressed = Vec::new();
        if let (Some(d), Some(t)) = (busbw_pct, thresholds.busbw_drop_pct) {
            if d < -t {
                regressed.push("busbw");
            }
        }
        if let (Some(d), Some(t)) = (p99_pct, thresholds.p99_rise_pct) {
            if d > t {
                regressed.push("p99");
            }
        }
        deltas.push(Delta {
            key: key.clone(),
            base: *b,
            candidate: *c,
            busbw_pct,
            p99_pct,
            regressed,
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
            .keys()
            .filter(|k| !base.contains_key(k))
            .cloned()
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
        .map(|(name, (lo, hi))| format!("{name} {}..{}", human_bytes(lo), human_bytes(hi)))
        .collect::<Vec<_>>()
        .join("; ")
}

fn pct(p: Option<f64>) -> String {
    p.map_or("n/a".to_string(), |p| format!("{p:+.1}%"))
}

impl Comparison {
    pub fn regressions(&self) -> usize {
        self.deltas
            .iter()
            .filter(|d| !d.regressed.is_empty())
            .count()
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
                if d.regressed.is_empty() {
                    "ok".to_string()
                } else {
                    format!("REGRESSED ({})", d.regressed.join(", "))
                },
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
        for (name, keys) in [
            (base_name, &self.only_in_base),
            (candidate_name, &self.only_in_candidate),
        ] {
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
        assert!(c.deltas[0].regressed.is_empty());
        assert_eq!(c.deltas[1].regressed, ["busbw"]);
        assert_eq!(c.deltas[2].regressed, ["p99"]);
        assert_eq!(c.regressions(), 2);
        // Without thresholds nothing is judged.
        let c = compare(&base, &cand, Thresholds::default()).unwrap();
        assert_eq!(c.regressions(), 0);
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
        assert_eq!(c.only_in_candidate[0].nranks, 8);
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
}
