//! What a run prints and records: perftest's header block, connection lines and
//! result tables (same columns, units and number formats, so perftest log
//! parsers read ours), and one CSV `Row` per printed line.

use super::args::Plan;
use super::device::show_gid;
use super::exchange::Hello;
use super::lat::LatStats;
use super::{Benchmark, Test, Verb};
use crate::report::{Row, SCHEMA_VERSION};
use crate::stats::empty_histogram;
use hdrhistogram::Histogram;

/// perftest's RESULT_LINE.
pub const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------";
const MIB: f64 = 1024.0 * 1024.0;
/// perftest's Gb/s: 125e6 bytes per second.
const GBIT_BYTES: f64 = 125e6;

/// A bandwidth limit the row is compared against.
#[derive(Clone, Debug, PartialEq)]
pub struct Limit {
    pub name: String,
    /// GB/s (1e9 bytes per second).
    pub gbs: f64,
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
}

/// One side's bandwidth figures, from its measurement.
pub fn bw_figures(
    size: u64,
    messages: u64,
    elapsed_ns: u64,
    peak_msgs: Option<f64>,
    histogram: Histogram<u64>,
) -> Figures {
    let seconds = elapsed_ns as f64 / 1e9;
    let msgs_per_s = messages as f64 / seconds;
    Figures::Bw {
        iterations: messages,
        peak: peak_msgs.map(|p| p * size as f64),
        average: msgs_per_s * size as f64,
        msgs_per_s,
        histogram,
    }
}

/// Bandwidth figures of several measurements at once (both directions of a
/// pair with -b, or every pair): rates and peaks add, as perftest adds them.
pub fn sum_bw(parts: &[Figures]) -> Figures {
    let mut iterations = 0;
    let mut peak = Some(0.0);
    let (mut average, mut msgs_per_s) = (0.0, 0.0);
    let mut histogram = empty_histogram();
    for part in parts {
        if let Figures::Bw {
            iterations: i,
            peak: p,
            average: a,
            msgs_per_s: m,
            histogram: h,
        } = part
        {
            iterations += i;
            peak = peak.zip(*p).map(|(x, y)| x + y);
            average += a;
            msgs_per_s += m;
            histogram.add(h).expect("histograms of equal bounds");
        }
    }
    Figures::Bw {
        iterations,
        peak,
        average,
        msgs_per_s,
        histogram,
    }
}

/// Latency figures of every pair together, from the merged samples (the
/// per-pair lines use perftest's exact statistics; this line the histogram's).
pub fn all_lat(parts: &[Figures]) -> Figures {
    let mut histogram = empty_histogram();
    let mut iterations = 0;
    for part in parts {
        if let Figures::Lat {
            iterations: i,
            histogram: h,
            ..
        } = part
        {
            iterations += i;
            histogram.add(h).expect("histograms of equal bounds");
        }
    }
    let us = |ns: u64| ns as f64 / 1e3;
    let stats = LatStats {
        t_min_us: us(histogram.min()),
        t_max_us: us(histogram.max()),
        t_typical_us: us(histogram.value_at_quantile(0.5)),
        t_avg_us: histogram.mean() / 1e3,
        t_stdev_us: histogram.stdev() / 1e3,
        p99_us: us(histogram.value_at_quantile(0.99)),
        p999_us: us(histogram.value_at_quantile(0.999)),
    };
    Figures::Lat {
        iterations,
        stats,
        histogram,
    }
}

fn bw_unit(bytes_per_s: f64, gbits: bool) -> f64 {
    if gbits {
        bytes_per_s / GBIT_BYTES
    } else {
        bytes_per_s / MIB
    }
}

/// The column titles of the table.
pub fn table_header(test: Test, gbits: bool, labelled: bool) -> String {
    let columns = match (test, gbits) {
        (Test::Bw, false) => " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]",
        (Test::Bw, true) => " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
        (Test::Lat, _) => " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ",
    };
    if labelled {
        format!(" #pair{columns}")
    } else {
        columns.to_string()
    }
}

/// One table row, in perftest's printf formats (REPORT_FMT, REPORT_FMT_EXT
/// below 0.1 Gb/s, REPORT_FMT_LAT).
pub fn table_row(line: &Line, gbits: bool) -> String {
    let size = line.size;
    let row = match &line.figures {
        Figures::Bw {
            iterations,
            peak,
            average,
            msgs_per_s,
            ..
        } => {
            let peak = bw_unit(peak.unwrap_or(0.0), gbits);
            let average = bw_unit(*average, gbits);
            let mpps = msgs_per_s / 1e6;
            if gbits && average < 0.1 {
                format!(" {size:<7}    {iterations}           {peak:<7.6}            {average:<7.6}            {mpps:<7.6}")
            } else {
                format!(" {size:<7}    {iterations:<10}       {peak:<7.2}            {average:<7.2}\t\t     {mpps:<7.6}")
            }
        }
        Figures::Lat { iterations, stats: s, .. } => format!(
            " {size:<7} {iterations}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
            s.t_min_us, s.t_max_us, s.t_typical_us, s.t_avg_us, s.t_stdev_us, s.p99_us, s.p999_us
        ),
    };
    match &line.label {
        Some(label) => format!(" {label:<5}{row}"),
        None => row,
    }
}

/// perftest's title: "RDMA_Write BW Test", "Send Bidirectional BW Test", ...
pub fn title(bench: Benchmark, bidirectional: bool) -> String {
    let verb = match bench.verb {
        Verb::Write => "RDMA_Write",
        Verb::Read => "RDMA_Read",
        Verb::Send => "Send",
    };
    match bench.test {
        Test::Bw if bidirectional => format!("{verb} Bidirectional BW Test"),
        Test::Bw => format!("{verb} BW Test"),
        Test::Lat => format!("{verb} Latency Test"),
    }
}

/// Facts of the run for the header block.
pub struct Header<'a> {
    pub plan: &'a Plan,
    pub mine: &'a Hello,
    pub transport: &'a str,
    /// The GID line's value (None: LID routing).
    pub gid: Option<String>,
    pub mtu: u32,
    pub out_reads: u8,
    /// Shows TX depth (perftest shows it on the sending side).
    pub sending: bool,
    /// "Ethernet" (TCP, as perftest says) or "MPI (4 ranks, 2 pairs)".
    pub exchange: String,
    /// One line per pair under mpirun.
    pub pairs: Vec<String>,
    pub warnings: Vec<String>,
}

/// perftest's header block, with fabricbench's additions at the end.
pub fn header_block(h: &Header) -> Vec<String> {
    let p = h.plan;
    let mut out = vec![
        RESULT_LINE.to_string(),
        format!("                    {}", title(p.bench, p.bidirectional)),
        format!(
            " Dual-port       : OFF\t\tDevice         : {}",
            h.mine.device
        ),
        format!(
            " Number of qps   : {}\t\tTransport type : {}",
            p.qps, h.transport
        ),
        " Connection type : RC\t\tUsing SRQ      : OFF".to_string(),
        // Posted with ibv_post_send, as perftest does where it prints OFF.
        " ibv_wr* API     : OFF".to_string(),
    ];
    if h.sending || p.bidirectional {
        out.push(format!(" TX depth        : {}", p.tx_depth));
    }
    if p.bench.verb == Verb::Send && (!h.sending || p.bidirectional || p.bench.test == Test::Lat) {
        out.push(format!(" RX depth        : {}", p.rx_depth));
    }
    if p.bench.test == Test::Bw {
        out.push(format!(" CQ Moderation   : {}", p.cq_mod));
    }
    out.push(format!(" Mtu             : {}[B]", h.mtu));
    out.push(format!(" Link type       : {}", h.mine.link.name()));
    if let Some(gid) = &h.gid {
        out.push(format!(" GID index       : {gid}"));
    }
    if p.bench.verb == Verb::Read {
        out.push(format!(" Outstand reads  : {}", h.out_reads));
    } else {
        out.push(format!(" Max inline data : {}[B]", p.inline_size));
    }
    out.push(" rdma_cm QPs\t : OFF".to_string());
    out.push(format!(" Data ex. method : {}", h.exchange));
    out.push(format!(
        " QP timeout      : {} (ACK timeout 4.096 us * 2^{} = {})",
        p.qp_timeout,
        p.qp_timeout,
        ack_timeout(p.qp_timeout)
    ));
    out.push(format!(
        " Port rate       : {}",
        h.mine
            .rate
            .as_ref()
            .map_or("unknown (no sysfs rate)".to_string(), |r| r.text.clone())
    ));
    out.push(format!(
        " Timing          : CLOCK_MONOTONIC; {}",
        match p.bench.test {
            Test::Bw => "BW from first post to last completion, peak over any window",
            Test::Lat if p.bench.verb == Verb::Read => "latency = round trip of one read",
            Test::Lat => "latency = half the round trip",
        }
    ));
    out.push(format!(
        " Tool            : fabricbench {} (perftest-compatible output)",
        env!("CARGO_PKG_VERSION")
    ));
    out.extend(h.pairs.iter().map(|l| format!(" {l}")));
    out.extend(h.warnings.iter().map(|w| format!(" WARNING: {w}")));
    out.push(RESULT_LINE.to_string());
    out
}

fn ack_timeout(exponent: u8) -> String {
    if exponent == 0 {
        return "infinite".into();
    }
    let seconds = 4.096e-6 * 2f64.powi(exponent as i32);
    if seconds >= 1.0 {
        format!("{seconds:.2} s")
    } else {
        format!("{:.1} ms", seconds * 1e3)
    }
}

/// perftest's "local address" / "remote address" lines of every QP.
pub fn connection_lines(side: &str, hello: &Hello) -> Vec<String> {
    let mut out = Vec::new();
    for q in &hello.qps {
        out.push(format!(
            " {side} address: LID {:#06x} QPN {:#06x} PSN {:#08x} RKey {:#08x} VAddr {:#016x}",
            hello.lid, q.qpn, q.psn, q.rkey, q.addr
        ));
        if hello.gid_index.is_some() {
            out.push(format!(" GID: {}", show_gid(&hello.gid)));
        }
    }
    out
}

/// Facts of the run shared by every CSV row.
pub struct CsvContext {
    pub run_id: String,
    pub timestamp: String,
    pub bench: Benchmark,
    pub bidirectional: bool,
    pub transport: String,
    pub library_version: String,
    pub nranks: usize,
    pub iters: usize,
    pub warmup_iters: usize,
    pub env: String,
}

/// The CSV row of a printed line (the README's verbs section documents the mapping).
pub fn csv_row(ctx: &CsvContext, line: &Line) -> Row {
    let mut nodes: Vec<&String> = Vec::new();
    for h in &line.hosts {
        if !nodes.contains(&h) {
            nodes.push(h);
        }
    }
    let mut row = Row {
        schema_version: SCHEMA_VERSION,
        run_id: ctx.run_id.clone(),
        timestamp: ctx.timestamp.clone(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        backend: "verbs".into(),
        transport: ctx.transport.clone(),
        library_version: ctx.library_version.clone(),
        device: line.devices.clone(),
        hosts: line.hosts.join(";"),
        nranks: ctx.nranks,
        nnodes: nodes.len(),
        collective: ctx.bench.collective().into(),
        datatype: "none".into(),
        redop: "none".into(),
        root: -1,
        size_bytes: line.size,
        iters: ctx.iters,
        warmup_iters: ctx.warmup_iters,
        avg_mode: "none".into(),
        busbw_factor: 1.0,
        env: ctx.env.clone(),
        pair: Some(line.label.clone().unwrap_or_else(|| "0".into())),
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
            row.placement = if ctx.bidirectional { "bw_bidir" } else { "bw" }.into();
            row.count = *iterations;
            row.time_us = 1e6 / msgs_per_s;
            row.algbw_gbs = average / 1e9;
            row.busbw_gbs = row.algbw_gbs;
            row.peak_gbs = peak.map(|p| p / 1e9);
            row.msg_rate_mpps = Some(msgs_per_s / 1e6);
            if let Some(limit) = &line.limit {
                row.limit_name = Some(limit.name.clone());
                row.limit_gbs = Some(limit.gbs);
                row.pct_of_limit = Some(row.algbw_gbs / limit.gbs * 100.0);
            }
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
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::args::parse;
    use crate::verbs::device::{LinkLayer, PortRate};
    use crate::verbs::exchange::{QpInfo, PROTOCOL};

    const WRITE_BW: Benchmark = Benchmark::new(Verb::Write, Test::Bw);

    fn bw_line(label: Option<&str>) -> Line {
        // 5000 messages of 64 KiB in 0.1 s: 3125 MiB/s, 0.05 Mpps.
        Line {
            size: 65536,
            label: label.map(str::to_string),
            figures: bw_figures(
                65536,
                5000,
                100_000_000,
                Some(60_000.0),
                crate::stats::histogram(&[1e-6, 3e-6]),
            ),
            limit: Some(Limit {
                name: "port rate rxe0:1 (10 Gb/sec (1X QDR))".into(),
                gbs: 1.25,
            }),
            devices: "rxe0:1,rxe0:1".into(),
            hosts: vec!["a".into(), "a".into()],
        }
    }

    #[test]
    fn bandwidth_rows_in_perftest_format() {
        let line = bw_line(None);
        assert_eq!(
            table_row(&line, false),
            " 65536      5000             3750.00            3125.00\t\t     0.050000"
        );
        // 3125 MiB/s = 26.21 Gb/s.
        assert_eq!(
            table_row(&line, true),
            " 65536      5000             31.46              26.21  \t\t     0.050000"
        );
        assert_eq!(
            table_row(&bw_line(Some("sum")), false),
            " sum   65536      5000             3750.00            3125.00\t\t     0.050000"
        );
        assert_eq!(
            table_header(Test::Bw, false, false),
            " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
        );
        assert!(table_header(Test::Bw, true, true).starts_with(" #pair #bytes"));
    }

    #[test]
    fn slow_gbit_rows_get_more_decimals_and_no_peak_prints_zero() {
        let line = Line {
            figures: bw_figures(2, 1000, 1_000_000_000, None, empty_histogram()),
            size: 2,
            ..bw_line(None)
        };
        // 2000 B/s = 0.000016 Gb/s: perftest's REPORT_FMT_EXT.
        assert_eq!(
            table_row(&line, true),
            " 2          1000           0.000000            0.000016            0.001000"
        );
    }

    #[test]
    fn latency_rows_in_perftest_format() {
        let line = Line {
            size: 2,
            label: None,
            figures: Figures::Lat {
                iterations: 1000,
                stats: LatStats {
                    t_min_us: 1.5,
                    t_max_us: 9.25,
                    t_typical_us: 2.0,
                    t_avg_us: 2.25,
                    t_stdev_us: 0.5,
                    p99_us: 5.0,
                    p999_us: 9.0,
                },
                histogram: empty_histogram(),
            },
            limit: None,
            devices: "rxe0:1".into(),
            hosts: vec!["a".into()],
        };
        assert_eq!(
            table_row(&line, false),
            " 2       1000          1.50           9.25         2.00     \t       2.25        \t0.50   \t\t5.00    \t\t9.00   "
        );
    }

    #[test]
    fn sums_add_rates_and_peaks() {
        let a = bw_figures(8, 100, 1000, Some(2e8), crate::stats::histogram(&[1e-6]));
        let b = bw_figures(8, 100, 2000, Some(1e8), crate::stats::histogram(&[2e-6]));
        let Figures::Bw {
            iterations,
            peak,
            average,
            msgs_per_s,
            histogram,
        } = sum_bw(&[a, b])
        else {
            panic!()
        };
        assert_eq!(iterations, 200);
        assert_eq!(peak, Some(8.0 * 3e8));
        // 100 messages in 1 us plus 100 in 2 us.
        assert_eq!(msgs_per_s, 1e8 + 5e7);
        assert_eq!(average, 8.0 * 1.5e8);
        assert_eq!(histogram.len(), 2);
        let no_peak = bw_figures(8, 100, 1000, None, empty_histogram());
        let Figures::Bw { peak, .. } =
            sum_bw(&[no_peak, bw_figures(8, 1, 1, Some(1.0), empty_histogram())])
        else {
            panic!()
        };
        assert_eq!(peak, None);
    }

    #[test]
    fn merged_latency_of_all_pairs() {
        let part = |v: &[f64]| Figures::Lat {
            iterations: v.len() as u64,
            stats: crate::verbs::lat::perftest_stats(&[1.0, 2.0, 3.0]).unwrap(),
            histogram: crate::verbs::lat::histogram_of(v),
        };
        let Figures::Lat {
            iterations, stats, ..
        } = all_lat(&[part(&[1000.0, 2000.0]), part(&[3000.0, 4000.0])])
        else {
            panic!()
        };
        assert_eq!(iterations, 4);
        // From the histogram: exact to its 3 significant digits.
        assert_eq!(stats.t_min_us, 1.0);
        assert!(
            (stats.t_max_us - 4.0).abs() <= 4.0 * 1e-3,
            "{}",
            stats.t_max_us
        );
        assert!(
            (stats.t_avg_us - 2.5).abs() <= 2.5 * 1e-3,
            "{}",
            stats.t_avg_us
        );
    }

    #[test]
    fn csv_rows_map_perftest_figures() {
        let ctx = CsvContext {
            run_id: "r".into(),
            timestamp: "t".into(),
            bench: WRITE_BW,
            bidirectional: false,
            transport: "RC over RoCE v2".into(),
            library_version: "libibverbs".into(),
            nranks: 2,
            iters: 5000,
            warmup_iters: 128,
            env: String::new(),
        };
        let row = csv_row(&ctx, &bw_line(None));
        assert_eq!(row.collective, "ib_write");
        assert_eq!(
            (row.placement.as_str(), row.pair.as_deref()),
            ("bw", Some("0"))
        );
        assert_eq!(row.nnodes, 1);
        assert!((row.algbw_gbs - 3.2768).abs() < 1e-9);
        assert_eq!(row.msg_rate_mpps, Some(0.05));
        assert!((row.pct_of_limit.unwrap() - 262.144).abs() < 1e-6);
        assert_eq!(row.time_us, 20.0);
        assert_eq!(row.min_us, 1.0);
        assert!((row.max_us - 3.0).abs() <= 3.0 * 1e-3, "{}", row.max_us);
    }

    #[test]
    fn header_block_has_perftests_lines() {
        let plan = parse(WRITE_BW, ["ib_write_bw", "-u", "18"]).unwrap();
        let hello = Hello {
            protocol: PROTOCOL.into(),
            program: "ib_write_bw".into(),
            settings: vec![],
            host: "h".into(),
            device: "rxe0".into(),
            port: 1,
            link: LinkLayer::Ethernet,
            lid: 0,
            gid: "::ffff:127.0.0.1".parse().unwrap(),
            gid_index: Some(1),
            active_mtu: 4096,
            max_rd_atomic: 128,
            rate: Some(PortRate {
                gbit_per_s: 10.0,
                text: "10 Gb/sec (1X QDR)".into(),
            }),
            qps: vec![QpInfo {
                qpn: 0x12,
                psn: 0x286f0b,
                rkey: 0x328,
                addr: 0x5636d2394000,
                len: 65536,
            }],
        };
        let lines = header_block(&Header {
            plan: &plan,
            mine: &hello,
            transport: "IB",
            gid: Some(
                "1 (RoCE v2 ::ffff:127.0.0.1 on lo, chosen automatically; -x overrides)".into(),
            ),
            mtu: 4096,
            out_reads: 1,
            sending: true,
            exchange: "Ethernet".into(),
            pairs: vec![],
            warnings: vec!["w".into()],
        });
        for want in [
            "                    RDMA_Write BW Test",
            " Dual-port       : OFF\t\tDevice         : rxe0",
            " Number of qps   : 1\t\tTransport type : IB",
            " TX depth        : 128",
            " CQ Moderation   : 1",
            " Mtu             : 4096[B]",
            " Link type       : Ethernet",
            " Max inline data : 0[B]",
            " QP timeout      : 18 (ACK timeout 4.096 us * 2^18 = 1.07 s)",
            " Port rate       : 10 Gb/sec (1X QDR)",
            " WARNING: w",
        ] {
            assert!(
                lines.iter().any(|l| l == want),
                "missing {want:?} in {lines:#?}"
            );
        }
        assert_eq!(lines[0], RESULT_LINE);
        assert_eq!(
            connection_lines("local", &hello),
            vec![
                " local address: LID 0x0000 QPN 0x0012 PSN 0x286f0b RKey 0x000328 VAddr 0x005636d2394000",
                " GID: ::ffff:127.0.0.1"
            ]
        );
        assert_eq!(ack_timeout(14), "67.1 ms");
        assert_eq!(ack_timeout(0), "infinite");
    }
}
