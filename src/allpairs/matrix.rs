//! The results of an all-pairs run: N x N matrices per message size, and their CSV.
//!
//! CSV: header `metric,size_bytes,node,<node 0>,...,<node N-1>`, then for each
//! size N rows per metric (`time_us` the mean time of an exchange, `p50_us` its
//! median, `algbw_gbs` size over mean time, and `wrong_bytes` when validated):
//! row `node` i, column j holds the value of pair (i, j); the matrix is symmetric
//! (each pair is measured once, both directions at once) and the diagonal is empty.
//! After the sizes, the fabric counters' columns (`rdma_bytes`, `rdma_packets`,
//! `counter_errors`, `counter_retransmits`, `counter_congestion`,
//! `counter_pauses`, as in a sweep's CSV), N rows each with `size_bytes` empty:
//! pair (i, j) holds the deltas of its two nodes over its round, every size.

use super::sample::PairSample;
use crate::report::counters::Column;
use crate::stats::interval::median;
use anyhow::{bail, Context};
use std::io::Write;
use std::path::Path;

/// An N x N symmetric matrix of one metric, None where nothing was measured
/// (the diagonal, but for a heatmap's blocks). It keeps one f64 a cell of the
/// upper triangle, `NONE` for None: 8 B a pair where a full matrix of options
/// took 32, which at thousands of nodes is gigabytes on rank 0.
#[derive(Clone, Debug)]
pub struct Matrix {
    n: usize,
    cells: Vec<f64>,
}

/// A NaN no arithmetic makes (they make the quiet NaN 0x7ff8...): a cell not
/// measured, while a NaN figure (a file's "NaN") stays a figure that is no number.
const NONE: u64 = 0x7ff4_0000_0000_0001;

impl PartialEq for Matrix {
    fn eq(&self, other: &Matrix) -> bool {
        self.n == other.n
            && (self.cells.iter())
                .zip(&other.cells)
                .all(|(x, y)| x.to_bits() == y.to_bits() || x == y)
    }
}

impl Matrix {
    pub fn empty(n: usize) -> Matrix {
        Matrix {
            n,
            cells: vec![f64::from_bits(NONE); n * (n + 1) / 2],
        }
    }

    /// Rows and columns.
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn at(&self, a: usize, b: usize) -> usize {
        let (i, j) = (a.min(b), a.max(b));
        assert!(j < self.n, "cell ({a}, {b}) of a {0} x {0} matrix", self.n);
        i * self.n - i * i.saturating_sub(1) / 2 + (j - i)
    }

    /// Sets (a, b) and (b, a).
    pub fn set(&mut self, a: usize, b: usize, value: f64) {
        let at = self.at(a, b);
        self.cells[at] = value;
    }

    /// Forgets (a, b) and (b, a).
    pub fn clear(&mut self, a: usize, b: usize) {
        self.set(a, b, f64::from_bits(NONE));
    }

    pub fn get(&self, a: usize, b: usize) -> Option<f64> {
        Some(self.cells[self.at(a, b)]).filter(|v| v.to_bits() != NONE)
    }

    /// Row `a`: its value with every column in turn.
    pub fn row(&self, a: usize) -> impl Iterator<Item = Option<f64>> + '_ {
        (0..self.n).map(move |b| self.get(a, b))
    }

    /// The one node at an end of every pair where a count moved most: the
    /// pairs that each moved at least `factor` times the largest count of
    /// every other pair (taken as 1 at least, so a pair with no count of its
    /// own still needs `factor`), two or more of them, all share that node. A
    /// lossy node's pairs need not all stand out: random loss may spare one.
    /// None with fewer than 3 nodes, where a pair is unmeasured, where one pair
    /// alone stands out (either end could be at fault), or where the pairs
    /// that stand out share no node or two.
    pub fn standout(&self, factor: f64) -> Option<usize> {
        let n = self.n;
        let mut pairs = self.pairs();
        if n < 3 || pairs.len() != n * (n - 1) / 2 {
            return None;
        }
        pairs.sort_by(|x, y| y.2.total_cmp(&x.2));
        // The smallest top group (two pairs or more) whose every pair is at
        // least `factor` times every pair below it.
        let k = (2..pairs.len()).find(|&k| pairs[k - 1].2 >= factor * pairs[k].2.max(1.0))?;
        let shared: Vec<usize> = (0..n)
            .filter(|&x| pairs[..k].iter().all(|&(a, b, _)| a == x || b == x))
            .collect();
        match shared[..] {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Each measured pair once: (a, b, value) with a < b.
    pub fn pairs(&self) -> Vec<(usize, usize, f64)> {
        let n = self.n;
        (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .filter_map(|(a, b)| self.get(a, b).map(|v| (a, b, v)))
            .collect()
    }
}

/// What one matrix holds; its name is the CSV's `metric` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    TimeUs,
    P50Us,
    AlgbwGbs,
    WrongBytes,
}

impl Metric {
    /// In the order the CSV lists them for each size.
    pub const ALL: [Metric; 4] = [
        Metric::TimeUs,
        Metric::P50Us,
        Metric::AlgbwGbs,
        Metric::WrongBytes,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::TimeUs => "time_us",
            Metric::P50Us => "p50_us",
            Metric::AlgbwGbs => "algbw_gbs",
            Metric::WrongBytes => "wrong_bytes",
        }
    }

    pub fn from_name(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
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

impl SizeMatrices {
    /// Nothing measured yet for `n` participants; `validated`: with a wrong-bytes matrix.
    pub fn empty(size_bytes: u64, n: usize, validated: bool) -> SizeMatrices {
        SizeMatrices {
            size_bytes,
            time_us: Matrix::empty(n),
            p50_us: Matrix::empty(n),
            algbw_gbs: Matrix::empty(n),
            wrong_bytes: validated.then(|| Matrix::empty(n)),
        }
    }

    /// The matrix of `metric`; None for wrong bytes when nothing was validated.
    pub fn metric(&self, metric: Metric) -> Option<&Matrix> {
        match metric {
            Metric::TimeUs => Some(&self.time_us),
            Metric::P50Us => Some(&self.p50_us),
            Metric::AlgbwGbs => Some(&self.algbw_gbs),
            Metric::WrongBytes => self.wrong_bytes.as_ref(),
        }
    }

    /// Pair (a, b)'s sample: its times, bandwidth and, where validated, wrong
    /// bytes; a pair not measured (NaN seconds: a rail's pair that could not
    /// connect) leaves its cells empty.
    pub fn add_pair(&mut self, a: usize, b: usize, pair: PairSample) {
        if pair.seconds.is_nan() {
            return;
        }
        self.time_us.set(a, b, pair.seconds * 1e6);
        self.p50_us.set(a, b, pair.p50_seconds * 1e6);
        self.algbw_gbs
            .set(a, b, self.size_bytes as f64 / pair.seconds / 1e9);
        if let Some(w) = pair.wrong {
            self.metric_mut(Metric::WrongBytes).set(a, b, w as f64);
        }
    }

    /// The matrix of `metric` to fill in, the wrong-bytes one created on first use.
    fn metric_mut(&mut self, metric: Metric) -> &mut Matrix {
        let n = self.time_us.len();
        match metric {
            Metric::TimeUs => &mut self.time_us,
            Metric::P50Us => &mut self.p50_us,
            Metric::AlgbwGbs => &mut self.algbw_gbs,
            Metric::WrongBytes => self.wrong_bytes.get_or_insert_with(|| Matrix::empty(n)),
        }
    }
}

/// Everything an all-pairs run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct PairResults {
    /// One per participant: the host name, or "host/rank" where ranks share a host.
    pub labels: Vec<String>,
    /// In sweep order.
    pub sizes: Vec<SizeMatrices>,
    /// The fabric counters' columns over each pair's round; empty where none were read.
    pub counters: Vec<(Column, Matrix)>,
}

impl PairResults {
    /// The matrices of `size_bytes`, if it was measured.
    pub fn at(&self, size_bytes: u64) -> Option<&SizeMatrices> {
        self.sizes.iter().find(|s| s.size_bytes == size_bytes)
    }

    /// One matrix set from the rounds of one run (each with the same labels and
    /// sizes): per cell the median over the rounds that measured it, and the
    /// wrong bytes of every round added up (one bad round is wrong data).
    /// None when there are no rounds.
    pub fn median_over(rounds: &[PairResults]) -> Option<PairResults> {
        let first = rounds.first()?;
        let mut out = first.clone();
        let cell =
            |pick: &dyn Fn(&SizeMatrices) -> Option<&Matrix>, s: usize, a: usize, b: usize| {
                rounds
                    .iter()
                    .filter_map(|r| pick(&r.sizes[s])?.get(a, b))
                    .collect::<Vec<f64>>()
            };
        let n = first.labels.len();
        for (s, m) in out.sizes.iter_mut().enumerate() {
            for a in 0..n {
                for b in (a + 1)..n {
                    for metric in [Metric::TimeUs, Metric::P50Us, Metric::AlgbwGbs] {
                        let figures = cell(&|m| m.metric(metric), s, a, b);
                        if !figures.is_empty() {
                            m.metric_mut(metric).set(a, b, median(&figures));
                        }
                    }
                    let figures = cell(&|m| m.wrong_bytes.as_ref(), s, a, b);
                    if !figures.is_empty() {
                        m.metric_mut(Metric::WrongBytes)
                            .set(a, b, figures.iter().sum());
                    }
                }
            }
        }
        Some(out)
    }
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

/// Writes the matrices as the CSV described at the top of this file.
pub fn write_csv(out: impl Write, results: &PairResults) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    let mut header = vec!["metric".to_string(), "size_bytes".into(), "node".into()];
    header.extend(results.labels.iter().cloned());
    w.write_record(&header)?;
    let mut rows = |name: &str, size: String, m: &Matrix| -> anyhow::Result<()> {
        for i in 0..m.len() {
            let mut record = vec![name.to_string(), size.clone(), results.labels[i].clone()];
            record.extend(m.row(i).map(|v| v.map_or(String::new(), |v| v.to_string())));
            w.write_record(&record)?;
        }
        Ok(())
    };
    for s in &results.sizes {
        for metric in Metric::ALL {
            if let Some(m) = s.metric(metric) {
                rows(metric.name(), s.size_bytes.to_string(), m)?;
            }
        }
    }
    for (column, m) in &results.counters {
        rows(column.name(), String::new(), m)?;
    }
    w.flush()?;
    Ok(())
}

/// Reads a CSV written by `write_csv` (rack_check judges it with its own thresholds).
pub fn read_csv(path: &Path) -> anyhow::Result<PairResults> {
    // A path from a spec or the user: never a FIFO or device, never unbounded.
    let (file, _) = crate::report::csv::open_regular(path, &path.display().to_string())?;
    let mut reader = csv::Reader::from_reader(file);
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
    let mut counters: Vec<(Column, Matrix)> = Vec::new();
    for record in reader.records() {
        let record = record?;
        let bad = || format!("{}: malformed row {:?}", path.display(), record);
        let row = labels
            .iter()
            .position(|l| Some(l.as_str()) == record.get(2))
            .with_context(bad)?;
        let name = record.get(0).unwrap_or("");
        let m = if let Some(column) = Column::from_name(name) {
            if record.get(1) != Some("") {
                bail!("{}", bad());
            }
            if counters.last().is_none_or(|(c, _)| *c != column) {
                counters.push((column, Matrix::empty(n)));
            }
            &mut counters.last_mut().expect("pushed above").1
        } else {
            let size_bytes: u64 = record
                .get(1)
                .and_then(|s| s.parse().ok())
                .with_context(bad)?;
            if sizes.last().is_none_or(|s| s.size_bytes != size_bytes) {
                sizes.push(SizeMatrices::empty(size_bytes, n, false));
            }
            let Some(metric) = Metric::from_name(name) else {
                bail!("{}: unknown metric '{name}'", path.display());
            };
            sizes.last_mut().expect("pushed above").metric_mut(metric)
        };
        // Symmetric: (row, col) and (col, row) are one cell, the later row's.
        for (col, cell) in record.iter().skip(3).enumerate().take(n) {
            match cell.is_empty() {
                true => m.clear(row, col),
                false => m.set(row, col, cell.parse().with_context(bad)?),
            }
        }
    }
    Ok(PairResults {
        labels,
        sizes,
        counters,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn a_matrix_is_one_cell_a_pair() {
        for n in [0, 1, 2, 5, 48] {
            let mut m = Matrix::empty(n);
            assert_eq!((m.len(), m.cells.len()), (n, n * (n + 1) / 2));
            // Every cell its own: each set in turn reads back, nothing else moved.
            for a in 0..n {
                for b in a..n {
                    m.set(b, a, (a * n + b) as f64);
                }
            }
            for a in 0..n {
                for b in 0..n {
                    let (i, j) = (a.min(b), a.max(b));
                    assert_eq!(m.get(a, b), Some((i * n + j) as f64), "n={n} ({a}, {b})");
                }
            }
        }
        let mut m = Matrix::empty(3);
        assert_eq!(m.row(0).collect::<Vec<_>>(), [None; 3]);
        m.set(0, 2, 1.5);
        // A figure that is no number stays one (the verdict names it).
        m.set(1, 2, f64::NAN);
        assert!(m.get(2, 1).is_some_and(f64::is_nan));
        assert_eq!(
            m.row(2).map(|v| v.is_some()).collect::<Vec<_>>(),
            [true, true, false]
        );
        assert_eq!(m.pairs().len(), 2);
        let before = m.clone();
        m.clear(2, 0);
        m.clear(1, 2);
        assert_ne!(m, before);
        assert_eq!(m, Matrix::empty(3));
    }

    #[test]
    fn a_node_whose_pairs_all_moved_most_stands_out() {
        let mut m = Matrix::empty(4);
        for (a, b, v) in [
            (0, 1, 1.0),
            (0, 2, 143.0),
            (0, 3, 0.0),
            (1, 2, 330.0),
            (1, 3, 2.0),
            (2, 3, 600.0),
        ] {
            m.set(a, b, v);
        }
        assert_eq!(m.standout(10.0), Some(2));
        // One of its pairs spared by the loss: the two that stand out still
        // share node 2 alone.
        m.set(0, 2, 19.0);
        assert_eq!(m.standout(10.0), Some(2));
        // Only one pair stands out: either end could be at fault.
        m.set(1, 2, 3.0);
        assert_eq!(m.standout(10.0), None);
        // Two pairs stand out that share no node: nobody named.
        m.set(0, 1, 500.0);
        assert_eq!(m.standout(10.0), None);
        // Counts that moved everywhere alike name nobody.
        let mut flat = Matrix::empty(3);
        for (a, b) in [(0, 1), (0, 2), (1, 2)] {
            flat.set(a, b, 50.0);
        }
        assert_eq!(flat.standout(10.0), None);
        // Two nodes: no pair without either.
        let mut two = Matrix::empty(2);
        two.set(0, 1, 900.0);
        assert_eq!(two.standout(10.0), None);
    }

    /// n nodes, every pair at `fast` GB/s and 5 us (median; 6 us mean) except
    /// those touching `slow_node`, at `slow` GB/s and 50 us; sizes 8 B and 1 MiB.
    pub(crate) fn results(n: usize, slow_node: Option<usize>, fast: f64, slow: f64) -> PairResults {
        let mut small = SizeMatrices::empty(8, n, false);
        let mut large = SizeMatrices::empty(1 << 20, n, false);
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
            counters: Vec::new(),
        }
    }

    /// A file in a fresh scratch directory, removed when dropped.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn with(name: &str, text: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!(
                "allpairs-{name}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("m.csv"), text).unwrap();
            Scratch(dir)
        }
        fn path(&self) -> std::path::PathBuf {
            self.0.join("m.csv")
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn csv_round_trips() {
        let mut r = results(3, Some(2), 12.5, 3.25);
        r.sizes[0].wrong_bytes = Some(Matrix::empty(3));
        r.sizes[0].wrong_bytes.as_mut().unwrap().set(0, 1, 4.0);
        let mut bytes = Vec::new();
        write_csv(&mut bytes, &r).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "metric,size_bytes,node,node0,node1,node2");
        assert_eq!(lines[1], "time_us,8,node0,,6,60");
        assert_eq!(lines[6], "p50_us,8,node2,50,50,");
        // Wrong bytes only where validated: after the three metrics of 8 B.
        assert_eq!(lines[10], "wrong_bytes,8,node0,,4,");
        assert_eq!(lines[13], "time_us,1048576,node0,,,");
        assert_eq!(lines[21], "algbw_gbs,1048576,node2,3.25,3.25,");
        assert_eq!(lines.len(), 1 + 4 * 3 + 3 * 3);
        let file = Scratch::with("round-trip", &text);
        assert_eq!(read_csv(&file.path()).unwrap(), r);
    }

    #[test]
    fn a_csv_that_is_not_a_matrix_is_refused() {
        let not = Scratch::with("not-matrix", "size_bytes,time_us\n8,1\n");
        let e = read_csv(&not.path()).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "m.csv: not an all-pairs matrix CSV (header [\"size_bytes\", \"time_us\"])"
            ),
            "{e}"
        );
        let head = "metric,size_bytes,node,a,b\n";
        let unknown = Scratch::with("unknown", &format!("{head}busbw,8,a,,1\n"));
        let e = read_csv(&unknown.path()).unwrap_err().to_string();
        assert!(e.ends_with("m.csv: unknown metric 'busbw'"), "{e}");
        let stranger = Scratch::with("stranger", &format!("{head}time_us,8,c,,1\n"));
        let e = read_csv(&stranger.path()).unwrap_err().to_string();
        assert!(e.contains("m.csv: malformed row"), "{e}");
        let text = Scratch::with("text", &format!("{head}time_us,8,a,,fast\n"));
        assert!(read_csv(&text.path()).is_err());
    }

    #[test]
    fn metrics_are_named_as_in_the_csv() {
        for m in Metric::ALL {
            assert_eq!(Metric::from_name(m.name()), Some(m));
        }
        assert_eq!(Metric::from_name("p50_us"), Some(Metric::P50Us));
        assert_eq!(Metric::from_name("busbw"), None);
        let s = SizeMatrices::empty(8, 2, false);
        assert!(s.metric(Metric::WrongBytes).is_none());
        assert_eq!(s.metric(Metric::TimeUs), Some(&Matrix::empty(2)));
    }

    #[test]
    fn a_matrix_is_symmetric_and_lists_each_pair_once() {
        let mut m = Matrix::empty(3);
        m.set(2, 0, 1.5);
        m.set(1, 2, 7.0);
        assert_eq!(m.get(0, 2), Some(1.5));
        assert_eq!(m.get(0, 0), None);
        assert_eq!(m.pairs(), vec![(0, 2, 1.5), (1, 2, 7.0)]);
    }

    #[test]
    fn labels_name_hosts_or_ranks() {
        let h = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(labels(&h(&["a", "b"])), h(&["a", "b"]));
        assert_eq!(labels(&h(&["a", "a", "b"])), h(&["a/0", "a/1", "b/2"]));
    }
}
