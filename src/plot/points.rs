//! What the charts draw, in memory bounded by what they draw: rows are averaged
//! as they come into one [`Point`] per line and size (every -N cycle of it),
//! and a row no chart can draw is counted and named, never kept. `plot` streams
//! its CSVs through [`load_runs`], so a file of any length takes memory by its
//! points, and more than [`MAX_POINTS`] are refused with the fix.

use crate::limits::{percent_of, Limit};
use crate::report::csv::for_each_row;
use crate::report::hist::{self, Percentile};
use crate::report::Row;
use crate::sizes::human_bytes;
use anyhow::bail;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The most points (one per line and size) one `plot` draws. A CSV of a long
/// `-N 0` run averages into a few; one of tens of thousands of distinct runs
/// or sizes is no chart anyone can read, and its pictures would be hundreds of
/// MB: it is refused before its rows take the memory.
pub const MAX_POINTS: usize = 50_000;

/// Left-out rows named in the warning; the others are counted.
const NAMED: usize = 5;

/// What the charts average over a point's rows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Averaged {
    Busbw,
    PctOfLimit,
    P50,
    P99,
    P999,
}

impl Averaged {
    const ALL: [Averaged; 5] = [
        Averaged::Busbw,
        Averaged::PctOfLimit,
        Averaged::P50,
        Averaged::P99,
        Averaged::P999,
    ];

    fn of(self, row: &Row) -> f64 {
        match self {
            Averaged::Busbw => row.busbw_gbs,
            Averaged::PctOfLimit => row.pct_of_limit.unwrap_or(0.0),
            Averaged::P50 => row.p50_us,
            Averaged::P99 => row.p99_us,
            Averaged::P999 => row.p999_us,
        }
    }
}

/// One line's rows of one size: the first row whole (the distribution chart and
/// its `--hist` file are of it), and the sums of what the charts average.
#[derive(Clone, Debug)]
pub struct Point {
    pub first: Row,
    rows: usize,
    sums: [f64; 5],
}

impl Point {
    fn new(row: Row) -> Point {
        let mut point = Point {
            sums: [0.0; 5],
            rows: 0,
            first: row.clone(),
        };
        point.add(&row);
        point
    }

    fn add(&mut self, row: &Row) {
        for (sum, a) in self.sums.iter_mut().zip(Averaged::ALL) {
            *sum += a.of(row);
        }
        self.rows += 1;
    }

    /// `a` averaged over the point's rows.
    pub fn mean(&self, a: Averaged) -> f64 {
        self.sums[a as usize] / self.rows as f64
    }

    /// The average % of limit, where the rows have a limit.
    pub fn pct_of_limit(&self) -> Option<f64> {
        self.first
            .pct_of_limit
            .map(|_| self.mean(Averaged::PctOfLimit))
    }

    /// Takes `limit` for every row of the point (`plot --limit`): % of limit is
    /// linear in busbw, so the average follows from the sum of busbw.
    fn set_limit(&mut self, limit: Option<&Limit>) {
        self.first.set_limit(limit);
        let busbw = self.sums[Averaged::Busbw as usize];
        self.sums[Averaged::PctOfLimit as usize] = limit.map_or(0.0, |l| percent_of(busbw, l));
    }
}

/// What makes rows one point: the line (collective, datatype, op, root, ranks,
/// placement) and the size.
type PointKey = (String, String, String, i64, usize, String, u64);

fn key_of(row: &Row) -> PointKey {
    (
        row.collective.clone(),
        row.datatype.clone(),
        row.redop.clone(),
        row.root,
        row.nranks,
        row.placement.clone(),
        row.size_bytes,
    )
}

/// What no chart could draw, as it came: the first few named, all counted.
#[derive(Clone, Debug, Default)]
pub struct LeftOut {
    pub named: Vec<String>,
    pub count: usize,
}

impl LeftOut {
    fn note(&mut self, what: impl FnOnce() -> String) {
        if self.named.len() < NAMED {
            self.named.push(what());
        }
        self.count += 1;
    }

    /// The one warning line for what the runs left out, each named with its run.
    pub fn line<'a>(runs: impl Iterator<Item = (&'a str, &'a LeftOut)>) -> Option<String> {
        let (mut named, mut count) = (Vec::new(), 0);
        for (label, left_out) in runs {
            named.extend(left_out.named.iter().map(|w| format!("{label} {w}")));
            count += left_out.count;
        }
        let shown = named.len().min(NAMED);
        let more = count - shown;
        (count > 0).then(|| {
            format!(
                "left out {} no chart can draw (a value that is NaN, inf or negative, or a size of 0): {}{}",
                match count {
                    1 => "1 row".to_string(),
                    n => format!("{n} rows"),
                },
                named[..shown].join("; "),
                match more {
                    0 => String::new(),
                    n => format!("; and {n} more"),
                }
            )
        })
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

/// What adding a row did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Added {
    /// It began a point of its own.
    NewPoint,
    /// It was averaged into the point of an earlier row.
    Averaged,
    /// No chart can draw it: counted in `left_out`.
    LeftOut,
}

/// The points of one run, with whatever full latency distributions are known.
#[derive(Clone, Debug, Default)]
pub struct RunData {
    /// How the run is named in legends (file stem, or run id).
    pub label: String,
    pub points: BTreeMap<PointKey, Point>,
    /// Percentile ladders keyed by `hist::file_name` of their point's first row.
    pub distributions: HashMap<String, Vec<Percentile>>,
    pub left_out: LeftOut,
}

impl RunData {
    /// The run of `rows`, labelled `label`.
    pub fn from_rows(label: &str, rows: impl IntoIterator<Item = Row>) -> RunData {
        let mut run = RunData {
            label: label.to_string(),
            ..RunData::default()
        };
        for row in rows {
            run.add(row);
        }
        run
    }

    /// Averages `row` into its point, or leaves it out.
    pub fn add(&mut self, row: Row) -> Added {
        if let Some((column, value)) = undrawable(&row) {
            self.left_out.note(|| {
                format!(
                    "{} {} {} ({column} {value})",
                    row.collective,
                    row.placement,
                    human_bytes(row.size_bytes)
                )
            });
            return Added::LeftOut;
        }
        match self.points.get_mut(&key_of(&row)) {
            Some(point) => {
                point.add(&row);
                Added::Averaged
            }
            None => {
                self.points.insert(key_of(&row), Point::new(row));
                Added::NewPoint
            }
        }
    }

    /// The rows a chart stands for: each point's first.
    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.points.values().map(|p| &p.first)
    }

    /// Keeps the full ladder `name` of a point, without the percentiles no
    /// chart can draw (a value that is not positive and finite).
    pub fn insert_distribution(&mut self, name: String, mut points: Vec<Percentile>) {
        let before = points.len();
        points.retain(|p| p.value_us.is_finite() && p.value_us > 0.0);
        if points.len() < before {
            let dropped = before - points.len();
            self.left_out
                .note(|| format!("{name} ({dropped} percentiles)"));
        }
        self.distributions.insert(name, points);
    }

    /// Loads, for every point, `<dir>/<run_id>/<hist file name>` where it exists
    /// (as `--hist DIR` writes them); returns how many were found.
    pub fn load_histograms(&mut self, dir: &Path) -> anyhow::Result<usize> {
        let mut found = Vec::new();
        for row in self.rows() {
            let name = hist::file_name(row);
            let path = dir.join(&row.run_id).join(&name);
            if path.exists() {
                found.push((name, hist::read_hgrm(&path)?));
            }
        }
        let count = found.len();
        for (name, ladder) in found {
            self.insert_distribution(name, ladder);
        }
        Ok(count)
    }

    /// Takes the lowest of `limits` for every point (`plot --limit`).
    pub fn apply_limits(&mut self, limits: &[Limit]) {
        let binding = crate::limits::binding(limits);
        for point in self.points.values_mut() {
            point.set_limit(binding);
        }
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
    let unique = stems
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        == stems.len();
    if unique {
        stems
    } else {
        paths.iter().map(|p| p.display().to_string()).collect()
    }
}

/// The runs of CSV files, one per file and run id (a file written with
/// --append may hold several), labelled by file, and by run id where a file
/// holds several. Rows stream in and are averaged at once; more than
/// [`MAX_POINTS`] points in all are refused.
pub fn load_runs(paths: &[PathBuf]) -> anyhow::Result<Vec<RunData>> {
    let mut runs = Vec::new();
    let mut points = 0;
    for (path, label) in paths.iter().zip(file_labels(paths)) {
        let mut by_run: BTreeMap<String, RunData> = BTreeMap::new();
        for_each_row(path, |row| {
            let run = by_run.entry(row.run_id.clone()).or_default();
            if run.add(row) == Added::NewPoint {
                points += 1;
            }
            if points > MAX_POINTS {
                bail!(
                    "{}: more than {MAX_POINTS} points to draw (one per run, collective, datatype, op, \
                     root, rank count, placement and size; -N cycles are averaged into one): plot a part \
                     at a time, e.g. the rows of one run_id (pandas: df[df.run_id == ID].to_csv(PATH))",
                    path.display()
                );
            }
            Ok(())
        })?;
        let several = by_run.len() > 1;
        runs.extend(by_run.into_iter().map(|(run_id, mut run)| {
            run.label = match several {
                true => format!("{label} {run_id}"),
                false => label.clone(),
            };
            run
        }));
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cycle: u64, size: u64, busbw: f64) -> Row {
        Row {
            collective: "all_reduce".into(),
            placement: "in-place".into(),
            cycle,
            size_bytes: size,
            busbw_gbs: busbw,
            p50_us: busbw,
            pct_of_limit: Some(busbw),
            ..Row::default()
        }
    }

    #[test]
    fn cycles_average_into_one_point_that_keeps_its_first_row() {
        let run = RunData::from_rows("r", [row(0, 8, 1.0), row(1, 8, 3.0), row(0, 16, 5.0)]);
        assert_eq!(run.points.len(), 2);
        let p = run.points.values().next().unwrap();
        assert_eq!((p.mean(Averaged::Busbw), p.mean(Averaged::P50)), (2.0, 2.0));
        assert_eq!(p.pct_of_limit(), Some(2.0));
        assert_eq!(p.first.cycle, 0);
        let mut run = run;
        run.apply_limits(&[Limit {
            name: "l".into(),
            gbs: 4.0,
        }]);
        let p = run.points.values().next().unwrap();
        assert_eq!(p.pct_of_limit(), Some(50.0));
    }

    #[test]
    fn rows_no_chart_can_draw_are_counted_and_the_first_named() {
        let mut run = RunData::default();
        for size in 1..=7 {
            assert_eq!(run.add(row(0, size, f64::NAN)), Added::LeftOut);
        }
        assert_eq!(run.add(row(0, 0, 1.0)), Added::LeftOut);
        assert_eq!((run.left_out.count, run.left_out.named.len()), (8, NAMED));
        let line = LeftOut::line([("r", &run.left_out)].into_iter()).unwrap();
        assert!(
            line.starts_with("left out 8 rows no chart can draw")
                && line.contains(": r all_reduce in-place 1 B (busbw_gbs NaN); r all_reduce")
                && line.ends_with("; and 3 more"),
            "{line}"
        );
        assert_eq!(LeftOut::line(std::iter::empty()), None);
    }
}
