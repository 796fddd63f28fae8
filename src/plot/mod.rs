//! The charts of a run, drawn with plotters in PNG and SVG (1200x800), for the
//! `plot` and `compare` binaries and the benchmarks' `--plot DIR`. Per
//! collective:
//! - `<coll>_busbw`: busbw vs size (log2 x), one line per run and placement,
//!   the limits as labelled horizontal lines, each line's best % of limit marked;
//! - `<coll>_latency`: per-iteration p50/p99/p99.9 vs size (log-log);
//! - `<coll>_latency_dist_<size>B`: the per-iteration latency distribution at one
//!   size, as HdrHistogram draws it (latency vs percentile): the full ladder when
//!   histograms are at hand (`--hist` files, or in-process), else the five
//!   percentiles the CSV holds.
//!
//! Legends sit in a panel below each chart, never over the data.
//!
//! - `draw`: what every chart is drawn with (frame, legend, axes, PNG and SVG);
//! - `busbw`, `latency`, `distribution`: one file per chart;
//! - `export`: `--plot DIR` of the benchmarks, as an exporter;
//! - `cli`: the `plot` binary.

mod busbw;
pub mod cli;
mod distribution;
mod draw;
pub mod export;
mod latency;

/// For charts drawn outside this module (the all-pairs heatmap).
pub(crate) use draw::png_bytes;

use crate::limits::Limit;
use crate::report::hist::{self, Percentile};
use crate::report::Row;
use crate::sizes::human_bytes;
use anyhow::{bail, Context};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Pixels of every picture.
pub const WIDTH: u32 = 1200;
pub const HEIGHT: u32 = 800;

/// The rows of one run, with whatever full latency distributions are known.
#[derive(Clone, Debug, Default)]
pub struct RunData {
    /// How the run is named in legends (file stem, or run id).
    pub label: String,
    pub rows: Vec<Row>,
    /// Percentile ladders keyed by `hist::file_name` of their row.
    pub distributions: HashMap<String, Vec<Percentile>>,
}

impl RunData {
    /// Loads, for every row, `<dir>/<run_id>/<hist file name>` where it exists
    /// (as `--hist DIR` writes them); returns how many were found.
    pub fn load_histograms(&mut self, dir: &Path) -> anyhow::Result<usize> {
        let mut found = 0;
        for row in &self.rows {
            let name = hist::file_name(row);
            let path = dir.join(&row.run_id).join(&name);
            if path.exists() {
                self.distributions.insert(name, hist::read_hgrm(&path)?);
                found += 1;
            }
        }
        Ok(found)
    }
}

/// Names for the files at `paths` in legends: their stems, or their paths when
/// two stems are the same.
pub fn file_labels(paths: &[PathBuf]) -> Vec<String> {
    let stems: Vec<String> = paths
        .iter()
        .map(|p| {
            p.file_stem().map_or_else(
                || p.display().to_string(),
                |s| s.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let unique = stems.iter().collect::<BTreeSet<_>>().len() == stems.len();
    if unique {
        stems
    } else {
        paths.iter().map(|p| p.display().to_string()).collect()
    }
}

/// The runs of CSV files, one per file and run id (a file written with
/// --append may hold several), labelled by file, and by run id where a file
/// holds several.
pub fn load_runs(paths: &[PathBuf]) -> anyhow::Result<Vec<RunData>> {
    let mut runs = Vec::new();
    for (path, label) in paths.iter().zip(file_labels(paths)) {
        let mut by_run: BTreeMap<String, Vec<Row>> = BTreeMap::new();
        for row in crate::report::csv::read_rows(path)? {
            by_run.entry(row.run_id.clone()).or_default().push(row);
        }
        let several = by_run.len() > 1;
        runs.extend(by_run.into_iter().map(|(run_id, rows)| RunData {
            label: if several {
                format!("{label} {run_id}")
            } else {
                label.clone()
            },
            rows,
            distributions: HashMap::new(),
        }));
    }
    Ok(runs)
}

/// One line of a chart: the rows of one run with one datatype, op, root,
/// placement and rank count, averaged per size over -N cycles.
struct Series {
    label: String,
    in_place: bool,
    /// Rows of this series by size (every cycle).
    by_size: BTreeMap<u64, Vec<Row>>,
    run: usize,
}

impl Series {
    fn mean(&self, size: u64, f: impl Fn(&Row) -> f64) -> f64 {
        let rows = &self.by_size[&size];
        rows.iter().map(f).sum::<f64>() / rows.len() as f64
    }

    fn busbw(&self) -> Vec<(f64, f64)> {
        self.by_size
            .keys()
            .map(|&s| (s as f64, self.mean(s, |r| r.busbw_gbs)))
            .collect()
    }

    /// The size with the highest busbw, its busbw and % of limit.
    fn best(&self) -> Option<(u64, f64, Option<f64>)> {
        self.by_size
            .keys()
            .map(|&s| {
                let pct = self.by_size[&s][0]
                    .pct_of_limit
                    .map(|_| self.mean(s, |r| r.pct_of_limit.unwrap_or(0.0)));
                (s, self.mean(s, |r| r.busbw_gbs), pct)
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }
}

type SeriesKey = (usize, String, String, i64, usize, String);

/// Splits one collective's rows into series, labelled by what differs between them.
fn series_of(runs: &[RunData], collective: &str) -> Vec<Series> {
    let mut groups: BTreeMap<SeriesKey, BTreeMap<u64, Vec<Row>>> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        for row in run.rows.iter().filter(|r| r.collective == collective) {
            let key = (
                i,
                row.datatype.clone(),
                row.redop.clone(),
                row.root,
                row.nranks,
                row.placement.clone(),
            );
            groups
                .entry(key)
                .or_default()
                .entry(row.size_bytes)
                .or_default()
                .push(row.clone());
        }
    }
    let keys: Vec<&SeriesKey> = groups.keys().collect();
    let varies = |f: &dyn Fn(&SeriesKey) -> String| {
        keys.iter().map(|k| f(k)).collect::<BTreeSet<_>>().len() > 1
    };
    let show_run = varies(&|k| k.0.to_string());
    let show_type = varies(&|k| k.1.clone());
    let show_op = varies(&|k| k.2.clone());
    let show_root = varies(&|k| k.3.to_string());
    let show_ranks = varies(&|k| k.4.to_string());
    groups
        .into_iter()
        .map(|(key, by_size)| {
            let (run, dtype, op, root, nranks, placement) = key;
            let mut parts = Vec::new();
            if show_run {
                parts.push(runs[run].label.clone());
            }
            if show_type {
                parts.push(dtype);
            }
            if show_op {
                parts.push(op);
            }
            if show_root {
                parts.push(format!("root {root}"));
            }
            if show_ranks {
                parts.push(format!("{nranks} ranks"));
            }
            parts.push(placement.clone());
            Series {
                label: parts.join(" "),
                in_place: placement == "in-place",
                by_size,
                run,
            }
        })
        .collect()
}

/// "4 ranks on 1 node, mpi (shared memory)" for each distinct setting.
fn setting_line(rows: &[&Row]) -> String {
    rows.iter()
        .map(|r| {
            format!(
                "{} ranks on {} node{}, {} ({})",
                r.nranks,
                r.nnodes,
                if r.nnodes == 1 { "" } else { "s" },
                r.backend,
                r.transport
            )
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join("; ")
}

/// The distinct limits recorded in the rows (what `plot` draws from CSVs);
/// a limit that is no bandwidth (NaN, inf, 0 or below) is none.
pub fn limits_in(runs: &[RunData]) -> Vec<Limit> {
    let mut limits: Vec<Limit> = Vec::new();
    for row in runs.iter().flat_map(|r| &r.rows) {
        let limit = (
            &row.limit_name,
            row.limit_gbs.filter(|g| g.is_finite() && *g > 0.0),
        );
        if let (Some(name), Some(gbs)) = limit {
            if !limits.iter().any(|l| &l.name == name && l.gbs == gbs) {
                limits.push(Limit {
                    name: name.clone(),
                    gbs,
                });
            }
        }
    }
    limits.sort_by(|a, b| a.gbs.total_cmp(&b.gbs));
    limits
}

/// Replaces the rows' limit columns with the lowest of `limits` (`plot --limit`).
pub fn apply_limits(runs: &mut [RunData], limits: &[Limit]) {
    let binding = crate::limits::binding(limits);
    for row in runs.iter_mut().flat_map(|r| r.rows.iter_mut()) {
        row.set_limit(binding);
    }
}

/// The first figure of `row` a chart cannot draw: not a number (NaN, inf),
/// negative, or a size of 0 (which has no place on a log axis).
fn undrawable(row: &Row) -> Option<(&'static str, String)> {
    if row.size_bytes == 0 {
        return Some(("size_bytes", "0".into()));
    }
    let percentiles = [
        ("min_us", row.min_us),
        ("p50_us", row.p50_us),
        ("p99_us", row.p99_us),
        ("p999_us", row.p999_us),
        ("max_us", row.max_us),
    ];
    // A loop timed whole is drawn in busbw and absent from the latency charts.
    let timed_whole = row.timed_whole();
    [
        ("busbw_gbs", row.busbw_gbs),
        ("pct_of_limit", row.pct_of_limit.unwrap_or(0.0)),
        ("limit_gbs", row.limit_gbs.unwrap_or(0.0)),
    ]
    .into_iter()
    .chain(percentiles.into_iter().filter(|_| !timed_whole))
    .find(|(_, v)| !(v.is_finite() && *v >= 0.0))
    .map(|(column, v)| (column, v.to_string()))
}

/// The runs without the rows a chart cannot draw (an endless value would
/// stretch an axis without end), and one line naming the rows left out.
fn drawable(runs: &[RunData]) -> (Vec<RunData>, Option<String>) {
    let mut left_out = Vec::new();
    let kept = runs
        .iter()
        .map(|run| {
            let mut kept = run.clone();
            kept.rows.retain(|r| match undrawable(r) {
                None => true,
                Some((column, value)) => {
                    left_out.push(format!(
                        "{} {} {} {} ({column} {value})",
                        run.label,
                        r.collective,
                        r.placement,
                        human_bytes(r.size_bytes)
                    ));
                    false
                }
            });
            // The full ladders of --hist files, by the same rule.
            for (name, points) in kept.distributions.iter_mut() {
                let before = points.len();
                points.retain(|p| p.value_us.is_finite() && p.value_us > 0.0);
                if points.len() < before {
                    left_out.push(format!(
                        "{} {name} ({} percentiles)",
                        run.label,
                        before - points.len()
                    ));
                }
            }
            kept
        })
        .collect();
    const SHOWN: usize = 5;
    let line = (!left_out.is_empty()).then(|| {
        let more = left_out.len().saturating_sub(SHOWN);
        format!(
            "left out {} no chart can draw (a value that is NaN, inf or negative, or a size of 0): {}{}",
            match left_out.len() {
                1 => "1 row".to_string(),
                n => format!("{n} rows"),
            },
            left_out[..left_out.len().min(SHOWN)].join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        )
    });
    (kept, line)
}

/// The pictures written, and the line naming what was left out of them.
#[derive(Debug)]
pub struct Rendered {
    pub files: Vec<PathBuf>,
    pub left_out: Option<String>,
}

/// A latency distribution to draw: its points and whether they are the full
/// histogram or only the CSV's five percentiles.
struct Distribution {
    label: String,
    points: Vec<Percentile>,
    full: bool,
}

/// The CSV's percentiles of a row as a ladder: min, p50, p99, p99.9, max,
/// dropping those the iteration count cannot resolve (p99 of 20 iterations is
/// the max).
fn csv_ladder(row: &Row) -> Vec<Percentile> {
    let n = row.iters as u64;
    [
        (0.0, row.min_us),
        (0.5, row.p50_us),
        (0.99, row.p99_us),
        (0.999, row.p999_us),
        (1.0, row.max_us),
    ]
    .into_iter()
    .filter(|&(q, v)| !v.is_nan() && (q == 1.0 || 1.0 / (1.0 - q) <= n as f64))
    .map(|(q, v)| Percentile {
        value_us: v,
        quantile: q,
        total_count: ((q * n as f64).ceil() as u64).max(1),
    })
    .collect()
}

/// Writes every chart of every collective in `runs` to `dir` (PNG and SVG);
/// `dist_size` picks the size of the distribution chart (default: the largest).
/// Rows a chart cannot draw are left out and named in [`Rendered::left_out`].
pub fn render(
    runs: &[RunData],
    limits: &[Limit],
    dist_size: Option<u64>,
    dir: &Path,
) -> anyhow::Result<Rendered> {
    // The callers checked the folder (`output::check_folder`), and name the
    // flag and the folder in errors (-o DIR, --plot DIR).
    std::fs::create_dir_all(dir).context("cannot create the folder")?;
    let (runs, left_out) = drawable(runs);
    let runs = &runs[..];
    let collectives: BTreeSet<&str> = runs
        .iter()
        .flat_map(|r| r.rows.iter().map(|row| row.collective.as_str()))
        .collect();
    if collectives.is_empty() {
        bail!(
            "no rows to plot{}",
            left_out.map_or(String::new(), |l| format!(": {l}"))
        );
    }
    let mut written = Vec::new();
    for coll in collectives {
        let series = series_of(runs, coll);
        let rows: Vec<&Row> = series
            .iter()
            .flat_map(|s| s.by_size.values().flatten())
            .collect();
        let setting = setting_line(&rows);
        written.extend(draw::save(
            dir,
            &format!("{coll}_busbw"),
            &busbw::BusbwChart {
                collective: coll,
                setting: &setting,
                series: &series,
                limits,
            },
        )?);
        if rows.iter().all(|r| r.timed_whole()) {
            continue; // every loop timed whole (--percentiles 0): no latency to draw
        }
        let iters: BTreeSet<usize> = rows.iter().map(|r| r.iters).collect();
        written.extend(draw::save(
            dir,
            &format!("{coll}_latency"),
            &latency::LatencyChart {
                collective: coll,
                setting: &setting,
                series: &series,
                iters: &iters,
            },
        )?);
        let sizes: BTreeSet<u64> = rows.iter().map(|r| r.size_bytes).collect();
        let size = match dist_size {
            Some(s) if sizes.contains(&s) => s,
            Some(s) => bail!(
                "--size {s}: {coll} has no rows of that size; sizes measured: {}",
                sizes
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => *sizes.last().expect("a collective with rows has sizes"),
        };
        let distributions: Vec<Distribution> = series
            .iter()
            .filter_map(|s| {
                let row = s.by_size.get(&size)?.first()?;
                let full = runs[s.run].distributions.get(&hist::file_name(row));
                Some(Distribution {
                    label: s.label.clone(),
                    points: full.cloned().unwrap_or_else(|| csv_ladder(row)),
                    full: full.is_some(),
                })
            })
            .collect();
        written.extend(draw::save(
            dir,
            &format!("{coll}_latency_dist_{size}B"),
            &distribution::DistributionChart {
                collective: coll,
                setting: &setting,
                size,
                distributions: &distributions,
            },
        )?);
    }
    Ok(Rendered {
        files: written,
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(placement: &str, size: u64, busbw: f64) -> Row {
        Row {
            collective: "all_reduce".into(),
            datatype: "float".into(),
            redop: "sum".into(),
            root: -1,
            nranks: 4,
            placement: placement.into(),
            size_bytes: size,
            busbw_gbs: busbw,
            iters: 20,
            ..Row::default()
        }
    }

    #[test]
    fn series_are_labelled_by_what_differs() {
        let a = RunData {
            label: "base".into(),
            rows: vec![row("in-place", 8, 1.0), row("out-of-place", 8, 2.0)],
            ..RunData::default()
        };
        let mut b = a.clone();
        b.label = "new".into();
        let one = series_of(std::slice::from_ref(&a), "all_reduce");
        let labels: Vec<&str> = one.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["in-place", "out-of-place"]);
        let two = series_of(&[a, b], "all_reduce");
        let labels: Vec<&str> = two.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "base in-place",
                "base out-of-place",
                "new in-place",
                "new out-of-place"
            ]
        );
    }

    #[test]
    fn cycles_are_averaged_and_the_best_found() {
        let mut rows = vec![row("out-of-place", 8, 1.0), row("out-of-place", 8, 3.0)];
        rows.push(row("out-of-place", 16, 5.0));
        let run = RunData {
            label: "r".into(),
            rows,
            ..RunData::default()
        };
        let s = &series_of(&[run], "all_reduce")[0];
        assert_eq!(s.busbw(), vec![(8.0, 2.0), (16.0, 5.0)]);
        assert_eq!(s.best(), Some((16, 5.0, None)));
    }

    #[test]
    fn csv_ladder_keeps_what_the_iterations_resolve() {
        let mut r = row("in-place", 8, 1.0);
        (r.min_us, r.p50_us, r.p99_us, r.p999_us, r.max_us) = (1.0, 2.0, 3.0, 4.0, 5.0);
        let q: Vec<f64> = csv_ladder(&r).iter().map(|p| p.quantile).collect();
        assert_eq!(q, [0.0, 0.5, 1.0]);
        r.iters = 1000;
        assert_eq!(csv_ladder(&r).len(), 5);
    }

    #[test]
    fn a_loop_timed_whole_is_drawn_in_busbw_only() {
        let mut r = row("out-of-place", 8, 1.0);
        (r.min_us, r.p50_us, r.p99_us, r.p999_us, r.max_us) =
            (f64::NAN, f64::NAN, f64::NAN, f64::NAN, f64::NAN);
        assert_eq!(undrawable(&r), None);
        assert!(csv_ladder(&r).is_empty());
        r.min_us = 1.0; // one figure measured and the others NaN is a broken row
        assert_eq!(undrawable(&r).map(|u| u.0), Some("p50_us"));
    }
}
