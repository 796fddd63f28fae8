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
//! Legends sit in a panel below each chart, never over the title or the data:
//! a legend of more rows than fit under 1200x800 makes the picture taller.
//! Each -N cycle of a size is averaged into one point as rows come in, so a CSV
//! of any length takes memory by its points; more than [`MAX_POINTS`] points,
//! or [`MAX_SERIES`] lines in one chart, are refused with the fix.
//!
//! - `points`: rows into points, in bounded memory (and `plot`'s CSV reading);
//! - `draw`: what every chart is drawn with (frame, legend, axes, PNG and SVG);
//! - `busbw`, `latency`, `distribution`: one file per chart;
//! - `export`: `--plot DIR` of the benchmarks, as an exporter;
//! - `cli`: the `plot` binary.
//!
//! Every chart with axes in the crate is drawn here: rack_check's report.html
//! embeds [`busbw_svg`], the busbw chart as SVG text.

mod busbw;
pub mod cli;
mod distribution;
mod draw;
pub mod export;
mod latency;
mod points;

/// For charts drawn outside this module (the all-pairs heatmap).
pub(crate) use draw::{png_bytes, svg_string};

pub use busbw::SizeMark;
pub use points::{file_labels, load_runs, Added, RunData, MAX_POINTS};

use crate::limits::Limit;
use crate::report::hist::{self, Percentile};
use crate::report::{Placement, Row};
use anyhow::{bail, Context};
use points::{Averaged, LeftOut, Point};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most lines one chart draws: `-d all -o all` is 156 of them (13 types,
/// 6 ops, 2 placements) and two such runs overlaid fit; a legend of more
/// would take more room than the chart, and ten colours repeat over them.
pub const MAX_SERIES: usize = 400;

/// Pixels of every picture.
pub const WIDTH: u32 = 1200;
pub const HEIGHT: u32 = 800;

/// One line of a chart: the points of one run with one datatype, op, root,
/// placement and rank count (each -N cycle averaged in).
struct Series<'a> {
    label: String,
    in_place: bool,
    by_size: BTreeMap<u64, &'a Point>,
    run: usize,
}

impl Series<'_> {
    /// `a` at each size.
    fn line(&self, a: Averaged) -> Vec<(f64, f64)> {
        self.by_size
            .iter()
            .map(|(&s, p)| (s as f64, p.mean(a)))
            .collect()
    }

    fn busbw(&self) -> Vec<(f64, f64)> {
        self.line(Averaged::Busbw)
    }

    /// The performance model's busbw at each size that has one.
    fn expected(&self) -> Vec<(f64, f64)> {
        self.by_size
            .iter()
            .filter_map(|(&s, p)| p.first.expected_busbw_gbs.map(|e| (s as f64, e)))
            .collect()
    }

    /// The size with the highest busbw, its busbw and % of limit.
    fn best(&self) -> Option<(u64, f64, Option<f64>)> {
        self.by_size
            .iter()
            .map(|(&s, p)| (s, p.mean(Averaged::Busbw), p.pct_of_limit()))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The rows the line stands for: each point's first.
    fn rows(&self) -> impl Iterator<Item = &Row> {
        self.by_size.values().map(|p| &p.first)
    }
}

type SeriesKey = (usize, String, String, i64, usize, String);

/// Splits one collective's points into series, labelled by what differs between them.
fn series_of<'a>(runs: &'a [RunData], collective: &str) -> Vec<Series<'a>> {
    let mut groups: BTreeMap<SeriesKey, BTreeMap<u64, &Point>> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        for point in run
            .points
            .values()
            .filter(|p| p.first.collective == collective)
        {
            let row = &point.first;
            let key = (
                i,
                row.datatype.clone(),
                row.redop.clone(),
                row.root,
                row.nranks,
                row.placement.clone(),
            );
            groups.entry(key).or_default().insert(row.size_bytes, point);
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

/// One line per placement through a run's points, each size once: the
/// caller picks which row stands for a size (rack_check: the worst).
fn series_by_placement(run: &RunData) -> Vec<Series<'_>> {
    Placement::BOTH
        .into_iter()
        .map(|placement| Series {
            label: placement.name().to_string(),
            in_place: placement == Placement::InPlace,
            by_size: run
                .points
                .values()
                .filter(|p| p.first.placement == placement.name())
                .map(|p| (p.first.size_bytes, p))
                .collect(),
            run: 0,
        })
        .filter(|s| !s.by_size.is_empty())
        .collect()
}

/// The busbw chart of one collective's `rows` (one per placement and size)
/// as SVG text, for a page to embed (rack_check's report.html): a line per
/// placement, the limits the rows name (`no_limit` said when none) and the
/// `marks` at their sizes. None when no row can be drawn.
pub fn busbw_svg(
    rows: impl IntoIterator<Item = Row>,
    marks: &[SizeMark],
    no_limit: &str,
) -> anyhow::Result<Option<String>> {
    let run = RunData::from_rows("", rows);
    let series = series_by_placement(&run);
    let Some(first) = series.iter().flat_map(Series::rows).next() else {
        return Ok(None);
    };
    let rows: Vec<&Row> = series.iter().flat_map(Series::rows).collect();
    let chart = busbw::BusbwChart {
        collective: &first.collective,
        setting: &setting_line(&rows),
        series: &series,
        limits: &limits_in(std::slice::from_ref(&run)),
        marks,
        no_limit,
    };
    draw::svg_text(&chart).map(Some)
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
    for row in runs.iter().flat_map(RunData::rows) {
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
    for run in runs {
        run.apply_limits(limits);
    }
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
    let left_out = LeftOut::line(runs.iter().map(|r| (r.label.as_str(), &r.left_out)));
    let collectives: BTreeSet<&str> = runs
        .iter()
        .flat_map(|r| r.rows().map(|row| row.collective.as_str()))
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
        if series.len() > MAX_SERIES {
            bail!(
                "{coll}: {} lines in one chart, more than the {MAX_SERIES} a legend can name; \
                 plot fewer runs, datatypes or ops at a time",
                series.len()
            );
        }
        let rows: Vec<&Row> = series.iter().flat_map(Series::rows).collect();
        let setting = setting_line(&rows);
        written.extend(draw::save(
            dir,
            &format!("{coll}_busbw"),
            &busbw::BusbwChart {
                collective: coll,
                setting: &setting,
                series: &series,
                limits,
                marks: &[],
                no_limit: "no limit (none given with --limit, none detected)",
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
                let row = &s.by_size.get(&size)?.first;
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
        let a = RunData::from_rows(
            "base",
            [row("in-place", 8, 1.0), row("out-of-place", 8, 2.0)],
        );
        let mut b = a.clone();
        b.label = "new".into();
        let one = series_of(std::slice::from_ref(&a), "all_reduce");
        let labels: Vec<&str> = one.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["in-place", "out-of-place"]);
        let both = [a, b];
        let two = series_of(&both, "all_reduce");
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
        let run = [RunData::from_rows("r", rows)];
        let s = &series_of(&run, "all_reduce")[0];
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
        let mut run = RunData::default();
        assert_eq!(run.add(r.clone()), points::Added::NewPoint);
        assert!(csv_ladder(&r).is_empty());
        r.min_us = 1.0; // one figure measured and the others NaN is a broken row
        assert_eq!(run.add(r), points::Added::LeftOut);
        assert!(run.left_out.named[0].ends_with("(p50_us NaN)"));
    }
}
