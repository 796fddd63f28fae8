//! The nccl-tests table on stdout, column for column, so that parsers of
//! nccl-tests logs read ours; the per-iteration percentiles follow at the right.
//! Its header is rendered from the run's facts (`Header`), given when it is made.

use super::expected;
use super::facts::Location;
use super::rounds::RoundsSummary;
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
    /// -u: elements the buffers are misaligned by.
    pub unalign: usize,
    /// -m: calls per timed iteration.
    pub agg_iters: usize,
    /// -z: 0 to 3, for nccl-tests' "Blocking Enabled" line.
    pub blocking: u8,
    /// -p 1: nccl-tests' "Parallel Init Enabled" line.
    pub parallel_init: bool,
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
    pub location: Location,
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
            "nThread 1 nGpus {} minBytes {} maxBytes {} step: {step} warmup iters: {} iters: {} agg iters: {} validation: {} graph: {} unalign: {}",
            self.gpus_per_process,
            self.min_bytes,
            self.max_bytes,
            self.warmup_iters,
            self.iters,
            self.agg_iters,
            self.check,
            self.graph_launches,
            self.unalign
        )
    }
}

impl RankFacts {
    /// "#  Rank  0 Group  0 Pid   1234 on     node-1 device  0 [0000:18:00] NVIDIA H200":
    /// the bus id as nccl-tests prints it (domain:bus:device, no function).
    fn line(&self) -> String {
        let location = self.location.name();
        let bus = match location.rsplit_once('.') {
            Some((id, function)) if id.matches(':').count() == 2 && function.len() == 1 => id,
            _ => location,
        };
        format!(
            "#  Rank {:>2} Group {:>2} Pid {:>6} on {:>10} device {:>2} [{bus}] {}",
            self.rank, self.group, self.pid, self.host, self.ordinal, self.name
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
    /// NCCL's algorithm/protocol per size, for the footer: (first size, last size, "RING/LL").
    tuning: Vec<(u64, u64, String)>,
    /// --rounds: the round being measured (0 before the first).
    round: u32,
}

impl<W: Write> Table<W> {
    pub fn new(out: W, header: Header) -> Self {
        Table {
            out,
            header,
            best: None,
            wrong_by_rank: Default::default(),
            tuning: Vec::new(),
            round: 0,
        }
    }

    /// nccl-tests' -I column header (its writeResultHeader), -S column included.
    fn per_iter_header(&mut self, run: &RunInfo) -> std::io::Result<()> {
        let (pad, label, format) = timestamp_column(run);
        let tail = tail_columns(run);
        let time = if run.report_cputime {
            "cputime"
        } else {
            "time"
        };
        let o = &mut self.out;
        writeln!(o, "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}              out-of-place (+ per-iteration)                                in-place (+ per-iteration)", "", "", "", "", "")?;
        writeln!(
            o,
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7} {label:>pad$}{}",
            "size", "count", "type", "redop", "root",
            time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%",
            time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", tail[0]
        )?;
        writeln!(
            o,
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>7}  {:>7}  {:>7} {format:>pad$}{}",
            "(B)", "(elements)", "", "", "",
            "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)",
            "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", tail[1]
        )
    }
}

/// --rounds: the columns after the others, name and unit lines: each line's
/// rounds, and busbw's spread out of place and in place.
fn rounds_columns(run: &RunInfo) -> [String; 2] {
    match run.rounds_many {
        true => [
            format!("  {:>6}  {:>7}  {:>7}", "rounds", "±busbw", "±busbw"),
            format!("  {:>6}  {:>7}  {:>7}", "", "(oop)", "(ip)"),
        ],
        false => [String::new(), String::new()],
    }
}

/// The columns after nccl-tests' and the percentiles, name and unit lines:
/// --rounds', then --expected's.
fn tail_columns(run: &RunInfo) -> [String; 2] {
    let [rounds_name, rounds_unit] = rounds_columns(run);
    let [expected_name, expected_unit] = expected::columns(run);
    [rounds_name + &expected_name, rounds_unit + &expected_unit]
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
            run.tool_version,
            run.backend_name()
        )?;
        writeln!(o, "# Build: {}", crate::job::provenance::build_line())?;
        if !run.backend_choice.is_empty() {
            writeln!(o, "# Backend: {}", run.backend_choice)?;
        }
        writeln!(o, "# Collective test starting: {}", run.program)?;
        writeln!(o, "# {}", self.header.settings_line())?;
        // nccl-tests' lines for -z 1, 2 and 3, word for word.
        let blocking = match self.header.blocking {
            1 => Some("wait and barrier after each inner iteration (-m) "),
            2 => Some("wait after each inner iteration (-m), no barrier "),
            3 => Some("wait and barrier after each outer iteration (-n); time excludes barrier "),
            _ => None,
        };
        if let Some(what) = blocking {
            writeln!(o, "# Blocking Enabled: {what}")?;
        }
        if self.header.parallel_init {
            writeln!(
                o,
                "# Parallel Init Enabled: threads call into NcclInitRank concurrently "
            )?;
        }
        writeln!(
            o,
            "# Transport: {} | library: {} | run id: {}",
            run.transport, run.library_version, run.run_id
        )?;
        writeln!(
            o,
            "# Units: size in bytes, time in us, algbw and busbw in GB/s (1 GB/s = 1e9 bytes/s)"
        )?;
        if run.timed_whole {
            writeln!(
                o,
                "# Per-iteration columns: N/A: --percentiles 0 timed each loop whole, with no clock read between calls"
            )?;
        } else if !run.per_iter_timing {
            writeln!(
                o,
                "# Per-iteration columns: p50/p99/p99.9/max of each iteration's time, taken as the max over ranks"
            )?;
        }
        for (i, line) in run.limits_lines.iter().enumerate() {
            let lead = if i == 0 { "Limits: " } else { "  detected: " };
            writeln!(o, "# {lead}{line}")?;
        }
        if run.expected_column {
            writeln!(o, "# {}", run.model_line)?;
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
        let tail = tail_columns(run);
        let o = &mut self.out;
        // -C 1: nccl-tests labels the time columns "cputime".
        let time = if run.report_cputime {
            "cputime"
        } else {
            "time"
        };
        writeln!(
            o,
            "{PREAMBLE_BLANK}    out-of-place                       in-place                       out-of-place per-iteration        in-place per-iteration"
        )?;
        writeln!(
            o,
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}{}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}{}",
            "size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw", "#wrong", ts(label),
            "p50", "p99", "p99.9", "max", "p50", "p99", "p99.9", "max", tail[0]
        )?;
        writeln!(
            o,
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}{}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}{}",
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", ts(format),
            "(us)", "(us)", "(us)", "(us)", "(us)", "(us)", "(us)", "(us)", tail[1]
        )?;
        o.flush()?;
        Ok(())
    }

    fn record(&mut self, run: &RunInfo, r: &SizeResult) -> anyhow::Result<()> {
        // --rounds: each line's median once all its rounds are in (`finish`).
        if run.rounds_many {
            if self.round < r.round {
                self.round = r.round;
                writeln!(self.out, "# Round {}", r.round)?;
                self.out.flush()?;
            }
            return Ok(());
        }
        self.write_line(run, r, "")
    }

    fn finish(&mut self, run: &RunInfo, summary: &Summary) -> anyhow::Result<()> {
        if let Some(rounds) = &summary.rounds {
            self.write_medians(run, rounds)?;
        }
        self.write_footer(run, summary)
    }
}

impl<W: Write> Table<W> {
    /// One table line of `r`, `suffix` at its end.
    fn write_line(&mut self, run: &RunInfo, r: &SizeResult, suffix: &str) -> anyhow::Result<()> {
        let mut line = format!(
            "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}",
            r.size_bytes, r.count, r.datatype, r.redop, r.root
        );
        let mut percentiles = String::new();
        for placement in Placement::BOTH {
            match r.measurements.iter().find(|m| m.placement == placement) {
                Some(m) => {
                    if self.best.is_none_or(|b| m.busbw_gbs > b.0) {
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
                        // NaN: the loop was timed whole (--percentiles 0).
                        match v.is_nan() {
                            true => percentiles += &format!("  {:>7}", "N/A"),
                            false => percentiles += &format!("  {}", fit(v, 7)),
                        }
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
        let expected = match run.expected_column {
            true => expected::cells(r),
            false => String::new(),
        };
        writeln!(self.out, "{line}{percentiles}{suffix}{expected}")?;
        if run.expected_column {
            for why in expected::shortfalls(run, r) {
                writeln!(self.out, "{why}")?;
            }
        }
        self.out.flush()?;
        if let (Some(algo), Some(proto)) = (&r.nccl_algo, &r.nccl_proto) {
            let choice = format!("{algo}/{proto}");
            match self.tuning.last_mut() {
                Some((_, last, c)) if *c == choice => *last = r.size_bytes,
                _ => self.tuning.push((r.size_bytes, r.size_bytes, choice)),
            }
        }
        Ok(())
    }

    /// --rounds: every line's median over its rounds, with its rounds and
    /// the spread of its busbw in the columns `rounds_columns` names.
    fn write_medians(&mut self, run: &RunInfo, rounds: &RoundsSummary) -> anyhow::Result<()> {
        writeln!(
            self.out,
            "# Median over rounds of each line; ±: half-width of the 95% interval of busbw's median, % of it (n/a: fewer than 3 rounds)"
        )?;
        for line in &rounds.lines {
            let mut suffix = format!("  {:>6}", line.rounds);
            for placement in Placement::BOTH {
                let spread = line.spread.iter().find(|(p, _)| *p == placement);
                let text = match spread {
                    None => String::new(),
                    // Wide spreads in whole percents, to fit the column.
                    Some((_, Some(s))) if s.is_finite() && *s < 1.0 => {
                        format!("±{:.1}%", s * 100.0)
                    }
                    Some((_, Some(s))) if s.is_finite() => format!("±{:.0}%", s * 100.0),
                    Some(_) => "n/a".to_string(),
                };
                suffix += &format!("  {text:>7}");
            }
            self.write_line(run, &line.result, &suffix)?;
        }
        let Some((tolerance, stopped_by)) = &rounds.auto else {
            return Ok(());
        };
        let counts: Vec<usize> = rounds.lines.iter().map(|l| l.rounds).collect();
        let (least, most) = (
            counts.iter().min().copied().unwrap_or(0),
            counts.iter().max().copied().unwrap_or(0),
        );
        let unsettled: Vec<String> = rounds
            .lines
            .iter()
            .filter(|l| l.settled == Some(false))
            .map(|l| {
                let r = &l.result;
                format!("{} B {} {}", r.size_bytes, r.datatype, r.redop)
            })
            .collect();
        let settled = rounds.lines.len() - unsettled.len();
        let span = match least == most {
            true => format!("{least}"),
            false => format!("{least} to {most}"),
        };
        let mut text = format!(
            "auto to ±{}%: {settled} of {} lines settled; {span} rounds a line",
            crate::cli::shown(tolerance * 100.0),
            rounds.lines.len()
        );
        if !unsettled.is_empty() {
            let why = stopped_by.as_deref().unwrap_or("the rounds' end");
            text += &format!(
                "; never settled (stopped by {why}): {}",
                unsettled.join(", ")
            );
        }
        writeln!(self.out, "# {:<20} : {text}", "Rounds")?;
        Ok(())
    }

    fn write_footer(&mut self, run: &RunInfo, summary: &Summary) -> anyhow::Result<()> {
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
        // nccl-tests prints "0 OK" with -c 0 too; parsers read that, and the note says why.
        let unchecked = if run.checked {
            ""
        } else {
            " (-c 0: nothing validated)"
        };
        writeln!(
            o,
            "# {:<20} : {} {verdict}{unchecked}",
            "Out of bounds values", summary.wrong_total
        )?;
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
        if let Some(min) = &summary.min_busbw {
            writeln!(o, "# {:<20} : {}", "Min bus bandwidth", min.sentence())?;
        }
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
        if !self.tuning.is_empty() {
            let ranges: Vec<String> = self
                .tuning
                .iter()
                .map(|(first, last, choice)| match first == last {
                    true => format!("{} {choice}", human_bytes(*first)),
                    false => format!("{}-{} {choice}", human_bytes(*first), human_bytes(*last)),
                })
                .collect();
            writeln!(o, "# {:<20} : {}", "NCCL algo/proto", ranges.join(", "))?;
        }
        writeln!(o, "#")?;
        writeln!(o, "# Collective test concluded: {}", run.program)?;
        // -M 1, where nccl-tests prints it: after the conclusion, then "#".
        if let Some(memory) = &run.memory_usage {
            writeln!(o, "{memory}")?;
            writeln!(o, "#")?;
        }
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
            unalign: 0,
            agg_iters: 1,
            blocking: 0,
            parallel_init: false,
            ranks: vec![RankFacts {
                rank: 3,
                pid: 4242,
                host: "node-1".into(),
                ordinal: 1,
                location: Location::Gpu("0000:18:00.0".into()),
                name: "NVIDIA H200".into(),
                group: 0,
            }],
        };
        assert_eq!(
            header.settings_line(),
            "nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0"
        );
        header.step = Step::Bytes(1 << 20);
        assert!(header.settings_line().contains(" step: 1048576(bytes) "));
        assert_eq!(
            header.ranks[0].line(),
            "#  Rank  3 Group  0 Pid   4242 on     node-1 device  1 [0000:18:00] NVIDIA H200"
        );
        let host = RankFacts {
            location: Location::Host,
            ..header.ranks[0].clone()
        };
        assert!(host.line().ends_with(" device  1 [host] NVIDIA H200"));
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
    fn footer_and_labels_as_nccl_tests_parsers_read_them() {
        let header = Header {
            gpus_per_process: 1,
            min_bytes: 8,
            max_bytes: 64,
            step: Step::Factor(2),
            warmup_iters: 1,
            iters: 5,
            check: 0,
            graph_launches: 0,
            unalign: 3,
            agg_iters: 4,
            blocking: 3,
            parallel_init: true,
            ranks: Vec::new(),
        };
        let run = RunInfo {
            program: "all_reduce_perf".into(),
            report_cputime: true,
            checked: false,
            memory_usage: Some("# Host memory usage    : Initialization 1.00 MB".into()),
            ..RunInfo::default()
        };
        let mut out = Vec::new();
        let mut table = Table::new(&mut out, header);
        table.start(&run).unwrap();
        for (size, algo, proto) in [
            (8, "RING", "LL"),
            (16, "RING", "LL"),
            (32, "TREE", "SIMPLE"),
        ] {
            let r = SizeResult {
                nccl_algo: Some(algo.into()),
                nccl_proto: Some(proto.into()),
                ..SizeResult::all_reduce_row(size, Vec::new())
            };
            table.record(&run, &r).unwrap();
        }
        table.finish(&run, &Summary::default()).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                " agg iters: 4 validation: 0 graph: 0 unalign: 3\n# Blocking Enabled: wait and barrier \
                 after each outer iteration (-n); time excludes barrier \n# Parallel Init Enabled: "
            ),
            "{text}"
        );
        assert!(
            text.contains("  root  cputime   algbw   busbw  #wrong  cputime "),
            "{text}"
        );
        assert!(
            text.contains("\n# Out of bounds values : 0 OK (-c 0: nothing validated)\n"),
            "{text}"
        );
        assert!(
            text.contains("\n# NCCL algo/proto      : 8 B-16 B RING/LL, 32 B TREE/SIMPLE\n"),
            "{text}"
        );
        assert!(text.ends_with(
            "# Collective test concluded: all_reduce_perf\n# Host memory usage    : Initialization 1.00 MB\n#\n"
        ));
    }

    #[test]
    fn percent_g() {
        assert_eq!(format_g(12.3456789), "12.3457");
        assert_eq!(format_g(0.5), "0.5");
        assert_eq!(format_g(100.0), "100");
    }

    /// The table of two sizes of a 2-node all-reduce (8 B and 4 MiB, the
    /// latter at 40% of a 1 Gb/s link), with the model's figures or without.
    fn two_sizes(run: &RunInfo, model: Option<crate::model::Model>) -> String {
        use crate::report::Measurement;
        use crate::stats::{histogram, IterStats};
        let mut model = model;
        let h = histogram(&[1e-6]);
        let header = Header {
            gpus_per_process: 1,
            min_bytes: 8,
            max_bytes: 4 << 20,
            step: Step::Factor(2),
            warmup_iters: 1,
            iters: 5,
            check: 1,
            graph_launches: 0,
            unalign: 0,
            agg_iters: 1,
            blocking: 0,
            parallel_init: false,
            ranks: Vec::new(),
        };
        let mut out = Vec::new();
        let mut table = Table::new(&mut out, header);
        table.start(run).unwrap();
        for (size, busbw) in [(8u64, 0.0004), (4u64 << 20, 0.05)] {
            let m = |placement| Measurement {
                placement,
                time_us: size as f64 / busbw / 1e3,
                algbw_gbs: busbw,
                busbw_gbs: busbw,
                wrong: Some(0),
                latency: IterStats::from_seconds(&[1e-6], &h),
                histogram: h.clone(),
                slowest_rank: 1,
                timestamp: String::new(),
                cpu_us: None,
                wrong_ranks: vec![],
                per_iter: None,
            };
            let measurements = vec![m(Placement::OutOfPlace), m(Placement::InPlace)];
            let times: Vec<f64> = measurements.iter().map(|m| m.time_us).collect();
            let r = SizeResult {
                expected: model
                    .as_mut()
                    .and_then(|m| m.expect("all_reduce", size, 1.0, &times, None)),
                ..SizeResult::all_reduce_row(size, measurements)
            };
            table.record(run, &r).unwrap();
        }
        table.finish(run, &Summary::default()).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn expected_off_leaves_the_table_byte_for_byte() {
        use crate::model::{Library, Model, RunShape};
        let limits = [crate::limits::Limit {
            name: "1 Gb/s".into(),
            gbs: 0.125,
        }];
        let model = Model::new(&RunShape {
            library: Library::Mpi,
            nranks: 2,
            nnodes: 2,
            limits: &limits,
            split: false,
            latency_us: None,
        })
        .unwrap();
        let today = RunInfo {
            program: "all_reduce_perf".into(),
            ..RunInfo::default()
        };
        let off = RunInfo {
            model: Some(model.clone()),
            model_line: model.describe(),
            ..today.clone()
        };
        let plain = two_sizes(&today, None);
        assert_eq!(two_sizes(&off, Some(model.clone())), plain);
        assert!(!plain.contains("expected"), "{plain}");
        let on = RunInfo {
            expected_column: true,
            ..off
        };
        let text = two_sizes(&on, Some(model));
        assert!(
            text.contains("# Expected (alpha-beta model): 2 node(s) x 1 rank(s)"),
            "{text}"
        );
        assert!(text.contains("  expected    %exp    %exp\n"), "{text}");
        // 4 MiB at 0.05 GB/s against 0.125 GB/s (the 8 B line calibrated the
        // latency): 40%, with the link and the checks.
        assert!(
            text.contains(
                "# Short of expected: 4194304 B out-of-place: busbw 0.05 GB/s is 40% of the "
            ),
            "{text}"
        );
        assert!(text.contains("(rabenseifner, bound out of a node: 1 Gb/s 0.125 GB/s); check the NIC alone (ib_write_bw)"), "{text}");
        // Without a model the columns say N/A.
        let none = RunInfo { model: None, ..on };
        assert!(two_sizes(&none, None).contains("       N/A     N/A     N/A\n"));
    }
}
