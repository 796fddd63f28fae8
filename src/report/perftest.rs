//! perftest's output for the verbs family: the header block, the connection
//! lines and the result table, with perftest's columns, units and number
//! formats, so that perftest log parsers read ours. `PerftestTable` writes it
//! from the header facts it is made with and each size's `VerbsResult`.

use super::perftest_extra::ExtraColumns;
use super::verbs::{Figures, Line, VerbsResult};
use super::{Exporter, RunInfo, Summary};
use std::io::Write;

/// perftest's RESULT_LINE.
pub const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------";
const MIB: f64 = 1024.0 * 1024.0;
/// perftest's Gb/s: 125e6 bytes per second.
const GBIT_BYTES: f64 = 125e6;

/// Which table, in which units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Columns {
    /// MiB/s, or Gb/s with --report_gbits.
    Bandwidth {
        gbits: bool,
    },
    Latency,
}

impl Columns {
    pub fn gbits(self) -> bool {
        matches!(self, Columns::Bandwidth { gbits: true })
    }
}

/// The settings line after the GID: reads in flight (read tests), else the
/// largest inline message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadsOrInline {
    OutstandReads(u8),
    MaxInline(u32),
}

/// What the peer needs to reach one QP, as perftest's address line shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAddress {
    pub qpn: u32,
    pub psn: u32,
    pub rkey: u32,
    pub vaddr: u64,
}

/// One side's connection details, for its "local/remote address" lines.
#[derive(Clone, Debug, PartialEq)]
pub struct Connection {
    pub lid: u16,
    /// The GID as shown; None: LID routing (no GID line).
    pub gid: Option<String>,
    pub qps: Vec<QpAddress>,
}

/// perftest's lines of the post path: the post API, -e, -l, --recv_post_list
/// and the CQE batch.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PostLines {
    /// "ibv_wr* API : ON" (else OFF: ibv_post_send).
    pub wr_api: bool,
    /// -e: the completion vector's name ("rxe0_comp0").
    pub events: Option<String>,
    /// Shown above 1.
    pub post_list: u32,
    pub recv_post_list: u32,
    /// "Dynamic" or the batch (bandwidth tests).
    pub cqe_batch: Option<String>,
}

/// The facts of perftest's header block, as the verbs family decided them for
/// this side (None: a line perftest does not print here).
#[derive(Clone, Debug, PartialEq)]
pub struct PerftestHeader {
    /// "RDMA_Write BW Test", "Send Bidirectional BW Test", ...
    pub title: String,
    pub device: String,
    pub qps: u32,
    pub transport: String,
    /// perftest's "Connection type": RC, UC or UD.
    pub connection: String,
    pub tx_depth: Option<u32>,
    pub rx_depth: Option<u32>,
    pub cq_mod: Option<u32>,
    pub mtu: u32,
    /// perftest's "Link type": "IB" or "Ethernet".
    pub link_type: String,
    /// The GID line's value (None: LID routing).
    pub gid: Option<String>,
    pub reads_or_inline: ReadsOrInline,
    /// "Ethernet" (TCP, as perftest says), "rdma_cm" or "MPI (4 ranks, 2 pairs)".
    pub exchange: String,
    /// -R: the QPs were connected through rdma_cm.
    pub rdma_cm_qps: bool,
    /// The ACK timeout exponent (-u).
    pub qp_timeout: u8,
    /// "100 Gb/sec (4X EDR)"; None where sysfs has no rate.
    pub port_rate: Option<String>,
    /// The clock and what the figures time: "TSC; latency = half the round trip".
    pub timing: String,
    /// One line per pair under mpirun.
    pub pairs: Vec<String>,
    pub warnings: Vec<String>,
    pub local: Connection,
    pub remote: Connection,
    pub columns: Columns,
    /// A #pair column: several pairs.
    pub labelled: bool,
    /// --data_validation: a last column counts the messages that arrived wrong.
    pub validation: bool,
    /// perftest's "NUMA node" line: the node this runs on and what was
    /// bound (None: not known, no line).
    pub numa_node: Option<String>,
    /// fabricbench's "Path" line: SL, P_Key index and the GRH's fields.
    pub path: String,
    pub post: PostLines,
}

/// The perftest table on `out`: the header at the start, a row per line of
/// each size, the closing rule at the end.
pub struct PerftestTable<W: Write> {
    out: W,
    header: PerftestHeader,
    /// --cpu_util, --report-both: columns after perftest's.
    extra: ExtraColumns,
}

impl<W: Write> PerftestTable<W> {
    pub fn new(out: W, header: PerftestHeader) -> Self {
        PerftestTable {
            out,
            header,
            extra: ExtraColumns::default(),
        }
    }

    /// The table with the columns of --cpu_util and --report-both.
    pub fn with_extra(self, extra: ExtraColumns) -> Self {
        PerftestTable { extra, ..self }
    }

    /// What was written (tests write to a Vec).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// The column titles line: perftest's, then the added columns, then #wrong
/// (`validation`).
pub fn column_titles(
    columns: Columns,
    labelled: bool,
    validation: bool,
    extra: ExtraColumns,
) -> String {
    let mut titles = table_header(columns, labelled);
    titles.push_str(&extra.titles());
    if validation {
        titles.push_str("   #wrong");
    }
    titles
}

impl<W: Write> Exporter<VerbsResult> for PerftestTable<W> {
    fn start(&mut self, run: &RunInfo) -> anyhow::Result<()> {
        let h = &self.header;
        let mut lines = header_block(h, &run.tool_version);
        lines.extend(connection_lines("local", &h.local));
        lines.extend(connection_lines("remote", &h.remote));
        lines.push(RESULT_LINE.to_string());
        lines.push(column_titles(
            h.columns,
            h.labelled,
            h.validation,
            self.extra,
        ));
        for line in lines {
            writeln!(self.out, "{line}")?;
        }
        Ok(())
    }

    fn record(&mut self, _run: &RunInfo, result: &VerbsResult) -> anyhow::Result<()> {
        for (i, line) in result.lines.iter().enumerate() {
            let mut row = table_row(line, self.header.columns.gbits());
            let spread = result
                .spread
                .as_ref()
                .and_then(|s| s.half_width_pct.get(i).copied().flatten());
            row.push_str(&self.extra.cells(line.direction, result.cpu_util, spread));
            if let Some(wrong) = line.wrong {
                row.push_str(&format!("\t{wrong}"));
            }
            writeln!(self.out, "{row}")?;
        }
        Ok(())
    }

    fn finish(&mut self, _run: &RunInfo, _summary: &Summary) -> anyhow::Result<()> {
        writeln!(self.out, "{RESULT_LINE}")?;
        Ok(())
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
pub fn table_header(columns: Columns, labelled: bool) -> String {
    let titles = match columns {
        Columns::Bandwidth { gbits: false } => " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]",
        Columns::Bandwidth { gbits: true } => " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
        Columns::Latency => " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ",
    };
    if labelled {
        format!(" #pair{titles}")
    } else {
        titles.to_string()
    }
}

/// A bandwidth line's figures as perftest shows them: BW in the table's unit
/// (no peak with -N: 0), MsgRate in Mpps, and `fine`: below 0.1 Gb/s perftest
/// prints 6 decimals (inc_accuracy) where it otherwise prints 2.
pub struct ShownBw {
    pub iterations: u64,
    pub peak: f64,
    pub average: f64,
    pub mpps: f64,
    pub fine: bool,
}

/// None for latency figures.
pub fn shown_bw(figures: &Figures, gbits: bool) -> Option<ShownBw> {
    let Figures::Bw {
        iterations,
        peak,
        average,
        msgs_per_s,
        ..
    } = figures
    else {
        return None;
    };
    let average = bw_unit(*average, gbits);
    Some(ShownBw {
        iterations: *iterations,
        peak: bw_unit(peak.unwrap_or(0.0), gbits),
        average,
        mpps: msgs_per_s / 1e6,
        fine: gbits && average < 0.1,
    })
}

/// One table row, in perftest's printf formats (REPORT_FMT, REPORT_FMT_EXT
/// below 0.1 Gb/s, REPORT_FMT_LAT).
pub fn table_row(line: &Line, gbits: bool) -> String {
    let size = line.size;
    let row = match &line.figures {
        Figures::Bw { .. } => {
            let b = shown_bw(&line.figures, gbits).expect("bandwidth figures");
            let (iterations, peak, average, mpps) = (b.iterations, b.peak, b.average, b.mpps);
            if b.fine {
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

/// perftest's header block, with fabricbench's additions at the end.
pub fn header_block(h: &PerftestHeader, tool_version: &str) -> Vec<String> {
    let mut out = vec![
        RESULT_LINE.to_string(),
        format!("                    {}", h.title),
    ];
    if let Some(events) = &h.post.events {
        out.push(format!(" Test with events. Using {events}"));
    }
    out.extend([
        format!(" Dual-port       : OFF\t\tDevice         : {}", h.device),
        format!(
            " Number of qps   : {}\t\tTransport type : {}",
            h.qps, h.transport
        ),
        format!(
            " Connection type : {}\t\tUsing SRQ      : OFF",
            h.connection
        ),
        // perftest 26.04 built with relaxed ordering and thread domains
        // prints both; neither is used here.
        " PCIe relax order: OFF\t\tLock-free      : OFF".to_string(),
        format!(
            " ibv_wr* API     : {}\t\tUsing Enhanced Reorder      : OFF",
            if h.post.wr_api { "ON" } else { "OFF" }
        ),
    ]);
    if let Some(tx) = h.tx_depth {
        out.push(format!(" TX depth        : {tx}"));
    }
    if h.post.post_list > 1 {
        out.push(format!(" Post List       : {}", h.post.post_list));
    }
    if h.post.recv_post_list > 1 {
        out.push(format!(" Recv Post List  : {}", h.post.recv_post_list));
    }
    if let Some(rx) = h.rx_depth {
        out.push(format!(" RX depth        : {rx}"));
    }
    if let Some(cq_mod) = h.cq_mod {
        out.push(format!(" CQ Moderation   : {cq_mod}"));
    }
    if let Some(batch) = &h.post.cqe_batch {
        out.push(format!(" CQE Poll Batch  : {batch}"));
    }
    out.push(format!(" Mtu             : {}[B]", h.mtu));
    out.push(format!(" Link type       : {}", h.link_type));
    if let Some(gid) = &h.gid {
        out.push(format!(" GID index       : {gid}"));
    }
    out.push(match h.reads_or_inline {
        ReadsOrInline::OutstandReads(n) => format!(" Outstand reads  : {n}"),
        ReadsOrInline::MaxInline(n) => format!(" Max inline data : {n}[B]"),
    });
    let cm = if h.rdma_cm_qps { "ON" } else { "OFF" };
    out.push(format!(" rdma_cm QPs\t : {cm}"));
    out.push(format!(" Data ex. method : {}", h.exchange));
    if let Some(numa) = &h.numa_node {
        out.push(format!(" NUMA node       : {numa}"));
    }
    // fabricbench's lines, after perftest's.
    if h.validation {
        out.push(
            " Data validation : ON (per-iteration pattern, checked by the receiver)".to_string(),
        );
    }
    out.push(format!(
        " QP timeout      : {} (ACK timeout 4.096 us * 2^{} = {})",
        h.qp_timeout,
        h.qp_timeout,
        ack_timeout(h.qp_timeout)
    ));
    out.push(format!(
        " Port rate       : {}",
        h.port_rate.as_deref().unwrap_or("unknown (no sysfs rate)")
    ));
    out.push(format!(" Path            : {}", h.path));
    out.push(format!(" Timing          : {}", h.timing));
    out.push(format!(
        " Tool            : fabricbench {tool_version} (perftest-compatible output)"
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
pub fn connection_lines(side: &str, c: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    for q in &c.qps {
        out.push(format!(
            " {side} address: LID {:#06x} QPN {:#06x} PSN {:#08x} RKey {:#08x} VAddr {:#016x}",
            c.lid, q.qpn, q.psn, q.rkey, q.vaddr
        ));
        if let Some(gid) = &c.gid {
            out.push(format!(" GID: {gid}"));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::verbs::LatStats;
    use crate::stats::empty_histogram;

    fn bw_line(label: Option<&str>) -> Line {
        crate::report::verbs::tests::bw_line(label, None)
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
            table_header(Columns::Bandwidth { gbits: false }, false),
            " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
        );
        assert!(table_header(Columns::Bandwidth { gbits: true }, true).starts_with(" #pair #bytes"));
    }

    #[test]
    fn slow_gbit_rows_get_more_decimals_and_no_peak_prints_zero() {
        // 1000 messages of 2 B in 1 s.
        let line = Line {
            figures: Figures::Bw {
                iterations: 1000,
                peak: None,
                average: 2000.0,
                msgs_per_s: 1000.0,
                histogram: empty_histogram(),
            },
            size: 2,
            ..bw_line(None)
        };
        // 2000 B/s = 0.000016 Gb/s: perftest's REPORT_FMT_EXT.
        assert_eq!(
            table_row(&line, true),
            " 2          1000           0.000000            0.000016            0.001000"
        );
    }

    pub(crate) fn lat_line(label: Option<&str>) -> Line {
        Line {
            size: 2,
            label: label.map(str::to_string),
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
            wrong: None,
            direction: None,
        }
    }

    #[test]
    fn latency_rows_in_perftest_format() {
        assert_eq!(
            table_row(&lat_line(None), false),
            " 2       1000          1.50           9.25         2.00     \t       2.25        \t0.50   \t\t5.00    \t\t9.00   "
        );
        assert_eq!(
            table_row(&lat_line(Some("all")), false),
            " all   2       1000          1.50           9.25         2.00     \t       2.25        \t0.50   \t\t5.00    \t\t9.00   "
        );
    }

    pub(crate) fn header() -> PerftestHeader {
        PerftestHeader {
            title: "RDMA_Write BW Test".into(),
            device: "rxe0".into(),
            qps: 1,
            transport: "IB".into(),
            connection: "RC".into(),
            tx_depth: Some(128),
            rx_depth: None,
            cq_mod: Some(1),
            mtu: 4096,
            link_type: "Ethernet".into(),
            gid: Some(
                "1 (RoCE v2 ::ffff:127.0.0.1 on lo, chosen automatically; -x overrides)".into(),
            ),
            reads_or_inline: ReadsOrInline::MaxInline(0),
            exchange: "Ethernet".into(),
            rdma_cm_qps: false,
            qp_timeout: 18,
            port_rate: None,
            timing: "TSC; BW from first post to last completion, peak over any window".into(),
            pairs: vec![],
            warnings: vec!["w".into()],
            local: Connection {
                lid: 0,
                gid: Some("::ffff:127.0.0.1".into()),
                qps: vec![QpAddress {
                    qpn: 0x12,
                    psn: 0x286f0b,
                    rkey: 0x328,
                    vaddr: 0x5636d2394000,
                }],
            },
            remote: Connection {
                lid: 7,
                gid: None,
                qps: vec![QpAddress {
                    qpn: 0x13,
                    psn: 1,
                    rkey: 2,
                    vaddr: 3,
                }],
            },
            columns: Columns::Bandwidth { gbits: false },
            validation: false,
            labelled: false,
            numa_node: Some("0 (not bound: rxe0 has no numa_node)".into()),
            path: "SL 0, P_Key index 0".into(),
            post: PostLines::default(),
        }
    }

    #[test]
    fn the_table_is_header_rows_and_the_closing_rule() {
        let mut table = PerftestTable::new(Vec::new(), header());
        let run = RunInfo {
            tool_version: "9.9".into(),
            ..RunInfo::default()
        };
        table.start(&run).unwrap();
        let result = VerbsResult {
            collective: "ib_write".into(),
            bidirectional: false,
            timestamp: String::new(),
            lines: vec![bw_line(None)],
            counters: None,
            cpu_util: None,
            round: 1,
            spread: None,
        };
        table.record(&run, &result).unwrap();
        table.finish(&run, &Summary::default()).unwrap();
        let text = String::from_utf8(table.out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], RESULT_LINE);
        assert!(lines.contains(&" Port rate       : unknown (no sysfs rate)"));
        assert!(lines.contains(&" Tool            : fabricbench 9.9 (perftest-compatible output)"));
        assert!(lines.contains(&" WARNING: w"));
        let n = lines.len();
        assert_eq!(
            lines[n - 8..],
            [
                RESULT_LINE,
                " local address: LID 0x0000 QPN 0x0012 PSN 0x286f0b RKey 0x000328 VAddr 0x005636d2394000",
                " GID: ::ffff:127.0.0.1",
                " remote address: LID 0x0007 QPN 0x0013 PSN 0x000001 RKey 0x000002 VAddr 0x00000000000003",
                RESULT_LINE,
                " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]",
                " 65536      5000             3750.00            3125.00\t\t     0.050000",
                RESULT_LINE,
            ]
        );
    }

    #[test]
    fn perftest_26_04s_lines_in_its_order_then_ours() {
        let lines = header_block(&header(), "9.9");
        let at = |prefix: &str| {
            lines
                .iter()
                .position(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix:?} in {lines:#?}"))
        };
        assert_eq!(lines[4], " Connection type : RC\t\tUsing SRQ      : OFF");
        assert_eq!(lines[5], " PCIe relax order: OFF\t\tLock-free      : OFF");
        assert_eq!(
            lines[6],
            " ibv_wr* API     : OFF\t\tUsing Enhanced Reorder      : OFF"
        );
        let order = [
            " TX depth",
            " CQ Moderation",
            " Mtu",
            " Link type",
            " GID index",
            " Max inline data",
            " rdma_cm QPs",
            " Data ex. method",
            " NUMA node       : 0 (not bound: rxe0 has no numa_node)",
            " QP timeout",
            " Port rate",
            " Path            : SL 0, P_Key index 0",
            " Timing",
            " Tool",
        ];
        let positions: Vec<usize> = order.iter().map(|p| at(p)).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{lines:#?}");
        let no_numa = PerftestHeader {
            numa_node: None,
            ..header()
        };
        assert!(!header_block(&no_numa, "9.9")
            .iter()
            .any(|l| l.starts_with(" NUMA node")));
    }

    #[test]
    fn the_post_lines_sit_where_perftest_prints_them() {
        let mut h = header();
        h.post = PostLines {
            wr_api: true,
            events: Some("rxe0_comp0".into()),
            post_list: 8,
            recv_post_list: 4,
            cqe_batch: Some("Dynamic".into()),
        };
        let lines = header_block(&h, "9.9");
        let at = |l: &str| {
            lines
                .iter()
                .position(|x| x == l)
                .unwrap_or_else(|| panic!("{l:?} missing in {lines:#?}"))
        };
        assert_eq!(at(" Test with events. Using rxe0_comp0"), 2);
        assert!(
            at(" ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF")
                < at(" TX depth        : 128")
        );
        assert_eq!(at(" Post List       : 8"), at(" TX depth        : 128") + 1);
        assert_eq!(at(" Recv Post List  : 4"), at(" Post List       : 8") + 1);
        assert_eq!(
            at(" CQE Poll Batch  : Dynamic"),
            at(" CQ Moderation   : 1") + 1
        );
        // Without them: OFF, and none of the optional lines.
        let plain = header_block(&header(), "9.9");
        assert!(plain
            .contains(&" ibv_wr* API     : OFF\t\tUsing Enhanced Reorder      : OFF".to_string()));
        assert!(!plain
            .iter()
            .any(|l| l.contains("Post List") || l.contains("events")));
    }

    #[test]
    fn ack_timeouts() {
        assert_eq!(ack_timeout(14), "67.1 ms");
        assert_eq!(ack_timeout(18), "1.07 s");
        assert_eq!(ack_timeout(0), "infinite");
    }
}
