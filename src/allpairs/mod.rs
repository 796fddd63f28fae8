//! All-pairs: every pair of ranks measured on its own, in rounds of disjoint pairs
//! (`schedule`), so one slow link or node stands out instead of slowing a
//! collective. The runner here is independent of what a pair measurement is:
//! `mpi` measures MPI point-to-point for `sendrecv_perf --all-pairs`, and an
//! RDMA verbs pair (ib_write_bw/ib_write_lat) plugs in through `PairMeasure`.
//!
//! Results are N x N matrices per size (time and algbw, and wrong bytes when
//! validated), written as one CSV (format below) and a heatmap (`heatmap`);
//! `judge` flags pairs below a fraction of the median bandwidth or above a
//! multiple of the lowest latency, and names a node all of whose pairs are slow.
//!
//! CSV: header `metric,size_bytes,node,<node 0>,...,<node N-1>`, then for each
//! size N rows per metric (`time_us` the mean time of an exchange, `p50_us` its
//! median, `algbw_gbs` size over mean time, and `wrong_bytes` when validated):
//! row `node` i, column j holds the value of pair (i, j); the matrix is symmetric
//! (each pair is measured once, both directions at once) and the diagonal is empty.

pub mod heatmap;
pub mod mpi;
pub mod schedule;

use crate::job::world::World;
use crate::job::{agree, ExitStatus, Failure};
use crate::sizes::human_bytes;
use crate::watchdog::Watchdog;
use anyhow::{bail, Context};
use schedule::{partner, round_robin};
use std::io::Write;
use std::path::Path;

/// One pair measurement as one rank of the pair timed it.
#[derive(Clone, Copy, Debug)]
pub struct PairSample {
    /// Mean seconds per exchange.
    pub seconds: f64,
    /// Median seconds of one exchange: latency is judged on it, as perftest's
    /// t_typical, so one descheduled iteration does not make a pair slow.
    pub p50_seconds: f64,
    /// Bytes received wrong in validation; None when not validated.
    pub wrong: Option<u64>,
}

/// A way of measuring one pair, driven by `measure_all_pairs` on both ranks of
/// the pair at the same time.
pub trait PairMeasure {
    /// What one exchange is, for the header: "MPI_Sendrecv, both directions at once".
    fn describe(&self) -> String;
    /// Warm-up, then timed exchanges of `bytes` with `peer`, calling
    /// `watchdog.enter_call()` before each so a hang is reported.
    fn measure(
        &mut self,
        peer: usize,
        bytes: usize,
        watchdog: &Watchdog,
    ) -> anyhow::Result<PairSample>;
}

/// An N x N matrix of one metric; None on the diagonal and where nothing was measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix(pub Vec<Vec<Option<f64>>>);

impl Matrix {
    pub fn empty(n: usize) -> Matrix {
        Matrix(vec![vec![None; n]; n])
    }

    pub fn set(&mut self, a: usize, b: usize, value: f64) {
        self.0[a][b] = Some(value);
        self.0[b][a] = Some(value);
    }

    pub fn get(&self, a: usize, b: usize) -> Option<f64> {
        self.0[a][b]
    }

    /// Each measured pair once: (a, b, value) with a < b.
    pub fn pairs(&self) -> Vec<(usize, usize, f64)> {
        let n = self.0.len();
        (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .filter_map(|(a, b)| self.get(a, b).map(|v| (a, b, v)))
            .collect()
    }
}

/// The matrices of one message size.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeMatrices {
    pub size_bytes: u64,
    pub time_us: Matrix,
    pub p50_us: Matrix,
    pub algbw_gbs: Matrix,
    pub wrong_bytes: Option<Matrix>,
}

/// Everything an all-pairs run measured.
/// Bandwidth is judged at the largest size when it is at least this, latency at the
/// smallest when it is at most this.
pub const JUDGE_SIZE: u64 = 64 << 10;

#[derive(Clone, Debug, PartialEq)]
pub struct PairResults {
    /// One per participant: the host name, or "host/rank" where ranks share a host.
    pub labels: Vec<String>,
    /// In sweep order.
    pub sizes: Vec<SizeMatrices>,
}

/// Labels for the ranks of a job: host names, or host/rank when hosts repeat.
pub fn labels(hosts: &[String]) -> Vec<String> {
    let unique = hosts
        .iter()
        .enumerate()
        .all(|(i, h)| !hosts[..i].contains(h));
    hosts
        .iter()
        .enumerate()
        .map(|(r, h)| {
            if unique {
                h.clone()
            } else {
                format!("{h}/{r}")
            }
        })
        .collect()
}

/// Values each rank sends per round and size (see `measure_all_pairs`).
const SAMPLE_LEN: usize = 3;

/// Runs every round on every rank; rank 0 returns the matrices.
pub fn measure_all_pairs(
    world: &World,
    measure: &mut dyn PairMeasure,
    sizes: &[u64],
    watchdog: &Watchdog,
) -> anyhow::Result<Option<PairResults>> {
    let rounds = round_robin(world.size);
    // Per round and size: mean and median seconds (NaN on a bye), wrong bytes (-1: not checked).
    let mut mine = Vec::with_capacity(rounds.len() * sizes.len() * SAMPLE_LEN);
    for (r, round) in rounds.iter().enumerate() {
        watchdog.begin(format!(
            "all-pairs round {} of {} (barrier)",
            r + 1,
            rounds.len()
        ));
        watchdog.enter_call();
        world.barrier();
        watchdog.end();
        let peer = partner(round, world.rank);
        for &size in sizes {
            let sample = match peer {
                Some(p) => {
                    watchdog.begin(format!(
                        "all-pairs round {} of {}: ranks {} and {p}, {size} B",
                        r + 1,
                        rounds.len(),
                        world.rank
                    ));
                    let s = measure.measure(p, size as usize, watchdog)?;
                    watchdog.end();
                    s
                }
                None => PairSample {
                    seconds: f64::NAN,
                    p50_seconds: f64::NAN,
                    wrong: None,
                },
            };
            mine.extend([
                sample.seconds,
                sample.p50_seconds,
                sample.wrong.map_or(-1.0, |w| w as f64),
            ]);
        }
    }
    watchdog.begin("all-pairs (gathering results)".into());
    watchdog.enter_call();
    let gathered = world.gather_f64s(&mine);
    watchdog.end();
    let Some(all) = gathered else { return Ok(None) };
    let per_rank: Vec<&[f64]> = all.chunks_exact(mine.len().max(1)).collect();
    let n = world.size;
    let checked = all.iter().skip(2).step_by(SAMPLE_LEN).any(|&w| w >= 0.0);
    let mut results = PairResults {
        labels: labels(&world.hosts),
        sizes: sizes
            .iter()
            .map(|&size_bytes| SizeMatrices {
                size_bytes,
                time_us: Matrix::empty(n),
                p50_us: Matrix::empty(n),
                algbw_gbs: Matrix::empty(n),
                wrong_bytes: checked.then(|| Matrix::empty(n)),
            })
            .collect(),
    };
    for (r, round) in rounds.iter().enumerate() {
        for &(a, b) in round {
            for (s, m) in results.sizes.iter_mut().enumerate() {
                let at = (r * sizes.len() + s) * SAMPLE_LEN;
                // The pair took as long as its slower side.
                let slower = |k: usize| per_rank[a][at + k].max(per_rank[b][at + k]);
                let seconds = slower(0);
                m.time_us.set(a, b, seconds * 1e6);
                m.p50_us.set(a, b, slower(1) * 1e6);
                m.algbw_gbs.set(a, b, m.size_bytes as f64 / seconds / 1e9);
                if let Some(w) = &mut m.wrong_bytes {
                    w.set(
                        a,
                        b,
                        per_rank[a][at + 2].max(0.0) + per_rank[b][at + 2].max(0.0),
                    );
                }
            }
        }
    }
    Ok(Some(results))
}

/// One all-pairs run, whatever measures the pairs.
pub struct PairRun<'a> {
    /// The binary's name, for messages.
    pub program: &'a str,
    pub sizes: Vec<u64>,
    /// Timed exchanges per pair and size (for the header).
    pub iters: usize,
    pub thresholds: Thresholds,
    /// The matrix CSV (a new file; the heatmap goes beside it as .png).
    pub csv: Option<&'a Path>,
    /// -T: a pair that hangs this long ends the job (0 = never).
    pub timeout_s: u64,
}

/// Measures every pair with `measure` and, on rank 0, prints the table and
/// writes the CSV and heatmap. Exit status 1 when a pair is slow or received
/// wrong data. Every rank calls it.
pub(crate) fn run_pairs(
    world: &World,
    measure: &mut dyn PairMeasure,
    run: &PairRun,
) -> Result<ExitStatus, Failure> {
    let program = run.program;
    // Every rank has checked that the CSV does not exist yet before rank 0 creates it.
    world.barrier();
    let csv = match (run.csv, world.is_root()) {
        (Some(path), true) => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map(Some)
            .map_err(|e| format!("--csv {}: {e}", path.display())),
        _ => Ok(None),
    };
    agree(
        world,
        program,
        ExitStatus::Failed,
        csv.as_ref().map(|_| ()).map_err(Clone::clone),
    )?;
    let watchdog = Watchdog::start(world, program, run.timeout_s)?;
    if world.is_root() {
        println!(
            "# {program} --all-pairs: {} ranks, {} rounds of disjoint pairs, {} sizes from {} to {} B, {} iterations each",
            world.size,
            round_robin(world.size).len(),
            run.sizes.len(),
            run.sizes.first().copied().unwrap_or(0),
            run.sizes.last().copied().unwrap_or(0),
            run.iters
        );
        println!("# each pair: {}", measure.describe());
    }
    let Some(results) = measure_all_pairs(world, measure, &run.sizes, &watchdog)? else {
        return Ok(ExitStatus::Ok);
    };
    let verdict = results.judge(&run.thresholds);
    write_table(&mut std::io::stdout(), &results, &verdict, &run.thresholds)
        .map_err(|e| Failure::Fatal(e.into()))?;
    if let (Ok(Some(file)), Some(path)) = (csv, run.csv) {
        write_csv(file, &results).map_err(Failure::Fatal)?;
        let png = path.with_extension("png");
        let drawn = if png.exists() {
            Err(anyhow::anyhow!(
                "{} exists and is never overwritten: no heatmap drawn",
                png.display()
            ))
        } else {
            heatmap::write_png(&png, &results, &verdict, program)
        };
        match drawn {
            Ok(()) => println!("# matrix: {}  heatmap: {}", path.display(), png.display()),
            Err(e) => eprintln!("{program}: warning: {e:#}"),
        }
    }
    Ok(if verdict.passed() {
        ExitStatus::Ok
    } else {
        ExitStatus::Failed
    })
}

/// When a pair counts as slow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// Bandwidth below this fraction of the median pair's (at the largest size).
    pub bw_fraction: f64,
    /// Median latency above this multiple of the fastest pair's (at the smallest size).
    pub latency_factor: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            bw_fraction: 0.9,
            latency_factor: 2.0,
        }
    }
}

impl Thresholds {
    /// Checks the values of --slow-fraction and --slow-latency (or a spec's).
    pub fn new(bw_fraction: f64, latency_factor: f64) -> Result<Thresholds, String> {
        if !(bw_fraction > 0.0 && bw_fraction <= 1.0) {
            return Err(format!(
                "--slow-fraction {bw_fraction}: give a fraction of the median in (0, 1], e.g. 0.9"
            ));
        }
        if latency_factor.is_nan() || latency_factor < 1.0 {
            return Err(format!(
                "--slow-latency {latency_factor}: give a multiple of the lowest latency >= 1, e.g. 2"
            ));
        }
        Ok(Thresholds {
            bw_fraction,
            latency_factor,
        })
    }
}

/// A pair that crossed a threshold, with its value and the limit it crossed.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowPair {
    pub a: usize,
    pub b: usize,
    pub value: f64,
    pub limit: f64,
}

/// What the matrices say.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub bw_size: u64,
    pub median_gbs: f64,
    pub slow_bw: Vec<SlowPair>,
    pub latency_size: u64,
    pub min_us: f64,
    pub slow_latency: Vec<SlowPair>,
    /// Pairs that received wrong data, with the byte count.
    pub wrong: Vec<(usize, usize, u64)>,
    /// Participants every one of whose pairs is slow while some other pair is not.
    pub suspects: Vec<usize>,
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

impl PairResults {
    /// Bandwidth is judged at the largest size, latency at the smallest.
    pub fn judge(&self, t: &Thresholds) -> Verdict {
        let n = self.labels.len();
        let (Some(small), Some(large)) = (
            self.sizes.iter().min_by_key(|s| s.size_bytes),
            self.sizes.iter().max_by_key(|s| s.size_bytes),
        ) else {
            return Verdict {
                bw_size: 0,
                median_gbs: f64::NAN,
                slow_bw: Vec::new(),
                latency_size: 0,
                min_us: f64::NAN,
                slow_latency: Vec::new(),
                wrong: Vec::new(),
                suspects: Vec::new(),
            };
        };
        // Bandwidth is judged where messages are large enough to be bandwidth-bound,
        // latency where they are small: a 2-byte ib_write_lat run is judged on
        // latency alone, a 1 GiB sendrecv sweep on bandwidth alone.
        let bw = if large.size_bytes >= JUDGE_SIZE {
            large.algbw_gbs.pairs()
        } else {
            Vec::new()
        };
        let median_gbs = median(&mut bw.iter().map(|p| p.2).collect::<Vec<_>>());
        let bw_limit = t.bw_fraction * median_gbs;
        let slow_bw: Vec<SlowPair> = bw
            .iter()
            .filter(|p| p.2 < bw_limit)
            .map(|&(a, b, value)| SlowPair {
                a,
                b,
                value,
                limit: bw_limit,
            })
            .collect();
        let lat = if small.size_bytes <= JUDGE_SIZE {
            small.p50_us.pairs()
        } else {
            Vec::new()
        };
        let min_us = lat.iter().map(|p| p.2).fold(f64::INFINITY, f64::min);
        let lat_limit = t.latency_factor * min_us;
        let slow_latency: Vec<SlowPair> = lat
            .iter()
            .filter(|p| p.2 > lat_limit)
            .map(|&(a, b, value)| SlowPair {
                a,
                b,
                value,
                limit: lat_limit,
            })
            .collect();
        let wrong: Vec<(usize, usize, u64)> = self
            .sizes
            .iter()
            .filter_map(|s| s.wrong_bytes.as_ref())
            .flat_map(|w| w.pairs())
            .filter(|p| p.2 > 0.0)
            .map(|(a, b, w)| (a, b, w as u64))
            .collect();
        let slow = |a: usize, b: usize| {
            slow_bw
                .iter()
                .chain(&slow_latency)
                .any(|p| (p.a, p.b) == (a.min(b), a.max(b)))
        };
        // A node is suspect when all its pairs are slow while some pair without it is
        // not: were every pair slow, nothing would single out one node.
        let measured = |a: usize, b: usize| large.algbw_gbs.get(a, b).is_some();
        let suspects = (0..n)
            .filter(|&i| {
                let others = (0..n).filter(|&j| j != i);
                others.clone().all(|j| slow(i, j))
                    && others.clone().any(|a| {
                        others
                            .clone()
                            .any(|b| a < b && measured(a, b) && !slow(a, b))
                    })
            })
            .collect();
        Verdict {
            bw_size: large.size_bytes,
            median_gbs,
            slow_bw,
            latency_size: small.size_bytes,
            min_us,
            slow_latency,
            wrong,
            suspects,
        }
    }
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.slow_bw.is_empty() && self.slow_latency.is_empty() && self.wrong.is_empty()
    }

    /// One line per finding, naming the nodes: for the table and the rack report.
    pub fn lines(&self, labels: &[String], t: &Thresholds) -> Vec<String> {
        let pair = |p: &SlowPair| format!("{} <-> {}", labels[p.a], labels[p.b]);
        let mut lines = Vec::new();
        for p in &self.slow_bw {
            lines.push(format!(
                "slow pair {}: algbw {:.3} GB/s at {} < {:.3} ({} x median {:.3})",
                pair(p),
                p.value,
                human_bytes(self.bw_size),
                p.limit,
                t.bw_fraction,
                self.median_gbs
            ));
        }
        for p in &self.slow_latency {
            lines.push(format!(
                "slow pair {}: median time {:.2} us at {} > {:.2} ({} x lowest {:.2})",
                pair(p),
                p.value,
                human_bytes(self.latency_size),
                p.limit,
                t.latency_factor,
                self.min_us
            ));
        }
        for &(a, b, w) in &self.wrong {
            lines.push(format!(
                "wrong data between {} and {}: {w} bytes",
                labels[a], labels[b]
            ));
        }
        for &s in &self.suspects {
            lines.push(format!(
                "suspect node {}: all {} of its pairs are slow",
                labels[s],
                labels.len() - 1
            ));
        }
        lines
    }
}

const METRICS: [&str; 4] = ["time_us", "p50_us", "algbw_gbs", "wrong_bytes"];

/// Writes the matrices as the CSV described at the top of this file.
pub fn write_csv(out: impl Write, results: &PairResults) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    let mut header = vec!["metric".to_string(), "size_bytes".into(), "node".into()];
    header.extend(results.labels.iter().cloned());
    w.write_record(&header)?;
    for s in &results.sizes {
        let matrices = [
            Some(&s.time_us),
            Some(&s.p50_us),
            Some(&s.algbw_gbs),
            s.wrong_bytes.as_ref(),
        ];
        for (metric, m) in METRICS.iter().zip(matrices) {
            let Some(m) = m else { continue };
            for (i, row) in m.0.iter().enumerate() {
                let mut record = vec![
                    metric.to_string(),
                    s.size_bytes.to_string(),
                    results.labels[i].clone(),
                ];
                record.extend(
                    row.iter()
                        .map(|v| v.map_or(String::new(), |v| v.to_string())),
                );
                w.write_record(&record)?;
            }
        }
    }
    w.flush()?;
    Ok(())
}

/// Reads a CSV written by `write_csv` (rack_check judges it with its own thresholds).
pub fn read_csv(path: &Path) -> anyhow::Result<PairResults> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let header: Vec<String> = reader.headers()?.iter().map(str::to_string).collect();
    if header.len() < 5 || header[..3] != ["metric", "size_bytes", "node"] {
        bail!(
            "{}: not an all-pairs matrix CSV (header {:?})",
            path.display(),
            header
        );
    }
    let labels = header[3..].to_vec();
    let n = labels.len();
    let mut sizes: Vec<SizeMatrices> = Vec::new();
    for record in reader.records() {
        let record = record?;
        let bad = || format!("{}: malformed row {:?}", path.display(), record);
        let metric = record.get(0).unwrap_or("");
        let size_bytes: u64 = record
            .get(1)
            .and_then(|s| s.parse().ok())
            .with_context(bad)?;
        let row = labels
            .iter()
            .position(|l| Some(l.as_str()) == record.get(2))
            .with_context(bad)?;
        if sizes.last().map_or(true, |s| s.size_bytes != size_bytes) {
            sizes.push(SizeMatrices {
                size_bytes,
                time_us: Matrix::empty(n),
                p50_us: Matrix::empty(n),
                algbw_gbs: Matrix::empty(n),
                wrong_bytes: None,
            });
        }
        let s = sizes.last_mut().expect("pushed above");
        let m = match metric {
            "time_us" => &mut s.time_us,
            "p50_us" => &mut s.p50_us,
            "algbw_gbs" => &mut s.algbw_gbs,
            "wrong_bytes" => s.wrong_bytes.get_or_insert_with(|| Matrix::empty(n)),
            _ => bail!("{}: unknown metric '{metric}'", path.display()),
        };
        for (col, cell) in record.iter().skip(3).enumerate().take(n) {
            m.0[row][col] = if cell.is_empty() {
                None
            } else {
                Some(cell.parse().with_context(bad)?)
            };
        }
    }
    Ok(PairResults { labels, sizes })
}

/// The matrix of one metric as aligned text, "-" on the diagonal.
fn write_matrix(
    out: &mut dyn Write,
    title: &str,
    labels: &[String],
    m: &Matrix,
) -> std::io::Result<()> {
    let width = labels.iter().map(|l| l.len()).max().unwrap_or(0).max(10);
    writeln!(out, "# {title}")?;
    write!(out, "{:>width$}", "")?;
    for l in labels {
        write!(out, " {l:>width$}")?;
    }
    writeln!(out)?;
    for (i, row) in m.0.iter().enumerate() {
        write!(out, "{:>width$}", labels[i])?;
        for v in row {
            match v {
                Some(v) => write!(out, " {:>width$}", crate::report::table::fit(*v, width))?,
                None => write!(out, " {:>width$}", "-")?,
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The stdout report: bandwidth at the largest size, time at the smallest, the verdict.
pub fn write_table(
    out: &mut dyn Write,
    results: &PairResults,
    verdict: &Verdict,
    t: &Thresholds,
) -> std::io::Result<()> {
    let by_size = |size: u64| results.sizes.iter().find(|s| s.size_bytes == size);
    if let Some(s) = by_size(verdict.bw_size) {
        write_matrix(
            out,
            &format!("algbw (GB/s) of each pair at {} B", s.size_bytes),
            &results.labels,
            &s.algbw_gbs,
        )?;
    }
    if let Some(s) = by_size(verdict.latency_size) {
        write_matrix(
            out,
            &format!("median time (us) of each pair at {} B", s.size_bytes),
            &results.labels,
            &s.p50_us,
        )?;
    }
    writeln!(
        out,
        "# median algbw {:.3} GB/s at {} B: pairs below {} x median are slow; lowest median time {:.2} us at {} B: pairs above {} x lowest are slow",
        verdict.median_gbs, verdict.bw_size, t.bw_fraction, verdict.min_us, verdict.latency_size, t.latency_factor
    )?;
    let lines = verdict.lines(&results.labels, t);
    if lines.is_empty() {
        writeln!(out, "# all-pairs: no slow pair")?;
    }
    for line in lines {
        writeln!(out, "# {line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// n nodes, every pair at `fast` GB/s and 5 us except those touching `slow_node`.
    fn results(n: usize, slow_node: Option<usize>, fast: f64, slow: f64) -> PairResults {
        let mut small = SizeMatrices {
            size_bytes: 8,
            time_us: Matrix::empty(n),
            p50_us: Matrix::empty(n),
            algbw_gbs: Matrix::empty(n),
            wrong_bytes: None,
        };
        let mut large = small.clone();
        large.size_bytes = 1 << 20;
        for a in 0..n {
            for b in a + 1..n {
                let is_slow = slow_node.is_some_and(|s| s == a || s == b);
                large.algbw_gbs.set(a, b, if is_slow { slow } else { fast });
                small.time_us.set(a, b, if is_slow { 60.0 } else { 6.0 });
                small.p50_us.set(a, b, if is_slow { 50.0 } else { 5.0 });
            }
        }
        PairResults {
            labels: (0..n).map(|i| format!("node{i}")).collect(),
            sizes: vec![small, large],
        }
    }

    #[test]
    fn a_healthy_rack_has_no_slow_pair() {
        let v = results(8, None, 45.0, 0.0).judge(&Thresholds::default());
        assert!(v.passed(), "{v:?}");
        assert_eq!(v.median_gbs, 45.0);
        assert_eq!(v.min_us, 5.0);
    }

    #[test]
    fn the_slow_node_is_named() {
        let r = results(8, Some(5), 45.0, 20.0);
        let v = r.judge(&Thresholds::default());
        assert_eq!(v.slow_bw.len(), 7);
        assert_eq!(v.slow_latency.len(), 7);
        assert_eq!(v.suspects, vec![5]);
        let lines = v.lines(&r.labels, &Thresholds::default());
        assert!(
            lines.contains(&"suspect node node5: all 7 of its pairs are slow".to_string()),
            "{lines:?}"
        );
        assert!(lines[0].starts_with("slow pair node0 <-> node5: algbw 20.000 GB/s at 1 MiB < 40.500 (0.9 x median 45.000)"), "{lines:?}");
    }

    #[test]
    fn one_slow_link_names_no_node() {
        let mut r = results(6, None, 45.0, 0.0);
        r.sizes[1].algbw_gbs.set(1, 4, 30.0);
        let v = r.judge(&Thresholds::default());
        assert_eq!(
            v.slow_bw,
            vec![SlowPair {
                a: 1,
                b: 4,
                value: 30.0,
                limit: 40.5
            }]
        );
        assert!(v.slow_latency.is_empty() && v.suspects.is_empty());
        // Just above the threshold passes.
        r.sizes[1].algbw_gbs.set(1, 4, 40.6);
        assert!(r.judge(&Thresholds::default()).passed());
    }

    #[test]
    fn no_suspect_without_a_healthy_pair_to_compare() {
        let v = results(2, Some(1), 45.0, 1.0).judge(&Thresholds::default());
        assert!(v.suspects.is_empty());
        // Every pair slow by one measure or the other (as noise on a shared host
        // does): nothing singles out a node.
        let mut r = results(4, None, 45.0, 0.0);
        for (a, b) in [(0, 3), (1, 2), (1, 3)] {
            r.sizes[1].algbw_gbs.set(a, b, 10.0);
        }
        for (a, b) in [(0, 1), (0, 2), (2, 3)] {
            r.sizes[0].p50_us.set(a, b, 50.0);
        }
        let v = r.judge(&Thresholds::default());
        assert_eq!(v.slow_bw.len() + v.slow_latency.len(), 6);
        assert!(v.suspects.is_empty(), "{v:?}");
        // With pair (0, 2) healthy again, nodes 1 and 3, all of whose pairs are
        // still slow, stand out.
        r.sizes[0].p50_us.set(0, 2, 5.0);
        assert_eq!(r.judge(&Thresholds::default()).suspects, vec![1, 3]);
    }

    #[test]
    fn each_criterion_is_judged_only_at_its_sizes() {
        // Only small messages (an ib_write_lat run): their algbw says nothing.
        let mut r = results(4, Some(2), 45.0, 1.0);
        r.sizes[1].size_bytes = 8;
        let v = r.judge(&Thresholds::default());
        assert!(v.slow_bw.is_empty(), "{:?}", v.slow_bw);
        assert_eq!(v.slow_latency.len(), 3);
        // Only large messages: their time is bandwidth, not latency.
        let mut r = results(4, Some(2), 45.0, 1.0);
        r.sizes[0].size_bytes = 1 << 20;
        let v = r.judge(&Thresholds::default());
        assert_eq!(v.slow_bw.len(), 3);
        assert!(v.slow_latency.is_empty(), "{:?}", v.slow_latency);
    }

    #[test]
    fn thresholds_are_checked() {
        assert!(Thresholds::new(0.0, 2.0)
            .unwrap_err()
            .starts_with("--slow-fraction 0"));
        assert!(Thresholds::new(1.5, 2.0).is_err());
        assert!(Thresholds::new(0.9, 0.5)
            .unwrap_err()
            .starts_with("--slow-latency 0.5"));
        assert!(Thresholds::new(0.9, f64::NAN).is_err());
        assert_eq!(Thresholds::new(0.9, 2.0).unwrap(), Thresholds::default());
    }

    #[test]
    fn csv_round_trips() {
        let mut r = results(3, Some(2), 12.5, 3.25);
        r.sizes[0].wrong_bytes = Some(Matrix::empty(3));
        r.sizes[0].wrong_bytes.as_mut().unwrap().set(0, 1, 4.0);
        let mut bytes = Vec::new();
        write_csv(&mut bytes, &r).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.starts_with("metric,size_bytes,node,node0,node1,node2\ntime_us,8,node0,,6,60\n"),
            "{text}"
        );
        let dir = std::env::temp_dir().join(format!("allpairs-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.csv");
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(read_csv(&path).unwrap(), r);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn labels_name_hosts_or_ranks() {
        let h = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(labels(&h(&["a", "b"])), h(&["a", "b"]));
        assert_eq!(labels(&h(&["a", "a", "b"])), h(&["a/0", "a/1", "b/2"]));
    }
}
