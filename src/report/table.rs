//! The nccl-tests table on stdout, column for column, so that parsers of
//! nccl-tests logs read ours; the per-iteration percentiles follow at the right.
//! Its header is rendered from the run's facts (`Header`), given when it is made.

use super::{below_min_busbw, Exporter, PerIteration, Placement, RunInfo, SizeResult, Summary};
use crate::limits;
use crate::sizes::{human_bytes, Step};
use std::io::Write;

/// The facts of nccl-tests' header: its settings line and one line per rank.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// -g: ranks (GPUs) per process.
    pub gpus_per_process: usize,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub step: Step,
    pub warmup_iters: usize,
    pub iters: usize,
    /// -c: validations per size.
    pub check: usize,
    /// -G: CUDA graph launches (0: no graph).
    pub graph_launches: usize,
    /// Every rank, in rank order.
    pub ranks: Vec<RankFacts>,
}

/// Where one rank runs.
#[derive(Clone, Debug, PartialEq)]
pub struct RankFacts {
    pub rank: usize,
    pub pid: u32,
    pub host: String,
    /// GPU number (the node-local rank for host memory).
    pub ordinal: usize,
    /// "0000:18:00.0", or "host".
    pub location: String,
    /// "NVIDIA H200", or the MPI library for host memory.
    pub name: String,
    /// NCCL_TESTS_SPLIT(_MASK): the rank's group (0 without a split).
    pub group: usize,
}

impl Header {
    /// "nThread 1 nGpus 1 minBytes ...", as nccl-tests prints it.
    fn settings_line(&self) -> String {
        let step = match self.step {
            Step::Factor(f) => format!("{f}(factor)"),
            Step::Bytes(b) => format!("{b}(bytes)"),
        };
        format!(
            "nThread 1 nGpus {} minBytes {} maxBytes {} step: {step} warmup iters: {} iters: {} agg iters: 1 validation: {} graph: {}",
            self.gpus_per_process,
            self.min_bytes,
            self.max_bytes,
            self.warmup_iters,
            self.iters,
            self.check,
            self.graph_launches
        )
    }
}

impl RankFacts {
    /// "#  Rank  0 Group  0 Pid   1234 on     node-1 device  0 [0000:18:00.0] NVIDIA H200".
    fn line(&self) -> String {
        format!(
            "#  Rank {:>2} Group {:>2} Pid {:>6} on {:>10} device {:>2} [{}] {}",
            self.rank, self.group, self.pid, self.host, self.ordinal, self.location, self.name
        )
    }
}

/// nccl-tests' number format: the most decimals (2, 1, 0) that fit the width,
/// else scientific notation.
pub fn fit(value: f64, width: usize) -> String {
    for decimals in [2, 1, 0] {
        let s = format!("{value:>width$.decimals$}");
        if s.len() <= width {
            return s;
        }
    }
    let decimals = if width >= 7 { 1 } else { 0 };
    format!("{:>width$}", c_scientific(value, decimals))
}

/// C's %.Ne: the exponent signed and at least two digits ("1.2e+08").
fn c_scientific(value: f64, decimals: usize) -> String {
    let rust = format!("{value:.decimals$e}");
    let (mantissa, exponent) = rust.split_once('e').unwrap_or((&rust, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

pub struct Table<W: Write> {
    out: W,
    header: Header,
    /// The highest busbw so far: GB/s, size, placement.
    best: Option<(f64, u64, Placement)>,
    /// -c: wrong elements of each rank with any, over the run.
    wrong_by_rank: std::collections::BTreeMap<usize, u64>,
}

impl<W: Write> Table<W> {
    pub fn new(out: W, header: Header) -> Self {
        Table {
            out,
            header,
            best: None,
            wrong_by_rank: Default::default(),
        }
    }

    /// nccl-tests' -I column header (its writeResultHeader), -S column included.
    fn per_iter_header(&mut self, run: &RunInfo) -> std::io::Result<()> {
        let (pad, label, format) = timestamp_column(run);
        let time = if run.report_cputime {
            "cputime"
        } else {
            "time"
        };
        let o = &mut self.out;
        writeln!(o, "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}              out-of-place (+ per-iteration)                                in-place (+ per-iteration)", "", "", "", "", "")?;
        writeln!(
            o,
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7} {label:>pad$}",
            "size", "count", "type", "redop", "root",
            time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%",
            time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%"
        )?;
        writeln!(
            o,
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7} {format:>pad$}",
            "(B)", "(elements)", "", "", "",
            "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)",
            "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)"
        )
    }
}

/// -S: nccl-tests' timestamp column: its width, label and format line.
fn timestamp_column(run: &RunInfo) -> (usize, &'static str, &'static str) {
    match run.report_timestamps {
        true => (19, "timestamp", "%Y-%m-%d %H:%M:%S"),
        false => (0, "", ""),
    }
}

/// -I: nccl-tests' i_min i_max i_p99 i_cv% of one placement (its writePerIterReport).
fn per_iter_columns(p: Option<&PerIteration>) -> String {
    match p {
        Some(p) => format!(
            "  {}  {}  {}  {}",
            fit(p.stats.min * 1e6, 7),
            fit(p.stats.max * 1e6, 7),
            fit(p.stats.p99 * 1e6, 7),
            fit(p.stats.cv_pct(), 7)
        ),
        None => " ".repeat(36),
    }
}

const PREAMBLE_BLANK: &str = "#                                                       ";

impl<W: Write> Exporter for Table<W> {
    fn start(&mut self, run: &RunInfo) -> anyhow::Result<()> {
        let o = &mut self.out;
        writeln!(
            o,
            "# fabricbench {} ({} backend), nccl-tests-compatible output",
            run.tool_version, run.backend
        )?;
        if !run.backend_choice.is_empty() {
            writeln!(o, "# Backend: {}", run.backend_choice)?;
        }
        writeln!(o, "# Collective test starting: {}", run.program)?;
        writeln!(o, "# {}", self.header.settings_line())?;
        writeln!(
            o,
            "# Transport: {} | library: {} | run id: {}",
            run.transport, run.library_version, run.run_id
        )?;
        writeln!(
            o,
            "# Units: size in bytes, time in us, algbw and busbw in GB/s (1 GB/s = 1e9 bytes/s)"
        )?;
        if !run.per_iter_timing {
            writeln!(
                o,
                "# Per-iteration columns: p50/p99/p99.9/max of each iteration's time, taken as the max over ranks"
            )?;
        }
        for (i, line) in run.limits_lines.iter().enumerate() {
            let lead = if i == 0 { "Limits: " } else { "  detected: " };
            writeln!(o, "# {lead}{line}")?;
        }
        for detail in &run.details {
            writeln!(o, "# {detail}")?;
        }
        if run.report_cputime {
            writeln!(o, "# -C 1: the time columns show the CPU time to issue one call; algbw and busbw still use its completion time")?;
        }
        for note in &run.notes {
            writeln!(o, "# WARNING: {note}")?;
        }
        writeln!(o, "#")?;
        writeln!(o, "# Using devices")?;
        for rank in &self.header.ranks {
            writeln!(o, "{}", rank.line())?;
        }
        writeln!(o, "#")?;
        if run.per_iter_timing {
            self.per_iter_header(run)?;
            self.out.flush()?;
            return Ok(());
        }
        let (pad, label, format) = timestamp_column(run);
        let ts = |t: &str| match pad {
            0 => String::new(),
            _ => format!(" {t:>pad$}"),
        };
        let o = &mut self.out;
        writeln!(
            o,
            "{PREAMBLE_BLANK}    out-of-place                       in-place                       out-of-place per-iteration        in-place per-iteration"
        )?;
        writeln!(
            o,
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}{}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}",
            "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", ts(label),
            "p50", "p99", "p99.9", "max", "p50", "p99", "p99.9", "max"
        )?;
        writeln!(
            o,
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}{}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}",
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", ts(format),
            "(us)", "(us)", "(us)", "(us)", "(us)", "(us)", "(us)", "(us)"
        )?;
        o.flush()?;
        Ok(())
    }

    fn record(&mut self, run: &RunInfo, r: &SizeResult) -> anyhow::Result<()> {
        let mut line = format!(
            "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}",
            r.size_bytes, r.count, r.datatype, r.redop, r.root
        );
        let mut percentiles = String::new();
        for placement in Placement::BOTH {
            match r.measurements.iter().find(|m| m.placement == placement) {
                Some(m) => {
                    if self.best.map_or(true, |b| m.busbw_gbs > b.0) {
                        self.best = Some((m.busbw_gbs, r.size_bytes, placement));
                    }
                    let wrong = m.wrong.map_or("   N/A".to_string(), |w| format!("{w:>6}"));
                    let time = match (run.report_cputime, m.cpu_us) {
                        (true, Some(cpu)) => cpu,
                        _ => m.time_us,
                    };
                    line += &format!(
                        "  {}  {}  {}  {}",
                        fit(time, 7),
                        fit(m.algbw_gbs, 6),
                        fit(m.busbw_gbs, 6),
                        wrong
                    );
                    if run.per_iter_timing {
                        line += &per_iter_columns(m.per_iter.as_ref());
                    }
                    for &(rank, n) in &m.wrong_ranks {
                        *self.wrong_by_rank.entry(rank).or_default() += n;
                    }
                    let l = &m.latency;
                    for v in [l.p50_us, l.p99_us, l.p999_us, l.max_us] {
                        percentiles += &format!("  {}", fit(v, 7));
                    }
                }
                None => {
                    line += &" ".repeat(33);
                    if run.per_iter_timing {
                        line += &per_iter_columns(None);
                    }
                    percentiles += &" ".repeat(36);
                }
            }
        }
        if run.report_timestamps {
            line += &format!("{:>21}", super::run::local_time());
        }
        // nccl-tests' -I layout ends there; without -I our percentiles follow.
        if run.per_iter_timing {
            percentiles.clear();
        }
        writeln!(self.out, "{line}{percentiles}")?;
        self.out.flush()?;
        Ok(())
    }

    fn finish(&mut self, run: &RunInfo, summary: &Summary) -> anyhow::Result<()> {
        if !self.wrong_by_rank.is_empty() {
            let hosts: Vec<String> = self
                .wrong_by_rank
                .iter()
                .map(|(&rank, &n)| {
                    let host = self.header.ranks.iter().find(|r| r.rank == rank);
                    let host = host.map_or("unknown host", |r| r.host.as_str());
                    let s = if n == 1 { "" } else { "s" };
                    format!("rank {rank} on {host} ({n} element{s})")
                })
                .collect();
            writeln!(self.out, "# {:<20} : {}", "Wrong data on", hosts.join(", "))?;
        }
        let o = &mut self.out;
        let verdict = if summary.wrong_total > 0 {
            "FAILED"
        } else {
            "OK"
        };
        if run.checked {
            writeln!(
                o,
                "# {:<20} : {} {}",
                "Out of bounds values", summary.wrong_total, verdict
            )?;
        } else {
            writeln!(
                o,
                "# {:<20} : N/A (run with -c 1 to validate)",
                "Out of bounds values"
            )?;
        }
        let bw_verdict = match run.min_busbw_gbs {
            None => "",
            Some(min) if below_min_busbw(summary.avg_busbw_gbs, min) => "FAILED",
            Some(_) => "OK",
        };
        writeln!(
            o,
            "# {:<20} : {} {bw_verdict}",
            "Avg bus bandwidth",
            format_g(summary.avg_busbw_gbs)
        )?;
        if let Some((busbw, size, placement)) = self.best {
            let of_limit = limits::binding(&run.limits).map_or(
                " (no limit: none given with --limit, none detected)".to_string(),
                |l| format!(" = {:.1}% of {}", limits::percent_of(busbw, l), l.label()),
            );
            writeln!(
                o,
                "# {:<20} : {} GB/s at {} {}{of_limit}",
                "Best bus bandwidth",
                format_g(busbw),
                human_bytes(size),
                placement.name()
            )?;
        }
        writeln!(o, "#")?;
        writeln!(o, "# Collective test concluded: {}", run.program)?;
        o.flush()?;
        Ok(())
    }
}

/// C's %g: six significant digits, trailing zeros dropped.
pub fn format_g(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let exponent = value.abs().log10().floor() as i32;
    if (-5..6).contains(&exponent) {
        let decimals = (5 - exponent).max(0) as usize;
        let s = format!("{value:.decimals$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    } else {
        c_scientific(value, 5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_fit_like_nccl_tests() {
        assert_eq!(fit(38.4512, 7), "  38.45");
        assert_eq!(fit(12345.678, 7), "12345.7");
        assert_eq!(fit(1234567.0, 7), "1234567");
        assert_eq!(fit(123456789.0, 7), "1.2e+08");
        assert_eq!(fit(12345678.0, 6), " 1e+07");
        assert_eq!(fit(0.0, 6), "  0.00");
        assert_eq!(fit(123.456, 6), "123.46");
    }

    #[test]
    fn header_lines_as_nccl_tests_prints_them() {
        let mut header = Header {
            gpus_per_process: 1,
            min_bytes: 8,
            max_bytes: 1 << 20,
            step: Step::Factor(2),
            warmup_iters: 1,
            iters: 20,
            check: 1,
            graph_launches: 0,
            ranks: vec![RankFacts {
                rank: 3,
                pid: 4242,
                host: "node-1".into(),
                ordinal: 1,
                location: "0000:18:00.0".into(),
                name: "NVIDIA H200".into(),
                group: 0,
            }],
        };
        assert_eq!(
            header.settings_line(),
            "nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0"
        );
        header.step = Step::Bytes(1 << 20);
        assert!(header.settings_line().contains(" step: 1048576(bytes) "));
        assert_eq!(
            header.ranks[0].line(),
            "#  Rank  3 Group  0 Pid   4242 on     node-1 device  1 [0000:18:00.0] NVIDIA H200"
        );
        let mut out = Vec::new();
        let run = RunInfo::default();
        Table::new(&mut out, header).start(&run).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\n# nThread 1 nGpus 1 minBytes 8 "), "{text}");
        assert!(
            text.contains("\n# Using devices\n#  Rank  3 Group  0 Pid   4242 "),
            "{text}"
        );
    }

    #[test]
    fn percent_g() {
        assert_eq!(format_g(12.3456789), "12.3457");
        assert_eq!(format_g(0.5), "0.5");
        assert_eq!(format_g(100.0), "100");
    }
}
