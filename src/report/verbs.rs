//! The verbs family's results (perftest's figures of one size, for each pair
//! and for every pair together) and their CSV rows; docs/verbs.md ("CSV rows")
//! documents the mapping.

use super::counters::{SizeCounters, WithCounters};
use super::perftest_extra::Direction;
use super::{Row, RunInfo, ToRows, SCHEMA_VERSION};
use crate::limits::Limit;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// perftest's latency columns, in microseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatStats {
    pub t_min_us: f64,
    pub t_max_us: f64,
    pub t_typical_us: f64,
    pub t_avg_us: f64,
    pub t_stdev_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

/// One size's figures of a pair, or of every pair together.
#[derive(Clone, Debug)]
pub enum Figures {
    Bw {
        iterations: u64,
        /// Bytes per second; None with -N.
        peak: Option<f64>,
        average: f64,
        msgs_per_s: f64,
        /// Post-to-completion latency, ns.
        histogram: Histogram<u64>,
    },
    Lat {
        iterations: u64,
        stats: LatStats,
        /// Every sample, ns.
        histogram: Histogram<u64>,
    },
}

/// One printed line and CSV row.
#[derive(Clone, Debug)]
pub struct Line {
    pub size: u64,
    /// "0", "1", ..., "sum" or "all"; None with a single pair (perftest's layout).
    pub label: Option<String>,
    pub figures: Figures,
    pub limit: Option<Limit>,
    /// "rxe1:1,rxe2:1": the devices and ports of the line.
    pub devices: String,
    pub hosts: Vec<String>,
    /// --data_validation: messages that arrived wrong (None: not checked).
    pub wrong: Option<u64>,
    /// --report-both: which direction of a -b pair the line counts (None without it).
    pub direction: Option<Direction>,
}

/// One size of a verbs run: its lines, one per pair and with several pairs
/// one over all of them.
#[derive(Clone, Debug)]
pub struct VerbsResult {
    /// CSV name: "ib_write".
    pub collective: String,
    /// -b: both directions at once.
    pub bidirectional: bool,
    /// UTC time the size finished.
    pub timestamp: String,
    pub lines: Vec<Line>,
    /// This node's fabric counter deltas over the size (the side that prints).
    pub counters: Option<SizeCounters>,
    /// --cpu_util: perftest's CPU utilisation (%) of the printing side's host over the size.
    pub cpu_util: Option<f64>,
    /// --rounds: the round that measured it (1 for the first, and without --rounds).
    pub round: u32,
    /// --rounds R > 1, on the table's result: its figures are medians over rounds.
    pub spread: Option<Spread>,
}

/// A size's lines as medians over rounds, and how far each could be off.
#[derive(Clone, Debug, PartialEq)]
pub struct Spread {
    pub rounds: usize,
    /// Per line: the half-width of the 95% interval of the median of its main
    /// figure (BW average, t_typical), in % of that median; None under
    /// `stats::interval::MIN_SAMPLES` rounds.
    pub half_width_pct: Vec<Option<f64>>,
}

impl WithCounters for VerbsResult {
    fn size_bytes(&self) -> u64 {
        self.lines.first().map_or(0, |l| l.size)
    }
    fn counters(&self) -> Option<&SizeCounters> {
        self.counters.as_ref()
    }
}

impl ToRows for VerbsResult {
    fn rows(&self, run: &RunInfo) -> Vec<Row> {
        self.lines
            .iter()
            .map(|line| Row::verbs(run, self, line))
            .collect()
    }
}

impl Row {
    /// The CSV row of one printed line of a verbs run.
    pub fn verbs(run: &RunInfo, result: &VerbsResult, line: &Line) -> Row {
        let mut nodes: Vec<&String> = Vec::new();
        for h in &line.hosts {
            if !nodes.contains(&h) {
                nodes.push(h);
            }
        }
        let mut row = Row {
            schema_version: SCHEMA_VERSION,
            run_id: run.run_id.clone(),
            timestamp: result.timestamp.clone(),
            tool_version: run.tool_version.clone(),
            backend: run.backend_name().to_string(),
            transport: run.transport.clone(),
            library_version: run.library_version.clone(),
            device: line.devices.clone(),
            hosts: line.hosts.join(";"),
            nranks: run.nranks,
            nnodes: nodes.len(),
            collective: result.collective.clone(),
            datatype: "none".into(),
            redop: "none".into(),
            root: -1,
            size_bytes: line.size,
            iters: run.iters,
            warmup_iters: run.warmup_iters,
            avg_mode: run.average_name().to_string(),
            busbw_factor: 1.0,
            env: run.env.join(";"),
            pair: Some(line.label.clone().unwrap_or_else(|| "0".into())),
            wrong: line.wrong,
            direction: line.direction.map(|d| d.name().to_string()),
            cpu_util_pct: result.cpu_util,
            round: Some(result.round),
            ..Row::default()
        };
        let histogram = match &line.figures {
            Figures::Bw {
                iterations,
                peak,
                average,
                msgs_per_s,
                histogram,
            } => {
                row.placement = if result.bidirectional {
                    "bw_bidir"
                } else {
                    "bw"
                }
                .into();
                row.count = *iterations;
                row.time_us = 1e6 / msgs_per_s;
                row.algbw_gbs = average / 1e9;
                // A pair's bus is its link: busbw is algbw, and so is what the
                // port limit is compared with.
                row.busbw_gbs = row.algbw_gbs;
                row.peak_gbs = peak.map(|p| p / 1e9);
                row.msg_rate_mpps = Some(msgs_per_s / 1e6);
                row.set_limit(line.limit.as_ref());
                histogram
            }
            Figures::Lat {
                iterations,
                stats,
                histogram,
            } => {
                row.placement = "lat".into();
                row.count = *iterations;
                row.time_us = stats.t_avg_us;
                row.algbw_gbs = line.size as f64 / (stats.t_avg_us * 1e3);
                row.busbw_gbs = row.algbw_gbs;
                row.stdev_us = Some(stats.t_stdev_us);
                histogram
            }
        };
        let us = |ns: u64| ns as f64 / 1e3;
        row.min_us = us(histogram.min());
        row.p50_us = us(histogram.value_at_quantile(0.5));
        row.p99_us = us(histogram.value_at_quantile(0.99));
        row.p999_us = us(histogram.value_at_quantile(0.999));
        row.max_us = us(histogram.max());
        row.set_counters(result.counters.as_ref());
        row
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::limits;
    use crate::report::facts::RunBackend;
    use crate::stats::{empty_histogram, histogram};

    fn run() -> RunInfo {
        RunInfo {
            run_id: "r".into(),
            tool_version: "0.1.0".into(),
            backend: Some(RunBackend::Verbs),
            transport: "RC over RoCE v2".into(),
            library_version: "libibverbs".into(),
            nranks: 2,
            iters: 5000,
            warmup_iters: 128,
            ..RunInfo::default()
        }
    }

    /// 5000 messages of 64 KiB in 0.1 s: 3125 MiB/s, 0.05 Mpps, on one host.
    pub(crate) fn bw_line(label: Option<&str>, limit: Option<Limit>) -> Line {
        Line {
            size: 65536,
            label: label.map(str::to_string),
            figures: Figures::Bw {
                iterations: 5000,
                peak: Some(60_000.0 * 65536.0),
                average: 50_000.0 * 65536.0,
                msgs_per_s: 50_000.0,
                histogram: histogram(&[1e-6, 3e-6]),
            },
            limit,
            devices: "rxe0:1,rxe0:1".into(),
            hosts: vec!["a".into(), "a".into()],
            wrong: None,
            direction: None,
        }
    }

    fn result(bidirectional: bool, lines: Vec<Line>) -> VerbsResult {
        VerbsResult {
            collective: "ib_write".into(),
            bidirectional,
            timestamp: "t".into(),
            lines,
            counters: None,
            cpu_util: None,
            round: 1,
            spread: None,
        }
    }

    #[test]
    fn bandwidth_rows_map_perftest_figures() {
        let limit = Limit {
            name: "port rate rxe0:1 10 Gb/sec (1X QDR)".into(),
            gbs: 1.25,
        };
        let rows = result(false, vec![bw_line(None, Some(limit.clone()))]).rows(&run());
        let row = &rows[0];
        assert_eq!(row.collective, "ib_write");
        assert_eq!(
            (row.placement.as_str(), row.pair.as_deref()),
            ("bw", Some("0"))
        );
        assert_eq!((row.nnodes, row.nranks, row.count), (1, 2, 5000));
        assert!((row.algbw_gbs - 3.2768).abs() < 1e-9);
        assert_eq!(row.busbw_gbs, row.algbw_gbs);
        assert_eq!(row.msg_rate_mpps, Some(0.05));
        // The one percent formula, on algbw.
        assert_eq!(
            row.pct_of_limit,
            Some(limits::percent_of(row.algbw_gbs, &limit))
        );
        assert!((row.pct_of_limit.unwrap() - 262.144).abs() < 1e-6);
        assert_eq!(row.time_us, 20.0);
        assert_eq!(row.min_us, 1.0);
        assert!((row.max_us - 3.0).abs() <= 3.0 * 1e-3, "{}", row.max_us);
        assert_eq!((row.timestamp.as_str(), row.launch.as_deref()), ("t", None));
        let both = result(true, vec![bw_line(None, None)]).rows(&run());
        assert_eq!(both[0].placement, "bw_bidir");
        assert_eq!(
            (both[0].limit_name.as_ref(), both[0].pct_of_limit),
            (None, None)
        );
    }

    #[test]
    fn latency_rows_carry_the_average_and_no_limit() {
        let stats = LatStats {
            t_min_us: 1.5,
            t_max_us: 9.25,
            t_typical_us: 2.0,
            t_avg_us: 2.5,
            t_stdev_us: 0.5,
            p99_us: 5.0,
            p999_us: 9.0,
        };
        let line = Line {
            size: 2,
            label: Some("all".into()),
            figures: Figures::Lat {
                iterations: 1000,
                stats,
                histogram: empty_histogram(),
            },
            hosts: vec!["a".into(), "b".into()],
            wrong: None,
            ..bw_line(
                None,
                Some(Limit {
                    name: "x".into(),
                    gbs: 1.0,
                }),
            )
        };
        let row = &result(false, vec![line]).rows(&run())[0];
        assert_eq!(
            (row.placement.as_str(), row.pair.as_deref()),
            ("lat", Some("all"))
        );
        assert_eq!((row.time_us, row.stdev_us), (2.5, Some(0.5)));
        // 2 bytes in 2.5 us.
        assert_eq!(row.algbw_gbs, 2.0 / 2500.0);
        assert_eq!(
            (row.limit_gbs, row.peak_gbs, row.msg_rate_mpps),
            (None, None, None)
        );
        assert_eq!((row.nnodes, row.hosts.as_str()), (2, "a;b"));
    }
}
