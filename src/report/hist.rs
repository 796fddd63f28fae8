//! `--hist DIR`: each measurement's per-iteration latency histogram as an
//! HdrHistogram percentile distribution (`.hgrm`), the text that HdrHistogram's
//! `outputPercentileDistribution` writes and its plotters read. Values are
//! microseconds; files go to `DIR/<run_id>/` and are never overwritten.

use super::{Exporter, Row, RunInfo, SizeResult, Summary};
use crate::output::{create_subfolder, write_whole, Replace};
use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Percentile steps per halving of the distance to 100%, as HdrHistogram's tools use.
const TICKS_PER_HALF_DISTANCE: u32 = 5;
/// The histograms hold nanoseconds; the files say microseconds.
const NS_PER_US: f64 = 1e3;

/// One line of a percentile distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Percentile {
    pub value_us: f64,
    /// 0..=1.
    pub quantile: f64,
    /// Iterations at or below this value.
    pub total_count: u64,
}

/// The file of one measurement, named by what the CSV row names:
/// `all_reduce_float_sum_out-of-place_1048576B.hgrm` (`_root0` for rooted
/// collectives, `_cycle2` for passes of -N after the first).
pub fn file_name(row: &Row) -> String {
    let mut name = format!(
        "{}_{}_{}_{}_{}B",
        row.collective, row.datatype, row.redop, row.placement, row.size_bytes
    );
    if row.root >= 0 {
        name += &format!("_root{}", row.root);
    }
    if row.cycle > 0 {
        name += &format!("_cycle{}", row.cycle);
    }
    // --rounds: each round's histogram of a size (round 1 keeps today's name).
    if let Some(round) = row.round.filter(|&r| r > 1) {
        name += &format!("_round{round}");
    }
    name + ".hgrm"
}

/// The percentile ladder of `h`, as HdrHistogram prints it; the last entry is
/// at quantile 1 and counts every value.
pub fn percentiles(h: &Histogram<u64>) -> Vec<Percentile> {
    let mut total = 0;
    let mut out: Vec<Percentile> = h
        .iter_quantiles(TICKS_PER_HALF_DISTANCE)
        .map(|v| {
            total += v.count_since_last_iteration();
            Percentile {
                value_us: v.value_iterated_to() as f64 / NS_PER_US,
                quantile: v.quantile_iterated_to(),
                total_count: total,
            }
        })
        .collect();
    if let Some(last) = out.last_mut() {
        // The closing line (quantile 1) carries the whole count, as in HdrHistogram's own output.
        last.total_count = h.len();
    }
    out
}

/// Writes `h` (nanoseconds) in HdrHistogram's percentile-distribution format,
/// values in microseconds.
pub fn write_hgrm(h: &Histogram<u64>, out: &mut impl Write) -> std::io::Result<()> {
    let digits = h.sigfig() as usize;
    writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    )?;
    for p in percentiles(h) {
        if p.quantile < 1.0 {
            writeln!(
                out,
                "{:>12.digits$} {:2.12} {:>10} {:>14.2}",
                p.value_us,
                p.quantile,
                p.total_count,
                1.0 / (1.0 - p.quantile)
            )?;
        } else {
            writeln!(
                out,
                "{:>12.digits$} {:2.12} {:>10}",
                p.value_us, p.quantile, p.total_count
            )?;
        }
    }
    let sub_buckets = (2 * 10u64.pow(h.sigfig() as u32)).next_power_of_two();
    writeln!(
        out,
        "#[Mean    = {:>12.digits$}, StdDeviation   = {:>12.digits$}]",
        h.mean() / NS_PER_US,
        h.stdev() / NS_PER_US
    )?;
    writeln!(
        out,
        "#[Max     = {:>12.digits$}, Total count    = {:>12}]",
        h.max() as f64 / NS_PER_US,
        h.len()
    )?;
    writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        sub_buckets
    )?;
    Ok(())
}

/// The most of a `.hgrm` file read: the ladder of any histogram this writes is
/// a few hundred lines of 60 bytes.
const MAX_HGRM_BYTES: u64 = 4 << 20;

/// Reads the distribution lines of a `.hgrm` file (header and `#[` footer skipped).
pub fn read_hgrm(path: &Path) -> anyhow::Result<Vec<Percentile>> {
    let text = crate::input::read_text(path, MAX_HGRM_BYTES)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut points = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.is_empty() || fields[0] == "Value" || fields[0].starts_with('#') {
            continue;
        }
        let parsed = (
            fields[0].parse::<f64>(),
            fields.get(1).map(|f| f.parse::<f64>()),
            fields.get(2).map(|f| f.parse::<u64>()),
        );
        let (Ok(value_us), Some(Ok(quantile)), Some(Ok(total_count))) = parsed else {
            bail!(
                "{}:{}: not a percentile-distribution line: '{line}'",
                path.display(),
                n + 1
            );
        };
        points.push(Percentile {
            value_us,
            quantile,
            total_count,
        });
    }
    if points.is_empty() {
        bail!("{}: no percentile lines", path.display());
    }
    Ok(points)
}

/// The `--hist DIR` exporter.
pub struct HistExport {
    dir: PathBuf,
    written: usize,
}

impl HistExport {
    pub fn new(dir: &Path) -> anyhow::Result<HistExport> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--hist {}: cannot create the directory", dir.display()))?;
        Ok(HistExport {
            dir: dir.to_path_buf(),
            written: 0,
        })
    }
}

impl Exporter for HistExport {
    fn start(&mut self, run: &RunInfo) -> anyhow::Result<()> {
        self.dir = self.dir.join(&run.run_id);
        create_subfolder(&self.dir)
            .with_context(|| format!("--hist: cannot create {}", self.dir.display()))
    }

    /// Each histogram written whole: a full disk leaves none of it.
    fn record(&mut self, run: &RunInfo, result: &SizeResult) -> anyhow::Result<()> {
        for m in &result.measurements {
            let path = self.dir.join(file_name(&Row::collective(run, result, m)));
            let mut text = Vec::new();
            write_hgrm(&m.histogram, &mut text)?;
            write_whole(&path, Replace::Never, &text)
                .with_context(|| format!("--hist: cannot write {}", path.display()))?;
            self.written += 1;
        }
        Ok(())
    }

    fn finish(&mut self, _run: &RunInfo, _summary: &Summary) -> anyhow::Result<()> {
        eprintln!(
            "fabricbench: {} latency histograms (.hgrm, microseconds) in {}",
            self.written,
            self.dir.display()
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::histogram;

    #[test]
    fn hgrm_has_hdrhistogram_layout() {
        // 1..=1000 us.
        let secs: Vec<f64> = (1..=1000).map(|us| us as f64 * 1e-6).collect();
        let h = histogram(&secs);
        let mut out = Vec::new();
        write_hgrm(&h, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "       Value     Percentile TotalCount 1/(1-Percentile)"
        );
        assert_eq!(lines[1], "");
        assert_eq!(
            lines[2],
            "       1.000 0.000000000000          1           1.00"
        );
        let footer = &lines[lines.len() - 3..];
        // HdrHistogram's mean and deviation use each bucket's middle value.
        assert_eq!(
            footer[0],
            "#[Mean    =      500.505, StdDeviation   =      288.676]"
        );
        assert_eq!(
            footer[1],
            "#[Max     =     1000.447, Total count    =         1000]"
        );
        assert_eq!(
            footer[2],
            "#[Buckets =           32, SubBuckets     =         2048]"
        );
        // The last distribution line: quantile 1, every value counted, no 1/(1-p) column.
        let last: Vec<&str> = lines[lines.len() - 4].split_whitespace().collect();
        assert_eq!(last, ["1000.447", "1.000000000000", "1000"]);
        // Counts never decrease and the ladder reaches the 99.9th percentile.
        let points = percentiles(&h);
        assert!(points
            .windows(2)
            .all(|w| w[0].total_count <= w[1].total_count));
        assert!(points
            .iter()
            .any(|p| p.quantile >= 0.999 && p.quantile < 1.0));
    }

    #[test]
    fn read_back_what_was_written() {
        let secs: Vec<f64> = (1..=50).map(|us| us as f64 * 1e-5).collect();
        let h = histogram(&secs);
        let dir = std::env::temp_dir().join(format!("fb-hgrm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.hgrm");
        write_hgrm(&h, &mut std::fs::File::create(&path).unwrap()).unwrap();
        let back = read_hgrm(&path).unwrap();
        let written = percentiles(&h);
        assert_eq!(back.len(), written.len());
        assert_eq!(back.last().unwrap().total_count, 50);
        assert!((back[3].value_us - written[3].value_us).abs() < 1e-3);
        std::fs::write(&path, "garbage here\n").unwrap();
        assert!(read_hgrm(&path)
            .unwrap_err()
            .to_string()
            .contains("x.hgrm:1: not a percentile-distribution line"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_follow_the_row() {
        let mut row = Row {
            collective: "reduce".into(),
            datatype: "float".into(),
            redop: "sum".into(),
            placement: "in-place".into(),
            size_bytes: 1024,
            root: 2,
            ..Row::default()
        };
        assert_eq!(
            file_name(&row),
            "reduce_float_sum_in-place_1024B_root2.hgrm"
        );
        row.root = -1;
        row.cycle = 1;
        assert_eq!(
            file_name(&row),
            "reduce_float_sum_in-place_1024B_cycle1.hgrm"
        );
    }
}
